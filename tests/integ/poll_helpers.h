/* SPDX-License-Identifier: BSD-3-Clause */
/* poll_helpers.h: a service written against the poll API, for the tests
 * of the pull API (test_consumer_poll.c, test_consumer_batch.c).
 *
 * One poller thread takes entries with emq_consumer_poll and queues them;
 * a pool of worker threads takes them from the queue, records each one,
 * sleeps (a slow job), then settles it from the worker thread: ack, or
 * retry/dead for values with a chosen prefix. The pool counts how many
 * entries its workers hold at once.
 */
#ifndef EMQ_TEST_POLL_HELPERS_H
#define EMQ_TEST_POLL_HELPERS_H

#include "integ/ownership_helpers.h"

/* fault_conf with claims that would take anything idle 400 ms. */
static inline emq_conf_t *poll_conf(const char *url,
                                    const char *max_in_flight) {
    emq_conf_t *conf = fault_conf(url);
    conf_set(conf, "claim.min_idle_ms", "400");
    conf_set(conf, "claim.interval_ms", "100");
    conf_set(conf, "max_in_flight", max_in_flight);
    return conf;
}

/* Reads that block block_ms, with no claim beat or lease renewal to cut
 * them short and no command timeout to end a reply held back. */
static inline void long_reads(emq_conf_t *conf, const char *block_ms) {
    conf_set(conf, "block_ms", block_ms);
    conf_set(conf, "lease.ttl_ms", "200000"); /* > 3 x block_ms */
    conf_set(conf, "claim.interval_ms", "600000");
    conf_set(conf, "command_timeout_ms", "60000");
}

/* The entry's first value as a string (cut to size). */
static inline void value_of(const emq_entry *e, char *out, size_t size) {
    snprintf(out, size, "%.*s", (int)e->fields[0].value_len,
             e->fields[0].value);
}

/* A pull-mode consumer of conf (no handler). */
static inline emq_consumer_t *poll_consumer(emq_conf_t *conf) {
    emq_consumer_t *c;
    emq_error err;
    ASSERT_OK(emq_consumer_new(conf, NULL, NULL, &c, &err), &err);
    return c;
}

/* Polls until n entries are out (bounded), into got[]; returns how many. */
static inline size_t poll_until(emq_consumer_t *c, emq_entry **got, size_t n,
                                int ms) {
    size_t have = 0;
    int64_t end = now_ms() + emq_test_ms(ms);
    while (have < n && now_ms() < end) {
        size_t k = 0;
        emq_error err;
        ASSERT_OK(emq_consumer_poll(c, got + have, n - have, 50, &k, &err),
                  &err);
        have += k;
    }
    return have;
}

#define WP_QUEUE_MAX 4096
#define WP_THREADS_MAX 128

typedef struct work_pool {
    emq_consumer_t *c;
    recorder r; /* every entry a worker took */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    emq_entry *q[WP_QUEUE_MAX];
    size_t head, n;
    int quit;                  /* workers end once the queue is empty */
    int sleep_ms;              /* per entry */
    char retry_prefix[16];     /* retry these at their first delivery */
    char dead_prefix[16];      /* dead-letter these */
    atomic_int busy, busy_max; /* entries in workers' hands */
    atomic_int settle_errors;
    char last_error[300];
    pthread_t poller, workers[WP_THREADS_MAX];
    int nworkers;
    atomic_int poller_quit;
    emq_status poll_status; /* what ended the poller */
    char poll_error[300];   /* ... and its message */
    atomic_int poller_ended;
} work_pool;

static inline void *wp_poller(void *arg) {
    work_pool *p = arg;
    emq_entry *got[64];
    p->poll_status = EMQ_OK;
    while (!atomic_load(&p->poller_quit)) {
        size_t n = 0;
        emq_error err;
        emq_status st = emq_consumer_poll(p->c, got, 64, 100, &n, &err);
        if (st != EMQ_OK) {
            p->poll_status = st;
            snprintf(p->poll_error, sizeof p->poll_error, "%s", err.message);
            break;
        }
        pthread_mutex_lock(&p->mu);
        for (size_t i = 0; i < n; i++) {
            if (p->n == WP_QUEUE_MAX)
                FAIL("the test's work queue overflowed");
            p->q[(p->head + p->n++) % WP_QUEUE_MAX] = got[i];
        }
        pthread_cond_broadcast(&p->cv);
        pthread_mutex_unlock(&p->mu);
    }
    atomic_store(&p->poller_ended, 1);
    return NULL;
}

static inline void *wp_worker(void *arg) {
    work_pool *p = arg;
    for (;;) {
        pthread_mutex_lock(&p->mu);
        while (p->n == 0 && !p->quit)
            pthread_cond_wait(&p->cv, &p->mu);
        if (p->n == 0) {
            pthread_mutex_unlock(&p->mu);
            return NULL;
        }
        emq_entry *e = p->q[p->head];
        p->head = (p->head + 1) % WP_QUEUE_MAX;
        p->n--;
        pthread_mutex_unlock(&p->mu);
        int busy = atomic_fetch_add(&p->busy, 1) + 1;
        int seen = atomic_load(&p->busy_max);
        while (busy > seen &&
               !atomic_compare_exchange_weak(&p->busy_max, &seen, busy))
            ;
        char reason[64];
        record(&p->r, e, reason, sizeof reason);
        if (p->sleep_ms > 0)
            usleep((useconds_t)p->sleep_ms * 1000);
        char v[32];
        snprintf(v, sizeof v, "%.*s", (int)e->fields[0].value_len,
                 e->fields[0].value);
        emq_error err;
        emq_status st;
        if (has_prefix(v, p->dead_prefix))
            st = emq_consumer_dead(p->c, e, "poison", &err);
        else if (has_prefix(v, p->retry_prefix) && e->deliveries == 1)
            st = emq_consumer_retry(p->c, e, 0, "again", &err);
        else
            st = emq_consumer_ack(p->c, e, &err);
        if (st != EMQ_OK) {
            atomic_fetch_add(&p->settle_errors, 1);
            snprintf(p->last_error, sizeof p->last_error, "%s: %s",
                     emq_status_name(st), err.message);
        }
        atomic_fetch_sub(&p->busy, 1);
        emq_entry_free(e);
    }
}

/* Starts a poller and nworkers workers over c. */
static inline void wp_start(work_pool *p, emq_consumer_t *c, int nworkers,
                            int sleep_ms) {
    memset(p, 0, sizeof *p);
    recorder_init(&p->r);
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv, NULL);
    p->c = c;
    p->sleep_ms = sleep_ms;
    p->nworkers = nworkers;
    for (int i = 0; i < nworkers; i++)
        ASSERT(pthread_create(&p->workers[i], NULL, wp_worker, p) == 0);
    ASSERT(pthread_create(&p->poller, NULL, wp_poller, p) == 0);
}

/* Stops polling, lets the workers finish what they hold, joins all. */
static inline void wp_stop(work_pool *p) {
    atomic_store(&p->poller_quit, 1);
    pthread_join(p->poller, NULL);
    pthread_mutex_lock(&p->mu);
    p->quit = 1;
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
    for (int i = 0; i < p->nworkers; i++)
        pthread_join(p->workers[i], NULL);
}

/* The number of distinct values recorded, and whether any came twice at
 * the same delivery count (handed out twice). */
static inline size_t wp_distinct(recorder *r, int *twice) {
    *twice = 0;
    size_t distinct = 0;
    pthread_mutex_lock(&r->lock);
    for (size_t i = 0; i < r->n; i++) {
        int first = 1;
        for (size_t k = 0; k < i; k++) {
            if (strcmp(r->values[k], r->values[i]) == 0) {
                first = 0;
                if (r->deliveries[k] == r->deliveries[i])
                    *twice = 1;
            }
        }
        distinct += first;
    }
    pthread_mutex_unlock(&r->lock);
    return distinct;
}

/* Connections the server has open under name. */
static inline int connections_named(const emq_srv *s, const char *name) {
    static char out[65536];
    if (emq_srv_cmd(s, out, sizeof out, "CLIENT", "LIST", NULL) < 0)
        return -1;
    char key[200];
    snprintf(key, sizeof key, " name=%s ", name);
    int n = 0;
    for (char *p = out; (p = strstr(p, key)) != NULL; p += strlen(key))
        n++;
    return n;
}

/* ---- a peer that claims ------------------------------------------------ */

/* claim.min_idle_ms of the tests where a peer claims beside handlers that
 * hold entries longer than that. The owner refreshes what it holds every
 * quarter of it, so only an upkeep starved for three quarters of it lets
 * the peer take a live entry. 400 ms did not hold on a loaded machine (2
 * cores, six tests at once beside a whole CI run): the peer took all 100
 * entries of a consumer at once. */
#define PEER_CLAIM_IDLE_MS 2000
#define PEER_CLAIM_IDLE "2000"

/* The same for tests that must outlast a loaded machine's stalls: a
 * process or its server held off the CPU for 2-4 s now and then (load
 * 15-30 on 2 cores). The owner refreshes an entry once it is a quarter
 * of claim idle old, looking every eighth, so a stall past 5/8 of claim
 * idle lets the peer take a live entry: 1.25 s at 2 s, 5 s at 8 s. A
 * test using it holds entries longer than 8 s, so that an owner that did
 * not refresh them loses them. */
#define STALL_CLAIM_IDLE_MS 8000
#define STALL_CLAIM_IDLE "8000"

/* lease.ttl_ms of the same tests. A renewal is sent a third of it after
 * the last one, and past 9/10 of it from the last one's send the consumer
 * settles nothing (pull mode: EMQ_ELOST) until a renewal gets through: a
 * stall past 0.57 of it does that, 5.7 s at 10 s (a server stalled that
 * long also costs the connection's reconnect). A lease never renewed
 * ends at 9 s. */
#define STALL_LEASE_TTL "10000"

/* XAUTOCLAIM every 100 ms, as a peer's claim beat would, of whatever has
 * been idle PEER_CLAIM_IDLE_MS (or the idle of claimer_start_idle) in
 * group g of emq:{jobs}, for consumer "thief". */
typedef struct claimer {
    const emq_srv *s;
    pthread_t thread;
    char idle[24]; /* XAUTOCLAIM's min-idle-time */
    atomic_int quit, beats, claimed;
} claimer;

static inline void *claimer_main(void *arg) {
    claimer *k = arg;
    emq_conn_t *adm = admin_connect(k->s);
    while (!atomic_load(&k->quit)) {
        emq_reply *r = CMD(adm, "XAUTOCLAIM", "emq:{jobs}", "g", "thief",
                           k->idle, "0-0", "COUNT", "1000", "JUSTID");
        if (emq_reply_kind(r) == EMQ_REPLY_ARRAY && emq_reply_len(r) >= 2)
            atomic_fetch_add(&k->claimed,
                             (int)emq_reply_len(emq_reply_at(r, 1)));
        emq_reply_free(r);
        atomic_fetch_add(&k->beats, 1);
        usleep(100000);
    }
    emq_conn_destroy(adm);
    return NULL;
}

/* Starts a claimer of what has been idle idle_ms. */
static inline void claimer_start_idle(claimer *k, const emq_srv *s,
                                      int idle_ms) {
    memset(k, 0, sizeof *k);
    k->s = s;
    snprintf(k->idle, sizeof k->idle, "%d", idle_ms);
    ASSERT(pthread_create(&k->thread, NULL, claimer_main, k) == 0);
}

static inline void claimer_start(claimer *k, const emq_srv *s) {
    claimer_start_idle(k, s, PEER_CLAIM_IDLE_MS);
}

static inline void claimer_stop(claimer *k) {
    atomic_store(&k->quit, 1);
    pthread_join(k->thread, NULL);
}

#endif /* EMQ_TEST_POLL_HELPERS_H */
