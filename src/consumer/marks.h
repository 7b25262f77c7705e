/* SPDX-License-Identifier: BSD-3-Clause */
/* marks.h: the consumer's unseen marks, written and removed from the
 * upkeep's rounds (marks.c).
 *
 * An entry read and waiting to be handed out gets an unseen mark (SADD to
 * the group's unseen set) once it has waited EMQ_UNSEEN_AFTER_MS
 * (EMQ_UNSEEN_SOON_MS behind slow handlers, or with deliveries.exact,
 * whose reads mark what they deliver themselves: inflight.h), and a mark
 * goes (SREM) before its entry is handed out: the handout waits for that
 * reply (emq__upkeep_wait_unmarked). After a crash, a take does not
 * count a delivery for a marked entry: no handler had it. Both go on the
 * upkeep's one connection, so they stay in order.
 */
#ifndef EMQ_CONSUMER_MARKS_H
#define EMQ_CONSUMER_MARKS_H

#include "core.h"
#include "tags.h"

/* What one round sent, for applying its replies. */
typedef struct emq__marks_round {
    size_t nunmarks;      /* removals in this round, */
    uint64_t unmark_upto; /* the last ticket among them, */
    int unmark_answered;  /* and their reply came, not "not now" (nor
                             short of deliveries.wait_replicas) */
    long long wait_want;  /* replicas the removals' WAIT asked for */
    size_t nmarks;        /* marks in this round (ids[0..nmarks)), */
    int mark_answered;    /* and their reply came, not "not now" */
    int later;            /* a reply said "not now": the round pauses */
} emq__marks_round;

/* Starts the marks of a run: the first look in EMQ_UNSEEN_AFTER_MS. */
void emq__marks_init(emq_consumer_t *c, int64_t now_ms);
/* When the marks want a round next (INT64_MAX: nothing waits that a mark
 * could be for), and 1 when that is now. Upkeep thread, table.mu held. */
int64_t emq__marks_next_ms(emq_consumer_t *c);
int emq__marks_due(emq_consumer_t *c, int64_t now_ms);

/* Appends to x the removals asked by handouts (first: a handout waits for
 * them), then the marks asked again by handouts undone (each behind its
 * removal) and, when due at now_ms, the marks of entries waiting long
 * enough (round_ms: the upkeep's round trip, a moving mean), in one
 * script that marks only what is still pending to this consumer. unmarks
 * and ids are scratch of EMQ_SETTLE_MAX_IDS, kept for emq__marks_finish;
 * *mr says what went. Upkeep thread. */
emq_status emq__marks_append(emq_consumer_t *c, emq__session *x, int64_t now_ms,
                             int64_t round_ms, emq_id *unmarks, emq_id *ids,
                             emq__marks_round *mr, emq_error *err);
/* Applies a reply tagged in the block EMQ_TAGS_MARKS. A refused mark or
 * removal (an ACL) costs exactness of a count after a crash, never work:
 * logged, and the round goes on. */
void emq__marks_apply(emq_consumer_t *c, emq__marks_round *mr, int tag,
                      const emq_reply *reply);
/* After the round (st: its transport status): the removals' tickets are
 * done when their reply came, else they go again, first; marks whose
 * reply did not come, or said "not now", go again in the next round.
 * Upkeep thread. */
void emq__marks_finish(emq_consumer_t *c, const emq__marks_round *mr,
                       emq_status st, const emq_id *unmarks, const emq_id *ids);

#endif
