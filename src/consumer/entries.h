/* SPDX-License-Identifier: BSD-3-Clause */
/* entries.h: entries out of replies, and handing them out (entries.c). */
#ifndef EMQ_CONSUMER_ENTRIES_H
#define EMQ_CONSUMER_ENTRIES_H

#include "core.h"

/* Entries of one read or claim. Owns the reply they point into. */
typedef struct batch {
    emq_reply *reply;
    batch_item *items;
    size_t n, cap;
    /* When the server handed the entries over, by our clock: the start
     * of the reply (emq__session_reply_began_ms), so that the time a
     * reply of megabytes took to arrive counts in their age. 0: now. */
    int64_t taken_ms;
} batch;

void emq__batch_init(batch *b);
/* Frees the reply and clears the items (keeps their storage). */
void emq__batch_clear(batch *b);
void emq__batch_free(batch *b);
/* Takes reply (ownership) and parses the entries array entries (inside
 * reply) into b. An entry whose fields are broken is kept, marked
 * malformed; an entry without a usable ID is EMQ_EPROTO. */
emq_status emq__batch_parse(batch *b, emq_reply *reply,
                            const emq_reply *entries, emq_error *err);
/* The entries array of an XREADGROUP reply for our stream (RESP2 array or
 * RESP3 map), or NULL when the reply holds none (null or empty). */
const emq_reply *emq__xread_entries(const emq_reply *reply, emq_error *err,
                                    emq_status *st);
/* Points out[0..n) (or, when out is NULL, c's scratch array) at item's
 * field name/value views, setting *nfields; marks item malformed (and
 * forgets its fields) when a name or value is not a string. ENOMEM only. */
emq_status emq__entry_fields(emq_consumer_t *c, batch_item *item,
                             emq_field *out, size_t *nfields, emq_error *err);
/* Puts the batch's entries in the in-flight table and hands them to the
 * handler one by one (pull mode: to the ready queue, taking the reply
 * from b) while the lease holds and no stop is asked; entries already
 * held (in the table before) are skipped. Returns EMQ_OK or a
 * fatal error. */
emq_status emq__batch_dispatch(emq_consumer_t *c, batch *b, emq_error *err);

#endif /* EMQ_CONSUMER_ENTRIES_H */
