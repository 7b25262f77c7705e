/* SPDX-License-Identifier: BSD-3-Clause */
/* worker_pool.h: the worker threads of the event-loop examples
 * (uv_worker.c, event_worker.c, epoll_worker.c).
 *
 * The event loop hands entries it got from emq_consumer_step to this
 * pool; a worker thread does the job (here: a checksum of the fields and
 * a millisecond of "work"), then acknowledges the entry from its own
 * thread with emq_consumer_ack and frees it. That is the whole contract of
 * the pull API: an entry is the caller's until emq_entry_free, kept owned
 * by the consumer until it is settled, settled from any thread.
 *
 * Uses only echomq.h and POSIX threads.
 */
#ifndef EXAMPLE_WORKER_POOL_H
#define EXAMPLE_WORKER_POOL_H

#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L /* nanosleep */
#endif

#include <echomq.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define POOL_THREADS 4
#define POOL_QUEUE 4096 /* above max_in_flight (set to 256 by the examples) */

typedef struct worker_pool {
    emq_consumer_t *consumer;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    emq_entry *queue[POOL_QUEUE];
    size_t head, n;
    int quit;
    pthread_t threads[POOL_THREADS];
    atomic_long handled, failed;
    unsigned long checksum;
} worker_pool;

/* The job: a checksum over every field, and a millisecond of work. */
static unsigned long pool_job(const emq_entry *e) {
    unsigned long sum = 5381;
    for (size_t i = 0; i < e->nfields; i++)
        for (size_t k = 0; k < e->fields[i].value_len; k++)
            sum = sum * 33 + (unsigned char)e->fields[i].value[k];
    struct timespec ms = {0, 1000000};
    nanosleep(&ms, NULL);
    return sum;
}

static void *pool_main(void *arg) {
    worker_pool *p = arg;
    for (;;) {
        pthread_mutex_lock(&p->mu);
        while (p->n == 0 && !p->quit)
            pthread_cond_wait(&p->cv, &p->mu);
        if (p->n == 0) {
            pthread_mutex_unlock(&p->mu);
            return NULL;
        }
        emq_entry *e = p->queue[p->head];
        p->head = (p->head + 1) % POOL_QUEUE;
        p->n--;
        pthread_mutex_unlock(&p->mu);
        unsigned long sum = pool_job(e);
        emq_error err;
        if (emq_consumer_ack(p->consumer, e, &err) == EMQ_OK) {
            atomic_fetch_add(&p->handled, 1);
        } else {
            fprintf(stderr, "worker: entry %s: %s\n", e->id, err.message);
            atomic_fetch_add(&p->failed, 1);
        }
        pthread_mutex_lock(&p->mu);
        p->checksum ^= sum;
        pthread_mutex_unlock(&p->mu);
        emq_entry_free(e);
    }
}

static int pool_start(worker_pool *p, emq_consumer_t *c) {
    memset(p, 0, sizeof *p);
    p->consumer = c;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv, NULL);
    for (int i = 0; i < POOL_THREADS; i++)
        if (pthread_create(&p->threads[i], NULL, pool_main, p) != 0)
            return -1;
    return 0;
}

/* Hands n entries to the workers (called on the event loop's thread). */
static void pool_submit(worker_pool *p, emq_entry **entries, size_t n) {
    pthread_mutex_lock(&p->mu);
    for (size_t i = 0; i < n; i++)
        p->queue[(p->head + p->n++) % POOL_QUEUE] = entries[i];
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
}

/* Lets the workers finish what they hold, then joins them. */
static void pool_stop(worker_pool *p) {
    pthread_mutex_lock(&p->mu);
    p->quit = 1;
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
    for (int i = 0; i < POOL_THREADS; i++)
        pthread_join(p->threads[i], NULL);
}

/* The consumer every example makes: group "workers" from the head of the
 * stream, under the stable name given, at most 256 entries out. NULL
 * (the reason printed) on failure. */
static emq_consumer_t *pool_consumer(const char *url, const char *queue,
                                     const char *name) {
    emq_conf_t *conf = emq_conf_new();
    emq_error err;
    const char *props[][2] = {{"url", url},         {"queue", queue},
                              {"group", "workers"}, {"consumer", name},
                              {"start", "head"},    {"max_in_flight", "256"}};
    emq_consumer_t *c = NULL;
    int ok = conf != NULL;
    for (size_t i = 0; ok && i < sizeof props / sizeof props[0]; i++)
        ok = emq_conf_set(conf, props[i][0], props[i][1], &err) == EMQ_OK;
    if (ok)
        ok = emq_consumer_new(conf, NULL, NULL, &c, &err) == EMQ_OK;
    if (!ok)
        fprintf(stderr, "%s: %s\n", name, conf ? err.message : "out of memory");
    emq_conf_destroy(conf);
    return ok ? c : NULL;
}

/* Takes what is ready (never waits) and hands it to the workers; -1
 * (the reason printed) when the consumer has ended. */
static int pool_step(worker_pool *p, const char *name) {
    emq_entry *entries[64];
    size_t n = 0;
    emq_error err;
    emq_status st = emq_consumer_step(p->consumer, entries, 64, &n, &err);
    if (st != EMQ_OK) {
        fprintf(stderr, "%s: %s\n", name, err.message);
        return -1;
    }
    pool_submit(p, entries, n);
    return 0;
}

/* Ends the run: waits for the workers, closes the consumer (every entry
 * settled by then), prints the result. Returns the exit status. */
static int pool_finish(worker_pool *p, const char *name, long want) {
    pool_stop(p);
    emq_error err;
    int rc = 0;
    if (emq_consumer_close(p->consumer, 5000, &err) != EMQ_OK) {
        fprintf(stderr, "%s: %s\n", name, err.message);
        rc = 1;
    }
    long handled = atomic_load(&p->handled);
    printf("%s: handled %ld entries on %d worker threads (checksum %lx)\n",
           name, handled, POOL_THREADS, p->checksum);
    emq_consumer_destroy(p->consumer);
    return rc == 0 && handled >= want && atomic_load(&p->failed) == 0 ? 0 : 1;
}

/* URL QUEUE COUNT from argv; -1 (usage printed) when they are wrong. */
static long pool_args(int argc, char **argv) {
    char *end = NULL;
    long want = argc == 4 ? strtol(argv[3], &end, 10) : 0;
    if (argc != 4 || *end != '\0' || want < 1) {
        fprintf(stderr,
                "usage: %s URL QUEUE COUNT\n"
                "  handles COUNT entries of QUEUE (group \"workers\", from "
                "the head) on %d worker threads, then exits 0\n",
                argv[0], POOL_THREADS);
        return -1;
    }
    return want;
}

#endif /* EXAMPLE_WORKER_POOL_H */
