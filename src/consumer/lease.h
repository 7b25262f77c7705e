/* SPDX-License-Identifier: BSD-3-Clause */
/* lease.h: one consumer name, one live process (lease.c). */
#ifndef EMQ_CONSUMER_LEASE_H
#define EMQ_CONSUMER_LEASE_H

#include "core.h"

/* Fills c->token with this process's identity. */
void emq__lease_make_token(emq_consumer_t *c);
/* Takes the lease on the consumer name through the read session. A lease
 * left by a dead process of this machine (same boot and PID namespace) is
 * taken over at once; one held by a live local process is refused at once;
 * one whose holder cannot be judged is waited for until it expires (at
 * most its TTL and a second), then refused. Refusals are EMQ_EINVAL naming
 * the holder. */
emq_status emq__lease_acquire(emq_consumer_t *c, emq_error *err);
/* 1 while the lease is known held (before its local deadline). */
int emq__lease_valid(emq_consumer_t *c);
/* The same at now_ms, a reading of emq__now_coarse_ms() the caller just
 * made. */
int emq__lease_valid_at(emq_consumer_t *c, int64_t now_ms);
/* Appends a renewal to x; emq__lease_renewed applies its reply. */
emq_status emq__lease_append_renew(emq_consumer_t *c, emq__session *x, int tag,
                                   emq_error *err);
/* Applies a renewal's reply, sent at sent_ms (upkeep thread): extends the
 * local deadline when the key held our token or was gone and is ours
 * again (logged, and the next acquire then does not count the name as
 * ours throughout); ends it and records a fatal error when another
 * process holds the name. An error reply changes nothing (logged): the
 * caller sends the renewal again. */
emq_status emq__lease_renewed(emq_consumer_t *c, const emq_reply *reply,
                              int64_t sent_ms, emq_error *err);
/* Deletes the lease if it is still ours (on stop). */
void emq__lease_release(emq_consumer_t *c, emq__session *x);

#endif /* EMQ_CONSUMER_LEASE_H */
