/* SPDX-License-Identifier: BSD-3-Clause */
/* test_consumer_faults2.c: the ownership defects 8-14, against real
 * redis-servers (and an intercepting proxy in front of one where a reply
 * must be malformed).
 *
 *  8. NOGROUP during self-recovery, with on_group_lost=recreate: the door
 *     opens again and the run goes on;
 *  9. MISCONF (a BGSAVE that failed because the working folder vanished,
 *     stop-writes-on-bgsave-error yes), NOREPLICAS (min-replicas-to-write
 *     1) and READONLY (the server made a replica of a second private
 *     server): waited out, the run goes on once the condition clears;
 * 10. NOPERM on XACK (an ACL user without +xack): the run ends with
 *     EMQ_ESERVER and a message naming XACK and NOPERM, the entry handled
 *     once;
 * 11. no failure reason is left in the reasons hash for retried entries
 *     deleted while pending, whether found by self-recovery or in
 *     XAUTOCLAIM's deleted list;
 * 12. an own pending entry at 18446744073709551615-18446744073709551615 is
 *     recovered and acknowledged, and the run goes on;
 * 13. a stop returns within block_ms (+ slack) while the server runs a busy
 *     script, while the connection is frozen mid-read, and while
 *     reconnecting to a dead server;
 * 14. malformed replies (a history page whose entries are not an array, a
 *     history page repeated forever) cause few reconnects, not a loop;
 *     entries with an odd number of field elements or a field name that is
 *     not a string are dead-lettered with reason "malformed entry" and
 *     never handed to the handler, while a good entry of the same reply is.
 */
#include "integ/ownership_helpers.h"
#include "integ/tally_helpers.h"
#include "harness/fakepeer.h"

#define FQ "emq:{jobs}"
#define FQ_DEAD "emq:{jobs}:dead"
#define FQ_REASONS "emq:{jobs}:reasons:g"
#define FQ_RETRY "emq:{jobs}:retry:g"

static void produce_one(const emq_srv *s, const char *value) {
    emq_conf_t *conf = conf_for(emq_srv_url(s));
    conf_set(conf, "queue", "jobs");
    emq_producer_t *p;
    emq_error err;
    ASSERT_OK(emq_producer_new(conf, &p, &err), &err);
    emq_conf_destroy(conf);
    emq_field f = {"n", 1, value, strlen(value)};
    ASSERT_OK(emq_produce(p, &f, 1, NULL, &err), &err);
    emq_producer_destroy(p);
}

/* ---- 8: NOGROUP during self-recovery ----------------------------------- */

TEST_TIMEOUT(faults2_nogroup_during_self_recovery_recreates, 30) {
    emq_srv *s = emq_srv_start(NULL);
    emq_conn_t *adm = admin_connect(s);
    CMD_NOERR(adm, "XGROUP", "CREATE", FQ, "g", "$", "MKSTREAM");
    produce_n(s, "jobs", "old", 6);
    emq_reply *r = CMD(adm, "XREADGROUP", "GROUP", "g", "w", "COUNT", "6",
                       "STREAMS", FQ, ">");
    emq_reply_free(r);
    ASSERT_EQ_INT(pending_of(adm, FQ, "g", "w"), 6);
    static slow h;
    slow_init(&h);
    h.sleep_ms = 300;
    static logcap log;
    logcap_init(&log);
    emq_conf_t *conf = fault_conf(emq_srv_url(s));
    conf_set(conf, "count", "2"); /* three history pages */
    emq_conf_set_log(conf, logcap_fn, &log);
    bg t;
    emq_consumer_t *c = bg_start(&t, conf, slow_handle, &h);
    WAIT_UNTIL(recorded(&h.r) >= 1, 5000, "self-recovery to start");
    ASSERT_EQ_INT(CMD_INT(adm, "XGROUP", "DESTROY", FQ, "g"), 1);
    usleep(1500 * 1000);
    if (atomic_load(&t.done))
        FAIL("the run ended when the group vanished during self-recovery: "
             "%s: %s",
             emq_status_name(t.st), t.err.message);
    emq_consumer_stats st;
    WAIT_UNTIL((emq_consumer_stats_get(c, &st), st.group_recreated >= 1), 5000,
               "the group to be re-created");
    WAIT_UNTIL(client_id_by_name(s, "w", 1) >= 0, 5000,
               "the consumer to block in XREADGROUP again");
    produce_one(s, "after");
    WAIT_UNTIL(recorded_index(&h.r, "after") >= 0, 5000, "the new entry");
    ASSERT_OK(bg_stop(&t, 3000), &t.err);
    ASSERT_EQ_INT(times_seen(&h.r, "after"), 1);
    emq_consumer_destroy(c);
    emq_conn_destroy(adm);
    emq_srv_stop(s);
}

/* ---- 9: conditions that clear are waited out --------------------------- */

/* Runs w on s, sees "before", calls begin (the fault starts), checks the run
 * survives hold_ms of it, calls end (the fault clears), and sees "after". */
typedef void (*fault_fn)(emq_srv *s, void *arg);

static void waited_out(emq_srv *s, fault_fn begin, fault_fn end, void *arg,
                       const char *word) {
    static slow h;
    slow_init(&h);
    static logcap log;
    logcap_init(&log);
    emq_conf_t *conf = fault_conf(emq_srv_url(s));
    emq_conf_set_log(conf, logcap_fn, &log);
    bg t;
    emq_consumer_t *c = bg_start(&t, conf, slow_handle, &h);
    WAIT_UNTIL(client_id_by_name(s, "w", 1) >= 0, 5000,
               "the consumer to block in XREADGROUP");
    produce_one(s, "before");
    WAIT_UNTIL(recorded_index(&h.r, "before") >= 0, 5000, "before");
    begin(s, arg);
    usleep(1500 * 1000);
    if (atomic_load(&t.done))
        FAIL("%s made the run end: %s: %s", word, emq_status_name(t.st),
             t.err.message);
    end(s, arg);
    produce_one(s, "after");
    int64_t t0 = now_ms();
    while (recorded_index(&h.r, "after") < 0 && !atomic_load(&t.done) &&
           now_ms() - t0 < emq_test_ms(8000))
        usleep(10000);
    if (atomic_load(&t.done))
        FAIL("the run ended after %s: %s: %s", word, emq_status_name(t.st),
             t.err.message);
    if (recorded_index(&h.r, "after") < 0)
        FAIL("no entry was handled within 8 s after %s cleared", word);
    ASSERT_OK(bg_stop(&t, 3000), &t.err);
    pthread_mutex_lock(&log.lock);
    int named = strstr(log.text, word) != NULL;
    int episodes = 0;
    for (const char *p = log.text; (p = strstr(p, word)) != NULL; p++)
        episodes++;
    pthread_mutex_unlock(&log.lock);
    fprintf(stderr, "    %s: %d log mentions\n", word, episodes);
    ASSERT(named);         /* logged... */
    ASSERT(episodes <= 3); /* ...once per episode, not once per retry */
    emq_consumer_destroy(c);
}

static void bgsave_wait(emq_srv *s, const char *want) {
    char v[64];
    WAIT_UNTIL(
        (info_field(s, "persistence", "rdb_bgsave_in_progress", v, sizeof v),
         strcmp(v, "0") == 0) &&
            (info_field(s, "persistence", "rdb_last_bgsave_status", v,
                        sizeof v),
             strcmp(v, want) == 0),
        5000, want);
}

static void misconf_begin(emq_srv *s, void *arg) {
    const char *gone = arg;
    char out[256];
    ASSERT(mkdir(gone, 0700) == 0);
    ASSERT_EQ_INT(
        emq_srv_cmd(s, out, sizeof out, "CONFIG", "SET", "dir", gone, NULL),
        '+');
    ASSERT(rmdir(gone) == 0);
    emq_srv_cmd(s, out, sizeof out, "BGSAVE", NULL);
    bgsave_wait(s, "err");
    ASSERT_EQ_INT(emq_srv_cmd(s, out, sizeof out, "SET", "probe", "1", NULL),
                  '-');
    ASSERT_CONTAINS(out, "MISCONF");
}

static void misconf_end(emq_srv *s, void *arg) {
    (void)arg;
    char out[256];
    ASSERT_EQ_INT(emq_srv_cmd(s, out, sizeof out, "CONFIG", "SET", "dir",
                              emq_srv_dir(s), NULL),
                  '+');
    emq_srv_cmd(s, out, sizeof out, "BGSAVE", NULL);
    bgsave_wait(s, "ok");
}

TEST_TIMEOUT(faults2_misconf_waited_out, 40) {
    /* Redis 7.0+ refuses CONFIG SET dir unless protected configs are
     * enabled; 6.2 has no such setting (and allows it). */
    int protected_configs = emq_srv_binary_version(NULL, 0) >= 70000;
    emq_srv_opts o = {.extra_config =
                          protected_configs
                              ? "enable-protected-configs yes\n"
                                "save 3600 1\n"
                                "stop-writes-on-bgsave-error yes\n"
                              : "save 3600 1\n"
                                "stop-writes-on-bgsave-error yes\n"};
    emq_srv *s = emq_srv_start(&o);
    char gone[300];
    snprintf(gone, sizeof gone, "%s/vanished", emq_test_tmpdir());
    waited_out(s, misconf_begin, misconf_end, gone, "MISCONF");
    emq_srv_stop(s);
}

static void noreplicas_begin(emq_srv *s, void *arg) {
    (void)arg;
    char out[256];
    ASSERT_EQ_INT(emq_srv_cmd(s, out, sizeof out, "CONFIG", "SET",
                              "min-replicas-to-write", "1", NULL),
                  '+');
    ASSERT_EQ_INT(emq_srv_cmd(s, out, sizeof out, "SET", "probe", "1", NULL),
                  '-');
    ASSERT_CONTAINS(out, "NOREPLICAS");
}

static void noreplicas_end(emq_srv *s, void *arg) {
    (void)arg;
    char out[256];
    ASSERT_EQ_INT(emq_srv_cmd(s, out, sizeof out, "CONFIG", "SET",
                              "min-replicas-to-write", "0", NULL),
                  '+');
}

TEST_TIMEOUT(faults2_noreplicas_waited_out, 30) {
    emq_srv *s = emq_srv_start(NULL);
    waited_out(s, noreplicas_begin, noreplicas_end, NULL, "NOREPLICAS");
    emq_srv_stop(s);
}

/* Over maxmemory with noeviction the lease's SET, XGROUP CREATE (even
 * for a group that exists) and HSETNX get OOM; reads and acks do not. The
 * read connection is cut at once, so the session starts again during it:
 * its start waits the OOM out (before, the run ended on the lease's
 * "taking the lease ... failed: OOM"). */
static void oom_begin(emq_srv *s, void *arg) {
    (void)arg;
    char out[256];
    long long id = client_id_by_name(s, "w", 1);
    ASSERT(id >= 0);
    ASSERT_EQ_INT(emq_srv_cmd(s, out, sizeof out, "CONFIG", "SET",
                              "maxmemory-policy", "noeviction", NULL),
                  '+');
    ASSERT_EQ_INT(emq_srv_cmd(s, out, sizeof out, "CONFIG", "SET", "maxmemory",
                              "1", NULL),
                  '+');
    ASSERT_EQ_INT(emq_srv_cmd(s, out, sizeof out, "SET", "probe", "1", NULL),
                  '-');
    ASSERT_CONTAINS(out, "OOM");
    char idtext[24];
    snprintf(idtext, sizeof idtext, "%lld", id);
    ASSERT_EQ_INT(
        emq_srv_cmd(s, out, sizeof out, "CLIENT", "KILL", "ID", idtext, NULL),
        ':');
}

static void oom_end(emq_srv *s, void *arg) {
    (void)arg;
    char out[256];
    ASSERT_EQ_INT(emq_srv_cmd(s, out, sizeof out, "CONFIG", "SET", "maxmemory",
                              "0", NULL),
                  '+');
}

TEST_TIMEOUT(faults2_oom_at_a_session_start_waited_out, 30) {
    emq_srv *s = emq_srv_start(NULL);
    waited_out(s, oom_begin, oom_end, NULL, "OOM");
    emq_srv_stop(s);
}

static void readonly_begin(emq_srv *s, void *arg) {
    emq_srv *s2 = arg;
    /* s2 copies s, becomes a master, then s becomes its replica: same data,
     * and every write to s is refused with READONLY. */
    replica_follow(s2, s);
    replica_follow(s2, NULL);
    replica_follow(s, s2);
    char out[256];
    ASSERT_EQ_INT(emq_srv_cmd(s, out, sizeof out, "SET", "probe", "1", NULL),
                  '-');
    ASSERT_CONTAINS(out, "READONLY");
}

static void readonly_end(emq_srv *s, void *arg) {
    (void)arg;
    replica_follow(s, NULL);
}

TEST_TIMEOUT(faults2_readonly_after_demotion_waited_out, 40) {
    emq_srv *s = emq_srv_start(NULL);
    emq_srv *s2 = emq_srv_start(NULL);
    char out[256];
    emq_srv_cmd(s, out, sizeof out, "CONFIG", "SET", "repl-diskless-sync-delay",
                "0", NULL);
    emq_srv_cmd(s2, out, sizeof out, "CONFIG", "SET",
                "repl-diskless-sync-delay", "0", NULL);
    waited_out(s, readonly_begin, readonly_end, s2, "READONLY");
    emq_srv_stop(s2);
    emq_srv_stop(s);
}

/* ---- 10: a permanent XACK refusal is fatal ----------------------------- */

TEST_TIMEOUT(faults2_noperm_on_xack_is_fatal_naming_xack, 20) {
    emq_srv_opts o = {.extra_config = "user w on >pw ~* &* +@all -xack\n"};
    emq_srv *s = emq_srv_start(&o);
    static slow h;
    slow_init(&h);
    emq_conf_t *conf = fault_conf(emq_srv_url(s));
    conf_set(conf, P_USER, "w");
    conf_set(conf, P_PASSWORD, "pw");
    emq_conf_set_log(conf, quiet_log, NULL);
    bg t;
    emq_consumer_t *c = bg_start(&t, conf, slow_handle, &h);
    WAIT_UNTIL(client_id_by_name(s, "w", 1) >= 0 || atomic_load(&t.done), 5000,
               "the consumer to block in XREADGROUP");
    if (atomic_load(&t.done))
        FAIL("the run ended before reading: %s", t.err.message);
    produce_one(s, "x");
    int ended = bg_wait(&t, 4000);
    size_t calls = recorded(&h.r);
    if (!ended) {
        emq_consumer_stop(c);
        bg_wait(&t, 3000);
    }
    bg_join(&t);
    if (!ended)
        FAIL("NOPERM on XACK did not end the run within 4 s (%zu handler "
             "calls; the run then returned %s: %s)",
             calls, emq_status_name(t.st), t.err.message);
    ASSERT_STATUS(t.st, EMQ_ESERVER, &t.err);
    ASSERT_CONTAINS(t.err.message, "XACK");
    ASSERT_CONTAINS(t.err.message, "NOPERM");
    ASSERT_EQ_INT(t.err.fatal, 1); /* the run ended on it */
    ASSERT_EQ_SIZE(calls, 1);
    emq_consumer_destroy(c);
    emq_srv_stop(s);
}

/* ---- 11: no leaked failure reasons ------------------------------------- */

TEST_TIMEOUT(faults2_reason_removed_for_retried_entry_deleted_while_pending,
             30) {
    emq_srv *s = emq_srv_start(NULL);
    emq_conn_t *adm = admin_connect(s);
    CMD_NOERR(adm, "XGROUP", "CREATE", FQ, "g", "$", "MKSTREAM");
    static slow h;
    slow_init(&h);
    snprintf(h.retry_prefix, sizeof h.retry_prefix, "r");
    bg t;
    emq_consumer_t *c =
        bg_start(&t, fault_conf(emq_srv_url(s)), slow_handle, &h);
    WAIT_UNTIL(client_id_by_name(s, "w", 1) >= 0, 5000,
               "the consumer to block in XREADGROUP");
    produce_n(s, "jobs", "r", 2);
    emq_id ids[2];
    ASSERT_EQ_SIZE(stream_ids(adm, FQ, ids, 2), 2);
    WAIT_UNTIL(recorded(&h.r) >= 2, 5000, "both entries handled");
    WAIT_UNTIL(CMD_INT(adm, "HLEN", FQ_REASONS) == 2, 3000,
               "both failure reasons recorded");
    ASSERT_OK(bg_stop(&t, 3000), &t.err);
    emq_consumer_destroy(c);
    /* Deleted while pending (and retried): the restart's self-recovery
     * finds them without fields. */
    ASSERT_EQ_INT(CMD_INT(adm, "XDEL", FQ, ids[0].str, ids[1].str), 2);
    ASSERT_EQ_INT(pending_of(adm, FQ, "g", "w"), 2);
    bg t2;
    c = bg_start(&t2, fault_conf(emq_srv_url(s)), slow_handle, &h);
    int64_t end = now_ms() + emq_test_ms(4000);
    while (now_ms() < end && (CMD_INT(adm, "HLEN", FQ_REASONS) != 0 ||
                              pending_total(adm, FQ, "g") != 0 ||
                              CMD_INT(adm, "ZCARD", FQ_RETRY) != 0))
        usleep(20000);
    long long reasons = CMD_INT(adm, "HLEN", FQ_REASONS);
    long long pend = pending_total(adm, FQ, "g");
    long long sched = CMD_INT(adm, "ZCARD", FQ_RETRY);
    ASSERT_OK(bg_stop(&t2, 3000), &t2.err);
    emq_consumer_stats st;
    emq_consumer_stats_get(c, &st);
    if (reasons != 0)
        FAIL("%lld failure reasons left in %s for entries deleted while "
             "pending (pending %lld, deleted_pending %llu)",
             reasons, FQ_REASONS, pend, (unsigned long long)st.deleted_pending);
    ASSERT_EQ_INT(pend, 0);
    ASSERT_EQ_INT(sched, 0);
    ASSERT_EQ_INT(st.deleted_pending, 2);
    ASSERT_EQ_SIZE(recorded(&h.r), 2); /* never handed out again */
    emq_consumer_destroy(c);
    emq_conn_destroy(adm);
    emq_srv_stop(s);
}

TEST_TIMEOUT(faults2_reason_removed_for_xautoclaim_deleted_ids, 20) {
    emq_srv *s = emq_srv_start(NULL);
    emq_conn_t *adm = admin_connect(s);
    CMD_NOERR(adm, "XGROUP", "CREATE", FQ, "g", "$", "MKSTREAM");
    /* Three entries a dead peer retried (reasons recorded), then deleted,
     * idle for 10 minutes. */
    long long n = CMD_INT(
        adm, "EVAL",
        "for i = 0, 2 do redis.call('XADD', KEYS[1], '*', 'n', 'v' .. i) end\n"
        "local r = redis.call('XREADGROUP', 'GROUP', 'g', 'dead', 'COUNT', 3,"
        " 'STREAMS', KEYS[1], '>')\n"
        "local e = r[1][2]\n"
        "for i = 1, #e do\n"
        "  redis.call('XCLAIM', KEYS[1], 'g', 'dead', 0, e[i][1], 'IDLE',"
        " 600000, 'JUSTID')\n"
        "  redis.call('HSET', KEYS[2], e[i][1], 'retry v' .. (i - 1))\n"
        "  redis.call('XDEL', KEYS[1], e[i][1])\n"
        "end\n"
        "return #e",
        "2", FQ, FQ_REASONS);
    ASSERT_EQ_INT(n, 3);
    ASSERT_EQ_INT(CMD_INT(adm, "HLEN", FQ_REASONS), 3);
    static slow h;
    slow_init(&h);
    emq_conf_t *conf = fault_conf(emq_srv_url(s));
    conf_set(conf, "claim.min_idle_ms", "1000");
    conf_set(conf, "claim.interval_ms", "100");
    bg t;
    emq_consumer_t *c = bg_start(&t, conf, slow_handle, &h);
    emq_consumer_stats st;
    int64_t end = now_ms() + emq_test_ms(3000);
    while (now_ms() < end && CMD_INT(adm, "HLEN", FQ_REASONS) != 0)
        usleep(20000);
    long long reasons = CMD_INT(adm, "HLEN", FQ_REASONS);
    ASSERT_OK(bg_stop(&t, 3000), &t.err);
    emq_consumer_stats_get(c, &st);
    if (reasons != 0)
        FAIL("%lld failure reasons left for ids XAUTOCLAIM reported deleted "
             "(deleted_pending %llu, pending %lld)",
             reasons, (unsigned long long)st.deleted_pending,
             pending_total(adm, FQ, "g"));
    ASSERT_EQ_INT(st.deleted_pending, 3);
    ASSERT_EQ_INT(pending_total(adm, FQ, "g"), 0);
    ASSERT_EQ_SIZE(recorded(&h.r), 0);
    emq_consumer_destroy(c);
    emq_conn_destroy(adm);
    emq_srv_stop(s);
}

/* ---- 12: the largest stream ID ----------------------------------------- */

#define MAX_ID "18446744073709551615-18446744073709551615"

TEST(faults2_own_pending_entry_at_max_id_recovered) {
    emq_srv *s = emq_srv_start(NULL);
    emq_conn_t *adm = admin_connect(s);
    CMD_NOERR(adm, "XGROUP", "CREATE", FQ, "g", "$", "MKSTREAM");
    emq_reply *r = CMD(adm, "XADD", FQ, MAX_ID, "n", "last");
    ASSERT_REPLY_TEXT(r, EMQ_REPLY_STRING, MAX_ID);
    emq_reply_free(r);
    r = CMD(adm, "XREADGROUP", "GROUP", "g", "w", "COUNT", "1", "STREAMS", FQ,
            ">");
    emq_reply_free(r);
    ASSERT_EQ_INT(pending_of(adm, FQ, "g", "w"), 1);
    static slow h;
    slow_init(&h);
    bg t;
    emq_consumer_t *c =
        bg_start(&t, fault_conf(emq_srv_url(s)), slow_handle, &h);
    WAIT_UNTIL(recorded(&h.r) >= 1 || atomic_load(&t.done), 5000,
               "the entry at the largest ID");
    WAIT_UNTIL(pending_total(adm, FQ, "g") == 0 || atomic_load(&t.done), 5000,
               "the entry's ack");
    if (!atomic_load(&t.done)) /* a second delivery would show */
        wait_two_more_reads(c, NULL, 5000);
    if (atomic_load(&t.done))
        FAIL("the run ended: %s: %s", emq_status_name(t.st), t.err.message);
    long long pend = pending_total(adm, FQ, "g");
    ASSERT_OK(bg_stop(&t, 3000), &t.err);
    ASSERT_EQ_SIZE(h.r.n, 1);
    ASSERT_EQ_STR(h.last_id, MAX_ID);
    ASSERT_EQ_INT(h.r.deliveries[0], 2);
    ASSERT_EQ_INT(pend, 0);
    emq_consumer_destroy(c);
    emq_conn_destroy(adm);
    emq_srv_stop(s);
}

/* ---- 13: stop is prompt in every state --------------------------------- */

/* Stops c on t and returns how long run took to return. */
static int64_t timed_stop(bg *t, emq_status *st) {
    int64_t t0 = now_ms();
    emq_consumer_stop(t->c);
    if (!bg_wait(t, 15000))
        FAIL("run did not return within 15 s of a stop");
    bg_join(t);
    *st = t->st;
    return t->ended_ms - t0;
}

TEST_TIMEOUT(faults2_stop_prompt_while_server_busy_with_script, 40) {
    emq_srv *s = emq_srv_start(NULL);
    char out[256];
    /* lua-time-limit: the name 6.2 knows (7.0+ keep it as an alias of
     * busy-reply-threshold). */
    ASSERT_EQ_INT(emq_srv_cmd(s, out, sizeof out, "CONFIG", "SET",
                              "lua-time-limit", "100", NULL),
                  '+');
    static slow h;
    slow_init(&h);
    emq_conf_t *conf = fault_conf(emq_srv_url(s));
    conf_set(conf, P_COMMAND_TIMEOUT, "10000");
    bg t;
    emq_consumer_t *c = bg_start(&t, conf, slow_handle, &h);
    WAIT_UNTIL(client_id_by_name(s, "w", 1) >= 0, 5000,
               "the consumer to block in XREADGROUP");
    static busy_script sc;
    memset(&sc, 0, sizeof sc);
    sc.s = s;
    pthread_t script;
    ASSERT(pthread_create(&script, NULL, run_busy_script, &sc) == 0);
    /* Busy: the server answers BUSY to everything but SCRIPT KILL. */
    WAIT_UNTIL(server_busy(s), 3000, "the server to answer BUSY");
    /* Room for the consumer to meet BUSY (nothing it exposes shows that:
     * server_waits stays 0 here). A stop must be prompt in any phase. */
    usleep(500 * 1000);
    emq_status st;
    int64_t took = timed_stop(&t, &st);
    int killed = 0;
    for (int i = 0; i < 50 && !killed; i++) {
        int type = emq_srv_cmd(s, out, sizeof out, "SCRIPT", "KILL", NULL);
        killed = type == '+' || strstr(out, "NOTBUSY") != NULL;
        if (!killed)
            usleep(50000);
    }
    pthread_join(script, NULL);
    fprintf(stderr, "    stop while BUSY returned in %lld ms: %s (%s)\n",
            (long long)took, emq_status_name(st), t.err.message);
    ASSERT(killed);
    /* A few ms; the defect waited command_timeout_ms (10 s). */
    if (took > emq_test_ms(2000))
        FAIL("stop took %lld ms while the server was busy (block_ms 100, "
             "command_timeout_ms 10000)",
             (long long)took);
    ASSERT_STATUS(st, EMQ_OK, &t.err);
    emq_consumer_destroy(c);
    emq_srv_stop(s);
}

TEST_TIMEOUT(faults2_stop_prompt_while_connection_frozen, 30) {
    emq_srv *s = emq_srv_start(NULL);
    emq_peer_opts po = {.mode = EMQ_PEER_PROXY,
                        .upstream_port = emq_srv_port(s)};
    emq_peer *proxy = emq_peer_start(&po);
    static slow h;
    slow_init(&h);
    emq_conf_t *conf = fault_conf(emq_peer_url(proxy));
    conf_set(conf, P_COMMAND_TIMEOUT, "10000");
    bg t;
    emq_consumer_t *c = bg_start(&t, conf, slow_handle, &h);
    WAIT_UNTIL(client_id_by_name(s, "w", 1) >= 0, 5000,
               "the consumer to block in XREADGROUP");
    emq_peer_freeze(proxy, 1);
    usleep(400 * 1000);
    emq_status st;
    int64_t took = timed_stop(&t, &st);
    emq_peer_freeze(proxy, 0);
    fprintf(stderr, "    stop while frozen returned in %lld ms: %s\n",
            (long long)took, emq_status_name(st));
    /* A few ms; the defect waited command_timeout_ms (10 s). */
    if (took > emq_test_ms(2000))
        FAIL("stop took %lld ms with the connection frozen mid-read "
             "(block_ms 100, command_timeout_ms 10000)",
             (long long)took);
    ASSERT_STATUS(st, EMQ_OK, &t.err);
    emq_consumer_destroy(c);
    emq_peer_stop(proxy);
    emq_srv_stop(s);
}

TEST_TIMEOUT(faults2_stop_prompt_while_reconnecting_to_dead_server, 30) {
    emq_srv *s = emq_srv_start(NULL);
    static slow h;
    slow_init(&h);
    emq_conf_t *conf = fault_conf(emq_srv_url(s));
    conf_set(conf, P_COMMAND_TIMEOUT, "10000");
    /* Backoffs of 10 to 20 s (jitter: half to all of 20 s): 1.5 s into
     * the first, a stop that waited it out would take 8.5 s at least. */
    conf_set(conf, P_RECONNECT_BASE, "20000");
    conf_set(conf, P_RECONNECT_MAX, "40000");
    bg t;
    emq_consumer_t *c = bg_start(&t, conf, slow_handle, &h);
    WAIT_UNTIL(client_id_by_name(s, "w", 1) >= 0, 5000,
               "the consumer to block in XREADGROUP");
    emq_srv_kill9(s);
    usleep(1500 * 1000); /* inside a reconnect backoff */
    emq_status st;
    int64_t took = timed_stop(&t, &st);
    fprintf(stderr, "    stop while reconnecting returned in %lld ms: %s\n",
            (long long)took, emq_status_name(st));
    if (took > emq_test_ms(2000))
        FAIL("stop took %lld ms while reconnecting", (long long)took);
    ASSERT_STATUS(st, EMQ_OK, &t.err);
    emq_consumer_destroy(c);
    emq_srv_stop(s);
}

/* ---- 14: malformed replies --------------------------------------------- */

/* Runs w through an intercepting proxy with rule for 3 s; returns the
 * connections the proxy accepted and checks the run is still going. */
static int connections_in_3s(const emq_icept_rule *rule, size_t *handled,
                             int *replaced_out) {
    emq_srv *s = emq_srv_start(NULL);
    emq_conn_t *adm = admin_connect(s);
    CMD_NOERR(adm, "XGROUP", "CREATE", FQ, "g", "$", "MKSTREAM");
    /* One real own pending entry, so the history read has a page. */
    produce_n(s, "jobs", "mine", 1);
    emq_reply *r = CMD(adm, "XREADGROUP", "GROUP", "g", "w", "COUNT", "1",
                       "STREAMS", FQ, ">");
    emq_reply_free(r);
    emq_icept *p = emq_icept_start(emq_srv_port(s), rule, 1);
    static slow h;
    slow_init(&h);
    emq_conf_t *conf = fault_conf(emq_icept_url(p));
    conf_set(conf, P_RECONNECT_BASE, "100");
    conf_set(conf, P_RECONNECT_MAX, "1000");
    conf_set(conf, "count", "2"); /* pages of 2 own pending entries */
    emq_conf_set_log(conf, quiet_log, NULL);
    bg t;
    emq_consumer_t *c = bg_start(&t, conf, slow_handle, &h);
    /* At least 3 s of the run, and at least one reply replaced. */
    int64_t window_end = now_ms() + 3000;
    WAIT_UNTIL(emq_icept_replaced(p) >= 1 || atomic_load(&t.done), 10000,
               "a reply replaced");
    while (now_ms() < window_end && !atomic_load(&t.done))
        usleep(20000);
    int accepted = emq_icept_accepted(p);
    int replaced = emq_icept_replaced(p);
    int done = atomic_load(&t.done);
    emq_status st = EMQ_OK;
    if (!done)
        st = bg_stop(&t, 3000);
    else
        bg_join(&t);
    *handled = recorded(&h.r);
    *replaced_out = replaced;
    fprintf(stderr,
            "    %d connections, %d replies replaced, %zu handler "
            "calls in 3 s; run %s (%s)\n",
            accepted, replaced, *handled, done ? "ended" : "still going",
            t.err.message);
    ASSERT(replaced >= 1);
    if (done)
        FAIL("a malformed reply ended the run: %s: %s", emq_status_name(t.st),
             t.err.message);
    ASSERT_STATUS(st, EMQ_OK, &t.err);
    emq_consumer_destroy(c);
    emq_icept_stop(p);
    emq_conn_destroy(adm);
    emq_srv_stop(s);
    return accepted;
}

TEST_TIMEOUT(faults2_malformed_history_reply_bounded_reconnects, 30) {
    /* Every own-pending page (XPENDING ... w, the consumer's only plain
     * XPENDING) answered with rows that are not arrays. */
    static const char bad[] = "*2\r\n:5\r\n*0\r\n";
    emq_icept_rule rule = {"XPENDING", 0, bad, 0, -1, NULL, 0};
    size_t handled;
    int replaced;
    int accepted = connections_in_3s(&rule, &handled, &replaced);
    if (accepted >= 50)
        FAIL("%d connections in 3 s for a malformed reply: a reconnect loop "
             "without backoff",
             accepted);
    ASSERT(accepted >= 2); /* it is a protocol error: it does reconnect */
    ASSERT_EQ_SIZE(handled, 0);
}

TEST_TIMEOUT(faults2_repeated_history_page_bounded, 30) {
    /* Every history read answered with the same page, whatever the cursor:
     * recovery must not go round forever. */
    /* A full page (the consumer reads 2 per page here) of ids 1-1 and
     * 1-2, whatever the start. */
    static const char page[] =
        "*2\r\n*4\r\n$3\r\n1-1\r\n$1\r\nw\r\n:0\r\n:1\r\n"
        "*4\r\n$3\r\n1-2\r\n$1\r\nw\r\n:0\r\n:1\r\n";
    emq_icept_rule rule = {"XPENDING", 0, page, 0, -1, NULL, 0};
    size_t handled;
    int replaced;
    int accepted = connections_in_3s(&rule, &handled, &replaced);
    /* Each repetition is a protocol error (reconnect with backoff), not a
     * page to read again at once. */
    if (replaced >= 100 || handled >= 20 || accepted >= 50)
        FAIL("a history page repeated forever: %d history reads, %zu handler "
             "calls and %d connections in 3 s",
             replaced, handled, accepted);
    ASSERT(accepted >= 2);
}

TEST_TIMEOUT(faults2_malformed_entries_dead_lettered_good_one_handled, 30) {
    emq_srv *s = emq_srv_start(NULL);
    emq_conn_t *adm = admin_connect(s);
    CMD_NOERR(adm, "XGROUP", "CREATE", FQ, "g", "$", "MKSTREAM");
    CMD_NOERR(adm, "XADD", FQ, "5-0", "f", "v");
    CMD_NOERR(adm, "XADD", FQ, "6-0", "f", "v");
    CMD_NOERR(adm, "XADD", FQ, "7-0", "n", "good");
    /* The server delivers all three to w's first new read; the proxy shows
     * w 5-0 with three field elements and 6-0 with an integer field name. */
    static const char shown[] =
        "*1\r\n*2\r\n$10\r\nemq:{jobs}\r\n*3\r\n"
        "*2\r\n$3\r\n5-0\r\n*3\r\n$1\r\nf\r\n$1\r\nv\r\n$1\r\nx\r\n"
        "*2\r\n$3\r\n6-0\r\n*2\r\n:7\r\n$1\r\nv\r\n"
        "*2\r\n$3\r\n7-0\r\n*2\r\n$1\r\nn\r\n$4\r\ngood\r\n";
    emq_icept_rule rule = {"XREADGROUP", 1, shown, 0, 1, NULL, 0};
    emq_icept *p = emq_icept_start(emq_srv_port(s), &rule, 1);
    static slow h;
    slow_init(&h);
    bg t;
    emq_consumer_t *c =
        bg_start(&t, fault_conf(emq_icept_url(p)), slow_handle, &h);
    int64_t end = now_ms() + emq_test_ms(5000);
    while (
        now_ms() < end && !atomic_load(&t.done) &&
        (CMD_INT(adm, "XLEN", FQ_DEAD) < 2 || pending_total(adm, FQ, "g") != 0))
        usleep(20000);
    long long dead = CMD_INT(adm, "XLEN", FQ_DEAD);
    long long pend = pending_total(adm, FQ, "g");
    int saw5 = emq_icept_saw(p, "malformed entry", "5-0");
    int saw6 = emq_icept_saw(p, "malformed entry", "6-0");
    int done = atomic_load(&t.done);
    emq_status st = done ? bg_join(&t) : bg_stop(&t, 3000);
    emq_consumer_stats stats;
    emq_consumer_stats_get(c, &stats);
    fprintf(stderr,
            "    %zu handler calls (first %s), %lld dead letters, "
            "%lld pending, dead-letter commands for 5-0/6-0: %d/%d, %d "
            "connections, %llu reconnects\n",
            h.r.n, h.r.n ? h.r.ids[0] : "-", dead, pend, saw5, saw6,
            emq_icept_accepted(p), (unsigned long long)stats.reconnects);
    ASSERT_EQ_INT(emq_icept_replaced(p), 1);
    if (done)
        FAIL("the run ended: %s: %s", emq_status_name(t.st), t.err.message);
    ASSERT_STATUS(st, EMQ_OK, &t.err);
    if (recorded_index(&h.r, "v") >= 0)
        FAIL("a malformed entry reached the handler (%zu calls, first %s)",
             h.r.n, h.r.ids[0]);
    ASSERT_EQ_SIZE(h.r.n, 1);
    ASSERT_EQ_STR(h.r.ids[0], "7-0");
    ASSERT(saw5 && saw6);
    ASSERT_EQ_INT(dead, 2);
    emq_reply *r = CMD(adm, "XRANGE", FQ_DEAD, "-", "+");
    for (size_t i = 0; i < emq_reply_len(r); i++) {
        const emq_reply *fields = emq_reply_at(emq_reply_at(r, i), 1);
        char origin[64], reason[128];
        field_of(fields, "emq.id", origin, sizeof origin);
        field_of(fields, "emq.reason", reason, sizeof reason);
        ASSERT(strcmp(origin, "5-0") == 0 || strcmp(origin, "6-0") == 0);
        ASSERT_EQ_STR(reason, "malformed entry");
    }
    emq_reply_free(r);
    ASSERT_EQ_INT(pend, 0);
    ASSERT_EQ_INT(stats.reconnects, 0);
    emq_consumer_destroy(c);
    emq_icept_stop(p);
    emq_conn_destroy(adm);
    emq_srv_stop(s);
}
