/* SPDX-License-Identifier: BSD-3-Clause */
/* test_cluster_queue.c: queues and partitioned topics end to end on a real
 * Redis Cluster (cluster.h), through the public API and the CLI.
 *
 * Each test starts one cluster and shares it across its checks, since a
 * cluster takes seconds to create:
 * - a queue served by another node than the one the consumer, producer and
 *   admin handle are given, then its slot migrated twice while a producer
 *   adds and a consumer consumes: once under load, once while the consumer
 *   is blocked (7.0 answers the blocked read -UNBLOCKED; the consumer reads
 *   again and its route follows the redirection);
 * - a master failed over to its replica (CLUSTER FAILOVER, then the old
 *   master killed) while the consumer is inside its handler: the consumer
 *   reconnects and drains its own pending entries, nothing acknowledged is
 *   lost and nothing stays pending;
 * - a topic of 6 partitions over 3 masters: 10,000 entries without keys to
 *   a pool of 3 consumers (every entry handled exactly once), 10,000 with
 *   keys to one consumer (one partition per key, production order per
 *   key), described per partition and in total;
 * - the CLI against a cluster URL, for a queue and for a topic.
 *
 * Entries carry a unique number in field "n"; the handler counts how often
 * each number arrives.
 */
#include "cluster/cluster.h" /* emq__cluster_key_slot, emq__cluster_crc16 */
#include "harness/cluster.h"
#include "integ/cli_helpers.h"
#include "integ/cluster_helpers.h"
#include "integ/consumer_helpers.h"
#include "integ/inspect_conn_helpers.h"

#include <stdatomic.h>
#include <stdlib.h>

#define MAX_N 20000
#define KEYS 37

/* What the handler saw. */
typedef struct seen {
    atomic_int count[MAX_N]; /* deliveries handled per number */
    atomic_int distinct;     /* numbers seen at least once */
    atomic_int redelivered;  /* handler calls with deliveries > 1 */
    atomic_int slow;         /* 1: the handler waits until it is 0, */
    atomic_int slow_at;      /* at the first number >= slow_at */
    atomic_int in_slow;      /* 1 while the handler waits */
    /* Per key (keyed runs): last seq handled and the partition stream. */
    pthread_mutex_t lock;
    int last_seq[KEYS];
    char stream[KEYS][64];
    int order_errors;
    int partition_errors;
} seen;

static seen the_seen;

static seen *seen_reset(void) {
    seen *s = &the_seen;
    memset(s, 0, sizeof *s);
    pthread_mutex_init(&s->lock, NULL);
    for (int k = 0; k < KEYS; k++)
        s->last_seq[k] = -1;
    return s;
}

/* The value of field name in e as an int, or -1. */
static int field_int(const emq_entry *e, const char *name) {
    for (size_t i = 0; i < e->nfields; i++)
        if (e->fields[i].name_len == strlen(name) &&
            memcmp(e->fields[i].name, name, e->fields[i].name_len) == 0) {
            char buf[24];
            size_t n = e->fields[i].value_len < 23 ? e->fields[i].value_len
                                                   : 23;
            memcpy(buf, e->fields[i].value, n);
            buf[n] = '\0';
            return atoi(buf);
        }
    return -1;
}

static emq_verdict count_entry(void *opaque, const emq_entry *e, char *reason,
                               size_t reason_size) {
    (void)reason;
    (void)reason_size;
    seen *s = opaque;
    int n = field_int(e, "n");
    if (atomic_load(&s->slow) && n >= atomic_load(&s->slow_at)) {
        atomic_store(&s->in_slow, 1);
        for (int i = 0; i < 1000 && atomic_load(&s->slow); i++)
            usleep(10000);
        atomic_store(&s->in_slow, 0);
    }
    if (n >= 0 && n < MAX_N && atomic_fetch_add(&s->count[n], 1) == 0)
        atomic_fetch_add(&s->distinct, 1);
    if (e->deliveries > 1)
        atomic_fetch_add(&s->redelivered, 1);
    int key = field_int(e, "key"), seq = field_int(e, "seq");
    if (key >= 0 && key < KEYS) {
        pthread_mutex_lock(&s->lock);
        if (seq <= s->last_seq[key])
            s->order_errors++;
        s->last_seq[key] = seq;
        if (s->stream[key][0] == '\0')
            snprintf(s->stream[key], sizeof s->stream[key], "%s", e->stream);
        else if (strcmp(s->stream[key], e->stream) != 0)
            s->partition_errors++;
        pthread_mutex_unlock(&s->lock);
    }
    return EMQ_ACK;
}

/* Waits (bounded: timeout_ms scaled with the run, emq_test_ms) until
 * want distinct numbers were handled. */
static void wait_distinct(seen *s, int want, int timeout_ms) {
    timeout_ms = emq_test_ms(timeout_ms);
    int64_t end = now_ms() + timeout_ms;
    while (atomic_load(&s->distinct) < want) {
        if (now_ms() > end)
            FAIL("only %d of %d entries handled within %d ms",
                 atomic_load(&s->distinct), want, timeout_ms);
        usleep(10000);
    }
}

/* Total pending of group in a description (0 when absent). */
static uint64_t group_pending(const emq_queue_info *q, const char *group,
                              int64_t *lag) {
    for (size_t g = 0; g < q->ngroups; g++)
        if (strcmp(q->groups[g].name, group) == 0) {
            if (lag)
                *lag = q->groups[g].lag;
            return q->groups[g].pending;
        }
    if (lag)
        *lag = -1;
    return 0;
}

static emq_queue_info *describe(const emq_conf_t *conf) {
    emq_admin_t *a;
    emq_error err;
    ASSERT_OK(emq_admin_new(conf, &a, &err), &err);
    emq_queue_info *q = NULL;
    ASSERT_OK(emq_admin_describe(a, &q, &err), &err);
    emq_admin_destroy(a);
    return q;
}

/* ---- a producer thread that numbers its entries -------------------------- */

typedef struct adder {
    emq_producer_t *p;
    atomic_int stop;
    atomic_int pause;
    atomic_int added; /* numbers 0..added-1 were confirmed */
    int errors;       /* calls that failed (then retried) */
    int pace_us;
} adder;

static void *add_loop(void *arg) {
    adder *a = arg;
    while (!atomic_load(&a->stop) && atomic_load(&a->added) < MAX_N) {
        if (atomic_load(&a->pause)) {
            usleep(5000);
            continue;
        }
        char v[16];
        int n = atomic_load(&a->added);
        int len = snprintf(v, sizeof v, "%d", n);
        emq_field f = {"n", 1, v, (size_t)len};
        emq_error err;
        if (emq_produce(a->p, &f, 1, NULL, &err) == EMQ_OK) {
            atomic_fetch_add(&a->added, 1);
        } else {
            /* Outcome unknown or refused: the same number again (at least
             * once); the next call reconnects. */
            a->errors++;
            usleep(20000);
        }
        if (a->pace_us)
            usleep((useconds_t)a->pace_us);
    }
    return NULL;
}

/* ---- logs ---------------------------------------------------------------- */

typedef struct logcount {
    atomic_int unblocked;
} logcount;

static void count_log(void *opaque, emq_log_level level, const char *msg) {
    (void)level;
    logcount *l = opaque;
    if (strstr(msg, "UNBLOCKED"))
        atomic_fetch_add(&l->unblocked, 1);
}

/* ---- wrong node and migration -------------------------------------------- */

TEST_TIMEOUT(cluster_queue_wrong_node_and_migration, 60) {
    emq_cl *c = emq_cl_start(3, 0);
    unsigned slot = emq__cluster_key_slot("emq:{jobs}", 10);
    int owner = emq_cl_owner(c, 0, slot);
    int wrong = emq_cl_other_master(c, owner);
    ASSERT(owner >= 0 && wrong != owner);
    seen *s = seen_reset();

    /* Producer, consumer and admin all given a node that does not serve
     * the queue. */
    emq_conf_t *pconf = node_conf(c, wrong, "jobs");
    adder add;
    memset(&add, 0, sizeof add);
    emq_error err;
    ASSERT_OK(emq_producer_new(pconf, &add.p, &err), &err);
    add.pace_us = 500;
    emq_conf_t *cconf = node_conf(c, wrong, "jobs");
    consumer_settings(cconf, "g", "w1", "1000");
    logcount logs = {0};
    conf_set(cconf, "log.level", "debug");
    emq_conf_set_log(cconf, count_log, &logs);
    emq_consumer_t *cons;
    ASSERT_OK(emq_consumer_new(cconf, count_entry, s, &cons, &err), &err);
    runner_thread rt;
    start_consumer(&rt, cons);
    pthread_t pt;
    ASSERT_EQ_INT(pthread_create(&pt, NULL, add_loop, &add), 0);
    wait_distinct(s, 200, 15000);

    /* Redis 7.2.6 crashes (assertion networking.c:2066 'c->duration ==
     * 0'; valkey-io/valkey#563, fixed in Valkey 8.0) when MIGRATE removes a
     * stream a client is blocked on in XREADGROUP and the command, executed
     * again, is redirected. A live consumer is blocked at almost any moment
     * (also under load, between entries), so on Redis 7.2 both migrations
     * are left out; the wrong-node checks and the end checks still run, and
     * the test ends as a named skip. */
    const emq_srv *n0 = emq_cl_node(c, 0);
    int crashes_on_blocked_migrate = !emq_srv_is_valkey(n0) &&
                                     emq_srv_redis_at_least(n0, 7, 2);

    /* Migration under load: the producer gets ASK and then MOVED, the
     * consumer too; scripts over two keys may get TRYAGAIN. */
    int to = emq_cl_other_master(c, owner);
    if (!crashes_on_blocked_migrate) {
        emq_cl_migrate_begin(c, slot, owner, to);
        usleep(100 * 1000);
        emq_cl_migrate_keys(c, slot, owner, to);
        usleep(100 * 1000);
        emq_cl_migrate_finish(c, slot, owner, to);
    }
    int mid = atomic_load(&add.added);
    wait_distinct(s, mid + 200, 15000);

    /* Quiet stream: the consumer blocks in XREADGROUP; migrating the
     * stream away under it gets, per server (a blocked read and a key
     * that moves behave differently on each):
     * - 7.0: -UNBLOCKED (MIGRATE deletes the key first), the consumer
     *   reads again through the redirection;
     * - 6.2: nothing (deleting a key wakes no blocked reader there); the
     *   read times out and the next one is redirected;
     * - 7.2 and Valkey: the blocked command is executed again and
     *   redirected (MOVED/ASK), which the route follows: no error at all.
     *   Redis 7.2.6 crashes doing so (above): left out there. */
    int unblocked_expected = emq_srv_redis_at_least(n0, 7, 0) &&
                             !emq_srv_redis_at_least(n0, 7, 2);
    atomic_store(&add.pause, 1);
    usleep(50 * 1000);
    wait_distinct(s, atomic_load(&add.added), 15000);
    if (!crashes_on_blocked_migrate) {
        /* Each round waits (bounded) until the consumer's read is blocked
         * on the slot's node, then moves the slot away under it. A loaded
         * machine may let the read time out and go again between the look
         * and the move: then it is tried again, the other way, up to 5
         * times. */
        int from = to, dest = owner;
        for (int round = 0; round < 5; round++) {
            emq_srv *node = emq_cl_node(c, from);
            WAIT_UNTIL(client_id_by_name(node, "w1", 1) > 0, 10000,
                       "the consumer to block in XREADGROUP");
            emq_cl_move_slot(c, slot, from, dest);
            int tmp = from;
            from = dest;
            dest = tmp;
            if (!unblocked_expected)
                break;
            int64_t end = now_ms() + emq_test_ms(2000);
            while (atomic_load(&logs.unblocked) == 0 && now_ms() < end)
                usleep(10000);
            if (atomic_load(&logs.unblocked) > 0)
                break;
        }
    }
    atomic_store(&add.pause, 0);
    usleep(500 * 1000);
    atomic_store(&add.stop, 1);
    pthread_join(pt, NULL);
    int total = atomic_load(&add.added);
    ASSERT(total > mid);
    wait_distinct(s, total, 20000);
    emq_consumer_stop(cons);
    ASSERT_OK(join_consumer(&rt), &rt.err);
    /* The cluster counters are in the statistics; whether this run saw a
     * redirection depends on the server (with a slot map the route goes
     * to the owner at once, and a blocked read may sit out the migration),
     * so only the bound is checked here: nothing gave up. Counting itself
     * is checked in test_cluster_bound.c. */
    emq_consumer_stats cst;
    emq_consumer_stats_get(cons, &cst);
    ASSERT_EQ_INT(cst.cluster_gave_up, 0);
    char json[2048];
    emq_consumer_stats_json(cons, json, sizeof json);
    ASSERT_CONTAINS(json, "\"redirects\":");

    /* Every entry handled at least once, nothing pending. */
    for (int i = 0; i < total; i++)
        if (atomic_load(&s->count[i]) < 1)
            FAIL("entry %d was never handled", i);
    emq_consumer_stats st;
    emq_consumer_stats_get(cons, &st);
    ASSERT_EQ_INT(st.failed, 0);
    ASSERT_EQ_INT(st.group_recreated, 0);
    emq_conf_t *aconf = node_conf(c, wrong, "jobs");
    emq_queue_info *q = describe(aconf);
    ASSERT_EQ_INT(q->exists, 1);
    ASSERT_EQ_SIZE(q->length, (size_t)total);
    int64_t lag;
    ASSERT_EQ_INT(group_pending(q, "g", &lag), 0);
    ASSERT_EQ_INT(lag, 0);
    emq_queue_info_free(q);
    fprintf(stderr,
            "  %d entries, %d UNBLOCKED read(s) read again, "
            "producer errors %d\n",
            total, atomic_load(&logs.unblocked), add.errors);
    if (unblocked_expected && !crashes_on_blocked_migrate)
        ASSERT(atomic_load(&logs.unblocked) >= 1);
    else
        ASSERT_EQ_INT(atomic_load(&logs.unblocked), 0);
    static char label[64];
    snprintf(label, sizeof label, "%s", emq_srv_server(n0)->label);

    emq_consumer_destroy(cons);
    emq_producer_destroy(add.p);
    emq_conf_destroy(pconf);
    emq_conf_destroy(cconf);
    emq_conf_destroy(aconf);
    emq_cl_stop(c);
    if (crashes_on_blocked_migrate) {
        static char why[256];
        snprintf(why, sizeof why,
                 "%s crashes when a client blocked in XREADGROUP has its "
                 "stream's slot migrated (valkey-io/valkey#563): both "
                 "migrations were left out, the wrong-node checks passed",
                 label);
        SKIP(why);
    }
}

/* ---- failover ------------------------------------------------------------ */

TEST_TIMEOUT(cluster_queue_failover_recovers_pending, 60) {
    emq_cl *c = emq_cl_start(3, 1);
    unsigned slot = emq__cluster_key_slot("emq:{jobs}", 10);
    int old = emq_cl_owner(c, 0, slot);
    int replica = emq_cl_replica_of(c, old);
    int seed = emq_cl_other_master(c, old);
    ASSERT(replica >= 0);
    seen *s = seen_reset();

    emq_conf_t *pconf = node_conf(c, seed, "jobs");
    adder add;
    memset(&add, 0, sizeof add);
    emq_error err;
    ASSERT_OK(emq_producer_new(pconf, &add.p, &err), &err);
    add.pace_us = 500;
    emq_conf_t *cconf = node_conf(c, seed, "jobs");
    consumer_settings(cconf, "g", "w1", "200");
    conf_set(cconf, "count", "20");
    emq_consumer_t *cons;
    ASSERT_OK(emq_consumer_new(cconf, count_entry, s, &cons, &err), &err);
    runner_thread rt;
    start_consumer(&rt, cons);
    pthread_t pt;
    ASSERT_EQ_INT(pthread_create(&pt, NULL, add_loop, &add), 0);
    wait_distinct(s, 300, 15000);

    /* The consumer is inside its handler, in the middle of a delivered
     * batch, and is asked to stop (the rest of the batch stays pending)
     * when its master is failed over and killed. A burst of 60 entries
     * makes the batches full (count 20); the handler stops at the 26th. */
    atomic_store(&add.pause, 1);
    usleep(100 * 1000);
    int base = atomic_load(&add.added);
    wait_distinct(s, base, 15000);
    atomic_store(&s->slow_at, base + 25);
    atomic_store(&s->slow, 1);
    {
        static char bv[60][12];
        emq_field bf[60];
        emq_message bm[60];
        for (int i = 0; i < 60; i++) {
            int len = snprintf(bv[i], sizeof bv[i], "%d", base + i);
            bf[i] = (emq_field){"n", 1, bv[i], (size_t)len};
            bm[i] = (emq_message){&bf[i], 1, NULL};
        }
        ASSERT_OK(emq_produce_batch(add.p, bm, 60, NULL, NULL, &err), &err);
        atomic_store(&add.added, base + 60);
    }
    for (int i = 0; i < emq_test_ms(500) && !atomic_load(&s->in_slow); i++)
        usleep(10000);
    ASSERT_EQ_INT(atomic_load(&s->in_slow), 1);
    atomic_store(&add.pause, 0);
    emq_consumer_stop(cons);
    emq_cl_failover(c, replica, slot);
    emq_srv_kill9(emq_cl_node(c, old));
    atomic_store(&s->slow, 0);
    ASSERT_OK(join_consumer(&rt), &rt.err);
    /* The rest of the batch (read, never handed out) is pending in the
     * new master's copy of the pending list. */
    char held[4096];
    ASSERT(emq_srv_cmd(emq_cl_node(c, replica), held, sizeof held, "XPENDING",
                       "emq:{jobs}", "g", NULL) == '*');
    long long held_at_failover = atoll(held);

    /* Run again: its connection is to the dead master, so it reconnects
     * (finding the new master), takes its lease and drains its own
     * pending entries from the replica's copy of the pending list. */
    start_consumer(&rt, cons);
    usleep(1000 * 1000);
    atomic_store(&add.stop, 1);
    pthread_join(pt, NULL);
    int total = atomic_load(&add.added);
    wait_distinct(s, total, 20000);
    emq_consumer_stop(cons);
    ASSERT_OK(join_consumer(&rt), &rt.err);

    for (int i = 0; i < total; i++)
        if (atomic_load(&s->count[i]) < 1)
            FAIL("acknowledged entry %d was never handled", i);
    emq_consumer_stats st;
    emq_consumer_stats_get(cons, &st);
    fprintf(stderr,
            "  %d entries, consumer reconnects %llu, %lld pending "
            "at the failover, redelivered %d, producer errors %d\n",
            total, (unsigned long long)st.reconnects, held_at_failover,
            atomic_load(&s->redelivered), add.errors);
    ASSERT(st.reconnects >= 1);
    /* The rest of the batch held at the failover came back by the
     * self-drain (every entry was handled, and none is pending below);
     * never handed out, it counts as a first delivery. */
    ASSERT(held_at_failover >= 1);
    emq_queue_info *q = describe(cconf);
    ASSERT(q->length >= (uint64_t)total);
    int64_t lag;
    ASSERT_EQ_INT(group_pending(q, "g", &lag), 0);
    ASSERT_EQ_INT(lag, 0);
    emq_queue_info_free(q);

    emq_consumer_destroy(cons);
    emq_producer_destroy(add.p);
    emq_conf_destroy(pconf);
    emq_conf_destroy(cconf);
    emq_cl_stop(c);
}

/* A master killed (SIGKILL) with no failover asked: its replica promotes
 * itself once the cluster marks the master failed (cluster-node-timeout
 * 2000), and the producer and a running consumer follow it by the path
 * they take after CLUSTER FAILOVER (a transport failure, then a reconnect
 * that reads the slot map again). Every entry confirmed before the kill
 * (producer.wait_replicas 1, so on the replica) or after the promotion
 * is handled, and the consumer runs on. The times to the promotion and
 * to the first entry handled after it are printed, not asserted. */
TEST_TIMEOUT(cluster_queue_killed_master_replica_promoted, 120) {
    emq_cl *c = emq_cl_start(3, 1);
    unsigned slot = emq__cluster_key_slot("emq:{jobs}", 10);
    int old = emq_cl_owner(c, 0, slot);
    int replica = emq_cl_replica_of(c, old);
    int seed = emq_cl_other_master(c, old);
    ASSERT(replica >= 0);
    seen *s = seen_reset();
    emq_error err;
    emq_conf_t *pconf = node_conf(c, seed, "jobs");
    conf_set(pconf, "producer.wait_replicas", "1");
    conf_set_ms(pconf, "producer.wait_timeout_ms", 10000);
    adder add;
    memset(&add, 0, sizeof add);
    ASSERT_OK(emq_producer_new(pconf, &add.p, &err), &err);
    add.pace_us = 2000;
    emq_conf_t *cconf = node_conf(c, seed, "jobs");
    consumer_settings(cconf, "g", "w1", "200");
    emq_consumer_t *cons;
    ASSERT_OK(emq_consumer_new(cconf, count_entry, s, &cons, &err), &err);
    runner_thread rt;
    start_consumer(&rt, cons);
    pthread_t pt;
    ASSERT_EQ_INT(pthread_create(&pt, NULL, add_loop, &add), 0);
    wait_distinct(s, 200, 15000);

    int64_t killed = now_ms();
    emq_srv_kill9(emq_cl_node(c, old));
    char out[256];
    WAIT_UNTIL(emq_srv_cmd(emq_cl_node(c, replica), out, sizeof out, "ROLE",
                           NULL) == '*' &&
                   strncmp(out, "master", 6) == 0,
               30000, "the replica to promote itself");
    int64_t promoted = now_ms();
    /* The new master has no replica: entries from now on are confirmed
     * by it alone (a second producer, the numbering going on). */
    atomic_store(&add.stop, 1);
    pthread_join(pt, NULL);
    int before = atomic_load(&add.added);
    emq_producer_t *first = add.p;
    emq_conf_t *p2conf = node_conf(c, seed, "jobs");
    ASSERT_OK(emq_producer_new(p2conf, &add.p, &err), &err);
    atomic_store(&add.stop, 0);
    ASSERT_EQ_INT(pthread_create(&pt, NULL, add_loop, &add), 0);
    WAIT_UNTIL(atomic_load(&add.added) >= before + 1, 30000,
               "the producer to add on the new master");
    WAIT_UNTIL(atomic_load(&s->distinct) > before, 30000,
               "the consumer to handle an entry added on the new master");
    int64_t resumed = now_ms();
    WAIT_UNTIL(atomic_load(&add.added) >= before + 100, 30000,
               "a hundred more entries added");
    atomic_store(&add.stop, 1);
    pthread_join(pt, NULL);
    int total = atomic_load(&add.added);
    wait_distinct(s, total, 30000);
    for (int i = 0; i < total; i++)
        if (atomic_load(&s->count[i]) < 1)
            FAIL("confirmed entry %d was never handled", i);
    emq_consumer_stop(cons);
    ASSERT_OK(join_consumer(&rt), &rt.err);
    emq_consumer_stats st;
    emq_consumer_stats_get(cons, &st);
    fprintf(stderr,
            "    %d entries; promoted %lld ms after the kill, an entry "
            "handled %lld ms after that; consumer reconnects %llu, "
            "producer errors %d, redelivered %d\n",
            total, (long long)(promoted - killed),
            (long long)(resumed - promoted), (unsigned long long)st.reconnects,
            add.errors, atomic_load(&s->redelivered));
    ASSERT(st.reconnects >= 1);
    emq_consumer_destroy(cons);
    emq_producer_destroy(first);
    emq_producer_destroy(add.p);
    emq_conf_destroy(pconf);
    emq_conf_destroy(p2conf);
    emq_conf_destroy(cconf);
    emq_cl_stop(c);
}

/* ---- a topic of 6 partitions --------------------------------------------- */

/* Asserts that the 6 partitions of topic are served 2 by each master. */
static void assert_spread(emq_cl *c, const char *topic) {
    int per[EMQ_CL_MAX_NODES] = {0};
    for (int i = 0; i < 6; i++) {
        char key[64];
        int n = snprintf(key, sizeof key, "emq:{%s.%d}", topic, i);
        int owner = emq_cl_owner(c, 0, emq__cluster_key_slot(key, (size_t)n));
        ASSERT(owner >= 0);
        per[owner]++;
    }
    for (int m = 0; m < 3; m++)
        ASSERT_EQ_INT(per[m], 2);
}

/* 1 when each of pool's n consumers was handed an entry: only then is it
 * in a partition's group on every server. A read or claim that returns
 * nothing makes no consumer on 6.2 and 7.0 (7.2 makes one for any), so a
 * consumer with reads answered may be in no group at all. */
static int pool_all_handled(emq_pool_t *pool, int n) {
    for (int i = 0; i < n; i++) {
        emq_consumer_stats st;
        emq_consumer_stats_get(emq_pool_consumer(pool, i), &st);
        if (st.delivered == 0)
            return 0;
    }
    return 1;
}

/* The pool's consumers "w-1" .. "w-3" wait for each other (pool_entry). */
static struct {
    atomic_int handled;       /* bit i: "w-<i+1>" was handed an entry */
    _Atomic int64_t until_ms; /* past it, nobody waits */
} together;

/* count_entry, once every consumer of the pool was handed an entry (or
 * together.until_ms passed). One waiting here takes no more from that
 * partition, so a consumer that starts late on a loaded machine, after
 * the other two could have taken all 10,000, still finds entries. */
static emq_verdict pool_entry(void *opaque, const emq_entry *e, char *reason,
                              size_t reason_size) {
    const char *dash = strrchr(e->consumer, '-');
    int i = dash ? atoi(dash + 1) - 1 : -1;
    if (i >= 0 && i < 3)
        atomic_fetch_or(&together.handled, 1 << i);
    while (atomic_load(&together.handled) != 7 &&
           now_ms() < atomic_load(&together.until_ms))
        usleep(1000);
    return count_entry(opaque, e, reason, reason_size);
}

TEST_TIMEOUT(cluster_topic_six_partitions, 60) {
    emq_cl *c = emq_cl_start(3, 0);
    assert_spread(c, "events");
    assert_spread(c, "ev");
    seen *s = seen_reset();
    emq_error err;

    /* 10,000 entries without keys: round robin over the partitions. */
    emq_conf_t *conf = node_conf(c, 0, "events");
    conf_set(conf, "partitions", "6");
    emq_producer_t *p;
    ASSERT_OK(emq_producer_new(conf, &p, &err), &err);
    static char values[10000][8];
    static emq_field fields[10000];
    static emq_message msgs[10000];
    static emq_id ids[10000];
    for (int i = 0; i < 10000; i++) {
        int len = snprintf(values[i], sizeof values[i], "%d", i);
        fields[i] = (emq_field){"n", 1, values[i], (size_t)len};
        msgs[i] = (emq_message){&fields[i], 1, NULL};
    }
    size_t written = 0;
    for (int i = 0; i < 10000; i += 500) {
        size_t w;
        ASSERT_OK(emq_produce_batch(p, msgs + i, 500, ids + i, &w, &err), &err);
        written += w;
    }
    ASSERT_EQ_SIZE(written, 10000);
    for (int i = 0; i < 10000; i++)
        ASSERT(ids[i].str[0] != '\0');
    emq_producer_destroy(p);

    /* A pool of 3 consumers, each reading all 6 partitions, each handed
     * some of the entries (pool_entry), so that each is in the group. */
    consumer_settings(conf, "g", "w", "200");
    emq_pool_t *pool;
    ASSERT_OK(emq_pool_new(conf, 3, pool_entry, s, &pool, &err), &err);
    atomic_store(&together.handled, 0);
    atomic_store(&together.until_ms, now_ms() + emq_test_ms(10000));
    pool_thread pr;
    start_pool(&pr, pool);
    wait_distinct(s, 10000, 30000);
    if (!pool_all_handled(pool, 3))
        FAIL("a consumer of the pool was handed no entry within %d ms",
             emq_test_ms(10000));
    /* Anything handled twice would show by now (nothing marks a pool's
     * progress past it: a scaled pause). */
    usleep((useconds_t)emq_test_ms(300) * 1000);
    emq_pool_stop(pool);
    pthread_join(pr.thread, NULL);
    ASSERT_OK(pr.st, &pr.err);
    for (int i = 0; i < 10000; i++)
        if (atomic_load(&s->count[i]) != 1)
            FAIL("entry %d handled %d times", i, atomic_load(&s->count[i]));
    emq_consumer_stats st, sum;
    memset(&sum, 0, sizeof sum);
    for (int i = 0; i < 3; i++) {
        emq_consumer_stats_get(emq_pool_consumer(pool, i), &st);
        sum.delivered += st.delivered;
        sum.acked += st.acked;
        sum.failed += st.failed;
        sum.claimed += st.claimed;
        sum.reconnects += st.reconnects;
    }
    ASSERT_EQ_INT(sum.delivered, 10000);
    ASSERT_EQ_INT(sum.acked, 10000);
    ASSERT_EQ_INT(sum.failed + sum.claimed + sum.reconnects, 0);
    char json[512];
    emq_consumer_stats_json(emq_pool_consumer(pool, 0), json, sizeof json);
    ASSERT_CONTAINS(json, "\"topic\":\"events\",\"partitions\":6");
    emq_pool_destroy(pool);

    /* The description: 6 partitions, lengths 1667/1666, totals. */
    emq_queue_info *q = describe(conf);
    ASSERT_EQ_SIZE(q->npartitions, 6);
    ASSERT_EQ_SIZE(q->length, 10000);
    ASSERT_EQ_STR(q->stream, "emq:{events.*}");
    int64_t lag;
    ASSERT_EQ_INT(group_pending(q, "g", &lag), 0);
    ASSERT_EQ_INT(lag, 0);
    ASSERT_EQ_SIZE(q->groups[0].nconsumers, 3);
    for (size_t i = 0; i < 6; i++) {
        char want[32];
        snprintf(want, sizeof want, "emq:{events.%zu}", i);
        ASSERT_EQ_STR(q->partitions[i].stream, want);
        ASSERT(q->partitions[i].length == 1666 ||
               q->partitions[i].length == 1667);
        ASSERT_EQ_INT(group_pending(&q->partitions[i], "g", &lag), 0);
        ASSERT_EQ_INT(lag, 0);
    }
    char *doc = malloc(65536);
    ASSERT(doc != NULL);
    ASSERT(emq_queue_info_json(q, doc, 65536) < 65536);
    ASSERT_CONTAINS(doc, "\"partitions\":[{\"stream\":\"emq:{events.0}\"");
    free(doc);
    emq_queue_info_free(q);
    emq_conf_destroy(conf);

    /* 10,000 entries with keys, one consumer: each key in one partition
     * (CRC16 of the key mod 6), its entries in production order. */
    s = seen_reset();
    conf = node_conf(c, 1, "ev");
    conf_set(conf, "partitions", "6");
    ASSERT_OK(emq_producer_new(conf, &p, &err), &err);
    static char kv[10000][3][12];
    static emq_field kf[10000][3];
    static emq_keyed_message km[10000];
    int seq[KEYS] = {0};
    for (int i = 0; i < 10000; i++) {
        int k = (i * 7) % KEYS;
        int l0 = snprintf(kv[i][0], 12, "%d", i);
        int l1 = snprintf(kv[i][1], 12, "%d", k);
        int l2 = snprintf(kv[i][2], 12, "%d", seq[k]++);
        kf[i][0] = (emq_field){"n", 1, kv[i][0], (size_t)l0};
        kf[i][1] = (emq_field){"key", 3, kv[i][1], (size_t)l1};
        kf[i][2] = (emq_field){"seq", 3, kv[i][2], (size_t)l2};
        km[i] = (emq_keyed_message){{kf[i], 3, NULL}, kv[i][1], (size_t)l1};
    }
    /* The first entries one at a time, the rest in batches. */
    for (int i = 0; i < 100; i++)
        ASSERT_OK(emq_produce_keyed(p, km[i].key, km[i].key_len, kf[i], 3, NULL,
                                    &err),
                  &err);
    for (int i = 100; i < 10000; i += 990)
        ASSERT_OK(emq_produce_batch_keyed(p, km + i, 990, NULL, NULL, &err),
                  &err);
    emq_producer_destroy(p);
    consumer_settings(conf, "g", "solo", "200");
    emq_consumer_t *cons;
    ASSERT_OK(emq_consumer_new(conf, count_entry, s, &cons, &err), &err);
    runner_thread rt;
    start_consumer(&rt, cons);
    wait_distinct(s, 10000, 30000);
    emq_consumer_stop(cons);
    ASSERT_OK(join_consumer(&rt), &rt.err);
    for (int i = 0; i < 10000; i++)
        if (atomic_load(&s->count[i]) != 1)
            FAIL("keyed entry %d handled %d times", i,
                 atomic_load(&s->count[i]));
    ASSERT_EQ_INT(s->order_errors, 0);
    ASSERT_EQ_INT(s->partition_errors, 0);
    for (int k = 0; k < KEYS; k++) {
        char key[12], want[32];
        int len = snprintf(key, sizeof key, "%d", k);
        snprintf(want, sizeof want, "emq:{ev.%u}",
                 emq__cluster_crc16(key, (size_t)len) % 6);
        ASSERT_EQ_STR(s->stream[k], want);
        ASSERT_EQ_INT(s->last_seq[k], seq[k] - 1);
    }
    emq_consumer_destroy(cons);

    /* A raw stream cannot be partitioned; a topic's verbs run on every
     * partition, on whichever master serves it. */
    emq_conf_t *bad = conf_for(emq_srv_url(emq_cl_node(c, 0)));
    conf_set(bad, "stream", "raw");
    conf_set(bad, "partitions", "2");
    emq_producer_t *none = NULL;
    ASSERT_STATUS(emq_producer_new(bad, &none, &err), EMQ_EINVAL, &err);
    ASSERT_CONTAINS(err.message, "needs queue");
    emq_conf_destroy(bad);
    emq_admin_t *a;
    ASSERT_OK(emq_admin_new(conf, &a, &err), &err);
    emq_pending_entry *pe = NULL;
    size_t npe = 0;
    ASSERT_OK(emq_admin_pending(a, "g", NULL, 0, 10, &pe, &npe, &err), &err);
    ASSERT_EQ_SIZE(npe, 0); /* everything was acknowledged */
    emq_free_array(pe);
    int created = 0;
    ASSERT_OK(emq_admin_group_create(a, "other", "head", &created, &err), &err);
    ASSERT_EQ_INT(created, 1);
    emq_admin_destroy(a);
    q = describe(conf);
    ASSERT_EQ_SIZE(q->ngroups, 2);
    ASSERT_EQ_SIZE(q->length, 10000);
    ASSERT_EQ_INT(group_pending(q, "other", &lag), 0);
    ASSERT_EQ_INT(lag, 10000); /* the total lag over the 6 partitions */
    emq_queue_info_free(q);
    emq_conf_destroy(conf);
    emq_cl_stop(c);
}

/* ---- the CLI against a cluster URL --------------------------------------- */

/* The number after "<name>":"... in a JSON line, or -1. */
static int json_num(const char *line, const char *name) {
    char pat[32];
    snprintf(pat, sizeof pat, "\"%s\":\"", name);
    const char *at = strstr(line, pat);
    if (at == NULL)
        return -1;
    at += strlen(pat);
    while (*at && (*at < '0' || *at > '9'))
        at++;
    return atoi(at);
}

TEST_TIMEOUT(cluster_cli_queue_and_topic, 60) {
    emq_cl *c = emq_cl_start(3, 0);
    unsigned slot = emq__cluster_key_slot("emq:{jobs}", 10);
    int wrong = emq_cl_other_master(c, emq_cl_owner(c, 0, slot));
    const char *url = emq_srv_url(emq_cl_node(c, wrong));
    cli_result r;

    /* A queue, through a node that does not serve it. */
    CLI(&r, url, "produce", "jobs", "a=1", "b=2");
    ASSERT_EXIT(&r, 0);
    cli_free(&r);
    CLI_IN(&r, url, "x\ny\nz\n", "produce", "jobs", "--lines");
    ASSERT_EXIT(&r, 0);
    cli_free(&r);
    CLI(&r, url, "consume", "jobs", "-g", "g", "-c", "c1", "--start", "head",
        "--until-idle", "500");
    ASSERT_EXIT(&r, 0);
    ASSERT_EQ_INT(cli_lines(r.out), 4);
    cli_free(&r);
    CLI(&r, url, "info", "jobs", "--json");
    ASSERT_EXIT(&r, 0);
    ASSERT_CONTAINS(r.out, "\"length\":4");
    ASSERT_CONTAINS(r.out, "\"pending\":0");
    ASSERT_CONTAINS(r.out, "\"lag\":0");
    cli_free(&r);

    /* A topic of 6 partitions, keyed by the field "user". */
    static char input[8192];
    size_t len = 0;
    for (int i = 0; i < 60; i++)
        len += (size_t)snprintf(input + len, sizeof input - len,
                                "{\"user\":\"u%d\",\"i\":\"%d\"}\n", i % 5, i);
    CLI_IN(&r, url, input, "produce", "events", "--partitions", "6", "--json",
           "--key-field", "user");
    ASSERT_EXIT(&r, 0);
    ASSERT_CONTAINS(r.err, "topic events (6 partitions)");
    cli_free(&r);
    CLI(&r, url, "consume", "events", "--partitions", "6", "-g", "g", "-c",
        "c1", "--start", "head", "--until-idle", "800");
    ASSERT_EXIT(&r, 0);
    ASSERT_EQ_INT(cli_lines(r.out), 60);
    int last[5] = {-1, -1, -1, -1, -1};
    for (char *line = strtok(r.out, "\n"); line; line = strtok(NULL, "\n")) {
        int u = json_num(line, "user"), i = json_num(line, "i");
        ASSERT(u >= 0 && u < 5 && i >= 0);
        if (i <= last[u])
            FAIL("user u%d: entry %d after %d", u, i, last[u]);
        last[u] = i;
    }
    cli_free(&r);
    CLI(&r, url, "info", "events", "--partitions", "6");
    ASSERT_EXIT(&r, 0);
    ASSERT_CONTAINS(r.out, "PARTITION");
    ASSERT_CONTAINS(r.out, "emq:{events.5}");
    ASSERT_CONTAINS(r.out, "total");
    cli_free(&r);
    CLI(&r, url, "info", "events", "--partitions", "6", "--json");
    ASSERT_EXIT(&r, 0);
    ASSERT_CONTAINS(r.out, "{\"stream\":\"emq:{events.*}\"");
    ASSERT_CONTAINS(r.out, "\"length\":60");
    ASSERT_CONTAINS(r.out, "\"partitions\":[");
    ASSERT_NOT_CONTAINS(r.out, "\"pending\":1");
    cli_free(&r);
    /* A bad partition count is a usage error. */
    CLI(&r, url, "info", "events", "--partitions", "0");
    ASSERT_EXIT(&r, 2);
    cli_free(&r);
    emq_cl_stop(c);
}
