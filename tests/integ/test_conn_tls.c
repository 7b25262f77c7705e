/* SPDX-License-Identifier: BSD-3-Clause */
/* test_conn_tls.c: the connection API over TLS against a real redis-server.
 *
 * The server runs with certificates made by harness/tlscerts.c. A client
 * that trusts the test CA connects; one that trusts an unrelated CA, meets
 * an expired certificate or a certificate for another host fails with
 * EMQ_ETLS and a message that says which; verification turned off accepts
 * the mismatched certificate; and a server that requires client
 * certificates accepts ours and refuses a client without one. Every test
 * skips, with the reason, when redis-server was built without TLS.
 */
#include "harness/server.h"
#include "harness/tlscerts.h"
#include "integ/conn_helpers.h"

#include <stdlib.h>
#include <unistd.h>

/* Starts a TLS server or skips the test when redis-server has no TLS. */
static emq_srv *tls_server(emq_srv_cert cert, emq_srv_client_auth auth) {
    emq_srv_opts o = {
        .transport = EMQ_SRV_TLS, .cert = cert, .client_auth = auth};
    char why[512] = "";
    emq_srv *s = emq_srv_try_start(&o, why, sizeof why);
    if (s == NULL && strstr(why, "exited"))
        SKIP("redis-server exited on a TLS config: built without TLS?");
    if (s == NULL) {
        emq_srv_print_failure();
        FAIL("TLS server did not start: %s", why);
    }
    return s;
}

/* A conf for s trusting ca (NULL: the test CA). */
static emq_conf_t *tls_conf(const emq_srv *s, const char *ca) {
    const emq_certs *c = emq_certs_get();
    emq_conf_t *conf = conf_for(emq_srv_url(s));
    conf_set(conf, P_TLS_CA, ca ? ca : c->ca_crt);
    return conf;
}

static void ping_ok(emq_conn_t *c) {
    emq_reply *r = CMD(c, "PING");
    ASSERT_REPLY_TEXT(r, EMQ_REPLY_STATUS, "PONG");
    emq_reply_free(r);
}

TEST(conn_tls_connects_with_test_ca) {
    emq_srv *s = tls_server(EMQ_SRV_CERT_GOOD, EMQ_SRV_CLIENT_AUTH_NO);
    emq_conf_t *conf = tls_conf(s, NULL);
    emq_conn_t *c = connect_ok(conf);
    emq_conf_destroy(conf);
    ping_ok(c);
    /* A large value crosses many TLS records intact. */
    enum { BIG = 300 * 1000 };
    char *big = malloc(BIG);
    ASSERT(big != NULL);
    for (size_t i = 0; i < BIG; i++)
        big[i] = (char)(i * 31 + 7);
    const char *set[] = {"SET", "big", big};
    size_t setlen[] = {3, 3, BIG};
    emq_error err;
    emq_reply *r = NULL;
    ASSERT_OK(emq_conn_command(c, 3, set, setlen, &r, &err), &err);
    emq_reply_free(r);
    r = CMD(c, "GET", "big");
    size_t len = 0;
    const char *got = emq_reply_str(r, &len);
    ASSERT_EQ_SIZE(len, BIG);
    ASSERT(memcmp(got, big, BIG) == 0);
    emq_reply_free(r);
    free(big);
    emq_conn_destroy(c);
    emq_srv_stop(s);
}

TEST(conn_tls_wrong_ca_is_etls) {
    emq_srv *s = tls_server(EMQ_SRV_CERT_GOOD, EMQ_SRV_CLIENT_AUTH_NO);
    emq_conf_t *conf = tls_conf(s, emq_certs_get()->other_ca_crt);
    emq_error err;
    connect_fails(conf, EMQ_ETLS, &err);
    ASSERT_CONTAINS_CI(err.message, "certificate");
    ASSERT(contains_ci(err.message, "issuer") ||
           contains_ci(err.message, "verif"));
    emq_conf_destroy(conf);
    emq_srv_stop(s);
}

TEST(conn_tls_expired_certificate_is_etls) {
    emq_srv *s = tls_server(EMQ_SRV_CERT_EXPIRED, EMQ_SRV_CLIENT_AUTH_NO);
    emq_conf_t *conf = tls_conf(s, NULL);
    emq_error err;
    connect_fails(conf, EMQ_ETLS, &err);
    ASSERT_CONTAINS_CI(err.message, "expired");
    emq_conf_destroy(conf);
    emq_srv_stop(s);
}

TEST(conn_tls_hostname_mismatch_is_etls) {
    emq_srv *s = tls_server(EMQ_SRV_CERT_WRONGHOST, EMQ_SRV_CLIENT_AUTH_NO);
    emq_conf_t *conf = tls_conf(s, NULL);
    emq_error err;
    connect_fails(conf, EMQ_ETLS, &err);
    ASSERT_CONTAINS_CI(err.message, "mismatch");
    emq_conf_destroy(conf);
    /* By name too: "localhost" is not wrong.example.invalid either. */
    char url[64];
    snprintf(url, sizeof url, "rediss://localhost:%d", emq_srv_port(s));
    conf = conf_for(url);
    conf_set(conf, P_TLS_CA, emq_certs_get()->ca_crt);
    connect_fails(conf, EMQ_ETLS, &err);
    ASSERT_CONTAINS_CI(err.message, "mismatch");
    emq_conf_destroy(conf);
    emq_srv_stop(s);
}

/* tls.sni is the name the certificate must hold (docs/SECURITY.md; issue
 * 13): a server reached at 127.0.0.1 whose certificate names only
 * wrong.example.invalid is accepted with that SNI; the good certificate
 * (127.0.0.1, localhost) is refused under another SNI. */
TEST(conn_tls_sni_is_the_name_verified) {
    emq_srv *s = tls_server(EMQ_SRV_CERT_WRONGHOST, EMQ_SRV_CLIENT_AUTH_NO);
    emq_conf_t *conf = tls_conf(s, NULL);
    conf_set(conf, "tls.sni", "wrong.example.invalid");
    emq_conn_t *c = connect_ok(conf);
    ping_ok(c);
    emq_conn_destroy(c);
    emq_conf_destroy(conf);
    emq_srv_stop(s);
    s = tls_server(EMQ_SRV_CERT_GOOD, EMQ_SRV_CLIENT_AUTH_NO);
    conf = tls_conf(s, NULL);
    conf_set(conf, "tls.sni", "other.example.invalid");
    emq_error err;
    connect_fails(conf, EMQ_ETLS, &err);
    ASSERT_CONTAINS_CI(err.message, "mismatch");
    emq_conf_destroy(conf);
    emq_srv_stop(s);
}

TEST(conn_tls_verify_none_accepts_mismatched_certificate) {
    emq_srv *s = tls_server(EMQ_SRV_CERT_WRONGHOST, EMQ_SRV_CLIENT_AUTH_NO);
    emq_conf_t *conf = conf_for(emq_srv_url(s));
    conf_set(conf, P_TLS_VERIFY, TLS_VERIFY_NONE);
    emq_conn_t *c = connect_ok(conf);
    emq_conf_destroy(conf);
    ping_ok(c);
    emq_conn_destroy(c);
    emq_srv_stop(s);
}

TEST(conn_tls_client_certificate_when_server_requires_one) {
    emq_srv *s = tls_server(EMQ_SRV_CERT_GOOD, EMQ_SRV_CLIENT_AUTH_YES);
    const emq_certs *certs = emq_certs_get();
    emq_conf_t *conf = tls_conf(s, NULL);
    conf_set(conf, P_TLS_CERT, certs->client_crt);
    conf_set(conf, P_TLS_KEY, certs->client_key);
    emq_conn_t *c = connect_ok(conf);
    emq_conf_destroy(conf);
    ping_ok(c);
    emq_conn_destroy(c);

    /* Without a client certificate the server refuses. With TLS 1.3 the
     * client may only learn it on its first read, so either step may be
     * the one that fails; it must fail with a TLS or transport error. */
    conf = tls_conf(s, NULL);
    emq_error err;
    memset(&err, 0, sizeof err);
    emq_status st = emq_conn_new(conf, &c, &err);
    emq_conf_destroy(conf);
    if (st == EMQ_OK) {
        emq_reply *r = NULL;
        st = cmd_status(c, &r, &err, "PING", (char *)NULL);
        ASSERT(r == NULL);
        ASSERT_EQ_INT(emq_conn_is_broken(c), 1);
        emq_conn_destroy(c);
    }
    if (st != EMQ_ETLS && st != EMQ_EIO)
        FAIL("no client cert: got %s, want EMQ_ETLS or EMQ_EIO (%s)",
             emq_status_name(st), err.message);
    ASSERT(err.message[0] != '\0');
    emq_srv_stop(s);
}

/* An encrypted tls.key_file never prompts (OpenSSL's default callback
 * reads the terminal, or stdin: a CLI fed on a pipe lost its input to
 * it): without tls.key_password the connect fails at once saying the key
 * is encrypted; with a wrong one it says it cannot decrypt; with the
 * right one the server that requires a client certificate accepts it.
 * stdin is a pipe holding a line here: nothing reads it. */
TEST(conn_tls_encrypted_key_never_prompts) {
    emq_srv *s = tls_server(EMQ_SRV_CERT_GOOD, EMQ_SRV_CLIENT_AUTH_YES);
    const emq_certs *certs = emq_certs_get();
    const char *key = certs->client_key_encrypted;
    int feed[2];
    ASSERT(pipe(feed) == 0);
    ASSERT(write(feed[1], EMQ_CERTS_KEY_PASSPHRASE "\n", 9) == 9);
    int saved = dup(0);
    ASSERT(saved >= 0 && dup2(feed[0], 0) == 0);
    static const struct {
        const char *password, *says; /* says NULL: connects */
    } cases[] = {
        {NULL, "is encrypted: set tls.key_password"},
        {"WrongPass", "cannot decrypt tls.key_file"},
        {EMQ_CERTS_KEY_PASSPHRASE, NULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        emq_conf_t *conf = tls_conf(s, NULL);
        conf_set(conf, P_TLS_CERT, certs->client_crt);
        conf_set(conf, P_TLS_KEY, key);
        if (cases[i].password)
            conf_set(conf, "tls.key_password", cases[i].password);
        char back[64];
        ASSERT_OK(
            emq_conf_get(conf, "tls.key_password", back, sizeof back, NULL),
            NULL);
        ASSERT_NOT_CONTAINS(back, "Pass");
        emq_conn_t *c = NULL;
        emq_error err;
        emq_status st = emq_conn_new(conf, &c, &err);
        emq_conf_destroy(conf);
        if (cases[i].says == NULL) {
            ASSERT_OK(st, &err);
            ping_ok(c);
            emq_conn_destroy(c);
            continue;
        }
        ASSERT_STATUS(st, EMQ_EINVAL, &err); /* never worth a retry */
        ASSERT_CONTAINS(err.message, cases[i].says);
        ASSERT_NOT_CONTAINS(err.message, "Pass");
    }
    /* The line on stdin is still there: nothing read it. */
    char line[16] = "";
    close(feed[1]);
    ASSERT_EQ_INT((int)read(0, line, sizeof line - 1), 9);
    dup2(saved, 0);
    close(saved);
    close(feed[0]);
    emq_srv_stop(s);
}

static void never_called(void *opaque, const emq_delivery *d) {
    (void)d;
    (*(int *)opaque)++;
}

/* A lazy producer whose connection can never work (an encrypted key
 * without its password: EMQ_EINVAL) fails every later call at once,
 * asynchronous ones too. An async entry taken after the failed attempt
 * was queued and failed only at producer.timeout_ms (ETIMEDOUT), so
 * `echomq produce --lines` exited 1 after 10 s instead of 2 at once,
 * whenever its first line came after the attempt. */
TEST(conn_tls_producer_with_a_refused_key_fails_async_at_once) {
    emq_srv *s = tls_server(EMQ_SRV_CERT_GOOD, EMQ_SRV_CLIENT_AUTH_YES);
    const emq_certs *certs = emq_certs_get();
    emq_conf_t *conf = tls_conf(s, NULL);
    conf_set(conf, P_TLS_CERT, certs->client_crt);
    conf_set(conf, P_TLS_KEY, certs->client_key_encrypted);
    conf_set(conf, "queue", "tq");
    conf_set(conf, "producer.timeout_ms", "600000");
    emq_producer_t *p = NULL;
    emq_error err;
    ASSERT_OK(emq_producer_new(conf, &p, &err), &err); /* lazy */
    emq_field f = {"n", 1, "1", 1};
    /* A synchronous call waits for the attempt and gets its refusal. */
    ASSERT_STATUS(emq_produce(p, &f, 1, NULL, &err), EMQ_EINVAL, &err);
    ASSERT_CONTAINS(err.message, "is encrypted");
    int calls = 0;
    ASSERT_STATUS(emq_produce_async(p, &f, 1, never_called, &calls, &err),
                  EMQ_EINVAL, &err);
    ASSERT_CONTAINS(err.message, "is encrypted");
    emq_producer_destroy(p);
    ASSERT_EQ_INT(calls, 0); /* nothing was queued to report */
    emq_conf_destroy(conf);
    emq_srv_stop(s);
}
