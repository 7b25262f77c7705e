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

TEST(route_map_fetch_while_loading_is_retriable) {
    emq_srv *s = emq_srv_start(NULL);
    static const char loading[] =
        "-LOADING Redis is loading the dataset in memory\r\n";
    emq_icept_rule rule = {"CLUSTER", -1, loading, 0, -1, NULL};
    emq_icept *p = emq_icept_start(emq_srv_port(s), &rule, 1);
    emq_conf_t *conf = emq_conf_new();
    emq_error err;
    ASSERT_OK(emq_conf_set(conf, "url", emq_icept_url(p), &err), &err);
    emq_route *r = NULL;
    emq_status st = emq_route_new(conf, "{jobs}", &r, &err);
    ASSERT_STATUS(st, EMQ_EIO, &err);
    ASSERT(err.retriable);
    ASSERT_CONTAINS(err.message, "LOADING");
    ASSERT(r == NULL);
    ASSERT(emq_icept_replaced(p) >= 1);
    emq_conf_destroy(conf);
    emq_icept_stop(p);
    emq_srv_stop(s);
}
