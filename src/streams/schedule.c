/* SPDX-License-Identifier: BSD-3-Clause */
/* schedule.c: entries handed out later, and cancelled before they are:
 * the keys of a queue's delayed and held entries (emq__delayed_keys)
 * and the scripts that move and cancel them.
 *
 * A delayed entry waits in two keys of its queue's hashtag: the sorted set
 * "delayed" (handle -> due time, unix ms by the server's clock) and the
 * hash "delayed:entries" (handle -> its field/value pairs, packed with the
 * server's MessagePack). Handles are "delayed-" and twelve digits of the
 * counter "delayed:seq", so handles due at the same millisecond leave in
 * the order they came. Three scripts, each one atomic step on one slot:
 *   - schedule (the producer; addscript.c): the pairs in, the handle out;
 *   - move (the consumers' upkeep): what is due goes to the stream by
 *     XADD, then leaves both keys, so a mover killed at any point moves
 *     nothing twice and loses nothing (a failed XADD leaves its entry
 *     waiting);
 *   - cancel (admin): a waiting handle leaves both keys; a stream ID
 *     that no group has been handed yet (above every group's cursor) is
 *     XDEL'd; anything else is left alone and said so.
 * No state here, no network: the callers send the words on their own
 * sessions.
 */
#include "streams.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

emq_status emq__delayed_keys_make(const emq__keys *k, emq__delayed_keys *out,
                                  emq_error *err) {
    memset(out, 0, sizeof *out);
    out->waiting = emq__keys_join(k, "delayed", NULL);
    out->entries = emq__keys_join(k, "delayed", "entries");
    out->seq = emq__keys_join(k, "delayed", "seq");
    out->held = emq__keys_join(k, "held", NULL);
    out->levels = emq__keys_join(k, "held", "levels");
    out->counts = emq__keys_join(k, "held", "counts");
    out->bell = emq__keys_join(k, "held", "bell");
    out->prio = emq__keys_join(k, "priority", NULL);
    out->bad = emq__keys_join(k, "delayed", "bad");
    if (out->waiting && out->entries && out->seq && out->held && out->levels &&
        out->counts && out->bell && out->prio && out->bad)
        return EMQ_OK;
    emq__delayed_keys_free(out);
    return emq__oom(err);
}

void emq__delayed_keys_free(emq__delayed_keys *dk) {
    emq__free(dk->waiting);
    emq__free(dk->entries);
    emq__free(dk->seq);
    emq__free(dk->held);
    emq__free(dk->levels);
    emq__free(dk->counts);
    emq__free(dk->bell);
    emq__free(dk->prio);
    emq__free(dk->bad);
    memset(dk, 0, sizeof *dk);
}

int emq__delayed_handle_is(const char *text, size_t len) {
    size_t n = sizeof EMQ_DELAYED_PREFIX - 1;
    if (len <= n || len > n + 20 || memcmp(text, EMQ_DELAYED_PREFIX, n) != 0)
        return 0;
    for (size_t i = n; i < len; i++)
        if (text[i] < '0' || text[i] > '9')
            return 0;
    return 1;
}

/* The twelve words both scripts start with: the head of script id
 * (scripts.h), the count and the keys (KEYS of the scripts of
 * scripts/schedule.c). */
static void script_head(const char *argv[12], emq__script_id id, int functions,
                        const emq__delayed_keys *dk, const char *stream) {
    emq__script_head(id, functions, argv);
    argv[2] = "9"; /* emq__delayed_move_argv may say 4 */
    argv[3] = dk->waiting;
    argv[4] = dk->entries;
    argv[5] = stream;
    argv[6] = dk->bad;
    argv[7] = dk->held;
    argv[8] = dk->levels;
    argv[9] = dk->counts;
    argv[10] = dk->bell;
    argv[11] = dk->prio;
}

int emq__delayed_move_argv(const char *argv[EMQ_DELAYED_MOVE_ARGC],
                           const emq__delayed_keys *dk, const char *stream,
                           const char *max, int prio, int functions) {
    script_head(argv, EMQ_SCRIPT_DELAYED_MOVE, functions, dk, stream);
    if (!prio) {
        argv[2] = "4";
        argv[7] = max;
        return 8;
    }
    argv[12] = max;
    return 13;
}

emq_status emq__delayed_move_reply(const emq_reply *r, emq__delayed_moved *out,
                                   emq_error *err) {
    memset(out, 0, sizeof *out);
    out->next_in_ms = -1;
    if (emq_reply_kind(r) == EMQ_REPLY_ERROR)
        return emq__reply_error_set(err, r,
                                    "moving due delayed entries failed");
    if (emq_reply_kind(r) != EMQ_REPLY_ARRAY || emq_reply_len(r) != 5)
        return emq__reply_bad_shape(err, "the delayed entries' move");
    for (size_t i = 0; i < 5; i++)
        if (emq_reply_kind(emq_reply_at(r, i)) != EMQ_REPLY_INTEGER)
            return emq__reply_bad_shape(err, "the delayed entries' move");
    int64_t moved = emq_reply_integer(emq_reply_at(r, 0));
    int64_t left = emq_reply_integer(emq_reply_at(r, 1));
    out->moved = moved > 0 ? (uint64_t)moved : 0;
    out->waiting = left > 0 ? (uint64_t)left : 0;
    out->next_in_ms = emq_reply_integer(emq_reply_at(r, 2));
    int64_t aside = emq_reply_integer(emq_reply_at(r, 3));
    out->set_aside = aside > 0 ? (uint64_t)aside : 0;
    int64_t vanished = emq_reply_integer(emq_reply_at(r, 4));
    out->vanished = vanished > 0 ? (uint64_t)vanished : 0;
    return EMQ_OK;
}

int emq__due_ms(const emq_reply *r, int64_t *ms) {
    double v;
    if (emq_reply_kind(r) == EMQ_REPLY_DOUBLE) {
        v = emq_reply_double(r);
    } else {
        size_t len = 0;
        const char *text = emq_reply_str(r, &len);
        char buf[64];
        if (text == NULL || len == 0 || len >= sizeof buf)
            return 0;
        memcpy(buf, text, len);
        buf[len] = '\0';
        char *end = NULL;
        v = strtod(buf, &end);
        if (end == buf)
            return 0;
    }
    if (!(v > 0)) /* negative, -inf, NaN */
        *ms = 0;
    else if (v >= (double)EMQ_DUE_MS_MAX)
        *ms = EMQ_DUE_MS_MAX;
    else
        *ms = (int64_t)v;
    return 1;
}

int emq__delayed_cancel_head(const char *head[EMQ_DELAYED_CANCEL_HEAD],
                             const emq__delayed_keys *dk, const char *stream,
                             int functions) {
    script_head(head, EMQ_SCRIPT_DELAYED_CANCEL, functions, dk, stream);
    return EMQ_DELAYED_CANCEL_HEAD;
}
