/* SPDX-License-Identifier: BSD-3-Clause */
/* test_sentinel.c: what Sentinel's replies say (src/conn/sentinel.c),
 * from the RESP bytes real Sentinels send. */
#include "harness/test.h"
#include "unit/reply_helpers.h"
#include "base/base.h"
#include "conn/conn.h"

#include <string.h>

TEST(sentinel_master_addr_found_unknown_or_malformed) {
    char host[64];
    int port = 0;
    emq_reply *r = parse_reply("*2\r\n$9\r\n127.0.0.1\r\n$4\r\n6380\r\n");
    ASSERT_EQ_INT(emq__sentinel_master_addr(r, host, sizeof host, &port), 1);
    ASSERT_EQ_STR(host, "127.0.0.1");
    ASSERT_EQ_INT(port, 6380);
    emq_reply_free(r);
    r = parse_reply("*-1\r\n"); /* a master the Sentinel does not know */
    ASSERT_EQ_INT(emq__sentinel_master_addr(r, host, sizeof host, &port), 0);
    emq_reply_free(r);
    r = parse_reply("_\r\n"); /* the same in RESP3 */
    ASSERT_EQ_INT(emq__sentinel_master_addr(r, host, sizeof host, &port), 0);
    emq_reply_free(r);
    r = parse_reply("*2\r\n$9\r\n127.0.0.1\r\n$5\r\n99999\r\n");
    ASSERT_EQ_INT(emq__sentinel_master_addr(r, host, sizeof host, &port), -1);
    emq_reply_free(r);
    r = parse_reply("-ERR unknown command\r\n");
    ASSERT_EQ_INT(emq__sentinel_master_addr(r, host, sizeof host, &port), -1);
    emq_reply_free(r);
}

TEST(sentinel_role_master_replica_or_other) {
    emq_reply *r = parse_reply("*3\r\n$6\r\nmaster\r\n:0\r\n*0\r\n");
    ASSERT_EQ_INT(emq__sentinel_role_is_master(r), 1);
    emq_reply_free(r);
    r = parse_reply("*5\r\n$5\r\nslave\r\n$9\r\n127.0.0.1\r\n:6379\r\n"
                    "$9\r\nconnected\r\n:42\r\n");
    ASSERT_EQ_INT(emq__sentinel_role_is_master(r), 0);
    emq_reply_free(r);
    r = parse_reply("+OK\r\n");
    ASSERT_EQ_INT(emq__sentinel_role_is_master(r), -1);
    emq_reply_free(r);
}

TEST(sentinel_list_front_and_learn) {
    emq__url u;
    emq_error err;
    ASSERT_OK(emq__url_parse("redis-sentinel://a:1,b:2,c:3#m", &u, &err), &err);
    emq__sentinel_to_front(&u, 2);
    ASSERT_EQ_STR(u.sentinels[0].host, "c");
    ASSERT_EQ_STR(u.sentinels[1].host, "a");
    ASSERT_EQ_STR(u.sentinels[2].host, "b");
    /* SENTINEL sentinels: one known (a:1), one new (d:4), one without a
     * port (skipped). */
    emq_reply *r =
        parse_reply("*3\r\n"
                    "*4\r\n$2\r\nip\r\n$1\r\na\r\n$4\r\nport\r\n$1\r\n1\r\n"
                    "*4\r\n$2\r\nip\r\n$1\r\nd\r\n$4\r\nport\r\n$1\r\n4\r\n"
                    "*2\r\n$2\r\nip\r\n$1\r\ne\r\n");
    ASSERT_EQ_SIZE(emq__sentinel_learn(&u, r), 1);
    ASSERT_EQ_SIZE(u.nsentinels, 4);
    ASSERT_EQ_STR(u.sentinels[3].host, "d");
    ASSERT_EQ_INT(u.sentinels[3].port, 4);
    ASSERT_EQ_SIZE(emq__sentinel_learn(&u, r), 0); /* known now */
    emq_reply_free(r);
    emq__url_free(&u);
}
