/* SPDX-License-Identifier: BSD-3-Clause */
/* pool.c: N consumers on N threads.
 *
 * Each consumer has its own connection and the stable name
 * "<consumer>-<i>", i = 1..N, so a restarted pool gets its pending entries
 * back by name. When one consumer fails fatally, the pool stops the others
 * and returns that first error (the thread runner, emq__consumers_run, is
 * consumer.c's, which also runs a topic's partitions).
 */
#include "consumer.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

struct emq_pool {
    int n;
    emq_consumer_t **consumers;
};

emq_status emq_pool_new(const emq_conf_t *conf, int n, emq_handler_fn handler,
                        void *opaque, emq_pool_t **out, emq_error *err) {
    *out = NULL;
    if (conf == NULL || n < 1 || n > 1024)
        return emq__error_set(err, EMQ_EINVAL, 0,
                              "a pool needs a configuration and 1 to 1024 "
                              "consumers (got %d)",
                              n);
    if (emq__cfg_consumer(conf) == NULL)
        return emq__error_set(err, EMQ_EINVAL, 0,
                              "consumer name is required: the pool names its "
                              "consumers <consumer>-1 .. <consumer>-%d",
                              n);
    emq_pool_t *pool = emq__calloc(1, sizeof *pool);
    emq_conf_t *each = emq_conf_dup(conf);
    if (pool)
        pool->consumers = emq__calloc((size_t)n, sizeof *pool->consumers);
    if (pool == NULL || pool->consumers == NULL || each == NULL) {
        emq_conf_destroy(each);
        emq_pool_destroy(pool);
        return emq__oom(err);
    }
    emq_status st = EMQ_OK;
    for (int i = 0; i < n && st == EMQ_OK; i++) {
        char name[200];
        snprintf(name, sizeof name, "%s-%d", emq__cfg_consumer(conf), i + 1);
        st = emq_conf_set(each, "consumer", name, err);
        if (st == EMQ_OK)
            st = emq_consumer_new(each, handler, opaque, &pool->consumers[i],
                                  err);
        pool->n = i + 1;
    }
    emq_conf_destroy(each);
    if (st != EMQ_OK) {
        emq_pool_destroy(pool);
        return st;
    }
    *out = pool;
    return EMQ_OK;
}

emq_status emq_pool_run(emq_pool_t *pool, emq_error *err) {
    return emq__consumers_run(pool->consumers, (size_t)pool->n,
                              emq_consumer_run, err);
}

void emq_pool_stop(emq_pool_t *pool) {
    if (pool == NULL)
        return;
    for (int i = 0; i < pool->n; i++)
        emq_consumer_stop(pool->consumers[i]);
}

void emq_pool_destroy(emq_pool_t *pool) {
    if (pool == NULL)
        return;
    if (pool->consumers)
        for (int i = 0; i < pool->n; i++)
            emq_consumer_destroy(pool->consumers[i]);
    emq__free(pool->consumers);
    emq__free(pool);
}

emq_consumer_t *emq_pool_consumer(emq_pool_t *pool, int i) {
    return pool && i >= 0 && i < pool->n ? pool->consumers[i] : NULL;
}
