/* SPDX-License-Identifier: BSD-3-Clause */
/* reply.h: the layout of emq_reply nodes and of the one allocation that
 * holds them. Private to src/resp (reader.c builds them, reply.c reads and
 * frees them); the strings point into a receive chunk (chunk.h).
 */
#ifndef EMQ_RESP_REPLY_H
#define EMQ_RESP_REPLY_H

#include "chunk.h"

/* One node of a reply tree. An aggregate's elements are contiguous. */
struct emq_reply {
    uint8_t type;    /* emq_reply_type */
    char format[4];  /* VERBATIM format, NUL-terminated; "" otherwise */
    size_t len;      /* string bytes, or aggregate element count */
    const char *str; /* text view (strings, DOUBLE source, BIGNUM) */
    union {
        struct emq_reply *element; /* aggregates: len nodes */
        long long integer;         /* INTEGER, BOOL */
        double dval;               /* DOUBLE */
    } u;
    struct emq_reply *attribute; /* RESP3 attribute sent before, or NULL */
};

/* The one allocation behind a reply: the chunk reference, then the nodes;
 * nodes[0] is the root handed to the caller. */
typedef struct resp_block {
    resp_chunk *chunk;
    struct emq_reply nodes[];
} resp_block;

#endif /* EMQ_RESP_REPLY_H */
