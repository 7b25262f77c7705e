/* stats.c: the consumer's counters, as a struct and as JSON.
 *
 * Counters are relaxed atomics written by the consumer's thread and read
 * from any thread; a snapshot is consistent per counter, not across them.
 */
#include "consumer.h"

#include <stdarg.h>
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

/* Output with snprintf semantics: writes what fits (NUL-terminated) and
 * counts the full length. */
typedef struct out {
    char *buf;
    size_t size;
    size_t len;
} out;

static void put(out *o, const char *fmt, ...) EMQ_PRINTF(2, 3);
static void put(out *o, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    size_t room = o->len < o->size ? o->size - o->len : 0;
    int n = vsnprintf(room ? o->buf + o->len : NULL, room, fmt, ap);
    va_end(ap);
    if (n > 0)
        o->len += (size_t)n;
}

/* Writes s as a JSON string: printable ASCII as is, the rest \u-escaped. */
static void put_string(out *o, const char *s) {
    put(o, "\"");
    for (; *s; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '"' || ch == '\\')
            put(o, "\\%c", ch);
        else if (ch < 0x20 || ch >= 0x7f)
            put(o, "\\u%04x", ch);
        else
            put(o, "%c", ch);
    }
    put(o, "\"");
}

size_t emq_consumer_stats_json(const emq_consumer_t *c, char *buf,
                               size_t size) {
    emq_consumer_stats s;
    emq_consumer_stats_get(c, &s);
    out o = {buf, size, 0};
    if (size)
        buf[0] = '\0';
    put(&o, "{\"stream\":");
    put_string(&o, c->keys.stream);
    put(&o, ",\"group\":");
    put_string(&o, c->group);
    put(&o, ",\"consumer\":");
    put_string(&o, c->name);
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
        put(&o, ",\"%s\":%llu", counters[i].name,
            (unsigned long long)counters[i].value);
    put(&o, "}");
    return o.len;
}
