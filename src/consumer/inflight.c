/* SPDX-License-Identifier: BSD-3-Clause */
/* inflight.c: the in-flight table, the consumer's record of what it owns.
 *
 * Every entry read (by a new read, a history read, a claim or a due retry)
 * is in the table until its settlement has been applied by the server: it
 * is what the upkeep thread keeps fresh, what may be handed to the
 * handler, and what recover self must not hand out a second time. The
 * table is a hash set of entry IDs (open addressing, linear probing,
 * deletion by backward shift) so that lookups stay O(1) for batches of
 * any size; the settlements decided and not yet sent wait beside it in a
 * queue. One mutex guards both; the upkeep thread sleeps on `wake`.
 */
#include "inflight.h"

#include <limits.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#define INITIAL_CAP 256

emq_status emq__inflight_init(emq__inflight *t, emq_error *err) {
    memset(t, 0, sizeof *t);
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    int rc = pthread_cond_init(&t->wake, &attr);
    if (rc == 0 && pthread_cond_init(&t->unmarked, &attr) != 0) {
        pthread_cond_destroy(&t->wake);
        rc = -1;
    }
    pthread_condattr_destroy(&attr);
    if (rc != 0 || pthread_mutex_init(&t->mu, NULL) != 0)
        return emq__oom(err);
    t->slots = emq__calloc(INITIAL_CAP, sizeof *t->slots);
    if (t->slots == NULL)
        return emq__oom(err);
    t->cap = INITIAL_CAP;
    t->due_min = INT64_MAX;
    return EMQ_OK;
}

void emq__settle_op_free(settle_op *op) {
    if (op->reason == NULL)
        return; /* an ack owns nothing (the common case) */
    emq__free(op->reason);
    op->reason = NULL;
}

static void free_ops(emq__inflight *t) {
    for (size_t i = 0; i < t->nops; i++)
        emq__settle_op_free(&t->ops[i]);
    t->nops = 0;
}

void emq__inflight_destroy(emq__inflight *t) {
    if (t->slots == NULL)
        return;
    free_ops(t);
    emq__free(t->ops);
    emq__free(t->slots);
    emq__free(t->unmark);
    emq__free(t->unpublish);
    emq__free(t->remark);
    emq__free(t->dropped);
    emq__free(t->let_go);
    pthread_mutex_destroy(&t->mu);
    pthread_cond_destroy(&t->wake);
    pthread_cond_destroy(&t->unmarked);
    memset(t, 0, sizeof *t);
}

/* ---- the hash set (caller holds mu) -------------------------------------- */

/* The table finds an entry by its ID's two numbers: read once from the
 * reply (batch_item.key), they make every later look-up two compares
 * where the text would take a hash of each byte and a string compare. */

/* The key of id: {0, 0} when its text is not a stream ID (0-0 is never
 * an entry's ID), which the table then never holds. */
static emq__stream_id key_of(const emq_id *id) {
    emq__stream_id k;
    if (emq__stream_id_parse(id->str, strlen(id->str), &k) != 0)
        return (emq__stream_id){0, 0};
    return k;
}

/* known, or id's key when known is {0, 0} (not computed by the caller). */
static emq__stream_id key_known(emq__stream_id known, const emq_id *id) {
    return known.ms | known.seq ? known : key_of(id);
}

static int key_eq(emq__stream_id a, emq__stream_id b) {
    return a.ms == b.ms && a.seq == b.seq;
}

static size_t hash_key(emq__stream_id k) {
    uint64_t h = (k.ms ^ (k.seq * 0x9E3779B97F4A7C15ULL)) *
                 0xBF58476D1CE4E5B9ULL;
    return (size_t)(h ^ (h >> 31));
}

static if_entry *find_hashed(emq__inflight *t, emq__stream_id k, size_t h) {
    size_t mask = t->cap - 1;
    for (size_t i = h & mask;; i = (i + 1) & mask) {
        if_entry *e = &t->slots[i];
        if (!e->used)
            return NULL;
        if (e->hash == h && key_eq(e->key, k))
            return e;
    }
}

static if_entry *find_key(emq__inflight *t, emq__stream_id k) {
    if ((k.ms | k.seq) == 0)
        return NULL;
    return find_hashed(t, k, hash_key(k));
}

static if_entry *find(emq__inflight *t, const emq_id *id) {
    return find_key(t, key_of(id));
}

/* find_key, trying slot hint first (entries move only when others leave
 * or the table grows, so a recent slot is nearly always still right). */
static if_entry *find_at(emq__inflight *t, emq__stream_id k, size_t hint) {
    if (hint < t->cap && t->slots[hint].used && key_eq(t->slots[hint].key, k))
        return &t->slots[hint];
    return find_key(t, k);
}

/* Appends id to a growable array of ids (*arr of *n, room *cap); -1
 * when it cannot grow. */
static int ids_push(emq_id **arr, size_t *n, size_t *cap, const emq_id *id) {
    if (*n == *cap) {
        size_t want = *cap ? *cap * 2 : 64;
        emq_id *grown = emq__realloc(*arr, want * sizeof *grown);
        if (grown == NULL)
            return -1;
        *arr = grown;
        *cap = want;
    }
    (*arr)[(*n)++] = *id;
    return 0;
}

/* e leaves a handler's hands: its published in-hand time is to go (the
 * upkeep deletes it; if the queue cannot grow, the field stays, showing
 * an age for an entry no longer in hand until it is settled elsewhere).
 * Caller holds mu. */
static void unpublish(emq__inflight *t, if_entry *e) {
    if (!e->published)
        return;
    e->published = 0;
    (void)ids_push(&t->unpublish, &t->nunpublish, &t->unpublish_cap, &e->id);
}

static void remove_at(emq__inflight *t, if_entry *e) {
    size_t mask = t->cap - 1;
    size_t hole = (size_t)(e - t->slots);
    if (e->state == IF_RETRY_WAIT)
        t->nwait--;
    if (e->state == IF_SETTLING)
        t->nsettling--;
    if (e->state == IF_HANDLING)
        atomic_fetch_sub(&t->nhandling, 1);
    unpublish(t, e);
    t->slots[hole].used = 0;
    t->n--;
    /* Shift later members of the probe run back into the hole. */
    for (size_t j = (hole + 1) & mask; t->slots[j].used; j = (j + 1) & mask) {
        size_t home = t->slots[j].hash & mask;
        /* j may move to hole when home is not in (hole, j] cyclically. */
        int in_range = hole <= j ? (home > hole && home <= j)
                                 : (home > hole || home <= j);
        if (!in_range) {
            t->slots[hole] = t->slots[j];
            t->slots[j].used = 0;
            hole = j;
        }
    }
}

/* Returns the slot e went to. */
static size_t insert_slot(if_entry *slots, size_t cap, const if_entry *e) {
    size_t mask = cap - 1;
    size_t i = e->hash & mask;
    while (slots[i].used)
        i = (i + 1) & mask;
    slots[i] = *e;
    return i;
}

static int grow(emq__inflight *t) {
    size_t cap = t->cap * 2;
    if_entry *slots = emq__calloc(cap, sizeof *slots);
    if (slots == NULL)
        return -1;
    for (size_t i = 0; i < t->cap; i++)
        if (t->slots[i].used)
            insert_slot(slots, cap, &t->slots[i]);
    emq__free(t->slots);
    t->slots = slots;
    t->cap = cap;
    return 0;
}

/* Moves e to state, keeping the count of retry waits. */
static void set_state(emq__inflight *t, if_entry *e, if_state state) {
    if (e->state == IF_RETRY_WAIT)
        t->nwait--;
    if (state == IF_RETRY_WAIT)
        t->nwait++;
    if (e->state == IF_SETTLING)
        t->nsettling--;
    if (state == IF_SETTLING)
        t->nsettling++;
    if (e->state == IF_HANDLING) {
        atomic_fetch_sub(&t->nhandling, 1);
        if (state != IF_READ && e->handed_ms > 0) { /* it was held */
            int64_t held = emq__now_coarse_ms() - e->handed_ms;
            t->held_ms8 += (held > 0 ? held : 0) - t->held_ms8 / 8;
        }
    }
    if (state == IF_HANDLING)
        atomic_fetch_add(&t->nhandling, 1);
    if (state != IF_HANDLING)
        unpublish(t, e);
    e->state = (unsigned char)state;
}

/* ---- the table ----------------------------------------------------------- */

int emq__inflight_add_batch(emq__inflight *t, batch_item *items, size_t n,
                            int64_t now_ms) {
    int result = 0;
    pthread_mutex_lock(&t->mu);
    for (size_t i = 0; i < n && result == 0; i++) {
        emq__stream_id k = key_known(items[i].key, &items[i].id);
        items[i].key = k;
        size_t h = hash_key(k);
        /* Not a stream ID (batch_parse lets none through): never handed
         * out, as it could not be settled. */
        items[i].held = (k.ms | k.seq) == 0 || find_hashed(t, k, h) != NULL;
        if (items[i].held)
            continue;
        if ((t->n + 1) * 2 > t->cap && grow(t) != 0) {
            result = -1;
            break;
        }
        if_entry e = {.id = items[i].id,
                      .key = k,
                      .refreshed_ms = now_ms,
                      .deliveries = items[i].deliveries,
                      .hash = h,
                      .used = 1,
                      .state = IF_READ,
                      .unseen = (unsigned char)(items[i].unseen != 0),
                      .read_ms = now_ms};
        items[i].slot = insert_slot(t->slots, t->cap, &e);
        t->n++;
    }
    if (t->dozing && t->n > 0) /* new work to keep fresh */
        pthread_cond_signal(&t->wake);
    pthread_mutex_unlock(&t->mu);
    return result;
}

/* Appends op to the queue, its entry left as it is (caller holds mu);
 * now_ms: emq__now_coarse_ms(), read once by the caller. */
static emq_status push_op(emq__inflight *t, settle_op *op, int64_t now_ms,
                          emq_error *err) {
    if (t->nops == t->ops_cap) {
        size_t cap = t->ops_cap ? t->ops_cap * 2 : 64;
        settle_op *ops = emq__realloc(t->ops, cap * sizeof *ops);
        if (ops == NULL) {
            emq__settle_op_free(op);
            return emq__oom(err);
        }
        t->ops = ops;
        t->ops_cap = cap;
    }
    if (t->nops == 0)
        t->oldest_op_ms = now_ms;
    t->ops[t->nops++] = *op;
    /* While entries are in flight the upkeep thread looks every
     * EMQ_SETTLE_DELAY_MS by itself; it is woken only from a long sleep,
     * or for a full pipeline (a wake-up per batch would cost two system
     * calls per batch). */
    if (t->dozing || t->nops == EMQ_SETTLE_MAX_IDS)
        pthread_cond_signal(&t->wake);
    return EMQ_OK;
}

/* Queues op, its entry (if any) now settling or waiting out a retry
 * (caller holds mu; now_ms as push_op's). */
static emq_status queue_op(emq__inflight *t, settle_op *op, int64_t now_ms,
                           emq_error *err) {
    op->key = key_known(op->key, &op->id);
    if_entry *e = find_at(t, op->key, t->current);
    if (e != NULL && e->overdue) {
        /* Let go past handler.timeout_ms: a peer may hold it now, and an
         * XACK does not ask whose it is. */
        remove_at(t, e);
        emq__settle_op_free(op);
        return EMQ_OK;
    }
    op->slot_hint = e != NULL ? (size_t)(e - t->slots) : SIZE_MAX;
    emq_status st = push_op(t, op, now_ms, err);
    if (st == EMQ_OK && e != NULL) {
        set_state(t, e, op->kind == SETTLE_RETRY ? IF_RETRY_WAIT : IF_SETTLING);
        e->due_ms = now_ms + op->delay_ms;
        if (op->kind == SETTLE_RETRY && e->due_ms < t->due_min)
            t->due_min = e->due_ms;
    }
    return st;
}

/* Grows the unmark queue to hold need ids; -1 when out of memory
 * (caller holds mu). */
static int ask_unmark_room(emq__inflight *t, size_t need) {
    if (need <= t->unmark_cap)
        return 0;
    size_t cap = t->unmark_cap ? t->unmark_cap : 64;
    while (cap < need)
        cap *= 2;
    emq_id *grown = emq__realloc(t->unmark, cap * sizeof *grown);
    if (grown == NULL)
        return -1;
    t->unmark = grown;
    t->unmark_cap = cap;
    return 0;
}

/* Queues id's unseen mark to go (the handout that follows waits for it,
 * emq__inflight_unmark_wait); -1 when out of memory (caller holds mu). */
static int ask_unmark(emq__inflight *t, const emq_id *id) {
    if (ids_push(&t->unmark, &t->nunmark, &t->unmark_cap, id) != 0)
        return -1;
    atomic_fetch_add(&t->unmark_asked, 1);
    if (t->nunmark == 1) /* the upkeep sends them now */
        pthread_cond_signal(&t->wake);
    return 0;
}

/* Remembers that id was read and dropped without being handed out (its
 * take by recover self must not count a delivery); forgotten silently
 * when the list cannot grow (then it may be counted once). Caller holds
 * mu. */
static void note_dropped(emq__inflight *t, const emq_id *id) {
    (void)ids_push(&t->dropped, &t->ndropped, &t->dropped_cap, id);
}

/* Marks next's entry IF_HANDLING if it may be handed out; returns what
 * emq__inflight_step puts in *began (caller holds mu; now_ms:
 * emq__now_coarse_ms()). */
static int begin_locked(emq__inflight *t, const batch_item *next,
                        int64_t now_ms) {
    if_entry *e = find_at(t, key_known(next->key, &next->id), next->slot);
    /* Not refreshed for most of claim.min_idle_ms (the upkeep connection
     * is down): a peer may take it any moment, so it is not handed out;
     * recovery brings it back. */
    int stale = e != NULL && t->stale_after_ms > 0 &&
                now_ms - e->refreshed_ms > t->stale_after_ms;
    int ok = e != NULL && !e->lost && !stale;
    if (e != NULL && e->state != IF_READ)
        return 0; /* in hand already (handed out by an earlier copy of it,
                     a retry waiting, a settlement on its way): not again */
    if (ok && e->unseen == 1 && ask_unmark(t, &e->id) != 0)
        ok = 0; /* out of memory: not handed out; it comes back */
    if (ok) {
        e->unseen = 0;
        set_state(t, e, IF_HANDLING);
        e->handed_ms = now_ms;
        t->current = (size_t)(e - t->slots);
    } else if (e != NULL) {
        if (stale && !e->lost)
            note_dropped(t, &e->id);
        remove_at(t, e);
    }
    return ok ? 1 : stale ? -1 : 0;
}

int emq__inflight_still_ours(emq__inflight *t, const emq_id *id) {
    pthread_mutex_lock(&t->mu);
    if_entry *e = find_at(t, key_of(id), t->current);
    int stale = e != NULL && t->stale_after_ms > 0 &&
                emq__now_coarse_ms() - e->refreshed_ms > t->stale_after_ms;
    int ours = e != NULL && e->state == IF_HANDLING && !e->lost && !stale;
    if (!ours && e != NULL && e->state == IF_HANDLING) {
        if (stale && !e->lost) {
            /* Maybe still pending to this consumer, its mark gone at the
             * begin: asked again (only marked if so, marks.c). */
            note_dropped(t, &e->id);
            if (ids_push(&t->remark, &t->nremark, &t->remark_cap, &e->id) == 0)
                pthread_cond_signal(&t->wake);
        }
        remove_at(t, e);
    }
    pthread_mutex_unlock(&t->mu);
    return ours;
}

void emq__inflight_unbegin(emq__inflight *t, const emq_id *id) {
    pthread_mutex_lock(&t->mu);
    if_entry *e = find_at(t, key_of(id), t->current);
    if (e != NULL && e->state == IF_HANDLING) {
        /* Its mark's removal was asked at the begin (or it had none):
         * marked again in the upkeep's next round, behind that removal on
         * the one connection, even if the session drops it meanwhile. Out
         * of memory, the marks' own look finds it later (unseen 0). */
        set_state(t, e, IF_READ);
        e->handed_ms = 0;
        if (ids_push(&t->remark, &t->nremark, &t->remark_cap, &e->id) == 0) {
            e->unseen = 1;
            pthread_cond_signal(&t->wake);
        }
    }
    pthread_mutex_unlock(&t->mu);
}

emq_status emq__inflight_step(emq__inflight *t, settle_op *op,
                              const batch_item *next, int *began,
                              int64_t *now_ms, emq_error *err) {
    emq_status st = EMQ_OK;
    pthread_mutex_lock(&t->mu);
    int64_t now = emq__now_coarse_ms(); /* once, for both */
    if (op != NULL)
        st = queue_op(t, op, now, err);
    if (next != NULL)
        *began = begin_locked(t, next, now);
    pthread_mutex_unlock(&t->mu);
    if (now_ms != NULL)
        *now_ms = now;
    return st;
}

void emq__inflight_begin(emq__inflight *t, const batch_item *const *items,
                         size_t n, int *began) {
    pthread_mutex_lock(&t->mu);
    int64_t now = emq__now_coarse_ms();
    for (size_t i = 0; i < n; i++)
        began[i] = begin_locked(t, items[i], now);
    pthread_mutex_unlock(&t->mu);
}

emq_status emq__inflight_settle_held(emq__inflight *t, settle_op *op,
                                     uint64_t max_deliveries, int fenced,
                                     emq_error *err, int64_t *handed_ms) {
    pthread_mutex_lock(&t->mu);
    if_entry *e = find_key(t, key_known(op->key, &op->id));
    if (e != NULL)
        op->key = e->key;
    emq_status st;
    if (fenced && (e == NULL || e->state == IF_HANDLING)) {
        /* Nothing is settled past the lease's deadline, so say so now
         * rather than queue what may never be sent (an entry not in the
         * table any more was dropped when the name was lost). A handler
         * had it: its next take counts that, even if the lease held on
         * (forgotten silently when the list cannot grow). */
        if (e != NULL) {
            (void)ids_push(&t->let_go, &t->nlet_go, &t->let_go_cap, &e->id);
            remove_at(t, e);
        }
        emq__settle_op_free(op);
        st = emq__error_set(err, EMQ_ELOST, 0,
                            "entry %s was not settled: this consumer does "
                            "not hold its name's lease now (its renewal did "
                            "not get through in time); the entry stays "
                            "pending and is delivered again",
                            op->id.str);
    } else if (e == NULL || e->state != IF_HANDLING) {
        st = emq__error_set(err, EMQ_EINVAL, 0,
                            "entry %s is not held by this consumer: it was "
                            "settled already, or never handed out by "
                            "emq_consumer_poll (or its group was deleted)",
                            op->id.str);
        emq__settle_op_free(op);
    } else if (e->overdue) {
        (void)ids_push(&t->let_go, &t->nlet_go, &t->let_go_cap, &e->id);
        remove_at(t, e);
        emq__settle_op_free(op);
        st = emq__error_set(err, EMQ_ELOST, 0,
                            "entry %s was not settled: it was in hand "
                            "longer than handler.timeout_ms (%lld ms), so "
                            "this consumer let it go (a peer may have taken "
                            "it after claim.min_idle_ms)",
                            op->id.str, (long long)t->hand_limit_ms);
    } else if (e->lost) {
        remove_at(t, e);
        emq__settle_op_free(op);
        st = emq__error_set(err, EMQ_ELOST, 0,
                            "entry %s was taken over by another consumer "
                            "while it was out (its ownership could not be "
                            "refreshed in time); that consumer handles it, "
                            "so it is not settled here",
                            op->id.str);
    } else {
        op->deliveries = e->deliveries;
        if (handed_ms)
            *handed_ms = e->handed_ms;
        if (op->kind == SETTLE_RETRY && e->deliveries >= max_deliveries)
            op->kind = SETTLE_DEAD; /* its last delivery */
        t->current = (size_t)(e - t->slots);
        st = queue_op(t, op, emq__now_coarse_ms(), err);
    }
    pthread_mutex_unlock(&t->mu);
    return st;
}

emq_status emq__inflight_release(emq__inflight *t, const batch_item *item,
                                 emq_error *err) {
    /* A new entry's count is 1 (XREADGROUP > tells none). */
    settle_op op = {.kind = SETTLE_RELEASE,
                    .id = item->id,
                    .key = key_known(item->key, &item->id),
                    .deliveries = item->deliveries ? item->deliveries : 1};
    pthread_mutex_lock(&t->mu);
    if_entry *e = find_at(t, op.key, item->slot);
    if (e != NULL && e->state == IF_READ && e->unseen == 1) {
        /* Its unseen mark already keeps the next take from counting it:
         * undoing the count as well would count one delivery too few. */
        pthread_mutex_unlock(&t->mu);
        return EMQ_OK;
    }
    if (e != NULL && e->state == IF_READ)
        e->unseen = 2; /* released: never marked from now on */
    emq_status st = queue_op(t, &op, emq__now_coarse_ms(), err);
    pthread_mutex_unlock(&t->mu);
    return st;
}

int emq__inflight_add_waiting(emq__inflight *t, const emq_id *id,
                              int64_t wait_ms, int uncounted) {
    pthread_mutex_lock(&t->mu);
    int result = 0;
    emq__stream_id k = key_of(id);
    size_t h = hash_key(k);
    if ((k.ms | k.seq) != 0 && find_hashed(t, k, h) == NULL) {
        if ((t->n + 1) * 2 > t->cap && grow(t) != 0) {
            result = -1;
        } else {
            if_entry e = {.id = *id,
                          .key = k,
                          .refreshed_ms = emq__now_ms(),
                          .due_ms = emq__now_ms() + wait_ms,
                          .hash = h,
                          .used = 1,
                          .state = IF_RETRY_WAIT,
                          .uncounted = (unsigned char)(uncounted != 0)};
            insert_slot(t->slots, t->cap, &e);
            t->n++;
            t->nwait++;
            if (e.due_ms < t->due_min)
                t->due_min = e.due_ms;
        }
    }
    pthread_mutex_unlock(&t->mu);
    return result;
}

void emq__inflight_forget(emq__inflight *t, const emq_id *id) {
    pthread_mutex_lock(&t->mu);
    if_entry *e = find(t, id);
    if (e != NULL)
        remove_at(t, e);
    pthread_mutex_unlock(&t->mu);
}

int emq__inflight_holds(emq__inflight *t, const emq_id *id) {
    pthread_mutex_lock(&t->mu);
    int held = find(t, id) != NULL;
    pthread_mutex_unlock(&t->mu);
    return held;
}

int emq__inflight_settling(emq__inflight *t, const emq_id *id) {
    pthread_mutex_lock(&t->mu);
    const if_entry *e = find(t, id);
    int settling = e != NULL && e->state == IF_SETTLING;
    pthread_mutex_unlock(&t->mu);
    return settling;
}

int emq__inflight_reclaimed(emq__inflight *t, const emq_id *id,
                            int64_t now_ms) {
    pthread_mutex_lock(&t->mu);
    if_entry *e = find(t, id);
    if (e != NULL) {
        e->lost = 0;
        e->refreshed_ms = now_ms;
    }
    pthread_mutex_unlock(&t->mu);
    return e != NULL;
}

size_t emq__inflight_take(emq__inflight *t, settle_op **ops, size_t *cap,
                          size_t max, int by_run) {
    pthread_mutex_lock(&t->mu);
    if (by_run && t->urgent > 0) { /* the upkeep sends them at once */
        pthread_mutex_unlock(&t->mu);
        return 0;
    }
    if (by_run)
        t->run_took_ms = emq__now_coarse_ms();
    size_t n = t->nops < max ? t->nops : max;
    if (n > 0 && n == t->nops) {
        /* All of them: the two arrays change hands. */
        settle_op *mine = *ops;
        size_t mine_cap = *cap;
        *ops = t->ops;
        *cap = t->ops_cap;
        t->ops = mine;
        t->ops_cap = mine_cap;
        t->nops = 0;
    } else if (n > 0) {
        if (n > *cap) {
            settle_op *grown = emq__realloc(*ops, n * sizeof *grown);
            if (grown == NULL) {
                pthread_mutex_unlock(&t->mu);
                return 0; /* they stay queued */
            }
            *ops = grown;
            *cap = n;
        }
        memcpy(*ops, t->ops, n * sizeof **ops);
        memmove(t->ops, t->ops + n, (t->nops - n) * sizeof *t->ops);
        t->nops -= n;
    }
    pthread_mutex_unlock(&t->mu);
    return n;
}

void emq__inflight_settled(emq__inflight *t, const settle_op *ops, size_t n) {
    pthread_mutex_lock(&t->mu);
    for (size_t i = 0; i < n; i++) {
        if (ops[i].kind == SETTLE_RETRY)
            continue; /* still pending to us, back when due */
        if_entry *e =
            find_at(t, key_known(ops[i].key, &ops[i].id), ops[i].slot_hint);
        if (e != NULL && e->state == IF_SETTLING)
            remove_at(t, e);
    }
    pthread_mutex_unlock(&t->mu);
}

void emq__inflight_requeue(emq__inflight *t, settle_op *ops, size_t n) {
    if (n == 0)
        return;
    pthread_mutex_lock(&t->mu);
    if (t->nops + n > t->ops_cap) {
        size_t cap = t->nops + n;
        settle_op *grown = emq__realloc(t->ops, cap * sizeof *grown);
        if (grown == NULL) {
            /* Unsent settlements are lost to this process: forget their
             * entries too, so that they stop being refreshed and come back
             * through a claim or recovery (at-least-once). */
            for (size_t i = 0; i < n; i++) {
                if_entry *e = find_at(t, key_known(ops[i].key, &ops[i].id),
                                      ops[i].slot_hint);
                if (e != NULL)
                    remove_at(t, e);
                emq__settle_op_free(&ops[i]);
            }
            pthread_mutex_unlock(&t->mu);
            return;
        }
        t->ops = grown;
        t->ops_cap = cap;
    }
    memmove(t->ops + n, t->ops, t->nops * sizeof *t->ops);
    memcpy(t->ops, ops, n * sizeof *ops);
    if (t->nops == 0)
        t->oldest_op_ms = emq__now_ms();
    t->nops += n;
    pthread_mutex_unlock(&t->mu);
}

size_t emq__inflight_stale(emq__inflight *t, int64_t before_ms, emq_id *out,
                           size_t max, size_t *noverdue,
                           emq_id *first_overdue) {
    size_t n = 0;
    *noverdue = 0;
    int64_t now = emq__now_coarse_ms();
    pthread_mutex_lock(&t->mu);
    for (size_t i = 0; i < t->cap && n < max; i++) {
        if_entry *e = &t->slots[i];
        if (!e->used || e->lost || e->overdue || e->refreshed_ms > before_ms)
            continue;
        if (t->hand_limit_ms > 0 && e->state == IF_HANDLING &&
            now - e->handed_ms > t->hand_limit_ms) {
            e->overdue = 1;
            if (*noverdue == 0 && first_overdue != NULL)
                *first_overdue = e->id;
            (*noverdue)++;
            continue;
        }
        out[n++] = e->id;
    }
    pthread_mutex_unlock(&t->mu);
    return n;
}

int64_t emq__unseen_after_ms(int64_t held_ms, int64_t round_ms) {
    return held_ms >= EMQ_UNSEEN_SLOW_HELD_MS && held_ms >= 20 * round_ms
               ? EMQ_UNSEEN_SOON_MS
               : EMQ_UNSEEN_AFTER_MS;
}

int64_t emq__inflight_mark_after_ms(emq__inflight *t, int64_t round_ms) {
    pthread_mutex_lock(&t->mu);
    int64_t held = t->held_ms8 / 8;
    pthread_mutex_unlock(&t->mu);
    return emq__unseen_after_ms(held, round_ms);
}

size_t emq__inflight_to_mark(emq__inflight *t, int64_t now_ms, int64_t after_ms,
                             emq_id *out, size_t max) {
    size_t n = 0;
    pthread_mutex_lock(&t->mu);
    if (t->n > atomic_load(&t->nhandling))
        for (size_t i = 0; i < t->cap && n < max; i++) {
            if_entry *e = &t->slots[i];
            if (e->used && e->state == IF_READ && !e->unseen && !e->lost &&
                now_ms - e->read_ms >= after_ms) {
                e->unseen = 1;
                out[n++] = e->id;
            }
        }
    pthread_mutex_unlock(&t->mu);
    return n;
}

size_t emq__inflight_unmark_take(emq__inflight *t, emq_id *out, size_t max,
                                 uint64_t *upto) {
    pthread_mutex_lock(&t->mu);
    size_t n = t->nunmark < max ? t->nunmark : max;
    if (n > 0) {
        memcpy(out, t->unmark, n * sizeof *out);
        memmove(t->unmark, t->unmark + n, (t->nunmark - n) * sizeof *t->unmark);
        t->nunmark -= n;
    }
    t->unmark_taken += n;
    *upto = t->unmark_taken;
    pthread_mutex_unlock(&t->mu);
    return n;
}

void emq__inflight_unmark_finish(emq__inflight *t, int ok, uint64_t upto,
                                 const emq_id *ids, size_t n) {
    pthread_mutex_lock(&t->mu);
    if (ok) {
        atomic_store(&t->unmark_done, upto);
        pthread_cond_broadcast(&t->unmarked);
    } else if (n > 0 && (t->nunmark + n <= t->unmark_cap ||
                         ask_unmark_room(t, t->nunmark + n) == 0)) {
        memmove(t->unmark + n, t->unmark, t->nunmark * sizeof *t->unmark);
        memcpy(t->unmark, ids, n * sizeof *ids);
        t->nunmark += n;
        t->unmark_taken -= n;
    } else if (n > 0) {
        /* Out of memory: say they are gone (a crash may then not count
         * their handler; the other way, handouts would wait for ever).
         * Their tickets stay taken: they are not queued again. */
        atomic_store(&t->unmark_done, upto);
        pthread_cond_broadcast(&t->unmarked);
    }
    pthread_mutex_unlock(&t->mu);
}

int emq__inflight_settle_wait(emq__inflight *t, int (*give_up)(void *),
                              void *arg) {
    int waited = 0;
    pthread_mutex_lock(&t->mu);
    t->urgent++;
    while ((t->nops > 0 || t->nsettling > 0) && !give_up(arg)) {
        waited = 1;
        if (t->nops > 0)
            pthread_cond_signal(&t->wake);
        struct timespec ts;
        emq__deadline_in(&ts, 2);
        pthread_cond_timedwait(&t->unmarked, &t->mu, &ts);
    }
    t->urgent--;
    pthread_mutex_unlock(&t->mu);
    return waited;
}

int emq__inflight_unmark_wait(emq__inflight *t, int (*give_up)(void *),
                              void *arg) {
    uint64_t want = atomic_load(&t->unmark_asked);
    if (atomic_load(&t->unmark_done) >= want)
        return 1;
    pthread_mutex_lock(&t->mu);
    while (atomic_load(&t->unmark_done) < want && !give_up(arg)) {
        struct timespec ts;
        emq__deadline_in(&ts, 50);
        pthread_cond_timedwait(&t->unmarked, &t->mu, &ts);
    }
    int done = atomic_load(&t->unmark_done) >= want;
    pthread_mutex_unlock(&t->mu);
    return done;
}

size_t emq__inflight_to_publish(emq__inflight *t, int64_t now_ms, emq_id *out,
                                int64_t *ages, size_t max) {
    size_t n = 0;
    pthread_mutex_lock(&t->mu);
    for (size_t i = 0; i < t->cap && n < max && atomic_load(&t->nhandling);
         i++) {
        if_entry *e = &t->slots[i];
        if (e->used && e->state == IF_HANDLING && !e->published) {
            e->published = 1;
            ages[n] = now_ms > e->handed_ms ? now_ms - e->handed_ms : 0;
            out[n++] = e->id;
        }
    }
    pthread_mutex_unlock(&t->mu);
    return n;
}

/* Moves up to max ids from the front of arr[0..*n) to out (caller holds
 * mu). Returns their number. */
static size_t ids_take_front(emq_id *arr, size_t *n, emq_id *out, size_t max) {
    size_t k = *n < max ? *n : max;
    if (k > 0) {
        memcpy(out, arr, k * sizeof *out);
        memmove(arr, arr + k, (*n - k) * sizeof *arr);
        *n -= k;
    }
    return k;
}

size_t emq__inflight_unpublish_take(emq__inflight *t, emq_id *out, size_t max) {
    pthread_mutex_lock(&t->mu);
    size_t n = ids_take_front(t->unpublish, &t->nunpublish, out, max);
    pthread_mutex_unlock(&t->mu);
    return n;
}

size_t emq__inflight_remark_take(emq__inflight *t, emq_id *out, size_t max) {
    pthread_mutex_lock(&t->mu);
    size_t n = ids_take_front(t->remark, &t->nremark, out, max);
    pthread_mutex_unlock(&t->mu);
    return n;
}

void emq__inflight_remark_again(emq__inflight *t, const emq_id *ids, size_t n) {
    pthread_mutex_lock(&t->mu);
    for (size_t i = 0; i < n; i++)
        (void)ids_push(&t->remark, &t->nremark, &t->remark_cap, &ids[i]);
    pthread_mutex_unlock(&t->mu);
}

size_t emq__inflight_remarks(emq__inflight *t) {
    pthread_mutex_lock(&t->mu);
    size_t n = t->nremark;
    pthread_mutex_unlock(&t->mu);
    return n;
}

void emq__inflight_unpublish_again(emq__inflight *t, const emq_id *ids,
                                   size_t n) {
    pthread_mutex_lock(&t->mu);
    for (size_t i = 0; i < n; i++) {
        if_entry tmp = {.id = ids[i], .published = 1};
        unpublish(t, &tmp);
    }
    pthread_mutex_unlock(&t->mu);
}

int64_t emq__inflight_oldest_handed(emq__inflight *t) {
    int64_t oldest = 0;
    pthread_mutex_lock(&t->mu);
    for (size_t i = 0; i < t->cap && atomic_load(&t->nhandling) > 0; i++) {
        const if_entry *e = &t->slots[i];
        if (e->used && e->state == IF_HANDLING &&
            (oldest == 0 || e->handed_ms < oldest))
            oldest = e->handed_ms;
    }
    pthread_mutex_unlock(&t->mu);
    return oldest;
}

/* Parses one ID of a reply array into id; 0 on success. */
static int reply_id(const emq_reply *arr, size_t i, emq_id *id) {
    size_t len;
    const char *text = emq_reply_str(emq_reply_at(arr, i), &len);
    if (text == NULL || len == 0 || len >= EMQ_ID_MAX)
        return -1;
    memcpy(id->str, text, len);
    id->str[len] = '\0';
    return 0;
}

size_t emq__inflight_refreshed(emq__inflight *t, const emq_id *asked,
                               size_t nasked, const emq_reply *owned,
                               const emq_reply *gone, int64_t now_ms,
                               size_t *ngone) {
    size_t lost = 0;
    *ngone = 0;
    pthread_mutex_lock(&t->mu);
    /* Mark every asked entry, then clear the mark of the owned ones. */
    for (size_t i = 0; i < nasked; i++) {
        if_entry *e = find(t, &asked[i]);
        if (e != NULL)
            e->lost = 2;
    }
    for (size_t i = 0; i < emq_reply_len(owned); i++) {
        emq_id id;
        if_entry *e = reply_id(owned, i, &id) == 0 ? find(t, &id) : NULL;
        if (e != NULL && e->lost == 2) {
            e->lost = 0;
            e->refreshed_ms = now_ms;
        }
    }
    /* Deleted while pending: the script acknowledged them; their reasons
     * and schedule are cleared by a settlement of their own (the refresh
     * names the stream key alone), queued here with their entry left as
     * it is. Out of memory, only that clean-up is skipped. */
    for (size_t i = 0; i < emq_reply_len(gone); i++) {
        emq_id id;
        if_entry *e = reply_id(gone, i, &id) == 0 ? find(t, &id) : NULL;
        if (e == NULL || e->lost != 2)
            continue;
        if (e->state == IF_SETTLING) {
            /* Its settlement is on its way and was counted when decided
             * (6.2's claim hands deleted entries out, which queue their
             * own SETTLE_GONE): not a second time. */
            e->lost = 0;
            continue;
        }
        settle_op cleanup = {.kind = SETTLE_GONE,
                             .id = id,
                             .key = e->key,
                             .deliveries = 2,
                             .slot_hint = SIZE_MAX};
        emq_error ignored;
        (void)push_op(t, &cleanup, emq__now_coarse_ms(), &ignored);
        (*ngone)++;
        if (e->state == IF_HANDLING)
            e->lost = 1;
        else
            remove_at(t, e);
    }
    for (size_t i = 0; i < nasked; i++) {
        if_entry *e = find(t, &asked[i]);
        if (e == NULL || e->lost != 2)
            continue;
        /* Not pending to us any more. An entry whose settlement is on its
         * way was acknowledged by it: not a loss. Else forget it, unless
         * the handler has it (its settlement then finds it gone). */
        if (e->state == IF_SETTLING) {
            remove_at(t, e);
            continue;
        }
        lost++;
        if (e->state == IF_HANDLING)
            e->lost = 1;
        else
            remove_at(t, e);
    }
    pthread_mutex_unlock(&t->mu);
    return lost;
}

void emq__inflight_gone(emq__inflight *t, const emq_id *id) {
    pthread_mutex_lock(&t->mu);
    if_entry *e = find(t, id);
    if (e != NULL && e->state == IF_HANDLING)
        e->lost = 1;
    else if (e != NULL)
        remove_at(t, e);
    settle_op cleanup = {
        .kind = SETTLE_GONE, .id = *id, .deliveries = 2, .slot_hint = SIZE_MAX};
    emq_error ignored; /* out of memory: only the clean-up is skipped */
    (void)push_op(t, &cleanup, emq__now_coarse_ms(), &ignored);
    pthread_mutex_unlock(&t->mu);
}

size_t emq__inflight_due(emq__inflight *t, int64_t now_ms, int uncounted,
                         emq_id *out, size_t max) {
    size_t n = 0;
    pthread_mutex_lock(&t->mu);
    /* Removed under this lock, not left behind as IF_READ for the caller
     * to forget: in between, the upkeep would mark such an entry unseen
     * (it looks read and waiting), and its take would then not count
     * the handler that asked for the retry. */
    for (size_t i = 0; i < t->cap && n < max && t->nwait > 0;) {
        if_entry *e = &t->slots[i];
        if (e->used && e->state == IF_RETRY_WAIT && e->due_ms <= now_ms &&
            e->uncounted == (uncounted != 0)) {
            out[n++] = e->id;
            remove_at(t, e); /* a later member may have shifted into i */
        } else {
            i++;
        }
    }
    pthread_mutex_unlock(&t->mu);
    return n;
}

int64_t emq__inflight_next_due(emq__inflight *t, int64_t now_ms) {
    pthread_mutex_lock(&t->mu);
    if (t->nwait == 0)
        t->due_min = INT64_MAX;
    /* due_min is never later than the soonest wait: only once it has come
     * may it be stale (that entry left), and only then is it looked for. */
    if (t->due_min <= now_ms) {
        t->due_min = INT64_MAX;
        for (size_t i = 0; i < t->cap; i++) {
            const if_entry *e = &t->slots[i];
            if (e->used && e->state == IF_RETRY_WAIT && e->due_ms < t->due_min)
                t->due_min = e->due_ms;
        }
    }
    int64_t next = t->due_min;
    pthread_mutex_unlock(&t->mu);
    return next == INT64_MAX ? INT64_MAX : (next > now_ms ? next - now_ms : 0);
}

void emq__inflight_drop_unstarted(emq__inflight *t) {
    pthread_mutex_lock(&t->mu);
    for (size_t i = 0; i < t->cap;) {
        if_entry *e = &t->slots[i];
        if (e->used && e->state == IF_READ) {
            note_dropped(t, &e->id);
            remove_at(t, e); /* a later member may have shifted into i */
        } else
            i++;
    }
    pthread_mutex_unlock(&t->mu);
}

/* Removes id from ids[0..*n) if there; 1 when it was (caller holds mu). */
static int ids_take(emq_id *ids, size_t *n, const emq_id *id) {
    for (size_t i = 0; i < *n; i++)
        if (strcmp(ids[i].str, id->str) == 0) {
            ids[i] = ids[--*n];
            return 1;
        }
    return 0;
}

int emq__inflight_was_dropped(emq__inflight *t, const emq_id *id) {
    pthread_mutex_lock(&t->mu);
    int found = ids_take(t->dropped, &t->ndropped, id);
    pthread_mutex_unlock(&t->mu);
    return found;
}

void emq__inflight_note_let_go(emq__inflight *t, const emq_id *id) {
    pthread_mutex_lock(&t->mu);
    int known = 0;
    for (size_t i = 0; i < t->nlet_go && !known; i++)
        known = strcmp(t->let_go[i].str, id->str) == 0;
    if (!known) /* once: each copy would raise it again */
        (void)ids_push(&t->let_go, &t->nlet_go, &t->let_go_cap, id);
    pthread_mutex_unlock(&t->mu);
}

int emq__inflight_was_let_go(emq__inflight *t, const emq_id *id) {
    pthread_mutex_lock(&t->mu);
    int found = ids_take(t->let_go, &t->nlet_go, id);
    pthread_mutex_unlock(&t->mu);
    return found;
}

void emq__inflight_note_dropped(emq__inflight *t, const emq_id *ids, size_t n) {
    pthread_mutex_lock(&t->mu);
    for (size_t i = 0; i < n; i++)
        note_dropped(t, &ids[i]);
    pthread_mutex_unlock(&t->mu);
}

void emq__inflight_dropped_forget(emq__inflight *t) {
    pthread_mutex_lock(&t->mu);
    t->ndropped = 0;
    t->nlet_go = 0;
    pthread_mutex_unlock(&t->mu);
}

void emq__inflight_clear(emq__inflight *t) {
    pthread_mutex_lock(&t->mu);
    t->ndropped = 0;
    for (size_t i = 0; i < t->cap; i++)
        if (t->slots[i].used)
            unpublish(t, &t->slots[i]);
    memset(t->slots, 0, t->cap * sizeof *t->slots);
    t->n = 0;
    t->nwait = 0;
    t->nsettling = 0;
    t->due_min = INT64_MAX;
    atomic_store(&t->nhandling, 0);
    atomic_fetch_add(&t->generation, 1);
    free_ops(t);
    pthread_mutex_unlock(&t->mu);
}

size_t emq__inflight_count(emq__inflight *t) {
    pthread_mutex_lock(&t->mu);
    size_t n = t->n;
    pthread_mutex_unlock(&t->mu);
    return n;
}

size_t emq__inflight_queued(emq__inflight *t) {
    pthread_mutex_lock(&t->mu);
    size_t n = t->nops;
    pthread_mutex_unlock(&t->mu);
    return n;
}
