/* SPDX-License-Identifier: BSD-3-Clause */
/* replay.c: creating and destroying groups, and moving a group's cursor.
 *
 * emq_admin_group_create is the consumer's door as an explicit verb:
 * XGROUP CREATE ... MKSTREAM with a declared start, where BUSYGROUP means
 * "already there" and is not a failure. emq_admin_group_destroy is the
 * only place a group is ever destroyed. emq_admin_group_setid replays (or
 * skips) work by moving last-delivered-id with XGROUP SETID to the head,
 * the tail, an entry ID or a point in time, refuses a group that does not
 * exist instead of creating it, and reports exactly how many stored
 * entries lie after the new cursor. Every input is checked before the
 * first byte is sent. Nothing here touches a pending list except DESTROY,
 * which drops the group's along with the group.
 */
#include "admin.h"

#include <stdio.h>
#include <string.h>

/* Where emq_admin_group_setid moves a cursor, decided before sending. */
typedef struct setid_target {
    char id[EMQ_ID_MAX + 2]; /* "0", "$" or an entry ID */
    int at_time;             /* 1: id is found from time_ms first */
    uint64_t time_ms;        /* "@<unix-ms>" */
} setid_target;

/* Parses "head", "tail", "@<unix-ms>" or an entry ID into t. EMQ_EINVAL
 * names the value and lists the choices. */
static emq_status parse_target(const char *to, setid_target *t,
                               emq_error *err) {
    memset(t, 0, sizeof *t);
    char shown[64];
    size_t n = to ? strlen(to) : 0;
    if (n == 0)
        return emq__error_set(err, EMQ_EINVAL, 0,
                              "a target is required: head (replay everything "
                              "stored), tail (skip to the end), an entry ID, "
                              "or @<unix-ms> (replay from that time)");
    if (strcmp(to, "head") == 0) {
        strcpy(t->id, "0");
        return EMQ_OK;
    }
    if (strcmp(to, "tail") == 0) {
        strcpy(t->id, "$");
        return EMQ_OK;
    }
    emq__stream_id sid;
    if (to[0] == '@') {
        /* A time is milliseconds only: "@5-1" is not a time. */
        if (n < 2 || memchr(to + 1, '-', n - 1) != NULL ||
            emq__stream_id_parse(to + 1, n - 1, &sid) != 0)
            return emq__error_set(err, EMQ_EINVAL, 0,
                                  "time '%s' is not valid: use @ followed by "
                                  "Unix milliseconds, e.g. @1732924800000",
                                  emq__printable(shown, sizeof shown, to, n));
        t->at_time = 1;
        t->time_ms = sid.ms;
        return EMQ_OK;
    }
    if (n >= EMQ_ID_MAX || emq__stream_id_parse(to, n, &sid) != 0)
        return emq__error_set(err, EMQ_EINVAL, 0,
                              "target '%s' is not valid: use head, tail, an "
                              "entry ID such as 1732924800000-0, or "
                              "@<unix-ms>",
                              emq__printable(shown, sizeof shown, to, n));
    snprintf(t->id, sizeof t->id, "%llu-%llu", (unsigned long long)sid.ms,
             (unsigned long long)sid.seq);
    return EMQ_OK;
}

/* For "@<ms>": the ID of the last entry before that time, or "0" when there
 * is none, so entries at or after the time come after the cursor.
 * XREVRANGE <s> (<ms>-0 - COUNT 1. */
static emq_status resolve_time(emq_admin_t *a, setid_target *t,
                               emq_error *err) {
    strcpy(t->id, "0");
    if (t->time_ms == 0)
        return EMQ_OK; /* nothing lies before 0-0; "(0-0" is refused */
    char end[EMQ_ID_MAX + 2];
    snprintf(end, sizeof end, "(%llu-0", (unsigned long long)t->time_ms);
    const char *argv[] = {"XREVRANGE", a->keys.stream, end, "-", "COUNT", "1"};
    emq_reply *reply;
    emq_status st = emq__admin_call(a, "finding the entry before the time", 6,
                                    argv, NULL, &reply, err);
    if (st != EMQ_OK)
        return st;
    if (emq_reply_kind(reply) != EMQ_REPLY_ARRAY) {
        emq_reply_free(reply);
        return emq__error_set(err, EMQ_EPROTO, 0,
                              "unexpected reply shape from the server: "
                              "XREVRANGE is not a list");
    }
    if (emq_reply_len(reply) > 0) {
        const emq_reply *entry = emq_reply_at(reply, 0);
        emq_id id;
        if (emq_reply_kind(entry) != EMQ_REPLY_ARRAY ||
            emq__admin_id(emq_reply_at(entry, 0), &id, NULL) != 0) {
            emq_reply_free(reply);
            return emq__error_set(err, EMQ_EPROTO, 0,
                                  "unexpected reply shape from the server: "
                                  "XREVRANGE entry has no ID");
        }
        snprintf(t->id, sizeof t->id, "%s", id.str);
    }
    emq_reply_free(reply);
    return EMQ_OK;
}

/* Turns the failed SETID reply into the caller's error: a missing group
 * (NOGROUP) or stream (EXISTS said 0) is named as such. */
static emq_status setid_failed(emq_admin_t *a, const char *group,
                               const emq_reply *exists, const emq_reply *setid,
                               emq_error *err) {
    if (emq_reply_is_error(setid, "NOGROUP") ||
        (emq_reply_kind(exists) == EMQ_REPLY_INTEGER &&
         emq_reply_integer(exists) == 0))
        return emq__reply_error_set(err, setid,
                                    "group '%s' does not exist on stream "
                                    "'%s'; nothing was moved (create it with "
                                    "a declared start first). Server said",
                                    group, a->keys.stream);
    return emq__reply_error_set(err, setid, "moving group '%s' on '%s' failed",
                                group, a->keys.stream);
}

emq_status emq__admin_setid_check(const char *group, const char *to,
                                  emq_error *err) {
    setid_target t;
    emq_status st = emq__admin_check_group(group, err);
    if (st == EMQ_OK)
        st = parse_target(to, &t, err);
    return st;
}

/* The checks of a setid on a queue, then its target, a time resolved to
 * the entry before it (a round trip). */
static emq_status target_of(emq_admin_t *a, const char *group, const char *to,
                            setid_target *t, emq_error *err) {
    if (a == NULL)
        return emq__error_set(err, EMQ_EINVAL, 0, "admin handle is NULL");
    emq_status st = emq__admin_check_group(group, err);
    if (st == EMQ_OK)
        st = parse_target(to, t, err);
    if (st == EMQ_OK && t->at_time)
        st = resolve_time(a, t, err);
    return st;
}

emq_status emq__admin_queue_setid(emq_admin_t *a, const char *group,
                                  const char *to, uint64_t *redeliver,
                                  emq_error *err) {
    if (redeliver)
        *redeliver = 0;
    setid_target t;
    emq_status st = target_of(a, group, to, &t, err);
    if (st != EMQ_OK)
        return st;
    /* One round trip: EXISTS (to name a missing stream without matching
     * error text), SETID, and XINFO STREAM for the counting shortcuts. */
    const char *exists[] = {"EXISTS", a->keys.stream};
    const char *setid[] = {"XGROUP", "SETID", a->keys.stream, group, t.id};
    const char *xinfo[] = {"XINFO", "STREAM", a->keys.stream};
    const emq__session_cmd cmds[] = {
        {2, exists, NULL}, {5, setid, NULL}, {3, xinfo, NULL}};
    emq_reply *r[3];
    if ((st = emq__admin_pipeline(a, 3, cmds, r, err)) != EMQ_OK)
        return st;
    emq__admin_extent ext;
    if (emq_reply_kind(r[1]) == EMQ_REPLY_ERROR)
        st = setid_failed(a, group, r[0], r[1], err);
    else if (emq_reply_kind(r[2]) == EMQ_REPLY_ERROR)
        st = emq__reply_error_set(err, r[2],
                                  "group '%s' moved to %s, but reading the "
                                  "stream to count what follows failed",
                                  group, t.id);
    else
        st = emq__admin_extent_parse(r[2], &ext, err);
    for (int i = 0; i < 3; i++)
        emq_reply_free(r[i]);
    if (st != EMQ_OK)
        return st;
    uint64_t count = 0;
    if (strcmp(t.id, "$") != 0) { /* tail: nothing stored follows it */
        emq__stream_id cursor = {0, 0};
        (void)emq__stream_id_parse(t.id, strlen(t.id), &cursor);
        if ((st = emq__admin_count_after(a, &ext, cursor, &count, err)) !=
            EMQ_OK) {
            emq__error_prefix(err,
                              "group '%s' moved to %s, but counting "
                              "what follows failed",
                              group, t.id);
            return st;
        }
    }
    if (redeliver)
        *redeliver = count;
    emq__error_clear(err);
    return EMQ_OK;
}

const emq_reply *emq__admin_group_in(const emq_reply *groups,
                                     const char *group) {
    size_t want = strlen(group);
    for (size_t k = 0;
         emq_reply_kind(groups) == EMQ_REPLY_ARRAY && k < emq_reply_len(groups);
         k++) {
        const emq_reply *g = emq_reply_at(groups, k);
        size_t len;
        const char *name = emq_reply_str(emq__stream_field(g, "name"), &len);
        if (name != NULL && len == want && memcmp(name, group, len) == 0)
            return g;
    }
    return NULL;
}

/* Reads group's cursor from an XINFO GROUPS reply (r[1], EXISTS in r[0])
 * into *cursor: EMQ_ESERVER naming a group (or stream) that does not
 * exist, the server's error, or a bad shape. */
static emq_status group_cursor(emq_admin_t *a, const char *group,
                               emq_reply *const *r, emq__stream_id *cursor,
                               emq_error *err) {
    if (emq_reply_kind(r[1]) == EMQ_REPLY_ERROR &&
        !(emq_reply_kind(r[0]) == EMQ_REPLY_INTEGER &&
          emq_reply_integer(r[0]) == 0))
        return emq__reply_error_set(err, r[1], "XINFO GROUPS of '%s' failed",
                                    a->keys.stream);
    const emq_reply *g = emq__admin_group_in(r[1], group);
    if (g == NULL)
        return emq__error_set(err, EMQ_ESERVER, 0,
                              "group '%s' does not exist on stream '%s'; "
                              "nothing would move",
                              group, a->keys.stream);
    if (emq__admin_id(emq__stream_field(g, "last-delivered-id"), NULL,
                      cursor) != 0)
        return emq__reply_bad_shape(err, "XINFO GROUPS (last-delivered-id)");
    return EMQ_OK;
}

emq_status emq__admin_queue_setid_effect(emq_admin_t *a, const char *group,
                                         const char *to, uint64_t *skipped,
                                         uint64_t *replayed, emq_error *err) {
    uint64_t skip = 0, replay = 0;
    if (skipped)
        *skipped = 0;
    if (replayed)
        *replayed = 0;
    setid_target t;
    emq_status st = target_of(a, group, to, &t, err);
    if (st != EMQ_OK)
        return st;
    const char *exists[] = {"EXISTS", a->keys.stream};
    const char *groups[] = {"XINFO", "GROUPS", a->keys.stream};
    const char *xinfo[] = {"XINFO", "STREAM", a->keys.stream};
    const emq__session_cmd cmds[] = {
        {2, exists, NULL}, {3, groups, NULL}, {3, xinfo, NULL}};
    emq_reply *r[3];
    if ((st = emq__admin_pipeline(a, 3, cmds, r, err)) != EMQ_OK)
        return st;
    emq__stream_id cursor = {0, 0}, target = {0, 0};
    emq__admin_extent ext;
    st = group_cursor(a, group, r, &cursor, err);
    if (st == EMQ_OK && emq_reply_kind(r[2]) == EMQ_REPLY_ERROR)
        st = emq__reply_error_set(err, r[2], "XINFO STREAM of '%s' failed",
                                  a->keys.stream);
    else if (st == EMQ_OK)
        st = emq__admin_extent_parse(r[2], &ext, err);
    for (int i = 0; i < 3; i++)
        emq_reply_free(r[i]);
    uint64_t after_cursor = 0, after_target = 0;
    if (st == EMQ_OK)
        st = emq__admin_count_after(a, &ext, cursor, &after_cursor, err);
    if (st == EMQ_OK && strcmp(t.id, "$") != 0) { /* tail: none after */
        (void)emq__stream_id_parse(t.id, strlen(t.id), &target);
        st = emq__admin_count_after(a, &ext, target, &after_target, err);
    }
    if (st != EMQ_OK)
        return st;
    if (after_target < after_cursor)
        skip = after_cursor - after_target; /* (cursor, target] */
    else
        replay = after_target - after_cursor; /* (target, cursor] */
    if (skipped)
        *skipped = skip;
    if (replayed)
        *replayed = replay;
    emq__error_clear(err);
    return EMQ_OK;
}

emq_status emq__admin_queue_group_create(emq_admin_t *a, const char *group,
                                         const char *start, int *created,
                                         emq_error *err) {
    if (created)
        *created = 0;
    if (a == NULL)
        return emq__error_set(err, EMQ_EINVAL, 0, "admin handle is NULL");
    char id[EMQ_ID_MAX];
    /* A new group gets a name consumers can use (the rule they check);
     * the other verbs take any existing group, however it was named. */
    emq_status st = emq__admin_check_group(group, err);
    if (st == EMQ_OK)
        st = emq__keys_check_name("group", group, err);
    if (st == EMQ_OK)
        st = emq__stream_start_parse(start, id, err);
    if (st != EMQ_OK)
        return st;
    const char *argv[6];
    emq__group_create_argv(argv, a->keys.stream, group, id);
    emq_reply *reply;
    if ((st = emq__admin_send(a, 6, argv, NULL, &reply, err)) != EMQ_OK)
        return st;
    st = emq__group_create_reply(reply, a->keys.stream, group, created, err);
    emq_reply_free(reply);
    if (st == EMQ_OK)
        emq__error_clear(err);
    return st;
}

emq_status emq__admin_queue_group_destroy(emq_admin_t *a, const char *group,
                                          int *destroyed, emq_error *err) {
    if (destroyed)
        *destroyed = 0;
    if (a == NULL)
        return emq__error_set(err, EMQ_EINVAL, 0, "admin handle is NULL");
    emq_status st = emq__admin_check_group(group, err);
    if (st != EMQ_OK)
        return st;
    /* EXISTS first in the same round trip: on a missing stream DESTROY
     * answers an error, which here simply means "no such group". */
    const char *exists[] = {"EXISTS", a->keys.stream};
    const char *destroy[] = {"XGROUP", "DESTROY", a->keys.stream, group};
    const emq__session_cmd cmds[] = {{2, exists, NULL}, {4, destroy, NULL}};
    emq_reply *r[2];
    if ((st = emq__admin_pipeline(a, 2, cmds, r, err)) != EMQ_OK)
        return st;
    if (emq_reply_kind(r[1]) == EMQ_REPLY_INTEGER) {
        if (destroyed)
            *destroyed = emq_reply_integer(r[1]) > 0;
    } else if (!(emq_reply_kind(r[0]) == EMQ_REPLY_INTEGER &&
                 emq_reply_integer(r[0]) == 0)) {
        st = emq__reply_error_set(err, r[1],
                                  "destroying group '%s' on '%s' failed", group,
                                  a->keys.stream);
    }
    emq_reply_free(r[0]);
    emq_reply_free(r[1]);
    if (st == EMQ_OK)
        emq__error_clear(err);
    return st;
}
