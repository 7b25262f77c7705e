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
#endif /* EMQ_STREAMS_H */
