/* SPDX-License-Identifier: BSD-3-Clause */
/* scan.c: the queues on a server or a cluster.
 *
 * SCAN MATCH emq:{PATTERN} TYPE stream on every master (a cluster's keys
 * are spread over them), keeping the keys that are exactly a queue's
 * stream ("emq:{NAME}", not its dead letters "emq:{NAME}:dead"); then
 * SCAN MATCH emq:{PATTERN}:delayed and :held TYPE zset, so a queue whose
 * entries all wait delayed or held by priority (no stream yet) is listed
 * too. Bounded: at most
 * EMQ_SCAN_ROUNDS calls per kind and master, and max names.
 */
#include "admin.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* SCAN calls (COUNT 1000 each) per master before giving up. */
#define EMQ_SCAN_ROUNDS 100000
/* The default bound on the names listed. */
#define EMQ_SCAN_MAX_DEFAULT 10000

/* The keys that name a queue: its stream, its delayed entries. */
static const struct scan_kind {
    const char *type;   /* SCAN's TYPE */
    const char *suffix; /* after "emq:{NAME}" */
} scan_kinds[] = {{"stream", ""}, {"zset", ":delayed"}, {"zset", ":held"}};

typedef struct scan_ctx {
    const char *glob;
    const struct scan_kind *kind; /* the one being scanned */
    size_t max;                   /* names asked for at most */
    char **names;
    size_t n;
} scan_ctx;

/* The queue name of a key "emq:{NAME}<suffix>" (emq__alloc'd), or
 * NULL. */
static char *queue_of(const char *key, size_t len, const char *suffix) {
    size_t slen = strlen(suffix);
    if (len < 7 + slen || strncmp(key, "emq:{", 5) != 0 ||
        memcmp(key + len - slen, suffix, slen) != 0)
        return NULL;
    len -= slen;
    if (key[len - 1] != '}')
        return NULL;
    const char *name = key + 5;
    size_t n = len - 6;
    if (memchr(name, '}', n) || memchr(name, '{', n))
        return NULL;
    char *out = emq__alloc(n + 1);
    if (out) {
        memcpy(out, name, n);
        out[n] = '\0';
    }
    return out;
}

static emq_status too_many(const scan_ctx *t, emq_error *err) {
    return emq__error_set(err, EMQ_ELIMIT, 0,
                          "more than %zu queues match: narrow the pattern",
                          t->max);
}

/* Adds the queues of one SCAN page (keys) to t. */
static emq_status take_keys(scan_ctx *t, const emq_reply *keys,
                            emq_error *err) {
    for (size_t i = 0; i < emq_reply_len(keys); i++) {
        size_t len;
        const char *key = emq_reply_str(emq_reply_at(keys, i), &len);
        char *name = key ? queue_of(key, len, t->kind->suffix) : NULL;
        if (name == NULL)
            continue;
        if (t->n == 3 * t->max) { /* a queue is found once per kind */
            emq__free(name);
            return too_many(t, err);
        }
        char **grown = emq__realloc(t->names, (t->n + 1) * sizeof *grown);
        if (grown == NULL) {
            emq__free(name);
            return emq__oom(err);
        }
        t->names = grown;
        t->names[t->n++] = name;
    }
    return EMQ_OK;
}

/* Scans one master's keys of t's kind. */
static emq_status scan_kind(emq_conn_t *conn, scan_ctx *t, emq_error *err) {
    char match[EMQ_KEYS_MAX_QUEUE + 32];
    snprintf(match, sizeof match, "emq:{%s}%s", t->glob, t->kind->suffix);
    char cursor[32] = "0";
    for (int round = 0; round < EMQ_SCAN_ROUNDS; round++) {
        const char *argv[] = {"SCAN",  cursor, "MATCH", match,
                              "COUNT", "1000", "TYPE",  t->kind->type};
        emq_reply *r;
        emq_status st = emq_conn_command(conn, 8, argv, NULL, &r, err);
        if (st != EMQ_OK)
            return st;
        if (emq_reply_kind(r) == EMQ_REPLY_ERROR) {
            st = emq__reply_error_set(err, r, "SCAN failed");
            emq_reply_free(r);
            return st;
        }
        if (emq_reply_len(r) != 2 || emq_reply_kind(r) != EMQ_REPLY_ARRAY) {
            st = emq__reply_bad_shape(err, "SCAN");
            emq_reply_free(r);
            return st;
        }
        size_t clen;
        const char *c = emq_reply_str(emq_reply_at(r, 0), &clen);
        snprintf(cursor, sizeof cursor, "%.*s", c ? (int)clen : 1, c ? c : "0");
        st = take_keys(t, emq_reply_at(r, 1), err);
        emq_reply_free(r);
        if (st != EMQ_OK || strcmp(cursor, "0") == 0)
            return st;
    }
    return emq__error_set(err, EMQ_ELIMIT, 0, "SCAN did not finish in %d calls",
                          EMQ_SCAN_ROUNDS);
}

/* Scans one master's keys of every kind. */
static emq_status scan_master(emq_conn_t *conn, const char *name, void *ctx,
                              emq_error *err) {
    (void)name; /* the walk prefixes a failure with it */
    scan_ctx *t = ctx;
    emq_status st = EMQ_OK;
    for (size_t k = 0;
         st == EMQ_OK && k < sizeof scan_kinds / sizeof *scan_kinds; k++) {
        t->kind = &scan_kinds[k];
        st = scan_kind(conn, t, err);
    }
    return st;
}

static int cmp_names(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

emq_status emq_admin_scan_queues(const emq_conf_t *conf, const char *pattern,
                                 size_t max, char ***names, size_t *n,
                                 emq_error *err) {
    *names = NULL;
    *n = 0;
    if (conf == NULL)
        return emq__error_set(err, EMQ_EINVAL, 0,
                              "listing queues needs a configuration");
    const char *glob = pattern && *pattern ? pattern : "*";
    if (strlen(glob) > EMQ_KEYS_MAX_QUEUE)
        return emq__error_set(err, EMQ_EINVAL, 0,
                              "the pattern is longer than %d bytes",
                              EMQ_KEYS_MAX_QUEUE);
    scan_ctx t = {glob, NULL, max ? max : EMQ_SCAN_MAX_DEFAULT, NULL, 0};
    emq__route *route = NULL;
    /* Any key will do: the route only lends its connections. */
    emq_status st = emq__route_new(conf, "emq:{}", &route, err);
    if (st == EMQ_OK)
        st = emq__route_each_master(route, scan_master, &t, err);
    emq__route_destroy(route);
    if (st == EMQ_OK && t.n > 1) { /* sorted, each name once */
        qsort(t.names, t.n, sizeof *t.names, cmp_names);
        size_t kept = 1;
        for (size_t i = 1; i < t.n; i++) {
            if (strcmp(t.names[i], t.names[kept - 1]) == 0)
                emq__free(t.names[i]);
            else
                t.names[kept++] = t.names[i];
        }
        t.n = kept;
    }
    if (st == EMQ_OK && t.n > t.max)
        st = too_many(&t, err);
    if (st != EMQ_OK) {
        emq_queue_names_free(t.names, t.n);
        return st;
    }
    emq__error_clear(err);
    *names = t.names;
    *n = t.n;
    return EMQ_OK;
}

void emq_queue_names_free(char **names, size_t n) {
    for (size_t i = 0; names && i < n; i++)
        emq__free(names[i]);
    emq__free(names);
}
