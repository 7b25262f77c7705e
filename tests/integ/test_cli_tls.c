/* SPDX-License-Identifier: BSD-3-Clause */
/* test_cli_tls.c: the global TLS flags --tls-ca, --tls-cert and --tls-key
 * end to end against a private TLS redis-server (rediss://127.0.0.1:PORT,
 * certificates from harness/tlscerts.c): produce, consume and info through
 * the test CA; a wrong CA (and no CA at all) is exit 1 with one line that
 * names the TLS failure and the flag to check; an unreadable --tls-* file
 * or a certificate without its key is exit 2 before connecting; a server
 * that requires a client certificate accepts --tls-cert/--tls-key and
 * refuses a client without them. Every test skips when redis-server has no TLS.
 */
#include "harness/tlscerts.h"
#include "integ/cli_check_helpers.h"

static emq_srv *tls_server(emq_srv_client_auth auth) {
    emq_srv_opts o = {.transport = EMQ_SRV_TLS,
                      .cert = EMQ_SRV_CERT_GOOD,
                      .client_auth = auth};
    char why[512] = "";
    emq_srv *s = emq_srv_try_start(&o, why, sizeof why);
    if (s == NULL && strstr(why, "exited"))
        SKIP("redis-server exited on a TLS config: built without TLS?");
    if (s == NULL) {
        emq_srv_print_failure();
        FAIL("TLS server did not start: %s", why);
    }
    ASSERT(strncmp(emq_srv_url(s), "rediss://127.0.0.1:", 19) == 0);
    return s;
}

/* A failed TLS connection: exit 1, one line naming the URL and TLS. */
static void assert_tls_failure(const cli_result *r) {
    ASSERT_EXIT(r, 1);
    ASSERT_ONE_LINE(r->err);
    ASSERT_CONTAINS(r->err, "echomq: cannot connect to rediss://127.0.0.1:");
    ASSERT_CONTAINS(r->err, "TLS");
}

TEST(cli_tls_with_the_test_ca) {
    emq_srv *s = tls_server(EMQ_SRV_CLIENT_AUTH_NO);
    const emq_certs *c = emq_certs_get();
    const char *url = emq_srv_url(s);
    cli_result r;
    CLI(&r, NULL, "--tls-ca", c->ca_crt, "-u", url, "produce", "tq", "k=v1",
        "--print-ids");
    ASSERT_EXIT(&r, 0);
    ASSERT_EQ_INT(cli_lines(r.out), 1);
    ASSERT_CONTAINS(r.err, "produced 1 entry to emq:{tq}");
    cli_free(&r);
    /* The flags after the verb, the URL from $ECHOMQ_URL. */
    CLI_IN(&r, url, "a\nb\n", "produce", "tq", "--lines", "-q", "--tls-ca",
           c->ca_crt);
    ASSERT_EXIT(&r, 0);
    ASSERT_EQ_STR(r.err, "");
    cli_free(&r);
    ASSERT_EQ_INT(srv_int(s, "XLEN", "emq:{tq}"), 3);
    CLI(&r, url, "consume", "tq", "-g", "g", "-c", "c", "--start", "head",
        "--limit", "3", "--tls-ca", c->ca_crt);
    ASSERT_EXIT(&r, 0);
    ASSERT_EQ_INT(cli_lines(r.out), 3);
    ASSERT_CONTAINS(r.out, "\"fields\":{\"k\":\"v1\"}}\n");
    ASSERT_CONTAINS(r.out, "\"fields\":{\"data\":\"b\"}}\n");
    ASSERT_CONTAINS(r.err, "consumed 3 entries (acknowledged 3");
    cli_free(&r);
    CLI(&r, url, "info", "tq", "--json", "--tls-ca", c->ca_crt);
    ASSERT_EXIT(&r, 0);
    ASSERT_JSON_LINES(r.out);
    ASSERT_CONTAINS(r.out, "\"length\":3");
    cli_free(&r);
    emq_srv_stop(s);
}

TEST(cli_tls_wrong_or_missing_ca_is_exit_1) {
    emq_srv *s = tls_server(EMQ_SRV_CLIENT_AUTH_NO);
    const emq_certs *c = emq_certs_get();
    const char *url = emq_srv_url(s);
    cli_result r;
    CLI(&r, url, "produce", "tq", "k=v", "--tls-ca", c->other_ca_crt);
    assert_tls_failure(&r);
    ASSERT_CONTAINS(r.err, "--tls-ca");
    cli_free(&r);
    CLI(&r, url, "info", "tq", "--tls-ca", c->other_ca_crt);
    assert_tls_failure(&r);
    cli_free(&r);
    CLI(&r, url, "consume", "tq", "-g", "g", "-c", "c", "--start", "head",
        "--tls-ca", c->other_ca_crt);
    assert_tls_failure(&r);
    cli_free(&r);
    /* Without --tls-ca the system's CAs do not know the test CA. */
    CLI(&r, url, "produce", "tq", "k=v");
    assert_tls_failure(&r);
    cli_free(&r);
    /* Nothing was written through any of them. */
    char out[64];
    emq_srv_cmd(s, out, sizeof out, "EXISTS", "emq:{tq}", NULL);
    ASSERT_EQ_STR(out, "0");
    /* A CA file that does not exist. */
    char missing[600];
    snprintf(missing, sizeof missing, "%s/no-such-ca.pem", emq_test_tmpdir());
    long long before = srv_connections(s);
    CLI(&r, url, "produce", "tq", "k=v", "--tls-ca", missing);
    ASSERT_EXIT(&r, 2);
    ASSERT_ONE_LINE(r.err);
    ASSERT_CONTAINS(r.err, "echomq: --tls-ca ");
    ASSERT_CONTAINS(r.err, "no-such-ca.pem: cannot read the file");
    cli_free(&r);
    CLI(&r, url, "consume", "tq", "-g", "g", "-c", "c", "--start", "head",
        "--tls-ca", missing);
    ASSERT_EXIT(&r, 2);
    ASSERT_CONTAINS(r.err, "no-such-ca.pem: cannot read the file");
    cli_free(&r);
    /* Refused before connecting: only our own INFO call arrived. */
    ASSERT_EQ_INT(srv_connections(s), before + 1);
    emq_srv_stop(s);
}

TEST(cli_tls_client_certificate_when_the_server_requires_one) {
    emq_srv *s = tls_server(EMQ_SRV_CLIENT_AUTH_YES);
    const emq_certs *c = emq_certs_get();
    const char *url = emq_srv_url(s);
    cli_result r;
    CLI(&r, url, "produce", "tq", "k=v", "-q", "--tls-ca", c->ca_crt,
        "--tls-cert", c->client_crt, "--tls-key", c->client_key);
    ASSERT_EXIT(&r, 0);
    ASSERT_EQ_STR(r.err, "");
    cli_free(&r);
    CLI(&r, url, "consume", "tq", "-g", "g", "-c", "c", "--start", "head",
        "--limit", "1", "-q", "--tls-ca", c->ca_crt, "--tls-cert",
        c->client_crt, "--tls-key", c->client_key);
    ASSERT_EXIT(&r, 0);
    ASSERT_CONTAINS(r.out, "\"fields\":{\"k\":\"v\"}}");
    cli_free(&r);
    CLI(&r, url, "pending", "tq", "-g", "g", "--tls-ca", c->ca_crt,
        "--tls-cert", c->client_crt, "--tls-key", c->client_key);
    ASSERT_EXIT(&r, 0);
    ASSERT_CONTAINS(r.err, "0 pending entries");
    cli_free(&r);
    /* Without a client certificate the server refuses the handshake (TLS
     * 1.3 may report it on the first read: still exit 1, one line). */
    CLI(&r, url, "produce", "tq", "k=v2", "--tls-ca", c->ca_crt);
    ASSERT_EXIT(&r, 1);
    ASSERT_ONE_LINE(r.err);
    ASSERT_CONTAINS(r.err, "echomq: ");
    ASSERT_CONTAINS(r.err, "rediss://127.0.0.1:");
    cli_free(&r);
    ASSERT_EQ_INT(srv_int(s, "XLEN", "emq:{tq}"), 1);
    /* A certificate without its key is refused before any connection. */
    CLI(&r, url, "produce", "tq", "k=v3", "--tls-ca", c->ca_crt, "--tls-cert",
        c->client_crt);
    ASSERT_EXIT(&r, 2);
    ASSERT_ONE_LINE(r.err);
    ASSERT_CONTAINS(r.err, "echomq: --tls-cert and --tls-key go together");
    cli_free(&r);
    CLI(&r, url, "info", "tq", "--tls-ca", c->ca_crt, "--tls-key",
        c->client_key);
    ASSERT_EXIT(&r, 2);
    ASSERT_CONTAINS(r.err, "--tls-cert and --tls-key go together");
    cli_free(&r);
    ASSERT_EQ_INT(srv_int(s, "XLEN", "emq:{tq}"), 1);
    emq_srv_stop(s);
}

/* An encrypted --tls-key: `produce --lines` fed on a pipe never gives its
 * input to a passphrase prompt (before, OpenSSL read the passphrase from
 * stdin, the lines were lost and the exit was 0): without
 * $ECHOMQ_TLS_KEY_PASSWORD it is exit 2 at once, saying the key is
 * encrypted and that nothing was written; with it every line is produced. -X
 * tls.key_password is refused (an -X value shows in ps). */
TEST(cli_tls_encrypted_key_takes_its_password_from_the_environment) {
    emq_srv *s = tls_server(EMQ_SRV_CLIENT_AUTH_YES);
    const emq_certs *c = emq_certs_get();
    const char *url = emq_srv_url(s);
    cli_result r;
    CLI_IN(&r, url, "a\nb\n", "produce", "tq", "--lines", "--tls-ca", c->ca_crt,
           "--tls-cert", c->client_crt, "--tls-key", c->client_key_encrypted);
    ASSERT_EXIT(&r, 2); /* the configuration's to fix, like a bad file */
    ASSERT_CONTAINS(r.err, "is encrypted: set tls.key_password");
    ASSERT_CONTAINS(r.err, "0 written");
    cli_free(&r);
    ASSERT_EQ_INT(srv_int(s, "XLEN", "emq:{tq}"), 0);
    setenv("ECHOMQ_TLS_KEY_PASSWORD", EMQ_CERTS_KEY_PASSPHRASE, 1);
    CLI_IN(&r, url, "a\nb\n", "produce", "tq", "--lines", "-q", "--tls-ca",
           c->ca_crt, "--tls-cert", c->client_crt, "--tls-key",
           c->client_key_encrypted);
    unsetenv("ECHOMQ_TLS_KEY_PASSWORD");
    ASSERT_EXIT(&r, 0);
    ASSERT_EQ_STR(r.err, "");
    cli_free(&r);
    ASSERT_EQ_INT(srv_int(s, "XLEN", "emq:{tq}"), 2);
    CLI(&r, url, "-X", "tls.key_password=" EMQ_CERTS_KEY_PASSPHRASE, "info",
        "tq");
    ASSERT_EXIT(&r, 2);
    ASSERT_CONTAINS(r.err, "$ECHOMQ_TLS_KEY_PASSWORD");
    ASSERT_NOT_CONTAINS(r.err, EMQ_CERTS_KEY_PASSPHRASE);
    cli_free(&r);
    emq_srv_stop(s);
}
