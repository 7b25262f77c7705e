/* SPDX-License-Identifier: BSD-3-Clause */
/* upkeep.c: the maintenance thread, on its own connection.
 *
 * It keeps the consumer's promises while the handler runs, however long:
 *   - every entry in the in-flight table is refreshed (idle reset, only
 *     if still pending to this consumer) once it is refresh_every_ms old,
 *     a quarter of claim.min_idle_ms, so no peer's claim beat sees live
 *     work as idle;
 *   - the lease is renewed every third of lease.ttl_ms;
 *   - settlements go out within EMQ_SETTLE_DELAY_MS of being decided (at
 *     once when a batch ends), at most EMQ_SETTLE_MAX_IDS per pipeline;
 *   - the queue's delayed entries that are due are moved to the stream
 *     (mover.c: a look every delayed.poll_ms, the move when one is due);
 *   - entries read and waiting to be handed out get unseen marks, and a
 *     mark goes before its entry is handed out (marks.c; the handout
 *     waits for that reply, emq__upkeep_wait_unmarked). One connection
 *     carries both, so they stay in order. While that connection is down
 *     nothing can be marked (or refreshed), so the reading thread takes
 *     nothing new until it is back (emq__upkeep_in_step).
 * The renewal goes first in its round, and is sent again at once on the
 * next connection when a transport failure ate its reply: the next one is
 * scheduled only from a reply. Past the lease's local deadline the refresh
 * goes on (it touches only entries pending to this name, so it cannot
 * hurt another holder) and the renewal is sent every EMQ_FENCED_RENEW_MS,
 * taking the key again if it was gone (lease.c); settlements wait until
 * the lease is known held again. A transport failure re-queues the
 * round's settlements (all idempotent) and reconnects with backoff; a
 * "not now" reply does the same after a pause. On quit it sends what is queued,
 * then ends. The thread runs on after a stop was asked, until the run thread
 * says quit, because the handler in progress still needs its entry fresh.
 */
#include "upkeep.h"
#include "core.h"
#include "inflight.h"
#include "lease.h"
#include "grant.h"
#include "marks.h"
#include "mover.h"
#include "settle.h"
#include "inhand.h"
#include "stats.h"
#include "tags.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

/* The upkeep's own reply tags (tags.h); a round's replies of the other
 * duties go to them by their block (apply). */
enum { TAG_RENEW = EMQ_TAG(EMQ_TAGS_UPKEEP, 0), TAG_REFRESH, TAG_UNBLOCK };

/* An unblock that found the run thread's read not blocked yet goes again
 * this soon (each time behind a renewal), while that read is on its
 * way. */
#define EMQ_UNBLOCK_AGAIN_MS 5

/* While the lease is not known held, the renewal goes this often. */
#define EMQ_FENCED_RENEW_MS 50
/* A renewal refused by a "not now" reply is sent again this soon. */
#define EMQ_RENEW_RETRY_MS 100

/* What one round sent, for applying its replies. */
typedef struct round {
    settle_round settle; /* first: apply passes it to emq__settle_apply */
    emq_consumer_t *c;
    const emq_id *asked; /* refreshed ids */
    size_t nasked;
    int64_t sent_ms;
    int refresh_failed;       /* the refresh got an error reply */
    int renew_sent;           /* a renewal is in this round */
    int renew_answered;       /* ...its reply came: 1 applied, -1 an error */
    emq__mover_round mover;   /* the mover's step in this round */
    emq__marks_round marks;   /* the unseen marks' */
    emq__inhand_round inhand; /* the in-hand times' */
} round;

static emq_status apply(void *ctx, int tag, const emq_reply *reply,
                        emq_error *err) {
    round *r = ctx;
    emq_consumer_t *c = r->c;
    switch (EMQ_TAG_BLOCK(tag)) {
    case EMQ_TAGS_GRANT:
        emq__grant_looked(c, tag, reply);
        return EMQ_OK;
    case EMQ_TAGS_MOVER:
        emq__mover_apply(c, &r->mover, tag, reply, r->sent_ms);
        return EMQ_OK;
    case EMQ_TAGS_SETTLE:
        return emq__settle_apply(&r->settle, tag, reply, err);
    case EMQ_TAGS_MARKS:
        emq__marks_apply(c, &r->marks, tag, reply);
        if (r->marks.later) /* not now: the round pauses before the next */
            r->settle.again = 1;
        return EMQ_OK;
    case EMQ_TAGS_INHAND:
        emq__inhand_apply(c, tag, reply);
        return EMQ_OK;
    case EMQ_TAGS_UPKEEP:
        break;
    case EMQ_TAGS_NONE:
        return EMQ_OK;
    }
    if (tag == TAG_UNBLOCK) {
        /* Refused (an ACL without CLIENT UNBLOCK): the stop waits for the
         * read's block to time out, as it would have anyway. */
        if (emq_reply_kind(reply) == EMQ_REPLY_ERROR) {
            char shown[160];
            emq__consumer_log(c, EMQ_LOG_DEBUG,
                              "ending the blocked read at the stop failed "
                              "(%s): the stop waits for its block_ms",
                              emq__reply_text(reply, shown, sizeof shown));
        } else if (emq_reply_integer(reply) == 0) {
            /* No read blocked yet: the one marked may still be on its
             * way to the server (sent after the unblock, or behind it on
             * the wire). Asked again shortly, until it has ended (its
             * mark is gone then, and append_unblock sends nothing). */
            pthread_mutex_lock(&c->table.mu);
            if (c->blocked_id != 0) {
                c->upkeep.unblock_asked = 1;
                c->upkeep.unblock_again_ms = emq__now_ms() +
                                             EMQ_UNBLOCK_AGAIN_MS;
            }
            pthread_mutex_unlock(&c->table.mu);
        }
        return EMQ_OK;
    }
    if (tag == TAG_RENEW) {
        r->renew_answered = emq_reply_kind(reply) == EMQ_REPLY_ERROR ? -1 : 1;
        return emq__lease_renewed(c, reply, r->sent_ms, err);
    }
    if (tag == TAG_REFRESH) {
        if (emq_reply_kind(reply) == EMQ_REPLY_ARRAY &&
            emq_reply_len(reply) == 2) {
            size_t gone = 0;
            const emq_reply *owned = emq_reply_at(reply, 0);
            size_t lost = emq__inflight_refreshed(
                &c->table, r->asked, r->nasked, owned, emq_reply_at(reply, 1),
                r->sent_ms, &gone);
            atomic_fetch_add(&c->stats.refreshed, emq_reply_len(owned));
            atomic_fetch_add(&c->stats.ownership_lost, lost);
            atomic_fetch_add(&c->stats.deleted_pending, gone);
            if (lost > 0)
                emq__consumer_log(c, EMQ_LOG_WARNING,
                                  "%zu in-flight entries are no longer ours "
                                  "(claimed by a peer or acknowledged "
                                  "elsewhere); they are not handed out",
                                  lost);
            return EMQ_OK;
        }
        /* Refused: look again in half a period, not at once. */
        r->refresh_failed = 1;
        char shown[200];
        emq__reply_text(reply, shown, sizeof shown);
        if (emq__reply_refused(reply) ||
            emq__reply_mentions(reply, "WRONGTYPE")) {
            /* Without the refresh peers take live work: the consumer
             * stops. The words are short so that the reply's text (on
             * 6.2 an ACL refusal in a script is 170 characters, its
             * reason last) fits in the message. */
            emq_status st = emq__reply_error_set(
                err, reply,
                "refreshing in-flight entries was refused; the consumer "
                "stops");
            emq__consumer_fatal(c, err);
            return st;
        }
        if (!emq__reply_not_now(reply, 0))
            emq__consumer_log(c, EMQ_LOG_WARNING,
                              "refreshing in-flight entries failed: %s", shown);
        return EMQ_OK;
    }
    return EMQ_OK; /* an upkeep tag of no reply it reads */
}

/* Waits until something is due; returns with mu unlocked. Sets *settle
 * when queued settlements should go now. */
static void wait_due(emq_consumer_t *c, int *settle) {
    emq__upkeep *u = &c->upkeep;
    emq__inflight *t = &c->table;
    pthread_mutex_lock(&t->mu);
    for (;;) {
        int64_t now = emq__now_ms();
        int quit = atomic_load(&u->quit) || atomic_load(&c->fatal);
        if (!emq__lease_valid(c) &&
            u->next_renew_ms > now + EMQ_FENCED_RENEW_MS)
            u->next_renew_ms = now + EMQ_FENCED_RENEW_MS;
        /* Fenced (lease not known held): settlements wait, and must not
         * make this loop spin.
         * Settlements are the run thread's to send while it reads often
         * (each read takes what is queued): this thread sends them once
         * the oldest has waited EMQ_SETTLE_DELAY_MS and the run thread
         * has not taken any for as long (a slow handler, a recovery, a
         * claim beat). Sending them beside a busy read loop would cost a
         * round trip and a lock fight per steal. */
        int64_t since = t->oldest_op_ms > t->run_took_ms ? t->oldest_op_ms
                                                         : t->run_took_ms;
        int64_t settle_at = t->nops == 0 || !emq__lease_valid(c) ? INT64_MAX
                            : t->nops >= EMQ_SETTLE_MAX_IDS || t->urgent > 0
                                ? now
                                : since + EMQ_SETTLE_DELAY_MS;
        int64_t wake = u->next_renew_ms < u->next_refresh_ms
                           ? u->next_renew_ms
                           : u->next_refresh_ms;
        if (u->next_stats_ms < wake)
            wake = u->next_stats_ms;
        if (emq__mover_next_ms(c) < wake)
            wake = emq__mover_next_ms(c);
        if (c->next_limits_ms < wake)
            wake = c->next_limits_ms;
        /* The moment the lease's deadline passes, the renewal goes every
         * EMQ_FENCED_RENEW_MS (one_round). */
        int64_t deadline = atomic_load(&c->lease_deadline_ms);
        if (deadline > now && deadline < wake)
            wake = deadline;
        if (settle_at < wake)
            wake = settle_at;
        /* The run thread does not wake this one for each settlement (it
         * sends most with its next read): look every EMQ_SETTLE_DELAY_MS
         * while anything is in flight. */
        if (t->nops == 0 && t->n > 0 && now + EMQ_SETTLE_DELAY_MS < wake)
            wake = now + EMQ_SETTLE_DELAY_MS;
        int inhand_due = emq__inhand_due(c, now);
        if (emq__inhand_next_ms(c) < wake)
            wake = emq__inhand_next_ms(c);
        /* Marks of entries waiting to be handed out: looked for while
         * some entry is in the table and not in a handler. */
        int unblock_due = u->unblock_asked && u->unblock_again_ms <= now;
        if (u->unblock_asked && u->unblock_again_ms < wake)
            wake = u->unblock_again_ms;
        int marks_due = emq__marks_due(c, now);
        if (emq__marks_next_ms(c) < wake)
            wake = emq__marks_next_ms(c);
        if (quit || settle_at <= now || u->next_renew_ms <= now ||
            unblock_due || u->next_refresh_ms <= now ||
            u->next_stats_ms <= now ||
            (emq__mover_next_ms(c) <= now && !quit) ||
            (c->next_limits_ms <= now && !quit) || marks_due || inhand_due) {
            *settle = quit || settle_at <= now;
            break;
        }
        if (wake <= now)
            wake = now + 1;
        struct timespec ts;
        int64_t ms = wake - now;
        if (ms > 1000)
            ms = 1000; /* look at the quit flag now and then */
        emq__deadline_in(&ts, ms);
        t->dozing = ms > EMQ_SETTLE_DELAY_MS;
        pthread_cond_timedwait(&t->wake, &t->mu, &ts);
        t->dozing = 0;
    }
    pthread_mutex_unlock(&t->mu);
}

/* One round: settlements, renewal and refresh in one pipeline. Returns a
 * transport status; fatal errors are recorded by apply. */
/* 1 when a stop asked for the run thread's blocked read to be ended. */
static int unblock_pending(emq_consumer_t *c) {
    pthread_mutex_lock(&c->table.mu);
    int asked = c->upkeep.unblock_asked &&
                c->upkeep.unblock_again_ms <= emq__now_ms();
    pthread_mutex_unlock(&c->table.mu);
    return asked;
}

/* Appends CLIENT UNBLOCK <id> TIMEOUT for the run thread's blocked read
 * when a stop asked for it (emq__upkeep_unblock_ask) and the read's
 * connection is to the server this one talks to (a read moved elsewhere
 * meanwhile, by a failover, keeps its block: an id is the server's own;
 * on a cluster no id is recorded, emq__upkeep_blocking). TIMEOUT: the
 * read returns as if its block had run out, delivering nothing. */
static emq_status append_unblock(emq_consumer_t *c, emq_error *err) {
    emq__upkeep *u = &c->upkeep;
    char at[sizeof c->blocked_at];
    pthread_mutex_lock(&c->table.mu);
    int64_t id = u->unblock_asked ? c->blocked_id : 0;
    u->unblock_asked = 0;
    memcpy(at, c->blocked_at, sizeof at);
    pthread_mutex_unlock(&c->table.mu);
    if (id == 0 || strcmp(at, emq__route_endpoint(u->x.route)) != 0)
        return EMQ_OK;
    char idtext[24];
    snprintf(idtext, sizeof idtext, "%lld", (long long)id);
    const char *argv[] = {"CLIENT", "UNBLOCK", idtext, "TIMEOUT"};
    return emq__session_append(&u->x, TAG_UNBLOCK, 4, argv, NULL, err);
}

static emq_status one_round(emq_consumer_t *c, int settle, settle_op **ops_at,
                            size_t *ops_cap, emq_id *ids, emq_id *unmarks,
                            emq_id *marks, emq_id *unpub, emq_error *err) {
    emq__upkeep *u = &c->upkeep;
    int64_t now = emq__now_ms();
    round r = {.settle = {.c = c}, .c = c, .asked = ids, .sent_ms = now};
    size_t nops = 0;
    /* A connection killed while idle (an idle-timeout proxy, CLIENT KILL)
     * is replaced before the renewal goes out, not found dead by it. */
    emq_status st = emq__session_ready(&u->x, err);
    if (st != EMQ_OK)
        return st;
    int valid = emq__lease_valid(c);
    if (!valid && u->next_renew_ms > now + EMQ_FENCED_RENEW_MS)
        u->next_renew_ms = now + EMQ_FENCED_RENEW_MS;
    /* A stop met the run thread's read blocked: its unblock goes right
     * behind a renewal, a script the server counts as a write, in one
     * pipeline. While the server pauses writes (CLIENT PAUSE WRITE,
     * FAILOVER, a SHUTDOWN waiting for replicas) the renewal is parked,
     * and the unblock with it, so it never reaches a read the pause
     * parked: CLIENT UNBLOCK ... TIMEOUT on a parked client makes
     * servers before valkey#2117 and redis#14164 panic. */
    int unblock = unblock_pending(c);
    if (unblock)
        u->next_renew_ms = now;
    /* The renewal first: nothing else in the round can delay it. */
    if (now >= u->next_renew_ms) {
        st = emq__lease_append_renew(c, &u->x, TAG_RENEW, err);
        r.renew_sent = st == EMQ_OK;
    }
    if (st == EMQ_OK && unblock && r.renew_sent)
        st = append_unblock(c, err);
    /* Marks next: a handout waits for their removals (marks.c). */
    if (st == EMQ_OK)
        st = emq__marks_append(c, &u->x, now, u->round_ms8 / 8, unmarks, marks,
                               &r.marks, err);
    if (st == EMQ_OK)
        st = emq__inhand_append(c, &u->x, now, unpub, ids, &r.inhand, err);
    /* The refresh goes before the settlements: settlements ahead of it
     * would make their entries look lost to it. */
    if (st == EMQ_OK && now >= u->next_refresh_ms) {
        size_t overdue = 0;
        emq_id first;
        r.nasked = emq__inflight_stale(&c->table, now - u->refresh_every_ms,
                                       ids, EMQ_SETTLE_MAX_IDS, &overdue,
                                       &first);
        if (overdue > 0) {
            atomic_fetch_add(&c->stats.handler_overdue, overdue);
            emq__consumer_log(
                c, EMQ_LOG_WARNING,
                "%zu entries (the first %s) have been in hand longer than "
                "handler.timeout_ms (%lld ms): they are no longer kept from "
                "peers (one may take them after claim.min_idle_ms) and "
                "their settlements answer EMQ_ELOST",
                overdue, first.str,
                (long long)emq__cfg_handler_timeout_ms(c->conf));
        }
        if (r.nasked > 0)
            st = emq__settle_append_refresh(c, &u->x, ids, r.nasked,
                                            TAG_REFRESH, err);
        /* A full page means more are due: look again at once. */
        u->next_refresh_ms = r.nasked == EMQ_SETTLE_MAX_IDS
                                 ? now
                                 : now + u->refresh_every_ms / 2;
    }
    /* Due delayed entries to the stream: anyone's to move, lease or not. */
    if (st == EMQ_OK && !atomic_load(&u->quit))
        st = emq__mover_append(c, &u->x, now, &r.mover, err);
    int limits_sent = 0;
    if (st == EMQ_OK && !atomic_load(&u->quit))
        st = emq__grant_append_look(c, &u->x, now, &limits_sent, err);
    /* Settlements only while the lease is known held. */
    if (st == EMQ_OK && settle && valid) {
        nops = emq__inflight_take(&c->table, ops_at, ops_cap,
                                  emq__settle_ops_max(c), 0);
        st = emq__settle_append(c, &u->x, *ops_at, nops, err);
    }
    if (st == EMQ_OK)
        st = emq__session_drain(&u->x, apply, &r, err);
    if (st == EMQ_OK) { /* the round trip, a moving mean (marks) */
        int64_t took = emq__now_ms() - r.sent_ms;
        u->round_ms8 += (took > 0 ? took : 0) - u->round_ms8 / 8;
    }
    emq__settle_finish(c, *ops_at, nops, st, &r.settle);
    emq__inhand_finish(c, &r.inhand, st, unpub);
    emq__marks_finish(c, &r.marks, st, unmarks, marks);
    /* The next renewal is scheduled from a reply only: one whose reply a
     * transport failure ate goes again at once on the next connection. */
    if (r.renew_answered == 1)
        u->next_renew_ms = now + emq__cfg_lease_ttl_ms(c->conf) / 3;
    else if (r.renew_answered == -1)
        u->next_renew_ms = now + EMQ_RENEW_RETRY_MS;
    else if (r.renew_sent)
        u->next_renew_ms = now;
    emq__mover_finish(c, &r.mover, st, now);
    if (limits_sent && st != EMQ_OK) /* its reply was lost: soon again */
        c->next_limits_ms = now;
    if (r.refresh_failed) /* not at once again: in half a period */
        u->next_refresh_ms = now + u->refresh_every_ms / 2;
    else if (st != EMQ_OK && st != EMQ_EAGAIN && r.nasked > 0)
        u->next_refresh_ms = now; /* its reply was lost: again at once */
    if (st == EMQ_OK && !r.settle.again) {
        emq__session_healthy(&u->x);
    } else if (st == EMQ_OK) { /* "not now": pause, then again */
        emq__session_nap(&u->x, 100);
        st = EMQ_EAGAIN;
    } else if (st == EMQ_ENOMEM ||
               (st == EMQ_ELIMIT && !emq__session_cluster_bound(st, err))) {
        emq__consumer_fatal(c, err);
    }
    return st;
}

static void *upkeep_main(void *arg) {
    emq_consumer_t *c = arg;
    emq__upkeep *u = &c->upkeep;
    settle_op *ops = emq__alloc(EMQ_SETTLE_MAX_IDS * sizeof *ops);
    size_t ops_cap = EMQ_SETTLE_MAX_IDS;
    emq_id *ids = emq__alloc(EMQ_SETTLE_MAX_IDS * sizeof *ids);
    emq_id *unmarks = emq__alloc(EMQ_SETTLE_MAX_IDS * sizeof *unmarks);
    emq_id *marks = emq__alloc(EMQ_SETTLE_MAX_IDS * sizeof *marks);
    emq_id *unpub = emq__alloc(EMQ_SETTLE_MAX_IDS * sizeof *unpub);
    if (ops == NULL || ids == NULL || unmarks == NULL || marks == NULL ||
        unpub == NULL) {
        emq_error err;
        emq__oom(&err);
        emq__consumer_fatal(c, &err);
        goto out;
    }
    for (;;) {
        int settle = 0;
        wait_due(c, &settle);
        int quit = atomic_load(&u->quit) || atomic_load(&c->fatal);
        /* A stop sends what is owed first: settlements while the lease
         * is held, marks asked again held or not (marks.c). */
        int owed =
            (emq__inflight_queued(&c->table) > 0 && emq__lease_valid(c)) ||
            emq__inflight_remarks(&c->table) > 0;
        if (quit && (!owed || atomic_load(&c->fatal)))
            break;
        emq_error err;
        emq_status st = one_round(c, settle, &ops, &ops_cap, ids, unmarks,
                                  marks, unpub, &err);
        if (emq__now_ms() >= u->next_stats_ms) {
            /* Skipped (not late-fired) while fenced or failing. */
            if (st == EMQ_OK && !quit && emq__lease_valid(c))
                emq__stats_report(c, &u->x);
            u->next_stats_ms = emq__now_ms() +
                               emq__cfg_stats_interval_ms(c->conf);
        }
        /* After a quit, one try only: a server that refuses now, or a
         * connection that broke, does not hold up the stop (the entries
         * stay pending and come back). */
        if (quit && st != EMQ_OK)
            break;
        if (emq__session_reconnect_cures(st, &err)) {
            emq__session_log_failure(&u->x, err.message);
            if (emq__session_reconnect(&u->x, &err) != EMQ_OK) {
                if (!emq__session_halted(&u->x))
                    emq__consumer_fatal(c, &err);
                break;
            }
        }
    }
out:
    emq__free(ops);
    emq__free(ids);
    emq__free(unmarks);
    emq__free(marks);
    emq__free(unpub);
    /* Nobody sends marks any more: a handout waiting for one goes on. */
    emq__inflight_unmark_finish(&c->table, 1,
                                atomic_load(&c->table.unmark_asked), NULL, 0);
    return NULL;
}

/* The upkeep's own liveness bound: a round not answered within a third of
 * claim.min_idle_ms (at least 250 ms; never more than command_timeout_ms)
 * is given up and sent again on a new connection, so a connection held
 * up by anything (a stalled proxy, a half-open link, a lost reply) costs
 * one such wait, not command_timeout_ms while peers may claim the
 * entries it was refreshing. */
static int64_t upkeep_reply_timeout_ms(const emq_consumer_t *c) {
    int64_t bound = emq__cfg_claim_min_idle_ms(c->conf) / 3;
    return bound < 250 ? 250 : bound;
}

emq_status emq__upkeep_start(emq_consumer_t *c, emq_error *err) {
    emq__upkeep *u = &c->upkeep;
    atomic_store(&u->quit, 0);
    u->unblock_asked = 0; /* a stop of an earlier run asked it */
    u->unblock_again_ms = 0;
    if (u->x.route == NULL) {
        emq_status st = emq__consumer_session_open(c, &u->x, "upkeep", &u->quit,
                                                   upkeep_reply_timeout_ms(c),
                                                   NULL, err);
        if (st != EMQ_OK)
            return st;
    }
    int64_t now = emq__now_ms();
    u->refresh_every_ms = emq__cfg_claim_min_idle_ms(c->conf) / 4;
    /* An entry not refreshed for three quarters of claim.min_idle_ms is
     * not handed out: a peer may claim it any moment. */
    c->table.stale_after_ms = emq__cfg_claim_min_idle_ms(c->conf) * 3 / 4;
    c->table.hand_limit_ms = emq__cfg_handler_timeout_ms(c->conf);
    u->next_refresh_ms = now + u->refresh_every_ms / 2;
    emq__marks_init(c, now);
    emq__inhand_init(c, now);
    emq__mover_init(c, now);
    c->next_limits_ms = now + EMQ_GRANT_LOOK_MS;
    u->next_renew_ms = now + emq__cfg_lease_ttl_ms(c->conf) / 3;
    u->next_stats_ms = emq__stats_on(c)
                           ? now + emq__cfg_stats_interval_ms(c->conf)
                           : INT64_MAX;
    if (pthread_create(&u->thread, NULL, upkeep_main, c) != 0)
        return emq__error_set(err, EMQ_ENOMEM, 0,
                              "could not start the upkeep thread");
    u->started = 1;
    return EMQ_OK;
}

void emq__upkeep_unblock_ask(void *arg) {
    emq_consumer_t *c = arg;
    pthread_mutex_lock(&c->table.mu);
    c->upkeep.unblock_asked = 1;
    pthread_cond_signal(&c->table.wake);
    pthread_mutex_unlock(&c->table.mu);
}

void emq__upkeep_blocking(emq_consumer_t *c, int blocking) {
    int64_t id = 0;
    const char *at = "";
    if (blocking && !emq__route_is_cluster(c->rx.route)) {
        id = emq__route_client_id(c->rx.route);
        at = emq__route_endpoint(c->rx.route);
    }
    if (id == 0 && c->blocked_id == 0) /* its only writer reads it */
        return;
    pthread_mutex_lock(&c->table.mu);
    c->blocked_id = id;
    if (id != 0 && strcmp(c->blocked_at, at) != 0)
        snprintf(c->blocked_at, sizeof c->blocked_at, "%s", at);
    pthread_mutex_unlock(&c->table.mu);
}

int emq__upkeep_in_step(const emq_consumer_t *c) {
    return !emq__session_reconnecting(&c->upkeep.x);
}

void emq__upkeep_stop(emq_consumer_t *c) {
    emq__upkeep *u = &c->upkeep;
    if (!u->started)
        return;
    pthread_mutex_lock(&c->table.mu);
    atomic_store(&u->quit, 1);
    pthread_cond_signal(&c->table.wake);
    pthread_mutex_unlock(&c->table.mu);
    pthread_join(u->thread, NULL);
    u->started = 0;
}

/* Gives up waiting for marks to go: the consumer is ending, or may not
 * hand out anything now (the caller looks at the lease again and hands
 * out nothing while it is not known held: entries.c, ready.c). */
static int unmark_give_up(void *arg) {
    emq_consumer_t *c = arg;
    return emq__consumer_stopping(c) || !emq__lease_valid(c) ||
           !c->upkeep.started;
}

/* The settle wait's give-up: unmark_give_up's, or command_timeout_ms
 * gone by (other threads of a pull-mode consumer may settle without a
 * pause, so the queue may never be empty for long). */
typedef struct settle_waiter {
    emq_consumer_t *c;
    int64_t until_ms;
} settle_waiter;

static int settle_give_up(void *arg) {
    settle_waiter *w = arg;
    return unmark_give_up(w->c) || emq__now_ms() >= w->until_ms;
}

int emq__upkeep_wait_settled(emq_consumer_t *c) {
    settle_waiter w = {c, emq__now_ms() + emq__cfg_command_timeout_ms(c->conf)};
    return emq__inflight_settle_wait(&c->table, settle_give_up, &w);
}

int emq__upkeep_wait_unmarked(emq_consumer_t *c) {
    emq__inflight *t = &c->table;
    if (atomic_load(&t->unmark_done) >= atomic_load(&t->unmark_asked))
        return 0;
    return emq__inflight_unmark_wait(t, unmark_give_up, c) ? 1 : -1;
}
