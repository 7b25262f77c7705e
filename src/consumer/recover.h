/* SPDX-License-Identifier: BSD-3-Clause */
/* recover.h: entries pending but not being worked: our own at the start
 * of a session, a dead peer's, and retries that are due, taken back
 * through one script that reads each entry and sets its delivery count
 * (recover.c); and the size of reads that fit resp.max_reply_bytes.
 * Run thread only.
 */
#ifndef EMQ_CONSUMER_RECOVER_H
#define EMQ_CONSUMER_RECOVER_H

#include "core.h"

/* Most XAUTOCLAIM calls one claim beat makes. A beat goes on only while
 * its calls claim something, so with nothing idle it costs one call. */
#define EMQ_CLAIM_CALLS_PER_BEAT 10

/* The reason a dead letter of an entry too large to receive gives. */
#define EMQ_OVERSIZE_REASON "entry larger than resp.max_reply_bytes"

/* Reads that fit: want, bounded by the size replies taught this run
 * (c->fit), at least 1 when want is. Run thread. */
size_t emq__fit(const emq_consumer_t *c, size_t want);
/* After a request of c->rx for asked entries (what: for the log) failed
 * with st: when the reply was larger than resp.max_reply_bytes
 * (emq__session_too_large), halves c->fit below asked (down to 1), says so
 * in the log (a warning the first time in a run), and returns 1; the
 * caller still returns st, so the session reconnects and the next
 * request asks for fewer. Otherwise returns 0 and changes nothing. Run
 * thread. */
int emq__fit_failed(emq_consumer_t *c, emq_status st, size_t asked,
                    const char *what);

/* Lists this consumer's own pending entries with XPENDING, page by page
 * from the start, and takes back those the in-flight table does not hold
 * (those with a retry delay left wait in the table), until the list ends,
 * pull mode has no room (EMQ_POST_RECOVER_SELF is posted to come back), the
 * lease is not valid, or stop. A NOGROUP sets c->nogroup. */
emq_status emq__recover_self(emq_consumer_t *c, emq_error *err);
/* One claim beat: XAUTOCLAIM following the saved cursor, at most
 * EMQ_CLAIM_CALLS_PER_BEAT calls, handling what it claims. */
emq_status emq__recover_peers(emq_consumer_t *c, emq_error *err);
/* Takes back and hands out again the table's retried entries whose delay
 * has passed, if they are still pending to this consumer. */
emq_status emq__recover_due(emq_consumer_t *c, emq_error *err);

#endif /* EMQ_CONSUMER_RECOVER_H */
