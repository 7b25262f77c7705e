/* SPDX-License-Identifier: BSD-3-Clause */
/* test_cli_top.c: `echomq top` against a private redis-server: in a real
 * terminal (a private tmux server: new-session, send-keys, capture-pane;
 * the tmux server is stopped by its pid) it draws the queues, groups and
 * consumers, sorts on s and quits on q; not on a terminal it prints the
 * table -n times with rates from the second look on. */
#include "integ/cli_helpers.h"

#include <signal.h>

/* Runs tmux with the private socket sock; its stdout into out (may be
 * NULL). Returns its exit status. */
static int tmux(const char *sock, char *out, size_t size, const char *a1,
                const char *a2, const char *a3, const char *a4, const char *a5,
                const char *a6) {
    char cmd[16384];
    snprintf(cmd, sizeof cmd, "tmux -S '%s' %s %s %s %s %s %s 2>&1", sock, a1,
             a2 ? a2 : "", a3 ? a3 : "", a4 ? a4 : "", a5 ? a5 : "",
             a6 ? a6 : "");
    FILE *p = popen(cmd, "r");
    if (p == NULL)
        FAIL("popen tmux failed");
    size_t len = 0;
    if (out) {
        len = fread(out, 1, size - 1, p);
        out[len] = '\0';
    } else {
        char sink[512];
        while (fread(sink, 1, sizeof sink, p) > 0)
            ;
    }
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void state(const emq_srv *s) {
    const char *url = emq_srv_url(s);
    cli_result r;
    CLI_IN(&r, url, "1\n2\n3\n4\n", "produce", "alpha", "--lines");
    cli_free(&r);
    CLI_IN(&r, url, "1\n2\n3\n4\n5\n6\n7\n8\n9\n", "produce", "beta",
           "--lines");
    cli_free(&r);
    CLI(&r, url, "consume", "alpha", "-g", "workers", "-c", "w1", "-s", "head",
        "--limit", "3", "--no-ack", "-q");
    ASSERT_EXIT(&r, 0);
    cli_free(&r);
    CLI(&r, url, "group", "limits", "alpha", "-g", "workers", "--rate", "30");
    ASSERT_EXIT(&r, 0);
    cli_free(&r);
}

TEST_TIMEOUT(cli_top_in_a_real_terminal, 60) {
    if (access("/usr/bin/tmux", X_OK) != 0)
        FAIL("tmux is not installed (scripts/deps.sh installs it)");
    emq_srv *s = emq_srv_start(NULL);
    state(s);
    char sock[512], cmd[8192], screen[16384];
    snprintf(sock, sizeof sock, "%s/tmux.sock", emq_srv_dir(s));
    snprintf(cmd, sizeof cmd, "'%s -u %s top --interval 300'", cli_path(),
             emq_srv_url(s));
    ASSERT_EQ_INT(tmux(sock, NULL, 0, "new-session", "-d", "-s", "t",
                       "-x 160 -y 50", cmd),
                  0);
    char pid_text[32];
    tmux(sock, pid_text, sizeof pid_text, "display-message", "-p", "-t", "t",
         "'#{pid}'", NULL);
    pid_t server = (pid_t)atol(pid_text);
    int64_t end = cli_ms() + emq_test_ms(8000);
    screen[0] = '\0';
    while (cli_ms() < end && !strstr(screen, "consumer w1")) {
        usleep(100 * 1000);
        tmux(sock, screen, sizeof screen, "capture-pane", "-p", "-t", "t", NULL,
             NULL);
    }
    printf("    the screen:\n%s", screen);
    ASSERT_CONTAINS(screen, "echomq top");
    ASSERT_CONTAINS(screen, "sort: name");
    ASSERT_CONTAINS(screen, " DEAD  DELAYED ");
    ASSERT_CONTAINS(screen, "limits 30/s 0");
    ASSERT_CONTAINS(screen, "alpha");
    ASSERT_CONTAINS(screen, "beta");
    ASSERT_CONTAINS(screen, "workers");
    ASSERT_CONTAINS(screen, "consumer w1");
    ASSERT(strstr(screen, "alpha") < strstr(screen, "beta")); /* by name */
    /* s: by length, beta (9) before alpha (4). */
    tmux(sock, NULL, 0, "send-keys", "-t", "t", "s", NULL, NULL);
    end = cli_ms() + emq_test_ms(5000);
    while (cli_ms() < end && !strstr(screen, "sort: length")) {
        usleep(100 * 1000);
        tmux(sock, screen, sizeof screen, "capture-pane", "-p", "-t", "t", NULL,
             NULL);
    }
    ASSERT_CONTAINS(screen, "sort: length");
    ASSERT(strstr(screen, "beta") < strstr(screen, "alpha"));
    /* q: top ends, and with it the session. */
    tmux(sock, NULL, 0, "send-keys", "-t", "t", "q", NULL, NULL);
    end = cli_ms() + emq_test_ms(5000);
    int alive = 1;
    while (cli_ms() < end && alive) {
        usleep(100 * 1000);
        alive = tmux(sock, NULL, 0, "has-session", "-t", "t", NULL, NULL,
                     NULL) == 0;
    }
    if (alive && server > 0)
        kill(server, SIGTERM);
    else if (server > 0 && kill(server, 0) == 0)
        kill(server, SIGTERM); /* the tmux server of this test */
    ASSERT(!alive);
    emq_srv_stop(s);
}

TEST_TIMEOUT(cli_top_not_a_terminal_prints_tables, 30) {
    emq_srv *s = emq_srv_start(NULL);
    state(s);
    cli_result r;
    CLI(&r, emq_srv_url(s), "top", "alpha", "-n", "2", "--interval", "200");
    ASSERT_EXIT(&r, 0);
    /* Two tables; the header twice; rates from the second on. */
    const char *first = strstr(r.out, "echomq top");
    ASSERT(first && strstr(first + 1, "echomq top"));
    ASSERT_CONTAINS(r.out, "workers");
    ASSERT_CONTAINS(r.out, "consumer w1");
    ASSERT_NOT_CONTAINS(r.out, "beta");
    ASSERT_NOT_CONTAINS(r.out, "\033");
    ASSERT_CONTAINS(strstr(first + 1, "echomq top"), "0.0");
    cli_free(&r);
    CLI(&r, emq_srv_url(s), "top", "--interval", "5");
    ASSERT_EXIT(&r, 2);
    cli_free(&r);
    emq_srv_stop(s);
}

/* Refreshes describe each queue through a handle kept from the last one
 * (it reconnects by itself): five refreshes of two queues open about
 * five scans' connections and two handles', where a handle per queue per
 * refresh opened fifteen. */
TEST_TIMEOUT(cli_top_keeps_a_handle_per_queue_across_refreshes, 30) {
    emq_srv *s = emq_srv_start(NULL);
    state(s);
    long long before = srv_connections(s);
    cli_result r;
    CLI(&r, emq_srv_url(s), "top", "-n", "5", "--interval", "100");
    ASSERT_EXIT(&r, 0);
    ASSERT_CONTAINS(r.out, "beta");
    cli_free(&r);
    long long opened = srv_connections(s) - before;
    fprintf(stderr, "    5 refreshes of 2 queues opened %lld connections\n",
            opened);
    ASSERT(opened >= 7);
    ASSERT(opened <= 9);
    emq_srv_stop(s);
}

/* echomq top | head: once the reader of its stdout has gone, top ends
 * (exit 0, nothing said); it ignored the failed writes and polled on. */
TEST_TIMEOUT(cli_top_ends_when_stdout_closes, 30) {
    emq_srv *s = emq_srv_start(NULL);
    state(s);
    int out, err;
    pid_t pid = cli_spawn(emq_srv_url(s), CLI_ARGS("top", "--interval", "100"),
                          NULL, &out, &err);
    char text[512];
    ssize_t n = 0;
    int64_t end = cli_ms() + emq_test_ms(5000);
    while (cli_ms() < end && n <= 0)
        n = read(out, text, sizeof text);
    ASSERT(n > 0); /* it drew once */
    close(out);
    ASSERT_EQ_INT(cli_wait(pid, 10000), 0);
    char said[256];
    ASSERT_EQ_INT(read(err, said, sizeof said - 1), 0);
    close(err);
    emq_srv_stop(s);
}
