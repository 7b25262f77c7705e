/* SPDX-License-Identifier: BSD-3-Clause */
/* marks.c: the consumer's unseen marks, for the upkeep (marks.h). */
#include "marks.h"
#include "inflight.h"

enum {
    TAG_MARK = EMQ_TAG(EMQ_TAGS_MARKS, 0),
    TAG_UNMARK,
    TAG_UNMARK_WAIT /* deliveries.wait_replicas: the removals replicated */
};

/* A removal short of deliveries.wait_replicas is warned about at most
 * this often (it goes again every round until it gets there). */
#define WAIT_WARNING_EVERY_MS 10000

void emq__marks_init(emq_consumer_t *c, int64_t now_ms) {
    c->marks.next_ms = now_ms + EMQ_UNSEEN_AFTER_MS;
}

/* Entries in the table neither in a handler's hands nor waiting out a
 * retry: read and waiting to be handed out (table.mu held). */
static int some_wait(const emq__inflight *t) {
    return t->n > atomic_load(&t->nhandling) + t->nwait;
}

int64_t emq__marks_next_ms(emq_consumer_t *c) {
    return some_wait(&c->table) ? c->marks.next_ms : INT64_MAX;
}

int emq__marks_due(emq_consumer_t *c, int64_t now_ms) {
    return c->table.nunmark > 0 || c->table.nremark > 0 ||
           emq__marks_next_ms(c) <= now_ms;
}

emq_status emq__marks_append(emq_consumer_t *c, emq__session *x, int64_t now_ms,
                             int64_t round_ms, emq_id *unmarks, emq_id *ids,
                             emq__marks_round *mr, emq_error *err) {
    emq_status st = EMQ_OK;
    mr->nunmarks = emq__inflight_unmark_take(
        &c->table, unmarks, EMQ_SETTLE_MAX_IDS, &mr->unmark_upto);
    if (mr->nunmarks > 0)
        st = emq__consumer_append_ids(x, TAG_UNMARK,
                                      (const char *[]){"SREM", c->unseen_key},
                                      2, unmarks, mr->nunmarks, err);
    /* The removal is the handout's record: with deliveries.wait_replicas
     * the handout waits until replicas have it (and the read before it,
     * earlier in the one replication stream). */
    mr->wait_want = 0;
    if (mr->nunmarks > 0 && st == EMQ_OK)
        st = emq__consumer_append_wait(c, x, TAG_UNMARK_WAIT, &mr->wait_want,
                                       err);
    if (st != EMQ_OK)
        return st;
    /* Handouts undone first: each goes right behind its removal. */
    mr->nmarks = emq__inflight_remark_take(&c->table, ids, EMQ_SETTLE_MAX_IDS);
    if (now_ms >= c->marks.next_ms) {
        /* With exact counts reads mark what they deliver: what is left is
         * an entry whose handout was undone after its mark went. */
        int64_t after = c->exact
                            ? EMQ_UNSEEN_SOON_MS
                            : emq__inflight_mark_after_ms(&c->table, round_ms);
        size_t room = EMQ_SETTLE_MAX_IDS - mr->nmarks;
        size_t nlooked = emq__inflight_to_mark(&c->table, now_ms, after,
                                               ids + mr->nmarks, room);
        mr->nmarks += nlooked;
        c->marks.next_ms = nlooked == room ? now_ms
                           : after > 2     ? now_ms + after / 2
                                           : now_ms + 1;
    }
    if (mr->nmarks > 0) {
        const char *words[] = {
            "", "", "2", c->keys.stream, c->unseen_key, c->group, c->name};
        emq__script_head(EMQ_SCRIPT_MARK, emq__session_functions(x), words);
        st = emq__consumer_append_ids(x, TAG_MARK, words, 7, ids, mr->nmarks,
                                      err);
    }
    return st;
}

/* The WAIT behind the removals: short of deliveries.wait_replicas, or
 * refused (an ACL without WAIT), the removals go again (the handout waits
 * on, bounded by the lease) and the round pauses; said at warning level
 * now and then. */
static void unmark_waited(emq_consumer_t *c, emq__marks_round *mr,
                          const emq_reply *reply) {
    long long got = emq_reply_kind(reply) == EMQ_REPLY_INTEGER
                        ? emq_reply_integer(reply)
                        : -1;
    if (got >= mr->wait_want)
        return;
    mr->unmark_answered = 0;
    mr->later = 1;
    if (got < 0 && !emq__reply_transient(reply)) {
        /* Refused (an ACL without WAIT): nothing could ever go out. */
        emq_error err;
        emq__reply_error_set(&err, reply,
                             "WAIT for a handout's replicas was refused; the "
                             "consumer stops (grant WAIT, or set "
                             "deliveries.wait_replicas 0)");
        emq__consumer_fatal(c, &err);
        return;
    }
    int64_t now = emq__now_ms();
    if (c->marks.warned_ms != 0 &&
        now < c->marks.warned_ms + WAIT_WARNING_EVERY_MS)
        return;
    c->marks.warned_ms = now;
    char shown[160];
    if (got < 0)
        emq__consumer_log(c, EMQ_LOG_WARNING,
                          "WAIT for a handout's replicas was answered %s: "
                          "the entry waits, and its record is sent again",
                          emq__reply_text(reply, shown, sizeof shown));
    else
        emq__consumer_log(
            c, EMQ_LOG_WARNING,
            "a handout's record reached %lld of %lld replicas within %lld ms "
            "(deliveries.wait_replicas, deliveries.wait_timeout_ms): the "
            "entry waits, and its record is sent again",
            got, mr->wait_want,
            (long long)emq__cfg_deliveries_wait_timeout_ms(c->conf));
}

void emq__marks_apply(emq_consumer_t *c, emq__marks_round *mr, int tag,
                      const emq_reply *reply) {
    if (tag == TAG_UNMARK_WAIT) {
        unmark_waited(c, mr, reply);
        return;
    }
    /* An unmark answered "not now" (LOADING, BUSY, MISCONF, ...) did not
     * run: the mark is still there, so it goes again and the handout
     * waiting for it waits on (handed out meanwhile, the entry's handler
     * would not be counted at the next crash: a count below the truth).
     * The round pauses before the next: a server refusing writes for
     * seconds would otherwise get the removal again in a tight loop. */
    int later = emq__reply_transient(reply);
    if (emq_reply_kind(reply) == EMQ_REPLY_ERROR) {
        char shown[160];
        emq__consumer_log(c, later ? EMQ_LOG_DEBUG : EMQ_LOG_WARNING,
                          "%s unseen marks failed%s: %s",
                          tag == TAG_MARK ? "writing" : "removing",
                          later && tag == TAG_UNMARK ? " (sent again)" : "",
                          emq__reply_text(reply, shown, sizeof shown));
    }
    if (tag == TAG_UNMARK)
        mr->unmark_answered = !later;
    else
        mr->mark_answered = !later;
    if (later)
        mr->later = 1;
}

void emq__marks_finish(emq_consumer_t *c, const emq__marks_round *mr,
                       emq_status st, const emq_id *unmarks,
                       const emq_id *ids) {
    if (mr->nunmarks > 0)
        emq__inflight_unmark_finish(&c->table,
                                    st == EMQ_OK && mr->unmark_answered,
                                    mr->unmark_upto, unmarks, mr->nunmarks);
    /* Marks not known written go again (a mark twice is one mark). */
    if (mr->nmarks > 0 && (st != EMQ_OK || !mr->mark_answered))
        emq__inflight_remark_again(&c->table, ids, mr->nmarks);
}
