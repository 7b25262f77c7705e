/* SPDX-License-Identifier: BSD-3-Clause */
/* test_producer.c: the producer (XADD single and pipelined batches)
 * against a real redis-server.
 *
 * One entry comes back with an ID that XRANGE shows with byte-exact binary
 * field names and values (NUL, CR, LF, 0xff). A batch of 10,000 entries
 * returns 10,000 strictly increasing IDs. In a batch where entry 3 carries
 * an explicit ID below the stream's top, the call fails with EMQ_ESERVER
 * naming index 3 and the server's text, ids[3] is "" and every other entry
 * is written. A key of another type gives EMQ_ESERVER with WRONGTYPE, a
 * server over maxmemory EMQ_ESERVER with OOM, and a queue name with braces
 * is refused by emq_producer_new with EMQ_EINVAL before connecting.
 */
#include "integ/tally_helpers.h"

#include <stdlib.h>

/* Parses "ms-seq" (both parts required) into two numbers. */
static void parse_id(const char *id, unsigned long long *ms,
                     unsigned long long *seq) {
    char *end;
    *ms = strtoull(id, &end, 10);
    if (end == id || *end != '-')
        FAIL("not a stream ID: \"%s\"", id);
    const char *s = end + 1;
    *seq = strtoull(s, &end, 10);
    if (end == s || *end != '\0')
        FAIL("not a stream ID: \"%s\"", id);
}

static int id_less(const char *a, const char *b) {
    unsigned long long am, as, bm, bs;
    parse_id(a, &am, &as);
    parse_id(b, &bm, &bs);
    return am < bm || (am == bm && as < bs);
}

TEST(producer_single_entry_binary_fields_round_trip) {
    emq_srv *s = emq_srv_start(NULL);
    emq_producer_t *p = producer_for(s, "bin");
    static const char name1[] = "k\0e\r\ny\xff";
    static const char value1[] = "\0\r\n\xff-v\n";
    static const char name2[] = "plain";
    static const char value2[] = "\xff\xfe\x00\x01";
    emq_field f[2] = {
        {name1, sizeof name1 - 1, value1, sizeof value1 - 1},
        {name2, sizeof name2 - 1, value2, sizeof value2 - 1},
    };
    emq_id id;
    memset(&id, 0, sizeof id);
    emq_error err;
    memset(&err, 0, sizeof err);
    ASSERT_OK(emq_produce(p, f, 2, &id, &err), &err);
    unsigned long long ms, seq;
    parse_id(id.str, &ms, &seq);
    ASSERT(ms > 0);

    emq_conn_t *conn = connect_url(emq_srv_url(s));
    emq_reply *r = CMD(conn, "XRANGE", "emq:{bin}", "-", "+");
    ASSERT_EQ_INT(emq_reply_kind(r), EMQ_REPLY_ARRAY);
    ASSERT_EQ_SIZE(emq_reply_len(r), 1);
    const emq_reply *entry = emq_reply_at(r, 0);
    ASSERT_REPLY_TEXT(emq_reply_at(entry, 0), EMQ_REPLY_STRING, id.str);
    const emq_reply *fields = emq_reply_at(entry, 1);
    ASSERT_EQ_SIZE(emq_reply_len(fields), 4);
    for (size_t i = 0; i < 2; i++) {
        size_t n;
        const char *t = emq_reply_str(emq_reply_at(fields, 2 * i), &n);
        ASSERT_EQ_MEM(t, n, f[i].name, f[i].name_len);
        t = emq_reply_str(emq_reply_at(fields, 2 * i + 1), &n);
        ASSERT_EQ_MEM(t, n, f[i].value, f[i].value_len);
    }
    emq_reply_free(r);
    emq_conn_destroy(conn);
    emq_producer_destroy(p);
    emq_srv_stop(s);
}

#define BATCH_N 10000

TEST(producer_batch_of_ten_thousand_returns_increasing_ids) {
    emq_srv *s = emq_srv_start(NULL);
    emq_producer_t *p = producer_for(s, "big");
    emq_message *msgs = calloc(BATCH_N, sizeof *msgs);
    emq_field *fields = calloc(BATCH_N, sizeof *fields);
    char(*values)[16] = calloc(BATCH_N, sizeof *values);
    emq_id *ids = calloc(BATCH_N, sizeof *ids);
    ASSERT(msgs && fields && values && ids);
    for (int i = 0; i < BATCH_N; i++) {
        int len = snprintf(values[i], sizeof values[i], "%d", i);
        fields[i] = (emq_field){"n", 1, values[i], (size_t)len};
        msgs[i] = (emq_message){&fields[i], 1, NULL};
    }
    long long cmds0 = info_number(s, "stats", "total_commands_processed");
    size_t written = 0;
    emq_error err;
    memset(&err, 0, sizeof err);
    int64_t t0 = now_ms();
    ASSERT_OK(emq_produce_batch(p, msgs, BATCH_N, ids, &written, &err), &err);
    ASSERT(now_ms() - t0 < emq_test_ms(10000));
    ASSERT_EQ_SIZE(written, BATCH_N);
    for (int i = 1; i < BATCH_N; i++)
        if (!id_less(ids[i - 1].str, ids[i].str))
            FAIL("ids[%d] \"%s\" is not above ids[%d] \"%s\"", i, ids[i].str,
                 i - 1, ids[i - 1].str);
    /* One XADD per entry and nothing else (plus our first INFO). */
    ASSERT_EQ_INT(info_number(s, "stats", "total_commands_processed") - cmds0,
                  BATCH_N + 1);
    char out[256];
    emq_srv_cmd(s, out, sizeof out, "XLEN", "emq:{big}", NULL);
    ASSERT_EQ_STR(out, "10000");
    /* The last ID returned is the stream's last entry, holding "9999". */
    ASSERT_EQ_INT(emq_srv_cmd(s, out, sizeof out, "XREVRANGE", "emq:{big}", "+",
                              "-", "COUNT", "1", NULL),
                  '*');
    ASSERT_CONTAINS(out, ids[BATCH_N - 1].str);
    ASSERT_CONTAINS(out, "\n9999");
    free(ids);
    free(values);
    free(fields);
    free(msgs);
    emq_producer_destroy(p);
    emq_srv_stop(s);
}

/* Entry 3 of 6 has an ID below the top; window is producer.window. */
static void low_id_batch(emq_srv *s, const char *queue, const char *window) {
    emq_conf_t *conf = conf_for(emq_srv_url(s));
    conf_set(conf, "queue", queue);
    conf_set(conf, "producer.window", window);
    emq_producer_t *p = NULL;
    emq_error err;
    memset(&err, 0, sizeof err);
    ASSERT_OK(emq_producer_new(conf, &p, &err), &err);
    emq_conf_destroy(conf);
    enum { N = 6 };
    emq_message msgs[N];
    emq_field fields[N];
    char values[N][16];
    emq_id ids[N];
    for (int i = 0; i < N; i++) {
        int len = snprintf(values[i], sizeof values[i], "e%d", i);
        fields[i] = (emq_field){"n", 1, values[i], (size_t)len};
        msgs[i] = (emq_message){&fields[i], 1, i == 3 ? "1-1" : NULL};
        snprintf(ids[i].str, sizeof ids[i].str, "unset");
    }
    size_t written = 99;
    memset(&err, 0, sizeof err);
    ASSERT_STATUS(emq_produce_batch(p, msgs, N, ids, &written, &err),
                  EMQ_ESERVER, &err);
    ASSERT_EQ_INT(err.code, EMQ_ESERVER);
    if (!strstr(err.message, "entry 3") && !strstr(err.message, "index 3"))
        FAIL("the error does not name index 3: %s", err.message);
    ASSERT_CONTAINS(err.message, "equal or smaller");
    ASSERT_EQ_SIZE(written, N - 1);
    ASSERT_EQ_STR(ids[3].str, "");
    for (int i = 0; i < N; i++)
        if (i != 3) {
            unsigned long long ms, seq;
            parse_id(ids[i].str, &ms, &seq);
        }
    ASSERT(id_less(ids[2].str, ids[4].str));
    char out[1024], key[64];
    snprintf(key, sizeof key, "emq:{%s}", queue);
    emq_srv_cmd(s, out, sizeof out, "XLEN", key, NULL);
    ASSERT_EQ_STR(out, "5");
    ASSERT_EQ_INT(
        emq_srv_cmd(s, out, sizeof out, "XRANGE", key, "-", "+", NULL), '*');
    ASSERT_NOT_CONTAINS(out, "e3");
    ASSERT_CONTAINS(out, "e5");
    /* The producer is still in step with its connection. */
    emq_field f = {"n", 1, "after", 5};
    emq_id id;
    ASSERT_OK(emq_produce(p, &f, 1, &id, &err), &err);
    ASSERT(id_less(ids[5].str, id.str));
    emq_producer_destroy(p);
}

TEST(producer_batch_with_low_explicit_id_fails_that_entry_only) {
    emq_srv *s = emq_srv_start(NULL);
    low_id_batch(s, "low", "256"); /* one window */
    low_id_batch(s, "low2", "2");  /* entry 3 in the second window */
    low_id_batch(s, "low1", "1");  /* one command at a time */
    emq_srv_stop(s);
}

TEST(producer_wrongtype_key_is_eserver) {
    emq_srv *s = emq_srv_start(NULL);
    char out[256];
    emq_srv_cmd(s, out, sizeof out, "SET", "emq:{wt}", "x", NULL);
    emq_producer_t *p = producer_for(s, "wt");
    emq_field f = {"n", 1, "1", 1};
    emq_id id;
    emq_error err;
    memset(&err, 0, sizeof err);
    ASSERT_STATUS(emq_produce(p, &f, 1, &id, &err), EMQ_ESERVER, &err);
    ASSERT_CONTAINS(err.message, "WRONGTYPE");
    ASSERT_EQ_STR(id.str, "");

    emq_message msgs[3] = {{&f, 1, NULL}, {&f, 1, NULL}, {&f, 1, NULL}};
    emq_id ids[3];
    size_t written = 99;
    memset(&err, 0, sizeof err);
    ASSERT_STATUS(emq_produce_batch(p, msgs, 3, ids, &written, &err),
                  EMQ_ESERVER, &err);
    ASSERT_CONTAINS(err.message, "WRONGTYPE");
    ASSERT_EQ_SIZE(written, 0);
    for (int i = 0; i < 3; i++)
        ASSERT_EQ_STR(ids[i].str, "");
    emq_srv_cmd(s, out, sizeof out, "GET", "emq:{wt}", NULL);
    ASSERT_EQ_STR(out, "x");
    emq_producer_destroy(p);
    emq_srv_stop(s);
}

TEST(producer_bad_queue_name_refused_before_connecting) {
    emq_srv *s = emq_srv_start(NULL);
    long long conns0 = info_number(s, "stats", "total_connections_received");
    static const char *const bad[] = {"a{b}", "{jobs}", "jobs}"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        emq_conf_t *conf = conf_for(emq_srv_url(s));
        emq_error err;
        memset(&err, 0, sizeof err);
        if (emq_conf_set(conf, "queue", bad[i], &err) == EMQ_OK) {
            emq_producer_t *p = (emq_producer_t *)(uintptr_t)1;
            memset(&err, 0, sizeof err);
            emq_status st = emq_producer_new(conf, &p, &err);
            if (st == EMQ_OK) {
                emq_producer_destroy(p);
                FAIL("queue name '%s' was accepted", bad[i]);
            }
            ASSERT(p == NULL);
        }
        emq_conf_destroy(conf);
        ASSERT_EQ_INT(err.code, EMQ_EINVAL);
        ASSERT_CONTAINS(err.message, "queue");
        ASSERT_CONTAINS(err.message, bad[i]);
    }
    /* Only our own second INFO connected. */
    ASSERT_EQ_INT(
        info_number(s, "stats", "total_connections_received") - conns0, 1);
    emq_srv_stop(s);
}

TEST_TIMEOUT(producer_over_maxmemory_is_eserver_oom, 20) {
    emq_srv *s = emq_srv_start(NULL);
    emq_producer_t *p = producer_for(s, "oom");
    static char big[4096];
    memset(big, 'z', sizeof big);
    emq_field f = {"blob", 4, big, sizeof big};
    emq_error err;
    memset(&err, 0, sizeof err);
    for (int i = 0; i < 10; i++)
        ASSERT_OK(emq_produce(p, &f, 1, NULL, &err), &err);
    char out[256];
    ASSERT_EQ_INT(emq_srv_cmd(s, out, sizeof out, "CONFIG", "SET",
                              "maxmemory-policy", "noeviction", NULL),
                  '+');
    ASSERT_EQ_INT(emq_srv_cmd(s, out, sizeof out, "CONFIG", "SET", "maxmemory",
                              "1mb", NULL),
                  '+');
    emq_status st = EMQ_OK;
    int added = 0;
    for (; added < 4000; added++) { /* at most 16 MB */
        memset(&err, 0, sizeof err);
        st = emq_produce(p, &f, 1, NULL, &err);
        if (st != EMQ_OK)
            break;
    }
    ASSERT_STATUS(st, EMQ_ESERVER, &err);
    ASSERT_CONTAINS(err.message, "OOM");
    /* What was added before stays. */
    emq_srv_cmd(s, out, sizeof out, "XLEN", "emq:{oom}", NULL);
    ASSERT_EQ_INT(strtoll(out, NULL, 10), 10 + added);
    /* The producer stays usable once memory is available again. */
    emq_srv_cmd(s, out, sizeof out, "CONFIG", "SET", "maxmemory", "0", NULL);
    ASSERT_OK(emq_produce(p, &f, 1, NULL, &err), &err);
    emq_producer_destroy(p);
    emq_srv_stop(s);
}
