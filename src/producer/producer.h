/* SPDX-License-Identifier: BSD-3-Clause */
/* producer.h: internals of the producer layer (XADD, single and batched,
 * synchronous and asynchronous, with a queue's trimming policy).
 *
 * producer.c owns the handle, the head words of every XADD, the checks of
 * a caller's entries and topics (a producer of producers, one per
 * partition). sender.c owns the connection of one queue's producer, which
 * every thread shares: the record queue, whose turn it is to use the
 * connection, the background thread (connects, reconnects, lingers, runs
 * delivery callbacks) and the rounds of pipelined XADDs (and WAIT).
 *
 * Internal header (not installed); the API is in echomq.h.
 */
#ifndef EMQ_PRODUCER_H
#define EMQ_PRODUCER_H

#include "../session/session.h"
#include "../conn/conf.h"

#include <pthread.h>

/* Most words before the entry ID: XADD <stream> NOMKSTREAM MINID ~ <id>
 * LIMIT <n>. */
#define EMQ_PRODUCER_HEAD_MAX 8

typedef struct emq__record emq__record;

/* What a produce call asks of one entry beyond its fields
 * (emq_produce_opts, checked): when it may be handed out (delay_ms and
 * due_ms both 0: at once, else one of them > 0) and its idempotency key
 * (dedup NULL: none; borrowed from the caller, or from a record's copy). */
typedef struct emq__extra {
    int64_t delay_ms;
    int64_t due_ms;
    const char *dedup;
    size_t dedup_len;
    int64_t dedup_ttl_ms;
    int level1; /* priority level + 1 (1..10); 0: none given */
} emq__extra;

/* 1 when x (may be NULL) delays its entry. */
static inline int emq__extra_delays(const emq__extra *x) {
    return x != NULL && (x->delay_ms > 0 || x->due_ms > 0);
}
/* 1 when x (may be NULL) makes its entry the add script's, not an XADD
 * (the queue's own priority record aside: emq__producer_xadd). */
static inline int emq__extra_scripted(const emq__extra *x) {
    return emq__extra_delays(x) ||
           (x != NULL && (x->dedup != NULL || x->level1 > 0));
}

/* The state of a producer's connection (sender.c). */
typedef enum emq__link_state {
    EMQ_LINK_CONNECTING, /* an attempt is under way: calls wait for it */
    EMQ_LINK_UP,         /* connected */
    EMQ_LINK_DOWN        /* the last attempt failed: calls fail at once
                            while the thread tries again with backoff */
} emq__link_state;

/* The shared connection of one queue's producer. Everything below mu is
 * guarded by it; x, argv and argvlen belong to whoever holds the turn
 * (busy), or to the thread while it connects (no turn can be taken then). */
typedef struct emq__sender {
    emq__session x; /* its timeouts within producer.timeout_ms, one
                       attempt per reconnect (the thread spaces them) */
    int opened;     /* x was opened (the first connect worked) */
    int started;    /* emq__sender_start ran */
    pthread_mutex_t mu;
    pthread_cond_t wake; /* the thread's */
    pthread_cond_t idle; /* flush waits here for outstanding == 0 */
    emq__link_state link;
    emq_error down;   /* why the link is not up (EMQ_LINK_DOWN) */
    int fatal;        /* down is for good (a configuration the
                         server refuses): no more attempts */
    unsigned attempt; /* failed connect attempts in a row */
    int64_t next_attempt_ms;
    int busy;                 /* a thread has the turn */
    emq__record *head, *tail; /* queued records, in call order */
    size_t queued_async;      /* async records in the queue */
    size_t queued_waiters;    /* sync and batch records in the queue */
    emq__record *done_head, *done_tail; /* reported, callback not yet run */
    size_t outstanding;                 /* async records not yet called back */
    size_t outstanding_bytes;
    int flushing; /* flush calls waiting: send without linger */
    int quit;
    /* Set by emq__sender_stop: the session's waits end, and a reply
     * overdue by EMQ_SESSION_STOP_GRACE_MS is given up (a destroy is not
     * held by a server that stopped answering). */
    atomic_int closing;
    int thread_started;
    pthread_t thread;
    uint64_t rng;
    int64_t hold_until_ms; /* no async round before (a "not now" reply) */
    unsigned holds;        /* such holds in a row (the backoff's step) */
} emq__sender;

struct emq_producer {
    emq_conf_t *conf; /* own copy; head may point into its strings */
    emq__keys keys;
    emq__delayed_keys delayed; /* where delayed and held entries wait */
    atomic_int prioritized;    /* the queue has a priority record (read at
                                  each connect): every entry is held, at
                                  EMQ_PRIO_DEFAULT when given none */
    const char **argv;         /* scratch argv of one command: an XADD's head
                                  words, ID and field/value pairs, or a delayed
                                  entry's schedule; grown to the largest entry
                                  seen, never shrunk */
    size_t *argvlen;           /* lengths of argv's words */
    size_t argv_cap; /* slots in argv and argvlen; >= EMQ_DELAYED_HEAD */
    const char *head[EMQ_PRODUCER_HEAD_MAX]; /* words every XADD starts */
    size_t headlen[EMQ_PRODUCER_HEAD_MAX];   /* with, and their lengths */
    size_t nhead;
    /* An add call's scratch (EMQ_ADD_BATCH_MAX rows each): its plans,
     * its numbers, and its entries' idempotency key names (each
     * dedup_prefix_len bytes of "emq:{q}:dedup:", then the key). */
    emq__add_plan *plans;
    emq__add_texts *texts;
    emq__add_head_texts add_head;
    char *dedup_prefix; /* "emq:{q}:dedup:" */
    char *dedup_names;  /* the names, one after another */
    size_t dedup_cap;
    size_t dedup_prefix_len;    /* "emq:{q}:dedup:" */
    char threshold[EMQ_ID_MAX]; /* MAXLEN's number as text */
    char limit[24];             /* LIMIT's number as text */
    emq__sender tx; /* a plain queue's connection (unused by a topic) */

    /* A topic (conf partitions > 1): each entry goes to one of the
     * partitions' producers, opened on first use under parts_mu. */
    emq_producer_t **parts; /* nparts slots, NULL until opened */
    size_t nparts;          /* 0 for a plain queue */
    pthread_mutex_t parts_mu;
    _Atomic uint64_t next; /* round-robin cursor for entries without
                              a key */
};

/* ---- sender.c ----------------------------------------------------------- */

/* Sets up p->tx and starts its thread; with producer.connect eager,
 * connects first and fails as emq__route_new would. */
emq_status emq__sender_start(emq_producer_t *p, emq_error *err);
/* Stops the thread: entries not sent are reported EMQ_ECLOSED, callbacks
 * still owed are run (on the calling thread in poll mode); frees. */
void emq__sender_stop(emq_producer_t *p);
/* Adds one entry (w: when, may be NULL) and waits for its outcome
 * (emq_produce). */
emq_status emq__sender_one(emq_producer_t *p, const emq_message *m,
                           const emq__extra *w, emq_id *id, emq_error *err);
/* Adds a batch in windows on the connection, when its turn comes
 * (emq_produce_batch); the messages (and when: n of them, or NULL) are
 * checked. */
emq_status emq__sender_batch(emq_producer_t *p, const emq_message *msgs,
                             const emq__extra *when, size_t n, emq_id *ids,
                             size_t *written, int single, emq_error *err);
/* Queues one entry for the asynchronous path (emq_produce_async; w
 * checked, may be NULL). */
emq_status emq__sender_async(emq_producer_t *p, const emq_message *m,
                             const emq__extra *w, emq_delivery_fn cb,
                             void *opaque, emq_error *err);
/* emq_producer_poll and emq_producer_flush of one queue. */
size_t emq__sender_poll(emq_producer_t *p, int64_t timeout_ms);
emq_status emq__sender_flush(emq_producer_t *p, int64_t timeout_ms,
                             emq_error *err);
/* Async entries not yet called back. */
size_t emq__sender_outstanding(emq_producer_t *p);

/* ---- producer.c: one queue's producer, for produce.c's public calls ------ */

/* Makes the producer of conf: checked, its XADD head built, a queue's
 * sender started (a topic's partitions get producers of their own in
 * produce.c). Free with emq__producer_close. */
emq_status emq__producer_open(const emq_conf_t *conf, emq_producer_t **out,
                              emq_error *err);
/* Stops the sender and frees what emq__producer_open made. */
void emq__producer_close(emq_producer_t *p);

/* One checked message to add, and what its call asks beyond its fields
 * (x may be NULL: none). */
typedef struct emq__entry_ref {
    const emq_message *m;
    const emq__extra *x;
} emq__entry_ref;

/* Fills p's scratch argv (p->argv, p->argvlen) with the command that
 * adds e[0] and, when they go with it, the entries after it (of n):
 * a plain entry is one XADD (*used 1, *scripted 0); an entry that is
 * delayed, keyed or held (or any entry of a queue with priorities) is the
 * add script, which takes the scripted entries that follow it too, up to
 * EMQ_ADD_BATCH_MAX and EMQ_ADD_BATCH_WORDS, those with a level apart
 * from those without (*used of them, *scripted 1: the reply is an array
 * of one element per entry). Sets *argc. The words point into the
 * messages and p until the next call. EMQ_ENOMEM when scratch could not
 * grow. */
emq_status emq__producer_command(emq_producer_t *p, const emq__entry_ref *e,
                                 size_t n, size_t *used, int *scripted,
                                 int *argc, emq_error *err);
/* What an XADD reply means: EMQ_OK with its ID in *id, else *id is "" and
 * EMQ_ESERVER (or the status of the error reply) with the reason (for
 * the nil of NOMKSTREAM on a missing stream, a sentence saying so). */
emq_status emq__producer_xadd_reply(const emq_producer_t *p,
                                    const emq_reply *reply, emq_id *id,
                                    emq_error *err);
/* 1 when every round ends with WAIT or WAITAOF (producer.wait_replicas,
 * producer.wait_aof). */
int emq__producer_durable(const emq_producer_t *p);
/* Fills argv with the WAIT (or WAITAOF) of a durable round, its numbers
 * written into replicas and timeout; returns its word count. */
int emq__producer_wait_words(const emq_producer_t *p, char replicas[24],
                             char timeout[24], const char *argv[4]);
/* What the WAIT reply means: EMQ_OK when the round is as durable as
 * asked, else EMQ_ENOTDURABLE saying how far it got or why the server
 * refused. reply NULL: the WAIT was not run, failed says why. */
emq_status emq__producer_wait_reply(const emq_producer_t *p,
                                    const emq_reply *reply,
                                    const emq_error *failed, emq_error *err);
/* Sets ids[0..n) to "" (ids may be NULL). */
void emq__producer_clear_ids(emq_id *ids, size_t n);
/* Refuses a batch with a malformed message (or when: n of them, or
 * NULL) before anything is sent, so a caller's mistake never leaves a
 * batch half written (single: the error names no entry index). */
emq_status emq__producer_check(const emq_producer_t *p, const emq_message *msgs,
                               const emq__extra *when, size_t n, int single,
                               emq_error *err);
/* Reads opts (the caller's; NULL: none) into *x (borrowing its dedup
 * key; its window from p's dedup.ttl_ms when opts says 0) and, when key
 * is not NULL, its message key into *key and *key_len. EMQ_EINVAL says
 * what is wrong (an unknown version, a number out of range, a delay and
 * a due time, a dedup key's length). */
emq_status emq__producer_opts(const emq_producer_t *p,
                              const emq_produce_opts *opts, emq__extra *x,
                              const char **key, size_t *key_len,
                              emq_error *err);
/* Writes n entries to one queue (p is not a topic's; when: n or NULL):
 * the entry point of every call of a queue's producer and of a topic's
 * partition. */
emq_status emq__producer_queue(emq_producer_t *p, const emq_message *msgs,
                               const emq__extra *when, size_t n, emq_id *ids,
                               size_t *written, int single, emq_error *err);

#endif /* EMQ_PRODUCER_H */
