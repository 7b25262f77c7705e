/* SPDX-License-Identifier: BSD-3-Clause */
/* entries.c: stream entries out of replies, and handing them to the
 * handler.
 *
 * Shapes handled (they differ by protocol and server version):
 *   XREADGROUP, RESP2: [[stream, [[id, [f, v, ...]], ...]]] or *-1;
 *   XREADGROUP, RESP3: {stream: [[id, [f, v, ...]], ...]} or _;
 *   7.0 may answer a blocked read with [[stream, []]];
 *   a pending entry whose stream entry was deleted comes as [id, nil];
 *   XAUTOCLAIM: [cursor, [[id, fields], ...], [deleted ids]].
 * Field values are views into the reply: valid until the batch is cleared,
 * which happens after the handler has returned.
 */
#include "entries.h"
#include "core.h"
#include "inflight.h"
#include "lease.h"
#include "ready.h"
#include "settle.h"
#include "stats.h"
#include "upkeep.h"

#include <string.h>
#include <time.h>

void emq__batch_init(batch *b) { memset(b, 0, sizeof *b); }

void emq__batch_clear(batch *b) {
    emq_reply_free(b->reply);
    b->reply = NULL;
    b->n = 0;
}

void emq__batch_free(batch *b) {
    emq__batch_clear(b);
    emq__free(b->items);
    memset(b, 0, sizeof *b);
}

const emq_reply *emq__xread_entries(const emq_reply *reply, emq_error *err,
                                    emq_status *st) {
    *st = EMQ_OK;
    emq_reply_type kind = emq_reply_kind(reply);
    if (kind == EMQ_REPLY_NULL)
        return NULL;
    const emq_reply *entries = NULL;
    if (kind == EMQ_REPLY_ARRAY && emq_reply_len(reply) == 1) {
        const emq_reply *pair = emq_reply_at(reply, 0);
        if (emq_reply_kind(pair) == EMQ_REPLY_ARRAY && emq_reply_len(pair) == 2)
            entries = emq_reply_at(pair, 1);
    } else if (kind == EMQ_REPLY_MAP && emq_reply_len(reply) == 2) {
        entries = emq_reply_at(reply, 1);
    } else if ((kind == EMQ_REPLY_ARRAY || kind == EMQ_REPLY_MAP) &&
               emq_reply_len(reply) == 0) {
        return NULL;
    }
    if (entries == NULL || emq_reply_kind(entries) != EMQ_REPLY_ARRAY) {
        *st = emq__reply_bad_shape(
            err, "XREADGROUP reply is not [[stream, entries]]");
        return NULL;
    }
    return emq_reply_len(entries) ? entries : NULL;
}

/* 1 when fields (of kind) has the shape of a field list: null (deleted)
 * or an array of names and values, in pairs. That each one is a string is
 * checked when the entry is handed out (build_fields), in the same pass
 * that builds the views. */
static int fields_shaped(const emq_reply *fields, emq_reply_type kind) {
    return kind == EMQ_REPLY_NULL ||
           (kind == EMQ_REPLY_ARRAY && emq_reply_len(fields) % 2 == 0);
}

emq_status emq__batch_parse(batch *b, emq_reply *reply,
                            const emq_reply *entries, emq_error *err) {
    emq__batch_clear(b);
    b->reply = reply;
    size_t n = emq_reply_len(entries);
    if (n > b->cap) {
        batch_item *items = emq__realloc(b->items, n * sizeof *items);
        if (items == NULL) {
            emq__batch_clear(b);
            return emq__oom(err);
        }
        b->items = items;
        b->cap = n;
    }
    for (size_t i = 0; i < n; i++) {
        /* Each accessor asked once: this runs for every entry read. */
        const emq_reply *entry = emq_reply_at(entries, i);
        size_t parts = emq_reply_len(entry);
        const emq_reply *id = emq_reply_at(entry, 0);
        const emq_reply *fields = parts == 2 ? emq_reply_at(entry, 1) : NULL;
        emq_reply_type fields_kind = emq_reply_kind(fields);
        size_t id_len = 0;
        const char *id_text = emq_reply_str(id, &id_len);
        batch_item *item = &b->items[i];
        if (emq_reply_kind(entry) != EMQ_REPLY_ARRAY || parts < 1 ||
            emq_reply_kind(id) != EMQ_REPLY_STRING || id_len == 0 ||
            id_len >= EMQ_ID_MAX ||
            emq__stream_id_parse(id_text, id_len, &b->items[i].key) != 0) {
            /* Without an ID nothing can be settled: the reply is broken. */
            emq__batch_clear(b);
            return emq__reply_bad_shape(err, "an entry has no stream ID");
        }
        memcpy(item->id.str, id_text, id_len);
        item->id.str[id_len] = '\0';
        item->malformed = parts != 2 || !fields_shaped(fields, fields_kind);
        item->fields =
            item->malformed || fields_kind == EMQ_REPLY_NULL ? NULL : fields;
        item->deliveries = 0;
        item->held = 0;
        item->unseen = 0;
        item->alone = 0;
    }
    b->n = n;
    return EMQ_OK;
}

emq_status emq__entry_fields(emq_consumer_t *c, batch_item *item,
                             emq_field *out, size_t *nfields, emq_error *err) {
    size_t n = emq_reply_len(item->fields) / 2;
    if (out == NULL) {
        if (n > c->fields_cap) {
            emq_field *f = emq__realloc(c->fields, n * sizeof *f);
            if (f == NULL)
                return emq__oom(err);
            c->fields = f;
            c->fields_cap = n;
        }
        out = c->fields;
    }
    if (emq__reply_field_views(item->fields, out, n) != 0) {
        item->malformed = 1; /* a name or value that is not a string */
        item->fields = NULL;
        *nfields = 0;
        return EMQ_OK;
    }
    *nfields = n;
    return EMQ_OK;
}

/* Builds the settlement of item (reason may be NULL). */
static emq_status make_op(emq_consumer_t *c, const batch_item *item,
                          settle_kind kind, const char *reason, settle_op *op,
                          emq_error *err) {
    emq_status st =
        emq__settle_make(c, &item->id, item->deliveries, kind, reason, op, err);
    op->key = item->key; /* the table finds it without reading the text */
    return st;
}

/* Runs the handler on one entry; *op is its settlement. */
static emq_status handle(emq_consumer_t *c, batch_item *item, settle_op *op,
                         emq_error *err) {
    size_t nfields = 0;
    emq_status st = emq__entry_fields(c, item, NULL, &nfields, err);
    if (st != EMQ_OK)
        return st;
    if (item->malformed) /* a name or value that is not a string */
        return make_op(c, item, SETTLE_DEAD, "malformed entry", op, err);
    emq_entry entry = {
        .id = item->id.str,
        .deliveries = item->deliveries,
        .fields = c->fields,
        .nfields = nfields,
        .stream = c->keys.stream,
        .group = c->group,
        .consumer = c->name,
    };
    char reason[256] = "";
    uint64_t max = (uint64_t)emq__cfg_max_deliveries(c->conf);
    atomic_fetch_add(&c->stats.delivered, 1);
    int stats = emq__stats_on(c);
    struct timespec t0, t1;
    if (stats)
        clock_gettime(CLOCK_MONOTONIC, &t0);
    emq_verdict verdict = c->handler(c->opaque, &entry, reason, sizeof reason);
    if (stats) {
        clock_gettime(CLOCK_MONOTONIC, &t1);
        emq__stats_latency(c, (int64_t)(t1.tv_sec - t0.tv_sec) * 1000000 +
                                  (t1.tv_nsec - t0.tv_nsec) / 1000);
        emq__stats_delivery(c, item->deliveries);
    }
    reason[sizeof reason - 1] = '\0';
    switch (verdict) {
    case EMQ_ACK:
        return make_op(c, item, SETTLE_ACK, NULL, op, err);
    case EMQ_RETRY:
        atomic_fetch_add(&c->stats.retried, 1);
        atomic_fetch_add(&c->stats.failed, 1);
        if (reason[0] == '\0')
            strcpy(reason, "handler asked for a retry");
        return make_op(c, item,
                       item->deliveries >= max ? SETTLE_DEAD : SETTLE_RETRY,
                       reason, op, err);
    case EMQ_DEAD:
    default:
        atomic_fetch_add(&c->stats.failed, 1);
        if (reason[0] == '\0')
            strcpy(reason, "handler gave up on the entry");
        return make_op(c, item, SETTLE_DEAD, reason, op, err);
    }
}

/* Queues a SETTLE_RELEASE of every item from first on that was not in
 * hand before this batch. */
static emq_status release_rest(emq_consumer_t *c, batch *b, size_t first,
                               emq_error *err) {
    emq_status st = EMQ_OK;
    for (size_t i = first; i < b->n && st == EMQ_OK; i++)
        if (!b->items[i].held)
            st = emq__inflight_release(&c->table, &b->items[i], err);
    return st;
}

/* Entries no handler may see are settled at once: malformed, deleted or
 * trimmed while pending (ack and count), or delivered more often than
 * allowed without an answer (a handler that crashed its process, say).
 * Returns 1 with *op built (or *st failed) for those, 0 for the others. */
static int settle_unseen(emq_consumer_t *c, const batch_item *item,
                         settle_op *op, emq_status *st, emq_error *err) {
    if (item->malformed) {
        *st = make_op(c, item, SETTLE_DEAD, "malformed entry", op, err);
    } else if (item->fields == NULL) {
        atomic_fetch_add(&c->stats.deleted_pending, 1);
        *st = make_op(c, item, SETTLE_GONE, NULL, op, err);
    } else if (item->deliveries > (uint64_t)emq__cfg_max_deliveries(c->conf)) {
        *st = make_op(c, item, SETTLE_DEAD, NULL, op, err);
    } else {
        return 0;
    }
    return 1;
}

/* Pull mode: a chunk able to hold every entry of b, its field views and
 * copies of the names an entry shows. NULL when out of memory. */
static emq__chunk *chunk_new(emq_consumer_t *c, const batch *b) {
    size_t nfields = 0;
    for (size_t i = 0; i < b->n; i++)
        if (!b->items[i].held && b->items[i].fields != NULL)
            nfields += emq_reply_len(b->items[i].fields) / 2;
    emq__chunk *ch = emq__calloc(1, sizeof *ch + b->n * sizeof ch->items[0]);
    if (ch == NULL)
        return NULL;
    size_t ls = strlen(c->keys.stream) + 1, lg = strlen(c->group) + 1,
           ln = strlen(c->name) + 1;
    ch->names = emq__alloc(ls + lg + ln);
    ch->fields = emq__alloc((nfields ? nfields : 1) * sizeof *ch->fields);
    if (ch->names == NULL || ch->fields == NULL) {
        emq__free(ch->names);
        emq__free(ch->fields);
        emq__free(ch);
        return NULL;
    }
    memcpy(ch->names, c->keys.stream, ls);
    memcpy(ch->names + ls, c->group, lg);
    memcpy(ch->names + ls + lg, c->name, ln);
    ch->cap = b->n;
    return ch;
}

/* Pull mode: adds item to ch for poll to hand out; an item whose field
 * views turn out malformed is marked so and not added. */
static emq_status chunk_add(emq_consumer_t *c, emq__chunk *ch, batch_item *item,
                            emq_error *err) {
    size_t nfields = 0;
    emq_field *fields = ch->fields + ch->nfields;
    emq_status st = emq__entry_fields(c, item, fields, &nfields, err);
    if (st != EMQ_OK || item->malformed)
        return st;
    handout *h = &ch->items[ch->n++];
    size_t ls = strlen(ch->names) + 1;
    h->chunk = ch;
    h->owner = c;
    h->item = *item;
    h->pub = (emq_entry){
        .id = h->item.id.str,
        .deliveries = item->deliveries,
        .fields = fields,
        .nfields = nfields,
        .stream = ch->names,
        .group = ch->names + ls,
        .consumer = ch->names + ls + strlen(ch->names + ls) + 1,
    };
    ch->nfields += nfields;
    return EMQ_OK;
}

/* Pull mode: hands ch to the ready queue with the reply its entries point
 * into (taken from b), or frees it when it holds none. */
static emq_status chunk_push(emq_consumer_t *c, emq__chunk *ch, batch *b,
                             emq_error *err) {
    if (ch->n == 0) {
        atomic_store(&ch->refs, 1);
        emq__chunk_unref(ch);
        return EMQ_OK;
    }
    ch->reply = b->reply;
    b->reply = NULL;
    atomic_store(&ch->refs, ch->n);
    emq_status st = emq__ready_push(c->ready, ch, err);
    if (st != EMQ_OK) { /* not queued: the reply goes back to b */
        b->reply = ch->reply;
        ch->reply = NULL;
        atomic_store(&ch->refs, 1);
        emq__chunk_unref(ch);
    }
    return st;
}

emq_status emq__batch_dispatch(emq_consumer_t *c, batch *b, emq_error *err) {
    /* Everything read is owned from now on: into the table first (one
     * lock for the batch), so the upkeep thread refreshes entries that
     * wait behind a slow one. Entries held before (a retry waiting, an
     * ack not sent yet) come back marked held and are not handed out. */
    int64_t now = emq__now_ms();
    int64_t taken = b->taken_ms > 0 ? b->taken_ms : now;
    if (emq__inflight_add_batch(&c->table, b->items, b->n, taken) != 0)
        return emq__oom(err);
    if (c->table.stale_after_ms > 0 && now - taken > c->table.stale_after_ms) {
        /* Nothing of it may be handed out: say why, once a run. */
        emq__consumer_log(
            c, c->late_warned ? EMQ_LOG_DEBUG : EMQ_LOG_WARNING,
            "a reply of %zu entries took %lld ms to arrive, more than three "
            "quarters of claim.min_idle_ms (%lld): its entries are not "
            "handed out, as a peer may take them any moment; a link this "
            "slow for entries this big needs a higher claim.min_idle_ms or "
            "a lower count",
            b->n, (long long)(now - taken),
            (long long)emq__cfg_claim_min_idle_ms(c->conf));
        c->late_warned = 1;
    }
    emq_status st = EMQ_OK;
    /* Pull mode: what may be handed out goes to the ready queue, in one
     * chunk, for poll; else to the handler here, one by one. */
    emq__chunk *ch = NULL;
    if (c->ready != NULL && (ch = chunk_new(c, b)) == NULL) {
        emq__inflight_drop_unstarted(&c->table);
        return emq__oom(err);
    }
    /* The settlement decided last is queued together with the next begin,
     * in one lock: at once, since the next handler starts right away. */
    settle_op op;
    int have = 0, broke = 0;
    size_t i, rest = 0; /* rest: where the release starts, when not at i */
    for (i = 0; i < b->n && st == EMQ_OK; i++) {
        batch_item *item = &b->items[i];
        if (item->held)
            continue;
        if (item->deliveries == 0)
            item->deliveries = 1; /* never unknown; at least this one */
        /* Past the lease's deadline, or asked to stop: hand out nothing
         * more; the rest stays pending and comes back (recover self). */
        if (emq__consumer_stopping(c) || !emq__lease_valid(c)) {
            broke = 1;
            break;
        }
        settle_op next;
        int unseen = settle_unseen(c, item, &next, &st, err);
        if (!unseen && ch != NULL && st == EMQ_OK) {
            st = chunk_add(c, ch, item, err);
            if (st != EMQ_OK || !item->malformed)
                continue;
            /* A name or value that is not a string. */
            st = make_op(c, item, SETTLE_DEAD, "malformed entry", &next, err);
            unseen = 1;
        }
        if (unseen) {
            if (st == EMQ_OK && have)
                st = emq__inflight_step(&c->table, &op, NULL, NULL, NULL, err);
            have = 0;
            if (st == EMQ_OK) {
                op = next;
                have = 1;
            } else {
                emq__settle_op_free(&next);
            }
            continue;
        }
        int go = 0, waited = 0;
        int64_t began_ms;
        if (item->alone) {
            /* A suspect of a crash goes out once what the handler settled
             * before it is written: it takes no acknowledgement with it.
             * Waited for before its begin, which asks its mark away: the
             * mark stays while nothing but this wait stands between. */
            if (have)
                st = emq__inflight_step(&c->table, &op, NULL, NULL, NULL, err);
            have = 0;
            if (st == EMQ_OK)
                waited = emq__upkeep_wait_settled(c);
        }
        if (st == EMQ_OK)
            st = emq__inflight_step(&c->table, have ? &op : NULL, item, &go,
                                    &began_ms, err);
        have = 0;
        if (st == EMQ_OK && go == 1) {
            int unmarked = emq__upkeep_wait_unmarked(c); /* marks go first */
            waited |= unmarked != 0;
            /* Looked at again last thing: a pause (SIGSTOP) or the mark's
             * wait may have outlasted the lease since the begin, and a
             * peer may hold the entry by now. It goes back (released).
             * Without a wait, the begin's own clock reading (under the
             * table's lock, a few instructions back) stands for now. */
            if (waited)
                began_ms = emq__now_coarse_ms();
            /* A wait given up (the lease lapsed, a stop) with its mark
             * maybe still there: not handed out even if the lease is held
             * again by now (a crash would not count its handler). */
            if (unmarked < 0 || emq__consumer_stopping(c) ||
                !emq__lease_valid_at(c, began_ms)) {
                /* Its mark is asked again, not its count undone: that
                 * release would wait for the lease, and a peer's claim
                 * meanwhile would count a delivery no handler had. */
                emq__inflight_unbegin(&c->table, &item->id);
                broke = 1;
                rest = i + 1;
                break;
            }
            /* And the entry itself, after a wait: not refreshed for most
             * of claim idle since (a stop during the wait), a peer whose
             * claim found its mark may have it, uncounted. */
            if (waited && !emq__inflight_still_ours(&c->table, &item->id)) {
                emq__machine_post(&c->machine, EMQ_POST_RECOVER_SELF);
                continue;
            }
            st = handle(c, item, &op, err);
            have = st == EMQ_OK;
        } else if (go < 0) {
            /* Pending to us, not refreshed in time: recover self brings
             * it back (uncounted, in a session that kept the lease). */
            emq__machine_post(&c->machine, EMQ_POST_RECOVER_SELF);
        }
    }
    if (have && st == EMQ_OK)
        st = emq__inflight_step(&c->table, &op, NULL, NULL, NULL, err);
    else if (have)
        emq__settle_op_free(&op);
    if (ch != NULL && st == EMQ_OK && !broke) {
        st = chunk_push(c, ch, b, err);
    } else if (ch != NULL) {
        /* Cut short: nothing of this read is handed out. */
        for (size_t k = 0; k < ch->n && broke && st == EMQ_OK; k++)
            st = emq__inflight_release(&c->table, &ch->items[k].item, err);
        ch->n = 0;
        chunk_push(c, ch, b, err); /* frees it */
    }
    /* A stop, or the lease's deadline: hand the entries not reached back
     * with their count undone, so a batch cut short costs none of them a
     * delivery. Past the deadline the release waits in the queue (nothing
     * is sent while fenced) until this process holds the lease again; if
     * another process took the name it is never sent, and it could not
     * apply anyway: that process's own take raised the count. */
    if (broke && st == EMQ_OK)
        st = release_rest(c, b, rest ? rest : i, err);
    /* Cut short by the lease: the session starts again before the next
     * read (consumer.c, classify) even if the renewal gets through first,
     * and its recover self takes back what was not reached (those left to
     * their unseen mark are not released, so nothing else would). */
    if (broke && !emq__consumer_stopping(c))
        emq__machine_post(&c->machine, EMQ_POST_LAPSE);
    /* Entries not reached stay pending to this name; forget them here so
     * recover self hands them out later. Not at a stop: the run ends, and
     * its purge of the ready queue releases what earlier reads left there
     * by what the table knows of them (one with an unseen mark is left to
     * it); forgotten here, each would be released, its mark kept too, and
     * its next take would count one delivery too few. */
    if ((broke || st != EMQ_OK) && !emq__consumer_stopping(c))
        emq__inflight_drop_unstarted(&c->table);
    return st;
}
