/* SPDX-License-Identifier: BSD-3-Clause */
/* base: allocation, errors and capped buffers shared by every layer.
 *
 * Internal header (not installed). Every allocation in the library goes
 * through emq__alloc and friends so a test can make the Nth allocation fail
 * and check that every out-of-memory path returns EMQ_ENOMEM cleanly.
 */
#ifndef EMQ_BASE_H
#define EMQ_BASE_H

#include "echomq.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#if defined(__GNUC__)
#define EMQ_PRINTF(f, a) __attribute__((format(printf, f, a)))
#define EMQ_LIKELY(x) __builtin_expect(!!(x), 1)
#define EMQ_UNLIKELY(x) __builtin_expect(!!(x), 0)
#else
#define EMQ_PRINTF(f, a)
#define EMQ_LIKELY(x) (x)
#define EMQ_UNLIKELY(x) (x)
#endif

/* ---- alloc.c ---------------------------------------------------------- */

/* malloc/calloc/realloc/free that can be made to fail for tests. Return
 * NULL on failure, like the libc calls. emq__realloc leaves ptr untouched
 * when it fails. */
void *emq__alloc(size_t size);
void *emq__calloc(size_t n, size_t size);
void *emq__realloc(void *ptr, size_t size);
void emq__free(void *ptr);
/* Caller owns the copy (free with emq__free); NULL when out of memory. */
char *emq__strdup(const char *s);
char *emq__strndup(const char *s, size_t n);
/* Overwrites n bytes in a way the compiler may not elide (secrets). */
void emq__wipe(void *p, size_t n);

/* Test hooks. emq__alloc_fail_at(n): the nth allocation from now (1-based)
 * fails, and only that one; 0 disarms. emq__alloc_live(): allocations not
 * yet freed, for leak checks after each test. */
void emq__alloc_fail_at(uint64_t n);
uint64_t emq__alloc_live(void);
/* Number of allocation calls since start; lets a test walk N over a path. */
uint64_t emq__alloc_calls(void);

/* ---- error.c ---------------------------------------------------------- */

/* Fills err (may be NULL) with code, retriable and a formatted message, and
 * returns code, so callers can write `return emq__error_set(err, ...)`. */
/* EMQ_ENOMEM "out of memory": the one way an allocation failure is told. */
emq_status emq__oom(emq_error *err);
emq_status emq__error_set(emq_error *err, emq_status code, int retriable,
                          const char *fmt, ...) EMQ_PRINTF(4, 5);
emq_status emq__error_vset(emq_error *err, emq_status code, int retriable,
                           const char *fmt, va_list ap);
/* Clears err (may be NULL) to EMQ_OK with an empty message. */
void emq__error_clear(emq_error *err);
/* Prefixes err's message with "context: " (keeps code and retriable). */
void emq__error_prefix(emq_error *err, const char *fmt, ...) EMQ_PRINTF(2, 3);
/* Copies at most max bytes of untrusted text into out (size bytes) as
 * printable ASCII: other bytes become '?', so server text and user input
 * never put control characters into a message. Returns out. */
char *emq__printable(char *out, size_t size, const char *text, size_t len);
/* Replaces, in place, every control character of text (C0, DEL, and the
 * C1 controls U+0080-U+009F in UTF-8) with '?', keeping the rest (UTF-8
 * names) as it is: a last guard for a line a terminal shows (log lines),
 * whatever text went into it. */
void emq__hide_controls(char *text);

/* ---- buf.c ------------------------------------------------------------ */

/* A growable byte buffer with a hard cap: it never grows past max bytes. */
typedef struct emq__buf {
    char *data;       /* emq__alloc'd; NULL until first growth */
    size_t len;       /* bytes in use */
    size_t cap;       /* bytes allocated */
    size_t max;       /* hard cap on cap; 0 means SIZE_MAX/2 */
    const char *name; /* the limit's name, for the error ("output buffer") */
} emq__buf;

void emq__buf_init(emq__buf *b, size_t max, const char *name);
/* Frees the storage and resets to empty. */
void emq__buf_free(emq__buf *b);
/* Ensures room for extra more bytes. EMQ_ELIMIT (naming b->name and max)
 * or EMQ_ENOMEM on failure; the buffer is unchanged then. */
emq_status emq__buf_reserve(emq__buf *b, size_t extra, emq_error *err);

/* ---- time.c ----------------------------------------------------------- */

/* Monotonic clock in milliseconds. */
int64_t emq__now_ms(void);
/* The same clock, read at tick resolution (a few ms behind at most) for a
 * fraction of the cost: for checks made per entry against deadlines that
 * have margins far wider than a tick. */
int64_t emq__now_coarse_ms(void);
/* Sleeps ms milliseconds (restarts on EINTR). */
void emq__sleep_ms(int64_t ms);
struct timespec;
/* Sets *ts to ms milliseconds from now on CLOCK_MONOTONIC: the deadline
 * of a pthread_cond_timedwait on a condition made with that clock. */
void emq__deadline_in(struct timespec *ts, int64_t ms);

/* ---- jsonwrite.c ------------------------------------------------------ */

/* A JSON writer with snprintf semantics: it writes what fits into buf
 * (always NUL-terminated when size > 0) and counts the full length, so a
 * caller can size a buffer from a first call. */
typedef struct emq__json {
    char *buf;
    size_t size;
    size_t len; /* full length of the document so far */
} emq__json;

void emq__json_init(emq__json *j, char *buf, size_t size);
/* Appends formatted text as is (numbers, punctuation, keys). */
void emq__json_raw(emq__json *j, const char *fmt, ...) EMQ_PRINTF(2, 3);
/* Appends a NUL-terminated string as a JSON string. */
void emq__json_cstr(emq__json *j, const char *s);
/* Appends binary-safe bytes as a JSON value: a JSON string when they are
 * valid UTF-8 (control characters escaped), else {"base64":"..."} so that
 * any byte string survives a round trip exactly (docs/CLI.md). */
void emq__json_bytes(emq__json *j, const char *p, size_t n);
/* 1 when p[0..n) is valid UTF-8 (no overlongs, no surrogates). */
int emq__utf8_valid(const char *p, size_t n);

#endif /* EMQ_BASE_H */
