/* SPDX-License-Identifier: BSD-3-Clause */
/* test_consumer_load.c: sharing work, groups, batched acknowledgements and
 * the counters, against a real redis-server.
 *
 * Load split: a pool of 4 consumers over 10,000 entries handles every entry
 * exactly once (per-consumer sets disjoint, union complete) and the pool
 * members' counters add up. Groups: two groups on one stream each see
 * every entry. Acks: acknowledgements are batched and ride with the next
 * read, so round trips stay about equal to reads and the server runs about
 * one XACK per read, not one per entry. Stats: the JSON report names every
 * counter with the same numbers as emq_consumer_stats_get.
 */
#include "integ/tally_helpers.h"

#include <unistd.h>

#define LOAD_N 10000
#define POOL_N 4

TEST_TIMEOUT(consumer_pool_of_four_splits_ten_thousand_exactly_once, 40) {
    emq_srv *s = emq_srv_start(NULL);
    static tally t;
    const char *names[POOL_N] = {"pw-1", "pw-2", "pw-3", "pw-4"};
    tally_init(&t, LOAD_N, names, POOL_N);
    emq_conf_t *conf = consumer_conf(s, "load", "g", "pw", "new");
    emq_pool_t *pool = NULL;
    emq_error err;
    memset(&err, 0, sizeof err);
    ASSERT_OK(emq_pool_new(conf, POOL_N, tally_handler, &t, &pool, &err), &err);
    emq_conf_destroy(conf);
    static pool_thread pt;
    start_pool(&pt, pool);
    for (int i = 0; i < POOL_N; i++)
        wait_reads(emq_pool_consumer(pool, i), NULL, 2, 5000);

    produce_batch_n(s, "load", 0, LOAD_N);
    wait_tally(&t, LOAD_N, 15000);
    wait_pending_zero(s, "emq:{load}", "g", 5000);
    emq_pool_stop(pool);
    pthread_join(pt.thread, NULL);
    ASSERT_OK(pt.st, &pt.err);

    ASSERT_EQ_INT(atomic_load(&t.bad), 0);
    ASSERT_EQ_INT(atomic_load(&t.total), LOAD_N);
    int per[POOL_N] = {0};
    for (int i = 0; i < LOAD_N; i++) {
        if (atomic_load(&t.times[i]) != 1)
            FAIL("entry %d handled %d times", i, atomic_load(&t.times[i]));
        int owner = atomic_load(&t.owner[i]);
        ASSERT(owner >= 1 && owner <= POOL_N);
        per[owner - 1]++;
    }
    uint64_t delivered = 0, acked = 0;
    int busy = 0;
    for (int i = 0; i < POOL_N; i++) {
        emq_consumer_t *c = emq_pool_consumer(pool, i);
        ASSERT(c != NULL);
        emq_consumer_stats st;
        emq_consumer_stats_get(c, &st);
        /* The member's own counters match what its handler saw. */
        ASSERT_EQ_INT(st.delivered, per[i]);
        ASSERT_EQ_INT(st.delivered, atomic_load(&t.per_worker[i]));
        ASSERT_EQ_INT(st.acked, st.delivered);
        ASSERT_EQ_INT(st.failed, 0);
        ASSERT_EQ_INT(st.reconnects, 0);
        delivered += st.delivered;
        acked += st.acked;
        busy += per[i] > 0;
    }
    ASSERT(emq_pool_consumer(pool, POOL_N) == NULL);
    ASSERT_EQ_INT(delivered, LOAD_N);
    ASSERT_EQ_INT(acked, LOAD_N);
    ASSERT(busy >= 2);
    ASSERT_EQ_INT(pending_count(s, "emq:{load}", "g"), 0);
    emq_pool_destroy(pool);
    emq_srv_stop(s);
}

TEST(consumer_pool_member_failing_to_start_stops_the_pool) {
    emq_srv *s = emq_srv_start(NULL);
    char out[256];
    /* A live process of this machine (this one) holds member 2's name,
     * for far longer than the pool may take to stop: a pool that waited
     * for the name would not stop in time. */
    char holder[256], px[24];
    local_holder_token((long)getpid(), holder, sizeof holder);
    snprintf(px, sizeof px, "%d", emq_test_ms(10000));
    emq_srv_cmd(s, out, sizeof out, "SET", "emq:{pf}:lease:g:pf-2", holder,
                "PX", px, NULL);
    static tally t;
    const char *names[3] = {"pf-1", "pf-2", "pf-3"};
    tally_init(&t, 10, names, 3);
    emq_conf_t *conf = consumer_conf(s, "pf", "g", "pf", "head");
    emq_pool_t *pool = NULL;
    emq_error err;
    memset(&err, 0, sizeof err);
    ASSERT_OK(emq_pool_new(conf, 3, tally_handler, &t, &pool, &err), &err);
    emq_conf_destroy(conf);
    int64_t t0 = now_ms();
    emq_status st = emq_pool_run(pool, &err);
    int64_t took = now_ms() - t0;
    printf("    the pool stopped in %lld ms\n", (long long)took);
    ASSERT(st != EMQ_OK);
    ASSERT(took < emq_test_ms(3000));
    ASSERT_EQ_INT(err.code, st);
    ASSERT_CONTAINS(err.message, "'pf-2'");
    ASSERT_CONTAINS(err.message, "in use");
    /* The other members let their names go on the way out. */
    emq_srv_cmd(s, out, sizeof out, "EXISTS", "emq:{pf}:lease:g:pf-1",
                "emq:{pf}:lease:g:pf-3", NULL);
    ASSERT_EQ_STR(out, "0");
    emq_srv_cmd(s, out, sizeof out, "GET", "emq:{pf}:lease:g:pf-2", NULL);
    ASSERT_EQ_STR(out, holder);
    emq_pool_destroy(pool);
    emq_srv_stop(s);
}

TEST(consumer_two_groups_each_see_every_entry) {
    emq_srv *s = emq_srv_start(NULL);
    produce_batch_n(s, "fan", 0, 200);
    static tally ta, tb;
    const char *names[1] = {"w1"};
    tally_init(&ta, 200, names, 1);
    tally_init(&tb, 200, names, 1);
    emq_conf_t *ca = consumer_conf(s, "fan", "ga", "w1", "head");
    emq_conf_t *cb = consumer_conf(s, "fan", "gb", "w1", "head");
    emq_consumer_t *a = consumer_ok(ca, tally_handler, &ta);
    emq_consumer_t *b = consumer_ok(cb, tally_handler, &tb);
    emq_conf_destroy(ca);
    emq_conf_destroy(cb);
    runner_thread ra, rb;
    start_consumer(&ra, a);
    start_consumer(&rb, b);
    wait_tally(&ta, 200, 5000);
    wait_tally(&tb, 200, 5000);
    wait_pending_zero(s, "emq:{fan}", "ga", 3000);
    wait_pending_zero(s, "emq:{fan}", "gb", 3000);
    emq_consumer_stop(a);
    emq_consumer_stop(b);
    ASSERT_OK(join_consumer(&ra), &ra.err);
    ASSERT_OK(join_consumer(&rb), &rb.err);
    for (int i = 0; i < 200; i++) {
        ASSERT_EQ_INT(atomic_load(&ta.times[i]), 1);
        ASSERT_EQ_INT(atomic_load(&tb.times[i]), 1);
    }
    ASSERT_EQ_INT(atomic_load(&ta.total), 200);
    ASSERT_EQ_INT(atomic_load(&tb.total), 200);
    emq_consumer_destroy(a);
    emq_consumer_destroy(b);
    emq_srv_stop(s);
}

TEST(consumer_acks_batched_per_read) {
    emq_srv *s = emq_srv_start(NULL);
    produce_batch_n(s, "acks", 0, 100);
    static tally t;
    const char *names[1] = {"w1"};
    tally_init(&t, 100, names, 1);
    emq_conf_t *conf = consumer_conf(s, "acks", "g", "w1", "head");
    conf_set(conf, "count", "10");
    conf_set(conf, "claim.interval_ms", "600000"); /* no claim beat here */
    emq_consumer_t *c = consumer_ok(conf, tally_handler, &t);
    emq_conf_destroy(conf);
    long long xack0 = cmdstat_calls(s, "xack");
    runner_thread r;
    start_consumer(&r, c);
    wait_tally(&t, 100, 5000);
    /* Acknowledged while still running, by the upkeep connection. */
    wait_pending_zero(s, "emq:{acks}", "g", 3000);
    emq_consumer_stop(c);
    ASSERT_OK(join_consumer(&r), &r.err);

    emq_consumer_stats st;
    emq_consumer_stats_get(c, &st);
    ASSERT_EQ_INT(st.delivered, 100);
    ASSERT_EQ_INT(st.acked, 100);
    /* 100 entries at COUNT 10: at least 10 reads with data. */
    ASSERT(st.reads >= 10);
    ASSERT(st.round_trips >= st.reads);
    /* Start-up costs a fixed few round trips (lease, door); after that a
     * read, and at most one settlement round per batch on the upkeep
     * connection (100 more if acks went one by one). */
    if (st.round_trips > 2 * st.reads + 5)
        FAIL("round_trips %llu vs reads %llu: acks took round trips of "
             "their own",
             (unsigned long long)st.round_trips, (unsigned long long)st.reads);
    long long xacks = cmdstat_calls(s, "xack") - xack0;
    ASSERT(xacks >= 1);
    /* About one XACK per batch (10), never one per entry. */
    if (xacks > 12 || (uint64_t)xacks > st.reads + 1)
        FAIL("the server ran %lld XACK for %llu reads and 100 entries", xacks,
             (unsigned long long)st.reads);
    ASSERT_EQ_INT(pending_count(s, "emq:{acks}", "g"), 0);
    emq_consumer_destroy(c);
    emq_srv_stop(s);
}

/* The number after "\"name\":" in json; fails when absent. */
static unsigned long long json_number(const char *json, const char *name) {
    char key[64];
    snprintf(key, sizeof key, "\"%s\":", name);
    const char *p = strstr(json, key);
    if (p == NULL)
        FAIL("stats JSON lacks %s: %s", key, json);
    p += strlen(key);
    if (*p < '0' || *p > '9')
        FAIL("stats JSON %s is not a number: %s", key, json);
    return strtoull(p, NULL, 10);
}

TEST(consumer_stats_json_matches_counters) {
    emq_srv *s = emq_srv_start(NULL);
    produce_n(s, "stj", "v", 6);
    static recorder r;
    recorder_init(&r);
    r.retry_value = "v2";
    r.dead_value = "v4";
    emq_conf_t *conf = consumer_conf(s, "stj", "g", "w\"1", "head");
    /* v2 comes back in an hour, not after the default 0.5-1 s, which a
     * loaded machine can spend between its retry and the stop (a second
     * delivery then made it 7 handler calls): one call per entry. */
    conf_set(conf, "retry.backoff_max_ms", "3600000");
    conf_set(conf, "retry.backoff_ms", "3600000");
    emq_consumer_t *c = consumer_ok(conf, record, &r);
    emq_conf_destroy(conf);
    runner_thread t;
    start_consumer(&t, c);
    wait_for(&r, 6, 3000);
    wait_reads(c, &t, 3, 3000); /* the acks went with a later read */
    emq_consumer_stop(c);
    ASSERT_OK(join_consumer(&t), &t.err);

    emq_consumer_stats st;
    emq_consumer_stats_get(c, &st);
    ASSERT_EQ_INT(st.delivered, 6);
    ASSERT_EQ_INT(st.acked, 4);
    ASSERT_EQ_INT(st.retried, 1);
    ASSERT_EQ_INT(st.failed, 2);
    ASSERT_EQ_INT(st.dead_lettered, 1);

    char json[2048];
    size_t need = emq_consumer_stats_json(c, json, sizeof json);
    ASSERT_EQ_SIZE(need, strlen(json));
    ASSERT(need > 2 && json[0] == '{' && json[need - 1] == '}');
    /* The name's quote is escaped, so the text stays valid JSON. */
    ASSERT_CONTAINS(json, "\"consumer\":\"w\\\"1\"");
    size_t quotes = 0;
    for (size_t i = 0; i < need; i++)
        if (json[i] == '"' && (i == 0 || json[i - 1] != '\\'))
            quotes++;
    ASSERT_EQ_INT(quotes % 2, 0);
    ASSERT_EQ_INT(json_number(json, "delivered"), st.delivered);
    ASSERT_EQ_INT(json_number(json, "acked"), st.acked);
    ASSERT_EQ_INT(json_number(json, "retried"), st.retried);
    ASSERT_EQ_INT(json_number(json, "failed"), st.failed);
    ASSERT_EQ_INT(json_number(json, "dead_lettered"), st.dead_lettered);
    ASSERT_EQ_INT(json_number(json, "claimed"), st.claimed);
    ASSERT_EQ_INT(json_number(json, "deleted_pending"), st.deleted_pending);
    ASSERT_EQ_INT(json_number(json, "reconnects"), st.reconnects);
    ASSERT_EQ_INT(json_number(json, "group_recreated"), st.group_recreated);
    ASSERT_EQ_INT(json_number(json, "reads"), st.reads);
    ASSERT_EQ_INT(json_number(json, "round_trips"), st.round_trips);

    /* Truncated like snprintf: NUL-terminated, returns the full length. */
    char small[10];
    memset(small, 'x', sizeof small);
    ASSERT_EQ_SIZE(emq_consumer_stats_json(c, small, sizeof small), need);
    ASSERT_EQ_INT(small[9], '\0');
    ASSERT(memcmp(small, json, 9) == 0);
    emq_consumer_destroy(c);
    emq_srv_stop(s);
}

TEST(consumer_stats_json_holds_a_long_stream_key_whole) {
    emq_srv *s = emq_srv_start(NULL);
    /* A raw stream key of 1000 bytes (the limit is 1024), with a tag. */
    static char key[1001];
    memset(key, 'k', 1000);
    key[0] = '{';
    key[4] = '}';
    key[1000] = '\0';
    emq_conf_t *conf = conf_for(emq_srv_url(s));
    conf_set(conf, "stream", key);
    conf_set(conf, "group", "g");
    conf_set(conf, "consumer", "w1");
    conf_set(conf, "start", "head");
    emq_consumer_t *c = consumer_ok(conf, record, NULL);
    emq_conf_destroy(conf);
    static char json[8192];
    size_t need = emq_consumer_stats_json(c, json, sizeof json);
    ASSERT_EQ_SIZE(need, strlen(json));
    if (need <= 1000 || json[need - 1] != '}')
        FAIL("stats JSON of %zu bytes: %.80s ... %s", need, json,
             need > 40 ? json + need - 40 : json);
    char want[1100];
    snprintf(want, sizeof want, "\"stream\":\"%s\"", key);
    ASSERT_CONTAINS(json, want);
    emq_consumer_destroy(c);
    emq_srv_stop(s);
}
