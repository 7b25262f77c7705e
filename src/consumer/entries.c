/* entries.c: stream entries out of replies, and handing them to the
 * handler.
 *
 * Shapes handled (SEMANTICS.md 1.2, 1.3, 1.5, 1.9):
 *   XREADGROUP, RESP2: [[stream, [[id, [f, v, ...]], ...]]] or *-1;
 *   XREADGROUP, RESP3: {stream: [[id, [f, v, ...]], ...]} or _;
 *   7.0 may answer a blocked read with [[stream, []]];
 *   a pending entry whose stream entry was deleted comes as [id, nil];
 *   XAUTOCLAIM: [cursor, [[id, fields], ...], [deleted ids]].
 * Field values are views into the reply: valid until the batch is cleared,
 * which happens after the handler has returned.
 */
#include "consumer.h"

#include <string.h>

void emq_batch_init(batch *b) { memset(b, 0, sizeof *b); }

void emq_batch_clear(batch *b) {
    emq_reply_free(b->reply);
    b->reply = NULL;
    b->n = 0;
}

void emq_batch_free(batch *b) {
    emq_batch_clear(b);
    emq_free(b->items);
    memset(b, 0, sizeof *b);
}

static emq_status bad_shape(emq_error *err, const char *what) {
    return emq_error_set(err, EMQ_EPROTO, 0,
                         "unexpected reply shape from the server: %s", what);
}

const emq_reply *emq_xread_entries(const emq_reply *reply, emq_error *err,
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
        *st = bad_shape(err, "XREADGROUP reply is not [[stream, entries]]");
        return NULL;
    }
    return emq_reply_len(entries) ? entries : NULL;
}

emq_status emq_batch_parse(batch *b, emq_reply *reply,
                           const emq_reply *entries, emq_error *err) {
    emq_batch_clear(b);
    b->reply = reply;
    size_t n = emq_reply_len(entries);
    if (n > b->cap) {
        batch_item *items = emq_realloc(b->items, n * sizeof *items);
        if (items == NULL) {
            emq_batch_clear(b);
            return emq_error_set(err, EMQ_ENOMEM, 0, "out of memory");
        }
        b->items = items;
        b->cap = n;
    }
    for (size_t i = 0; i < n; i++) {
        const emq_reply *entry = emq_reply_at(entries, i);
        const emq_reply *id = emq_reply_at(entry, 0);
        const emq_reply *fields = emq_reply_at(entry, 1);
        size_t id_len;
        const char *id_text = emq_reply_str(id, &id_len);
        batch_item *item = &b->items[i];
        if (emq_reply_kind(entry) != EMQ_REPLY_ARRAY ||
            emq_reply_len(entry) != 2 ||
            emq_reply_kind(id) != EMQ_REPLY_STRING || id_len == 0 ||
            id_len >= EMQ_ID_MAX ||
            (emq_reply_kind(fields) != EMQ_REPLY_NULL &&
             (emq_reply_kind(fields) != EMQ_REPLY_ARRAY ||
              emq_reply_len(fields) % 2 != 0))) {
            emq_batch_clear(b);
            return bad_shape(err, "an entry is not [id, [field, value...]]");
        }
        memcpy(item->id.str, id_text, id_len);
        item->id.str[id_len] = '\0';
        item->fields =
            emq_reply_kind(fields) == EMQ_REPLY_NULL ? NULL : fields;
        item->deliveries = 0;
    }
    b->n = n;
    return EMQ_OK;
}

void emq_batch_set_counts(batch *b, const emq_reply *xpending,
                          uint64_t bump) {
    size_t j = 0, m = emq_reply_len(xpending);
    for (size_t i = 0; i < b->n; i++) {
        /* IDs are parsed only here, on the recovery paths: the hot path
         * of new entries never needs them as numbers. */
        emq_stream_id isid;
        if (emq_stream_id_parse(b->items[i].id.str, strlen(b->items[i].id.str),
                                &isid) != 0)
            continue; /* not a stream ID: no count, so left alone */
        while (j < m) {
            const emq_reply *row = emq_reply_at(xpending, j);
            size_t len;
            const char *text = emq_reply_str(emq_reply_at(row, 0), &len);
            emq_stream_id sid;
            if (text == NULL || emq_stream_id_parse(text, len, &sid) != 0) {
                j++;
                continue;
            }
            int cmp = emq_stream_id_cmp(sid, isid);
            if (cmp < 0) {
                j++;
                continue;
            }
            if (cmp == 0) {
                long long count = emq_reply_integer(emq_reply_at(row, 3));
                b->items[i].deliveries = (uint64_t)(count > 0 ? count : 0) +
                                         bump;
                j++;
            }
            break;
        }
    }
}

/* Adds id to the acknowledgements that go out with the next read. */
static emq_status queue_ack(emq_consumer_t *c, const emq_id *id,
                            emq_error *err) {
    if (c->nacks == c->acks_cap) {
        size_t cap = c->acks_cap ? c->acks_cap * 2 : 64;
        emq_id *acks = emq_realloc(c->acks, cap * sizeof *acks);
        if (acks == NULL)
            return emq_error_set(err, EMQ_ENOMEM, 0, "out of memory");
        c->acks = acks;
        c->acks_cap = cap;
    }
    c->acks[c->nacks++] = *id;
    return EMQ_OK;
}

/* Points c->fields at the item's field/value views. */
static emq_status build_fields(emq_consumer_t *c, const batch_item *item,
                               size_t *nfields, emq_error *err) {
    size_t n = emq_reply_len(item->fields) / 2;
    if (n > c->fields_cap) {
        emq_field *f = emq_realloc(c->fields, n * sizeof *f);
        if (f == NULL)
            return emq_error_set(err, EMQ_ENOMEM, 0, "out of memory");
        c->fields = f;
        c->fields_cap = n;
    }
    for (size_t i = 0; i < n; i++) {
        c->fields[i].name =
            emq_reply_str(emq_reply_at(item->fields, 2 * i), &c->fields[i].name_len);
        c->fields[i].value = emq_reply_str(emq_reply_at(item->fields, 2 * i + 1),
                                           &c->fields[i].value_len);
        if (c->fields[i].name == NULL)
            c->fields[i].name = "";
        if (c->fields[i].value == NULL)
            c->fields[i].value = "";
    }
    *nfields = n;
    return EMQ_OK;
}

emq_status emq_batch_dispatch(emq_consumer_t *c, batch *b, emq_error *err) {
    for (size_t i = 0; i < b->n; i++) {
        if (atomic_load(&c->stop))
            break; /* the rest stays pending and comes back on restart */
        batch_item *item = &b->items[i];
        emq_status st;
        if (item->fields == NULL) {
            /* Deleted or trimmed while pending (contract 4): ack, count,
             * never hand to the handler. */
            atomic_fetch_add(&c->stats.deleted_pending, 1);
            if ((st = queue_ack(c, &item->id, err)) != EMQ_OK)
                return st;
            continue;
        }
        if (item->deliveries == 0) {
            /* No count: the entry left this consumer's pending list
             * between the read and the count (another consumer claimed
             * it). It is not ours to handle or acknowledge. */
            continue;
        }
        uint64_t max = (uint64_t)c->conf->max_deliveries;
        if (item->deliveries > max) {
            /* Delivered more often than allowed without an answer (a
             * handler that crashed its process, for instance). */
            if ((st = emq_deadletter_defer(c, item, "", err)) != EMQ_OK)
                return st;
            continue;
        }
        size_t nfields = 0;
        if ((st = build_fields(c, item, &nfields, err)) != EMQ_OK)
            return st;
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
        atomic_fetch_add(&c->stats.delivered, 1);
        emq_verdict verdict =
            c->handler(c->opaque, &entry, reason, sizeof reason);
        reason[sizeof reason - 1] = '\0';
        switch (verdict) {
        case EMQ_ACK:
            st = queue_ack(c, &item->id, err);
            /* A redelivered entry may have a failure reason on record. */
            if (st == EMQ_OK && entry.deliveries > 1)
                st = emq_reason_defer(c, item, NULL, err);
            break;
        case EMQ_RETRY:
            atomic_fetch_add(&c->stats.retried, 1);
            atomic_fetch_add(&c->stats.failed, 1);
            if (reason[0] == '\0')
                strcpy(reason, "handler asked for a retry");
            if (entry.deliveries >= max)
                st = emq_deadletter_defer(c, item, reason, err);
            else
                st = emq_reason_defer(c, item, reason, err);
            break;
        case EMQ_DEAD:
        default:
            atomic_fetch_add(&c->stats.failed, 1);
            if (reason[0] == '\0')
                strcpy(reason, "handler gave up on the entry");
            st = emq_deadletter_defer(c, item, reason, err);
            break;
        }
        if (st != EMQ_OK)
            return st;
    }
    return EMQ_OK;
}
