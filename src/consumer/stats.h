/* SPDX-License-Identifier: BSD-3-Clause */
/* stats.h: the statistics callback and its histograms (stats.c). The
 * counters themselves are part of the consumer (core.h).
 */
#ifndef EMQ_CONSUMER_STATS_H
#define EMQ_CONSUMER_STATS_H

#include "core.h"

/* 1 when the statistics callback is on (stats.interval_ms and a fn). */
int emq__stats_on(const emq_consumer_t *c);
/* Counts one entry out for us microseconds, and one delivery count. */
void emq__stats_latency(emq_consumer_t *c, int64_t us);
void emq__stats_delivery(emq_consumer_t *c, uint64_t deliveries);
/* Asks the server for the group's lag and oldest pending entry on x, then
 * passes the JSON to the callback (the upkeep thread, when due). */
void emq__stats_report(emq_consumer_t *c, emq__session *x);

#endif /* EMQ_CONSUMER_STATS_H */
