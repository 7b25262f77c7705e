/* SPDX-License-Identifier: BSD-3-Clause */
/* bench_scale.c: consume + acknowledge throughput of one stream on one
 * server against a 6-partition topic on a 3-master Redis Cluster.
 *
 * Starts a private redis-server (bench_common.h, with a loopback TCP port)
 * and three cluster-enabled redis-servers on free loopback ports (no
 * persistence, hz 100, their own mkdtemp folder), joined with
 * `redis-cli --cluster create`; all are stopped by pid at exit. Then, for
 * each number of consumers K in {1, 2, 4}:
 *
 *   stream: queue "scale1" on the single server, filled with N entries of
 *           one 100-byte field by an echomq producer (batches of 1000),
 *           consumed by an emq_pool of K consumers (count 100, block_ms
 *           100) whose handler counts the entry and answers EMQ_ACK.
 *   topic:  queue "scale" with partitions 6 on the cluster ("scale.0" ..
 *           "scale.5" fall 2 on each master), filled the same way (round
 *           robin), consumed by an emq_pool of K topic consumers, each
 *           running one consumer thread per partition (6 K threads).
 *
 * Every run uses a fresh group created at 0 by its consumers. A run is
 * timed from the pool's start to the handler call that counts entry N.
 * Client CPU is this process's getrusage delta; server CPU is the sum of
 * utime + stime of the server processes (from /proc/PID/stat) over the
 * same span. After each run the group must have nothing pending.
 *
 * All of this shares the machine's cores: on a 2-core machine the three
 * cluster nodes and the clients compete for the same 2 cores, so the
 * topic's figure shows the cost of partitioning, not the scaling a
 * cluster of separate machines would give (docs/SCALING.md).
 *
 * Usage: bench_scale [entries] [rounds]   (defaults: 300000, 2)
 */
#include "echomq.h"

#include "bench_conf.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define NODES 3
#define PARTS 6

static pid_t node_pid[NODES];
static int node_port[NODES];
static char cluster_dir[64];

static void stop_cluster(void) {
    for (int i = 0; i < NODES; i++)
        if (node_pid[i] > 0) {
            kill(node_pid[i], SIGTERM);
            waitpid(node_pid[i], NULL, 0);
            node_pid[i] = 0;
        }
    if (cluster_dir[0]) {
        char cmd[128];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", cluster_dir);
        if (system(cmd) != 0)
            fprintf(stderr, "%s: could not remove %s\n", bench_name,
                    cluster_dir);
        cluster_dir[0] = '\0';
    }
}

/* Starts three cluster nodes and creates the cluster. */
static void start_cluster(void) {
    snprintf(cluster_dir, sizeof cluster_dir, "/tmp/emq-bench-cl-XXXXXX");
    if (mkdtemp(cluster_dir) == NULL)
        die("mkdtemp", "failed");
    atexit(stop_cluster);
    for (int i = 0; i < NODES; i++) {
        node_port[i] = free_port();
        char port[16], bus[16], conf[32], log[32];
        snprintf(port, sizeof port, "%d", node_port[i]);
        snprintf(bus, sizeof bus, "%d", free_port());
        snprintf(conf, sizeof conf, "nodes-%d.conf", i);
        snprintf(log, sizeof log, "node-%d.log", i);
        pid_t pid = fork();
        if (pid < 0)
            die("fork", "failed");
        if (pid == 0) {
            execlp("redis-server", "redis-server", "--port", port, "--bind",
                   "127.0.0.1", "--cluster-enabled", "yes",
                   "--cluster-config-file", conf, "--cluster-port", bus,
                   "--save", "", "--appendonly", "no", "--dir", cluster_dir,
                   "--logfile", log, "--hz", "100", (char *)NULL);
            _exit(127);
        }
        node_pid[i] = pid;
    }
    for (int i = 0; i < NODES; i++) {
        int up = 0;
        for (int k = 0; k < 500 && !up; k++) {
            redisContext *c = redisConnect("127.0.0.1", node_port[i]);
            up = c && !c->err;
            if (c)
                redisFree(c);
            if (!up)
                usleep(10000);
        }
        if (!up)
            die("cluster node", "did not start within 5 s");
    }
    char cmd[512];
    snprintf(cmd, sizeof cmd,
             "redis-cli --cluster create 127.0.0.1:%d 127.0.0.1:%d "
             "127.0.0.1:%d --cluster-yes > %s/create.log 2>&1",
             node_port[0], node_port[1], node_port[2], cluster_dir);
    if (system(cmd) != 0)
        die("redis-cli --cluster create", "failed (see create.log)");
    for (int i = 0; i < NODES; i++) {
        int ok = 0;
        for (int k = 0; k < 400 && !ok; k++) {
            redisContext *c = redisConnect("127.0.0.1", node_port[i]);
            redisReply *r = c && !c->err ? redisCommand(c, "CLUSTER INFO")
                                         : NULL;
            ok = r && r->type == REDIS_REPLY_STRING &&
                 strstr(r->str, "cluster_state:ok") != NULL;
            if (r)
                freeReplyObject(r);
            if (c)
                redisFree(c);
            if (!ok)
                usleep(50000);
        }
        if (!ok)
            die("cluster", "not cluster_state:ok within 20 s");
    }
}

/* utime + stime of pid in clock ticks. */
static double proc_cpu_ticks(pid_t pid) {
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return 0;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    char *p = strrchr(buf, ')');
    unsigned long ut = 0, st = 0;
    if (p && sscanf(p + 2,
                    "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu "
                    "%lu",
                    &ut, &st) == 2)
        return (double)(ut + st);
    return 0;
}

static double servers_cpu_s(int cluster) {
    double ticks = 0;
    if (cluster)
        for (int i = 0; i < NODES; i++)
            ticks += proc_cpu_ticks(node_pid[i]);
    else
        ticks = proc_cpu_ticks(server_pid);
    return ticks / (double)sysconf(_SC_CLK_TCK);
}

static emq_conf_t *make_conf(int cluster, const char *queue) {
    emq_conf_t *conf = emq_conf_new();
    char url[64];
    snprintf(url, sizeof url, "redis://127.0.0.1:%d",
             cluster ? node_port[0] : tcp_port);
    bench_set(conf, "url", url);
    bench_set(conf, "queue", queue);
    if (cluster)
        bench_set(conf, "partitions", "6");
    return conf;
}

/* Fills the queue or topic with n entries. */
static void fill(int cluster, const char *queue, long n) {
    emq_conf_t *conf = make_conf(cluster, queue);
    emq_producer_t *p;
    emq_error err;
    if (emq_producer_new(conf, &p, &err) != EMQ_OK)
        die("producer", err.message);
    static char payload[101];
    memset(payload, 'x', 100);
    emq_field f = {"data", 4, payload, 100};
    emq_message msgs[1000];
    for (int i = 0; i < 1000; i++)
        msgs[i] = (emq_message){&f, 1, NULL};
    for (long done = 0; done < n; done += 1000) {
        size_t k = n - done < 1000 ? (size_t)(n - done) : 1000;
        if (emq_produce_batch(p, msgs, k, NULL, NULL, &err) != EMQ_OK)
            die("produce", err.message);
    }
    emq_producer_destroy(p);
    emq_conf_destroy(conf);
}

typedef struct run_ctx {
    atomic_long handled;
    long want;
    double done_at;
    emq_pool_t *pool;
} run_ctx;

static emq_verdict handle(void *opaque, const emq_entry *e, char *reason,
                          size_t reason_size) {
    (void)reason;
    (void)reason_size;
    run_ctx *x = opaque;
    volatile size_t touch = e->nfields ? e->fields[0].value_len : 0;
    (void)touch;
    if (atomic_fetch_add(&x->handled, 1) + 1 == x->want) {
        x->done_at = now_s();
        emq_pool_stop(x->pool);
    }
    return EMQ_ACK;
}

typedef struct result {
    double rate, client_cpu_us_per_msg, server_cpu_us_per_msg;
} result;

static result consume(int cluster, const char *queue, int k, long n,
                      int round) {
    emq_conf_t *conf = make_conf(cluster, queue);
    char group[32];
    snprintf(group, sizeof group, "g%d-%d", k, round);
    bench_set(conf, "group", group);
    bench_set(conf, "consumer", "c");
    bench_set(conf, "start", "head");
    bench_set(conf, "count", "100");
    bench_set(conf, "block_ms", "100");
    bench_set(conf, "log.level", "error");
    run_ctx x = {0};
    x.want = n;
    emq_error err;
    if (emq_pool_new(conf, k, handle, &x, &x.pool, &err) != EMQ_OK)
        die("pool", err.message);
    double cpu0 = cpu_us(), srv0 = servers_cpu_s(cluster), t0 = now_s();
    if (emq_pool_run(x.pool, &err) != EMQ_OK)
        die("consume", err.message);
    double secs = x.done_at - t0;
    double cpu = cpu_us() - cpu0, srv = servers_cpu_s(cluster) - srv0;
    if (atomic_load(&x.handled) < n)
        die("consume", "not every entry was handled");
    emq_pool_destroy(x.pool);
    /* Nothing may be left pending. */
    emq_admin_t *a;
    emq_queue_info *q;
    if (emq_admin_new(conf, &a, &err) != EMQ_OK ||
        emq_admin_describe(a, &q, &err) != EMQ_OK)
        die("describe", err.message);
    for (size_t g = 0; g < q->ngroups; g++)
        if (strcmp(q->groups[g].name, group) == 0 && q->groups[g].pending)
            die("check", "entries left pending");
    emq_queue_info_free(q);
    emq_admin_destroy(a);
    emq_conf_destroy(conf);
    result r = {(double)n / secs, cpu / (double)n, srv * 1e6 / (double)n};
    return r;
}

int main(int argc, char **argv) {
    bench_name = "bench_scale";
    long n = argc > 1 ? atol(argv[1]) : 300000;
    int rounds = argc > 2 ? atoi(argv[2]) : 2;
    if (n < 1000 || rounds < 1)
        die("usage", "bench_scale [entries >= 1000] [rounds >= 1]");
    start_server(1);
    start_cluster();
    fprintf(stderr,
            "filling %ld entries into one stream and into a "
            "6-partition topic...\n",
            n);
    fill(0, "scale1", n);
    fill(1, "scale", n);
    printf("consume+ack, %ld entries of 100 bytes, count 100, best of %d; "
           "%ld cores online\n",
           n, rounds, sysconf(_SC_NPROCESSORS_ONLN));
    printf("%-34s %10s %12s %12s\n", "setup", "msgs/s", "client us/msg",
           "server us/msg");
    const int ks[] = {1, 2, 4};
    for (size_t i = 0; i < sizeof ks / sizeof ks[0]; i++) {
        for (int cluster = 0; cluster <= 1; cluster++) {
            result best = {0, 0, 0};
            for (int r = 0; r < rounds; r++) {
                result one =
                    consume(cluster, cluster ? "scale" : "scale1", ks[i], n, r);
                fprintf(stderr, "  %s K=%d round %d: %.0f msgs/s\n",
                        cluster ? "topic" : "stream", ks[i], r, one.rate);
                if (one.rate > best.rate)
                    best = one;
            }
            char label[64];
            if (cluster)
                snprintf(label, sizeof label,
                         "topic 6 parts/3 masters, K=%d (%d thr)", ks[i],
                         6 * ks[i]);
            else
                snprintf(label, sizeof label, "one stream, one server, K=%d",
                         ks[i]);
            printf("%-34s %10.0f %12.2f %12.2f\n", label, best.rate,
                   best.client_cpu_us_per_msg, best.server_cpu_us_per_msg);
            fflush(stdout);
        }
    }
    return 0;
}
