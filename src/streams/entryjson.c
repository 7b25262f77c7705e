/* SPDX-License-Identifier: BSD-3-Clause */
/* entryjson.c: entries and their fields as JSON, as every layer and the CLI
 * write them: strict JSON, byte-exact (a value or name that is not UTF-8
 * becomes {"base64":"..."}; see docs/CLI.md), snprintf semantics. */
#include "streams.h"

size_t emq_entry_json(const emq_entry *entry, char *buf, size_t size) {
    return emq_entry_json_partition(entry, -1, buf, size);
}

size_t emq_entry_json_partition(const emq_entry *entry, int partition,
                                char *buf, size_t size) {
    emq__json o;
    emq__json_init(&o, buf, size);
    emq__json_raw(&o, "{\"id\":");
    emq__json_cstr(&o, entry->id);
    if (entry->stream) {
        emq__json_raw(&o, ",\"stream\":");
        emq__json_cstr(&o, entry->stream);
    }
    if (partition >= 0)
        emq__json_raw(&o, ",\"partition\":%d", partition);
    emq__json_raw(&o, ",\"deliveries\":%llu,\"fields\":",
                  (unsigned long long)entry->deliveries);
    size_t room = o.len < o.size ? o.size - o.len : 0;
    o.len += emq_fields_json(entry->fields, entry->nfields,
                             room ? o.buf + o.len : NULL, room);
    emq__json_raw(&o, "}");
    return o.len;
}

size_t emq_fields_json(const emq_field *fields, size_t n, char *buf,
                       size_t size) {
    emq__json o;
    emq__json_init(&o, buf, size);
    /* JSON object names are strings: when a field name is not UTF-8
     * (rare), the fields are written as [[name, value], ...] pairs, where
     * each part is a string or {"base64":"..."}, so the line stays JSON. */
    int pairs = 0;
    for (size_t i = 0; i < n && !pairs; i++)
        pairs = !emq__utf8_valid(fields[i].name, fields[i].name_len);
    emq__json_raw(&o, pairs ? "[" : "{");
    for (size_t i = 0; i < n; i++) {
        emq__json_raw(&o, i ? (pairs ? ",[" : ",") : (pairs ? "[" : ""));
        emq__json_bytes(&o, fields[i].name, fields[i].name_len);
        emq__json_raw(&o, pairs ? "," : ":");
        emq__json_bytes(&o, fields[i].value, fields[i].value_len);
        if (pairs)
            emq__json_raw(&o, "]");
    }
    emq__json_raw(&o, pairs ? "]" : "}");
    return o.len;
}
