/* SPDX-License-Identifier: BSD-3-Clause */
/* test_route_loading.c: a server still loading its data when a route asks
 * it for the slot map.
 *
 * A real redis-server behind the intercepting proxy, which answers CLUSTER
 * SHARDS and CLUSTER SLOTS with the LOADING error a restarting server
 * gives. The route must fail as a passing, retriable transport condition
 * (EMQ_EIO, retriable), never as a fatal error reply: a consumer or a
 * supervisor then tries again (chaos seed 7002 lost a worker to this).
 */
#include "cluster/cluster.h"
#include "harness/fakepeer.h"
#include "harness/server.h"
#include "integ/conn_helpers.h"
#include "integ/redirect_helpers.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

TEST(route_map_fetch_while_loading_is_retriable) {
    emq_srv *s = emq_srv_start(NULL);
    static const char loading[] =
        "-LOADING Redis is loading the dataset in memory\r\n";
    emq_icept_rule rule = {"CLUSTER", -1, loading, 0, -1, NULL, 0};
    emq_icept *p = emq_icept_start(emq_srv_port(s), &rule, 1);
    emq_conf_t *conf = emq_conf_new();
    emq_error err;
    ASSERT_OK(emq_conf_set(conf, "url", emq_icept_url(p), &err), &err);
    emq__route *r = NULL;
    emq_status st = emq__route_new(conf, "{jobs}", &r, &err);
    ASSERT_STATUS(st, EMQ_EIO, &err);
    ASSERT(err.retriable);
    ASSERT_CONTAINS(err.message, "LOADING");
    ASSERT_EQ_STR(err.reply_code, "LOADING");
    ASSERT(r == NULL);
    ASSERT(emq_icept_replaced(p) >= 1);
    emq_conf_destroy(conf);
    emq_icept_stop(p);
    emq_srv_stop(s);
}

/* A chain of nodes that each redirect elsewhere: the route follows
 * cluster.max_redirects of them, then fails that command alone with its
 * own EMQ_ELIMIT naming the property (the last reply's code kept), never a
 * reply the server did not send; the route stays in step and usable. */
TEST(route_redirect_bound_is_its_own_failure) {
    emq_srv *s = emq_srv_start(NULL);
    emq_icept *last = redirecting_proxy(s, "GET", -1, -1, emq_srv_port(s));
    emq_icept *middle =
        redirecting_proxy(s, "GET", -1, -1, url_port(emq_icept_url(last)));
    emq_icept *seed =
        redirecting_proxy(s, "GET", -1, -1, url_port(emq_icept_url(middle)));
    emq_conf_t *conf = emq_conf_new();
    emq_error err;
    ASSERT_OK(emq_conf_set(conf, "url", emq_icept_url(seed), &err), &err);
    ASSERT_OK(emq_conf_set(conf, "cluster.max_redirects", "2", &err), &err);
    emq__route *r = NULL;
    ASSERT_OK(emq__route_new(conf, "{jobs}", &r, &err), &err);
    ASSERT_EQ_INT(emq__route_is_cluster(r), 1);

    const char *get[] = {"GET", "{jobs}"};
    const char *ping[] = {"PING"};
    ASSERT_OK(emq__route_append(r, 2, get, NULL, &err), &err);
    ASSERT_OK(emq__route_append(r, 1, ping, NULL, &err), &err);
    emq_reply *rep = NULL;
    ASSERT_STATUS(emq__route_get_reply(r, &rep, &err), EMQ_ELIMIT, &err);
    ASSERT(rep == NULL);
    ASSERT_CONTAINS(err.message, "2 redirections");
    ASSERT_CONTAINS(err.message, "cluster.max_redirects");
    ASSERT_CONTAINS(err.message, "MOVED 1 127.0.0.1:");
    ASSERT_EQ_STR(err.reply_code, "MOVED");
    ASSERT_EQ_INT(err.retriable, 0);
    ASSERT_EQ_INT(emq__route_only_this_failed(r, EMQ_ELIMIT), 1);
    /* The command behind it still gets its own reply. */
    ASSERT_OK(emq__route_get_reply(r, &rep, &err), &err);
    ASSERT_EQ_INT(emq_reply_kind(rep), EMQ_REPLY_STATUS);
    emq_reply_free(rep);
    emq__route_stats st;
    emq__route_stats_get(r, &st);
    ASSERT_EQ_INT(st.redirects_moved, 2);
    ASSERT_EQ_INT(st.gave_up, 1);
    /* And emq__route_command says the same for a command alone. */
    ASSERT_STATUS(emq__route_command(r, 2, get, NULL, &rep, &err), EMQ_ELIMIT,
                  &err);
    ASSERT(rep == NULL);
    ASSERT_EQ_INT(emq__route_is_broken(r), 0);
    ASSERT(emq_icept_replaced(last) >= 1);

    emq__route_destroy(r);
    emq_conf_destroy(conf);
    emq_icept_stop(seed);
    emq_icept_stop(middle);
    emq_icept_stop(last);
    emq_srv_stop(s);
}
