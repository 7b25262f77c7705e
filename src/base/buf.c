/* SPDX-License-Identifier: BSD-3-Clause */
/* buf.c: growable byte buffers with a hard cap (see emq__buf in base.h).
 *
 * Growth doubles up to the cap, so appends are amortised O(1). The cap
 * turns runaway growth into EMQ_ELIMIT naming the buffer and its limit.
 */
#include "base.h"

#include <string.h>

void emq__buf_init(emq__buf *b, size_t max, const char *name) {
    b->data = NULL;
    b->len = 0;
    b->cap = 0;
    b->max = max ? max : SIZE_MAX / 2;
    b->name = name;
}

void emq__buf_free(emq__buf *b) {
    emq__free(b->data);
    b->data = NULL;
    b->len = 0;
    b->cap = 0;
}

emq_status emq__buf_reserve(emq__buf *b, size_t extra, emq_error *err) {
    if (extra > b->max - b->len)
        return emq__error_set(err, EMQ_ELIMIT, 0,
                              "%s would grow to more than its limit of %zu "
                              "bytes (%zu in use, %zu more needed)",
                              b->name, b->max, b->len, extra);
    if (b->cap - b->len >= extra)
        return EMQ_OK;
    size_t want = b->len + extra;
    size_t cap = b->cap ? b->cap : (b->max < 256 ? b->max : 256);
    while (cap < want)
        cap = cap > b->max / 2 ? b->max : cap * 2;
    char *data = emq__realloc(b->data, cap);
    if (data == NULL)
        return emq__error_set(err, EMQ_ENOMEM, 0,
                              "out of memory growing %s to %zu bytes", b->name,
                              cap);
    b->data = data;
    b->cap = cap;
    return EMQ_OK;
}
