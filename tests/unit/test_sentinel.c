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
    /* An address is data: one that could carry URL settings is no
     * address at all. */
    r = parse_reply("*2\r\n$31\r\n127.0.0.1:1?tls.verify=none&x=1\r\n"
                    "$4\r\n6380\r\n");
    ASSERT_EQ_INT(emq__sentinel_master_addr(r, host, sizeof host, &port), -1);
    emq_reply_free(r);
}

TEST(sentinel_announced_addresses_are_hosts_only) {
    char host[64];
    int port = 1;
    emq_reply *r =
        parse_reply("*3\r\n$7\r\nmessage\r\n$14\r\n+switch-master\r\n"
                    "$43\r\nm 127.0.0.1 6379 u@127.0.0.1?tls.sni=x 6380\r\n");
    /* Still a switch (resolve again), but no address is taken from it. */
    ASSERT_EQ_INT(emq__sentinel_news_of(r, "m", host, sizeof host, &port), 1);
    ASSERT_EQ_STR(host, "");
    ASSERT_EQ_INT(port, 0);
    emq_reply_free(r);
    emq__url u;
    emq_error err;
    ASSERT_OK(emq__url_parse("redis-sentinel://a:1#m", &u, &err), &err);
    r = parse_reply("*2\r\n"
                    "*4\r\n$2\r\nip\r\n$9\r\nb/0?x=1#m\r\n$4\r\nport"
                    "\r\n$1\r\n2\r\n"
                    "*4\r\n$2\r\nip\r\n$1\r\nc\r\n$4\r\nport\r\n$1\r\n3"
                    "\r\n");
    ASSERT_EQ_SIZE(emq__sentinel_learn(&u, r, NULL, NULL), 1);
    ASSERT_EQ_SIZE(u.nsentinels, 2);
    ASSERT_EQ_STR(u.sentinels[1].host, "c");
    emq_reply_free(r);
    emq__url_free(&u);
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
    /* One that named a primary that failed goes to the back; found by
     * the host pointer the list holds, not by an equal string. */
    emq__sentinel_to_back(&u, u.sentinels[0].host, 3);
    ASSERT_EQ_STR(u.sentinels[0].host, "a");
    ASSERT_EQ_STR(u.sentinels[1].host, "b");
    ASSERT_EQ_STR(u.sentinels[2].host, "c");
    emq__sentinel_to_back(&u, "a", 1); /* another pointer: no-op */
    ASSERT_EQ_STR(u.sentinels[0].host, "a");
    emq__sentinel_to_back(&u, u.sentinels[0].host, 9); /* another port */
    ASSERT_EQ_STR(u.sentinels[0].host, "a");
    /* SENTINEL sentinels: one known (a:1), one new (d:4), one without a
     * port (skipped). */
    emq_reply *r =
        parse_reply("*3\r\n"
                    "*4\r\n$2\r\nip\r\n$1\r\na\r\n$4\r\nport\r\n$1\r\n1\r\n"
                    "*4\r\n$2\r\nip\r\n$1\r\nd\r\n$4\r\nport\r\n$1\r\n4\r\n"
                    "*2\r\n$2\r\nip\r\n$1\r\ne\r\n");
    ASSERT_EQ_SIZE(emq__sentinel_learn(&u, r, NULL, NULL), 1);
    ASSERT_EQ_SIZE(u.nsentinels, 4);
    ASSERT_EQ_STR(u.sentinels[3].host, "d");
    ASSERT_EQ_INT(u.sentinels[3].port, 4);
    ASSERT_EQ_SIZE(emq__sentinel_learn(&u, r, NULL, NULL), 0); /* known now */
    emq_reply_free(r);
    emq__url_free(&u);
}

TEST(sentinel_address_map_maps_the_first_match) {
    const char *map = "10.0.0.5:6379=127.0.0.1:16379,"
                      "[fd00::7]:26379=localhost:36379,Redis-A=192.0.2.1:7000";
    char host[64] = "10.0.0.5";
    int port = 6379;
    emq_error err;
    ASSERT_OK(emq__sentinel_map(map, host, sizeof host, &port, &err), &err);
    ASSERT_EQ_STR(host, "127.0.0.1");
    ASSERT_EQ_INT(port, 16379);
    /* IPv6 FROM; a port that differs does not match. */
    snprintf(host, sizeof host, "fd00::7");
    port = 26380;
    ASSERT_OK(emq__sentinel_map(map, host, sizeof host, &port, &err), &err);
    ASSERT_EQ_STR(host, "fd00::7");
    port = 26379;
    ASSERT_OK(emq__sentinel_map(map, host, sizeof host, &port, &err), &err);
    ASSERT_EQ_STR(host, "localhost");
    ASSERT_EQ_INT(port, 36379);
    /* A host name without a port is port 6379; names match without case. */
    snprintf(host, sizeof host, "redis-a");
    port = 6379;
    ASSERT_OK(emq__sentinel_map(map, host, sizeof host, &port, &err), &err);
    ASSERT_EQ_STR(host, "192.0.2.1");
    ASSERT_EQ_INT(port, 7000);
    /* No map: nothing changes. */
    ASSERT_OK(emq__sentinel_map(NULL, host, sizeof host, &port, &err), &err);
    ASSERT_OK(emq__sentinel_map("", host, sizeof host, &port, &err), &err);
    ASSERT_EQ_STR(host, "192.0.2.1");
    /* A TO that does not fit the caller's buffer is refused. */
    char small[8] = "a";
    port = 6379;
    ASSERT_STATUS(emq__sentinel_map("a=averyveryverylongname:1", small,
                                    sizeof small, &port, &err),
                  EMQ_EINVAL, &err);
    ASSERT_EQ_STR(small, "a");
}

TEST(sentinel_address_map_refuses_malformed_entries) {
    char host[64] = "x";
    int port = 1;
    emq_error err;
    ASSERT_STATUS(emq__sentinel_map("a:1", host, sizeof host, &port, &err),
                  EMQ_EINVAL, &err);
    ASSERT_CONTAINS(err.message, "entry 1");
    ASSERT_CONTAINS(err.message, "'='");
    ASSERT_STATUS(
        emq__sentinel_map("a:1=b:2,c:99999=d", host, sizeof host, &port, &err),
        EMQ_EINVAL, &err);
    ASSERT_CONTAINS(err.message, "entry 2");
    ASSERT_CONTAINS(err.message, "99999");
    ASSERT_STATUS(emq__sentinel_map("a:1=", host, sizeof host, &port, &err),
                  EMQ_EINVAL, &err);
    ASSERT_STATUS(emq__sentinel_map("a:1=b:2,", host, sizeof host, &port, &err),
                  EMQ_EINVAL, &err);
    ASSERT_CONTAINS(err.message, "entry 2");
    /* The conf refuses the same on set, naming the property. */
    emq_conf_t *conf = emq_conf_new();
    ASSERT_STATUS(emq_conf_set(conf, "sentinel.address_map", "a:1", &err),
                  EMQ_EINVAL, &err);
    ASSERT_CONTAINS(err.message, "sentinel.address_map");
    ASSERT_OK(emq_conf_set(conf, "sentinel.address_map",
                           "10.0.0.5:6379=127.0.0.1:16379", &err),
              &err);
    ASSERT_STATUS(emq_conf_set(conf, "sentinel.tls", "2", &err), EMQ_EINVAL,
                  &err);
    ASSERT_OK(emq_conf_set(conf, "sentinel.tls", "0", &err), &err);
    emq_conf_destroy(conf);
}

TEST(sentinel_learn_maps_announced_addresses) {
    emq__url u;
    emq_error err;
    ASSERT_OK(emq__url_parse("redis-sentinel://a:1#m", &u, &err), &err);
    emq_reply *r = parse_reply(
        "*1\r\n"
        "*4\r\n$2\r\nip\r\n$8\r\n10.0.0.9\r\n$4\r\nport\r\n$5\r\n26379\r\n");
    /* sentinel.allowed_hosts applies to the mapped address. */
    ASSERT_EQ_SIZE(
        emq__sentinel_learn(&u, r, "10.0.0.9:26379=127.0.0.1:36379", "10.*"),
        0);
    ASSERT_EQ_SIZE(u.nsentinels, 1);
    ASSERT_EQ_SIZE(emq__sentinel_learn(&u, r, "10.0.0.9:26379=127.0.0.1:36379",
                                       "127.0.0.*"),
                   1);
    ASSERT_EQ_STR(u.sentinels[1].host, "127.0.0.1");
    ASSERT_EQ_INT(u.sentinels[1].port, 36379);
    emq_reply_free(r);
    emq__url_free(&u);
}

TEST(sentinel_news_of_tells_our_master_from_others) {
    char host[64];
    int port;
    emq_reply *r =
        parse_reply("*3\r\n$7\r\nmessage\r\n$14\r\n+switch-master\r\n"
                    "$38\r\nmymaster 127.0.0.1 6379 127.0.0.1 6380\r\n");
    ASSERT_EQ_INT(
        emq__sentinel_news_of(r, "mymaster", host, sizeof host, &port), 1);
    ASSERT_EQ_STR(host, "127.0.0.1"); /* the new primary, not the old */
    ASSERT_EQ_INT(port, 6380);
    ASSERT_EQ_INT(emq__sentinel_news_of(r, "other", host, sizeof host, &port),
                  0);
    ASSERT_EQ_INT(emq__sentinel_news_of(r, "mymaste", host, sizeof host, &port),
                  0); /* a prefix */
    emq_reply_free(r);
    /* A subscription's confirmation is no news. */
    r = parse_reply("*3\r\n$9\r\nsubscribe\r\n$14\r\n+switch-master\r\n:1\r\n");
    ASSERT_EQ_INT(
        emq__sentinel_news_of(r, "mymaster", host, sizeof host, &port), 0);
    emq_reply_free(r);
    /* The leader's +promoted-slave names the master after "@", the
     * promoted replica before it. */
    const char *promoted = "slave 10.0.0.2:6381 10.0.0.2 6381 @ mymaster "
                           "127.0.0.1 6379";
    char bytes[256];
    snprintf(bytes, sizeof bytes,
             "*3\r\n$7\r\nmessage\r\n$15\r\n+promoted-slave\r\n$%zu\r\n%s"
             "\r\n",
             strlen(promoted), promoted);
    r = parse_reply(bytes);
    ASSERT_EQ_INT(
        emq__sentinel_news_of(r, "mymaster", host, sizeof host, &port), 1);
    ASSERT_EQ_STR(host, "10.0.0.2");
    ASSERT_EQ_INT(port, 6381);
    ASSERT_EQ_INT(emq__sentinel_news_of(r, "other", host, sizeof host, &port),
                  0);
    emq_reply_free(r);
    /* Ours, but no address to read: 1 with an empty host. */
    r = parse_reply("*3\r\n$7\r\nmessage\r\n$14\r\n+switch-master\r\n"
                    "$8\r\nmymaster\r\n");
    ASSERT_EQ_INT(
        emq__sentinel_news_of(r, "mymaster", host, sizeof host, &port), 1);
    ASSERT_EQ_STR(host, "");
    ASSERT_EQ_INT(port, 0);
    emq_reply_free(r);
    r = parse_reply("*3\r\n$7\r\nmessage\r\n$7\r\n+sdown!\r\n$1\r\nx\r\n");
    ASSERT_EQ_INT(
        emq__sentinel_news_of(r, "mymaster", host, sizeof host, &port), -1);
    emq_reply_free(r);
    r = parse_reply("+OK\r\n");
    ASSERT_EQ_INT(
        emq__sentinel_news_of(r, "mymaster", host, sizeof host, &port), -1);
    emq_reply_free(r);
}

/* One message on channel with payload, as a subscribed connection reads
 * it. */
static emq_reply *message(const char *channel, const char *payload) {
    char bytes[512];
    snprintf(bytes, sizeof bytes,
             "*3\r\n$7\r\nmessage\r\n$%zu\r\n%s\r\n$%zu\r\n%s\r\n",
             strlen(channel), channel, strlen(payload), payload);
    return parse_reply(bytes);
}

/* The leader's steps before the promotion begin a failover, its end and
 * aborts end it, each of our master only; "+failover-state-send-slaveof-
 * noone" is a step, not an end. */
TEST(sentinel_news_of_failover_steps) {
    char host[64];
    int port;
    const char *master = "master mymaster 127.0.0.1 6379";
    const char *slave = "slave 127.0.0.1:6380 127.0.0.1 6380 @ mymaster "
                        "127.0.0.1 6379";
    struct {
        const char *channel, *payload;
        emq__sentinel_news news;
    } cases[] = {
        {"+try-failover", master, EMQ_SENTINEL_BEGUN},
        {"+elected-leader", master, EMQ_SENTINEL_BEGUN},
        {"+failover-state-select-slave", master, EMQ_SENTINEL_BEGUN},
        {"+selected-slave", slave, EMQ_SENTINEL_BEGUN},
        {"+failover-state-send-slaveof-noone", slave, EMQ_SENTINEL_BEGUN},
        {"+failover-state-wait-promotion", slave, EMQ_SENTINEL_BEGUN},
        {"-failover-abort-not-elected", master, EMQ_SENTINEL_ENDED},
        {"-failover-abort-no-good-slave", master, EMQ_SENTINEL_ENDED},
        {"-failover-abort-slave-timeout", master, EMQ_SENTINEL_ENDED},
        {"+failover-end", master, EMQ_SENTINEL_ENDED},
        {"+failover-end-for-timeout", master, EMQ_SENTINEL_ENDED},
        {"+promoted-slave", slave, EMQ_SENTINEL_SWITCH},
        {"+sdown", master, EMQ_SENTINEL_UNREADABLE}, /* not subscribed */
        {"+try-failover", "nonsense", EMQ_SENTINEL_UNREADABLE},
    };
    ASSERT_EQ_INT(EMQ_SENTINEL_CHANNELS, 13);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        emq_reply *r = message(cases[i].channel, cases[i].payload);
        emq__sentinel_news got =
            emq__sentinel_news_of(r, "mymaster", host, sizeof host, &port);
        if (got != cases[i].news)
            FAIL("%s: %d, want %d", cases[i].channel, (int)got,
                 (int)cases[i].news);
        if (cases[i].news != EMQ_SENTINEL_UNREADABLE)
            ASSERT_EQ_INT(
                emq__sentinel_news_of(r, "other", host, sizeof host, &port),
                EMQ_SENTINEL_NONE);
        emq_reply_free(r);
    }
}

TEST(sentinel_failover_timeout_read_from_sentinel_master) {
    emq_reply *r = parse_reply("*4\r\n$4\r\nname\r\n$1\r\nm\r\n"
                               "$16\r\nfailover-timeout\r\n$5\r\n15000\r\n");
    ASSERT_EQ_INT(emq__sentinel_failover_timeout(r), 15000);
    emq_reply_free(r);
    r = parse_reply("*2\r\n$16\r\nfailover-timeout\r\n:2500\r\n");
    ASSERT_EQ_INT(emq__sentinel_failover_timeout(r), 2500);
    emq_reply_free(r);
    r = parse_reply("*2\r\n$16\r\nfailover-timeout\r\n$3\r\n1x0\r\n");
    ASSERT_EQ_INT(emq__sentinel_failover_timeout(r), 0);
    emq_reply_free(r);
    r = parse_reply("*0\r\n");
    ASSERT_EQ_INT(emq__sentinel_failover_timeout(r), 0);
    emq_reply_free(r);
}
