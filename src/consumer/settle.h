/* SPDX-License-Identifier: BSD-3-Clause */
/* settle.h: the commands that settle entries and refresh their ownership
 * (settle.c).
 */
#ifndef EMQ_CONSUMER_SETTLE_H
#define EMQ_CONSUMER_SETTLE_H

#include "core.h"

/* Commands a round sends besides one per dead letter: XACK, HDEL, ZREM,
 * the release script, the retries' HSET and schedule script, the refresh,
 * the renewal and the read. The floor of pipeline.max (conf.c) leaves
 * room for them. */
#define EMQ_ROUND_FIXED_COMMANDS 9

/* Most settlements one round may take: EMQ_SETTLE_MAX_IDS, or fewer when
 * pipeline.max would not hold a command per dead letter. */
size_t emq__settle_ops_max(const emq_consumer_t *c);
/* Appends the commands of ops[0..n) to x (n <= emq__settle_ops_max). */
emq_status emq__settle_append(emq_consumer_t *c, emq__session *x,
                              const settle_op *ops, size_t n, emq_error *err);
/* Applies one settlement command's reply (tag from emq__settle_append);
 * round is a settle_round. Fatal refusals are recorded and returned. */
emq_status emq__settle_apply(void *round, int tag, const emq_reply *reply,
                             emq_error *err);
/* After the pipeline of ops[0..n) was read with status st: moves the
 * dead letters too wide for the script (each with every field, written
 * from this process over the calling thread's own session: the upkeep's
 * or the run thread's; one that cannot be written whole stays pending,
 * with an error logged, never truncated), forgets the settled entries and
 * frees the ops, or queues them again when their outcome is unknown or
 * they were answered "not now". Frees what r gathered. Caller: the thread
 * that sent ops. */
void emq__settle_finish(emq_consumer_t *c, settle_op *ops, size_t n,
                        emq_status st, settle_round *r);
/* Appends the ownership refresh of ids[0..n) (n <= EMQ_SETTLE_MAX_IDS):
 * its reply is the array of those still pending to this consumer, whose
 * idle time it reset. */
emq_status emq__settle_append_refresh(emq_consumer_t *c, emq__session *x,
                                      const emq_id *ids, size_t n, int tag,
                                      emq_error *err);
/* Builds the settlement *op of entry id, delivered deliveries times
 * (reason may be NULL; a retry gets its delay from the schedule). */
emq_status emq__settle_make(emq_consumer_t *c, const emq_id *id,
                            uint64_t deliveries, settle_kind kind,
                            const char *reason, settle_op *op, emq_error *err);
/* The retry delay for an entry failed at its deliveries-th delivery. */
int64_t emq__settle_retry_delay(emq_consumer_t *c, uint64_t deliveries);

#endif /* EMQ_CONSUMER_SETTLE_H */
