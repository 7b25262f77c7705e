/* SPDX-License-Identifier: BSD-3-Clause */
/* test_conn.c: integration tests of the connection API against real servers.
 *
 * Every test here talks to a private redis-server started by the fixture,
 * through the public API only (emq_conf_*, emq_conn_*, emq_reply_*): round
 * trips over TCP and unix sockets, binary safety, pipelining, error replies
 * as values, AUTH and ACL outcomes, SELECT, CLIENT SETNAME, a long BLOCK
 * under a short command timeout, a server killed mid-command and restarted.
 * Misbehaving peers (silence, garbage, cut replies) are in
 * test_conn_faults.c and TLS in test_conn_tls.c.
 */
#include "harness/server.h"
#include "integ/conn_helpers.h"

#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

TEST(conn_tcp_round_trip) {
    emq_srv *s = emq_srv_start(NULL);
    emq_conn_t *c = connect_url(emq_srv_url(s));
    ASSERT(emq_conn_fd(c) >= 0);
    emq_reply *r = CMD(c, "PING");
    ASSERT_REPLY_TEXT(r, EMQ_REPLY_STATUS, "PONG");
    emq_reply_free(r);
    r = CMD(c, "SET", "greeting", "hello");
    ASSERT_REPLY_TEXT(r, EMQ_REPLY_STATUS, "OK");
    emq_reply_free(r);
    r = CMD(c, "GET", "greeting");
    ASSERT_REPLY_TEXT(r, EMQ_REPLY_STRING, "hello");
    emq_reply_free(r);
    r = CMD(c, "GET", "missing");
    ASSERT_EQ_INT(emq_reply_kind(r), EMQ_REPLY_NULL);
    emq_reply_free(r);
    r = CMD(c, "INCRBY", "n", "41");
    ASSERT_EQ_INT(emq_reply_kind(r), EMQ_REPLY_INTEGER);
    ASSERT_EQ_INT(emq_reply_integer(r), 41);
    emq_reply_free(r);
    ASSERT_EQ_SIZE(emq_conn_pending(c), 0);
    ASSERT_EQ_INT(emq_conn_reconnects(c), 0);
    emq_conn_destroy(c);
    /* The server saw it: the value is there for a raw client too. */
    char out[64];
    ASSERT_EQ_INT(emq_srv_cmd(s, out, sizeof out, "GET", "greeting", NULL),
                  '$');
    ASSERT_EQ_STR(out, "hello");
    emq_srv_stop(s);
}

TEST(conn_unix_socket_round_trip) {
    emq_srv_opts o = {.transport = EMQ_SRV_UNIX};
    emq_srv *s = emq_srv_start(&o);
    emq_conn_t *c = connect_url(emq_srv_url(s));
    emq_reply *r = CMD(c, "SET", "k", "over unix");
    emq_reply_free(r);
    r = CMD(c, "GET", "k");
    ASSERT_REPLY_TEXT(r, EMQ_REPLY_STRING, "over unix");
    emq_reply_free(r);
    /* The server counts this client as a unix-socket client. */
    r = CMD(c, "CLIENT", "INFO");
    char text[1024];
    ASSERT_CONTAINS(reply_text(r, text, sizeof text), "laddr=");
    ASSERT_CONTAINS(text, emq_srv_socket(s));
    emq_reply_free(r);
    emq_conn_destroy(c);
    emq_srv_stop(s);
}

TEST(conn_binary_safe_arguments_and_values) {
    emq_srv *s = emq_srv_start(NULL);
    emq_conn_t *c = connect_url(emq_srv_url(s));
    static const char key[] = {'k', '\0', '\r', '\n', (char)0xff, 'y'};
    static const char val[] = {'\0', 'a', '\r', '\n', '\r', '\n', (char)0xff,
                               '\0', '$', '3',  '\r', '\n', '*',  (char)0x80};
    const char *set[] = {"SET", key, val};
    size_t setlen[] = {3, sizeof key, sizeof val};
    emq_error err;
    emq_reply *r = NULL;
    ASSERT_OK(emq_conn_command(c, 3, set, setlen, &r, &err), &err);
    ASSERT_REPLY_TEXT(r, EMQ_REPLY_STATUS, "OK");
    emq_reply_free(r);
    const char *get[] = {"GET", key};
    size_t getlen[] = {3, sizeof key};
    ASSERT_OK(emq_conn_command(c, 2, get, getlen, &r, &err), &err);
    ASSERT_EQ_INT(emq_reply_kind(r), EMQ_REPLY_STRING);
    size_t len = 0;
    const char *got = emq_reply_str(r, &len);
    ASSERT_EQ_MEM(got, len, val, sizeof val);
    emq_reply_free(r);
    /* The key is exactly those 6 bytes: a prefix of it is another key. */
    const char *strlen_cmd[] = {"STRLEN", key};
    size_t strlen_len[] = {6, 1};
    ASSERT_OK(emq_conn_command(c, 2, strlen_cmd, strlen_len, &r, &err), &err);
    ASSERT_EQ_INT(emq_reply_integer(r), 0);
    emq_reply_free(r);
    strlen_len[1] = sizeof key;
    ASSERT_OK(emq_conn_command(c, 2, strlen_cmd, strlen_len, &r, &err), &err);
    ASSERT_EQ_INT(emq_reply_integer(r), (long long)sizeof val);
    emq_reply_free(r);
    emq_conn_destroy(c);
    emq_srv_stop(s);
}

TEST(conn_pipeline_1000_commands_replies_in_order) {
    emq_srv *s = emq_srv_start(NULL);
    emq_conn_t *c = connect_url(emq_srv_url(s));
    emq_error err;
    enum { N = 1000 };
    for (int i = 0; i < N; i++) {
        char num[16];
        snprintf(num, sizeof num, "%d", i);
        const char *argv[] = {i % 2 ? "ECHO" : "RPUSH", i % 2 ? num : "list",
                              num};
        ASSERT_OK(emq_conn_append(c, i % 2 ? 2 : 3, argv, NULL, &err), &err);
    }
    ASSERT_EQ_SIZE(emq_conn_pending(c), N);
    for (int i = 0; i < N; i++) {
        emq_reply *r = NULL;
        ASSERT_OK(emq_conn_get_reply(c, &r, &err), &err);
        if (i % 2) {
            char num[16];
            snprintf(num, sizeof num, "%d", i);
            ASSERT_REPLY_TEXT(r, EMQ_REPLY_STRING, num);
        } else {
            ASSERT_EQ_INT(emq_reply_kind(r), EMQ_REPLY_INTEGER);
            ASSERT_EQ_INT(emq_reply_integer(r), i / 2 + 1);
        }
        emq_reply_free(r);
        ASSERT_EQ_SIZE(emq_conn_pending(c), (size_t)(N - i - 1));
    }
    /* Nothing outstanding: get_reply says so, command works again. */
    emq_reply *r = NULL;
    ASSERT_STATUS(emq_conn_get_reply(c, &r, &err), EMQ_EINVAL, &err);
    ASSERT(r == NULL);
    r = CMD(c, "LLEN", "list");
    ASSERT_EQ_INT(emq_reply_integer(r), N / 2);
    emq_reply_free(r);
    emq_conn_destroy(c);
    emq_srv_stop(s);
}

TEST(conn_command_refused_while_pipeline_replies_unread) {
    emq_srv *s = emq_srv_start(NULL);
    emq_conn_t *c = connect_url(emq_srv_url(s));
    emq_error err;
    const char *ping[] = {"PING"};
    ASSERT_OK(emq_conn_append(c, 1, ping, NULL, &err), &err);
    emq_reply *r = NULL;
    ASSERT_STATUS(emq_conn_command(c, 1, ping, NULL, &r, &err), EMQ_EINVAL,
                  &err); /* a misuse, not a closed connection */
    ASSERT(r == NULL);
    ASSERT_OK(emq_conn_get_reply(c, &r, &err), &err);
    ASSERT_REPLY_TEXT(r, EMQ_REPLY_STATUS, "PONG");
    emq_reply_free(r);
    r = CMD(c, "PING");
    emq_reply_free(r);
    emq_conn_destroy(c);
    emq_srv_stop(s);
}

TEST(conn_error_reply_is_a_value_and_connection_survives) {
    emq_srv *s = emq_srv_start(NULL);
    emq_conn_t *c = connect_url(emq_srv_url(s));
    emq_reply *r = CMD(c, "SET", "plain", "string");
    emq_reply_free(r);
    emq_error err;
    memset(&err, 0, sizeof err);
    ASSERT_OK(cmd_status(c, &r, &err, "XGROUP", "CREATE", "plain", "g", "$",
                         (char *)NULL),
              &err);
    ASSERT_EQ_INT(err.code, EMQ_OK);
    ASSERT_EQ_INT(emq_reply_kind(r), EMQ_REPLY_ERROR);
    ASSERT(emq_reply_is_error(r, "WRONGTYPE"));
    ASSERT(!emq_reply_is_error(r, "WRONG"));
    char text[256];
    ASSERT_CONTAINS(reply_text(r, text, sizeof text), "WRONGTYPE");
    emq_reply_free(r);
    ASSERT_EQ_INT(emq_conn_is_broken(c), 0);
    r = CMD(c, "GET", "plain");
    ASSERT_REPLY_TEXT(r, EMQ_REPLY_STRING, "string");
    emq_reply_free(r);
    emq_conn_destroy(c);
    emq_srv_stop(s);
}

TEST(conn_pipeline_error_reply_in_the_middle_keeps_order) {
    emq_srv *s = emq_srv_start(NULL);
    emq_conn_t *c = connect_url(emq_srv_url(s));
    emq_error err;
    const char *set[] = {"SET", "str", "x"};
    const char *bad[] = {"XGROUP", "CREATE", "str", "g", "$"};
    const char *incr[] = {"INCR", "n"};
    const char *unknown[] = {"NO-SUCH-COMMAND"};
    ASSERT_OK(emq_conn_append(c, 3, set, NULL, &err), &err);
    ASSERT_OK(emq_conn_append(c, 5, bad, NULL, &err), &err);
    ASSERT_OK(emq_conn_append(c, 2, incr, NULL, &err), &err);
    ASSERT_OK(emq_conn_append(c, 1, unknown, NULL, &err), &err);
    ASSERT_OK(emq_conn_append(c, 2, incr, NULL, &err), &err);
    emq_reply *r[5];
    for (int i = 0; i < 5; i++)
        ASSERT_OK(emq_conn_get_reply(c, &r[i], &err), &err);
    ASSERT_REPLY_TEXT(r[0], EMQ_REPLY_STATUS, "OK");
    ASSERT(emq_reply_is_error(r[1], "WRONGTYPE"));
    ASSERT_EQ_INT(emq_reply_integer(r[2]), 1);
    ASSERT(emq_reply_is_error(r[3], "ERR"));
    ASSERT_EQ_INT(emq_reply_integer(r[4]), 2);
    for (int i = 0; i < 5; i++)
        emq_reply_free(r[i]);
    ASSERT_EQ_INT(emq_conn_is_broken(c), 0);
    emq_conn_destroy(c);
    emq_srv_stop(s);
}

/* Returns the number of calls of cmd ("select", "client|setname", "auth")
 * in the server's INFO commandstats, 0 when never called. On a server
 * without subcommand stats (6.2) "client|setname" counts every CLIENT
 * subcommand; the connection sends no other, so the count is the same. */
static long calls_of(const emq_srv *s, const char *cmd) {
    return (long)emq_srv_calls(s, cmd, NULL);
}

TEST(conn_handshake_sends_only_what_is_configured) {
    emq_srv *s = emq_srv_start(NULL);
    long pings = calls_of(s, "ping"); /* the fixture's readiness probes */
    emq_conn_t *c = connect_url(emq_srv_url(s));
    emq_reply *r = CMD(c, "PING");
    emq_reply_free(r);
    emq_conn_destroy(c);
    /* No password, db 0, no name: no AUTH, SELECT or SETNAME was sent. */
    ASSERT_EQ_INT(calls_of(s, "auth"), 0);
    ASSERT_EQ_INT(calls_of(s, "select"), 0);
    ASSERT_EQ_INT(calls_of(s, "client|setname"), 0);
    ASSERT_EQ_INT(calls_of(s, "ping"), pings + 1); /* ours only */

    emq_conf_t *conf = conf_for(emq_srv_url(s));
    conf_set(conf, P_DB, "2");
    conf_set(conf, P_CLIENT_NAME, "named");
    c = connect_ok(conf);
    emq_conf_destroy(conf);
    emq_conn_destroy(c);
    ASSERT_EQ_INT(calls_of(s, "select"), 1);
    ASSERT_EQ_INT(calls_of(s, "client|setname"), 1);
    emq_srv_stop(s);
}

/* ---- AUTH and ACL ----------------------------------------------------- */

TEST(conn_auth_requirepass_success) {
    emq_srv_opts o = {.requirepass = "swordfish"};
    emq_srv *s = emq_srv_start(&o);
    emq_conf_t *conf = conf_for(emq_srv_url(s));
    conf_set(conf, P_PASSWORD, "swordfish");
    emq_conn_t *c = connect_ok(conf);
    emq_conf_destroy(conf);
    emq_reply *r = CMD(c, "ACL", "WHOAMI");
    ASSERT_REPLY_TEXT(r, EMQ_REPLY_STRING, "default");
    emq_reply_free(r);
    r = CMD(c, "PING");
    ASSERT_REPLY_TEXT(r, EMQ_REPLY_STATUS, "PONG");
    emq_reply_free(r);
    emq_conn_destroy(c);
    emq_srv_stop(s);
}

TEST(conn_auth_acl_user_success) {
    emq_srv_opts o = {.extra_config = "user alice on >pw ~* +@all"};
    emq_srv *s = emq_srv_start(&o);
    emq_conf_t *conf = conf_for(emq_srv_url(s));
    conf_set(conf, P_USER, "alice");
    conf_set(conf, P_PASSWORD, "pw");
    emq_conn_t *c = connect_ok(conf);
    emq_conf_destroy(conf);
    emq_reply *r = CMD(c, "ACL", "WHOAMI");
    ASSERT_REPLY_TEXT(r, EMQ_REPLY_STRING, "alice");
    emq_reply_free(r);
    emq_conn_destroy(c);
    emq_srv_stop(s);
}

TEST(conn_noauth_first_command_gets_error_reply) {
    emq_srv_opts o = {.requirepass = "swordfish"};
    emq_srv *s = emq_srv_start(&o);
    emq_conn_t *c = connect_url(emq_srv_url(s));
    emq_reply *r = CMD(c, "GET", "k");
    ASSERT_EQ_INT(emq_reply_kind(r), EMQ_REPLY_ERROR);
    ASSERT(emq_reply_is_error(r, "NOAUTH"));
    emq_reply_free(r);
    ASSERT_EQ_INT(emq_conn_is_broken(c), 0);
    emq_conn_destroy(c);
    emq_srv_stop(s);
}

TEST(conn_wrongpass_is_eauth_and_never_echoes_password) {
    emq_srv_opts o = {.requirepass = "right-horse",
                      .extra_config = "user alice on >pw ~* +@all"};
    emq_srv *s = emq_srv_start(&o);
    emq_conf_t *conf = conf_for(emq_srv_url(s));
    emq_error err;
    conf_set(conf, P_PASSWORD, "Tr0ub4dor-wrong");
    connect_fails(conf, EMQ_EAUTH, &err);
    ASSERT_CONTAINS(err.message, "WRONGPASS");
    ASSERT_NOT_CONTAINS(err.message, "Tr0ub4dor");
    ASSERT_NOT_CONTAINS(err.message, "right-horse");
    ASSERT_EQ_INT(err.retriable, 0);
    /* An unknown user and a wrong password for a real user read alike. */
    conf_set(conf, P_USER, "mallory");
    conf_set(conf, P_PASSWORD, "pw");
    connect_fails(conf, EMQ_EAUTH, &err);
    ASSERT_CONTAINS(err.message, "WRONGPASS");
    conf_set(conf, P_USER, "alice");
    conf_set(conf, P_PASSWORD, "pw-but-wrong");
    connect_fails(conf, EMQ_EAUTH, &err);
    ASSERT_NOT_CONTAINS(err.message, "pw-but-wrong");
    emq_conf_destroy(conf);
    emq_srv_stop(s);
}

TEST(conn_wrong_password_in_url_is_never_echoed) {
    emq_srv_opts o = {.extra_config = "user alice on >pw ~* +@all"};
    emq_srv *s = emq_srv_start(&o);
    char url[128];
    snprintf(url, sizeof url, "redis://alice:Zebra-9-secret@127.0.0.1:%d",
             emq_srv_port(s));
    emq_conf_t *conf = conf_for(url);
    emq_error err;
    connect_fails(conf, EMQ_EAUTH, &err);
    ASSERT_NOT_CONTAINS(err.message, "Zebra-9-secret");
    ASSERT_NOT_CONTAINS(err.message, "Zebra");
    emq_conf_destroy(conf);
    /* The same URL with the right password works. */
    snprintf(url, sizeof url, "redis://alice:pw@127.0.0.1:%d", emq_srv_port(s));
    conf = conf_for(url);
    emq_conn_t *c = connect_ok(conf);
    emq_conf_destroy(conf);
    emq_reply *r = CMD(c, "ACL", "WHOAMI");
    ASSERT_REPLY_TEXT(r, EMQ_REPLY_STRING, "alice");
    emq_reply_free(r);
    emq_conn_destroy(c);
    emq_srv_stop(s);
}

TEST(conn_resp3_hello_authenticates_and_maps_come_back) {
    emq_srv_opts o = {.extra_config = "user alice on >pw ~* +@all"};
    emq_srv *s = emq_srv_start(&o);
    emq_conf_t *conf = conf_for(emq_srv_url(s));
    conf_set(conf, "protocol", "3");
    conf_set(conf, P_USER, "alice");
    conf_set(conf, P_PASSWORD, "pw");
    conf_set(conf, P_CLIENT_NAME, "resp3-client");
    emq_conn_t *c = connect_ok(conf);
    emq_conf_destroy(conf);
    emq_reply *r = CMD(c, "HSET", "h", "f", "v");
    emq_reply_free(r);
    r = CMD(c, "HGETALL", "h");
    ASSERT_EQ_INT(emq_reply_kind(r), EMQ_REPLY_MAP);
    ASSERT_EQ_SIZE(emq_reply_len(r), 2);
    ASSERT_REPLY_TEXT(emq_reply_at(r, 0), EMQ_REPLY_STRING, "f");
    ASSERT_REPLY_TEXT(emq_reply_at(r, 1), EMQ_REPLY_STRING, "v");
    emq_reply_free(r);
    r = CMD(c, "ACL", "WHOAMI");
    ASSERT_REPLY_TEXT(r, EMQ_REPLY_STRING, "alice");
    emq_reply_free(r);
    r = CMD(c, "CLIENT", "GETNAME");
    ASSERT_REPLY_TEXT(r, EMQ_REPLY_STRING, "resp3-client");
    emq_reply_free(r);
    emq_conn_destroy(c);
    emq_srv_stop(s);
}

TEST(conn_password_for_server_without_password_is_eauth) {
    emq_srv *s = emq_srv_start(NULL);
    emq_conf_t *conf = conf_for(emq_srv_url(s));
    conf_set(conf, P_PASSWORD, "unneeded-secret");
    emq_error err;
    connect_fails(conf, EMQ_EAUTH, &err);
    /* The message says why: the server has no password configured. */
    ASSERT_CONTAINS_CI(err.message, "password configured");
    ASSERT_NOT_CONTAINS(err.message, "unneeded-secret");
    emq_conf_destroy(conf);
    emq_srv_stop(s);
}

TEST(conn_stream_only_acl_user_with_client_name_connects) {
    emq_srv_opts o = {.extra_config = "user worker on >pw ~* +@stream"};
    emq_srv *s = emq_srv_start(&o);
    emq_conf_t *conf = conf_for(emq_srv_url(s));
    conf_set(conf, P_USER, "worker");
    conf_set(conf, P_PASSWORD, "pw");
    conf_set(conf, P_CLIENT_NAME, "restricted-worker");
    emq_conn_t *c = connect_ok(conf);
    emq_conf_destroy(conf);
    emq_reply *r = CMD(c, "XADD", "jobs", "*", "f", "v");
    ASSERT_EQ_INT(emq_reply_kind(r), EMQ_REPLY_STRING);
    emq_reply_free(r);
    r = CMD(c, "XLEN", "jobs");
    ASSERT_EQ_INT(emq_reply_integer(r), 1);
    emq_reply_free(r);
    /* PING is refused to this user: as an error reply, not a failure. */
    r = CMD(c, "PING");
    ASSERT(emq_reply_is_error(r, "NOPERM"));
    emq_reply_free(r);
    ASSERT_EQ_INT(emq_conn_is_broken(c), 0);
    emq_conn_destroy(c);
    emq_srv_stop(s);
}

TEST(conn_select_out_of_range_names_the_db) {
    emq_srv *s = emq_srv_start(NULL);
    emq_conf_t *conf = conf_for(emq_srv_url(s));
    conf_set(conf, P_DB, "99");
    emq_conn_t *conn = NULL;
    emq_error err;
    memset(&err, 0, sizeof err);
    emq_status st = emq_conn_new(conf, &conn, &err);
    if (st == EMQ_OK)
        emq_conn_destroy(conn);
    ASSERT(st != EMQ_OK);
    ASSERT(conn == NULL);
    /* A database the server lacks is a configuration error, not transient. */
    ASSERT_STATUS(st, EMQ_EINVAL, &err);
    ASSERT_EQ_INT(err.retriable, 0);
    ASSERT_CONTAINS(err.message, "99");
    ASSERT_CONTAINS_CI(err.message, "out of range");
    ASSERT_EQ_STR(err.reply_code, "ERR"); /* the server's own code, kept */
    emq_conf_destroy(conf);
    emq_srv_stop(s);
}

TEST(conn_select_db_in_range) {
    emq_srv *s = emq_srv_start(NULL);
    emq_conf_t *conf = conf_for(emq_srv_url(s));
    conf_set(conf, P_DB, "3");
    emq_conn_t *c = connect_ok(conf);
    emq_conf_destroy(conf);
    emq_reply *r = CMD(c, "SET", "in-db-3", "x");
    emq_reply_free(r);
    emq_conn_destroy(c);
    char out[512];
    ASSERT_EQ_INT(emq_srv_cmd(s, out, sizeof out, "INFO", "keyspace", NULL),
                  '$');
    ASSERT_CONTAINS(out, "db3:keys=1");
    emq_srv_stop(s);
}

TEST(conn_client_setname_visible_in_client_list) {
    emq_srv *s = emq_srv_start(NULL);
    emq_conf_t *conf = conf_for(emq_srv_url(s));
    conf_set(conf, P_CLIENT_NAME, "echomq-fixture-7");
    emq_conn_t *c = connect_ok(conf);
    emq_conf_destroy(conf);
    char out[4096];
    ASSERT_EQ_INT(emq_srv_cmd(s, out, sizeof out, "CLIENT", "LIST", NULL), '$');
    ASSERT_CONTAINS(out, "name=echomq-fixture-7 ");
    emq_reply *r = CMD(c, "CLIENT", "GETNAME");
    ASSERT_REPLY_TEXT(r, EMQ_REPLY_STRING, "echomq-fixture-7");
    emq_reply_free(r);
    emq_conn_destroy(c);
    emq_srv_stop(s);
}

/* ---- transport failures against a real server ------------------------ */

TEST(conn_refused_port_is_eio_naming_host_and_port) {
    int port = emq_free_port();
    char url[64], where[32];
    snprintf(url, sizeof url, "redis://127.0.0.1:%d", port);
    snprintf(where, sizeof where, "127.0.0.1:%d", port);
    emq_conf_t *conf = conf_for(url);
    emq_error err;
    int64_t t0 = now_ms();
    connect_fails(conf, EMQ_EIO, &err);
    /* At once; not after connect_timeout_ms (emq_test_ms(2000)). */
    ASSERT(now_ms() - t0 < emq_test_ms(1000));
    ASSERT_CONTAINS(err.message, where);
    ASSERT_EQ_INT(err.retriable, 1);
    emq_conf_destroy(conf);
}

typedef struct delayed_action {
    emq_srv *srv;
    int delay_ms;
    int restart; /* 0: kill -9; 1: restart */
} delayed_action;

static void *run_delayed(void *arg) {
    delayed_action *a = arg;
    usleep((useconds_t)a->delay_ms * 1000);
    if (a->restart)
        emq_srv_restart(a->srv);
    else
        emq_srv_kill9(a->srv);
    return NULL;
}

TEST(conn_server_killed_during_blocking_read_is_eio) {
    emq_srv *s = emq_srv_start(NULL);
    emq_conn_t *c = connect_url(emq_srv_url(s));
    delayed_action kill9 = {s, 300, 0};
    pthread_t t;
    ASSERT_EQ_INT(pthread_create(&t, NULL, run_delayed, &kill9), 0);
    emq_reply *r = NULL;
    emq_error err;
    memset(&err, 0, sizeof err);
    int64_t t0 = now_ms();
    emq_status st = cmd_status(c, &r, &err, "XREAD", "BLOCK", "5000", "STREAMS",
                               "nothing", "$", (char *)NULL);
    int64_t took = now_ms() - t0;
    pthread_join(t, NULL);
    ASSERT_STATUS(st, EMQ_EIO, &err);
    ASSERT(r == NULL);
    ASSERT(took >= 250 && took < emq_test_ms(3000));
    ASSERT_EQ_INT(err.retriable, 1);
    ASSERT_EQ_INT(emq_conn_is_broken(c), 1);
    ASSERT_EQ_INT(emq_conn_fd(c), -1);
    /* Sticky: the next call fails the same way without touching a socket. */
    emq_error again;
    st = cmd_status(c, &r, &again, "PING", (char *)NULL);
    ASSERT(st != EMQ_OK);
    ASSERT(r == NULL);
    emq_conn_destroy(c);
    emq_srv_stop(s);
}

TEST(conn_reconnect_after_restart_on_same_port) {
    emq_srv_opts o = {.appendonly = 1};
    emq_srv *s = emq_srv_start(&o);
    emq_conf_t *conf = conf_for(emq_srv_url(s));
    /* Attempts for 10 s and more (backoff 20..100 ms): a restart slowed
     * by a loaded machine must not outlast them (30, about 2.5 s, once
     * could). */
    conf_set(conf, P_RECONNECT_ATTEMPTS, "200");
    conf_set(conf, P_RECONNECT_BASE, "20");
    conf_set(conf, P_RECONNECT_MAX, "100");
    emq_conn_t *c = connect_ok(conf);
    emq_conf_destroy(conf);
    emq_reply *r = CMD(c, "SET", "survives", "restart");
    emq_reply_free(r);
    emq_srv_kill9(s);
    emq_error err;
    ASSERT(cmd_status(c, &r, &err, "PING", (char *)NULL) != EMQ_OK);
    ASSERT_EQ_INT(emq_conn_is_broken(c), 1);
    /* Restart while reconnect is already retrying: it must back off and
     * keep trying until the server is back. */
    delayed_action restart = {s, 400, 1};
    pthread_t t;
    ASSERT_EQ_INT(pthread_create(&t, NULL, run_delayed, &restart), 0);
    int64_t t0 = now_ms();
    emq_status st = emq_conn_reconnect(c, &err);
    int64_t took = now_ms() - t0;
    pthread_join(t, NULL);
    ASSERT_OK(st, &err);
    ASSERT(took >= 300);
    ASSERT(took < emq_test_ms(6000));
    ASSERT_EQ_INT(emq_conn_reconnects(c), 1);
    ASSERT_EQ_INT(emq_conn_is_broken(c), 0);
    ASSERT(emq_conn_fd(c) >= 0);
    r = CMD(c, "GET", "survives");
    ASSERT_REPLY_TEXT(r, EMQ_REPLY_STRING, "restart");
    emq_reply_free(r);
    emq_conn_destroy(c);
    emq_srv_stop(s);
}

TEST(conn_reconnect_gives_up_after_max_attempts) {
    emq_srv *s = emq_srv_start(NULL);
    emq_conf_t *conf = conf_for(emq_srv_url(s));
    conf_set(conf, P_RECONNECT_ATTEMPTS, "3");
    conf_set(conf, P_RECONNECT_BASE, "10");
    conf_set(conf, P_RECONNECT_MAX, "50");
    emq_conn_t *c = connect_ok(conf);
    emq_conf_destroy(conf);
    emq_srv_kill9(s);
    emq_error err;
    int64_t t0 = now_ms();
    ASSERT_STATUS(emq_conn_reconnect(c, &err), EMQ_EIO, &err);
    ASSERT(now_ms() - t0 < emq_test_ms(2000));
    ASSERT_EQ_INT(emq_conn_reconnects(c), 0);
    ASSERT_EQ_INT(emq_conn_is_broken(c), 1);
    emq_conn_destroy(c);
    emq_srv_stop(s);
}

/* A read blocking three times the command timeout gets its reply: its
 * deadline is the block plus command_timeout_ms. Both scale with the run,
 * so that the reply may come that late after the block (a stalled
 * process) and a deadline that ignored the block still ends the read. */
TEST(conn_long_block_outlives_command_timeout) {
    emq_srv *s = emq_srv_start(NULL);
    emq_conf_t *conf = conf_for(emq_srv_url(s));
    char timeout[24], block[24];
    snprintf(timeout, sizeof timeout, "%d", emq_test_ms(500));
    snprintf(block, sizeof block, "%d", emq_test_ms(1500));
    conf_set(conf, P_COMMAND_TIMEOUT, timeout);
    emq_conn_t *c = connect_ok(conf);
    emq_conf_destroy(conf);
    int64_t t0 = now_ms();
    emq_reply *r = CMD(c, "XREAD", "BLOCK", block, "STREAMS", "quiet", "$");
    int64_t took = now_ms() - t0;
    ASSERT_EQ_INT(emq_reply_kind(r), EMQ_REPLY_NULL);
    emq_reply_free(r);
    ASSERT(took >= emq_test_ms(1500) - 100);
    ASSERT(took < emq_test_ms(4000));
    ASSERT_EQ_INT(emq_conn_is_broken(c), 0);
    r = CMD(c, "PING");
    ASSERT_REPLY_TEXT(r, EMQ_REPLY_STATUS, "PONG");
    emq_reply_free(r);
    emq_conn_destroy(c);
    emq_srv_stop(s);
}
