/* SPDX-License-Identifier: BSD-3-Clause */
/* produce.c: the producer's calls (emq_produce*, emq_producer_*), and a topic's
 * producer of producers.
 *
 * A queue's producer goes straight to producer.c and its sender. A
 * topic's (partitions > 1) is a producer of producers: one per partition,
 * each with its own route and sender, opened when the first entry goes
 * there. An entry with a message key goes to partition CRC16(key) mod P,
 * so one key's entries keep their order in one stream; an entry without a
 * key goes to the next partition in turn. A batch is checked whole, then
 * split by partition and each share written as its own batch, one
 * partition after the other.
 */
#include "producer.h"

#include <string.h>

static emq_status topic_init(emq_producer_t *p, emq_error *err) {
    p->nparts = (size_t)emq__cfg_partitions(p->conf);
    p->parts = emq__calloc(p->nparts, sizeof *p->parts);
    if (p->parts == NULL) {
        p->nparts = 0;
        return emq__oom(err);
    }
    pthread_mutex_init(&p->parts_mu, NULL);
    return EMQ_OK;
}

static void topic_free(emq_producer_t *p) {
    if (p->parts == NULL)
        return;
    for (size_t i = 0; i < p->nparts; i++)
        emq_producer_destroy(p->parts[i]);
    pthread_mutex_destroy(&p->parts_mu);
    emq__free(p->parts);
    p->parts = NULL;
}

/* Makes partition i's producer into p->parts. */
static emq_status open_part(int i, const emq_conf_t *part, void *ctx,
                            emq_error *err) {
    emq_producer_t *p = ctx;
    return emq_producer_new(part, &p->parts[i], err);
}

/* Partition i's producer, opened on first use (by one thread). A failure
 * names the partition. */
static emq_status part_open(emq_producer_t *p, size_t i, emq_error *err) {
    pthread_mutex_lock(&p->parts_mu);
    emq_status st = EMQ_OK;
    if (p->parts[i] == NULL)
        st = emq__topic_open_parts(p->conf, (int)i, (int)i + 1, open_part, p,
                                   err);
    pthread_mutex_unlock(&p->parts_mu);
    return st;
}

/* Partition i's producer when it was opened, else NULL. */
static emq_producer_t *part_if_open(emq_producer_t *p, size_t i) {
    pthread_mutex_lock(&p->parts_mu);
    emq_producer_t *part = p->parts[i];
    pthread_mutex_unlock(&p->parts_mu);
    return part;
}

/* The partition of an entry with key (key_len bytes; NULL: the next in
 * turn). */
static size_t partition_of(emq_producer_t *p, const char *key, size_t key_len) {
    return key ? emq__topic_key_partition(key, key_len, (unsigned)p->nparts)
               : (size_t)(atomic_fetch_add(&p->next, 1) % p->nparts);
}

/* The message key of entry i of a call: kmsgs's, else opts's, else none. */
static const char *key_of(const emq_keyed_message *kmsgs,
                          const emq_produce_opts *opts, size_t i,
                          size_t *key_len) {
    *key_len = 0;
    if (kmsgs) {
        *key_len = kmsgs[i].key_len;
        return kmsgs[i].key;
    }
    if (opts && opts[i].key) {
        *key_len = opts[i].key_len;
        return opts[i].key;
    }
    return NULL;
}

/* Writes n entries of a topic: msgs (plain) or kmsgs (keyed) give them,
 * opts (NULL: none) their keys, when (NULL: none) their delays.
 * Each entry gets its partition, the batch is grouped by partition (a
 * counting sort keeps each partition's entries in batch order), and each
 * group is written by that partition's producer. Every group is tried;
 * the first failure is returned, prefixed with its partition. */
static emq_status split_produce(emq_producer_t *p, const emq_message *msgs,
                                const emq_keyed_message *kmsgs,
                                const emq_produce_opts *opts,
                                const emq__extra *when, size_t n, emq_id *ids,
                                size_t *written, int single, emq_error *err) {
    size_t P = p->nparts;
    emq_message *sorted = emq__alloc((n ? n : 1) * sizeof *sorted);
    emq__extra *sorted_when =
        when ? emq__alloc((n ? n : 1) * sizeof *sorted_when) : NULL;
    size_t *where = emq__alloc((n ? n : 1) * sizeof *where);
    unsigned *part = emq__alloc((n ? n : 1) * sizeof *part);
    size_t *start = emq__calloc(P + 1, sizeof *start);
    emq_id *sub_ids = ids ? emq__alloc((n ? n : 1) * sizeof *sub_ids) : NULL;
    emq_status st = EMQ_OK;
    if (!sorted || !where || !part || !start || (ids && !sub_ids) ||
        (when && !sorted_when)) {
        st = emq__oom(err);
        emq__producer_clear_ids(ids, n);
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        size_t key_len;
        const char *key = key_of(kmsgs, opts, i, &key_len);
        part[i] = (unsigned)partition_of(p, key, key_len);
        start[part[i] + 1]++;
    }
    for (size_t i = 0; i < P; i++)
        start[i + 1] += start[i];
    {
        size_t *fill = emq__alloc(P * sizeof *fill);
        if (fill == NULL) {
            st = emq__oom(err);
            emq__producer_clear_ids(ids, n);
            goto out;
        }
        memcpy(fill, start, P * sizeof *fill);
        for (size_t i = 0; i < n; i++) {
            size_t at = fill[part[i]]++;
            sorted[at] = kmsgs ? kmsgs[i].message : msgs[i];
            if (when)
                sorted_when[at] = when[i];
            where[at] = i;
        }
        emq__free(fill);
    }
    size_t ok = 0;
    emq_status first = EMQ_OK;
    emq_error first_err;
    emq__error_clear(&first_err);
    for (size_t k = 0; k < P; k++) {
        size_t from = start[k], cnt = start[k + 1] - start[k];
        if (cnt == 0)
            continue;
        emq_error one;
        emq__error_clear(&one);
        size_t w = 0;
        emq_status rs = part_open(p, k, &one);
        int opened = rs == EMQ_OK; /* an open failure names its partition */
        if (opened)
            rs = emq__producer_queue(
                p->parts[k], sorted + from, when ? sorted_when + from : NULL,
                cnt, sub_ids ? sub_ids + from : NULL, &w, single, &one);
        else if (sub_ids)
            emq__producer_clear_ids(sub_ids + from, cnt);
        ok += w;
        if (rs != EMQ_OK && first == EMQ_OK) {
            first = rs;
            first_err = one;
            if (opened)
                emq__topic_error_prefix(&first_err, p->conf, k);
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
        emq__error_clear(err);
    }
out:
    emq__free(sorted);
    emq__free(sorted_when);
    emq__free(where);
    emq__free(part);
    emq__free(start);
    emq__free(sub_ids);
    return st;
}

/* Checks a batch of a topic before anything is split or sent: the same
 * rules as a queue's batch. */
static emq_status check_all(const emq_producer_t *p, const emq_message *msgs,
                            const emq_keyed_message *kmsgs,
                            const emq__extra *when, size_t n, int single,
                            emq_error *err) {
    if (n > 0 && msgs == NULL && kmsgs == NULL)
        return emq__error_set(err, EMQ_EINVAL, 0, "msgs is NULL but n is %zu",
                              n);
    for (size_t i = 0; i < n; i++) {
        const emq_message *m = kmsgs ? &kmsgs[i].message : &msgs[i];
        emq_status st =
            emq__producer_check(p, m, when ? &when[i] : NULL, 1, 1, err);
        if (st != EMQ_OK) {
            if (!single)
                emq__error_prefix(err, "entry %zu", i);
            return st;
        }
    }
    return EMQ_OK;
}

static emq_status topic_produce(emq_producer_t *p, const emq_message *msgs,
                                const emq_keyed_message *kmsgs,
                                const emq_produce_opts *opts,
                                const emq__extra *when, size_t n, emq_id *ids,
                                size_t *written, int single, emq_error *err) {
    emq_status st = check_all(p, msgs, kmsgs, when, n, single, err);
    if (st != EMQ_OK) {
        emq__producer_clear_ids(ids, n);
        return st;
    }
    return split_produce(p, msgs, kmsgs, opts, when, n, ids, written, single,
                         err);
}

static emq_status topic_async(emq_producer_t *p, const char *key,
                              size_t key_len, const emq_message *m,
                              const emq__extra *w, emq_delivery_fn cb,
                              void *opaque, emq_error *err) {
    size_t k = partition_of(p, key, key_len);
    emq_status st = part_open(p, k, err);
    if (st != EMQ_OK)
        return st;
    return emq__sender_async(p->parts[k], m, w, cb, opaque, err);
}

static size_t topic_poll(emq_producer_t *p, int64_t timeout_ms) {
    /* Every open partition without waiting, then again in short waits
     * until one ran or the time is up. */
    int64_t deadline = timeout_ms < 0 ? -1 : emq__now_ms() + timeout_ms;
    for (;;) {
        size_t ran = 0;
        for (size_t i = 0; i < p->nparts; i++) {
            emq_producer_t *part = part_if_open(p, i);
            if (part)
                ran += emq__sender_poll(part, 0);
        }
        if (ran > 0 || timeout_ms == 0 ||
            (deadline >= 0 && emq__now_ms() >= deadline) ||
            !emq__cfg_producer_delivery_poll(p->conf))
            return ran;
        emq__sleep_ms(1);
    }
}

static emq_status topic_flush(emq_producer_t *p, int64_t timeout_ms,
                              emq_error *err) {
    int64_t deadline = timeout_ms < 0 ? -1 : emq__now_ms() + timeout_ms;
    for (size_t i = 0; i < p->nparts; i++) {
        emq_producer_t *part = part_if_open(p, i);
        if (part == NULL)
            continue;
        int64_t left = deadline < 0 ? -1 : deadline - emq__now_ms();
        emq_status st =
            emq__sender_flush(part, left < 0 && deadline >= 0 ? 0 : left, err);
        if (st != EMQ_OK) {
            emq__topic_error_prefix(err, p->conf, i);
            return st;
        }
    }
    emq__error_clear(err);
    return EMQ_OK;
}

static size_t topic_outstanding(emq_producer_t *p) {
    size_t n = 0;
    for (size_t i = 0; i < p->nparts; i++) {
        emq_producer_t *part = part_if_open(p, i);
        if (part)
            n += emq__sender_outstanding(part);
    }
    return n;
}

/* ---- the public calls: a queue's, or a topic's over its partitions ------ */

emq_status emq_producer_new(const emq_conf_t *conf, emq_producer_t **out,
                            emq_error *err) {
    emq_status st = emq__producer_open(conf, out, err);
    if (st == EMQ_OK && emq__topic_is(conf) &&
        (st = topic_init(*out, err)) != EMQ_OK) {
        emq__producer_close(*out);
        *out = NULL;
    }
    if (st == EMQ_OK &&
        (st = emq__conf_warn_unverified(conf, "producer", err)) != EMQ_OK) {
        emq_producer_destroy(*out);
        *out = NULL;
    }
    return st;
}

void emq_producer_destroy(emq_producer_t *p) {
    if (p == NULL)
        return;
    topic_free(p);
    emq__producer_close(p);
}

/* Reads n entries' opts (NULL: none) into a new array of extras (NULL
 * when opts is NULL); a bad one is EMQ_EINVAL naming its entry (not when
 * single). */
static emq_status extras_of(const emq_producer_t *p,
                            const emq_produce_opts *opts, size_t n, int single,
                            emq__extra **out, emq_error *err) {
    *out = NULL;
    if (opts == NULL)
        return EMQ_OK;
    if (p == NULL)
        return emq__error_set(err, EMQ_EINVAL, 0, "producer is NULL");
    emq__extra *when = emq__alloc((n ? n : 1) * sizeof *when);
    if (when == NULL)
        return emq__oom(err);
    for (size_t i = 0; i < n; i++) {
        emq_status st =
            emq__producer_opts(p, &opts[i], &when[i], NULL, NULL, err);
        if (st != EMQ_OK) {
            if (!single)
                emq__error_prefix(err, "entry %zu", i);
            emq__free(when);
            return st;
        }
    }
    *out = when;
    return EMQ_OK;
}

/* The entry point of every produce call: a topic, or one queue. msgs or
 * kmsgs give the entries, opts (NULL: none) their options. */
static emq_status produce_any(emq_producer_t *p, const emq_message *msgs,
                              const emq_keyed_message *kmsgs,
                              const emq_produce_opts *opts, size_t n,
                              emq_id *ids, size_t *written, int single,
                              emq_error *err) {
    if (written)
        *written = 0;
    if (n > 0 && opts == NULL && msgs == NULL && kmsgs == NULL) {
        emq__producer_clear_ids(ids, n);
        return emq__error_set(err, EMQ_EINVAL, 0, "msgs is NULL but n is %zu",
                              n);
    }
    emq__extra *when;
    emq_status st = extras_of(p, opts, n, single, &when, err);
    if (st != EMQ_OK) {
        emq__producer_clear_ids(ids, n);
        return st;
    }
    if (p != NULL && p->nparts > 0) {
        st = topic_produce(p, msgs, kmsgs, opts, when, n, ids, written, single,
                           err);
    } else if (kmsgs == NULL) {
        st = emq__producer_queue(p, msgs, when, n, ids, written, single, err);
    } else { /* one queue: the keys do not matter */
        emq_message *plain = emq__alloc((n ? n : 1) * sizeof *plain);
        if (plain == NULL) {
            emq__producer_clear_ids(ids, n);
            st = emq__oom(err);
        } else {
            for (size_t i = 0; i < n; i++)
                plain[i] = kmsgs[i].message;
            st = emq__producer_queue(p, plain, when, n, ids, written, single,
                                     err);
            emq__free(plain);
        }
    }
    emq__free(when);
    return st;
}

emq_status emq_produce(emq_producer_t *p, const emq_field *fields,
                       size_t nfields, emq_id *id, emq_error *err) {
    emq_message m = {fields, nfields, NULL};
    return produce_any(p, &m, NULL, NULL, 1, id, NULL, 1, err);
}

emq_status emq_produce_keyed(emq_producer_t *p, const char *key, size_t key_len,
                             const emq_field *fields, size_t nfields,
                             emq_id *id, emq_error *err) {
    emq_keyed_message m = {{fields, nfields, NULL}, key, key_len};
    return produce_any(p, NULL, &m, NULL, 1, id, NULL, 1, err);
}

emq_status emq_produce_ex(emq_producer_t *p, const emq_field *fields,
                          size_t nfields, const emq_produce_opts *opts,
                          emq_id *id, emq_error *err) {
    emq_message m = {fields, nfields, NULL};
    return produce_any(p, &m, NULL, opts, 1, id, NULL, 1, err);
}

emq_status emq_produce_batch(emq_producer_t *p, const emq_message *msgs,
                             size_t n, emq_id *ids, size_t *written,
                             emq_error *err) {
    return produce_any(p, msgs, NULL, NULL, n, ids, written, 0, err);
}

emq_status emq_produce_batch_keyed(emq_producer_t *p,
                                   const emq_keyed_message *msgs, size_t n,
                                   emq_id *ids, size_t *written,
                                   emq_error *err) {
    return produce_any(p, NULL, msgs, NULL, n, ids, written, 0, err);
}

emq_status emq_produce_batch_ex(emq_producer_t *p, const emq_message *msgs,
                                const emq_produce_opts *opts, size_t n,
                                emq_id *ids, size_t *written, emq_error *err) {
    if (n > 0 && msgs == NULL) {
        if (written)
            *written = 0;
        emq__producer_clear_ids(ids, n);
        return emq__error_set(err, EMQ_EINVAL, 0, "msgs is NULL but n is %zu",
                              n);
    }
    return produce_any(p, msgs, NULL, opts, n, ids, written, 0, err);
}

/* ---- asynchronous ------------------------------------------------------- */

static emq_status async_any(emq_producer_t *p, const char *key, size_t key_len,
                            const emq_field *fields, size_t nfields,
                            const emq_produce_opts *opts, emq_delivery_fn cb,
                            void *opaque, emq_error *err) {
    if (p == NULL)
        return emq__error_set(err, EMQ_EINVAL, 0, "producer is NULL");
    if (cb == NULL)
        return emq__error_set(err, EMQ_EINVAL, 0,
                              "an asynchronous entry needs a callback");
    emq__extra w;
    emq_status st = emq__producer_opts(p, opts, &w, opts ? &key : NULL,
                                       opts ? &key_len : NULL, err);
    if (st != EMQ_OK)
        return st;
    emq_message m = {fields, nfields, NULL};
    st = emq__producer_check(p, &m, &w, 1, 1, err);
    if (st != EMQ_OK)
        return st;
    if (p->nparts > 0)
        return topic_async(p, key, key_len, &m, &w, cb, opaque, err);
    return emq__sender_async(p, &m, &w, cb, opaque, err);
}

emq_status emq_produce_async(emq_producer_t *p, const emq_field *fields,
                             size_t nfields, emq_delivery_fn cb, void *opaque,
                             emq_error *err) {
    return async_any(p, NULL, 0, fields, nfields, NULL, cb, opaque, err);
}

emq_status emq_produce_async_keyed(emq_producer_t *p, const char *key,
                                   size_t key_len, const emq_field *fields,
                                   size_t nfields, emq_delivery_fn cb,
                                   void *opaque, emq_error *err) {
    return async_any(p, key, key_len, fields, nfields, NULL, cb, opaque, err);
}

emq_status emq_produce_async_ex(emq_producer_t *p, const emq_field *fields,
                                size_t nfields, const emq_produce_opts *opts,
                                emq_delivery_fn cb, void *opaque,
                                emq_error *err) {
    return async_any(p, NULL, 0, fields, nfields, opts, cb, opaque, err);
}

size_t emq_producer_poll(emq_producer_t *p, int64_t timeout_ms) {
    if (p == NULL)
        return 0;
    if (p->nparts > 0)
        return topic_poll(p, timeout_ms);
    return emq__sender_poll(p, timeout_ms);
}

emq_status emq_producer_flush(emq_producer_t *p, int64_t timeout_ms,
                              emq_error *err) {
    if (p == NULL)
        return emq__error_set(err, EMQ_EINVAL, 0, "producer is NULL");
    if (p->nparts > 0)
        return topic_flush(p, timeout_ms, err);
    return emq__sender_flush(p, timeout_ms, err);
}

size_t emq_producer_outstanding(emq_producer_t *p) {
    if (p == NULL)
        return 0;
    if (p->nparts > 0)
        return topic_outstanding(p);
    return emq__sender_outstanding(p);
}
