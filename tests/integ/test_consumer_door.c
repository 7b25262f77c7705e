/* SPDX-License-Identifier: BSD-3-Clause */
/* test_consumer_door.c: the group door and the declared start position
 * (docs/CONSUMER.md, the contract's points 1 and 2), against a real
 * redis-server.
 *
 * The door: the first start creates the stream and the group (MKSTREAM);
 * a second start and a storm of 8 consumers starting at once see no error
 * (BUSYGROUP opens the door); a key of another type or an ACL user who may
 * not run XGROUP makes emq_consumer_run fail with EMQ_ESERVER and the
 * server's text, and no XREADGROUP ever reaches the server.
 *
 * The start: a missing or malformed start is refused by emq_consumer_new
 * with EMQ_EINVAL before any byte reaches the server (the server's command
 * and connection totals do not move beyond our own INFO calls); on a
 * pre-filled stream new delivers only later entries, head all of them, an
 * explicit ID exactly those after it; an existing group keeps its cursor
 * whatever start a later consumer declares.
 */
#include "integ/tally_helpers.h"

#include <unistd.h>

static emq_verdict ack_all(void *opaque, const emq_entry *e, char *reason,
                           size_t reason_size) {
    (void)e;
    (void)reason;
    (void)reason_size;
    atomic_fetch_add((atomic_int *)opaque, 1);
    return EMQ_ACK;
}

/* Runs a consumer on a thread until its loop runs, then stops it; the run
 * must return EMQ_OK. */
static void run_briefly(const emq_conf_t *conf, atomic_int *handled) {
    emq_consumer_t *c = consumer_ok(conf, ack_all, handled);
    runner_thread t;
    start_consumer(&t, c);
    wait_reads(c, &t, 2, 3000);
    emq_consumer_stop(c);
    ASSERT_OK(join_consumer(&t), &t.err);
    emq_consumer_stats st;
    emq_consumer_stats_get(c, &st);
    ASSERT_EQ_INT(st.group_recreated, 0);
    emq_consumer_destroy(c);
}

TEST(consumer_door_first_start_creates_stream_and_group) {
    emq_srv *s = emq_srv_start(NULL);
    char out[4096];
    emq_srv_cmd(s, out, sizeof out, "EXISTS", "emq:{door}", NULL);
    ASSERT_EQ_STR(out, "0");
    emq_conf_t *conf = consumer_conf(s, "door", "g", "w1", "new");
    static atomic_int handled;
    run_briefly(conf, &handled);
    emq_srv_cmd(s, out, sizeof out, "TYPE", "emq:{door}", NULL);
    ASSERT_EQ_STR(out, "stream");
    ASSERT_EQ_INT(
        emq_srv_cmd(s, out, sizeof out, "XINFO", "GROUPS", "emq:{door}", NULL),
        '*');
    ASSERT_CONTAINS(out, "name\ng\n");
    /* A second start finds the group (BUSYGROUP) and is fine too. */
    long long creates = cmdstat_calls(s, "xgroup|create");
    ASSERT(creates >= 1);
    run_briefly(conf, &handled);
    ASSERT(cmdstat_calls(s, "xgroup|create") > creates);
    emq_srv_cmd(s, out, sizeof out, "XINFO", "GROUPS", "emq:{door}", NULL);
    ASSERT_CONTAINS(out, "name\ng\n");
    ASSERT_EQ_INT(atomic_load(&handled), 0);
    emq_conf_destroy(conf);
    emq_srv_stop(s);
}

#define STORM 8

typedef struct storm_member {
    runner_thread t;
    pthread_barrier_t *barrier;
} storm_member;

static void *storm_main(void *arg) {
    storm_member *m = arg;
    pthread_barrier_wait(m->barrier);
    m->t.st = emq_consumer_run(m->t.c, &m->t.err);
    return NULL;
}

/* Each consumer opens the door once: a session that starts again opens it
 * again, so the lease (whose lapse starts one) outlasts a renewal late by
 * seconds, as 16 threads under memcheck on a loaded machine make it. */
TEST(consumer_door_restart_storm_of_eight_sees_no_error) {
    emq_srv *s = emq_srv_start(NULL);
    static atomic_int handled;
    static storm_member m[STORM];
    pthread_barrier_t barrier;
    ASSERT(pthread_barrier_init(&barrier, NULL, STORM) == 0);
    char ttl[24];
    snprintf(ttl, sizeof ttl, "%d", emq_test_ms(5000));
    for (int i = 0; i < STORM; i++) {
        char name[16];
        snprintf(name, sizeof name, "storm%d", i);
        emq_conf_t *conf = consumer_conf(s, "storm", "g", name, "head");
        conf_set(conf, "lease.ttl_ms", ttl);
        memset(&m[i], 0, sizeof m[i]);
        m[i].t.c = consumer_ok(conf, ack_all, &handled);
        m[i].barrier = &barrier;
        emq_conf_destroy(conf);
    }
    for (int i = 0; i < STORM; i++)
        ASSERT(pthread_create(&m[i].t.thread, NULL, storm_main, &m[i]) == 0);
    for (int i = 0; i < STORM; i++)
        wait_reads(m[i].t.c, &m[i].t, 2, 5000);
    produce_batch_n(s, "storm", 0, 40);
    int64_t end = now_ms() + emq_test_ms(5000);
    while (atomic_load(&handled) < 40 && now_ms() < end)
        usleep(5000);
    for (int i = 0; i < STORM; i++)
        emq_consumer_stop(m[i].t.c);
    for (int i = 0; i < STORM; i++) {
        pthread_join(m[i].t.thread, NULL);
        if (m[i].t.st != EMQ_OK)
            FAIL("consumer storm%d: %s (%s)", i, emq_status_name(m[i].t.st),
                 m[i].t.err.message);
    }
    ASSERT_EQ_INT(atomic_load(&handled), 40);
    char out[4096];
    emq_srv_cmd(s, out, sizeof out, "XINFO", "GROUPS", "emq:{storm}", NULL);
    ASSERT_CONTAINS(out, "name\ng\n");
    ASSERT_EQ_INT(cmdstat_calls(s, "xgroup|create"), STORM);
    for (int i = 0; i < STORM; i++)
        emq_consumer_destroy(m[i].t.c);
    pthread_barrier_destroy(&barrier);
    emq_srv_stop(s);
}

TEST(consumer_door_wrongtype_fails_start_and_never_reads) {
    emq_srv *s = emq_srv_start(NULL);
    char out[4096];
    emq_srv_cmd(s, out, sizeof out, "SET", "emq:{wt}", "x", NULL);
    emq_conf_t *conf = consumer_conf(s, "wt", "g", "w1", "head");
    static atomic_int handled;
    emq_consumer_t *c = consumer_ok(conf, ack_all, &handled);
    emq_conf_destroy(conf);
    emq_error err;
    memset(&err, 0, sizeof err);
    int64_t t0 = now_ms();
    ASSERT_STATUS(emq_consumer_run(c, &err), EMQ_ESERVER, &err);
    ASSERT(now_ms() - t0 < emq_test_ms(3000)); /* fails, never retries */
    ASSERT_EQ_INT(err.code, EMQ_ESERVER);
    ASSERT_CONTAINS(err.message, "WRONGTYPE");
    ASSERT_EQ_INT(cmdstat_calls(s, "xreadgroup"), 0);
    ASSERT(cmdstat_calls(s, "xgroup|create") >= 1);
    /* The door never destroys: the key is untouched. */
    emq_srv_cmd(s, out, sizeof out, "GET", "emq:{wt}", NULL);
    ASSERT_EQ_STR(out, "x");
    ASSERT_EQ_INT(atomic_load(&handled), 0);
    /* A failed start leaves no lease behind: once the key is fixed, the
     * same consumer starts at once. */
    emq_srv_cmd(s, out, sizeof out, "EXISTS", "emq:{wt}:lease:g:w1", NULL);
    ASSERT_EQ_STR(out, "0");
    emq_srv_cmd(s, out, sizeof out, "DEL", "emq:{wt}", NULL);
    runner_thread t;
    start_consumer(&t, c);
    wait_reads(c, &t, 2, 3000);
    emq_consumer_stop(c);
    ASSERT_OK(join_consumer(&t), &t.err);
    emq_srv_cmd(s, out, sizeof out, "TYPE", "emq:{wt}", NULL);
    ASSERT_EQ_STR(out, "stream");
    emq_consumer_destroy(c);
    emq_srv_stop(s);
}

TEST(consumer_door_noperm_on_xgroup_fails_start) {
    emq_srv_opts o;
    memset(&o, 0, sizeof o);
    o.extra_config = "user alice on >alicepw ~* +@all -xgroup\n";
    emq_srv *s = emq_srv_start(&o);
    emq_conf_t *conf = consumer_conf(s, "acl", "g", "w1", "head");
    conf_set(conf, P_USER, "alice");
    conf_set(conf, P_PASSWORD, "alicepw");
    static atomic_int handled;
    emq_consumer_t *c = consumer_ok(conf, ack_all, &handled);
    emq_conf_destroy(conf);
    emq_error err;
    memset(&err, 0, sizeof err);
    ASSERT_STATUS(emq_consumer_run(c, &err), EMQ_ESERVER, &err);
    ASSERT_CONTAINS(err.message, "NOPERM");
    ASSERT_EQ_INT(cmdstat_calls(s, "xreadgroup"), 0);
    char out[256];
    emq_srv_cmd(s, out, sizeof out, "EXISTS", "emq:{acl}", NULL);
    ASSERT_EQ_STR(out, "0");
    emq_consumer_destroy(c);
    emq_srv_stop(s);
}

/* ---- declared start ---------------------------------------------------- */

TEST(consumer_start_missing_or_malformed_refused_before_any_byte) {
    emq_srv *s = emq_srv_start(NULL);
    static const char *const bad[] = {NULL,
                                      "",
                                      "abc",
                                      "-",
                                      "+",
                                      "1-2-3",
                                      "-1",
                                      "18446744073709551616-0",
                                      "1-18446744073709551616",
                                      "0x10",
                                      " 1-0"};
    long long cmds0 = info_number(s, "stats", "total_commands_processed");
    long long conns0 = info_number(s, "stats", "total_connections_received");
    ASSERT(cmds0 >= 0 && conns0 >= 1);
    static atomic_int handled;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        emq_conf_t *conf = consumer_conf(s, "st", "g", "w1", NULL);
        if (bad[i] != NULL) {
            emq_error cerr;
            memset(&cerr, 0, sizeof cerr);
            if (emq_conf_set(conf, "start", bad[i], &cerr) != EMQ_OK) {
                /* Refused even earlier, by the conf: fine, if EINVAL. */
                ASSERT_EQ_INT(cerr.code, EMQ_EINVAL);
                emq_conf_destroy(conf);
                continue;
            }
        }
        emq_consumer_t *c = (emq_consumer_t *)(uintptr_t)1;
        emq_error err;
        memset(&err, 0, sizeof err);
        emq_status st = emq_consumer_new(conf, ack_all, &handled, &c, &err);
        emq_conf_destroy(conf);
        if (st == EMQ_OK) {
            emq_consumer_destroy(c);
            FAIL("start '%s' was accepted", bad[i] ? bad[i] : "(unset)");
        }
        ASSERT_STATUS(st, EMQ_EINVAL, &err);
        ASSERT(c == NULL);
        ASSERT_CONTAINS(err.message, "start");
    }
    /* Two INFO calls of ours ran in between (the first is counted once it
     * is done), each on its own admin connection: nothing else. */
    long long cmds1 = info_number(s, "stats", "total_commands_processed");
    long long conns1 = info_number(s, "stats", "total_connections_received");
    ASSERT_EQ_INT(cmds1 - cmds0, 2);
    ASSERT_EQ_INT(conns1 - conns0, 2);
    ASSERT_EQ_INT(cmdstat_calls(s, "xgroup|create"), 0);
    emq_srv_stop(s);
}

/* One run over a pre-filled queue with the given group and start, that
 * waits for `want` entries (then for two more reads, so extras would
 * show). */
static size_t run_and_record(emq_srv *s, const char *group, const char *start,
                             recorder *r, size_t want, int produce_later) {
    emq_conf_t *conf = consumer_conf(s, "pre", group, "w1", start);
    recorder_init(r);
    emq_consumer_t *c = consumer_ok(conf, record, r);
    emq_conf_destroy(conf);
    runner_thread t;
    start_consumer(&t, c);
    wait_reads(c, &t, 2, 3000);
    if (produce_later)
        produce_n(s, "pre", "late", produce_later);
    if (want)
        wait_for(r, want, 3000);
    wait_two_more_reads(c, &t, 3000);
    emq_consumer_stop(c);
    ASSERT_OK(join_consumer(&t), &t.err);
    emq_consumer_destroy(c);
    return r->n;
}

TEST(consumer_start_new_head_and_id_on_prefilled_stream) {
    emq_srv *s = emq_srv_start(NULL);
    produce_n(s, "pre", "old", 5);
    char out[4096];
    /* The ID of old2, for the explicit start. */
    ASSERT_EQ_INT(
        emq_srv_cmd(s, out, sizeof out, "XRANGE", "emq:{pre}", "-", "+", NULL),
        '*');
    char ids[5][48];
    {
        /* XRANGE flattens as: id, then the fields array, per entry. */
        int k = 0;
        char *save = NULL;
        for (char *line = strtok_r(out, "\n", &save); line && k < 5;
             line = strtok_r(NULL, "\n", &save))
            if (strchr(line, '-') && line[0] >= '0' && line[0] <= '9')
                snprintf(ids[k++], sizeof ids[0], "%s", line);
        ASSERT_EQ_INT(k, 5);
    }
    static recorder r;

    /* head: all five. */
    ASSERT_EQ_SIZE(run_and_record(s, "gh", "head", &r, 5, 0), 5);
    for (int i = 0; i < 5; i++) {
        char want[16];
        snprintf(want, sizeof want, "old%d", i);
        ASSERT_EQ_STR(r.values[i], want);
    }

    /* explicit ID of old2: exactly old3 and old4. */
    ASSERT_EQ_SIZE(run_and_record(s, "gi", ids[2], &r, 2, 0), 2);
    ASSERT_EQ_STR(r.values[0], "old3");
    ASSERT_EQ_STR(r.values[1], "old4");
    ASSERT_EQ_STR(r.ids[0], ids[3]);

    /* new: none of the old ones, the later ones yes. */
    ASSERT_EQ_SIZE(run_and_record(s, "gn", "new", &r, 3, 3), 3);
    for (int i = 0; i < 3; i++) {
        char want[16];
        snprintf(want, sizeof want, "late%d", i);
        ASSERT_EQ_STR(r.values[i], want);
    }
    emq_srv_stop(s);
}

TEST(consumer_start_existing_group_keeps_cursor) {
    emq_srv *s = emq_srv_start(NULL);
    produce_n(s, "keep", "old", 5);
    static atomic_int handled;
    emq_conf_t *conf = consumer_conf(s, "keep", "g", "first", "new");
    run_briefly(conf, &handled);
    emq_conf_destroy(conf);
    ASSERT_EQ_INT(atomic_load(&handled), 0);

    /* A later consumer declares head: the group exists, its cursor holds. */
    static recorder r;
    recorder_init(&r);
    conf = consumer_conf(s, "keep", "g", "second", "head");
    emq_consumer_t *c = consumer_ok(conf, record, &r);
    emq_conf_destroy(conf);
    runner_thread t;
    start_consumer(&t, c);
    wait_reads(c, &t, 3, 3000);
    wait_two_more_reads(c, &t, 3000);
    ASSERT_EQ_SIZE(r.n, 0);
    produce_n(s, "keep", "fresh", 1);
    wait_for(&r, 1, 3000);
    wait_two_more_reads(c, &t, 3000);
    emq_consumer_stop(c);
    ASSERT_OK(join_consumer(&t), &t.err);
    ASSERT_EQ_SIZE(r.n, 1);
    ASSERT_EQ_STR(r.values[0], "fresh0");
    char out[256];
    emq_srv_cmd(s, out, sizeof out, "XLEN", "emq:{keep}", NULL);
    ASSERT_EQ_STR(out, "6");
    emq_consumer_destroy(c);
    emq_srv_stop(s);
}
