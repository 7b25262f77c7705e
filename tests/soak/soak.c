/* SPDX-License-Identifier: BSD-3-Clause */
/* soak.c: one echomq consumer over millions of entries, measured.
 *
 *   soak [--entries N] [--baseline B] [--ahead A]
 *        (defaults: 5000000 entries, baseline 100000, ahead 20000)
 *
 * Starts a private redis-server (no persistence, unix socket only, in a
 * scratch folder under /tmp removed at the end) and runs, in this process:
 *   - one consumer (queue "soak", group "g", consumer "soak-1", start head,
 *     count 100, block_ms 100) on the main thread, whose handler checks the
 *     entry, counts it and answers EMQ_ACK;
 *   - a producer thread that keeps at most A entries ahead of the consumer
 *     (batches of 1000 through emq_produce_batch) and, every 100000
 *     entries, trims what the group no longer needs with the library's
 *     ack-aware retention (emq_admin_trim_acked), so the server's memory
 *     stays bounded too.
 * After B entries and after N entries the handler samples the process:
 * resident set size (VmRSS of /proc/self/status), open descriptors (the
 * entries of /proc/self/fd) and threads (Threads of /proc/self/status),
 * plus the server's used_memory; it also samples every 500000 entries for
 * the record. The run passes, exit status 0, when the RSS at N is within
 * 10% of the RSS at B, descriptors and threads did not grow, every entry
 * was handled once and acknowledged, and nothing is pending. Anything else
 * exits 1; a setup failure exits 2.
 */
#include "chaos.h"
#include "harness/server.h"

#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void chaos_set_tmpdir(const char *dir);

typedef struct sample {
    long long handled;
    long rss_kb;
    int fds;
    int threads;
    long long server_bytes;
} sample;

static long long entries = 5000000, baseline = 100000, ahead = 20000;
static emq_consumer_t *consumer;
static emq_srv *server;
static sample base, end;
static long long handled, bad_entries;
static volatile long long produced;
static int producer_failed;
static char producer_why[300];

static long status_field(const char *name) {
    FILE *f = fopen("/proc/self/status", "r");
    if (f == NULL)
        return -1;
    char line[256];
    size_t n = strlen(name);
    long v = -1;
    while (fgets(line, sizeof line, f))
        if (strncmp(line, name, n) == 0 && line[n] == ':') {
            v = strtol(line + n + 1, NULL, 10);
            break;
        }
    fclose(f);
    return v;
}

static int count_fds(void) {
    DIR *d = opendir("/proc/self/fd");
    if (d == NULL)
        return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        if (e->d_name[0] != '.')
            n++;
    closedir(d);
    return n - 1; /* the descriptor of the listing itself */
}

static long long server_memory(void) {
    char out[8192];
    if (emq_srv_cmd(server, out, sizeof out, "INFO", "memory", NULL) < 0)
        return -1;
    const char *p = strstr(out, "used_memory:");
    return p ? atoll(p + 12) : -1;
}

static void take(sample *s, const char *label) {
    s->handled = handled;
    s->rss_kb = status_field("VmRSS");
    s->fds = count_fds();
    s->threads = (int)status_field("Threads");
    s->server_bytes = server_memory();
    printf("soak: %-9s %9lld entries: rss %ld kB, fds %d, threads %d, "
           "server used_memory %lld bytes\n",
           label, s->handled, s->rss_kb, s->fds, s->threads, s->server_bytes);
    fflush(stdout);
}

static emq_verdict handle(void *opaque, const emq_entry *e, char *reason,
                          size_t reason_size) {
    (void)opaque;
    (void)reason;
    (void)reason_size;
    if (e->nfields != 1 || e->fields[0].value_len != 100 || e->deliveries != 1)
        bad_entries++;
    __atomic_fetch_add(&handled, 1, __ATOMIC_RELAXED);
    if (handled == baseline) {
        take(&base, "baseline");
    } else if (handled == entries) {
        take(&end, "end");
        emq_consumer_stop(consumer);
    } else if (handled % 500000 == 0) {
        sample s;
        take(&s, "sample");
    }
    return EMQ_ACK;
}

static emq_conf_t *make_conf(const char *url, emq_error *err) {
    emq_conf_t *conf = emq_conf_new();
    if (conf == NULL)
        return NULL;
    if (emq_conf_set(conf, "url", url, err) != EMQ_OK ||
        emq_conf_set(conf, "queue", "soak", err) != EMQ_OK ||
        emq_conf_set(conf, "group", "g", err) != EMQ_OK ||
        emq_conf_set(conf, "consumer", "soak-1", err) != EMQ_OK ||
        emq_conf_set(conf, "start", "head", err) != EMQ_OK ||
        emq_conf_set(conf, "count", "100", err) != EMQ_OK ||
        emq_conf_set(conf, "block_ms", "100", err) != EMQ_OK) {
        emq_conf_destroy(conf);
        return NULL;
    }
    return conf;
}

/* Keeps the stream just ahead of the consumer; trims behind it. */
static void *produce(void *arg) {
    const char *url = arg;
    emq_error err;
    emq_conf_t *conf = make_conf(url, &err);
    emq_producer_t *p = NULL;
    emq_admin_t *admin = NULL;
    if (conf == NULL || emq_producer_new(conf, &p, &err) != EMQ_OK ||
        emq_admin_new(conf, &admin, &err) != EMQ_OK) {
        snprintf(producer_why, sizeof producer_why, "%s", err.message);
        producer_failed = 1;
        goto out;
    }
    static char payload[101];
    memset(payload, 'x', 100);
    emq_field field = {"data", 4, payload, 100};
    enum { BATCH = 1000 };
    static emq_message msgs[BATCH];
    for (int i = 0; i < BATCH; i++)
        msgs[i] = (emq_message){&field, 1, NULL};
    long long next_trim = 100000;
    int64_t deadline = chaos_now_ms() + 3600 * 1000;
    while (produced < entries) {
        if (chaos_now_ms() > deadline) {
            snprintf(producer_why, sizeof producer_why, "took over an hour");
            producer_failed = 1;
            break;
        }
        long long done = __atomic_load_n(&handled, __ATOMIC_RELAXED);
        if (produced - done >= ahead) {
            chaos_sleep_ms(1);
            continue;
        }
        size_t n = entries - produced < BATCH ? (size_t)(entries - produced)
                                              : BATCH;
        size_t written = 0;
        if (emq_produce_batch(p, msgs, n, NULL, &written, &err) != EMQ_OK ||
            written != n) {
            snprintf(producer_why, sizeof producer_why, "%s", err.message);
            producer_failed = 1;
            break;
        }
        produced += (long long)n;
        if (produced >= next_trim) {
            emq_trim_result tr;
            if (emq_admin_trim_acked(admin, -1, -1, &tr, &err) != EMQ_OK) {
                snprintf(producer_why, sizeof producer_why, "trim: %s",
                         err.message);
                producer_failed = 1;
                break;
            }
            next_trim += 100000;
        }
    }
    /* Stay (with every connection open) until the consumer is done, so
     * the end sample sees the same threads and descriptors as the
     * baseline did. */
    while (!producer_failed &&
           __atomic_load_n(&handled, __ATOMIC_RELAXED) < entries &&
           chaos_now_ms() < deadline)
        chaos_sleep_ms(5);
out:
    if (producer_failed)
        emq_consumer_stop(consumer);
    emq_admin_destroy(admin);
    emq_producer_destroy(p);
    emq_conf_destroy(conf);
    return NULL;
}

static long long option(const char *flag, const char *v) {
    char *e;
    long long x = v ? strtoll(v, &e, 10) : -1;
    if (v == NULL || *e || x <= 0) {
        fprintf(stderr, "soak: %s needs a positive number\n", flag);
        exit(2);
    }
    return x;
}

int main(int argc, char **argv) {
    for (int i = 1; i < argc; i += 2) {
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(argv[i], "--entries"))
            entries = option(argv[i], v);
        else if (!strcmp(argv[i], "--baseline"))
            baseline = option(argv[i], v);
        else if (!strcmp(argv[i], "--ahead"))
            ahead = option(argv[i], v);
        else {
            fprintf(stderr, "usage: soak [--entries N] [--baseline B] "
                            "[--ahead A]\n");
            return 2;
        }
    }
    if (baseline >= entries) {
        fprintf(stderr, "soak: --baseline must be below --entries\n");
        return 2;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    signal(SIGPIPE, SIG_IGN);
    char dir[] = "/tmp/emq-soak-XXXXXX";
    if (mkdtemp(dir) == NULL) {
        perror("mkdtemp");
        return 2;
    }
    chaos_set_tmpdir(dir);
    emq_srv_opts so;
    memset(&so, 0, sizeof so);
    so.transport = EMQ_SRV_UNIX;
    server = emq_srv_start(&so);
    emq_error err;
    emq_conf_t *conf = make_conf(emq_srv_url(server), &err);
    if (conf == NULL ||
        emq_consumer_new(conf, handle, NULL, &consumer, &err) != EMQ_OK) {
        fprintf(stderr, "soak: %s\n", err.message);
        return 2;
    }
    emq_conf_destroy(conf);
    printf("soak: %lld entries through one consumer (baseline at %lld, "
           "producer at most %lld ahead)\n",
           entries, baseline, ahead);
    int64_t t0 = chaos_now_ms();
    pthread_t tid;
    if (pthread_create(&tid, NULL, produce, (void *)emq_srv_url(server))) {
        fprintf(stderr, "soak: cannot start the producer\n");
        return 2;
    }
    emq_status st = emq_consumer_run(consumer, &err);
    pthread_join(tid, NULL);
    double secs = (chaos_now_ms() - t0) / 1000.0;
    emq_consumer_stats stats;
    emq_consumer_stats_get(consumer, &stats);
    emq_consumer_destroy(consumer);
    char out[256];
    emq_srv_cmd(server, out, sizeof out, "XPENDING", "emq:{soak}", "g", NULL);
    long long pending = atoll(out);
    sample after;
    take(&after, "stopped");
    emq_srv_stop(server);
    char cmdline[128];
    snprintf(cmdline, sizeof cmdline, "rm -rf -- '%s'", dir);
    if (system(cmdline) != 0)
        fprintf(stderr, "soak: could not remove %s\n", dir);

    int ok = 1;
    double growth = base.rss_kb > 0
                        ? 100.0 * (double)(end.rss_kb - base.rss_kb) /
                              (double)base.rss_kb
                        : 0;
    printf("soak: %.1f s, %.0f entries/s; handled %lld, acked %llu, "
           "pending %lld, bad entries %lld\n",
           secs, secs > 0 ? (double)handled / secs : 0, handled,
           (unsigned long long)stats.acked, pending, bad_entries);
    printf("soak: rss %ld kB -> %ld kB (%+.1f%%), fds %d -> %d, threads %d "
           "-> %d, server used_memory %lld -> %lld bytes\n",
           base.rss_kb, end.rss_kb, growth, base.fds, end.fds, base.threads,
           end.threads, base.server_bytes, end.server_bytes);
    if (st != EMQ_OK) {
        printf("soak: FAIL: the consumer returned %s: %s\n",
               emq_status_name(st), err.message);
        ok = 0;
    }
    if (producer_failed) {
        printf("soak: FAIL: producer: %s\n", producer_why);
        ok = 0;
    }
    if (handled != entries || (long long)stats.acked != entries ||
        pending != 0 || bad_entries != 0) {
        printf("soak: FAIL: not every entry was handled once and "
               "acknowledged\n");
        ok = 0;
    }
    if (growth > 10.0 || growth < -10.0) {
        printf("soak: FAIL: rss moved more than 10%%\n");
        ok = 0;
    }
    if (end.fds > base.fds || end.threads > base.threads) {
        printf("soak: FAIL: descriptors or threads grew\n");
        ok = 0;
    }
    printf("soak: %s\n", ok ? "PASS" : "FAIL");
    return ok ? 0 : 1;
}
