/* SPDX-License-Identifier: BSD-3-Clause */
/* inspect.c: describing a queue and listing its pending entries.
 *
 * emq_admin_describe reads the stream, every group and every consumer in
 * two round trips (EXISTS, XINFO STREAM, XINFO GROUPS and XLEN of the dead
 * letters; then XINFO CONSUMERS and XPENDING <s> <g> - + 1 for each group)
 * and fills an emq_queue_info. XINFO replies are read as maps by field
 * name, from RESP3 maps and RESP2 flat arrays alike, and unknown fields are
 * skipped (the fields differ by server version): 7.2 adds "inactive" to
 * consumers, 6.2 lacks "entries-read" and "lag" in groups and "entries-added"
 * in the stream (then entries_read and entries_added are -1, JSON null). Where
 * the server reports no lag (nil after an XDEL ahead of the group's cursor, or
 * absent), the lag is counted by the client and flagged lag_computed, never
 * shown as 0 (a lag of 0 would say "nothing to do" while entries wait).
 * A lag the server reports is checked against what is stored after the
 * group's cursor (lag_checked): Redis 7.0 and 7.2 keep a stale read
 * counter on a replica that re-synced in full, and after a failover
 * report a lag that never clears on a drained queue.
 *
 * emq_admin_pending pages through XPENDING's extended form, oldest first.
 * Both render as JSON through the one emq__json writer. Nothing here
 * changes the server's state: XINFO and XPENDING never touch idle times.
 */
#include "admin.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- reading replies ----------------------------------------------------- */

static uint64_t count_value(const emq_reply *r) {
    int64_t v = emq__stream_number(r, 0);
    return v > 0 ? (uint64_t)v : 0;
}

/* A new NUL-terminated copy of a string reply; "" for a non-string. NULL
 * only when out of memory. */
static char *dup_text(const emq_reply *r) {
    size_t len = 0;
    const char *text = emq_reply_str(r, &len);
    return emq__strndup(text ? text : "", text ? len : 0);
}

/* ---- describe ------------------------------------------------------------ */

/* Frees what info holds, not info itself. */
static void info_clear(emq_queue_info *info) {
    for (size_t i = 0; i < info->npartitions; i++)
        info_clear(&info->partitions[i]);
    emq__free(info->partitions);
    for (size_t g = 0; g < info->ngroups; g++) {
        emq_group_info *gi = &info->groups[g];
        for (size_t c = 0; c < gi->nconsumers; c++)
            emq__free(gi->consumers[c].name);
        emq__free(gi->consumers);
        emq__free(gi->name);
    }
    emq__free(info->groups);
    emq__free(info->stream);
    emq__free(info->dead);
    emq__free(info->maxmemory_policy);
    emq__free(info->endpoint);
    emq__free(info->role);
    emq__free(info->priorities);
    emq__free(info->delayed);
}

void emq_queue_info_free(emq_queue_info *info) {
    if (info == NULL)
        return;
    info_clear(info);
    emq__free(info);
}

/* Fills the stream part of info from XINFO STREAM. */
static emq_status parse_stream(const emq_reply *xinfo, emq_queue_info *info,
                               emq__admin_extent *ext, emq_error *err) {
    emq_status st = emq__admin_extent_parse(xinfo, ext, err);
    if (st != EMQ_OK)
        return st;
    info->length = ext->length;
    const emq_reply *first = emq__stream_field(xinfo, "first-entry");
    if (emq_reply_kind(first) == EMQ_REPLY_ARRAY && emq_reply_len(first) >= 1)
        (void)emq__admin_id(emq_reply_at(first, 0), &info->first_id, NULL);
    emq__stream_id last;
    emq_id last_text;
    /* 0-0 is what a stream that was never written reports. */
    if (emq__admin_id(emq__stream_field(xinfo, "last-generated-id"), &last_text,
                      &last) == 0 &&
        (last.ms != 0 || last.seq != 0))
        info->last_id = last_text;
    /* Absent before Redis 7.0: unknown (-1), not 0. */
    info->entries_added =
        emq__stream_number(emq__stream_field(xinfo, "entries-added"), -1);
    return EMQ_OK;
}

/* Fills one group from its XINFO GROUPS element. *lag_known gets 0 when
 * the server reported no lag, so the caller counts it. */
static emq_status parse_group(const emq_reply *g, emq_group_info *gi,
                              emq__stream_id *cursor, int *lag_known,
                              emq_error *err) {
    const emq_reply *name = emq__stream_field(g, "name");
    if (emq_reply_str(name, NULL) == NULL ||
        emq__admin_id(emq__stream_field(g, "last-delivered-id"),
                      &gi->last_delivered_id, cursor) != 0)
        return emq__reply_bad_shape(err,
                                    "an XINFO GROUPS element lacks name or "
                                    "last-delivered-id");
    if ((gi->name = dup_text(name)) == NULL)
        return emq__oom(err);
    gi->pending = count_value(emq__stream_field(g, "pending"));
    gi->entries_read =
        emq__stream_number(emq__stream_field(g, "entries-read"), -1);
    const emq_reply *lag = emq__stream_field(g, "lag");
    *lag_known = emq_reply_kind(lag) == EMQ_REPLY_INTEGER &&
                 emq_reply_integer(lag) >= 0;
    gi->lag = *lag_known ? (int64_t)emq_reply_integer(lag) : -1;
    gi->oldest_pending_age_ms = -1;
    return EMQ_OK;
}

/* Fills a group's consumers from XINFO CONSUMERS and its oldest pending
 * entry from XPENDING <s> <g> - + 1. NOGROUP (the group was destroyed
 * after XINFO GROUPS) leaves both empty; other error replies fail. */
static emq_status parse_group_detail(const emq_reply *consumers,
                                     const emq_reply *oldest,
                                     emq_group_info *gi, emq_error *err) {
    for (int i = 0; i < 2; i++) {
        const emq_reply *r = i == 0 ? consumers : oldest;
        if (emq_reply_kind(r) == EMQ_REPLY_ERROR &&
            !emq_reply_is_error(r, "NOGROUP"))
            return emq__reply_error_set(err, r, "describing group failed");
    }
    if (emq_reply_kind(consumers) == EMQ_REPLY_ARRAY &&
        emq_reply_len(consumers) > 0) {
        size_t n = emq_reply_len(consumers);
        gi->consumers = emq__calloc(n, sizeof *gi->consumers);
        if (gi->consumers == NULL)
            return emq__oom(err);
        for (size_t c = 0; c < n; c++) {
            const emq_reply *cr = emq_reply_at(consumers, c);
            emq_consumer_info *ci = &gi->consumers[c];
            const emq_reply *name = emq__stream_field(cr, "name");
            if (emq_reply_str(name, NULL) == NULL)
                return emq__reply_bad_shape(err,
                                            "an XINFO CONSUMERS element has no "
                                            "name");
            if ((ci->name = dup_text(name)) == NULL)
                return emq__oom(err);
            gi->nconsumers++;
            ci->pending = count_value(emq__stream_field(cr, "pending"));
            ci->idle_ms = emq__stream_number(emq__stream_field(cr, "idle"), -1);
            ci->inactive_ms =
                emq__stream_number(emq__stream_field(cr, "inactive"), -1);
        }
    }
    if (emq_reply_kind(oldest) == EMQ_REPLY_ARRAY &&
        emq_reply_len(oldest) > 0) {
        emq__pending_row row;
        if (emq__pending_row_parse(emq_reply_at(oldest, 0), &row) != 0 ||
            emq__admin_id(row.id, &gi->oldest_pending_id, NULL) != 0)
            return emq__reply_bad_shape(err, "XPENDING is not [[id, consumer, "
                                             "idle, count]]");
        gi->oldest_pending_age_ms = row.idle_ms;
    }
    return EMQ_OK;
}

/* The most entries read to check a lag the server reported. */
#define LAG_CHECK_MAX ((uint64_t)10 * EMQ_ADMIN_PAGE)

/* A lag the server left nil: counted. */
static emq_status lag_counted(emq_admin_t *a, const emq__admin_extent *ext,
                              emq__stream_id cursor, emq_group_info *gi,
                              emq_error *err) {
    uint64_t n = 0;
    emq_status st = emq__admin_count_after(a, ext, cursor, &n, err);
    if (st == EMQ_OK) {
        gi->lag = (int64_t)n;
        gi->lag_computed = 1;
    }
    return st;
}

/* A lag the server reported, never shown above the entries stored after
 * the cursor where that number is known without reading the backlog: a
 * cursor at or past the last entry (0 wait), or before the first (all
 * stored entries wait); and counted (reading at most LAG_CHECK_MAX
 * entries, the stored length capping it past that) when it says more
 * wait than are stored. A stale counter inside a backlog it does not
 * exceed is shown as the server says (counting it would read the
 * backlog at every describe). */
static emq_status lag_checked(emq_admin_t *a, const emq__admin_extent *ext,
                              emq__stream_id cursor, emq_group_info *gi,
                              emq_error *err) {
    if (gi->lag <= 0)
        return EMQ_OK;
    int known = !ext->has_entries ||
                emq__stream_id_cmp(cursor, ext->last) >= 0 ||
                emq__stream_id_cmp(cursor, ext->first) < 0;
    if (!known && (uint64_t)gi->lag <= ext->length)
        return EMQ_OK;
    uint64_t n = 0;
    emq_status st =
        emq__admin_count_after_at_most(a, ext, cursor, LAG_CHECK_MAX, &n, err);
    if (st != EMQ_OK)
        return st;
    if (n >= LAG_CHECK_MAX)
        n = ext->length; /* at least the bound: the length caps it */
    if ((uint64_t)gi->lag > n) {
        gi->lag = (int64_t)n;
        gi->lag_computed = 1;
    }
    return EMQ_OK;
}

/* Second round trip: consumers, the oldest pending entry and the limits
 * of each group, in windows so the pipeline stays bounded whatever the
 * number of groups; then the lag of each group the server left nil. */
static emq_status describe_groups(emq_admin_t *a, emq_queue_info *info,
                                  const emq__admin_extent *ext,
                                  const emq__stream_id *cursors,
                                  const int *lag_known, emq_error *err) {
    enum { WINDOW = 64 };
    emq__session_cmd cmds[3 * WINDOW];
    const char *argv[3 * WINDOW][7];
    emq_reply *replies[3 * WINDOW];
    char *limits[WINDOW];
    for (size_t base = 0; base < info->ngroups; base += WINDOW) {
        size_t n = info->ngroups - base < WINDOW ? info->ngroups - base
                                                 : WINDOW;
        emq_status st = EMQ_OK;
        for (size_t i = 0; i < n; i++) {
            const char *group = info->groups[base + i].name;
            const char **c = argv[3 * i], **p = argv[3 * i + 1],
                       **l = argv[3 * i + 2];
            limits[i] = emq__keys_of_group(&a->keys, "limits", group, NULL);
            if (limits[i] == NULL)
                st = EMQ_ENOMEM;
            l[0] = "HMGET";
            l[1] = limits[i];
            l[2] = "rate";
            l[3] = "max_in_flight";
            c[0] = "XINFO";
            c[1] = "CONSUMERS";
            c[2] = a->keys.stream;
            c[3] = group;
            p[0] = "XPENDING";
            p[1] = a->keys.stream;
            p[2] = group;
            p[3] = "-";
            p[4] = "+";
            p[5] = "1";
            cmds[3 * i] = (emq__session_cmd){4, c, NULL};
            cmds[3 * i + 1] = (emq__session_cmd){6, p, NULL};
            cmds[3 * i + 2] = (emq__session_cmd){4, l, NULL};
        }
        memset(replies, 0, sizeof replies);
        st = st == EMQ_OK ? emq__admin_pipeline(a, 3 * n, cmds, replies, err)
                          : emq__oom(err);
        for (size_t i = 0; i < n && st == EMQ_OK; i++) {
            st = parse_group_detail(replies[3 * i], replies[3 * i + 1],
                                    &info->groups[base + i], err);
            int ignored = emq__admin_limits_from(
                replies[3 * i + 2], &info->groups[base + i].limits);
            info->groups[base + i].limits_ignored =
                ignored > 0 ? (uint64_t)ignored : 0;
        }
        for (size_t i = 0; i < 3 * n; i++)
            emq_reply_free(replies[i]);
        for (size_t i = 0; i < n; i++)
            emq__free(limits[i]);
        if (st != EMQ_OK)
            return st;
    }
    /* The oldest entry's time in a handler's hands, where published:
     * the refresh keeps its idle time small while it is in hand. */
    for (size_t g = 0; g < info->ngroups; g++) {
        emq_group_info *gi = &info->groups[g];
        int64_t age = -1;
        if (gi->oldest_pending_id.str[0] == '\0')
            continue;
        emq_status st = emq__admin_in_hand(a, gi->name, &gi->oldest_pending_id,
                                           1, &age, err);
        if (st != EMQ_OK)
            return st;
        if (age > gi->oldest_pending_age_ms)
            gi->oldest_pending_age_ms = age;
    }
    for (size_t g = 0; g < info->ngroups; g++) {
        emq_status st =
            lag_known[g]
                ? lag_checked(a, ext, cursors[g], &info->groups[g], err)
                : lag_counted(a, ext, cursors[g], &info->groups[g], err);
        if (st != EMQ_OK)
            return st;
    }
    return EMQ_OK;
}

/* Parses the first round trip's replies (EXISTS, XINFO STREAM, XINFO
 * GROUPS, XLEN dead) into info, then runs the second. */
static emq_status describe_from(emq_admin_t *a, emq_reply *const *r,
                                emq_queue_info *info, emq_error *err) {
    if (emq_reply_kind(r[3]) == EMQ_REPLY_ERROR)
        return emq__reply_error_set(
            err, r[3], "reading the dead letters '%s' failed", a->keys.dead);
    info->dead_length = count_value(r[3]);
    if (emq_reply_kind(r[0]) == EMQ_REPLY_ERROR) /* an ACL without +exists */
        return emq__reply_error_set(err, r[0],
                                    "checking that stream '%s' exists failed",
                                    a->keys.stream);
    if (emq_reply_kind(r[0]) != EMQ_REPLY_INTEGER)
        return emq__reply_bad_shape(err, "EXISTS is not an integer");
    if (emq_reply_integer(r[0]) == 0)
        return EMQ_OK; /* no stream: exists = 0, nothing else to say */
    for (int i = 1; i <= 2; i++)
        if (emq_reply_kind(r[i]) == EMQ_REPLY_ERROR)
            return emq__reply_error_set(
                err, r[i], "describing stream '%s' failed", a->keys.stream);
    info->exists = 1;
    emq__admin_extent ext;
    emq_status st = parse_stream(r[1], info, &ext, err);
    if (st != EMQ_OK)
        return st;
    if (emq_reply_kind(r[2]) != EMQ_REPLY_ARRAY)
        return emq__reply_bad_shape(err, "XINFO GROUPS is not a list");
    size_t ngroups = emq_reply_len(r[2]);
    if (ngroups == 0)
        return EMQ_OK;
    info->groups = emq__calloc(ngroups, sizeof *info->groups);
    emq__stream_id *cursors = emq__calloc(ngroups, sizeof *cursors);
    int *lag_known = emq__calloc(ngroups, sizeof *lag_known);
    if (info->groups == NULL || cursors == NULL || lag_known == NULL)
        st = emq__oom(err);
    for (size_t g = 0; g < ngroups && st == EMQ_OK; g++) {
        st = parse_group(emq_reply_at(r[2], g), &info->groups[g], &cursors[g],
                         &lag_known[g], err);
        info->ngroups = g + 1; /* so a partly filled group is freed */
    }
    if (st == EMQ_OK)
        st = describe_groups(a, info, &ext, cursors, lag_known, err);
    emq__free(cursors);
    emq__free(lag_known);
    return st;
}

/* ---- describing a topic -------------------------------------------------- */

/* The group named name in info, appended (empty) when absent; NULL when
 * out of memory. */
static emq_group_info *total_group(emq_queue_info *info, const char *name) {
    for (size_t g = 0; g < info->ngroups; g++)
        if (strcmp(info->groups[g].name, name) == 0)
            return &info->groups[g];
    emq_group_info *grown =
        emq__realloc(info->groups, (info->ngroups + 1) * sizeof *grown);
    if (grown == NULL)
        return NULL;
    info->groups = grown;
    emq_group_info *gi = &grown[info->ngroups];
    memset(gi, 0, sizeof *gi);
    if ((gi->name = emq__strdup(name)) == NULL)
        return NULL;
    gi->oldest_pending_age_ms = -1;
    info->ngroups++;
    return gi;
}

/* The smaller of two times where -1 means "not reported". */
static int64_t min_known(int64_t a, int64_t b) {
    if (a < 0)
        return b;
    if (b < 0)
        return a;
    return a < b ? a : b;
}

/* Adds partition group pg into the total group t. */
static emq_status add_group(emq_group_info *t, const emq_group_info *pg,
                            int first) {
    t->pending += pg->pending;
    t->lag = first ? pg->lag
                   : (t->lag < 0 || pg->lag < 0 ? -1 : t->lag + pg->lag);
    t->lag_computed |= pg->lag_computed;
    if (first)
        t->limits = pg->limits;
    t->entries_read = first ? pg->entries_read
                            : (t->entries_read < 0 || pg->entries_read < 0
                                   ? -1
                                   : t->entries_read + pg->entries_read);
    if (pg->oldest_pending_age_ms > t->oldest_pending_age_ms) {
        t->oldest_pending_age_ms = pg->oldest_pending_age_ms;
        t->oldest_pending_id = pg->oldest_pending_id;
    }
    for (size_t c = 0; c < pg->nconsumers; c++) {
        const emq_consumer_info *pc = &pg->consumers[c];
        emq_consumer_info *tc = NULL;
        for (size_t k = 0; k < t->nconsumers && !tc; k++)
            if (strcmp(t->consumers[k].name, pc->name) == 0)
                tc = &t->consumers[k];
        if (tc == NULL) {
            emq_consumer_info *grown =
                emq__realloc(t->consumers, (t->nconsumers + 1) * sizeof *grown);
            if (grown == NULL)
                return EMQ_ENOMEM;
            t->consumers = grown;
            tc = &grown[t->nconsumers];
            memset(tc, 0, sizeof *tc);
            if ((tc->name = emq__strdup(pc->name)) == NULL)
                return EMQ_ENOMEM;
            tc->idle_ms = -1;
            tc->inactive_ms = -1;
            t->nconsumers++;
        }
        tc->pending += pc->pending;
        tc->idle_ms = min_known(tc->idle_ms, pc->idle_ms);
        tc->inactive_ms = min_known(tc->inactive_ms, pc->inactive_ms);
    }
    return EMQ_OK;
}

emq_status emq__admin_info_add(emq_queue_info *info, size_t i,
                               emq_queue_info *one, emq_error *err) {
    info->partitions[i] = *one; /* take its contents */
    emq__free(one);
    info->npartitions = i + 1;
    const emq_queue_info *p = &info->partitions[i];
    if (i == 0) {
        info->server = p->server;
        if ((p->maxmemory_policy != NULL &&
             (info->maxmemory_policy = emq__strdup(p->maxmemory_policy)) ==
                 NULL) ||
            (p->endpoint != NULL &&
             (info->endpoint = emq__strdup(p->endpoint)) == NULL) ||
            (p->role != NULL && (info->role = emq__strdup(p->role)) == NULL))
            return emq__oom(err);
    }
    info->exists |= p->exists;
    info->length += p->length;
    info->entries_added = i == 0 ? p->entries_added
                          : info->entries_added < 0 || p->entries_added < 0
                              ? -1
                              : info->entries_added + p->entries_added;
    info->dead_length += p->dead_length;
    if (i == 0 && p->delayed &&
        (info->delayed = emq__calloc(1, sizeof *info->delayed)) != NULL)
        info->delayed->next_due_ms = -1;
    if (i == 0 && p->delayed && info->delayed == NULL)
        return emq__oom(err);
    if (info->delayed && p->delayed) {
        info->delayed->waiting += p->delayed->waiting;
        info->delayed->set_aside += p->delayed->set_aside;
        info->delayed->orphaned += p->delayed->orphaned;
        int64_t due = p->delayed->next_due_ms;
        if (due >= 0 && (info->delayed->next_due_ms < 0 ||
                         due < info->delayed->next_due_ms))
            info->delayed->next_due_ms = due;
    } else if (info->delayed) { /* one partition could not count: none */
        emq__free(info->delayed);
        info->delayed = NULL;
    }
    if (p->priorities && info->priorities == NULL &&
        (info->priorities = emq__calloc(1, sizeof *info->priorities)) == NULL)
        return emq__oom(err);
    if (p->priorities)
        emq__admin_prio_add(info->priorities, p->priorities, i == 0);
    for (size_t g = 0; g < p->ngroups; g++) {
        size_t before = info->ngroups;
        emq_group_info *t = total_group(info, p->groups[g].name);
        if (t == NULL ||
            add_group(t, &p->groups[g], info->ngroups > before) != EMQ_OK)
            return emq__oom(err);
    }
    return EMQ_OK;
}

/* *out = a copy of the string reply r (1 to 64 bytes), else NULL. */
static emq_status short_text(const emq_reply *r, char **out, emq_error *err) {
    size_t len = 0;
    const char *text = emq_reply_str(r, &len);
    if (text == NULL || len == 0 || len > 64)
        return EMQ_OK;
    if ((*out = emq__alloc(len + 1)) == NULL)
        return emq__oom(err);
    memcpy(*out, text, len);
    (*out)[len] = '\0';
    return EMQ_OK;
}

/* The policy of CONFIG GET maxmemory-policy ([name, value] in RESP2, a
 * map in RESP3) and the role of ROLE (its first element); an error reply
 * (no +config, no ROLE) leaves each NULL. */
static emq_status node_from(const emq_reply *policy, const emq_reply *role,
                            emq_queue_info *info, emq_error *err) {
    emq_status st = EMQ_OK;
    if (emq_reply_len(policy) == 2)
        st = short_text(emq_reply_at(policy, 1), &info->maxmemory_policy, err);
    if (st == EMQ_OK && emq_reply_kind(role) == EMQ_REPLY_ARRAY &&
        emq_reply_len(role) > 0)
        st = short_text(emq_reply_at(role, 0), &info->role, err);
    return st;
}

const char *emq_eviction_warning(const char *policy) {
    if (policy == NULL || strcmp(policy, "noeviction") == 0)
        return NULL;
    if (strncmp(policy, "volatile-", 9) == 0)
        return "the server's maxmemory-policy evicts keys with a TTL first, "
               "and the consumers' lease keys are this queue's only such "
               "keys: an evicted lease lets a second process take a "
               "consumer's name; set maxmemory-policy noeviction";
    return "the server's maxmemory-policy may evict any key, this queue's "
           "streams and lease keys included, and work would be lost; set "
           "maxmemory-policy noeviction";
}

emq_status emq__admin_queue_describe(emq_admin_t *a, emq_queue_info **out,
                                     emq_error *err) {
    if (out)
        *out = NULL;
    if (a == NULL || out == NULL)
        return emq__error_set(err, EMQ_EINVAL, 0,
                              "admin handle and out must not be NULL");
    emq_queue_info *info = emq__calloc(1, sizeof *info);
    if (info == NULL)
        return emq__oom(err);
    emq_status st = EMQ_OK;
    info->stream = emq__strdup(a->keys.stream);
    info->dead = emq__strdup(a->keys.dead);
    if (info->stream == NULL || info->dead == NULL)
        st = emq__oom(err);
    /* EXISTS tells a missing stream from other failures without matching
     * the text of XINFO's "no such key". */
    const char *exists[] = {"EXISTS", a->keys.stream};
    const char *stream[] = {"XINFO", "STREAM", a->keys.stream};
    const char *groups[] = {"XINFO", "GROUPS", a->keys.stream};
    const char *dead[] = {"XLEN", a->keys.dead};
    const char *policy[] = {"CONFIG", "GET", "maxmemory-policy"};
    const char *role[] = {"ROLE"};
    const char *prio[2], *counts[EMQ_PRIO_COUNTS_WORDS];
    emq__delayed_words dw;
    emq__delayed_keys dk;
    if (st == EMQ_OK)
        st = emq__delayed_keys_make(&a->keys, &dk, err);
    else
        memset(&dk, 0, sizeof dk);
    emq__admin_prio_words(&dk, prio, counts);
    /* The delayed counts go last (EMQ_DELAYED_COUNT_CMDS of them). */
    enum { DELAYED_AT = 8, NCMDS = DELAYED_AT + EMQ_DELAYED_COUNT_CMDS };
    emq__session_cmd cmds[NCMDS] = {
        {2, exists, NULL}, {3, stream, NULL},
        {3, groups, NULL}, {2, dead, NULL},
        {3, policy, NULL}, {1, role, NULL},
        {2, prio, NULL},   {EMQ_PRIO_COUNTS_WORDS, counts, NULL}};
    emq__admin_delayed_words(&dk, emq__session_functions(&a->session), &dw,
                             cmds + DELAYED_AT);
    emq_reply *replies[NCMDS] = {NULL};
    if (st == EMQ_OK)
        st = emq__admin_pipeline(a, NCMDS, cmds, replies, err);
    if (st == EMQ_OK)
        st = describe_from(a, replies, info, err);
    if (st == EMQ_OK)
        st = node_from(replies[4], replies[5], info, err);
    emq_delayed_info counted;
    memset(&counted, 0, sizeof counted); /* the reserved room too */
    if (st == EMQ_OK &&
        emq__admin_delayed_from((const emq_reply *const *)replies + DELAYED_AT,
                                &counted) == 0) {
        if ((info->delayed = emq__alloc(sizeof *info->delayed)) == NULL)
            st = emq__oom(err);
        else
            *info->delayed = counted;
    }
    emq_priority_info prios;
    if (st == EMQ_OK &&
        emq__admin_prio_from(replies[6], replies[7], &prios) > 0) {
        if ((info->priorities = emq__alloc(sizeof *info->priorities)) == NULL)
            st = emq__oom(err);
        else
            *info->priorities = prios;
    }
    emq__delayed_keys_free(&dk);
    if (st == EMQ_OK && (info->endpoint = emq__strdup(
                             emq__route_endpoint(a->session.route))) == NULL)
        st = emq__oom(err);
    if (st == EMQ_OK && emq__route_server(a->session.route, &info->server) &&
        !(info->server.capabilities & EMQ_CAP_STREAM_COUNTERS)) {
        /* The capability table says this server keeps no such counters
         * (6.2): unknown, whatever a reply may hold. */
        info->entries_added = -1;
        for (size_t g = 0; g < info->ngroups; g++)
            info->groups[g].entries_read = -1;
    }
    for (int i = 0; i < NCMDS; i++)
        emq_reply_free(replies[i]);
    if (st != EMQ_OK) {
        emq_queue_info_free(info);
        return st;
    }
    emq__error_clear(err);
    *out = info;
    return EMQ_OK;
}

/* ---- JSON ---------------------------------------------------------------- */

/* An ID as a JSON string, or null when empty. */
static void json_id(emq__json *j, const emq_id *id) {
    if (id->str[0] == '\0')
        emq__json_raw(j, "null");
    else
        emq__json_cstr(j, id->str);
}

/* A number, or null when negative (the server did not report it). */
static void json_opt(emq__json *j, int64_t v) {
    if (v < 0)
        emq__json_raw(j, "null");
    else
        emq__json_raw(j, "%lld", (long long)v);
}

/* Opens an object of a list (after a comma unless first) with its name
 * and pending count: {"name":..,"pending":N */
static void json_named(emq__json *j, int comma, const char *name,
                       uint64_t pending) {
    emq__json_raw(j, "%s{\"name\":", comma ? "," : "");
    emq__json_cstr(j, name ? name : "");
    emq__json_raw(j, ",\"pending\":%llu", (unsigned long long)pending);
}

/* A string, or null for NULL. */
static void json_text(emq__json *j, const char *text) {
    if (text != NULL)
        emq__json_cstr(j, text);
    else
        emq__json_raw(j, "null");
}

/* {"name":..,"version":..,"capabilities":[..]}, or null when unknown. */
static void json_server(emq__json *j, const emq_server *server) {
    if (server->name[0] == '\0') {
        emq__json_raw(j, "null");
        return;
    }
    emq__json_raw(j, "{\"name\":");
    emq__json_cstr(j, server->name);
    emq__json_raw(j, ",\"version\":");
    emq__json_cstr(j, server->version);
    emq__json_raw(j, ",\"capabilities\":[");
    const char *name;
    for (size_t i = 0; (name = emq_server_capability(server, i)) != NULL; i++) {
        emq__json_raw(j, i ? "," : "");
        emq__json_cstr(j, name);
    }
    emq__json_raw(j, "]}");
}

/* One queue_info document; a topic's partitions nest inside it. */
static void json_info(emq__json *j, const emq_queue_info *info) {
    emq__json_raw(j, "{\"stream\":");
    emq__json_cstr(j, info->stream ? info->stream : "");
    emq__json_raw(j, ",\"dead\":");
    emq__json_cstr(j, info->dead ? info->dead : "");
    emq__json_raw(j, ",\"exists\":%s,\"length\":%llu,\"first_id\":",
                  info->exists ? "true" : "false",
                  (unsigned long long)info->length);
    json_id(j, &info->first_id);
    emq__json_raw(j, ",\"last_id\":");
    json_id(j, &info->last_id);
    emq__json_raw(j, ",\"entries_added\":");
    json_opt(j, info->entries_added);
    emq__json_raw(j, ",\"server\":");
    json_server(j, &info->server);
    emq__json_raw(j, ",\"endpoint\":");
    json_text(j, info->endpoint);
    emq__json_raw(j, ",\"role\":");
    json_text(j, info->role);
    emq__json_raw(j, ",\"maxmemory_policy\":");
    json_text(j, info->maxmemory_policy);
    const char *warning = emq_eviction_warning(info->maxmemory_policy);
    emq__json_raw(j, ",\"eviction_warning\":");
    json_text(j, warning);
    if (info->delayed)
        emq__json_raw(j,
                      ",\"delayed\":{\"waiting\":%llu,\"next_due_ms\":%lld,"
                      "\"set_aside\":%llu,\"orphaned\":%llu}",
                      (unsigned long long)info->delayed->waiting,
                      (long long)info->delayed->next_due_ms,
                      (unsigned long long)info->delayed->set_aside,
                      (unsigned long long)info->delayed->orphaned);
    else
        emq__json_raw(j, ",\"delayed\":null");
    if (info->priorities) {
        const emq_priority_info *pr = info->priorities;
        emq__json_raw(j,
                      ",\"priorities\":{\"age_ms\":%lld,\"held\":%llu,"
                      "\"held_at\":[",
                      (long long)pr->age_ms, (unsigned long long)pr->held);
        for (int l = 0; l < EMQ_PRIORITY_LEVELS; l++)
            emq__json_raw(j, "%s%llu", l ? "," : "",
                          (unsigned long long)pr->held_at[l]);
        emq__json_raw(j, "]}");
    } else {
        emq__json_raw(j, ",\"priorities\":null");
    }
    emq__json_raw(j, ",\"dead_length\":%llu,\"groups\":[",
                  (unsigned long long)info->dead_length);
    for (size_t g = 0; g < info->ngroups; g++) {
        const emq_group_info *gi = &info->groups[g];
        json_named(j, g > 0, gi->name, gi->pending);
        emq__json_raw(j, ",\"last_delivered_id\":");
        json_id(j, &gi->last_delivered_id);
        emq__json_raw(j, ",\"entries_read\":");
        json_opt(j, gi->entries_read);
        /* The lag is always a count: the server's, or the client's with
         * lag_computed true. A nil lag is never printed as 0. */
        emq__json_raw(j, ",\"lag\":");
        json_opt(j, gi->lag);
        emq__json_raw(j, ",\"lag_computed\":%s,\"oldest_pending_id\":",
                      gi->lag_computed ? "true" : "false");
        json_id(j, &gi->oldest_pending_id);
        emq__json_raw(j, ",\"oldest_pending_age_ms\":");
        json_opt(j, gi->oldest_pending_age_ms);
        /* 0: no limit; null: could not be read. */
        emq__json_raw(j, ",\"rate_limit\":");
        json_opt(j, gi->limits.rate);
        emq__json_raw(j, ",\"max_in_flight\":");
        json_opt(j, gi->limits.max_in_flight);
        emq__json_raw(
            j, ",\"limits_ignored\":[%s%s%s]",
            gi->limits_ignored & EMQ_LIMIT_IGNORED_RATE ? "\"rate\"" : "",
            gi->limits_ignored ==
                    (EMQ_LIMIT_IGNORED_RATE | EMQ_LIMIT_IGNORED_MAX_IN_FLIGHT)
                ? ","
                : "",
            gi->limits_ignored & EMQ_LIMIT_IGNORED_MAX_IN_FLIGHT
                ? "\"max_in_flight\""
                : "");
        emq__json_raw(j, ",\"consumers\":[");
        for (size_t c = 0; c < gi->nconsumers; c++) {
            const emq_consumer_info *ci = &gi->consumers[c];
            json_named(j, c > 0, ci->name, ci->pending);
            emq__json_raw(j, ",\"idle_ms\":");
            json_opt(j, ci->idle_ms);
            emq__json_raw(j, ",\"inactive_ms\":");
            json_opt(j, ci->inactive_ms);
            emq__json_raw(j, "}");
        }
        emq__json_raw(j, "]}");
    }
    emq__json_raw(j, "]");
    if (info->npartitions > 0) {
        emq__json_raw(j, ",\"partitions\":[");
        for (size_t i = 0; i < info->npartitions; i++) {
            if (i)
                emq__json_raw(j, ",");
            json_info(j, &info->partitions[i]);
        }
        emq__json_raw(j, "]");
    }
    emq__json_raw(j, "}");
}

size_t emq_queue_info_json(const emq_queue_info *info, char *buf, size_t size) {
    emq__json j;
    emq__json_init(&j, buf, size);
    if (info == NULL)
        emq__json_raw(&j, "null");
    else
        json_info(&j, info);
    return j.len;
}

/* ---- time in hand -------------------------------------------------------- */

emq_status emq__admin_in_hand(emq_admin_t *a, const char *group,
                              const emq_id *ids, size_t n, int64_t *ages,
                              emq_error *err) {
    for (size_t i = 0; i < n; i++)
        ages[i] = -1;
    if (n == 0)
        return EMQ_OK;
    char *key = emq__keys_of_group(&a->keys, "inhand", group, NULL);
    const char **hmget = emq__alloc((n + 2) * sizeof *hmget);
    emq_status st = EMQ_OK;
    if (key == NULL || hmget == NULL) {
        st = emq__oom(err);
        goto done;
    }
    hmget[0] = "HMGET";
    hmget[1] = key;
    for (size_t i = 0; i < n; i++)
        hmget[2 + i] = ids[i].str;
    const char *time_argv[] = {"TIME"};
    const emq__session_cmd cmds[] = {{1, time_argv, NULL},
                                     {(int)(n + 2), hmget, NULL}};
    emq_reply *r[2] = {NULL, NULL};
    if ((st = emq__admin_pipeline(a, 2, cmds, r, err)) != EMQ_OK)
        goto done;
    size_t len = 0;
    const char *sec = emq_reply_str(emq_reply_at(r[0], 0), &len);
    const char *usec = emq_reply_str(emq_reply_at(r[0], 1), NULL);
    if (sec != NULL && usec != NULL &&
        emq_reply_kind(r[1]) == EMQ_REPLY_ARRAY && emq_reply_len(r[1]) == n) {
        int64_t now = strtoll(sec, NULL, 10) * 1000 +
                      strtoll(usec, NULL, 10) / 1000;
        for (size_t i = 0; i < n; i++) {
            const emq_reply *at = emq_reply_at(r[1], i);
            if (emq_reply_str(at, NULL) != NULL) {
                int64_t since = now - emq__stream_number(at, now);
                ages[i] = since > 0 ? since : 0;
            }
        }
    }
    emq_reply_free(r[0]);
    emq_reply_free(r[1]);
done:
    emq__free(hmget);
    emq__free(key);
    return st;
}

/* ---- pending ------------------------------------------------------------- */

/* Sets the in_hand_ms of the n rows of one page (emq__admin_in_hand). */
static emq_status page_in_hand(emq_admin_t *a, const char *group,
                               emq_pending_entry *rows, size_t n,
                               emq_error *err) {
    if (n == 0)
        return EMQ_OK;
    emq_id *ids = emq__alloc(n * sizeof *ids);
    int64_t *ages = emq__alloc(n * sizeof *ages);
    emq_status st = EMQ_OK;
    if (ids == NULL || ages == NULL) {
        st = emq__oom(err);
    } else {
        for (size_t i = 0; i < n; i++)
            ids[i] = rows[i].id;
        st = emq__admin_in_hand(a, group, ids, n, ages, err);
        for (size_t i = 0; i < n && st == EMQ_OK; i++)
            rows[i].in_hand_ms = ages[i];
    }
    emq__free(ids);
    emq__free(ages);
    return st;
}

/* Appends the rows of one XPENDING page to *out (growing it); *last gets
 * the ID of the last row. Returns the number of rows through *got. */
static emq_status take_page(const emq_reply *reply, emq_pending_entry **out,
                            size_t *n, size_t *cap, emq__stream_id *last,
                            size_t *got, emq_error *err) {
    size_t rows = emq_reply_len(reply);
    *got = 0;
    if (emq_reply_kind(reply) != EMQ_REPLY_ARRAY)
        return emq__reply_bad_shape(err, "XPENDING is not a list");
    if (*n + rows > *cap) {
        size_t want = *cap ? *cap : 64;
        while (want < *n + rows)
            want *= 2;
        emq_pending_entry *grown = emq__realloc(*out, want * sizeof *grown);
        if (grown == NULL)
            return emq__oom(err);
        *out = grown;
        *cap = want;
    }
    for (size_t i = 0; i < rows; i++) {
        emq_pending_entry *e = &(*out)[*n];
        memset(e, 0, sizeof *e); /* the reserved room too */
        emq__pending_row row;
        if (emq__pending_row_parse(emq_reply_at(reply, i), &row) != 0 ||
            emq__admin_id(row.id, &e->id, last) != 0)
            return emq__reply_bad_shape(err, "XPENDING is not [[id, consumer, "
                                             "idle, count]]");
        /* Names longer than the field (consumers validate them to
         * EMQ_NAME_MAX bytes) are cut. */
        size_t len = row.consumer_len;
        if (len >= sizeof e->consumer)
            len = sizeof e->consumer - 1;
        memcpy(e->consumer, row.consumer, len);
        e->consumer[len] = '\0';
        e->idle_ms = row.idle_ms < 0 ? 0 : row.idle_ms;
        e->deliveries = row.deliveries;
        e->partition = -1;
        e->in_hand_ms = -1;
        (*n)++;
    }
    *got = rows;
    return EMQ_OK;
}

emq_status emq__admin_queue_pending(emq_admin_t *a, const char *group,
                                    const char *consumer, int64_t min_idle_ms,
                                    size_t max, emq_pending_entry **out,
                                    size_t *n, emq_error *err) {
    if (out)
        *out = NULL;
    if (n)
        *n = 0;
    if (a == NULL || out == NULL || n == NULL)
        return emq__error_set(err, EMQ_EINVAL, 0,
                              "admin handle, out and n must not be NULL");
    emq_status st = emq__admin_check_group(group, err);
    if (st != EMQ_OK)
        return st;
    if (consumer != NULL && *consumer == '\0')
        return emq__error_set(err, EMQ_EINVAL, 0,
                              "consumer is empty: give a name, or NULL for "
                              "every consumer");
    if (min_idle_ms < 0)
        return emq__error_set(err, EMQ_EINVAL, 0,
                              "min_idle_ms is %lld; it must be 0 or more",
                              (long long)min_idle_ms);
    char what[300], idle[24];
    snprintf(what, sizeof what, "listing pending entries of group '%s'", group);
    snprintf(idle, sizeof idle, "%lld", (long long)min_idle_ms);
    emq_pending_entry *list = NULL;
    size_t have = 0, cap = 0;
    emq__stream_id last = {0, 0};
    while (have < max) {
        /* XPENDING <s> <g> [IDLE ms] <start> + <count> [consumer]; the
         * start is exclusive after the first page (Redis 6.2+). */
        char start[EMQ_ID_MAX + 2] = "-", count[24];
        if (have > 0)
            snprintf(start, sizeof start, "(%llu-%llu",
                     (unsigned long long)last.ms, (unsigned long long)last.seq);
        size_t want = max - have < EMQ_ADMIN_PAGE ? max - have : EMQ_ADMIN_PAGE;
        snprintf(count, sizeof count, "%zu", want);
        const char *argv[9];
        int argc = 0;
        argv[argc++] = "XPENDING";
        argv[argc++] = a->keys.stream;
        argv[argc++] = group;
        if (min_idle_ms > 0) { /* IDLE needs 6.2; leave it out when 0 */
            argv[argc++] = "IDLE";
            argv[argc++] = idle;
        }
        argv[argc++] = start;
        argv[argc++] = "+";
        argv[argc++] = count;
        if (consumer != NULL)
            argv[argc++] = consumer;
        emq_reply *reply;
        st = emq__admin_call(a, what, argc, argv, NULL, &reply, err);
        if (st != EMQ_OK)
            break;
        size_t got = 0, first = have;
        st = take_page(reply, &list, &have, &cap, &last, &got, err);
        emq_reply_free(reply);
        if (st == EMQ_OK && got > 0)
            st = page_in_hand(a, group, list + first, got, err);
        if (st != EMQ_OK || got < want)
            break;
    }
    if (st != EMQ_OK) {
        emq__free(list);
        return st;
    }
    emq__error_clear(err);
    *out = list;
    *n = have;
    return EMQ_OK;
}

size_t emq_pending_json(const emq_pending_entry *entries, size_t n, char *buf,
                        size_t size) {
    emq__json j;
    emq__json_init(&j, buf, size);
    for (size_t i = 0; i < n; i++) {
        const emq_pending_entry *e = &entries[i];
        emq__json_raw(&j, "{\"id\":");
        emq__json_cstr(&j, e->id.str);
        emq__json_raw(&j, ",\"consumer\":");
        emq__json_cstr(&j, e->consumer);
        emq__json_raw(&j, ",\"idle_ms\":%lld,\"deliveries\":%llu",
                      (long long)e->idle_ms, (unsigned long long)e->deliveries);
        emq__json_raw(&j, ",\"in_hand_ms\":");
        json_opt(&j, e->in_hand_ms);
        if (e->partition >= 0)
            emq__json_raw(&j, ",\"partition\":%d", e->partition);
        emq__json_raw(&j, "}\n");
    }
    return j.len;
}
