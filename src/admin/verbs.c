/* SPDX-License-Identifier: BSD-3-Clause */
/* verbs.c: emq_admin_new and every public emq_admin_* verb; a topic's
 * verbs done once.
 *
 * A topic's admin handle holds one ordinary handle per partition (queue
 * "<topic>.<i>"); the verb files know only one queue and hand a topic
 * handle to the emq_admin_topic_* function here. Each runs the verb's
 * per-partition step through emq__admin_each (partition order; the first
 * failure stops the walk and names its partition) and adds up the
 * results; the verbs that list entries (pending, dead letters) gather
 * every partition's list and order it by ID with emq__admin_by_id.
 */
#include "admin.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

emq_admin_t *emq_admin_partition(emq_admin_t *a, int i) {
    if (a == NULL || i < 0 || (size_t)i >= a->nparts)
        return NULL;
    return a->parts[i];
}

int emq_admin_partition_count(const emq_admin_t *a) {
    return a == NULL ? 0 : (int)a->nparts;
}

emq_status emq_admin_command(emq_admin_t *a, int argc, const char *const *argv,
                             const size_t *argvlen, emq_reply **reply,
                             emq_error *err) {
    *reply = NULL;
    if (a == NULL)
        return emq__error_set(err, EMQ_EINVAL, 0, "admin is NULL");
    return emq__admin_send(a, argc, argv, argvlen, reply, err);
}

emq_status emq__admin_each(emq_admin_t *a, emq__admin_step step, void *ctx,
                           emq_error *err) {
    for (size_t i = 0; i < a->nparts; i++) {
        emq_status st = step(a->parts[i], (int)i, ctx, err);
        /* EMQ_EINVAL refuses the call's arguments before anything is sent:
         * the same for every partition, so it names none. */
        if (st != EMQ_OK && st != EMQ_EINVAL)
            emq__topic_error_prefix(err, a->conf, i);
        if (st != EMQ_OK)
            return st;
    }
    emq__error_clear(err);
    return EMQ_OK;
}

emq_status emq__admin_per_id(const emq_admin_t *a, const char *what,
                             emq_error *err) {
    return emq__error_set(err, EMQ_EINVAL, 0,
                          "%s names IDs of one partition, and '%s' is a "
                          "topic of %zu partitions (IDs repeat across "
                          "them): address partition i (0..%zu) with "
                          "emq_admin_partition, or the CLI's --partition",
                          what, emq__cfg_queue(a->conf), a->nparts,
                          a->nparts - 1);
}

/* ---- opening and recording ---------------------------------------------- */

emq_status emq_admin_topic_partitions(emq_admin_t *a, int64_t *partitions,
                                      emq_error *err) {
    *partitions = 0;
    if (a == NULL)
        return emq__error_set(err, EMQ_EINVAL, 0, "admin is NULL");
    if (a->nparts > 0) {
        *partitions = (int64_t)a->nparts;
        return EMQ_OK;
    }
    if (emq__cfg_queue(a->conf) == NULL) /* a raw stream is never a topic */
        return EMQ_OK;
    emq_status st = emq__admin_ready(a, err);
    if (st != EMQ_OK)
        return st;
    return emq__topic_recorded(a->session.route, emq__cfg_queue(a->conf),
                               partitions, err);
}

/* Opens partition i's admin handle into a->parts. */
static emq_status open_part(int i, const emq_conf_t *part, void *ctx,
                            emq_error *err) {
    emq_admin_t *a = ctx;
    emq_status st = emq_admin_new(part, &a->parts[i], err);
    if (st == EMQ_OK)
        a->nparts = (size_t)i + 1;
    return st;
}

/* Opens a topic handle's partitions (a->conf partitions P > 1) and checks
 * P against the count the server records. */
static emq_status topic_open(emq_admin_t *a, emq_error *err) {
    const emq_conf_t *conf = a->conf;
    a->parts = emq__calloc((size_t)emq__cfg_partitions(conf), sizeof *a->parts);
    if (a->parts == NULL)
        return emq__oom(err);
    emq_status st = emq__topic_open_parts(
        conf, 0, (int)emq__cfg_partitions(conf), open_part, a, err);
    /* A topic opened with another count than the server records is a
     * mistake to say now, not numbers of the wrong partitions later. */
    int64_t recorded = 0;
    if (st == EMQ_OK)
        st = emq__topic_recorded(a->parts[0]->session.route,
                                 emq__cfg_queue(conf), &recorded, err);
    if (st == EMQ_OK && recorded > 0 && recorded != emq__cfg_partitions(conf))
        st = emq__error_set(err, EMQ_EINVAL, 0,
                            "topic '%.64s' has %lld partitions (recorded in "
                            "the server), not %lld",
                            emq__cfg_queue(conf), (long long)recorded,
                            (long long)emq__cfg_partitions(conf));
    return st;
}

/* Records the topic's count in partition part. */
static emq_status claim_part(emq_admin_t *part, int i, void *ctx,
                             emq_error *err) {
    (void)i;
    (void)ctx;
    emq_status st = emq__admin_ready(part, err);
    if (st != EMQ_OK)
        return st;
    return emq__topic_claim(part->session.route, part->conf, err);
}

emq_status emq_admin_topic_create(emq_admin_t *a, emq_error *err) {
    if (a == NULL || a->nparts == 0)
        return emq__error_set(err, EMQ_EINVAL, 0,
                              "creating a topic needs an admin handle made "
                              "with partitions > 1");
    return emq__admin_each(a, claim_part, NULL, err);
}

/* ---- the verbs ---------------------------------------------------------- */

/* Describes partition i into the topic's info (ctx) and its totals. */
static emq_status describe_part(emq_admin_t *part, int i, void *ctx,
                                emq_error *err) {
    emq_queue_info *one = NULL;
    emq_status st = emq__admin_queue_describe(part, &one, err);
    if (st == EMQ_OK)
        st = emq__admin_info_add(ctx, (size_t)i, one, err);
    return st;
}

static emq_status topic_describe(emq_admin_t *a, emq_queue_info **out,
                                 emq_error *err) {
    emq_queue_info *info = emq__calloc(1, sizeof *info);
    char pattern[EMQ_KEYS_MAX_QUEUE + 16];
    emq_status st = EMQ_OK;
    if (info != NULL) {
        snprintf(pattern, sizeof pattern, "emq:{%s.*}",
                 emq__cfg_queue(a->conf));
        info->stream = emq__strdup(pattern);
        snprintf(pattern, sizeof pattern, "emq:{%s.*}:dead",
                 emq__cfg_queue(a->conf));
        info->dead = emq__strdup(pattern);
        info->partitions = emq__calloc(a->nparts, sizeof *info->partitions);
    }
    if (info == NULL || !info->stream || !info->dead || !info->partitions)
        st = emq__oom(err);
    else
        st = emq__admin_each(a, describe_part, info, err);
    if (st != EMQ_OK) {
        emq_queue_info_free(info);
        return st;
    }
    *out = info;
    return EMQ_OK;
}

/* A topic's setid: the group and the sum of what comes again. */
typedef struct setid_topic {
    const char *group;
    const char *to;
    uint64_t redeliver;
} setid_topic;

/* A partition without the group fails the topic's move before any
 * partition moved: EXISTS and XINFO GROUPS, the group found by name. */
static emq_status setid_check_part(emq_admin_t *part, int i, void *ctx,
                                   emq_error *err) {
    (void)i;
    const setid_topic *t = ctx;
    const char *exists[] = {"EXISTS", part->keys.stream};
    const char *groups[] = {"XINFO", "GROUPS", part->keys.stream};
    const emq__session_cmd cmds[] = {{2, exists, NULL}, {3, groups, NULL}};
    emq_reply *r[2];
    emq_status st = emq__admin_pipeline(part, 2, cmds, r, err);
    if (st != EMQ_OK)
        return st;
    int found = emq__admin_group_in(r[1], t->group) != NULL;
    int stream_missing = emq_reply_kind(r[0]) == EMQ_REPLY_INTEGER &&
                         emq_reply_integer(r[0]) == 0;
    if (!found && (stream_missing || emq_reply_kind(r[1]) == EMQ_REPLY_ARRAY))
        st = emq__error_set(err, EMQ_ESERVER, 0,
                            "group '%s' does not exist on stream '%s'; no "
                            "partition was moved (create it on the topic "
                            "with a declared start first)",
                            t->group, part->keys.stream);
    else if (!found && emq_reply_kind(r[1]) == EMQ_REPLY_ERROR)
        st = emq__reply_error_set(err, r[1], "XINFO GROUPS of '%s' failed",
                                  part->keys.stream);
    else if (!found)
        st = emq__reply_bad_shape(err, "XINFO GROUPS");
    emq_reply_free(r[0]);
    emq_reply_free(r[1]);
    return st;
}

static emq_status setid_part(emq_admin_t *part, int i, void *ctx,
                             emq_error *err) {
    (void)i;
    setid_topic *t = ctx;
    uint64_t one = 0;
    emq_status st = emq__admin_queue_setid(part, t->group, t->to, &one, err);
    t->redeliver += one;
    return st;
}

/* A topic's setid effect: the sums over its partitions. */
typedef struct effect_topic {
    const char *group;
    const char *to;
    uint64_t skipped, replayed;
} effect_topic;

static emq_status effect_part(emq_admin_t *part, int i, void *ctx,
                              emq_error *err) {
    (void)i;
    effect_topic *t = ctx;
    uint64_t skipped = 0, replayed = 0;
    emq_status st = emq__admin_queue_setid_effect(part, t->group, t->to,
                                                  &skipped, &replayed, err);
    t->skipped += skipped;
    t->replayed += replayed;
    return st;
}

/* A topic's group create or destroy: done is 1 when any partition did. */
typedef struct group_topic {
    const char *group;
    const char *start;
    int done;
} group_topic;

static emq_status create_part(emq_admin_t *part, int i, void *ctx,
                              emq_error *err) {
    (void)i;
    group_topic *t = ctx;
    int one = 0;
    emq_status st =
        emq__admin_queue_group_create(part, t->group, t->start, &one, err);
    t->done |= one;
    return st;
}

static emq_status destroy_part(emq_admin_t *part, int i, void *ctx,
                               emq_error *err) {
    (void)i;
    group_topic *t = ctx;
    int one = 0;
    emq_status st = emq__admin_queue_group_destroy(part, t->group, &one, err);
    t->done |= one;
    return st;
}

/* A topic's prune: the arguments and the sums. */
typedef struct prune_topic {
    const char *group;
    int64_t idle_ms;
    emq_prune_result sum;
} prune_topic;

static emq_status prune_part(emq_admin_t *part, int i, void *ctx,
                             emq_error *err) {
    (void)i;
    prune_topic *t = ctx;
    emq_prune_result one;
    emq_status st =
        emq__admin_queue_prune(part, t->group, t->idle_ms, &one, err);
    t->sum.removed += one.removed;
    t->sum.moved += one.moved;
    t->sum.kept += one.kept;
    return st;
}

/* A topic's trim: the bounds and the sums. */
typedef struct trim_topic {
    int64_t maxlen, max_age_ms;
    emq_trim_result sum;
} trim_topic;

static emq_status trim_part(emq_admin_t *part, int i, void *ctx,
                            emq_error *err) {
    (void)i;
    trim_topic *t = ctx;
    emq_trim_result one;
    emq_status st =
        emq__admin_queue_trim(part, t->maxlen, t->max_age_ms, &one, err);
    t->sum.removed += one.removed;
    t->sum.held_back += one.held_back;
    t->sum.no_groups &= one.no_groups;
    return st;
}

/* A topic's pending list: the arguments, and every partition's list
 * gathered. */
typedef struct pending_topic {
    const char *group, *consumer;
    int64_t min_idle_ms;
    size_t max;
    emq_pending_entry *all;
    size_t n;
} pending_topic;

static emq_status pending_part(emq_admin_t *part, int i, void *ctx,
                               emq_error *err) {
    pending_topic *t = ctx;
    emq_pending_entry *e = NULL;
    size_t n = 0;
    emq_status st = emq__admin_queue_pending(
        part, t->group, t->consumer, t->min_idle_ms, t->max, &e, &n, err);
    if (st == EMQ_OK && n > 0) {
        emq_pending_entry *grown =
            emq__realloc(t->all, (t->n + n) * sizeof *grown);
        if (grown == NULL) {
            st = emq__oom(err);
        } else {
            t->all = grown;
            for (size_t k = 0; k < n; k++) {
                e[k].partition = i;
                t->all[t->n++] = e[k];
            }
        }
    }
    emq__free(e);
    return st;
}

/* The topic's pending entries, oldest first by ID, at most t->max. */
static emq_status pending_merge(pending_topic *t, emq_error *err) {
    if (t->n == 0)
        return EMQ_OK;
    emq__admin_order *order = emq__calloc(t->n, sizeof *order);
    emq_pending_entry *sorted = emq__calloc(t->n, sizeof *sorted);
    if (order == NULL || sorted == NULL) {
        emq__free(order);
        emq__free(sorted);
        return emq__oom(err);
    }
    for (size_t k = 0; k < t->n; k++) {
        (void)emq__stream_id_parse(t->all[k].id.str, strlen(t->all[k].id.str),
                                   &order[k].id);
        order[k].partition = t->all[k].partition;
        order[k].at = k;
    }
    emq__admin_by_id(order, t->n);
    for (size_t k = 0; k < t->n; k++)
        sorted[k] = t->all[order[k].at];
    emq__free(order);
    emq__free(t->all);
    t->all = sorted;
    if (t->n > t->max)
        t->n = t->max;
    return EMQ_OK;
}

/* A topic's listing: one XRANGE reply per partition. */
typedef struct dead_topic {
    const char *count;
    emq_reply **replies;
    int *part;
} dead_topic;

static emq_status dead_range_part(emq_admin_t *p, int i, void *ctx,
                                  emq_error *err) {
    dead_topic *t = ctx;
    t->part[i] = i;
    return emq__admin_dead_range(p, "-", t->count, &t->replies[i], err);
}

/* A topic's requeue of everything: each partition's onto its own stream. */
typedef struct requeue_topic {
    int force;
    uint64_t moved;
} requeue_topic;

static emq_status requeue_part(emq_admin_t *part, int i, void *ctx,
                               emq_error *err) {
    (void)i;
    requeue_topic *t = ctx;
    uint64_t one = 0;
    emq_status st =
        emq__admin_queue_requeue(part, NULL, 0, t->force, &one, err);
    t->moved += one;
    return st;
}

/* A topic's purge: ctx is the count removed. */
static emq_status purge_part(emq_admin_t *part, int i, void *ctx,
                             emq_error *err) {
    (void)i;
    uint64_t one = 0;
    emq_status st = emq__admin_queue_purge(part, &one, err);
    *(uint64_t *)ctx += one;
    return st;
}

static emq_status topic_setid(emq_admin_t *a, const char *group, const char *to,
                              uint64_t *redeliver, emq_error *err) {
    setid_topic topic = {group, to, 0};
    emq_status st = emq__admin_setid_check(group, to, err);
    if (st == EMQ_OK)
        st = emq__admin_each(a, setid_check_part, &topic, err);
    if (st == EMQ_OK)
        st = emq__admin_each(a, setid_part, &topic, err);
    if (redeliver)
        *redeliver = topic.redeliver;
    return st;
}

static emq_status topic_group(emq_admin_t *a, const char *group,
                              const char *start, int *done, emq_error *err) {
    group_topic t = {group, start, 0};
    emq_status st =
        emq__admin_each(a, start ? create_part : destroy_part, &t, err);
    if (done)
        *done = t.done;
    return st;
}

static emq_status topic_prune(emq_admin_t *a, const char *group,
                              int64_t idle_ms, emq_prune_result *result,
                              emq_error *err) {
    prune_topic t = {group, idle_ms, {0, 0, 0, {0, 0, 0, 0}}};
    emq_status st = emq__admin_each(a, prune_part, &t, err);
    if (result)
        *result = t.sum;
    return st;
}

static emq_status topic_trim(emq_admin_t *a, int64_t maxlen, int64_t max_age_ms,
                             emq_trim_result *result, emq_error *err) {
    trim_topic t;
    memset(&t, 0, sizeof t);
    t.maxlen = maxlen;
    t.max_age_ms = max_age_ms;
    t.sum.no_groups = 1;
    emq_status st = emq__admin_each(a, trim_part, &t, err);
    if (result)
        *result = t.sum;
    return st;
}

static emq_status topic_pending(emq_admin_t *a, const char *group,
                                const char *consumer, int64_t min_idle_ms,
                                size_t max, emq_pending_entry **out, size_t *n,
                                emq_error *err) {
    pending_topic t = {group, consumer, min_idle_ms, max, NULL, 0};
    emq_status st = emq__admin_each(a, pending_part, &t, err);
    if (st == EMQ_OK)
        st = pending_merge(&t, err);
    if (st != EMQ_OK) {
        emq__free(t.all);
        return st;
    }
    *out = t.all;
    *n = t.n;
    return EMQ_OK;
}

static emq_status topic_dead_list(emq_admin_t *a, size_t max,
                                  emq_dead_letter **out, size_t *n,
                                  emq_error *err) {
    char count[24] = "";
    if (max > 0)
        snprintf(count, sizeof count, "%zu", max);
    dead_topic t = {count, emq__calloc(a->nparts, sizeof *t.replies),
                    emq__calloc(a->nparts, sizeof *t.part)};
    emq_status st = t.replies && t.part
                        ? emq__admin_each(a, dead_range_part, &t, err)
                        : emq__oom(err);
    if (st == EMQ_OK)
        st = emq__admin_letters_build(t.replies, t.part, a->nparts, max, out, n,
                                      err);
    for (size_t i = 0; t.replies && i < a->nparts; i++)
        emq_reply_free(t.replies[i]);
    emq__free(t.replies);
    emq__free(t.part);
    return st;
}

static emq_status topic_requeue_all(emq_admin_t *a, int force,
                                    uint64_t *requeued, emq_error *err) {
    requeue_topic t = {force, 0};
    emq_status st = emq__admin_each(a, requeue_part, &t, err);
    if (requeued)
        *requeued = t.moved;
    return st;
}

static emq_status topic_purge(emq_admin_t *a, uint64_t *removed,
                              emq_error *err) {
    uint64_t sum = 0;
    emq_status st = emq__admin_each(a, purge_part, &sum, err);
    if (removed)
        *removed = sum;
    return st;
}

/* ---- the public verbs: a queue's, or a topic's over its partitions ------- */

emq_status emq_admin_new(const emq_conf_t *conf, emq_admin_t **out,
                         emq_error *err) {
    emq_status st = emq__admin_open(conf, out, err);
    if (st == EMQ_OK && emq__topic_is(conf) &&
        (st = topic_open(*out, err)) != EMQ_OK) {
        emq_admin_destroy(*out);
        *out = NULL;
    }
    if (st == EMQ_OK &&
        (st = emq__conf_warn_unverified(conf, "admin handle", err)) != EMQ_OK) {
        emq_admin_destroy(*out);
        *out = NULL;
    }
    return st;
}

/* 1 when a is a topic's handle. */
static int is_topic(const emq_admin_t *a) { return a != NULL && a->nparts > 0; }

emq_status emq_admin_describe(emq_admin_t *a, emq_queue_info **out,
                              emq_error *err) {
    if (!is_topic(a) || out == NULL)
        return emq__admin_queue_describe(a, out, err);
    *out = NULL;
    return topic_describe(a, out, err);
}

emq_status emq_admin_pending(emq_admin_t *a, const char *group,
                             const char *consumer, int64_t min_idle_ms,
                             size_t max, emq_pending_entry **out, size_t *n,
                             emq_error *err) {
    if (!is_topic(a) || out == NULL || n == NULL)
        return emq__admin_queue_pending(a, group, consumer, min_idle_ms, max,
                                        out, n, err);
    *out = NULL;
    *n = 0;
    return topic_pending(a, group, consumer, min_idle_ms, max, out, n, err);
}

emq_status emq_admin_group_create(emq_admin_t *a, const char *group,
                                  const char *start, int *created,
                                  emq_error *err) {
    if (!is_topic(a))
        return emq__admin_queue_group_create(a, group, start, created, err);
    return topic_group(a, group, start, created, err);
}

emq_status emq_admin_group_destroy(emq_admin_t *a, const char *group,
                                   int *destroyed, emq_error *err) {
    if (!is_topic(a))
        return emq__admin_queue_group_destroy(a, group, destroyed, err);
    return topic_group(a, group, NULL, destroyed, err);
}

emq_status emq_admin_group_setid(emq_admin_t *a, const char *group,
                                 const char *to, uint64_t *redeliver,
                                 emq_error *err) {
    if (!is_topic(a))
        return emq__admin_queue_setid(a, group, to, redeliver, err);
    return topic_setid(a, group, to, redeliver, err);
}

emq_status emq_admin_group_setid_effect(emq_admin_t *a, const char *group,
                                        const char *to, uint64_t *skipped,
                                        uint64_t *replayed, emq_error *err) {
    if (!is_topic(a))
        return emq__admin_queue_setid_effect(a, group, to, skipped, replayed,
                                             err);
    effect_topic t = {group, to, 0, 0};
    setid_topic check = {group, to, 0};
    emq_status st = emq__admin_setid_check(group, to, err);
    if (st == EMQ_OK) /* the same refusal as the move's */
        st = emq__admin_each(a, setid_check_part, &check, err);
    if (st == EMQ_OK)
        st = emq__admin_each(a, effect_part, &t, err);
    if (skipped)
        *skipped = st == EMQ_OK ? t.skipped : 0;
    if (replayed)
        *replayed = st == EMQ_OK ? t.replayed : 0;
    return st;
}

emq_status emq_admin_prune_consumers(emq_admin_t *a, const char *group,
                                     int64_t idle_ms, emq_prune_result *result,
                                     emq_error *err) {
    if (!is_topic(a))
        return emq__admin_queue_prune(a, group, idle_ms, result, err);
    return topic_prune(a, group, idle_ms, result, err);
}

emq_status emq_admin_trim_acked(emq_admin_t *a, int64_t maxlen,
                                int64_t max_age_ms, emq_trim_result *result,
                                emq_error *err) {
    if (!is_topic(a))
        return emq__admin_queue_trim(a, maxlen, max_age_ms, result, err);
    return topic_trim(a, maxlen, max_age_ms, result, err);
}

emq_status emq_admin_dead_list(emq_admin_t *a, size_t max,
                               emq_dead_letter **out, size_t *n,
                               emq_error *err) {
    return emq_admin_dead_list_after(a, NULL, max, out, n, err);
}

emq_status emq_admin_dead_list_after(emq_admin_t *a, const char *after,
                                     size_t max, emq_dead_letter **out,
                                     size_t *n, emq_error *err) {
    if (!is_topic(a))
        return emq__admin_queue_dead_list(a, after, max, out, n, err);
    *out = NULL;
    *n = 0;
    if (after != NULL)
        return emq__admin_per_id(a, "listing dead letters after an ID", err);
    return topic_dead_list(a, max, out, n, err);
}

emq_status emq_admin_dead_requeue(emq_admin_t *a, const char *const *ids,
                                  size_t nids, uint64_t *requeued,
                                  emq_error *err) {
    return emq_admin_dead_requeue_flags(a, ids, nids, 0, requeued, err);
}

emq_status emq_admin_dead_requeue_flags(emq_admin_t *a, const char *const *ids,
                                        size_t nids, unsigned flags,
                                        uint64_t *requeued, emq_error *err) {
    int force = (flags & EMQ_REQUEUE_FORCE) != 0;
    if (!is_topic(a))
        return emq__admin_queue_requeue(a, ids, nids, force, requeued, err);
    if (requeued)
        *requeued = 0;
    if (nids > 0)
        return emq__admin_per_id(a, "requeueing dead letters by ID", err);
    return topic_requeue_all(a, force, requeued, err);
}

emq_status emq_admin_dead_purge(emq_admin_t *a, uint64_t *removed,
                                emq_error *err) {
    if (!is_topic(a))
        return emq__admin_queue_purge(a, removed, err);
    return topic_purge(a, removed, err);
}

/* Adds partition i's delayed entries to the sums in ctx. */
static emq_status delayed_part(emq_admin_t *part, int i, void *ctx,
                               emq_error *err) {
    (void)i;
    emq_delayed_info *sum = ctx, one;
    emq_status st = emq__admin_queue_delayed(part, &one, err);
    if (st != EMQ_OK)
        return st;
    sum->waiting += one.waiting;
    if (one.next_due_ms >= 0 &&
        (sum->next_due_ms < 0 || one.next_due_ms < sum->next_due_ms))
        sum->next_due_ms = one.next_due_ms;
    return EMQ_OK;
}

emq_status emq_admin_delayed(emq_admin_t *a, emq_delayed_info *out,
                             emq_error *err) {
    if (out == NULL)
        return emq__error_set(err, EMQ_EINVAL, 0, "out must not be NULL");
    memset(out, 0, sizeof *out); /* the reserved room too */
    if (!is_topic(a))
        return emq__admin_queue_delayed(a, out, err);
    out->waiting = 0;
    out->next_due_ms = -1;
    return emq__admin_each(a, delayed_part, out, err);
}

/* Sets (ctx->set >= 0) and reads partition i's priorities into the
 * sums. */
typedef struct prio_ctx {
    int64_t set;
    emq_priority_info sum;
    int has;
} prio_ctx;

static emq_status prio_part(emq_admin_t *part, int i, void *ctx,
                            emq_error *err) {
    prio_ctx *p = ctx;
    emq_priority_info one;
    int has = 0;
    emq_status st = emq__admin_queue_priorities(part, p->set, &one, &has, err);
    if (st == EMQ_OK && has) {
        emq__admin_prio_add(&p->sum, &one, !p->has);
        p->has = 1;
    }
    (void)i;
    return st;
}

emq_status emq_admin_priorities(emq_admin_t *a, int64_t set_age_ms,
                                emq_priority_info *out, int *has,
                                emq_error *err) {
    if (a == NULL)
        return emq__error_set(err, EMQ_EINVAL, 0,
                              "priorities need an admin handle");
    if (set_age_ms < -1 || set_age_ms > ((int64_t)1 << 53))
        return emq__error_set(err, EMQ_EINVAL, 0,
                              "an aging step is 0 (strict order) to 2^53 ms, "
                              "or -1 (left as it is), not %lld",
                              (long long)set_age_ms);
    prio_ctx p = {set_age_ms, {0}, 0};
    emq_status st = is_topic(a) ? emq__admin_each(a, prio_part, &p, err)
                                : prio_part(a, 0, &p, err);
    if (st == EMQ_OK && out)
        *out = p.sum;
    if (st == EMQ_OK && has)
        *has = p.has;
    return st;
}

/* Sets partition i's limits; the first partition's are the answer. */
typedef struct limits_ctx {
    const char *group;
    const emq_group_limits *set;
    emq_group_limits *out;
} limits_ctx;

static emq_status limits_part(emq_admin_t *part, int i, void *ctx,
                              emq_error *err) {
    limits_ctx *l = ctx;
    emq_group_limits one;
    emq_status st = emq__admin_queue_limits(part, l->group, l->set, &one, err);
    if (st == EMQ_OK && i == 0 && l->out)
        *l->out = one;
    return st;
}

emq_status emq_admin_group_limits(emq_admin_t *a, const char *group,
                                  const emq_group_limits *set,
                                  emq_group_limits *out, emq_error *err) {
    if (!is_topic(a))
        return emq__admin_queue_limits(a, group, set, out, err);
    limits_ctx l = {group, set, out};
    return emq__admin_each(a, limits_part, &l, err);
}

emq_status emq_admin_cancel(emq_admin_t *a, const char *const *ids, size_t nids,
                            emq_cancel_outcome *outcomes, uint64_t *removed,
                            emq_error *err) {
    if (removed)
        *removed = 0;
    if (!is_topic(a))
        return emq__admin_queue_cancel(a, ids, nids, outcomes, removed, err);
    return emq__admin_per_id(a, "cancelling entries", err);
}
