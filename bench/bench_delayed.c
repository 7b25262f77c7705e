/* SPDX-License-Identifier: BSD-3-Clause */
/* bench_delayed.c: what delayed entries cost and how late they come.
 *
 * Starts a private redis-server (unix socket; stopped by pid at exit) and
 * measures, side by side in one run:
 *
 *   produce   N entries with emq_produce_batch_ex in batches of 100, plain
 *             and delayed by an hour: entries/s and client CPU per entry;
 *   lateness  N entries due at moments spread over SECONDS (each carrying
 *             its due time), one consumer (run API, defaults: delayed.
 *             poll_ms 100): handler time minus due time, p50/p99/max, ms
 *             (the server and this process share the machine's clock);
 *   idle      4 consumers of a queue that never delays, blocked for 5 s:
 *             the server's CPU with delayed.poll_ms 100 (the default) and
 *             0 (no moves), in % of one core.
 *
 * Usage: bench_delayed [entries] [seconds]   (defaults 100000, 5)
 */
#include "bench_conf.h"

#include <pthread.h>
#include <stdatomic.h>

static long entries = 100000;
static int seconds = 5;
static char url[200];

static emq_conf_t *conf_of(const char *queue) {
    return bench_conf_of(url, queue);
}

static int64_t wall_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ---- produce ------------------------------------------------------------ */

static void produce(const char *queue, int64_t delay_ms, double *rate,
                    double *cpu_us_per) {
    emq_conf_t *conf = conf_of(queue);
    emq_producer_t *p;
    emq_error err;
    if (emq_producer_new(conf, &p, &err) != EMQ_OK)
        die("producer", err.message);
    static const char value[] = "0123456789012345678901234567890123456789"
                                "0123456789012345678901234567890123456789";
    emq_field f = {"payload", 7, value, sizeof value - 1};
    emq_message m[100];
    emq_produce_opts o[100];
    for (int i = 0; i < 100; i++) {
        m[i] = (emq_message){&f, 1, NULL};
        o[i] = (emq_produce_opts)EMQ_PRODUCE_OPTS_INIT;
        o[i].delay_ms = delay_ms;
    }
    double t0 = now_s(), c0 = cpu_us();
    for (long done = 0; done < entries; done += 100) {
        size_t written;
        if (emq_produce_batch_ex(p, m, o, 100, NULL, &written, &err) != EMQ_OK)
            die("produce", err.message);
    }
    double took = now_s() - t0;
    *rate = (double)entries / took;
    *cpu_us_per = (cpu_us() - c0) / (double)entries;
    emq_producer_destroy(p);
    emq_conf_destroy(conf);
}

/* ---- lateness ----------------------------------------------------------- */

typedef struct late {
    double *ms;
    atomic_long n;
    long want;
    emq_consumer_t *c;
} late;

static emq_verdict on_entry(void *opaque, const emq_entry *e, char *reason,
                            size_t size) {
    (void)reason;
    (void)size;
    late *l = opaque;
    char text[32];
    size_t len = e->fields[0].value_len < 31 ? e->fields[0].value_len : 31;
    memcpy(text, e->fields[0].value, len);
    text[len] = '\0';
    long i = atomic_fetch_add(&l->n, 1);
    if (i < l->want)
        l->ms[i] = (double)(wall_ms() - atoll(text));
    if (i + 1 >= l->want)
        emq_consumer_stop(l->c);
    return EMQ_ACK;
}

static int by_value(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void *run_consumer(void *arg) {
    emq_error err;
    if (emq_consumer_run(arg, &err) != EMQ_OK)
        die("consumer", err.message);
    return NULL;
}

static void lateness(long n) {
    emq_conf_t *conf = conf_of("late");
    emq_producer_t *p;
    emq_error err;
    if (emq_producer_new(conf, &p, &err) != EMQ_OK)
        die("producer", err.message);
    int64_t base = wall_ms() + 1000;
    for (long i = 0; i < n; i++) {
        char due[32];
        emq_produce_opts o = EMQ_PRODUCE_OPTS_INIT;
        o.due_ms = base + (int64_t)(i * seconds * 1000 / n);
        int len = snprintf(due, sizeof due, "%lld", (long long)o.due_ms);
        emq_field f = {"due", 3, due, (size_t)len};
        if (emq_produce_ex(p, &f, 1, &o, NULL, &err) != EMQ_OK)
            die("produce", err.message);
    }
    emq_producer_destroy(p);
    bench_set(conf, "group", "g");
    bench_set(conf, "consumer", "late-1");
    bench_set(conf, "start", "head");
    late l = {.ms = calloc((size_t)n, sizeof(double)), .want = n};
    if (l.ms == NULL ||
        emq_consumer_new(conf, on_entry, &l, &l.c, &err) != EMQ_OK)
        die("consumer", l.ms ? err.message : "out of memory");
    pthread_t t;
    pthread_create(&t, NULL, run_consumer, l.c);
    pthread_join(t, NULL);
    emq_consumer_destroy(l.c);
    emq_conf_destroy(conf);
    long got = atomic_load(&l.n) < n ? atomic_load(&l.n) : n;
    qsort(l.ms, (size_t)got, sizeof *l.ms, by_value);
    printf("| lateness, due to handler (%ld entries over %d s, "
           "delayed.poll_ms 100) | p50 %.0f ms | p99 %.0f ms | max %.0f ms |\n",
           got, seconds, l.ms[got / 2], l.ms[(long)(got * 0.99)],
           l.ms[got - 1]);
    free(l.ms);
}

/* ---- idle cost ---------------------------------------------------------- */

static double idle_cost(redisContext *admin, const char *poll_ms) {
    enum { K = 4 };
    emq_consumer_t *c[K];
    pthread_t t[K];
    for (int i = 0; i < K; i++) {
        emq_conf_t *conf = conf_of("idle");
        char name[16];
        snprintf(name, sizeof name, "idle-%d", i);
        bench_set(conf, "group", "g");
        bench_set(conf, "consumer", name);
        bench_set(conf, "start", "new");
        bench_set(conf, "delayed.poll_ms", poll_ms);
        emq_error err;
        if (emq_consumer_new(conf, on_entry, NULL, &c[i], &err) != EMQ_OK)
            die("consumer", err.message);
        emq_conf_destroy(conf);
        pthread_create(&t[i], NULL, run_consumer, c[i]);
    }
    sleep(1); /* started */
    double s0 = server_cpu_s(admin), t0 = now_s();
    sleep(5);
    double pct = (server_cpu_s(admin) - s0) / (now_s() - t0) * 100.0;
    for (int i = 0; i < K; i++) {
        emq_consumer_stop(c[i]);
        pthread_join(t[i], NULL);
        emq_consumer_destroy(c[i]);
    }
    return pct;
}

int main(int argc, char **argv) {
    bench_name = "bench_delayed";
    if (argc > 1)
        entries = atol(argv[1]);
    if (argc > 2)
        seconds = atoi(argv[2]);
    if (argc > 3 || entries < 100 || seconds < 1) {
        fprintf(stderr, "usage: bench_delayed [entries] [seconds]\n");
        return 2;
    }
    entries -= entries % 100;
    start_server(0);
    snprintf(url, sizeof url, "unix://%s", sock_path);
    redisContext *admin = connect_server();
    double plain_rate, plain_cpu, delayed_rate, delayed_cpu;
    produce("plain", 0, &plain_rate, &plain_cpu);
    produce("delayed", 3600000, &delayed_rate, &delayed_cpu);
    printf("| what | | | |\n| --- | ---: | ---: | ---: |\n");
    printf("| produce %ld, batches of 100, plain | %.0f entries/s | %.2f us "
           "client CPU/entry | |\n",
           entries, plain_rate, plain_cpu);
    printf("| produce %ld, batches of 100, delayed 1 h | %.0f entries/s | "
           "%.2f us client CPU/entry | %.2fx plain |\n",
           entries, delayed_rate, delayed_cpu, delayed_rate / plain_rate);
    lateness(entries / 10 < 20000 ? entries / 10 : 20000);
    double with = idle_cost(admin, "100"), without = idle_cost(admin, "0");
    printf("| 4 idle consumers, server CPU, delayed.poll_ms 100 | %.2f %% of "
           "a core | poll_ms 0: %.2f %% | |\n",
           with, without);
    redisFree(admin);
    return 0;
}
