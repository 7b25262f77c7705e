/* SPDX-License-Identifier: BSD-3-Clause */
/* test_cli_tail.c: `echomq tail` end to end against a private
 * redis-server: the last N entries in order, --from an ID, a time or -N,
 * --format, -f following new entries until SIGTERM (exit 0), and no group
 * created or entry pinned by looking. */
#include "integ/cli_helpers.h"

#include <signal.h>

static void fill(const emq_srv *s) {
    char out[64], id[32], v[16];
    for (int i = 1; i <= 20; i++) {
        snprintf(id, sizeof id, "%d-0", i * 1000);
        snprintf(v, sizeof v, "v%d", i);
        emq_srv_cmd(s, out, sizeof out, "XADD", "emq:{t}", id, "n", v, NULL);
    }
}

TEST(cli_tail_last_from_and_format) {
    emq_srv *s = emq_srv_start(NULL);
    fill(s);
    const char *url = emq_srv_url(s);
    cli_result r;
    CLI(&r, url, "tail", "t");
    ASSERT_EXIT(&r, 0);
    ASSERT_EQ_INT(cli_lines(r.out), 10);
    /* Oldest first: v11 .. v20. */
    ASSERT(strstr(r.out, "\"v11\"") < strstr(r.out, "\"v20\""));
    ASSERT_NOT_CONTAINS(r.out, "\"v10\"");
    ASSERT_CONTAINS(r.out, "\"stream\":\"emq:{t}\"");
    cli_free(&r);
    CLI(&r, url, "tail", "t", "-n", "3", "--format", "%i %f{n}");
    ASSERT_EXIT(&r, 0);
    ASSERT_EQ_STR(r.out, "18000-0 v18\n19000-0 v19\n20000-0 v20\n");
    cli_free(&r);
    CLI(&r, url, "tail", "t", "--from", "5000-0", "-n", "2", "--format",
        "%f{n}");
    ASSERT_EXIT(&r, 0);
    ASSERT_EQ_STR(r.out, "v5\nv6\n");
    cli_free(&r);
    CLI(&r, url, "tail", "t", "--from", "@7000", "-n", "1", "--format",
        "%f{n}");
    ASSERT_EXIT(&r, 0);
    ASSERT_EQ_STR(r.out, "v7\n");
    cli_free(&r);
    CLI(&r, url, "tail", "t", "--from", "-2", "--format", "%f{n}");
    ASSERT_EXIT(&r, 0);
    ASSERT_EQ_STR(r.out, "v19\nv20\n");
    cli_free(&r);
    CLI(&r, url, "tail", "t", "--from", "@later");
    ASSERT_EXIT(&r, 2);
    cli_free(&r);
    /* Nothing joined: no group exists. */
    char out[256];
    emq_srv_cmd(s, out, sizeof out, "XINFO", "GROUPS", "emq:{t}", NULL);
    ASSERT_EQ_STR(out, "");
    emq_srv_stop(s);
}

/* Appends what fd gives to text (size bytes, *len used, kept
 * NUL-terminated) until it holds want, for at most 5 s (scaled). */
static void read_until(int fd, char *text, size_t size, size_t *len,
                       const char *want) {
    int64_t end = cli_ms() + emq_test_ms(5000);
    while (cli_ms() < end && !strstr(text, want)) {
        ssize_t n = read(fd, text + *len, size - 1 - *len);
        if (n > 0)
            *len += (size_t)n;
        text[*len] = '\0';
    }
}

TEST_TIMEOUT(cli_tail_follow_until_sigterm, 30) {
    emq_srv *s = emq_srv_start(NULL);
    fill(s);
    int out;
    pid_t pid =
        cli_spawn(emq_srv_url(s),
                  CLI_ARGS("tail", "t", "-n", "1", "-f", "--format", "%f{n}"),
                  NULL, &out, NULL);
    /* Add the later entries once tail has shown the last one (then it
     * follows), not after a guess at how long its start takes. */
    char text[4096] = "";
    size_t len = 0;
    read_until(out, text, sizeof text, &len, "v20\n");
    char o[64];
    emq_srv_cmd(s, o, sizeof o, "XADD", "emq:{t}", "*", "n", "later1", NULL);
    emq_srv_cmd(s, o, sizeof o, "XADD", "emq:{t}", "*", "n", "later2", NULL);
    read_until(out, text, sizeof text, &len, "later2\n");
    kill(pid, SIGTERM);
    ASSERT_EQ_INT(cli_wait(pid, 5000), 0);
    ASSERT_EQ_STR(text, "v20\nlater1\nlater2\n");
    close(out);
    emq_srv_stop(s);
}

/* tail -f | head: once the reader of its stdout has gone, tail ends
 * (exit 0, nothing said), also while no entry comes to write; it kept
 * blocking on the stream for good. */
TEST_TIMEOUT(cli_tail_follow_ends_when_stdout_closes, 30) {
    emq_srv *s = emq_srv_start(NULL);
    fill(s);
    int out, err;
    pid_t pid =
        cli_spawn(emq_srv_url(s),
                  CLI_ARGS("tail", "t", "-n", "1", "-f", "--format", "%f{n}"),
                  NULL, &out, &err);
    char text[256] = "";
    size_t len = 0;
    read_until(out, text, sizeof text, &len, "v20\n");
    ASSERT_EQ_STR(text, "v20\n");
    close(out); /* what head does after its lines; nothing new is added */
    ASSERT_EQ_INT(cli_wait(pid, 10000), 0);
    char said[256];
    ssize_t n = read(err, said, sizeof said - 1);
    ASSERT_EQ_INT(n, 0);
    close(err);
    emq_srv_stop(s);
}
