/* SPDX-License-Identifier: BSD-3-Clause */
/* bench_consume.c: consume + acknowledge throughput, an echomq pool against
 * a plain hiredis loop of the same round-trip shape, side by side.
 *
 * Starts a private redis-server (from PATH, no persistence, no TCP port:
 * a unix socket in a mkdtemp folder; stopped by pid at exit), fills the
 * stream of queue "bench" (emq:{bench}) with N entries of one field "data"
 * holding 100 bytes, using pipelined XADD through hiredis, then for each
 * COUNT in {10, 100, 1000} and each number of consumers in {1, 2, 4} runs:
 *
 *   echomq:  an emq_pool of that many consumers (start head, count COUNT,
 *            block_ms 100) whose handler touches the entry's fields, counts
 *            it in a shared atomic counter and answers EMQ_ACK; the handler
 *            that counts entry N stops the pool.
 *   hiredis: one thread per consumer, each with its own redisContext,
 *            looping on XREADGROUP GROUP g c COUNT n BLOCK 100 STREAMS s >
 *            and XACK of the previous batch's IDs appended in front of the
 *            next XREADGROUP, so the acknowledgements travel in the same
 *            round trip as the next read, as echomq does. Each entry's
 *            fields are touched, its ID copied for the XACK, and it is
 *            counted in the shared counter; a thread stops once the counter
 *            reaches N, after one last XACK.
 *
 * Every run uses a fresh group created at 0 (destroyed afterwards), so both
 * clients consume the same pre-filled stream; the stream is never changed.
 * A run is timed from just before the consumers start (connects, group
 * door and, for echomq, lease and self-recovery included) to the moment
 * entry N has been handled; client CPU is the getrusage(RUSAGE_SELF) user +
 * system delta of this process (all its threads; the server is another
 * process) over the same span. The tail after that (the last XACK, and
 * consumers that found the stream drained waiting out one BLOCK before they
 * see the stop, which costs time but no CPU) is the same for both clients
 * and is left out, so it does not blur small runs; the progress lines on
 * stderr show the time to return as well. Runs alternate between the two
 * clients, the first of each pair switching every time, so drift and noise
 * hit both alike; each column shows the best of the rounds. After each run
 * the benchmark checks that N entries were handled and acknowledged and
 * that the group has nothing pending.
 *
 * Usage: bench_consume [-c COUNT] [-p CONSUMERS] [-o echomq|hiredis]
 *                      [-w WORK_US] [-i MIN_IDLE_MS] [-x]
 *                      [entries] [rounds] [block_ms]
 *        (defaults: 1000000 entries, 3 rounds, block_ms 100; -c, -p and -o
 *        narrow the run to one COUNT, one number of consumers or one client,
 *        for profiling: perf record -g bench_consume -c 10 -p 1 -o echomq)
 */
#include "echomq.h"

#include "bench_common.h"

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <getopt.h>
#include <unistd.h>

#include "bench_stream.h"

/* -i: echomq's claim.min_idle_ms. */
static int min_idle_ms;
/* -x: echomq's deliveries.exact 1 (docs/CONSUMER.md, Delivery counts). */
static int exact;

static emq_verdict echomq_handler(void *opaque, const emq_entry *entry,
                                  char *reason, size_t reason_size) {
    (void)reason;
    (void)reason_size;
    run_state *s = opaque;
    work();
    size_t bytes = 0;
    for (size_t i = 0; i < entry->nfields; i++)
        bytes += entry->fields[i].value_len;
    atomic_fetch_add_explicit(&s->sink, bytes, memory_order_relaxed);
    if (atomic_fetch_add(&s->handled, 1) + 1 == s->total) {
        mark_done(s);
        emq_pool_stop(s->pool);
    }
    return EMQ_ACK;
}

/* Server microseconds spent in command name since the last CONFIG
 * RESETSTAT (INFO commandstats), and its calls. */
static double server_usec(redisContext *admin, const char *name,
                          long long *calls) {
    redisReply *r = redisCommand(admin, "INFO commandstats");
    double usec = 0;
    *calls = 0;
    if (r && r->type == REDIS_REPLY_STRING) {
        char key[64];
        snprintf(key, sizeof key, "cmdstat_%s:calls=", name);
        const char *p = strstr(r->str, key);
        if (p) {
            *calls = atoll(p + strlen(key));
            const char *u = strstr(p, "usec=");
            if (u)
                usec = atof(u + 5);
        }
    }
    freeReplyObject(r);
    return usec;
}

/* Prints where the server's time went during an echomq run, per message:
 * the read, the acknowledgement, and the scripts (lease renewals, the
 * ownership refresh, claims): the maintenance the consumer adds. */
static void print_server_cost(redisContext *admin, long total) {
    static const char *const names[] = {"xreadgroup", "xack", "eval", "xclaim",
                                        "xpending"};
    fprintf(stderr, "    server time per message:");
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        long long calls;
        double usec = server_usec(admin, names[i], &calls);
        fprintf(stderr, " %s %.3f us (%lld calls)", names[i], usec / total,
                calls);
    }
    fprintf(stderr, "\n");
}

static result run_echomq(redisContext *admin, long total, int count,
                         int consumers, int block_ms, const char *group) {
    char url[160], num[24];
    snprintf(url, sizeof url, "unix://%s", sock_path);
    emq_conf_t *conf = emq_conf_new();
    if (conf == NULL)
        die("emq_conf_new", "out of memory");
    conf_set(conf, "url", url);
    conf_set(conf, "queue", "bench");
    conf_set(conf, "group", group);
    conf_set(conf, "consumer", "e");
    conf_set(conf, "start", "head");
    snprintf(num, sizeof num, "%d", count);
    conf_set(conf, "count", num);
    snprintf(num, sizeof num, "%d", block_ms);
    conf_set(conf, "block_ms", num);
    if (min_idle_ms > 0) {
        snprintf(num, sizeof num, "%d", min_idle_ms);
        conf_set(conf, "claim.min_idle_ms", num);
    }
    if (exact)
        conf_set(conf, "deliveries.exact", "1");

    run_state s = {.total = total};
    emq_error err;
    freeReplyObject(redisCommand(admin, "CONFIG RESETSTAT"));
    double cpu0 = cpu_us(), t0 = now_s();
    if (emq_pool_new(conf, consumers, echomq_handler, &s, &s.pool, &err) !=
        EMQ_OK)
        die("emq_pool_new", err.message);
    if (emq_pool_run(s.pool, &err) != EMQ_OK)
        die("emq_pool_run", err.message);
    result res = {s.done_s - t0, s.done_cpu_us - cpu0, now_s() - t0, 1};

    uint64_t acked = 0;
    for (int i = 0; i < consumers; i++) {
        emq_consumer_stats st;
        emq_consumer_stats_get(emq_pool_consumer(s.pool, i), &st);
        acked += st.acked;
    }
    print_server_cost(admin, total);
    emq_pool_destroy(s.pool);
    emq_conf_destroy(conf);
    if (atomic_load(&s.handled) != total || acked != (uint64_t)total) {
        fprintf(stderr,
                "bench_consume: echomq handled %ld, acked %llu of %ld\n",
                atomic_load(&s.handled), (unsigned long long)acked, total);
        exit(1);
    }
    check_and_drop_group(admin, group, "echomq");
    return res;
}

/* ---- the table ----------------------------------------------------------- */

static const int counts[] = {10, 100, 1000};
static const int consumer_counts[] = {1, 2, 4};
#define NCOUNTS (sizeof counts / sizeof counts[0])
#define NCONSUMERS (sizeof consumer_counts / sizeof consumer_counts[0])

/* Keeps the best time and, separately, the least CPU of the rounds. */
static void keep_best(result *best, const result *r) {
    if (!r->ran)
        return;
    if (!best->ran || r->wall_s < best->wall_s)
        best->wall_s = r->wall_s;
    if (!best->ran || r->cpu_us < best->cpu_us)
        best->cpu_us = r->cpu_us;
    best->ran = 1;
}

/* One table cell: the formatted value, or "-" when it was not measured. */
static void cell(char out[32], int ran, const char *fmt, double value) {
    if (ran)
        snprintf(out, 32, fmt, value);
    else
        snprintf(out, 32, "-");
}

static void usage(void) {
    fprintf(stderr,
            "usage: bench_consume [-c COUNT] [-p CONSUMERS] [-o echomq|hiredis]"
            "\n                     [-w WORK_US] [-i MIN_IDLE_MS] [-x]"
            " [entries] [rounds] [block_ms]\n"
            "  -w: busy work per entry in both clients' handlers; -i: echomq's"
            " claim.min_idle_ms\n"
            "  -x: echomq with deliveries.exact 1\n"
            "  defaults: 1000000 entries, 3 rounds, block_ms 100; every COUNT "
            "of\n  10, 100, 1000, every number of consumers of 1, 2, 4, both "
            "clients\n");
    exit(2);
}

int main(int argc, char **argv) {
    bench_name = "bench_consume";
    int only_count = 0, only_consumers = 0, run_e = 1, run_h = 1, opt;
    while ((opt = getopt(argc, argv, "c:p:o:w:i:x")) != -1) {
        if (opt == 'w')
            work_us = atoi(optarg);
        else if (opt == 'i')
            min_idle_ms = atoi(optarg);
        else if (opt == 'x')
            exact = 1;
        else if (opt == 'c')
            only_count = atoi(optarg);
        else if (opt == 'p')
            only_consumers = atoi(optarg);
        else if (opt == 'o' && strcmp(optarg, "echomq") == 0)
            run_h = 0;
        else if (opt == 'o' && strcmp(optarg, "hiredis") == 0)
            run_e = 0;
        else
            usage();
    }
    argc -= optind - 1;
    argv += optind - 1;
    long total = argc > 1 ? atol(argv[1]) : 1000000;
    int rounds = argc > 2 ? atoi(argv[2]) : 3;
    int block_ms = argc > 3 ? atoi(argv[3]) : 100;
    if (argc > 4 || total < 1 || rounds < 1 || block_ms < 1)
        usage();
    for (int i = 0; i < PAYLOAD_LEN; i++)
        payload[i] = (char)('a' + i % 26);
    start_server(0);
    redisContext *admin = connect_server();
    fill(admin, total);
    printf("consume + ack of %ld entries, block_ms %d, %d round(s), "
           "alternating clients; best of the rounds per column\n\n",
           total, block_ms, rounds);
    fflush(stdout);

    result best_e[NCOUNTS][NCONSUMERS], best_h[NCOUNTS][NCONSUMERS];
    int run = 0;
    for (size_t ci = 0; ci < NCOUNTS; ci++)
        for (size_t ni = 0; ni < NCONSUMERS; ni++) {
            result *be = &best_e[ci][ni], *bh = &best_h[ci][ni];
            *be = *bh = (result){0};
            if ((only_count && counts[ci] != only_count) ||
                (only_consumers && consumer_counts[ni] != only_consumers))
                continue;
            for (int r = 0; r < rounds; r++, run++) {
                char ge[32], gh[32];
                snprintf(ge, sizeof ge, "ge-%d", run);
                snprintf(gh, sizeof gh, "gh-%d", run);
                result e = {0}, h = {0};
                int c = counts[ci], p = consumer_counts[ni];
                if (run % 2 == 0) {
                    if (run_e)
                        e = run_echomq(admin, total, c, p, block_ms, ge);
                    if (run_h)
                        h = run_hiredis(admin, total, c, p, block_ms, gh);
                } else {
                    if (run_h)
                        h = run_hiredis(admin, total, c, p, block_ms, gh);
                    if (run_e)
                        e = run_echomq(admin, total, c, p, block_ms, ge);
                }
                fprintf(stderr,
                        "  COUNT %4d x%d round %d: echomq %.3f s (%.3f s to "
                        "return) %.2f us/msg, hiredis %.3f s (%.3f s) %.2f "
                        "us/msg\n",
                        c, p, r + 1, e.wall_s, e.total_s, e.cpu_us / total,
                        h.wall_s, h.total_s, h.cpu_us / total);
                keep_best(be, &e);
                keep_best(bh, &h);
            }
        }
    fflush(stderr);

    printf("| COUNT | consumers | echomq msg/s | echomq CPU us/msg | "
           "hiredis msg/s | hiredis CPU us/msg | msg/s echomq/hiredis | "
           "CPU echomq/hiredis |\n");
    printf("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n");
    for (size_t ci = 0; ci < NCOUNTS; ci++)
        for (size_t ni = 0; ni < NCONSUMERS; ni++) {
            result e = best_e[ci][ni], h = best_h[ci][ni];
            if (!e.ran && !h.ran)
                continue;
            char cells[6][32];
            cell(cells[0], e.ran, "%.0f", total / e.wall_s);
            cell(cells[1], e.ran, "%.2f", e.cpu_us / total);
            cell(cells[2], h.ran, "%.0f", total / h.wall_s);
            cell(cells[3], h.ran, "%.2f", h.cpu_us / total);
            cell(cells[4], e.ran && h.ran, "%.1f%%",
                 100.0 * h.wall_s / e.wall_s);
            cell(cells[5], e.ran && h.ran, "%.2f", e.cpu_us / h.cpu_us);
            printf("| %d | %d | %s | %s | %s | %s | %s | %s |\n", counts[ci],
                   consumer_counts[ni], cells[0], cells[1], cells[2], cells[3],
                   cells[4], cells[5]);
        }
    /* The target of the issue: COUNT 100, one consumer, >= 95% of the best
     * hiredis loop of that shape with less client CPU per entry. */
    result e = best_e[1][0], h = best_h[1][0];
    if (e.ran && h.ran) {
        double ratio = h.wall_s / e.wall_s;
        printf("\ntarget (COUNT 100, 1 consumer: >= 95%% of hiredis msg/s, "
               "less CPU/msg): %.1f%%, CPU %.2f vs %.2f us/msg: %s\n",
               100.0 * ratio, e.cpu_us / total, h.cpu_us / total,
               ratio >= 0.95 && e.cpu_us < h.cpu_us ? "met" : "NOT met");
    }
    redisFree(admin);
    return 0;
}
