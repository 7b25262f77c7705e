/* SPDX-License-Identifier: BSD-3-Clause */
/* cmd_consume.c: `echomq consume`, a consumer of a group on the command line.
 *
 * One consumer name, one read connection (and the upkeep's), driven by the
 * pull API: the main thread polls entries and hands them out.
 *
 * Pipe mode (no --exec): each poll's entries become JSON lines
 * (emq_entry_json) written to stdout in one write(2), and only then are
 * they acknowledged. With --exec CMD, each entry runs `/bin/sh -c CMD`
 * with the JSON line on its stdin and EMQ_QUEUE, EMQ_GROUP, EMQ_CONSUMER,
 * EMQ_ID and EMQ_DELIVERIES in its environment; exit 0 acknowledges, 75
 * (EX_TEMPFAIL) asks for a retry, anything else is a failure whose reason
 * ("exit N", "signal N", "timeout") goes with the entry to the dead
 * letters once it reaches --max-deliveries. --exec-batch N CMD runs CMD
 * with up to N lines on its stdin and settles them all by its exit.
 * --concurrency N runs N commands at once, on worker threads, all under
 * the one name. --exec-timeout kills a command's process group. --no-ack
 * settles nothing: entries stay pending to the name.
 *
 * --limit and --until-idle stop the consumer (emq_consumer_stop) from the
 * main thread or a watchdog; SIGINT/SIGTERM/SIGHUP stop it gracefully (exit 0):
 * the commands running finish and are settled, entries read ahead go back to
 * the server uncounted. A second signal ends the process at once.
 */
#include "cli.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

static const char *const VERB = "consume";
static const char *const SYNOPSIS =
    "echomq consume QUEUE --group G --consumer C --start new|head";

static const cli_optdoc opts[] = {
    {O_GROUP, "G",
     "consumer group (required); created at --start if it does not exist, "
     "an existing group keeps its position"},
    {O_CONSUMER, "C",
     "stable consumer name (required): the same after a restart, never "
     "random"},
    {O_START, "new|head|ID",
     "where a new group starts (required): new = only entries added from "
     "now on, head = replay the stream, an entry ID = the entries after "
     "it, @UNIX-MS = the first entry added at or after that time"},
    {O_COUNT, "N", "entries per read (default 100)"},
    {O_BLOCK, "MS",
     "how long a read waits (default 2000; at most a third of lease.ttl_ms "
     "less a second: 9666 with the default lease, else exit 2 naming both; "
     "raise it with -X lease.ttl_ms=N; a read also returns early when a "
     "claim beat is due)"},
    {O_CLAIM_IDLE, "MS",
     "take over entries idle this long at another (or a dead) consumer "
     "(default 60000)"},
    {O_CLAIM_INTERVAL, "MS", "time between claim beats (default 5000)"},
    {O_MAX_DELIVERIES, "N", "deliveries before the dead letters (default 5)"},
    {O_RETRY_BACKOFF, "MS",
     "a failed entry (exit 75) comes back to this consumer after MS, "
     "doubling per delivery with jitter (default 1000; 0: at once)"},
    {O_RETRY_BACKOFF_MAX, "MS", "longest retry delay (default 60000)"},
    {O_RATE, "N",
     "the whole group is handed at most N new entries in any one-second "
     "window, whatever the number of consumers (rate.limit; recorded in "
     "the server where the group has none: the server's value wins; "
     "'echomq group limits' changes it)"},
    {O_GROUP_MAX_IN_FLIGHT, "N",
     "the whole group holds at most N entries delivered and not settled "
     "(group.max_in_flight; recorded like --rate)"},
    {O_LIMIT, "N",
     "stop after N entries handled; nothing beyond N is read, and entries "
     "read but not handled come back first on the next run"},
    {O_UNTIL_IDLE, "MS",
     "stop once nothing arrived for MS and nothing is in hand (an entry "
     "waiting out its retry delay counts as in hand), exit 0; exit 1 when "
     "no read of new entries was answered within MS + --block + "
     "connect_timeout_ms + command_timeout_ms"},
    {O_EXEC, "CMD",
     "run /bin/sh -c CMD per entry: the JSON line on stdin; EMQ_QUEUE, "
     "EMQ_GROUP, EMQ_CONSUMER, EMQ_ID, EMQ_DELIVERIES in the environment. "
     "Exit 0: acknowledge; 75: retry later; other: failure (reason "
     "\"exit N\" or \"signal N\"), dead-lettered at --max-deliveries"},
    {O_EXEC_BATCH, "N CMD",
     "run /bin/sh -c CMD with up to N JSON lines on stdin (EMQ_COUNT says "
     "how many): exit 0 acknowledges them all, 75 retries them all, any "
     "other exit fails them all"},
    {O_EXEC_TIMEOUT, "MS",
     "kill a command's process group after MS; its entries fail with "
     "reason \"timeout\"; also sets handler.timeout_ms to MS + 5000 unless "
     "-X handler.timeout_ms=N sets it, so an entry whose command cannot be "
     "ended is let go for a peer"},
    {O_CONCURRENCY, "N",
     "N commands at once, all under the one name C and one read "
     "connection (plus the consumer's upkeep connection); default 1"},
    {O_NO_ACK, NULL,
     "settle nothing: print (or run) and leave every entry pending to C "
     "(each later delivery counts toward --max-deliveries)"},
    {O_PARTITIONS, "P",
     "QUEUE is a topic of P partitions: read all of them, one connection "
     "and thread each; one partition's entries are handed out in order"},
    {O_FORMAT, "FMT",
     "print each entry as FMT instead of JSON: %i ID, %d deliveries, %s "
     "stream, %p partition, %t the ID's time (UTC), %f{NAME} a field's "
     "value, %% a percent sign, \\n \\t escapes"},
    {O_STATS_INTERVAL, "MS",
     "write the consumer's statistics (JSON: counters, handler latency, "
     "delivery counts, lag, oldest pending age) to stderr every MS, a line "
     "each (stats.interval_ms)"},
    {O_WAIT_FOR_SERVER, NULL,
     "a server that does not answer at start is waited for (reconnect "
     "backoff; consumer.connect wait) instead of exiting 1, so workers may "
     "start before it; a "
     "wrong password or certificate still exits at once"},
    CLI_OPTS_END,
};

CLI_VERB(
    consume,
    "join a group: print entries as JSON lines, or --exec a command per entry",
    "echomq consume QUEUE --group G --consumer C --start new|head|ID\n"
    "               [options] [--exec CMD]",
    "Joins consumer group G of QUEUE (created at --start if it does not\n"
    "exist; an existing group keeps its position) under the stable name C,\n"
    "takes back C's own pending entries first, then reads new ones.\n",
    opts,
    "Without --exec the entries of each read are printed as JSON lines in one\n"
    "write and acknowledged once that write reached stdout:\n"
    "  {\"id\":\"1700000000000-0\",\"deliveries\":1,\"fields\":{\"task\":\"x\"}}\n"
    "An entry is acknowledged once its line reached the pipe: a reader that\n"
    "exits early loses what the pipe buffered (use --exec-batch for a\n"
    "batch-safe handoff). Values that are not UTF-8 are {\"base64\":\"...\"}.\n"
    "SIGINT, SIGTERM or SIGHUP stops gracefully (exit 0); a second one exits at once.\n"
    "\n"
    "Examples:\n"
    "  echomq consume jobs -g workers -c w1 --start head --until-idle 1000\n"
    "  echomq consume jobs -g workers -c w1 --start new --exec './handle.sh'\n");

/* Most entries the main thread queues for the workers: what they run
 * next, beside what they run now. */
#define WORK_MAX 4096
/* handler.timeout_ms backing --exec-timeout: this much longer, room for
 * the command's process group to be killed and reaped and its entries
 * settled before the library lets them go. */
#define EXEC_TIMEOUT_GRACE_MS 5000

typedef struct consume_ctx {
    const char *queue;
    cli_lines lines;           /* how each entry is written */
    int progress;              /* a progress line on stderr (a terminal) */
    int stats_lines;           /* --stats-interval: reports on stderr */
    atomic_llong lag;          /* the group's lag from the last report; -1 */
    const char *exec;          /* NULL: pipe mode */
    size_t exec_batch;         /* entries per command (1: --exec) */
    long long exec_timeout_ms; /* 0: none */
    int no_ack;
    long long limit; /* 0: none */
    emq_consumer_t *consumer;
    atomic_llong handled; /* entries handed to a command or printed */
    atomic_llong last_ms; /* last activity, for --until-idle */
    atomic_int busy;      /* commands running now */
    atomic_int write_failed;
    atomic_int stopping;
    atomic_int settle_failed;
    atomic_llong never_read; /* ms without an answered read, when that
                                ended an --until-idle run; 0 */
    char settle_error[EMQ_ERROR_MESSAGE_MAX];
    /* The work queue between the main thread and the workers. */
    pthread_mutex_t mu;
    pthread_cond_t more, room;
    emq_entry *work[WORK_MAX];
    size_t head, n, idle; /* idle: workers waiting for work */
    int quit;
} consume_ctx;

/* A failure of this command itself, as an emq_error. */
static emq_status local_error(emq_error *err, emq_status st, const char *msg) {
    memset(err, 0, sizeof *err);
    err->code = st;
    snprintf(err->message, sizeof err->message, "%s", msg);
    return st;
}

/* --stats-interval: one line on stderr per report (the upkeep thread's;
 * one fwrite, so lines of a topic's partitions do not interleave). */
static void stats_line(void *opaque, const char *json, size_t len) {
    consume_ctx *x = opaque;
    char line[8192];
    if (len + 1 >= sizeof line)
        return;
    memcpy(line, json, len);
    line[len] = '\0';
    const char *lag = strstr(line, "\"lag\":");
    if (lag) /* the progress line shows it */
        atomic_store(&x->lag, lag[6] == 'n' ? -1 : strtoll(lag + 6, NULL, 10));
    if (!x->stats_lines)
        return;
    line[len] = '\n';
    fwrite(line, 1, len + 1, stderr);
}

/* Async-signal-safe (atomic stores only). */
static void stop_all(void *opaque) {
    consume_ctx *x = opaque;
    atomic_store(&x->stopping, 1);
    emq_consumer_stop(x->consumer);
}

/* Writes all of buf to fd; 0 or -1. */
static int write_all(int fd, const char *buf, size_t len) {
    while (len > 0) {
        ssize_t w = write(fd, buf, len);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        buf += w;
        len -= (size_t)w;
    }
    return 0;
}

/* Settles entries[0..n) with one verdict and frees them. A settlement
 * that fails (a peer took the entry over: the peer handles it) is noted,
 * never fatal. */
static void settle_all(consume_ctx *x, emq_entry **entries, size_t n,
                       emq_verdict verdict, const char *reason) {
    for (size_t i = 0; i < n; i++) {
        emq_error err;
        emq_status st = EMQ_OK;
        if (!x->no_ack) {
            if (verdict == EMQ_ACK)
                st = emq_consumer_ack(x->consumer, entries[i], &err);
            else
                st = emq_consumer_retry(x->consumer, entries[i], -1, reason,
                                        &err);
        }
        if (st != EMQ_OK && !atomic_exchange(&x->settle_failed, 1))
            snprintf(x->settle_error, sizeof x->settle_error, "%s",
                     err.message);
        emq_entry_free(entries[i]);
    }
}

/* Waits for pid, killing its process group after timeout_ms (0: never).
 * Returns the wait status, or -1 (reason filled). *timed_out set. */
static int wait_command(pid_t pid, long long timeout_ms, int *timed_out,
                        char *reason, size_t reason_size) {
    *timed_out = 0;
    int64_t deadline = timeout_ms > 0 ? emq_clock_ms() + timeout_ms : 0;
    useconds_t nap = 500;
    for (;;) {
        int status;
        pid_t w = waitpid(pid, &status, deadline ? WNOHANG : 0);
        if (w == pid)
            return status;
        if (w < 0 && errno != EINTR) {
            snprintf(reason, reason_size, "waitpid failed: %s",
                     strerror(errno));
            return -1;
        }
        if (w == 0 && emq_clock_ms() >= deadline && !*timed_out) {
            *timed_out = 1;
            kill(-pid, SIGKILL); /* the command and what it started */
            deadline = 0;        /* now wait for it to be reaped */
        } else if (w == 0) {
            usleep(nap);
            nap = nap < 10000 ? nap * 2 : 10000;
        }
    }
}

/* The environment of a command: echomq's without EMQ_* (vars set them)
 * and without ECHOMQ_* (ECHOMQ_URL and ECHOMQ_PASSWORD hold the server's
 * credentials: a handler has no business with them), then vars (NULL
 * ends them; at most 5). NULL out of memory; free the array alone. */
static char **command_env(char *const *vars) {
    size_t nenv = 0;
    while (environ[nenv])
        nenv++;
    char **envp = calloc(nenv + 6, sizeof *envp);
    if (envp == NULL)
        return NULL;
    size_t k = 0;
    for (size_t i = 0; i < nenv; i++)
        if (strncmp(environ[i], "EMQ_", 4) != 0 &&
            strncmp(environ[i], "ECHOMQ_", 7) != 0)
            envp[k++] = environ[i];
    for (size_t i = 0; vars[i] != NULL && i < 5; i++)
        envp[k++] = vars[i];
    return envp;
}

/* The verdict of a finished command's wait status: exit 0 acknowledges;
 * anything else is a retry whose reason says why ("exit 75 (retry)",
 * "exit N", "signal N"). */
static emq_verdict verdict_of(int status, char *reason, size_t reason_size) {
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
        return EMQ_ACK;
    if (WIFEXITED(status) && WEXITSTATUS(status) == 75)
        snprintf(reason, reason_size, "exit 75 (retry)");
    else if (WIFEXITED(status))
        snprintf(reason, reason_size, "exit %d", WEXITSTATUS(status));
    else
        snprintf(reason, reason_size, "signal %d",
                 WIFSIGNALED(status) ? WTERMSIG(status) : 0);
    return EMQ_RETRY;
}

/* Runs the command with the JSON lines of entries[0..n) on its stdin;
 * returns the verdict for all of them (reason filled unless EMQ_ACK). */
static emq_verdict run_exec(consume_ctx *x, emq_entry **entries, size_t n,
                            char *reason, size_t reason_size) {
    char *lines = NULL;
    size_t len = 0, cap = 0;
    for (size_t i = 0; i < n; i++)
        if (cli_line_append(&x->lines, entries[i], &lines, &len, &cap) != 0) {
            free(lines);
            snprintf(reason, reason_size, "out of memory in echomq consume");
            return EMQ_RETRY;
        }
    const emq_entry *e = entries[0];
    char v_queue[300], v_group[300], v_consumer[300], v_id[80], v_del[64];
    snprintf(v_queue, sizeof v_queue, "EMQ_QUEUE=%s", x->queue);
    snprintf(v_group, sizeof v_group, "EMQ_GROUP=%s", e->group);
    snprintf(v_consumer, sizeof v_consumer, "EMQ_CONSUMER=%s", e->consumer);
    if (x->exec_batch > 1) {
        snprintf(v_id, sizeof v_id, "EMQ_COUNT=%zu", n);
        v_del[0] = '\0';
    } else {
        snprintf(v_id, sizeof v_id, "EMQ_ID=%s", e->id);
        snprintf(v_del, sizeof v_del, "EMQ_DELIVERIES=%llu",
                 (unsigned long long)e->deliveries);
    }
    char *vars[] = {v_queue, v_group, v_consumer, v_id, v_del[0] ? v_del : NULL,
                    NULL};
    char **envp = command_env(vars);
    if (envp == NULL) {
        free(lines);
        snprintf(reason, reason_size, "out of memory starting the command");
        return EMQ_RETRY;
    }
    /* Commands start from several threads. A command must not inherit
     * another command's stdin pipe: its write end held open by a sibling
     * keeps `cat` from ever seeing EOF (two such siblings wait for each
     * other forever). So the pipe is made close-on-exec, and pipe + fcntl
     * + fork run under one lock so that no other thread forks between the
     * pipe and its flag. */
    static pthread_mutex_t spawn_lock = PTHREAD_MUTEX_INITIALIZER;
    int fds[2];
    pthread_mutex_lock(&spawn_lock);
    if (pipe(fds) != 0) {
        pthread_mutex_unlock(&spawn_lock);
        free(envp);
        free(lines);
        snprintf(reason, reason_size, "pipe failed: %s", strerror(errno));
        return EMQ_RETRY;
    }
    fcntl(fds[0], F_SETFD, FD_CLOEXEC);
    fcntl(fds[1], F_SETFD, FD_CLOEXEC);
    pid_t pid = fork();
    if (pid != 0)
        pthread_mutex_unlock(&spawn_lock);
    if (pid < 0) {
        close(fds[0]);
        close(fds[1]);
        free(envp);
        free(lines);
        snprintf(reason, reason_size, "fork failed: %s", strerror(errno));
        return EMQ_RETRY;
    }
    if (pid == 0) {
        /* Child: its own process group (--exec-timeout kills the whole
         * group), stdin from the pipe, default signal dispositions. */
        setpgid(0, 0);
        signal(SIGINT, SIG_DFL);
        signal(SIGTERM, SIG_DFL);
        signal(SIGHUP, SIG_DFL);
        signal(SIGPIPE, SIG_DFL);
        if (fds[0] != STDIN_FILENO) {
            dup2(fds[0], STDIN_FILENO); /* the copy is not close-on-exec */
            close(fds[0]);
        } else {
            fcntl(STDIN_FILENO, F_SETFD, 0);
        }
        close(fds[1]);
        char *args[] = {"/bin/sh", "-c", (char *)x->exec, NULL};
        execve("/bin/sh", args, envp);
        _exit(127);
    }
    setpgid(pid, pid); /* also here: no race with the kill */
    free(envp);
    close(fds[0]);
    (void)write_all(fds[1], lines, len); /* a command may not read stdin */
    close(fds[1]);
    free(lines);
    int timed_out;
    int status =
        wait_command(pid, x->exec_timeout_ms, &timed_out, reason, reason_size);
    if (status == -1)
        return EMQ_RETRY;
    if (timed_out) {
        snprintf(reason, reason_size, "timeout");
        return EMQ_RETRY;
    }
    return verdict_of(status, reason, reason_size);
}

/* A worker: takes up to exec_batch entries, runs the command, settles. */
static void *worker_main(void *opaque) {
    consume_ctx *x = opaque;
    emq_entry **mine = calloc(x->exec_batch, sizeof *mine);
    for (;;) {
        pthread_mutex_lock(&x->mu);
        x->idle++;
        pthread_cond_signal(&x->room);
        while (x->n == 0 && !x->quit)
            pthread_cond_wait(&x->more, &x->mu);
        x->idle--;
        size_t n = 0;
        while (mine != NULL && n < x->exec_batch && x->n > 0) {
            mine[n++] = x->work[x->head];
            x->head = (x->head + 1) % WORK_MAX;
            x->n--;
        }
        int done = x->n == 0 && x->quit && n == 0;
        pthread_mutex_unlock(&x->mu);
        if (done || mine == NULL)
            break;
        atomic_fetch_add(&x->busy, 1);
        atomic_store(&x->last_ms, emq_clock_ms());
        char reason[256] = "";
        emq_verdict v = run_exec(x, mine, n, reason, sizeof reason);
        settle_all(x, mine, n, v, reason);
        atomic_store(&x->last_ms, emq_clock_ms());
        atomic_fetch_sub(&x->busy, 1);
    }
    free(mine);
    return NULL;
}

/* Pipe mode: the entries as JSON lines in one write, then their acks. */
static void print_batch(consume_ctx *x, emq_entry **entries, size_t n) {
    static char *buf;
    static size_t cap;
    size_t len = 0;
    int bad = 0;
    for (size_t i = 0; i < n && !bad; i++)
        bad = cli_line_append(&x->lines, entries[i], &buf, &len, &cap) != 0;
    if (!bad)
        bad = write_all(STDOUT_FILENO, buf, len) != 0;
    if (bad) {
        /* Not shown to anyone: leave them pending and stop. */
        atomic_store(&x->write_failed, errno ? errno : EIO);
        for (size_t i = 0; i < n; i++)
            emq_entry_free(entries[i]);
        stop_all(x);
    } else {
        settle_all(x, entries, n, EMQ_ACK, NULL);
    }
    if (n == 0 || bad) {
        free(buf);
        buf = NULL;
        cap = 0;
    }
}

/* How many entries the main thread may poll now: in pipe mode a read's
 * worth; with commands, as many as idle workers take, so that nothing
 * waits long in the work queue; never beyond --limit. */
static size_t want_now(consume_ctx *x, size_t count) {
    size_t want = count;
    if (x->exec != NULL) {
        pthread_mutex_lock(&x->mu);
        if (x->idle * x->exec_batch <= x->n && !atomic_load(&x->stopping)) {
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            ts.tv_nsec += 100 * 1000000L;
            if (ts.tv_nsec >= 1000000000L) {
                ts.tv_sec++;
                ts.tv_nsec -= 1000000000L;
            }
            pthread_cond_timedwait(&x->room, &x->mu, &ts);
        }
        size_t free_slots =
            x->idle * x->exec_batch > x->n ? x->idle * x->exec_batch - x->n : 0;
        pthread_mutex_unlock(&x->mu);
        want = free_slots;
    }
    long long left = x->limit > 0 ? x->limit - atomic_load(&x->handled) : 0;
    if (x->limit > 0 && (long long)want > left)
        want = left > 0 ? (size_t)left : 0;
    return want;
}

/* The main thread's loop: poll, then print or hand to the workers. */
static emq_status dispatch(consume_ctx *x, size_t count, emq_error *err) {
    emq_entry **got = calloc(count, sizeof *got);
    if (got == NULL)
        return local_error(err, EMQ_ENOMEM, "out of memory");
    emq_status st = EMQ_OK;
    for (;;) {
        if (atomic_load(&x->stopping))
            break;
        if (x->limit > 0 && atomic_load(&x->handled) >= x->limit) {
            stop_all(x);
            break;
        }
        size_t want = want_now(x, count);
        if (want == 0)
            continue; /* every worker busy: want_now waited a while */
        size_t n = 0;
        st = emq_consumer_poll(x->consumer, got, want, 100, &n, err);
        if (st != EMQ_OK)
            break;
        if (n == 0)
            continue;
        /* At the limit, read nothing more before these are settled (a
         * settlement frees room for a read ahead). */
        long long total = atomic_fetch_add(&x->handled, (long long)n) +
                          (long long)n;
        if (x->limit > 0 && total >= x->limit)
            emq_consumer_pause(x->consumer);
        atomic_store(&x->last_ms, emq_clock_ms());
        if (x->exec == NULL) {
            print_batch(x, got, n);
            continue;
        }
        pthread_mutex_lock(&x->mu);
        for (size_t i = 0; i < n; i++)
            x->work[(x->head + x->n++) % WORK_MAX] = got[i];
        pthread_cond_broadcast(&x->more);
        pthread_mutex_unlock(&x->mu);
    }
    if (st == EMQ_ECLOSED) { /* stopped */
        memset(err, 0, sizeof *err);
        st = EMQ_OK;
    }
    if (x->exec == NULL)
        print_batch(x, got, 0); /* frees the line buffer */
    free(got);
    return st;
}

typedef struct watchdog {
    consume_ctx *x;
    long long idle_ms;
    long long first_read_ms; /* the longest a healthy first answer takes */
    atomic_int done;
} watchdog;

/* --until-idle: stops the consumer once nothing arrived for idle_ms and
 * it holds nothing unsettled (a retry waiting out its delay counts; with
 * --no-ack, entries left pending on purpose do not). */
static void *watch(void *opaque) {
    watchdog *w = opaque;
    int64_t started = emq_clock_ms(), shown = 0;
    while (!atomic_load(&w->done)) {
        usleep(20000);
        emq_consumer_stats st;
        emq_consumer_stats_get(w->x->consumer, &st);
        int64_t now = emq_clock_ms();
        if (w->x->progress && now - shown >= 250) {
            /* Progress: handled, rate, lag (from the last report), out. */
            long long handled = atomic_load(&w->x->handled);
            long long lag = atomic_load(&w->x->lag);
            double secs = (double)(now - started) / 1000.0;
            char lag_text[32] = "?";
            if (lag >= 0)
                snprintf(lag_text, sizeof lag_text, "%lld", lag);
            fprintf(stderr,
                    "\r\033[Kechomq: %lld handled (%.0f/s), lag %s, "
                    "%llu in flight",
                    handled, secs > 0 ? (double)handled / secs : 0.0, lag_text,
                    (unsigned long long)st.in_flight);
            shown = now;
        }
        if (w->idle_ms <= 0)
            continue;
        uint64_t in_hand = st.in_flight - (w->x->no_ack ? st.handed_out : 0);
        /* Not idle before the first answered read: a consumer still
         * connecting (a TLS handshake that fails) has consumed nothing,
         * and its run ends with the reason, not 0; one whose reads go
         * unanswered past what connecting, a read's block and its reply
         * take ends as a failure too, not as an empty queue. */
        if (st.reads == 0 && now - started >= w->first_read_ms) {
            atomic_store(&w->x->never_read, now - started);
            stop_all(w->x);
            break;
        }
        if (in_hand > 0 || st.reads == 0) {
            atomic_store(&w->x->last_ms, emq_clock_ms());
            continue;
        }
        if (atomic_load(&w->x->busy) == 0 &&
            emq_clock_ms() - atomic_load(&w->x->last_ms) >= w->idle_ms) {
            stop_all(w->x);
            break;
        }
    }
    return NULL;
}

/* Option -> property: the numbers are checked in this order; a row with a
 * property sets it when the option is given, the others are read from
 * a.num (count and block are bounded by --limit and --until-idle first). */
static const cli_prop props[] = {
    CLI_NUM(O_COUNT, NULL, 1, 100000, 100),
    CLI_NUM(O_BLOCK, NULL, 1, 3600000, 2000),
    CLI_NUM(O_CLAIM_IDLE, "claim.min_idle_ms", 1, INT32_MAX, -1),
    CLI_NUM(O_CLAIM_INTERVAL, "claim.interval_ms", 1, INT32_MAX, -1),
    CLI_NUM(O_MAX_DELIVERIES, "max_deliveries", 1, 1000000, -1),
    CLI_NUM(O_RETRY_BACKOFF, "retry.backoff_ms", 0, INT32_MAX, -1),
    CLI_NUM(O_RETRY_BACKOFF_MAX, "retry.backoff_max_ms", 0, INT32_MAX, -1),
    CLI_NUM(O_RATE, "rate.limit", 1, 100000000, -1),
    CLI_NUM(O_GROUP_MAX_IN_FLIGHT, "group.max_in_flight", 1, 100000000, -1),
    CLI_NUM(O_LIMIT, NULL, 1, INT64_MAX, 0),
    CLI_NUM(O_UNTIL_IDLE, NULL, 1, INT32_MAX, 0),
    CLI_NUM(O_CONCURRENCY, NULL, 1, 1024, 1),
    CLI_NUM(O_EXEC_BATCH, NULL, 1, 100000, 1),
    CLI_NUM(O_EXEC_TIMEOUT, NULL, 1, INT32_MAX, 0),
    CLI_NUM(O_STATS_INTERVAL, NULL, 1, INT32_MAX, 0),
    CLI_TEXT(O_PARTITIONS, "partitions"),
    CLI_TEXT(O_GROUP, "group"),
    CLI_TEXT(O_CONSUMER, "consumer"),
    CLI_FLAG(O_WAIT_FOR_SERVER, "consumer.connect", "wait"),
    CLI_PROPS_END,
};

/* Every usage check that needs no server (beside a missing QUEUE): the
 * one QUEUE, the required options,
 * the numbers (props) and the ways to run a command. */
static int check_usage(cli_args *a) {
    int rc = CLI_OK;
    if (a->npos > 1)
        rc = cli_usage_err(VERB, "unexpected argument '%s'", a->pos[1]);
    if (rc == CLI_OK)
        rc = cli_require(VERB, a, O_GROUP, "--group",
                         "the consumer group to join");
    if (rc == CLI_OK)
        rc = cli_require(VERB, a, O_CONSUMER, "--consumer",
                         "a stable name for this consumer (the same after a "
                         "restart, so it gets its pending entries back)");
    if (rc == CLI_OK)
        rc = cli_require(VERB, a, O_START, "--start",
                         "new (only new entries) or head (replay the "
                         "stream), or an entry ID");
    if (rc == CLI_OK)
        rc = cli_check_props(VERB, a, props);
    if (rc == CLI_OK && a->seen[O_EXEC] && a->value[O_EXEC][0] == '\0')
        rc = cli_usage_err(VERB, "--exec needs a command");
    if (rc == CLI_OK && a->seen[O_EXEC_BATCH] && a->seen[O_EXEC])
        rc = cli_usage_err(VERB, "--exec and --exec-batch are two ways to "
                                 "run a command: give one");
    if (rc == CLI_OK && a->seen[O_EXEC_BATCH] &&
        a->value2[O_EXEC_BATCH][0] == '\0')
        rc = cli_usage_err(VERB, "--exec-batch N CMD needs a command");
    if (rc == CLI_OK && a->seen[O_EXEC_TIMEOUT] && !a->seen[O_EXEC] &&
        !a->seen[O_EXEC_BATCH])
        rc = cli_usage_err(VERB, "--exec-timeout needs --exec or "
                                 "--exec-batch: it bounds a command");
    return rc;
}

/* --start, with @UNIX-MS turned into the last ID before that time (a
 * group starts after its ID), set on conf. */
static int set_start(emq_conf_t *conf, const char *start) {
    char start_id[48];
    if (start[0] == '@') {
        long long ms;
        int rc = cli_num(VERB, "--start @", start + 1, 0, INT64_MAX, &ms);
        if (rc != CLI_OK)
            return rc;
        if (ms == 0)
            snprintf(start_id, sizeof start_id, "0-0");
        else
            snprintf(start_id, sizeof start_id, "%lld-18446744073709551615",
                     ms - 1);
        start = start_id;
    }
    return cli_set(conf, "start", start);
}

/* Fills x from the options and sets the properties the verb derives
 * (count, block, claim count, stats interval, what may be out at once).
 * Returns CLI_OK or CLI_USAGE (said why). */
static int configure(consume_ctx *x, cli_args *a, emq_conf_t *conf) {
    long long *num = a->num;
    /* Read no more than --limit asks for: what a stop leaves unhandled
     * stays pending with this consumer name until its next run. */
    if (num[O_LIMIT] > 0 && num[O_COUNT] > num[O_LIMIT])
        num[O_COUNT] = num[O_LIMIT];
    /* A stop returns within one read's block time. */
    if (num[O_UNTIL_IDLE] > 0 && num[O_BLOCK] > num[O_UNTIL_IDLE])
        num[O_BLOCK] = num[O_UNTIL_IDLE] < 100 ? 100 : num[O_UNTIL_IDLE];
    x->exec = a->seen[O_EXEC]         ? a->value[O_EXEC]
              : a->seen[O_EXEC_BATCH] ? a->value2[O_EXEC_BATCH]
                                      : NULL;
    if (x->exec == NULL)
        num[O_CONCURRENCY] = 1; /* one writer: the lines keep their order */
    x->queue = a->pos[0];
    x->lines.format = a->seen[O_FORMAT] ? a->value[O_FORMAT] : NULL;
    x->exec_batch = (size_t)num[O_EXEC_BATCH];
    x->exec_timeout_ms = num[O_EXEC_TIMEOUT];
    x->no_ack = a->seen[O_NO_ACK] > 0;
    x->limit = num[O_LIMIT];
    /* A progress line when stderr is a terminal that the entries do not go
     * to (a pipe or file for stdout, or commands), unless -q. */
    x->progress = !cli_g.quiet && isatty(STDERR_FILENO) &&
                  (x->exec != NULL || !isatty(STDOUT_FILENO));
    x->stats_lines = a->seen[O_STATS_INTERVAL] > 0;
    long long every = x->stats_lines ? num[O_STATS_INTERVAL]
                      : x->progress  ? 1000 /* the lag for the progress */
                                     : 0;
    /* What may be out at once: a read ahead of what is printed, or of what
     * the workers run; --no-ack holds what it took until the end. Nothing
     * is read beyond --limit. */
    long long out_max = x->exec ? 2 * num[O_CONCURRENCY] * num[O_EXEC_BATCH]
                                : 2 * num[O_COUNT];
    if (x->no_ack)
        out_max = 1000000;
    if (x->limit > 0 && out_max > x->limit)
        out_max = x->limit;
    int rc = cli_set_props(conf, a, props);
    if (rc == CLI_OK)
        rc = set_start(conf, a->value[O_START]);
    if (rc == CLI_OK)
        rc = cli_set_num(conf, "count", num[O_COUNT]);
    if (rc == CLI_OK)
        rc = cli_set_num(conf, "block_ms", num[O_BLOCK]);
    if (rc == CLI_OK && x->limit > 0)
        rc = cli_set_num(conf, "claim.count", num[O_COUNT]);
    if (rc == CLI_OK && every > 0) {
        rc = cli_set_num(conf, "stats.interval_ms", every);
        emq_conf_set_stats(conf, stats_line, x);
    }
    if (rc == CLI_OK)
        rc = cli_set_num(conf, "max_in_flight",
                         out_max < 1000000 ? out_max : 1000000);
    /* --exec-timeout kills the command; handler.timeout_ms (unless set)
     * backs it with the library's bound, with room to kill and reap. */
    char bound[24] = "";
    if (rc == CLI_OK && x->exec_timeout_ms > 0 &&
        emq_conf_get(conf, "handler.timeout_ms", bound, sizeof bound, NULL) ==
            EMQ_OK &&
        strcmp(bound, "0") == 0)
        rc = cli_set_num(conf, "handler.timeout_ms",
                         x->exec_timeout_ms + EXEC_TIMEOUT_GRACE_MS);
    return rc;
}

/* Makes x->consumer once every usage check is done; a topic of this name
 * is found now (and the consumer made again for its partitions). */
static int open_consumer(consume_ctx *x, const cli_args *a, emq_conf_t *conf) {
    char parts_before[24] = "1", parts_after[24] = "1";
    emq_error err;
    int rc = CLI_OK;
    for (int round = 0; rc == CLI_OK && round < 2; round++) {
        if (round == 1 && strcmp(parts_before, parts_after) == 0)
            break;
        emq_consumer_destroy(x->consumer); /* NULL: a no-op */
        x->consumer = NULL;
        /* Validates everything before touching the network. */
        emq_status st = emq_consumer_new(conf, NULL, NULL, &x->consumer, &err);
        if (st != EMQ_OK)
            rc = cli_err(st == EMQ_EINVAL ? CLI_USAGE : CLI_FAIL, "%s",
                         err.message);
        if (rc == CLI_OK && round == 0) {
            emq_conf_get(conf, "partitions", parts_before, sizeof parts_before,
                         NULL);
            rc = cli_find_topic(a, conf);
            emq_conf_get(conf, "partitions", parts_after, sizeof parts_after,
                         NULL);
        }
    }
    if (rc == CLI_OK)
        rc = cli_lines_partitions(&x->lines, a, conf);
    return rc;
}

/* A property of conf that holds milliseconds (0 when unreadable). */
static long long conf_ms(const emq_conf_t *conf, const char *name) {
    char text[32];
    return emq_conf_get(conf, name, text, sizeof text, NULL) == EMQ_OK
               ? atoll(text)
               : 0;
}

/* Runs the consumer until a stop: the command threads, the watchdog and
 * the main thread's dispatch; then closes it. Returns its status. */
static emq_status run(consume_ctx *x, const cli_args *a, const emq_conf_t *conf,
                      emq_error *err) {
    cli_on_stop_signal(stop_all, x);
    watchdog w = {x, a->num[O_UNTIL_IDLE], 0, 0};
    w.first_read_ms = w.idle_ms + a->num[O_BLOCK] +
                      conf_ms(conf, "connect_timeout_ms") +
                      conf_ms(conf, "command_timeout_ms");
    pthread_t wt;
    int watching = (w.idle_ms > 0 || x->progress) &&
                   pthread_create(&wt, NULL, watch, &w) == 0;
    size_t conc = (size_t)a->num[O_CONCURRENCY];
    size_t workers = x->exec ? conc : 0, started = 0;
    pthread_t *threads = calloc(workers ? workers : 1, sizeof *threads);
    for (size_t i = 0; threads != NULL && i < workers; i++)
        if (pthread_create(&threads[i], NULL, worker_main, x) == 0)
            started++;
    emq_status st;
    if (threads == NULL || started < workers) {
        stop_all(x);
        st =
            local_error(err, EMQ_ENOMEM, "could not start the command threads");
    } else {
        st = dispatch(
            x, x->exec ? conc * x->exec_batch : (size_t)a->num[O_COUNT], err);
    }
    /* The commands running (and queued) finish and are settled; entries
     * read ahead go back to the server uncounted (emq_consumer_close). */
    stop_all(x);
    pthread_mutex_lock(&x->mu);
    x->quit = 1;
    pthread_cond_broadcast(&x->more);
    pthread_mutex_unlock(&x->mu);
    for (size_t i = 0; i < started; i++)
        pthread_join(threads[i], NULL);
    free(threads);
    if (watching) {
        atomic_store(&w.done, 1);
        pthread_join(wt, NULL);
    }
    if (x->progress)
        fputs("\r\033[K", stderr); /* the summary takes its place */
    emq_error close_err;
    emq_status closed =
        emq_consumer_close(x->consumer, x->no_ack ? 0 : 10000, &close_err);
    if (st == EMQ_OK && closed != EMQ_OK) {
        st = closed;
        *err = close_err;
    }
    cli_signals_default();
    return st;
}

/* The run's end: its failure, or the summary (and -v the statistics). */
static int report(consume_ctx *x, const emq_conf_t *conf, emq_status st,
                  const emq_error *err) {
    int rc = CLI_OK;
    if (st != EMQ_OK)
        rc = cli_runtime_err(conf, st, err, "consuming");
    else if (atomic_load(&x->write_failed))
        rc = cli_err(CLI_FAIL,
                     "cannot write to stdout: %s; the entry stays "
                     "pending for this consumer",
                     strerror(atomic_load(&x->write_failed)));
    emq_consumer_stats total;
    emq_consumer_stats_get(x->consumer, &total);
    if (rc == CLI_OK && atomic_load(&x->never_read))
        rc = cli_err(CLI_FAIL,
                     "no read of new entries was answered within %lld ms "
                     "(--until-idle, --block, connect_timeout_ms and "
                     "command_timeout_ms together), so whether entries wait "
                     "is unknown; consumed %llu entr%s (acknowledged %llu) "
                     "before that",
                     (long long)atomic_load(&x->never_read),
                     (unsigned long long)total.delivered,
                     total.delivered == 1 ? "y" : "ies",
                     (unsigned long long)total.acked);
    if (rc == CLI_OK && atomic_load(&x->settle_failed))
        cli_note("warning: an entry could not be settled: %s", x->settle_error);
    if (rc == CLI_OK)
        cli_note("consumed %llu entr%s (acknowledged %llu, retried %llu, "
                 "dead-lettered %llu, claimed %llu)",
                 (unsigned long long)total.delivered,
                 total.delivered == 1 ? "y" : "ies",
                 (unsigned long long)total.acked,
                 (unsigned long long)total.retried,
                 (unsigned long long)total.dead_lettered,
                 (unsigned long long)total.claimed);
    if (cli_g.verbose) {
        char buf[1024];
        emq_consumer_stats_json(x->consumer, buf, sizeof buf);
        fprintf(stderr, "%s\n", buf);
    }
    return rc;
}

int cmd_consume(int argc, char **argv) {
    cli_args a;
    int rc = cli_begin_check(VERB, argc, argv, &cli_verb_consume, SYNOPSIS,
                             check_usage, &a);
    if (rc != CLI_OK)
        return rc;
    static consume_ctx x; /* the work queue is large */
    memset(&x, 0, sizeof x);
    atomic_store(&x.lag, -1);
    atomic_store(&x.last_ms, emq_clock_ms());
    pthread_mutex_init(&x.mu, NULL);
    pthread_cond_init(&x.more, NULL);
    pthread_cond_init(&x.room, NULL);
    emq_conf_t *conf = cli_conf(a.pos[0]);
    rc = conf ? configure(&x, &a, conf) : CLI_USAGE;
    if (rc == CLI_OK)
        rc = open_consumer(&x, &a, conf);
    if (rc == CLI_OK) {
        emq_error err;
        emq_status st = run(&x, &a, conf, &err);
        rc = report(&x, conf, st, &err);
    }
    emq_consumer_destroy(x.consumer); /* NULL: a no-op */
    pthread_mutex_destroy(&x.mu);
    pthread_cond_destroy(&x.more);
    pthread_cond_destroy(&x.room);
    emq_conf_destroy(conf);
    free(a.pos);
    return rc;
}
