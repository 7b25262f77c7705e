/* SPDX-License-Identifier: BSD-3-Clause */
/* admin.c: the Lua of the admin verbs that change several keys at once:
 * consumers prune, trim --acked, dead-letter requeue and purge (src/admin).
 *
 * Each text is the body of one function of the library (library.c):
 * KEYS and ARGV are its keys and arguments, under EVAL and FCALL alike.
 */
#include "lua.h"

/* Most field names and values the requeue script copies itself (Lua's
 * unpack holds about 8000 values); a wider dead letter is requeued by
 * requeue_wide. */
#define REQUEUE_SCRIPT_MAX_ARGS_TEXT "7000"

/* KEYS[1] stream; ARGV: group, victim, heir ("" for none), min idle ms,
 * most entries to move. Returns {code, moved, dropped}:
 *   code 0: deleted; 1: entries left to move (call again); 2: kept, holds
 *   entries and there is no heir; 3: no such consumer any more; 4: active
 *   again (idle below the minimum), left alone.
 * moved counts entries now pending for the heir; dropped counts pending IDs
 * whose stream entry was deleted. Those are acknowledged (removed from the
 * pending list) rather than claimed: Redis 7.0+ XCLAIM drops them silently,
 * but 6.2's XCLAIM ... JUSTID claims them and returns their ID like a live
 * entry's, which made the moved count one too high there. */
const char emq__lua_prune[] =
    "local s, g, victim, heir = KEYS[1], ARGV[1], ARGV[2], ARGV[3]\n"
    "local min_idle, limit = tonumber(ARGV[4]), tonumber(ARGV[5])\n"
    "local found = nil\n"
    "for _, c in ipairs(redis.call('XINFO', 'CONSUMERS', s, g)) do\n"
    "  local name, idle = nil, nil\n"
    "  for i = 1, #c - 1, 2 do\n"
    "    if c[i] == 'name' then name = c[i + 1]\n"
    "    elseif c[i] == 'idle' then idle = c[i + 1] end\n"
    "  end\n"
    "  if name == victim then found = idle end\n"
    "end\n"
    "if found == nil then return {3, 0, 0} end\n"
    "if found < min_idle then return {4, 0, 0} end\n"
    "local moved, dropped = 0, 0\n"
    "if heir ~= '' then\n"
    "  while moved + dropped < limit do\n"
    "    local want = math.min(100, limit - moved - dropped)\n"
    "    local p = redis.call('XPENDING', s, g, '-', '+', want, victim)\n"
    "    if #p == 0 then break end\n"
    "    for _, e in ipairs(p) do\n"
    "      if #redis.call('XRANGE', s, e[1], e[1]) == 0 then\n"
    "        redis.call('XACK', s, g, e[1])\n"
    "        dropped = dropped + 1\n"
    "      else\n"
    "        local r = redis.call('XCLAIM', s, g, heir, 0, e[1],\n"
    "                             'IDLE', e[3], 'JUSTID')\n"
    "        if #r == 1 then moved = moved + 1 else dropped = dropped + 1 end\n"
    "      end\n"
    "    end\n"
    "  end\n"
    "end\n"
    "if #redis.call('XPENDING', s, g, '-', '+', 1, victim) > 0 then\n"
    "  if heir == '' then return {2, moved, dropped} end\n"
    "  return {1, moved, dropped}\n"
    "end\n"
    "redis.call('XGROUP', 'DELCONSUMER', s, g, victim)\n"
    "return {0, moved, dropped}\n";

/* KEYS[1] stream; ARGV: maxlen (-1 none), max age ms (-1 none), the
 * counting cap (held back; a group's lag walked). Returns {removed, floor
 * ("" none), held_back, no_groups}, or {0, '', 0, 0, group, lag, cursor}
 * when a group's cursor lies past entries the server counts as unread by
 * it (nothing trimmed). A cut is an ID (entries below it go), 'all', or
 * nil. */
const char emq__lua_trim_acked[] = EMQ_LUA_CALL
    "local s = KEYS[1]\n"
    "local maxlen, max_age = tonumber(ARGV[1]), tonumber(ARGV[2])\n"
    "local held_cap = tonumber(ARGV[3])\n"
    "if call('EXISTS', s) == 0 then return {0, '', 0, 1} end\n"
    "local groups = call('XINFO', 'GROUPS', s)\n"
    "if #groups == 0 then return {0, '', 0, 1} end\n" EMQ_LUA_ID_LT
    /* the floor: the oldest entry some group still needs */
    "local floor = nil\n"
    "local function need(id)\n"
    "  if floor == nil or id_lt(id, floor) then floor = id end\n"
    "end\n"
    /* the n-th newest entry (the oldest when fewer are stored), paged;
     * nil past the counting cap */
    "local function nth_newest(n)\n"
    "  if n > held_cap then return nil end\n"
    "  local from, got, id = '+', 0, nil\n"
    "  while got < n do\n"
    "    local r = call('XREVRANGE', s, from, '-', 'COUNT',\n"
    "                   math.min(1000, n - got))\n"
    "    if #r == 0 then break end\n"
    "    got = got + #r\n"
    "    id = r[#r][1]\n"
    "    from = '(' .. id\n"
    "  end\n"
    "  return id\n"
    "end\n"
    "for _, g in ipairs(groups) do\n"
    "  local name, last, lag = nil, nil, nil\n"
    "  for i = 1, #g - 1, 2 do\n"
    "    if g[i] == 'name' then name = g[i + 1]\n"
    "    elseif g[i] == 'last-delivered-id' then last = g[i + 1]\n"
    "    elseif g[i] == 'lag' then lag = g[i + 1] end\n"
    "  end\n"
    "  local p = call('XPENDING', s, name)\n"
    "  if p[1] > 0 then need(p[2]) end\n"
    "  local nxt = redis.pcall('XRANGE', s, '(' .. last, '+', 'COUNT', 1)\n"
    "  if nxt.err == nil and #nxt > 0 then need(nxt[1][1]) end\n"
    /* 7.0+: the server's own account of what the group has not read (the
     * lag newest entries) is kept too, whatever its cursor says; a cursor
     * past them moved without reads, and nothing is trimmed */
    "  if type(lag) == 'number' and lag > 0 then\n"
    "    local first = nth_newest(lag)\n"
    "    if first == nil then need('0-1')\n"
    "    elseif not id_lt(last, first) then\n"
    "      return {0, '', 0, 0, name, lag, last}\n"
    "    else need(first) end\n"
    "  end\n"
    "end\n"
    /* what the bounds ask for */
    "local len = call('XLEN', s)\n"
    "local bound, maxlen_cut, age_cut = false, nil, nil\n"
    "if maxlen >= 0 then\n"
    "  bound = true\n"
    "  if maxlen == 0 and len > 0 then maxlen_cut = 'all'\n"
    "  elseif len > maxlen then\n"
    "    local drop, r = len - maxlen, nil\n"
    "    if maxlen <= drop then\n"
    "      r = call('XREVRANGE', s, '+', '-', 'COUNT', maxlen)\n"
    "    else\n"
    "      r = call('XRANGE', s, '-', '+', 'COUNT', drop + 1)\n"
    "    end\n"
    "    maxlen_cut = r[#r][1]\n"
    "  end\n"
    "end\n"
    "if max_age >= 0 then\n"
    "  bound = true\n"
    "  local t = call('TIME')\n"
    "  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)\n"
    "  if now - max_age > 0 then\n"
    "    age_cut = string.format('%.0f', now - max_age) .. '-0'\n"
    "  end\n"
    "end\n"
    "local want = 'all'\n"
    "if bound then\n"
    "  want = maxlen_cut\n"
    "  if age_cut ~= nil and want ~= 'all' and\n"
    "     (want == nil or id_lt(want, age_cut)) then want = age_cut end\n"
    "end\n"
    /* never below the floor */
    "local cut = want\n"
    "if cut ~= nil and floor ~= nil and (cut == 'all' or id_lt(floor, cut))\n"
    "then cut = floor end\n"
    "local removed = 0\n"
    "if cut == 'all' then removed = call('XTRIM', s, 'MAXLEN', 0)\n"
    "elseif cut ~= nil then removed = call('XTRIM', s, 'MINID', cut)\n"
    "end\n"
    /* what the floor kept of what a bound asked for */
    "local held = 0\n"
    "if bound and want ~= nil and cut ~= want then\n"
    "  if want == maxlen_cut then\n"
    "    held = len - maxlen - removed\n"
    "  else\n"
    "    local from = '-'\n"
    "    while held < held_cap do\n"
    "      local r = call('XRANGE', s, from, '(' .. want, 'COUNT',\n"
    "                           math.min(1000, held_cap - held))\n"
    "      held = held + #r\n"
    "      if #r == 0 then break end\n"
    "      from = '(' .. r[#r][1]\n"
    "    end\n"
    "  end\n"
    "end\n"
    "return {removed, floor or '', held, 0}\n";

/* KEYS[1] stream, KEYS[2] dead letters; ARGV[1] dead-letter ID, ARGV[2]
 * "1" to skip the checks. Returns the new entry's ID, nil when there is no
 * such dead letter, {3, why} when it is not one the queue's consumers
 * wrote (not all five origin pairs, or an origin ID the stream never
 * issued: past its last-generated-id), or {2} when it has more than
 * REQUEUE_SCRIPT_MAX_ARGS_TEXT original field names and values (checked,
 * nothing done). */
const char emq__lua_requeue[] = EMQ_LUA_CALL EMQ_LUA_ID_LT
    "local e = call('XRANGE', KEYS[2], ARGV[1], ARGV[1])\n"
    "if #e == 0 then return false end\n"
    "local f = e[1][2]\n"
    "local origin = {'emq.id', 'emq.group', 'emq.consumer',\n"
    "                'emq.deliveries', 'emq.reason'}\n"
    "local i = 1\n"
    "for k = 1, 5 do\n"
    "  if f[i] ~= origin[k] then break end\n"
    "  i = i + 2\n"
    "end\n"
    "if ARGV[2] ~= '1' then\n"
    "  if i ~= 11 or not is_id(f[2]) then\n"
    "    return {3, 'not a dead letter (no origin fields)'}\n"
    "  end\n"
    "  local last = nil\n"
    "  local info = redis.pcall('XINFO', 'STREAM', KEYS[1])\n"
    "  if type(info) == 'table' and not info.err then\n"
    "    for k = 1, #info - 1, 2 do\n"
    "      if info[k] == 'last-generated-id' then last = info[k + 1] end\n"
    "    end\n"
    "  end\n"
    "  if last == nil or id_lt(last, f[2]) then\n"
    "    return {3, 'origin ' .. f[2] .. ' was never in the queue (last '\n"
    "               .. 'ID ' .. (last or 'none') .. ')'}\n"
    "  end\n"
    "end\n"
    "if #f > " REQUEUE_SCRIPT_MAX_ARGS_TEXT " + 10 then return {2} end\n"
    "local args = {}\n"
    "for k = i, #f do args[#args + 1] = f[k] end\n"
    "if #args == 0 then\n"
    "  return redis.error_reply('dead letter ' .. ARGV[1] ..\n"
    "                           ' holds no original fields')\n"
    "end\n"
    "local id = call('XADD', KEYS[1], '*', unpack(args))\n"
    "call('XDEL', KEYS[2], ARGV[1])\n"
    "return id\n";

/* KEYS[1] dead letters. Returns how many there were; deletes them. */
/* KEYS: payloads (delayed:entries), waiting, held. Returns how many
 * payloads no waiting or held handle names (left behind when a handle was
 * deleted by hand): every payload belongs to one of them, so the count is
 * what is over, read in one atomic step. Reads only. */
const char emq__lua_orphans[] =
    "local n = redis.call('HLEN', KEYS[1]) - redis.call('ZCARD', KEYS[2])\n"
    "        - redis.call('ZCARD', KEYS[3])\n"
    "if n < 0 then n = 0 end\n"
    "return n\n";

const char emq__lua_dead_purge[] = EMQ_LUA_CALL
    "local n = call('XLEN', KEYS[1])\n"
    "call('DEL', KEYS[1])\n"
    "return n\n";
