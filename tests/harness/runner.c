/* SPDX-License-Identifier: BSD-3-Clause */
/* runner.c: the one test runner.
 *
 * Usage: emq_tests [--list] [--no-fork] [FILTER...]
 * A FILTER selects tests whose name or source path contains it ("unit/",
 * "integ/", "test_resp", "conn_auth"). Each test runs in a child process
 * with an alarm; the parent kills a child that overruns its timeout. After
 * the body returns, the child fails the test if any library allocation is
 * still live. --no-fork runs tests in-process, for valgrind; a failure then
 * ends the run. The last line is "N passed, N failed, N skipped".
 */
#include "harness/test.h"
#include "base/base.h"

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_TESTS 1024
#define SKIP_EXIT 77

typedef struct test_case {
    const char *name;
    const char *file;
    emq_test_fn fn;
    int timeout_s;
} test_case;

static test_case tests[MAX_TESTS];
static size_t test_count;
static char tmpdir[256];

void emq_test_register(const char *name, const char *file, emq_test_fn fn,
                       int timeout_s) {
    if (test_count == MAX_TESTS) {
        fprintf(stderr, "runner: more than %d tests\n", MAX_TESTS);
        exit(2);
    }
    tests[test_count++] = (test_case){name, file, fn, timeout_s};
}

static int time_scale = 1; /* set once in main, before any test runs */

int emq_test_ms(int ms) { return ms * time_scale; }

void emq_test_fail(const char *file, int line, const char *fmt, ...) {
    va_list ap;
    fprintf(stderr, "    %s:%d: ", file, line);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    fflush(stderr);
    exit(1);
}

void emq_test_skip(const char *reason) {
    fprintf(stderr, "    skipped: %s\n", reason);
    fflush(stderr);
    exit(SKIP_EXIT);
}

static void remove_tree(const char *path);

/* Runs at exit of a failed test too, so scratch folders never pile up. */
static void remove_tmpdir(void) {
    if (tmpdir[0]) {
        remove_tree(tmpdir);
        tmpdir[0] = '\0';
    }
}

const char *emq_test_tmpdir(void) {
    if (tmpdir[0] == '\0') {
        snprintf(tmpdir, sizeof tmpdir, "/tmp/emq-test-%ld-XXXXXX",
                 (long)getpid());
        if (mkdtemp(tmpdir) == NULL) {
            perror("mkdtemp");
            exit(2);
        }
        static int cleanup_registered;
        if (!cleanup_registered) {
            cleanup_registered = 1;
            atexit(remove_tmpdir);
        }
    }
    return tmpdir;
}

/* Removes a directory tree (test scratch folders only, no symlink games). */
static void remove_tree(const char *path) {
    DIR *d = opendir(path);
    if (d) {
        struct dirent *e;
        while ((e = readdir(d)) != NULL) {
            if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
                continue;
            char sub[1024];
            snprintf(sub, sizeof sub, "%s/%s", path, e->d_name);
            struct stat st;
            if (lstat(sub, &st) == 0 && S_ISDIR(st.st_mode))
                remove_tree(sub);
            else
                unlink(sub);
        }
        closedir(d);
    }
    rmdir(path);
}

static const char *short_file(const char *file) {
    const char *p = strstr(file, "tests/");
    return p ? p + 6 : file;
}

static int selected(const test_case *t, int nfilters, char **filters) {
    if (nfilters == 0)
        return 1;
    for (int i = 0; i < nfilters; i++)
        if (strstr(t->name, filters[i]) || strstr(t->file, filters[i]))
            return 1;
    return 0;
}

/* Runs the body, then the leak check. Used in the child or in-process. */
static void run_body(const test_case *t) {
    uint64_t live_before = emq__alloc_live();
    t->fn();
    uint64_t live_after = emq__alloc_live();
    if (live_after != live_before)
        emq_test_fail(t->file, 0, "leak: %llu library allocations not freed",
                      (unsigned long long)(live_after - live_before));
    emq__alloc_fail_at(0);
}

static int cmp_tests(const void *a, const void *b) {
    const test_case *x = a, *y = b;
    int c = strcmp(x->file, y->file);
    return c ? c : (x < y ? -1 : 1);
}

static int64_t elapsed_ms(const struct timespec *start) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (int64_t)(now.tv_sec - start->tv_sec) * 1000 +
           (now.tv_nsec - start->tv_nsec) / 1000000;
}

/* Removes the scratch folders of a child that could not clean up itself
 * (killed on timeout, or crashed): /tmp/emq-test-<pid>-*. */
static void remove_child_tmpdirs(pid_t pid) {
    char prefix[64];
    int n = snprintf(prefix, sizeof prefix, "emq-test-%ld-", (long)pid);
    DIR *d = opendir("/tmp");
    if (d == NULL)
        return;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (strncmp(e->d_name, prefix, (size_t)n) == 0) {
            char path[512];
            snprintf(path, sizeof path, "/tmp/%s", e->d_name);
            remove_tree(path);
        }
    }
    closedir(d);
}

/* Forks, runs t in the child, and waits with a timeout. Returns 0 passed,
 * 1 failed, 2 skipped. */
static int run_forked(const test_case *t) {
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        perror("fork");
        return 1;
    }
    if (pid == 0) {
        setpgid(0, 0); /* so a timeout can kill the test's own children */
        signal(SIGPIPE, SIG_IGN);
        run_body(t);
        remove_tmpdir();
        fflush(NULL);
        _exit(0);
    }
    struct timespec start;
    clock_gettime(CLOCK_MONOTONIC, &start);
    int status = 0;
    for (;;) {
        pid_t w = waitpid(pid, &status, WNOHANG);
        if (w == pid)
            break;
        if (w < 0 && errno != EINTR) {
            perror("waitpid");
            return 1;
        }
        if (elapsed_ms(&start) > (int64_t)emq_test_ms(t->timeout_s * 1000)) {
            kill(-pid, SIGKILL);
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
            fprintf(stderr, "    timed out after %d s\n",
                    emq_test_ms(t->timeout_s * 1000) / 1000);
            return 1;
        }
        usleep(2000);
    }
    kill(-pid, SIGKILL); /* reap anything the test left running */
    remove_child_tmpdirs(pid);
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
        return 0;
    if (WIFEXITED(status) && WEXITSTATUS(status) == SKIP_EXIT)
        return 2;
    if (WIFSIGNALED(status))
        fprintf(stderr, "    killed by signal %d\n", WTERMSIG(status));
    return 1;
}

int main(int argc, char **argv) {
    int list = 0, no_fork = 0;
    /* As many filters as arguments: one dropped would leave its tests
     * out of the run without a word. */
    char **filters = calloc((size_t)argc, sizeof *filters);
    if (filters == NULL) {
        fprintf(stderr, "%s: out of memory\n", argv[0]);
        return 2;
    }
    int nfilters = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--list"))
            list = 1;
        else if (!strcmp(argv[i], "--no-fork"))
            no_fork = 1;
        else if (argv[i][0] == '-') {
            fprintf(stderr, "usage: %s [--list] [--no-fork] [FILTER...]\n",
                    argv[0]);
            free(filters);
            return 2;
        } else
            filters[nfilters++] = argv[i];
    }
    const char *scale = getenv("EMQ_TEST_TIME_SCALE");
    if (scale != NULL) {
        time_scale = atoi(scale);
        if (time_scale < 1 || time_scale > 20) {
            fprintf(stderr, "EMQ_TEST_TIME_SCALE must be 1 to 20, not '%s'\n",
                    scale);
            free(filters);
            return 2;
        }
    }
    qsort(tests, test_count, sizeof tests[0], cmp_tests);
    signal(SIGPIPE, SIG_IGN);

    int passed = 0, failed = 0, skipped = 0;
    for (size_t i = 0; i < test_count; i++) {
        const test_case *t = &tests[i];
        if (!selected(t, nfilters, filters))
            continue;
        if (list) {
            printf("%s %s\n", short_file(t->file), t->name);
            continue;
        }
        struct timespec start;
        clock_gettime(CLOCK_MONOTONIC, &start);
        int result;
        if (no_fork) {
            run_body(t); /* a failure exits the whole run */
            remove_tmpdir();
            result = 0;
        } else {
            result = run_forked(t);
        }
        const char *label = result == 0   ? "ok  "
                            : result == 2 ? "skip"
                                          : "FAIL";
        printf("%s %-40s %s (%lld ms)\n", label, t->name, short_file(t->file),
               (long long)elapsed_ms(&start));
        fflush(stdout);
        if (result == 0)
            passed++;
        else if (result == 2)
            skipped++;
        else
            failed++;
    }
    if (!list)
        printf("%d passed, %d failed, %d skipped\n", passed, failed, skipped);
    free(filters);
    return failed ? 1 : 0;
}
