/* SPDX-License-Identifier: BSD-3-Clause */
/* sender.c: the connection of one queue's producer, shared by threads.
 *
 * Every call becomes a record in one queue, in call order: a single entry
 * (emq_produce: fields copied, a waiting caller), an asynchronous entry
 * (emq_produce_async: fields copied, a callback) or a batch (the caller's
 * own messages; the caller does its I/O itself when its turn comes). One
 * thread at a time has the turn (busy) and with it the route:
 *
 *   - A caller of emq_produce that finds the connection free takes the
 *     turn and sends a round: up to producer.window queued records (its
 *     own and those queued by other threads meanwhile) as pipelined XADDs,
 *     then reads their replies and completes each record; it stops once
 *     its own record is complete and hands the turn on (to the caller at
 *     the head of the queue, or to the thread). Threads that call together
 *     share round trips instead of queueing for a lock held over one each.
 *   - A batch waits for the head of the queue, then writes itself in
 *     windows with the turn held.
 *   - The background thread takes the turn for asynchronous entries once
 *     the oldest has lingered producer.linger_ms (at once when a flush
 *     waits or a window is full), and runs delivery callbacks (thread
 *     mode); it also connects, and reconnects after a transport failure,
 *     with the reconnect backoff (conn/backoff.c).
 *
 * The link: CONNECTING (calls wait for the attempt, up to their
 * deadline), UP, or DOWN (the last attempt failed: calls fail at once
 * with its error, retriable, until an attempt succeeds). A record a
 * caller gave up on (its deadline passed) after it was sent is left to
 * whoever completes it, so no thread ever writes to memory of a call that
 * returned.
 *
 * With producer.wait_replicas or wait_aof every round ends with WAIT (or
 * WAITAOF) on the same connection: the server answers it once the round's
 * writes reached that many replicas (or the AOF), or at the timeout with
 * how many did; short of the number, the round's entries are
 * EMQ_ENOTDURABLE (added, IDs set).
 */
#include "producer.h"

#include <errno.h>
#include <sched.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

/* The hold after a "not now" reply: doubling from 20 ms to 1 s. */
#define HOLD_MIN_MS 20
#define HOLD_MAX_MS 1000

typedef enum rec_kind { REC_ONE, REC_ASYNC, REC_BATCH } rec_kind;
typedef enum rec_state { REC_QUEUED, REC_TAKEN, REC_DONE } rec_state;

struct emq__record {
    emq__record *next;
    rec_kind kind;
    rec_state state;
    int abandoned;     /* REC_ONE: its caller returned; whoever
                          completes it frees it */
    int unknown;       /* the outcome is unknown */
    int again;         /* the server said "not now" (LOADING, ...): not
                          added, may be sent again */
    unsigned attempts; /* times sent */
    int span;          /* in a round: the records its command carries
                          (1 for an XADD, up to EMQ_ADD_BATCH_MAX for an
                          add call), 0 for one carried by an earlier
                          record's command */
    int scripted;      /* in a round: its command is the add call (an
                          array reply, one element per record) */
    int64_t deadline_ms;
    int64_t queued_ms;
    size_t bytes;    /* field bytes (the async queue's bound) */
    emq_message msg; /* REC_ONE, REC_ASYNC: into the copy below */
    emq__extra when; /* its delay and idempotency key (a copy of the key
                        follows the record's other bytes) */
    emq_status st;
    emq_id id;
    emq_error *err;     /* set with st != EMQ_OK */
    pthread_cond_t cv;  /* REC_ONE, REC_BATCH: its caller waits here */
    atomic_int pinned;  /* REC_ONE: done, and its caller not woken yet (a
                           leader wakes it after letting go of mu); the
                           caller frees it only once this is 0 */
    emq_delivery_fn cb; /* REC_ASYNC */
    void *opaque;
};

/* Condition variables of this file wait on the monotonic clock, as
 * emq__now_ms counts. */
static void cond_init(pthread_cond_t *cv) {
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(cv, &attr);
    pthread_condattr_destroy(&attr);
}

/* The one error a record keeps when its own could not be allocated. */
static emq_error oom_error = {.code = EMQ_ENOMEM, .message = "out of memory"};

/* ---- records ------------------------------------------------------------ */

/* Bytes a record for m needs. */
static size_t record_size(const emq_message *m, size_t *bytes) {
    *bytes = 0;
    for (size_t i = 0; i < m->nfields; i++)
        *bytes += m->fields[i].name_len + m->fields[i].value_len;
    size_t idlen = m->id ? strlen(m->id) + 1 : 0;
    return sizeof(emq__record) + m->nfields * sizeof(emq_field) + *bytes +
           idlen;
}

/* Fills the record at r (size bytes from record_size) with a copy of m. */
static emq__record *record_fill(emq__record *r, rec_kind kind,
                                const emq_message *m, size_t bytes) {
    memset(r, 0, sizeof *r);
    r->kind = kind;
    r->bytes = bytes;
    emq_field *f = (emq_field *)(r + 1);
    char *at = (char *)(f + m->nfields);
    for (size_t i = 0; i < m->nfields; i++) {
        f[i].name = at;
        f[i].name_len = m->fields[i].name_len;
        if (f[i].name_len)
            memcpy(at, m->fields[i].name, f[i].name_len);
        at += f[i].name_len;
        f[i].value = at;
        f[i].value_len = m->fields[i].value_len;
        if (f[i].value_len)
            memcpy(at, m->fields[i].value, f[i].value_len);
        at += f[i].value_len;
    }
    r->msg.fields = f;
    r->msg.nfields = m->nfields;
    if (m->id) {
        memcpy(at, m->id, strlen(m->id) + 1);
        r->msg.id = at;
    }
    if (kind != REC_ASYNC)
        cond_init(&r->cv);
    return r;
}

/* A record holding a copy of m (fields, names, values and explicit ID in
 * one allocation). NULL when out of memory. */
static emq__record *record_new(rec_kind kind, const emq_message *m,
                               const emq__extra *x) {
    size_t bytes, dedup = x && x->dedup ? x->dedup_len : 0;
    size_t size = record_size(m, &bytes);
    emq__record *r = emq__alloc(size + dedup);
    if (r == NULL)
        return NULL;
    record_fill(r, kind, m, bytes);
    if (x) {
        r->when = *x;
        if (dedup) { /* the key's copy after the record's own bytes */
            char *at = (char *)r + size;
            memcpy(at, x->dedup, dedup);
            r->when.dedup = at;
        }
    }
    return r;
}

static void record_free(emq__record *r) {
    if (r == NULL)
        return;
    if (r->err != &oom_error)
        emq__free(r->err);
    if (r->kind != REC_ASYNC)
        pthread_cond_destroy(&r->cv);
    emq__free(r);
}

/* Sets r's outcome (err NULL with EMQ_OK). */
static void record_fail(emq__record *r, emq_status st, const emq_error *err) {
    r->st = st;
    r->id.str[0] = '\0';
    if (r->err == NULL) {
        r->err = emq__alloc(sizeof *r->err);
        if (r->err == NULL)
            r->err = &oom_error;
    }
    if (r->err != &oom_error)
        *r->err = *err;
}

static void enqueue(emq__sender *s, emq__record *r) {
    r->next = NULL;
    r->state = REC_QUEUED;
    if (s->tail)
        s->tail->next = r;
    else
        s->head = r;
    s->tail = r;
    if (r->kind == REC_ASYNC)
        s->queued_async++;
    else
        s->queued_waiters++;
}

static void enqueue_front(emq__sender *s, emq__record *r) {
    r->state = REC_QUEUED;
    r->next = s->head;
    s->head = r;
    if (s->tail == NULL)
        s->tail = r;
    if (r->kind == REC_ASYNC)
        s->queued_async++;
    else
        s->queued_waiters++;
}

/* Unlinks a queued record. */
static void dequeue(emq__sender *s, emq__record *r) {
    emq__record **pp = &s->head, *prev = NULL;
    while (*pp && *pp != r) {
        prev = *pp;
        pp = &(*pp)->next;
    }
    if (*pp == NULL)
        return;
    *pp = r->next;
    if (s->tail == r)
        s->tail = prev;
    r->next = NULL;
    if (r->kind == REC_ASYNC)
        s->queued_async--;
    else
        s->queued_waiters--;
}

/* A record has its outcome (mu held): a waiting caller is woken (or the
 * record freed when its caller left); an async one goes to the done list
 * for its callback. */
static void complete(emq__sender *s, emq__record *r) {
    r->state = REC_DONE;
    if (r->kind == REC_ASYNC) {
        r->next = NULL;
        if (s->done_tail)
            s->done_tail->next = r;
        else
            s->done_head = r;
        s->done_tail = r;
        pthread_cond_signal(&s->wake);
        pthread_cond_broadcast(&s->idle); /* a poll may wait there */
    } else if (r->abandoned) {
        record_free(r);
    } else {
        pthread_cond_signal(&r->cv);
    }
}

/* ---- the wire ----------------------------------------------------------- */

/* The tag of the WAIT that ends a durable round; an XADD's tag is its
 * record's index in the round. */
#define TAG_WAIT (-1)

/* One round of records on the wire: their XADDs (and the WAIT). Every
 * call that writes (a single entry, an asynchronous one, a window of a
 * batch) goes out in rounds. */
typedef struct round {
    emq_producer_t *p;
    emq__record **recs;
    size_t m;        /* records taken */
    size_t appended; /* of them, appended (the rest failed: not sent) */
    size_t read;     /* of the appended, with their reply read */
    int want_wait, waiting, wait_read;
    emq_status wait_st;
    emq_error wait_err;
} round;

/* Appends the round's XADDs and its WAIT to the session (without mu, with
 * the turn); a record that could not be appended is known not added. */
static void round_append(emq_producer_t *p, round *r) {
    emq__session *x = &p->tx.x;
    emq_error one;
    emq_status ast = EMQ_OK;
    r->p = p;
    r->read = 0;
    emq__entry_ref refs[EMQ_ADD_BATCH_MAX];
    for (r->appended = 0; r->appended < r->m;) {
        size_t left = r->m - r->appended, n = 0;
        for (; n < left && n < EMQ_ADD_BATCH_MAX; n++) {
            emq__record *rec = r->recs[r->appended + n];
            refs[n] = (emq__entry_ref){&rec->msg, &rec->when};
        }
        int argc, scripted;
        size_t used;
        ast = emq__producer_command(p, refs, n, &used, &scripted, &argc, &one);
        if (ast == EMQ_OK)
            ast = emq__session_append(x, (int)r->appended, argc, p->argv,
                                      p->argvlen, &one);
        if (ast != EMQ_OK)
            break;
        for (size_t k = 0; k < used; k++) {
            emq__record *rec = r->recs[r->appended + k];
            rec->span = k == 0 ? (int)used : 0;
            rec->scripted = scripted;
            rec->attempts++;
        }
        r->appended += used;
    }
    for (size_t i = r->appended; i < r->m; i++)
        record_fail(r->recs[i], ast, &one);
    /* The WAIT: added entries are durable only when it says so. */
    r->want_wait = r->appended > 0 && ast == EMQ_OK && emq__producer_durable(p);
    r->waiting = r->wait_read = 0;
    r->wait_st = r->want_wait ? EMQ_ENOTDURABLE : EMQ_OK;
    emq__error_clear(&r->wait_err);
    if (r->want_wait) {
        char replicas[24], timeout[24];
        const char *argv[4];
        int argc = emq__producer_wait_words(p, replicas, timeout, argv);
        if (emq__session_append(x, TAG_WAIT, argc, argv, NULL, &r->wait_err) ==
            EMQ_OK)
            r->waiting = 1;
        else
            emq__error_prefix(&r->wait_err, "added, but WAIT was not sent");
    }
}

/* Marks n of the round's records from i on unknown. */
static void round_unknown_from(round *r, size_t i, size_t n, emq_status st,
                               const emq_error *why) {
    for (size_t k = i; k < i + n && k < r->appended; k++) {
        record_fail(r->recs[k], st, why);
        r->recs[k]->unknown = 1;
    }
}

/* Marks the round's appended records from i on unknown (a transport
 * failure before their replies). */
static void round_unknown(round *r, size_t i, emq_status st,
                          const emq_error *why) {
    if (i < r->appended)
        round_unknown_from(r, i, r->appended - i, st, why);
}

/* The outcome of one command of a round (emq__session_drain_n). A
 * command the server did not run (READONLY, or a route's bound on a "not
 * now" reply: reply NULL) or answered "not now" may go again. */
static emq_status round_apply(void *ctx, int tag, const emq_reply *reply,
                              emq_error *err) {
    round *r = ctx;
    if (tag == TAG_WAIT) {
        r->wait_read = 1;
        r->wait_st = emq__producer_wait_reply(r->p, reply, err, &r->wait_err);
        return EMQ_OK;
    }
    size_t span = (size_t)r->recs[tag]->span;
    int scripted = r->recs[tag]->scripted;
    r->read = (size_t)tag + span;
    /* An add call answers an array of one element per record; an error
     * (or nothing: not run) instead is every record's. */
    int each = scripted && reply != NULL &&
               emq_reply_kind(reply) == EMQ_REPLY_ARRAY;
    if (each && emq_reply_len(reply) != span) {
        emq_error bad;
        emq__reply_bad_shape(&bad, "the add script's reply");
        emq__error_prefix(&bad, "the entry may or may not have been added");
        round_unknown_from(r, (size_t)tag, span, bad.code, &bad);
        return EMQ_OK;
    }
    for (size_t k = 0; k < span; k++) {
        emq__record *rec = r->recs[(size_t)tag + k];
        if (reply == NULL) {
            record_fail(rec, err->code, err);
            rec->again = err->retriable;
            continue;
        }
        const emq_reply *one_reply = each ? emq_reply_at(reply, k) : reply;
        emq_error one;
        emq_status st =
            emq__producer_xadd_reply(r->p, one_reply, &rec->id, &one);
        rec->st = st;
        if (st != EMQ_OK) {
            record_fail(rec, st, &one);
            rec->again = emq__reply_not_now(one_reply, 0);
        }
    }
    return EMQ_OK;
}

/* Reads the round's replies and sets each record's outcome (without mu,
 * with the turn). Returns EMQ_OK, or the failure after which the session
 * must reconnect: a transport failure (records from the failed reply on
 * are then unknown) or a READONLY (every reply was read). */
static emq_status round_read(emq_producer_t *p, round *r, emq_error *err) {
    size_t n = r->appended + (size_t)r->waiting;
    emq_status st = emq__session_drain_n(&p->tx.x, n, EMQ_SESSION_EACH,
                                         round_apply, r, err);
    if (st != EMQ_OK && r->read < r->appended) {
        emq_error why = *err;
        emq__error_prefix(&why, "the entry may or may not have been added");
        round_unknown(r, r->read, st, &why);
        *err = why;
    }
    if (st != EMQ_OK && r->waiting && !r->wait_read) /* the IDs are known */
        emq__error_set(&r->wait_err, EMQ_ENOTDURABLE, 1,
                       "added, but the connection failed before WAIT "
                       "answered: %s",
                       err->message);
    if (r->wait_st != EMQ_OK || (r->waiting && !r->wait_read))
        for (size_t i = 0; i < r->appended; i++)
            if (r->recs[i]->st == EMQ_OK && !r->recs[i]->unknown) {
                emq_id id = r->recs[i]->id;
                record_fail(r->recs[i], EMQ_ENOTDURABLE, &r->wait_err);
                r->recs[i]->id = id;
            }
    return st;
}

/* ---- the link ----------------------------------------------------------- */

static void fail_queued_waiters(emq__sender *s, emq_status st,
                                const emq_error *why);

/* A transport failure broke the route (mu held, turn held): the thread
 * reconnects at once; callers queued for a turn fail now (their turn was
 * behind the broken round). */
static void link_broke(emq_producer_t *p, const emq_error *why) {
    emq__sender *s = &p->tx;
    /* Not DOWN: no attempt has failed yet, and the thread makes one at
     * once. A call meanwhile waits for it (calls fail at once only while
     * the last attempt failed), so a call right after a cut is sent on
     * the new connection instead of failing. */
    s->link = EMQ_LINK_CONNECTING;
    s->down = *why;
    s->down.retriable = 1;
    s->next_attempt_ms = emq__now_ms();
    s->attempt = 0;
    emq__conf_log(p->conf, EMQ_LOG_WARNING,
                  "producer of '%s': connection lost (%s); reconnecting in "
                  "the background",
                  p->keys.stream, why->message);
    fail_queued_waiters(s, why->code, why);
    pthread_cond_signal(&s->wake);
}

/* Fails every queued single entry and batch (mu held): not sent. */
static void fail_queued_waiters(emq__sender *s, emq_status st,
                                const emq_error *why) {
    emq__record *r = s->head;
    while (r) {
        emq__record *next = r->next;
        if (r->kind != REC_ASYNC) {
            dequeue(s, r);
            record_fail(r, st, why);
            complete(s, r);
        }
        r = next;
    }
}

/* Reads whether the queue has priorities (its record) into
 * p->prioritized, at each connect. A refusal (a producer's ACL without
 * GET there) leaves it as it was: such a producer adds plain entries. */
static emq_status learn_priorities(emq_producer_t *p, emq_error *err) {
    const char *get[] = {"GET", p->delayed.prio};
    emq_reply *reply = NULL;
    emq_status st = emq__session_call(&p->tx.x, 0, 2, get, NULL, &reply, err);
    if (st != EMQ_OK)
        return st;
    if (emq_reply_kind(reply) != EMQ_REPLY_ERROR)
        atomic_store(&p->prioritized,
                     emq_reply_kind(reply) == EMQ_REPLY_STRING);
    emq_reply_free(reply);
    return EMQ_OK;
}

/* One connect attempt, without mu (no turn can be taken: the link is not
 * up). */
static emq_status connect_once(emq_producer_t *p, emq_error *err) {
    emq__sender *s = &p->tx;
    emq_status st;
    if (!s->opened) {
        /* One attempt per call, its waits within one call's bound: the
         * thread spaces the attempts and logs them itself. */
        emq__session_opts o = {
            .what = "producer",
            .max_attempts = 1,
            .timeout_ms = emq__cfg_producer_timeout_ms(p->conf),
            .stop = {&s->closing, NULL},
        };
        st = emq__session_open(&s->x, p->conf, p->keys.stream, &o, err);
        s->opened = st == EMQ_OK;
    } else {
        st = emq__session_reconnect(&s->x, err);
    }
    if (st != EMQ_OK)
        return st;
    emq_server server;
    if (emq__cfg_producer_wait_aof(p->conf) &&
        emq__route_server(s->x.route, &server) &&
        !(server.capabilities & EMQ_CAP_WAITAOF))
        return emq__error_set(err, EMQ_EINVAL, 0,
                              "producer.wait_aof needs WAITAOF (Redis 7.2 or "
                              "later, Valkey); the server is %s %s",
                              server.name, server.version);
    /* A topic's partition records its count, or refuses another. */
    st = emq__topic_claim(s->x.route, p->conf, err);
    if (st == EMQ_OK)
        st = learn_priorities(p, err);
    return st;
}

/* Applies an attempt's outcome (mu held). */
static void attempt_done(emq_producer_t *p, emq_status st,
                         const emq_error *err) {
    emq__sender *s = &p->tx;
    if (st == EMQ_OK) {
        if (s->attempt > 0)
            emq__conf_log(p->conf, EMQ_LOG_INFO,
                          "producer of '%s': connected again", p->keys.stream);
        s->link = EMQ_LINK_UP;
        s->attempt = 0;
        emq__error_clear(&s->down);
    } else {
        s->link = EMQ_LINK_DOWN;
        s->down = *err;
        s->fatal = st == EMQ_EINVAL;
        s->down.fatal = (unsigned)s->fatal; /* every later call fails */
        if (!s->fatal)
            s->down.retriable = 1;
        s->next_attempt_ms =
            emq__now_ms() + emq__backoff_delay(emq__cfg_backoff_min_ms(p->conf),
                                               emq__cfg_backoff_max_ms(p->conf),
                                               s->attempt, &s->rng);
        s->attempt++;
        fail_queued_waiters(s, s->down.code, &s->down);
        if (s->fatal) /* no attempt will help: async entries fail too */
            for (emq__record *r = s->head; r; r = s->head) {
                dequeue(s, r);
                record_fail(r, s->down.code, &s->down);
                complete(s, r);
            }
    }
    /* Waiters of CONNECTING look again; a free turn goes on. */
    for (emq__record *r = s->head; r; r = r->next)
        if (r->kind != REC_ASYNC)
            pthread_cond_signal(&r->cv);
    pthread_cond_broadcast(&s->idle);
}

/* The error of a call made while the link is down (mu held). */
static emq_status down_error(const emq_producer_t *p, emq_error *err) {
    const emq__sender *s = &p->tx;
    if (s->fatal) {
        if (err)
            *err = s->down;
        return s->down.code;
    }
    return emq__error_set(err, s->down.code ? s->down.code : EMQ_EIO, 1,
                          "not connected (reconnecting in the background; "
                          "the entry was not sent): %s",
                          s->down.message);
}

/* ---- turns -------------------------------------------------------------- */

/* Hands the free turn on (mu held): to the caller at the head of the
 * queue, or to the thread for asynchronous entries. */
static void pass_turn(emq__sender *s) {
    if (s->link != EMQ_LINK_UP)
        pthread_cond_signal(&s->wake); /* the thread reconnects */
    if (s->head == NULL)
        return;
    if (s->head->kind == REC_ASYNC)
        pthread_cond_signal(&s->wake);
    else
        pthread_cond_signal(&s->head->cv);
}

/* Rounds a caller that has its own result sends on for the records queued
 * meanwhile before it hands the turn on: waking the next caller costs a
 * context switch during which the connection would stand idle. */
#define LEAD_EXTRA 4

/* Takes up to window queued records into r (mu held). */
static void round_take(emq__sender *s, round *r, size_t window) {
    r->m = 0;
    while (r->m < window && s->head && s->head->kind != REC_BATCH) {
        emq__record *rec = s->head;
        dequeue(s, rec);
        rec->state = REC_TAKEN;
        r->recs[r->m++] = rec;
    }
}

/* Into err: a single entry the server refused unrun ("not now") until
 * its deadline passed, the last refusal being reason. Its status
 * (EMQ_ETIMEDOUT) does not depend on whether that refusal came before the
 * deadline or after it. */
static emq_status not_run_error(const emq_producer_t *p,
                                const emq_error *reason, emq_error *err) {
    return emq__error_set(err, EMQ_ETIMEDOUT, 1,
                          "the entry was not added within %lld ms "
                          "(producer.timeout_ms): the server did not run "
                          "it: %s",
                          (long long)emq__cfg_producer_timeout_ms(p->conf),
                          reason->message);
}

/* Wakes the callers of the records on list (linked by next), done by
 * round_finish, and unpins them: with mu let go, so that a caller woken
 * does not wait at once for the mutex its waker holds. */
static void wake_done(emq__record *list) {
    while (list != NULL) {
        emq__record *r = list;
        list = r->next; /* r may be freed once unpinned */
        pthread_cond_signal(&r->cv);
        atomic_store_explicit(&r->pinned, 0, memory_order_release);
    }
}

/* Completes a read round's records (mu held): an async record whose
 * outcome is unknown goes back to the queue's front while
 * producer.retries allows; a single or async record the server did not
 * run ("not now": a restarted server still LOADING its data, ...; or
 * READONLY) goes back while its deadline allows, the next round held
 * back a growing moment; the others get their outcome. */
static void round_finish(emq_producer_t *p, round *r, emq__record **wake) {
    emq__sender *s = &p->tx;
    int held = 0, added = 0;
    for (size_t i = r->m; i-- > 0;) {
        emq__record *rec = r->recs[i];
        added |= rec->st == EMQ_OK;
        if (rec->again && rec->kind != REC_BATCH && !rec->abandoned) {
            rec->again = 0;
            if (emq__now_ms() < rec->deadline_ms) {
                rec->attempts--; /* refused unrun: no duplicate to fear */
                rec->st = EMQ_OK;
                enqueue_front(s, rec);
                held = 1;
                continue;
            }
            /* A single call whose refusal came after its deadline ends
             * as one whose deadline passed first: a timeout that says
             * why (an asynchronous entry gets the server's reply either
             * way, docs/PRODUCER.md). */
            if (rec->kind == REC_ONE) {
                emq_error timed_out;
                not_run_error(p, rec->err, &timed_out);
                record_fail(rec, EMQ_ETIMEDOUT, &timed_out);
            }
        }
        if (rec->unknown && rec->kind == REC_ASYNC &&
            rec->attempts <= (unsigned)emq__cfg_producer_retries(p->conf) &&
            emq__now_ms() < rec->deadline_ms) {
            /* Sent again after the reconnect, first in the queue. */
            rec->unknown = 0;
            enqueue_front(s, rec);
            continue;
        }
        if (rec->kind == REC_ONE && !rec->abandoned) {
            /* Its caller is woken by wake_done, once mu is let go. */
            rec->state = REC_DONE;
            atomic_store_explicit(&rec->pinned, 1, memory_order_relaxed);
            rec->next = *wake;
            *wake = rec;
            continue;
        }
        complete(s, rec);
    }
    r->m = 0;
    if (held)
        s->hold_until_ms =
            emq__now_ms() +
            emq__backoff_delay(HOLD_MIN_MS, HOLD_MAX_MS, s->holds++, &s->rng);
    else if (added)
        s->holds = 0;
}

/* Takes the turn and sends rounds of queued records (mu held on entry and
 * exit), until the queue is empty, a batch is at its head, mine (when not
 * NULL) is complete, or (mine NULL: the thread) no whole window waits any
 * more, at most 8 rounds; then hands the turn on. */
static void lead(emq_producer_t *p, emq__record *mine) {
    emq__sender *s = &p->tx;
    size_t window = (size_t)emq__cfg_producer_window(p->conf);
    emq__record *stack[2][64];
    emq__record **mem = NULL;
    round rounds_[2] = {{.recs = stack[0]}, {.recs = stack[1]}};
    if (window > 64 && (mem = emq__alloc(2 * window * sizeof *mem)) != NULL) {
        rounds_[0].recs = mem;
        rounds_[1].recs = mem + window;
    } else if (window > 64) {
        window = 64;
    }
    round *cur = &rounds_[0], *nxt = &rounds_[1];
    emq__record *wake = NULL; /* done, their callers to be woken */
    s->busy = 1;
    int rounds = 0, extra = 0;
    /* A connection that went away while idle (a server restart) or whose
     * server was demoted is replaced before anything is sent on it. */
    if (s->link == EMQ_LINK_UP) {
        emq_error gone;
        pthread_mutex_unlock(&s->mu);
        emq_status st = emq__session_ready(&s->x, &gone);
        pthread_mutex_lock(&s->mu);
        if (st != EMQ_OK) {
            emq__error_prefix(&gone, "not sent");
            link_broke(p, &gone);
        }
    }
    /* Two rounds on the wire: the next is appended (and sent with the
     * first read) before the current one's replies are read, so the server
     * works on it while this thread parses and completes. */
    if (s->link == EMQ_LINK_UP)
        round_take(s, cur, window);
    if (cur->m > 0) {
        pthread_mutex_unlock(&s->mu);
        round_append(p, cur);
        pthread_mutex_lock(&s->mu);
    }
    while (cur->m > 0) {
        rounds++;
        int more = s->link == EMQ_LINK_UP && s->head &&
                   s->head->kind != REC_BATCH &&
                   emq__now_ms() >= s->hold_until_ms &&
                   (mine ? !(mine->state == REC_DONE && extra++ >= LEAD_EXTRA)
                         : rounds < 8 && s->queued_async >= window);
        nxt->m = 0;
        if (more)
            round_take(s, nxt, window);
        pthread_mutex_unlock(&s->mu);
        if (nxt->m > 0)
            round_append(p, nxt);
        wake_done(wake); /* while the server works on the rounds sent */
        wake = NULL;
        emq_error err;
        emq_status st = round_read(p, cur, &err);
        if (st != EMQ_OK && emq__session_pending(&s->x) > 0) {
            emq_error next_err; /* READONLY: the link is in step */
            round_read(p, nxt, &next_err);
        } else if (st != EMQ_OK) { /* its replies went with the link */
            round_unknown(nxt, 0, st, &err);
        }
        pthread_mutex_lock(&s->mu);
        round_finish(p, cur, &wake);
        if (st != EMQ_OK) {
            round_finish(p, nxt, &wake);
            link_broke(p, &err);
        }
        round *t = cur;
        cur = nxt;
        nxt = t;
    }
    s->busy = 0;
    emq__free(mem);
    pass_turn(s);
    if (wake != NULL) {
        pthread_mutex_unlock(&s->mu);
        wake_done(wake);
        pthread_mutex_lock(&s->mu);
    }
}

/* Waits on cv until deadline_ms (-1: no bound). */
static void wait_until(pthread_cond_t *cv, pthread_mutex_t *mu,
                       int64_t deadline_ms) {
    if (deadline_ms < 0) {
        pthread_cond_wait(cv, mu);
        return;
    }
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    int64_t left = deadline_ms - emq__now_ms();
    if (left <= 0)
        return;
    ts.tv_sec += left / 1000;
    ts.tv_nsec += (left % 1000) * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    pthread_cond_timedwait(cv, mu, &ts);
}

emq_status emq__sender_one(emq_producer_t *p, const emq_message *m,
                           const emq__extra *w, emq_id *id, emq_error *err) {
    emq__sender *s = &p->tx;
    if (id)
        id->str[0] = '\0';
    emq__record *r = record_new(REC_ONE, m, w);
    if (r == NULL)
        return emq__oom(err);
    int64_t timeout = emq__cfg_producer_timeout_ms(p->conf);
    r->deadline_ms = emq__now_ms() + timeout;
    pthread_mutex_lock(&s->mu);
    if (s->link == EMQ_LINK_DOWN) {
        emq_status st = down_error(p, err);
        pthread_mutex_unlock(&s->mu);
        record_free(r);
        return st;
    }
    enqueue(s, r);
    for (;;) {
        if (r->state == REC_DONE)
            break;
        /* After a "not now" reply, the next round waits a moment. */
        int held = emq__now_ms() < s->hold_until_ms;
        if (r->state == REC_QUEUED && s->link == EMQ_LINK_UP && !s->busy &&
            !held) {
            if (s->head->kind != REC_BATCH) {
                lead(p, r);
                continue;
            }
            pass_turn(s); /* the batch ahead goes first */
        }
        if (emq__now_ms() >= r->deadline_ms) {
            emq_status st;
            if (r->state == REC_QUEUED && r->err != NULL) { /* not run */
                dequeue(s, r);
                pass_turn(s);
                st = not_run_error(p, r->err, err);
                record_free(r);
            } else if (r->state == REC_QUEUED) {
                dequeue(s, r);
                pass_turn(s);
                st = emq__error_set(err, EMQ_ETIMEDOUT, 1,
                                    "the entry was not sent within %lld ms "
                                    "(producer.timeout_ms): %s",
                                    (long long)timeout,
                                    s->link == EMQ_LINK_CONNECTING
                                        ? "still connecting"
                                        : "the connection was busy");
                record_free(r);
            } else { /* sent: whoever completes it frees it */
                r->abandoned = 1;
                st = emq__error_set(err, EMQ_ETIMEDOUT, 1,
                                    "no reply within %lld ms "
                                    "(producer.timeout_ms): the entry may "
                                    "or may not have been added",
                                    (long long)timeout);
            }
            pthread_mutex_unlock(&s->mu);
            return st;
        }
        wait_until(&r->cv, &s->mu,
                   held && s->hold_until_ms < r->deadline_ms ? s->hold_until_ms
                                                             : r->deadline_ms);
    }
    pthread_mutex_unlock(&s->mu);
    /* Done, and (rarely) seen so before its leader's wake_done: the
     * leader is between letting go of mu and the signal. */
    while (atomic_load_explicit(&r->pinned, memory_order_acquire))
        sched_yield();
    emq_status st = r->st;
    if (st == EMQ_OK || st == EMQ_ENOTDURABLE) {
        if (id)
            *id = r->id;
    }
    if (st == EMQ_OK)
        emq__error_clear(err);
    else if (err)
        *err = *r->err;
    record_free(r);
    return st;
}

/* Sets ids[from..n) to "" (ids may be NULL). */
static void clear_ids(emq_id *ids, size_t from, size_t n) {
    if (ids)
        for (size_t i = from; i < n; i++)
            ids[i].str[0] = '\0';
}

/* The records of one window of a batch: each refers to the caller's
 * message (no copy); their errors are freed by batch_slots_free. */
typedef struct batch_slots {
    emq__record *recs;
    emq__record **ptrs;
    size_t cap;
} batch_slots;

static void batch_slots_free(batch_slots *b) {
    for (size_t i = 0; i < b->cap; i++)
        if (b->recs[i].err != &oom_error)
            emq__free(b->recs[i].err);
    emq__free(b->recs);
    emq__free(b->ptrs);
}

/* Writes a batch as a run of rounds of producer.window entries, with the
 * turn held (without mu). The first refusal is returned, naming its entry
 * (a refusal outranks a shortfall of durability); server refusals do not
 * stop the batch; a failure of the link does, *broke saying why. */
static emq_status write_batch(emq_producer_t *p, const emq_message *msgs,
                              const emq__extra *when, size_t n, emq_id *ids,
                              size_t *written, int single, int64_t deadline_ms,
                              emq_error *err, emq_error *broke) {
    size_t ok = 0, done = 0;
    size_t window = (size_t)emq__cfg_producer_window(p->conf);
    batch_slots b = {.cap = n < window ? n : window};
    emq_status first = EMQ_OK;
    emq_error first_err;
    emq__error_clear(&first_err);
    emq__error_clear(broke);
    b.recs = emq__calloc(b.cap, sizeof *b.recs);
    b.ptrs = emq__calloc(b.cap, sizeof *b.ptrs);
    if (b.recs == NULL || b.ptrs == NULL) {
        emq__free(b.recs);
        emq__free(b.ptrs);
        clear_ids(ids, 0, n);
        return emq__oom(err);
    }
    int stop = 0;
    while (done < n && !stop) {
        if (done > 0 && emq__now_ms() >= deadline_ms) {
            clear_ids(ids, done, n);
            *written = ok;
            batch_slots_free(&b);
            return emq__error_set(
                err, EMQ_ETIMEDOUT, 1,
                "%zu of %zu entries added within %lld ms "
                "(producer.timeout_ms); entries from index "
                "%zu on were not sent",
                ok, n, (long long)emq__cfg_producer_timeout_ms(p->conf), done);
        }
        round r = {.recs = b.ptrs, .m = n - done < window ? n - done : window};
        for (size_t j = 0; j < r.m; j++) { /* what a round reads */
            emq__record *rec = &b.recs[j];
            rec->kind = REC_BATCH;
            rec->unknown = rec->again = 0;
            rec->attempts = 0;
            rec->st = EMQ_OK;
            rec->msg = msgs[done + j];
            if (when)
                rec->when = when[done + j];
            b.ptrs[j] = rec;
        }
        round_append(p, &r);
        emq_status rs = round_read(p, &r, broke);
        if (rs == EMQ_OK)
            emq__error_clear(broke);
        for (size_t j = 0; j < r.m && !stop; j++) {
            const emq__record *rec = &b.recs[j];
            size_t i = done + j;
            if (rec->unknown) { /* its outcome went with the link */
                clear_ids(ids, i, n);
                *written = ok;
                batch_slots_free(&b);
                if (single)
                    return emq__error_set(err, rs, broke->retriable,
                                          "the entry may or may not have "
                                          "been added: %s",
                                          broke->message);
                return emq__error_set(
                    err, rs, broke->retriable,
                    "%zu of %zu entries confirmed added; entries from "
                    "index %zu on may or may not have been added: %s",
                    ok, n, i, broke->message);
            }
            int added = rec->st == EMQ_OK || rec->st == EMQ_ENOTDURABLE;
            if (ids && added)
                ids[i] = rec->id;
            else if (ids)
                ids[i].str[0] = '\0';
            ok += (size_t)added;
            if (j >= r.appended) { /* an entry we could not even send */
                clear_ids(ids, i, n);
                stop = 1;
                if (first != EMQ_OK && first != EMQ_ENOTDURABLE)
                    break;
                first = rec->st;
                first_err = *rec->err;
                if (!single)
                    emq__error_prefix(&first_err,
                                      "entry %zu was not sent (%zu of %zu "
                                      "entries added, none from it on)",
                                      i, ok, n);
                break;
            }
            if (rec->st == EMQ_OK)
                continue;
            if (rec->st == EMQ_ENOTDURABLE
                    ? first != EMQ_OK
                    : first != EMQ_OK && first != EMQ_ENOTDURABLE)
                continue;
            first = rec->st;
            first_err = *rec->err;
            if (!single && rec->st == EMQ_ENOTDURABLE)
                emq__error_prefix(&first_err, "entries %zu to %zu", done,
                                  done + r.appended - 1);
            else if (!single)
                emq__error_prefix(&first_err, "entry %zu", i);
        }
        done += r.m;
        if (rs != EMQ_OK && !stop) { /* READONLY, or WAIT's reply lost */
            stop = 1;
            clear_ids(ids, done, n);
            if (first == EMQ_OK) {
                first = rs;
                first_err = *broke;
            }
            if (done < n && !single)
                emq__error_prefix(&first_err,
                                  "%zu of %zu entries added; entries from "
                                  "index %zu on were not sent",
                                  ok, n, done);
        }
    }
    *written = ok;
    batch_slots_free(&b);
    if (first != EMQ_OK) {
        if (err)
            *err = first_err;
        return first;
    }
    emq__error_clear(err);
    return EMQ_OK;
}

emq_status emq__sender_batch(emq_producer_t *p, const emq_message *msgs,
                             const emq__extra *when, size_t n, emq_id *ids,
                             size_t *written, int single, emq_error *err) {
    emq__sender *s = &p->tx;
    size_t w = 0;
    if (written)
        *written = 0;
    if (n == 0) {
        emq__error_clear(err);
        return EMQ_OK;
    }
    emq__record *r = emq__calloc(1, sizeof *r);
    if (r == NULL) {
        clear_ids(ids, 0, n);
        return emq__oom(err);
    }
    r->kind = REC_BATCH;
    cond_init(&r->cv);
    int64_t timeout = emq__cfg_producer_timeout_ms(p->conf);
    int64_t deadline = emq__now_ms() + timeout;
    emq_status st = EMQ_OK;
    pthread_mutex_lock(&s->mu);
    enqueue(s, r);
    for (;;) {
        if (r->state == REC_DONE) { /* failed while queued */
            st = r->st;
            if (err)
                *err = *r->err;
            break;
        }
        if (s->link == EMQ_LINK_DOWN) {
            dequeue(s, r);
            st = down_error(p, err);
            break;
        }
        if (s->link == EMQ_LINK_UP && !s->busy && s->head != r) {
            lead(p, NULL); /* what was queued before the batch */
            continue;
        }
        if (s->link == EMQ_LINK_UP && !s->busy && s->head == r) {
            dequeue(s, r);
            s->busy = 1;
            pthread_mutex_unlock(&s->mu);
            emq_error broke;
            st = write_batch(p, msgs, when, n, ids, &w, single, deadline, err,
                             &broke);
            pthread_mutex_lock(&s->mu);
            s->busy = 0;
            if (broke.code != EMQ_OK)
                link_broke(p, &broke);
            pass_turn(s);
            break;
        }
        if (emq__now_ms() >= deadline) {
            dequeue(s, r);
            pass_turn(s);
            st = emq__error_set(err, EMQ_ETIMEDOUT, 1,
                                "the batch was not sent within %lld ms "
                                "(producer.timeout_ms): %s",
                                (long long)timeout,
                                s->link == EMQ_LINK_CONNECTING
                                    ? "still connecting"
                                    : "the connection was busy");
            break;
        }
        wait_until(&r->cv, &s->mu, deadline);
    }
    pthread_mutex_unlock(&s->mu);
    if (st != EMQ_OK && w == 0)
        clear_ids(ids, 0, n);
    if (written)
        *written = w;
    record_free(r);
    return st;
}

/* ---- asynchronous entries ------------------------------------------------ */

emq_status emq__sender_async(emq_producer_t *p, const emq_message *m,
                             const emq__extra *w, emq_delivery_fn cb,
                             void *opaque, emq_error *err) {
    emq__sender *s = &p->tx;
    const emq_conf_t *c = p->conf;
    emq__record *r = record_new(REC_ASYNC, m, w);
    if (r == NULL)
        return emq__oom(err);
    r->cb = cb;
    r->opaque = opaque;
    r->queued_ms = emq__now_ms();
    r->deadline_ms = r->queued_ms + emq__cfg_producer_timeout_ms(c);
    pthread_mutex_lock(&s->mu);
    if (s->fatal) {
        /* No attempt will be made: queued, it would only time out. */
        emq_status st = down_error(p, err);
        pthread_mutex_unlock(&s->mu);
        record_free(r);
        return st;
    }
    if (r->bytes > (size_t)emq__cfg_producer_queue_max_bytes(c)) {
        /* Never fits, however many deliveries drain the queue: final. */
        size_t bytes = r->bytes;
        pthread_mutex_unlock(&s->mu);
        record_free(r);
        return emq__error_set(err, EMQ_ELIMIT, 0,
                              "this entry's fields are %zu bytes, more than "
                              "producer.queue.max_bytes (%lld): it can never "
                              "be queued (raise the bound, or produce it "
                              "with emq_produce)",
                              bytes,
                              (long long)emq__cfg_producer_queue_max_bytes(c));
    }
    if (s->outstanding >= (size_t)emq__cfg_producer_queue_max_messages(c) ||
        s->outstanding_bytes + r->bytes >
            (size_t)emq__cfg_producer_queue_max_bytes(c)) {
        int by_count = s->outstanding >=
                       (size_t)emq__cfg_producer_queue_max_messages(c);
        size_t out = s->outstanding, held = s->outstanding_bytes;
        pthread_mutex_unlock(&s->mu);
        record_free(r);
        if (by_count)
            return emq__error_set(
                err, EMQ_ELIMIT, 1,
                "the producer's queue is full: %zu entries "
                "outstanding (producer.queue.max_messages "
                "%lld); wait for their callbacks "
                "(emq_producer_poll, emq_producer_flush)",
                out, (long long)emq__cfg_producer_queue_max_messages(c));
        return emq__error_set(err, EMQ_ELIMIT, 1,
                              "the producer's queue is full: %zu bytes of "
                              "fields outstanding (producer.queue.max_bytes "
                              "%lld); wait for their callbacks",
                              held,
                              (long long)emq__cfg_producer_queue_max_bytes(c));
    }
    s->outstanding++;
    s->outstanding_bytes += r->bytes;
    enqueue(s, r);
    /* The thread sends it after the linger; wake it for the timer, or at
     * once when a window is full. */
    if (s->queued_async == 1 ||
        s->queued_async >= (size_t)emq__cfg_producer_window(c))
        pthread_cond_signal(&s->wake);
    pthread_mutex_unlock(&s->mu);
    emq__error_clear(err);
    return EMQ_OK;
}

/* Runs the callbacks of the done list (mu held on entry and exit; released
 * while they run). Returns how many ran. */
static size_t run_callbacks(emq_producer_t *p) {
    emq__sender *s = &p->tx;
    size_t ran = 0;
    while (s->done_head) {
        emq__record *list = s->done_head;
        s->done_head = s->done_tail = NULL;
        pthread_mutex_unlock(&s->mu);
        size_t bytes = 0, count = 0;
        for (emq__record *r = list; r; r = r->next) {
            emq_delivery d = {
                .status = r->st,
                .id = r->st == EMQ_OK || r->st == EMQ_ENOTDURABLE ? r->id.str
                                                                  : "",
                .error = r->st == EMQ_OK ? NULL : r->err,
                .outcome_unknown = r->unknown,
                .attempts = r->attempts,
                .stream = p->keys.stream,
            };
            r->cb(r->opaque, &d);
            bytes += r->bytes;
            count++;
        }
        while (list) {
            emq__record *next = list->next;
            record_free(list);
            list = next;
        }
        pthread_mutex_lock(&s->mu);
        s->outstanding -= count;
        s->outstanding_bytes -= bytes;
        ran += count;
        pthread_cond_broadcast(&s->idle);
    }
    return ran;
}

/* Reports queued async entries past their deadline (mu held); returns the
 * earliest deadline still ahead (INT64_MAX: none). Async entries are
 * queued in call order with one timeout, so their deadlines grow along
 * the queue (those sent again go first and are older still): the walk
 * stops at the first one still ahead, so a long queue costs nothing. */
static int64_t expire_async(emq_producer_t *p, int64_t now) {
    emq__sender *s = &p->tx;
    emq__record *r = s->head;
    while (r) {
        emq__record *nx = r->next;
        if (r->kind == REC_ASYNC) {
            if (now < r->deadline_ms)
                return r->deadline_ms;
            emq_error e;
            if (s->link != EMQ_LINK_UP && s->down.code != EMQ_OK)
                emq__error_set(&e, EMQ_ETIMEDOUT, 1,
                               "not sent within %lld ms "
                               "(producer.timeout_ms): %s",
                               (long long)emq__cfg_producer_timeout_ms(p->conf),
                               s->down.message);
            else
                emq__error_set(
                    &e, EMQ_ETIMEDOUT, 1,
                    "not sent within %lld ms "
                    "(producer.timeout_ms)",
                    (long long)emq__cfg_producer_timeout_ms(p->conf));
            dequeue(s, r);
            record_fail(r, EMQ_ETIMEDOUT, &e);
            complete(s, r);
        }
        r = nx;
    }
    return INT64_MAX;
}

/* When the oldest queued async entry is due to go (INT64_MAX: none). */
static int64_t async_due(const emq_producer_t *p) {
    const emq__sender *s = &p->tx;
    if (s->queued_async == 0)
        return INT64_MAX;
    if (s->hold_until_ms > emq__now_ms()) /* "not now": wait a moment */
        return s->hold_until_ms;
    if (s->flushing || s->quit || s->queued_waiters > 0 ||
        s->queued_async >= (size_t)emq__cfg_producer_window(p->conf))
        return 0;
    for (const emq__record *r = s->head; r; r = r->next)
        if (r->kind == REC_ASYNC)
            return r->queued_ms + emq__cfg_producer_linger_ms(p->conf);
    return INT64_MAX;
}

static void *sender_main(void *arg) {
    emq_producer_t *p = arg;
    emq__sender *s = &p->tx;
    int poll_mode = emq__cfg_producer_delivery_poll(p->conf) != 0;
    pthread_mutex_lock(&s->mu);
    for (;;) {
        int64_t now = emq__now_ms();
        if (s->link != EMQ_LINK_UP && !s->busy && !s->fatal && !s->quit &&
            now >= s->next_attempt_ms) {
            s->link = EMQ_LINK_CONNECTING;
            pthread_mutex_unlock(&s->mu);
            emq_error err;
            emq_status st = connect_once(p, &err);
            pthread_mutex_lock(&s->mu);
            attempt_done(p, st, &err);
            continue;
        }
        int64_t next = expire_async(p, now);
        if (!poll_mode && s->done_head) {
            run_callbacks(p);
            continue;
        }
        int64_t due = async_due(p);
        if (s->link == EMQ_LINK_UP && !s->busy && s->head &&
            s->head->kind == REC_ASYNC && due <= now) {
            lead(p, NULL);
            continue;
        }
        if (s->quit && !s->busy && (s->link != EMQ_LINK_UP || !s->queued_async))
            break;
        /* While another thread has the turn, only its hand-over (or an
         * entry's deadline) is worth waking for: pass_turn signals. */
        if (!s->busy && s->link == EMQ_LINK_UP && due < next)
            next = due;
        if (!s->busy && s->link == EMQ_LINK_DOWN && !s->fatal &&
            s->next_attempt_ms < next)
            next = s->next_attempt_ms;
        if (next <= now)
            next = now + 1; /* never a busy loop under the lock */
        wait_until(&s->wake, &s->mu, next == INT64_MAX ? -1 : next);
    }
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

/* ---- life --------------------------------------------------------------- */

emq_status emq__sender_start(emq_producer_t *p, emq_error *err) {
    emq__sender *s = &p->tx;
    const emq_conf_t *c = p->conf;
    s->started = 1;
    pthread_mutex_init(&s->mu, NULL);
    cond_init(&s->wake);
    cond_init(&s->idle);
    s->rng = (uint64_t)(uintptr_t)p ^ (uint64_t)emq__now_ms();
    s->link = EMQ_LINK_CONNECTING;
    if (emq__cfg_producer_connect_eager(c)) {
        emq_status st = connect_once(p, err);
        if (st != EMQ_OK)
            return st;
        s->link = EMQ_LINK_UP;
    }
    if (pthread_create(&s->thread, NULL, sender_main, p) != 0)
        return emq__error_set(err, EMQ_ENOMEM, 0,
                              "could not start the producer's thread");
    s->thread_started = 1;
    return EMQ_OK;
}

void emq__sender_stop(emq_producer_t *p) {
    emq__sender *s = &p->tx;
    if (!s->started)
        return; /* never started */
    if (s->thread_started) {
        atomic_store(&s->closing, 1);
        pthread_mutex_lock(&s->mu);
        s->quit = 1;
        /* Not sent: reported, not lost silently. */
        emq_error e;
        emq__error_set(&e, EMQ_ECLOSED, 0,
                       "the producer was destroyed before the entry was "
                       "sent (emq_producer_flush sends what is queued)");
        emq__record *r = s->head;
        while (r) {
            emq__record *nx = r->next;
            dequeue(s, r);
            record_fail(r, EMQ_ECLOSED, &e);
            complete(s, r);
            r = nx;
        }
        pthread_cond_signal(&s->wake);
        pthread_mutex_unlock(&s->mu);
        pthread_join(s->thread, NULL);
    }
    pthread_mutex_lock(&s->mu);
    run_callbacks(p); /* what the thread left (poll mode: all) */
    pthread_mutex_unlock(&s->mu);
    if (s->opened)
        emq__session_close(&s->x);
    pthread_cond_destroy(&s->wake);
    pthread_cond_destroy(&s->idle);
    pthread_mutex_destroy(&s->mu);
}

size_t emq__sender_poll(emq_producer_t *p, int64_t timeout_ms) {
    emq__sender *s = &p->tx;
    if (!emq__cfg_producer_delivery_poll(p->conf))
        return 0;
    int64_t deadline = timeout_ms < 0 ? -1 : emq__now_ms() + timeout_ms;
    pthread_mutex_lock(&s->mu);
    while (s->done_head == NULL && timeout_ms != 0 &&
           (deadline < 0 || emq__now_ms() < deadline))
        wait_until(&s->idle, &s->mu, deadline);
    size_t ran = run_callbacks(p);
    pthread_mutex_unlock(&s->mu);
    return ran;
}

emq_status emq__sender_flush(emq_producer_t *p, int64_t timeout_ms,
                             emq_error *err) {
    emq__sender *s = &p->tx;
    int64_t deadline = timeout_ms < 0 ? -1 : emq__now_ms() + timeout_ms;
    int poll_mode = emq__cfg_producer_delivery_poll(p->conf) != 0;
    pthread_mutex_lock(&s->mu);
    s->flushing++;
    pthread_cond_signal(&s->wake);
    while (s->outstanding > 0 && (deadline < 0 || emq__now_ms() < deadline)) {
        if (poll_mode && s->done_head) {
            run_callbacks(p);
            continue;
        }
        wait_until(&s->idle, &s->mu, deadline);
    }
    s->flushing--;
    size_t left = s->outstanding;
    pthread_mutex_unlock(&s->mu);
    if (left > 0)
        return emq__error_set(err, EMQ_ETIMEDOUT, 1,
                              "%zu entries still outstanding after %lld ms",
                              left, (long long)timeout_ms);
    emq__error_clear(err);
    return EMQ_OK;
}

size_t emq__sender_outstanding(emq_producer_t *p) {
    pthread_mutex_lock(&p->tx.mu);
    size_t n = p->tx.outstanding;
    pthread_mutex_unlock(&p->tx.mu);
    return n;
}
