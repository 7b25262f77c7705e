/* SPDX-License-Identifier: BSD-3-Clause */
/* backoff.c: delays between reconnect attempts.
 *
 * Pure functions: capped exponential backoff with "equal jitter" (half the
 * delay fixed, half random), so a fleet of clients that lost the same
 * server does not reconnect in lockstep, yet each waits at least half the
 * nominal delay. The random source is a caller-held splitmix64 state, so
 * tests pin the sequence with a seed. This file never sleeps and never
 * reads a clock.
 */
#include "conn.h"

uint64_t emq_backoff_random(uint64_t *state) {
    uint64_t z = (*state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* Returns min(max_ms, min_ms * 2^attempt); negative inputs count as 0, and
 * a min above max yields max. Shifts only while the product stays below
 * max_ms, so no attempt number can overflow. */
int64_t emq_backoff_base(int64_t min_ms, int64_t max_ms, unsigned attempt) {
    if (max_ms < 0)
        max_ms = 0;
    if (min_ms < 0)
        min_ms = 0;
    if (min_ms >= max_ms)
        return max_ms;
    int64_t d = min_ms;
    for (unsigned i = 0; i < attempt && d < max_ms; i++) {
        if (d == 0)
            return 0;
        d = d > max_ms / 2 ? max_ms : d * 2;
    }
    return d < max_ms ? d : max_ms;
}

/* Returns a delay in [base/2, base] where base = emq_backoff_base(...). */
int64_t emq_backoff_delay(int64_t min_ms, int64_t max_ms, unsigned attempt,
                          uint64_t *state) {
    int64_t base = emq_backoff_base(min_ms, max_ms, attempt);
    int64_t fixed = base / 2;
    uint64_t span = (uint64_t)(base - fixed) + 1;
    return fixed + (int64_t)(emq_backoff_random(state) % span);
}
