/* SPDX-License-Identifier: BSD-3-Clause */
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
#include <stdlib.h>
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
    ASSERT_EQ_INT(
        emq_srv_cmd(s, out, sizeof out, "CONFIG", "GET", "port", NULL), '*');
    snprintf(want, sizeof want, "port\n%d", emq_srv_port(s));
    ASSERT_EQ_STR(out, want);
    ASSERT_EQ_INT(
        emq_srv_cmd(s, out, sizeof out, "CONFIG", "GET", "save", NULL), '*');
    ASSERT_EQ_STR(out, "save\n");
    ASSERT_EQ_INT(
        emq_srv_cmd(s, out, sizeof out, "CONFIG", "GET", "bind", NULL), '*');
    ASSERT_EQ_STR(out, "bind\n127.0.0.1");
    emq_srv_stop(s);
    ASSERT(!pid_alive(pid));
}

/* Which server runs: the binary EMQ_SERVER_BIN_DIR names (or PATH's), and
 * what emq_srv_server() says about it agrees with `redis-server --version`.
 * The matrix logs show the label this prints. */
TEST(fixture_reports_which_server_runs) {
    char prog[512];
    ASSERT_EQ_INT(emq_srv_program("redis-server", prog, sizeof prog), 0);
    const char *dir = emq_srv_bin_dir();
    if (dir) {
        char want[512];
        snprintf(want, sizeof want, "%s/redis-server", dir);
        ASSERT_EQ_STR(prog, want);
    }
    char kind[16];
    int binary = emq_srv_binary_version(kind, sizeof kind);
    ASSERT(binary >= 60000);
    emq_srv *s = emq_srv_start(NULL);
    const emq_srv_server_info *info = emq_srv_server(s);
    fprintf(stderr, "    server: %s (redis_version %s) from %s\n", info->label,
            info->redis_version, prog);
    ASSERT_EQ_STR(info->name, kind);
    ASSERT_EQ_INT(info->major * 10000 + info->minor * 100 + info->patch,
                  binary);
    ASSERT(info->compat >= 60000);
    ASSERT_EQ_INT(emq_srv_is_valkey(s), strcmp(kind, "valkey") == 0);
    if (emq_srv_is_valkey(s)) /* Valkey 8 reports redis_version 7.2.4 */
        ASSERT(emq_srv_redis_at_least(s, 7, 2));
    ASSERT_EQ_INT(emq_srv_redis_at_least(s, info->compat / 10000,
                                         info->compat / 100 % 100),
                  1);
    ASSERT_EQ_INT(emq_srv_redis_at_least(s, 99, 0), 0);
    /* Subcommand stats: exact from 7.0; before, the command's total. */
    char out[256];
    ASSERT_EQ_INT(emq_srv_cmd(s, out, sizeof out, "XGROUP", "CREATE", "k", "g",
                              "$", "MKSTREAM", NULL),
                  '+');
    ASSERT_EQ_INT(
        emq_srv_cmd(s, out, sizeof out, "XGROUP", "DESTROY", "k", "g", NULL),
        ':');
    int exact = -1;
    long long creates = emq_srv_calls(s, "xgroup|create", &exact);
    ASSERT_EQ_INT(exact, emq_srv_redis_at_least(s, 7, 0));
    ASSERT_EQ_INT(creates, exact ? 1 : 2);
    ASSERT_EQ_INT(emq_srv_calls(s, "xgroup|destroy", NULL), exact ? 1 : 2);
    ASSERT_EQ_INT(emq_srv_calls(s, "never-ran", NULL), 0);
    emq_srv_stop(s);
}

TEST(fixture_a_missing_server_folder_fails_with_its_name) {
    char *old = getenv("EMQ_SERVER_BIN_DIR");
    char saved[512] = "";
    if (old)
        snprintf(saved, sizeof saved, "%s", old);
    setenv("EMQ_SERVER_BIN_DIR", "/nonexistent/echomq-servers", 1);
    char why[512] = "";
    emq_srv *s = emq_srv_try_start(NULL, why, sizeof why);
    if (old)
        setenv("EMQ_SERVER_BIN_DIR", saved, 1);
    else
        unsetenv("EMQ_SERVER_BIN_DIR");
    ASSERT(s == NULL);
    ASSERT_CONTAINS(why, "EMQ_SERVER_BIN_DIR=/nonexistent/echomq-servers");
    ASSERT_CONTAINS(why, "redis-server");
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
    ASSERT_EQ_INT(
        emq_srv_cmd(s, out, sizeof out, "CONFIG", "GET", "port", NULL), '*');
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
    ASSERT_EQ_INT(
        emq_srv_cmd(s, out, sizeof out, "SET", "durable", "yes", NULL), '+');
    emq_srv_kill9(s);
    ASSERT_EQ_INT(emq_srv_pid(s), -1);
    ASSERT(!pid_alive(first));
    ASSERT(emq_srv_cmd(s, out, sizeof out, "PING", NULL) < 0);
    emq_srv_restart(s);
    ASSERT(emq_srv_pid(s) > 0);
    ASSERT(emq_srv_pid(s) != first);
    ASSERT_EQ_INT(emq_srv_port(s), port);
    ASSERT_EQ_INT(emq_srv_cmd(s, out, sizeof out, "GET", "durable", NULL), '$');
    ASSERT_EQ_STR(out, "yes");
    emq_srv_stop(s);
}

TEST(fixture_certs_are_generated) {
    const emq_certs *c = emq_certs_get();
    struct stat st;
    const char *files[] = {c->ca_crt,     c->ca_key,      c->server_crt,
                           c->server_key, c->expired_crt, c->wronghost_crt,
                           c->client_crt, c->client_key,  c->other_ca_crt};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        if (stat(files[i], &st) != 0 || st.st_size == 0)
            FAIL("missing or empty: %s", files[i]);
    }
    /* openssl verify agrees with what each certificate is for. */
    char log[600];
    snprintf(log, sizeof log, "%s/verify.log", c->dir);
    char *good[] = {"openssl",
                    "verify",
                    "-CAfile",
                    (char *)c->ca_crt,
                    (char *)c->server_crt,
                    NULL};
    ASSERT_EQ_INT(emq_run_tool(good, log, 10000), 0);
    char *expired[] = {"openssl",
                       "verify",
                       "-CAfile",
                       (char *)c->ca_crt,
                       (char *)c->expired_crt,
                       NULL};
    ASSERT(emq_run_tool(expired, log, 10000) != 0);
    char *wrongca[] = {"openssl",
                       "verify",
                       "-CAfile",
                       (char *)c->other_ca_crt,
                       (char *)c->server_crt,
                       NULL};
    ASSERT(emq_run_tool(wrongca, log, 10000) != 0);
    char *ip[] = {"openssl",
                  "verify",
                  "-CAfile",
                  (char *)c->ca_crt,
                  "-verify_ip",
                  "127.0.0.1",
                  (char *)c->server_crt,
                  NULL};
    ASSERT_EQ_INT(emq_run_tool(ip, log, 10000), 0);
    char *wrongip[] = {"openssl",
                       "verify",
                       "-CAfile",
                       (char *)c->ca_crt,
                       "-verify_ip",
                       "127.0.0.1",
                       (char *)c->wronghost_crt,
                       NULL};
    ASSERT(emq_run_tool(wrongip, log, 10000) != 0);
    char *client[] = {"openssl",
                      "verify",
                      "-CAfile",
                      (char *)c->ca_crt,
                      "-purpose",
                      "sslclient",
                      (char *)c->client_crt,
                      NULL};
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
    ASSERT_EQ_INT(
        emq_srv_cmd(s, out, sizeof out, "CONFIG", "GET", "tls-port", NULL),
        '*');
    snprintf(want, sizeof want, "tls-port\n%d", emq_srv_port(s));
    ASSERT_EQ_STR(out, want);
    /* A real handshake with the openssl client, verifying against our CA. */
    const emq_certs *c = emq_certs_get();
    char connect[64], log[600];
    snprintf(connect, sizeof connect, "127.0.0.1:%d", emq_srv_port(s));
    snprintf(log, sizeof log, "%s/s_client.log", emq_srv_dir(s));
    char *argv[] = {"openssl",
                    "s_client",
                    "-connect",
                    connect,
                    "-CAfile",
                    (char *)c->ca_crt,
                    "-verify_return_error",
                    "-verify_ip",
                    "127.0.0.1",
                    "-brief",
                    NULL};
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

/* ---- the fake peer, seen from a raw socket ---------------------------- */

#include "harness/fakepeer.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

static int raw_connect(int port) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    ASSERT(fd >= 0);
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons((uint16_t)port);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0)
        FAIL("connect 127.0.0.1:%d: %s", port, strerror(errno));
    return fd;
}

static void raw_send(int fd, const char *s) {
    ASSERT_EQ_INT(send(fd, s, strlen(s), MSG_NOSIGNAL), (long long)strlen(s));
}

/* Reads until want bytes arrived, EOF, or wait_ms passed. Returns bytes
 * read (buf NUL-terminated); *eof set when the peer closed or reset. */
static size_t raw_recv(int fd, char *buf, size_t size, size_t want, int wait_ms,
                       int *eof) {
    size_t got = 0;
    *eof = 0;
    for (int rounds = 0; got < want && got + 1 < size && rounds < wait_ms / 10;
         rounds++) {
        struct pollfd pfd = {fd, POLLIN, 0};
        if (poll(&pfd, 1, 10) <= 0)
            continue;
        ssize_t n = recv(fd, buf + got, size - 1 - got, 0);
        if (n <= 0) {
            *eof = 1;
            break;
        }
        got += (size_t)n;
    }
    buf[got] = '\0';
    return got;
}

TEST(fixture_peer_silent_accepts_and_never_answers) {
    emq_peer_opts o = {.mode = EMQ_PEER_SILENT};
    emq_peer *p = emq_peer_start(&o);
    int fd = raw_connect(emq_peer_port(p)), eof;
    char buf[64];
    raw_send(fd, "*1\r\n$4\r\nPING\r\n");
    ASSERT_EQ_SIZE(raw_recv(fd, buf, sizeof buf, 1, 200, &eof), 0);
    ASSERT_EQ_INT(eof, 0);
    ASSERT_EQ_INT(emq_peer_accepted(p), 1);
    ASSERT_EQ_INT(emq_peer_commands(p), 1);
    emq_peer_last_command(p, buf, sizeof buf);
    ASSERT_EQ_STR(buf, "PING");
    close(fd);
    emq_peer_stop(p);
}

TEST(fixture_peer_close_closes_at_once) {
    emq_peer_opts o = {.mode = EMQ_PEER_CLOSE};
    emq_peer *p = emq_peer_start(&o);
    int fd = raw_connect(emq_peer_port(p)), eof;
    char buf[64];
    ASSERT_EQ_SIZE(raw_recv(fd, buf, sizeof buf, 1, 2000, &eof), 0);
    ASSERT_EQ_INT(eof, 1);
    close(fd);
    emq_peer_stop(p);
}

TEST(fixture_peer_reply_answers_trigger_only) {
    emq_peer_opts o = {
        .mode = EMQ_PEER_REPLY, .reply = "?what\r\n", .trigger = "get"};
    emq_peer *p = emq_peer_start(&o);
    int fd = raw_connect(emq_peer_port(p)), eof;
    char buf[128];
    raw_send(fd, "*1\r\n$4\r\nPING\r\n");
    raw_recv(fd, buf, sizeof buf, 7, 2000, &eof);
    ASSERT_EQ_STR(buf, "+PONG\r\n");
    raw_send(fd, "*2\r\n$5\r\nHELLO\r\n$1\r\n3\r\n");
    raw_recv(fd, buf, sizeof buf, 30, 2000, &eof);
    ASSERT_EQ_STR(buf, "-ERR unknown command 'HELLO'\r\n");
    /* Two pipelined triggers in one write get two answers. */
    raw_send(fd,
             "*2\r\n$3\r\nGET\r\n$1\r\nk\r\n*2\r\n$3\r\nget\r\n$1\r\nk\r\n");
    raw_recv(fd, buf, sizeof buf, 14, 2000, &eof);
    ASSERT_EQ_STR(buf, "?what\r\n?what\r\n");
    ASSERT_EQ_INT(eof, 0);
    ASSERT_EQ_INT(emq_peer_commands(p), 4);
    close(fd);
    emq_peer_stop(p);
}

TEST(fixture_peer_reply_close_and_reply_stall) {
    emq_peer_opts o = {.mode = EMQ_PEER_REPLY_CLOSE, .reply = "$10\r\nabc"};
    emq_peer *p = emq_peer_start(&o);
    int fd = raw_connect(emq_peer_port(p)), eof;
    char buf[128];
    raw_send(fd, "PING\r\n"); /* inline commands count too */
    raw_recv(fd, buf, sizeof buf, 100, 2000, &eof);
    ASSERT_EQ_STR(buf, "$10\r\nabc");
    ASSERT_EQ_INT(eof, 1);
    close(fd);
    emq_peer_stop(p);

    o.mode = EMQ_PEER_REPLY_STALL;
    p = emq_peer_start(&o);
    fd = raw_connect(emq_peer_port(p));
    raw_send(fd, "*1\r\n$4\r\nPING\r\n");
    raw_recv(fd, buf, sizeof buf, 100, 300, &eof);
    ASSERT_EQ_STR(buf, "$10\r\nabc");
    ASSERT_EQ_INT(eof, 0);
    raw_send(fd, "*1\r\n$4\r\nPING\r\n");
    ASSERT_EQ_SIZE(raw_recv(fd, buf, sizeof buf, 1, 200, &eof), 0);
    ASSERT_EQ_INT(eof, 0);
    close(fd);
    emq_peer_stop(p);
}

TEST(fixture_peer_proxy_forwards_freezes_and_drops) {
    emq_srv *s = emq_srv_start(NULL);
    emq_peer_opts o = {.mode = EMQ_PEER_PROXY,
                       .upstream_port = emq_srv_port(s)};
    emq_peer *p = emq_peer_start(&o);
    int fd = raw_connect(emq_peer_port(p)), eof;
    char buf[128];
    raw_send(fd, "*1\r\n$4\r\nPING\r\n");
    raw_recv(fd, buf, sizeof buf, 7, 2000, &eof);
    ASSERT_EQ_STR(buf, "+PONG\r\n");
    emq_peer_freeze(p, 1);
    raw_send(fd, "*1\r\n$4\r\nPING\r\n");
    ASSERT_EQ_SIZE(raw_recv(fd, buf, sizeof buf, 1, 200, &eof), 0);
    ASSERT_EQ_INT(eof, 0);
    emq_peer_freeze(p, 0);
    raw_recv(fd, buf, sizeof buf, 7, 2000, &eof);
    ASSERT_EQ_STR(buf, "+PONG\r\n");
    emq_peer_drop(p);
    ASSERT_EQ_SIZE(raw_recv(fd, buf, sizeof buf, 1, 2000, &eof), 0);
    ASSERT_EQ_INT(eof, 1);
    close(fd);
    /* New connections are still forwarded after a drop. */
    fd = raw_connect(emq_peer_port(p));
    raw_send(fd, "*1\r\n$4\r\nPING\r\n");
    raw_recv(fd, buf, sizeof buf, 7, 2000, &eof);
    ASSERT_EQ_STR(buf, "+PONG\r\n");
    ASSERT_EQ_INT(emq_peer_accepted(p), 2);
    close(fd);
    emq_peer_stop(p);
    emq_srv_stop(s);
}
