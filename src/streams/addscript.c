/* SPDX-License-Identifier: BSD-3-Clause */
/* addscript.c: the producer's script for entries that are delayed or
 * de-duplicated.
 *
 * A plain entry is one XADD. An entry with a delay, a due time or an
 * idempotency key is this script instead, so that each case is one atomic
 * step on the queue's slot:
 *   - de-duplication: the idempotency key (a string in the queue's
 *     hashtag) is read first; when it holds an ID, that ID is the answer
 *     and nothing is added; otherwise the entry is added and its ID (or
 *     handle) stored there for the key's window. A re-send of the same
 *     entry after an unknown outcome therefore adds nothing;
 *   - a delayed entry is scheduled: its pairs packed with the server's
 *     MessagePack into the hash of waiting entries under a new handle
 *     ("delayed-" and twelve digits of the counter), its due time (by the
 *     server's clock when it is a delay) into the sorted set (delayed.c
 *     moves and cancels them).
 */
#include "streams.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

/* KEYS: stream, waiting, entries, seq [, dedup key]. ARGV: "now", "in" or
 * "at"; the delay or due time (ms); "1" when the stream must exist; the
 * dedup window (ms); the number of XADD options; the options; the pairs. */
static const char add_script[] =
    "if redis.replicate_commands then pcall(redis.replicate_commands) end\n"
    "local dedup = KEYS[5]\n"
    "if dedup then\n"
    "  local first = redis.call('GET', dedup)\n"
    "  if first then return first end\n"
    "end\n"
    "if ARGV[3] == '1' and redis.call('EXISTS', KEYS[1]) == 0 then\n"
    "  return false\n"
    "end\n"
    "local nx = tonumber(ARGV[5])\n"
    "local id\n"
    "if ARGV[1] == 'now' then\n"
    "  local args = {}\n"
    "  for i = 6, 5 + nx do args[#args + 1] = ARGV[i] end\n"
    "  args[#args + 1] = '*'\n"
    "  for i = 6 + nx, #ARGV do args[#args + 1] = ARGV[i] end\n"
    "  id = redis.call('XADD', KEYS[1], unpack(args))\n"
    "else\n"
    "  local due = tonumber(ARGV[2])\n"
    "  if ARGV[1] == 'in' then\n"
    "    local t = redis.call('TIME')\n"
    "    due = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) + "
    "due\n"
    "  end\n"
    "  local fields = {}\n"
    "  for i = 6 + nx, #ARGV do fields[#fields + 1] = ARGV[i] end\n"
    "  id = string.format('" EMQ_DELAYED_PREFIX "%012d',\n"
    "                     redis.call('INCR', KEYS[4]))\n"
    "  redis.call('HSET', KEYS[3], id, cmsgpack.pack(fields))\n"
    "  redis.call('ZADD', KEYS[2], due, id)\n"
    "end\n"
    "if dedup then redis.call('SET', dedup, id, 'PX', ARGV[4]) end\n"
    "return id\n";

size_t emq__add_head(const char **argv, size_t *lens, emq__add_texts *texts,
                     const emq__delayed_keys *dk, const char *stream,
                     const emq__add_plan *plan, int nomkstream,
                     const char *const *xopts, const size_t *xoptlens,
                     size_t nxopts) {
    int delayed = plan->delay_ms > 0 || plan->due_ms > 0;
    size_t n = 0;
    argv[n++] = "EVAL";
    argv[n++] = add_script;
    argv[n++] = plan->dedup_key ? "5" : "4";
    argv[n++] = stream;
    argv[n++] = dk->waiting;
    argv[n++] = dk->entries;
    argv[n++] = dk->seq;
    for (size_t i = 0; i < n; i++)
        lens[i] = strlen(argv[i]);
    if (plan->dedup_key) {
        argv[n] = plan->dedup_key;
        lens[n++] = plan->dedup_key_len;
    }
    snprintf(texts->when, sizeof texts->when, "%" PRId64,
             plan->delay_ms > 0 ? plan->delay_ms : plan->due_ms);
    snprintf(texts->ttl, sizeof texts->ttl, "%" PRId64, plan->dedup_ttl_ms);
    snprintf(texts->nx, sizeof texts->nx, "%zu", delayed ? 0 : nxopts);
    const char *words[] = {!delayed             ? "now"
                           : plan->delay_ms > 0 ? "in"
                                                : "at",
                           texts->when, nomkstream ? "1" : "0", texts->ttl,
                           texts->nx};
    for (size_t i = 0; i < 5; i++) {
        argv[n] = words[i];
        lens[n++] = strlen(words[i]);
    }
    for (size_t i = 0; !delayed && i < nxopts; i++) {
        argv[n] = xopts[i];
        lens[n++] = xoptlens[i];
    }
    return n;
}
