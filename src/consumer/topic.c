/* topic.c: a topic's consumer, a consumer of consumers.
 *
 * A topic consumer (partitions > 1) holds one ordinary consumer per
 * partition, all under its name and group, each with its own route,
 * lease and thread; the rest of this folder knows one queue. Here the
 * partitions are made and freed, run (one thread each, the first fatal
 * error stopping the others), and found again: the members a call loops
 * over, and the partition that holds an entry being settled. In pull mode
 * the partitions read into the topic consumer's one ready queue.
 */
#include "consumer.h"

#include <string.h>

emq_consumer_t *const *emq_consumer_members(emq_consumer_t *c, size_t *n) {
    *n = c->nparts ? c->nparts : 1;
    return c->nparts ? c->parts : &c->self;
}

/* Makes partition i's consumer into c->parts, with c's handlers. */
static emq_status open_part(int i, const emq_conf_t *part, void *ctx,
                            emq_error *err) {
    emq_consumer_t *c = ctx;
    emq_status st = emq_consumer_make(part, c->handler, c->batch_handler,
                                      c->opaque, &c->parts[i], err);
    if (st == EMQ_OK)
        c->nparts = (size_t)i + 1;
    return st;
}

emq_status emq_consumer_topic_open(emq_consumer_t *c, emq_error *err) {
    c->parts = emq_calloc((size_t)c->conf->partitions, sizeof *c->parts);
    if (c->parts == NULL)
        return emq_error_set(err, EMQ_ENOMEM, 0, "out of memory");
    return emq_topic_open_parts(c->conf, 0, (int)c->conf->partitions,
                                open_part, c, err);
}

void emq_consumer_topic_free(emq_consumer_t *c) {
    for (size_t i = 0; i < c->nparts; i++)
        emq_consumer_free(c->parts[i]);
    emq_free(c->parts);
    c->parts = NULL;
    c->nparts = 0;
}

emq_status emq_consumer_topic_run(emq_consumer_t *c, emq_error *err) {
    emq_status st =
        emq_consumers_run(c->parts, c->nparts, emq_consumer_loop, err);
    for (size_t i = 0; i < c->nparts; i++) /* ready to run again */
        atomic_store(&c->parts[i]->stop, 0);
    return st;
}

emq_consumer_t *emq_consumer_owner(emq_consumer_t *c, const emq_entry *entry,
                                   emq_error *err) {
    const char *stream = entry->stream;
    if (c->nparts == 0) {
        if (stream == NULL || strcmp(stream, c->keys.stream) == 0)
            return c;
    } else if (stream == NULL) {
        emq_error_set(err, EMQ_EINVAL, 0,
                      "entry %s names no stream: entries of topic '%s' are "
                      "settled with the stream poll gave them",
                      entry->id, c->conf->queue);
        return NULL;
    } else {
        for (size_t i = 0; i < c->nparts; i++)
            if (strcmp(stream, c->parts[i]->keys.stream) == 0)
                return c->parts[i];
    }
    char shown[200];
    emq_error_set(err, EMQ_EINVAL, 0,
                  "entry %s is of stream '%s', not of this consumer's",
                  entry->id,
                  emq_printable(shown, sizeof shown, stream, strlen(stream)));
    return NULL;
}
