/* SPDX-License-Identifier: BSD-3-Clause */
/* shim.c: what the chaos harness and the soak borrow from the test
 * harness, and the small helpers they share.
 *
 * tests/harness/server.c (a private redis-server: start, kill -9, restart
 * on the same folder) and tests/harness/fakepeer.c (the fault-injecting
 * TCP proxy) are written for emq_tests and call three functions of its
 * runner. This file provides them for a stand-alone program: a failure
 * prints its message and exits with status 2 (a setup failure, not a
 * verdict), and the scratch folder is the run folder the program chose
 * with chaos_set_tmpdir (or a fresh /tmp/emq-chaos-XXXXXX).
 */
#include "chaos.h"
#include "harness/test.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static char tmpdir[512];

void chaos_set_tmpdir(const char *dir);
void chaos_set_tmpdir(const char *dir) {
    snprintf(tmpdir, sizeof tmpdir, "%s", dir);
}

const char *emq_test_tmpdir(void) {
    if (tmpdir[0] == '\0') {
        snprintf(tmpdir, sizeof tmpdir, "/tmp/emq-chaos-XXXXXX");
        if (mkdtemp(tmpdir) == NULL) {
            perror("mkdtemp");
            exit(2);
        }
    }
    return tmpdir;
}

void emq_test_fail(const char *file, int line, const char *fmt, ...) {
    va_list ap;
    fprintf(stderr, "setup failure at %s:%d: ", file, line);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    fflush(stderr);
    exit(2);
}

void emq_test_skip(const char *reason) {
    fprintf(stderr, "cannot run: %s\n", reason);
    exit(2);
}

int64_t chaos_now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void chaos_sleep_ms(int64_t ms) {
    if (ms <= 0)
        return;
    struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0)
        ;
}

uint64_t chaos_rand(chaos_rng *r) {
    uint64_t z = (r->s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

int64_t chaos_range(chaos_rng *r, int64_t lo, int64_t hi) {
    if (hi <= lo)
        return lo;
    return lo + (int64_t)(chaos_rand(r) % (uint64_t)(hi - lo + 1));
}

const char *chaos_fault_name(fault_kind k) {
    static const char *names[FAULT_KINDS] = {
        "kill-worker",     "stop-worker",
        "restart-server",  "proxy-drop",
        "proxy-stall",     "proxy-halfopen",
        "stop-past-lease", "name-intruder",
        "misconf",         "upkeep-kill",
        "lease-del",       "evict",
        "peer-claim",      "stop-pull-past-lease",
        "slot-migration",  "failover"};
    return (unsigned)k < FAULT_KINDS ? names[k] : "?";
}
