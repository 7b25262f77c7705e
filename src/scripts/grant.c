/* SPDX-License-Identifier: BSD-3-Clause */
/* grant.c: the Lua of reads within a group's limits and priorities, and the
 * rate log (consumer/grant.c sends them).
 *
 * Each text is the body of one function of the library (library.c):
 * KEYS and ARGV are its keys and arguments, under EVAL and FCALL alike.
 */
#include "lua.h"

/* The window the rate is counted over, ms: a second and 50 ms. The
 * server records a delivery at the time its event loop cached, which may
 * trail TIME by a few ms under load; counting a slightly longer window
 * keeps every one-second window of the recorded delivery times within the
 * rate. */
#define EMQ_RATE_WINDOW_TEXT "1050"

/* KEYS: stream, limits hash, rate log, held, entries, levels, counts,
 * bell, priority record, retry schedule, the delayed entries set aside
 * (a held payload that is not an entry goes there). ARGV: group, consumer,
 * want, "1" when the queue has priorities (else the held keys are not touched),
 * the group's lease key prefix, the consumer's unseen set or "" (no marks).
 * Returns {granted, wait_ms, XREADGROUP reply or nil, the stream's last ID
 * or "", the bell's last ID or "", 1 when what it read was marked}.
 *
 * The unseen set is not declared (as in recover.c's take): a migrating
 * slot that has not got it answers SADD with an error, which pcall turns
 * into "not marked" (0) while the read goes on. Marked is 1 when any
 * SADD got through: each handout then removes its entry's mark, which
 * costs nothing for one that had none.
 *
 * A lease key is looked at undeclared, with pcall: a consumer whose key
 * cannot be read (a migrating slot that has not got it, an ACL without
 * EXISTS) counts as alive; a schedule that cannot be counted (an ACL
 * without ZCOUNT) holds no retries, as before.
 * Retries of a dead consumer waiting their backoff are subtracted twice
 * until a peer claims them (then they count once): in-hand is never taken
 * below 0, and may read low by those for claim.min_idle_ms. */
const char emq__lua_grant[] =
    "if redis.replicate_commands then pcall(redis.replicate_commands) end\n"
    "local k = {stream = KEYS[1], held = KEYS[4], entries = KEYS[5],\n"
    "           levels = KEYS[6], counts = KEYS[7], bell = KEYS[8],\n"
    "           prio = KEYS[9]}\n" EMQ_LUA_HELD_SCORE EMQ_LUA_LIMIT_OF
        EMQ_LUA_ENTRY_OF
    "local lim = redis.call('HMGET', KEYS[2], 'rate', 'max_in_flight')\n"
    "local rate = limit_of(lim[1])\n"
    "local maxf = limit_of(lim[2])\n"
    "local grant = tonumber(ARGV[3])\n"
    "local wait = 0\n"
    "local t = redis.call('TIME')\n"
    "local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)\n"
    "if maxf > 0 then\n"
    "  local held = 0\n"
    "  local by = redis.call('XPENDING', KEYS[1], ARGV[1])[4]\n"
    "  if type(by) == 'table' then\n"
    "    for _, pc in ipairs(by) do\n"
    "      local alive = redis.pcall('EXISTS', ARGV[5] .. pc[1])\n"
    "      if type(alive) ~= 'number' or alive == 1 then\n"
    "        held = held + tonumber(pc[2])\n"
    "      end\n"
    "    end\n"
    "  end\n"
    "  local waiting = redis.pcall('ZCOUNT', KEYS[10], '(' .. now, '+inf')\n"
    "  if type(waiting) == 'number' then held = held - waiting end\n"
    "  if held < 0 then held = 0 end\n"
    "  if maxf - held < grant then grant = maxf - held end\n"
    "  if grant <= 0 then wait = -1 end\n"
    "end\n"
    "if rate > 0 then\n"
    "  redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', now - " EMQ_RATE_WINDOW_TEXT
    ")\n"
    /* No hand-out is logged later than now (a second of slack for a
     * clock that stepped back): a later member is forged, and would
     * hold the rate down for as long as it says. The log expires
     * whatever this round grants. */
    "  redis.call('ZREMRANGEBYSCORE', KEYS[3], '(' .. (now + 1000), '+inf')\n"
    "  redis.call('PEXPIRE', KEYS[3], 2000)\n"
    "  local left = rate - redis.call('ZCARD', KEYS[3])\n"
    "  if left < grant then grant = left end\n"
    "  if left <= 0 then\n"
    "    local first = redis.call('ZRANGE', KEYS[3], 0, 0, 'WITHSCORES')\n"
    "    wait = math.max(1, tonumber(first[2]) + " EMQ_RATE_WINDOW_TEXT
    " - now)\n"
    "  end\n"
    "end\n"
    "if grant <= 0 then return {0, wait, false, '', '', 0} end\n"
    "local r = redis.call('XREADGROUP', 'GROUP', ARGV[1], ARGV[2], 'COUNT',\n"
    "                     grant, 'STREAMS', KEYS[1], '>')\n"
    "local got = r and #r[1][2] or 0\n"
    "local prio = ARGV[4] == '1'\n"
    "if prio and got < grant then\n"
    "  local take = redis.call('ZRANGE', k.held, 0, grant - got - 1)\n"
    "  for _, h in ipairs(take) do\n"
    "    local packed = redis.call('HGET', k.entries, h)\n"
    "    unhold(k, h)\n"
    "    redis.call('HDEL', k.entries, h)\n"
    "    local fields = packed and entry_of(packed)\n"
    /* one that is not an entry (or that XADD refuses) is set aside where
     * the delayed move sets its own (info counts them; pcall: a worker
     * without the right drops it) */
    "    local added = fields and redis.pcall('XADD', k.stream, '*',\n"
    "                                         unpack(fields))\n"
    "    if packed and (not added or type(added) == 'table') then\n"
    "      redis.pcall('HSET', KEYS[11], h, packed)\n"
    "    end\n"
    "  end\n"
    "  if #take > 0 then\n"
    "    local more = redis.call('XREADGROUP', 'GROUP', ARGV[1], ARGV[2],\n"
    "                            'COUNT', grant - got, 'STREAMS', k.stream,\n"
    "                            '>')\n"
    "    if more and r then\n"
    "      for _, e in ipairs(more[1][2]) do r[1][2][#r[1][2] + 1] = e end\n"
    "    elseif more then\n"
    "      r = more\n"
    "    end\n"
    "  end\n"
    "end\n"
    "if not r then\n"
    "  local last = redis.call('XREVRANGE', k.stream, '+', '-', 'COUNT', 1)\n"
    "  local bell = {}\n"
    "  if prio then\n"
    "    bell = redis.call('XREVRANGE', k.bell, '+', '-', 'COUNT', 1)\n"
    "  end\n"
    "  return {grant, 0, false, last[1] and last[1][1] or '0-0',\n"
    "          bell[1] and bell[1][1] or '0-0', 0}\n"
    "end\n"
    "if rate > 0 then\n"
    "  for _, e in ipairs(r[1][2]) do\n"
    "    redis.call('ZADD', KEYS[3], now, ARGV[1] .. ' ' .. e[1])\n"
    "  end\n"
    "  redis.call('PEXPIRE', KEYS[3], 2000)\n"
    "end\n"
    "local marked = 0\n"
    "if ARGV[6] ~= '' then\n"
    "  local ids = {}\n"
    "  for i, e in ipairs(r[1][2]) do ids[i] = e[1] end\n"
    "  for i = 1, #ids, 500 do\n"
    "    local m = redis.pcall('SADD', ARGV[6],\n"
    "                          unpack(ids, i, math.min(i + 499, #ids)))\n"
    "    if type(m) == 'number' then marked = 1 end\n"
    "  end\n"
    "end\n"
    "return {grant, 0, r, '', '', marked}\n";

/* KEYS: limits hash, rate log. ARGV: group, then IDs. Logs each ID as
 * a hand-out now (a member of its own, even for an ID logged before). */
const char emq__lua_grant_count[] =
    "if redis.replicate_commands then pcall(redis.replicate_commands) end\n" EMQ_LUA_LIMIT_OF
    "local rate = limit_of(redis.call('HGET', KEYS[1], 'rate'))\n"
    "if rate <= 0 then return 0 end\n"
    "local t = redis.call('TIME')\n"
    "local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)\n"
    "for i = 2, #ARGV do\n"
    "  redis.call('ZADD', KEYS[2], now, ARGV[1] .. ' ' .. ARGV[i] .. ' ' .. "
    "t[1] .. t[2])\n"
    "end\n"
    "redis.call('PEXPIRE', KEYS[2], 2000)\n"
    "return #ARGV - 1\n";
