/* SPDX-License-Identifier: BSD-3-Clause */
/* test_backoff.c: reconnect delays and reply deadlines of the conn layer.
 *
 * The backoff is a pure function of (min, max, attempt, PRNG state), so
 * its bounds are checked exhaustively over attempts and seeds: the base
 * doubles and is capped, never exceeds max, never overflows (attempt
 * 1000), and the jitter stays in [base/2, base]. The second half checks
 * the extra wait derived from a blocking command's arguments, which keeps
 * a long BLOCK from tripping the command timeout.
 */
#include "harness/test.h"
#include "base/base.h"
#include "conn/conn.h"

TEST(backoff_base_doubles_then_caps) {
    static const int64_t want[] = {100, 200, 400, 800, 1600, 3200, 5000, 5000};
    for (unsigned i = 0; i < sizeof want / sizeof want[0]; i++)
        ASSERT_EQ_INT(emq__backoff_base(100, 5000, i), want[i]);
    int64_t prev = 0;
    for (unsigned i = 0; i <= 1000; i++) {
        int64_t b = emq__backoff_base(100, 5000, i);
        ASSERT(b >= prev);
        ASSERT(b <= 5000);
        prev = b;
    }
    ASSERT_EQ_INT(emq__backoff_base(100, 5000, 1000), 5000);
    ASSERT_EQ_INT(emq__backoff_base(100, 5000, UINT32_MAX), 5000);
}

TEST(backoff_base_edge_cases_do_not_overflow) {
    ASSERT_EQ_INT(emq__backoff_base(0, 5000, 10), 0);
    ASSERT_EQ_INT(emq__backoff_base(7000, 5000, 0), 5000); /* min > max */
    ASSERT_EQ_INT(emq__backoff_base(5000, 5000, 3), 5000);
    ASSERT_EQ_INT(emq__backoff_base(-5, 100, 3), 0);
    ASSERT_EQ_INT(emq__backoff_base(1, INT64_MAX, 62), (int64_t)1 << 62);
    ASSERT_EQ_INT(emq__backoff_base(1, INT64_MAX, 63), INT64_MAX);
    ASSERT_EQ_INT(emq__backoff_base(1, INT64_MAX, 1000), INT64_MAX);
    ASSERT_EQ_INT(emq__backoff_base(INT64_MAX / 2 + 1, INT64_MAX, 1),
                  INT64_MAX);
    ASSERT_EQ_INT(emq__backoff_base(3, 1000, 8), 768);
    ASSERT_EQ_INT(emq__backoff_base(3, 1000, 9), 1000);
}

TEST(backoff_jitter_stays_in_range) {
    uint64_t state = 42;
    int low = 0, high = 0;
    for (unsigned attempt = 0; attempt < 1001; attempt++) {
        int64_t base = emq__backoff_base(100, 5000, attempt);
        for (int k = 0; k < 50; k++) {
            int64_t d = emq__backoff_delay(100, 5000, attempt, &state);
            if (d < base / 2 || d > base)
                FAIL("attempt %u: delay %lld outside [%lld, %lld]", attempt,
                     (long long)d, (long long)(base / 2), (long long)base);
            ASSERT(d <= 5000);
            if (d < base / 2 + base / 4)
                low++;
            else
                high++;
        }
    }
    /* Both halves of the random part are used. */
    ASSERT(low > 1000);
    ASSERT(high > 1000);
    /* Huge bounds neither overflow nor escape the cap. */
    for (int k = 0; k < 1000; k++) {
        int64_t d = emq__backoff_delay(1, INT64_MAX, 1000, &state);
        ASSERT(d >= INT64_MAX / 2);
    }
    ASSERT_EQ_INT(emq__backoff_delay(0, 0, 5, &state), 0);
}

TEST(backoff_is_deterministic_per_seed) {
    uint64_t a = 7, b = 7, c = 8;
    int differ = 0;
    for (unsigned i = 0; i < 20; i++) {
        int64_t x = emq__backoff_delay(100, 100000, i, &a);
        int64_t y = emq__backoff_delay(100, 100000, i, &b);
        int64_t z = emq__backoff_delay(100, 100000, i, &c);
        ASSERT_EQ_INT(x, y);
        differ += x != z;
    }
    ASSERT(differ > 10);
}

/* Shorthand: the extra wait for a command given as words. */
static int64_t block(int argc, const char *const *argv) {
    return emq__conn_block_ms(argc, argv, NULL);
}

TEST(block_wait_of_xread_and_xreadgroup) {
    const char *a[] = {"XREADGROUP", "GROUP", "g",       "c", "COUNT", "10",
                       "BLOCK",      "2000",  "STREAMS", "q", ">"};
    ASSERT_EQ_INT(block(11, a), 2000);
    const char *b[] = {"xread", "block", "0", "streams", "q", "$"};
    ASSERT_EQ_INT(block(6, b), -1); /* BLOCK 0: wait forever */
    const char *c[] = {"XREAD", "COUNT", "1", "STREAMS", "BLOCK", "0"};
    ASSERT_EQ_INT(block(6, c), 0); /* a key named BLOCK is not the option */
    const char *d[] = {"XREAD", "STREAMS", "q", "0"};
    ASSERT_EQ_INT(block(4, d), 0);
    const char *e[] = {"XREAD", "BLOCK", "abc", "STREAMS", "q", "$"};
    ASSERT_EQ_INT(block(6, e), 0); /* refused by the server at once */
    const char *f[] = {"XREAD", "BLOCK", "-5", "STREAMS", "q", "$"};
    ASSERT_EQ_INT(block(6, f), 0);
    const char *g[] = {"XREAD", "BLOCK"};
    ASSERT_EQ_INT(block(2, g), 0);
    /* Binary-safe lengths: "BLOCKX" cut to "BLOCK", "1500junk" to "1500". */
    const char *h[] = {"XREADX", "BLOCKX", "1500junk", "STREAMS", "q", "$"};
    const size_t hl[] = {5, 5, 4, 7, 1, 1};
    ASSERT_EQ_INT(emq__conn_block_ms(6, h, hl), 1500);
    /* Absurd values are clamped, not overflowed. */
    const char *i[] = {"XREAD",   "BLOCK", "999999999999999999999999",
                       "STREAMS", "q",     "$"};
    int64_t big = block(6, i);
    ASSERT(big > 0 && big < INT64_MAX / 2);
}

TEST(block_wait_of_list_zset_and_wait_commands) {
    const char *a[] = {"BLPOP", "k1", "k2", "1.5"};
    ASSERT_EQ_INT(block(4, a), 1500);
    const char *b[] = {"BRPOP", "k", "0"};
    ASSERT_EQ_INT(block(3, b), -1);
    const char *c[] = {"BLMOVE", "a", "b", "LEFT", "RIGHT", "0.0001"};
    ASSERT_EQ_INT(block(6, c), 1); /* rounded up to a whole ms */
    const char *d[] = {"BZMPOP", "2", "1", "z", "MIN"};
    ASSERT_EQ_INT(block(5, d), 2000);
    const char *e[] = {"blmpop", "0.25", "1", "l", "LEFT"};
    ASSERT_EQ_INT(block(5, e), 250);
    const char *f[] = {"BRPOPLPUSH", "a", "b", "3"};
    ASSERT_EQ_INT(block(4, f), 3000);
    const char *g[] = {"BZPOPMIN", "z", "x"};
    ASSERT_EQ_INT(block(3, g), 0);
    const char *h[] = {"WAIT", "1", "100"};
    ASSERT_EQ_INT(block(3, h), 100);
    const char *i[] = {"WAIT", "1", "0"};
    ASSERT_EQ_INT(block(3, i), -1);
    const char *j[] = {"WAITAOF", "1", "0", "70"};
    ASSERT_EQ_INT(block(4, j), 70);
    const char *k[] = {"GET", "BLOCK"};
    ASSERT_EQ_INT(block(2, k), 0);
    const char *l[] = {"BZPOPMAX", "z", "2."};
    ASSERT_EQ_INT(block(3, l), 2000);
    ASSERT_EQ_INT(emq__conn_block_ms(0, NULL, NULL), 0);
}

/* ---- emq__retry: the one retry loop ----------------------------------------
 */

static int calls_until_stop;
static int stop_after_calls(void *ctx) {
    (void)ctx;
    return --calls_until_stop < 0;
}

/* Attempts: the first at once, then one per pause, up to the bound. */
TEST(retry_bounded_attempts_first_at_once) {
    uint64_t rng = 1;
    emq__retry r;
    /* Pauses of a minute: a pause before the first attempt would take 30 s
     * at least, so a loose bound (any machine meets it) tells at once. */
    emq__retry_begin(&r, 60000, 60000, 3, -1, &rng);
    int64_t t0 = emq__now_ms();
    ASSERT_EQ_INT(emq__retry_next(&r), 1);
    ASSERT(emq__now_ms() - t0 < emq_test_ms(5000));
    /* The bound, with pauses of 1-2 ms. */
    emq__retry_begin(&r, 1, 2, 3, -1, &rng);
    ASSERT_EQ_INT(emq__retry_next(&r), 1);
    ASSERT_EQ_INT(emq__retry_next(&r), 1);
    ASSERT_EQ_INT(emq__retry_next(&r), 1);
    ASSERT_EQ_INT(emq__retry_next(&r), 0);
    ASSERT_EQ_INT(r.attempt, 3);
}

/* A deadline ends the retrying: the wait it cuts short is followed by one
 * last attempt, then none. */
TEST(retry_deadline_cuts_the_wait_then_one_last_attempt) {
    uint64_t rng = 1;
    emq__retry r;
    /* Pauses of a minute (30 s at least, with jitter), cut at a second
     * (scaled): the first attempt and the start of the wait must come
     * before the deadline, which 30 ms did not always leave a memcheck
     * run on a loaded machine (a deadline passed before the wait ends
     * the retrying with no last attempt). */
    emq__retry_begin(&r, 60000, 60000, 0, emq__now_ms() + emq_test_ms(1000),
                     &rng);
    ASSERT_EQ_INT(emq__retry_next(&r), 1);
    int64_t t0 = emq__now_ms();
    ASSERT_EQ_INT(emq__retry_next(&r), 1); /* slept to the deadline only */
    ASSERT(emq__now_ms() - t0 < emq_test_ms(5000));
    ASSERT_EQ_INT(emq__retry_next(&r), 0);
}

/* A stop that ends the retrying ends it during a wait; one that does not
 * only cuts the wait short. */
TEST(retry_stop_ends_or_only_cuts_the_wait) {
    uint64_t rng = 1;
    emq__retry r;
    emq__retry_begin(&r, 60000, 60000, 0, -1, &rng);
    emq__retry_stop_when(&r, stop_after_calls, NULL, 1);
    calls_until_stop = 3;
    ASSERT_EQ_INT(emq__retry_next(&r), 1); /* the first, at once */
    int64_t t0 = emq__now_ms();
    ASSERT_EQ_INT(emq__retry_next(&r), 0);
    /* The pause of a minute (30 s at least) was cut: slices of 20 ms. */
    ASSERT(emq__now_ms() - t0 < emq_test_ms(5000));
    emq__retry_begin(&r, 60000, 60000, 0, -1, &rng);
    emq__retry_stop_when(&r, stop_after_calls, NULL, 0);
    calls_until_stop = 2;
    ASSERT_EQ_INT(emq__retry_next(&r), 1);
    t0 = emq__now_ms();
    ASSERT_EQ_INT(emq__retry_next(&r), 1); /* cut short, attempt still made */
    ASSERT(emq__now_ms() - t0 < emq_test_ms(5000));
}

/* emq_clock_ms is the clock the library's own waits use (emq__now_ms):
 * monotonic, and advancing across a sleep. */
TEST(clock_ms_is_the_library_clock_and_advances) {
    int64_t a = emq_clock_ms();
    int64_t inner = emq__now_ms();
    ASSERT(inner >= a);
    emq__sleep_ms(20);
    int64_t b = emq_clock_ms();
    ASSERT(b - a >= 20);
    ASSERT(emq__now_ms() >= b); /* the same clock */
}
