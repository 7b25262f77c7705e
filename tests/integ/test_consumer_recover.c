/* SPDX-License-Identifier: BSD-3-Clause */
/* test_consumer_recover.c: recovery of pending entries, against a real
 * redis-server.
 *
 * Recover self: a consumer process that dies holding entries gets them
 * back first, paging through its pending list (XPENDING), when it
 * restarts with the same name, before any new entry, with delivery count 2; an
 * entry whose reply was lost in flight (proxy frozen while the server answered
 * a blocked read) comes back through the self-drain after the consumer
 * reconnects by itself. Entries deleted or trimmed while pending are
 * acknowledged and counted, never handed to the handler, both in the
 * self-drain and in the claim beat (XAUTOCLAIM's deleted list).
 *
 * Recover peers: a dead peer's entries move to a live consumer
 * after claim.min_idle_ms, with deliveries >= 2; a live peer's fresh
 * entries stay with it; the beat follows XAUTOCLAIM's cursor across beats
 * to reach idle entries at the end of a 3000-entry pending list; and on a
 * 100,000-entry pending list with nothing idle the beat costs the server
 * under 5% of the wall time (measured with INFO commandstats).
 */
#include "integ/inspect_conn_helpers.h"
#include "harness/fakepeer.h"

#include <sys/prctl.h>

#define Q_STREAM "emq:{jobs}"

/* ---- recover self -------------------------------------------------------- */

/* The child's handler: acknowledges "pre" entries and dies (without any
 * cleanup, acks of its batch unsent) on the first "old" entry. */
static emq_verdict die_on_old(void *opaque, const emq_entry *e, char *reason,
                              size_t reason_size) {
    (void)opaque;
    (void)reason;
    (void)reason_size;
    if (e->nfields && e->fields[0].value_len >= 3 &&
        memcmp(e->fields[0].value, "old", 3) == 0)
        raise(SIGKILL); /* a crash: no cleanup, and no leak report */
    return EMQ_ACK;
}

static void child_consume(const emq_srv *s) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    emq_conf_t *conf = consumer_conf(s, "jobs", "g", "w", "new");
    conf_set(conf, "claim.min_idle_ms", "3600000");
    emq_consumer_t *c;
    emq_error err;
    if (emq_consumer_new(conf, die_on_old, NULL, &c, &err) != EMQ_OK)
        _exit(3);
    emq_conf_destroy(conf);
    emq_consumer_run(c, &err);
    _exit(4); /* never reached unless run fails */
}

TEST(recover_self_after_crash_pages_pending_before_new) {
    emq_srv *s = emq_srv_start(NULL);
    emq_conn_t *adm = admin_connect(s);
    CMD_NOERR(adm, "XGROUP", "CREATE", Q_STREAM, "g", "$", "MKSTREAM");
    fflush(NULL);
    pid_t pid = fork();
    ASSERT(pid >= 0);
    if (pid == 0)
        child_consume(s);
    /* Two entries the child handles and acknowledges... */
    produce_n(s, "jobs", "pre", 2);
    emq_id pre[2];
    ASSERT_EQ_SIZE(stream_ids(adm, Q_STREAM, pre, 2), 2);
    char ld[64];
    WAIT_UNTIL((group_last_delivered(adm, Q_STREAM, "g", ld, sizeof ld),
                !strcmp(ld, pre[1].str)) &&
                   pending_total(adm, Q_STREAM, "g") == 0,
               5000, "the child to handle and ack pre0, pre1");
    /* ...then ten at once: the child reads all ten and dies on the first. */
    CMD_NOERR(adm, "EVAL",
              "for i = 0, 9 do redis.call('XADD', KEYS[1], '*', 'n', "
              "'old' .. i) end",
              "1", Q_STREAM);
    int status = wait_child(pid, 5000);
    ASSERT(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
    ASSERT_EQ_INT(pending_of(adm, Q_STREAM, "g", "w"), 10);
    emq_id all[12];
    ASSERT_EQ_SIZE(stream_ids(adm, Q_STREAM, all, 12), 12);
    /* New work arrives before the restart. */
    produce_n(s, "jobs", "new", 5);

    static recorder r;
    recorder_init(&r);
    r.stop_after = 15;
    emq_conf_t *conf = consumer_conf(s, "jobs", "g", "w", "new");
    conf_set(conf, "count", "3");
    conf_set(conf, "claim.min_idle_ms", "3600000");
    emq_consumer_t *c = recording_consumer(conf, &r);
    runner_thread t;
    start_consumer(&t, c);
    wait_for(&r, 15, 5000);
    ASSERT_OK(join_consumer(&t), &t.err);
    ASSERT_EQ_SIZE(r.n, 15);
    for (size_t i = 0; i < 10; i++) {
        char want[16];
        snprintf(want, sizeof want, "old%zu", i);
        ASSERT_EQ_STR(r.values[i], want);
        ASSERT_EQ_STR(r.ids[i], all[2 + i].str);
        ASSERT_EQ_INT(r.deliveries[i], 2);
    }
    for (size_t i = 10; i < 15; i++) {
        char want[16];
        snprintf(want, sizeof want, "new%zu", i - 10);
        ASSERT_EQ_STR(r.values[i], want);
        ASSERT_EQ_INT(r.deliveries[i], 1);
    }
    emq_consumer_stats st;
    emq_consumer_stats_get(c, &st);
    ASSERT_EQ_INT(st.acked, 15);
    ASSERT_EQ_INT(pending_total(adm, Q_STREAM, "g"), 0);
    emq_consumer_destroy(c);
    emq_conn_destroy(adm);
    emq_srv_stop(s);
}

TEST(recover_self_reply_lost_in_flight) {
    emq_srv *s = emq_srv_start(NULL);
    emq_peer_opts po = {.mode = EMQ_PEER_PROXY,
                        .upstream_port = emq_srv_port(s)};
    emq_peer *proxy = emq_peer_start(&po);
    emq_conn_t *adm = admin_connect(s);
    static recorder r;
    recorder_init(&r);
    emq_conf_t *conf = consumer_conf(s, "jobs", "g", "w", "new");
    conf_set(conf, P_URL, emq_peer_url(proxy));
    conf_set(conf, "block_ms", "3000");
    conf_set(conf, "lease.ttl_ms", "12000");
    conf_set(conf, "claim.min_idle_ms", "3600000");
    conf_set(conf, "claim.interval_ms", "3600000");
    emq_consumer_t *c = recording_consumer(conf, &r);
    runner_thread t;
    start_consumer(&t, c);
    WAIT_UNTIL(client_id_by_name(s, "w", 1) >= 0, 5000,
               "the consumer to block in XREADGROUP");
    emq_peer_freeze(proxy, 1);
    char out[256];
    emq_srv_cmd(s, out, sizeof out, "XADD", Q_STREAM, "*", "n", "lost", NULL);
    /* The server answered the blocked read: pending for w, reply stuck. */
    WAIT_UNTIL(pending_of(adm, Q_STREAM, "g", "w") == 1, 2000,
               "the entry to become pending for w");
    ASSERT_EQ_SIZE(recorded(&r), 0);
    emq_peer_drop(proxy);
    emq_peer_freeze(proxy, 0);
    wait_for(&r, 1, 8000);
    ASSERT_OK(stop_consumer(&t), &t.err);
    ASSERT_EQ_SIZE(r.n, 1);
    ASSERT_EQ_STR(r.values[0], "lost");
    /* The lost reply is not a delivery: the lease still held w's token
     * after the reconnect, so the entry cannot have reached a handler
     * (test_consumer_counts.c). */
    ASSERT_EQ_INT(r.deliveries[0], 1);
    emq_consumer_stats st;
    emq_consumer_stats_get(c, &st);
    ASSERT(st.reconnects >= 1);
    ASSERT_EQ_INT(st.acked, 1);
    ASSERT_EQ_INT(pending_total(adm, Q_STREAM, "g"), 0);
    emq_consumer_destroy(c);
    emq_conn_destroy(adm);
    emq_peer_stop(proxy);
    emq_srv_stop(s);
}

/* Makes n entries {"n": "v<i>"} pending for consumer owner (a raw read as
 * that consumer from the admin connection); ids gets them. */
static void pending_for(emq_conn_t *adm, const emq_srv *s, const char *owner,
                        int n, emq_id *ids) {
    CMD_NOERR(adm, "XGROUP", "CREATE", Q_STREAM, "g", "$", "MKSTREAM");
    produce_n(s, "jobs", "v", n);
    char count[16];
    snprintf(count, sizeof count, "%d", n);
    emq_reply *r = CMD(adm, "XREADGROUP", "GROUP", "g", owner, "COUNT", count,
                       "STREAMS", Q_STREAM, ">");
    emq_reply_free(r);
    ASSERT_EQ_INT(pending_of(adm, Q_STREAM, "g", owner), n);
    ASSERT_EQ_SIZE(stream_ids(adm, Q_STREAM, ids, (size_t)n), (size_t)n);
}

TEST(recover_self_deleted_while_pending_acked_not_handled) {
    emq_srv *s = emq_srv_start(NULL);
    emq_conn_t *adm = admin_connect(s);
    emq_id ids[6];
    pending_for(adm, s, "w", 6, ids);
    ASSERT_EQ_INT(CMD_INT(adm, "XDEL", Q_STREAM, ids[1].str, ids[3].str), 2);
    static recorder r;
    recorder_init(&r);
    r.stop_after = 4;
    emq_conf_t *conf = consumer_conf(s, "jobs", "g", "w", "new");
    conf_set(conf, "count", "2");
    conf_set(conf, "claim.min_idle_ms", "3600000");
    emq_consumer_t *c = recording_consumer(conf, &r);
    runner_thread t;
    start_consumer(&t, c);
    wait_for(&r, 4, 5000);
    ASSERT_OK(join_consumer(&t), &t.err);
    ASSERT_EQ_SIZE(r.n, 4);
    const char *want[] = {"v0", "v2", "v4", "v5"};
    for (size_t i = 0; i < 4; i++)
        ASSERT_EQ_STR(r.values[i], want[i]);
    emq_consumer_stats st;
    emq_consumer_stats_get(c, &st);
    ASSERT_EQ_INT(st.deleted_pending, 2);
    ASSERT_EQ_INT(st.delivered, 4);
    ASSERT_EQ_INT(pending_total(adm, Q_STREAM, "g"), 0);
    emq_consumer_destroy(c);
    emq_conn_destroy(adm);
    emq_srv_stop(s);
}

TEST(recover_self_trimmed_while_pending_acked_not_handled) {
    emq_srv *s = emq_srv_start(NULL);
    emq_conn_t *adm = admin_connect(s);
    emq_id ids[7];
    pending_for(adm, s, "w", 7, ids);
    ASSERT_EQ_INT(CMD_INT(adm, "XTRIM", Q_STREAM, "MAXLEN", "=", "0"), 7);
    static recorder r;
    recorder_init(&r);
    emq_conf_t *conf = consumer_conf(s, "jobs", "g", "w", "new");
    conf_set(conf, "count", "3");
    conf_set(conf, "claim.min_idle_ms", "3600000");
    emq_consumer_t *c = recording_consumer(conf, &r);
    runner_thread t;
    start_consumer(&t, c);
    emq_consumer_stats st;
    WAIT_UNTIL((emq_consumer_stats_get(c, &st), st.deleted_pending >= 7) &&
                   pending_total(adm, Q_STREAM, "g") == 0,
               5000, "7 trimmed entries counted and acked");
    /* A new entry afterwards is handled normally. */
    produce_n(s, "jobs", "after", 1);
    wait_for(&r, 1, 3000);
    ASSERT_OK(stop_consumer(&t), &t.err);
    ASSERT_EQ_SIZE(r.n, 1);
    ASSERT_EQ_STR(r.values[0], "after0");
    emq_consumer_stats_get(c, &st);
    ASSERT_EQ_INT(st.deleted_pending, 7);
    ASSERT_EQ_INT(st.delivered, 1);
    ASSERT_EQ_INT(pending_total(adm, Q_STREAM, "g"), 0);
    emq_consumer_destroy(c);
    emq_conn_destroy(adm);
    emq_srv_stop(s);
}

TEST(recover_peers_deleted_while_pending_counted_by_claim) {
    emq_srv *s = emq_srv_start(NULL);
    emq_conn_t *adm = admin_connect(s);
    emq_id ids[5];
    pending_for(adm, s, "dead", 5, ids);
    ASSERT_EQ_INT(
        CMD_INT(adm, "XDEL", Q_STREAM, ids[0].str, ids[2].str, ids[4].str), 3);
    static recorder r;
    recorder_init(&r);
    emq_conf_t *conf = consumer_conf(s, "jobs", "g", "live", "new");
    conf_set(conf, "claim.min_idle_ms", "100");
    conf_set(conf, "claim.interval_ms", "50");
    emq_consumer_t *c = recording_consumer(conf, &r);
    runner_thread t;
    start_consumer(&t, c);
    wait_for(&r, 2, 5000);
    emq_consumer_stats st;
    WAIT_UNTIL(pending_total(adm, Q_STREAM, "g") == 0, 3000,
               "the pending list to empty");
    ASSERT_OK(stop_consumer(&t), &t.err);
    emq_consumer_stats_get(c, &st);
    ASSERT_EQ_SIZE(r.n, 2);
    ASSERT_EQ_STR(r.values[0], "v1");
    ASSERT_EQ_STR(r.values[1], "v3");
    ASSERT_EQ_INT(st.deleted_pending, 3);
    ASSERT_EQ_INT(st.claimed, 2);
    ASSERT_EQ_INT(st.delivered, 2);
    emq_consumer_destroy(c);
    emq_conn_destroy(adm);
    emq_srv_stop(s);
}

/* ---- recover peers ------------------------------------------------------- */

TEST(recover_peers_dead_peer_after_min_idle) {
    emq_srv *s = emq_srv_start(NULL);
    emq_conn_t *adm = admin_connect(s);
    int64_t t0 = now_ms();
    emq_id ids[5];
    pending_for(adm, s, "dead", 5, ids);
    static recorder r;
    recorder_init(&r);
    emq_conf_t *conf = consumer_conf(s, "jobs", "g", "live", "new");
    conf_set(conf, "claim.min_idle_ms", "300");
    conf_set(conf, "claim.interval_ms", "50");
    emq_consumer_t *c = recording_consumer(conf, &r);
    runner_thread t;
    start_consumer(&t, c);
    wait_for(&r, 1, 5000);
    int64_t first = now_ms() - t0;
    wait_for(&r, 5, 5000);
    WAIT_UNTIL(pending_total(adm, Q_STREAM, "g") == 0, 3000,
               "claimed entries to be acked");
    ASSERT_OK(stop_consumer(&t), &t.err);
    ASSERT(first >= 300);
    ASSERT_EQ_SIZE(r.n, 5);
    for (size_t i = 0; i < 5; i++) {
        ASSERT_EQ_STR(r.ids[i], ids[i].str);
        ASSERT(r.deliveries[i] >= 2);
    }
    emq_consumer_stats st;
    emq_consumer_stats_get(c, &st);
    ASSERT_EQ_INT(st.claimed, 5);
    ASSERT_EQ_INT(st.acked, 5);
    emq_consumer_destroy(c);
    emq_conn_destroy(adm);
    emq_srv_stop(s);
}

TEST(recover_peers_live_slow_peer_not_stolen_early) {
    emq_srv *s = emq_srv_start(NULL);
    emq_conn_t *adm = admin_connect(s);
    emq_id ids[4];
    int64_t t0 = now_ms();
    pending_for(adm, s, "slow", 4, ids);
    static recorder r;
    recorder_init(&r);
    emq_conf_t *conf = consumer_conf(s, "jobs", "g", "live", "new");
    /* Min idle 4 s against looks for 1.5 s: a test thread held up for
     * 2.5 s past the loop would be needed to see a rightful claim as an
     * early one (with 2 s, half a second was enough). */
    conf_set(conf, "claim.min_idle_ms", "4000");
    conf_set(conf, "claim.interval_ms", "50");
    emq_consumer_t *c = recording_consumer(conf, &r);
    runner_thread t;
    start_consumer(&t, c);
    /* Many beats run while the entries are younger than min idle. */
    while (now_ms() - t0 < 1500) {
        for (int i = 0; i < 4; i++) {
            char owner[64];
            long long n;
            pending_entry(adm, Q_STREAM, "g", ids[i].str, owner, sizeof owner,
                          &n);
            ASSERT_EQ_STR(owner, "slow");
            ASSERT_EQ_INT(n, 1);
        }
        usleep(50000);
    }
    ASSERT_EQ_SIZE(recorded(&r), 0);
    emq_consumer_stats st;
    emq_consumer_stats_get(c, &st);
    ASSERT_EQ_INT(st.claimed, 0);
    /* Past min idle they do move (the beat was running all along). */
    wait_for(&r, 4, 8000);
    ASSERT(now_ms() - t0 >= 4000);
    ASSERT_OK(stop_consumer(&t), &t.err);
    ASSERT_EQ_INT(pending_of(adm, Q_STREAM, "g", "slow"), 0);
    emq_consumer_destroy(c);
    emq_conn_destroy(adm);
    emq_srv_stop(s);
}

TEST(recover_peers_beat_follows_cursor_to_the_end) {
    emq_srv *s = emq_srv_start(NULL);
    emq_conn_t *adm = admin_connect(s);
    /* 3000 entries pending for "dead", all fresh except the last 50. */
    CMD_NOERR(adm, "XGROUP", "CREATE", Q_STREAM, "g", "$", "MKSTREAM");
    long long n = CMD_INT(
        adm, "EVAL",
        "for i = 0, 2999 do redis.call('XADD', KEYS[1], '*', 'n', 'v' .. i) "
        "end\n"
        "local r = redis.call('XREADGROUP', 'GROUP', 'g', 'dead', 'COUNT', "
        "3000, 'STREAMS', KEYS[1], '>')\n"
        "local e = r[1][2]\n"
        "for i = #e - 49, #e do redis.call('XCLAIM', KEYS[1], 'g', 'dead', "
        "0, e[i][1], 'IDLE', 600000, 'JUSTID') end\n"
        "return #e",
        "1", Q_STREAM);
    ASSERT_EQ_INT(n, 3000);
    emq_reply *idle =
        CMD(adm, "XPENDING", Q_STREAM, "g", "IDLE", "300000", "-", "+", "1000");
    ASSERT_EQ_SIZE(emq_reply_len(idle), 50);
    char first_idle[EMQ_ID_MAX], last_idle[EMQ_ID_MAX];
    reply_text(emq_reply_at(emq_reply_at(idle, 0), 0), first_idle,
               sizeof first_idle);
    reply_text(emq_reply_at(emq_reply_at(idle, 49), 0), last_idle,
               sizeof last_idle);
    emq_reply_free(idle);

    static recorder r;
    recorder_init(&r);
    emq_conf_t *conf = consumer_conf(s, "jobs", "g", "live", "new");
    conf_set(conf, "claim.min_idle_ms", "60000");
    conf_set(conf, "claim.interval_ms", "50");
    conf_set(conf, "claim.count", "10");
    emq_consumer_t *c = recording_consumer(conf, &r);
    runner_thread t;
    start_consumer(&t, c);
    wait_for(&r, 50, 10000);
    ASSERT_OK(stop_consumer(&t), &t.err);
    ASSERT_EQ_SIZE(r.n, 50);
    for (size_t i = 0; i < 50; i++) {
        char want[16];
        snprintf(want, sizeof want, "v%zu", 2950 + i);
        ASSERT_EQ_STR(r.values[i], want);
    }
    ASSERT_EQ_STR(r.ids[0], first_idle);
    ASSERT_EQ_STR(r.ids[49], last_idle);
    ASSERT_EQ_INT(pending_of(adm, Q_STREAM, "g", "dead"), 2950);
    ASSERT_EQ_INT(pending_total(adm, Q_STREAM, "g"), 2950);
    emq_consumer_destroy(c);
    emq_conn_destroy(adm);
    emq_srv_stop(s);
}

TEST_TIMEOUT(recover_peers_beat_cost_on_100k_pending, 60) {
    emq_srv *s = emq_srv_start(NULL);
    emq_conn_t *adm = admin_connect(s);
    CMD_NOERR(adm, "XGROUP", "CREATE", Q_STREAM, "g", "$", "MKSTREAM");
    int64_t setup = now_ms();
    long long n = CMD_INT(
        adm, "EVAL",
        "for i = 0, 99999 do redis.call('XADD', KEYS[1], '*', 'n', i) end\n"
        "local r = redis.call('XREADGROUP', 'GROUP', 'g', 'dead', 'COUNT', "
        "100000, 'STREAMS', KEYS[1], '>')\n"
        "return #r[1][2]",
        "1", Q_STREAM);
    ASSERT_EQ_INT(n, 100000);
    ASSERT_EQ_INT(pending_total(adm, Q_STREAM, "g"), 100000);
    fprintf(stderr, "    setup of 100000 pending entries: %lld ms\n",
            (long long)(now_ms() - setup));
    CMD_NOERR(adm, "CONFIG", "RESETSTAT");

    static recorder r;
    recorder_init(&r);
    emq_conf_t *conf = consumer_conf(s, "jobs", "g", "live", "new");
    conf_set(conf, "claim.min_idle_ms", "3600000");
    conf_set(conf, "claim.interval_ms", "100");
    emq_consumer_t *c = recording_consumer(conf, &r);
    runner_thread t;
    int64_t start = now_ms();
    start_consumer(&t, c);
    /* At least 3 s of the run, and at least ten beats (a slow run takes
     * longer to make them). */
    long long calls, usec;
    WAIT_UNTIL((cmdstat(adm, "xautoclaim", &calls, &usec), calls >= 10), 10000,
               "ten claim beats");
    while (now_ms() - start < 3000)
        usleep(20000);
    ASSERT_OK(stop_consumer(&t), &t.err);
    int64_t wall_ms = now_ms() - start;
    cmdstat(adm, "xautoclaim", &calls, &usec);
    double share = (double)usec / ((double)wall_ms * 1000.0);
    fprintf(stderr,
            "    claim beat on 100000 pending: %lld XAUTOCLAIM calls, %lld "
            "usec in %lld ms wall = %.2f%% of the server's time\n",
            calls, usec, (long long)wall_ms, share * 100.0);
    /* The beat did run: every 100 ms asked, but an idle redis-server (hz
     * 10) ends a blocked read only at its next 100 ms tick, so a beat
     * comes every 100 to 200 ms. */
    ASSERT(calls >= 10);
    /* The cost, by structure: one XAUTOCLAIM per beat (it examines up to
     * COUNT x 10 entries) when nothing is idle enough, so at most one per
     * 100 ms of the run, with a few to spare for the start. A beat that
     * went on through the whole pending list would make about a hundred
     * calls per beat. A loaded machine makes fewer beats, never more. */
    if (calls > wall_ms / 100 + 10)
        FAIL("%lld XAUTOCLAIM calls in %lld ms: more than one per beat", calls,
             (long long)wall_ms);
    /* And in the server's command time, loosely (about 2% when quiet): a
     * loaded server is preempted inside its commands, which stretches
     * their measured time; a call per beat through the whole list would
     * take most of it. */
    ASSERT(share < 0.25 * emq_test_ms(1));
    ASSERT_EQ_SIZE(r.n, 0);
    ASSERT_EQ_INT(pending_of(adm, Q_STREAM, "g", "dead"), 100000);
    emq_consumer_destroy(c);
    emq_conn_destroy(adm);
    emq_srv_stop(s);
}
