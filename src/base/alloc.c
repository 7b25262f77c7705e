/* SPDX-License-Identifier: BSD-3-Clause */
/* alloc.c: the library's allocator, with a fault-injection hook.
 *
 * All allocations of libechomq go through these functions. Tests arm
 * emq__alloc_fail_at(n) so that exactly the nth allocation returns NULL, and
 * read emq__alloc_live() after each test to find leaks. The counters are
 * relaxed atomics: the cost is one increment per allocation, and the library
 * allocates once per reply, not per byte.
 */
#include "base.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

static atomic_uint_fast64_t alloc_calls;
static atomic_uint_fast64_t alloc_live;
static atomic_uint_fast64_t fail_target; /* call number that fails; 0 none */

void emq__alloc_fail_at(uint64_t n) {
    uint64_t now = atomic_load_explicit(&alloc_calls, memory_order_relaxed);
    atomic_store(&fail_target, n ? now + n : 0);
}

uint64_t emq__alloc_live(void) { return atomic_load(&alloc_live); }

uint64_t emq__alloc_calls(void) { return atomic_load(&alloc_calls); }

/* Counts one allocation call; returns 1 when this one must fail. */
static int injected_failure(void) {
    uint64_t call =
        atomic_fetch_add_explicit(&alloc_calls, 1, memory_order_relaxed) + 1;
    uint64_t target = atomic_load_explicit(&fail_target, memory_order_relaxed);
    return EMQ_UNLIKELY(target != 0 && call == target);
}

void *emq__alloc(size_t size) {
    if (injected_failure())
        return NULL;
    void *p = malloc(size ? size : 1);
    if (p)
        atomic_fetch_add_explicit(&alloc_live, 1, memory_order_relaxed);
    return p;
}

void *emq__calloc(size_t n, size_t size) {
    if (injected_failure())
        return NULL;
    void *p = calloc(n ? n : 1, size ? size : 1);
    if (p)
        atomic_fetch_add_explicit(&alloc_live, 1, memory_order_relaxed);
    return p;
}

void *emq__realloc(void *ptr, size_t size) {
    if (ptr == NULL)
        return emq__alloc(size);
    if (injected_failure())
        return NULL;
    return realloc(ptr, size ? size : 1);
}

void emq__free(void *ptr) {
    if (ptr == NULL)
        return;
    atomic_fetch_sub_explicit(&alloc_live, 1, memory_order_relaxed);
    free(ptr);
}

char *emq__strndup(const char *s, size_t n) {
    char *copy = emq__alloc(n + 1);
    if (copy) {
        memcpy(copy, s, n);
        copy[n] = '\0';
    }
    return copy;
}

char *emq__strdup(const char *s) { return emq__strndup(s, strlen(s)); }

void emq__wipe(void *p, size_t n) {
    volatile unsigned char *v = p;
    while (n--)
        *v++ = 0;
}
