/* SPDX-License-Identifier: BSD-3-Clause */
/* route.c: the slot-bound connection, emq__route.
 *
 * A route serves one key's slot. emq__route_new asks a seed for the slot
 * map (CLUSTER SHARDS, else CLUSTER SLOTS) and connects to the slot's
 * master; against a standalone server ("cluster support disabled") it is
 * a thin wrapper over one emq_conn and adds nothing.
 *
 * In a cluster every appended command is copied (argv and bytes) and sent
 * at once to the node the route believes owns the slot; the copy is kept
 * until its reply has been read, because a redirection means the command
 * was not executed and must be sent again elsewhere:
 *   - MOVED: the slot has a new master. The route records it (for its own
 *     slot this changes where later commands go), connects to it and sends
 *     the command there.
 *   - ASK: the slot is migrating and this key is already on the target.
 *     The command goes there once, preceded by ASKING; the map is kept.
 *   - TRYAGAIN (multi-key command mid-migration) and CLUSTERDOWN: the same
 *     node is asked again after a capped, jittered pause, for at most
 *     cluster.retry_ms per command.
 * A command is redirected at most cluster.max_redirects times; past a
 * bound the command fails alone with EMQ_ELIMIT naming the property (its
 * last reply quoted), never looped on and never dressed up as a reply of
 * the server.
 *
 * Ordering: each node connection keeps a FIFO of the commands sent on it
 * whose replies are unread, so replies are matched by per-connection send
 * order while the caller reads them in append order. A command re-sent to
 * a node behind later commands already waiting there simply has their
 * replies read ahead and parked on those commands. When a slot moves under
 * a pipeline, every later command of it went to the old node too and gets
 * its own MOVED: each is handled in append order when its turn comes.
 *
 * A transport failure on any node connection breaks the route (sticky,
 * like emq_conn); emq__route_reconnect rediscovers the master from the
 * seeds and every node seen so far, since after a failover the old master
 * may be gone. Never: interpret a reply beyond the four redirection words,
 * or re-send a command whose reply was anything else.
 */
#include "cluster.h"

#include <stdio.h>
#include <string.h>

/* Pause bounds while TRYAGAIN or CLUSTERDOWN persist, in ms. */
#define RETRY_MIN_MS 10
#define RETRY_MAX_MS 500

/* One appended command whose reply has not been returned yet. One
 * allocation: the struct, then argv, argvlen and the argument bytes. */
typedef struct cmd {
    struct cmd *next;    /* next command awaiting a reply on the same
                            node connection (send order) */
    int node;            /* node it was last sent to (map index) */
    int asking;          /* sent after ASKING: that +OK comes first */
    int via_ask;         /* last sent after ASKING (a retry repeats it) */
    unsigned redirects;  /* MOVED/ASK followed */
    emq__retry retry;    /* TRYAGAIN/CLUSTERDOWN: the pauses, up to
                           cluster.retry_ms from the first */
    int64_t retry_start; /* when the first pause began; 0: none */
    emq_reply *reply;    /* read ahead, not yet returned */
    int64_t began_ms;    /* when reply began to arrive */
    emq_error bound;     /* EMQ_OK, or the route's own limit that ended
                            following this command (reply then NULL) */
    int argc;
    const char **argv; /* into this allocation */
    size_t *argvlen;
} cmd;

/* The connection to one node of the map (same index as map.nodes). */
typedef struct node_link {
    emq_conn_t *conn; /* NULL until needed */
    cmd *head, *tail; /* commands sent on conn with unread replies */
} node_link;

struct emq__route {
    emq__route_options opt; /* what it was told (kept; opt.conn: the
                              seed url's connection) */
    emq__conn_options node; /* for node connections: the url's user,
                              password, db and TLS settings folded in
                              (kept); url replaced per node */
    emq__url seed;          /* opt.conn.url, parsed */
    int tls;                /* rediss:// */
    unsigned slot;          /* the slot the route is bound to */
    emq_conn_t *single;     /* standalone: the one connection, else NULL */
    int mapped;             /* 1: map from CLUSTER SHARDS/SLOTS; 0: only
                               what MOVED replies taught (ACL without
                               CLUSTER) */
    emq__slot_map map;      /* slot -> master */
    node_link *links;       /* links_cap entries, parallel to map.nodes */
    size_t links_cap;
    int owner; /* map index serving slot */
    cmd **q;   /* ring of unread commands, append order */
    size_t qcap, qhead, qlen;
    emq_error broken; /* code != EMQ_OK once broken (sticky) */
    int too_large;    /* broken by a reply over resp.max_reply_bytes
                         (emq__route_reply_too_large) */
    emq__route_stats stats;
    uint64_t rng;                         /* jitter state */
    char name[EMQ_CLUSTER_HOST_MAX + 16]; /* current node, for messages */
    emq__conn_cancel cancel; /* emq__route_set_cancel, for every read */
    int64_t reply_began_ms;  /* of the last reply returned */
};

/* Every connection the route reads from honours its cancel flag. */
static emq_conn_t *armed(emq__route *r, emq_conn_t *conn) {
    emq__conn_set_cancel(conn, &r->cancel);
    return conn;
}

/* ---- small helpers ---------------------------------------------------- */

static emq_status sticky(const emq__route *r, emq_error *err) {
    if (err)
        *err = r->broken;
    return r->broken.code;
}

/* Marks the route broken with e (its code, default EMQ_EIO); returns it. */
static emq_status break_route(emq__route *r, const emq_error *e,
                              emq_error *err) {
    r->broken = *e;
    if (r->broken.code == EMQ_OK)
        r->broken.code = EMQ_EIO;
    r->too_large = 0;
    return sticky(r, err);
}

/* Writes "host:port" (brackets for IPv6) into out. */
static void node_name(const emq__cluster_node *n, char *out, size_t size) {
    if (strchr(n->host, ':'))
        snprintf(out, size, "[%s]:%d", n->host, n->port);
    else
        snprintf(out, size, "%s:%d", n->host, n->port);
}

/* Makes r->node from r->opt.conn and the parsed seed URL: settings given
 * in the URL only are copied into fields, so they survive replacing the
 * URL with a node's address. */
static emq_status make_node_options(emq__route *r, emq_error *err) {
    emq__conn_options o = r->opt.conn;
    const emq__url *u = &r->seed;
    o.user = o.user ? o.user : u->user;
    o.password = o.password ? o.password : u->password;
    o.tls_ca_file = o.tls_ca_file ? o.tls_ca_file : u->tls_ca_file;
    o.tls_cert_file = o.tls_cert_file ? o.tls_cert_file : u->tls_cert_file;
    o.tls_key_file = o.tls_key_file ? o.tls_key_file : u->tls_key_file;
    o.tls_sni = o.tls_sni ? o.tls_sni : u->tls_sni;
    if (o.db < 0 && u->db >= 0)
        o.db = u->db;
    if (o.tls_verify == EMQ_TLS_VERIFY_DEFAULT && u->tls_verify >= 0)
        o.tls_verify = u->tls_verify;
    /* An ASKING may precede each command on a node connection. */
    o.pipeline_max = o.pipeline_max * 2 + 2;
    /* No stop ends a read on a cluster by its id (emq__route_client_id
     * is for a single server's connection). */
    o.learn_client_id = 0;
    return emq__conn_options_keep(&r->node, &o, err);
}

/* Opens a connection to host:port with the node options: the address
 * is data, never URL text, so nothing a node names changes TLS,
 * credentials or files. */
static emq_status connect_addr(emq__route *r, const emq__cluster_node *n,
                               emq_conn_t **out, emq_error *err) {
    *out = NULL;
    if (!emq__host_allowed(r->opt.allowed_hosts, n->host)) {
        char name[EMQ_CLUSTER_HOST_MAX + 16];
        node_name(n, name, sizeof name);
        return emq__error_set(err, EMQ_EPROTO, 0,
                              "the cluster named node %.200s, which "
                              "cluster.allowed_hosts does not allow; not "
                              "connected",
                              name);
    }
    emq__conn_options o = r->node;
    o.url = NULL;
    o.host = n->host;
    o.port = n->port;
    o.tls = r->tls;
    return emq__conn_open(&o, out, err);
}

/* Makes links cover every node of the map. */
static emq_status grow_links(emq__route *r, emq_error *err) {
    if (r->links_cap >= r->map.nnodes)
        return EMQ_OK;
    size_t cap = r->map.nnodes + 4;
    node_link *l = emq__realloc(r->links, cap * sizeof *l);
    if (l == NULL)
        return emq__oom(err);
    memset(l + r->links_cap, 0, (cap - r->links_cap) * sizeof *l);
    r->links = l;
    r->links_cap = cap;
    return EMQ_OK;
}

/* Returns the map index of target (added when new), or -1 with err. */
static int learn_node(emq__route *r, const emq__cluster_node *target,
                      emq_error *err) {
    int idx;
    if (emq__slot_map_node(&r->map, target->host, strlen(target->host),
                           target->port, &idx, err) != EMQ_OK)
        return -1;
    if (grow_links(r, err) != EMQ_OK)
        return -1;
    return idx;
}

static void set_owner(emq__route *r, int idx) {
    r->owner = idx;
    node_name(&r->map.nodes[idx], r->name, sizeof r->name);
}

/* Ensures a live connection to node idx. A transport failure here is
 * returned for the caller to break the route with. */
static emq_status link_connect(emq__route *r, int idx, emq_error *err) {
    node_link *l = &r->links[idx];
    if (l->conn && !emq_conn_is_broken(l->conn))
        return EMQ_OK;
    emq_conn_destroy(l->conn);
    l->conn = NULL;
    l->head = l->tail = NULL;
    return connect_addr(r, &r->map.nodes[idx], &l->conn, err);
}

/* Drops every node connection and every unread command. */
static void drop_all(emq__route *r) {
    for (size_t i = 0; i < r->qlen; i++) {
        cmd *c = r->q[(r->qhead + i) % r->qcap];
        emq_reply_free(c->reply);
        emq__free(c);
    }
    r->qhead = r->qlen = 0;
    for (size_t i = 0; i < r->links_cap; i++) {
        emq_conn_destroy(r->links[i].conn);
        r->links[i].conn = NULL;
        r->links[i].head = r->links[i].tail = NULL;
    }
}

/* ---- commands --------------------------------------------------------- */

/* Copies a command into one allocation. EMQ_EINVAL for argc < 1 or a NULL
 * argument, EMQ_ENOMEM. */
static emq_status cmd_new(int argc, const char *const *argv,
                          const size_t *argvlen, cmd **out, emq_error *err) {
    *out = NULL;
    if (argc < 1 || argv == NULL)
        return emq__error_set(err, EMQ_EINVAL, 0,
                              "a command needs at least one argument");
    size_t bytes = 0;
    for (int i = 0; i < argc; i++) {
        if (argv[i] == NULL)
            return emq__error_set(err, EMQ_EINVAL, 0,
                                  "argument %d of the command is NULL", i);
        size_t n = argvlen ? argvlen[i] : strlen(argv[i]);
        if (n > SIZE_MAX / 2 - bytes)
            return emq__error_set(err, EMQ_ELIMIT, 0, "command too large");
        bytes += n;
    }
    size_t head = sizeof(cmd) +
                  (size_t)argc * (sizeof(char *) + sizeof(size_t));
    cmd *c = emq__alloc(head + bytes);
    if (c == NULL)
        return emq__error_set(err, EMQ_ENOMEM, 0,
                              "out of memory keeping a copy of a command");
    memset(c, 0, sizeof *c);
    c->argc = argc;
    c->argv = (const char **)(void *)(c + 1);
    c->argvlen = (size_t *)(void *)(c->argv + argc);
    char *p = (char *)(c->argvlen + argc);
    for (int i = 0; i < argc; i++) {
        size_t n = argvlen ? argvlen[i] : strlen(argv[i]);
        memcpy(p, argv[i], n);
        c->argv[i] = p;
        c->argvlen[i] = n;
        p += n;
    }
    *out = c;
    return EMQ_OK;
}

/* Appends c (after ASKING when asking) on node idx's connection and queues
 * it on that node's FIFO. Returns EMQ_OK; a local refusal (EMQ_ELIMIT,
 * EMQ_ENOMEM) with nothing queued; or a transport failure. */
static emq_status send_cmd(emq__route *r, cmd *c, int idx, int asking,
                           emq_error *err) {
    emq_status st = link_connect(r, idx, err);
    if (st != EMQ_OK)
        return st;
    node_link *l = &r->links[idx];
    size_t before = emq_conn_pending(l->conn);
    if (asking) {
        static const char *const ask[] = {"ASKING"};
        st = emq_conn_append(l->conn, 1, ask, NULL, err);
        if (st != EMQ_OK)
            return st;
    }
    st = emq_conn_append(l->conn, c->argc, c->argv, c->argvlen, err);
    if (st != EMQ_OK) {
        /* An appended ASKING alone would shift every later reply: the
         * connection cannot be trusted any more. */
        if (emq_conn_pending(l->conn) != before) {
            emq_conn_destroy(l->conn);
            l->conn = NULL;
            return emq__error_set(err, EMQ_EIO, 1,
                                  "could not append a redirected command "
                                  "after ASKING; connection dropped");
        }
        return st;
    }
    c->node = idx;
    c->asking = asking;
    c->via_ask = asking;
    c->next = NULL;
    if (l->tail)
        l->tail->next = c;
    else
        l->head = c;
    l->tail = c;
    return EMQ_OK;
}

/* Reads the next reply of node idx and parks it on the first command of
 * its FIFO. A failure is a transport failure of that node. */
static emq_status read_one(emq__route *r, int idx, emq_error *err) {
    node_link *l = &r->links[idx];
    cmd *c = l->head;
    if (c == NULL || l->conn == NULL)
        return emq__error_set(err, EMQ_EPROTO, 0,
                              "internal: no command awaits a reply from %s",
                              r->map.nodes[idx].host);
    emq_status st;
    if (c->asking) {
        emq_reply *ok = NULL;
        st = emq_conn_get_reply(armed(r, l->conn), &ok, err);
        if (st != EMQ_OK)
            return st;
        emq_reply_free(ok); /* +OK; an error would show in the reply too */
        c->asking = 0;
    }
    st = emq_conn_get_reply(armed(r, l->conn), &c->reply, err);
    if (st != EMQ_OK)
        return st;
    c->began_ms = emq__conn_reply_began_ms(l->conn);
    l->head = c->next;
    if (l->head == NULL)
        l->tail = NULL;
    c->next = NULL;
    return EMQ_OK;
}

/* Ends following c at one of the route's own bounds: c's reply is
 * replaced by an EMQ_ELIMIT failure that names the property and quotes the
 * last reply (reply_code its code), never by a made-up server reply. The
 * command was not run (a redirection or a "not now" reply means so), and
 * the pipeline stays in step. retriable: the same command may go through
 * later (a TRYAGAIN or CLUSTERDOWN that outlasted cluster.retry_ms). */
static void give_up(emq__route *r, cmd *c, int retriable, const char *why) {
    emq__reply_error_as(&c->bound, EMQ_ELIMIT, retriable, c->reply,
                        "%s; the last reply", why);
    emq__log_to(&r->opt.log, EMQ_LOG_WARNING, "slot %u: %s", r->slot,
                c->bound.message);
    emq_reply_free(c->reply);
    c->reply = NULL;
    r->stats.gave_up++;
}

/* Decides what to do with the reply parked on c, the oldest unread
 * command. Returns 1 when c's outcome is final (c->reply, or c->bound
 * when a bound was reached), 0 when c was sent again, or a status (a
 * failure to reach a node: the route breaks). */
static int follow(emq__route *r, cmd *c, emq_error *err) {
    emq__redirect rd;
    emq__redirect_kind kind = emq__redirect_parse(c->reply, &rd);
    if (kind == EMQ_REDIRECT_NONE)
        return 1;
    char why[400];
    if (kind == EMQ_REDIRECT_MOVED || kind == EMQ_REDIRECT_ASK) {
        if (c->redirects >= (unsigned)r->opt.max_redirects) {
            snprintf(why, sizeof why,
                     "echomq followed %u redirections for this command "
                     "and gave up: cluster.max_redirects",
                     c->redirects);
            give_up(r, c, 0, why);
            return 1;
        }
        if (rd.target.host[0] == '\0') /* endpoint unknown: same host */
            memcpy(rd.target.host, r->map.nodes[c->node].host,
                   sizeof rd.target.host);
        int idx = learn_node(r, &rd.target, err);
        if (idx < 0)
            return (int)err->code;
        c->redirects++;
        if (kind == EMQ_REDIRECT_MOVED) {
            r->stats.redirects_moved++;
            r->map.owner[rd.slot] = (uint16_t)idx;
            if (rd.slot == r->slot && idx != r->owner) {
                set_owner(r, idx);
                emq__log_to(&r->opt.log, EMQ_LOG_INFO, "slot %u moved to %s",
                            r->slot, r->name);
            }
        } else {
            r->stats.redirects_ask++;
        }
        emq_reply_free(c->reply);
        c->reply = NULL;
        emq_status st = send_cmd(r, c, idx, kind == EMQ_REDIRECT_ASK, err);
        return st == EMQ_OK ? 0 : (int)st;
    }
    /* TRYAGAIN or CLUSTERDOWN: pause, then ask the same node again, the
     * same way (after ASKING when the command came there by ASK). */
    int64_t now = emq__now_ms();
    if (c->retry_start == 0) { /* the first: the send so far counts */
        c->retry_start = now;
        emq__retry_begin(&c->retry, RETRY_MIN_MS, RETRY_MAX_MS, 0,
                         now + r->opt.retry_ms, &r->rng);
        (void)emq__retry_next(&c->retry);
    }
    if (!emq__retry_next(&c->retry)) { /* sleeps the pause, or gives up */
        snprintf(why, sizeof why,
                 "still so after %lld retries over %lld ms on %.255s:%d; "
                 "echomq gave up: cluster.retry_ms",
                 (long long)(c->retry.attempt - 1),
                 (long long)(emq__now_ms() - c->retry_start),
                 r->map.nodes[c->node].host, r->map.nodes[c->node].port);
        give_up(r, c, 1, why);
        return 1;
    }
    if (kind == EMQ_REDIRECT_TRYAGAIN)
        r->stats.tryagain++;
    else
        r->stats.clusterdown++;
    emq_reply_free(c->reply);
    c->reply = NULL;
    emq_status st = send_cmd(r, c, c->node, c->via_ask, err);
    return st == EMQ_OK ? 0 : (int)st;
}

/* ---- discovery -------------------------------------------------------- */

typedef enum found {
    FOUND_MAP,        /* r->map filled from the cluster */
    FOUND_STANDALONE, /* "cluster support disabled" */
    FOUND_NOPERM      /* the ACL forbids CLUSTER: learn from MOVED */
} found;

/* 1 when an error reply says the server is not in cluster mode. */
static int says_standalone(const emq_reply *rep) {
    size_t n;
    const char *s = emq_reply_str(rep, &n);
    static const char text[] = "cluster support disabled";
    if (s == NULL || emq_reply_kind(rep) != EMQ_REPLY_ERROR)
        return 0;
    for (size_t i = 0; i + sizeof text - 1 <= n; i++)
        if (memcmp(s + i, text, sizeof text - 1) == 0)
            return 1;
    return 0;
}

/* Asks conn for the slot map: CLUSTER SHARDS, then CLUSTER SLOTS when the
 * server does not know SHARDS (before 7.0). self_host names the node for
 * replies with an empty endpoint. Fills *how on success; on failure the
 * status says why (a transport failure, or EMQ_ESERVER). */
static emq_status fetch_map(emq__route *r, emq_conn_t *conn,
                            const char *self_host, emq__slot_map *map,
                            found *how, emq_error *err) {
    static const char *const shards[] = {"CLUSTER", "SHARDS"};
    static const char *const slots[] = {"CLUSTER", "SLOTS"};
    emq_reply *rep = NULL;
    emq_status st;
    /* A server known to lack CLUSTER SHARDS (before 7.0) is asked for
     * SLOTS at once; any other is asked for SHARDS first. */
    emq_server server;
    int use_slots = emq_conn_server(conn, &server) &&
                    !(server.capabilities & EMQ_CAP_CLUSTER_SHARDS);
    if (!use_slots) {
        st = emq_conn_command(conn, 2, shards, NULL, &rep, err);
        if (st != EMQ_OK)
            return st;
        if (emq_reply_is_error(rep, "NOAUTH")) {
            /* No password given to a server that wants one. */
            st = emq__conn_auth_error(conn, rep, "CLUSTER SHARDS", err);
            emq_reply_free(rep);
            return st;
        }
        if (emq_reply_kind(rep) == EMQ_REPLY_ERROR) {
            if (says_standalone(rep) || emq_reply_is_error(rep, "NOPERM")) {
                *how = says_standalone(rep) ? FOUND_STANDALONE : FOUND_NOPERM;
                emq_reply_free(rep);
                return EMQ_OK;
            }
            emq_reply_free(rep);
            rep = NULL;
            use_slots = 1;
        }
    }
    if (use_slots) {
        st = emq_conn_command(conn, 2, slots, NULL, &rep, err);
        if (st != EMQ_OK)
            return st;
        if (emq_reply_is_error(rep, "NOAUTH")) {
            st = emq__conn_auth_error(conn, rep, "CLUSTER SLOTS", err);
            emq_reply_free(rep);
            return st;
        }
        if (emq_reply_kind(rep) == EMQ_REPLY_ERROR) {
            *how = says_standalone(rep) ? FOUND_STANDALONE : FOUND_NOPERM;
            if (says_standalone(rep) || emq_reply_is_error(rep, "NOPERM"))
                st = EMQ_OK;
            /* A server still loading its data (or busy with a script)
             * runs no command yet: a passing condition, retriable like a
             * transport failure, never a fatal error reply. */
            else if (emq_reply_is_error(rep, "LOADING") ||
                     emq_reply_is_error(rep, "BUSY"))
                st = emq__reply_error_as(err, EMQ_EIO, 1, rep,
                                         "server not ready for CLUSTER SLOTS");
            else
                st = emq__reply_error_set(err, rep, "CLUSTER SLOTS failed");
            emq_reply_free(rep);
            return st;
        }
    }
    emq__slot_map_init(map);
    st = use_slots
             ? emq__slot_map_from_slots(map, rep, self_host, err)
             : emq__slot_map_from_shards(map, rep, self_host, r->tls, err);
    /* CLUSTER SHARDS can be wrong after a failover (7.2: a shard with two
     * masters and the slots of the failed one): then, or when it leaves
     * our slot unowned, CLUSTER SLOTS decides, if it names an owner. */
    if (st == EMQ_OK && !use_slots &&
        (emq__slot_map_shards_doubtful(rep) ||
         map->owner[r->slot] == EMQ_SLOT_NONE)) {
        emq_reply_free(rep);
        rep = NULL;
        st = emq_conn_command(conn, 2, slots, NULL, &rep, err);
        if (st != EMQ_OK) {
            emq__slot_map_free(map);
            return st;
        }
        emq__slot_map alt;
        emq__slot_map_init(&alt);
        emq_error ignored;
        if (emq_reply_kind(rep) != EMQ_REPLY_ERROR &&
            emq__slot_map_from_slots(&alt, rep, self_host, &ignored) ==
                EMQ_OK &&
            alt.owner[r->slot] != EMQ_SLOT_NONE) {
            emq__log_to(&r->opt.log, EMQ_LOG_DEBUG,
                        "slot %u: CLUSTER SHARDS from %s is inconsistent "
                        "(a shard without exactly one master, or the slot "
                        "unowned); using CLUSTER SLOTS",
                        r->slot, self_host);
            emq__slot_map_free(map);
            *map = alt;
        } else {
            emq__slot_map_free(&alt);
        }
    }
    emq_reply_free(rep);
    if (st == EMQ_OK) {
        *how = FOUND_MAP;
        r->stats.map_refreshes++;
    }
    return st;
}

/* One discovery pass over the candidates: the seed URL (with the caller's
 * own options, so unix:// and every URL setting work), then cluster.seeds,
 * then the nodes of the current map. The first that answers decides.
 * On FOUND_MAP and FOUND_NOPERM the route's map, links and owner are set
 * and connected; on FOUND_STANDALONE (only when allow_standalone) the
 * route gets r->single. Returns EMQ_OK or the last failure. */
static emq_status discover(emq__route *r, int allow_standalone,
                           emq_error *err) {
    emq__slot_map known = r->map; /* candidates from the last map */
    emq__slot_map_init(&r->map);
    size_t nseeds = 0;
    emq__cluster_node *seeds = NULL;
    emq_status st = EMQ_OK;
    /* Candidates: [seed url] + cluster.seeds + known nodes. */
    const char *list = r->opt.cluster_seeds ? r->opt.cluster_seeds : "";
    size_t cap = known.nnodes + 1;
    for (const char *s = list; *s; s++)
        cap += *s == ',';
    cap += *list != '\0';
    seeds = emq__calloc(cap, sizeof *seeds);
    if (seeds == NULL) {
        st = emq__oom(err);
        goto done;
    }
    for (const char *s = list; *s;) {
        const char *comma = strchr(s, ',');
        size_t n = comma ? (size_t)(comma - s) : strlen(s);
        emq__url u;
        if (emq__hostport_parse(s, n, &u, NULL) == EMQ_OK) {
            if (strlen(u.host) < EMQ_CLUSTER_HOST_MAX) {
                memcpy(seeds[nseeds].host, u.host, strlen(u.host) + 1);
                seeds[nseeds++].port = u.port;
            }
            emq__url_free(&u);
        }
        s = comma ? comma + 1 : s + n;
    }
    for (size_t i = 0; i < known.nnodes; i++)
        seeds[nseeds++] = known.nodes[i];

    emq_error last;
    emq__error_set(&last, EMQ_EIO, 1, "no cluster node could be reached");
    /* A Sentinel URL's primary is found at connect (it is never a
     * cluster node). */
    const char *seed_host =
        r->seed.scheme == EMQ_URL_UNIX || r->seed.host == NULL ? "127.0.0.1"
                                                               : r->seed.host;
    for (size_t i = 0; i <= nseeds; i++) {
        emq_conn_t *conn = NULL;
        emq__cluster_node at;
        emq_error e;
        emq__error_clear(&e);
        if (i == 0) {
            snprintf(at.host, sizeof at.host, "%s", seed_host);
            at.port = r->seed.scheme == EMQ_URL_UNIX ? 0 : r->seed.port;
            st = emq__conn_open(&r->opt.conn, &conn, &e);
        } else {
            at = seeds[i - 1];
            st = connect_addr(r, &at, &conn, &e);
        }
        found how = FOUND_MAP;
        emq__slot_map fresh;
        emq__slot_map_init(&fresh);
        if (st == EMQ_OK)
            st = fetch_map(r, conn, at.host, &fresh, &how, &e);
        if (st == EMQ_OK && how == FOUND_STANDALONE && !allow_standalone)
            st = emq__error_set(&e, EMQ_ESERVER, 1,
                                "%s:%d is not in cluster mode any more",
                                at.host, at.port);
        if (st != EMQ_OK) {
            emq_conn_destroy(conn);
            emq__slot_map_free(&fresh);
            if (st == EMQ_ENOMEM || st == EMQ_EINVAL || st == EMQ_EAUTH ||
                st == EMQ_ETLS) {
                last = e; /* would fail the same everywhere */
                break;
            }
            last = e;
            continue;
        }
        if (how == FOUND_STANDALONE) {
            r->single = conn;
            st = EMQ_OK;
            goto done;
        }
        int idx;
        if (how == FOUND_NOPERM) {
            /* Talk to this node; MOVED replies teach the rest. */
            r->mapped = 0;
            if (at.port == 0) {
                emq_conn_destroy(conn);
                st = emq__error_set(&last, EMQ_EINVAL, 0,
                                    "the server refuses CLUSTER commands "
                                    "(NOPERM) and a unix socket cannot "
                                    "follow cluster redirections; use a "
                                    "redis:// url or allow CLUSTER");
                break;
            }
            idx = learn_node(r, &at, &e);
        } else {
            r->mapped = 1;
            emq__slot_map_free(&r->map);
            r->map = fresh;
            idx = r->map.owner[r->slot] == EMQ_SLOT_NONE
                      ? -1
                      : (int)r->map.owner[r->slot];
            if (idx < 0) {
                emq_conn_destroy(conn);
                st = emq__error_set(&last, EMQ_ESERVER, 1,
                                    "slot %u is not served by any master "
                                    "in the cluster map from %s:%d",
                                    r->slot, at.host, at.port);
                continue;
            }
            if (grow_links(r, &e) != EMQ_OK)
                idx = -1;
        }
        if (idx < 0) {
            emq_conn_destroy(conn);
            last = e;
            st = e.code;
            break;
        }
        set_owner(r, idx);
        const emq__cluster_node *own = &r->map.nodes[idx];
        if (own->port == at.port && strcmp(own->host, at.host) == 0) {
            r->links[idx].conn = conn; /* the seed is the master: keep it */
        } else {
            emq_conn_destroy(conn);
            st = link_connect(r, idx, &e);
            if (st != EMQ_OK) {
                last = e;
                emq__error_prefix(&last, "slot %u master %s", r->slot, r->name);
                continue;
            }
        }
        st = EMQ_OK;
        goto done;
    }
    if (err)
        *err = last;
    st = last.code;
    if (r->map.nnodes == 0) {
        /* Nobody answered: keep the nodes known so far as candidates for
         * the next attempt (the seeds may be the nodes that died). */
        emq__slot_map_free(&r->map);
        r->map = known;
        emq__slot_map_init(&known);
        (void)grow_links(r, NULL);
    }
done:
    emq__free(seeds);
    emq__slot_map_free(&known);
    return st;
}

/* ---- public (internal) API -------------------------------------------- */

void emq__route_options_of(const emq_conf_t *conf, emq__route_options *out) {
    memset(out, 0, sizeof *out);
    emq__conn_options_of(conf, &out->conn);
    out->cluster_seeds = emq__cfg_cluster_seeds(conf);
    out->allowed_hosts = emq__cfg_cluster_allowed_hosts(conf);
    out->max_redirects = emq__cfg_cluster_max_redirects(conf);
    out->retry_ms = emq__cfg_cluster_retry_ms(conf);
    emq__log_sink_of(conf, &out->log);
}

/* Makes r->opt a copy of opts that owns its strings. */
static emq_status keep_options(emq__route *r, const emq__route_options *opts,
                               emq_error *err) {
    r->opt = *opts;
    r->opt.cluster_seeds = NULL;
    r->opt.allowed_hosts = NULL;
    if (emq__conn_options_keep(&r->opt.conn, &opts->conn, err) != EMQ_OK)
        return EMQ_ENOMEM;
    if (opts->cluster_seeds &&
        (r->opt.cluster_seeds = emq__strdup(opts->cluster_seeds)) == NULL)
        return emq__oom(err);
    if (opts->allowed_hosts &&
        (r->opt.allowed_hosts = emq__strdup(opts->allowed_hosts)) == NULL)
        return emq__oom(err);
    return EMQ_OK;
}

emq_status emq__route_new(const emq_conf_t *conf, const char *key,
                          emq__route **out, emq_error *err) {
    if (out)
        *out = NULL;
    if (conf == NULL)
        return emq__error_set(err, EMQ_EINVAL, 0,
                              "emq__route_new: conf must not be NULL");
    emq__route_options opts;
    emq__route_options_of(conf, &opts);
    return emq__route_open(&opts, key, out, err);
}

emq_status emq__route_open(const emq__route_options *opts, const char *key,
                           emq__route **out, emq_error *err) {
    if (out)
        *out = NULL;
    if (opts == NULL || opts->conn.url == NULL || key == NULL || out == NULL)
        return emq__error_set(err, EMQ_EINVAL, 0,
                              "emq__route_open: options, url, key and out "
                              "must not be NULL");
    emq__route *r = emq__calloc(1, sizeof *r);
    if (r == NULL)
        return emq__oom(err);
    emq__slot_map_init(&r->map);
    r->seed.db = -1;
    r->slot = emq__cluster_key_slot(key, strlen(key));
    r->rng = (uint64_t)emq__now_ms() ^ (uint64_t)(uintptr_t)r;
    emq_status st = keep_options(r, opts, err);
    if (st == EMQ_OK) {
        st = emq__url_parse(r->opt.conn.url, &r->seed, err);
        if (st == EMQ_EINVAL)
            emq__error_prefix(err, "invalid url");
    }
    if (st == EMQ_OK) {
        r->tls = r->seed.scheme == EMQ_URL_TLS;
        st = make_node_options(r, err);
    }
    if (st == EMQ_OK)
        st = discover(r, 1, err);
    if (st != EMQ_OK) {
        emq__route_destroy(r);
        return st;
    }
    if (r->single) {
        if (r->seed.scheme == EMQ_URL_UNIX)
            snprintf(r->name, sizeof r->name, "unix:%.200s", r->seed.path);
        else if (r->seed.nsentinels > 0)
            snprintf(r->name, sizeof r->name, "the primary of '%.100s'",
                     r->seed.master);
        else {
            emq__cluster_node n;
            snprintf(n.host, sizeof n.host, "%s", r->seed.host);
            n.port = r->seed.port;
            node_name(&n, r->name, sizeof r->name);
        }
    }
    emq__error_clear(err);
    *out = r;
    return EMQ_OK;
}

void emq__route_destroy(emq__route *route) {
    if (route == NULL)
        return;
    drop_all(route);
    emq_conn_destroy(route->single);
    emq__free(route->links);
    emq__free(route->q);
    emq__slot_map_free(&route->map);
    emq__url_free(&route->seed);
    emq__conn_options_drop(&route->node);
    emq__conn_options_drop(&route->opt.conn);
    emq__free((char *)(uintptr_t)route->opt.cluster_seeds);
    emq__free((char *)(uintptr_t)route->opt.allowed_hosts);
    emq__free(route);
}

emq_status emq__route_append(emq__route *route, int argc,
                             const char *const *argv, const size_t *argvlen,
                             emq_error *err) {
    if (route == NULL)
        return emq__error_set(err, EMQ_EINVAL, 0, "route is NULL");
    if (route->single)
        return emq_conn_append(route->single, argc, argv, argvlen, err);
    if (route->broken.code != EMQ_OK)
        return sticky(route, err);
    if (route->qlen >= (size_t)route->opt.conn.pipeline_max)
        return emq__error_set(err, EMQ_ELIMIT, 0,
                              "%zu commands are already waiting for replies "
                              "(pipeline.max); read replies with "
                              "emq__route_get_reply first",
                              route->qlen);
    if (route->qlen == route->qcap) {
        size_t cap = route->qcap ? route->qcap * 2 : 16;
        cmd **q = emq__alloc(cap * sizeof *q);
        if (q == NULL)
            return emq__error_set(err, EMQ_ENOMEM, 0,
                                  "out of memory growing the pipeline");
        for (size_t i = 0; i < route->qlen; i++)
            q[i] = route->q[(route->qhead + i) % route->qcap];
        emq__free(route->q);
        route->q = q;
        route->qcap = cap;
        route->qhead = 0;
    }
    cmd *c;
    emq_status st = cmd_new(argc, argv, argvlen, &c, err);
    if (st != EMQ_OK)
        return st;
    emq_error e;
    emq__error_clear(&e);
    st = send_cmd(route, c, route->owner, 0, &e);
    if (st != EMQ_OK) {
        emq__free(c);
        if (st == EMQ_ELIMIT || st == EMQ_ENOMEM || st == EMQ_EINVAL) {
            if (err)
                *err = e;
            return st;
        }
        return break_route(route, &e, err);
    }
    route->q[(route->qhead + route->qlen) % route->qcap] = c;
    route->qlen++;
    emq__error_clear(err);
    return EMQ_OK;
}

emq_status emq__route_get_reply(emq__route *route, emq_reply **reply,
                                emq_error *err) {
    if (reply)
        *reply = NULL;
    if (route == NULL || reply == NULL)
        return emq__error_set(err, EMQ_EINVAL, 0,
                              "route and reply must not be NULL");
    if (route->single)
        return emq_conn_get_reply(armed(route, route->single), reply, err);
    if (route->broken.code != EMQ_OK)
        return sticky(route, err);
    if (route->qlen == 0)
        return emq__error_set(err, EMQ_EINVAL, 0,
                              "no reply is outstanding: append a command "
                              "first");
    cmd *c = route->q[route->qhead];
    emq_error e;
    emq__error_clear(&e);
    for (;;) {
        while (c->reply == NULL && c->bound.code == EMQ_OK) {
            emq_status st = read_one(route, c->node, &e);
            if (st != EMQ_OK) {
                int big = emq__conn_reply_too_large(route->links[c->node].conn);
                st = break_route(route, &e, err);
                route->too_large = big;
                return st;
            }
        }
        int done = follow(route, c, &e);
        if (done < 0)
            return break_route(route, &e, err);
        if (done == 1)
            break;
    }
    route->qhead = (route->qhead + 1) % route->qcap;
    route->qlen--;
    emq_status st = c->bound.code;
    if (st != EMQ_OK && err)
        *err = c->bound;
    else if (st == EMQ_OK)
        emq__error_clear(err);
    route->reply_began_ms = c->began_ms;
    *reply = c->reply;
    emq__free(c);
    return st;
}

emq_status emq__route_send(emq__route *route, emq_error *err) {
    if (route == NULL)
        return emq__error_set(err, EMQ_EINVAL, 0, "route is NULL");
    if (route->single)
        return emq__conn_send(route->single, err);
    if (route->broken.code != EMQ_OK)
        return sticky(route, err);
    for (size_t i = 0; i < route->links_cap; i++) {
        node_link *l = &route->links[i];
        if (l->conn == NULL || l->head == NULL)
            continue;
        emq_error e;
        if (emq__conn_send(l->conn, &e) != EMQ_OK)
            return break_route(route, &e, err);
    }
    emq__error_clear(err);
    return EMQ_OK;
}

int emq__route_only_this_failed(const emq__route *route, emq_status st) {
    return st == EMQ_ELIMIT && !emq__route_is_broken(route);
}

void emq__route_set_cancel(emq__route *route, const emq__conn_cancel *cancel) {
    route->cancel = cancel ? *cancel
                           : (emq__conn_cancel){NULL, 0, NULL, NULL, -1};
}

emq_status emq__route_command(emq__route *route, int argc,
                              const char *const *argv, const size_t *argvlen,
                              emq_reply **reply, emq_error *err) {
    if (reply)
        *reply = NULL;
    if (route == NULL || reply == NULL)
        return emq__error_set(err, EMQ_EINVAL, 0,
                              "route and reply must not be NULL");
    if (route->single)
        return emq_conn_command(armed(route, route->single), argc, argv,
                                argvlen, reply, err);
    if (route->broken.code != EMQ_OK)
        return sticky(route, err);
    if (route->qlen > 0)
        return emq__error_set(err, EMQ_EINVAL, 0,
                              "%zu pipelined replies are still unread; read "
                              "them with emq__route_get_reply before "
                              "emq__route_command",
                              route->qlen);
    emq_status st = emq__route_append(route, argc, argv, argvlen, err);
    if (st != EMQ_OK)
        return st;
    return emq__route_get_reply(route, reply, err);
}

emq_status emq__route_each_master(emq__route *route, emq__route_master_fn fn,
                                  void *ctx, emq_error *err) {
    if (route->single)
        return fn(armed(route, route->single), route->name, ctx, err);
    if (route->broken.code != EMQ_OK)
        return sticky(route, err);
    if (route->qlen > 0)
        return emq__error_set(err, EMQ_EINVAL, 0,
                              "%zu pipelined replies are still unread",
                              route->qlen);
    if (!route->mapped)
        return emq__error_set(err, EMQ_ESERVER, 0,
                              "the cluster's masters are not known: the "
                              "server refused CLUSTER SHARDS and CLUSTER "
                              "SLOTS (allow them in the user's ACL)");
    /* The masters that serve a slot: a node the map learnt but that owns
     * nothing holds no keys. */
    char *serves = emq__calloc(route->map.nnodes ? route->map.nnodes : 1, 1);
    if (serves == NULL)
        return emq__oom(err);
    for (size_t s = 0; s < EMQ_CLUSTER_SLOTS; s++)
        if (route->map.owner[s] != EMQ_SLOT_NONE)
            serves[route->map.owner[s]] = 1;
    emq_status st = EMQ_OK;
    for (size_t i = 0; i < route->map.nnodes && st == EMQ_OK; i++) {
        if (!serves[i])
            continue;
        char name[EMQ_CLUSTER_HOST_MAX + 16];
        node_name(&route->map.nodes[i], name, sizeof name);
        st = link_connect(route, (int)i, err);
        if (st == EMQ_OK)
            st = fn(armed(route, route->links[i].conn), name, ctx, err);
        if (st != EMQ_OK)
            emq__error_prefix(err, "master %s", name);
    }
    emq__free(serves);
    return st;
}

size_t emq__route_pending(const emq__route *route) {
    if (route == NULL)
        return 0;
    return route->single ? emq_conn_pending(route->single) : route->qlen;
}

emq_status emq__route_reconnect(emq__route *route, emq_error *err) {
    if (route == NULL)
        return emq__error_set(err, EMQ_EINVAL, 0, "route is NULL");
    if (route->single) {
        emq_status st = emq_conn_reconnect(route->single, err);
        if (st == EMQ_OK)
            route->stats.reconnects++;
        return st;
    }
    drop_all(route);
    const emq__conn_options *o = &route->opt.conn;
    emq_error e;
    emq__error_clear(&e);
    emq_status st = EMQ_EIO;
    emq__retry retry;
    emq__retry_begin(&retry, o->backoff_min_ms, o->backoff_max_ms,
                     o->max_attempts, -1, &route->rng);
    while (emq__retry_next(&retry)) {
        emq__error_clear(&e);
        drop_all(route);
        st = discover(route, 0, &e);
        if (st == EMQ_OK) {
            route->stats.reconnects++;
            emq__error_clear(&route->broken);
            emq__error_clear(err);
            return EMQ_OK;
        }
        if (!e.retriable)
            break;
    }
    if (retry.attempt > 1)
        emq__error_prefix(&e, "reconnect gave up after %lld attempts",
                          (long long)retry.attempt);
    if (e.code == EMQ_OK)
        e.code = st;
    return break_route(route, &e, err);
}

const char *emq__route_endpoint(const emq__route *route) {
    if (route == NULL)
        return "";
    if (route->single)
        return emq__conn_name(route->single);
    return route->name;
}

int64_t emq__route_reply_began_ms(const emq__route *route) {
    if (route == NULL)
        return 0;
    if (route->single)
        return emq__conn_reply_began_ms(route->single);
    return route->reply_began_ms;
}

int emq__route_reply_too_large(const emq__route *route) {
    if (route == NULL)
        return 0;
    if (route->single)
        return emq__conn_reply_too_large(route->single);
    return route->broken.code != EMQ_OK && route->too_large;
}

int emq__route_switch_announced(const emq__route *route) {
    return route != NULL && route->single != NULL &&
           emq__conn_switch_announced(route->single);
}

int emq__route_reply_whole(emq__route *route, int64_t ms) {
    return route == NULL || route->single == NULL ||
           emq__conn_reply_whole(route->single, ms);
}

int emq__route_went_away(const emq__route *route) {
    if (route == NULL)
        return 1;
    if (route->single)
        return emq__conn_went_away(route->single);
    if (route->broken.code != EMQ_OK)
        return 1;
    if (route->qlen > 0)
        return 0;
    /* A node connection that went away is dropped by the next command
     * sent to it; the one serving the route's slot decides. */
    if (route->owner < 0 || (size_t)route->owner >= route->links_cap)
        return 0;
    emq_conn_t *conn = route->links[route->owner].conn;
    return conn != NULL && emq__conn_went_away(conn);
}

int emq__route_is_broken(const emq__route *route) {
    if (route == NULL)
        return 1;
    if (route->single)
        return emq_conn_is_broken(route->single);
    return route->broken.code != EMQ_OK;
}

uint64_t emq__route_reconnects(const emq__route *route) {
    return route ? route->stats.reconnects : 0;
}

int emq__route_fd(const emq__route *route) {
    if (route == NULL)
        return -1;
    if (route->single)
        return emq_conn_fd(route->single);
    if (route->owner < 0 || (size_t)route->owner >= route->links_cap)
        return -1;
    return emq_conn_fd(route->links[route->owner].conn);
}

int emq__route_is_cluster(const emq__route *route) {
    return route && route->single == NULL;
}

unsigned emq__route_slot(const emq__route *route) {
    return route ? route->slot : 0;
}

const char *emq__route_node(const emq__route *route) {
    return route ? route->name : "";
}

/* The connection to the slot's current node, or NULL. */
static const emq_conn_t *owner_conn(const emq__route *route) {
    if (route != NULL && route->single)
        return route->single;
    if (route != NULL && route->owner >= 0 &&
        (size_t)route->owner < route->links_cap)
        return route->links[route->owner].conn;
    return NULL;
}

int emq__route_server(const emq__route *route, emq_server *out) {
    return emq_conn_server(owner_conn(route), out);
}

int64_t emq__route_client_id(const emq__route *route) {
    return emq__conn_client_id(owner_conn(route));
}

int emq__route_functions(const emq__route *route, const char **why) {
    return emq__conn_functions(owner_conn(route), why);
}

void emq__route_stats_get(const emq__route *route, emq__route_stats *out) {
    if (out == NULL)
        return;
    if (route == NULL) {
        memset(out, 0, sizeof *out);
        return;
    }
    *out = route->stats;
}
