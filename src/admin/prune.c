/* SPDX-License-Identifier: BSD-3-Clause */
/* prune.c: removing idle consumers of a group without losing work.
 *
 * XGROUP DELCONSUMER drops the consumer's pending entries from the group's
 * pending list: nobody can claim them afterwards and a '>' read never
 * hands them out again: the work is lost silently. So a consumer is only
 * ever deleted by one script that, atomically, (1) checks it is still idle
 * enough, (2) hands its pending entries to an heir with XCLAIM ... JUSTID
 * (JUSTID adds no delivery to the count) keeping each entry's idle time, and
 * (3) deletes it only when its pending list is then empty. The script
 * moves at most EMQ_PRUNE_MOVE_PER_CALL entries per call so the server is
 * never blocked long; this file calls it again until the consumer is gone.
 *
 * The heir is the most recently active consumer that is not being
 * removed. When every consumer is idle there is no heir: the idle
 * consumers that hold entries are kept, the empty ones removed. This file
 * never deletes a consumer that holds entries and never touches a group's
 * cursor or the stream itself.
 */
#include "admin.h"

#include <stdio.h>
#include <string.h>

/* Most pending entries one prune script call hands over. */
#define EMQ_PRUNE_MOVE_PER_CALL 1000

/* One consumer as XINFO CONSUMERS reports it; name is a view into the
 * reply. */
typedef struct prune_member {
    const char *name;
    size_t name_len;
    int64_t idle_ms; /* 7.2: since its last attempt; 7.0: last success */
} prune_member;

/* Reads the consumers of group into *members (emq__free), views into
 * *reply (caller frees). A missing group or stream is EMQ_ESERVER saying
 * so in plain words. */
static emq_status list_members(emq_admin_t *a, const char *group,
                               emq_reply **reply, prune_member **members,
                               size_t *n, emq_error *err) {
    *members = NULL;
    *n = 0;
    const char *argv[] = {"XINFO", "CONSUMERS", a->keys.stream, group};
    emq_status st = emq__admin_send(a, 4, argv, NULL, reply, err);
    if (st != EMQ_OK)
        return st;
    if (emq_reply_kind(*reply) == EMQ_REPLY_ERROR) {
        char shown[200];
        emq__reply_text(*reply, shown, sizeof shown);
        int missing = emq_reply_is_error(*reply, "NOGROUP") ||
                      strstr(shown, "no such key") != NULL;
        st = missing
                 ? emq__reply_error_set(err, *reply,
                                        "cannot prune consumers: group "
                                        "'%s' does not exist on stream "
                                        "'%s'",
                                        group, a->keys.stream)
                 : emq__reply_error_set(err, *reply, "XINFO CONSUMERS failed");
        emq_reply_free(*reply);
        *reply = NULL;
        return st;
    }
    size_t count = emq_reply_len(*reply);
    if (count == 0)
        return EMQ_OK;
    *members = emq__calloc(count, sizeof **members);
    if (*members == NULL) {
        emq_reply_free(*reply);
        *reply = NULL;
        return emq__oom(err);
    }
    for (size_t i = 0; i < count; i++) {
        const emq_reply *c = emq_reply_at(*reply, i);
        const emq_reply *name = emq__stream_field(c, "name");
        const emq_reply *idle = emq__stream_field(c, "idle");
        prune_member *m = &(*members)[i];
        m->name = name ? emq_reply_str(name, &m->name_len) : NULL;
        if (m->name == NULL || idle == NULL) {
            emq__free(*members);
            *members = NULL;
            emq_reply_free(*reply);
            *reply = NULL;
            return emq__error_set(err, EMQ_EPROTO, 0,
                                  "XINFO CONSUMERS: unexpected reply shape");
        }
        m->idle_ms = emq_reply_integer(idle);
    }
    *n = count;
    return EMQ_OK;
}

/* Runs the prune script for victim until it is deleted, kept or left
 * alone, adding to *result. */
static emq_status prune_one(emq_admin_t *a, const char *group,
                            const prune_member *victim,
                            const prune_member *heir, int64_t idle_ms,
                            emq_prune_result *result, emq_error *err) {
    char min_idle[24], limit[24];
    snprintf(min_idle, sizeof min_idle, "%lld", (long long)idle_ms);
    snprintf(limit, sizeof limit, "%d", EMQ_PRUNE_MOVE_PER_CALL);
    const char *w[2];
    emq_status hst = emq__admin_script_head(a, EMQ_SCRIPT_PRUNE, w, err);
    if (hst != EMQ_OK)
        return hst;
    const char *argv[] = {w[0],
                          w[1],
                          "1",
                          a->keys.stream,
                          group,
                          victim->name,
                          heir ? heir->name : "",
                          min_idle,
                          limit};
    /* The names are reply views, not NUL-terminated: their lengths. */
    size_t lens[9];
    for (size_t i = 0; i < 9; i++)
        lens[i] = i == 5   ? victim->name_len
                  : i == 6 ? (heir ? heir->name_len : 0)
                           : strlen(argv[i]);
    for (;;) {
        emq_reply *r = NULL;
        emq_status st =
            emq__admin_call(a, "prune script", 9, argv, lens, &r, err);
        if (st != EMQ_OK)
            return st;
        long long code = -1, moved = 0, dropped = 0;
        if (emq_reply_kind(r) == EMQ_REPLY_ARRAY && emq_reply_len(r) == 3) {
            code = emq_reply_integer(emq_reply_at(r, 0));
            moved = emq_reply_integer(emq_reply_at(r, 1));
            dropped = emq_reply_integer(emq_reply_at(r, 2));
        }
        emq_reply_free(r);
        if (code < 0 || code > 4)
            return emq__error_set(err, EMQ_EPROTO, 0,
                                  "prune script: unexpected reply");
        if (code == 1 && moved + dropped <= 0) /* never loop without progress */
            return emq__error_set(err, EMQ_EPROTO, 0,
                                  "prune script: entries left to move but "
                                  "none moved");
        if (moved > 0)
            result->moved += (uint64_t)moved;
        switch (code) {
        case 0:
            result->removed++;
            return EMQ_OK;
        case 1:
            continue; /* more entries to hand over */
        case 2:
            result->kept++;
            return EMQ_OK;
        default:
            return EMQ_OK; /* gone, or active again */
        }
    }
}

emq_status emq__admin_queue_prune(emq_admin_t *a, const char *group,
                                  int64_t idle_ms, emq_prune_result *result,
                                  emq_error *err) {
    emq_prune_result local = {0, 0, 0, {0, 0, 0, 0}};
    if (result)
        *result = local;
    emq_status st = emq__admin_check_group(group, err);
    if (st != EMQ_OK)
        return st;
    if (idle_ms < 0)
        return emq__error_set(err, EMQ_EINVAL, 0,
                              "prune: idle_ms must be >= 0, not %lld",
                              (long long)idle_ms);
    emq_reply *reply = NULL;
    prune_member *members = NULL;
    size_t n = 0;
    st = list_members(a, group, &reply, &members, &n, err);
    if (st != EMQ_OK)
        return st;
    /* The heir: the most recently active consumer that stays. */
    const prune_member *heir = NULL;
    for (size_t i = 0; i < n; i++)
        if (members[i].idle_ms < idle_ms &&
            (heir == NULL || members[i].idle_ms < heir->idle_ms))
            heir = &members[i];
    for (size_t i = 0; i < n && st == EMQ_OK; i++)
        if (members[i].idle_ms >= idle_ms)
            st = prune_one(a, group, &members[i], heir, idle_ms, &local, err);
    emq__free(members);
    emq_reply_free(reply);
    if (result)
        *result = local;
    return st;
}
