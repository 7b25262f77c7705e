/* SPDX-License-Identifier: BSD-3-Clause */
/* settle.c: the Lua of settling entries and keeping them in hand: retries, dead
 * letters, release, the ownership refresh, the in-hand times and the unseen
 * marks (consumer/settle.c, inhand.c and marks.c send them).
 *
 * Each text is the body of one function of the library (library.c):
 * KEYS and ARGV are its keys and arguments, under EVAL and FCALL alike.
 */
#include "lua.h"

/* KEYS: schedule. ARGV: pairs of id and delay in ms. Puts each id on the
 * retry schedule, due at the server's clock plus its delay. The schedule
 * alone (its reasons go in one HSET beside it): a script naming a key the
 * node lacks gets TRYAGAIN while the slot migrates; one naming a single
 * key follows ASK instead. Whether the entry is still pending to this
 * consumer is not looked at (that would name the stream too): a retry is
 * only sent for an entry this consumer held at its last refresh, and a
 * stray schedule entry only makes a later claimer wait out the delay.
 * Retries go first in their round, before the acks' HDEL and ZREM; an ack
 * sent by the other thread while a retry of the same entry (no delay) is
 * still on its way can arrive first and leave its reason behind (a rare
 * leak of one hash field, never a wrong delivery). */
const char emq__lua_retry[] =
    "local t = redis.call('TIME')\n"
    "local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)\n"
    "for i = 1, #ARGV - 1, 2 do\n"
    "  redis.call('ZADD', KEYS[1], now + tonumber(ARGV[i + 1]), ARGV[i])\n"
    "end\n"
    "return #ARGV / 2\n";

/* KEYS: stream, dead letters, reasons, schedule. ARGV: group, id, me,
 * reason (empty: the recorded one). The dead letter copies the entry's
 * fields from the stream itself, so a settlement needs no copy of them
 * (and one decided from any thread later has them too). Returns 0 when
 * the entry is not pending to me (nothing done), 1 when it was moved and
 * acknowledged, {2, reason, deliveries} when it is too wide for the
 * script: the reasons hash then holds "<id>:dead" = the last dead
 * letter's ID before this process's own XADD, so that the next call (the
 * same move again after a lost reply, or after the XADD) finds that
 * dead letter among the ones after it and only acknowledges: the move is
 * written once, whatever is retried. */
const char emq__lua_deadletter[] =
    "local p = redis.call('XPENDING', KEYS[1], ARGV[1], ARGV[2], ARGV[2], 1,"
    " ARGV[3])\n"
    "if #p == 0 then return 0 end\n"
    "local reason = ARGV[4]\n"
    "if reason == '' then\n"
    "  reason = redis.call('HGET', KEYS[3], ARGV[2])\n"
    "  if not reason then\n"
    "    reason = 'delivered ' .. p[1][4] .. ' times without an "
    "acknowledgement'\n"
    "  end\n"
    "end\n"
    "local mark = ARGV[2] .. ':dead'\n"
    "local since = redis.call('HGET', KEYS[3], mark)\n"
    /* the mark is this script's (an ID); one a worker's credential wrote
     * otherwise is none, and the look is bounded (100 pages) */
    "if since and (#since > 41 or not since:match('^%d+%-%d+$')) then\n"
    "  since = nil\n"
    "end\n"
    "local found = false\n"
    "if since then\n"
    "  local from = '(' .. since\n"
    "  for _ = 1, 100 do\n"
    "    if found then break end\n"
    "    local page = redis.call('XRANGE', KEYS[2], from, '+', 'COUNT', 100)\n"
    "    if #page == 0 then break end\n"
    "    for _, d in ipairs(page) do\n"
    "      if d[2][1] == 'emq.id' and d[2][2] == ARGV[2] then\n"
    "        found = true\n"
    "      end\n"
    "    end\n"
    "    from = '(' .. page[#page][1]\n"
    "  end\n"
    "end\n"
    "if not found then\n"
    "  local e = redis.call('XRANGE', KEYS[1], ARGV[2], ARGV[2])\n"
    "  local f = e[1] and e[1][2] or {}\n"
    "  if #f > " EMQ_DEAD_SCRIPT_MAX_ARGS_TEXT " then\n"
    "    if not since then\n"
    "      local last = redis.call('XREVRANGE', KEYS[2], '+', '-',\n"
    "                              'COUNT', 1)\n"
    "      redis.call('HSET', KEYS[3], mark, last[1] and last[1][1] or '0-0')\n"
    "    end\n"
    "    return {2, reason, p[1][4]}\n"
    "  end\n"
    "  local args = {'emq.id', ARGV[2], 'emq.group', ARGV[1],\n"
    "    'emq.consumer', ARGV[3], 'emq.deliveries', tostring(p[1][4]),\n"
    "    'emq.reason', reason}\n"
    "  for i = 1, #f do args[#args + 1] = f[i] end\n"
    "  redis.call('XADD', KEYS[2], '*', unpack(args))\n"
    "end\n"
    "redis.call('XACK', KEYS[1], ARGV[1], ARGV[2])\n"
    "redis.call('HDEL', KEYS[3], ARGV[2], mark)\n"
    "redis.call('ZREM', KEYS[4], ARGV[2])\n"
    "return 1\n";

/* KEYS: stream. ARGV: group, me, then pairs of id and the delivery count
 * it was read or taken with. Returns how many were released. */
const char emq__lua_release[] =
    "local released = 0\n"
    "for i = 3, #ARGV - 1, 2 do\n"
    "  local p = redis.call('XPENDING', KEYS[1], ARGV[1], ARGV[i], ARGV[i],"
    " 1, ARGV[2])\n"
    "  if #p == 1 and p[1][4] == tonumber(ARGV[i + 1]) then\n"
    "    redis.call('XCLAIM', KEYS[1], ARGV[1], ARGV[2], 0, ARGV[i], 'IDLE',"
    " p[1][3], 'RETRYCOUNT', p[1][4] - 1, 'JUSTID')\n"
    "    released = released + 1\n"
    "  end\n"
    "end\n"
    "return released\n";

/* KEYS: stream (alone: see below). ARGV: group, me, ids... Returns {ids
 * still ours, now refreshed; ids whose entry is no longer in the stream
 * (deleted or trimmed while pending): acknowledged here if still pending
 * to me}. An entry not in the stream is "gone" whoever holds it now: a
 * peer's XAUTOCLAIM (7.0+) drops deleted entries from every consumer's
 * pending list, which must not read as a loss of ownership. An XCLAIM
 * alone would drop a deleted entry from the pending list silently (7.0+).
 *
 * The stream key alone, so that a slot being migrated never stops it: a
 * script naming a key the node does not have (the reasons and schedule of
 * a fresh queue) gets TRYAGAIN from CLUSTER SETSLOT ... MIGRATING until
 * the slot is final, while XREADGROUP goes on handing out work. The gone
 * entries' reasons and schedule are cleared by a settlement of their own
 * (SETTLE_GONE: XACK, HDEL, ZREM, each of one key), queued by
 * emq__inflight_refreshed. */
const char emq__lua_refresh[] =
    "local mine, gone = {}, {}\n"
    "for i = 3, #ARGV do\n"
    "  local id = ARGV[i]\n"
    "  local p = redis.call('XPENDING', KEYS[1], ARGV[1], id, id, 1, ARGV[2])\n"
    "  if #redis.call('XRANGE', KEYS[1], id, id) == 0 then\n"
    "    if #p == 1 then redis.call('XACK', KEYS[1], ARGV[1], id) end\n"
    "    gone[#gone + 1] = id\n"
    "  elseif #p == 1 then\n"
    "    mine[#mine + 1] = id\n"
    "  end\n"
    "end\n"
    "if #mine == 0 then return {mine, gone} end\n"
    "local n = #mine\n"
    "mine[n + 1] = 'JUSTID'\n"
    "redis.call('XCLAIM', KEYS[1], ARGV[1], ARGV[2], 0, unpack(mine))\n"
    "mine[n + 1] = nil\n"
    "return {mine, gone}\n";

/* KEYS: the group's inhand hash. ARGV: pairs of entry ID and how many ms
 * ago it was handed out. Stores when, by the server's clock. */
const char emq__lua_inhand_publish[] =
    "if redis.replicate_commands then pcall(redis.replicate_commands) end\n"
    "local t = redis.call('TIME')\n"
    "local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)\n"
    "for i = 1, #ARGV - 1, 2 do\n"
    "  redis.call('HSET', KEYS[1], ARGV[i], now - tonumber(ARGV[i + 1]))\n"
    "end\n"
    "return 0\n";

/* KEYS: stream, unseen set. ARGV: group, me, ids... Marks each id still
 * pending to me; returns how many. A mark sent late (a connection held up
 * past claim idle) must not land on an entry a peer has taken since and
 * may have handed out: its crash would then go uncounted. The lease need
 * not be held: a mark only ever keeps a count from rising for a delivery
 * this process made, and no handler of this process will get it. */
const char emq__lua_mark[] =
    "local n = 0\n"
    "for i = 3, #ARGV do\n"
    "  local p = redis.call('XPENDING', KEYS[1], ARGV[1], ARGV[i], ARGV[i],"
    " 1, ARGV[2])\n"
    "  if #p == 1 then\n"
    "    redis.call('SADD', KEYS[2], ARGV[i])\n"
    "    n = n + 1\n"
    "  end\n"
    "end\n"
    "return n\n";
