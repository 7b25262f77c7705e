/* SPDX-License-Identifier: BSD-3-Clause */
/* consumer_new.c: emq_consumer_new and emq_consumer_new_batch, a queue's
 * consumer (consumer.c) or a topic's with its partitions (partitions.c).
 */
#include "consumer.h"
#include "partitions.h"

/* A queue's consumer, or a topic's with its partitions. */
static emq_status make(const emq_conf_t *conf, emq_handler_fn handler,
                       emq_batch_handler_fn batch_handler, void *opaque,
                       emq_consumer_t **out, emq_error *err) {
    emq_status st =
        emq__consumer_make(conf, handler, batch_handler, opaque, out, err);
    if (st == EMQ_OK && emq__topic_is(conf) &&
        (st = emq__consumer_topic_open(*out, err)) != EMQ_OK) {
        emq__consumer_free(*out);
        *out = NULL;
    }
    if (st == EMQ_OK &&
        (st = emq__conf_warn_unverified(conf, "consumer", err)) != EMQ_OK) {
        emq__consumer_free(*out);
        *out = NULL;
    }
    return st;
}

emq_status emq_consumer_new(const emq_conf_t *conf, emq_handler_fn handler,
                            void *opaque, emq_consumer_t **out,
                            emq_error *err) {
    return make(conf, handler, NULL, opaque, out, err);
}

emq_status emq_consumer_new_batch(const emq_conf_t *conf,
                                  emq_batch_handler_fn handler, void *opaque,
                                  emq_consumer_t **out, emq_error *err) {
    if (handler == NULL) {
        *out = NULL;
        return emq__error_set(err, EMQ_EINVAL, 0,
                              "a batch consumer needs a batch handler");
    }
    return make(conf, NULL, handler, opaque, out, err);
}
