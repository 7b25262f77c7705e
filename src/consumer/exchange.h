/* SPDX-License-Identifier: BSD-3-Clause */
/* exchange.h: one connection of a consumer as a pipelined exchange
 * (exchange.c). The struct itself is part of the consumer (core.h).
 */
#ifndef EMQ_CONSUMER_EXCHANGE_H
#define EMQ_CONSUMER_EXCHANGE_H

#include "core.h"

/* Applies the reply of one appended command (tag as given to append).
 * Returns EMQ_OK or a fatal error. */
typedef emq_status (*emq__xchg_apply_fn)(void *ctx, int tag,
                                         const emq_reply *reply,
                                         emq_error *err);

/* Flags of emq__xchg_call. */
#define EMQ_XCHG_WAIT_OOM 1u /* also wait out OOM (reads and acks only) */

/* Logs that x's session failed (why) and that it reconnects: a warning
 * when an episode starts (a reason unlike the last one, or the first
 * failure after a healthy stretch with no warning for
 * EMQ_XCHG_EPISODE_QUIET_MS), else debug. The thread that owns x. */
void emq__xchg_log_failure(emq__xchg *x, const char *why);

/* Connects x for consumer c (one route to the queue's slot). halt: see
 * emq__xchg. */
emq_status emq__xchg_open(emq__xchg *x, struct emq_consumer *c,
                          const char *what, atomic_int *halt, emq_error *err);
/* 1 once the exchange's waits should end (see halt). */
int emq__xchg_halted(const emq__xchg *x);
/* Sleeps ms, or less once emq__xchg_halted. */
void emq__xchg_nap(emq__xchg *x, int64_t ms);
void emq__xchg_close(emq__xchg *x);
/* Appends a command whose reply emq__xchg_drain reads. EMQ_ELIMIT past
 * pipeline.max. */
emq_status emq__xchg_append(emq__xchg *x, int tag, int argc,
                            const char *const *argv, const size_t *argvlen,
                            emq_error *err);
/* Sends what is appended and reads every reply in order, passing each to
 * apply. A transport failure is returned at once (the rest is lost with
 * the connection); the first fatal apply result is returned after all
 * replies were read, so the connection stays in step. */
emq_status emq__xchg_drain(emq__xchg *x, emq__xchg_apply_fn apply, void *ctx,
                           emq_error *err);
/* Like emq__xchg_call, after the commands appended so far: their replies
 * go to apply (as emq__xchg_drain), then the command's own is returned, in
 * the same round trip. */
emq_status emq__xchg_call_after(emq__xchg *x, unsigned flags, int argc,
                                const char *const *argv, const size_t *argvlen,
                                emq__xchg_apply_fn apply, void *ctx,
                                emq_reply **reply, emq_error *err);
/* One command and its reply (caller frees *reply); nothing may be
 * appended. A reply meaning "not now" (LOADING, BUSY, TRYAGAIN,
 * CLUSTERDOWN, MASTERDOWN, MISCONF, NOREPLICAS; OOM with
 * EMQ_XCHG_WAIT_OOM) is waited out with backoff and the command sent
 * again, logged once per episode, until it clears, a stop, or five
 * minutes. */
emq_status emq__xchg_call(emq__xchg *x, unsigned flags, int argc,
                          const char *const *argv, const size_t *argvlen,
                          emq_reply **reply, emq_error *err);
/* Reconnects until it works or a stop: capped jittered backoff, by the
 * number of consecutive failed sessions, in naps a stop ends. Fails at
 * once on authentication, TLS and configuration errors. */
emq_status emq__xchg_reconnect(emq__xchg *x, emq_error *err);
/* Records that the connection did useful work (resets the backoff). */
void emq__xchg_healthy(emq__xchg *x);
/* 1 for the failures after which the consumer reconnects: the transport
 * failures, and a route's bound (emq__xchg_cluster_bound), since a fresh
 * connection fetches the cluster's slot map again. err may be NULL. */
int emq__xchg_reconnect_cures(emq_status st, const emq_error *err);
/* 1 when st and err are a route's own bound (cluster.max_redirects or
 * cluster.retry_ms: EMQ_ELIMIT quoting the last reply), not a local
 * limit. */
int emq__xchg_cluster_bound(emq_status st, const emq_error *err);
/* 1 when st (EMQ_EPROTO) from a call or drain of x means that a reply
 * grew past resp.max_reply_bytes (emq__route_reply_too_large): the
 * server answered a well-formed but too large reply, which a request for
 * fewer entries may avoid, not that the peer broke the protocol. Ask
 * before x reconnects. Thread: x's. */
int emq__xchg_too_large(const emq__xchg *x, emq_status st);
/* 1 when r is an error reply that means "not now" (see emq__xchg_call):
 * emq__reply_transient, or OOM with EMQ_XCHG_WAIT_OOM. */
int emq__reply_not_now(const emq_reply *r, unsigned flags);
/* 1 when r is an ACL refusal (NOPERM), also one inside a script. */
int emq__reply_refused(const emq_reply *r);

#endif /* EMQ_CONSUMER_EXCHANGE_H */
