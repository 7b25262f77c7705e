/* consumer.h: internals shared by the files of the consumer layer.
 *
 * Internal header (not installed). The consumer runs the contract of
 * DESIGN.md on one connection and one thread: door, declared start, lease,
 * recover self, recover peers, read, acknowledge, dead letters, stop.
 * Commands that need no answer before the next read (XACK, lease renewal,
 * failure reasons, dead-letter moves) are queued as "deferred" and travel
 * in the same round trip as that read.
 */
#ifndef EMQ_CONSUMER_H
#define EMQ_CONSUMER_H

#include "../keys/keys.h"
#include "../conn/conf.h"

#include <stdatomic.h>

/* Most XAUTOCLAIM calls one claim beat makes. A beat goes on only while
 * its calls claim something, so with nothing idle it costs one call. */
#define EMQ_CLAIM_CALLS_PER_BEAT 10

/* Kinds of deferred commands, in the order they were appended. */
typedef enum deferred_kind {
    DEFERRED_ACK,    /* XACK of acks_in_flight ids */
    DEFERRED_RENEW,  /* lease renewal script */
    DEFERRED_REASON, /* HSET of a failure reason */
    DEFERRED_DEAD    /* dead-letter script */
} deferred_kind;

/* One entry of a batch, as parsed from a reply. */
typedef struct batch_item {
    emq_id id;
    const emq_reply *fields; /* array of name, value...; NULL if deleted */
    uint64_t deliveries;     /* server's count; 0 when not known yet */
} batch_item;

/* Entries of one read or claim. Owns the reply they point into. */
typedef struct batch {
    emq_reply *reply;
    batch_item *items;
    size_t n, cap;
} batch;

typedef struct stats_counters {
    atomic_uint_fast64_t delivered, acked, retried, failed, dead_lettered,
        claimed, deleted_pending, reconnects, group_recreated, reads,
        round_trips;
} stats_counters;

struct emq_consumer {
    emq_conf_t *conf;       /* own copy */
    emq_handler_fn handler;
    void *opaque;
    emq_keys keys;
    const char *group;      /* borrowed from conf */
    const char *name;       /* consumer name, borrowed from conf */
    char start_id[EMQ_ID_MAX]; /* "$", "0" or the declared ID */
    char *lease_key;
    char *reasons_key;
    char token[128];        /* lease value: host:pid:random */
    emq_route *route;
    atomic_int stop;        /* set by emq_consumer_stop (signal-safe) */
    atomic_int running;
    stats_counters stats;

    emq_id *acks;           /* ids handled and not yet acknowledged */
    size_t nacks, acks_cap;
    size_t acks_in_flight;  /* first ids of acks sent in an unread XACK */
    deferred_kind *deferred; /* appended commands whose replies are unread */
    size_t ndeferred, deferred_cap;

    emq_field *fields;      /* scratch for the handler's field array */
    size_t fields_cap;
    char claim_cursor[EMQ_ID_MAX];
    int64_t next_claim_ms;
    int64_t next_renew_ms;
    int64_t last_recreate_ms;
    int64_t last_claim_warning_ms;
    uint64_t backoff_rng;   /* jitter of the reconnect backoff */

    /* A topic (conf partitions > 1): one consumer per partition, each
     * with its own route, thread and lease, all under this one's name.
     * This one then only runs, stops and sums them; route is NULL. */
    emq_consumer_t **parts;
    size_t nparts;
};

/* ---- consumer.c ------------------------------------------------------- */

/* Logs through the conf's log callback (or stderr by default). */
void emq_consumer_log(emq_consumer_t *c, int level, const char *fmt, ...)
    EMQ_PRINTF(3, 4);
/* Sleeps ms milliseconds, or less when a stop is requested meanwhile. */
void emq_consumer_nap(emq_consumer_t *c, int64_t ms);
/* Appends a command that the next flush reads the reply of. */
emq_status emq_consumer_defer(emq_consumer_t *c, deferred_kind kind, int argc,
                              const char *const *argv, const size_t *argvlen,
                              emq_error *err);
/* Appends the pending XACK (if any) as a deferred command. */
emq_status emq_consumer_append_acks(emq_consumer_t *c, emq_error *err);
/* Reads the replies of every deferred command, in order, and applies them
 * (ack counts, lease loss, dead-letter counts). Transport failures are
 * returned; error replies are logged, and a lost lease is fatal. */
emq_status emq_consumer_drain_deferred(emq_consumer_t *c, emq_error *err);
/* Sends a command after everything deferred, reading all replies; *reply
 * is the command's own (caller frees). Counts one round trip. An error
 * reply meaning "not now" (LOADING, BUSY, TRYAGAIN, CLUSTERDOWN,
 * MASTERDOWN: the command did not run) is waited out with backoff and the
 * command sent again, for up to five minutes or until a stop. */
emq_status emq_consumer_call(emq_consumer_t *c, int argc,
                             const char *const *argv, const size_t *argvlen,
                             emq_reply **reply, emq_error *err);

/* ---- pool.c ----------------------------------------------------------- */

/* Runs n consumers on n threads and waits for all of them. The first
 * fatal error of any stops the others and is returned (EMQ_OK when all
 * stopped cleanly). */
emq_status emq_consumers_run(emq_consumer_t *const *consumers, size_t n,
                             emq_error *err);

/* ---- entries.c -------------------------------------------------------- */

void emq_batch_init(batch *b);
/* Frees the reply and clears the items (keeps their storage). */
void emq_batch_clear(batch *b);
void emq_batch_free(batch *b);
/* Takes reply (ownership) and parses the entries array entries (which
 * lies inside reply) into b. EMQ_EPROTO on an unexpected shape. */
emq_status emq_batch_parse(batch *b, emq_reply *reply,
                           const emq_reply *entries, emq_error *err);
/* The entries array of an XREADGROUP reply for our stream (RESP2 array or
 * RESP3 map), or NULL when the reply holds none (null or empty). */
const emq_reply *emq_xread_entries(const emq_reply *reply, emq_error *err,
                                   emq_status *st);
/* Sets deliveries of items from an XPENDING extended reply, matching IDs
 * (both in ID order); adds `bump` (1 after a history read, which counts a
 * delivery the XPENDING before it did not see). Items not found keep 0. */
void emq_batch_set_counts(batch *b, const emq_reply *xpending,
                          uint64_t bump);
/* Runs the handler (or the dead-letter path) over each item until a stop
 * is requested. Returns a transport status only. */
emq_status emq_batch_dispatch(emq_consumer_t *c, batch *b, emq_error *err);

/* ---- recover.c -------------------------------------------------------- */

/* Drains this consumer's own pending entries with history reads, paging
 * from 0, until none remain (or stop). */
emq_status emq_recover_self(emq_consumer_t *c, emq_error *err);
/* One claim beat: XAUTOCLAIM following the saved cursor, at most
 * EMQ_CLAIM_CALLS_PER_BEAT calls, handling what it claims. */
emq_status emq_recover_peers(emq_consumer_t *c, emq_error *err);

/* ---- deadletter.c ----------------------------------------------------- */

/* Defers the atomic move of item to the dead letters with reason (may be
 * "" to use the recorded failure reason). */
emq_status emq_deadletter_defer(emq_consumer_t *c, const batch_item *item,
                                const char *reason, emq_error *err);
/* Defers recording reason as the last failure of item; a NULL reason
 * deletes the record (the entry succeeded after all). */
emq_status emq_reason_defer(emq_consumer_t *c, const batch_item *item,
                            const char *reason, emq_error *err);

/* ---- lease.c ---------------------------------------------------------- */

/* Takes the lease on the consumer name, or fails with EMQ_EINVAL saying who
 * holds it. A lease left by a dead process of this host is taken over. */
emq_status emq_lease_acquire(emq_consumer_t *c, emq_error *err);
/* Defers a renewal when one is due. */
emq_status emq_lease_renew_if_due(emq_consumer_t *c, emq_error *err);
/* Deletes the lease if it is still ours (on stop). */
void emq_lease_release(emq_consumer_t *c);

#endif /* EMQ_CONSUMER_H */
