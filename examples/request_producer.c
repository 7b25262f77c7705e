/* SPDX-License-Identifier: BSD-3-Clause */
/* request_producer.c: a service's request path producing to a queue.
 *
 *   request_producer URL QUEUE COUNT
 *
 * Eight request threads share ONE producer (no lock of the caller's: the
 * producer is thread-safe and shares its connection's round trips). Each
 * request adds its entry synchronously, bounded by producer.timeout_ms, so
 * a server that is down or stalled costs a request at most 500 ms (and
 * nothing while the producer knows it is disconnected: the call fails at
 * once, retriable). Beside them, an audit line per request goes out
 * asynchronously: emq_produce_async returns at once and a delivery
 * callback, on the producer's thread, counts its outcome. Before exiting,
 * emq_producer_flush waits for every audit line.
 *
 * Prints "produced N requests and N audit lines" and exits 0 when every
 * entry was added; exits 1 naming the first failure otherwise.
 */
#include <echomq.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define THREADS 8

static emq_producer_t *producer;
static int per_thread;
static atomic_int requests_ok, audits_ok, failures;
static char first_failure[EMQ_ERROR_MESSAGE_MAX + 64];

static void fail(const char *what, const char *message) {
    if (atomic_fetch_add(&failures, 1) == 0)
        snprintf(first_failure, sizeof first_failure, "%s: %s", what, message);
}

/* Runs on the producer's thread, once per audit line. */
static void audited(void *opaque, const emq_delivery *d) {
    (void)opaque;
    if (d->status == EMQ_OK)
        atomic_fetch_add(&audits_ok, 1);
    else
        fail(d->outcome_unknown ? "audit (outcome unknown)" : "audit",
             d->error->message);
}

static void *request_thread(void *arg) {
    int t = (int)(intptr_t)arg;
    for (int i = 0; i < per_thread; i++) {
        char order[32];
        int len = snprintf(order, sizeof order, "%d-%d", t, i);
        emq_field f[] = {{"kind", 4, "order", 5},
                         {"order", 5, order, (size_t)len}};
        emq_id id;
        emq_error err;
        /* The request waits for its entry: answer the client only once
         * the queue has it. */
        if (emq_produce(producer, f, 2, &id, &err) == EMQ_OK)
            atomic_fetch_add(&requests_ok, 1);
        else
            fail(err.retriable ? "request (retriable)" : "request",
                 err.message);
        /* The audit line does not hold the request up. */
        emq_field a[] = {{"kind", 4, "audit", 5},
                         {"order", 5, order, (size_t)len}};
        if (emq_produce_async(producer, a, 2, audited, NULL, &err) != EMQ_OK)
            fail("audit not queued", err.message);
    }
    return NULL;
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: request_producer URL QUEUE COUNT\n");
        return 2;
    }
    int count = atoi(argv[3]);
    if (count < THREADS) {
        fprintf(stderr, "request_producer: COUNT must be at least %d\n",
                THREADS);
        return 2;
    }
    per_thread = count / THREADS;
    emq_conf_t *conf = emq_conf_new();
    emq_error err;
    if (conf == NULL || emq_conf_set(conf, "url", argv[1], &err) != EMQ_OK ||
        emq_conf_set(conf, "queue", argv[2], &err) != EMQ_OK ||
        emq_conf_set(conf, "producer.timeout_ms", "500", &err) != EMQ_OK ||
        emq_producer_new(conf, &producer, &err) != EMQ_OK) {
        fprintf(stderr, "request_producer: %s\n",
                conf ? err.message : "out of memory");
        return 1;
    }
    emq_conf_destroy(conf);
    pthread_t th[THREADS];
    for (int t = 0; t < THREADS; t++)
        pthread_create(&th[t], NULL, request_thread, (void *)(intptr_t)t);
    for (int t = 0; t < THREADS; t++)
        pthread_join(th[t], NULL);
    if (emq_producer_flush(producer, 5000, &err) != EMQ_OK)
        fail("flush", err.message);
    emq_producer_destroy(producer);
    if (atomic_load(&failures)) {
        fprintf(stderr, "request_producer: %d failures; the first: %s\n",
                atomic_load(&failures), first_failure);
        return 1;
    }
    printf("produced %d requests and %d audit lines\n",
           atomic_load(&requests_ok), atomic_load(&audits_ok));
    return 0;
}
