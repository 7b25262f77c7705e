/* SPDX-License-Identifier: BSD-3-Clause */
/* test_consumer_wide_dead.c: dead letters are whole, however wide the
 * entry, against a real redis-server.
 *
 * The dead-letter script copies an entry's fields through Lua's unpack,
 * which holds about 8000 values; an entry wider than that is written by
 * the consumer itself (one XADD of every field), and the script then only
 * acknowledges. Entries of 5,000 and 100,000 fields go to the dead letters
 * with every field, in order, the original acknowledged (run mode, and
 * pull mode settling from worker threads); the admin requeue (same limit
 * in its script) puts every field back on the queue. A move retried after
 * its XADD landed and its reply was lost writes nothing twice.
 */
#include "integ/admin_inspect_helpers.h"
#include "integ/poll_helpers.h"

#define WQ "emq:{jobs}"
#define WQ_DEAD "emq:{jobs}:dead"

/* Adds one entry of nfields fields f<i> = v<i> to jobs. */
static void add_wide_entry(const emq_srv *s, size_t nfields) {
    emq_field *f = calloc(nfields, sizeof *f);
    char(*names)[16] = calloc(nfields, sizeof *names);
    char(*values)[16] = calloc(nfields, sizeof *values);
    ASSERT(f != NULL && names != NULL && values != NULL);
    for (size_t i = 0; i < nfields; i++) {
        f[i].name_len = (size_t)snprintf(names[i], 16, "f%zu", i);
        f[i].value_len = (size_t)snprintf(values[i], 16, "v%zu", i);
        f[i].name = names[i];
        f[i].value = values[i];
    }
    emq_conf_t *conf = conf_for(emq_srv_url(s));
    conf_set(conf, "queue", "jobs");
    emq_producer_t *p;
    emq_error err;
    ASSERT_OK(emq_producer_new(conf, &p, &err), &err);
    emq_conf_destroy(conf);
    ASSERT_OK(emq_produce(p, f, nfields, NULL, &err), &err);
    emq_producer_destroy(p);
    free(f);
    free(names);
    free(values);
}

/* Checks that flat[from..] is f0 v0 f1 v1 ... f<n-1> v<n-1>, exactly. */
static void check_fields(const emq_reply *flat, size_t from, size_t nfields) {
    ASSERT_EQ_SIZE(emq_reply_len(flat), from + 2 * nfields);
    for (size_t i = 0; i < nfields; i++) {
        char want[16];
        size_t len;
        const char *got = emq_reply_str(emq_reply_at(flat, from + 2 * i), &len);
        int n = snprintf(want, sizeof want, "f%zu", i);
        ASSERT_EQ_MEM(got, len, want, (size_t)n);
        got = emq_reply_str(emq_reply_at(flat, from + 2 * i + 1), &len);
        n = snprintf(want, sizeof want, "v%zu", i);
        ASSERT_EQ_MEM(got, len, want, (size_t)n);
    }
}

/* The entries of XRANGE key - + (caller frees). */
static emq_reply *all_of(emq_conn_t *adm, const char *key) {
    const char *argv[] = {"XRANGE", key, "-", "+"};
    return cmdv_ok(adm, 4, argv);
}

static void wide_dead_and_requeue(size_t nfields) {
    emq_srv *s = emq_srv_start(NULL);
    emq_conn_t *adm = admin_connect(s);
    CMD_NOERR(adm, "XGROUP", "CREATE", WQ, "g", "$", "MKSTREAM");
    add_wide_entry(s, nfields);
    emq_id ids[1];
    ASSERT_EQ_SIZE(stream_ids(adm, WQ, ids, 1), 1);
    static slow h;
    slow_init(&h);
    snprintf(h.dead_prefix, sizeof h.dead_prefix, "v");
    emq_conf_t *conf = consumer_conf(s, "jobs", "g", "w", "head");
    bg b;
    emq_consumer_t *c = bg_start(&b, conf, slow_handle, &h);
    WAIT_UNTIL(CMD_INT(adm, "XLEN", WQ_DEAD) == 1 || atomic_load(&b.done),
               30000, "the wide entry in the dead letters");
    if (atomic_load(&b.done))
        FAIL("the run ended: %s", b.err.message);
    WAIT_UNTIL(pending_total(adm, WQ, "g") == 0, 10000,
               "the original acknowledged");
    ASSERT_OK(bg_stop(&b, 5000), &b.err);
    emq_consumer_stats st;
    emq_consumer_stats_get(c, &st);
    ASSERT_EQ_INT(st.dead_lettered, 1);
    ASSERT_EQ_SIZE(recorded(&h.r), 1);
    emq_consumer_destroy(c);

    /* The dead letter: the origin, then every field in order. */
    emq_reply *r = all_of(adm, WQ_DEAD);
    ASSERT_EQ_SIZE(emq_reply_len(r), 1);
    const emq_reply *flat = emq_reply_at(emq_reply_at(r, 0), 1);
    static const char *const origin[] = {"emq.id", "emq.group", "emq.consumer",
                                         "emq.deliveries", "emq.reason"};
    for (size_t k = 0; k < 5; k++) {
        size_t len;
        const char *name = emq_reply_str(emq_reply_at(flat, 2 * k), &len);
        ASSERT_EQ_MEM(name, len, origin[k], strlen(origin[k]));
    }
    size_t len;
    const char *v = emq_reply_str(emq_reply_at(flat, 1), &len);
    ASSERT_EQ_MEM(v, len, ids[0].str, strlen(ids[0].str));
    v = emq_reply_str(emq_reply_at(flat, 9), &len);
    ASSERT_EQ_MEM(v, len, "poison v0", 9);
    check_fields(flat, 10, nfields);
    emq_reply_free(r);
    /* No marker or reason left behind. */
    ASSERT_EQ_INT(CMD_INT(adm, "EXISTS", "emq:{jobs}:reasons:g"), 0);

    /* Requeued whole. */
    emq_admin_t *a = admin_open(s, "jobs", "2");
    uint64_t moved = 0;
    emq_error err;
    ASSERT_OK(emq_admin_dead_requeue(a, NULL, 0, &moved, &err), &err);
    ASSERT_EQ_INT(moved, 1);
    ASSERT_EQ_INT(CMD_INT(adm, "XLEN", WQ_DEAD), 0);
    r = all_of(adm, WQ);
    ASSERT_EQ_SIZE(emq_reply_len(r), 2);
    check_fields(emq_reply_at(emq_reply_at(r, 1), 1), 0, nfields);
    emq_reply_free(r);
    emq_admin_destroy(a);
    emq_conn_destroy(adm);
    emq_srv_stop(s);
}

TEST_TIMEOUT(wide_dead_letter_of_5000_fields_is_whole, 60) {
    wide_dead_and_requeue(5000);
}

TEST_TIMEOUT(wide_dead_letter_of_100000_fields_is_whole, 120) {
    wide_dead_and_requeue(100000);
}

/* Pull mode: a worker thread dead-letters the entry (the upkeep thread
 * or the polling thread sends it). */
TEST_TIMEOUT(wide_dead_letter_from_a_worker_thread_is_whole, 60) {
    emq_srv *s = emq_srv_start(NULL);
    emq_conn_t *adm = admin_connect(s);
    CMD_NOERR(adm, "XGROUP", "CREATE", WQ, "g", "$", "MKSTREAM");
    add_wide_entry(s, 20000);
    emq_conf_t *conf = consumer_conf(s, "jobs", "g", "w", "head");
    emq_consumer_t *c;
    emq_error err;
    ASSERT_OK(emq_consumer_new(conf, NULL, NULL, &c, &err), &err);
    emq_conf_destroy(conf);
    static work_pool pool;
    wp_start(&pool, c, 2, 0);
    snprintf(pool.dead_prefix, sizeof pool.dead_prefix, "v");
    WAIT_UNTIL(CMD_INT(adm, "XLEN", WQ_DEAD) == 1, 30000,
               "the wide entry in the dead letters");
    WAIT_UNTIL(pending_total(adm, WQ, "g") == 0, 10000,
               "the original acknowledged");
    wp_stop(&pool);
    ASSERT_OK(emq_consumer_close(c, 5000, &err), &err);
    ASSERT_EQ_INT(atomic_load(&pool.settle_errors), 0);
    emq_reply *r = all_of(adm, WQ_DEAD);
    check_fields(emq_reply_at(emq_reply_at(r, 0), 1), 10, 20000);
    emq_reply_free(r);
    emq_consumer_destroy(c);
    emq_conn_destroy(adm);
    emq_srv_stop(s);
}

/* The state a lost reply leaves: the move marked begun ("<id>:dead" in the
 * reasons hash, the dead letters' last ID before it) and its dead letter
 * written. The move done again only acknowledges. */
TEST_TIMEOUT(wide_dead_letter_retried_after_a_lost_reply_is_written_once, 60) {
    emq_srv *s = emq_srv_start(NULL);
    emq_conn_t *adm = admin_connect(s);
    CMD_NOERR(adm, "XGROUP", "CREATE", WQ, "g", "$", "MKSTREAM");
    add_wide_entry(s, 5000);
    emq_id ids[1];
    ASSERT_EQ_SIZE(stream_ids(adm, WQ, ids, 1), 1);
    char mark[64];
    snprintf(mark, sizeof mark, "%s:dead", ids[0].str);
    CMD_NOERR(adm, "XADD", WQ_DEAD, "*", "other", "letter");
    emq_id before[1];
    ASSERT_EQ_SIZE(stream_ids(adm, WQ_DEAD, before, 1), 1);
    CMD_NOERR(adm, "HSET", "emq:{jobs}:reasons:g", mark, before[0].str);
    CMD_NOERR(adm, "XADD", WQ_DEAD, "*", "emq.id", ids[0].str, "emq.group", "g",
              "emq.consumer", "w", "emq.deliveries", "1", "emq.reason",
              "poison v0", "f0", "v0");
    static slow h;
    slow_init(&h);
    snprintf(h.dead_prefix, sizeof h.dead_prefix, "v");
    bg b;
    emq_consumer_t *c = bg_start(&b, consumer_conf(s, "jobs", "g", "w", "head"),
                                 slow_handle, &h);
    WAIT_UNTIL((recorded(&h.r) >= 1 && pending_total(adm, WQ, "g") == 0) ||
                   atomic_load(&b.done),
               30000, "the original handled and acknowledged");
    ASSERT_OK(bg_stop(&b, 5000), &b.err);
    ASSERT_EQ_INT(CMD_INT(adm, "XLEN", WQ_DEAD), 2);
    emq_consumer_stats st;
    emq_consumer_stats_get(c, &st);
    ASSERT_EQ_INT(st.dead_lettered, 1);
    ASSERT_EQ_INT(CMD_INT(adm, "EXISTS", "emq:{jobs}:reasons:g"), 0);
    emq_consumer_destroy(c);
    emq_conn_destroy(adm);
    emq_srv_stop(s);
}

/* Pull mode with a backlog, reads going ahead two at a time: dead letters
 * too wide for the script, between 20,000 plain entries, are written
 * whole (their moves wait for a round with no read owed on the
 * connection), and every plain entry is acknowledged. */
TEST_TIMEOUT(wide_dead_letters_amid_a_backlog_read_ahead, 90) {
    emq_srv *s = emq_srv_start(NULL);
    emq_conn_t *adm = admin_connect(s);
    CMD_NOERR(adm, "XGROUP", "CREATE", WQ, "g", "$", "MKSTREAM");
    for (int k = 0; k < 4; k++) {
        produce_n(s, "jobs", "j", 5000);
        if (k < 3)
            add_wide_entry(s, 9000);
    }
    emq_conf_t *conf = poll_conf(emq_srv_url(s), "1000");
    conf_set(conf, "start", "head");
    conf_set(conf, "count", "100");
    conf_set(conf, "claim.min_idle_ms", "60000");
    emq_consumer_t *c = poll_consumer(conf);
    emq_conf_destroy(conf);
    static work_pool pool;
    snprintf(pool.dead_prefix, sizeof pool.dead_prefix, "v");
    wp_start(&pool, c, 4, 0);
    snprintf(pool.dead_prefix, sizeof pool.dead_prefix, "v");
    WAIT_UNTIL((CMD_INT(adm, "XLEN", WQ_DEAD) == 3 &&
                pending_total(adm, WQ, "g") == 0) ||
                   atomic_load(&pool.poller_ended),
               60000, "3 dead letters and nothing pending");
    if (atomic_load(&pool.poller_ended))
        FAIL("poll failed: %s", pool.poll_error);
    wp_stop(&pool);
    emq_error err;
    ASSERT_OK(emq_consumer_close(c, 5000, &err), &err);
    ASSERT_EQ_INT(atomic_load(&pool.settle_errors), 0);
    emq_consumer_stats st;
    emq_consumer_stats_get(c, &st);
    printf("    %llu acknowledged, %llu dead-lettered, %llu reads\n",
           (unsigned long long)st.acked, (unsigned long long)st.dead_lettered,
           (unsigned long long)st.reads);
    ASSERT_EQ_INT(st.dead_lettered, 3);
    /* Every entry is acknowledged on the server (nothing pending, above).
     * The count (XACK's answers) can be lower: a round of settlements
     * sent again (its reply lost, or another command of it answered "not
     * now") sends XACKs that already ran, and they answer 0. A matrix run
     * on Redis 7.2 beside a loaded machine saw 18,960 of 20,000, in 192
     * reads (204-205 usually); not reproduced in 12 runs alone. */
    ASSERT(st.acked <= 20000 && st.acked > 0);
    emq_reply *r = all_of(adm, WQ_DEAD);
    ASSERT_EQ_SIZE(emq_reply_len(r), 3);
    for (size_t i = 0; i < 3; i++)
        check_fields(emq_reply_at(emq_reply_at(r, i), 1), 10, 9000);
    emq_reply_free(r);
    emq_consumer_destroy(c);
    emq_conn_destroy(adm);
    emq_srv_stop(s);
}
