/* SPDX-License-Identifier: BSD-3-Clause */
/* admin.c: the admin handle and the helpers its verbs share.
 *
 * Every verb works on one queue; a topic's handle (partitions > 1) holds
 * one handle per partition, and verbs.c runs the verbs over them. */
#include "admin.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The session's log: which queue's admin says it. */
static void session_log(void *ctx, int level, const char *message) {
    const emq_admin_t *a = ctx;
    emq__conf_log(a->conf, (emq_log_level)level, "admin of '%s': %s",
                  a->keys.stream, message);
}

emq_status emq__admin_open(const emq_conf_t *conf, emq_admin_t **out,
                           emq_error *err) {
    *out = NULL;
    if (conf == NULL)
        return emq__error_set(err, EMQ_EINVAL, 0,
                              "admin needs a configuration");
    emq_admin_t *a = emq__calloc(1, sizeof *a);
    if (a == NULL)
        return emq__oom(err);
    emq_status st = EMQ_OK;
    a->conf = emq_conf_dup(conf);
    if (a->conf == NULL)
        st = emq__oom(err);
    else if (emq__topic_is(conf))
        st = emq__topic_check(conf, err);
    if (st == EMQ_OK)
        st = emq__keys_resolve(emq__cfg_queue(conf), emq__cfg_stream(conf),
                               &a->keys, err);
    if (st == EMQ_OK && !emq__topic_is(conf)) {
        emq__session_opts o = {
            .what = "admin",
            .max_attempts = emq__cfg_max_attempts(a->conf),
            /* The first connection is one attempt: a wrong URL is said
             * at once. Later ones are bounded by the attempts. */
            .not_now_ms = EMQ_ADMIN_NOT_NOW_MS,
            .log = session_log,
            .log_ctx = a,
        };
        st = emq__session_open(&a->session, a->conf, a->keys.stream, &o, err);
        a->has_session = st == EMQ_OK;
    }
    if (st != EMQ_OK) {
        emq_admin_destroy(a);
        return st;
    }
    *out = a;
    return EMQ_OK;
}

void emq_admin_destroy(emq_admin_t *a) {
    if (a == NULL)
        return;
    for (size_t i = 0; i < a->nparts; i++)
        emq_admin_destroy(a->parts[i]);
    emq__free(a->parts);
    if (a->has_session)
        emq__session_close(&a->session);
    emq__keys_free(&a->keys);
    emq_conf_destroy(a->conf);
    emq__free(a);
}

void emq_free_array(void *array) { emq__free(array); }

emq_status emq__admin_ready(emq_admin_t *a, emq_error *err) {
    if (!a->has_session)
        return emq__error_set(err, EMQ_EINVAL, 0,
                              "a command needs the handle of a queue or of "
                              "one partition (emq_admin_partition), not of a "
                              "whole topic");
    return emq__session_ready(&a->session, err);
}

emq_status emq__admin_send(emq_admin_t *a, int argc, const char *const *argv,
                           const size_t *argvlen, emq_reply **reply,
                           emq_error *err) {
    *reply = NULL;
    emq_status st = emq__admin_ready(a, err);
    if (st == EMQ_OK)
        st = emq__session_call(&a->session, 0, argc, argv, argvlen, reply, err);
    return st;
}

emq_status emq__admin_script_head(emq_admin_t *a, emq__script_id id,
                                  const char *words[2], emq_error *err) {
    emq_status st = emq__admin_ready(a, err);
    if (st == EMQ_OK)
        emq__script_head(id, emq__session_functions(&a->session), words);
    return st;
}

emq_status emq__admin_call(emq_admin_t *a, const char *what, int argc,
                           const char *const *argv, const size_t *argvlen,
                           emq_reply **reply, emq_error *err) {
    emq_status st = emq__admin_send(a, argc, argv, argvlen, reply, err);
    if (st != EMQ_OK)
        return st;
    if (emq_reply_kind(*reply) == EMQ_REPLY_ERROR) {
        st = emq__reply_error_set(err, *reply, "%s failed", what);
        emq_reply_free(*reply);
        *reply = NULL;
    }
    return st;
}

emq_status emq__admin_pipeline(emq_admin_t *a, size_t n,
                               const emq__session_cmd *cmds,
                               emq_reply **replies, emq_error *err) {
    for (size_t i = 0; i < n; i++)
        replies[i] = NULL;
    emq_status st = emq__admin_ready(a, err);
    if (st != EMQ_OK)
        return st;
    return emq__session_pipeline(&a->session, 0, n, cmds, replies, err);
}

/* ---- shared reply and counting helpers (inspect.c, replay.c) ------------- */

int emq__admin_id(const emq_reply *r, emq_id *out, emq__stream_id *sid) {
    size_t len;
    const char *text = emq_reply_str(r, &len);
    emq_reply_type kind = emq_reply_kind(r);
    if (text == NULL ||
        (kind != EMQ_REPLY_STRING && kind != EMQ_REPLY_STATUS) ||
        len >= EMQ_ID_MAX || emq__stream_id_parse(text, len, sid) != 0)
        return -1;
    if (out) {
        memcpy(out->str, text, len);
        out->str[len] = '\0';
    }
    return 0;
}

/* The ID of a stream entry reply [id, fields], or -1. */
static int entry_id(const emq_reply *entry, emq__stream_id *sid) {
    if (emq_reply_kind(entry) != EMQ_REPLY_ARRAY || emq_reply_len(entry) < 1)
        return -1;
    return emq__admin_id(emq_reply_at(entry, 0), NULL, sid);
}

emq_status emq__admin_extent_parse(const emq_reply *xinfo,
                                   emq__admin_extent *ext, emq_error *err) {
    memset(ext, 0, sizeof *ext);
    const emq_reply *length = emq__stream_field(xinfo, "length");
    if (emq_reply_kind(length) != EMQ_REPLY_INTEGER ||
        emq_reply_integer(length) < 0)
        return emq__error_set(err, EMQ_EPROTO, 0,
                              "unexpected reply shape from the server: "
                              "XINFO STREAM has no length");
    ext->length = (uint64_t)emq_reply_integer(length);
    if (ext->length > 0 &&
        entry_id(emq__stream_field(xinfo, "first-entry"), &ext->first) == 0 &&
        entry_id(emq__stream_field(xinfo, "last-entry"), &ext->last) == 0)
        ext->has_entries = 1;
    return EMQ_OK;
}

emq_status emq__admin_count_after(emq_admin_t *a, const emq__admin_extent *ext,
                                  emq__stream_id after, uint64_t *n,
                                  emq_error *err) {
    return emq__admin_count_after_at_most(a, ext, after, UINT64_MAX, n, err);
}

emq_status emq__admin_count_after_at_most(emq_admin_t *a,
                                          const emq__admin_extent *ext,
                                          emq__stream_id after, uint64_t most,
                                          uint64_t *n, emq_error *err) {
    *n = 0;
    if (ext != NULL) {
        if (ext->length == 0)
            return EMQ_OK;
        if (ext->has_entries) {
            if (emq__stream_id_cmp(after, ext->first) < 0) {
                *n = ext->length;
                return EMQ_OK;
            }
            if (emq__stream_id_cmp(after, ext->last) >= 0)
                return EMQ_OK;
        }
    }
    char page[24];
    snprintf(page, sizeof page, "%d", EMQ_ADMIN_PAGE);
    emq__stream_id cursor = after;
    uint64_t count = 0;
    for (;;) {
        /* "(" makes the start exclusive (XRANGE, Redis 6.2+). */
        char start[EMQ_ID_MAX + 2];
        snprintf(start, sizeof start, "(%llu-%llu",
                 (unsigned long long)cursor.ms, (unsigned long long)cursor.seq);
        const char *argv[] = {"XRANGE", a->keys.stream, start,
                              "+",      "COUNT",        page};
        emq_reply *reply;
        emq_status st = emq__admin_call(a, "counting entries (XRANGE)", 6, argv,
                                        NULL, &reply, err);
        if (st != EMQ_OK)
            return st;
        size_t got = emq_reply_len(reply);
        if (emq_reply_kind(reply) != EMQ_REPLY_ARRAY ||
            (got > 0 && entry_id(emq_reply_at(reply, got - 1), &cursor) != 0)) {
            emq_reply_free(reply);
            return emq__error_set(err, EMQ_EPROTO, 0,
                                  "unexpected reply shape from the server: "
                                  "XRANGE is not a list of entries");
        }
        emq_reply_free(reply);
        count += got;
        if (got < EMQ_ADMIN_PAGE || count >= most)
            break;
        if (cursor.ms == UINT64_MAX && cursor.seq == UINT64_MAX)
            break; /* the largest ID: nothing can follow it */
    }
    *n = count;
    return EMQ_OK;
}

emq_status emq__admin_check_group(const char *group, emq_error *err) {
    if (group == NULL || *group == '\0')
        return emq__error_set(err, EMQ_EINVAL, 0, "a group name is required");
    return EMQ_OK;
}

/* qsort over emq__admin_order: by ID, then partition. */
static int order_cmp(const void *x, const void *y) {
    const emq__admin_order *a = x, *b = y;
    int c = emq__stream_id_cmp(a->id, b->id);
    if (c != 0)
        return c;
    return (a->partition > b->partition) - (a->partition < b->partition);
}

void emq__admin_by_id(emq__admin_order *order, size_t n) {
    /* IDs are times, so across partitions this is oldest first (as far
     * as the partitions' clocks agree); a tie goes to the lower partition. */
    qsort(order, n, sizeof *order, order_cmp);
}
