/* consumer.c: the consumer's life cycle and main loop.
 *
 * emq_consumer_new validates everything the caller declared (queue or
 * stream, group, name, start position, sizes) without sending a byte.
 * emq_consumer_run then connects, takes the name's lease, opens the group
 * door, drains its own pending entries, and loops: a claim beat when due,
 * then one XREADGROUP ... > with the acknowledgements of the previous batch
 * in the same round trip. Transport failures reconnect with backoff and
 * re-run lease, door and self-drain; a group or stream that vanished is
 * re-created at the declared start. The consumer never deletes a group,
 * a consumer or an entry, and never trims.
 *
 * A topic consumer (partitions > 1) holds one such consumer per partition,
 * all with the same name, and runs each on its own thread: every partition
 * gets the whole contract (door, lease, recover self and peers, dead
 * letters) on its own route, and no read ever names two partitions.
 */
#include "consumer.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* ---- logging ----------------------------------------------------------- */

void emq_consumer_log(emq_consumer_t *c, int level, const char *fmt, ...) {
    char message[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(message, sizeof message, fmt, ap);
    va_end(ap);
    emq_conf_log(c->conf, level, "consumer '%s' of group '%s' on '%s': %s",
                 c->name, c->group, c->keys.stream, message);
}

/* ---- validation (no network) ------------------------------------------- */

/* Consumer names go into CLIENT SETNAME and key names: printable ASCII
 * without spaces, 1..128 bytes. */
static emq_status check_name(const char *what, const char *name,
                             emq_error *err) {
    if (name == NULL || *name == '\0')
        return emq_error_set(err, EMQ_EINVAL, 0,
                             "%s is required: give a stable name, the same "
                             "across restarts (never a pid or a random one)",
                             what);
    size_t n = strlen(name);
    if (n > 128)
        return emq_error_set(err, EMQ_EINVAL, 0,
                             "%s is %zu bytes long; the limit is 128", what,
                             n);
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)name[i];
        if (ch <= 0x20 || ch >= 0x7f) {
            char shown[140];
            return emq_error_set(err, EMQ_EINVAL, 0,
                                 "%s '%s' has a space or control character "
                                 "at byte %zu; use printable characters only",
                                 what, emq_printable(shown, sizeof shown, name, n),
                                 i);
        }
    }
    return EMQ_OK;
}

/* Fills the lease token: host:pid:random. The name is stable; only the
 * token, which tells two processes apart, is not. */
static void make_token(emq_consumer_t *c) {
    char host[64] = "localhost";
    gethostname(host, sizeof host - 1);
    host[sizeof host - 1] = '\0';
    uint64_t seed = (uint64_t)emq_now_ms() ^ ((uint64_t)getpid() << 32) ^
                    (uint64_t)(uintptr_t)c;
    FILE *f = fopen("/dev/urandom", "rb");
    if (f) {
        if (fread(&seed, sizeof seed, 1, f) != 1)
            seed ^= (uint64_t)emq_now_ms();
        fclose(f);
    }
    snprintf(c->token, sizeof c->token, "%s:%ld:%016llx", host,
             (long)getpid(), (unsigned long long)seed);
}

emq_status emq_consumer_new(const emq_conf_t *conf, emq_handler_fn handler,
                            void *opaque, emq_consumer_t **out,
                            emq_error *err) {
    *out = NULL;
    if (conf == NULL || handler == NULL)
        return emq_error_set(err, EMQ_EINVAL, 0,
                             "a consumer needs a configuration and a handler");
    emq_consumer_t *c = emq_calloc(1, sizeof *c);
    if (c == NULL)
        return emq_error_set(err, EMQ_ENOMEM, 0, "out of memory");
    emq_status st;
    c->conf = emq_conf_dup(conf);
    if (c->conf == NULL) {
        st = emq_error_set(err, EMQ_ENOMEM, 0, "out of memory");
        goto fail;
    }
    c->handler = handler;
    c->opaque = opaque;
    c->group = c->conf->group;
    c->name = c->conf->consumer;
    if (emq_topic_is(c->conf) && (st = emq_topic_check(c->conf, err)) != EMQ_OK)
        goto fail;
    st = emq_keys_resolve(c->conf->queue, c->conf->stream, &c->keys, err);
    if (st != EMQ_OK)
        goto fail;
    if ((st = check_name("group", c->group, err)) != EMQ_OK ||
        (st = check_name("consumer name", c->name, err)) != EMQ_OK ||
        (st = emq_stream_start_parse(c->conf->start, c->start_id, err)) !=
            EMQ_OK)
        goto fail;
    if (c->conf->lease_ttl_ms < 3 * c->conf->block_ms + 1000) {
        st = emq_error_set(err, EMQ_EINVAL, 0,
                           "lease.ttl_ms (%lld) must be at least 3 x block_ms "
                           "+ 1000 (%lld), so the lease is renewed in time",
                           (long long)c->conf->lease_ttl_ms,
                           (long long)(3 * c->conf->block_ms + 1000));
        goto fail;
    }
    char part[300];
    snprintf(part, sizeof part, "lease:%s", c->group);
    c->lease_key = emq_keys_join(&c->keys, part, c->name);
    snprintf(part, sizeof part, "reasons:%s", c->group);
    c->reasons_key = emq_keys_join(&c->keys, part, NULL);
    if (c->lease_key == NULL || c->reasons_key == NULL) {
        st = emq_error_set(err, EMQ_ENOMEM, 0, "out of memory");
        goto fail;
    }
    /* The connection is named after the consumer (contract 3). */
    if ((st = emq_conf_set(c->conf, "client_name", c->name, err)) != EMQ_OK)
        goto fail;
    make_token(c);
    /* Reconnecting never ends on its own (the consumer keeps trying until
     * stopped), so the route makes single attempts and reconnect() sleeps
     * the backoff where a stop can cut it short. */
    c->conf->max_attempts = 1;
    c->backoff_rng = (uint64_t)emq_now_ms() ^ (uint64_t)(uintptr_t)c;
    strcpy(c->claim_cursor, "0-0");
    if (emq_topic_is(c->conf)) {
        c->nparts = (size_t)c->conf->partitions;
        c->parts = emq_calloc(c->nparts, sizeof *c->parts);
        if (c->parts == NULL) {
            c->nparts = 0;
            st = emq_error_set(err, EMQ_ENOMEM, 0, "out of memory");
            goto fail;
        }
        for (size_t i = 0; i < c->nparts; i++) {
            emq_conf_t *pc;
            st = emq_topic_partition_conf(c->conf, (int)i, &pc, err);
            if (st == EMQ_OK) {
                st = emq_consumer_new(pc, handler, opaque, &c->parts[i], err);
                emq_conf_destroy(pc);
            }
            if (st != EMQ_OK)
                goto fail;
        }
    }
    *out = c;
    return EMQ_OK;
fail:
    emq_consumer_destroy(c);
    return st;
}

void emq_consumer_destroy(emq_consumer_t *c) {
    if (c == NULL)
        return;
    for (size_t i = 0; i < c->nparts; i++)
        emq_consumer_destroy(c->parts[i]);
    emq_free(c->parts);
    emq_route_destroy(c->route);
    emq_keys_free(&c->keys);
    emq_free(c->lease_key);
    emq_free(c->reasons_key);
    emq_free(c->acks);
    emq_free(c->deferred);
    emq_free(c->fields);
    emq_conf_destroy(c->conf);
    emq_free(c);
}

void emq_consumer_nap(emq_consumer_t *c, int64_t ms) {
    int64_t until = emq_now_ms() + ms;
    for (int64_t left = ms; left > 0 && !atomic_load(&c->stop);
         left = until - emq_now_ms())
        emq_sleep_ms(left < 20 ? left : 20); /* a stop waits 20 ms at most */
}

void emq_consumer_stop(emq_consumer_t *c) {
    if (c == NULL)
        return;
    atomic_store(&c->stop, 1);
    for (size_t i = 0; i < c->nparts; i++)
        atomic_store(&c->parts[i]->stop, 1);
}

/* ---- the pipeline of deferred commands --------------------------------- */

emq_status emq_consumer_defer(emq_consumer_t *c, deferred_kind kind, int argc,
                              const char *const *argv, const size_t *argvlen,
                              emq_error *err) {
    if (c->ndeferred == c->deferred_cap) {
        size_t cap = c->deferred_cap ? c->deferred_cap * 2 : 16;
        deferred_kind *d = emq_realloc(c->deferred, cap * sizeof *d);
        if (d == NULL)
            return emq_error_set(err, EMQ_ENOMEM, 0, "out of memory");
        c->deferred = d;
        c->deferred_cap = cap;
    }
    emq_status st = emq_route_append(c->route, argc, argv, argvlen, err);
    if (st != EMQ_OK)
        return st;
    c->deferred[c->ndeferred++] = kind;
    return EMQ_OK;
}

emq_status emq_consumer_append_acks(emq_consumer_t *c, emq_error *err) {
    if (c->nacks == 0 || c->acks_in_flight > 0)
        return EMQ_OK;
    size_t argc = 3 + c->nacks;
    const char **argv = emq_alloc(argc * sizeof *argv);
    if (argv == NULL)
        return emq_error_set(err, EMQ_ENOMEM, 0, "out of memory");
    argv[0] = "XACK";
    argv[1] = c->keys.stream;
    argv[2] = c->group;
    for (size_t i = 0; i < c->nacks; i++)
        argv[3 + i] = c->acks[i].str;
    emq_status st =
        emq_consumer_defer(c, DEFERRED_ACK, (int)argc, argv, NULL, err);
    emq_free(argv);
    if (st == EMQ_OK)
        c->acks_in_flight = c->nacks;
    return st;
}

/* Applies one deferred reply. Error replies are logged, not fatal, except
 * a lost lease: another process now runs under this name. */
static emq_status apply_deferred(emq_consumer_t *c, deferred_kind kind,
                                 const emq_reply *reply, emq_error *err) {
    if (emq_reply_kind(reply) == EMQ_REPLY_ERROR) {
        char shown[200];
        emq_reply_text(reply, shown, sizeof shown);
        if (kind == DEFERRED_ACK) {
            /* The ids stay pending and come back; nothing is lost. */
            c->acks_in_flight = 0;
        }
        emq_consumer_log(c, EMQ_LOG_WARNING, "%s failed: %s",
                         kind == DEFERRED_ACK      ? "XACK"
                         : kind == DEFERRED_RENEW  ? "lease renewal"
                         : kind == DEFERRED_REASON ? "recording a failure "
                                                     "reason"
                                                   : "dead-letter move",
                         shown);
        return EMQ_OK;
    }
    switch (kind) {
    case DEFERRED_ACK: {
        long long acked = emq_reply_integer(reply);
        atomic_fetch_add(&c->stats.acked, (uint64_t)(acked > 0 ? acked : 0));
        size_t done = c->acks_in_flight;
        memmove(c->acks, c->acks + done, (c->nacks - done) * sizeof *c->acks);
        c->nacks -= done;
        c->acks_in_flight = 0;
        break;
    }
    case DEFERRED_RENEW:
        if (emq_reply_integer(reply) != 1)
            return emq_error_set(err, EMQ_ESERVER, 0,
                                 "consumer '%s' lost its lease '%s': another "
                                 "process took the name while this one was "
                                 "stalled; stopping so that one name never "
                                 "runs twice",
                                 c->name, c->lease_key);
        break;
    case DEFERRED_REASON:
        break;
    case DEFERRED_DEAD:
        if (emq_reply_integer(reply) == 1)
            atomic_fetch_add(&c->stats.dead_lettered, 1);
        break;
    }
    return EMQ_OK;
}

emq_status emq_consumer_drain_deferred(emq_consumer_t *c, emq_error *err) {
    emq_status result = EMQ_OK;
    size_t i = 0;
    for (; i < c->ndeferred; i++) {
        emq_reply *reply;
        emq_status st = emq_route_get_reply(c->route, &reply, err);
        if (st != EMQ_OK) {
            c->ndeferred = 0;
            c->acks_in_flight = 0; /* resent after reconnecting */
            return st;
        }
        st = apply_deferred(c, c->deferred[i], reply, result ? NULL : err);
        emq_reply_free(reply);
        if (st != EMQ_OK && result == EMQ_OK)
            result = st; /* keep reading so the pipeline stays in step */
    }
    c->ndeferred = 0;
    return result;
}

/* Error replies that mean "try again shortly": the server is loading its
 * data after a restart, busy with a script, or a cluster is rehashing. */
static int transient(const emq_reply *r) {
    return emq_reply_is_error(r, "LOADING") || emq_reply_is_error(r, "BUSY") ||
           emq_reply_is_error(r, "TRYAGAIN") ||
           emq_reply_is_error(r, "CLUSTERDOWN") ||
           emq_reply_is_error(r, "MASTERDOWN");
}

/* One exchange: the deferred commands, then this one; see
 * emq_consumer_call. */
static emq_status call_once(emq_consumer_t *c, int argc,
                            const char *const *argv, const size_t *argvlen,
                            emq_reply **reply, emq_error *err) {
    *reply = NULL;
    emq_status st = emq_route_append(c->route, argc, argv, argvlen, err);
    if (st != EMQ_OK)
        return st;
    atomic_fetch_add(&c->stats.round_trips, 1);
    st = emq_consumer_drain_deferred(c, err);
    /* Read the command's own reply even after a deferred failure, so the
     * connection stays usable. */
    emq_error own;
    emq_status read = emq_route_get_reply(c->route, reply, &own);
    if (read != EMQ_OK) {
        if (err)
            *err = own;
        return read;
    }
    if (st != EMQ_OK) {
        emq_reply_free(*reply);
        *reply = NULL;
    }
    return st;
}

/* A server that is loading its data after a restart, running a long
 * script, or part of a cluster that is rehashing answers with an error
 * and does not run the command, so sending it again is safe. This is how
 * long a consumer keeps trying before the error counts as fatal. */
#define TRANSIENT_WAIT_MS (5 * 60 * 1000)

emq_status emq_consumer_call(emq_consumer_t *c, int argc,
                             const char *const *argv, const size_t *argvlen,
                             emq_reply **reply, emq_error *err) {
    int64_t give_up = emq_now_ms() + TRANSIENT_WAIT_MS;
    int64_t pause = 50;
    for (;;) {
        emq_status st = call_once(c, argc, argv, argvlen, reply, err);
        if (st != EMQ_OK || !transient(*reply) || atomic_load(&c->stop) ||
            emq_now_ms() >= give_up)
            return st;
        if (pause == 50) {
            char shown[120];
            emq_consumer_log(c, EMQ_LOG_INFO, "server not ready (%s); waiting",
                             emq_reply_text(*reply, shown, sizeof shown));
        }
        emq_reply_free(*reply);
        *reply = NULL;
        emq_consumer_nap(c, pause);
        pause = pause * 2 > 1000 ? 1000 : pause * 2;
    }
}

/* ---- connect, door and the main loop ------------------------------------ */


/* Turns an error reply into EMQ_ESERVER with its text, for a fatal path. */
static emq_status server_error(const emq_reply *r, emq_error *err,
                               const char *what) {
    char shown[200];
    return emq_error_set(err, EMQ_ESERVER, 0, "%s failed: %s", what,
                         emq_reply_text(r, shown, sizeof shown));
}

/* Contract 1: XGROUP CREATE <stream> <group> <start> MKSTREAM. +OK and
 * BUSYGROUP open the door; any other reply fails the start. */
static emq_status open_door(emq_consumer_t *c, emq_error *err) {
    const char *argv[] = {"XGROUP", "CREATE", c->keys.stream, c->group,
                          c->start_id, "MKSTREAM"};
    emq_reply *reply;
    emq_status st = emq_consumer_call(c, 6, argv, NULL, &reply, err);
    if (st != EMQ_OK)
        return st;
    if (emq_reply_kind(reply) != EMQ_REPLY_ERROR ||
        emq_reply_is_error(reply, "BUSYGROUP")) {
        emq_reply_free(reply);
        return EMQ_OK;
    }
    char what[300];
    snprintf(what, sizeof what, "opening group '%s' on '%s'", c->group,
             c->keys.stream);
    st = server_error(reply, err, what);
    emq_reply_free(reply);
    return st;
}

/* The steps that follow every (re)connect: lease, door, own pending. */
static emq_status start_session(emq_consumer_t *c, emq_error *err) {
    emq_status st;
    if ((st = emq_lease_acquire(c, err)) != EMQ_OK)
        return st;
    if ((st = open_door(c, err)) != EMQ_OK)
        return st;
    return emq_recover_self(c, err);
}

/* Retriable transport failures, after which the consumer reconnects. */
static int transport_failure(emq_status st) {
    return st == EMQ_EIO || st == EMQ_ETIMEDOUT || st == EMQ_ECLOSED ||
           st == EMQ_EPROTO;
}

/* Reconnects until it works or a stop is requested. */
static emq_status reconnect(emq_consumer_t *c, emq_error *err) {
    c->ndeferred = 0;
    c->acks_in_flight = 0;
    /* The route makes one attempt per call (see emq_consumer_new); the
     * capped exponential backoff with jitter happens here, in naps a stop
     * ends early. */
    for (unsigned attempt = 0;; attempt++) {
        if (attempt > 0)
            emq_consumer_nap(c, emq_backoff_delay(c->conf->backoff_min_ms,
                                                  c->conf->backoff_max_ms,
                                                  attempt - 1,
                                                  &c->backoff_rng));
        if (atomic_load(&c->stop))
            return EMQ_ECLOSED;
        emq_error why;
        emq_status st = emq_route_reconnect(c->route, &why);
        if (st == EMQ_OK) {
            atomic_fetch_add(&c->stats.reconnects, 1);
            emq_consumer_log(c, EMQ_LOG_INFO, "reconnected");
            return EMQ_OK;
        }
        if (st == EMQ_EAUTH || st == EMQ_EINVAL || st == EMQ_ETLS) {
            if (err)
                *err = why;
            return st;
        }
        emq_consumer_log(c, EMQ_LOG_WARNING, "reconnect failed, retrying: %s",
                         why.message);
    }
}

/* The group or the stream vanished under a blocked or new read (NOGROUP,
 * or 7.0's UNBLOCKED for a deleted key). Re-open the door at the declared
 * start, never at 0, unless the caller asked for this to be fatal. */
static emq_status group_lost(emq_consumer_t *c, const emq_reply *reply,
                             emq_error *err) {
    if (c->conf->group_lost_fatal)
        return server_error(reply, err, "reading (group or stream gone)");
    int64_t now = emq_now_ms();
    if (now - c->last_recreate_ms < 1000) /* never busy-loop */
        emq_consumer_nap(c, 1000 - (now - c->last_recreate_ms));
    c->last_recreate_ms = emq_now_ms();
    char shown[160];
    emq_consumer_log(c, EMQ_LOG_WARNING,
                     "group or stream is gone (%s); creating it again at "
                     "the declared start '%s'",
                     emq_reply_text(reply, shown, sizeof shown),
                     c->conf->start);
    atomic_fetch_add(&c->stats.group_recreated, 1);
    /* Acks for entries of a destroyed group have nothing left to ack. */
    c->nacks = 0;
    return open_door(c, err);
}

/* One XREADGROUP ... > with the deferred commands in the same round trip,
 * then the handler over what arrived. */
static emq_status read_new(emq_consumer_t *c, batch *b, emq_error *err) {
    char count[24], block[24];
    /* Block no longer than until the next claim beat is due, so beats
     * keep their interval even when it is shorter than block_ms. */
    int64_t wait = c->conf->block_ms;
    int64_t until_beat = c->next_claim_ms - emq_now_ms();
    if (until_beat < wait)
        wait = until_beat < 1 ? 1 : until_beat;
    snprintf(count, sizeof count, "%lld", (long long)c->conf->count);
    snprintf(block, sizeof block, "%lld", (long long)wait);
    const char *argv[] = {"XREADGROUP", "GROUP", c->group, c->name, "COUNT",
                          count, "BLOCK", block, "STREAMS", c->keys.stream,
                          ">"};
    emq_status st;
    if ((st = emq_consumer_append_acks(c, err)) != EMQ_OK ||
        (st = emq_lease_renew_if_due(c, err)) != EMQ_OK)
        return st;
    emq_reply *reply;
    atomic_fetch_add(&c->stats.reads, 1);
    st = emq_consumer_call(c, 11, argv, NULL, &reply, err);
    if (st != EMQ_OK)
        return st;
    if (emq_reply_kind(reply) == EMQ_REPLY_ERROR) {
        if (emq_reply_is_error(reply, "NOGROUP")) {
            st = group_lost(c, reply, err);
        } else if (emq_reply_is_error(reply, "UNBLOCKED")) {
            /* The blocked read was ended from outside: CLIENT UNBLOCK ...
             * ERROR, the key deleted (7.0), or migrated to another cluster
             * node. Read again: a read of a key or group that is really
             * gone gets NOGROUP, which re-opens the door; a migrated key
             * is followed by the route; a closed connection shows up on
             * the next call. */
            char shown[120];
            emq_consumer_log(c, EMQ_LOG_DEBUG, "read ended by %s; reading "
                             "again",
                             emq_reply_text(reply, shown, sizeof shown));
            st = EMQ_OK;
        } else {
            st = server_error(reply, err, "XREADGROUP");
        }
        emq_reply_free(reply);
        return st;
    }
    const emq_reply *entries = emq_xread_entries(reply, err, &st);
    if (st != EMQ_OK) {
        emq_reply_free(reply);
        return st;
    }
    if (entries == NULL) { /* timeout, or 7.0's empty entries array */
        emq_reply_free(reply);
        return EMQ_OK;
    }
    if ((st = emq_batch_parse(b, reply, entries, err)) != EMQ_OK)
        return st;
    for (size_t i = 0; i < b->n; i++)
        b->items[i].deliveries = 1; /* '>' delivers for the first time */
    st = emq_batch_dispatch(c, b, err);
    emq_batch_clear(b);
    return st;
}

/* Sends the last acknowledgements and every other deferred command (dead
 * letters, reasons), then lets the lease go. */
static void finish(emq_consumer_t *c) {
    emq_error ignored;
    if (emq_route_is_broken(c->route))
        return;
    if (emq_consumer_append_acks(c, &ignored) != EMQ_OK ||
        emq_consumer_drain_deferred(c, &ignored) != EMQ_OK) {
        if (emq_route_is_broken(c->route))
            return;
    }
    emq_lease_release(c);
}

emq_status emq_consumer_run(emq_consumer_t *c, emq_error *err) {
    emq_error_clear(err);
    if (atomic_exchange(&c->running, 1))
        return emq_error_set(err, EMQ_EINVAL, 0,
                             "consumer '%s' is already running", c->name);
    if (c->nparts > 0) {
        emq_status st = emq_consumers_run(c->parts, c->nparts, err);
        atomic_store(&c->running, 0);
        atomic_store(&c->stop, 0);
        return st;
    }
    emq_status st = EMQ_OK;
    if (c->route == NULL)
        st = emq_route_new(c->conf, c->keys.stream, &c->route, err);
    /* Only a first connection that fails is fatal here. After that, a
     * transport failure anywhere, the session's first steps included (a
     * run after a stop may find its connection dead), reconnects. */
    int connected = st == EMQ_OK;
    if (connected && emq_route_is_broken(c->route))
        st = EMQ_ECLOSED;
    else if (connected)
        st = start_session(c, err);
    batch b;
    emq_batch_init(&b);
    c->next_claim_ms = emq_now_ms() + c->conf->claim_interval_ms;
    while (connected && (st == EMQ_OK || transport_failure(st)) &&
           !atomic_load(&c->stop)) {
        if (st == EMQ_OK && emq_now_ms() >= c->next_claim_ms) {
            st = emq_recover_peers(c, err);
            c->next_claim_ms = emq_now_ms() + c->conf->claim_interval_ms;
        }
        if (st == EMQ_OK && !atomic_load(&c->stop))
            st = read_new(c, &b, err);
        if (transport_failure(st) && !atomic_load(&c->stop)) {
            emq_consumer_log(c, EMQ_LOG_WARNING,
                             "connection failed (%s); reconnecting",
                             err && err->message[0] ? err->message
                                                    : emq_strerror(st));
            emq_batch_clear(&b);
            st = reconnect(c, err);
            if (st == EMQ_OK)
                st = start_session(c, err);
        }
    }
    emq_batch_free(&b);
    if (c->route)
        finish(c);
    atomic_store(&c->running, 0);
    if (atomic_load(&c->stop) && (st == EMQ_OK || transport_failure(st))) {
        emq_error_clear(err);
        st = EMQ_OK;
    }
    atomic_store(&c->stop, 0);
    return st;
}
