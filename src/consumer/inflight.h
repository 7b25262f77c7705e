/* SPDX-License-Identifier: BSD-3-Clause */
/* inflight.h: the in-flight table (every entry read and not settled) and
 * the queue of settlements decided and not yet sent. The bottom of the
 * consumer folder: it knows entry IDs and states, not the consumer.
 */
#ifndef EMQ_CONSUMER_INFLIGHT_H
#define EMQ_CONSUMER_INFLIGHT_H

#include "../streams/streams.h"

#include <pthread.h>
#include <stdatomic.h>

/* Most settlements one round takes, and most IDs one XACK or refresh
 * names: every exchange is bounded whatever the batch size. */
#define EMQ_SETTLE_MAX_IDS 1000
/* A settlement waits at most this long for company before it is sent. */
#define EMQ_SETTLE_DELAY_MS 10

/* One entry of a batch, as parsed from a reply. */
typedef struct batch_item {
    emq_id id;
    emq__stream_id key;      /* id's numbers, the table's key ({0, 0}: not
                                known, read from id when needed) */
    const emq_reply *fields; /* array of name, value...; NULL if deleted */
    uint64_t deliveries;     /* server's count; 0 when not known */
    int malformed;           /* the entry's shape is broken */
    int held;                /* was in the in-flight table already */
    int unseen;              /* its unseen mark is on the server (a take
                                found it there): to go before it is
                                handed out */
    int alone;               /* may have been in the hands of a handler
                                whose process died: a poll hands it out
                                by itself (recover.c, TAKE_SUSPECT) */
    size_t slot;             /* where add_batch put it (a hint) */
} batch_item;

typedef enum if_state {
    IF_READ = 0,  /* read, not handed to the handler yet */
    IF_HANDLING,  /* with the handler */
    IF_SETTLING,  /* decided; its settlement is queued or being sent */
    IF_RETRY_WAIT /* failed, pending to us, back at due_ms */
} if_state;

typedef struct if_entry {
    emq_id id;
    emq__stream_id key;   /* id's numbers: what the table compares */
    int64_t refreshed_ms; /* read, claimed or last refreshed (monotonic) */
    int64_t due_ms;       /* IF_RETRY_WAIT: when it is delivered again */
    uint64_t deliveries;
    size_t hash;       /* of key, kept for probing and moving */
    int64_t handed_ms; /* IF_HANDLING: when it was handed out */
    unsigned char used, state, lost;
    unsigned char overdue;   /* IF_HANDLING past handler.timeout_ms: let go,
                                no longer refreshed, not settled here */
    unsigned char unseen;    /* 1: an unseen mark may be on the server (the
                                upkeep sent one, or a take found one): it
                                goes before the entry is handed out; 2:
                                released, never marked */
    int64_t read_ms;         /* entered the table (monotonic) */
    unsigned char published; /* IF_HANDLING: its in-hand time was sent */
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
    emq__stream_id key; /* as batch_item's */
    uint64_t deliveries;
    int64_t delay_ms; /* SETTLE_RETRY */
    char *reason;     /* SETTLE_RETRY/DEAD: owned, may be NULL */
    size_t slot_hint; /* where its entry was when queued (inflight.c) */
} settle_op;

typedef struct emq__inflight {
    pthread_mutex_t mu;
    pthread_cond_t wake; /* the upkeep thread waits on it */
    if_entry *slots;     /* open addressing, linear probing */
    size_t cap, n;
    settle_op *ops; /* settlements decided, not yet taken */
    size_t nops, ops_cap;
    int64_t oldest_op_ms;    /* when the oldest queued op was decided */
    int64_t run_took_ms;     /* when the run thread last took ops for a read */
    int quit;                /* the upkeep thread is asked to end */
    size_t nwait;            /* entries in IF_RETRY_WAIT */
    size_t nsettling;        /* entries in IF_SETTLING: a settlement
                                decided and not yet known written */
    int urgent;              /* settle waits under way: the upkeep sends
                                the queue at once, and a read takes none
                                of it (its reply may be a block away) */
    int64_t due_min;         /* no retry wait ends sooner (INT64_MAX: none
                                known); emq__inflight_next_due looks
                                through the table only once it has come */
    atomic_size_t nhandling; /* entries in IF_HANDLING (read without mu) */
    int64_t held_ms8;        /* how long a handler holds an entry, ms x 8:
                                a moving mean (emq__inflight_mark_after_ms) */
    size_t current;          /* slot of the entry the handler has (a hint) */
    int64_t stale_after_ms;  /* an entry not refreshed this long is not
                                handed out (0: no check) */
    int64_t hand_limit_ms;   /* handler.timeout_ms: an entry handed out
                                this long ago is let go (0: no bound) */
    /* Unseen marks (upkeep.c sends them, recover.c reads them): ids whose
     * mark must go before they are handed out, a FIFO; the k-th id ever
     * queued is ticket k, and every ticket up to unmark_done is gone from
     * the server. */
    emq_id *unmark;
    size_t nunmark, unmark_cap;
    uint64_t unmark_taken; /* tickets the upkeep took */
    atomic_uint_fast64_t unmark_asked, unmark_done;
    pthread_cond_t unmarked; /* unmark_done moved */
    /* Ids whose handout was undone after their mark went (or before one
     * was written): marked again at the upkeep's next round, behind that
     * removal on the one connection, whatever the session does next. */
    emq_id *remark;
    size_t nremark, remark_cap;
    /* In-hand times (upkeep.c publishes them): ids whose published time
     * is to go, because they left a handler's hands. */
    emq_id *unpublish;
    size_t nunpublish, unpublish_cap;
    /* Entries this process read and dropped without handing them out (a
     * session's start, not refreshed in time): recover self takes them
     * back without counting a delivery. */
    emq_id *dropped;
    size_t ndropped, dropped_cap;
    /* Entries handed out and let go unsettled (a settlement refused past
     * the lease's deadline, in hand past handler.timeout_ms, taken over):
     * a handler had them, so recover self counts a delivery for each even
     * in a session that kept the lease. */
    emq_id *let_go;
    size_t nlet_go, let_go_cap;
    int dozing;             /* the upkeep thread sleeps longer than
                               EMQ_SETTLE_DELAY_MS: wake it for new work */
    atomic_uint generation; /* raised by emq__inflight_clear: an entry
                               handed out under an older one is gone */
} emq__inflight;

emq_status emq__inflight_init(emq__inflight *t, emq_error *err);
void emq__inflight_destroy(emq__inflight *t);
/* Frees an op's owned parts. */
void emq__settle_op_free(settle_op *op);
/* Adds the n items (state IF_READ, refreshed now_ms), one lock for all;
 * sets each item's held to 1 when it was in the table already (not to be
 * handed out again). -1 when out of memory (nothing is half added that
 * matters: the caller fails the batch). */
int emq__inflight_add_batch(emq__inflight *t, batch_item *items, size_t n,
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
 * back). *now_ms (when not NULL) is the coarse clock the step read under
 * the lock, for the caller's own checks right after it. ENOMEM fails. */
emq_status emq__inflight_step(emq__inflight *t, settle_op *op,
                              const batch_item *next, int *began,
                              int64_t *now_ms, emq_error *err);
/* Asked again right before a begun entry (IF_HANDLING) reaches its
 * handler, after a wait since its begin (its unseen mark's removal; the
 * process may have been stopped meanwhile): 1 while it is still fresh
 * and not lost. Otherwise 0, and it is forgotten (a stale one is noted
 * dropped: recover self brings it back uncounted, if still ours; and its
 * mark is asked again, for a peer's claim). */
int emq__inflight_still_ours(emq__inflight *t, const emq_id *id);
/* A begun entry (IF_HANDLING) that is not to reach its handler after all
 * (the lease lapsed or a stop came while its handout waited): back to
 * IF_READ, its unseen mark asked again at once (a take, by this process,
 * a successor or a peer, counts no delivery for it), kept and refreshed
 * in the table like the entries a handout drops for the lease, until the
 * session that starts again takes it back (dropped, then recover self).
 * Nothing when it is in another state. Any thread. */
void emq__inflight_unbegin(emq__inflight *t, const emq_id *id);
/* emq__inflight_step's begin for n items at once, one lock (pull mode's
 * handout): began[i] as *began there. */
void emq__inflight_begin(emq__inflight *t, const batch_item *const *items,
                         size_t n, int *began);
/* Queues the SETTLE_RELEASE of item, read and never handed out: back to
 * the server with the count its read or take raised undone; nothing when
 * it has an unseen mark (that keeps its next take from counting it). */
emq_status emq__inflight_release(emq__inflight *t, const batch_item *item,
                                 emq_error *err);
/* Queues *op (takes ownership) for an entry handed out (IF_HANDLING):
 * the settlement of emq_consumer_ack/retry/dead, from any thread. Sets
 * op->deliveries from the table; a retry at its max_deliveries-th
 * delivery becomes a dead letter. EMQ_EINVAL when the entry is not handed
 * out (settled twice, never handed out); EMQ_ELOST when a peer took it
 * over meanwhile, or when fenced (the caller's lease is not known held,
 * so nothing would be sent) and the entry is handed out or not in the
 * table (dropped when the name was lost): then it is forgotten, still
 * pending to this name. *handed_ms (may be NULL) gets when it was handed out.
 */
emq_status emq__inflight_settle_held(emq__inflight *t, settle_op *op,
                                     uint64_t max_deliveries, int fenced,
                                     emq_error *err, int64_t *handed_ms);
/* Adds id in IF_RETRY_WAIT, due in wait_ms (a retry whose delay survived
 * a restart, or found by recover self), unless it is there already;
 * uncounted: take it without raising its count when due. -1 when out of
 * memory. */
int emq__inflight_add_waiting(emq__inflight *t, const emq_id *id,
                              int64_t wait_ms, int uncounted);
/* Removes id from the table, if there. */
void emq__inflight_forget(emq__inflight *t, const emq_id *id);
/* 1 when id is in the table. */
int emq__inflight_holds(emq__inflight *t, const emq_id *id);
/* 1 when id's settlement is decided and not yet written (IF_SETTLING).
 * Any thread. */
int emq__inflight_settling(emq__inflight *t, const emq_id *id);
/* Our own claim just returned id (pending to us, idle time reset): when
 * the table holds it (a peer took it from a handler's hands and died),
 * it is ours again: its lost mark is cleared and it counts as refreshed
 * at now_ms, so its settlement goes through and it is never taken (nor
 * its count raised) a second time. Returns 1 when held, else 0. Any
 * thread. */
int emq__inflight_reclaimed(emq__inflight *t, const emq_id *id, int64_t now_ms);
/* Moves up to max queued ops into (*ops)[0..n), returning n (caller frees
 * them with emq__settle_op_free after emq__inflight_settled). *ops (room
 * for *cap, from emq__alloc) may be swapped with the queue's own array:
 * taking them all, the usual case, copies nothing. Out of memory growing
 * *ops, takes none. by_run: the run thread takes them for its read
 * (noted, so the upkeep thread leaves settlements to it while it reads
 * often). */
size_t emq__inflight_take(emq__inflight *t, settle_op **ops, size_t *cap,
                          size_t max, int by_run);
/* Upkeep: the ops were applied by the server: ACK, GONE and DEAD entries
 * leave the table. */
void emq__inflight_settled(emq__inflight *t, const settle_op *ops, size_t n);
/* Upkeep: the ops' outcome is unknown (transport failure): queue them
 * again, first (they are idempotent). Takes ownership. */
void emq__inflight_requeue(emq__inflight *t, settle_op *ops, size_t n);
/* Upkeep: up to max IDs whose refresh is due (refreshed at or before
 * before_ms), oldest first not guaranteed. Returns their number. An entry
 * handed out more than hand_limit_ms ago (when set) is not among them: it
 * is marked overdue instead (let go: never refreshed again, its
 * settlement EMQ_ELOST); *noverdue gets how many were newly marked and
 * *first_overdue (may be NULL) the first of them. */
size_t emq__inflight_stale(emq__inflight *t, int64_t before_ms, emq_id *out,
                           size_t max, size_t *noverdue, emq_id *first_overdue);
/* An entry read and not handed out for this long gets an unseen mark
 * (upkeep.c), unless handlers hold each entry EMQ_UNSEEN_SLOW_HELD_MS or
 * more: then EMQ_UNSEEN_SOON_MS. */
#define EMQ_UNSEEN_AFTER_MS 50
#define EMQ_UNSEEN_SOON_MS 2
#define EMQ_UNSEEN_SLOW_HELD_MS 2

/* How long an entry read and not handed out waits for its unseen mark,
 * when handlers hold an entry held_ms on average and the upkeep's round
 * trip takes round_ms. A mark costs its entry's handout one round trip
 * (the unmark goes first), so entries are marked soon only where that is
 * at most a twentieth of a handler's time: behind slow handlers an entry
 * waits long, and a crash while it waits unmarked counts a delivery no
 * handler had (the window is EMQ_UNSEEN_SOON_MS instead of
 * EMQ_UNSEEN_AFTER_MS). Pure. */
int64_t emq__unseen_after_ms(int64_t held_ms, int64_t round_ms);
/* emq__unseen_after_ms with the table's mean handler time. Upkeep. */
int64_t emq__inflight_mark_after_ms(emq__inflight *t, int64_t round_ms);
/* Upkeep: up to max IDs read at least after_ms before now_ms and not
 * handed out, without an unseen mark yet: marked now (the caller sends
 * the marks). Returns their number. */
size_t emq__inflight_to_mark(emq__inflight *t, int64_t now_ms, int64_t after_ms,
                             emq_id *out, size_t max);
/* Upkeep: takes up to max IDs to mark again at once (unbegun, above);
 * emq__inflight_remark_again queues ids[0..n) back (a "not now" reply).
 * Returns their number. */
size_t emq__inflight_remark_take(emq__inflight *t, emq_id *out, size_t max);
void emq__inflight_remark_again(emq__inflight *t, const emq_id *ids, size_t n);
/* Upkeep: takes up to max IDs whose mark is to go; *upto gets the last
 * ticket among them. Returns their number. */
size_t emq__inflight_unmark_take(emq__inflight *t, emq_id *out, size_t max,
                                 uint64_t *upto);
/* Upkeep: the marks of tickets up to upto are gone from the server (ok),
 * or their fate is unknown (!ok: ids[0..n) go back, first). */
void emq__inflight_unmark_finish(emq__inflight *t, int ok, uint64_t upto,
                                 const emq_id *ids, size_t n);
/* Any thread: 1 when every unseen mark asked to go so far is gone from
 * the server (waits for it, in slices, until give_up(arg) says 1: then
 * 0). Cheap when nothing waits. */
/* Waits until every settlement decided so far is written (none queued,
 * none on its way), or give_up(arg) says 1 (looked at every 2 ms). Returns
 * 1 when it had to wait, 0 when nothing was outstanding. Any thread. */
int emq__inflight_settle_wait(emq__inflight *t, int (*give_up)(void *),
                              void *arg);
int emq__inflight_unmark_wait(emq__inflight *t, int (*give_up)(void *),
                              void *arg);
/* Upkeep: up to max IDs in a handler's hands whose in-hand time is not
 * published yet (marked published now), with how long ago (ms, by now_ms)
 * each was handed out in ages[]. Returns their number. */
size_t emq__inflight_to_publish(emq__inflight *t, int64_t now_ms, emq_id *out,
                                int64_t *ages, size_t max);
/* Upkeep: up to max IDs whose published in-hand time is to go. */
size_t emq__inflight_unpublish_take(emq__inflight *t, emq_id *out, size_t max);
/* Upkeep: ids[0..n) taken by emq__inflight_unpublish_take could not be
 * deleted (a transport failure): queued again. */
void emq__inflight_unpublish_again(emq__inflight *t, const emq_id *ids,
                                   size_t n);
/* When the entry handed out longest ago and not settled was handed out
 * (emq__now_coarse_ms time), 0 when none is. Any thread; O(table). */
int64_t emq__inflight_oldest_handed(emq__inflight *t);
/* Upkeep: of asked[0..nasked), those in owned[] were refreshed at now_ms;
 * those in gone[] were deleted while pending (acknowledged by the refresh;
 * their number in *ngone; a SETTLE_GONE of each is queued to clear its
 * reason and schedule); the others are lost: forgotten if not handed
 * out yet, else marked lost, except entries whose settlement acknowledged
 * them meanwhile. Returns the number lost. */
size_t emq__inflight_refreshed(emq__inflight *t, const emq_id *asked,
                               size_t nasked, const emq_reply *owned,
                               const emq_reply *gone, int64_t now_ms,
                               size_t *ngone);
/* Run thread: id was found deleted while pending by a claim beat (7.0+
 * XAUTOCLAIM drops such entries from every consumer's pending list):
 * forgotten, or marked lost if a handler has it (its settlement is not
 * sent), and a SETTLE_GONE queued to clear its reason and schedule. */
void emq__inflight_gone(emq__inflight *t, const emq_id *id);
/* Run thread: up to max IDs whose retry is due at now_ms and whose
 * uncounted flag is uncounted, taken out of the table (their take puts
 * what is still ours back with its new count). Returns their number. */
size_t emq__inflight_due(emq__inflight *t, int64_t now_ms, int uncounted,
                         emq_id *out, size_t max);
/* Milliseconds until the next retry is due (INT64_MAX: none). Asked
 * before every read: no look through the table until a wait may have
 * ended. */
int64_t emq__inflight_next_due(emq__inflight *t, int64_t now_ms);
/* Forgets entries not handed out yet (IF_READ): after a lost session they
 * come back through recover self. */
void emq__inflight_drop_unstarted(emq__inflight *t);
/* 1 when id is among the entries this process read and dropped without
 * handing out (then it is no longer). Any thread. */
int emq__inflight_was_dropped(emq__inflight *t, const emq_id *id);
/* 1 when id was handed out and let go unsettled (then it is no longer).
 * Any thread. */
int emq__inflight_was_let_go(emq__inflight *t, const emq_id *id);
/* Notes id as let go: its next take raises its count unless it is marked
 * (a take that should have raised it and whose reply was lost). Any
 * thread; forgotten silently when the list cannot grow. */
void emq__inflight_note_let_go(emq__inflight *t, const emq_id *id);
/* Adds ids[0..n) to that list: their take's reply was lost, so whatever
 * count it raised reached no handler (out of memory: some are forgotten,
 * then counted once more). Any thread. */
void emq__inflight_note_dropped(emq__inflight *t, const emq_id *ids, size_t n);
/* Forgets that list and the entries let go (recover self found nothing
 * more of its own: any left were taken by peers). */
void emq__inflight_dropped_forget(emq__inflight *t);
/* Forgets everything (the group is gone, or the loop ended). Queued ops
 * are freed; generation is raised, so a settlement of an entry handed
 * out before can tell it was forgotten from one never handed out. */
void emq__inflight_clear(emq__inflight *t);
/* Entries in the table, and settlements queued. */
size_t emq__inflight_count(emq__inflight *t);
size_t emq__inflight_queued(emq__inflight *t);
/* Marks asked again and not yet taken by the upkeep (a stop waits for
 * them to go, lease held or not: a mark is never wrong to write). */
size_t emq__inflight_remarks(emq__inflight *t);

#endif /* EMQ_CONSUMER_INFLIGHT_H */
