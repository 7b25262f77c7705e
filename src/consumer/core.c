/* SPDX-License-Identifier: BSD-3-Clause */
/* core.c: the small helpers every file of the consumer folder uses on a
 * consumer: its log lines, stop-aware naps, the stop and fatal flags, and
 * the single-queue consumers a topic stands for.
 *
 * It sends nothing and starts no thread; the files above it build on it
 * (core.h lists them).
 */
#include "core.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

void emq__consumer_log(emq_consumer_t *c, int level, const char *fmt, ...) {
    if ((int64_t)level > emq__cfg_log_level(c->conf))
        return; /* not even formatted */
    char message[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(message, sizeof message, fmt, ap);
    va_end(ap);
    emq__conf_log(c->conf, level, "consumer '%s' of group '%s' on '%s': %s",
                  c->name, c->group, c->keys.stream, message);
}

/* The sessions' log: the consumer's prefix on their sentences. */
static void session_log(void *c, int level, const char *message) {
    emq__consumer_log(c, level, "%s", message);
}

emq_status emq__consumer_session_open(emq_consumer_t *c, emq__session *s,
                                      const char *what, atomic_int *halt,
                                      int64_t reply_timeout_ms,
                                      void (*on_stop)(void *c),
                                      emq_error *err) {
    stats_counters *k = &c->stats;
    emq__session_opts o = {
        .what = what,
        .client_name = c->name, /* both connections carry the name */
        .stop = {halt != NULL ? halt : &c->stop, &c->fatal},
        .connect_wait = (int)emq__cfg_consumer_connect_wait(c->conf),
        .reply_timeout_ms = reply_timeout_ms,
        .log = session_log,
        .log_ctx = c,
        .counts = {.round_trips = &k->round_trips,
                   .reconnects = &k->reconnects,
                   .server_waits = &k->server_waits,
                   .redirects = &k->redirects,
                   .cluster_retries = &k->cluster_retries,
                   .cluster_gave_up = &k->cluster_gave_up},
    };
    if (on_stop != NULL) { /* a blocked read is ended at a stop */
        o.on_stop = on_stop;
        o.on_stop_ctx = c;
        o.on_stop_fd = halt == NULL ? c->stop_fd : -1; /* c->stop's */
        o.learn_client_id = 1;
    }
    return emq__session_open(s, c->conf, c->keys.stream, &o, err);
}

/* The stop predicate of the naps (emq__nap). */
emq_status emq__consumer_append_ids(emq__session *s, int tag,
                                    const char *const *words, size_t nwords,
                                    const emq_id *ids, size_t n,
                                    emq_error *err) {
    const char **argv = emq__alloc((nwords + n) * sizeof *argv);
    if (argv == NULL)
        return emq__oom(err);
    memcpy(argv, words, nwords * sizeof *argv);
    for (size_t i = 0; i < n; i++)
        argv[nwords + i] = ids[i].str;
    emq_status st =
        emq__session_append(s, tag, (int)(nwords + n), argv, NULL, err);
    emq__free(argv);
    return st;
}

emq_status emq__consumer_append_wait(emq_consumer_t *c, emq__session *s,
                                     int tag, long long *want, emq_error *err) {
    *want = (long long)emq__cfg_deliveries_wait_replicas(c->conf);
    if (*want <= 0)
        return EMQ_OK;
    char replicas[24], timeout[24];
    snprintf(replicas, sizeof replicas, "%lld", *want);
    snprintf(timeout, sizeof timeout, "%lld",
             (long long)emq__cfg_deliveries_wait_timeout_ms(c->conf));
    const char *argv[] = {"WAIT", replicas, timeout};
    return emq__session_append(s, tag, 3, argv, NULL, err);
}

static int consumer_halted(void *c) { return emq__consumer_stopping(c); }

void emq__consumer_nap(emq_consumer_t *c, int64_t ms) {
    emq__nap(ms, consumer_halted, c);
}

int emq__consumer_stopping(emq_consumer_t *c) {
    return atomic_load(&c->stop) || atomic_load(&c->fatal);
}

void emq__consumer_stop_set(emq_consumer_t *c) {
    atomic_store(&c->stop, 1); /* first: the descriptor says it is set */
    if (c->stop_fd >= 0) {
        uint64_t one = 1;
        ssize_t rc = write(c->stop_fd, &one, sizeof one);
        (void)rc; /* full (never, short of 2^64 - 1 stops): readable */
    }
}

void emq__consumer_stop_clear(emq_consumer_t *c) {
    /* Drained first: a stop in between leaves the flag set and the
     * descriptor readable (never set and silent). */
    if (c->stop_fd >= 0) {
        uint64_t v;
        ssize_t rc = read(c->stop_fd, &v, sizeof v);
        (void)rc; /* EAGAIN: nothing to drain */
    }
    atomic_store(&c->stop, 0);
}

void emq__consumer_fatal(emq_consumer_t *c, const emq_error *err) {
    pthread_mutex_lock(&c->fatal_mu);
    if (!atomic_load(&c->fatal)) {
        c->fatal_err = *err;
        c->fatal_err.fatal = 1;
        atomic_store(&c->fatal, 1);
    }
    pthread_mutex_unlock(&c->fatal_mu);
}

emq_status emq__consumer_fatal_copy(emq_consumer_t *c, emq_error *err) {
    size_t n;
    emq_consumer_t *const *members = emq__consumer_members(c, &n);
    for (size_t i = 0; i < n; i++) {
        emq_consumer_t *m = members[i];
        if (!atomic_load(&m->fatal))
            continue;
        pthread_mutex_lock(&m->fatal_mu);
        emq_status st = m->fatal_err.code;
        if (err != NULL)
            *err = m->fatal_err;
        pthread_mutex_unlock(&m->fatal_mu);
        return st;
    }
    return EMQ_OK;
}

emq_consumer_t *const *emq__consumer_members(emq_consumer_t *c, size_t *n) {
    *n = c->nparts ? c->nparts : 1;
    return c->nparts ? c->parts : &c->self;
}
