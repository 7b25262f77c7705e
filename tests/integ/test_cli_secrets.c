/* SPDX-License-Identifier: BSD-3-Clause */
/* test_cli_secrets.c: no secret ever reaches an output of `echomq`,
 * whatever shape the URL has.
 *
 * Every URL shape below holds the secret "Zq9Secret" (whole, or split by
 * the character that confuses parsers: '?', '@', a percent escape); each
 * verb runs with it from -u and from $ECHOMQ_URL, quiet and with -v, and
 * neither stdout nor stderr may hold any piece of it ("Zq9", "Secret").
 * The servers named are loopback addresses whose port refuses, or none. A
 * --exec handler gets no ECHOMQ_* variable.
 */
#include "integ/cli_check_helpers.h"
#include "integ/inspect_conn_helpers.h"
#include "harness/fakepeer.h"

static const char *const shapes[] = {
    "redis://u:Zq9Secret@127.0.0.1:1",
    "redis://u:Zq9?Secret@127.0.0.1:1",
    "redis://u:Zq9@Secret@127.0.0.1:1",
    "redis://u:Zq9%53ecret@127.0.0.1:1",
    "redis://Zq9Secret@127.0.0.1:1",
    "rediss://u:Zq9Secret@[::1]:1",
    "unix://:Zq9Secret@/nonexistent/echomq.sock",
    "redis//u:Zq9Secret@127.0.0.1:1",
    "Zq9Secret://127.0.0.1:1",
    "Zq9Secret",
    "redis://u:Zq9Secret@127.0.0.1:notaport",
};

static void assert_clean(const char *what, size_t shape, const char *text) {
    if (strstr(text, "Zq9") || strstr(text, "Secret"))
        FAIL("%s with URL shape %zu shows the secret: \"%s\"", what, shape,
             text);
}

TEST_TIMEOUT(cli_no_secret_in_any_output_for_any_url_shape, 120) {
    const char *const verbs[][8] = {
        {"produce", "q", "a=1", NULL},
        {"consume", "q", "-g", "g", "-c", "c", "--start", NULL},
        {"info", "q", NULL},
        {"pending", "q", "-g", "g", NULL},
        {"dead", "list", "q", NULL},
        {"group", "create", "q", "-g", "g", NULL},
    };
    int runs = 0;
    for (size_t u = 0; u < sizeof shapes / sizeof shapes[0]; u++)
        for (size_t v = 0; v < sizeof verbs / sizeof verbs[0]; v++)
            for (int form = 0; form < 4; form++) {
                const char *args[20];
                int n = 0;
                if (form & 1)
                    args[n++] = "-v";
                if ((form & 2) == 0) {
                    args[n++] = "-u";
                    args[n++] = shapes[u];
                }
                for (int k = 0; verbs[v][k]; k++)
                    args[n++] = verbs[v][k];
                if (v == 1) { /* consume: a start and a bounded run */
                    args[n++] = "head";
                    args[n++] = "--until-idle";
                    args[n++] = "200";
                }
                if (v == 5) {
                    args[n++] = "--start";
                    args[n++] = "head";
                }
                args[n] = NULL;
                cli_result r;
                cli_run_in(&r, (form & 2) ? shapes[u] : NULL, NULL, 0, 20000,
                           args);
                if (r.code == 0)
                    FAIL("%s succeeded with a bad or unreachable URL",
                         verbs[v][0]);
                assert_clean("stderr", u, r.err);
                assert_clean("stdout", u, r.out ? r.out : "");
                cli_free(&r);
                runs++;
            }
    printf("    %d runs: %zu URL shapes x 6 verbs x (-u, $ECHOMQ_URL) x "
           "(quiet, -v)\n",
           runs, sizeof shapes / sizeof shapes[0]);
}

/* Generated shapes, as the library's unit test makes them (schemes,
 * separators, user infos with '@', '?', '#', '/', ':' and a percent
 * escape in or around the password, tails), run through the real program:
 * at least 1,000 runs of `info`, from -u and from $ECHOMQ_URL, quiet and
 * -v, none showing a piece of the secret. Every host is loopback: a port
 * that refuses (emq_free_port), [::1] on it, or a unix path that does
 * not exist; the others do not parse. */
TEST_TIMEOUT(cli_url_shapes_by_the_thousand_never_show_the_secret, 300) {
    static const char *const schemes[] = {
        "redis", "rediss", "unix", "redis-sentinel",
        "REDIS", "valkey", "",     "Zq9Secret"};
    static const char *const seps[] = {"://", ":"};
    static const char *const users[] = {
        "u:Zq9Secret@",    ":Zq9Secret@",   "Zq9Secret@",    "u:Zq9Secret:x@",
        "u:Zq9Secret@x@",  "u:Zq9?Secret@", "u:Zq9#Secret@", "u:Zq9/Secret@",
        "u:%41Zq9Secret@", "u:Zq9Secret@@", "u@:Zq9Secret@", "u:Zq9Secret@/"};
    int port = emq_free_port();
    char hosts[3][64];
    snprintf(hosts[0], sizeof hosts[0], "127.0.0.1:%d", port);
    snprintf(hosts[1], sizeof hosts[1], "[::1]:%d", port);
    snprintf(hosts[2], sizeof hosts[2], "/nonexistent/echomq.sock");
    static const char *const tails[] = {"", "?x@y#m"};
    int runs = 0;
    for (size_t a = 0; a < sizeof schemes / sizeof *schemes; a++)
        for (size_t b = 0; b < sizeof seps / sizeof *seps; b++)
            for (size_t c = 0; c < sizeof users / sizeof *users; c++)
                for (size_t d = 0; d < 3; d++)
                    for (size_t e = 0; e < sizeof tails / sizeof *tails; e++) {
                        char url[256];
                        snprintf(url, sizeof url, "%s%s%s%s%s", schemes[a],
                                 seps[b], users[c], hosts[d], tails[e]);
                        int form = runs % 4;
                        const char *args[8];
                        int n = 0;
                        if (form & 1)
                            args[n++] = "-v";
                        if ((form & 2) == 0) {
                            args[n++] = "-u";
                            args[n++] = url;
                        }
                        args[n++] = "info";
                        args[n++] = "q";
                        args[n] = NULL;
                        cli_result r;
                        cli_run_in(&r, (form & 2) ? url : NULL, NULL, 0, 20000,
                                   args);
                        if (r.code == 0)
                            FAIL("info succeeded with %s", url);
                        char what[300];
                        snprintf(what, sizeof what, "stderr of %s", url);
                        assert_clean(what, (size_t)runs, r.err);
                        assert_clean("stdout", (size_t)runs, r.out);
                        cli_free(&r);
                        runs++;
                    }
    ASSERT(runs >= 1000);
    printf("    %d runs of info, each URL from -u or $ECHOMQ_URL, quiet or "
           "-v\n",
           runs);
}

/* A --exec command gets echomq's environment without ECHOMQ_URL and
 * ECHOMQ_PASSWORD (nor any other ECHOMQ_*), plus its EMQ_* variables.
 * (argv masking: test_security.c checks a running consumer's
 * /proc/PID/cmdline, unit/test_url.c emq_url_mask on every shape.) */
TEST_TIMEOUT(cli_handler_environment_has_no_credentials, 30) {
    emq_srv_opts o = {.requirepass = "Zq9Secret"};
    emq_srv *s = emq_srv_start(&o);
    char url[128], envurl[160], out[600], cmd[800];
    snprintf(url, sizeof url, "redis://:Zq9Secret@127.0.0.1:%d",
             emq_srv_port(s));
    snprintf(envurl, sizeof envurl, "ECHOMQ_URL=%s", url);
    snprintf(out, sizeof out, "%s/env.txt", emq_test_tmpdir());
    snprintf(cmd, sizeof cmd, "cat >/dev/null; env > %s", out);
    cli_result r;
    CLI_IN(&r, url, "1\n", "produce", "q", "--lines", "-q");
    ASSERT_EXIT(&r, 0);
    cli_free(&r);
    pid_t pid = fork();
    ASSERT(pid >= 0);
    if (pid == 0) {
        char *envp[] = {envurl, "ECHOMQ_PASSWORD=Zq9Secret",
                        "PATH=/usr/bin:/bin", "KEEP_ME=1", NULL};
        int null = open("/dev/null", O_RDWR);
        dup2(null, 1);
        dup2(null, 2);
        execle(cli_path(), "echomq", "consume", "q", "-g", "g", "-c", "c",
               "--start", "head", "--until-idle", "300", "--exec", cmd,
               (char *)NULL, envp);
        _exit(126);
    }
    int status = wait_child(pid, 20000);
    ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    const char *env = cli_slurp(out);
    ASSERT_CONTAINS(env, "KEEP_ME=1");
    ASSERT_CONTAINS(env, "EMQ_ID=");
    ASSERT_NOT_CONTAINS(env, "ECHOMQ_");
    ASSERT_NOT_CONTAINS(env, "Zq9");
    emq_srv_stop(s);
}

/* --until-idle never reports success for a run that never connected:
 * a server that never answers, and rediss:// to a
 * plain server, both exit 1 with the reason, not 0 with "consumed 0". */
TEST_TIMEOUT(cli_until_idle_never_succeeds_without_a_connection, 60) {
    emq_peer_opts po = {.mode = EMQ_PEER_SILENT};
    emq_peer *silent = emq_peer_start(&po);
    cli_result r;
    CLI(&r, emq_peer_url(silent), "consume", "q", "-g", "g", "-c", "c",
        "--start", "head", "--until-idle", "200");
    ASSERT_EXIT(&r, 1);
    ASSERT_NOT_CONTAINS(r.err, "consumed 0");
    cli_free(&r);
    emq_peer_stop(silent);
    emq_srv *s = emq_srv_start(NULL);
    char url[128];
    snprintf(url, sizeof url, "rediss://127.0.0.1:%d", emq_srv_port(s));
    CLI(&r, url, "consume", "q", "-g", "g", "-c", "c", "--start", "head",
        "--until-idle", "200");
    ASSERT_EXIT(&r, 1);
    ASSERT_NOT_CONTAINS(r.err, "consumed 0");
    ASSERT_CONTAINS(r.err, "TLS");
    cli_free(&r);
    emq_srv_stop(s);
}

/* No byte of out is a control character but the line breaks of its own
 * lines; returns 1 when clean. */
static int terminal_safe(const char *out) {
    for (const unsigned char *p = (const unsigned char *)out; *p; p++)
        if ((*p < 0x20 && *p != '\n') || *p == 0x7f ||
            (*p == 0xc2 && p[1] >= 0x80 && p[1] <= 0x9f))
            return 0;
    return 1;
}

/* Tables and messages escape what the server or the command line holds:
 * a group, a consumer and a dead-letter reason full of
 * escape sequences, CR and LF cannot drive the terminal or forge a row. */
TEST_TIMEOUT(cli_tables_and_messages_escape_control_characters, 30) {
    emq_srv *s = emq_srv_start(NULL);
    emq_conn_t *adm = admin_connect(s);
    const char *bad_group = "g\x1b[31mX\r\nFORGED",
               *bad_consumer = "c\x1b]0;t\x07";
    CMD_NOERR(adm, "XGROUP", "CREATE", "emq:{q}", bad_group, "$", "MKSTREAM");
    /* A C1 control in UTF-8: U+009B is a CSI to some terminals. */
    CMD_NOERR(adm, "XGROUP", "CREATE", "emq:{q}",
              "h\xc2\x9b"
              "31m",
              "$");
    CMD_NOERR(adm, "XADD", "emq:{q}", "*", "data", "1");
    CMD_NOERR(adm, "XREADGROUP", "GROUP", bad_group, bad_consumer, "COUNT", "1",
              "STREAMS", "emq:{q}", ">");
    CMD_NOERR(adm, "XADD", "emq:{q}:dead", "*", "emq.id", "1-0", "emq.group",
              bad_group, "emq.consumer", bad_consumer, "emq.deliveries", "3",
              "emq.reason", "boom\r\n\x1b[2Jgone", "data", "1");
    emq_conn_destroy(adm);
    cli_result r;
    CLI(&r, emq_srv_url(s), "info", "q");
    ASSERT_EXIT(&r, 0);
    ASSERT(terminal_safe(r.out));
    ASSERT_CONTAINS(r.out, "g\\x1b[31mX\\x0d\\x0aFORGED");
    ASSERT_CONTAINS(r.out, "c\\x1b]0;t\\x07");
    ASSERT_CONTAINS(r.out, "h\\xc2\\x9b31m");
    cli_free(&r);
    CLI(&r, emq_srv_url(s), "pending", "q", "-g", bad_group);
    ASSERT_EXIT(&r, 0);
    ASSERT(terminal_safe(r.out));
    ASSERT_CONTAINS(r.out, "c\\x1b]0;t\\x07");
    ASSERT(terminal_safe(r.err));
    cli_free(&r);
    CLI(&r, emq_srv_url(s), "dead", "list", "q");
    ASSERT_EXIT(&r, 0);
    ASSERT(terminal_safe(r.out));
    ASSERT_CONTAINS(r.out, "boom\\x0d\\x0a\\x1b[2Jgone");
    cli_free(&r);
    /* A usage error naming a bad argument stays one line. */
    CLI(&r, emq_srv_url(s), "consume", "q\n\x1b[1mx", "-g", "g", "-c", "c",
        "--start", "head", "extra\r");
    ASSERT_EXIT(&r, 2);
    ASSERT_EQ_INT(cli_lines(r.err), 1);
    ASSERT(terminal_safe(r.err));
    ASSERT_CONTAINS(r.err, "extra\\x0d");
    cli_free(&r);
    emq_srv_stop(s);
}

/* produce --lines from a slow source: lines go out once
 * no more came for --linger ms, not when a batch fills; SIGTERM sends what
 * was read and exits 0. */
TEST_TIMEOUT(cli_produce_lines_lingers_and_flushes_on_sigterm, 30) {
    emq_srv *s = emq_srv_start(NULL);
    int in, err;
    pid_t pid = cli_spawn(
        emq_srv_url(s), CLI_ARGS("produce", "q", "--lines", "--batch", "1000"),
        &in, NULL, &err);
    ASSERT(write(in, "1\n2\n3\n4\n5\n", 10) == 10);
    /* Well after the 100 ms linger, with the batch far from full. */
    int64_t end = cli_ms() + emq_test_ms(3000);
    long long len = 0;
    while (cli_ms() < end && (len = srv_int(s, "XLEN", "emq:{q}")) < 5)
        usleep(20000);
    ASSERT_EQ_INT(len, 5);
    /* Three more, and a SIGTERM before any linger could pass. */
    ASSERT(write(in, "6\n7\n8", 5) == 5);
    usleep(20000);
    kill(pid, SIGTERM);
    ASSERT_EQ_INT(cli_wait(pid, 5000), 0);
    char text[4096];
    ssize_t n = read(err, text, sizeof text - 1);
    text[n > 0 ? n : 0] = '\0';
    ASSERT_CONTAINS(text, "every line read was sent");
    ASSERT_CONTAINS(text, "produced 8 entries");
    ASSERT_EQ_INT(srv_int(s, "XLEN", "emq:{q}"), 8);
    close(in);
    close(err);
    emq_srv_stop(s);
}

/* Two smaller security items: `info` for a user without +exists says
 * what the server refused (NOPERM), not "EXISTS is not an integer"; and
 * `group create` refuses the names `consume` refuses (the one name rule,
 * emq__keys_check_name). */
TEST_TIMEOUT(cli_info_noperm_and_group_names_like_consume, 30) {
    emq_srv *s = emq_srv_start(NULL);
    emq_conn_t *adm = admin_connect(s);
    CMD_NOERR(adm, "ACL", "SETUSER", "noexists", "on", ">pw", "~*", "&*",
              "+@all", "-exists");
    emq_conn_destroy(adm);
    char url[128];
    snprintf(url, sizeof url, "redis://noexists:pw@127.0.0.1:%d",
             emq_srv_port(s));
    cli_result r;
    CLI_IN(&r, emq_srv_url(s), "1\n", "produce", "q", "--lines", "-q");
    ASSERT_EXIT(&r, 0);
    cli_free(&r);
    CLI(&r, url, "info", "q");
    ASSERT_EXIT(&r, 1);
    ASSERT_CONTAINS(r.err, "NOPERM");
    ASSERT_NOT_CONTAINS(r.err, "not an integer");
    cli_free(&r);
    char longname[140];
    memset(longname, 'g', 129);
    longname[129] = '\0';
    CLI(&r, emq_srv_url(s), "group", "create", "q", "-g", longname, "--start",
        "head");
    ASSERT_EXIT(&r, 2);
    ASSERT_CONTAINS(r.err, "is 129 bytes long; the limit is 128");
    cli_free(&r);
    CLI(&r, emq_srv_url(s), "consume", "q", "-g", longname, "-c", "c",
        "--start", "head", "--until-idle", "100");
    ASSERT_EXIT(&r, 2);
    ASSERT_CONTAINS(r.err, "is 129 bytes long; the limit is 128");
    cli_free(&r);
    emq_srv_stop(s);
}

/* A script refused by the ACL names the refused command: the
 * server's own text does not ("can't run this command"). */
TEST_TIMEOUT(cli_script_refusals_name_the_command, 30) {
    emq_srv *s = emq_srv_start(NULL);
    emq_conn_t *adm = admin_connect(s);
    CMD_NOERR(adm, "ACL", "SETUSER", "lim", "on", ">pw", "~*", "&*", "+@all",
              "-xtrim", "-del");
    CMD_NOERR(adm, "XADD", "emq:{q}", "*", "data", "1");
    CMD_NOERR(adm, "XGROUP", "CREATE", "emq:{q}", "g", "$");
    CMD_NOERR(adm, "XADD", "emq:{q}:dead", "*", "data", "1");
    emq_conn_destroy(adm);
    char url[128];
    snprintf(url, sizeof url, "redis://lim:pw@127.0.0.1:%d", emq_srv_port(s));
    cli_result r;
    CLI(&r, url, "trim", "q", "--acked");
    ASSERT_EXIT(&r, 1);
    ASSERT_CONTAINS(r.err, "XTRIM refused");
    cli_free(&r);
    CLI(&r, url, "dead", "purge", "q", "--yes");
    ASSERT_EXIT(&r, 1);
    ASSERT_CONTAINS(r.err, "DEL refused");
    cli_free(&r);
    emq_srv_stop(s);
}

/* A database that does not exist is the same configuration error for
 * every verb: exit 2, naming the database. */
TEST_TIMEOUT(cli_missing_database_exits_2_for_every_verb, 30) {
    emq_srv *s = emq_srv_start(NULL);
    char url[128];
    snprintf(url, sizeof url, "redis://127.0.0.1:%d/99", emq_srv_port(s));
    const char *const verbs[][10] = {
        {"produce", "q", "a=1", NULL},
        {"info", "q", NULL},
        {"consume", "q", "-g", "g", "-c", "c", "--start", "head",
         "--until-idle", NULL},
    };
    for (size_t v = 0; v < 3; v++) {
        const char *args[12];
        size_t n = 0;
        for (; verbs[v][n]; n++)
            args[n] = verbs[v][n];
        if (v == 2)
            args[n++] = "200";
        args[n] = NULL;
        cli_result r;
        cli_run_in(&r, url, NULL, 0, 20000, args);
        ASSERT_EXIT(&r, 2);
        ASSERT_CONTAINS(r.err, "database 99 does not exist");
        cli_free(&r);
    }
    emq_srv_stop(s);
}

/* No password for a server that wants one: an authentication
 * error saying so, not "CLUSTER SLOTS failed: NOAUTH" (the route's first
 * command was the one refused). */
TEST_TIMEOUT(cli_missing_password_is_an_authentication_error, 30) {
    emq_srv_opts o = {.requirepass = "Zq9Secret"};
    emq_srv *s = emq_srv_start(&o);
    char url[128];
    snprintf(url, sizeof url, "redis://127.0.0.1:%d", emq_srv_port(s));
    cli_result r;
    CLI(&r, url, "info", "q");
    ASSERT_EXIT(&r, 1);
    ASSERT_CONTAINS(r.err, "requires authentication");
    ASSERT_NOT_CONTAINS(r.err, "CLUSTER");
    cli_free(&r);
    emq_srv_stop(s);
}

/* A run that holds a password makes no core dump and cannot be attached
 * to (PR_SET_DUMPABLE 0; -v says so), unless ECHOMQ_ALLOW_CORE_DUMPS=1;
 * a run without a password changes nothing. */
TEST_TIMEOUT(cli_no_core_dumps_while_holding_a_password, 30) {
    emq_srv_opts o = {.requirepass = "Zq9Secret"};
    emq_srv *s = emq_srv_start(&o);
    emq_srv *open_srv = emq_srv_start(NULL);
    char with[128], without[128];
    snprintf(with, sizeof with, "redis://:Zq9Secret@127.0.0.1:%d",
             emq_srv_port(s));
    snprintf(without, sizeof without, "redis://127.0.0.1:%d",
             emq_srv_port(open_srv));
    static const char note[] = "no core dumps while this process holds a "
                               "password";
    cli_result r;
    CLI(&r, with, "-v", "ls");
    ASSERT_EXIT(&r, 0);
    ASSERT_CONTAINS(r.err, note);
    assert_clean("ls -v", 0, r.err);
    cli_free(&r);
    setenv("ECHOMQ_ALLOW_CORE_DUMPS", "1", 1);
    CLI(&r, with, "-v", "ls");
    unsetenv("ECHOMQ_ALLOW_CORE_DUMPS");
    ASSERT_EXIT(&r, 0);
    ASSERT_NOT_CONTAINS(r.err, note);
    cli_free(&r);
    CLI(&r, without, "-v", "ls");
    ASSERT_EXIT(&r, 0);
    ASSERT_NOT_CONTAINS(r.err, note);
    cli_free(&r);
    emq_srv_stop(open_srv);
    emq_srv_stop(s);
}
