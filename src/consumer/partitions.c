/* SPDX-License-Identifier: BSD-3-Clause */
/* partitions.c: a topic's consumer, a consumer of consumers.
 *
 * A topic consumer (partitions > 1) holds one ordinary consumer per
 * partition, all under its name and group, each with its own route,
 * lease and thread; the rest of this folder knows one queue. Here a
 * topic's partitions are made (for emq_consumer_new, consumer_new.c) and
 * run (one thread each, the first fatal error stopping the others), and
 * the partition that holds an entry being settled is found. In pull mode the
 * partitions read into the topic consumer's one ready queue;
 * emq__consumer_members (core.c) is what a call that loops over a consumer's
 * partitions uses.
 */
#include "partitions.h"
#include "consumer.h"

#include <string.h>

/* Makes partition i's consumer into c->parts, with c's handlers. */
static emq_status open_part(int i, const emq_conf_t *part, void *ctx,
                            emq_error *err) {
    emq_consumer_t *c = ctx;
    emq_status st = emq__consumer_make(part, c->handler, c->batch_handler,
                                       c->opaque, &c->parts[i], err);
    if (st == EMQ_OK)
        c->nparts = (size_t)i + 1;
    return st;
}

emq_status emq__consumer_topic_open(emq_consumer_t *c, emq_error *err) {
    c->parts =
        emq__calloc((size_t)emq__cfg_partitions(c->conf), sizeof *c->parts);
    if (c->parts == NULL)
        return emq__oom(err);
    return emq__topic_open_parts(c->conf, 0, (int)emq__cfg_partitions(c->conf),
                                 open_part, c, err);
}

emq_status emq__consumer_topic_run(emq_consumer_t *c, emq_error *err) {
    emq_status st =
        emq__consumers_run(c->parts, c->nparts, emq__consumer_loop, err);
    for (size_t i = 0; i < c->nparts; i++) /* ready to run again */
        emq__consumer_stop_clear(c->parts[i]);
    return st;
}

emq_consumer_t *emq__consumer_owner(emq_consumer_t *c, const emq_entry *entry,
                                    emq_error *err) {
    const char *stream = entry->stream;
    if (c->nparts == 0) {
        if (stream == NULL || strcmp(stream, c->keys.stream) == 0)
            return c;
    } else if (stream == NULL) {
        emq__error_set(err, EMQ_EINVAL, 0,
                       "entry %s names no stream: entries of topic '%s' are "
                       "settled with the stream poll gave them",
                       entry->id, emq__cfg_queue(c->conf));
        return NULL;
    } else {
        for (size_t i = 0; i < c->nparts; i++)
            if (strcmp(stream, c->parts[i]->keys.stream) == 0)
                return c->parts[i];
    }
    char shown[200];
    emq__error_set(err, EMQ_EINVAL, 0,
                   "entry %s is of stream '%s', not of this consumer's",
                   entry->id,
                   emq__printable(shown, sizeof shown, stream, strlen(stream)));
    return NULL;
}
