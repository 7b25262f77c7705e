/* SPDX-License-Identifier: BSD-3-Clause */
/* settle.c: the commands that settle entries, and the ownership refresh.
 *
 * A settlement is decided on the thread that handled the entry and sent
 * by the upkeep thread (upkeep.c) in bounded pipelines:
 *   ack      XACK of up to EMQ_SETTLE_MAX_IDS ids in one command; after a
 *            redelivery also HDEL of the failure reasons and ZREM from the
 *            retry schedule, so neither leaks;
 *   gone     the same for entries deleted or trimmed while pending;
 *   retry    one script: the failure reason and the entry's place in the
 *            retry schedule (a sorted set in the queue's hashtag scored by
 *            the server's clock, so it survives a crash of this process);
 *   dead     the dead-letter script: one atomic step over keys of one
 *            hashtag that moves the entry only if it is still pending to
 *            THIS consumer, writes the dead letter before the ack (a
 *            refused write leaves it pending), and clears its reason and
 *            schedule;
 *   release  entries read or taken and not handed out (a stop cut the
 *            batch short): one script per round that, for each entry
 *            still pending to THIS consumer with the count it was handed
 *            with, sets the count one lower and keeps its idle time; it
 *            stays pending and comes back, counted once.
 * Every settlement is idempotent, so the upkeep thread sends them again
 * after a transport failure whose outcome it cannot know.
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
#include "exchange.h"
#include "inflight.h"

#include <stdio.h>
#include <string.h>

/* Reply tags of settlement commands. */
enum {
    TAG_XACK = 1,   /* its ids are acknowledged */
    TAG_CLEANUP,    /* HDEL of reasons / ZREM from the schedule */
    TAG_RETRY,      /* the retry script */
    TAG_DEAD,       /* the dead-letter script */
    TAG_RELEASE     /* the release script */
};

static const char retry_script[] =
    "if redis.replicate_commands then pcall(redis.replicate_commands) end\n"
    "local p = redis.call('XPENDING', KEYS[3], ARGV[4], ARGV[1], ARGV[1], 1,"
    " ARGV[5])\n"
    "if #p == 0 then return 0 end\n"
    "local t = redis.call('TIME')\n"
    "local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)\n"
    "redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])\n"
    "redis.call('ZADD', KEYS[2], now + tonumber(ARGV[3]), ARGV[1])\n"
    "return 1\n";

/* Most field names and values a dead letter keeps (an even number): the
 * script passes them to XADD through Lua's unpack, whose stack holds about
 * 8000 values; an entry with more keeps its first ones (it is still moved
 * and acked). */
#define DEAD_MAX_ARGS_TEXT "7000"

/* KEYS: stream, dead letters, reasons, schedule. ARGV: group, id, me,
 * reason (empty: the recorded one). The dead letter copies the entry's
 * fields from the stream itself, so a settlement needs no copy of them
 * (and one decided from any thread later has them too). */
static const char deadletter_script[] =
    "local p = redis.call('XPENDING', KEYS[1], ARGV[1], ARGV[2], ARGV[2], 1,"
    " ARGV[3])\n"
    "if #p == 0 then return 0 end\n"
    "local reason = ARGV[4]\n"
    "if reason == '' then\n"
    "  reason = redis.call('HGET', KEYS[3], ARGV[2])\n"
    "  if not reason then\n"
    "    reason = 'delivered ' .. p[1][4] .. ' times without an "
    "acknowledgement'\n"
    "  end\n"
    "end\n"
    "local args = {'emq.id', ARGV[2], 'emq.group', ARGV[1],\n"
    "  'emq.consumer', ARGV[3], 'emq.deliveries', tostring(p[1][4]),\n"
    "  'emq.reason', reason}\n"
    "local e = redis.call('XRANGE', KEYS[1], ARGV[2], ARGV[2])\n"
    "if e[1] then\n"
    "  local f = e[1][2]\n"
    "  for i = 1, math.min(#f, " DEAD_MAX_ARGS_TEXT ") do"
    " args[#args + 1] = f[i] end\n"
    "end\n"
    "redis.call('XADD', KEYS[2], '*', unpack(args))\n"
    "redis.call('XACK', KEYS[1], ARGV[1], ARGV[2])\n"
    "redis.call('HDEL', KEYS[3], ARGV[2])\n"
    "redis.call('ZREM', KEYS[4], ARGV[2])\n"
    "return 1\n";

/* KEYS: stream. ARGV: group, me, then pairs of id and the delivery count
 * it was read or taken with. Returns how many were released. */
static const char release_script[] =
    "local released = 0\n"
    "for i = 3, #ARGV - 1, 2 do\n"
    "  local p = redis.call('XPENDING', KEYS[1], ARGV[1], ARGV[i], ARGV[i],"
    " 1, ARGV[2])\n"
    "  if #p == 1 and p[1][4] == tonumber(ARGV[i + 1]) then\n"
    "    redis.call('XCLAIM', KEYS[1], ARGV[1], ARGV[2], 0, ARGV[i], 'IDLE',"
    " p[1][3], 'RETRYCOUNT', p[1][4] - 1, 'JUSTID')\n"
    "    released = released + 1\n"
    "  end\n"
    "end\n"
    "return released\n";

/* KEYS: stream (alone: see below). ARGV: group, me, ids... Returns {ids
 * still ours, now refreshed; ids whose entry is no longer in the stream
 * (deleted or trimmed while pending): acknowledged here if still pending
 * to me}. An entry not in the stream is "gone" whoever holds it now: a
 * peer's XAUTOCLAIM (7.0+) drops deleted entries from every consumer's
 * pending list, which must not read as a loss of ownership. An XCLAIM
 * alone would drop a deleted entry from the pending list silently (7.0+).
 *
 * The stream key alone, so that a slot being migrated never stops it: a
 * script naming a key the node does not have (the reasons and schedule of
 * a fresh queue) gets TRYAGAIN from CLUSTER SETSLOT ... MIGRATING until
 * the slot is final, while XREADGROUP goes on handing out work. The gone
 * entries' reasons and schedule are cleared by a settlement of their own
 * (SETTLE_GONE: XACK, HDEL, ZREM, each of one key), queued by
 * emq__inflight_refreshed. */
static const char refresh_script[] =
    "local mine, gone = {}, {}\n"
    "for i = 3, #ARGV do\n"
    "  local id = ARGV[i]\n"
    "  local p = redis.call('XPENDING', KEYS[1], ARGV[1], id, id, 1, ARGV[2])\n"
    "  if #redis.call('XRANGE', KEYS[1], id, id) == 0 then\n"
    "    if #p == 1 then redis.call('XACK', KEYS[1], ARGV[1], id) end\n"
    "    gone[#gone + 1] = id\n"
    "  elseif #p == 1 then\n"
    "    mine[#mine + 1] = id\n"
    "  end\n"
    "end\n"
    "if #mine == 0 then return {mine, gone} end\n"
    "local n = #mine\n"
    "mine[n + 1] = 'JUSTID'\n"
    "redis.call('XCLAIM', KEYS[1], ARGV[1], ARGV[2], 0, unpack(mine))\n"
    "mine[n + 1] = nil\n"
    "return {mine, gone}\n";

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
static emq_status append_with_ids(emq__xchg *x, int tag, const char **fixed,
                                  size_t nfixed, const emq_id *const *ids,
                                  size_t nids, emq_error *err) {
    size_t argc = nfixed + nids;
    const char **argv = emq__alloc(argc * sizeof *argv);
    if (argv == NULL)
        return emq__oom(err);
    memcpy(argv, fixed, nfixed * sizeof *argv);
    for (size_t i = 0; i < nids; i++)
        argv[nfixed + i] = ids[i]->str;
    emq_status st = emq__xchg_append(x, tag, (int)argc, argv, NULL, err);
    emq__free(argv);
    return st;
}

static emq_status append_dead(emq_consumer_t *c, emq__xchg *x,
                              const settle_op *op, emq_error *err) {
    const char *argv[] = {"EVAL", deadletter_script, "4", c->keys.stream,
                          c->keys.dead, c->reasons_key, c->retry_key,
                          c->group, op->id.str, c->name,
                          op->reason ? op->reason : ""};
    return emq__xchg_append(x, TAG_DEAD, 11, argv, NULL, err);
}

/* Appends one release script for every SETTLE_RELEASE op of ops[0..n). */
static emq_status append_release(emq_consumer_t *c, emq__xchg *x,
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
        const char *fixed[] = {"EVAL", release_script, "1", c->keys.stream,
                               c->group, c->name};
        memcpy(argv, fixed, sizeof fixed);
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
        st = emq__xchg_append(x, TAG_RELEASE, (int)argc, argv, NULL, err);
    }
    emq__free(argv);
    emq__free(counts);
    return st;
}

size_t emq__settle_ops_max(const emq_consumer_t *c) {
    int64_t room = emq__cfg_pipeline_max(c->conf) - EMQ_ROUND_FIXED_COMMANDS;
    return room >= EMQ_SETTLE_MAX_IDS ? EMQ_SETTLE_MAX_IDS : (size_t)room;
}

emq_status emq__settle_append(emq_consumer_t *c, emq__xchg *x,
                              const settle_op *ops, size_t n, emq_error *err) {
    const emq_id **acks = emq__alloc((n ? n : 1) * sizeof *acks);
    const emq_id **clean = emq__alloc((n ? n : 1) * sizeof *clean);
    emq_status st = EMQ_OK;
    if (acks == NULL || clean == NULL) {
        st = emq__oom(err);
        goto done;
    }
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
    for (size_t i = 0; i < n && st == EMQ_OK; i++) {
        if (ops[i].kind == SETTLE_RETRY) {
            char delay[24];
            snprintf(delay, sizeof delay, "%lld", (long long)ops[i].delay_ms);
            const char *argv[] = {"EVAL",         retry_script,
                                  "3",            c->reasons_key,
                                  c->retry_key,   c->keys.stream,
                                  ops[i].id.str,  ops[i].reason ? ops[i].reason
                                                                : "",
                                  delay,          c->group,
                                  c->name};
            st = emq__xchg_append(x, TAG_RETRY, 11, argv, NULL, err);
        } else if (ops[i].kind == SETTLE_DEAD) {
            st = append_dead(c, x, &ops[i], err);
        }
    }
done:
    emq__free(acks);
    emq__free(clean);
    return st;
}

/* Refusals that will not change by themselves: a settlement refused this
 * way would be redone forever, so the consumer stops. */
static int permanent(const emq_reply *r) {
    return emq__reply_refused(r) || emq__reply_mentions(r, "WRONGTYPE");
}

emq_status emq__settle_apply(void *round, int tag, const emq_reply *reply,
                             emq_error *err) {
    settle_round *r = round;
    emq_consumer_t *c = r->c;
    static const char *const names[] = {"", "XACK", "clearing failure reasons",
                                        "recording a retry",
                                        "the dead-letter move",
                                        "handing back unhandled entries"};
    const char *what = tag >= TAG_XACK && tag <= TAG_RELEASE ? names[tag] : "?";
    if (emq_reply_kind(reply) == EMQ_REPLY_ERROR) {
        if (emq__reply_mentions(reply, "READONLY"))
            return emq__error_set(
                err, EMQ_EIO, 1,
                "%s: the server is a read-only replica (READONLY)", what);
        if (emq__reply_not_now(reply,
                               tag == TAG_XACK ? EMQ_XCHG_WAIT_OOM : 0)) {
            r->again = 1; /* did not run: send again later */
            return EMQ_OK;
        }
        if (permanent(reply)) {
            char shown[240];
            emq_status st = emq__error_set(
                err, EMQ_ESERVER, 0,
                "%s was refused (%s%s): settled entries would be handled "
                "again forever, so the consumer stops; grant the command or "
                "fix the key",
                what,
                emq__reply_refused(reply) &&
                        !emq__reply_mentions(reply, "NOPERM")
                    ? "NOPERM: "
                    : "",
                emq__reply_text(reply, shown, sizeof shown));
            emq__reply_code_copy(err, reply);
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
    if (tag == TAG_XACK) {
        long long n = emq_reply_integer(reply);
        atomic_fetch_add(&c->stats.acked, (uint64_t)(n > 0 ? n : 0));
    } else if (tag == TAG_DEAD && emq_reply_integer(reply) == 1) {
        atomic_fetch_add(&c->stats.dead_lettered, 1);
    } else if (tag == TAG_RELEASE) {
        long long n = emq_reply_integer(reply);
        atomic_fetch_add(&c->stats.released, (uint64_t)(n > 0 ? n : 0));
        /* Pending to us and no longer in hand: unless the run is ending,
         * recover self takes them again. */
        if (n > 0)
            atomic_store(&c->recover_self_due, 1);
    }
    return EMQ_OK;
}

void emq__settle_finish(emq_consumer_t *c, settle_op *ops, size_t n,
                        emq_status st, const settle_round *r) {
    if (st == EMQ_OK && !r->again) {
        emq__inflight_settled(&c->table, ops, n);
        for (size_t i = 0; i < n; i++)
            emq__settle_op_free(&ops[i]);
        return;
    }
    /* Outcome unknown, or not run: send them again (idempotent). */
    emq__inflight_requeue(&c->table, ops, n);
}

emq_status emq__settle_append_refresh(emq_consumer_t *c, emq__xchg *x,
                                      const emq_id *ids, size_t n, int tag,
                                      emq_error *err) {
    size_t argc = 6 + n;
    const char **argv = emq__alloc(argc * sizeof *argv);
    if (argv == NULL)
        return emq__oom(err);
    argv[0] = "EVAL";
    argv[1] = refresh_script;
    argv[2] = "1";
    argv[3] = c->keys.stream;
    argv[4] = c->group;
    argv[5] = c->name;
    for (size_t i = 0; i < n; i++)
        argv[6 + i] = ids[i].str;
    emq_status st = emq__xchg_append(x, tag, (int)argc, argv, NULL, err);
    emq__free(argv);
    return st;
}
