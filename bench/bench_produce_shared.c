/* SPDX-License-Identifier: BSD-3-Clause */
/* bench_produce_shared.c: the producer as a request path uses it (issue
 * 14), side by side with hiredis in one run.
 *
 * Starts a private redis-server (bench_common.h: unix socket, no
 * persistence; stopped by pid at exit). Two parts:
 *
 * 1. Shared: T threads (8, then 32) each make CALLS synchronous calls of
 *    one 100-byte entry, timing every call (monotonic clock, ns):
 *      echomq   all T threads share ONE emq_producer_t (emq_produce);
 *      hiredis  one redisContext per thread, redisCommandArgv XADD.
 *    Reported: entries/s over the whole run, and p50 / p99 / p99.9 of the
 *    per-call latency over every call of every thread.
 * 2. Async vs batch: N entries (default 1,000,000) of 100 bytes,
 *      batch  one emq_produce_batch call (windows of producer.window 256);
 *      async  N emq_produce_async calls then emq_producer_flush (callbacks
 *             on the producer's thread count the outcomes).
 *    Reported: entries/s, and async / batch.
 *
 * Each part alternates the clients' order per round and keeps the best
 * round of each (the machines are noisy); the stream is deleted between
 * runs.
 *
 * Usage: bench_produce_shared [calls-per-thread] [entries] [rounds]
 *        (defaults 5000, 1000000, 3)
 */
#include "echomq.h"

#include "bench_common.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#define STREAM "emq:{bench}"
#define PAYLOAD_LEN 100

static char payload[PAYLOAD_LEN];
static char url[200];
static int calls_per_thread = 5000;

static int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static emq_producer_t *new_producer(void) {
    emq_conf_t *conf = emq_conf_new();
    emq_error err;
    emq_producer_t *p = NULL;
    if (conf == NULL || emq_conf_set(conf, "url", url, &err) != EMQ_OK ||
        emq_conf_set(conf, "queue", "bench", &err) != EMQ_OK ||
        emq_conf_set(conf, "producer.connect", "eager", &err) != EMQ_OK ||
        emq_producer_new(conf, &p, &err) != EMQ_OK)
        die("echomq", err.message);
    emq_conf_destroy(conf);
    return p;
}

static void delete_stream(void) {
    redisContext *c = connect_server();
    redisReply *r = redisCommand(c, "DEL %s", STREAM);
    if (r == NULL)
        die("DEL", c->errstr);
    freeReplyObject(r);
    redisFree(c);
}

/* ---- part 1: T threads --------------------------------------------------- */

typedef struct worker {
    emq_producer_t *p; /* echomq: shared */
    int hiredis;
    int64_t *lat; /* calls_per_thread samples, ns */
    pthread_barrier_t *go;
} worker;

static void *worker_main(void *arg) {
    worker *w = arg;
    redisContext *c = w->hiredis ? connect_server() : NULL;
    static const char *argv[] = {"XADD", STREAM, "*", "data", payload};
    static const size_t lens[] = {4, sizeof STREAM - 1, 1, 4, PAYLOAD_LEN};
    emq_field f = {"data", 4, payload, PAYLOAD_LEN};
    pthread_barrier_wait(w->go);
    for (int i = 0; i < calls_per_thread; i++) {
        int64_t t0 = now_ns();
        if (c) {
            redisReply *r = redisCommandArgv(c, 5, argv, lens);
            if (r == NULL || r->type != REDIS_REPLY_STRING)
                die("hiredis", c->errstr);
            freeReplyObject(r);
        } else {
            emq_id id;
            emq_error err;
            if (emq_produce(w->p, &f, 1, &id, &err) != EMQ_OK)
                die("emq_produce", err.message);
        }
        w->lat[i] = now_ns() - t0;
    }
    if (c)
        redisFree(c);
    return NULL;
}

static int cmp_i64(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

typedef struct shared_result {
    double rate;
    double p50_us, p99_us, p999_us;
} shared_result;

static shared_result run_shared(int threads, int hiredis) {
    pthread_t th[64];
    worker w[64];
    pthread_barrier_t go;
    pthread_barrier_init(&go, NULL, (unsigned)threads + 1);
    size_t total = (size_t)threads * (size_t)calls_per_thread;
    int64_t *lat = malloc(total * sizeof *lat);
    if (lat == NULL)
        die("malloc", "out of memory");
    emq_producer_t *p = hiredis ? NULL : new_producer();
    for (int t = 0; t < threads; t++) {
        w[t] = (worker){p, hiredis, lat + (size_t)t * calls_per_thread, &go};
        pthread_create(&th[t], NULL, worker_main, &w[t]);
    }
    pthread_barrier_wait(&go);
    double t0 = now_s();
    for (int t = 0; t < threads; t++)
        pthread_join(th[t], NULL);
    double secs = now_s() - t0;
    emq_producer_destroy(p);
    pthread_barrier_destroy(&go);
    qsort(lat, total, sizeof *lat, cmp_i64);
    shared_result r = {
        .rate = (double)total / secs,
        .p50_us = (double)lat[total / 2] / 1000.0,
        .p99_us = (double)lat[total * 99 / 100] / 1000.0,
        .p999_us = (double)lat[total * 999 / 1000] / 1000.0,
    };
    free(lat);
    delete_stream();
    return r;
}

/* The better of two rounds: higher rate, lower latencies, each alone. */
static void keep_best(shared_result *best, const shared_result *r, int first) {
    if (first) {
        *best = *r;
        return;
    }
    if (r->rate > best->rate)
        best->rate = r->rate;
    if (r->p50_us < best->p50_us)
        best->p50_us = r->p50_us;
    if (r->p99_us < best->p99_us)
        best->p99_us = r->p99_us;
    if (r->p999_us < best->p999_us)
        best->p999_us = r->p999_us;
}

/* ---- part 2: async vs batch ---------------------------------------------- */

static atomic_long delivered_ok, delivered_bad;

static void on_delivery(void *opaque, const emq_delivery *d) {
    (void)opaque;
    if (d->status == EMQ_OK)
        atomic_fetch_add(&delivered_ok, 1);
    else
        atomic_fetch_add(&delivered_bad, 1);
}

static double run_async(int n) {
    emq_producer_t *p = new_producer();
    emq_field f = {"data", 4, payload, PAYLOAD_LEN};
    atomic_store(&delivered_ok, 0);
    atomic_store(&delivered_bad, 0);
    emq_error err;
    double t0 = now_s();
    for (int i = 0; i < n; i++) {
        emq_status st;
        while ((st = emq_produce_async(p, &f, 1, on_delivery, NULL, &err)) ==
               EMQ_ELIMIT)
            usleep(100);
        if (st != EMQ_OK)
            die("emq_produce_async", err.message);
    }
    if (emq_producer_flush(p, -1, &err) != EMQ_OK)
        die("emq_producer_flush", err.message);
    double secs = now_s() - t0;
    if (atomic_load(&delivered_ok) != n)
        die("async", "not every entry was confirmed");
    emq_producer_destroy(p);
    delete_stream();
    return (double)n / secs;
}

static double run_batch(const emq_message *msgs, int n, emq_id *ids) {
    emq_producer_t *p = new_producer();
    emq_error err;
    size_t written = 0;
    double t0 = now_s();
    if (emq_produce_batch(p, msgs, (size_t)n, ids, &written, &err) != EMQ_OK)
        die("emq_produce_batch", err.message);
    double secs = now_s() - t0;
    if (written != (size_t)n)
        die("batch", "not every entry was confirmed");
    emq_producer_destroy(p);
    delete_stream();
    return (double)n / secs;
}

int main(int argc, char **argv) {
    bench_name = "bench_produce_shared";
    if (argc > 1)
        calls_per_thread = atoi(argv[1]);
    int n = argc > 2 ? atoi(argv[2]) : 1000000;
    int rounds = argc > 3 ? atoi(argv[3]) : 3;
    if (calls_per_thread < 100 || n < 1000 || rounds < 1) {
        fprintf(stderr, "usage: bench_produce_shared [calls-per-thread >= "
                        "100] [entries >= 1000] [rounds >= 1]\n");
        return 2;
    }
    memset(payload, 'x', sizeof payload);
    start_server(0);
    snprintf(url, sizeof url, "unix://%s", sock_path);

    printf("part 1: T threads x %d synchronous calls of one 100-byte entry\n",
           calls_per_thread);
    printf("%-8s %-22s %12s %10s %10s %10s\n", "threads", "client", "entries/s",
           "p50 us", "p99 us", "p99.9 us");
    static const int threads[] = {8, 32};
    for (size_t k = 0; k < 2; k++) {
        shared_result best[2];
        for (int r = 0; r < rounds; r++)
            for (int j = 0; j < 2; j++) {
                int hiredis = (j + r) % 2;
                shared_result got = run_shared(threads[k], hiredis);
                keep_best(&best[hiredis], &got, r == 0);
            }
        const char *label[2] = {"echomq one shared", "hiredis one per thread"};
        for (int h = 0; h < 2; h++)
            printf("%-8d %-22s %12.0f %10.1f %10.1f %10.1f\n", threads[k],
                   label[h], best[h].rate, best[h].p50_us, best[h].p99_us,
                   best[h].p999_us);
        printf("%-8d %-22s %12.2f %10.2f %10.2f %10.2f\n", threads[k],
               "echomq / hiredis", best[0].rate / best[1].rate,
               best[0].p50_us / best[1].p50_us, best[0].p99_us / best[1].p99_us,
               best[0].p999_us / best[1].p999_us);
    }

    printf("\npart 2: %d entries of 100 bytes\n", n);
    emq_field f = {"data", 4, payload, PAYLOAD_LEN};
    emq_message *msgs = malloc((size_t)n * sizeof *msgs);
    emq_id *ids = malloc((size_t)n * sizeof *ids);
    if (msgs == NULL || ids == NULL)
        die("malloc", "out of memory");
    for (int i = 0; i < n; i++)
        msgs[i] = (emq_message){&f, 1, NULL};
    double best_async = 0, best_batch = 0;
    for (int r = 0; r < rounds; r++) {
        for (int j = 0; j < 2; j++) {
            if ((j + r) % 2) {
                double a = run_async(n);
                best_async = a > best_async ? a : best_async;
            } else {
                double b = run_batch(msgs, n, ids);
                best_batch = b > best_batch ? b : best_batch;
            }
        }
    }
    printf("%-22s %12.0f entries/s\n", "batch (one call)", best_batch);
    printf("%-22s %12.0f entries/s\n", "async + flush", best_async);
    printf("%-22s %12.2f\n", "async / batch", best_async / best_batch);
    free(msgs);
    free(ids);
    stop_server();
    return 0;
}
