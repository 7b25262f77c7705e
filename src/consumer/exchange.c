/* SPDX-License-Identifier: BSD-3-Clause */
/* exchange.c: one connection of a consumer, as a pipelined exchange.
 *
 * The lowest file of the consumer folder that talks to the server (only
 * the in-flight table and core.c lie below it). A consumer has two
 * exchanges: the run thread's (door, recovery, reads) and the upkeep
 * thread's (refresh, lease, settlements); each is used by one thread
 * only. An exchange sends single commands (call), or appends tagged
 * commands and reads their replies in order (drain). Replies that mean
 * "not now" are waited out here, stop-aware; reconnecting backs off by
 * the number of consecutive failed sessions, so a server that accepts
 * connections and then breaks every one of them (READONLY, a malformed
 * reply) is not hammered.
 */
#include "exchange.h"
#include "core.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* How overdue a reply may be, once a stop was asked, before it is given
 * up. */
#define STOP_GRACE_MS 500

/* The stop predicate of the naps and retries (emq__nap, emq__retry). */
static int xchg_halted(void *x) { return emq__xchg_halted(x); }

int emq__xchg_halted(const emq__xchg *x) {
    if (x->halt != NULL)
        return atomic_load(x->halt) || atomic_load(&x->c->fatal);
    return emq__consumer_stopping(x->c);
}

void emq__xchg_nap(emq__xchg *x, int64_t ms) { emq__nap(ms, xchg_halted, x); }

/* ---- classification ------------------------------------------------------ */

int emq__reply_not_now(const emq_reply *r, unsigned flags) {
    return emq__reply_transient(r) ||
           ((flags & EMQ_XCHG_WAIT_OOM) && emq__reply_mentions(r, "OOM"));
}

int emq__xchg_reconnect_cures(emq_status st, const emq_error *err) {
    return st == EMQ_EIO || st == EMQ_ETIMEDOUT || st == EMQ_ECLOSED ||
           st == EMQ_EPROTO || emq__xchg_cluster_bound(st, err);
}

int emq__xchg_cluster_bound(emq_status st, const emq_error *err) {
    /* A local limit has no reply; the route's bounds quote the last. */
    return st == EMQ_ELIMIT && err != NULL && err->reply_code[0] != '\0';
}

int emq__xchg_too_large(const emq__xchg *x, emq_status st) {
    return st == EMQ_EPROTO && emq__route_reply_too_large(x->route);
}

/* 1 when needle occurs in text[0..len). */
static int text_has(const char *text, size_t len, const char *needle) {
    size_t n = strlen(needle);
    for (size_t i = 0; text != NULL && i + n <= len; i++)
        if (memcmp(text + i, needle, n) == 0)
            return 1;
    return 0;
}

int emq__reply_refused(const emq_reply *r) {
    if (emq__reply_mentions(r, "NOPERM"))
        return 1;
    /* The words of an ACL refusal inside a script: 7.0 "The user executing
     * the script can't run this command", 7.2 and Valkey "ACL failure in
     * script: User ... has no permissions". */
    size_t len;
    const char *text = emq_reply_str(r, &len);
    return text_has(text, len, "can't run this command") ||
           text_has(text, len, "ACL failure in script");
}

/* ---- open, append, drain -------------------------------------------------- */

emq_status emq__xchg_open(emq__xchg *x, emq_consumer_t *c, const char *what,
                          atomic_int *halt, emq_error *err) {
    memset(x, 0, sizeof *x);
    x->c = c;
    x->what = what;
    x->halt = halt;
    x->rng = (uint64_t)emq__now_ms() ^ (uint64_t)(uintptr_t)x;
    emq_status st;
    /* consumer.connect wait: a server that does not answer yet is waited
     * for like a later reconnect (backoff naps a stop ends), so workers
     * started before their server do not crash-loop. A refusal that will
     * not change by itself (a password, a certificate, a bad URL) still
     * ends the start at once. */
    emq__retry retry;
    emq__retry_begin(&retry, emq__cfg_backoff_min_ms(c->conf),
                     emq__cfg_backoff_max_ms(c->conf), 0, -1, &x->rng);
    emq__retry_stop_when(&retry, xchg_halted, x, 1);
    int stopped = 1; /* the retrying ended by a stop, not by a result */
    /* Both connections are named after the consumer (contract 3).
     * Reconnecting never ends on its own (the consumer keeps trying until
     * stopped), so the route makes single attempts and the exchange sleeps
     * the backoff where a stop can cut it short. */
    emq__route_options opts;
    emq__route_options_of(c->conf, &opts);
    opts.conn.client_name = c->name;
    opts.conn.max_attempts = 1;
    while (emq__retry_next(&retry)) {
        st = emq__route_open(&opts, c->keys.stream, &x->route, err);
        if (st == EMQ_OK || !emq__cfg_consumer_connect_wait(c->conf) ||
            st == EMQ_EAUTH || st == EMQ_EINVAL || st == EMQ_ETLS ||
            st == EMQ_ENOMEM) {
            stopped = 0;
            break;
        }
        emq__consumer_log(c,
                          retry.attempt == 1 ? EMQ_LOG_WARNING : EMQ_LOG_DEBUG,
                          "%s connection: %s; waiting for the server "
                          "(consumer.connect wait)",
                          what, err ? err->message : emq_strerror(st));
    }
    if (stopped)
        st = emq__error_set(err, EMQ_ECLOSED, 0,
                            "stopped while waiting for the server");
    /* A stop is not held up by a stalled server: a reply overdue by
     * STOP_GRACE_MS once it was asked is given up (the connection with it;
     * what it would have delivered stays pending to this name). */
    if (st == EMQ_OK)
        emq__route_set_cancel(x->route, halt ? halt : &c->stop, STOP_GRACE_MS);
    return st;
}

/* Adds what the route did since the last count to the consumer's cluster
 * counters. Called before each use of the route and at its close, so every
 * redirection is counted by the time the consumer stops. */
static void count_route(emq__xchg *x) {
    if (x->route == NULL)
        return;
    emq__route_stats now;
    emq__route_stats_get(x->route, &now);
    const emq__route_stats *was = &x->counted;
    uint64_t redirects = now.redirects_moved - was->redirects_moved +
                         now.redirects_ask - was->redirects_ask;
    uint64_t retries =
        now.tryagain - was->tryagain + now.clusterdown - was->clusterdown;
    stats_counters *s = &x->c->stats;
    atomic_fetch_add(&s->redirects, redirects);
    atomic_fetch_add(&s->cluster_retries, retries);
    atomic_fetch_add(&s->cluster_gave_up, now.gave_up - was->gave_up);
    x->counted = now;
}

void emq__xchg_close(emq__xchg *x) {
    count_route(x);
    emq__route_destroy(x->route);
    emq__free(x->tags);
    x->route = NULL;
    x->tags = NULL;
    x->ntags = x->tags_cap = 0;
}

emq_status emq__xchg_append(emq__xchg *x, int tag, int argc,
                            const char *const *argv, const size_t *argvlen,
                            emq_error *err) {
    if (x->ntags == x->tags_cap) {
        size_t cap = x->tags_cap ? x->tags_cap * 2 : 16;
        int *t = emq__realloc(x->tags, cap * sizeof *t);
        if (t == NULL)
            return emq__oom(err);
        x->tags = t;
        x->tags_cap = cap;
    }
    emq_status st = emq__route_append(x->route, argc, argv, argvlen, err);
    if (st == EMQ_OK)
        x->tags[x->ntags++] = tag;
    return st;
}

emq_status emq__xchg_drain(emq__xchg *x, emq__xchg_apply_fn apply, void *ctx,
                           emq_error *err) {
    emq_status result = EMQ_OK;
    size_t n = x->ntags;
    x->ntags = 0;
    if (n == 0)
        return EMQ_OK;
    count_route(x);
    atomic_fetch_add(&x->c->stats.round_trips, 1);
    for (size_t i = 0; i < n; i++) {
        emq_reply *reply;
        emq_error rerr;
        emq_status st = emq__route_get_reply(x->route, &reply, &rerr);
        if (emq__route_only_this_failed(x->route, st)) {
            if (result == EMQ_OK) { /* that command alone: keep reading */
                result = st;
                if (err)
                    *err = rerr;
            }
            continue;
        }
        if (st != EMQ_OK) {
            if (err)
                *err = rerr;
            return st;
        }
        emq_error aerr;
        st = apply(ctx, x->tags[i], reply, &aerr);
        emq_reply_free(reply);
        if (st != EMQ_OK && result == EMQ_OK) {
            result = st; /* keep reading so the pipeline stays in step */
            if (err)
                *err = aerr;
        }
    }
    return result;
}

/* ---- call with the "not now" wait ----------------------------------------- */

/* A server that is loading, running a long script, failing to persist,
 * short of replicas or part of a rehashing cluster answers with an error
 * and does not run the command, so sending it again is safe. This is how
 * long one call keeps trying before the error is returned. */
#define NOT_NOW_WAIT_MS (5 * 60 * 1000)
#define NOT_NOW_PAUSE_MIN_MS 50
#define NOT_NOW_PAUSE_MAX_MS 1000

emq_status emq__xchg_call(emq__xchg *x, unsigned flags, int argc,
                          const char *const *argv, const size_t *argvlen,
                          emq_reply **reply, emq_error *err) {
    emq_consumer_t *c = x->c;
    int64_t began = emq__now_ms();
    count_route(x);
    /* A stop cuts a pause short; the command is sent once more and its
     * reply returned, whatever it is. */
    emq__retry retry;
    emq__retry_begin(&retry, NOT_NOW_PAUSE_MIN_MS, NOT_NOW_PAUSE_MAX_MS, 0, -1,
                     &x->rng);
    emq__retry_stop_when(&retry, xchg_halted, x, 0);
    while (emq__retry_next(&retry)) {
        atomic_fetch_add(&c->stats.round_trips, 1);
        emq_error e;
        emq_status st =
            emq__route_command(x->route, argc, argv, argvlen, reply, &e);
        /* A TRYAGAIN or CLUSTERDOWN that outlasted cluster.retry_ms is
         * still "not now": the command was not run. */
        int bound = emq__route_only_this_failed(x->route, st) && e.retriable;
        if (st != EMQ_OK && err)
            *err = e;
        if (st != EMQ_OK && !bound)
            return st;
        if (st == EMQ_OK && emq__reply_mentions(*reply, "READONLY")) {
            /* Every command of a consumer writes: the server was demoted
             * to a replica, so find the master (the caller reconnects). */
            char shown[160];
            emq__reply_text(*reply, shown, sizeof shown);
            emq_reply_free(*reply);
            *reply = NULL;
            return emq__error_set(err, EMQ_EIO, 1,
                                  "server is a read-only replica (%s)", shown);
        }
        if (st == EMQ_OK && !emq__reply_not_now(*reply, flags))
            break;
        if (emq__xchg_halted(x) || emq__now_ms() - began >= NOT_NOW_WAIT_MS)
            return st; /* the caller sees the error reply, or the bound */
        if (retry.attempt == 1) {
            char shown[160];
            atomic_fetch_add(&c->stats.server_waits, 1);
            emq__consumer_log(
                c, EMQ_LOG_WARNING, "server not ready for %s (%s); waiting",
                argv[0],
                bound ? e.message
                      : emq__reply_text(*reply, shown, sizeof shown));
        }
        emq_reply_free(*reply);
        *reply = NULL;
    }
    if (retry.attempt > 1)
        emq__consumer_log(c, EMQ_LOG_INFO, "%s went through after %lld ms",
                          argv[0], (long long)(emq__now_ms() - began));
    return EMQ_OK;
}

emq_status emq__xchg_call_after(emq__xchg *x, unsigned flags, int argc,
                                const char *const *argv, const size_t *argvlen,
                                emq__xchg_apply_fn apply, void *ctx,
                                emq_reply **reply, emq_error *err) {
    *reply = NULL;
    if (x->ntags == 0)
        return emq__xchg_call(x, flags, argc, argv, argvlen, reply, err);
    emq_status st = emq__route_append(x->route, argc, argv, argvlen, err);
    if (st != EMQ_OK)
        return st;
    emq_error derr;
    emq_status drained = emq__xchg_drain(x, apply, ctx, &derr);
    if (drained != EMQ_OK && emq__route_is_broken(x->route)) {
        if (err)
            *err = derr;
        return drained;
    }
    /* The command's own reply, also after a fatal apply: in step. */
    if ((st = emq__route_get_reply(x->route, reply, err)) != EMQ_OK)
        return st;
    if (drained != EMQ_OK) {
        emq_reply_free(*reply);
        *reply = NULL;
        if (err)
            *err = derr;
        return drained;
    }
    if (!emq__reply_not_now(*reply, flags) &&
        !emq__reply_mentions(*reply, "READONLY"))
        return EMQ_OK;
    /* Not run: again, alone, with the wait. */
    emq_reply_free(*reply);
    *reply = NULL;
    return emq__xchg_call(x, flags, argc, argv, argvlen, reply, err);
}

/* ---- reconnect ---------------------------------------------------------------- */

void emq__xchg_healthy(emq__xchg *x) { x->failures = 0; }

/* A failure like the last warned one within this long is the same
 * episode (a connection cut again and again): logged at debug. */
#define EMQ_XCHG_EPISODE_QUIET_MS 10000

/* 1 when why starts a new episode of failures of x (and records it). */
static int episode_news(emq__xchg *x, const char *why) {
    int64_t now = emq__now_ms();
    int differs = strncmp(why, x->last_reason, sizeof x->last_reason - 1) != 0;
    int news = differs ||
               (x->failures == 0 &&
                now - x->last_warned_ms >= EMQ_XCHG_EPISODE_QUIET_MS);
    size_t keep = strlen(why) < sizeof x->last_reason
                      ? strlen(why)
                      : sizeof x->last_reason - 1;
    memcpy(x->last_reason, why, keep);
    x->last_reason[keep] = '\0';
    if (news)
        x->last_warned_ms = now;
    return news;
}

void emq__xchg_log_failure(emq__xchg *x, const char *why) {
    int news = episode_news(x, why);
    emq__consumer_log(x->c, news ? EMQ_LOG_WARNING : EMQ_LOG_DEBUG,
                      "%s connection failed (%s); reconnecting", x->what,
                      why);
}

emq_status emq__xchg_reconnect(emq__xchg *x, emq_error *err) {
    emq_consumer_t *c = x->c;
    x->ntags = 0;
    /* The route makes one attempt per call (its options say
     * max_attempts 1, emq__xchg_open); the backoff happens here, in naps a stop
     * ends early. A session that failed again right after connecting
     * counts as a failed attempt too. */
    emq__retry retry;
    emq__retry_begin(&retry, emq__cfg_backoff_min_ms(c->conf),
                     emq__cfg_backoff_max_ms(c->conf), 0, -1, &x->rng);
    emq__retry_stop_when(&retry, xchg_halted, x, 1);
    retry.attempt = x->failures; /* the count goes on across sessions */
    while (emq__retry_next(&retry) && !emq__xchg_halted(x)) {
        if (x->failures < 64)
            x->failures++;
        emq_error why;
        emq_status st = emq__route_reconnect(x->route, &why);
        if (st == EMQ_OK) {
            atomic_fetch_add(&c->stats.reconnects, 1);
            emq__consumer_log(c, EMQ_LOG_INFO, "%s connection re-established",
                              x->what);
            return EMQ_OK;
        }
        if (st == EMQ_EAUTH || st == EMQ_EINVAL || st == EMQ_ETLS) {
            if (err)
                *err = why;
            return st;
        }
        /* Once per episode: the first attempt that fails says so. */
        emq__consumer_log(c,
                          x->failures <= 1 ? EMQ_LOG_WARNING : EMQ_LOG_DEBUG,
                          "%s reconnect failed, retrying: %s", x->what,
                          why.message);
    }
    return emq__error_set(err, EMQ_ECLOSED, 0, "stopped");
}
