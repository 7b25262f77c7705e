/* SPDX-License-Identifier: BSD-3-Clause */
/* grant.h: what a read of new entries may take (grant.c): the group's
 * rate and in-flight limits, kept in the server, and the queue's
 * priorities, whose held entries the same read hands out. */
#ifndef EMQ_CONSUMER_GRANT_H
#define EMQ_CONSUMER_GRANT_H

#include "core.h"
#include "tags.h"

/* At a session's start (read session, after the door): records this
 * consumer's rate.limit and group.max_in_flight in the group's limits
 * hash where none is recorded, reads what is, warns once when they differ
 * (the server's win), and sets c->limited when any limit is recorded.
 * One round trip. An error reply (an ACL without HSETNX/HMGET) with no
 * limit configured leaves the consumer unlimited (logged at debug); with
 * one configured it fails the start (EMQ_ESERVER naming the key). */
emq_status emq__grant_start(emq_consumer_t *c, emq_error *err);

/* Words of the grant read: EVAL, the script, its keys and arguments, for
 * at most want entries (want_text its decimal). argv has room for
 * EMQ_GRANT_ARGC words. */
#define EMQ_GRANT_ARGC 20
void emq__grant_read_argv(const emq_consumer_t *c, const char *want_text,
                          const char *argv[EMQ_GRANT_ARGC]);

/* What a grant read answered. */
typedef struct emq__grant {
    int64_t granted;          /* entries the limits allowed this time */
    int64_t wait_ms;          /* granted 0: how long until the rate allows
                                 one (-1: until a settlement, the
                                 in-flight limit) */
    const emq_reply *entries; /* the XREADGROUP reply inside, or NULL
                                 (nothing new; borrowed from the reply) */
    char last_id[EMQ_ID_MAX]; /* nothing new: the stream's last ID, to
                                 wait for the next one from ("0-0" when
                                 empty) */
    char bell_id[EMQ_ID_MAX]; /* and the bell's, to wait for the next held
                                 entry from */
    int marked;               /* the entries got unseen marks in the read
                                 (deliveries.exact) */
} emq__grant;

/* Reads a grant read's reply into *g. EMQ_EPROTO for another shape; an
 * error reply is the caller's to read first. */
emq_status emq__grant_reply(const emq_reply *reply, emq__grant *g,
                            emq_error *err);

/* How often the upkeep looks whether the group's limits appeared or went
 * (echomq group limits on a running group). */
#define EMQ_GRANT_LOOK_MS 2000
/* Appends that look (HMGET of the limits hash; GET of the queue's
 * priority record; tagged in the block EMQ_TAGS_GRANT) to x when it is
 * due at now; *sent says whether it went. Upkeep thread. */
emq_status emq__grant_append_look(emq_consumer_t *c, emq__session *x,
                                  int64_t now, int *sent, emq_error *err);
/* Applies a reply of the look, tagged tag (in the block EMQ_TAGS_GRANT,
 * tags.h): the limits hash, c->limited following the server; or the
 * queue's priority record, c->prioritized following it. Each change is
 * said at level info; an error reply changes nothing. */
void emq__grant_looked(emq_consumer_t *c, int tag, const emq_reply *reply);

/* Logs n entries handed out again (due retries, claims, own pending
 * taken back) as hand-outs of a limited group with a rate, so the reads
 * of new entries that follow make room for them. One round trip on the
 * read session; nothing when the group has no limit (c->limited 0). The
 * entries themselves are not held back. An error reply is logged
 * (debug) and changes nothing. */
emq_status emq__grant_count(emq_consumer_t *c, const emq_id *ids, size_t n,
                            emq_error *err);

#endif /* EMQ_CONSUMER_GRANT_H */
