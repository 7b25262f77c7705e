/* SPDX-License-Identifier: BSD-3-Clause */
/* test_cli_escape.c: the CLI's escape hatches end to end against a private
 * redis-server: -X property=value (validated by the library, winning over
 * a verb's flags, refusing the URL and password), -X list, -vv / -v -v /
 * --verbose=2 with the library's debug log saying what the consumer does,
 * and "did you mean" for mistyped commands and flags. */
#include "integ/cli_helpers.h"

TEST(cli_x_sets_any_property_validated_by_the_library) {
    emq_srv *s = emq_srv_start(NULL);
    const char *url = emq_srv_url(s);
    cli_result r;
    /* A property no flag sets: the producer never creates the stream. */
    CLI(&r, url, "-X", "producer.nomkstream=1", "produce", "q", "a=1");
    ASSERT_EXIT(&r, 1);
    ASSERT_CONTAINS(r.err, "producer.nomkstream is set");
    ASSERT_EQ_INT(srv_int(s, "EXISTS", "emq:{q}"), 0);
    cli_free(&r);
    /* After the verb too, and it wins over the verb's own setting. */
    CLI_IN(&r, url, "x\n", "produce", "q", "--lines", "--batch", "10", "-X",
           "producer.window=0");
    ASSERT_EXIT(&r, 2);
    ASSERT_ONE_LINE(r.err);
    ASSERT_CONTAINS(r.err, "-X producer.window: invalid producer.window '0'");
    cli_free(&r);
    CLI(&r, url, "-X", "nosuch.thing=1", "info", "q");
    ASSERT_EXIT(&r, 2);
    ASSERT_CONTAINS(r.err, "unknown configuration property 'nosuch.thing'");
    ASSERT_CONTAINS(r.err, "echomq -X list");
    cli_free(&r);
    CLI(&r, url, "-X", "noequals", "info", "q");
    ASSERT_EXIT(&r, 2);
    ASSERT_CONTAINS(r.err, "is not property=value");
    cli_free(&r);
    /* Secrets stay out of argv: refused, and not echoed. */
    CLI(&r, url, "-X", "password=Hunter2xyz", "info", "q");
    ASSERT_EXIT(&r, 2);
    ASSERT_CONTAINS(r.err, "$ECHOMQ_PASSWORD");
    ASSERT_NOT_CONTAINS(r.err, "Hunter2xyz");
    cli_free(&r);
    /* A good one is simply taken. */
    CLI(&r, url, "-X", "client_name=from-x", "produce", "q", "a=1");
    ASSERT_EXIT(&r, 0);
    cli_free(&r);
    ASSERT_EQ_INT(srv_int(s, "XLEN", "emq:{q}"), 1);
    emq_srv_stop(s);
}

TEST(cli_x_list_prints_every_property) {
    cli_result r;
    CLI(&r, NULL, "-X", "list");
    ASSERT_EXIT(&r, 0);
    size_t n = 0; /* one line per property of the library's table */
    while (emq_conf_property(n, NULL, NULL, NULL) == EMQ_OK)
        n++;
    ASSERT(n >= 64);
    ASSERT_EQ_INT(cli_lines(r.out), (int)n);
    ASSERT_CONTAINS(r.out, "producer.timeout_ms");
    ASSERT_CONTAINS(r.out, "lease.ttl_ms");
    ASSERT_CONTAINS(r.out, "connect_timeout_ms");
    /* A number's range is the property table's. */
    ASSERT_CONTAINS(r.out, "never slow ones. Range: 100 to 1099511627776.\n");
    cli_free(&r);
}

/* Each spelling of "debug" shows the consumer's steps. */
TEST_TIMEOUT(cli_vv_shows_the_consumer_at_work, 40) {
    emq_srv *s = emq_srv_start(NULL);
    const char *url = emq_srv_url(s);
    static const char *const spellings[][2] = {
        {"-vv", NULL}, {"-v", "-v"}, {"--verbose=2", NULL}};
    for (int i = 0; i < 3; i++) {
        char group[8];
        snprintf(group, sizeof group, "g%d", i);
        cli_result r;
        if (spellings[i][1])
            CLI(&r, url, spellings[i][0], spellings[i][1], "consume", "q", "-g",
                group, "-c", "c", "-s", "new", "--until-idle", "300");
        else
            CLI(&r, url, spellings[i][0], "consume", "q", "-g", group, "-c",
                "c", "-s", "new", "--until-idle", "300");
        ASSERT_EXIT(&r, 0);
        ASSERT_CONTAINS(r.err, "door: created group");
        ASSERT_CONTAINS(r.err, "recovery: a page of 0 own pending entries");
        cli_free(&r);
    }
    /* Without it: none of that. */
    cli_result r;
    CLI(&r, url, "consume", "q", "-g", "g9", "-c", "c", "-s", "new",
        "--until-idle", "300");
    ASSERT_EXIT(&r, 0);
    ASSERT_NOT_CONTAINS(r.err, "door:");
    cli_free(&r);
    CLI(&r, url, "--verbose=7", "info", "q");
    ASSERT_EXIT(&r, 2);
    ASSERT_CONTAINS(r.err, "--verbose");
    cli_free(&r);
    emq_srv_stop(s);
}

TEST(cli_did_you_mean) {
    cli_result r;
    CLI(&r, NULL, "prodcue", "q", "a=1");
    ASSERT_EXIT(&r, 2);
    ASSERT_CONTAINS(r.err, "unknown command 'prodcue' (did you mean "
                           "'produce'?)");
    cli_free(&r);
    CLI(&r, NULL, "consume", "q", "--grup", "g");
    ASSERT_EXIT(&r, 2);
    ASSERT_CONTAINS(r.err, "(did you mean '--group'?)");
    cli_free(&r);
    CLI(&r, NULL, "consume", "q", "--conc", "2");
    ASSERT_EXIT(&r, 2);
    ASSERT_CONTAINS(r.err, "(did you mean '--concurrency'?)");
    cli_free(&r);
    /* Nothing close: no guess. */
    CLI(&r, NULL, "xyzzy");
    ASSERT_EXIT(&r, 2);
    ASSERT_NOT_CONTAINS(r.err, "did you mean");
    cli_free(&r);
}
