/* SPDX-License-Identifier: BSD-3-Clause */
/* group_limits.c: a group's rate and in-flight limits, read and set
 * (emq_admin_group_limits).
 *
 * The limits live in emq:{Q}:limits:G (a hash: rate, max_in_flight),
 * where the group's consumers read them (consumer/grant.c). Setting one
 * to 0 removes it; the answer is what is recorded after the change.
 */
#include "admin.h"

#include <stdio.h>
#include <stdlib.h>

int emq__admin_limits_from(const emq_reply *hmget, emq_group_limits *out) {
    if (emq_reply_kind(hmget) != EMQ_REPLY_ARRAY || emq_reply_len(hmget) != 2) {
        *out = (emq_group_limits){-1, -1};
        return -1;
    }
    /* nil or not a limit: 0 (none), as the consumers read it */
    out->rate = emq__limit_value(emq_reply_at(hmget, 0));
    out->max_in_flight = emq__limit_value(emq_reply_at(hmget, 1));
    return (emq__limit_ignored(emq_reply_at(hmget, 0))
                ? (int)EMQ_LIMIT_IGNORED_RATE
                : 0) |
           (emq__limit_ignored(emq_reply_at(hmget, 1))
                ? (int)EMQ_LIMIT_IGNORED_MAX_IN_FLIGHT
                : 0);
}

emq_status emq__admin_queue_limits(emq_admin_t *a, const char *group,
                                   const emq_group_limits *set,
                                   emq_group_limits *out, emq_error *err) {
    if (a == NULL)
        return emq__error_set(err, EMQ_EINVAL, 0,
                              "group limits need an admin handle");
    emq_status st = emq__keys_check_name("group", group, err);
    if (st != EMQ_OK)
        return st;
    if (set && (set->rate < -1 || set->max_in_flight < -1))
        return emq__error_set(
            err, EMQ_EINVAL, 0,
            "a limit is > 0 (that limit), 0 (none) or -1 "
            "(left as it is), not %lld",
            (long long)(set->rate < -1 ? set->rate : set->max_in_flight));
    char *key = emq__keys_of_group(&a->keys, "limits", group, NULL);
    if (key == NULL)
        return emq__oom(err);
    char rate[24], maxf[24];
    snprintf(rate, sizeof rate, "%lld", set ? (long long)set->rate : 0LL);
    snprintf(maxf, sizeof maxf, "%lld",
             set ? (long long)set->max_in_flight : 0LL);
    const char *set_rate[] = {"HSET", key, "rate", rate};
    const char *del_rate[] = {"HDEL", key, "rate"};
    const char *set_maxf[] = {"HSET", key, "max_in_flight", maxf};
    const char *del_maxf[] = {"HDEL", key, "max_in_flight"};
    const char *get[] = {"HMGET", key, "rate", "max_in_flight"};
    emq__session_cmd cmds[3];
    size_t n = 0;
    if (set && set->rate > 0)
        cmds[n++] = (emq__session_cmd){4, set_rate, NULL};
    else if (set && set->rate == 0)
        cmds[n++] = (emq__session_cmd){3, del_rate, NULL};
    if (set && set->max_in_flight > 0)
        cmds[n++] = (emq__session_cmd){4, set_maxf, NULL};
    else if (set && set->max_in_flight == 0)
        cmds[n++] = (emq__session_cmd){3, del_maxf, NULL};
    cmds[n++] = (emq__session_cmd){4, get, NULL};
    emq_reply *r[3] = {NULL, NULL, NULL};
    st = emq__admin_pipeline(a, n, cmds, r, err);
    for (size_t i = 0; st == EMQ_OK && i < n; i++)
        if (emq_reply_kind(r[i]) == EMQ_REPLY_ERROR)
            st = emq__reply_error_set(err, r[i],
                                      "%s the limits of group '%s' in '%s' "
                                      "failed",
                                      i + 1 < n ? "setting" : "reading", group,
                                      key);
    if (st == EMQ_OK && out)
        emq__admin_limits_from(r[n - 1], out);
    for (size_t i = 0; i < n; i++)
        emq_reply_free(r[i]);
    emq__free(key);
    return st;
}
