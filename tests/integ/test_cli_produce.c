/* SPDX-License-Identifier: BSD-3-Clause */
/* test_cli_produce.c: `echomq produce` and the global options end to end:
 * the built program against a private redis-server, stdout, stderr and exit
 * codes checked. FIELD=VALUE, --lines, --json with {"base64"} values that
 * come back byte-exact through consume, --print-ids, a malformed JSON line
 * (exit 2, line number, entries written before it), connection refused
 * (exit 1), a malformed URL and bad flags (exit 2), WRONGTYPE (exit 1,
 * naming the key and its type), --help and --version.
 */
#include "integ/cli_helpers.h"
#include "integ/inspect_conn_helpers.h" /* WAIT_UNTIL */

#include <fcntl.h>
#include <signal.h>

TEST(cli_produce_fields_then_consume) {
    emq_srv *s = emq_srv_start(NULL);
    const char *url = emq_srv_url(s);
    cli_result r;
    CLI(&r, url, "produce", "jobs", "task=resize", "n=42", "--print-ids");
    ASSERT_EXIT(&r, 0);
    ASSERT_EQ_INT(cli_lines(r.out), 1);
    ASSERT(strchr(r.out, '-') != NULL);
    char id[64];
    snprintf(id, sizeof id, "%.*s", (int)strcspn(r.out, "\n"), r.out);
    ASSERT_CONTAINS(r.err, "echomq: produced 1 entry to emq:{jobs}");
    cli_free(&r);
    CLI(&r, url, "consume", "jobs", "--group", "g", "--consumer", "c",
        "--start", "head", "--limit", "1", "-q");
    ASSERT_EXIT(&r, 0);
    char want[200];
    snprintf(want, sizeof want,
             "{\"id\":\"%s\",\"stream\":\"emq:{jobs}\",\"deliveries\":1,"
             "\"fields\":{\"task\":"
             "\"resize\",\"n\":\"42\"}}\n",
             id);
    ASSERT_EQ_STR(r.out, want);
    ASSERT_EQ_STR(r.err, "");
    cli_free(&r);
    emq_srv_stop(s);
}

TEST(cli_produce_lines_and_json_binary_round_trip) {
    emq_srv *s = emq_srv_start(NULL);
    const char *url = emq_srv_url(s);
    cli_result r;
    CLI_IN(&r, url,
           "one\ntw\xff"
           "o\n\nthree",
           "produce", "q", "--lines", "--field", "line", "-q");
    ASSERT_EXIT(&r, 0);
    ASSERT_EQ_STR(r.err, "");
    cli_free(&r);
    CLI_IN(&r, url,
           "{\"b\":{\"base64\":\"AP8KgA==\"},\"n\":12.5,\"t\":true}\n\n"
           "  {\"s\":\"caf\\u00e9\"}\n",
           "produce", "q", "--json", "--batch", "1");
    ASSERT_EXIT(&r, 0);
    ASSERT_CONTAINS(r.err, "produced 2 entries");
    cli_free(&r);
    ASSERT_EQ_INT(srv_int(s, "XLEN", "emq:{q}"), 6);
    CLI(&r, url, "consume", "q", "-g", "g", "-c", "c", "--start", "head",
        "--until-idle", "300");
    ASSERT_EXIT(&r, 0);
    ASSERT_EQ_INT(cli_lines(r.out), 6);
    ASSERT_CONTAINS(r.out, "\"fields\":{\"line\":\"one\"}}");
    ASSERT_CONTAINS(r.out, "\"fields\":{\"line\":{\"base64\":\"dHf/bw==\"}}}");
    ASSERT_CONTAINS(r.out, "\"fields\":{\"line\":\"\"}}");
    ASSERT_CONTAINS(r.out, "\"fields\":{\"line\":\"three\"}}");
    ASSERT_CONTAINS(r.out, "{\"b\":{\"base64\":\"AP8KgA==\"},\"n\":\"12.5\","
                           "\"t\":\"true\"}");
    ASSERT_CONTAINS(r.out, "{\"s\":\"caf\xc3\xa9\"}");
    ASSERT_CONTAINS(r.err, "consumed 6 entries (acknowledged 6");
    /* The consumed lines go back in through --json (jq-free: cut out the
     * fields object) and come out byte-exact once more. */
    char *b = strstr(r.out, "{\"b\":");
    ASSERT(b != NULL);
    char again[200];
    snprintf(again, sizeof again, "%.*s\n", (int)(strchr(b, '}') - b + 2), b);
    again[strlen(again) - 2] = '}';
    cli_free(&r);
    CLI_IN(&r, url, again, "produce", "q2", "--json", "-q");
    ASSERT_EXIT(&r, 0);
    cli_free(&r);
    emq_conf_t *conf = emq_conf_new();
    ASSERT_OK(emq_conf_set(conf, "url", url, NULL), NULL);
    emq_conn_t *conn;
    ASSERT_OK(emq_conn_new(conf, &conn, NULL), NULL);
    emq_conf_destroy(conf);
    const char *argv[] = {"XRANGE", "emq:{q2}", "-", "+"};
    emq_reply *reply;
    ASSERT_OK(emq_conn_command(conn, 4, argv, NULL, &reply, NULL), NULL);
    const emq_reply *fields = emq_reply_at(emq_reply_at(reply, 0), 1);
    size_t len;
    const char *v = emq_reply_str(emq_reply_at(fields, 1), &len);
    ASSERT_EQ_MEM(v, len, "\x00\xff\n\x80", 4);
    emq_reply_free(reply);
    emq_conn_destroy(conn);
    emq_srv_stop(s);
}

TEST(cli_produce_malformed_json_line_stops_with_exit_2) {
    emq_srv *s = emq_srv_start(NULL);
    cli_result r;
    CLI_IN(&r, emq_srv_url(s),
           "{\"a\":1}\n{\"a\":2}\n{\"a\":3}\n{\"a\" 4}\n{\"a\":5}\n", "produce",
           "q", "--json", "--batch", "2");
    ASSERT_EXIT(&r, 2);
    ASSERT_ONE_LINE(r.err);
    ASSERT_CONTAINS(r.err, "echomq: line 4 of the input is not a JSON object");
    ASSERT_CONTAINS(r.err, "column 6: expected ':'");
    ASSERT_CONTAINS(r.err, "3 entries before it were written");
    ASSERT_EQ_INT(srv_int(s, "XLEN", "emq:{q}"), 3);
    cli_free(&r);
    emq_srv_stop(s);
}

TEST(cli_connection_refused_is_exit_1) {
    char url[64];
    snprintf(url, sizeof url, "redis://127.0.0.1:%d", emq_free_port());
    cli_result r;
    CLI(&r, NULL, "-u", url, "produce", "q", "a=1");
    ASSERT_EXIT(&r, 1);
    ASSERT_ONE_LINE(r.err);
    ASSERT_CONTAINS(r.err, "echomq: cannot connect to redis://127.0.0.1:");
    ASSERT_CONTAINS(r.err, "refused");
    cli_free(&r);
    /* $ECHOMQ_URL is used when there is no --url; a password in it is
     * never echoed. */
    char secret[96];
    snprintf(secret, sizeof secret, "redis://bob:Hunter2xyz@127.0.0.1:%d",
             emq_free_port());
    CLI(&r, secret, "info", "q");
    ASSERT_EXIT(&r, 1);
    ASSERT_CONTAINS(r.err, "cannot connect to redis://bob:***@127.0.0.1");
    ASSERT_NOT_CONTAINS(r.err, "Hunter2xyz");
    cli_free(&r);
}

TEST(cli_usage_errors_are_exit_2_before_the_server) {
    emq_srv *s = emq_srv_start(NULL);
    const char *url = emq_srv_url(s);
    long long before = srv_connections(s);
    cli_result r;
    const char *const *cases[] = {
        CLI_ARGS("produce", "q", "a=1", "-u", "foo://x"),
        CLI_ARGS("produce", "q", "a=1", "-u", "redis://127.0.0.1:99999"),
        CLI_ARGS("produce", "q", "noequals"),
        CLI_ARGS("produce", "q"),
        CLI_ARGS("produce", "q", "--lines", "--json"),
        CLI_ARGS("produce", "q", "a=1", "--batch", "0"),
        CLI_ARGS("produce", "q", "a=1", "--bogus"),
        CLI_ARGS("produce", "bad{name}", "a=1"),
        CLI_ARGS("consume", "q", "-g", "g", "-c", "c"),
        CLI_ARGS("consume", "q", "-g", "g", "-c", "c", "--start", "middle"),
        CLI_ARGS("consume", "q", "-g", "g", "--start", "new"),
        CLI_ARGS("consume", "q", "-g", "g", "-c", "c", "--start", "new",
                 "--count", "x"),
        CLI_ARGS("group", "destroy", "q", "--group", "g"),
        CLI_ARGS("dead", "purge", "q"),
        CLI_ARGS("trim", "q"),
        CLI_ARGS("nosuchverb"),
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        cli_run_in(&r, url, NULL, 0, 10000, cases[i]);
        if (r.code != 2 || cli_lines(r.err) != 1 ||
            strncmp(r.err, "echomq: ", 8) != 0)
            FAIL("case %zu (%s %s %s): exit %d, stderr \"%s\"", i, cases[i][0],
                 cases[i][1], cases[i][2] ? cases[i][2] : "", r.code, r.err);
        cli_free(&r);
    }
    /* The start refusal says what to give. */
    CLI(&r, url, "consume", "q", "--group", "g", "--consumer", "c");
    ASSERT_CONTAINS(r.err, "echomq: --start is required: new (only new "
                           "entries) or head (replay the stream)");
    cli_free(&r);
    /* Nothing connected but our own INFO calls. */
    ASSERT_EQ_INT(srv_connections(s), before + 1);
    emq_srv_stop(s);
}

TEST(cli_wrongtype_names_the_key) {
    emq_srv *s = emq_srv_start(NULL);
    char out[64];
    emq_srv_cmd(s, out, sizeof out, "SET", "emq:{w}", "x", NULL);
    cli_result r;
    CLI(&r, emq_srv_url(s), "produce", "w", "a=1");
    ASSERT_EXIT(&r, 1);
    ASSERT_ONE_LINE(r.err);
    ASSERT_CONTAINS(r.err, "echomq: WRONGTYPE: key 'emq:{w}' holds a string, "
                           "not a stream");
    cli_free(&r);
    CLI(&r, emq_srv_url(s), "consume", "w", "-g", "g", "-c", "c", "--start",
        "new");
    ASSERT_EXIT(&r, 1);
    ASSERT_CONTAINS(r.err, "WRONGTYPE");
    cli_free(&r);
    emq_srv_stop(s);
}

TEST(cli_help_and_version) {
    static const char *const verbs[] = {"produce", "consume", "info",
                                        "pending", "group",   "consumers",
                                        "dead",    "trim",    "demo"};
    cli_result r;
    for (size_t i = 0; i < sizeof verbs / sizeof verbs[0]; i++) {
        CLI(&r, NULL, verbs[i], "--help");
        ASSERT_EXIT(&r, 0);
        ASSERT_CONTAINS(r.out, "usage: echomq ");
        ASSERT_CONTAINS(r.out, verbs[i]);
        ASSERT_EQ_STR(r.err, "");
        cli_free(&r);
    }
    CLI(&r, NULL, "--help");
    ASSERT_EXIT(&r, 0);
    ASSERT_CONTAINS(r.out, "Exit status: 0 success, 1 runtime failure, 2 "
                           "usage error");
    cli_free(&r);
    CLI(&r, NULL, "--version");
    ASSERT_EXIT(&r, 0);
    ASSERT_CONTAINS(r.out, "echomq " EMQ_VERSION_STRING " (libechomq ");
    cli_free(&r);
}

TEST(cli_produce_trims_with_maxlen) {
    emq_srv *s = emq_srv_start(NULL);
    cli_result r;
    CLI_IN(&r, emq_srv_url(s), "1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n", "produce",
           "q", "--lines", "--maxlen", "4", "-q");
    ASSERT_EXIT(&r, 0);
    cli_free(&r);
    ASSERT_EQ_INT(srv_int(s, "XLEN", "emq:{q}"), 4);
    CLI(&r, emq_srv_url(s), "produce", "q", "a=1", "--approx");
    ASSERT_EXIT(&r, 2);
    ASSERT_CONTAINS(r.err, "--approx needs --maxlen or --minid");
    cli_free(&r);
    emq_srv_stop(s);
}

/* Reads what fd gives until its end (bounded by the test's timeout). */
static void read_all(int fd, char *out, size_t size) {
    size_t n = 0;
    for (ssize_t got;
         n + 1 < size && (got = read(fd, out + n, size - n - 1)) > 0;)
        n += (size_t)got;
    out[n] = '\0';
}

/* Input that can never be sent stops the run at once, saying so: a line
 * longer than the producer's queue bound (it can never be queued; before,
 * it was retried at 100% CPU for ever), a line longer than --max-line
 * (read no further: the reader holds at most that much), each with exit
 * 1 and the count of entries written before it. */
TEST_TIMEOUT(cli_produce_input_that_never_fits_fails_at_once, 60) {
    emq_srv *s = emq_srv_start(NULL);
    static char input[8192];
    char big[3001];
    memset(big, 'x', 3000);
    big[3000] = '\0';
    snprintf(input, sizeof input, "a\nb\n%s\nc\n", big);
    cli_result r;
    CLI_IN(&r, emq_srv_url(s), input, "-X", "producer.queue.max_bytes=1024",
           "produce", "nf", "--lines");
    ASSERT_EXIT(&r, 1);
    ASSERT_CONTAINS(r.err, "more than producer.queue.max_bytes (1024)");
    ASSERT_CONTAINS(r.err, "2 written");
    cli_free(&r);
    ASSERT_EQ_INT(srv_int(s, "XLEN", "emq:{nf}"), 2);
    CLI_IN(&r, emq_srv_url(s), input, "produce", "ml", "--lines", "--max-line",
           "100");
    ASSERT_EXIT(&r, 1);
    ASSERT_CONTAINS(r.err, "line 3 of the input is longer than --max-line "
                           "(100 bytes)");
    ASSERT_CONTAINS(r.err, "2 entries before it were written");
    cli_free(&r);
    ASSERT_EQ_INT(srv_int(s, "XLEN", "emq:{ml}"), 2);
    /* A line of 64 MiB that never ends is not read to its end. */
    int in = -1, err = -1;
    pid_t pid =
        cli_spawn(emq_srv_url(s),
                  CLI_ARGS("produce", "ml2", "--lines", "--max-line", "65536"),
                  &in, NULL, &err);
    static char chunk[65536];
    memset(chunk, 'y', sizeof chunk);
    signal(SIGPIPE, SIG_IGN);
    size_t wrote = 0;
    for (int i = 0; i < 1024; i++) { /* until the reader stops reading */
        ssize_t w = write(in, chunk, sizeof chunk);
        if (w <= 0)
            break;
        wrote += (size_t)w;
    }
    close(in);
    ASSERT_EQ_INT(cli_wait(pid, 10000), 1);
    static char msg[4096];
    read_all(err, msg, sizeof msg);
    close(err);
    ASSERT_CONTAINS(msg, "longer than --max-line (65536 bytes)");
    printf("    %zu bytes written before the reader stopped\n", wrote);
    ASSERT(wrote < (size_t)64 << 20);
    emq_srv_stop(s);
}

/* SIGTERM ends `produce --lines` within about a second whatever the
 * server does: here it stopped answering (SIGSTOP) with the producer's
 * queue full; the run says how many were written and how many are
 * unconfirmed, exit 1. Before, the run retried for ever and the signal
 * changed nothing. */
TEST_TIMEOUT(cli_produce_sigterm_ends_a_run_the_server_stalls, 60) {
    emq_srv *s = emq_srv_start(NULL);
    int in = -1, err = -1;
    pid_t pid = cli_spawn(emq_srv_url(s), CLI_ARGS("produce", "st", "--lines"),
                          &in, NULL, &err);
    signal(SIGPIPE, SIG_IGN);
    static char lines[65536];
    for (size_t i = 0; i + 6 < sizeof lines; i += 6)
        memcpy(lines + i, "line\n\n", 6);
    ASSERT(write(in, lines, 6000) == 6000);
    WAIT_UNTIL(srv_int(s, "XLEN", "emq:{st}") >= 1000, 10000,
               "the first lines written");
    kill(emq_srv_pid(s), SIGSTOP);
    /* More than the producer's queue holds (10,000 entries). */
    int flags = fcntl(in, F_GETFL);
    fcntl(in, F_SETFL, flags | O_NONBLOCK);
    for (int i = 0; i < 200; i++)
        if (write(in, lines, sizeof lines) <= 0)
            break;
    usleep(500 * 1000);
    int64_t sent = cli_ms();
    kill(pid, SIGTERM);
    int code = cli_wait(pid, 5000);
    int64_t took = cli_ms() - sent;
    kill(emq_srv_pid(s), SIGCONT);
    close(in);
    static char msg[4096];
    read_all(err, msg, sizeof msg);
    close(err);
    printf("    ended %lld ms after SIGTERM, exit %d\n", (long long)took, code);
    ASSERT_EQ_INT(code, 1);
    ASSERT_CONTAINS(msg, "stopped by a signal");
    emq_srv_stop(s);
}
