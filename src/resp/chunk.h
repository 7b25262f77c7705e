/* SPDX-License-Identifier: BSD-3-Clause */
/* chunk.h: the reference-counted receive buffer that replies view. Private
 * to src/resp: the reader fills chunks, replies hold them (reply.h).
 */
#ifndef EMQ_RESP_CHUNK_H
#define EMQ_RESP_CHUNK_H

#include "resp.h"

#include <stdatomic.h>

/* A receive buffer. Replies hold a reference on the chunk their strings
 * point into; the reader holds one on its current chunk. The chunk is freed
 * when the last reference goes, whichever thread drops it. */
typedef struct resp_chunk {
    atomic_size_t refs; /* reader + live replies viewing this chunk */
    size_t cap;         /* bytes of data[] */
    char data[];
} resp_chunk;

/* A chunk of cap bytes with one reference (the caller's). NULL when out
 * of memory. */
resp_chunk *emq__resp_chunk_new(size_t cap);
/* Grows c to cap bytes, keeping its data; only while the caller holds the
 * sole reference. NULL when out of memory (c is then unchanged). */
resp_chunk *emq__resp_chunk_grow(resp_chunk *c, size_t cap);
/* 1 when the caller's reference is the only one (no reply views c). */
int emq__resp_chunk_sole(const resp_chunk *c);
/* Takes one more reference on c (for a reply that views it). */
void emq__resp_chunk_hold(resp_chunk *c);
/* Drops one reference on c, freeing it with the last one. NULL is a
 * no-op. */
void emq__resp_chunk_release(resp_chunk *c);

#endif /* EMQ_RESP_CHUNK_H */
