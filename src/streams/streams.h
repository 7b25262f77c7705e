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

#include "../keys/keys.h"
#include "../cluster/cluster.h" /* layers below: conn, resp, base */

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

/* A group limit (rate, max_in_flight) as a hash field holds it: 1 to
 * EMQ_LIMIT_DIGITS_MAX decimal digits. Anything else a hand (or a lower
 * role) wrote there ("0.5", "-1", " 5", a huge number) is none, for the
 * scripts (EMQ_LUA_LIMIT_OF) and the C side (emq__limit_value) alike. */
#define EMQ_LIMIT_DIGITS_MAX 9
#define EMQ_LUA_LIMIT_OF                                                       \
    "local function limit_of(v)\n"                                             \
    "  if type(v) ~= 'string' or #v == 0 or #v > 9 or v:find('%D') then\n"     \
    "    return 0\n"                                                           \
    "  end\n"                                                                  \
    "  return tonumber(v)\n"                                                   \
    "end\n"
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

/* Lua for scripts: id_lt(a, b) compares two stream IDs
 * exactly (decimal strings, by length then bytes, so no 64-bit value is
 * rounded through a double); is_id(x) says x is "<ms>-<seq>". */
#define EMQ_LUA_ID_LT                                                          \
    "local function num_lt(a, b)\n"                                            \
    "  if #a ~= #b then return #a < #b end\n"                                  \
    "  return a < b\n"                                                         \
    "end\n"                                                                    \
    "local function split(id)\n"                                               \
    "  local d = string.find(id, '-', 1, true)\n"                              \
    "  if not d then return id, '0' end\n"                                     \
    "  return string.sub(id, 1, d - 1), string.sub(id, d + 1)\n"               \
    "end\n"                                                                    \
    "local function id_lt(a, b)\n"                                             \
    "  local am, as = split(a)\n"                                              \
    "  local bm, bs = split(b)\n"                                              \
    "  if am ~= bm then return num_lt(am, bm) end\n"                           \
    "  return num_lt(as, bs)\n"                                                \
    "end\n"                                                                    \
    "local function is_id(x)\n"                                                \
    "  return type(x) == 'string' and string.match(x, '^%d+%-%d+$') ~= nil\n"  \
    "end\n"

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
/* How a held entry's score orders it (Lua, used by the scripts that hold
 * an entry): strict (age 0) the level alone, so ties (one level) leave
 * in handle order, the order they came; with an aging step the time it
 * was held plus level steps, so an entry that waited one step more is
 * one level more urgent. Handles of one score sort by their digits.
 * The counts are information: one a hand wrote as no integer is
 * restarted (hold) or dropped (unhold), never an error that stops a
 * read. */
#define EMQ_LUA_HELD_SCORE                                                     \
    "local function held_score(prio_key, level)\n"                             \
    "  local age = tonumber(redis.call('GET', prio_key) or '0') or 0\n"        \
    "  if age <= 0 then return level end\n"                                    \
    "  local t = redis.call('TIME')\n"                                         \
    "  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)\n"     \
    "         + level * age\n"                                                 \
    "end\n"                                                                    \
    "local function hold(k, handle, level)\n"                                  \
    "  redis.call('SET', k.prio, '0', 'NX')\n"                                 \
    "  redis.call('ZADD', k.held, held_score(k.prio, level), handle)\n"        \
    "  redis.call('HSET', k.levels, handle, level)\n"                          \
    "  local n = redis.pcall('HINCRBY', k.counts, level, 1)\n"                 \
    "  if type(n) ~= 'number' then\n" /* a count written by hand */            \
    "    redis.pcall('HSET', k.counts, level, 1)\n"                            \
    "  end\n"                                                                  \
    "  redis.call('XADD', k.bell, 'MAXLEN', '1', '*', 'held', handle)\n"       \
    "end\n"                                                                    \
    "local function unhold(k, handle)\n"                                       \
    "  local level = redis.call('HGET', k.levels, handle)\n"                   \
    "  if level then\n"                                                        \
    "    redis.call('HDEL', k.levels, handle)\n"                               \
    "    if redis.call('ZREM', k.held, handle) == 1 then\n"                    \
    "      local n = redis.pcall('HINCRBY', k.counts, level, -1)\n"            \
    "      if type(n) ~= 'number' or n <= 0 then\n"                            \
    "        redis.call('HDEL', k.counts, level)\n"                            \
    "      end\n"                                                              \
    "    end\n"                                                                \
    "  end\n"                                                                  \
    "end\n"

/* The pairs of an entry packed with MessagePack (the delayed and held
 * payloads), or nil when packed is not one: not MessagePack, or not an
 * even list of 1-8000 strings (what XADD takes through unpack). A lower
 * role can write those hashes: a script reads them through this. */
#define EMQ_LUA_ENTRY_OF                                                       \
    "local function entry_of(packed)\n"                                        \
    "  local ok, v = pcall(cmsgpack.unpack, packed)\n"                         \
    "  if not ok or type(v) ~= 'table' or #v == 0 or #v % 2 == 1 or\n"         \
    "     #v > 8000 then return nil end\n"                                     \
    "  for i = 1, #v do\n"                                                     \
    "    if type(v[i]) ~= 'string' then return nil end\n"                      \
    "  end\n"                                                                  \
    "  return v\n"                                                             \
    "end\n"

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

/* A delayed entry's handle: this prefix, then twelve or more digits. */
#define EMQ_DELAYED_PREFIX "delayed-"
/* 1 when text (len bytes) has the shape of a delayed entry's handle. */
int emq__delayed_handle_is(const char *text, size_t len);

/* Fills argv with the move of up to max (a decimal) due entries to
 * stream, each by XADD with an automatic ID, in due order, and returns
 * its word count; with prio (the queue has priorities) one produced with
 * a priority is held instead, and the held keys are named (without, a
 * mover needs no rights on them). Borrowed from the arguments. */
#define EMQ_DELAYED_MOVE_ARGC 13
int emq__delayed_move_argv(const char *argv[EMQ_DELAYED_MOVE_ARGC],
                           const emq__delayed_keys *dk, const char *stream,
                           const char *max, int prio);
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
 * stream: moved, cancelled, trimmed or never there). */
int emq__delayed_cancel_head(const char *head[EMQ_DELAYED_CANCEL_HEAD],
                             const emq__delayed_keys *dk, const char *stream);
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
    int64_t dedup_ttl_ms; /* its window, with dedup_key */
    int level;            /* priority 0..9: held until a consumer reads it,
                             most urgent first; -1: none */
} emq__add_plan;

/* Most words before the pairs: EVAL, the script, 10 keys and their
 * count, 6 numbers, then the XADD options. */
#define EMQ_ADD_HEAD_MAX(nxopts) (19 + (nxopts))

/* Scratch for the numbers of one add script's words. */
typedef struct emq__add_texts {
    char when[24], ttl[24], nx[24], level[24], nkeys[8];
} emq__add_texts;

/* Fills argv and lens (room for EMQ_ADD_HEAD_MAX(nxopts) words) with the
 * add script's words before the entry's pairs and returns their count;
 * they borrow from the arguments and texts. xopts (nxopts words, lengths
 * xoptlens) are what an XADD says after its key (NOMKSTREAM, MAXLEN ~ N,
 * ...): used when the entry is added now. The caller appends the pairs
 * (at most EMQ_ADD_MAX_PAIRS). In one atomic step the script: with a
 * dedup key that holds an ID, answers that ID and adds nothing; with
 * nomkstream and no stream, answers nil (as XADD NOMKSTREAM); else adds
 * the entry (XADD with xopts, or a delayed entry's schedule in dk) and,
 * with a dedup key, stores its ID there for dedup_ttl_ms. The reply is the
 * ID, or a delayed entry's handle (a bulk string). */
size_t emq__add_head(const char **argv, size_t *lens, emq__add_texts *texts,
                     const emq__delayed_keys *dk, const char *stream,
                     const emq__add_plan *plan, int nomkstream,
                     const char *const *xopts, const size_t *xoptlens,
                     size_t nxopts);

#endif /* EMQ_STREAMS_H */
