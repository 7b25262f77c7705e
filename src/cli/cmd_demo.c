/* SPDX-License-Identifier: BSD-3-Clause */
/* cmd_demo.c: `echomq demo`, the whole story of echomq in one run.
 *
 * Starts a private redis-server (from PATH) on a unix socket in a new
 * temporary folder, produces --jobs jobs (100,000) of which --poison (5)
 * always fail, and runs --workers (4) worker processes, each one consumer
 * of group "demo" named demo-1..demo-N, each recording every job it
 * handled in its own ledger file before acknowledging it. Half-way it
 * kills demo-2 with SIGKILL: the entries it held are taken over by the
 * others once idle for --claim-idle ms (1000). Poison jobs fail each
 * delivery and end in the dead letters after 3 deliveries. The summary
 * counts produced, handled, duplicates (handled twice: crash recovery is
 * at-least-once), dead-lettered (read back from the dead-letter stream),
 * lost (neither handled nor dead-lettered: must be 0) and throughput. The
 * server is stopped by pid and the folder removed on every exit path,
 * Ctrl-C included. Exit 0 when nothing was lost, 1 otherwise.
 */
#include "cli.h"
#include "srvproc.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static const char *const VERB = "demo";
static const char *const QUEUE = "demo";
static const char *const GROUP = "demo";
#define MAX_WORKERS 64
#define MAX_DELIVERIES 3

static const cli_optdoc opts[] = {
    {O_JOBS, "N", "jobs to produce (default 100000)"},
    {O_WORKERS, "N",
     "worker processes (default 4), consumers demo-1..demo-N of group "
     "'demo'"},
    {O_POISON, "N",
     "jobs that always fail and end in the dead letters after 3 "
     "deliveries (default 5)"},
    {O_CLAIM_IDLE, "MS",
     "the others take over the killed worker's entries once idle this long "
     "(default 1000, at least 100)"},
    {O_WORK_US, "US", "simulated work per job, in microseconds (default 150)"},
    {O_SENTINEL, NULL,
     "a primary, two replicas and three Sentinels on loopback instead of "
     "one server; the jobs are confirmed by a replica, and half-way the "
     "Sentinels fail the primary over instead of a worker being killed"},
    {O_KEEP, NULL, "keep the temporary folder at the end"},
    CLI_OPTS_END,
};

CLI_VERB(
    demo, "a private server, 100,000 jobs, a crash and its recovery",
    "echomq demo [--jobs N] [--workers N] [--poison N]\n"
    "            [--claim-idle MS] [--work-us US] [--sentinel] [--keep]",
    "Starts a private redis-server (from PATH) on a unix socket in a\n"
    "temporary folder, produces the jobs, runs the worker processes, kills\n"
    "demo-2 with SIGKILL half-way and shows the others taking over its\n"
    "entries. Ends with a summary: produced, handled, duplicates (from the\n"
    "crash), dead-lettered, lost (must be 0) and throughput. Everything is\n"
    "removed at the end (also on Ctrl-C) unless --keep. No server or URL is\n"
    "needed: --url is ignored. With --sentinel the workers reach a primary\n"
    "with two replicas through three Sentinels (redis-sentinel:// URL), on\n"
    "loopback ports, and half-way the Sentinels fail the primary over: the\n"
    "workers follow the new primary and no confirmed job is lost.\n",
    opts, "Exit status: 0 when nothing was lost, 1 otherwise.\n");

/* ---- state shared by the cleanup paths ----------------------------------- */

static char dir[512]; /* the temporary folder */
/* The private servers: one, or (--sentinel) three data nodes, then three
 * Sentinels. */
#define MAX_SERVERS 6
static pid_t servers[MAX_SERVERS];
static int nservers;
static pid_t workers[MAX_WORKERS];
static int nworkers;
static volatile sig_atomic_t interrupted;
static int with_sentinel; /* --sentinel */

static void on_interrupt(int sig) { interrupted = sig; }

/* Removes every file of the flat folder, then the folder. */
static void remove_dir(void) {
    if (!dir[0])
        return;
    DIR *d = opendir(dir);
    if (d) {
        struct dirent *e;
        while ((e = readdir(d)) != NULL) {
            if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
                continue;
            char path[1024];
            snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
            unlink(path);
        }
        closedir(d);
    }
    rmdir(dir);
    dir[0] = '\0';
}

static void cleanup(int keep) {
    for (int i = 0; i < nworkers; i++)
        if (workers[i] > 0) {
            kill(workers[i], SIGKILL);
            waitpid(workers[i], NULL, 0);
            workers[i] = -1;
        }
    /* Sentinels first: none fails over a data node being stopped. */
    for (int i = nservers - 1; i >= 0; i--)
        if (servers[i] > 0) {
            srvproc_stop(servers[i], 3000);
            servers[i] = -1;
        }
    nservers = 0;
    if (keep && dir[0])
        fprintf(stderr, "echomq: demo folder kept: %s\n", dir);
    else
        remove_dir();
}

/* ---- the server ---------------------------------------------------------- */

static const char *const NO_SERVER =
    "redis-server is not on PATH; install it (scripts/deps.sh) or add its "
    "folder to PATH";

/* Writes dir/NAME.conf with the lines in body plus a dir and a log
 * file, and starts redis-server on it (mode "--sentinel" or NULL) as
 * server number nservers (tools/srvproc.c starts and stops the process),
 * then waits until url answers (a plain connection). */
static int spawn_server(const char *name, const char *body, const char *mode,
                        const char *url) {
    char conf_path[600], log_path[600];
    snprintf(conf_path, sizeof conf_path, "%s/%s.conf", dir, name);
    snprintf(log_path, sizeof log_path, "%s/%s.log", dir, name);
    FILE *f = fopen(conf_path, "w");
    if (f == NULL)
        return cli_err(CLI_FAIL, "cannot write %s: %s", conf_path,
                       strerror(errno));
    /* Paths quoted: TMPDIR may hold spaces (redis.conf splits on them). */
    char qdir[1300], qlog[1300];
    fprintf(f, "%sdir %s\nlogfile %s\ndaemonize no\n", body,
            srvproc_quote(dir, qdir, sizeof qdir),
            srvproc_quote(log_path, qlog, sizeof qlog));
    fclose(f);
    char prog[600];
    if (srvproc_program(NULL, "redis-server", prog, sizeof prog) != 0)
        return cli_err(CLI_FAIL, "%s", NO_SERVER);
    /* A process group of its own: Ctrl-C reaches us, and we stop it in
     * order. */
    srvproc_opts o = {prog, conf_path, NULL, NULL, 1, mode};
    char why[200];
    pid_t pid = srvproc_spawn(&o, why, sizeof why);
    if (pid < 0)
        return cli_err(CLI_FAIL, "%s", why);
    int me = nservers++;
    servers[me] = pid;
    emq_conf_t *conf = emq_conf_new();
    if (conf == NULL || emq_conf_set(conf, "url", url, NULL) != EMQ_OK) {
        emq_conf_destroy(conf);
        return cli_err(CLI_FAIL, "cannot configure %s", url);
    }
    int rc = CLI_FAIL;
    for (int waited = 0; waited < 10000 && !interrupted; waited += 50) {
        int status;
        if (waitpid(pid, &status, WNOHANG) == pid) {
            servers[me] = -1;
            if (WIFEXITED(status) && WEXITSTATUS(status) == 127)
                cli_err(CLI_FAIL, "%s", NO_SERVER);
            else
                cli_err(CLI_FAIL,
                        "redis-server exited at start; see its "
                        "log (run with --keep): %s",
                        log_path);
            break;
        }
        emq_conn_t *c;
        if (emq_conn_new(conf, &c, NULL) == EMQ_OK) {
            emq_conn_destroy(c);
            rc = CLI_OK;
            break;
        }
        usleep(50000);
    }
    if (rc != CLI_OK && servers[me] > 0)
        cli_err(CLI_FAIL, "redis-server did not answer on %s within 10 s", url);
    emq_conf_destroy(conf);
    return rc;
}

/* Starts one redis-server on dir/redis.sock; url receives its URL. */
static int start_server(char *url, size_t url_size) {
    char sock[600], qsock[1300], body[1500];
    snprintf(sock, sizeof sock, "%s/redis.sock", dir);
    snprintf(body, sizeof body,
             "port 0\nunixsocket %s\nunixsocketperm 700\n"
             "save \"\"\nappendonly no\n",
             srvproc_quote(sock, qsock, sizeof qsock));
    snprintf(url, url_size, "unix://%s", sock);
    return spawn_server("redis", body, NULL, url);
}

/* ---- --sentinel: a primary, two replicas, three Sentinels ---------------- */

/* The master name the demo's Sentinels watch. */
static const char *const MASTER = "demo";

/* A TCP port on 127.0.0.1 that was free a moment ago (0 when none). */
static int free_port(void) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    int port = 0;
    if (fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof a) == 0 &&
        getsockname(fd, (struct sockaddr *)&a, &len) == 0)
        port = ntohs(a.sin_port);
    if (fd >= 0)
        close(fd);
    return port;
}

/* The reply to one command sent to 127.0.0.1:port on a connection of
 * its own (NULL when it could not be asked). Caller frees. */
static emq_reply *ask_port(int port, int argc, const char **argv) {
    char url[64];
    snprintf(url, sizeof url, "redis://127.0.0.1:%d", port);
    emq_conf_t *conf = emq_conf_new();
    emq_conn_t *c = NULL;
    emq_reply *r = NULL;
    if (conf && emq_conf_set(conf, "url", url, NULL) == EMQ_OK &&
        emq_conn_new(conf, &c, NULL) == EMQ_OK &&
        emq_conn_command(c, argc, argv, NULL, &r, NULL) != EMQ_OK) {
        emq_reply_free(r);
        r = NULL;
    }
    emq_conn_destroy(c);
    emq_conf_destroy(conf);
    return r;
}

/* The length of the array reply of SENTINEL WHAT MASTER at the Sentinel
 * on port (-1 when it cannot be asked). */
static long long sentinel_count(int port, const char *what) {
    const char *argv[] = {"SENTINEL", what, MASTER};
    emq_reply *r = ask_port(port, 3, argv);
    long long n =
        emq_reply_kind(r) == EMQ_REPLY_ARRAY ? (long long)emq_reply_len(r) : -1;
    emq_reply_free(r);
    return n;
}

/* 1 when both replicas of the primary on port acknowledge its writes
 * (WAIT 2 100 answers 2). */
static int replicas_in_sync(int port) {
    const char *argv[] = {"WAIT", "2", "100"};
    emq_reply *r = ask_port(port, 3, argv);
    int ok = emq_reply_kind(r) == EMQ_REPLY_INTEGER &&
             emq_reply_integer(r) == 2;
    emq_reply_free(r);
    return ok;
}

/* The Sentinels' ports, for the failover half-way. */
static int sentinel_ports[3];

/* Starts the primary, its two replicas and three Sentinels watching it
 * (down-after 1000 ms) on free loopback ports, and waits (at most 60 s)
 * until each Sentinel knows both replicas and the other two Sentinels;
 * url receives the redis-sentinel:// URL. */
static int start_sentinels(char *url, size_t url_size) {
    int data[3];
    char body[600], name[32], one[64];
    int rc = CLI_OK;
    for (int i = 0; i < 3 && rc == CLI_OK; i++) {
        data[i] = free_port();
        /* No 5 s wait before a replica's first sync. */
        int n = snprintf(body, sizeof body,
                         "port %d\nbind 127.0.0.1\nsave \"\"\n"
                         "appendonly no\nrepl-diskless-sync-delay 0\n",
                         data[i]);
        if (i > 0)
            snprintf(body + n, sizeof body - (size_t)n,
                     "replicaof 127.0.0.1 %d\n", data[0]);
        snprintf(name, sizeof name, "node-%d", i + 1);
        snprintf(one, sizeof one, "redis://127.0.0.1:%d", data[i]);
        rc = data[i] > 0 ? spawn_server(name, body, NULL, one)
                         : cli_err(CLI_FAIL, "no free loopback port");
    }
    for (int i = 0; i < 3 && rc == CLI_OK; i++) {
        sentinel_ports[i] = free_port();
        snprintf(body, sizeof body,
                 "port %d\nbind 127.0.0.1\n"
                 "sentinel monitor %s 127.0.0.1 %d 2\n"
                 "sentinel down-after-milliseconds %s 1000\n"
                 "sentinel failover-timeout %s 10000\n",
                 sentinel_ports[i], MASTER, data[0], MASTER, MASTER);
        snprintf(name, sizeof name, "sentinel-%d", i + 1);
        snprintf(one, sizeof one, "redis://127.0.0.1:%d", sentinel_ports[i]);
        rc = sentinel_ports[i] > 0 ? spawn_server(name, body, "--sentinel", one)
                                   : cli_err(CLI_FAIL, "no free loopback port");
    }
    if (rc != CLI_OK)
        return rc;
    snprintf(url, url_size,
             "redis-sentinel://127.0.0.1:%d,127.0.0.1:%d,127.0.0.1:%d#%s",
             sentinel_ports[0], sentinel_ports[1], sentinel_ports[2], MASTER);
    printf("   primary 127.0.0.1:%d, replicas 127.0.0.1:%d and :%d; "
           "Sentinels at %s\n",
           data[0], data[1], data[2], url);
    fflush(stdout);
    /* Sentinels find the replicas through the primary's INFO and each
     * other through hello messages every 2 s. */
    for (int waited = 0; waited < 60000 && !interrupted; waited += 200) {
        int ready = replicas_in_sync(data[0]);
        for (int i = 0; i < 3 && ready; i++)
            ready = sentinel_count(sentinel_ports[i], "replicas") == 2 &&
                    sentinel_count(sentinel_ports[i], "sentinels") == 2;
        if (ready)
            return CLI_OK;
        usleep(200000);
    }
    return cli_err(CLI_FAIL, "the replicas did not sync, or the Sentinels "
                             "did not find each other, within 60 s");
}

/* The port of the primary the Sentinel on port names (0: unknown). */
static int primary_of(int port) {
    const char *argv[] = {"SENTINEL", "get-master-addr-by-name", MASTER};
    emq_reply *r = ask_port(port, 3, argv);
    size_t n = 0;
    const char *p =
        emq_reply_len(r) == 2 ? emq_reply_str(emq_reply_at(r, 1), &n) : NULL;
    char text[8] = "";
    if (p != NULL && n < sizeof text) {
        memcpy(text, p, n);
        text[n] = '\0';
    }
    emq_reply_free(r);
    return atoi(text);
}

/* Asks the Sentinel on sentinel_ports[0] for a failover, again while it
 * answers "not now" (INPROG, not ready), at most 10 s; 1 when it took the
 * request. */
static int ask_failover(void) {
    char url[64];
    snprintf(url, sizeof url, "redis://127.0.0.1:%d", sentinel_ports[0]);
    emq_conf_t *conf = emq_conf_new();
    emq_conn_t *c = NULL;
    int asked = 0;
    for (int tries = 0; tries < 50 && !asked && !interrupted; tries++) {
        if (c == NULL && conf && emq_conf_set(conf, "url", url, NULL) == EMQ_OK)
            emq_conn_new(conf, &c, NULL);
        const char *argv[] = {"SENTINEL", "FAILOVER", MASTER};
        emq_reply *r = NULL;
        asked = c && emq_conn_command(c, 3, argv, NULL, &r, NULL) == EMQ_OK &&
                emq_reply_kind(r) == EMQ_REPLY_STATUS;
        emq_reply_free(r);
        if (!asked)
            usleep(200000); /* "INPROG" or not ready: again */
    }
    emq_conn_destroy(c);
    emq_conf_destroy(conf);
    return asked;
}

/* Asks the Sentinels for a failover and says where the primary went. A
 * failover the Sentinel starts and then aborts (no replica it deems good
 * enough, a promotion not seen within its failover-timeout of 10 s, both
 * seen on a loaded machine) is asked for again, as an operator would: at
 * most three times, 15 s each. */
static void fail_over(void) {
    int before = primary_of(sentinel_ports[0]), after = before;
    int asked = 0;
    int64_t t0 = emq_clock_ms();
    for (int round = 0; round < 3 && after == before && !interrupted; round++) {
        if (!ask_failover())
            break;
        asked = 1;
        int64_t asked_at = emq_clock_ms();
        while (after == before && emq_clock_ms() - asked_at < 15000 &&
               !interrupted) {
            usleep(100000);
            after = primary_of(sentinel_ports[0]);
        }
    }
    if (after != before && after != 0)
        printf("== failover: the Sentinels moved the primary from "
               "127.0.0.1:%d to 127.0.0.1:%d in %.1f s\n",
               before, after, (double)(emq_clock_ms() - t0) / 1000.0);
    else
        printf("== failover: the Sentinels did not move the primary (%s)\n",
               asked ? "asked three times, 15 s each"
                     : "SENTINEL FAILOVER was refused");
    fflush(stdout);
}

/* ---- workers ------------------------------------------------------------- */

typedef struct worker_ctx {
    int ledger;   /* fd, O_APPEND */
    long work_us; /* simulated work per job */
} worker_ctx;

static emq_consumer_t *worker_consumer;

static void worker_stop(int sig) {
    (void)sig;
    if (worker_consumer)
        emq_consumer_stop(worker_consumer);
}

/* The job handler: a poison job fails every delivery; any other job is
 * recorded in the ledger (one write, so a SIGKILL never leaves half a
 * line), then acknowledged. The ledger line comes first: a crash between
 * the two makes a duplicate, never a loss. */
static emq_verdict work(void *opaque, const emq_entry *e, char *reason,
                        size_t reason_size) {
    worker_ctx *w = opaque;
    const char *job = NULL;
    size_t job_len = 0;
    int poison = 0;
    for (size_t i = 0; i < e->nfields; i++) {
        if (e->fields[i].name_len == 3 &&
            !memcmp(e->fields[i].name, "job", 3)) {
            job = e->fields[i].value;
            job_len = e->fields[i].value_len;
        } else if (e->fields[i].name_len == 6 &&
                   !memcmp(e->fields[i].name, "poison", 6)) {
            poison = 1;
        }
    }
    char line[64];
    if (job == NULL || job_len > 20)
        return EMQ_DEAD;
    if (poison) {
        snprintf(reason, reason_size, "poison job %.*s fails on purpose",
                 (int)job_len, job);
        return EMQ_RETRY;
    }
    if (w->work_us > 0)
        usleep((useconds_t)w->work_us); /* the "work" */
    int n = snprintf(line, sizeof line, "%.*s\n", (int)job_len, job);
    if (write(w->ledger, line, (size_t)n) != n) {
        snprintf(reason, reason_size, "ledger write failed");
        return EMQ_RETRY;
    }
    return EMQ_ACK;
}

/* The body of worker process i (1-based); never returns. */
static void worker_main(const char *url, int i, long long claim_idle,
                        long long work_us) {
    signal(SIGINT, SIG_IGN); /* the parent handles Ctrl-C */
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = worker_stop;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    char path[600], name[32], num[32];
    snprintf(path, sizeof path, "%s/ledger-%d.txt", dir, i);
    snprintf(name, sizeof name, "demo-%d", i);
    worker_ctx w = {open(path, O_WRONLY | O_CREAT | O_APPEND, 0600),
                    (long)work_us};
    if (w.ledger < 0)
        _exit(3);
    emq_conf_t *conf = emq_conf_new();
    emq_error err;
    int ok = conf != NULL;
    snprintf(num, sizeof num, "%lld", claim_idle);
    const char *props[][2] = {
        {"url", url},
        {"queue", QUEUE},
        {"group", GROUP},
        {"consumer", name},
        {"start", "head"},
        {"claim.min_idle_ms", num},
        {"claim.interval_ms", "250"},
        {"max_deliveries", "3"},
        {"block_ms", "250"},
        {"count", "100"},
        {"log.level", "error"},
    };
    for (size_t k = 0; ok && k < sizeof props / sizeof props[0]; k++)
        ok = emq_conf_set(conf, props[k][0], props[k][1], &err) == EMQ_OK;
    if (ok)
        ok = emq_consumer_new(conf, work, &w, &worker_consumer, &err) == EMQ_OK;
    emq_conf_destroy(conf);
    if (!ok) {
        fprintf(stderr, "echomq: demo worker %s: %s\n", name, err.message);
        _exit(1);
    }
    emq_status st = emq_consumer_run(worker_consumer, &err);
    if (st != EMQ_OK)
        fprintf(stderr, "echomq: demo worker %s: %s\n", name, err.message);
    emq_consumer_destroy(worker_consumer);
    close(w.ledger);
    _exit(st == EMQ_OK ? 0 : 1);
}

/* ---- ledgers ------------------------------------------------------------- */

typedef struct tally {
    long long jobs;
    unsigned char *seen;     /* per job: times handled (saturating) */
    long long unique, lines; /* unique jobs handled, ledger lines */
    long long per_worker[MAX_WORKERS];
    off_t offset[MAX_WORKERS]; /* bytes of each ledger already read */
    char partial[MAX_WORKERS][32];
} tally;

/* Reads what the ledgers gained since the last call. */
static void tally_update(tally *t) {
    for (int i = 0; i < nworkers; i++) {
        char path[600];
        snprintf(path, sizeof path, "%s/ledger-%d.txt", dir, i + 1);
        int fd = open(path, O_RDONLY);
        if (fd < 0)
            continue;
        char buf[65536];
        ssize_t n;
        while ((n = pread(fd, buf, sizeof buf, t->offset[i])) > 0) {
            t->offset[i] += n;
            for (ssize_t k = 0; k < n; k++) {
                size_t pl = strlen(t->partial[i]);
                if (buf[k] != '\n') {
                    if (pl + 1 < sizeof t->partial[i]) {
                        t->partial[i][pl] = buf[k];
                        t->partial[i][pl + 1] = '\0';
                    }
                    continue;
                }
                long long job = atoll(t->partial[i]);
                t->partial[i][0] = '\0';
                t->lines++;
                t->per_worker[i]++;
                if (job >= 0 && job < t->jobs) {
                    if (t->seen[job] == 0)
                        t->unique++;
                    if (t->seen[job] < 255)
                        t->seen[job]++;
                }
            }
        }
        close(fd);
    }
}

/* ---- the run ----------------------------------------------------------- */

/* A conf for the demo queue on url, or NULL with *err saying why (err may
 * be NULL). */
static emq_conf_t *queue_conf(const char *url, emq_error *err) {
    emq_conf_t *conf = emq_conf_new();
    if (conf == NULL) {
        if (err)
            snprintf(err->message, sizeof err->message, "out of memory");
        return NULL;
    }
    /* Behind Sentinel nothing more: a planned failover is followed from
     * its first step, and commands wait for its switch (docs/HA.md). */
    if (emq_conf_set(conf, "url", url, err) != EMQ_OK ||
        emq_conf_set(conf, "queue", QUEUE, err) != EMQ_OK) {
        emq_conf_destroy(conf);
        return NULL;
    }
    return conf;
}

/* Opens a producer (into *p) or, with p NULL, an admin handle (into *a) on
 * the demo queue of url. Returns CLI_OK, or CLI_FAIL after printing why. */
static int open_queue(const char *url, emq_producer_t **p, emq_admin_t **a) {
    emq_error err;
    emq_conf_t *conf = queue_conf(url, &err);
    emq_status st = EMQ_ENOMEM;
    if (conf)
        st = p ? emq_producer_new(conf, p, &err) : emq_admin_new(conf, a, &err);
    emq_conf_destroy(conf);
    if (st == EMQ_OK)
        return CLI_OK;
    return cli_err(CLI_FAIL, "demo: cannot %s: %s",
                   p ? "start the producer" : "inspect the queue", err.message);
}

static int produce_jobs(const char *url, long long jobs, long long poison,
                        unsigned char *is_poison) {
    emq_producer_t *p = NULL;
    if (open_queue(url, &p, NULL) != CLI_OK)
        return CLI_FAIL;
    emq_error err;
    /* Poison jobs spread evenly over the run. */
    for (long long k = 0; k < poison; k++)
        is_poison[(jobs / (poison + 1)) * (k + 1)] = 1;
    enum { BATCH = 1000 };
    static emq_message msgs[BATCH];
    static emq_field fields[BATCH][2];
    static char values[BATCH][24];
    int rc = CLI_OK;
    for (long long base = 0; base < jobs && rc == CLI_OK && !interrupted;
         base += BATCH) {
        size_t n = (size_t)(jobs - base < BATCH ? jobs - base : BATCH);
        for (size_t k = 0; k < n; k++) {
            int len = snprintf(values[k], sizeof values[k], "%lld",
                               base + (long long)k);
            fields[k][0] = (emq_field){"job", 3, values[k], (size_t)len};
            fields[k][1] = (emq_field){"poison", 6, "1", 1};
            msgs[k] = (emq_message){
                fields[k], is_poison[base + (long long)k] ? 2u : 1u, NULL};
        }
        size_t written = 0;
        emq_status st = emq_produce_batch(p, msgs, n, NULL, &written, &err);
        if (st != EMQ_OK)
            rc = cli_err(CLI_FAIL, "demo: producing failed: %s", err.message);
    }
    emq_producer_destroy(p);
    return rc;
}

/* Counts the dead letters of poison jobs; marks them in dead[]. */
static int count_dead(const char *url, long long jobs, unsigned char *dead,
                      long long *ndead, long long *other) {
    emq_admin_t *a = NULL;
    *ndead = *other = 0;
    if (open_queue(url, NULL, &a) != CLI_OK)
        return CLI_FAIL;
    memset(dead, 0, (size_t)jobs);
    emq_dead_letter *l = NULL;
    size_t n = 0;
    emq_error err;
    emq_status st = emq_admin_dead_list(a, 1000000, &l, &n, &err);
    emq_admin_destroy(a);
    if (st != EMQ_OK)
        return cli_err(CLI_FAIL, "demo: cannot list the dead letters: %s",
                       err.message);
    for (size_t i = 0; i < n; i++) {
        long long job = -1;
        for (size_t k = 0; k < l[i].nfields; k++)
            if (l[i].fields[k].name_len == 3 &&
                !memcmp(l[i].fields[k].name, "job", 3)) {
                char v[24] = "";
                size_t vl = l[i].fields[k].value_len < 23
                                ? l[i].fields[k].value_len
                                : 23;
                memcpy(v, l[i].fields[k].value, vl);
                job = atoll(v);
            }
        if (job >= 0 && job < jobs && !dead[job]) {
            dead[job] = 1;
            (*ndead)++;
        } else {
            (*other)++;
        }
    }
    emq_dead_letters_free(l, n);
    return CLI_OK;
}

/* Entries consumer name holds right now (-1 when it cannot be asked). */
static long long held_by(const char *url, const char *name) {
    emq_conf_t *conf = queue_conf(url, NULL);
    emq_admin_t *a = NULL;
    long long n = -1;
    if (conf && emq_admin_new(conf, &a, NULL) == EMQ_OK) {
        emq_pending_entry *e = NULL;
        size_t k = 0;
        if (emq_admin_pending(a, GROUP, name, 0, 1000000, &e, &k, NULL) ==
            EMQ_OK)
            n = (long long)k;
        emq_free_array(e);
    }
    emq_admin_destroy(a);
    emq_conf_destroy(conf);
    return n;
}

/* One run of the demo: what it watches and reports. */
typedef struct demo_run {
    char url[700]; /* the private server */
    long long jobs, poison, claim_idle;
    unsigned char *is_poison, *dead; /* per job */
    tally t;                         /* what the workers' ledgers say */
    long long ndead, other_dead;     /* dead letters: poison, and others */
    int64_t t_start, t_done;         /* the workers' start, all done */
    int tty;                         /* stderr is a terminal */
} demo_run;

/* Half-way, kills demo-2 and says how much it held; then, once its
 * entries were all claimed by the others, says so (once). */
static void crash_and_recovery(demo_run *r, int *killed, int *recovered,
                               long long *held_at_kill, int64_t now,
                               int64_t *last_check) {
    long long needed = r->jobs - r->poison;
    if (with_sentinel) { /* the failover instead of the crash */
        if (!*killed && r->t.unique >= needed / 2) {
            if (r->tty)
                fputs("\r\033[K", stderr);
            printf("== half-way (%lld handled): SENTINEL FAILOVER while the "
                   "workers run\n",
                   r->t.unique);
            fflush(stdout);
            fail_over();
            *killed = *recovered = 1;
        }
        (void)held_at_kill;
        (void)now;
        (void)last_check;
        return;
    }
    if (!*killed && r->t.unique >= needed / 2) {
        long long before = held_by(r->url, "demo-2");
        kill(workers[1], SIGKILL);
        waitpid(workers[1], NULL, 0);
        workers[1] = -1;
        *killed = 1;
        *held_at_kill = held_by(r->url, "demo-2");
        if (*held_at_kill < 0)
            *held_at_kill = before;
        if (r->tty)
            fputs("\r\033[K", stderr);
        printf("== half-way (%lld handled): killed demo-2 with SIGKILL "
               "while it held %lld unacknowledged entries\n",
               r->t.unique, *held_at_kill);
        fflush(stdout);
    }
    if (*killed && !*recovered && *held_at_kill >= 0 && nworkers >= 2 &&
        now - *last_check >= 200) {
        *last_check = now;
        if (held_by(r->url, "demo-2") == 0) {
            *recovered = 1;
            if (r->tty)
                fputs("\r\033[K", stderr);
            printf("== recovered: the other workers claimed all %lld "
                   "entries demo-2 held (idle > %lld ms)\n",
                   *held_at_kill, r->claim_idle);
            fflush(stdout);
        }
    }
}

/* Watches the workers until every job is handled or dead-lettered, a
 * deadline, or an interrupt: the crash half-way, the recovery, progress
 * on stderr. Returns CLI_OK or CLI_FAIL. */
static int watch(demo_run *r) {
    int64_t last_print = 0, last_check = 0;
    /* With one worker nobody can recover (a failover needs no other). */
    int killed = nworkers < 2 && !with_sentinel;
    int recovered = 0;
    long long held_at_kill = -1, needed = r->jobs - r->poison;
    int64_t deadline = r->t_start + 120000 + r->jobs / 10;
    while (!interrupted) {
        usleep(20000);
        tally_update(&r->t);
        int64_t now = emq_clock_ms();
        crash_and_recovery(r, &killed, &recovered, &held_at_kill, now,
                           &last_check);
        if (r->t.unique >= needed) {
            /* Every good job is handled; wait for the poison ones. */
            if (count_dead(r->url, r->jobs, r->dead, &r->ndead,
                           &r->other_dead) != CLI_OK)
                return CLI_FAIL;
            if (r->ndead >= r->poison) {
                r->t_done = now;
                return CLI_OK;
            }
        }
        if (now > deadline) {
            cli_err(CLI_FAIL,
                    "demo: not done after %lld s; reporting what "
                    "is missing",
                    (long long)(now - r->t_start) / 1000);
            return CLI_OK;
        }
        if (!cli_g.quiet && now - last_print >= (r->tty ? 100 : 1000)) {
            double secs = (double)(now - r->t_start) / 1000.0;
            double rate = secs > 0 ? (double)r->t.unique / secs : 0.0;
            if (r->tty)
                fprintf(stderr,
                        "\r\033[K   handled %lld/%lld  duplicates "
                        "%lld  dead %lld/%lld  %.0f jobs/s",
                        r->t.unique, needed, r->t.lines - r->t.unique, r->ndead,
                        r->poison, rate);
            else
                fprintf(stderr,
                        "   handled %lld/%lld  duplicates %lld  "
                        "%.0f jobs/s\n",
                        r->t.unique, needed, r->t.lines - r->t.unique, rate);
            last_print = now;
        }
    }
    return CLI_OK;
}

/* Starts the workers (demo-1..demo-N). Returns CLI_OK or CLI_FAIL. */
static int start_workers(const demo_run *r, long long work_us) {
    for (int i = 0; i < nworkers; i++) {
        pid_t pid = fork();
        if (pid < 0)
            return cli_err(CLI_FAIL, "fork failed: %s", strerror(errno));
        if (pid == 0)
            worker_main(r->url, i + 1, r->claim_idle, work_us);
        workers[i] = pid;
    }
    printf("== started %d workers: consumers demo-1..demo-%d of group "
           "'%s' (claim idle %lld ms, max deliveries %d)\n",
           nworkers, nworkers, GROUP, r->claim_idle, MAX_DELIVERIES);
    return CLI_OK;
}

/* Stops the workers gracefully (SIGTERM, then SIGKILL after 5 s). */
static void stop_workers(void) {
    for (int i = 0; i < nworkers; i++)
        if (workers[i] > 0)
            kill(workers[i], SIGTERM);
    for (int i = 0; i < nworkers; i++)
        if (workers[i] > 0) {
            srvproc_reap(workers[i], 5000);
            workers[i] = -1;
        }
}

/* The final count and the summary table; the exit code of the demo. */
static int summary(demo_run *r, int rc) {
    long long lost = 0, first_lost = -1;
    for (long long j = 0; j < r->jobs; j++)
        if (r->t.seen[j] == 0 && !r->dead[j]) {
            if (first_lost < 0)
                first_lost = j;
            lost++;
        }
    double secs = (double)(r->t_done - r->t_start) / 1000.0;
    printf("\n== summary\n");
    printf("   %-34s %10lld\n", "produced", r->jobs);
    printf("   %-34s %10lld\n", "handled (distinct jobs)", r->t.unique);
    printf("   %-34s %10lld\n",
           with_sentinel ? "duplicates (failover)"
                         : "duplicates (crash recovery)",
           r->t.lines - r->t.unique);
    printf("   %-34s %10lld\n", "dead-lettered (poison jobs)", r->ndead);
    printf("   %-34s %10lld%s\n", "lost", lost, lost ? "   <-- NOT OK" : "");
    if (with_sentinel)
        printf("   (the duplicates were in the workers' hands when the "
               "primary moved: their reads or acks were on the old primary "
               "only, so the new one handed them out again)\n");
    printf("   %-34s %10.0f jobs/s (%.2f s)\n", "throughput",
           secs > 0 ? (double)r->t.unique / secs : 0.0, secs);
    for (int i = 0; i < nworkers; i++) {
        char label[64];
        snprintf(label, sizeof label, "  by demo-%d%s", i + 1,
                 i == 1 && nworkers > 1 && !with_sentinel ? " (killed half-way)"
                                                          : "");
        printf("   %-34s %10lld\n", label, r->t.per_worker[i]);
    }
    fflush(stdout);
    if (rc != CLI_OK)
        return rc;
    if (lost > 0)
        return cli_err(CLI_FAIL,
                       "demo: %lld jobs lost (the first is job "
                       "%lld)",
                       lost, first_lost);
    if (r->other_dead > 0)
        return cli_err(CLI_FAIL, "demo: %lld unexpected dead letters",
                       r->other_dead);
    printf("== ok: every job was handled or dead-lettered; nothing lost\n");
    return CLI_OK;
}

/* The whole demo: folder, server, jobs, workers, crash, summary. */
static int run(long long jobs, long long poison, long long claim_idle,
               long long work_us) {
    static demo_run r; /* the tally is large */
    memset(&r, 0, sizeof r);
    r.jobs = jobs;
    r.poison = poison;
    r.claim_idle = claim_idle;
    r.tty = isatty(STDERR_FILENO);
    const char *tmp = getenv("TMPDIR");
    snprintf(dir, sizeof dir, "%s/echomq-demo.XXXXXX",
             tmp && *tmp ? tmp : "/tmp");
    if (mkdtemp(dir) == NULL) {
        dir[0] = '\0';
        return cli_err(CLI_FAIL, "cannot create a temporary folder: %s",
                       strerror(errno));
    }
    printf("== echomq demo: %lld jobs, %d workers, %lld poison jobs\n", jobs,
           nworkers, poison);
    printf("   private %s in %s\n",
           with_sentinel ? "primary, two replicas and three Sentinels"
                         : "redis-server",
           dir);
    fflush(stdout);
    int rc = with_sentinel ? start_sentinels(r.url, sizeof r.url)
                           : start_server(r.url, sizeof r.url);
    if (rc != CLI_OK)
        return rc;
    r.is_poison = calloc((size_t)jobs, 1);
    r.dead = calloc((size_t)jobs, 1);
    r.t.jobs = jobs;
    r.t.seen = calloc((size_t)jobs, 1);
    if (r.is_poison == NULL || r.dead == NULL || r.t.seen == NULL) {
        free(r.is_poison);
        free(r.dead);
        free(r.t.seen);
        return cli_err(CLI_FAIL, "out of memory");
    }
    int64_t t0 = emq_clock_ms();
    rc = produce_jobs(r.url, jobs, poison, r.is_poison);
    if (rc == CLI_OK)
        printf("== produced %lld jobs to queue '%s' in %.2f s\n", jobs, QUEUE,
               (double)(emq_clock_ms() - t0) / 1000.0);
    fflush(stdout);
    if (rc == CLI_OK)
        rc = start_workers(&r, work_us);
    fflush(stdout);
    r.t_start = emq_clock_ms();
    if (rc == CLI_OK)
        rc = watch(&r);
    if (r.tty && !cli_g.quiet)
        fputs("\r\033[K", stderr);
    if (r.t_done == 0)
        r.t_done = emq_clock_ms();
    stop_workers();
    if (interrupted) {
        cli_err(CLI_FAIL, "demo interrupted; cleaning up");
        rc = 128 + (int)interrupted;
    } else {
        tally_update(&r.t);
        if (rc == CLI_OK)
            rc = count_dead(r.url, jobs, r.dead, &r.ndead, &r.other_dead);
        rc = summary(&r, rc);
    }
    free(r.is_poison);
    free(r.dead);
    free(r.t.seen);
    return rc;
}

int cmd_demo(int argc, char **argv) {
    cli_args a;
    long long jobs = 100000, nw = 4, poison = 5, claim_idle = 1000,
              work_us = 150;
    int rc = cli_begin(VERB, argc, argv, &cli_verb_demo, 0, &a);
    if (rc != CLI_OK)
        return rc;
    if (rc == CLI_OK && a.npos)
        rc = cli_usage_err(VERB, "unexpected argument '%s'", a.pos[0]);
    if (rc == CLI_OK && a.seen[O_JOBS])
        rc = cli_num(VERB, "--jobs", a.value[O_JOBS], 10, 10000000, &jobs);
    if (rc == CLI_OK && a.seen[O_WORKERS])
        rc =
            cli_num(VERB, "--workers", a.value[O_WORKERS], 1, MAX_WORKERS, &nw);
    if (rc == CLI_OK && a.seen[O_POISON])
        rc =
            cli_num(VERB, "--poison", a.value[O_POISON], 0, jobs / 10, &poison);
    if (rc == CLI_OK && a.seen[O_CLAIM_IDLE])
        rc = cli_num(VERB, "--claim-idle", a.value[O_CLAIM_IDLE], 100, 600000,
                     &claim_idle);
    if (rc == CLI_OK && a.seen[O_WORK_US])
        rc = cli_num(VERB, "--work-us", a.value[O_WORK_US], 0, 1000000,
                     &work_us);
    int keep = a.seen[O_KEEP] > 0;
    with_sentinel = a.seen[O_SENTINEL] > 0;
    free(a.pos);
    if (rc != CLI_OK)
        return rc;
    nworkers = (int)nw;
    for (int i = 0; i < MAX_WORKERS; i++)
        workers[i] = -1;
    for (int i = 0; i < MAX_SERVERS; i++)
        servers[i] = -1;

    cli_signals(on_interrupt);
    rc = run(jobs, poison, claim_idle, work_us);
    cleanup(keep);
    return rc;
}
