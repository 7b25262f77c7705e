/* SPDX-License-Identifier: BSD-3-Clause */
/* srvproc.c: a private redis-server process, started and stopped by pid
 * (srvproc.h). One launcher for the demo and the test harness: what
 * differs between them (the process group, where output goes) is an
 * option, not a second copy.
 */
#include "srvproc.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/prctl.h>
#include <sys/syscall.h>
#endif

int srvproc_program(const char *bin_dir, const char *prog, char *out,
                    size_t size) {
    if (bin_dir) {
        snprintf(out, size, "%s/%s", bin_dir, prog);
        if (access(out, X_OK) == 0)
            return 0;
        snprintf(out, size, "EMQ_SERVER_BIN_DIR=%s has no executable %s",
                 bin_dir, prog);
        return -1;
    }
    const char *path = getenv("PATH");
    if (path == NULL || path[0] == '\0')
        path = "/usr/local/bin:/usr/bin:/bin";
    for (const char *p = path; *p;) {
        const char *colon = strchr(p, ':');
        size_t n = colon ? (size_t)(colon - p) : strlen(p);
        if (n > 0) {
            snprintf(out, size, "%.*s/%s", (int)n, p, prog);
            if (access(out, X_OK) == 0)
                return 0;
        }
        p += n + (colon != NULL);
    }
    snprintf(out, size, "%s is not on PATH (set EMQ_SERVER_BIN_DIR?)", prog);
    return -1;
}

/* The child's stdio: stdin from /dev/null; stdout and stderr to out, or
 * stdout to /dev/null with stderr left as it is. */
static void child_stdio(const char *out) {
    int nul = open("/dev/null", O_RDWR);
    if (nul >= 0) {
        dup2(nul, STDIN_FILENO);
        if (out == NULL)
            dup2(nul, STDOUT_FILENO);
        if (nul > STDERR_FILENO)
            close(nul);
    }
    if (out) {
        int fd = open(out, O_WRONLY | O_CREAT | O_APPEND, 0600);
        if (fd >= 0) {
            dup2(fd, STDOUT_FILENO);
            dup2(fd, STDERR_FILENO);
            if (fd > STDERR_FILENO)
                close(fd);
        }
    }
}

pid_t srvproc_spawn(const srvproc_opts *o, char *why, size_t why_size) {
    pid_t parent = getpid();
#ifdef __linux__
    /* PR_SET_PDEATHSIG fires when the forking *thread* ends, so it is only
     * safe when the main thread starts the server; one started from a
     * helper thread relies on its group being killed, or on its caller. */
    int main_thread = (pid_t)syscall(SYS_gettid) == parent;
#endif
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0)
        snprintf(why, why_size, "fork failed: %s", strerror(errno));
    if (pid != 0)
        return pid;
    if (o->own_group) {
        setpgid(0, 0);
    } else {
#ifdef __linux__
        if (main_thread) {
            prctl(PR_SET_PDEATHSIG, SIGKILL);
            if (getppid() != parent)
                _exit(126); /* the parent is gone already */
        }
#else
        (void)parent;
#endif
    }
    child_stdio(o->out);
    signal(SIGPIPE, SIG_DFL);
    if (o->dir && chdir(o->dir) != 0)
        _exit(125);
    execl(o->program, "redis-server", o->conf, o->mode, (char *)NULL);
    _exit(127);
}

void srvproc_reap(pid_t pid, int ms) {
    if (pid <= 0)
        return;
    struct timespec nap = {0, 2 * 1000 * 1000};
    for (int waited = 0; waited < ms; waited += 2) {
        pid_t w = waitpid(pid, NULL, WNOHANG);
        if (w == pid || (w < 0 && errno == ECHILD))
            return;
        nanosleep(&nap, NULL);
    }
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
}

void srvproc_stop(pid_t pid, int grace_ms) {
    if (pid <= 0)
        return;
    kill(pid, SIGTERM);
    srvproc_reap(pid, grace_ms);
}

const char *srvproc_quote(const char *text, char *out, size_t size) {
    size_t n = 0;
    if (size < 3) {
        if (size > 0)
            out[0] = '\0';
        return out;
    }
    out[n++] = '"';
    for (const char *p = text; *p && n + 3 < size; p++) {
        if (*p == '"' || *p == '\\')
            out[n++] = '\\';
        out[n++] = *p;
    }
    out[n++] = '"';
    out[n] = '\0';
    return out;
}
