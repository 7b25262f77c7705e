/* SPDX-License-Identifier: BSD-3-Clause */
/* bench_pull.c: the ways to consume, side by side in one run.
 *
 * Starts a private redis-server (unix socket, no persistence; stopped by
 * pid at exit), fills emq:{bench} with N entries of one 100-byte field
 * (bench_stream.h), then for R rounds runs each client below on a fresh
 * group at 0, in an order that rotates every round so drift and noise hit
 * all alike, and keeps the best time of each:
 *
 *   run       one consumer, emq_consumer_run, COUNT 100: the handler
 *             touches the fields, counts, answers EMQ_ACK;
 *   poll4     one consumer in pull mode (emq_consumer_poll, 100 at a
 *             time) handing each entry to 4 worker threads, which touch
 *             it, acknowledge it (emq_consumer_ack) and free it;
 *   prefetch  one consumer in pull mode, polling and acknowledging on one
 *             thread: the consumer's reading thread reads the next batch
 *             meanwhile (one read connection, plus the upkeep's);
 *   cli       `echomq consume bench --count 100 --limit N -q >/dev/null`
 *             (pipe mode), the whole process timed;
 *   hiredis1  the hiredis loop (COUNT 100, acks pipelined with the next
 *             read) on one thread;
 *   hiredis2  the same on two threads, two connections, two names.
 *
 * A run is timed from its start to entry N handled (the cli: to its exit).
 * After each run the group must have nothing pending. The table shows
 * msgs/s and the ratios that have targets (docs/BENCHMARKS.md): cli /
 * hiredis1 (>= 1.0), prefetch / hiredis2 (>= 0.9), poll4 / run (within
 * 10%).
 *
 * Usage: bench_pull [-t] [-o CLIENT] [entries] [rounds]   (defaults
 *        500000, 3; -t: every client over loopback TCP instead of the unix
 *        socket;
 *        -o runs one client only, for profiling:
 *        perf record -g bench_pull -o prefetch 500000 1)
 */
#include "bench_stream.h"

#include <fcntl.h>

typedef enum client {
    RUN,
    POLL4,
    PREFETCH,
    CLI,
    HIREDIS1,
    HIREDIS2,
    NCLIENTS
} client;
static const char *const client_names[NCLIENTS] = {
    "run", "poll4", "prefetch", "cli", "hiredis1", "hiredis2"};

static char url[200];

static emq_conf_t *bench_conf(const char *group) {
    emq_conf_t *conf = emq_conf_new();
    if (conf == NULL)
        die("emq_conf_new", "out of memory");
    conf_set(conf, "url", url);
    conf_set(conf, "queue", "bench");
    conf_set(conf, "group", group);
    conf_set(conf, "consumer", "e");
    conf_set(conf, "start", "head");
    conf_set(conf, "count", "100");
    conf_set(conf, "block_ms", "100");
    return conf;
}

static size_t touch(const emq_entry *e) {
    size_t bytes = 0;
    for (size_t i = 0; i < e->nfields; i++)
        bytes += e->fields[i].value_len;
    return bytes;
}

/* ---- run ----------------------------------------------------------------- */

typedef struct run_ctx {
    run_state s;
    emq_consumer_t *c;
} run_ctx;

static emq_verdict run_handler(void *opaque, const emq_entry *e, char *reason,
                               size_t reason_size) {
    (void)reason;
    (void)reason_size;
    run_ctx *x = opaque;
    atomic_fetch_add_explicit(&x->s.sink, touch(e), memory_order_relaxed);
    if (atomic_fetch_add(&x->s.handled, 1) + 1 == x->s.total) {
        mark_done(&x->s);
        emq_consumer_stop(x->c);
    }
    return EMQ_ACK;
}

static double run_run(long total, const char *group) {
    emq_conf_t *conf = bench_conf(group);
    static run_ctx x;
    memset(&x, 0, sizeof x);
    x.s.total = total;
    emq_error err;
    double t0 = now_s();
    if (emq_consumer_new(conf, run_handler, &x, &x.c, &err) != EMQ_OK ||
        emq_consumer_run(x.c, &err) != EMQ_OK)
        die("run", err.message);
    emq_consumer_destroy(x.c);
    emq_conf_destroy(conf);
    return x.s.done_s - t0;
}

/* ---- pull: poll4 and prefetch -------------------------------------------- */

#define QMAX 8192

typedef struct pull_ctx {
    run_state s;
    emq_consumer_t *c;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    emq_entry *q[QMAX];
    size_t head, n;
    int quit;
} pull_ctx;

static void settle_one(pull_ctx *x, emq_entry *e) {
    emq_error err;
    atomic_fetch_add_explicit(&x->s.sink, touch(e), memory_order_relaxed);
    if (emq_consumer_ack(x->c, e, &err) != EMQ_OK)
        die("emq_consumer_ack", err.message);
    emq_entry_free(e);
    if (atomic_fetch_add(&x->s.handled, 1) + 1 == x->s.total)
        mark_done(&x->s);
}

static void *pull_worker(void *arg) {
    pull_ctx *x = arg;
    for (;;) {
        pthread_mutex_lock(&x->mu);
        while (x->n == 0 && !x->quit)
            pthread_cond_wait(&x->cv, &x->mu);
        if (x->n == 0) {
            pthread_mutex_unlock(&x->mu);
            return NULL;
        }
        emq_entry *e = x->q[x->head];
        x->head = (x->head + 1) % QMAX;
        x->n--;
        pthread_mutex_unlock(&x->mu);
        settle_one(x, e);
    }
}

static double run_pull(long total, const char *group, int workers) {
    emq_conf_t *conf = bench_conf(group);
    static pull_ctx x;
    memset(&x, 0, sizeof x);
    pthread_mutex_init(&x.mu, NULL);
    pthread_cond_init(&x.cv, NULL);
    x.s.total = total;
    emq_error err;
    pthread_t th[8];
    double t0 = now_s();
    if (emq_consumer_new(conf, NULL, NULL, &x.c, &err) != EMQ_OK)
        die("emq_consumer_new", err.message);
    for (int i = 0; i < workers; i++)
        pthread_create(&th[i], NULL, pull_worker, &x);
    emq_entry *got[100];
    while (atomic_load(&x.s.handled) < total) {
        size_t n = 0;
        if (emq_consumer_poll(x.c, got, 100, 100, &n, &err) != EMQ_OK)
            die("emq_consumer_poll", err.message);
        if (workers == 0) {
            for (size_t i = 0; i < n; i++)
                settle_one(&x, got[i]);
            continue;
        }
        pthread_mutex_lock(&x.mu);
        for (size_t i = 0; i < n; i++)
            x.q[(x.head + x.n++) % QMAX] = got[i];
        pthread_cond_broadcast(&x.cv);
        pthread_mutex_unlock(&x.mu);
    }
    double took = x.s.done_s - t0;
    pthread_mutex_lock(&x.mu);
    x.quit = 1;
    pthread_cond_broadcast(&x.cv);
    pthread_mutex_unlock(&x.mu);
    for (int i = 0; i < workers; i++)
        pthread_join(th[i], NULL);
    if (emq_consumer_close(x.c, 10000, &err) != EMQ_OK)
        die("emq_consumer_close", err.message);
    emq_consumer_destroy(x.c);
    emq_conf_destroy(conf);
    return took;
}

/* ---- cli ----------------------------------------------------------------- */

static double run_cli(long total, const char *group) {
    static char exe[4096];
    ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 16);
    if (len <= 0)
        die("readlink", "/proc/self/exe");
    exe[len] = '\0';
    strcpy(strrchr(exe, '/') + 1, "echomq");
    char limit[32];
    snprintf(limit, sizeof limit, "%ld", total);
    double t0 = now_s();
    pid_t pid = fork();
    if (pid == 0) {
        int null = open("/dev/null", O_WRONLY);
        dup2(null, 1);
        execl(exe, "echomq", "-u", url, "consume", "bench", "-g", group, "-c",
              "e", "--start", "head", "--count", "100", "--block", "100",
              "--limit", limit, "-q", (char *)NULL);
        _exit(127);
    }
    int status;
    waitpid(pid, &status, 0);
    double took = now_s() - t0;
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        die("echomq consume",
            "did not exit 0 (is it built beside bench_pull?)");
    return took;
}

/* ---- the table ---------------------------------------------------------- */

static double run_one(redisContext *admin, client k, long total, int round) {
    char group[32];
    snprintf(group, sizeof group, "g-%s-%d", client_names[k], round);
    double took;
    switch (k) {
    case RUN:
        took = run_run(total, group);
        break;
    case POLL4:
        took = run_pull(total, group, 4);
        break;
    case PREFETCH:
        took = run_pull(total, group, 0);
        break;
    case CLI:
        took = run_cli(total, group);
        break;
    case HIREDIS1:
    case HIREDIS2:
    default: {
        result r =
            run_hiredis(admin, total, 100, k == HIREDIS1 ? 1 : 2, 100, group);
        return r.wall_s; /* run_hiredis checks and drops its group */
    }
    }
    check_and_drop_group(admin, group, client_names[k]);
    return took;
}

int main(int argc, char **argv) {
    bench_name = "bench_pull";
    int only = -1;
    if (argc > 1 && strcmp(argv[1], "-t") == 0) {
        bench_over_tcp = 1;
        argc--;
        argv++;
    }
    if (argc > 2 && strcmp(argv[1], "-o") == 0) {
        for (int k = 0; k < NCLIENTS; k++)
            if (strcmp(argv[2], client_names[k]) == 0)
                only = k;
        if (only < 0) {
            fprintf(stderr, "bench_pull: no client '%s'\n", argv[2]);
            return 2;
        }
        argc -= 2;
        argv += 2;
    }
    long total = argc > 1 ? atol(argv[1]) : 500000;
    int rounds = argc > 2 ? atoi(argv[2]) : 3;
    if (argc > 3 || total < 1 || rounds < 1) {
        fprintf(stderr,
                "usage: bench_pull [-t] [-o CLIENT] [entries] [rounds]\n");
        return 2;
    }
    for (int i = 0; i < PAYLOAD_LEN; i++)
        payload[i] = (char)('a' + i % 26);
    start_server(bench_over_tcp);
    if (bench_over_tcp)
        snprintf(url, sizeof url, "redis://127.0.0.1:%d", tcp_port);
    else
        snprintf(url, sizeof url, "unix://%s", sock_path);
    redisContext *admin = connect_server();
    fill(admin, total);
    double best[NCLIENTS] = {0};
    for (int r = 0; r < rounds; r++) {
        fprintf(stderr, "  round %d:", r + 1);
        for (int i = 0; i < NCLIENTS; i++) {
            client k = (client)((i + r) % NCLIENTS);
            if (only >= 0 && (int)k != only)
                continue;
            double t = run_one(admin, k, total, r);
            fprintf(stderr, " %s %.0f/s", client_names[k], total / t);
            if (best[k] == 0 || t < best[k])
                best[k] = t;
        }
        fprintf(stderr, "\n");
    }
    printf("\n%ld entries of %d bytes, COUNT 100, best of %d rounds, %s\n\n",
           total, PAYLOAD_LEN, rounds,
           bench_over_tcp ? "loopback TCP" : "unix socket");
    printf("| client | msgs/s |\n| --- | ---: |\n");
    for (int k = 0; k < NCLIENTS; k++)
        if (best[k] > 0)
            printf("| %s | %.0f |\n", client_names[k], total / best[k]);
    if (only >= 0) {
        redisFree(admin);
        return 0;
    }
    double cli_ratio = best[HIREDIS1] / best[CLI];
    double pre_ratio = best[HIREDIS2] / best[PREFETCH];
    double poll_ratio = best[RUN] / best[POLL4];
    printf("\n| target | ratio | met |\n| --- | ---: | --- |\n");
    printf("| cli / hiredis1 >= 1.0 | %.2f | %s |\n", cli_ratio,
           cli_ratio >= 1.0 ? "yes" : "NO");
    printf("| prefetch / hiredis2 >= 0.9 | %.2f | %s |\n", pre_ratio,
           pre_ratio >= 0.9 ? "yes" : "NO");
    printf("| poll4 / run within 10%% | %.2f | %s |\n", poll_ratio,
           poll_ratio >= 0.9 && poll_ratio <= 1.1 ? "yes" : "NO");
    redisFree(admin);
    return 0;
}
