/* SPDX-License-Identifier: BSD-3-Clause */
/* test_admin_replay.c: emq_admin_group_setid, emq_admin_group_create and
 * emq_admin_group_destroy against a real redis-server.
 *
 * Replay: entries 1000-0..1009-0 (their ms part doubles as a time) are
 * read and acknowledged by group g; moving the cursor to the head, the
 * tail, an ID or a time (@ms) reports how many entries will be handed out
 * again, and an XREADGROUP right after receives exactly those, starting at
 * the expected ID. A tombstone after the cursor is not counted. A group or
 * stream that does not exist is refused with a message naming the group,
 * and no group appears. Malformed targets and a missing group name are
 * EMQ_EINVAL before any command reaches the server.
 *
 * Groups: create at a declared start (created 1, then 0 on BUSYGROUP),
 * WRONGTYPE is EMQ_ESERVER, a missing or bad start is EMQ_EINVAL without a
 * command; destroy reports 1, then 0, and 0 on a missing stream.
 */
#include "integ/admin_inspect_helpers.h"

#define S_RP "emq:{rp}"

/* Stream 1000-0..1009-0, group g created at the head through the admin
 * API, every entry read by c and acknowledged. */
static emq_admin_t *replay_setup(emq_srv *s, emq_conn_t *conn) {
    add_ids(conn, S_RP, 1000, 1009);
    emq_admin_t *a = admin_open(s, "rp", "2");
    int created = -1;
    emq_error err;
    ASSERT_OK(emq_admin_group_create(a, "g", "head", &created, &err), &err);
    ASSERT_EQ_INT(created, 1);
    ASSERT_EQ_SIZE(group_read(conn, S_RP, "g", "c", "100", ">", 1, NULL, NULL),
                   10);
    ASSERT_EQ_SIZE(group_read(conn, S_RP, "g", "c", "100", ">", 1, NULL, NULL),
                   0);
    return a;
}

/* Moves g to `to`, checks the reported count, then reads: exactly that
 * many entries must come, the first being want_first ("" for none), and
 * the cursor must sit at want_cursor. */
static void replay_expect(emq_admin_t *a, emq_conn_t *conn, const char *to,
                          uint64_t want, const char *want_first,
                          const char *want_cursor) {
    uint64_t redeliver = 12345;
    emq_error err;
    ASSERT_OK(emq_admin_group_setid(a, "g", to, &redeliver, &err), &err);
    if (redeliver != want)
        FAIL("setid %s: redeliver %llu, want %llu", to,
             (unsigned long long)redeliver, (unsigned long long)want);
    char cursor[EMQ_ID_MAX];
    group_last_delivered(conn, S_RP, "g", cursor, sizeof cursor);
    ASSERT_EQ_STR(cursor, want_cursor);
    char first[EMQ_ID_MAX];
    size_t got = group_read(conn, S_RP, "g", "c", "100", ">", 1, first, NULL);
    if (got != want)
        FAIL("setid %s: read %zu entries, setid said %llu", to, got,
             (unsigned long long)want);
    ASSERT_EQ_STR(first, want_first);
}

TEST(admin_setid_head_tail_and_id_redeliver_what_they_report) {
    emq_srv *s = emq_srv_start(NULL);
    emq_conn_t *conn = admin_connect(s);
    emq_admin_t *a = replay_setup(s, conn);
    replay_expect(a, conn, "head", 10, "1000-0", "0-0");
    replay_expect(a, conn, "1003-0", 6, "1004-0", "1003-0");
    replay_expect(a, conn, "1003", 6, "1004-0", "1003-0");
    replay_expect(a, conn, "tail", 0, "", "1009-0");
    /* After tail, only what is added later comes. */
    CMD_NOERR(conn, "XADD", S_RP, "1010-0", "n", "1010");
    ASSERT_EQ_SIZE(group_read(conn, S_RP, "g", "c", "100", ">", 1, NULL, NULL),
                   1);
    replay_expect(a, conn, "1010-0", 0, "", "1010-0");
    replay_expect(a, conn, "999", 11, "1000-0", "999-0");
    /* An ID past the end: nothing. */
    replay_expect(a, conn, "5000-0", 0, "", "5000-0");
    /* A tombstone after the cursor is not counted. */
    ASSERT_EQ_INT(CMD_INT(conn, "XDEL", S_RP, "1005-0"), 1);
    replay_expect(a, conn, "1002-0", 7, "1003-0", "1002-0");
    emq_admin_destroy(a);
    emq_conn_destroy(conn);
    emq_srv_stop(s);
}

TEST(admin_setid_to_a_time_replays_from_that_time) {
    emq_srv *s = emq_srv_start(NULL);
    emq_conn_t *conn = admin_connect(s);
    emq_admin_t *a = replay_setup(s, conn);
    /* Entries at or after 1005 ms come again: cursor on 1004-0. */
    replay_expect(a, conn, "@1005", 5, "1005-0", "1004-0");
    /* Two entries in the same millisecond: both are at that time. */
    CMD_NOERR(conn, "XADD", S_RP, "1020-0", "n", "a");
    CMD_NOERR(conn, "XADD", S_RP, "1020-1", "n", "b");
    ASSERT_EQ_SIZE(group_read(conn, S_RP, "g", "c", "100", ">", 1, NULL, NULL),
                   2);
    replay_expect(a, conn, "@1020", 2, "1020-0", "1009-0");
    /* Before every entry: all of them, cursor at 0. */
    replay_expect(a, conn, "@500", 12, "1000-0", "0-0");
    replay_expect(a, conn, "@0", 12, "1000-0", "0-0");
    /* After every entry: none, cursor on the last one. */
    replay_expect(a, conn, "@99999", 0, "", "1020-1");
    emq_admin_destroy(a);
    emq_conn_destroy(conn);
    emq_srv_stop(s);
}

/* The effect of a move, asked before making it: exact counts, nothing
 * moved. The cursor sits on 1009-0 with 1010-0..1012-0 never read. */
TEST(admin_setid_effect_counts_what_a_move_skips_or_replays) {
    emq_srv *s = emq_srv_start(NULL);
    emq_conn_t *conn = admin_connect(s);
    emq_admin_t *a = replay_setup(s, conn);
    add_ids(conn, S_RP, 1010, 1012);
    static const struct {
        const char *to;
        uint64_t skipped, replayed;
    } cases[] = {
        {"head", 0, 10},  {"tail", 3, 0},  {"1011-0", 2, 0}, {"1005-0", 0, 4},
        {"1009-0", 0, 0}, {"@1006", 0, 4}, {"5000-0", 3, 0}, {"@0", 0, 10},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        uint64_t skipped = 99, replayed = 99;
        emq_error err;
        ASSERT_OK(emq_admin_group_setid_effect(a, "g", cases[i].to, &skipped,
                                               &replayed, &err),
                  &err);
        if (skipped != cases[i].skipped || replayed != cases[i].replayed)
            FAIL("effect of %s: skipped %llu replayed %llu, want %llu %llu",
                 cases[i].to, (unsigned long long)skipped,
                 (unsigned long long)replayed,
                 (unsigned long long)cases[i].skipped,
                 (unsigned long long)cases[i].replayed);
        char cursor[EMQ_ID_MAX];
        group_last_delivered(conn, S_RP, "g", cursor, sizeof cursor);
        ASSERT_EQ_STR(cursor, "1009-0"); /* nothing moved */
    }
    emq_error err;
    uint64_t skipped = 5;
    ASSERT_STATUS(
        emq_admin_group_setid_effect(a, "nog", "tail", &skipped, NULL, &err),
        EMQ_ESERVER, &err);
    ASSERT_CONTAINS(err.message, "group 'nog' does not exist");
    ASSERT_EQ_SIZE(skipped, 0);
    ASSERT_STATUS(
        emq_admin_group_setid_effect(a, "g", "sideways", NULL, NULL, &err),
        EMQ_EINVAL, &err);
    emq_admin_destroy(a);
    emq_conn_destroy(conn);
    emq_srv_stop(s);
}

TEST(admin_setid_refuses_a_group_that_does_not_exist) {
    emq_srv *s = emq_srv_start(NULL);
    emq_conn_t *conn = admin_connect(s);
    emq_admin_t *a = admin_open(s, "rp", "2");
    emq_error err;
    uint64_t redeliver = 7;
    /* No stream at all. */
    ASSERT_STATUS(emq_admin_group_setid(a, "nog", "head", &redeliver, &err),
                  EMQ_ESERVER, &err);
    ASSERT_CONTAINS(err.message, "'nog' does not exist");
    ASSERT_EQ_SIZE(redeliver, 0);
    ASSERT_EQ_INT(CMD_INT(conn, "EXISTS", S_RP), 0);
    /* A stream with another group. */
    add_ids(conn, S_RP, 1, 3);
    CMD_NOERR(conn, "XGROUP", "CREATE", S_RP, "other", "0");
    const char *targets[] = {"head", "tail", "2-0", "@2"};
    for (size_t i = 0; i < 4; i++) {
        ASSERT_STATUS(
            emq_admin_group_setid(a, "nog", targets[i], &redeliver, &err),
            EMQ_ESERVER, &err);
        ASSERT_CONTAINS(err.message, "group 'nog' does not exist");
        ASSERT_CONTAINS(err.message, S_RP);
    }
    emq_reply *r = CMD(conn, "XINFO", "GROUPS", S_RP);
    ASSERT_EQ_SIZE(emq_reply_len(r), 1);
    emq_reply_free(r);
    emq_admin_destroy(a);
    emq_conn_destroy(conn);
    emq_srv_stop(s);
}

TEST(admin_setid_bad_targets_send_nothing) {
    emq_srv *s = emq_srv_start(NULL);
    emq_admin_t *a = admin_open(s, "rp", "2");
    emq_error err;
    uint64_t redeliver = 0;
    const char *bad[] = {
        "",     "abc",  "@", "@x",    "@-5", "@5-1", "1-2-3",
        "$",    "-",    "+", "head ", "0-",  "-1",   "99999999999999999999999",
        "@1.5", "Head", ">"};
    long long before = commands_total(s);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ASSERT_STATUS(emq_admin_group_setid(a, "g", bad[i], &redeliver, &err),
                      EMQ_EINVAL, &err);
        if (bad[i][0] != '\0')
            ASSERT_CONTAINS(err.message, bad[i]);
    }
    ASSERT_STATUS(emq_admin_group_setid(a, "g", NULL, &redeliver, &err),
                  EMQ_EINVAL, &err);
    ASSERT_CONTAINS(err.message, "head");
    ASSERT_STATUS(emq_admin_group_setid(a, NULL, "head", &redeliver, &err),
                  EMQ_EINVAL, &err);
    ASSERT_CONTAINS(err.message, "group");
    ASSERT_STATUS(emq_admin_group_setid(a, "", "head", &redeliver, &err),
                  EMQ_EINVAL, &err);
    ASSERT_EQ_INT(commands_total(s) - before, 1);
    emq_admin_destroy(a);
    emq_srv_stop(s);
}

TEST(admin_group_create_and_destroy) {
    emq_srv *s = emq_srv_start(NULL);
    emq_conn_t *conn = admin_connect(s);
    emq_admin_t *a = admin_open(s, "rp", "2");
    emq_error err;
    int created = -1, destroyed = -1;

    /* Refused before sending: no start, a bad start, no group. */
    long long before = commands_total(s);
    ASSERT_STATUS(emq_admin_group_create(a, "g", NULL, &created, &err),
                  EMQ_EINVAL, &err);
    ASSERT_CONTAINS(err.message, "start is required");
    ASSERT_STATUS(emq_admin_group_create(a, "g", "latest", &created, &err),
                  EMQ_EINVAL, &err);
    ASSERT_CONTAINS(err.message, "latest");
    ASSERT_STATUS(emq_admin_group_create(a, NULL, "new", &created, &err),
                  EMQ_EINVAL, &err);
    ASSERT_STATUS(emq_admin_group_destroy(a, "", &destroyed, &err), EMQ_EINVAL,
                  &err);
    ASSERT_EQ_INT(commands_total(s) - before, 1);

    /* Destroying on a missing stream: nothing to destroy, no error. */
    ASSERT_OK(emq_admin_group_destroy(a, "g", &destroyed, &err), &err);
    ASSERT_EQ_INT(destroyed, 0);

    /* new on a filled stream: the group starts at the end. */
    add_ids(conn, S_RP, 1, 5);
    ASSERT_OK(emq_admin_group_create(a, "g", "new", &created, &err), &err);
    ASSERT_EQ_INT(created, 1);
    char cursor[EMQ_ID_MAX];
    group_last_delivered(conn, S_RP, "g", cursor, sizeof cursor);
    ASSERT_EQ_STR(cursor, "5-0");
    /* Again, with another start: BUSYGROUP, not an error; cursor kept. */
    ASSERT_OK(emq_admin_group_create(a, "g", "head", &created, &err), &err);
    ASSERT_EQ_INT(created, 0);
    group_last_delivered(conn, S_RP, "g", cursor, sizeof cursor);
    ASSERT_EQ_STR(cursor, "5-0");
    /* An explicit ID. */
    ASSERT_OK(emq_admin_group_create(a, "h", "2-0", &created, &err), &err);
    ASSERT_EQ_INT(created, 1);
    ASSERT_EQ_SIZE(group_read(conn, S_RP, "h", "c", "100", ">", 0, NULL, NULL),
                   3);

    /* Destroy: 1, then 0; the pending list goes with it. */
    ASSERT_OK(emq_admin_group_destroy(a, "h", &destroyed, &err), &err);
    ASSERT_EQ_INT(destroyed, 1);
    ASSERT_OK(emq_admin_group_destroy(a, "h", &destroyed, &err), &err);
    ASSERT_EQ_INT(destroyed, 0);
    emq_reply *r = CMD(conn, "XINFO", "GROUPS", S_RP);
    ASSERT_EQ_SIZE(emq_reply_len(r), 1);
    emq_reply_free(r);

    /* A key of another type. */
    CMD_NOERR(conn, "SET", "emq:{wt}", "x");
    emq_admin_t *w = admin_open(s, "wt", "2");
    ASSERT_STATUS(emq_admin_group_create(w, "g", "new", &created, &err),
                  EMQ_ESERVER, &err);
    ASSERT_CONTAINS(err.message, "WRONGTYPE");
    ASSERT_CONTAINS(err.message, "'g'");
    ASSERT_STATUS(emq_admin_group_destroy(w, "g", &destroyed, &err),
                  EMQ_ESERVER, &err);
    ASSERT_CONTAINS(err.message, "WRONGTYPE");
    uint64_t redeliver;
    ASSERT_STATUS(emq_admin_group_setid(w, "g", "head", &redeliver, &err),
                  EMQ_ESERVER, &err);
    ASSERT_CONTAINS(err.message, "WRONGTYPE");
    emq_admin_destroy(w);

    emq_admin_destroy(a);
    emq_conn_destroy(conn);
    emq_srv_stop(s);
}
