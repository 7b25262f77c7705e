/* SPDX-License-Identifier: BSD-3-Clause */
/* test_consumer_poison.c: giving up on poison entries (max_deliveries),
 * against a real redis-server.
 *
 * An entry whose handler always answers EMQ_RETRY is redelivered by the
 * claim beat until its delivery count reaches max_deliveries, then moved
 * to the dead-letter stream emq:{<queue>}:dead exactly once, with its
 * origin (emq.id, emq.group, emq.consumer, emq.deliveries = the server's
 * count, emq.reason = the handler's last reason) followed by its original
 * fields, and acknowledged. EMQ_DEAD moves it at once. Two consumers
 * racing on the same entries, or recovery running again, never duplicate a
 * dead letter. An entry delivered more than max_deliveries times without
 * any answer (a crashing handler) is dead-lettered without calling the
 * handler, with the recorded reason or "delivered N times without an
 * acknowledgement".
 */
#include "integ/inspect_conn_helpers.h"

#define Q_STREAM "emq:{jobs}"
#define Q_DEAD "emq:{jobs}:dead"

/* Checks the layout of one dead letter: origin fields first, in order,
 * then the entry's own fields {"n": value}. deliveries NULL: any. */
static void check_dead_letter(const emq_reply *entry, const char *id,
                              const char *consumer, const char *deliveries,
                              const char *reason, const char *value) {
    const emq_reply *f = emq_reply_at(entry, 1);
    ASSERT_EQ_SIZE(emq_reply_len(f), 12);
    const char *names[] = {"emq.id",         "emq.group",  "emq.consumer",
                           "emq.deliveries", "emq.reason", "n"};
    const char *values[] = {id, "g", consumer, deliveries, reason, value};
    for (size_t i = 0; i < 6; i++) {
        char buf[300];
        ASSERT_EQ_STR(reply_text(emq_reply_at(f, 2 * i), buf, sizeof buf),
                      names[i]);
        if (values[i])
            ASSERT_EQ_STR(
                reply_text(emq_reply_at(f, 2 * i + 1), buf, sizeof buf),
                values[i]);
    }
}

static emq_conf_t *poison_conf(const emq_srv *s, const char *name,
                               const char *min_idle) {
    emq_conf_t *conf = consumer_conf(s, "jobs", "g", name, "new");
    conf_set(conf, "max_deliveries", "3");
    conf_set(conf, "claim.min_idle_ms", min_idle);
    conf_set(conf, "claim.interval_ms", "20");
    conf_set(conf, "retry.backoff_ms", "50"); /* retries come back soon */
    conf_set(conf, "retry.backoff_max_ms", "200");
    return conf;
}

/* XAUTOCLAIM calls the server has run (each claim beat runs one): waiting
 * for a few more shows that beats went by, where a second dead letter
 * would have been written. */
static long long claim_calls(emq_conn_t *adm) {
    long long calls = 0, usec = 0;
    cmdstat(adm, "xautoclaim", &calls, &usec);
    return calls;
}

TEST(poison_retry_until_max_then_dead_letter_once) {
    emq_srv *s = emq_srv_start(NULL);
    emq_conn_t *adm = admin_connect(s);
    CMD_NOERR(adm, "XGROUP", "CREATE", Q_STREAM, "g", "$", "MKSTREAM");
    static recorder r;
    recorder_init(&r);
    r.retry_value = "v1";
    emq_consumer_t *c = recording_consumer(poison_conf(s, "w", "100"), &r);
    runner_thread t;
    start_consumer(&t, c);
    produce_n(s, "jobs", "v", 3);
    emq_id ids[3];
    ASSERT_EQ_SIZE(stream_ids(adm, Q_STREAM, ids, 3), 3);
    WAIT_UNTIL(CMD_INT(adm, "XLEN", Q_DEAD) == 1 &&
                   pending_total(adm, Q_STREAM, "g") == 0,
               5000, "one dead letter and an empty pending list");
    long long beats = claim_calls(adm); /* more beats: still exactly one */
    WAIT_UNTIL(claim_calls(adm) >= beats + 3, 5000, "three more claim beats");
    ASSERT_OK(stop_consumer(&t), &t.err);
    ASSERT_EQ_INT(CMD_INT(adm, "XLEN", Q_DEAD), 1);
    emq_reply *dead = CMD(adm, "XRANGE", Q_DEAD, "-", "+");
    check_dead_letter(emq_reply_at(dead, 0), ids[1].str, "w", "3",
                      "cannot handle v1 yet", "v1");
    emq_reply_free(dead);
    /* The handler saw v1 three times, with counts 1, 2, 3. */
    int seen = 0;
    for (size_t i = 0; i < r.n; i++)
        if (!strcmp(r.values[i], "v1"))
            ASSERT_EQ_INT(r.deliveries[i], ++seen);
    ASSERT_EQ_INT(seen, 3);
    ASSERT_EQ_SIZE(r.n, 5);
    emq_consumer_stats st;
    emq_consumer_stats_get(c, &st);
    ASSERT_EQ_INT(st.dead_lettered, 1);
    ASSERT_EQ_INT(st.retried, 3);
    ASSERT_EQ_INT(st.acked, 2);
    /* The failure reason on record is gone with the entry. */
    ASSERT_EQ_INT(CMD_INT(adm, "EXISTS", "emq:{jobs}:reasons:g"), 0);
    emq_consumer_destroy(c);
    emq_conn_destroy(adm);
    emq_srv_stop(s);
}

TEST(poison_dead_verdict_moves_at_once) {
    emq_srv *s = emq_srv_start(NULL);
    emq_conn_t *adm = admin_connect(s);
    CMD_NOERR(adm, "XGROUP", "CREATE", Q_STREAM, "g", "$", "MKSTREAM");
    static recorder r;
    recorder_init(&r);
    r.dead_value = "v0";
    emq_consumer_t *c = recording_consumer(poison_conf(s, "w", "3600000"), &r);
    runner_thread t;
    start_consumer(&t, c);
    produce_n(s, "jobs", "v", 2);
    emq_id ids[2];
    ASSERT_EQ_SIZE(stream_ids(adm, Q_STREAM, ids, 2), 2);
    WAIT_UNTIL(CMD_INT(adm, "XLEN", Q_DEAD) == 1 &&
                   pending_total(adm, Q_STREAM, "g") == 0,
               3000, "the dead letter");
    ASSERT_OK(stop_consumer(&t), &t.err);
    ASSERT_EQ_SIZE(r.n, 2);
    emq_reply *dead = CMD(adm, "XRANGE", Q_DEAD, "-", "+");
    ASSERT_EQ_SIZE(emq_reply_len(dead), 1);
    check_dead_letter(emq_reply_at(dead, 0), ids[0].str, "w", "1", "poison v0",
                      "v0");
    emq_reply_free(dead);
    emq_consumer_stats st;
    emq_consumer_stats_get(c, &st);
    ASSERT_EQ_INT(st.dead_lettered, 1);
    ASSERT_EQ_INT(st.acked, 1);
    emq_consumer_destroy(c);
    emq_conn_destroy(adm);
    emq_srv_stop(s);
}

/* The dead-letter script's mark ("<id>:dead" in the reasons hash, the
 * dead letters' last ID before a wide entry's own XADD) is a value a
 * worker's credential can write: one that is no ID is none, and the
 * entry is dead-lettered once. Before: XRANGE failed on it ("Invalid
 * stream ID") and the entry never left the pending list. */
TEST(poison_forged_dead_mark_is_no_mark) {
    emq_srv *s = emq_srv_start(NULL);
    emq_conn_t *adm = admin_connect(s);
    CMD_NOERR(adm, "XGROUP", "CREATE", Q_STREAM, "g", "$", "MKSTREAM");
    CMD_NOERR(adm, "HSET", "emq:{jobs}:reasons:g", "7-1:dead", "garbage");
    CMD_NOERR(adm, "HSET", "emq:{jobs}:reasons:g", "7-2:dead", "0-0");
    static recorder r;
    recorder_init(&r);
    r.dead_value = "v";
    emq_consumer_t *c = recording_consumer(poison_conf(s, "w", "3600000"), &r);
    runner_thread t;
    start_consumer(&t, c);
    WAIT_UNTIL(client_id_by_name(s, "w", 1) >= 0, 5000, "the consumer's read");
    CMD_NOERR(adm, "XADD", Q_STREAM, "7-1", "n", "v");
    CMD_NOERR(adm, "XADD", Q_STREAM, "7-2", "n", "v");
    WAIT_UNTIL(CMD_INT(adm, "XLEN", Q_DEAD) == 2 &&
                   pending_total(adm, Q_STREAM, "g") == 0,
               5000, "both dead letters");
    ASSERT_OK(stop_consumer(&t), &t.err);
    ASSERT_EQ_INT(CMD_INT(adm, "HLEN", "emq:{jobs}:reasons:g"), 0);
    emq_consumer_destroy(c);
    emq_conn_destroy(adm);
    emq_srv_stop(s);
}

/* n entries {"n": "v<i>"} pending for "dead" with delivery count 10 and
 * 600 s idle, as a handler that crashed its process ten times leaves them. */
static void crashed_entries(emq_conn_t *adm, int n) {
    CMD_NOERR(adm, "XGROUP", "CREATE", Q_STREAM, "g", "$", "MKSTREAM");
    char count[16];
    snprintf(count, sizeof count, "%d", n);
    long long got = CMD_INT(
        adm, "EVAL",
        "for i = 0, tonumber(ARGV[1]) - 1 do redis.call('XADD', KEYS[1], "
        "'*', 'n', 'v' .. i) end\n"
        "local r = redis.call('XREADGROUP', 'GROUP', 'g', 'dead', 'COUNT', "
        "ARGV[1], 'STREAMS', KEYS[1], '>')\n"
        "for _, e in ipairs(r[1][2]) do redis.call('XCLAIM', KEYS[1], 'g', "
        "'dead', 0, e[1], 'IDLE', 600000, 'RETRYCOUNT', 10, 'JUSTID') end\n"
        "return #r[1][2]",
        "1", Q_STREAM, count);
    ASSERT_EQ_INT(got, n);
}

TEST(poison_no_answer_dead_lettered_without_handler) {
    emq_srv *s = emq_srv_start(NULL);
    emq_conn_t *adm = admin_connect(s);
    crashed_entries(adm, 1);
    emq_id id;
    ASSERT_EQ_SIZE(stream_ids(adm, Q_STREAM, &id, 1), 1);
    char owner[64];
    long long count;
    pending_entry(adm, Q_STREAM, "g", id.str, owner, sizeof owner, &count);
    ASSERT_EQ_INT(count, 10);
    static recorder r;
    recorder_init(&r);
    emq_consumer_t *c = recording_consumer(poison_conf(s, "live", "100"), &r);
    runner_thread t;
    start_consumer(&t, c);
    WAIT_UNTIL(CMD_INT(adm, "XLEN", Q_DEAD) == 1 &&
                   pending_total(adm, Q_STREAM, "g") == 0,
               3000, "the dead letter");
    ASSERT_OK(stop_consumer(&t), &t.err);
    ASSERT_EQ_SIZE(r.n, 0); /* never handed to the handler */
    emq_reply *dead = CMD(adm, "XRANGE", Q_DEAD, "-", "+");
    ASSERT_EQ_SIZE(emq_reply_len(dead), 1);
    const emq_reply *f = emq_reply_at(emq_reply_at(dead, 0), 1);
    char deliveries[32], reason[200], want[200];
    ASSERT(field_of(f, "emq.deliveries", deliveries, sizeof deliveries));
    ASSERT(atoll(deliveries) >= 11); /* 10, plus the claim */
    snprintf(want, sizeof want, "delivered %s times without an acknowledgement",
             deliveries);
    ASSERT(field_of(f, "emq.reason", reason, sizeof reason));
    ASSERT_EQ_STR(reason, want);
    check_dead_letter(emq_reply_at(dead, 0), id.str, "live", NULL, NULL, "v0");
    emq_reply_free(dead);
    emq_consumer_stats st;
    emq_consumer_stats_get(c, &st);
    ASSERT_EQ_INT(st.dead_lettered, 1);
    ASSERT_EQ_INT(st.delivered, 0);
    emq_consumer_destroy(c);
    emq_conn_destroy(adm);
    emq_srv_stop(s);
}

TEST(poison_no_answer_uses_recorded_reason) {
    emq_srv *s = emq_srv_start(NULL);
    emq_conn_t *adm = admin_connect(s);
    CMD_NOERR(adm, "XGROUP", "CREATE", Q_STREAM, "g", "$", "MKSTREAM");
    /* Consumer a fails v0 once (the reason is recorded), then stops. */
    static recorder ra;
    recorder_init(&ra);
    ra.retry_value = "v0";
    emq_consumer_t *a = recording_consumer(poison_conf(s, "a", "3600000"), &ra);
    runner_thread ta;
    start_consumer(&ta, a);
    produce_n(s, "jobs", "v", 1);
    emq_id id;
    ASSERT_EQ_SIZE(stream_ids(adm, Q_STREAM, &id, 1), 1);
    WAIT_UNTIL(CMD_INT(adm, "HEXISTS", "emq:{jobs}:reasons:g", id.str) == 1,
               3000, "the failure reason on record");
    ASSERT_OK(stop_consumer(&ta), &ta.err);
    ASSERT_EQ_SIZE(ra.n, 1);
    emq_consumer_destroy(a);
    ASSERT_EQ_INT(pending_of(adm, Q_STREAM, "g", "a"), 1);
    /* Then it is delivered many more times without an answer. */
    emq_reply *cl = CMD(adm, "XCLAIM", Q_STREAM, "g", "dead", "0", id.str,
                        "IDLE", "600000", "RETRYCOUNT", "10", "JUSTID");
    ASSERT_EQ_SIZE(emq_reply_len(cl), 1);
    emq_reply_free(cl);
    static recorder r;
    recorder_init(&r);
    emq_consumer_t *c = recording_consumer(poison_conf(s, "live", "100"), &r);
    runner_thread t;
    start_consumer(&t, c);
    WAIT_UNTIL(CMD_INT(adm, "XLEN", Q_DEAD) == 1 &&
                   pending_total(adm, Q_STREAM, "g") == 0,
               3000, "the dead letter");
    ASSERT_OK(stop_consumer(&t), &t.err);
    ASSERT_EQ_SIZE(r.n, 0);
    emq_reply *dead = CMD(adm, "XRANGE", Q_DEAD, "-", "+");
    check_dead_letter(emq_reply_at(dead, 0), id.str, "live", NULL,
                      "cannot handle v0 yet", "v0");
    emq_reply_free(dead);
    emq_consumer_destroy(c);
    emq_conn_destroy(adm);
    emq_srv_stop(s);
}

/* Runs two consumers with the same (tiny) min idle on the queue until
 * nothing is pending; checks there is exactly one dead letter per produced
 * entry (and, with no_handler, that no handler saw any), then runs
 * recovery again and checks again. */
static void race_and_check(emq_srv *s, emq_conn_t *adm, recorder *ra,
                           recorder *rb, int n, int no_handler) {
    emq_consumer_t *a = recording_consumer(poison_conf(s, "a", "100"), ra);
    emq_consumer_t *b = recording_consumer(poison_conf(s, "b", "100"), rb);
    runner_thread ta, tb;
    start_consumer(&ta, a);
    start_consumer(&tb, b);
    WAIT_UNTIL(group_done(adm, Q_STREAM, "g"), 10000,
               "every entry delivered and none pending");
    long long beats = claim_calls(adm);
    WAIT_UNTIL(claim_calls(adm) >= beats + 4, 5000, "four more claim beats");
    ASSERT_OK(stop_consumer(&ta), &ta.err);
    ASSERT_OK(stop_consumer(&tb), &tb.err);
    /* Entries delivered more than max times never reach a handler. */
    if (no_handler)
        ASSERT_EQ_SIZE(ra->n + rb->n, 0);
    ASSERT_EQ_INT(CMD_INT(adm, "XLEN", Q_DEAD), n);
    emq_consumer_stats sa, sb;
    emq_consumer_stats_get(a, &sa);
    emq_consumer_stats_get(b, &sb);
    ASSERT_EQ_INT(sa.dead_lettered + sb.dead_lettered, n);
    emq_consumer_destroy(a);
    emq_consumer_destroy(b);
    /* Recovery again (self-drain and beats of a restarted consumer). */
    static recorder rc;
    recorder_init(&rc);
    emq_consumer_t *again = recording_consumer(poison_conf(s, "a", "100"), &rc);
    runner_thread tc;
    beats = claim_calls(adm);
    start_consumer(&tc, again);
    WAIT_UNTIL(claim_calls(adm) >= beats + 3, 5000,
               "the restarted consumer's claim beats");
    ASSERT_OK(stop_consumer(&tc), &tc.err);
    emq_consumer_destroy(again);
    ASSERT_EQ_INT(CMD_INT(adm, "XLEN", Q_DEAD), n);
    /* One dead letter per entry: emq.id values are exactly the stream's. */
    emq_id *ids = calloc((size_t)n, sizeof *ids);
    ASSERT(ids != NULL);
    ASSERT_EQ_SIZE(stream_ids(adm, Q_STREAM, ids, (size_t)n), (size_t)n);
    emq_reply *dead = CMD(adm, "XRANGE", Q_DEAD, "-", "+");
    ASSERT_EQ_SIZE(emq_reply_len(dead), (size_t)n);
    char *seen = calloc((size_t)n, 1);
    ASSERT(seen != NULL);
    for (size_t i = 0; i < (size_t)n; i++) {
        char id[EMQ_ID_MAX];
        ASSERT(field_of(emq_reply_at(emq_reply_at(dead, i), 1), "emq.id", id,
                        sizeof id));
        size_t k = 0;
        while (k < (size_t)n && strcmp(ids[k].str, id))
            k++;
        ASSERT(k < (size_t)n);
        ASSERT_EQ_INT(seen[k], 0);
        seen[k] = 1;
    }
    emq_reply_free(dead);
    free(seen);
    free(ids);
}

TEST(poison_racing_consumers_never_duplicate_no_answer) {
    emq_srv *s = emq_srv_start(NULL);
    emq_conn_t *adm = admin_connect(s);
    crashed_entries(adm, 100);
    static recorder ra, rb;
    recorder_init(&ra);
    recorder_init(&rb);
    race_and_check(s, adm, &ra, &rb, 100, 1);
    emq_conn_destroy(adm);
    emq_srv_stop(s);
}

TEST(poison_racing_consumers_never_duplicate_retry) {
    emq_srv *s = emq_srv_start(NULL);
    emq_conn_t *adm = admin_connect(s);
    CMD_NOERR(adm, "XGROUP", "CREATE", Q_STREAM, "g", "$", "MKSTREAM");
    /* Every entry has the value "bad" and is always retried. */
    CMD_NOERR(adm, "EVAL",
              "for i = 1, 60 do redis.call('XADD', KEYS[1], '*', 'n', 'bad') "
              "end",
              "1", Q_STREAM);
    static recorder ra, rb;
    recorder_init(&ra);
    recorder_init(&rb);
    ra.retry_value = rb.retry_value = "bad";
    /* Both consumers start at "new" on an existing group (cursor 0-0 from
     * "$" on an empty stream), so the 60 entries are new work to them. */
    race_and_check(s, adm, &ra, &rb, 60, 0);
    emq_conn_destroy(adm);
    emq_srv_stop(s);
}

/* A stop requested by the handler that answers EMQ_DEAD (the last entry
 * of its batch): the verdict is applied before run returns, and the name
 * is free again at once (the lease is released), so the same process can
 * run a consumer of that name again. */
TEST(poison_dead_verdict_applied_when_stopping) {
    emq_srv *s = emq_srv_start(NULL);
    emq_conn_t *adm = admin_connect(s);
    CMD_NOERR(adm, "XGROUP", "CREATE", Q_STREAM, "g", "$", "MKSTREAM");
    static recorder r;
    recorder_init(&r);
    r.dead_value = "v0";
    r.stop_after = 1;
    emq_consumer_t *c = recording_consumer(poison_conf(s, "w", "3600000"), &r);
    runner_thread t;
    start_consumer(&t, c);
    produce_n(s, "jobs", "v", 1);
    wait_for(&r, 1, 3000);
    ASSERT_OK(join_consumer(&t), &t.err);
    emq_consumer_destroy(c);
    ASSERT_EQ_INT(CMD_INT(adm, "XLEN", Q_DEAD), 1);
    ASSERT_EQ_INT(pending_total(adm, Q_STREAM, "g"), 0);
    ASSERT_EQ_INT(CMD_INT(adm, "EXISTS", "emq:{jobs}:lease:g:w"), 0);
    emq_conn_destroy(adm);
    emq_srv_stop(s);
}
