/* SPDX-License-Identifier: BSD-3-Clause */
/* test.h: the test harness's assertions and registration.
 *
 * Each TEST(name) registers a function with the one runner (runner.c). The
 * runner runs every test in its own process with a timeout, and after the
 * test body checks that every library allocation was freed. Assertions
 * print both sides and end the test at once.
 */
#ifndef EMQ_TEST_H
#define EMQ_TEST_H

#include "echomq.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

typedef void (*emq_test_fn)(void);

/* Flags of a registered test. EMQ_TEST_RUNS_ALONE: the runner runs it
 * after the parallel part, with no other test beside it (a bound on time
 * or memory that another test's load would make meaningless). */
enum { EMQ_TEST_RUNS_ALONE = 1 };
void emq_test_register(const char *name, const char *file, emq_test_fn fn,
                       int timeout_s, int flags);
/* Ends the current test as failed (never returns). */
void emq_test_fail(const char *file, int line, const char *fmt, ...)
    __attribute__((noreturn, format(printf, 3, 4)));
/* Ends the current test as skipped, with a reason (never returns). */
void emq_test_skip(const char *reason) __attribute__((noreturn));
/* A scratch directory private to the current test, removed afterwards. */
const char *emq_test_tmpdir(void);
/* ms scaled for a slow run: times EMQ_TEST_TIME_SCALE (a whole number,
 * 1 when unset; the valgrind stage sets it). Bounds on waits for a
 * condition go through it; the runner's per-test timeouts do too. */
int emq_test_ms(int ms);

#define EMQ_TEST_DEFINE_(name, secs, flags)                                    \
    static void name(void);                                                    \
    __attribute__((constructor)) static void register_##name(void) {           \
        emq_test_register(#name, __FILE__, name, secs, flags);                 \
    }                                                                          \
    static void name(void)
#define TEST_TIMEOUT(name, secs) EMQ_TEST_DEFINE_(name, secs, 0)
#define TEST(name) TEST_TIMEOUT(name, 30)
/* A test that runs alone, after the others (see EMQ_TEST_RUNS_ALONE). */
#define TEST_SERIAL(name, secs)                                                \
    EMQ_TEST_DEFINE_(name, secs, EMQ_TEST_RUNS_ALONE)

#define FAIL(...) emq_test_fail(__FILE__, __LINE__, __VA_ARGS__)
#define SKIP(reason) emq_test_skip(reason)

#define ASSERT(cond)                                                           \
    do {                                                                       \
        if (!(cond))                                                           \
            FAIL("assertion failed: %s", #cond);                               \
    } while (0)

#define ASSERT_EQ_INT(a, b)                                                    \
    do {                                                                       \
        long long a_ = (long long)(a), b_ = (long long)(b);                    \
        if (a_ != b_)                                                          \
            FAIL("%s == %s: %lld != %lld", #a, #b, a_, b_);                    \
    } while (0)

#define ASSERT_EQ_SIZE(a, b)                                                   \
    do {                                                                       \
        unsigned long long a_ = (a), b_ = (b);                                 \
        if (a_ != b_)                                                          \
            FAIL("%s == %s: %llu != %llu", #a, #b, a_, b_);                    \
    } while (0)

#define ASSERT_EQ_STR(a, b)                                                    \
    do {                                                                       \
        const char *a_ = (a), *b_ = (b);                                       \
        if (a_ == NULL || b_ == NULL || strcmp(a_, b_) != 0)                   \
            FAIL("%s == %s: \"%s\" != \"%s\"", #a, #b, a_ ? a_ : "(null)",     \
                 b_ ? b_ : "(null)");                                          \
    } while (0)

/* Compares a (ptr, len) pair with an expected byte string. */
#define ASSERT_EQ_MEM(p, n, e, en)                                             \
    do {                                                                       \
        const char *p_ = (const char *)(p);                                    \
        size_t n_ = (n), en_ = (en);                                           \
        if (n_ != en_ || (n_ && memcmp(p_, (e), n_) != 0))                     \
            FAIL("%s (%zu bytes) != %s (%zu bytes): \"%.*s\"", #p, n_, #e,     \
                 en_, (int)(n_ > 200 ? 200 : n_), p_ ? p_ : "");               \
    } while (0)

/* The message of an optional emq_error, "" for NULL. */
static inline const char *emq_test_message(const emq_error *err) {
    return err ? err->message : "";
}

/* Asserts an emq_status; on mismatch prints both names and err's message. */
#define ASSERT_STATUS(expr, expected, errp)                                    \
    do {                                                                       \
        emq_status got_ = (expr), want_ = (expected);                          \
        if (got_ != want_)                                                     \
            FAIL("%s: got %s, want %s (%s)", #expr, emq_status_name(got_),     \
                 emq_status_name(want_), emq_test_message(errp));              \
    } while (0)
#define ASSERT_OK(expr, errp) ASSERT_STATUS(expr, EMQ_OK, errp)

#define ASSERT_CONTAINS(haystack, needle)                                      \
    do {                                                                       \
        const char *h_ = (haystack), *n_ = (needle);                           \
        if (h_ == NULL || strstr(h_, n_) == NULL)                              \
            FAIL("%s does not contain \"%s\": \"%s\"", #haystack, n_,          \
                 h_ ? h_ : "(null)");                                          \
    } while (0)
#define ASSERT_NOT_CONTAINS(haystack, needle)                                  \
    do {                                                                       \
        const char *h_ = (haystack), *n_ = (needle);                           \
        if (h_ != NULL && strstr(h_, n_) != NULL)                              \
            FAIL("%s contains \"%s\": \"%s\"", #haystack, n_, h_);             \
    } while (0)

#endif /* EMQ_TEST_H */
