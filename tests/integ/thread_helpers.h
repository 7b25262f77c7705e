/* SPDX-License-Identifier: BSD-3-Clause */
/* thread_helpers.h: what a thread of the test process is doing, from
 * /proc (Linux). */
#ifndef EMQ_TEST_THREAD_HELPERS_H
#define EMQ_TEST_THREAD_HELPERS_H

#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <sys/types.h>

/* 1 while thread tid of this process sleeps in poll(2) or ppoll(2). */
static inline int thread_sleeps_in_poll(long tid) {
    char path[64], line[64] = "";
    snprintf(path, sizeof path, "/proc/self/task/%ld/syscall", tid);
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return 0;
    if (fgets(line, sizeof line, f) == NULL)
        line[0] = '\0';
    fclose(f);
    long nr = strtol(line, NULL, 10);
    return line[0] >= '0' && line[0] <= '9' &&
           (nr == SYS_ppoll
#ifdef SYS_poll
            || nr == SYS_poll
#endif
           );
}

#endif
