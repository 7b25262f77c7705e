/* SPDX-License-Identifier: BSD-3-Clause */
/* bench_xadd.c: pipelined XADD round trips, echomq's conn against a hiredis
 * pipelined loop and redis-benchmark, side by side in one run.
 *
 * Starts a private redis-server (from PATH, no persistence) listening on a
 * unix socket and a loopback TCP port, then, for each transport, runs
 * rounds that alternate between: echomq (emq_conn_append x depth, then
 * emq_conn_get_reply x depth), hiredis (redisAppendCommandArgv x depth,
 * then redisGetReply x depth) and `redis-benchmark -P depth` with the same
 * command. Every XADD carries one field "data" with a 100-byte value. The
 * stream is deleted between rounds so memory stays flat. The best round of
 * each client is reported; the machine is noisy, so compare within a run.
 *
 * Usage: bench_xadd [commands-per-round] [rounds] [depth]
 */
#include "echomq.h"

#include "bench_common.h"

static char payload[101];
static const char *xadd_argv[] = {"XADD", "benchq", "*", "data", payload};
static const size_t xadd_len[] = {4, 6, 1, 4, 100};

/* ---- the three clients ------------------------------------------------ */

static void delete_stream(redisContext *admin) {
    redisReply *r = redisCommand(admin, "DEL benchq");
    if (r == NULL) {
        fprintf(stderr, "DEL failed: %s\n", admin->errstr);
        exit(1);
    }
    freeReplyObject(r);
}

static double run_echomq(const char *url, int total, int depth) {
    emq_conf_t *conf = emq_conf_new();
    emq_error err;
    emq_conn_t *conn;
    if (emq_conf_set(conf, "url", url, &err) != EMQ_OK ||
        emq_conn_new(conf, &conn, &err) != EMQ_OK) {
        fprintf(stderr, "echomq: %s\n", err.message);
        exit(1);
    }
    emq_conf_destroy(conf);
    double start = now_s();
    for (int done = 0; done < total; done += depth) {
        int n = total - done < depth ? total - done : depth;
        for (int i = 0; i < n; i++)
            if (emq_conn_append(conn, 5, xadd_argv, xadd_len, &err) != EMQ_OK)
                goto fail;
        for (int i = 0; i < n; i++) {
            emq_reply *reply;
            if (emq_conn_get_reply(conn, &reply, &err) != EMQ_OK)
                goto fail;
            if (emq_reply_kind(reply) != EMQ_REPLY_STRING) {
                fprintf(stderr, "echomq: unexpected reply\n");
                exit(1);
            }
            emq_reply_free(reply);
        }
    }
    double t = now_s() - start;
    emq_conn_destroy(conn);
    return t;
fail:
    fprintf(stderr, "echomq: %s\n", err.message);
    exit(1);
}

static double run_hiredis(redisContext *c, int total, int depth) {
    double start = now_s();
    for (int done = 0; done < total; done += depth) {
        int n = total - done < depth ? total - done : depth;
        for (int i = 0; i < n; i++)
            if (redisAppendCommandArgv(c, 5, xadd_argv, xadd_len) != REDIS_OK)
                goto fail;
        for (int i = 0; i < n; i++) {
            void *reply;
            if (redisGetReply(c, &reply) != REDIS_OK)
                goto fail;
            if (((redisReply *)reply)->type != REDIS_REPLY_STRING) {
                fprintf(stderr, "hiredis: unexpected reply\n");
                exit(1);
            }
            freeReplyObject(reply);
        }
    }
    return now_s() - start;
fail:
    fprintf(stderr, "hiredis: %s\n", c->errstr);
    exit(1);
}

/* Runs redis-benchmark with the same command; returns its requests/s, or
 * 0 when the tool is missing. */
static double run_redis_benchmark(int use_unix, int total, int depth) {
    char cmd[512];
    if (use_unix)
        snprintf(cmd, sizeof cmd,
                 "redis-benchmark -s %s -P %d -n %d -c 1 -q XADD benchq '*' "
                 "data %s 2>/dev/null",
                 sock_path, depth, total, payload);
    else
        snprintf(cmd, sizeof cmd,
                 "redis-benchmark -h 127.0.0.1 -p %d -P %d -n %d -c 1 -q XADD "
                 "benchq '*' data %s 2>/dev/null",
                 tcp_port, depth, total, payload);
    FILE *p = popen(cmd, "r");
    if (p == NULL)
        return 0;
    char line[1024];
    double rps = 0;
    while (fgets(line, sizeof line, p)) {
        /* "XADD benchq * data ...: 123456.78 requests per second, ..." */
        char *colon = strrchr(line, ':');
        char *rq = strstr(line, "requests per second");
        if (colon && rq && colon < rq)
            rps = atof(colon + 1);
    }
    pclose(p);
    return rps;
}

int main(int argc, char **argv) {
    int total = argc > 1 ? atoi(argv[1]) : 200000;
    int rounds = argc > 2 ? atoi(argv[2]) : 5;
    int depth = argc > 3 ? atoi(argv[3]) : 64;
    if (total < 1 || rounds < 1 || depth < 1) {
        fprintf(stderr, "usage: bench_xadd [commands-per-round] [rounds] "
                        "[depth]\n");
        return 2;
    }
    for (int i = 0; i < 100; i++)
        payload[i] = (char)('a' + i % 26);
    bench_name = "bench_xadd";
    start_server(1);
    redisContext *admin = connect_server();

    printf("Pipelined XADD (one 100-byte field), depth %d, %d commands per "
           "round, %d rounds, best round shown\n\n",
           depth, total, rounds);
    printf("%-6s %-16s %12s %10s\n", "via", "client", "XADD/s", "vs hiredis");
    for (int use_unix = 1; use_unix >= 0; use_unix--) {
        char url[160];
        redisContext *hc;
        if (use_unix) {
            snprintf(url, sizeof url, "unix://%s", sock_path);
            hc = redisConnectUnix(sock_path);
        } else {
            snprintf(url, sizeof url, "redis://127.0.0.1:%d", tcp_port);
            hc = redisConnect("127.0.0.1", tcp_port);
        }
        if (hc == NULL || hc->err) {
            fprintf(stderr, "hiredis connect failed\n");
            return 1;
        }
        double best_e = 1e30, best_h = 1e30, best_rb = 0;
        for (int r = 0; r < rounds; r++) {
            double te = run_echomq(url, total, depth);
            delete_stream(admin);
            double th = run_hiredis(hc, total, depth);
            delete_stream(admin);
            double rb = run_redis_benchmark(use_unix, total, depth);
            delete_stream(admin);
            if (te < best_e)
                best_e = te;
            if (th < best_h)
                best_h = th;
            if (rb > best_rb)
                best_rb = rb;
        }
        redisFree(hc);
        const char *via = use_unix ? "unix" : "tcp";
        double he = total / best_h;
        printf("%-6s %-16s %12.0f %9.1f%%\n", via, "echomq conn",
               total / best_e, 100.0 * (total / best_e) / he);
        printf("%-6s %-16s %12.0f %9.1f%%\n", via, "hiredis", he, 100.0);
        if (best_rb > 0)
            printf("%-6s %-16s %12.0f %9.1f%%\n", via, "redis-benchmark",
                   best_rb, 100.0 * best_rb / he);
        else
            printf("%-6s %-16s %12s\n", via, "redis-benchmark", "(missing)");
    }
    redisFree(admin);
    return 0;
}
