/* SPDX-License-Identifier: BSD-3-Clause */
/* test_conn_faults.c: the connection API against misbehaving peers.
 *
 * A fake peer (harness/fakepeer.c) plays each fault on loopback: a listener
 * whose accept queue is full (the TCP connect itself hangs), a server that
 * accepts and never answers, one that closes at once, garbage bytes, a bulk
 * length beyond any limit, and replies cut off with a close or a stall. The
 * contract checked here: each fault maps to its own status (EMQ_ETIMEDOUT,
 * EMQ_EIO, EMQ_EPROTO) within a bounded time, the message says what
 * happened, and the connection stays broken (sticky) afterwards.
 */
#include "conn/conn.h" /* emq__conn_send */
#include "harness/fakepeer.h"
#include "harness/server.h"
#include "integ/conn_helpers.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <sys/socket.h>
#include <unistd.h>

/* Checks a broken connection: flagged, no fd, and the next command fails
 * with the same status at once, without touching the network: still no
 * fd and no reconnect afterwards (the proof), and well within the
 * shortest timeout it could have waited (400 ms here; a loaded run is
 * slower, so the bound scales). */
static void assert_sticky(emq_conn_t *c, emq_status want) {
    ASSERT_EQ_INT(emq_conn_is_broken(c), 1);
    ASSERT_EQ_INT(emq_conn_fd(c), -1);
    uint64_t reconnects = emq_conn_reconnects(c);
    emq_reply *r = NULL;
    emq_error err;
    memset(&err, 0, sizeof err);
    int64_t t0 = now_ms();
    ASSERT_STATUS(cmd_status(c, &r, &err, "PING", (char *)NULL), want, &err);
    int64_t took = now_ms() - t0;
    ASSERT(r == NULL);
    ASSERT_EQ_INT(emq_conn_fd(c), -1);
    ASSERT_EQ_INT(emq_conn_reconnects(c), reconnects);
    if (took >= emq_test_ms(150))
        FAIL("a command on a broken connection took %lld ms", (long long)took);
}

/* Runs one command on a conn to url that must fail with want; returns the
 * error for message checks and the elapsed time in *took. The conn is
 * checked for stickiness and destroyed. */
static emq_error command_fails(const char *url, const char *timeout_ms,
                               const char *command, emq_status want,
                               int64_t *took) {
    emq_conf_t *conf = conf_for(url);
    if (timeout_ms)
        conf_set(conf, P_COMMAND_TIMEOUT, timeout_ms);
    emq_conn_t *c = connect_ok(conf);
    emq_conf_destroy(conf);
    emq_reply *r = NULL;
    emq_error err;
    memset(&err, 0, sizeof err);
    int64_t t0 = now_ms();
    emq_status st = cmd_status(c, &r, &err, command, "key", (char *)NULL);
    *took = now_ms() - t0;
    if (r)
        emq_reply_free(r);
    ASSERT_STATUS(st, want, &err);
    ASSERT(r == NULL);
    ASSERT_EQ_INT(err.code, want);
    ASSERT(err.message[0] != '\0');
    assert_sticky(c, want);
    emq_conn_destroy(c);
    return err;
}

/* A loopback listener whose accept queue is full, so a new TCP connect
 * hangs in SYN-SENT (Linux drops the SYN). fds[] receives the sockets to
 * close afterwards (listener first); returns their count. */
static int black_hole(int *port, int fds[], int max) {
    int l = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t alen = sizeof a;
    ASSERT(l >= 0);
    ASSERT(bind(l, (struct sockaddr *)&a, sizeof a) == 0);
    ASSERT(listen(l, 0) == 0);
    ASSERT(getsockname(l, (struct sockaddr *)&a, &alen) == 0);
    *port = ntohs(a.sin_port);
    int n = 0;
    fds[n++] = l;
    while (n < max) {
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        ASSERT(fd >= 0);
        fcntl(fd, F_SETFL, O_NONBLOCK);
        fds[n++] = fd;
        if (connect(fd, (struct sockaddr *)&a, sizeof a) == 0)
            continue;
        ASSERT_EQ_INT(errno, EINPROGRESS);
        struct pollfd p = {fd, POLLOUT, 0};
        if (poll(&p, 1, 100) == 0)
            return n; /* this one hangs: the queue is full */
    }
    FAIL("could not fill the accept queue with %d connects", max);
}

TEST(conn_connect_timeout_when_tcp_connect_hangs) {
    int port, fds[16];
    int n = black_hole(&port, fds, 16);
    char url[64];
    snprintf(url, sizeof url, "redis://127.0.0.1:%d", port);
    emq_conf_t *conf = conf_for(url);
    conf_set(conf, P_CONNECT_TIMEOUT, "300");
    emq_error err;
    int64_t t0 = now_ms();
    connect_fails(conf, EMQ_ETIMEDOUT, &err);
    int64_t took = now_ms() - t0;
    ASSERT(took >= 250);
    ASSERT(took < emq_test_ms(2000));
    ASSERT_EQ_INT(err.retriable, 1);
    char where[32];
    snprintf(where, sizeof where, "127.0.0.1:%d", port);
    ASSERT_CONTAINS(err.message, where);
    emq_conf_destroy(conf);
    for (int i = 0; i < n; i++)
        close(fds[i]);
}

TEST(conn_silent_server_times_out_handshake) {
    /* The client name forces a command during connect; nothing answers. */
    emq_peer_opts o = {.mode = EMQ_PEER_SILENT};
    emq_peer *p = emq_peer_start(&o);
    emq_conf_t *conf = conf_for(emq_peer_url(p));
    conf_set(conf, P_CLIENT_NAME, "never-answered");
    conf_set(conf, P_CONNECT_TIMEOUT, "300");
    conf_set(conf, P_COMMAND_TIMEOUT, "300");
    emq_error err;
    int64_t t0 = now_ms();
    connect_fails(conf, EMQ_ETIMEDOUT, &err);
    int64_t took = now_ms() - t0;
    ASSERT(took >= 250);
    ASSERT(took < emq_test_ms(2000));
    ASSERT_EQ_INT(emq_peer_accepted(p), 1);
    emq_conf_destroy(conf);
    emq_peer_stop(p);
}

TEST(conn_silent_server_command_times_out_and_stays_broken) {
    /* Handshake commands get +OK; the GET is never answered. */
    emq_peer_opts o = {.mode = EMQ_PEER_SILENT, .trigger = "GET"};
    emq_peer *p = emq_peer_start(&o);
    int64_t took;
    emq_error err =
        command_fails(emq_peer_url(p), "400", "GET", EMQ_ETIMEDOUT, &took);
    ASSERT(took >= 350);
    ASSERT(took < emq_test_ms(2000));
    ASSERT_EQ_INT(err.retriable, 1);
    ASSERT_CONTAINS(err.message, "400 ms"); /* names the timeout it waited */
    char last[32];
    emq_peer_last_command(p, last, sizeof last);
    ASSERT_EQ_STR(last, "GET");
    emq_peer_stop(p);
}

TEST(conn_peer_closing_at_once_is_eio) {
    emq_peer_opts o = {.mode = EMQ_PEER_CLOSE};
    emq_peer *p = emq_peer_start(&o);
    emq_conf_t *conf = conf_for(emq_peer_url(p));
    emq_conn_t *c = NULL;
    emq_error err;
    memset(&err, 0, sizeof err);
    emq_status st = emq_conn_new(conf, &c, &err);
    emq_conf_destroy(conf);
    if (st == EMQ_OK) {
        /* Connect raced the close; the first command must see it. */
        emq_reply *r = NULL;
        st = cmd_status(c, &r, &err, "PING", (char *)NULL);
        ASSERT(r == NULL);
        ASSERT_STATUS(st, EMQ_EIO, &err);
        assert_sticky(c, EMQ_EIO);
        emq_conn_destroy(c);
    } else {
        ASSERT_STATUS(st, EMQ_EIO, &err);
        ASSERT(c == NULL);
    }
    ASSERT(err.message[0] != '\0');
    ASSERT_EQ_INT(emq_peer_accepted(p), 1);
    emq_peer_stop(p);
}

TEST(conn_garbage_reply_is_eproto) {
    emq_peer_opts o = {
        .mode = EMQ_PEER_REPLY, .reply = "?what\r\n", .trigger = "GET"};
    emq_peer *p = emq_peer_start(&o);
    int64_t took;
    emq_error err =
        command_fails(emq_peer_url(p), NULL, "GET", EMQ_EPROTO, &took);
    ASSERT(took < emq_test_ms(1000));
    ASSERT_EQ_INT(err.retriable, 0);
    emq_peer_stop(p);
}

TEST(conn_oversized_bulk_length_is_eproto_naming_the_limit) {
    emq_peer_opts o = {
        .mode = EMQ_PEER_REPLY, .reply = "$999999999999\r\n", .trigger = "GET"};
    emq_peer *p = emq_peer_start(&o);
    int64_t took;
    emq_error err =
        command_fails(emq_peer_url(p), NULL, "GET", EMQ_EPROTO, &took);
    ASSERT(took < emq_test_ms(1000));
    ASSERT_CONTAINS(err.message, "999999999999");
    ASSERT_CONTAINS_CI(err.message, "bulk");
    emq_peer_stop(p);
}

TEST(conn_reply_cut_then_closed_is_eio) {
    emq_peer_opts o = {
        .mode = EMQ_PEER_REPLY_CLOSE, .reply = "$10\r\nabc", .trigger = "GET"};
    emq_peer *p = emq_peer_start(&o);
    int64_t took;
    emq_error err = command_fails(emq_peer_url(p), NULL, "GET", EMQ_EIO, &took);
    ASSERT(took < emq_test_ms(1000));
    ASSERT_EQ_INT(err.retriable, 1);
    /* The message says the peer closed (not just "error"). */
    ASSERT(contains_ci(err.message, "closed") ||
           contains_ci(err.message, "reset") ||
           contains_ci(err.message, "eof"));
    emq_peer_stop(p);
}

TEST(conn_reply_cut_then_stalled_times_out) {
    emq_peer_opts o = {.mode = EMQ_PEER_REPLY_STALL,
                       .reply = "*2\r\n$3\r\nabc\r\n$5\r\nde",
                       .trigger = "GET"};
    emq_peer *p = emq_peer_start(&o);
    int64_t took;
    emq_error err =
        command_fails(emq_peer_url(p), "400", "GET", EMQ_ETIMEDOUT, &took);
    ASSERT(took >= 350);
    ASSERT(took < emq_test_ms(2000));
    ASSERT_CONTAINS(err.message, "400 ms");
    emq_peer_stop(p);
}

static void *drop_later(void *arg) {
    usleep(300 * 1000);
    emq_peer_drop(arg);
    return NULL;
}

TEST(conn_proxy_drop_mid_command_is_eio_and_reconnect_recovers) {
    emq_srv *s = emq_srv_start(NULL);
    emq_peer_opts o = {.mode = EMQ_PEER_PROXY,
                       .upstream_port = emq_srv_port(s)};
    emq_peer *p = emq_peer_start(&o);
    emq_conf_t *conf = conf_for(emq_peer_url(p));
    conf_set(conf, P_RECONNECT_ATTEMPTS, "3");
    emq_conn_t *c = connect_ok(conf);
    emq_conf_destroy(conf);
    emq_reply *r = CMD(c, "PING");
    emq_reply_free(r);
    /* The proxy cuts the connection while a blocking read waits. */
    pthread_t t;
    ASSERT_EQ_INT(pthread_create(&t, NULL, drop_later, p), 0);
    emq_error err;
    memset(&err, 0, sizeof err);
    int64_t t0 = now_ms();
    emq_status st = cmd_status(c, &r, &err, "XREAD", "BLOCK", "5000", "STREAMS",
                               "s", "$", (char *)NULL);
    int64_t took = now_ms() - t0;
    pthread_join(t, NULL);
    ASSERT_STATUS(st, EMQ_EIO, &err);
    ASSERT(r == NULL);
    ASSERT(took >= 250 && took < emq_test_ms(3000));
    assert_sticky(c, EMQ_EIO);
    ASSERT_OK(emq_conn_reconnect(c, &err), &err);
    ASSERT_EQ_INT(emq_conn_reconnects(c), 1);
    ASSERT_EQ_SIZE(emq_conn_pending(c), 0);
    r = CMD(c, "PING");
    ASSERT_REPLY_TEXT(r, EMQ_REPLY_STATUS, "PONG");
    emq_reply_free(r);
    ASSERT_EQ_INT(emq_peer_accepted(p), 2);
    emq_conn_destroy(c);
    emq_peer_stop(p);
    emq_srv_stop(s);
}

/* A blocking command's block is counted from when it was sent: a reply
 * read only after the block was over (a read sent by one thread and
 * waited on by another, as the consumer's lent reads are) waits
 * command_timeout_ms more, not the block again. Before, the wait counted
 * the whole block a second time from the moment it began (3500 ms here
 * instead of 500): a stalled server was noticed a block late. */
TEST(conn_blocking_reply_read_after_its_block_waits_only_the_timeout) {
    emq_peer_opts o = {.mode = EMQ_PEER_SILENT, .trigger = "BLPOP"};
    emq_peer *p = emq_peer_start(&o);
    emq_conf_t *conf = conf_for(emq_peer_url(p));
    conf_set(conf, "command_timeout_ms", "500");
    emq_conn_t *c = NULL;
    emq_error err;
    ASSERT_OK(emq_conn_new(conf, &c, &err), &err);
    const char *argv[] = {"BLPOP", "k", "3"};
    ASSERT_OK(emq_conn_append(c, 3, argv, NULL, &err), &err);
    ASSERT_OK(emq__conn_send(c, &err), &err);
    usleep(3200 * 1000); /* past the block: its reply is due now */
    int64_t t0 = now_ms();
    emq_reply *r = NULL;
    ASSERT_EQ_INT(emq_conn_get_reply(c, &r, &err), EMQ_ETIMEDOUT);
    int64_t took = now_ms() - t0;
    printf("    the reply was given up %lld ms after the wait began\n",
           (long long)took);
    ASSERT(took >= 400);
    ASSERT(took < emq_test_ms(2500)); /* 3500 ms before */
    emq_conn_destroy(c);
    emq_conf_destroy(conf);
    emq_peer_stop(p);
}
