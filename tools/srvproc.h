/* SPDX-License-Identifier: BSD-3-Clause */
/* srvproc.h: a private redis-server process, started and stopped by pid.
 *
 * Shared by `echomq demo` (src/cli/cmd_demo.c) and the test harness's
 * fixture (tests/harness/server.c), which write their own redis.conf and
 * check readiness their own way (the demo through libechomq, the harness
 * with its raw client). This file knows only the process: finding the
 * program, forking and exec'ing it with the right stdio and process
 * group, and stopping it. It uses libc alone and is built into the
 * echomq program and the test programs, never into libechomq: it is not
 * public API. Every function may be called from any thread, except where
 * a comment says otherwise; none allocates.
 */
#ifndef EMQ_TOOLS_SRVPROC_H
#define EMQ_TOOLS_SRVPROC_H

#include <stddef.h>
#include <sys/types.h>

/* Finds program prog: in bin_dir when it is not NULL (and then only
 * there), else in each folder of $PATH (/usr/local/bin:/usr/bin:/bin when
 * unset). Returns 0 with its path in out, or -1 with why not in out ("...
 * is not on PATH"). */
int srvproc_program(const char *bin_dir, const char *prog, char *out,
                    size_t size);

/* How srvproc_spawn starts the server. */
typedef struct srvproc_opts {
    const char *program; /* a path (srvproc_program's) */
    const char *conf;    /* redis.conf: the one argument */
    const char *dir;     /* the child's working folder; NULL: unchanged */
    const char *out;     /* stdout and stderr appended to this file; NULL:
                            stdout to /dev/null, stderr inherited */
    int own_group;       /* 1: a process group of its own, so a terminal's
                            Ctrl-C reaches only the caller, which stops it
                            in order (the demo); 0: stays in the caller's
                            group, which a runner kills as a whole, and on
                            Linux dies with the caller (PR_SET_PDEATHSIG)
                            when the caller's main thread starts it */
    const char *mode;    /* an argument after conf ("--sentinel"); NULL:
                            none */
} srvproc_opts;

/* Forks and execs o->program with o->conf; stdin is /dev/null. A child
 * that cannot run the program exits 127 (125: cannot enter o->dir).
 * Returns the child's pid, or -1 with the reason in why. stdio buffers are
 * flushed first, so nothing is written twice. */
pid_t srvproc_spawn(const srvproc_opts *o, char *why, size_t why_size);

/* Waits up to ms for pid to exit and reaps it; SIGKILL (and reap) after
 * that. Also right for a pid that is already gone. */
void srvproc_reap(pid_t pid, int ms);

/* SIGTERM (a clean shutdown), then srvproc_reap(pid, grace_ms). pid <= 0
 * is ignored. */
void srvproc_stop(pid_t pid, int grace_ms);

/* text as one double-quoted redis.conf argument (backslash and quote
 * escaped, truncated to fit size), into out: a path with spaces stays one
 * argument. Returns out. */
const char *srvproc_quote(const char *text, char *out, size_t size);

#endif /* EMQ_TOOLS_SRVPROC_H */
