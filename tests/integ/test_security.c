/* SPDX-License-Identifier: BSD-3-Clause */
/* test_security.c: security end to end, against real redis-servers.
 *
 * TLS: a producer and a consumer do a whole round trip over rediss:// with
 * the CA and server certificate the harness generates; a consumer facing
 * an unknown CA, an expired certificate or another host's certificate
 * fails its run with EMQ_ETLS and a message naming the reason (the
 * connection-level refusals are in test_conn_tls.c).
 *
 * ACL: a user holding exactly the consumer ACL line of docs/SECURITY.md
 * runs a full cycle (recover, read, ack, retry, claim, dead letters, a
 * deleted pending entry) without a single NOPERM; a user missing any
 * command the consumer needs at start fails the start with NOPERM in the
 * error, naming the command; one missing a command of a later step gets
 * NOPERM in a warning naming it.
 *
 * Secrets: the password never shows in an error message (wrong password,
 * unreachable host, bad URL), a log line (callback and default stderr),
 * the JSON stats, or what emq_conf_get reads back; nor, for the echomq
 * program, in /proc/PID/cmdline (what ps shows) with -u URL or --url=URL,
 * or in its stderr when the password is refused.
 */
#include "base/base.h"
#include "harness/fakepeer.h"
#include "harness/server.h"
#include "harness/tlscerts.h"
#include "integ/cli_helpers.h"
#include "integ/inspect_conn_helpers.h"
#include "session/session.h" /* emq__reply_refused */

#include <fcntl.h>
#include <stdatomic.h>
#include <stdlib.h>

#define SECRET "Wq7SECRETpass9x"
#define SECRET_PARTS                                                           \
    { SECRET, "Wq7S", "SECRET", "pass9x", "ETpa" }

/* Fails when text holds the password or a telling piece of it. */
static void assert_no_secret(const char *where, const char *text) {
    static const char *const parts[] = SECRET_PARTS;
    for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++)
        if (text && strstr(text, parts[i]))
            FAIL("%s shows the password (\"%s\"): %s", where, parts[i], text);
}

/* ---- log capture ------------------------------------------------------- */

typedef struct logbook {
    pthread_mutex_t lock;
    char text[65536];
    size_t len;
} logbook;

static void logbook_init(logbook *b) {
    memset(b, 0, sizeof *b);
    pthread_mutex_init(&b->lock, NULL);
}

static void log_to_book(void *opaque, emq_log_level level, const char *msg) {
    logbook *b = opaque;
    (void)level;
    pthread_mutex_lock(&b->lock);
    int n = snprintf(b->text + b->len, sizeof b->text - b->len, "%s\n", msg);
    if (n > 0 && (size_t)n < sizeof b->text - b->len)
        b->len += (size_t)n;
    pthread_mutex_unlock(&b->lock);
}

/* 1 when the book holds text (locked read). */
static int book_has(logbook *b, const char *text) {
    pthread_mutex_lock(&b->lock);
    int has = strstr(b->text, text) != NULL;
    pthread_mutex_unlock(&b->lock);
    return has;
}

/* ---- TLS ----------------------------------------------------------------- */

static emq_srv *tls_server(emq_srv_cert cert) {
    emq_srv_opts o = {.transport = EMQ_SRV_TLS, .cert = cert};
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

TEST_TIMEOUT(security_tls_producer_and_consumer_round_trip, 60) {
    emq_srv *s = tls_server(EMQ_SRV_CERT_GOOD);
    ASSERT(strncmp(emq_srv_url(s), "rediss://", 9) == 0);
    const emq_certs *certs = emq_certs_get();

    emq_conf_t *pconf = conf_for(emq_srv_url(s));
    conf_set(pconf, P_TLS_CA, certs->ca_crt);
    conf_set(pconf, "queue", "tlsq");
    emq_producer_t *p;
    emq_error err;
    ASSERT_OK(emq_producer_new(pconf, &p, &err), &err);
    emq_conf_destroy(pconf);
    enum { N = 20 };
    for (int i = 0; i < N; i++) {
        char v[16];
        int len = snprintf(v, sizeof v, "t%d", i);
        emq_field f = {"n", 1, v, (size_t)len};
        ASSERT_OK(emq_produce(p, &f, 1, NULL, &err), &err);
    }
    emq_producer_destroy(p);

    emq_conf_t *conf = consumer_conf(s, "tlsq", "g", "w1", "head");
    conf_set(conf, P_TLS_CA, certs->ca_crt);
    recorder *r = malloc(sizeof *r);
    ASSERT(r != NULL);
    recorder_init(r);
    r->stop_after = N;
    emq_consumer_t *c;
    ASSERT_OK(emq_consumer_new(conf, record, r, &c, &err), &err);
    emq_conf_destroy(conf);
    r->consumer = c;
    runner_thread t;
    start_consumer(&t, c);
    wait_for(r, N, 10000);
    ASSERT_OK(join_consumer(&t), &t.err);
    emq_consumer_stats st;
    emq_consumer_stats_get(c, &st);
    ASSERT_EQ_INT(st.delivered, N);
    ASSERT_EQ_INT(st.acked, N);
    emq_consumer_destroy(c);
    char out[256];
    emq_srv_cmd(s, out, sizeof out, "XPENDING", "emq:{tlsq}", "g", NULL);
    ASSERT(strncmp(out, "0\n", 2) == 0);
    free(r);
    emq_srv_stop(s);
}

static emq_verdict never_called(void *opaque, const emq_entry *e, char *reason,
                                size_t reason_size) {
    (void)opaque;
    (void)e;
    (void)reason;
    (void)reason_size;
    FAIL("the handler ran although the connection was refused");
}

/* A consumer run over TLS that must be refused with EMQ_ETLS quickly (no
 * reconnect loop) and a message containing want. */
static void consumer_refused(emq_srv_cert cert, const char *ca,
                             const char *want) {
    emq_srv *s = tls_server(cert);
    emq_conf_t *conf = consumer_conf(s, "tlsq", "g", "w1", "head");
    conf_set(conf, P_TLS_CA, ca);
    emq_consumer_t *c;
    emq_error err;
    ASSERT_OK(emq_consumer_new(conf, never_called, NULL, &c, &err), &err);
    emq_conf_destroy(conf);
    int64_t t0 = now_ms();
    ASSERT_STATUS(emq_consumer_run(c, &err), EMQ_ETLS, &err);
    ASSERT(now_ms() - t0 < emq_test_ms(3000));
    ASSERT_CONTAINS_CI(err.message, want);
    emq_consumer_destroy(c);
    emq_srv_stop(s);
}

/* How many lines of the book hold text (locked read). */
static int book_count(logbook *b, const char *text) {
    pthread_mutex_lock(&b->lock);
    int n = 0;
    for (const char *at = b->text; (at = strstr(at, text)) != NULL; at++)
        n++;
    pthread_mutex_unlock(&b->lock);
    return n;
}

/* tls.verify none (the property, or the URL's ?tls.verify=none) makes
 * each handle warn once, when it is made: a producer, a consumer and an
 * admin handle, three warnings; verification on, none. */
TEST_TIMEOUT(security_tls_verify_none_warns_once_per_handle, 60) {
    emq_srv *s = tls_server(EMQ_SRV_CERT_WRONGHOST);
    char url[256];
    snprintf(url, sizeof url, "%s?tls.verify=none", emq_srv_url(s));
    static const char warning[] = "tls.verify is none";
    for (int how = 0; how < 3; how++) { /* property, URL, verified */
        logbook *book = malloc(sizeof *book);
        ASSERT(book != NULL);
        logbook_init(book);
        emq_conf_t *conf = conf_for(how == 1 ? url : emq_srv_url(s));
        if (how == 0)
            conf_set(conf, P_TLS_VERIFY, "none");
        conf_set(conf, "queue", "tlsv");
        conf_set(conf, "group", "g");
        conf_set(conf, "consumer", "w");
        conf_set(conf, "start", "head");
        emq_conf_set_log(conf, log_to_book, book);
        emq_error err;
        emq_producer_t *p = NULL;
        ASSERT_OK(emq_producer_new(conf, &p, &err), &err);
        emq_consumer_t *c = NULL;
        ASSERT_OK(emq_consumer_new(conf, never_called, NULL, &c, &err), &err);
        emq_admin_t *a = NULL;
        emq_status st = emq_admin_new(conf, &a, &err);
        fprintf(stderr, "    %s: %d warning(s)\n",
                how == 0   ? "tls.verify none"
                : how == 1 ? "?tls.verify=none"
                           : "verified",
                book_count(book, warning));
        if (how < 2) {
            ASSERT_OK(st, &err);
            ASSERT_EQ_INT(book_count(book, warning), 3);
        } else {
            ASSERT(st != EMQ_OK); /* the wrong host's certificate */
            ASSERT_EQ_INT(book_count(book, warning), 0);
        }
        emq_admin_destroy(a);
        emq_consumer_destroy(c);
        emq_producer_destroy(p);
        emq_conf_destroy(conf);
        free(book);
    }
    emq_srv_stop(s);
}

TEST(security_tls_consumer_refuses_unknown_ca) {
    consumer_refused(EMQ_SRV_CERT_GOOD, emq_certs_get()->other_ca_crt,
                     "certificate");
}

TEST(security_tls_consumer_refuses_expired_certificate) {
    consumer_refused(EMQ_SRV_CERT_EXPIRED, emq_certs_get()->ca_crt, "expired");
}

TEST(security_tls_consumer_refuses_hostname_mismatch) {
    consumer_refused(EMQ_SRV_CERT_WRONGHOST, emq_certs_get()->ca_crt,
                     "mismatch");
}

/* ---- ACL ----------------------------------------------------------------- */

/* The consumer's ACL line, as docs/SECURITY.md gives it, for queue
 * "aclq": commands the consumer sends, and those its scripts call. */
#define ACL_COMMANDS                                                           \
    "+xgroup|create +xreadgroup +xack +xpending +xautoclaim +xclaim +xrange "  \
    "+eval +get +set +pexpire +pttl +del +hset +hget +hdel +xadd +zadd "       \
    "+zrem +zscore +sadd +srem +smismember +time +client|setname"
#define ACL_KEYS "~emq:{aclq} ~emq:{aclq}:*"

/* Starts a server with user "worker" (password SECRET) holding the
 * consumer line minus the command `without` (NULL: the whole line). */
static emq_srv *acl_server(const char *without) {
    static char config[1024];
    char commands[512];
    snprintf(commands, sizeof commands, "%s", ACL_COMMANDS);
    if (without) {
        char needle[64];
        snprintf(needle, sizeof needle, "+%s ", without);
        char *at = strstr(commands, needle);
        if (at == NULL) {
            snprintf(needle, sizeof needle, " +%s", without);
            at = strstr(commands, needle);
        }
        ASSERT(at != NULL);
        memmove(at, at + strlen(needle), strlen(at + strlen(needle)) + 1);
    }
    snprintf(config, sizeof config,
             "user worker on >" SECRET " resetkeys " ACL_KEYS
             " resetchannels -@all %s\n",
             commands);
    emq_srv_opts o = {.extra_config = config};
    return emq_srv_start(&o);
}

static emq_conf_t *worker_conf(const emq_srv *s, const char *name) {
    char url[128];
    snprintf(url, sizeof url, "redis://worker:" SECRET "@127.0.0.1:%d",
             emq_srv_port(s));
    emq_conf_t *conf = conf_for(url);
    conf_set(conf, "queue", "aclq");
    conf_set(conf, "group", "g");
    conf_set(conf, "consumer", name);
    conf_set(conf, "start", "head");
    conf_set(conf, "block_ms", "50");
    conf_set(conf, "lease.ttl_ms", "1200");
    conf_set(conf, "claim.interval_ms", "100");
    conf_set(conf, "claim.min_idle_ms", "100");
    conf_set(conf, "max_deliveries", "2");
    conf_set(conf, "log.level", "debug");
    return conf;
}

static void raw(const emq_srv *s, const char *a0, const char *a1,
                const char *a2, const char *a3, const char *a4,
                const char *a5) {
    const char *args[] = {a0, a1, a2, a3, a4, a5, NULL};
    char out[512];
    int type = emq_srv_cmdv(s, out, sizeof out, args);
    if (type < 0 || type == '-')
        FAIL("%s: %s", a0, out);
}

/* Stream "emq:{aclq}" with group g:
 *   1-0 own    pending for w1 (recovered, acked)
 *   2-0 gone   pending for w1, then deleted (acked and counted)
 *   2-1 stale  pending for w1, delivered 5 times: dead-lettered on recovery
 *              without the handler (the script reads the reason: HGET)
 *   3-0 peer   pending for a dead peer (claimed, acked)
 *   4-0 ok     new (acked)
 *   5-0 retry  new: retried, claimed back, retried again, dead-lettered
 *   6-0 dead   new: dead-lettered at once */
static void acl_fixture(const emq_srv *s) {
    raw(s, "XGROUP", "CREATE", "emq:{aclq}", "g", "0", "MKSTREAM");
    raw(s, "XADD", "emq:{aclq}", "1-0", "n", "own", NULL);
    raw(s, "XADD", "emq:{aclq}", "2-0", "n", "gone", NULL);
    raw(s, "XADD", "emq:{aclq}", "2-1", "n", "stale", NULL);
    const char *rd[] = {"XREADGROUP", "GROUP",   "g",          "w1", "COUNT",
                        "3",          "STREAMS", "emq:{aclq}", ">",  NULL};
    char out[512];
    ASSERT(emq_srv_cmdv(s, out, sizeof out, rd) == '*');
    const char *bump[] = {"XCLAIM", "emq:{aclq}", "g", "w1", "0",
                          "2-1",    "RETRYCOUNT", "5", NULL};
    ASSERT(emq_srv_cmdv(s, out, sizeof out, bump) == '*');
    raw(s, "XDEL", "emq:{aclq}", "2-0", NULL, NULL, NULL);
    raw(s, "XADD", "emq:{aclq}", "3-0", "n", "peer", NULL);
    const char *rp[] = {"XREADGROUP", "GROUP",   "g",          "peer", "COUNT",
                        "1",          "STREAMS", "emq:{aclq}", ">",    NULL};
    ASSERT(emq_srv_cmdv(s, out, sizeof out, rp) == '*');
    raw(s, "XADD", "emq:{aclq}", "4-0", "n", "ok", NULL);
    raw(s, "XADD", "emq:{aclq}", "5-0", "n", "retry", NULL);
    raw(s, "XADD", "emq:{aclq}", "6-0", "n", "dead", NULL);
}

/* A worker (user "worker") runs a full cycle on s: own pending entries, a
 * deleted pending entry, new work, a retry claimed back and dead-lettered,
 * a dead verdict, an entry past max_deliveries, a dead peer's entry, the
 * lease released on stop; no NOPERM, no warning, no secret. */
static void worker_full_cycle(emq_srv *s, int exact) {
    acl_fixture(s);
    usleep(60 * 1000); /* the peer's entry is idle past claim.min_idle_ms */
    emq_conf_t *conf = worker_conf(s, "w1");
    conf_set(conf, "deliveries.exact", exact ? "1" : "0");
    logbook *book = malloc(sizeof *book);
    ASSERT(book != NULL);
    logbook_init(book);
    emq_conf_set_log(conf, log_to_book, book);
    recorder *r = malloc(sizeof *r);
    ASSERT(r != NULL);
    recorder_init(r);
    r->retry_value = "retry";
    r->dead_value = "dead";
    emq_consumer_t *c;
    emq_error err;
    ASSERT_OK(emq_consumer_new(conf, record, r, &c, &err), &err);
    emq_conf_destroy(conf);
    runner_thread t;
    start_consumer(&t, c);
    /* Wait for the whole cycle: both dead letters and the claim. */
    emq_consumer_stats st;
    int64_t end = now_ms() + emq_test_ms(15000);
    for (;;) {
        emq_consumer_stats_get(c, &st);
        if (st.dead_lettered >= 3 && st.claimed >= 1 && st.acked >= 3)
            break;
        if (now_ms() > end)
            break;
        usleep(10 * 1000);
    }
    emq_consumer_stop(c);
    ASSERT_OK(join_consumer(&t), &t.err);
    emq_consumer_stats_get(c, &st);
    char json[1024];
    emq_consumer_stats_json(c, json, sizeof json);
    if (st.dead_lettered < 3 || st.claimed < 1 || st.acked < 3)
        FAIL("cycle incomplete: %s; log:\n%s", json, book->text);
    ASSERT(st.retried >= 2);
    ASSERT(st.deleted_pending >= 1);
    ASSERT_NOT_CONTAINS(book->text, "NOPERM");
    assert_no_secret("a log line", book->text);
    assert_no_secret("the JSON stats", json);
    emq_consumer_destroy(c);

    char out[1024];
    emq_srv_cmd(s, out, sizeof out, "XLEN", "emq:{aclq}:dead", NULL);
    ASSERT_EQ_STR(out, "3");
    /* The lease was released on stop (the release script's DEL). */
    emq_srv_cmd(s, out, sizeof out, "EXISTS", "emq:{aclq}:lease:g:w1", NULL);
    ASSERT_EQ_STR(out, "0");
    emq_srv_cmd(s, out, sizeof out, "XPENDING", "emq:{aclq}", "g", NULL);
    ASSERT(strncmp(out, "0\n", 2) == 0);
    free(r);
    free(book);
}

TEST_TIMEOUT(security_acl_consumer_line_runs_a_full_cycle, 40) {
    emq_srv *s = acl_server(NULL);
    worker_full_cycle(s, 0);
    emq_srv_stop(s);
}

/* ---- least privilege with ACL selectors (Redis 7.0+) ------------------ */

/* The functions of echomq's library each role may call (docs/SECURITY.md),
 * by FCALL: never EVAL, which runs any code. The probe every connection's
 * handshake calls has no keys. */
#define FN_PROBE "+fcall|emq1_library "
#define FN_WORKER                                                              \
    "+fcall|emq1_lease_acquire +fcall|emq1_lease_renew "                       \
    "+fcall|emq1_lease_takeover +fcall|emq1_lease_release +fcall|emq1_retry "  \
    "+fcall|emq1_deadletter +fcall|emq1_release +fcall|emq1_refresh "          \
    "+fcall|emq1_inhand_publish +fcall|emq1_mark +fcall|emq1_claim "           \
    "+fcall|emq1_take_due +fcall|emq1_retry_waits"
#define FN_GRANT " +fcall|emq1_grant +fcall|emq1_grant_count"
#define FN_MOVE " +fcall|emq1_delayed_move"
#define FN_ADD "+fcall|emq1_add"
#define FN_OPERATOR                                                            \
    "+fcall|emq1_prune +fcall|emq1_trim_acked +fcall|emq1_requeue "            \
    "+fcall|emq1_dead_purge +fcall|emq1_delayed_cancel +fcall|emq1_orphans "
/* Who loads the library (echomq functions load), once per server. */
#define LOADER_LINE                                                            \
    "user loader on >" SECRET " resetkeys resetchannels -@all "                \
    "+client|setname " FN_PROBE "+function|load +function|list "               \
    "+function|delete +cluster|shards +cluster|slots\n"

/* docs/SECURITY.md's three roles for queue "aclq". Each kind of key gets
 * only the commands it needs, through a selector (the stream commands the
 * stream key alone; EVAL one selector over every key a script names): so
 * the worker cannot DEL or SET the stream, nor XADD to it, nor put a key
 * of another type at a helper key, nor run an admin verb. */
#define WORKER_GRANTS                                                          \
    "user worker on >" SECRET " resetkeys resetchannels -@all "                \
    "+time +client|setname " FN_PROBE                                          \
    "(~emq:{aclq} +xgroup|create +xreadgroup +xack +xpending +xautoclaim "     \
    "+xclaim +xrange) (~emq:{aclq} ~emq:{aclq}:* " FN_WORKER ") "              \
    "(~emq:{aclq}:lease:* +get +set +pexpire +pttl +del) "                     \
    "(~emq:{aclq}:reasons:* +hset +hget +hdel) "                               \
    "(~emq:{aclq}:retry:* +zadd +zrem +zscore) "                               \
    "(~emq:{aclq}:unseen:* +sadd +srem +smismember) "                          \
    "(~emq:{aclq}:inhand:* +hset +hdel) "                                      \
    "(~emq:{aclq}:dead +xadd) (~emq:{aclq}:priority +get)"
#define WORKER_LINE WORKER_GRANTS "\n"
#define PRODUCER_LINE                                                          \
    "user producer on >" SECRET " resetkeys resetchannels -@all "              \
    "~emq:{aclq} +xadd\n"
#define OPERATOR_LINE                                                          \
    "user operator on >" SECRET " resetkeys resetchannels -@all "              \
    "~emq:{aclq} ~emq:{aclq}:* +@stream +@read " FN_PROBE FN_OPERATOR          \
    "+exists +type +del +hset +hdel +time +client|setname +cluster|shards "    \
    "+cluster|slots\n"

/* Starts a server (7.0 or later: else the test skips) with lines (ACL
 * users, one per line) and the loader, which loads echomq's library with
 * `echomq functions load`: the roles may call it, not load it. */
static emq_srv *roles_start(const char *lines) {
    if (emq_srv_binary_version(NULL, 0) < 70000)
        SKIP("ACL selectors need Redis 7.0 or later (this server is older)");
    static char config[8192];
    snprintf(config, sizeof config, "%s" LOADER_LINE, lines);
    emq_srv_opts o = {.extra_config = config};
    emq_srv *s = emq_srv_start(&o);
    char url[160];
    snprintf(url, sizeof url, "redis://loader:" SECRET "@127.0.0.1:%d",
             emq_srv_port(s));
    cli_result r;
    CLI(&r, url, "functions", "load");
    ASSERT_EXIT(&r, 0);
    ASSERT_CONTAINS(r.out, "echomq_1");
    cli_free(&r);
    return s;
}

static emq_srv *roles_server(void) {
    return roles_start(WORKER_LINE PRODUCER_LINE OPERATOR_LINE);
}

static const char *role_url(const emq_srv *s, const char *user) {
    static char url[3][160];
    static int i;
    i = (i + 1) % 3;
    snprintf(url[i], sizeof url[i], "redis://%s:" SECRET "@127.0.0.1:%d", user,
             emq_srv_port(s));
    return url[i];
}

/* The worker's line runs the whole consumer cycle. */
TEST_TIMEOUT(security_least_privilege_worker_runs_a_full_cycle, 40) {
    emq_srv *s = roles_server();
    worker_full_cycle(s, 0);
    emq_srv_stop(s);
}

/* The worker's line with what exact delivery counts need beside it
 * (docs/SECURITY.md): its reads are the grant script's, which reads the
 * limits hash and, with nothing new, the stream's last ID, then waits
 * with XREAD. */
#define EXACT_WORKER_LINE                                                      \
    WORKER_GRANTS                                                              \
    " (~emq:{aclq} ~emq:{aclq}:*" FN_GRANT ") "                                \
    "(~emq:{aclq} +xrevrange +xread) (~emq:{aclq}:limits:* +hmget)\n"

TEST_TIMEOUT(security_least_privilege_exact_worker_runs_a_full_cycle, 40) {
    emq_srv *s = roles_start(EXACT_WORKER_LINE);
    worker_full_cycle(s, 1);
    emq_srv_stop(s);
}

/* What each role may not do is refused by the server, and what it is for
 * works: the producer adds, the operator runs the admin verbs. */
TEST_TIMEOUT(security_least_privilege_roles_and_their_refusals, 60) {
    emq_srv *s = roles_server();
    cli_result r;
    /* The producer adds; it cannot read, delete or administer. */
    CLI_IN(&r, role_url(s, "producer"), "1\n2\n3\n", "produce", "aclq",
           "--lines", "-q");
    ASSERT_EXIT(&r, 0);
    cli_free(&r);
    /* The worker consumes them. */
    CLI(&r, role_url(s, "worker"), "consume", "aclq", "-g", "g", "-c", "w",
        "--start", "head", "--until-idle", "300", "-q");
    ASSERT_EXIT(&r, 0);
    ASSERT_EQ_INT(cli_lines(r.out), 3);
    cli_free(&r);
    /* Refusals, sent raw as a leaked credential would. */
    static const char *const refused[][8] = {
        {"worker", "DEL", "emq:{aclq}", NULL},
        {"worker", "SET", "emq:{aclq}", "x", NULL},
        {"worker", "XADD", "emq:{aclq}", "*", "a", "1", NULL},
        {"worker", "XTRIM", "emq:{aclq}", "MAXLEN", "0", NULL},
        {"worker", "XGROUP", "DESTROY", "emq:{aclq}", "g", NULL},
        {"worker", "DEL", "emq:{aclq}:dead", NULL},
        {"worker", "GET", "emq:{other}:lease:g:w", NULL},
        /* No key of another type at a helper key: a stream at the retry
         * schedule would stop every worker of the group at its first
         * retry (WRONGTYPE), and the worker could not delete it. */
        {"worker", "XGROUP", "CREATE", "emq:{aclq}:retry:g", "x", "$",
         "MKSTREAM", NULL},
        {"worker", "XADD", "emq:{aclq}:retry:g", "*", "a", "1", NULL},
        {"worker", "SET", "emq:{aclq}:reasons:g", "x", NULL},
        {"worker", "ZADD", "emq:{aclq}:lease:g:w", "1", "x", NULL},
        {"worker", "EVAL",
         "return redis.call('XGROUP', 'CREATE', KEYS[1], 'x', '$', "
         "'MKSTREAM')",
         "1", "emq:{aclq}:retry:g", NULL},
        {"producer", "DEL", "emq:{aclq}", NULL},
        {"producer", "XRANGE", "emq:{aclq}", "-", "+", NULL},
        {"operator", "FLUSHALL", NULL},
        {"operator", "XADD", "emq:{other}", "*", "a", "1", NULL},
    };
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        char out[512];
        /* One connection per role, then the command, as a leaked
         * credential would send it. */
        emq_conf_t *conf = conf_for(role_url(s, refused[i][0]));
        emq_conn_t *c = connect_ok(conf);
        emq_conf_destroy(conf);
        const char *argv[7];
        int argc = 0;
        for (int k = 1; refused[i][k]; k++)
            argv[argc++] = refused[i][k];
        emq_reply *reply = NULL;
        emq_error err;
        ASSERT_OK(emq_conn_command(c, argc, argv, NULL, &reply, &err), &err);
        reply_text(reply, out, sizeof out);
        /* NOPERM, or inside a script the words of an ACL refusal. */
        if (emq_reply_kind(reply) != EMQ_REPLY_ERROR ||
            !emq__reply_refused(reply))
            FAIL("%s %s %s was not refused: %s", refused[i][0], argv[0],
                 argc > 1 ? argv[1] : "", out);
        emq_reply_free(reply);
        emq_conn_destroy(c);
    }
    /* Admin verbs: the worker is refused, the operator runs them. */
    CLI(&r, role_url(s, "worker"), "trim", "aclq", "--acked");
    ASSERT_EXIT(&r, 1);
    ASSERT_CONTAINS(r.err, "NOPERM"); /* the trim function is not its */
    cli_free(&r);
    CLI(&r, role_url(s, "worker"), "group", "destroy", "aclq", "-g", "g",
        "--yes");
    ASSERT(r.code != 0);
    ASSERT_CONTAINS(r.err, "NOPERM");
    cli_free(&r);
    static const char *const operator_verbs[][8] = {
        {"info", "aclq", NULL},
        {"pending", "aclq", "-g", "g", NULL},
        {"dead", "list", "aclq", NULL},
        {"trim", "aclq", "--acked", NULL},
        {"group", "setid", "aclq", "-g", "g", "--to", "head", NULL},
        {"group", "limits", "aclq", "-g", "g", "--rate", "50", NULL},
        {"group", "limits", "aclq", "-g", "g", "--rate", "0", NULL},
        {"consumers", "prune", "aclq", "-g", "g", "--idle", "0", NULL},
        {"dead", "purge", "aclq", "--yes", NULL},
        {"group", "destroy", "aclq", "-g", "g", "--yes", NULL},
    };
    for (size_t i = 0; i < sizeof operator_verbs / sizeof operator_verbs[0];
         i++) {
        cli_run_in(&r, role_url(s, "operator"), NULL, 0, 20000,
                   operator_verbs[i]);
        if (r.code != 0)
            FAIL("operator: %s %s failed: %s", operator_verbs[i][0],
                 operator_verbs[i][1], r.err);
        cli_free(&r);
    }
    emq_srv_stop(s);
}

/* A user without `cmd` fails the start of a consumer with NOPERM naming
 * the command, before any entry reaches the handler. */
static void start_refused_without(const char *cmd, const char *named) {
    emq_srv *s = acl_server(cmd);
    acl_fixture(s);
    emq_conf_t *conf = worker_conf(s, "w1");
    emq_consumer_t *c;
    emq_error err;
    ASSERT_OK(emq_consumer_new(conf, never_called, NULL, &c, &err), &err);
    emq_conf_destroy(conf);
    int64_t t0 = now_ms();
    emq_status st = emq_consumer_run(c, &err);
    if (st == EMQ_OK)
        FAIL("without +%s the consumer started", cmd);
    ASSERT(now_ms() - t0 < emq_test_ms(5000));
    /* A command the consumer sends is refused with NOPERM naming it; one
     * that a script calls fails the script, in each server's own words:
     * 6.2 and 7.0 "ERR The user executing the script can't run this
     * command or subcommand" (no name); 7.2 and Valkey "ERR ACL failure in
     * script: User <u> has no permissions to run the '<cmd>' command"
     * (redis 7.2.6 src/script.c scriptVerifyACL). */
    if (strstr(err.message, "NOPERM")) {
        ASSERT_CONTAINS_CI(err.message, named);
    } else if (emq_srv_redis_at_least(s, 7, 2)) {
        ASSERT_CONTAINS(err.message, "ACL failure in script");
        char quoted[64];
        snprintf(quoted, sizeof quoted, "'%s'", named);
        ASSERT_CONTAINS_CI(err.message, quoted);
    } else {
        ASSERT_CONTAINS(err.message, "can't run this command");
    }
    assert_no_secret("the error message", err.message);
    emq_consumer_destroy(c);
    emq_srv_stop(s);
}

TEST(security_acl_without_eval_start_fails_with_noperm) {
    start_refused_without("eval", "eval");
}

TEST(security_acl_without_xgroup_create_start_fails_with_noperm) {
    start_refused_without("xgroup|create", "xgroup");
}

/* Counts handler calls by the fixture's values: "own" (w1's own pending
 * entry), "peer" (a dead peer's, which a claim beat takes over) and the
 * rest (new entries, only a read of new work delivers them). */
static atomic_int own_calls, peer_calls, new_calls;

static int value_is(const emq_entry *e, const char *v) {
    return e->nfields && e->fields[0].value_len == strlen(v) &&
           memcmp(e->fields[0].value, v, strlen(v)) == 0;
}

static emq_verdict count_own(void *opaque, const emq_entry *e, char *reason,
                             size_t reason_size) {
    (void)opaque;
    (void)reason;
    (void)reason_size;
    atomic_fetch_add(value_is(e, "own")    ? &own_calls
                     : value_is(e, "peer") ? &peer_calls
                                           : &new_calls,
                     1);
    return EMQ_ACK;
}

/* Own pending entries are recovered with XPENDING and XCLAIM, so a worker
 * without +xreadgroup still settles what it held; its first read of new
 * work is refused, which ends the run with NOPERM naming XREADGROUP, and
 * no new entry is ever handed out. The dead peer's entry may be: a claim
 * beat (XAUTOCLAIM, allowed) comes before the first read once the
 * session's start outlasts claim.interval_ms (100), as it does on a
 * loaded machine. */
TEST(security_acl_without_xreadgroup_start_fails_with_noperm) {
    emq_srv *s = acl_server("xreadgroup");
    acl_fixture(s);
    emq_conf_t *conf = worker_conf(s, "w1");
    emq_consumer_t *c;
    emq_error err;
    atomic_store(&own_calls, 0);
    atomic_store(&peer_calls, 0);
    atomic_store(&new_calls, 0);
    ASSERT_OK(emq_consumer_new(conf, count_own, NULL, &c, &err), &err);
    emq_conf_destroy(conf);
    int64_t t0 = now_ms();
    emq_status st = emq_consumer_run(c, &err);
    if (st == EMQ_OK)
        FAIL("without +xreadgroup the consumer ran on");
    ASSERT(now_ms() - t0 < emq_test_ms(5000));
    ASSERT_CONTAINS(err.message, "NOPERM");
    ASSERT_CONTAINS_CI(err.message, "xreadgroup");
    fprintf(stderr, "    handler calls: %d own, %d peer, %d new\n",
            atomic_load(&own_calls), atomic_load(&peer_calls),
            atomic_load(&new_calls));
    ASSERT_EQ_INT(atomic_load(&own_calls), 1);
    ASSERT_EQ_INT(atomic_load(&new_calls), 0);
    assert_no_secret("the error message", err.message);
    emq_consumer_destroy(c);
    emq_srv_stop(s);
}

TEST(security_acl_without_xpending_start_fails_with_noperm) {
    start_refused_without("xpending", "xpending");
}

TEST(security_acl_without_set_start_fails_with_noperm) {
    /* The lease script calls SET: a script runs with the caller's ACL. */
    start_refused_without("set", "set");
}

TEST(security_acl_without_keys_start_fails_with_noperm) {
    char config[512];
    snprintf(config, sizeof config,
             "user worker on >" SECRET " resetkeys ~other:* resetchannels "
             "-@all %s\n",
             ACL_COMMANDS);
    emq_srv_opts o = {.extra_config = config};
    emq_srv *s = emq_srv_start(&o);
    emq_conf_t *conf = worker_conf(s, "w1");
    emq_consumer_t *c;
    emq_error err;
    ASSERT_OK(emq_consumer_new(conf, never_called, NULL, &c, &err), &err);
    emq_conf_destroy(conf);
    ASSERT(emq_consumer_run(c, &err) != EMQ_OK);
    ASSERT_CONTAINS(err.message, "NOPERM");
    ASSERT_CONTAINS_CI(err.message, "key");
    emq_consumer_destroy(c);
    emq_srv_stop(s);
}

/* ---- secrets ------------------------------------------------------------- */

TEST(security_wrong_password_never_shown) {
    emq_srv_opts o = {.requirepass = "RightPassword1"};
    emq_srv *s = emq_srv_start(&o);
    char url[128];
    snprintf(url, sizeof url, "redis://:" SECRET "@127.0.0.1:%d",
             emq_srv_port(s));
    logbook *book = malloc(sizeof *book);
    ASSERT(book != NULL);
    logbook_init(book);

    /* Through the URL, then through the password property. */
    for (int via_property = 0; via_property < 2; via_property++) {
        emq_conf_t *conf = conf_for(via_property ? emq_srv_url(s) : url);
        if (via_property)
            conf_set(conf, P_PASSWORD, SECRET);
        conf_set(conf, "queue", "pwq");
        conf_set(conf, "group", "g");
        conf_set(conf, "consumer", "w1");
        conf_set(conf, "start", "head");
        conf_set(conf, "log.level", "debug");
        emq_conf_set_log(conf, log_to_book, book);
        char got[256];
        ASSERT_OK(emq_conf_get(conf, P_PASSWORD, got, sizeof got, NULL), NULL);
        assert_no_secret("emq_conf_get(password)", got);

        emq_error err;
        emq_conn_t *conn = NULL;
        ASSERT_STATUS(emq_conn_new(conf, &conn, &err), EMQ_EAUTH, &err);
        assert_no_secret("the connection error", err.message);

        emq_producer_t *p = NULL;
        /* Lazy: the refusal comes with the first call; eager: at once. */
        ASSERT_OK(emq_producer_new(conf, &p, &err), &err);
        emq_field f = {"k", 1, "v", 1};
        ASSERT_STATUS(emq_produce(p, &f, 1, NULL, &err), EMQ_EAUTH, &err);
        assert_no_secret("the producer's call error", err.message);
        emq_producer_destroy(p);
        p = NULL;
        ASSERT_OK(emq_conf_set(conf, "producer.connect", "eager", &err), &err);
        ASSERT_STATUS(emq_producer_new(conf, &p, &err), EMQ_EAUTH, &err);
        assert_no_secret("the producer error", err.message);

        emq_consumer_t *c;
        ASSERT_OK(emq_consumer_new(conf, never_called, NULL, &c, &err), &err);
        ASSERT_STATUS(emq_consumer_run(c, &err), EMQ_EAUTH, &err);
        assert_no_secret("the consumer error", err.message);
        char json[1024];
        emq_consumer_stats_json(c, json, sizeof json);
        assert_no_secret("the JSON stats", json);
        emq_consumer_destroy(c);

        emq_admin_t *a = NULL;
        ASSERT(emq_admin_new(conf, &a, &err) != EMQ_OK);
        assert_no_secret("the admin error", err.message);
        emq_conf_destroy(conf);
    }
    assert_no_secret("a log line", book->text);
    free(book);
    emq_srv_stop(s);
}

/* A server (or a proxy) that does not know AUTH or HELLO answers with
 * its arguments, the password among them: "unknown command 'AUTH', with
 * args beginning with: 'plain' '<password>'". The error says what
 * failed and never quotes that reply (before, it printed the password in
 * full). A fake peer plays the server. */
TEST(security_auth_reply_quoting_the_password_never_shown) {
    static const struct {
        const char *trigger, *reply, *protocol, *says;
    } cases[] = {
        {"AUTH",
         "-ERR unknown command 'AUTH', with args beginning with: 'plain' "
         "'" SECRET "' \r\n",
         "2", "does not know the command"},
        {"HELLO",
         "-ERR unknown command 'HELLO', with args beginning with: '3' "
         "'AUTH' 'plain' '" SECRET "' \r\n",
         "3", "does not support RESP3"},
        {"AUTH", "-WRONGPASS no such pair: plain " SECRET "\r\n", "2",
         "wrong user name or password"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        emq_peer_opts po = {.mode = EMQ_PEER_REPLY,
                            .trigger = cases[i].trigger,
                            .reply = cases[i].reply};
        emq_peer *peer = emq_peer_start(&po);
        char url[128];
        snprintf(url, sizeof url, "redis://plain:" SECRET "@127.0.0.1:%d",
                 emq_peer_port(peer));
        emq_conf_t *conf = conf_for(url);
        conf_set(conf, "protocol", cases[i].protocol);
        emq_error err;
        emq_conn_t *conn = NULL;
        ASSERT(emq_conn_new(conf, &conn, &err) != EMQ_OK);
        fprintf(stderr, "    %s: %s\n", cases[i].trigger, err.message);
        assert_no_secret("the handshake error", err.message);
        ASSERT_CONTAINS(err.message, cases[i].says);
        emq_conf_destroy(conf);
        emq_peer_stop(peer);
    }
}

/* A URL's user info without ':' may be a password (redis-cli reads it
 * so): a refused authentication never shows it as a user name. */
TEST(security_lone_user_info_never_shown_as_a_user) {
    emq_srv_opts o = {.requirepass = "RightPassword1"};
    emq_srv *s = emq_srv_start(&o);
    char url[128];
    snprintf(url, sizeof url, "redis://" SECRET "@127.0.0.1:%d",
             emq_srv_port(s));
    for (int protocol = 2; protocol <= 3; protocol++) {
        emq_conf_t *conf = conf_for(url);
        conf_set(conf, "protocol", protocol == 2 ? "2" : "3");
        emq_error err;
        emq_conn_t *conn = NULL;
        ASSERT_STATUS(emq_conn_new(conf, &conn, &err), EMQ_EAUTH, &err);
        fprintf(stderr, "    RESP%d: %s\n", protocol, err.message);
        assert_no_secret("the authentication error", err.message);
        emq_conf_destroy(conf);
    }
    emq_srv_stop(s);
}

TEST(security_unreachable_host_with_password_never_shown) {
    int port = emq_free_port(); /* nobody listens there */
    char url[128];
    snprintf(url, sizeof url, "redis://user:" SECRET "@127.0.0.1:%d/3", port);
    emq_conf_t *conf = conf_for(url);
    conf_set(conf, P_RECONNECT_ATTEMPTS, "2");
    conf_set(conf, P_RECONNECT_BASE, "1");
    conf_set(conf, P_RECONNECT_MAX, "2");
    emq_error err;
    emq_conn_t *conn = NULL;
    ASSERT_STATUS(emq_conn_new(conf, &conn, &err), EMQ_EIO, &err);
    assert_no_secret("the refused-connection error", err.message);
    emq_conf_destroy(conf);

    /* A host name that does not resolve. */
    snprintf(url, sizeof url, "redis://user:" SECRET "@no-such-host.invalid:%d",
             port);
    conf = conf_for(url);
    ASSERT(emq_conn_new(conf, &conn, &err) != EMQ_OK);
    assert_no_secret("the resolve error", err.message);
    emq_conf_destroy(conf);

    /* Bad URLs with the password in them. */
    static const char *const bad[] = {
        "redis://u:" SECRET "@h:99999",
        "redis://u:" SECRET "@h!/2",
        "redis://u:" SECRET "?@h:1",
        "rediss://u:" SECRET "@h?tls.verify=maybe",
        SECRET "://h",
    };
    conf = emq_conf_new();
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ASSERT_STATUS(emq_conf_set(conf, P_URL, bad[i], &err), EMQ_EINVAL,
                      &err);
        assert_no_secret("a bad URL's error", err.message);
    }
    emq_conf_destroy(conf);
}

/* Runs fn with fd 2 sent to a file; returns what was written there. */
static void capture_stderr(void (*fn)(const emq_srv *), const emq_srv *s,
                           char *out, size_t size) {
    char path[512];
    snprintf(path, sizeof path, "%s/stderr.txt", emq_test_tmpdir());
    fflush(stderr);
    int saved = dup(2);
    int fd = open(path, O_CREAT | O_TRUNC | O_WRONLY, 0600);
    ASSERT(saved >= 0 && fd >= 0);
    dup2(fd, 2);
    close(fd);
    fn(s);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    FILE *f = fopen(path, "r");
    ASSERT(f != NULL);
    size_t n = fread(out, 1, size - 1, f);
    out[n] = '\0';
    fclose(f);
}

/* A consumer with the default logger (stderr) at debug level: a refused
 * password, then a full run as the ACL worker with a reconnect. */
static void noisy_runs(const emq_srv *s) {
    char url[128];
    snprintf(url, sizeof url, "redis://worker:%s-wrong@127.0.0.1:%d", SECRET,
             emq_srv_port(s));
    emq_conf_t *conf = worker_conf(s, "w2");
    conf_set(conf, P_URL, url);
    emq_consumer_t *c;
    emq_error err;
    ASSERT_OK(emq_consumer_new(conf, never_called, NULL, &c, &err), &err);
    emq_conf_destroy(conf);
    ASSERT_STATUS(emq_consumer_run(c, &err), EMQ_EAUTH, &err);
    fprintf(stderr, "run error: %s\n", err.message);
    emq_consumer_destroy(c);

    conf = worker_conf(s, "w1");
    recorder *r = malloc(sizeof *r);
    ASSERT(r != NULL);
    recorder_init(r);
    r->dead_value = "dead";
    ASSERT_OK(emq_consumer_new(conf, record, r, &c, &err), &err);
    emq_conf_destroy(conf);
    r->consumer = c;
    runner_thread t;
    start_consumer(&t, c);
    wait_for(r, 3, 10000);
    /* Cut the connection: the reconnect logs, with the URL's host. */
    char out[64];
    emq_srv_cmd(s, out, sizeof out, "CLIENT", "KILL", "USER", "worker", NULL);
    emq_consumer_stats st;
    WAIT_UNTIL((emq_consumer_stats_get(c, &st), st.reconnects >= 1), 10000,
               "the consumer to reconnect");
    emq_consumer_stop(c);
    ASSERT_OK(join_consumer(&t), &t.err);
    emq_consumer_destroy(c);
    free(r);
}

TEST_TIMEOUT(security_default_stderr_log_never_shows_password, 40) {
    emq_srv *s = acl_server(NULL);
    acl_fixture(s);
    static char text[65536];
    capture_stderr(noisy_runs, s, text, sizeof text);
    ASSERT_CONTAINS(text, "run error: ");
    ASSERT_CONTAINS(text, "reconnect"); /* the debug log was on stderr */
    assert_no_secret("stderr", text);
    emq_srv_stop(s);
}

TEST(security_conf_reads_back_no_password) {
    emq_conf_t *conf = emq_conf_new();
    ASSERT(conf != NULL);
    conf_set(conf, P_PASSWORD, SECRET);
    char got[512];
    ASSERT_OK(emq_conf_get(conf, P_PASSWORD, got, sizeof got, NULL), NULL);
    ASSERT_EQ_STR(got, "(set)");
    emq_conf_t *copy = emq_conf_dup(conf);
    ASSERT(copy != NULL);
    ASSERT_OK(emq_conf_get(copy, P_PASSWORD, got, sizeof got, NULL), NULL);
    ASSERT_EQ_STR(got, "(set)");
    emq_conf_destroy(copy);
    conf_set(conf, P_URL, "redis://u:" SECRET "@127.0.0.1:6379");
    ASSERT_OK(emq_conf_get(conf, P_URL, got, sizeof got, NULL), NULL);
    ASSERT_NOT_CONTAINS(got, SECRET);
    ASSERT_EQ_STR(got, "redis://u:***@127.0.0.1:6379");
    /* unix:// with an '@' in the socket path, and no password at all. */
    conf_set(conf, P_URL, "unix://:" SECRET "@/tmp/a@b.sock?db=1");
    ASSERT_OK(emq_conf_get(conf, P_URL, got, sizeof got, NULL), NULL);
    ASSERT_EQ_STR(got, "unix://:***@/tmp/a@b.sock?db=1");
    /* A lone user info may be a password (redis-cli reads it so): it is
     * hidden too. */
    conf_set(conf, P_URL, "redis://user@h:1/2");
    ASSERT_OK(emq_conf_get(conf, P_URL, got, sizeof got, NULL), NULL);
    ASSERT_EQ_STR(got, "redis://***@h:1/2");
    emq_conf_destroy(conf);
}

/* ---- the echomq program -------------------------------------------------- */

/* /proc/PID/<what> with NULs turned into spaces. */
static void read_proc(pid_t pid, const char *what, char *out, size_t size) {
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/%s", (int)pid, what);
    FILE *f = fopen(path, "r");
    ASSERT(f != NULL);
    size_t n = fread(out, 1, size - 1, f);
    fclose(f);
    for (size_t i = 0; i < n; i++)
        if (out[i] == '\0')
            out[i] = ' ';
    out[n] = '\0';
}

/* A running `echomq consume` shows no password on its command line,
 * whichever way the URL was given, with a user name or without. */
TEST_TIMEOUT(security_cli_command_line_never_shows_password, 30) {
    emq_srv *s = acl_server(NULL);
    char url[128], inline_url[160];
    snprintf(url, sizeof url, "redis://worker:" SECRET "@127.0.0.1:%d",
             emq_srv_port(s));
    snprintf(inline_url, sizeof inline_url, "--url=%s", url);
    for (int form = 0; form < 2; form++) {
        const char *const *args =
            form == 0 ? CLI_ARGS("consume", "aclq", "-u", url, "-g", "g", "-c",
                                 "w1", "--start", "new", "--block", "100")
                      : CLI_ARGS("consume", "aclq", inline_url, "-g", "g", "-c",
                                 "w1", "--start", "new", "--block", "100");
        int out, err;
        pid_t pid = cli_spawn(NULL, args, NULL, &out, &err);
        int64_t end = cli_ms() + emq_test_ms(5000);
        char reply[64] = "";
        while (cli_ms() < end) {
            emq_srv_cmd(s, reply, sizeof reply, "EXISTS",
                        "emq:{aclq}:lease:g:w1", NULL);
            if (!strcmp(reply, "1"))
                break;
            usleep(20000);
        }
        ASSERT_EQ_STR(reply, "1"); /* it is connected and running */
        char cmdline[4096];
        read_proc(pid, "cmdline", cmdline, sizeof cmdline);
        ASSERT_CONTAINS(cmdline, "consume aclq");
        ASSERT_CONTAINS(cmdline, "@127.0.0.1:");
        assert_no_secret("/proc/PID/cmdline", cmdline);
        kill(pid, SIGTERM);
        ASSERT_EQ_INT(cli_wait(pid, 3000), 0);
        char text[8192];
        ssize_t n = read(err, text, sizeof text - 1);
        text[n > 0 ? n : 0] = '\0';
        assert_no_secret("echomq's stderr", text);
        close(out);
        close(err);
        /* The lease is gone before the next form takes the name. */
        emq_srv_cmd(s, reply, sizeof reply, "DEL", "emq:{aclq}:lease:g:w1",
                    NULL);
    }
    emq_srv_stop(s);
}

/* A refused password: a non-zero exit, a message that says so, and no
 * password on stdout or stderr. */
TEST(security_cli_wrong_password_never_shown) {
    emq_srv *s = acl_server(NULL);
    char url[128];
    snprintf(url, sizeof url, "redis://worker:" SECRET "x@127.0.0.1:%d",
             emq_srv_port(s));
    cli_result r;
    CLI(&r, NULL, "consume", "aclq", "-u", url, "-g", "g", "-c", "w1",
        "--start", "new");
    ASSERT(r.code != 0);
    ASSERT(r.err[0] != '\0');
    assert_no_secret("echomq's stderr", r.err);
    assert_no_secret("echomq's stdout", r.out);
    cli_free(&r);
    CLI(&r, url, "info", "aclq");
    ASSERT(r.code != 0);
    assert_no_secret("echomq's stderr", r.err);
    assert_no_secret("echomq's stdout", r.out);
    cli_free(&r);
    emq_srv_stop(s);
}

/* Without +xautoclaim a consumer still runs, but it can never take over a
 * dead peer's entries: the claim beat says so in the log (at most once a
 * minute) instead of failing silently. */
TEST_TIMEOUT(security_acl_without_xautoclaim_warns, 20) {
    emq_srv *s = acl_server("xautoclaim");
    emq_conf_t *conf = worker_conf(s, "w2");
    conf_set(conf, "claim.interval_ms", "50");
    logbook *book = malloc(sizeof *book);
    ASSERT(book != NULL);
    logbook_init(book);
    emq_conf_set_log(conf, log_to_book, book);
    static recorder r;
    recorder_init(&r);
    emq_consumer_t *c;
    emq_error err;
    ASSERT_OK(emq_consumer_new(conf, record, &r, &c, &err), &err);
    emq_conf_destroy(conf);
    runner_thread t;
    start_consumer(&t, c);
    WAIT_UNTIL(book_has(book, "claim beat failed"), 10000,
               "a claim beat to fail");
    /* Several more beats (nothing counts refused ones): a scaled pause. */
    usleep((useconds_t)emq_test_ms(600) * 1000);
    emq_consumer_stop(c);
    ASSERT_OK(join_consumer(&t), &t.err);
    ASSERT_CONTAINS(book->text, "claim beat failed");
    ASSERT_CONTAINS(book->text, "NOPERM");
    /* Once, not once per beat. */
    const char *first = strstr(book->text, "claim beat failed");
    ASSERT(strstr(first + 1, "claim beat failed") == NULL);
    emq_consumer_destroy(c);
    free(book);
    emq_srv_stop(s);
}

/* ---- delayed entries and idempotency keys under least privilege ------- */

/* docs/SECURITY.md's additions: a producer that delays and sends keys, a
 * worker that may move delayed entries, an operator that cancels. */
#define DELAYER_LINE                                                           \
    "user delayer on >" SECRET                                                 \
    " resetkeys resetchannels -@all +time " FN_PROBE                           \
    "(~emq:{aclq} +xadd +exists) "                                             \
    "(~emq:{aclq} ~emq:{aclq}:delayed ~emq:{aclq}:delayed:* "                  \
    "~emq:{aclq}:dedup:* " FN_ADD ") (~emq:{aclq}:delayed +zadd) "             \
    "(~emq:{aclq}:delayed:entries +hset) (~emq:{aclq}:delayed:seq +incrby) "   \
    "(~emq:{aclq}:dedup:* +get +mget +set +pttl)\n"
#define MOVER_LINE                                                             \
    "user mover on >" SECRET " resetkeys resetchannels -@all "                 \
    "+time +client|setname " FN_PROBE                                          \
    "(~emq:{aclq} +xgroup|create +xreadgroup +xack +xpending +xautoclaim "     \
    "+xclaim +xrange) (~emq:{aclq} ~emq:{aclq}:* " FN_WORKER FN_MOVE ") "      \
    "(~emq:{aclq}:lease:* +get +set +pexpire +pttl +del) "                     \
    "(~emq:{aclq}:reasons:* +hset +hget +hdel) "                               \
    "(~emq:{aclq}:retry:* +zadd +zrem +zscore) "                               \
    "(~emq:{aclq}:dead +xadd) (~emq:{aclq}:priority +get) "                    \
    "(~emq:{aclq} +xadd) "                                                     \
    "(~emq:{aclq}:delayed ~emq:{aclq}:delayed:* +zrangebyscore +zrange "       \
    "+zcard +zrem +hget +hdel) (~emq:{aclq}:delayed:bad +hset)\n"
#define CANCELLER_LINE                                                         \
    "user canceller on >" SECRET " resetkeys resetchannels -@all "             \
    "~emq:{aclq} ~emq:{aclq}:* +@stream +@read " FN_PROBE FN_OPERATOR          \
    "+exists +type +del +time +client|setname +@sortedset +@hash\n"

TEST_TIMEOUT(security_least_privilege_scheduling_roles, 60) {
    emq_srv *s = roles_start(
        WORKER_LINE PRODUCER_LINE DELAYER_LINE MOVER_LINE CANCELLER_LINE);
    cli_result r;
    /* The plain producer may not delay: refused, naming why. */
    CLI(&r, role_url(s, "producer"), "produce", "aclq", "--delay", "10", "n=0");
    ASSERT_EXIT(&r, 1);
    ASSERT_CONTAINS(r.err, "NOPERM");
    cli_free(&r);
    /* The delayer delays and de-duplicates. */
    char handle[64];
    CLI(&r, role_url(s, "delayer"), "produce", "aclq", "--delay", "300",
        "--dedup-key", "one", "--print-ids", "-q", "n=1");
    ASSERT_EXIT(&r, 0);
    snprintf(handle, sizeof handle, "%.*s", (int)strcspn(r.out, "\n"), r.out);
    cli_free(&r);
    CLI(&r, role_url(s, "delayer"), "produce", "aclq", "--delay", "300",
        "--dedup-key", "one", "--print-ids", "-q", "n=1");
    ASSERT_EXIT(&r, 0);
    ASSERT_CONTAINS(r.out, handle);
    cli_free(&r);
    CLI(&r, role_url(s, "delayer"), "produce", "aclq", "--dedup-key", "two",
        "-q", "n=2");
    ASSERT_EXIT(&r, 0);
    cli_free(&r);
    CLI(&r, role_url(s, "delayer"), "produce", "aclq", "--delay", "3600000",
        "--print-ids", "-q", "n=3");
    ASSERT_EXIT(&r, 0);
    snprintf(handle, sizeof handle, "%.*s", (int)strcspn(r.out, "\n"), r.out);
    cli_free(&r);
    /* The least-privilege worker consumes what is in the stream, moves
     * nothing, and says so once, at level info (no NOPERM anywhere). */
    emq_conf_t *conf = conf_for(role_url(s, "worker"));
    conf_set(conf, "queue", "aclq");
    conf_set(conf, "group", "g");
    conf_set(conf, "consumer", "w1");
    conf_set(conf, "start", "head");
    conf_set(conf, "block_ms", "100");
    conf_set(conf, "log.level", "info");
    logbook *book = malloc(sizeof *book);
    ASSERT(book != NULL);
    logbook_init(book);
    emq_conf_set_log(conf, log_to_book, book);
    recorder *rec = malloc(sizeof *rec);
    ASSERT(rec != NULL);
    recorder_init(rec);
    emq_consumer_t *c;
    emq_error err;
    ASSERT_OK(emq_consumer_new(conf, record, rec, &c, &err), &err);
    emq_conf_destroy(conf);
    runner_thread t;
    start_consumer(&t, c);
    wait_for(rec, 1, 10000);
    /* The mover's refusal, said once; then a while for a second saying,
     * or a wrong move of the entry due meanwhile, to show. (A fixed
     * pause alone counted on the refusal coming within it.) */
    WAIT_UNTIL(book_count(book, "moves no delayed entries") >= 1, 10000,
               "the consumer to say it moves no delayed entries");
    usleep((useconds_t)emq_test_ms(800) * 1000); /* the first one is due */
    emq_consumer_stop(c);
    ASSERT_OK(join_consumer(&t), &t.err);
    emq_consumer_destroy(c);
    ASSERT_EQ_SIZE(rec->n, 1);
    ASSERT_EQ_STR(rec->values[0], "2");
    ASSERT_EQ_INT(book_count(book, "moves no delayed entries"), 1);
    ASSERT_NOT_CONTAINS(book->text, "NOPERM");
    /* The mover moves the due one and handles it. */
    CLI(&r, role_url(s, "mover"), "consume", "aclq", "-g", "g", "-c", "m1",
        "--start", "head", "--until-idle", "1000", "-q");
    ASSERT_EXIT(&r, 0);
    ASSERT_EQ_INT(cli_lines(r.out), 1);
    ASSERT_CONTAINS(r.out, "\"n\":\"1\"");
    cli_free(&r);
    /* The canceller takes back the one still waiting. */
    CLI(&r, role_url(s, "canceller"), "cancel", "aclq", handle);
    ASSERT_EXIT(&r, 0);
    ASSERT_CONTAINS(r.out, " removed\n");
    cli_free(&r);
    free(rec);
    free(book);
    emq_srv_stop(s);
}

/* The worker line with what a limited group's consumers need beside it
 * (docs/SECURITY.md): the limits hash read (and seeded), the rate log
 * kept, the stream's last ID read. */
#define LIMITED_WORKER_LINE                                                    \
    "user limited on >" SECRET " resetkeys resetchannels -@all "               \
    "+time +client|setname " FN_PROBE                                          \
    "(~emq:{aclq} +xgroup|create +xreadgroup +xack +xpending +xautoclaim "     \
    "+xclaim +xrange +xrevrange +xread) "                                      \
    "(~emq:{aclq} ~emq:{aclq}:* " FN_WORKER FN_GRANT ") "                      \
    "(~emq:{aclq}:lease:* +get +set +pexpire +pttl +del) "                     \
    "(~emq:{aclq}:reasons:* +hset +hget +hdel) "                               \
    "(~emq:{aclq}:retry:* +zadd +zrem +zscore) "                               \
    "(~emq:{aclq}:dead +xadd) "                                                \
    "(~emq:{aclq}:limits:* +hmget +hget +hsetnx) "                             \
    "(~emq:{aclq}:ratelog:* +zremrangebyscore +zcard +zrange +zadd +pexpire) " \
    "(~emq:{aclq}:lease:* +exists) (~emq:{aclq}:retry:* +zcount) "             \
    "(~emq:{aclq}:priority +get)\n"

/* Asks for one more delivery of each entry's first one; times every
 * call. */
typedef struct limited_calls {
    pthread_mutex_t mu;
    int calls;
    int64_t first_ms, last_ms;
} limited_calls;

static emq_verdict retry_first_once(void *opaque, const emq_entry *e,
                                    char *reason, size_t size) {
    limited_calls *l = opaque;
    pthread_mutex_lock(&l->mu);
    int64_t now = now_ms();
    if (l->calls++ == 0)
        l->first_ms = now;
    l->last_ms = now;
    pthread_mutex_unlock(&l->mu);
    if (e->deliveries == 1 && e->nfields == 1 && e->fields[0].value_len == 1 &&
        e->fields[0].value[0] == '0') {
        snprintf(reason, size, "once more");
        return EMQ_RETRY;
    }
    return EMQ_ACK;
}

TEST_TIMEOUT(security_least_privilege_limited_worker_applies_limits, 60) {
    emq_srv *s = roles_start(LIMITED_WORKER_LINE);
    cli_result r;
    CLI(&r, emq_srv_url(s), "group", "limits", "aclq", "-g", "g", "--rate",
        "5");
    ASSERT_EXIT(&r, 0);
    cli_free(&r);
    CLI_IN(&r, emq_srv_url(s), "0\n1\n2\n3\n4\n5\n6\n7\n", "produce", "aclq",
           "--lines", "-q");
    ASSERT_EXIT(&r, 0);
    cli_free(&r);
    emq_conf_t *conf = conf_for(role_url(s, "limited"));
    conf_set(conf, "queue", "aclq");
    conf_set(conf, "group", "g");
    conf_set(conf, "consumer", "w1");
    conf_set(conf, "start", "head");
    conf_set(conf, "retry.backoff_ms", "0");
    conf_set(conf, "log.level", "debug");
    logbook *book = malloc(sizeof *book);
    ASSERT(book != NULL);
    logbook_init(book);
    emq_conf_set_log(conf, log_to_book, book);
    static limited_calls l = {.mu = PTHREAD_MUTEX_INITIALIZER};
    emq_consumer_t *c;
    emq_error err;
    ASSERT_OK(emq_consumer_new(conf, retry_first_once, &l, &c, &err), &err);
    emq_conf_destroy(conf);
    runner_thread t;
    start_consumer(&t, c);
    int64_t end = now_ms() + emq_test_ms(20000);
    int calls = 0;
    while (calls < 9 && now_ms() < end) {
        usleep(10000);
        pthread_mutex_lock(&l.mu);
        calls = l.calls;
        pthread_mutex_unlock(&l.mu);
    }
    emq_consumer_stop(c);
    ASSERT_OK(join_consumer(&t), &t.err);
    emq_consumer_destroy(c);
    /* Eight entries and one retry, every one handled; at 5 a second the
     * eight new ones take two windows, so the limit was applied. */
    if (l.calls != 9)
        fprintf(stderr, "%s", book->text);
    ASSERT_EQ_INT(l.calls, 9);
    ASSERT(l.last_ms - l.first_ms >= 900);
    /* No command of the worker refused, but the one the consumer lets go
     * by design (a debug line, upkeep.c): publishing the in-hand times of
     * entries held 100 ms or more to the group's inhand hash, which this
     * role may not write; on a loaded machine a handler holds one that
     * long. */
    ASSERT_EQ_INT(book_count(book, "NOPERM"),
                  book_count(book, "publishing in-hand times failed: NOPERM"));
    ASSERT_EQ_INT(book_count(book, "could not be read"), 0);
    char out[64];
    emq_srv_cmd(s, out, sizeof out, "XPENDING", "emq:{aclq}", "g", NULL);
    ASSERT(strncmp(out, "0\n", 2) == 0); /* all acknowledged */
    free(book);
    emq_srv_stop(s);
}

/* A producer and a worker of a queue with priorities (docs/SECURITY.md):
 * the producer holds entries (its script's commands on the held keys,
 * GET of the record at connect); the worker's read takes them (the held
 * keys, the record, the limits hash read, the stream's XADD; its wait,
 * XREAD of the stream and the bell together, needs one selector with
 * both keys). */
#define PRIO_PRODUCER_LINE                                                     \
    "user pproducer on >" SECRET                                               \
    " resetkeys resetchannels -@all +time " FN_PROBE                           \
    "(~emq:{aclq} +xadd +exists) "                                             \
    "(~emq:{aclq} ~emq:{aclq}:delayed ~emq:{aclq}:delayed:* ~emq:{aclq}:held " \
    "~emq:{aclq}:held:* ~emq:{aclq}:priority " FN_ADD ") "                     \
    "(~emq:{aclq}:delayed:entries +hset) (~emq:{aclq}:delayed:seq +incrby) "   \
    "(~emq:{aclq}:held +zadd) (~emq:{aclq}:held:levels +hset) "                \
    "(~emq:{aclq}:held:counts +hincrby) (~emq:{aclq}:held:bell +xadd) "        \
    "(~emq:{aclq}:priority +get +set)\n"
#define PRIO_WORKER_LINE                                                       \
    "user pworker on >" SECRET " resetkeys resetchannels -@all "               \
    "+time +client|setname " FN_PROBE                                          \
    "(~emq:{aclq} +xgroup|create +xreadgroup +xack +xpending +xautoclaim "     \
    "+xclaim +xrange +xrevrange +xadd) "                                       \
    "(~emq:{aclq} ~emq:{aclq}:* " FN_WORKER FN_GRANT ") "                      \
    "(~emq:{aclq}:lease:* +get +set +pexpire +pttl +del) "                     \
    "(~emq:{aclq}:reasons:* +hset +hget +hdel) "                               \
    "(~emq:{aclq}:retry:* +zadd +zrem +zscore) (~emq:{aclq}:dead +xadd) "      \
    "(~emq:{aclq}:limits:* +hmget +hget +hsetnx) "                             \
    "(~emq:{aclq}:ratelog:* +zremrangebyscore +zcard +zrange +zadd +pexpire) " \
    "(~emq:{aclq}:lease:* +exists) (~emq:{aclq}:retry:* +zcount) "             \
    "(~emq:{aclq}:priority +get) "                                             \
    "(~emq:{aclq}:held +zrange +zrem) (~emq:{aclq}:held:levels +hget +hdel) "  \
    "(~emq:{aclq}:held:counts +hincrby +hdel) "                                \
    "(~emq:{aclq}:held:bell +xrevrange) "                                      \
    "(~emq:{aclq} ~emq:{aclq}:held:bell +xread) "                              \
    "(~emq:{aclq}:delayed:entries +hget +hdel) (~emq:{aclq}:delayed:bad +hset)\n"

TEST_TIMEOUT(security_least_privilege_priority_roles, 60) {
    emq_srv *s = roles_start(PRIO_PRODUCER_LINE PRIO_WORKER_LINE);
    cli_result r;
    static const char *const levels[] = {"9", "0", "4"};
    for (int i = 0; i < 3; i++) {
        char value[16];
        snprintf(value, sizeof value, "n=%s", levels[i]);
        CLI(&r, role_url(s, "pproducer"), "produce", "aclq", "--priority",
            levels[i], "-q", value);
        ASSERT_EXIT(&r, 0);
        cli_free(&r);
    }
    /* Given none, on a queue with priorities: held at 5. */
    CLI(&r, role_url(s, "pproducer"), "produce", "aclq", "-q", "n=5");
    ASSERT_EXIT(&r, 0);
    cli_free(&r);
    /* A rate on the group: the limited read's rate log too (before, the
     * documented line stopped the worker at its first read). */
    char out[64];
    emq_srv_cmd(s, out, sizeof out, "HSET", "emq:{aclq}:limits:g", "rate",
                "100", NULL);
    CLI(&r, role_url(s, "pworker"), "consume", "aclq", "-g", "g", "-c", "w1",
        "--start", "head", "--until-idle", "500", "-v");
    ASSERT_EXIT(&r, 0);
    ASSERT_NOT_CONTAINS(r.err, "NOPERM");
    const char *at0 = strstr(r.out, "\"n\":\"0\""),
               *at4 = strstr(r.out, "\"n\":\"4\""),
               *at5 = strstr(r.out, "\"n\":\"5\""),
               *at9 = strstr(r.out, "\"n\":\"9\"");
    ASSERT(at0 && at4 && at5 && at9);
    ASSERT(at0 < at4 && at4 < at5 && at5 < at9);
    cli_free(&r);
    emq_srv_stop(s);
}

/* deliveries.wait_replicas with a worker whose ACL lacks WAIT: the first
 * handout's WAIT is refused, and the consumer stops saying what to grant
 * (before it handed anything out), rather than waiting for ever. */
TEST_TIMEOUT(security_wait_replicas_without_wait_stops_saying_so, 40) {
    emq_srv *s = roles_start(EXACT_WORKER_LINE);
    acl_fixture(s);
    emq_conf_t *conf = worker_conf(s, "w1");
    conf_set(conf, "deliveries.exact", "1");
    conf_set(conf, "deliveries.wait_replicas", "1");
    conf_set(conf, "claim.min_idle_ms", "60000");
    conf_set(conf, "deliveries.wait_timeout_ms", "100");
    static recorder r;
    recorder_init(&r);
    emq_consumer_t *c;
    emq_error err;
    ASSERT_OK(emq_consumer_new(conf, record, &r, &c, &err), &err);
    emq_conf_destroy(conf);
    runner_thread t;
    start_consumer(&t, c);
    emq_status st = join_consumer(&t);
    ASSERT(st != EMQ_OK);
    ASSERT_CONTAINS(t.err.message, "WAIT");
    ASSERT_CONTAINS(t.err.message, "refused");
    ASSERT_EQ_SIZE(r.n, 0);
    emq_consumer_destroy(c);
    emq_srv_stop(s);
}

/* The review's attacks, as the documented roles (Redis 7.0 and later):
 * what a leaked credential of each line may write stops no queue. The
 * limited worker's line writes a limit that is no integer and a rate log
 * member far in the future; the scheduling producer's line schedules a
 * forged entry due first whose payload is not an entry, and squats an
 * idempotency key. Then the limited worker still consumes the plain
 * entries, the mover's line still moves and consumes the delayed ones,
 * and the squatted key's job is added. Before: the worker exited 1, the
 * moves failed for ever, the job was suppressed. */
TEST_TIMEOUT(security_attacks_by_documented_roles_stop_nothing, 90) {
    emq_srv *s = roles_start(LIMITED_WORKER_LINE DELAYER_LINE MOVER_LINE);
    emq_conn_t *lim = connect_url(role_url(s, "limited"));
    CMD_NOERR(lim, "HSETNX", "emq:{aclq}:limits:g", "rate", "0.5");
    CMD_NOERR(lim, "ZADD", "emq:{aclq}:ratelog:g", "99999999999999", "forged");
    emq_conn_destroy(lim);
    emq_conn_t *del = connect_url(role_url(s, "delayer"));
    CMD_NOERR(del, "ZADD", "emq:{aclq}:delayed", "-1", "delayed-900000000001");
    CMD_NOERR(del, "HSET", "emq:{aclq}:delayed:entries", "delayed-900000000001",
              "\x01\x02 not an entry");
    CMD_NOERR(del, "SET", "emq:{aclq}:dedup:pay-1", "0-1");
    emq_conn_destroy(del);
    cli_result r;
    CLI_IN(&r, emq_srv_url(s), "p0\np1\np2\n", "produce", "aclq", "--lines",
           "-q");
    ASSERT_EXIT(&r, 0);
    cli_free(&r);
    CLI(&r, role_url(s, "delayer"), "produce", "aclq", "--delay", "100", "-q",
        "n=d0");
    ASSERT_EXIT(&r, 0);
    cli_free(&r);
    CLI(&r, role_url(s, "delayer"), "produce", "aclq", "--dedup-key", "pay-1",
        "--print-ids", "n=k0");
    ASSERT_EXIT(&r, 0);
    ASSERT(strstr(r.out, "0-1\n") == NULL); /* a new ID, not the squatter's */
    cli_free(&r);
    /* The limited worker: the plain entries and the keyed one. */
    CLI(&r, role_url(s, "limited"), "consume", "aclq", "-g", "g", "-c", "w1",
        "--start", "head", "--until-idle", "800");
    ASSERT_EXIT(&r, 0);
    ASSERT_NOT_CONTAINS(r.err, "not an integer");
    ASSERT_EQ_INT(cli_lines(r.out), 4);
    cli_free(&r);
    /* The mover: the forged entry set aside, the real delayed one moved. */
    usleep(200 * 1000); /* d0 is due */
    CLI(&r, role_url(s, "mover"), "consume", "aclq", "-g", "g", "-c", "w2",
        "--start", "head", "--until-idle", "1500");
    ASSERT_EXIT(&r, 0);
    ASSERT_CONTAINS(r.out, "\"d0\"");
    cli_free(&r);
    ASSERT_EQ_INT(srv_int(s, "HLEN", "emq:{aclq}:delayed:bad"), 1);
    emq_srv_stop(s);
}

/* No documented role can run code of its own (Redis 7.0 and later): the
 * lines grant FCALL of echomq's functions, each role only those it calls,
 * never EVAL, EVALSHA, SCRIPT LOAD or FUNCTION LOAD (the loader's alone);
 * and what they run goes by FCALL alone: a full worker cycle, a scheduled
 * and a keyed entry, and the operator's verbs send no EVAL. Before: every
 * line with scripts granted +eval, and a loop as the worker held the
 * server for every tenant. */
TEST_TIMEOUT(security_documented_roles_run_no_code_of_their_own, 90) {
    emq_srv *s =
        roles_start(WORKER_LINE PRODUCER_LINE OPERATOR_LINE DELAYER_LINE
                        MOVER_LINE CANCELLER_LINE LIMITED_WORKER_LINE
                            PRIO_PRODUCER_LINE PRIO_WORKER_LINE);
    static const char *const users[] = {
        "worker",    "producer", "operator",  "delayer", "mover",
        "canceller", "limited",  "pproducer", "pworker", "loader"};
    for (size_t i = 0; i < sizeof users / sizeof *users; i++) {
        emq_conn_t *u = connect_url(role_url(s, users[i]));
        static const char *const code[][4] = {
            {"EVAL", "while true do end", "0", NULL},
            {"EVAL_RO", "return 1", "0", NULL},
            {"EVALSHA", "e0e1f9fabfc9d4800c877a703b823ac0578ff8db", "0", NULL},
            {"SCRIPT", "LOAD", "return 1", NULL},
        };
        for (size_t k = 0; k < sizeof code / sizeof *code; k++) {
            emq_reply *r = NULL;
            emq_error err;
            int argc = code[k][3] ? 4 : 3;
            ASSERT_OK(emq_conn_command(u, argc, code[k], NULL, &r, &err), &err);
            if (!emq_reply_is_error(r, "NOPERM"))
                FAIL("%s ran %s", users[i], code[k][0]);
            emq_reply_free(r);
        }
        if (strcmp(users[i], "loader") != 0) {
            emq_reply *r = CMD(u, "FUNCTION", "LOAD",
                               "#!lua name=x\n"
                               "redis.register_function('x', function() "
                               "while true do end end)");
            ASSERT(emq_reply_is_error(r, "NOPERM"));
            emq_reply_free(r);
        }
        emq_conn_destroy(u);
    }
    /* Functions of another role are refused too: a worker may not purge
     * the dead letters, nor add entries past the producer's checks. */
    emq_conn_t *w = connect_url(role_url(s, "worker"));
    emq_reply *r = CMD(w, "FCALL", "emq1_dead_purge", "1", "emq:{aclq}:dead");
    ASSERT(emq_reply_is_error(r, "NOPERM"));
    emq_reply_free(r);
    r = CMD(w, "FCALL", "emq1_add", "1", "emq:{aclq}");
    ASSERT(emq_reply_is_error(r, "NOPERM"));
    emq_reply_free(r);
    emq_conn_destroy(w);

    long long evals = emq_srv_calls(s, "eval", NULL);
    worker_full_cycle(s, 0);
    cli_result c;
    CLI(&c, role_url(s, "delayer"), "produce", "aclq", "--delay", "50",
        "--dedup-key", "k1", "-q", "n=1");
    ASSERT_EXIT(&c, 0);
    cli_free(&c);
    CLI(&c, role_url(s, "operator"), "dead", "purge", "aclq", "--yes");
    ASSERT_EXIT(&c, 0);
    cli_free(&c);
    CLI(&c, role_url(s, "operator"), "trim", "aclq", "--acked", "--maxlen",
        "0");
    ASSERT_EXIT(&c, 0);
    cli_free(&c);
    ASSERT_EQ_INT(emq_srv_calls(s, "eval", NULL), evals);
    ASSERT(emq_srv_calls(s, "fcall", NULL) > 10);
    emq_srv_stop(s);
}

/* ---- the role table of docs/SECURITY.md ---------------------------------- */

/* The columns: each documented line, by its user. */
static const struct {
    const char *user, *label;
} table_roles[] = {
    {"worker", "worker"},
    {"limited", "limited worker"},
    {"pworker", "prio worker"},
    {"mover", "mover"},
    {"producer", "producer"},
    {"delayer", "scheduling producer"},
    {"pproducer", "prio producer"},
    {"operator", "operator"},
    {"canceller", "operator + cancel"},
    {"loader", "loader"},
};
#define TABLE_ROLES (sizeof table_roles / sizeof table_roles[0])

/* The rows: each verb as an operator would run it on queue aclq. HANDLE
 * is a delayed entry's handle the setup made. */
static const char *const table_verbs[][12] = {
    {"produce", "produce", "aclq", "n=1", NULL},
    {"produce --delay", "produce", "aclq", "--delay", "600000", "n=1", NULL},
    {"produce --dedup-key", "produce", "aclq", "--dedup-key", "k1", "n=1",
     NULL},
    {"consume", "consume", "aclq", "-g", "g", "-c", "w", "--start", "head",
     "--until-idle", "300"},
    {"tail", "tail", "aclq", "-n", "1", NULL},
    {"info", "info", "aclq", NULL},
    {"ls", "ls", NULL},
    {"pending", "pending", "aclq", "-g", "g", NULL},
    {"dead list", "dead", "list", "aclq", NULL},
    {"dead requeue", "dead", "requeue", "aclq", "--all", NULL},
    {"dead purge", "dead", "purge", "aclq", "--yes", NULL},
    {"trim --acked", "trim", "aclq", "--acked", NULL},
    {"cancel", "cancel", "aclq", "HANDLE", NULL},
    {"group create", "group", "create", "aclq", "-g", "g2", "--start", "new",
     NULL},
    {"group setid", "group", "setid", "aclq", "-g", "g", "--to", "head", NULL},
    {"group limits", "group", "limits", "aclq", "-g", "g", "--rate", "50",
     NULL},
    {"consumers prune", "consumers", "prune", "aclq", "-g", "g", "--idle", "0",
     NULL},
    {"priorities", "priorities", "aclq", NULL},
    {"group destroy", "group", "destroy", "aclq", "-g", "g", "--yes", NULL},
    {"functions ls", "functions", "ls", NULL},
    {"functions load", "functions", "load", NULL},
    /* Last: a priority makes the queue one with priorities (the setup
     * gives it one before the next row whatever the role could do). */
    {"produce --priority", "produce", "aclq", "--priority", "3", "n=1", NULL},
    {"consume, with priorities", "consume", "aclq", "-g", "g", "-c", "w",
     "--start", "head", "--until-idle", "300"},
};
#define TABLE_VERBS (sizeof table_verbs / sizeof table_verbs[0])

/* The queue each role's column starts from (as the default user): a
 * group, three entries, a dead letter, a delayed entry (its handle into
 * handle). */
static void table_setup(emq_srv *s, char *handle, size_t size) {
    char out[256];
    emq_srv_cmd(s, out, sizeof out, "FLUSHALL", NULL);
    emq_srv_cmd(s, out, sizeof out, "XGROUP", "CREATE", "emq:{aclq}", "g", "$",
                "MKSTREAM", NULL);
    for (int i = 0; i < 3; i++)
        emq_srv_cmd(s, out, sizeof out, "XADD", "emq:{aclq}", "*", "n", "1",
                    NULL);
    const char *dead[] = {"XADD", "emq:{aclq}:dead",
                          "*",    "emq.id",
                          "1-1",  "emq.group",
                          "g",    "emq.consumer",
                          "c",    "emq.deliveries",
                          "3",    "emq.reason",
                          "x",    "n",
                          "1",    NULL};
    emq_srv_cmdv(s, out, sizeof out, dead);
    cli_result r;
    CLI(&r, emq_srv_url(s), "produce", "aclq", "--delay", "600000",
        "--print-ids", "-q", "n=c");
    ASSERT_EXIT(&r, 0);
    snprintf(handle, size, "%.*s", (int)strcspn(r.out, "\n"), r.out);
    cli_free(&r);
}

/* What one run said: yes (exit 0, nothing refused), partly (exit 0, a
 * refusal told on the way: what the role may not do is left out), no
 * (refused). Anything else fails the test: the setup, not the ACL. */
static const char *table_cell(const cli_result *r, const char *user,
                              const char *verb) {
    int refused = strstr(r->err, "NOPERM") || strstr(r->err, "ACL failure") ||
                  strstr(r->err, "can't run this command") ||
                  strstr(r->err, "can't access at least one of the keys") ||
                  strstr(r->err, "no permissions") ||
                  strstr(r->err, "the server refused");
    if (r->code == 0)
        return refused ? "partly" : "yes";
    if (refused)
        return "no";
    FAIL("%s: %s failed without a refusal (exit %d): %s", user, verb, r->code,
         r->err);
    return "";
}

/* docs/SECURITY.md's role table: each verb run as each documented line
 * (Redis 7.0 and later), the outcome written into the table, which must
 * match the docs' (EMQ_WRITE_ROLE_TABLE=1 writes it there instead). */
TEST_TIMEOUT(security_role_table_matches_the_docs, 240) {
    emq_srv *s =
        roles_start(WORKER_LINE PRODUCER_LINE OPERATOR_LINE DELAYER_LINE
                        MOVER_LINE CANCELLER_LINE LIMITED_WORKER_LINE
                            PRIO_PRODUCER_LINE PRIO_WORKER_LINE);
    static const char *cells[TABLE_VERBS][TABLE_ROLES];
    for (size_t c = 0; c < TABLE_ROLES; c++) {
        char handle[64];
        table_setup(s, handle, sizeof handle);
        for (size_t v = 0; v < TABLE_VERBS; v++) {
            const char *argv[12] = {0};
            for (size_t k = 1; k < 12 && table_verbs[v][k]; k++)
                argv[k - 1] = strcmp(table_verbs[v][k], "HANDLE") == 0
                                  ? handle
                                  : table_verbs[v][k];
            cli_result r;
            if (strcmp(table_verbs[v][0], "consume, with priorities") == 0) {
                CLI(&r, emq_srv_url(s), "produce", "aclq", "--priority", "2",
                    "-q", "n=p");
                ASSERT_EXIT(&r, 0);
                cli_free(&r);
            }
            cli_run_in(&r, role_url(s, table_roles[c].user), NULL, 0, 20000,
                       argv);
            cells[v][c] =
                table_cell(&r, table_roles[c].user, table_verbs[v][0]);
            cli_free(&r);
        }
    }
    static char table[16384];
    size_t n = 0;
    n += (size_t)snprintf(table + n, sizeof table - n, "| verb |");
    for (size_t c = 0; c < TABLE_ROLES; c++)
        n += (size_t)snprintf(table + n, sizeof table - n, " %s |",
                              table_roles[c].label);
    n += (size_t)snprintf(table + n, sizeof table - n, "\n| --- |");
    for (size_t c = 0; c < TABLE_ROLES; c++)
        n += (size_t)snprintf(table + n, sizeof table - n, " --- |");
    n += (size_t)snprintf(table + n, sizeof table - n, "\n");
    for (size_t v = 0; v < TABLE_VERBS; v++) {
        n += (size_t)snprintf(table + n, sizeof table - n, "| `%s` |",
                              table_verbs[v][0]);
        for (size_t c = 0; c < TABLE_ROLES; c++)
            n += (size_t)snprintf(table + n, sizeof table - n, " %s |",
                                  cells[v][c]);
        n += (size_t)snprintf(table + n, sizeof table - n, "\n");
    }
    ASSERT(n < sizeof table);
    emq_srv_stop(s);

    static const char begin[] =
        "<!-- role table: written by the test "
        "security_role_table_matches_the_docs; do not edit -->\n";
    static const char end[] = "<!-- end of role table -->\n";
    const char *path = EMQ_SOURCE_DIR "/docs/SECURITY.md";
    FILE *f = fopen(path, "r");
    ASSERT(f != NULL);
    static char doc[262144];
    size_t len = fread(doc, 1, sizeof doc - 1, f);
    fclose(f);
    doc[len] = '\0';
    char *from = strstr(doc, begin), *to = from ? strstr(from, end) : NULL;
    if (from == NULL || to == NULL)
        FAIL("%s has no role table region", path);
    from += sizeof begin - 1;
    if ((size_t)(to - from) == n && memcmp(from, table, n) == 0)
        return;
    const char *write = getenv("EMQ_WRITE_ROLE_TABLE");
    if (write == NULL || strcmp(write, "1") != 0)
        FAIL("docs/SECURITY.md's role table differs from what the roles "
             "did (EMQ_WRITE_ROLE_TABLE=1 writes it):\n%s",
             table);
    f = fopen(path, "w");
    ASSERT(f != NULL);
    ASSERT(fwrite(doc, 1, (size_t)(from - doc), f) == (size_t)(from - doc));
    ASSERT(fwrite(table, 1, n, f) == n);
    ASSERT(fputs(to, f) >= 0);
    ASSERT(fclose(f) == 0);
}

/* The priority lines' attacks, as those roles (Redis 7.0 and later): the
 * priority worker's line floods the held counts with 5,000 fields
 * (HINCRBY, all its line allows there) and schedules a retry at +inf;
 * the priority producer's line holds a forged entry due first (score -1)
 * whose payload is not an entry, at a level that is no level. Then the
 * operator's info answers from the ten levels' counts alone (never the
 * whole hash), and the priority worker consumes every real entry, the
 * forged payload set aside: nothing stopped. */
TEST_TIMEOUT(security_priority_attacks_by_documented_roles_stop_nothing, 90) {
    emq_srv *s = roles_start(PRIO_PRODUCER_LINE PRIO_WORKER_LINE OPERATOR_LINE);
    cli_result r;
    CLI_IN(&r, role_url(s, "pproducer"), "p0\np1\np2\n", "produce", "aclq",
           "--lines", "--priority", "4", "-q");
    ASSERT_EXIT(&r, 0);
    cli_free(&r);
    emq_conn_t *w = connect_url(role_url(s, "pworker"));
    for (int i = 0; i < 5000; i++) {
        char field[16];
        snprintf(field, sizeof field, "f%d", i);
        CMD_NOERR(w, "HINCRBY", "emq:{aclq}:held:counts", field, "1");
    }
    CMD_NOERR(w, "ZADD", "emq:{aclq}:retry:g", "+inf", "1-1");
    emq_conn_destroy(w);
    emq_conn_t *pp = connect_url(role_url(s, "pproducer"));
    CMD_NOERR(pp, "ZADD", "emq:{aclq}:held", "-1", "delayed-900000000002");
    CMD_NOERR(pp, "HSET", "emq:{aclq}:held:levels", "delayed-900000000002",
              "high");
    CMD_NOERR(pp, "HSET", "emq:{aclq}:delayed:entries", "delayed-900000000002",
              "\x01 not an entry");
    emq_conn_destroy(pp);
    long long hgetalls = emq_srv_calls(s, "hgetall", NULL);
    CLI(&r, role_url(s, "operator"), "info", "aclq", "--json");
    ASSERT_EXIT(&r, 0);
    ASSERT_CONTAINS(r.out, "\"priorities\":{");
    cli_free(&r);
    ASSERT_EQ_INT(emq_srv_calls(s, "hgetall", NULL), hgetalls);
    CLI(&r, role_url(s, "pworker"), "consume", "aclq", "-g", "g", "-c", "w1",
        "--start", "head", "--until-idle", "800");
    ASSERT_EXIT(&r, 0);
    ASSERT_EQ_INT(cli_lines(r.out), 3);
    cli_free(&r);
    char out[64];
    emq_srv_cmd(s, out, sizeof out, "HEXISTS", "emq:{aclq}:delayed:bad",
                "delayed-900000000002", NULL);
    ASSERT_EQ_STR(out, "1");
    emq_srv_stop(s);
}
