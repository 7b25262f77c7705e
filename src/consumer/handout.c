/* SPDX-License-Identifier: BSD-3-Clause */
/* handout.c: the public ways to consume, all over one loop.
 *
 * There is one engine: emq__consumer_loop (consumer.c) runs the sessions,
 * recovery, claims, retries and reads of one consumer (a topic's parent
 * runs one loop per partition on threads of its own), with the upkeep
 * thread keeping everything read owned until it is settled. What differs
 * is only where the entries it reads go:
 *
 *   run mode   emq_consumer_run with a handler: the loop runs on the
 *              caller's thread and calls the handler on each entry, with
 *              views into the reply (no copy);
 *   pull mode  emq_consumer_poll, emq_consumer_fd/step, and run with a
 *              batch handler: the loop runs on threads of the consumer
 *              and puts what it reads in the ready queue (ready.c), up to
 *              max_in_flight out at once; poll hands entries out from
 *              there, and any thread settles them later by ID.
 *
 * A consumer is in one mode for its life: the first poll (or fd, or a
 * batch run) puts it in pull mode.
 */
#include "consumer.h"
#include "core.h"
#include "inflight.h"
#include "lease.h"
#include "partitions.h"
#include "ready.h"
#include "settle.h"
#include "stats.h"

#include <stdio.h>
#include <string.h>

/* ---- run mode ------------------------------------------------------------ */

static emq_status batch_run(emq_consumer_t *c, emq_error *err);

emq_status emq_consumer_run(emq_consumer_t *c, emq_error *err) {
    emq__error_clear(err);
    if (c->batch_handler != NULL)
        return batch_run(c, err);
    if (c->handler == NULL)
        return emq__error_set(err, EMQ_EINVAL, 0,
                              "consumer '%s' has no handler: hand its entries "
                              "out with emq_consumer_poll, or make it with a "
                              "handler to run it",
                              c->name);
    if (c->ready != NULL)
        return emq__error_set(err, EMQ_EINVAL, 0,
                              "consumer '%s' is driven by emq_consumer_poll; "
                              "make another consumer to run a handler",
                              c->name);
    if (atomic_exchange(&c->running, 1))
        return emq__error_set(err, EMQ_EINVAL, 0,
                              "consumer '%s' is already running", c->name);
    emq_status st;
    if (c->nparts > 0)
        st = emq__consumer_topic_run(c, err);
    else
        st = emq__consumer_loop(c, err);
    atomic_store(&c->running, 0);
    emq__consumer_stop_clear(c);
    return st;
}

/* ---- pull mode: starting and closing ------------------------------------- */

static void *reader_main(void *arg) {
    emq_consumer_t *c = arg;
    emq_error err;
    emq_status st = emq__consumer_loop(c, &err);
    emq__ready *r = c->ready;
    if (st != EMQ_OK) /* one fatal error ends the whole consumer */
        emq_consumer_stop(r->root);
    emq__ready_ended(r, st, &err);
    return NULL;
}

/* Joins the reading threads (caller holds pull_mu). */
static void join_readers(emq_consumer_t *c) {
    for (size_t i = 0; i < c->nfetchers; i++)
        pthread_join(c->fetchers[i], NULL);
    c->nfetchers = 0;
}

/* Puts c in pull mode and starts its reading threads, unless they run.
 * A consumer whose threads ended (a stop, a close, a fatal error) starts
 * again only after close. */
static emq_status pull_start(emq_consumer_t *c, emq_error *err) {
    emq_status st = EMQ_OK;
    pthread_mutex_lock(&c->pull_mu);
    if (c->ready == NULL) {
        if (atomic_load(&c->running)) {
            pthread_mutex_unlock(&c->pull_mu);
            return emq__error_set(err, EMQ_EINVAL, 0,
                                  "consumer '%s' is running a handler "
                                  "(emq_consumer_run): it cannot be polled",
                                  c->name);
        }
        if ((st = emq__ready_new(c, &c->ready, err)) != EMQ_OK) {
            pthread_mutex_unlock(&c->pull_mu);
            return st;
        }
        size_t n;
        emq_consumer_t *const *m = emq__consumer_members(c, &n);
        for (size_t i = 0; i < n; i++)
            m[i]->ready = c->ready;
    }
    emq__ready *r = c->ready;
    if (c->nfetchers > 0 || r->ended) { /* running, or ended until close */
        pthread_mutex_unlock(&c->pull_mu);
        return EMQ_OK;
    }
    size_t n;
    emq_consumer_t *const *all = emq__consumer_members(c, &n);
    if (c->fetchers == NULL &&
        (c->fetchers = emq__calloc(n, sizeof *c->fetchers)) == NULL) {
        pthread_mutex_unlock(&c->pull_mu);
        return emq__oom(err);
    }
    pthread_mutex_lock(&r->mu);
    r->running = (int)n;
    pthread_mutex_unlock(&r->mu);
    for (size_t i = 0; i < n; i++) {
        if (pthread_create(&c->fetchers[i], NULL, reader_main, all[i]) != 0) {
            st = emq__error_set(err, EMQ_ENOMEM, 0,
                                "could not start consumer thread %zu", i + 1);
            emq_consumer_stop(c);
            for (size_t k = i; k < n; k++) /* never started: ended */
                emq__ready_ended(r, EMQ_OK, NULL);
            break;
        }
        c->nfetchers = i + 1;
    }
    pthread_mutex_unlock(&c->pull_mu);
    return st;
}

emq_status emq_consumer_close(emq_consumer_t *c, int64_t timeout_ms,
                              emq_error *err) {
    emq__error_clear(err);
    pthread_mutex_lock(&c->pull_mu);
    emq__ready *r = c->ready;
    if (r == NULL) {
        pthread_mutex_unlock(&c->pull_mu);
        return EMQ_OK;
    }
    emq_consumer_stop(c);
    /* The stop (signal-safe) wakes nobody: a reading thread waiting for
     * room would see it only after block_ms. */
    emq__ready_notify(r);
    int64_t deadline = timeout_ms < 0 ? INT64_MAX : emq__now_ms() + timeout_ms;
    /* The reading threads wait for what is handed out to be settled; past
     * the deadline they stop waiting (closing) and end. */
    pthread_mutex_lock(&r->mu);
    while (r->running > 0) {
        if (emq__now_ms() >= deadline && !r->closing) {
            r->closing = 1;
            pthread_cond_broadcast(&r->room);
        }
        pthread_mutex_unlock(&r->mu);
        emq__sleep_ms(10);
        pthread_mutex_lock(&r->mu);
    }
    emq_status st = r->end_status;
    if (st != EMQ_OK && err != NULL)
        *err = r->end_err;
    pthread_mutex_unlock(&r->mu);
    join_readers(c);
    /* Ready to start again with the next poll. */
    emq__ready_reset(r);
    size_t n;
    emq_consumer_t *const *all = emq__consumer_members(c, &n);
    for (size_t i = 0; i < n; i++)
        emq__consumer_stop_clear(all[i]);
    emq__consumer_stop_clear(c);
    pthread_mutex_unlock(&c->pull_mu);
    return st;
}

void emq_consumer_destroy(emq_consumer_t *c) {
    if (c == NULL)
        return;
    emq_consumer_close(c, 0, NULL);
    emq__consumer_free(c);
}

/* ---- pull mode: handing out ---------------------------------------------- */

emq_status emq_consumer_poll(emq_consumer_t *c, emq_entry **entries, size_t max,
                             int64_t timeout_ms, size_t *n, emq_error *err) {
    emq__error_clear(err);
    if (n != NULL)
        *n = 0;
    if (c == NULL || entries == NULL || n == NULL || max == 0)
        return emq__error_set(err, EMQ_EINVAL, 0,
                              "emq_consumer_poll needs a consumer, an array "
                              "of max >= 1 entries and a count to set");
    emq_status st = pull_start(c, err);
    if (st != EMQ_OK)
        return st;
    return emq__ready_poll(c->ready, entries, max, timeout_ms, n, err);
}

emq_status emq_consumer_step(emq_consumer_t *c, emq_entry **entries, size_t max,
                             size_t *n, emq_error *err) {
    return emq_consumer_poll(c, entries, max, 0, n, err);
}

int emq_consumer_fd(emq_consumer_t *c, emq_error *err) {
    emq__error_clear(err);
    if (pull_start(c, err) != EMQ_OK)
        return -1;
    return emq__ready_fd(c->ready);
}

int64_t emq_consumer_timeout_ms(emq_consumer_t *c) {
    return c->ready != NULL && emq__ready_step_due(c->ready) ? 0 : -1;
}

void emq_entry_free(emq_entry *entry) {
    if (entry != NULL)
        emq__chunk_unref(((handout *)entry)->chunk);
}

void emq_consumer_pause(emq_consumer_t *c) {
    atomic_store(&c->paused, 1);
    if (c->ready != NULL)
        emq__ready_notify(c->ready);
}

void emq_consumer_resume(emq_consumer_t *c) {
    atomic_store(&c->paused, 0);
    if (c->ready != NULL)
        emq__ready_notify(c->ready);
}

/* ---- pull mode: settling from any thread --------------------------------- */

/* Why owner does not hold entry id (its settlement found it gone; err
 * says so as EMQ_EINVAL). A fatal error that ended owner's loop (whose
 * end forgot everything handed out) is reported as itself; an entry
 * handed out (h, when the caller has it) before the table was cleared is
 * EMQ_ELOST: its group was deleted meanwhile, so nothing is left to
 * settle, and the consumer goes on with the group it created again.
 * Else err is left as it is. Any thread. */
static emq_status not_held(emq_consumer_t *owner, const handout *h,
                           const char *id, emq_error *err) {
    if (atomic_load(&owner->fatal)) {
        emq_error fatal;
        pthread_mutex_lock(&owner->fatal_mu);
        fatal = owner->fatal_err;
        pthread_mutex_unlock(&owner->fatal_mu);
        if (err != NULL)
            *err = fatal;
        return fatal.code;
    }
    if (h != NULL && h->generation != atomic_load(&owner->table.generation))
        return emq__error_set(err, EMQ_ELOST, 0,
                              "entry %s: its group was deleted while it "
                              "was out (the consumer created the group "
                              "again; group_recreated counts it), so there "
                              "is nothing left to settle",
                              id);
    return EMQ_EINVAL;
}

/* Settles entry; h is its handout when the caller holds one (the batch
 * handler's), so a group deleted meanwhile tells from a settlement of an
 * entry never handed out. */
static emq_status settle_handout(emq_consumer_t *c, const emq_entry *entry,
                                 const handout *h, settle_kind kind,
                                 int64_t delay_ms, const char *reason,
                                 emq_error *err) {
    emq__error_clear(err);
    if (c == NULL || entry == NULL || entry->id == NULL)
        return emq__error_set(err, EMQ_EINVAL, 0,
                              "settling needs a consumer and an entry with "
                              "its ID");
    if (c->ready == NULL)
        return emq__error_set(err, EMQ_EINVAL, 0,
                              "consumer '%s' hands out nothing to settle: "
                              "only entries from emq_consumer_poll are "
                              "settled this way (a handler answers with its "
                              "verdict)",
                              c->name);
    emq_id id;
    emq__stream_id key; /* parsed once: the table finds the entry by it */
    size_t len = strlen(entry->id);
    if (len == 0 || len >= EMQ_ID_MAX ||
        emq__stream_id_parse(entry->id, len, &key) != 0) {
        char shown[80];
        return emq__error_set(
            err, EMQ_EINVAL, 0, "'%s' is not a stream entry ID",
            emq__printable(shown, sizeof shown, entry->id, len));
    }
    memcpy(id.str, entry->id, len + 1);
    emq_consumer_t *owner = emq__consumer_owner(c, entry, err);
    if (owner == NULL)
        return EMQ_EINVAL;
    /* Handed out before the table was cleared: settling it now could
     * settle the same ID handed out again since. */
    if (h != NULL && h->generation != atomic_load(&owner->table.generation))
        return not_held(owner, h, id.str, err);
    if (atomic_load(&owner->fatal) && !atomic_load(&owner->lease_lost)) {
        /* Ended by a fatal error other than a name lost: nothing more is
         * settled, and that error says why (not_held). */
        emq__inflight_forget(&owner->table, &id);
        return not_held(owner, h, id.str, err);
    }
    if (kind == SETTLE_RETRY && reason == NULL)
        reason = "handler asked for a retry";
    if (kind == SETTLE_DEAD && reason == NULL)
        reason = "handler gave up on the entry";
    settle_op op;
    emq_status st =
        emq__settle_make(owner, &id, entry->deliveries, kind, reason, &op, err);
    if (st != EMQ_OK)
        return st;
    op.key = key;
    if (kind == SETTLE_RETRY && delay_ms >= 0)
        op.delay_ms = delay_ms;
    int64_t handed_ms = 0;
    /* Nothing is settled past the lease's deadline (EMQ_ELOST: the entry
     * stays pending and comes back), a name lost included. */
    int fenced = !emq__lease_valid(owner);
    st = emq__inflight_settle_held(
        &owner->table, &op, (uint64_t)emq__cfg_max_deliveries(owner->conf),
        fenced, err, &handed_ms);
    if (st == EMQ_ELOST && fenced) /* pending to us: ours to bring back */
        emq__machine_post(&owner->machine, EMQ_POST_RECOVER_SELF);
    if (st == EMQ_EINVAL)
        st = not_held(owner, h, id.str, err);
    if (st != EMQ_OK)
        return st;
    if (emq__stats_on(owner)) {
        emq__stats_latency(owner, (emq__now_coarse_ms() - handed_ms) * 1000);
        emq__stats_delivery(owner, op.deliveries);
    }
    if (kind != SETTLE_ACK)
        atomic_fetch_add(&owner->stats.failed, 1);
    if (kind == SETTLE_RETRY)
        atomic_fetch_add(&owner->stats.retried, 1);
    emq__ready_settled(c->ready); /* room for one more */
    return EMQ_OK;
}

emq_status emq_consumer_ack(emq_consumer_t *c, const emq_entry *entry,
                            emq_error *err) {
    return settle_handout(c, entry, NULL, SETTLE_ACK, 0, NULL, err);
}

emq_status emq_consumer_retry(emq_consumer_t *c, const emq_entry *entry,
                              int64_t delay_ms, const char *reason,
                              emq_error *err) {
    return settle_handout(c, entry, NULL, SETTLE_RETRY, delay_ms, reason, err);
}

emq_status emq_consumer_dead(emq_consumer_t *c, const emq_entry *entry,
                             const char *reason, emq_error *err) {
    return settle_handout(c, entry, NULL, SETTLE_DEAD, 0, reason, err);
}

/* ---- the batch handler --------------------------------------------------- */

/* Settles one entry of a batch (a handout of c's own poll) by its
 * outcome. EMQ_ELOST (a peer took the entry over, or its group was
 * deleted while the batch ran) is no error of the run: the caller counts
 * and logs it. A fatal error that ended the consumer meanwhile comes back
 * as itself. */
static emq_status settle_outcome(emq_consumer_t *c, const emq_entry *e,
                                 emq_outcome *o, emq_error *err) {
    o->reason[sizeof o->reason - 1] = '\0';
    const char *reason = o->reason[0] ? o->reason : NULL;
    const handout *h = (const handout *)e;
    switch (o->verdict) {
    case EMQ_ACK:
        return settle_handout(c, e, h, SETTLE_ACK, 0, NULL, err);
    case EMQ_RETRY:
        return settle_handout(c, e, h, SETTLE_RETRY, -1, reason, err);
    case EMQ_DEAD:
    default:
        return settle_handout(c, e, h, SETTLE_DEAD, 0, reason, err);
    }
}

/* run with a batch handler: poll up to batch.max, call, settle, until a
 * stop; then close (everything handed out is settled by then). */
static emq_status batch_run(emq_consumer_t *c, emq_error *err) {
    if (atomic_exchange(&c->batch_running, 1))
        return emq__error_set(err, EMQ_EINVAL, 0,
                              "consumer '%s' is already running", c->name);
    size_t max = (size_t)emq__cfg_batch_max(c->conf);
    emq_entry **entries = emq__alloc(max * sizeof *entries);
    emq_outcome *outcomes = emq__alloc(max * sizeof *outcomes);
    emq_status st = entries && outcomes ? EMQ_OK : emq__oom(err);
    while (st == EMQ_OK) {
        size_t n = 0;
        st = emq_consumer_poll(c, entries, max, emq__cfg_block_ms(c->conf), &n,
                               err);
        if (st != EMQ_OK)
            break;
        /* EMQ_ACK (0), no reason, and 0 in the reserved room. */
        memset(outcomes, 0, n * sizeof *outcomes);
        if (n > 0)
            c->batch_handler(c->opaque, (const emq_entry *const *)entries, n,
                             outcomes);
        size_t lost = 0;
        emq_error one_err, lost_err;
        for (size_t i = 0; i < n; i++) {
            emq_status one =
                st == EMQ_OK
                    ? settle_outcome(c, entries[i], &outcomes[i], &one_err)
                    : EMQ_OK;
            if (one == EMQ_ELOST && lost++ == 0) {
                lost_err = one_err;
            } else if (one != EMQ_OK && one != EMQ_ELOST) {
                st = one;
                if (err != NULL)
                    *err = one_err;
            }
            emq_entry_free(entries[i]);
        }
        if (lost > 0) /* once per batch, naming the first */
            emq__consumer_log(c, EMQ_LOG_WARNING,
                              "%zu of the batch's %zu entries were not "
                              "settled: %s",
                              lost, n, lost_err.message);
    }
    if (st == EMQ_ECLOSED) /* stopped */
        st = EMQ_OK;
    emq_error close_err;
    emq_status closed = emq_consumer_close(c, -1, &close_err);
    if (st == EMQ_OK && closed != EMQ_OK) {
        st = closed;
        if (err != NULL)
            *err = close_err;
    } else if (st == EMQ_OK) {
        emq__error_clear(err);
    }
    emq__free(entries);
    emq__free(outcomes);
    atomic_store(&c->batch_running, 0);
    return st;
}
