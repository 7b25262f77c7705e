/* SPDX-License-Identifier: BSD-3-Clause */
/* test_cli_dead_more.c: `echomq dead requeue` with filters (--reason,
 * --older-than, --limit) and `echomq dead list -f`, end to end against a
 * private redis-server, with dead letters made the real way (commands
 * that fail, --max-deliveries 1). */
#include "integ/cli_helpers.h"

#include <signal.h>

/* Adds n entries and runs them through a command exiting code once:
 * each becomes a dead letter with the reason "exit <code>". */
static void make_dead(const emq_srv *s, int n, int code) {
    cli_result r;
    for (int i = 0; i < n; i++) {
        CLI(&r, emq_srv_url(s), "produce", "q", "n=1");
        cli_free(&r);
    }
    char cmd[32];
    snprintf(cmd, sizeof cmd, "exit %d", code);
    CLI(&r, emq_srv_url(s), "consume", "q", "-g", "g", "-c", "c", "-s", "head",
        "--exec", cmd, "--max-deliveries", "1", "--until-idle", "400", "-q");
    ASSERT_EXIT(&r, 0);
    cli_free(&r);
}

TEST_TIMEOUT(cli_dead_requeue_filters, 60) {
    emq_srv *s = emq_srv_start(NULL);
    const char *url = emq_srv_url(s);
    make_dead(s, 3, 3);
    make_dead(s, 2, 4);
    ASSERT_EQ_INT(srv_int(s, "XLEN", "emq:{q}:dead"), 5);
    cli_result r;
    CLI(&r, url, "dead", "requeue", "q", "--reason", "exit 4");
    ASSERT_EXIT(&r, 0);
    ASSERT_CONTAINS(r.out, "requeued 2 dead letters");
    cli_free(&r);
    ASSERT_EQ_INT(srv_int(s, "XLEN", "emq:{q}:dead"), 3);
    CLI(&r, url, "dead", "requeue", "q", "--reason", "exit 3*", "--limit", "1");
    ASSERT_EXIT(&r, 0);
    ASSERT_CONTAINS(r.out, "requeued 1 dead letter ");
    cli_free(&r);
    ASSERT_EQ_INT(srv_int(s, "XLEN", "emq:{q}:dead"), 2);
    /* None is an hour old: nothing moves (not "all"). */
    CLI(&r, url, "dead", "requeue", "q", "--older-than", "3600000");
    ASSERT_EXIT(&r, 0);
    ASSERT_CONTAINS(r.out, "requeued 0 dead letters");
    cli_free(&r);
    ASSERT_EQ_INT(srv_int(s, "XLEN", "emq:{q}:dead"), 2);
    CLI(&r, url, "dead", "requeue", "q", "--older-than", "0");
    ASSERT_EXIT(&r, 0);
    ASSERT_CONTAINS(r.out, "requeued 2 dead letters");
    cli_free(&r);
    ASSERT_EQ_INT(srv_int(s, "XLEN", "emq:{q}:dead"), 0);
    CLI(&r, url, "dead", "list", "q", "--reason", "x");
    ASSERT_EXIT(&r, 2);
    cli_free(&r);
    CLI(&r, url, "dead", "requeue", "q", "1-0", "--limit", "1");
    ASSERT_EXIT(&r, 2);
    cli_free(&r);
    emq_srv_stop(s);
}

TEST_TIMEOUT(cli_dead_list_follows_new_dead_letters, 60) {
    emq_srv *s = emq_srv_start(NULL);
    make_dead(s, 1, 3);
    int out;
    pid_t pid = cli_spawn(emq_srv_url(s),
                          CLI_ARGS("dead", "list", "q", "-f", "--json"), NULL,
                          &out, NULL);
    /* The first dead letter printed: it follows now, so the two made next
     * come through the follow (after a fixed 300 ms, a slow start would
     * have listed them with the first instead). */
    char text[16384] = "";
    size_t len = 0;
    int64_t end = cli_ms() + emq_test_ms(8000);
    while (cli_ms() < end && strchr(text, '\n') == NULL) {
        ssize_t n = read(out, text + len, sizeof text - 1 - len);
        if (n > 0)
            len += (size_t)n;
        text[len] = '\0';
    }
    ASSERT_EQ_INT(cli_lines(text), 1);
    make_dead(s, 2, 5);
    while (cli_ms() < end) {
        ssize_t n = read(out, text + len, sizeof text - 1 - len);
        if (n > 0)
            len += (size_t)n;
        text[len] = '\0';
        int lines = 0;
        for (const char *c = text; *c; c++)
            lines += *c == '\n';
        if (lines >= 3)
            break;
    }
    kill(pid, SIGTERM);
    ASSERT_EQ_INT(cli_wait(pid, 5000), 0);
    ASSERT_EQ_INT(cli_lines(text), 3);
    ASSERT_CONTAINS(text, "\"reason\":\"exit 3\"");
    ASSERT(strstr(text, "\"reason\":\"exit 5\"") != NULL);
    close(out);
    emq_srv_stop(s);
}

/* A dead letter no consumer wrote (a worker credential's XADD) is refused
 * by `dead requeue`, left in place, and named; --force moves it. */
TEST(cli_dead_requeue_refuses_a_forged_letter_without_force) {
    emq_srv *s = emq_srv_start(NULL);
    const char *url = emq_srv_url(s);
    char out[256];
    emq_srv_cmd(s, out, sizeof out, "XADD", "emq:{q}", "*", "n", "1", NULL);
    emq_srv_cmd(s, out, sizeof out, "XADD", "emq:{q}:dead", "*", "cmd", "evil",
                NULL);
    cli_result r;
    CLI(&r, url, "dead", "requeue", "q", "--all");
    ASSERT_EXIT(&r, 1);
    ASSERT_CONTAINS(r.out, "requeued 0 dead letters");
    ASSERT_ONE_LINE(r.err);
    ASSERT_CONTAINS(r.err, "not a dead letter");
    ASSERT_CONTAINS(r.err, "--force");
    cli_free(&r);
    ASSERT_EQ_INT(srv_int(s, "XLEN", "emq:{q}:dead"), 1);
    ASSERT_EQ_INT(srv_int(s, "XLEN", "emq:{q}"), 1);
    CLI(&r, url, "dead", "requeue", "q", "--all", "--force");
    ASSERT_EXIT(&r, 0);
    ASSERT_CONTAINS(r.out, "requeued 1 dead letter onto");
    cli_free(&r);
    ASSERT_EQ_INT(srv_int(s, "XLEN", "emq:{q}:dead"), 0);
    ASSERT_EQ_INT(srv_int(s, "XLEN", "emq:{q}"), 2);
    emq_srv_stop(s);
}
