/* SPDX-License-Identifier: BSD-3-Clause */
/* test_admin_inspect.c: emq_admin_describe, emq_queue_info_json,
 * emq_admin_pending and emq_pending_json against a real redis-server.
 *
 * Describe: a missing stream is exists=0 without an error (its dead letters
 * still counted); an empty stream has no IDs; three groups at different
 * progress report pending, last-delivered, entries-read, lag, the oldest
 * pending entry with its age, and per consumer pending and idle (inactive
 * only where the server reports it), in RESP2 and RESP3 alike; after an
 * XDEL ahead of a group's cursor the server's lag is nil (7.0) and the
 * client counts it, in bounded XRANGE pages, equal to the true count; a key
 * of another type is EMQ_ESERVER. The JSON parses (python3), has every key,
 * prints a computed lag as a number with "lag_computed":true, and follows
 * snprintf semantics.
 *
 * Pending: filters by consumer, minimum idle time and max, oldest first,
 * with delivery counts; long lists are paged; NOGROUP names the group; bad
 * arguments are refused before any command is sent.
 */
#include "base/base.h" /* emq__alloc_fail_at */
#include "integ/admin_inspect_helpers.h"
#include "integ/ownership_helpers.h" /* replica_follow */

#define S_INSP "emq:{insp}"

/* ---- describe ------------------------------------------------------------ */

TEST(admin_describe_missing_stream_is_not_an_error) {
    emq_srv *s = emq_srv_start(NULL);
    emq_conn_t *conn = admin_connect(s);
    CMD_NOERR(conn, "XADD", "emq:{gone}:dead", "*", "emq.id", "1-0");
    emq_admin_t *a = admin_open(s, "gone", "2");
    emq_queue_info *info = NULL;
    emq_error err;
    ASSERT_OK(emq_admin_describe(a, &info, &err), &err);
    ASSERT_EQ_INT(info->exists, 0);
    ASSERT_EQ_STR(info->stream, "emq:{gone}");
    ASSERT_EQ_STR(info->dead, "emq:{gone}:dead");
    ASSERT_EQ_SIZE(info->length, 0);
    ASSERT_EQ_SIZE(info->ngroups, 0);
    ASSERT_EQ_STR(info->first_id.str, "");
    ASSERT_EQ_SIZE(info->dead_length, 1);
    char json[2048];
    size_t len = emq_queue_info_json(info, json, sizeof json);
    ASSERT_EQ_SIZE(len, strlen(json));
    ASSERT_CONTAINS(json, "\"exists\":false");
    ASSERT_CONTAINS(json, "\"groups\":[]");
    python_check(json, "import json,sys; d=json.load(sys.stdin); "
                       "assert d[\"exists\"] is False and d[\"first_id\"] is "
                       "None and d[\"dead_length\"]==1");
    emq_queue_info_free(info);
    emq_admin_destroy(a);
    emq_conn_destroy(conn);
    emq_srv_stop(s);
}

TEST(admin_describe_empty_stream_has_no_ids) {
    emq_srv *s = emq_srv_start(NULL);
    emq_conn_t *conn = admin_connect(s);
    CMD_NOERR(conn, "XGROUP", "CREATE", "emq:{empty}", "g", "$", "MKSTREAM");
    emq_admin_t *a = admin_open(s, "empty", "2");
    emq_queue_info *info = NULL;
    emq_error err;
    ASSERT_OK(emq_admin_describe(a, &info, &err), &err);
    ASSERT_EQ_INT(info->exists, 1);
    ASSERT_EQ_SIZE(info->length, 0);
    ASSERT_EQ_STR(info->first_id.str, "");
    ASSERT_EQ_STR(info->last_id.str, "");
    /* entries-added exists from Redis 7.0; before, it is unknown (-1). */
    ASSERT_EQ_INT(info->entries_added,
                  emq_srv_redis_at_least(s, 7, 0) ? 0 : -1);
    ASSERT_EQ_SIZE(info->dead_length, 0);
    ASSERT_EQ_SIZE(info->ngroups, 1);
    const emq_group_info *g = group_named(info, "g");
    ASSERT_EQ_SIZE(g->pending, 0);
    ASSERT_EQ_INT(g->lag, 0);
    ASSERT_EQ_SIZE(g->nconsumers, 0);
    ASSERT_EQ_STR(g->oldest_pending_id.str, "");
    ASSERT_EQ_INT(g->oldest_pending_age_ms, -1);
    char json[2048];
    emq_queue_info_json(info, json, sizeof json);
    python_check(json, "import json,sys; d=json.load(sys.stdin); "
                       "g=d[\"groups\"][0]; assert d[\"last_id\"] is None "
                       "and g[\"oldest_pending_id\"] is None and "
                       "g[\"lag\"]==0 and g[\"consumers\"]==[]");
    emq_queue_info_free(info);
    emq_admin_destroy(a);
    emq_conn_destroy(conn);
    emq_srv_stop(s);
}

/* Three groups at different progress on entries 1..10 (IDs <n>-0):
 *   g1: c1 read 1-4 and acked 1-2; then GAP_MS pass;
 *   g2: c1 read 1-3, c2 read 4-8, nothing acked;
 *   g3: created at the end, never read.
 * Three dead letters. Checked in RESP protocol `protocol`.
 * What was read after the gap must still look fresh (idle under the gap)
 * when describe runs, however slow the run: hence a scaled gap. */
#define GAP_MS emq_test_ms(800)
static void describe_progress(const char *protocol) {
    emq_srv *s = emq_srv_start(NULL);
    emq_conn_t *conn = admin_connect(s);
    add_ids(conn, S_INSP, 1, 10);
    CMD_NOERR(conn, "XGROUP", "CREATE", S_INSP, "g1", "0");
    CMD_NOERR(conn, "XGROUP", "CREATE", S_INSP, "g2", "0");
    CMD_NOERR(conn, "XGROUP", "CREATE", S_INSP, "g3", "$");
    ASSERT_EQ_SIZE(
        group_read(conn, S_INSP, "g1", "c1", "2", ">", 1, NULL, NULL), 2);
    ASSERT_EQ_SIZE(
        group_read(conn, S_INSP, "g1", "c1", "2", ">", 0, NULL, NULL), 2);
    usleep((useconds_t)GAP_MS * 1000);
    ASSERT_EQ_SIZE(
        group_read(conn, S_INSP, "g2", "c1", "3", ">", 0, NULL, NULL), 3);
    ASSERT_EQ_SIZE(
        group_read(conn, S_INSP, "g2", "c2", "5", ">", 0, NULL, NULL), 5);
    for (int i = 0; i < 3; i++)
        CMD_NOERR(conn, "XADD", "emq:{insp}:dead", "*", "emq.id", "1-0");

    emq_admin_t *a = admin_open(s, "insp", protocol);
    emq_queue_info *info = NULL;
    emq_error err;
    ASSERT_OK(emq_admin_describe(a, &info, &err), &err);
    ASSERT_EQ_INT(info->exists, 1);
    ASSERT_EQ_SIZE(info->length, 10);
    ASSERT_EQ_STR(info->first_id.str, "1-0");
    ASSERT_EQ_STR(info->last_id.str, "10-0");
    /* Redis 7.0 added entries-added, entries-read and lag to XINFO; 6.2
     * reports none of them: unknown (-1), and the client counts the lag. */
    int counters = emq_srv_redis_at_least(s, 7, 0);
    ASSERT_EQ_INT(info->entries_added, counters ? 10 : -1);
    /* The server as the connection learned it (HELLO, or INFO server with
     * protocol 2), and the capabilities that follow. */
    const emq_srv_server_info *srv = emq_srv_server(s);
    char caps[200] = "";
    const char *cap;
    for (size_t i = 0; (cap = emq_server_capability(&info->server, i)); i++)
        snprintf(caps + strlen(caps), sizeof caps - strlen(caps), "%s%s",
                 i ? ", " : "", cap);
    /* scripts/compat.sh puts this line into docs/COMPATIBILITY.md. */
    fprintf(stderr, "    server capabilities: %s\n", caps[0] ? caps : "none");
    ASSERT_EQ_STR(info->server.name, srv->name);
    ASSERT_EQ_STR(info->server.version, srv->version);
    ASSERT_EQ_INT(!!(info->server.capabilities & EMQ_CAP_STREAM_COUNTERS),
                  counters);
    ASSERT_EQ_INT(!!(info->server.capabilities & EMQ_CAP_XAUTOCLAIM_DELETED),
                  counters);
    ASSERT_EQ_INT(!!(info->server.capabilities & EMQ_CAP_CONSUMER_INACTIVE),
                  emq_srv_redis_at_least(s, 7, 2));
    ASSERT_EQ_SIZE(info->dead_length, 3);
    ASSERT_EQ_SIZE(info->ngroups, 3);

    /* Does this server report "inactive" (7.2+)? Decided by shape. */
    emq_reply *raw = CMD(conn, "XINFO", "CONSUMERS", S_INSP, "g1");
    char tmp[64];
    int has_inactive =
        field_of(emq_reply_at(raw, 0), "inactive", tmp, sizeof tmp);
    emq_reply_free(raw);

    const emq_group_info *g1 = group_named(info, "g1");
    ASSERT_EQ_SIZE(g1->pending, 2);
    ASSERT_EQ_STR(g1->last_delivered_id.str, "4-0");
    ASSERT_EQ_INT(g1->entries_read, counters ? 4 : -1);
    ASSERT_EQ_INT(g1->lag, 6);
    ASSERT_EQ_INT(g1->lag_computed, !counters);
    ASSERT_EQ_STR(g1->oldest_pending_id.str, "3-0");
    ASSERT(g1->oldest_pending_age_ms >= GAP_MS);
    ASSERT_EQ_SIZE(g1->nconsumers, 1);
    const emq_consumer_info *c = consumer_named(g1, "c1");
    ASSERT_EQ_SIZE(c->pending, 2);
    ASSERT(c->idle_ms >= GAP_MS);
    if (has_inactive)
        ASSERT(c->inactive_ms >= GAP_MS);
    else
        ASSERT_EQ_INT(c->inactive_ms, -1);

    const emq_group_info *g2 = group_named(info, "g2");
    ASSERT_EQ_SIZE(g2->pending, 8);
    ASSERT_EQ_STR(g2->last_delivered_id.str, "8-0");
    ASSERT_EQ_INT(g2->entries_read, counters ? 8 : -1);
    ASSERT_EQ_INT(g2->lag, 2);
    ASSERT_EQ_STR(g2->oldest_pending_id.str, "1-0");
    ASSERT(g2->oldest_pending_age_ms >= 0 &&
           g2->oldest_pending_age_ms < g1->oldest_pending_age_ms);
    ASSERT_EQ_SIZE(g2->nconsumers, 2);
    ASSERT_EQ_SIZE(consumer_named(g2, "c1")->pending, 3);
    ASSERT_EQ_SIZE(consumer_named(g2, "c2")->pending, 5);
    ASSERT(consumer_named(g2, "c2")->idle_ms < GAP_MS);

    const emq_group_info *g3 = group_named(info, "g3");
    ASSERT_EQ_SIZE(g3->pending, 0);
    ASSERT_EQ_STR(g3->last_delivered_id.str, "10-0");
    ASSERT_EQ_INT(g3->lag, 0);
    ASSERT_EQ_SIZE(g3->nconsumers, 0);
    ASSERT_EQ_STR(g3->oldest_pending_id.str, "");

    /* The JSON: parses, every key present, ids as strings. */
    char json[8192];
    size_t len = emq_queue_info_json(info, json, sizeof json);
    ASSERT(len < sizeof json);
    ASSERT_EQ_SIZE(len, strlen(json));
    ASSERT_CONTAINS(json, counters ? "\"entries_added\":10"
                                   : "\"entries_added\":null");
    ASSERT_CONTAINS(json, counters ? "\"lag\":6,\"lag_computed\":false"
                                   : "\"lag\":6,\"lag_computed\":true");
    python_check(
        json,
        "import json,sys; d=json.load(sys.stdin); "
        "top={\"stream\",\"dead\",\"exists\",\"length\",\"first_id\","
        "\"last_id\",\"entries_added\",\"server\",\"endpoint\",\"role\","
        "\"maxmemory_policy\",\"eviction_warning\",\"delayed\",\"priorities\",\"dead_length\","
        "\"groups\"}; "
        "assert d[\"maxmemory_policy\"]==\"noeviction\"; "
        "assert d[\"role\"]==\"master\"; "
        "assert d[\"delayed\"]=={\"waiting\":0,\"next_due_ms\":-1,\"set_aside\":0,\"orphaned\":0}; "
        "assert d[\"endpoint\"].startswith(\"127.0.0.1:\"); "
        "assert d[\"eviction_warning\"] is None; "
        "assert set(d)==top, d.keys(); "
        "assert set(d[\"server\"])=={\"name\",\"version\",\"capabilities\"}; "
        "gk={\"name\",\"pending\",\"last_delivered_id\",\"entries_read\","
        "\"lag\",\"lag_computed\",\"oldest_pending_id\","
        "\"oldest_pending_age_ms\",\"rate_limit\",\"max_in_flight\",\"limits_ignored\","
        "\"consumers\"}; "
        "ck={\"name\",\"pending\",\"idle_ms\",\"inactive_ms\"}; "
        "assert all(set(g)==gk for g in d[\"groups\"]); "
        "assert all(set(c)==ck for g in d[\"groups\"] for c in "
        "g[\"consumers\"]); "
        "g={x[\"name\"]:x for x in d[\"groups\"]}; "
        "assert g[\"g1\"][\"last_delivered_id\"]==\"4-0\"; "
        "assert g[\"g1\"][\"lag\"]==6; "
        "assert g[\"g1\"][\"rate_limit\"]==0; "
        "assert d[\"priorities\"] is None; "
        "assert g[\"g1\"][\"max_in_flight\"]==0; assert d[\"first_id\"]==\"1-0\" and d[\"dead_length\"]==3");
    ASSERT_CONTAINS(json, "\"oldest_pending_id\":\"3-0\"");

    /* snprintf semantics: a short buffer gets a NUL-terminated prefix and
     * the full length comes back. */
    char small[16];
    ASSERT_EQ_SIZE(emq_queue_info_json(info, small, sizeof small), len);
    ASSERT_EQ_SIZE(strlen(small), sizeof small - 1);
    ASSERT_EQ_SIZE(emq_queue_info_json(info, NULL, 0), len);

    emq_queue_info_free(info);
    emq_admin_destroy(a);
    emq_conn_destroy(conn);
    emq_srv_stop(s);
}

TEST(admin_describe_groups_at_different_progress_resp2) {
    describe_progress("2");
}

TEST(admin_describe_groups_at_different_progress_resp3) {
    describe_progress("3");
}

/* An XDEL ahead of a group's cursor makes the server's
 * lag nil (7.0). The client counts it in XRANGE pages of EMQ_ADMIN_PAGE. */
TEST(admin_describe_computes_nil_lag_after_xdel) {
    emq_srv *s = emq_srv_start(NULL);
    emq_conn_t *conn = admin_connect(s);
    produce_batch_n(s, "lagq", 0, 2500);
    const char *stream = "emq:{lagq}";
    CMD_NOERR(conn, "XGROUP", "CREATE", stream, "g", "0");
    CMD_NOERR(conn, "XGROUP", "CREATE", stream, "done", "$");
    char last[EMQ_ID_MAX];
    ASSERT_EQ_SIZE(group_read(conn, stream, "g", "c", "3", ">", 1, NULL, last),
                   3);
    /* Delete the entry right after the cursor, and one before it. */
    char start[EMQ_ID_MAX + 1], ahead[EMQ_ID_MAX], first[EMQ_ID_MAX];
    snprintf(start, sizeof start, "(%s", last);
    emq_reply *r = CMD(conn, "XRANGE", stream, start, "+", "COUNT", "1");
    reply_text(emq_reply_at(emq_reply_at(r, 0), 0), ahead, sizeof ahead);
    emq_reply_free(r);
    r = CMD(conn, "XRANGE", stream, "-", "+", "COUNT", "1");
    reply_text(emq_reply_at(emq_reply_at(r, 0), 0), first, sizeof first);
    emq_reply_free(r);
    ASSERT_EQ_INT(CMD_INT(conn, "XDEL", stream, ahead, first), 2);

    /* The truth, counted independently in one call. */
    r = CMD(conn, "XRANGE", stream, start, "+", "COUNT", "100000");
    long long truth = (long long)emq_reply_len(r);
    emq_reply_free(r);
    ASSERT_EQ_INT(truth, 2500 - 3 - 1);
    /* What the server says. */
    r = CMD(conn, "XINFO", "GROUPS", stream);
    int server_nil = 1;
    for (size_t i = 0; i < emq_reply_len(r); i++) {
        char name[16], lag[32];
        field_of(emq_reply_at(r, i), "name", name, sizeof name);
        if (strcmp(name, "g") == 0)
            server_nil =
                !field_of(emq_reply_at(r, i), "lag", lag, sizeof lag) ||
                lag[0] == '\0';
    }
    emq_reply_free(r);

    emq_admin_t *a = admin_open(s, "lagq", "2");
    long long xrange_before = 0, usec = 0, xrange_after = 0;
    cmdstat(conn, "xrange", &xrange_before, &usec);
    emq_queue_info *info = NULL;
    emq_error err;
    ASSERT_OK(emq_admin_describe(a, &info, &err), &err);
    cmdstat(conn, "xrange", &xrange_after, &usec);
    ASSERT_EQ_SIZE(info->length, 2498);
    const emq_group_info *g = group_named(info, "g");
    ASSERT_EQ_INT(g->lag, truth);
    ASSERT_EQ_SIZE(g->pending, 0);
    if (server_nil) {
        ASSERT_EQ_INT(g->lag_computed, 1);
        /* 2496 entries in pages of 1000: three XRANGE calls. */
        ASSERT_EQ_INT(xrange_after - xrange_before, 3);
    }
    /* "done" sits at the end: nothing to count, whatever the server says. */
    ASSERT_EQ_INT(group_named(info, "done")->lag, 0);

    char json[4096];
    emq_queue_info_json(info, json, sizeof json);
    char want[64];
    snprintf(want, sizeof want, "\"lag\":%lld,\"lag_computed\":%s", truth,
             server_nil ? "true" : "false");
    ASSERT_CONTAINS(json, want);
    python_check(json, "import json,sys; d=json.load(sys.stdin); "
                       "g=[x for x in d[\"groups\"] if x[\"name\"]==\"g\"][0];"
                       " assert g[\"lag\"]==2496");
    emq_queue_info_free(info);
    emq_admin_destroy(a);
    emq_conn_destroy(conn);
    emq_srv_stop(s);
}

/* The server's lag of group g in the XINFO GROUPS of stream; -1 when it
 * reports none (nil, or Redis 6.2 without the field). */
static long long server_lag(emq_conn_t *conn, const char *stream) {
    emq_reply *r = CMD(conn, "XINFO", "GROUPS", stream);
    long long lag = -1;
    for (size_t i = 0; i < emq_reply_len(r); i++) {
        const emq_reply *g = emq_reply_at(r, i);
        char name[16];
        field_of(g, "name", name, sizeof name);
        for (size_t k = 0; strcmp(name, "g") == 0 && k + 1 < emq_reply_len(g);
             k += 2) {
            char f[16];
            reply_text(emq_reply_at(g, k), f, sizeof f);
            if (strcmp(f, "lag") == 0 &&
                emq_reply_kind(emq_reply_at(g, k + 1)) == EMQ_REPLY_INTEGER)
                lag = emq_reply_integer(emq_reply_at(g, k + 1));
        }
    }
    emq_reply_free(r);
    return lag;
}

/* Redis 7.0 and 7.2 keep a stale read counter (entries-read) on a
 * replica, as a read reaches it as XCLAIM, which does not carry it, and
 * one that re-synced in full keeps the one it got then: after a
 * failover the new primary reports a lag that never clears on a drained
 * queue (700 here: the reads after the re-sync). The client shows the truth: 0
 * for a group at the last entry, every stored entry for one before the
 * first. Valkey 8.0 keeps the counter: nothing to correct. */
TEST_TIMEOUT(admin_describe_lag_true_after_a_failover, 90) {
    emq_srv *primary = emq_srv_start(NULL), *replica = emq_srv_start(NULL);
    replica_follow(replica, primary);
    emq_conn_t *conn = admin_connect(primary);
    const char *stream = "emq:{flq}";
    CMD_NOERR(conn, "XGROUP", "CREATE", stream, "g", "$", "MKSTREAM");
    for (int round = 0; round < 10; round++) {
        if (round == 3) { /* a full re-sync: the counter it keeps */
            ASSERT_EQ_INT(CMD_INT(conn, "WAIT", "1", "5000"), 1);
            replica_follow(replica, NULL);
            replica_follow(replica, primary);
        }
        produce_batch_n(primary, "flq", round * 100, 100);
        ASSERT_EQ_SIZE(
            group_read(conn, stream, "g", "c", "1000", ">", 1, NULL, NULL),
            100);
    }
    ASSERT_EQ_INT(CMD_INT(conn, "WAIT", "1", "5000"), 1);
    replica_follow(replica, NULL); /* the failover */
    emq_conn_t *now = admin_connect(replica);
    long long lag = server_lag(now, stream);
    printf("    the promoted replica's lag of a drained group: %lld\n", lag);

    emq_admin_t *a = admin_open(replica, "flq", "2");
    emq_queue_info *info = NULL;
    emq_error err;
    ASSERT_OK(emq_admin_describe(a, &info, &err), &err);
    const emq_group_info *g = group_named(info, "g");
    ASSERT_EQ_INT(g->lag, 0);
    ASSERT_EQ_INT(g->lag_computed, lag != 0);
    char json[4096];
    emq_queue_info_json(info, json, sizeof json);
    ASSERT_CONTAINS(json, "\"lag\":0,");
    emq_queue_info_free(info);

    /* Five more, the stream trimmed to three: the group's cursor is
     * before the first entry, and three wait. */
    produce_batch_n(replica, "flq", 1000, 5);
    CMD_INT(now, "XTRIM", stream, "MAXLEN", "3");
    printf("    after 5 more and a trim to 3: %lld\n", server_lag(now, stream));
    ASSERT_OK(emq_admin_describe(a, &info, &err), &err);
    ASSERT_EQ_INT(group_named(info, "g")->lag, 3);
    emq_queue_info_free(info);
    emq_admin_destroy(a);
    emq_conn_destroy(now);
    emq_conn_destroy(conn);
    emq_srv_stop(replica);
    emq_srv_stop(primary);
}

TEST(admin_describe_wrong_type_is_eserver) {
    emq_srv *s = emq_srv_start(NULL);
    emq_conn_t *conn = admin_connect(s);
    CMD_NOERR(conn, "SET", "emq:{wt}", "x");
    emq_admin_t *a = admin_open(s, "wt", "2");
    emq_queue_info *info = (emq_queue_info *)(uintptr_t)1;
    emq_error err;
    ASSERT_STATUS(emq_admin_describe(a, &info, &err), EMQ_ESERVER, &err);
    ASSERT(info == NULL);
    ASSERT_CONTAINS(err.message, "WRONGTYPE");
    ASSERT_CONTAINS(err.message, "emq:{wt}");
    emq_admin_destroy(a);
    emq_conn_destroy(conn);
    emq_srv_stop(s);
}

/* ---- pending ------------------------------------------------------------- */

/* Entries 1..7: c1 holds 1-3; c2 holds 4-5 (delivered twice) and, after
 * GAP_MS, 6-7. 6-7 must still look fresh (idle under 3/4 of the gap) when
 * the tests filter by idle time, however slow the run. */
static void pending_setup(emq_conn_t *conn) {
    add_ids(conn, S_INSP, 1, 7);
    CMD_NOERR(conn, "XGROUP", "CREATE", S_INSP, "g", "0");
    ASSERT_EQ_SIZE(group_read(conn, S_INSP, "g", "c1", "3", ">", 0, NULL, NULL),
                   3);
    ASSERT_EQ_SIZE(group_read(conn, S_INSP, "g", "c2", "2", ">", 0, NULL, NULL),
                   2);
    ASSERT_EQ_SIZE(
        group_read(conn, S_INSP, "g", "c2", "10", "0", 0, NULL, NULL), 2);
    usleep((useconds_t)GAP_MS * 1000);
    ASSERT_EQ_SIZE(group_read(conn, S_INSP, "g", "c2", "2", ">", 0, NULL, NULL),
                   2);
}

/* Lists pending entries and checks their IDs ("1,2,3" as ms parts). */
static void expect_pending(emq_admin_t *a, const char *consumer,
                           int64_t min_idle, size_t max, const char *want) {
    emq_pending_entry *list = NULL;
    size_t n = 99;
    emq_error err;
    ASSERT_OK(
        emq_admin_pending(a, "g", consumer, min_idle, max, &list, &n, &err),
        &err);
    char got[256] = "";
    for (size_t i = 0; i < n; i++) {
        char one[40];
        snprintf(one, sizeof one, "%s%.*s", i ? "," : "",
                 (int)strcspn(list[i].id.str, "-"), list[i].id.str);
        strncat(got, one, sizeof got - strlen(got) - 1);
    }
    emq_free_array(list);
    if (strcmp(got, want) != 0)
        FAIL("pending(consumer=%s, min_idle=%lld, max=%zu): got [%s], want "
             "[%s]",
             consumer ? consumer : "(all)", (long long)min_idle, max, got,
             want);
}

TEST(admin_pending_filters_by_consumer_idle_and_max) {
    emq_srv *s = emq_srv_start(NULL);
    emq_conn_t *conn = admin_connect(s);
    pending_setup(conn);
    emq_admin_t *a = admin_open(s, "insp", "2");
    /* The idle filters first, while 6-7 are still fresh. */
    expect_pending(a, NULL, GAP_MS * 3 / 4, 100, "1,2,3,4,5");
    expect_pending(a, "c2", GAP_MS * 3 / 4, 100, "4,5");

    emq_pending_entry *list = NULL;
    size_t n = 0;
    emq_error err;
    ASSERT_OK(emq_admin_pending(a, "g", NULL, 0, 100, &list, &n, &err), &err);
    ASSERT_EQ_SIZE(n, 7);
    const char *owners[] = {"c1", "c1", "c1", "c2", "c2", "c2", "c2"};
    const uint64_t counts[] = {1, 1, 1, 2, 2, 1, 1};
    for (size_t i = 0; i < n; i++) {
        char id[32];
        snprintf(id, sizeof id, "%zu-0", i + 1);
        ASSERT_EQ_STR(list[i].id.str, id);
        ASSERT_EQ_STR(list[i].consumer, owners[i]);
        ASSERT_EQ_SIZE(list[i].deliveries, counts[i]);
        if (i < 5)
            ASSERT(list[i].idle_ms >= GAP_MS);
        else
            ASSERT(list[i].idle_ms < GAP_MS);
    }
    /* JSON lines: one object per entry, each line valid JSON. */
    char json[4096];
    size_t len = emq_pending_json(list, n, json, sizeof json);
    ASSERT_EQ_SIZE(len, strlen(json));
    ASSERT_CONTAINS(json, "{\"id\":\"4-0\",\"consumer\":\"c2\",\"idle_ms\":");
    ASSERT_CONTAINS(json, ",\"deliveries\":2,\"in_hand_ms\":null}\n");
    python_check(json, "import json,sys; rows=[json.loads(l) for l in "
                       "sys.stdin.read().splitlines()]; "
                       "assert len(rows)==7; "
                       "assert all(set(r)=={\"id\",\"consumer\",\"idle_ms\","
                       "\"deliveries\",\"in_hand_ms\"} for r in rows); "
                       "assert all(r[\"in_hand_ms\"] is None for r in rows); "
                       "assert [r[\"id\"] for r in rows][0]==\"1-0\"");
    char small[8];
    ASSERT_EQ_SIZE(emq_pending_json(list, n, small, sizeof small), len);
    emq_free_array(list);

    expect_pending(a, "c2", 0, 100, "4,5,6,7");
    expect_pending(a, "c1", 0, 100, "1,2,3");
    expect_pending(a, NULL, 0, 2, "1,2");
    expect_pending(a, "c2", 0, 3, "4,5,6");
    expect_pending(a, "nobody", 0, 100, "");
    expect_pending(a, NULL, 60000, 100, "");
    expect_pending(a, NULL, 0, 0, "");

    emq_admin_destroy(a);
    emq_conn_destroy(conn);
    emq_srv_stop(s);
}

TEST(admin_pending_pages_long_lists_in_order) {
    emq_srv *s = emq_srv_start(NULL);
    emq_conn_t *conn = admin_connect(s);
    produce_batch_n(s, "longp", 0, 2500);
    const char *stream = "emq:{longp}";
    CMD_NOERR(conn, "XGROUP", "CREATE", stream, "g", "0");
    ASSERT_EQ_SIZE(
        group_read(conn, stream, "g", "c", "5000", ">", 0, NULL, NULL), 2500);
    emq_admin_t *a = admin_open(s, "longp", "2");
    long long before = 0, after = 0, usec = 0;
    cmdstat(conn, "xpending", &before, &usec);
    emq_pending_entry *list = NULL;
    size_t n = 0;
    emq_error err;
    ASSERT_OK(emq_admin_pending(a, "g", NULL, 0, 2100, &list, &n, &err), &err);
    cmdstat(conn, "xpending", &after, &usec);
    ASSERT_EQ_SIZE(n, 2100);
    ASSERT_EQ_INT(after - before, 3); /* pages of 1000, 1000, 100 */
    emq_id ids[2500];
    ASSERT_EQ_SIZE(stream_ids(conn, stream, ids, 2500), 2500);
    for (size_t i = 0; i < n; i++)
        ASSERT_EQ_STR(list[i].id.str, ids[i].str);
    emq_free_array(list);
    ASSERT_OK(emq_admin_pending(a, "g", "c", 0, SIZE_MAX, &list, &n, &err),
              &err);
    ASSERT_EQ_SIZE(n, 2500);
    ASSERT_EQ_STR(list[2499].id.str, ids[2499].str);
    emq_free_array(list);
    emq_admin_destroy(a);
    emq_conn_destroy(conn);
    emq_srv_stop(s);
}

TEST(admin_pending_nogroup_names_the_group) {
    emq_srv *s = emq_srv_start(NULL);
    emq_conn_t *conn = admin_connect(s);
    emq_admin_t *a = admin_open(s, "insp", "2");
    emq_pending_entry *list = (emq_pending_entry *)(uintptr_t)1;
    size_t n = 7;
    emq_error err;
    /* No stream at all, then a stream without that group. */
    for (int round = 0; round < 2; round++) {
        ASSERT_STATUS(
            emq_admin_pending(a, "nosuch", NULL, 0, 10, &list, &n, &err),
            EMQ_ESERVER, &err);
        ASSERT(list == NULL);
        ASSERT_EQ_SIZE(n, 0);
        ASSERT_CONTAINS(err.message, "'nosuch'");
        ASSERT_CONTAINS(err.message, "NOGROUP");
        CMD_NOERR(conn, "XADD", S_INSP, "*", "a", "b");
    }
    emq_admin_destroy(a);
    emq_conn_destroy(conn);
    emq_srv_stop(s);
}

TEST(admin_inspect_bad_arguments_send_nothing) {
    emq_srv *s = emq_srv_start(NULL);
    emq_admin_t *a = admin_open(s, "insp", "2");
    emq_pending_entry *list = NULL;
    size_t n = 0;
    emq_error err;
    long long before = commands_total(s);
    ASSERT_STATUS(emq_admin_pending(a, NULL, NULL, 0, 10, &list, &n, &err),
                  EMQ_EINVAL, &err);
    ASSERT_CONTAINS(err.message, "group");
    ASSERT_STATUS(emq_admin_pending(a, "", NULL, 0, 10, &list, &n, &err),
                  EMQ_EINVAL, &err);
    ASSERT_STATUS(emq_admin_pending(a, "g", "", 0, 10, &list, &n, &err),
                  EMQ_EINVAL, &err);
    ASSERT_CONTAINS(err.message, "consumer");
    ASSERT_STATUS(emq_admin_pending(a, "g", NULL, -1, 10, &list, &n, &err),
                  EMQ_EINVAL, &err);
    ASSERT_CONTAINS(err.message, "min_idle_ms");
    ASSERT_STATUS(emq_admin_pending(a, "g", NULL, 0, 10, NULL, &n, &err),
                  EMQ_EINVAL, &err);
    emq_queue_info *info;
    ASSERT_STATUS(emq_admin_describe(a, NULL, &err), EMQ_EINVAL, &err);
    ASSERT_STATUS(emq_admin_describe(NULL, &info, &err), EMQ_EINVAL, &err);
    /* Only the INFO of commands_total itself. */
    ASSERT_EQ_INT(commands_total(s) - before, 1);
    emq_admin_destroy(a);
    emq_srv_stop(s);
}

/* Every allocation of describe and pending may fail: each failure comes
 * back as a status (EMQ_ENOMEM, or the transport error when the failing
 * allocation was the connection's), nothing leaks (the runner checks), and
 * with no failure armed the call succeeds. */
TEST(admin_inspect_survives_every_allocation_failure) {
    emq_srv *s = emq_srv_start(NULL);
    emq_conn_t *conn = admin_connect(s);
    pending_setup(conn);
    CMD_NOERR(conn, "XGROUP", "CREATE", S_INSP, "h", "0");
    ASSERT_EQ_SIZE(group_read(conn, S_INSP, "h", "c9", "2", ">", 0, NULL, NULL),
                   2);
    ASSERT_EQ_INT(CMD_INT(conn, "XDEL", S_INSP, "5-0"), 1); /* nil lag */
    int done_describe = 0, done_pending = 0;
    for (uint64_t n = 1; n < 500 && !(done_describe && done_pending); n++) {
        emq_admin_t *a = admin_open(s, "insp", "2");
        emq_error err;
        if (!done_describe) {
            emq_queue_info *info = NULL;
            emq__alloc_fail_at(n);
            emq_status st = emq_admin_describe(a, &info, &err);
            emq__alloc_fail_at(0);
            if (st == EMQ_OK) {
                done_describe = 1;
                ASSERT_EQ_SIZE(info->ngroups, 2);
                ASSERT_EQ_INT(group_named(info, "h")->lag_computed, 1);
                emq_queue_info_free(info);
            } else {
                ASSERT(info == NULL);
                ASSERT(err.message[0] != '\0');
            }
        }
        if (!done_pending) {
            emq_pending_entry *list = NULL;
            size_t k = 0;
            emq__alloc_fail_at(n);
            emq_status st =
                emq_admin_pending(a, "g", NULL, 0, 100, &list, &k, &err);
            emq__alloc_fail_at(0);
            if (st == EMQ_OK) {
                done_pending = 1;
                ASSERT_EQ_SIZE(k, 7);
            } else {
                ASSERT(list == NULL);
            }
            emq_free_array(list);
        }
        emq_admin_destroy(a);
    }
    ASSERT(done_describe && done_pending);
    emq_conn_destroy(conn);
    emq_srv_stop(s);
}

/* An error reply's code travels with the failure (emq_error.reply_code),
 * for a program to compare instead of matching the message: NOGROUP from
 * the admin verbs, WRONGTYPE from the producer; a failure that is not an
 * error reply has none. */
TEST_TIMEOUT(errors_carry_the_servers_code, 20) {
    emq_srv *s = emq_srv_start(NULL);
    char out[64];
    emq_srv_cmd(s, out, sizeof out, "XADD", "emq:{codes}", "*", "a", "b", NULL);
    emq_admin_t *a = admin_open(s, "codes", "2");
    emq_error err;
    emq_pending_entry *e = NULL;
    size_t n = 0;
    ASSERT_STATUS(emq_admin_pending(a, "nope", NULL, 0, 10, &e, &n, &err),
                  EMQ_ESERVER, &err);
    ASSERT_EQ_STR(err.reply_code, "NOGROUP");
    ASSERT_CONTAINS(err.message, "NOGROUP"); /* the words stay too */
    ASSERT_STATUS(emq_admin_pending(a, "", NULL, 0, 10, &e, &n, &err),
                  EMQ_EINVAL, &err);
    ASSERT_EQ_STR(err.reply_code, ""); /* refused here, not by the server */
    emq_admin_destroy(a);
    emq_srv_cmd(s, out, sizeof out, "SET", "emq:{str}", "x", NULL);
    emq_conf_t *wrong = conf_for(emq_srv_url(s));
    conf_set(wrong, "queue", "str");
    emq_producer_t *p;
    ASSERT_OK(emq_producer_new(wrong, &p, &err), &err);
    emq_field f = {"v", 1, "x", 1};
    emq_id id;
    ASSERT_STATUS(emq_produce(p, &f, 1, &id, &err), EMQ_ESERVER, &err);
    ASSERT_EQ_STR(err.reply_code, "WRONGTYPE");
    emq_producer_destroy(p);
    emq_conf_destroy(wrong);
    emq_srv_stop(s);
}
