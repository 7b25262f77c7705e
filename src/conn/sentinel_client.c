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
#include <sys/epoll.h>
#include <unistd.h>

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
    o.library = NULL; /* a Sentinel runs no scripts */
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

/* A connection to the Sentinel at, subscribed to emq__sentinel_channels
 * (the confirmations of all but the first are read as news, and
 * dropped); NULL when it could not be set up (best effort: without it a
 * switch is still found through the old primary's replies or its end).
 * +promoted-slave comes from the failover's leader seconds before its
 * +switch-master, once the new primary takes writes (a requested
 * failover announces the switch only when the other replicas follow
 * it); the old primary takes writes until then, and from its replica's
 * promotion on they are lost: the leader's steps before it start a hold. */
static emq_conn_t *watch_open(const emq__conn_options *opt, const emq__url *url,
                              const struct emq__tls_opts *tls,
                              const emq__hostport *at, int64_t deadline) {
    emq_error ignored;
    emq_conn_t *w;
    if (sentinel_open(opt, url, tls, at, deadline, &w, &ignored) != EMQ_OK)
        return NULL;
    const char *sub[1 + EMQ_SENTINEL_CHANNELS] = {"SUBSCRIBE"};
    for (int i = 0; i < EMQ_SENTINEL_CHANNELS; i++)
        sub[1 + i] = emq__sentinel_channels[i];
    /* One confirmation per channel; the first says it took. A Sentinel
     * whose ACL grants only the switch's channels refuses them all
     * (NOPERM): then those two (no hold, the switch still heard). */
    emq_reply *r = NULL;
    emq_status st =
        emq_conn_command(w, 1 + EMQ_SENTINEL_CHANNELS, sub, NULL, &r, &ignored);
    if (st == EMQ_OK && emq_reply_kind(r) == EMQ_REPLY_ERROR) {
        emq_reply_free(r);
        r = NULL;
        st = emq_conn_command(w, 3, sub, NULL, &r, &ignored);
    }
    if (st != EMQ_OK || emq_reply_kind(r) != EMQ_REPLY_ARRAY) {
        emq_conn_destroy(w);
        w = NULL;
    }
    emq_reply_free(r);
    return w;
}

/* Asks the Sentinel at for the primary of the master: 1 with its address
 * (through sentinel.address_map) in host/port, the Sentinels it knows
 * added to learn (NULL: none) and *watch set (watch_open; NULL when it could
 * not be set up), 0 when it does not know the master, -1 when it could not be
 * asked (why says why). The watch subscribes before the question, on the
 * same Sentinel: a switch that Sentinel makes after naming the primary is
 * announced to it, even one made while the primary is being connected. */
static int sentinel_ask(const emq__conn_options *opt, const emq__url *url,
                        emq__url *learn, const struct emq__tls_opts *tls,
                        const emq__hostport *at, int64_t deadline, char *host,
                        size_t size, int *port, emq_conn_t **watch,
                        int64_t *failover_ms, emq_error *why) {
    char addr[300];
    *failover_ms = 0;
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
        else if (found == 1 &&
                 !emq__host_allowed(opt->sentinel_allowed_hosts, host)) {
            /* A Sentinel decides where the data password goes: only
             * where the allow-list says. */
            char named[300];
            emq__conn_endpoint_name(host, *port, named, sizeof named);
            emq__error_set(why, EMQ_EPROTO, 0,
                           "Sentinel %s named %s as the primary, which "
                           "sentinel.allowed_hosts does not allow; not "
                           "connected",
                           addr, named);
            found = -2;
        } else if (found < 0) {
            char shown[120];
            emq__error_set(why, EMQ_EPROTO, 1,
                           "Sentinel %s answered get-master-addr-by-name "
                           "with %s",
                           addr, emq__reply_text(r, shown, sizeof shown));
        }
    }
    emq_reply_free(r);
    emq_error ignored;
    if (found == 1) { /* the failover-timeout that bounds a hold */
        const char *master[] = {"SENTINEL", "master", name};
        if (emq_conn_command(s, 3, master, NULL, &r, &ignored) == EMQ_OK)
            *failover_ms = emq__sentinel_failover_timeout(r);
        emq_reply_free(r);
    }
    if (found == 1 && learn) { /* the other Sentinels (optional) */
        const char *peers[] = {"SENTINEL", "sentinels", name};
        if (emq_conn_command(s, 3, peers, NULL, &r, &ignored) == EMQ_OK)
            emq__sentinel_learn(learn, r, opt->sentinel_address_map,
                                opt->sentinel_allowed_hosts);
        emq_reply_free(r);
    }
    emq_conn_destroy(s);
    if (found == 1)
        *watch = w;
    else
        emq_conn_destroy(w);
    return found;
}

/* Counts host:port, named by the Sentinel at, in pick (a new primary
 * takes watch; a known one closes it). 0, or -1 when pick is full. */
static int vote(emq__sentinel_pick *pick, const char *host, int port,
                const emq__hostport *at, emq_conn_t *watch) {
    emq__sentinel_named *n = NULL;
    for (size_t k = 0; k < pick->n && n == NULL; k++)
        if (pick->named[k].port == port &&
            strcmp(pick->named[k].host, host) == 0)
            n = &pick->named[k];
    if (n == NULL) {
        if (pick->n == EMQ_SENTINELS_MAX) {
            emq_conn_destroy(watch);
            return -1;
        }
        n = &pick->named[pick->n++];
        memset(n, 0, sizeof *n);
        snprintf(n->host, sizeof n->host, "%s", host);
        n->port = port;
        n->watch = watch;
    } else {
        emq_conn_destroy(watch);
    }
    n->voters[n->votes++] = *at;
    return 0;
}

/* Orders pick's primaries by votes, most first; ties keep their order
 * (the first named first). */
static void rank(emq__sentinel_pick *pick) {
    for (size_t i = 1; i < pick->n; i++)
        for (size_t k = i;
             k > 0 && pick->named[k].votes > pick->named[k - 1].votes; k--) {
            emq__sentinel_named t = pick->named[k];
            pick->named[k] = pick->named[k - 1];
            pick->named[k - 1] = t;
        }
}

emq_status emq__sentinel_resolve(const emq__conn_options *opt, emq__url *url,
                                 const struct emq__tls_opts *tls,
                                 int64_t deadline, emq__sentinel_pick *pick,
                                 emq_error *err) {
    emq__url *u = url;
    pick->n = pick->asked = pick->answered = 0;
    pick->failover_ms = 0;
    const char *name = emq__sentinel_master_name(opt, url);
    if (name == NULL || name[0] == '\0')
        return emq__error_set(err, EMQ_EINVAL, 0,
                              "no master name for the Sentinels: give it "
                              "as the URL's #NAME or sentinel.master");
    size_t reached = 0, refused = 0;
    emq_error last, refusal;
    emq__error_set(&last, EMQ_EIO, 1, "no Sentinel was asked");
    /* The Sentinels as listed now: the first that answers moves to the
     * front and those it knows are added behind, so walk a copy. */
    emq__hostport order[EMQ_SENTINELS_MAX];
    size_t norder = 0;
    for (size_t i = 0; i < u->nsentinels; i++)
        order[norder++] = u->sentinels[i];
    for (size_t i = 0; i < norder; i++) {
        /* Two that agree are enough (one when only one is known); when
         * they disagree, every one is asked. */
        size_t want = u->nsentinels >= 2 ? 2 : 1;
        if (pick->answered >= want && pick->n == 1)
            break;
        char host[256];
        int port = 0;
        emq_conn_t *w;
        int64_t failover_ms;
        int found = sentinel_ask(opt, url, url, tls, &order[i], deadline, host,
                                 sizeof host, &port, &w, &failover_ms, &last);
        if (failover_ms > pick->failover_ms)
            pick->failover_ms = failover_ms;
        pick->asked++;
        reached += found >= 0;
        if (found == -2 && refused++ == 0)
            refusal = last;
        if (found != 1)
            continue;
        if (pick->answered++ == 0) {
            for (size_t k = 0; k < u->nsentinels; k++)
                if (u->sentinels[k].host == order[i].host &&
                    u->sentinels[k].port == order[i].port) {
                    emq__sentinel_to_front(u, k);
                    break;
                }
            /* Those it taught u are asked too when answers differ. */
            for (size_t k = 0; k < u->nsentinels; k++) {
                int listed = 0;
                for (size_t j = 0; j < norder && !listed; j++)
                    listed = order[j].host == u->sentinels[k].host;
                if (!listed && norder < EMQ_SENTINELS_MAX)
                    order[norder++] = u->sentinels[k];
            }
        }
        vote(pick, host, port, &order[i], w);
    }
    if (pick->n > 0) {
        rank(pick);
        return EMQ_OK;
    }
    if (refused > 0) {
        *err = refusal;
        return refusal.code;
    }
    if (reached > 0)
        return emq__error_set(err, EMQ_EINVAL, 0,
                              "no Sentinel knows master '%.100s' (%zu of %zu "
                              "asked answered; check the URL's #NAME or "
                              "sentinel.master)",
                              name, reached, pick->asked);
    return emq__error_set(err, EMQ_EIO, 1,
                          "no Sentinel reachable for master '%.100s' (%zu "
                          "tried): %s",
                          name, pick->asked, last.message);
}

void emq__sentinel_pick_drop(emq__sentinel_pick *pick) {
    for (size_t k = 0; k < pick->n; k++) {
        emq_conn_destroy(pick->named[k].watch);
        pick->named[k].watch = NULL;
    }
}

void emq__sentinel_pick_text(const emq__sentinel_pick *pick, char *out,
                             size_t size) {
    size_t len = 0;
    out[0] = '\0';
    for (size_t k = 0; k < pick->n && len + 1 < size; k++) {
        const emq__sentinel_named *n = &pick->named[k];
        char addr[300];
        emq__conn_endpoint_name(n->host, n->port, addr, sizeof addr);
        len += (size_t)snprintf(out + len, size - len, "%s%s by", k ? "; " : "",
                                addr);
        for (size_t v = 0; v < n->votes && len + 1 < size; v++) {
            emq__conn_endpoint_name(n->voters[v].host, n->voters[v].port, addr,
                                    sizeof addr);
            len += (size_t)snprintf(out + len, size - len, "%s %s",
                                    v ? "," : "", addr);
        }
    }
}

/* The first reopen of a lost watch comes at once; then after these
 * (equal jitter). Missing ears are opened again after the longest. */
#define WATCH_REOPEN_MIN_MS 200
#define WATCH_REOPEN_MAX_MS 10000
/* How long a reopen waits for its Sentinel: it runs on the data path (a
 * command waits for it), so shorter than a resolution's question. */
#define SENTINEL_REOPEN_MS 250
/* A hold's bound when the Sentinels did not give their failover-timeout
 * (Sentinel's default). */
#define FAILOVER_TIMEOUT_DEFAULT_MS 180000

void emq__sentinel_watch_init(emq__sentinel_watch *w) {
    memset(w, 0, sizeof *w);
    w->epfd = -1;
}

/* Adds c to w's epoll set (made on first use; without one, news is read
 * only when asked for). */
static void watch_add(emq__sentinel_watch *w, emq_conn_t *c) {
    if (c == NULL)
        return;
    if (w->epfd < 0)
        w->epfd = epoll_create1(EPOLL_CLOEXEC);
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = c};
    if (w->epfd >= 0)
        (void)epoll_ctl(w->epfd, EPOLL_CTL_ADD, emq_conn_fd(c), &ev);
}

/* Takes c out of w's epoll set and closes it. */
static void watch_drop(emq__sentinel_watch *w, emq_conn_t *c) {
    if (c != NULL && w->epfd >= 0)
        (void)epoll_ctl(w->epfd, EPOLL_CTL_DEL, emq_conn_fd(c), NULL);
    emq_conn_destroy(c);
}

void emq__sentinel_watch_close(emq__sentinel_watch *w) {
    watch_drop(w, w->conn);
    w->conn = NULL;
    for (size_t i = 0; i < w->nears; i++)
        watch_drop(w, w->ears[i]);
    w->nears = 0;
    if (w->epfd >= 0)
        close(w->epfd);
    w->epfd = -1;
    w->switched = 0;
    w->failover_at = 0;
    w->listen_at = 0;
    w->lost_at = 0;
    w->reopens = 0;
}

void emq__sentinel_watch_set(emq__sentinel_watch *w, emq_conn_t *conn,
                             const emq__hostport *at, int64_t failover_ms) {
    watch_drop(w, w->conn);
    w->conn = conn;
    w->at = *at;
    w->failover_ms = failover_ms;
    w->lost_at = 0;
    w->reopens = 0;
    emq__conn_endpoint_name(at->host, at->port, w->by, sizeof w->by);
    watch_add(w, conn);
}

/* 1 when w hears the Sentinel at already (named or an ear). */
static int hears(const emq__sentinel_watch *w, const emq__hostport *at) {
    if (w->at.host == at->host && w->at.port == at->port)
        return 1;
    for (size_t i = 0; i < w->nears; i++)
        if (w->ears_at[i].host == at->host && w->ears_at[i].port == at->port)
            return 1;
    return 0;
}

void emq__sentinel_watch_listen(emq__sentinel_watch *w,
                                const emq__conn_options *opt,
                                const emq__url *url,
                                const struct emq__tls_opts *tls, size_t most) {
    int missing = 0, deferred = 0;
    size_t tried = 0;
    for (size_t k = 0; k < url->nsentinels; k++) {
        const emq__hostport *at = &url->sentinels[k];
        if (hears(w, at) || w->nears == EMQ_SENTINELS_MAX)
            continue;
        if (tried++ == most) { /* the rest on a later look */
            deferred = 1;
            break;
        }
        emq_conn_t *c =
            watch_open(opt, url, tls, at, emq__now_ms() + SENTINEL_REOPEN_MS);
        if (c == NULL) {
            missing++;
            continue;
        }
        w->ears[w->nears] = c;
        w->ears_at[w->nears++] = *at;
        watch_add(w, c);
    }
    w->listen_at = missing    ? emq__now_ms() + WATCH_REOPEN_MAX_MS
                   : deferred ? emq__now_ms() + WATCH_REOPEN_MIN_MS
                              : 0;
}

void emq__sentinel_watch_lose(emq__sentinel_watch *w) {
    watch_drop(w, w->conn);
    w->conn = NULL;
    w->switched = 0;
    w->lost_at = emq__now_ms();
    w->reopen_at = w->lost_at;
    w->reopens = 0;
    w->next++; /* not the one that ended: the next */
    if (w->rng == 0)
        w->rng = (uint64_t)w->lost_at ^ (uint64_t)(uintptr_t)w;
}

int emq__sentinel_watch_fd(const emq__sentinel_watch *w) {
    return (w->conn != NULL || w->nears > 0) && !w->switched ? w->epfd : -1;
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

/* What a Sentinel's connection did in one look at it. */
enum { HEARD, ENDED, MISBEHAVED };
/* The most bytes one look reads of a Sentinel's connection. */
#define WATCH_READ_MAX ((size_t)64 * 1024)

/* Reads what the Sentinel by sent on c (at most WATCH_READ_MAX now,
 * without waiting) into w's state: HEARD, ENDED (it closed), or
 * MISBEHAVED (it sent what is not a message of the channels, or one
 * that does not fit resp.max_reply_bytes). */
static int news_of_one(emq__sentinel_watch *w, emq_conn_t *c, const char *by,
                       const emq__conn_options *opt, const emq__url *url) {
    int ended = emq__conn_read_now(c, WATCH_READ_MAX) != 0;
    const char *name = emq__sentinel_master_name(opt, url);
    char primary[300];
    emq__conn_endpoint_name(url->host ? url->host : "", url->port, primary,
                            sizeof primary);
    while (!w->switched) {
        emq_reply *r = NULL;
        emq_error e;
        emq_status st = emq__conn_take_read(c, &r, &e);
        if (st == EMQ_EAGAIN)
            break;
        char host[256];
        int port = 0;
        emq__sentinel_news news =
            st == EMQ_OK
                ? emq__sentinel_news_of(r, name, host, sizeof host, &port)
                : EMQ_SENTINEL_UNREADABLE;
        emq_reply_free(r);
        if (news == EMQ_SENTINEL_UNREADABLE)
            return MISBEHAVED;
        if (news == EMQ_SENTINEL_SWITCH && port != 0 &&
            is_current(opt, url, host, sizeof host, port)) {
            w->failover_at = 0; /* done: the primary in use is the new one */
        } else if (news == EMQ_SENTINEL_SWITCH) {
            /* Ours to another primary (or to one it does not say:
             * resolve again to be sure). */
            w->switched = 1;
            w->announced[0] = '\0';
            if (port != 0)
                emq__conn_endpoint_name(host, port, w->announced,
                                        sizeof w->announced);
        } else if (news == EMQ_SENTINEL_BEGUN && w->failover_at == 0) {
            w->failover_at = emq__now_ms();
            snprintf(w->failover_by, sizeof w->failover_by, "%s", by);
            emq__log_to(&opt->log, EMQ_LOG_INFO,
                        "Sentinel %s began a failover of '%.100s': commands "
                        "to %s wait for its switch (at most %lld ms)",
                        by, name, primary,
                        (long long)(w->failover_ms > 0
                                        ? w->failover_ms
                                        : FAILOVER_TIMEOUT_DEFAULT_MS));
        } else if (news == EMQ_SENTINEL_ENDED && w->failover_at != 0) {
            emq__log_to(&opt->log, EMQ_LOG_INFO,
                        "Sentinel %s ended the failover of '%.100s' after "
                        "%lld ms; commands go on to %s",
                        by, name, (long long)(emq__now_ms() - w->failover_at),
                        primary);
            w->failover_at = 0;
        }
    }
    return ended ? ENDED : HEARD;
}

void emq__sentinel_watch_news(emq__sentinel_watch *w,
                              const emq__conn_options *opt,
                              const emq__url *url) {
    for (size_t i = 0; i < w->nears && !w->switched;) {
        char by[300];
        emq__conn_endpoint_name(w->ears_at[i].host, w->ears_at[i].port, by,
                                sizeof by);
        int heard = news_of_one(w, w->ears[i], by, opt, url);
        if (heard == HEARD || w->switched) {
            i++;
            continue;
        }
        /* An ear that ended or misbehaved: heard again once it answers. */
        watch_drop(w, w->ears[i]);
        w->ears[i] = w->ears[w->nears - 1];
        w->ears_at[i] = w->ears_at[--w->nears];
        w->listen_at = emq__now_ms() + WATCH_REOPEN_MIN_MS;
    }
    if (w->conn == NULL || w->switched)
        return;
    int heard = news_of_one(w, w->conn, w->by, opt, url);
    if (heard == HEARD || w->switched)
        return;
    /* The Sentinel went away, or sent what cannot be news, not the
     * primary: keep the connection. */
    char primary[300];
    emq__conn_endpoint_name(url->host, url->port, primary, sizeof primary);
    emq__log_to(&opt->log, EMQ_LOG_WARNING,
                "Sentinel %s, watched for master '%.100s', %s; %s stays in "
                "use while another Sentinel is asked",
                w->by, emq__sentinel_master_name(opt, url),
                heard == ENDED ? "closed the connection"
                               : "sent what is not news of its channels",
                primary);
    emq__sentinel_watch_lose(w);
}

/* The named Sentinel lost: asks the next one in turn for the primary. */
static void reopen(emq__sentinel_watch *w, const emq__conn_options *opt,
                   const emq__url *url, const struct emq__tls_opts *tls,
                   int64_t now) {
    const emq__hostport *at = &url->sentinels[w->next % url->nsentinels];
    char host[256], by[300], primary[300];
    int port = 0;
    emq_conn_t *watch = NULL;
    int64_t failover_ms = 0;
    emq_error why;
    int found = sentinel_ask(opt, url, NULL, tls, at, now + SENTINEL_REOPEN_MS,
                             host, sizeof host, &port, &watch, &failover_ms,
                             &why);
    emq__conn_endpoint_name(at->host, at->port, by, sizeof by);
    emq__conn_endpoint_name(url->host, url->port, primary, sizeof primary);
    const char *name = emq__sentinel_master_name(opt, url);
    if (found == 1 && port == url->port && strcmp(host, url->host) == 0) {
        emq__log_to(&opt->log, EMQ_LOG_INFO,
                    "Sentinel %s names %s, the primary in use, for master "
                    "'%.100s': watching it again after %lld ms",
                    by, primary, name, (long long)(now - w->lost_at));
        /* An ear on the same Sentinel is not needed twice. */
        for (size_t i = 0; i < w->nears; i++)
            if (w->ears_at[i].host == at->host &&
                w->ears_at[i].port == at->port) {
                watch_drop(w, w->ears[i]);
                w->ears[i] = w->ears[w->nears - 1];
                w->ears_at[i] = w->ears_at[--w->nears];
                break;
            }
        emq__sentinel_watch_set(w, watch, at,
                                failover_ms ? failover_ms : w->failover_ms);
        w->listen_at = now; /* and the others, once they answer */
        return;
    }
    emq_conn_destroy(watch);
    if (found == 1) {
        char named[300];
        emq__conn_endpoint_name(host, port, named, sizeof named);
        emq__log_to(&opt->log, EMQ_LOG_WARNING,
                    "Sentinel %s names %s as the primary of '%.100s', not "
                    "%s in use: resolving again",
                    by, named, name, primary);
        w->switched = 1;
        snprintf(w->announced, sizeof w->announced, "%s", named);
        return;
    }
    w->next++;
    w->reopen_at = now + emq__backoff_delay(WATCH_REOPEN_MIN_MS,
                                            WATCH_REOPEN_MAX_MS, w->reopens,
                                            &w->rng);
    w->reopens++;
}

void emq__sentinel_watch_mend(emq__sentinel_watch *w,
                              const emq__conn_options *opt, const emq__url *url,
                              const struct emq__tls_opts *tls) {
    int64_t now = emq__now_ms();
    if (w->switched || url->nsentinels == 0 || url->host == NULL)
        return;
    if (w->conn == NULL && w->lost_at != 0 && now >= w->reopen_at)
        reopen(w, opt, url, tls, now);
    if (!w->switched && w->listen_at != 0 && now >= w->listen_at)
        emq__sentinel_watch_listen(w, opt, url, tls, 1); /* one a look */
}

int emq__sentinel_watch_switched(emq__sentinel_watch *w,
                                 const emq__conn_options *opt,
                                 const emq__url *url,
                                 const struct emq__tls_opts *tls) {
    emq__sentinel_watch_mend(w, opt, url, tls);
    int fd = emq__sentinel_watch_fd(w);
    if (fd >= 0) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, 0) > 0)
            emq__sentinel_watch_news(w, opt, url);
    }
    return w->switched;
}

int64_t emq__sentinel_watch_hold_until(const emq__sentinel_watch *w) {
    if (w->failover_at == 0 || w->switched)
        return 0;
    return w->failover_at +
           (w->failover_ms > 0 ? w->failover_ms : FAILOVER_TIMEOUT_DEFAULT_MS);
}

void emq__sentinel_watch_hold_over(emq__sentinel_watch *w,
                                   const emq__conn_options *opt,
                                   const emq__url *url) {
    char primary[300];
    emq__conn_endpoint_name(url->host ? url->host : "", url->port, primary,
                            sizeof primary);
    emq__log_to(&opt->log, EMQ_LOG_WARNING,
                "the failover of '%.100s' that Sentinel %s began %lld ms ago "
                "has not switched or ended: commands go to %s again",
                emq__sentinel_master_name(opt, url), w->failover_by,
                (long long)(emq__now_ms() - w->failover_at), primary);
    w->failover_at = 0;
}
