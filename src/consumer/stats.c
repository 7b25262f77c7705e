/* stats.c: the consumer's counters as a struct and as JSON, and entries as
 * JSON. A topic consumer's counters are the sums over its partitions.
 *
 * Counters are atomics written by the consumer's two threads and read
 * from any thread; a snapshot is consistent per counter, not across them.
 * in_flight is the size of the in-flight table at the time of the call.
 */
#include "consumer.h"

#include <stdio.h>
#include <string.h>

void emq_consumer_stats_get(const emq_consumer_t *c, emq_consumer_stats *out) {
    memset(out, 0, sizeof *out);
    if (c->nparts > 0) { /* a topic: the sum over its partitions */
        for (size_t i = 0; i < c->nparts; i++) {
            emq_consumer_stats s;
            emq_consumer_stats_get(c->parts[i], &s);
#define ADD(name) out->name += s.name;
            EMQ_CONSUMER_COUNTERS(ADD)
#undef ADD
            out->in_flight += s.in_flight;
            out->handed_out += s.handed_out;
        }
        return;
    }
    emq_consumer_t *m = (emq_consumer_t *)c; /* atomics and a lock only */
#define LOAD(name) out->name = atomic_load(&m->stats.name);
    EMQ_CONSUMER_COUNTERS(LOAD)
#undef LOAD
    out->in_flight = emq_inflight_count(&m->table);
    out->handed_out = atomic_load(&m->table.nhandling);
}

size_t emq_entry_json(const emq_entry *entry, char *buf, size_t size) {
    return emq_entry_json_partition(entry, -1, buf, size);
}

size_t emq_entry_json_partition(const emq_entry *entry, int partition,
                                char *buf, size_t size) {
    emq_json o;
    emq_json_init(&o, buf, size);
    emq_json_raw(&o, "{\"id\":");
    emq_json_cstr(&o, entry->id);
    if (entry->stream) {
        emq_json_raw(&o, ",\"stream\":");
        emq_json_cstr(&o, entry->stream);
    }
    if (partition >= 0)
        emq_json_raw(&o, ",\"partition\":%d", partition);
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
#define JSON(name)                                                             \
    emq_json_raw(&o, ",\"" #name "\":%llu", (unsigned long long)s.name);
    EMQ_CONSUMER_COUNTERS(JSON)
    JSON(in_flight)
    JSON(handed_out)
#undef JSON
    emq_json_raw(&o, "}");
    return o.len;
}
