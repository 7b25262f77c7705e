/* SPDX-License-Identifier: BSD-3-Clause */
/* bench_common.h: what every benchmark program shares: clocks, a fatal
 * error, and the private redis-server it measures against.
 *
 * Each benchmark source is its own program, so this header holds static
 * functions and state, one copy per program. The server listens on a unix
 * socket in a mkdtemp folder (and on a free loopback port when asked), has
 * no persistence, runs with hz 100 (blocked reads time out within 10 ms,
 * so consumers left waiting on a drained stream return promptly), and is
 * stopped by pid at exit and on SIGINT/SIGTERM.
 */
#ifndef EMQ_BENCH_COMMON_H
#define EMQ_BENCH_COMMON_H

#include <hiredis/hiredis.h>

#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* The program's name for messages; each benchmark defines it. */
static const char *bench_name;

static inline double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* User + system CPU time of this process (every thread), in microseconds. */
static inline double cpu_us(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e6 +
           (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);
}

static inline void die(const char *what, const char *why) {
    fprintf(stderr, "%s: %s: %s\n", bench_name, what, why);
    exit(1);
}

/* ---- the private server ------------------------------------------------ */

static volatile pid_t server_pid;
static char server_dir[64];
static char sock_path[128];
static int tcp_port; /* 0: unix socket only */

static inline void stop_server(void) {
    pid_t pid = server_pid;
    if (pid > 0) {
        server_pid = 0;
        kill(pid, SIGTERM);
        waitpid(pid, NULL, 0);
    }
    if (server_dir[0]) {
        /* The only files the server writes there (no persistence). */
        const char *names[] = {"redis.sock", "redis.log", "dump.rdb"};
        char path[192];
        for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
            snprintf(path, sizeof path, "%s/%s", server_dir, names[i]);
            unlink(path);
        }
        if (rmdir(server_dir) != 0)
            fprintf(stderr, "%s: could not remove %s\n", bench_name,
                    server_dir);
        server_dir[0] = '\0';
    }
}

/* Ctrl-C must not leave the server running: kill(2) and _exit(2) are
 * async-signal-safe; the folder is left behind in that case. */
static inline void on_signal(int sig) {
    if (server_pid > 0)
        kill(server_pid, SIGTERM);
    _exit(128 + sig);
}

/* A loopback TCP port that was free a moment ago. */
static inline int free_port(void) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) != 0 ||
        getsockname(fd, (struct sockaddr *)&a, &len) != 0)
        die("free port", "no loopback port could be bound");
    close(fd);
    return ntohs(a.sin_port);
}

/* Starts the server; with_tcp also opens a loopback port (tcp_port). */
static inline void start_server(int with_tcp) {
    snprintf(server_dir, sizeof server_dir, "/tmp/emq-bench-XXXXXX");
    if (mkdtemp(server_dir) == NULL) {
        server_dir[0] = '\0';
        die("mkdtemp", "failed");
    }
    snprintf(sock_path, sizeof sock_path, "%s/redis.sock", server_dir);
    tcp_port = with_tcp ? free_port() : 0;
    char port[16];
    snprintf(port, sizeof port, "%d", tcp_port);
    atexit(stop_server);
    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);
    pid_t pid = fork();
    if (pid < 0)
        die("fork", "failed");
    if (pid == 0) {
        execlp("redis-server", "redis-server", "--port", port, "--bind",
               "127.0.0.1", "--unixsocket", sock_path, "--save", "",
               "--appendonly", "no", "--dir", server_dir, "--logfile",
               "redis.log", "--hz", "100", (char *)NULL);
        perror("exec redis-server");
        _exit(127);
    }
    server_pid = pid;
    for (int i = 0; i < 500; i++) {
        redisContext *c = redisConnectUnix(sock_path);
        if (c && !c->err) {
            redisFree(c);
            return;
        }
        if (c)
            redisFree(c);
        usleep(10000);
    }
    die("redis-server", "did not start within 5 s");
}

/* Clients connect over loopback TCP instead of the unix socket (the
 * server was started with_tcp). */
static int bench_over_tcp;

static inline redisContext *connect_server(void) {
    redisContext *c = bench_over_tcp ? redisConnect("127.0.0.1", tcp_port)
                                     : redisConnectUnix(sock_path);
    if (c == NULL || c->err)
        die("hiredis connect", c ? c->errstr : "out of memory");
    return c;
}

/* The server's CPU seconds so far (INFO cpu, user + sys), through admin. */
static inline double server_cpu_s(redisContext *admin) {
    redisReply *r = redisCommand(admin, "INFO cpu");
    if (r == NULL || r->type != REDIS_REPLY_STRING)
        die("INFO cpu", "no reply");
    double user = 0, sys = 0;
    const char *u = strstr(r->str, "used_cpu_user:");
    const char *s = strstr(r->str, "used_cpu_sys:");
    if (u)
        user = atof(u + 14);
    if (s)
        sys = atof(s + 13);
    freeReplyObject(r);
    return user + sys;
}

#endif /* EMQ_BENCH_COMMON_H */
