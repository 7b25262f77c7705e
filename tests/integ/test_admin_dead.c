/* SPDX-License-Identifier: BSD-3-Clause */
/* test_admin_dead.c: listing, requeueing and purging dead letters
 * (emq_admin_dead_*) against a real redis-server.
 *
 * A listing splits each dead letter into its origin (the five leading
 * emq.* pairs) and the original fields, binary-safe, in caller-owned
 * memory; its JSON lines keep bytes that are not UTF-8 as base64. A
 * requeue puts the original fields back on the stream under a new ID and
 * removes the dead letter in one step; unknown IDs are reported after the
 * others moved. Purge reports how many it deleted, also when there are
 * none. End to end: a poison entry dead-lettered by a consumer with
 * max_deliveries=2 is listed with its reason and fields, requeued, and
 * handled by a consumer with its original fields.
 */
#include "integ/admin_ops_helpers.h"

#include "base/base.h" /* allocation-failure hooks */

#define Q_STREAM "emq:{jobs}"
#define Q_DEAD "emq:{jobs}:dead"

/* Makes the queue's stream have issued IDs up to 9999-0 (one entry added
 * and deleted) when it does not exist, so a requeue finds that the
 * origins of the letters below were in the queue. */
static void seed_issued(emq_conn_t *adm) {
    if (CMD_INT(adm, "EXISTS", Q_STREAM) == 0) {
        CMD_NOERR(adm, "XADD", Q_STREAM, "9999-0", "seed", "1");
        ASSERT_EQ_INT(CMD_INT(adm, "XDEL", Q_STREAM, "9999-0"), 1);
    }
}

/* Adds a dead letter for origin id with fields n=value and bin=\xff\0x,
 * then a field that reuses the name "emq.id". Returns its ID in out. */
static void add_dead(emq_conn_t *adm, const char *origin, const char *value,
                     emq_id *out) {
    seed_issued(adm);
    const char *argv[] = {"XADD",    Q_DEAD,
                          "*",       "emq.id",
                          origin,    "emq.group",
                          "g",       "emq.consumer",
                          "w",       "emq.deliveries",
                          "3",       "emq.reason",
                          "boom",    "n",
                          value,     "bin",
                          "\xff\0x", "emq.id",
                          "again"};
    size_t lens[19];
    for (size_t i = 0; i < 19; i++)
        lens[i] = strlen(argv[i]);
    lens[16] = 3;
    emq_reply *r = NULL;
    emq_error err;
    ASSERT_OK(emq_conn_command(adm, 19, argv, lens, &r, &err), &err);
    ASSERT_EQ_INT(emq_reply_kind(r), EMQ_REPLY_STRING);
    reply_text(r, out->str, sizeof out->str);
    emq_reply_free(r);
}

/* Checks the fields of an entry of the stream (n=value, bin, emq.id). */
static void check_requeued(const emq_reply *entry, const char *value) {
    const emq_reply *f = emq_reply_at(entry, 1);
    ASSERT_EQ_SIZE(emq_reply_len(f), 6);
    size_t len = 0;
    const char *p = emq_reply_str(emq_reply_at(f, 0), &len);
    ASSERT_EQ_MEM(p, len, "n", 1);
    p = emq_reply_str(emq_reply_at(f, 1), &len);
    ASSERT_EQ_MEM(p, len, value, strlen(value));
    p = emq_reply_str(emq_reply_at(f, 3), &len);
    ASSERT_EQ_MEM(p, len, "\xff\0x", 3);
    p = emq_reply_str(emq_reply_at(f, 4), &len);
    ASSERT_EQ_MEM(p, len, "emq.id", 6);
}

TEST(admin_dead_list_splits_origin_and_binary_fields) {
    emq_srv *s = emq_srv_start(NULL);
    emq_conn_t *adm = admin_connect(s);
    emq_id d[2];
    add_dead(adm, "5-0", "v1", &d[0]);
    /* A letter whose name and value are not UTF-8, and no reason pair. */
    const char *argv[] = {"XADD",      Q_DEAD, "*",    "emq.id", "6-0",
                          "emq.group", "g",    "\xfe", "\x80"};
    emq_reply *r = NULL;
    emq_error err;
    ASSERT_OK(emq_conn_command(adm, 9, argv, NULL, &r, &err), &err);
    reply_text(r, d[1].str, sizeof d[1].str);
    emq_reply_free(r);

    emq_admin_t *a = admin_open(s, "jobs", "2");
    emq_dead_letter *letters = NULL;
    size_t n = 0;
    ASSERT_OK(emq_admin_dead_list(a, 0, &letters, &n, &err), &err);
    ASSERT_EQ_SIZE(n, 2);
    emq_dead_letter *l = &letters[0];
    ASSERT_EQ_STR(l->id.str, d[0].str);
    ASSERT_EQ_STR(l->origin_id.str, "5-0");
    ASSERT_EQ_STR(l->group, "g");
    ASSERT_EQ_STR(l->consumer, "w");
    ASSERT_EQ_INT(l->deliveries, 3);
    ASSERT_EQ_STR(l->reason, "boom");
    ASSERT_EQ_SIZE(l->nfields, 3);
    ASSERT_EQ_MEM(l->fields[0].name, l->fields[0].name_len, "n", 1);
    ASSERT_EQ_MEM(l->fields[0].value, l->fields[0].value_len, "v1", 2);
    ASSERT_EQ_MEM(l->fields[1].value, l->fields[1].value_len, "\xff\0x", 3);
    ASSERT_EQ_MEM(l->fields[2].name, l->fields[2].name_len, "emq.id", 6);
    ASSERT_EQ_MEM(l->fields[2].value, l->fields[2].value_len, "again", 5);
    l = &letters[1];
    ASSERT_EQ_STR(l->origin_id.str, "6-0");
    ASSERT_EQ_STR(l->consumer, "");
    ASSERT_EQ_STR(l->reason, "");
    ASSERT_EQ_INT(l->deliveries, 0);
    ASSERT_EQ_SIZE(l->nfields, 1);

    /* JSON lines, sized by a first call. */
    size_t need = emq_dead_letters_json(letters, n, NULL, 0);
    char *json = malloc(need + 1);
    ASSERT(json != NULL);
    ASSERT_EQ_SIZE(emq_dead_letters_json(letters, n, json, need + 1), need);
    ASSERT_EQ_SIZE(strlen(json), need);
    ASSERT_CONTAINS(json, "\"deliveries\":3,\"fields\":{\"n\":\"v1\","
                          "\"bin\":{\"base64\":\"/wB4\"},"
                          "\"emq.id\":\"again\"},\"origin_id\":\"5-0\","
                          "\"group\":\"g\",\"consumer\":\"w\","
                          "\"reason\":\"boom\"}\n");
    /* A name that is not UTF-8: the fields come as [name, value] pairs so
     * the line stays strict JSON. */
    ASSERT_CONTAINS(json, "\"fields\":[[{\"base64\":\"/g==\"},"
                          "{\"base64\":\"gA==\"}]],\"origin_id\":\"6-0\"");
    ASSERT(strncmp(json, "{\"id\":\"", 7) == 0);
    char *second = strchr(json, '\n');
    ASSERT(second != NULL && strchr(second + 1, '\n') == json + need - 1);
    /* A short buffer gets a NUL-terminated prefix and the full length. */
    char small[16];
    ASSERT_EQ_SIZE(emq_dead_letters_json(letters, n, small, sizeof small),
                   need);
    ASSERT_EQ_SIZE(strlen(small), sizeof small - 1);
    free(json);
    emq_dead_letters_free(letters, n);

    /* At most max. */
    ASSERT_OK(emq_admin_dead_list(a, 1, &letters, &n, &err), &err);
    ASSERT_EQ_SIZE(n, 1);
    ASSERT_EQ_STR(letters[0].id.str, d[0].str);
    emq_dead_letters_free(letters, n);
    /* None. */
    CMD_NOERR(adm, "DEL", Q_DEAD);
    ASSERT_OK(emq_admin_dead_list(a, 0, &letters, &n, &err), &err);
    ASSERT_EQ_SIZE(n, 0);
    ASSERT(letters == NULL);
    emq_dead_letters_free(NULL, 0);
    emq_admin_destroy(a);
    emq_conn_destroy(adm);
    emq_srv_stop(s);
}

TEST(admin_dead_requeue_moves_some_and_reports_unknown_ids_after) {
    emq_srv *s = emq_srv_start(NULL);
    emq_conn_t *adm = admin_connect(s);
    emq_id d[3];
    add_dead(adm, "1-0", "a", &d[0]);
    add_dead(adm, "2-0", "b", &d[1]);
    add_dead(adm, "3-0", "c", &d[2]);
    emq_admin_t *a = admin_open(s, "jobs", "3"); /* RESP3 */
    uint64_t moved = 99;
    emq_error err;
    const char *ids[] = {d[0].str, "9-9", "not-an-id", d[2].str};
    ASSERT_STATUS(emq_admin_dead_requeue(a, ids, 4, &moved, &err), EMQ_EINVAL,
                  &err);
    ASSERT_EQ_INT(moved, 2);
    ASSERT_CONTAINS(err.message, "'9-9'");
    ASSERT_CONTAINS(err.message, "2 of 4");
    ASSERT_EQ_INT(CMD_INT(adm, "XLEN", Q_DEAD), 1);
    emq_reply *r = CMD(adm, "XRANGE", Q_STREAM, "-", "+");
    ASSERT_EQ_SIZE(emq_reply_len(r), 2);
    check_requeued(emq_reply_at(r, 0), "a");
    check_requeued(emq_reply_at(r, 1), "c");
    emq_reply_free(r);
    r = CMD(adm, "XRANGE", Q_DEAD, "-", "+");
    char left[EMQ_ID_MAX];
    ASSERT_EQ_STR(
        reply_text(emq_reply_at(emq_reply_at(r, 0), 0), left, sizeof left),
        d[1].str);
    emq_reply_free(r);
    /* The same ID again: already gone. */
    ASSERT_STATUS(emq_admin_dead_requeue(a, ids, 1, &moved, &err), EMQ_EINVAL,
                  &err);
    ASSERT_EQ_INT(moved, 0);
    /* All that is left. */
    ASSERT_OK(emq_admin_dead_requeue(a, NULL, 0, &moved, &err), &err);
    ASSERT_EQ_INT(moved, 1);
    ASSERT_EQ_INT(CMD_INT(adm, "XLEN", Q_DEAD), 0);
    r = CMD(adm, "XRANGE", Q_STREAM, "-", "+");
    ASSERT_EQ_SIZE(emq_reply_len(r), 3);
    check_requeued(emq_reply_at(r, 2), "b");
    emq_reply_free(r);
    /* Nothing to requeue. */
    ASSERT_OK(emq_admin_dead_requeue(a, NULL, 0, &moved, &err), &err);
    ASSERT_EQ_INT(moved, 0);
    emq_admin_destroy(a);
    emq_conn_destroy(adm);
    emq_srv_stop(s);
}

TEST(admin_dead_requeue_all_pages_through_many) {
    emq_srv *s = emq_srv_start(NULL);
    emq_conn_t *adm = admin_connect(s);
    seed_issued(adm);
    ASSERT_EQ_INT(CMD_INT(adm, "EVAL",
                          "for i = 1, 2100 do redis.call('XADD', KEYS[1], '*',"
                          " 'emq.id', i .. '-0', 'emq.group', 'g', "
                          "'emq.consumer', 'w', 'emq.deliveries', 2, "
                          "'emq.reason', 'r', 'n', i) end\n"
                          "return redis.call('XLEN', KEYS[1])",
                          "1", Q_DEAD),
                  2100);
    emq_admin_t *a = admin_open(s, "jobs", "2");
    uint64_t moved = 0;
    emq_error err;
    ASSERT_OK(emq_admin_dead_requeue(a, NULL, 0, &moved, &err), &err);
    ASSERT_EQ_INT(moved, 2100);
    ASSERT_EQ_INT(CMD_INT(adm, "XLEN", Q_DEAD), 0);
    ASSERT_EQ_INT(CMD_INT(adm, "XLEN", Q_STREAM), 2100);
    /* In their original order. */
    emq_reply *r = CMD(adm, "XRANGE", Q_STREAM, "-", "+");
    for (size_t i = 0; i < 2100; i++) {
        char v[16], want[16];
        snprintf(want, sizeof want, "%zu", i + 1);
        reply_text(emq_reply_at(emq_reply_at(emq_reply_at(r, i), 1), 1), v,
                   sizeof v);
        ASSERT_EQ_STR(v, want);
    }
    emq_reply_free(r);
    emq_admin_destroy(a);
    emq_conn_destroy(adm);
    emq_srv_stop(s);
}

TEST(admin_dead_purge_reports_the_count_also_when_empty) {
    emq_srv *s = emq_srv_start(NULL);
    emq_conn_t *adm = admin_connect(s);
    emq_admin_t *a = admin_open(s, "jobs", "2");
    uint64_t removed = 99;
    emq_error err;
    ASSERT_OK(emq_admin_dead_purge(a, &removed, &err), &err);
    ASSERT_EQ_INT(removed, 0);
    emq_id d[3];
    for (int i = 0; i < 3; i++)
        add_dead(adm, "1-0", "x", &d[i]);
    ASSERT_OK(emq_admin_dead_purge(a, &removed, &err), &err);
    ASSERT_EQ_INT(removed, 3);
    ASSERT_EQ_INT(CMD_INT(adm, "EXISTS", Q_DEAD), 0);
    /* Not a stream: the server's error. */
    CMD_NOERR(adm, "SET", Q_DEAD, "x");
    ASSERT_STATUS(emq_admin_dead_purge(a, &removed, &err), EMQ_ESERVER, &err);
    ASSERT_CONTAINS(err.message, "WRONGTYPE");
    emq_admin_destroy(a);
    emq_conn_destroy(adm);
    emq_srv_stop(s);
}

TEST(admin_dead_poison_entry_listed_requeued_and_handled) {
    emq_srv *s = emq_srv_start(NULL);
    emq_conn_t *adm = admin_connect(s);
    CMD_NOERR(adm, "XGROUP", "CREATE", Q_STREAM, "g", "$", "MKSTREAM");
    static recorder r1;
    recorder_init(&r1);
    r1.retry_value = "poison";
    emq_conf_t *conf = consumer_conf(s, "jobs", "g", "w", "new");
    conf_set(conf, "max_deliveries", "2");
    conf_set(conf, "claim.min_idle_ms", "100");
    conf_set(conf, "claim.interval_ms", "20");
    emq_consumer_t *c1 = recording_consumer(conf, &r1);
    runner_thread t1;
    start_consumer(&t1, c1);
    emq_producer_t *p = producer_for(s, "jobs");
    emq_field fields[2] = {{"n", 1, "poison", 6}, {"raw", 3, "\x01\xff", 2}};
    emq_id origin;
    emq_error err;
    ASSERT_OK(emq_produce(p, fields, 2, &origin, &err), &err);
    emq_producer_destroy(p);
    WAIT_UNTIL(CMD_INT(adm, "XLEN", Q_DEAD) == 1 &&
                   pending_total(adm, Q_STREAM, "g") == 0,
               5000, "the dead letter");
    ASSERT_OK(stop_consumer(&t1), &t1.err);
    emq_consumer_destroy(c1);

    emq_admin_t *a = admin_open(s, "jobs", "2");
    emq_dead_letter *letters = NULL;
    size_t n = 0;
    ASSERT_OK(emq_admin_dead_list(a, 10, &letters, &n, &err), &err);
    ASSERT_EQ_SIZE(n, 1);
    ASSERT_EQ_STR(letters[0].origin_id.str, origin.str);
    ASSERT_EQ_STR(letters[0].group, "g");
    ASSERT_EQ_STR(letters[0].consumer, "w");
    ASSERT_EQ_INT(letters[0].deliveries, 2);
    ASSERT_EQ_STR(letters[0].reason, "cannot handle poison yet");
    ASSERT_EQ_SIZE(letters[0].nfields, 2);
    ASSERT_EQ_MEM(letters[0].fields[0].value, letters[0].fields[0].value_len,
                  "poison", 6);
    ASSERT_EQ_MEM(letters[0].fields[1].value, letters[0].fields[1].value_len,
                  "\x01\xff", 2);
    const char *ids[] = {letters[0].id.str};
    uint64_t moved = 0;
    ASSERT_OK(emq_admin_dead_requeue(a, ids, 1, &moved, &err), &err);
    ASSERT_EQ_INT(moved, 1);
    emq_dead_letters_free(letters, n);
    ASSERT_EQ_INT(CMD_INT(adm, "XLEN", Q_DEAD), 0);

    /* A consumer that can handle it now gets it anew, fields intact. */
    static recorder r2;
    recorder_init(&r2);
    emq_consumer_t *c2 =
        recording_consumer(consumer_conf(s, "jobs", "g", "w2", "new"), &r2);
    runner_thread t2;
    start_consumer(&t2, c2);
    wait_for(&r2, 1, 5000);
    WAIT_UNTIL(pending_total(adm, Q_STREAM, "g") == 0, 5000, "the ack");
    ASSERT_OK(stop_consumer(&t2), &t2.err);
    ASSERT_EQ_SIZE(r2.n, 1);
    ASSERT_EQ_STR(r2.values[0], "poison");
    ASSERT_EQ_INT(r2.deliveries[0], 1);
    ASSERT(strcmp(r2.ids[0], origin.str) != 0);
    emq_reply *e = CMD(adm, "XRANGE", Q_STREAM, r2.ids[0], r2.ids[0]);
    const emq_reply *f = emq_reply_at(emq_reply_at(e, 0), 1);
    ASSERT_EQ_SIZE(emq_reply_len(f), 4);
    size_t len = 0;
    const char *v = emq_reply_str(emq_reply_at(f, 3), &len);
    ASSERT_EQ_MEM(v, len, "\x01\xff", 2);
    emq_reply_free(e);
    emq_consumer_destroy(c2);
    emq_admin_destroy(a);
    emq_conn_destroy(adm);
    emq_srv_stop(s);
}

TEST(admin_dead_list_and_prune_survive_every_allocation_failure) {
    emq_srv *s = emq_srv_start(NULL);
    emq_conn_t *adm = admin_connect(s);
    emq_id d[2];
    add_dead(adm, "1-0", "a", &d[0]);
    add_dead(adm, "2-0", "b", &d[1]);
    CMD_NOERR(adm, "XGROUP", "CREATE", Q_STREAM, "g", "$", "MKSTREAM");
    emq_reply_free(CMD(adm, "XADD", Q_STREAM, "*", "n", "1"));
    ASSERT_EQ_INT(take_new(adm, Q_STREAM, "g", "idle", "1"), 1);
    /* Walk the failing allocation over each call until one runs without
     * reaching it: every failure is EMQ_ENOMEM and leaks nothing. */
    int listed = 0, pruned = 0;
    for (uint64_t n = 1; n < 200 && !(listed && pruned); n++) {
        uint64_t live = emq__alloc_live();
        emq_admin_t *a = admin_open(s, "jobs", "2");
        emq_error err;
        emq_dead_letter *letters = NULL;
        size_t count = 0;
        emq__alloc_fail_at(n);
        uint64_t calls = emq__alloc_calls();
        emq_status st = emq_admin_dead_list(a, 0, &letters, &count, &err);
        int reached = emq__alloc_calls() - calls >= n;
        emq__alloc_fail_at(0);
        if (st == EMQ_OK) {
            ASSERT_EQ_SIZE(count, 2);
            emq_dead_letters_free(letters, count);
            listed |= !reached;
        } else {
            ASSERT_STATUS(st, EMQ_ENOMEM, &err);
            ASSERT(letters == NULL && count == 0);
        }
        emq_prune_result res;
        emq__alloc_fail_at(n);
        calls = emq__alloc_calls();
        st = emq_admin_prune_consumers(a, "g", 3600000, &res, &err);
        reached = emq__alloc_calls() - calls >= n;
        emq__alloc_fail_at(0);
        if (st == EMQ_OK)
            pruned |= !reached;
        else
            ASSERT_STATUS(st, EMQ_ENOMEM, &err);
        emq_admin_destroy(a);
        ASSERT_EQ_SIZE(emq__alloc_live(), live);
    }
    ASSERT(listed && pruned);
    emq_conn_destroy(adm);
    emq_srv_stop(s);
}

/* A worker credential can XADD to the dead letters (the dead-letter
 * script needs it), so a letter might be forged to put work on a queue
 * the worker may not write to. A requeue refuses, leaving it in place, a
 * letter without the origin pairs or whose origin ID the stream never
 * issued; the others move; EMQ_REQUEUE_FORCE moves a refused one. */
TEST(admin_dead_requeue_refuses_letters_no_consumer_wrote) {
    emq_srv *s = emq_srv_start(NULL);
    emq_conn_t *adm = admin_connect(s);
    emq_reply *r = CMD(adm, "XADD", Q_STREAM, "*", "n", "real");
    emq_id real;
    reply_text(r, real.str, sizeof real.str);
    emq_reply_free(r);
    emq_id good, bare, future;
    add_dead(adm, real.str, "ok", &good);
    r = CMD(adm, "XADD", Q_DEAD, "*", "cmd", "rm -rf /");
    reply_text(r, bare.str, sizeof bare.str);
    emq_reply_free(r);
    add_dead(adm, "99999999999999-0", "later", &future);
    emq_admin_t *a = admin_open(s, "jobs", "2");
    uint64_t moved = 9;
    emq_error err;
    ASSERT_STATUS(emq_admin_dead_requeue(a, NULL, 0, &moved, &err), EMQ_EINVAL,
                  &err);
    ASSERT_EQ_INT(moved, 1);
    ASSERT_CONTAINS(err.message, bare.str);
    ASSERT_CONTAINS(err.message, "not a dead letter (no origin fields)");
    ASSERT_CONTAINS(err.message, "2 refused, left in place; 1 requeued");
    ASSERT_EQ_INT(CMD_INT(adm, "XLEN", Q_DEAD), 2);
    ASSERT_EQ_INT(CMD_INT(adm, "XLEN", Q_STREAM), 2); /* real + ok */
    /* By ID: the one from the future is named for what it is. */
    const char *ids[] = {future.str};
    ASSERT_STATUS(emq_admin_dead_requeue(a, ids, 1, &moved, &err), EMQ_EINVAL,
                  &err);
    ASSERT_EQ_INT(moved, 0);
    ASSERT_CONTAINS(err.message, "origin 99999999999999-0 was never in the "
                                 "queue");
    /* Forced: both move (the bare one with all its fields). */
    ASSERT_OK(emq_admin_dead_requeue_flags(a, NULL, 0, EMQ_REQUEUE_FORCE,
                                           &moved, &err),
              &err);
    ASSERT_EQ_INT(moved, 2);
    ASSERT_EQ_INT(CMD_INT(adm, "XLEN", Q_DEAD), 0);
    ASSERT_EQ_INT(CMD_INT(adm, "XLEN", Q_STREAM), 4);
    emq_admin_destroy(a);
    emq_conn_destroy(adm);
    emq_srv_stop(s);
}
