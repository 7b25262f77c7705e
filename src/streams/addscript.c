/* SPDX-License-Identifier: BSD-3-Clause */
/* addscript.c: the producer's script for entries that are delayed,
 * de-duplicated or given a priority.
 *
 * A plain entry is one XADD. An entry with a delay, a due time, an
 * idempotency key or a priority goes through this script instead (up to
 * EMQ_ADD_BATCH_MAX of them per call: src/scripts/schedule.c), so that
 * each case is one atomic step on the queue's slot:
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

size_t emq__add_words_max(const emq__add_plan *plans, size_t n, size_t nxopts) {
    size_t words = 3 + 9 + n + 3 + nxopts; /* head, keys, dedup keys */
    for (size_t i = 0; i < n; i++)
        words += 6 + 2 * plans[i].nfields;
    return words;
}

/* Appends one word (len bytes) to argv/lens at *n. */
static void put(const char **argv, size_t *lens, size_t *n, const char *word,
                size_t len) {
    argv[*n] = word;
    lens[(*n)++] = len;
}

#define PUT_TEXT(argv, lens, n, text) put(argv, lens, n, text, strlen(text))

size_t emq__add_call(const char **argv, size_t *lens, emq__add_head_texts *head,
                     emq__add_texts *texts, const emq__delayed_keys *dk,
                     const char *stream, const emq__add_plan *plans, size_t n,
                     int nomkstream, const char *const *xopts,
                     const size_t *xoptlens, size_t nxopts, int functions) {
    int prio = plans[0].level >= 0;
    size_t w = 2, ndedup = 0;
    emq__script_head(EMQ_SCRIPT_ADD, functions, argv);
    lens[0] = strlen(argv[0]);
    lens[1] = strlen(argv[1]);
    for (size_t i = 0; i < n; i++)
        ndedup += plans[i].dedup_key != NULL;
    size_t nkeys = (prio ? 9 : 4) + ndedup;
    snprintf(head->nkeys, sizeof head->nkeys, "%zu", nkeys);
    PUT_TEXT(argv, lens, &w, head->nkeys);
    const char *keys[] = {stream,     dk->waiting, dk->entries,
                          dk->seq,    dk->held,    dk->levels,
                          dk->counts, dk->bell,    dk->prio};
    for (size_t i = 0; i < (prio ? 9u : 4u); i++)
        PUT_TEXT(argv, lens, &w, keys[i]);
    for (size_t i = 0; i < n; i++)
        if (plans[i].dedup_key)
            put(argv, lens, &w, plans[i].dedup_key, plans[i].dedup_key_len);
    PUT_TEXT(argv, lens, &w, nomkstream ? "1" : "0");
    PUT_TEXT(argv, lens, &w, prio ? "1" : "0");
    snprintf(head->nx, sizeof head->nx, "%zu", nxopts);
    PUT_TEXT(argv, lens, &w, head->nx);
    for (size_t i = 0; i < nxopts; i++)
        put(argv, lens, &w, xopts[i], xoptlens[i]);
    size_t key_at = (prio ? 9 : 4) + 1; /* KEYS index of the next key */
    for (size_t i = 0; i < n; i++) {
        const emq__add_plan *pl = &plans[i];
        emq__add_texts *t = &texts[i];
        int delayed = pl->delay_ms > 0 || pl->due_ms > 0;
        PUT_TEXT(argv, lens, &w,
                 !delayed           ? "now"
                 : pl->delay_ms > 0 ? "in"
                                    : "at");
        snprintf(t->when, sizeof t->when, "%" PRId64,
                 pl->delay_ms > 0 ? pl->delay_ms : pl->due_ms);
        PUT_TEXT(argv, lens, &w, t->when);
        snprintf(t->ttl, sizeof t->ttl, "%" PRId64, pl->dedup_ttl_ms);
        PUT_TEXT(argv, lens, &w, t->ttl);
        t->level[0] = '\0';
        if (pl->level >= 0)
            snprintf(t->level, sizeof t->level, "%d", pl->level);
        PUT_TEXT(argv, lens, &w, t->level);
        snprintf(t->key, sizeof t->key, "%zu",
                 pl->dedup_key ? key_at++ : (size_t)0);
        PUT_TEXT(argv, lens, &w, t->key);
        snprintf(t->words, sizeof t->words, "%zu", 2 * pl->nfields);
        PUT_TEXT(argv, lens, &w, t->words);
        for (size_t f = 0; f < pl->nfields; f++) {
            const emq_field *fd = &pl->fields[f];
            put(argv, lens, &w, fd->name ? fd->name : "", fd->name_len);
            put(argv, lens, &w, fd->value ? fd->value : "", fd->value_len);
        }
    }
    return w;
}
