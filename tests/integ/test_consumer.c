/* test_consumer.c: the consumer contract against a real redis-server. */
#include "integ/consumer_helpers.h"

#include <unistd.h>

TEST(consumer_head_delivers_all_and_acks) {
    emq_srv *s = emq_srv_start(NULL);
    produce_n(s, "jobs", "v", 50);
    emq_conf_t *conf = consumer_conf(s, "jobs", "g", "w1", "head");
    static recorder r;
    recorder_init(&r);
    r.stop_after = 50;
    emq_consumer_t *c;
    emq_error err;
    ASSERT_OK(emq_consumer_new(conf, record, &r, &c, &err), &err);
    r.consumer = c;
    emq_conf_destroy(conf);
    ASSERT_OK(emq_consumer_run(c, &err), &err);
    ASSERT_EQ_SIZE(r.n, 50);
    for (size_t i = 0; i < 50; i++) {
        char want[16];
        snprintf(want, sizeof want, "v%zu", i);
        ASSERT_EQ_STR(r.values[i], want);
        ASSERT_EQ_INT(r.deliveries[i], 1);
    }
    emq_consumer_stats st;
    emq_consumer_stats_get(c, &st);
    ASSERT_EQ_INT(st.delivered, 50);
    ASSERT_EQ_INT(st.acked, 50);
    char out[256];
    emq_srv_cmd(s, out, sizeof out, "XPENDING", "emq:{jobs}", "g", NULL);
    ASSERT(strncmp(out, "0\n", 2) == 0);
    emq_consumer_destroy(c);
    emq_srv_stop(s);
}

/* RESP3 (protocol 3): XREADGROUP answers with a map keyed by stream
 * (SEMANTICS.md 1.9); reads, history reads, claims and acks all work. */
TEST(consumer_over_resp3) {
    emq_srv *s = emq_srv_start(NULL);
    produce_n(s, "jobs", "v", 30);
    emq_conf_t *conf = consumer_conf(s, "jobs", "g", "w3", "head");
    conf_set(conf, "protocol", "3");
    conf_set(conf, "count", "7");
    static recorder r;
    recorder_init(&r);
    r.stop_after = 30;
    emq_consumer_t *c;
    emq_error err;
    ASSERT_OK(emq_consumer_new(conf, record, &r, &c, &err), &err);
    r.consumer = c;
    emq_conf_destroy(conf);
    ASSERT_OK(emq_consumer_run(c, &err), &err);
    ASSERT_EQ_SIZE(r.n, 30);
    ASSERT_EQ_STR(r.values[29], "v29");
    emq_consumer_stats st;
    emq_consumer_stats_get(c, &st);
    ASSERT_EQ_INT(st.acked, 30);
    emq_consumer_destroy(c);
    emq_srv_stop(s);
}
