/* SPDX-License-Identifier: BSD-3-Clause */
/* test_delayed_cluster.c: delayed entries of a topic on a real 3-master
 * Redis Cluster.
 *
 * A 6-partition topic spreads its partitions over the masters; 600 keyed
 * entries are delayed and 600 are not, in batches. A pool of 3 consumers
 * handles each of the 1,200 exactly once, no delayed one before it was
 * due; each partition's delayed keys live in that partition's slot and
 * end empty. The topic's admin counts what waits over every node, and a
 * partition's handle cancels one of its entries on its node.
 */
#include "harness/cluster.h"
#include "keys/keys.h" /* emq__topic_key_partition */
#include "integ/consumer_helpers.h"

#include <stdatomic.h>
#include <stdlib.h>

#define N 1200

typedef struct seen {
    atomic_int count[N];
    int64_t due[N];    /* the delayed ones' due time, wall ms; 0: none */
    atomic_int early;  /* handed out before due */
    atomic_int strays; /* values out of range */
} seen;

static seen the_seen;

static int64_t wall_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static emq_verdict count_entry(void *opaque, const emq_entry *e, char *reason,
                               size_t size) {
    (void)reason;
    (void)size;
    seen *s = opaque;
    char text[16];
    size_t len = e->fields[0].value_len < 15 ? e->fields[0].value_len : 15;
    memcpy(text, e->fields[0].value, len);
    text[len] = '\0';
    int i = atoi(text);
    if (i < 0 || i >= N) {
        atomic_fetch_add(&s->strays, 1);
        return EMQ_ACK;
    }
    /* The server's clock is this machine's: same host. */
    if (s->due[i] && wall_ms() < s->due[i])
        atomic_fetch_add(&s->early, 1);
    atomic_fetch_add(&s->count[i], 1);
    return EMQ_ACK;
}

/* The number key's ZCARD answers on whichever node serves it. */
static long long zcard_anywhere(emq_cl *c, const char *key) {
    for (int i = 0; i < emq_cl_count(c); i++) {
        char out[128];
        if (emq_srv_cmd(emq_cl_node(c, i), out, sizeof out, "ZCARD", key,
                        NULL) == ':')
            return atoll(out);
    }
    FAIL("no node answered ZCARD %s", key);
    return -1;
}

TEST_TIMEOUT(delayed_cluster_topic_pool_each_once_never_early, 90) {
    emq_cl *c = emq_cl_start(3, 0);
    seen *s = &the_seen;
    memset(s, 0, sizeof *s);
    emq_conf_t *conf = conf_for(emq_srv_url(emq_cl_node(c, 0)));
    conf_set(conf, "queue", "later");
    conf_set(conf, "partitions", "6");
    emq_producer_t *p;
    emq_error err;
    ASSERT_OK(emq_producer_new(conf, &p, &err), &err);
    static char values[N][8], keys[N][8];
    static emq_field fields[N];
    static emq_message msgs[N];
    static emq_produce_opts opts[N];
    static emq_id ids[N];
    int64_t delay = emq_test_ms(1500);
    int64_t sent = wall_ms();
    for (int i = 0; i < N; i++) {
        int len = snprintf(values[i], sizeof values[i], "%d", i);
        fields[i] = (emq_field){"n", 1, values[i], (size_t)len};
        msgs[i] = (emq_message){&fields[i], 1, NULL};
        opts[i] = (emq_produce_opts)EMQ_PRODUCE_OPTS_INIT;
        int klen = snprintf(keys[i], sizeof keys[i], "k%d", i % 37);
        opts[i].key = keys[i];
        opts[i].key_len = (size_t)klen;
        if (i % 2) {
            opts[i].delay_ms = delay;
            s->due[i] = sent + delay;
        }
    }
    size_t written = 0;
    for (int i = 0; i < N; i += 300) {
        size_t w;
        ASSERT_OK(
            emq_produce_batch_ex(p, msgs + i, opts + i, 300, ids + i, &w, &err),
            &err);
        written += w;
    }
    ASSERT_EQ_SIZE(written, N);
    emq_producer_destroy(p);
    long long waiting = 0;
    for (int i = 0; i < 6; i++) {
        char key[64];
        snprintf(key, sizeof key, "emq:{later.%d}:delayed", i);
        waiting += zcard_anywhere(c, key);
    }
    ASSERT_EQ_INT(waiting, N / 2);

    /* The topic's admin counts over every node; a partition's handle
     * cancels one delayed entry on its node. */
    emq_admin_t *a;
    ASSERT_OK(emq_admin_new(conf, &a, &err), &err);
    emq_delayed_info di;
    ASSERT_OK(emq_admin_delayed(a, &di, &err), &err);
    ASSERT_EQ_INT(di.waiting, N / 2);
    int victim = 1; /* delayed, key k1 */
    unsigned part =
        emq__topic_key_partition(keys[victim], strlen(keys[victim]), 6);
    const char *cancel[] = {ids[victim].str};
    emq_cancel_outcome oc;
    ASSERT_OK(emq_admin_cancel(emq_admin_partition(a, (int)part), cancel, 1,
                               &oc, NULL, &err),
              &err);
    ASSERT_EQ_INT(oc, EMQ_CANCEL_REMOVED);
    s->due[victim] = 0;
    atomic_store(&s->count[victim], 1); /* cancelled: counts as done */

    conf_set(conf, "group", "g");
    conf_set(conf, "consumer", "w");
    conf_set(conf, "start", "head");
    conf_set(conf, "block_ms", "200");
    emq_pool_t *pool;
    ASSERT_OK(emq_pool_new(conf, 3, count_entry, s, &pool, &err), &err);
    pool_thread pt;
    start_pool(&pt, pool);
    int64_t end = now_ms() + emq_test_ms(30000);
    int done = 0;
    while (!done && now_ms() < end) {
        done = 1;
        for (int i = 0; i < N && done; i++)
            done = atomic_load(&s->count[i]) >= 1;
        usleep(20000);
    }
    usleep((useconds_t)emq_test_ms(300) * 1000); /* a duplicate shows */
    emq_pool_stop(pool);
    pthread_join(pt.thread, NULL);
    ASSERT_OK(pt.st, &pt.err);
    for (int i = 0; i < N; i++)
        if (atomic_load(&s->count[i]) != 1)
            FAIL("entry %d handled %d times", i, atomic_load(&s->count[i]));
    ASSERT_EQ_INT(atomic_load(&s->early), 0);
    ASSERT_EQ_INT(atomic_load(&s->strays), 0);
    uint64_t moved = 0;
    for (int i = 0; i < 3; i++) {
        emq_consumer_stats st;
        emq_consumer_stats_get(emq_pool_consumer(pool, i), &st);
        moved += st.delayed_moved;
    }
    ASSERT_EQ_INT(moved, N / 2 - 1);
    ASSERT_OK(emq_admin_delayed(a, &di, &err), &err);
    ASSERT_EQ_INT(di.waiting, 0);
    ASSERT_EQ_INT(di.next_due_ms, -1);
    emq_pool_destroy(pool);
    emq_admin_destroy(a);
    emq_conf_destroy(conf);
    emq_cl_stop(c);
}
