/* SPDX-License-Identifier: BSD-3-Clause */
/* ownership_helpers.h: helpers for the ownership and fault tests of issue
 * 10 (test_ownership.c, test_consumer_faults2.c, test_consumer_retry.c).
 *
 * A slow handler (sleeps, then records, then answers by value prefix), a
 * consumer thread that knows when its run returned, lease-token pieces of
 * this machine (host, boot id, PID-namespace inode, process start time),
 * and a few raw-server probes.
 */
#ifndef EMQ_TEST_OWNERSHIP_HELPERS_H
#define EMQ_TEST_OWNERSHIP_HELPERS_H

#include "integ/inspect_conn_helpers.h"

#include <fcntl.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/prctl.h>
#include <sys/stat.h>

/* ---- a child process ---------------------------------------------------- */

/* Forks: the child's pid in the parent, 0 in the child, which is killed
 * with its parent (PR_SET_PDEATHSIG) so that a failed test leaves none
 * behind. Output is flushed first so that none is written twice. */
static inline pid_t fork_child(void) {
    fflush(NULL);
    pid_t pid = fork();
    ASSERT(pid >= 0);
    if (pid == 0)
        prctl(PR_SET_PDEATHSIG, SIGKILL);
    return pid;
}

/* ---- a slow handler ---------------------------------------------------- */

typedef struct slow {
    recorder r;   /* first: record() takes it */
    int sleep_ms; /* per entry (only sleep_prefix ones if set) */
    char sleep_prefix[16];
    char retry_prefix[16]; /* EMQ_RETRY for values with this prefix */
    uint64_t retry_below;  /* ...only while deliveries < this (0: always) */
    char dead_prefix[16];  /* EMQ_DEAD for values with this prefix */
    atomic_int in_handler;
    atomic_int returned;         /* handler calls that returned */
    char consumers[REC_MAX][16]; /* entry->consumer of each record */
    int64_t at[REC_MAX];         /* now_ms() of each record */
    char last_id[EMQ_ID_MAX];    /* full ID of the last entry (the
                                    recorder keeps 31 bytes) */
} slow;

static inline int has_prefix(const char *v, const char *p) {
    return p[0] && strncmp(v, p, strlen(p)) == 0;
}

static inline emq_verdict slow_handle(void *opaque, const emq_entry *e,
                                      char *reason, size_t reason_size) {
    slow *s = opaque;
    atomic_fetch_add(&s->in_handler, 1);
    char v[32];
    snprintf(v, sizeof v, "%.*s", e->nfields ? (int)e->fields[0].value_len : 0,
             e->nfields ? e->fields[0].value : "");
    pthread_mutex_lock(&s->r.lock);
    size_t i = s->r.n < REC_MAX ? s->r.n : REC_MAX - 1;
    snprintf(s->consumers[i], sizeof s->consumers[i], "%s", e->consumer);
    snprintf(s->last_id, sizeof s->last_id, "%s", e->id);
    s->at[i] = now_ms();
    pthread_mutex_unlock(&s->r.lock);
    record(&s->r, e, reason, reason_size);
    if (s->sleep_ms > 0 &&
        (s->sleep_prefix[0] == '\0' || has_prefix(v, s->sleep_prefix)))
        usleep((useconds_t)s->sleep_ms * 1000);
    emq_verdict verdict = EMQ_ACK;
    if (has_prefix(v, s->retry_prefix) &&
        (s->retry_below == 0 || e->deliveries < s->retry_below)) {
        snprintf(reason, reason_size, "retry %s", v);
        verdict = EMQ_RETRY;
    } else if (has_prefix(v, s->dead_prefix)) {
        snprintf(reason, reason_size, "poison %s", v);
        verdict = EMQ_DEAD;
    }
    atomic_fetch_sub(&s->in_handler, 1);
    atomic_fetch_add(&s->returned, 1);
    return verdict;
}

static inline void slow_init(slow *s) {
    memset(s, 0, sizeof *s);
    recorder_init(&s->r);
}

/* How many records have value v. */
static inline int times_seen(recorder *r, const char *v) {
    pthread_mutex_lock(&r->lock);
    int n = 0;
    for (size_t i = 0; i < r->n; i++)
        if (strcmp(r->values[i], v) == 0)
            n++;
    pthread_mutex_unlock(&r->lock);
    return n;
}

/* A log callback that keeps nothing (for tests that provoke thousands of
 * warnings on purpose). */
static inline void quiet_log(void *opaque, emq_log_level level,
                             const char *message) {
    (void)opaque;
    (void)level;
    (void)message;
}

/* ---- a consumer thread that knows when run returned ------------------- */

typedef struct bg {
    pthread_t thread;
    emq_consumer_t *c;
    emq_status st;
    emq_error err;
    atomic_int done;
    int64_t ended_ms;
} bg;

static inline void *bg_main(void *arg) {
    bg *b = arg;
    b->st = emq_consumer_run(b->c, &b->err);
    b->ended_ms = now_ms();
    atomic_store(&b->done, 1);
    return NULL;
}

/* Makes a consumer from conf (destroyed here) with handler h(opaque) and
 * runs it on b. */
static inline emq_consumer_t *bg_start(bg *b, emq_conf_t *conf,
                                       emq_handler_fn h, void *opaque) {
    memset(b, 0, sizeof *b);
    emq_error err;
    memset(&err, 0, sizeof err);
    ASSERT_OK(emq_consumer_new(conf, h, opaque, &b->c, &err), &err);
    emq_conf_destroy(conf);
    ASSERT(pthread_create(&b->thread, NULL, bg_main, b) == 0);
    return b->c;
}

/* Waits (bounded: ms, scaled with the run, emq_test_ms) for run to
 * return; 1 when it did. */
static inline int bg_wait(bg *b, int ms) {
    int64_t end = now_ms() + emq_test_ms(ms);
    while (!atomic_load(&b->done) && now_ms() < end)
        usleep(5000);
    return atomic_load(&b->done);
}

/* Stops, joins (the run must return within ms) and returns the status. */
static inline emq_status bg_stop(bg *b, int ms) {
    emq_consumer_stop(b->c);
    if (!bg_wait(b, ms))
        FAIL("consumer run did not return within %d ms of a stop",
             emq_test_ms(ms));
    pthread_join(b->thread, NULL);
    return b->st;
}

/* Joins a run that already returned (bg_wait said so). */
static inline emq_status bg_join(bg *b) {
    pthread_join(b->thread, NULL);
    return b->st;
}

/* ---- conf with the short timings of the ownership tests ------------------ */

/* A consumer "w" of jobs/g for fault tests: block 100 ms, lease 5 s (so a
 * fault window of 1.5 s never touches the lease), claim idle 60 s. */
static inline emq_conf_t *fault_conf(const char *url) {
    emq_conf_t *conf = conf_for(url);
    conf_set(conf, "queue", "jobs");
    conf_set(conf, "group", "g");
    conf_set(conf, "consumer", "w");
    conf_set(conf, "start", "new");
    conf_set(conf, "block_ms", "100");
    conf_set(conf, "lease.ttl_ms", "5000");
    conf_set(conf, "claim.min_idle_ms", "60000");
    conf_set(conf, "claim.interval_ms", "200");
    conf_set(conf, P_RECONNECT_BASE, "50");
    conf_set(conf, P_RECONNECT_MAX, "400");
    return conf;
}

/* block 100 ms, lease 1400 ms, claim idle min_idle ms, beat every 100 ms. */
static inline emq_conf_t *own_conf(const emq_srv *s, const char *queue,
                                   const char *consumer, int min_idle_ms) {
    emq_conf_t *conf = consumer_conf(s, queue, "g", consumer, "new");
    char v[32];
    conf_set(conf, "lease.ttl_ms", "1400");
    snprintf(v, sizeof v, "%d", min_idle_ms);
    conf_set(conf, "claim.min_idle_ms", v);
    conf_set(conf, "claim.interval_ms", "100");
    return conf;
}

/* ---- raw probes --------------------------------------------------------- */

/* A string reply's text (or "" for nil) of GET key over the admin socket. */
static inline void raw_get(const emq_srv *s, const char *key, char *out,
                           size_t size) {
    int t = emq_srv_cmd(s, out, size, "GET", key, NULL);
    if (t != '$' || strcmp(out, "(nil)") == 0)
        out[0] = '\0';
}

static inline long long raw_int(const emq_srv *s, const char *a0,
                                const char *a1, const char *a2) {
    char out[256];
    int t = emq_srv_cmd(s, out, sizeof out, a0, a1, a2, NULL);
    return t == ':' ? atoll(out) : -1;
}

/* The value of "name:" in INFO section (copied), "" when missing. */
static inline void info_field(const emq_srv *s, const char *section,
                              const char *name, char *out, size_t size) {
    static char text[65536];
    out[0] = '\0';
    if (emq_srv_cmd(s, text, sizeof text, "INFO", section, NULL) < 0)
        return;
    char key[128];
    snprintf(key, sizeof key, "\n%s:", name);
    const char *p = strstr(text, key);
    if (p == NULL)
        return;
    p += strlen(key);
    size_t n = strcspn(p, "\r\n");
    if (n >= size)
        n = size - 1;
    memcpy(out, p, n);
    out[n] = '\0';
}

/* ---- this machine's process identity (lease tokens) -------------------- */

typedef struct ident {
    char host[128];
    char boot[64];
    char ns[32];
} ident;

/* The start time (clock ticks since boot, /proc/<pid>/stat field 22) of
 * pid, or 0 when unknown. */
static inline unsigned long long proc_start_ticks(pid_t pid) {
    char path[64], buf[2048];
    snprintf(path, sizeof path, "/proc/%ld/stat", (long)pid);
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        return 0;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return 0;
    buf[n] = '\0';
    char *p = strrchr(buf, ')');
    if (p == NULL)
        return 0;
    p++;
    /* Fields after the command: 3 (state) ... 22 (starttime). */
    for (int field = 3; field < 22 && p; field++) {
        p = strchr(p + 1, ' ');
    }
    return p ? strtoull(p + 1, NULL, 10) : 0;
}

/* Host name, boot id and PID-namespace inode of this process, as the
 * spec's token "<host>:<boot_id>:<pidns inode>:<pid>:<ticks>:<random>"
 * holds them. When token_sample is a live consumer's token with at least
 * six ':'-separated parts, its first three are used as they are (the exact
 * spelling the library writes); otherwise they come from /proc. */
static inline void local_ident(ident *id, const char *token_sample) {
    memset(id, 0, sizeof *id);
    gethostname(id->host, sizeof id->host - 1);
    int fd = open("/proc/sys/kernel/random/boot_id", O_RDONLY);
    if (fd >= 0) {
        ssize_t n = read(fd, id->boot, sizeof id->boot - 1);
        close(fd);
        if (n > 0)
            id->boot[n] = '\0';
        id->boot[strcspn(id->boot, "\r\n")] = '\0';
    }
    struct stat st;
    if (stat("/proc/self/ns/pid", &st) == 0)
        snprintf(id->ns, sizeof id->ns, "%lu", (unsigned long)st.st_ino);
    if (token_sample) {
        int parts = 1;
        for (const char *p = token_sample; *p; p++)
            parts += *p == ':';
        if (parts >= 6) {
            const char *a = token_sample, *b = strchr(a, ':');
            const char *c = strchr(b + 1, ':'), *d = strchr(c + 1, ':');
            snprintf(id->host, sizeof id->host, "%.*s", (int)(b - a), a);
            snprintf(id->boot, sizeof id->boot, "%.*s", (int)(c - b - 1),
                     b + 1);
            snprintf(id->ns, sizeof id->ns, "%.*s", (int)(d - c - 1), c + 1);
        }
    }
}

static inline void make_token(char *out, size_t size, const ident *id, long pid,
                              unsigned long long ticks) {
    int n = snprintf(out, size, "%s:%s:%s:%ld:%llu:00c0ffee00c0ffee", id->host,
                     id->boot, id->ns, pid, ticks);
    ASSERT(n > 0 && (size_t)n < size);
}

/* Forks a child that waits until *release_fd is closed, then exits; its
 * pid and start ticks are returned (the caller closes *release_fd and
 * reaps it, or kills it). */
static inline pid_t parked_child(int *release_fd, unsigned long long *ticks) {
    int fds[2];
    ASSERT(pipe(fds) == 0);
    fflush(NULL);
    pid_t pid = fork();
    ASSERT(pid >= 0);
    if (pid == 0) {
        close(fds[1]);
        char c;
        while (read(fds[0], &c, 1) > 0)
            ;
        _exit(0);
    }
    close(fds[0]);
    *release_fd = fds[1];
    int64_t end = now_ms() + emq_test_ms(2000);
    while ((*ticks = proc_start_ticks(pid)) == 0 && now_ms() < end)
        usleep(1000);
    ASSERT(*ticks != 0);
    return pid;
}

/* ---- file lines written by forked children ----------------------------- */

static inline void append_line(const char *path, const char *line) {
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND, 0600);
    if (fd < 0)
        return;
    char buf[256];
    int n = snprintf(buf, sizeof buf, "%s\n", line);
    if (write(fd, buf, (size_t)n) < 0) {
        /* best effort: the test sees the line missing */
    }
    close(fd);
}

/* Number of lines of path (0 when missing) and, when needle is not NULL,
 * how many of them equal it (in *matches). */
static inline int count_lines(const char *path, const char *needle,
                              int *matches) {
    char buf[65536];
    int fd = open(path, O_RDONLY);
    if (matches)
        *matches = 0;
    if (fd < 0)
        return 0;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return 0;
    buf[n] = '\0';
    int lines = 0;
    for (char *line = buf; *line;) {
        char *nl = strchr(line, '\n');
        if (nl)
            *nl = '\0';
        lines++;
        if (needle && matches && strcmp(line, needle) == 0)
            (*matches)++;
        if (!nl)
            break;
        line = nl + 1;
    }
    return lines;
}

/* Makes s a replica of master and waits (bounded) until it is in sync;
 * master NULL: s stops following (REPLICAOF NO ONE). */
static inline void replica_follow(emq_srv *s, const emq_srv *master) {
    char out[256], port[16];
    if (master == NULL) {
        ASSERT_EQ_INT(
            emq_srv_cmd(s, out, sizeof out, "REPLICAOF", "NO", "ONE", NULL),
            '+');
        return;
    }
    snprintf(port, sizeof port, "%d", emq_srv_port(master));
    ASSERT_EQ_INT(
        emq_srv_cmd(s, out, sizeof out, "REPLICAOF", "127.0.0.1", port, NULL),
        '+');
    char v[64];
    WAIT_UNTIL((info_field(s, "replication", "master_link_status", v, sizeof v),
                strcmp(v, "up") == 0),
               8000, "the replica to sync");
}

#endif /* EMQ_TEST_OWNERSHIP_HELPERS_H */
