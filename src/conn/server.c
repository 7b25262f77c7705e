/* SPDX-License-Identifier: BSD-3-Clause */
/* server.c: which server a connection talks to, and what it can do.
 *
 * Pure functions over what the server says at connect (the HELLO reply,
 * or the text of INFO server), and the one table that turns a server's
 * name and version into emq_capability bits. Every row was checked by the
 * test suite against a real server (docs/COMPATIBILITY.md, scripts/test.sh
 * matrix): Redis 6.2.16, 7.0.15, 7.2.6 and Valkey 8.0.1.
 */
#include "conn.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

uint32_t emq__server_caps(const char *name, int major, int minor, int patch) {
    (void)patch;
    if (name == NULL || major <= 0)
        return 0;
    int at_least_70 = major > 7 || (major == 7 && minor >= 0);
    int at_least_72 = major > 7 || (major == 7 && minor >= 2);
    if (strcmp(name, "valkey") == 0) /* forked from Redis 7.2.4 */
        return EMQ_CAP_XAUTOCLAIM_DELETED | EMQ_CAP_STREAM_COUNTERS |
               EMQ_CAP_CLUSTER_SHARDS | EMQ_CAP_CONSUMER_INACTIVE |
               EMQ_CAP_WAITAOF;
    if (strcmp(name, "redis") != 0)
        return 0;
    uint32_t caps = 0;
    if (at_least_70)
        caps |= EMQ_CAP_XAUTOCLAIM_DELETED | EMQ_CAP_STREAM_COUNTERS |
                EMQ_CAP_CLUSTER_SHARDS;
    if (at_least_72)
        caps |= EMQ_CAP_CONSUMER_INACTIVE | EMQ_CAP_WAITAOF;
    return caps;
}

const char *emq_capability_name(uint32_t cap) {
    switch (cap) {
    case EMQ_CAP_XAUTOCLAIM_DELETED:
        return "xautoclaim_deleted";
    case EMQ_CAP_STREAM_COUNTERS:
        return "stream_counters";
    case EMQ_CAP_CLUSTER_SHARDS:
        return "cluster_shards";
    case EMQ_CAP_CONSUMER_INACTIVE:
        return "consumer_inactive";
    case EMQ_CAP_WAITAOF:
        return "waitaof";
    default:
        return NULL;
    }
}

const char *emq_server_capability(const emq_server *server, size_t i) {
    for (uint32_t bit = 1; server != NULL && bit != 0; bit <<= 1) {
        const char *name = emq_capability_name(bit);
        if (name != NULL && (server->capabilities & bit) && i-- == 0)
            return name;
    }
    return NULL;
}

/* Sets name, version and the numbers and capabilities that follow from
 * them; 1 when the version has the form N.N[.N]. */
static int fill(emq_server *out, const char *name, size_t name_len,
                const char *version, size_t version_len) {
    memset(out, 0, sizeof *out);
    if (name_len == 0 || name_len >= sizeof out->name || version_len == 0 ||
        version_len >= sizeof out->version)
        return 0;
    for (size_t i = 0; i < name_len; i++) {
        char ch = name[i];
        out->name[i] = (char)(ch >= 'A' && ch <= 'Z' ? ch - 'A' + 'a' : ch);
    }
    memcpy(out->version, version, version_len);
    int major = 0, minor = 0, patch = 0;
    if (sscanf(out->version, "%d.%d.%d", &major, &minor, &patch) < 2 ||
        major <= 0) {
        memset(out, 0, sizeof *out);
        return 0;
    }
    out->major = major;
    out->minor = minor;
    out->patch = patch;
    out->capabilities = emq__server_caps(out->name, major, minor, patch);
    return 1;
}

int emq__server_from_hello(const emq_reply *hello, emq_server *out) {
    memset(out, 0, sizeof *out);
    emq_reply_type kind = emq_reply_kind(hello);
    if (kind != EMQ_REPLY_MAP && kind != EMQ_REPLY_ARRAY)
        return 0;
    /* A map's children are key, value, key, value (as a flat array). */
    const char *name = NULL, *version = NULL;
    size_t name_len = 0, version_len = 0;
    for (size_t i = 0; i + 1 < emq_reply_len(hello); i += 2) {
        size_t klen;
        const char *key = emq_reply_str(emq_reply_at(hello, i), &klen);
        if (key == NULL)
            continue;
        const emq_reply *value = emq_reply_at(hello, i + 1);
        if (klen == 6 && memcmp(key, "server", 6) == 0)
            name = emq_reply_str(value, &name_len);
        else if (klen == 7 && memcmp(key, "version", 7) == 0)
            version = emq_reply_str(value, &version_len);
    }
    if (name == NULL || version == NULL)
        return 0;
    return fill(out, name, name_len, version, version_len);
}

int64_t emq__hello_client_id(const emq_reply *hello) {
    for (size_t i = 0; i + 1 < emq_reply_len(hello); i += 2) {
        size_t klen;
        const char *key = emq_reply_str(emq_reply_at(hello, i), &klen);
        if (key != NULL && klen == 2 && memcmp(key, "id", 2) == 0)
            return emq_reply_integer(emq_reply_at(hello, i + 1));
    }
    return 0;
}

/* The value of "field:" on a line of text, or NULL (*len its length). */
static const char *info_value(const char *text, size_t len, const char *field,
                              size_t *vlen) {
    size_t flen = strlen(field);
    for (size_t i = 0; i < len;) {
        const char *line = text + i;
        const char *nl = memchr(line, '\n', len - i);
        size_t line_len = nl ? (size_t)(nl - line) : len - i;
        if (line_len > flen && memcmp(line, field, flen) == 0 &&
            line[flen] == ':') {
            size_t n = line_len - flen - 1;
            if (n > 0 && line[flen + 1 + n - 1] == '\r')
                n--;
            *vlen = n;
            return line + flen + 1;
        }
        i += line_len + 1;
    }
    *vlen = 0;
    return NULL;
}

int emq__server_from_info(const char *text, size_t len, emq_server *out) {
    memset(out, 0, sizeof *out);
    if (text == NULL)
        return 0;
    size_t nlen = 0, vlen = 0;
    const char *name = info_value(text, len, "server_name", &nlen);
    const char *version = info_value(text, len, "valkey_version", &vlen);
    if (version == NULL) {
        version = info_value(text, len, "redis_version", &vlen);
        if (name == NULL) {
            name = "redis";
            nlen = 5;
        }
    } else if (name == NULL) {
        name = "valkey";
        nlen = 6;
    }
    if (version == NULL)
        return 0;
    return fill(out, name, nlen, version, vlen);
}
