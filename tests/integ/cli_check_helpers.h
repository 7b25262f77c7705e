/* SPDX-License-Identifier: BSD-3-Clause */
/* cli_check_helpers.h: more helpers for the CLI tests (test_cli_flags.c,
 * test_cli_signals.c, test_cli_tls.c) on top of cli_helpers.h.
 *
 * - cli_json_lines_ok: every non-empty line of a text is one strict JSON
 *   value, checked by python3's json module when python3 is on PATH, else
 *   by a small structural checker (balanced brackets outside strings, each
 *   line an object or array).
 * - cli_run_pty: runs the program with stderr on the slave side of a
 *   pseudo-terminal and collects what arrives on the master side, so the
 *   program sees a terminal on stderr (isatty(2)).
 * - cli_wait_file: waits (bounded) until a file contains a string.
 * - srv_slowlog_*: the server's slow log with a threshold of 0 records
 *   every command with its arguments, to see what a flag sent.
 */
#ifndef EMQ_TEST_CLI_CHECK_HELPERS_H
#define EMQ_TEST_CLI_CHECK_HELPERS_H

#include "integ/cli_helpers.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- JSON lines ------------------------------------------------------- */

/* The structural fallback: one line, an object or array whose brackets
 * balance outside strings, nothing after the closing bracket. */
static inline int cli_json_line_shape_ok(const char *p, size_t n) {
    while (n && (p[n - 1] == ' ' || p[n - 1] == '\r'))
        n--;
    if (n < 2 || (p[0] != '{' && p[0] != '['))
        return 0;
    int depth = 0, in_str = 0;
    for (size_t i = 0; i < n; i++) {
        char c = p[i];
        if (in_str) {
            if (c == '\\')
                i++;
            else if (c == '"')
                in_str = 0;
            else if ((unsigned char)c < 0x20)
                return 0;
            continue;
        }
        if (c == '"')
            in_str = 1;
        else if (c == '{' || c == '[')
            depth++;
        else if (c == '}' || c == ']') {
            if (--depth < 0)
                return 0;
            if (depth == 0 && i != n - 1)
                return 0;
        }
    }
    return depth == 0 && !in_str;
}

/* 1 when every non-empty line of text is valid JSON; *how says which
 * checker judged ("python3" or "structural"). */
static inline int cli_json_lines_ok(const char *text, const char **how) {
    if (system("command -v python3 >/dev/null 2>&1") == 0) {
        char path[600], cmd[800];
        snprintf(path, sizeof path, "%s/json-lines.txt", emq_test_tmpdir());
        FILE *f = fopen(path, "w");
        ASSERT(f != NULL);
        fputs(text, f);
        fclose(f);
        snprintf(cmd, sizeof cmd,
                 "python3 -c 'import json,sys\n"
                 "n=0\n"
                 "for l in sys.stdin:\n"
                 "  l=l.strip()\n"
                 "  if l:\n"
                 "    json.loads(l); n+=1\n"
                 "sys.exit(0 if n else 3)' < %s 2>/dev/null",
                 path);
        if (how)
            *how = "python3";
        return system(cmd) == 0;
    }
    if (how)
        *how = "structural";
    int lines = 0;
    for (const char *p = text; *p;) {
        const char *nl = strchr(p, '\n');
        size_t n = nl ? (size_t)(nl - p) : strlen(p);
        if (n > 0) {
            if (!cli_json_line_shape_ok(p, n))
                return 0;
            lines++;
        }
        p += n + (nl != NULL);
    }
    return lines > 0;
}

#define ASSERT_JSON_LINES(text)                                                \
    do {                                                                       \
        const char *how_ = "";                                                 \
        if (!cli_json_lines_ok((text), &how_))                                 \
            FAIL("not JSON lines (%s): \"%.3000s\"", how_, (text));            \
    } while (0)

/* ---- files -------------------------------------------------------------- */

/* The contents of a file (static buffer; "" when missing). */
static inline const char *cli_slurp(const char *path) {
    static char buf[65536];
    buf[0] = '\0';
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return buf;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

/* Waits up to timeout_ms until path contains needle; 1 when it does. */
static inline int cli_wait_file(const char *path, const char *needle,
                                int timeout_ms) {
    timeout_ms = emq_test_ms(timeout_ms);
    int64_t end = cli_ms() + timeout_ms;
    while (cli_ms() < end) {
        if (strstr(cli_slurp(path), needle))
            return 1;
        usleep(10000);
    }
    return strstr(cli_slurp(path), needle) != NULL;
}

/* Number of (possibly overlapping) occurrences of needle in s. */
static inline int cli_count(const char *s, const char *needle) {
    int n = 0;
    for (const char *p = s; (p = strstr(p, needle)) != NULL; p++)
        n++;
    return n;
}

/* ---- the server's slow log ----------------------------------------------- */

static inline void srv_slowlog_on(const emq_srv *s) {
    char out[256];
    emq_srv_cmd(s, out, sizeof out, "CONFIG", "SET", "slowlog-max-len",
                "100000", NULL);
    emq_srv_cmd(s, out, sizeof out, "CONFIG", "SET", "slowlog-log-slower-than",
                "0", NULL);
    emq_srv_cmd(s, out, sizeof out, "SLOWLOG", "RESET", NULL);
}

/* Every logged command, newest first, arguments joined by spaces (static
 * buffer). */
static inline const char *srv_slowlog(const emq_srv *s) {
    static char out[1 << 20];
    if (emq_srv_cmd(s, out, sizeof out, "SLOWLOG", "GET", "-1", NULL) != '*')
        FAIL("SLOWLOG GET: %s", out);
    for (char *p = out; *p; p++)
        if (*p == '\n')
            *p = ' ';
    return out;
}

/* ---- a pseudo-terminal on stderr ---------------------------------------- */

/* posix_openpt and friends are XSI: a test file that wants cli_run_pty
 * defines _XOPEN_SOURCE 700 before its first include. */
#if defined(_XOPEN_SOURCE) && _XOPEN_SOURCE >= 600

/* Runs the program with input on stdin (a pipe), stdout to /dev/null and
 * stderr on a pseudo-terminal; what the terminal got goes into err
 * (NUL-terminated), for at most timeout_ms (scaled with the run,
 * emq_test_ms). Returns the exit code. */
static inline int cli_run_pty(const char *url, const char *input,
                              size_t input_len, char *err, size_t err_size,
                              int timeout_ms, const char *const *args) {
    int master = posix_openpt(O_RDWR | O_NOCTTY);
    if (master < 0 || grantpt(master) != 0 || unlockpt(master) != 0)
        SKIP("no pseudo-terminals here (posix_openpt/grantpt/unlockpt)");
    const char *name = ptsname(master);
    ASSERT(name != NULL);
    int slave = open(name, O_RDWR | O_NOCTTY);
    ASSERT(slave >= 0);
    int pin[2];
    ASSERT(pipe(pin) == 0);
    pid_t pid = fork();
    ASSERT(pid >= 0);
    if (pid == 0) {
        dup2(pin[0], 0);
        close(pin[0]);
        close(pin[1]);
        int null = open("/dev/null", O_WRONLY);
        dup2(null, 1);
        dup2(slave, 2);
        close(slave);
        close(master);
        if (url)
            setenv("ECHOMQ_URL", url, 1);
        else
            unsetenv("ECHOMQ_URL");
        unsetenv("ECHOMQ_PASSWORD");
        const char *argv[64];
        int n = 0;
        argv[n++] = "echomq";
        for (int i = 0; args[i] && n < 63; i++)
            argv[n++] = args[i];
        argv[n] = NULL;
        execv(cli_path(), (char *const *)argv);
        _exit(126);
    }
    close(pin[0]);
    close(slave);
    fcntl(pin[1], F_SETFL, O_NONBLOCK);
    int in = pin[1];
    size_t sent = 0, got = 0;
    int64_t end = cli_ms() + emq_test_ms(timeout_ms);
    int open_m = 1;
    while (open_m && cli_ms() < end) {
        struct pollfd p[2];
        int np = 0;
        p[np++] = (struct pollfd){master, POLLIN, 0};
        if (in >= 0)
            p[np++] = (struct pollfd){in, POLLOUT, 0};
        if (poll(p, (nfds_t)np, 50) <= 0) {
            /* The child has exited and its terminal side is closed once
             * reads say EIO; a quiet terminal with a live child waits. */
            continue;
        }
        if (np > 1 && p[1].revents) {
            ssize_t w = write(in, input + sent, input_len - sent);
            if (w > 0)
                sent += (size_t)w;
            if (w < 0 || sent == input_len) {
                close(in);
                in = -1;
            }
        }
        if (p[0].revents) {
            char tmp[4096];
            ssize_t n = read(master, tmp, sizeof tmp);
            if (n <= 0) {
                open_m = 0; /* EIO: every slave descriptor is closed */
            } else {
                size_t k = (size_t)n;
                if (got + k >= err_size)
                    k = err_size - 1 - got;
                memcpy(err + got, tmp, k);
                got += k;
            }
        }
    }
    if (in >= 0)
        close(in);
    close(master);
    err[got] = '\0';
    return cli_wait(pid, 2000);
}
#endif /* _XOPEN_SOURCE */

#endif /* EMQ_TEST_CLI_CHECK_HELPERS_H */
