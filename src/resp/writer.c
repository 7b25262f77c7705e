/* SPDX-License-Identifier: BSD-3-Clause */
/* writer.c: the command encoder (argv of byte strings to RESP).
 *
 * A command is an array of bulk strings: "*<argc>\r\n" then, per argument,
 * "$<len>\r\n<bytes>\r\n". The exact size is computed first so the output
 * buffer grows at most once per command and is left unchanged on failure.
 */
#include "resp.h"

#include <string.h>

/* Decimal digits of v. */
static size_t digits(size_t v) {
    size_t n = 1;
    while (v >= 10) {
        v /= 10;
        n++;
    }
    return n;
}

/* Writes v in decimal at p; returns the byte after it. */
static char *put_decimal(char *p, size_t v) {
    size_t n = digits(v);
    for (size_t i = n; i > 0; i--) {
        p[i - 1] = (char)('0' + v % 10);
        v /= 10;
    }
    return p + n;
}

static size_t arg_len(const char *const *argv, const size_t *argvlen, int i) {
    return argvlen ? argvlen[i] : strlen(argv[i]);
}

size_t emq__resp_encoded_len(int argc, const char *const *argv,
                             const size_t *argvlen) {
    size_t total = 1 + digits((size_t)argc) + 2;
    for (int i = 0; i < argc; i++) {
        size_t n = arg_len(argv, argvlen, i);
        total += 1 + digits(n) + 2 + n + 2;
    }
    return total;
}

emq_status emq__resp_encode(emq__buf *out, int argc, const char *const *argv,
                            const size_t *argvlen, emq_error *err) {
    if (argc < 1 || argv == NULL)
        return emq__error_set(err, EMQ_EINVAL, 0,
                              "a command needs at least one argument");
    for (int i = 0; i < argc; i++)
        if (argv[i] == NULL)
            return emq__error_set(err, EMQ_EINVAL, 0,
                                  "command argument %d is NULL", i);
    size_t total = emq__resp_encoded_len(argc, argv, argvlen);
    emq_status st = emq__buf_reserve(out, total, err);
    if (st != EMQ_OK)
        return st;
    char *p = out->data + out->len;
    *p++ = '*';
    p = put_decimal(p, (size_t)argc);
    *p++ = '\r';
    *p++ = '\n';
    for (int i = 0; i < argc; i++) {
        size_t n = arg_len(argv, argvlen, i);
        *p++ = '$';
        p = put_decimal(p, n);
        *p++ = '\r';
        *p++ = '\n';
        if (n)
            memcpy(p, argv[i], n);
        p += n;
        *p++ = '\r';
        *p++ = '\n';
    }
    out->len += total;
    return EMQ_OK;
}
