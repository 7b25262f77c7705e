/* SPDX-License-Identifier: BSD-3-Clause */
/* test_admin_prune.c: removing idle consumers (emq_admin_prune_consumers)
 * against a real redis-server.
 *
 * An idle consumer that holds entries has them handed to the most recently
 * active remaining consumer, without a delivery added and with their idle
 * time kept, before it is deleted; nothing pending is ever destroyed
 * (XGROUP DELCONSUMER would drop it). When every consumer is idle, those
 * holding entries are kept and the empty ones removed. Long pending lists
 * are moved in several bounded script calls; pending IDs whose entry was
 * deleted are dropped on the way. A missing group is a clear error.
 */
#include "integ/admin_ops_helpers.h"

#define Q_STREAM "emq:{jobs}"

static void add_entries(emq_conn_t *adm, int n) {
    for (int i = 0; i < n; i++) {
        char v[16];
        snprintf(v, sizeof v, "v%d", i);
        emq_reply_free(CMD(adm, "XADD", Q_STREAM, "*", "n", v));
    }
}

TEST(admin_prune_moves_pending_to_most_recent_consumer_then_removes) {
    emq_srv *s = emq_srv_start(NULL);
    emq_conn_t *adm = admin_connect(s);
    CMD_NOERR(adm, "XGROUP", "CREATE", Q_STREAM, "g", "$", "MKSTREAM");
    add_entries(adm, 3);
    ASSERT_EQ_INT(take_new(adm, Q_STREAM, "g", "idle1", "3"), 3);
    ASSERT_EQ_INT(
        CMD_INT(adm, "XGROUP", "CREATECONSUMER", Q_STREAM, "g", "idle2"), 1);
    emq_id ids[3];
    ASSERT_EQ_SIZE(stream_ids(adm, Q_STREAM, ids, 3), 3);
    /* idle1 and idle2 pass the threshold; live1 and live2 must stay under
     * it until the prune, however slow the run: a threshold of a second
     * (scaled) leaves room for that. */
    int idle_ms = emq_test_ms(1000);
    char idle_text[16];
    snprintf(idle_text, sizeof idle_text, "%d", idle_ms);
    usleep((useconds_t)(idle_ms + 100) * 1000);
    add_entries(adm, 1);
    ASSERT_EQ_INT(take_new(adm, Q_STREAM, "g", "live2", "1"), 1);
    usleep(150 * 1000);
    add_entries(adm, 1);
    ASSERT_EQ_INT(take_new(adm, Q_STREAM, "g", "live1", "1"), 1);

    emq_admin_t *a = admin_open(s, "jobs", "2");
    emq_prune_result res;
    emq_error err;
    ASSERT_OK(emq_admin_prune_consumers(a, "g", idle_ms, &res, &err), &err);
    ASSERT_EQ_INT(res.removed, 2);
    ASSERT_EQ_INT(res.moved, 3);
    ASSERT_EQ_INT(res.kept, 0);
    ASSERT(!has_consumer(adm, Q_STREAM, "g", "idle1"));
    ASSERT(!has_consumer(adm, Q_STREAM, "g", "idle2"));
    ASSERT(has_consumer(adm, Q_STREAM, "g", "live2"));
    ASSERT_EQ_INT(pending_total(adm, Q_STREAM, "g"), 5);
    ASSERT_EQ_INT(pending_of(adm, Q_STREAM, "g", "live1"), 4);
    ASSERT_EQ_INT(pending_of(adm, Q_STREAM, "g", "live2"), 1);
    for (int i = 0; i < 3; i++) {
        char owner[64];
        long long deliveries = 0;
        pending_entry(adm, Q_STREAM, "g", ids[i].str, owner, sizeof owner,
                      &deliveries);
        ASSERT_EQ_STR(owner, "live1");
        ASSERT_EQ_INT(deliveries, 1); /* JUSTID: no delivery added */
    }
    /* The moved entries kept their idle time: claimable at once. */
    emq_reply *p =
        CMD(adm, "XPENDING", Q_STREAM, "g", "IDLE", idle_text, "-", "+", "10");
    ASSERT_EQ_SIZE(emq_reply_len(p), 3);
    emq_reply_free(p);
    /* Nothing idle is left: a second run does nothing. */
    ASSERT_OK(emq_admin_prune_consumers(a, "g", idle_ms, &res, &err), &err);
    ASSERT_EQ_INT(res.removed + res.moved + res.kept, 0);
    emq_admin_destroy(a);
    emq_conn_destroy(adm);
    emq_srv_stop(s);
}

TEST(admin_prune_all_idle_keeps_consumers_holding_entries) {
    emq_srv *s = emq_srv_start(NULL);
    emq_conn_t *adm = admin_connect(s);
    CMD_NOERR(adm, "XGROUP", "CREATE", Q_STREAM, "g", "$", "MKSTREAM");
    add_entries(adm, 2);
    ASSERT_EQ_INT(take_new(adm, Q_STREAM, "g", "holder", "2"), 2);
    ASSERT_EQ_INT(
        CMD_INT(adm, "XGROUP", "CREATECONSUMER", Q_STREAM, "g", "empty"), 1);
    usleep(300 * 1000);
    emq_admin_t *a = admin_open(s, "jobs", "3"); /* RESP3: XINFO maps */
    emq_prune_result res;
    emq_error err;
    ASSERT_OK(emq_admin_prune_consumers(a, "g", 200, &res, &err), &err);
    ASSERT_EQ_INT(res.removed, 1);
    ASSERT_EQ_INT(res.moved, 0);
    ASSERT_EQ_INT(res.kept, 1);
    ASSERT(has_consumer(adm, Q_STREAM, "g", "holder"));
    ASSERT(!has_consumer(adm, Q_STREAM, "g", "empty"));
    ASSERT_EQ_INT(pending_of(adm, Q_STREAM, "g", "holder"), 2);
    /* A threshold nobody reaches removes nothing. */
    ASSERT_OK(emq_admin_prune_consumers(a, "g", 3600000, &res, &err), &err);
    ASSERT_EQ_INT(res.removed + res.moved + res.kept, 0);
    emq_admin_destroy(a);
    emq_conn_destroy(adm);
    emq_srv_stop(s);
}

TEST(admin_prune_moves_long_pending_lists_in_bounded_calls) {
    emq_srv *s = emq_srv_start(NULL);
    emq_conn_t *adm = admin_connect(s);
    CMD_NOERR(adm, "XGROUP", "CREATE", Q_STREAM, "g", "$", "MKSTREAM");
    ASSERT_EQ_INT(CMD_INT(adm, "EVAL",
                          "for i = 1, 2500 do redis.call('XADD', KEYS[1], "
                          "'*', 'n', i) end\n"
                          "local r = redis.call('XREADGROUP', 'GROUP', 'g', "
                          "'old', 'COUNT', 2500, 'STREAMS', KEYS[1], '>')\n"
                          "return #r[1][2]",
                          "1", Q_STREAM),
                  2500);
    /* One pending entry loses its stream entry: XCLAIM drops it. */
    emq_id first[1];
    ASSERT_EQ_SIZE(stream_ids(adm, Q_STREAM, first, 1), 1);
    ASSERT_EQ_INT(CMD_INT(adm, "XDEL", Q_STREAM, first[0].str), 1);
    /* "old" passes the threshold; "live" must stay under it until the
     * prune, however slow the run. */
    int idle_ms = emq_test_ms(1000);
    usleep((useconds_t)(idle_ms + 100) * 1000);
    add_entries(adm, 1);
    ASSERT_EQ_INT(take_new(adm, Q_STREAM, "g", "live", "1"), 1);
    /* The prune script's calls (FCALL on 7.0+, EVAL before), counted
     * once the handle's connection (its handshake calls the library's
     * probe) is open. */
    emq_admin_t *a = admin_open(s, "jobs", "2");
    const char *script =
        strcmp(emq_srv_script_command(), "FCALL") == 0 ? "fcall" : "eval";
    long long evals_before = 0, usec = 0;
    cmdstat(adm, script, &evals_before, &usec);

    emq_prune_result res;
    emq_error err;
    ASSERT_OK(emq_admin_prune_consumers(a, "g", idle_ms, &res, &err), &err);
    ASSERT_EQ_INT(res.removed, 1);
    ASSERT_EQ_INT(res.moved, 2499);
    ASSERT_EQ_INT(res.kept, 0);
    long long evals_after = 0;
    cmdstat(adm, script, &evals_after, &usec);
    ASSERT_EQ_INT(evals_after - evals_before, 3); /* 1000 + 1000 + 500 */
    ASSERT(!has_consumer(adm, Q_STREAM, "g", "old"));
    ASSERT_EQ_INT(pending_of(adm, Q_STREAM, "g", "live"), 2500);
    ASSERT_EQ_INT(pending_total(adm, Q_STREAM, "g"), 2500);
    emq_admin_destroy(a);
    emq_conn_destroy(adm);
    emq_srv_stop(s);
}

TEST(admin_prune_missing_group_is_a_clear_error) {
    emq_srv *s = emq_srv_start(NULL);
    emq_conn_t *adm = admin_connect(s);
    emq_admin_t *a = admin_open(s, "jobs", "2");
    emq_prune_result res = {7, 7, 7, {0, 0, 0, 0}};
    emq_error err;
    /* No stream at all. */
    ASSERT_STATUS(emq_admin_prune_consumers(a, "nog", 0, &res, &err),
                  EMQ_ESERVER, &err);
    ASSERT_CONTAINS(err.message, "group 'nog' does not exist");
    ASSERT_EQ_INT(res.removed + res.moved + res.kept, 0);
    /* A stream without that group. */
    CMD_NOERR(adm, "XGROUP", "CREATE", Q_STREAM, "g", "$", "MKSTREAM");
    ASSERT_STATUS(emq_admin_prune_consumers(a, "nog", 0, &res, &err),
                  EMQ_ESERVER, &err);
    ASSERT_CONTAINS(err.message, "group 'nog' does not exist");
    /* Bad arguments. */
    ASSERT_STATUS(emq_admin_prune_consumers(a, "g", -1, &res, &err), EMQ_EINVAL,
                  &err);
    ASSERT_STATUS(emq_admin_prune_consumers(a, "", 0, &res, &err), EMQ_EINVAL,
                  &err);
    /* A group without consumers: nothing to do. */
    ASSERT_OK(emq_admin_prune_consumers(a, "g", 0, &res, &err), &err);
    ASSERT_EQ_INT(res.removed + res.moved + res.kept, 0);
    emq_admin_destroy(a);
    emq_conn_destroy(adm);
    emq_srv_stop(s);
}
