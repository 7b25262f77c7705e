/* SPDX-License-Identifier: BSD-3-Clause */
/* test_producer_trim.c: the producer's trimming policy, NOMKSTREAM, and a
 * transport failure in the middle of a batch, against a real redis-server.
 *
 * Trimming rides on XADD (no XTRIM is ever sent): trim.maxlen trims to
 * exactly n entries, while with trim.approx 1 the server removes whole
 * radix-tree nodes only, so MAXLEN ~ 2 on 6 entries removes nothing
 * (an approximate trim never splits a node) and with 10-entry nodes ~ 20 keeps
 * 20 to 29; trim.limit bounds what one XADD removes; trim.minid drops entries
 * below an ID. A policy the server would refuse is refused by emq_producer_new
 * with EMQ_EINVAL naming the property, before any connection. With
 * producer.nomkstream a missing stream fails every entry with a clear
 * message and creates nothing. A connection cut by the fake proxy while a
 * batch is in flight fails the batch with a transport status whose message
 * says how many entries were confirmed; those entries are in the stream,
 * and the next call reconnects. Every allocation of producer creation and
 * of a batch that grows the scratch argv can fail: the call returns
 * EMQ_ENOMEM, leaks nothing, and the producer stays usable.
 */
#include "integ/tally_helpers.h"
#include "harness/fakepeer.h"
#include "base/base.h"

#include <stdlib.h>

/* A producer on queue with the given property/value pairs (NULL-ended). */
static emq_producer_t *producer_with(const emq_srv *s, const char *url,
                                     const char *queue, ...) {
    emq_conf_t *conf = conf_for(url ? url : emq_srv_url(s));
    conf_set(conf, "queue", queue);
    va_list ap;
    va_start(ap, queue);
    for (const char *name; (name = va_arg(ap, const char *)) != NULL;)
        conf_set(conf, name, va_arg(ap, const char *));
    va_end(ap);
    emq_producer_t *p = NULL;
    emq_error err;
    memset(&err, 0, sizeof err);
    ASSERT_OK(emq_producer_new(conf, &p, &err), &err);
    emq_conf_destroy(conf);
    return p;
}

/* Adds n entries {"n": "<first + i>"} one XADD at a time. */
static void add_n(emq_producer_t *p, int first, int n) {
    for (int i = 0; i < n; i++) {
        char value[16];
        int len = snprintf(value, sizeof value, "%d", first + i);
        emq_field f = {"n", 1, value, (size_t)len};
        emq_error err;
        memset(&err, 0, sizeof err);
        ASSERT_OK(emq_produce(p, &f, 1, NULL, &err), &err);
    }
}

static long long xlen(const emq_srv *s, const char *key) {
    char out[64];
    ASSERT_EQ_INT(emq_srv_cmd(s, out, sizeof out, "XLEN", key, NULL), ':');
    return strtoll(out, NULL, 10);
}

TEST(producer_trim_maxlen_exact_keeps_the_last_n) {
    emq_srv *s = emq_srv_start(NULL);
    emq_producer_t *p = producer_with(s, NULL, "mx", "trim.maxlen", "3", NULL);
    add_n(p, 0, 10);
    ASSERT_EQ_INT(xlen(s, "emq:{mx}"), 3);
    char out[1024];
    ASSERT_EQ_INT(
        emq_srv_cmd(s, out, sizeof out, "XRANGE", "emq:{mx}", "-", "+", NULL),
        '*');
    ASSERT_CONTAINS(out, "\n7\n");
    ASSERT_CONTAINS(out, "\n9");
    ASSERT_NOT_CONTAINS(out, "\n6\n");

    /* A batch trims on each XADD too, and the stream ends at n. */
    enum { N = 50 };
    emq_message msgs[N];
    emq_field f = {"n", 1, "b", 1};
    for (int i = 0; i < N; i++)
        msgs[i] = (emq_message){&f, 1, NULL};
    size_t written = 0;
    emq_error err;
    memset(&err, 0, sizeof err);
    ASSERT_OK(emq_produce_batch(p, msgs, N, NULL, &written, &err), &err);
    ASSERT_EQ_SIZE(written, N);
    ASSERT_EQ_INT(xlen(s, "emq:{mx}"), 3);
    /* Trimming travelled inside XADD. */
    ASSERT_EQ_INT(cmdstat_calls(s, "xtrim"), 0);
    ASSERT_EQ_INT(cmdstat_calls(s, "xadd"), 10 + N);
    emq_producer_destroy(p);

    /* trim.maxlen 0 keeps nothing, not even the entry just added. */
    p = producer_with(s, NULL, "mx0", "trim.maxlen", "0", NULL);
    add_n(p, 0, 2);
    ASSERT_EQ_INT(xlen(s, "emq:{mx0}"), 0);
    emq_producer_destroy(p);
    emq_srv_stop(s);
}

TEST(producer_trim_maxlen_approx_keeps_whole_nodes) {
    emq_srv *s = emq_srv_start(NULL);
    /* Default nodes of 100 entries: MAXLEN ~ 2 on 6 entries removes
     * nothing: an approximate trim removes whole nodes only. */
    emq_producer_t *p = producer_with(s, NULL, "ap", "trim.maxlen", "2",
                                      "trim.approx", "1", NULL);
    add_n(p, 0, 6);
    ASSERT_EQ_INT(xlen(s, "emq:{ap}"), 6);
    emq_producer_destroy(p);

    /* Nodes of 10: ~ 20 removes whole nodes, keeping 20 to 29, while the
     * exact policy keeps exactly 20. */
    char out[256];
    ASSERT_EQ_INT(emq_srv_cmd(s, out, sizeof out, "CONFIG", "SET",
                              "stream-node-max-entries", "10", NULL),
                  '+');
    p = producer_with(s, NULL, "ap10", "trim.maxlen", "20", "trim.approx", "1",
                      NULL);
    add_n(p, 0, 55);
    long long n = xlen(s, "emq:{ap10}");
    if (n < 20 || n >= 30)
        FAIL("MAXLEN ~ 20 with 10-entry nodes left %lld entries", n);
    emq_producer_destroy(p);
    p = producer_with(s, NULL, "ex10", "trim.maxlen", "20", NULL);
    add_n(p, 0, 55);
    ASSERT_EQ_INT(xlen(s, "emq:{ex10}"), 20);
    emq_producer_destroy(p);
    emq_srv_stop(s);
}

TEST(producer_trim_limit_bounds_what_one_xadd_removes) {
    emq_srv *s = emq_srv_start(NULL);
    char out[256];
    ASSERT_EQ_INT(emq_srv_cmd(s, out, sizeof out, "CONFIG", "SET",
                              "stream-node-max-entries", "10", NULL),
                  '+');
    emq_producer_t *plain = producer_with(s, NULL, "lim", NULL);
    add_n(plain, 0, 100); /* ten full nodes */
    emq_producer_destroy(plain);
    /* MAXLEN ~ 0 would remove every node; LIMIT 10 stops after one. */
    emq_producer_t *p = producer_with(s, NULL, "lim", "trim.maxlen", "0",
                                      "trim.approx", "1", "trim.limit", "10",
                                      NULL);
    add_n(p, 100, 1);
    ASSERT_EQ_INT(xlen(s, "emq:{lim}"), 91);
    add_n(p, 101, 1);
    ASSERT_EQ_INT(xlen(s, "emq:{lim}"), 82);
    emq_producer_destroy(p);
    emq_srv_stop(s);
}

TEST(producer_trim_minid_drops_entries_below_the_id) {
    emq_srv *s = emq_srv_start(NULL);
    enum { N = 10 };
    emq_message msgs[N];
    char ids_text[N][16];
    emq_field f = {"n", 1, "v", 1};
    for (int i = 0; i < N; i++) {
        snprintf(ids_text[i], sizeof ids_text[i], "%d-1", i + 1);
        msgs[i] = (emq_message){&f, 1, ids_text[i]};
    }
    emq_producer_t *plain = producer_with(s, NULL, "mi", NULL);
    emq_id ids[N];
    size_t written = 0;
    emq_error err;
    memset(&err, 0, sizeof err);
    ASSERT_OK(emq_produce_batch(plain, msgs, N, ids, &written, &err), &err);
    ASSERT_EQ_STR(ids[9].str, "10-1");
    emq_producer_destroy(plain);

    /* Exact: entries below 5-0 go, 5-1 .. 10-1 and the new one stay. */
    emq_producer_t *p = producer_with(s, NULL, "mi", "trim.minid", "5", NULL);
    emq_message m = {&f, 1, "11-1"};
    ASSERT_OK(emq_produce_batch(p, &m, 1, ids, NULL, &err), &err);
    ASSERT_EQ_STR(ids[0].str, "11-1");
    ASSERT_EQ_INT(xlen(s, "emq:{mi}"), 7);
    char out[256];
    ASSERT_EQ_INT(emq_srv_cmd(s, out, sizeof out, "XRANGE", "emq:{mi}", "-",
                              "+", "COUNT", "1", NULL),
                  '*');
    ASSERT_CONTAINS(out, "5-1");
    emq_producer_destroy(p);

    /* Approximate: the whole stream is one node, so nothing goes. */
    p = producer_with(s, NULL, "mi", "trim.minid", "9-0", "trim.approx", "1",
                      NULL);
    m.id = "12-1";
    ASSERT_OK(emq_produce_batch(p, &m, 1, NULL, NULL, &err), &err);
    ASSERT_EQ_INT(xlen(s, "emq:{mi}"), 8);
    emq_producer_destroy(p);
    emq_srv_stop(s);
}

/* A conf with queue "bad" plus pairs that emq_producer_new must refuse
 * with EMQ_EINVAL whose message contains want. */
static void refused(const emq_srv *s, const char *want, const char *n1,
                    const char *v1, const char *n2, const char *v2) {
    emq_conf_t *conf = conf_for(emq_srv_url(s));
    conf_set(conf, "queue", "bad");
    conf_set(conf, n1, v1);
    if (n2)
        conf_set(conf, n2, v2);
    emq_producer_t *p = (emq_producer_t *)(uintptr_t)1;
    emq_error err;
    memset(&err, 0, sizeof err);
    emq_status st = emq_producer_new(conf, &p, &err);
    emq_conf_destroy(conf);
    if (st == EMQ_OK) {
        emq_producer_destroy(p);
        FAIL("%s=%s %s=%s was accepted", n1, v1, n2 ? n2 : "", v2 ? v2 : "");
    }
    ASSERT_STATUS(st, EMQ_EINVAL, &err);
    ASSERT(p == NULL);
    ASSERT_CONTAINS(err.message, want);
}

TEST(producer_trim_policy_refused_before_connecting) {
    emq_srv *s = emq_srv_start(NULL);
    long long conns0 = info_number(s, "stats", "total_connections_received");
    refused(s, "trim.minid", "trim.maxlen", "5", "trim.minid", "3");
    refused(s, "trim.minid 'abc'", "trim.minid", "abc", NULL, NULL);
    refused(s, "trim.minid '1-2-3'", "trim.minid", "1-2-3", NULL, NULL);
    refused(s, "trim.minid '-'", "trim.minid", "-", NULL, NULL);
    refused(s, "trim.limit", "trim.maxlen", "5", "trim.limit", "10");
    refused(s, "trim.limit", "trim.minid", "5", "trim.limit", "0");
    refused(s, "trim.approx", "trim.approx", "1", NULL, NULL);
    refused(s, "trim.limit", "trim.approx", "1", "trim.limit", "10");
    /* Only our own second INFO connected. */
    ASSERT_EQ_INT(
        info_number(s, "stats", "total_connections_received") - conns0, 1);

    /* Numbers the server refuses never get into a conf. */
    static const char *const bad[][2] = {
        {"trim.maxlen", "-1"},          {"trim.maxlen", "ten"},
        {"trim.limit", "-1"},           {"trim.approx", "2"},
        {"producer.nomkstream", "yes"},
    };
    emq_conf_t *conf = emq_conf_new();
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        emq_error err;
        memset(&err, 0, sizeof err);
        ASSERT_STATUS(emq_conf_set(conf, bad[i][0], bad[i][1], &err),
                      EMQ_EINVAL, &err);
        ASSERT_CONTAINS(err.message, bad[i][0]);
        char buf[32];
        ASSERT_OK(emq_conf_get(conf, bad[i][0], buf, sizeof buf, &err), &err);
        ASSERT(strcmp(buf, bad[i][1]) != 0);
    }
    emq_conf_destroy(conf);
    emq_srv_stop(s);
}

TEST(producer_nomkstream_missing_stream_creates_nothing) {
    emq_srv *s = emq_srv_start(NULL);
    emq_producer_t *p = producer_with(s, NULL, "nm", "producer.nomkstream", "1",
                                      "trim.maxlen", "100", NULL);
    emq_field f = {"n", 1, "1", 1};
    emq_id id;
    emq_error err;
    memset(&err, 0, sizeof err);
    ASSERT_STATUS(emq_produce(p, &f, 1, &id, &err), EMQ_ESERVER, &err);
    ASSERT_EQ_STR(err.message, "stream 'emq:{nm}' does not exist and "
                               "producer.nomkstream is set");
    ASSERT_EQ_STR(id.str, "");
    char out[256];
    emq_srv_cmd(s, out, sizeof out, "EXISTS", "emq:{nm}", NULL);
    ASSERT_EQ_STR(out, "0");

    /* A batch: every entry fails with "", nothing is created. */
    emq_message msgs[3] = {{&f, 1, NULL}, {&f, 1, NULL}, {&f, 1, NULL}};
    emq_id ids[3];
    for (int i = 0; i < 3; i++)
        snprintf(ids[i].str, sizeof ids[i].str, "unset");
    size_t written = 99;
    memset(&err, 0, sizeof err);
    ASSERT_STATUS(emq_produce_batch(p, msgs, 3, ids, &written, &err),
                  EMQ_ESERVER, &err);
    ASSERT_CONTAINS(err.message, "entry 0");
    ASSERT_CONTAINS(err.message, "does not exist and producer.nomkstream");
    ASSERT_EQ_SIZE(written, 0);
    for (int i = 0; i < 3; i++)
        ASSERT_EQ_STR(ids[i].str, "");
    emq_srv_cmd(s, out, sizeof out, "EXISTS", "emq:{nm}", NULL);
    ASSERT_EQ_STR(out, "0");

    /* Once the stream exists, the same producer adds to it. */
    ASSERT_EQ_INT(emq_srv_cmd(s, out, sizeof out, "XADD", "emq:{nm}", "*",
                              "made", "by-admin", NULL),
                  '$');
    ASSERT_OK(emq_produce_batch(p, msgs, 3, ids, &written, &err), &err);
    ASSERT_EQ_SIZE(written, 3);
    ASSERT_EQ_INT(xlen(s, "emq:{nm}"), 4);

    /* A key of another type is still WRONGTYPE, not "does not exist". */
    emq_srv_cmd(s, out, sizeof out, "SET", "emq:{nmw}", "x", NULL);
    emq_producer_t *pw =
        producer_with(s, NULL, "nmw", "producer.nomkstream", "1", NULL);
    ASSERT_STATUS(emq_produce(pw, &f, 1, &id, &err), EMQ_ESERVER, &err);
    ASSERT_CONTAINS(err.message, "WRONGTYPE");
    emq_producer_destroy(pw);
    emq_producer_destroy(p);
    emq_srv_stop(s);
}

/* ---- a transport failure in the middle of a batch ---------------------- */

#define CUT_N 400000

typedef struct batch_run {
    pthread_t thread;
    emq_producer_t *p;
    const emq_message *msgs;
    emq_id *ids;
    size_t written;
    emq_status st;
    emq_error err;
} batch_run;

static void *run_batch(void *arg) {
    batch_run *b = arg;
    b->st =
        emq_produce_batch(b->p, b->msgs, CUT_N, b->ids, &b->written, &b->err);
    return NULL;
}

TEST_TIMEOUT(producer_batch_cut_mid_flight_reports_confirmed_count, 60) {
    emq_srv *s = emq_srv_start(NULL);
    emq_peer_opts po = {.mode = EMQ_PEER_PROXY,
                        .upstream_port = emq_srv_port(s)};
    emq_peer *proxy = emq_peer_start(&po);
    emq_producer_t *p = producer_with(s, emq_peer_url(proxy), "cut",
                                      "producer.window", "64",
                                      "reconnect.backoff_min_ms", "10", NULL);
    emq_message *msgs = calloc(CUT_N, sizeof *msgs);
    emq_id *ids = calloc(CUT_N, sizeof *ids);
    ASSERT(msgs && ids);
    emq_field f = {"data", 4, "0123456789abcdef", 16};
    for (size_t i = 0; i < CUT_N; i++)
        msgs[i] = (emq_message){&f, 1, NULL};

    batch_run b;
    memset(&b, 0, sizeof b);
    b.p = p;
    b.msgs = msgs;
    b.ids = ids;
    ASSERT(pthread_create(&b.thread, NULL, run_batch, &b) == 0);
    int64_t end = now_ms() + emq_test_ms(20000);
    while (xlen(s, "emq:{cut}") < 2000 && now_ms() < end)
        usleep(1000);
    emq_peer_drop(proxy);
    pthread_join(b.thread, NULL);

    if (b.st == EMQ_OK)
        FAIL("the batch of %d finished before the cut; make it larger", CUT_N);
    if (b.st == EMQ_ESERVER || b.st == EMQ_EINVAL)
        FAIL("want a transport status, got %s: %s", emq_status_name(b.st),
             b.err.message);
    ASSERT_EQ_INT(b.err.code, b.st);
    ASSERT(b.written >= 1);
    ASSERT(b.written < CUT_N);
    char want[160];
    snprintf(want, sizeof want,
             "%zu of %d entries confirmed added; entries from index %zu on "
             "may or may not have been added",
             b.written, CUT_N, b.written);
    ASSERT_CONTAINS(b.err.message, want);
    /* Every confirmed entry has its ID and is in the stream; the others
     * have "" whatever became of them. */
    long long stored = xlen(s, "emq:{cut}");
    ASSERT((long long)b.written <= stored);
    for (size_t i = 0; i < CUT_N; i++) {
        if (i < b.written && ids[i].str[0] == '\0')
            FAIL("confirmed entry %zu has no ID", i);
        if (i >= b.written && ids[i].str[0] != '\0')
            FAIL("unconfirmed entry %zu has ID %s", i, ids[i].str);
    }
    char out[512];
    ASSERT_EQ_INT(emq_srv_cmd(s, out, sizeof out, "XRANGE", "emq:{cut}",
                              ids[b.written - 1].str, ids[b.written - 1].str,
                              NULL),
                  '*');
    ASSERT_CONTAINS(out, ids[b.written - 1].str);

    /* The next call reconnects and adds. */
    emq_id id;
    emq_error err;
    memset(&err, 0, sizeof err);
    ASSERT_OK(emq_produce(p, &f, 1, &id, &err), &err);
    ASSERT(id.str[0] != '\0');
    ASSERT_EQ_INT(xlen(s, "emq:{cut}"), stored + 1);

    free(ids);
    free(msgs);
    emq_producer_destroy(p);
    emq_peer_stop(proxy);
    emq_srv_stop(s);
}

/* An empty batch sends nothing; a message without fields refuses the whole
 * batch before anything is sent. */
TEST(producer_batch_with_an_empty_message_sends_nothing) {
    emq_srv *s = emq_srv_start(NULL);
    emq_producer_t *p = producer_with(s, NULL, "em", NULL);
    emq_field f = {"n", 1, "1", 1};
    emq_message msgs[3] = {{&f, 1, NULL}, {NULL, 0, NULL}, {&f, 1, NULL}};
    emq_id ids[3];
    size_t written = 99;
    emq_error err;
    memset(&err, 0, sizeof err);
    ASSERT_OK(emq_produce_batch(p, msgs, 0, ids, &written, &err), &err);
    ASSERT_EQ_SIZE(written, 0);
    ASSERT_STATUS(emq_produce_batch(p, msgs, 3, ids, &written, &err),
                  EMQ_EINVAL, &err);
    ASSERT_CONTAINS(err.message, "entry 1 has no fields");
    ASSERT_EQ_SIZE(written, 0);
    for (int i = 0; i < 3; i++)
        ASSERT_EQ_STR(ids[i].str, "");
    char out[64];
    emq_srv_cmd(s, out, sizeof out, "EXISTS", "emq:{em}", NULL);
    ASSERT_EQ_STR(out, "0");
    emq_producer_destroy(p);
    emq_srv_stop(s);
}

TEST(producer_survives_every_allocation_failure) {
    emq_srv *s = emq_srv_start(NULL);
    emq_conf_t *conf = conf_for(emq_srv_url(s));
    conf_set(conf, "queue", "oom");
    conf_set(conf, "trim.maxlen", "1000");
    conf_set(conf, "trim.approx", "1");
    conf_set(conf, "trim.limit", "50");
    /* Connected by emq_producer_new, so its thread allocates nothing
     * while an allocation of the calls below is failed on purpose. */
    conf_set(conf, "producer.connect", "eager");
    conf_set(conf, "reconnect.backoff_min_ms", "5");
    emq_producer_t *p = NULL;
    emq_error err;
    int n = 1;
    for (;; n++) {
        memset(&err, 0, sizeof err);
        emq__alloc_fail_at((uint64_t)n);
        emq_status st = emq_producer_new(conf, &p, &err);
        emq__alloc_fail_at(0);
        if (st == EMQ_OK)
            break;
        ASSERT_STATUS(st, EMQ_ENOMEM, &err);
        ASSERT(p == NULL);
        if (n > 1000)
            FAIL("emq_producer_new still failing after %d allocations", n);
    }
    emq_conf_destroy(conf);

    /* 40 pairs: more than the scratch argv holds at first, so the first
     * batch grows it. */
    enum { PAIRS = 40, N = 5 };
    emq_field fields[PAIRS];
    char names[PAIRS][8];
    for (int i = 0; i < PAIRS; i++) {
        int len = snprintf(names[i], sizeof names[i], "f%d", i);
        fields[i] = (emq_field){names[i], (size_t)len, "v", 1};
    }
    emq_message msgs[N];
    for (int i = 0; i < N; i++)
        msgs[i] = (emq_message){fields, PAIRS, NULL};
    emq_id ids[N];
    /* Fail allocation n of the batch, for every n the batch makes. A
     * failure while a reply is read breaks the connection, so entries may
     * be stored whose confirmation was lost: the stream holds at least the
     * confirmed ones, and the producer's thread reconnects (the test waits
     * for it before the next failure, so the failure it injects is the
     * batch's, not the reconnect's). */
    size_t written = 0, total = 0;
    for (n = 1;; n++) {
        memset(&err, 0, sizeof err);
        uint64_t calls0 = emq__alloc_calls();
        emq__alloc_fail_at((uint64_t)n);
        emq_status st = emq_produce_batch(p, msgs, N, ids, &written, &err);
        emq__alloc_fail_at(0);
        total += written;
        if (emq__alloc_calls() - calls0 < (uint64_t)n) { /* none failed */
            ASSERT_OK(st, &err);
            break;
        }
        ASSERT_STATUS(st, EMQ_ENOMEM, &err);
        for (size_t i = written; i < N; i++)
            ASSERT_EQ_STR(ids[i].str, "");
        if (n > 1000)
            FAIL("the batch still failing after %d allocations", n);
        int64_t end = now_ms() + emq_test_ms(5000);
        size_t w1 = 0;
        while (emq_produce_batch(p, msgs, 1, ids, &w1, &err) != EMQ_OK &&
               now_ms() < end)
            usleep(2000);
        ASSERT_EQ_SIZE(w1, 1);
        total += w1;
    }
    ASSERT(n > 2);
    ASSERT_EQ_SIZE(written, N);
    char out[64];
    emq_srv_cmd(s, out, sizeof out, "XLEN", "emq:{oom}", NULL);
    ASSERT(strtoll(out, NULL, 10) >= (long long)total);
    emq_producer_destroy(p);
    emq_srv_stop(s);
}
