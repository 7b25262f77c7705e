/* SPDX-License-Identifier: BSD-3-Clause */
/* test_consumer_connect.c: consumer.connect against a real redis-server
 * that is not there yet. "fail" (the default): emq_consumer_run returns
 * at once with the transport error. "wait": the first connect is retried
 * with the reconnect backoff until the server answers, then the consumer
 * works as usual; a stop while it waits ends the run at once; a wrong
 * password is not waited out.
 */
#include "integ/ownership_helpers.h"

static emq_conf_t *late_conf(const char *url, const char *mode) {
    emq_conf_t *conf = fault_conf(url);
    conf_set(conf, "consumer.connect", mode);
    emq_conf_set_log(conf, quiet_log, NULL);
    return conf;
}

TEST_TIMEOUT(consumer_connect_fail_is_at_once, 20) {
    char url[64];
    snprintf(url, sizeof url, "redis://127.0.0.1:%d", emq_free_port());
    emq_conf_t *conf = late_conf(url, "fail");
    static slow h;
    slow_init(&h);
    emq_consumer_t *c;
    emq_error err;
    ASSERT_OK(emq_consumer_new(conf, slow_handle, &h, &c, &err), &err);
    ASSERT_STATUS(emq_consumer_run(c, &err), EMQ_EIO, &err);
    ASSERT_CONTAINS(err.message, "127.0.0.1");
    emq_consumer_destroy(c);
    emq_conf_destroy(conf);
}

TEST_TIMEOUT(consumer_connect_wait_waits_for_a_late_server, 30) {
    int port = emq_free_port();
    char url[64];
    snprintf(url, sizeof url, "redis://127.0.0.1:%d", port);
    emq_conf_t *conf = late_conf(url, "wait");
    static slow h;
    slow_init(&h);
    bg b;
    bg_start(&b, conf, slow_handle, &h);
    /* Several attempts (backoff 50..400 ms); nothing it exposes counts
     * failed attempts, so this waits a scaled time. */
    usleep((useconds_t)emq_test_ms(800) * 1000);
    ASSERT(!atomic_load(&b.done));
    emq_srv_opts o = {.port = port};
    emq_srv *s = emq_srv_start(&o);
    emq_conn_t *adm = admin_connect(s);
    /* -1 until the group exists (NOGROUP). */
    WAIT_UNTIL(pending_total(adm, "emq:{jobs}", "g") == 0, 10000,
               "the consumer to connect and open its group");
    produce_n(s, "jobs", "late", 5);
    WAIT_UNTIL(recorded(&h.r) == 5, 10000, "the five entries handled");
    ASSERT(!atomic_load(&b.done));
    ASSERT_OK(bg_stop(&b, 3000), &b.err);
    WAIT_UNTIL(group_done(adm, "emq:{jobs}", "g"), 5000, "all acknowledged");
    emq_consumer_destroy(b.c); /* bg_start took the conf */
    emq_conn_destroy(adm);
    emq_srv_stop(s);
}

TEST_TIMEOUT(consumer_connect_wait_ends_on_stop, 20) {
    char url[64];
    snprintf(url, sizeof url, "redis://127.0.0.1:%d", emq_free_port());
    emq_conf_t *conf = late_conf(url, "wait");
    static slow h;
    slow_init(&h);
    bg b;
    bg_start(&b, conf, slow_handle, &h);
    usleep((useconds_t)emq_test_ms(300) * 1000); /* still trying */
    ASSERT(!atomic_load(&b.done));
    emq_consumer_stop(b.c);
    ASSERT(bg_wait(&b, 2000));
    ASSERT(b.st == EMQ_OK || b.st == EMQ_ECLOSED);
    emq_consumer_destroy(b.c); /* bg_start took the conf */
}

TEST_TIMEOUT(consumer_connect_wait_does_not_wait_out_a_wrong_password, 20) {
    emq_srv_opts o = {.requirepass = "right"};
    emq_srv *s = emq_srv_start(&o);
    emq_conf_t *conf = late_conf(emq_srv_url(s), "wait");
    conf_set(conf, P_PASSWORD, "wrong");
    static slow h;
    slow_init(&h);
    emq_consumer_t *c;
    emq_error err;
    ASSERT_OK(emq_consumer_new(conf, slow_handle, &h, &c, &err), &err);
    ASSERT_STATUS(emq_consumer_run(c, &err), EMQ_EAUTH, &err);
    emq_consumer_destroy(c);
    emq_conf_destroy(conf);
    emq_srv_stop(s);
}
