/* SPDX-License-Identifier: BSD-3-Clause */
/* test_cli_delayed.c: `echomq produce --delay/--at`, `echomq cancel`, and
 * delayed entries in `info` and the exporter, end to end against a private
 * redis-server.
 *
 * --print-ids prints a delayed entry's handle; info shows how many wait;
 * consume with --until-idle sees a short delay's entries once they are due;
 * cancel removes a waiting handle and an unread entry, leaves a delivered
 * one alone, says so per ID and exits 1 when one was not removed; bad
 * --delay/--at values and IDs are usage errors (exit 2) that change
 * nothing.
 */
#include "integ/cli_helpers.h"

/* The first line of text as a string in out. */
static void first_line(const char *text, char *out, size_t size) {
    snprintf(out, size, "%.*s", (int)strcspn(text, "\n"), text);
}

TEST(cli_produce_delay_prints_handles_and_info_counts_them) {
    emq_srv *s = emq_srv_start(NULL);
    const char *url = emq_srv_url(s);
    cli_result r;
    CLI_IN(&r, url, "a\nb\nc\n", "produce", "jobs", "--lines", "--delay",
           "3600000", "--print-ids", "-q");
    ASSERT_EXIT(&r, 0);
    ASSERT_EQ_INT(cli_lines(r.out), 3);
    ASSERT(strncmp(r.out, "delayed-", 8) == 0);
    cli_free(&r);
    ASSERT_EQ_INT(srv_int(s, "ZCARD", "emq:{jobs}:delayed"), 3);
    ASSERT_EQ_INT(srv_int(s, "EXISTS", "emq:{jobs}"), 0);
    CLI(&r, url, "info", "jobs");
    ASSERT_EXIT(&r, 0);
    ASSERT_CONTAINS(r.out, "delayed       3 (next due in ");
    cli_free(&r);
    CLI(&r, url, "info", "jobs", "--json");
    ASSERT_EXIT(&r, 0);
    ASSERT_CONTAINS(r.out, "\"delayed\":{\"waiting\":3,\"next_due_ms\":");
    cli_free(&r);
    emq_srv_stop(s);
}

TEST(cli_consume_sees_delayed_entries_once_due) {
    emq_srv *s = emq_srv_start(NULL);
    const char *url = emq_srv_url(s);
    cli_result r;
    CLI(&r, url, "produce", "jobs", "--delay", "800", "n=late", "-q");
    ASSERT_EXIT(&r, 0);
    cli_free(&r);
    CLI(&r, url, "produce", "jobs", "n=now", "-q");
    ASSERT_EXIT(&r, 0);
    cli_free(&r);
    /* Idle for 3 s only after the delayed entry came. */
    CLI(&r, url, "consume", "jobs", "-g", "g", "-c", "c", "--start", "head",
        "--until-idle", "3000", "-q");
    ASSERT_EXIT(&r, 0);
    ASSERT_EQ_INT(cli_lines(r.out), 2);
    const char *now = strstr(r.out, "\"now\""), *late = strstr(r.out, "late");
    ASSERT(now != NULL && late != NULL && now < late);
    cli_free(&r);
    ASSERT_EQ_INT(srv_int(s, "ZCARD", "emq:{jobs}:delayed"), 0);
    emq_srv_stop(s);
}

TEST(cli_cancel_says_what_it_did_with_each_id) {
    emq_srv *s = emq_srv_start(NULL);
    const char *url = emq_srv_url(s);
    cli_result r;
    char handle[64], read_id[64], unread_id[64];
    CLI(&r, url, "produce", "jobs", "--delay", "3600000", "--print-ids", "-q",
        "n=1");
    ASSERT_EXIT(&r, 0);
    first_line(r.out, handle, sizeof handle);
    cli_free(&r);
    CLI(&r, url, "produce", "jobs", "--print-ids", "-q", "n=2");
    first_line(r.out, read_id, sizeof read_id);
    cli_free(&r);
    CLI(&r, url, "consume", "jobs", "-g", "g", "-c", "c", "--start", "head",
        "--limit", "1", "--no-ack", "-q");
    ASSERT_EXIT(&r, 0);
    cli_free(&r);
    CLI(&r, url, "produce", "jobs", "--print-ids", "-q", "n=3");
    first_line(r.out, unread_id, sizeof unread_id);
    cli_free(&r);

    /* A malformed ID: exit 2, nothing cancelled. */
    CLI(&r, url, "cancel", "jobs", handle, "delayed-x1");
    ASSERT_EXIT(&r, 2);
    ASSERT_CONTAINS(r.err, "'delayed-x1' (ID 1) is neither");
    ASSERT_EQ_STR(r.out, "");
    cli_free(&r);
    ASSERT_EQ_INT(srv_int(s, "ZCARD", "emq:{jobs}:delayed"), 1);

    CLI(&r, url, "cancel", "jobs", handle, read_id, unread_id);
    ASSERT_EXIT(&r, 1);
    char want[400];
    snprintf(want, sizeof want,
             "%s removed\n%s delivered (left alone)\n%s removed\n", handle,
             read_id, unread_id);
    ASSERT_EQ_STR(r.out, want);
    ASSERT_CONTAINS(r.err, "cancelled 2 of 3 on queue 'jobs'");
    cli_free(&r);
    ASSERT_EQ_INT(srv_int(s, "ZCARD", "emq:{jobs}:delayed"), 0);
    ASSERT_EQ_INT(srv_int(s, "XLEN", "emq:{jobs}"), 1);
    CLI(&r, url, "cancel", "jobs", handle);
    ASSERT_EXIT(&r, 1);
    ASSERT_CONTAINS(r.out, " missing\n");
    cli_free(&r);
    emq_srv_stop(s);
}

TEST(cli_delay_and_at_usage_errors_change_nothing) {
    emq_srv *s = emq_srv_start(NULL);
    const char *url = emq_srv_url(s);
    cli_result r;
    CLI(&r, url, "produce", "jobs", "--delay", "5", "--at", "@5", "n=1");
    ASSERT_EXIT(&r, 2);
    ASSERT_CONTAINS(r.err, "--delay and --at exclude each other");
    cli_free(&r);
    CLI(&r, url, "produce", "jobs", "--at", "1700000000000", "n=1");
    ASSERT_EXIT(&r, 2);
    ASSERT_CONTAINS(r.err, "--at takes @UNIX-MS");
    cli_free(&r);
    CLI(&r, url, "produce", "jobs", "--delay", "-1", "n=1");
    ASSERT_EXIT(&r, 2);
    ASSERT_CONTAINS(r.err, "--delay");
    cli_free(&r);
    CLI(&r, url, "cancel", "jobs");
    ASSERT_EXIT(&r, 2);
    ASSERT_CONTAINS(r.err, "give the IDs to cancel");
    cli_free(&r);
    ASSERT_EQ_INT(srv_int(s, "EXISTS", "emq:{jobs}"), 0);
    ASSERT_EQ_INT(srv_int(s, "EXISTS", "emq:{jobs}:delayed"), 0);
    /* --at in the past: due at once, moved by the next consumer. */
    CLI(&r, url, "produce", "jobs", "--at", "@1", "n=old", "-q");
    ASSERT_EXIT(&r, 0);
    cli_free(&r);
    CLI(&r, url, "consume", "jobs", "-g", "g", "-c", "c", "--start", "head",
        "--limit", "1", "-q");
    ASSERT_EXIT(&r, 0);
    ASSERT_CONTAINS(r.out, "\"old\"");
    cli_free(&r);
    emq_srv_stop(s);
}
