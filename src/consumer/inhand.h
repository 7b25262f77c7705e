/* SPDX-License-Identifier: BSD-3-Clause */
/* inhand.h: the consumer's in-hand times, published from the upkeep's
 * rounds (inhand.c).
 *
 * Every EMQ_INHAND_EVERY_MS the upkeep writes, for each entry newly in a
 * handler's hands, when it was handed out (by the server's clock) to the
 * group's inhand hash, and deletes the fields of entries that left a
 * handler's hands: an operator sees how long anything has been in hand
 * (echomq top, inspect), not only how long it has been idle.
 */
#ifndef EMQ_CONSUMER_INHAND_H
#define EMQ_CONSUMER_INHAND_H

#include "core.h"
#include "tags.h"

/* How often in-hand times are published. */
#define EMQ_INHAND_EVERY_MS 100

/* What one round sent, for its finish. */
typedef struct emq__inhand_round {
    size_t nunpublished; /* deletions in this round (ids kept by the caller) */
} emq__inhand_round;

/* Starts the in-hand times of a run: the first look in
 * EMQ_INHAND_EVERY_MS. */
void emq__inhand_init(emq_consumer_t *c, int64_t now_ms);
/* When the in-hand times want a round next (INT64_MAX: nothing is in a
 * handler's hands and nothing is to be deleted), and 1 when that is now.
 * Upkeep thread, table.mu held. */
int64_t emq__inhand_next_ms(emq_consumer_t *c);
int emq__inhand_due(emq_consumer_t *c, int64_t now_ms);
/* When due at now_ms, appends to x the deletions of entries that left a
 * handler's hands and the times of entries newly in them. unpub and ids
 * are scratch of EMQ_SETTLE_MAX_IDS (unpub kept for emq__inhand_finish);
 * *ir says what went. Upkeep thread. */
emq_status emq__inhand_append(emq_consumer_t *c, emq__session *x,
                              int64_t now_ms, emq_id *unpub, emq_id *ids,
                              emq__inhand_round *ir, emq_error *err);
/* Applies a reply tagged in the block EMQ_TAGS_INHAND. Refused (an ACL):
 * an operator sees the idle time instead; logged at debug, nothing
 * else. */
void emq__inhand_apply(emq_consumer_t *c, int tag, const emq_reply *reply);
/* After the round (st: its transport status): deletions whose fate is
 * unknown go again. Upkeep thread. */
void emq__inhand_finish(emq_consumer_t *c, const emq__inhand_round *ir,
                        emq_status st, const emq_id *unpub);

#endif /* EMQ_CONSUMER_INHAND_H */
