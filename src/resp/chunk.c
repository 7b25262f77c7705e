/* SPDX-License-Identifier: BSD-3-Clause */
/* chunk.c: the receive buffer's life: made, grown in place while nobody
 * else views it, held by each reply built from it, freed by whichever
 * thread drops the last reference. It never reads or parses the bytes.
 */
#include "chunk.h"

resp_chunk *emq__resp_chunk_new(size_t cap) {
    resp_chunk *c = emq__alloc(sizeof *c + cap);
    if (c == NULL)
        return NULL;
    atomic_init(&c->refs, 1);
    c->cap = cap;
    return c;
}

resp_chunk *emq__resp_chunk_grow(resp_chunk *c, size_t cap) {
    resp_chunk *grown = emq__realloc(c, sizeof *c + cap);
    if (grown == NULL)
        return NULL;
    grown->cap = cap;
    return grown;
}

int emq__resp_chunk_sole(const resp_chunk *c) {
    return atomic_load_explicit(&c->refs, memory_order_acquire) == 1;
}

void emq__resp_chunk_hold(resp_chunk *c) {
    atomic_fetch_add_explicit(&c->refs, 1, memory_order_relaxed);
}

void emq__resp_chunk_release(resp_chunk *c) {
    if (c && atomic_fetch_sub_explicit(&c->refs, 1, memory_order_acq_rel) == 1)
        emq__free(c);
}
