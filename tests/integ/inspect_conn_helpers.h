/* SPDX-License-Identifier: BSD-3-Clause */
/* inspect_conn_helpers.h: helpers for the recovery, poison and fault tests of
 * the consumer (test_consumer_recover.c, test_consumer_poison.c,
 * test_consumer_faults.c).
 *
 * An "admin" connection is a library connection to the fixture server with
 * a long command timeout, used for setup (scripts that build long pending
 * lists in one call) and for structured inspection (XPENDING, XRANGE,
 * INFO commandstats). Every reply is freed here, so the runner's leak check
 * stays exact. A log capture collects the consumer's log lines, and a few
 * wrappers start a recording consumer on a thread and stop it again.
 */
#ifndef EMQ_TEST_INSPECT_CONN_HELPERS_H
#define EMQ_TEST_INSPECT_CONN_HELPERS_H

#include "integ/consumer_helpers.h"

#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>

/* Waits (bounded, polling every 5 ms) until cond holds; fails the test
 * with what when it does not within ms. */
#define WAIT_UNTIL(cond, ms, what)                                             \
    do {                                                                       \
        int64_t end_ = now_ms() + emq_test_ms(ms);                             \
        while (!(cond)) {                                                      \
            if (now_ms() > end_)                                               \
                FAIL("timed out after %d ms waiting for %s", emq_test_ms(ms),  \
                     (what));                                                  \
            usleep(5000);                                                      \
        }                                                                      \
    } while (0)

/* An admin connection with a 20 s command timeout (for long scripts). */
static inline emq_conn_t *admin_connect(const emq_srv *s) {
    emq_conf_t *conf = conf_for(emq_srv_url(s));
    conf_set(conf, P_COMMAND_TIMEOUT, "20000");
    emq_conn_t *conn = connect_ok(conf);
    emq_conf_destroy(conf);
    return conn;
}

/* Runs a command given as an argv array; the call must succeed at the
 * transport level. Caller frees the reply. */
static inline emq_reply *cmdv_ok(emq_conn_t *conn, int argc,
                                 const char *const *argv) {
    emq_error err;
    memset(&err, 0, sizeof err);
    emq_reply *reply = NULL;
    emq_status st = emq_conn_command(conn, argc, argv, NULL, &reply, &err);
    if (st != EMQ_OK || reply == NULL)
        FAIL("%s: got %s (%s)", argv[0], emq_status_name(st), err.message);
    return reply;
}

/* A command whose reply must be an integer; returns it. */
#define CMD_INT(conn, ...)                                                     \
    cmd_int_at(__FILE__, __LINE__, (conn), __VA_ARGS__, (char *)NULL)
static inline long long cmd_int_at(const char *file, int line, emq_conn_t *conn,
                                   const char *arg0, ...) {
    const char *argv[32];
    int argc = 0;
    va_list ap;
    va_start(ap, arg0);
    for (const char *a = arg0; a != NULL && argc < 32;
         a = va_arg(ap, const char *))
        argv[argc++] = a;
    va_end(ap);
    emq_reply *r = cmdv_ok(conn, argc, argv);
    if (emq_reply_kind(r) != EMQ_REPLY_INTEGER) {
        char text[200];
        reply_text(r, text, sizeof text);
        emq_reply_free(r);
        emq_test_fail(file, line, "%s: not an integer reply: %s", argv[0],
                      text);
    }
    long long v = emq_reply_integer(r);
    emq_reply_free(r);
    return v;
}

/* Runs a command and fails unless the reply is not an error. */
#define CMD_NOERR(conn, ...)                                                   \
    do {                                                                       \
        emq_reply *r_ = CMD((conn), __VA_ARGS__);                              \
        if (emq_reply_kind(r_) == EMQ_REPLY_ERROR) {                           \
            char t_[200];                                                      \
            reply_text(r_, t_, sizeof t_);                                     \
            emq_reply_free(r_);                                                \
            FAIL("error reply: %s", t_);                                       \
        }                                                                      \
        emq_reply_free(r_);                                                    \
    } while (0)

/* XPENDING summary: the total count of the group's pending list. */
static inline long long pending_total(emq_conn_t *adm, const char *stream,
                                      const char *group) {
    emq_reply *r = CMD(adm, "XPENDING", stream, group);
    long long n = emq_reply_kind(r) == EMQ_REPLY_ARRAY
                      ? emq_reply_integer(emq_reply_at(r, 0))
                      : -1;
    emq_reply_free(r);
    return n;
}

/* Number of entries pending for one consumer (XPENDING extended form). */
static inline long long pending_of(emq_conn_t *adm, const char *stream,
                                   const char *group, const char *consumer) {
    emq_reply *r =
        CMD(adm, "XPENDING", stream, group, "-", "+", "1000000", consumer);
    long long n =
        emq_reply_kind(r) == EMQ_REPLY_ARRAY ? (long long)emq_reply_len(r) : -1;
    emq_reply_free(r);
    return n;
}

/* Owner and delivery count of one pending ID; owner "" when not pending. */
static inline void pending_entry(emq_conn_t *adm, const char *stream,
                                 const char *group, const char *id, char *owner,
                                 size_t owner_size, long long *deliveries) {
    emq_reply *r = CMD(adm, "XPENDING", stream, group, id, id, "1");
    owner[0] = '\0';
    *deliveries = 0;
    if (emq_reply_kind(r) == EMQ_REPLY_ARRAY && emq_reply_len(r) == 1) {
        const emq_reply *row = emq_reply_at(r, 0);
        reply_text(emq_reply_at(row, 1), owner, owner_size);
        *deliveries = emq_reply_integer(emq_reply_at(row, 3));
    }
    emq_reply_free(r);
}

/* The IDs of a stream, in order, into ids (at most max); returns count. */
static inline size_t stream_ids(emq_conn_t *adm, const char *stream,
                                emq_id *ids, size_t max) {
    emq_reply *r = CMD(adm, "XRANGE", stream, "-", "+");
    size_t n = emq_reply_len(r);
    size_t k = 0;
    for (size_t i = 0; i < n && k < max; i++)
        reply_text(emq_reply_at(emq_reply_at(r, i), 0), ids[k++].str,
                   sizeof ids[0].str);
    emq_reply_free(r);
    return k;
}

/* "calls" and "usec" of one command from INFO commandstats (0 if the
 * command was never called). name is lower case, e.g. "xgroup|create". */
static inline void cmdstat(emq_conn_t *adm, const char *name, long long *calls,
                           long long *usec) {
    emq_reply *r = CMD(adm, "INFO", "commandstats");
    size_t len = 0;
    const char *text = emq_reply_str(r, &len);
    char *copy = malloc(len + 1);
    ASSERT(copy != NULL);
    memcpy(copy, text ? text : "", len);
    copy[len] = '\0';
    emq_reply_free(r);
    char key[128];
    snprintf(key, sizeof key, "cmdstat_%s:calls=", name);
    *calls = 0;
    *usec = 0;
    const char *p = strstr(copy, key);
    if (p) {
        *calls = atoll(p + strlen(key));
        const char *u = strstr(p, "usec=");
        if (u)
            *usec = atoll(u + 5);
    }
    free(copy);
}

/* The value of field name in a flat [f, v, f, v...] reply, copied into
 * buf; returns 0 when the field is missing. */
static inline int field_of(const emq_reply *fields, const char *name, char *buf,
                           size_t size) {
    size_t n = emq_reply_len(fields);
    for (size_t i = 0; i + 1 < n; i += 2) {
        char f[128];
        reply_text(emq_reply_at(fields, i), f, sizeof f);
        if (strcmp(f, name) == 0) {
            reply_text(emq_reply_at(fields, i + 1), buf, size);
            return 1;
        }
    }
    buf[0] = '\0';
    return 0;
}

/* The last-delivered-id of group on stream (XINFO GROUPS), "" if none. */
static inline void group_last_delivered(emq_conn_t *adm, const char *stream,
                                        const char *group, char *out,
                                        size_t size) {
    emq_reply *r = CMD(adm, "XINFO", "GROUPS", stream);
    out[0] = '\0';
    for (size_t i = 0; i < emq_reply_len(r); i++) {
        const emq_reply *g = emq_reply_at(r, i);
        char name[256];
        if (field_of(g, "name", name, sizeof name) && !strcmp(name, group))
            field_of(g, "last-delivered-id", out, size);
    }
    emq_reply_free(r);
}

/* 1 when group has been handed every entry of stream and holds none. */
static inline int group_done(emq_conn_t *adm, const char *stream,
                             const char *group) {
    emq_reply *r = CMD(adm, "XREVRANGE", stream, "+", "-", "COUNT", "1");
    char last[EMQ_ID_MAX] = "";
    if (emq_reply_len(r) == 1)
        reply_text(emq_reply_at(emq_reply_at(r, 0), 0), last, sizeof last);
    emq_reply_free(r);
    char ld[EMQ_ID_MAX];
    group_last_delivered(adm, stream, group, ld, sizeof ld);
    return strcmp(ld, last) == 0 && pending_total(adm, stream, group) == 0;
}

/* ---- log capture ------------------------------------------------------ */

typedef struct logcap {
    pthread_mutex_t lock;
    char text[16384];
    size_t len;
    int warnings;
} logcap;

static inline void logcap_init(logcap *l) {
    memset(l, 0, sizeof *l);
    pthread_mutex_init(&l->lock, NULL);
}

static inline void logcap_fn(void *opaque, emq_log_level level,
                             const char *message) {
    logcap *l = opaque;
    pthread_mutex_lock(&l->lock);
    if (level <= EMQ_LOG_WARNING)
        l->warnings++;
    int n = snprintf(l->text + l->len, sizeof l->text - l->len, "%d %s\n",
                     (int)level, message);
    if (n > 0 && l->len + (size_t)n < sizeof l->text)
        l->len += (size_t)n;
    pthread_mutex_unlock(&l->lock);
}

/* ---- consumers on threads -------------------------------------------- */

/* Makes a consumer that records into r (and stops when r says so); conf is
 * destroyed. */
static inline emq_consumer_t *recording_consumer(emq_conf_t *conf,
                                                 recorder *r) {
    emq_consumer_t *c = NULL;
    emq_error err;
    memset(&err, 0, sizeof err);
    ASSERT_OK(emq_consumer_new(conf, record, r, &c, &err), &err);
    emq_conf_destroy(conf);
    if (r->consumer == NULL)
        r->consumer = c;
    return c;
}

/* Stops a consumer running on t, joins it and returns its status. */
static inline emq_status stop_consumer(runner_thread *t) {
    emq_consumer_stop(t->c);
    return join_consumer(t);
}

/* Number of entries r has seen (locked read). */
static inline size_t recorded(recorder *r) {
    pthread_mutex_lock(&r->lock);
    size_t n = r->n;
    pthread_mutex_unlock(&r->lock);
    return n;
}

/* Index of the first record with value v, or -1. */
static inline long recorded_index(recorder *r, const char *v) {
    pthread_mutex_lock(&r->lock);
    long found = -1;
    for (size_t i = 0; i < r->n && found < 0; i++)
        if (strcmp(r->values[i], v) == 0)
            found = (long)i;
    pthread_mutex_unlock(&r->lock);
    return found;
}

/* Waits (bounded) for a forked child and returns its wait status. */
static inline int wait_child(pid_t pid, int timeout_ms) {
    timeout_ms = emq_test_ms(timeout_ms);
    int64_t end = now_ms() + timeout_ms;
    int status = 0;
    for (;;) {
        pid_t w = waitpid(pid, &status, WNOHANG);
        if (w == pid)
            return status;
        if (now_ms() > end) {
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
            FAIL("child %ld did not exit within %d ms", (long)pid, timeout_ms);
        }
        usleep(5000);
    }
}

/* A script that runs until SCRIPT KILL, on a thread of its own
 * (pthread_create(..., run_busy_script, &b)): past the server's
 * lua-time-limit every other client gets -BUSY and its command does not
 * run. out: the script's own reply ("... killed ..."). */
typedef struct busy_script {
    const emq_srv *s;
    char out[256];
} busy_script;

static inline void *run_busy_script(void *arg) {
    busy_script *b = arg;
    emq_srv_cmd(b->s, b->out, sizeof b->out, "EVAL",
                "local t = redis.call('TIME') "
                "while true do end",
                "0", NULL);
    return NULL;
}

/* 1 when the server answers BUSY (a script or function runs past its
 * threshold), 0 while it answers normally. */
static inline int server_busy(const emq_srv *s) {
    char out[256];
    return emq_srv_cmd(s, out, sizeof out, "PING", NULL) == '-' &&
           strstr(out, "BUSY") != NULL;
}

/* The id= of the client named name in CLIENT LIST, or -1. */
static inline long long client_id_by_name(const emq_srv *s, const char *name,
                                          int need_blocked) {
    static char out[65536];
    if (emq_srv_cmd(s, out, sizeof out, "CLIENT", "LIST", NULL) < 0)
        return -1;
    char key[200];
    snprintf(key, sizeof key, " name=%s ", name);
    for (char *line = out; line && *line;) {
        char *next = strchr(line, '\n');
        if (next)
            *next++ = '\0';
        if (strstr(line, key) &&
            (!need_blocked ||
             (strstr(line, " flags=b ") && strstr(line, "cmd=xreadgroup"))))
            return atoll(line + 3); /* "id=N ..." */
        line = next;
    }
    return -1;
}

#endif /* EMQ_TEST_INSPECT_CONN_HELPERS_H */
