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
    const char *w[2];
    emq_status st = emq__admin_script_head(a, EMQ_SCRIPT_TRIM_ACKED, w, err);
    if (st != EMQ_OK)
        return st;
    const char *argv[] = {w[0],     w[1],  "1",  a->keys.stream,
                          maxlen_s, age_s, cap_s};
    emq_reply *r = NULL;
    st = emq__admin_call(a, "ack-aware trim", 7, argv, NULL, &r, err);
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
