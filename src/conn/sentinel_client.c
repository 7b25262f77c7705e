/* SPDX-License-Identifier: BSD-3-Clause */
/* sentinel_client.c: a connection behind Sentinel: the primary of its
 * master asked of the Sentinels (the resolution), and one Sentinel
 * watched for that master's switch (the watch).
 *
 * The resolution follows the Sentinel client protocol: ask each Sentinel
 * in turn (SENTINEL get-master-addr-by-name, within SENTINEL_ASK_MS
 * each), move the one that answered to the front, learn the others from
 * it (SENTINEL sentinels). conn.c resolves at every connect, then checks
 * that the primary says ROLE master.
 *
 * The watch is a second connection to the Sentinel that named the
 * primary, subscribed to +switch-master and +promoted-slave before the
 * question is asked. conn.c waits on its descriptor beside the primary's
 * and asks it before a command goes out on an idle connection: once it
 * announces a switch of this master to another primary, or ends, the
 * connection goes away and the next connect resolves again.
 *
 * Reading what the Sentinels' replies say is sentinel.c's (pure); here
 * is the I/O, on connections of conn.c. Never: keep a Sentinel
 * connection past the resolution but the watch, or put a Sentinel's
 * password in a message.
 */
#include "conn.h"

#include "conf.h"
#include "transport.h"

#include <poll.h>
#include <stdio.h>
#include <string.h>

/* How long one Sentinel has to answer (the client spec: a short timeout,
 * then the next one). */
#define SENTINEL_ASK_MS 1000

const char *emq__sentinel_master_name(const emq__conn_options *opt,
                                      const emq__url *url) {
    return opt->sentinel_master ? opt->sentinel_master : url->master;
}

/* Connects to the Sentinel at (its own credentials; TLS as sentinel.tls
 * says, else as the URL's scheme, with the data nodes' TLS files), within
 * SENTINEL_ASK_MS and deadline. */
static emq_status sentinel_open(const emq__conn_options *opt,
                                const emq__url *url,
                                const struct emq__tls_opts *tlso,
                                const emq__hostport *at, int64_t deadline,
                                emq_conn_t **out, emq_error *why) {
    int tls = opt->sentinel_tls >= 0 ? opt->sentinel_tls == 1
                                     : url->scheme == EMQ_URL_TLS;
    int64_t left = deadline - emq__now_ms();
    if (left > SENTINEL_ASK_MS)
        left = SENTINEL_ASK_MS;
    if (left < 1)
        left = 1;
    emq__conn_options o = *opt;
    o.url = NULL;
    o.host = at->host;
    o.port = at->port;
    o.tls = tls;
    o.user = opt->sentinel_user;
    o.password = opt->sentinel_password;
    o.db = 0;
    o.client_name = NULL;
    o.learn_client_id = 0;
    o.protocol = 2;
    o.connect_timeout_ms = left;
    o.command_timeout_ms = left;
    o.max_attempts = 1;
    o.tls_ca_file = tlso->ca_file;
    o.tls_cert_file = tlso->cert_file;
    o.tls_key_file = tlso->key_file;
    o.tls_key_password = tlso->key_password;
    o.tls_sni = tlso->sni;
    o.tls_verify = tlso->verify ? EMQ_TLS_VERIFY_PEER : EMQ_TLS_VERIFY_NONE;
    o.sentinel_master = NULL;
    return emq__conn_open(&o, out, why);
}

/* A connection to the Sentinel at, subscribed to +switch-master and
 * +promoted-slave; NULL when it could not be set up (best effort: without
 * it a switch is still found through the old primary's replies or its
 * end). +promoted-slave comes from the failover's leader seconds before
 * its +switch-master, once the new primary takes writes (a requested
 * failover announces the switch only when the other replicas follow it);
 * the old primary takes writes until then. */
static emq_conn_t *watch_open(const emq__conn_options *opt, const emq__url *url,
                              const struct emq__tls_opts *tls,
                              const emq__hostport *at, int64_t deadline) {
    emq_error ignored;
    emq_conn_t *w;
    if (sentinel_open(opt, url, tls, at, deadline, &w, &ignored) != EMQ_OK)
        return NULL;
    const char *sub[] = {"SUBSCRIBE", "+switch-master", "+promoted-slave"};
    emq_reply *r = NULL;
    if (emq_conn_command(w, 3, sub, NULL, &r, &ignored) != EMQ_OK ||
        emq_reply_kind(r) != EMQ_REPLY_ARRAY) {
        emq_conn_destroy(w);
        w = NULL;
    }
    emq_reply_free(r);
    return w;
}

/* Asks the Sentinel at for the primary of the master: 1 with its address
 * (through sentinel.address_map) in host/port, the Sentinels it knows
 * added to url and *watch set (watch_open; NULL when it could not be
 * set up), 0 when it does not know the master, -1 when it could not be
 * asked (why says why). The watch subscribes before the question, on the
 * same Sentinel: a switch that Sentinel makes after naming the primary is
 * announced to it, even one made while the primary is being connected. */
static int sentinel_ask(const emq__conn_options *opt, emq__url *url,
                        const struct emq__tls_opts *tls,
                        const emq__hostport *at, int64_t deadline, char *host,
                        size_t size, int *port, emq_conn_t **watch,
                        emq_error *why) {
    char addr[300];
    emq__conn_endpoint_name(at->host, at->port, addr, sizeof addr);
    *watch = NULL;
    emq_conn_t *s;
    if (sentinel_open(opt, url, tls, at, deadline, &s, why) != EMQ_OK)
        return -1;
    emq_conn_t *w = watch_open(opt, url, tls, at, deadline);
    const char *name = emq__sentinel_master_name(opt, url);
    const char *ask[] = {"SENTINEL", "get-master-addr-by-name", name};
    emq_reply *r = NULL;
    int found = -1;
    if (emq_conn_command(s, 3, ask, NULL, &r, why) == EMQ_OK) {
        found = emq__sentinel_master_addr(r, host, size, port);
        if (found == 1 && emq__sentinel_map(opt->sentinel_address_map, host,
                                            size, port, why) != EMQ_OK)
            found = -1;
        else if (found < 0) {
            char shown[120];
            emq__error_set(why, EMQ_EPROTO, 1,
                           "Sentinel %s answered get-master-addr-by-name "
                           "with %s",
                           addr, emq__reply_text(r, shown, sizeof shown));
        }
    }
    emq_reply_free(r);
    if (found == 1) { /* learn the other Sentinels (optional) */
        const char *peers[] = {"SENTINEL", "sentinels", name};
        emq_error ignored;
        if (emq_conn_command(s, 3, peers, NULL, &r, &ignored) == EMQ_OK)
            emq__sentinel_learn(url, r, opt->sentinel_address_map);
        emq_reply_free(r);
    }
    emq_conn_destroy(s);
    if (found == 1)
        *watch = w;
    else
        emq_conn_destroy(w);
    return found;
}

emq_status emq__sentinel_resolve(const emq__conn_options *opt, emq__url *url,
                                 const struct emq__tls_opts *tls,
                                 int64_t deadline, emq__sentinel_watch *watch,
                                 emq_error *err) {
    emq__url *u = url;
    const char *name = emq__sentinel_master_name(opt, url);
    if (name == NULL || name[0] == '\0')
        return emq__error_set(err, EMQ_EINVAL, 0,
                              "no master name for the Sentinels: give it "
                              "as the URL's #NAME or sentinel.master");
    char host[256];
    int port = 0;
    size_t answered = 0;
    emq_error last;
    emq__error_set(&last, EMQ_EIO, 1, "no Sentinel was asked");
    for (size_t i = 0; i < u->nsentinels; i++) {
        emq_conn_t *w;
        int found = sentinel_ask(opt, url, tls, &u->sentinels[i], deadline,
                                 host, sizeof host, &port, &w, &last);
        answered += found >= 0;
        if (found != 1)
            continue;
        emq__sentinel_to_front(u, i);
        emq__sentinel_watch_close(watch);
        watch->conn = w;
        char *copy = emq__strndup(host, strlen(host));
        if (copy == NULL)
            return emq__oom(err);
        emq__free(u->host);
        u->host = copy;
        u->port = port;
        return EMQ_OK;
    }
    if (answered > 0)
        return emq__error_set(err, EMQ_EINVAL, 0,
                              "no Sentinel knows master '%.100s' (%zu of %zu "
                              "asked answered; check the URL's #NAME or "
                              "sentinel.master)",
                              name, answered, u->nsentinels);
    return emq__error_set(err, EMQ_EIO, 1,
                          "no Sentinel reachable for master '%.100s' (%zu "
                          "tried): %s",
                          name, u->nsentinels, last.message);
}

void emq__sentinel_watch_close(emq__sentinel_watch *w) {
    emq_conn_destroy(w->conn);
    w->conn = NULL;
    w->switched = 0;
}

int emq__sentinel_watch_fd(const emq__sentinel_watch *w) {
    return w->conn != NULL && !w->switched ? emq_conn_fd(w->conn) : -1;
}

/* 1 when host:port, as a Sentinel announced it, is the primary url is on
 * (through sentinel.address_map). */
static int is_current(const emq__conn_options *opt, const emq__url *url,
                      char *host, size_t size, int port) {
    emq_error ignored;
    if (emq__sentinel_map(opt->sentinel_address_map, host, size, &port,
                          &ignored) != EMQ_OK)
        return 0;
    return url->host != NULL && port == url->port &&
           strcmp(host, url->host) == 0;
}

void emq__sentinel_watch_news(emq__sentinel_watch *w,
                              const emq__conn_options *opt,
                              const emq__url *url) {
    if (emq__conn_read_now(w->conn) != 0)
        w->switched = 1; /* ended: resolve again, a new watch with it */
    while (!w->switched) {
        emq_reply *r = NULL;
        emq_error e;
        emq_status st = emq__conn_take_read(w->conn, &r, &e);
        if (st == EMQ_EAGAIN)
            return;
        char host[256];
        int port = 0;
        int ours = st == EMQ_OK ? emq__sentinel_switch_of(
                                      r, emq__sentinel_master_name(opt, url),
                                      host, sizeof host, &port)
                                : -1;
        emq_reply_free(r);
        /* Unreadable, or ours to another primary (or to one it does not
         * say: resolve again to be sure). */
        if (ours < 0 ||
            (ours == 1 &&
             (port == 0 || !is_current(opt, url, host, sizeof host, port))))
            w->switched = 1;
    }
}

int emq__sentinel_watch_switched(emq__sentinel_watch *w,
                                 const emq__conn_options *opt,
                                 const emq__url *url) {
    int fd = w->conn != NULL ? emq_conn_fd(w->conn) : -1;
    if (fd < 0)
        return 0;
    struct pollfd p = {.fd = fd, .events = POLLIN};
    if (!w->switched && poll(&p, 1, 0) > 0)
        emq__sentinel_watch_news(w, opt, url);
    return w->switched;
}
