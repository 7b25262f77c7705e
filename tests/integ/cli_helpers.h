/* SPDX-License-Identifier: BSD-3-Clause */
/* cli_helpers.h: running the built `echomq` program from a test.
 *
 * The program lives next to the test runner in the build folder, so its
 * path is the directory of /proc/self/exe plus "/echomq". cli_run forks
 * and execs it with the given arguments, ECHOMQ_URL set (or unset) and
 * ECHOMQ_PASSWORD cleared (and EMQ_SERVER_BIN_DIR, when set, first on
 * PATH, for `echomq demo`), feeds stdin from a string, collects stdout and
 * stderr (bounded), and waits for the exit status with a timeout.
 * cli_spawn starts it in the background for signal and /proc tests.
 */
#ifndef EMQ_TEST_CLI_HELPERS_H
#define EMQ_TEST_CLI_HELPERS_H

#include "harness/server.h"
#include "harness/test.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define CLI_OUT_MAX (1 << 20)

typedef struct cli_result {
    int code;  /* exit code; 128+N when killed by signal N */
    char *out; /* stdout, NUL-terminated (malloc) */
    size_t out_len;
    char err[16384]; /* stderr, NUL-terminated (truncated) */
} cli_result;

static inline const char *cli_path(void) {
    static char path[4096];
    if (path[0])
        return path;
    ssize_t n = readlink("/proc/self/exe", path, sizeof path - 16);
    if (n <= 0)
        FAIL("readlink /proc/self/exe: %s", strerror(errno));
    path[n] = '\0';
    char *slash = strrchr(path, '/');
    strcpy(slash + 1, "echomq");
    if (access(path, X_OK) != 0)
        FAIL("the echomq program is not at %s (build it: make echomq)", path);
    return path;
}

static inline int64_t cli_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Forks the program with args (NULL-terminated, without argv[0]). url:
 * ECHOMQ_URL (NULL: unset). Pipes: *in (write end, may be NULL: stdin is
 * /dev/null), *out and *err (read ends, may be NULL: inherited). */
static inline pid_t cli_spawn(const char *url, const char *const *args, int *in,
                              int *out, int *err) {
    const char *exe = cli_path();
    int pin[2] = {-1, -1}, pout[2] = {-1, -1}, perr[2] = {-1, -1};
    if ((in && pipe(pin)) || (out && pipe(pout)) || (err && pipe(perr)))
        FAIL("pipe: %s", strerror(errno));
    pid_t pid = fork();
    if (pid < 0)
        FAIL("fork: %s", strerror(errno));
    if (pid == 0) {
        if (in) {
            dup2(pin[0], 0);
            close(pin[1]);
        } else {
            int null = open("/dev/null", O_RDONLY);
            dup2(null, 0);
        }
        if (out) {
            dup2(pout[1], 1);
            close(pout[0]);
        }
        if (err) {
            dup2(perr[1], 2);
            close(perr[0]);
        }
        if (url)
            setenv("ECHOMQ_URL", url, 1);
        else
            unsetenv("ECHOMQ_URL");
        unsetenv("ECHOMQ_PASSWORD");
        /* `echomq demo` runs redis-server from PATH: the fixture's server
         * (EMQ_SERVER_BIN_DIR) comes first there. */
        const char *bin = getenv("EMQ_SERVER_BIN_DIR");
        if (bin && bin[0]) {
            const char *old = getenv("PATH");
            char path[8192];
            snprintf(path, sizeof path, "%s:%s", bin,
                     old ? old : "/usr/bin:/bin");
            setenv("PATH", path, 1);
        }
        const char *argv[64];
        int n = 0;
        argv[n++] = "echomq";
        for (int i = 0; args[i] && n < 63; i++)
            argv[n++] = args[i];
        argv[n] = NULL;
        execv(exe, (char *const *)argv);
        _exit(126);
    }
    if (in) {
        close(pin[0]);
        *in = pin[1];
    }
    if (out) {
        close(pout[1]);
        *out = pout[0];
    }
    if (err) {
        close(perr[1]);
        *err = perr[0];
    }
    return pid;
}

/* Waits (bounded) for pid; returns its exit code or 128+signal. */
static inline int cli_wait(pid_t pid, int timeout_ms) {
    timeout_ms = emq_test_ms(timeout_ms);
    int64_t end = cli_ms() + timeout_ms;
    int status;
    for (;;) {
        pid_t w = waitpid(pid, &status, WNOHANG);
        if (w == pid)
            break;
        if (cli_ms() > end) {
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
            FAIL("echomq did not exit within %d ms", timeout_ms);
        }
        usleep(5000);
    }
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* Runs the program to its end: stdin from input (may be NULL), args
 * NULL-terminated. Fails the test after timeout_ms (scaled with the run,
 * emq_test_ms). */
static inline void cli_run_in(cli_result *r, const char *url, const char *input,
                              size_t input_len, int timeout_ms,
                              const char *const *args) {
    memset(r, 0, sizeof *r);
    r->out = calloc(1, CLI_OUT_MAX + 1);
    ASSERT(r->out != NULL);
    int in = -1, out, err;
    pid_t pid = cli_spawn(url, args, input ? &in : NULL, &out, &err);
    size_t sent = 0, elen = 0;
    if (in >= 0)
        fcntl(in, F_SETFL, O_NONBLOCK);
    int64_t end = cli_ms() + emq_test_ms(timeout_ms);
    int open_out = 1, open_err = 1;
    while (open_out || open_err) {
        struct pollfd p[3];
        int np = 0;
        if (open_out)
            p[np++] = (struct pollfd){out, POLLIN, 0};
        if (open_err)
            p[np++] = (struct pollfd){err, POLLIN, 0};
        if (in >= 0)
            p[np++] = (struct pollfd){in, POLLOUT, 0};
        if (cli_ms() > end) {
            kill(pid, SIGKILL);
            break;
        }
        if (poll(p, (nfds_t)np, 50) <= 0)
            continue;
        for (int k = 0; k < np; k++) {
            if (!p[k].revents)
                continue;
            if (p[k].fd == in) {
                ssize_t w = write(in, input + sent, input_len - sent);
                if (w > 0)
                    sent += (size_t)w;
                if (w < 0 || sent == input_len) {
                    close(in);
                    in = -1;
                }
            } else if (p[k].fd == out) {
                ssize_t n =
                    read(out, r->out + r->out_len, CLI_OUT_MAX - r->out_len);
                if (n <= 0)
                    open_out = 0;
                else
                    r->out_len += (size_t)n;
            } else {
                char tmp[4096];
                ssize_t n = read(err, tmp, sizeof tmp);
                if (n <= 0) {
                    open_err = 0;
                } else {
                    size_t k2 = (size_t)n;
                    if (elen + k2 >= sizeof r->err)
                        k2 = sizeof r->err - 1 - elen;
                    memcpy(r->err + elen, tmp, k2);
                    elen += k2;
                }
            }
        }
        if (in >= 0 && sent == input_len) {
            close(in);
            in = -1;
        }
    }
    if (in >= 0)
        close(in);
    close(out);
    close(err);
    r->err[elen] = '\0';
    r->out[r->out_len] = '\0';
    r->code = cli_wait(pid, 2000);
}

#define CLI_ARGS(...) ((const char *const[]){__VA_ARGS__, NULL})
/* Runs with no stdin and a 20 s timeout. */
#define CLI(r, url, ...)                                                       \
    cli_run_in((r), (url), NULL, 0, 20000, CLI_ARGS(__VA_ARGS__))
/* Runs with text on stdin. */
#define CLI_IN(r, url, input, ...)                                             \
    cli_run_in((r), (url), (input), strlen(input), 20000, CLI_ARGS(__VA_ARGS__))

/* Asserts the exit code, printing both streams when it differs. */
#define ASSERT_EXIT(r, want)                                                   \
    do {                                                                       \
        if ((r)->code != (want))                                               \
            FAIL("echomq exited %d, want %d\n--- stdout:\n%.2000s\n--- "       \
                 "stderr:\n%s",                                                \
                 (r)->code, (want), (r)->out, (r)->err);                       \
    } while (0)

static inline void cli_free(cli_result *r) {
    free(r->out);
    r->out = NULL;
}

/* Number of lines of s. */
static inline int cli_lines(const char *s) {
    int n = 0;
    for (; *s; s++)
        n += *s == '\n';
    return n;
}

/* One line on stderr, ending in a newline. */
#define ASSERT_ONE_LINE(text)                                                  \
    do {                                                                       \
        if (cli_lines(text) != 1)                                              \
            FAIL("stderr is not exactly one line: \"%s\"", (text));            \
    } while (0)

/* A raw integer reply through the fixture's admin socket. */
static inline long long srv_int(const emq_srv *s, const char *a0,
                                const char *a1) {
    char out[256];
    if (emq_srv_cmd(s, out, sizeof out, a0, a1, NULL) != ':')
        FAIL("%s %s: %s", a0, a1, out);
    return atoll(out);
}

/* total_connections_received from INFO stats. */
static inline long long srv_connections(const emq_srv *s) {
    static char out[16384];
    emq_srv_cmd(s, out, sizeof out, "INFO", "stats", NULL);
    const char *p = strstr(out, "total_connections_received:");
    return p ? atoll(p + 27) : -1;
}

/* GET path from 127.0.0.1:port (HTTP/1.0); the whole response into out.
 * 0 on success. */
static inline int cli_http_get(int port, const char *path, char *out,
                               size_t size) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    out[0] = '\0';
    if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        if (fd >= 0)
            close(fd);
        return -1;
    }
    char req[512];
    int n =
        snprintf(req, sizeof req, "GET %s HTTP/1.0\r\nHost: x\r\n\r\n", path);
    if (write(fd, req, (size_t)n) != n) {
        close(fd);
        return -1;
    }
    size_t len = 0;
    /* The server closes once it has answered: the bound only ends a
     * server that never does (a big scrape on a loaded machine takes
     * seconds). */
    int64_t end = cli_ms() + emq_test_ms(20000);
    while (len < size - 1 && cli_ms() < end) {
        struct pollfd p = {fd, POLLIN, 0};
        if (poll(&p, 1, 200) <= 0)
            continue;
        ssize_t got = read(fd, out + len, size - 1 - len);
        if (got <= 0)
            break;
        len += (size_t)got;
    }
    out[len] = '\0';
    close(fd);
    return 0;
}

#endif /* EMQ_TEST_CLI_HELPERS_H */
