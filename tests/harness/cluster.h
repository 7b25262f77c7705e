/* SPDX-License-Identifier: BSD-3-Clause */
/* cluster.h: a private Redis Cluster per test, on loopback, by pid.
 *
 * emq_cl_start() starts masters (and replicas per master) as fixture
 * servers (server.h) with cluster-enabled yes and a cluster bus on a free
 * loopback port, joins them with `redis-cli --cluster create ...
 * --cluster-yes`, and waits (bounded) until every node reports
 * cluster_state:ok and every replica's link to its master is up. Nodes are
 * numbered 0.. in creation order: redis-cli makes the first `masters`
 * nodes masters. Helpers drive slot migrations step by step (SETSLOT
 * IMPORTING/MIGRATING, MIGRATE, SETSLOT NODE) and failovers, with the
 * fixture's raw client over each node's admin socket, never the library.
 * emq_cl_stop() stops every node by pid.
 */
#ifndef EMQ_TEST_CLUSTER_H
#define EMQ_TEST_CLUSTER_H

#include "harness/server.h"

#define EMQ_CL_MAX_NODES 12

typedef struct emq_cl emq_cl;

/* Starts masters + masters*replicas nodes and creates the cluster. Fails
 * the test (with redis-cli's output) when it does not come up in time. */
emq_cl *emq_cl_start(int masters, int replicas);
/* Stops every node still running (SIGTERM, then SIGKILL) and frees. */
void emq_cl_stop(emq_cl *c);

int emq_cl_count(const emq_cl *c);
/* Node i (0-based); borrowed. */
emq_srv *emq_cl_node(emq_cl *c, int i);
/* Node i's cluster id (40 hex characters); borrowed. */
const char *emq_cl_id(const emq_cl *c, int i);
/* The node whose port is port, or -1. */
int emq_cl_by_port(const emq_cl *c, int port);
/* The index of the master serving slot, as node `ask` sees it (CLUSTER
 * NODES); -1 when none. */
int emq_cl_owner(emq_cl *c, int ask, unsigned slot);
/* A master other than `not`, that is alive. */
int emq_cl_other_master(emq_cl *c, int not_this);
/* The replica of master m, or -1. */
int emq_cl_replica_of(emq_cl *c, int m);

/* Slot migration, step by step (any order of calls in between):
 * begin: IMPORTING on `to`, MIGRATING on `from`; keys: MIGRATE every key
 * of the slot from `from` to `to`; finish: SETSLOT NODE `to` on `to`,
 * `from` and every other live master. move: all three. */
void emq_cl_migrate_begin(emq_cl *c, unsigned slot, int from, int to);
void emq_cl_migrate_keys(emq_cl *c, unsigned slot, int from, int to);
void emq_cl_migrate_finish(emq_cl *c, unsigned slot, int from, int to);
void emq_cl_move_slot(emq_cl *c, unsigned slot, int from, int to);

/* CLUSTER FAILOVER on replica r; waits (bounded) until r is a master and
 * every live node lists it as the owner of slot. */
void emq_cl_failover(emq_cl *c, int r, unsigned slot);
/* Waits until every live node says cluster_state:ok (bounded). */
void emq_cl_wait_ok(emq_cl *c, int timeout_ms);

#endif /* EMQ_TEST_CLUSTER_H */
