/* SPDX-License-Identifier: BSD-3-Clause */
/* schedule.c: entries handed out later, and cancelled before they are:
 * the keys of a queue's delayed and held entries (emq__delayed_keys)
 * and the scripts that move and cancel them.
 *
 * A delayed entry waits in two keys of its queue's hashtag: the sorted set
 * "delayed" (handle -> due time, unix ms by the server's clock) and the
 * hash "delayed:entries" (handle -> its field/value pairs, packed with the
 * server's MessagePack). Handles are "delayed-" and twelve digits of the
 * counter "delayed:seq", so handles due at the same millisecond leave in
 * the order they came. Three scripts, each one atomic step on one slot:
 *   - schedule (the producer; addscript.c): the pairs in, the handle out;
 *   - move (the consumers' upkeep): what is due goes to the stream by
 *     XADD, then leaves both keys, so a mover killed at any point moves
 *     nothing twice and loses nothing (a failed XADD leaves its entry
 *     waiting);
 *   - cancel (admin): a waiting handle leaves both keys; a stream ID
 *     that no group has been handed yet (above every group's cursor) is
 *     XDEL'd; anything else is left alone and said so.
 * No state here, no network: the callers send the words on their own
 * sessions.
 */
#include "streams.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The keys the scripts here name, as a table k (KEYS: waiting, entries,
 * stream, bad [, held, levels, counts, bell, priority record]; the move
 * names the last five only on a queue with priorities). */
#define LUA_KEYS                                                               \
    "local k = {waiting = KEYS[1], entries = KEYS[2], stream = KEYS[3],\n"     \
    "           bad = KEYS[4], held = KEYS[5], levels = KEYS[6],\n"            \
    "           counts = KEYS[7], bell = KEYS[8], prio = KEYS[9]}\n"

/* KEYS: LUA_KEYS. ARGV: most entries to move. Returns {moved, still
 * waiting, ms until the next is due or -1, set aside, due handles whose
 * payload was gone}; on a queue with
 * priorities (the held keys named) an entry produced with one is held
 * (by its level) rather than added to the stream. Nothing a lower role
 * could have written stops the move: a payload that is not an entry
 * (not MessagePack of an even list of 1-8000 strings, or one XADD
 * refuses) is set aside in the bad key (info counts them; pcall: a
 * mover without the right drops it), a level that is not 0-9 is no
 * level, and a due time that is not a finite number is none. */
static const char move_script[] =
    "if redis.replicate_commands then pcall(redis.replicate_commands) end\n" LUA_KEYS
        EMQ_LUA_HELD_SCORE "local t = redis.call('TIME')\n"
    "local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)\n"
    "local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now,\n"
    "                       'LIMIT', 0, tonumber(ARGV[1]))\n" EMQ_LUA_ENTRY_OF
    "local moved, aside, vanished = 0, 0, 0\n"
    "for _, handle in ipairs(due) do\n"
    "  local level = k.levels and tonumber(redis.call('HGET', k.levels, handle))\n"
    "  if level and (level < 0 or level > 9 or level % 1 ~= 0) then\n"
    "    redis.call('HDEL', k.levels, handle)\n"
    "    level = nil\n"
    "  end\n"
    "  local packed = redis.call('HGET', k.entries, handle)\n"
    "  local fields = packed and entry_of(packed)\n"
    "  local added = false\n"
    "  if fields and level then\n"
    "    hold(k, handle, level)\n"
    "    moved = moved + 1\n"
    "  elseif fields then\n"
    "    local r = redis.pcall('XADD', k.stream, '*', unpack(fields))\n"
    "    added = type(r) ~= 'table' or not r.err\n"
    "    if added then moved = moved + 1 end\n"
    "  end\n"
    "  if packed and not (fields and level) then\n"
    "    if not fields or not added then\n"
    "      redis.pcall('HSET', k.bad, handle, packed)\n"
    "      if level then redis.call('HDEL', k.levels, handle) end\n"
    "      aside = aside + 1\n"
    "    end\n"
    "    redis.call('HDEL', k.entries, handle)\n"
    "  end\n"
    "  if not packed then\n" /* its payload deleted: nothing to move */
    "    vanished = vanished + 1\n"
    "    if level then redis.call('HDEL', k.levels, handle) end\n"
    "  end\n"
    "  redis.call('ZREM', k.waiting, handle)\n"
    "end\n"
    "local left = redis.call('ZCARD', KEYS[1])\n"
    "local first = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')\n"
    "local next_in = -1\n"
    "local at = first[2] and tonumber(first[2])\n"
    "if at and at == at and at > -1e15 and at < 1e15 then\n"
    "  next_in = math.max(0, at - now)\n"
    "end\n"
    "return {moved, left, next_in, aside, vanished}\n";

/* KEYS: LUA_KEYS. ARGV: handles and stream IDs. Returns one word per
 * ARGV: removed (delayed or held, or in the stream and no group's cursor
 * is at or past it), delivered (left alone) or missing (not waiting, not
 * held, not in the stream). */
static const char cancel_script[] = EMQ_LUA_ID_LT LUA_KEYS EMQ_LUA_HELD_SCORE
    "local prefix = '" EMQ_DELAYED_PREFIX "'\n"
    "local cursors = nil\n"
    "local out = {}\n"
    "for i, id in ipairs(ARGV) do\n"
    "  if string.sub(id, 1, #prefix) == prefix then\n"
    "    local waited = redis.call('ZREM', k.waiting, id) == 1\n"
    "    if redis.call('HDEL', k.bad, id) == 1 then waited = true end\n"
    "    if waited or redis.call('ZSCORE', k.held, id) then\n"
    "      unhold(k, id)\n"
    "      redis.call('HDEL', k.entries, id)\n"
    "      out[i] = 'removed'\n"
    "    else\n"
    "      out[i] = 'missing'\n"
    "    end\n"
    "  elseif #redis.call('XRANGE', KEYS[3], id, id) == 0 then\n"
    "    out[i] = 'missing'\n"
    "  else\n"
    "    if cursors == nil then\n"
    "      cursors = {}\n"
    "      for _, g in ipairs(redis.call('XINFO', 'GROUPS', KEYS[3])) do\n"
    "        for j = 1, #g - 1, 2 do\n"
    "          if g[j] == 'last-delivered-id' then\n"
    "            cursors[#cursors + 1] = g[j + 1]\n"
    "          end\n"
    "        end\n"
    "      end\n"
    "    end\n"
    "    local seen = false\n"
    "    for _, c in ipairs(cursors) do\n"
    "      if not id_lt(c, id) then seen = true end\n"
    "    end\n"
    "    if seen then\n"
    "      out[i] = 'delivered'\n"
    "    else\n"
    "      redis.call('XDEL', KEYS[3], id)\n"
    "      out[i] = 'removed'\n"
    "    end\n"
    "  end\n"
    "end\n"
    "return out\n";

emq_status emq__delayed_keys_make(const emq__keys *k, emq__delayed_keys *out,
                                  emq_error *err) {
    memset(out, 0, sizeof *out);
    out->waiting = emq__keys_join(k, "delayed", NULL);
    out->entries = emq__keys_join(k, "delayed", "entries");
    out->seq = emq__keys_join(k, "delayed", "seq");
    out->held = emq__keys_join(k, "held", NULL);
    out->levels = emq__keys_join(k, "held", "levels");
    out->counts = emq__keys_join(k, "held", "counts");
    out->bell = emq__keys_join(k, "held", "bell");
    out->prio = emq__keys_join(k, "priority", NULL);
    out->bad = emq__keys_join(k, "delayed", "bad");
    if (out->waiting && out->entries && out->seq && out->held && out->levels &&
        out->counts && out->bell && out->prio && out->bad)
        return EMQ_OK;
    emq__delayed_keys_free(out);
    return emq__oom(err);
}

void emq__delayed_keys_free(emq__delayed_keys *dk) {
    emq__free(dk->waiting);
    emq__free(dk->entries);
    emq__free(dk->seq);
    emq__free(dk->held);
    emq__free(dk->levels);
    emq__free(dk->counts);
    emq__free(dk->bell);
    emq__free(dk->prio);
    emq__free(dk->bad);
    memset(dk, 0, sizeof *dk);
}

int emq__delayed_handle_is(const char *text, size_t len) {
    size_t n = sizeof EMQ_DELAYED_PREFIX - 1;
    if (len <= n || len > n + 20 || memcmp(text, EMQ_DELAYED_PREFIX, n) != 0)
        return 0;
    for (size_t i = n; i < len; i++)
        if (text[i] < '0' || text[i] > '9')
            return 0;
    return 1;
}

/* The twelve words both scripts start with: EVAL, the script, the count
 * and the keys of LUA_KEYS. */
static void script_head(const char *argv[12], const char *script,
                        const emq__delayed_keys *dk, const char *stream) {
    argv[0] = "EVAL";
    argv[1] = script;
    argv[2] = "9"; /* emq__delayed_move_argv may say 4 */
    argv[3] = dk->waiting;
    argv[4] = dk->entries;
    argv[5] = stream;
    argv[6] = dk->bad;
    argv[7] = dk->held;
    argv[8] = dk->levels;
    argv[9] = dk->counts;
    argv[10] = dk->bell;
    argv[11] = dk->prio;
}

int emq__delayed_move_argv(const char *argv[EMQ_DELAYED_MOVE_ARGC],
                           const emq__delayed_keys *dk, const char *stream,
                           const char *max, int prio) {
    script_head(argv, move_script, dk, stream);
    if (!prio) {
        argv[2] = "4";
        argv[7] = max;
        return 8;
    }
    argv[12] = max;
    return 13;
}

emq_status emq__delayed_move_reply(const emq_reply *r, emq__delayed_moved *out,
                                   emq_error *err) {
    memset(out, 0, sizeof *out);
    out->next_in_ms = -1;
    if (emq_reply_kind(r) == EMQ_REPLY_ERROR)
        return emq__reply_error_set(err, r,
                                    "moving due delayed entries failed");
    if (emq_reply_kind(r) != EMQ_REPLY_ARRAY || emq_reply_len(r) != 5)
        return emq__reply_bad_shape(err, "the delayed entries' move");
    for (size_t i = 0; i < 5; i++)
        if (emq_reply_kind(emq_reply_at(r, i)) != EMQ_REPLY_INTEGER)
            return emq__reply_bad_shape(err, "the delayed entries' move");
    int64_t moved = emq_reply_integer(emq_reply_at(r, 0));
    int64_t left = emq_reply_integer(emq_reply_at(r, 1));
    out->moved = moved > 0 ? (uint64_t)moved : 0;
    out->waiting = left > 0 ? (uint64_t)left : 0;
    out->next_in_ms = emq_reply_integer(emq_reply_at(r, 2));
    int64_t aside = emq_reply_integer(emq_reply_at(r, 3));
    out->set_aside = aside > 0 ? (uint64_t)aside : 0;
    int64_t vanished = emq_reply_integer(emq_reply_at(r, 4));
    out->vanished = vanished > 0 ? (uint64_t)vanished : 0;
    return EMQ_OK;
}

int emq__due_ms(const emq_reply *r, int64_t *ms) {
    double v;
    if (emq_reply_kind(r) == EMQ_REPLY_DOUBLE) {
        v = emq_reply_double(r);
    } else {
        size_t len = 0;
        const char *text = emq_reply_str(r, &len);
        char buf[64];
        if (text == NULL || len == 0 || len >= sizeof buf)
            return 0;
        memcpy(buf, text, len);
        buf[len] = '\0';
        char *end = NULL;
        v = strtod(buf, &end);
        if (end == buf)
            return 0;
    }
    if (!(v > 0)) /* negative, -inf, NaN */
        *ms = 0;
    else if (v >= (double)EMQ_DUE_MS_MAX)
        *ms = EMQ_DUE_MS_MAX;
    else
        *ms = (int64_t)v;
    return 1;
}

int emq__delayed_cancel_head(const char *head[EMQ_DELAYED_CANCEL_HEAD],
                             const emq__delayed_keys *dk, const char *stream) {
    script_head(head, cancel_script, dk, stream);
    return EMQ_DELAYED_CANCEL_HEAD;
}
