/* SPDX-License-Identifier: BSD-3-Clause */
/* recover.c: entries pending in the group but not being worked: this
 * consumer's own at the start of a session, a dead peer's, and retries
 * whose delay has passed.
 *
 * Three ways find IDs; one take hands them out. The take (due_script, one
 * script on the stream key: XPENDING to check the ID is still pending to
 * this consumer, XRANGE, then XCLAIM ... RETRYCOUNT n JUSTID) reads an
 * entry and sets its delivery count in one atomic step, so no peer's
 * claim slips between them and no count is missing. An entry deleted
 * while pending comes back as {id, false}: acknowledged in the script,
 * counted, its reason and schedule cleared by its SETTLE_GONE. Taken
 * entries go out as read ones do (emq__batch_dispatch: the handler in run
 * mode, the ready queue in pull mode), at most TAKE_PER_CALL per call.
 *
 * Recover self (emq__recover_self), after every (re)connect: pages through
 * this consumer's own pending list with XPENDING ... <me> (IDs only; a
 * page is at most count, the room pull mode has, and c->fit). IDs the
 * in-flight table holds (a retry waiting, an ack not sent yet) are
 * skipped; those whose retry delay is still running by the server's clock
 * (waits_script, on the schedule) wait it out in the table; the rest are
 * taken. Once the whole list was seen, what this process dropped before
 * handing it out and did not find again was taken by a peer: forgotten.
 *
 * Recover peers (emq__recover_peers), a claim beat: XAUTOCLAIM ... JUSTID
 * with claim.min_idle_ms, following the saved cursor across beats, at
 * most EMQ_CLAIM_CALLS_PER_BEAT calls, ending at the first that claims
 * nothing (JUSTID raises no count and resets the idle time, so no other
 * peer takes an entry while this one looks at its schedule). An entry
 * this consumer still holds is ours again, not taken; one with a retry
 * delay left waits it out in the table (a retry comes back after its
 * delay whoever claims it); the others are taken, counted once. Deleted
 * entries the server reports (7.0+) are counted and forgotten; 6.2 claims
 * them, and the take finds them gone. NOGROUP goes back to the group door;
 * any other refusal (NOPERM: an ACL without XAUTOCLAIM) is logged at most
 * once a minute, and peers' entries are then never taken over.
 *
 * Due retries (emq__recover_due): the table's entries whose delay has
 * passed are forgotten and taken again, if still pending to this consumer;
 * those the table knows never reached a handler are taken uncounted.
 *
 * Counting deliveries that reached a handler, not replies that were lost:
 * max_deliveries must dead-letter a job that keeps killing its process,
 * so a take raises the count unless the entry provably never reached a
 * handler since it was last raised. That proof is the lease: when a
 * session finds the lease still holding this consumer's own token, no
 * other process used the name since, and this process never hands out an
 * entry without keeping it in the in-flight table until it is settled; so
 * an own pending entry that is not in the table was read or taken and
 * never handed out (a lost reply, a batch cut short), and is taken without
 * a raise. Not so for what a claim beat took over from a peer whose
 * reply was lost: XAUTOCLAIM ... JUSTID left its count as the peer's
 * handler may have left it, and this process never learnt which entries
 * those are; until recover self has been through its own pending list,
 * it counts as in a first session (c->claim_unknown). In a first session,
 * or after the lease lapsed, an own pending entry is raised once (its
 * last holder may have died in the handler)
 * unless it has an unseen mark (SMISMEMBER on the unseen set: the upkeep
 * marks entries read and waiting to be handed out, a take marks what it
 * takes in the same script, and a mark goes before its entry is handed
 * out, upkeep.c) or this process dropped it before its handout. What a
 * take raised because it may have been in a dead process's handler goes
 * out alone (TAKE_SUSPECT). A batch cut short by a stop hands its entries back
 * with the raise undone (SETTLE_RELEASE, settle.c).
 *
 * Reads that fit: a reply larger than resp.max_reply_bytes breaks the
 * connection (the resp layer cannot keep it in step), and asking the same
 * again would fail the same way for ever. So the read, the takes, the
 * own-pending listing and the claim beat all ask for at most c->fit
 * entries; each reply over the limit halves it (emq__fit_failed), down to
 * 1, for the rest of the run, and the session reconnects. What the failed
 * request had delivered or claimed is pending to this consumer by then,
 * and recover self takes it back, c->fit at a time. An entry that does
 * not fit alone shows up exactly there: a take that named its one ID
 * failed over the limit. That entry is dead-lettered with the reason
 * EMQ_OVERSIZE_REASON by the ordinary dead-letter settlement, which
 * copies its fields on the server, so the client never receives it; a
 * listing of one ID over the limit is EMQ_ELIMIT (raise the limit).
 */
#include "recover.h"
#include "grant.h"
#include "core.h"
#include "entries.h"
#include "inflight.h"
#include "lease.h"
#include "ready.h"
#include "settle.h"
#include "upkeep.h"

#include <stdio.h>
#include <string.h>

/* A claim beat the server refuses is warned about at most this often. */
#define CLAIM_WARNING_EVERY_MS 60000

/* Every script here names the queue's stream key alone (KEYS[1]), and
 * the retry schedule is read by a script of its own naming the schedule
 * alone: a script naming a key the node does not have (the reasons and
 * schedule of a fresh queue) gets TRYAGAIN from CLUSTER SETSLOT ...
 * MIGRATING until the slot is final, while XREADGROUP goes on handing out
 * work. A deleted entry's reason and schedule are cleared by its
 * SETTLE_GONE (XACK, HDEL, ZREM: one key each), never in these scripts. */

/* Sets each item's delivery count from the integer array of a script's
 * reply. */
static void set_counts(batch *b, const emq_reply *counts) {
    for (size_t i = 0; i < b->n; i++) {
        long long n = emq_reply_integer(emq_reply_at(counts, i));
        b->items[i].deliveries = n > 0 ? (uint64_t)n : 1;
    }
}

/* A group or stream that is gone shows up as NOGROUP, also inside our
 * scripts (whose error text wraps it). */
static emq_status script_error(emq_consumer_t *c, emq_reply *reply,
                               const char *what, emq_error *err) {
    c->nogroup = emq__reply_mentions(reply, "NOGROUP");
    if (c->nogroup)
        emq__reply_text(reply, c->nogroup_text, sizeof c->nogroup_text);
    emq_status st = emq__reply_error_set(err, reply, "%s failed", what);
    emq_reply_free(reply);
    return st;
}

/* Most entries one take call delivers. */
#define TAKE_PER_CALL 100

/* How a take counts the entries it names. */
enum take_count {
    TAKE_UNCOUNTED, /* provably reached no handler since their last raise */
    TAKE_COUNTED,   /* due retries: a handler answered; each is raised */
    TAKE_SUSPECT,   /* own pending entries in a first session, a dead
                       peer's: any may have been in a handler's hands when
                       its process died, so each is raised (unless marked
                       unseen) and those raised go out alone (a batch
                       handler gets each in a call of its own), so a job
                       that kills its process takes no other with it */
    TAKE_CLAIMED    /* as TAKE_SUSPECT, for what a claim beat took over:
                       its last holder was a peer (or this consumer, idle),
                       so what this process noted when it dropped the
                       entry earlier says nothing of that holder's
                       handler: only a mark on the server keeps it
                       uncounted */
};

/* Sets marked[i] to 1 when ids[i] has an unseen mark (upkeep.c: read
 * ahead and not handed out since), n <= TAKE_PER_CALL: SMISMEMBER on the
 * one key. An error reply (an ACL without it) reads as no marks: every
 * take is counted, as before marks existed. */
static emq_status unseen_marks(emq_consumer_t *c, const emq_id *ids, size_t n,
                               unsigned char *marked, emq_error *err) {
    memset(marked, 0, n);
    if (n == 0)
        return EMQ_OK;
    const char *argv[2 + TAKE_PER_CALL] = {"SMISMEMBER", c->unseen_key};
    for (size_t i = 0; i < n; i++)
        argv[2 + i] = ids[i].str;
    emq_reply *reply;
    emq_status st =
        emq__session_call(&c->rx, 0, (int)(2 + n), argv, NULL, &reply, err);
    if (st != EMQ_OK)
        return st;
    if (emq_reply_kind(reply) == EMQ_REPLY_ARRAY && emq_reply_len(reply) == n)
        for (size_t i = 0; i < n; i++)
            marked[i] = emq_reply_integer(emq_reply_at(reply, i)) == 1;
    emq_reply_free(reply);
    return EMQ_OK;
}

size_t emq__fit(const emq_consumer_t *c, size_t want) {
    return want > c->fit ? c->fit : want;
}

int emq__fit_failed(emq_consumer_t *c, emq_status st, size_t asked,
                    const char *what) {
    if (!emq__session_too_large(&c->rx, st))
        return 0;
    size_t half = asked > 1 ? asked / 2 : 1;
    if (half < c->fit) {
        c->fit = half;
        emq__consumer_log(c, c->fit_warned ? EMQ_LOG_DEBUG : EMQ_LOG_WARNING,
                          "the reply to %s (%zu %s) was larger than "
                          "resp.max_reply_bytes (%lld): reads, recovery "
                          "pages and claims ask for at most %zu %s from "
                          "now on (in this run)",
                          what, asked, asked == 1 ? "entry" : "entries",
                          (long long)emq__cfg_resp_max_reply(c->conf), c->fit,
                          c->fit == 1 ? "entry" : "entries");
        c->fit_warned = 1;
        /* The request was too large, not the server broken: the smaller
         * one goes out at once, without the reconnect backoff. */
        emq__session_healthy(&c->rx);
    }
    return 1;
}

/* The entry id, pending to this consumer, is larger than
 * resp.max_reply_bytes by itself (a take that named it alone failed over
 * the limit): it goes to the dead letters through the ordinary
 * settlement, sent by the upkeep thread, which copies its fields on the
 * server. In the table meanwhile, so it is kept fresh and recover self
 * does not take it again. */
static emq_status oversize(emq_consumer_t *c, const emq_id *id,
                           emq_error *err) {
    batch_item item = {.id = *id, .deliveries = 1};
    if (emq__inflight_add_batch(&c->table, &item, 1, emq__now_ms()) != 0)
        return emq__oom(err);
    if (item.held)
        return EMQ_OK; /* its settlement is on its way already */
    emq__consumer_log(c, EMQ_LOG_WARNING,
                      "entry %s alone is larger than resp.max_reply_bytes "
                      "(%lld): it goes to the dead letters, with every "
                      "field, never handed out (reason \"%s\")",
                      id->str, (long long)emq__cfg_resp_max_reply(c->conf),
                      EMQ_OVERSIZE_REASON);
    settle_op op;
    emq_status st =
        emq__settle_make(c, id, 1, SETTLE_DEAD, EMQ_OVERSIZE_REASON, &op, err);
    if (st == EMQ_OK)
        st = emq__inflight_step(&c->table, &op, NULL, NULL, NULL, err);
    return st;
}

/* Takes ids[0..n) (n <= TAKE_PER_CALL) that are still pending to this
 * consumer, counting a delivery each as count says, and hands them out;
 * deleted ones are acknowledged in the script and counted. One call. */
static emq_status take_page(emq_consumer_t *c, const emq_id *ids, size_t n,
                            enum take_count count, const char *what,
                            emq_error *err) {
    unsigned char marked[TAKE_PER_CALL], raised[TAKE_PER_CALL];
    /* Asked whatever bump is: a marked entry keeps its mark until it is
     * handed out, and the handout must know to remove it. */
    emq_status st = unseen_marks(c, ids, n, marked, err);
    if (st != EMQ_OK) {
        /* Not taken, and not in the table: due retries left it
         * (emq__inflight_due) and a handler answered each; a claim's
         * entries are pending to us now, their last holder's handler may
         * have had them; a first session's suspects likewise. Remembered
         * as let go, so that their next take counts it, even one of a
         * session that kept the lease (before, a cut connection here left
         * them to recover self, which took them uncounted). A mark still
         * keeps a take from counting. */
        if (count != TAKE_UNCOUNTED)
            for (size_t i = 0; i < n; i++)
                emq__inflight_note_let_go(&c->table, &ids[i]);
        return st;
    }
    /* Taken entries are marked unseen in the take (not those in hand):
     * each one's count then includes a delivery no handler has had, and
     * its handout removes the mark first (inflight.c, begin_locked). So a
     * job that kills its process when handed out costs the entries taken
     * with it nothing at the next start: marked, they are not counted
     * again, and only the job itself is; a crash loop reaches
     * max_deliveries on the job alone (before, every restart raised them
     * all). The marks also make a take whose reply is lost safe to send
     * again: if it ran, its entries are marked and the next take raises
     * nothing; if it did not, nothing is marked and the next take raises
     * them, as it must (a due retry's handler was called). */
    char most[24];
    snprintf(most, sizeof most, "%lld",
             (long long)emq__cfg_max_deliveries(c->conf));
    const char *argv[8 + 3 * TAKE_PER_CALL] = {
        "", "", "1", c->keys.stream, c->group, c->name, c->unseen_key, most};
    emq__script_head(EMQ_SCRIPT_TAKE_DUE, emq__session_functions(&c->rx), argv);
    for (size_t i = 0; i < n; i++) {
        argv[8 + 3 * i] = ids[i].str;
        /* Read ahead and never handed out since (marked on the server,
         * or, for its own pending entries, dropped by this process before
         * its handout): no handler had it. A note of a dropped entry says
         * nothing of a due retry (a handler answered since) nor of what a
         * claim took from a peer, whose handler may have had it. */
        int dropped = emq__inflight_was_dropped(&c->table, &ids[i]) &&
                      (count == TAKE_SUSPECT || count == TAKE_UNCOUNTED);
        /* Handed out and let go unsettled (a settlement refused past the
         * lease's deadline): a handler had it, lease kept or not. */
        int let_go = emq__inflight_was_let_go(&c->table, &ids[i]);
        /* With exact counts every read marks what it delivers and only a
         * handout removes the mark: unmarked, it was handed out, even in
         * a session that kept the lease (an acknowledgement a failover
         * rolled back brings it back so). */
        raised[i] = (count != TAKE_UNCOUNTED || let_go || c->exact) &&
                    !marked[i] && !dropped;
        argv[9 + 3 * i] = raised[i] ? "1" : "0";
        argv[10 + 3 * i] =
            !marked[i] && !emq__inflight_holds(&c->table, &ids[i]) ? "1" : "0";
    }
    emq_reply *reply;
    st =
        emq__session_call(&c->rx, 0, (int)(8 + 3 * n), argv, NULL, &reply, err);
    if (st != EMQ_OK) {
        /* The script may have run or not, its reply (a reply over
         * resp.max_reply_bytes, a cut connection) lost. Its marks tell
         * the next take which. Where marks are refused (an ACL without
         * SADD) the entries are noted dropped instead: the next take
         * raises none of them, which undercounts when this one did not
         * run, but each smaller retry of a reply that does not fit no
         * longer raises the counts until max_deliveries. */
        if (c->marks_refused) {
            emq__inflight_note_dropped(&c->table, ids, n);
            return st;
        }
        /* Those it was to raise are out of the table (a due retry is
         * forgotten before its take): remembered as let go, so that the
         * next take raises them, unless this one ran (they are marked),
         * even in a session that kept the lease. */
        for (size_t i = 0; i < n; i++)
            if (raised[i])
                emq__inflight_note_let_go(&c->table, &ids[i]);
        return st;
    }
    if (emq_reply_kind(reply) == EMQ_REPLY_ERROR) {
        /* Refused, not run: as for a take not sent (above). */
        for (size_t i = 0; i < n; i++)
            if (raised[i])
                emq__inflight_note_let_go(&c->table, &ids[i]);
        return script_error(c, reply, what, err);
    }
    const emq_reply *entries = emq_reply_at(reply, 0);
    const emq_reply *now_marked = emq_reply_at(reply, 2);
    if (emq_reply_kind(reply) != EMQ_REPLY_ARRAY || emq_reply_len(reply) != 3 ||
        emq_reply_kind(entries) != EMQ_REPLY_ARRAY ||
        emq_reply_len(now_marked) != emq_reply_len(entries)) {
        emq_reply_free(reply);
        return emq__reply_bad_shape(
            err, "taken entries are not [entries, counts, marks]");
    }
    if (emq_reply_len(entries) == 0) {
        emq_reply_free(reply);
        return EMQ_OK;
    }
    const emq_reply *counts = emq_reply_at(reply, 1);
    batch b;
    emq__batch_init(&b);
    if ((st = emq__batch_parse(&b, reply, entries, err)) == EMQ_OK) {
        set_counts(&b, counts);
        uint64_t max = (uint64_t)emq__cfg_max_deliveries(c->conf);
        for (size_t k = 0; k < b.n; k++) {
            int asked = 0;
            for (size_t i = 0; i < n; i++)
                if (strcmp(b.items[k].id.str, ids[i].str) == 0) {
                    b.items[k].unseen = marked[i];
                    b.items[k].alone =
                        (count == TAKE_SUSPECT || count == TAKE_CLAIMED) &&
                        raised[i];
                    asked = argv[10 + 3 * i][0] == '1';
                }
            if (emq_reply_integer(emq_reply_at(now_marked, k)) == 1)
                b.items[k].unseen = 1;
            else if (asked && b.items[k].fields != NULL &&
                     b.items[k].deliveries <= max && !c->marks_refused) {
                c->marks_refused = 1;
                emq__consumer_log(c, EMQ_LOG_DEBUG,
                                  "the server refused the unseen marks of a "
                                  "take (an ACL without SADD on %s?): a crash "
                                  "may count entries read ahead again",
                                  c->unseen_key);
            }
        }
        b.taken_ms = emq__session_reply_began_ms(&c->rx);
        /* A limited group's rate counts what goes out again, too. */
        if (atomic_load(&c->limited)) {
            emq_id *taken = emq__alloc(b.n * sizeof *taken);
            for (size_t k = 0; taken && k < b.n; k++)
                taken[k] = b.items[k].id;
            st = taken ? emq__grant_count(c, taken, b.n, err) : emq__oom(err);
            emq__free(taken);
        }
        if (st == EMQ_OK)
            st = emq__batch_dispatch(c, &b, err);
    }
    emq__batch_free(&b);
    return st;
}

/* Sets waits[i] to the ms left of ids[i]'s retry delay (0: none, or
 * due), n <= TAKE_PER_CALL, with the schedule script (one key: a migrating
 * slot sends it on by ASK, never TRYAGAIN). A reply of another shape, or
 * an error reply (an ACL without ZSCORE), reads as no delay: the entries
 * are delivered as before this check existed. */
static emq_status retry_waits(emq_consumer_t *c, const emq_id *ids, size_t n,
                              long long *waits, emq_error *err) {
    const char *argv[4 + TAKE_PER_CALL] = {"", "", "1", c->retry_key};
    emq__script_head(EMQ_SCRIPT_RETRY_WAITS, emq__session_functions(&c->rx),
                     argv);
    for (size_t i = 0; i < n; i++) {
        argv[4 + i] = ids[i].str;
        waits[i] = 0;
    }
    if (n == 0)
        return EMQ_OK;
    emq_reply *reply;
    emq_status st =
        emq__session_call(&c->rx, 0, (int)(4 + n), argv, NULL, &reply, err);
    if (st != EMQ_OK)
        return st;
    if (emq_reply_kind(reply) == EMQ_REPLY_ARRAY && emq_reply_len(reply) == n) {
        for (size_t i = 0; i < n; i++) {
            long long w = emq_reply_integer(emq_reply_at(reply, i));
            waits[i] = w > 0 ? w : 0;
        }
    } else if (emq_reply_kind(reply) == EMQ_REPLY_ERROR) {
        char shown[200];
        emq__consumer_log(c, EMQ_LOG_DEBUG,
                          "reading the retry schedule failed: %s",
                          emq__reply_text(reply, shown, sizeof shown));
    }
    emq_reply_free(reply);
    return EMQ_OK;
}

/* take_page over ids[0..n) (n <= TAKE_PER_CALL), emq__fit of them per
 * call. A take of one ID whose reply was over resp.max_reply_bytes names
 * an entry too large to receive: it is dead-lettered (oversize). A reply
 * over the limit still ends the call with its status: the connection is
 * gone, and the rest stays pending for recover self. */
static emq_status take_ids(emq_consumer_t *c, const emq_id *ids, size_t n,
                           enum take_count count, const char *what,
                           emq_error *err) {
    emq_status st = EMQ_OK;
    for (size_t at = 0; at < n && st == EMQ_OK;) {
        if (emq__consumer_stopping(c))
            break; /* the rest stays pending: recover self */
        size_t k = emq__fit(c, n - at);
        st = take_page(c, ids + at, k, count, what, err);
        if (st != EMQ_OK && emq__fit_failed(c, st, k, what) && k == 1) {
            emq_error oerr;
            emq_status ost = oversize(c, &ids[at], &oerr);
            if (ost != EMQ_OK) {
                if (err)
                    *err = oerr;
                return ost;
            }
            emq__session_healthy(&c->rx); /* progress: no backoff */
        }
        at += k;
    }
    return st;
}

/* The largest entry ID: nothing can come after it. */
#define MAX_ID "18446744073709551615-18446744073709551615"

emq_status emq__recover_self(emq_consumer_t *c, emq_error *err) {
    char start[EMQ_ID_MAX + 1] = "-";
    emq__stream_id last = {0, 0};
    int have_last = 0;
    char count[24];
    emq_status st = EMQ_OK;
    /* No handler had an own pending entry not in the table since its
     * count was raised (see above): taken uncounted. */
    int uncounted = c->lease_continued && !c->claim_unknown;
    int through = 0; /* the whole list was looked at */
    while (!emq__consumer_stopping(c) && emq__lease_valid(c)) {
        /* Pull mode: no more than max_in_flight leaves room for; the rest
         * waits for a later turn. */
        size_t room = emq__ready_room(c);
        if (room == 0) {
            emq__machine_post(&c->machine, EMQ_POST_RECOVER_SELF);
            break;
        }
        long long page = emq__cfg_count(c->conf) < TAKE_PER_CALL
                             ? emq__cfg_count(c->conf)
                             : TAKE_PER_CALL;
        if ((size_t)page > room)
            page = (long long)room;
        page = (long long)emq__fit(c, (size_t)page);
        snprintf(count, sizeof count, "%lld", page);
        const char *argv[] = {"XPENDING", c->keys.stream, c->group, start,
                              "+",        count,          c->name};
        emq_reply *reply;
        if ((st = emq__session_call(&c->rx, 0, 7, argv, NULL, &reply, err)) !=
            EMQ_OK) {
            /* A listing holds IDs only: one that does not fit with a
             * single ID never will. */
            long long limit = (long long)emq__cfg_resp_max_reply(c->conf);
            if (emq__fit_failed(c, st, (size_t)page, "a listing") && page == 1)
                st = emq__error_set(err, EMQ_ELIMIT, 0,
                                    "resp.max_reply_bytes (%lld) is too "
                                    "small even for a list of one pending "
                                    "entry ID; raise it",
                                    limit);
            break;
        }
        if (emq_reply_kind(reply) == EMQ_REPLY_ERROR) {
            st = script_error(c, reply, "reading own pending entries", err);
            break;
        }
        if (emq_reply_kind(reply) != EMQ_REPLY_ARRAY) {
            emq_reply_free(reply);
            st = emq__reply_bad_shape(err, "own pending page is not an array");
            break;
        }
        size_t n = emq_reply_len(reply);
        emq_id listed[TAKE_PER_CALL];
        for (size_t i = 0; i < n && st == EMQ_OK; i++) {
            size_t len = 0;
            const char *text =
                emq_reply_str(emq_reply_at(emq_reply_at(reply, i), 0), &len);
            emq__stream_id sid;
            if (text == NULL || len == 0 || len >= EMQ_ID_MAX ||
                emq__stream_id_parse(text, len, &sid) != 0 ||
                (have_last && emq__stream_id_cmp(sid, last) <= 0) ||
                i >= TAKE_PER_CALL) {
                /* The page must move forward, or the loop would never
                 * end. */
                st = emq__reply_bad_shape(err,
                                          "own pending page does not move past "
                                          "the page before");
                break;
            }
            last = sid;
            have_last = 1;
            memcpy(listed[i].str, text, len);
            listed[i].str[len] = '\0';
            start[0] = '(';
            memcpy(start + 1, text, len);
            start[1 + len] = '\0';
        }
        emq_reply_free(reply);
        /* Listed here but settled by this process, the settlement not
         * written yet: looked at once it is. An acknowledgement sent to
         * the old primary just before a failover leaves its entry pending
         * on the new one, where it is taken back now (counted, with exact
         * counts: a handler had it) rather than after claim idle. */
        int settling = 0;
        for (size_t i = 0; i < n && st == EMQ_OK && !settling; i++)
            settling = emq__inflight_settling(&c->table, &listed[i]);
        if (settling)
            (void)emq__upkeep_wait_settled(c);
        long long waits[TAKE_PER_CALL];
        if (st == EMQ_OK)
            st = retry_waits(c, listed, n, waits, err);
        emq_id take[TAKE_PER_CALL];
        size_t ntake = 0;
        for (size_t i = 0; i < n && st == EMQ_OK; i++) {
            const emq_id *id = &listed[i];
            if (emq__inflight_holds(&c->table, id))
                continue; /* in hand here already (a retry waiting, an
                             ack not sent yet) */
            if (waits[i] > 0) {
                /* A retry whose delay survived a restart: back when due.
                 * In a session that kept the lease, a retry of this
                 * process still in the table was skipped above; one not
                 * there any more was taken (its count raised) by a take
                 * whose reply was lost, and never reached a handler: it
                 * is taken again without a raise. */
                if (emq__inflight_add_waiting(&c->table, id, waits[i],
                                              uncounted) != 0)
                    st = emq__oom(err);
                continue;
            }
            take[ntake++] = *id;
        }
        emq__consumer_log(c, EMQ_LOG_DEBUG,
                          "recovery: a page of %zu own pending entries "
                          "(%zu taken again)",
                          n, ntake);
        if (st == EMQ_OK && ntake > 0)
            st = take_ids(c, take, ntake,
                          uncounted ? TAKE_UNCOUNTED : TAKE_SUSPECT,
                          "reading own pending entries", err);
        if (st == EMQ_OK && n < (size_t)page) {
            /* Through the whole list: what this process dropped and did
             * not find again was taken by peers. */
            emq__inflight_dropped_forget(&c->table);
            through = 1;
            break; /* a short page is the last one */
        }
        if (st != EMQ_OK || strcmp(start, "(" MAX_ID) == 0) {
            through = st == EMQ_OK;
            break;
        }
    }
    if (through)
        c->claim_unknown = 0;
    return st;
}

/* Reads an array of ids (a claim's reply) into out[0..max); returns how
 * many, or (size_t)-1 when one is not an ID. */
static size_t ids_of(const emq_reply *arr, emq_id *out, size_t max) {
    size_t n = emq_reply_len(arr);
    for (size_t i = 0; i < n && i < max; i++) {
        size_t len = 0;
        const char *text = emq_reply_str(emq_reply_at(arr, i), &len);
        if (text == NULL || len == 0 || len >= EMQ_ID_MAX ||
            emq__stream_id_parse(text, len, NULL) != 0)
            return (size_t)-1;
        memcpy(out[i].str, text, len);
        out[i].str[len] = '\0';
    }
    return n < max ? n : max;
}

/* Entries a claim beat took over (pending to us now, their count not
 * raised, idle reset), at most TAKE_PER_CALL: those whose retry delay is
 * still running (their holder failed them, then died) wait it out in the
 * table and are taken, counted, when due (a retry comes back after its
 * delay whoever claims it); the others are taken now, counted
 * once, and handed out. Entries this consumer holds already (a peer took
 * one from a handler's hands and died) are ours again, not taken: *own
 * counts them; *deferred those left waiting. */
static emq_status take_claimed(emq_consumer_t *c, const emq_id *ids, size_t n,
                               size_t *deferred, size_t *own, emq_error *err) {
    long long waits[TAKE_PER_CALL];
    emq_status st = retry_waits(c, ids, n, waits, err);
    emq_id now[TAKE_PER_CALL];
    size_t nnow = 0;
    int64_t at = emq__now_ms();
    for (size_t i = 0; i < n && st == EMQ_OK; i++) {
        /* Ours already (a peer took it from a handler's hands and died):
         * ours again, neither taken nor counted a second time. */
        if (emq__inflight_reclaimed(&c->table, &ids[i], at)) {
            (*own)++;
            continue;
        }
        if (waits[i] > 0) {
            /* In the table already: it waits there (its own retry). */
            if (!emq__inflight_holds(&c->table, &ids[i]) &&
                emq__inflight_add_waiting(&c->table, &ids[i], waits[i], 0) != 0)
                st = emq__oom(err);
            (*deferred)++;
            continue;
        }
        now[nnow++] = ids[i];
    }
    if (st == EMQ_OK && nnow > 0)
        st = take_ids(c, now, nnow, TAKE_CLAIMED, "a claim beat", err);
    return st;
}

/* Deleted entries an XAUTOCLAIM dropped from the pending list (7.0+),
 * this consumer's own too: counted, forgotten (or marked lost in a
 * handler's hands), their reasons and schedule cleared by a SETTLE_GONE
 * each (emq__inflight_gone). */
static void claimed_deleted(emq_consumer_t *c, const emq_reply *deleted) {
    for (size_t i = 0; i < emq_reply_len(deleted); i++) {
        emq_id id;
        size_t len = 0;
        const char *text = emq_reply_str(emq_reply_at(deleted, i), &len);
        if (text == NULL || len == 0 || len >= EMQ_ID_MAX)
            continue;
        memcpy(id.str, text, len);
        id.str[len] = '\0';
        atomic_fetch_add(&c->stats.deleted_pending, 1);
        emq__inflight_gone(&c->table, &id);
    }
}

emq_status emq__recover_peers(emq_consumer_t *c, emq_error *err) {
    char idle[24], count[24];
    snprintf(idle, sizeof idle, "%lld",
             (long long)emq__cfg_claim_min_idle_ms(c->conf));
    emq_status st = EMQ_OK;
    emq_id *ids = NULL;
    for (int call = 0; call < EMQ_CLAIM_CALLS_PER_BEAT; call++) {
        size_t room = emq__ready_room(c);
        if (emq__consumer_stopping(c) || !emq__lease_valid(c) || room == 0)
            break;
        size_t want = (size_t)emq__cfg_claim_count(c->conf) < room
                          ? (size_t)emq__cfg_claim_count(c->conf)
                          : room;
        want = emq__fit(c, want);
        snprintf(count, sizeof count, "%zu", want);
        const char *argv[] = {"",       "",      "1",  c->keys.stream,
                              c->group, c->name, idle, c->claim_cursor,
                              count};
        emq__script_head(EMQ_SCRIPT_CLAIM, emq__session_functions(&c->rx),
                         argv);
        emq_reply *reply;
        if ((st = emq__session_call(&c->rx, 0, 9, argv, NULL, &reply, err)) !=
            EMQ_OK) {
            /* Its reply is lost (too large, cut, timed out): what it
             * claimed is pending to this consumer now, its count not
             * raised (JUSTID), and recover self takes it back after the
             * reconnect (fewer at a time when too large), counted. */
            c->claim_unknown = 1;
            emq__fit_failed(c, st, want, "a claim");
            break;
        }
        if (emq_reply_kind(reply) == EMQ_REPLY_ERROR) {
            if (emq__reply_mentions(reply, "NOGROUP")) {
                st = script_error(c, reply, "a claim beat", err);
                break;
            }
            /* NOPERM for an ACL without XAUTOCLAIM, ...: peers' entries
             * are never taken over. Say so, once a minute. */
            if (emq__now_ms() - c->last_claim_warning_ms >=
                CLAIM_WARNING_EVERY_MS) {
                char shown[200];
                c->last_claim_warning_ms = emq__now_ms();
                emq__consumer_log(c, EMQ_LOG_WARNING,
                                  "claim beat failed, so entries of dead "
                                  "peers are not taken over: %s%s",
                                  emq__reply_refused(reply) &&
                                          !emq__reply_mentions(reply, "NOPERM")
                                      ? "NOPERM (refused by the ACL): "
                                      : "",
                                  emq__reply_text(reply, shown, sizeof shown));
            }
            emq_reply_free(reply);
            break;
        }
        const emq_reply *cursor = emq_reply_at(reply, 0);
        const emq_reply *claimed = emq_reply_at(reply, 1);
        const emq_reply *deleted = emq_reply_at(reply, 2);
        size_t cursor_len = 0;
        const char *cursor_text = emq_reply_str(cursor, &cursor_len);
        size_t n = 0;
        if (ids == NULL &&
            (ids = emq__alloc((size_t)emq__cfg_claim_count(c->conf) *
                              sizeof *ids)) == NULL) {
            emq_reply_free(reply);
            st = emq__oom(err);
            break;
        }
        if (emq_reply_kind(reply) != EMQ_REPLY_ARRAY ||
            emq_reply_len(reply) != 3 || cursor_text == NULL ||
            cursor_len == 0 || cursor_len >= EMQ_ID_MAX ||
            emq__stream_id_parse(cursor_text, cursor_len, NULL) != 0 ||
            emq_reply_kind(claimed) != EMQ_REPLY_ARRAY ||
            emq_reply_len(claimed) > want ||
            (n = ids_of(claimed, ids, want)) == (size_t)-1) {
            c->claim_unknown = 1; /* as for a lost reply */
            emq_reply_free(reply);
            st = emq__reply_bad_shape(err,
                                      "XAUTOCLAIM is not [cursor, entries, "
                                      "deleted]");
            break;
        }
        memcpy(c->claim_cursor, cursor_text, cursor_len);
        c->claim_cursor[cursor_len] = '\0';
        claimed_deleted(c, deleted);
        emq_reply_free(reply);
        int wrapped = strcmp(c->claim_cursor, "0-0") == 0;
        if (n == 0) {
            /* Nothing idle in this stretch: the next beat goes on from the
             * cursor. Going on now would spend server time (each call
             * examines up to COUNT x 10 entries) to find, most likely,
             * nothing again. */
            break;
        }
        size_t deferred = 0, own = 0;
        /* 6.2's XAUTOCLAIM claims deleted entries too; their take finds
         * them gone and counts them as deleted_pending, not claimed. */
        uint64_t gone_before = atomic_load(&c->stats.deleted_pending);
        for (size_t i = 0; i < n && st == EMQ_OK; i += TAKE_PER_CALL)
            st = take_claimed(c, ids + i,
                              n - i < TAKE_PER_CALL ? n - i : TAKE_PER_CALL,
                              &deferred, &own, err);
        uint64_t gone = atomic_load(&c->stats.deleted_pending) - gone_before;
        if (gone + own < n)
            atomic_fetch_add(&c->stats.claimed, n - own - gone);
        emq__consumer_log(c, EMQ_LOG_DEBUG,
                          "claim beat: %zu entries idle %s ms or more taken "
                          "over (%zu wait out their retry delay)",
                          n, idle, deferred);
        if (st != EMQ_OK || wrapped)
            break;
    }
    emq__free(ids);
    return st;
}

emq_status emq__recover_due(emq_consumer_t *c, emq_error *err) {
    emq_id ids[TAKE_PER_CALL];
    emq_status st = EMQ_OK;
    for (int uncounted = 0; uncounted < 2; uncounted++) {
        while (st == EMQ_OK && !emq__consumer_stopping(c) &&
               emq__lease_valid(c)) {
            size_t room = emq__ready_room(c);
            size_t n =
                emq__inflight_due(&c->table, emq__now_ms(), uncounted, ids,
                                  room < TAKE_PER_CALL ? room : TAKE_PER_CALL);
            if (n == 0)
                break;
            /* Out of the table (emq__inflight_due): what is still ours
             * comes back in the reply and enters it again with its new
             * count. */
            st = take_ids(c, ids, n, uncounted ? TAKE_UNCOUNTED : TAKE_COUNTED,
                          "delivering due retries", err);
        }
    }
    return st;
}
