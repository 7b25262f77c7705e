/* SPDX-License-Identifier: BSD-3-Clause */
/* upkeep.h: the maintenance thread on its own connection (upkeep.c). */
#ifndef EMQ_CONSUMER_UPKEEP_H
#define EMQ_CONSUMER_UPKEEP_H

#include "core.h"

/* Starts the maintenance thread on its own connection. */
emq_status emq__upkeep_start(emq_consumer_t *c, emq_error *err);
/* Sends what is queued (while the lease holds) and ends the thread. */
void emq__upkeep_stop(emq_consumer_t *c);
/* Waits until every unseen mark asked to go so far (entries about to be
 * handed out) is gone from the server, or the consumer stops, loses its
 * lease or its upkeep ended. Returns 1 when it had to wait (time passed:
 * the caller asks again whether its entries are still its own), 0 when
 * nothing was outstanding. Any thread; cheap when nothing waits. */
int emq__upkeep_wait_unmarked(emq_consumer_t *c);
/* 0 while the upkeep's connection is being replaced (after a round met
 * it gone or failing, until a new one is up), else 1. Entries read
 * meanwhile could be neither refreshed nor marked unseen, so the reading
 * thread waits instead. Any thread. */
int emq__upkeep_in_step(const emq_consumer_t *c);

#endif /* EMQ_CONSUMER_UPKEEP_H */
