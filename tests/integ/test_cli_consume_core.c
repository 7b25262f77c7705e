/* SPDX-License-Identifier: BSD-3-Clause */
/* test_cli_consume_core.c: `echomq consume` on the pull core,
 * end to end against a real redis-server:
 *  - --concurrency 8 runs 8 commands at once on one name and one read
 *    connection (16 jobs of 0.5 s);
 *  - pipe mode writes each read's lines in one write(2), counted from
 *    /proc/PID/io, and acknowledges only what was written;
 *  - --exec-batch N CMD: up to N lines per command, exit 0 acknowledges
 *    them all, 75 retries them all, any other exit fails them all;
 *  - --no-ack leaves everything pending to the name;
 *  - --exec-timeout kills the command's process group, reason "timeout";
 *  - SIGKILL at any point loses nothing that was not acknowledged, in
 *    pipe mode and with --exec.
 */
#include "integ/cli_check_helpers.h"
#include "integ/inspect_conn_helpers.h"

#include <poll.h>

/* "1\n2\n...n\n" */
static const char *lines_upto(int n) {
    static char buf[1 << 17];
    size_t k = 0;
    buf[0] = '\0';
    for (int i = 1; i <= n && k + 16 < sizeof buf; i++)
        k += (size_t)snprintf(buf + k, sizeof buf - k, "%d\n", i);
    return buf;
}

static void produce_lines(const emq_srv *s, int n) {
    cli_result r;
    const char *in = lines_upto(n);
    cli_run_in(&r, emq_srv_url(s), in, strlen(in), 30000,
               CLI_ARGS("produce", "q", "--lines", "-q"));
    ASSERT_EXIT(&r, 0);
    cli_free(&r);
}

/* 1 while pid runs (neither gone nor a zombie). */
static int process_alive(int pid) {
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/stat", pid);
    const char *stat = cli_slurp(path);
    const char *end = strrchr(stat, ')');
    return end != NULL && end[1] == ' ' && end[2] != 'Z' && end[2] != 'X';
}

/* The highest number in a file of one number per line. */
static int most_of(const char *text) {
    int most = 0;
    for (const char *p = text; *p; p = strchr(p, '\n') + 1) {
        most = atoi(p) > most ? atoi(p) : most;
        if (strchr(p, '\n') == NULL)
            break;
    }
    return most;
}

TEST_TIMEOUT(cli_consume_concurrency_8_runs_16_slow_jobs_at_once, 60) {
    emq_srv *s = emq_srv_start(NULL);
    produce_lines(s, 16);
    const char *dir = emq_test_tmpdir();
    char cmd[1500];
    /* Each job waits (at most 5 s) until eight run, then writes how many
     * do: eight at once is reached however slowly the machine starts
     * them (a fixed sleep of 0.5 s counted on all eight starting within
     * it), and a ninth would show. */
    snprintf(cmd, sizeof cmd,
             "cat >/dev/null; mkdir %s/run.$EMQ_ID; i=0; "
             "while [ $(ls %s | grep -c '^run\\.') -lt 8 ] && [ $i -lt 100 ]; "
             "do sleep 0.05; i=$((i+1)); done; "
             "ls %s | grep -c '^run\\.' >> %s/overlap; sleep 0.3; "
             "rmdir %s/run.$EMQ_ID",
             dir, dir, dir, dir, dir);
    cli_result r;
    int64_t t0 = cli_ms();
    CLI(&r, emq_srv_url(s), "consume", "q", "-g", "g", "-c", "C", "--start",
        "head", "--concurrency", "8", "--until-idle", "300", "--exec", cmd);
    int64_t took = cli_ms() - t0;
    ASSERT_EXIT(&r, 0);
    ASSERT_CONTAINS(r.err, "consumed 16 entries (acknowledged 16");
    cli_free(&r);
    char path[600];
    snprintf(path, sizeof path, "%s/overlap", dir);
    int most = most_of(cli_slurp(path));
    /* Eight at once, never more. */
    ASSERT_EQ_INT(most, 8);
    printf("    16 jobs with --concurrency 8: %lld ms in all "
           "(with --until-idle 300), at most %d at once\n",
           (long long)took, most);
    char out[2048];
    emq_srv_cmd(s, out, sizeof out, "XINFO", "CONSUMERS", "emq:{q}", "g", NULL);
    ASSERT_CONTAINS(out, "name\nC\n");
    ASSERT_NOT_CONTAINS(out, "C-1");
    emq_srv_stop(s);
}

/* Spawns consume in pipe mode with stdout on a pipe; returns the pid. */
static pid_t spawn_pipe_consumer(const emq_srv *s, int *out,
                                 const char *const *extra) {
    const char *args[32] = {"consume", "q",    "-g",      "g",   "-c", "c",
                            "--start", "head", "--block", "200", "-q"};
    int n = 11;
    for (int i = 0; extra && extra[i] && n < 31; i++)
        args[n++] = extra[i];
    args[n] = NULL;
    return cli_spawn(emq_srv_url(s), args, NULL, out, NULL);
}

/* Reads lines from fd until want lines arrived or ms passed; appends to
 * buf (NUL-terminated). Returns the number of lines in buf. */
static int read_lines(int fd, char *buf, size_t size, size_t *len, int want,
                      int ms) {
    int64_t end = cli_ms() + ms;
    while (cli_lines(buf) < want && cli_ms() < end && *len + 1 < size) {
        struct pollfd p = {fd, POLLIN, 0};
        if (poll(&p, 1, 50) <= 0)
            continue;
        ssize_t n = read(fd, buf + *len, size - 1 - *len);
        if (n <= 0)
            break;
        *len += (size_t)n;
        buf[*len] = '\0';
    }
    return cli_lines(buf);
}

/* write(2)-family calls of pid so far (/proc/PID/io syscw). */
static long long write_calls(pid_t pid) {
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/io", (int)pid);
    const char *io = cli_slurp(path);
    const char *p = strstr(io, "syscw: ");
    return p ? atoll(p + 7) : -1;
}

TEST_TIMEOUT(cli_consume_pipe_mode_writes_once_per_read, 60) {
    emq_srv *s = emq_srv_start(NULL);
    produce_lines(s, 2000);
    int out;
    pid_t pid = spawn_pipe_consumer(s, &out, NULL);
    static char buf[1 << 20];
    size_t len = 0;
    buf[0] = '\0';
    ASSERT_EQ_INT(read_lines(out, buf, sizeof buf, &len, 2000, 20000), 2000);
    long long writes = write_calls(pid);
    /* 2000 entries in reads of 100: about 20 writes to stdout (and a few
     * to the consumer's event descriptor); one per entry would be 2000. */
    printf("    2000 lines in %lld write calls\n", writes);
    ASSERT(writes > 0);
    ASSERT(writes < 200);
    emq_conn_t *adm = admin_connect(s);
    WAIT_UNTIL(pending_total(adm, "emq:{q}", "g") == 0, 5000,
               "every printed line acknowledged");
    emq_conn_destroy(adm);
    kill(pid, SIGTERM);
    ASSERT_EQ_INT(cli_wait(pid, 5000), 0);
    close(out);
    emq_srv_stop(s);
}

/* SIGKILL in the middle of pipe mode, then again with --exec: every entry
 * was printed (or handled) by the killed run or comes in the next one. */
static void killed_loses_nothing(const char *const *extra, const char *log) {
    emq_srv *s = emq_srv_start(NULL);
    produce_lines(s, 3000);
    int out;
    pid_t pid = spawn_pipe_consumer(s, &out, extra);
    static char first[1 << 20];
    size_t len = 0;
    first[0] = '\0';
    if (log == NULL)
        read_lines(out, first, sizeof first, &len, 700, emq_test_ms(20000));
    else /* until the commands handled a good part */
        for (int64_t end = cli_ms() + emq_test_ms(20000);
             cli_lines(cli_slurp(log)) < 300 && cli_ms() < end;)
            usleep(20000);
    usleep(50000);
    kill(pid, SIGKILL);
    cli_wait(pid, 5000);
    if (log == NULL) /* what reached the pipe before the kill */
        read_lines(out, first, sizeof first, &len, 3000, 300);
    else
        snprintf(first, sizeof first, "%s", cli_slurp(log));
    close(out);
    cli_result r;
    CLI(&r, emq_srv_url(s), "consume", "q", "-g", "g", "-c", "c", "--start",
        "head", "--until-idle", "500", "-q");
    ASSERT_EXIT(&r, 0);
    int lost = 0, again = 0;
    for (int i = 1; i <= 3000; i++) {
        char needle[40];
        snprintf(needle, sizeof needle, "{\"data\":\"%d\"}", i);
        char bare[24];
        snprintf(bare, sizeof bare, "\n%d\n", i);
        int before = log == NULL ? strstr(first, needle) != NULL
                                 : strstr(first, bare) != NULL;
        int after = strstr(r.out, needle) != NULL;
        lost += !before && !after;
        again += before && after;
    }
    printf("    killed after %d lines; next run %d lines (%d again)\n",
           cli_lines(first), cli_lines(r.out), again);
    ASSERT(cli_lines(first) > 0);
    ASSERT_EQ_INT(lost, 0);
    cli_free(&r);
    emq_conn_t *adm = admin_connect(s);
    ASSERT(group_done(adm, "emq:{q}", "g"));
    emq_conn_destroy(adm);
    emq_srv_stop(s);
}

TEST_TIMEOUT(cli_consume_sigkill_in_pipe_mode_loses_nothing, 60) {
    killed_loses_nothing(NULL, NULL);
}

TEST_TIMEOUT(cli_consume_sigkill_with_exec_loses_nothing, 60) {
    char log[600], cmd[800];
    snprintf(log, sizeof log, "%s/handled", emq_test_tmpdir());
    /* Each command appends the number it handled (the JSON's data). */
    snprintf(cmd, sizeof cmd,
             "sed 's/.*\"data\":\"\\([0-9]*\\)\".*/\\1/' >> %s", log);
    int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    ASSERT(fd >= 0 && write(fd, "\n", 1) == 1);
    close(fd);
    killed_loses_nothing(CLI_ARGS("--concurrency", "4", "--exec", cmd), log);
}

TEST_TIMEOUT(cli_consume_exec_batch_settles_by_exit, 60) {
    emq_srv *s = emq_srv_start(NULL);
    produce_lines(s, 25);
    const char *dir = emq_test_tmpdir();
    char cmd[1500];
    /* Records each batch's size; the batch holding entry 5 exits 75 the
     * first time (marker file), the one holding 20 exits 3. */
    snprintf(cmd, sizeof cmd,
             "cat > %s/batch.$$; n=$(wc -l < %s/batch.$$); "
             "echo \"$n $EMQ_COUNT\" >> %s/sizes; cat %s/batch.$$ >> %s/all; "
             "if grep -q '\"data\":\"5\"' %s/batch.$$ && [ ! -e %s/again ]; "
             "then touch %s/again; exit 75; fi; "
             "if grep -q '\"data\":\"20\"' %s/batch.$$; then exit 3; fi",
             dir, dir, dir, dir, dir, dir, dir, dir, dir);
    cli_result r;
    CLI(&r, emq_srv_url(s), "consume", "q", "-g", "g", "-c", "c", "--start",
        "head", "--exec-batch", "10", cmd, "--retry-backoff", "0",
        "--max-deliveries", "2", "--until-idle", "500");
    ASSERT_EXIT(&r, 0);
    cli_free(&r);
    char path[600];
    snprintf(path, sizeof path, "%s/sizes", dir);
    const char *sizes = cli_slurp(path);
    /* Every batch at most 10, and EMQ_COUNT says how many. */
    int total = 0;
    for (const char *p = sizes; *p; p = strchr(p, '\n') + 1) {
        int n = 0, count = 0;
        ASSERT_EQ_INT(sscanf(p, "%d %d", &n, &count), 2);
        ASSERT(n >= 1 && n <= 10);
        ASSERT_EQ_INT(n, count);
        total += n;
        if (strchr(p, '\n') == NULL)
            break;
    }
    /* 25 handed out, plus the retried batch again and the failed one
     * again (its second failure sends it to the dead letters whole). */
    ASSERT(total > 25);
    char out[8192];
    emq_srv_cmd(s, out, sizeof out, "XPENDING", "emq:{q}", "g", NULL);
    ASSERT(out[0] == '0');
    long long dead = srv_int(s, "XLEN", "emq:{q}:dead");
    ASSERT(dead >= 1 && dead <= 10);
    emq_srv_cmd(s, out, sizeof out, "XRANGE", "emq:{q}:dead", "-", "+", NULL);
    ASSERT_CONTAINS(out, "emq.reason\nexit 3\n");
    /* Entry 20 among them: its value is a whole line, or the last one
     * (the dead letters' order depends on how the batches fell). */
    size_t olen = strlen(out);
    ASSERT(strstr(out, "data\n20\n") != NULL ||
           (olen >= 8 && strcmp(out + olen - 8, "\ndata\n20") == 0));
    /* The batch that exited 75 came again (its entries may then share a
     * batch with 20's and fail with it: a batch is settled whole). */
    snprintf(path, sizeof path, "%s/all", dir);
    ASSERT(cli_count(cli_slurp(path), "\"data\":\"5\"}") >= 2);
    ASSERT_EQ_INT(cli_count(cli_slurp(path), "\"data\":\"20\"}"), 2);
    emq_srv_stop(s);
}

TEST_TIMEOUT(cli_consume_no_ack_leaves_everything_pending, 60) {
    emq_srv *s = emq_srv_start(NULL);
    produce_lines(s, 5);
    cli_result r;
    CLI(&r, emq_srv_url(s), "consume", "q", "-g", "g", "-c", "c", "--start",
        "head", "--no-ack", "--until-idle", "300");
    ASSERT_EXIT(&r, 0);
    ASSERT_EQ_INT(cli_lines(r.out), 5);
    ASSERT_CONTAINS(r.err, "acknowledged 0");
    cli_free(&r);
    char out[1024];
    emq_srv_cmd(s, out, sizeof out, "XPENDING", "emq:{q}", "g", NULL);
    ASSERT(out[0] == '5');
    /* They come again to the name, counted. */
    CLI(&r, emq_srv_url(s), "consume", "q", "-g", "g", "-c", "c", "--start",
        "head", "--until-idle", "300", "-q");
    ASSERT_EXIT(&r, 0);
    ASSERT_EQ_INT(cli_lines(r.out), 5);
    ASSERT_EQ_INT(cli_count(r.out, "\"deliveries\":2"), 5);
    cli_free(&r);
    emq_srv_cmd(s, out, sizeof out, "XPENDING", "emq:{q}", "g", NULL);
    ASSERT(out[0] == '0');
    emq_srv_stop(s);
}

TEST_TIMEOUT(cli_consume_exec_timeout_kills_the_process_group, 60) {
    emq_srv *s = emq_srv_start(NULL);
    produce_lines(s, 1);
    char pids[600], cmd[1000];
    snprintf(pids, sizeof pids, "%s/pids", emq_test_tmpdir());
    /* The shell starts a sleep of its own: both must end. The sleep is
     * far longer than the test may take, so a consume that waits for it
     * fails by the bound below at any time scale. */
    snprintf(cmd, sizeof cmd,
             "cat >/dev/null; sleep 300 & echo \"$$ $!\" > %s; wait", pids);
    cli_result r;
    int64_t t0 = cli_ms();
    CLI(&r, emq_srv_url(s), "consume", "q", "-g", "g", "-c", "c", "--start",
        "head", "--exec-timeout", "300", "--max-deliveries", "1",
        "--until-idle", "300", "--exec", cmd);
    int64_t took = cli_ms() - t0;
    ASSERT_EXIT(&r, 0);
    cli_free(&r);
    ASSERT(took < emq_test_ms(15000)); /* not the 300 s sleep */
    int sh = 0, sleeper = 0;
    ASSERT_EQ_INT(sscanf(cli_slurp(pids), "%d %d", &sh, &sleeper), 2);
    ASSERT(sh > 1 && sleeper > 1);
    /* The group is gone (a zombie at most, until its reaper's wait). */
    WAIT_UNTIL(!process_alive(sleeper), 3000, "the command's sleep killed");
    char out[2048];
    emq_srv_cmd(s, out, sizeof out, "XRANGE", "emq:{q}:dead", "-", "+", NULL);
    ASSERT_CONTAINS(out, "emq.reason\ntimeout\n");
    /* Bad values are refused, naming the flag. */
    CLI(&r, emq_srv_url(s), "consume", "q", "-g", "g", "-c", "c", "--start",
        "head", "--exec-timeout", "300");
    ASSERT_EXIT(&r, 2);
    ASSERT_CONTAINS(r.err, "--exec-timeout needs --exec");
    cli_free(&r);
    CLI(&r, emq_srv_url(s), "consume", "q", "-g", "g", "-c", "c", "--start",
        "head", "--exec-batch", "0", "cat");
    ASSERT_EXIT(&r, 2);
    ASSERT_CONTAINS(r.err, "--exec-batch");
    cli_free(&r);
    CLI(&r, emq_srv_url(s), "consume", "q", "-g", "g", "-c", "c", "--start",
        "head", "--exec-batch", "5");
    ASSERT_EXIT(&r, 2);
    ASSERT_CONTAINS(r.err, "two values");
    cli_free(&r);
    emq_srv_stop(s);
}
