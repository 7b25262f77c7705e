/* SPDX-License-Identifier: BSD-3-Clause */
/* retention.c: ack-aware trimming of a queue's stream.
 *
 * XACK does not delete entries (an acknowledged entry stays in the stream
 * until it is trimmed or deleted), and trimming by length or age alone
 * deletes work some group has not processed yet. This
 * file trims only below the floor: the oldest entry any group on the
 * stream still needs, which for one group is its oldest pending entry or
 * the first entry after its last-delivered ID, whichever is older, and
 * on 7.0+ also the oldest of the entries the server counts as unread
 * (its lag: a cursor moved past them without reads, as a worker's
 * XCLAIM ... LASTID can, refuses the trim). A
 * length or age bound is applied only below that floor; what the bound
 * asked for and the floor kept is reported as held back.
 *
 * Everything happens in one Lua script, so the floor cannot move between
 * being computed and being used: a producer, a consumer or a new group
 * acts either before the whole trim or after it. The script reads
 * XINFO GROUPS, each group's XPENDING summary and last-delivered ID,
 * compares IDs exactly in Lua (decimal strings, by length then bytes, so
 * no 64-bit value is rounded through a double), and ends with an exact
 * XTRIM MINID (never '~', which trims whole nodes only). A stream without
 * groups is never trimmed: nobody has declared what it still needs.
 */
#include "admin.h"

#include <stdio.h>
#include <string.h>

/* Most entries the script counts to report held_back for the age bound;
 * past it held_back reads as this value ("at least"). Counting walks the
 * held entries, so the cap bounds the script's running time. */
#define EMQ_TRIM_HELD_COUNT_MAX 100000

/* KEYS[1] stream; ARGV: maxlen (-1 none), max age ms (-1 none), the
 * counting cap (held back; a group's lag walked). Returns {removed, floor
 * ("" none), held_back, no_groups}, or {0, '', 0, 0, group, lag, cursor}
 * when a group's cursor lies past entries the server counts as unread by
 * it (nothing trimmed). A cut is an ID (entries below it go), 'all', or
 * nil. */
static const char trim_script[] = EMQ_LUA_CALL
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

emq_status emq__admin_queue_trim(emq_admin_t *a, int64_t maxlen,
                                 int64_t max_age_ms, emq_trim_result *result,
                                 emq_error *err) {
    emq_trim_result local;
    memset(&local, 0, sizeof local);
    if (result)
        *result = local;
    if (a == NULL)
        return emq__error_set(err, EMQ_EINVAL, 0, "trim needs an admin handle");
    if (maxlen < -1 || max_age_ms < -1)
        return emq__error_set(err, EMQ_EINVAL, 0,
                              "trim: maxlen and max_age_ms must be >= 0, or "
                              "-1 for no bound (got %lld and %lld)",
                              (long long)maxlen, (long long)max_age_ms);
    char maxlen_s[24], age_s[24], cap_s[24];
    snprintf(maxlen_s, sizeof maxlen_s, "%lld", (long long)maxlen);
    snprintf(age_s, sizeof age_s, "%lld", (long long)max_age_ms);
    snprintf(cap_s, sizeof cap_s, "%d", EMQ_TRIM_HELD_COUNT_MAX);
    const char *argv[] = {"EVAL",   trim_script, "1",  a->keys.stream,
                          maxlen_s, age_s,       cap_s};
    emq_reply *r = NULL;
    emq_status st =
        emq__admin_call(a, "ack-aware trim", 7, argv, NULL, &r, err);
    if (st != EMQ_OK)
        return st;
    if (emq_reply_kind(r) == EMQ_REPLY_ARRAY && emq_reply_len(r) == 7) {
        char group[128], last[EMQ_ID_MAX];
        size_t n = 0;
        const char *g = emq_reply_str(emq_reply_at(r, 4), &n);
        emq__printable(group, sizeof group, g ? g : "", g ? n : 0);
        const char *l = emq_reply_str(emq_reply_at(r, 6), &n);
        emq__printable(last, sizeof last, l ? l : "", l ? n : 0);
        long long lag = emq_reply_integer(emq_reply_at(r, 5));
        emq_reply_free(r);
        return emq__error_set(
            err, EMQ_ESERVER, 0,
            "group '%s' has its cursor at %s, past %lld entr%s the server "
            "counts as not read by it (lag): the cursor moved without "
            "reads (XCLAIM ... LASTID, or XGROUP SETID); nothing was "
            "trimmed. Move it back (echomq group setid) or destroy the "
            "group",
            group, last, lag, lag == 1 ? "y" : "ies");
    }
    size_t floor_len = 0;
    const char *floor = NULL;
    if (emq_reply_kind(r) == EMQ_REPLY_ARRAY && emq_reply_len(r) == 4)
        floor = emq_reply_str(emq_reply_at(r, 1), &floor_len);
    if (floor == NULL || floor_len >= sizeof local.floor.str) {
        emq_reply_free(r);
        return emq__error_set(err, EMQ_EPROTO, 0,
                              "trim script: unexpected reply");
    }
    long long removed = emq_reply_integer(emq_reply_at(r, 0));
    long long held = emq_reply_integer(emq_reply_at(r, 2));
    local.removed = removed > 0 ? (uint64_t)removed : 0;
    local.held_back = held > 0 ? (uint64_t)held : 0;
    local.no_groups = emq_reply_integer(emq_reply_at(r, 3)) != 0;
    memcpy(local.floor.str, floor, floor_len);
    local.floor.str[floor_len] = '\0';
    emq_reply_free(r);
    if (result)
        *result = local;
    return EMQ_OK;
}
