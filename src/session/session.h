/* SPDX-License-Identifier: BSD-3-Clause */
/* session.h: one connection to a queue's server that recovers by itself,
 * shared by the consumer, the producer and admin (session.c).
 *
 * Internal header (not installed). A session is a route (one connection,
 * or the cluster master of the queue's slot) plus the one failure policy
 * of echomq:
 *
 *   - replies that mean "not now" (LOADING, BUSY, TRYAGAIN, CLUSTERDOWN,
 *     MISCONF, NOREPLICAS; OOM when asked) are waited out with
 *     backoff and the command sent again: the server did not run it;
 *   - a READONLY or MASTERDOWN reply (the node is a replica) is a
 *     transport-like failure, EMQ_EIO retriable: the caller reconnects;
 *   - reconnecting backs off by the number of consecutive failed
 *     sessions (a server that accepts and then breaks every connection is
 *     not hammered), through the one retry primitive (conn/backoff.c),
 *     and fails at once on a password, a certificate or a configuration;
 *   - a connection that went away while idle (a server restart) is
 *     replaced before the next command goes out (emq__session_ready);
 *   - failures are logged once per episode; every round trip, reconnect,
 *     wait and redirection is counted.
 *
 * Where the handles differ, the options say so: what ends the waits (a
 * consumer's stop), whether reconnecting is bounded (admin: by
 * reconnect.max_attempts) or goes on until a stop (consumer), how long a
 * "not now" is waited out. A session is used by one thread at a time.
 */
#ifndef EMQ_SESSION_H
#define EMQ_SESSION_H

#include "../streams/streams.h" /* layers below: keys, cluster, conn, resp */

#include <stdatomic.h>

/* Where a session adds what it did; any pointer may be NULL (not
 * counted). The counters are the owner's, updated atomically. */
typedef struct emq__session_counts {
    atomic_uint_fast64_t *round_trips;     /* sends that awaited replies */
    atomic_uint_fast64_t *reconnects;      /* sessions re-established */
    atomic_uint_fast64_t *server_waits;    /* "not now" episodes waited */
    atomic_uint_fast64_t *redirects;       /* MOVED and ASK followed */
    atomic_uint_fast64_t *cluster_retries; /* TRYAGAIN, CLUSTERDOWN */
    atomic_uint_fast64_t *cluster_gave_up; /* a route bound ended one */
} emq__session_counts;

/* How a session logs: message is one sentence about the session (it
 * names the session by opts.what); level an emq_log_level. */
typedef void (*emq__session_log_fn)(void *ctx, int level, const char *message);

typedef struct emq__session_opts {
    const char *what;        /* "read", "upkeep", "admin": in log lines */
    const char *client_name; /* CLIENT SETNAME on every connection; NULL:
                                the configuration's client_name */
    /* The waits (backoff, "not now") end once *stop[0] or *stop[1] is
     * non-zero (NULL: not watched); a reply overdue by
     * EMQ_SESSION_STOP_GRACE_MS once *stop[0] is set is given up with its
     * connection. */
    const atomic_int *stop[2];
    /* Called (NULL: nothing) once a wait for the reply of a blocking
     * command sees *stop[0] set (emq__conn_cancel.on_stop), from the
     * waiting thread. */
    void (*on_stop)(void *ctx);
    void *on_stop_ctx;
    /* With on_stop: a descriptor that turns readable when *stop[0] is
     * set, so that such a wait sees the stop at once
     * (emq__conn_cancel.wake_fd); -1: none. */
    int on_stop_fd;
    /* 1: learn each connection's id (emq__route_client_id). */
    int learn_client_id;
    /* 0: emq__session_reconnect (and the first connection, with
     * connect_wait) tries until it works or a stop; else at most this
     * many attempts per call. */
    int64_t max_attempts;
    /* 1: the first connection waits for a server that does not answer
     * yet like a later reconnect does (consumer.connect wait); 0: the
     * first attempt's failure is returned. */
    int connect_wait;
    /* How long one call waits out "not now" replies before it returns
     * the last one (0: EMQ_SESSION_NOT_NOW_MS). */
    int64_t not_now_ms;
    /* The connect and command timeouts at most this (0: the
     * configuration's): the producer keeps every wait within one call's
     * producer.timeout_ms. */
    int64_t timeout_ms;
    /* The command timeout alone at most this (0: no further cap): the
     * consumer's upkeep gives up on a round that did not answer within
     * its refresh period and sends it again on a new connection, whatever
     * held the old one up. */
    int64_t reply_timeout_ms;
    emq__session_log_fn log; /* NULL: nothing logged */
    void *log_ctx;
    emq__session_counts counts;
} emq__session_opts;

/* A reply overdue by this long, once a stop was asked, is given up. */
#define EMQ_SESSION_STOP_GRACE_MS 500
/* How long one call waits out "not now" replies by default. */
#define EMQ_SESSION_NOT_NOW_MS (5 * 60 * 1000)

/* The most commands emq__session_send_after keeps owed at once. */
#define EMQ_SESSION_AHEAD_MAX 2

/* Flags of emq__session_call, _pipeline and _drain_n. */
#define EMQ_SESSION_WAIT_OOM                                                   \
    1u /* also wait out OOM (reads, acks and a consumer session's start:       \
          never a producer's write, whose caller hears of it) */
#define EMQ_SESSION_EACH                                                       \
    2u /* drain_n: every command's outcome goes to                             \
          apply, a failed one's as a NULL reply */

typedef struct emq__session {
    emq__session_opts o;
    const emq_conf_t *conf; /* borrowed: backoff bounds, route options */
    emq__route *route;
    int *tags; /* tag of each appended command whose reply is unread */
    size_t ntags, tags_cap;
    unsigned failures;        /* consecutive failed sessions: backoff before
                                 the next reconnect; reset by
                                 emq__session_healthy */
    int demoted;              /* a READONLY reply (or an FCALL that found
                                 no function) was read: the next
                                 emq__session_ready reconnects */
    uint64_t functions_told;  /* why scripts go by EVAL, last said */
    uint64_t rng;             /* backoff jitter */
    char last_reason[48];     /* why the last session failed (logged once) */
    int64_t last_warned_ms;   /* when a failure of it was last a warning */
    emq__route_stats counted; /* the route's counters already added to the
                                 owner's (count_route) */
    atomic_int reconnecting;  /* emq__session_reconnecting */
    /* Commands sent by emq__session_send_after whose replies are owed,
     * oldest first: how many appended commands went before each. */
    size_t nahead;
    size_t ahead_tags[EMQ_SESSION_AHEAD_MAX];
} emq__session;

/* Applies the reply of one appended command (tag as given to append).
 * Returns EMQ_OK or a fatal error. With EMQ_SESSION_EACH, reply is NULL
 * for a command that failed alone (a route's bound, or READONLY: not
 * run) and *err says why on entry. */
typedef emq_status (*emq__session_apply_fn)(void *ctx, int tag,
                                            const emq_reply *reply,
                                            emq_error *err);

/* Connects s to the server of key (the master of its slot on a cluster)
 * with conf's connection settings and opts (copied; the strings and
 * counters they point to must outlive s). With opts.connect_wait a server
 * that does not answer yet is waited for, with backoff, until a stop; a
 * password, certificate or configuration error ends it at once. On
 * failure s holds nothing (emq__session_close is still safe). */
emq_status emq__session_open(emq__session *s, const emq_conf_t *conf,
                             const char *key, const emq__session_opts *opts,
                             emq_error *err);
void emq__session_close(emq__session *s);
/* 1 once the session's waits should end (see opts.stop). */
int emq__session_halted(const emq__session *s);
/* 1 while emq__session_reconnect replaces s's connection (from the
 * failure it follows until one is back, or the call gives up), else 0:
 * whether the owner's commands can reach the server now. Any thread. */
int emq__session_reconnecting(const emq__session *s);
/* Sleeps ms, or less once emq__session_halted. */
void emq__session_nap(emq__session *s, int64_t ms);
/* Makes sure the next command goes out on a live connection: when the
 * route is broken, went away while idle (emq__route_went_away), or its
 * server answered READONLY, it
 * reconnects (emq__session_reconnect) and logs why. EMQ_OK, or the
 * reconnect's failure. Cheap (a poll of zero ms) when all is well. */
emq_status emq__session_ready(emq__session *s, emq_error *err);
/* Appends a command whose reply emq__session_drain reads. EMQ_ELIMIT past
 * pipeline.max. */
emq_status emq__session_append(emq__session *s, int tag, int argc,
                               const char *const *argv, const size_t *argvlen,
                               emq_error *err);
/* Sends what is appended and reads every reply in order, passing each to
 * apply. A transport failure is returned at once (the rest is lost with
 * the connection); the first fatal apply result (or the first failure of
 * a command alone, emq__route_only_this_failed) is returned after all
 * replies were read, so the connection stays in step. A READONLY reply
 * (the server was demoted; the command did not run) is not applied: it
 * fails the drain with EMQ_EIO, retriable, and the next
 * emq__session_ready reconnects. */
emq_status emq__session_drain(emq__session *s, emq__session_apply_fn apply,
                              void *ctx, emq_error *err);
/* Like emq__session_drain for the first n appended commands only (at most
 * as many as are appended); the later ones stay appended, their replies
 * to a later drain, so a caller can keep two rounds on the wire. With
 * EMQ_SESSION_EACH in flags, a command that failed alone (a route's
 * bound, READONLY) goes to apply as a NULL reply instead of failing the
 * drain; a READONLY still makes the drain return EMQ_EIO once every
 * reply was read. */
emq_status emq__session_drain_n(emq__session *s, size_t n, unsigned flags,
                                emq__session_apply_fn apply, void *ctx,
                                emq_error *err);
/* Commands appended whose replies are not read yet. */
size_t emq__session_pending(const emq__session *s);
/* One command and its reply (caller frees *reply); nothing may be
 * appended. A reply meaning "not now" is waited out with backoff and the
 * command sent again, logged once per episode, until it clears, a stop,
 * or opts.not_now_ms; then the last reply is returned as it is. READONLY:
 * EMQ_EIO, retriable. Error replies are otherwise returned as replies. */
emq_status emq__session_call(emq__session *s, unsigned flags, int argc,
                             const char *const *argv, const size_t *argvlen,
                             emq_reply **reply, emq_error *err);
/* Like emq__session_call, after the commands appended so far: their
 * replies go to apply (as emq__session_drain), then the command's own is
 * returned, in the same round trip. */
emq_status emq__session_call_after(emq__session *s, unsigned flags, int argc,
                                   const char *const *argv,
                                   const size_t *argvlen,
                                   emq__session_apply_fn apply, void *ctx,
                                   emq_reply **reply, emq_error *err);
/* Appends argv after the commands appended so far and sends them all
 * now, without reading a reply: the server works on them while the caller
 * does something else. Their replies are read by emq__session_receive,
 * one call per send, oldest first, before any other call on s. At most
 * EMQ_SESSION_AHEAD_MAX are owed at once (EMQ_EINVAL past it). */
emq_status emq__session_send_after(emq__session *s, int argc,
                                   const char *const *argv,
                                   const size_t *argvlen, emq_error *err);
/* 1 when the whole reply of the oldest command sent ahead is in, read
 * for up to ms (0: never waiting), or the connection failed, or a stop
 * was asked; 0 while more of it must come (emq__route_reply_whole; 1 at
 * once on a cluster). Only the next reply is looked at: the caller sent
 * nothing appended before the command, or has read their replies. */
int emq__session_reply_whole(emq__session *s, int64_t ms);
/* Reads the replies of the oldest emq__session_send_after still owed:
 * the commands appended before it go to apply (as emq__session_drain),
 * its own into
 * *reply (caller frees). A reply meaning "not now" (see
 * emq__session_call; flags as there) is freed and *reply is NULL: the
 * command did not run, the caller sends it again when it wants. READONLY:
 * EMQ_EIO, retriable. A transport failure: the session reconnects as
 * after any call. */
emq_status emq__session_receive(emq__session *s, unsigned flags,
                                emq__session_apply_fn apply, void *ctx,
                                emq_reply **reply, emq_error *err);
/* How many commands sent by emq__session_send_after are still owed. */
size_t emq__session_owed(const emq__session *s);
/* One command of a pipeline (argvlen NULL: NUL-terminated strings). */
typedef struct emq__session_cmd {
    int argc;
    const char *const *argv;
    const size_t *argvlen;
} emq__session_cmd;

/* The most commands one emq__session_pipeline sends. */
#define EMQ_SESSION_PIPELINE_MAX 256

/* Sends n commands (at most EMQ_SESSION_PIPELINE_MAX) in one round trip
 * and stores their n replies in replies[] (caller frees each; error
 * replies are data here, not a failure). A command answered "not now"
 * (see emq__session_call; flags as there) did not run: it alone is sent
 * again after a pause, until it runs, a stop or opts.not_now_ms (then
 * that reply stays); so when the server was busy, a command may run after
 * ones that followed it. On a transport failure every reply already read
 * is freed, all of replies[] is NULL, and the status says what broke.
 * Nothing may be appended before. */
emq_status emq__session_pipeline(emq__session *s, unsigned flags, size_t n,
                                 const emq__session_cmd *cmds,
                                 emq_reply **replies, emq_error *err);
/* Reconnects: capped jittered backoff by the number of consecutive failed
 * sessions, in naps a stop ends, until it works, a stop (EMQ_ECLOSED) or
 * opts.max_attempts. Fails at once on authentication, TLS and
 * configuration errors. */
emq_status emq__session_reconnect(emq__session *s, emq_error *err);
/* Records that the connection did useful work (resets the backoff). */
void emq__session_healthy(emq__session *s);
/* When the last reply read began to arrive (emq__conn_reply_began_ms):
 * what the server did in that command is at least this old. */
int64_t emq__session_reply_began_ms(const emq__session *s);
/* Logs that s failed (why) and that it reconnects: a warning when an
 * episode starts (a reason unlike the last one, or the first failure
 * after a healthy stretch with no warning for EMQ_SESSION_EPISODE_QUIET_MS),
 * else debug. */
void emq__session_log_failure(emq__session *s, const char *why);
/* 1 for the failures after which a session reconnects: the transport
 * failures, and a route's bound (emq__session_cluster_bound), since a
 * fresh connection fetches the cluster's slot map again. err may be
 * NULL. */
int emq__session_reconnect_cures(emq_status st, const emq_error *err);
/* 1 when st and err are a route's own bound (cluster.max_redirects or
 * cluster.retry_ms: EMQ_ELIMIT quoting the last reply), not a local
 * limit. */
int emq__session_cluster_bound(emq_status st, const emq_error *err);
/* 1 when st (EMQ_EPROTO) from a call or drain of s means that a reply
 * grew past resp.max_reply_bytes: the server answered a well-formed but
 * too large reply, which a request for fewer entries may avoid, not that
 * the peer broke the protocol. Ask before s reconnects. */
int emq__session_too_large(const emq__session *s, emq_status st);
/* 1 when r is an error reply that means "not now" (see
 * emq__session_call): emq__reply_transient, or OOM with
 * EMQ_SESSION_WAIT_OOM. */
int emq__reply_not_now(const emq_reply *r, unsigned flags);
/* 1 when the session's connection (to the queue's slot) calls scripts
 * by FCALL: its handshake found src/scripts' library there, or loaded it.
 * Pass to emq__script_head for each command built, after
 * emq__session_ready (a reconnect may change it). */
int emq__session_functions(const emq__session *s);
/* 1 when r is an ACL refusal (NOPERM), also one inside a script. */
int emq__reply_refused(const emq_reply *r);

#endif /* EMQ_SESSION_H */
