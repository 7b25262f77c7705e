/* SPDX-License-Identifier: BSD-3-Clause */
/* worker.c: the worker role of the chaos harness (chaos --worker ...).
 *
 * One process, one echomq consumer in group "workers" of queue "chaos",
 * using nothing but echomq.h. Its arguments are key=value pairs:
 *
 *   name=chaos-<i>  id=<ledger worker id>  inc=<incarnation>  url=URL
 *   ledger=PATH  maxd=N  idle=MS  ttl=MS  backoff=MS  backoff_max=MS
 *   allow_unknown=0|1  [mode=run|pull]  [maxreply=BYTES]  [exact=0|1]
 *
 * (a regular worker has id i; an intruder started under a live worker's
 * name has id 100 + n and its own ledger). The handler writes two lines
 * per delivery to the ledger, opened with O_APPEND, each with one
 * write(2):
 *
 *   S <job> <deliveries> <entry-id> <id> <inc> <pid> <t-start>
 *   E <job> <deliveries> <entry-id> <id> <inc> <pid> <t-start> <t-end> <V>
 *
 * S before it does anything (so a handler killed mid-way is on record),
 * E just before it answers, with the verdict V: A (EMQ_ACK, a healthy job
 * done), R (EMQ_RETRY of a poison job: its "kind" field is "poison"), D
 * (EMQ_DEAD of a job whose "kind" field is "dead": the handler gives up)
 * or T (EMQ_RETRY asked by a healthy job whose "retries" field is at least
 * the delivery count: an intended re-delivery follows). A job whose "kind"
 * is "crash" gets its S line and then kills the worker's process at once
 * (SIGKILL; _exit when the worker is its PID namespace's init, which
 * ignores its own signals): the job that crashes its worker. In between it
 * sleeps the job's "ms" field (the handler duration drawn from the seed). Times
 * are CLOCK_MONOTONIC ms, one clock for every process, in every PID
 * namespace. SIGTERM asks the consumer to stop gracefully; the worker
 * prints its counters on stderr and exits 0, or 3 when the consumer
 * returned an error (the orchestrator counts that as a violation).
 *
 * retry.backoff_ms / retry.backoff_max_ms are set when backoff > 0 /
 * backoff_max > 0. A library that does not know them refuses them; with
 * allow_unknown=1 the worker then prints a warning and goes on without
 * (the orchestrator only passes it with --allow-unknown-conf).
 *
 * mode=pull drives the consumer with emq_consumer_poll (one entry at a
 * time) instead of emq_consumer_run: the same handler, then
 * emq_consumer_ack / _retry / _dead with its verdict; a settlement that
 * fails is printed (EMQ_ELOST: a peer took the entry) and counted in the
 * final line. SIGTERM stops it; emq_consumer_close then waits for the
 * settlements. maxreply=N sets resp.max_reply_bytes (0 or absent: the
 * library's default).
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
    int id;
    int inc;
    long pid;
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

static long field_number(const emq_field *f) {
    char v[24];
    if (f->value_len >= sizeof v)
        return 0;
    memcpy(v, f->value, f->value_len);
    v[f->value_len] = '\0';
    return strtol(v, NULL, 10);
}

/* The library's log lines on stderr, each stamped with chaos_now_ms()
 * (the ledger's clock), so that a broken promise can be laid beside what
 * the consumer said at the time. */
static void stamped_log(void *opaque, emq_log_level level,
                        const char *message) {
    (void)opaque;
    const char *name = level <= EMQ_LOG_ERROR     ? "error"
                       : level <= EMQ_LOG_WARNING ? "warning"
                       : level <= EMQ_LOG_INFO    ? "info"
                                                  : "debug";
    fprintf(stderr, "%lld echomq: %s: %s\n", (long long)chaos_now_ms(), name,
            message);
}

static emq_verdict handle(void *opaque, const emq_entry *e, char *reason,
                          size_t reason_size) {
    ledger *l = opaque;
    char job[32] = "?";
    int poison = 0, dead = 0, crash = 0;
    long ms = 0, retries = 0;
    for (size_t i = 0; i < e->nfields; i++) {
        const emq_field *f = &e->fields[i];
        if (field_is(f, "job") && f->value_len < sizeof job) {
            memcpy(job, f->value, f->value_len);
            job[f->value_len] = '\0';
        } else if (field_is(f, "kind")) {
            poison = f->value_len == 6 && memcmp(f->value, "poison", 6) == 0;
            dead = f->value_len == 4 && memcmp(f->value, "dead", 4) == 0;
            crash = f->value_len == 5 && memcmp(f->value, "crash", 5) == 0;
        } else if (field_is(f, "ms")) {
            ms = field_number(f);
        } else if (field_is(f, "retries")) {
            retries = field_number(f);
        }
    }
    long long t0 = (long long)chaos_now_ms();
    char line[256];
    int n = snprintf(line, sizeof line, "S %s %llu %s %d %d %ld %lld\n", job,
                     (unsigned long long)e->deliveries, e->id, l->id, l->inc,
                     l->pid, t0);
    if (n < 0 || (size_t)n >= sizeof line)
        n = snprintf(line, sizeof line, "S ? 0 ? %d %d %ld %lld\n", l->id,
                     l->inc, l->pid, t0);
    write_all(l->fd, line, (size_t)n);
    if (crash) {
        if (getpid() == 1)
            _exit(137);
        raise(SIGKILL);
    }
    chaos_sleep_ms(ms); /* resumes after EINTR; SIGSTOP just pauses it */
    char v = 'A';
    emq_verdict verdict = EMQ_ACK;
    if (poison) {
        snprintf(reason, reason_size, "poison job %s", job);
        v = 'R';
        verdict = EMQ_RETRY;
    } else if (dead) {
        snprintf(reason, reason_size, "job %s gives up", job);
        v = 'D';
        verdict = EMQ_DEAD;
    } else if (retries > 0 && e->deliveries <= (uint64_t)retries) {
        snprintf(reason, reason_size, "job %s asks retry %llu of %ld", job,
                 (unsigned long long)e->deliveries, retries);
        v = 'T';
        verdict = EMQ_RETRY;
    }
    n = snprintf(line, sizeof line, "E %s %llu %s %d %d %ld %lld %lld %c\n",
                 job, (unsigned long long)e->deliveries, e->id, l->id, l->inc,
                 l->pid, t0, (long long)chaos_now_ms(), v);
    if (n < 0 || (size_t)n >= sizeof line)
        n = snprintf(line, sizeof line, "E ? 0 ? %d %d %ld %lld 0 %c\n", l->id,
                     l->inc, l->pid, t0, v);
    write_all(l->fd, line, (size_t)n);
    return verdict;
}

static long settle_failed; /* pull mode: settlements refused */

/* Pull mode: poll one entry at a time, run the handler, settle it with
 * its verdict; until emq_consumer_stop (poll answers EMQ_ECLOSED), then
 * close (waiting up to 10 s for the settlements). Returns what close or
 * a fatal poll returned. */
static emq_status pull_loop(emq_consumer_t *c, ledger *l, const char *name,
                            emq_error *err) {
    for (;;) {
        emq_entry *e = NULL;
        size_t n = 0;
        emq_status st = emq_consumer_poll(c, &e, 1, 500, &n, err);
        if (st == EMQ_ECLOSED)
            break;
        if (st != EMQ_OK) {
            emq_error ignored;
            emq_consumer_close(c, 0, &ignored);
            return st;
        }
        if (n == 0)
            continue;
        char reason[256] = "";
        emq_verdict v = handle(l, e, reason, sizeof reason);
        emq_error serr;
        emq_status ss = v == EMQ_ACK ? emq_consumer_ack(c, e, &serr)
                        : v == EMQ_DEAD
                            ? emq_consumer_dead(c, e, reason, &serr)
                            : emq_consumer_retry(c, e, -1, reason, &serr);
        if (ss != EMQ_OK) {
            settle_failed++;
            fprintf(stderr, "chaos worker %s: settlement of %s: %s: %s\n", name,
                    e->id, emq_status_name(ss), serr.message);
        }
        emq_entry_free(e);
    }
    emq_status st = emq_consumer_close(c, 10000, err);
    fprintf(stderr, "chaos worker %s: pull mode: %ld settlements refused\n",
            name, settle_failed);
    return st;
}

static int set(emq_conf_t *conf, const char *name, const char *value) {
    emq_error err;
    if (emq_conf_set(conf, name, value, &err) != EMQ_OK) {
        fprintf(stderr, "chaos worker: %s: %s\n", name, err.message);
        return -1;
    }
    return 0;
}

static int set_optional(emq_conf_t *conf, const char *name, const char *value,
                        int allow_unknown) {
    emq_error err;
    if (emq_conf_set(conf, name, value, &err) == EMQ_OK)
        return 0;
    if (allow_unknown && strstr(err.message, "unknown configuration")) {
        fprintf(stderr,
                "chaos worker: WARNING: %s: %s; going on without it "
                "(--allow-unknown-conf)\n",
                name, err.message);
        return 0;
    }
    fprintf(stderr, "chaos worker: %s: %s\n", name, err.message);
    return -1;
}

static const char *arg(int argc, char **argv, const char *key) {
    size_t n = strlen(key);
    for (int i = 0; i < argc; i++)
        if (strncmp(argv[i], key, n) == 0 && argv[i][n] == '=')
            return argv[i] + n + 1;
    return NULL;
}

int chaos_worker_main(int argc, char **argv) {
    const char *name = arg(argc, argv, "name"), *url = arg(argc, argv, "url"),
               *path = arg(argc, argv, "ledger"),
               *maxd = arg(argc, argv, "maxd"), *idle = arg(argc, argv, "idle"),
               *ttl = arg(argc, argv, "ttl"),
               *backoff = arg(argc, argv, "backoff"),
               *backoff_max = arg(argc, argv, "backoff_max"),
               *id = arg(argc, argv, "id"), *inc = arg(argc, argv, "inc"),
               *allow = arg(argc, argv, "allow_unknown"),
               *mode = arg(argc, argv, "mode"),
               *maxreply = arg(argc, argv, "maxreply"),
               *exact = arg(argc, argv, "exact");
    if (!name || !url || !path || !maxd || !idle || !ttl || !backoff ||
        !backoff_max || !id || !inc || !allow) {
        fprintf(stderr, "chaos --worker name=N id=I inc=K url=U ledger=P "
                        "maxd=M idle=MS ttl=MS backoff=MS backoff_max=MS "
                        "allow_unknown=0|1\n");
        return 2;
    }
    int allow_unknown = strcmp(allow, "1") == 0;
    signal(SIGPIPE, SIG_IGN);
    char num[32];
    ledger l = {open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600),
                atoi(id), atoi(inc), (long)getpid()};
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
              set(conf, "log.level",
                  getenv("EMQ_CHAOS_LOG_LEVEL") ? getenv("EMQ_CHAOS_LOG_LEVEL")
                                                : "info") ||
              set(conf, "reconnect.backoff_min_ms", "50") ||
              set(conf, "reconnect.backoff_max_ms", "500") ||
              set(conf, "connect_timeout_ms", "1000") ||
              set(conf, "claim.min_idle_ms", idle) ||
              set(conf, "lease.ttl_ms", ttl);
    snprintf(num, sizeof num, "%d", CHAOS_BLOCK_MS);
    bad = bad || set(conf, "block_ms", num);
    snprintf(num, sizeof num, "%d", CHAOS_CLAIM_INTERVAL_MS);
    bad = bad || set(conf, "claim.interval_ms", num);
    snprintf(num, sizeof num, "%d", CHAOS_COMMAND_TIMEOUT_MS);
    bad = bad || set(conf, "command_timeout_ms", num);
    if (!bad && maxreply && atol(maxreply) > 0)
        bad = set(conf, "resp.max_reply_bytes", maxreply);
    if (!bad && exact && strcmp(exact, "1") == 0)
        bad = set(conf, "deliveries.exact", "1");
    if (!bad && atol(backoff) > 0)
        bad = set_optional(conf, "retry.backoff_ms", backoff, allow_unknown);
    if (!bad && atol(backoff_max) > 0)
        bad = set_optional(conf, "retry.backoff_max_ms", backoff_max,
                           allow_unknown);
    emq_conf_set_log(conf, stamped_log, NULL);
    emq_error err;
    emq_consumer_t *c = NULL;
    if (!bad && emq_consumer_new(
                    conf, mode && strcmp(mode, "pull") == 0 ? NULL : handle, &l,
                    &c, &err) != EMQ_OK) {
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
    /* Blocked since the fork (main.c, spawn_process): one that came
     * meanwhile stops the consumer now, before its run begins. */
    sigset_t term;
    sigemptyset(&term);
    sigaddset(&term, SIGTERM);
    sigprocmask(SIG_UNBLOCK, &term, NULL);
    fprintf(stderr,
            "chaos worker %s (id %s, incarnation %s, pid %ld) "
            "starting\n",
            name, id, inc, (long)getpid());
    /* A supervisor restarts a worker whose first connection failed (the
     * library's default: consumer start fails when the server cannot be
     * reached, docs/CONSUMER.md); here the worker does it itself, a few
     * times, so that a proxy fault at its start is not a worker death. */
    int pull = mode && strcmp(mode, "pull") == 0;
    emq_status st = pull ? pull_loop(c, &l, name, &err)
                         : emq_consumer_run(c, &err);
    for (int again = 0; again < 20 && st != EMQ_OK; again++) {
        emq_consumer_stats first;
        emq_consumer_stats_get(c, &first);
        int transport = st == EMQ_EIO || st == EMQ_ETIMEDOUT ||
                        st == EMQ_ECLOSED || st == EMQ_EPROTO;
        if (!transport || first.round_trips > 0)
            break;
        fprintf(stderr,
                "chaos worker %s: first connection failed (%s); "
                "starting again\n",
                name, err.message);
        usleep(500 * 1000);
        st = pull ? pull_loop(c, &l, name, &err) : emq_consumer_run(c, &err);
    }
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
