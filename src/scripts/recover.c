/* SPDX-License-Identifier: BSD-3-Clause */
/* recover.c: the Lua of taking entries: claims of idle entries, due retries and
 * own pending entries, and the retry waits (consumer/recover.c sends them).
 *
 * Each text is the body of one function of the library (library.c):
 * KEYS and ARGV are its keys and arguments, under EVAL and FCALL alike.
 */
#include "lua.h"

/* take(id, bump): claims id for ARGV[2] in group ARGV[1] with its delivery
 * count + bump (1: the entry may have reached a handler since its count
 * was last raised; 0: it cannot have, see emq__recover_self), at least 1;
 * returns the entry ({id, false} when deleted: then it is acknowledged;
 * its SETTLE_GONE clears its reason and schedule) and the count. */
#define EMQ_LUA_TAKE                                                           \
    "local function take(id, bump)\n"                                          \
    "  local e = redis.call('XRANGE', KEYS[1], id, id)\n"                      \
    "  local p = redis.call('XPENDING', KEYS[1], ARGV[1], id, id, 1)\n"        \
    "  local n = 1\n"                                                          \
    "  if p[1] then n = math.max(p[1][4] + bump, 1) end\n"                     \
    "  if #e == 0 then\n"                                                      \
    "    redis.call('XACK', KEYS[1], ARGV[1], id)\n"                           \
    "    return nil, n\n"                                                      \
    "  end\n"                                                                  \
    "  redis.call('XCLAIM', KEYS[1], ARGV[1], ARGV[2], 0, id, 'RETRYCOUNT',"   \
    " n, 'JUSTID')\n"                                                          \
    "  return e[1], n\n"                                                       \
    "end\n"

/* KEYS: stream. ARGV: group, me, min-idle, cursor, count. Claims what has
 * been idle that long (JUSTID: its count is not raised, its idle time is
 * reset, so no peer takes it while this consumer looks at its retry
 * schedule); returns {cursor, claimed ids, ids the server found deleted
 * (7.0+; 6.2 claims those, and take finds them gone)}. */
const char emq__lua_claim[] =
    "local r = redis.call('XAUTOCLAIM', KEYS[1], ARGV[1], ARGV[2], ARGV[3],"
    " ARGV[4], 'COUNT', ARGV[5], 'JUSTID')\n"
    "return {r[1], r[2], r[3] or {}}\n";

/* KEYS: stream. ARGV: group, me, the unseen set, max_deliveries, then
 * triples of id, bump and mark. Takes those still pending to me (due
 * retries, own pending entries at a session's start, entries a claim beat
 * took over), each counted when its bump is 1, and adds those whose mark
 * is 1 to the unseen set in the same step (marks go with the raise, so no
 * crash falls between them), unless its count is past max_deliveries (it
 * goes to the dead letters, never handed out, so nothing would remove the
 * mark). The set is not declared: a migrating slot that has not
 * got it answers the SADD with an error, which pcall turns into "not
 * marked" while the take goes on. Returns {entries, counts, marked}. */
const char emq__lua_take_due[] = EMQ_LUA_TAKE
    "local entries, counts, marked = {}, {}, {}\n"
    "for i = 5, #ARGV - 2, 3 do\n"
    "  local id = ARGV[i]\n"
    "  local p = redis.call('XPENDING', KEYS[1], ARGV[1], id, id, 1, ARGV[2])\n"
    "  if #p == 1 then\n"
    "    local e, n = take(id, tonumber(ARGV[i + 1]))\n"
    "    local m = 0\n"
    "    if e and ARGV[i + 2] == '1' and n <= tonumber(ARGV[4]) then\n"
    "      local r = redis.pcall('SADD', ARGV[3], id)\n"
    "      if type(r) == 'number' then m = 1 end\n"
    "    end\n"
    "    entries[#entries + 1] = e or {id, false}\n"
    "    counts[#counts + 1] = n\n"
    "    marked[#marked + 1] = m\n"
    "  end\n"
    "end\n"
    "return {entries, counts, marked}\n";

/* KEYS: schedule. ARGV: ids. Returns the ms left of each one's retry
 * delay by the server's clock (the schedule is scored by it): 0 when it
 * has none or it is due. Reads only. */
const char emq__lua_retry_waits[] =
    "local t = redis.call('TIME')\n"
    "local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)\n"
    "local waits = {}\n"
    "for i = 1, #ARGV do\n"
    "  local due = redis.call('ZSCORE', KEYS[1], ARGV[i])\n"
    "  local d = tonumber(due)\n"
    /* a score a worker's credential wrote (inf) waits at most 2^31 ms,
     * never a cast of infinity */
    "  waits[i] = 0\n"
    "  if d and d == d and d > now then\n"
    "    waits[i] = math.min(d - now, 2147483647)\n"
    "  end\n"
    "end\n"
    "return waits\n";
