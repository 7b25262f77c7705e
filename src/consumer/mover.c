/* SPDX-License-Identifier: BSD-3-Clause */
/* mover.c: due delayed entries to the stream, from the upkeep's rounds.
 *
 * Every consumer of a queue moves its due delayed entries (streams'
 * schedule.c: one atomic script, each entry moved once whoever runs it).
 * The upkeep asks in two steps:
 *   - a look, every delayed.poll_ms: TIME and the first waiting entry
 *     with its due time (ZRANGE ... 0 0 WITHSCORES). Both are single-key
 *     (or keyless) commands, so a queue without delayed entries costs two
 *     cheap commands per poll, and a slot being migrated answers with an
 *     ASK the route follows, never with the TRYAGAIN a script over keys
 *     that do not exist would get;
 *   - when the look finds an entry due by the server's clock within a
 *     poll, the move script when it is due (up to EMQ_MOVER_MAX entries; a
 *     full move goes again at once; else the next look comes when the
 *     script says the next entry is due, or after a poll). Otherwise the
 *     next look comes after delayed.poll_ms.
 * A user that may not move (a least-privilege ACL) is told once, at level
 * info, and the mover stops asking; other errors wait
 * EMQ_MOVER_REFUSED_MS.
 */
#include "mover.h"

#include <stdio.h>
#include <stdlib.h>

/* Most delayed entries one move takes. */
#define EMQ_MOVER_MAX 100
/* After a refused step, the next one waits this long at least. */
#define EMQ_MOVER_REFUSED_MS 5000

void emq__mover_init(emq_consumer_t *c, int64_t now) {
    c->mover.next_ms = emq__cfg_delayed_poll_ms(c->conf) > 0 ? now : INT64_MAX;
    c->mover.move = 0;
}

int64_t emq__mover_next_ms(const emq_consumer_t *c) { return c->mover.next_ms; }

emq_status emq__mover_append(emq_consumer_t *c, emq__session *x, int64_t now,
                             emq__mover_round *r, emq_error *err) {
    *r = (emq__mover_round){.server_ms = -1, .first_due = -1};
    if (now < c->mover.next_ms)
        return EMQ_OK;
    emq_status st;
    if (c->mover.move) {
        char max[24];
        const char *argv[EMQ_DELAYED_MOVE_ARGC];
        snprintf(max, sizeof max, "%d", EMQ_MOVER_MAX);
        int argc = emq__delayed_move_argv(argv, &c->delayed, c->keys.stream,
                                          max, atomic_load(&c->prioritized),
                                          emq__session_functions(x));
        st = emq__session_append(x, EMQ_MOVER_TAG_MOVE, argc, argv, NULL, err);
        r->moved = st == EMQ_OK;
    } else {
        const char *time_argv[] = {"TIME"};
        const char *first[] = {"ZRANGE", c->delayed.waiting, "0", "0",
                               "WITHSCORES"};
        st =
            emq__session_append(x, EMQ_MOVER_TAG_TIME, 1, time_argv, NULL, err);
        if (st == EMQ_OK)
            st = emq__session_append(x, EMQ_MOVER_TAG_FIRST, 5, first, NULL,
                                     err);
        r->probed = st == EMQ_OK;
    }
    /* A reply schedules the next step; until then, none. */
    c->mover.next_ms = INT64_MAX;
    return st;
}

/* The step after a refused one: never for a user that may not, later for
 * anything else. */
static void refused(emq_consumer_t *c, const emq_reply *reply,
                    int64_t sent_ms) {
    int64_t poll = emq__cfg_delayed_poll_ms(c->conf);
    c->mover.move = 0;
    if (emq__reply_refused(reply)) {
        /* Such a worker is a choice (docs/SECURITY.md): information, once;
         * other consumers of the queue may move them. */
        emq__consumer_log(c, EMQ_LOG_INFO,
                          "this consumer moves no delayed entries: its user "
                          "may not (an ACL without the delayed keys' "
                          "commands, docs/SECURITY.md)");
        c->mover.next_ms = INT64_MAX;
        return;
    }
    char shown[200];
    emq__consumer_log(c, EMQ_LOG_WARNING,
                      "moving due delayed entries failed: %s",
                      emq__reply_text(reply, shown, sizeof shown));
    c->mover.next_ms =
        sent_ms + (poll > EMQ_MOVER_REFUSED_MS ? poll : EMQ_MOVER_REFUSED_MS);
}

/* The due time of a ZRANGE ... WITHSCORES reply's first entry (RESP2
 * [member, score], RESP3 [[member, score]]), clamped (emq__due_ms); -1
 * when none waits. A score a hand wrote as -1 is due now, not "none". */
static int64_t first_score(const emq_reply *r) {
    const emq_reply *pair = r;
    if (emq_reply_len(pair) == 1)
        pair = emq_reply_at(pair, 0);
    int64_t ms;
    if (emq_reply_len(pair) != 2 || !emq__due_ms(emq_reply_at(pair, 1), &ms))
        return -1;
    return ms;
}

void emq__mover_apply(emq_consumer_t *c, emq__mover_round *r, int tag,
                      const emq_reply *reply, int64_t sent_ms) {
    int64_t poll = emq__cfg_delayed_poll_ms(c->conf);
    if (r->answered)
        return; /* the step was already decided (a refused look) */
    if (emq__reply_not_now(reply, 0)) { /* LOADING, BUSY, ...: later */
        r->answered = 1;
        c->mover.move = 0;
        c->mover.next_ms = sent_ms + poll;
        return;
    }
    if (emq_reply_kind(reply) == EMQ_REPLY_ERROR) {
        r->answered = 1;
        refused(c, reply, sent_ms);
        return;
    }
    if (tag == EMQ_MOVER_TAG_TIME) {
        const char *sec = emq_reply_str(emq_reply_at(reply, 0), NULL);
        const char *usec = emq_reply_str(emq_reply_at(reply, 1), NULL);
        if (sec && usec)
            r->server_ms = strtoll(sec, NULL, 10) * 1000 +
                           strtoll(usec, NULL, 10) / 1000;
        return;
    }
    if (tag == EMQ_MOVER_TAG_FIRST) {
        r->first_answered = emq_reply_kind(reply) == EMQ_REPLY_ARRAY;
        r->first_due = r->first_answered ? first_score(reply) : -1;
        return;
    }
    emq__delayed_moved m;
    emq_error why;
    r->answered = 1;
    if (emq__delayed_move_reply(reply, &m, &why) != EMQ_OK) {
        refused(c, reply, sent_ms);
        return;
    }
    atomic_fetch_add(&c->stats.delayed_moved, m.moved);
    if (m.set_aside > 0)
        emq__consumer_log(c, EMQ_LOG_WARNING,
                          "%llu due delayed entries held a payload that is "
                          "not an entry (written by hand?): set aside in "
                          "'%s' (echomq info counts them), the others "
                          "moved",
                          (unsigned long long)m.set_aside, c->delayed.bad);
    if (m.vanished > 0)
        emq__consumer_log(c, EMQ_LOG_WARNING,
                          "%llu due delayed entries had no payload in '%s' "
                          "(deleted by hand, or by a credential that may "
                          "write the schedule): nothing to move, dropped",
                          (unsigned long long)m.vanished, c->delayed.entries);
    /* A full move: more may be due. Else look again when the next is due,
     * or after a poll. */
    c->mover.move = m.moved == EMQ_MOVER_MAX;
    c->mover.next_ms = m.moved == EMQ_MOVER_MAX ? sent_ms
                       : m.next_in_ms >= 0 && m.next_in_ms < poll
                           ? sent_ms + m.next_in_ms
                           : sent_ms + poll;
}

void emq__mover_finish(emq_consumer_t *c, emq__mover_round *r, emq_status st,
                       int64_t now) {
    int64_t poll = emq__cfg_delayed_poll_ms(c->conf);
    if (!r->probed && !r->moved)
        return;
    if (r->answered)
        return;
    if (st != EMQ_OK ||
        (r->probed && (!r->first_answered || r->server_ms < 0))) {
        c->mover.move = 0; /* the replies were lost: look again soon */
        c->mover.next_ms = now + poll;
        return;
    }
    if (r->moved) /* moved's reply was applied (answered): not here */
        return;
    if (r->first_due < 0) { /* none waits */
        c->mover.move = 0;
        c->mover.next_ms = now + poll;
        return;
    }
    /* Due within a poll: the move goes when it is due (the script reads
     * the server's clock itself and answers when the next one is). */
    int64_t in = r->first_due - r->server_ms;
    c->mover.move = in < poll;
    c->mover.next_ms = in <= 0 ? now : now + (in < poll ? in : poll);
}
