/* SPDX-License-Identifier: BSD-3-Clause */
/* partition.c: the names and configurations of a partitioned topic's
 * partitions, and the partition of a message key.
 *
 * A topic is not a new kind of key: partition i of topic "orders" is the
 * ordinary queue "orders.i", with its own hashtag {orders.i}, so every
 * layer that works on one queue works on one partition unchanged, and
 * the layers above (producer, consumer, admin) hold one handle per
 * partition. The partition-count record's key is named here; reading and
 * writing it is the streams layer's (streams/topicrecord.c).
 */
#include "keys.h"

#include "../cluster/cluster.h" /* emq__cluster_crc16 */
#include "../conn/conf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int emq__topic_is(const emq_conf_t *conf) {
    return conf != NULL && emq__cfg_partitions(conf) > 1;
}

/* Writes "<topic>.<i>" into buf (EMQ_KEYS_MAX_QUEUE + 16 bytes). */
static void partition_name(const char *topic, int i, char *buf, size_t size) {
    snprintf(buf, size, "%s.%d", topic, i);
}

emq_status emq__topic_check(const emq_conf_t *conf, emq_error *err) {
    if (emq__cfg_stream(conf) != NULL)
        return emq__error_set(err, EMQ_EINVAL, 0,
                              "partitions %lld needs queue (a topic name), "
                              "not stream: a raw stream key cannot be split "
                              "into partitions",
                              (long long)emq__cfg_partitions(conf));
    if (emq__cfg_queue(conf) == NULL)
        return emq__error_set(err, EMQ_EINVAL, 0,
                              "queue is required: with partitions > 1 it "
                              "names the topic");
    /* The longest partition name must be a valid queue name. */
    char name[EMQ_KEYS_MAX_QUEUE + 16];
    partition_name(emq__cfg_queue(conf), (int)emq__cfg_partitions(conf) - 1,
                   name, sizeof name);
    emq__keys keys;
    emq_status st = emq__keys_for_queue(name, &keys, err);
    if (st != EMQ_OK) {
        emq__error_prefix(err, "topic '%.*s' of %lld partitions", 64,
                          emq__cfg_queue(conf),
                          (long long)emq__cfg_partitions(conf));
        return st;
    }
    emq__keys_free(&keys);
    return EMQ_OK;
}

emq_status emq__topic_partition_conf(const emq_conf_t *conf, int i,
                                     emq_conf_t **out, emq_error *err) {
    *out = NULL;
    char name[EMQ_KEYS_MAX_QUEUE + 16];
    partition_name(emq__cfg_queue(conf), i, name, sizeof name);
    emq_conf_t *c = emq_conf_dup(conf);
    if (c == NULL)
        return emq__oom(err);
    emq_status st = emq_conf_set(c, "queue", name, err);
    if (st == EMQ_OK)
        st = emq_conf_set(c, "partitions", "1", err);
    emq__conf_set_topic_partitions(c, emq__cfg_partitions(conf));
    if (st != EMQ_OK) {
        emq_conf_destroy(c);
        return st;
    }
    *out = c;
    return EMQ_OK;
}

emq_status emq__topic_open_parts(const emq_conf_t *conf, int from, int to,
                                 emq__topic_open_fn open, void *ctx,
                                 emq_error *err) {
    for (int i = from; i < to; i++) {
        emq_conf_t *part;
        emq_status st = emq__topic_partition_conf(conf, i, &part, err);
        if (st == EMQ_OK) {
            st = open(i, part, ctx, err);
            emq_conf_destroy(part);
        }
        if (st != EMQ_OK) {
            emq__topic_error_prefix(err, conf, (size_t)i);
            return st;
        }
    }
    return EMQ_OK;
}

void emq__topic_error_prefix(emq_error *err, const emq_conf_t *conf, size_t i) {
    emq__error_prefix(err, "partition %zu (emq:{%s.%zu})", i,
                      emq__cfg_queue(conf), i);
}

unsigned emq__topic_key_partition(const char *key, size_t len,
                                  unsigned nparts) {
    if (nparts <= 1)
        return 0;
    return (unsigned)emq__cluster_crc16(key, len) % nparts;
}

/* ---- the partition count in the server ---------------------------------- */

char *emq__topic_record_key(const char *partition_queue) {
    emq__keys keys;
    if (emq__keys_for_queue(partition_queue, &keys, NULL) != EMQ_OK)
        return NULL;
    char *key = emq__keys_join(&keys, "topic", NULL);
    emq__keys_free(&keys);
    return key;
}
