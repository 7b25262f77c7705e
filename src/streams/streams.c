/* SPDX-License-Identifier: BSD-3-Clause */
/* streams.c: the group door, XINFO fields, XPENDING rows and reply shapes,
 * as producer, consumer and admin all read them. */
#include "streams.h"

#include <string.h>

emq_status emq__reply_bad_shape(emq_error *err, const char *what) {
    return emq__error_set(err, EMQ_EPROTO, 0,
                          "unexpected reply shape from the server: %s", what);
}

const emq_reply *emq__stream_field(const emq_reply *r, const char *name) {
    emq_reply_type kind = emq_reply_kind(r);
    if (kind != EMQ_REPLY_ARRAY && kind != EMQ_REPLY_MAP)
        return NULL;
    size_t want = strlen(name);
    size_t n = emq_reply_len(r);
    for (size_t i = 0; i + 1 < n; i += 2) {
        size_t len;
        const char *key = emq_reply_str(emq_reply_at(r, i), &len);
        if (key != NULL && len == want && memcmp(key, name, len) == 0)
            return emq_reply_at(r, i + 1);
    }
    return NULL;
}

void emq__group_create_argv(const char *argv[6], const char *stream,
                            const char *group, const char *start_id) {
    argv[0] = "XGROUP";
    argv[1] = "CREATE";
    argv[2] = stream;
    argv[3] = group;
    argv[4] = start_id;
    argv[5] = "MKSTREAM";
}

emq_status emq__group_create_reply(const emq_reply *r, const char *stream,
                                   const char *group, int *created,
                                   emq_error *err) {
    if (created)
        *created = 0;
    if (emq_reply_kind(r) == EMQ_REPLY_ERROR &&
        !emq_reply_is_error(r, "BUSYGROUP"))
        return emq__reply_error_set(
            err, r, "creating group '%s' on '%s' failed", group, stream);
    if (created)
        *created = emq_reply_kind(r) != EMQ_REPLY_ERROR;
    return EMQ_OK;
}

int64_t emq__stream_number(const emq_reply *r, int64_t dflt) {
    if (emq_reply_kind(r) == EMQ_REPLY_INTEGER)
        return (int64_t)emq_reply_integer(r);
    size_t len;
    const char *text = emq_reply_str(r, &len);
    if (emq_reply_kind(r) != EMQ_REPLY_STRING || text == NULL || len == 0 ||
        len > 18)
        return dflt;
    int64_t v = 0;
    for (size_t i = 0; i < len; i++) {
        if (text[i] < '0' || text[i] > '9')
            return dflt;
        v = v * 10 + (text[i] - '0');
    }
    return v;
}

int emq__pending_row_parse(const emq_reply *row, emq__pending_row *out) {
    memset(out, 0, sizeof *out);
    out->idle_ms = -1;
    if (emq_reply_kind(row) != EMQ_REPLY_ARRAY || emq_reply_len(row) < 4)
        return -1;
    out->id = emq_reply_at(row, 0);
    out->consumer = emq_reply_str(emq_reply_at(row, 1), &out->consumer_len);
    if (emq_reply_kind(out->id) != EMQ_REPLY_STRING || out->consumer == NULL)
        return -1;
    out->idle_ms = emq__stream_number(emq_reply_at(row, 2), -1);
    int64_t n = emq__stream_number(emq_reply_at(row, 3), 0);
    out->deliveries = n > 0 ? (uint64_t)n : 0;
    return 0;
}

int64_t emq__limit_value(const emq_reply *r) {
    size_t len = 0;
    const char *text = emq_reply_str(r, &len);
    if (text == NULL || len == 0 || len > EMQ_LIMIT_DIGITS_MAX)
        return 0;
    for (size_t i = 0; i < len; i++)
        if (text[i] < '0' || text[i] > '9')
            return 0;
    return emq__stream_number(r, 0);
}

int emq__limit_ignored(const emq_reply *r) {
    size_t len = 0;
    const char *text = emq_reply_str(r, &len);
    return text != NULL && len > 0 && emq__limit_value(r) == 0 &&
           !(len == 1 && text[0] == '0');
}
