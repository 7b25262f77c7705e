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

/* KEYS: stream, waiting, entries, seq [, held, levels, counts, bell,
 * priority record: with a priority] [, dedup key]. ARGV: "now", "in" or
 * "at"; the delay or due time (ms); "1" when the stream must exist; the
 * dedup window (ms); the priority level or ""; the number of XADD
 * options; the options; the pairs. An entry without a priority names no
 * key of them, so a user without rights there (docs/SECURITY.md) may
 * still delay and de-duplicate. */
const char emq__lua_add[] =
    "if redis.replicate_commands then pcall(redis.replicate_commands) end\n"
    "local level = tonumber(ARGV[5])\n"
    "local k = {stream = KEYS[1], waiting = KEYS[2], entries = KEYS[3],\n"
    "           seq = KEYS[4]}\n"
    "local dedup = KEYS[5]\n"
    "if level then\n"
    "  k.held, k.levels, k.counts, k.bell, k.prio =\n"
    "    KEYS[5], KEYS[6], KEYS[7], KEYS[8], KEYS[9]\n"
    "  dedup = KEYS[10]\n"
    "end\n" EMQ_LUA_HELD_SCORE "if dedup then\n"
    /* What this script stores there: an ID or a handle, with a TTL.
     * Anything else was written by hand or by a lower role (a value
     * that is not an ID, one kept for ever): not a record of an entry,
     * so it is written over, never answered (a PTTL the ACL refuses
     * leaves the TTL unchecked). */
    "  local first = redis.call('GET', dedup)\n"
    "  if first and #first <= 40 and\n"
    "     (first:match('^%d+%-%d+$') or first:match('^delayed%-%d+$')) then\n"
    "    local ttl = redis.pcall('PTTL', dedup)\n"
    "    if type(ttl) ~= 'number' or ttl > 0 then return first end\n"
    "  end\n"
    "end\n"
    "if ARGV[3] == '1' and redis.call('EXISTS', k.stream) == 0 then\n"
    "  return false\n"
    "end\n"
    "local nx = tonumber(ARGV[6])\n"
    "local id\n"
    "if ARGV[1] == 'now' and not level then\n"
    "  local args = {}\n"
    "  for i = 7, 6 + nx do args[#args + 1] = ARGV[i] end\n"
    "  args[#args + 1] = '*'\n"
    "  for i = 7 + nx, #ARGV do args[#args + 1] = ARGV[i] end\n"
    "  id = redis.call('XADD', k.stream, unpack(args))\n"
    "else\n"
    "  local fields = {}\n"
    "  for i = 7 + nx, #ARGV do fields[#fields + 1] = ARGV[i] end\n"
    "  id = string.format('" EMQ_DELAYED_PREFIX "%012d',\n"
    "                     redis.call('INCR', k.seq))\n"
    "  redis.call('HSET', k.entries, id, cmsgpack.pack(fields))\n"
    "  if ARGV[1] == 'now' then\n"
    "    hold(k, id, level)\n"
    "  else\n"
    "    local due = tonumber(ARGV[2])\n"
    "    if ARGV[1] == 'in' then\n"
    "      local t = redis.call('TIME')\n"
    "      due = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)\n"
    "            + due\n"
    "    end\n"
    "    redis.call('ZADD', k.waiting, due, id)\n"
    "    if level then\n"
    "      redis.call('HSET', k.levels, id, level)\n"
    "      redis.call('SET', k.prio, '0', 'NX')\n"
    "    end\n"
    "  end\n"
    "end\n"
    "if dedup then redis.call('SET', dedup, id, 'PX', ARGV[4]) end\n"
    "return id\n";

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
