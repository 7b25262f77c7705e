/* SPDX-License-Identifier: BSD-3-Clause */
/* conn_helpers.h: small helpers shared by the connection integration tests.
 *
 * They use the public API only (echomq.h): building a conf, connecting,
 * sending a command given as C strings, and checking a reply. Every helper
 * fails the test with the library's own error message when a step fails.
 * The conf property names live here, in one place.
 */
#ifndef EMQ_TEST_CONN_HELPERS_H
#define EMQ_TEST_CONN_HELPERS_H

#include "harness/test.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdint.h>
#include <time.h>

/* Property names of the conf table (see docs/CONFIGURATION.md). */
#define P_URL "url"
#define P_USER "user"
#define P_PASSWORD "password"
#define P_DB "db"
#define P_CLIENT_NAME "client_name"
#define P_CONNECT_TIMEOUT "connect_timeout_ms"
#define P_COMMAND_TIMEOUT "command_timeout_ms"
#define P_RECONNECT_ATTEMPTS "reconnect.max_attempts"
#define P_RECONNECT_BASE "reconnect.backoff_min_ms"
#define P_RECONNECT_MAX "reconnect.backoff_max_ms"
#define P_TLS_CA "tls.ca_file"
#define P_TLS_CERT "tls.cert_file"
#define P_TLS_KEY "tls.key_file"
#define P_TLS_VERIFY "tls.verify"
#define TLS_VERIFY_NONE "none"

static inline int64_t now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static inline void conf_set(emq_conf_t *conf, const char *name,
                            const char *value) {
    emq_error err;
    memset(&err, 0, sizeof err);
    if (emq_conf_set(conf, name, value, &err) != EMQ_OK)
        FAIL("emq_conf_set(%s): %s", name, err.message);
}

/* Sets a time property to ms stretched by the run's time scale
 * (emq_test_ms): for bounds a loaded machine must meet, such as how long
 * a replica takes to confirm a write. */
static inline void conf_set_ms(emq_conf_t *conf, const char *name, int ms) {
    char value[24];
    snprintf(value, sizeof value, "%d", emq_test_ms(ms));
    conf_set(conf, name, value);
}

/* A conf for url with short timeouts suited to tests: 2 s, stretched by
 * the run's time scale (emq_test_ms: a reply under memcheck on a loaded
 * machine can take longer). Caller destroys. */
static inline emq_conf_t *conf_for(const char *url) {
    emq_conf_t *conf = emq_conf_new();
    ASSERT(conf != NULL);
    conf_set(conf, P_URL, url);
    char timeout[24];
    snprintf(timeout, sizeof timeout, "%d", emq_test_ms(2000));
    conf_set(conf, P_CONNECT_TIMEOUT, timeout);
    conf_set(conf, P_COMMAND_TIMEOUT, timeout);
    return conf;
}

/* Connects with conf (which the caller still destroys); fails the test
 * with the library's message when connecting fails. */
static inline emq_conn_t *connect_ok(const emq_conf_t *conf) {
    emq_error err;
    memset(&err, 0, sizeof err);
    emq_conn_t *conn = NULL;
    ASSERT_OK(emq_conn_new(conf, &conn, &err), &err);
    ASSERT(conn != NULL);
    ASSERT_EQ_INT(emq_conn_is_broken(conn), 0);
    return conn;
}

/* conf_for(url) + connect_ok, destroying the conf. */
static inline emq_conn_t *connect_url(const char *url) {
    emq_conf_t *conf = conf_for(url);
    emq_conn_t *conn = connect_ok(conf);
    emq_conf_destroy(conf);
    return conn;
}

/* Sends a command given as NUL-terminated strings (ending with NULL) and
 * returns the status; *reply gets the reply (or NULL). */
static inline emq_status cmd_status(emq_conn_t *conn, emq_reply **reply,
                                    emq_error *err, const char *arg0, ...) {
    const char *argv[32];
    int argc = 0;
    va_list ap;
    va_start(ap, arg0);
    for (const char *a = arg0; a != NULL && argc < 32;
         a = va_arg(ap, const char *))
        argv[argc++] = a;
    va_end(ap);
    *reply = NULL;
    return emq_conn_command(conn, argc, argv, NULL, reply, err);
}

/* Like cmd_status but the call must succeed; returns the reply. The
 * failure names the caller's file and line. */
static inline emq_reply *cmd_ok_at(const char *file, int line, emq_conn_t *conn,
                                   const char *arg0, ...) {
    const char *argv[32];
    int argc = 0;
    va_list ap;
    va_start(ap, arg0);
    for (const char *a = arg0; a != NULL && argc < 32;
         a = va_arg(ap, const char *))
        argv[argc++] = a;
    va_end(ap);
    emq_error err;
    memset(&err, 0, sizeof err);
    emq_reply *reply = NULL;
    emq_status st = emq_conn_command(conn, argc, argv, NULL, &reply, &err);
    if (st != EMQ_OK || reply == NULL)
        emq_test_fail(file, line, "%s: got %s (%s)", argv[0],
                      emq_status_name(st), err.message);
    return reply;
}
#define CMD(conn, ...)                                                         \
    cmd_ok_at(__FILE__, __LINE__, (conn), __VA_ARGS__, (char *)NULL)

/* Asserts r is of kind k with text text (STRING, STATUS, ERROR). */
#define ASSERT_REPLY_TEXT(r, k, text)                                          \
    do {                                                                       \
        const emq_reply *rr_ = (r);                                            \
        ASSERT_EQ_INT(emq_reply_kind(rr_), (k));                               \
        size_t l_ = 0;                                                         \
        const char *s_ = emq_reply_str(rr_, &l_);                              \
        ASSERT_EQ_MEM(s_, l_, (text), strlen(text));                           \
    } while (0)

/* Copies a reply's text into buf as a C string (for ASSERT_CONTAINS). */
static inline const char *reply_text(const emq_reply *r, char *buf,
                                     size_t size) {
    size_t len = 0;
    const char *s = emq_reply_str(r, &len);
    if (s == NULL)
        len = 0;
    if (len >= size)
        len = size - 1;
    if (len)
        memcpy(buf, s, len);
    buf[len] = '\0';
    return buf;
}

/* Case-insensitive substring test. */
static inline int contains_ci(const char *hay, const char *needle) {
    size_t n = strlen(needle);
    for (; hay && *hay; hay++) {
        size_t i = 0;
        while (i < n && hay[i] &&
               tolower((unsigned char)hay[i]) ==
                   tolower((unsigned char)needle[i]))
            i++;
        if (i == n)
            return 1;
    }
    return 0;
}

#define ASSERT_CONTAINS_CI(hay, needle)                                        \
    do {                                                                       \
        if (!contains_ci((hay), (needle)))                                     \
            FAIL("%s does not contain \"%s\" (any case): \"%s\"", #hay,        \
                 (needle), (hay));                                             \
    } while (0)

/* Connecting must fail with want; returns nothing, checks *out is NULL.
 * err is filled for further checks of the message. */
static inline void connect_fails(const emq_conf_t *conf, emq_status want,
                                 emq_error *err) {
    emq_conn_t *conn = (emq_conn_t *)(uintptr_t)1;
    memset(err, 0, sizeof *err);
    emq_status st = emq_conn_new(conf, &conn, err);
    if (st == EMQ_OK)
        emq_conn_destroy(conn);
    ASSERT_STATUS(st, want, err);
    ASSERT(conn == NULL);
    ASSERT_EQ_INT(err->code, want);
    ASSERT(err->message[0] != '\0');
}

#endif /* EMQ_TEST_CONN_HELPERS_H */
