/* SPDX-License-Identifier: BSD-3-Clause */
/* consumer_helpers.h: helpers for the consumer and producer tests.
 *
 * A recording handler keeps every entry it sees (ID, delivery count, first
 * field's value) so a test can check exactly what was delivered, and can be
 * told to answer retry or dead for chosen values, or to stop the consumer
 * after N entries.
 */
#ifndef EMQ_TEST_CONSUMER_HELPERS_H
#define EMQ_TEST_CONSUMER_HELPERS_H

#include "integ/conn_helpers.h"
#include "harness/server.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define REC_MAX 20000

typedef struct recorder {
    pthread_mutex_t lock;
    size_t n;
    char ids[REC_MAX][32];
    char values[REC_MAX][32];
    uint64_t deliveries[REC_MAX];
    const char *retry_value; /* answer EMQ_RETRY for this value */
    const char *dead_value;  /* answer EMQ_DEAD for this value */
    size_t stop_after;       /* stop consumer after this many (0: never) */
    emq_consumer_t *consumer;
    emq_pool_t *pool;
} recorder;

static inline void recorder_init(recorder *r) {
    memset(r, 0, sizeof *r);
    pthread_mutex_init(&r->lock, NULL);
}

static inline emq_verdict record(void *opaque, const emq_entry *e, char *reason,
                                 size_t reason_size) {
    recorder *r = opaque;
    pthread_mutex_lock(&r->lock);
    size_t i = r->n < REC_MAX ? r->n++ : REC_MAX - 1;
    snprintf(r->ids[i], sizeof r->ids[i], "%s", e->id);
    snprintf(r->values[i], sizeof r->values[i], "%.*s",
             e->nfields ? (int)e->fields[0].value_len : 0,
             e->nfields ? e->fields[0].value : "");
    r->deliveries[i] = e->deliveries;
    size_t seen = r->n;
    pthread_mutex_unlock(&r->lock);
    if (r->stop_after && seen >= r->stop_after) {
        if (r->consumer)
            emq_consumer_stop(r->consumer);
        if (r->pool)
            emq_pool_stop(r->pool);
    }
    if (r->retry_value && strcmp(r->values[i], r->retry_value) == 0) {
        snprintf(reason, reason_size, "cannot handle %s yet", r->values[i]);
        return EMQ_RETRY;
    }
    if (r->dead_value && strcmp(r->values[i], r->dead_value) == 0) {
        snprintf(reason, reason_size, "poison %s", r->values[i]);
        return EMQ_DEAD;
    }
    return EMQ_ACK;
}

/* A consumer conf for the fixture server with test-friendly timings. */
static inline emq_conf_t *consumer_conf(const emq_srv *s, const char *queue,
                                        const char *group, const char *consumer,
                                        const char *start) {
    emq_conf_t *conf = conf_for(emq_srv_url(s));
    conf_set(conf, "queue", queue);
    conf_set(conf, "group", group);
    conf_set(conf, "consumer", consumer);
    if (start)
        conf_set(conf, "start", start);
    conf_set(conf, "block_ms", "100");
    conf_set(conf, "lease.ttl_ms", "2000");
    conf_set(conf, "claim.interval_ms", "200");
    return conf;
}

/* A producer of queue at s (the caller destroys it). */
static inline emq_producer_t *queue_producer(const emq_srv *s,
                                             const char *queue) {
    emq_conf_t *conf = conf_for(emq_srv_url(s));
    conf_set(conf, "queue", queue);
    emq_producer_t *p;
    emq_error err;
    ASSERT_OK(emq_producer_new(conf, &p, &err), &err);
    emq_conf_destroy(conf);
    return p;
}

/* Adds entries {"n": "<prefix><i>"} for i in [first, first + n) to queue
 * through the producer; with blob_bytes > 0 each also carries {"b": that
 * many 'x'}. */
static inline void produce_blobs(const emq_srv *s, const char *queue,
                                 const char *prefix, int first, int n,
                                 size_t blob_bytes) {
    emq_producer_t *p = queue_producer(s, queue);
    char *blob = blob_bytes > 0 ? malloc(blob_bytes) : NULL;
    ASSERT(blob_bytes == 0 || blob != NULL);
    if (blob != NULL)
        memset(blob, 'x', blob_bytes);
    emq_error err;
    for (int i = first; i < first + n; i++) {
        char value[32];
        int len = snprintf(value, sizeof value, "%s%d", prefix, i);
        emq_field f[2] = {{"n", 1, value, (size_t)len},
                          {"b", 1, blob, blob_bytes}};
        ASSERT_OK(emq_produce(p, f, blob != NULL ? 2 : 1, NULL, &err), &err);
    }
    free(blob);
    emq_producer_destroy(p);
}

/* produce_blobs without blobs. */
static inline void produce_range(const emq_srv *s, const char *queue,
                                 const char *prefix, int first, int n) {
    produce_blobs(s, queue, prefix, first, n, 0);
}

/* Adds n entries {"n": "<prefix><i>"}, i from 0, to queue. */
static inline void produce_n(const emq_srv *s, const char *queue,
                             const char *prefix, int n) {
    produce_range(s, queue, prefix, 0, n);
}

typedef struct runner_thread {
    pthread_t thread;
    emq_consumer_t *c;
    emq_status st;
    emq_error err;
} runner_thread;

static inline void *run_consumer_thread(void *arg) {
    runner_thread *t = arg;
    t->st = emq_consumer_run(t->c, &t->err);
    return NULL;
}

static inline void start_consumer(runner_thread *t, emq_consumer_t *c) {
    memset(t, 0, sizeof *t);
    t->c = c;
    ASSERT(pthread_create(&t->thread, NULL, run_consumer_thread, t) == 0);
}

static inline emq_status join_consumer(runner_thread *t) {
    pthread_join(t->thread, NULL);
    return t->st;
}

/* A pool run on a thread of its own (emq_pool_run), like runner_thread. */
typedef struct pool_thread {
    pthread_t thread;
    emq_pool_t *pool;
    emq_status st;
    emq_error err;
} pool_thread;

static inline void *run_pool_thread(void *arg) {
    pool_thread *t = arg;
    t->st = emq_pool_run(t->pool, &t->err);
    return NULL;
}

static inline void start_pool(pool_thread *t, emq_pool_t *pool) {
    memset(t, 0, sizeof *t);
    t->pool = pool;
    ASSERT(pthread_create(&t->thread, NULL, run_pool_thread, t) == 0);
}

/* 1 when r handled, for each of the n numbers in values, an entry whose
 * first field's value is one character then that number ("e17"). */
static inline int recorder_handled_values(recorder *r, const int *values,
                                          int n) {
    enum { MOST = 2 * REC_MAX };
    static unsigned char seen[MOST];
    memset(seen, 0, sizeof seen);
    pthread_mutex_lock(&r->lock);
    for (size_t i = 0; i < r->n; i++) {
        int k = atoi(r->values[i] + 1);
        if (k >= 0 && k < MOST)
            seen[k] = 1;
    }
    pthread_mutex_unlock(&r->lock);
    for (int i = 0; i < n; i++)
        if (values[i] < 0 || values[i] >= MOST || !seen[values[i]])
            return 0;
    return 1;
}

/* Waits (bounded) until r has seen n entries. */
static inline void wait_for(recorder *r, size_t n, int timeout_ms) {
    timeout_ms = emq_test_ms(timeout_ms);
    int64_t end = now_ms() + timeout_ms;
    while (now_ms() < end) {
        pthread_mutex_lock(&r->lock);
        size_t have = r->n;
        pthread_mutex_unlock(&r->lock);
        if (have >= n)
            return;
        usleep(5000);
    }
    FAIL("only %zu of %zu entries arrived within %d ms", r->n, n, timeout_ms);
}

/* A lease token naming process pid of this machine as the consumer writes
 * it (host:boot_id:pidns:pid:start:random), for tests that plant a holder:
 * with the pid of a live process it reads as a live local holder. */
static inline void local_holder_token(long pid, char *out, size_t size) {
    char host[64] = "localhost", boot[40] = "-", path[64], line[1024] = "";
    gethostname(host, sizeof host - 1);
    FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
    if (f) {
        if (!fgets(boot, sizeof boot, f))
            strcpy(boot, "-");
        fclose(f);
        boot[strcspn(boot, "\r\n")] = '\0';
    }
    struct stat ns;
    unsigned long long pidns =
        stat("/proc/self/ns/pid", &ns) == 0 ? (unsigned long long)ns.st_ino : 0;
    snprintf(path, sizeof path, "/proc/%ld/stat", pid);
    unsigned long long start = 0;
    if ((f = fopen(path, "r")) != NULL) {
        size_t n = fread(line, 1, sizeof line - 1, f);
        line[n] = 0;
        fclose(f);
        char *p = strrchr(line, 0x29);
        for (int field = 2; field < 22 && p; field++)
            p = strchr(p + 1, ' ');
        if (p)
            start = strtoull(p + 1, NULL, 10);
    }
    snprintf(out, size, "%s:%s:%llu:%ld:%llu:0123456789abcdef", host, boot,
             pidns, pid, start);
}

#endif /* EMQ_TEST_CONSUMER_HELPERS_H */
