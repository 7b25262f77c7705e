/* SPDX-License-Identifier: BSD-3-Clause */
/* ready.h: pull mode's ready queue: entries read and waiting for
 * emq_consumer_poll, the chunks of replies they share, the in-flight room
 * (ready.c).
 */
#ifndef EMQ_CONSUMER_READY_H
#define EMQ_CONSUMER_READY_H

#include "core.h"

typedef struct emq__chunk emq__chunk;

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
    atomic_int room_waiters; /* reading threads waiting for room */
    int efd; /* eventfd: readable while n > 0 and not paused, or ended */
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
/* Takes c's entries off the queue: at a session's start (they are
 * dropped from the table next and come back through recover self), or
 * with release at the loop's end (handed back with their count undone). */
void emq__ready_purge(struct emq_consumer *c, int release);
/* A reading thread ended with st (its first fatal error is kept). */
void emq__ready_ended(emq__ready *r, emq_status st, const emq_error *err);
/* After close: ready for the reading threads to start again. */
void emq__ready_reset(emq__ready *r);

#endif /* EMQ_CONSUMER_READY_H */
