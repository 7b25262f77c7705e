/* SPDX-License-Identifier: BSD-3-Clause */
/* test_cluster_trust.c: what a cluster node may make the client do.
 *
 * A node names other nodes (CLUSTER SLOTS, MOVED, ASK) and the route
 * follows them with the seed's credentials and TLS settings. An address
 * is data: a hostile node that names one carrying URL text (a query
 * that switches TLS verification off, a user, a path) is refused, and
 * cluster.allowed_hosts limits where the client may be sent at all. A
 * real redis-server sits behind an intercepting proxy that plays the
 * hostile node; a listener that never answers captures every connection
 * the client makes to the address the node named.
 */
#include "cluster/cluster.h"
#include "harness/fakepeer.h"
#include "harness/server.h"
#include "harness/test.h"
#include "integ/redirect_helpers.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Host texts a node could name, each followed by ":<listener port>". */
static const char *const hostile_hosts[] = {
    "127.0.0.1:%d?tls.verify=none&tls.sni=x",
    "[::1]:%d?tls.verify=none&tls.sni=x]",
    "u:pw@127.0.0.1",
    "127.0.0.1/0",
    "127.0.0.1?tls.ca_file=/tmp/evil.pem",
    "127.0.0.1 x",
    "localhost#m",
};
#define NHOSTILE (sizeof hostile_hosts / sizeof hostile_hosts[0])

static emq_conf_t *conf_for(const char *url, const char *allowed) {
    emq_conf_t *conf = emq_conf_new();
    emq_error err;
    ASSERT_OK(emq_conf_set(conf, "url", url, &err), &err);
    ASSERT_OK(emq_conf_set(conf, "command_timeout_ms", "2000", &err), &err);
    if (allowed)
        ASSERT_OK(emq_conf_set(conf, "cluster.allowed_hosts", allowed, &err),
                  &err);
    return conf;
}

/* GET through a route whose node answers it with "-MOVED 1 <target>":
 * returns the call's status, err filled. */
static emq_status get_redirected(emq_srv *s, const char *target,
                                 const char *allowed, emq_error *err) {
    char moved[512];
    snprintf(moved, sizeof moved, "-MOVED 1 %s\r\n", target);
    static const char noperm[] =
        "-NOPERM this user has no permissions to run the 'cluster' "
        "command\r\n";
    emq_icept_rule rules[] = {{"CLUSTER", -1, noperm, 0, -1, NULL, 0},
                              {"GET", -1, moved, 0, 1, NULL, 0}};
    emq_icept *p = emq_icept_start(emq_srv_port(s), rules, 2);
    emq_conf_t *conf = conf_for(emq_icept_url(p), allowed);
    emq__route *r = NULL;
    ASSERT_OK(emq__route_new(conf, "{jobs}", &r, err), err);
    const char *get[] = {"GET", "{jobs}"};
    emq_reply *rep = NULL;
    emq_status st = emq__route_command(r, 2, get, NULL, &rep, err);
    ASSERT(st == EMQ_OK || rep == NULL);
    emq_reply_free(rep);
    ASSERT(emq_icept_replaced(p) >= 2); /* CLUSTER, then the GET */
    emq__route_destroy(r);
    emq_conf_destroy(conf);
    emq_icept_stop(p);
    return st;
}

/* A listener that accepts and never answers: it counts every connection
 * made to the address a node named. */
static emq_peer *capturing_listener(void) {
    emq_peer_opts o = {.mode = EMQ_PEER_SILENT};
    return emq_peer_start(&o);
}

TEST(cluster_redirect_addresses_never_carry_settings) {
    emq_srv *s = emq_srv_start(NULL);
    emq_peer *listener = capturing_listener();
    int lport = emq_peer_port(listener);
    for (size_t i = 0; i < NHOSTILE; i++) {
        char host[256], target[300];
        snprintf(host, sizeof host, hostile_hosts[i], lport);
        snprintf(target, sizeof target, "%s:%d", host, lport);
        emq_error err;
        ASSERT_STATUS(get_redirected(s, target, NULL, &err), EMQ_EPROTO, &err);
        ASSERT_CONTAINS(err.message, "not a host name");
        ASSERT_EQ_INT(emq_peer_accepted(listener), 0);
    }
    /* The listener does capture a redirect it may follow: the refusals
     * above are not for want of a way to see a connection. */
    char plain[64];
    snprintf(plain, sizeof plain, "127.0.0.1:%d", lport);
    emq_error err;
    ASSERT(get_redirected(s, plain, NULL, &err) != EMQ_OK);
    ASSERT_EQ_INT(emq_peer_accepted(listener), 1);
    emq_peer_stop(listener);
    emq_srv_stop(s);
}

TEST(cluster_slot_map_addresses_never_carry_settings) {
    emq_srv *s = emq_srv_start(NULL);
    emq_peer *listener = capturing_listener();
    int lport = emq_peer_port(listener);
    static const char no_shards[] = "-ERR unknown subcommand 'SHARDS'\r\n";
    for (size_t i = 0; i < NHOSTILE; i++) {
        char host[256], slots[512];
        snprintf(host, sizeof host, hostile_hosts[i], lport);
        snprintf(slots, sizeof slots,
                 "*1\r\n*3\r\n:0\r\n:16383\r\n*2\r\n$%zu\r\n%s\r\n:%d\r\n",
                 strlen(host), host, lport);
        emq_icept_rule rules[] = {
            {"CLUSTER", -1, no_shards, 0, -1, "SHARDS", 0},
            {"CLUSTER", -1, slots, 0, -1, "SLOTS", 0}};
        emq_icept *p = emq_icept_start(emq_srv_port(s), rules, 2);
        emq_conf_t *conf = conf_for(emq_icept_url(p), NULL);
        emq__route *r = NULL;
        emq_error err;
        ASSERT_STATUS(emq__route_new(conf, "{jobs}", &r, &err), EMQ_EPROTO,
                      &err);
        ASSERT(r == NULL);
        ASSERT_CONTAINS(err.message, "not a host name");
        /* SLOTS at least (6.2 is asked SLOTS alone, never SHARDS). */
        ASSERT(emq_icept_replaced(p) >= 1);
        ASSERT_EQ_INT(emq_peer_accepted(listener), 0);
        emq_conf_destroy(conf);
        emq_icept_stop(p);
    }
    emq_peer_stop(listener);
    emq_srv_stop(s);
}

/* cluster.allowed_hosts: a node outside the patterns is never connected
 * to, and its command fails alone; one inside is followed. */
TEST(cluster_allowed_hosts_bound_where_credentials_go) {
    emq_srv *s = emq_srv_start(NULL);
    emq_peer *listener = capturing_listener();
    char target[64];
    snprintf(target, sizeof target, "127.0.0.1:%d", emq_peer_port(listener));
    emq_error err;
    ASSERT_STATUS(get_redirected(s, target, "10.*,localhost", &err), EMQ_EPROTO,
                  &err);
    ASSERT_CONTAINS(err.message, "cluster.allowed_hosts");
    ASSERT_CONTAINS(err.message, target);
    ASSERT_EQ_INT(emq_peer_accepted(listener), 0);
    /* The real server, inside the patterns: followed, and answered. */
    snprintf(target, sizeof target, "127.0.0.1:%d", emq_srv_port(s));
    ASSERT_OK(get_redirected(s, target, "10.*,127.0.0.?", &err), &err);
    emq_peer_stop(listener);
    emq_srv_stop(s);
}
