/* producer.c: appending entries to a queue's stream.
 *
 * One entry is one XADD. A batch is pipelined in windows of
 * producer.window commands: append a window, read its replies, go on, so
 * memory stays bounded whatever the batch size while the network stays
 * busy. Each entry's outcome is known: its ID, or "" when the server
 * refused it (the first refusal is returned, naming the entry's index) or
 * when a transport failure left its outcome unknown (the error then says
 * how many entries were confirmed).
 *
 * The queue's trimming policy (trim.maxlen or trim.minid, exact or ~, with
 * an optional LIMIT) and producer.nomkstream travel inside every XADD, so
 * adding and trimming are one atomic command and no XTRIM is ever sent.
 * The words every XADD starts with are built once, when the producer is
 * created, after the policy is validated: a policy the server would refuse
 * (both bounds, LIMIT without ~, a malformed MINID) is refused there with
 * EMQ_EINVAL naming the property, before any connection is made.
 *
 * A topic (partitions > 1) is a producer of producers: one per partition,
 * each with its own route, opened when the first entry goes there. An
 * entry with a message key goes to partition CRC16(key) mod P, so one
 * key's entries keep their order in one stream; an entry without a key
 * goes to the next partition in turn. A batch is split by partition and
 * each share is written as its own batch, one partition after the other.
 *
 * Plain trimming deletes entries whether or not a group has processed them
 * (docs/PRODUCER.md); ack-aware retention is emq_admin_trim_acked. The
 * producer never reads entries, never retries a command and never trims
 * other than through XADD.
 */
#include "producer.h"

#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

/* Bytes of a stream key shown in a message. */
#define SHOWN_KEY 96

/* Validates conf's trimming policy and builds p's head words:
 * XADD <stream> [NOMKSTREAM] [MAXLEN|MINID [~] <threshold> [LIMIT <n>]].
 * EMQ_EINVAL names the property at fault; nothing touches the network. */
static emq_status build_head(emq_producer_t *p, emq_error *err) {
    const emq_conf_t *c = p->conf;
    int has_maxlen = c->trim_maxlen >= 0, has_minid = c->trim_minid != NULL;
    if (has_maxlen && has_minid)
        return emq_error_set(err, EMQ_EINVAL, 0,
                             "trim.maxlen and trim.minid are both set; a "
                             "queue trims by one of them (XADD accepts "
                             "only one)");
    if (has_minid &&
        emq_stream_id_parse(c->trim_minid, strlen(c->trim_minid), NULL) !=
            0) {
        char shown[64];
        emq_printable(shown, sizeof shown, c->trim_minid,
                      strlen(c->trim_minid));
        return emq_error_set(err, EMQ_EINVAL, 0,
                             "invalid trim.minid '%s': not a stream ID "
                             "(ms or ms-seq, digits only)",
                             shown);
    }
    if (c->trim_limit >= 0 && !c->trim_approx)
        return emq_error_set(err, EMQ_EINVAL, 0,
                             "trim.limit needs trim.approx 1: the server "
                             "accepts LIMIT only with ~ trimming");
    if (!has_maxlen && !has_minid) {
        if (c->trim_limit >= 0)
            return emq_error_set(err, EMQ_EINVAL, 0,
                                 "trim.limit is set but neither trim.maxlen "
                                 "nor trim.minid is");
        if (c->trim_approx)
            return emq_error_set(err, EMQ_EINVAL, 0,
                                 "trim.approx is set but neither "
                                 "trim.maxlen nor trim.minid is");
    }

    size_t n = 0;
    p->argv[n] = "XADD";
    p->argvlen[n++] = 4;
    p->argv[n] = p->keys.stream;
    p->argvlen[n++] = strlen(p->keys.stream);
    if (c->producer_nomkstream) {
        p->argv[n] = "NOMKSTREAM";
        p->argvlen[n++] = 10;
    }
    if (has_maxlen || has_minid) {
        p->argv[n] = has_maxlen ? "MAXLEN" : "MINID";
        p->argvlen[n] = strlen(p->argv[n]);
        n++;
        if (c->trim_approx) {
            p->argv[n] = "~";
            p->argvlen[n++] = 1;
        }
        if (has_maxlen) {
            snprintf(p->threshold, sizeof p->threshold, "%" PRId64,
                     c->trim_maxlen);
            p->argv[n] = p->threshold;
        } else {
            p->argv[n] = c->trim_minid;
        }
        p->argvlen[n] = strlen(p->argv[n]);
        n++;
        if (c->trim_limit >= 0) {
            snprintf(p->limit, sizeof p->limit, "%" PRId64, c->trim_limit);
            p->argv[n] = "LIMIT";
            p->argvlen[n++] = 5;
            p->argv[n] = p->limit;
            p->argvlen[n] = strlen(p->limit);
            n++;
        }
    }
    p->nhead = n;
    return EMQ_OK;
}

emq_status emq_producer_new(const emq_conf_t *conf, emq_producer_t **out,
                            emq_error *err) {
    if (out == NULL)
        return emq_error_set(err, EMQ_EINVAL, 0, "out must not be NULL");
    *out = NULL;
    if (conf == NULL)
        return emq_error_set(err, EMQ_EINVAL, 0,
                             "a producer needs a configuration");
    emq_producer_t *p = emq_calloc(1, sizeof *p);
    if (p == NULL)
        return emq_error_set(err, EMQ_ENOMEM, 0, "out of memory");
    emq_status st = EMQ_OK;
    p->conf = emq_conf_dup(conf);
    p->argv_cap = 64; /* head, ID and 27 pairs before the first growth */
    p->argv = emq_alloc(p->argv_cap * sizeof *p->argv);
    p->argvlen = emq_alloc(p->argv_cap * sizeof *p->argvlen);
    if (p->conf == NULL || p->argv == NULL || p->argvlen == NULL)
        st = emq_error_set(err, EMQ_ENOMEM, 0, "out of memory");
    int topic = emq_topic_is(conf);
    if (st == EMQ_OK && topic)
        st = emq_topic_check(conf, err);
    if (st == EMQ_OK)
        st = emq_keys_resolve(conf->queue, conf->stream, &p->keys, err);
    if (st == EMQ_OK)
        st = build_head(p, err); /* a topic's policy is checked here too */
    if (st == EMQ_OK && topic) {
        p->nparts = (size_t)conf->partitions;
        p->parts = emq_calloc(p->nparts, sizeof *p->parts);
        if (p->parts == NULL)
            st = emq_error_set(err, EMQ_ENOMEM, 0, "out of memory");
    } else if (st == EMQ_OK) {
        st = emq_route_new(p->conf, p->keys.stream, &p->route, err);
    }
    if (st != EMQ_OK) {
        emq_producer_destroy(p);
        return st;
    }
    *out = p;
    return EMQ_OK;
}

void emq_producer_destroy(emq_producer_t *p) {
    if (p == NULL)
        return;
    for (size_t i = 0; i < p->nparts; i++)
        emq_producer_destroy(p->parts[i]);
    emq_free(p->parts);
    emq_route_destroy(p->route);
    emq_keys_free(&p->keys);
    emq_free(p->argv);
    emq_free(p->argvlen);
    emq_conf_destroy(p->conf);
    emq_free(p);
}

/* Makes room for argc words in the scratch argv, keeping the head words.
 * EMQ_ENOMEM leaves the old arrays in place. */
static emq_status grow_argv(emq_producer_t *p, size_t argc, emq_error *err) {
    size_t cap = p->argv_cap;
    while (cap < argc)
        cap *= 2;
    const char **argv = emq_realloc(p->argv, cap * sizeof *argv);
    if (argv == NULL)
        return emq_error_set(err, EMQ_ENOMEM, 0, "out of memory");
    p->argv = argv;
    size_t *lens = emq_realloc(p->argvlen, cap * sizeof *lens);
    if (lens == NULL)
        return emq_error_set(err, EMQ_ENOMEM, 0, "out of memory");
    p->argvlen = lens;
    p->argv_cap = cap;
    return EMQ_OK;
}

/* Appends the XADD of one message (already checked by check_batch) to the
 * connection's output buffer, through the scratch argv: no allocation
 * unless the message has more fields than any before. */
static emq_status append_xadd(emq_producer_t *p, const emq_message *m,
                              emq_error *err) {
    size_t argc = p->nhead + 1 + 2 * m->nfields;
    if (argc > p->argv_cap) {
        emq_status st = grow_argv(p, argc, err);
        if (st != EMQ_OK)
            return st;
    }
    const char **argv = p->argv + p->nhead;
    size_t *lens = p->argvlen + p->nhead;
    if (m->id) {
        argv[0] = m->id;
        lens[0] = strlen(m->id);
    } else {
        argv[0] = "*";
        lens[0] = 1;
    }
    const emq_field *f = m->fields;
    for (size_t i = 0; i < m->nfields; i++) {
        argv[1 + 2 * i] = f[i].name ? f[i].name : "";
        lens[1 + 2 * i] = f[i].name_len;
        argv[2 + 2 * i] = f[i].value ? f[i].value : "";
        lens[2 + 2 * i] = f[i].value_len;
    }
    return emq_route_append(p->route, (int)argc, p->argv, p->argvlen, err);
}

/* Reads one XADD reply: its ID into *id (may be NULL). Otherwise *id is ""
 * and the result is EMQ_ESERVER with the reason (the reply text; for the
 * nil XADD NOMKSTREAM gives on a missing key, a sentence saying so), or
 * the transport failure of the connection. */
static emq_status read_xadd(emq_producer_t *p, emq_id *id, emq_error *err) {
    emq_reply *reply;
    emq_status st = emq_route_get_reply(p->route, &reply, err);
    if (st == EMQ_OK) {
        size_t n;
        const char *text = emq_reply_str(reply, &n);
        emq_reply_type kind = emq_reply_kind(reply);
        if (kind == EMQ_REPLY_STRING && n < EMQ_ID_MAX) {
            if (id) {
                memcpy(id->str, text, n);
                id->str[n] = '\0';
            }
            emq_reply_free(reply);
            return EMQ_OK;
        }
        char key[SHOWN_KEY], shown[200];
        emq_printable(key, sizeof key, p->keys.stream,
                      strlen(p->keys.stream));
        if (kind == EMQ_REPLY_NULL && p->conf->producer_nomkstream)
            st = emq_error_set(err, EMQ_ESERVER, 0,
                               "stream '%s' does not exist and "
                               "producer.nomkstream is set",
                               key);
        else
            st = emq_error_set(err, EMQ_ESERVER, 0,
                               "adding to '%s' failed: %s", key,
                               emq_reply_text(reply, shown, sizeof shown));
        emq_reply_free(reply);
    }
    if (id)
        id->str[0] = '\0';
    return st;
}

/* Sets ids[from..n) to "" (ids may be NULL). */
static void clear_ids(emq_id *ids, size_t from, size_t n) {
    if (ids)
        for (size_t i = from; i < n; i++)
            ids[i].str[0] = '\0';
}

/* Refuses a batch with a malformed message before anything is sent, so a
 * caller's mistake never leaves a batch half written. */
static emq_status check_batch(const emq_producer_t *p,
                              const emq_message *msgs, size_t n, int single,
                              emq_error *err) {
    if (n > 0 && msgs == NULL)
        return emq_error_set(err, EMQ_EINVAL, 0,
                             "msgs is NULL but n is %zu", n);
    size_t max_pairs = ((size_t)INT_MAX - p->nhead - 1) / 2;
    for (size_t i = 0; i < n; i++) {
        const emq_message *m = &msgs[i];
        const char *what = NULL;
        if (m->fields == NULL || m->nfields == 0)
            what = "has no fields; a stream entry needs at least one "
                   "field/value pair";
        else if (m->nfields > max_pairs)
            what = "has too many fields for one command";
        if (what == NULL)
            continue;
        if (single)
            return emq_error_set(err, EMQ_EINVAL, 0, "the entry %s", what);
        return emq_error_set(err, EMQ_EINVAL, 0,
                             "entry %zu %s; nothing of the batch was sent",
                             i, what);
    }
    return EMQ_OK;
}

/* The batch engine behind emq_produce and emq_produce_batch; single drops
 * the entry index from messages. */
static emq_status produce(emq_producer_t *p, const emq_message *msgs,
                          size_t n, emq_id *ids, size_t *written, int single,
                          emq_error *err) {
    if (written)
        *written = 0;
    if (p == NULL) {
        clear_ids(ids, 0, n);
        return emq_error_set(err, EMQ_EINVAL, 0, "producer is NULL");
    }
    emq_status st = check_batch(p, msgs, n, single, err);
    if (st == EMQ_OK && n > 0 && emq_route_is_broken(p->route))
        st = emq_route_reconnect(p->route, err);
    if (st != EMQ_OK) {
        clear_ids(ids, 0, n);
        return st;
    }

    size_t ok = 0, done = 0;
    size_t window = (size_t)p->conf->producer_window;
    emq_status first = EMQ_OK;
    emq_error first_err;
    emq_error_clear(&first_err);
    while (done < n) {
        size_t end = n - done < window ? n : done + window;
        size_t appended = done;
        emq_error app_err;
        emq_status ast = EMQ_OK;
        for (; appended < end; appended++) {
            ast = append_xadd(p, &msgs[appended], &app_err);
            if (ast != EMQ_OK)
                break;
        }
        for (size_t i = done; i < appended; i++) {
            emq_error one;
            emq_status rs = read_xadd(p, ids ? &ids[i] : NULL, &one);
            if (rs == EMQ_OK) {
                ok++;
                continue;
            }
            if (rs != EMQ_ESERVER) {
                /* Transport: the outcome of entry i and later is unknown,
                 * and the connection is broken (the next call
                 * reconnects). */
                clear_ids(ids, i, n);
                if (written)
                    *written = ok;
                if (single)
                    return emq_error_set(err, rs, one.retriable,
                                         "the entry may or may not have "
                                         "been added: %s",
                                         one.message);
                return emq_error_set(
                    err, rs, one.retriable,
                    "%zu of %zu entries confirmed added; entries from "
                    "index %zu on may or may not have been added: %s",
                    ok, n, i, one.message);
            }
            if (first == EMQ_OK) {
                first = rs;
                first_err = one;
                if (!single)
                    emq_error_prefix(&first_err, "entry %zu", i);
            }
        }
        done = appended;
        if (ast != EMQ_OK) { /* an entry we could not even send */
            clear_ids(ids, appended, n);
            if (first == EMQ_OK) {
                first = ast;
                first_err = app_err;
                if (!single)
                    emq_error_prefix(&first_err,
                                     "entry %zu was not sent (%zu of %zu "
                                     "entries added, none from it on)",
                                     appended, ok, n);
            }
            break;
        }
    }
    if (written)
        *written = ok;
    if (first != EMQ_OK) {
        if (err)
            *err = first_err;
        return first;
    }
    emq_error_clear(err);
    return EMQ_OK;
}

/* ---- topics ------------------------------------------------------------ */

/* Partition i's producer, opened on first use. */
static emq_status part_open(emq_producer_t *p, size_t i, emq_error *err) {
    if (p->parts[i] != NULL)
        return EMQ_OK;
    emq_conf_t *conf;
    emq_status st = emq_topic_partition_conf(p->conf, (int)i, &conf, err);
    if (st == EMQ_OK) {
        st = emq_producer_new(conf, &p->parts[i], err);
        emq_conf_destroy(conf);
    }
    return st;
}

/* Writes n entries of a topic: msgs (plain) or kmsgs (keyed) give them.
 * Each entry gets its partition, the batch is grouped by partition (a
 * counting sort keeps each partition's entries in batch order), and each
 * group is written by that partition's producer. Every group is tried;
 * the first failure is returned, prefixed with its partition. */
static emq_status topic_produce(emq_producer_t *p, const emq_message *msgs,
                                const emq_keyed_message *kmsgs, size_t n,
                                emq_id *ids, size_t *written, int single,
                                emq_error *err) {
    size_t P = p->nparts;
    emq_message *sorted = emq_alloc((n ? n : 1) * sizeof *sorted);
    size_t *where = emq_alloc((n ? n : 1) * sizeof *where);
    unsigned *part = emq_alloc((n ? n : 1) * sizeof *part);
    size_t *start = emq_calloc(P + 1, sizeof *start);
    emq_id *sub_ids = ids ? emq_alloc((n ? n : 1) * sizeof *sub_ids) : NULL;
    emq_status st = EMQ_OK;
    if (!sorted || !where || !part || !start || (ids && !sub_ids)) {
        st = emq_error_set(err, EMQ_ENOMEM, 0, "out of memory");
        clear_ids(ids, 0, n);
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        const emq_keyed_message *k = kmsgs ? &kmsgs[i] : NULL;
        part[i] = k && k->key
                      ? emq_topic_key_partition(k->key, k->key_len,
                                                (unsigned)P)
                      : (unsigned)(p->next++ % P);
        start[part[i] + 1]++;
    }
    for (size_t i = 0; i < P; i++)
        start[i + 1] += start[i];
    {
        size_t *fill = emq_alloc(P * sizeof *fill);
        if (fill == NULL) {
            st = emq_error_set(err, EMQ_ENOMEM, 0, "out of memory");
            clear_ids(ids, 0, n);
            goto out;
        }
        memcpy(fill, start, P * sizeof *fill);
        for (size_t i = 0; i < n; i++) {
            size_t at = fill[part[i]]++;
            sorted[at] = kmsgs ? kmsgs[i].message : msgs[i];
            where[at] = i;
        }
        emq_free(fill);
    }
    size_t ok = 0;
    emq_status first = EMQ_OK;
    emq_error first_err;
    emq_error_clear(&first_err);
    for (size_t k = 0; k < P; k++) {
        size_t from = start[k], cnt = start[k + 1] - start[k];
        if (cnt == 0)
            continue;
        emq_error one;
        emq_error_clear(&one);
        size_t w = 0;
        emq_status rs = part_open(p, k, &one);
        if (rs == EMQ_OK)
            rs = produce(p->parts[k], sorted + from, cnt,
                         sub_ids ? sub_ids + from : NULL, &w, single, &one);
        else if (sub_ids)
            clear_ids(sub_ids, from, from + cnt);
        ok += w;
        if (rs != EMQ_OK && first == EMQ_OK) {
            first = rs;
            first_err = one;
            emq_error_prefix(&first_err, "partition %zu (emq:{%s.%zu})", k,
                             p->conf->queue, k);
        }
    }
    if (ids)
        for (size_t at = 0; at < n; at++)
            ids[where[at]] = sub_ids[at];
    if (written)
        *written = ok;
    st = first;
    if (st != EMQ_OK) {
        if (err)
            *err = first_err;
    } else {
        emq_error_clear(err);
    }
out:
    emq_free(sorted);
    emq_free(where);
    emq_free(part);
    emq_free(start);
    emq_free(sub_ids);
    return st;
}

/* Checks a batch of a topic before anything is split or sent: the same
 * rules as a queue's batch. */
static emq_status topic_check(const emq_producer_t *p,
                              const emq_message *msgs,
                              const emq_keyed_message *kmsgs, size_t n,
                              int single, emq_error *err) {
    if (n > 0 && msgs == NULL && kmsgs == NULL)
        return emq_error_set(err, EMQ_EINVAL, 0,
                             "msgs is NULL but n is %zu", n);
    for (size_t i = 0; i < n; i++) {
        const emq_message *m = kmsgs ? &kmsgs[i].message : &msgs[i];
        emq_status st = check_batch(p, m, 1, 1, err);
        if (st != EMQ_OK) {
            if (!single)
                emq_error_prefix(err, "entry %zu", i);
            return st;
        }
    }
    return EMQ_OK;
}

/* The entry point of every produce call: a topic, or one queue. */
static emq_status produce_any(emq_producer_t *p, const emq_message *msgs,
                              const emq_keyed_message *kmsgs, size_t n,
                              emq_id *ids, size_t *written, int single,
                              emq_error *err) {
    if (p != NULL && p->nparts > 0) {
        if (written)
            *written = 0;
        emq_status st = topic_check(p, msgs, kmsgs, n, single, err);
        if (st != EMQ_OK) {
            clear_ids(ids, 0, n);
            return st;
        }
        return topic_produce(p, msgs, kmsgs, n, ids, written, single, err);
    }
    if (kmsgs == NULL)
        return produce(p, msgs, n, ids, written, single, err);
    /* One queue: the keys do not matter. */
    emq_message *plain = emq_alloc((n ? n : 1) * sizeof *plain);
    if (plain == NULL) {
        clear_ids(ids, 0, n);
        return emq_error_set(err, EMQ_ENOMEM, 0, "out of memory");
    }
    for (size_t i = 0; i < n; i++)
        plain[i] = kmsgs[i].message;
    emq_status st = produce(p, plain, n, ids, written, single, err);
    emq_free(plain);
    return st;
}

emq_status emq_produce(emq_producer_t *p, const emq_field *fields,
                       size_t nfields, emq_id *id, emq_error *err) {
    emq_message m = {fields, nfields, NULL};
    return produce_any(p, &m, NULL, 1, id, NULL, 1, err);
}

emq_status emq_produce_keyed(emq_producer_t *p, const char *key,
                             size_t key_len, const emq_field *fields,
                             size_t nfields, emq_id *id, emq_error *err) {
    emq_keyed_message m = {{fields, nfields, NULL}, key, key_len};
    return produce_any(p, NULL, &m, 1, id, NULL, 1, err);
}

emq_status emq_produce_batch(emq_producer_t *p, const emq_message *msgs,
                             size_t n, emq_id *ids, size_t *written,
                             emq_error *err) {
    return produce_any(p, msgs, NULL, n, ids, written, 0, err);
}

emq_status emq_produce_batch_keyed(emq_producer_t *p,
                                   const emq_keyed_message *msgs, size_t n,
                                   emq_id *ids, size_t *written,
                                   emq_error *err) {
    return produce_any(p, NULL, msgs, n, ids, written, 0, err);
}
