/* SPDX-License-Identifier: BSD-3-Clause */
/* stats.c: the consumer's counters as a struct and as JSON. A topic
 * consumer's counters are the sums over its partitions.
 *
 * Counters are atomics written by the consumer's two threads and read
 * from any thread; a snapshot is consistent per counter, not across them.
 * in_flight is the size of the in-flight table at the time of the call,
 * oldest_in_hand_ms the age of its entry handed out longest ago.
 */
#include "stats.h"
#include "core.h"
#include "inflight.h"

#include <stdio.h>
#include <string.h>

/* The statistics callback's document: the counters' JSON, then room for
 * the histograms, lag and oldest pending age appended to it. */
#define STATS_JSON_MAX 4096
#define STATS_TAIL_ROOM 512

void emq_consumer_stats_get(const emq_consumer_t *c, emq_consumer_stats *out) {
    memset(out, 0, sizeof *out);
    size_t n; /* a topic: the sum over its partitions */
    emq_consumer_t *const *m =
        emq__consumer_members((emq_consumer_t *)c, &n); /* atomics only */
    for (size_t i = 0; i < n; i++) {
#define ADD(name) out->name += atomic_load(&m[i]->stats.name);
        EMQ_CONSUMER_COUNTERS(ADD)
        EMQ_CONSUMER_CLUSTER_COUNTERS(ADD)
        EMQ_CONSUMER_HAND_COUNTERS(ADD)
        EMQ_CONSUMER_QUEUE_COUNTERS(ADD)
#undef ADD
        out->in_flight += emq__inflight_count(&m[i]->table);
        out->handed_out += atomic_load(&m[i]->table.nhandling);
        int64_t oldest = emq__inflight_oldest_handed(&m[i]->table);
        int64_t age = oldest > 0 ? emq__now_coarse_ms() - oldest : 0;
        if (age > 0 && (uint64_t)age > out->oldest_in_hand_ms)
            out->oldest_in_hand_ms = (uint64_t)age;
    }
}

size_t emq_consumer_stats_json(const emq_consumer_t *c, char *buf,
                               size_t size) {
    emq_consumer_stats s;
    emq_consumer_stats_get(c, &s);
    emq__json o;
    emq__json_init(&o, buf, size);
    if (c->nparts > 0) {
        emq__json_raw(&o, "{\"topic\":");
        emq__json_cstr(&o, emq__cfg_queue(c->conf));
        emq__json_raw(&o, ",\"partitions\":%zu", c->nparts);
    } else {
        emq__json_raw(&o, "{\"stream\":");
        emq__json_cstr(&o, c->keys.stream);
    }
    emq__json_raw(&o, ",\"group\":");
    emq__json_cstr(&o, c->group);
    emq__json_raw(&o, ",\"consumer\":");
    emq__json_cstr(&o, c->name);
#define JSON(name)                                                             \
    emq__json_raw(&o, ",\"" #name "\":%llu", (unsigned long long)s.name);
    EMQ_CONSUMER_COUNTERS(JSON)
    JSON(in_flight)
    JSON(handed_out)
    EMQ_CONSUMER_CLUSTER_COUNTERS(JSON)
    EMQ_CONSUMER_HAND_COUNTERS(JSON)
    JSON(oldest_in_hand_ms)
    EMQ_CONSUMER_QUEUE_COUNTERS(JSON)
#undef JSON
    emq__json_raw(&o, "}");
    return o.len;
}

/* ---- the statistics callback --------------------------------------------- */

int emq__stats_on(const emq_consumer_t *c) {
    return emq__cfg_stats_fn(c->conf) != NULL &&
           emq__cfg_stats_interval_ms(c->conf) > 0;
}

void emq__stats_latency(emq_consumer_t *c, int64_t us) {
    unsigned k = 0;
    while (us > 1 && k < EMQ_LATENCY_BUCKETS - 1) {
        us >>= 1;
        k++;
    }
    atomic_fetch_add(&c->hist.latency[k], 1);
}

void emq__stats_delivery(emq_consumer_t *c, uint64_t deliveries) {
    unsigned k = deliveries <= 3   ? (deliveries ? (unsigned)deliveries - 1 : 0)
                 : deliveries <= 5 ? 3
                 : deliveries <= 10 ? 4
                                    : 5;
    atomic_fetch_add(&c->hist.deliveries[k], 1);
}

/* The upper bound (us) of the bucket holding the q-th of n samples. */
static uint64_t quantile(const uint64_t *buckets, uint64_t n, double q) {
    uint64_t want = (uint64_t)((double)n * q), seen = 0;
    for (unsigned k = 0; k < EMQ_LATENCY_BUCKETS; k++) {
        seen += buckets[k];
        if (seen > want)
            return (uint64_t)1 << (k + 1);
    }
    return (uint64_t)1 << EMQ_LATENCY_BUCKETS;
}

/* The group's lag (-1: not said) and the idle time of its oldest pending
 * entry (-1: none), from the server. */
static void group_numbers(emq_consumer_t *c, emq__session *x, long long *lag,
                          long long *oldest_ms) {
    *lag = *oldest_ms = -1;
    const char *groups[] = {"XINFO", "GROUPS", c->keys.stream};
    emq_reply *r = NULL;
    emq_error err;
    if (emq__session_call(x, 0, 3, groups, NULL, &r, &err) == EMQ_OK &&
        emq_reply_kind(r) == EMQ_REPLY_ARRAY) {
        for (size_t i = 0; i < emq_reply_len(r); i++) {
            const emq_reply *g = emq_reply_at(r, i);
            const emq_reply *name = emq__stream_field(g, "name");
            size_t len;
            const char *text = name ? emq_reply_str(name, &len) : NULL;
            if (text == NULL || len != strlen(c->group) ||
                memcmp(text, c->group, len) != 0)
                continue;
            const emq_reply *l = emq__stream_field(g, "lag");
            if (l && emq_reply_kind(l) == EMQ_REPLY_INTEGER)
                *lag = emq_reply_integer(l);
        }
    }
    emq_reply_free(r);
    const char *pending[] = {"XPENDING", c->keys.stream, c->group, "-", "+",
                             "1"};
    r = NULL;
    if (emq__session_call(x, 0, 6, pending, NULL, &r, &err) == EMQ_OK &&
        emq_reply_kind(r) == EMQ_REPLY_ARRAY && emq_reply_len(r) == 1) {
        emq__pending_row row;
        if (emq__pending_row_parse(emq_reply_at(r, 0), &row) == 0)
            *oldest_ms = row.idle_ms;
    }
    emq_reply_free(r);
}

void emq__stats_report(emq_consumer_t *c, emq__session *x) {
    char buf[STATS_JSON_MAX];
    size_t len = emq_consumer_stats_json(c, buf, sizeof buf);
    if (len == 0 || len >= sizeof buf - STATS_TAIL_ROOM)
        return;
    len--; /* reopen the object: drop its '}' */
    uint64_t lat[EMQ_LATENCY_BUCKETS], count = 0;
    for (unsigned k = 0; k < EMQ_LATENCY_BUCKETS; k++) {
        lat[k] = atomic_load(&c->hist.latency[k]);
        count += lat[k];
    }
    uint64_t d[EMQ_DELIVERY_BUCKETS];
    for (unsigned k = 0; k < EMQ_DELIVERY_BUCKETS; k++)
        d[k] = atomic_load(&c->hist.deliveries[k]);
    long long lag, oldest;
    group_numbers(c, x, &lag, &oldest);
    char lag_text[24] = "null", oldest_text[24] = "null";
    if (lag >= 0)
        snprintf(lag_text, sizeof lag_text, "%lld", lag);
    if (oldest >= 0)
        snprintf(oldest_text, sizeof oldest_text, "%lld", oldest);
    int more = snprintf(
        buf + len, sizeof buf - len,
        ",\"handler_latency_us\":{\"count\":%llu,\"p50\":%llu,\"p99\":%llu},"
        "\"deliveries\":{\"1\":%llu,\"2\":%llu,\"3\":%llu,\"4-5\":%llu,"
        "\"6-10\":%llu,\"11+\":%llu},\"lag\":%s,\"oldest_pending_ms\":%s}",
        (unsigned long long)count,
        count ? (unsigned long long)quantile(lat, count, 0.50) : 0ULL,
        count ? (unsigned long long)quantile(lat, count, 0.99) : 0ULL,
        (unsigned long long)d[0], (unsigned long long)d[1],
        (unsigned long long)d[2], (unsigned long long)d[3],
        (unsigned long long)d[4], (unsigned long long)d[5], lag_text,
        oldest_text);
    if (more <= 0 || (size_t)more >= sizeof buf - len)
        return;
    emq__cfg_stats_fn(c->conf)(emq__cfg_stats_opaque(c->conf), buf,
                               len + (size_t)more);
}
