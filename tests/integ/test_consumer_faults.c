/* SPDX-License-Identifier: BSD-3-Clause */
/* test_consumer_faults.c: the consumer under server faults, against a real
 * redis-server.
 *
 * A server killed (SIGKILL) and restarted from its append-only file while
 * a consumer runs and entries keep arriving: the consumer reconnects with
 * backoff, drains its own pending list again, and every entry is handled
 * at least once with nothing left pending. CLIENT KILL, CLIENT UNBLOCK
 * ... ERROR, and 7.0's empty entries array for a woken blocked read
 * are survived: new entries keep being delivered. A
 * group destroyed or a stream deleted mid-run makes the consumer open the
 * door again at its declared start, with a warning in the log and
 * stats.group_recreated counted, or, with on_group_lost=fatal, makes
 * emq_consumer_run fail naming it; in both cases without busy-looping
 * (XGROUP CREATE calls counted with INFO commandstats).
 */
#include "integ/inspect_conn_helpers.h"

#define Q_STREAM "emq:{jobs}"

/* A consumer "w" of group g on queue jobs (start new) recording into r,
 * running on t, blocked in its first read when this returns. */
static emq_consumer_t *start_w(const emq_srv *s, emq_conf_t *conf, recorder *r,
                               runner_thread *t) {
    if (conf == NULL)
        conf = consumer_conf(s, "jobs", "g", "w", "new");
    emq_consumer_t *c = recording_consumer(conf, r);
    start_consumer(t, c);
    WAIT_UNTIL(client_id_by_name(s, "w", 1) >= 0, 5000,
               "the consumer to block in XREADGROUP");
    return c;
}

/* Produces one entry {"n": value} and waits until the handler saw it. */
static void produce_and_see(const emq_srv *s, recorder *r, const char *value) {
    emq_conf_t *conf = conf_for(emq_srv_url(s));
    conf_set(conf, "queue", "jobs");
    emq_producer_t *p;
    emq_error err;
    ASSERT_OK(emq_producer_new(conf, &p, &err), &err);
    emq_conf_destroy(conf);
    emq_field f = {"n", 1, value, strlen(value)};
    ASSERT_OK(emq_produce(p, &f, 1, NULL, &err), &err);
    emq_producer_destroy(p);
    WAIT_UNTIL(recorded_index(r, value) >= 0, 5000, value);
}

/* ---- server restart --------------------------------------------------- */

typedef struct paced_producer {
    pthread_t thread;
    const emq_srv *s;
    int n;
    int added;    /* entries the server took */
    int failures; /* XADDs retried after a failure */
} paced_producer;

/* How long the paced producer goes on without the server taking an entry
 * before it gives up: far longer than the restart's outage, so only a
 * server that stays away ends it early. */
#define PACED_STALL_MS 20000

/* Adds {"n": "v<i>"} for i < n, about one per millisecond, retrying each
 * entry (with a new producer) until the server takes it; gives up when
 * none was taken for PACED_STALL_MS (scaled), not after a total time: on
 * a loaded machine 2000 calls (each fsynced: appendfsync always) can take
 * more than 20 s. An XADD whose reply was lost may be added twice:
 * at-least-once. */
static void *paced_main(void *arg) {
    paced_producer *pp = arg;
    emq_producer_t *p = NULL;
    int64_t last_added = now_ms();
    int i = 0;
    while (i < pp->n && now_ms() - last_added < emq_test_ms(PACED_STALL_MS)) {
        emq_error err;
        if (p == NULL) {
            emq_conf_t *conf = conf_for(emq_srv_url(pp->s));
            emq_conf_set(conf, "queue", "jobs", &err);
            emq_conf_set(conf, P_RECONNECT_ATTEMPTS, "1", &err);
            if (emq_producer_new(conf, &p, &err) != EMQ_OK)
                p = NULL;
            emq_conf_destroy(conf);
            if (p == NULL) {
                usleep(20000);
                continue;
            }
        }
        char value[32];
        int len = snprintf(value, sizeof value, "v%d", i);
        emq_field f = {"n", 1, value, (size_t)len};
        if (emq_produce(p, &f, 1, NULL, &err) != EMQ_OK) {
            pp->failures++;
            emq_producer_destroy(p);
            p = NULL;
            continue;
        }
        i++;
        last_added = now_ms();
        usleep(1000);
    }
    emq_producer_destroy(p);
    pp->added = i;
    return NULL;
}

/* The recording handler, taking about a millisecond per entry, so that
 * batches pile up and entries are pending most of the time. */
static emq_verdict slow_record(void *opaque, const emq_entry *e, char *reason,
                               size_t reason_size) {
    usleep(1000);
    return record(opaque, e, reason, reason_size);
}

/* The bounds are on progress, not on speed: the production of 2000
 * entries fsynced one by one and their handling take a few seconds on a
 * quiet machine and more than 20 s on a loaded one under ASan. */
TEST_TIMEOUT(faults_server_kill9_restart_nothing_lost, 150) {
    emq_srv_opts opts = {.appendonly = 1};
    emq_srv *s = emq_srv_start(&opts);
    static recorder r;
    recorder_init(&r);
    emq_conf_t *conf = consumer_conf(s, "jobs", "g", "w", "new");
    conf_set(conf, P_RECONNECT_BASE, "50");
    conf_set(conf, P_RECONNECT_MAX, "400");
    runner_thread t;
    emq_consumer_t *c;
    emq_error err;
    ASSERT_OK(emq_consumer_new(conf, slow_record, &r, &c, &err), &err);
    emq_conf_destroy(conf);
    start_consumer(&t, c);
    WAIT_UNTIL(client_id_by_name(s, "w", 1) >= 0, 5000,
               "the consumer to block in XREADGROUP");
    static paced_producer pp;
    memset(&pp, 0, sizeof pp);
    pp.s = s;
    pp.n = 2000;
    ASSERT(pthread_create(&pp.thread, NULL, paced_main, &pp) == 0);
    WAIT_UNTIL(recorded(&r) >= 300, 30000, "300 entries handled");
    /* Kill it while w holds entries (handled or not, unacknowledged). */
    emq_conn_t *before = admin_connect(s);
    WAIT_UNTIL(pending_of(before, Q_STREAM, "g", "w") > 0, 5000,
               "entries pending for w");
    emq_srv_kill9(s);
    emq_conn_destroy(before);
    usleep(300 * 1000);
    emq_srv_restart(s);
    /* It ends by itself: every entry added, or none taken for a while. */
    pthread_join(pp.thread, NULL);
    if (pp.added < pp.n)
        FAIL("the server took %d of %d entries, then none for %d ms (%d "
             "failed calls)",
             pp.added, pp.n, emq_test_ms(PACED_STALL_MS), pp.failures);
    emq_conn_t *adm = admin_connect(s);
    ASSERT(CMD_INT(adm, "XLEN", Q_STREAM) >= 2000);
    WAIT_UNTIL(group_done(adm, Q_STREAM, "g"), 30000,
               "every entry delivered and acknowledged");
    ASSERT_OK(stop_consumer(&t), &t.err);
    /* Every value v0..v1999 handled at least once. */
    static char seen[2000];
    memset(seen, 0, sizeof seen);
    for (size_t i = 0; i < r.n; i++) {
        int v = atoi(r.values[i] + 1);
        ASSERT(r.values[i][0] == 'v' && v >= 0 && v < 2000);
        seen[v] = 1;
    }
    for (int v = 0; v < 2000; v++)
        if (!seen[v])
            FAIL("v%d was never handled (%zu deliveries recorded)", v, r.n);
    emq_consumer_stats st;
    emq_consumer_stats_get(c, &st);
    ASSERT(st.reconnects >= 1);
    ASSERT_EQ_INT(pending_total(adm, Q_STREAM, "g"), 0);
    fprintf(stderr,
            "    restart: %zu deliveries for 2000 entries, %llu reconnects, "
            "%d producer retries\n",
            r.n, (unsigned long long)st.reconnects, pp.failures);
    emq_consumer_destroy(c);
    emq_conn_destroy(adm);
    emq_srv_stop(s);
}

/* ---- killed and unblocked clients ----------------------------------- */

TEST(faults_client_kill_survived) {
    emq_srv *s = emq_srv_start(NULL);
    static recorder r;
    recorder_init(&r);
    runner_thread t;
    emq_consumer_t *c = start_w(s, NULL, &r, &t);
    produce_and_see(s, &r, "before");
    char out[256];
    ASSERT_EQ_INT(emq_srv_cmd(s, out, sizeof out, "CLIENT", "KILL", "TYPE",
                              "normal", "SKIPME", "yes", NULL),
                  ':');
    ASSERT(atoi(out) >= 1);
    emq_consumer_stats st;
    WAIT_UNTIL((emq_consumer_stats_get(c, &st), st.reconnects >= 1), 5000,
               "the consumer to reconnect");
    produce_and_see(s, &r, "after");
    ASSERT_OK(stop_consumer(&t), &t.err);
    ASSERT_EQ_SIZE(r.n, 2);
    emq_conn_t *adm = admin_connect(s);
    ASSERT_EQ_INT(pending_total(adm, Q_STREAM, "g"), 0);
    emq_conn_destroy(adm);
    emq_consumer_destroy(c);
    emq_srv_stop(s);
}

TEST(faults_client_unblock_error_survived) {
    emq_srv *s = emq_srv_start(NULL);
    static recorder r;
    recorder_init(&r);
    runner_thread t;
    emq_consumer_t *c = start_w(s, NULL, &r, &t);
    /* Unblock it with an error (the read may be between two BLOCKs: try
     * until one CLIENT UNBLOCK finds it blocked). */
    char out[256];
    long long unblocked = 0;
    int64_t end = now_ms() + emq_test_ms(3000);
    while (unblocked != 1 && now_ms() < end) {
        long long id = client_id_by_name(s, "w", 1);
        if (id < 0) {
            usleep(1000);
            continue;
        }
        char ids[32];
        snprintf(ids, sizeof ids, "%lld", id);
        ASSERT_EQ_INT(emq_srv_cmd(s, out, sizeof out, "CLIENT", "UNBLOCK", ids,
                                  "ERROR", NULL),
                      ':');
        unblocked = atoll(out);
    }
    ASSERT_EQ_INT(unblocked, 1);
    produce_and_see(s, &r, "after");
    ASSERT_OK(stop_consumer(&t), &t.err);
    ASSERT_EQ_SIZE(r.n, 1);
    emq_consumer_destroy(c);
    emq_srv_stop(s);
}

TEST(faults_blocked_read_woken_with_empty_entries) {
    emq_srv *s = emq_srv_start(NULL);
    static recorder r;
    recorder_init(&r);
    runner_thread t;
    emq_consumer_t *c = start_w(s, NULL, &r, &t);
    emq_conn_t *adm = admin_connect(s);
    emq_consumer_stats before;
    emq_consumer_stats_get(c, &before);
    emq_reply *x;
    x = CMD(adm, "MULTI");
    emq_reply_free(x);
    x = CMD(adm, "XADD", Q_STREAM, "5-0", "f", "v");
    emq_reply_free(x);
    x = CMD(adm, "XDEL", Q_STREAM, "5-0");
    emq_reply_free(x);
    x = CMD(adm, "EXEC");
    ASSERT_EQ_INT(emq_reply_kind(x), EMQ_REPLY_ARRAY);
    ASSERT_EQ_SIZE(emq_reply_len(x), 2);
    emq_reply_free(x);
    produce_and_see(s, &r, "after");
    ASSERT_OK(stop_consumer(&t), &t.err);
    ASSERT_EQ_SIZE(r.n, 1);
    ASSERT_EQ_STR(r.values[0], "after");
    emq_consumer_stats st;
    emq_consumer_stats_get(c, &st);
    ASSERT_EQ_INT(st.reconnects, 0);
    ASSERT_EQ_INT(st.acked, 1);
    ASSERT_EQ_INT(pending_total(adm, Q_STREAM, "g"), 0);
    emq_conn_destroy(adm);
    emq_consumer_destroy(c);
    emq_srv_stop(s);
}

/* ---- group or stream removed ---------------------------------------- */

static int group_exists(emq_conn_t *adm) {
    emq_reply *r = CMD(adm, "XINFO", "GROUPS", Q_STREAM);
    int found = 0;
    for (size_t i = 0; i < emq_reply_len(r); i++) {
        char name[64];
        if (field_of(emq_reply_at(r, i), "name", name, sizeof name) &&
            !strcmp(name, "g"))
            found = 1;
    }
    emq_reply_free(r);
    return found;
}

/* Runs w with a log capture, removes the group (destroy = 1) or the
 * stream, and checks the consumer re-creates it and goes on. */
static void group_lost_recreated(int destroy) {
    emq_srv *s = emq_srv_start(NULL);
    static recorder r;
    recorder_init(&r);
    static logcap log;
    logcap_init(&log);
    emq_conf_t *conf = consumer_conf(s, "jobs", "g", "w", "new");
    emq_conf_set_log(conf, logcap_fn, &log);
    runner_thread t;
    emq_consumer_t *c = start_w(s, conf, &r, &t);
    produce_and_see(s, &r, "before");
    emq_conn_t *adm = admin_connect(s);
    if (destroy)
        ASSERT_EQ_INT(CMD_INT(adm, "XGROUP", "DESTROY", Q_STREAM, "g"), 1);
    else
        ASSERT_EQ_INT(CMD_INT(adm, "DEL", Q_STREAM), 1);
    emq_consumer_stats st;
    WAIT_UNTIL((emq_consumer_stats_get(c, &st), st.group_recreated >= 1), 5000,
               "the group to be re-created");
    WAIT_UNTIL(group_exists(adm), 3000, "the group to exist again");
    WAIT_UNTIL(client_id_by_name(s, "w", 1) >= 0, 5000,
               "the consumer to block again");
    produce_and_see(s, &r, "after");
    ASSERT_OK(stop_consumer(&t), &t.err);
    ASSERT_EQ_SIZE(r.n, 2);
    emq_consumer_stats_get(c, &st);
    ASSERT_EQ_INT(st.group_recreated, 1);
    pthread_mutex_lock(&log.lock);
    int warnings = log.warnings;
    int named = strstr(log.text, "NOGROUP") != NULL ||
                strstr(log.text, "UNBLOCKED") != NULL;
    pthread_mutex_unlock(&log.lock);
    ASSERT(warnings >= 1);
    ASSERT(named);
    ASSERT_EQ_INT(pending_total(adm, Q_STREAM, "g"), 0);
    emq_conn_destroy(adm);
    emq_consumer_destroy(c);
    emq_srv_stop(s);
}

TEST(faults_group_destroyed_recreated) { group_lost_recreated(1); }

TEST(faults_stream_deleted_recreated) { group_lost_recreated(0); }

TEST_TIMEOUT(faults_group_lost_fatal_returns_error, 15) {
    emq_srv *s = emq_srv_start(NULL);
    static recorder r;
    recorder_init(&r);
    emq_conf_t *conf = consumer_conf(s, "jobs", "g", "w", "new");
    conf_set(conf, "on_group_lost", "fatal");
    runner_thread t;
    emq_consumer_t *c = start_w(s, conf, &r, &t);
    emq_conn_t *adm = admin_connect(s);
    ASSERT_EQ_INT(CMD_INT(adm, "XGROUP", "DESTROY", Q_STREAM, "g"), 1);
    emq_status st = join_consumer(&t);
    ASSERT(st != EMQ_OK);
    ASSERT_EQ_INT(t.err.code, st);
    ASSERT_CONTAINS(t.err.message, "NOGROUP");
    emq_consumer_stats stats;
    emq_consumer_stats_get(c, &stats);
    ASSERT_EQ_INT(stats.group_recreated, 0);
    ASSERT_EQ_INT(group_exists(adm), 0); /* it did not re-create it */
    emq_conn_destroy(adm);
    emq_consumer_destroy(c);
    emq_srv_stop(s);
}

TEST(faults_group_lost_never_busy_loops) {
    emq_srv *s = emq_srv_start(NULL);
    static recorder r;
    recorder_init(&r);
    runner_thread t;
    emq_consumer_t *c = start_w(s, NULL, &r, &t);
    emq_conn_t *adm = admin_connect(s);
    CMD_NOERR(adm, "CONFIG", "RESETSTAT");
    /* Destroy the group over and over for 1.5 s. */
    int64_t start = now_ms();
    int destroys = 0, destroy_calls = 0;
    while (now_ms() - start < 1500) {
        destroys += (int)CMD_INT(adm, "XGROUP", "DESTROY", Q_STREAM, "g");
        destroy_calls++;
        usleep(20000);
    }
    int64_t wall = now_ms() - start;
    long long usec, reads;
    int exact = 1;
    long long creates = emq_srv_calls(s, "xgroup|create", &exact);
    if (!exact) /* 6.2 counts all of XGROUP: take our DESTROYs away */
        creates -= destroy_calls;
    cmdstat(adm, "xreadgroup", &reads, &usec);
    fprintf(stderr,
            "    group lost for %lld ms: %lld XGROUP CREATE, %lld XREADGROUP "
            "calls, %d destroys\n",
            (long long)wall, creates, reads, destroys);
    ASSERT(destroys >= 1);
    ASSERT(creates >= 1); /* it does re-create */
    /* But at most about once a second: the start's, one at once, then one
     * a second at most (RECREATE_GUARD_MS), so 4 in the 1.5 s this loop
     * is meant to take; and reads at most 40 a second. Counted over the
     * time the loop did take: a test thread held up in it gives the
     * consumer more time, which is not a busy loop's thousands. */
    ASSERT(creates <= 3 + wall / 1000);
    ASSERT(reads <= 40 * wall / 1000);
    /* And it still works afterwards. */
    WAIT_UNTIL(group_exists(adm), 3000, "the group to exist again");
    WAIT_UNTIL(client_id_by_name(s, "w", 1) >= 0, 5000,
               "the consumer to block again");
    produce_and_see(s, &r, "after");
    ASSERT_OK(stop_consumer(&t), &t.err);
    emq_conn_destroy(adm);
    emq_consumer_destroy(c);
    emq_srv_stop(s);
}
