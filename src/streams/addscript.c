/* SPDX-License-Identifier: BSD-3-Clause */
/* addscript.c: the producer's script for entries that are delayed,
 * de-duplicated or given a priority.
 *
 * A plain entry is one XADD. An entry with a delay, a due time, an
 * idempotency key or a priority is this script instead, so that each case
 * is one atomic step on the queue's slot:
 *   - de-duplication: the idempotency key (a string in the queue's
 *     hashtag) is read first; when it holds an ID (or a handle) with a
 *     TTL, that ID is the answer and nothing is added (any other value
 *     was not written here: it is written over); otherwise the entry is added
 * and its ID (or handle) stored there for the key's window. A re-send of the
 * same entry after an unknown outcome therefore adds nothing;
 *   - a delayed entry is scheduled: its pairs packed with the server's
 *     MessagePack into the hash of waiting entries under a new handle
 *     ("delayed-" and twelve digits of the counter), its due time (by the
 *     server's clock when it is a delay) into the sorted set (schedule.c
 *     moves and cancels them);
 *   - an entry with a priority is held: its pairs packed likewise, its
 *     handle into the held set by its level (EMQ_LUA_HELD_SCORE), where
 *     the consumers' reads take the most urgent first; the queue's
 *     priority record is made if missing, so producers and consumers
 *     opened later know the queue has priorities. A delayed entry with a
 *     priority keeps its level and is held when due.
 */
#include "streams.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

/* KEYS: stream, waiting, entries, seq [, held, levels, counts, bell,
 * priority record: with a priority] [, dedup key]. ARGV: "now", "in" or
 * "at"; the delay or due time (ms); "1" when the stream must exist; the
 * dedup window (ms); the priority level or ""; the number of XADD
 * options; the options; the pairs. An entry without a priority names no
 * key of them, so a user without rights there (docs/SECURITY.md) may
 * still delay and de-duplicate. */
static const char add_script[] =
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

size_t emq__add_head(const char **argv, size_t *lens, emq__add_texts *texts,
                     const emq__delayed_keys *dk, const char *stream,
                     const emq__add_plan *plan, int nomkstream,
                     const char *const *xopts, const size_t *xoptlens,
                     size_t nxopts) {
    int delayed = plan->delay_ms > 0 || plan->due_ms > 0;
    int held = delayed || plan->level >= 0; /* not added by XADD now */
    size_t n = 0;
    argv[n++] = "EVAL";
    argv[n++] = add_script;
    int nkeys = (plan->level >= 0 ? 9 : 4) + (plan->dedup_key != NULL);
    snprintf(texts->nkeys, sizeof texts->nkeys, "%d", nkeys);
    argv[n++] = texts->nkeys;
    argv[n++] = stream;
    argv[n++] = dk->waiting;
    argv[n++] = dk->entries;
    argv[n++] = dk->seq;
    if (plan->level >= 0) {
        argv[n++] = dk->held;
        argv[n++] = dk->levels;
        argv[n++] = dk->counts;
        argv[n++] = dk->bell;
        argv[n++] = dk->prio;
    }
    for (size_t i = 0; i < n; i++)
        lens[i] = strlen(argv[i]);
    if (plan->dedup_key) {
        argv[n] = plan->dedup_key;
        lens[n++] = plan->dedup_key_len;
    }
    snprintf(texts->when, sizeof texts->when, "%" PRId64,
             plan->delay_ms > 0 ? plan->delay_ms : plan->due_ms);
    snprintf(texts->ttl, sizeof texts->ttl, "%" PRId64, plan->dedup_ttl_ms);
    snprintf(texts->nx, sizeof texts->nx, "%zu", held ? 0 : nxopts);
    texts->level[0] = '\0';
    if (plan->level >= 0)
        snprintf(texts->level, sizeof texts->level, "%d", plan->level);
    const char *words[] = {!delayed             ? "now"
                           : plan->delay_ms > 0 ? "in"
                                                : "at",
                           texts->when,
                           nomkstream ? "1" : "0",
                           texts->ttl,
                           texts->level,
                           texts->nx};
    for (size_t i = 0; i < 6; i++) {
        argv[n] = words[i];
        lens[n++] = strlen(words[i]);
    }
    for (size_t i = 0; !held && i < nxopts; i++) {
        argv[n] = xopts[i];
        lens[n++] = xoptlens[i];
    }
    return n;
}
