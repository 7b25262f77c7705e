/* SPDX-License-Identifier: BSD-3-Clause */
/* bench_upkeep.c: what keeping entries owned costs the server.
 *
 * Starts a private redis-server (unix socket; stopped by pid at exit).
 * For each number N of entries in flight (0, 1000, 100000 by default):
 * fills a queue of its own with N entries, starts one pull-mode consumer
 * at the default settings (max_in_flight raised to N, so that it may hold
 * them all), polls until it holds all N in hand, and leaves them
 * unsettled. Its upkeep then refreshes them (every quarter of
 * claim.min_idle_ms: 15 s), publishes their in-hand times, renews the
 * lease (every third of lease.ttl_ms: 10 s) and runs its claim beats and
 * delayed and limits looks. After 2 s the server's statistics are reset
 * and, over SECONDS (default 60: four refreshes), the benchmark reports
 * the server's CPU (INFO cpu, user + sys) in % of one core, and the
 * commands that took it (INFO commandstats: calls and microseconds per
 * second, most expensive first). A first row measures the server alone
 * (its own timers: the benchmark server runs with hz 100); N = 0 is the
 * consumer's fixed cost on top of it.
 *
 * The server's CPU time is counted by its own process, so other work on
 * the machine changes it little (unlike a wall-clock rate).
 *
 * Usage: bench_upkeep [seconds] [N ...]   (defaults: 60 0 1000 100000)
 */
#include "bench_conf.h"

#include <stdint.h>

static char url[200];

/* Fills queue q's stream with n entries of one 100-byte field. */
static void fill(redisContext *admin, const char *q, long n) {
    char stream[96], value[101];
    snprintf(stream, sizeof stream, "emq:{%s}", q);
    memset(value, 'v', 100);
    value[100] = '\0';
    for (long done = 0; done < n;) {
        long k = n - done < 1000 ? n - done : 1000;
        for (long i = 0; i < k; i++)
            redisAppendCommand(admin, "XADD %s * data %s", stream, value);
        for (long i = 0; i < k; i++) {
            redisReply *r;
            if (redisGetReply(admin, (void **)&r) != REDIS_OK)
                die("XADD", admin->errstr);
            freeReplyObject(r);
        }
        done += k;
    }
}

/* A pull-mode consumer of q able to hold n entries. */
static emq_consumer_t *consumer_of(const char *q, long n) {
    emq_conf_t *conf = bench_conf_of(url, q);
    char room[24];
    snprintf(room, sizeof room, "%ld", n > 0 ? n : 1);
    bench_set(conf, "group", "g");
    bench_set(conf, "consumer", "holder");
    bench_set(conf, "start", "head");
    bench_set(conf, "max_in_flight", room);
    emq_consumer_t *c;
    emq_error err;
    if (emq_consumer_new(conf, NULL, NULL, &c, &err) != EMQ_OK)
        die("emq_consumer_new", err.message);
    emq_conf_destroy(conf);
    return c;
}

/* Polls until n entries are in hand (into held), within 300 s. */
static void take_all(emq_consumer_t *c, emq_entry **held, long n) {
    long got = 0;
    double until = now_s() + 300;
    while (got < n) {
        if (now_s() > until)
            die("poll", "the entries did not all arrive within 300 s");
        size_t k = 0;
        size_t want = n - got < 1000 ? (size_t)(n - got) : 1000;
        emq_error err;
        if (emq_consumer_poll(c, held + got, want, 1000, &k, &err) != EMQ_OK)
            die("emq_consumer_poll", err.message);
        got += (long)k;
    }
}

/* One command's line of INFO commandstats. */
typedef struct cmdstat {
    char name[64];
    long long calls;
    double usec;
} cmdstat;

/* The commands of INFO commandstats (at most max), most usec first. */
static size_t commandstats(redisContext *admin, cmdstat *out, size_t max) {
    redisReply *r = redisCommand(admin, "INFO commandstats");
    if (r == NULL || r->type != REDIS_REPLY_STRING)
        die("INFO commandstats", "no reply");
    size_t n = 0;
    for (const char *p = strstr(r->str, "cmdstat_"); p != NULL && n < max;
         p = strstr(p + 1, "cmdstat_")) {
        cmdstat s = {0};
        if (sscanf(p, "cmdstat_%63[^:]:calls=%lld,usec=%lf", s.name, &s.calls,
                   &s.usec) == 3 &&
            strcmp(s.name, "info") != 0 && strcmp(s.name, "config|resetstat") &&
            strcmp(s.name, "config") != 0)
            out[n++] = s;
    }
    freeReplyObject(r);
    for (size_t i = 1; i < n; i++) /* by usec, most first */
        for (size_t j = i; j > 0 && out[j].usec > out[j - 1].usec; j--) {
            cmdstat t = out[j];
            out[j] = out[j - 1];
            out[j - 1] = t;
        }
    return n;
}

/* The server's CPU in % of a core over seconds, from now; the commands
 * that took it into stats (at most max), their number into *ns. */
static double server_share(redisContext *admin, int seconds, cmdstat *stats,
                           size_t max, size_t *ns, double *dt) {
    freeReplyObject(redisCommand(admin, "CONFIG RESETSTAT"));
    double s0 = server_cpu_s(admin), t0 = now_s();
    sleep((unsigned)seconds);
    *dt = now_s() - t0;
    double pct = (server_cpu_s(admin) - s0) / *dt * 100.0;
    *ns = commandstats(admin, stats, max);
    return pct;
}

static void print_row(const char *what, double pct, const cmdstat *stats,
                      size_t ns, double dt) {
    printf("| %s | %.3f %% of a core |", what, pct);
    for (size_t i = 0; i < ns && i < 5; i++)
        printf(" %s %.1f/s %.0f us/s;", stats[i].name, stats[i].calls / dt,
               stats[i].usec / dt);
    printf(" |\n");
    fflush(stdout);
}

static void measure(redisContext *admin, long n, int seconds) {
    char q[32];
    snprintf(q, sizeof q, "upkeep-%ld", n);
    fill(admin, q, n);
    emq_consumer_t *c = consumer_of(q, n);
    emq_entry **held = calloc((size_t)(n > 0 ? n : 1), sizeof *held);
    if (held == NULL)
        die("calloc", "out of memory");
    if (n > 0) {
        take_all(c, held, n);
    } else { /* start its threads: a poll that finds nothing */
        size_t k;
        emq_error err;
        if (emq_consumer_poll(c, held, 1, 200, &k, &err) != EMQ_OK)
            die("emq_consumer_poll", err.message);
    }
    sleep(2);
    cmdstat stats[64];
    size_t ns;
    double dt, pct = server_share(admin, seconds, stats, 64, &ns, &dt);
    char what[64];
    snprintf(what, sizeof what, "one consumer, %ld in hand", n);
    print_row(what, pct, stats, ns, dt);
    emq_consumer_stop(c);
    emq_consumer_destroy(c);
    for (long i = 0; i < n; i++)
        emq_entry_free(held[i]);
    free(held);
}

int main(int argc, char **argv) {
    bench_name = "bench_upkeep";
    int seconds = argc > 1 ? atoi(argv[1]) : 60;
    if (seconds < 1) {
        fprintf(stderr, "usage: bench_upkeep [seconds] [N ...]\n");
        return 2;
    }
    start_server(0);
    snprintf(url, sizeof url, "unix://%s", sock_path);
    redisContext *admin = connect_server();
    printf("| what | server CPU over %d s | commands (calls/s, server us/s), "
           "most expensive first |\n| --- | ---: | --- |\n",
           seconds);
    cmdstat stats[64];
    size_t ns;
    double dt, pct = server_share(admin, seconds, stats, 64, &ns, &dt);
    print_row("the server alone", pct, stats, ns, dt);
    if (argc > 2) {
        for (int i = 2; i < argc; i++)
            measure(admin, atol(argv[i]), seconds);
    } else {
        measure(admin, 0, seconds);
        measure(admin, 1000, seconds);
        measure(admin, 100000, seconds);
    }
    redisFree(admin);
    return 0;
}
