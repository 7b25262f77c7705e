/* stats.c: the consumer's counters, as a struct and as JSON.
 *
 * Counters are relaxed atomics written by the consumer's thread and read
 * from any thread; a snapshot is consistent per counter, not across them.
 */
#include "consumer.h"

#include <stdio.h>

void emq_consumer_stats_get(const emq_consumer_t *c, emq_consumer_stats *out) {
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

/* Writes s as a JSON string body: printable ASCII as is, the rest \u-escaped. */
static int json_string(char *buf, size_t size, const char *s) {
    int n = 0;
    for (; *s; s++) {
        unsigned char ch = (unsigned char)*s;
        size_t room = (size_t)n < size ? size - (size_t)n : 0;
        if (ch == '"' || ch == '\\')
            n += snprintf(buf + (size - room), room, "\\%c", ch);
        else if (ch < 0x20 || ch >= 0x7f)
            n += snprintf(buf + (size - room), room, "\\u%04x", ch);
        else
            n += snprintf(buf + (size - room), room, "%c", ch);
    }
    return n;
}

size_t emq_consumer_stats_json(const emq_consumer_t *c, char *buf,
                               size_t size) {
    emq_consumer_stats s;
    emq_consumer_stats_get(c, &s);
    char name[300], group[300], stream[600];
    json_string(name, sizeof name, c->name);
    json_string(group, sizeof group, c->group);
    json_string(stream, sizeof stream, c->keys.stream);
    int n = snprintf(
        buf, size,
        "{\"stream\":\"%s\",\"group\":\"%s\",\"consumer\":\"%s\","
        "\"delivered\":%llu,\"acked\":%llu,\"retried\":%llu,\"failed\":%llu,"
        "\"dead_lettered\":%llu,\"claimed\":%llu,\"deleted_pending\":%llu,"
        "\"reconnects\":%llu,\"group_recreated\":%llu,\"reads\":%llu,"
        "\"round_trips\":%llu}",
        stream, group, name, (unsigned long long)s.delivered,
        (unsigned long long)s.acked, (unsigned long long)s.retried,
        (unsigned long long)s.failed, (unsigned long long)s.dead_lettered,
        (unsigned long long)s.claimed, (unsigned long long)s.deleted_pending,
        (unsigned long long)s.reconnects,
        (unsigned long long)s.group_recreated, (unsigned long long)s.reads,
        (unsigned long long)s.round_trips);
    return n < 0 ? 0 : (size_t)n;
}
