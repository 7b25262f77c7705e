/* SPDX-License-Identifier: BSD-3-Clause */
/* main.c: the chaos harness's orchestrator (build/chaos).
 *
 *   chaos [--seed S] [--jobs N] [--workers W] [--pidns-workers K]
 *         [--seconds T] [--poison P] [--max-deliveries M]
 *         [--claim-idle MS] [--lease-ttl MS]
 *         [--handler-short-ms MS] [--handler-long-permille L]
 *         [--handler-max-ms MS] [--retry-permille R] [--retry-backoff MS]
 *         [--retry-backoff-max MS] [--settle-slack MS]
 *         [--kills K] [--stops K] [--restarts K] [--drops K] [--stalls K]
 *         [--halfopens K] [--stops-long K] [--intruders K] [--misconfs K]
 *         [--upkeep-kills K] [--lease-dels K] [--evictions K]
 *         [--peer-claims K] [--stops-pull K] [--pull-workers K]
 *         [--cluster] [--migrations K] [--sentinel] [--failovers K]
 *         [--big-jobs N] [--big-max-mb MB] [--dead-jobs N]
 *         [--wide-fields F] [--max-reply-bytes B] [--faults LIST]
 *         [--tolerate LIST]
 *         [--drain-seconds D] [--dir PARENT] [--keep]
 *         [--tolerate-worker-exits] [--allow-unknown-conf] [--exact]
 *
 * In a fresh run folder under PARENT (default /tmp) it starts a private
 * redis-server (appendonly yes, appendfsync always, loopback TCP plus a
 * unix socket), a fault-injecting TCP proxy in front of it for the workers,
 * W worker processes chaos-1..chaos-W plus K more (chaos-W+1..) each in
 * its own PID namespace (unshare --pid --fork --mount-proc; only as root,
 * skipped with a printed reason otherwise), all this executable re-run
 * with --worker, and a producer thread that publishes N jobs, P of them
 * poison, paced over T seconds. Every job carries its plan drawn from the
 * seed: a handler duration (most 1..short ms, L per mille long: up to
 * --handler-max-ms, by default 3 x claim idle) and, for R per mille of the
 * healthy jobs, 1 or 2 retries it asks for (EMQ_RETRY) before it succeeds.
 * A schedule drawn from the seed spreads the faults over those T seconds,
 * one at a time, and the run prints it first and each fault as it
 * happens. The last --pull-workers plain workers run in pull mode; a block
 * of --big-jobs consecutive jobs carries 1..8 MB blobs (the workers then
 * have resp.max_reply_bytes 10 MB), and --dead-jobs jobs, answered
 * EMQ_DEAD, carry thousands of fields. --faults LIST, then the
 * environment's EMQ_CHAOS_FAULTS, have the last word on every count
 * (apply_fault_list). When the producer is done and the window over, it waits
 * (at most D seconds) for the group to have nothing pending and nothing
 * undelivered, stops the workers with SIGTERM, and runs the checker
 * (check.c), which prints the verdict. Exit status: 0 when every promise
 * held, 1 on a violation, 2 when the run could not be set up. The run
 * folder (ledgers, worker logs, server log and AOF) is removed after a
 * pass unless --keep is given, and kept after a failure. A worker that
 * exits on its own is restarted (after 1 s when it had just started) and
 * counted as a violation, unless --tolerate-worker-exits is given (then it
 * is only reported).
 *
 * Bounds: every wait has a deadline; the producer gives up at T + D + 60 s;
 * workers and the server die with the orchestrator (PR_SET_PDEATHSIG, and
 * unshare --kill-child for the namespaced ones). Only loopback addresses
 * are used.
 */
#include "chaos.h"
#include "harness/cluster.h"
#include "harness/fakepeer.h"
#include "harness/server.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stddef.h>
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
    int pidns_workers;
    int seconds;
    long poison;
    long crash_jobs; /* of the poison jobs, those that kill their worker */
    int max_deliveries;
    int count[FAULT_KINDS]; /* -1: derived from seconds */
    int drain_seconds;
    long claim_idle_ms;
    long lease_ttl_ms;
    long short_ms;
    long long_permille;
    long handler_max_ms; /* 0: 3 x claim idle */
    long retry_permille;
    long retry_backoff_ms;
    long retry_backoff_max_ms;
    long settle_slack_ms;
    const char *parent;
    int keep;
    int tolerate_exits;
    int tolerate_unseen;       /* --tolerate unseen-dead */
    int tolerate_undercounted; /* --tolerate undercounted */
    int tolerate_fields;       /* --tolerate dead-fields */
    int allow_unknown;
    int exact;        /* --exact: the workers run with deliveries.exact 1 */
    int pull_workers; /* of the plain workers, the last K poll */
    int cluster;      /* a 3-master cluster instead of one server */
    int sentinel;     /* a primary, two replicas and three Sentinels */
    long big_jobs;    /* jobs with a 1..big_max_mb MB blob field */
    long big_max_mb;
    long dead_jobs;       /* jobs whose handler answers EMQ_DEAD */
    long wide_fields;     /* dead jobs carry wide/2..wide extra fields */
    long max_reply_bytes; /* the workers' resp.max_reply_bytes; -1: 10 MB
                             when there are big jobs, else the default */
} options;

static options opt;

/* ---- workers ------------------------------------------------------------ */

typedef struct worker {
    pid_t pid;    /* the child we wait for (unshare for a pidns one) */
    pid_t target; /* the worker process itself: what signals go to */
    int starts;   /* incarnations so far; the current one is starts */
    int pidns;    /* runs in its own PID namespace */
    int64_t last_start;
    int64_t respawn_at;     /* after an exit nobody asked for; 0: none due */
    int64_t died_ms;        /* when its last incarnation ended (any way) */
    int pull;               /* driven by emq_consumer_poll (mode=pull) */
    int64_t intruded_until; /* an intruder episode on its name, and a lease
                               TTL after it: an exit with "lost its lease"
                               until then is the intruder's doing, judged
                               by the checker; 0: none */
} worker;

static worker workers[CHAOS_MAX_WORKERS + 1];
static int nworkers; /* plain + pidns */
static char self_exe[4096];
static char unshare_exe[256];
static char run_dir[600];
static char proxy_url[128];
static int workers_died;
/* Workers that died on a crash job: each a kill the checker knows of (a
 * FAULT_KILL record, so what the worker held explains its duplicates). */
static fault crash_deaths[CHAOS_MAX_FAULTS];
static int ncrash_deaths;

static const job_plan *job_plans; /* every job's plan, for the aiming */
static int in_handler(int i, long *job, char *id, size_t size);
static int file_has(const char *path, const char *needle, char *line,
                    size_t size);
static int64_t run_start;
static emq_cl *cluster; /* --cluster: 3 masters (a replica each with
                           --failovers) */
static chaos_settings settings;

/* The pid of the only child of an unshare process (the worker, pid 1 in
 * its namespace), from /proc; 0 when it has none (yet). */
static pid_t child_of(pid_t parent) {
    char path[128], buf[128];
    snprintf(path, sizeof path, "/proc/%ld/task/%ld/children", (long)parent,
             (long)parent);
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return 0;
    long child = 0;
    if (fgets(buf, sizeof buf, f))
        child = strtol(buf, NULL, 10);
    fclose(f);
    return (pid_t)child;
}

/* 1 when pid has exited (a zombie nobody reaped yet) or is gone. */
static int is_zombie(pid_t pid) {
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%ld/stat", (long)pid);
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return 1;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    const char *p = strrchr(buf, ')');
    return p == NULL || p[1] == '\0' || p[2] == 'Z' || p[2] == 'X';
}

/* Starts one worker process: the consumer `name`, writing ledger (a file
 * of the run folder) as ledger worker id `id`, incarnation inc, its output
 * going to log. With pidns, under unshare --pid --fork --mount-proc
 * --kill-child. *target is the worker process (the grandchild then). */
static pid_t spawn_process(const char *name, int id, int inc,
                           const char *ledger, const char *log, int pidns,
                           int pull, pid_t *target) {
    char a_name[64], a_id[32], a_inc[32], a_url[200], a_ledger[800], a_maxd[32],
        a_idle[48], a_ttl[48], a_backoff[48], a_bmax[48], a_allow[32],
        a_mode[16], a_reply[48], a_exact[16], logpath[800];
    snprintf(a_name, sizeof a_name, "name=%s", name);
    snprintf(a_id, sizeof a_id, "id=%d", id);
    snprintf(a_inc, sizeof a_inc, "inc=%d", inc);
    snprintf(a_url, sizeof a_url, "url=%s", proxy_url);
    snprintf(a_ledger, sizeof a_ledger, "ledger=%s/%s", run_dir, ledger);
    snprintf(a_maxd, sizeof a_maxd, "maxd=%d", opt.max_deliveries);
    snprintf(a_idle, sizeof a_idle, "idle=%ld", opt.claim_idle_ms);
    snprintf(a_ttl, sizeof a_ttl, "ttl=%ld", opt.lease_ttl_ms);
    snprintf(a_backoff, sizeof a_backoff, "backoff=%ld", opt.retry_backoff_ms);
    snprintf(a_bmax, sizeof a_bmax, "backoff_max=%ld",
             opt.retry_backoff_max_ms);
    snprintf(a_allow, sizeof a_allow, "allow_unknown=%d", opt.allow_unknown);
    snprintf(a_mode, sizeof a_mode, "mode=%s", pull ? "pull" : "run");
    snprintf(a_reply, sizeof a_reply, "maxreply=%ld",
             opt.max_reply_bytes > 0 ? opt.max_reply_bytes : 0);
    snprintf(a_exact, sizeof a_exact, "exact=%d", opt.exact);
    snprintf(logpath, sizeof logpath, "%s/%s", run_dir, log);
    char *plain[] = {self_exe,  "--worker",  a_name,  a_id,   a_inc,
                     a_url,     a_ledger,    a_maxd,  a_idle, a_ttl,
                     a_backoff, a_bmax,      a_allow, a_mode, a_reply,
                     a_exact,   (char *)NULL};
    char *ns[] = {unshare_exe,    "--pid",     "--fork",   "--mount-proc",
                  "--kill-child", self_exe,    "--worker", a_name,
                  a_id,           a_inc,       a_url,      a_ledger,
                  a_maxd,         a_idle,      a_ttl,      a_backoff,
                  a_bmax,         a_allow,     a_mode,     a_reply,
                  a_exact,        (char *)NULL};
    char **argv = pidns ? ns : plain;
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
        /* A SIGTERM (the end of the run) that comes before the worker's
         * handler is in place waits for it (worker.c unblocks it): the
         * default action would count as a worker's death. */
        sigset_t term;
        sigemptyset(&term);
        sigaddset(&term, SIGTERM);
        sigprocmask(SIG_BLOCK, &term, NULL);
        int fd = open(logpath, O_WRONLY | O_CREAT | O_APPEND, 0600);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
            close(fd);
        }
        execv(argv[0], argv);
        _exit(127);
    }
    *target = pid;
    if (pidns) {
        /* Signals go to the worker itself, not to unshare. */
        int64_t until = chaos_now_ms() + 3000;
        pid_t c = 0;
        while ((c = child_of(pid)) == 0 && chaos_now_ms() < until &&
               !is_zombie(pid))
            chaos_sleep_ms(5);
        if (c > 0)
            *target = c;
        else if (!is_zombie(pid))
            printf("chaos: WARNING: no child of unshare %ld found; signals "
                   "go to unshare\n",
                   (long)pid);
    }
    return pid;
}

static pid_t spawn_worker(int i) {
    char name[32], ledger[64], log[64];
    snprintf(name, sizeof name, "chaos-%d", i);
    snprintf(ledger, sizeof ledger, "chaos-%d.ledger", i);
    snprintf(log, sizeof log, "chaos-%d.log", i);
    worker *w = &workers[i];
    w->starts++;
    w->pid = spawn_process(name, i, w->starts, ledger, log, w->pidns, w->pull,
                           &w->target);
    w->last_start = chaos_now_ms();
    w->respawn_at = 0;
    return w->pid;
}

/* Ends a worker's process for good (SIGKILL), reaping it. */
static void kill_worker(worker *w) {
    if (w->pid <= 0)
        return;
    w->died_ms = chaos_now_ms();
    kill(w->target, SIGKILL);
    if (w->target != w->pid) {
        /* unshare follows its child; bounded, then force it. */
        int64_t until = chaos_now_ms() + 3000;
        while (waitpid(w->pid, NULL, WNOHANG) != w->pid) {
            if (chaos_now_ms() > until) {
                kill(w->pid, SIGKILL);
                waitpid(w->pid, NULL, 0);
                break;
            }
            chaos_sleep_ms(5);
        }
    } else {
        waitpid(w->pid, NULL, 0);
    }
    w->pid = w->target = 0;
}

/* Reaps workers that exited although nobody asked, and restarts them (a
 * worker that exits within 2 s of its start is restarted after 1 s, so a
 * refused start does not become a tight loop). */
static void watch_workers(void) {
    int64_t now = chaos_now_ms();
    for (int i = 1; i <= nworkers; i++) {
        worker *w = &workers[i];
        if (w->pid <= 0) {
            if (w->respawn_at && now >= w->respawn_at)
                spawn_worker(i);
            continue;
        }
        int status;
        pid_t r = waitpid(w->pid, &status, WNOHANG);
        if (r != w->pid)
            continue;
        w->died_ms = now;
        char log[700];
        snprintf(log, sizeof log, "%s/chaos-%d.log", run_dir, i);
        long job = -1;
        char in_id[32];
        if (in_handler(i, &job, in_id, sizeof in_id) && job >= 0 &&
            job_plans[job].crash) {
            printf("[%7.3f]   worker chaos-%d (incarnation %d) died on crash "
                   "job %ld (entry %s), as planned; restarting it\n",
                   (now - run_start) / 1000.0, i, w->starts, job, in_id);
            if (ncrash_deaths < CHAOS_MAX_FAULTS) {
                fault *f = &crash_deaths[ncrash_deaths++];
                memset(f, 0, sizeof *f);
                f->kind = FAULT_KILL;
                f->worker = i;
                f->inc = w->starts;
                f->began_ms = f->ended_ms = now;
                snprintf(f->detail, sizeof f->detail, "crash job %ld", job);
            }
        } else if (now <= w->intruded_until &&
                   file_has(log, "lost its lease", NULL, 0)) {
            /* Its name was taken: the checker decides whether that broke
             * the promise (calls of the intruder while it lived) or was
             * the lease's own limit (a write outage past the TTL). */
            printf("[%7.3f]   worker chaos-%d (incarnation %d) stopped: "
                   "the intruder holds its name (lost its lease); "
                   "restarting it\n",
                   (now - run_start) / 1000.0, i, w->starts);
        } else {
            workers_died++;
            printf("[%7.3f] VIOLATION: worker chaos-%d (incarnation %d) "
                   "exited on its own (%s %d); see %s; restarting it\n",
                   (now - run_start) / 1000.0, i, w->starts,
                   WIFEXITED(status) ? "status" : "signal",
                   WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status),
                   log);
        }
        w->pid = w->target = 0;
        w->respawn_at = now - w->last_start < 2000 ? now + 1000 : now;
        if (w->respawn_at == now)
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
    int n = 0, intruders = 0, failovers = 0;
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
            x->worker = (int)chaos_range(rng, 1, nworkers);
            x->duration_ms = chaos_range(rng, 0, 800);
            break;
        case FAULT_STOP:
            x->worker = (int)chaos_range(rng, 1, nworkers);
            x->duration_ms = o->claim_idle_ms + 2 * CHAOS_CLAIM_INTERVAL_MS +
                             chaos_range(rng, 500, 1500);
            break;
        case FAULT_STOP_LONG:
            x->worker = (int)chaos_range(rng, 1, nworkers);
            x->duration_ms = o->lease_ttl_ms + chaos_range(rng, 1000, 2000);
            break;
        case FAULT_INTRUDER:
            /* A plain worker's name; every second intruder (when PID
             * namespaces can be had) starts in its own namespace, where
             * the holder's pid means nothing. */
            x->worker = (int)chaos_range(rng, 1, o->workers);
            x->pidns = (intruders++ % 2) == 1;
            /* Long enough for a waiting intruder to decide: the new core
             * waits up to ttl + 1 s, then refuses. */
            x->duration_ms = o->lease_ttl_ms + 2000;
            break;
        case FAULT_MISCONF:
            x->duration_ms = chaos_range(rng, 2000, 4000);
            break;
        case FAULT_UPKEEP_KILL:
            /* Long enough for two or three renewals (every TTL / 3) to
             * be lost: the lease's local deadline passes under it. */
            x->worker = (int)chaos_range(rng, 1, nworkers);
            x->duration_ms = chaos_range(rng, o->lease_ttl_ms * 3 / 5,
                                         o->lease_ttl_ms + 1000);
            break;
        case FAULT_LEASE_DEL:
            x->worker = (int)chaos_range(rng, 1, nworkers);
            x->duration_ms = 0;
            break;
        case FAULT_EVICT:
            x->duration_ms = chaos_range(rng, 2000, 4000);
            break;
        case FAULT_PEER_CLAIM:
            x->duration_ms = 0;
            break;
        case FAULT_MIGRATE:
            x->duration_ms = chaos_range(rng, 3000, 5000);
            break;
        case FAULT_FAILOVER:
            /* Every other one a SIGSTOP of the primary for this long
             * (past down-after-milliseconds 1000: the Sentinels fail it
             * over), else SENTINEL FAILOVER (0). */
            x->duration_ms = (failovers++ % 2) ? chaos_range(rng, 3000, 5000)
                                               : 0;
            break;
        case FAULT_STOP_PULL:
            /* The pull-mode workers are the last pull_workers plain ones
             * (a count of 0 when there are none). */
            x->worker = o->workers - o->pull_workers +
                        (int)chaos_range(rng, 1, o->pull_workers);
            x->duration_ms = o->lease_ttl_ms + chaos_range(rng, 1000, 2000);
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
            x->duration_ms = CHAOS_COMMAND_TIMEOUT_MS + CHAOS_BLOCK_MS +
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
        snprintf(buf, size,
                 "SIGKILL the server, restart it on its AOF after "
                 "%lld ms",
                 (long long)f->duration_ms);
        break;
    case FAULT_DROP:
        snprintf(buf, size, "proxy closes every worker connection");
        break;
    case FAULT_STALL:
        snprintf(buf, size,
                 "proxy freezes for %lld ms (below the command "
                 "timeout)",
                 (long long)f->duration_ms);
        break;
    case FAULT_HALFOPEN:
        snprintf(buf, size,
                 "proxy freezes for %lld ms (half-open: past the "
                 "command timeout)",
                 (long long)f->duration_ms);
        break;
    case FAULT_STOP_LONG:
        snprintf(buf, size,
                 "SIGSTOP worker chaos-%d for %lld ms (past the "
                 "lease TTL), then SIGCONT",
                 f->worker, (long long)f->duration_ms);
        break;
    case FAULT_INTRUDER:
        snprintf(buf, size,
                 "start a second process named chaos-%d%s while "
                 "it lives; stop it after %lld ms",
                 f->worker, f->pidns ? " in its own PID namespace" : "",
                 (long long)f->duration_ms);
        break;
    case FAULT_MISCONF:
        snprintf(buf, size,
                 "the server's dir vanishes under a failed BGSAVE "
                 "(MISCONF) for %lld ms, then restored",
                 (long long)f->duration_ms);
        break;
    case FAULT_UPKEEP_KILL:
        snprintf(buf, size,
                 "CLIENT KILL the upkeep connection of chaos-%d "
                 "(or of a worker in a long handler) every "
                 "300-400 ms for %lld ms",
                 f->worker, (long long)f->duration_ms);
        break;
    case FAULT_LEASE_DEL:
        snprintf(buf, size,
                 "DEL the lease key of chaos-%d (or of a worker in "
                 "a long handler)",
                 f->worker);
        break;
    case FAULT_EVICT:
        snprintf(buf, size,
                 "maxmemory just above use, volatile-lru, TTL'd "
                 "junk written for %lld ms, then restored",
                 (long long)f->duration_ms);
        break;
    case FAULT_PEER_CLAIM:
        snprintf(buf, size,
                 "XCLAIM up to 3 pending entries (those in a "
                 "handler first) to a made-up consumer that "
                 "never comes back");
        break;
    case FAULT_MIGRATE:
        snprintf(buf, size,
                 "migrate the queue's slot to another master: MIGRATING "
                 "held %lld ms, then the keys, then SETSLOT NODE",
                 (long long)f->duration_ms);
        break;
    case FAULT_FAILOVER:
        if (cluster && f->duration_ms > 0)
            snprintf(buf, size,
                     "SIGKILL the queue's master: its replica takes over, "
                     "the master restarted after %lld ms",
                     (long long)f->duration_ms);
        else if (cluster)
            snprintf(buf, size, "CLUSTER FAILOVER on the queue's replica");
        else if (f->duration_ms > 0)
            snprintf(buf, size,
                     "SIGSTOP the primary for %lld ms: the Sentinels fail "
                     "it over (down-after 1000 ms), then SIGCONT",
                     (long long)f->duration_ms);
        else
            snprintf(buf, size, "SENTINEL FAILOVER");
        break;
    case FAULT_STOP_PULL:
        snprintf(buf, size,
                 "SIGSTOP pull-mode worker chaos-%d for %lld ms "
                 "(past the lease TTL), then SIGCONT",
                 f->worker, (long long)f->duration_ms);
        break;
    default:
        snprintf(buf, size, "?");
    }
}

/* ---- the MISCONF episode ------------------------------------------------ */

/* The value of "name:" in an INFO reply, into out; "" when absent. */
static void info_field(const char *info, const char *name, char *out,
                       size_t size) {
    out[0] = '\0';
    size_t n = strlen(name);
    for (const char *p = info; (p = strstr(p, name)) != NULL; p += n) {
        if ((p == info || p[-1] == '\n') && p[n] == ':') {
            size_t k = strcspn(p + n + 1, "\r\n");
            if (k >= size)
                k = size - 1;
            memcpy(out, p + n + 1, k);
            out[k] = '\0';
            return;
        }
    }
}

/* Polls INFO persistence until field has value want (bounded). */
static int wait_info(emq_srv *srv, const char *field, const char *want,
                     int64_t timeout_ms) {
    static char info[16384];
    char v[64];
    int64_t until = chaos_now_ms() + timeout_ms;
    do {
        if (emq_srv_cmd(srv, info, sizeof info, "INFO", "persistence", NULL) >
            0) {
            info_field(info, field, v, sizeof v);
            if (strcmp(v, want) == 0)
                return 0;
        }
        wait_until(chaos_now_ms() + 20);
    } while (chaos_now_ms() < until);
    return -1;
}

/* A server whose working folder vanished under a failed BGSAVE: with
 * stop-writes-on-bgsave-error yes (and a save point, without which redis
 * does not refuse writes) every write, XREADGROUP and XACK included, gets
 * MISCONF until a BGSAVE succeeds. The AOF is untouched: the server keeps
 * appending (appendfsync always) to the file it has open in its real
 * folder; an AOF rewrite, which would create files under the current
 * folder, is waited out first and disabled for the episode; and dir,
 * save and auto-aof-rewrite-percentage are put back before it ends. A
 * server kill during the episode cannot happen (faults never overlap) and
 * would restart on the config file, which still names the real folder. */
static void misconf_episode(fault *f, emq_srv *srv) {
    static char out[16384];
    char dir[600] = "", save[128] = "", rewrite[32] = "100", scratch[700];
    snprintf(scratch, sizeof scratch, "%s/misconf-scratch", run_dir);
    const char *step = "";
    int ok = 0;
    f->outcome = 0;
    step = "waiting for no AOF rewrite and no BGSAVE in progress";
    if (wait_info(srv, "aof_rewrite_in_progress", "0", 20000) ||
        wait_info(srv, "aof_rewrite_scheduled", "0", 20000) ||
        wait_info(srv, "rdb_bgsave_in_progress", "0", 20000))
        goto fail;
    step = "CONFIG GET dir / save / auto-aof-rewrite-percentage";
    if (emq_srv_cmd(srv, out, sizeof out, "CONFIG", "GET", "dir", NULL) != '*')
        goto fail;
    { /* "dir\n<value>" */
        char *nl = strchr(out, '\n');
        if (nl == NULL)
            goto fail;
        snprintf(dir, sizeof dir, "%s", nl + 1);
    }
    if (emq_srv_cmd(srv, out, sizeof out, "CONFIG", "GET", "save", NULL) ==
        '*') {
        char *nl = strchr(out, '\n');
        snprintf(save, sizeof save, "%s", nl ? nl + 1 : "");
    }
    if (emq_srv_cmd(srv, out, sizeof out, "CONFIG", "GET",
                    "auto-aof-rewrite-percentage", NULL) == '*') {
        char *nl = strchr(out, '\n');
        if (nl)
            snprintf(rewrite, sizeof rewrite, "%s", nl + 1);
    }
    step = "CONFIG SET auto-aof-rewrite-percentage 0, save, "
           "stop-writes-on-bgsave-error yes";
    if (emq_srv_cmd(srv, out, sizeof out, "CONFIG", "SET",
                    "auto-aof-rewrite-percentage", "0", NULL) != '+' ||
        emq_srv_cmd(srv, out, sizeof out, "CONFIG", "SET", "save",
                    "86400 1000000000", NULL) != '+' ||
        emq_srv_cmd(srv, out, sizeof out, "CONFIG", "SET",
                    "stop-writes-on-bgsave-error", "yes", NULL) != '+')
        goto restore;
    step = "mkdir + CONFIG SET dir to the scratch folder";
    if (mkdir(scratch, 0700) != 0 && errno != EEXIST)
        goto restore;
    if (emq_srv_cmd(srv, out, sizeof out, "CONFIG", "SET", "dir", scratch,
                    NULL) != '+')
        goto restore;
    rmdir(scratch); /* the folder vanishes */
    /* A rewrite or save already under way refuses the BGSAVE: waited out
     * (auto-aof-rewrite is off from here; a loaded machine slows them). */
    step = "waiting for a rewrite or save under way to end";
    if (wait_info(srv, "aof_rewrite_in_progress", "0", 60000) ||
        wait_info(srv, "rdb_bgsave_in_progress", "0", 60000))
        goto restore;
    step = "BGSAVE into the vanished folder";
    if (emq_srv_cmd(srv, out, sizeof out, "BGSAVE", NULL) != '+')
        goto restore;
    step = "waiting for the BGSAVE to fail";
    if (wait_info(srv, "rdb_last_bgsave_status", "err", 10000))
        goto restore;
    /* The probe: a write outside the queue's keys must be refused. */
    int type = emq_srv_cmd(srv, out, sizeof out, "SET", "chaos-misconf-probe",
                           "1", NULL);
    ok = type == '-' && strncmp(out, "MISCONF", 7) == 0;
    printf("[%7.3f]   misconf: BGSAVE failed; a write now gets: %.80s\n",
           (chaos_now_ms() - run_start) / 1000.0, out);
    wait_until(chaos_now_ms() + f->duration_ms);
restore:
    /* Put everything back, whatever happened above. */
    mkdir(scratch, 0700);
    if (dir[0] && emq_srv_cmd(srv, out, sizeof out, "CONFIG", "SET", "dir", dir,
                              NULL) != '+') {
        step = "CONFIG SET dir back";
        ok = 0;
    }
    rmdir(scratch);
    if (emq_srv_cmd(srv, out, sizeof out, "BGSAVE", NULL) != '+' ||
        wait_info(srv, "rdb_bgsave_in_progress", "0", 60000) ||
        wait_info(srv, "rdb_last_bgsave_status", "ok", 1000)) {
        if (ok)
            step = "the restoring BGSAVE";
        ok = 0;
    }
    emq_srv_cmd(srv, out, sizeof out, "CONFIG", "SET", "save", save, NULL);
    emq_srv_cmd(srv, out, sizeof out, "CONFIG", "SET",
                "auto-aof-rewrite-percentage", rewrite, NULL);
    emq_srv_cmd(srv, out, sizeof out, "DEL", "chaos-misconf-probe", NULL);
    {
        char dump[800];
        snprintf(dump, sizeof dump, "%s/dump.rdb", dir);
        unlink(dump); /* appendonly yes: the server never loads it */
    }
    if (emq_srv_cmd(srv, out, sizeof out, "INFO", "persistence", NULL) > 0) {
        char aof[32];
        info_field(out, "aof_last_write_status", aof, sizeof aof);
        if (strcmp(aof, "ok") != 0) {
            step = "the AOF (aof_last_write_status is not ok)";
            ok = 0;
        }
    }
    if (ok) {
        f->outcome = 1;
        snprintf(f->detail, sizeof f->detail, /* a long dir is cut */
                 "MISCONF held %lld ms, then dir %.200s restored, BGSAVE ok, "
                 "AOF ok",
                 (long long)f->duration_ms, dir);
        printf("[%7.3f]   misconf: restored (dir %s, BGSAVE ok, AOF writes "
               "ok)\n",
               (chaos_now_ms() - run_start) / 1000.0, dir);
        return;
    }
fail:
    snprintf(f->detail, sizeof f->detail, "episode failed at: %s (%.80s)", step,
             out);
    printf("[%7.3f]   misconf: SETUP PROBLEM: %s\n",
           (chaos_now_ms() - run_start) / 1000.0, f->detail);
}

/* ---- the intruder ------------------------------------------------------- */

static int pidns_ok;
static char pidns_why[200];

static int file_has(const char *path, const char *needle, char *line,
                    size_t size) {
    FILE *fp = fopen(path, "r");
    if (fp == NULL)
        return 0;
    char buf[2048];
    int found = 0;
    while (!found && fgets(buf, sizeof buf, fp))
        if (strstr(buf, needle)) {
            found = 1;
            if (line) {
                buf[strcspn(buf, "\n")] = '\0';
                snprintf(line, size, "%.*s", (int)(size - 1), buf);
            }
        }
    fclose(fp);
    return found;
}

/* Starts a second process under the name of live worker f->worker, with
 * its own ledger (intruder-<pos>.ledger, ledger id 100 + pos), waits
 * f->duration_ms for it to be refused, then stops it (SIGTERM; SIGKILL
 * after 8 s). It must be refused ("in use by another live process") or
 * still be waiting; the checker verifies that its ledger is empty. */
static void intruder_episode(fault *f, int pos, emq_srv *srv) {
    worker *w = &workers[f->worker];
    if (w->pid <= 0) {
        f->outcome = INTRUDER_SKIPPED;
        snprintf(f->detail, sizeof f->detail,
                 "chaos-%d was not running; no intruder started", f->worker);
        printf("[%7.3f]   intruder: %s\n",
               (chaos_now_ms() - run_start) / 1000.0, f->detail);
        return;
    }
    /* The target must be settled in its name: running for 2 s and its
     * lease key present (docs/KEYSPACE.md), or the intruder could win a
     * race with a worker that is still starting, which proves nothing. */
    char key[128], out[512];
    snprintf(key, sizeof key, "emq:{%s}:lease:%s:chaos-%d", CHAOS_QUEUE,
             CHAOS_GROUP, f->worker);
    int64_t settle_until = chaos_now_ms() + 10000;
    for (;;) {
        int held = emq_srv_cmd(srv, out, sizeof out, "EXISTS", key, NULL) ==
                       ':' &&
                   strcmp(out, "1") == 0;
        if (w->pid > 0 && held && chaos_now_ms() - w->last_start >= 2000)
            break;
        if (chaos_now_ms() > settle_until || w->pid <= 0) {
            f->outcome = INTRUDER_SKIPPED;
            snprintf(f->detail, sizeof f->detail,
                     "chaos-%d %s; no intruder started", f->worker,
                     w->pid <= 0 ? "was not running"
                                 : "held no lease for 10 s");
            printf("[%7.3f]   intruder: %s\n",
                   (chaos_now_ms() - run_start) / 1000.0, f->detail);
            return;
        }
        wait_until(chaos_now_ms() + 50);
    }
    f->inc = w->starts;
    w->intruded_until = INT64_MAX;
    int ns = f->pidns && pidns_ok;
    if (f->pidns && !pidns_ok)
        printf("[%7.3f]   intruder: not in a PID namespace: %s\n",
               (chaos_now_ms() - run_start) / 1000.0, pidns_why);
    f->pidns = ns;
    char name[32], ledger[64], log[64], logpath[800];
    snprintf(name, sizeof name, "chaos-%d", f->worker);
    snprintf(ledger, sizeof ledger, "intruder-%d.ledger", pos);
    snprintf(log, sizeof log, "intruder-%d.log", pos);
    snprintf(logpath, sizeof logpath, "%s/%s", run_dir, log);
    pid_t target = 0;
    int64_t t0 = chaos_now_ms();
    pid_t pid = spawn_process(name, CHAOS_INTRUDER_ID0 + pos, 1, ledger, log,
                              ns, w->pull, &target);
    int status = 0, exited = 0;
    int64_t until = t0 + f->duration_ms;
    while (chaos_now_ms() < until) {
        if (waitpid(pid, &status, WNOHANG) == pid) {
            exited = 1;
            break;
        }
        wait_until(chaos_now_ms() + 20);
    }
    int64_t t_exit = chaos_now_ms();
    int terminated = 0;
    if (!exited) {
        terminated = 1;
        kill(target, SIGTERM);
        int64_t hard = chaos_now_ms() + 8000;
        while (waitpid(pid, &status, WNOHANG) != pid) {
            if (chaos_now_ms() > hard) {
                kill(target, SIGKILL);
                kill(pid, SIGKILL);
                waitpid(pid, &status, 0);
                break;
            }
            chaos_sleep_ms(10);
        }
    }
    /* Did the target's incarnation end meanwhile (of its own, or because
     * the intruder took its lease)? Calls of the intruder after that are
     * not a second process under a live name. */
    if (w->starts != f->inc || w->pid <= 0)
        f->target_died_ms = w->died_ms ? w->died_ms : chaos_now_ms();
    char line[300] = "";
    int refused_msg =
        file_has(logpath, "in use by another live process", line, sizeof line);
    int took = file_has(logpath, "took over the lease", NULL, 0);
    int code = WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
    /* A refusal that ends the intruder (status 3) after the episode's
     * window, the harness's SIGTERM already sent, is a refusal all the
     * same: on a loaded machine the wait for a lease whose owner cannot
     * be checked from here outlasts the window. */
    if (refused_msg && code == 3) {
        f->outcome = INTRUDER_REFUSED;
        snprintf(f->detail, sizeof f->detail, "%s%s refused after %lld ms%s",
                 name, ns ? " (pidns)" : "", (long long)(chaos_now_ms() - t0),
                 terminated ? " (past the episode's window)" : "");
    } else if (terminated && code == 0 && !took) {
        f->outcome = INTRUDER_WAITED;
        snprintf(f->detail, sizeof f->detail,
                 "%s%s still waiting after %lld ms; stopped", name,
                 ns ? " (pidns)" : "", (long long)(t_exit - t0));
    } else if (f->target_died_ms) {
        f->outcome = INTRUDER_TARGET_DIED;
        snprintf(f->detail, sizeof f->detail,
                 "%s%s: %s after %lld ms with %s %d; the target's incarnation "
                 "%d ended at %.3f s, during the episode; see %s",
                 name, ns ? " (pidns)" : "",
                 terminated ? "stopped by the harness" : "exited",
                 (long long)(t_exit - t0), code >= 0 ? "status" : "signal",
                 code >= 0 ? code : -code, f->inc,
                 (f->target_died_ms - run_start) / 1000.0, log);
    } else {
        f->outcome = INTRUDER_OTHER;
        snprintf(f->detail, sizeof f->detail,
                 "%s%s: %s after %lld ms with %s %d%s; see %s", name,
                 ns ? " (pidns)" : "",
                 terminated ? "stopped by the harness" : "exited",
                 (long long)(t_exit - t0), code >= 0 ? "status" : "signal",
                 code >= 0 ? code : -code,
                 took ? ", its log says it took over the lease" : "", log);
    }
    printf("[%7.3f]   intruder: %s\n", (chaos_now_ms() - run_start) / 1000.0,
           f->detail);
    w->intruded_until = chaos_now_ms() + opt.lease_ttl_ms + 10000;
}

/* ---- the upkeep, lease, eviction and peer episodes ---------------------- */

/* The handler call worker i is in, from the last line of its ledger: 1
 * with *job and id (the entry) when that line is a start line, else 0. */
static int in_handler(int i, long *job, char *id, size_t size) {
    char path[700], buf[512];
    snprintf(path, sizeof path, "%s/chaos-%d.ledger", run_dir, i);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    off_t end = lseek(fd, 0, SEEK_END);
    off_t from = end > (off_t)sizeof buf - 1 ? end - (off_t)sizeof buf + 1 : 0;
    ssize_t n = pread(fd, buf, sizeof buf - 1, from);
    close(fd);
    if (n <= 1)
        return 0;
    buf[n] = '\0';
    if (buf[n - 1] == '\n')
        buf[--n] = '\0';
    char *line = strrchr(buf, '\n');
    line = line ? line + 1 : buf;
    char entry[32];
    unsigned long long d;
    if (line[0] != 'S' ||
        sscanf(line, "S %ld %llu %31s", job, &d, entry) != 3 || *job < 0 ||
        *job >= opt.jobs)
        return 0;
    snprintf(id, size, "%s", entry);
    return 1;
}

/* A worker in a long handler (at least claim idle / 2 planned), the
 * drawn one f->worker first, waited for up to 2 s: these faults matter
 * while an entry is in hand. For the first 1.5 s only run-mode workers
 * qualify (run mode is where a lapsed lease silences the refresh until
 * the handler returns), then any. f->worker becomes the chosen one; it
 * stays the drawn one when nobody was found. */
static void aim(fault *f) {
    int64_t t0 = chaos_now_ms(), until = t0 + 2000;
    do {
        int any = chaos_now_ms() - t0 >= 1500;
        for (int k = 0; k < nworkers; k++) {
            int i = (f->worker - 1 + k) % nworkers + 1;
            long job;
            char id[32];
            if (workers[i].pid > 0 && (any || !workers[i].pull) &&
                in_handler(i, &job, id, sizeof id) &&
                job_plans[job].ms >= (uint32_t)(opt.claim_idle_ms / 2)) {
                if (i != f->worker)
                    printf("[%7.3f]   aimed at chaos-%d (job %ld in its "
                           "handler) instead of chaos-%d\n",
                           (chaos_now_ms() - run_start) / 1000.0, i, job,
                           f->worker);
                f->worker = i;
                return;
            }
        }
        wait_until(chaos_now_ms() + 50);
    } while (chaos_now_ms() < until);
}

/* The id of worker i's upkeep connection from CLIENT LIST, into id; 0
 * when found. Both of a consumer's connections carry its name; the
 * reading one is the one whose last command is XREADGROUP (it blocks
 * there between reads, and idles there through a run-mode handler), so
 * the upkeep one is the other, the most recently active when both
 * qualify. */
static int upkeep_conn(emq_srv *srv, int i, char *id, size_t size) {
    static char list[1 << 16];
    if (emq_srv_cmd(srv, list, sizeof list, "CLIENT", "LIST", NULL) != '$')
        return -1;
    char want[48];
    snprintf(want, sizeof want, " name=chaos-%d ", i);
    long best_idle = LONG_MAX;
    int found = -1;
    for (char *line = list; line && *line;) {
        char *nl = strchr(line, '\n');
        if (nl)
            *nl = '\0';
        const char *cmd = strstr(line, " cmd=");
        const char *idle = strstr(line, " idle=");
        if (strstr(line, want) && cmd && idle &&
            strncmp(cmd + 5, "xreadgroup", 10) != 0) {
            long v = atol(idle + 6);
            if (v <= best_idle) {
                best_idle = v;
                size_t k = strcspn(line + 3, " ");
                if (strncmp(line, "id=", 3) == 0 && k < size) {
                    memcpy(id, line + 3, k);
                    id[k] = '\0';
                    found = 0;
                }
            }
        }
        line = nl ? nl + 1 : NULL;
    }
    return found;
}

/* Kills worker f->worker's upkeep connection alone, every 300-400 ms
 * (drawn from the seed), for f->duration_ms. */
static void upkeep_kill_episode(fault *f, int pos, emq_srv *srv) {
    aim(f);
    chaos_rng r = {opt.seed ^ 0x75706b656570ull ^ (uint64_t)pos << 32};
    int64_t until = chaos_now_ms() + f->duration_ms;
    int kills = 0, missing = 0;
    char id[32], out[256];
    while (chaos_now_ms() < until) {
        if (upkeep_conn(srv, f->worker, id, sizeof id) == 0 &&
            emq_srv_cmd(srv, out, sizeof out, "CLIENT", "KILL", "ID", id,
                        NULL) == ':' &&
            strcmp(out, "1") == 0)
            kills++;
        else
            missing++;
        wait_until(chaos_now_ms() + chaos_range(&r, 300, 400));
    }
    f->inc = workers[f->worker].starts;
    snprintf(f->detail, sizeof f->detail,
             "chaos-%d: %d upkeep connections killed, %d times none found",
             f->worker, kills, missing);
}

static int lease_exists(emq_srv *srv, int i) {
    char key[128], out[64];
    snprintf(key, sizeof key, "emq:{%s}:lease:%s:chaos-%d", CHAOS_QUEUE,
             CHAOS_GROUP, i);
    return emq_srv_cmd(srv, out, sizeof out, "EXISTS", key, NULL) == ':' &&
           strcmp(out, "1") == 0;
}

/* DELs worker f->worker's lease key, then watches (up to 3 s) for the
 * consumer to take it again. */
static void lease_del_episode(fault *f, emq_srv *srv) {
    aim(f);
    char key[128], out[64];
    snprintf(key, sizeof key, "emq:{%s}:lease:%s:chaos-%d", CHAOS_QUEUE,
             CHAOS_GROUP, f->worker);
    f->inc = workers[f->worker].starts;
    int64_t t0 = chaos_now_ms();
    int type = emq_srv_cmd(srv, out, sizeof out, "DEL", key, NULL);
    int deleted = type == ':' && strcmp(out, "1") == 0;
    int64_t back = -1;
    while (deleted && chaos_now_ms() - t0 < 3000) {
        if (lease_exists(srv, f->worker)) {
            back = chaos_now_ms() - t0;
            break;
        }
        wait_until(chaos_now_ms() + 20);
    }
    if (!deleted)
        snprintf(f->detail, sizeof f->detail,
                 "chaos-%d: no lease key to delete (%.60s)", f->worker, out);
    else if (back >= 0)
        snprintf(f->detail, sizeof f->detail,
                 "chaos-%d: lease key deleted; taken again after %lld ms",
                 f->worker, (long long)back);
    else
        snprintf(f->detail, sizeof f->detail,
                 "chaos-%d: lease key deleted; NOT taken again within 3 s",
                 f->worker);
}

/* The integer value of field in an INFO section, or -1. */
static long long info_number(emq_srv *srv, const char *section,
                             const char *field) {
    static char info[16384];
    char v[64];
    if (emq_srv_cmd(srv, info, sizeof info, "INFO", section, NULL) <= 0)
        return -1;
    info_field(info, field, v, sizeof v);
    return v[0] ? atoll(v) : -1;
}

/* A server under maxmemory with volatile-lru: maxmemory is set 2 MB above
 * what it uses, and TTL'd junk keys of 16 KB are written every 10 ms for
 * f->duration_ms, so the server keeps evicting keys with a TTL: the junk
 * and the lease keys alike. Then maxmemory, the policy and the junk go.
 * A junk write refused with OOM (nothing volatile left to evict) makes
 * the episode a write outage (f->outcome 1). */
static void evict_episode(fault *f, emq_srv *srv) {
    static char out[4096];
    char maxmem[64] = "0", policy[64] = "noeviction", v[32];
    if (emq_srv_cmd(srv, out, sizeof out, "CONFIG", "GET", "maxmemory", NULL) ==
            '*' &&
        strchr(out, '\n'))
        snprintf(maxmem, sizeof maxmem, "%s", strchr(out, '\n') + 1);
    if (emq_srv_cmd(srv, out, sizeof out, "CONFIG", "GET", "maxmemory-policy",
                    NULL) == '*' &&
        strchr(out, '\n'))
        snprintf(policy, sizeof policy, "%s", strchr(out, '\n') + 1);
    long long used = info_number(srv, "memory", "used_memory");
    long long evicted0 = info_number(srv, "stats", "evicted_keys");
    int leases0 = 0, leases1 = 0;
    for (int i = 1; i <= nworkers; i++)
        leases0 += lease_exists(srv, i);
    static char junk[16384];
    memset(junk, 'j', sizeof junk - 1);
    junk[sizeof junk - 1] = '\0';
    int n = 0, oom = 0;
    snprintf(v, sizeof v, "%lld", used + 2 * 1024 * 1024);
    if (used <= 0 ||
        emq_srv_cmd(srv, out, sizeof out, "CONFIG", "SET", "maxmemory-policy",
                    "volatile-lru", NULL) != '+' ||
        emq_srv_cmd(srv, out, sizeof out, "CONFIG", "SET", "maxmemory", v,
                    NULL) != '+') {
        snprintf(f->detail, sizeof f->detail, "SETUP PROBLEM: %.100s", out);
        goto restore;
    }
    int64_t until = chaos_now_ms() + f->duration_ms;
    while (chaos_now_ms() < until) {
        char key[48];
        snprintf(key, sizeof key, "chaos-junk:%d", n++);
        if (emq_srv_cmd(srv, out, sizeof out, "SET", key, junk, "PX", "20000",
                        NULL) == '-' &&
            strncmp(out, "OOM", 3) == 0)
            oom++;
        wait_until(chaos_now_ms() + 10);
    }
    for (int i = 1; i <= nworkers; i++)
        leases1 += lease_exists(srv, i);
    snprintf(f->detail, sizeof f->detail,
             "maxmemory %s for %lld ms: %lld keys evicted, %d junk writes "
             "(%d refused with OOM), lease keys %d before, %d at the end",
             v, (long long)f->duration_ms,
             info_number(srv, "stats", "evicted_keys") - evicted0, n, oom,
             leases0, leases1);
    f->outcome = oom > 0;
restore:
    emq_srv_cmd(srv, out, sizeof out, "CONFIG", "SET", "maxmemory", maxmem,
                NULL);
    emq_srv_cmd(srv, out, sizeof out, "CONFIG", "SET", "maxmemory-policy",
                policy, NULL);
    for (int i = 0; i < n; i++) {
        char key[48];
        snprintf(key, sizeof key, "chaos-junk:%d", i);
        emq_srv_cmd(srv, out, sizeof out, "UNLINK", key, NULL);
    }
}

/* A peer that takes entries and dies: XCLAIM (min idle 0, so the delivery
 * count goes up as any claim's does) of up to 3 pending entries, those in
 * a worker's handler first, to the consumer chaos-ghost-<pos>, which never
 * reads, refreshes or acknowledges anything. The workers must claim them
 * back after claim.min_idle_ms. */
static void peer_claim_episode(fault *f, int pos, emq_srv *srv) {
    static char out[8192];
    char ids[3][24];
    int nids = 0;
    for (int i = 1; i <= nworkers && nids < 2; i++) {
        long job;
        char id[32];
        if (workers[i].pid > 0 && in_handler(i, &job, id, sizeof id) &&
            strlen(id) < sizeof ids[0])
            memcpy(ids[nids++], id, strlen(id) + 1);
    }
    if (emq_srv_cmd(srv, out, sizeof out, "XPENDING", CHAOS_STREAM, CHAOS_GROUP,
                    "-", "+", "10", NULL) == '*') {
        /* id, consumer, idle, count: one per line */
        char *line = out;
        for (int k = 0; line && *line && nids < 3; k++) {
            char *nl = strchr(line, '\n');
            if (nl)
                *nl = '\0';
            int dup = 0;
            for (int j = 0; j < nids; j++)
                dup |= strcmp(ids[j], line) == 0;
            if (k % 4 == 0 && !dup && strlen(line) < sizeof ids[0] &&
                strchr(line, '-'))
                memcpy(ids[nids++], line, strlen(line) + 1);
            line = nl ? nl + 1 : NULL;
        }
    }
    char ghost[48];
    snprintf(ghost, sizeof ghost, "chaos-ghost-%d", pos);
    if (nids == 0) {
        snprintf(f->detail, sizeof f->detail, "nothing pending to take");
        return;
    }
    const char *argv[10] = {"XCLAIM", CHAOS_STREAM, CHAOS_GROUP, ghost, "0"};
    int argc = 5;
    for (int j = 0; j < nids; j++)
        argv[argc++] = ids[j];
    argv[argc] = NULL;
    emq_srv_cmdv(srv, out, sizeof out, argv);
    /* Which ones the ghost holds now. */
    f->claimed = 0;
    char held[120] = "";
    for (int j = 0; j < nids; j++) {
        char o[512];
        if (emq_srv_cmd(srv, o, sizeof o, "XPENDING", CHAOS_STREAM, CHAOS_GROUP,
                        ids[j], ids[j], "1", NULL) == '*' &&
            strstr(o, ghost)) {
            snprintf(f->claimed_ids[f->claimed++], sizeof f->claimed_ids[0],
                     "%.23s", ids[j]);
            size_t k = strlen(held);
            snprintf(held + k, sizeof held - k, " %s", ids[j]);
        }
    }
    snprintf(f->detail, sizeof f->detail, "%d of %d entries now held by %s:%s",
             f->claimed, nids, ghost, held);
}

/* ---- cluster mode -------------------------------------------------------- */

static unsigned queue_slot; /* the slot of the queue's keys */

/* The master that serves the queue's slot now (as node 0 sees it). */
static emq_srv *owner_srv(void) {
    int o = emq_cl_owner(cluster, 0, queue_slot);
    return emq_cl_node(cluster, o >= 0 ? o : 0);
}

/* Moves the queue's slot to another master while the workers run:
 * MIGRATING/IMPORTING, held f->duration_ms with every key still on the
 * source (a script naming a key that does not exist there gets TRYAGAIN),
 * then MIGRATE of every key, then SETSLOT NODE on every master. A step
 * the server refuses ends the run as a setup failure (exit 2). */
static void migrate_episode(fault *f) {
    int from = emq_cl_owner(cluster, 0, queue_slot);
    int to = emq_cl_other_master(cluster, from);
    int64_t t0 = chaos_now_ms();
    emq_cl_migrate_begin(cluster, queue_slot, from, to);
    wait_until(chaos_now_ms() + f->duration_ms);
    int64_t t1 = chaos_now_ms();
    emq_cl_migrate_keys(cluster, queue_slot, from, to);
    int64_t t2 = chaos_now_ms();
    emq_cl_migrate_finish(cluster, queue_slot, from, to);
    snprintf(f->detail, sizeof f->detail,
             "slot %u from node %d to node %d: MIGRATING %lld ms, MIGRATE "
             "%lld ms, final after %lld ms",
             queue_slot, from, to, (long long)(t1 - t0), (long long)(t2 - t1),
             (long long)(chaos_now_ms() - t0));
}

/* A live master that serves the queue's slot now, asked of every live
 * node in turn (node 0 may be the one down); -1 when none says. */
static int cluster_owner(void) {
    for (int i = 0; i < emq_cl_count(cluster); i++)
        if (emq_srv_pid(emq_cl_node(cluster, i)) > 0) {
            int o = emq_cl_owner(cluster, i, queue_slot);
            if (o >= 0)
                return o;
        }
    return -1;
}

/* 1 when node i says ROLE master. */
static int node_is_master(int i) {
    char out[64];
    return emq_srv_cmd(emq_cl_node(cluster, i), out, sizeof out, "ROLE",
                       NULL) == '*' &&
           strncmp(out, "master", 6) == 0;
}

/* A failover of the queue's master: CLUSTER FAILOVER on its replica
 * (f->duration_ms 0: planned), or the master SIGKILLed (its replica
 * promotes itself after cluster-node-timeout) and restarted
 * f->duration_ms later (it rejoins as the new master's replica). Node 0,
 * where the workers and the producer are pointed, is failed over as
 * planned only (its process stays up). The promotion's time in
 * f->detail. */
static void cluster_failover_episode(fault *f) {
    int owner = cluster_owner();
    int heir = owner >= 0 ? emq_cl_replica_of(cluster, owner) : -1;
    int64_t t0 = chaos_now_ms();
    if (heir < 0) {
        snprintf(f->detail, sizeof f->detail,
                 "no failover: node %d serves slot %u without a replica", owner,
                 queue_slot);
        return;
    }
    if (f->duration_ms == 0 || owner == 0) {
        emq_cl_failover(cluster, heir, queue_slot);
        snprintf(f->detail, sizeof f->detail,
                 "CLUSTER FAILOVER: slot %u from node %d to its replica %d "
                 "in %lld ms%s",
                 queue_slot, owner, heir, (long long)(chaos_now_ms() - t0),
                 f->duration_ms > 0 ? " (node 0 is not killed)" : "");
        return;
    }
    emq_srv_kill9(emq_cl_node(cluster, owner));
    int64_t promoted = 0;
    for (int64_t until = t0 + 40000; chaos_now_ms() < until; chaos_sleep_ms(50))
        if (node_is_master(heir)) {
            promoted = chaos_now_ms();
            break;
        }
    wait_until(t0 + f->duration_ms);
    emq_srv_restart(emq_cl_node(cluster, owner));
    if (promoted == 0)
        snprintf(f->detail, sizeof f->detail,
                 "node %d SIGKILLed: its replica %d not promoted within "
                 "40 s; node %d restarted",
                 owner, heir, owner);
    else
        snprintf(f->detail, sizeof f->detail,
                 "node %d SIGKILLed: its replica %d promoted itself after "
                 "%lld ms; node %d restarted after %lld ms",
                 owner, heir, (long long)(promoted - t0), owner,
                 (long long)f->duration_ms);
}

static void failover_episode(fault *f); /* sentinel mode, below */

static void inject(fault *f, int pos, emq_srv *srv, emq_peer *proxy) {
    char what[200];
    describe(f, what, sizeof what);
    f->began_ms = chaos_now_ms();
    printf("[%7.3f] fault %s: %s\n", (f->began_ms - run_start) / 1000.0,
           chaos_fault_name(f->kind), what);
    fflush(stdout);
    worker *w = &workers[f->worker];
    switch (f->kind) {
    case FAULT_KILL:
        f->inc = w->pid > 0 ? w->starts : 0; /* 0: nobody was killed */
        if (w->pid > 0)
            kill_worker(w); /* reaped: its lease is free now */
        wait_until(chaos_now_ms() + f->duration_ms);
        spawn_worker(f->worker);
        break;
    case FAULT_STOP:
    case FAULT_STOP_LONG:
    case FAULT_STOP_PULL:
        f->inc = w->pid > 0 ? w->starts : 0; /* 0: nobody was stopped */
        if (w->pid > 0) {
            kill(w->target, SIGSTOP);
            wait_until(chaos_now_ms() + f->duration_ms);
            kill(w->target, SIGCONT);
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
    case FAULT_INTRUDER:
        intruder_episode(f, pos, srv);
        break;
    case FAULT_MISCONF:
        misconf_episode(f, srv);
        break;
    case FAULT_UPKEEP_KILL:
        upkeep_kill_episode(f, pos, srv);
        break;
    case FAULT_LEASE_DEL:
        lease_del_episode(f, srv);
        break;
    case FAULT_EVICT:
        evict_episode(f, srv);
        break;
    case FAULT_PEER_CLAIM:
        peer_claim_episode(f, pos, srv);
        break;
    case FAULT_MIGRATE:
        migrate_episode(f);
        break;
    case FAULT_FAILOVER:
        if (cluster)
            cluster_failover_episode(f);
        else
            failover_episode(f);
        break;
    default:
        break;
    }
    if (f->detail[0] &&
        (f->kind == FAULT_UPKEEP_KILL || f->kind == FAULT_LEASE_DEL ||
         f->kind == FAULT_EVICT || f->kind == FAULT_PEER_CLAIM ||
         f->kind == FAULT_MIGRATE || f->kind == FAULT_FAILOVER))
        printf("[%7.3f]   %s: %s\n", (chaos_now_ms() - run_start) / 1000.0,
               chaos_fault_name(f->kind), f->detail);
    f->ended_ms = chaos_now_ms();
}

/* ---- sentinel mode ------------------------------------------------------- */

#define CHAOS_MASTER "chaos"

static emq_srv *nodes[3];     /* --sentinel: the data nodes */
static emq_srv *sentinels[3]; /* and the Sentinels watching them */

/* The port of the primary Sentinel i names (0: unknown). */
static int named_primary(int i) {
    char out[256];
    if (emq_srv_cmd(sentinels[i], out, sizeof out, "SENTINEL",
                    "get-master-addr-by-name", CHAOS_MASTER, NULL) != '*')
        return 0;
    const char *nl = strchr(out, '\n');
    return nl ? atoi(nl + 1) : 0;
}

/* The data node on port (NULL: none). */
static emq_srv *node_on(int port) {
    for (int i = 0; i < 3; i++)
        if (nodes[i] && emq_srv_port(nodes[i]) == port)
            return nodes[i];
    return NULL;
}

/* 1 when node says ROLE master. */
static int is_master(const emq_srv *node) {
    char out[256];
    return node != NULL &&
           emq_srv_cmd(node, out, sizeof out, "ROLE", NULL) == '*' &&
           strncmp(out, "master", 6) == 0;
}

/* The primary the Sentinels name now (node 0 until they name one). */
static emq_srv *primary_srv(void) {
    emq_srv *p = node_on(named_primary(0));
    return p ? p : nodes[0];
}

/* How many workers have a connection (named chaos-i) to node. */
static int workers_on(const emq_srv *node) {
    static char list[1 << 16];
    if (emq_srv_cmd(node, list, sizeof list, "CLIENT", "LIST", "TYPE", "normal",
                    NULL) != '$')
        return 0;
    int n = 0;
    for (int i = 1; i <= nworkers; i++) {
        char want[48];
        snprintf(want, sizeof want, " name=chaos-%d ", i);
        n += strstr(list, want) != NULL;
    }
    return n;
}

/* How many of kind ("replicas", "sentinels") Sentinel i knows (-1: it
 * cannot be asked): the "name" fields of its reply. */
static int sentinel_knows(int i, const char *kind) {
    static char out[16384];
    if (emq_srv_cmd(sentinels[i], out, sizeof out, "SENTINEL", kind,
                    CHAOS_MASTER, NULL) != '*')
        return -1;
    int n = strncmp(out, "name\n", 5) == 0;
    for (const char *at = out; (at = strstr(at, "\nname\n")) != NULL; at++)
        n++;
    return n;
}

/* Starts the three data nodes (node 0 the primary, the others its
 * replicas) with so and three Sentinels watching them (down-after 1000
 * ms), and waits until every Sentinel knows both replicas and the other
 * two. Returns 0, or -1 after printing why. */
static int sentinel_start(const emq_srv_opts *so) {
    for (int i = 0; i < 3; i++)
        nodes[i] = emq_srv_start(so);
    char out[256], port[16];
    snprintf(port, sizeof port, "%d", emq_srv_port(nodes[0]));
    for (int i = 1; i < 3; i++)
        if (emq_srv_cmd(nodes[i], out, sizeof out, "REPLICAOF", "127.0.0.1",
                        port, NULL) != '+') {
            fprintf(stderr, "chaos: REPLICAOF: %s\n", out);
            return -1;
        }
    char config[512];
    snprintf(config, sizeof config,
             "sentinel monitor " CHAOS_MASTER " 127.0.0.1 %d 2\n"
             "sentinel down-after-milliseconds " CHAOS_MASTER " 1000\n"
             "sentinel failover-timeout " CHAOS_MASTER " 10000\n",
             emq_srv_port(nodes[0]));
    emq_srv_opts o = {.sentinel = 1, .extra_config = config};
    for (int i = 0; i < 3; i++)
        sentinels[i] = emq_srv_start(&o);
    int64_t until = chaos_now_ms() + 60000;
    while (chaos_now_ms() < until) {
        int ready = 1;
        for (int i = 0; i < 3 && ready; i++)
            ready = sentinel_knows(i, "replicas") == 2 &&
                    sentinel_knows(i, "sentinels") == 2;
        if (ready)
            return 0;
        chaos_sleep_ms(200);
    }
    fprintf(stderr, "chaos: the Sentinels did not find the replicas and each "
                    "other within 60 s\n");
    return -1;
}

/* 1 when every Sentinel's flags for the master are "master" alone: no
 * failover under way (its leader ends one only once the replicas follow
 * the new primary, and refuses another meanwhile). */
static int sentinels_settled(void) {
    static char out[16384];
    for (int i = 0; i < 3; i++) {
        if (emq_srv_cmd(sentinels[i], out, sizeof out, "SENTINEL", "master",
                        CHAOS_MASTER, NULL) != '*')
            return 0;
        const char *at = strstr(out, "flags\n");
        if (at == NULL || strncmp(at + 6, "master\n", 7) != 0)
            return 0;
    }
    return 1;
}

/* One failover: SENTINEL FAILOVER, or the primary SIGSTOPped for
 * f->duration_ms (the Sentinels fail it over) and then SIGCONT (it comes
 * back as a replica). Waits (at most 40 s) until every Sentinel names a
 * new primary that says ROLE master, then (at most 30 s) until every
 * worker has a connection on it: that time is the run's measure of a
 * failover, in f->detail. */
static void failover_episode(fault *f) {
    emq_srv *old = primary_srv();
    int from = emq_srv_port(old);
    char out[256];
    int64_t t0 = f->began_ms, switched = 0, all_on = 0;
    if (f->duration_ms > 0) {
        kill(emq_srv_pid(old), SIGSTOP);
    } else {
        /* Asked once the last failover has ended, and again while the
         * Sentinels refuse (INPROG, NOGOODSLAVE while the replicas resync):
         * a request refused for good is said, not waited out. The measure
         * starts when one is accepted. */
        int accepted = 0;
        out[0] = '\0';
        for (int64_t until = chaos_now_ms() + 60000; chaos_now_ms() < until;) {
            accepted = sentinels_settled() &&
                       emq_srv_cmd(sentinels[0], out, sizeof out, "SENTINEL",
                                   "FAILOVER", CHAOS_MASTER, NULL) == '+';
            if (accepted)
                break;
            chaos_sleep_ms(200);
        }
        if (!accepted) {
            snprintf(f->detail, sizeof f->detail,
                     "SENTINEL FAILOVER not accepted within 60 s (the last "
                     "answer: %.100s)",
                     out);
            return;
        }
        t0 = chaos_now_ms();
    }
    emq_srv *now = NULL;
    for (int64_t until = t0 + 40000; chaos_now_ms() < until;
         chaos_sleep_ms(50)) {
        int p = named_primary(0);
        if (p == 0 || p == from || named_primary(1) != p ||
            named_primary(2) != p || !is_master(node_on(p)))
            continue;
        now = node_on(p);
        switched = chaos_now_ms();
        break;
    }
    for (int64_t until = chaos_now_ms() + 30000;
         now != NULL && chaos_now_ms() < until; chaos_sleep_ms(50))
        if (workers_on(now) >= nworkers) {
            all_on = chaos_now_ms();
            break;
        }
    if (f->duration_ms > 0) {
        int64_t resume = t0 + f->duration_ms;
        if (chaos_now_ms() < resume)
            wait_until(resume);
        kill(emq_srv_pid(old), SIGCONT);
    }
    if (now == NULL)
        snprintf(f->detail, sizeof f->detail,
                 "no new primary named within 40 s (primary %d)", from);
    else if (all_on == 0)
        snprintf(f->detail, sizeof f->detail,
                 "primary %d -> %d after %lld ms; not every worker on it "
                 "within 30 s",
                 from, emq_srv_port(now), (long long)(switched - t0));
    else
        snprintf(f->detail, sizeof f->detail,
                 "primary %d -> %d after %lld ms; every worker on it %lld ms "
                 "after the switch",
                 from, emq_srv_port(now), (long long)(switched - t0),
                 (long long)(all_on - switched));
}

/* ---- options ------------------------------------------------------------ */

static void usage(void) {
    fprintf(
        stderr,
        "usage: chaos [--seed S] [--jobs N] [--workers W] [--pidns-workers K]\n"
        "             [--seconds T] [--poison P] [--max-deliveries M]\n"
        "             [--crash-jobs C] [--claim-idle MS] [--lease-ttl MS]\n"
        "             [--handler-short-ms MS] [--handler-long-permille L]\n"
        "             [--handler-max-ms MS] [--retry-permille R]\n"
        "             [--retry-backoff MS] [--retry-backoff-max MS]\n"
        "             [--settle-slack MS]\n"
        "             [--kills K] [--stops K] [--restarts K] [--drops K]\n"
        "             [--stalls K] [--halfopens K] [--stops-long K]\n"
        "             [--intruders K] [--misconfs K] [--drain-seconds D]\n"
        "             [--upkeep-kills K] [--lease-dels K] [--evictions K]\n"
        "             [--peer-claims K] [--stops-pull K] [--pull-workers K]\n"
        "             [--cluster] [--migrations K] [--sentinel] "
        "[--failovers K]\n"
        "             [--big-jobs N] [--big-max-mb MB] [--dead-jobs N]\n"
        "             [--wide-fields F] [--max-reply-bytes B]\n"
        "             [--faults LIST] [--tolerate LIST] [--dir PARENT]\n"
        "             [--keep]\n"
        "             [--tolerate-worker-exits] [--allow-unknown-conf]\n"
        "             [--exact]\n"
        "Defaults: 200000 jobs, 4 workers + 1 in its own PID namespace,\n"
        "T = max(30, N / 1300) s, 10 poison jobs (C = 0 of them kill their\n"
        "worker instead of asking a retry), max_deliveries 5,\n"
        "claim idle 2000 ms, lease TTL 5000 ms, handlers 1..4 ms with 2 per\n"
        "mille up to 3 x claim idle, 20 per mille of jobs retried 1-2 times\n"
        "with retry backoff 200 ms, settle slack 2000 ms, fault counts\n"
        "from T, D = 300, 1 pull-mode worker, 8 big jobs (1..8 MB, workers at\n"
        "resp.max_reply_bytes 10 MB) and 4 dead jobs (2500..5000 fields).\n"
        "LIST (also EMQ_CHAOS_FAULTS, applied last): none, NAME=K, -NAME, "
        "NAME\n"
        "with fault names as the schedule prints them, big-jobs, dead-jobs,\n"
        "pull-workers. --tolerate (also EMQ_CHAOS_TOLERATE): unseen-dead,\n"
        "dead-fields, undercounted: those counts are reported, not\n"
        "violations. --exact: the workers run with deliveries.exact 1.\n"
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

/* A fault list: comma-separated items, applied in order: "none" (every
 * fault count, big-jobs and dead-jobs to 0), "NAME=K" (that count), "-NAME"
 * (0), "NAME" (1 unless already above). NAME: a fault name (shim.c, as
 * printed in the schedule), "big-jobs", "dead-jobs" or "pull-workers"
 * (not touched by "none"). */
static void apply_fault_list(options *o, const char *list, const char *from) {
    if (list == NULL || *list == '\0')
        return;
    char buf[1024];
    snprintf(buf, sizeof buf, "%s", list);
    for (char *save = NULL, *item = strtok_r(buf, ", ", &save); item;
         item = strtok_r(NULL, ", ", &save)) {
        if (strcmp(item, "none") == 0) {
            for (int k = 0; k < FAULT_KINDS; k++)
                o->count[k] = 0;
            o->big_jobs = o->dead_jobs = 0;
            continue;
        }
        int off = item[0] == '-';
        char *eq = strchr(item, '=');
        long value = off ? 0 : -1;
        if (eq) {
            *eq = '\0';
            value = number(from, eq + 1, 0, 1000);
        }
        const char *name = item + off;
        long *target = NULL;
        int *count = NULL;
        for (int k = 0; k < FAULT_KINDS; k++)
            if (strcmp(name, chaos_fault_name((fault_kind)k)) == 0)
                count = &o->count[k];
        if (strcmp(name, "big-jobs") == 0)
            target = &o->big_jobs;
        else if (strcmp(name, "dead-jobs") == 0)
            target = &o->dead_jobs;
        else if (strcmp(name, "pull-workers") == 0)
            count = &o->pull_workers;
        if (count == NULL && target == NULL) {
            fprintf(stderr, "chaos: %s: unknown fault %s\n", from, name);
            usage();
        }
        if (count)
            *count = value >= 0 ? (int)value : (*count > 0 ? *count : 1);
        else
            *target = value >= 0 ? value : (*target > 0 ? *target : 1);
    }
}

/* What the verdict only reports: comma-separated "unseen-dead" (unseen
 * dead letters), "dead-fields" (dead letters that lost a field),
 * "undercounted" (handler calls told a count below the truth). For a
 * library known to break those promises (one older than the fixes of
 * unseen marks and wide dead letters; counts below the truth under
 * half-open connections and lease lapses, docs/RELIABILITY.md), so that
 * the stage can still judge the rest. */
static void apply_tolerate(options *o, const char *list, const char *from) {
    if (list == NULL || *list == '\0')
        return;
    char buf[256];
    snprintf(buf, sizeof buf, "%s", list);
    for (char *save = NULL, *item = strtok_r(buf, ", ", &save); item;
         item = strtok_r(NULL, ", ", &save)) {
        if (strcmp(item, "unseen-dead") == 0) {
            o->tolerate_unseen = 1;
        } else if (strcmp(item, "dead-fields") == 0) {
            o->tolerate_fields = 1;
        } else if (strcmp(item, "undercounted") == 0) {
            o->tolerate_undercounted = 1;
        } else {
            fprintf(stderr, "chaos: %s: unknown item %s\n", from, item);
            usage();
        }
    }
}

static void parse(int argc, char **argv, options *o) {
    static const char *fault_flags[FAULT_KINDS] = {
        "--kills",       "--stops",        "--restarts",   "--drops",
        "--stalls",      "--halfopens",    "--stops-long", "--intruders",
        "--misconfs",    "--upkeep-kills", "--lease-dels", "--evictions",
        "--peer-claims", "--stops-pull",   "--migrations", "--failovers"};
    static const struct {
        const char *flag;
        long lo, hi;
        size_t off;
    } longs[] = {
        {"--claim-idle", 200, 600000, offsetof(options, claim_idle_ms)},
        {"--lease-ttl", 1000, 600000, offsetof(options, lease_ttl_ms)},
        {"--handler-short-ms", 1, 60000, offsetof(options, short_ms)},
        {"--handler-long-permille", 0, 1000, offsetof(options, long_permille)},
        {"--handler-max-ms", 1, 3600000, offsetof(options, handler_max_ms)},
        {"--retry-permille", 0, 1000, offsetof(options, retry_permille)},
        {"--retry-backoff", 0, 600000, offsetof(options, retry_backoff_ms)},
        {"--retry-backoff-max", 0, 3600000,
         offsetof(options, retry_backoff_max_ms)},
        {"--settle-slack", 0, 600000, offsetof(options, settle_slack_ms)},
        {"--big-jobs", 0, 1000, offsetof(options, big_jobs)},
        {"--big-max-mb", 1, 64, offsetof(options, big_max_mb)},
        {"--dead-jobs", 0, 100000, offsetof(options, dead_jobs)},
        {"--wide-fields", 0, 200000, offsetof(options, wide_fields)},
        {"--max-reply-bytes", 0, 1L << 30, offsetof(options, max_reply_bytes)},
    };
    const char *fault_list = NULL, *tolerate_list = NULL;
    memset(o, 0, sizeof *o);
    o->seed = 0;
    int have_seed = 0;
    o->jobs = 200000;
    o->workers = 4;
    o->pidns_workers = 1;
    o->seconds = -1;
    o->poison = 10;
    o->max_deliveries = 5;
    o->drain_seconds = 300;
    o->claim_idle_ms = 2000;
    o->lease_ttl_ms = 5000;
    o->short_ms = 4;
    o->long_permille = 2;
    o->handler_max_ms = 0;
    o->retry_permille = 20;
    o->retry_backoff_ms = 200;
    o->retry_backoff_max_ms = 0;
    o->settle_slack_ms = 2000;
    o->parent = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    o->pull_workers = 1;
    o->big_jobs = -1;
    o->big_max_mb = 8;
    o->dead_jobs = -1;
    o->wide_fields = 5000;
    o->max_reply_bytes = -1;
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
        for (size_t k = 0; k < sizeof longs / sizeof longs[0]; k++)
            if (strcmp(a, longs[k].flag) == 0) {
                *(long *)((char *)o + longs[k].off) =
                    number(a, v, longs[k].lo, longs[k].hi);
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
        } else if (strcmp(a, "--tolerate") == 0 && v) {
            tolerate_list = v;
            i++;
        } else if (strcmp(a, "--cluster") == 0) {
            o->cluster = 1;
        } else if (strcmp(a, "--sentinel") == 0) {
            o->sentinel = 1;
        } else if (strcmp(a, "--pull-workers") == 0) {
            o->pull_workers = (int)number(a, v, 0, CHAOS_MAX_WORKERS);
            i++;
        } else if (strcmp(a, "--faults") == 0 && v) {
            fault_list = v;
            i++;
        } else if (strcmp(a, "--pidns-workers") == 0) {
            o->pidns_workers = (int)number(a, v, 0, CHAOS_MAX_WORKERS);
            i++;
        } else if (strcmp(a, "--seconds") == 0) {
            o->seconds = (int)number(a, v, 10, 86400);
            i++;
        } else if (strcmp(a, "--poison") == 0) {
            o->poison = number(a, v, 0, 100000);
            i++;
        } else if (strcmp(a, "--crash-jobs") == 0) {
            o->crash_jobs = number(a, v, 0, 100000);
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
        } else if (strcmp(a, "--allow-unknown-conf") == 0) {
            o->allow_unknown = 1;
        } else if (strcmp(a, "--exact") == 0) {
            o->exact = 1;
        } else {
            usage();
        }
    }
    if (o->workers + o->pidns_workers > CHAOS_MAX_WORKERS) {
        fprintf(stderr, "chaos: at most %d workers in all\n",
                CHAOS_MAX_WORKERS);
        usage();
    }
    if (o->pull_workers > o->workers) {
        fprintf(stderr, "chaos: --pull-workers is at most --workers\n");
        usage();
    }
    if (o->handler_max_ms == 0)
        o->handler_max_ms = 3 * o->claim_idle_ms;
    if (o->poison > o->jobs)
        o->poison = o->jobs;
    if (o->seconds < 0) {
        long t = o->jobs / 1300;
        o->seconds = (int)(t < 30 ? 30 : t);
    }
    if (!have_seed)
        o->seed = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 20);
    int k1 = o->seconds / 30 > 0 ? o->seconds / 30 : 1;
    /* The faults of the new core's edges: once a minute each. */
    int k2 = o->seconds / 60 > 0 ? o->seconds / 60 : 1;
    const int derived[FAULT_KINDS] = {2 * k1, k1, k1,     2 * k1, k1, k1,
                                      k1,     k1, k1,     k2,     k2, k2,
                                      k2,     k2, 3 * k2, 3 * k2};
    for (int k = 0; k < FAULT_KINDS; k++)
        if (o->count[k] < 0)
            o->count[k] = derived[k];
    if (o->big_jobs < 0)
        o->big_jobs = o->jobs >= 4000 ? 8 : o->jobs / 500;
    if (o->dead_jobs < 0)
        o->dead_jobs = o->jobs >= 4000 ? 4 : o->jobs / 1000;
    /* --faults, then EMQ_CHAOS_FAULTS, have the last word. */
    apply_fault_list(o, fault_list, "--faults");
    apply_fault_list(o, getenv("EMQ_CHAOS_FAULTS"), "EMQ_CHAOS_FAULTS");
    apply_tolerate(o, tolerate_list, "--tolerate");
    apply_tolerate(o, getenv("EMQ_CHAOS_TOLERATE"), "EMQ_CHAOS_TOLERATE");
    if (o->pull_workers > o->workers)
        o->pull_workers = o->workers;
    if (o->pull_workers == 0)
        o->count[FAULT_STOP_PULL] = 0;
    if (o->cluster && o->sentinel) {
        fprintf(stderr, "chaos: --cluster and --sentinel exclude each other\n");
        usage();
    }
    if (o->cluster || o->sentinel) {
        /* One server's faults: no proxy in front of a cluster (the
         * workers follow redirections to every node) or of Sentinel's
         * nodes, and the server episodes need the one server. */
        const fault_kind single[] = {FAULT_RESTART, FAULT_DROP,
                                     FAULT_STALL,   FAULT_HALFOPEN,
                                     FAULT_MISCONF, FAULT_EVICT};
        for (size_t k = 0; k < sizeof single / sizeof single[0]; k++)
            o->count[single[k]] = 0;
    }
    if (!o->cluster)
        o->count[FAULT_MIGRATE] = 0;
    if (!o->sentinel && !o->cluster)
        o->count[FAULT_FAILOVER] = 0;
    if (o->crash_jobs > o->poison) {
        fprintf(stderr,
                "chaos: --crash-jobs %ld is more than --poison %ld "
                "(crash jobs are poison jobs)\n",
                o->crash_jobs, o->poison);
        usage();
    }
    if (o->big_jobs + o->dead_jobs + o->poison > o->jobs) {
        fprintf(stderr, "chaos: more big, dead and poison jobs than jobs\n");
        usage();
    }
    if (o->max_reply_bytes < 0)
        o->max_reply_bytes = o->big_jobs > 0 ? 10L * 1024 * 1024 : 0;
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
            kill(workers[i].target, SIGTERM);
    /* A graceful stop returns within block_ms plus one handler. */
    int64_t deadline = chaos_now_ms() + CHAOS_BLOCK_MS +
                       CHAOS_COMMAND_TIMEOUT_MS + opt.handler_max_ms + 5000;
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
                workers[i].pid = workers[i].target = 0;
                break;
            }
            if (chaos_now_ms() > deadline) {
                printf("VIOLATION: worker chaos-%d did not stop in time "
                       "after SIGTERM; killed\n",
                       i);
                kill_worker(&workers[i]);
                (*slow)++;
                break;
            }
            chaos_sleep_ms(20);
        }
    }
}

/* Root and a working `unshare --pid --fork --mount-proc`, or why not. */
static int pidns_check(char *why, size_t size) {
    if (geteuid() != 0) {
        snprintf(why, size, "not root (euid %ld): unshare --pid needs it",
                 (long)geteuid());
        return 0;
    }
    const char *cands[] = {"/usr/bin/unshare", "/bin/unshare",
                           "/usr/local/bin/unshare"};
    for (size_t i = 0; i < sizeof cands / sizeof cands[0]; i++)
        if (access(cands[i], X_OK) == 0) {
            snprintf(unshare_exe, sizeof unshare_exe, "%s", cands[i]);
            break;
        }
    if (unshare_exe[0] == '\0') {
        snprintf(why, size, "no unshare executable (util-linux)");
        return 0;
    }
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        snprintf(why, size, "fork: %s", strerror(errno));
        return 0;
    }
    if (pid == 0) {
        int fd = open("/dev/null", O_WRONLY);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
        }
        char *argv[] = {
            unshare_exe,    "--pid",  "--fork",        "--mount-proc",
            "--kill-child", self_exe, "--pidns-probe", NULL};
        execv(unshare_exe, argv);
        _exit(127);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        snprintf(why, size, "%.100s --pid --fork --mount-proc failed (%s %d)",
                 unshare_exe, WIFEXITED(status) ? "status" : "signal",
                 WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
        return 0;
    }
    return 1;
}

/* The plan of every job, from the seed: poison (already placed), the
 * handler duration, the retries a healthy job asks for. */
static void plan_jobs(const options *o, job_plan *plan, long *nlong,
                      long *nretry, double *total_s) {
    chaos_rng r = {o->seed ^ 0x6a6f62706c616e73ull}; /* "jobplans" */
    int64_t long_lo = o->claim_idle_ms / 4 > 1 ? o->claim_idle_ms / 4 : 1;
    if (long_lo > o->handler_max_ms)
        long_lo = o->handler_max_ms;
    *nlong = *nretry = 0;
    *total_s = 0;
    for (long j = 0; j < o->jobs; j++) {
        int is_long = (long)(chaos_rand(&r) % 1000) < o->long_permille;
        int64_t ms = is_long ? chaos_range(&r, long_lo, o->handler_max_ms)
                             : chaos_range(&r, 1, o->short_ms);
        plan[j].ms = (uint32_t)ms;
        *nlong += is_long;
        int retry = (long)(chaos_rand(&r) % 1000) < o->retry_permille;
        int64_t n = chaos_range(&r, 1, 2);
        plan[j].retries = (uint8_t)(retry && !plan[j].poison ? n : 0);
        *nretry += plan[j].retries > 0;
        /* Every call sleeps: retries and poison deliveries count too. */
        int calls = plan[j].poison ? o->max_deliveries : 1 + plan[j].retries;
        *total_s += (double)ms * calls / 1000.0;
    }
}

/* The big jobs (a blob of 1..big_max_mb MB, a short handler) and the dead
 * jobs (EMQ_DEAD at once, wide/2..wide extra fields), placed among the
 * jobs that are neither poison nor already chosen, from the seed (a
 * generator of their own: the other draws stay what they were). The big
 * jobs open the stream (jobs 0.., poison ones skipped), and the workers
 * start once they are in (main), so that the first read pages hold
 * several of them (more than resp.max_reply_bytes together). */
static void plan_extras(const options *o, job_plan *plan, double *big_mb,
                        long *wide_total) {
    chaos_rng r = {o->seed ^ 0x657874726173ull}; /* "extras" */
    *big_mb = 0;
    *wide_total = 0;
    long next_big = 0;
    for (long placed = 0; placed < o->big_jobs + o->dead_jobs;) {
        long j = placed < o->big_jobs ? next_big++ % o->jobs
                                      : (long)chaos_range(&r, 0, o->jobs - 1);
        job_plan *p = &plan[j];
        if (p->poison || p->big || p->dead)
            continue;
        p->retries = 0;
        if (placed < o->big_jobs) {
            p->big = (uint32_t)chaos_range(&r, 1L << 20, o->big_max_mb << 20);
            /* Slow enough that the block outnumbers the workers'
             * reads: while each is in a big job's handler the rest wait in
             * the stream, and the next read asks for several at once. */
            p->ms = (uint32_t)chaos_range(&r, o->claim_idle_ms / 4,
                                          o->claim_idle_ms / 2);
            *big_mb += p->big / 1048576.0;
        } else {
            p->dead = 1;
            p->wide =
                (uint32_t)chaos_range(&r, o->wide_fields / 2, o->wide_fields);
            *wide_total += p->wide;
        }
        placed++;
    }
}

/* The delayed jobs: one in 20 of the plain ones (not big, not dead) is
 * produced with a delay of 1 ms to 2 s, and one in 10 of all jobs with an
 * idempotency key, from a generator of their own (the other draws stay
 * what they were). The consumers' upkeep moves the delayed ones to the
 * stream through every fault; the checker's verdict covers them like any
 * job, and a job with a key in the stream twice is a violation. Returns
 * how many are delayed; *ndedup how many have a key. */
static long plan_delays(const options *o, job_plan *plan, long *ndedup) {
    chaos_rng r = {o->seed ^ 0x64656c6179ull}; /* "delay" */
    long n = 0;
    *ndedup = 0;
    for (long j = 0; j < o->jobs; j++) {
        job_plan *p = &plan[j];
        int64_t pick = chaos_range(&r, 0, 19);
        int64_t ms = chaos_range(&r, 1, 2000);
        /* One in 10 (big ones too) carries an idempotency key; not the
         * wide dead ones: a keyed entry has at most 3,000 field/value
         * pairs, and the producer refuses a batch holding a wider one
         * (seeds 7013 and 7014 drew a key for one, and their producer
         * gave up on every job from that batch on). */
        p->dedup = chaos_range(&r, 0, 9) == 0 && !p->wide;
        *ndedup += p->dedup;
        if (pick != 0 || p->big || p->dead)
            continue;
        p->delay_ms = (uint32_t)ms;
        n++;
    }
    return n;
}

/* The jobs with a priority: one in 8 of those that are not wide (an
 * entry given a priority has at most 3,000 field/value pairs), level 0
 * to 9, from a generator of their own. The first one gives the queue
 * priorities: from then on every job a producer sends is held (level 5
 * when it has none; wide ones go to the stream) and every read takes the
 * most urgent, through every fault; the verdict covers them like any
 * job. Returns how many have one. */
static long plan_priorities(const options *o, job_plan *plan) {
    chaos_rng r = {o->seed ^ 0x7072696full}; /* "prio" */
    long n = 0;
    for (long j = 0; j < o->jobs; j++) {
        job_plan *p = &plan[j];
        int64_t pick = chaos_range(&r, 0, 7);
        int64_t level = chaos_range(&r, 0, 9);
        p->priority = -1;
        if (pick != 0 || p->wide)
            continue;
        p->priority = (int8_t)level;
        n++;
    }
    return n;
}

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "--worker") == 0)
        return chaos_worker_main(argc - 2, argv + 2);
    if (argc > 1 && strcmp(argv[1], "--pidns-probe") == 0)
        return getpid() == 1 ? 0 : 1;
    setvbuf(stdout, NULL, _IOLBF, 0);
    signal(SIGPIPE, SIG_IGN);
    options *o = &opt;
    parse(argc, argv, o);
    ssize_t len = readlink("/proc/self/exe", self_exe, sizeof self_exe - 1);
    if (len <= 0) {
        fprintf(stderr, "chaos: cannot find its own executable\n");
        return 2;
    }
    self_exe[len] = '\0';

    /* Does this library know retry.backoff_ms? */
    settings.claim_idle_ms = o->claim_idle_ms;
    settings.lease_ttl_ms = o->lease_ttl_ms;
    settings.retry_backoff_ms = o->retry_backoff_ms;
    settings.retry_backoff_max_ms = o->retry_backoff_max_ms;
    settings.settle_slack_ms = o->settle_slack_ms;
    settings.handler_max_ms = o->handler_max_ms;
    settings.max_reply_bytes = o->max_reply_bytes;
    if (o->retry_backoff_ms > 0 || o->retry_backoff_max_ms > 0) {
        emq_conf_t *conf = emq_conf_new();
        emq_error err;
        char v[32];
        snprintf(v, sizeof v, "%ld",
                 o->retry_backoff_ms > 0 ? o->retry_backoff_ms : 1000);
        int known = conf &&
                    emq_conf_set(conf, "retry.backoff_ms", v, &err) == EMQ_OK;
        if (known && o->retry_backoff_max_ms > 0) {
            snprintf(v, sizeof v, "%ld", o->retry_backoff_max_ms);
            known = emq_conf_set(conf, "retry.backoff_max_ms", v, &err) ==
                    EMQ_OK;
        }
        emq_conf_destroy(conf);
        if (!known && !o->allow_unknown) {
            fprintf(stderr,
                    "chaos: this library refuses the retry backoff: %s\n"
                    "chaos: (--retry-backoff 0 runs without it; "
                    "--allow-unknown-conf lets the workers skip it with a "
                    "warning)\n",
                    err.message);
            return 2;
        }
        if (!known)
            printf("chaos: WARNING: this library refuses the retry backoff "
                   "(%s); workers go on without it (--allow-unknown-conf), "
                   "and retried jobs come back after claim.min_idle_ms\n",
                   err.message);
        settings.backoff_in_force = known;
    }

    snprintf(run_dir, sizeof run_dir, "%s/emq-chaos-%llu-XXXXXX", o->parent,
             (unsigned long long)o->seed);
    if (mkdtemp(run_dir) == NULL) {
        fprintf(stderr, "chaos: mkdtemp %s: %s\n", run_dir, strerror(errno));
        return 2;
    }
    if (run_dir[0] != '/') { /* the server fixture changes folders */
        char abs[PATH_MAX];
        if (realpath(run_dir, abs) == NULL || strlen(abs) >= sizeof run_dir) {
            fprintf(stderr, "chaos: realpath %s: %s\n", run_dir,
                    strerror(errno));
            return 2;
        }
        memcpy(run_dir, abs, strlen(abs) + 1); /* fits: checked above */
    }
    chaos_set_tmpdir(run_dir);

    pidns_ok = pidns_check(pidns_why, sizeof pidns_why);
    int pidns_workers = pidns_ok ? o->pidns_workers : 0;
    if (!pidns_ok)
        printf("chaos: PID namespaces SKIPPED: %s; no worker runs in its own "
               "PID namespace and every intruder starts in this one\n",
               pidns_why);
    nworkers = o->workers + pidns_workers;
    for (int i = o->workers + 1; i <= nworkers; i++)
        workers[i].pidns = 1;
    for (int i = o->workers - o->pull_workers + 1; i <= o->workers; i++)
        workers[i].pull = 1;

    /* Everything random comes from the seed, in this order. */
    chaos_rng rng = {o->seed};
    static fault faults[CHAOS_MAX_FAULTS];
    int nfaults = plan(o, &rng, faults);
    job_plan *jobs = calloc((size_t)o->jobs, sizeof *jobs);
    uint8_t *resent = calloc((size_t)o->jobs, 1);
    if (!jobs || !resent) {
        fprintf(stderr, "chaos: out of memory\n");
        return 2;
    }
    for (long placed = 0; placed < o->poison;) {
        long j = (long)chaos_range(&rng, 0, o->jobs - 1);
        if (!jobs[j].poison) {
            jobs[j].poison = 1;
            jobs[j].crash = placed < o->crash_jobs;
            placed++;
        }
    }
    long nlong = 0, nretry = 0;
    double handler_s = 0;
    plan_jobs(o, jobs, &nlong, &nretry, &handler_s);
    long wide_total = 0;
    double big_mb = 0;
    plan_extras(o, jobs, &big_mb, &wide_total);
    long ndedup;
    long ndelayed = plan_delays(o, jobs, &ndedup);
    long nprio = plan_priorities(o, jobs);
    job_plans = jobs;

    printf("chaos: seed %llu, %ld jobs (%ld poison, max_deliveries %d), %d "
           "workers (%d in their own PID namespace), %d s of faults, drain "
           "up to %d s\n",
           (unsigned long long)o->seed, o->jobs, o->poison, o->max_deliveries,
           nworkers, pidns_workers, o->seconds, o->drain_seconds);
    printf("chaos: claim.min_idle_ms %ld, lease.ttl_ms %ld, handlers 1..%ld "
           "ms, %ld long ones (%ld..%ld ms), %ld jobs ask 1-2 retries "
           "(retry.backoff_ms %ld%s)\n",
           o->claim_idle_ms, o->lease_ttl_ms, o->short_ms, nlong,
           o->claim_idle_ms / 4 > 1 ? o->claim_idle_ms / 4 : 1,
           o->handler_max_ms, nretry, o->retry_backoff_ms,
           o->retry_backoff_ms && !settings.backoff_in_force ? ", NOT in force"
                                                             : "");
    printf("chaos: %d of the plain workers in pull mode; %ld big jobs (%.1f MB "
           "in all, resp.max_reply_bytes %ld%s); %ld dead jobs (EMQ_DEAD at "
           "once, %ld extra fields in all)\n",
           o->pull_workers, o->big_jobs, big_mb, o->max_reply_bytes,
           o->max_reply_bytes ? "" : ": the default", o->dead_jobs, wide_total);
    printf("chaos: %ld jobs produced delayed by 1 ms to 2 s (moved to the "
           "stream by the consumers' upkeep), %ld with an idempotency key "
           "(never in the stream twice), %ld with a priority (0..9; the "
           "queue then holds every job and reads take the most urgent)\n",
           ndelayed, ndedup, nprio);
    printf("chaos: planned handler time %.0f s in all, %.0f s per worker "
           "(without duplicates)\n",
           handler_s, handler_s / (nworkers > 0 ? nworkers : 1));
    printf(
        "chaos: reproduce with: chaos --seed %llu --jobs %ld --workers %d "
        "--pidns-workers %d --seconds %d --poison %ld --crash-jobs %ld "
        "--max-deliveries %d --claim-idle %ld --lease-ttl %ld --handler-short-ms %ld "
        "--handler-long-permille %ld --handler-max-ms %ld "
        "--retry-permille %ld --retry-backoff %ld --retry-backoff-max %ld "
        "--settle-slack %ld --kills %d --stops %d --restarts %d --drops %d "
        "--stalls %d --halfopens %d --stops-long %d --intruders %d "
        "--misconfs %d --upkeep-kills %d --lease-dels %d --evictions %d "
        "--peer-claims %d --stops-pull %d --pull-workers %d --big-jobs %ld "
        "--big-max-mb %ld --dead-jobs %ld --wide-fields %ld "
        "--max-reply-bytes %ld --migrations %d --failovers %d%s%s%s%s\n",
        (unsigned long long)o->seed, o->jobs, o->workers, o->pidns_workers,
        o->seconds, o->poison, o->crash_jobs, o->max_deliveries,
        o->claim_idle_ms, o->lease_ttl_ms, o->short_ms, o->long_permille,
        o->handler_max_ms, o->retry_permille, o->retry_backoff_ms,
        o->retry_backoff_max_ms, o->settle_slack_ms, o->count[FAULT_KILL],
        o->count[FAULT_STOP], o->count[FAULT_RESTART], o->count[FAULT_DROP],
        o->count[FAULT_STALL], o->count[FAULT_HALFOPEN],
        o->count[FAULT_STOP_LONG], o->count[FAULT_INTRUDER],
        o->count[FAULT_MISCONF], o->count[FAULT_UPKEEP_KILL],
        o->count[FAULT_LEASE_DEL], o->count[FAULT_EVICT],
        o->count[FAULT_PEER_CLAIM], o->count[FAULT_STOP_PULL], o->pull_workers,
        o->big_jobs, o->big_max_mb, o->dead_jobs, o->wide_fields,
        o->max_reply_bytes, o->count[FAULT_MIGRATE], o->count[FAULT_FAILOVER],
        o->cluster ? " --cluster" : "", o->sentinel ? " --sentinel" : "",
        o->allow_unknown ? " --allow-unknown-conf" : "",
        o->exact ? " --exact" : "");
    if (o->tolerate_unseen || o->tolerate_fields || o->tolerate_undercounted)
        printf("chaos: the verdict only reports%s%s%s (--tolerate / "
               "EMQ_CHAOS_TOLERATE)\n",
               o->tolerate_unseen ? " unseen dead letters" : "",
               o->tolerate_fields ? " dead letters that lost fields" : "",
               o->tolerate_undercounted ? " counts below the truth" : "");
    printf("chaos: run folder %s\n", run_dir);
    printf("chaos: schedule of %d faults:\n", nfaults);
    for (int i = 0; i < nfaults; i++) {
        char what[200];
        describe(&faults[i], what, sizeof what);
        printf("  %3d  at %7.3f s  %-15s %s\n", i + 1, faults[i].at_ms / 1000.0,
               chaos_fault_name(faults[i].kind), what);
    }

    emq_srv_opts so;
    memset(&so, 0, sizeof so);
    so.transport = EMQ_SRV_TCP;
    so.appendonly = 1;
    so.start_timeout_ms = 60000;
    /* CONFIG SET dir (the MISCONF episode) is a protected config in 7.x;
     * "local" allows it over the admin unix socket only. 6.2 has no such
     * setting (and allows it). */
    so.extra_config = emq_srv_binary_version(NULL, 0) >= 70000
                          ? "enable-protected-configs local\n"
                          : NULL;
    emq_srv *srv = NULL;
    emq_peer *proxy = NULL;
    char admin_url[700];
    if (o->cluster) {
        /* Workers, producer and checker go to node 0 and follow the
         * redirections; the harness's own commands go to the owner. */
        cluster = emq_cl_start(3, o->count[FAULT_FAILOVER] > 0 ? 1 : 0);
        char out[64];
        if (emq_srv_cmd(emq_cl_node(cluster, 0), out, sizeof out, "CLUSTER",
                        "KEYSLOT", CHAOS_STREAM, NULL) != ':') {
            fprintf(stderr, "chaos: CLUSTER KEYSLOT: %s\n", out);
            return 2;
        }
        queue_slot = (unsigned)atoi(out);
        srv = emq_cl_node(cluster, 0);
        snprintf(proxy_url, sizeof proxy_url, "%s", emq_srv_url(srv));
        snprintf(admin_url, sizeof admin_url, "unix://%s",
                 emq_srv_socket(owner_srv()));
        printf("chaos: a 3-master cluster (node 0 at %s); the queue's slot "
               "%u is on node %d; workers connect to node 0 directly\n",
               proxy_url, queue_slot, emq_cl_owner(cluster, 0, queue_slot));
    } else if (o->sentinel) {
        /* Workers and producer reach the primary through the Sentinels;
         * the harness's own commands go to the primary they name. */
        if (sentinel_start(&so) != 0)
            return 2;
        srv = nodes[0];
        snprintf(proxy_url, sizeof proxy_url,
                 "redis-sentinel://127.0.0.1:%d,127.0.0.1:%d,127.0.0.1:%d"
                 "#" CHAOS_MASTER,
                 emq_srv_port(sentinels[0]), emq_srv_port(sentinels[1]),
                 emq_srv_port(sentinels[2]));
        snprintf(admin_url, sizeof admin_url, "unix://%s", emq_srv_socket(srv));
        printf("chaos: a primary (%s), two replicas and three Sentinels; "
               "workers and producer connect through %s; the producer's "
               "entries are confirmed by both replicas\n",
               emq_srv_url(srv), proxy_url);
    } else {
        srv = emq_srv_start(&so);
        emq_peer_opts po;
        memset(&po, 0, sizeof po);
        po.mode = EMQ_PEER_PROXY;
        po.upstream_port = emq_srv_port(srv);
        proxy = emq_peer_start(&po);
        snprintf(proxy_url, sizeof proxy_url, "%s", emq_peer_url(proxy));
        snprintf(admin_url, sizeof admin_url, "unix://%s", emq_srv_socket(srv));
        printf("chaos: redis-server pid %ld at %s; workers connect through "
               "the proxy %s\n",
               (long)emq_srv_pid(srv), emq_srv_url(srv), proxy_url);
    }

    run_start = chaos_now_ms();
    /* Node 0 in a cluster; the Sentinels' URL behind Sentinel. */
    producer.url = o->sentinel ? proxy_url : emq_srv_url(srv);
    /* Confirmed by the replicas: a failover loses no confirmed entry. */
    producer.wait_replicas = o->sentinel                                  ? 2
                             : o->cluster && o->count[FAULT_FAILOVER] > 0 ? 1
                                                                          : 0;
    producer.jobs = o->jobs;
    producer.plan = jobs;
    producer.resent = resent;
    producer.start_ms = run_start + 500;
    producer.rate = (double)o->jobs / (o->seconds - 3 > 1 ? o->seconds - 3 : 1);
    producer.deadline_ms = run_start +
                           (int64_t)(o->seconds + o->drain_seconds + 60) * 1000;
    producer.seed = o->seed;
    pthread_t producer_thread;
    if (pthread_create(&producer_thread, NULL, chaos_produce, &producer) != 0) {
        fprintf(stderr, "chaos: cannot start the producer thread\n");
        return 2;
    }
    if (o->big_jobs > 0) {
        /* The big jobs open the stream (jobs 0..): the workers start once
         * the first batch is in, so their first reads find all of them
         * at once, more than resp.max_reply_bytes together. */
        long first = o->jobs < 100 ? o->jobs : 100;
        int64_t until = chaos_now_ms() + 10000;
        while (__atomic_load_n(&producer.confirmed, __ATOMIC_RELAXED) < first &&
               !__atomic_load_n(&producer.done, __ATOMIC_ACQUIRE) &&
               chaos_now_ms() < until)
            chaos_sleep_ms(20);
        printf("[%7.3f] the first %ld jobs (the big ones among them) are in "
               "the stream; starting the workers\n",
               (chaos_now_ms() - run_start) / 1000.0,
               __atomic_load_n(&producer.confirmed, __ATOMIC_RELAXED));
    }
    for (int i = 1; i <= nworkers; i++) {
        spawn_worker(i);
        if (workers[i].pidns)
            printf("chaos: worker chaos-%d runs in its own PID namespace "
                   "(pid %ld outside)\n",
                   i, (long)workers[i].target);
    }

    for (int i = 0; i < nfaults; i++) {
        wait_until(run_start + faults[i].at_ms);
        inject(&faults[i], i + 1,
               cluster       ? owner_srv()
               : o->sentinel ? primary_srv()
                             : srv,
               proxy);
    }
    wait_until(run_start + (int64_t)o->seconds * 1000);
    while (!__atomic_load_n(&producer.done, __ATOMIC_ACQUIRE))
        wait_until(chaos_now_ms() + 100); /* bounded by its deadline */
    pthread_join(producer_thread, NULL);
    printf("[%7.3f] producer done: %ld jobs confirmed, %ld batch retries%s%s\n",
           (chaos_now_ms() - run_start) / 1000.0, producer.confirmed,
           producer.resends, producer.failed ? "; GAVE UP: " : "",
           producer.failed ? producer.why : "");

    /* Drain: nothing pending, nothing undelivered. */
    int drained = 0;
    int64_t drain_deadline = chaos_now_ms() + (int64_t)o->drain_seconds * 1000;
    long long pending = -1;
    int behind = 1;
    while (chaos_now_ms() < drain_deadline) {
        if (cluster || o->sentinel)
            snprintf(admin_url, sizeof admin_url, "unix://%s",
                     emq_srv_socket(cluster ? owner_srv() : primary_srv()));
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
    for (int i = 1; i <= nworkers; i++)
        if (workers[i].starts > 1)
            printf("worker chaos-%d was started %d times\n", i,
                   workers[i].starts);
    /* The deaths on crash jobs join the faults: kills the checker knows. */
    for (int k = 0; k < ncrash_deaths && nfaults < CHAOS_MAX_FAULTS; k++)
        faults[nfaults++] = crash_deaths[k];

    chaos_run run = {
        .seed = o->seed,
        .jobs = o->jobs,
        .workers = nworkers,
        .pidns_workers = pidns_workers,
        .max_deliveries = o->max_deliveries,
        .pull_workers = o->pull_workers,
        .dir = run_dir,
        .admin_url = admin_url,
        .plan = jobs,
        .set = settings,
        .run_start = run_start,
        .resent = resent,
        .faults = faults,
        .nfaults = nfaults,
        .crashes = ncrash_deaths,
        .workers_died = workers_died + slow,
        .tolerate_exits = o->tolerate_exits,
        .tolerate_unseen = o->tolerate_unseen,
        .counts_bounded = o->sentinel || o->tolerate_undercounted ||
                          (o->cluster && o->count[FAULT_FAILOVER] > 0),
        .tolerate_fields = o->tolerate_fields,
        .producer_failed = producer.failed,
        .drained = drained,
    };
    if (cluster || o->sentinel)
        snprintf(admin_url, sizeof admin_url, "unix://%s",
                 emq_srv_socket(cluster ? owner_srv() : primary_srv()));
    int verdict = chaos_check(&run);
    printf("chaos: %.1f s in all\n", (chaos_now_ms() - run_start) / 1000.0);
    if (cluster) {
        emq_cl_stop(cluster);
    } else if (o->sentinel) {
        for (int i = 0; i < 3; i++)
            emq_srv_stop(sentinels[i]);
        for (int i = 0; i < 3; i++)
            emq_srv_stop(nodes[i]);
    } else {
        emq_peer_stop(proxy);
        emq_srv_stop(srv);
    }
    free(jobs);
    free(resent);
    if (verdict == 0 && !o->keep) {
        remove_tree(run_dir);
    } else {
        printf("chaos: run folder kept: %s (ledgers chaos-*.ledger and "
               "intruder-*.ledger, worker logs *.log, server in srv-1/)\n",
               run_dir);
    }
    return verdict;
}
