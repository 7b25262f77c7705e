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

size_t emq__add_head(const char **argv, size_t *lens, emq__add_texts *texts,
                     const emq__delayed_keys *dk, const char *stream,
                     const emq__add_plan *plan, int nomkstream,
                     const char *const *xopts, const size_t *xoptlens,
                     size_t nxopts) {
    int delayed = plan->delay_ms > 0 || plan->due_ms > 0;
    int held = delayed || plan->level >= 0; /* not added by XADD now */
    size_t n = 0;
    emq__script_head(EMQ_SCRIPT_ADD, plan->functions, argv);
    n = 2;
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
