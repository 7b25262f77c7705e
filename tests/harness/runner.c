/* SPDX-License-Identifier: BSD-3-Clause */
/* runner.c: the one test runner.
 *
 * Usage: emq_tests [--list] [--no-fork] [-j N] [--repeat N] [FILTER...]
 * A FILTER selects tests whose name or source path contains it ("unit/",
 * "integ/", "test_resp", "conn_auth"). Each test runs in a child process
 * of its own (its own process group, private servers, ports and scratch
 * folder), up to N at once (-j, or EMQ_TEST_JOBS; default
 * DEFAULT_JOBS) and within the machine's test slots (below); the parent
 * kills a child that overruns its timeout.
 * Tests registered with TEST_SERIAL run afterwards, one at a time, with
 * nothing beside them. A child's output goes to a log of its own; results
 * print in the order of --list whatever order the tests end in, each
 * test's output just above its line. After the body returns,
 * the child fails the test if any library allocation is still live.
 * --no-fork runs tests one by one in-process, for valgrind; a failure then
 * ends the run. --repeat N runs each selected test N times (beside one
 * another with -j: how a flaky test is caught). The last line is "N passed, N
 * failed, N skipped".
 */
#include "harness/test.h"
#include "base/base.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define SKIP_EXIT 77
/* Tests at once when neither -j nor EMQ_TEST_JOBS says: the integration
 * tests spend their time waiting on timers of private servers, so a
 * 2-core machine keeps busy with more of them than it has cores
 * (docs/BUILDING.md has the measurements behind this number). */
#define DEFAULT_JOBS 6
#define MAX_JOBS 64

typedef struct test_case {
    const char *name;
    const char *file;
    emq_test_fn fn;
    int timeout_s;
    int flags;
} test_case;

/* Grown by registration, which runs in constructors before main. */
static test_case *tests;
static size_t test_count, test_cap;
static char tmpdir[256];

void emq_test_register(const char *name, const char *file, emq_test_fn fn,
                       int timeout_s, int flags) {
    if (test_count == test_cap) {
        size_t cap = test_cap ? test_cap * 2 : 256;
        test_case *grown = realloc(tests, cap * sizeof *grown);
        if (grown == NULL) {
            fprintf(stderr, "runner: out of memory registering %s\n", name);
            exit(2);
        }
        tests = grown;
        test_cap = cap;
    }
    tests[test_count++] = (test_case){name, file, fn, timeout_s, flags};
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

/* ---- machine-wide test slots -------------------------------------------
 *
 * Every runner on the machine (the stages of one test.sh run, two runs
 * side by side, a contributor's run beside CI) takes a slot for each test
 * it starts, from one pool per user: the lock of a file
 * /tmp/emq-test-slots-<uid>/<k>.lock, held by the test's process (its
 * forks inherit it, exec drops it) until the test ends. So the tests
 * running on the machine stay at most EMQ_TEST_SLOTS (default
 * SLOTS_PER_CPU per online CPU) whatever else runs tests, and each waits
 * on its timers on a machine that is busy but not starved. A
 * TEST_SERIAL test takes every slot, in order (no two runners deadlock).
 */

#define SLOTS_PER_CPU 4
#define MAX_SLOTS 256

static int slot_count;
static char slot_dir[64];
static volatile sig_atomic_t interrupted;

static int slot_open(int k) {
    char path[128];
    snprintf(path, sizeof path, "%s/%d.lock", slot_dir, k);
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0)
        fprintf(stderr, "runner: %s: %s\n", path, strerror(errno));
    return fd;
}

/* A free slot's descriptor (locked), or -1 when every slot is taken. */
static int slot_take(void) {
    for (int k = 0; k < slot_count; k++) {
        int fd = slot_open(k);
        if (fd < 0)
            return -1;
        if (flock(fd, LOCK_EX | LOCK_NB) == 0)
            return fd;
        close(fd);
    }
    return -1;
}

/* Takes every slot, waiting for each (a serial test). Returns how many
 * descriptors it put in fds, or -1 when interrupted. */
static int slot_take_all(int *fds) {
    for (int k = 0; k < slot_count; k++) {
        fds[k] = slot_open(k);
        while (fds[k] >= 0 && flock(fds[k], LOCK_EX) != 0) {
            if (errno != EINTR || interrupted) {
                for (int i = 0; i <= k; i++)
                    close(fds[i]);
                return -1;
            }
        }
        if (fds[k] < 0) {
            for (int i = 0; i < k; i++)
                close(fds[i]);
            return -1;
        }
    }
    return slot_count;
}

static int slots_init(void) {
    const char *env = getenv("EMQ_TEST_SLOTS");
    if (env != NULL) {
        char *end;
        long v = strtol(env, &end, 10);
        if (env[0] == '\0' || *end != '\0' || v < 1 || v > MAX_SLOTS) {
            fprintf(stderr, "EMQ_TEST_SLOTS must be 1 to %d, not '%s'\n",
                    MAX_SLOTS, env);
            return -1;
        }
        slot_count = (int)v;
    } else {
        long cpus = sysconf(_SC_NPROCESSORS_ONLN);
        slot_count = (int)(cpus > 0 ? cpus : 1) * SLOTS_PER_CPU;
        if (slot_count > MAX_SLOTS)
            slot_count = MAX_SLOTS;
    }
    snprintf(slot_dir, sizeof slot_dir, "/tmp/emq-test-slots-%ld",
             (long)getuid());
    if (mkdir(slot_dir, 0700) != 0 && errno != EEXIST) {
        fprintf(stderr, "runner: mkdir %s: %s\n", slot_dir, strerror(errno));
        return -1;
    }
    return 0;
}

/* ---- the parallel run --------------------------------------------------
 *
 * One slot per test running: its child's pid, start and log. The parent
 * polls the children (waitpid WNOHANG) every few milliseconds, kills one
 * that overran its timeout, and prints every result whose turn has come.
 */

enum { R_PENDING, R_RUNNING, R_PASSED, R_FAILED, R_SKIPPED };

typedef struct run_state {
    const test_case *t;
    int result;
    pid_t pid;
    struct timespec start;
    int64_t ms;
    char log[300];
} run_state;

static char logdir[256];

static void on_interrupt(int sig) { interrupted = sig; }

/* Starts t in a child of its own, its stdout and stderr to r->log, once
 * it has its slot(s). Returns 0 started, 1 no slot free yet, -1 failed. */
static int start_child(run_state *r) {
    int alone = (r->t->flags & EMQ_TEST_RUNS_ALONE) != 0;
    int slots[MAX_SLOTS], nslots;
    if (alone) {
        nslots = slot_take_all(slots);
        if (nslots < 0)
            return -1;
    } else {
        slots[0] = slot_take();
        if (slots[0] < 0)
            return 1;
        nslots = 1;
    }
    int fd = open(r->log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) {
        fprintf(stderr, "runner: %s: %s\n", r->log, strerror(errno));
        for (int i = 0; i < nslots; i++)
            close(slots[i]);
        return -1;
    }
    fflush(NULL);
    pid_t pid = fork();
    /* The child holds the slots from here; the parent lets go of its
     * copies, so they are free again exactly when the test has ended. */
    if (pid != 0)
        for (int i = 0; i < nslots; i++)
            close(slots[i]);
    if (pid < 0) {
        perror("runner: fork");
        close(fd);
        return -1;
    }
    if (pid == 0) {
        setpgid(0, 0); /* so a timeout can kill the test's own children */
        signal(SIGPIPE, SIG_IGN);
        signal(SIGINT, SIG_DFL);
        signal(SIGTERM, SIG_DFL);
        dup2(fd, STDOUT_FILENO);
        dup2(fd, STDERR_FILENO);
        run_body(r->t);
        remove_tmpdir();
        fflush(NULL);
        _exit(0);
    }
    close(fd);
    setpgid(pid, pid); /* also here: no race with a kill(-pid) below */
    r->pid = pid;
    r->result = R_RUNNING;
    clock_gettime(CLOCK_MONOTONIC, &r->start);
    return 0;
}

/* Appends a line of the runner's to a test's log. */
static void log_line(const run_state *r, const char *fmt, ...) {
    FILE *f = fopen(r->log, "a");
    if (f == NULL)
        return;
    va_list ap;
    va_start(ap, fmt);
    vfprintf(f, fmt, ap);
    va_end(ap);
    fclose(f);
}

/* Ends what a child left running and its scratch folders, then reaps
 * it and records how it ended. It is called while the child is a zombie
 * not yet reaped: its pid, and so its process group's id, cannot have
 * gone to another process (another runner's new test, with pids
 * recycled at 32768), which the group kill and the folder removal would
 * then hit. */
static void finish_child(run_state *r) {
    int status = 0;
    r->ms = elapsed_ms(&r->start);
    kill(-r->pid, SIGKILL);
    remove_child_tmpdirs(r->pid);
    while (waitpid(r->pid, &status, 0) < 0 && errno == EINTR)
        ;
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
        r->result = R_PASSED;
    } else if (WIFEXITED(status) && WEXITSTATUS(status) == SKIP_EXIT) {
        r->result = R_SKIPPED;
    } else {
        if (WIFSIGNALED(status))
            log_line(r, "    killed by signal %d\n", WTERMSIG(status));
        r->result = R_FAILED;
    }
    r->pid = 0;
}

/* Copies a test's log to stdout. */
static void print_log(const run_state *r) {
    FILE *f = fopen(r->log, "r");
    if (f == NULL)
        return;
    char buf[8192];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0)
        fwrite(buf, 1, n, stdout);
    fclose(f);
}

static void print_result(const run_state *r) {
    /* Every test's output, as when tests ran one by one: passing tests
     * print figures too (scripts/compat.sh reads the server
     * capabilities a passing test prints). */
    print_log(r);
    const char *label = r->result == R_PASSED    ? "ok  "
                        : r->result == R_SKIPPED ? "skip"
                                                 : "FAIL";
    printf("%s %-40s %s (%lld ms)\n", label, r->t->name, short_file(r->t->file),
           (long long)r->ms);
    fflush(stdout);
    unlink(r->log);
}

/* The order tests start in: the parallel ones, longest timeout first (the
 * best guess at the longest run, so the run does not end on one long
 * test), then the TEST_SERIAL ones in --list order. */
static run_state *start_order_base;
static int cmp_start(const void *a, const void *b) {
    const run_state *x = start_order_base + *(const size_t *)a;
    const run_state *y = start_order_base + *(const size_t *)b;
    int xs = x->t->flags & EMQ_TEST_RUNS_ALONE;
    int ys = y->t->flags & EMQ_TEST_RUNS_ALONE;
    if (xs != ys)
        return xs - ys;
    if (!xs && x->t->timeout_s != y->t->timeout_s)
        return y->t->timeout_s - x->t->timeout_s;
    return x < y ? -1 : 1;
}

/* Runs runs[0..n) with up to jobs children at once. Returns 0, or -1 when
 * the runner itself failed or was interrupted. */
static int run_parallel(run_state *runs, size_t n, int jobs) {
    size_t *order = malloc((n ? n : 1) * sizeof *order);
    if (order == NULL) {
        fprintf(stderr, "runner: out of memory\n");
        return -1;
    }
    for (size_t i = 0; i < n; i++)
        order[i] = i;
    start_order_base = runs;
    qsort(order, n, sizeof *order, cmp_start);

    size_t next = 0, printed = 0, running = 0;
    int rc = 0;
    while (printed < n) {
        if (interrupted) {
            rc = -1;
            break;
        }
        /* Start what may start: a serial test only on an empty machine. */
        while (next < n && running < (size_t)jobs) {
            run_state *r = &runs[order[next]];
            if ((r->t->flags & EMQ_TEST_RUNS_ALONE) && running > 0)
                break;
            int started = start_child(r);
            if (started == 1)
                break; /* every slot of the machine taken: later */
            if (started != 0) {
                rc = -1;
                break;
            }
            next++;
            running++;
            if (r->t->flags & EMQ_TEST_RUNS_ALONE)
                break;
        }
        if (rc != 0)
            break;
        /* Which child ended, left unreaped (WNOWAIT): see finish_child. */
        siginfo_t info;
        memset(&info, 0, sizeof info);
        pid_t w = 0;
        if (waitid(P_ALL, 0, &info, WEXITED | WNOHANG | WNOWAIT) == 0)
            w = info.si_pid;
        else if (errno != EINTR && errno != ECHILD) {
            perror("runner: waitid");
            rc = -1;
            break;
        }
        if (w > 0) {
            for (size_t i = 0; i < n; i++)
                if (runs[i].result == R_RUNNING && runs[i].pid == w) {
                    finish_child(&runs[i]);
                    running--;
                    break;
                }
        }
        for (size_t i = 0; i < n; i++) {
            run_state *r = &runs[i];
            if (r->result != R_RUNNING)
                continue;
            int limit = emq_test_ms(r->t->timeout_s * 1000);
            if (elapsed_ms(&r->start) > (int64_t)limit) {
                kill(-r->pid, SIGKILL);
                kill(r->pid, SIGKILL);
                log_line(r, "    timed out after %d s\n", limit / 1000);
                finish_child(r);
                r->result = R_FAILED;
                running--;
            }
        }
        while (printed < n && runs[printed].result > R_RUNNING)
            print_result(&runs[printed++]);
        if (w <= 0)
            usleep(5000);
    }
    /* Interrupted or broken: end every test still running. */
    for (size_t i = 0; i < n; i++)
        if (runs[i].result == R_RUNNING) {
            kill(-runs[i].pid, SIGKILL);
            kill(runs[i].pid, SIGKILL);
            waitpid(runs[i].pid, NULL, 0);
            remove_child_tmpdirs(runs[i].pid);
            unlink(runs[i].log);
        }
    free(order);
    return rc;
}

static void usage(const char *argv0) {
    fprintf(stderr,
            "usage: %s [--list] [--no-fork] [-j N] [--repeat N] [FILTER...]\n",
            argv0);
}

/* Parses a -j value: a whole number from 1 to MAX_JOBS, else -1. */
static int parse_jobs(const char *s) {
    char *end;
    long v = strtol(s, &end, 10);
    if (s[0] == '\0' || *end != '\0' || v < 1 || v > MAX_JOBS)
        return -1;
    return (int)v;
}

int main(int argc, char **argv) {
    int list = 0, no_fork = 0, jobs = DEFAULT_JOBS, repeat = 1;
    const char *env_jobs = getenv("EMQ_TEST_JOBS");
    if (env_jobs != NULL && (jobs = parse_jobs(env_jobs)) < 0) {
        fprintf(stderr, "EMQ_TEST_JOBS must be 1 to %d, not '%s'\n", MAX_JOBS,
                env_jobs);
        return 2;
    }
    /* As many filters as arguments: one dropped would leave its tests
     * out of the run without a word. */
    char **filters = calloc((size_t)argc, sizeof *filters);
    if (filters == NULL) {
        fprintf(stderr, "%s: out of memory\n", argv[0]);
        return 2;
    }
    int nfilters = 0;
    for (int i = 1; i < argc; i++) {
        const char *jarg = NULL;
        if (!strcmp(argv[i], "--list"))
            list = 1;
        else if (!strcmp(argv[i], "--no-fork"))
            no_fork = 1;
        else if (!strcmp(argv[i], "-j") || !strcmp(argv[i], "--jobs")) {
            if (i + 1 == argc) {
                usage(argv[0]);
                free(filters);
                return 2;
            }
            jarg = argv[++i];
        } else if (!strncmp(argv[i], "-j", 2))
            jarg = argv[i] + 2;
        else if (!strcmp(argv[i], "--repeat") && i + 1 < argc) {
            char *end;
            long v = strtol(argv[++i], &end, 10);
            if (*end != '\0' || v < 1 || v > 10000) {
                fprintf(stderr,
                        "%s: --repeat takes a count from 1 to 10000, "
                        "not '%s'\n",
                        argv[0], argv[i]);
                free(filters);
                return 2;
            }
            repeat = (int)v;
        } else if (argv[i][0] == '-') {
            usage(argv[0]);
            free(filters);
            return 2;
        } else
            filters[nfilters++] = argv[i];
        if (jarg != NULL && (jobs = parse_jobs(jarg)) < 0) {
            fprintf(stderr,
                    "%s: -j takes a number of tests from 1 to %d, "
                    "not '%s'\n",
                    argv[0], MAX_JOBS, jarg);
            free(filters);
            return 2;
        }
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

    run_state *runs =
        calloc(test_count ? test_count * (size_t)repeat : 1, sizeof *runs);
    if (runs == NULL) {
        fprintf(stderr, "%s: out of memory\n", argv[0]);
        free(filters);
        return 2;
    }
    size_t n = 0;
    for (size_t i = 0; i < test_count; i++) {
        const test_case *t = &tests[i];
        if (!selected(t, nfilters, filters))
            continue;
        if (list) {
            printf("%s %s%s\n", short_file(t->file), t->name,
                   (t->flags & EMQ_TEST_RUNS_ALONE) ? " (alone)" : "");
            continue;
        }
        for (int k = 0; k < repeat; k++)
            runs[n++].t = t;
    }
    free(filters);
    if (list) {
        free(runs);
        return 0;
    }

    struct timespec run_start;
    clock_gettime(CLOCK_MONOTONIC, &run_start);
    int rc = 0;
    if (no_fork) {
        for (size_t i = 0; i < n; i++) {
            run_state *r = &runs[i];
            clock_gettime(CLOCK_MONOTONIC, &r->start);
            run_body(r->t); /* a failure exits the whole run */
            remove_tmpdir();
            r->ms = elapsed_ms(&r->start);
            r->result = R_PASSED;
            printf("ok   %-40s %s (%lld ms)\n", r->t->name,
                   short_file(r->t->file), (long long)r->ms);
            fflush(stdout);
        }
    } else {
        snprintf(logdir, sizeof logdir, "/tmp/emq-runner-%ld-XXXXXX",
                 (long)getpid());
        if (mkdtemp(logdir) == NULL) {
            perror("runner: mkdtemp");
            free(runs);
            return 2;
        }
        for (size_t i = 0; i < n; i++)
            snprintf(runs[i].log, sizeof runs[i].log, "%s/%zu.log", logdir, i);
        if (slots_init() != 0) {
            remove_tree(logdir);
            free(runs);
            return 2;
        }
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_interrupt;
        sigaction(SIGINT, &sa, NULL);
        sigaction(SIGTERM, &sa, NULL);
        sigaction(SIGHUP, &sa, NULL);
        rc = run_parallel(runs, n, jobs);
        remove_tree(logdir);
    }

    int passed = 0, failed = 0, skipped = 0;
    for (size_t i = 0; i < n; i++) {
        if (runs[i].result == R_PASSED)
            passed++;
        else if (runs[i].result == R_SKIPPED)
            skipped++;
        else if (runs[i].result == R_FAILED)
            failed++;
    }
    if (failed > 0) {
        printf("failed:\n");
        for (size_t i = 0; i < n; i++)
            if (runs[i].result == R_FAILED)
                printf("  %s %s\n", runs[i].t->name,
                       short_file(runs[i].t->file));
    }
    if (rc != 0)
        printf("runner: %s after %zu of %zu tests\n",
               interrupted ? "interrupted" : "stopped",
               (size_t)(passed + failed + skipped), n);
    printf("ran %zu tests in %lld s, %d at once\n", n,
           (long long)elapsed_ms(&run_start) / 1000, no_fork ? 1 : jobs);
    printf("%d passed, %d failed, %d skipped\n", passed, failed, skipped);
    free(runs);
    if (interrupted)
        return 128 + interrupted;
    return failed || rc ? 1 : 0;
}
