/* main.c: the chaos harness's orchestrator (build/chaos).
 *
 *   chaos [--seed S] [--jobs N] [--workers W] [--seconds T] [--poison P]
 *         [--max-deliveries M] [--kills K] [--stops K] [--restarts K]
 *         [--drops K] [--stalls K] [--halfopens K] [--drain-seconds D]
 *         [--dir PARENT] [--keep] [--tolerate-worker-exits]
 *
 * In a fresh run folder under PARENT (default /tmp) it starts a private
 * redis-server (appendonly yes, appendfsync always, loopback TCP plus a
 * unix socket), a fault-injecting TCP proxy in front of it for the workers,
 * W worker processes chaos-1..chaos-W (this executable re-run with
 * --worker), and a producer thread that publishes N jobs, P of them poison,
 * paced over T seconds. A schedule drawn from the seed spreads the faults
 * over those T seconds, one at a time, and the run prints it first and
 * each fault as it happens. When the producer is done and the window over,
 * it waits (at most D seconds) for the group to have nothing pending and
 * nothing undelivered, stops the workers with SIGTERM, and runs the
 * checker (check.c), which prints the verdict. Exit status: 0 when every
 * promise held, 1 on a violation, 2 when the run could not be set up. The
 * run folder (ledgers, worker logs, server log and AOF) is removed after a
 * pass unless --keep is given, and kept after a failure. A worker that
 * exits on its own is restarted and counted as a violation, unless
 * --tolerate-worker-exits is given (then it is only reported): that lets a
 * run go on checking for lost work while a known worker crash is open.
 *
 * Bounds: every wait has a deadline; the producer gives up at T + D + 60 s;
 * workers and the server die with the orchestrator (PR_SET_PDEATHSIG).
 * Only loopback addresses are used.
 */
#include "chaos.h"
#include "harness/fakepeer.h"
#include "harness/server.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

void chaos_set_tmpdir(const char *dir);
int chaos_drained(const char *url, long long *pending, int *behind);

typedef struct options {
    uint64_t seed;
    long jobs;
    int workers;
    int seconds;
    long poison;
    int max_deliveries;
    int count[FAULT_KINDS]; /* -1: derived from seconds */
    int drain_seconds;
    const char *parent;
    int keep;
    int tolerate_exits;
} options;

/* ---- workers ------------------------------------------------------------ */

typedef struct worker {
    pid_t pid;
    int starts;
} worker;

static worker workers[CHAOS_MAX_WORKERS + 1];
static int nworkers;
static char self_exe[4096];
static char run_dir[600];
static char proxy_url[128];
static char maxd_text[16];
static int workers_died;
static int64_t run_start;

static pid_t spawn_worker(int i) {
    char index[16], log[700];
    snprintf(index, sizeof index, "%d", i);
    snprintf(log, sizeof log, "%s/chaos-%d.log", run_dir, i);
    char *argv[] = {self_exe, "--worker", index,     proxy_url,
                    run_dir,  maxd_text,  (char *)NULL};
    pid_t parent = getpid();
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        fprintf(stderr, "chaos: fork: %s\n", strerror(errno));
        exit(2);
    }
    if (pid == 0) {
        /* Only async-signal-safe calls until exec: the parent has threads. */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent)
            _exit(126);
        int fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0600);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
            close(fd);
        }
        execv(self_exe, argv);
        _exit(127);
    }
    workers[i].pid = pid;
    workers[i].starts++;
    return pid;
}

/* Reaps workers that exited although nobody asked, and restarts them. */
static void watch_workers(void) {
    for (int i = 1; i <= nworkers; i++) {
        int status;
        if (workers[i].pid <= 0)
            continue;
        pid_t w = waitpid(workers[i].pid, &status, WNOHANG);
        if (w != workers[i].pid)
            continue;
        workers_died++;
        printf("[%7.3f] VIOLATION: worker chaos-%d exited on its own (%s "
               "%d); see %s/chaos-%d.log; restarting it\n",
               (chaos_now_ms() - run_start) / 1000.0, i,
               WIFEXITED(status) ? "status" : "signal",
               WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status),
               run_dir, i);
        workers[i].pid = 0;
        spawn_worker(i);
    }
}

static chaos_producer producer;

/* Sleeps until the monotonic time until_ms, watching the workers and
 * printing progress every 10 s. */
static void wait_until(int64_t until_ms) {
    static int64_t next_progress;
    for (;;) {
        int64_t now = chaos_now_ms();
        if (now >= next_progress) {
            if (next_progress)
                printf("[%7.3f] progress: %ld of %ld jobs confirmed\n",
                       (now - run_start) / 1000.0,
                       __atomic_load_n(&producer.confirmed, __ATOMIC_RELAXED),
                       producer.jobs);
            fflush(stdout);
            next_progress = now + 10000;
        }
        watch_workers();
        if (now >= until_ms)
            return;
        chaos_sleep_ms(until_ms - now > 50 ? 50 : until_ms - now);
    }
}

/* ---- the schedule ------------------------------------------------------- */

static int plan(const options *o, chaos_rng *rng, fault *f) {
    int n = 0;
    for (int k = 0; k < FAULT_KINDS; k++)
        for (int j = 0; j < o->count[k] && n < CHAOS_MAX_FAULTS; j++)
            f[n++].kind = (fault_kind)k;
    for (int i = n - 1; i > 0; i--) { /* Fisher-Yates */
        int j = (int)chaos_range(rng, 0, i);
        fault_kind t = f[i].kind;
        f[i].kind = f[j].kind;
        f[j].kind = t;
    }
    const int64_t first = 2000, window = (int64_t)o->seconds * 1000 - 3000;
    const int64_t slot = n ? window / n : window;
    for (int i = 0; i < n; i++) {
        fault *x = &f[i];
        x->worker = 0;
        switch (x->kind) {
        case FAULT_KILL:
            x->worker = (int)chaos_range(rng, 1, o->workers);
            x->duration_ms = chaos_range(rng, 0, 800);
            break;
        case FAULT_STOP:
            x->worker = (int)chaos_range(rng, 1, o->workers);
            x->duration_ms = CHAOS_CLAIM_MIN_IDLE_MS +
                             2 * CHAOS_CLAIM_INTERVAL_MS +
                             chaos_range(rng, 500, 1500);
            break;
        case FAULT_RESTART:
            x->duration_ms = chaos_range(rng, 100, 1500);
            break;
        case FAULT_DROP:
            x->duration_ms = 0;
            break;
        case FAULT_STALL:
            x->duration_ms =
                chaos_range(rng, 200, CHAOS_COMMAND_TIMEOUT_MS - 700);
            break;
        case FAULT_HALFOPEN:
            x->duration_ms =
                CHAOS_COMMAND_TIMEOUT_MS + CHAOS_BLOCK_MS +
                chaos_range(rng, 1000, 2500);
            break;
        default:
            break;
        }
        int64_t room = slot - x->duration_ms - 1000;
        x->at_ms = first + i * slot + chaos_range(rng, 0, room > 0 ? room : 0);
        x->began_ms = x->ended_ms = 0;
    }
    return n;
}

static void describe(const fault *f, char *buf, size_t size) {
    switch (f->kind) {
    case FAULT_KILL:
        snprintf(buf, size, "SIGKILL worker chaos-%d, restart it after %lld ms",
                 f->worker, (long long)f->duration_ms);
        break;
    case FAULT_STOP:
        snprintf(buf, size, "SIGSTOP worker chaos-%d for %lld ms, then SIGCONT",
                 f->worker, (long long)f->duration_ms);
        break;
    case FAULT_RESTART:
        snprintf(buf, size, "SIGKILL the server, restart it on its AOF after "
                            "%lld ms",
                 (long long)f->duration_ms);
        break;
    case FAULT_DROP:
        snprintf(buf, size, "proxy closes every worker connection");
        break;
    case FAULT_STALL:
        snprintf(buf, size, "proxy freezes for %lld ms (below the command "
                            "timeout)",
                 (long long)f->duration_ms);
        break;
    case FAULT_HALFOPEN:
        snprintf(buf, size, "proxy freezes for %lld ms (half-open: past the "
                            "command timeout)",
                 (long long)f->duration_ms);
        break;
    default:
        snprintf(buf, size, "?");
    }
}

static void inject(fault *f, emq_srv *srv, emq_peer *proxy) {
    char what[160];
    describe(f, what, sizeof what);
    f->began_ms = chaos_now_ms();
    printf("[%7.3f] fault %s: %s\n", (f->began_ms - run_start) / 1000.0,
           chaos_fault_name(f->kind), what);
    fflush(stdout);
    worker *w = &workers[f->worker];
    switch (f->kind) {
    case FAULT_KILL:
        if (w->pid > 0) {
            kill(w->pid, SIGKILL);
            waitpid(w->pid, NULL, 0); /* reaped: its lease is free now */
            w->pid = 0;
        }
        wait_until(chaos_now_ms() + f->duration_ms);
        spawn_worker(f->worker);
        break;
    case FAULT_STOP:
        if (w->pid > 0) {
            kill(w->pid, SIGSTOP);
            wait_until(chaos_now_ms() + f->duration_ms);
            kill(w->pid, SIGCONT);
        }
        break;
    case FAULT_RESTART:
        emq_srv_kill9(srv);
        wait_until(chaos_now_ms() + f->duration_ms);
        emq_srv_restart(srv); /* waits until the AOF is loaded */
        break;
    case FAULT_DROP:
        emq_peer_drop(proxy);
        break;
    case FAULT_STALL:
    case FAULT_HALFOPEN:
        emq_peer_freeze(proxy, 1);
        wait_until(chaos_now_ms() + f->duration_ms);
        emq_peer_freeze(proxy, 0);
        break;
    default:
        break;
    }
    f->ended_ms = chaos_now_ms();
}

/* ---- options ------------------------------------------------------------ */

static void usage(void) {
    fprintf(stderr,
            "usage: chaos [--seed S] [--jobs N] [--workers W] [--seconds T]\n"
            "             [--poison P] [--max-deliveries M] [--kills K]\n"
            "             [--stops K] [--restarts K] [--drops K] [--stalls K]\n"
            "             [--halfopens K] [--drain-seconds D] [--dir PARENT]\n"
            "             [--keep] [--tolerate-worker-exits]\n"
            "Defaults: 200000 jobs, 4 workers, T = max(30, N / 1300) s,\n"
            "10 poison jobs, max_deliveries 3, fault counts from T, D = 120.\n"
            "See docs/RELIABILITY.md.\n");
    exit(2);
}

static long number(const char *flag, const char *v, long lo, long hi) {
    char *end;
    errno = 0;
    long long x = strtoll(v ? v : "", &end, 10);
    if (v == NULL || *end != '\0' || end == v || errno || x < lo || x > hi) {
        fprintf(stderr, "chaos: %s needs a number in [%ld, %ld]\n", flag, lo,
                hi);
        usage();
    }
    return (long)x;
}

static void parse(int argc, char **argv, options *o) {
    static const char *fault_flags[FAULT_KINDS] = {
        "--kills", "--stops", "--restarts", "--drops", "--stalls",
        "--halfopens"};
    memset(o, 0, sizeof *o);
    o->seed = 0;
    int have_seed = 0;
    o->jobs = 200000;
    o->workers = 4;
    o->seconds = -1;
    o->poison = 10;
    o->max_deliveries = 3;
    o->drain_seconds = 120;
    o->parent = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    for (int k = 0; k < FAULT_KINDS; k++)
        o->count[k] = -1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int matched = 0;
        for (int k = 0; k < FAULT_KINDS; k++)
            if (strcmp(a, fault_flags[k]) == 0) {
                o->count[k] = (int)number(a, v, 0, 100);
                matched = 1;
            }
        if (matched) {
            i++;
            continue;
        }
        if (strcmp(a, "--seed") == 0) {
            char *end;
            errno = 0;
            o->seed = strtoull(v ? v : "", &end, 10);
            if (v == NULL || *end || end == v || errno)
                usage();
            have_seed = 1;
            i++;
        } else if (strcmp(a, "--jobs") == 0) {
            o->jobs = number(a, v, 1, 100000000);
            i++;
        } else if (strcmp(a, "--workers") == 0) {
            o->workers = (int)number(a, v, 1, CHAOS_MAX_WORKERS);
            i++;
        } else if (strcmp(a, "--seconds") == 0) {
            o->seconds = (int)number(a, v, 10, 86400);
            i++;
        } else if (strcmp(a, "--poison") == 0) {
            o->poison = number(a, v, 0, 100000);
            i++;
        } else if (strcmp(a, "--max-deliveries") == 0) {
            o->max_deliveries = (int)number(a, v, 1, 100);
            i++;
        } else if (strcmp(a, "--drain-seconds") == 0) {
            o->drain_seconds = (int)number(a, v, 5, 3600);
            i++;
        } else if (strcmp(a, "--dir") == 0 && v) {
            o->parent = v;
            i++;
        } else if (strcmp(a, "--keep") == 0) {
            o->keep = 1;
        } else if (strcmp(a, "--tolerate-worker-exits") == 0) {
            o->tolerate_exits = 1;
        } else {
            usage();
        }
    }
    if (o->poison > o->jobs)
        o->poison = o->jobs;
    if (o->seconds < 0) {
        long t = o->jobs / 1300;
        o->seconds = (int)(t < 30 ? 30 : t);
    }
    if (!have_seed)
        o->seed = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 20);
    int k1 = o->seconds / 30 > 0 ? o->seconds / 30 : 1;
    const int derived[FAULT_KINDS] = {2 * k1, k1, k1, 2 * k1, k1, k1};
    for (int k = 0; k < FAULT_KINDS; k++)
        if (o->count[k] < 0)
            o->count[k] = derived[k];
}

/* ---- cleanup ------------------------------------------------------------- */

static void remove_tree(const char *path) {
    DIR *d = opendir(path);
    if (d) {
        struct dirent *e;
        while ((e = readdir(d)) != NULL) {
            if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
                continue;
            char child[4096];
            snprintf(child, sizeof child, "%s/%s", path, e->d_name);
            struct stat st;
            if (lstat(child, &st) == 0 && S_ISDIR(st.st_mode))
                remove_tree(child);
            else
                unlink(child);
        }
        closedir(d);
    }
    rmdir(path);
}

static void stop_workers(int *slow) {
    for (int i = 1; i <= nworkers; i++)
        if (workers[i].pid > 0)
            kill(workers[i].pid, SIGTERM);
    /* A graceful stop returns within block_ms plus one handler. */
    int64_t deadline = chaos_now_ms() + CHAOS_BLOCK_MS +
                       CHAOS_COMMAND_TIMEOUT_MS + 5000;
    for (int i = 1; i <= nworkers; i++) {
        while (workers[i].pid > 0) {
            int status;
            pid_t w = waitpid(workers[i].pid, &status, WNOHANG);
            if (w == workers[i].pid) {
                if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
                    printf("worker chaos-%d stopped with %s %d; see "
                           "%s/chaos-%d.log\n",
                           i, WIFEXITED(status) ? "status" : "signal",
                           WIFEXITED(status) ? WEXITSTATUS(status)
                                             : WTERMSIG(status),
                           run_dir, i);
                    workers_died++;
                }
                workers[i].pid = 0;
                break;
            }
            if (chaos_now_ms() > deadline) {
                printf("VIOLATION: worker chaos-%d did not stop in time "
                       "after SIGTERM; killed\n",
                       i);
                kill(workers[i].pid, SIGKILL);
                waitpid(workers[i].pid, NULL, 0);
                workers[i].pid = 0;
                (*slow)++;
                break;
            }
            chaos_sleep_ms(20);
        }
    }
}

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "--worker") == 0)
        return chaos_worker_main(argc - 2, argv + 2);
    setvbuf(stdout, NULL, _IOLBF, 0);
    signal(SIGPIPE, SIG_IGN);
    options o;
    parse(argc, argv, &o);
    ssize_t len = readlink("/proc/self/exe", self_exe, sizeof self_exe - 1);
    if (len <= 0) {
        fprintf(stderr, "chaos: cannot find its own executable\n");
        return 2;
    }
    self_exe[len] = '\0';
    snprintf(run_dir, sizeof run_dir, "%s/emq-chaos-%llu-XXXXXX", o.parent,
             (unsigned long long)o.seed);
    if (mkdtemp(run_dir) == NULL) {
        fprintf(stderr, "chaos: mkdtemp %s: %s\n", run_dir, strerror(errno));
        return 2;
    }
    chaos_set_tmpdir(run_dir);
    snprintf(maxd_text, sizeof maxd_text, "%d", o.max_deliveries);
    nworkers = o.workers;

    /* Everything random comes from the seed, in this order. */
    chaos_rng rng = {o.seed};
    static fault faults[CHAOS_MAX_FAULTS];
    int nfaults = plan(&o, &rng, faults);
    uint8_t *poison = calloc((size_t)o.jobs, 1);
    uint8_t *resent = calloc((size_t)o.jobs, 1);
    if (!poison || !resent) {
        fprintf(stderr, "chaos: out of memory\n");
        return 2;
    }
    for (long placed = 0; placed < o.poison;) {
        long j = (long)chaos_range(&rng, 0, o.jobs - 1);
        if (!poison[j]) {
            poison[j] = 1;
            placed++;
        }
    }

    printf("chaos: seed %llu, %ld jobs (%ld poison, max_deliveries %d), %d "
           "workers, %d s of faults, drain up to %d s\n",
           (unsigned long long)o.seed, o.jobs, o.poison, o.max_deliveries,
           o.workers, o.seconds, o.drain_seconds);
    printf("chaos: reproduce with: chaos --seed %llu --jobs %ld --workers %d "
           "--seconds %d --poison %ld --max-deliveries %d --kills %d --stops "
           "%d --restarts %d --drops %d --stalls %d --halfopens %d\n",
           (unsigned long long)o.seed, o.jobs, o.workers, o.seconds, o.poison,
           o.max_deliveries, o.count[FAULT_KILL], o.count[FAULT_STOP],
           o.count[FAULT_RESTART], o.count[FAULT_DROP], o.count[FAULT_STALL],
           o.count[FAULT_HALFOPEN]);
    printf("chaos: run folder %s\n", run_dir);
    printf("chaos: schedule of %d faults:\n", nfaults);
    for (int i = 0; i < nfaults; i++) {
        char what[160];
        describe(&faults[i], what, sizeof what);
        printf("  %3d  at %7.3f s  %-15s %s\n", i + 1,
               faults[i].at_ms / 1000.0, chaos_fault_name(faults[i].kind),
               what);
    }

    emq_srv_opts so;
    memset(&so, 0, sizeof so);
    so.transport = EMQ_SRV_TCP;
    so.appendonly = 1;
    so.start_timeout_ms = 60000;
    emq_srv *srv = emq_srv_start(&so);
    emq_peer_opts po;
    memset(&po, 0, sizeof po);
    po.mode = EMQ_PEER_PROXY;
    po.upstream_port = emq_srv_port(srv);
    emq_peer *proxy = emq_peer_start(&po);
    snprintf(proxy_url, sizeof proxy_url, "%s", emq_peer_url(proxy));
    char admin_url[700];
    snprintf(admin_url, sizeof admin_url, "unix://%s", emq_srv_socket(srv));
    printf("chaos: redis-server pid %ld at %s; workers connect through the "
           "proxy %s\n",
           (long)emq_srv_pid(srv), emq_srv_url(srv), proxy_url);

    run_start = chaos_now_ms();
    for (int i = 1; i <= o.workers; i++)
        spawn_worker(i);

    producer.url = emq_srv_url(srv);
    producer.jobs = o.jobs;
    producer.poison = poison;
    producer.resent = resent;
    producer.start_ms = run_start + 500;
    producer.rate = (double)o.jobs / (o.seconds - 3 > 1 ? o.seconds - 3 : 1);
    producer.deadline_ms =
        run_start + (int64_t)(o.seconds + o.drain_seconds + 60) * 1000;
    producer.seed = o.seed;
    pthread_t producer_thread;
    if (pthread_create(&producer_thread, NULL, chaos_produce, &producer) !=
        0) {
        fprintf(stderr, "chaos: cannot start the producer thread\n");
        return 2;
    }

    for (int i = 0; i < nfaults; i++) {
        wait_until(run_start + faults[i].at_ms);
        inject(&faults[i], srv, proxy);
    }
    wait_until(run_start + (int64_t)o.seconds * 1000);
    while (!__atomic_load_n(&producer.done, __ATOMIC_ACQUIRE))
        wait_until(chaos_now_ms() + 100); /* bounded by its deadline */
    pthread_join(producer_thread, NULL);
    printf("[%7.3f] producer done: %ld jobs confirmed, %ld batch retries%s%s\n",
           (chaos_now_ms() - run_start) / 1000.0, producer.confirmed,
           producer.resends, producer.failed ? "; GAVE UP: " : "",
           producer.failed ? producer.why : "");

    /* Drain: nothing pending, nothing undelivered. */
    int drained = 0;
    int64_t drain_deadline = chaos_now_ms() + (int64_t)o.drain_seconds * 1000;
    long long pending = -1;
    int behind = 1;
    while (chaos_now_ms() < drain_deadline) {
        if (chaos_drained(admin_url, &pending, &behind) == 0 && pending == 0 &&
            !behind) {
            drained = 1;
            break;
        }
        wait_until(chaos_now_ms() + 500);
    }
    printf("[%7.3f] %s (pending %lld, %s)\n",
           (chaos_now_ms() - run_start) / 1000.0,
           drained ? "drained" : "NOT drained before the deadline", pending,
           behind ? "entries not yet delivered" : "every entry delivered");
    int slow = 0;
    stop_workers(&slow);
    for (int i = 1; i <= o.workers; i++)
        if (workers[i].starts > 1)
            printf("worker chaos-%d was started %d times\n", i,
                   workers[i].starts);

    chaos_run run = {
        .seed = o.seed,
        .jobs = o.jobs,
        .workers = o.workers,
        .max_deliveries = o.max_deliveries,
        .dir = run_dir,
        .admin_url = admin_url,
        .poison = poison,
        .resent = resent,
        .faults = faults,
        .nfaults = nfaults,
        .workers_died = workers_died + slow,
        .tolerate_exits = o.tolerate_exits,
        .producer_failed = producer.failed,
        .drained = drained,
    };
    int verdict = chaos_check(&run);
    emq_peer_stop(proxy);
    emq_srv_stop(srv);
    free(poison);
    free(resent);
    if (verdict == 0 && !o.keep) {
        remove_tree(run_dir);
    } else {
        printf("chaos: run folder kept: %s (ledgers chaos-*.ledger, worker "
               "logs chaos-*.log, server in srv-1/)\n",
               run_dir);
    }
    return verdict;
}
