/* SPDX-License-Identifier: BSD-3-Clause */
/* inhand.c: the consumer's in-hand times, for the upkeep (inhand.h). */
#include "inhand.h"
#include "inflight.h"

#include <stdio.h>

enum { TAG_PUBLISH = EMQ_TAG(EMQ_TAGS_INHAND, 0), TAG_UNPUBLISH };

/* Most entries one publish names. */
#define INHAND_PER_ROUND 256

void emq__inhand_init(emq_consumer_t *c, int64_t now_ms) {
    c->inhand.next_ms = now_ms + EMQ_INHAND_EVERY_MS;
}

int64_t emq__inhand_next_ms(emq_consumer_t *c) {
    const emq__inflight *t = &c->table;
    return atomic_load(&t->nhandling) > 0 || t->nunpublish > 0
               ? c->inhand.next_ms
               : INT64_MAX;
}

int emq__inhand_due(emq_consumer_t *c, int64_t now_ms) {
    return emq__inhand_next_ms(c) <= now_ms;
}

/* Appends the publish script for entries newly in a handler's hands
 * (ids: scratch of at least INHAND_PER_ROUND); nothing when there are
 * none. */
static emq_status append_publish(emq_consumer_t *c, emq__session *x,
                                 int64_t now_ms, emq_id *ids, emq_error *err) {
    int64_t ages[INHAND_PER_ROUND];
    size_t n = emq__inflight_to_publish(&c->table, now_ms, ids, ages,
                                        INHAND_PER_ROUND);
    if (n == 0)
        return EMQ_OK;
    const char **argv = emq__alloc((4 + 2 * n) * sizeof *argv);
    char(*texts)[24] = emq__alloc(n * sizeof *texts);
    emq_status st = EMQ_OK;
    if (argv == NULL || texts == NULL) {
        st = emq__oom(err);
    } else {
        emq__script_head(EMQ_SCRIPT_INHAND_PUBLISH, emq__session_functions(x),
                         argv);
        argv[2] = "1";
        argv[3] = c->inhand_key;
        for (size_t i = 0; i < n; i++) {
            snprintf(texts[i], sizeof texts[i], "%lld", (long long)ages[i]);
            argv[4 + 2 * i] = ids[i].str;
            argv[5 + 2 * i] = texts[i];
        }
        st = emq__session_append(x, TAG_PUBLISH, (int)(4 + 2 * n), argv, NULL,
                                 err);
    }
    emq__free(argv);
    emq__free(texts);
    return st;
}

emq_status emq__inhand_append(emq_consumer_t *c, emq__session *x,
                              int64_t now_ms, emq_id *unpub, emq_id *ids,
                              emq__inhand_round *ir, emq_error *err) {
    ir->nunpublished = 0;
    if (now_ms < c->inhand.next_ms)
        return EMQ_OK;
    c->inhand.next_ms = now_ms + EMQ_INHAND_EVERY_MS;
    ir->nunpublished =
        emq__inflight_unpublish_take(&c->table, unpub, EMQ_SETTLE_MAX_IDS);
    emq_status st = EMQ_OK;
    if (ir->nunpublished > 0)
        st = emq__consumer_append_ids(x, TAG_UNPUBLISH,
                                      (const char *[]){"HDEL", c->inhand_key},
                                      2, unpub, ir->nunpublished, err);
    if (st == EMQ_OK)
        st = append_publish(c, x, now_ms, ids, err);
    return st;
}

void emq__inhand_apply(emq_consumer_t *c, int tag, const emq_reply *reply) {
    (void)tag;
    /* Refused: an operator sees the idle time instead. Debug only: it
     * changes nothing the consumer promises. */
    if (emq_reply_kind(reply) == EMQ_REPLY_ERROR) {
        char shown[160];
        emq__consumer_log(c, EMQ_LOG_DEBUG,
                          "publishing in-hand times failed: %s",
                          emq__reply_text(reply, shown, sizeof shown));
    }
}

void emq__inhand_finish(emq_consumer_t *c, const emq__inhand_round *ir,
                        emq_status st, const emq_id *unpub) {
    if (ir->nunpublished > 0 && st != EMQ_OK && st != EMQ_EAGAIN)
        emq__inflight_unpublish_again(&c->table, unpub, ir->nunpublished);
}
