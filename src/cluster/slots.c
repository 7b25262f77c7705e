/* SPDX-License-Identifier: BSD-3-Clause */
/* slots.c: the cluster slot map and the parsing of redirect replies.
 *
 * Pure functions over reply values: they read a CLUSTER SHARDS or CLUSTER
 * SLOTS reply into an emq__slot_map (slot -> master address), and classify
 * an error reply as MOVED, ASK, TRYAGAIN or CLUSTERDOWN. Replicas are not
 * kept: commands that write (XADD, XREADGROUP, XACK) must reach the
 * master. Both RESP2 (flat arrays) and RESP3 (maps) shapes are accepted,
 * and numbers given either as integers or as strings, since the shape has
 * varied between server versions. Nothing here talks to a server.
 */
#include "cluster.h"

#include <ctype.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

void emq__slot_map_init(emq__slot_map *map) {
    map->nodes = NULL;
    map->nnodes = 0;
    for (size_t i = 0; i < EMQ_CLUSTER_SLOTS; i++)
        map->owner[i] = EMQ_SLOT_NONE;
}

void emq__slot_map_free(emq__slot_map *map) {
    emq__free(map->nodes);
    emq__slot_map_init(map);
}

emq_status emq__slot_map_node(emq__slot_map *map, const char *host,
                              size_t hostlen, int port, int *idx,
                              emq_error *err) {
    *idx = -1;
    if (hostlen == 0 || hostlen >= EMQ_CLUSTER_HOST_MAX)
        return emq__error_set(err, EMQ_EPROTO, 0,
                              "a cluster node's address of %zu bytes (1 to "
                              "%d are kept)",
                              hostlen, EMQ_CLUSTER_HOST_MAX - 1);
    if (!emq__host_valid(host, hostlen)) {
        char shown[80];
        emq__printable(shown, sizeof shown, host, hostlen);
        return emq__error_set(err, EMQ_EPROTO, 0,
                              "a cluster node's address '%s' is not a host "
                              "name, an IPv4 address or an IPv6 address",
                              shown);
    }
    if (port < 1 || port > 65535)
        return emq__error_set(err, EMQ_EPROTO, 0,
                              "a cluster node's port %d is not 1-65535", port);
    for (size_t i = 0; i < map->nnodes; i++)
        if (map->nodes[i].port == port &&
            strlen(map->nodes[i].host) == hostlen &&
            memcmp(map->nodes[i].host, host, hostlen) == 0) {
            *idx = (int)i;
            return EMQ_OK;
        }
    if (map->nnodes >= EMQ_CLUSTER_NODES_MAX)
        return emq__error_set(err, EMQ_ELIMIT, 0,
                              "the cluster names more than %d master nodes "
                              "(EMQ_CLUSTER_NODES_MAX)",
                              EMQ_CLUSTER_NODES_MAX);
    emq__cluster_node *grown =
        emq__realloc(map->nodes, (map->nnodes + 1) * sizeof *grown);
    if (grown == NULL)
        return emq__oom(err);
    map->nodes = grown;
    emq__cluster_node *n = &map->nodes[map->nnodes];
    memcpy(n->host, host, hostlen);
    n->host[hostlen] = '\0';
    n->port = port;
    *idx = (int)map->nnodes++;
    return EMQ_OK;
}

/* ---- reading reply values --------------------------------------------- */

/* 1 when r is a string-like reply equal to word (case-sensitive: the
 * server's field names are lower case). */
static int str_is(const emq_reply *r, const char *word) {
    size_t n;
    const char *s = r ? emq_reply_str(r, &n) : NULL;
    return s && n == strlen(word) && memcmp(s, word, n) == 0;
}

/* Reads an integer given as INTEGER or as decimal text into *out. Returns
 * 0, or -1 when r is neither or out of [0, max]. */
static int get_int(const emq_reply *r, long long max, long long *out) {
    if (r == NULL)
        return -1;
    if (emq_reply_kind(r) == EMQ_REPLY_INTEGER) {
        long long v = emq_reply_integer(r);
        if (v < 0 || v > max)
            return -1;
        *out = v;
        return 0;
    }
    size_t n;
    const char *s = emq_reply_str(r, &n);
    if (s == NULL || n == 0 || n > 18)
        return -1;
    long long v = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -1;
        v = v * 10 + (s[i] - '0');
    }
    if (v > max)
        return -1;
    *out = v;
    return 0;
}

/* 1 for an aggregate whose elements alternate key and value (a RESP3 map,
 * or the flat RESP2 array CLUSTER SHARDS sends). */
static int is_pairs(const emq_reply *r) {
    emq_reply_type t = r ? emq_reply_kind(r) : EMQ_REPLY_NULL;
    return (t == EMQ_REPLY_MAP || t == EMQ_REPLY_ARRAY) &&
           emq_reply_len(r) % 2 == 0;
}

/* The value of field name in a key/value aggregate, or NULL. */
static const emq_reply *field(const emq_reply *r, const char *name) {
    size_t n = emq_reply_len(r);
    for (size_t i = 0; i + 1 < n; i += 2)
        if (str_is(emq_reply_at(r, i), name))
            return emq_reply_at(r, i + 1);
    return NULL;
}

/* emq__slot_map_node, freeing map when it fails (a map being read is
 * given up whole). */
static emq_status node_or_free(emq__slot_map *map, const char *host,
                               size_t hostlen, int port, int *idx,
                               emq_error *err) {
    emq_status st = emq__slot_map_node(map, host, hostlen, port, idx, err);
    if (st != EMQ_OK)
        emq__slot_map_free(map);
    return st;
}

static emq_status malformed(emq__slot_map *map, emq_error *err,
                            const char *what, const char *detail) {
    emq__slot_map_free(map);
    return emq__error_set(err, EMQ_EPROTO, 0, "malformed %s reply: %s", what,
                          detail);
}

/* Assigns slots [lo, hi] to node index idx. */
static void assign(emq__slot_map *map, long long lo, long long hi, int idx) {
    for (long long s = lo; s <= hi; s++)
        map->owner[s] = (uint16_t)idx;
}

/* A usable address text: non-empty and not "?" (unknown endpoint). */
static const char *known_address(const emq_reply *r, size_t *len) {
    const char *s = r ? emq_reply_str(r, len) : NULL;
    if (s == NULL || *len == 0 || (*len == 1 && s[0] == '?'))
        return NULL;
    return s;
}

/* ---- CLUSTER SHARDS --------------------------------------------------- */

/* Picks the master of one shard's node list: role "master", health
 * "online" preferred. Returns it or NULL. */
static const emq_reply *shard_master(const emq_reply *nodes) {
    const emq_reply *any = NULL;
    for (size_t i = 0; i < emq_reply_len(nodes); i++) {
        const emq_reply *node = emq_reply_at(nodes, i);
        if (!is_pairs(node) || !str_is(field(node, "role"), "master"))
            continue;
        const emq_reply *health = field(node, "health");
        if (health == NULL || str_is(health, "online"))
            return node;
        if (any == NULL)
            any = node;
    }
    return any;
}

emq_status emq__slot_map_from_shards(emq__slot_map *map, const emq_reply *r,
                                     const char *self_host, int tls,
                                     emq_error *err) {
    static const char what[] = "CLUSTER SHARDS";
    emq_reply_type t = r ? emq_reply_kind(r) : EMQ_REPLY_NULL;
    if (t != EMQ_REPLY_ARRAY && t != EMQ_REPLY_SET)
        return malformed(map, err, what, "not an array of shards");
    for (size_t i = 0; i < emq_reply_len(r); i++) {
        const emq_reply *shard = emq_reply_at(r, i);
        if (!is_pairs(shard))
            return malformed(map, err, what, "a shard is not a map");
        const emq_reply *slots = field(shard, "slots");
        const emq_reply *nodes = field(shard, "nodes");
        if (slots == NULL || nodes == NULL || emq_reply_len(slots) % 2)
            return malformed(map, err, what, "a shard lacks slots or nodes");
        if (emq_reply_len(slots) == 0)
            continue; /* a shard without slots serves nothing */
        const emq_reply *master = shard_master(nodes);
        if (master == NULL)
            continue; /* no master known: its slots stay unowned */
        size_t hostlen = 0;
        const char *host = known_address(field(master, "endpoint"), &hostlen);
        if (host == NULL)
            host = known_address(field(master, "ip"), &hostlen);
        if (host == NULL) {
            host = self_host;
            hostlen = strlen(self_host);
        }
        long long port = 0;
        const emq_reply *tls_port = field(master, "tls-port");
        if (!(tls && tls_port && get_int(tls_port, 65535, &port) == 0 &&
              port > 0) &&
            (get_int(field(master, "port"), 65535, &port) != 0 || port == 0))
            return malformed(map, err, what, "a master has no port");
        int idx;
        emq_status st = node_or_free(map, host, hostlen, (int)port, &idx, err);
        if (st != EMQ_OK)
            return st;
        for (size_t k = 0; k < emq_reply_len(slots); k += 2) {
            long long lo, hi;
            if (get_int(emq_reply_at(slots, k), EMQ_CLUSTER_SLOTS - 1, &lo) ||
                get_int(emq_reply_at(slots, k + 1), EMQ_CLUSTER_SLOTS - 1,
                        &hi) ||
                lo > hi)
                return malformed(map, err, what, "bad slot range");
            assign(map, lo, hi, idx);
        }
    }
    return EMQ_OK;
}

int emq__slot_map_shards_doubtful(const emq_reply *r) {
    emq_reply_type t = r ? emq_reply_kind(r) : EMQ_REPLY_NULL;
    if (t != EMQ_REPLY_ARRAY && t != EMQ_REPLY_SET)
        return 0;
    for (size_t i = 0; i < emq_reply_len(r); i++) {
        const emq_reply *shard = emq_reply_at(r, i);
        const emq_reply *nodes = is_pairs(shard) ? field(shard, "nodes") : NULL;
        if (nodes == NULL)
            continue;
        size_t masters = 0;
        for (size_t k = 0; k < emq_reply_len(nodes); k++) {
            const emq_reply *node = emq_reply_at(nodes, k);
            if (is_pairs(node) && str_is(field(node, "role"), "master"))
                masters++;
        }
        if (masters != 1)
            return 1;
    }
    return 0;
}

/* ---- CLUSTER SLOTS ---------------------------------------------------- */

emq_status emq__slot_map_from_slots(emq__slot_map *map, const emq_reply *r,
                                    const char *self_host, emq_error *err) {
    static const char what[] = "CLUSTER SLOTS";
    if (r == NULL || emq_reply_kind(r) != EMQ_REPLY_ARRAY)
        return malformed(map, err, what, "not an array of ranges");
    for (size_t i = 0; i < emq_reply_len(r); i++) {
        const emq_reply *range = emq_reply_at(r, i);
        long long lo, hi, port;
        if (emq_reply_len(range) < 3 ||
            get_int(emq_reply_at(range, 0), EMQ_CLUSTER_SLOTS - 1, &lo) ||
            get_int(emq_reply_at(range, 1), EMQ_CLUSTER_SLOTS - 1, &hi) ||
            lo > hi)
            return malformed(map, err, what, "bad slot range");
        const emq_reply *master = emq_reply_at(range, 2);
        if (emq_reply_len(master) < 2 ||
            get_int(emq_reply_at(master, 1), 65535, &port) || port == 0)
            return malformed(map, err, what, "a master has no port");
        size_t hostlen = 0;
        const char *host = emq_reply_str(emq_reply_at(master, 0), &hostlen);
        if (host == NULL)
            continue; /* a null endpoint: unknown */
        if (hostlen == 1 && host[0] == '?')
            continue;
        if (hostlen == 0) {
            host = self_host;
            hostlen = strlen(self_host);
        }
        int idx;
        emq_status st = node_or_free(map, host, hostlen, (int)port, &idx, err);
        if (st != EMQ_OK)
            return st;
        assign(map, lo, hi, idx);
    }
    return EMQ_OK;
}

/* ---- redirections ----------------------------------------------------- */

/* 1 when text (n bytes) starts with word followed by a space or its end. */
static int starts_word(const char *text, size_t n, const char *word) {
    size_t w = strlen(word);
    return n >= w && memcmp(text, word, w) == 0 && (n == w || text[w] == ' ');
}

/* Parses "<slot> <host>:<port>" (the host may be empty, or an IPv6
 * address whose last ':' separates the port). Returns 0 or -1. */
static int parse_target(const char *s, size_t n, emq__redirect *out) {
    size_t i = 0;
    long long slot = 0;
    if (i == n || s[i] < '0' || s[i] > '9')
        return -1;
    for (; i < n && s[i] >= '0' && s[i] <= '9'; i++) {
        slot = slot * 10 + (s[i] - '0');
        if (slot >= EMQ_CLUSTER_SLOTS)
            return -1;
    }
    if (i == n || s[i] != ' ')
        return -1;
    const char *addr = s + i + 1;
    size_t alen = n - i - 1;
    const char *colon = NULL;
    for (size_t k = 0; k < alen; k++)
        if (addr[k] == ':')
            colon = addr + k;
    if (colon == NULL)
        return -1;
    size_t hostlen = (size_t)(colon - addr);
    const char *p = colon + 1;
    size_t plen = alen - hostlen - 1;
    long long port = 0;
    if (plen == 0 || plen > 5)
        return -1;
    for (size_t k = 0; k < plen; k++) {
        if (p[k] < '0' || p[k] > '9')
            return -1;
        port = port * 10 + (p[k] - '0');
    }
    if (port < 1 || port > 65535)
        return -1;
    if (hostlen >= 2 && addr[0] == '[' && addr[hostlen - 1] == ']') {
        addr++; /* "[::1]:7000" */
        hostlen -= 2;
    }
    if (hostlen >= EMQ_CLUSTER_HOST_MAX)
        return -1;
    memcpy(out->target.host, addr, hostlen);
    out->target.host[hostlen] = '\0';
    out->target.port = (int)port;
    out->slot = (unsigned)slot;
    return 0;
}

emq__redirect_kind emq__redirect_parse(const emq_reply *r, emq__redirect *out) {
    memset(out, 0, sizeof *out);
    if (r == NULL || emq_reply_kind(r) != EMQ_REPLY_ERROR)
        return EMQ_REDIRECT_NONE;
    size_t n;
    const char *s = emq_reply_str(r, &n);
    if (s == NULL)
        return EMQ_REDIRECT_NONE;
    emq__redirect_kind kind = EMQ_REDIRECT_NONE;
    size_t skip = 0;
    if (starts_word(s, n, "MOVED")) {
        kind = EMQ_REDIRECT_MOVED;
        skip = 6;
    } else if (starts_word(s, n, "ASK")) {
        kind = EMQ_REDIRECT_ASK;
        skip = 4;
    } else if (starts_word(s, n, "TRYAGAIN")) {
        out->kind = EMQ_REDIRECT_TRYAGAIN;
        return out->kind;
    } else if (starts_word(s, n, "CLUSTERDOWN")) {
        out->kind = EMQ_REDIRECT_CLUSTERDOWN;
        return out->kind;
    } else {
        return EMQ_REDIRECT_NONE;
    }
    if (skip > n || parse_target(s + skip, n - skip, out) != 0) {
        memset(out, 0, sizeof *out);
        return EMQ_REDIRECT_NONE;
    }
    out->kind = kind;
    return kind;
}
