/* SPDX-License-Identifier: BSD-3-Clause */
/* delayed.c: a queue's delayed entries, counted, and cancellation.
 *
 * Counting reads the sorted set of waiting entries (ZCARD, and the first
 * by due time). Cancelling is one script (streams' schedule.c) over the
 * queue's keys: a waiting handle leaves the schedule; a stream entry that
 * no group's cursor has reached is deleted; anything else is left alone
 * and said so.
 */
#include "admin.h"

#include <stdlib.h>
#include <string.h>

void emq__admin_delayed_words(const emq__delayed_keys *dk, int functions,
                              emq__delayed_words *w,
                              emq__session_cmd cmds[EMQ_DELAYED_COUNT_CMDS]) {
    w->zcard[0] = "ZCARD";
    w->zcard[1] = dk->waiting;
    w->first[0] = "ZRANGE";
    w->first[1] = dk->waiting;
    w->first[2] = "0";
    w->first[3] = "0";
    w->first[4] = "WITHSCORES";
    w->bad[0] = "HLEN";
    w->bad[1] = dk->bad;
    emq__script_head(EMQ_SCRIPT_ORPHANS, functions, w->orphans);
    w->orphans[2] = "3";
    w->orphans[3] = dk->entries;
    w->orphans[4] = dk->waiting;
    w->orphans[5] = dk->held;
    cmds[0] = (emq__session_cmd){2, w->zcard, NULL};
    cmds[1] = (emq__session_cmd){5, w->first, NULL};
    cmds[2] = (emq__session_cmd){2, w->bad, NULL};
    cmds[3] = (emq__session_cmd){6, w->orphans, NULL};
}

/* An integer reply as a count: 0 for an error reply (an ACL) or below. */
static uint64_t count_of(const emq_reply *r) {
    int64_t n = emq_reply_kind(r) == EMQ_REPLY_INTEGER ? emq_reply_integer(r)
                                                       : 0;
    return n > 0 ? (uint64_t)n : 0;
}

int emq__admin_delayed_from(const emq_reply *const r[EMQ_DELAYED_COUNT_CMDS],
                            emq_delayed_info *out) {
    const emq_reply *zcard = r[0], *first = r[1];
    if (emq_reply_kind(zcard) != EMQ_REPLY_INTEGER ||
        emq_reply_kind(first) != EMQ_REPLY_ARRAY)
        return -1;
    out->waiting = count_of(zcard);
    out->next_due_ms = -1;
    out->set_aside = count_of(r[2]);
    out->orphaned = count_of(r[3]);
    /* RESP2: [handle, score]; RESP3: [[handle, score]]. */
    const emq_reply *pair = first;
    if (emq_reply_len(pair) == 1)
        pair = emq_reply_at(pair, 0);
    int64_t ms;
    if (emq_reply_len(pair) == 2 && emq__due_ms(emq_reply_at(pair, 1), &ms))
        out->next_due_ms = ms;
    return 0;
}

emq_status emq__admin_queue_delayed(emq_admin_t *a, emq_delayed_info *out,
                                    emq_error *err) {
    if (out == NULL || a == NULL)
        return emq__error_set(err, EMQ_EINVAL, 0,
                              "counting delayed entries needs an admin "
                              "handle and out");
    out->waiting = 0;
    out->next_due_ms = -1;
    emq__delayed_keys dk;
    emq_status st = emq__delayed_keys_make(&a->keys, &dk, err);
    if (st != EMQ_OK)
        return st;
    emq__delayed_words w;
    emq__session_cmd cmds[EMQ_DELAYED_COUNT_CMDS];
    emq__admin_delayed_words(&dk, emq__session_functions(&a->session), &w,
                             cmds);
    emq_reply *r[EMQ_DELAYED_COUNT_CMDS] = {NULL};
    st = emq__admin_pipeline(a, EMQ_DELAYED_COUNT_CMDS, cmds, r, err);
    if (st == EMQ_OK &&
        emq__admin_delayed_from((const emq_reply *const *)r, out) != 0)
        st = emq__reply_error_set(
            err, emq_reply_kind(r[0]) == EMQ_REPLY_ERROR ? r[0] : r[1],
            "counting delayed entries in '%s' failed", dk.waiting);
    for (int i = 0; i < EMQ_DELAYED_COUNT_CMDS; i++)
        emq_reply_free(r[i]);
    emq__delayed_keys_free(&dk);
    return st;
}

/* EMQ_EINVAL naming ids[i] unless it is a handle or a stream ID. */
static emq_status check_ids(const char *const *ids, size_t nids,
                            emq_error *err) {
    if (nids == 0 || nids > EMQ_CANCEL_MAX || ids == NULL)
        return emq__error_set(err, EMQ_EINVAL, 0,
                              "cancel takes 1 to %d IDs per call, not %zu",
                              EMQ_CANCEL_MAX, ids ? nids : 0);
    for (size_t i = 0; i < nids; i++) {
        size_t len = ids[i] ? strlen(ids[i]) : 0;
        if (ids[i] && (emq__delayed_handle_is(ids[i], len) ||
                       emq__stream_id_parse(ids[i], len, NULL) == 0))
            continue;
        char shown[64];
        emq__printable(shown, sizeof shown, ids[i] ? ids[i] : "", len);
        return emq__error_set(err, EMQ_EINVAL, 0,
                              "'%s' (ID %zu) is neither a delayed entry's "
                              "handle (delayed-<digits>) nor a stream ID "
                              "(ms-seq); nothing was cancelled",
                              shown, i);
    }
    return EMQ_OK;
}

/* The outcome a cancel's reply word names; -1 for another word. */
static int outcome_of(const emq_reply *word) {
    static const char *const names[] = {"removed", "delivered", "missing"};
    size_t len;
    const char *text = emq_reply_str(word, &len);
    for (int k = 0; text && k < 3; k++)
        if (len == strlen(names[k]) && memcmp(text, names[k], len) == 0)
            return k;
    return -1;
}

emq_status emq__admin_queue_cancel(emq_admin_t *a, const char *const *ids,
                                   size_t nids, emq_cancel_outcome *outcomes,
                                   uint64_t *removed, emq_error *err) {
    if (removed)
        *removed = 0;
    if (a == NULL)
        return emq__error_set(err, EMQ_EINVAL, 0,
                              "cancel needs an admin handle");
    emq_status st = check_ids(ids, nids, err);
    if (st != EMQ_OK)
        return st;
    emq__delayed_keys dk;
    if ((st = emq__delayed_keys_make(&a->keys, &dk, err)) != EMQ_OK)
        return st;
    const char **argv =
        emq__alloc((EMQ_DELAYED_CANCEL_HEAD + nids) * sizeof *argv);
    emq_reply *r = NULL;
    if (argv == NULL) {
        st = emq__oom(err);
        goto out;
    }
    if ((st = emq__admin_ready(a, err)) != EMQ_OK)
        goto out;
    int head = emq__delayed_cancel_head(argv, &dk, a->keys.stream,
                                        emq__session_functions(&a->session));
    for (size_t i = 0; i < nids; i++)
        argv[head + i] = ids[i];
    st = emq__admin_call(a, "cancelling entries", head + (int)nids, argv, NULL,
                         &r, err);
    if (st != EMQ_OK)
        goto out;
    if (emq_reply_kind(r) != EMQ_REPLY_ARRAY || emq_reply_len(r) != nids) {
        st = emq__reply_bad_shape(err, "cancel");
        goto out;
    }
    uint64_t n = 0;
    for (size_t i = 0; i < nids; i++) {
        int k = outcome_of(emq_reply_at(r, i));
        if (k < 0) {
            st = emq__reply_bad_shape(err, "cancel");
            goto out;
        }
        if (outcomes)
            outcomes[i] = (emq_cancel_outcome)k;
        n += k == EMQ_CANCEL_REMOVED;
    }
    if (removed)
        *removed = n;
out:
    emq_reply_free(r);
    emq__free(argv);
    emq__delayed_keys_free(&dk);
    return st;
}
