/* SPDX-License-Identifier: BSD-3-Clause */
/* test_consumer_durable.c: deliveries.wait_replicas, against a primary and
 * a replica (real redis-servers the fixture starts and stops by pid).
 *
 * With deliveries.exact 1 a handout's record is the removal of its
 * entry's unseen mark; deliveries.wait_replicas makes the handout wait
 * until replicas have that record (WAIT), so a failover cannot roll back
 * a delivery a handler had. Without it, a replica that lagged when the
 * primary died never saw the read: promoted, it delivers the entry again
 * as new, and its handler is told deliveries 1 after a handler had it.
 */
#include "harness/fakepeer.h"
#include "integ/ownership_helpers.h"

#include <signal.h>

#define DQ "emq:{dur}"

/* Log lines that name deliveries.wait_replicas. */
static atomic_int short_of_replicas;

static void count_log(void *opaque, emq_log_level level, const char *message) {
    (void)opaque;
    (void)level;
    if (strstr(message, "deliveries.wait_replicas"))
        atomic_fetch_add(&short_of_replicas, 1);
}

/* A consumer of dur/g on s named name, exact counts, handouts waiting
 * for one replica: lease 1400 ms, claim idle 1000 ms (WAIT 200 ms). */
static emq_conf_t *durable_conf(const emq_srv *s, const char *name) {
    emq_conf_t *conf = own_conf(s, "dur", name, 1000);
    conf_set(conf, "start", "head");
    conf_set(conf, "deliveries.exact", "1");
    conf_set(conf, "deliveries.wait_replicas", "1");
    conf_set(conf, "deliveries.wait_timeout_ms", "200");
    conf_set(conf, P_RECONNECT_BASE, "20");
    conf_set(conf, P_RECONNECT_MAX, "200");
    emq_conf_set_log(conf, count_log, NULL);
    return conf;
}

/* Starts a primary and its replica, with group g on dur and one entry
 * that the replica has too. Returns an admin connection to the
 * primary. */
static emq_conn_t *start_pair(emq_srv **primary, emq_srv **replica) {
    *primary = emq_srv_start(NULL);
    *replica = emq_srv_start(NULL);
    char out[256];
    emq_srv_cmd(*primary, out, sizeof out, "CONFIG", "SET",
                "repl-diskless-sync-delay", "0", NULL);
    replica_follow(*replica, *primary);
    emq_conn_t *adm = admin_connect(*primary);
    CMD_NOERR(adm, "XGROUP", "CREATE", DQ, "g", "$", "MKSTREAM");
    CMD_NOERR(adm, "XADD", DQ, "*", "v", "job");
    ASSERT_EQ_INT(CMD_INT(adm, "WAIT", "1", "5000"), 1);
    return adm;
}

TEST(durable_wait_replicas_needs_exact_counts_and_a_short_wait) {
    emq_conf_t *conf = conf_for("redis://127.0.0.1:1");
    conf_set(conf, "queue", "dur");
    conf_set(conf, "group", "g");
    conf_set(conf, "consumer", "w");
    conf_set(conf, "start", "new");
    conf_set(conf, "deliveries.wait_replicas", "1");
    emq_consumer_t *c = NULL;
    emq_error err;
    ASSERT_EQ_INT(emq_consumer_new(conf, slow_handle, NULL, &c, &err),
                  EMQ_EINVAL);
    ASSERT_CONTAINS(err.message, "deliveries.exact 1");
    conf_set(conf, "deliveries.exact", "1");
    conf_set(conf, "claim.min_idle_ms", "1000");
    conf_set(conf, "deliveries.wait_timeout_ms", "500");
    ASSERT_EQ_INT(emq_consumer_new(conf, slow_handle, NULL, &c, &err),
                  EMQ_EINVAL);
    ASSERT_CONTAINS(err.message, "deliveries.wait_timeout_ms (500)");
    ASSERT_CONTAINS(err.message, "claim.min_idle_ms (1000)");
    emq_conf_destroy(conf);
}

/* The replica stopped (SIGSTOP) when the entry is read: its handout waits,
 * saying why, and its handler is not called; the replica back, the
 * handler gets it (deliveries 1). The handler then holds it while the
 * primary is killed and the replica promoted: a consumer of the promoted
 * replica takes it over told deliveries 2, the truth. Before (no WAIT),
 * the handler ran while the replica lagged, and the promoted replica,
 * which never saw the read, handed the entry out again as new. */
TEST_TIMEOUT(durable_handout_waits_for_its_replica_and_survives_a_failover,
             90) {
    emq_srv *primary, *replica;
    emq_conn_t *adm = start_pair(&primary, &replica);
    ASSERT_EQ_INT(kill(emq_srv_pid(replica), SIGSTOP), 0);

    static slow h;
    slow_init(&h);
    /* Held for a while; what a does after its primary died (its ack fails)
     * changes nothing on the promoted replica. */
    h.sleep_ms = 3000;
    atomic_store(&short_of_replicas, 0);
    bg a;
    bg_start(&a, durable_conf(primary, "a"), slow_handle, &h);
    /* Read (pending on the primary), and its handout waiting on the
     * replica: said at warning level. */
    WAIT_UNTIL(atomic_load(&short_of_replicas) >= 1, 20000,
               "the handout to say it waits for a replica");
    ASSERT_EQ_INT(pending_total(adm, DQ, "g"), 1); /* read, and waiting */
    ASSERT_EQ_SIZE(recorded(&h.r), 0);
    emq_conn_destroy(adm);
    ASSERT_EQ_INT(kill(emq_srv_pid(replica), SIGCONT), 0);
    WAIT_UNTIL(recorded(&h.r) == 1, 20000,
               "the handler to get the entry once the replica has it");
    ASSERT_EQ_INT(h.r.deliveries[0], 1);

    /* The handler holds it; the primary dies, the replica takes over. */
    emq_srv_kill9(primary);
    replica_follow(replica, NULL);
    static slow h2;
    slow_init(&h2);
    bg b;
    emq_conf_t *bconf = durable_conf(replica, "b");
    /* The promoted replica stands alone: nothing to wait for. */
    conf_set(bconf, "deliveries.wait_replicas", "0");
    bg_start(&b, bconf, slow_handle, &h2);
    /* a's lease (1400 ms) lapses on the promoted replica, then its entry
     * idles past claim.min_idle_ms: b's claim beat takes it. */
    WAIT_UNTIL(recorded(&h2.r) == 1, 30000,
               "the entry taken over on the promoted replica");
    ASSERT_EQ_INT(h2.r.deliveries[0], 2); /* one handler had it before */
    ASSERT_OK(bg_stop(&b, 5000), &b.err);
    emq_consumer_destroy(b.c);
    (void)bg_stop(&a, 15000); /* its primary is gone: any status */
    emq_consumer_destroy(a.c);
    emq_srv_stop(replica);
}

/* The replica stops following (REPLICAOF NO ONE: everything after is
 * lost to it) before a read; the primary dies and the replica takes
 * over. The handout never reached its handler, so the promoted replica,
 * which never saw the read, rightly hands the entry out as new
 * (deliveries 1, no handler before). Without deliveries.wait_replicas the
 * handler ran, and the promoted replica's handout told deliveries 1
 * after a handler had had it: a count below the truth. (A replica only
 * stopped with SIGSTOP still gets what the primary had written to the
 * socket, the handout's record included, even after the primary's
 * death: the first test above.) */
TEST_TIMEOUT(durable_failover_behind_a_lagging_replica_counts_the_truth, 90) {
    emq_srv *primary, *replica;
    emq_conn_t *adm = start_pair(&primary, &replica);
    replica_follow(replica, NULL);

    static slow h;
    slow_init(&h);
    h.sleep_ms = 2000; /* still pending when it is looked at below */
    atomic_store(&short_of_replicas, 0);
    bg a;
    bg_start(&a, durable_conf(primary, "a"), slow_handle, &h);
    /* Read on the primary; then either handed out (the defect) or waiting
     * on the replica (said at warning level). */
    WAIT_UNTIL(recorded(&h.r) > 0 || atomic_load(&short_of_replicas) >= 1,
               20000, "the read's handout to go out or to wait");
    ASSERT_EQ_INT(pending_total(adm, DQ, "g"), 1);
    emq_conn_destroy(adm);
    size_t calls_before = recorded(&h.r);
    emq_srv_kill9(primary);
    static slow h2;
    slow_init(&h2);
    bg b;
    emq_conf_t *bconf = durable_conf(replica, "b");
    conf_set(bconf, "deliveries.wait_replicas", "0"); /* it stands alone */
    bg_start(&b, bconf, slow_handle, &h2);
    WAIT_UNTIL(recorded(&h2.r) == 1, 30000,
               "the entry handed out on the promoted replica");
    fprintf(stderr,
            "    %zu handler calls before the failover, then told %llu\n",
            calls_before, (unsigned long long)h2.r.deliveries[0]);
    ASSERT_EQ_SIZE(calls_before, 0); /* the handout waited */
    ASSERT_EQ_INT(h2.r.deliveries[0], calls_before + 1);
    ASSERT_OK(bg_stop(&b, 5000), &b.err);
    emq_consumer_destroy(b.c);
    (void)bg_stop(&a, 15000); /* its primary is gone: any status */
    emq_consumer_destroy(a.c);
    emq_srv_stop(replica);
}

/* A handler that holds its first entry until let go, then acknowledges;
 * every call recorded. */
typedef struct held_first {
    recorder r;
    atomic_int let_go;
} held_first;

static emq_verdict hold_first(void *opaque, const emq_entry *e, char *reason,
                              size_t reason_size) {
    held_first *h = opaque;
    record(&h->r, e, reason, reason_size);
    int64_t end = now_ms() + emq_test_ms(30000);
    while (recorded(&h->r) == 1 && !atomic_load(&h->let_go) && now_ms() < end)
        usleep(5000);
    return EMQ_ACK;
}

/* A failover that rolls an acknowledgement back (it reached the old
 * primary only) brings the entry back to the same consumer, whose lease
 * the new primary still has (the session keeps it). Its handout's record
 * reached the replica (deliveries.wait_replicas), so the entry comes back
 * unmarked: a handler had it, and the second call is told 2. Before, a
 * session that kept its lease took its own pending entries uncounted,
 * and the second call was told 1 (seen in a review: "handled twice by the
 * same consumer, both times with deliveries 1"). */
TEST_TIMEOUT(durable_ack_rolled_back_by_a_failover_counts_the_second_call, 90) {
    emq_srv *primary, *replica;
    emq_conn_t *adm = start_pair(&primary, &replica);
    emq_peer_opts po = {.mode = EMQ_PEER_SENTINEL,
                        .sentinel_master = "m",
                        .primary_port = emq_srv_port(primary)};
    emq_peer *sentinel = emq_peer_start(&po);
    char url[128];
    snprintf(url, sizeof url, "redis-sentinel://127.0.0.1:%d#m",
             emq_peer_port(sentinel));
    emq_conf_t *conf = conf_for(url);
    conf_set(conf, "queue", "dur");
    conf_set(conf, "group", "g");
    conf_set(conf, "consumer", "w");
    conf_set(conf, "start", "head");
    conf_set(conf, "block_ms", "100");
    conf_set(conf, "lease.ttl_ms", "20000");
    conf_set(conf, "deliveries.exact", "1");
    conf_set(conf, "deliveries.wait_replicas", "1");
    conf_set(conf, "deliveries.wait_timeout_ms", "200");
    conf_set(conf, P_RECONNECT_BASE, "20");
    conf_set(conf, P_RECONNECT_MAX, "200");
    emq_conf_set_log(conf, count_log, NULL);
    atomic_store(&short_of_replicas, 0);
    static held_first h;
    recorder_init(&h.r);
    atomic_store(&h.let_go, 0);
    bg a;
    bg_start(&a, conf, hold_first, &h);
    WAIT_UNTIL(recorded(&h.r) == 1, 20000, "the handler to have the entry");
    ASSERT_EQ_INT(h.r.deliveries[0], 1);
    /* The replica has the handout's record (the handout waited for it);
     * it stops following, so the acknowledgement reaches the primary
     * only. */
    replica_follow(replica, NULL);
    atomic_store(&h.let_go, 1);
    WAIT_UNTIL(pending_total(adm, DQ, "g") == 0, 20000,
               "the acknowledgement on the old primary");
    /* Its round over (its WAIT found no replica, and said so): the
     * acknowledgement counts as written, and is not sent again. */
    WAIT_UNTIL(atomic_load(&short_of_replicas) >= 1, 20000,
               "the settlements' WAIT to come back short");
    emq_conn_destroy(adm);
    /* The switch: the replica, which never saw the ack, is the primary,
     * and the old one follows it (dropping the ack), as Sentinel would
     * have it. */
    emq_peer_sentinel_switch(sentinel, emq_srv_port(replica));
    replica_follow(primary, replica);
    WAIT_UNTIL(recorded(&h.r) == 2, 30000,
               "the entry handed out again on the new primary");
    fprintf(stderr, "    second call told deliveries %llu\n",
            (unsigned long long)h.r.deliveries[1]);
    ASSERT_EQ_INT(h.r.deliveries[1], 2);
    ASSERT_OK(bg_stop(&a, 10000), &a.err);
    emq_consumer_destroy(a.c);
    emq_peer_stop(sentinel);
    emq_srv_stop(replica);
    emq_srv_stop(primary);
}
