/* SPDX-License-Identifier: BSD-3-Clause */
/* test_queue_features_cluster.c: idempotency keys and group limits on a
 * topic on a real 3-master Redis Cluster.
 *
 * A 4-partition topic spreads over the masters. Keyed entries produced
 * twice with one idempotency key each are added once, to their key's
 * partition (the key's record lives in that partition's slot). Group
 * limits set on the topic apply per partition: with max_in_flight 3, a
 * topic consumer that takes and never settles holds exactly 3 pending in
 * each partition, 12 in all, however long it reads.
 */
#include "harness/cluster.h"
#include "integ/consumer_helpers.h"
#include "integ/tally_helpers.h"

#include <stdlib.h>

/* The pending count of stream's group g on whichever node serves it. */
static long long pending_anywhere(emq_cl *c, const char *stream) {
    for (int i = 0; i < emq_cl_count(c); i++) {
        char out[256];
        if (emq_srv_cmd(emq_cl_node(c, i), out, sizeof out, "XPENDING", stream,
                        "g", NULL) == '*')
            return strtoll(out, NULL, 10);
    }
    FAIL("no node answered XPENDING %s g", stream);
    return -1;
}

/* The length of stream on whichever node serves it. */
static long long xlen_anywhere(emq_cl *c, const char *stream) {
    for (int i = 0; i < emq_cl_count(c); i++) {
        char out[64];
        if (emq_srv_cmd(emq_cl_node(c, i), out, sizeof out, "XLEN", stream,
                        NULL) == ':')
            return atoll(out);
    }
    FAIL("no node answered XLEN %s", stream);
    return -1;
}

TEST_TIMEOUT(cluster_topic_dedup_once_and_limits_per_partition, 90) {
    emq_cl *c = emq_cl_start(3, 0);
    emq_conf_t *conf = conf_for(emq_srv_url(emq_cl_node(c, 0)));
    conf_set(conf, "queue", "feat");
    conf_set(conf, "partitions", "4");
    emq_producer_t *p;
    emq_error err;
    ASSERT_OK(emq_producer_new(conf, &p, &err), &err);
    /* 40 keyed entries, each produced twice with its idempotency key. */
    enum { N = 40 };
    emq_id first[N];
    for (int round = 0; round < 2; round++)
        for (int i = 0; i < N; i++) {
            char value[16], key[16], dedup[16];
            int len = snprintf(value, sizeof value, "%d", i);
            int klen = snprintf(key, sizeof key, "k%d", i % 9);
            int dlen = snprintf(dedup, sizeof dedup, "d%d", i);
            emq_field f = {"n", 1, value, (size_t)len};
            emq_produce_opts o = EMQ_PRODUCE_OPTS_INIT;
            o.key = key;
            o.key_len = (size_t)klen;
            o.dedup_key = dedup;
            o.dedup_key_len = (size_t)dlen;
            emq_id id;
            ASSERT_OK(emq_produce_ex(p, &f, 1, &o, &id, &err), &err);
            if (round == 0)
                first[i] = id;
            else
                ASSERT_EQ_STR(id.str, first[i].str);
        }
    emq_producer_destroy(p);
    long long total = 0;
    for (int i = 0; i < 4; i++) {
        char stream[32];
        snprintf(stream, sizeof stream, "emq:{feat.%d}", i);
        total += xlen_anywhere(c, stream);
    }
    ASSERT_EQ_INT(total, N);

    /* Limits set on the topic: every partition has them. */
    emq_admin_t *a;
    ASSERT_OK(emq_admin_new(conf, &a, &err), &err);
    emq_group_limits set = {0, 3}, got;
    ASSERT_OK(emq_admin_group_limits(a, "g", &set, &got, &err), &err);
    ASSERT_EQ_INT((int)got.max_in_flight, 3);
    conf_set(conf, "group", "g");
    conf_set(conf, "consumer", "w");
    conf_set(conf, "start", "head");
    conf_set(conf, "block_ms", "100");
    emq_consumer_t *cons;
    ASSERT_OK(emq_consumer_new(conf, NULL, NULL, &cons, &err), &err);
    emq_conf_destroy(conf);
    /* Take and never settle: each partition stops at 3. Read until that
     * many came (bounded), then a second more, in which nothing may. */
    long long want = 0;
    for (int i = 0; i < 4; i++) {
        char stream[32];
        snprintf(stream, sizeof stream, "emq:{feat.%d}", i);
        long long len = xlen_anywhere(c, stream);
        want += len < 3 ? len : 3;
    }
    size_t taken = 0;
    int64_t end = now_ms() + emq_test_ms(20000), more_until = 0;
    while (now_ms() < end && (more_until == 0 || now_ms() < more_until)) {
        emq_entry *e[8];
        size_t n = 0;
        ASSERT_OK(emq_consumer_poll(cons, e, 8, 50, &n, &err), &err);
        for (size_t i = 0; i < n; i++)
            emq_entry_free(e[i]);
        taken += n;
        if (more_until == 0 && (long long)taken >= want)
            more_until = now_ms() + 1000;
    }
    ASSERT_EQ_INT((long long)taken, want);
    long long held = 0;
    for (int i = 0; i < 4; i++) {
        char stream[32];
        snprintf(stream, sizeof stream, "emq:{feat.%d}", i);
        long long pending = pending_anywhere(c, stream);
        long long len = xlen_anywhere(c, stream);
        /* 3, or all of a partition that holds fewer. */
        ASSERT_EQ_INT(pending, len < 3 ? len : 3);
        held += pending;
    }
    ASSERT_EQ_SIZE(taken, (size_t)held);
    fprintf(stderr, "    %zu taken and held, at most 3 in each partition\n",
            taken);
    ASSERT_OK(emq_consumer_close(cons, 0, &err), &err);
    emq_consumer_destroy(cons);
    emq_admin_destroy(a);
    emq_cl_stop(c);
}
