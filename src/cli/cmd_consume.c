/* cmd_consume.c: `echomq consume`, a consumer of a group on the command line.
 *
 * Without --exec, each entry becomes one JSON line on stdout
 * (emq_entry_json) and is acknowledged once the line is written and
 * flushed. With --exec CMD, each entry runs `/bin/sh -c CMD` with the JSON
 * line on its stdin and EMQ_QUEUE, EMQ_GROUP, EMQ_CONSUMER, EMQ_ID and
 * EMQ_DELIVERIES in its environment; exit 0 acknowledges, 75 (EX_TEMPFAIL)
 * asks for a retry, anything else is a failure whose reason ("exit N",
 * "signal N") goes with the entry to the dead letters once it reaches
 * --max-deliveries. --concurrency N runs a pool of N consumers named
 * C-1..C-N. --limit and --until-idle stop the consumer from the handler or
 * from a watchdog thread with emq_consumer_stop; SIGINT/SIGTERM stop it
 * gracefully (exit 0), a second signal ends the process at once.
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

/* (lease.ttl_ms default 30000 - 1000) / 3: the library's bound. */
#define BLOCK_MAX 9666

static const cli_opt opts[] = {
    {"group", 'g', 1, O_GROUP},
    {"consumer", 'c', 1, O_CONSUMER},
    {"start", 's', 1, O_START},
    {"count", 0, 1, O_COUNT},
    {"block", 0, 1, O_BLOCK},
    {"claim-idle", 0, 1, O_CLAIM_IDLE},
    {"claim-interval", 0, 1, O_CLAIM_INTERVAL},
    {"max-deliveries", 0, 1, O_MAX_DELIVERIES},
    {"retry-backoff", 0, 1, O_RETRY_BACKOFF},
    {"retry-backoff-max", 0, 1, O_RETRY_BACKOFF_MAX},
    {"limit", 0, 1, O_LIMIT},
    {"until-idle", 0, 1, O_UNTIL_IDLE},
    {"exec", 'e', 1, O_EXEC},
    {"concurrency", 0, 1, O_CONCURRENCY},
    {"partitions", 0, 1, O_PARTITIONS},
    {NULL, 0, 0, 0},
};

static void help(void) {
    printf(
        "usage: echomq consume QUEUE --group G --consumer C --start new|head|ID\n"
        "                      [options] [--exec CMD]\n"
        "\n"
        "Joins consumer group G of QUEUE (created at --start if it does not\n"
        "exist; an existing group keeps its position) under the stable name C,\n"
        "takes back C's own pending entries first, then reads new ones.\n"
        "\n"
        "  -g, --group G           consumer group (required)\n"
        "  -c, --consumer C        stable consumer name (required; never random)\n"
        "  -s, --start new|head|ID where a new group starts (required): new =\n"
        "                          only entries added from now on, head = replay\n"
        "                          the stream, or an entry ID\n"
        "  --count N               entries per read (default 100)\n"
        "  --block MS              how long a read waits (default 2000, at most\n"
        "                          9666; shorter when a claim beat is due)\n"
        "  --claim-idle MS         take over entries idle this long at another\n"
        "                          (or a dead) consumer (default 60000)\n"
        "  --claim-interval MS     time between claim beats (default 5000)\n"
        "  --max-deliveries N      deliveries before the dead letters (default 5)\n"
        "  --retry-backoff MS      a failed entry (exit 75) comes back to this\n"
        "                          consumer after MS, doubling per delivery\n"
        "                          (default 1000; 0: at once)\n"
        "  --retry-backoff-max MS  longest retry delay (default 60000)\n"
        "  --limit N               stop after N entries handled\n"
        "  --until-idle MS         stop once nothing arrived for MS and nothing\n"
        "                          is in hand (a retry waiting counts)\n"
        "  -e, --exec CMD          run /bin/sh -c CMD per entry: the JSON line on\n"
        "                          stdin; EMQ_QUEUE, EMQ_GROUP, EMQ_CONSUMER,\n"
        "                          EMQ_ID, EMQ_DELIVERIES in the environment.\n"
        "                          exit 0: acknowledge; 75: retry later; other:\n"
        "                          failure (reason \"exit N\" or \"signal N\"),\n"
        "                          dead-lettered at --max-deliveries\n"
        "  --concurrency N         N handlers at once: consumers C-1 .. C-N\n"
        "  --partitions P          QUEUE is a topic of P partitions: read all of\n"
        "                          them, one connection and thread each (entries\n"
        "                          of one partition stay in order)\n"
        "\n"
        "Without --exec each entry is printed as one JSON line and acknowledged\n"
        "once the line is flushed:\n"
        "  {\"id\":\"1700000000000-0\",\"deliveries\":1,\"fields\":{\"task\":\"x\"}}\n"
        "Values that are not UTF-8 are {\"base64\":\"...\"}. SIGINT or SIGTERM\n"
        "stops gracefully (exit 0); a second one exits at once.\n"
        "\n"
        "Examples:\n"
        "  echomq consume jobs -g workers -c w1 --start head --until-idle 1000\n"
        "  echomq consume jobs -g workers -c w1 --start new --exec './handle.sh'\n");
}

typedef struct consume_ctx {
    const char *queue, *group;
    const char *exec;
    long long limit;           /* 0: none */
    atomic_llong handled;      /* entries handed to the handler */
    atomic_llong last_ms;      /* last activity, for --until-idle */
    atomic_int busy;           /* handlers running now */
    atomic_int write_failed;
    pthread_mutex_t out_lock;  /* one JSON line at a time on stdout */
    emq_consumer_t *consumer;  /* or pool */
    emq_pool_t *pool;
} consume_ctx;

static void stop_all(void *opaque) {
    consume_ctx *x = opaque;
    if (x->pool)
        emq_pool_stop(x->pool);
    else if (x->consumer)
        emq_consumer_stop(x->consumer);
}

/* The entry's JSON line, malloc'd (NULL when out of memory). */
static char *entry_line(const emq_entry *e, size_t *len) {
    char small[1];
    size_t need = emq_entry_json(e, small, sizeof small);
    char *buf = malloc(need + 2);
    if (buf == NULL)
        return NULL;
    emq_entry_json(e, buf, need + 1);
    buf[need] = '\n';
    buf[need + 1] = '\0';
    *len = need + 1;
    return buf;
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

/* Runs the --exec command for one entry; returns its wait status, or -1
 * when it could not be started (reason filled). */
static int run_exec(consume_ctx *x, const emq_entry *e, const char *line,
                    size_t len, char *reason, size_t reason_size) {
    char v_queue[300], v_group[300], v_consumer[300], v_id[80], v_del[64];
    snprintf(v_queue, sizeof v_queue, "EMQ_QUEUE=%s", x->queue);
    snprintf(v_group, sizeof v_group, "EMQ_GROUP=%s", e->group);
    snprintf(v_consumer, sizeof v_consumer, "EMQ_CONSUMER=%s", e->consumer);
    snprintf(v_id, sizeof v_id, "EMQ_ID=%s", e->id);
    snprintf(v_del, sizeof v_del, "EMQ_DELIVERIES=%llu",
             (unsigned long long)e->deliveries);
    size_t n = 0;
    while (environ[n])
        n++;
    char **envp = calloc(n + 6, sizeof *envp);
    if (envp == NULL) {
        snprintf(reason, reason_size, "out of memory starting the command");
        return -1;
    }
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (strncmp(environ[i], "EMQ_", 4) != 0)
            envp[k++] = environ[i];
    envp[k++] = v_queue;
    envp[k++] = v_group;
    envp[k++] = v_consumer;
    envp[k++] = v_id;
    envp[k++] = v_del;
    /* With --concurrency, handlers start commands from several threads.
     * A command must not inherit another command's stdin pipe: its write
     * end held open by a sibling keeps `cat` from ever seeing EOF (two
     * such siblings wait for each other forever). So the pipe is made
     * close-on-exec, and pipe + fcntl + fork run under one lock so that
     * no other handler forks between the pipe and its flag. */
    static pthread_mutex_t spawn_lock = PTHREAD_MUTEX_INITIALIZER;
    int fds[2];
    pthread_mutex_lock(&spawn_lock);
    if (pipe(fds) != 0) {
        pthread_mutex_unlock(&spawn_lock);
        free(envp);
        snprintf(reason, reason_size, "pipe failed: %s", strerror(errno));
        return -1;
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
        snprintf(reason, reason_size, "fork failed: %s", strerror(errno));
        return -1;
    }
    if (pid == 0) {
        /* Child: stdin from the pipe, default signal dispositions. */
        signal(SIGINT, SIG_DFL);
        signal(SIGTERM, SIG_DFL);
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
    free(envp);
    close(fds[0]);
    (void)write_all(fds[1], line, len); /* a command may not read stdin */
    close(fds[1]);
    int status;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR) {
            snprintf(reason, reason_size, "waitpid failed: %s",
                     strerror(errno));
            return -1;
        }
    return status;
}

static emq_verdict handle(void *opaque, const emq_entry *e, char *reason,
                          size_t reason_size) {
    consume_ctx *x = opaque;
    atomic_fetch_add(&x->busy, 1);
    atomic_store(&x->last_ms, cli_now_ms());
    long long nth = atomic_fetch_add(&x->handled, 1) + 1;
    emq_verdict verdict = EMQ_ACK;
    size_t len = 0;
    char *line = entry_line(e, &len);
    if (line == NULL) {
        snprintf(reason, reason_size, "out of memory in echomq consume");
        verdict = EMQ_RETRY;
    } else if (x->exec == NULL) {
        pthread_mutex_lock(&x->out_lock);
        int bad = fwrite(line, 1, len, stdout) != len || fflush(stdout) != 0;
        pthread_mutex_unlock(&x->out_lock);
        if (bad) {
            /* Not shown to anyone: leave it pending and stop. */
            atomic_store(&x->write_failed, errno ? errno : EIO);
            snprintf(reason, reason_size, "echomq consume could not write "
                                          "to its stdout");
            verdict = EMQ_RETRY;
            stop_all(x);
        }
    } else {
        int status = run_exec(x, e, line, len, reason, reason_size);
        if (status == -1)
            verdict = EMQ_RETRY;
        else if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
            verdict = EMQ_ACK;
        else if (WIFEXITED(status) && WEXITSTATUS(status) == 75) {
            snprintf(reason, reason_size, "exit 75 (retry)");
            verdict = EMQ_RETRY;
        } else if (WIFEXITED(status)) {
            snprintf(reason, reason_size, "exit %d", WEXITSTATUS(status));
            verdict = EMQ_RETRY;
        } else {
            snprintf(reason, reason_size, "signal %d",
                     WIFSIGNALED(status) ? WTERMSIG(status) : 0);
            verdict = EMQ_RETRY;
        }
    }
    free(line);
    if (x->limit > 0 && nth >= x->limit)
        stop_all(x);
    atomic_store(&x->last_ms, cli_now_ms());
    atomic_fetch_sub(&x->busy, 1);
    return verdict;
}

typedef struct watchdog {
    consume_ctx *x;
    long long idle_ms;
    atomic_int done;
} watchdog;

/* --until-idle: stops the consumer once nothing arrived for idle_ms. */
/* Entries the consumers hold and have not settled (a retry waiting out
 * its delay counts): --until-idle does not stop while there are any. */
static uint64_t in_hand(const consume_ctx *x) {
    uint64_t n = 0;
    emq_consumer_stats st;
    if (x->consumer) {
        emq_consumer_stats_get(x->consumer, &st);
        return st.in_flight;
    }
    emq_consumer_t *c;
    for (int i = 0; (c = emq_pool_consumer(x->pool, i)) != NULL; i++) {
        emq_consumer_stats_get(c, &st);
        n += st.in_flight;
    }
    return n;
}

static void *watch(void *opaque) {
    watchdog *w = opaque;
    while (!atomic_load(&w->done)) {
        usleep(20000);
        if (in_hand(w->x) > 0) {
            atomic_store(&w->x->last_ms, cli_now_ms());
            continue;
        }
        if (atomic_load(&w->x->busy) == 0 &&
            cli_now_ms() - atomic_load(&w->x->last_ms) >= w->idle_ms) {
            stop_all(w->x);
            break;
        }
    }
    return NULL;
}

int cmd_consume(int argc, char **argv) {
    cli_args a;
    int rc = cli_begin(VERB, argc, argv, opts, help, 0, &a);
    if (rc != CLI_OK)
        return rc == CLI_DONE ? CLI_OK : rc;
    long long count = 100, block = 2000, claim_idle = -1, claim_interval = -1,
              maxdel = -1, limit = 0, until_idle = 0, conc = 1,
              retry_backoff = -1, retry_backoff_max = -1;
    if (a.npos < 1)
        rc = cli_usage_err(VERB, "QUEUE is missing: echomq consume QUEUE "
                                 "--group G --consumer C --start new|head");
    else if (a.npos > 1)
        rc = cli_usage_err(VERB, "unexpected argument '%s'", a.pos[1]);
    if (rc == CLI_OK)
        rc = cli_require(VERB, &a, O_GROUP, "--group",
                         "the consumer group to join");
    if (rc == CLI_OK)
        rc = cli_require(VERB, &a, O_CONSUMER, "--consumer",
                         "a stable name for this consumer (the same after a "
                         "restart, so it gets its pending entries back)");
    if (rc == CLI_OK)
        rc = cli_require(VERB, &a, O_START, "--start",
                         "new (only new entries) or head (replay the "
                         "stream), or an entry ID");
    if (rc == CLI_OK && a.seen[O_COUNT])
        rc = cli_num(VERB, "--count", a.value[O_COUNT], 1, 100000, &count);
    if (rc == CLI_OK && a.seen[O_BLOCK])
        rc = cli_num(VERB, "--block", a.value[O_BLOCK], 1, 3600000, &block);
    /* The consumer name's lease (30 s) is renewed between reads, so a read
     * may wait at most a third of it, less a second. */
    if (rc == CLI_OK && block > BLOCK_MAX)
        rc = cli_usage_err(VERB,
                           "--block %lld is too long: at most %d ms (the "
                           "consumer's 30 s lease is renewed between reads)",
                           block, BLOCK_MAX);
    if (rc == CLI_OK && a.seen[O_CLAIM_IDLE])
        rc = cli_num(VERB, "--claim-idle", a.value[O_CLAIM_IDLE], 1,
                     INT32_MAX, &claim_idle);
    if (rc == CLI_OK && a.seen[O_CLAIM_INTERVAL])
        rc = cli_num(VERB, "--claim-interval", a.value[O_CLAIM_INTERVAL], 1,
                     INT32_MAX, &claim_interval);
    if (rc == CLI_OK && a.seen[O_MAX_DELIVERIES])
        rc = cli_num(VERB, "--max-deliveries", a.value[O_MAX_DELIVERIES], 1,
                     1000000, &maxdel);
    if (rc == CLI_OK && a.seen[O_RETRY_BACKOFF])
        rc = cli_num(VERB, "--retry-backoff", a.value[O_RETRY_BACKOFF], 0,
                     INT32_MAX, &retry_backoff);
    if (rc == CLI_OK && a.seen[O_RETRY_BACKOFF_MAX])
        rc = cli_num(VERB, "--retry-backoff-max", a.value[O_RETRY_BACKOFF_MAX],
                     0, INT32_MAX, &retry_backoff_max);
    if (rc == CLI_OK && a.seen[O_LIMIT])
        rc = cli_num(VERB, "--limit", a.value[O_LIMIT], 1, INT64_MAX, &limit);
    if (rc == CLI_OK && a.seen[O_UNTIL_IDLE])
        rc = cli_num(VERB, "--until-idle", a.value[O_UNTIL_IDLE], 1,
                     INT32_MAX, &until_idle);
    if (rc == CLI_OK && a.seen[O_CONCURRENCY])
        rc = cli_num(VERB, "--concurrency", a.value[O_CONCURRENCY], 1, 1024,
                     &conc);
    if (rc == CLI_OK && a.seen[O_EXEC] && a.value[O_EXEC][0] == '\0')
        rc = cli_usage_err(VERB, "--exec needs a command");
    if (rc != CLI_OK) {
        free(a.pos);
        return rc;
    }
    /* Read no more than --limit asks for: what a stop leaves unhandled
     * stays pending with this consumer name until its next run. */
    if (limit > 0 && count > limit)
        count = limit;
    /* A stop returns within one read's block time. */
    if (until_idle > 0 && block > until_idle)
        block = until_idle < 100 ? 100 : until_idle;

    emq_conf_t *conf = cli_conf(a.pos[0]);
    char num[32];
    rc = conf ? CLI_OK : CLI_USAGE;
#define SETNUM(name, v)                                                        \
    do {                                                                       \
        if (rc == CLI_OK) {                                                    \
            snprintf(num, sizeof num, "%lld", (long long)(v));                 \
            rc = cli_set(conf, (name), num);                                   \
        }                                                                      \
    } while (0)
    if (rc == CLI_OK)
        rc = cli_partitions(&a, conf);
    if (rc == CLI_OK)
        rc = cli_set(conf, "group", a.value[O_GROUP]);
    if (rc == CLI_OK)
        rc = cli_set(conf, "consumer", a.value[O_CONSUMER]);
    if (rc == CLI_OK)
        rc = cli_set(conf, "start", a.value[O_START]);
    SETNUM("count", count);
    SETNUM("block_ms", block);

    if (claim_idle > 0)
        SETNUM("claim.min_idle_ms", claim_idle);
    if (claim_interval > 0)
        SETNUM("claim.interval_ms", claim_interval);
    if (limit > 0)
        SETNUM("claim.count", count);
    if (maxdel > 0)
        SETNUM("max_deliveries", maxdel);
    if (retry_backoff_max >= 0)
        SETNUM("retry.backoff_max_ms", retry_backoff_max);
    if (retry_backoff >= 0)
        SETNUM("retry.backoff_ms", retry_backoff);
#undef SETNUM

    consume_ctx x;
    memset(&x, 0, sizeof x);
    x.queue = a.pos[0];
    x.group = a.value[O_GROUP];
    x.exec = a.seen[O_EXEC] ? a.value[O_EXEC] : NULL;
    x.limit = limit;
    atomic_store(&x.last_ms, cli_now_ms());
    pthread_mutex_init(&x.out_lock, NULL);
    emq_error err;
    emq_status st = EMQ_OK;
    if (rc == CLI_OK) {
        /* Validates everything before touching the network. */
        st = conc > 1 ? emq_pool_new(conf, (int)conc, handle, &x, &x.pool,
                                     &err)
                      : emq_consumer_new(conf, handle, &x, &x.consumer, &err);
        if (st != EMQ_OK)
            rc = cli_err(st == EMQ_EINVAL ? CLI_USAGE : CLI_FAIL, "%s",
                         err.message);
    }
    if (rc != CLI_OK) {
        emq_conf_destroy(conf);
        free(a.pos);
        return rc;
    }

    cli_on_stop_signal(stop_all, &x);
    watchdog w = {&x, until_idle, 0};
    pthread_t wt;
    int watching = until_idle > 0 && pthread_create(&wt, NULL, watch, &w) == 0;
    st = x.pool ? emq_pool_run(x.pool, &err) : emq_consumer_run(x.consumer, &err);
    if (watching) {
        atomic_store(&w.done, 1);
        pthread_join(wt, NULL);
    }
    cli_signals_default();

    if (st != EMQ_OK)
        rc = cli_runtime_err(conf, st, &err, "consuming");
    else if (atomic_load(&x.write_failed))
        rc = cli_err(CLI_FAIL, "cannot write to stdout: %s; the entry stays "
                               "pending for this consumer",
                     strerror(atomic_load(&x.write_failed)));
    emq_consumer_stats total;
    memset(&total, 0, sizeof total);
    int members = x.pool ? (int)conc : 1;
    for (int i = 0; i < members; i++) {
        emq_consumer_stats s;
        emq_consumer_stats_get(x.pool ? emq_pool_consumer(x.pool, i)
                                      : x.consumer,
                               &s);
        total.delivered += s.delivered;
        total.acked += s.acked;
        total.retried += s.retried;
        total.dead_lettered += s.dead_lettered;
        total.claimed += s.claimed;
    }
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
        for (int i = 0; i < members; i++) {
            char buf[1024];
            emq_consumer_stats_json(x.pool ? emq_pool_consumer(x.pool, i)
                                           : x.consumer,
                                    buf, sizeof buf);
            fprintf(stderr, "%s\n", buf);
        }
    }
    emq_pool_destroy(x.pool);
    emq_consumer_destroy(x.consumer);
    pthread_mutex_destroy(&x.out_lock);
    emq_conf_destroy(conf);
    free(a.pos);
    return rc;
}
