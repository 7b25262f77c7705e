/* SPDX-License-Identifier: BSD-3-Clause */
/* session.c: a connection that recovers by itself, and the one failure
 * policy of echomq (session.h says which).
 *
 * A session sends single commands (call), or appends tagged commands and
 * reads their replies in order (drain). Replies that mean "not now" are
 * waited out here, stop-aware; reconnecting backs off by the number of
 * consecutive failed sessions, so a server that accepts connections and
 * then breaks every one of them (READONLY, a malformed reply) is not
 * hammered.
 */
#include "session.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* ---- logging, counting, stopping ----------------------------------------- */

static void say(const emq__session *s, int level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void say(const emq__session *s, int level, const char *fmt, ...) {
    if (s->o.log == NULL)
        return;
    char message[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(message, sizeof message, fmt, ap);
    va_end(ap);
    s->o.log(s->o.log_ctx, level, message);
}

static void count(atomic_uint_fast64_t *counter, uint64_t n) {
    if (counter != NULL && n > 0)
        atomic_fetch_add(counter, n);
}

/* Adds what the route did since the last count to the owner's counters.
 * Called before each use of the route and at its close, so every
 * redirection is counted by the time the owner looks. */
static void count_route(emq__session *s) {
    if (s->route == NULL)
        return;
    emq__route_stats now;
    emq__route_stats_get(s->route, &now);
    const emq__route_stats *was = &s->counted;
    const emq__session_counts *k = &s->o.counts;
    count(k->redirects, now.redirects_moved - was->redirects_moved +
                            now.redirects_ask - was->redirects_ask);
    count(k->cluster_retries,
          now.tryagain - was->tryagain + now.clusterdown - was->clusterdown);
    count(k->cluster_gave_up, now.gave_up - was->gave_up);
    s->counted = now;
}

int emq__session_halted(const emq__session *s) {
    for (int i = 0; i < 2; i++)
        if (s->o.stop[i] != NULL && atomic_load(s->o.stop[i]))
            return 1;
    return 0;
}

/* The stop predicate of the naps and retries (emq__nap, emq__retry). */
static int session_halted(void *s) { return emq__session_halted(s); }

void emq__session_nap(emq__session *s, int64_t ms) {
    emq__nap(ms, session_halted, s);
}

/* ---- classification ------------------------------------------------------ */

int emq__reply_not_now(const emq_reply *r, unsigned flags) {
    return emq__reply_transient(r) ||
           ((flags & EMQ_SESSION_WAIT_OOM) && emq__reply_mentions(r, "OOM"));
}

int emq__session_reconnect_cures(emq_status st, const emq_error *err) {
    return st == EMQ_EIO || st == EMQ_ETIMEDOUT || st == EMQ_ECLOSED ||
           st == EMQ_EPROTO || emq__session_cluster_bound(st, err);
}

int emq__session_cluster_bound(emq_status st, const emq_error *err) {
    /* A local limit has no reply; the route's bounds quote the last. */
    return st == EMQ_ELIMIT && err != NULL && err->reply_code[0] != '\0';
}

int emq__session_too_large(const emq__session *s, emq_status st) {
    return st == EMQ_EPROTO && emq__route_reply_too_large(s->route);
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
     * the script can't run this command" (or "can't access at least one of
     * the keys", for a key), 7.2 and Valkey "ACL failure in script: User
     * ... has no permissions" (or "No permissions to access a key"). */
    size_t len;
    const char *text = emq_reply_str(r, &len);
    return text_has(text, len, "can't run this command") ||
           text_has(text, len, "can't access at least one of the keys") ||
           text_has(text, len, "ACL failure in script");
}

/* ---- the function library ----------------------------------------------- */

static emq__conn_library lib;
static pthread_once_t lib_once = PTHREAD_ONCE_INIT;

static void lib_fill(void) {
    lib.name = EMQ_LIBRARY_NAME;
    lib.probe = EMQ_LIBRARY_PROBE;
    lib.digest = emq__library_digest();
    lib.text = emq__library_text();
}

/* src/scripts' library, as every connection's handshake makes sure of it;
 * NULL when its text could not be built (then scripts go by EVAL). */
static const emq__conn_library *library(void) {
    pthread_once(&lib_once, lib_fill);
    return lib.text ? &lib : NULL;
}

int emq__session_functions(const emq__session *s) {
    return emq__route_functions(s->route, NULL);
}

/* Says once per reason why the connection's scripts go by EVAL on a
 * server that has functions. */
static void tell_functions(emq__session *s) {
    const char *why = "";
    if (emq__route_functions(s->route, &why) || why[0] == '\0')
        return;
    uint64_t h = 1469598103934665603ULL; /* FNV-1a */
    for (const char *k = why; *k; k++)
        h = (h ^ (unsigned char)*k) * 1099511628211ULL;
    if (h == s->functions_told)
        return;
    s->functions_told = h;
    say(s, EMQ_LOG_WARNING, "%s connection: scripts go by EVAL: %s", s->o.what,
        why);
}

/* ---- open, close --------------------------------------------------------- */

emq_status emq__session_open(emq__session *s, const emq_conf_t *conf,
                             const char *key, const emq__session_opts *opts,
                             emq_error *err) {
    memset(s, 0, sizeof *s);
    s->o = *opts;
    s->conf = conf;
    s->rng = (uint64_t)emq__now_ms() ^ (uint64_t)(uintptr_t)s;
    emq_status st = EMQ_ECLOSED;
    /* With connect_wait, a server that does not answer yet is waited for
     * like a later reconnect (backoff naps a stop ends), so workers
     * started before their server do not crash-loop. A refusal that will
     * not change by itself (a password, a certificate, a bad URL) still
     * ends it at once. */
    emq__retry retry;
    emq__retry_begin(&retry, emq__cfg_backoff_min_ms(conf),
                     emq__cfg_backoff_max_ms(conf), opts->max_attempts, -1,
                     &s->rng);
    emq__retry_stop_when(&retry, session_halted, s, 1);
    int stopped = 1; /* the retrying ended by a stop, not by a result */
    /* The route makes single attempts; the backoff is slept here (and in
     * emq__session_reconnect), where a stop can cut it short. */
    emq__route_options ropts;
    emq__route_options_of(conf, &ropts);
    if (opts->client_name != NULL)
        ropts.conn.client_name = opts->client_name;
    ropts.conn.learn_client_id = opts->learn_client_id;
    ropts.conn.library = library();
    emq__conn_options *rc = &ropts.conn;
    if (opts->timeout_ms > 0 && rc->connect_timeout_ms > opts->timeout_ms)
        rc->connect_timeout_ms = opts->timeout_ms;
    if (opts->timeout_ms > 0 && (rc->command_timeout_ms == 0 ||
                                 rc->command_timeout_ms > opts->timeout_ms))
        rc->command_timeout_ms = opts->timeout_ms;
    if (opts->reply_timeout_ms > 0 &&
        (rc->command_timeout_ms == 0 ||
         rc->command_timeout_ms > opts->reply_timeout_ms))
        rc->command_timeout_ms = opts->reply_timeout_ms;
    ropts.conn.max_attempts = 1;
    while (emq__retry_next(&retry)) {
        st = emq__route_open(&ropts, key, &s->route, err);
        if (st == EMQ_OK || !opts->connect_wait || st == EMQ_EAUTH ||
            st == EMQ_EINVAL || st == EMQ_ETLS || st == EMQ_ENOMEM) {
            stopped = 0;
            break;
        }
        say(s,
            retry.attempt == 1 && opts->max_attempts == 0 ? EMQ_LOG_WARNING
                                                          : EMQ_LOG_DEBUG,
            "%s connection: %s; waiting for the server", opts->what,
            err ? err->message : emq_strerror(st));
    }
    if (stopped && opts->max_attempts > 0 &&
        retry.attempt >= opts->max_attempts && !emq__session_halted(s)) {
        stopped = 0; /* the attempts are spent: the last failure stands */
        if (err)
            emq__error_prefix(err, "gave up after %lld attempts",
                              (long long)retry.attempt);
    }
    if (stopped)
        st = emq__error_set(err, EMQ_ECLOSED, 0,
                            "stopped while waiting for the server");
    /* A stop is not held up by a stalled server: a reply overdue by the
     * grace once it was asked is given up (the connection with it). */
    if (st == EMQ_OK && opts->stop[0] != NULL) {
        emq__conn_cancel cancel = {opts->stop[0], EMQ_SESSION_STOP_GRACE_MS,
                                   opts->on_stop, opts->on_stop_ctx,
                                   opts->on_stop ? opts->on_stop_fd : -1};
        emq__route_set_cancel(s->route, &cancel);
    }
    if (st != EMQ_OK)
        s->route = NULL;
    else
        tell_functions(s);
    return st;
}

void emq__session_close(emq__session *s) {
    count_route(s);
    emq__route_destroy(s->route);
    emq__free(s->tags);
    s->route = NULL;
    s->tags = NULL;
    s->ntags = s->tags_cap = 0;
    s->nahead = 0;
}

/* ---- append, drain ------------------------------------------------------- */

emq_status emq__session_append(emq__session *s, int tag, int argc,
                               const char *const *argv, const size_t *argvlen,
                               emq_error *err) {
    if (s->ntags == s->tags_cap) {
        size_t cap = s->tags_cap ? s->tags_cap * 2 : 16;
        int *t = emq__realloc(s->tags, cap * sizeof *t);
        if (t == NULL)
            return emq__oom(err);
        s->tags = t;
        s->tags_cap = cap;
    }
    emq_status st = emq__route_append(s->route, argc, argv, argvlen, err);
    if (st == EMQ_OK)
        s->tags[s->ntags++] = tag;
    return st;
}

/* Why a reply makes the session reconnect before the next command (the
 * command did not run). REPLICA: READONLY (the node was demoted) or
 * MASTERDOWN (a replica whose link to its master is down, with
 * replica-serve-stale-data no): waiting would not make the node a
 * master; reconnecting, behind Sentinel, asks for the primary again.
 * LIBRARY: an FCALL found no function (a FUNCTION FLUSH or DELETE, or a
 * node that never had the library): a new connection's handshake loads
 * it, or its scripts go by EVAL. */
enum { SAYS_NOTHING, SAYS_REPLICA, SAYS_LIBRARY_GONE };

static int says_not_master(const emq_reply *reply) {
    if (emq__reply_mentions(reply, "READONLY") ||
        emq__reply_mentions(reply, "MASTERDOWN"))
        return SAYS_REPLICA;
    if (emq__reply_mentions(reply, "Function not found"))
        return SAYS_LIBRARY_GONE;
    return SAYS_NOTHING;
}

/* EMQ_EIO (retriable) naming a says_not_master reply: the command did
 * not run; the caller reconnects. */
static emq_status demoted_error(const emq_reply *reply, emq_error *err) {
    return emq__reply_error_as(
        err, EMQ_EIO, 1, reply,
        says_not_master(reply) == SAYS_LIBRARY_GONE
            ? "the server no longer has the function library"
            : "server is a replica, not the master");
}

emq_status emq__session_drain_n(emq__session *s, size_t n, unsigned flags,
                                emq__session_apply_fn apply, void *ctx,
                                emq_error *err) {
    emq_status result = EMQ_OK;
    if (n > s->ntags)
        n = s->ntags;
    if (n == 0)
        return EMQ_OK;
    int each = (flags & EMQ_SESSION_EACH) != 0;
    count_route(s);
    count(s->o.counts.round_trips, 1);
    size_t i = 0;
    emq_status broke = EMQ_OK;
    for (; i < n; i++) {
        emq_reply *reply;
        emq_error rerr;
        emq_status st = emq__route_get_reply(s->route, &reply, &rerr);
        if (st == EMQ_OK && emq_reply_kind(reply) == EMQ_REPLY_ERROR &&
            says_not_master(reply)) {
            s->demoted = says_not_master(reply);
            st = demoted_error(reply, &rerr);
            emq_reply_free(reply);
            emq_error aerr = rerr;
            emq_status ast = each ? apply(ctx, s->tags[i], NULL, &aerr)
                                  : EMQ_OK;
            if (ast != EMQ_OK && result == EMQ_OK) {
                result = ast;
                if (err)
                    *err = aerr;
            }
            if (result == EMQ_OK) { /* not run: the caller reconnects */
                result = st;
                if (err)
                    *err = rerr;
            }
            continue;
        }
        if (st != EMQ_OK && emq__route_only_this_failed(s->route, st)) {
            if (each) { /* the caller decides what it means */
                st = apply(ctx, s->tags[i], NULL, &rerr);
                if (st == EMQ_OK)
                    continue;
            }
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
            broke = st;
            break;
        }
        emq_error aerr;
        st = apply(ctx, s->tags[i], reply, &aerr);
        emq_reply_free(reply);
        if (st != EMQ_OK && result == EMQ_OK) {
            result = st; /* keep reading so the pipeline stays in step */
            if (err)
                *err = aerr;
        }
    }
    if (broke != EMQ_OK) { /* the rest went with the connection */
        s->ntags = 0;
        for (size_t k = 0; k < s->nahead; k++)
            s->ahead_tags[k] = 0; /* their own replies fail as they come */
        return broke;
    }
    s->ntags -= n;
    memmove(s->tags, s->tags + n, s->ntags * sizeof *s->tags);
    return result;
}

emq_status emq__session_drain(emq__session *s, emq__session_apply_fn apply,
                              void *ctx, emq_error *err) {
    return emq__session_drain_n(s, s->ntags, 0, apply, ctx, err);
}

size_t emq__session_pending(const emq__session *s) { return s->ntags; }

/* ---- call with the "not now" wait ---------------------------------------- */

/* A server that is loading, running a long script, failing to persist,
 * short of replicas or part of a rehashing cluster answers with an error
 * and does not run the command, so sending it again is safe. */
#define NOT_NOW_PAUSE_MIN_MS 50
#define NOT_NOW_PAUSE_MAX_MS 1000

/* demoted_error for a READONLY reply, which it frees. */
static emq_status demoted(emq__session *s, emq_reply **reply, emq_error *err) {
    s->demoted = says_not_master(*reply);
    emq_status st = demoted_error(*reply, err);
    emq_reply_free(*reply);
    *reply = NULL;
    return st;
}

emq_status emq__session_call(emq__session *s, unsigned flags, int argc,
                             const char *const *argv, const size_t *argvlen,
                             emq_reply **reply, emq_error *err) {
    int64_t began = emq__now_ms();
    int64_t bound = s->o.not_now_ms > 0 ? s->o.not_now_ms
                                        : EMQ_SESSION_NOT_NOW_MS;
    count_route(s);
    /* A stop cuts a pause short; the command is sent once more and its
     * reply returned, whatever it is. */
    emq__retry retry;
    emq__retry_begin(&retry, NOT_NOW_PAUSE_MIN_MS, NOT_NOW_PAUSE_MAX_MS, 0, -1,
                     &s->rng);
    emq__retry_stop_when(&retry, session_halted, s, 0);
    while (emq__retry_next(&retry)) {
        count(s->o.counts.round_trips, 1);
        emq_error e;
        emq_status st =
            emq__route_command(s->route, argc, argv, argvlen, reply, &e);
        /* A TRYAGAIN or CLUSTERDOWN that outlasted cluster.retry_ms is
         * still "not now": the command was not run. */
        int route_bound = emq__route_only_this_failed(s->route, st) &&
                          e.retriable;
        if (st != EMQ_OK && err)
            *err = e;
        if (st != EMQ_OK && !route_bound)
            return st;
        if (st == EMQ_OK && says_not_master(*reply))
            return demoted(s, reply, err);
        if (st == EMQ_OK && !emq__reply_not_now(*reply, flags))
            break;
        if (emq__session_halted(s) || emq__now_ms() - began >= bound)
            return st; /* the caller sees the error reply, or the bound */
        if (retry.attempt == 1) {
            char shown[160];
            count(s->o.counts.server_waits, 1);
            say(s, EMQ_LOG_WARNING, "server not ready for %s (%s); waiting",
                argv[0],
                route_bound ? e.message
                            : emq__reply_text(*reply, shown, sizeof shown));
        }
        emq_reply_free(*reply);
        *reply = NULL;
    }
    if (retry.attempt > 1)
        say(s, EMQ_LOG_INFO, "%s went through after %lld ms", argv[0],
            (long long)(emq__now_ms() - began));
    return EMQ_OK;
}

/* After the appended commands and one more (argv) were sent: reads the
 * appended ones' replies into apply, then the last one's into *reply (in
 * step also after a fatal apply, which it then returns). */
static emq_status own_reply(emq__session *s, size_t appended,
                            emq__session_apply_fn apply, void *ctx,
                            emq_reply **reply, emq_error *err) {
    emq_error derr;
    emq_status drained =
        emq__session_drain_n(s, appended, 0, apply, ctx, &derr);
    if (drained != EMQ_OK && emq__route_is_broken(s->route)) {
        if (err)
            *err = derr;
        return drained;
    }
    emq_status st = emq__route_get_reply(s->route, reply, err);
    if (st != EMQ_OK)
        return st;
    if (drained != EMQ_OK) {
        emq_reply_free(*reply);
        *reply = NULL;
        if (err)
            *err = derr;
        return drained;
    }
    return EMQ_OK;
}

emq_status emq__session_call_after(emq__session *s, unsigned flags, int argc,
                                   const char *const *argv,
                                   const size_t *argvlen,
                                   emq__session_apply_fn apply, void *ctx,
                                   emq_reply **reply, emq_error *err) {
    *reply = NULL;
    if (s->ntags == 0)
        return emq__session_call(s, flags, argc, argv, argvlen, reply, err);
    emq_status st = emq__route_append(s->route, argc, argv, argvlen, err);
    if (st == EMQ_OK)
        st = own_reply(s, s->ntags, apply, ctx, reply, err);
    if (st != EMQ_OK)
        return st;
    if (!emq__reply_not_now(*reply, flags) && !says_not_master(*reply))
        return EMQ_OK;
    /* Not run: again, alone, with the wait. */
    emq_reply_free(*reply);
    *reply = NULL;
    return emq__session_call(s, flags, argc, argv, argvlen, reply, err);
}

emq_status emq__session_send_after(emq__session *s, int argc,
                                   const char *const *argv,
                                   const size_t *argvlen, emq_error *err) {
    if (s->nahead == EMQ_SESSION_AHEAD_MAX)
        return emq__error_set(err, EMQ_EINVAL, 0,
                              "%d commands sent ahead are not answered yet",
                              EMQ_SESSION_AHEAD_MAX);
    size_t owed = 0; /* appended before the commands still owed */
    for (size_t k = 0; k < s->nahead; k++)
        owed += s->ahead_tags[k];
    emq_status st = emq__route_append(s->route, argc, argv, argvlen, err);
    if (st == EMQ_OK && (st = emq__route_send(s->route, err)) == EMQ_OK) {
        count_route(s);
        count(s->o.counts.round_trips, 1);
        s->ahead_tags[s->nahead++] = s->ntags - owed;
    }
    return st;
}

size_t emq__session_owed(const emq__session *s) { return s->nahead; }

int emq__session_reply_whole(emq__session *s, int64_t ms) {
    return emq__route_reply_whole(s->route, ms);
}

emq_status emq__session_receive(emq__session *s, unsigned flags,
                                emq__session_apply_fn apply, void *ctx,
                                emq_reply **reply, emq_error *err) {
    *reply = NULL;
    if (s->nahead == 0)
        return emq__error_set(err, EMQ_EINVAL, 0, "no command was sent ahead");
    size_t appended = s->ahead_tags[0];
    s->nahead--;
    memmove(s->ahead_tags, s->ahead_tags + 1,
            s->nahead * sizeof *s->ahead_tags);
    emq_status st = own_reply(s, appended, apply, ctx, reply, err);
    if (st != EMQ_OK)
        return st;
    if (says_not_master(*reply))
        return demoted(s, reply, err);
    if (emq__reply_not_now(*reply, flags)) { /* not run */
        emq_reply_free(*reply);
        *reply = NULL;
    }
    return EMQ_OK;
}

/* One round of a pipeline: sends every command of cmds whose reply is
 * still NULL and reads their replies into replies[]. */
static emq_status pipeline_round(emq__session *s, size_t n,
                                 const emq__session_cmd *cmds,
                                 emq_reply **replies, emq_error *err) {
    count_route(s);
    count(s->o.counts.round_trips, 1);
    size_t appended = 0, sent[EMQ_SESSION_PIPELINE_MAX];
    emq_status st = EMQ_OK;
    for (size_t i = 0; i < n && st == EMQ_OK; i++) {
        if (replies[i] != NULL)
            continue;
        const emq__session_cmd *c = &cmds[i];
        st = emq__route_append(s->route, c->argc, c->argv, c->argvlen, err);
        if (st == EMQ_OK)
            sent[appended++] = i;
    }
    /* Read every reply of what was appended, even after a failed append,
     * so the connection is left with nothing outstanding. */
    for (size_t k = 0; k < appended; k++) {
        emq_error rerr;
        emq_status rst =
            emq__route_get_reply(s->route, &replies[sent[k]], &rerr);
        if (rst != EMQ_OK && st == EMQ_OK) {
            st = rst;
            if (err)
                *err = rerr;
        }
        if (rst != EMQ_OK && !emq__route_only_this_failed(s->route, rst))
            break; /* the connection is broken: nothing more will come */
    }
    return st;
}

emq_status emq__session_pipeline(emq__session *s, unsigned flags, size_t n,
                                 const emq__session_cmd *cmds,
                                 emq_reply **replies, emq_error *err) {
    for (size_t i = 0; i < n; i++)
        replies[i] = NULL;
    if (n > EMQ_SESSION_PIPELINE_MAX)
        return emq__error_set(err, EMQ_ELIMIT, 0,
                              "a pipeline of %zu commands is more than %d", n,
                              EMQ_SESSION_PIPELINE_MAX);
    int64_t began = emq__now_ms();
    int64_t bound = s->o.not_now_ms > 0 ? s->o.not_now_ms
                                        : EMQ_SESSION_NOT_NOW_MS;
    emq__retry retry;
    emq__retry_begin(&retry, NOT_NOW_PAUSE_MIN_MS, NOT_NOW_PAUSE_MAX_MS, 0, -1,
                     &s->rng);
    emq__retry_stop_when(&retry, session_halted, s, 0);
    emq_status st = EMQ_OK;
    while (emq__retry_next(&retry)) {
        st = pipeline_round(s, n, cmds, replies, err);
        for (size_t i = 0; i < n && st == EMQ_OK; i++)
            if (says_not_master(replies[i])) { /* the caller reconnects */
                st = demoted(s, &replies[i], err);
                break;
            }
        if (st != EMQ_OK)
            break;
        /* A command answered "not now" did not run: it alone goes again
         * (after the others of its round, which ran). */
        int later = !emq__session_halted(s) && emq__now_ms() - began < bound;
        size_t again = 0, first = 0;
        for (size_t i = 0; i < n && later; i++)
            if (emq__reply_not_now(replies[i], flags)) {
                if (again++ == 0)
                    first = i;
            }
        if (again == 0)
            break;
        if (retry.attempt == 1) {
            char shown[160];
            count(s->o.counts.server_waits, 1);
            say(s, EMQ_LOG_WARNING, "server not ready for %s (%s); waiting",
                cmds[first].argv[0],
                emq__reply_text(replies[first], shown, sizeof shown));
        }
        for (size_t i = 0; i < n; i++)
            if (emq__reply_not_now(replies[i], flags)) {
                emq_reply_free(replies[i]);
                replies[i] = NULL;
            }
    }
    if (st != EMQ_OK) {
        for (size_t i = 0; i < n; i++) {
            emq_reply_free(replies[i]);
            replies[i] = NULL;
        }
    } else if (retry.attempt > 1) {
        say(s, EMQ_LOG_INFO, "%s went through after %lld ms", cmds[0].argv[0],
            (long long)(emq__now_ms() - began));
    }
    return st;
}

/* ---- reconnect ----------------------------------------------------------- */

void emq__session_healthy(emq__session *s) { s->failures = 0; }

int64_t emq__session_reply_began_ms(const emq__session *s) {
    return emq__route_reply_began_ms(s->route);
}

/* A failure like the last warned one within this long is the same
 * episode (a connection cut again and again): logged at debug. */
#define EMQ_SESSION_EPISODE_QUIET_MS 10000

/* 1 when why starts a new episode of failures of s (and records it). */
static int episode_news(emq__session *s, const char *why) {
    int64_t now = emq__now_ms();
    int differs = strncmp(why, s->last_reason, sizeof s->last_reason - 1) != 0;
    int news = differs ||
               (s->failures == 0 &&
                now - s->last_warned_ms >= EMQ_SESSION_EPISODE_QUIET_MS);
    size_t keep = strlen(why) < sizeof s->last_reason
                      ? strlen(why)
                      : sizeof s->last_reason - 1;
    memcpy(s->last_reason, why, keep);
    s->last_reason[keep] = '\0';
    if (news)
        s->last_warned_ms = now;
    return news;
}

void emq__session_log_failure(emq__session *s, const char *why) {
    int news = episode_news(s, why);
    say(s, news ? EMQ_LOG_WARNING : EMQ_LOG_DEBUG,
        "%s connection failed (%s); reconnecting", s->o.what, why);
}

int emq__session_reconnecting(const emq__session *s) {
    return atomic_load(&s->reconnecting);
}

/* The attempts of emq__session_reconnect. */
static emq_status reconnect_attempts(emq__session *s, emq_error *err) {
    /* The route makes one attempt per call (emq__session_open); the
     * backoff happens here, in naps a stop ends early. A session that
     * failed again right after connecting counts as a failed attempt
     * too, unless attempts are bounded (each call then has its own). */
    emq__retry retry;
    emq__retry_begin(&retry, emq__cfg_backoff_min_ms(s->conf),
                     emq__cfg_backoff_max_ms(s->conf), s->o.max_attempts, -1,
                     &s->rng);
    emq__retry_stop_when(&retry, session_halted, s, 1);
    if (s->o.max_attempts == 0)
        retry.attempt = s->failures; /* the count goes on across sessions */
    emq_error why;
    emq__error_set(&why, EMQ_ECLOSED, 0, "stopped");
    while (emq__retry_next(&retry) && !emq__session_halted(s)) {
        if (s->failures < 64)
            s->failures++;
        emq_status st = emq__route_reconnect(s->route, &why);
        if (st == EMQ_OK) {
            count(s->o.counts.reconnects, 1);
            say(s, EMQ_LOG_INFO, "%s connection re-established", s->o.what);
            tell_functions(s);
            return EMQ_OK;
        }
        if (st == EMQ_EAUTH || st == EMQ_EINVAL || st == EMQ_ETLS) {
            if (err)
                *err = why;
            return st;
        }
        /* Once per episode: the first attempt that fails says so. */
        say(s, s->failures <= 1 ? EMQ_LOG_WARNING : EMQ_LOG_DEBUG,
            "%s reconnect failed, retrying: %s", s->o.what, why.message);
    }
    if (emq__session_halted(s))
        return emq__error_set(err, EMQ_ECLOSED, 0, "stopped");
    if (err)
        *err = why;
    return why.code;
}

emq_status emq__session_reconnect(emq__session *s, emq_error *err) {
    s->ntags = 0;
    s->nahead = 0;
    s->demoted = 0;
    atomic_store(&s->reconnecting, 1);
    emq_status st = reconnect_attempts(s, err);
    atomic_store(&s->reconnecting, 0);
    return st;
}

emq_status emq__session_ready(emq__session *s, emq_error *err) {
    if (s->ntags > 0 || (!s->demoted && !emq__route_went_away(s->route)))
        return EMQ_OK;
    emq__session_log_failure(s, s->demoted == SAYS_LIBRARY_GONE
                                    ? "the function library is gone"
                                : s->demoted ? "the server is a replica now"
                                : emq__route_is_broken(s->route) ? "broken"
                                : emq__route_switch_announced(s->route)
                                    ? "the Sentinels announced a new primary"
                                    : "closed by the server while idle");
    return emq__session_reconnect(s, err);
}
