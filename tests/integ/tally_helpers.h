/* SPDX-License-Identifier: BSD-3-Clause */
/* tally_helpers.h: helpers for the door, identity, load, stop and
 * producer tests.
 *
 * On top of consumer_helpers.h: reading numbers out of INFO (command
 * statistics, command and connection totals), pending counts, bounded
 * polling of a consumer's counters, and a tally handler that records, per
 * produced index, how often and by which consumer an entry was handled.
 * Everything talks to the fixture's real redis-server; admin commands go
 * over the fixture's raw socket, never through the library under test.
 */
#ifndef EMQ_TEST_TALLY_HELPERS_H
#define EMQ_TEST_TALLY_HELPERS_H

#include "integ/consumer_helpers.h"

#include <stdatomic.h>
#include <stdlib.h>

#define INFO_BUF 32768

/* The integer after "<field>:" in INFO <section>; -1 when absent. */
static inline long long info_number(const emq_srv *s, const char *section,
                                    const char *field) {
    static char out[INFO_BUF];
    if (emq_srv_cmd(s, out, sizeof out, "INFO", section, NULL) != '$')
        FAIL("INFO %s failed: %s", section, out);
    char key[128];
    snprintf(key, sizeof key, "\n%s:", field);
    const char *p = strstr(out, key);
    if (p == NULL && strncmp(out, key + 1, strlen(key + 1)) == 0)
        p = out - 1;
    if (p == NULL)
        return -1;
    return strtoll(p + strlen(key), NULL, 10);
}

/* calls= of cmdstat_<cmd> in INFO commandstats; 0 when the line is absent
 * (the server never ran the command). A subcommand ("xgroup|create") on a
 * server without subcommand stats (Redis 6.2) reads the whole command's
 * count: see emq_srv_calls. Callers that need the subcommand alone send no
 * other subcommand of it themselves (the consumer sends only CREATE). */
static inline long long cmdstat_calls(const emq_srv *s, const char *cmd) {
    return emq_srv_calls(s, cmd, NULL);
}

/* Number of pending entries of group on stream (XPENDING summary). */
static inline long long pending_count(const emq_srv *s, const char *stream,
                                      const char *group) {
    char out[4096];
    int t = emq_srv_cmd(s, out, sizeof out, "XPENDING", stream, group, NULL);
    if (t != '*')
        FAIL("XPENDING %s %s: %s", stream, group, out);
    return strtoll(out, NULL, 10);
}

/* Waits (bounded) until the group has no pending entry. */
static inline void wait_pending_zero(const emq_srv *s, const char *stream,
                                     const char *group, int timeout_ms) {
    timeout_ms = emq_test_ms(timeout_ms);
    int64_t end = now_ms() + timeout_ms;
    long long n = -1;
    while (now_ms() < end) {
        n = pending_count(s, stream, group);
        if (n == 0)
            return;
        usleep(10000);
    }
    FAIL("%lld entries still pending in group %s after %d ms", n, group,
         timeout_ms);
}

/* Waits (bounded) until c has made at least n XREADGROUP calls, which
 * means the door is open and the loop runs. Fails early if the thread
 * running c has already returned (t may be NULL). */
static inline void wait_reads(emq_consumer_t *c, const runner_thread *t,
                              uint64_t n, int timeout_ms) {
    timeout_ms = emq_test_ms(timeout_ms);
    int64_t end = now_ms() + timeout_ms;
    emq_consumer_stats st;
    while (now_ms() < end) {
        emq_consumer_stats_get(c, &st);
        if (st.reads >= n)
            return;
        usleep(2000);
    }
    emq_consumer_stats_get(c, &st);
    FAIL("consumer made %llu of %llu reads within %d ms (%s)",
         (unsigned long long)st.reads, (unsigned long long)n, timeout_ms,
         t ? t->err.message : "");
}

/* Waits (bounded) until c has begun two more XREADGROUP calls than it had
 * at this call. The first began after this call, and the batch it brought
 * was handled before the second began: an entry that the queue would
 * still deliver has reached the handler by then. Use it before asserting
 * that something was NOT delivered. */
static inline void wait_two_more_reads(emq_consumer_t *c,
                                       const runner_thread *t, int timeout_ms) {
    emq_consumer_stats st;
    emq_consumer_stats_get(c, &st);
    wait_reads(c, t, st.reads + 2, timeout_ms);
}

/* A consumer that must be created fine. conf stays the caller's. */
static inline emq_consumer_t *consumer_ok(const emq_conf_t *conf,
                                          emq_handler_fn fn, void *opaque) {
    emq_consumer_t *c = NULL;
    emq_error err;
    memset(&err, 0, sizeof err);
    ASSERT_OK(emq_consumer_new(conf, fn, opaque, &c, &err), &err);
    ASSERT(c != NULL);
    return c;
}

/* Runs a consumer of conf (the recording handler into rec) until rec has
 * seen n entries (bounded by timeout_ms, scaled), then stops it, checks
 * that its run ended well and destroys it. */
static inline void consume_until(const emq_conf_t *conf, recorder *rec,
                                 size_t n, int timeout_ms) {
    emq_consumer_t *c = consumer_ok(conf, record, rec);
    runner_thread t;
    start_consumer(&t, c);
    wait_for(rec, n, timeout_ms);
    emq_consumer_stop(c);
    ASSERT_EQ_INT(join_consumer(&t), EMQ_OK);
    emq_consumer_destroy(c);
}

/* A producer on queue; caller destroys. */
static inline emq_producer_t *producer_for(const emq_srv *s,
                                           const char *queue) {
    emq_conf_t *conf = conf_for(emq_srv_url(s));
    conf_set(conf, "queue", queue);
    /* Connected on return: the handshake is not counted in a test's
     * command totals. */
    conf_set(conf, "producer.connect", "eager");
    emq_producer_t *p = NULL;
    emq_error err;
    memset(&err, 0, sizeof err);
    ASSERT_OK(emq_producer_new(conf, &p, &err), &err);
    emq_conf_destroy(conf);
    return p;
}

/* Adds n entries {"n": "<i>"} (i = first..first+n-1) in one pipelined
 * batch; fails the test unless all are written. */
static inline void produce_batch_n(const emq_srv *s, const char *queue,
                                   int first, int n) {
    emq_producer_t *p = producer_for(s, queue);
    emq_message *msgs = calloc((size_t)n, sizeof *msgs);
    emq_field *fields = calloc((size_t)n, sizeof *fields);
    char(*values)[16] = calloc((size_t)n, sizeof *values);
    ASSERT(msgs && fields && values);
    for (int i = 0; i < n; i++) {
        int len = snprintf(values[i], sizeof values[i], "%d", first + i);
        fields[i] = (emq_field){"n", 1, values[i], (size_t)len};
        msgs[i] = (emq_message){&fields[i], 1, NULL};
    }
    size_t written = 0;
    emq_error err;
    memset(&err, 0, sizeof err);
    ASSERT_OK(emq_produce_batch(p, msgs, (size_t)n, NULL, &written, &err),
              &err);
    ASSERT_EQ_SIZE(written, (size_t)n);
    free(values);
    free(fields);
    free(msgs);
    emq_producer_destroy(p);
}

/* ---- tally: who handled which index, how often ------------------------ */

#define TALLY_MAX 20000
#define TALLY_WORKERS 16

typedef struct tally {
    int n;                       /* indexes 0..n-1 are expected */
    atomic_int times[TALLY_MAX]; /* handler calls per index */
    atomic_int owner[TALLY_MAX]; /* worker slot + 1 of the last call */
    atomic_int per_worker[TALLY_WORKERS];
    atomic_int total;
    atomic_int bad;                /* value out of range or unknown */
    char names[TALLY_WORKERS][64]; /* consumer names, slot order */
    int nworkers;
} tally;

static inline void tally_init(tally *t, int n, const char *const *names,
                              int nworkers) {
    memset(t, 0, sizeof *t);
    t->n = n;
    t->nworkers = nworkers;
    for (int i = 0; i < nworkers; i++)
        snprintf(t->names[i], sizeof t->names[i], "%s", names[i]);
}

/* Handler: the first field's value is the index. */
static inline emq_verdict tally_handler(void *opaque, const emq_entry *e,
                                        char *reason, size_t reason_size) {
    (void)reason;
    (void)reason_size;
    tally *t = opaque;
    char buf[16] = "";
    if (e->nfields >= 1 && e->fields[0].value_len < sizeof buf)
        memcpy(buf, e->fields[0].value, e->fields[0].value_len);
    char *end;
    long i = strtol(buf, &end, 10);
    int slot = -1;
    for (int w = 0; w < t->nworkers; w++)
        if (strcmp(t->names[w], e->consumer) == 0)
            slot = w;
    if (*buf == '\0' || *end != '\0' || i < 0 || i >= t->n || slot < 0) {
        atomic_fetch_add(&t->bad, 1);
        return EMQ_ACK;
    }
    atomic_fetch_add(&t->times[i], 1);
    atomic_store(&t->owner[i], slot + 1);
    atomic_fetch_add(&t->per_worker[slot], 1);
    atomic_fetch_add(&t->total, 1);
    return EMQ_ACK;
}

static inline void wait_tally(tally *t, int n, int timeout_ms) {
    timeout_ms = emq_test_ms(timeout_ms);
    int64_t end = now_ms() + timeout_ms;
    while (now_ms() < end && atomic_load(&t->total) < n)
        usleep(5000);
    if (atomic_load(&t->total) < n)
        FAIL("only %d of %d entries handled within %d ms",
             atomic_load(&t->total), n, timeout_ms);
}

#endif /* EMQ_TEST_TALLY_HELPERS_H */
