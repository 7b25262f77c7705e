/* SPDX-License-Identifier: BSD-3-Clause */
/* keys: the keyspace of a queue.
 *
 * Internal header (not installed). A queue name maps to keys that share one
 * braced hashtag, so every key of a queue lives in one cluster slot and a
 * script may touch several of them atomically:
 *
 *   queue "jobs"  ->  stream      emq:{jobs}
 *                     dead        emq:{jobs}:dead
 *                     per-queue   emq:{jobs}:<suffix>   (leases, reasons)
 *
 * A raw stream key (an existing stream) keeps its own name; its other keys
 * take its hashtag, or wrap the whole key in braces when it has none, which
 * hashes to the same slot. This layer never talks to the server.
 */
#ifndef EMQ_KEYS_H
#define EMQ_KEYS_H

#include "../base/base.h"
#include "../resp/resp.h"

#define EMQ_KEYS_MAX_QUEUE 200   /* longest queue name, bytes */
#define EMQ_KEYS_MAX_STREAM 1024 /* longest raw stream key, bytes */

typedef struct emq__keys {
    char *stream;  /* the stream key */
    char *dead;    /* the dead-letter stream */
    char *prefix;  /* prefix of every other per-queue key, ends with ':' */
    unsigned slot; /* the cluster slot all of them share */
} emq__keys;

/* Fills out for queue name (validated: 1..200 bytes of letters, digits and
 * . _ - : only). Caller owns out's strings; free with emq__keys_free.
 * EMQ_EINVAL names what is wrong with the name; EMQ_ENOMEM. */
emq_status emq__keys_for_queue(const char *queue, emq__keys *out,
                               emq_error *err);
/* Fills out for a raw stream key. Refused (EMQ_EINVAL, saying why) when
 * the per-queue keys could not share the key's slot: a '{' or '}' that
 * does not form a non-empty hashtag. */
emq_status emq__keys_for_stream(const char *stream, emq__keys *out,
                                emq_error *err);
/* Fills out from a conf's queue and stream properties: exactly one must be
 * set (EMQ_EINVAL otherwise, saying so). */
emq_status emq__keys_resolve(const char *queue, const char *stream,
                             emq__keys *out, emq_error *err);
/* Returns prefix + part1 [+ ":" + part2] as a new string (caller frees with
 * emq__free), e.g. emq__keys_join(k, "lease:g", "c"); NULL when out of
 * memory. */
char *emq__keys_join(const emq__keys *k, const char *part1, const char *part2);
/* A key of a group, or of one consumer of it (consumer not NULL), as
 * docs/KEYSPACE.md lists them: prefix + kind + ":" + group [+ ":" +
 * consumer], kind one of "lease", "reasons", "retry", "unseen", "inhand".
 * Caller frees with emq__free; NULL when out of memory. */
char *emq__keys_of_group(const emq__keys *k, const char *kind,
                         const char *group, const char *consumer);

/* Longest group or consumer name: EMQ_NAME_MAX, echomq.h. */
/* Group and consumer names go into key names (lease:<group>:<name>,
 * reasons:<group>) and CLIENT SETNAME: printable ASCII without spaces,
 * 1..EMQ_NAME_MAX bytes. what names it in the EMQ_EINVAL message ("group",
 * "consumer name"). The one rule for every verb that takes a name. */
emq_status emq__keys_check_name(const char *what, const char *name,
                                emq_error *err);
void emq__keys_free(emq__keys *k);

/* A stream entry ID: milliseconds and sequence number. */
typedef struct emq__stream_id {
    uint64_t ms;
    uint64_t seq;
} emq__stream_id;

/* Parses "ms" or "ms-seq" (each 1..20 digits, within 64 bits, nothing
 * else: no sign, no spaces, not "-", "+", "$" or ">"). Returns 0 and fills
 * *out (may be NULL), or -1 when text is not such an ID. */
int emq__stream_id_parse(const char *text, size_t len, emq__stream_id *out);
/* Maps a declared start to an XGROUP CREATE/SETID ID: "new" -> "$",
 * "head" -> "0", or a valid entry ID as is, into out (EMQ_ID_MAX bytes).
 * There is no default: NULL, "" or a malformed value is EMQ_EINVAL with a
 * sentence listing the choices. */
emq_status emq__stream_start_parse(const char *start, char *out,
                                   emq_error *err);
/* -1, 0 or 1 as a is before, equal to or after b. */
int emq__stream_id_cmp(emq__stream_id a, emq__stream_id b);

/* ---- partition.c: partitioned topics -----------------------------------
 *
 * A topic of P partitions (conf partitions = P > 1) is P queues named
 * "<topic>.<i>", i = 0..P-1, so partition i's keys are emq:{<topic>.<i>}...:
 * each partition has its own hashtag and slot, and Redis Cluster spreads
 * the partitions over its masters. A message key picks a partition by
 * CRC16 (the cluster's own checksum, stable across versions and
 * platforms) modulo P. */

/* Most partitions of one topic (the conf's upper bound). */
#define EMQ_TOPIC_MAX_PARTITIONS 1024

/* 1 when conf names a topic (partitions > 1). */
int emq__topic_is(const emq_conf_t *conf);
/* Checks a topic conf without the network: queue set (a raw stream cannot
 * be partitioned) and "<queue>.<P-1>" a valid queue name. EMQ_EINVAL says
 * what is wrong. */
emq_status emq__topic_check(const emq_conf_t *conf, emq_error *err);
/* A copy of conf for partition i: queue "<queue>.<i>", partitions 1, and
 * topic_partitions P (emq__topic_claim checks it against the server).
 * *out is caller-owned (emq_conf_destroy). */
emq_status emq__topic_partition_conf(const emq_conf_t *conf, int i,
                                     emq_conf_t **out, emq_error *err);
/* What a topic's producer, consumer or admin does to open partition i
 * from its conf part (borrowed for the call): make its own handle. */
typedef emq_status (*emq__topic_open_fn)(int i, const emq_conf_t *part,
                                         void *ctx, emq_error *err);
/* The one way a topic handle builds its partitions: calls open for each
 * partition i in [from, to) of topic conf with that partition's conf
 * (emq__topic_partition_conf). The first failure ends the walk, prefixed
 * by emq__topic_error_prefix. */
emq_status emq__topic_open_parts(const emq_conf_t *conf, int from, int to,
                                 emq__topic_open_fn open, void *ctx,
                                 emq_error *err);
/* Prefixes err with "partition i (emq:{<topic>.<i>})": how every failure
 * of one partition of topic conf is named. */
void emq__topic_error_prefix(emq_error *err, const emq_conf_t *conf, size_t i);
/* The partition of a message key: CRC16(key) mod nparts. */
unsigned emq__topic_key_partition(const char *key, size_t len, unsigned nparts);

/* The key of that record for partition queue "<topic>.<i>" (emq__alloc'd;
 * NULL when out of memory or queue is not a valid name). */
char *emq__topic_record_key(const char *partition_queue);

#endif /* EMQ_KEYS_H */
