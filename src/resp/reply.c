/* SPDX-License-Identifier: BSD-3-Clause */
/* reply.c: the public accessors of emq_reply, and freeing a reply tree.
 *
 * Accessors are total: a NULL reply or a wrong type gives a neutral value
 * (NULL, 0, ""), never a crash, so callers can chain them over replies of
 * a shape they have not checked yet.
 */
#include "reply.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

emq_reply_type emq_reply_kind(const emq_reply *r) {
    return r ? (emq_reply_type)r->type : EMQ_REPLY_NULL;
}

const char *emq_reply_str(const emq_reply *r, size_t *len) {
    if (r == NULL || r->str == NULL) {
        if (len)
            *len = 0;
        return NULL;
    }
    if (len)
        *len = r->len;
    return r->str;
}

long long emq_reply_integer(const emq_reply *r) {
    if (r && (r->type == EMQ_REPLY_INTEGER || r->type == EMQ_REPLY_BOOL))
        return r->u.integer;
    return 0;
}

double emq_reply_double(const emq_reply *r) {
    return r && r->type == EMQ_REPLY_DOUBLE ? r->u.dval : 0.0;
}

static int aggregate(const emq_reply *r) {
    return r && (r->type == EMQ_REPLY_ARRAY || r->type == EMQ_REPLY_MAP ||
                 r->type == EMQ_REPLY_SET || r->type == EMQ_REPLY_PUSH);
}

size_t emq_reply_len(const emq_reply *r) { return aggregate(r) ? r->len : 0; }

const emq_reply *emq_reply_at(const emq_reply *r, size_t i) {
    return aggregate(r) && i < r->len ? &r->u.element[i] : NULL;
}

const char *emq_reply_format(const emq_reply *r) { return r ? r->format : ""; }

int emq__reply_field_views(const emq_reply *arr, emq_field *out, size_t n) {
    if (n == 0)
        return 0;
    if (!aggregate(arr) || arr->len / 2 < n)
        return -1;
    const struct emq_reply *e = arr->u.element;
    for (size_t i = 0; i < n; i++, e += 2) {
        if (e[0].type != EMQ_REPLY_STRING || e[1].type != EMQ_REPLY_STRING)
            return -1;
        out[i].name = e[0].str ? e[0].str : "";
        out[i].name_len = e[0].len;
        out[i].value = e[1].str ? e[1].str : "";
        out[i].value_len = e[1].len;
    }
    return 0;
}

const emq_reply *emq_reply_attribute(const emq_reply *r) {
    return r ? r->attribute : NULL;
}

int emq_reply_is_error(const emq_reply *r, const char *prefix) {
    if (r == NULL || r->type != EMQ_REPLY_ERROR)
        return 0;
    if (prefix == NULL || *prefix == '\0')
        return 1;
    size_t n = strlen(prefix);
    if (r->len < n || memcmp(r->str, prefix, n) != 0)
        return 0;
    return r->len == n || r->str[n] == ' ';
}

int emq__reply_mentions(const emq_reply *r, const char *word) {
    if (emq_reply_kind(r) != EMQ_REPLY_ERROR)
        return 0;
    if (emq_reply_is_error(r, word))
        return 1;
    size_t len;
    const char *text = emq_reply_str(r, &len);
    size_t wl = strlen(word);
    for (size_t i = 1; text != NULL && i + wl <= len; i++)
        if ((text[i - 1] == ' ' || text[i - 1] == '-') &&
            memcmp(text + i, word, wl) == 0 &&
            (i + wl == len || text[i + wl] == ' ' || text[i + wl] == ':'))
            return 1;
    return 0;
}

void emq__reply_code_copy(emq_error *err, const emq_reply *r) {
    if (err == NULL)
        return;
    err->reply_code[0] = '\0';
    if (r == NULL || r->type != EMQ_REPLY_ERROR)
        return;
    size_t n = 0;
    while (n < r->len && n + 1 < sizeof err->reply_code && r->str[n] != ' ')
        n++;
    if (n < r->len && r->str[n] != ' ')
        return; /* a first word too long to be a code */
    memcpy(err->reply_code, r->str, n);
    err->reply_code[n] = '\0';
}

static emq_status reply_error_vset(emq_error *err, emq_status code,
                                   int retriable, const emq_reply *r,
                                   const char *fmt, va_list ap) {
    char what[EMQ_ERROR_MESSAGE_MAX], shown[200];
    vsnprintf(what, sizeof what, fmt, ap);
    emq__error_set(err, code, retriable, "%.200s: %s", what,
                   emq__reply_text(r, shown, sizeof shown));
    emq__reply_code_copy(err, r);
    return code;
}

emq_status emq__reply_error_as(emq_error *err, emq_status code, int retriable,
                               const emq_reply *r, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    emq_status st = reply_error_vset(err, code, retriable, r, fmt, ap);
    va_end(ap);
    return st;
}

emq_status emq__reply_error_set(emq_error *err, const emq_reply *r,
                                const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    emq_status st = reply_error_vset(err, EMQ_ESERVER, 0, r, fmt, ap);
    va_end(ap);
    return st;
}

int emq__reply_transient(const emq_reply *r) {
    static const char *const words[] = {"LOADING",     "BUSY",       "TRYAGAIN",
                                        "CLUSTERDOWN", "MASTERDOWN", "MISCONF",
                                        "NOREPLICAS"};
    for (size_t i = 0; i < sizeof words / sizeof words[0]; i++)
        if (emq__reply_mentions(r, words[i]))
            return 1;
    return 0;
}

char *emq__reply_text(const emq_reply *r, char *buf, size_t size) {
    size_t n;
    const char *text = emq_reply_str(r, &n);
    if (text)
        return emq__printable(buf, size, text, n);
    snprintf(buf, size, "(reply of type %d)", (int)emq_reply_kind(r));
    return buf;
}

void emq_reply_free(emq_reply *r) {
    if (r == NULL)
        return;
    resp_block *block = (resp_block *)((char *)r - offsetof(resp_block, nodes));
    emq__resp_chunk_release(block->chunk);
    emq__free(block);
}
