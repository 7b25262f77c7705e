/* SPDX-License-Identifier: BSD-3-Clause */
/* consumer.h: internals shared by the files of the consumer layer.
 *
 * Internal header (not installed). The files of this folder, bottom to
 * top (each uses only those above it in this list):
 *
 *   exchange.c  one connection's pipelined exchange: call, append, drain,
 *               the "not now" wait, reconnect with backoff, logging
 *   inflight.c  the in-flight table (every entry read and not settled) and
 *               the queue of settlements decided and not yet sent
 *   lease.c     one name, one process: acquire, renew, release, identity
 *   settle.c    the commands that settle entries (XACK, failure reasons,
 *               dead-letter moves, the retry schedule) and the ownership
 *               refresh
 *   upkeep.c    the maintenance thread on its own connection: refreshes
 *               ownership, renews the lease, sends settlements, on a timer
 *               that does not depend on the handler
 *   ready.c     pull mode: entries read and waiting for emq_consumer_poll,
 *               the in-flight room, the event descriptor
 *   entries.c   entries out of replies, and handing them to the handler
 *               (run mode) or to the ready queue (pull mode)
 *   recover.c   recover self, claim beats, retries that are due
 *   consumer.c  validation, the session and the loop; N loops on N threads
 *   handout.c   the public ways to consume over that one loop: run with a
 *               handler, poll and settle from any thread, the batch
 *               handler, close, pause, the event-loop descriptor
 *   pool.c      N consumers of N names on N threads
 *
 * Threads: the loop's thread (run's caller, or in pull mode a thread of
 * the consumer's own) owns the read exchange; the upkeep thread owns its
 * own exchange. They share the in-flight table (its mutex), the lease
 * deadline and the stop/fatal flags (atomics). In pull mode, any thread
 * may poll (the ready queue's mutex) and settle (the table's mutex).
 */
#ifndef EMQ_CONSUMER_H
#define EMQ_CONSUMER_H

#include "../streams/streams.h"
#include "../conn/conf.h"

#include <pthread.h>
#include <stdatomic.h>

/* Most XAUTOCLAIM calls one claim beat makes. A beat goes on only while
 * its calls claim something, so with nothing idle it costs one call. */
#define EMQ_CLAIM_CALLS_PER_BEAT 10
/* Most settlements one round takes, and most IDs one XACK or refresh
 * names: every exchange is bounded whatever the batch size. */
#define EMQ_SETTLE_MAX_IDS 1000
/* Commands a round sends besides one per retry or dead letter: XACK, HDEL,
 * ZREM, the release script, the refresh, the renewal and the read. The
 * floor of pipeline.max (conf.c) leaves room for them. */
#define EMQ_ROUND_FIXED_COMMANDS 7
/* A settlement waits at most this long for company before it is sent. */
#define EMQ_SETTLE_DELAY_MS 10
/* Smallest claim.min_idle_ms: ownership is refreshed every quarter of it. */
#define EMQ_MIN_IDLE_FLOOR_MS 100

/* The live counters: EMQ_CONSUMER_COUNTERS (echomq.h) as atomics; stats.c
 * writes the struct, the sums and the JSON from that one list. */
#define EMQ_COUNTER_FIELD(name) atomic_uint_fast64_t name;
typedef struct stats_counters {
    EMQ_CONSUMER_COUNTERS(EMQ_COUNTER_FIELD)
} stats_counters;
#undef EMQ_COUNTER_FIELD

/* Buckets of the statistics callback's histograms (stats.c): handler
 * latency in powers of two of microseconds (bucket k: [2^k, 2^(k+1)) us;
 * the last one open-ended), and delivery counts 1, 2, 3, 4-5, 6-10, 11+. */
#define EMQ_LATENCY_BUCKETS 32
#define EMQ_DELIVERY_BUCKETS 6
typedef struct stats_hist {
    atomic_uint_fast64_t latency[EMQ_LATENCY_BUCKETS];
    atomic_uint_fast64_t deliveries[EMQ_DELIVERY_BUCKETS];
} stats_hist;

/* ---- exchange.c --------------------------------------------------------- */

typedef struct emq_xchg {
    struct emq_consumer *c;
    const char *what;   /* "read" or "upkeep", for log lines */
    emq_route *route;
    int *tags;          /* tag of each appended command whose reply is unread */
    size_t ntags, tags_cap;
    unsigned failures;  /* consecutive failed sessions: backoff before the
                           next reconnect; reset by emq_xchg_healthy */
    atomic_int *halt;   /* NULL: waits end on the consumer's stop; else on
                           this flag (the upkeep runs on after a stop, until
                           the handler in progress has finished) */
    uint64_t rng;       /* backoff jitter */
    char last_reason[48]; /* why the last session failed (logged once) */
} emq_xchg;

/* Applies the reply of one appended command (tag as given to append).
 * Returns EMQ_OK or a fatal error. */
typedef emq_status (*emq_xchg_apply_fn)(void *ctx, int tag,
                                        const emq_reply *reply,
                                        emq_error *err);

/* Flags of emq_xchg_call. */
#define EMQ_XCHG_WAIT_OOM 1u /* also wait out OOM (reads and acks only) */

/* Connects x for consumer c (one route to the queue's slot). halt: see
 * emq_xchg. */
emq_status emq_xchg_open(emq_xchg *x, struct emq_consumer *c,
                         const char *what, atomic_int *halt, emq_error *err);
/* 1 once the exchange's waits should end (see halt). */
int emq_xchg_halted(const emq_xchg *x);
/* Sleeps ms, or less once emq_xchg_halted. */
void emq_xchg_nap(emq_xchg *x, int64_t ms);
void emq_xchg_close(emq_xchg *x);
/* Appends a command whose reply emq_xchg_drain reads. EMQ_ELIMIT past
 * pipeline.max. */
emq_status emq_xchg_append(emq_xchg *x, int tag, int argc,
                           const char *const *argv, const size_t *argvlen,
                           emq_error *err);
/* Sends what is appended and reads every reply in order, passing each to
 * apply. A transport failure is returned at once (the rest is lost with
 * the connection); the first fatal apply result is returned after all
 * replies were read, so the connection stays in step. */
emq_status emq_xchg_drain(emq_xchg *x, emq_xchg_apply_fn apply, void *ctx,
                          emq_error *err);
/* Like emq_xchg_call, after the commands appended so far: their replies
 * go to apply (as emq_xchg_drain), then the command's own is returned, in
 * the same round trip. */
emq_status emq_xchg_call_after(emq_xchg *x, unsigned flags, int argc,
                               const char *const *argv,
                               const size_t *argvlen, emq_xchg_apply_fn apply,
                               void *ctx, emq_reply **reply, emq_error *err);
/* One command and its reply (caller frees *reply); nothing may be
 * appended. A reply meaning "not now" (LOADING, BUSY, TRYAGAIN,
 * CLUSTERDOWN, MASTERDOWN, MISCONF, NOREPLICAS; OOM with
 * EMQ_XCHG_WAIT_OOM) is waited out with backoff and the command sent
 * again, logged once per episode, until it clears, a stop, or five
 * minutes. */
emq_status emq_xchg_call(emq_xchg *x, unsigned flags, int argc,
                         const char *const *argv, const size_t *argvlen,
                         emq_reply **reply, emq_error *err);
/* Reconnects until it works or a stop: capped jittered backoff, by the
 * number of consecutive failed sessions, in naps a stop ends. Fails at
 * once on authentication, TLS and configuration errors. */
emq_status emq_xchg_reconnect(emq_xchg *x, emq_error *err);
/* Records that the connection did useful work (resets the backoff). */
void emq_xchg_healthy(emq_xchg *x);
/* 1 for the transport failures after which the consumer reconnects. */
int emq_xchg_transport_failure(emq_status st);
/* 1 when r is an error reply that means "not now" (see emq_xchg_call):
 * emq_reply_transient, or OOM with EMQ_XCHG_WAIT_OOM. */
int emq_reply_not_now(const emq_reply *r, unsigned flags);
/* 1 when r is an ACL refusal (NOPERM), also one inside a script. */
int emq_reply_refused(const emq_reply *r);

/* Logs through the conf's log callback (or stderr by default), naming the
 * consumer, group and stream. */
/* ---- stats.c: the statistics callback ------------------------------------ */

/* 1 when the statistics callback is on (stats.interval_ms and a fn). */
int emq_stats_on(const struct emq_consumer *c);
/* Counts one entry out for us microseconds, and one delivery count. */
void emq_stats_latency(struct emq_consumer *c, int64_t us);
void emq_stats_delivery(struct emq_consumer *c, uint64_t deliveries);
/* Asks the server for the group's lag and oldest pending entry on x, then
 * passes the JSON to the callback (the upkeep thread, when due). */
void emq_stats_report(struct emq_consumer *c, emq_xchg *x);

void emq_consumer_log(struct emq_consumer *c, int level, const char *fmt,
                      ...) EMQ_PRINTF(3, 4);
/* Sleeps ms milliseconds, or less when a stop is requested meanwhile. */
void emq_consumer_nap(struct emq_consumer *c, int64_t ms);
/* 1 once a stop was requested or a fatal error recorded. */
int emq_consumer_stopping(struct emq_consumer *c);
/* Records the first fatal error (any thread) and asks run to stop. */
void emq_consumer_fatal(struct emq_consumer *c, const emq_error *err);

/* ---- inflight.c --------------------------------------------------------- */

/* One entry of a batch, as parsed from a reply. */
typedef struct batch_item {
    emq_id id;
    const emq_reply *fields; /* array of name, value...; NULL if deleted */
    uint64_t deliveries;     /* server's count; 0 when not known */
    int malformed;           /* the entry's shape is broken */
    int held;                /* was in the in-flight table already */
    size_t slot;             /* where add_batch put it (a hint) */
} batch_item;


typedef enum if_state {
    IF_READ = 0,    /* read, not handed to the handler yet */
    IF_HANDLING,    /* with the handler */
    IF_SETTLING,    /* decided; its settlement is queued or being sent */
    IF_RETRY_WAIT   /* failed, pending to us, back at due_ms */
} if_state;

typedef struct if_entry {
    emq_id id;
    int64_t refreshed_ms; /* read, claimed or last refreshed (monotonic) */
    int64_t due_ms;       /* IF_RETRY_WAIT: when it is delivered again */
    uint64_t deliveries;
    size_t hash;          /* of id, kept for probing and moving */
    int64_t handed_ms;    /* IF_HANDLING: when it was handed out */
    unsigned char used, state, lost;
    unsigned char uncounted; /* IF_RETRY_WAIT found by recover self in a
                                session that kept the lease: its count was
                                raised already (recover.c) */
} if_entry;

typedef enum settle_kind {
    SETTLE_ACK = 0, /* XACK; clears reason and schedule after a redelivery */
    SETTLE_GONE,    /* deleted while pending: XACK, clear reason/schedule */
    SETTLE_RETRY,   /* record the reason, schedule the next delivery */
    SETTLE_DEAD,    /* the dead-letter script */
    SETTLE_RELEASE  /* handed back unhandled (a stop): the count raised by
                       its read or take is undone */
} settle_kind;

typedef struct settle_op {
    settle_kind kind;
    emq_id id;
    uint64_t deliveries;
    int64_t delay_ms;  /* SETTLE_RETRY */
    char *reason;      /* SETTLE_RETRY/DEAD: owned, may be NULL */
    size_t slot_hint;  /* where its entry was when queued (inflight.c) */
} settle_op;

typedef struct emq_inflight {
    pthread_mutex_t mu;
    pthread_cond_t wake;   /* the upkeep thread waits on it */
    if_entry *slots;       /* open addressing, linear probing */
    size_t cap, n;
    settle_op *ops;        /* settlements decided, not yet taken */
    size_t nops, ops_cap;
    int64_t oldest_op_ms;  /* when the oldest queued op was decided */
    int64_t run_took_ms;   /* when the run thread last took ops for a read */
    int quit;              /* the upkeep thread is asked to end */
    size_t nwait;          /* entries in IF_RETRY_WAIT */
    atomic_size_t nhandling; /* entries in IF_HANDLING (read without mu) */
    size_t current;        /* slot of the entry the handler has (a hint) */
    int64_t stale_after_ms; /* an entry not refreshed this long is not
                               handed out (0: no check) */
    int dozing;            /* the upkeep thread sleeps longer than
                              EMQ_SETTLE_DELAY_MS: wake it for new work */
} emq_inflight;

emq_status emq_inflight_init(emq_inflight *t, emq_error *err);
void emq_inflight_destroy(emq_inflight *t);
/* Frees an op's owned parts. */
void emq_settle_op_free(settle_op *op);
/* Adds the n items (state IF_READ, refreshed now_ms), one lock for all;
 * sets each item's held to 1 when it was in the table already (not to be
 * handed out again). -1 when out of memory (nothing is half added that
 * matters: the caller fails the batch). */
int emq_inflight_add_batch(emq_inflight *t, batch_item *items, size_t n,
                           int64_t now_ms);
/* One lock for the run thread's step: queues *op when not NULL (as
 * a settlement: the entry moves to IF_SETTLING, or IF_RETRY_WAIT due in
 * op->delay_ms; takes ownership), then, when next (an item of the batch
 * add_batch took, found by its slot hint) is not NULL, marks its entry
 * IF_HANDLING if it is held, not handed out yet (IF_READ) and still
 * owned, and sets *began to 1; sets *began to 0 and leaves it alone when
 * it is in another state (in hand already); else forgets it and sets
 * *began to 0 (lost to a peer, or not in the table) or -1 (not refreshed
 * for stale_after_ms: still pending to us, for recover self to bring
 * back). ENOMEM fails. */
emq_status emq_inflight_step(emq_inflight *t, settle_op *op,
                             const batch_item *next, int *began,
                             emq_error *err);
/* emq_inflight_step's begin for n items at once, one lock (pull mode's
 * handout): began[i] as *began there. */
void emq_inflight_begin(emq_inflight *t, const batch_item *const *items,
                        size_t n, int *began);
/* Queues the SETTLE_RELEASE of item, read and never handed out: back to
 * the server with the count its read or take raised undone. */
emq_status emq_inflight_release(emq_inflight *t, const batch_item *item,
                                emq_error *err);
/* Queues *op (takes ownership) for an entry handed out (IF_HANDLING):
 * the settlement of emq_consumer_ack/retry/dead, from any thread. Sets
 * op->deliveries from the table; a retry at its max_deliveries-th
 * delivery becomes a dead letter. EMQ_EINVAL when the entry is not handed
 * out (settled twice, never handed out), EMQ_ELOST when a peer took it
 * over meanwhile (then it is forgotten). *handed_ms (may be NULL) gets
 * when it was handed out. */
emq_status emq_inflight_settle_held(emq_inflight *t, settle_op *op,
                                   uint64_t max_deliveries, emq_error *err,
                                   int64_t *handed_ms);
/* Adds id in IF_RETRY_WAIT, due in wait_ms (a retry whose delay survived
 * a restart, or found by recover self), unless it is there already;
 * uncounted: take it without raising its count when due. -1 when out of
 * memory. */
int emq_inflight_add_waiting(emq_inflight *t, const emq_id *id,
                             int64_t wait_ms, int uncounted);
/* Removes id from the table, if there. */
void emq_inflight_forget(emq_inflight *t, const emq_id *id);
/* 1 when id is in the table. */
int emq_inflight_holds(emq_inflight *t, const emq_id *id);
/* Moves up to max queued ops into *out (caller frees with
 * emq_settle_op_free after emq_inflight_settled). Returns their number.
 * by_run: the run thread takes them for its read (noted, so the upkeep
 * thread leaves settlements to it while it reads often). */
size_t emq_inflight_take(emq_inflight *t, settle_op *out, size_t max,
                         int by_run);
/* Upkeep: the ops were applied by the server: ACK, GONE and DEAD entries
 * leave the table. */
void emq_inflight_settled(emq_inflight *t, const settle_op *ops, size_t n);
/* Upkeep: the ops' outcome is unknown (transport failure): queue them
 * again, first (they are idempotent). Takes ownership. */
void emq_inflight_requeue(emq_inflight *t, settle_op *ops, size_t n);
/* Upkeep: up to max IDs whose refresh is due (refreshed at or before
 * before_ms), oldest first not guaranteed. Returns their number. */
size_t emq_inflight_stale(emq_inflight *t, int64_t before_ms, emq_id *out,
                          size_t max);
/* Upkeep: of asked[0..nasked), those in owned[] were refreshed at now_ms;
 * those in gone[] were deleted while pending (acknowledged by the refresh;
 * their number in *ngone); the others are lost: forgotten if not handed
 * out yet, else marked lost, except entries whose settlement acknowledged
 * them meanwhile. Returns the number lost. */
size_t emq_inflight_refreshed(emq_inflight *t, const emq_id *asked,
                              size_t nasked, const emq_reply *owned,
                              const emq_reply *gone, int64_t now_ms,
                              size_t *ngone);
/* Run thread: up to max IDs whose retry is due at now_ms and whose
 * uncounted flag is uncounted, moved back to IF_READ. Returns their
 * number. */
size_t emq_inflight_due(emq_inflight *t, int64_t now_ms, int uncounted,
                        emq_id *out, size_t max);
/* Milliseconds until the next retry is due (INT64_MAX: none). */
int64_t emq_inflight_next_due(emq_inflight *t, int64_t now_ms);
/* Forgets entries not handed out yet (IF_READ): after a lost session they
 * come back through recover self. */
void emq_inflight_drop_unstarted(emq_inflight *t);
/* Forgets everything (the group is gone). Queued ops are freed. */
void emq_inflight_clear(emq_inflight *t);
/* Entries in the table, and settlements queued. */
size_t emq_inflight_count(emq_inflight *t);
size_t emq_inflight_queued(emq_inflight *t);

/* ---- ready.c -------------------------------------------------------------- */

struct emq_consumer;
typedef struct emq_chunk emq_chunk;

/* One entry handed out by poll: the public entry and what settles it. */
typedef struct handout {
    emq_entry pub;               /* first: emq_entry_free casts back */
    emq_chunk *chunk;
    struct emq_consumer *owner;  /* whose table holds it (a partition's) */
    batch_item item;
} handout;

/* The entries of one read, sharing its reply (refcounted). */
struct emq_chunk {
    atomic_size_t refs;   /* entries not yet freed or dropped */
    emq_reply *reply;
    emq_field *fields;    /* every entry's field views */
    char *names;          /* stream, group and consumer copies */
    size_t n, cap, nfields;
    handout items[];
};

typedef struct emq_ready {
    pthread_mutex_t mu;
    pthread_cond_t more;  /* entries queued, the consumer ended, resume */
    pthread_cond_t room;  /* room freed, closing, the consumer ended */
    handout **ring;       /* FIFO of entries to hand out */
    size_t head, n, cap;
    size_t limit;         /* max_in_flight */
    size_t wake_room;     /* room worth waking a reader for: one read */
    struct emq_consumer *root; /* the consumer polled (a topic's parent) */
    int closing, ended, running, fd_set;
    atomic_int room_waiters; /* reading threads waiting for room */
    int efd;              /* eventfd: readable while n > 0 or ended */
    emq_status end_status; /* first fatal error of a reading thread */
    emq_error end_err;
} emq_ready;

emq_status emq_ready_new(struct emq_consumer *root, emq_ready **out,
                         emq_error *err);
void emq_ready_free(emq_ready *r);
/* Drops one reference; the last frees the chunk and its reply. */
void emq_chunk_unref(emq_chunk *ch);
/* How many more entries c may read (its topic's total, in pull mode):
 * max_in_flight less those waiting and those handed out and not settled;
 * 0 while paused; SIZE_MAX in run mode (c->ready NULL). */
size_t emq_ready_room(struct emq_consumer *c);
/* Sleeps until there is room, a stop or closing, at most ms. */
void emq_ready_wait_room(struct emq_consumer *c, int64_t ms);
/* Waits until every entry c handed out is settled, or closing, or fatal. */
void emq_ready_wait_settled(struct emq_consumer *c);
/* Wakes every waiter: room may have changed (a resume, a pause). */
void emq_ready_notify(emq_ready *r);
/* After a settlement: wakes a reader waiting for room once a whole read
 * fits (or nothing is out). Cheap when no reader waits. */
void emq_ready_settled(emq_ready *r);
/* Queues the chunk's entries (the chunk's references pass to the queue). */
emq_status emq_ready_push(emq_ready *r, emq_chunk *ch, emq_error *err);
/* Hands out up to max entries into out, waiting up to timeout_ms (< 0:
 * without end) for the first. EMQ_ECLOSED once stopped, the first fatal
 * error once a reading thread ended with one. */
emq_status emq_ready_poll(emq_ready *r, emq_entry **out, size_t max,
                          int64_t timeout_ms, size_t *n, emq_error *err);
/* Takes c's entries off the queue: at a session's start (they are
 * dropped from the table next and come back through recover self), or
 * with release at the loop's end (handed back with their count undone). */
void emq_ready_purge(struct emq_consumer *c, int release);
/* A reading thread ended with st (its first fatal error is kept). */
void emq_ready_ended(emq_ready *r, emq_status st, const emq_error *err);
/* After close: ready for the reading threads to start again. */
void emq_ready_reset(emq_ready *r);

/* ---- the consumer -------------------------------------------------------- */

typedef struct emq_upkeep {
    emq_xchg x;
    atomic_int quit;       /* set by the run thread when it is done */
    pthread_t thread;
    int started;
    int64_t next_renew_ms, next_refresh_ms;
    int64_t next_stats_ms;  /* INT64_MAX: no statistics callback */
    int64_t refresh_every_ms;
} emq_upkeep;

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
    char *retry_key;        /* the retry schedule (sorted set) */
    char token[256];        /* lease value: the holder's identity */
    emq_xchg rx;            /* the run thread's exchange */
    emq_upkeep upkeep;
    emq_inflight table;
    atomic_int stop;        /* set by emq_consumer_stop (signal-safe) */
    atomic_int running;
    atomic_int fatal;       /* a fatal error is in fatal_err */
    int nogroup;            /* the last step met NOGROUP (run thread) */
    char nogroup_text[160]; /* ... and the server's words */
    emq_error fatal_err;
    pthread_mutex_t fatal_mu;
    /* Monotonic ms until which the lease is known held; 0: not held. */
    _Atomic int64_t lease_deadline_ms;
    int lease_held;         /* taken in this run (run thread) */
    int lease_lapsed;       /* held, then its deadline passed (run thread) */
    int lease_continued;    /* this session's acquire found our own token:
                               the name was ours throughout (run thread) */
    atomic_int recover_self_due; /* own pending entries left the table
                               unhandled (released, or not refreshed in
                               time): recover self on the next turn */
    stats_counters stats;
    stats_hist hist;        /* stats.c: latency and delivery counts */

    settle_op *rx_ops;      /* settlements the run thread sends with a read */
    emq_field *fields;      /* scratch for the handler's field array */
    size_t fields_cap;
    char claim_cursor[EMQ_ID_MAX];
    int64_t next_claim_ms;
    int64_t last_recreate_ms;
    int64_t last_claim_warning_ms;
    _Atomic uint64_t rng;   /* retry jitter (settlements of any thread) */

    /* Pull mode: the ready queue (owned by the topic's parent, or by this
     * consumer when it is not a partition), NULL in run mode. */
    emq_ready *ready;
    emq_batch_handler_fn batch_handler;
    atomic_int batch_running; /* run with a batch handler is going */
    atomic_int paused;       /* emq_consumer_pause (a topic's parent's) */
    struct emq_consumer *self; /* this consumer (readers of one) */
    pthread_mutex_t pull_mu; /* starting and closing pull mode */
    pthread_t *fetchers;     /* the reading threads of pull mode */
    size_t nfetchers;

    /* A topic (conf partitions > 1; topic.c): one consumer per
     * partition, each with its own route, thread and lease, all under
     * this one's name. This one then only runs, stops and sums them. */
    emq_consumer_t **parts;
    size_t nparts;
};

/* ---- consumer.c and topic.c: making a consumer, and a topic's --------- */

/* consumer.c: makes the consumer of conf with either handler, a topic's
 * without its partitions (topic.c adds them); *out is freed with
 * emq_consumer_free, which frees a topic's partitions too. */
emq_status emq_consumer_make(const emq_conf_t *conf, emq_handler_fn handler,
                             emq_batch_handler_fn batch_handler, void *opaque,
                             emq_consumer_t **out, emq_error *err);
/* consumer.c: the single-queue consumers c stands for, *n of them: a
 * topic's partitions, or c itself. What a call that loops over them
 * uses. */
emq_consumer_t *const *emq_consumer_members(emq_consumer_t *c, size_t *n);
/* topic.c: runs every partition on a thread of its own until all have returned;
 * the first fatal error stops the others and is returned. */
emq_status emq_consumer_topic_run(emq_consumer_t *c, emq_error *err);
/* topic.c: the consumer whose table holds entry: a topic's partition by the
 * entry's stream, or c. NULL with err set (EMQ_EINVAL) when it names
 * another stream, or none on a topic. */
emq_consumer_t *emq_consumer_owner(emq_consumer_t *c, const emq_entry *entry,
                                   emq_error *err);

/* ---- lease.c ------------------------------------------------------------ */

/* Fills c->token with this process's identity. */
void emq_lease_make_token(emq_consumer_t *c);
/* Takes the lease on the consumer name through the read exchange. A lease
 * left by a dead process of this machine (same boot and PID namespace) is
 * taken over at once; one held by a live local process is refused at once;
 * one whose holder cannot be judged is waited for until it expires (at
 * most its TTL and a second), then refused. Refusals are EMQ_EINVAL naming
 * the holder. */
emq_status emq_lease_acquire(emq_consumer_t *c, emq_error *err);
/* 1 while the lease is known held (before its local deadline). */
int emq_lease_valid(emq_consumer_t *c);
/* Appends a renewal to x; emq_lease_renewed applies its reply. */
emq_status emq_lease_append_renew(emq_consumer_t *c, emq_xchg *x, int tag,
                                  emq_error *err);
/* Applies a renewal's reply, sent at sent_ms: extends the local deadline,
 * or (another holder, or expired) ends it and records a fatal error when
 * another process holds the name. */
emq_status emq_lease_renewed(emq_consumer_t *c, const emq_reply *reply,
                             int64_t sent_ms, emq_error *err);
/* Deletes the lease if it is still ours (on stop). */
void emq_lease_release(emq_consumer_t *c, emq_xchg *x);

/* ---- settle.c ----------------------------------------------------------- */

/* Most settlements one round may take: EMQ_SETTLE_MAX_IDS, or fewer when
 * pipeline.max would not hold a command per retry and dead letter. */
size_t emq_settle_ops_max(const emq_consumer_t *c);
/* Appends the commands of ops[0..n) to x (n <= emq_settle_ops_max). */
emq_status emq_settle_append(emq_consumer_t *c, emq_xchg *x,
                             const settle_op *ops, size_t n, emq_error *err);
/* The replies of one pipeline of settlements. */
typedef struct settle_round {
    emq_consumer_t *c;
    int again; /* a settlement was answered "not now": send all again */
} settle_round;
/* Applies one settlement command's reply (tag from emq_settle_append);
 * round is a settle_round. Fatal refusals are recorded and returned. */
emq_status emq_settle_apply(void *round, int tag, const emq_reply *reply,
                            emq_error *err);
/* After the pipeline of ops[0..n) was read with status st: forgets the
 * settled entries and frees the ops, or queues them again when their
 * outcome is unknown or they were answered "not now". */
void emq_settle_finish(emq_consumer_t *c, settle_op *ops, size_t n,
                       emq_status st, const settle_round *r);
/* Appends the ownership refresh of ids[0..n) (n <= EMQ_SETTLE_MAX_IDS):
 * its reply is the array of those still pending to this consumer, whose
 * idle time it reset. */
emq_status emq_settle_append_refresh(emq_consumer_t *c, emq_xchg *x,
                                     const emq_id *ids, size_t n, int tag,
                                     emq_error *err);
/* Builds the settlement *op of entry id, delivered deliveries times
 * (reason may be NULL; a retry gets its delay from the schedule). */
emq_status emq_settle_make(emq_consumer_t *c, const emq_id *id,
                           uint64_t deliveries, settle_kind kind,
                           const char *reason, settle_op *op, emq_error *err);
/* The retry delay for an entry failed at its deliveries-th delivery. */
int64_t emq_settle_retry_delay(emq_consumer_t *c, uint64_t deliveries);

/* ---- upkeep.c ----------------------------------------------------------- */

/* Starts the maintenance thread on its own connection. */
emq_status emq_upkeep_start(emq_consumer_t *c, emq_error *err);
/* Sends what is queued (while the lease holds) and ends the thread. */
void emq_upkeep_stop(emq_consumer_t *c);

/* ---- entries.c ---------------------------------------------------------- */


/* Entries of one read or claim. Owns the reply they point into. */
typedef struct batch {
    emq_reply *reply;
    batch_item *items;
    size_t n, cap;
} batch;

void emq_batch_init(batch *b);
/* Frees the reply and clears the items (keeps their storage). */
void emq_batch_clear(batch *b);
void emq_batch_free(batch *b);
/* Takes reply (ownership) and parses the entries array entries (inside
 * reply) into b. An entry whose fields are broken is kept, marked
 * malformed; an entry without a usable ID is EMQ_EPROTO. */
emq_status emq_batch_parse(batch *b, emq_reply *reply,
                           const emq_reply *entries, emq_error *err);
/* The entries array of an XREADGROUP reply for our stream (RESP2 array or
 * RESP3 map), or NULL when the reply holds none (null or empty). */
const emq_reply *emq_xread_entries(const emq_reply *reply, emq_error *err,
                                   emq_status *st);
/* Points out[0..n) (or, when out is NULL, c's scratch array) at item's
 * field name/value views, setting *nfields; marks item malformed (and
 * forgets its fields) when a name or value is not a string. ENOMEM only. */
emq_status emq_entry_fields(emq_consumer_t *c, batch_item *item,
                            emq_field *out, size_t *nfields, emq_error *err);
/* Puts the batch's entries in the in-flight table and hands them to the
 * handler one by one (pull mode: to the ready queue, taking the reply
 * from b) while the lease holds and no stop is asked; entries already
 * held (in the table before) are skipped. Returns EMQ_OK or a
 * fatal error. */
emq_status emq_batch_dispatch(emq_consumer_t *c, batch *b, emq_error *err);

/* ---- recover.c ---------------------------------------------------------- */

/* Drains this consumer's own pending entries with history reads, paging
 * from 0, until none remain (or stop). */
emq_status emq_recover_self(emq_consumer_t *c, emq_error *err);
/* One claim beat: XAUTOCLAIM following the saved cursor, at most
 * EMQ_CLAIM_CALLS_PER_BEAT calls, handling what it claims. */
emq_status emq_recover_peers(emq_consumer_t *c, emq_error *err);
/* Delivers again the retried entries whose delay has passed. */
emq_status emq_recover_due(emq_consumer_t *c, emq_error *err);

/* ---- consumer.c ------------------------------------------------------- */

/* Frees c and its partitions (nothing may run). */
void emq_consumer_free(emq_consumer_t *c);
/* One consumer's (not a topic parent's) whole life on the calling
 * thread: connect, sessions and turns until a stop or a fatal error, then
 * (pull mode) hand back what is unhanded and wait for what is handed out
 * to be settled, end the upkeep thread and give the lease back. EMQ_OK
 * after a stop. */
emq_status emq_consumer_loop(emq_consumer_t *c, emq_error *err);
/* Runs run(consumers[i]) on n threads and waits for all of them. The
 * first fatal error of any stops the others and is returned (EMQ_OK when
 * all stopped cleanly). */
emq_status emq_consumers_run(emq_consumer_t *const *consumers, size_t n,
                             emq_status (*run)(emq_consumer_t *c,
                                               emq_error *err),
                             emq_error *err);

#endif /* EMQ_CONSUMER_H */
