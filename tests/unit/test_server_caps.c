/* SPDX-License-Identifier: BSD-3-Clause */
/* test_server_caps.c: the server's name and version from what it says at
 * connect (HELLO, INFO server), and the capability table (conn/server.c). */
#include "harness/test.h"
#include "unit/reply_helpers.h"
#include "conn/conn.h"

#include <string.h>

/* Parses one RESP reply from bytes (caller frees). */
TEST(server_caps_table_by_name_and_version) {
    const uint32_t all = EMQ_CAP_XAUTOCLAIM_DELETED | EMQ_CAP_STREAM_COUNTERS |
                         EMQ_CAP_CLUSTER_SHARDS | EMQ_CAP_CONSUMER_INACTIVE |
                         EMQ_CAP_WAITAOF;
    ASSERT_EQ_INT(emq__server_caps("redis", 6, 2, 16), 0);
    ASSERT_EQ_INT(emq__server_caps("redis", 7, 0, 15),
                  all & ~(EMQ_CAP_CONSUMER_INACTIVE | EMQ_CAP_WAITAOF));
    ASSERT_EQ_INT(emq__server_caps("redis", 7, 2, 6), all);
    ASSERT_EQ_INT(emq__server_caps("valkey", 8, 0, 1), all);
    ASSERT_EQ_INT(emq__server_caps("valkey", 7, 2, 5), all);
    /* Nothing claimed for what was never tested. */
    ASSERT_EQ_INT(emq__server_caps("keydb", 6, 3, 4), 0);
    ASSERT_EQ_INT(emq__server_caps(NULL, 7, 0, 0), 0);
    ASSERT_EQ_INT(emq__server_caps("redis", 0, 0, 0), 0);
    ASSERT_EQ_STR(emq_capability_name(EMQ_CAP_CLUSTER_SHARDS),
                  "cluster_shards");
    ASSERT_EQ_STR(emq_capability_name(EMQ_CAP_WAITAOF), "waitaof");
    ASSERT(emq_capability_name(1u << 31) == NULL);
    emq_server s = {.capabilities = EMQ_CAP_XAUTOCLAIM_DELETED |
                                    EMQ_CAP_CLUSTER_SHARDS};
    ASSERT_EQ_STR(emq_server_capability(&s, 0), "xautoclaim_deleted");
    ASSERT_EQ_STR(emq_server_capability(&s, 1), "cluster_shards");
    ASSERT(emq_server_capability(&s, 2) == NULL);
    ASSERT(emq_server_capability(NULL, 0) == NULL);
}

TEST(server_from_hello_map_and_flat_array) {
    /* RESP3 map, as Valkey 8.0.1 answers HELLO 3. */
    emq_reply *r =
        parse_reply("%4\r\n$6\r\nserver\r\n$6\r\nvalkey\r\n"
                    "$7\r\nversion\r\n$5\r\n8.0.1\r\n"
                    "$5\r\nproto\r\n:3\r\n$4\r\nmode\r\n$10\r\nstandalone\r\n");
    emq_server s;
    ASSERT_EQ_INT(emq__server_from_hello(r, &s), 1);
    ASSERT_EQ_STR(s.name, "valkey");
    ASSERT_EQ_STR(s.version, "8.0.1");
    ASSERT_EQ_INT(s.major * 10000 + s.minor * 100 + s.patch, 80001);
    ASSERT(s.capabilities & EMQ_CAP_XAUTOCLAIM_DELETED);
    emq_reply_free(r);
    /* RESP2 flat array (HELLO 2), Redis 6.2. */
    r = parse_reply("*4\r\n$6\r\nserver\r\n$5\r\nredis\r\n"
                    "$7\r\nversion\r\n$6\r\n6.2.16\r\n");
    ASSERT_EQ_INT(emq__server_from_hello(r, &s), 1);
    ASSERT_EQ_STR(s.name, "redis");
    ASSERT_EQ_INT(s.capabilities, 0);
    emq_reply_free(r);
    /* No version, or a version that is not N.N: unknown, zeroed. */
    r = parse_reply("*2\r\n$6\r\nserver\r\n$5\r\nredis\r\n");
    ASSERT_EQ_INT(emq__server_from_hello(r, &s), 0);
    ASSERT_EQ_STR(s.name, "");
    emq_reply_free(r);
    r = parse_reply("*4\r\n$6\r\nserver\r\n$5\r\nredis\r\n"
                    "$7\r\nversion\r\n$7\r\nunknown\r\n");
    ASSERT_EQ_INT(emq__server_from_hello(r, &s), 0);
    ASSERT_EQ_INT(s.capabilities, 0);
    emq_reply_free(r);
    r = parse_reply("+OK\r\n"); /* a fake peer's answer */
    ASSERT_EQ_INT(emq__server_from_hello(r, &s), 0);
    emq_reply_free(r);
}

TEST(server_from_info_text) {
    static const char valkey[] = "# Server\r\nredis_version:7.2.4\r\n"
                                 "server_name:valkey\r\n"
                                 "valkey_version:8.0.1\r\nredis_mode:"
                                 "standalone\r\n";
    emq_server s;
    ASSERT_EQ_INT(emq__server_from_info(valkey, strlen(valkey), &s), 1);
    ASSERT_EQ_STR(s.name, "valkey");
    ASSERT_EQ_STR(s.version, "8.0.1"); /* not the 7.2.4 it mimics */
    static const char redis[] = "# Server\r\nredis_version:7.0.15\r\n"
                                "redis_git_sha1:00000000\r\n";
    ASSERT_EQ_INT(emq__server_from_info(redis, strlen(redis), &s), 1);
    ASSERT_EQ_STR(s.name, "redis");
    ASSERT_EQ_STR(s.version, "7.0.15");
    ASSERT(!(s.capabilities & EMQ_CAP_CONSUMER_INACTIVE));
    ASSERT(s.capabilities & EMQ_CAP_CLUSTER_SHARDS);
    static const char none[] = "# Server\r\nredis_mode:standalone\r\n";
    ASSERT_EQ_INT(emq__server_from_info(none, strlen(none), &s), 0);
    ASSERT_EQ_INT(emq__server_from_info(NULL, 0, &s), 0);
}
