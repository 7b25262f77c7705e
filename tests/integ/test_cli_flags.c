/* SPDX-License-Identifier: BSD-3-Clause */
/* test_cli_flags.c: the flags of every verb that test_cli_produce.c,
 * test_cli_consume.c and test_cli_admin.c leave out, end to end against a
 * private redis-server (stdout, stderr and exit code checked):
 *
 * - produce: --approx trims whole nodes (MAXLEN ~ and MINID ~), --minid;
 *   the progress line on a terminal (a pseudo-terminal on stderr) and its
 *   absence otherwise; -q, -v and the global options before the verb;
 * - -h/--help on every verb and subverb, unknown flags on every verb
 *   (exit 2), --version;
 * - consume: --count, --block, --claim-idle and --claim-interval (seen in
 *   the server's slow log and in behaviour), --max-deliveries with exit 75
 *   and with a handler killed by a signal, --limit, --until-idle,
 *   --concurrency (one name C in XINFO CONSUMERS and EMQ_CONSUMER, handlers
 *   overlapping), -v;
 * - info/pending/group/consumers prune/dead/trim flags, --json outputs
 *   parsed as JSON.
 */
#define _XOPEN_SOURCE 700 /* posix_openpt for cli_run_pty */

#include "integ/cli_check_helpers.h"

/* ---- produce ------------------------------------------------------------- */

/* "1\n2\n...n\n" (static buffer). */
static const char *numbered_lines(int n) {
    static char buf[1 << 16];
    size_t k = 0;
    buf[0] = '\0';
    for (int i = 1; i <= n && k + 16 < sizeof buf; i++)
        k += (size_t)snprintf(buf + k, sizeof buf - k, "%d\n", i);
    return buf;
}

/* Line i (1-based) of text, into out. */
static void nth_line(const char *text, int i, char *out, size_t size) {
    const char *p = text;
    for (int k = 1; k < i && p; k++) {
        p = strchr(p, '\n');
        if (p)
            p++;
    }
    ASSERT(p != NULL && *p);
    snprintf(out, size, "%.*s", (int)strcspn(p, "\n"), p);
}

TEST(cli_produce_approx_maxlen_trims_whole_nodes) {
    emq_srv *s = emq_srv_start(NULL);
    char out[256];
    ASSERT(emq_srv_cmd(s, out, sizeof out, "CONFIG", "SET",
                       "stream-node-max-entries", "10", NULL) == '+');
    cli_result r;
    const char *in = numbered_lines(95);
    cli_run_in(&r, emq_srv_url(s), in, strlen(in), 20000,
               CLI_ARGS("produce", "q", "--lines", "--maxlen", "20", "--approx",
                        "--batch", "10"));
    ASSERT_EXIT(&r, 0);
    ASSERT_CONTAINS(r.err, "produced 95 entries to emq:{q}");
    cli_free(&r);
    /* ~ removes only whole nodes of 10: never below 20, and more than an
     * exact MAXLEN 20 would keep (95 = 9 nodes and 5). */
    long long len = srv_int(s, "XLEN", "emq:{q}");
    if (len <= 20 || len > 30)
        FAIL("XLEN after --maxlen 20 --approx: %lld, want 21..30", len);
    /* The same without --approx is exact. */
    cli_run_in(&r, emq_srv_url(s), in, strlen(in), 20000,
               CLI_ARGS("produce", "q2", "--lines", "--maxlen", "20", "--batch",
                        "10", "-q"));
    ASSERT_EXIT(&r, 0);
    cli_free(&r);
    ASSERT_EQ_INT(srv_int(s, "XLEN", "emq:{q2}"), 20);
    emq_srv_stop(s);
}

TEST(cli_produce_minid_removes_entries_below_the_id) {
    emq_srv *s = emq_srv_start(NULL);
    const char *url = emq_srv_url(s);
    cli_result r;
    CLI_IN(&r, url, "a\nb\nc\nd\ne\n", "produce", "q", "--lines", "--print-ids",
           "-q");
    ASSERT_EXIT(&r, 0);
    ASSERT_EQ_INT(cli_lines(r.out), 5);
    char third[64];
    nth_line(r.out, 3, third, sizeof third);
    cli_free(&r);
    CLI(&r, url, "produce", "q", "f=6", "--minid", third, "-q");
    ASSERT_EXIT(&r, 0);
    cli_free(&r);
    ASSERT_EQ_INT(srv_int(s, "XLEN", "emq:{q}"), 4); /* c, d, e, f */
    char out[1024];
    emq_srv_cmd(s, out, sizeof out, "XRANGE", "emq:{q}", "-", "+", "COUNT", "1",
                NULL);
    ASSERT(strncmp(out, third, strlen(third)) == 0);
    ASSERT_CONTAINS(out, "data\nc");
    /* --minid --approx: only whole nodes below the ID go. */
    ASSERT(emq_srv_cmd(s, out, sizeof out, "CONFIG", "SET",
                       "stream-node-max-entries", "10", NULL) == '+');
    const char *in = numbered_lines(25);
    cli_run_in(&r, url, in, strlen(in), 20000,
               CLI_ARGS("produce", "q2", "--lines", "--print-ids", "-q"));
    ASSERT_EXIT(&r, 0);
    char fifteenth[64];
    nth_line(r.out, 15, fifteenth, sizeof fifteenth);
    cli_free(&r);
    CLI(&r, url, "produce", "q2", "n=26", "--minid", fifteenth, "--approx",
        "-q");
    ASSERT_EXIT(&r, 0);
    cli_free(&r);
    long long len = srv_int(s, "XLEN", "emq:{q2}");
    /* Exact would keep 15..26 (12); ~ keeps the node holding 15. */
    if (len <= 12 || len >= 26)
        FAIL("XLEN after --minid ~: %lld, want 13..25", len);
    /* A malformed ID is a usage error. */
    CLI(&r, url, "produce", "q", "x=1", "--minid", "not-an-id");
    ASSERT_EXIT(&r, 2);
    ASSERT_ONE_LINE(r.err);
    cli_free(&r);
    CLI(&r, url, "produce", "q", "x=1", "--minid", third, "--maxlen", "3");
    ASSERT_EXIT(&r, 2);
    ASSERT_CONTAINS(r.err, "--maxlen and --minid exclude each other");
    cli_free(&r);
    ASSERT_EQ_INT(srv_int(s, "XLEN", "emq:{q}"), 4);
    emq_srv_stop(s);
}

TEST(cli_produce_progress_line_only_on_a_terminal) {
    emq_srv *s = emq_srv_start(NULL);
    const char *url = emq_srv_url(s);
    const char *in = numbered_lines(3000);
    static char tty[65536];
    int code =
        cli_run_pty(url, in, strlen(in), tty, sizeof tty, 20000,
                    CLI_ARGS("produce", "q", "--lines", "--batch", "100"));
    ASSERT_EQ_INT(code, 0);
    /* A progress line, then cleared, then the summary. */
    ASSERT_CONTAINS(tty, "\r\033[Kechomq: ");
    ASSERT_CONTAINS(tty, " entries written (");
    ASSERT_CONTAINS(tty, "echomq: produced 3000 entries to emq:{q}");
    ASSERT(strstr(tty, " entries written (") < strstr(tty, "produced 3000"));
    ASSERT_EQ_INT(srv_int(s, "XLEN", "emq:{q}"), 3000);
    /* -q on a terminal: nothing at all. */
    code = cli_run_pty(url, in, strlen(in), tty, sizeof tty, 20000,
                       CLI_ARGS("produce", "q", "--lines", "-q"));
    ASSERT_EQ_INT(code, 0);
    ASSERT_EQ_STR(tty, "");
    /* Not a terminal: the summary line only. */
    cli_result r;
    cli_run_in(&r, url, in, strlen(in), 20000,
               CLI_ARGS("produce", "q", "--lines", "--batch", "100"));
    ASSERT_EXIT(&r, 0);
    ASSERT_ONE_LINE(r.err);
    ASSERT(strncmp(r.err, "echomq: produced 3000 entries to emq:{q} in ", 44) ==
           0);
    ASSERT_CONTAINS(r.err, " entries/s)\n");
    ASSERT_NOT_CONTAINS(r.err, "\r");
    ASSERT_NOT_CONTAINS(r.err, "entries written");
    cli_free(&r);
    ASSERT_EQ_INT(srv_int(s, "XLEN", "emq:{q}"), 9000);
    emq_srv_stop(s);
}

TEST(cli_global_options_before_the_verb_quiet_and_verbose) {
    emq_srv *s = emq_srv_start(NULL);
    char port[16];
    snprintf(port, sizeof port, "%d", emq_srv_port(s));
    cli_result r;
    /* -u and -q before the verb, no $ECHOMQ_URL. */
    CLI(&r, NULL, "-q", "-u", emq_srv_url(s), "produce", "q", "a=1",
        "--print-ids");
    ASSERT_EXIT(&r, 0);
    ASSERT_EQ_STR(r.err, "");
    ASSERT_EQ_INT(cli_lines(r.out), 1);
    cli_free(&r);
    CLI(&r, NULL, "--url", emq_srv_url(s), "produce", "q", "a=2");
    ASSERT_EXIT(&r, 0);
    ASSERT_CONTAINS(r.err, "echomq: produced 1 entry to emq:{q}");
    cli_free(&r);
    /* The --url=VALUE form, after the verb. */
    char eq[128];
    snprintf(eq, sizeof eq, "--url=%s", emq_srv_url(s));
    CLI(&r, NULL, "produce", "q", "a=3", eq, "--quiet");
    ASSERT_EXIT(&r, 0);
    ASSERT_EQ_STR(r.err, "");
    cli_free(&r);
    ASSERT_EQ_INT(srv_int(s, "XLEN", "emq:{q}"), 3);
    /* -v on consume adds the consumer's counters as a JSON line. */
    CLI(&r, emq_srv_url(s), "consume", "q", "-g", "g", "-c", "c", "--start",
        "head", "--limit", "3", "-v");
    ASSERT_EXIT(&r, 0);
    ASSERT_EQ_INT(cli_lines(r.out), 3);
    ASSERT_CONTAINS(r.err, "echomq: consumed 3 entries (acknowledged 3");
    const char *js = strstr(r.err, "\n{");
    ASSERT(js != NULL);
    ASSERT_JSON_LINES(js + 1);
    ASSERT_CONTAINS(js, "\"consumer\":\"c\"");
    ASSERT_CONTAINS(js, "\"delivered\":3");
    ASSERT_CONTAINS(js, "\"acked\":3");
    cli_free(&r);
    /* Without -v: the summary only; with -q: nothing. */
    CLI(&r, emq_srv_url(s), "consume", "q", "-g", "g", "-c", "c", "--start",
        "head", "--until-idle", "200");
    ASSERT_EXIT(&r, 0);
    ASSERT_ONE_LINE(r.err);
    ASSERT_CONTAINS(r.err, "consumed 0 entries");
    cli_free(&r);
    CLI(&r, emq_srv_url(s), "consume", "q", "-g", "g", "-c", "c", "--start",
        "head", "--until-idle", "200", "-q");
    ASSERT_EXIT(&r, 0);
    ASSERT_EQ_STR(r.err, "");
    cli_free(&r);
    emq_srv_stop(s);
}

/* ---- help, unknown flags, version ---------------------------------------- */

TEST(cli_help_on_every_verb_and_subverb) {
    static const char *const cases[][2] = {
        {"produce", NULL},      {"consume", NULL},    {"info", NULL},
        {"pending", NULL},      {"group", NULL},      {"group", "create"},
        {"group", "setid"},     {"group", "destroy"}, {"consumers", NULL},
        {"consumers", "prune"}, {"dead", NULL},       {"dead", "list"},
        {"dead", "requeue"},    {"dead", "purge"},    {"trim", NULL},
        {"demo", NULL},
    };
    static const char *const flags[] = {"-h", "--help"};
    cli_result r;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char want[64];
        snprintf(want, sizeof want, "echomq %s%s%s", cases[i][0],
                 cases[i][1] ? " " : "", cases[i][1] ? cases[i][1] : "");
        for (size_t k = 0; k < 2; k++) {
            if (cases[i][1])
                CLI(&r, NULL, cases[i][0], cases[i][1], flags[k]);
            else
                CLI(&r, NULL, cases[i][0], flags[k]);
            if (r.code != 0 || strncmp(r.out, "usage: ", 7) != 0 ||
                strstr(r.out, want) == NULL || r.err[0] != '\0')
                FAIL("'%s %s': exit %d, want 0 and usage naming '%s' on "
                     "stdout; stdout \"%.300s\", stderr \"%s\"",
                     want, flags[k], r.code, want, r.out, r.err);
            cli_free(&r);
        }
    }
    /* Help wins over missing required flags, and needs no server. */
    CLI(&r, NULL, "-u", "redis://127.0.0.1:1", "consume", "q", "--help");
    ASSERT_EXIT(&r, 0);
    ASSERT_CONTAINS(r.out, "--claim-interval MS");
    ASSERT_CONTAINS(r.out, "--concurrency N");
    cli_free(&r);
    CLI(&r, NULL, "-h");
    ASSERT_EXIT(&r, 0);
    ASSERT_CONTAINS(r.out, "usage: echomq [global options] <command>");
    cli_free(&r);
    /* No verb: the overview on stderr, exit 2. */
    CLI(&r, NULL, "-q");
    ASSERT_EXIT(&r, 2);
    ASSERT_CONTAINS(r.err, "usage: echomq");
    cli_free(&r);
}

TEST(cli_unknown_flags_are_exit_2_on_every_verb) {
    emq_srv *s = emq_srv_start(NULL);
    long long before = srv_connections(s);
    static const char *const cases[][4] = {
        {"produce", "q", "a=1", NULL},   {"consume", "q", "-g", "g"},
        {"info", "q", NULL, NULL},       {"pending", "q", "-g", "g"},
        {"group", "create", "q", NULL},  {"group", "setid", "q", NULL},
        {"group", "destroy", "q", NULL}, {"consumers", "prune", "q", NULL},
        {"dead", "list", "q", NULL},     {"dead", "requeue", "q", NULL},
        {"dead", "purge", "q", NULL},    {"trim", "q", "--acked", NULL},
        {"demo", NULL, NULL, NULL},
    };
    static const char *const bad[] = {"--no-such-flag", "-Z", "--json=x"};
    cli_result r;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        for (size_t b = 0; b < sizeof bad / sizeof bad[0]; b++) {
            const char *args[8];
            int n = 0;
            for (int k = 0; k < 4 && cases[i][k]; k++)
                args[n++] = cases[i][k];
            /* --json=x: a flag given a value (info, pending, dead list
             * have --json); elsewhere it is unknown. Both are usage
             * errors. */
            args[n++] = bad[b];
            args[n] = NULL;
            cli_run_in(&r, emq_srv_url(s), NULL, 0, 10000, args);
            char see[64];
            snprintf(see, sizeof see, "see 'echomq %s --help'", cases[i][0]);
            if (r.code != 2 || cli_lines(r.err) != 1 ||
                strncmp(r.err, "echomq: ", 8) != 0 || !strstr(r.err, see))
                FAIL("%s ... %s: exit %d, stderr \"%s\"", cases[i][0], bad[b],
                     r.code, r.err);
            cli_free(&r);
        }
    /* A flag that wants a value, at the end without one. */
    CLI(&r, emq_srv_url(s), "consume", "q", "-g", "g", "-c", "c", "--start");
    ASSERT_EXIT(&r, 2);
    ASSERT_CONTAINS(r.err, "--start needs a value");
    cli_free(&r);
    /* None of them reached the server. */
    ASSERT_EQ_INT(srv_connections(s), before + 1);
    emq_srv_stop(s);
}

TEST(cli_version_output) {
    cli_result r;
    CLI(&r, NULL, "--version");
    ASSERT_EXIT(&r, 0);
    char want[128];
    unsigned v = emq_version();
    snprintf(want, sizeof want, "echomq %s (libechomq %u.%u.%u)\n",
             EMQ_VERSION_STRING, (v >> 16) & 0xff, (v >> 8) & 0xff, v & 0xff);
    ASSERT_EQ_STR(r.out, want);
    ASSERT_EQ_STR(r.err, "");
    cli_free(&r);
    /* Also after global options. */
    CLI(&r, NULL, "-q", "--version");
    ASSERT_EXIT(&r, 0);
    ASSERT_EQ_STR(r.out, want);
    cli_free(&r);
}

/* ---- consume ------------------------------------------------------------- */

TEST(cli_consume_count_block_claim_idle_reach_the_server) {
    emq_srv *s = emq_srv_start(NULL);
    const char *url = emq_srv_url(s);
    cli_result r;
    CLI(&r, url, "produce", "q", "a=1", "-q");
    cli_free(&r);
    srv_slowlog_on(s);
    CLI(&r, url, "consume", "q", "-g", "g", "-c", "c", "--start", "head",
        "--count", "7", "--block", "300", "--claim-idle", "1234",
        "--until-idle", "600", "-q");
    ASSERT_EXIT(&r, 0);
    ASSERT_EQ_INT(cli_lines(r.out), 1);
    cli_free(&r);
    const char *log = srv_slowlog(s);
    ASSERT_CONTAINS(log, "XREADGROUP GROUP g c COUNT 7 BLOCK 300 STREAMS "
                         "emq:{q} >");
    /* --claim-idle is the claim's min-idle-time (beats every 100 ms). */
    srv_slowlog_on(s);
    CLI(&r, url, "consume", "q", "-g", "g", "-c", "c", "--start", "head",
        "--claim-idle", "1234", "--claim-interval", "100", "--until-idle",
        "400", "-q");
    ASSERT_EXIT(&r, 0);
    cli_free(&r);
    ASSERT_CONTAINS(srv_slowlog(s), "XAUTOCLAIM emq:{q} g c 1234 0-0 ");
    /* A read may wait at most a third of the lease, less a second: the
     * library's check, before any connection. */
    long long before = srv_connections(s);
    CLI(&r, url, "consume", "q", "-g", "g", "-c", "c", "--start", "head",
        "--block", "9667");
    ASSERT_EXIT(&r, 2);
    ASSERT_ONE_LINE(r.err);
    ASSERT_CONTAINS(r.err, "lease.ttl_ms (30000) must be at least 3 x "
                           "block_ms + 1000 (30001)");
    cli_free(&r);
    ASSERT_EQ_INT(srv_connections(s), before + 1);
    emq_srv_stop(s);
}

/* XAUTOCLAIM calls of one consume run of about until_ms. */
static int claim_beats(emq_srv *s, const char *interval, const char *until) {
    srv_slowlog_on(s);
    cli_result r;
    if (interval)
        CLI(&r, emq_srv_url(s), "consume", "q", "-g", "g", "-c", "c", "--start",
            "head", "--until-idle", until, "--claim-interval", interval, "-q");
    else
        CLI(&r, emq_srv_url(s), "consume", "q", "-g", "g", "-c", "c", "--start",
            "head", "--until-idle", until, "-q");
    ASSERT_EXIT(&r, 0);
    cli_free(&r);
    return cli_count(srv_slowlog(s), "XAUTOCLAIM emq:{q} g c ");
}

TEST(cli_consume_claim_interval_sets_the_claim_beat) {
    emq_srv *s = emq_srv_start(NULL);
    int fast = claim_beats(s, "100", "1200");
    int slow = claim_beats(s, NULL, "1200"); /* default 5000 ms */
    if (fast < 4 || slow > 2)
        FAIL("XAUTOCLAIM calls in 1.2 s: %d with --claim-interval 100 (want "
             ">= 4), %d with the default (want <= 2)",
             fast, slow);
    emq_srv_stop(s);
}

TEST(cli_consume_claim_idle_takes_over_a_stuck_consumers_entries) {
    emq_srv *s = emq_srv_start(NULL);
    const char *url = emq_srv_url(s);
    cli_result r;
    CLI_IN(&r, url, "x\ny\n", "produce", "q", "--lines", "-q");
    cli_free(&r);
    CLI(&r, url, "group", "create", "q", "-g", "g", "--start", "head");
    ASSERT_EXIT(&r, 0);
    cli_free(&r);
    char out[4096];
    emq_srv_cmd(s, out, sizeof out, "XREADGROUP", "GROUP", "g", "stuck",
                "COUNT", "2", "STREAMS", "emq:{q}", ">", NULL);
    /* The default --claim-idle (60 s) leaves them with "stuck". */
    CLI(&r, url, "consume", "q", "-g", "g", "-c", "c", "--start", "head",
        "--claim-interval", "100", "--until-idle", "500");
    ASSERT_EXIT(&r, 0);
    ASSERT_EQ_STR(r.out, "");
    ASSERT_CONTAINS(r.err, "consumed 0 entries");
    cli_free(&r);
    /* --claim-idle 200: c takes them over. */
    CLI(&r, url, "consume", "q", "-g", "g", "-c", "c", "--start", "head",
        "--claim-idle", "200", "--claim-interval", "100", "--until-idle",
        "800");
    ASSERT_EXIT(&r, 0);
    ASSERT_EQ_INT(cli_lines(r.out), 2);
    ASSERT_CONTAINS(r.out, "\"deliveries\":2,\"fields\":{\"data\":\"x\"}");
    ASSERT_CONTAINS(r.out, "\"deliveries\":2,\"fields\":{\"data\":\"y\"}");
    ASSERT_CONTAINS(r.err, "consumed 2 entries (acknowledged 2, retried 0, "
                           "dead-lettered 0, claimed 2)");
    cli_free(&r);
    emq_srv_cmd(s, out, sizeof out, "XPENDING", "emq:{q}", "g", NULL);
    ASSERT(out[0] == '0');
    emq_srv_stop(s);
}

TEST(cli_consume_exit_75_retries_then_succeeds) {
    emq_srv *s = emq_srv_start(NULL);
    const char *url = emq_srv_url(s);
    cli_result r;
    CLI(&r, url, "produce", "q", "job=1", "-q");
    cli_free(&r);
    char cmd[600];
    snprintf(cmd, sizeof cmd,
             "cat >/dev/null; echo \"$EMQ_DELIVERIES\" >> %s/deliveries; "
             "[ \"$EMQ_DELIVERIES\" -ge 2 ] || exit 75",
             emq_test_tmpdir());
    CLI(&r, url, "consume", "q", "-g", "g", "-c", "w", "--start", "head",
        "--max-deliveries", "3", "--claim-idle", "100", "--claim-interval",
        "100", "--until-idle", "1000", "--exec", cmd);
    ASSERT_EXIT(&r, 0);
    ASSERT_CONTAINS(r.err, "consumed 2 entries (acknowledged 1, retried 1, "
                           "dead-lettered 0");
    cli_free(&r);
    char path[600];
    snprintf(path, sizeof path, "%s/deliveries", emq_test_tmpdir());
    ASSERT_EQ_STR(cli_slurp(path), "1\n2\n");
    ASSERT_EQ_INT(srv_int(s, "XLEN", "emq:{q}:dead"), 0);
    char out[256];
    emq_srv_cmd(s, out, sizeof out, "XPENDING", "emq:{q}", "g", NULL);
    ASSERT(out[0] == '0');
    emq_srv_stop(s);
}

/* Runs a handler that always fails on one entry until it is dead-lettered
 * after 2 deliveries; returns the dead letters as flattened text. */
static const char *dead_after_two(emq_srv *s, const char *cmd) {
    const char *url = emq_srv_url(s);
    cli_result r;
    CLI(&r, url, "produce", "q", "job=1", "-q");
    cli_free(&r);
    CLI(&r, url, "consume", "q", "-g", "g", "-c", "w", "--start", "head",
        "--max-deliveries", "2", "--claim-idle", "100", "--claim-interval",
        "100", "--until-idle", "1000", "--exec", cmd);
    ASSERT_EXIT(&r, 0);
    /* Both deliveries failed (retried counts each), the second one
     * reached --max-deliveries. */
    ASSERT_CONTAINS(r.err, "consumed 2 entries (acknowledged 0, retried 2, "
                           "dead-lettered 1");
    cli_free(&r);
    static char out[4096];
    emq_srv_cmd(s, out, sizeof out, "XRANGE", "emq:{q}:dead", "-", "+", NULL);
    return out;
}

TEST(cli_consume_exit_75_every_time_ends_in_the_dead_letters) {
    emq_srv *s = emq_srv_start(NULL);
    const char *dead = dead_after_two(s, "cat >/dev/null; exit 75");
    ASSERT_CONTAINS(dead, "emq.reason\nexit 75");
    ASSERT_CONTAINS(dead, "emq.deliveries\n2\n");
    ASSERT_CONTAINS(dead, "job\n1");
    emq_srv_stop(s);
}

TEST(cli_consume_handler_killed_by_a_signal_is_reason_signal_n) {
    emq_srv *s = emq_srv_start(NULL);
    const char *dead = dead_after_two(s, "cat >/dev/null; kill -KILL $$");
    ASSERT_CONTAINS(dead, "emq.reason\nsignal 9\n");
    ASSERT_CONTAINS(dead, "emq.deliveries\n2\n");
    /* And dead list shows the reason too. */
    cli_result r;
    CLI(&r, emq_srv_url(s), "dead", "list", "q", "--json");
    ASSERT_EXIT(&r, 0);
    ASSERT_JSON_LINES(r.out);
    ASSERT_CONTAINS(r.out, "signal 9");
    cli_free(&r);
    emq_srv_stop(s);
}

TEST(cli_consume_limit_stops_after_n_and_leaves_the_rest) {
    emq_srv *s = emq_srv_start(NULL);
    const char *url = emq_srv_url(s);
    cli_result r;
    const char *in = numbered_lines(10);
    cli_run_in(&r, url, in, strlen(in), 20000,
               CLI_ARGS("produce", "q", "--lines", "-q"));
    cli_free(&r);
    CLI(&r, url, "consume", "q", "-g", "g", "-c", "c", "--start", "head",
        "--limit", "3");
    ASSERT_EXIT(&r, 0);
    ASSERT_EQ_INT(cli_lines(r.out), 3);
    ASSERT_JSON_LINES(r.out);
    ASSERT_CONTAINS(r.out, "{\"data\":\"1\"}");
    ASSERT_CONTAINS(r.out, "{\"data\":\"3\"}");
    ASSERT_NOT_CONTAINS(r.out, "{\"data\":\"4\"}");
    ASSERT_CONTAINS(r.err, "consumed 3 entries (acknowledged 3");
    cli_free(&r);
    /* Nothing read beyond the limit: nothing pending. */
    char out[256];
    emq_srv_cmd(s, out, sizeof out, "XPENDING", "emq:{q}", "g", NULL);
    ASSERT(out[0] == '0');
    /* The rest comes on the next run. */
    CLI(&r, url, "consume", "q", "-g", "g", "-c", "c", "--start", "head",
        "--until-idle", "300", "-q");
    ASSERT_EXIT(&r, 0);
    ASSERT_EQ_INT(cli_lines(r.out), 7);
    ASSERT_CONTAINS(r.out, "{\"data\":\"4\"}");
    ASSERT_CONTAINS(r.out, "{\"data\":\"10\"}");
    cli_free(&r);
    emq_srv_stop(s);
}

TEST(cli_consume_until_idle_stops_after_the_quiet_time) {
    emq_srv *s = emq_srv_start(NULL);
    cli_result r;
    int64_t t0 = cli_ms();
    CLI(&r, emq_srv_url(s), "consume", "q", "-g", "g", "-c", "c", "--start",
        "new", "--until-idle", "400");
    int64_t took = cli_ms() - t0;
    ASSERT_EXIT(&r, 0);
    ASSERT_EQ_STR(r.out, "");
    ASSERT_CONTAINS(r.err, "consumed 0 entries");
    if (took < 380 || took > emq_test_ms(4000))
        FAIL("--until-idle 400 took %lld ms", (long long)took);
    cli_free(&r);
    emq_srv_stop(s);
}

TEST(cli_consume_concurrency_runs_handlers_at_once_on_one_name) {
    emq_srv *s = emq_srv_start(NULL);
    const char *url = emq_srv_url(s);
    cli_result r;
    const char *in = numbered_lines(9);
    cli_run_in(&r, url, in, strlen(in), 20000,
               CLI_ARGS("produce", "q", "--lines", "-q"));
    cli_free(&r);
    const char *dir = emq_test_tmpdir();
    char cmd[1500];
    /* Each handler marks itself running, sleeps, and records how many
     * were running at once and its EMQ_CONSUMER. */
    snprintf(cmd, sizeof cmd,
             "cat >/dev/null; mkdir %s/run.$EMQ_ID; sleep 0.3; "
             "ls %s | grep -c '^run\\.' >> %s/overlap; "
             "echo \"$EMQ_CONSUMER\" >> %s/names; rmdir %s/run.$EMQ_ID",
             dir, dir, dir, dir, dir);
    CLI(&r, url, "consume", "q", "-g", "g", "-c", "C", "--start", "head",
        "--concurrency", "3", "--count", "1", "--until-idle", "700", "--exec",
        cmd);
    ASSERT_EXIT(&r, 0);
    ASSERT_CONTAINS(r.err, "consumed 9 entries (acknowledged 9");
    cli_free(&r);
    char out[2048];
    emq_srv_cmd(s, out, sizeof out, "XINFO", "CONSUMERS", "emq:{q}", "g", NULL);
    /* All on the one name, one consumer of the group. */
    ASSERT_CONTAINS(out, "name\nC\n");
    ASSERT_NOT_CONTAINS(out, "C-1");
    char path[600];
    snprintf(path, sizeof path, "%s/names", dir);
    const char *names = cli_slurp(path);
    ASSERT_EQ_INT(cli_lines(names), 9);
    ASSERT_EQ_INT(cli_count(names, "C\n"), 9);
    snprintf(path, sizeof path, "%s/overlap", dir);
    const char *overlap = cli_slurp(path);
    int most = 0;
    for (const char *p = overlap; *p; p = strchr(p, '\n') + 1)
        most = atoi(p) > most ? atoi(p) : most;
    if (most < 2)
        FAIL("handlers never ran at once: \"%s\"", overlap);
    ASSERT(most <= 3);
    emq_srv_stop(s);
}

/* ---- info, pending, group, consumers, dead, trim ------------------------- */

/* Queue q with 5 entries; group g; consumer c holds the first two
 * (pending, unacknowledged). */
static void five_two_pending(emq_srv *s) {
    cli_result r;
    CLI_IN(&r, emq_srv_url(s), "a\nb\nc\nd\ne\n", "produce", "q", "--lines",
           "-q");
    ASSERT_EXIT(&r, 0);
    cli_free(&r);
    CLI(&r, emq_srv_url(s), "group", "create", "q", "-g", "g", "--start",
        "head");
    ASSERT_EXIT(&r, 0);
    cli_free(&r);
    char out[4096];
    emq_srv_cmd(s, out, sizeof out, "XREADGROUP", "GROUP", "g", "c", "COUNT",
                "2", "STREAMS", "emq:{q}", ">", NULL);
}

TEST(cli_info_json_and_missing_queue) {
    emq_srv *s = emq_srv_start(NULL);
    const char *url = emq_srv_url(s);
    cli_result r;
    CLI(&r, url, "info", "nothing");
    ASSERT_EXIT(&r, 0);
    ASSERT_CONTAINS(r.out, "does not exist");
    cli_free(&r);
    five_two_pending(s);
    CLI(&r, url, "info", "q", "--json");
    ASSERT_EXIT(&r, 0);
    ASSERT_EQ_INT(cli_lines(r.out), 1);
    ASSERT_JSON_LINES(r.out);
    ASSERT_CONTAINS(r.out, "\"length\":5");
    ASSERT_CONTAINS(r.out, "\"name\":\"g\"");
    ASSERT_CONTAINS(r.out, "\"pending\":2");
    ASSERT_CONTAINS(r.out, "\"name\":\"c\"");
    cli_free(&r);
    /* Global options after --json, and -q changes nothing on stdout. */
    CLI(&r, url, "info", "q", "--json", "-q");
    ASSERT_EXIT(&r, 0);
    ASSERT_JSON_LINES(r.out);
    ASSERT_EQ_STR(r.err, "");
    cli_free(&r);
    CLI(&r, url, "info");
    ASSERT_EXIT(&r, 2);
    ASSERT_CONTAINS(r.err, "QUEUE is missing");
    cli_free(&r);
    emq_srv_stop(s);
}

TEST(cli_pending_flags) {
    emq_srv *s = emq_srv_start(NULL);
    const char *url = emq_srv_url(s);
    five_two_pending(s);
    cli_result r;
    CLI(&r, url, "pending", "q", "-g", "g", "--json");
    ASSERT_EXIT(&r, 0);
    ASSERT_EQ_INT(cli_lines(r.out), 2);
    ASSERT_JSON_LINES(r.out);
    ASSERT_CONTAINS(r.out, "\"consumer\":\"c\"");
    cli_free(&r);
    /* --count 1: one entry, and the note says there may be more. */
    CLI(&r, url, "pending", "q", "-g", "g", "--count", "1");
    ASSERT_EXIT(&r, 0);
    ASSERT_EQ_INT(cli_lines(r.out), 2); /* header + 1 */
    ASSERT_CONTAINS(r.err, "1 pending entry (the --count limit");
    cli_free(&r);
    /* -q: no note. */
    CLI(&r, url, "pending", "q", "-g", "g", "-q");
    ASSERT_EXIT(&r, 0);
    ASSERT_EQ_INT(cli_lines(r.out), 3);
    ASSERT_EQ_STR(r.err, "");
    cli_free(&r);
    /* --min-idle: none has been idle a minute; all idle 0 ms or more. */
    CLI(&r, url, "pending", "q", "-g", "g", "--min-idle", "60000");
    ASSERT_EXIT(&r, 0);
    ASSERT_EQ_INT(cli_lines(r.out), 1);
    ASSERT_CONTAINS(r.err, "0 pending entries");
    cli_free(&r);
    usleep(150000);
    CLI(&r, url, "pending", "q", "-g", "g", "--min-idle", "100", "--json");
    ASSERT_EXIT(&r, 0);
    ASSERT_EQ_INT(cli_lines(r.out), 2);
    cli_free(&r);
    /* --consumer: another consumer holds none. */
    CLI(&r, url, "pending", "q", "-g", "g", "--consumer", "other");
    ASSERT_EXIT(&r, 0);
    ASSERT_CONTAINS(r.err, "0 pending entries");
    cli_free(&r);
    CLI(&r, url, "pending", "q", "-g", "g", "--min-idle", "-5");
    ASSERT_EXIT(&r, 2);
    ASSERT_CONTAINS(r.err, "--min-idle");
    cli_free(&r);
    emq_srv_stop(s);
}

TEST(cli_group_create_and_setid_forms) {
    emq_srv *s = emq_srv_start(NULL);
    const char *url = emq_srv_url(s);
    cli_result r;
    CLI_IN(&r, url, "a\nb\nc\nd\n", "produce", "q", "--lines", "--print-ids",
           "-q");
    ASSERT_EXIT(&r, 0);
    char second[64];
    nth_line(r.out, 2, second, sizeof second);
    cli_free(&r);
    /* --start ID: delivers what comes after it. */
    CLI(&r, url, "group", "create", "q", "--group", "at", "--start", second);
    ASSERT_EXIT(&r, 0);
    ASSERT_CONTAINS(r.out, "created group 'at'");
    cli_free(&r);
    CLI(&r, url, "consume", "q", "-g", "at", "-c", "c", "--start", "head",
        "--until-idle", "200", "-q");
    ASSERT_EXIT(&r, 0);
    ASSERT_EQ_INT(cli_lines(r.out), 2);
    ASSERT_CONTAINS(r.out, "{\"data\":\"c\"}");
    ASSERT_CONTAINS(r.out, "{\"data\":\"d\"}");
    cli_free(&r);
    /* --start new: nothing stored is delivered. */
    CLI(&r, url, "group", "create", "q", "-g", "fresh", "--start", "new");
    ASSERT_EXIT(&r, 0);
    cli_free(&r);
    /* setid --to tail: nothing to deliver. */
    CLI(&r, url, "group", "setid", "q", "-g", "at", "--to", "tail");
    ASSERT_EXIT(&r, 0);
    ASSERT_CONTAINS(r.out, ": 0 stored entries will be delivered");
    cli_free(&r);
    /* setid --to ID: the entries after it. */
    CLI(&r, url, "group", "setid", "q", "-g", "at", "--to", second, "--yes");
    ASSERT_EXIT(&r, 0);
    ASSERT_CONTAINS(r.out, ": 2 stored entries will be delivered");
    cli_free(&r);
    /* setid --to @UNIXMS: a time before everything replays all 4, a time
     * far ahead none. */
    CLI(&r, url, "group", "setid", "q", "-g", "fresh", "--to", "@1", "--yes");
    ASSERT_EXIT(&r, 0);
    ASSERT_CONTAINS(r.out, ": 4 stored entries will be delivered");
    cli_free(&r);
    CLI(&r, url, "group", "setid", "q", "-g", "fresh", "--to",
        "@99999999999999");
    ASSERT_EXIT(&r, 2);
    ASSERT_CONTAINS(r.err, "would skip 4 entries never delivered to it");
    cli_free(&r);
    CLI(&r, url, "group", "setid", "q", "-g", "fresh", "--to",
        "@99999999999999", "--yes");
    ASSERT_EXIT(&r, 0);
    ASSERT_CONTAINS(r.out, ": skipped 4 entries never delivered; 0 stored "
                           "entries will be delivered");
    cli_free(&r);
    /* Usage errors, found before connecting: a bad --start or --to, --to
     * on create, a missing --to, an unknown subcommand. */
    long long before = srv_connections(s);
    static const char *const bad_start[] = {"sideways", "12-x", "-5", "1-",
                                            "99999999999999999999999"};
    for (size_t i = 0; i < sizeof bad_start / sizeof bad_start[0]; i++) {
        CLI(&r, url, "group", "create", "q", "-g", "x", "--start",
            bad_start[i]);
        ASSERT_EXIT(&r, 2);
        ASSERT_ONE_LINE(r.err);
        ASSERT_CONTAINS(r.err, "--start '");
        cli_free(&r);
    }
    static const char *const bad_to[] = {"new", "@", "@x", "1-2-3"};
    for (size_t i = 0; i < sizeof bad_to / sizeof bad_to[0]; i++) {
        CLI(&r, url, "group", "setid", "q", "-g", "at", "--to", bad_to[i]);
        ASSERT_EXIT(&r, 2);
        ASSERT_ONE_LINE(r.err);
        ASSERT_CONTAINS(r.err, "--to '");
        cli_free(&r);
    }
    CLI(&r, url, "group", "create", "q", "-g", "x", "--start", "new", "--to",
        "head");
    ASSERT_EXIT(&r, 2);
    ASSERT_CONTAINS(r.err, "--to goes with 'group setid'");
    cli_free(&r);
    CLI(&r, url, "group", "setid", "q", "-g", "x");
    ASSERT_EXIT(&r, 2);
    ASSERT_CONTAINS(r.err, "--to is required");
    cli_free(&r);
    CLI(&r, url, "group", "rename", "q", "-g", "x");
    ASSERT_EXIT(&r, 2);
    ASSERT_CONTAINS(r.err, "unknown subcommand 'rename'");
    cli_free(&r);
    ASSERT_EQ_INT(srv_connections(s), before + 1);
    char out[1024];
    emq_srv_cmd(s, out, sizeof out, "XINFO", "GROUPS", "emq:{q}", NULL);
    ASSERT_NOT_CONTAINS(out, "name\nx\n");
    emq_srv_stop(s);
}

TEST(cli_consumers_prune_hands_entries_over) {
    emq_srv *s = emq_srv_start(NULL);
    const char *url = emq_srv_url(s);
    five_two_pending(s); /* c holds 2 */
    /* c passes the threshold; fresh, active after the pause, must stay
     * under it until the prune runs, however slow the run. */
    int idle_ms = emq_test_ms(1000);
    char idle[16], said[128];
    snprintf(idle, sizeof idle, "%d", idle_ms);
    snprintf(said, sizeof said,
             "removed 1 consumer idle at least %d ms; 2 pending entries",
             idle_ms);
    usleep((useconds_t)(idle_ms + 100) * 1000);
    /* "fresh" becomes active now. */
    char out[4096];
    emq_srv_cmd(s, out, sizeof out, "XREADGROUP", "GROUP", "g", "fresh",
                "COUNT", "1", "STREAMS", "emq:{q}", ">", NULL);
    cli_result r;
    CLI(&r, url, "consumers", "prune", "q", "-g", "g", "--idle", idle);
    ASSERT_EXIT(&r, 0);
    ASSERT_CONTAINS(r.out, said);
    cli_free(&r);
    emq_srv_cmd(s, out, sizeof out, "XINFO", "CONSUMERS", "emq:{q}", "g", NULL);
    ASSERT_NOT_CONTAINS(out, "name\nc\n");
    ASSERT_CONTAINS(out, "name\nfresh\n");
    /* Nothing dropped: all 3 pending are fresh's now. */
    emq_srv_cmd(s, out, sizeof out, "XPENDING", "emq:{q}", "g", NULL);
    ASSERT(strncmp(out, "3\n", 2) == 0);
    ASSERT_CONTAINS(out, "fresh\n3");
    CLI(&r, url, "consumers", "prune", "q", "-g", "g");
    ASSERT_EXIT(&r, 2);
    ASSERT_CONTAINS(r.err, "--idle is required");
    cli_free(&r);
    CLI(&r, url, "consumers", "prune", "q", "-g", "nope", "--idle", "0");
    ASSERT_EXIT(&r, 1);
    ASSERT_CONTAINS(r.err, "no group 'nope'");
    cli_free(&r);
    emq_srv_stop(s);
}

TEST(cli_dead_list_count_json_and_requeue_by_id) {
    emq_srv *s = emq_srv_start(NULL);
    const char *url = emq_srv_url(s);
    cli_result r;
    CLI_IN(&r, url, "p1\np2\np3\n", "produce", "q", "--lines", "-q");
    cli_free(&r);
    CLI(&r, url, "consume", "q", "-g", "g", "-c", "w", "--start", "head",
        "--max-deliveries", "1", "--until-idle", "300", "-q", "--exec",
        "exit 4");
    ASSERT_EXIT(&r, 0);
    cli_free(&r);
    ASSERT_EQ_INT(srv_int(s, "XLEN", "emq:{q}:dead"), 3);
    CLI(&r, url, "dead", "list", "q", "--json");
    ASSERT_EXIT(&r, 0);
    ASSERT_EQ_INT(cli_lines(r.out), 3);
    ASSERT_JSON_LINES(r.out);
    ASSERT_CONTAINS(r.out, "exit 4");
    ASSERT_EQ_STR(r.err, "");
    cli_free(&r);
    CLI(&r, url, "dead", "list", "q", "--count", "2");
    ASSERT_EXIT(&r, 0);
    ASSERT_EQ_INT(cli_lines(r.out), 3); /* header + 2 */
    ASSERT_CONTAINS(r.err, "2 dead letters (the --count limit");
    cli_free(&r);
    CLI(&r, url, "dead", "list", "q", "-q");
    ASSERT_EXIT(&r, 0);
    ASSERT_EQ_INT(cli_lines(r.out), 4);
    ASSERT_EQ_STR(r.err, "");
    /* The first dead-letter ID: the first word of the first row. */
    const char *row = strchr(r.out, '\n') + 1;
    char dead_id[64];
    snprintf(dead_id, sizeof dead_id, "%.*s", (int)strcspn(row, " "), row);
    cli_free(&r);
    CLI(&r, url, "dead", "requeue", "q", dead_id);
    ASSERT_EXIT(&r, 0);
    ASSERT_CONTAINS(r.out, "requeued 1 dead letter onto queue 'q'");
    cli_free(&r);
    ASSERT_EQ_INT(srv_int(s, "XLEN", "emq:{q}:dead"), 2);
    /* An unknown ID with a known one: the known one moves, exit 1. */
    CLI(&r, url, "dead", "list", "q", "-q");
    row = strchr(r.out, '\n') + 1;
    snprintf(dead_id, sizeof dead_id, "%.*s", (int)strcspn(row, " "), row);
    cli_free(&r);
    CLI(&r, url, "dead", "requeue", "q", dead_id, "1-1");
    ASSERT_EXIT(&r, 1);
    ASSERT_CONTAINS(r.out, "requeued 1 dead letter");
    ASSERT_ONE_LINE(r.err);
    ASSERT_CONTAINS(r.err, "1-1");
    cli_free(&r);
    ASSERT_EQ_INT(srv_int(s, "XLEN", "emq:{q}:dead"), 1);
    ASSERT_EQ_INT(srv_int(s, "XLEN", "emq:{q}"), 5);
    /* The requeued entries keep their fields. */
    CLI(&r, url, "consume", "q", "-g", "g", "-c", "w", "--start", "head",
        "--until-idle", "300", "-q");
    ASSERT_EXIT(&r, 0);
    ASSERT_EQ_INT(cli_lines(r.out), 2);
    ASSERT_JSON_LINES(r.out);
    cli_free(&r);
    CLI(&r, url, "dead", "requeue", "q", "--all", dead_id);
    ASSERT_EXIT(&r, 2);
    cli_free(&r);
    CLI(&r, url, "dead", "requeue", "q");
    ASSERT_EXIT(&r, 2);
    cli_free(&r);
    emq_srv_stop(s);
}

TEST(cli_trim_acked_flags) {
    emq_srv *s = emq_srv_start(NULL);
    const char *url = emq_srv_url(s);
    cli_result r;
    /* No group: nothing removed, whatever --maxlen says. */
    CLI_IN(&r, url, "a\nb\nc\n", "produce", "solo", "--lines", "-q");
    cli_free(&r);
    CLI(&r, url, "trim", "solo", "--acked", "--maxlen", "0");
    ASSERT_EXIT(&r, 0);
    ASSERT_CONTAINS(r.out, "has no consumer group; nothing removed");
    cli_free(&r);
    ASSERT_EQ_INT(srv_int(s, "XLEN", "emq:{solo}"), 3);
    /* c holds the first two of five: nothing below them is removable... */
    five_two_pending(s);
    CLI(&r, url, "trim", "q", "--acked", "--maxlen", "0");
    ASSERT_EXIT(&r, 0);
    ASSERT_CONTAINS(r.out, "removed 0 entries");
    cli_free(&r);
    ASSERT_EQ_INT(srv_int(s, "XLEN", "emq:{q}"), 5);
    /* ...once handled, everything up to the group's position goes. */
    CLI(&r, url, "consume", "q", "-g", "g", "-c", "c", "--start", "head",
        "--limit", "3", "-q");
    ASSERT_EXIT(&r, 0);
    cli_free(&r);
    CLI(&r, url, "trim", "q", "--acked");
    ASSERT_EXIT(&r, 0);
    ASSERT_CONTAINS(r.out, "removed 3 entries");
    cli_free(&r);
    ASSERT_EQ_INT(srv_int(s, "XLEN", "emq:{q}"), 2);
    CLI(&r, url, "trim", "q", "--acked", "--maxlen", "x");
    ASSERT_EXIT(&r, 2);
    ASSERT_CONTAINS(r.err, "--maxlen");
    cli_free(&r);
    emq_srv_stop(s);
}

/* Many short handlers at once that read their stdin to EOF: a command
 * must not hold another command's stdin pipe open (it did: two `cat`s could
 * wait for each other's EOF forever, and consume hung). */
TEST(cli_consume_concurrent_handlers_each_see_their_stdin_end) {
    emq_srv *s = emq_srv_start(NULL);
    const char *url = emq_srv_url(s);
    cli_result r;
    const char *in = numbered_lines(200);
    cli_run_in(&r, url, in, strlen(in), 20000,
               CLI_ARGS("produce", "q", "--lines", "-q"));
    ASSERT_EXIT(&r, 0);
    cli_free(&r);
    cli_run_in(&r, url, NULL, 0, 10000,
               CLI_ARGS("consume", "q", "-g", "g", "-c", "C", "--start", "head",
                        "--concurrency", "8", "--count", "1", "--until-idle",
                        "500", "--exec", "cat >/dev/null; sleep 0.01"));
    ASSERT_EXIT(&r, 0);
    ASSERT_CONTAINS(r.err, "consumed 200 entries (acknowledged 200");
    cli_free(&r);
    emq_srv_stop(s);
}

/* consume on a terminal (commands run the entries, so the terminal is
 * free for it): a progress line with handled, rate, lag and in flight,
 * cleared before the summary; -q: none. */
TEST_TIMEOUT(cli_consume_progress_line_on_a_terminal, 40) {
    emq_srv *s = emq_srv_start(NULL);
    const char *url = emq_srv_url(s);
    const char *in = numbered_lines(50);
    cli_result r;
    cli_run_in(&r, url, in, strlen(in), 20000,
               CLI_ARGS("produce", "q", "--lines"));
    ASSERT_EXIT(&r, 0);
    cli_free(&r);
    static char tty[65536];
    int code =
        cli_run_pty(url, "", 0, tty, sizeof tty, 20000,
                    CLI_ARGS("consume", "q", "-g", "g", "-c", "c", "-s", "head",
                             "--exec", "sleep 0.02", "--until-idle", "1500"));
    ASSERT_EQ_INT(code, 0);
    ASSERT_CONTAINS(tty, "\r\033[Kechomq: ");
    ASSERT_CONTAINS(tty, " handled (");
    ASSERT_CONTAINS(tty, " in flight");
    ASSERT_CONTAINS(tty, ", lag 0,"); /* a report came: all delivered */
    ASSERT_CONTAINS(tty, "echomq: consumed 50 entries");
    ASSERT(strstr(tty, " handled (") < strstr(tty, "consumed 50"));
    code = cli_run_pty(url, "", 0, tty, sizeof tty, 20000,
                       CLI_ARGS("consume", "q", "-g", "g2", "-c", "c", "-s",
                                "head", "--exec", "true", "--until-idle", "500",
                                "-q"));
    ASSERT_EQ_INT(code, 0);
    ASSERT_NOT_CONTAINS(tty, "handled (");
    emq_srv_stop(s);
}
