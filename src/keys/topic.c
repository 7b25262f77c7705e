/* topic.c: the names and configurations of a partitioned topic's
 * partitions, and the partition of a message key.
 *
 * A topic is not a new kind of key: partition i of topic "orders" is the
 * ordinary queue "orders.i", with its own hashtag {orders.i}, so every
 * layer that works on one queue works on one partition unchanged, and
 * the layers above (producer, consumer, admin) hold one handle per
 * partition. Nothing here talks to the server.
 */
#include "keys.h"

#include "../conn/conf.h"

#include <stdio.h>
#include <string.h>

int emq_topic_is(const emq_conf_t *conf) {
    return conf != NULL && conf->partitions > 1;
}

/* Writes "<topic>.<i>" into buf (EMQ_KEYS_MAX_QUEUE + 16 bytes). */
static void partition_name(const char *topic, int i, char *buf,
                           size_t size) {
    snprintf(buf, size, "%s.%d", topic, i);
}

emq_status emq_topic_check(const emq_conf_t *conf, emq_error *err) {
    if (conf->stream != NULL)
        return emq_error_set(err, EMQ_EINVAL, 0,
                             "partitions %lld needs queue (a topic name), "
                             "not stream: a raw stream key cannot be split "
                             "into partitions",
                             (long long)conf->partitions);
    if (conf->queue == NULL)
        return emq_error_set(err, EMQ_EINVAL, 0,
                             "queue is required: with partitions > 1 it "
                             "names the topic");
    /* The longest partition name must be a valid queue name. */
    char name[EMQ_KEYS_MAX_QUEUE + 16];
    partition_name(conf->queue, (int)conf->partitions - 1, name, sizeof name);
    emq_keys keys;
    emq_status st = emq_keys_for_queue(name, &keys, err);
    if (st != EMQ_OK) {
        emq_error_prefix(err, "topic '%.*s' of %lld partitions", 64,
                         conf->queue, (long long)conf->partitions);
        return st;
    }
    emq_keys_free(&keys);
    return EMQ_OK;
}

emq_status emq_topic_partition_conf(const emq_conf_t *conf, int i,
                                    emq_conf_t **out, emq_error *err) {
    *out = NULL;
    char name[EMQ_KEYS_MAX_QUEUE + 16];
    partition_name(conf->queue, i, name, sizeof name);
    emq_conf_t *c = emq_conf_dup(conf);
    if (c == NULL)
        return emq_error_set(err, EMQ_ENOMEM, 0, "out of memory");
    emq_status st = emq_conf_set(c, "queue", name, err);
    if (st == EMQ_OK)
        st = emq_conf_set(c, "partitions", "1", err);
    if (st != EMQ_OK) {
        emq_conf_destroy(c);
        return st;
    }
    *out = c;
    return EMQ_OK;
}

unsigned emq_topic_key_partition(const char *key, size_t len,
                                 unsigned nparts) {
    if (nparts <= 1)
        return 0;
    return (unsigned)emq_cluster_crc16(key, len) % nparts;
}
