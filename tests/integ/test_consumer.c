/* SPDX-License-Identifier: BSD-3-Clause */
/* test_consumer.c: the consumer contract against a real redis-server. */
#include "integ/inspect_conn_helpers.h"

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
 * instead of an array; reads, history reads, claims and acks all work. */
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

/* A long script holds the server: every other client gets -BUSY and the
 * command does not run. The consumer's start (lease, door) waits it out
 * instead of failing (regression: chaos bug B1, where -LOADING after a
 * restart made the lease step fatal). */

TEST_TIMEOUT(consumer_start_waits_out_a_busy_server, 30) {
    /* lua-time-limit: the name Redis 6.2 knows; 7.0+ and Valkey keep it
     * as an alias of busy-reply-threshold. */
    emq_srv_opts opts = {.extra_config = "lua-time-limit 100\n"};
    emq_srv *s = emq_srv_start(&opts);
    produce_n(s, "jobs", "v", 5);
    busy_script b = {s, ""};
    pthread_t script;
    ASSERT(pthread_create(&script, NULL, run_busy_script, &b) == 0);
    WAIT_UNTIL(server_busy(s), 5000, "the script to pass the threshold (BUSY)");
    emq_conf_t *conf = consumer_conf(s, "jobs", "g", "wb", "head");
    /* The start waits BUSY out for at most connect_timeout_ms: more than
     * the scaled pause below. */
    conf_set(conf, P_CONNECT_TIMEOUT, "4000");
    static recorder r;
    recorder_init(&r);
    r.stop_after = 5;
    emq_consumer_t *c;
    emq_error err;
    ASSERT_OK(emq_consumer_new(conf, record, &r, &c, &err), &err);
    r.consumer = c;
    emq_conf_destroy(conf);
    runner_thread t;
    start_consumer(&t, c);
    /* Nothing it exposes marks the start waiting on BUSY (no log line, no
     * counter), so this one waits a scaled time, kept under the 4 s
     * connect_timeout_ms and the 5 s the script's own call waits. */
    int pause_ms = emq_test_ms(700) < 3000 ? emq_test_ms(700) : 3000;
    usleep((useconds_t)pause_ms * 1000);
    ASSERT_EQ_SIZE(r.n, 0); /* still waiting, not failed */
    char out[256];
    emq_srv_cmd(s, out, sizeof out, "SCRIPT", "KILL", NULL);
    pthread_join(script, NULL);
    ASSERT_CONTAINS(b.out, "killed");
    ASSERT_OK(join_consumer(&t), &t.err);
    ASSERT_EQ_SIZE(r.n, 5);
    emq_consumer_destroy(c);
    emq_srv_stop(s);
}

/* With the server gone the consumer keeps reconnecting with backoff (it
 * never gives up on its own), and a stop still ends it promptly: the
 * backoff sleeps end early on a stop. */
TEST_TIMEOUT(consumer_stop_while_server_is_down_is_prompt, 30) {
    emq_srv *s = emq_srv_start(NULL);
    emq_conf_t *conf = consumer_conf(s, "jobs", "g", "wd", "new");
    /* Backoffs of 10 to 20 s (jitter: half to all of 20 s): a stop that
     * waited one out would take 7.5 s at least, 2.5 s into the first. */
    conf_set(conf, "reconnect.backoff_min_ms", "20000");
    conf_set(conf, "reconnect.backoff_max_ms", "40000");
    conf_set(conf, "log.level", "error");
    static recorder r;
    recorder_init(&r);
    emq_consumer_t *c;
    emq_error err;
    ASSERT_OK(emq_consumer_new(conf, record, &r, &c, &err), &err);
    emq_conf_destroy(conf);
    runner_thread t;
    start_consumer(&t, c);
    emq_consumer_stats st;
    WAIT_UNTIL((emq_consumer_stats_get(c, &st), st.reads >= 1), 5000,
               "the consumer to connect and read");
    emq_srv_kill9(s);
    /* Into the backoff between attempts; whatever the phase, a stop must
     * not wait it out. */
    usleep(2500 * 1000);
    int64_t asked = now_ms();
    emq_consumer_stop(c);
    ASSERT_OK(join_consumer(&t), &t.err);
    int64_t took = now_ms() - asked;
    if (took > emq_test_ms(1000))
        FAIL("stop took %lld ms while reconnecting", (long long)took);
    emq_consumer_stats_get(c, &st);
    ASSERT_EQ_INT(st.reconnects, 0); /* it never got through */
    emq_consumer_destroy(c);
    emq_srv_stop(s);
}
