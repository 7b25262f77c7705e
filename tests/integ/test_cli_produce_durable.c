/* SPDX-License-Identifier: BSD-3-Clause */
/* test_cli_produce_durable.c: `echomq produce --timeout` and
 * `--wait-replicas`, and `echomq consume --wait-for-server`, end to end
 * against private redis-servers (one with a real replica). */
#include "integ/cli_helpers.h"

#include <signal.h>

/* A stalled server (SIGSTOP): the call gives up after --timeout, exit 1. */
TEST_TIMEOUT(cli_produce_timeout_bounds_a_stalled_server, 30) {
    emq_srv *s = emq_srv_start(NULL);
    cli_result r;
    CLI(&r, emq_srv_url(s), "produce", "q", "a=1");
    ASSERT_EXIT(&r, 0);
    cli_free(&r);
    ASSERT(kill(emq_srv_pid(s), SIGSTOP) == 0);
    int64_t t0 = cli_ms();
    CLI(&r, emq_srv_url(s), "produce", "q", "a=2", "--timeout", "400");
    int64_t took = cli_ms() - t0;
    ASSERT(kill(emq_srv_pid(s), SIGCONT) == 0);
    ASSERT_EXIT(&r, 1);
    ASSERT_ONE_LINE(r.err);
    printf("    stalled server, --timeout 400: exit 1 after %lld ms: %s",
           (long long)took, r.err);
    /* About 400 ms; without --timeout, the 5 s of command_timeout_ms. */
    ASSERT(took < emq_test_ms(2000));
    cli_free(&r);
    /* The same bound for lines. */
    ASSERT(kill(emq_srv_pid(s), SIGSTOP) == 0);
    t0 = cli_ms();
    CLI_IN(&r, emq_srv_url(s), "x\ny\n", "produce", "q", "--lines", "--timeout",
           "400");
    took = cli_ms() - t0;
    ASSERT(kill(emq_srv_pid(s), SIGCONT) == 0);
    ASSERT_EXIT(&r, 1);
    ASSERT_CONTAINS(r.err, "not sent within 400 ms");
    ASSERT(took < emq_test_ms(2000));
    cli_free(&r);
    CLI(&r, emq_srv_url(s), "produce", "q", "a=1", "--timeout", "0");
    ASSERT_EXIT(&r, 2);
    ASSERT_CONTAINS(r.err, "--timeout");
    cli_free(&r);
    emq_srv_stop(s);
}

static void follow(emq_srv *replica, const emq_srv *master) {
    char out[256], port[16];
    snprintf(port, sizeof port, "%d", emq_srv_port(master));
    ASSERT_EQ_INT(emq_srv_cmd(replica, out, sizeof out, "REPLICAOF",
                              "127.0.0.1", port, NULL),
                  '+');
    int64_t end = cli_ms() + emq_test_ms(8000);
    while (cli_ms() < end) {
        static char info[8192];
        emq_srv_cmd(replica, info, sizeof info, "INFO", "replication", NULL);
        if (strstr(info, "master_link_status:up"))
            return;
        usleep(20000);
    }
    FAIL("the replica did not sync within 8 s");
}

TEST_TIMEOUT(cli_produce_wait_replicas, 40) {
    emq_srv *m = emq_srv_start(NULL);
    cli_result r;
    /* No replica: written, not replicated, exit 1 saying so. */
    CLI(&r, emq_srv_url(m), "produce", "q", "a=1", "--wait-replicas", "1");
    ASSERT_EXIT(&r, 1);
    ASSERT_ONE_LINE(r.err);
    ASSERT_CONTAINS(r.err, "0 of 1 replicas");
    ASSERT_CONTAINS(r.err, "1 written");
    ASSERT_EQ_INT(srv_int(m, "XLEN", "emq:{q}"), 1);
    cli_free(&r);
    /* A replica: every line confirmed, exit 0, IDs printed in order. */
    emq_srv *rep = emq_srv_start(NULL);
    char out[64];
    emq_srv_cmd(m, out, sizeof out, "CONFIG", "SET", "repl-diskless-sync-delay",
                "0", NULL);
    follow(rep, m);
    static char lines[8000];
    size_t at = 0;
    for (int i = 0; i < 500; i++)
        at += (size_t)snprintf(lines + at, sizeof lines - at, "%d\n", i);
    /* A loaded machine's replica may confirm 500 lines later than the
     * default second: a scaled bound. */
    char wait_ms[48];
    snprintf(wait_ms, sizeof wait_ms, "producer.wait_timeout_ms=%d",
             emq_test_ms(10000));
    CLI_IN(&r, emq_srv_url(m), lines, "-X", wait_ms, "produce", "q", "--lines",
           "--wait-replicas", "1", "--print-ids");
    ASSERT_EXIT(&r, 0);
    ASSERT_EQ_INT(cli_lines(r.out), 500);
    ASSERT_EQ_INT(srv_int(rep, "XLEN", "emq:{q}"), 501);
    cli_free(&r);
    CLI(&r, emq_srv_url(m), "produce", "q", "a=1", "--wait-replicas", "x");
    ASSERT_EXIT(&r, 2);
    ASSERT_CONTAINS(r.err, "--wait-replicas");
    cli_free(&r);
    emq_srv_stop(rep);
    emq_srv_stop(m);
}

TEST_TIMEOUT(cli_consume_wait_for_server, 40) {
    int port = emq_free_port();
    char url[64];
    snprintf(url, sizeof url, "redis://127.0.0.1:%d", port);
    cli_result r;
    /* Without the flag: exit 1 at once. */
    CLI(&r, url, "consume", "q", "--group", "g", "--consumer", "c", "--start",
        "new", "--limit", "1");
    ASSERT_EXIT(&r, 1);
    ASSERT_CONTAINS(r.err, "127.0.0.1");
    cli_free(&r);
    int out;
    pid_t pid = cli_spawn(url,
                          CLI_ARGS("consume", "q", "--group", "g", "--consumer",
                                   "c", "--start", "new", "--limit", "2",
                                   "--wait-for-server", "-q"),
                          NULL, &out, NULL);
    /* Nothing shows its attempts: a scaled pause before "still waiting". */
    usleep((useconds_t)emq_test_ms(700) * 1000);
    ASSERT(waitpid(pid, NULL, WNOHANG) == 0); /* still waiting */
    emq_srv_opts o = {.port = port};
    emq_srv *s = emq_srv_start(&o);
    int64_t end = cli_ms() + emq_test_ms(10000);
    while (cli_ms() < end && srv_int(s, "EXISTS", "emq:{q}") == 0)
        usleep(20000); /* the group (MKSTREAM) once it connected */
    usleep(100 * 1000);
    CLI(&r, emq_srv_url(s), "produce", "q", "n=1");
    cli_free(&r);
    CLI(&r, emq_srv_url(s), "produce", "q", "n=2");
    cli_free(&r);
    ASSERT_EQ_INT(cli_wait(pid, 10000), 0);
    char text[4096];
    ssize_t n = read(out, text, sizeof text - 1);
    text[n > 0 ? n : 0] = '\0';
    ASSERT_CONTAINS(text, "\"n\":\"1\"");
    ASSERT_CONTAINS(text, "\"n\":\"2\"");
    close(out);
    emq_srv_stop(s);
}
