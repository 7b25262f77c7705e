/* SPDX-License-Identifier: BSD-3-Clause */
/* test_admin_retention.c: ack-aware trimming (emq_admin_trim_acked)
 * against a real redis-server.
 *
 * The floor is the oldest entry any group still needs: its oldest pending
 * entry, or the first entry after its last-delivered ID. Nothing at or
 * above the floor is ever deleted; a length or age bound applies only
 * below it, and what it asked for beyond the floor is reported as held
 * back. A stream without groups is left alone. While a producer adds
 * entries and consumers of two groups read them, repeated trims lose
 * nothing either group has not been handed and acknowledged yet.
 */
#include "integ/admin_ops_helpers.h"

#define Q_STREAM "emq:{jobs}"
#define N_CONCURRENT 2000

/* Adds n entries {"n": "v<i>"}, ids into ids (at least n slots). */
static void add_entries(emq_conn_t *adm, int n, emq_id *ids) {
    for (int i = 0; i < n; i++) {
        char v[16];
        snprintf(v, sizeof v, "v%d", i);
        emq_reply *r = CMD(adm, "XADD", Q_STREAM, "*", "n", v);
        if (ids)
            reply_text(r, ids[i].str, sizeof ids[i].str);
        emq_reply_free(r);
    }
}

static emq_trim_result trim_ok(emq_admin_t *a, int64_t maxlen,
                               int64_t max_age_ms) {
    emq_trim_result res;
    emq_error err;
    memset(&err, 0, sizeof err);
    ASSERT_OK(emq_admin_trim_acked(a, maxlen, max_age_ms, &res, &err), &err);
    return res;
}

TEST(admin_trim_two_groups_keep_what_the_slower_needs) {
    emq_srv *s = emq_srv_start(NULL);
    emq_conn_t *adm = admin_connect(s);
    CMD_NOERR(adm, "XGROUP", "CREATE", Q_STREAM, "g1", "$", "MKSTREAM");
    CMD_NOERR(adm, "XGROUP", "CREATE", Q_STREAM, "g2", "$");
    emq_id e[10];
    add_entries(adm, 10, e);
    /* g1: e0..e5 delivered, e2, e4, e5 still pending. */
    ASSERT_EQ_INT(take_new(adm, Q_STREAM, "g1", "c1", "6"), 6);
    ASSERT_EQ_INT(
        CMD_INT(adm, "XACK", Q_STREAM, "g1", e[0].str, e[1].str, e[3].str), 3);
    /* g2: e0..e3 delivered and acknowledged; e4 is its next. */
    ASSERT_EQ_INT(take_new(adm, Q_STREAM, "g2", "c2", "4"), 4);
    ASSERT_EQ_INT(CMD_INT(adm, "XACK", Q_STREAM, "g2", e[0].str, e[1].str,
                          e[2].str, e[3].str),
                  4);
    emq_admin_t *a = admin_open(s, "jobs", "2");
    emq_trim_result res = trim_ok(a, -1, -1);
    ASSERT_EQ_INT(res.removed, 2);
    ASSERT_EQ_STR(res.floor.str, e[2].str);
    ASSERT_EQ_INT(res.held_back, 0);
    ASSERT_EQ_INT(res.no_groups, 0);
    ASSERT_EQ_INT(CMD_INT(adm, "XLEN", Q_STREAM), 8);
    /* Again: nothing more to remove. */
    res = trim_ok(a, -1, -1);
    ASSERT_EQ_INT(res.removed, 0);
    /* g1 acknowledges e2: both groups now need e4 first. */
    ASSERT_EQ_INT(CMD_INT(adm, "XACK", Q_STREAM, "g1", e[2].str), 1);
    res = trim_ok(a, -1, -1);
    ASSERT_EQ_INT(res.removed, 2);
    ASSERT_EQ_STR(res.floor.str, e[4].str);
    /* Everything g1 still holds is still readable by its history read. */
    emq_reply *r =
        CMD(adm, "XREADGROUP", "GROUP", "g1", "c1", "STREAMS", Q_STREAM, "0");
    const emq_reply *entries = emq_reply_at(emq_reply_at(r, 0), 1);
    ASSERT_EQ_SIZE(emq_reply_len(entries), 2);
    for (size_t i = 0; i < 2; i++)
        ASSERT_EQ_INT(emq_reply_kind(emq_reply_at(emq_reply_at(entries, i), 1)),
                      EMQ_REPLY_ARRAY); /* not a deleted entry */
    emq_reply_free(r);
    emq_admin_destroy(a);
    emq_conn_destroy(adm);
    emq_srv_stop(s);
}

TEST(admin_trim_group_with_empty_pending_list) {
    emq_srv *s = emq_srv_start(NULL);
    emq_conn_t *adm = admin_connect(s);
    CMD_NOERR(adm, "XGROUP", "CREATE", Q_STREAM, "g", "$", "MKSTREAM");
    emq_id e[5];
    add_entries(adm, 5, e);
    /* Two delivered and acknowledged: the floor is the third. */
    ASSERT_EQ_INT(take_new(adm, Q_STREAM, "g", "c", "2"), 2);
    ASSERT_EQ_INT(CMD_INT(adm, "XACK", Q_STREAM, "g", e[0].str, e[1].str), 2);
    emq_admin_t *a = admin_open(s, "jobs", "2");
    emq_trim_result res = trim_ok(a, -1, -1);
    ASSERT_EQ_INT(res.removed, 2);
    ASSERT_EQ_STR(res.floor.str, e[2].str);
    /* All delivered and acknowledged: nothing is needed, all goes, the
     * stream and its group stay. */
    ASSERT_EQ_INT(take_new(adm, Q_STREAM, "g", "c", "10"), 3);
    ASSERT_EQ_INT(
        CMD_INT(adm, "XACK", Q_STREAM, "g", e[2].str, e[3].str, e[4].str), 3);
    res = trim_ok(a, -1, -1);
    ASSERT_EQ_INT(res.removed, 3);
    ASSERT_EQ_STR(res.floor.str, "");
    ASSERT_EQ_INT(res.no_groups, 0);
    ASSERT_EQ_INT(CMD_INT(adm, "XLEN", Q_STREAM), 0);
    ASSERT_EQ_INT(CMD_INT(adm, "EXISTS", Q_STREAM), 1);
    add_entries(adm, 1, NULL);
    ASSERT_EQ_INT(take_new(adm, Q_STREAM, "g", "c", "10"), 1);
    emq_admin_destroy(a);
    emq_conn_destroy(adm);
    emq_srv_stop(s);
}

TEST(admin_trim_without_groups_removes_nothing) {
    emq_srv *s = emq_srv_start(NULL);
    emq_conn_t *adm = admin_connect(s);
    emq_admin_t *a = admin_open(s, "jobs", "2");
    /* No stream at all. */
    emq_trim_result res = trim_ok(a, 0, 0);
    ASSERT_EQ_INT(res.no_groups, 1);
    ASSERT_EQ_INT(res.removed, 0);
    ASSERT_EQ_INT(CMD_INT(adm, "EXISTS", Q_STREAM), 0);
    /* A stream nobody consumes: even maxlen 0 leaves it alone. */
    add_entries(adm, 5, NULL);
    res = trim_ok(a, 0, -1);
    ASSERT_EQ_INT(res.no_groups, 1);
    ASSERT_EQ_INT(res.removed, 0);
    ASSERT_EQ_STR(res.floor.str, "");
    ASSERT_EQ_INT(CMD_INT(adm, "XLEN", Q_STREAM), 5);
    /* Bad bounds. */
    emq_error err;
    ASSERT_STATUS(emq_admin_trim_acked(a, -2, -1, &res, &err), EMQ_EINVAL,
                  &err);
    /* A key of another type is the server's error. */
    CMD_NOERR(adm, "SET", "emq:{other}", "x");
    emq_admin_t *b = admin_open(s, "other", "2");
    ASSERT_STATUS(emq_admin_trim_acked(b, -1, -1, &res, &err), EMQ_ESERVER,
                  &err);
    ASSERT_CONTAINS(err.message, "WRONGTYPE");
    emq_admin_destroy(b);
    emq_admin_destroy(a);
    emq_conn_destroy(adm);
    emq_srv_stop(s);
}

TEST(admin_trim_length_bound_is_held_back_at_the_floor) {
    emq_srv *s = emq_srv_start(NULL);
    emq_conn_t *adm = admin_connect(s);
    CMD_NOERR(adm, "XGROUP", "CREATE", Q_STREAM, "g", "$", "MKSTREAM");
    emq_id e[10];
    add_entries(adm, 10, e);
    ASSERT_EQ_INT(take_new(adm, Q_STREAM, "g", "c", "3"), 3);
    ASSERT_EQ_INT(
        CMD_INT(adm, "XACK", Q_STREAM, "g", e[0].str, e[1].str, e[2].str), 3);
    emq_admin_t *a = admin_open(s, "jobs", "3"); /* RESP3 */
    /* Keep 8 of 10: both are below the floor e3. */
    emq_trim_result res = trim_ok(a, 8, -1);
    ASSERT_EQ_INT(res.removed, 2);
    ASSERT_EQ_INT(res.held_back, 0);
    ASSERT_EQ_STR(res.floor.str, e[3].str);
    /* Keep 2 of 8: one is below the floor, five are held back. */
    res = trim_ok(a, 2, -1);
    ASSERT_EQ_INT(res.removed, 1);
    ASSERT_EQ_INT(res.held_back, 5);
    ASSERT_EQ_INT(CMD_INT(adm, "XLEN", Q_STREAM), 7);
    /* Keep none: all seven are needed. */
    res = trim_ok(a, 0, -1);
    ASSERT_EQ_INT(res.removed, 0);
    ASSERT_EQ_INT(res.held_back, 7);
    /* A bound already met asks for nothing. */
    res = trim_ok(a, 100, -1);
    ASSERT_EQ_INT(res.removed, 0);
    ASSERT_EQ_INT(res.held_back, 0);
    emq_admin_destroy(a);
    emq_conn_destroy(adm);
    emq_srv_stop(s);
}

TEST(admin_trim_age_bound_is_held_back_at_the_floor) {
    emq_srv *s = emq_srv_start(NULL);
    emq_conn_t *adm = admin_connect(s);
    /* Five entries a minute old (explicit IDs), then five fresh ones. */
    emq_reply *t = CMD(adm, "TIME");
    char sec[32];
    reply_text(emq_reply_at(t, 0), sec, sizeof sec);
    emq_reply_free(t);
    long long old_ms = atoll(sec) * 1000 - 60000;
    emq_id e[10];
    for (int i = 0; i < 5; i++) {
        snprintf(e[i].str, sizeof e[i].str, "%lld-%d", old_ms, i + 1);
        emq_reply_free(CMD(adm, "XADD", Q_STREAM, e[i].str, "n", "old"));
    }
    add_entries(adm, 5, e + 5);
    CMD_NOERR(adm, "XGROUP", "CREATE", Q_STREAM, "g", "0");
    ASSERT_EQ_INT(take_new(adm, Q_STREAM, "g", "c", "2"), 2);
    ASSERT_EQ_INT(CMD_INT(adm, "XACK", Q_STREAM, "g", e[0].str, e[1].str), 2);
    emq_admin_t *a = admin_open(s, "jobs", "2");
    /* Older than 30 s: five entries; two are below the floor. */
    emq_trim_result res = trim_ok(a, -1, 30000);
    ASSERT_EQ_INT(res.removed, 2);
    ASSERT_EQ_INT(res.held_back, 3);
    ASSERT_EQ_STR(res.floor.str, e[2].str);
    /* The group takes and acknowledges the rest of the old ones and two
     * fresh ones: the old ones go, nothing fresh does. */
    ASSERT_EQ_INT(take_new(adm, Q_STREAM, "g", "c", "5"), 5);
    ASSERT_EQ_INT(CMD_INT(adm, "XACK", Q_STREAM, "g", e[2].str, e[3].str,
                          e[4].str, e[5].str, e[6].str),
                  5);
    res = trim_ok(a, -1, 30000);
    ASSERT_EQ_INT(res.removed, 3);
    ASSERT_EQ_INT(res.held_back, 0);
    ASSERT_EQ_STR(res.floor.str, e[7].str);
    ASSERT_EQ_INT(CMD_INT(adm, "XLEN", Q_STREAM), 5);
    /* Both bounds: the length bound asks for one more, below the floor. */
    res = trim_ok(a, 4, 30000);
    ASSERT_EQ_INT(res.removed, 1);
    ASSERT_EQ_INT(res.held_back, 0);
    /* Age 0 asks for everything older than now: three are still needed. */
    usleep(5 * 1000);
    res = trim_ok(a, -1, 0);
    ASSERT_EQ_INT(res.removed, 1);
    ASSERT_EQ_INT(res.held_back, 3);
    emq_admin_destroy(a);
    emq_conn_destroy(adm);
    emq_srv_stop(s);
}

/* ---- concurrent producer --------------------------------------------- */

typedef struct producing {
    const emq_srv *s;
    atomic_int done;
} producing;

static void *produce_thread(void *arg) {
    producing *p = arg;
    emq_producer_t *prod = producer_for(p->s, "jobs");
    emq_error err;
    for (int i = 0; i < N_CONCURRENT; i++) {
        char v[16];
        int len = snprintf(v, sizeof v, "%d", i);
        emq_field f = {"n", 1, v, (size_t)len};
        ASSERT_OK(emq_produce(prod, &f, 1, NULL, &err), &err);
        if (i % 100 == 0)
            usleep(2000);
    }
    emq_producer_destroy(prod);
    atomic_store(&p->done, 1);
    return NULL;
}

/* Reads up to count new entries for group "slow" as consumer "s1", marks
 * their values in seen and acknowledges them; returns how many. */
static int slow_read(emq_conn_t *adm, int count, unsigned char *seen) {
    char n[16];
    snprintf(n, sizeof n, "%d", count);
    emq_reply *r = CMD(adm, "XREADGROUP", "GROUP", "slow", "s1", "COUNT", n,
                       "STREAMS", Q_STREAM, ">");
    int got = 0;
    if (emq_reply_kind(r) == EMQ_REPLY_ARRAY) {
        const emq_reply *entries = emq_reply_at(emq_reply_at(r, 0), 1);
        for (size_t i = 0; i < emq_reply_len(entries); i++) {
            const emq_reply *entry = emq_reply_at(entries, i);
            char id[EMQ_ID_MAX], v[32];
            reply_text(emq_reply_at(entry, 0), id, sizeof id);
            reply_text(emq_reply_at(emq_reply_at(entry, 1), 1), v, sizeof v);
            int k = atoi(v);
            ASSERT(k >= 0 && k < N_CONCURRENT);
            seen[k]++;
            ASSERT_EQ_INT(CMD_INT(adm, "XACK", Q_STREAM, "slow", id), 1);
            got++;
        }
    }
    emq_reply_free(r);
    return got;
}

TEST_TIMEOUT(admin_trim_while_producing_loses_nothing_a_group_needs, 60) {
    emq_srv *s = emq_srv_start(NULL);
    emq_conn_t *adm = admin_connect(s);
    CMD_NOERR(adm, "XGROUP", "CREATE", Q_STREAM, "fast", "$", "MKSTREAM");
    CMD_NOERR(adm, "XGROUP", "CREATE", Q_STREAM, "slow", "$");
    /* Group "fast": a consumer acknowledging everything as it comes. */
    static recorder fast;
    recorder_init(&fast);
    emq_consumer_t *c = recording_consumer(
        consumer_conf(s, "jobs", "fast", "f1", "new"), &fast);
    runner_thread ct;
    start_consumer(&ct, c);
    /* Group "slow": read by this thread a little at a time, between trims. */
    static unsigned char seen_slow[N_CONCURRENT];
    memset(seen_slow, 0, sizeof seen_slow);
    emq_admin_t *a = admin_open(s, "jobs", "2");
    static producing prod;
    prod.s = s;
    atomic_store(&prod.done, 0);
    pthread_t pt;
    ASSERT(pthread_create(&pt, NULL, produce_thread, &prod) == 0);
    uint64_t removed = 0, trims = 0;
    int slow_total = 0;
    while (!atomic_load(&prod.done)) {
        emq_trim_result res = trim_ok(a, trims % 2 ? 10 : -1, -1);
        removed += res.removed;
        trims++;
        slow_total += slow_read(adm, 37, seen_slow);
    }
    pthread_join(pt, NULL);
    /* Everything left is still there for both groups. */
    removed += trim_ok(a, -1, -1).removed;
    wait_for(&fast, N_CONCURRENT, 20000);
    while (slow_total < N_CONCURRENT) {
        int got = slow_read(adm, 500, seen_slow);
        ASSERT(got > 0);
        slow_total += got;
        removed += trim_ok(a, 0, -1).removed;
    }
    ASSERT_OK(stop_consumer(&ct), &ct.err);
    static unsigned char seen_fast[N_CONCURRENT];
    memset(seen_fast, 0, sizeof seen_fast);
    for (size_t i = 0; i < fast.n; i++) {
        int k = atoi(fast.values[i]);
        ASSERT(k >= 0 && k < N_CONCURRENT);
        seen_fast[k] = 1;
    }
    for (int k = 0; k < N_CONCURRENT; k++) {
        if (!seen_fast[k])
            FAIL("entry %d never reached group fast", k);
        if (seen_slow[k] != 1)
            FAIL("entry %d reached group slow %d times", k, seen_slow[k]);
    }
    /* Both groups are done: the last trim empties the stream, and every
     * entry was removed exactly once over all trims. */
    wait_pending_zero(s, Q_STREAM, "fast", 5000);
    removed += trim_ok(a, -1, -1).removed;
    ASSERT_EQ_INT(removed, N_CONCURRENT);
    ASSERT_EQ_INT(CMD_INT(adm, "XLEN", Q_STREAM), 0);
    ASSERT(trims > 1);
    emq_consumer_destroy(c);
    emq_admin_destroy(a);
    emq_conn_destroy(adm);
    emq_srv_stop(s);
}

/* A leaked worker credential may run XCLAIM ... LASTID, which moves a
 * group's cursor past every entry it has not read (an ACL cannot forbid
 * an option). The floor used to come from the cursor and the pending
 * list alone, so the next trim deleted all of that unread work although
 * the server still counted it (lag). On 7.0+ the trim keeps what the
 * server counts as unread and refuses a cursor that lies past it. */
TEST(admin_trim_refuses_a_cursor_moved_past_unread_entries) {
    emq_srv *s = emq_srv_start(NULL);
    if (!emq_srv_redis_at_least(s, 7, 0)) {
        emq_srv_stop(s);
        SKIP("before 7.0 the server reports no lag: a cursor moved without "
             "reads cannot be told (docs/SECURITY.md)");
    }
    emq_conn_t *adm = admin_connect(s);
    CMD_NOERR(adm, "XGROUP", "CREATE", Q_STREAM, "g", "0", "MKSTREAM");
    emq_id e[10];
    add_entries(adm, 10, e);
    ASSERT_EQ_INT(take_new(adm, Q_STREAM, "g", "c", "3"), 3);
    ASSERT_EQ_INT(
        CMD_INT(adm, "XACK", Q_STREAM, "g", e[0].str, e[1].str, e[2].str), 3);
    emq_admin_t *a = admin_open(s, "jobs", "2");
    /* Healthy: the 3 read and acknowledged go, the 7 unread stay. */
    emq_trim_result res = trim_ok(a, -1, -1);
    ASSERT_EQ_INT(res.removed, 3);
    ASSERT_EQ_STR(res.floor.str, e[3].str);
    /* The forged cursor: past everything, 7 entries never read. */
    CMD_NOERR(adm, "XCLAIM", Q_STREAM, "g", "x", "0", "0-1", "LASTID",
              "99999999999999-0");
    emq_error err;
    ASSERT_STATUS(emq_admin_trim_acked(a, -1, -1, &res, &err), EMQ_ESERVER,
                  &err);
    ASSERT_CONTAINS(err.message, "group 'g' has its cursor at "
                                 "99999999999999-0, past 7 entries");
    ASSERT_CONTAINS(err.message, "nothing was trimmed");
    ASSERT_EQ_INT(res.removed, 0);
    ASSERT_EQ_INT(CMD_INT(adm, "XLEN", Q_STREAM), 7);
    /* A bound asks for more: still nothing unread goes. */
    ASSERT_STATUS(emq_admin_trim_acked(a, 0, -1, &res, &err), EMQ_ESERVER,
                  &err);
    ASSERT_EQ_INT(CMD_INT(adm, "XLEN", Q_STREAM), 7);
    /* Moved back to where it read, the trim works again and keeps all 7. */
    CMD_NOERR(adm, "XGROUP", "SETID", Q_STREAM, "g", e[2].str, "ENTRIESREAD",
              "3");
    res = trim_ok(a, -1, -1);
    ASSERT_EQ_INT(res.removed, 0);
    ASSERT_EQ_INT(CMD_INT(adm, "XLEN", Q_STREAM), 7);
    emq_admin_destroy(a);
    emq_conn_destroy(adm);
    emq_srv_stop(s);
}
