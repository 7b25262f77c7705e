/* SPDX-License-Identifier: BSD-3-Clause */
/* sentinel.c: what Sentinel's replies say, for the connection's
 * resolution of a master and its watch (sentinel_client.c).
 *
 * Pure: reads replies and edits a URL's list of Sentinels; no I/O. The
 * Sentinel client protocol: ask each Sentinel in turn, move the one that
 * answered to the front, learn the others from it, and trust a primary
 * only once it says ROLE master.
 */
#include "conn.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

/* Copies the string reply r into out (size bytes); 0 when r is not a
 * string or does not fit. */
static int copy_str(const emq_reply *r, char *out, size_t size) {
    size_t n;
    const char *text = emq_reply_str(r, &n);
    if (text == NULL || n == 0 || n >= size)
        return 0;
    memcpy(out, text, n);
    out[n] = '\0';
    return 1;
}

/* copy_str for an address a Sentinel names: 0 unless emq__host_valid
 * takes it. */
static int copy_host(const emq_reply *r, char *out, size_t size) {
    return copy_str(r, out, size) && emq__host_valid(out, strlen(out));
}

/* Reads a port from a string or integer reply; 0 when it is none. */
static int port_of(const emq_reply *r) {
    if (emq_reply_kind(r) == EMQ_REPLY_INTEGER) {
        long long v = emq_reply_integer(r);
        return v > 0 && v <= 65535 ? (int)v : 0;
    }
    char text[8];
    if (!copy_str(r, text, sizeof text))
        return 0;
    int v = 0;
    for (const char *c = text; *c; c++) {
        if (*c < '0' || *c > '9')
            return 0;
        v = v * 10 + (*c - '0');
    }
    return v > 0 && v <= 65535 ? v : 0;
}

int emq__sentinel_master_addr(const emq_reply *r, char *host, size_t size,
                              int *port) {
    if (emq_reply_kind(r) == EMQ_REPLY_NULL)
        return 0;
    if (emq_reply_kind(r) != EMQ_REPLY_ARRAY || emq_reply_len(r) != 2)
        return -1;
    *port = port_of(emq_reply_at(r, 1));
    if (!copy_host(emq_reply_at(r, 0), host, size) || *port == 0)
        return -1;
    return 1;
}

int emq__sentinel_role_is_master(const emq_reply *r) {
    if (emq_reply_kind(r) != EMQ_REPLY_ARRAY || emq_reply_len(r) == 0)
        return -1;
    char role[16];
    if (!copy_str(emq_reply_at(r, 0), role, sizeof role))
        return -1;
    return strcmp(role, "master") == 0;
}

void emq__sentinel_to_front(emq__url *u, size_t i) {
    if (i == 0 || i >= u->nsentinels)
        return;
    emq__hostport first = u->sentinels[i];
    memmove(u->sentinels + 1, u->sentinels, i * sizeof *u->sentinels);
    u->sentinels[0] = first;
}

void emq__sentinel_to_back(emq__url *u, const char *host, int port) {
    for (size_t i = 0; i + 1 < u->nsentinels; i++) {
        if (u->sentinels[i].host != host || u->sentinels[i].port != port)
            continue;
        emq__hostport last = u->sentinels[i];
        memmove(u->sentinels + i, u->sentinels + i + 1,
                (u->nsentinels - i - 1) * sizeof *u->sentinels);
        u->sentinels[u->nsentinels - 1] = last;
        return;
    }
}

const char *const emq__sentinel_channels[EMQ_SENTINEL_CHANNELS] = {
    "+switch-master",
    "+promoted-slave",
    "+try-failover",
    "+elected-leader",
    "+failover-state-select-slave",
    "+selected-slave",
    "+failover-state-send-slaveof-noone",
    "+failover-state-wait-promotion",
    "-failover-abort-not-elected",
    "-failover-abort-no-good-slave",
    "-failover-abort-slave-timeout",
    "+failover-end",
    "+failover-end-for-timeout"};

/* What a message on channel means; EMQ_SENTINEL_UNREADABLE for another. */
static emq__sentinel_news channel_news(const char *channel) {
    for (int i = 0; i < EMQ_SENTINEL_CHANNELS; i++)
        if (strcmp(channel, emq__sentinel_channels[i]) == 0)
            return i < 2 ? EMQ_SENTINEL_SWITCH
                   : channel[0] == '-' ||
                           strncmp(channel, "+failover-end", 13) == 0
                       ? EMQ_SENTINEL_ENDED
                       : EMQ_SENTINEL_BEGUN;
    return EMQ_SENTINEL_UNREADABLE;
}

emq__sentinel_news emq__sentinel_news_of(const emq_reply *r, const char *master,
                                         char *host, size_t size, int *port) {
    char kind[16], channel[48], payload[512];
    if (size > 0)
        host[0] = '\0';
    *port = 0;
    if (emq_reply_kind(r) != EMQ_REPLY_ARRAY || emq_reply_len(r) != 3 ||
        !copy_str(emq_reply_at(r, 0), kind, sizeof kind))
        return EMQ_SENTINEL_UNREADABLE;
    if (strcmp(kind, "subscribe") == 0)
        return EMQ_SENTINEL_NONE; /* the confirmation of a channel */
    if (strcmp(kind, "message") != 0 ||
        !copy_str(emq_reply_at(r, 1), channel, sizeof channel) ||
        !copy_str(emq_reply_at(r, 2), payload, sizeof payload))
        return EMQ_SENTINEL_UNREADABLE;
    emq__sentinel_news news = channel_news(channel);
    if (news == EMQ_SENTINEL_UNREADABLE)
        return news;
    /* An event of the master itself: "master <name> <ip> <port>"; of a
     * replica: "slave <ip>:<port> <ip> <port> @ <name> <ip> <port>";
     * +switch-master: "<name> <old ip> <old port> <new ip> <new port>". */
    const char *name = payload, *addr = NULL;
    int is_switch = strcmp(channel, "+switch-master") == 0;
    const char *at = strstr(payload, " @ ");
    if (is_switch) {
        addr = payload; /* past the name and the old address */
        for (int skip = 0; addr != NULL && skip < 3; skip++) {
            addr = strchr(addr, ' ');
            addr = addr ? addr + 1 : NULL;
        }
    } else if (at != NULL) {
        name = at + 3;
        addr = strchr(payload, ' ');
        addr = addr ? strchr(addr + 1, ' ') : NULL; /* past "slave ip:port" */
    } else if (strncmp(payload, "master ", 7) == 0) {
        name = payload + 7;
    } else {
        return EMQ_SENTINEL_UNREADABLE;
    }
    size_t n = strcspn(name, " ");
    if (master == NULL || strlen(master) != n || memcmp(name, master, n) != 0)
        return EMQ_SENTINEL_NONE;
    if (news != EMQ_SENTINEL_SWITCH)
        return news;
    char ip[256];
    int p = 0;
    if (addr != NULL && sscanf(addr, " %255s %d", ip, &p) == 2 && p > 0 &&
        p <= 65535 && strlen(ip) < size && emq__host_valid(ip, strlen(ip))) {
        memcpy(host, ip, strlen(ip) + 1);
        *port = p;
    }
    return news;
}

/* The value of field name in a flat field/value array (RESP2) or a map
 * (RESP3); NULL when absent. */
static const emq_reply *field_of(const emq_reply *r, const char *name) {
    size_t n = emq_reply_len(r);
    for (size_t i = 0; i + 1 < n; i += 2) {
        size_t len;
        const char *key = emq_reply_str(emq_reply_at(r, i), &len);
        if (key && len == strlen(name) && memcmp(key, name, len) == 0)
            return emq_reply_at(r, i + 1);
    }
    return NULL;
}

int64_t emq__sentinel_failover_timeout(const emq_reply *r) {
    const emq_reply *v = field_of(r, "failover-timeout");
    if (v == NULL)
        return 0;
    char text[24];
    if (emq_reply_kind(v) == EMQ_REPLY_INTEGER)
        return emq_reply_integer(v) > 0 ? emq_reply_integer(v) : 0;
    if (!copy_str(v, text, sizeof text))
        return 0;
    long long ms = 0;
    for (const char *c = text; *c; c++) {
        if (*c < '0' || *c > '9' || ms > 1000000000000LL)
            return 0;
        ms = ms * 10 + (*c - '0');
    }
    return ms;
}

/* One side of an address_map entry, text[0..n), into out. */
static emq_status map_side(const char *text, size_t n, emq__url *out,
                           emq_error *err) {
    if (n == 0)
        return emq__error_set(err, EMQ_EINVAL, 0, "an empty address");
    return emq__hostport_parse(text, n, out, err);
}

emq_status emq__sentinel_map(const char *map, char *host, size_t size,
                             int *port, emq_error *err) {
    size_t k = 0;
    for (const char *s = map; s != NULL && *s != '\0';) {
        k++;
        const char *comma = strchr(s, ',');
        size_t n = comma ? (size_t)(comma - s) : strlen(s);
        const char *eq = memchr(s, '=', n);
        emq__url from, to;
        emq_status st = eq == NULL
                            ? emq__error_set(err, EMQ_EINVAL, 0, "no '='")
                            : map_side(s, (size_t)(eq - s), &from, err);
        if (st == EMQ_OK && (st = map_side(eq + 1, n - (size_t)(eq - s) - 1,
                                           &to, err)) != EMQ_OK)
            emq__url_free(&from);
        if (st != EMQ_OK) {
            if (st == EMQ_EINVAL)
                emq__error_prefix(err, "entry %zu", k);
            return st;
        }
        int match = from.port == *port && strcasecmp(from.host, host) == 0;
        if (match && strlen(to.host) >= size)
            st = emq__error_set(err, EMQ_EINVAL, 0,
                                "entry %zu: the address '%.100s' is too long",
                                k, to.host);
        else if (match) {
            memcpy(host, to.host, strlen(to.host) + 1);
            *port = to.port;
        }
        emq__url_free(&from);
        emq__url_free(&to);
        if (st != EMQ_OK || match || comma == NULL)
            return st;
        s = comma + 1;
        if (*s == '\0')
            return emq__error_set(err, EMQ_EINVAL, 0, "entry %zu: empty",
                                  k + 1);
    }
    return EMQ_OK;
}

size_t emq__sentinel_learn(emq__url *u, const emq_reply *r, const char *map,
                           const char *allowed) {
    size_t added = 0;
    if (emq_reply_kind(r) != EMQ_REPLY_ARRAY)
        return 0;
    for (size_t i = 0; i < emq_reply_len(r); i++) {
        const emq_reply *peer = emq_reply_at(r, i);
        const emq_reply *ip = field_of(peer, "ip");
        const emq_reply *pr = field_of(peer, "port");
        char host[256];
        int port = pr ? port_of(pr) : 0;
        emq_error ignored;
        if (ip == NULL || port == 0 || !copy_host(ip, host, sizeof host) ||
            emq__sentinel_map(map, host, sizeof host, &port, &ignored) !=
                EMQ_OK ||
            !emq__host_allowed(allowed, host))
            continue;
        int known = 0;
        for (size_t k = 0; k < u->nsentinels && !known; k++)
            known = u->sentinels[k].port == port &&
                    strcmp(u->sentinels[k].host, host) == 0;
        if (known || u->nsentinels >= EMQ_SENTINELS_MAX)
            continue;
        char *copy = emq__strndup(host, strlen(host));
        if (copy == NULL)
            break;
        u->sentinels[u->nsentinels].host = copy;
        u->sentinels[u->nsentinels++].port = port;
        added++;
    }
    return added;
}
