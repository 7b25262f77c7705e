/* topic.c: the admin verbs of a topic, done once.
 *
 * A topic's admin handle holds one ordinary handle per partition (queue
 * "<topic>.<i>"). Every verb runs on a topic through emq_admin_each: the
 * verb's per-partition step is called for each partition in order, and
 * the first failure stops the walk and names its partition. The verbs
 * that list entries (pending, dead letters) gather every partition's list
 * and order them by ID with emq_admin_by_id.
 */
#include "admin.h"

#include <stdlib.h>
#include <string.h>

emq_admin_t *emq_admin_partition(emq_admin_t *a, int i) {
    if (a == NULL || i < 0 || (size_t)i >= a->nparts)
        return NULL;
    return a->parts[i];
}

int emq_admin_partition_count(const emq_admin_t *a) {
    return a == NULL ? 0 : (int)a->nparts;
}

emq_status emq_admin_command(emq_admin_t *a, int argc,
                             const char *const *argv, const size_t *argvlen,
                             emq_reply **reply, emq_error *err) {
    *reply = NULL;
    if (a == NULL || a->route == NULL)
        return emq_error_set(err, EMQ_EINVAL, 0,
                             "a command needs the handle of a queue or of "
                             "one partition (emq_admin_partition), not of a "
                             "whole topic");
    return emq_route_command(a->route, argc, argv, argvlen, reply, err);
}

emq_status emq_admin_each(emq_admin_t *a, emq_admin_step step, void *ctx,
                          emq_error *err) {
    for (size_t i = 0; i < a->nparts; i++) {
        emq_status st = step(a->parts[i], (int)i, ctx, err);
        if (st != EMQ_OK) {
            emq_topic_error_prefix(err, a->conf, i);
            return st;
        }
    }
    emq_error_clear(err);
    return EMQ_OK;
}

emq_status emq_admin_per_id(const emq_admin_t *a, const char *what,
                            emq_error *err) {
    return emq_error_set(err, EMQ_EINVAL, 0,
                         "%s names IDs of one partition, and '%s' is a "
                         "topic of %zu partitions (IDs repeat across "
                         "them): address partition i (0..%zu) with "
                         "emq_admin_partition, or the CLI's --partition",
                         what, a->conf->queue, a->nparts, a->nparts - 1);
}

/* qsort over emq_admin_order: by ID, then partition. */
static int order_cmp(const void *x, const void *y) {
    const emq_admin_order *a = x, *b = y;
    int c = emq_stream_id_cmp(a->id, b->id);
    if (c != 0)
        return c;
    return (a->partition > b->partition) - (a->partition < b->partition);
}

void emq_admin_by_id(emq_admin_order *order, size_t n) {
    /* IDs are times, so across partitions this is oldest first (as far
     * as the partitions' clocks agree); a tie goes to the lower partition. */
    qsort(order, n, sizeof *order, order_cmp);
}
