/* SPDX-License-Identifier: BSD-3-Clause */
/* test_consumer_batch.c: the batch handler against a real
 * redis-server: up to batch.max entries per call, a verdict per entry,
 * the same ownership as single entries while a slow batch runs beside a
 * claiming peer, and a stop in the middle of a batch.
 */
#include "integ/poll_helpers.h"

#define BQ "emq:{jobs}"

typedef struct batcher {
    recorder r;
    int sleep_ms;
    int first_sleep_ms; /* the first call's, when set */
    atomic_int calls, biggest, in_call;
    emq_consumer_t *c;
    atomic_int stop_in_call; /* stop the consumer during the next call */
} batcher;

static void batch_handle(void *opaque, const emq_entry *const *entries,
                         size_t n, emq_outcome *outcomes) {
    batcher *b = opaque;
    int first = atomic_fetch_add(&b->calls, 1) == 0;
    atomic_store(&b->in_call, 1);
    if ((int)n > atomic_load(&b->biggest))
        atomic_store(&b->biggest, (int)n);
    for (size_t i = 0; i < n; i++) {
        char reason[64];
        record(&b->r, entries[i], reason, sizeof reason);
        char v[32];
        snprintf(v, sizeof v, "%.*s", (int)entries[i]->fields[0].value_len,
                 entries[i]->fields[0].value);
        char last = v[strlen(v) - 1];
        if (last == '3') {
            outcomes[i].verdict = EMQ_DEAD;
            snprintf(outcomes[i].reason, sizeof outcomes[i].reason, "poison %s",
                     v);
        } else if (last == '7' && entries[i]->deliveries == 1) {
            outcomes[i].verdict = EMQ_RETRY;
        }
    }
    if (atomic_exchange(&b->stop_in_call, 0))
        emq_consumer_stop(b->c);
    int sleep_ms = first && b->first_sleep_ms ? b->first_sleep_ms : b->sleep_ms;
    if (sleep_ms)
        usleep((useconds_t)sleep_ms * 1000);
    atomic_store(&b->in_call, 0);
}

static emq_conf_t *batch_conf(const char *url) {
    emq_conf_t *conf = fault_conf(url);
    conf_set(conf, "claim.min_idle_ms", "400");
    conf_set(conf, "retry.backoff_ms", "0");
    conf_set(conf, "batch.max", "20");
    return conf;
}

/* 100 entries in batches of at most 20 while a peer claims every 100 ms
 * what has been idle STALL_CLAIM_IDLE_MS (8 s): the first batch is held
 * 10 s, longer than that, and the 80 read with it wait as long behind it;
 * the later batches 300 ms each. A verdict per entry (ack, retry once,
 * dead letter with its reason), nothing claimed, nothing left pending.
 * The consumer's own claim beat is off (once a minute): it would take
 * back what it failed to refresh (as its own again) before the peer did.
 * The lease (STALL_LEASE_TTL) outlasts a stall of 5 s as claim idle
 * does. */
TEST_TIMEOUT(batch_verdict_per_entry_slow_batches, 120) {
    emq_srv *s = emq_srv_start(NULL);
    emq_conn_t *adm = admin_connect(s);
    CMD_NOERR(adm, "XGROUP", "CREATE", BQ, "g", "$", "MKSTREAM");
    produce_n(s, "jobs", "v", 100);
    emq_conf_t *conf = batch_conf(emq_srv_url(s));
    conf_set(conf, "claim.min_idle_ms", STALL_CLAIM_IDLE);
    conf_set(conf, "claim.interval_ms", "60000");
    conf_set(conf, "lease.ttl_ms", STALL_LEASE_TTL);
    static batcher b;
    memset(&b, 0, sizeof b);
    recorder_init(&b.r);
    b.first_sleep_ms = STALL_CLAIM_IDLE_MS + 2000;
    b.sleep_ms = 300;
    emq_consumer_t *c;
    emq_error err;
    ASSERT_OK(emq_consumer_new_batch(conf, batch_handle, &b, &c, &err), &err);
    b.c = c;
    static claimer peer;
    claimer_start_idle(&peer, s, STALL_CLAIM_IDLE_MS);
    runner_thread t;
    start_consumer(&t, c);
    WAIT_UNTIL(recorded(&b.r) >= 110 || atomic_load(&peer.claimed) > 0, 60000,
               "100 entries and 10 retries");
    ASSERT_EQ_INT(atomic_load(&peer.claimed), 0);
    WAIT_UNTIL(pending_total(adm, BQ, "g") == 0, 5000, "all settled");
    claimer_stop(&peer);
    ASSERT_EQ_INT(atomic_load(&peer.claimed), 0);
    ASSERT_EQ_INT(atomic_load(&b.biggest), 20);
    ASSERT(atomic_load(&b.calls) >= 6); /* 110 / 20 */
    ASSERT_EQ_INT(times_seen(&b.r, "v17"), 2);
    ASSERT_EQ_INT(times_seen(&b.r, "v13"), 1);
    ASSERT_EQ_INT(times_seen(&b.r, "v12"), 1);
    ASSERT_EQ_INT(CMD_INT(adm, "XLEN", BQ ":dead"), 10);
    emq_reply *dl = CMD(adm, "XRANGE", BQ ":dead", "-", "+");
    for (size_t i = 0; i < emq_reply_len(dl); i++) {
        const emq_reply *f = emq_reply_at(emq_reply_at(dl, i), 1);
        char v[32], reason[64], want[64];
        ASSERT(field_of(f, "n", v, sizeof v));
        ASSERT(field_of(f, "emq.reason", reason, sizeof reason));
        snprintf(want, sizeof want, "poison %s", v);
        ASSERT_EQ_STR(reason, want);
    }
    emq_reply_free(dl);
    emq_consumer_stop(c);
    ASSERT_OK(join_consumer(&t), &t.err);
    emq_consumer_stats st;
    emq_consumer_stats_get(c, &st);
    ASSERT_EQ_INT((long long)st.delivered, 110);
    ASSERT_EQ_INT((long long)st.acked, 90); /* 80, and the 10 retried */
    ASSERT_EQ_INT((long long)st.dead_lettered, 10);
    ASSERT_EQ_INT((long long)st.retried, 10);
    emq_consumer_destroy(c);
    emq_conf_destroy(conf);
    emq_conn_destroy(adm);
    emq_srv_stop(s);
}

/* A stop during a batch: its outcomes are still settled, entries read
 * ahead and not handed out go back uncounted, run returns EMQ_OK; the
 * next run gets the rest, counted once. */
TEST_TIMEOUT(batch_stop_mid_batch_settles_it_and_hands_back_the_rest, 40) {
    emq_srv *s = emq_srv_start(NULL);
    emq_conn_t *adm = admin_connect(s);
    CMD_NOERR(adm, "XGROUP", "CREATE", BQ, "g", "$", "MKSTREAM");
    produce_n(s, "jobs", "v", 60);
    emq_conf_t *conf = batch_conf(emq_srv_url(s));
    conf_set(conf, "count", "60");
    static batcher b;
    memset(&b, 0, sizeof b);
    recorder_init(&b.r);
    b.sleep_ms = 300;
    atomic_store(&b.stop_in_call, 1);
    emq_consumer_t *c;
    emq_error err;
    ASSERT_OK(emq_consumer_new_batch(conf, batch_handle, &b, &c, &err), &err);
    b.c = c;
    runner_thread t;
    start_consumer(&t, c);
    ASSERT_OK(join_consumer(&t), &t.err);
    ASSERT_EQ_INT(atomic_load(&b.calls), 1);
    ASSERT_EQ_INT((long long)recorded(&b.r), 20);
    emq_consumer_stats st;
    emq_consumer_stats_get(c, &st);
    /* Each of the 40 is released (count undone) or kept with its unseen
     * mark (read ahead long enough: its next take does not count it). */
    ASSERT_EQ_INT((long long)st.released +
                      CMD_INT(adm, "SCARD", "emq:{jobs}:unseen:g"),
                  40);
    /* The first 20 are settled: 2 dead, 2 retried (pending), 16 acked. */
    ASSERT_EQ_INT(CMD_INT(adm, "XLEN", BQ ":dead"), 2);
    ASSERT_EQ_INT(pending_total(adm, BQ, "g"), 42);
    emq_consumer_destroy(c);
    memset(&b, 0, sizeof b);
    recorder_init(&b.r);
    ASSERT_OK(emq_consumer_new_batch(conf, batch_handle, &b, &c, &err), &err);
    b.c = c;
    start_consumer(&t, c);
    WAIT_UNTIL(pending_total(adm, BQ, "g") == 0, 10000, "the rest handled");
    emq_consumer_stop(c);
    ASSERT_OK(join_consumer(&t), &t.err);
    /* The 40 handed back come once each with count 1; the 2 retried ones
     * with 2 (retried once, delivered again). */
    pthread_mutex_lock(&b.r.lock);
    size_t n = b.r.n;
    int ones = 0, twos = 0;
    for (size_t i = 0; i < n; i++) {
        ones += b.r.deliveries[i] == 1;
        twos += b.r.deliveries[i] == 2;
    }
    pthread_mutex_unlock(&b.r.lock);
    ASSERT_EQ_INT(ones, 40);
    ASSERT(twos >= 2);
    emq_consumer_destroy(c);
    emq_conf_destroy(conf);
    emq_conn_destroy(adm);
    emq_srv_stop(s);
}
