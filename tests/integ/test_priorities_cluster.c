/* SPDX-License-Identifier: BSD-3-Clause */
/* test_priorities_cluster.c: priorities on a topic on a real 3-master
 * Redis Cluster.
 *
 * A 4-partition topic spreads its partitions over the masters; 400 keyed
 * entries of scrambled priorities are held, each in its partition's slot
 * (the held keys share the partition's hashtag). A topic consumer hands
 * out every entry once, and within each partition level 0 first, the
 * order they came within a level; the topic's admin counts the held
 * entries over every node, and none is left held.
 */
#include "harness/cluster.h"
#include "integ/consumer_helpers.h"
#include "integ/tally_helpers.h"

#include <stdlib.h>

#define N 400
#define PARTS 4

typedef struct prio_seen {
    pthread_mutex_t mu;
    int count[N];
    int last_level[PARTS], last_i[PARTS];
    int out_of_order;
    size_t handled;
} prio_seen;

static prio_seen the_seen = {.mu = PTHREAD_MUTEX_INITIALIZER};

static emq_verdict check_order(void *opaque, const emq_entry *e, char *reason,
                               size_t size) {
    (void)reason;
    (void)size;
    prio_seen *s = opaque;
    char text[16];
    size_t len = e->fields[0].value_len < 15 ? e->fields[0].value_len : 15;
    memcpy(text, e->fields[0].value, len);
    text[len] = '\0';
    int level = atoi(text), i = atoi(text + 2);
    const char *dot = strrchr(e->stream, '.');
    int part = dot ? atoi(dot + 1) : -1;
    pthread_mutex_lock(&s->mu);
    if (i >= 0 && i < N && part >= 0 && part < PARTS) {
        s->count[i]++;
        if (level < s->last_level[part] ||
            (level == s->last_level[part] && i < s->last_i[part]))
            s->out_of_order++;
        s->last_level[part] = level;
        s->last_i[part] = i;
    } else {
        s->out_of_order++;
    }
    s->handled++;
    pthread_mutex_unlock(&s->mu);
    return EMQ_ACK;
}

TEST_TIMEOUT(priorities_cluster_topic_each_once_most_urgent_first, 90) {
    emq_cl *c = emq_cl_start(3, 0);
    prio_seen *s = &the_seen;
    emq_conf_t *conf = conf_for(emq_srv_url(emq_cl_node(c, 0)));
    conf_set(conf, "queue", "urgent");
    conf_set(conf, "partitions", "4");
    emq_producer_t *p;
    emq_error err;
    ASSERT_OK(emq_producer_new(conf, &p, &err), &err);
    static char values[N][8], keys[N][8];
    static emq_field fields[N];
    static emq_message msgs[N];
    static emq_produce_opts opts[N];
    for (int i = 0; i < N; i++) {
        int len =
            snprintf(values[i], sizeof values[i], "%d-%03d", (i * 7) % 10, i);
        fields[i] = (emq_field){"n", 1, values[i], (size_t)len};
        msgs[i] = (emq_message){&fields[i], 1, NULL};
        opts[i] = (emq_produce_opts)EMQ_PRODUCE_OPTS_INIT;
        int klen = snprintf(keys[i], sizeof keys[i], "k%d", i % 13);
        opts[i].key = keys[i];
        opts[i].key_len = (size_t)klen;
        opts[i].priority = (i * 7) % 10;
    }
    size_t written = 0;
    for (int i = 0; i < N; i += 100) {
        size_t w;
        ASSERT_OK(
            emq_produce_batch_ex(p, msgs + i, opts + i, 100, NULL, &w, &err),
            &err);
        written += w;
    }
    ASSERT_EQ_SIZE(written, N);
    emq_producer_destroy(p);
    emq_admin_t *a;
    ASSERT_OK(emq_admin_new(conf, &a, &err), &err);
    emq_priority_info pi;
    int has = 0;
    ASSERT_OK(emq_admin_priorities(a, -1, &pi, &has, &err), &err);
    ASSERT_EQ_INT(has, 1);
    ASSERT_EQ_INT((int)pi.held, N);
    ASSERT_EQ_INT((int)pi.held_at[0], N / 10);

    conf_set(conf, "group", "g");
    conf_set(conf, "consumer", "w");
    conf_set(conf, "start", "head");
    conf_set(conf, "block_ms", "200");
    conf_set(conf, "count", "5");
    for (int i = 0; i < PARTS; i++)
        s->last_level[i] = -1;
    emq_consumer_t *cons = consumer_ok(conf, check_order, s);
    runner_thread t;
    start_consumer(&t, cons);
    int64_t end = now_ms() + emq_test_ms(30000);
    size_t handled = 0;
    while (handled < N && now_ms() < end) {
        usleep(20000);
        pthread_mutex_lock(&s->mu);
        handled = s->handled;
        pthread_mutex_unlock(&s->mu);
    }
    usleep((useconds_t)emq_test_ms(300) * 1000); /* a duplicate shows */
    emq_consumer_stop(cons);
    ASSERT_OK(join_consumer(&t), &t.err);
    emq_consumer_destroy(cons);
    for (int i = 0; i < N; i++)
        if (s->count[i] != 1)
            FAIL("entry %d handled %d times", i, s->count[i]);
    ASSERT_EQ_INT(s->out_of_order, 0);
    ASSERT_OK(emq_admin_priorities(a, -1, &pi, &has, &err), &err);
    ASSERT_EQ_INT((int)pi.held, 0);
    emq_admin_destroy(a);
    emq_conf_destroy(conf);
    emq_cl_stop(c);
}
