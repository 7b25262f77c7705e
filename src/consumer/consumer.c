/* SPDX-License-Identifier: BSD-3-Clause */
/* consumer.c: one queue's consumer: made and checked, then its sessions
 * and its loop.
 *
 * emq__consumer_make (called by emq_consumer_new, consumer_new.c) checks
 * everything the caller declared (queue or stream, group, name, start
 * position, sizes, the timing rules between them) and builds the
 * consumer's keys without sending a byte. emq__consumer_loop (run by
 * emq_consumer_run and the pull thread, handout.c) opens the read
 * session (session/session.c) and runs sessions. A session (start_session)
 * drops what was read and not handed out, takes the name's lease, claims the
 * topic record, opens the group door (XGROUP CREATE ... MKSTREAM; BUSYGROUP is
 * an open door too), starts the upkeep thread once (upkeep.c), and takes
 * back its own pending entries (recover self, recover.c). Then each turn:
 * a claim beat when due, retries that are due, and one XREADGROUP ... >,
 * which carries in front of it the settlements decided since the last
 * read (those that wait longer go from the upkeep thread), and hands what
 * arrived to the handler or the ready queue (entries.c). In pull mode a
 * turn takes no more than max_in_flight leaves room for.
 *
 * A step ends the session in one of three ways (classify): a transport
 * failure or a demoted master reconnects with backoff (the session's policy); a
 * lease not known held is taken again before anything more is handed
 * out; a group or stream that vanished (NOGROUP) re-opens the door at the
 * declared start, at most once a second, unless on_group_lost is fatal.
 * Anything else is fatal and ends the loop. At its end the loop hands
 * back what pull mode read and did not hand out, waits for what it handed
 * out to be settled, stops the upkeep thread and releases the lease. The
 * consumer never deletes a group, a consumer or an entry, and never trims.
 *
 * emq__consumers_run runs N consumers on N threads, the first fatal error
 * stopping the others: a topic's partitions (partitions.c) and a pool
 * (pool.c).
 */
#include "consumer.h"
#include "core.h"
#include "entries.h"
#include "inflight.h"
#include "lease.h"
#include "grant.h"
#include "ready.h"
#include "recover.h"
#include "settle.h"
#include "upkeep.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

/* The least time between two re-creations of a vanished group, so a
 * group deleted again and again never makes a busy loop. */
#define RECREATE_GUARD_MS 1000

/* ---- validation (no network) ------------------------------------------- */

/* The timing rules between properties, checked before any traffic. */
static emq_status check_timing(const emq_conf_t *conf, emq_error *err) {
    if (emq__cfg_lease_ttl_ms(conf) < 3 * emq__cfg_block_ms(conf) + 1000)
        return emq__error_set(
            err, EMQ_EINVAL, 0,
            "lease.ttl_ms (%lld) must be at least 3 x "
            "block_ms + 1000 (%lld), so a read never outlives "
            "the lease",
            (long long)emq__cfg_lease_ttl_ms(conf),
            (long long)(3 * emq__cfg_block_ms(conf) + 1000));
    if (emq__cfg_deliveries_wait_replicas(conf) > 0 &&
        !emq__cfg_deliveries_exact(conf))
        return emq__error_set(err, EMQ_EINVAL, 0,
                              "deliveries.wait_replicas needs "
                              "deliveries.exact 1: the record it waits for "
                              "is the removal of the unseen mark every "
                              "read then writes");
    if (emq__cfg_deliveries_wait_replicas(conf) > 0 &&
        emq__cfg_deliveries_wait_timeout_ms(conf) * 3 >=
            emq__cfg_claim_min_idle_ms(conf))
        return emq__error_set(
            err, EMQ_EINVAL, 0,
            "deliveries.wait_timeout_ms (%lld) must be below a third of "
            "claim.min_idle_ms (%lld): a WAIT must not hold the "
            "connection that keeps entries from peers",
            (long long)emq__cfg_deliveries_wait_timeout_ms(conf),
            (long long)emq__cfg_claim_min_idle_ms(conf));
    if (emq__cfg_retry_backoff_max_ms(conf) < emq__cfg_retry_backoff_ms(conf))
        return emq__error_set(err, EMQ_EINVAL, 0,
                              "retry.backoff_max_ms (%lld) is below "
                              "retry.backoff_ms (%lld)",
                              (long long)emq__cfg_retry_backoff_max_ms(conf),
                              (long long)emq__cfg_retry_backoff_ms(conf));
    return EMQ_OK;
}

/* Builds the consumer's own keys: lease, reasons, retry schedule, unseen
 * marks, the group's in-hand times, the queue's delayed entries. */
static emq_status make_keys(emq_consumer_t *c, emq_error *err) {
    c->lease_key = emq__keys_of_group(&c->keys, "lease", c->group, c->name);
    c->lease_prefix = emq__keys_of_group(&c->keys, "lease", c->group, "");
    c->reasons_key = emq__keys_of_group(&c->keys, "reasons", c->group, NULL);
    c->retry_key = emq__keys_of_group(&c->keys, "retry", c->group, NULL);
    c->unseen_key = emq__keys_of_group(&c->keys, "unseen", c->group, NULL);
    c->inhand_key = emq__keys_of_group(&c->keys, "inhand", c->group, NULL);
    c->limits_key = emq__keys_of_group(&c->keys, "limits", c->group, NULL);
    c->rate_log_key = emq__keys_of_group(&c->keys, "ratelog", c->group, NULL);
    if (c->lease_key == NULL || c->lease_prefix == NULL ||
        c->reasons_key == NULL || c->retry_key == NULL ||
        c->unseen_key == NULL || c->inhand_key == NULL ||
        c->limits_key == NULL || c->rate_log_key == NULL)
        return emq__oom(err);
    return emq__delayed_keys_make(&c->keys, &c->delayed, err);
}

/* The machine's log: each transition at debug level. */
static void machine_log(void *ctx, const char *line) {
    emq__consumer_log(ctx, EMQ_LOG_DEBUG, "%s", line);
}

emq_status emq__consumer_make(const emq_conf_t *conf, emq_handler_fn handler,
                              emq_batch_handler_fn batch_handler, void *opaque,
                              emq_consumer_t **out, emq_error *err) {
    *out = NULL;
    if (conf == NULL)
        return emq__error_set(err, EMQ_EINVAL, 0,
                              "a consumer needs a configuration");
    emq_consumer_t *c = emq__calloc(1, sizeof *c);
    if (c == NULL)
        return emq__oom(err);
    /* Without it (out of descriptors), a stop is seen within the
     * connection's slice instead of at once. */
    c->stop_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    pthread_mutex_init(&c->fatal_mu, NULL);
    pthread_mutex_init(&c->pull_mu, NULL);
    c->batch_handler = batch_handler;
    c->self = c;
    emq_status st;
    c->conf = emq_conf_dup(conf);
    if (c->conf == NULL) {
        st = emq__oom(err);
        goto fail;
    }
    if ((st = emq__inflight_init(&c->table, err)) != EMQ_OK)
        goto fail;
    c->rx_ops = emq__alloc(EMQ_SETTLE_MAX_IDS * sizeof *c->rx_ops);
    c->rx_ops_cap = EMQ_SETTLE_MAX_IDS;
    if (c->rx_ops == NULL) {
        st = emq__oom(err);
        goto fail;
    }
    c->handler = handler;
    c->opaque = opaque;
    c->exact = emq__cfg_deliveries_exact(c->conf) != 0;
    emq__machine_init(&c->machine, machine_log, c);
    c->group = emq__cfg_group(c->conf);
    c->name = emq__cfg_consumer(c->conf);
    if (emq__topic_is(c->conf) &&
        (st = emq__topic_check(c->conf, err)) != EMQ_OK)
        goto fail;
    if ((st = emq__keys_resolve(emq__cfg_queue(c->conf),
                                emq__cfg_stream(c->conf), &c->keys, err)) !=
            EMQ_OK ||
        (st = emq__keys_check_name("group", c->group, err)) != EMQ_OK ||
        (st = emq__keys_check_name("consumer name", c->name, err)) != EMQ_OK ||
        (st = emq__stream_start_parse(emq__cfg_start(c->conf), c->start_id,
                                      err)) != EMQ_OK ||
        (st = check_timing(c->conf, err)) != EMQ_OK ||
        (st = make_keys(c, err)) != EMQ_OK)
        goto fail;
    emq__lease_make_token(c);
    c->rng = (uint64_t)emq__now_ms() ^ (uint64_t)(uintptr_t)c;
    strcpy(c->claim_cursor, "0-0");
    c->fit = SIZE_MAX;
    *out = c;
    return EMQ_OK;
fail:
    emq__consumer_free(c);
    return st;
}

void emq__consumer_free(emq_consumer_t *c) {
    if (c == NULL)
        return;
    for (size_t i = 0; i < c->nparts; i++) /* a topic's partitions */
        emq__consumer_free(c->parts[i]);
    emq__free(c->parts);
    if (c->ready != NULL && c->ready->root == c)
        emq__ready_free(c->ready);
    emq__free(c->fetchers);
    emq__session_close(&c->rx);
    emq__session_close(&c->upkeep.x);
    emq__inflight_destroy(&c->table);
    emq__keys_free(&c->keys);
    emq__free(c->lease_key);
    emq__free(c->lease_prefix);
    emq__free(c->reasons_key);
    emq__free(c->retry_key);
    emq__free(c->unseen_key);
    emq__free(c->inhand_key);
    emq__free(c->limits_key);
    emq__free(c->rate_log_key);
    emq__delayed_keys_free(&c->delayed);
    emq__free(c->fields);
    emq__free(c->rx_ops);
    for (size_t i = 0; i < EMQ_SESSION_AHEAD_MAX; i++)
        emq__free(c->ahead[i].ops);
    emq_conf_destroy(c->conf);
    pthread_mutex_destroy(&c->fatal_mu);
    pthread_mutex_destroy(&c->pull_mu);
    if (c->stop_fd >= 0)
        close(c->stop_fd);
    emq__free(c);
}

void emq_consumer_stop(emq_consumer_t *c) {
    if (c == NULL)
        return;
    emq__consumer_stop_set(c);
    size_t n;
    emq_consumer_t *const *m = emq__consumer_members(c, &n);
    for (size_t i = 0; i < n; i++)
        if (m[i] != c)
            emq__consumer_stop_set(m[i]);
    /* Pull mode: the event descriptor turns readable, so an event loop
     * learns of the stop (write(2) is async-signal-safe). */
    emq__ready *r = c->ready;
    if (r != NULL) {
        uint64_t one = 1;
        ssize_t rc = write(r->efd, &one, sizeof one);
        (void)rc;
    }
}

/* ---- the session --------------------------------------------------------- */

/* The group door: XGROUP CREATE <stream> <group> <start> MKSTREAM. +OK
 * and BUSYGROUP open the door; any other reply fails the start (OOM,
 * which XGROUP CREATE gets over maxmemory even for a group that exists,
 * is waited out). */
static emq_status open_door(emq_consumer_t *c, emq_error *err) {
    const char *argv[6];
    emq__group_create_argv(argv, c->keys.stream, c->group, c->start_id);
    emq_reply *reply;
    emq_status st = emq__session_call(&c->rx, EMQ_SESSION_WAIT_OOM, 6, argv,
                                      NULL, &reply, err);
    if (st != EMQ_OK)
        return st;
    int created = 0;
    st =
        emq__group_create_reply(reply, c->keys.stream, c->group, &created, err);
    emq_reply_free(reply);
    if (st == EMQ_OK)
        emq__consumer_log(c, EMQ_LOG_DEBUG,
                          created
                              ? "door: created group '%s' on '%s' at %s"
                              : "door: group '%s' on '%s' exists; reading on",
                          c->group, c->keys.stream, c->start_id);
    return st;
}

/* The event a step's status makes (machine.h). A NOGROUP from the read or
 * recovery comes as EMQ_ESERVER with c->nogroup set. lease: the step
 * needs the lease held after it (the session's start and its turns; a
 * reconnect or a door opened again lead to a start, which takes it). A
 * stop ends the run, but not an error of the caller's (EMQ_EINVAL,
 * EMQ_EAUTH), which fails it. */
static emq__sess_event classify(emq_consumer_t *c, emq_status st,
                                const emq_error *err, int nogroup, int lease) {
    if (st == EMQ_OK) {
        if (emq__consumer_stopping(c))
            return EMQ_EV_STOP;
        return !lease || (emq__lease_valid(c) &&
                          !emq__machine_posted(&c->machine, EMQ_POST_LAPSE))
                   ? EMQ_EV_DONE
                   : EMQ_EV_LAPSE;
    }
    if (emq__consumer_stopping(c) && st != EMQ_EINVAL && st != EMQ_EAUTH)
        return EMQ_EV_STOP;
    if (emq__session_reconnect_cures(st, err))
        return EMQ_EV_TRANSPORT;
    if (nogroup)
        return EMQ_EV_NOGROUP;
    return EMQ_EV_FATAL;
}

/* The steps of every session: lease, door, upkeep, own pending. */
static emq_status start_session(emq_consumer_t *c, int *nogroup,
                                emq_error *err) {
    emq_status st;
    /* Entries read and not handed out are dropped, wherever they wait:
     * recover self brings them back (those a handout dropped for a lapse
     * too). */
    emq__machine_take(&c->machine, EMQ_POST_LAPSE);
    emq__ready_purge(c, 0);
    emq__inflight_drop_unstarted(&c->table);
    /* Held earlier in this run and not known held now (a pause, an
     * outage): a holder found now took the name from us. */
    if (c->lease_held && !emq__lease_valid(c))
        c->lease_lapsed = 1;
    if ((st = emq__lease_acquire(c, err)) != EMQ_OK ||
        (st = emq__topic_claim(c->rx.route, c->conf, err)) != EMQ_OK ||
        (st = open_door(c, err)) != EMQ_OK ||
        (st = emq__grant_start(c, err)) != EMQ_OK)
        return st;
    if (!c->upkeep.started && (st = emq__upkeep_start(c, err)) != EMQ_OK)
        return st;
    st = emq__recover_self(c, err);
    *nogroup = st == EMQ_ESERVER && c->nogroup;
    return st;
}

/* The group or the stream vanished (NOGROUP, or 7.0's UNBLOCKED for a
 * deleted key followed by NOGROUP). Re-open the door at the declared
 * start, never at 0, unless the caller asked for this to be fatal. */
static emq_status group_lost(emq_consumer_t *c, emq_error *err) {
    if (emq__cfg_group_lost_fatal(c->conf))
        return emq__error_set(err, EMQ_ESERVER, 0,
                              "group '%s' or stream '%s' is gone (%s; "
                              "on_group_lost is fatal)",
                              c->group, c->keys.stream, c->nogroup_text);
    int64_t now = emq__now_ms();
    if (now - c->last_recreate_ms < RECREATE_GUARD_MS) /* never busy-loop */
        emq__consumer_nap(c, RECREATE_GUARD_MS - (now - c->last_recreate_ms));
    c->last_recreate_ms = emq__now_ms();
    emq__consumer_log(c, EMQ_LOG_WARNING,
                      "group or stream is gone (%s); creating it again at "
                      "the declared start '%s'",
                      c->nogroup_text, emq__cfg_start(c->conf));
    atomic_fetch_add(&c->stats.group_recreated, 1);
    /* Entries of a destroyed group have nothing left to settle. */
    emq__inflight_clear(&c->table);
    return open_door(c, err);
}

/* Takes the settlements decided since the last read (never past the
 * lease's deadline) into *ops (of *cap; the table may swap the array) and
 * appends them to the read session; *nops says how many, for
 * emq__settle_finish. */
static emq_status append_rx_settlements(emq_consumer_t *c, settle_op **ops,
                                        size_t *cap, size_t *nops,
                                        emq_error *err) {
    *nops = emq__lease_valid(c) ? emq__inflight_take(&c->table, ops, cap,
                                                     emq__settle_ops_max(c), 1)
                                : 0;
    return *nops ? emq__settle_append(c, &c->rx, *ops, *nops, err) : EMQ_OK;
}

/* Sends argv on the read session with the settlements decided since the
 * last read in the same round trip (the upkeep thread sends whatever
 * waits longer than EMQ_SETTLE_DELAY_MS); *reply is the command's. */
static emq_status call_with_settlements(emq_consumer_t *c, int argc,
                                        const char *const *argv,
                                        emq_reply **reply, emq_error *err) {
    size_t nops;
    settle_round round = {.c = c};
    emq_status st =
        append_rx_settlements(c, &c->rx_ops, &c->rx_ops_cap, &nops, err);
    *reply = NULL;
    if (st == EMQ_OK)
        st = emq__session_call_after(&c->rx, EMQ_SESSION_WAIT_OOM, argc, argv,
                                     NULL, emq__settle_apply, &round, reply,
                                     err);
    if (st == EMQ_OK) /* counted once answered */
        atomic_fetch_add(&c->stats.reads, 1);
    /* Nothing is owed: the moves this round carried go now, and any taken
     * by the upkeep went there. */
    c->wide_waits = 0;
    emq__settle_finish(c, c->rx_ops, nops, st, &round);
    return st;
}

/* What an error reply to a read means (reply freed): NOGROUP (c->nogroup
 * set), UNBLOCKED (read again: EMQ_OK), "not now" or another failure. */
static emq_status read_refused(emq_consumer_t *c, emq_reply *reply,
                               emq_error *err) {
    char shown[160];
    emq_status st = EMQ_OK;
    emq__reply_text(reply, shown, sizeof shown);
    if (emq_reply_is_error(reply, "NOGROUP")) {
        c->nogroup = 1;
        snprintf(c->nogroup_text, sizeof c->nogroup_text, "%s", shown);
        st = emq__reply_error_set(err, reply, "XREADGROUP");
    } else if (emq_reply_is_error(reply, "UNBLOCKED")) {
        /* The blocked read was ended from outside: CLIENT UNBLOCK ...
         * ERROR, the key deleted (7.0), or migrated to another cluster
         * node, or the master demoted. Read again: a key or group that
         * is really gone gets NOGROUP; a migrated key is followed by
         * the route; a closed connection shows up on the next call. */
        emq__consumer_log(c, EMQ_LOG_DEBUG, "read ended by %s; reading again",
                          shown);
    } else if (emq__reply_not_now(reply, EMQ_SESSION_WAIT_OOM)) {
        /* Waited out for minutes, or a stop: try again later. */
        st = emq__error_set(err, EMQ_EIO, 1, "server not ready: %s", shown);
    } else {
        st = emq__reply_error_set(err, reply, "XREADGROUP failed");
    }
    emq_reply_free(reply);
    return st;
}

/* Hands what a read delivered (entries, inside reply) to the handler or
 * the ready queue; the batch takes reply and frees it. taken_ms: when the
 * entries were delivered at the latest (0: when the reply began to
 * arrive). unseen: the read marked them (each handout removes the mark
 * first). */
static emq_status dispatch_read(emq_consumer_t *c, emq_reply *reply,
                                const emq_reply *entries, int64_t taken_ms,
                                int unseen, emq_error *err) {
    batch b;
    emq__batch_init(&b);
    emq_status st = emq__batch_parse(&b, reply, entries, err);
    if (st == EMQ_OK) {
        /* Only a reply that parsed resets the reconnect backoff. */
        emq__session_healthy(&c->rx);
        for (size_t i = 0; i < b.n; i++) {
            b.items[i].deliveries = 1; /* '>' delivers for the first time */
            b.items[i].unseen = unseen;
        }
        b.taken_ms = taken_ms > 0 ? taken_ms
                                  : emq__session_reply_began_ms(&c->rx);
        st = emq__batch_dispatch(c, &b, err);
    }
    emq__batch_free(&b); /* the reply with it */
    return st;
}

/* How often a group at its in-flight limit looks again whether some
 * entry was settled (by any consumer of it). */
#define EMQ_LIMITED_LOOK_MS 20

/* Marks the run thread's read as about to block, so a stop or a lapse
 * ends it (CLIENT UNBLOCK, upkeep.c); 0, and nothing marked, when one of
 * them came already: the upkeep may have looked before the mark and
 * would not end the read, which would then block its whole time. */
static int block_begin(emq_consumer_t *c) {
    emq__upkeep_blocking(c, 1);
    if (!emq__consumer_stopping(c) &&
        !emq__machine_posted(&c->machine, EMQ_POST_LAPSE))
        return 1;
    emq__upkeep_blocking(c, 0);
    return 0;
}

/* A limited group's read, a read of a queue with priorities, or one
 * that marks what it delivers (deliveries.exact) (grant.c): the grant
 * script reads what the limits allow, the most
 * urgent held entries first; nothing allowed sleeps as it says (at most
 * wait_ms); nothing to read waits for the next entry (or held entry)
 * with XREAD BLOCK, which consumes nothing. */
static emq_status read_limited(emq_consumer_t *c, size_t want, int64_t wait,
                               emq_error *err) {
    char want_text[24];
    snprintf(want_text, sizeof want_text, "%zu", want);
    const char *argv[EMQ_GRANT_ARGC];
    emq__grant_read_argv(c, want_text, argv);
    emq_reply *reply;
    emq_status st = call_with_settlements(c, EMQ_GRANT_ARGC, argv, &reply, err);
    if (st != EMQ_OK) {
        emq__fit_failed(c, st, want, "a read");
        return st;
    }
    if (emq_reply_kind(reply) == EMQ_REPLY_ERROR)
        return read_refused(c, reply, err);
    emq__grant g;
    if ((st = emq__grant_reply(reply, &g, err)) != EMQ_OK) {
        emq_reply_free(reply);
        return st;
    }
    if (g.entries != NULL) {
        const emq_reply *entries = emq__xread_entries(g.entries, err, &st);
        if (st == EMQ_OK && entries != NULL)
            return dispatch_read(c, reply, entries, 0, g.marked, err);
        emq_reply_free(reply);
        return st;
    }
    emq_reply_free(reply);
    emq__session_healthy(&c->rx);
    if (g.granted <= 0) {
        /* The in-flight limit waits for settlements, anyone's: look
         * again soon; the rate says when one second's window frees. */
        int64_t nap = g.wait_ms > 0 ? g.wait_ms : EMQ_LIMITED_LOOK_MS;
        emq__consumer_nap(c, nap < wait ? nap : wait);
        return EMQ_OK;
    }
    char block[24];
    snprintf(block, sizeof block, "%lld", (long long)wait);
    /* A new entry in the stream, or (priorities) one held: the bell. */
    int prio = atomic_load(&c->prioritized);
    const char *xread[] = {"XREAD",
                           "COUNT",
                           "1",
                           "BLOCK",
                           block,
                           "STREAMS",
                           c->keys.stream,
                           prio ? c->delayed.bell : g.last_id,
                           prio ? g.last_id : NULL,
                           g.bell_id};
    if (!block_begin(c))
        return EMQ_OK; /* the loop sees the stop or the lapse */
    st = emq__session_call(&c->rx, 0, prio ? 10 : 8, xread, NULL, &reply, err);
    emq__upkeep_blocking(c, 0);
    if (st == EMQ_OK && emq_reply_kind(reply) == EMQ_REPLY_ERROR)
        return read_refused(c, reply, err);
    emq_reply_free(reply);
    return st;
}

/* ---- reads sent ahead (pull mode) ---------------------------------------
 *
 * A consumer that waits for each read's reply before it sends the next
 * leaves the server idle while it parses and queues what came. In pull
 * mode, when a read came back full (more is likely waiting), the next
 * XREADGROUPs go out before this one's entries are queued, up to
 * EMQ_SESSION_AHEAD_MAX owed at once, so the server has the next read in
 * hand while the client parses the last reply. They go without BLOCK
 * (never a read waiting on the server), each with the settlements decided
 * by then; the oldest reply is read first thing in the next turn. Only in
 * pull mode: there a dispatch only queues, so what a read ahead took is
 * in the table, refreshed, moments later; a run-mode handler would hold
 * it back unrefreshed for as long as it runs. Together they ask for no
 * more than max_in_flight leaves room for. Nothing else of a turn uses
 * the read connection while a reply is owed on it, so reads go ahead
 * only while nothing else is due (a claim beat, a due retry, recovering
 * its own entries) and the upkeep is in step. */

static emq_status finish_ahead(emq_consumer_t *c, size_t room, emq_error *err);

/* The i-th oldest read sent ahead and still owed. */
static struct ahead_read *ahead_at(emq_consumer_t *c, size_t i) {
    return &c->ahead[(c->ahead_first + i) % EMQ_SESSION_AHEAD_MAX];
}

/* The COUNT of the next read to send ahead of dispatching got entries,
 * read by a read of want entries with room free before it; 0: none. */
static size_t ahead_want(emq_consumer_t *c, size_t got, size_t want,
                         size_t room) {
    if (c->ready == NULL || got < want ||
        c->nahead >= (c->wide_waits ? 1 : EMQ_SESSION_AHEAD_MAX) ||
        atomic_load(&c->limited) || atomic_load(&c->prioritized) ||
        emq__consumer_stopping(c) || !emq__lease_valid(c) ||
        emq__machine_posted(&c->machine, EMQ_POST_LAPSE) ||
        !emq__upkeep_in_step(c) ||
        emq__machine_posted(&c->machine, EMQ_POST_RECOVER_SELF))
        return 0;
    size_t asked = got; /* by this read and those still owed */
    for (size_t i = 0; i < c->nahead; i++)
        asked += ahead_at(c, i)->want;
    if (room <= asked)
        return 0;
    int64_t now = emq__now_ms();
    if (now >= c->next_claim_ms || emq__inflight_next_due(&c->table, now) == 0)
        return 0;
    size_t count = (size_t)emq__cfg_count(c->conf);
    size_t left = room - asked;
    return emq__fit(c, count < left ? count : left);
}

/* One XREADGROUP ... > of new entries, with its texts. */
typedef struct read_cmd {
    char count[24], block[24];
    const char *argv[11];
    int argc;
} read_cmd;

/* The read of want entries, blocking block ms (< 0: without BLOCK). */
static void read_cmd_make(const emq_consumer_t *c, size_t want, int64_t block,
                          read_cmd *r) {
    snprintf(r->count, sizeof r->count, "%zu", want);
    snprintf(r->block, sizeof r->block, "%lld", (long long)block);
    int n = 0;
    r->argv[n++] = "XREADGROUP";
    r->argv[n++] = "GROUP";
    r->argv[n++] = c->group;
    r->argv[n++] = c->name;
    r->argv[n++] = "COUNT";
    r->argv[n++] = r->count;
    if (block >= 0) { /* BLOCK goes before STREAMS */
        r->argv[n++] = "BLOCK";
        r->argv[n++] = r->block;
    }
    r->argv[n++] = "STREAMS";
    r->argv[n++] = c->keys.stream;
    r->argv[n++] = ">";
    r->argc = n;
}

/* Sends a read of want entries ahead, with the settlements decided so
 * far when it carries them; block >= 0: with BLOCK block (its reply is
 * owed like any). */
static emq_status send_ahead(emq_consumer_t *c, size_t want, int64_t block,
                             int carry, emq_error *err) {
    read_cmd cmd;
    read_cmd_make(c, want, block, &cmd);
    struct ahead_read *a = ahead_at(c, c->nahead);
    int64_t sent_ms = emq__now_ms(); /* before it can reach the server */
    a->round = (settle_round){.c = c};
    a->nops = 0;
    emq_status st =
        carry ? append_rx_settlements(c, &a->ops, &a->ops_cap, &a->nops, err)
              : EMQ_OK;
    if (st == EMQ_OK)
        st = emq__session_send_after(&c->rx, cmd.argc, cmd.argv, NULL, err);
    if (st != EMQ_OK) {
        emq__settle_finish(c, a->ops, a->nops, st, &a->round);
        return st;
    }
    a->want = want;
    a->sent_ms = sent_ms;
    a->blocking = block >= 0;
    a->block_ms = block;
    c->nahead++;
    return EMQ_OK;
}

/* Reads the replies of every read still owed (room 0: none goes ahead
 * again), after a failure or at the end of a run. */
static void finish_all_ahead(emq_consumer_t *c) {
    while (c->nahead > 0) {
        emq_error ferr; /* the first failure is the one returned */
        (void)finish_ahead(c, 0, &ferr);
    }
}

/* What a read of want entries (sent with room free) answered: refused,
 * nothing, or entries for the handler or the ready queue, with the next
 * reads sent ahead first when it came back full. taken_ms as for
 * dispatch_read. Frees reply. A read it sent is not left owed when the
 * dispatch fails (the loop reads any older one before it classifies). */
static emq_status read_delivered(emq_consumer_t *c, emq_reply *reply,
                                 size_t want, size_t room, int64_t taken_ms,
                                 emq_error *err) {
    if (emq_reply_kind(reply) == EMQ_REPLY_ERROR)
        return read_refused(c, reply, err);
    emq_status st;
    const emq_reply *entries = emq__xread_entries(reply, err, &st);
    if (st != EMQ_OK || entries == NULL) { /* timeout, or 7.0's [] */
        if (st == EMQ_OK)
            emq__session_healthy(&c->rx);
        emq_reply_free(reply);
        return st;
    }
    size_t got = emq_reply_len(entries), next;
    emq_error aerr;
    emq_status sent = EMQ_OK;
    while (sent == EMQ_OK && (next = ahead_want(c, got, want, room)) > 0)
        sent = send_ahead(c, next, -1, 1, &aerr);
    st = dispatch_read(c, reply, entries, taken_ms, 0, err);
    if (st != EMQ_OK)
        finish_all_ahead(c);
    if (st == EMQ_OK && sent != EMQ_OK) {
        /* What this read delivered is queued; the connection broke. */
        if (err)
            *err = aerr;
        st = sent;
    }
    return st;
}

/* Reads the reply of the oldest read sent ahead (room: what is free now,
 * for sending the next ones ahead) and queues what it delivered. */
static emq_status finish_ahead(emq_consumer_t *c, size_t room, emq_error *err) {
    struct ahead_read *a = ahead_at(c, 0);
    c->ahead_first = (c->ahead_first + 1) % EMQ_SESSION_AHEAD_MAX;
    c->nahead--;
    emq_reply *reply;
    emq_status st = emq__session_receive(&c->rx, EMQ_SESSION_WAIT_OOM,
                                         emq__settle_apply, &a->round, &reply,
                                         err);
    if (a->blocking)
        emq__upkeep_blocking(c, 0);
    if (st == EMQ_OK)
        atomic_fetch_add(&c->stats.reads, 1);
    /* Their moves are calls of their own on this connection, refused
     * while a reply is owed on it: fewer reads ahead until they went. */
    if (a->round.nwide > 0)
        c->wide_waits = c->nahead > 0;
    emq__settle_finish(c, a->ops, a->nops, st, &a->round);
    if (st != EMQ_OK) {
        emq__fit_failed(c, st, a->want, "a read");
        return st;
    }
    if (reply == NULL) { /* "not now": the next read waits it out */
        c->read_not_now = a->blocking;
        return EMQ_OK;
    }
    /* A blocking read's entries may have come long after it was sent. */
    return read_delivered(c, reply, a->want, room, a->blocking ? 0 : a->sent_ms,
                          err);
}

/* One XREADGROUP ... > of want entries, blocking up to wait ms, then the
 * handler (or the ready queue) over what arrived (room: as for
 * read_delivered). On the reading thread, or on a poller's (lent_read). */
static emq_status blocking_read(emq_consumer_t *c, size_t want, size_t room,
                                int64_t wait, emq_error *err) {
    read_cmd cmd;
    read_cmd_make(c, want, wait, &cmd);
    emq_reply *reply;
    if (!block_begin(c))
        return EMQ_OK; /* the loop sees the stop or the lapse */
    emq_status st = call_with_settlements(c, cmd.argc, cmd.argv, &reply, err);
    emq__upkeep_blocking(c, 0);
    if (st != EMQ_OK) {
        /* Too large: what it delivered is pending to this consumer now,
         * and recover self takes it back after the reconnect, fewer at a
         * time (recover.c, reads that fit). */
        emq__fit_failed(c, st, want, "a read");
        return st;
    }
    return read_delivered(c, reply, want, room, 0, err);
}

/* How long a read of new entries may block (never past the next claim
 * beat or due retry) and how many it asks for, with room free. */
static void read_plan(emq_consumer_t *c, size_t room, size_t *want,
                      int64_t *wait) {
    int64_t now = emq__now_ms();
    int64_t until = c->next_claim_ms - now;
    int64_t until_due = emq__inflight_next_due(&c->table, now);
    if (until_due < until)
        until = until_due;
    *wait = emq__cfg_block_ms(c->conf);
    if (until < *wait)
        *wait = until < 1 ? 1 : until;
    size_t count = (size_t)emq__cfg_count(c->conf);
    /* A queue with priorities: read no further ahead than a run-mode
     * handler takes at once (one entry), so an urgent entry produced
     * meanwhile waits behind at most what is in hand. A batch handler's
     * read-ahead is one batch (room, ready.c); pull mode reads what
     * max_in_flight (what the caller may hold at once) leaves room for. */
    if (atomic_load(&c->prioritized) && c->ready == NULL)
        count = 1;
    *want = emq__fit(c, count < room ? count : room);
}

/* Whether the session may read new entries now, with room free: the
 * machine decides (machine.h), on the loop's inputs. */
static int may_read(emq_consumer_t *c, size_t room) {
    emq__read_inputs in = {
        .stopping = emq__consumer_stopping(c),
        .room = room,
        .upkeep_in_step = emq__upkeep_in_step(c),
        .lease_valid = emq__lease_valid(c),
        .route_gone = emq__route_went_away(c->rx.route),
    };
    return emq__machine_may_read(&c->machine, &in);
}

/* Whether a turn would do nothing but read new entries now (see turn): it
 * may read (may_read), no read is owed, nothing to recover, no claim beat
 * or retry due, the queue neither limited nor prioritized, counts not
 * exact (their reads are scripts). On a poller's thread while the loop
 * lends it the read (the loop waits meanwhile). */
static int only_a_read_due(emq_consumer_t *c, size_t room) {
    int64_t now = emq__now_ms();
    return c->nahead == 0 && may_read(c, room) &&
           !emq__machine_posted(&c->machine, EMQ_POST_RECOVER_SELF) &&
           now < c->next_claim_ms &&
           emq__inflight_next_due(&c->table, now) != 0 &&
           !atomic_load(&c->limited) && !atomic_load(&c->prioritized) &&
           !c->exact;
}

/* How long past its block a lent read's reply may take to begin before
 * it counts as stalled. */
#define LENT_REPLY_SLACK_MS 5

/* When the lender takes back a read lent to an event loop that nothing
 * answered: a quarter of its block (at least 2 ms, at most 50) before the
 * block ends, so it reads the empty reply itself, and the loop wakes only
 * for entries (or a stop). */
static int64_t loop_lend_until(const struct ahead_read *a) {
    int64_t margin = a->block_ms / 4;
    if (margin < 2)
        margin = 2;
    if (margin > 50)
        margin = 50;
    return a->sent_ms + a->block_ms - margin;
}

/* The reads lent to pollers and event loops (emq__ready_lend): each a
 * turn that only reads, on the taker's thread, while nothing else is
 * due. The read goes as one sent ahead with BLOCK (block_ms, as the
 * reading thread's), and a poller waits for its reply no longer than its
 * own timeout: when that ends first, the read stays owed for the next
 * poller to wait on (or for the reading thread, when none comes). A
 * loop's step (max_ms 0) never waits: it sends the read, or reads the
 * reply once it is whole (its socket says when more came). When the
 * reply has not begun LENT_REPLY_SLACK_MS past the block (a stalled
 * server), the reading thread reads it (turn): a poll is never held up
 * past its timeout by more than that. The read carries no settlements:
 * their replies would wake the taker before the entries' (the upkeep
 * sends them within EMQ_SETTLE_DELAY_MS). */
static emq_status lent_read(void *ctx, int64_t max_ms, int *again,
                            int64_t *until_ms, emq_error *err) {
    emq_consumer_t *c = ctx;
    size_t room = emq__ready_room(c);
    *again = EMQ__LENT_BACK;
    struct ahead_read *owed =
        c->nahead == 1 && ahead_at(c, 0)->blocking ? ahead_at(c, 0) : NULL;
    int sent = 0;
    if (owed == NULL) {
        size_t want;
        int64_t wait;
        if (!only_a_read_due(c, room))
            return EMQ_OK; /* the reading thread's turn */
        read_plan(c, room, &want, &wait);
        if (!block_begin(c))
            return EMQ_OK; /* the reading thread's turn sees it */
        emq_status st = send_ahead(c, want, wait, 0, err);
        if (st != EMQ_OK) {
            emq__upkeep_blocking(c, 0);
            return st;
        }
        owed = ahead_at(c, 0);
        sent = 1;
    }
    int64_t stalled_at = owed->sent_ms + owed->block_ms + LENT_REPLY_SLACK_MS;
    *until_ms = loop_lend_until(owed);
    int64_t left = stalled_at - emq__now_ms();
    /* A poller reads what comes until its time is up; a step what is
     * there (none when it just sent the read). */
    int in = !(max_ms == 0 && sent) &&
             emq__session_reply_whole(&c->rx, left < max_ms ? left : max_ms);
    if (!in) { /* owed still, or the reading thread's once it stalled */
        *again = emq__now_ms() < stalled_at ? EMQ__LENT_OWED : EMQ__LENT_BACK;
        return EMQ_OK;
    }
    emq_status st = finish_ahead(c, room, err);
    /* Reads sent ahead (it came back full), or "not now": the reading
     * thread reads their replies, the backlog behind them, or waits. */
    if (st == EMQ_OK && c->nahead == 0 && !c->read_not_now)
        *again = EMQ__LENT_SEND;
    return st;
}

/* One XREADGROUP ... > of at most room entries, then the handler (or
 * the ready queue) over what arrived. In pull mode, while a poller waits
 * for entries, or an event loop watches the event descriptor, the reads
 * are lent to them (ready.c): what arrives then reaches the poller or the
 * loop with no wake-up between threads. Not for a topic's partition
 * (several reading threads share its queue), nor on a cluster. */
static emq_status read_new(emq_consumer_t *c, size_t room, emq_error *err) {
    size_t want;
    int64_t wait;
    read_plan(c, room, &want, &wait);
    if (atomic_load(&c->limited) || atomic_load(&c->prioritized) || c->exact)
        return read_limited(c, want, wait, err);
    emq_status st;
    /* Not after "not now" (waited out here). Lent reads carry no
     * settlements: wide dead letters go with the upkeep's meanwhile. */
    int lend = !c->read_not_now;
    c->read_not_now = 0;
    if (lend && c->ready != NULL && c->ready->root == c &&
        !emq__route_is_cluster(c->rx.route) &&
        emq__ready_lend(c->ready, lent_read, c, emq__route_fd(c->rx.route), &st,
                        err))
        return st;
    return blocking_read(c, want, room, wait, err);
}

/* How long a turn waits before it looks again whether the upkeep's
 * connection is back. */
#define EMQ_UPKEEP_WAIT_MS 20

/* Sends the settlements decided since the last read on the read
 * connection alone, as a read would carry them: while the upkeep's
 * connection is being replaced the turn reads nothing, and an ack must
 * not wait for it (a stop meanwhile would leave it unsent). */
static emq_status settle_without_read(emq_consumer_t *c, emq_error *err) {
    size_t nops;
    settle_round round = {.c = c};
    emq_status st =
        append_rx_settlements(c, &c->rx_ops, &c->rx_ops_cap, &nops, err);
    if (nops == 0)
        return st;
    if (st == EMQ_OK)
        st = emq__session_drain(&c->rx, emq__settle_apply, &round, err);
    if (round.nwide > 0) /* nothing is owed: their moves go now */
        c->wide_waits = 0;
    emq__settle_finish(c, c->rx_ops, nops, st, &round);
    return st;
}

/* One turn of the loop: a claim beat when due, due retries, a read. In
 * pull mode each takes no more than the room max_in_flight leaves; with
 * none, the turn waits for some (settlements, a resume) instead. While
 * the upkeep's connection is down it takes nothing: what it took could be
 * neither refreshed nor marked unseen, and a crash would then count a
 * delivery for entries no handler saw. */
static emq_status turn(emq_consumer_t *c, emq_error *err) {
    emq_status st = EMQ_OK;
    if (c->nahead > 0) /* their replies are owed before anything else */
        return finish_ahead(c, emq__ready_room(c), err);
    /* A lapse posted by a handout: the session starts again first. */
    if (emq__machine_posted(&c->machine, EMQ_POST_LAPSE))
        return EMQ_OK;
    if (emq__ready_room(c) == 0) {
        emq__ready_wait_room(c, emq__cfg_block_ms(c->conf));
        return EMQ_OK;
    }
    if (!emq__upkeep_in_step(c)) {
        emq_status sent = settle_without_read(c, err);
        if (sent == EMQ_OK)
            emq__session_nap(&c->rx, EMQ_UPKEEP_WAIT_MS);
        return sent;
    }
    if (emq__lease_valid(c) &&
        emq__machine_take(&c->machine, EMQ_POST_RECOVER_SELF))
        st = emq__recover_self(c, err);
    if (st == EMQ_OK && emq__now_ms() >= c->next_claim_ms &&
        emq__ready_room(c) > 0) {
        st = emq__recover_peers(c, err);
        c->next_claim_ms = emq__now_ms() + emq__cfg_claim_interval_ms(c->conf);
    }
    if (st == EMQ_OK && emq__inflight_next_due(&c->table, emq__now_ms()) == 0)
        st = emq__recover_due(c, err);
    size_t room = emq__ready_room(c);
    /* Closed while idle, or a new primary announced by Sentinel: the
     * session starts again (resolving the primary) before the read. */
    if (st == EMQ_OK && emq__route_went_away(c->rx.route))
        st = emq__error_set(err, EMQ_EIO, 1,
                            "the read connection went away (closed by the "
                            "server, or a new primary announced)");
    if (st == EMQ_OK && may_read(c, room))
        st = read_new(c, room, err);
    return st;
}

/* The step of the session's state (machine.h), run on the loop's thread;
 * returns the event its outcome makes. */
static emq__sess_event session_step(emq_consumer_t *c, emq_status *st,
                                    emq_error *err) {
    int nogroup = 0;
    switch (c->machine.state) {
    case EMQ_SESS_STARTING:
        c->nogroup = 0;
        *st = start_session(c, &nogroup, err);
        return classify(c, *st, err, nogroup, 1);
    case EMQ_SESS_RUNNING:
        *st = turn(c, err);
        /* Reads sent ahead are answered first (the next turn does): a
         * lapsed lease's steps use the read connection too. After a
         * failure the replies still owed are read (and dropped) first:
         * the first failure is the one classified. */
        if (*st != EMQ_OK && c->nahead > 0)
            finish_all_ahead(c);
        if (c->nahead > 0 && !emq__consumer_stopping(c))
            return EMQ_EV_DONE;
        return classify(c, *st, err, c->nogroup, 1);
    case EMQ_SESS_RECONNECTING: {
        /* Once per episode: a server that keeps breaking sessions (a
         * replica, a malformed reply) is logged when it starts. */
        const char *why = err->message[0] ? err->message : "transport failure";
        /* A reply over resp.max_reply_bytes was said once already
         * (emq__fit_failed). */
        if (emq__session_too_large(&c->rx, err->code))
            emq__consumer_log(c, EMQ_LOG_DEBUG,
                              "connection failed (%s); reconnecting", why);
        else
            emq__session_log_failure(&c->rx, why);
        *st = emq__session_reconnect(&c->rx, err);
        return classify(c, *st, err, 0, 0);
    }
    case EMQ_SESS_GROUP_LOST:
        c->nogroup = 0; /* its failure is another: the door's */
        *st = group_lost(c, err);
        return classify(c, *st, err, 0, 0);
    case EMQ_SESS_LAPSED:
        c->lease_lapsed = 1;
        emq__consumer_log(c, EMQ_LOG_WARNING,
                          "the lease is not known held (its renewal did not "
                          "get through in time); taking it again before "
                          "handing out anything");
        *st = EMQ_OK;
        return emq__consumer_stopping(c) ? EMQ_EV_STOP : EMQ_EV_DONE;
    case EMQ_SESS_STOPPED:
    case EMQ_SESS_FAILED:
    case EMQ_SESS_NSTATES:
        break;
    }
    return EMQ_EV_STOP;
}

emq_status emq__consumer_loop(emq_consumer_t *c, emq_error *err) {
    atomic_store(&c->fatal, 0);
    atomic_store(&c->lease_lost, 0);
    emq_error local;
    if (err == NULL)
        err = &local;
    emq__error_clear(err);
    emq_status st = EMQ_OK;
    c->fit = SIZE_MAX; /* reads that fit: learnt again in every run */
    c->fit_warned = 0;
    if (c->rx.route == NULL)
        st = emq__consumer_session_open(c, &c->rx, "read", NULL, 0,
                                        emq__upkeep_unblock_ask, err);
    /* Only a first connection that fails is fatal here. After that, a
     * transport failure anywhere, the session's first steps included (a
     * run after a stop may find its connection dead), reconnects: a
     * broken first connection starts the session by reconnecting. */
    int connected = st == EMQ_OK;
    c->nogroup = 0;
    c->next_claim_ms = emq__now_ms() + emq__cfg_claim_interval_ms(c->conf);
    emq__machine_start(&c->machine);
    if (connected && emq__route_is_broken(c->rx.route)) {
        st = emq__error_set(err, EMQ_ECLOSED, 0, "connection closed");
        emq__machine_apply(&c->machine, classify(c, st, err, 0, 0));
    }
    while (connected && c->machine.state != EMQ_SESS_STOPPED &&
           c->machine.state != EMQ_SESS_FAILED) {
        emq__sess_event ev =
            emq__consumer_stopping(c) ? EMQ_EV_STOP : session_step(c, &st, err);
        emq__machine_apply(&c->machine, ev);
    }
    /* A stop came after reads went ahead: their entries go back with the
     * rest of the ready queue. */
    finish_all_ahead(c);
    if (c->ready != NULL) {
        /* Pull mode: what was read and not handed out goes back, counts
         * undone; what was handed out may still be settled, until close
         * (the upkeep thread goes on refreshing and sending meanwhile). */
        emq__ready_purge(c, 1);
        emq__ready_wait_settled(c);
        size_t left = atomic_load(&c->table.nhandling);
        if (left > 0)
            emq__consumer_log(c, EMQ_LOG_WARNING,
                              "closing with %zu entries handed out and not "
                              "settled: they stay pending to this name and "
                              "come back at its next start",
                              left);
    }
    /* What succeeded is acknowledged before the run ends: on the read
     * connection, which the loop no longer uses, since the upkeep's may
     * be reconnecting right now (a cut of both), and the upkeep tries
     * only once after a quit. What is left goes with the upkeep. */
    if (c->rx.route != NULL && !emq__route_is_broken(c->rx.route)) {
        emq_error serr;
        (void)settle_without_read(c, &serr); /* a failure: upkeep's turn */
    }
    emq__upkeep_stop(c);
    if (c->rx.route != NULL && !emq__route_is_broken(c->rx.route))
        emq__lease_release(c, &c->rx);
    atomic_store(&c->lease_deadline_ms, 0);
    c->lease_held = c->lease_lapsed = 0;
    emq__inflight_clear(&c->table);
    if (atomic_load(&c->fatal)) {
        pthread_mutex_lock(&c->fatal_mu);
        *err = c->fatal_err;
        pthread_mutex_unlock(&c->fatal_mu);
        st = err->code;
    } else if (atomic_load(&c->stop) &&
               classify(c, st, err, 0, 0) != EMQ_EV_FATAL) {
        emq__error_clear(err);
        st = EMQ_OK;
    } else if (st != EMQ_OK) {
        err->fatal = 1; /* the run ended on it */
    }
    return st;
}

/* One thread of emq__consumers_run. */
typedef struct run_member {
    emq_consumer_t *const *all; /* every consumer of the run */
    size_t n;
    emq_consumer_t *consumer;
    emq_status (*run)(emq_consumer_t *c, emq_error *err);
    pthread_t thread;
    int started;
    emq_status status;
    emq_error error;
} run_member;

static void *member_main(void *arg) {
    run_member *m = arg;
    m->status = m->run(m->consumer, &m->error);
    if (m->status != EMQ_OK) /* one fatal error stops them all */
        for (size_t i = 0; i < m->n; i++)
            emq_consumer_stop(m->all[i]);
    return NULL;
}

emq_status emq__consumers_run(emq_consumer_t *const *consumers, size_t n,
                              emq_status (*run)(emq_consumer_t *c,
                                                emq_error *err),
                              emq_error *err) {
    emq__error_clear(err);
    run_member *members = emq__calloc(n ? n : 1, sizeof *members);
    if (members == NULL)
        return emq__oom(err);
    emq_status st = EMQ_OK;
    for (size_t i = 0; i < n; i++) {
        run_member *m = &members[i];
        m->all = consumers;
        m->n = n;
        m->consumer = consumers[i];
        m->run = run;
        if (pthread_create(&m->thread, NULL, member_main, m) != 0) {
            st = emq__error_set(err, EMQ_ENOMEM, 0,
                                "could not start consumer thread %zu", i + 1);
            for (size_t k = 0; k < n; k++)
                emq_consumer_stop(consumers[k]);
            break;
        }
        m->started = 1;
    }
    for (size_t i = 0; i < n; i++) {
        run_member *m = &members[i];
        if (!m->started)
            continue;
        pthread_join(m->thread, NULL);
        if (m->status != EMQ_OK && st == EMQ_OK) {
            st = m->status;
            if (err)
                *err = m->error;
        }
    }
    emq__free(members);
    return st;
}
