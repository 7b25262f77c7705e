/* SPDX-License-Identifier: BSD-3-Clause */
/* test_keys.c: queue names to keys of one slot, and the CRC16 slot. */
#include "harness/test.h"
#include "keys/keys.h"
#include "cluster/cluster.h"

TEST(cluster_crc16_check_value) {
    /* The published check value of CRC16/XMODEM. */
    ASSERT_EQ_INT(emq__cluster_crc16("123456789", 9), 0x31C3);
    ASSERT_EQ_INT(emq__cluster_crc16("", 0), 0);
}

TEST(cluster_key_slot_hashtags) {
    /* A hashtag decides the slot: {jobs} and {jobs}:dlq share slot 9631. */
    ASSERT_EQ_INT(emq__cluster_key_slot("{jobs}", 6), 9631);
    ASSERT_EQ_INT(emq__cluster_key_slot("{jobs}:dlq", 10), 9631);
    ASSERT_EQ_INT(emq__cluster_key_slot("jobs", 4), 9631);
    /* Only the first {...} counts; an empty {} hashes the whole key. */
    ASSERT_EQ_INT(emq__cluster_key_slot("a{jobs}{x}", 10), 9631);
    ASSERT_EQ_INT(emq__cluster_key_slot("{}jobs", 6),
                  emq__cluster_crc16("{}jobs", 6) & 16383);
    ASSERT_EQ_INT(emq__cluster_key_slot("{jobs", 5),
                  emq__cluster_crc16("{jobs", 5) & 16383);
}

TEST(keys_for_queue) {
    emq__keys k;
    emq_error err;
    ASSERT_OK(emq__keys_for_queue("jobs", &k, &err), &err);
    ASSERT_EQ_STR(k.stream, "emq:{jobs}");
    ASSERT_EQ_STR(k.dead, "emq:{jobs}:dead");
    ASSERT_EQ_INT(k.slot, 9631);
    char *lease = emq__keys_join(&k, "lease:g", "c-1");
    ASSERT_EQ_STR(lease, "emq:{jobs}:lease:g:c-1");
    ASSERT_EQ_INT(emq__cluster_key_slot(lease, strlen(lease)), 9631);
    emq__free(lease);
    char *reasons = emq__keys_join(&k, "reasons", NULL);
    ASSERT_EQ_STR(reasons, "emq:{jobs}:reasons");
    emq__free(reasons);
    emq__keys_free(&k);
}

TEST(keys_queue_name_validation) {
    emq__keys k;
    emq_error err;
    ASSERT_STATUS(emq__keys_for_queue("", &k, &err), EMQ_EINVAL, &err);
    ASSERT_CONTAINS(err.message, "queue name is empty");
    ASSERT_STATUS(emq__keys_for_queue(NULL, &k, &err), EMQ_EINVAL, &err);
    ASSERT_STATUS(emq__keys_for_queue("a{b}", &k, &err), EMQ_EINVAL, &err);
    ASSERT_CONTAINS(err.message, "byte 1");
    ASSERT_CONTAINS(err.message, "hashtag");
    ASSERT_STATUS(emq__keys_for_queue("has space", &k, &err), EMQ_EINVAL, &err);
    ASSERT_STATUS(emq__keys_for_queue("nl\n", &k, &err), EMQ_EINVAL, &err);
    ASSERT_CONTAINS(err.message, "'nl?'");
    char longname[EMQ_KEYS_MAX_QUEUE + 2];
    memset(longname, 'a', sizeof longname - 1);
    longname[sizeof longname - 1] = '\0';
    ASSERT_STATUS(emq__keys_for_queue(longname, &k, &err), EMQ_EINVAL, &err);
    ASSERT_CONTAINS(err.message, "limit is 200");
    longname[EMQ_KEYS_MAX_QUEUE] = '\0';
    ASSERT_OK(emq__keys_for_queue(longname, &k, &err), &err);
    emq__keys_free(&k);
    ASSERT_OK(emq__keys_for_queue("orders.eu-1:v2_x", &k, &err), &err);
    emq__keys_free(&k);
}

TEST(keys_for_raw_stream) {
    emq__keys k;
    emq_error err;
    /* No braces: the other keys wrap the name, same slot. */
    ASSERT_OK(emq__keys_for_stream("events", &k, &err), &err);
    ASSERT_EQ_STR(k.stream, "events");
    ASSERT_EQ_STR(k.dead, "{events}:dead");
    ASSERT_EQ_INT(k.slot, emq__cluster_key_slot("events", 6));
    emq__keys_free(&k);
    /* A hashtag is kept. */
    ASSERT_OK(emq__keys_for_stream("app:{t1}:events", &k, &err), &err);
    ASSERT_EQ_STR(k.dead, "app:{t1}:events:dead");
    ASSERT_EQ_INT(k.slot, emq__cluster_key_slot("t1", 2));
    emq__keys_free(&k);
    /* Braces that do not make a hashtag are refused up front. */
    const char *bad[] = {"a{b", "a}b", "{}x", "x{}"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ASSERT_STATUS(emq__keys_for_stream(bad[i], &k, &err), EMQ_EINVAL, &err);
        ASSERT_CONTAINS(err.message, "another cluster slot");
    }
    ASSERT_STATUS(emq__keys_for_stream("", &k, &err), EMQ_EINVAL, &err);
}

TEST(keys_allocation_failures) {
    int failures = 0;
    for (uint64_t n = 1; n <= 4; n++) {
        emq__keys k;
        emq_error err;
        emq__alloc_fail_at(n);
        emq_status st = emq__keys_for_queue("jobs", &k, &err);
        emq__alloc_fail_at(0);
        if (st == EMQ_OK)
            emq__keys_free(&k);
        else {
            ASSERT_STATUS(st, EMQ_ENOMEM, &err);
            failures++;
        }
    }
    ASSERT_EQ_INT(failures, 3); /* stream, prefix and dead names */
}

TEST(stream_id_parse) {
    emq__stream_id id;
    ASSERT_EQ_INT(emq__stream_id_parse("5", 1, &id), 0);
    ASSERT(id.ms == 5 && id.seq == 0);
    ASSERT_EQ_INT(emq__stream_id_parse("1732924800123-7", 15, &id), 0);
    ASSERT(id.ms == 1732924800123ULL && id.seq == 7);
    ASSERT_EQ_INT(emq__stream_id_parse(
                      "18446744073709551615-18446744073709551615", 41, &id),
                  0);
    ASSERT(id.ms == UINT64_MAX && id.seq == UINT64_MAX);
    /* Eight digits at a time, then one by one: 16 and 17 digits. */
    ASSERT_EQ_INT(emq__stream_id_parse("1234567890123456-12345678", 25, &id),
                  0);
    ASSERT(id.ms == 1234567890123456ULL && id.seq == 12345678);
    ASSERT_EQ_INT(emq__stream_id_parse("12345678901234567", 17, &id), 0);
    ASSERT(id.ms == 12345678901234567ULL && id.seq == 0);
    /* Thirteen digits and a dash, read as two overlapping words. */
    ASSERT_EQ_INT(emq__stream_id_parse("9999999999999-0", 15, &id), 0);
    ASSERT(id.ms == 9999999999999ULL && id.seq == 0);
    ASSERT_EQ_INT(emq__stream_id_parse("1000000000001-10", 16, &id), 0);
    ASSERT(id.ms == 1000000000001ULL && id.seq == 10);
    /* Something else at each place of the thirteen. */
    for (int at = 0; at < 13; at++) {
        const char others[] = {'/', ':', ' ', 'a', '\x80', '\xff'};
        for (size_t k = 0; k < sizeof others; k++) {
            char text[] = "1796415960625-7";
            text[at] = others[k];
            if (emq__stream_id_parse(text, strlen(text), NULL) != -1)
                FAIL("'%s' parsed as a stream ID", text);
        }
    }
    const char *bad[] = {"",
                         "abc",
                         "-",
                         "+",
                         "$",
                         ">",
                         "1-2-3",
                         "-1",
                         "1-",
                         "1796415960625-",
                         "1796415960625+0",
                         "-0",
                         " 1",
                         "1 ",
                         "+1",
                         "18446744073709551616",
                         "1-18446744073709551616",
                         "0x10",
                         "1.5"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        if (emq__stream_id_parse(bad[i], strlen(bad[i]), NULL) != -1)
            FAIL("'%s' parsed as a stream ID", bad[i]);
}

TEST(stream_id_compare) {
    emq__stream_id a = {1, 5}, b = {1, 6}, c = {2, 0};
    ASSERT_EQ_INT(emq__stream_id_cmp(a, b), -1);
    ASSERT_EQ_INT(emq__stream_id_cmp(b, a), 1);
    ASSERT_EQ_INT(emq__stream_id_cmp(b, c), -1);
    ASSERT_EQ_INT(emq__stream_id_cmp(c, c), 0);
}

/* The third of the slots each of 3 masters serves after `redis-cli
 * --cluster create` (0-5460, 5461-10922, 10923-16383). */
static int master_of(unsigned slot) {
    return slot <= 5460 ? 0 : slot <= 10922 ? 1 : 2;
}

TEST(topic_partitions_names_keys_and_spread) {
    emq_conf_t *conf = emq_conf_new();
    ASSERT(conf != NULL);
    emq_error err;
    ASSERT_OK(emq_conf_set(conf, "queue", "events", &err), &err);
    ASSERT_EQ_INT(emq__topic_is(conf), 0);
    ASSERT_OK(emq_conf_set(conf, "partitions", "6", &err), &err);
    ASSERT_EQ_INT(emq__topic_is(conf), 1);
    ASSERT_OK(emq__topic_check(conf, &err), &err);
    /* Partition i is the queue "events.i" with partitions 1. */
    int per[3] = {0, 0, 0};
    for (int i = 0; i < 6; i++) {
        emq_conf_t *pc;
        ASSERT_OK(emq__topic_partition_conf(conf, i, &pc, &err), &err);
        char q[32], want[32], p[8];
        ASSERT_OK(emq_conf_get(pc, "queue", q, sizeof q, &err), &err);
        snprintf(want, sizeof want, "events.%d", i);
        ASSERT_EQ_STR(q, want);
        ASSERT_OK(emq_conf_get(pc, "partitions", p, sizeof p, &err), &err);
        ASSERT_EQ_STR(p, "1");
        emq_conf_destroy(pc);
        emq__keys k;
        ASSERT_OK(emq__keys_for_queue(want, &k, &err), &err);
        per[master_of(k.slot)]++;
        emq__keys_free(&k);
    }
    /* "events" is the name the cluster tests use: 2 partitions per
     * master of 3. */
    ASSERT_EQ_INT(per[0], 2);
    ASSERT_EQ_INT(per[1], 2);
    ASSERT_EQ_INT(per[2], 2);
    /* A key's partition is CRC16 mod P: stable, and P 1 is partition 0. */
    ASSERT_EQ_INT(emq__topic_key_partition("123456789", 9, 6), 0x31C3 % 6);
    ASSERT_EQ_INT(emq__topic_key_partition("anything", 8, 1), 0);
    /* A raw stream cannot be partitioned; the longest name must fit. */
    ASSERT_OK(emq_conf_set(conf, "queue", NULL, &err), &err);
    ASSERT_OK(emq_conf_set(conf, "stream", "raw", &err), &err);
    ASSERT_STATUS(emq__topic_check(conf, &err), EMQ_EINVAL, &err);
    ASSERT_OK(emq_conf_set(conf, "stream", NULL, &err), &err);
    char longname[201];
    memset(longname, 'a', 200);
    longname[200] = '\0';
    ASSERT_OK(emq_conf_set(conf, "queue", longname, &err), &err);
    ASSERT_STATUS(emq__topic_check(conf, &err), EMQ_EINVAL, &err);
    ASSERT_CONTAINS(err.message, "6 partitions");
    emq_conf_destroy(conf);
}
