/* SPDX-License-Identifier: BSD-3-Clause */
/* cluster_helpers.h: confs for the tests on a real Redis Cluster
 * (harness/cluster.h): a queue or topic reached through one node, and a
 * consumer's settings.
 */
#ifndef EMQ_TEST_CLUSTER_HELPERS_H
#define EMQ_TEST_CLUSTER_HELPERS_H

#include "harness/cluster.h"
#include "integ/conn_helpers.h"

/* A conf for queue (or topic) through cluster node i, with a short
 * reconnect backoff. The caller destroys it. */
static inline emq_conf_t *node_conf(emq_cl *c, int i, const char *queue) {
    emq_conf_t *conf = conf_for(emq_srv_url(emq_cl_node(c, i)));
    conf_set(conf, "queue", queue);
    conf_set(conf, P_RECONNECT_BASE, "50");
    conf_set(conf, P_RECONNECT_MAX, "500");
    conf_set(conf, P_RECONNECT_ATTEMPTS, "40");
    return conf;
}

/* A consumer of group, named name, from the head, blocking block_ms. */
static inline void consumer_settings(emq_conf_t *conf, const char *group,
                                     const char *name, const char *block_ms) {
    conf_set(conf, "group", group);
    conf_set(conf, "consumer", name);
    conf_set(conf, "start", "head");
    conf_set(conf, "block_ms", block_ms);
    conf_set(conf, "lease.ttl_ms", "8000");
    conf_set(conf, "claim.interval_ms", "500");
}

#endif /* EMQ_TEST_CLUSTER_HELPERS_H */
