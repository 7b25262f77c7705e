/* stats.c: the consumer's counters as a struct and as JSON, and entries as
 * JSON. A topic consumer's counters are the sums over its partitions.
 *
 * Counters are relaxed atomics written by the consumer's thread and read
 * from any thread; a snapshot is consistent per counter, not across them.
 */
#include "consumer.h"

#include <stdio.h>
#include <string.h>

void emq_consumer_stats_get(const emq_consumer_t *c, emq_consumer_stats *out) {
    if (c->nparts > 0) { /* a topic: the sum over its partitions */
        memset(out, 0, sizeof *out);
        for (size_t i = 0; i < c->nparts; i++) {
            emq_consumer_stats s;
            emq_consumer_stats_get(c->parts[i], &s);
            out->delivered += s.delivered;
            out->acked += s.acked;
            out->retried += s.retried;
            out->failed += s.failed;
            out->dead_lettered += s.dead_lettered;
            out->claimed += s.claimed;
            out->deleted_pending += s.deleted_pending;
            out->reconnects += s.reconnects;
            out->group_recreated += s.group_recreated;
            out->reads += s.reads;
            out->round_trips += s.round_trips;
        }
        return;
    }
    emq_consumer_t *m = (emq_consumer_t *)c; /* atomics: loads only */
    out->delivered = atomic_load(&m->stats.delivered);
    out->acked = atomic_load(&m->stats.acked);
    out->retried = atomic_load(&m->stats.retried);
    out->failed = atomic_load(&m->stats.failed);
    out->dead_lettered = atomic_load(&m->stats.dead_lettered);
    out->claimed = atomic_load(&m->stats.claimed);
    out->deleted_pending = atomic_load(&m->stats.deleted_pending);
    out->reconnects = atomic_load(&m->stats.reconnects);
    out->group_recreated = atomic_load(&m->stats.group_recreated);
    out->reads = atomic_load(&m->stats.reads);
    out->round_trips = atomic_load(&m->stats.round_trips);
}

size_t emq_entry_json(const emq_entry *entry, char *buf, size_t size) {
    emq_json o;
    emq_json_init(&o, buf, size);
    emq_json_raw(&o, "{\"id\":");
    emq_json_cstr(&o, entry->id);
    emq_json_raw(&o, ",\"deliveries\":%llu,\"fields\":",
                 (unsigned long long)entry->deliveries);
    /* JSON object names are strings: when a field name is not UTF-8
     * (rare), the fields are written as [[name, value], ...] pairs, where
     * each part is a string or {"base64":"..."}, so the line stays JSON. */
    int pairs = 0;
    for (size_t i = 0; i < entry->nfields && !pairs; i++)
        pairs = !emq_utf8_valid(entry->fields[i].name,
                                entry->fields[i].name_len);
    emq_json_raw(&o, pairs ? "[" : "{");
    for (size_t i = 0; i < entry->nfields; i++) {
        emq_json_raw(&o, i ? (pairs ? ",[" : ",") : (pairs ? "[" : ""));
        emq_json_bytes(&o, entry->fields[i].name, entry->fields[i].name_len);
        emq_json_raw(&o, pairs ? "," : ":");
        emq_json_bytes(&o, entry->fields[i].value,
                       entry->fields[i].value_len);
        if (pairs)
            emq_json_raw(&o, "]");
    }
    emq_json_raw(&o, pairs ? "]}" : "}}");
    return o.len;
}

size_t emq_consumer_stats_json(const emq_consumer_t *c, char *buf,
                               size_t size) {
    emq_consumer_stats s;
    emq_consumer_stats_get(c, &s);
    emq_json o;
    emq_json_init(&o, buf, size);
    if (c->nparts > 0) {
        emq_json_raw(&o, "{\"topic\":");
        emq_json_cstr(&o, c->conf->queue);
        emq_json_raw(&o, ",\"partitions\":%zu", c->nparts);
    } else {
        emq_json_raw(&o, "{\"stream\":");
        emq_json_cstr(&o, c->keys.stream);
    }
    emq_json_raw(&o, ",\"group\":");
    emq_json_cstr(&o, c->group);
    emq_json_raw(&o, ",\"consumer\":");
    emq_json_cstr(&o, c->name);
    const struct {
        const char *name;
        uint64_t value;
    } counters[] = {
        {"delivered", s.delivered},
        {"acked", s.acked},
        {"retried", s.retried},
        {"failed", s.failed},
        {"dead_lettered", s.dead_lettered},
        {"claimed", s.claimed},
        {"deleted_pending", s.deleted_pending},
        {"reconnects", s.reconnects},
        {"group_recreated", s.group_recreated},
        {"reads", s.reads},
        {"round_trips", s.round_trips},
    };
    for (size_t i = 0; i < sizeof counters / sizeof counters[0]; i++)
        emq_json_raw(&o, ",\"%s\":%llu", counters[i].name,
                     (unsigned long long)counters[i].value);
    emq_json_raw(&o, "}");
    return o.len;
}
