/* SPDX-License-Identifier: BSD-3-Clause */
/* cluster: key slots, the slot map, redirections, and the slot-bound
 * connection ("route") the layers above talk through.
 *
 * Internal header (not installed). Every key of a queue shares one hashtag
 * (keys.h), so one queue lives in one cluster slot and the unit of routing
 * is a connection bound to that slot: emq__route. Its calls mirror the
 * emq_conn_* calls one for one (new, command, append, get_reply, pending,
 * reconnect, is_broken, destroy), so a layer above swaps one for the other
 * without changing its logic. On a standalone server a route is one plain
 * connection to the configured URL. On Redis Cluster it finds the slot's
 * master from a slot map and follows MOVED, ASK, TRYAGAIN and CLUSTERDOWN
 * itself: the caller sees the reply of the node that executed the command,
 * never a redirection (docs/CLUSTER.md).
 *
 * This layer never knows about groups or queues.
 */
#ifndef EMQ_CLUSTER_H
#define EMQ_CLUSTER_H

#include "../conn/conf.h"
#include "../conn/conn.h"

#include <stddef.h>
#include <stdint.h>

#define EMQ_CLUSTER_SLOTS 16384
/* Longest host name or address kept for a node, bytes with the NUL. */
#define EMQ_CLUSTER_HOST_MAX 256
/* Most nodes one slot map may name (Redis Cluster's own guidance is 1000
 * nodes; replicas are not kept). */
#define EMQ_CLUSTER_NODES_MAX 1024
/* Marks a slot with no known owner in emq__slot_map.owner. */
#define EMQ_SLOT_NONE 0xffffu

/* ---- crc16.c ---------------------------------------------------------- */

/* CRC16-CCITT (XMODEM: polynomial 0x1021, initial value 0), the checksum
 * Redis Cluster uses for key slots. */
uint16_t emq__cluster_crc16(const char *buf, size_t len);

/* The slot of key: CRC16 of its hashtag (the bytes between the first '{'
 * and the first '}' after it, when that is non-empty) or of the whole key,
 * modulo 16384. */
unsigned emq__cluster_key_slot(const char *key, size_t len);

/* ---- slots.c: the slot map and redirect replies (pure, no I/O) -------- */

/* One master node: where to reach it. */
typedef struct emq__cluster_node {
    char host[EMQ_CLUSTER_HOST_MAX]; /* address or name, IPv6 without [] */
    int port;                        /* 1-65535 */
} emq__cluster_node;

/* Which master serves each slot. */
typedef struct emq__slot_map {
    emq__cluster_node *nodes; /* emq__alloc'd, nnodes entries, no duplicates */
    size_t nnodes;
    uint16_t owner[EMQ_CLUSTER_SLOTS]; /* index into nodes, or
                                          EMQ_SLOT_NONE */
} emq__slot_map;

/* Makes map empty: no nodes, every slot EMQ_SLOT_NONE. */
void emq__slot_map_init(emq__slot_map *map);
/* Frees the node array and empties map. */
void emq__slot_map_free(emq__slot_map *map);
/* Sets *idx to the index of host:port in map, adding it when absent.
 * Fails (*idx -1) with EMQ_EPROTO for an address emq__host_valid refuses
 * (a reply's address is data: it never carries URL settings) or a port
 * outside 1-65535 (the server's reply is at fault), EMQ_ELIMIT past
 * EMQ_CLUSTER_NODES_MAX nodes, EMQ_ENOMEM, each saying so. */
emq_status emq__slot_map_node(emq__slot_map *map, const char *host,
                              size_t hostlen, int port, int *idx,
                              emq_error *err);

/* Fills map (which must be empty) from a CLUSTER SHARDS reply (RESP2
 * arrays or RESP3 maps). For each shard the master is the node with role
 * "master", preferring health "online"; its address is the "endpoint"
 * (falling back to "ip" when the endpoint is "?" or empty, and to
 * self_host when both are unknown), its port "tls-port" when tls is set
 * and the node has one, else "port". Returns EMQ_OK, EMQ_ENOMEM, or
 * EMQ_EPROTO naming what is malformed (map is emptied then). */
emq_status emq__slot_map_from_shards(emq__slot_map *map, const emq_reply *r,
                                     const char *self_host, int tls,
                                     emq_error *err);
/* 1 when a CLUSTER SHARDS reply cannot be trusted as a slot map: a shard
 * names more than one node with role "master", or none. Redis 7.2 (seen on
 * 7.2.6) answers so after a replica failover when a node still counts the
 * old master, now failed, as a master: it lists both in one shard and
 * takes the shard's "slots" from the first node's master, which may be
 * the old master's empty list, so a slot the new master serves looks
 * unowned. CLUSTER SLOTS (built from the slot table) is right then. 0 for
 * anything that is not a list of shards (the parser reports those). */
int emq__slot_map_shards_doubtful(const emq_reply *r);
/* Same for a CLUSTER SLOTS reply ([start, end, [host, port, id, ...],
 * replicas...]). An empty host means the node that answered (self_host);
 * "?" means unknown, and that range is left unowned. */
emq_status emq__slot_map_from_slots(emq__slot_map *map, const emq_reply *r,
                                    const char *self_host, emq_error *err);

typedef enum emq__redirect_kind {
    EMQ_REDIRECT_NONE = 0,       /* not a cluster redirection */
    EMQ_REDIRECT_MOVED = 1,      /* -MOVED slot host:port */
    EMQ_REDIRECT_ASK = 2,        /* -ASK slot host:port */
    EMQ_REDIRECT_TRYAGAIN = 3,   /* -TRYAGAIN ... */
    EMQ_REDIRECT_CLUSTERDOWN = 4 /* -CLUSTERDOWN ... */
} emq__redirect_kind;

/* A parsed redirection. For MOVED and ASK: slot, and the target node;
 * an empty host in the reply ("-MOVED 1 :7001", sent when the endpoint is
 * unknown) leaves host "" for the caller to replace with the host of the
 * node that answered. */
typedef struct emq__redirect {
    emq__redirect_kind kind;
    unsigned slot;
    emq__cluster_node target;
} emq__redirect;

/* Classifies reply r. Returns the kind (NONE for anything that is not an
 * error reply starting with one of the four words, and for a MOVED or ASK
 * whose slot or address does not parse) and fills *out. */
emq__redirect_kind emq__redirect_parse(const emq_reply *r, emq__redirect *out);

/* ---- route.c: the slot-bound connection --------------------------------- */

typedef struct emq__route emq__route;

/* What a route did since emq__route_new. */
typedef struct emq__route_stats {
    uint64_t redirects_moved; /* MOVED replies followed */
    uint64_t redirects_ask;   /* ASK replies followed (ASKING + resend) */
    uint64_t tryagain;        /* TRYAGAIN replies retried after a pause */
    uint64_t clusterdown;     /* CLUSTERDOWN replies retried after a pause */
    uint64_t map_refreshes;   /* slot maps fetched (the first one counts) */
    uint64_t reconnects;      /* successful emq__route_reconnect calls */
    uint64_t gave_up;         /* commands failed with EMQ_ELIMIT because a
                                 bound of the route was reached */
} emq__route_stats;

/* What a route is told, typed: the rows of the property table the
 * cluster layer reads, and the conn layer's (emq__conn_options) for the
 * seed and, with the URL's credentials and TLS settings folded in, every
 * node. Strings are borrowed: emq__route_open copies what it keeps. A
 * caller sets a field for its own use of the route (a producer bounds the
 * timeouts, a consumer makes single reconnect attempts) instead of editing
 * a conf. */
typedef struct emq__route_options {
    emq__conn_options conn;
    const char *cluster_seeds; /* "host:port,..."; NULL: none */
    const char *allowed_hosts; /* cluster.allowed_hosts; NULL: any */
    int64_t max_redirects;     /* cluster.max_redirects */
    int64_t retry_ms;          /* cluster.retry_ms */
    emq__log_sink log;         /* where warnings go */
} emq__route_options;

/* Fills *out from conf (strings borrowed from conf). */
void emq__route_options_of(const emq_conf_t *conf, emq__route_options *out);
/* emq__route_new with typed options (copied); emq__route_new is this with
 * emq__route_options_of(conf). */
emq_status emq__route_open(const emq__route_options *opts, const char *key,
                           emq__route **out, emq_error *err);

/* Connects to the node serving key's slot. conf is borrowed (copied). The
 * seeds are conf's url, then each host:port of cluster.seeds (same scheme,
 * credentials and TLS settings as url); the first that answers decides:
 * CLUSTER SHARDS (or CLUSTER SLOTS on servers without it) gives the slot
 * map; "cluster support disabled" means a standalone server, and the route
 * is then one plain connection to url; a NOPERM (an ACL without CLUSTER)
 * also keeps the seed's connection, and MOVED replies then teach the route
 * where the slot lives. On success *out is caller-owned; free with
 * emq__route_destroy. Fails like emq_conn_new, with the last seed's error
 * when none answers, or EMQ_ESERVER (retriable) when the map names no
 * master for the slot. */
emq_status emq__route_new(const emq_conf_t *conf, const char *key,
                          emq__route **out, emq_error *err);
/* Closes every connection and frees; NULL is a no-op. */
void emq__route_destroy(emq__route *route);

/* Like emq_conn_command: one command, its reply. Redirections are followed
 * as described above and never returned. When one of the route's own
 * bounds is reached (cluster.max_redirects redirections of one command,
 * or TRYAGAIN/CLUSTERDOWN persisting for cluster.retry_ms) the command was
 * not run: the call fails with EMQ_ELIMIT naming the property, quoting
 * the last reply, reply_code its code, retriable 1 for cluster.retry_ms;
 * *reply is NULL and the route is not broken (emq__route_only_this_failed).
 * A server's error reply is a success of this call; *reply is
 * caller-owned (emq_reply_free). */
emq_status emq__route_command(emq__route *route, int argc,
                              const char *const *argv, const size_t *argvlen,
                              emq_reply **reply, emq_error *err);
/* Like emq_conn_append. The route keeps a copy of the command until its
 * reply has been read, so it can send it again after a redirection. Fails
 * with EMQ_ELIMIT past pipeline.max unread commands. */
emq_status emq__route_append(emq__route *route, int argc,
                             const char *const *argv, const size_t *argvlen,
                             emq_error *err);
/* Writes every appended command to its node now (emq__conn_send), its
 * reply still to be read with emq__route_get_reply. EMQ_OK, or the
 * failure that broke the route. */
emq_status emq__route_send(emq__route *route, emq_error *err);
/* Like emq_conn_get_reply: sends what is appended and returns the next
 * reply in append order, after following its redirections. A command that
 * reached a bound fails alone, as emq__route_command says; the replies of
 * the commands after it are still to be read. */
emq_status emq__route_get_reply(emq__route *route, emq_reply **reply,
                                emq_error *err);
/* 1 when st, returned by emq__route_get_reply or emq__route_command, failed
 * that one command only (a bound of the route: EMQ_ELIMIT) and the route
 * is in step: the caller keeps reading the later replies. 0 for EMQ_OK
 * and for a failure that broke the route. */
int emq__route_only_this_failed(const emq__route *route, emq_status st);
/* Appended commands whose replies have not been read yet. */
size_t emq__route_pending(const emq__route *route);
/* What emq__route_each_master calls for one master: conn is its
 * connection (borrowed; plain commands only, nothing left unread), name
 * its "host:port". */
typedef emq_status (*emq__route_master_fn)(emq_conn_t *conn, const char *name,
                                           void *ctx, emq_error *err);
/* Calls fn for every master of the cluster that serves a slot (connecting
 * as needed), in slot-map order, or once for a standalone server's
 * connection: for commands about a whole server (SCAN). The first failure
 * ends the walk, prefixed with the node. EMQ_ESERVER when the slot map is
 * not known (an ACL refusing CLUSTER SHARDS and SLOTS); EMQ_EINVAL with
 * replies unread (a misuse). */
emq_status emq__route_each_master(emq__route *route, emq__route_master_fn fn,
                                  void *ctx, emq_error *err);
/* Drops every connection (unread replies are lost), rediscovers the slot's
 * master from the seeds and every node known so far (after a failover the
 * old master may be gone) and connects to it, sleeping the conn layer's
 * capped backoff between attempts, up to reconnect.max_attempts. A
 * standalone route reconnects its one connection (emq_conn_reconnect). */
emq_status emq__route_reconnect(emq__route *route, emq_error *err);
/* 1 when the route cannot serve the next command as it stands: broken,
 * or idle while the connection to the slot's master went away (closed by
 * the peer; emq__conn_went_away). Never blocks. The route's thread. */
int emq__route_went_away(const emq__route *route);
/* emq__conn_reply_whole of a single server's connection; 1 at once on a
 * cluster (the caller's read waits). The route's thread. */
int emq__route_reply_whole(emq__route *route, int64_t ms);
/* emq__conn_switch_announced of a single server's connection (0 on a
 * cluster). */
int emq__route_switch_announced(const emq__route *route);
/* 1 once a transport failure broke the route (sticky until reconnect). */
int emq__route_is_broken(const emq__route *route);
/* The endpoint of the node serving the route's slot (a single server's:
 * emq__conn_name), for a user to see; "" when none. Threads: the
 * route's. */
const char *emq__route_endpoint(const emq__route *route);
/* emq__conn_reply_began_ms of the connection the last reply returned
 * came from. Threads: the route's. */
int64_t emq__route_reply_began_ms(const emq__route *route);
/* 1 while the route is broken because a reply grew past
 * resp.max_reply_bytes (emq__conn_reply_too_large of the connection it
 * was read from; the status was EMQ_EPROTO), 0 otherwise and after a
 * reconnect: a well-formed reply that was merely too large, which a
 * smaller request may avoid. Threads: the route's. */
int emq__route_reply_too_large(const emq__route *route);
/* Successful emq__route_reconnect calls. */
uint64_t emq__route_reconnects(const emq__route *route);
/* Socket of the connection to the slot's current node; -1 when none. */
int emq__route_fd(const emq__route *route);

/* Like emq__conn_set_cancel, for every connection of the route. */
void emq__route_set_cancel(emq__route *route, const emq__conn_cancel *cancel);

/* 1 when the route talks to a Redis Cluster (a map or a NOPERM seed), 0
 * for a standalone server. */
int emq__route_is_cluster(const emq__route *route);
/* The slot the route is bound to. */
unsigned emq__route_slot(const emq__route *route);
/* "host:port" of the node currently serving the slot (the URL's endpoint
 * for a standalone route). Borrowed; valid until the next call. */
const char *emq__route_node(const emq__route *route);
/* Like emq_conn_server, for the connection to the slot's current node. */
int emq__route_server(const emq__route *route, emq_server *out);
/* emq__conn_client_id of the connection to the slot's current node (0:
 * not known; always on a cluster, whose node connections do not learn
 * it). Threads: the route's. */
int64_t emq__route_client_id(const emq__route *route);
/* emq__conn_functions of the connection to the slot's current node (0
 * and "" when there is none yet). */
int emq__route_functions(const emq__route *route, const char **why);
/* Copies the counters. */
void emq__route_stats_get(const emq__route *route, emq__route_stats *out);

#endif /* EMQ_CLUSTER_H */
