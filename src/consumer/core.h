/* SPDX-License-Identifier: BSD-3-Clause */
/* core.h: what a consumer is made of, and the small helpers every file
 * of the consumer folder uses on it (core.c).
 *
 * Internal header (not installed). The files of this folder, bottom to
 * top: each uses (includes, and calls) only those above it in this list,
 * as scripts/check_maps.sh checks; each has a header of its own naming
 * what it offers:
 *
 *   inflight.c  the in-flight table (every entry read and not settled) and
 *               the queue of settlements decided and not yet sent
 *   machine.c   the session's state machine: states, events, the bits
 *               other threads post, the decision to read
 *   core.c      the consumer's state (this header): log, nap, stop, fatal,
 *               the members of a topic, its two sessions (session.h:
 *               call, append, drain, the "not now" wait, reconnect)
 *   stats.c     the counters as JSON, the statistics callback
 *   lease.c     one name, one process: acquire, renew, release, identity
 *   settle.c    the commands that settle entries (XACK, failure reasons,
 *               dead-letter moves, the retry schedule) and the ownership
 *               refresh
 *   grant.c     what a read of new entries may take: the group's rate and
 *               in-flight limits, the queue's priorities (the grant script)
 *   mover.c     due delayed entries moved to the stream, for the upkeep
 *   marks.c     unseen marks written and removed, for the upkeep
 *   inhand.c    in-hand times published and deleted, for the upkeep
 *   upkeep.c    the maintenance thread on its own connection: refreshes
 *               ownership, renews the lease, sends settlements, on a timer
 *               that does not depend on the handler
 *   ready.c     pull mode: entries read and waiting for emq_consumer_poll,
 *               the in-flight room, the event descriptor
 *   entries.c   entries out of replies, and handing them to the handler
 *               (run mode) or to the ready queue (pull mode)
 *   recover.c   recover self, claim beats, retries that are due
 *   consumer.c  one queue's consumer, made and checked; its sessions and
 *               its loop; N loops on N threads (pools, topics)
 *   partitions.c  a topic's consumer: one consumer per partition
 *   consumer_new.c  emq_consumer_new: a queue's consumer or a topic's
 *   handout.c   the public ways to consume over that one loop: run with a
 *               handler, poll and settle from any thread, the batch
 *               handler, close, pause, the event-loop descriptor
 *   pool.c      N consumers of N names on N threads
 *
 * Threads: the loop's thread (run's caller, or in pull mode a thread of
 * the consumer's own) owns the read session and the session's state
 * (machine.h: other threads post to it); the upkeep thread owns its own
 * session. They share the in-flight table (its mutex), the lease
 * deadline and the stop/fatal flags (atomics). In pull mode, any thread
 * may poll (the ready queue's mutex) and settle (the table's mutex).
 */
#ifndef EMQ_CONSUMER_CORE_H
#define EMQ_CONSUMER_CORE_H

#include "../conn/conf.h"
#include "../session/session.h"
#include "inflight.h"
#include "machine.h"

/* The live counters: EMQ_CONSUMER_COUNTERS (echomq.h) as atomics; stats.c
 * writes the struct, the sums and the JSON from that one list. */
#define EMQ_COUNTER_FIELD(name) atomic_uint_fast64_t name;
typedef struct stats_counters {
    EMQ_CONSUMER_COUNTERS(EMQ_COUNTER_FIELD)
    EMQ_CONSUMER_CLUSTER_COUNTERS(EMQ_COUNTER_FIELD)
    EMQ_CONSUMER_HAND_COUNTERS(EMQ_COUNTER_FIELD)
    EMQ_CONSUMER_QUEUE_COUNTERS(EMQ_COUNTER_FIELD)
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

/* The ready queue of pull mode (ready.h). */
typedef struct emq__ready emq__ready;

/* The maintenance thread's part of the consumer (upkeep.c). */
typedef struct emq__upkeep {
    emq__session x;
    atomic_int quit; /* set by the run thread when it is done */
    pthread_t thread;
    int started;
    int64_t next_renew_ms, next_refresh_ms;
    int64_t next_stats_ms; /* INT64_MAX: no statistics callback */
    int64_t refresh_every_ms;
    int64_t round_ms8;        /* a round's round trip, ms x 8: a moving
                                 mean (when marks go, inflight.h) */
    int unblock_asked;        /* a stop met the read blocked (table.mu) */
    int64_t unblock_again_ms; /* ...and is asked again then: the read was
                                 not blocked yet (table.mu) */
} emq__upkeep;

/* A consumer of one queue, or a topic's consumer of its partitions'
 * consumers (parts). */
/* A dead-letter move the script found too wide to write itself. */
typedef struct settle_wide {
    size_t index;        /* among the round's SETTLE_DEAD ops */
    char deliveries[24]; /* as the script read them */
    char *reason;        /* owned: the reason it chose */
} settle_wide;

/* The replies of one pipeline of settlements (settle.c). Zero-initialise
 * all but c; emq__settle_finish frees what apply gathered. */
typedef struct settle_round {
    emq_consumer_t *c;
    int again;         /* a settlement was answered "not now": send all again */
    size_t ndead;      /* dead-letter replies applied */
    settle_wide *wide; /* those too wide for the script */
    size_t nwide, wide_cap;
} settle_round;

struct emq_consumer {
    emq_conf_t *conf; /* own copy */
    emq_handler_fn handler;
    void *opaque;
    emq__keys keys;
    const char *group;         /* borrowed from conf */
    const char *name;          /* consumer name, borrowed from conf */
    char start_id[EMQ_ID_MAX]; /* "$", "0" or the declared ID */
    char *lease_key;
    char *lease_prefix; /* the group's lease keys without the name: a
                           consumer of the group is alive while prefix +
                           its name exists (grant.c) */
    char *reasons_key;
    char *retry_key;    /* the retry schedule (sorted set) */
    char *unseen_key;   /* entries read and not handed out (a set; upkeep.c
                           writes it, recover.c reads it) */
    char *inhand_key;   /* the group's entries in a handler's hands and since
                           when (a hash by entry ID, server ms; upkeep.c) */
    char *limits_key;   /* the group's limits (a hash; grant.c) */
    char *rate_log_key; /* the group's deliveries of the last second */
    atomic_int limited; /* the group has a limit: reads go through the
                           grant script (grant.c; the upkeep looks
                           again every EMQ_GRANT_LOOK_MS) */
    int exact;          /* deliveries.exact: reads go through the grant script,
                           which marks what it delivers unseen (grant.c) */
    atomic_int prioritized;    /* the queue has a priority record: reads go
                                  through the grant script too, which hands
                                  out held entries most urgent first */
    int64_t next_limits_ms;    /* the upkeep's next look (upkeep thread) */
    int limits_warned;         /* the limits differ from ours: said once */
    int limits_bad_warned;     /* a limit that is none read: said once */
    int prio_refused_warned;   /* the priority record refused: said once */
    emq__delayed_keys delayed; /* the queue's delayed entries (upkeep.c
                                  moves those due to the stream) */
    struct {
        int64_t next_ms; /* the mover's next step (INT64_MAX: never) */
        int move;        /* 1: it is the move, 0: a look (mover.c) */
    } mover;
    struct {
        int64_t next_ms;   /* marks of entries waiting are looked for then
                              (upkeep thread; marks.c) */
        int64_t warned_ms; /* a removal short of its replicas was last
                              warned about then */
    } marks;
    atomic_int_fast64_t settle_warned_ms; /* settlements short of their
                                             replicas were last warned
                                             about then (settle.c) */
    struct {
        int64_t next_ms; /* in-hand times are published then (upkeep
                            thread; inhand.c) */
    } inhand;
    char token[256]; /* lease value: the holder's identity */
    emq__session rx; /* the run thread's session */
    emq__upkeep upkeep;
    emq__inflight table;
    atomic_int stop; /* set by emq_consumer_stop (signal-safe) */
    int stop_fd;     /* eventfd, readable once stop is set (-1: none);
                        emq__consumer_stop_clear clears both */
    /* While the run thread's read blocks (XREADGROUP ... BLOCK): its
     * connection's id and endpoint, so that at a stop the upkeep ends
     * the block from its own connection (CLIENT UNBLOCK); id 0 otherwise,
     * or when not known. Under table.mu. */
    int64_t blocked_id;
    char blocked_at[320];
    atomic_int running;
    atomic_int fatal;       /* a fatal error is in fatal_err */
    int nogroup;            /* the last step met NOGROUP (run thread) */
    char nogroup_text[160]; /* ... and the server's words */
    emq_error fatal_err;
    pthread_mutex_t fatal_mu;
    /* Monotonic ms until which the lease is known held; 0: not held. */
    _Atomic int64_t lease_deadline_ms;
    int lease_held;        /* taken in this run (run thread) */
    int lease_lapsed;      /* held, then its deadline passed (run thread) */
    int renew_failing;     /* the last renewal got an error reply
                              (upkeep thread; lease.c) */
    atomic_int lease_lost; /* another process took the name (a fatal
                              error; lease.c) */
    int lease_continued;   /* this session's acquire found our own token:
                              the name was ours throughout (run thread) */
    int claim_unknown;     /* a claim beat's reply was lost: what it took
                              over is pending to us, its count not raised
                              (JUSTID), so recover self counts own pending
                              entries as if the lease had not continued,
                              until it has been through them all (run
                              thread; recover.c) */
    /* The session's state, the run thread's; other threads post to it
     * (EMQ_POST_LAPSE, EMQ_POST_RECOVER_SELF) instead of writing what the
     * loop decides on (machine.h). */
    emq__machine machine;
    stats_counters stats;
    stats_hist hist; /* stats.c: latency and delivery counts */

    settle_op *rx_ops; /* settlements the run thread sends with a read */
    size_t rx_ops_cap; /* (emq__inflight_take may swap the array) */
    /* Reads sent ahead (pull mode; consumer.c): XREADGROUPs that went
     * out, each with the settlements decided by then, before the last
     * read's entries were queued; their replies are owed on rx, the one at
     * ahead_first the oldest. Run thread. */
    struct ahead_read {
        size_t want;    /* the COUNT it asked for */
        settle_op *ops; /* the settlements that went with it */
        size_t ops_cap; /* (emq__inflight_take may swap the array) */
        size_t nops;
        int64_t sent_ms;    /* when it left: its entries are no older */
        int blocking;       /* it went with BLOCK (a read lent to a poller,
                               its reply owed to whoever waits for it) */
        int64_t block_ms;   /* that BLOCK */
        settle_round round; /* their replies */
    } ahead[EMQ_SESSION_AHEAD_MAX];
    size_t ahead_first, nahead;
    int read_not_now;  /* a lent read was answered "not now": the next read
                          is the reading thread's, which waits it out */
    int wide_waits;    /* dead letters too wide for the script met a read
                          still owed: one read ahead at a time until a
                          call with nothing owed (their calls need the
                          connection with nothing owed) */
    emq_field *fields; /* scratch for the handler's field array */
    size_t fields_cap;
    char claim_cursor[EMQ_ID_MAX];
    /* Reads that fit (recover.c, emq__fit): the most entries one read,
     * own-pending page, take or claim asks for; halved at each reply over
     * resp.max_reply_bytes, down to 1, for the rest of the run (SIZE_MAX:
     * no bound but the configured sizes). Run thread. */
    int marks_refused; /* a take's unseen marks were refused (an ACL
                          without SADD): a take whose reply is lost then
                          notes its entries dropped (recover.c) */
    size_t fit;
    int fit_warned;  /* the first halving of this run was logged */
    int late_warned; /* a reply that arrived stale was logged (run) */
    int64_t next_claim_ms;
    int64_t last_recreate_ms;
    int64_t last_claim_warning_ms;
    _Atomic uint64_t rng; /* retry jitter (settlements of any thread) */

    /* Pull mode: the ready queue (owned by the topic's parent, or by this
     * consumer when it is not a partition), NULL in run mode. */
    emq__ready *ready;
    emq_batch_handler_fn batch_handler;
    atomic_int batch_running;  /* run with a batch handler is going */
    atomic_int paused;         /* emq_consumer_pause (a topic's parent's) */
    struct emq_consumer *self; /* this consumer (readers of one) */
    pthread_mutex_t pull_mu;   /* starting and closing pull mode */
    pthread_t *fetchers;       /* the reading threads of pull mode */
    size_t nfetchers;

    /* A topic (conf partitions > 1; partitions.c): one consumer per
     * partition, each with its own route, thread and lease, all under
     * this one's name. This one then only runs, stops and sums them. */
    emq_consumer_t **parts;
    size_t nparts;
};

/* ---- core.c: the helpers every file uses ----------------------------------
 */

/* Logs through the conf's log callback (or stderr by default), naming the
 * consumer, group and stream. */
void emq__consumer_log(emq_consumer_t *c, int level, const char *fmt, ...)
    EMQ_PRINTF(3, 4);
/* Opens s, one of c's two sessions (what: "read" or "upkeep"), to the
 * queue's slot, named after the consumer, logging through c, counting in
 * c's statistics, waiting for the server per consumer.connect. Its waits
 * end on c's stop (halt NULL) or on *halt (the upkeep runs on after a
 * stop until the handler in progress has finished), and on a fatal
 * error. reply_timeout_ms > 0 caps command_timeout_ms for s (the
 * upkeep's liveness bound). on_stop (NULL: none) is called with c once a
 * wait for a blocked read's reply sees the stop, and s learns its
 * connections' ids for it. The thread that will own s. */
emq_status emq__consumer_session_open(emq_consumer_t *c, emq__session *s,
                                      const char *what, atomic_int *halt,
                                      int64_t reply_timeout_ms,
                                      void (*on_stop)(void *c), emq_error *err);
/* Appends the command "words[0..nwords) ids[0..n)" to s with tag
 * (tags.h), e.g. {"SREM", key}. The thread that owns s; EMQ_ENOMEM when
 * the arguments cannot be built. */
emq_status emq__consumer_append_ids(emq__session *s, int tag,
                                    const char *const *words, size_t nwords,
                                    const emq_id *ids, size_t n,
                                    emq_error *err);
/* With deliveries.wait_replicas, appends "WAIT replicas timeout" to s
 * with tag (the writes of s before it reach that many replicas, or the
 * timeout passes: its reply says how many did); nothing without. Returns
 * the number waited for (0: none appended) in *want. The thread that owns
 * s. */
emq_status emq__consumer_append_wait(emq_consumer_t *c, emq__session *s,
                                     int tag, long long *want, emq_error *err);
/* Sleeps ms milliseconds, or less when a stop is requested meanwhile. */
void emq__consumer_nap(emq_consumer_t *c, int64_t ms);
/* 1 once a stop was requested or a fatal error recorded. */
int emq__consumer_stopping(emq_consumer_t *c);
/* Sets c's stop and turns its stop_fd readable. Async-signal-safe. */
void emq__consumer_stop_set(emq_consumer_t *c);
/* Clears c's stop and drains its stop_fd, for the next run. */
void emq__consumer_stop_clear(emq_consumer_t *c);
/* Records the first fatal error (any thread) and asks run to stop. */
void emq__consumer_fatal(emq_consumer_t *c, const emq_error *err);
/* The fatal error recorded on c or one of its members (copied into err,
 * which may be NULL), or EMQ_OK when none was. Any thread. */
emq_status emq__consumer_fatal_copy(emq_consumer_t *c, emq_error *err);
/* The single-queue consumers c stands for, *n of them: a topic's
 * partitions, or c itself. What a call that loops over them uses. */
emq_consumer_t *const *emq__consumer_members(emq_consumer_t *c, size_t *n);

#endif /* EMQ_CONSUMER_CORE_H */
