/* SPDX-License-Identifier: BSD-3-Clause */
/* settle.c: the commands that settle entries, what their replies mean,
 * and the command of the ownership refresh.
 *
 * A settlement (settle_op) is decided on the thread that handled the
 * entry and queued in the in-flight table. Two threads send them, in
 * rounds of at most emq__settle_ops_max: the run thread puts those decided
 * since its last read in front of its next XREADGROUP (one round trip,
 * consumer.c), and the upkeep thread (upkeep.c) sends those that waited
 * longer than EMQ_SETTLE_DELAY_MS. A round (emq__settle_append) is, in
 * this order:
 *   retry    the failure reasons (one HSET) and the entries' places in
 *            the retry schedule (one script: a sorted set in the queue's
 *            hashtag scored by the server's clock, so it survives a crash
 *            of this process), two commands of one key each; first, so
 *            that an ack of the same entry cleans up after them;
 *   ack      XACK of up to EMQ_SETTLE_MAX_IDS ids in one command; after a
 *            redelivery also HDEL of the failure reasons and ZREM from the
 *            retry schedule, so neither leaks;
 *   gone     the same for entries deleted or trimmed while pending;
 *   release  entries read or taken and not handed out (a stop cut the
 *            batch short): one script that, for each entry still pending
 *            to THIS consumer with the count it was handed with, sets the
 *            count one lower and keeps its idle time; it stays pending
 *            and comes back (recover self), counted once;
 *   dead     the dead-letter script, one per entry: one atomic step over
 *            keys of one hashtag that moves the entry only if it is still
 *            pending to THIS consumer, writes the dead letter before the
 *            ack (a refused write leaves it pending), and clears its
 *            reason and schedule; an entry too wide for the script (Lua's
 *            unpack) is written by the sending thread itself, marked so
 *            that a retried move writes it once (emq__settle_finish); the
 *            one command here naming several keys, so a migrating slot
 *            answers it TRYAGAIN (warned about, see check_held).
 * emq__settle_apply reads each reply: a "not now" reply (LOADING, BUSY,
 * an OOM to XACK, ...) sends the round again later; READONLY fails the
 * round, retriable (the session finds the master); a refusal that will
 * not change by itself (NOPERM, WRONGTYPE) stops the consumer, as settled
 * entries would otherwise be handled again forever; any other error reply
 * is logged and its entry stays pending and comes back. emq__settle_finish
 * then forgets what was settled and queues again what has an unknown
 * outcome: every settlement is idempotent, so it may be sent again after
 * a transport failure.
 *
 * The refresh is one script too, on the stream key alone (a migrating
 * slot does not stop it): for each id still pending to this consumer,
 * XCLAIM ... <me> 0 ... JUSTID, which resets its idle time without
 * counting a delivery; ids a peer claimed meanwhile are left alone (an
 * XCLAIM alone would take them back) and reported lost; ids no longer in
 * the stream are reported gone, their clean-up a settlement of its own.
 *
 * A dead letter holds the origin first, then the entry's own fields:
 *   emq.id <id> emq.group <group> emq.consumer <consumer>
 *   emq.deliveries <n> emq.reason <text> <field> <value> ...
 */
#include "settle.h"
#include "core.h"
#include "inflight.h"
#include "tags.h"

#include <stdio.h>
#include <string.h>

/* Reply tags of settlement commands (tags.h). */
enum {
    TAG_XACK = EMQ_TAG(EMQ_TAGS_SETTLE, 1), /* its ids are acknowledged */
    TAG_CLEANUP, /* HDEL of reasons / ZREM from the schedule */
    TAG_RETRY,   /* the retries: reasons HSET, schedule script */
    TAG_DEAD,    /* the dead-letter script */
    TAG_RELEASE, /* the release script */
    TAG_WAIT     /* deliveries.wait_replicas: the round replicated */
};

/* Settlements short of deliveries.wait_replicas are warned about at most
 * this often. */
#define WAIT_WARNING_EVERY_MS 10000

int64_t emq__settle_retry_delay(emq_consumer_t *c, uint64_t deliveries) {
    int64_t base = emq__cfg_retry_backoff_ms(c->conf);
    if (base <= 0)
        return 0;
    unsigned attempt = deliveries > 1 ? (unsigned)(deliveries - 1) : 0;
    if (attempt > 62)
        attempt = 62;
    /* A seed of its own for each call: settlements come from any thread. */
    uint64_t rng = atomic_fetch_add(&c->rng, 0x9E3779B97F4A7C15ULL);
    return emq__backoff_delay(base, emq__cfg_retry_backoff_max_ms(c->conf),
                              attempt, &rng);
}

emq_status emq__settle_make(emq_consumer_t *c, const emq_id *id,
                            uint64_t deliveries, settle_kind kind,
                            const char *reason, settle_op *op, emq_error *err) {
    *op = (settle_op){.kind = kind, .id = *id, .deliveries = deliveries};
    if (reason != NULL && (op->reason = emq__strdup(reason)) == NULL)
        return emq__oom(err);
    if (kind == SETTLE_RETRY)
        op->delay_ms = emq__settle_retry_delay(c, deliveries);
    return EMQ_OK;
}

/* Appends one command of many ids: argv[0..nfixed) then the ids. */
static emq_status append_with_ids(emq__session *x, int tag, const char **fixed,
                                  size_t nfixed, const emq_id *const *ids,
                                  size_t nids, emq_error *err) {
    size_t argc = nfixed + nids;
    /* The words and their lengths in one block; each length measured
     * once (the encoder would measure it twice). */
    _Static_assert(_Alignof(size_t) <= _Alignof(const char *),
                   "the lengths follow the words");
    const char **argv = emq__alloc(argc * (sizeof *argv + sizeof(size_t)));
    if (argv == NULL)
        return emq__oom(err);
    size_t *lens = (size_t *)(argv + argc);
    memcpy(argv, fixed, nfixed * sizeof *argv);
    for (size_t i = 0; i < nfixed; i++)
        lens[i] = strlen(fixed[i]);
    for (size_t i = 0; i < nids; i++) {
        argv[nfixed + i] = ids[i]->str;
        lens[nfixed + i] = strlen(ids[i]->str);
    }
    emq_status st = emq__session_append(x, tag, (int)argc, argv, lens, err);
    emq__free(argv);
    return st;
}

/* The words of the dead-letter script's call for op (11, into argv). */
static void dead_words(const emq_consumer_t *c, emq__session *x,
                       const settle_op *op, const char *argv[11]) {
    const char *words[] = {"",
                           "",
                           "4",
                           c->keys.stream,
                           c->keys.dead,
                           c->reasons_key,
                           c->retry_key,
                           c->group,
                           op->id.str,
                           c->name,
                           op->reason ? op->reason : ""};
    memcpy(argv, words, sizeof words);
    emq__script_head(EMQ_SCRIPT_DEADLETTER, emq__session_functions(x), argv);
}

static emq_status append_dead(emq_consumer_t *c, emq__session *x,
                              const settle_op *op, emq_error *err) {
    const char *argv[11];
    dead_words(c, x, op, argv);
    return emq__session_append(x, TAG_DEAD, 11, argv, NULL, err);
}

/* Appends one release script for every SETTLE_RELEASE op of ops[0..n). */
static emq_status append_release(emq_consumer_t *c, emq__session *x,
                                 const settle_op *ops, size_t n,
                                 emq_error *err) {
    size_t nrel = 0;
    for (size_t i = 0; i < n; i++)
        nrel += ops[i].kind == SETTLE_RELEASE;
    if (nrel == 0)
        return EMQ_OK;
    size_t argc = 6 + 2 * nrel;
    const char **argv = emq__alloc(argc * sizeof *argv);
    char(*counts)[24] = emq__alloc(nrel * sizeof *counts);
    emq_status st = EMQ_OK;
    if (argv == NULL || counts == NULL) {
        st = emq__oom(err);
    } else {
        const char *fixed[] = {"", "", "1", c->keys.stream, c->group, c->name};
        memcpy(argv, fixed, sizeof fixed);
        emq__script_head(EMQ_SCRIPT_RELEASE, emq__session_functions(x), argv);
        size_t k = 0;
        for (size_t i = 0; i < n; i++) {
            if (ops[i].kind != SETTLE_RELEASE)
                continue;
            snprintf(counts[k], sizeof counts[k], "%llu",
                     (unsigned long long)ops[i].deliveries);
            argv[6 + 2 * k] = ops[i].id.str;
            argv[7 + 2 * k] = counts[k];
            k++;
        }
        st = emq__session_append(x, TAG_RELEASE, (int)argc, argv, NULL, err);
    }
    emq__free(argv);
    emq__free(counts);
    return st;
}

/* Appends the retries of ops[0..n): one HSET of their reasons, one
 * schedule script of their delays (two commands however many). */
static emq_status append_retries(emq_consumer_t *c, emq__session *x,
                                 const settle_op *ops, size_t n,
                                 emq_error *err) {
    size_t nretry = 0;
    for (size_t i = 0; i < n; i++)
        nretry += ops[i].kind == SETTLE_RETRY;
    if (nretry == 0)
        return EMQ_OK;
    const char **hset = emq__alloc((2 + 2 * nretry) * sizeof *hset);
    const char **sched = emq__alloc((4 + 2 * nretry) * sizeof *sched);
    char(*delays)[24] = emq__alloc(nretry * sizeof *delays);
    emq_status st = EMQ_OK;
    if (hset == NULL || sched == NULL || delays == NULL) {
        st = emq__oom(err);
    } else {
        hset[0] = "HSET";
        hset[1] = c->reasons_key;
        emq__script_head(EMQ_SCRIPT_RETRY, emq__session_functions(x), sched);
        sched[2] = "1";
        sched[3] = c->retry_key;
        size_t k = 0;
        for (size_t i = 0; i < n; i++) {
            if (ops[i].kind != SETTLE_RETRY)
                continue;
            snprintf(delays[k], sizeof delays[k], "%lld",
                     (long long)ops[i].delay_ms);
            hset[2 + 2 * k] = sched[4 + 2 * k] = ops[i].id.str;
            hset[3 + 2 * k] = ops[i].reason ? ops[i].reason : "";
            sched[5 + 2 * k] = delays[k];
            k++;
        }
        st = emq__session_append(x, TAG_RETRY, (int)(2 + 2 * nretry), hset,
                                 NULL, err);
        if (st == EMQ_OK)
            st = emq__session_append(x, TAG_RETRY, (int)(4 + 2 * nretry), sched,
                                     NULL, err);
    }
    emq__free(hset);
    emq__free(sched);
    emq__free(delays);
    return st;
}

size_t emq__settle_ops_max(const emq_consumer_t *c) {
    int64_t room = emq__cfg_pipeline_max(c->conf) - EMQ_ROUND_FIXED_COMMANDS;
    return room >= EMQ_SETTLE_MAX_IDS ? EMQ_SETTLE_MAX_IDS : (size_t)room;
}

/* A round of settlements held up by TRYAGAIN (a script naming keys the
 * node lacks while the slot migrates: the dead-letter move) holds up its
 * thread's next refresh too: the route retries it for up to
 * cluster.retry_ms. One that outlasts a quarter of claim.min_idle_ms is
 * warned about, once per episode. Per sending thread: when it appended its
 * round, its route's TRYAGAIN count then, and whether it has warned. */
static _Thread_local struct {
    int64_t at;
    uint64_t tryagain;
    int warned;
} held;

static uint64_t route_tryagain(emq__session *x) {
    emq__route_stats rs;
    emq__route_stats_get(x->route, &rs);
    return rs.tryagain;
}

emq_status emq__settle_append(emq_consumer_t *c, emq__session *x,
                              const settle_op *ops, size_t n, emq_error *err) {
    const emq_id **acks = emq__alloc((n ? n : 1) * sizeof *acks);
    const emq_id **clean = emq__alloc((n ? n : 1) * sizeof *clean);
    emq_status st = EMQ_OK;
    held.at = emq__now_ms();
    held.tryagain = route_tryagain(x);
    if (acks == NULL || clean == NULL) {
        st = emq__oom(err);
        goto done;
    }
    /* Retries first: an entry retried with no delay may come back, be
     * handled and acknowledged before its retry was sent, and its ack's
     * HDEL and ZREM must come after the retry's HSET and ZADD (the retry
     * no longer looks whether the entry is still pending). */
    if ((st = append_retries(c, x, ops, n, err)) != EMQ_OK)
        goto done;
    size_t nacks = 0, nclean = 0;
    for (size_t i = 0; i < n; i++) {
        if (ops[i].kind != SETTLE_ACK && ops[i].kind != SETTLE_GONE)
            continue;
        acks[nacks++] = &ops[i].id;
        if (ops[i].kind == SETTLE_GONE || ops[i].deliveries > 1)
            clean[nclean++] = &ops[i].id;
    }
    if (nacks > 0) {
        const char *xack[] = {"XACK", c->keys.stream, c->group};
        if ((st = append_with_ids(x, TAG_XACK, xack, 3, acks, nacks, err)) !=
            EMQ_OK)
            goto done;
    }
    if (nclean > 0) {
        const char *hdel[] = {"HDEL", c->reasons_key};
        const char *zrem[] = {"ZREM", c->retry_key};
        if ((st = append_with_ids(x, TAG_CLEANUP, hdel, 2, clean, nclean,
                                  err)) != EMQ_OK ||
            (st = append_with_ids(x, TAG_CLEANUP, zrem, 2, clean, nclean,
                                  err)) != EMQ_OK)
            goto done;
    }
    if ((st = append_release(c, x, ops, n, err)) != EMQ_OK)
        goto done;
    for (size_t i = 0; i < n && st == EMQ_OK; i++)
        if (ops[i].kind == SETTLE_DEAD)
            st = append_dead(c, x, &ops[i], err);
    long long want;
    if (st == EMQ_OK && n > 0)
        st = emq__consumer_append_wait(c, x, TAG_WAIT, &want, err);
done:
    emq__free(acks);
    emq__free(clean);
    return st;
}

/* ---- dead letters too wide for the script ------------------------------ */

/* Records that the k-th dead-letter move of the round answered "too wide"
 * ({2, reason, deliveries}). */
static emq_status note_wide(settle_round *r, size_t k, const emq_reply *reply,
                            emq_error *err) {
    size_t len = 0;
    const char *reason = emq_reply_str(emq_reply_at(reply, 1), &len);
    if (emq_reply_len(reply) != 3 || reason == NULL)
        return emq__reply_bad_shape(err, "the dead-letter move answered an "
                                         "array that is not {2, reason, "
                                         "deliveries}");
    if (r->nwide == r->wide_cap) {
        size_t cap = r->wide_cap ? 2 * r->wide_cap : 4;
        settle_wide *grown = emq__realloc(r->wide, cap * sizeof *grown);
        if (grown == NULL)
            return emq__oom(err);
        r->wide = grown;
        r->wide_cap = cap;
    }
    settle_wide *w = &r->wide[r->nwide];
    if ((w->reason = emq__alloc(len + 1)) == NULL)
        return emq__oom(err);
    memcpy(w->reason, reason, len);
    w->reason[len] = '\0';
    long long n = emq_reply_integer(emq_reply_at(reply, 2));
    snprintf(w->deliveries, sizeof w->deliveries, "%lld", n > 0 ? n : 1);
    w->index = k;
    r->nwide++;
    return EMQ_OK;
}

static void wide_free(settle_round *r) {
    for (size_t i = 0; i < r->nwide; i++)
        emq__free(r->wide[i].reason);
    emq__free(r->wide);
    r->wide = NULL;
    r->nwide = r->wide_cap = 0;
}

/* The k-th SETTLE_DEAD of ops[0..n) (append order: the k-th dead-letter
 * reply), or NULL. */
static settle_op *nth_dead(settle_op *ops, size_t n, size_t k) {
    for (size_t i = 0; i < n; i++)
        if (ops[i].kind == SETTLE_DEAD && k-- == 0)
            return &ops[i];
    return NULL;
}

/* Calls the dead-letter script for op on x; *reply is its answer. */
static emq_status call_dead(emq_consumer_t *c, emq__session *x,
                            const settle_op *op, emq_reply **reply,
                            emq_error *err) {
    const char *argv[11];
    dead_words(c, x, op, argv);
    return emq__session_call(x, 0, 11, argv, NULL, reply, err);
}

/* XADD of the dead letter of op, its origin then every field of entry
 * (an XRANGE reply's [id, fields]), in one command of any width. */
static emq_status add_wide(emq_consumer_t *c, emq__session *x,
                           const settle_op *op, const settle_wide *w,
                           const emq_reply *entry, emq_reply **reply,
                           emq_error *err) {
    const emq_reply *fields = emq_reply_at(entry, 1);
    size_t nf = emq_reply_len(fields), argc = 13 + nf;
    const char **argv = emq__alloc(argc * sizeof *argv);
    size_t *lens = emq__alloc(argc * sizeof *lens);
    emq_status st;
    if (argv == NULL || lens == NULL) {
        st = emq__oom(err);
    } else {
        const char *head[] = {"XADD",           c->keys.dead,   "*",
                              "emq.id",         op->id.str,     "emq.group",
                              c->group,         "emq.consumer", c->name,
                              "emq.deliveries", w->deliveries,  "emq.reason",
                              w->reason};
        for (size_t i = 0; i < 13; i++) {
            argv[i] = head[i];
            lens[i] = strlen(head[i]);
        }
        for (size_t i = 0; i < nf; i++) {
            argv[13 + i] =
                emq_reply_str(emq_reply_at(fields, i), &lens[13 + i]);
            if (argv[13 + i] == NULL) {
                argv[13 + i] = "";
                lens[13 + i] = 0;
            }
        }
        st = emq__session_call(x, 0, (int)argc, argv, lens, reply, err);
    }
    emq__free(argv);
    emq__free(lens);
    return st;
}

/* The session of the calling thread: the upkeep's on its thread, else
 * the run thread's (the only two that send settlements). */
static emq__session *own_session(emq_consumer_t *c) {
    if (c->upkeep.started && pthread_equal(pthread_self(), c->upkeep.thread))
        return &c->upkeep.x;
    return &c->rx;
}

/* Moves the entry of op, too wide for the dead-letter script, with every
 * field: the script has marked the move begun; this reads the entry, adds
 * the dead letter, and calls the script again, which finds it and
 * acknowledges (a second call after a lost reply finds it too, so nothing
 * is written twice). EMQ_OK when it is settled (moved, or not ours any
 * more, or it cannot be moved: then it stays pending, an error is logged
 * naming the entry and the limit, and it comes back after
 * claim.min_idle_ms); else the outcome is unknown and the op is sent
 * again. */
static emq_status wide_move(emq_consumer_t *c, settle_op *op,
                            const settle_wide *w) {
    emq__session *x = own_session(c);
    emq_error err;
    emq_reply *reply = NULL;
    const char *xrange[] = {"XRANGE", c->keys.stream, op->id.str, op->id.str};
    emq_status st = emq__session_call(x, 0, 4, xrange, NULL, &reply, &err);
    if (st != EMQ_OK)
        goto unknown;
    const emq_reply *entry = emq_reply_at(reply, 0);
    if (emq_reply_kind(reply) == EMQ_REPLY_ARRAY && entry != NULL &&
        emq_reply_kind(emq_reply_at(entry, 1)) == EMQ_REPLY_ARRAY) {
        emq_reply *added = NULL;
        st = add_wide(c, x, op, w, entry, &added, &err);
        if (st == EMQ_OK && emq_reply_kind(added) == EMQ_REPLY_ERROR) {
            char shown[200];
            emq__consumer_log(
                c, EMQ_LOG_ERROR,
                "entry %s (%zu fields) cannot be moved to the dead letters "
                "whole: the XADD of all its fields was refused (%s); it is "
                "not truncated: it stays pending and comes back after "
                "claim.min_idle_ms",
                op->id.str, emq_reply_len(emq_reply_at(entry, 1)) / 2,
                emq__reply_text(added, shown, sizeof shown));
            emq_reply_free(added);
            emq_reply_free(reply);
            return EMQ_OK;
        }
        emq_reply_free(added);
        if (st != EMQ_OK)
            goto unknown;
    }
    /* Gone meanwhile: the script writes the origin alone, as for any
     * entry deleted while pending. */
    emq_reply_free(reply);
    reply = NULL;
    if ((st = call_dead(c, x, op, &reply, &err)) != EMQ_OK)
        goto unknown;
    if (emq_reply_kind(reply) == EMQ_REPLY_INTEGER) {
        if (emq_reply_integer(reply) == 1)
            atomic_fetch_add(&c->stats.dead_lettered, 1);
        emq_reply_free(reply);
        return EMQ_OK;
    }
    char shown[200];
    emq__consumer_log(c, EMQ_LOG_ERROR,
                      "entry %s: the dead-letter move of an entry wider "
                      "than %d field names and values did not complete "
                      "(%s); it stays pending and is tried again",
                      op->id.str, EMQ_DEAD_SCRIPT_MAX_ARGS,
                      emq__reply_text(reply, shown, sizeof shown));
    emq_reply_free(reply);
    return EMQ_EAGAIN;
unknown:
    emq_reply_free(reply);
    emq__consumer_log(c, EMQ_LOG_WARNING,
                      "entry %s: moving a wide entry to the dead letters "
                      "failed (%s); tried again",
                      op->id.str, err.message);
    return st;
}

/* Refusals that will not change by themselves: a settlement refused this
 * way would be redone forever, so the consumer stops. */
static int permanent(const emq_reply *r) {
    return emq__reply_refused(r) || emq__reply_mentions(r, "WRONGTYPE");
}

/* The WAIT behind a round of settlements reached got replicas: short of
 * deliveries.wait_replicas, said at warning level now and then (they are
 * written; a failover now may roll them back, and their entries come back
 * counted: their handouts' records were replicated). */
static void settled_waited(emq_consumer_t *c, long long got) {
    long long want = (long long)emq__cfg_deliveries_wait_replicas(c->conf);
    if (got >= want)
        return;
    int64_t now = emq__now_ms(), last = atomic_load(&c->settle_warned_ms);
    if ((last != 0 && now < last + WAIT_WARNING_EVERY_MS) ||
        !atomic_compare_exchange_strong(&c->settle_warned_ms, &last, now))
        return;
    emq__consumer_log(c, EMQ_LOG_WARNING,
                      "settlements reached %lld of %lld replicas within %lld "
                      "ms (deliveries.wait_replicas, "
                      "deliveries.wait_timeout_ms): a failover now may hand "
                      "their entries out again",
                      got, want,
                      (long long)emq__cfg_deliveries_wait_timeout_ms(c->conf));
}

emq_status emq__settle_apply(void *round, int tag, const emq_reply *reply,
                             emq_error *err) {
    settle_round *r = round;
    emq_consumer_t *c = r->c;
    static const char *const names[] = {"",
                                        "XACK",
                                        "clearing failure reasons",
                                        "recording a retry",
                                        "the dead-letter move",
                                        "handing back unhandled entries",
                                        "WAIT for the settlements' replicas"};
    const char *what =
        tag >= TAG_XACK && tag <= TAG_WAIT ? names[EMQ_TAG_NUMBER(tag)] : "?";
    if (emq_reply_kind(reply) == EMQ_REPLY_ERROR) {
        if (emq__reply_not_now(reply,
                               tag == TAG_XACK ? EMQ_SESSION_WAIT_OOM : 0)) {
            r->again = 1; /* did not run: send again later */
            return EMQ_OK;
        }
        if (permanent(reply)) {
            emq_status st = emq__reply_error_set(
                err, reply,
                /* Settled entries would come back for ever: the consumer
                 * stops. Short words, so the reply's text fits. */
                "%s was refused%s; the consumer stops (grant it or fix the "
                "key)",
                what,
                emq__reply_refused(reply) &&
                        !emq__reply_mentions(reply, "NOPERM")
                    ? " (NOPERM)"
                    : "");
            emq__consumer_fatal(c, err);
            return st;
        }
        char shown[200];
        emq__consumer_log(c, EMQ_LOG_WARNING,
                          "%s failed: %s (the entry stays pending and comes "
                          "back)",
                          what, emq__reply_text(reply, shown, sizeof shown));
        return EMQ_OK;
    }
    if (tag == TAG_WAIT) {
        settled_waited(c, emq_reply_integer(reply));
    } else if (tag == TAG_XACK) {
        long long n = emq_reply_integer(reply);
        atomic_fetch_add(&c->stats.acked, (uint64_t)(n > 0 ? n : 0));
    } else if (tag == TAG_DEAD) {
        size_t k = r->ndead++;
        if (emq_reply_kind(reply) == EMQ_REPLY_ARRAY)
            return note_wide(r, k, reply, err);
        if (emq_reply_integer(reply) == 1)
            atomic_fetch_add(&c->stats.dead_lettered, 1);
    } else if (tag == TAG_RELEASE) {
        long long n = emq_reply_integer(reply);
        atomic_fetch_add(&c->stats.released, (uint64_t)(n > 0 ? n : 0));
        /* Pending to us and no longer in hand: unless the run is ending,
         * recover self takes them again. */
        if (n > 0)
            emq__machine_post(&c->machine, EMQ_POST_RECOVER_SELF);
    }
    return EMQ_OK;
}

/* Warns once per episode when this thread's round was held up by
 * TRYAGAIN past a quarter of claim.min_idle_ms; says when it is over. */
static void check_held(emq_consumer_t *c) {
    /* The run thread's rounds end with a blocking read: not measured (and
     * the upkeep refreshes while the run thread waits). */
    if (held.at == 0 || own_session(c) != &c->upkeep.x)
        return;
    int64_t took = emq__now_ms() - held.at;
    int tryagain = route_tryagain(own_session(c)) > held.tryagain;
    held.at = 0;
    if (tryagain && took > emq__cfg_claim_min_idle_ms(c->conf) / 4) {
        if (!held.warned)
            emq__consumer_log(
                c, EMQ_LOG_WARNING,
                "settlements were answered TRYAGAIN for %lld ms (the "
                "queue's slot is being migrated; a dead-letter move names "
                "keys the node may not have): in-flight entries were not "
                "refreshed meanwhile, and a peer may take them after "
                "claim.min_idle_ms",
                (long long)took);
        held.warned = 1;
    } else if (held.warned && !tryagain) {
        emq__consumer_log(c, EMQ_LOG_INFO,
                          "settlements go through without TRYAGAIN again");
        held.warned = 0;
    }
}

void emq__settle_finish(emq_consumer_t *c, settle_op *ops, size_t n,
                        emq_status st, settle_round *r) {
    check_held(c);
    if (n == 0) { /* a read that carried none (ops may be NULL) */
        wide_free(r);
        return;
    }
    if (st == EMQ_OK && !r->again) {
        /* Dead letters too wide for the script: written from here, one by
         * one; those whose outcome is unknown go to the end of ops and are
         * queued again. */
        size_t keep = n;
        /* Not while a read is owed on the session (a read sent ahead):
         * queued again, for a round with nothing owed. */
        int owed = emq__session_owed(own_session(c)) > 0;
        for (size_t w = 0; w < r->nwide; w++) {
            settle_op *op = nth_dead(ops, keep, r->wide[w].index);
            if (op != NULL &&
                (owed || wide_move(c, op, &r->wide[w]) != EMQ_OK)) {
                settle_op tmp = *op;
                *op = ops[keep - 1];
                ops[keep - 1] = tmp;
                keep--;
            }
        }
        wide_free(r);
        emq__inflight_settled(&c->table, ops, keep);
        for (size_t i = 0; i < keep; i++)
            emq__settle_op_free(&ops[i]);
        emq__inflight_requeue(&c->table, ops + keep, n - keep);
        return;
    }
    wide_free(r);
    /* Outcome unknown, or not run: send them again (idempotent). */
    emq__inflight_requeue(&c->table, ops, n);
}

emq_status emq__settle_append_refresh(emq_consumer_t *c, emq__session *x,
                                      const emq_id *ids, size_t n, int tag,
                                      emq_error *err) {
    size_t argc = 6 + n;
    const char **argv = emq__alloc(argc * sizeof *argv);
    if (argv == NULL)
        return emq__oom(err);
    emq__script_head(EMQ_SCRIPT_REFRESH, emq__session_functions(x), argv);
    argv[2] = "1";
    argv[3] = c->keys.stream;
    argv[4] = c->group;
    argv[5] = c->name;
    for (size_t i = 0; i < n; i++)
        argv[6 + i] = ids[i].str;
    emq_status st = emq__session_append(x, tag, (int)argc, argv, NULL, err);
    emq__free(argv);
    return st;
}
