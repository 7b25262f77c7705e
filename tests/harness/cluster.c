/* SPDX-License-Identifier: BSD-3-Clause */
/* cluster.c: the Redis Cluster fixture (see cluster.h).
 *
 * Every node is a fixture server (server.c) with cluster mode on and its
 * bus on a port picked free on loopback (the default bus port, port +
 * 10000, may not exist for a high ephemeral port). The cluster is created
 * by redis-cli, run as a child with its output in the test's scratch
 * folder and a bounded wait. Every later wait polls a node's state with a
 * deadline. Plain malloc, like server.c: only library allocations are
 * leak-checked.
 */
#include "harness/cluster.h"
#include "harness/test.h"
#include "harness/tlscerts.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define NODES_OUT 16384

struct emq_cl {
    int n;       /* nodes */
    int masters; /* the first `masters` nodes */
    emq_srv *node[EMQ_CL_MAX_NODES];
    char id[EMQ_CL_MAX_NODES][48];
};

static int64_t cl_now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int alive(const emq_cl *c, int i) {
    return c->node[i] && emq_srv_pid(c->node[i]) > 0;
}

/* Runs redis-cli with args (NULL-terminated) and waits up to timeout_ms.
 * Returns its exit status, or -1 (killed on timeout). Output goes to
 * log. */
static int run_cli(const char *const *args, const char *log, int timeout_ms) {
    char prog[512];
    if (emq_srv_program("redis-cli", prog, sizeof prog) != 0)
        FAIL("%s", prog);
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0)
        FAIL("fork: %s", strerror(errno));
    if (pid == 0) {
        int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
            close(fd);
        }
        int nul = open("/dev/null", O_RDONLY);
        if (nul >= 0) {
            dup2(nul, 0);
            close(nul);
        }
        execv(prog, (char *const *)args);
        _exit(127);
    }
    int64_t deadline = cl_now_ms() + timeout_ms;
    for (;;) {
        int status;
        pid_t w = waitpid(pid, &status, WNOHANG);
        if (w == pid)
            return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
        if (cl_now_ms() > deadline) {
            kill(pid, SIGKILL);
            waitpid(pid, NULL, 0);
            return -1;
        }
        usleep(20000);
    }
}

/* A free port p whose bus port p + 10000 is free too (servers without
 * cluster-port: Redis 6.2). */
static int free_port_pair(void) {
    for (int attempt = 0; attempt < 200; attempt++) {
        int p = emq_free_port();
        if (p + 10000 <= 65535 && emq_port_bindable(p + 10000))
            return p;
    }
    FAIL("no free loopback port p with p + 10000 free as well");
}

/* A raw command on node i; fails the test when it cannot be sent. */
static int cmd(emq_cl *c, int i, char *out, size_t size, const char *const *a) {
    int t = emq_srv_cmdv(c->node[i], out, size, a);
    if (t < 0) {
        char log[600];
        snprintf(log, sizeof log, "%s/redis.log", emq_srv_dir(c->node[i]));
        emq_print_tail(log, 30); /* a crash report ends there */
    }
    if (t < 0)
        FAIL("node %d (port %d): %s: %s", i, emq_srv_port(c->node[i]), a[0],
             out);
    return t;
}

void emq_cl_wait_ok(emq_cl *c, int timeout_ms) {
    int64_t deadline = cl_now_ms() + timeout_ms;
    char out[4096];
    for (int i = 0; i < c->n; i++) {
        if (!alive(c, i))
            continue;
        for (;;) {
            const char *info[] = {"CLUSTER", "INFO", NULL};
            if (emq_srv_cmdv(c->node[i], out, sizeof out, info) == '$' &&
                strstr(out, "cluster_state:ok"))
                break;
            if (cl_now_ms() > deadline)
                FAIL("node %d (port %d) not cluster_state:ok after %d ms: "
                     "%.300s",
                     i, emq_srv_port(c->node[i]), timeout_ms, out);
            usleep(50000);
        }
    }
}

/* Waits until replica i reports its link to the master up. */
static void wait_replica_up(emq_cl *c, int i, int64_t deadline) {
    char out[512];
    for (;;) {
        const char *role[] = {"ROLE", NULL};
        if (emq_srv_cmdv(c->node[i], out, sizeof out, role) == '*' &&
            strncmp(out, "slave", 5) == 0 && strstr(out, "connected"))
            return;
        if (cl_now_ms() > deadline)
            FAIL("replica %d (port %d) not connected: %s", i,
                 emq_srv_port(c->node[i]), out);
        usleep(50000);
    }
}

emq_cl *emq_cl_start(int masters, int replicas) {
    int n = masters * (1 + replicas);
    if (masters < 1 || replicas < 0 || n > EMQ_CL_MAX_NODES)
        FAIL("emq_cl_start: %d masters with %d replicas each is too many",
             masters, replicas);
    char cli[512];
    if (emq_srv_program("redis-cli", cli, sizeof cli) != 0) {
        if (emq_srv_bin_dir())
            FAIL("%s", cli); /* asked for a server that is not there */
        SKIP("redis-cli is not installed");
    }
    emq_cl *c = calloc(1, sizeof *c);
    if (c == NULL)
        FAIL("out of memory");
    c->n = n;
    c->masters = masters;
    /* cluster-port exists from Redis 7.0 (and in every Valkey); before, the
     * bus is always port + 10000, so both must be free. */
    char kind[16];
    int version = emq_srv_binary_version(kind, sizeof kind);
    int bus_option = strcmp(kind, "valkey") == 0 || version >= 70000;
    for (int i = 0; i < n; i++) {
        char extra[256];
        emq_srv_opts o;
        memset(&o, 0, sizeof o);
        if (bus_option) {
            snprintf(extra, sizeof extra,
                     "cluster-enabled yes\n"
                     "cluster-config-file nodes.conf\n"
                     "cluster-node-timeout 2000\n"
                     "cluster-port %d\n",
                     emq_free_port());
        } else {
            o.port = free_port_pair();
            snprintf(extra, sizeof extra,
                     "cluster-enabled yes\n"
                     "cluster-config-file nodes.conf\n"
                     "cluster-node-timeout 2000\n");
        }
        o.extra_config = extra;
        c->node[i] = emq_srv_start(&o);
        char out[128];
        const char *myid[] = {"CLUSTER", "MYID", NULL};
        if (cmd(c, i, out, sizeof out, myid) != '$' || strlen(out) != 40)
            FAIL("CLUSTER MYID on node %d: %s", i, out);
        memcpy(c->id[i], out, 41);
    }
    const char *args[EMQ_CL_MAX_NODES + 8];
    char addr[EMQ_CL_MAX_NODES][32], reps[16];
    int a = 0;
    args[a++] = "redis-cli";
    args[a++] = "--cluster";
    args[a++] = "create";
    for (int i = 0; i < n; i++) {
        snprintf(addr[i], sizeof addr[i], "127.0.0.1:%d",
                 emq_srv_port(c->node[i]));
        args[a++] = addr[i];
    }
    snprintf(reps, sizeof reps, "%d", replicas);
    args[a++] = "--cluster-replicas";
    args[a++] = reps;
    args[a++] = "--cluster-yes";
    args[a] = NULL;
    char log[600];
    snprintf(log, sizeof log, "%s/cluster-create.log", emq_test_tmpdir());
    int status = run_cli(args, log, 30000);
    if (status != 0) {
        emq_print_tail(log, 30);
        FAIL("redis-cli --cluster create exited with %d", status);
    }
    emq_cl_wait_ok(c, 20000);
    int64_t deadline = cl_now_ms() + 20000;
    for (int i = masters; i < n; i++)
        wait_replica_up(c, i, deadline);
    return c;
}

void emq_cl_stop(emq_cl *c) {
    if (c == NULL)
        return;
    for (int i = 0; i < c->n; i++)
        emq_srv_stop(c->node[i]);
    free(c);
}

int emq_cl_count(const emq_cl *c) { return c->n; }
emq_srv *emq_cl_node(emq_cl *c, int i) { return c->node[i]; }
const char *emq_cl_id(const emq_cl *c, int i) { return c->id[i]; }

int emq_cl_by_port(const emq_cl *c, int port) {
    for (int i = 0; i < c->n; i++)
        if (emq_srv_port(c->node[i]) == port)
            return i;
    return -1;
}

/* 1 when the comma-separated flags hold word exactly. */
static int has_flag(const char *flags, size_t len, const char *word) {
    size_t w = strlen(word);
    const char *p = flags, *end = flags + len;
    while (p < end) {
        const char *comma = memchr(p, ',', (size_t)(end - p));
        size_t n = comma ? (size_t)(comma - p) : (size_t)(end - p);
        if (n == w && memcmp(p, word, w) == 0)
            return 1;
        p += n + 1;
    }
    return 0;
}

int emq_cl_owner(emq_cl *c, int ask, unsigned slot) {
    char *out = malloc(NODES_OUT);
    if (out == NULL)
        FAIL("out of memory");
    const char *nodes[] = {"CLUSTER", "NODES", NULL};
    cmd(c, ask, out, NODES_OUT, nodes);
    int found = -1;
    for (char *line = strtok(out, "\n"); line && found < 0;
         line = strtok(NULL, "\n")) {
        char *tok[64];
        int nt = 0;
        for (char *save = NULL, *t = strtok_r(line, " ", &save); t && nt < 64;
             t = strtok_r(NULL, " ", &save))
            tok[nt++] = t;
        if (nt < 8 || !has_flag(tok[2], strlen(tok[2]), "master") ||
            has_flag(tok[2], strlen(tok[2]), "fail"))
            continue;
        for (int k = 8; k < nt; k++) {
            if (tok[k][0] == '[')
                continue;
            unsigned lo = 0, hi = 0;
            char *dash = strchr(tok[k], '-');
            lo = (unsigned)atoi(tok[k]);
            hi = dash ? (unsigned)atoi(dash + 1) : lo;
            if (slot >= lo && slot <= hi) {
                char *colon = strchr(tok[1], ':');
                found = colon ? emq_cl_by_port(c, atoi(colon + 1)) : -1;
                break;
            }
        }
    }
    free(out);
    return found;
}

int emq_cl_other_master(emq_cl *c, int not_this) {
    char out[512];
    for (int i = 0; i < c->n; i++) {
        if (i == not_this || !alive(c, i))
            continue;
        const char *role[] = {"ROLE", NULL};
        if (cmd(c, i, out, sizeof out, role) == '*' &&
            strncmp(out, "master", 6) == 0)
            return i;
    }
    FAIL("no other live master than node %d", not_this);
}

int emq_cl_replica_of(emq_cl *c, int m) {
    char out[512];
    for (int i = 0; i < c->n; i++) {
        if (i == m || !alive(c, i))
            continue;
        const char *role[] = {"ROLE", NULL};
        if (cmd(c, i, out, sizeof out, role) != '*' ||
            strncmp(out, "slave\n", 6) != 0)
            continue;
        /* "slave\n<ip>\n<port>\n<state>\n<offset>" */
        char *port = strchr(out + 6, '\n');
        if (port && atoi(port + 1) == emq_srv_port(c->node[m]))
            return i;
    }
    return -1;
}

/* ---- migration -------------------------------------------------------- */

static void expect_ok(emq_cl *c, int i, const char *const *a) {
    char out[512];
    if (cmd(c, i, out, sizeof out, a) != '+')
        FAIL("node %d: %s %s %s %s: %s", i, a[0], a[1] ? a[1] : "",
             a[1] && a[2] ? a[2] : "", a[1] && a[2] && a[3] ? a[3] : "", out);
}

void emq_cl_migrate_begin(emq_cl *c, unsigned slot, int from, int to) {
    char s[16];
    snprintf(s, sizeof s, "%u", slot);
    const char *imp[] = {"CLUSTER",   "SETSLOT",   s,
                         "IMPORTING", c->id[from], NULL};
    const char *mig[] = {"CLUSTER", "SETSLOT", s, "MIGRATING", c->id[to], NULL};
    expect_ok(c, to, imp);
    expect_ok(c, from, mig);
}

void emq_cl_migrate_keys(emq_cl *c, unsigned slot, int from, int to) {
    char s[16], port[16], out[8192];
    snprintf(s, sizeof s, "%u", slot);
    snprintf(port, sizeof port, "%d", emq_srv_port(c->node[to]));
    for (int round = 0; round < 1000; round++) {
        const char *get[] = {"CLUSTER", "GETKEYSINSLOT", s, "100", NULL};
        cmd(c, from, out, sizeof out, get);
        if (out[0] == '\0')
            return;
        char *save = NULL;
        for (char *key = strtok_r(out, "\n", &save); key;
             key = strtok_r(NULL, "\n", &save)) {
            const char *migrate[] = {"MIGRATE", "127.0.0.1", port, key,
                                     "0",       "5000",      NULL};
            char res[256];
            if (cmd(c, from, res, sizeof res, migrate) != '+')
                FAIL("MIGRATE %s to port %s: %s", key, port, res);
        }
    }
    FAIL("slot %u still has keys after 1000 rounds of MIGRATE", slot);
}

void emq_cl_migrate_finish(emq_cl *c, unsigned slot, int from, int to) {
    char s[16];
    snprintf(s, sizeof s, "%u", slot);
    const char *node[] = {"CLUSTER", "SETSLOT", s, "NODE", c->id[to], NULL};
    expect_ok(c, to, node);
    expect_ok(c, from, node);
    char out[512];
    for (int i = 0; i < c->n; i++) {
        if (i == to || i == from || !alive(c, i))
            continue;
        const char *role[] = {"ROLE", NULL};
        if (cmd(c, i, out, sizeof out, role) == '*' &&
            strncmp(out, "master", 6) == 0)
            expect_ok(c, i, node);
    }
}

void emq_cl_move_slot(emq_cl *c, unsigned slot, int from, int to) {
    emq_cl_migrate_begin(c, slot, from, to);
    emq_cl_migrate_keys(c, slot, from, to);
    emq_cl_migrate_finish(c, slot, from, to);
}

/* 1 when node `ask` lists node r as a replica of master m (CLUSTER NODES:
 * "<id> <addr> slave <master-id> ..."). */
static int sees_replica(emq_cl *c, int ask, int r, int m) {
    char *out = malloc(NODES_OUT);
    if (out == NULL)
        FAIL("out of memory");
    const char *nodes[] = {"CLUSTER", "NODES", NULL};
    cmd(c, ask, out, NODES_OUT, nodes);
    int yes = 0;
    for (char *save = NULL, *line = strtok_r(out, "\n", &save); line;
         line = strtok_r(NULL, "\n", &save)) {
        char id[48], addr[128], flags[128], master[48];
        if (sscanf(line, "%47s %127s %127s %47s", id, addr, flags, master) ==
                4 &&
            strcmp(id, c->id[r]) == 0) {
            yes = has_flag(flags, strlen(flags), "slave") &&
                  strcmp(master, c->id[m]) == 0;
            break;
        }
    }
    free(out);
    return yes;
}

void emq_cl_failover(emq_cl *c, int r, unsigned slot) {
    const char *fo[] = {"CLUSTER", "FAILOVER", NULL};
    int64_t deadline = cl_now_ms() + 15000;
    char out[512];
    /* A manual failover asks the master, over the cluster bus, to pause,
     * and the other masters to vote; each ignores a node it does not yet
     * know as that master's replica (gossip still settling after a fresh
     * create; seen on 6.2: "Waiting for votes, but majority still not
     * reached", then "Manual failover timed out"). Wait until every live
     * node knows. */
    const char *role[] = {"ROLE", NULL};
    int m = -1;
    if (cmd(c, r, out, sizeof out, role) == '*' &&
        strncmp(out, "slave\n", 6) == 0) {
        char *port = strchr(out + 6, '\n');
        m = port ? emq_cl_by_port(c, atoi(port + 1)) : -1;
        for (int i = 0; m >= 0 && i < c->n; i++) {
            if (i == r || !alive(c, i))
                continue;
            while (!sees_replica(c, i, r, m)) {
                if (cl_now_ms() > deadline)
                    FAIL("node %d never listed node %d as a replica of %d", i,
                         r, m);
                usleep(50000);
            }
        }
    }
    expect_ok(c, r, fo);
    for (;;) {
        if (cmd(c, r, out, sizeof out, role) == '*' &&
            strncmp(out, "master", 6) == 0)
            break;
        if (cl_now_ms() > deadline) {
            char log[600];
            snprintf(log, sizeof log, "%s/redis.log", emq_srv_dir(c->node[r]));
            emq_print_tail(log, 25);
            if (m >= 0) {
                snprintf(log, sizeof log, "%s/redis.log",
                         emq_srv_dir(c->node[m]));
                emq_print_tail(log, 15);
            }
            FAIL("node %d did not become master after CLUSTER FAILOVER: %s", r,
                 out);
        }
        usleep(50000);
    }
    for (int i = 0; i < c->n; i++) {
        if (!alive(c, i))
            continue;
        while (emq_cl_owner(c, i, slot) != r) {
            if (cl_now_ms() > deadline)
                FAIL("node %d does not see node %d as owner of slot %u", i, r,
                     slot);
            usleep(50000);
        }
    }
}
