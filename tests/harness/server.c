/* SPDX-License-Identifier: BSD-3-Clause */
/* server.c: the redis-server fixture: private servers started by pid.
 *
 * Each server gets its own folder under the test's scratch folder with a
 * generated redis.conf (loopback bind or no TCP at all, no RDB saves, AOF
 * only when asked, log file in the folder, never daemonized) and a unix
 * "admin" socket that the fixture's own tiny blocking RESP2 client uses for
 * readiness checks and for setup or inspection commands. The server runs in
 * the test's process group, so the runner's group kill reaps it on timeout;
 * an atexit hook kills what a failed test left running. Every wait here is
 * bounded in time. This file uses plain malloc: the runner's leak check
 * counts library allocations only, and the fixture is not the library.
 */
#include "harness/server.h"
#include "harness/test.h"
#include "harness/tlscerts.h"
#include "srvproc.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define SRV_PATH_MAX 512
#define SRV_MAX_LIVE 16
#define RAW_TIMEOUT_MS 5000

struct emq_srv {
    pid_t pid;                    /* -1 while not running */
    int port;                     /* TCP or TLS port; 0 for unix */
    emq_srv_transport transport;  /* main listener kind */
    int start_timeout_ms;         /* readiness bound */
    char requirepass[256];        /* copy; "" for none */
    char dir[SRV_PATH_MAX];       /* private folder */
    char conf[SRV_PATH_MAX + 16]; /* redis.conf */
    char log[SRV_PATH_MAX + 16];  /* the server's logfile */
    char out[SRV_PATH_MAX + 16];  /* its stdout/stderr */
    char sock[SRV_PATH_MAX + 16]; /* unix socket (admin, and main for unix) */
    char url[SRV_PATH_MAX + 32];  /* what a client connects to */
    int have_info;                /* info below is filled */
    emq_srv_server_info info;     /* which server (emq_srv_server) */
    int sentinel;                 /* runs as a Sentinel */
};

static emq_srv *live[SRV_MAX_LIVE]; /* servers to kill at exit */
static int cleanup_registered;
static unsigned srv_counter; /* names the folders srv-1, srv-2, ... */

static int64_t mono_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* atexit: a failed test exits with servers still up; kill them hard. */
static void kill_live_servers(void) {
    for (int i = 0; i < SRV_MAX_LIVE; i++) {
        emq_srv *s = live[i];
        if (s && s->pid > 0) {
            kill(s->pid, SIGKILL);
            waitpid(s->pid, NULL, 0);
            s->pid = -1;
        }
    }
}

static int track(emq_srv *s) {
    for (int i = 0; i < SRV_MAX_LIVE; i++)
        if (live[i] == NULL) {
            live[i] = s;
            return 0;
        }
    return -1;
}

static void untrack(emq_srv *s) {
    for (int i = 0; i < SRV_MAX_LIVE; i++)
        if (live[i] == s)
            live[i] = NULL;
}

/* Ports. Each test process takes a block of PORT_BLOCK loopback ports of
 * its own, PORT_BASE + k * PORT_BLOCK onwards, k the first block whose lock
 * file it can flock. The lock lasts as long as the process (the kernel
 * drops it at exit), so no two tests running at once, in this run or in
 * another run on the machine, are ever handed one port. The blocks lie
 * below the kernel's ephemeral range (32768 and up on Linux), where a
 * bind to port 0 or an outgoing connection never takes a port, and so do
 * the bus ports (port + 10000) of a Redis 6.2 cluster node. */
#define PORT_BASE 12000
#define PORT_BLOCK 40
#define PORT_BLOCKS 200

static int port_block = -1; /* this process's block, once taken */
static int port_next;       /* the next port of it to try */

int emq_port_bindable(int port) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return 0;
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons((uint16_t)port);
    int ok = bind(fd, (struct sockaddr *)&a, sizeof a) == 0;
    close(fd);
    return ok;
}

/* Takes this process's block: the first lock file of
 * /tmp/emq-test-ports-<uid>/ that no other process holds. */
static void take_port_block(void) {
    char dir[64], path[128];
    snprintf(dir, sizeof dir, "/tmp/emq-test-ports-%ld", (long)getuid());
    if (mkdir(dir, 0700) != 0 && errno != EEXIST)
        FAIL("mkdir %s: %s", dir, strerror(errno));
    for (int k = 0; k < PORT_BLOCKS; k++) {
        snprintf(path, sizeof path, "%s/%d.lock", dir, k);
        int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
        if (fd < 0)
            FAIL("open %s: %s", path, strerror(errno));
        if (flock(fd, LOCK_EX | LOCK_NB) == 0) {
            port_block = k; /* fd stays open: it holds the lock */
            port_next = 0;
            return;
        }
        close(fd);
    }
    FAIL("all %d port blocks of %s are held by running tests", PORT_BLOCKS,
         dir);
}

int emq_free_port(void) {
    if (port_block < 0)
        take_port_block();
    /* Round the block, from the port after the last one handed out: a
     * port is handed out again only after the whole block, and only when
     * nothing listens on it. */
    for (int i = 0; i < PORT_BLOCK; i++) {
        int port = PORT_BASE + port_block * PORT_BLOCK + port_next;
        port_next = (port_next + 1) % PORT_BLOCK;
        if (emq_port_bindable(port))
            return port;
    }
    FAIL("no free loopback port in block %d (ports %d-%d)", port_block,
         PORT_BASE + port_block * PORT_BLOCK,
         PORT_BASE + (port_block + 1) * PORT_BLOCK - 1);
}

/* ---- the raw RESP2 client ------------------------------------------- */

typedef struct raw_in {
    int fd;
    char buf[4096];
    size_t pos, len;
} raw_in;

typedef struct raw_out {
    char *p;
    size_t size, len;
} raw_out;

static void out_put(raw_out *o, const char *s, size_t n) {
    if (o->size == 0)
        return;
    size_t room = o->size - 1 - o->len;
    if (n > room)
        n = room;
    memcpy(o->p + o->len, s, n);
    o->len += n;
    o->p[o->len] = '\0';
}

static int raw_getc(raw_in *in) {
    if (in->pos == in->len) {
        ssize_t n;
        do
            n = recv(in->fd, in->buf, sizeof in->buf, 0);
        while (n < 0 && errno == EINTR);
        if (n <= 0)
            return -1;
        in->pos = 0;
        in->len = (size_t)n;
    }
    return (unsigned char)in->buf[in->pos++];
}

/* Reads one CRLF-terminated line without the CRLF; -1 on EOF/timeout. */
static int raw_line(raw_in *in, char *line, size_t size) {
    size_t n = 0;
    for (;;) {
        int c = raw_getc(in);
        if (c < 0)
            return -1;
        if (c == '\r') {
            if (raw_getc(in) != '\n')
                return -1;
            line[n < size ? n : size - 1] = '\0';
            return 0;
        }
        if (n + 1 < size)
            line[n++] = (char)c;
    }
}

/* Reads one reply into o. Returns its type byte or -1. Depth-bounded. */
static int raw_reply(raw_in *in, raw_out *o, int depth) {
    char line[1024];
    if (depth > 8 || raw_line(in, line, sizeof line) != 0)
        return -1;
    char type = line[0];
    switch (type) {
    case '+':
    case '-':
    case ':':
        out_put(o, line + 1, strlen(line + 1));
        return type;
    case '$': {
        long long n = atoll(line + 1);
        if (n < 0) {
            out_put(o, "(nil)", 5);
            return type;
        }
        for (long long i = 0; i < n + 2; i++) {
            int c = raw_getc(in);
            if (c < 0)
                return -1;
            if (i < n) {
                char ch = (char)c;
                out_put(o, &ch, 1);
            }
        }
        return type;
    }
    case '*': {
        long long n = atoll(line + 1);
        if (n < 0) {
            out_put(o, "(nil)", 5);
            return type;
        }
        for (long long i = 0; i < n; i++) {
            if (i > 0)
                out_put(o, "\n", 1);
            if (raw_reply(in, o, depth + 1) < 0)
                return -1;
        }
        return type;
    }
    default:
        return -1;
    }
}

static int connect_unix(const char *path, int timeout_ms) {
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    if (fd < 0)
        return -1;
    struct timeval tv = {timeout_ms / 1000, (timeout_ms % 1000) * 1000};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    struct sockaddr_un a;
    memset(&a, 0, sizeof a);
    a.sun_family = AF_UNIX;
    snprintf(a.sun_path, sizeof a.sun_path, "%s", path);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

static int send_all(int fd, const char *p, size_t n) {
    while (n > 0) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

static int send_command(int fd, const char *const *args) {
    char head[64];
    int argc = 0;
    while (args[argc])
        argc++;
    snprintf(head, sizeof head, "*%d\r\n", argc);
    if (send_all(fd, head, strlen(head)) != 0)
        return -1;
    for (int i = 0; i < argc; i++) {
        size_t n = strlen(args[i]);
        snprintf(head, sizeof head, "$%zu\r\n", n);
        if (send_all(fd, head, strlen(head)) != 0 ||
            send_all(fd, args[i], n) != 0 || send_all(fd, "\r\n", 2) != 0)
            return -1;
    }
    return 0;
}

/* One command on a fresh admin connection, with an optional AUTH first. */
static int raw_command(const char *sock, const char *password, char *out,
                       size_t size, const char *const *args, int timeout_ms) {
    raw_out o = {out, size, 0};
    if (size)
        out[0] = '\0';
    int fd = connect_unix(sock, timeout_ms);
    if (fd < 0) {
        snprintf(out, size, "connect %.100s: %s", sock, strerror(errno));
        return -1;
    }
    raw_in *in = malloc(sizeof *in);
    if (in == NULL) {
        close(fd);
        snprintf(out, size, "out of memory");
        return -1;
    }
    in->fd = fd;
    in->pos = in->len = 0;
    int type = -1;
    if (password && password[0]) {
        const char *auth[] = {"AUTH", password, NULL};
        if (send_command(fd, auth) != 0 || raw_reply(in, &o, 0) != '+') {
            snprintf(out, size, "fixture AUTH failed: %s", o.p);
            goto done;
        }
        o.len = 0;
        out[0] = '\0';
    }
    if (send_command(fd, args) != 0) {
        snprintf(out, size, "send: %s", strerror(errno));
        goto done;
    }
    type = raw_reply(in, &o, 0);
    if (type < 0)
        snprintf(out, size, "no reply (closed, timed out or malformed)");
done:
    free(in);
    close(fd);
    return type;
}

/* Reads one status line byte by byte (nothing after it is consumed):
 * 0 when it is "+OK". */
static int read_ok_line(int fd) {
    char line[128];
    size_t n = 0;
    while (n + 1 < sizeof line) {
        ssize_t r = read(fd, &line[n], 1);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return -1;
        if (line[n++] == '\n')
            break;
    }
    line[n] = '\0';
    return strncmp(line, "+OK\r\n", 5) == 0 ? 0 : -1;
}

int emq_srv_monitor(const emq_srv *s) {
    int fd = connect_unix(s->sock, RAW_TIMEOUT_MS);
    if (fd < 0)
        return -1;
    const char *auth[] = {"AUTH", s->requirepass, NULL};
    const char *monitor[] = {"MONITOR", NULL};
    if ((s->requirepass[0] &&
         (send_command(fd, auth) != 0 || read_ok_line(fd) != 0)) ||
        send_command(fd, monitor) != 0 || read_ok_line(fd) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

int emq_srv_cmdv(const emq_srv *s, char *out, size_t size,
                 const char *const *args) {
    return raw_command(s->sock, s->requirepass, out, size, args,
                       RAW_TIMEOUT_MS);
}

int emq_srv_cmd(const emq_srv *s, char *out, size_t size, const char *arg0,
                ...) {
    const char *args[64];
    int n = 0;
    va_list ap;
    va_start(ap, arg0);
    for (const char *a = arg0; a != NULL && n < 63;
         a = va_arg(ap, const char *))
        args[n++] = a;
    va_end(ap);
    args[n] = NULL;
    return emq_srv_cmdv(s, out, size, args);
}

/* ---- which server --------------------------------------------------- */

const char *emq_srv_bin_dir(void) {
    const char *d = getenv("EMQ_SERVER_BIN_DIR");
    return d && d[0] ? d : NULL;
}

int emq_srv_program(const char *prog, char *out, size_t size) {
    return srvproc_program(emq_srv_bin_dir(), prog, out, size);
}

/* The value of field in an INFO reply ("field:value\r\n"), into out. */
static int info_field(const char *info, const char *field, char *out,
                      size_t size) {
    size_t n = strlen(field);
    for (const char *p = info; p && *p;) {
        if (strncmp(p, field, n) == 0 && p[n] == ':') {
            const char *v = p + n + 1;
            size_t len = strcspn(v, "\r\n");
            snprintf(out, size, "%.*s", (int)len, v);
            return 0;
        }
        p = strchr(p, '\n');
        if (p)
            p++;
    }
    return -1;
}

const emq_srv_server_info *emq_srv_server(const emq_srv *cs) {
    emq_srv *s = (emq_srv *)cs; /* fills its cache */
    if (s->have_info)
        return &s->info;
    char *out = malloc(8192);
    if (out == NULL)
        FAIL("out of memory");
    const char *args[] = {"INFO", "server", NULL};
    if (emq_srv_cmdv(s, out, 8192, args) != '$') {
        char why[256];
        snprintf(why, sizeof why, "%s", out);
        free(out);
        FAIL("INFO server on the fixture's server: %s", why);
    }
    emq_srv_server_info *i = &s->info;
    memset(i, 0, sizeof *i);
    if (info_field(out, "redis_version", i->redis_version,
                   sizeof i->redis_version) != 0)
        snprintf(i->redis_version, sizeof i->redis_version, "0.0.0");
    if (info_field(out, "server_name", i->name, sizeof i->name) != 0) {
        char vv[32];
        snprintf(i->name, sizeof i->name, "%s",
                 info_field(out, "valkey_version", vv, sizeof vv) == 0
                     ? "valkey"
                     : "redis");
    }
    if (strcmp(i->name, "valkey") != 0 ||
        info_field(out, "valkey_version", i->version, sizeof i->version) != 0)
        snprintf(i->version, sizeof i->version, "%s", i->redis_version);
    free(out);
    sscanf(i->version, "%d.%d.%d", &i->major, &i->minor, &i->patch);
    int a = 0, b = 0, c = 0;
    sscanf(i->redis_version, "%d.%d.%d", &a, &b, &c);
    i->compat = a * 10000 + b * 100 + c;
    snprintf(i->label, sizeof i->label, "%s %s", i->name, i->version);
    s->have_info = 1;
    return i;
}

const char *emq_srv_script_command(void) {
    return emq_srv_binary_version(NULL, 0) >= 70000 ? "FCALL" : "EVAL";
}

int emq_srv_binary_version(char *name, size_t name_size) {
    static int version = -1;
    static char kind[16];
    if (version < 0) {
        version = 0;
        snprintf(kind, sizeof kind, "redis");
        char prog[SRV_PATH_MAX], cmd[SRV_PATH_MAX + 32], line[256] = "";
        if (emq_srv_program("redis-server", prog, sizeof prog) == 0) {
            snprintf(cmd, sizeof cmd, "'%s' --version", prog);
            FILE *p = popen(cmd, "r");
            if (p) {
                if (fgets(line, sizeof line, p) == NULL)
                    line[0] = '\0';
                pclose(p);
            }
        }
        /* "Redis server v=6.2.16 sha=..." / "Valkey server v=8.0.1 ..." */
        const char *v = strstr(line, "v=");
        int a = 0, b = 0, c = 0;
        if (v && sscanf(v + 2, "%d.%d.%d", &a, &b, &c) >= 2)
            version = a * 10000 + b * 100 + c;
        if (strncmp(line, "Valkey", 6) == 0)
            snprintf(kind, sizeof kind, "valkey");
    }
    if (name && name_size)
        snprintf(name, name_size, "%s", kind);
    return version;
}

int emq_srv_redis_at_least(const emq_srv *s, int major, int minor) {
    return emq_srv_server(s)->compat >= major * 10000 + minor * 100;
}

int emq_srv_is_valkey(const emq_srv *s) {
    return strcmp(emq_srv_server(s)->name, "valkey") == 0;
}

void emq_srv_require(const emq_srv *s, int cond, const char *feature) {
    if (cond)
        return;
    static char reason[256];
    snprintf(reason, sizeof reason, "%s lacks %s", emq_srv_server(s)->label,
             feature);
    emq_test_skip(reason);
}

long long emq_srv_calls(const emq_srv *s, const char *cmd, int *exact) {
    char name[128];
    snprintf(name, sizeof name, "%s", cmd);
    int whole = 1;
    char *bar = strchr(name, '|');
    if (bar && !emq_srv_redis_at_least(s, 7, 0)) {
        *bar = '\0'; /* 6.2: only the command's total */
        whole = 0;
    }
    if (exact)
        *exact = whole;
    char *out = malloc(65536);
    if (out == NULL)
        FAIL("out of memory");
    const char *args[] = {"INFO", "commandstats", NULL};
    if (emq_srv_cmdv(s, out, 65536, args) != '$') {
        char why[256];
        snprintf(why, sizeof why, "%s", out);
        free(out);
        FAIL("INFO commandstats: %s", why);
    }
    char key[160];
    snprintf(key, sizeof key, "cmdstat_%s:calls=", name);
    long long calls = 0;
    for (const char *p = out; (p = strstr(p, key)) != NULL; p++) {
        if (p == out || p[-1] == '\n') {
            calls = strtoll(p + strlen(key), NULL, 10);
            break;
        }
    }
    free(out);
    return calls;
}

/* ---- lifecycle ------------------------------------------------------ */

static int write_config(emq_srv *s, const emq_srv_opts *o, char *why,
                        size_t why_size) {
    FILE *f = fopen(s->conf, "w");
    if (f == NULL) {
        snprintf(why, why_size, "cannot write %s: %s", s->conf,
                 strerror(errno));
        return -1;
    }
    fprintf(f,
            "daemonize no\n"
            "bind 127.0.0.1\n"
            "dir %s\n"
            "logfile %s\n"
            "loglevel notice\n"
            "save \"\"\n"
            "unixsocket %s\n"
            "unixsocketperm 700\n",
            s->dir, s->log, s->sock);
    /* A replica's first sync starts at once: since Redis 7.0 a diskless
     * sync waits 5 s for more replicas by default, which a loaded machine
     * stretches past a test's wait for the sync. */
    if (!o->sentinel)
        fprintf(f, "repl-diskless-sync-delay 0\n");
    if (o->appendonly)
        fprintf(f, "appendonly yes\nappendfsync always\n");
    else
        fprintf(f, "appendonly no\n");
    if (s->transport == EMQ_SRV_TCP)
        fprintf(f, "port %d\n", s->port);
    else
        fprintf(f, "port 0\n");
    if (s->transport == EMQ_SRV_TLS) {
        const emq_certs *c = emq_certs_get();
        const char *crt = o->cert == EMQ_SRV_CERT_EXPIRED     ? c->expired_crt
                          : o->cert == EMQ_SRV_CERT_WRONGHOST ? c->wronghost_crt
                                                              : c->server_crt;
        const char *auth = o->client_auth == EMQ_SRV_CLIENT_AUTH_YES ? "yes"
                           : o->client_auth == EMQ_SRV_CLIENT_AUTH_OPTIONAL
                               ? "optional"
                               : "no";
        fprintf(f,
                "tls-port %d\n"
                "tls-cert-file %s\n"
                "tls-key-file %s\n"
                "tls-ca-cert-file %s\n"
                "tls-auth-clients %s\n",
                s->port, crt, c->server_key, c->ca_crt, auth);
    }
    if (s->requirepass[0])
        fprintf(f, "requirepass \"%s\"\n", s->requirepass);
    if (o->extra_config)
        fprintf(f, "%s\n", o->extra_config);
    if (fclose(f) != 0) {
        snprintf(why, why_size, "cannot write %s", s->conf);
        return -1;
    }
    return 0;
}

/* Forks and execs redis-server on s's config (tools/srvproc.c): in the
 * test's process group on purpose, output to s->out. Returns the pid, or
 * -1 with the reason in why. */
static pid_t spawn(const emq_srv *s, char *why, size_t why_size) {
    char prog[SRV_PATH_MAX];
    if (emq_srv_program("redis-server", prog, sizeof prog) != 0) {
        snprintf(why, why_size, "%s", prog);
        return -1;
    }
    srvproc_opts o = {prog,   s->conf, s->dir,
                      s->out, 0,       s->sentinel ? "--sentinel" : NULL};
    return srvproc_spawn(&o, why, why_size);
}

static int tcp_connects(int port) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0)
        return 0;
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons((uint16_t)port);
    int ok = connect(fd, (struct sockaddr *)&a, sizeof a) == 0;
    close(fd);
    return ok;
}

/* Waits until the server answers PING on the admin socket with anything
 * but -LOADING (-NOAUTH counts: it is up) and its TCP port accepts. */
static int wait_ready(emq_srv *s, char *why, size_t why_size) {
    int64_t deadline = mono_ms() + s->start_timeout_ms;
    char reply[256];
    for (int attempt = 0;; attempt++) {
        int status;
        pid_t w = waitpid(s->pid, &status, WNOHANG);
        if (w == s->pid) {
            s->pid = -1;
            snprintf(why, why_size, "redis-server exited at start (%s %d)",
                     WIFEXITED(status) ? "status" : "signal",
                     WIFEXITED(status) ? WEXITSTATUS(status)
                                       : WTERMSIG(status));
            return -1;
        }
        const char *ping[] = {"PING", NULL};
        int type = raw_command(s->sock, NULL, reply, sizeof reply, ping, 250);
        if ((type == '+' || (type == '-' && strncmp(reply, "LOADING", 7))) &&
            (s->transport == EMQ_SRV_UNIX || tcp_connects(s->port)))
            return 0;
        if (mono_ms() > deadline) {
            snprintf(why, why_size,
                     "redis-server (pid %ld) not ready after %d ms (%d "
                     "probes; last: %s)",
                     (long)s->pid, s->start_timeout_ms, attempt + 1, reply);
            return -1;
        }
        usleep(10000);
    }
}

static void stop_pid(pid_t pid) { srvproc_stop(pid, 3000); }

/* Log paths of the last server that failed to start, for the report. */
static char failed_log[SRV_PATH_MAX + 16], failed_out[SRV_PATH_MAX + 16];

static void note_failure(const emq_srv *s) {
    memcpy(failed_log, s->log, sizeof failed_log);
    memcpy(failed_out, s->out, sizeof failed_out);
}

void emq_srv_print_failure(void) {
    if (failed_log[0] == '\0')
        return;
    emq_print_tail(failed_log, 20);
    emq_print_tail(failed_out, 10);
}

emq_srv *emq_srv_try_start(const emq_srv_opts *opts, char *why,
                           size_t why_size) {
    static const emq_srv_opts defaults;
    char scratch[8];
    if (why == NULL) {
        why = scratch;
        why_size = sizeof scratch;
    }
    const emq_srv_opts *o = opts ? opts : &defaults;
    const char *tmp = emq_test_tmpdir(); /* before atexit: LIFO order */
    if (!cleanup_registered) {
        cleanup_registered = 1;
        atexit(kill_live_servers);
    }
    emq_srv *s = calloc(1, sizeof *s);
    if (s == NULL) {
        snprintf(why, why_size, "out of memory");
        return NULL;
    }
    s->pid = -1;
    s->transport = o->transport;
    s->start_timeout_ms = o->start_timeout_ms > 0 ? o->start_timeout_ms : 5000;
    if (o->requirepass)
        snprintf(s->requirepass, sizeof s->requirepass, "%s", o->requirepass);
    snprintf(s->dir, sizeof s->dir, "%s/srv-%u", tmp, ++srv_counter);
    snprintf(s->conf, sizeof s->conf, "%s/redis.conf", s->dir);
    snprintf(s->log, sizeof s->log, "%s/redis.log", s->dir);
    snprintf(s->out, sizeof s->out, "%s/stdout.log", s->dir);
    snprintf(s->sock, sizeof s->sock, "%s/redis.sock", s->dir);
    if (strlen(s->sock) >= sizeof(((struct sockaddr_un *)0)->sun_path)) {
        snprintf(why, why_size, "socket path too long: %s", s->sock);
        free(s);
        return NULL;
    }
    if (mkdir(s->dir, 0700) != 0) {
        snprintf(why, why_size, "mkdir %s: %s", s->dir, strerror(errno));
        free(s);
        return NULL;
    }
    s->sentinel = o->sentinel;
    if (s->transport != EMQ_SRV_UNIX)
        s->port = o->port > 0 ? o->port : emq_free_port();
    switch (s->transport) {
    case EMQ_SRV_UNIX:
        snprintf(s->url, sizeof s->url, "unix://%s", s->sock);
        break;
    case EMQ_SRV_TLS:
        snprintf(s->url, sizeof s->url, "rediss://127.0.0.1:%d", s->port);
        break;
    default:
        snprintf(s->url, sizeof s->url, "redis://127.0.0.1:%d", s->port);
    }
    if (write_config(s, o, why, why_size) != 0 || track(s) != 0) {
        if (why[0] == '\0')
            snprintf(why, why_size, "more than %d live servers", SRV_MAX_LIVE);
        free(s);
        return NULL;
    }
    s->pid = spawn(s, why, why_size);
    if (s->pid < 0) {
        untrack(s);
        free(s);
        return NULL;
    }
    if (wait_ready(s, why, why_size) != 0) {
        note_failure(s);
        stop_pid(s->pid);
        untrack(s);
        free(s);
        return NULL;
    }
    return s;
}

emq_srv *emq_srv_start(const emq_srv_opts *opts) {
    char why[512] = "";
    emq_srv *s = emq_srv_try_start(opts, why, sizeof why);
    if (s == NULL) {
        emq_srv_print_failure();
        FAIL("could not start redis-server: %s", why);
    }
    return s;
}

void emq_srv_stop(emq_srv *s) {
    if (s == NULL)
        return;
    stop_pid(s->pid);
    s->pid = -1;
    untrack(s);
    free(s);
}

void emq_srv_kill9(emq_srv *s) {
    if (s->pid > 0) {
        kill(s->pid, SIGKILL);
        waitpid(s->pid, NULL, 0);
    }
    s->pid = -1;
}

void emq_srv_restart(emq_srv *s) {
    char why[512] = "";
    if (s->pid > 0)
        FAIL("emq_srv_restart: server pid %ld is still running", (long)s->pid);
    s->pid = spawn(s, why, sizeof why);
    if (s->pid < 0)
        FAIL("could not restart redis-server: %s", why);
    if (wait_ready(s, why, sizeof why) != 0) {
        note_failure(s);
        emq_srv_print_failure();
        FAIL("could not restart redis-server: %s", why);
    }
}

const char *emq_srv_url(const emq_srv *s) { return s->url; }
int emq_srv_port(const emq_srv *s) { return s->port; }
pid_t emq_srv_pid(const emq_srv *s) { return s->pid; }
const char *emq_srv_dir(const emq_srv *s) { return s->dir; }
const char *emq_srv_socket(const emq_srv *s) { return s->sock; }
