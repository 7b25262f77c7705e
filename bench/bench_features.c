/* SPDX-License-Identifier: BSD-3-Clause */
/* bench_features.c: what the work-queue features cost, side by side with
 * plain use, in one run against one private redis-server.
 *
 *   produce   N entries in batches of 100 (emq_produce_batch_ex): plain;
 *             each with its own idempotency key; each with a priority
 *             (levels 0..9 in turn): entries/s and client CPU per entry;
 *   consume   N entries by one consumer (run API, count 100, handler
 *             acknowledges at once): a plain queue; a group with limits
 *             that never bind (rate 10^8, in flight 10^6: every read goes
 *             through the grant script); a queue whose entries are all
 *             held by priority (every read takes them into the stream):
 *             entries/s.
 *
 * Usage: bench_features [entries]   (default 100000)
 */
#include "bench_conf.h"

#include <pthread.h>
#include <stdatomic.h>

static long entries = 100000;
static char url[200];

static emq_conf_t *conf_of(const char *queue) {
    return bench_conf_of(url, queue);
}

enum kind { PLAIN, DEDUP, PRIORITY };

/* Produces entries to queue, each of kind; rate and client CPU/entry. */
static void produce(const char *queue, enum kind kind, double *rate,
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
    static char keys[100][24];
    double t0 = now_s(), c0 = cpu_us();
    for (long done = 0; done < entries; done += 100) {
        for (int i = 0; i < 100; i++) {
            m[i] = (emq_message){&f, 1, NULL};
            o[i] = (emq_produce_opts)EMQ_PRODUCE_OPTS_INIT;
            if (kind == DEDUP) {
                int len = snprintf(keys[i], sizeof keys[i], "k%ld", done + i);
                o[i].dedup_key = keys[i];
                o[i].dedup_key_len = (size_t)len;
            } else if (kind == PRIORITY) {
                o[i].priority = (done + i) % 10;
            }
        }
        size_t written;
        if (emq_produce_batch_ex(p, m, kind == PLAIN ? NULL : o, 100, NULL,
                                 &written, &err) != EMQ_OK)
            die("produce", err.message);
    }
    double took = now_s() - t0;
    *rate = (double)entries / took;
    *cpu_us_per = (cpu_us() - c0) / (double)entries;
    emq_producer_destroy(p);
    emq_conf_destroy(conf);
}

typedef struct counted {
    atomic_long n;
    emq_consumer_t *c;
} counted;

static emq_verdict on_entry(void *opaque, const emq_entry *e, char *reason,
                            size_t size) {
    (void)e;
    (void)reason;
    (void)size;
    counted *k = opaque;
    if (atomic_fetch_add(&k->n, 1) + 1 >= entries)
        emq_consumer_stop(k->c);
    return EMQ_ACK;
}

/* Consumes every entry of queue with one consumer; entries/s. */
static double consume(const char *queue, int limited) {
    emq_conf_t *conf = conf_of(queue);
    bench_set(conf, "group", "g");
    bench_set(conf, "consumer", "c1");
    bench_set(conf, "start", "head");
    bench_set(conf, "count", "100");
    if (limited) {
        bench_set(conf, "rate.limit", "100000000");
        bench_set(conf, "group.max_in_flight", "1000000");
    }
    counted k = {0};
    emq_error err;
    if (emq_consumer_new(conf, on_entry, &k, &k.c, &err) != EMQ_OK)
        die("consumer", err.message);
    emq_conf_destroy(conf);
    double t0 = now_s();
    if (emq_consumer_run(k.c, &err) != EMQ_OK)
        die("consume", err.message);
    double took = now_s() - t0;
    emq_consumer_destroy(k.c);
    return (double)atomic_load(&k.n) / took;
}

int main(int argc, char **argv) {
    bench_name = "bench_features";
    if (argc > 1)
        entries = atol(argv[1]);
    if (argc > 2 || entries < 100) {
        fprintf(stderr, "usage: bench_features [entries]\n");
        return 2;
    }
    entries -= entries % 100;
    start_server(0);
    snprintf(url, sizeof url, "unix://%s", sock_path);
    double rate[3], cpu[3];
    produce("plain", PLAIN, &rate[0], &cpu[0]);
    produce("keyed", DEDUP, &rate[1], &cpu[1]);
    produce("prio", PRIORITY, &rate[2], &cpu[2]);
    static const char *const what[] = {"plain", "an idempotency key each",
                                       "a priority each (0..9)"};
    printf("| what | | | |\n| --- | ---: | ---: | ---: |\n");
    for (int i = 0; i < 3; i++)
        printf("| produce %ld, batches of 100, %s | %.0f entries/s | %.2f us "
               "client CPU/entry | %.2fx plain |\n",
               entries, what[i], rate[i], cpu[i], rate[i] / rate[0]);
    /* The plain queue again for the limited read: a second group. */
    double plain = consume("plain", 0);
    double limited = consume("keyed", 1);
    double held = consume("prio", 0);
    printf("| consume %ld, one consumer, count 100, plain | %.0f entries/s | "
           "| |\n",
           entries, plain);
    printf("| consume %ld, limits that never bind (the grant script) | %.0f "
           "entries/s | | %.2fx plain |\n",
           entries, limited, limited / plain);
    printf("| consume %ld, every entry held by priority | %.0f entries/s | | "
           "%.2fx plain |\n",
           entries, held, held / plain);
    return 0;
}
