/* SPDX-License-Identifier: BSD-3-Clause */
/* ready.h: pull mode's ready queue: entries read and waiting for
 * emq_consumer_poll, the chunks of replies they share, the in-flight room
 * (ready.c).
 */
#ifndef EMQ_CONSUMER_READY_H
#define EMQ_CONSUMER_READY_H

#include "core.h"

typedef struct emq__chunk emq__chunk;

/* What a lent read leaves (emq__lent_read_fn's *again). */
enum {
    EMQ__LENT_BACK, /* the lender's turn: something else is due, or a
                       failure (it may then have read nothing) */
    EMQ__LENT_OWED, /* lent on: a read is owed, its reply not begun */
    EMQ__LENT_SEND  /* lent on: nothing owed; the next taker sends a read */
};

/* A blocking read of new entries lent to a poller, or to an event loop
 * (emq__ready_lend): run on the taker's thread, it sends the read when
 * none is owed, waits at most max_ms for its reply to begin (0: an event
 * loop's step, which never waits), queues what came (emq__ready_push) and
 * returns the read's status, with *again one of EMQ__LENT_* and, for
 * EMQ__LENT_OWED, *until_ms the time past which a loop's lender reads the
 * reply itself (before the block ends with an empty one, which would
 * wake the loop for nothing; or the reply stalled). */
typedef emq_status (*emq__lent_read_fn)(void *ctx, int64_t max_ms, int *again,
                                        int64_t *until_ms, emq_error *err);

/* One entry handed out by poll: the public entry and what settles it. */
typedef struct handout {
    emq_entry pub; /* first: emq_entry_free casts back */
    emq__chunk *chunk;
    struct emq_consumer *owner; /* whose table holds it (a partition's) */
    unsigned generation;        /* owner's table generation when handed out */
    batch_item item;
} handout;

/* The entries of one read, sharing its reply (refcounted). */
struct emq__chunk {
    atomic_size_t refs; /* entries not yet freed or dropped */
    emq_reply *reply;
    emq_field *fields; /* every entry's field views */
    char *names;       /* stream, group and consumer copies */
    size_t n, cap, nfields;
    handout items[];
};

struct emq__ready {
    pthread_mutex_t mu;
    pthread_cond_t more; /* entries queued, the consumer ended, resume */
    pthread_cond_t room; /* room freed, closing, the consumer ended */
    handout **ring;      /* FIFO of entries to hand out */
    size_t head, n, cap;
    size_t limit;              /* max_in_flight */
    size_t wake_room;          /* room worth waking a reader for: one read */
    struct emq_consumer *root; /* the consumer polled (a topic's parent) */
    int closing, ended, running, fd_set;
    int fd_wanted; /* emq__ready_fd was called: efd follows the queue */
    /* Reads lent to pollers (emq__ready_lend), under mu. */
    pthread_cond_t lent;    /* the lender waits: handed back, a poller left */
    int lend;               /* LEND_NONE, _OFFERED, _TAKEN, _BACK (ready.c) */
    int pollers;            /* pollers asleep waiting for entries */
    int lender_waits_long;  /* the lender sleeps until woken (ready.c) */
    int lender_waits_drain; /* the lender waits for the queue to empty */
    int64_t poller_seen_ms; /* when a poller that may take a lent read
                               (a timeout other than 0) was last here */
    emq__lent_read_fn lend_fn;
    void *lend_ctx;
    /* Lent to an event loop (ready.c): the read connection's socket, in
     * the epoll set while lent (-1: not lent to a loop). */
    int lend_sock;
    int lend_send_due;      /* nothing owed: a step sends the next read */
    int64_t lend_until_ms;  /* the reply owed counts as stalled past it */
    unsigned lend_turns;    /* reads taken so far: one more each take */
    int lender_wake;        /* eventfd: wakes a lender lending to a loop */
    int lender_watching;    /* ... asleep on the socket (ready.c) */
    emq_status lend_status; /* what the lent read returned */
    emq_error lend_err;
    atomic_int room_waiters; /* reading threads waiting for room */
    int efd;  /* eventfd: readable while n > 0 and not paused, or ended
                 (once asked for: fd_wanted), or a step has a read to send */
    int epfd; /* the event descriptor: an epoll set of efd and, while a
                 read is lent to a loop, the read connection's socket */
    emq_status end_status; /* first fatal error of a reading thread */
    emq_error end_err;
};

emq_status emq__ready_new(struct emq_consumer *root, emq__ready **out,
                          emq_error *err);
void emq__ready_free(emq__ready *r);
/* Drops one reference; the last frees the chunk and its reply. */
void emq__chunk_unref(emq__chunk *ch);
/* How many more entries c may read (its topic's total, in pull mode):
 * max_in_flight less those waiting and those handed out and not settled;
 * 0 while paused; SIZE_MAX in run mode (c->ready NULL). */
size_t emq__ready_room(struct emq_consumer *c);
/* Sleeps until there is room, a stop or closing, at most ms. */
void emq__ready_wait_room(struct emq_consumer *c, int64_t ms);
/* Waits until every entry c handed out is settled, or closing, or fatal. */
void emq__ready_wait_settled(struct emq_consumer *c);
/* The event descriptor, which follows the queue from now on (until then
 * nobody watches it, and it is left alone). Any thread. */
int emq__ready_fd(emq__ready *r);
/* Whether a step has something to do now: entries to hand out, the end
 * to report, or a read lent to a loop to send or whose reply is in. Any
 * thread. */
int emq__ready_step_due(emq__ready *r);
/* Wakes every waiter: room may have changed (a resume, a pause); the
 * event descriptor follows (quiet while paused, readable on resume when
 * entries wait). Any thread. */
void emq__ready_notify(emq__ready *r);
/* After a settlement: wakes a reader waiting for room once a whole read
 * fits (or nothing is out). Cheap when no reader waits. */
void emq__ready_settled(emq__ready *r);
/* Queues the chunk's entries (the chunk's references pass to the queue). */
emq_status emq__ready_push(emq__ready *r, emq__chunk *ch, emq_error *err);
/* Hands out up to max entries into out, waiting up to timeout_ms (< 0:
 * without end) for the first. EMQ_ECLOSED once stopped, the first fatal
 * error once a reading thread ended with one. */
emq_status emq__ready_poll(emq__ready *r, emq_entry **out, size_t max,
                           int64_t timeout_ms, size_t *n, emq_error *err);
/* Lends the blocking reads of new entries to the pollers while one waits
 * for entries (or is likely back within a moment: one was polling a
 * moment ago), so an entry that arrives reaches a poller without a wake-up
 * of one thread by another: the poller sends the read, sleeps on the
 * socket and queues what came, on its own thread, and the next poller
 * that finds nothing reads again, while the caller (the reading thread,
 * the only other user of the read connection) waits.
 *
 * With no poller near and the event descriptor asked for (an event
 * loop), the caller sends the read itself and lends it to the loop: sock
 * (the read connection's socket; -1: no loop lending) joins the event
 * descriptor's set, and the step the loop calls when the reply arrives
 * reads it on the loop's thread; the step after the entries were handed
 * out sends the next read. A reply that began, or a read due, that no
 * step took up within a moment (the loop is busy) is taken back, as is a
 * stalled reply, and sock leaves the set before the caller reads again.
 *
 * Returns 0 when nothing was lent (entries wait already, no taker is
 * near, closing, stopping, paused): the caller reads itself. Returns 1
 * once the reads came back: *st (and *err) from the last one when it
 * failed or something else is due, EMQ_OK when no taker came for a moment
 * or the consumer is ending (a read may still be owed: the caller reads
 * its reply first). fn and ctx must stay valid until it returns. */
int emq__ready_lend(emq__ready *r, emq__lent_read_fn fn, void *ctx, int sock,
                    emq_status *st, emq_error *err);
/* Takes c's entries off the queue: at a session's start (they are
 * dropped from the table next and come back through recover self), or
 * with release at the loop's end (handed back with their count undone). */
void emq__ready_purge(struct emq_consumer *c, int release);
/* A reading thread ended with st (its first fatal error is kept). */
void emq__ready_ended(emq__ready *r, emq_status st, const emq_error *err);
/* After close: ready for the reading threads to start again. */
void emq__ready_reset(emq__ready *r);

#endif /* EMQ_CONSUMER_READY_H */
