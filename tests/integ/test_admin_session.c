/* SPDX-License-Identifier: BSD-3-Clause */
/* test_admin_session.c: an admin handle lives on a session that recovers,
 * like the consumer's, against a real redis-server.
 *
 * A server restarted (SIGKILL, same port and data) between two calls: the
 * first call after it succeeds, on a new connection. A call made while the
 * server is down fails retriable after reconnect.max_attempts, and the
 * next one after the server is back succeeds. A server busy in a long
 * script (BUSY) is waited out, said once in the log, and the call goes
 * through after it. A topic's handle still refuses a raw command.
 */
#include "integ/admin_inspect_helpers.h"

#include <pthread.h>

/* Log lines seen, for the tests that check what a session said. */
typedef struct said {
    pthread_mutex_t mu;
    int waits;      /* "server not ready" */
    int reconnects; /* "re-established" or "reconnect" */
    char last[512];
} said;

static void on_log(void *opaque, emq_log_level level, const char *message) {
    (void)level;
    said *s = opaque;
    pthread_mutex_lock(&s->mu);
    if (strstr(message, "server not ready"))
        s->waits++;
    if (strstr(message, "admin connection"))
        s->reconnects++;
    snprintf(s->last, sizeof s->last, "%s", message);
    pthread_mutex_unlock(&s->mu);
}

static emq_admin_t *admin_logged(const emq_srv *s, said *log,
                                 const char *attempts) {
    emq_conf_t *conf = conf_for(emq_srv_url(s));
    conf_set(conf, "queue", "sess");
    conf_set(conf, "log.level", "debug");
    conf_set(conf, "reconnect.max_attempts", attempts);
    conf_set(conf, "reconnect.backoff_min_ms", "20");
    conf_set(conf, "reconnect.backoff_max_ms", "100");
    emq_conf_set_log(conf, on_log, log);
    emq_admin_t *a = NULL;
    emq_error err;
    ASSERT_OK(emq_admin_new(conf, &a, &err), &err);
    emq_conf_destroy(conf);
    return a;
}

/* The queue's stream length as describe reports it, or a failure. */
static emq_status describe_length(emq_admin_t *a, uint64_t *length,
                                  emq_error *err) {
    emq_queue_info *info = NULL;
    emq_status st = emq_admin_describe(a, &info, err);
    if (st == EMQ_OK) {
        *length = info->length;
        emq_queue_info_free(info);
    }
    return st;
}

TEST(admin_call_after_a_server_restart_succeeds) {
    emq_srv *s = emq_srv_start(NULL);
    char out[256];
    emq_srv_cmd(s, out, sizeof out, "XADD", "emq:{sess}", "*", "n", "1", NULL);
    emq_srv_cmd(s, out, sizeof out, "SAVE", NULL); /* kept over the kill */
    said log = {.mu = PTHREAD_MUTEX_INITIALIZER};
    emq_admin_t *a = admin_logged(s, &log, "10");
    emq_error err;
    uint64_t length = 0;
    ASSERT_OK(describe_length(a, &length, &err), &err);
    ASSERT_EQ_INT(length, 1);
    emq_srv_kill9(s);
    emq_srv_restart(s);
    /* The old connection is dead; the first call after the restart goes
     * out on a new one. */
    ASSERT_OK(describe_length(a, &length, &err), &err);
    ASSERT_EQ_INT(length, 1);
    pthread_mutex_lock(&log.mu);
    int reconnects = log.reconnects;
    pthread_mutex_unlock(&log.mu);
    ASSERT(reconnects >= 1);
    /* And again: a second restart, two calls after it. */
    emq_srv_kill9(s);
    emq_srv_restart(s);
    ASSERT_OK(describe_length(a, &length, &err), &err);
    ASSERT_OK(describe_length(a, &length, &err), &err);
    emq_admin_destroy(a);
    emq_srv_stop(s);
}

TEST(admin_call_while_down_fails_retriable_then_recovers) {
    emq_srv *s = emq_srv_start(NULL);
    said log = {.mu = PTHREAD_MUTEX_INITIALIZER};
    emq_admin_t *a = admin_logged(s, &log, "2");
    emq_error err;
    uint64_t length = 0;
    ASSERT_OK(describe_length(a, &length, &err), &err);
    emq_srv_kill9(s);
    emq_status st = describe_length(a, &length, &err);
    ASSERT(st != EMQ_OK);
    ASSERT(err.retriable);
    /* Still down: fails again, after its bounded attempts. */
    st = describe_length(a, &length, &err);
    ASSERT(st != EMQ_OK);
    ASSERT(err.retriable);
    emq_srv_restart(s);
    ASSERT_OK(describe_length(a, &length, &err), &err);
    emq_admin_destroy(a);
    emq_srv_stop(s);
}

/* Runs a script that keeps the server busy for about 1.5 s, then ends by
 * itself. */
static void *busy_for_a_while(void *arg) {
    const emq_srv *s = arg;
    static const char lua[] =
        "local function now() local t = redis.call('TIME') "
        "return t[1] * 1000 + math.floor(t[2] / 1000) end "
        "local t0 = now() while now() - t0 < 1500 do end return 1";
    char out[256];
    emq_srv_cmd(s, out, sizeof out, "EVAL", lua, "0", NULL);
    return NULL;
}

TEST(admin_waits_out_a_busy_server) {
    emq_srv *s = emq_srv_start(NULL);
    char out[256];
    /* BUSY after 100 ms of script (7.0+ name, then 6.2's). */
    if (emq_srv_cmd(s, out, sizeof out, "CONFIG", "SET", "busy-reply-threshold",
                    "100", NULL) != '+')
        emq_srv_cmd(s, out, sizeof out, "CONFIG", "SET", "lua-time-limit",
                    "100", NULL);
    said log = {.mu = PTHREAD_MUTEX_INITIALIZER};
    emq_admin_t *a = admin_logged(s, &log, "10");
    emq_error err;
    uint64_t length = 0;
    ASSERT_OK(describe_length(a, &length, &err), &err);
    pthread_t t;
    ASSERT(pthread_create(&t, NULL, busy_for_a_while, s) == 0);
    /* Call once the script is past the threshold: the server answers BUSY
     * to everyone else until it ends. */
    int busy = 0;
    int64_t end = now_ms() + emq_test_ms(5000);
    emq_conn_t *probe = admin_connect(s);
    while (!busy && now_ms() < end) {
        emq_reply *r = CMD(probe, "PING");
        busy = emq_reply_is_error(r, "BUSY");
        emq_reply_free(r);
        if (!busy)
            usleep(10000);
    }
    emq_conn_destroy(probe);
    ASSERT(busy);
    ASSERT_OK(describe_length(a, &length, &err), &err);
    pthread_join(t, NULL);
    pthread_mutex_lock(&log.mu);
    int waits = log.waits;
    pthread_mutex_unlock(&log.mu);
    ASSERT_EQ_INT(waits, 1);
    emq_admin_destroy(a);
    emq_srv_stop(s);
}

TEST(admin_topic_handle_refuses_a_raw_command) {
    emq_srv *s = emq_srv_start(NULL);
    emq_conf_t *conf = conf_for(emq_srv_url(s));
    conf_set(conf, "queue", "tsess");
    conf_set(conf, "partitions", "2");
    emq_admin_t *a = NULL;
    emq_error err;
    ASSERT_OK(emq_admin_new(conf, &a, &err), &err);
    emq_conf_destroy(conf);
    const char *argv[] = {"PING"};
    emq_reply *reply = NULL;
    ASSERT_EQ_INT(emq_admin_command(a, 1, argv, NULL, &reply, &err),
                  EMQ_EINVAL);
    ASSERT(strstr(err.message, "emq_admin_partition") != NULL);
    ASSERT(reply == NULL);
    emq_admin_destroy(a);
    emq_srv_stop(s);
}
