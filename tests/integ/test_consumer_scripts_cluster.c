/* SPDX-License-Identifier: BSD-3-Clause */
/* test_consumer_scripts_cluster.c: a slot migration does not stop the
 * refresh of work in hand, on a real 3-master Redis Cluster (cluster.h).
 *
 * From CLUSTER SETSLOT ... MIGRATING on, a script naming a key the node
 * does not have (the reasons and schedule of a fresh queue) gets TRYAGAIN
 * until the slot is final, while XREADGROUP (one key) goes on. A consumer
 * whose handlers outlast claim.min_idle_ms keeps its entries only through
 * the refresh, so it must name the stream alone. Here a consumer holds
 * two entries 9-10 s (claim.min_idle_ms STALL_CLAIM_IDLE_MS, 8 s)
 * while its queue's slot is MIGRATING for 9 s, then moved; a peer runs
 * claim beats every 100 ms all along. The peer takes nothing, every entry
 * is handled once, nothing is counted lost. In run mode, and in poll mode
 * (workers settling from their threads). Claim idle is 8 s, not 1.2 s,
 * so that a stall of 5 s (a loaded machine holds a process or a node off
 * the CPU for 2-4 s now and then) does not let the peer take a live
 * entry; the migration outlasts it, so that a refresh refused throughout
 * (TRYAGAIN) still loses the entries.
 *
 * The dead-letter move still names several keys (it must be one atomic
 * step): while the slot migrates it is answered TRYAGAIN, and the upkeep
 * thread that sends it waits; a wait past a quarter of claim.min_idle_ms
 * is warned about once per episode.
 *
 * Redis 7.2.6 crashes when MIGRATE removes a stream a client is blocked
 * on (test_cluster_queue.c): the tests are named skips there.
 */
#include "cluster/cluster.h" /* emq__cluster_key_slot */
#include "harness/cluster.h"
#include "integ/poll_helpers.h"
#include "integ/tally_helpers.h"

static emq_conf_t *mig_conf(emq_cl *cl, int node, const char *name) {
    emq_conf_t *conf =
        consumer_conf(emq_cl_node(cl, node), "jobs", "g", name, "new");
    conf_set(conf, P_RECONNECT_BASE, "50");
    conf_set(conf, "lease.ttl_ms", "8000");
    conf_set(conf, "claim.min_idle_ms", "1200"); /* refresh every 300 ms */
    conf_set(conf, "claim.interval_ms", "100");
    conf_set(conf, "count", "2");
    return conf;
}

/* mig_conf with the timings of the ownership cases: claim idle and lease
 * that outlast a stall of 5 s (poll_helpers.h). */
static emq_conf_t *owned_conf(emq_cl *cl, int node, const char *name) {
    emq_conf_t *conf = mig_conf(cl, node, name);
    conf_set(conf, "claim.min_idle_ms", STALL_CLAIM_IDLE);
    conf_set(conf, "lease.ttl_ms", STALL_LEASE_TTL);
    return conf;
}

/* How long the ownership cases keep the slot MIGRATING: past claim idle
 * from the first refresh it holds up. */
#define MIGRATING_MS (STALL_CLAIM_IDLE_MS + 1000)

/* MIGRATING (and IMPORTING) for hold_ms, then the keys moved and the slot
 * made final. */
static void slow_migration(emq_cl *cl, unsigned slot, int from, int to,
                           int hold_ms) {
    emq_cl_migrate_begin(cl, slot, from, to);
    usleep((useconds_t)hold_ms * 1000);
    emq_cl_migrate_keys(cl, slot, from, to);
    emq_cl_migrate_finish(cl, slot, from, to);
}

static int crashes_on_blocked_migrate(emq_cl *cl) {
    const emq_srv *n0 = emq_cl_node(cl, 0);
    return !emq_srv_is_valkey(n0) && emq_srv_redis_at_least(n0, 7, 2);
}

/* Run mode: consumer a holds m0 (in its handler) and m1 (waiting behind
 * it) 9 s; peer b beats. */
static void run_mode(emq_cl *cl, unsigned slot, int from, int to) {
    static slow ha, hb;
    slow_init(&ha);
    slow_init(&hb);
    snprintf(ha.sleep_prefix, sizeof ha.sleep_prefix, "m0");
    ha.sleep_ms = MIGRATING_MS;
    /* Both entries there before a reads: one read takes both. */
    char out[256];
    ASSERT_EQ_INT(emq_srv_cmd(emq_cl_node(cl, from), out, sizeof out, "XGROUP",
                              "CREATE", "emq:{jobs}", "g", "$", "MKSTREAM",
                              NULL),
                  '+');
    produce_n(emq_cl_node(cl, from), "jobs", "m", 2);
    bg a, b;
    emq_consumer_t *A =
        bg_start(&a, owned_conf(cl, from, "a"), slow_handle, &ha);
    WAIT_UNTIL(atomic_load(&ha.in_handler) == 1, 5000, "m0 in a's handler");
    emq_consumer_t *B =
        bg_start(&b, owned_conf(cl, from, "b"), slow_handle, &hb);
    usleep(300 * 1000);
    slow_migration(cl, slot, from, to, MIGRATING_MS);
    WAIT_UNTIL(recorded(&ha.r) >= 2 || recorded(&hb.r) > 0, 15000,
               "m1 handled");
    WAIT_UNTIL(atomic_load(&ha.returned) >= 2 || recorded(&hb.r) > 0, 10000,
               "a's handlers to return");
    emq_consumer_stats st;
    WAIT_UNTIL((emq_consumer_stats_get(A, &st), st.acked >= 2) ||
                   recorded(&hb.r) > 0,
               10000, "a's acks");
    wait_two_more_reads(B, NULL, 10000); /* a claim by b would show */
    ASSERT_OK(bg_stop(&a, 10000), &a.err);
    ASSERT_OK(bg_stop(&b, 10000), &b.err);
    emq_consumer_stats sa, sb;
    emq_consumer_stats_get(A, &sa);
    emq_consumer_stats_get(B, &sb);
    fprintf(stderr,
            "    run mode: a handled %zu, b handled %zu (claimed %llu); a "
            "lost %llu\n",
            recorded(&ha.r), recorded(&hb.r), (unsigned long long)sb.claimed,
            (unsigned long long)sa.ownership_lost);
    ASSERT_EQ_SIZE(recorded(&hb.r), 0);
    ASSERT_EQ_INT(sb.claimed, 0);
    ASSERT_EQ_SIZE(recorded(&ha.r), 2);
    ASSERT_EQ_INT(times_seen(&ha.r, "m0"), 1);
    ASSERT_EQ_INT(times_seen(&ha.r, "m1"), 1);
    ASSERT_EQ_INT(sa.ownership_lost, 0);
    ASSERT_EQ_INT(sa.acked, 2);
    emq_consumer_destroy(A);
    emq_consumer_destroy(B);
}

/* Poll mode: consumer c's workers hold p0 and p1 (10 s each); peer d
 * beats. */
static void poll_mode(emq_cl *cl, unsigned slot, int from, int to) {
    emq_conf_t *conf = owned_conf(cl, from, "c");
    conf_set(conf, "max_in_flight", "2");
    emq_consumer_t *C;
    emq_error err;
    ASSERT_OK(emq_consumer_new(conf, NULL, NULL, &C, &err), &err);
    emq_conf_destroy(conf);
    /* Both entries there before c reads (the caller made the group). */
    produce_n(emq_cl_node(cl, from), "jobs", "p", 2);
    static work_pool pool;
    wp_start(&pool, C, 2, MIGRATING_MS + 1000);
    WAIT_UNTIL(atomic_load(&pool.busy) == 2, 5000, "p0 and p1 in c's workers");
    static slow hd;
    slow_init(&hd);
    bg d;
    emq_consumer_t *D =
        bg_start(&d, owned_conf(cl, from, "d"), slow_handle, &hd);
    usleep(300 * 1000);
    slow_migration(cl, slot, from, to, MIGRATING_MS);
    WAIT_UNTIL(atomic_load(&pool.busy) == 0, 10000, "c's workers to finish");
    emq_consumer_stats st;
    WAIT_UNTIL((emq_consumer_stats_get(C, &st), st.acked >= 2) ||
                   recorded(&hd.r) > 0,
               10000, "c's acks");
    wait_two_more_reads(D, NULL, 10000); /* a claim by d would show */
    wp_stop(&pool);
    ASSERT_OK(emq_consumer_close(C, 10000, &err), &err);
    ASSERT_OK(bg_stop(&d, 10000), &d.err);
    emq_consumer_stats sc, sd;
    emq_consumer_stats_get(C, &sc);
    emq_consumer_stats_get(D, &sd);
    fprintf(stderr,
            "    poll mode: c handled %zu (settle errors %d%s%s), d handled "
            "%zu (claimed %llu); c lost %llu\n",
            recorded(&pool.r), atomic_load(&pool.settle_errors),
            pool.last_error[0] ? ": " : "", pool.last_error, recorded(&hd.r),
            (unsigned long long)sd.claimed,
            (unsigned long long)sc.ownership_lost);
    ASSERT_EQ_SIZE(recorded(&hd.r), 0);
    ASSERT_EQ_INT(sd.claimed, 0);
    ASSERT_EQ_SIZE(recorded(&pool.r), 2);
    ASSERT_EQ_INT(atomic_load(&pool.settle_errors), 0);
    ASSERT_EQ_INT(sc.ownership_lost, 0);
    ASSERT_EQ_INT(sc.acked, 2);
    emq_consumer_destroy(C);
    emq_consumer_destroy(D);
}

/* Starts the cluster, or skips where migrations crash the server; sets
 * the queue's slot, its owner and another master. */
static emq_cl *mig_cluster(unsigned *slot, int *owner, int *to) {
    emq_cl *cl = emq_cl_start(3, 0);
    if (crashes_on_blocked_migrate(cl)) {
        emq_cl_stop(cl);
        SKIP("Redis 7.2 crashes when MIGRATE removes a stream a client is "
             "blocked on (valkey-io/valkey#563)");
    }
    *slot = emq__cluster_key_slot("emq:{jobs}", 10);
    *owner = emq_cl_owner(cl, 0, *slot);
    *to = emq_cl_other_master(cl, *owner);
    ASSERT(*owner >= 0 && *to >= 0 && *to != *owner);
    return cl;
}

TEST_TIMEOUT(scripts_cluster_migration_keeps_slow_work_owned_run, 90) {
    unsigned slot;
    int owner, to;
    emq_cl *cl = mig_cluster(&slot, &owner, &to);
    run_mode(cl, slot, owner, to);
    emq_cl_stop(cl);
}

TEST_TIMEOUT(scripts_cluster_migration_keeps_slow_work_owned_poll, 90) {
    unsigned slot;
    int owner, to;
    emq_cl *cl = mig_cluster(&slot, &owner, &to);
    char out[256];
    ASSERT_EQ_INT(emq_srv_cmd(emq_cl_node(cl, owner), out, sizeof out, "XGROUP",
                              "CREATE", "emq:{jobs}", "g", "$", "MKSTREAM",
                              NULL),
                  '+');
    poll_mode(cl, slot, owner, to);
    emq_cl_stop(cl);
}

/* Log lines that name a TRYAGAIN wait of settlements. */
static atomic_int tryagain_warnings;

static void count_tryagain(void *opaque, emq_log_level level, const char *msg) {
    (void)opaque;
    if (level == EMQ_LOG_WARNING &&
        strstr(msg, "settlements were answered TRYAGAIN") != NULL)
        atomic_fetch_add(&tryagain_warnings, 1);
}

/* d0 is dead-lettered while the slot is MIGRATING; s1, behind it in the
 * same read, holds the run thread for 3 s, so the upkeep thread sends the
 * move and waits out the TRYAGAIN. One warning; the dead letter is
 * written once the slot is final. */
TEST_TIMEOUT(scripts_cluster_tryagain_wait_warned_once, 90) {
    unsigned slot;
    int owner, to;
    emq_cl *cl = mig_cluster(&slot, &owner, &to);
    char out[256];
    ASSERT_EQ_INT(emq_srv_cmd(emq_cl_node(cl, owner), out, sizeof out, "XGROUP",
                              "CREATE", "emq:{jobs}", "g", "$", "MKSTREAM",
                              NULL),
                  '+');
    atomic_store(&tryagain_warnings, 0);
    emq_cl_migrate_begin(cl, slot, owner, to);
    produce_n(emq_cl_node(cl, owner), "jobs", "d", 1);
    produce_n(emq_cl_node(cl, owner), "jobs", "s", 1);
    static slow h;
    slow_init(&h);
    snprintf(h.dead_prefix, sizeof h.dead_prefix, "d");
    snprintf(h.sleep_prefix, sizeof h.sleep_prefix, "s");
    h.sleep_ms = 3000;
    emq_conf_t *conf = mig_conf(cl, owner, "a");
    emq_conf_set_log(conf, count_tryagain, NULL);
    bg a;
    emq_consumer_t *A = bg_start(&a, conf, slow_handle, &h);
    WAIT_UNTIL(atomic_load(&h.in_handler) == 1 && recorded(&h.r) == 2, 10000,
               "s1 in the handler after d0");
    usleep(2000 * 1000);
    emq_cl_migrate_keys(cl, slot, owner, to);
    emq_cl_migrate_finish(cl, slot, owner, to);
    emq_srv *node = emq_cl_node(cl, to);
    WAIT_UNTIL(emq_srv_cmd(node, out, sizeof out, "XLEN", "emq:{jobs}:dead",
                           NULL) == ':' &&
                   atoi(out) == 1,
               15000, "d0 in the dead letters");
    ASSERT_OK(bg_stop(&a, 10000), &a.err);
    fprintf(stderr, "    %d TRYAGAIN warning(s)\n",
            atomic_load(&tryagain_warnings));
    ASSERT_EQ_INT(atomic_load(&tryagain_warnings), 1);
    emq_consumer_destroy(A);
    emq_cl_stop(cl);
}
