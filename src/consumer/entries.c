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
        *st = emq_reply_bad_shape(err, "XREADGROUP reply is not [[stream, entries]]");
        return NULL;
    }
    return emq_reply_len(entries) ? entries : NULL;
}

/* 1 when fields has the shape of a field list: null (deleted) or an array
 * of names and values, in pairs. That each one is a string is checked
 * when the entry is handed out (build_fields), in the same pass that
 * builds the views. */
static int fields_shaped(const emq_reply *fields) {
    if (emq_reply_kind(fields) == EMQ_REPLY_NULL)
        return 1;
    return emq_reply_kind(fields) == EMQ_REPLY_ARRAY &&
           emq_reply_len(fields) % 2 == 0;
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
        size_t id_len = 0;
        const char *id_text = emq_reply_str(id, &id_len);
        batch_item *item = &b->items[i];
        if (emq_reply_kind(entry) != EMQ_REPLY_ARRAY ||
            emq_reply_len(entry) < 1 ||
            emq_reply_kind(id) != EMQ_REPLY_STRING || id_len == 0 ||
            id_len >= EMQ_ID_MAX ||
            emq_stream_id_parse(id_text, id_len, NULL) != 0) {
            /* Without an ID nothing can be settled: the reply is broken. */
            emq_batch_clear(b);
            return emq_reply_bad_shape(err, "an entry has no stream ID");
        }
        memcpy(item->id.str, id_text, id_len);
        item->id.str[id_len] = '\0';
        item->malformed =
            emq_reply_len(entry) != 2 || !fields_shaped(fields);
        item->fields = item->malformed || emq_reply_kind(fields) ==
                                              EMQ_REPLY_NULL
                           ? NULL
                           : fields;
        item->deliveries = 0;
        item->held = 0;
    }
    b->n = n;
    return EMQ_OK;
}

/* Points c->fields at the item's field/value views; sets item->malformed
 * (and forgets its fields) when a name or value is not a string. */
static emq_status build_fields(emq_consumer_t *c, batch_item *item,
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
        const emq_reply *name = emq_reply_at(item->fields, 2 * i);
        const emq_reply *value = emq_reply_at(item->fields, 2 * i + 1);
        if (emq_reply_kind(name) != EMQ_REPLY_STRING ||
            emq_reply_kind(value) != EMQ_REPLY_STRING) {
            item->malformed = 1;
            item->fields = NULL;
            *nfields = 0;
            return EMQ_OK;
        }
        c->fields[i].name = emq_reply_str(name, &c->fields[i].name_len);
        c->fields[i].value = emq_reply_str(value, &c->fields[i].value_len);
        if (c->fields[i].value == NULL)
            c->fields[i].value = ""; /* an empty string may have no text */
        if (c->fields[i].name == NULL)
            c->fields[i].name = "";
    }
    *nfields = n;
    return EMQ_OK;
}

/* Copies item's field names and values into op (for the dead letter). */
static emq_status copy_fields(const batch_item *item, settle_op *op,
                              emq_error *err) {
    size_t n = item->fields ? emq_reply_len(item->fields) : 0;
    size_t total = 0;
    for (size_t i = 0; i < n; i++) {
        size_t len;
        emq_reply_str(emq_reply_at(item->fields, i), &len);
        total += len;
    }
    op->args = emq_alloc(total ? total : 1);
    op->lens = emq_alloc((n ? n : 1) * sizeof *op->lens);
    if (op->args == NULL || op->lens == NULL)
        return emq_error_set(err, EMQ_ENOMEM, 0, "out of memory");
    char *p = op->args;
    for (size_t i = 0; i < n; i++) {
        size_t len;
        const char *text = emq_reply_str(emq_reply_at(item->fields, i), &len);
        if (len)
            memcpy(p, text, len);
        op->lens[i] = len;
        p += len;
    }
    op->nargs = n;
    return EMQ_OK;
}

/* Builds the settlement of item (reason may be NULL). */
static emq_status make_op(emq_consumer_t *c, const batch_item *item,
                          settle_kind kind, const char *reason, settle_op *op,
                          emq_error *err) {
    *op = (settle_op){.kind = kind, .id = item->id,
                      .deliveries = item->deliveries};
    if (reason != NULL && (op->reason = emq_strdup(reason)) == NULL)
        return emq_error_set(err, EMQ_ENOMEM, 0, "out of memory");
    if (kind == SETTLE_RETRY)
        op->delay_ms = emq_settle_retry_delay(c, item->deliveries);
    if (kind == SETTLE_DEAD) {
        emq_status st = copy_fields(item, op, err);
        if (st != EMQ_OK) {
            emq_settle_op_free(op);
            return st;
        }
    }
    return EMQ_OK;
}

/* Runs the handler on one entry; *op is its settlement. */
static emq_status handle(emq_consumer_t *c, batch_item *item, settle_op *op,
                         emq_error *err) {
    size_t nfields = 0;
    emq_status st = build_fields(c, item, &nfields, err);
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
    uint64_t max = (uint64_t)c->conf->max_deliveries;
    atomic_fetch_add(&c->stats.delivered, 1);
    emq_verdict verdict = c->handler(c->opaque, &entry, reason, sizeof reason);
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
    for (size_t i = first; i < b->n && st == EMQ_OK; i++) {
        const batch_item *item = &b->items[i];
        if (item->held)
            continue;
        /* A new entry's count is 1 (XREADGROUP > tells none). */
        settle_op op = {.kind = SETTLE_RELEASE, .id = item->id,
                        .deliveries = item->deliveries ? item->deliveries : 1};
        st = emq_inflight_step(&c->table, &op, NULL, NULL, err);
    }
    return st;
}

emq_status emq_batch_dispatch(emq_consumer_t *c, batch *b, emq_error *err) {
    /* Everything read is owned from now on: into the table first (one
     * lock for the batch), so the upkeep thread refreshes entries that
     * wait behind a slow one. Entries held before (a retry waiting, an
     * ack not sent yet) come back marked held and are not handed out. */
    if (emq_inflight_add_batch(&c->table, b->items, b->n, emq_now_ms()) != 0)
        return emq_error_set(err, EMQ_ENOMEM, 0, "out of memory");
    emq_status st = EMQ_OK;
    uint64_t max = (uint64_t)c->conf->max_deliveries;
    /* The settlement decided last is queued together with the next begin,
     * in one lock: at once, since the next handler starts right away. */
    settle_op op;
    int have = 0, broke = 0;
    size_t i;
    for (i = 0; i < b->n && st == EMQ_OK; i++) {
        batch_item *item = &b->items[i];
        if (item->held)
            continue;
        if (item->deliveries == 0)
            item->deliveries = 1; /* never unknown; at least this one */
        /* Past the lease's deadline, or asked to stop: hand out nothing
         * more; the rest stays pending and comes back (recover self). */
        if (emq_consumer_stopping(c) || !emq_lease_valid(c)) {
            broke = 1;
            break;
        }
        if (item->malformed) {
            st = emq_inflight_step(&c->table, have ? &op : NULL, NULL, NULL, err);
            have = 0;
            if (st == EMQ_OK)
                st = make_op(c, item, SETTLE_DEAD, "malformed entry", &op,
                             err);
            have = st == EMQ_OK;
        } else if (item->fields == NULL) {
            /* Deleted or trimmed while pending: ack, count, never hand to
             * the handler. */
            atomic_fetch_add(&c->stats.deleted_pending, 1);
            st = emq_inflight_step(&c->table, have ? &op : NULL, NULL, NULL, err);
            have = 0;
            if (st == EMQ_OK)
                st = make_op(c, item, SETTLE_GONE, NULL, &op, err);
            have = st == EMQ_OK;
        } else if (item->deliveries > max) {
            /* Delivered more often than allowed without an answer (a
             * handler that crashed its process, for instance). */
            st = emq_inflight_step(&c->table, have ? &op : NULL, NULL, NULL, err);
            have = 0;
            if (st == EMQ_OK)
                st = make_op(c, item, SETTLE_DEAD, NULL, &op, err);
            have = st == EMQ_OK;
        } else {
            int go = 0;
            st = emq_inflight_step(&c->table, have ? &op : NULL, item, &go,
                                   err);
            have = 0;
            if (st == EMQ_OK && go == 1) {
                st = handle(c, item, &op, err);
                have = st == EMQ_OK;
            } else if (go < 0) {
                /* Pending to us, not refreshed in time: recover self
                 * brings it back (uncounted, in a session that kept the
                 * lease). */
                atomic_store(&c->recover_self_due, 1);
            }
        }
    }
    if (have && st == EMQ_OK)
        st = emq_inflight_step(&c->table, &op, NULL, NULL, err);
    else if (have)
        emq_settle_op_free(&op);
    /* A stop, or the lease's deadline: hand the entries not reached back
     * with their count undone, so a batch cut short costs none of them a
     * delivery. Past the deadline the release waits in the queue (nothing
     * is sent while fenced) until this process holds the lease again; if
     * another process took the name it is never sent, and it could not
     * apply anyway: that process's own take raised the count. */
    if (broke && st == EMQ_OK)
        st = release_rest(c, b, i, err);
    /* Entries not reached stay pending to this name; forget them here so
     * recover self hands them out later. */
    if (broke || st != EMQ_OK)
        emq_inflight_drop_unstarted(&c->table);
    return st;
}
