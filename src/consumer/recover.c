/* recover.c: getting back entries that are pending but not being worked.
 *
 * Recover self (contract 4): after every (re)connect the consumer pages
 * through its own pending list with history reads (XREADGROUP ... STREAMS
 * <stream> <last id seen>, starting at 0) before reading anything new.
 * That is also how an entry survives a reply lost in flight: the server
 * made it pending for us, we never saw it, and the history read returns it.
 * Each page travels with an XPENDING of the same range in one round trip,
 * for the delivery counts; the history read itself adds one delivery.
 *
 * Recover peers (contract 5): a claim beat runs XAUTOCLAIM with the
 * declared minimum idle time, following the cursor the server returns
 * across beats until it wraps to 0-0, so every entry of a long pending
 * list is reached although one call examines at most COUNT x 10 of them.
 * IDs the server reports as deleted have already left the pending list;
 * they are counted.
 */
#include "consumer.h"

#include <stdio.h>
#include <string.h>

emq_status emq_recover_self(emq_consumer_t *c, emq_error *err) {
    char cursor[EMQ_ID_MAX + 1] = "0";
    char count[24];
    snprintf(count, sizeof count, "%lld", (long long)c->conf->count);
    batch b;
    emq_batch_init(&b);
    emq_status st = EMQ_OK;
    while (!atomic_load(&c->stop)) {
        /* XPENDING <stream> <group> (<cursor> + <count> <consumer>: the same
         * entries the history read returns, with their counts. */
        char start[EMQ_ID_MAX + 2];
        snprintf(start, sizeof start, "%s%s", strcmp(cursor, "0") ? "(" : "",
                 strcmp(cursor, "0") ? cursor : "-");
        const char *pending[] = {"XPENDING", c->keys.stream, c->group, start,
                                 "+", count, c->name};
        const char *read[] = {"XREADGROUP", "GROUP", c->group, c->name,
                              "COUNT", count, "STREAMS", c->keys.stream,
                              cursor};
        emq_reply *counts = NULL, *reply = NULL;
        if ((st = emq_consumer_append_acks(c, err)) != EMQ_OK ||
            (st = emq_route_append(c->route, 7, pending, NULL, err)) != EMQ_OK ||
            (st = emq_route_append(c->route, 9, read, NULL, err)) != EMQ_OK)
            break;
        atomic_fetch_add(&c->stats.reads, 1);
        atomic_fetch_add(&c->stats.round_trips, 1);
        emq_error derr;
        emq_status deferred = emq_consumer_drain_deferred(c, &derr);
        if (deferred != EMQ_OK && err)
            *err = derr;
        if (deferred != EMQ_OK && emq_route_is_broken(c->route)) {
            st = deferred;
            break;
        }
        if ((st = emq_route_get_reply(c->route, &counts, err)) != EMQ_OK)
            break;
        if ((st = emq_route_get_reply(c->route, &reply, err)) != EMQ_OK) {
            emq_reply_free(counts);
            break;
        }
        if (deferred != EMQ_OK) { /* a lost lease: fatal */
            emq_reply_free(counts);
            emq_reply_free(reply);
            if (err)
                *err = derr;
            st = deferred;
            break;
        }
        if (emq_reply_kind(counts) == EMQ_REPLY_ERROR ||
            emq_reply_kind(reply) == EMQ_REPLY_ERROR) {
            const emq_reply *bad =
                emq_reply_kind(reply) == EMQ_REPLY_ERROR ? reply : counts;
            char shown[200];
            st = emq_error_set(err, EMQ_ESERVER, 0,
                               "reading own pending entries failed: %s",
                               emq_reply_text(bad, shown, sizeof shown));
            emq_reply_free(counts);
            emq_reply_free(reply);
            break;
        }
        const emq_reply *entries = emq_xread_entries(reply, err, &st);
        if (st != EMQ_OK || entries == NULL) {
            emq_reply_free(counts);
            emq_reply_free(reply);
            break; /* nothing left of our own: drained */
        }
        if ((st = emq_batch_parse(&b, reply, entries, err)) != EMQ_OK) {
            emq_reply_free(counts);
            break;
        }
        emq_batch_set_counts(&b, counts, 1);
        emq_reply_free(counts);
        snprintf(cursor, sizeof cursor, "%s", b.items[b.n - 1].id.str);
        st = emq_batch_dispatch(c, &b, err);
        emq_batch_clear(&b);
        if (st != EMQ_OK)
            break;
    }
    emq_batch_free(&b);
    return st;
}

/* Counts of claimed entries: XPENDING over their ID range for this
 * consumer (XAUTOCLAIM does not report them; SEMANTICS.md 1.5). */
static emq_status fetch_counts(emq_consumer_t *c, batch *b, emq_error *err) {
    char count[24];
    snprintf(count, sizeof count, "%zu", b->n);
    const char *argv[] = {"XPENDING", c->keys.stream, c->group,
                          b->items[0].id.str, b->items[b->n - 1].id.str,
                          count, c->name};
    emq_reply *reply;
    emq_status st = emq_consumer_call(c, 7, argv, NULL, &reply, err);
    if (st != EMQ_OK)
        return st;
    if (emq_reply_kind(reply) == EMQ_REPLY_ARRAY)
        emq_batch_set_counts(b, reply, 0);
    emq_reply_free(reply);
    return EMQ_OK;
}

emq_status emq_recover_peers(emq_consumer_t *c, emq_error *err) {
    char idle[24], count[24];
    snprintf(idle, sizeof idle, "%lld", (long long)c->conf->claim_min_idle_ms);
    snprintf(count, sizeof count, "%lld", (long long)c->conf->claim_count);
    batch b;
    emq_batch_init(&b);
    emq_status st = EMQ_OK;
    for (int call = 0; call < EMQ_CLAIM_CALLS_PER_BEAT; call++) {
        if (atomic_load(&c->stop))
            break;
        const char *argv[] = {"XAUTOCLAIM", c->keys.stream, c->group,
                              c->name, idle, c->claim_cursor, "COUNT", count};
        emq_reply *reply;
        if ((st = emq_consumer_append_acks(c, err)) != EMQ_OK ||
            (st = emq_consumer_call(c, 8, argv, NULL, &reply, err)) != EMQ_OK)
            break;
        const emq_reply *cursor = emq_reply_at(reply, 0);
        const emq_reply *entries = emq_reply_at(reply, 1);
        const emq_reply *deleted = emq_reply_at(reply, 2);
        size_t cursor_len;
        const char *cursor_text = emq_reply_str(cursor, &cursor_len);
        if (emq_reply_kind(reply) == EMQ_REPLY_ERROR) {
            /* NOGROUP: the read that follows deals with it. Anything else
             * (NOPERM for an ACL without XAUTOCLAIM, ...) means peers'
             * entries are never taken over: say so, once a minute. */
            if (!emq_reply_is_error(reply, "NOGROUP") &&
                emq_now_ms() - c->last_claim_warning_ms >= 60000) {
                char shown[200];
                c->last_claim_warning_ms = emq_now_ms();
                emq_consumer_log(c, EMQ_LOG_WARNING,
                                 "claim beat failed, so entries of dead "
                                 "peers are not taken over: %s",
                                 emq_reply_text(reply, shown, sizeof shown));
            }
            emq_reply_free(reply);
            break;
        }
        if (emq_reply_kind(reply) != EMQ_REPLY_ARRAY ||
            emq_reply_len(reply) < 2 || cursor_text == NULL ||
            cursor_len >= EMQ_ID_MAX ||
            emq_reply_kind(entries) != EMQ_REPLY_ARRAY) {
            emq_reply_free(reply);
            st = emq_error_set(err, EMQ_EPROTO, 0,
                               "unexpected reply shape from the server: "
                               "XAUTOCLAIM is not [cursor, entries, deleted]");
            break;
        }
        memcpy(c->claim_cursor, cursor_text, cursor_len);
        c->claim_cursor[cursor_len] = '\0';
        /* Deleted while pending: already gone from the pending list. */
        atomic_fetch_add(&c->stats.deleted_pending, emq_reply_len(deleted));
        int wrapped = strcmp(c->claim_cursor, "0-0") == 0;
        if (emq_reply_len(entries) == 0) {
            /* Nothing idle in this stretch: the next beat goes on from the
             * cursor. Going on now would spend server time (each call
             * examines up to COUNT x 10 entries) to find, most likely,
             * nothing again. */
            emq_reply_free(reply);
            break;
        }
        if ((st = emq_batch_parse(&b, reply, entries, err)) != EMQ_OK)
            break;
        atomic_fetch_add(&c->stats.claimed, b.n);
        if ((st = fetch_counts(c, &b, err)) == EMQ_OK)
            st = emq_batch_dispatch(c, &b, err);
        emq_batch_clear(&b);
        if (st != EMQ_OK || wrapped)
            break;
    }
    emq_batch_free(&b);
    return st;
}
