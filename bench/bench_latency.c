/* SPDX-License-Identifier: BSD-3-Clause */
/* bench_latency.c: XADD-to-handler latency at a steady rate, for the run
 * API, the poll API, the event-loop mode and a hiredis XREADGROUP BLOCK
 * loop, side by side in one run.
 *
 * Starts a private redis-server (unix socket; stopped by pid at exit). For
 * each client in turn, a producer thread adds entries to emq:{bench} with
 * hiredis at RATE entries/s (one XADD every 1/RATE s, paced against the
 * monotonic clock), each carrying its send time in nanoseconds; the
 * consumer takes the clock when the entry reaches it (the handler, the
 * thread that polled, the event loop after step, the hiredis loop after
 * its reply) and records the difference. SECONDS of samples per client,
 * after a warm-up second; then p50, p99, p99.9 and the worst.
 *
 *   run      emq_consumer_run, handler answers EMQ_ACK;
 *   poll     emq_consumer_poll (timeout 100 ms) on one thread, ack there;
 *   loop     epoll on emq_consumer_fd, emq_consumer_step, ack there;
 *   hiredis  XREADGROUP GROUP g c COUNT 100 BLOCK 2000 ... > with the XACK
 *            of the previous batch pipelined in front of it.
 *
 * Usage: bench_latency [rate] [seconds]   (defaults 10000, 5)
 */
#include "bench_stream.h"

#include <sys/epoll.h>

#define MAX_SAMPLES 2000000

typedef enum client { RUN, POLL, LOOP, HIREDIS, NCLIENTS } client;
static const char *const names[NCLIENTS] = {"run", "poll", "loop", "hiredis"};

static char url[200];
static long rate = 10000;
static int seconds = 5;

static double *samples;
static atomic_long nsamples;
static atomic_int measuring, producing;

static int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Records one entry whose value is its send time in ns. */
static void sample(const char *value, size_t len) {
    char text[32];
    if (len == 0 || len >= sizeof text)
        return;
    memcpy(text, value, len);
    text[len] = '\0';
    int64_t sent = atoll(text);
    if (!atomic_load(&measuring))
        return;
    long i = atomic_fetch_add(&nsamples, 1);
    if (i < MAX_SAMPLES)
        samples[i] = (double)(now_ns() - sent) / 1000.0; /* us */
}

static void sample_entry(const emq_entry *e) {
    if (e->nfields > 0)
        sample(e->fields[0].value, e->fields[0].value_len);
}

static void *producer_main(void *arg) {
    (void)arg;
    redisContext *c = connect_server();
    int64_t step = 1000000000 / rate, next = now_ns();
    while (atomic_load(&producing)) {
        int64_t t = now_ns();
        if (t < next) {
            if (next - t > 50000) {
                struct timespec ts = {0, (long)(next - t - 20000)};
                nanosleep(&ts, NULL);
            }
            continue;
        }
        next += step;
        char v[32];
        snprintf(v, sizeof v, "%lld", (long long)now_ns());
        redisReply *r = redisCommand(c, "XADD " STREAM " * data %s", v);
        if (r == NULL)
            die("XADD", c->errstr);
        freeReplyObject(r);
    }
    redisFree(c);
    return NULL;
}

static emq_conf_t *lat_conf(const char *group) {
    emq_conf_t *conf = emq_conf_new();
    conf_set(conf, "url", url);
    conf_set(conf, "queue", "bench");
    conf_set(conf, "group", group);
    conf_set(conf, "consumer", "e");
    conf_set(conf, "start", "new");
    conf_set(conf, "block_ms", "2000");
    return conf;
}

/* ---- the consumers ------------------------------------------------------- */

static emq_verdict run_handler(void *opaque, const emq_entry *e, char *reason,
                               size_t reason_size) {
    (void)opaque;
    (void)reason;
    (void)reason_size;
    sample_entry(e);
    return EMQ_ACK;
}

typedef struct consumer_thread {
    client kind;
    const char *group;
    emq_consumer_t *c;
    atomic_int quit;
    pthread_t thread;
} consumer_thread;

static void ack_all(emq_consumer_t *c, emq_entry **got, size_t n) {
    for (size_t i = 0; i < n; i++) {
        emq_error err;
        sample_entry(got[i]);
        if (emq_consumer_ack(c, got[i], &err) != EMQ_OK)
            die("emq_consumer_ack", err.message);
        emq_entry_free(got[i]);
    }
}

static void *pull_main(void *arg) {
    consumer_thread *t = arg;
    emq_entry *got[100];
    emq_error err;
    if (t->kind == POLL) {
        while (!atomic_load(&t->quit)) {
            size_t n = 0;
            emq_status st = emq_consumer_poll(t->c, got, 100, 100, &n, &err);
            if (st == EMQ_ECLOSED)
                break;
            if (st != EMQ_OK)
                die("emq_consumer_poll", err.message);
            ack_all(t->c, got, n);
        }
        return NULL;
    }
    int fd = emq_consumer_fd(t->c, &err);
    int ep = epoll_create1(0);
    struct epoll_event ev = {.events = EPOLLIN, .data.fd = fd};
    if (fd < 0 || ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) != 0)
        die("epoll", "setup failed");
    while (!atomic_load(&t->quit)) {
        struct epoll_event out;
        if (epoll_wait(ep, &out, 1, 100) <= 0)
            continue;
        size_t n = 0;
        emq_status st = emq_consumer_step(t->c, got, 100, &n, &err);
        if (st == EMQ_ECLOSED)
            break; /* measure() stopped it */
        if (st != EMQ_OK)
            die("emq_consumer_step", err.message);
        ack_all(t->c, got, n);
    }
    close(ep);
    return NULL;
}

static void *run_main(void *arg) {
    consumer_thread *t = arg;
    emq_error err;
    if (emq_consumer_run(t->c, &err) != EMQ_OK)
        die("emq_consumer_run", err.message);
    return NULL;
}

static void *hiredis_block_main(void *arg) {
    consumer_thread *t = arg;
    redisContext *c = connect_server();
    char ids[100][48];
    size_t nacks = 0;
    while (!atomic_load(&t->quit)) {
        if (nacks) {
            const char *argv[103] = {"XACK", STREAM, t->group};
            for (size_t i = 0; i < nacks; i++)
                argv[3 + i] = ids[i];
            redisAppendCommandArgv(c, (int)(3 + nacks), argv, NULL);
        }
        const char *read_argv[] = {"XREADGROUP", "GROUP", t->group, "h",
                                   "COUNT",      "100",   "BLOCK",  "200",
                                   "STREAMS",    STREAM,  ">"};
        redisAppendCommandArgv(c, 11, read_argv, NULL);
        redisReply *r;
        if (nacks) {
            if (redisGetReply(c, (void **)&r) != REDIS_OK)
                die("XACK", c->errstr);
            freeReplyObject(r);
            nacks = 0;
        }
        if (redisGetReply(c, (void **)&r) != REDIS_OK)
            die("XREADGROUP", c->errstr);
        if (r->type == REDIS_REPLY_ARRAY && r->elements == 1) {
            redisReply *entries = r->element[0]->element[1];
            for (size_t i = 0; i < entries->elements && nacks < 100; i++) {
                redisReply *e = entries->element[i];
                redisReply *f = e->element[1];
                if (f->type == REDIS_REPLY_ARRAY && f->elements >= 2)
                    sample(f->element[1]->str, f->element[1]->len);
                snprintf(ids[nacks++], sizeof ids[0], "%s", e->element[0]->str);
            }
        }
        freeReplyObject(r);
    }
    redisFree(c);
    return NULL;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void measure(redisContext *admin, client kind) {
    char group[32];
    snprintf(group, sizeof group, "lat-%s", names[kind]);
    static consumer_thread t;
    memset(&t, 0, sizeof t);
    t.kind = kind;
    t.group = group;
    emq_error err;
    if (kind == HIREDIS) {
        admin_command(admin, "XGROUP CREATE " STREAM " %s $ MKSTREAM", group);
        pthread_create(&t.thread, NULL, hiredis_block_main, &t);
    } else {
        emq_conf_t *conf = lat_conf(group);
        if (emq_consumer_new(conf, kind == RUN ? run_handler : NULL, NULL, &t.c,
                             &err) != EMQ_OK)
            die("emq_consumer_new", err.message);
        emq_conf_destroy(conf);
        pthread_create(&t.thread, NULL, kind == RUN ? run_main : pull_main, &t);
    }
    atomic_store(&nsamples, 0);
    atomic_store(&producing, 1);
    pthread_t producer;
    pthread_create(&producer, NULL, producer_main, NULL);
    sleep(1); /* warm-up: connect, door, first reads */
    atomic_store(&measuring, 1);
    sleep((unsigned)seconds);
    atomic_store(&measuring, 0);
    atomic_store(&producing, 0);
    pthread_join(producer, NULL);
    usleep(200000);
    atomic_store(&t.quit, 1);
    if (t.c != NULL)
        emq_consumer_stop(t.c);
    pthread_join(t.thread, NULL);
    if (t.c != NULL) {
        emq_consumer_close(t.c, 2000, &err);
        emq_consumer_destroy(t.c);
    }
    long n = atomic_load(&nsamples);
    if (n > MAX_SAMPLES)
        n = MAX_SAMPLES;
    qsort(samples, (size_t)n, sizeof *samples, cmp_double);
    double p50 = n ? samples[n / 2] : 0, p99 = n ? samples[n * 99 / 100] : 0,
           p999 = n ? samples[n * 999 / 1000] : 0,
           worst = n ? samples[n - 1] : 0;
    printf("| %s | %ld | %.0f | %.0f | %.0f | %.0f |\n", names[kind], n, p50,
           p99, p999, worst);
    fflush(stdout);
    admin_command(admin, "XGROUP DESTROY " STREAM " %s", group);
}

int main(int argc, char **argv) {
    bench_name = "bench_latency";
    if (argc > 1)
        rate = atol(argv[1]);
    if (argc > 2)
        seconds = atoi(argv[2]);
    if (argc > 3 || rate < 1 || rate > 200000 || seconds < 1) {
        fprintf(stderr, "usage: bench_latency [rate] [seconds]\n");
        return 2;
    }
    samples = malloc(MAX_SAMPLES * sizeof *samples);
    if (samples == NULL)
        die("malloc", "out of memory");
    start_server(0);
    snprintf(url, sizeof url, "unix://%s", sock_path);
    redisContext *admin = connect_server();
    admin_command(admin, "DEL %s", STREAM);
    printf("XADD-to-handler latency at %ld entries/s, %d s per client "
           "(after 1 s warm-up), microseconds\n\n",
           rate, seconds);
    printf("| client | samples | p50 | p99 | p99.9 | max |\n");
    printf("| --- | ---: | ---: | ---: | ---: | ---: |\n");
    for (int k = 0; k < NCLIENTS; k++)
        measure(admin, (client)k);
    redisFree(admin);
    free(samples);
    return 0;
}
