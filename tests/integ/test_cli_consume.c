/* SPDX-License-Identifier: BSD-3-Clause */
/* test_cli_consume.c: `echomq consume` end to end against a private
 * redis-server: --exec with its environment and exit codes (0 acks, other
 * exits end in the dead letters with "exit N" after --max-deliveries),
 * --concurrency runs on the one name C, SIGTERM stops gracefully with exit 0,
 * and the password of a URL never shows in /proc/PID/cmdline of a running
 * consume.
 */
#include "harness/fakepeer.h"
#include "integ/cli_helpers.h"

TEST(cli_consume_exec_environment_and_ack) {
    emq_srv *s = emq_srv_start(NULL);
    const char *url = emq_srv_url(s);
    cli_result r;
    CLI(&r, url, "produce", "q", "k=v", "-q");
    ASSERT_EXIT(&r, 0);
    cli_free(&r);
    char cmd[1024];
    snprintf(cmd, sizeof cmd,
             "{ echo \"$EMQ_QUEUE $EMQ_GROUP $EMQ_CONSUMER $EMQ_DELIVERIES\";"
             " cat; echo; echo \"$EMQ_ID\"; } > %s/seen",
             emq_test_tmpdir());
    CLI(&r, url, "consume", "q", "-g", "grp", "-c", "w", "--start", "head",
        "--limit", "1", "--exec", cmd);
    ASSERT_EXIT(&r, 0);
    ASSERT_CONTAINS(r.err, "consumed 1 entry (acknowledged 1");
    cli_free(&r);
    char path[512], seen[1024] = "";
    snprintf(path, sizeof path, "%s/seen", emq_test_tmpdir());
    FILE *f = fopen(path, "r");
    ASSERT(f != NULL);
    size_t n = fread(seen, 1, sizeof seen - 1, f);
    seen[n] = '\0';
    fclose(f);
    ASSERT_CONTAINS(seen, "q grp w 1\n{\"id\":\"");
    ASSERT_CONTAINS(seen, "\"deliveries\":1,\"fields\":{\"k\":\"v\"}}\n");
    char out[256];
    emq_srv_cmd(s, out, sizeof out, "XPENDING", "emq:{q}", "grp", NULL);
    ASSERT(out[0] == '0');
    emq_srv_stop(s);
}

TEST(cli_consume_exec_failure_ends_in_dead_letters) {
    emq_srv *s = emq_srv_start(NULL);
    const char *url = emq_srv_url(s);
    cli_result r;
    CLI(&r, url, "produce", "q", "job=1", "-q");
    cli_free(&r);
    CLI(&r, url, "consume", "q", "-g", "g", "-c", "w", "--start", "head",
        "--max-deliveries", "2", "--claim-idle", "100", "--claim-interval",
        "100", "--until-idle", "1500", "--exec", "cat >/dev/null; exit 3");
    ASSERT_EXIT(&r, 0);
    ASSERT_CONTAINS(r.err, "dead-lettered 1");
    cli_free(&r);
    char out[1024];
    emq_srv_cmd(s, out, sizeof out, "XRANGE", "emq:{q}:dead", "-", "+", NULL);
    ASSERT_CONTAINS(out, "emq.reason\nexit 3\n");
    ASSERT_CONTAINS(out, "emq.deliveries\n2\n");
    ASSERT_CONTAINS(out, "job\n1");
    emq_srv_stop(s);
}

TEST(cli_consume_concurrency_runs_on_one_name) {
    emq_srv *s = emq_srv_start(NULL);
    const char *url = emq_srv_url(s);
    cli_result r;
    CLI_IN(&r, url, "1\n2\n3\n4\n5\n6\n7\n8\n", "produce", "q", "--lines",
           "-q");
    cli_free(&r);
    CLI(&r, url, "consume", "q", "-g", "g", "-c", "C", "--start", "head",
        "--concurrency", "2", "--count", "1", "--until-idle", "500", "--exec",
        "cat >/dev/null; sleep 0.05");
    ASSERT_EXIT(&r, 0);
    ASSERT_CONTAINS(r.err, "consumed 8 entries (acknowledged 8");
    cli_free(&r);
    char out[1024];
    emq_srv_cmd(s, out, sizeof out, "XINFO", "CONSUMERS", "emq:{q}", "g", NULL);
    ASSERT_CONTAINS(out, "name\nC\n");
    ASSERT_NOT_CONTAINS(out, "C-1");
    emq_srv_stop(s);
}

TEST(cli_consume_sigterm_stops_gracefully_and_hides_the_password) {
    emq_srv_opts o = {.requirepass = "Pa55wordXYZ"};
    emq_srv *s = emq_srv_start(&o);
    char url[128];
    snprintf(url, sizeof url, "redis://:Pa55wordXYZ@127.0.0.1:%d",
             emq_srv_port(s));
    int out;
    pid_t pid = cli_spawn(NULL,
                          CLI_ARGS("consume", "q", "-u", url, "-g", "g", "-c",
                                   "c", "--start", "new", "--block", "200"),
                          NULL, &out, NULL);
    /* Wait until it is connected (its lease key appears). */
    int64_t end = cli_ms() + emq_test_ms(5000);
    char reply[256] = "";
    while (cli_ms() < end) {
        emq_srv_cmd(s, reply, sizeof reply, "EXISTS", "emq:{q}:lease:g:c",
                    NULL);
        if (!strcmp(reply, "1"))
            break;
        usleep(20000);
    }
    ASSERT_EQ_STR(reply, "1");
    char path[64], cmdline[4096];
    snprintf(path, sizeof path, "/proc/%d/cmdline", (int)pid);
    FILE *f = fopen(path, "r");
    ASSERT(f != NULL);
    size_t n = fread(cmdline, 1, sizeof cmdline - 1, f);
    fclose(f);
    for (size_t i = 0; i < n; i++)
        if (cmdline[i] == '\0')
            cmdline[i] = ' ';
    cmdline[n] = '\0';
    ASSERT_CONTAINS(cmdline, "consume q -u redis://:");
    ASSERT_CONTAINS(cmdline, "@127.0.0.1:");
    ASSERT_NOT_CONTAINS(cmdline, "Pa55wordXYZ");
    kill(pid, SIGTERM);
    ASSERT_EQ_INT(cli_wait(pid, 3000), 0);
    close(out);
    emq_srv_stop(s);
}

/* --until-idle means "what is there, then exit": a run whose reads are
 * never answered has consumed nothing it could see, and says so with
 * exit 1. It ended with exit 0 and "consumed 0" as if the queue were
 * empty. A proxy in front of a real server swallows every XREADGROUP
 * reply (the handshake, the door and recovery are answered). */
TEST_TIMEOUT(cli_consume_until_idle_fails_when_no_read_is_answered, 60) {
    emq_srv *s = emq_srv_start(NULL);
    cli_result r;
    CLI_IN(&r, emq_srv_url(s), "1\n2\n", "produce", "q", "--lines", "-q");
    ASSERT_EXIT(&r, 0);
    cli_free(&r);
    emq_icept_rule swallow = {"XREADGROUP", 1, "", 0, -1, NULL, 0};
    emq_icept *p = emq_icept_start(emq_srv_port(s), &swallow, 1);
    CLI(&r, emq_icept_url(p), "-X", "command_timeout_ms=300", "-X",
        "connect_timeout_ms=300", "consume", "q", "-g", "g", "-c", "c",
        "--start", "head", "--block", "100", "--until-idle", "200");
    ASSERT_EXIT(&r, 1);
    ASSERT_NOT_CONTAINS(r.err, "echomq: consumed");
    ASSERT_CONTAINS(r.err, "no read of new entries was answered within");
    ASSERT(emq_icept_saw(p, "XREADGROUP", NULL));
    /* The server ran the reads: what they handed to c came back through
     * c's own pending list on a reconnect, and the run says how much. */
    int first = cli_lines(r.out);
    char said[64];
    snprintf(said, sizeof said, "consumed %d entr", first);
    ASSERT_CONTAINS(r.err, said);
    cli_free(&r);
    emq_icept_stop(p);
    /* Nothing was lost: a run on the server itself gets the rest. */
    CLI(&r, emq_srv_url(s), "consume", "q", "-g", "g", "-c", "c", "--start",
        "head", "--until-idle", "300", "-q");
    ASSERT_EXIT(&r, 0);
    ASSERT_EQ_INT(first + cli_lines(r.out), 2);
    cli_free(&r);
    ASSERT_EQ_INT(srv_int(s, "XLEN", "emq:{q}"), 2);
    char o[256];
    emq_srv_cmd(s, o, sizeof o, "XPENDING", "emq:{q}", "g", NULL);
    ASSERT_EQ_INT(atoi(o), 0);
    emq_srv_stop(s);
}
