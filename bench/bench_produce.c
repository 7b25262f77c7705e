/* SPDX-License-Identifier: BSD-3-Clause */
/* bench_produce.c: the producer's pipelined batch against a hiredis
 * pipelined XADD loop of the same depth, side by side in one run.
 *
 * Starts a private redis-server (from PATH, no persistence, no TCP port:
 * a unix socket in a mkdtemp folder; stopped by pid at exit), then for
 * each depth in {64, 256} runs rounds of N entries, each one field "data"
 * holding 100 bytes, with:
 *
 *   echomq:  one emq_produce_batch call of N prepared emq_messages on a
 *            producer of queue "bench" with producer.window = depth; it
 *            returns every entry's ID into an array.
 *   hiredis: redisAppendCommandArgv x depth then redisGetReply x depth,
 *            until N entries are added, on the same stream; each reply is
 *            checked to be a bulk string and its ID copied into an array
 *            of the same shape, which is the work the producer does too.
 *
 * The messages and both ID arrays are built before timing. The stream is
 * deleted after every round, so every round starts from an empty key. The
 * two clients alternate, the first of each pair switching every round, so
 * drift and noise hit both alike; each column is the best round (and,
 * separately, the least client CPU: getrusage user + system of this
 * single-threaded process; the server is another process).
 *
 * Usage: bench_produce [-d DEPTH] [-o echomq|hiredis] [entries] [rounds]
 *        (defaults: 500000 entries, 5 rounds, depths 64 and 256; -d and -o
 *        narrow the run for profiling: perf record -g bench_produce -d 64
 *        -o echomq 200000 1)
 */
#include "echomq.h"

#include "bench_common.h"

#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define STREAM "emq:{bench}" /* the stream echomq uses for queue "bench" */
#define PAYLOAD_LEN 100

/* Deletes the stream and checks it held n entries. */
static void check_and_delete(redisContext *admin, long long n) {
    redisReply *r = redisCommand(admin, "XLEN %s", STREAM);
    if (r == NULL || r->type != REDIS_REPLY_INTEGER || r->integer != n) {
        fprintf(stderr, "bench_produce: XLEN %lld, want %lld\n",
                r && r->type == REDIS_REPLY_INTEGER ? r->integer : -1, n);
        exit(1);
    }
    freeReplyObject(r);
    r = redisCommand(admin, "DEL %s", STREAM);
    if (r == NULL)
        die("DEL", admin->errstr);
    freeReplyObject(r);
}

/* ---- the two clients --------------------------------------------------- */

static char payload[PAYLOAD_LEN];

typedef struct timing {
    double seconds;
    double cpu_us;
} timing;

static timing run_echomq(const emq_message *msgs, int n, int depth,
                         emq_id *ids) {
    char url[160], window[16];
    snprintf(url, sizeof url, "unix://%s", sock_path);
    snprintf(window, sizeof window, "%d", depth);
    emq_conf_t *conf = emq_conf_new();
    emq_error err;
    emq_producer_t *p = NULL;
    if (conf == NULL || emq_conf_set(conf, "url", url, &err) != EMQ_OK ||
        emq_conf_set(conf, "queue", "bench", &err) != EMQ_OK ||
        emq_conf_set(conf, "producer.window", window, &err) != EMQ_OK ||
        emq_producer_new(conf, &p, &err) != EMQ_OK)
        die("echomq", err.message);
    emq_conf_destroy(conf);
    double c0 = cpu_us(), t0 = now_s();
    size_t written = 0;
    if (emq_produce_batch(p, msgs, (size_t)n, ids, &written, &err) != EMQ_OK)
        die("emq_produce_batch", err.message);
    timing t = {now_s() - t0, cpu_us() - c0};
    if (written != (size_t)n || ids[n - 1].str[0] == '\0')
        die("echomq", "not every entry was confirmed");
    emq_producer_destroy(p);
    return t;
}

static timing run_hiredis(int n, int depth, emq_id *ids) {
    redisContext *c = connect_server();
    static const char *argv[] = {"XADD", STREAM, "*", "data", payload};
    static const size_t lens[] = {4, sizeof STREAM - 1, 1, 4, PAYLOAD_LEN};
    double c0 = cpu_us(), t0 = now_s();
    for (int done = 0; done < n; done += depth) {
        int k = n - done < depth ? n - done : depth;
        for (int i = 0; i < k; i++)
            if (redisAppendCommandArgv(c, 5, argv, lens) != REDIS_OK)
                die("hiredis", c->errstr);
        for (int i = 0; i < k; i++) {
            void *v;
            if (redisGetReply(c, &v) != REDIS_OK)
                die("hiredis", c->errstr);
            redisReply *r = v;
            if (r->type != REDIS_REPLY_STRING || r->len >= EMQ_ID_MAX)
                die("hiredis", "unexpected reply");
            memcpy(ids[done + i].str, r->str, r->len);
            ids[done + i].str[r->len] = '\0';
            freeReplyObject(r);
        }
    }
    timing t = {now_s() - t0, cpu_us() - c0};
    redisFree(c);
    return t;
}

/* ---- main ---------------------------------------------------------------- */

static void usage(void) {
    fprintf(stderr,
            "usage: bench_produce [-d DEPTH] [-o echomq|hiredis] [entries] "
            "[rounds]\n");
    exit(2);
}

int main(int argc, char **argv) {
    bench_name = "bench_produce";
    int only_depth = 0, opt;
    const char *only = NULL;
    while ((opt = getopt(argc, argv, "d:o:")) != -1) {
        switch (opt) {
        case 'd':
            only_depth = atoi(optarg);
            break;
        case 'o':
            only = optarg;
            break;
        default:
            usage();
        }
    }
    int n = optind < argc ? atoi(argv[optind]) : 500000;
    int rounds = optind + 1 < argc ? atoi(argv[optind + 1]) : 5;
    if (n < 1 || rounds < 1 || only_depth < 0 ||
        (only && strcmp(only, "echomq") != 0 && strcmp(only, "hiredis") != 0))
        usage();
    int depths[2] = {64, 256}, ndepths = 2;
    if (only_depth > 0) {
        depths[0] = only_depth;
        ndepths = 1;
    }
    int do_e = only == NULL || strcmp(only, "echomq") == 0;
    int do_h = only == NULL || strcmp(only, "hiredis") == 0;

    for (int i = 0; i < PAYLOAD_LEN; i++)
        payload[i] = (char)('a' + i % 26);
    emq_field field = {"data", 4, payload, PAYLOAD_LEN};
    emq_message *msgs = malloc((size_t)n * sizeof *msgs);
    emq_id *ids = calloc((size_t)n, sizeof *ids);
    if (msgs == NULL || ids == NULL)
        die("malloc", "out of memory");
    for (int i = 0; i < n; i++)
        msgs[i] = (emq_message){&field, 1, NULL};

    start_server(0);
    redisContext *admin = connect_server();
    printf("Pipelined XADD of %d entries (one 100-byte field) per round over "
           "a unix socket, %d rounds, best round shown\n\n",
           n, rounds);
    printf("%5s  %-22s %12s %10s %10s %12s\n", "depth", "client", "entries/s",
           "CPU us/e", "vs hiredis", "CPU vs hir.");
    for (int d = 0; d < ndepths; d++) {
        int depth = depths[d];
        timing best_e = {1e30, 1e30}, best_h = {1e30, 1e30};
        for (int r = 0; r < rounds; r++) {
            for (int k = 0; k < 2; k++) {
                int echomq_turn = (k == 0) == (r % 2 == 0);
                timing t;
                if (echomq_turn && do_e) {
                    t = run_echomq(msgs, n, depth, ids);
                    if (t.seconds < best_e.seconds)
                        best_e.seconds = t.seconds;
                    if (t.cpu_us < best_e.cpu_us)
                        best_e.cpu_us = t.cpu_us;
                } else if (!echomq_turn && do_h) {
                    t = run_hiredis(n, depth, ids);
                    if (t.seconds < best_h.seconds)
                        best_h.seconds = t.seconds;
                    if (t.cpu_us < best_h.cpu_us)
                        best_h.cpu_us = t.cpu_us;
                } else {
                    continue;
                }
                check_and_delete(admin, n);
                fprintf(stderr, "depth %d round %d %s: %.3f s\n", depth, r,
                        echomq_turn ? "echomq" : "hiredis", t.seconds);
            }
        }
        double he = n / best_h.seconds, ee = n / best_e.seconds;
        if (do_e)
            printf("%5d  %-22s %12.0f %10.3f %9.1f%% %12.2f\n", depth,
                   "echomq produce_batch", ee, best_e.cpu_us / n,
                   do_h ? 100.0 * ee / he : 0.0,
                   do_h ? best_e.cpu_us / best_h.cpu_us : 0.0);
        if (do_h)
            printf("%5d  %-22s %12.0f %10.3f %9.1f%% %12.2f\n", depth,
                   "hiredis loop", he, best_h.cpu_us / n, 100.0, 1.0);
    }
    redisFree(admin);
    free(ids);
    free(msgs);
    return 0;
}
