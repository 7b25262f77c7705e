/* recover.c: entries that are pending but not being worked.
 *
 * Every path here is one script per page on the queue's stream key (all
 * keys share its hashtag), so an entry and its delivery count are read in
 * one atomic step: no peer's claim can slip between them, and no count is
 * ever missing.
 *
 * Recover self (contract 4): after every (re)connect the consumer pages
 * through its own pending list with history reads (XREADGROUP ... <last id
 * seen>, from 0) before anything new. Each page comes with the exact
 * delivery counts (XPENDING over the page, after the read's own +1) and
 * the time left of any retry delay on the schedule, so a retry survives a
 * crash. Entries already in the in-flight table (a retry waiting, an ack
 * not yet sent) are not handed out again.
 *
 * Recover peers (contract 5): a claim beat runs XAUTOCLAIM ... JUSTID with
 * the declared minimum idle time, following the server's cursor across
 * beats; each claimed entry is read with XRANGE, its delivery count raised
 * by one (XCLAIM RETRYCOUNT, what a claim with entries would have done),
 * and returned with it. Entries deleted while pending are acknowledged in
 * the script with their failure reason and schedule cleared, on every
 * server: 7.0+ lists them apart, 6.2 claims them with no entry.
 *
 * Retries that are due come back to this consumer the same way, if they
 * are still pending to it.
 */
#include "consumer.h"

#include <stdio.h>
#include <string.h>

/* take(id): claims id for ARGV[2] in group ARGV[1] with its delivery
 * count + 1; returns the entry ({id, false} when deleted: then it is
 * acknowledged and its reason and schedule cleared) and the count. */
#define TAKE_FUNCTION                                                          \
    "local function take(id)\n"                                                \
    "  local e = redis.call('XRANGE', KEYS[1], id, id)\n"                      \
    "  local p = redis.call('XPENDING', KEYS[1], ARGV[1], id, id, 1)\n"        \
    "  local n = 1\n"                                                          \
    "  if p[1] then n = p[1][4] + 1 end\n"                                     \
    "  if #e == 0 then\n"                                                      \
    "    redis.call('XACK', KEYS[1], ARGV[1], id)\n"                           \
    "    redis.call('HDEL', KEYS[2], id)\n"                                    \
    "    redis.call('ZREM', KEYS[3], id)\n"                                    \
    "    return nil, n\n"                                                      \
    "  end\n"                                                                  \
    "  redis.call('XCLAIM', KEYS[1], ARGV[1], ARGV[2], 0, id, 'RETRYCOUNT',"   \
    " n, 'JUSTID')\n"                                                          \
    "  return e[1], n\n"                                                       \
    "end\n"

/* KEYS: stream, reasons, schedule. ARGV: group, me, min-idle, cursor,
 * count. Returns {cursor, entries, deleted ids, counts}. */
static const char claim_script[] =
    TAKE_FUNCTION
    "local r = redis.call('XAUTOCLAIM', KEYS[1], ARGV[1], ARGV[2], ARGV[3],"
    " ARGV[4], 'COUNT', ARGV[5], 'JUSTID')\n"
    "local entries, counts, deleted = {}, {}, {}\n"
    "for _, id in ipairs(r[3] or {}) do\n"
    "  redis.call('HDEL', KEYS[2], id)\n"
    "  redis.call('ZREM', KEYS[3], id)\n"
    "  deleted[#deleted + 1] = id\n"
    "end\n"
    "for _, id in ipairs(r[2]) do\n"
    "  local e, n = take(id)\n"
    "  if e then\n"
    "    entries[#entries + 1] = e\n"
    "    counts[#counts + 1] = n\n"
    "  else\n"
    "    deleted[#deleted + 1] = id\n"
    "  end\n"
    "end\n"
    "return {r[1], entries, deleted, counts}\n";

/* KEYS: stream, reasons, schedule. ARGV: group, me, ids... Takes those
 * still pending to me. Returns {entries, counts}. */
static const char due_script[] =
    TAKE_FUNCTION
    "local entries, counts = {}, {}\n"
    "for i = 3, #ARGV do\n"
    "  local id = ARGV[i]\n"
    "  local p = redis.call('XPENDING', KEYS[1], ARGV[1], id, id, 1, ARGV[2])\n"
    "  if #p == 1 then\n"
    "    local e, n = take(id)\n"
    "    entries[#entries + 1] = e or {id, false}\n"
    "    counts[#counts + 1] = n\n"
    "  end\n"
    "end\n"
    "return {entries, counts}\n";

/* KEYS: stream, schedule. ARGV: group, me, count, after. Returns
 * {entries, counts, ms left of each one's retry delay}. */
static const char self_script[] =
    "if redis.replicate_commands then pcall(redis.replicate_commands) end\n"
    "local r = redis.call('XREADGROUP', 'GROUP', ARGV[1], ARGV[2], 'COUNT',"
    " ARGV[3], 'STREAMS', KEYS[1], ARGV[4])\n"
    "local entries = (r and r[1] and r[1][2]) or {}\n"
    "local counts, waits = {}, {}\n"
    "if #entries == 0 then return {entries, counts, waits} end\n"
    "local p = redis.call('XPENDING', KEYS[1], ARGV[1], entries[1][1],"
    " entries[#entries][1], #entries, ARGV[2])\n"
    "local byid = {}\n"
    "for _, row in ipairs(p) do byid[row[1]] = row[4] end\n"
    "local t = redis.call('TIME')\n"
    "local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)\n"
    "for i, e in ipairs(entries) do\n"
    "  counts[i] = byid[e[1]] or 1\n"
    "  local due = redis.call('ZSCORE', KEYS[2], e[1])\n"
    "  waits[i] = 0\n"
    "  if due and tonumber(due) > now then\n"
    "    waits[i] = tonumber(due) - now\n"
    "    -- not handed out before its time: this read does not count\n"
    "    if e[2] and counts[i] > 1 then\n"
    "      counts[i] = counts[i] - 1\n"
    "      redis.call('XCLAIM', KEYS[1], ARGV[1], ARGV[2], 0, e[1],"
    " 'RETRYCOUNT', counts[i], 'JUSTID')\n"
    "    end\n"
    "  end\n"
    "end\n"
    "return {entries, counts, waits}\n";

static emq_status bad_shape(emq_error *err, const char *what) {
    return emq_error_set(err, EMQ_EPROTO, 0,
                         "unexpected reply shape from the server: %s", what);
}

/* Sets item i's count (and wait) from the integer arrays of a script's
 * reply; NULL arrays leave them. */
static void set_from_arrays(batch *b, const emq_reply *counts,
                            const emq_reply *waits) {
    for (size_t i = 0; i < b->n; i++) {
        if (counts != NULL) {
            long long n = emq_reply_integer(emq_reply_at(counts, i));
            b->items[i].deliveries = n > 0 ? (uint64_t)n : 1;
        }
        if (waits != NULL) {
            long long w = emq_reply_integer(emq_reply_at(waits, i));
            b->items[i].wait_ms = w > 0 ? w : 0;
        }
    }
}

/* A group or stream that is gone shows up as NOGROUP, also inside our
 * scripts (whose error text wraps it). */
static emq_status script_error(emq_consumer_t *c, emq_reply *reply,
                               const char *what, emq_error *err) {
    c->nogroup = emq_reply_mentions(reply, "NOGROUP");
    if (c->nogroup)
        emq_reply_text(reply, c->nogroup_text, sizeof c->nogroup_text);
    emq_status st = emq_reply_error(reply, err, what);
    emq_reply_free(reply);
    return st;
}

emq_status emq_recover_self(emq_consumer_t *c, emq_error *err) {
    char cursor[EMQ_ID_MAX] = "0";
    char count[24];
    snprintf(count, sizeof count, "%lld", (long long)c->conf->count);
    batch b;
    emq_batch_init(&b);
    emq_status st = EMQ_OK;
    while (!emq_consumer_stopping(c) && emq_lease_valid(c)) {
        const char *argv[] = {"EVAL",   self_script, "2",    c->keys.stream,
                              c->retry_key, c->group, c->name, count,
                              cursor};
        emq_reply *reply;
        atomic_fetch_add(&c->stats.reads, 1);
        if ((st = emq_xchg_call(&c->rx, EMQ_XCHG_WAIT_OOM, 9, argv, NULL,
                                &reply, err)) != EMQ_OK)
            break;
        if (emq_reply_kind(reply) == EMQ_REPLY_ERROR) {
            st = script_error(c, reply, "reading own pending entries", err);
            break;
        }
        const emq_reply *entries = emq_reply_at(reply, 0);
        if (emq_reply_kind(reply) != EMQ_REPLY_ARRAY ||
            emq_reply_len(reply) != 3 ||
            emq_reply_kind(entries) != EMQ_REPLY_ARRAY) {
            emq_reply_free(reply);
            st = bad_shape(err, "own pending page is not [entries, counts, "
                                "waits]");
            break;
        }
        if (emq_reply_len(entries) == 0) {
            emq_reply_free(reply);
            break; /* nothing left of our own: drained */
        }
        const emq_reply *counts = emq_reply_at(reply, 1);
        const emq_reply *waits = emq_reply_at(reply, 2);
        if ((st = emq_batch_parse(&b, reply, entries, err)) != EMQ_OK)
            break;
        set_from_arrays(&b, counts, waits);
        /* The page must move forward, or the loop would never end. */
        emq_stream_id last, next;
        const char *next_text = b.items[b.n - 1].id.str;
        if (emq_stream_id_parse(cursor, strlen(cursor), &last) == 0 &&
            emq_stream_id_parse(next_text, strlen(next_text), &next) == 0 &&
            strcmp(cursor, "0") != 0 && emq_stream_id_cmp(next, last) <= 0) {
            emq_batch_clear(&b);
            st = bad_shape(err, "a history read did not move past the "
                                "last entry of the page before");
            break;
        }
        snprintf(cursor, sizeof cursor, "%s", next_text);
        st = emq_batch_dispatch(c, &b, err);
        emq_batch_clear(&b);
        if (st != EMQ_OK)
            break;
    }
    emq_batch_free(&b);
    return st;
}

emq_status emq_recover_peers(emq_consumer_t *c, emq_error *err) {
    char idle[24], count[24];
    snprintf(idle, sizeof idle, "%lld", (long long)c->conf->claim_min_idle_ms);
    snprintf(count, sizeof count, "%lld", (long long)c->conf->claim_count);
    batch b;
    emq_batch_init(&b);
    emq_status st = EMQ_OK;
    for (int call = 0; call < EMQ_CLAIM_CALLS_PER_BEAT; call++) {
        if (emq_consumer_stopping(c) || !emq_lease_valid(c))
            break;
        const char *argv[] = {"EVAL",         claim_script,   "3",
                              c->keys.stream, c->reasons_key, c->retry_key,
                              c->group,       c->name,        idle,
                              c->claim_cursor, count};
        emq_reply *reply;
        if ((st = emq_xchg_call(&c->rx, 0, 11, argv, NULL, &reply, err)) !=
            EMQ_OK)
            break;
        if (emq_reply_kind(reply) == EMQ_REPLY_ERROR) {
            if (emq_reply_mentions(reply, "NOGROUP")) {
                st = script_error(c, reply, "a claim beat", err);
                break;
            }
            /* NOPERM for an ACL without XAUTOCLAIM, ...: peers' entries
             * are never taken over. Say so, once a minute. */
            if (emq_now_ms() - c->last_claim_warning_ms >= 60000) {
                char shown[200];
                c->last_claim_warning_ms = emq_now_ms();
                emq_consumer_log(c, EMQ_LOG_WARNING,
                                 "claim beat failed, so entries of dead "
                                 "peers are not taken over: %s%s",
                                 emq_reply_refused(reply) &&
                                         !emq_reply_mentions(reply, "NOPERM")
                                     ? "NOPERM (refused by the ACL): "
                                     : "",
                                 emq_reply_text(reply, shown, sizeof shown));
            }
            emq_reply_free(reply);
            break;
        }
        const emq_reply *cursor = emq_reply_at(reply, 0);
        const emq_reply *entries = emq_reply_at(reply, 1);
        const emq_reply *deleted = emq_reply_at(reply, 2);
        size_t cursor_len = 0;
        const char *cursor_text = emq_reply_str(cursor, &cursor_len);
        if (emq_reply_kind(reply) != EMQ_REPLY_ARRAY ||
            emq_reply_len(reply) != 4 || cursor_text == NULL ||
            cursor_len == 0 || cursor_len >= EMQ_ID_MAX ||
            emq_stream_id_parse(cursor_text, cursor_len, NULL) != 0 ||
            emq_reply_kind(entries) != EMQ_REPLY_ARRAY) {
            emq_reply_free(reply);
            st = bad_shape(err, "XAUTOCLAIM is not [cursor, entries, "
                                "deleted]");
            break;
        }
        memcpy(c->claim_cursor, cursor_text, cursor_len);
        c->claim_cursor[cursor_len] = '\0';
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
        const emq_reply *counts = emq_reply_at(reply, 3);
        if ((st = emq_batch_parse(&b, reply, entries, err)) != EMQ_OK)
            break;
        set_from_arrays(&b, counts, NULL);
        atomic_fetch_add(&c->stats.claimed, b.n);
        st = emq_batch_dispatch(c, &b, err);
        emq_batch_clear(&b);
        if (st != EMQ_OK || wrapped)
            break;
    }
    emq_batch_free(&b);
    return st;
}

/* Most due retries one call takes. */
#define DUE_PER_CALL 100

emq_status emq_recover_due(emq_consumer_t *c, emq_error *err) {
    emq_id ids[DUE_PER_CALL];
    batch b;
    emq_batch_init(&b);
    emq_status st = EMQ_OK;
    while (!emq_consumer_stopping(c) && emq_lease_valid(c)) {
        size_t n = emq_inflight_due(&c->table, emq_now_ms(), ids,
                                    DUE_PER_CALL);
        if (n == 0)
            break;
        const char *argv[5 + 3 + DUE_PER_CALL] = {
            "EVAL", due_script, "3", c->keys.stream, c->reasons_key,
            c->retry_key, c->group, c->name};
        for (size_t i = 0; i < n; i++)
            argv[8 + i] = ids[i].str;
        /* Forget them first: what is still ours comes back in the reply
         * and enters the table again with its new count. */
        for (size_t i = 0; i < n; i++)
            emq_inflight_forget(&c->table, &ids[i]);
        emq_reply *reply;
        if ((st = emq_xchg_call(&c->rx, 0, (int)(8 + n), argv, NULL, &reply,
                                err)) != EMQ_OK)
            break;
        if (emq_reply_kind(reply) == EMQ_REPLY_ERROR) {
            st = script_error(c, reply, "delivering due retries", err);
            break;
        }
        const emq_reply *entries = emq_reply_at(reply, 0);
        if (emq_reply_kind(reply) != EMQ_REPLY_ARRAY ||
            emq_reply_len(reply) != 2 ||
            emq_reply_kind(entries) != EMQ_REPLY_ARRAY) {
            emq_reply_free(reply);
            st = bad_shape(err, "due retries are not [entries, counts]");
            break;
        }
        if (emq_reply_len(entries) == 0) {
            emq_reply_free(reply);
            continue;
        }
        const emq_reply *counts = emq_reply_at(reply, 1);
        if ((st = emq_batch_parse(&b, reply, entries, err)) != EMQ_OK)
            break;
        set_from_arrays(&b, counts, NULL);
        st = emq_batch_dispatch(c, &b, err);
        emq_batch_clear(&b);
        if (st != EMQ_OK)
            break;
    }
    emq_batch_free(&b);
    return st;
}
