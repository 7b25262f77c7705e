/* SPDX-License-Identifier: BSD-3-Clause */
/* test_producer_shared.c: the producer as a request path uses it, against
 * real redis-servers: one handle shared by 32 threads (nothing lost, every
 * ID returned, entries of threads calling together share round trips);
 * every call bounded by producer.timeout_ms with the server down or
 * stalled (SIGSTOP), and failing at once while the producer knows it is
 * disconnected; lazy and eager connects; the asynchronous queue's bound;
 * delivery callbacks exactly once per entry, also across a server restart
 * (outcomes unknown reported as such), on the producer's thread or from
 * emq_producer_poll; flush; and durable produce with a real replica
 * (WAIT), an unreachable replica (EMQ_ENOTDURABLE with the ID) and a
 * failover that keeps every confirmed entry.
 */
#include "integ/ownership_helpers.h"

#include <pthread.h>
#include <signal.h>

#define SQ "emq:{shared}"

static emq_conf_t *shared_conf(const char *url, const char *timeout_ms) {
    emq_conf_t *conf = conf_for(url);
    conf_set(conf, "queue", "shared");
    conf_set(conf, "producer.timeout_ms", timeout_ms);
    conf_set(conf, P_RECONNECT_BASE, "20");
    conf_set(conf, P_RECONNECT_MAX, "200");
    return conf;
}

static emq_producer_t *producer_of(emq_conf_t *conf) {
    emq_producer_t *p;
    emq_error err;
    ASSERT_OK(emq_producer_new(conf, &p, &err), &err);
    return p;
}

static long long xlen(const emq_srv *s, const char *key) {
    char out[64];
    emq_srv_cmd(s, out, sizeof out, "XLEN", key, NULL);
    return strtoll(out, NULL, 10);
}

/* ---- 32 threads, one handle -------------------------------------------- */

enum { THREADS = 32, PER_THREAD = 300 };

typedef struct shared_run {
    emq_producer_t *p;
    int index;
    emq_id ids[PER_THREAD];
    int failures;
    char last_error[300];
} shared_run;

static void *shared_thread(void *arg) {
    shared_run *r = arg;
    for (int i = 0; i < PER_THREAD; i++) {
        char v[32];
        int len = snprintf(v, sizeof v, "t%d-%d", r->index, i);
        emq_field f = {"v", 1, v, (size_t)len};
        emq_error err;
        if (emq_produce(r->p, &f, 1, &r->ids[i], &err) != EMQ_OK) {
            r->failures++;
            snprintf(r->last_error, sizeof r->last_error, "%s", err.message);
        }
    }
    return NULL;
}

static int cmp_ids(const void *a, const void *b) {
    return strcmp(((const emq_id *)a)->str, ((const emq_id *)b)->str);
}

TEST_TIMEOUT(producer_shared_by_32_threads_loses_nothing, 60) {
    emq_srv *s = emq_srv_start(NULL);
    emq_conf_t *conf = shared_conf(emq_srv_url(s), "10000");
    emq_producer_t *p = producer_of(conf);
    static shared_run runs[THREADS];
    pthread_t th[THREADS];
    for (int t = 0; t < THREADS; t++) {
        runs[t] = (shared_run){.p = p, .index = t};
        ASSERT(pthread_create(&th[t], NULL, shared_thread, &runs[t]) == 0);
    }
    for (int t = 0; t < THREADS; t++)
        pthread_join(th[t], NULL);
    static emq_id all[THREADS * PER_THREAD];
    size_t n = 0;
    for (int t = 0; t < THREADS; t++) {
        if (runs[t].failures)
            FAIL("thread %d: %d calls failed: %s", t, runs[t].failures,
                 runs[t].last_error);
        for (int i = 0; i < PER_THREAD; i++) {
            if (runs[t].ids[i].str[0] == '\0')
                FAIL("thread %d entry %d got no ID", t, i);
            all[n++] = runs[t].ids[i];
        }
    }
    qsort(all, n, sizeof all[0], cmp_ids);
    for (size_t i = 1; i < n; i++)
        if (strcmp(all[i - 1].str, all[i].str) == 0)
            FAIL("ID %s was returned twice", all[i].str);
    ASSERT_EQ_INT(xlen(s, SQ), THREADS * PER_THREAD);
    /* Each thread's entries are in the stream under the IDs it got, in
     * its order (one thread's calls follow one another). */
    for (int t = 0; t < THREADS; t += 7) {
        char out[256];
        const shared_run *r = &runs[t];
        emq_srv_cmd(s, out, sizeof out, "XRANGE", SQ, r->ids[17].str,
                    r->ids[17].str, NULL);
        char want[32];
        snprintf(want, sizeof want, "t%d-17", t);
        ASSERT_CONTAINS(out, want);
        for (int i = 1; i < PER_THREAD; i++) {
            emq_id a = r->ids[i - 1], b = r->ids[i];
            if (cmp_ids(&a, &b) >= 0 && strlen(a.str) == strlen(b.str))
                FAIL("thread %d: entry %d's ID %s is not after %s", t, i, b.str,
                     a.str);
        }
    }
    /* Calls shared round trips: fewer XADD batches than entries is not
     * visible from here, but one connection is. */
    char out[4096];
    emq_srv_cmd(s, out, sizeof out, "CLIENT", "LIST", NULL);
    int conns = 0;
    for (const char *at = out; (at = strstr(at, "cmd=")) != NULL; at++)
        conns++;
    ASSERT(conns <= 2); /* the producer's one, and the admin's own */
    emq_producer_destroy(p);
    emq_conf_destroy(conf);
    emq_srv_stop(s);
}

/* ---- time bounds and fail-fast ----------------------------------------- */

TEST_TIMEOUT(producer_server_down_lazy_new_then_every_call_fails_fast, 30) {
    char url[64];
    snprintf(url, sizeof url, "redis://127.0.0.1:%d", emq_free_port());
    emq_conf_t *conf = shared_conf(url, "800");
    /* eager: emq_producer_new says so. */
    conf_set(conf, "producer.connect", "eager");
    emq_producer_t *p = NULL;
    emq_error err;
    ASSERT_STATUS(emq_producer_new(conf, &p, &err), EMQ_EIO, &err);
    ASSERT(p == NULL);
    ASSERT_CONTAINS(err.message, "127.0.0.1");
    /* lazy (the default): not an error until a call needs the server. */
    conf_set(conf, "producer.connect", "lazy");
    p = producer_of(conf);
    emq_field f = {"v", 1, "x", 1};
    int64_t worst = 0;
    for (int i = 0; i < 50; i++) {
        emq_id id;
        int64_t t0 = now_ms();
        emq_status st = emq_produce(p, &f, 1, &id, &err);
        int64_t took = now_ms() - t0;
        if (took > worst)
            worst = took;
        if (st == EMQ_OK)
            FAIL("call %d succeeded with no server", i);
        ASSERT(err.retriable);
        ASSERT_EQ_STR(id.str, "");
        if (i == 49)
            ASSERT_CONTAINS(err.message, "not connected");
    }
    printf("    50 calls with the server down: the slowest took %lld ms "
           "(producer.timeout_ms 800)\n",
           (long long)worst);
    ASSERT(worst <= 800 + emq_test_ms(1000)); /* room for a loaded CI */
    emq_producer_destroy(p);
    emq_conf_destroy(conf);
}

TEST_TIMEOUT(producer_restart_calls_bounded_then_recovers, 40) {
    emq_srv *s = emq_srv_start(NULL);
    emq_conf_t *conf = shared_conf(emq_srv_url(s), "600");
    emq_producer_t *p = producer_of(conf);
    emq_field f = {"v", 1, "x", 1};
    emq_id id;
    emq_error err;
    /* Connected first: under valgrind on a loaded machine the first
     * connect alone may take longer than producer.timeout_ms. */
    int64_t up = now_ms() + emq_test_ms(20000);
    emq_status first;
    while ((first = emq_produce(p, &f, 1, &id, &err)) != EMQ_OK &&
           now_ms() < up)
        usleep(10000);
    ASSERT_OK(first, &err);
    emq_srv_kill9(s);
    int64_t worst = 0;
    int failed = 0;
    for (int i = 0; i < 30; i++) {
        int64_t t0 = now_ms();
        if (emq_produce(p, &f, 1, &id, &err) != EMQ_OK)
            failed++;
        int64_t took = now_ms() - t0;
        worst = took > worst ? took : worst;
    }
    ASSERT_EQ_INT(failed, 30);
    emq_srv_restart(s);
    /* Back within the reconnect backoff (max 200 ms), not a connect per
     * call. */
    int64_t t0 = now_ms();
    int64_t end = t0 + emq_test_ms(5000), first_ok = -1;
    while (now_ms() < end) {
        int64_t c0 = now_ms();
        emq_status st = emq_produce(p, &f, 1, &id, &err);
        int64_t took = now_ms() - c0;
        worst = took > worst ? took : worst;
        if (st == EMQ_OK) {
            first_ok = now_ms() - t0;
            break;
        }
        usleep(5000);
    }
    printf("    server down: 30 calls failed, slowest %lld ms; first success "
           "%lld ms after the restart\n",
           (long long)worst, (long long)first_ok);
    ASSERT(first_ok >= 0);
    ASSERT(worst <= 600 + emq_test_ms(1000));
    emq_producer_destroy(p);
    emq_conf_destroy(conf);
    emq_srv_stop(s);
}

/* producer.timeout_ms 3000 against command_timeout_ms 60000, the wait of
 * a call it would not bound. Connected before the first call (eager,
 * bounded by connect_timeout_ms), so that its 3 s hold one XADD: with
 * 500 ms and a lazy connect a loaded machine failed it "still
 * connecting". The stalled calls may end 5 s (scaled) past the timeout:
 * a loaded machine holds a thread for seconds now and then. */
TEST_TIMEOUT(producer_stalled_server_call_bounded_by_timeout, 30) {
    emq_srv *s = emq_srv_start(NULL);
    emq_conf_t *conf = shared_conf(emq_srv_url(s), "3000");
    conf_set(conf, "producer.connect", "eager");
    conf_set(conf, P_COMMAND_TIMEOUT, "60000");
    emq_producer_t *p = producer_of(conf);
    emq_field f = {"v", 1, "x", 1};
    emq_id id;
    emq_error err;
    ASSERT_OK(emq_produce(p, &f, 1, &id, &err), &err);
    ASSERT(kill(emq_srv_pid(s), SIGSTOP) == 0);
    int64_t t0 = now_ms();
    emq_status st = emq_produce(p, &f, 1, &id, &err);
    int64_t took = now_ms() - t0;
    /* A batch waits for nothing either. */
    emq_message m[3] = {{&f, 1, NULL}, {&f, 1, NULL}, {&f, 1, NULL}};
    emq_id ids[3];
    size_t written = 9;
    int64_t t1 = now_ms();
    emq_status bst = emq_produce_batch(p, m, 3, ids, &written, &err);
    int64_t btook = now_ms() - t1;
    ASSERT(kill(emq_srv_pid(s), SIGCONT) == 0);
    printf("    stalled server: single call %lld ms (%s), batch %lld ms (%s)\n",
           (long long)took, emq_status_name(st), (long long)btook,
           emq_status_name(bst));
    ASSERT(st != EMQ_OK && bst != EMQ_OK);
    ASSERT_EQ_SIZE(written, 0);
    ASSERT(took <= 3000 + emq_test_ms(5000) &&
           btook <= 3000 + emq_test_ms(5000));
    /* It recovers once the server runs again. */
    int64_t end = now_ms() + emq_test_ms(5000);
    while (emq_produce(p, &f, 1, &id, &err) != EMQ_OK && now_ms() < end)
        usleep(10000);
    ASSERT_OK(emq_produce(p, &f, 1, &id, &err), &err);
    emq_producer_destroy(p);
    emq_conf_destroy(conf);
    emq_srv_stop(s);
}

/* ---- asynchronous ------------------------------------------------------- */

#define MAX_ASYNC 4000

typedef struct reports {
    pthread_mutex_t mu;
    int calls[MAX_ASYNC]; /* callbacks per entry */
    emq_status status[MAX_ASYNC];
    int unknown[MAX_ASYNC];
    emq_id ids[MAX_ASYNC];
    unsigned attempts[MAX_ASYNC];
    pthread_t thread[MAX_ASYNC];
    atomic_int total;
} reports;

typedef struct tag {
    reports *r;
    int index;
} tag;

static void on_delivery(void *opaque, const emq_delivery *d) {
    tag *t = opaque;
    reports *r = t->r;
    pthread_mutex_lock(&r->mu);
    r->calls[t->index]++;
    r->status[t->index] = d->status;
    r->unknown[t->index] = d->outcome_unknown;
    r->attempts[t->index] = d->attempts;
    snprintf(r->ids[t->index].str, sizeof r->ids[t->index].str, "%s", d->id);
    r->thread[t->index] = pthread_self();
    if (d->status != EMQ_OK && d->error == NULL)
        FAIL("a failed delivery without an error");
    pthread_mutex_unlock(&r->mu);
    atomic_fetch_add(&r->total, 1);
}

static void reports_init(reports *r, tag *tags, int n) {
    memset(r, 0, sizeof *r);
    pthread_mutex_init(&r->mu, NULL);
    for (int i = 0; i < n; i++)
        tags[i] = (tag){r, i};
}

static emq_status async_one(emq_producer_t *p, tag *t, emq_error *err) {
    char v[24];
    int len = snprintf(v, sizeof v, "a%d", t->index);
    emq_field f = {"v", 1, v, (size_t)len};
    return emq_produce_async(p, &f, 1, on_delivery, t, err);
}

TEST_TIMEOUT(producer_async_every_entry_called_back_once_with_its_id, 40) {
    emq_srv *s = emq_srv_start(NULL);
    emq_conf_t *conf = shared_conf(emq_srv_url(s), "10000");
    emq_producer_t *p = producer_of(conf);
    static reports r;
    static tag tags[MAX_ASYNC];
    reports_init(&r, tags, MAX_ASYNC);
    emq_error err;
    for (int i = 0; i < MAX_ASYNC; i++)
        ASSERT_OK(async_one(p, &tags[i], &err), &err);
    ASSERT_OK(emq_producer_flush(p, 10000, &err), &err);
    ASSERT_EQ_SIZE(emq_producer_outstanding(p), 0);
    ASSERT_EQ_INT(atomic_load(&r.total), MAX_ASYNC);
    pthread_t me = pthread_self();
    for (int i = 0; i < MAX_ASYNC; i++) {
        ASSERT_EQ_INT(r.calls[i], 1);
        ASSERT_EQ_INT(r.status[i], EMQ_OK);
        ASSERT(r.ids[i].str[0] != '\0');
        ASSERT(!pthread_equal(r.thread[i], me)); /* the producer's thread */
    }
    /* In call order in the stream: IDs increase with the index. */
    for (int i = 1; i < MAX_ASYNC; i++)
        if (strlen(r.ids[i].str) == strlen(r.ids[i - 1].str) &&
            strcmp(r.ids[i].str, r.ids[i - 1].str) <= 0)
            FAIL("entry %d's ID %s not after %s", i, r.ids[i].str,
                 r.ids[i - 1].str);
    ASSERT_EQ_INT(xlen(s, SQ), MAX_ASYNC);
    char out[256];
    emq_srv_cmd(s, out, sizeof out, "XRANGE", SQ, r.ids[1234].str,
                r.ids[1234].str, NULL);
    ASSERT_CONTAINS(out, "a1234");
    emq_producer_destroy(p);
    emq_conf_destroy(conf);
    emq_srv_stop(s);
}

TEST_TIMEOUT(producer_async_queue_bound_holds_and_poll_mode_calls_back_here,
             40) {
    emq_srv *s = emq_srv_start(NULL);
    emq_conf_t *conf = shared_conf(emq_srv_url(s), "10000");
    conf_set(conf, "producer.queue.max_messages", "100");
    conf_set(conf, "producer.delivery", "poll");
    emq_producer_t *p = producer_of(conf);
    static reports r;
    static tag tags[200];
    reports_init(&r, tags, 200);
    emq_error err;
    /* The server stalled: nothing completes, so the bound must refuse. */
    emq_field f = {"v", 1, "x", 1};
    emq_id id;
    ASSERT_OK(emq_produce(p, &f, 1, &id, &err), &err); /* connected */
    ASSERT(kill(emq_srv_pid(s), SIGSTOP) == 0);
    for (int i = 0; i < 100; i++)
        ASSERT_OK(async_one(p, &tags[i], &err), &err);
    ASSERT_STATUS(async_one(p, &tags[100], &err), EMQ_ELIMIT, &err);
    ASSERT_CONTAINS(err.message, "producer.queue.max_messages");
    ASSERT_EQ_SIZE(emq_producer_outstanding(p), 100);
    ASSERT(kill(emq_srv_pid(s), SIGCONT) == 0);
    /* Poll mode: nothing is called back until this thread polls. */
    int64_t end = now_ms() + 3000;
    while (emq_producer_outstanding(p) > 0 && now_ms() < end) {
        ASSERT_EQ_INT(atomic_load(&r.total), 0);
        usleep(20000);
        if (now_ms() > end - 2500)
            break;
    }
    size_t ran = 0;
    end = now_ms() + emq_test_ms(10000);
    while (ran < 100 && now_ms() < end)
        ran += emq_producer_poll(p, 100);
    ASSERT_EQ_SIZE(ran, 100);
    pthread_t me = pthread_self();
    for (int i = 0; i < 100; i++) {
        ASSERT_EQ_INT(r.calls[i], 1);
        ASSERT_EQ_INT(r.status[i], EMQ_OK);
        ASSERT(pthread_equal(r.thread[i], me));
    }
    ASSERT_EQ_INT(r.calls[100], 0); /* refused: never called back */
    ASSERT_OK(async_one(p, &tags[100], &err), &err); /* room again */
    ASSERT_OK(emq_producer_flush(p, 5000, &err), &err);
    ASSERT_EQ_INT(r.calls[100], 1);
    ASSERT_EQ_INT(xlen(s, SQ), 102);
    emq_producer_destroy(p);
    emq_conf_destroy(conf);
    emq_srv_stop(s);
}

/* 3000 async entries while the server is killed and restarted from its
 * AOF: every entry is called back exactly once; an entry reported added
 * is in the stream; one reported not sent is not; the others are
 * reported as unknown. */
TEST_TIMEOUT(producer_async_across_a_restart_once_each_unknown_said, 60) {
    emq_srv_opts o = {.appendonly = 1};
    emq_srv *s = emq_srv_start(&o);
    emq_conf_t *conf = shared_conf(emq_srv_url(s), "8000");
    emq_producer_t *p = producer_of(conf);
    static reports r;
    static tag tags[MAX_ASYNC];
    reports_init(&r, tags, 3000);
    emq_error err;
    for (int i = 0; i < 3000; i++) {
        if (i == 1000)
            emq_srv_kill9(s);
        if (i == 2000)
            emq_srv_restart(s);
        emq_status st = async_one(p, &tags[i], &err);
        if (st != EMQ_OK)
            FAIL("entry %d not queued: %s", i, err.message);
        if (i % 100 == 0)
            usleep(5000);
    }
    ASSERT_OK(emq_producer_flush(p, 20000, &err), &err);
    ASSERT_EQ_INT(atomic_load(&r.total), 3000);
    int ok = 0, unknown = 0, not_sent = 0;
    static char out[1 << 20];
    emq_srv_cmd(s, out, sizeof out, "XRANGE", SQ, "-", "+", NULL);
    for (int i = 0; i < 3000; i++) {
        ASSERT_EQ_INT(r.calls[i], 1);
        char line[32];
        snprintf(line, sizeof line, "\na%d\n", i);
        if (r.status[i] == EMQ_OK) {
            ok++;
            if (!strstr(out, r.ids[i].str))
                FAIL("entry %d reported added as %s is not in the stream", i,
                     r.ids[i].str);
        } else if (r.unknown[i]) {
            unknown++;
        } else {
            not_sent++;
        }
    }
    printf("    3000 entries across a restart: %d added, %d unknown, %d "
           "not sent; stream holds %lld\n",
           ok, unknown, not_sent, xlen(s, SQ));
    ASSERT(ok >= 2000); /* before the kill and after the restart */
    ASSERT(xlen(s, SQ) >= ok);
    ASSERT(xlen(s, SQ) <= ok + unknown);
    emq_producer_destroy(p);
    emq_conf_destroy(conf);
    emq_srv_stop(s);
}

/* ---- durable ------------------------------------------------------------ */

/* Confirmed with wait_replicas 1 survives the master's death and the
 * replica's promotion; while the replica is cut off, entries are added
 * but reported EMQ_ENOTDURABLE (with their IDs), and those are the ones the
 * failover loses. The cut: the replica stops following (REPLICAOF NO
 * ONE), as a partition would leave it; a SIGSTOPped replica would still
 * find the writes in its socket buffer when resumed. */
TEST_TIMEOUT(producer_wait_replicas_confirmed_entries_survive_failover, 60) {
    emq_srv *m = emq_srv_start(NULL);
    emq_srv *rep = emq_srv_start(NULL);
    char out[256];
    emq_srv_cmd(m, out, sizeof out, "CONFIG", "SET", "repl-diskless-sync-delay",
                "0", NULL);
    replica_follow(rep, m);
    emq_conf_t *conf = shared_conf(emq_srv_url(m), "8000");
    conf_set(conf, "producer.wait_replicas", "1");
    /* Generous while the replica follows (a loaded machine), short once it
     * is cut off (every WAIT then runs out). */
    conf_set_ms(conf, "producer.wait_timeout_ms", 10000);
    emq_producer_t *p = producer_of(conf);
    emq_error err;
    /* Confirmed: single calls and a batch. */
    emq_id confirmed[60];
    for (int i = 0; i < 50; i++) {
        char v[16];
        int len = snprintf(v, sizeof v, "c%d", i);
        emq_field f = {"v", 1, v, (size_t)len};
        ASSERT_OK(emq_produce(p, &f, 1, &confirmed[i], &err), &err);
    }
    emq_field bf = {"v", 1, "batch", 5};
    emq_message bm[10];
    for (int i = 0; i < 10; i++)
        bm[i] = (emq_message){&bf, 1, NULL};
    size_t written = 0;
    ASSERT_OK(emq_produce_batch(p, bm, 10, confirmed + 50, &written, &err),
              &err);
    ASSERT_EQ_SIZE(written, 10);
    /* The replica is cut off: added, not durable, IDs given. */
    replica_follow(rep, NULL);
    emq_producer_destroy(p);
    conf_set(conf, "producer.wait_timeout_ms", "200");
    p = producer_of(conf);
    emq_id lost[5];
    for (int i = 0; i < 5; i++) {
        emq_field f = {"v", 1, "unconfirmed", 11};
        ASSERT_STATUS(emq_produce(p, &f, 1, &lost[i], &err), EMQ_ENOTDURABLE,
                      &err);
        ASSERT(lost[i].str[0] != '\0');
        ASSERT_CONTAINS(err.message, "0 of 1 replicas after 200 ms");
    }
    ASSERT_STATUS(emq_produce_batch(p, bm, 3, NULL, &written, &err),
                  EMQ_ENOTDURABLE, &err);
    ASSERT_EQ_SIZE(written, 3);
    ASSERT_EQ_INT(xlen(m, SQ), 68);
    /* Failover: the master dies; the replica (already on its own) takes
     * over. */
    emq_srv_kill9(m);
    for (int i = 0; i < 60; i++) {
        emq_srv_cmd(rep, out, sizeof out, "XRANGE", SQ, confirmed[i].str,
                    confirmed[i].str, NULL);
        if (!strstr(out, confirmed[i].str))
            FAIL("confirmed entry %d (%s) lost in the failover", i,
                 confirmed[i].str);
    }
    long long kept = xlen(rep, SQ);
    printf("    after the failover: %lld of 68 entries kept (60 confirmed; "
           "8 reported not durable)\n",
           kept);
    ASSERT_EQ_INT(kept, 60);
    emq_producer_destroy(p);
    emq_conf_destroy(conf);
    emq_srv_stop(rep);
    emq_srv_stop(m);
}

/* WAITAOF where the server has it (an AOF master: confirmed), else a
 * clear refusal at connect. */
TEST_TIMEOUT(producer_wait_aof_confirms_or_is_refused_clearly, 30) {
    emq_srv_opts o = {.appendonly = 1};
    emq_srv *s = emq_srv_start(&o);
    emq_conf_t *conf = shared_conf(emq_srv_url(s), "5000");
    conf_set(conf, "producer.wait_aof", "1");
    conf_set(conf, "producer.connect", "eager");
    emq_producer_t *p = NULL;
    emq_error err;
    emq_status st = emq_producer_new(conf, &p, &err);
    if (!emq_srv_redis_at_least(s, 7, 2) && !emq_srv_is_valkey(s)) {
        ASSERT_STATUS(st, EMQ_EINVAL, &err);
        ASSERT_CONTAINS(err.message, "producer.wait_aof needs WAITAOF");
        printf("    refused: %s\n", err.message);
        /* Connecting on first use: every call fails with it, for good. */
        conf_set(conf, "producer.connect", "lazy");
        ASSERT_OK(emq_producer_new(conf, &p, &err), &err);
        emq_field f = {"v", 1, "x", 1};
        emq_id id;
        for (int i = 0; i < 2; i++) {
            ASSERT_STATUS(emq_produce(p, &f, 1, &id, &err), EMQ_EINVAL, &err);
            ASSERT_CONTAINS(err.message, "producer.wait_aof needs WAITAOF");
            ASSERT_EQ_INT(err.fatal, 1);
        }
        emq_producer_destroy(p);
    } else {
        ASSERT_OK(st, &err);
        emq_field f = {"v", 1, "x", 1};
        emq_id id;
        ASSERT_OK(emq_produce(p, &f, 1, &id, &err), &err);
        ASSERT(id.str[0] != '\0');
        emq_producer_destroy(p);
    }
    emq_conf_destroy(conf);
    emq_srv_stop(s);
}

/* ---- sync and async together -------------------------------------------- */

typedef struct mixed_run {
    emq_producer_t *p;
    reports *r;
    tag *tags; /* this thread's */
    int failures;
    char last_error[300];
} mixed_run;

static void *mixed_thread(void *arg) {
    mixed_run *m = arg;
    for (int i = 0; i < 200; i++) {
        emq_field f = {"v", 1, "sync", 4};
        emq_id id;
        emq_error err;
        if (emq_produce(m->p, &f, 1, &id, &err) != EMQ_OK) {
            m->failures++;
            snprintf(m->last_error, sizeof m->last_error, "%s", err.message);
        }
        if (async_one(m->p, &m->tags[i], &err) != EMQ_OK) {
            m->failures++;
            snprintf(m->last_error, sizeof m->last_error, "%s", err.message);
        }
    }
    return NULL;
}

/* 16 threads each alternating a synchronous call and an asynchronous one
 * (a request and its audit line): the two kinds share the queue and the
 * turn, neither starves the other (each call is sent and answered within
 * producer.timeout_ms: 2 s, scaled for memcheck, whose 16 threads share
 * one core, on a loaded machine that stalls a process for seconds), all
 * 6400 are added, every callback runs once. */
TEST_TIMEOUT(producer_sync_and_async_from_many_threads, 60) {
    emq_srv *s = emq_srv_start(NULL);
    char timeout[24];
    snprintf(timeout, sizeof timeout, "%d", emq_test_ms(2000));
    emq_conf_t *conf = shared_conf(emq_srv_url(s), timeout);
    emq_producer_t *p = producer_of(conf);
    static reports r;
    static tag tags[MAX_ASYNC];
    reports_init(&r, tags, 3200);
    static mixed_run runs[16];
    pthread_t th[16];
    for (int t = 0; t < 16; t++) {
        runs[t] = (mixed_run){.p = p, .r = &r, .tags = tags + t * 200};
        ASSERT(pthread_create(&th[t], NULL, mixed_thread, &runs[t]) == 0);
    }
    for (int t = 0; t < 16; t++)
        pthread_join(th[t], NULL);
    emq_error err;
    ASSERT_OK(emq_producer_flush(p, 10000, &err), &err);
    for (int t = 0; t < 16; t++)
        if (runs[t].failures)
            FAIL("thread %d: %d failures: %s", t, runs[t].failures,
                 runs[t].last_error);
    ASSERT_EQ_INT(atomic_load(&r.total), 3200);
    for (int i = 0; i < 3200; i++) {
        ASSERT_EQ_INT(r.calls[i], 1);
        ASSERT_EQ_INT(r.status[i], EMQ_OK);
    }
    ASSERT_EQ_INT(xlen(s, SQ), 6400);
    emq_producer_destroy(p);
    emq_conf_destroy(conf);
    emq_srv_stop(s);
}

/* 50 async entries sent to a stalled server (SIGSTOP: they sit unread in
 * its socket), which is then killed and restarted: their outcome is
 * unknown. With producer.retries 0 each is reported so (outcome_unknown,
 * attempts 1) and none is re-sent; with producer.retries 3 each is sent
 * again after the reconnect and reported added, attempts 2 saying it may
 * be a duplicate. */
static void unknown_outcomes(int retries) {
    emq_srv_opts o = {.appendonly = 1};
    emq_srv *s = emq_srv_start(&o);
    emq_conf_t *conf = shared_conf(emq_srv_url(s), "8000");
    char text[16];
    snprintf(text, sizeof text, "%d", retries);
    conf_set(conf, "producer.retries", text);
    emq_conf_set_log(conf, quiet_log, NULL);
    emq_producer_t *p = producer_of(conf);
    emq_field f = {"v", 1, "x", 1};
    emq_id id;
    emq_error err;
    ASSERT_OK(emq_produce(p, &f, 1, &id, &err), &err); /* connected */
    static reports r;
    static tag tags[50];
    reports_init(&r, tags, 50);
    ASSERT(kill(emq_srv_pid(s), SIGSTOP) == 0);
    for (int i = 0; i < 50; i++)
        ASSERT_OK(async_one(p, &tags[i], &err), &err);
    usleep(200 * 1000); /* sent, unanswered */
    emq_srv_kill9(s);   /* a stopped process dies to SIGKILL too */
    emq_srv_restart(s);
    ASSERT_OK(emq_producer_flush(p, 20000, &err), &err);
    ASSERT_EQ_INT(atomic_load(&r.total), 50);
    for (int i = 0; i < 50; i++)
        ASSERT_EQ_INT(r.calls[i], 1);
    /* The first round went out before the stop; entries queued behind it
     * (a slow build queues them one by one) may wait for the reconnect
     * and are then simply added. */
    int unknown = 0, resent = 0, ok = 0;
    for (int i = 0; i < 50; i++) {
        if (retries == 0 && r.status[i] != EMQ_OK) {
            ASSERT_EQ_INT(r.unknown[i], 1);
            ASSERT_EQ_INT(r.attempts[i], 1);
            unknown++;
        } else {
            ASSERT_EQ_INT(r.status[i], EMQ_OK);
            ASSERT_EQ_INT(r.unknown[i], 0);
            ASSERT(r.attempts[i] == 1 || (retries > 0 && r.attempts[i] == 2));
            resent += r.attempts[i] == 2;
            ok++;
        }
    }
    printf("    retries %d: %d unknown, %d sent again, %d added\n", retries,
           unknown, resent, ok);
    ASSERT(retries == 0 ? unknown > 0 : resent > 0);
    ASSERT_EQ_INT(xlen(s, SQ), 1 + ok); /* none added twice */
    emq_producer_destroy(p);
    emq_conf_destroy(conf);
    emq_srv_stop(s);
}

TEST_TIMEOUT(producer_async_unknown_outcome_reported_not_resent, 40) {
    unknown_outcomes(0);
}

TEST_TIMEOUT(producer_async_retries_resend_unknown_saying_so, 40) {
    unknown_outcomes(3);
}

/* A topic of 3 partitions: async entries (keyed and not) go to their
 * partitions, each called back once with its partition's stream; flush
 * and outstanding cover every partition; 8 threads share the topic's
 * synchronous calls too. */
typedef struct topic_report {
    pthread_mutex_t mu;
    int calls;
    int ok;
    int by_stream[3];
} topic_report;

static void on_topic_delivery(void *opaque, const emq_delivery *d) {
    topic_report *t = opaque;
    pthread_mutex_lock(&t->mu);
    t->calls++;
    t->ok += d->status == EMQ_OK;
    for (int i = 0; i < 3; i++) {
        char key[32];
        snprintf(key, sizeof key, "emq:{tp.%d}", i);
        if (strcmp(d->stream, key) == 0)
            t->by_stream[i]++;
    }
    pthread_mutex_unlock(&t->mu);
}

static void *topic_thread(void *arg) {
    emq_producer_t *p = arg;
    for (int i = 0; i < 100; i++) {
        emq_field f = {"v", 1, "s", 1};
        emq_id id;
        emq_error err;
        if (emq_produce(p, &f, 1, &id, &err) != EMQ_OK)
            FAIL("topic produce: %s", err.message);
    }
    return NULL;
}

TEST_TIMEOUT(producer_async_topic_partitions_each_called_back, 40) {
    emq_srv *s = emq_srv_start(NULL);
    emq_conf_t *conf = conf_for(emq_srv_url(s));
    conf_set(conf, "queue", "tp");
    conf_set(conf, "partitions", "3");
    emq_producer_t *p = producer_of(conf);
    static topic_report t;
    memset(&t, 0, sizeof t);
    pthread_mutex_init(&t.mu, NULL);
    emq_error err;
    for (int i = 0; i < 300; i++) {
        emq_field f = {"v", 1, "a", 1};
        char key[8];
        int len = snprintf(key, sizeof key, "k%d", i % 7);
        emq_status st =
            i % 2 ? emq_produce_async(p, &f, 1, on_topic_delivery, &t, &err)
                  : emq_produce_async_keyed(p, key, (size_t)len, &f, 1,
                                            on_topic_delivery, &t, &err);
        ASSERT_OK(st, &err);
    }
    pthread_t th[8];
    for (int i = 0; i < 8; i++)
        ASSERT(pthread_create(&th[i], NULL, topic_thread, p) == 0);
    for (int i = 0; i < 8; i++)
        pthread_join(th[i], NULL);
    ASSERT_OK(emq_producer_flush(p, 10000, &err), &err);
    ASSERT_EQ_SIZE(emq_producer_outstanding(p), 0);
    ASSERT_EQ_INT(t.calls, 300);
    ASSERT_EQ_INT(t.ok, 300);
    long long total = 0;
    for (int i = 0; i < 3; i++) {
        char key[32];
        snprintf(key, sizeof key, "emq:{tp.%d}", i);
        ASSERT(t.by_stream[i] > 0);
        total += xlen(s, key);
    }
    ASSERT_EQ_INT(total, 300 + 800);
    emq_producer_destroy(p);
    emq_conf_destroy(conf);
    emq_srv_stop(s);
}

/* Spins a script on the server until SCRIPT KILL (run on a thread: the
 * call returns when the script is killed). */
static void *spin_script(void *arg) {
    emq_srv *s = arg;
    char out[256];
    emq_srv_cmd(s, out, sizeof out, "EVAL", "while true do end", "0", NULL);
    return NULL;
}

/* A single entry waits out a busy server within producer.timeout_ms. */
typedef struct busy_call {
    emq_producer_t *p;
    emq_status st;
    emq_error err;
} busy_call;

static void *produce_once(void *arg) {
    busy_call *b = arg;
    emq_field f = {"v", 1, "s", 1};
    emq_id id;
    b->st = emq_produce(b->p, &f, 1, &id, &b->err);
    return NULL;
}

/* A server busy running a script answers -BUSY (as a restarted one
 * answers -LOADING while it reads its data) and runs nothing: entries
 * sent then are not added, wait a growing moment and go again, and are
 * added once each when the server is free, at attempt 1 (nothing was run
 * twice). A single call waits it out within producer.timeout_ms; one
 * whose bound passes first says the server did not run it, and why. */
TEST_TIMEOUT(producer_async_rides_out_a_busy_server, 40) {
    emq_srv *s = emq_srv_start(NULL);
    char out[256];
    if (emq_srv_cmd(s, out, sizeof out, "CONFIG", "SET", "busy-reply-threshold",
                    "50", NULL) == '-')
        emq_srv_cmd(s, out, sizeof out, "CONFIG", "SET", "lua-time-limit", "50",
                    NULL); /* 6.2's name */
    emq_conf_t *conf = shared_conf(emq_srv_url(s), "20000");
    emq_conf_t *short_conf = shared_conf(emq_srv_url(s), "300");
    emq_producer_t *p = producer_of(conf), *quick = producer_of(short_conf);
    emq_field f = {"v", 1, "x", 1};
    emq_id id;
    emq_error err;
    ASSERT_OK(emq_produce(p, &f, 1, &id, &err), &err); /* connected */
    ASSERT_OK(emq_produce(quick, &f, 1, &id, &err), &err);
    pthread_t spinner;
    ASSERT(pthread_create(&spinner, NULL, spin_script, s) == 0);
    WAIT_UNTIL(server_busy(s), 5000, "the script to pass the threshold (BUSY)");
    ASSERT_STATUS(emq_produce(quick, &f, 1, &id, &err), EMQ_ETIMEDOUT, &err);
    ASSERT_CONTAINS(err.message, "did not run it");
    ASSERT_CONTAINS(err.message, "BUSY");
    busy_call waiter = {.p = p};
    pthread_t caller;
    ASSERT(pthread_create(&caller, NULL, produce_once, &waiter) == 0);
    static reports r;
    static tag tags[40];
    reports_init(&r, tags, 40);
    for (int i = 0; i < 40; i++)
        ASSERT_OK(async_one(p, &tags[i], &err), &err);
    /* Sent, refused, held, sent again, ...: none may be given up. Nothing
     * positive marks a held round, so this one waits a scaled time. */
    usleep((useconds_t)emq_test_ms(400) * 1000);
    ASSERT_EQ_INT(atomic_load(&r.total), 0); /* none given up */
    emq_srv_cmd(s, out, sizeof out, "SCRIPT", "KILL", NULL);
    pthread_join(spinner, NULL);
    pthread_join(caller, NULL);
    ASSERT_OK(waiter.st, &waiter.err);
    ASSERT_OK(emq_producer_flush(p, 10000, &err), &err);
    ASSERT_EQ_INT(atomic_load(&r.total), 40);
    for (int i = 0; i < 40; i++) {
        ASSERT_EQ_INT(r.calls[i], 1);
        ASSERT_EQ_INT(r.status[i], EMQ_OK);
        ASSERT_EQ_INT(r.attempts[i], 1);
    }
    ASSERT_EQ_INT(xlen(s, SQ), 43);
    emq_producer_destroy(quick);
    emq_producer_destroy(p);
    emq_conf_destroy(short_conf);
    emq_conf_destroy(conf);
    emq_srv_stop(s);
}

static long long connections_received(const emq_srv *s) {
    char out[4096];
    emq_srv_cmd(s, out, sizeof out, "INFO", "stats", NULL);
    const char *at = strstr(out, "total_connections_received:");
    return at ? strtoll(at + strlen("total_connections_received:"), NULL, 10)
              : -1;
}

/* A demoted master (REPLICAOF: every write refused with READONLY, not
 * run) is left: a single call fails retriable and says why, asynchronous
 * entries are held and sent again on a new connection once a master
 * answers there, each added once at attempt 1. */
TEST_TIMEOUT(producer_readonly_reconnects_and_sends_again, 40) {
    emq_srv *s = emq_srv_start(NULL), *s2 = emq_srv_start(NULL);
    char out[256];
    emq_srv_cmd(s, out, sizeof out, "CONFIG", "SET", "repl-diskless-sync-delay",
                "0", NULL);
    emq_srv_cmd(s2, out, sizeof out, "CONFIG", "SET",
                "repl-diskless-sync-delay", "0", NULL);
    emq_conf_t *conf = shared_conf(emq_srv_url(s), "20000");
    emq_producer_t *p = producer_of(conf);
    emq_field f = {"v", 1, "x", 1};
    emq_id id;
    emq_error err;
    ASSERT_OK(emq_produce(p, &f, 1, &id, &err), &err);
    /* s2 copies s and becomes a master; s follows it: same data. */
    replica_follow(s2, s);
    replica_follow(s2, NULL);
    replica_follow(s, s2);
    long long before = connections_received(s);
    ASSERT_STATUS(emq_produce(p, &f, 1, &id, &err), EMQ_EIO, &err);
    ASSERT_EQ_INT(err.retriable, 1);
    ASSERT_EQ_INT(err.fatal, 0);
    ASSERT_CONTAINS(err.message, "READONLY");
    static reports r;
    static tag tags[20];
    reports_init(&r, tags, 20);
    for (int i = 0; i < 20; i++)
        ASSERT_OK(async_one(p, &tags[i], &err), &err);
    /* The producer reconnects (to the same address: still a replica). */
    WAIT_UNTIL(connections_received(s) > before, 10000,
               "the producer to connect again after READONLY");
    ASSERT_EQ_INT(atomic_load(&r.total), 0); /* held, none given up */
    replica_follow(s, NULL);
    ASSERT_OK(emq_producer_flush(p, 15000, &err), &err);
    ASSERT_EQ_INT(atomic_load(&r.total), 20);
    for (int i = 0; i < 20; i++) {
        ASSERT_EQ_INT(r.calls[i], 1);
        ASSERT_EQ_INT(r.status[i], EMQ_OK);
        ASSERT_EQ_INT(r.attempts[i], 1);
    }
    WAIT_UNTIL(emq_produce(p, &f, 1, &id, &err) == EMQ_OK, 10000,
               "a single call to go through on the master again");
    ASSERT_EQ_INT(xlen(s, SQ), 1 + 20 + 1);
    emq_producer_destroy(p);
    emq_conf_destroy(conf);
    emq_srv_stop(s2);
    emq_srv_stop(s);
}
