/* SPDX-License-Identifier: BSD-3-Clause */
/* redirect_helpers.h: a Redis Cluster in flux, played by intercepting
 * proxies in front of one real redis-server.
 *
 * A redirecting proxy refuses CLUSTER (so a route learns the cluster from
 * MOVED replies alone, as under an ACL without CLUSTER) and answers the
 * matching commands with a MOVED to another loopback port, typically the
 * next proxy of a chain: with cluster.max_redirects N, a chain of N + 1
 * proxies makes the route reach its bound. The proxied server still runs
 * each command (the proxy replaces only its reply).
 */
#ifndef EMQ_TEST_REDIRECT_HELPERS_H
#define EMQ_TEST_REDIRECT_HELPERS_H

#include "harness/fakepeer.h"
#include "harness/server.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Starts the proxy to s: command (with last_arg_gt as in emq_icept_rule)
 * answered "-MOVED 1 127.0.0.1:<to_port>" times times (-1: always). At
 * most 8 proxies per test process (their reply texts are static). */
static inline emq_icept *redirecting_proxy(emq_srv *s, const char *command,
                                           int last_arg_gt, int times,
                                           int to_port) {
    static char moved[8][64];
    static int used;
    char *text = moved[used++ % 8];
    snprintf(text, sizeof moved[0], "-MOVED 1 127.0.0.1:%d\r\n", to_port);
    static const char noperm[] =
        "-NOPERM this user has no permissions to run the 'cluster' "
        "command\r\n";
    emq_icept_rule rules[] = {{"CLUSTER", -1, noperm, 0, -1, NULL, 0},
                              {command, last_arg_gt, text, 0, times, NULL, 0}};
    return emq_icept_start(emq_srv_port(s), rules, 2);
}

/* The port of a "redis://host:PORT" URL. */
static inline int url_port(const char *url) {
    return atoi(strrchr(url, ':') + 1);
}

#endif /* EMQ_TEST_REDIRECT_HELPERS_H */
