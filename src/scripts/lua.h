/* SPDX-License-Identifier: BSD-3-Clause */
/* lua.h: the Lua that several scripts share, and each script's text.
 *
 * Private to src/scripts: the layers above call a script by its id
 * (scripts.h), never by its text.
 */
#ifndef EMQ_SCRIPTS_LUA_H
#define EMQ_SCRIPTS_LUA_H

#include "scripts.h"

#define EMQ_LUA_LIMIT_OF                                                       \
    "local function limit_of(v)\n"                                             \
    "  if type(v) ~= 'string' or #v == 0 or #v > 9 or v:find('%D') then\n"     \
    "    return 0\n"                                                           \
    "  end\n"                                                                  \
    "  return tonumber(v)\n"                                                   \
    "end\n"

/* Lua for scripts: id_lt(a, b) compares two stream IDs
 * exactly (decimal strings, by length then bytes, so no 64-bit value is
 * rounded through a double); is_id(x) says x is "<ms>-<seq>". */
#define EMQ_LUA_ID_LT                                                          \
    "local function num_lt(a, b)\n"                                            \
    "  if #a ~= #b then return #a < #b end\n"                                  \
    "  return a < b\n"                                                         \
    "end\n"                                                                    \
    "local function split(id)\n"                                               \
    "  local d = string.find(id, '-', 1, true)\n"                              \
    "  if not d then return id, '0' end\n"                                     \
    "  return string.sub(id, 1, d - 1), string.sub(id, d + 1)\n"               \
    "end\n"                                                                    \
    "local function id_lt(a, b)\n"                                             \
    "  local am, as = split(a)\n"                                              \
    "  local bm, bs = split(b)\n"                                              \
    "  if am ~= bm then return num_lt(am, bm) end\n"                           \
    "  return num_lt(as, bs)\n"                                                \
    "end\n"                                                                    \
    "local function is_id(x)\n"                                                \
    "  return type(x) == 'string' and string.match(x, '^%d+%-%d+$') ~= nil\n"  \
    "end\n"

/* How a held entry's score orders it (Lua, used by the scripts that hold
 * an entry): strict (age 0) the level alone, so ties (one level) leave
 * in handle order, the order they came; with an aging step the time it
 * was held plus level steps, so an entry that waited one step more is
 * one level more urgent. Handles of one score sort by their digits.
 * The counts are information: one a hand wrote as no integer is
 * restarted (hold) or dropped (unhold), never an error that stops a
 * read. */
#define EMQ_LUA_HELD_SCORE                                                       \
    "local function held_scorer(prio_key)\n"                                     \
    "  local age = tonumber(redis.call('GET', prio_key) or '0') or 0\n"          \
    "  if age <= 0 then return function(level) return level end end\n"           \
    "  local t = redis.call('TIME')\n"                                           \
    "  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)\n"  \
    "  return function(level) return now + level * age end\n"                    \
    "end\n"                                                                      \
    "local function hold_many(k, list)\n" /* list: {handle, level} pairs */      \
    "  redis.call('SET', k.prio, '0', 'NX')\n"                                   \
    "  local score = held_scorer(k.prio)\n"                                      \
    "  local z, lv, per = {}, {}, {}\n"                                          \
    "  for _, h in ipairs(list) do\n"                                            \
    "    z[#z + 1] = score(h[2])\n"                                              \
    "    z[#z + 1] = h[1]\n"                                                     \
    "    lv[#lv + 1] = h[1]\n"                                                   \
    "    lv[#lv + 1] = h[2]\n"                                                   \
    "    per[h[2]] = (per[h[2]] or 0) + 1\n"                                     \
    "  end\n"                                                                    \
    "  redis.call('ZADD', k.held, unpack(z))\n"                                  \
    "  redis.call('HSET', k.levels, unpack(lv))\n"                               \
    "  for level, n in pairs(per) do\n"                                          \
    "    local c = redis.pcall('HINCRBY', k.counts, level, n)\n"                 \
    "    if type(c) ~= 'number' then\n" /* a count written by hand */            \
    "      redis.pcall('HSET', k.counts, level, n)\n"                            \
    "    end\n"                                                                  \
    "  end\n"                                                                    \
    "  redis.call('XADD', k.bell, 'MAXLEN', '1', '*', 'held', list[#list][1])\n" \
    "end\n"                                                                      \
    "local function hold(k, handle, level)\n"                                    \
    "  hold_many(k, {{handle, level}})\n"                                        \
    "end\n"                                                                      \
    "local function unhold(k, handle)\n"                                         \
    "  local level = redis.call('HGET', k.levels, handle)\n"                     \
    "  if level then\n"                                                          \
    "    redis.call('HDEL', k.levels, handle)\n"                                 \
    "    if redis.call('ZREM', k.held, handle) == 1 then\n"                      \
    "      local n = redis.pcall('HINCRBY', k.counts, level, -1)\n"              \
    "      if type(n) ~= 'number' or n <= 0 then\n"                              \
    "        redis.call('HDEL', k.counts, level)\n"                              \
    "      end\n"                                                                \
    "    end\n"                                                                  \
    "  end\n"                                                                    \
    "end\n"

/* The pairs of an entry packed with MessagePack (the delayed and held
 * payloads), or nil when packed is not one: not MessagePack, or not an
 * even list of 1-8000 strings (what XADD takes through unpack). A lower
 * role can write those hashes: a script reads them through this. */
#define EMQ_LUA_ENTRY_OF                                                       \
    "local function entry_of(packed)\n"                                        \
    "  local ok, v = pcall(cmsgpack.unpack, packed)\n"                         \
    "  if not ok or type(v) ~= 'table' or #v == 0 or #v % 2 == 1 or\n"         \
    "     #v > 8000 then return nil end\n"                                     \
    "  for i = 1, #v do\n"                                                     \
    "    if type(v[i]) ~= 'string' then return nil end\n"                      \
    "  end\n"                                                                  \
    "  return v\n"                                                             \
    "end\n"

/* Lua for the admin scripts: call(...) is redis.call that names the
 * command a server refused ("XTRIM refused: NOPERM ..."), so an ACL
 * refusal inside a script says which command (the server's own text does
 * not, on 7.x: "The user executing the script can't run this command"). */
#define EMQ_LUA_CALL                                                           \
    "local function call(...)\n"                                               \
    "  local r = redis.pcall(...)\n"                                           \
    "  if type(r) == 'table' and r.err then\n"                                 \
    "    error(string.upper((...)) .. ' refused: ' .. r.err, 0)\n"             \
    "  end\n"                                                                  \
    "  return r\n"                                                             \
    "end\n"

/* Each script's text (lease.c, settle.c, recover.c, grant.c, schedule.c,
 * admin.c): what library.c makes a function of, and EVAL sends. */
extern const char emq__lua_add[];
extern const char emq__lua_delayed_move[];
extern const char emq__lua_delayed_cancel[];
extern const char emq__lua_lease_acquire[];
extern const char emq__lua_lease_renew[];
extern const char emq__lua_lease_takeover[];
extern const char emq__lua_lease_release[];
extern const char emq__lua_retry[];
extern const char emq__lua_deadletter[];
extern const char emq__lua_release[];
extern const char emq__lua_refresh[];
extern const char emq__lua_inhand_publish[];
extern const char emq__lua_mark[];
extern const char emq__lua_claim[];
extern const char emq__lua_take_due[];
extern const char emq__lua_retry_waits[];
extern const char emq__lua_grant[];
extern const char emq__lua_grant_count[];
extern const char emq__lua_prune[];
extern const char emq__lua_trim_acked[];
extern const char emq__lua_requeue[];
extern const char emq__lua_dead_purge[];
extern const char emq__lua_orphans[];

#endif /* EMQ_SCRIPTS_LUA_H */
