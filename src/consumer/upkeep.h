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
 * lease or its upkeep ended. Any thread; cheap when nothing waits. */
void emq__upkeep_wait_unmarked(emq_consumer_t *c);

#endif /* EMQ_CONSUMER_UPKEEP_H */
