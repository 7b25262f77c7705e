/* SPDX-License-Identifier: BSD-3-Clause */
/* bench_stream.h: what the stream-consuming benchmarks share
 * (bench_consume.c, bench_pull.c): the pre-filled stream, the checks after
 * a run, and the hiredis client they are compared with.
 *
 * The hiredis client: one thread per consumer, each with its own
 * redisContext, looping on XREADGROUP GROUP g c COUNT n BLOCK b STREAMS s >
 * with the XACK of the previous batch's IDs appended in front of the next
 * XREADGROUP, so the acknowledgements travel in the same round trip as the
 * next read. Each entry's fields are touched, its ID copied for the XACK,
 * and it is counted in the shared counter; a thread stops once the counter
 * reaches N, after one last XACK.
 */
#ifndef EMQ_BENCH_STREAM_H
#define EMQ_BENCH_STREAM_H

#include "echomq.h"

#include "bench_common.h"

#include <pthread.h>
#include <stdatomic.h>

#define STREAM "emq:{bench}" /* the stream echomq uses for queue "bench" */
#define PAYLOAD_LEN 100
#define FILL_WINDOW 1000 /* XADD commands in flight while filling */

/* Runs one command that must not fail, and frees its reply. */
static inline void admin_command(redisContext *admin, const char *fmt,
                                 const char *arg) {
    redisReply *r = redisCommand(admin, fmt, arg);
    if (r == NULL)
        die("admin command", admin->errstr);
    if (r->type == REDIS_REPLY_ERROR)
        die("admin command", r->str);
    freeReplyObject(r);
}

/* ---- filling the stream -------------------------------------------------- */

static char payload[PAYLOAD_LEN + 1];

static inline void fill(redisContext *admin, long total) {
    const char *argv[] = {"XADD", STREAM, "*", "data", payload};
    const size_t len[] = {4, strlen(STREAM), 1, 4, PAYLOAD_LEN};
    admin_command(admin, "DEL %s", STREAM);
    double start = now_s();
    for (long done = 0; done < total;) {
        long n = total - done < FILL_WINDOW ? total - done : FILL_WINDOW;
        for (long i = 0; i < n; i++)
            if (redisAppendCommandArgv(admin, 5, argv, len) != REDIS_OK)
                die("XADD", admin->errstr);
        for (long i = 0; i < n; i++) {
            void *reply;
            if (redisGetReply(admin, &reply) != REDIS_OK)
                die("XADD", admin->errstr);
            if (((redisReply *)reply)->type != REDIS_REPLY_STRING)
                die("XADD", "unexpected reply");
            freeReplyObject(reply);
        }
        done += n;
    }
    redisReply *r = redisCommand(admin, "XLEN %s", STREAM);
    if (r == NULL || r->type != REDIS_REPLY_INTEGER || r->integer != total)
        die("XLEN", "the stream does not hold the entries just added");
    freeReplyObject(r);
    double t = now_s() - start;
    printf("filled %s with %ld entries of %d bytes in %.1f s (%.0f XADD/s)\n",
           STREAM, total, PAYLOAD_LEN, t, total / t);
}

/* Checks after a run that group has nothing pending, then destroys it. */
static inline void check_and_drop_group(redisContext *admin, const char *group,
                                        const char *who) {
    redisReply *r = redisCommand(admin, "XPENDING %s %s", STREAM, group);
    if (r == NULL)
        die("XPENDING", admin->errstr);
    if (r->type != REDIS_REPLY_ARRAY || r->elements < 1 ||
        r->element[0]->type != REDIS_REPLY_INTEGER)
        die("XPENDING", "unexpected reply");
    if (r->element[0]->integer != 0) {
        fprintf(stderr, "%s: %s left %lld entries pending\n", bench_name, who,
                r->element[0]->integer);
        exit(1);
    }
    freeReplyObject(r);
    r = redisCommand(admin, "XGROUP DESTROY %s %s", STREAM, group);
    if (r == NULL)
        die("XGROUP DESTROY", admin->errstr);
    freeReplyObject(r);
}

/* ---- what both clients share ------------------------------------------- */

typedef struct run_state {
    long total;          /* entries to handle */
    atomic_long handled; /* entries handled so far, all threads */
    atomic_ulong sink;   /* sum of value lengths: the "work" */
    emq_pool_t *pool;    /* echomq only: stopped at entry N */
    double done_s;       /* clock when entry N was handled */
    double done_cpu_us;  /* process CPU time at that moment */
} run_state;

/* Called by whichever thread handles entry N of the run. */
static inline void mark_done(run_state *s) {
    s->done_s = now_s();
    s->done_cpu_us = cpu_us();
}

typedef struct result {
    double wall_s;  /* start to entry N handled */
    double cpu_us;  /* client CPU over the same span */
    double total_s; /* start to every thread returned */
    int ran;        /* 0: not measured */
} result;

/* ---- work per entry ------------------------------------------------------ */

/* Microseconds of busy work per entry (bench_consume -w: a slow handler,
 * so that entries wait in hand long enough to be refreshed). */
static int work_us;

static inline void work(void) {
    if (work_us <= 0)
        return;
    double end = now_s() + work_us / 1e6;
    while (now_s() < end)
        ;
}

static inline void conf_set(emq_conf_t *conf, const char *name,
                            const char *value) {
    emq_error err;
    if (emq_conf_set(conf, name, value, &err) != EMQ_OK)
        die(name, err.message);
}

/* ---- hiredis ------------------------------------------------------------- */

typedef struct hiredis_worker {
    run_state *s;
    const char *group;
    char name[32];
    int count;
    int block_ms;
    long acked; /* from the XACK replies */
    pthread_t thread;
} hiredis_worker;

#define ID_MAX 48 /* longest entry ID text plus NUL */

static inline void *hiredis_main(void *arg) {
    hiredis_worker *w = arg;
    run_state *s = w->s;
    redisContext *c = connect_server();
    char count[24], block[24];
    snprintf(count, sizeof count, "%d", w->count);
    snprintf(block, sizeof block, "%d", w->block_ms);
    const char *read_argv[] = {"XREADGROUP", "GROUP", w->group, w->name,
                               "COUNT",      count,   "BLOCK",  block,
                               "STREAMS",    STREAM,  ">"};
    /* XACK argv: "XACK", stream, group, then up to count IDs copied from
     * the batch, as a handler-driven client would keep them. */
    size_t cap = (size_t)w->count;
    char(*ids)[ID_MAX] = malloc(cap * sizeof *ids);
    const char **ack_argv = malloc((cap + 3) * sizeof *ack_argv);
    size_t *ack_len = malloc((cap + 3) * sizeof *ack_len);
    if (ids == NULL || ack_argv == NULL || ack_len == NULL)
        die("hiredis worker", "out of memory");
    ack_argv[0] = "XACK";
    ack_argv[1] = STREAM;
    ack_argv[2] = w->group;
    ack_len[0] = 4;
    ack_len[1] = strlen(STREAM);
    ack_len[2] = strlen(w->group);
    size_t nacks = 0;

    for (;;) {
        if (nacks && redisAppendCommandArgv(c, (int)(3 + nacks), ack_argv,
                                            ack_len) != REDIS_OK)
            die("XACK", c->errstr);
        int stopping = atomic_load(&s->handled) >= s->total;
        if (!stopping &&
            redisAppendCommandArgv(c, 11, read_argv, NULL) != REDIS_OK)
            die("XREADGROUP", c->errstr);
        redisReply *r;
        if (nacks) {
            if (redisGetReply(c, (void **)&r) != REDIS_OK)
                die("XACK", c->errstr);
            if (r->type != REDIS_REPLY_INTEGER)
                die("XACK",
                    r->type == REDIS_REPLY_ERROR ? r->str : "unexpected reply");
            w->acked += r->integer;
            freeReplyObject(r);
            nacks = 0;
        }
        if (stopping)
            break;
        if (redisGetReply(c, (void **)&r) != REDIS_OK)
            die("XREADGROUP", c->errstr);
        if (r->type == REDIS_REPLY_ERROR)
            die("XREADGROUP", r->str);
        if (r->type == REDIS_REPLY_ARRAY && r->elements == 1 &&
            r->element[0]->type == REDIS_REPLY_ARRAY &&
            r->element[0]->elements == 2) {
            redisReply *entries = r->element[0]->element[1];
            for (size_t i = 0; i < entries->elements && nacks < cap; i++) {
                redisReply *e = entries->element[i];
                if (e->type != REDIS_REPLY_ARRAY || e->elements != 2 ||
                    e->element[0]->type != REDIS_REPLY_STRING ||
                    e->element[0]->len >= ID_MAX)
                    die("XREADGROUP", "an entry is not [id, fields]");
                redisReply *fields = e->element[1];
                size_t bytes = 0;
                if (fields->type == REDIS_REPLY_ARRAY)
                    for (size_t f = 1; f < fields->elements; f += 2)
                        bytes += fields->element[f]->len;
                atomic_fetch_add_explicit(&s->sink, bytes,
                                          memory_order_relaxed);
                work();
                memcpy(ids[nacks], e->element[0]->str, e->element[0]->len);
                ids[nacks][e->element[0]->len] = '\0';
                ack_argv[3 + nacks] = ids[nacks];
                ack_len[3 + nacks] = e->element[0]->len;
                nacks++;
                if (atomic_fetch_add(&s->handled, 1) + 1 == s->total)
                    mark_done(s);
            }
        } else if (r->type != REDIS_REPLY_NIL) {
            die("XREADGROUP", "unexpected reply shape");
        }
        freeReplyObject(r);
    }
    free(ids);
    free(ack_argv);
    free(ack_len);
    redisFree(c);
    return NULL;
}

static inline result run_hiredis(redisContext *admin, long total, int count,
                                 int consumers, int block_ms,
                                 const char *group) {
    admin_command(admin, "XGROUP CREATE " STREAM " %s 0", group);
    run_state s = {.total = total};
    hiredis_worker w[8];
    double cpu0 = cpu_us(), t0 = now_s();
    for (int i = 0; i < consumers; i++) {
        w[i] = (hiredis_worker){
            .s = &s, .group = group, .count = count, .block_ms = block_ms};
        snprintf(w[i].name, sizeof w[i].name, "h-%d", i + 1);
        if (pthread_create(&w[i].thread, NULL, hiredis_main, &w[i]) != 0)
            die("pthread_create", "failed");
    }
    long acked = 0;
    for (int i = 0; i < consumers; i++) {
        pthread_join(w[i].thread, NULL);
        acked += w[i].acked;
    }
    result res = {s.done_s - t0, s.done_cpu_us - cpu0, now_s() - t0, 1};
    if (atomic_load(&s.handled) != total || acked != total) {
        fprintf(stderr, "%s: hiredis handled %ld, acked %ld of %ld\n",
                bench_name, atomic_load(&s.handled), acked, total);
        exit(1);
    }
    check_and_drop_group(admin, group, "hiredis");
    return res;
}

#endif /* EMQ_BENCH_STREAM_H */
