/* worker.c: the worker role of the chaos harness (chaos --worker ...).
 *
 * One process, one echomq consumer named chaos-<i> in group "workers" of
 * queue "chaos", using nothing but echomq.h. Its handler writes one line
 * per delivery to the ledger file <dir>/chaos-<i>.ledger, opened with
 * O_APPEND, before it answers:
 *
 *   <job> <deliveries> <entry-id> <worker> <monotonic-ms> <A|R>
 *
 * A is an acknowledgement (a normal job), R a retry (a poison job: its
 * "kind" field is "poison"). The line goes out with one write(2) before the
 * handler returns, so it is in the kernel even if the process is killed the
 * next instant: the ledger never misses a delivery that could have been
 * acknowledged. SIGTERM asks the consumer to stop gracefully; the worker
 * prints its counters on stderr and exits 0, or 3 when the consumer
 * returned an error (the orchestrator counts that as a violation).
 */
#include "chaos.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static emq_consumer_t *the_consumer;

static void on_signal(int sig) {
    (void)sig;
    if (the_consumer)
        emq_consumer_stop(the_consumer);
}

typedef struct ledger {
    int fd;
    int worker;
} ledger;

static int field_is(const emq_field *f, const char *name) {
    size_t n = strlen(name);
    return f->name_len == n && memcmp(f->name, name, n) == 0;
}

static void write_all(int fd, const char *p, size_t n) {
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            /* A ledger that cannot be written makes the run meaningless. */
            fprintf(stderr, "chaos worker: ledger write failed: %s\n",
                    strerror(errno));
            _exit(4);
        }
        p += w;
        n -= (size_t)w;
    }
}

static emq_verdict handle(void *opaque, const emq_entry *e, char *reason,
                          size_t reason_size) {
    ledger *l = opaque;
    char job[32] = "?";
    int poison = 0;
    for (size_t i = 0; i < e->nfields; i++) {
        const emq_field *f = &e->fields[i];
        if (field_is(f, "job") && f->value_len < sizeof job) {
            memcpy(job, f->value, f->value_len);
            job[f->value_len] = '\0';
        } else if (field_is(f, "kind")) {
            poison = f->value_len == 6 && memcmp(f->value, "poison", 6) == 0;
        }
    }
    char line[160];
    int n = snprintf(line, sizeof line, "%s %llu %s %d %lld %c\n", job,
                     (unsigned long long)e->deliveries, e->id, l->worker,
                     (long long)chaos_now_ms(), poison ? 'R' : 'A');
    if (n < 0 || (size_t)n >= sizeof line)
        n = snprintf(line, sizeof line, "? 0 ? %d 0 A\n", l->worker);
    write_all(l->fd, line, (size_t)n);
    if (poison) {
        snprintf(reason, reason_size, "poison job %s", job);
        return EMQ_RETRY;
    }
    return EMQ_ACK;
}

static int set(emq_conf_t *conf, const char *name, const char *value) {
    emq_error err;
    if (emq_conf_set(conf, name, value, &err) != EMQ_OK) {
        fprintf(stderr, "chaos worker: %s: %s\n", name, err.message);
        return -1;
    }
    return 0;
}

/* argv: <index> <url> <dir> <max_deliveries> */
int chaos_worker_main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "chaos --worker INDEX URL DIR MAX_DELIVERIES\n");
        return 2;
    }
    int index = atoi(argv[0]);
    const char *url = argv[1], *dir = argv[2], *maxd = argv[3];
    signal(SIGPIPE, SIG_IGN);
    char name[32], path[4096], num[32];
    snprintf(name, sizeof name, "chaos-%d", index);
    snprintf(path, sizeof path, "%s/%s.ledger", dir, name);
    ledger l = {open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600),
                index};
    if (l.fd < 0) {
        fprintf(stderr, "chaos worker: open %s: %s\n", path, strerror(errno));
        return 4;
    }
    emq_conf_t *conf = emq_conf_new();
    if (conf == NULL)
        return 4;
    int bad = set(conf, "url", url) || set(conf, "queue", CHAOS_QUEUE) ||
              set(conf, "group", CHAOS_GROUP) || set(conf, "consumer", name) ||
              set(conf, "start", "head") || set(conf, "count", "50") ||
              set(conf, "max_deliveries", maxd) ||
              set(conf, "log.level", "info") ||
              set(conf, "reconnect.backoff_min_ms", "50") ||
              set(conf, "reconnect.backoff_max_ms", "500") ||
              set(conf, "connect_timeout_ms", "1000");
    snprintf(num, sizeof num, "%d", CHAOS_BLOCK_MS);
    bad = bad || set(conf, "block_ms", num);
    snprintf(num, sizeof num, "%d", CHAOS_CLAIM_MIN_IDLE_MS);
    bad = bad || set(conf, "claim.min_idle_ms", num);
    snprintf(num, sizeof num, "%d", CHAOS_CLAIM_INTERVAL_MS);
    bad = bad || set(conf, "claim.interval_ms", num);
    snprintf(num, sizeof num, "%d", CHAOS_COMMAND_TIMEOUT_MS);
    bad = bad || set(conf, "command_timeout_ms", num);
    emq_error err;
    emq_consumer_t *c = NULL;
    if (!bad && emq_consumer_new(conf, handle, &l, &c, &err) != EMQ_OK) {
        fprintf(stderr, "chaos worker %s: %s\n", name, err.message);
        bad = 1;
    }
    emq_conf_destroy(conf);
    if (bad) {
        close(l.fd);
        return 3;
    }
    the_consumer = c;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    fprintf(stderr, "chaos worker %s (pid %ld) starting\n", name,
            (long)getpid());
    emq_status st = emq_consumer_run(c, &err);
    char stats[1024];
    emq_consumer_stats_json(c, stats, sizeof stats);
    if (st != EMQ_OK)
        fprintf(stderr, "chaos worker %s: run failed: %s: %s\n", name,
                emq_status_name(st), err.message);
    fprintf(stderr, "chaos worker %s stats %s\n", name, stats);
    the_consumer = NULL;
    emq_consumer_destroy(c);
    close(l.fd);
    return st == EMQ_OK ? 0 : 3;
}
