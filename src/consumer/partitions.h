/* SPDX-License-Identifier: BSD-3-Clause */
/* partitions.h: a topic's consumer, one consumer per partition
 * (partitions.c). */
#ifndef EMQ_CONSUMER_PARTITIONS_H
#define EMQ_CONSUMER_PARTITIONS_H

#include "core.h"

/* Makes topic consumer c's partitions (c->conf has partitions P > 1),
 * with c's handlers, into c->parts. On failure the ones made stay in
 * c->parts (c->nparts) for emq__consumer_free. */
emq_status emq__consumer_topic_open(emq_consumer_t *c, emq_error *err);
/* Runs every partition on a thread of its own until all have returned;
 * the first fatal error stops the others and is returned. */
emq_status emq__consumer_topic_run(emq_consumer_t *c, emq_error *err);
/* The consumer whose table holds entry: a topic's partition by the
 * entry's stream, or c. NULL with err set (EMQ_EINVAL) when it names
 * another stream, or none on a topic. */
emq_consumer_t *emq__consumer_owner(emq_consumer_t *c, const emq_entry *entry,
                                    emq_error *err);

#endif /* EMQ_CONSUMER_PARTITIONS_H */
