/* SPDX-License-Identifier: BSD-3-Clause */
/* consumer.h: making a consumer, and its loop of sessions (consumer.c). */
#ifndef EMQ_CONSUMER_H
#define EMQ_CONSUMER_H

#include "core.h"

/* Makes the consumer of conf with either handler, a topic's
 * without its partitions (partitions.c adds them); *out is freed with
 * emq__consumer_free, which frees a topic's partitions too. */
emq_status emq__consumer_make(const emq_conf_t *conf, emq_handler_fn handler,
                              emq_batch_handler_fn batch_handler, void *opaque,
                              emq_consumer_t **out, emq_error *err);
/* Frees c and its partitions (nothing may run). */
void emq__consumer_free(emq_consumer_t *c);
/* One consumer's (not a topic parent's) whole life on the calling
 * thread: connect, sessions and turns until a stop or a fatal error, then
 * (pull mode) hand back what is unhanded and wait for what is handed out
 * to be settled, end the upkeep thread and give the lease back. EMQ_OK
 * after a stop. */
emq_status emq__consumer_loop(emq_consumer_t *c, emq_error *err);
/* Runs run(consumers[i]) on n threads and waits for all of them. The
 * first fatal error of any stops the others and is returned (EMQ_OK when
 * all stopped cleanly). */
emq_status emq__consumers_run(emq_consumer_t *const *consumers, size_t n,
                              emq_status (*run)(emq_consumer_t *c,
                                                emq_error *err),
                              emq_error *err);

#endif /* EMQ_CONSUMER_H */
