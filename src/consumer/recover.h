/* SPDX-License-Identifier: BSD-3-Clause */
/* recover.h: entries pending but not being worked: our own, a dead
 * peer's, and retries that are due (recover.c).
 */
#ifndef EMQ_CONSUMER_RECOVER_H
#define EMQ_CONSUMER_RECOVER_H

#include "core.h"

/* Most XAUTOCLAIM calls one claim beat makes. A beat goes on only while
 * its calls claim something, so with nothing idle it costs one call. */
#define EMQ_CLAIM_CALLS_PER_BEAT 10

/* Drains this consumer's own pending entries with history reads, paging
 * from 0, until none remain (or stop). */
emq_status emq__recover_self(emq_consumer_t *c, emq_error *err);
/* One claim beat: XAUTOCLAIM following the saved cursor, at most
 * EMQ_CLAIM_CALLS_PER_BEAT calls, handling what it claims. */
emq_status emq__recover_peers(emq_consumer_t *c, emq_error *err);
/* Delivers again the retried entries whose delay has passed. */
emq_status emq__recover_due(emq_consumer_t *c, emq_error *err);

#endif /* EMQ_CONSUMER_RECOVER_H */
