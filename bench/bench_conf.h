/* SPDX-License-Identifier: BSD-3-Clause */
/* bench_conf.h: a benchmark's echomq configurations (after
 * bench_common.h): a property set or the program dies saying which. */
#ifndef EMQ_BENCH_CONF_H
#define EMQ_BENCH_CONF_H

#include "bench_common.h"

#include <echomq.h>

/* Sets name to value in conf; dies naming it when refused. */
static inline void bench_set(emq_conf_t *conf, const char *name,
                             const char *value) {
    emq_error err;
    if (emq_conf_set(conf, name, value, &err) != EMQ_OK)
        die(name, err.message);
}

/* A new conf of url and queue (the caller destroys it). */
static inline emq_conf_t *bench_conf_of(const char *url, const char *queue) {
    emq_conf_t *conf = emq_conf_new();
    if (conf == NULL)
        die("configuration", "out of memory");
    bench_set(conf, "url", url);
    bench_set(conf, "queue", queue);
    return conf;
}

#endif /* EMQ_BENCH_CONF_H */
