/* SPDX-License-Identifier: BSD-3-Clause */
/* test_alloc_failure.c: the library survives the failure of any single
 * allocation on its main paths, against a real redis-server.
 *
 * Each test walks n = 1, 2, ... : it arms emq__alloc_fail_at(n), runs a
 * whole path (connect and command; a pipeline; producer creation and a
 * batch; a consumer run that recovers, reads, acknowledges, claims and
 * dead-letters; admin creation and describe), disarms, cleans up, and
 * checks that the call returned EMQ_OK or an error with a message (never
 * a crash) and that emq__alloc_live() is back at its value before the
 * step. The walk ends at the first n the path never reaches (it made
 * fewer than n allocations), which must then have succeeded in full.
 */
#include "base/base.h" /* emq__alloc_fail_at, emq__alloc_live, emq__alloc_calls */
#include "harness/server.h"
#include "integ/consumer_helpers.h"

#include <pthread.h>
#include <stdlib.h>

/* Most steps a walk may take before the test calls it endless. */
#define WALK_MAX 3000

/* One step's bookkeeping: allocations made and live before. */
typedef struct step {
    uint64_t n, calls0, live0;
} step;

static void step_arm(step *s, uint64_t n) {
    s->n = n;
    s->live0 = emq__alloc_live();
    s->calls0 = emq__alloc_calls();
    emq__alloc_fail_at(n);
}

/* Disarms and returns 1 when the armed failure happened in the step. */
static int step_hit(const step *s) {
    uint64_t made = emq__alloc_calls() - s->calls0;
    emq__alloc_fail_at(0);
    return made >= s->n;
}

/* After the step's cleanup: nothing it allocated is still live. */
static void step_no_leak(const step *s, const char *what) {
    uint64_t live = emq__alloc_live();
    if (live != s->live0)
        FAIL("%s, allocation %llu failed: %lld allocations leaked", what,
             (unsigned long long)s->n, (long long)live - (long long)s->live0);
}

/* Prints how far a walk went (shown under the test's line on failure,
 * and in the log of a verbose run). */
static void walked(const char *what, uint64_t n, int failures) {
    fprintf(stderr, "    %s: walked allocations 1..%llu, %d failed calls\n",
            what, (unsigned long long)(n - 1), failures);
}

/* A failed step returns an error status with a message. */
static void step_failed_cleanly(const step *s, emq_status st,
                                const emq_error *err, const char *what) {
    if (st == EMQ_OK)
        return;
    if (err->code != st || err->message[0] == '\0')
        FAIL("%s, allocation %llu failed: status %s but error %s \"%s\"", what,
             (unsigned long long)s->n, emq_status_name(st),
             emq_status_name(err->code), err->message);
}

/* ---- connection ------------------------------------------------------ */

TEST_TIMEOUT(alloc_conn_new_and_command, 60) {
    emq_srv *srv = emq_srv_start(NULL);
    emq_conf_t *conf = conf_for(emq_srv_url(srv));
    conf_set(conf, P_CLIENT_NAME, "alloc-walk");
    conf_set(conf, "protocol", "3"); /* HELLO 3 and a map reply too */
    uint64_t n = 1;
    int failed = 0;
    for (; n < WALK_MAX; n++) {
        step s;
        emq_error err;
        memset(&err, 0, sizeof err);
        emq_conn_t *conn = NULL;
        emq_reply *reply = NULL;
        step_arm(&s, n);
        emq_status st = emq_conn_new(conf, &conn, &err);
        if (st == EMQ_OK) {
            const char *set[] = {"SET", "k", "v"};
            st = emq_conn_command(conn, 3, set, NULL, &reply, &err);
            emq_reply_free(reply);
            reply = NULL;
        }
        if (st == EMQ_OK) {
            const char *hello[] = {"HELLO"};
            st = emq_conn_command(conn, 1, hello, NULL, &reply, &err);
        }
        int hit = step_hit(&s);
        failed += st != EMQ_OK;
        step_failed_cleanly(&s, st, &err, "connect + command");
        if (st != EMQ_OK && st != EMQ_ENOMEM)
            FAIL("allocation %llu: %s (%s), want EMQ_ENOMEM",
                 (unsigned long long)n, emq_status_name(st), err.message);
        if (!hit) {
            ASSERT_OK(st, &err);
            ASSERT_EQ_INT(emq_reply_kind(reply), EMQ_REPLY_MAP);
        }
        emq_reply_free(reply);
        emq_conn_destroy(conn);
        step_no_leak(&s, "connect + command");
        if (!hit)
            break;
    }
    walked("connect + command", n, failed);
    ASSERT(n > 3 && n < WALK_MAX);
    emq_conf_destroy(conf);
    emq_srv_stop(srv);
}

TEST_TIMEOUT(alloc_pipeline_append_and_get_reply, 60) {
    emq_srv *srv = emq_srv_start(NULL);
    emq_conf_t *conf = conf_for(emq_srv_url(srv));
    enum { DEPTH = 40 };
    uint64_t n = 1;
    int failed = 0;
    for (; n < WALK_MAX; n++) {
        uint64_t live_before_connect = emq__alloc_live();
        emq_conn_t *conn = connect_ok(conf);
        step s;
        emq_error err;
        memset(&err, 0, sizeof err);
        step_arm(&s, n);
        emq_status st = EMQ_OK;
        int appended = 0, read = 0;
        for (int i = 0; i < DEPTH && st == EMQ_OK; i++) {
            char key[16], value[600];
            snprintf(key, sizeof key, "k%d", i);
            memset(value, 'a' + i % 26, sizeof value - 1);
            value[sizeof value - 1] = '\0';
            const char *set[] = {"SET", key, value};
            const char *get[] = {"GET", key};
            st = i % 2 ? emq_conn_append(conn, 2, get, NULL, &err)
                       : emq_conn_append(conn, 3, set, NULL, &err);
            appended += st == EMQ_OK;
        }
        while (st == EMQ_OK && read < appended) {
            emq_reply *reply = NULL;
            st = emq_conn_get_reply(conn, &reply, &err);
            if (st == EMQ_OK) {
                ASSERT(emq_reply_kind(reply) != EMQ_REPLY_ERROR);
                read++;
            }
            emq_reply_free(reply);
        }
        int hit = step_hit(&s);
        failed += st != EMQ_OK;
        step_failed_cleanly(&s, st, &err, "pipeline");
        if (!hit) {
            ASSERT_OK(st, &err);
            ASSERT_EQ_INT(read, DEPTH);
        } else if (st == EMQ_OK) {
            FAIL("allocation %llu failed but the pipeline reports success",
                 (unsigned long long)n);
        }
        /* A failure inside the reader breaks the connection for good: the
         * next call says so instead of mixing up replies. */
        if (st != EMQ_OK && emq_conn_is_broken(conn)) {
            emq_reply *reply = NULL;
            const char *ping[] = {"PING"};
            ASSERT(emq_conn_command(conn, 1, ping, NULL, &reply, &err) !=
                   EMQ_OK);
            ASSERT(reply == NULL);
        }
        emq_conn_destroy(conn);
        s.live0 = live_before_connect;
        step_no_leak(&s, "pipeline");
        if (!hit)
            break;
    }
    walked("pipeline", n, failed);
    ASSERT(n > DEPTH && n < WALK_MAX);
    emq_conf_destroy(conf);
    emq_srv_stop(srv);
}

/* ---- producer ---------------------------------------------------------- */

TEST_TIMEOUT(alloc_producer_new_and_batch, 60) {
    emq_srv *srv = emq_srv_start(NULL);
    emq_conf_t *conf = conf_for(emq_srv_url(srv));
    conf_set(conf, "queue", "oomp");
    conf_set(conf, "producer.window", "4");
    enum { N = 10 };
    emq_field fields[3] = {
        {"a", 1, "1", 1}, {"b", 1, "\0\r\n", 3}, {"c", 1, "v", 1}};
    emq_message msgs[N];
    for (int i = 0; i < N; i++)
        msgs[i] = (emq_message){fields, 3, NULL};
    uint64_t n = 1;
    int failed = 0;
    for (; n < WALK_MAX; n++) {
        step s;
        emq_error err;
        memset(&err, 0, sizeof err);
        emq_producer_t *p = NULL;
        emq_id ids[N];
        size_t written = 0;
        step_arm(&s, n);
        emq_status st = emq_producer_new(conf, &p, &err);
        if (st == EMQ_OK)
            st = emq_produce_batch(p, msgs, N, ids, &written, &err);
        int hit = step_hit(&s);
        failed += st != EMQ_OK;
        step_failed_cleanly(&s, st, &err, "producer");
        if (!hit) {
            ASSERT_OK(st, &err);
            ASSERT_EQ_SIZE(written, N);
        } else {
            ASSERT(st != EMQ_OK);
            ASSERT(written < N);
        }
        emq_producer_destroy(p);
        step_no_leak(&s, "producer");
        if (!hit)
            break;
    }
    walked("producer", n, failed);
    ASSERT(n > 5 && n < WALK_MAX);
    emq_conf_destroy(conf);
    emq_srv_stop(srv);
}

/* ---- consumer ------------------------------------------------------------ */

#define Q_STREAM "emq:{oomc}"
#define Q_DEAD "emq:{oomc}:dead"

static void srv_ok(const emq_srv *srv, const char *arg0, ...) {
    const char *args[16];
    int i = 0;
    va_list ap;
    va_start(ap, arg0);
    for (const char *a = arg0; a && i < 15; a = va_arg(ap, const char *))
        args[i++] = a;
    va_end(ap);
    args[i] = NULL;
    char out[512];
    int type = emq_srv_cmdv(srv, out, sizeof out, args);
    if (type < 0 || type == '-')
        FAIL("%s: %s", arg0, out);
}

/* The state every step starts from (raw commands, no library):
 *   1-0 "own"    pending for c1 once: recovered and acknowledged
 *   2-0 "stale"  pending for c1, delivered 5 times: dead-lettered on
 *                recovery without reaching the handler
 *   3-0 "peer"   pending for a dead peer: claimed by the beat, acked
 *   4-0 "dead"   new: the handler gives up, dead-lettered
 *   5-0 "retry"  new: the handler asks for a retry (reason recorded)
 *   6-0 "last"   new: acknowledged; the handler stops the run once it has
 *                seen both "peer" and "last" */
static void consumer_fixture(const emq_srv *srv) {
    srv_ok(srv, "FLUSHALL", NULL);
    srv_ok(srv, "XGROUP", "CREATE", Q_STREAM, "g", "0", "MKSTREAM", NULL);
    srv_ok(srv, "XADD", Q_STREAM, "1-0", "n", "own", NULL);
    srv_ok(srv, "XADD", Q_STREAM, "2-0", "n", "stale", NULL);
    srv_ok(srv, "XREADGROUP", "GROUP", "g", "c1", "COUNT", "2", "STREAMS",
           Q_STREAM, ">", NULL);
    srv_ok(srv, "XCLAIM", Q_STREAM, "g", "c1", "0", "2-0", "RETRYCOUNT", "5",
           NULL);
    srv_ok(srv, "XADD", Q_STREAM, "3-0", "n", "peer", NULL);
    srv_ok(srv, "XREADGROUP", "GROUP", "g", "peer", "COUNT", "1", "STREAMS",
           Q_STREAM, ">", NULL);
    srv_ok(srv, "XADD", Q_STREAM, "4-0", "n", "dead", NULL);
    srv_ok(srv, "XADD", Q_STREAM, "5-0", "n", "retry", NULL);
    srv_ok(srv, "XADD", Q_STREAM, "6-0", "n", "last", NULL);
}

typedef struct cycle {
    emq_consumer_t *c;
    int seen_peer, seen_last;
    int delivered;
} cycle;

static emq_verdict cycle_handler(void *opaque, const emq_entry *e, char *reason,
                                 size_t reason_size) {
    cycle *cy = opaque;
    cy->delivered++;
    const char *v = e->nfields ? e->fields[0].value : "";
    size_t vn = e->nfields ? e->fields[0].value_len : 0;
    if (vn == 4 && memcmp(v, "peer", 4) == 0)
        cy->seen_peer = 1;
    if (vn == 4 && memcmp(v, "last", 4) == 0)
        cy->seen_last = 1;
    if (cy->seen_peer && cy->seen_last)
        emq_consumer_stop(cy->c);
    if (vn == 4 && memcmp(v, "dead", 4) == 0) {
        snprintf(reason, reason_size, "poison");
        return EMQ_DEAD;
    }
    if (vn == 5 && memcmp(v, "retry", 5) == 0) {
        snprintf(reason, reason_size, "later");
        return EMQ_RETRY;
    }
    return EMQ_ACK;
}

/* Stops the consumer after a while whatever happens, so a run that lost
 * its way to an allocation failure still ends. */
typedef struct watchdog {
    pthread_t thread;
    emq_consumer_t *c;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int done;
} watchdog;

static void *watchdog_main(void *arg) {
    watchdog *w = arg;
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 3;
    pthread_mutex_lock(&w->lock);
    while (!w->done && pthread_cond_timedwait(&w->cond, &w->lock, &until) == 0)
        ;
    if (!w->done)
        emq_consumer_stop(w->c);
    pthread_mutex_unlock(&w->lock);
    return NULL;
}

static int64_t srv_int(const emq_srv *srv, const char *a0, const char *a1,
                       const char *a2) {
    char out[256];
    const char *args[] = {a0, a1, a2, NULL};
    if (emq_srv_cmdv(srv, out, sizeof out, args) != ':')
        FAIL("%s: %s", a0, out);
    return strtoll(out, NULL, 10);
}

TEST_TIMEOUT(alloc_consumer_recover_read_ack_claim_dead_letter, 240) {
    emq_srv *srv = emq_srv_start(NULL);
    emq_conf_t *conf = consumer_conf(srv, "oomc", "g", "c1", "head");
    conf_set(conf, "block_ms", "20");
    conf_set(conf, "lease.ttl_ms", "1100");
    conf_set(conf, "claim.interval_ms", "1");
    conf_set(conf, "claim.min_idle_ms", "100");
    conf_set(conf, "max_deliveries", "3");
    conf_set(conf, P_RECONNECT_BASE, "1");
    conf_set(conf, P_RECONNECT_MAX, "5");
    conf_set(conf, "log.level", "error");
    uint64_t n = 1;
    int failed = 0;
    int failures_seen = 0;
    for (; n < WALK_MAX; n++) {
        consumer_fixture(srv);
        usleep(2000); /* the peer's entry is idle past claim.min_idle_ms */
        cycle cy;
        memset(&cy, 0, sizeof cy);
        step s;
        emq_error err;
        memset(&err, 0, sizeof err);
        step_arm(&s, n);
        emq_status st = emq_consumer_new(conf, cycle_handler, &cy, &cy.c, &err);
        if (st == EMQ_OK) {
            watchdog w = {.c = cy.c};
            pthread_mutex_init(&w.lock, NULL);
            pthread_cond_init(&w.cond, NULL);
            ASSERT(pthread_create(&w.thread, NULL, watchdog_main, &w) == 0);
            st = emq_consumer_run(cy.c, &err);
            pthread_mutex_lock(&w.lock);
            w.done = 1;
            pthread_cond_signal(&w.cond);
            pthread_mutex_unlock(&w.lock);
            pthread_join(w.thread, NULL);
            pthread_mutex_destroy(&w.lock);
            pthread_cond_destroy(&w.cond);
        }
        int hit = step_hit(&s);
        failed += st != EMQ_OK;
        step_failed_cleanly(&s, st, &err, "consumer run");
        if (st != EMQ_OK)
            failures_seen++;
        if (!hit) {
            ASSERT_OK(st, &err);
            ASSERT(cy.seen_peer && cy.seen_last);
        }
        emq_consumer_destroy(cy.c);
        step_no_leak(&s, "consumer run");
        if (!hit)
            break;
    }
    walked("consumer run", n, failed);
    ASSERT(n > 20 && n < WALK_MAX);
    ASSERT(failures_seen > 0);
    /* The last, undisturbed run did the whole cycle. */
    ASSERT_EQ_INT(srv_int(srv, "XLEN", Q_DEAD, NULL), 2);
    char out[512];
    emq_srv_cmd(srv, out, sizeof out, "XPENDING", Q_STREAM, "g", "-", "+", "10",
                NULL);
    ASSERT_CONTAINS(out, "5-0"); /* the retry stays pending */
    ASSERT_NOT_CONTAINS(out, "1-0");
    ASSERT_NOT_CONTAINS(out, "2-0");
    ASSERT_NOT_CONTAINS(out, "3-0");
    ASSERT_NOT_CONTAINS(out, "4-0");
    ASSERT_NOT_CONTAINS(out, "6-0");
    emq_conf_destroy(conf);
    emq_srv_stop(srv);
}

/* ---- admin --------------------------------------------------------------- */

TEST_TIMEOUT(alloc_admin_new_and_describe, 60) {
    emq_srv *srv = emq_srv_start(NULL);
    consumer_fixture(srv);
    srv_ok(srv, "XGROUP", "CREATE", Q_STREAM, "g2", "$", NULL);
    srv_ok(srv, "XADD", Q_DEAD, "*", "emq.id", "9-0", NULL);
    emq_conf_t *conf = conf_for(emq_srv_url(srv));
    conf_set(conf, "queue", "oomc");
    uint64_t n = 1;
    int failed = 0;
    for (; n < WALK_MAX; n++) {
        step s;
        emq_error err;
        memset(&err, 0, sizeof err);
        emq_admin_t *a = NULL;
        emq_queue_info *info = NULL;
        step_arm(&s, n);
        emq_status st = emq_admin_new(conf, &a, &err);
        if (st == EMQ_OK)
            st = emq_admin_describe(a, &info, &err);
        int hit = step_hit(&s);
        failed += st != EMQ_OK;
        step_failed_cleanly(&s, st, &err, "admin describe");
        if (!hit) {
            ASSERT_OK(st, &err);
            ASSERT_EQ_SIZE(info->ngroups, 2);
            ASSERT_EQ_INT(info->dead_length, 1);
        } else if (st != EMQ_OK) {
            ASSERT(info == NULL);
        }
        emq_queue_info_free(info);
        emq_admin_destroy(a);
        step_no_leak(&s, "admin describe");
        if (!hit)
            break;
    }
    walked("admin describe", n, failed);
    ASSERT(n > 5 && n < WALK_MAX);
    emq_conf_destroy(conf);
    emq_srv_stop(srv);
}
