/* SPDX-License-Identifier: BSD-3-Clause */
/* test_consumer_scripts.c: the consumer's server-side scripts and the
 * retry schedule, against a real redis-server.
 *
 * - A retry's delay holds for every claimer: an entry whose holder failed
 *   it (a 4 s backoff on the schedule) and then died is taken over by a
 *   peer with a short claim.min_idle_ms only once its delay has passed,
 *   counted once (run mode, and pull mode).
 * - An entry trimmed while it waits out its retry delay is counted as
 *   deleted while pending by its holder, not as lost ownership, also when
 *   a peer's XAUTOCLAIM (7.0+ drops deleted entries from every consumer's
 *   pending list) got there before the holder's refresh; its reason and
 *   schedule are cleared.
 */
#include "integ/poll_helpers.h"

#define SQ "emq:{jobs}"
#define SQ_RETRY "emq:{jobs}:retry:g"
#define SQ_REASONS "emq:{jobs}:reasons:g"

static emq_conf_t *scripts_conf(const emq_srv *s, const char *name,
                                const char *min_idle) {
    emq_conf_t *conf = consumer_conf(s, "jobs", "g", name, "new");
    conf_set(conf, "lease.ttl_ms", "3000");
    conf_set(conf, "claim.min_idle_ms", min_idle);
    conf_set(conf, "claim.interval_ms", "50");
    conf_set(conf, "max_deliveries", "10");
    conf_set(conf, "retry.backoff_ms", "60000");
    conf_set(conf, "retry.backoff_max_ms", "60000");
    return conf;
}

/* Server TIME in unix ms. */
static long long srv_ms(const emq_srv *s) {
    char out[128];
    ASSERT_EQ_INT(emq_srv_cmd(s, out, sizeof out, "TIME", NULL), '*');
    char *nl = strchr(out, '\n');
    ASSERT(nl != NULL);
    return atoll(out) * 1000 + atoll(nl + 1) / 1000;
}

/* A holder "w" that read x0, failed it with a 4 s retry delay on the
 * schedule (as the retry settlement writes it: reason, then due time by
 * server TIME) and died without a trace but its pending entry. A peer
 * with claim.min_idle_ms 300 must not hand x0 out before it is due. */
TEST_TIMEOUT(scripts_claim_waits_out_a_dead_holders_retry_delay, 30) {
    emq_srv *s = emq_srv_start(NULL);
    emq_conn_t *adm = admin_connect(s);
    CMD_NOERR(adm, "XGROUP", "CREATE", SQ, "g", "$", "MKSTREAM");
    produce_n(s, "jobs", "x", 1);
    emq_id ids[1];
    ASSERT_EQ_SIZE(stream_ids(adm, SQ, ids, 1), 1);
    CMD_NOERR(adm, "XREADGROUP", "GROUP", "g", "w", "COUNT", "1", "STREAMS", SQ,
              ">");
    /* The local clock first: the server's TIME is read after it, so the
     * local due time is never later than the server's (a thread held up
     * between the two reads would have moved it later, and a hand-out at
     * the real due time would have looked early). */
    int64_t due_local = now_ms() + 4000;
    long long due = srv_ms(s) + 4000;
    char score[32];
    snprintf(score, sizeof score, "%lld", due);
    CMD_NOERR(adm, "HSET", SQ_REASONS, ids[0].str, "later");
    CMD_NOERR(adm, "ZADD", SQ_RETRY, score, ids[0].str);

    static slow h;
    slow_init(&h);
    bg p;
    emq_consumer_t *P =
        bg_start(&p, scripts_conf(s, "p", "300"), slow_handle, &h);
    WAIT_UNTIL(recorded(&h.r) >= 1 || atomic_load(&p.done), 10000,
               "x0 handed to the peer");
    if (atomic_load(&p.done))
        FAIL("the peer's run ended: %s", p.err.message);
    int64_t early = due_local - h.at[0];
    fprintf(stderr, "    x0 handed out %lld ms %s its retry was due\n",
            (long long)(early > 0 ? early : -early),
            early > 0 ? "before" : "after");
    ASSERT(h.at[0] >= due_local - 150); /* clocks read apart: a margin */
    WAIT_UNTIL(pending_total(adm, SQ, "g") == 0, 3000, "x0 acknowledged");
    ASSERT_OK(bg_stop(&p, 3000), &p.err);
    ASSERT_EQ_SIZE(h.r.n, 1);
    ASSERT_EQ_INT(h.r.deliveries[0], 2); /* counted once by the peer */
    ASSERT_EQ_STR(h.consumers[0], "p");
    ASSERT_EQ_INT(CMD_INT(adm, "ZCARD", SQ_RETRY), 0);
    ASSERT_EQ_INT(CMD_INT(adm, "EXISTS", SQ_REASONS), 0);
    emq_consumer_stats st;
    emq_consumer_stats_get(P, &st);
    ASSERT_EQ_INT(st.claimed, 1);
    emq_consumer_destroy(P);
    emq_conn_destroy(adm);
    emq_srv_stop(s);
}

/* The same in pull mode: the peer polls. */
TEST_TIMEOUT(scripts_claim_waits_out_a_dead_holders_retry_delay_poll, 30) {
    emq_srv *s = emq_srv_start(NULL);
    emq_conn_t *adm = admin_connect(s);
    CMD_NOERR(adm, "XGROUP", "CREATE", SQ, "g", "$", "MKSTREAM");
    produce_n(s, "jobs", "x", 1);
    emq_id ids[1];
    ASSERT_EQ_SIZE(stream_ids(adm, SQ, ids, 1), 1);
    CMD_NOERR(adm, "XREADGROUP", "GROUP", "g", "w", "COUNT", "1", "STREAMS", SQ,
              ">");
    int64_t due_local = now_ms() + 4000; /* first: as above */
    long long due = srv_ms(s) + 4000;
    char score[32];
    snprintf(score, sizeof score, "%lld", due);
    CMD_NOERR(adm, "HSET", SQ_REASONS, ids[0].str, "later");
    CMD_NOERR(adm, "ZADD", SQ_RETRY, score, ids[0].str);
    emq_consumer_t *P;
    emq_error err;
    emq_conf_t *conf = scripts_conf(s, "p", "300");
    ASSERT_OK(emq_consumer_new(conf, NULL, NULL, &P, &err), &err);
    emq_conf_destroy(conf);
    static work_pool pool;
    wp_start(&pool, P, 1, 0);
    int64_t seen = 0;
    for (int64_t end = now_ms() + emq_test_ms(10000);
         now_ms() < end && seen == 0;) {
        if (recorded(&pool.r) >= 1)
            seen = now_ms();
        else
            usleep(5000);
    }
    ASSERT(seen != 0);
    WAIT_UNTIL(pending_total(adm, SQ, "g") == 0, 3000, "x0 acknowledged");
    wp_stop(&pool);
    ASSERT_OK(emq_consumer_close(P, 5000, &err), &err);
    int64_t early = due_local - seen;
    fprintf(stderr, "    x0 polled %lld ms %s its retry was due\n",
            (long long)(early > 0 ? early : -early),
            early > 0 ? "before" : "after");
    ASSERT(seen >= due_local - 150);
    ASSERT_EQ_SIZE(recorded(&pool.r), 1);
    ASSERT_EQ_INT(pool.r.deliveries[0], 2);
    ASSERT_EQ_INT(atomic_load(&pool.settle_errors), 0);
    emq_consumer_destroy(P);
    emq_conn_destroy(adm);
    emq_srv_stop(s);
}

/* Holder A refreshes every second (claim.min_idle_ms 4000); peer B's
 * claim beat runs every 50 ms. x0, retried by A with a long delay, is
 * trimmed away: B's XAUTOCLAIM drops it from A's pending list first (7.0+;
 * 6.2 leaves it, and A's refresh finds it gone as well), then A's refresh
 * finds it neither pending nor in the stream: deleted while pending, not
 * taken by a peer. */
TEST_TIMEOUT(scripts_trimmed_while_waiting_is_deleted_not_lost, 30) {
    emq_srv *s = emq_srv_start(NULL);
    emq_conn_t *adm = admin_connect(s);
    CMD_NOERR(adm, "XGROUP", "CREATE", SQ, "g", "$", "MKSTREAM");
    static slow ha, hb;
    slow_init(&ha);
    slow_init(&hb);
    snprintf(ha.retry_prefix, sizeof ha.retry_prefix, "x");
    bg a, b;
    emq_consumer_t *A =
        bg_start(&a, scripts_conf(s, "a", "4000"), slow_handle, &ha);
    WAIT_UNTIL(client_id_by_name(s, "a", 1) >= 0, 5000,
               "consumer a to block in XREADGROUP");
    produce_n(s, "jobs", "x", 1);
    WAIT_UNTIL(recorded(&ha.r) >= 1, 5000, "x0 delivered to a");
    WAIT_UNTIL(CMD_INT(adm, "ZCARD", SQ_RETRY) == 1, 3000,
               "the retry of x0 to be recorded");
    emq_consumer_t *B =
        bg_start(&b, scripts_conf(s, "b", "60000"), slow_handle, &hb);
    WAIT_UNTIL(client_id_by_name(s, "b", 1) >= 0, 5000,
               "consumer b to block in XREADGROUP");
    /* Trim it (an XADD with MAXLEN would do the same). */
    CMD_NOERR(adm, "XTRIM", SQ, "MAXLEN", "0");
    WAIT_UNTIL(pending_total(adm, SQ, "g") == 0, 5000,
               "x0 out of the pending list");
    emq_consumer_stats sa;
    WAIT_UNTIL(
        (emq_consumer_stats_get(A, &sa),
         sa.deleted_pending + sa.ownership_lost >= 1 && sa.in_flight == 0),
        5000, "a's refresh to find x0 gone");
    WAIT_UNTIL(CMD_INT(adm, "EXISTS", SQ_RETRY) == 0 &&
                   CMD_INT(adm, "EXISTS", SQ_REASONS) == 0,
               3000, "x0's reason and schedule cleared");
    ASSERT_OK(bg_stop(&a, 3000), &a.err);
    ASSERT_OK(bg_stop(&b, 3000), &b.err);
    emq_consumer_stats_get(A, &sa);
    fprintf(stderr, "    a: deleted_pending %llu, ownership_lost %llu\n",
            (unsigned long long)sa.deleted_pending,
            (unsigned long long)sa.ownership_lost);
    ASSERT_EQ_INT(sa.ownership_lost, 0);
    ASSERT_EQ_INT(sa.deleted_pending, 1);
    ASSERT_EQ_SIZE(ha.r.n, 1);
    ASSERT_EQ_SIZE(hb.r.n, 0);
    emq_consumer_destroy(A);
    emq_consumer_destroy(B);
    emq_conn_destroy(adm);
    emq_srv_stop(s);
}
