/* SPDX-License-Identifier: BSD-3-Clause */
/* test_cli_topic.c: a topic's partition count recorded in the server,
 * against a private redis-server: the first producer records it, a
 * producer or consumer or admin with another count is refused naming
 * both, `echomq topic create` records it, and produce, consume and info
 * then find the topic without --partitions. */
#include "integ/ownership_helpers.h"
#include "integ/cli_helpers.h"

static emq_conf_t *topic_conf(const emq_srv *s, const char *p) {
    emq_conf_t *conf = conf_for(emq_srv_url(s));
    conf_set(conf, "queue", "orders");
    conf_set(conf, "partitions", p);
    return conf;
}

TEST_TIMEOUT(topic_count_recorded_and_mismatch_refused, 30) {
    emq_srv *s = emq_srv_start(NULL);
    emq_conf_t *conf = topic_conf(s, "3");
    emq_producer_t *p;
    emq_error err;
    ASSERT_OK(emq_producer_new(conf, &p, &err), &err);
    emq_field f = {"v", 1, "x", 1};
    for (int i = 0; i < 3; i++) /* one per partition, in turn */
        ASSERT_OK(emq_produce(p, &f, 1, NULL, &err), &err);
    emq_producer_destroy(p);
    char out[64];
    for (int i = 0; i < 3; i++) {
        char key[64];
        snprintf(key, sizeof key, "emq:{orders.%d}:topic", i);
        emq_srv_cmd(s, out, sizeof out, "HGET", key, "partitions", NULL);
        ASSERT_EQ_STR(out, "3");
    }
    /* Another count: the producer's first call, the consumer's start and
     * the admin's open say so. */
    emq_conf_t *wrong = topic_conf(s, "4");
    ASSERT_OK(emq_producer_new(wrong, &p, &err), &err);
    ASSERT_STATUS(emq_produce(p, &f, 1, NULL, &err), EMQ_EINVAL, &err);
    ASSERT_CONTAINS(err.message, "has 3 partitions");
    ASSERT_CONTAINS(err.message, "not 4");
    emq_producer_destroy(p);
    conf_set(wrong, "group", "g");
    conf_set(wrong, "consumer", "c");
    conf_set(wrong, "start", "head");
    emq_consumer_t *c;
    static slow h;
    slow_init(&h);
    ASSERT_OK(emq_consumer_new(wrong, slow_handle, &h, &c, &err), &err);
    ASSERT_STATUS(emq_consumer_run(c, &err), EMQ_EINVAL, &err);
    ASSERT_CONTAINS(err.message, "has 3 partitions");
    emq_consumer_destroy(c);
    emq_admin_t *a;
    ASSERT_STATUS(emq_admin_new(wrong, &a, &err), EMQ_EINVAL, &err);
    ASSERT_CONTAINS(err.message, "has 3 partitions");
    /* The plain name finds the count. */
    emq_conf_t *plain = conf_for(emq_srv_url(s));
    conf_set(plain, "queue", "orders");
    ASSERT_OK(emq_admin_new(plain, &a, &err), &err);
    int64_t n = 0;
    ASSERT_OK(emq_admin_topic_partitions(a, &n, &err), &err);
    ASSERT_EQ_INT(n, 3);
    emq_admin_destroy(a);
    emq_conf_destroy(plain);
    emq_conf_destroy(wrong);
    emq_conf_destroy(conf);
    emq_srv_stop(s);
}

TEST_TIMEOUT(cli_topic_create_then_verbs_need_no_partitions, 40) {
    emq_srv *s = emq_srv_start(NULL);
    const char *url = emq_srv_url(s);
    cli_result r;
    CLI(&r, url, "topic", "create", "orders", "--partitions", "3");
    ASSERT_EXIT(&r, 0);
    ASSERT_CONTAINS(r.out, "topic 'orders': 3 partitions");
    cli_free(&r);
    CLI(&r, url, "topic", "create", "orders", "--partitions", "3");
    ASSERT_EXIT(&r, 0); /* idempotent */
    cli_free(&r);
    CLI(&r, url, "topic", "create", "orders", "--partitions", "5");
    ASSERT_EXIT(&r, 2);
    ASSERT_CONTAINS(r.err, "has 3 partitions");
    cli_free(&r);
    CLI_IN(&r, url, "a\nb\nc\nd\ne\nf\n", "produce", "orders", "--lines");
    ASSERT_EXIT(&r, 0);
    ASSERT_CONTAINS(r.err, "3 partitions");
    cli_free(&r);
    long long total = 0;
    for (int i = 0; i < 3; i++) {
        char key[32];
        snprintf(key, sizeof key, "emq:{orders.%d}", i);
        long long n = srv_int(s, "XLEN", key);
        ASSERT(n > 0);
        total += n;
    }
    ASSERT_EQ_INT(total, 6);
    ASSERT_EQ_INT(srv_int(s, "EXISTS", "emq:{orders}"), 0);
    CLI(&r, url, "consume", "orders", "-g", "g", "-c", "c", "-s", "head",
        "--limit", "6", "-q");
    ASSERT_EXIT(&r, 0);
    ASSERT_EQ_INT(cli_lines(r.out), 6);
    ASSERT_CONTAINS(r.out, "\"partition\":2");
    cli_free(&r);
    CLI(&r, url, "info", "orders", "--json");
    ASSERT_EXIT(&r, 0);
    ASSERT_CONTAINS(r.out, "orders.2");
    cli_free(&r);
    CLI(&r, url, "produce", "orders", "--partitions", "4", "x=1");
    ASSERT_EXIT(&r, 2);
    ASSERT_CONTAINS(r.err, "has 3 partitions");
    cli_free(&r);
    CLI(&r, url, "topic", "create", "orders");
    ASSERT_EXIT(&r, 2);
    cli_free(&r);
    emq_srv_stop(s);
}

/* pending on a topic found in the server: every partition's entries, each
 * line naming its partition (table and JSON). */
TEST_TIMEOUT(cli_pending_of_a_topic_names_partitions, 40) {
    emq_srv *s = emq_srv_start(NULL);
    const char *url = emq_srv_url(s);
    cli_result r;
    CLI(&r, url, "topic", "create", "orders", "--partitions", "3");
    ASSERT_EXIT(&r, 0);
    cli_free(&r);
    CLI_IN(&r, url, "a\nb\nc\nd\ne\nf\n", "produce", "orders", "--lines");
    cli_free(&r);
    CLI(&r, url, "consume", "orders", "-g", "g", "-c", "c", "-s", "head",
        "--limit", "6", "--no-ack", "-q");
    ASSERT_EXIT(&r, 0);
    cli_free(&r);
    CLI(&r, url, "pending", "orders", "--group", "g");
    ASSERT_EXIT(&r, 0);
    ASSERT_EQ_INT(cli_lines(r.out), 7); /* header and 6 */
    ASSERT(strncmp(r.out, "PARTITION", 9) == 0);
    ASSERT_CONTAINS(r.out, "\n        2  ");
    ASSERT_CONTAINS(r.err, "6 pending entries in all partitions");
    cli_free(&r);
    CLI(&r, url, "pending", "orders", "--group", "g", "--json");
    ASSERT_EXIT(&r, 0);
    ASSERT_EQ_INT(cli_lines(r.out), 6);
    for (const char *line = r.out; *line; line = strchr(line, '\n') + 1)
        ASSERT(strstr(line, "\"partition\":") != NULL);
    ASSERT_CONTAINS(r.out, ",\"partition\":1}");
    cli_free(&r);
    emq_srv_stop(s);
}
