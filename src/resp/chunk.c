/* SPDX-License-Identifier: BSD-3-Clause */
/* chunk.c: the receive buffer's life: made, grown in place while nobody
 * else views it, held by each reply built from it, freed by whichever
 * thread drops the last reference. It never reads or parses the bytes.
 */
#include "chunk.h"

#include <string.h>

#ifdef EMQ_POISON_BUFFERS
/* Test builds: no byte of fresh buffer space is NUL, so code that treats a
 * reply view as a C string runs off the chunk's end and memcheck or ASan
 * report it every time, not only when the old heap bytes hold no NUL. */
static void poison(char *from, size_t n) { memset(from, 0xA5, n); }
#else
static void poison(char *from, size_t n) {
    (void)from;
    (void)n;
}
#endif

resp_chunk *emq__resp_chunk_new(size_t cap) {
    resp_chunk *c = emq__alloc(sizeof *c + cap);
    if (c == NULL)
        return NULL;
    atomic_init(&c->refs, 1);
    c->cap = cap;
    poison(c->data, cap);
    return c;
}

resp_chunk *emq__resp_chunk_grow(resp_chunk *c, size_t cap) {
    resp_chunk *grown = emq__realloc(c, sizeof *c + cap);
    if (grown == NULL)
        return NULL;
    if (cap > grown->cap)
        poison(grown->data + grown->cap, cap - grown->cap);
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
