/* SPDX-License-Identifier: BSD-3-Clause */
/* producer.c: the chaos harness's producer thread.
 *
 * Publishes jobs 0..N-1 to queue "chaos", each as the fields
 *   job <index>  kind ok|poison  ms <handler duration>  retries <0..2>
 *   pad <16 hex digits from the seed>
 * (ms and retries: the job's plan, drawn from the seed by the orchestrator;
 * the worker's handler sleeps ms and answers EMQ_RETRY while the delivery
 * count is at most retries)
 * in batches of up to BATCH entries, paced so that job i is sent no
 * earlier than start + i / rate: production spans the whole fault window.
 * It talks to the server directly, not through the proxy, but it lives
 * through the server's kill -9 and restart like everything else: an entry
 * whose outcome is unknown (a transport failure, its id "") or refused
 * (LOADING while the AOF is replayed) is sent again with the same payload
 * until the server confirms it. An entry sent again after an unknown
 * outcome may exist twice in the stream; it is marked in resent[] and the
 * checker keys jobs by the job field, never by entry ID. Every wait is
 * bounded by deadline_ms.
 */
#include "chaos.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BATCH 100

static emq_producer_t *connect_producer(chaos_producer *p, emq_error *err) {
    emq_conf_t *conf = emq_conf_new();
    if (conf == NULL)
        return NULL;
    emq_producer_t *prod = NULL;
    if (emq_conf_set(conf, "url", p->url, err) == EMQ_OK &&
        emq_conf_set(conf, "queue", CHAOS_QUEUE, err) == EMQ_OK &&
        emq_conf_set(conf, "connect_timeout_ms", "1000", err) == EMQ_OK &&
        emq_conf_set(conf, "command_timeout_ms", "3000", err) == EMQ_OK &&
        emq_conf_set(conf, "reconnect.max_attempts", "3", err) == EMQ_OK &&
        emq_conf_set(conf, "reconnect.backoff_min_ms", "50", err) == EMQ_OK &&
        emq_conf_set(conf, "reconnect.backoff_max_ms", "300", err) == EMQ_OK)
        emq_producer_new(conf, &prod, err);
    emq_conf_destroy(conf);
    return prod;
}

#define NFIELDS 5

typedef struct job_text {
    char job[24];
    char pad[24];
    char ms[16];
    char retries[8];
    emq_field fields[NFIELDS];
} job_text;

static void fill(job_text *t, long index, const job_plan *plan,
                 uint64_t seed) {
    int poison = plan->poison;
    snprintf(t->job, sizeof t->job, "%ld", index);
    snprintf(t->ms, sizeof t->ms, "%u", (unsigned)plan->ms);
    snprintf(t->retries, sizeof t->retries, "%u", (unsigned)plan->retries);
    chaos_rng r = {seed ^ (uint64_t)index * 0x9e3779b97f4a7c15ull};
    snprintf(t->pad, sizeof t->pad, "%016llx",
             (unsigned long long)chaos_rand(&r));
    const char *kind = poison ? "poison" : "ok";
    t->fields[0] = (emq_field){"job", 3, t->job, strlen(t->job)};
    t->fields[1] = (emq_field){"kind", 4, kind, strlen(kind)};
    t->fields[2] = (emq_field){"ms", 2, t->ms, strlen(t->ms)};
    t->fields[3] = (emq_field){"retries", 7, t->retries, strlen(t->retries)};
    t->fields[4] = (emq_field){"pad", 3, t->pad, strlen(t->pad)};
}

void *chaos_produce(void *arg) {
    chaos_producer *p = arg;
    emq_error err;
    memset(&err, 0, sizeof err);
    emq_producer_t *prod = NULL;
    job_text *text = calloc(BATCH, sizeof *text);
    emq_message *msgs = calloc(BATCH, sizeof *msgs);
    emq_id *ids = calloc(BATCH, sizeof *ids);
    long *which = calloc(BATCH, sizeof *which);
    if (!text || !msgs || !ids || !which) {
        snprintf(p->why, sizeof p->why, "out of memory");
        p->failed = 1;
        goto out;
    }
    for (long next = 0; next < p->jobs;) {
        int64_t due = p->start_ms + (int64_t)((double)next * 1000.0 / p->rate);
        int64_t now = chaos_now_ms();
        if (due > now)
            chaos_sleep_ms(due - now > 50 ? 50 : due - now);
        if (chaos_now_ms() < due)
            continue;
        size_t n = (size_t)(p->jobs - next < BATCH ? p->jobs - next : BATCH);
        for (size_t i = 0; i < n; i++)
            which[i] = next + (long)i;
        /* Send the batch; keep re-sending what is not confirmed. */
        int failures = 0;
        while (n > 0) {
            if (chaos_now_ms() > p->deadline_ms) {
                snprintf(p->why, sizeof p->why,
                         "job %ld still unconfirmed at the deadline (last "
                         "error: %.150s)",
                         which[0], err.message);
                p->failed = 1;
                goto out;
            }
            if (prod == NULL) {
                prod = connect_producer(p, &err);
                if (prod == NULL) {
                    chaos_sleep_ms(100);
                    continue;
                }
            }
            for (size_t i = 0; i < n; i++) {
                fill(&text[i], which[i], &p->plan[which[i]], p->seed);
                msgs[i] = (emq_message){text[i].fields, NFIELDS, NULL};
            }
            size_t written = 0;
            emq_status st = emq_produce_batch(prod, msgs, n, ids, &written,
                                              &err);
            size_t keep = 0;
            for (size_t i = 0; i < n; i++) {
                if (ids[i].str[0] != '\0')
                    continue; /* confirmed */
                if (st != EMQ_OK && st != EMQ_ESERVER)
                    p->resent[which[i]] = 1; /* may exist already */
                which[keep++] = which[i];
            }
            __atomic_fetch_add(&p->confirmed, (long)(n - keep), __ATOMIC_RELAXED);
            n = keep;
            if (n > 0) {
                p->resends++;
                if (++failures % 5 == 0) {
                    /* Start over with a fresh connection now and then. */
                    emq_producer_destroy(prod);
                    prod = NULL;
                }
                chaos_sleep_ms(50);
            }
        }
        next += BATCH;
        if (next > p->jobs)
            next = p->jobs;
    }
out:
    emq_producer_destroy(prod);
    free(text);
    free(msgs);
    free(ids);
    free(which);
    __atomic_store_n(&p->done, 1, __ATOMIC_RELEASE);
    return NULL;
}
