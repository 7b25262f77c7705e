/* SPDX-License-Identifier: BSD-3-Clause */
/* test_cli_ls.c: `echomq ls` end to end against a private redis-server:
 * every queue (not its dead letters, not other keys) once, sorted, with
 * length, groups, lag, pending, dead letters, delayed entries and group
 * limits; a queue whose entries all wait delayed; PATTERN; --json; an
 * empty server prints only the header. */
#include "integ/cli_helpers.h"

TEST_TIMEOUT(cli_ls_lists_queues_with_their_numbers, 30) {
    emq_srv *s = emq_srv_start(NULL);
    const char *url = emq_srv_url(s);
    cli_result r;
    CLI(&r, url, "ls");
    ASSERT_EXIT(&r, 0);
    ASSERT_EQ_INT(cli_lines(r.out), 1); /* the header */
    cli_free(&r);
    CLI_IN(&r, url, "1\n2\n3\n4\n5\n", "produce", "jobs", "--lines");
    cli_free(&r);
    CLI(&r, url, "produce", "mail", "to=a");
    cli_free(&r);
    /* Two of jobs read (pending), three still to read (lag). */
    CLI(&r, url, "consume", "jobs", "-g", "w", "-c", "c", "-s", "head",
        "--limit", "2", "--no-ack", "-q");
    ASSERT_EXIT(&r, 0);
    cli_free(&r);
    char out[64];
    emq_srv_cmd(s, out, sizeof out, "XADD", "emq:{jobs}:dead", "*", "a", "b",
                NULL);
    emq_srv_cmd(s, out, sizeof out, "SET", "emq:{notastream}", "x", NULL);
    emq_srv_cmd(s, out, sizeof out, "XADD", "other", "*", "a", "b", NULL);
    CLI(&r, url, "produce", "jobs", "--delay", "3600000", "-q", "n=later");
    ASSERT_EXIT(&r, 0);
    cli_free(&r);
    /* A queue with nothing but a delayed entry has no stream yet. */
    CLI(&r, url, "produce", "later", "--delay", "3600000", "-q", "n=1");
    ASSERT_EXIT(&r, 0);
    cli_free(&r);
    CLI(&r, url, "produce", "urgent", "--priority", "0", "-q", "n=1");
    ASSERT_EXIT(&r, 0);
    cli_free(&r);
    CLI(&r, url, "group", "limits", "jobs", "-g", "w", "--rate", "20");
    ASSERT_EXIT(&r, 0);
    cli_free(&r);
    CLI(&r, url, "ls");
    ASSERT_EXIT(&r, 0);
    ASSERT_EQ_INT(cli_lines(r.out), 5);
    ASSERT_CONTAINS(r.out, " DEAD  DELAYED     HELD  LIMITS\n");
    ASSERT_CONTAINS(r.out, "\nlater ");
    /* later: 1 delayed, no priorities; jobs: group w limited. */
    ASSERT_CONTAINS(r.out, "        1        -  -\n");
    ASSERT_CONTAINS(r.out, "        1        -  20/s,-\n");
    /* urgent: nothing but a held entry. */
    ASSERT_CONTAINS(r.out, "\nurgent ");
    ASSERT_CONTAINS(r.out, "        0        1  -\n");
    const char *jobs = strstr(r.out, "\njobs ");
    const char *mail = strstr(r.out, "\nmail ");
    ASSERT(jobs && mail && jobs < mail);
    long long len, groups, lag, pending, dead, delayed;
    ASSERT_EQ_INT(sscanf(jobs + 5, "%lld %lld %lld %lld %lld %lld", &len,
                         &groups, &lag, &pending, &dead, &delayed),
                  6);
    ASSERT_EQ_INT(delayed, 1);
    ASSERT_EQ_INT(len, 5);
    ASSERT_EQ_INT(groups, 1);
    ASSERT_EQ_INT(lag, 3);
    ASSERT_EQ_INT(pending, 2);
    ASSERT_EQ_INT(dead, 1);
    ASSERT_NOT_CONTAINS(r.out, "notastream");
    ASSERT_NOT_CONTAINS(r.out, "other");
    ASSERT_NOT_CONTAINS(r.out, ":dead");
    cli_free(&r);
    CLI(&r, url, "ls", "ma*");
    ASSERT_EXIT(&r, 0);
    ASSERT_EQ_INT(cli_lines(r.out), 2);
    ASSERT_CONTAINS(r.out, "mail");
    cli_free(&r);
    CLI(&r, url, "ls", "--json");
    ASSERT_EXIT(&r, 0);
    ASSERT_EQ_INT(cli_lines(r.out), 4);
    ASSERT_CONTAINS(r.out,
                    "\"stream\":\"emq:{later}\",\"dead\":\"emq:{later}:dead\","
                    "\"exists\":false");
    ASSERT_CONTAINS(r.out, "\"rate_limit\":20,\"max_in_flight\":0");
    ASSERT_CONTAINS(r.out, "\"stream\":\"emq:{jobs}\"");
    ASSERT_CONTAINS(r.out, "\"stream\":\"emq:{mail}\"");
    cli_free(&r);
    CLI(&r, url, "ls", "a{b");
    ASSERT_EXIT(&r, 2);
    cli_free(&r);
    emq_srv_stop(s);
}
