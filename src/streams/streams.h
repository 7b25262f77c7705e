/* SPDX-License-Identifier: BSD-3-Clause */
/* streams.h: the stream commands producer, consumer and admin share.
 *
 * Internal header (not installed). What every layer above says the same
 * way about Redis Streams: the group door (XGROUP CREATE ... MKSTREAM,
 * where BUSYGROUP means "already there"), the fields of XINFO replies by
 * name, XPENDING rows, reply shapes that are not what a command answers,
 * and entries as JSON. No state, no policy, no network: the callers send
 * the commands over their own connections.
 */
#ifndef EMQ_STREAMS_H
#define EMQ_STREAMS_H

#include "../cluster/cluster.h"
#include "../scripts/scripts.h" /* layers below: keys, conn, resp, base */

/* EMQ_EPROTO "unexpected reply shape from the server: <what>". */
emq_status emq__reply_bad_shape(emq_error *err, const char *what);

/* The value of field name in an XINFO-style reply: a RESP3 map or a RESP2
 * flat array of name, value pairs (matched by name, unknown fields
 * skipped: each server version adds or lacks some). NULL when absent or
 * when r is neither. Borrowed. */
const emq_reply *emq__stream_field(const emq_reply *r, const char *name);

/* An integer field: INTEGER, or a decimal bulk string (XPENDING and some
 * XINFO fields send counts as strings); dflt when absent, nil, negative
 * or not a number. */
int64_t emq__stream_number(const emq_reply *r, int64_t dflt);

/* The limit reply r (HMGET's or HGET's) names: its value, or 0 (none)
 * for nil and for anything EMQ_LUA_LIMIT_OF reads as none. */
int64_t emq__limit_value(const emq_reply *r);
/* 1 when r holds text that emq__limit_value reads as none although it
 * is not "0" (a value to tell about). */
int emq__limit_ignored(const emq_reply *r);

/* ---- the group door ------------------------------------------------------ */

/* Writes the words of XGROUP CREATE <stream> <group> <start_id> MKSTREAM
 * into argv (6 words, borrowed from the arguments). */
void emq__group_create_argv(const char *argv[6], const char *stream,
                            const char *group, const char *start_id);
/* Reads XGROUP CREATE's reply: +OK is *created 1, BUSYGROUP *created 0
 * (the group was there; its cursor is kept), any other error reply is
 * EMQ_ESERVER "creating group '<group>' on '<stream>' failed: <reply>". */
emq_status emq__group_create_reply(const emq_reply *r, const char *stream,
                                   const char *group, int *created,
                                   emq_error *err);

/* ---- XPENDING rows ------------------------------------------------------- */

/* One row of the extended XPENDING form: [id, consumer, idle, count]. */
typedef struct emq__pending_row {
    const emq_reply *id;  /* the entry ID (a bulk string), borrowed */
    const char *consumer; /* borrowed, consumer_len bytes */
    size_t consumer_len;
    int64_t idle_ms;     /* -1 when not a number */
    uint64_t deliveries; /* 0 when not a number */
} emq__pending_row;

/* Reads row into *out: 0, or -1 when it is not [id, consumer, idle,
 * count] (the caller says which command with emq__reply_bad_shape). */
int emq__pending_row_parse(const emq_reply *row, emq__pending_row *out);

/* ---- topicrecord.c: the partition count in the server -------------------- */

/* The partition count stored in the server. Each partition records its
 * topic's count in "emq:{<topic>.<i>}:topic" (a hash, field partitions),
 * in its own hashtag, so the record lives on the partition's node.
 *
 * For a partition conf (emq__cfg_topic_partitions(conf) P > 1, from
 * emq__topic_partition_conf): records P when nothing is recorded yet, and
 * refuses with EMQ_EINVAL, naming both counts and the key, when another
 * count is; any other conf: EMQ_OK without a command. One round trip on
 * route (HSETNX, HGET); a transport failure is returned as it is. */
emq_status emq__topic_claim(emq__route *route, const emq_conf_t *conf,
                            emq_error *err);
/* The count recorded for the topic named queue, read from its partition 0
 * on route (a route to the slot of "emq:{<queue>.0}"); *partitions is 0
 * when none is recorded. */
emq_status emq__topic_recorded(emq__route *route, const char *queue,
                               int64_t *partitions, emq_error *err);

/* ---- schedule.c: entries handed out later (docs/QUEUES.md) --------------- */

/* The keys of a queue's entries that wait beside its stream: delayed
 * ones, and ones held by priority (docs/KEYSPACE.md). */
typedef struct emq__delayed_keys {
    char *waiting; /* sorted set: handle -> due time (unix ms, the
                      server's clock) */
    char *entries; /* hash: handle -> the entry's pairs (MessagePack) */
    char *seq;     /* the counter handles are made from */
    char *held;    /* sorted set: handle -> its place in the priority
                      order (EMQ_PRIO_SCORE_DOC) */
    char *levels;  /* hash: handle -> priority level, for every held entry
                      and every delayed one produced with a priority */
    char *counts;  /* hash: level -> entries held at that level */
    char *bell;    /* stream of one entry, added to whenever an entry is
                      held: what a waiting consumer blocks on */
    char *prio;    /* string: present on a queue with priorities; its
                      value the aging step in ms (0: strict order) */
    char *bad;     /* hash: handle -> a payload that is not an entry,
                      set aside by the move (info counts them) */
} emq__delayed_keys;

/* The level of an entry of a queue with priorities produced without one
 * (levels: 0, the most urgent, to EMQ_PRIORITY_LEVELS - 1). */
#define EMQ_PRIO_DEFAULT 5

/* Fills out for queue keys k; free with emq__delayed_keys_free. ENOMEM. */
emq_status emq__delayed_keys_make(const emq__keys *k, emq__delayed_keys *out,
                                  emq_error *err);
void emq__delayed_keys_free(emq__delayed_keys *dk);

/* The due time a sorted set's score reply says (a RESP3 double, or the
 * RESP2 text), in unix ms: 1 with *ms set, 0 when r is no score. A
 * score a hand wrote is clamped, never cast as it is: below 0 (or -inf)
 * is 0, due now; above EMQ_DUE_MS_MAX (or +inf) is EMQ_DUE_MS_MAX. */
#define EMQ_DUE_MS_MAX ((int64_t)1 << 52)
int emq__due_ms(const emq_reply *r, int64_t *ms);

/* 1 when text (len bytes) has the shape of a delayed entry's handle. */
int emq__delayed_handle_is(const char *text, size_t len);

/* Fills argv with the move of up to max (a decimal) due entries to
 * stream, each by XADD with an automatic ID, in due order, and returns
 * its word count; with prio (the queue has priorities) one produced with
 * a priority is held instead, and the held keys are named (without, a
 * mover needs no rights on them). By FCALL when functions is 1
 * (emq__session_functions), else EVAL. Borrowed from the arguments. */
#define EMQ_DELAYED_MOVE_ARGC 13
int emq__delayed_move_argv(const char *argv[EMQ_DELAYED_MOVE_ARGC],
                           const emq__delayed_keys *dk, const char *stream,
                           const char *max, int prio, int functions);
/* What a move did. */
typedef struct emq__delayed_moved {
    uint64_t moved;     /* entries now in the stream */
    uint64_t waiting;   /* entries still waiting */
    int64_t next_in_ms; /* until the next is due, by the server's clock;
                           0 when one is due now, -1 when none waits */
    uint64_t set_aside; /* due entries whose payload was not an entry (not
                           MessagePack of an even list of 1-8000 strings,
                           or refused by XADD): moved to the bad key */
    uint64_t vanished;  /* due handles whose payload was gone (deleted by
                           hand or by a credential that may write the
                           schedule): nothing to move, dropped */
} emq__delayed_moved;
/* Reads the move's reply into *out. An error reply is EMQ_ESERVER (its
 * status) with its text; another shape EMQ_EPROTO. */
emq_status emq__delayed_move_reply(const emq_reply *r, emq__delayed_moved *out,
                                   emq_error *err);

/* Words of a cancel before its IDs. */
#define EMQ_DELAYED_CANCEL_HEAD 12
/* Fills head with the cancel's first words and returns their count; the
 * caller appends the handles and stream IDs (each checked: a handle by
 * emq__delayed_handle_is, an ID by emq__stream_id_parse). The reply is
 * an array of one word per ID: "removed" (a waiting handle, or an entry
 * no group has been handed: deleted), "delivered" (some group's cursor
 * is at or past it: left alone) or "missing" (neither waiting nor in the
 * stream: moved, cancelled, trimmed or never there). functions as in
 * emq__delayed_move_argv. */
int emq__delayed_cancel_head(const char *head[EMQ_DELAYED_CANCEL_HEAD],
                             const emq__delayed_keys *dk, const char *stream,
                             int functions);
/* ---- addscript.c: an entry added by script: delayed, de-duplicated ----- */

/* Most field/value pairs of an entry added by script: it hands them to
 * XADD through Lua's unpack, which takes about 8,000 values at most. */
#define EMQ_ADD_MAX_PAIRS 3000
/* Latest due time, longest delay and longest de-duplication window
 * accepted, ms (2^53: exact in the server's Lua numbers and scores). */
#define EMQ_DELAYED_MAX_MS ((int64_t)1 << 53)
/* Longest idempotency key, bytes. */
#define EMQ_DEDUP_KEY_MAX 512

/* What the add script does with one entry, beyond adding it. */
typedef struct emq__add_plan {
    int64_t delay_ms;      /* > 0: delayed by this much (the server's clock) */
    int64_t due_ms;        /* > 0: delayed until this unix time (ms) */
    const char *dedup_key; /* the idempotency key's full key name (NULL:
                              none), dedup_key_len bytes */
    size_t dedup_key_len;
    int64_t dedup_ttl_ms;    /* its window, with dedup_key */
    int level;               /* priority 0..9: held until a consumer reads it,
                                most urgent first; -1: none */
    const emq_field *fields; /* the entry's pairs (at most
                                EMQ_ADD_MAX_PAIRS) */
    size_t nfields;
} emq__add_plan;

/* Most entries one add call carries (one FCALL or EVAL for all). */
#define EMQ_ADD_BATCH_MAX 100
/* Most words of pairs one add call carries beyond its first entry's: a
 * bound on the command's size and the script's tables. */
#define EMQ_ADD_BATCH_WORDS 20000

/* Scratch for the numbers of one add call's words: head once, row per
 * entry. */
typedef struct emq__add_head_texts {
    char nkeys[8], nx[24];
} emq__add_head_texts;
typedef struct emq__add_texts {
    char when[24], ttl[24], level[16], key[24], words[24];
} emq__add_texts;

/* How many words the add call of plans[0..n) takes at most, with nxopts
 * XADD options. */
size_t emq__add_words_max(const emq__add_plan *plans, size_t n, size_t nxopts);

/* Fills argv and lens (room for emq__add_words_max words) with one add
 * call for plans[0..n) (1 <= n <= EMQ_ADD_BATCH_MAX) and returns its word
 * count; the words borrow from the arguments, head and texts (n rows).
 * By FCALL when functions is 1 (emq__session_functions), else EVAL. The
 * held keys are named when plans[0] has a level: a caller puts entries
 * with and without one in separate calls, so that a user without rights
 * on the held keys may still delay and de-duplicate. xopts (nxopts words,
 * lengths xoptlens) are what an XADD says after its key (NOMKSTREAM,
 * MAXLEN ~ N, ...): used for an entry added now. For each entry, in one
 * atomic step (src/scripts/schedule.c): with a dedup key that holds an ID,
 * that ID is its answer and nothing is added; with nomkstream and no
 * stream, nil (as XADD NOMKSTREAM); else the entry is added (XADD with
 * xopts, or a delayed or held entry in dk) and, with a dedup key, its ID
 * stored there for dedup_ttl_ms. The reply is an array of one element per
 * entry: the ID or a delayed entry's handle (a bulk string), nil, or the
 * error that refused that entry alone. */
size_t emq__add_call(const char **argv, size_t *lens, emq__add_head_texts *head,
                     emq__add_texts *texts, const emq__delayed_keys *dk,
                     const char *stream, const emq__add_plan *plans, size_t n,
                     int nomkstream, const char *const *xopts,
                     const size_t *xoptlens, size_t nxopts, int functions);

#endif /* EMQ_STREAMS_H */
