/* test_fixture.c: self-tests of the test fixtures, without the library.
 *
 * The integration tests trust three helpers: the redis-server fixture
 * (server.c), the certificate maker (tlscerts.c) and the misbehaving peer
 * (fakepeer.c). These tests check that each does what it claims, using only
 * raw sockets and the fixture's own RESP2 helper: a server starts, answers,
 * and is gone after stop; a killed server restarts on the same port with
 * its data; a TLS server comes up with the generated certificates; a bad
 * config fails fast with a reason.
 */
#include "harness/server.h"
#include "harness/test.h"
#include "harness/tlscerts.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int pid_alive(pid_t pid) { return kill(pid, 0) == 0 || errno != ESRCH; }

TEST(fixture_tcp_server_starts_answers_and_stops) {
    emq_srv *s = emq_srv_start(NULL);
    pid_t pid = emq_srv_pid(s);
    char out[256], want[64];
    ASSERT(pid > 0);
    ASSERT(pid_alive(pid));
    ASSERT_EQ_INT(emq_srv_cmd(s, out, sizeof out, "PING", NULL), '+');
    ASSERT_EQ_STR(out, "PONG");
    snprintf(want, sizeof want, "redis://127.0.0.1:%d", emq_srv_port(s));
    ASSERT_EQ_STR(emq_srv_url(s), want);
    ASSERT_EQ_INT(emq_srv_cmd(s, out, sizeof out, "CONFIG", "GET", "port",
                              NULL),
                  '*');
    snprintf(want, sizeof want, "port\n%d", emq_srv_port(s));
    ASSERT_EQ_STR(out, want);
    ASSERT_EQ_INT(emq_srv_cmd(s, out, sizeof out, "CONFIG", "GET", "save",
                              NULL),
                  '*');
    ASSERT_EQ_STR(out, "save\n");
    ASSERT_EQ_INT(emq_srv_cmd(s, out, sizeof out, "CONFIG", "GET", "bind",
                              NULL),
                  '*');
    ASSERT_EQ_STR(out, "bind\n127.0.0.1");
    emq_srv_stop(s);
    ASSERT(!pid_alive(pid));
}

TEST(fixture_raw_helper_flattens_replies) {
    emq_srv *s = emq_srv_start(NULL);
    char out[256];
    ASSERT_EQ_INT(emq_srv_cmd(s, out, sizeof out, "SET", "k", "v", NULL), '+');
    ASSERT_EQ_STR(out, "OK");
    ASSERT_EQ_INT(emq_srv_cmd(s, out, sizeof out, "GET", "k", NULL), '$');
    ASSERT_EQ_STR(out, "v");
    ASSERT_EQ_INT(emq_srv_cmd(s, out, sizeof out, "GET", "nope", NULL), '$');
    ASSERT_EQ_STR(out, "(nil)");
    ASSERT_EQ_INT(emq_srv_cmd(s, out, sizeof out, "INCR", "n", NULL), ':');
    ASSERT_EQ_STR(out, "1");
    ASSERT_EQ_INT(emq_srv_cmd(s, out, sizeof out, "INCR", "k", NULL), '-');
    ASSERT_CONTAINS(out, "ERR");
    /* Truncation keeps the buffer NUL-terminated. */
    char tiny[4];
    ASSERT_EQ_INT(emq_srv_cmd(s, tiny, sizeof tiny, "PING", NULL), '+');
    ASSERT_EQ_STR(tiny, "PON");
    emq_srv_stop(s);
}

TEST(fixture_unix_server_has_no_tcp_port) {
    emq_srv_opts o = {.transport = EMQ_SRV_UNIX};
    emq_srv *s = emq_srv_start(&o);
    char out[256], want[600];
    ASSERT_EQ_INT(emq_srv_port(s), 0);
    snprintf(want, sizeof want, "unix://%s", emq_srv_socket(s));
    ASSERT_EQ_STR(emq_srv_url(s), want);
    ASSERT_EQ_INT(emq_srv_cmd(s, out, sizeof out, "CONFIG", "GET", "port",
                              NULL),
                  '*');
    ASSERT_EQ_STR(out, "port\n0");
    emq_srv_stop(s);
}

TEST(fixture_requirepass_and_extra_config) {
    emq_srv_opts o = {.requirepass = "s3cret",
                      .extra_config = "user alice on >pw ~* +@all\n"
                                      "maxmemory-policy noeviction"};
    emq_srv *s = emq_srv_start(&o);
    char out[256];
    /* The helper authenticates; ACL shows the extra user. */
    ASSERT_EQ_INT(emq_srv_cmd(s, out, sizeof out, "ACL", "USERS", NULL), '*');
    ASSERT_EQ_STR(out, "alice\ndefault");
    ASSERT_EQ_INT(emq_srv_cmd(s, out, sizeof out, "CONFIG", "GET",
                              "maxmemory-policy", NULL),
                  '*');
    ASSERT_EQ_STR(out, "maxmemory-policy\nnoeviction");
    emq_srv_stop(s);
}

TEST(fixture_bad_config_fails_fast_with_reason) {
    emq_srv_opts o = {.extra_config = "no-such-directive 1"};
    char why[512] = "";
    emq_srv *s = emq_srv_try_start(&o, why, sizeof why);
    ASSERT(s == NULL);
    ASSERT_CONTAINS(why, "exited");
}

TEST(fixture_kill9_and_restart_on_same_port_keeps_aof_data) {
    emq_srv_opts o = {.appendonly = 1};
    emq_srv *s = emq_srv_start(&o);
    char out[256];
    int port = emq_srv_port(s);
    pid_t first = emq_srv_pid(s);
    ASSERT_EQ_INT(emq_srv_cmd(s, out, sizeof out, "SET", "durable", "yes",
                              NULL),
                  '+');
    emq_srv_kill9(s);
    ASSERT_EQ_INT(emq_srv_pid(s), -1);
    ASSERT(!pid_alive(first));
    ASSERT(emq_srv_cmd(s, out, sizeof out, "PING", NULL) < 0);
    emq_srv_restart(s);
    ASSERT(emq_srv_pid(s) > 0);
    ASSERT(emq_srv_pid(s) != first);
    ASSERT_EQ_INT(emq_srv_port(s), port);
    ASSERT_EQ_INT(emq_srv_cmd(s, out, sizeof out, "GET", "durable", NULL),
                  '$');
    ASSERT_EQ_STR(out, "yes");
    emq_srv_stop(s);
}

TEST(fixture_certs_are_generated) {
    const emq_certs *c = emq_certs_get();
    struct stat st;
    const char *files[] = {c->ca_crt,        c->ca_key,     c->server_crt,
                           c->server_key,    c->expired_crt, c->wronghost_crt,
                           c->client_crt,    c->client_key, c->other_ca_crt};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        if (stat(files[i], &st) != 0 || st.st_size == 0)
            FAIL("missing or empty: %s", files[i]);
    }
    /* openssl verify agrees with what each certificate is for. */
    char log[600];
    snprintf(log, sizeof log, "%s/verify.log", c->dir);
    char *good[] = {"openssl", "verify", "-CAfile", (char *)c->ca_crt,
                    (char *)c->server_crt, NULL};
    ASSERT_EQ_INT(emq_run_tool(good, log, 10000), 0);
    char *expired[] = {"openssl", "verify", "-CAfile", (char *)c->ca_crt,
                       (char *)c->expired_crt, NULL};
    ASSERT(emq_run_tool(expired, log, 10000) != 0);
    char *wrongca[] = {"openssl", "verify", "-CAfile",
                       (char *)c->other_ca_crt, (char *)c->server_crt, NULL};
    ASSERT(emq_run_tool(wrongca, log, 10000) != 0);
    char *ip[] = {"openssl", "verify", "-CAfile", (char *)c->ca_crt,
                  "-verify_ip", "127.0.0.1", (char *)c->server_crt, NULL};
    ASSERT_EQ_INT(emq_run_tool(ip, log, 10000), 0);
    char *wrongip[] = {"openssl", "verify", "-CAfile", (char *)c->ca_crt,
                       "-verify_ip", "127.0.0.1", (char *)c->wronghost_crt,
                       NULL};
    ASSERT(emq_run_tool(wrongip, log, 10000) != 0);
    char *client[] = {"openssl", "verify", "-CAfile", (char *)c->ca_crt,
                      "-purpose", "sslclient", (char *)c->client_crt, NULL};
    ASSERT_EQ_INT(emq_run_tool(client, log, 10000), 0);
}

TEST(fixture_tls_server_starts) {
    emq_srv_opts o = {.transport = EMQ_SRV_TLS};
    char why[512] = "";
    emq_srv *s = emq_srv_try_start(&o, why, sizeof why);
    if (s == NULL && strstr(why, "exited")) {
        /* Tell a redis-server built without TLS apart from a real bug. */
        SKIP("redis-server refused the TLS config (built without TLS?)");
    }
    ASSERT(s != NULL);
    char out[256], want[64];
    snprintf(want, sizeof want, "rediss://127.0.0.1:%d", emq_srv_port(s));
    ASSERT_EQ_STR(emq_srv_url(s), want);
    ASSERT_EQ_INT(emq_srv_cmd(s, out, sizeof out, "CONFIG", "GET", "tls-port",
                              NULL),
                  '*');
    snprintf(want, sizeof want, "tls-port\n%d", emq_srv_port(s));
    ASSERT_EQ_STR(out, want);
    /* A real handshake with the openssl client, verifying against our CA. */
    const emq_certs *c = emq_certs_get();
    char connect[64], log[600];
    snprintf(connect, sizeof connect, "127.0.0.1:%d", emq_srv_port(s));
    snprintf(log, sizeof log, "%s/s_client.log", emq_srv_dir(s));
    char *argv[] = {"openssl", "s_client", "-connect", connect, "-CAfile",
                    (char *)c->ca_crt, "-verify_return_error", "-verify_ip",
                    "127.0.0.1", "-brief", NULL};
    int rc = emq_run_tool(argv, log, 10000);
    if (rc != 0)
        emq_print_tail(log, 10);
    ASSERT_EQ_INT(rc, 0);
    emq_srv_stop(s);
}

TEST(fixture_free_port_is_refused) {
    int port = emq_free_port();
    ASSERT(port > 0 && port < 65536);
}
