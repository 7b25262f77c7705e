/* SPDX-License-Identifier: BSD-3-Clause */
/* sentinel_helpers.h: a primary, two replicas and three Sentinels
 * (redis-server --sentinel, the server binary under test) on loopback,
 * started and stopped by pid, for the Sentinel tests: the fixture, where
 * the Sentinels say the primary is, and a requested failover waited out.
 */
#ifndef EMQ_TEST_SENTINEL_HELPERS_H
#define EMQ_TEST_SENTINEL_HELPERS_H

#include "harness/fakepeer.h"
#include "integ/cli_helpers.h"
#include "integ/ownership_helpers.h"

#define MASTER "mymaster"

typedef struct ha {
    emq_srv *node[3]; /* node[0] the first primary, then two replicas */
    emq_srv *sentinel[3];
    char url[256];
} ha;

/* What a Sentinel says the primary's port is (0: unknown). */
static inline int primary_port(const emq_srv *sentinel) {
    char out[256];
    if (emq_srv_cmd(sentinel, out, sizeof out, "SENTINEL",
                    "get-master-addr-by-name", MASTER, NULL) != '*')
        return 0;
    const char *nl = strchr(out, '\n');
    return nl ? atoi(nl + 1) : 0;
}

/* How many of kind ("replicas", "sentinels") a Sentinel knows. */
static inline int known(const emq_srv *sentinel, const char *kind) {
    static char out[16384];
    if (emq_srv_cmd(sentinel, out, sizeof out, "SENTINEL", kind, MASTER,
                    NULL) != '*')
        return -1;
    int n = 0;
    for (const char *at = out; (at = strstr(at, "\nname\n")) != NULL; at++)
        n++;
    return n + (strncmp(out, "name\n", 5) == 0);
}

static inline int all_know_each_other(const ha *h) {
    for (int i = 0; i < 3; i++)
        if (known(h->sentinel[i], "replicas") < 2 ||
            known(h->sentinel[i], "sentinels") < 2)
            return 0;
    return 1;
}

static inline void ha_start(ha *h) {
    for (int i = 0; i < 3; i++)
        h->node[i] = emq_srv_start(NULL);
    for (int i = 1; i < 3; i++)
        replica_follow(h->node[i], h->node[0]);
    char config[512];
    snprintf(config, sizeof config,
             "sentinel monitor " MASTER " 127.0.0.1 %d 2\n"
             "sentinel down-after-milliseconds " MASTER " 1000\n"
             "sentinel failover-timeout " MASTER " 5000\n"
             "sentinel parallel-syncs " MASTER " 2\n",
             emq_srv_port(h->node[0]));
    emq_srv_opts o = {.sentinel = 1, .extra_config = config};
    for (int i = 0; i < 3; i++)
        h->sentinel[i] = emq_srv_start(&o);
    snprintf(h->url, sizeof h->url,
             "redis-sentinel://127.0.0.1:%d,127.0.0.1:%d,127.0.0.1:%d#" MASTER,
             emq_srv_port(h->sentinel[0]), emq_srv_port(h->sentinel[1]),
             emq_srv_port(h->sentinel[2]));
    /* Sentinels find each other through the primary (hello messages
     * every 2 s) and the replicas through its INFO. */
    WAIT_UNTIL(all_know_each_other(h), 30000,
               "the Sentinels to know the replicas and each other");
}

static inline void ha_stop(ha *h) {
    for (int i = 0; i < 3; i++)
        emq_srv_stop(h->sentinel[i]);
    for (int i = 0; i < 3; i++)
        emq_srv_stop(h->node[i]);
}

/* The node serving port. */
static inline emq_srv *node_at(const ha *h, int port) {
    for (int i = 0; i < 3; i++)
        if (emq_srv_port(h->node[i]) == port)
            return h->node[i];
    FAIL("no node listens on port %d", port);
    return NULL;
}

/* 1 when a Sentinel's flags for the master are "master" alone: no
 * failover under way (its address may name the promoted replica before
 * the switch is announced, +switch-master). */
static inline int settled(const emq_srv *sentinel) {
    static char out[16384];
    if (emq_srv_cmd(sentinel, out, sizeof out, "SENTINEL", "master", MASTER,
                    NULL) != '*')
        return 0;
    const char *at = strstr(out, "flags\n");
    return at != NULL && strncmp(at + 6, "master\n", 7) == 0;
}

/* Asks the Sentinels for a failover and waits until every one names a
 * new primary that says ROLE master and the leader has ended its
 * failover. Returns it. A Sentinel names the promoted replica while it is
 * still reconfiguring the others, and never ends a failover whose
 * promoted replica went down (sentinelFailoverDetectEnd): the next fault
 * waits for the end, or the leader would stay stuck, leaving two
 * Sentinels of three short of a quorum (seen on Redis 6.2, whose
 * reconfiguration takes seconds). */
static inline emq_srv *fail_over(const ha *h) {
    int before = primary_port(h->sentinel[0]);
    char out[256];
    WAIT_UNTIL(emq_srv_cmd(h->sentinel[0], out, sizeof out, "SENTINEL",
                           "FAILOVER", MASTER, NULL) == '+',
               10000, "a Sentinel to accept SENTINEL FAILOVER");
    WAIT_UNTIL(primary_port(h->sentinel[0]) != before &&
                   primary_port(h->sentinel[1]) ==
                       primary_port(h->sentinel[0]) &&
                   primary_port(h->sentinel[2]) == primary_port(h->sentinel[0]),
               30000, "every Sentinel to name the new primary");
    WAIT_UNTIL(settled(h->sentinel[0]) && settled(h->sentinel[1]) &&
                   settled(h->sentinel[2]),
               30000, "every Sentinel to end the failover");
    emq_srv *now = node_at(h, primary_port(h->sentinel[0]));
    WAIT_UNTIL((emq_srv_cmd(now, out, sizeof out, "ROLE", NULL) == '*' &&
                strncmp(out, "master", 6) == 0),
               10000, "the new primary to say ROLE master");
    return now;
}

static inline emq_conf_t *ha_conf(const ha *h) {
    emq_conf_t *conf = conf_for(h->url);
    conf_set(conf, "queue", "ha");
    conf_set(conf, P_RECONNECT_BASE, "50");
    conf_set(conf, P_RECONNECT_MAX, "500");
    return conf;
}

/* ha_conf for a consumer: group "g", consumer "w1", from the head,
 * block_ms block_ms. */
static inline emq_conf_t *ha_consumer_conf(const ha *h, const char *block_ms) {
    emq_conf_t *conf = ha_conf(h);
    conf_set(conf, "group", "g");
    conf_set(conf, "consumer", "w1");
    conf_set(conf, "start", "head");
    conf_set(conf, "block_ms", block_ms);
    return conf;
}

/* Starts a fake Sentinel (fakepeer.h) of MASTER naming 127.0.0.1:
 * primary_port, the other fields of po as given, and writes its
 * redis-sentinel:// URL (size bytes) into url. */
static inline emq_peer *fake_sentinel(emq_peer_opts po, int primary_port,
                                      char *url, size_t size) {
    po.mode = EMQ_PEER_SENTINEL;
    po.sentinel_master = MASTER;
    po.primary_port = primary_port;
    emq_peer *p = emq_peer_start(&po);
    snprintf(url, size, "redis-sentinel://127.0.0.1:%d#" MASTER,
             emq_peer_port(p));
    return p;
}

static inline long long stream_len(const emq_srv *s) {
    char out[64];
    emq_srv_cmd(s, out, sizeof out, "XLEN", "emq:{ha}", NULL);
    return strtoll(out, NULL, 10);
}

#endif /* EMQ_TEST_SENTINEL_HELPERS_H */
