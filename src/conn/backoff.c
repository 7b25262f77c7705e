/* SPDX-License-Identifier: BSD-3-Clause */
/* backoff.c: delays between attempts, and the one retry loop.
 *
 * Capped exponential backoff with "equal jitter" (half the delay fixed,
 * half random), so a fleet of clients that lost the same server does not
 * reconnect in lockstep, yet each waits at least half the nominal delay.
 * The random source is a caller-held splitmix64 state, so tests pin the
 * sequence with a seed. emq__retry is the loop every layer retries with:
 * attempts, these delays, a deadline and a stop.
 */
#include "conn.h"

uint64_t emq__backoff_random(uint64_t *state) {
    uint64_t z = (*state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* Returns min(max_ms, min_ms * 2^attempt); negative inputs count as 0, and
 * a min above max yields max. Shifts only while the product stays below
 * max_ms, so no attempt number can overflow. */
int64_t emq__backoff_base(int64_t min_ms, int64_t max_ms, unsigned attempt) {
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

/* Returns a delay in [base/2, base] where base = emq__backoff_base(...). */
int64_t emq__backoff_delay(int64_t min_ms, int64_t max_ms, unsigned attempt,
                           uint64_t *state) {
    int64_t base = emq__backoff_base(min_ms, max_ms, attempt);
    int64_t fixed = base / 2;
    uint64_t span = (uint64_t)(base - fixed) + 1;
    return fixed + (int64_t)(emq__backoff_random(state) % span);
}

void emq__retry_begin(emq__retry *r, int64_t min_ms, int64_t max_ms,
                      int64_t max_attempts, int64_t deadline_ms,
                      uint64_t *rng) {
    r->min_ms = min_ms;
    r->max_ms = max_ms;
    r->max_attempts = max_attempts;
    r->deadline_ms = deadline_ms;
    r->halted = NULL;
    r->ctx = NULL;
    r->stop_ends = 0;
    r->rng = rng;
    r->attempt = 0;
}

void emq__retry_stop_when(emq__retry *r, int (*halted)(void *), void *ctx,
                          int ends) {
    r->halted = halted;
    r->ctx = ctx;
    r->stop_ends = ends;
}

void emq__nap(int64_t ms, int (*halted)(void *), void *ctx) {
    if (halted == NULL) {
        if (ms > 0)
            emq__sleep_ms(ms);
        return;
    }
    int64_t until = emq__now_ms() + ms;
    for (int64_t left = ms; left > 0 && !halted(ctx);
         left = until - emq__now_ms())
        emq__sleep_ms(left < EMQ_RETRY_SLICE_MS ? left : EMQ_RETRY_SLICE_MS);
}

int emq__retry_next(emq__retry *r) {
    int stop_ends = r->halted != NULL && r->stop_ends;
    if (r->attempt == 0) { /* the first attempt: at once, always */
        r->attempt = 1;
        return 1;
    }
    if (stop_ends && r->halted(r->ctx))
        return 0;
    if (r->max_attempts > 0 && r->attempt >= r->max_attempts)
        return 0;
    { /* the pause before the next attempt */
        int64_t pause = emq__backoff_delay(r->min_ms, r->max_ms,
                                           (unsigned)(r->attempt - 1), r->rng);
        if (r->deadline_ms >= 0) {
            int64_t left = r->deadline_ms - emq__now_ms();
            if (left <= 0)
                return 0;
            if (pause > left)
                pause = left;
        }
        emq__nap(pause, r->halted, r->ctx);
        if (stop_ends && r->halted(r->ctx))
            return 0;
        /* One more attempt after a wait the deadline cut short. */
    }
    r->attempt++;
    return 1;
}
