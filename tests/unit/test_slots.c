/* SPDX-License-Identifier: BSD-3-Clause */
/* test_slots.c: the slot map and redirect parsing, without a server.
 *
 * Replies are built by feeding RESP bytes to the reader, in the shapes
 * Redis 7.0 sends (RESP2 flat arrays, RESP3 maps) and in the older CLUSTER
 * SLOTS shape; redirect texts cover MOVED and ASK with IPv4, IPv6 and an
 * unknown (empty) endpoint, TRYAGAIN, CLUSTERDOWN and near misses. Also
 * the cluster.seeds property's validation.
 */
#include "cluster/cluster.h"
#include "harness/test.h"
#include "unit/reply_helpers.h"

/* Two shards; the second has a failed master and an online one. */
static const char shards2[] =
    "*2\r\n"
    "*4\r\n$5\r\nslots\r\n*4\r\n:0\r\n:99\r\n:200\r\n:200\r\n"
    "$5\r\nnodes\r\n*2\r\n"
    "*10\r\n$2\r\nid\r\n$1\r\na\r\n$4\r\nport\r\n:7000\r\n$2\r\nip\r\n"
    "$9\r\n127.0.0.1\r\n$8\r\nendpoint\r\n$9\r\n127.0.0.1\r\n"
    "$4\r\nrole\r\n$6\r\nmaster\r\n"
    "*8\r\n$2\r\nid\r\n$1\r\nb\r\n$4\r\nport\r\n:7003\r\n$2\r\nip\r\n"
    "$9\r\n127.0.0.1\r\n$4\r\nrole\r\n$7\r\nreplica\r\n"
    "*4\r\n$5\r\nslots\r\n*2\r\n$3\r\n100\r\n$3\r\n199\r\n"
    "$5\r\nnodes\r\n*2\r\n"
    "*10\r\n$4\r\nport\r\n:7001\r\n$8\r\nendpoint\r\n$1\r\n?\r\n"
    "$2\r\nip\r\n$3\r\n::1\r\n$4\r\nrole\r\n$6\r\nmaster\r\n"
    "$6\r\nhealth\r\n$4\r\nfail\r\n"
    "*10\r\n$4\r\nport\r\n:7002\r\n$8\r\ntls-port\r\n:7102\r\n"
    "$8\r\nendpoint\r\n$0\r\n\r\n$4\r\nrole\r\n$6\r\nmaster\r\n"
    "$6\r\nhealth\r\n$6\r\nonline\r\n";

TEST(slots_map_from_cluster_shards) {
    emq_reply *r = parse_reply(shards2);
    emq__slot_map map;
    emq__slot_map_init(&map);
    emq_error err;
    ASSERT_OK(emq__slot_map_from_shards(&map, r, "10.0.0.9", 0, &err), &err);
    ASSERT_EQ_SIZE(map.nnodes, 2);
    ASSERT_EQ_STR(map.nodes[map.owner[0]].host, "127.0.0.1");
    ASSERT_EQ_INT(map.nodes[map.owner[99]].port, 7000);
    ASSERT_EQ_INT(map.nodes[map.owner[200]].port, 7000);
    ASSERT_EQ_INT(map.owner[201], EMQ_SLOT_NONE);
    /* online master preferred; empty endpoint, no ip: the answering host */
    ASSERT_EQ_INT(map.nodes[map.owner[150]].port, 7002);
    ASSERT_EQ_STR(map.nodes[map.owner[150]].host, "10.0.0.9");
    emq__slot_map_free(&map);
    ASSERT_OK(emq__slot_map_from_shards(&map, r, "h", 1, &err), &err);
    ASSERT_EQ_INT(map.nodes[map.owner[150]].port, 7102); /* tls-port */
    emq__slot_map_free(&map);
    emq_reply_free(r);

    /* RESP3 maps */
    r = parse_reply(
        "*1\r\n%2\r\n+slots\r\n*2\r\n:5\r\n:6\r\n+nodes\r\n*1\r\n"
        "%3\r\n+port\r\n:7005\r\n+ip\r\n+::1\r\n+role\r\n+master\r\n");
    ASSERT_OK(emq__slot_map_from_shards(&map, r, "h", 0, &err), &err);
    ASSERT_EQ_STR(map.nodes[map.owner[6]].host, "::1");
    emq__slot_map_free(&map);
    emq_reply_free(r);

    /* malformed: a slot out of range */
    r = parse_reply(
        "*1\r\n*4\r\n$5\r\nslots\r\n*2\r\n:0\r\n:16384\r\n"
        "$5\r\nnodes\r\n*1\r\n*4\r\n$4\r\nport\r\n:1\r\n$4\r\nrole\r\n"
        "$6\r\nmaster\r\n");
    ASSERT_STATUS(emq__slot_map_from_shards(&map, r, "h", 0, &err), EMQ_EPROTO,
                  &err);
    ASSERT_CONTAINS(err.message, "CLUSTER SHARDS");
    ASSERT_EQ_SIZE(map.nnodes, 0);
    emq_reply_free(r);
}

/* What Redis 7.2.6 answered after CLUSTER FAILOVER and the old master's
 * kill -9, from a node that still counted the old master as one: both in
 * one shard, role master, and the shard's slots taken from the old
 * (empty) one. The slot map says nobody serves 100-199; the reply is
 * flagged doubtful so the route asks CLUSTER SLOTS. */
static const char shards_after_failover[] =
    "*2\r\n"
    "*4\r\n$5\r\nslots\r\n*2\r\n:0\r\n:99\r\n"
    "$5\r\nnodes\r\n*1\r\n"
    "*8\r\n$4\r\nport\r\n:7000\r\n$2\r\nip\r\n$9\r\n127.0.0.1\r\n"
    "$4\r\nrole\r\n$6\r\nmaster\r\n$6\r\nhealth\r\n$6\r\nonline\r\n"
    "*4\r\n$5\r\nslots\r\n*0\r\n"
    "$5\r\nnodes\r\n*2\r\n"
    "*8\r\n$4\r\nport\r\n:7001\r\n$2\r\nip\r\n$9\r\n127.0.0.1\r\n"
    "$4\r\nrole\r\n$6\r\nmaster\r\n$6\r\nhealth\r\n$4\r\nfail\r\n"
    "*8\r\n$4\r\nport\r\n:7004\r\n$2\r\nip\r\n$9\r\n127.0.0.1\r\n"
    "$4\r\nrole\r\n$6\r\nmaster\r\n$6\r\nhealth\r\n$6\r\nonline\r\n";

TEST(slots_shards_after_failover_are_doubtful) {
    emq_reply *r = parse_reply(shards_after_failover);
    emq__slot_map map;
    emq__slot_map_init(&map);
    emq_error err;
    ASSERT_OK(emq__slot_map_from_shards(&map, r, "h", 0, &err), &err);
    ASSERT_EQ_INT(map.nodes[map.owner[5]].port, 7000);
    ASSERT_EQ_INT(map.owner[150], EMQ_SLOT_NONE); /* what 7.2 implies */
    ASSERT_EQ_INT(emq__slot_map_shards_doubtful(r), 1);
    emq__slot_map_free(&map);
    emq_reply_free(r);
    /* A shard with one master and its replica is fine; so is the RESP3
     * shape; a shard listing no master at all is doubtful. */
    r = parse_reply("*1\r\n%2\r\n+slots\r\n*2\r\n:5\r\n:6\r\n+nodes\r\n*2\r\n"
                    "%2\r\n+port\r\n:7005\r\n+role\r\n+master\r\n"
                    "%2\r\n+port\r\n:7006\r\n+role\r\n+replica\r\n");
    ASSERT_EQ_INT(emq__slot_map_shards_doubtful(r), 0);
    emq_reply_free(r);
    r = parse_reply("*1\r\n%2\r\n+slots\r\n*2\r\n:5\r\n:6\r\n+nodes\r\n*1\r\n"
                    "%2\r\n+port\r\n:7006\r\n+role\r\n+replica\r\n");
    ASSERT_EQ_INT(emq__slot_map_shards_doubtful(r), 1);
    emq_reply_free(r);
    r = parse_reply(":1\r\n");
    ASSERT_EQ_INT(emq__slot_map_shards_doubtful(r), 0);
    emq_reply_free(r);
}

TEST(slots_map_from_cluster_slots) {
    emq_reply *r =
        parse_reply("*2\r\n"
                    "*4\r\n:0\r\n:8000\r\n*3\r\n$9\r\n127.0.0.1\r\n"
                    ":7000\r\n$1\r\na\r\n*3\r\n$9\r\n127.0.0.1\r\n"
                    ":7003\r\n$1\r\nb\r\n"
                    "*3\r\n:8001\r\n:16383\r\n*2\r\n$0\r\n\r\n:7001\r\n");
    emq__slot_map map;
    emq__slot_map_init(&map);
    emq_error err;
    ASSERT_OK(emq__slot_map_from_slots(&map, r, "seed", &err), &err);
    ASSERT_EQ_SIZE(map.nnodes, 2);
    ASSERT_EQ_INT(map.nodes[map.owner[8000]].port, 7000);
    ASSERT_EQ_INT(map.nodes[map.owner[8001]].port, 7001);
    ASSERT_EQ_STR(map.nodes[map.owner[16383]].host, "seed");
    emq__slot_map_free(&map);
    emq_reply_free(r);
}

TEST(slots_redirect_parse) {
    emq__redirect rd;
    emq_reply *r = parse_reply("-MOVED 9631 127.0.0.1:7412\r\n");
    ASSERT_EQ_INT(emq__redirect_parse(r, &rd), EMQ_REDIRECT_MOVED);
    ASSERT_EQ_INT(rd.slot, 9631);
    ASSERT_EQ_STR(rd.target.host, "127.0.0.1");
    ASSERT_EQ_INT(rd.target.port, 7412);
    emq_reply_free(r);
    r = parse_reply("-ASK 1 [::1]:7000\r\n");
    ASSERT_EQ_INT(emq__redirect_parse(r, &rd), EMQ_REDIRECT_ASK);
    ASSERT_EQ_STR(rd.target.host, "::1");
    emq_reply_free(r);
    r = parse_reply("-ASK 2 fe80::1:7000\r\n");
    ASSERT_EQ_INT(emq__redirect_parse(r, &rd), EMQ_REDIRECT_ASK);
    ASSERT_EQ_STR(rd.target.host, "fe80::1");
    emq_reply_free(r);
    r = parse_reply("-MOVED 3 :7001\r\n");
    ASSERT_EQ_INT(emq__redirect_parse(r, &rd), EMQ_REDIRECT_MOVED);
    ASSERT_EQ_STR(rd.target.host, "");
    ASSERT_EQ_INT(rd.target.port, 7001);
    emq_reply_free(r);
    r = parse_reply(
        "-TRYAGAIN Multiple keys request during rehashing of slot\r\n");
    ASSERT_EQ_INT(emq__redirect_parse(r, &rd), EMQ_REDIRECT_TRYAGAIN);
    emq_reply_free(r);
    r = parse_reply("-CLUSTERDOWN Hash slot not served\r\n");
    ASSERT_EQ_INT(emq__redirect_parse(r, &rd), EMQ_REDIRECT_CLUSTERDOWN);
    emq_reply_free(r);
    static const char *const misses[] = {
        "-MOVED 16384 h:1\r\n", "-MOVED 1 h:0\r\n", "-MOVED 1 h\r\n",
        "-MOVEDX 1 h:1\r\n",    "-ASK\r\n",         "+MOVED 1 h:1\r\n",
        "-ERR MOVED 1 h:1\r\n", "-MOVED x h:1\r\n"};
    for (size_t i = 0; i < sizeof misses / sizeof misses[0]; i++) {
        r = parse_reply(misses[i]);
        if (emq__redirect_parse(r, &rd) != EMQ_REDIRECT_NONE)
            FAIL("%s parsed as a redirect", misses[i]);
        emq_reply_free(r);
    }
}

TEST(slots_conf_cluster_seeds) {
    emq_conf_t *conf = emq_conf_new();
    emq_error err;
    ASSERT_OK(emq_conf_set(conf, "cluster.seeds", "127.0.0.1:7000,[::1]:7001,h",
                           &err),
              &err);
    ASSERT_STATUS(emq_conf_set(conf, "cluster.seeds", "a:1,,b:2", &err),
                  EMQ_EINVAL, &err);
    ASSERT_CONTAINS(err.message, "cluster.seeds");
    ASSERT_STATUS(emq_conf_set(conf, "cluster.seeds", "a:99999", &err),
                  EMQ_EINVAL, &err);
    ASSERT_STATUS(emq_conf_set(conf, "cluster.seeds", "a:1,", &err), EMQ_EINVAL,
                  &err);
    ASSERT_OK(emq_conf_set(conf, "cluster.seeds", "", &err), &err);
    ASSERT_STATUS(emq_conf_set(conf, "cluster.max_redirects", "0", &err),
                  EMQ_EINVAL, &err);
    emq_conf_destroy(conf);
}

/* Each shape a hostile node could name to smuggle URL settings, a user
 * or a path into the address the route connects to (issue 27, item 4). */
static const char *const injected_hosts[] = {
    "127.0.0.1:7001?tls.verify=none",
    "::1]:7848?tls.verify=none&tls.sni=x",
    "u:pw@127.0.0.1",
    "127.0.0.1/0",
    "127.0.0.1?tls.ca_file=/tmp/evil.pem",
    "localhost#m",
    "127.0.0.1 x",
    "127.0.0.1\x01",
    "[::1]",
    "a:b",
    "fe80::1%eth0/x",
};

TEST(slots_reply_addresses_are_hosts_only) {
    size_t n = sizeof injected_hosts / sizeof injected_hosts[0];
    for (size_t i = 0; i < n; i++) {
        const char *h = injected_hosts[i];
        if (emq__host_valid(h, strlen(h)))
            FAIL("'%s' passed as a host", h);
        emq__slot_map map;
        emq__slot_map_init(&map);
        int idx = 0;
        emq_error err;
        ASSERT_STATUS(emq__slot_map_node(&map, h, strlen(h), 7000, &idx, &err),
                      EMQ_EPROTO, &err);
        ASSERT_EQ_INT(idx, -1);
        ASSERT_EQ_SIZE(map.nnodes, 0);
        ASSERT_CONTAINS(err.message, "not a host name");
        emq__slot_map_free(&map);
    }
    static const char *const hosts[] = {
        "127.0.0.1",    "redis-0.cache.internal", "::1",
        "fe80::1%eth0", "::ffff:10.0.0.1",        "node_7"};
    for (size_t i = 0; i < sizeof hosts / sizeof hosts[0]; i++)
        if (!emq__host_valid(hosts[i], strlen(hosts[i])))
            FAIL("'%s' refused as a host", hosts[i]);
    /* A CLUSTER SLOTS reply naming one such host fails whole. */
    emq_reply *r = parse_reply("*1\r\n*3\r\n:0\r\n:16383\r\n*2\r\n"
                               "$30\r\n127.0.0.1:7001?tls.verify=none\r\n"
                               ":7000\r\n");
    emq__slot_map map;
    emq__slot_map_init(&map);
    emq_error err;
    ASSERT_STATUS(emq__slot_map_from_slots(&map, r, "seed", &err), EMQ_EPROTO,
                  &err);
    ASSERT_EQ_SIZE(map.nnodes, 0);
    emq__slot_map_free(&map);
    emq_reply_free(r);
}
