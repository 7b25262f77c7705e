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
 * lease or its upkeep ended. Returns 1 when it had to wait and the marks
 * are gone (time passed: the caller asks again whether its entries are
 * still its own), 0 when nothing was outstanding, -1 when it gave up with
 * a mark maybe still on the server: the entry must not be handed out
 * (a crash in its handler would not be counted), even if the lease is
 * held again by the time the caller looks. Any thread; cheap when
 * nothing waits. */
int emq__upkeep_wait_unmarked(emq_consumer_t *c);
/* Waits until every settlement decided so far is written, or the consumer
 * stops, loses its lease or its upkeep ended, for at most
 * command_timeout_ms: before an entry that may
 * have killed a process is handed out (batch_item.alone), so that it
 * takes no acknowledgement of another entry with it when it does again.
 * Returns 1 when it had to wait (as emq__upkeep_wait_unmarked), 0 when
 * nothing was outstanding. Any thread. */
int emq__upkeep_wait_settled(emq_consumer_t *c);
/* 0 while the upkeep's connection is being replaced (after a round met
 * it gone or failing, until a new one is up), else 1. Entries read
 * meanwhile could be neither refreshed nor marked unseen, so the reading
 * thread waits instead. Any thread. */
int emq__upkeep_in_step(const emq_consumer_t *c);
/* Asks the upkeep thread to end the run thread's blocked read now (a
 * stop came): it sends CLIENT UNBLOCK <id> TIMEOUT for the read recorded
 * by emq__upkeep_blocking, so the read returns nothing at once instead of
 * when its block times out. arg is the consumer. The run thread, from
 * its wait for the read's reply (emq__conn_cancel.on_stop). */
void emq__upkeep_unblock_ask(void *arg);
/* Records (blocking 1) that the run thread's next reply is a blocked
 * read's on its current connection, or (0) that it came. The run
 * thread. */
void emq__upkeep_blocking(emq_consumer_t *c, int blocking);

#endif /* EMQ_CONSUMER_UPKEEP_H */
