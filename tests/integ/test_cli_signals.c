/* SPDX-License-Identifier: BSD-3-Clause */
/* test_cli_signals.c: stopping a running `echomq consume` with signals
 * while an --exec handler is busy (docs/CLI.md "consume"):
 *
 * - one SIGINT, SIGTERM or SIGHUP stops gracefully: the handler in progress
 *   finishes, its entry is acknowledged, the summary is printed and the
 *   exit status is 0; entries read but not handled stay pending;
 * - a second signal exits at once with 128 + its number, leaving the entry
 *   in progress pending (unacknowledged).
 *
 * The handler appends "start ID" and "done ID" to a file in the test's
 * folder and writes its own pid and its sleep's, so the test can wait for
 * it and end what is left of it after an immediate exit.
 */
#include "integ/cli_check_helpers.h"

/* The --exec command: records its start, sleeps secs, records its end. */
static void slow_handler(char *cmd, size_t size, const char *log,
                         const char *pidfile, const char *secs) {
    snprintf(cmd, size,
             "cat >/dev/null; echo \"start $EMQ_ID\" >> %s; sleep %s & "
             "echo \"$$ $!\" > %s; wait $!; echo \"done $EMQ_ID\" >> %s",
             log, secs, pidfile, log);
}

/* Three entries on q; starts consume with the slow handler and waits
 * until the first handler is running. Returns the consume's pid. */
static pid_t start_busy_consumer(emq_srv *s, const char *log,
                                 const char *pidfile, const char *secs,
                                 int *err_fd) {
    cli_result r;
    CLI_IN(&r, emq_srv_url(s), "1\n2\n3\n", "produce", "q", "--lines", "-q");
    ASSERT_EXIT(&r, 0);
    cli_free(&r);
    char cmd[1500];
    slow_handler(cmd, sizeof cmd, log, pidfile, secs);
    pid_t pid =
        cli_spawn(emq_srv_url(s),
                  CLI_ARGS("consume", "q", "-g", "g", "-c", "c", "--start",
                           "head", "--block", "200", "--exec", cmd),
                  NULL, NULL, err_fd);
    if (!cli_wait_file(log, "start ", 5000)) {
        kill(pid, SIGKILL);
        cli_wait(pid, 2000);
        FAIL("the handler did not start within 5 s");
    }
    return pid;
}

/* Reads fd to its end (bounded) into buf. */
static void drain(int fd, char *buf, size_t size, int timeout_ms) {
    size_t got = 0;
    int64_t end = cli_ms() + timeout_ms;
    while (cli_ms() < end && got + 1 < size) {
        struct pollfd p = {fd, POLLIN, 0};
        if (poll(&p, 1, 50) <= 0)
            continue;
        ssize_t n = read(fd, buf + got, size - 1 - got);
        if (n <= 0)
            break;
        got += (size_t)n;
    }
    buf[got] = '\0';
    close(fd);
}

static long long pending_count(emq_srv *s) {
    char out[256];
    emq_srv_cmd(s, out, sizeof out, "XPENDING", "emq:{q}", "g", NULL);
    return atoll(out); /* the first line: the number pending */
}

/* The next run of consumer c (pipe mode, until idle) prints exactly want
 * entries: nothing the stopped run did not acknowledge was lost, nothing
 * it acknowledged comes again. */
static void rest_comes_back(emq_srv *s, int want) {
    cli_result r;
    CLI(&r, emq_srv_url(s), "consume", "q", "-g", "g", "-c", "c", "--start",
        "head", "--until-idle", "300", "-q");
    ASSERT_EXIT(&r, 0);
    ASSERT_EQ_INT(cli_lines(r.out), want);
    cli_free(&r);
    ASSERT_EQ_INT(pending_count(s), 0);
}

static void graceful(int sig) {
    emq_srv *s = emq_srv_start(NULL);
    char log[600], pidfile[600];
    snprintf(log, sizeof log, "%s/handled", emq_test_tmpdir());
    snprintf(pidfile, sizeof pidfile, "%s/handler.pid", emq_test_tmpdir());
    int err;
    pid_t pid = start_busy_consumer(s, log, pidfile, "1", &err);
    int64_t t0 = cli_ms();
    kill(pid, sig);
    int code = cli_wait(pid, 8000);
    int64_t took = cli_ms() - t0;
    char text[4096];
    drain(err, text, sizeof text, 1000);
    if (code != 0)
        FAIL("exit %d after one signal %d, want 0; stderr \"%s\"", code, sig,
             text);
    /* The handler in progress finished and its entry was acknowledged. */
    const char *handled = cli_slurp(log);
    ASSERT_EQ_INT(cli_count(handled, "start "), 1);
    ASSERT_EQ_INT(cli_count(handled, "done "), 1);
    /* It waited for the 1 s handler: its entry acknowledged, which only a
     * finished handler allows. (A bound on the time, 500 ms, counted on
     * the signal going out within half a second of the handler's start.) */
    printf("    exit 0 %lld ms after signal %d\n", (long long)took, sig);
    ASSERT_CONTAINS(text, "echomq: consumed 1 entry (acknowledged 1,");
    /* Read ahead but not handled: pending for c, handed back (at most 2:
     * max_in_flight is twice the commands that run at once). */
    ASSERT(pending_count(s) <= 2);
    char id[64];
    snprintf(id, sizeof id, "%.*s", (int)strcspn(handled + 6, "\n"),
             handled + 6);
    char out[1024];
    emq_srv_cmd(s, out, sizeof out, "XPENDING", "emq:{q}", "g", "-", "+", "10",
                NULL);
    ASSERT_NOT_CONTAINS(out, id);
    rest_comes_back(s, 2);
    emq_srv_stop(s);
}

TEST(cli_consume_one_sigint_finishes_the_handler_and_exits_0) {
    graceful(SIGINT);
}

TEST(cli_consume_one_sigterm_finishes_the_handler_and_exits_0) {
    graceful(SIGTERM);
}

/* A closed terminal or a supervisor's reload: it killed consume at once
 * and left its handler running, orphaned. */
TEST(cli_consume_one_sighup_finishes_the_handler_and_exits_0) {
    graceful(SIGHUP);
}

static void immediate(int first, int second) {
    emq_srv *s = emq_srv_start(NULL);
    char log[600], pidfile[600];
    snprintf(log, sizeof log, "%s/handled", emq_test_tmpdir());
    snprintf(pidfile, sizeof pidfile, "%s/handler.pid", emq_test_tmpdir());
    int err;
    /* A handler of 30 s (ended by pid below): the checks that it still
     * runs, and did not finish, hold however slow the machine. */
    pid_t pid = start_busy_consumer(s, log, pidfile, "30", &err);
    kill(pid, first);
    /* Room for the signal to land. */
    int pause_ms = emq_test_ms(200);
    usleep((useconds_t)pause_ms * 1000);
    /* Still running: the first signal waits for the handler. */
    ASSERT_EQ_INT(waitpid(pid, NULL, WNOHANG), 0);
    kill(pid, second);
    int code = cli_wait(pid, 5000);
    char text[4096];
    drain(err, text, sizeof text, 500);
    if (code != 128 + second)
        FAIL("exit %d after signals %d then %d, want %d; stderr \"%s\"", code,
             first, second, 128 + second, text);
    /* At once, not after the 30 s handler: the exit code is the second
     * signal's, no summary (it did not stop gracefully). */
    ASSERT_NOT_CONTAINS(text, "consumed");
    /* The entry in progress was not acknowledged. */
    ASSERT_EQ_INT(cli_count(cli_slurp(log), "done "), 0);
    /* The entry in progress (and what was read ahead) stays pending. */
    ASSERT(pending_count(s) >= 1);
    /* End the handler left behind (it is ours, by its pid). */
    int sh = 0, sleeper = 0;
    ASSERT(cli_wait_file(pidfile, " ", 2000));
    if (sscanf(cli_slurp(pidfile), "%d %d", &sh, &sleeper) == 2) {
        if (sh > 1)
            kill((pid_t)sh, SIGKILL);
        if (sleeper > 1)
            kill((pid_t)sleeper, SIGKILL);
    }
    /* Killed at once: nothing was acknowledged, all 3 come back. */
    rest_comes_back(s, 3);
    emq_srv_stop(s);
}

TEST(cli_consume_sigterm_then_sigint_exits_at_once) {
    immediate(SIGTERM, SIGINT);
}

TEST(cli_consume_two_sigterms_exit_at_once) { immediate(SIGTERM, SIGTERM); }
