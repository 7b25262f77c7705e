/* SPDX-License-Identifier: BSD-3-Clause */
/* test_consumer_poll_tls.c: the pull API over TLS against a real
 * redis-server: many entries arrive in few TLS records, and the event
 * descriptor alone must say when to step.
 *
 * A file of its own so that the valgrind stage, which leaves TLS out
 * (memcheck makes each handshake and record seconds long on a loaded
 * machine), can run the rest of the pull API's tests.
 */
#include "integ/poll_helpers.h"
#include "harness/tlscerts.h"

#include <poll.h>

/* A TLS redis-server, or a skip when it was built without TLS. */
static emq_srv *tls_server(void) {
    emq_srv_opts o = {.transport = EMQ_SRV_TLS,
                      .cert = EMQ_SRV_CERT_GOOD,
                      .client_auth = EMQ_SRV_CLIENT_AUTH_NO};
    char why[512] = "";
    emq_srv *s = emq_srv_try_start(&o, why, sizeof why);
    if (s == NULL && strstr(why, "exited"))
        SKIP("redis-server exited on a TLS config: built without TLS?");
    if (s == NULL)
        FAIL("TLS server did not start: %s", why);
    return s;
}

/* Over TLS, driven by the event descriptor alone: many entries arrive in
 * few TLS records, which the TLS layer buffers beyond what the socket
 * shows; the descriptor watches the socket only while a reply is owed on
 * it and nothing else is, and a step reads all that arrived, so none is
 * stranded in that buffer. */
TEST_TIMEOUT(poll_event_fd_over_tls_misses_nothing, 60) {
    emq_srv *s = tls_server();
    emq_conf_t *conf = poll_conf(emq_srv_url(s), "1000");
    conf_set(conf, P_TLS_CA, emq_certs_get()->ca_crt);
    conf_set(conf, "count", "500");
    emq_consumer_t *c = poll_consumer(conf);
    emq_error err;
    int fd = emq_consumer_fd(c, &err);
    ASSERT(fd >= 0);
    /* The group first (the consumer opens it at "new"). */
    WAIT_UNTIL(client_id_by_name(s, "w", 1) > 0, 5000, "the read");
    emq_conf_t *pconf = conf_for(emq_srv_url(s));
    conf_set(pconf, P_TLS_CA, emq_certs_get()->ca_crt);
    conf_set(pconf, "queue", "jobs");
    emq_producer_t *p;
    ASSERT_OK(emq_producer_new(pconf, &p, &err), &err);
    static emq_field f[2000];
    static char values[2000][16];
    for (int i = 0; i < 2000; i++) {
        int len = snprintf(values[i], sizeof values[i], "t%d", i);
        f[i] = (emq_field){"n", 1, values[i], (size_t)len};
    }
    static emq_message msgs[2000];
    for (int i = 0; i < 2000; i++)
        msgs[i] = (emq_message){&f[i], 1, NULL};
    size_t written = 0;
    ASSERT_OK(emq_produce_batch(p, msgs, 2000, NULL, &written, &err), &err);
    ASSERT_EQ_INT((long long)written, 2000);
    static emq_entry *got[2000];
    size_t total = 0;
    int64_t end = now_ms() + emq_test_ms(20000);
    while (total < 2000 && now_ms() < end) {
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        if (poll(&pfd, 1, 1000) != 1)
            continue; /* only the descriptor tells when to step */
        size_t n = 0;
        ASSERT_OK(emq_consumer_step(c, got + total, 2000 - total, &n, &err),
                  &err);
        for (size_t i = 0; i < n; i++)
            ASSERT_OK(emq_consumer_ack(c, got[total + i], &err), &err);
        total += n;
    }
    ASSERT_EQ_INT((long long)total, 2000);
    for (size_t i = 0; i < total; i++)
        emq_entry_free(got[i]);
    ASSERT_OK(emq_consumer_close(c, 5000, &err), &err);
    emq_producer_destroy(p);
    emq_consumer_destroy(c);
    emq_conf_destroy(conf);
    emq_conf_destroy(pconf);
    emq_srv_stop(s);
}

/* A TLS server killed (it sends no close_notify: OpenSSL 3 reports an
 * unexpected EOF) and restarted under a poller: a cut connection, which
 * the consumer rides out, not a fatal TLS error; an entry added then
 * comes. */
TEST_TIMEOUT(poll_tls_server_killed_is_a_cut_connection, 60) {
    emq_srv *s = tls_server();
    emq_conf_t *conf = poll_conf(emq_srv_url(s), "100");
    conf_set(conf, P_TLS_CA, emq_certs_get()->ca_crt);
    emq_consumer_t *c = poll_consumer(conf);
    emq_entry *got[4];
    size_t n = 0;
    emq_error err;
    ASSERT_OK(emq_consumer_poll(c, got, 4, 0, &n, &err), &err);
    WAIT_UNTIL(client_id_by_name(s, "w", 1) > 0, 5000, "the read");
    emq_srv_kill9(s);
    emq_srv_restart(s);
    emq_consumer_stats st;
    int64_t end = now_ms() + emq_test_ms(10000);
    do { /* every poll meanwhile answers, none with an error */
        ASSERT_OK(emq_consumer_poll(c, got, 4, 100, &n, &err), &err);
        ASSERT_EQ_SIZE(n, 0);
        emq_consumer_stats_get(c, &st);
    } while ((st.reconnects < 1 || client_id_by_name(s, "w", 1) <= 0) &&
             now_ms() < end);
    ASSERT(st.reconnects >= 1);
    emq_conf_t *pconf = conf_for(emq_srv_url(s));
    conf_set(pconf, P_TLS_CA, emq_certs_get()->ca_crt);
    conf_set(pconf, "queue", "jobs");
    emq_producer_t *p;
    ASSERT_OK(emq_producer_new(pconf, &p, &err), &err);
    emq_field f = {"n", 1, "after", 5};
    ASSERT_OK(emq_produce(p, &f, 1, NULL, &err), &err);
    ASSERT_EQ_SIZE(poll_until(c, got, 1, 10000), 1);
    ASSERT_OK(emq_consumer_ack(c, got[0], &err), &err);
    emq_entry_free(got[0]);
    ASSERT_OK(emq_consumer_close(c, 5000, &err), &err);
    emq_producer_destroy(p);
    emq_consumer_destroy(c);
    emq_conf_destroy(conf);
    emq_conf_destroy(pconf);
    emq_srv_stop(s);
}
