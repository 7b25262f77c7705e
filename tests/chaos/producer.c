/* SPDX-License-Identifier: BSD-3-Clause */
/* producer.c: the chaos harness's producer thread.
 *
 * Publishes jobs 0..N-1 to queue "chaos", each as the fields
 *   job <index>  kind ok|poison|dead  ms <handler duration>
 *   retries <0..2>  pad <16 hex digits from the seed>
 * (one in 20 of the plain jobs delayed by its plan's delay_ms, one in 10
 * of all with the idempotency key "job-<index>")
 * and, for the few big jobs, blob <1-8 MB of letters from the seed>, and
 * for the dead jobs (answered EMQ_DEAD), wide fields w0 <0:job> .. (so
 * their dead letters show whether every field was kept)
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
        emq_conf_set(conf, "reconnect.backoff_max_ms", "300", err) == EMQ_OK &&
        (!p->wait_replicas ||
         (emq_conf_set(conf, "producer.wait_replicas",
                       p->wait_replicas > 1 ? "2" : "1", err) == EMQ_OK &&
          emq_conf_set(conf, "producer.wait_timeout_ms", "1000", err) ==
              EMQ_OK)))
        emq_producer_new(conf, &prod, err);
    emq_conf_destroy(conf);
    return prod;
}

emq_field *chaos_job_fields(long index, const job_plan *plan, uint64_t seed,
                            size_t *n) {
    size_t nf = 5 + (plan->big ? 1 : 0) + plan->wide;
    size_t text = 128 + 24 * (size_t)plan->wide;
    emq_field *f = malloc(nf * sizeof *f + text + plan->big);
    if (f == NULL)
        return NULL;
    char *t = (char *)(f + nf), *blob = t + text;
    size_t k = 0;
#define CHAOS_PUT(NAME, FMT, ...)                                              \
    do {                                                                       \
        int len = sprintf(t, FMT, __VA_ARGS__);                                \
        f[k++] = (emq_field){NAME, strlen(NAME), t, (size_t)len};              \
        t += len + 1;                                                          \
    } while (0)
    CHAOS_PUT("job", "%ld", index);
    CHAOS_PUT("kind", "%s",
              plan->crash    ? "crash"
              : plan->poison ? "poison"
              : plan->dead   ? "dead"
                             : "ok");
    CHAOS_PUT("ms", "%u", (unsigned)plan->ms);
    CHAOS_PUT("retries", "%u", (unsigned)plan->retries);
    chaos_rng r = {seed ^ (uint64_t)index * 0x9e3779b97f4a7c15ull};
    CHAOS_PUT("pad", "%016llx", (unsigned long long)chaos_rand(&r));
#undef CHAOS_PUT
    if (plan->big) {
        chaos_rng b = {seed ^ 0x626c6f62ull ^ (uint64_t)index << 20};
        for (uint32_t i = 0; i < plan->big; i += 8) {
            uint64_t x = chaos_rand(&b);
            for (uint32_t j = 0; j < 8 && i + j < plan->big; j++)
                blob[i + j] = (char)('a' + ((x >> (8 * j)) & 0xff) % 26);
        }
        f[k++] = (emq_field){"blob", 4, blob, plan->big};
    }
    for (uint32_t w = 0; w < plan->wide; w++) {
        /* name "w<i>" and value "<i>:<index>", NUL-separated in t */
        char *name = t;
        int a = sprintf(t, "w%u", (unsigned)w);
        t += a + 1;
        int b = sprintf(t, "%u:%ld", (unsigned)w, index);
        f[k++] = (emq_field){name, (size_t)a, t, (size_t)b};
        t += b + 1;
    }
    *n = k;
    return f;
}

void *chaos_produce(void *arg) {
    chaos_producer *p = arg;
    emq_error err;
    memset(&err, 0, sizeof err);
    emq_producer_t *prod = NULL;
    emq_field **text = calloc(BATCH, sizeof *text);
    emq_message *msgs = calloc(BATCH, sizeof *msgs);
    emq_produce_opts *opts = calloc(BATCH, sizeof *opts);
    char(*dedup)[32] = calloc(BATCH, sizeof *dedup);
    emq_id *ids = calloc(BATCH, sizeof *ids);
    long *which = calloc(BATCH, sizeof *which);
    if (!text || !msgs || !opts || !dedup || !ids || !which) {
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
            int oom = 0;
            for (size_t i = 0; i < n; i++) {
                size_t nf = 0;
                free(text[i]);
                text[i] = chaos_job_fields(which[i], &p->plan[which[i]],
                                           p->seed, &nf);
                oom |= text[i] == NULL;
                msgs[i] = (emq_message){text[i], nf, NULL};
                opts[i] = (emq_produce_opts)EMQ_PRODUCE_OPTS_INIT;
                opts[i].delay_ms = p->plan[which[i]].delay_ms;
                opts[i].priority = p->plan[which[i]].priority;
                if (p->plan[which[i]].dedup) {
                    int len = snprintf(dedup[i], sizeof dedup[i], "job-%ld",
                                       which[i]);
                    opts[i].dedup_key = dedup[i];
                    opts[i].dedup_key_len = (size_t)len;
                }
            }
            if (oom) {
                snprintf(p->why, sizeof p->why, "out of memory");
                p->failed = 1;
                goto out;
            }
            size_t written = 0;
            emq_status st =
                emq_produce_batch_ex(prod, msgs, opts, n, ids, &written, &err);
            size_t keep = 0;
            /* With producer.wait_replicas, an entry is confirmed once a
             * replica has it: a window that WAIT did not confirm is not
             * told apart, so the batch goes again (its entries exist:
             * re-added, not lost, if a failover keeps them). */
            int undurable = st == EMQ_ENOTDURABLE;
            for (size_t i = 0; i < n; i++) {
                if (ids[i].str[0] != '\0' && !undurable)
                    continue; /* confirmed */
                if (st != EMQ_OK && st != EMQ_ESERVER)
                    p->resent[which[i]] = 1; /* may exist already */
                which[keep++] = which[i];
            }
            __atomic_fetch_add(&p->confirmed, (long)(n - keep),
                               __ATOMIC_RELAXED);
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
    for (size_t i = 0; text && i < BATCH; i++)
        free(text[i]);
    free(text);
    free(msgs);
    free(opts);
    free(dedup);
    free(ids);
    free(which);
    __atomic_store_n(&p->done, 1, __ATOMIC_RELEASE);
    return NULL;
}
