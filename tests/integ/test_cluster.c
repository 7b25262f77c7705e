/* SPDX-License-Identifier: BSD-3-Clause */
/* test_cluster.c: emq__route on a real Redis Cluster and on a standalone
 * server.
 *
 * Each test starts its own cluster (cluster.h) on loopback and shares it
 * across several checks, since creating one takes a few seconds: the slot
 * map and a route seeded at the wrong node; stream commands and a script
 * over two keys of one hashtag; an ACL without CLUSTER (the route learns
 * from MOVED alone); a blocked read whose slot moves; a slot migrated
 * step by step under a loop of XADD/XRANGE (ASK, then MOVED, nothing
 * lost, TRYAGAIN bounded); a 100-command pipeline whose slot moved,
 * completed in order; a failover to a replica with the old master killed.
 */
#include "base/base.h" /* emq__alloc_fail_at */
#include "cluster/cluster.h"
#include "harness/cluster.h"
#include "integ/conn_helpers.h"

#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

/* Sends a command (C strings, NULL-terminated list) through a route; the
 * call must succeed. Returns the reply (caller frees). */
static emq_reply *route_cmd_at(const char *file, int line, emq__route *r,
                               const char *arg0, ...) {
    const char *argv[32];
    int argc = 0;
    va_list ap;
    va_start(ap, arg0);
    for (const char *a = arg0; a != NULL && argc < 32;
         a = va_arg(ap, const char *))
        argv[argc++] = a;
    va_end(ap);
    emq_error err;
    memset(&err, 0, sizeof err);
    emq_reply *reply = NULL;
    emq_status st = emq__route_command(r, argc, argv, NULL, &reply, &err);
    if (st != EMQ_OK || reply == NULL)
        emq_test_fail(file, line, "%s via route: got %s (%s)", argv[0],
                      emq_status_name(st), err.message);
    return reply;
}
#define RCMD(r, ...)                                                           \
    route_cmd_at(__FILE__, __LINE__, (r), __VA_ARGS__, (char *)NULL)

/* Asserts a reply is not an error; prints it when it is. */
#define ASSERT_NOT_ERROR(rep)                                                  \
    do {                                                                       \
        char t_[300];                                                          \
        if (emq_reply_kind(rep) == EMQ_REPLY_ERROR)                            \
            FAIL("error reply: %s", reply_text((rep), t_, sizeof t_));         \
    } while (0)

static emq__route *route_ok(const emq_conf_t *conf, const char *key) {
    emq_error err;
    memset(&err, 0, sizeof err);
    emq__route *r = NULL;
    ASSERT_OK(emq__route_new(conf, key, &r, &err), &err);
    ASSERT(r != NULL);
    return r;
}

static emq_conf_t *conf_node(emq_cl *c, int i) {
    emq_conf_t *conf = conf_for(emq_srv_url(emq_cl_node(c, i)));
    conf_set(conf, P_RECONNECT_BASE, "50");
    conf_set(conf, P_RECONNECT_MAX, "500");
    conf_set(conf, P_RECONNECT_ATTEMPTS, "30");
    return conf;
}

/* The port in "host:port". */
static int node_port(const emq__route *r) {
    const char *colon = strrchr(emq__route_node(r), ':');
    return colon ? atoi(colon + 1) : -1;
}

static long long reply_int(emq_reply *rep) {
    ASSERT_EQ_INT(emq_reply_kind(rep), EMQ_REPLY_INTEGER);
    long long v = emq_reply_integer(rep);
    emq_reply_free(rep);
    return v;
}

/* ---- map, wrong node, commands, ACL, blocked read -------------------- */

typedef struct mover {
    emq_cl *c;
    unsigned slot;
    int from, to;
} mover;

/* Moves an empty slot while the main thread is blocked on it, then adds
 * an entry on the new owner. */
static void *move_later(void *arg) {
    mover *m = arg;
    usleep(300 * 1000);
    emq_cl_move_slot(m->c, m->slot, m->from, m->to);
    usleep(500 * 1000); /* the blocked client is redirected by a cron */
    char out[128];
    emq_srv_cmd(emq_cl_node(m->c, m->to), out, sizeof out, "XADD", "{blk}", "*",
                "f", "v", NULL);
    return NULL;
}

TEST_TIMEOUT(cluster_map_wrong_node_commands_acl_blocked, 45) {
    emq_cl *c = emq_cl_start(3, 0);
    unsigned slot = emq__cluster_key_slot("{jobs}", 6);
    ASSERT_EQ_INT(slot, 9631);
    int owner = emq_cl_owner(c, 0, slot);
    ASSERT(owner >= 0);
    int wrong = emq_cl_other_master(c, owner);

    /* The slot map, from CLUSTER SHARDS and CLUSTER SLOTS, agrees with
     * the cluster's own view. */
    emq_conf_t *conf = conf_node(c, wrong);
    emq_conn_t *conn = connect_ok(conf);
    emq__slot_map a, b;
    emq__slot_map_init(&a);
    emq__slot_map_init(&b);
    emq_error err;
    /* CLUSTER SHARDS exists from Redis 7.0; on 6.2 only SLOTS is
     * checked (and the route uses SLOTS there). */
    int has_shards = emq_srv_redis_at_least(emq_cl_node(c, 0), 7, 0);
    emq_reply *rep;
    if (has_shards) {
        rep = CMD(conn, "CLUSTER", "SHARDS");
        ASSERT_OK(emq__slot_map_from_shards(&a, rep, "127.0.0.1", 0, &err),
                  &err);
        emq_reply_free(rep);
    } else {
        fprintf(stderr, "    %s lacks CLUSTER SHARDS: CLUSTER SLOTS only\n",
                emq_srv_server(emq_cl_node(c, 0))->label);
    }
    rep = CMD(conn, "CLUSTER", "SLOTS");
    ASSERT_OK(emq__slot_map_from_slots(&b, rep, "127.0.0.1", &err), &err);
    emq_reply_free(rep);
    ASSERT_EQ_SIZE(b.nnodes, 3);
    if (has_shards)
        ASSERT_EQ_SIZE(a.nnodes, 3);
    for (unsigned s = 0; s < EMQ_CLUSTER_SLOTS; s += 97) {
        ASSERT(b.owner[s] != EMQ_SLOT_NONE);
        if (!has_shards)
            continue;
        ASSERT(a.owner[s] != EMQ_SLOT_NONE);
        ASSERT_EQ_INT(a.nodes[a.owner[s]].port, b.nodes[b.owner[s]].port);
    }
    ASSERT_EQ_INT(b.nodes[b.owner[slot]].port,
                  emq_srv_port(emq_cl_node(c, owner)));
    emq__slot_map_free(&a);
    emq__slot_map_free(&b);
    emq_conn_destroy(conn);

    /* A route seeded at the wrong node talks to the owner. */
    emq__route *r = route_ok(conf, "{jobs}");
    ASSERT_EQ_INT(emq__route_is_cluster(r), 1);
    ASSERT_EQ_INT(emq__route_slot(r), 9631);
    ASSERT_EQ_INT(node_port(r), emq_srv_port(emq_cl_node(c, owner)));
    rep = RCMD(r, "XGROUP", "CREATE", "{jobs}", "g", "$", "MKSTREAM");
    ASSERT_REPLY_TEXT(rep, EMQ_REPLY_STATUS, "OK");
    emq_reply_free(rep);
    rep = RCMD(r, "XADD", "{jobs}", "*", "n", "1");
    ASSERT_EQ_INT(emq_reply_kind(rep), EMQ_REPLY_STRING);
    emq_reply_free(rep);
    rep = RCMD(r, "XREADGROUP", "GROUP", "g", "w", "COUNT", "10", "BLOCK",
               "100", "STREAMS", "{jobs}", ">");
    ASSERT_EQ_INT(emq_reply_kind(rep), EMQ_REPLY_ARRAY);
    ASSERT_EQ_SIZE(emq_reply_len(rep), 1);
    emq_reply_free(rep);
    rep = RCMD(r, "EVAL",
               "redis.call('XADD', KEYS[2], '*', 'from', KEYS[1]) "
               "return redis.call('XLEN', KEYS[1]) + "
               "redis.call('XLEN', KEYS[2])",
               "2", "{jobs}", "{jobs}:dead");
    ASSERT_EQ_INT(reply_int(rep), 2);
    emq__route_stats st;
    emq__route_stats_get(r, &st);
    ASSERT_EQ_INT(st.redirects_moved, 0);
    ASSERT_EQ_INT(st.map_refreshes, 1);
    /* A key of another slot still works, through a redirection. */
    rep = RCMD(r, "SET", "elsewhere", "1");
    ASSERT_NOT_ERROR(rep);
    emq_reply_free(rep);
    emq__route_destroy(r);

    /* cluster.seeds: url is dead, a seed answers. */
    emq_conf_t *seeded = conf_node(c, wrong);
    char url[64], seeds[64];
    snprintf(url, sizeof url, "redis://127.0.0.1:%d", emq_free_port());
    snprintf(seeds, sizeof seeds, "127.0.0.1:%d",
             emq_srv_port(emq_cl_node(c, wrong)));
    conf_set(seeded, P_URL, url);
    conf_set(seeded, "cluster.seeds", seeds);
    r = route_ok(seeded, "{jobs}");
    ASSERT_EQ_INT(node_port(r), emq_srv_port(emq_cl_node(c, owner)));
    rep = RCMD(r, "XLEN", "{jobs}");
    ASSERT_EQ_INT(reply_int(rep), 1);
    emq__route_destroy(r);
    emq_conf_destroy(seeded);

    /* An ACL user without CLUSTER: no map, MOVED teaches the route. */
    char out[256];
    for (int i = 0; i < 3; i++)
        ASSERT_EQ_INT(emq_srv_cmd(emq_cl_node(c, i), out, sizeof out, "ACL",
                                  "SETUSER", "app", "on", ">pw", "~*", "&*",
                                  "+@all", "-cluster", NULL),
                      '+');
    emq_conf_t *limited = conf_node(c, wrong);
    conf_set(limited, P_USER, "app");
    conf_set(limited, P_PASSWORD, "pw");
    r = route_ok(limited, "{jobs}");
    ASSERT_EQ_INT(emq__route_is_cluster(r), 1);
    ASSERT_EQ_INT(node_port(r), emq_srv_port(emq_cl_node(c, wrong)));
    rep = RCMD(r, "XLEN", "{jobs}");
    ASSERT_EQ_INT(reply_int(rep), 1);
    ASSERT_EQ_INT(node_port(r), emq_srv_port(emq_cl_node(c, owner)));
    rep = RCMD(r, "XLEN", "{jobs}");
    ASSERT_EQ_INT(reply_int(rep), 1);
    emq__route_stats_get(r, &st);
    ASSERT_EQ_INT(st.redirects_moved, 1);
    ASSERT_EQ_INT(st.map_refreshes, 0);
    emq__route_destroy(r);

    /* Every allocation failure on the way (discovery, MOVED, connecting
     * to the owner) is a clean EMQ_ENOMEM, never a crash or a leak. */
    for (uint64_t n = 1;; n++) {
        if (n > 5000)
            FAIL("allocation walk did not end");
        uint64_t before = emq__alloc_calls();
        emq__alloc_fail_at(n);
        r = NULL;
        emq_status s1 = emq__route_new(limited, "{jobs}", &r, &err);
        emq_status s2 = EMQ_OK;
        if (s1 == EMQ_OK) {
            s2 = emq__route_command(r, 2,
                                    (const char *const[]){"XLEN", "{jobs}"},
                                    NULL, &rep, &err);
            if (s2 == EMQ_OK)
                emq_reply_free(rep);
        } else {
            ASSERT(r == NULL);
        }
        emq__alloc_fail_at(0);
        uint64_t used = emq__alloc_calls() - before;
        emq__route_destroy(r);
        if (s1 != EMQ_OK || s2 != EMQ_OK)
            ASSERT(s1 == EMQ_ENOMEM || s2 == EMQ_ENOMEM);
        if (used < n)
            break; /* nothing failed: every allocation was walked */
    }
    emq_conf_destroy(limited);

    /* A blocked read whose slot moves gets MOVED and follows it: it then
     * blocks on the new owner and returns the entry added there. */
    unsigned bslot = emq__cluster_key_slot("{blk}", 5);
    int bowner = emq_cl_owner(c, 0, bslot);
    int bto = emq_cl_other_master(c, bowner);
    r = route_ok(conf, "{blk}");
    mover m = {c, bslot, bowner, bto};
    pthread_t th;
    ASSERT_EQ_INT(pthread_create(&th, NULL, move_later, &m), 0);
    int64_t t0 = now_ms();
    /* From 0-0: the key does not exist yet, so the read blocks; it gets
     * the entry whether it is added before or after the redirection. */
    rep = RCMD(r, "XREAD", "COUNT", "1", "BLOCK", "10000", "STREAMS", "{blk}",
               "0-0");
    pthread_join(th, NULL);
    ASSERT_NOT_ERROR(rep);
    ASSERT_EQ_INT(emq_reply_kind(rep), EMQ_REPLY_ARRAY);
    emq_reply_free(rep);
    /* Before the block's 10 s ran out (which the ARRAY above also says:
     * a block that runs out answers nil). */
    ASSERT(now_ms() - t0 < emq_test_ms(9000));
    emq__route_stats_get(r, &st);
    ASSERT_EQ_INT(st.redirects_moved, 1);
    ASSERT_EQ_INT(node_port(r), emq_srv_port(emq_cl_node(c, bto)));
    emq__route_destroy(r);

    emq_conf_destroy(conf);
    emq_cl_stop(c);
}

/* ---- migration under load, pipeline, TRYAGAIN ------------------------ */

typedef struct added {
    char ids[4000][48];
    int n;
} added;

/* One XADD and one XRANGE through the route; records the ID. */
static void add_and_read(emq__route *r, added *log) {
    char n[16];
    snprintf(n, sizeof n, "%d", log->n);
    emq_reply *rep = RCMD(r, "XADD", "{jobs}", "*", "n", n);
    ASSERT_NOT_ERROR(rep);
    size_t len;
    const char *id = emq_reply_str(rep, &len);
    ASSERT(id != NULL && len < 48);
    memcpy(log->ids[log->n], id, len);
    log->ids[log->n][len] = '\0';
    log->n++;
    emq_reply_free(rep);
    rep = RCMD(r, "XRANGE", "{jobs}", "-", "+", "COUNT", "1");
    ASSERT_NOT_ERROR(rep);
    ASSERT_EQ_SIZE(emq_reply_len(rep), 1);
    emq_reply_free(rep);
}

/* Every recorded ID is in the stream, in order, and nothing else. */
static void check_all(emq__route *r, const added *log, int extra) {
    emq_reply *rep = RCMD(r, "XRANGE", "{jobs}", "-", "+");
    ASSERT_NOT_ERROR(rep);
    ASSERT_EQ_SIZE(emq_reply_len(rep), (size_t)(log->n + extra));
    for (int i = 0; i < log->n; i++) {
        size_t len;
        const char *id =
            emq_reply_str(emq_reply_at(emq_reply_at(rep, (size_t)i), 0), &len);
        ASSERT_EQ_MEM(id, len, log->ids[i], strlen(log->ids[i]));
    }
    emq_reply_free(rep);
}

static added the_log;

TEST_TIMEOUT(cluster_migration_pipeline_tryagain, 45) {
    emq_cl *c = emq_cl_start(3, 0);
    unsigned slot = 9631;
    int from = emq_cl_owner(c, 0, slot);
    int to = emq_cl_other_master(c, from);
    emq_conf_t *conf = conf_node(c, 0);
    conf_set(conf, "cluster.retry_ms", "300");
    emq__route *r = route_ok(conf, "{jobs}");
    added *log = &the_log;
    log->n = 0;

    for (int i = 0; i < 50; i++)
        add_and_read(r, log);
    /* A second key in the slot, for TRYAGAIN below. */
    emq_reply *rep = RCMD(r, "SET", "{jobs}:other", "x");
    emq_reply_free(rep);

    emq_cl_migrate_begin(c, slot, from, to);
    for (int i = 0; i < 50; i++)
        add_and_read(r, log); /* the key is still on the source */
    emq__route_stats st;
    emq__route_stats_get(r, &st);
    ASSERT_EQ_INT(st.redirects_ask + st.redirects_moved, 0);

    /* Move only the stream: a command over both keys now gets TRYAGAIN
     * at the source, retried for cluster.retry_ms, then returned. */
    char port[16], out[256];
    snprintf(port, sizeof port, "%d", emq_srv_port(emq_cl_node(c, to)));
    ASSERT_EQ_INT(emq_srv_cmd(emq_cl_node(c, from), out, sizeof out, "MIGRATE",
                              "127.0.0.1", port, "{jobs}", "0", "5000", NULL),
                  '+');
    /* The route's bound is its own failure of that command alone
     * (EMQ_ELIMIT naming the property, the server's code kept), never a
     * made-up reply; a command pipelined behind it still gets its reply. */
    int64_t t0 = now_ms();
    const char *eval[] = {"EVAL", "return redis.call('XLEN', KEYS[1])", "2",
                          "{jobs}", "{jobs}:other"};
    const char *xlen[] = {"XLEN", "{jobs}"};
    emq_error bound;
    ASSERT_OK(emq__route_append(r, 5, eval, NULL, &bound), &bound);
    ASSERT_OK(emq__route_append(r, 2, xlen, NULL, &bound), &bound);
    rep = NULL;
    ASSERT_STATUS(emq__route_get_reply(r, &rep, &bound), EMQ_ELIMIT, &bound);
    ASSERT(rep == NULL);
    ASSERT_CONTAINS(bound.message, "cluster.retry_ms");
    ASSERT_CONTAINS(bound.message, "TRYAGAIN");
    ASSERT_EQ_STR(bound.reply_code, "TRYAGAIN");
    ASSERT_EQ_INT(bound.retriable, 1);
    ASSERT_EQ_INT(emq__route_is_broken(r), 0);
    ASSERT_EQ_INT(emq__route_only_this_failed(r, EMQ_ELIMIT), 1);
    ASSERT(now_ms() - t0 >= 250);
    ASSERT_OK(emq__route_get_reply(r, &rep, &bound), &bound);
    ASSERT_EQ_INT(reply_int(rep), log->n);
    emq__route_stats_get(r, &st);
    ASSERT(st.tryagain >= 1);
    ASSERT_EQ_INT(st.gave_up, 1);

    /* The stream moved: ASK sends each command to the target. */
    for (int i = 0; i < 50; i++)
        add_and_read(r, log);
    emq__route_stats_get(r, &st);
    ASSERT(st.redirects_ask >= 100);
    ASSERT_EQ_INT(st.redirects_moved, 0);

    emq_cl_migrate_keys(c, slot, from, to);
    emq_cl_migrate_finish(c, slot, from, to);
    for (int i = 0; i < 50; i++)
        add_and_read(r, log);
    emq__route_stats_get(r, &st);
    ASSERT_EQ_INT(st.redirects_moved, 1); /* then the route knows */
    ASSERT_EQ_INT(node_port(r), emq_srv_port(emq_cl_node(c, to)));
    check_all(r, log, 0);

    /* A pipeline of 100 XADDs sent to the owner, then the slot moves
     * before any reply is read: every command gets MOVED and is sent
     * again, in order. */
    int back = from;
    for (int i = 0; i < 100; i++) {
        char n[16];
        snprintf(n, sizeof n, "%d", log->n + i);
        const char *argv[] = {"XADD", "{jobs}", "*", "n", n};
        emq_error err;
        ASSERT_OK(emq__route_append(r, 5, argv, NULL, &err), &err);
    }
    ASSERT_EQ_SIZE(emq__route_pending(r), 100);
    /* The first reply read sends the batch; move the slot before it. */
    emq_cl_move_slot(c, slot, to, back);
    for (int i = 0; i < 100; i++) {
        emq_error err;
        ASSERT_OK(emq__route_get_reply(r, &rep, &err), &err);
        ASSERT_NOT_ERROR(rep);
        size_t len;
        const char *id = emq_reply_str(rep, &len);
        ASSERT(id != NULL && len < 48);
        memcpy(log->ids[log->n], id, len);
        log->ids[log->n][len] = '\0';
        log->n++;
        emq_reply_free(rep);
    }
    ASSERT_EQ_SIZE(emq__route_pending(r), 0);
    emq__route_stats_get(r, &st);
    ASSERT_EQ_INT(node_port(r), emq_srv_port(emq_cl_node(c, back)));
    ASSERT_EQ_INT(st.redirects_moved, 1 + 100);
    check_all(r, log, 0);
    /* The n fields are in append order too. */
    rep = RCMD(r, "XRANGE", "{jobs}", "-", "+");
    for (int i = 0; i < log->n; i++) {
        const emq_reply *fields = emq_reply_at(emq_reply_at(rep, (size_t)i), 1);
        char want[16], got[16];
        snprintf(want, sizeof want, "%d", i);
        ASSERT_EQ_STR(reply_text(emq_reply_at(fields, 1), got, sizeof got),
                      want);
    }
    emq_reply_free(rep);

    emq__route_destroy(r);
    emq_conf_destroy(conf);
    emq_cl_stop(c);
}

/* ---- failover --------------------------------------------------------- */

TEST_TIMEOUT(cluster_failover_reconnects_to_new_master, 45) {
    emq_cl *c = emq_cl_start(3, 1);
    unsigned slot = 9631;
    int old = emq_cl_owner(c, 0, slot);
    int rep_node = emq_cl_replica_of(c, old);
    ASSERT(rep_node >= 0);
    /* Seeded at the master that will die: reconnecting must find the
     * cluster through the other nodes it learned from the map. */
    emq_conf_t *conf = conf_node(c, old);
    emq__route *r = route_ok(conf, "{jobs}");
    ASSERT_EQ_INT(node_port(r), emq_srv_port(emq_cl_node(c, old)));
    for (int i = 0; i < 20; i++) {
        emq_reply *rep = RCMD(r, "XADD", "{jobs}", "*", "i", "x");
        emq_reply_free(rep);
    }
    emq_reply *rep = RCMD(r, "WAIT", "1", "2000");
    ASSERT_EQ_INT(reply_int(rep), 1);

    emq_cl_failover(c, rep_node, slot);
    emq_srv_kill9(emq_cl_node(c, old));

    /* The route's connection is to the dead node: the next command fails
     * as a transport failure, reconnect finds the new master. */
    int64_t t0 = now_ms();
    int done = 0;
    while (!done) {
        const char *argv[] = {"XADD", "{jobs}", "*", "i", "y"};
        emq_error err;
        memset(&err, 0, sizeof err);
        emq_status s = emq__route_command(r, 5, argv, NULL, &rep, &err);
        if (s == EMQ_OK) {
            ASSERT_NOT_ERROR(rep);
            emq_reply_free(rep);
            done = 1;
            break;
        }
        ASSERT_EQ_INT(err.retriable, 1);
        ASSERT_EQ_INT(emq__route_is_broken(r), 1);
        ASSERT_OK(emq__route_reconnect(r, &err), &err);
        if (now_ms() - t0 > emq_test_ms(15000))
            FAIL("no success within %d ms after the failover",
                 emq_test_ms(15000));
    }
    ASSERT_EQ_INT(node_port(r), emq_srv_port(emq_cl_node(c, rep_node)));
    ASSERT(emq__route_reconnects(r) >= 1);
    rep = RCMD(r, "XLEN", "{jobs}");
    ASSERT_EQ_INT(reply_int(rep), 21); /* nothing acknowledged was lost */
    emq__route_destroy(r);
    emq_conf_destroy(conf);
    emq_cl_stop(c);
}

/* ---- standalone ------------------------------------------------------- */

TEST(route_standalone_is_a_plain_connection) {
    emq_srv *s = emq_srv_start(NULL);
    emq_conf_t *conf = conf_for(emq_srv_url(s));
    conf_set(conf, P_RECONNECT_BASE, "20");
    emq__route *r = route_ok(conf, "{jobs}");
    ASSERT_EQ_INT(emq__route_is_cluster(r), 0);
    ASSERT(emq__route_fd(r) >= 0);
    emq_reply *rep = RCMD(r, "XADD", "{jobs}", "*", "a", "b");
    emq_reply_free(rep);
    for (int i = 0; i < 10; i++) {
        const char *argv[] = {"XADD", "{jobs}", "*", "a", "b"};
        ASSERT_OK(emq__route_append(r, 5, argv, NULL, NULL), NULL);
    }
    ASSERT_EQ_SIZE(emq__route_pending(r), 10);
    emq_error err;
    ASSERT_STATUS(emq__route_command(r, 1, (const char *const[]){"PING"}, NULL,
                                     &rep, &err),
                  EMQ_EINVAL, &err); /* a misuse, not a closed connection */
    for (int i = 0; i < 10; i++) {
        ASSERT_OK(emq__route_get_reply(r, &rep, &err), &err);
        emq_reply_free(rep);
    }
    rep = RCMD(r, "XLEN", "{jobs}");
    ASSERT_EQ_INT(reply_int(rep), 11);
    /* A restart breaks it; reconnect mends it. */
    emq_srv_kill9(s);
    emq_srv_restart(s);
    ASSERT(emq__route_command(r, 1, (const char *const[]){"PING"}, NULL, &rep,
                              &err) != EMQ_OK);
    ASSERT_EQ_INT(emq__route_is_broken(r), 1);
    ASSERT_OK(emq__route_reconnect(r, &err), &err);
    ASSERT_EQ_INT(emq__route_is_broken(r), 0);
    rep = RCMD(r, "PING");
    ASSERT_REPLY_TEXT(rep, EMQ_REPLY_STATUS, "PONG");
    emq_reply_free(rep);
    emq__route_destroy(r);
    emq_conf_destroy(conf);

    /* Over the unix socket too. */
    char url[600];
    snprintf(url, sizeof url, "unix://%s", emq_srv_socket(s));
    conf = conf_for(url);
    r = route_ok(conf, "q");
    ASSERT_EQ_INT(emq__route_is_cluster(r), 0);
    ASSERT_CONTAINS(emq__route_node(r), "unix:");
    rep = RCMD(r, "PING");
    emq_reply_free(rep);
    emq__route_destroy(r);
    emq_conf_destroy(conf);
    emq_srv_stop(s);
}
