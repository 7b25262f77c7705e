/* SPDX-License-Identifier: BSD-3-Clause */
/* test_consumer_stats_cb.c: the statistics callback (stats.interval_ms,
 * emq_conf_set_stats) against a real redis-server, in run mode (a handler
 * of about 5 ms) and pull mode, and `echomq consume --stats-interval`:
 * reports come at the interval, with the counters, the handler latency
 * (p50 in the right power of two), the delivery counts, the group's lag
 * and the oldest pending age. */
#include "integ/poll_helpers.h"
#include "integ/cli_helpers.h"

typedef struct reports {
    pthread_mutex_t mu;
    int n;
    char last[8192];
} reports;

static void on_stats(void *opaque, const char *json, size_t len) {
    reports *r = opaque;
    pthread_mutex_lock(&r->mu);
    r->n++;
    snprintf(r->last, sizeof r->last, "%.*s", (int)len, json);
    pthread_mutex_unlock(&r->mu);
}

static long long number_after(const char *json, const char *key) {
    const char *at = strstr(json, key);
    if (at == NULL)
        FAIL("no %s in %s", key, json);
    return strtoll(at + strlen(key), NULL, 10);
}

/* The number of reports so far and, when key is not NULL, the number
 * after key in the last one (-1 when it has none). Locked reads. */
static int reports_n(reports *r) {
    pthread_mutex_lock(&r->mu);
    int n = r->n;
    pthread_mutex_unlock(&r->mu);
    return n;
}

static long long last_number(reports *r, const char *key) {
    pthread_mutex_lock(&r->mu);
    const char *at = strstr(r->last, key);
    long long v = at ? strtoll(at + strlen(key), NULL, 10) : -1;
    pthread_mutex_unlock(&r->mu);
    return v;
}

static emq_verdict five_ms(void *opaque, const emq_entry *e, char *reason,
                           size_t size) {
    (void)opaque;
    (void)reason;
    (void)size;
    usleep(5000);
    /* j0..j9 fail once: delivered twice. */
    if (e->deliveries == 1 && e->fields[0].value_len == 2)
        return EMQ_RETRY;
    return EMQ_ACK;
}

TEST_TIMEOUT(stats_callback_run_mode, 40) {
    emq_srv *s = emq_srv_start(NULL);
    emq_conn_t *adm = admin_connect(s);
    CMD_NOERR(adm, "XGROUP", "CREATE", "emq:{jobs}", "g", "$", "MKSTREAM");
    static reports r;
    memset(&r, 0, sizeof r);
    pthread_mutex_init(&r.mu, NULL);
    emq_conf_t *conf = fault_conf(emq_srv_url(s));
    conf_set(conf, "stats.interval_ms", "200");
    conf_set(conf, "retry.backoff_ms", "0");
    emq_conf_set_stats(conf, on_stats, &r);
    produce_n(s, "jobs", "j", 60);
    bg b;
    bg_start(&b, conf, five_ms, NULL);
    WAIT_UNTIL(group_done(adm, "emq:{jobs}", "g"), 15000, "all handled");
    int n0 = reports_n(&r);
    WAIT_UNTIL(reports_n(&r) >= n0 + 2, 5000, "two more reports");
    /* An ack is counted when its reply is read, after the server applied
     * it: wait for a report with all of them. */
    WAIT_UNTIL(last_number(&r, "\"acked\":") >= 60, 5000,
               "a report of the 60 acks");
    ASSERT_OK(bg_stop(&b, 3000), &b.err);
    pthread_mutex_lock(&r.mu);
    printf("    %d reports; the last: %s\n", r.n, r.last);
    ASSERT(r.n >= 3);
    ASSERT_CONTAINS(r.last, "\"stream\":\"emq:{jobs}\"");
    ASSERT_EQ_INT(number_after(r.last, "\"acked\":"), 60);
    ASSERT_EQ_INT(number_after(r.last, "\"handler_latency_us\":{\"count\":"),
                  70);
    long long p50 = number_after(r.last, "\"p50\":");
    /* 5 ms: [4096, 8192) us; a loaded machine sleeps longer. */
    ASSERT(p50 >= 4096 && p50 <= 65536LL * emq_test_ms(1));
    ASSERT_EQ_INT(number_after(r.last, "\"deliveries\":{\"1\":"), 60);
    ASSERT_EQ_INT(number_after(r.last, "\"2\":"), 10);
    ASSERT_CONTAINS(r.last, "\"oldest_pending_ms\":null");
    if (emq_srv_redis_at_least(s, 7, 0) || emq_srv_is_valkey(s))
        ASSERT_EQ_INT(number_after(r.last, "\"lag\":"), 0);
    else
        ASSERT_CONTAINS(r.last, "\"lag\":null");
    pthread_mutex_unlock(&r.mu);
    emq_consumer_destroy(b.c);
    emq_conn_destroy(adm);
    emq_srv_stop(s);
}

TEST_TIMEOUT(stats_callback_pull_mode_counts_time_out, 40) {
    emq_srv *s = emq_srv_start(NULL);
    emq_conn_t *adm = admin_connect(s);
    CMD_NOERR(adm, "XGROUP", "CREATE", "emq:{jobs}", "g", "$", "MKSTREAM");
    static reports r;
    memset(&r, 0, sizeof r);
    pthread_mutex_init(&r.mu, NULL);
    emq_conf_t *conf = fault_conf(emq_srv_url(s));
    conf_set(conf, "stats.interval_ms", "100");
    emq_conf_set_stats(conf, on_stats, &r);
    emq_consumer_t *c;
    emq_error err;
    ASSERT_OK(emq_consumer_new(conf, NULL, NULL, &c, &err), &err);
    produce_n(s, "jobs", "p", 20);
    /* Four workers hold each entry 30 ms: an entry is out from its poll to
     * its settlement, 30 ms for the first four, up to about 150 ms for the
     * last ones, which wait in the service's own queue meanwhile. */
    static work_pool pool;
    wp_start(&pool, c, 4, 30);
    WAIT_UNTIL(recorded(&pool.r) == 20, 10000, "all handed out");
    WAIT_UNTIL(pending_total(adm, "emq:{jobs}", "g") == 0, 5000, "settled");
    WAIT_UNTIL(last_number(&r, "\"handler_latency_us\":{\"count\":") == 20,
               5000, "a report of the 20 settlements");
    wp_stop(&pool);
    pthread_mutex_lock(&r.mu);
    printf("    %d reports; the last: %s\n", r.n, r.last);
    ASSERT_EQ_INT(number_after(r.last, "\"handler_latency_us\":{\"count\":"),
                  20);
    long long p50 = number_after(r.last, "\"p50\":");
    ASSERT(p50 >= 16384 && p50 <= 524288LL * emq_test_ms(1));
    pthread_mutex_unlock(&r.mu);
    ASSERT_OK(emq_consumer_close(c, 2000, &err), &err);
    emq_consumer_destroy(c);
    emq_conf_destroy(conf);
    emq_conn_destroy(adm);
    emq_srv_stop(s);
}

TEST_TIMEOUT(cli_consume_stats_interval_writes_lines, 40) {
    emq_srv *s = emq_srv_start(NULL);
    const char *url = emq_srv_url(s);
    cli_result r;
    CLI_IN(&r, url, "1\n2\n3\n", "produce", "jobs", "--lines");
    cli_free(&r);
    CLI(&r, url, "consume", "jobs", "-g", "g", "-c", "c", "-s", "head",
        "--stats-interval", "100", "--until-idle", "800", "-q");
    ASSERT_EXIT(&r, 0);
    ASSERT_EQ_INT(cli_lines(r.out), 3);
    ASSERT_CONTAINS(r.err, "\"handler_latency_us\":");
    ASSERT_CONTAINS(r.err, "\"lag\":");
    ASSERT(cli_lines(r.err) >= 3);
    cli_free(&r);
    CLI(&r, url, "consume", "jobs", "-g", "g", "-c", "c", "-s", "head",
        "--stats-interval", "0");
    ASSERT_EXIT(&r, 2);
    cli_free(&r);
    emq_srv_stop(s);
}
