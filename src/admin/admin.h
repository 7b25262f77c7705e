/* SPDX-License-Identifier: BSD-3-Clause */
/* admin.h: internals shared by the files of the admin layer.
 *
 * Internal header (not installed); the API is in echomq.h. The admin layer
 * inspects and operates a queue: describe, pending, group create/setid/
 * destroy, safe consumer pruning, ack-aware retention, dead letters. Each
 * verb is explicit and named; none runs inside a consumer. Verbs that must
 * be atomic against producers and consumers are Lua scripts over keys of
 * the queue's one hashtag.
 */
#ifndef EMQ_ADMIN_H
#define EMQ_ADMIN_H

#include "../conn/conf.h"
#include "../session/session.h"

/* How long one admin call waits out a server that says "not now"
 * (LOADING, BUSY, ...): an operator's command should not hang for the
 * minutes a consumer waits; past it the reply is the call's error. */
#define EMQ_ADMIN_NOT_NOW_MS 30000

struct emq_admin {
    emq_conf_t *conf; /* own copy */
    emq__keys keys;
    /* A queue's (or partition's) connection; unused for a topic. It
     * reconnects at the next call after a failure (reconnect.max_attempts
     * attempts with backoff), and before a call when the server closed it
     * while idle. */
    emq__session session;
    int has_session;
    /* A topic (conf partitions > 1): one admin handle per partition. */
    emq_admin_t **parts;
    size_t nparts;
};

/* ---- verbs.c: the verbs of a topic --------------------------------------
 * A verb given a topic handle (nparts > 0) runs its per-partition step on
 * every partition through emq__admin_each, in partition order. */

/* One partition's part of a verb: part is partition i's handle, ctx the
 * verb's arguments and sums. */
typedef emq_status (*emq__admin_step)(emq_admin_t *part, int i, void *ctx,
                                      emq_error *err);

/* Runs step on each partition of topic a in order. The first failure ends
 * the walk and is returned prefixed with its partition and stream (the
 * partitions before it have done their part); an EMQ_EINVAL (arguments
 * refused before anything was sent) is returned as it is. */
emq_status emq__admin_each(emq_admin_t *a, emq__admin_step step, void *ctx,
                           emq_error *err);

/* EMQ_EINVAL for what, a call naming entry IDs, on topic a: IDs are a
 * partition's, so the caller must name the partition. */
emq_status emq__admin_per_id(const emq_admin_t *a, const char *what,
                             emq_error *err);

/* An entry of a gathered list: its ID, partition and where it is. */
typedef struct emq__admin_order {
    emq__stream_id id;
    int partition;
    size_t at; /* the verb's index of the entry */
} emq__admin_order;

/* admin.c: sorts order by ID, then partition: a topic's lists, oldest
 * first. */
void emq__admin_by_id(emq__admin_order *order, size_t n);

/* ---- the verbs of one queue --------------------------------------------
 * Each public verb is verbs.c's: a queue's handle goes to its queue form
 * here (same contract as in echomq.h), a topic's runs that form on every
 * partition. */

/* admin.c: the handle of conf without a topic's partitions (a queue's is
 * connected; a topic's gets its partitions from verbs.c). */
emq_status emq__admin_open(const emq_conf_t *conf, emq_admin_t **out,
                           emq_error *err);
emq_status emq__admin_queue_describe(emq_admin_t *a, emq_queue_info **out,
                                     emq_error *err);
emq_status emq__admin_queue_pending(emq_admin_t *a, const char *group,
                                    const char *consumer, int64_t min_idle_ms,
                                    size_t max, emq_pending_entry **out,
                                    size_t *n, emq_error *err);
/* The checks of a setid's group and target, before anything is sent. */
emq_status emq__admin_setid_check(const char *group, const char *to,
                                  emq_error *err);
emq_status emq__admin_queue_setid(emq_admin_t *a, const char *group,
                                  const char *to, uint64_t *redeliver,
                                  emq_error *err);
emq_status emq__admin_queue_setid_effect(emq_admin_t *a, const char *group,
                                         const char *to, uint64_t *skipped,
                                         uint64_t *replayed, emq_error *err);
/* The element of an XINFO GROUPS reply whose name is group; NULL when
 * none is (or the reply is no list). */
const emq_reply *emq__admin_group_in(const emq_reply *groups,
                                     const char *group);
emq_status emq__admin_queue_group_create(emq_admin_t *a, const char *group,
                                         const char *start, int *created,
                                         emq_error *err);
emq_status emq__admin_queue_group_destroy(emq_admin_t *a, const char *group,
                                          int *destroyed, emq_error *err);
emq_status emq__admin_queue_prune(emq_admin_t *a, const char *group,
                                  int64_t idle_ms, emq_prune_result *result,
                                  emq_error *err);
emq_status emq__admin_queue_trim(emq_admin_t *a, int64_t maxlen,
                                 int64_t max_age_ms, emq_trim_result *result,
                                 emq_error *err);
/* emq_admin_dead_list_after of a queue. */
emq_status emq__admin_queue_dead_list(emq_admin_t *a, const char *after,
                                      size_t max, emq_dead_letter **out,
                                      size_t *n, emq_error *err);
emq_status emq__admin_queue_requeue(emq_admin_t *a, const char *const *ids,
                                    size_t nids, int force, uint64_t *requeued,
                                    emq_error *err);
emq_status emq__admin_queue_purge(emq_admin_t *a, uint64_t *removed,
                                  emq_error *err);
/* delayed.c: the commands that count a queue's delayed entries, in this
 * order: ZCARD of the waiting ones, the first by due time, HLEN of the
 * payloads set aside, and the orphans script (FCALL when functions is 1,
 * else EVAL: payloads no handle names). Words borrowed from dk. */
#define EMQ_DELAYED_COUNT_CMDS 4
typedef struct emq__delayed_words {
    const char *zcard[2], *first[5], *bad[2], *orphans[6];
} emq__delayed_words;
void emq__admin_delayed_words(const emq__delayed_keys *dk, int functions,
                              emq__delayed_words *w,
                              emq__session_cmd cmds[EMQ_DELAYED_COUNT_CMDS]);
/* delayed.c: reads the replies of those commands (in their order) into
 * *out; -1 (out untouched) when ZCARD's or ZRANGE's is an error reply (an
 * HLEN or the orphans script refused counts none). */
int emq__admin_delayed_from(const emq_reply *const r[EMQ_DELAYED_COUNT_CMDS],
                            emq_delayed_info *out);
/* priorities.c: the words that read a queue's priorities (GET of its
 * record, HMGET of the held counts of the ten levels: never the whole
 * hash, which a priority credential can grow), borrowed from dk. */
#define EMQ_PRIO_COUNTS_WORDS (2 + EMQ_PRIORITY_LEVELS)
void emq__admin_prio_words(const emq__delayed_keys *dk, const char *get[2],
                           const char *counts[EMQ_PRIO_COUNTS_WORDS]);
/* priorities.c: reads their replies into *out: 1 when the queue has
 * priorities, 0 when not (out zeroed), -1 when either is an error reply
 * (an ACL). */
int emq__admin_prio_from(const emq_reply *get, const emq_reply *counts,
                         emq_priority_info *out);
/* priorities.c: emq_admin_priorities of a queue (set_age_ms checked). */
emq_status emq__admin_queue_priorities(emq_admin_t *a, int64_t set_age_ms,
                                       emq_priority_info *out, int *has,
                                       emq_error *err);
/* priorities.c: adds one partition's priorities to sum (the first
 * gives the aging step). */
void emq__admin_prio_add(emq_priority_info *sum, const emq_priority_info *one,
                         int first);
/* group_limits.c: emq_admin_group_limits of a queue. */
emq_status emq__admin_queue_limits(emq_admin_t *a, const char *group,
                                   const emq_group_limits *set,
                                   emq_group_limits *out, emq_error *err);
/* Fills *out from the reply of HMGET <limits key> rate max_in_flight:
 * the EMQ_LIMIT_IGNORED_* bits of the values read as none although not
 * "0" (0 when none); or -1 and {-1, -1} when it is not such a reply (an
 * error: an ACL). */
int emq__admin_limits_from(const emq_reply *hmget, emq_group_limits *out);
/* delayed.c: emq_admin_delayed and emq_admin_cancel of a queue. */
emq_status emq__admin_queue_delayed(emq_admin_t *a, emq_delayed_info *out,
                                    emq_error *err);
emq_status emq__admin_queue_cancel(emq_admin_t *a, const char *const *ids,
                                   size_t nids, emq_cancel_outcome *outcomes,
                                   uint64_t *removed, emq_error *err);

/* ---- shared by a verb and its topic form -------------------------------- */

/* inspect.c: moves one partition's description (one, freed) into
 * info->partitions[i] and adds it to info's totals (see emq_queue_info). */
emq_status emq__admin_info_add(emq_queue_info *info, size_t i,
                               emq_queue_info *one, emq_error *err);
/* deadletters.c: XRANGE of a's dead letters from start, at most count
 * ("": all); the reply is caller-owned. */
emq_status emq__admin_dead_range(emq_admin_t *a, const char *start,
                                 const char *count, emq_reply **r,
                                 emq_error *err);
/* deadletters.c: copies the dead letters of nr XRANGE replies (r[k] of
 * partition part[k]; -1 for a queue) into one caller-owned block, at most
 * max (0: all), oldest first by ID across the replies. */
emq_status emq__admin_letters_build(emq_reply *const *r, const int *part,
                                    size_t nr, size_t max,
                                    emq_dead_letter **out, size_t *n,
                                    emq_error *err);

/* Sends one command on a's session (made ready first; "not now" waited
 * out up to EMQ_ADMIN_NOT_NOW_MS) and returns its reply (caller frees),
 * error replies included. */
emq_status emq__admin_send(emq_admin_t *a, int argc, const char *const *argv,
                           const size_t *argvlen, emq_reply **reply,
                           emq_error *err);
/* emq__admin_send, where an error reply becomes EMQ_ESERVER with "<what>
 * failed: <reply text>" (emq__reply_error_set) and *reply NULL. */
/* Readies a's session (emq__admin_ready) and fills words with the head
 * of script id for its connection (emq__script_head: FCALL or EVAL). */
emq_status emq__admin_script_head(emq_admin_t *a, emq__script_id id,
                                  const char *words[2], emq_error *err);
emq_status emq__admin_call(emq_admin_t *a, const char *what, int argc,
                           const char *const *argv, const size_t *argvlen,
                           emq_reply **reply, emq_error *err);

/* inspect.c: how long ago each of ids[0..n) was handed to a handler, as
 * its consumer published it in the group's inhand hash (by the server's
 * clock): ages[i] in ms, -1 when not published (not in a handler's hands,
 * or for less than the upkeep's publishing period). One round trip (TIME
 * and HMGET); an error reply (an ACL without them) leaves every age -1. */
emq_status emq__admin_in_hand(emq_admin_t *a, const char *group,
                              const emq_id *ids, size_t n, int64_t *ages,
                              emq_error *err);

/* ---- shared reply and counting helpers (inspect.c, replay.c) -------------
 * Defined at the end of admin.c. Other admin verbs may use them too. */

/* Most entries one XRANGE page or one XPENDING page asks for, so a reply
 * stays bounded however long the stream or the pending list is. */
#define EMQ_ADMIN_PAGE 1000

/* Makes a's session ready for a call (emq__session_ready: reconnected
 * when the last call broke it or the server closed it while idle);
 * EMQ_EINVAL for a topic's handle, which has none. What a verb that uses
 * a->session.route itself calls first. */
emq_status emq__admin_ready(emq_admin_t *a, emq_error *err);
/* emq__session_pipeline on a's session, made ready first (a failure
 * leaves it to reconnect at the next call). */
emq_status emq__admin_pipeline(emq_admin_t *a, size_t n,
                               const emq__session_cmd *cmds,
                               emq_reply **replies, emq_error *err);

/* Copies a stream ID reply (a bulk string) into *out and parses it into
 * *sid (either may be NULL). Returns 0, or -1 when r is not an ID. */
int emq__admin_id(const emq_reply *r, emq_id *out, emq__stream_id *sid);

/* What XINFO STREAM says about where the stored entries lie. */
typedef struct emq__admin_extent {
    uint64_t length;      /* entries stored */
    int has_entries;      /* 1: first and last are set */
    emq__stream_id first; /* ID of the first stored entry */
    emq__stream_id last;  /* ID of the last stored entry */
} emq__admin_extent;

/* Fills ext from an XINFO STREAM reply (length, first-entry, last-entry).
 * EMQ_EPROTO when the reply lacks the length. */
emq_status emq__admin_extent_parse(const emq_reply *xinfo,
                                   emq__admin_extent *ext, emq_error *err);

/* Counts exactly the stored entries with an ID greater than after. With
 * ext (may be NULL) an ID before the first entry answers "all of them" and
 * one at or past the last entry "none" without a round trip; otherwise the
 * entries are counted with XRANGE <stream> (<after> + COUNT
 * EMQ_ADMIN_PAGE, page by page. Entries added while counting may or may
 * not be included. */
emq_status emq__admin_count_after(emq_admin_t *a, const emq__admin_extent *ext,
                                  emq__stream_id after, uint64_t *n,
                                  emq_error *err);

/* emq__admin_count_after that stops once it counted most or more (a
 * page at a time): *n < most is exact, *n >= most says "at least". */
emq_status emq__admin_count_after_at_most(emq_admin_t *a,
                                          const emq__admin_extent *ext,
                                          emq__stream_id after, uint64_t most,
                                          uint64_t *n, emq_error *err);

/* A group name given to an admin verb: required (EMQ_EINVAL otherwise,
 * saying so). Checked before anything is sent. */
emq_status emq__admin_check_group(const char *group, emq_error *err);

#endif /* EMQ_ADMIN_H */
