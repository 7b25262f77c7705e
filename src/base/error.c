/* SPDX-License-Identifier: BSD-3-Clause */
/* error.c: status names, descriptions and the emq_error helpers.
 *
 * Messages are one sentence for a human. Text from outside (server replies,
 * user input) is passed through emq__printable before it reaches a message.
 */
#include "base.h"

#include <stdio.h>
#include <string.h>

static const struct {
    emq_status status;
    const char *name;
    const char *text;
} statuses[] = {
#define EMQ_STATUS_ROW(name, value, text) {name, #name, text},
    EMQ_STATUSES(EMQ_STATUS_ROW)
#undef EMQ_STATUS_ROW
};

const char *emq_strerror(emq_status status) {
    for (size_t i = 0; i < sizeof statuses / sizeof statuses[0]; i++)
        if (statuses[i].status == status)
            return statuses[i].text;
    return "unknown status";
}

const char *emq_status_name(emq_status status) {
    for (size_t i = 0; i < sizeof statuses / sizeof statuses[0]; i++)
        if (statuses[i].status == status)
            return statuses[i].name;
    return "EMQ_UNKNOWN";
}

/* The struct's reserved room is 0 whenever the library has written an
 * error: a member a later release takes from it reads as its default in
 * a program built before (the ABI policy of echomq.h). */
static void clear_room(emq_error *err) {
    err->reserved32 = 0;
    memset(err->reserved, 0, sizeof err->reserved);
}

emq_status emq__error_vset(emq_error *err, emq_status code, int retriable,
                           const char *fmt, va_list ap) {
    if (err) {
        err->code = code;
        err->retriable = retriable;
        vsnprintf(err->message, sizeof err->message, fmt, ap);
        err->reply_code[0] = '\0';
        err->fatal = 0;
        clear_room(err);
    }
    return code;
}

emq_status emq__error_set(emq_error *err, emq_status code, int retriable,
                          const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    emq__error_vset(err, code, retriable, fmt, ap);
    va_end(ap);
    return code;
}

emq_status emq__oom(emq_error *err) {
    return emq__error_set(err, EMQ_ENOMEM, 0, "out of memory");
}

void emq__error_clear(emq_error *err) {
    if (err) {
        err->code = EMQ_OK;
        err->retriable = 0;
        err->message[0] = '\0';
        err->reply_code[0] = '\0';
        err->fatal = 0;
        clear_room(err);
    }
}

void emq__error_prefix(emq_error *err, const char *fmt, ...) {
    if (err == NULL)
        return;
    char prefix[EMQ_ERROR_MESSAGE_MAX];
    char old[EMQ_ERROR_MESSAGE_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    memcpy(old, err->message, sizeof old);
    /* Assemble by hand: snprintf of two full buffers trips
     * -Wformat-truncation, and truncation is what we want here. */
    size_t n = strnlen(prefix, sizeof prefix);
    size_t cap = sizeof err->message - 1;
    if (n > cap)
        n = cap;
    memcpy(err->message, prefix, n);
    if (n + 2 <= cap) {
        memcpy(err->message + n, ": ", 2);
        n += 2;
    }
    size_t rest = strnlen(old, sizeof old);
    if (rest > cap - n)
        rest = cap - n;
    memcpy(err->message + n, old, rest);
    err->message[n + rest] = '\0';
}

char *emq__printable(char *out, size_t size, const char *text, size_t len) {
    if (size == 0)
        return out;
    size_t n = len < size - 1 ? len : size - 1;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)text[i];
        out[i] = (c >= 0x20 && c < 0x7f) ? (char)c : '?';
    }
    out[n] = '\0';
    return out;
}

void emq__hide_controls(char *text) {
    for (unsigned char *p = (unsigned char *)text; *p; p++) {
        if (*p < 0x20 || *p == 0x7f)
            *p = '?';
        else if (*p == 0xc2 && p[1] >= 0x80 && p[1] <= 0x9f)
            p[0] = p[1] = '?'; /* a C1 control (U+0080-U+009F) */
    }
}
