/* SPDX-License-Identifier: BSD-3-Clause */
/* schedule.c: the Lua of entries that wait beside the stream: added delayed,
 * de-duplicated or with a priority (streams/addscript.c), moved when due
 * and cancelled (streams/schedule.c).
 *
 * Each text is the body of one function of the library (library.c):
 * KEYS and ARGV are its keys and arguments, under EVAL and FCALL alike.
 */
#include "lua.h"

/* The keys the scripts here name, as a table k (KEYS: waiting, entries,
 * stream, bad [, held, levels, counts, bell, priority record]; the move
 * names the last five only on a queue with priorities). */
#define EMQ_LUA_DELAYED_KEYS                                                   \
    "local k = {waiting = KEYS[1], entries = KEYS[2], stream = KEYS[3],\n"     \
    "           bad = KEYS[4], held = KEYS[5], levels = KEYS[6],\n"            \
    "           counts = KEYS[7], bell = KEYS[8], prio = KEYS[9]}\n"

/* The producer's one script for every entry that is not a plain XADD:
 * up to EMQ_ADD_BATCH_MAX of them in one call (streams/addscript.c).
 * KEYS: stream, waiting, entries, seq [, held, levels, counts, bell,
 * priority record: when ARGV[2] is "1"], then the entries' idempotency
 * keys. ARGV: "1" when the stream must exist; "1" when the held keys are
 * named; the number of XADD options, the options; then for each entry:
 * "now", "in" or "at"; the delay or due time (ms); the dedup window (ms);
 * the priority level or ""; the index of its idempotency key in KEYS or
 * "0"; the number of words of its pairs; the pairs. A call without a
 * priority names none of the held keys, so a user without rights there
 * (docs/SECURITY.md) may still delay and de-duplicate.
 *
 * Returns one element per entry, in order: its ID or handle, false (the
 * stream must exist and does not: as XADD NOMKSTREAM), or the error that
 * refused it (an XADD refused alone: a bad field; the others are added).
 * The entries that wait are written together (one INCRBY, HSET, ZADD per
 * call), so a refusal there (an ACL) fails the whole call before any
 * entry is added now. */
const char emq__lua_add[] =
    "if redis.replicate_commands then pcall(redis.replicate_commands) end\n"
    "local k = {stream = KEYS[1], waiting = KEYS[2], entries = KEYS[3],\n"
    "           seq = KEYS[4]}\n"
    "if ARGV[2] == '1' then\n"
    "  k.held, k.levels, k.counts, k.bell, k.prio =\n"
    "    KEYS[5], KEYS[6], KEYS[7], KEYS[8], KEYS[9]\n"
    "end\n" EMQ_LUA_HELD_SCORE "local nx = tonumber(ARGV[3])\n"
    "local es, out = {}, {}\n"
    "local i = 4 + nx\n"
    "while i + 5 <= #ARGV do\n"
    "  local di, nw = tonumber(ARGV[i + 4]), tonumber(ARGV[i + 5])\n"
    "  es[#es + 1] = {kind = ARGV[i], when = ARGV[i + 1], ttl = ARGV[i + 2],\n"
    "                 level = tonumber(ARGV[i + 3]),\n"
    "                 dedup = di > 0 and KEYS[di] or nil,\n"
    "                 from = i + 6, to = i + 5 + nw}\n"
    "  i = i + 6 + nw\n"
    "end\n"
    /* The idempotency keys, in one MGET. What this script stores there:
     * an ID or a handle, with a TTL. Anything else was written by hand or
     * by a lower role (a value that is not an ID, one kept for ever): not
     * a record of an entry, so it is written over, never answered (a PTTL
     * the ACL refuses leaves the TTL unchecked). */
    "local keys, firsts = {}, {}\n"
    "for _, e in ipairs(es) do\n"
    "  if e.dedup then keys[#keys + 1] = e.dedup end\n"
    "end\n"
    "if #keys > 0 then\n"
    "  local vals = redis.call('MGET', unpack(keys))\n"
    "  for j, key in ipairs(keys) do\n"
    "    local v = vals[j]\n"
    "    if v and #v <= 40 and\n"
    "       (v:match('^%d+%-%d+$') or v:match('^delayed%-%d+$')) then\n"
    "      local left = redis.pcall('PTTL', key)\n"
    "      if type(left) ~= 'number' or left > 0 then firsts[key] = v end\n"
    "    end\n"
    "  end\n"
    "end\n"
    /* Which entries are added: not one whose key holds a record (its
     * answer is that record), nor a second one of this call with the
     * same key (its answer is the first's), nor any when the stream must
     * exist and does not (nil, as XADD NOMKSTREAM). */
    "local exists, adds, waits = nil, {}, 0\n"
    "for j, e in ipairs(es) do\n"
    "  if e.dedup and firsts[e.dedup] then\n"
    "    out[j] = firsts[e.dedup]\n"
    "  elseif e.dedup and adds[e.dedup] then\n"
    "    e.same = adds[e.dedup]\n"
    "  else\n"
    "    if ARGV[1] == '1' and exists == nil then\n"
    "      exists = redis.call('EXISTS', k.stream) == 1\n"
    "    end\n"
    "    if exists == false then\n"
    "      out[j] = false\n"
    "    else\n"
    "      e.add = true\n"
    "      if e.dedup then adds[e.dedup] = j end\n"
    "      if e.kind ~= 'now' or e.level then waits = waits + 1 end\n"
    "    end\n"
    "  end\n"
    "end\n"
    /* The entries that wait (delayed, or held by priority): handles from
     * one INCRBY, payloads in one HSET, due times in one ZADD, levels in
     * one HSET, held ones in one hold; then the ones added now, one XADD
     * each; then the keys' records. */
    "local seq = 0\n"
    "if waits > 0 then\n"
    "  seq = redis.call('INCRBY', k.seq, waits) - waits\n"
    "end\n"
    "local payloads, waiting, levels, held, now = {}, {}, {}, {}, nil\n"
    "for j, e in ipairs(es) do\n"
    "  if e.add and (e.kind ~= 'now' or e.level) then\n"
    "    local fields = {}\n"
    "    for w = e.from, e.to do fields[#fields + 1] = ARGV[w] end\n"
    "    seq = seq + 1\n"
    "    local id = string.format('" EMQ_DELAYED_PREFIX "%012d', seq)\n"
    "    out[j] = id\n"
    "    payloads[#payloads + 1] = id\n"
    "    payloads[#payloads + 1] = cmsgpack.pack(fields)\n"
    "    if e.kind == 'now' then\n"
    "      held[#held + 1] = {id, e.level}\n"
    "    else\n"
    "      local due = tonumber(e.when)\n"
    "      if e.kind == 'in' then\n"
    "        if not now then\n"
    "          local t = redis.call('TIME')\n"
    "          now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)\n"
    "        end\n"
    "        due = now + due\n"
    "      end\n"
    "      waiting[#waiting + 1] = due\n"
    "      waiting[#waiting + 1] = id\n"
    "      if e.level then\n"
    "        levels[#levels + 1] = id\n"
    "        levels[#levels + 1] = e.level\n"
    "      end\n"
    "    end\n"
    "  end\n"
    "end\n"
    "if #payloads > 0 then redis.call('HSET', k.entries, unpack(payloads)) end\n"
    "if #waiting > 0 then redis.call('ZADD', k.waiting, unpack(waiting)) end\n"
    "if #levels > 0 then\n"
    "  redis.call('HSET', k.levels, unpack(levels))\n"
    "  redis.call('SET', k.prio, '0', 'NX')\n"
    "end\n"
    "if #held > 0 then hold_many(k, held) end\n"
    "for j, e in ipairs(es) do\n"
    "  if e.add and e.kind == 'now' and not e.level then\n"
    "    local args = {}\n"
    "    for w = 4, 3 + nx do args[#args + 1] = ARGV[w] end\n"
    "    args[#args + 1] = '*'\n"
    "    for w = e.from, e.to do args[#args + 1] = ARGV[w] end\n"
    "    out[j] = redis.pcall('XADD', k.stream, unpack(args))\n"
    "  end\n"
    "end\n"
    "for key, j in pairs(adds) do\n"
    "  if type(out[j]) == 'string' then\n"
    "    local r = redis.pcall('SET', key, out[j], 'PX', es[j].ttl)\n"
    "    if type(r) == 'table' and r.err then out[j] = r end\n"
    "  end\n"
    "end\n"
    "for j, e in ipairs(es) do\n"
    "  if e.same then out[j] = out[e.same] end\n"
    "end\n"
    "for j = 1, #es do\n"
    "  if out[j] == nil then out[j] = false end\n"
    "end\n"
    "return out\n";

/* KEYS: EMQ_LUA_DELAYED_KEYS. ARGV: most entries to move. Returns {moved, still
 * waiting, ms until the next is due or -1, set aside, due handles whose
 * payload was gone}; on a queue with
 * priorities (the held keys named) an entry produced with one is held
 * (by its level) rather than added to the stream. Nothing a lower role
 * could have written stops the move: a payload that is not an entry
 * (not MessagePack of an even list of 1-8000 strings, or one XADD
 * refuses) is set aside in the bad key (info counts them; pcall: a
 * mover without the right drops it), a level that is not 0-9 is no
 * level, and a due time that is not a finite number is none. */
const char emq__lua_delayed_move[] =
    "if redis.replicate_commands then pcall(redis.replicate_commands) end\n" EMQ_LUA_DELAYED_KEYS
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

/* KEYS: EMQ_LUA_DELAYED_KEYS. ARGV: handles and stream IDs. Returns one word
 * per ARGV: removed (delayed or held, or in the stream and no group's cursor is
 * at or past it), delivered (left alone) or missing (not waiting, not held, not
 * in the stream). */
const char emq__lua_delayed_cancel[] =
    EMQ_LUA_ID_LT EMQ_LUA_DELAYED_KEYS EMQ_LUA_HELD_SCORE
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
