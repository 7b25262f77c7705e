/* SPDX-License-Identifier: BSD-3-Clause */
/* test_cli_dedup.c: `echomq produce --dedup-key/--dedup-field/--dedup-ttl`
 * end to end against a private redis-server.
 *
 * The same --dedup-key twice adds one entry and prints the first entry's
 * ID both times; --dedup-field keys each stdin line by a field, so a
 * replayed input adds nothing new; a short --dedup-ttl lets the key add
 * again once it passed; options that do not go together are usage errors
 * (exit 2) that add nothing.
 */
#include "integ/cli_helpers.h"

TEST(cli_produce_dedup_key_adds_once_and_prints_the_first_id) {
    emq_srv *s = emq_srv_start(NULL);
    const char *url = emq_srv_url(s);
    cli_result r;
    char first[64];
    CLI(&r, url, "produce", "pay", "--dedup-key", "order-9", "--print-ids",
        "-q", "amount=10");
    ASSERT_EXIT(&r, 0);
    snprintf(first, sizeof first, "%s", r.out);
    cli_free(&r);
    CLI(&r, url, "produce", "pay", "--dedup-key", "order-9", "--print-ids",
        "-q", "amount=11");
    ASSERT_EXIT(&r, 0);
    ASSERT_EQ_STR(r.out, first);
    cli_free(&r);
    ASSERT_EQ_INT(srv_int(s, "XLEN", "emq:{pay}"), 1);
    /* A replayed input keyed by a field adds nothing new. */
    const char *input = "{\"id\":\"a\",\"v\":1}\n{\"id\":\"b\",\"v\":2}\n"
                        "{\"id\":\"a\",\"v\":3}\n{\"v\":4}\n";
    CLI_IN(&r, url, input, "produce", "ev", "--json", "--dedup-field", "id",
           "-q");
    ASSERT_EXIT(&r, 0);
    cli_free(&r);
    ASSERT_EQ_INT(srv_int(s, "XLEN", "emq:{ev}"), 3); /* a, b, and no id */
    CLI_IN(&r, url, input, "produce", "ev", "--json", "--dedup-field", "id",
           "-q");
    ASSERT_EXIT(&r, 0);
    cli_free(&r);
    ASSERT_EQ_INT(srv_int(s, "XLEN", "emq:{ev}"), 4); /* only the keyless */
    /* A short window. */
    CLI(&r, url, "produce", "pay", "--dedup-key", "k", "--dedup-ttl", "100",
        "-q", "n=1");
    ASSERT_EXIT(&r, 0);
    cli_free(&r);
    usleep(300 * 1000);
    CLI(&r, url, "produce", "pay", "--dedup-key", "k", "--dedup-ttl", "100",
        "-q", "n=2");
    ASSERT_EXIT(&r, 0);
    cli_free(&r);
    ASSERT_EQ_INT(srv_int(s, "XLEN", "emq:{pay}"), 3);
    emq_srv_stop(s);
}

TEST(cli_produce_dedup_usage_errors_add_nothing) {
    emq_srv *s = emq_srv_start(NULL);
    const char *url = emq_srv_url(s);
    cli_result r;
    CLI_IN(&r, url, "x\n", "produce", "q", "--lines", "--dedup-key", "k");
    ASSERT_EXIT(&r, 2);
    ASSERT_CONTAINS(r.err, "use --dedup-field NAME");
    cli_free(&r);
    CLI(&r, url, "produce", "q", "--dedup-field", "id", "a=1");
    ASSERT_EXIT(&r, 2);
    ASSERT_CONTAINS(r.err, "--dedup-field goes with --lines or --json");
    cli_free(&r);
    CLI(&r, url, "produce", "q", "--dedup-ttl", "5", "a=1");
    ASSERT_EXIT(&r, 2);
    ASSERT_CONTAINS(r.err, "--dedup-ttl goes with");
    cli_free(&r);
    CLI(&r, url, "produce", "q", "--dedup-key", "", "a=1");
    ASSERT_EXIT(&r, 2);
    ASSERT_CONTAINS(r.err, "1 to 512 bytes");
    cli_free(&r);
    CLI(&r, url, "produce", "q", "--dedup-key", "k", "--dedup-ttl", "0", "a=1");
    ASSERT_EXIT(&r, 2);
    ASSERT_CONTAINS(r.err, "--dedup-ttl");
    cli_free(&r);
    ASSERT_EQ_INT(srv_int(s, "EXISTS", "emq:{q}"), 0);
    emq_srv_stop(s);
}
