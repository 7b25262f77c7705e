/* SPDX-License-Identifier: BSD-3-Clause */
/* test_cli_envelope.c: what a consumed line says and how a queue is named,
 * end to end against a private redis-server: JSON lines carry the stream
 * (and a topic's partition), --format prints kcat-style lines, --stream
 * names a raw stream key wherever a QUEUE is taken, and --start @UNIX-MS
 * starts a group at a time. */
#include "integ/cli_helpers.h"

TEST(cli_consume_lines_carry_stream_and_partition) {
    emq_srv *s = emq_srv_start(NULL);
    const char *url = emq_srv_url(s);
    cli_result r;
    CLI(&r, url, "produce", "jobs", "n=1");
    cli_free(&r);
    CLI(&r, url, "consume", "jobs", "-g", "g", "-c", "c", "-s", "head",
        "--limit", "1", "-q");
    ASSERT_EXIT(&r, 0);
    ASSERT_CONTAINS(r.out, "\"stream\":\"emq:{jobs}\",\"deliveries\":1");
    ASSERT_NOT_CONTAINS(r.out, "partition");
    cli_free(&r);
    /* A topic of 3: every line names its partition, and the stream is
     * that partition's. */
    CLI_IN(&r, url, "a\nb\nc\nd\ne\nf\n", "produce", "orders", "--lines",
           "--partitions", "3");
    ASSERT_EXIT(&r, 0);
    cli_free(&r);
    CLI(&r, url, "consume", "orders", "--partitions", "3", "-g", "g", "-c", "c",
        "-s", "head", "--limit", "6", "-q");
    ASSERT_EXIT(&r, 0);
    ASSERT_EQ_INT(cli_lines(r.out), 6);
    for (int p = 0; p < 3; p++) {
        char want[80];
        snprintf(want, sizeof want,
                 "\"stream\":\"emq:{orders.%d}\",\"partition\":%d,", p, p);
        ASSERT_CONTAINS(r.out, want);
    }
    cli_free(&r);
    emq_srv_stop(s);
}

TEST(cli_consume_format) {
    emq_srv *s = emq_srv_start(NULL);
    const char *url = emq_srv_url(s);
    cli_result r;
    char id[64];
    CLI(&r, url, "produce", "jobs", "task=mail", "to=a@b.c", "--print-ids");
    snprintf(id, sizeof id, "%.*s", (int)strcspn(r.out, "\n"), r.out);
    cli_free(&r);
    CLI(&r, url, "consume", "jobs", "-g", "g", "-c", "c", "-s", "head",
        "--limit", "1", "-q", "--format",
        "%i|%d|%s|%p|%f{task}|%f{none}|%%|%t\\t.");
    ASSERT_EXIT(&r, 0);
    char want[200];
    snprintf(want, sizeof want, "%s|1|emq:{jobs}||mail||%%|", id);
    ASSERT(strncmp(r.out, want, strlen(want)) == 0);
    /* The ID's time, UTC, with milliseconds; then a real tab. */
    const char *t = r.out + strlen(want);
    ASSERT(strlen(t) >= 24);
    ASSERT(t[4] == '-' && t[10] == 'T' && t[19] == '.' && t[23] == 'Z');
    ASSERT(t[24] == '\t' && t[25] == '.' && t[26] == '\n');
    cli_free(&r);
    emq_srv_stop(s);
}

TEST(cli_stream_names_a_raw_key_for_every_verb) {
    emq_srv *s = emq_srv_start(NULL);
    const char *url = emq_srv_url(s);
    char out[64];
    emq_srv_cmd(s, out, sizeof out, "XADD", "events:raw", "*", "k", "v", NULL);
    cli_result r;
    CLI(&r, url, "--stream", "events:raw", "produce", "k=w");
    ASSERT_EXIT(&r, 0);
    cli_free(&r);
    ASSERT_EQ_INT(srv_int(s, "XLEN", "events:raw"), 2);
    CLI(&r, url, "info", "--stream", "events:raw");
    ASSERT_EXIT(&r, 0);
    ASSERT_CONTAINS(r.out, "events:raw");
    cli_free(&r);
    CLI(&r, url, "consume", "--stream", "events:raw", "-g", "g", "-c", "c",
        "-s", "head", "--limit", "2", "-q");
    ASSERT_EXIT(&r, 0);
    ASSERT_EQ_INT(cli_lines(r.out), 2);
    ASSERT_CONTAINS(r.out, "\"stream\":\"events:raw\"");
    cli_free(&r);
    CLI(&r, url, "pending", "--stream", "events:raw", "--group", "g");
    ASSERT_EXIT(&r, 0);
    cli_free(&r);
    CLI(&r, url, "dead", "list", "--stream", "events:raw");
    ASSERT_EXIT(&r, 0);
    cli_free(&r);
    CLI(&r, url, "group", "destroy", "--stream", "events:raw", "--group", "g",
        "--yes");
    ASSERT_EXIT(&r, 0);
    cli_free(&r);
    emq_srv_stop(s);
}

TEST(cli_consume_start_at_a_time) {
    emq_srv *s = emq_srv_start(NULL);
    const char *url = emq_srv_url(s);
    char out[64];
    emq_srv_cmd(s, out, sizeof out, "XADD", "emq:{t}", "1000-0", "n", "old",
                NULL);
    emq_srv_cmd(s, out, sizeof out, "XADD", "emq:{t}", "2000-0", "n", "mid",
                NULL);
    emq_srv_cmd(s, out, sizeof out, "XADD", "emq:{t}", "3000-0", "n", "new",
                NULL);
    cli_result r;
    CLI(&r, url, "consume", "t", "-g", "g", "-c", "c", "-s", "@2000", "--limit",
        "2", "-q");
    ASSERT_EXIT(&r, 0);
    ASSERT_NOT_CONTAINS(r.out, "old");
    ASSERT_CONTAINS(r.out, "mid");
    ASSERT_CONTAINS(r.out, "new");
    cli_free(&r);
    CLI(&r, url, "consume", "t", "-g", "g2", "-c", "c", "-s", "@soon");
    ASSERT_EXIT(&r, 2);
    ASSERT_CONTAINS(r.err, "--start @");
    cli_free(&r);
    emq_srv_stop(s);
}
