/* SPDX-License-Identifier: BSD-3-Clause */
/* mover.h: the consumer's part in delayed entries: moving those that are
 * due to the stream, from the upkeep's rounds (mover.c). */
#ifndef EMQ_CONSUMER_MOVER_H
#define EMQ_CONSUMER_MOVER_H

#include "core.h"
#include "tags.h"

/* Tags of the mover's commands in an upkeep round (its block, tags.h). */
enum {
    EMQ_MOVER_TAG_TIME = EMQ_TAG(EMQ_TAGS_MOVER, 0),
    EMQ_MOVER_TAG_FIRST,
    EMQ_MOVER_TAG_MOVE
};

/* What one round asked of the mover, for applying its replies. */
typedef struct emq__mover_round {
    int probed;         /* TIME and the first waiting entry were asked */
    int moved;          /* a move was asked */
    int answered;       /* a reply set the next step */
    int64_t server_ms;  /* TIME's answer, ms; -1 unknown */
    int64_t first_due;  /* the first entry's due time; -1 none waits */
    int first_answered; /* the probe's ZRANGE came back as a list */
} emq__mover_round;

/* Sets up c->mover from delayed.poll_ms: the first look at once, or
 * never with 0. */
void emq__mover_init(emq_consumer_t *c, int64_t now);
/* When the mover's next step is due (INT64_MAX: never). Upkeep thread. */
int64_t emq__mover_next_ms(const emq_consumer_t *c);
/* Appends the mover's step to x when it is due at now: a look (TIME and
 * the first waiting entry: single-key commands, cheap, never a cluster's
 * TRYAGAIN when the delayed keys do not exist) or, when an entry is known
 * due, the move script. r records what went. */
emq_status emq__mover_append(emq_consumer_t *c, emq__session *x, int64_t now,
                             emq__mover_round *r, emq_error *err);
/* Applies the reply of one of the mover's commands (tag). */
void emq__mover_apply(emq_consumer_t *c, emq__mover_round *r, int tag,
                      const emq_reply *reply, int64_t sent_ms);
/* After the round's drain (st its status, now when it was sent): the
 * next step, from the replies, or again soon when they were lost. */
void emq__mover_finish(emq_consumer_t *c, emq__mover_round *r, emq_status st,
                       int64_t now);

#endif /* EMQ_CONSUMER_MOVER_H */
