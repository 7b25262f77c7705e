/* SPDX-License-Identifier: BSD-3-Clause */
/* priorities.c: a queue's priorities, read and their aging step set.
 *
 * A queue has priorities while its record emq:{Q}:priority exists (its
 * value the aging step in ms); the held entries are counted by level in
 * emq:{Q}:held:counts (streams' scripts keep both, docs/KEYSPACE.md).
 */
#include "admin.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void emq__admin_prio_words(const emq__delayed_keys *dk, const char *get[2],
                           const char *counts[EMQ_PRIO_COUNTS_WORDS]) {
    /* The ten levels by name: the hash is writable by a priority
     * credential, and HGETALL of a million forged fields blocked the
     * server at every describe. */
    static const char *const levels[EMQ_PRIORITY_LEVELS] = {
        "0", "1", "2", "3", "4", "5", "6", "7", "8", "9"};
    get[0] = "GET";
    get[1] = dk->prio;
    counts[0] = "HMGET";
    counts[1] = dk->counts;
    for (int l = 0; l < EMQ_PRIORITY_LEVELS; l++)
        counts[2 + l] = levels[l];
}

int emq__admin_prio_from(const emq_reply *get, const emq_reply *counts,
                         emq_priority_info *out) {
    memset(out, 0, sizeof *out);
    if (emq_reply_kind(get) == EMQ_REPLY_ERROR ||
        emq_reply_kind(counts) == EMQ_REPLY_ERROR)
        return -1;
    if (emq_reply_str(get, NULL) == NULL)
        return 0; /* no record: no priorities */
    /* Views, not C strings, and anyone may have written "" there: parsed
     * by length, anything but digits counting as nothing. */
    out->age_ms = emq__stream_number(get, 0);
    /* HMGET of the levels 0..9, in order (nil: none held there). */
    for (size_t l = 0; l < EMQ_PRIORITY_LEVELS && l < emq_reply_len(counts);
         l++) {
        int64_t c = emq__stream_number(emq_reply_at(counts, l), 0);
        if (c <= 0)
            continue;
        out->held_at[l] = (uint64_t)c;
        out->held += (uint64_t)c;
    }
    return 1;
}

emq_status emq__admin_queue_priorities(emq_admin_t *a, int64_t set_age_ms,
                                       emq_priority_info *out, int *has,
                                       emq_error *err) {
    emq__delayed_keys dk;
    emq_status st = emq__delayed_keys_make(&a->keys, &dk, err);
    if (st != EMQ_OK)
        return st;
    char age[24];
    snprintf(age, sizeof age, "%lld", (long long)set_age_ms);
    const char *set[] = {"SET", dk.prio, age};
    const char *get[2], *counts[EMQ_PRIO_COUNTS_WORDS];
    emq__admin_prio_words(&dk, get, counts);
    emq__session_cmd cmds[3];
    size_t n = 0;
    if (set_age_ms >= 0)
        cmds[n++] = (emq__session_cmd){3, set, NULL};
    cmds[n++] = (emq__session_cmd){2, get, NULL};
    cmds[n++] = (emq__session_cmd){EMQ_PRIO_COUNTS_WORDS, counts, NULL};
    emq_reply *r[3] = {NULL, NULL, NULL};
    st = emq__admin_pipeline(a, n, cmds, r, err);
    for (size_t i = 0; st == EMQ_OK && i < n; i++)
        if (emq_reply_kind(r[i]) == EMQ_REPLY_ERROR)
            st = emq__reply_error_set(err, r[i],
                                      "%s the priorities of '%s' "
                                      "failed",
                                      i == 0 && set_age_ms >= 0 ? "setting"
                                                                : "reading",
                                      a->keys.stream);
    emq_priority_info got;
    int found = 0;
    if (st == EMQ_OK)
        found = emq__admin_prio_from(r[n - 2], r[n - 1], &got) > 0;
    if (st == EMQ_OK && out)
        *out = got;
    if (st == EMQ_OK && has)
        *has = found;
    for (size_t i = 0; i < n; i++)
        emq_reply_free(r[i]);
    emq__delayed_keys_free(&dk);
    return st;
}

void emq__admin_prio_add(emq_priority_info *sum, const emq_priority_info *one,
                         int first) {
    if (first)
        sum->age_ms = one->age_ms;
    sum->held += one->held;
    for (int l = 0; l < EMQ_PRIORITY_LEVELS; l++)
        sum->held_at[l] += one->held_at[l];
}
