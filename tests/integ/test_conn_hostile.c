/* SPDX-License-Identifier: BSD-3-Clause */
/* test_conn_hostile.c: replies from a hostile or broken server are bounded
 * in time and memory, against fake peers on loopback:
 *  - an endless, well-formed array (every element within the limits) ends
 *    at resp.max_reply_bytes, and, with that limit out of the way, at the
 *    command timeout although bytes never stop arriving;
 *  - a storm of RESP3 attributes ends the same way;
 *  - a storm of push messages ends at the command timeout (pushes are
 *    dropped and counted, none is a reply);
 *  - a 12-byte "$536870912" header reserves no large buffer before its
 *    bytes come.
 * Each case must fail within its deadline (plus slack) and grow this
 * process by less than 64 MiB, resident and virtual.
 */
#include "harness/fakepeer.h"
#include "harness/server.h"
#include "integ/conn_helpers.h"

#include <stdlib.h>
#include <string.h>

/* A field of /proc/self/status (VmHWM, VmPeak), in KiB. */
static long vm_kib(const char *field) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kib = -1;
    size_t n = strlen(field);
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, field, n) == 0)
            kib = atol(line + n + 1);
    if (f)
        fclose(f);
    return kib;
}

/* PING to a peer flooding reply + unit...; the call must fail with want
 * within deadline_ms + 1500 ms, growing this process by < 64 MiB. */
static void hostile_case(const char *reply, const char *unit, int pace_ms,
                         const char *max_reply, const char *timeout_ms,
                         emq_status want, const char *says) {
    emq_peer_opts o = {.mode = EMQ_PEER_REPLY_FLOOD,
                       .reply = reply,
                       .reply_len = strlen(reply),
                       .flood = unit,
                       .flood_pace_ms = pace_ms,
                       .trigger = "PING"};
    emq_peer *p = emq_peer_start(&o);
    emq_conf_t *conf = conf_for(emq_peer_url(p));
    conf_set(conf, "protocol", "2");
    conf_set(conf, P_COMMAND_TIMEOUT, timeout_ms);
    if (max_reply)
        conf_set(conf, "resp.max_reply_bytes", max_reply);
    emq_conn_t *c = connect_ok(conf);
    /* Peaks: the buffers are gone once the connection broke. */
    long rss0 = vm_kib("VmHWM:"), vsz0 = vm_kib("VmPeak:");
    int64_t t0 = now_ms();
    const char *argv[] = {"PING"};
    emq_reply *r = NULL;
    emq_error err;
    emq_status st = emq_conn_command(c, 1, argv, NULL, &r, &err);
    int64_t took = now_ms() - t0;
    long rss = vm_kib("VmHWM:") - rss0, vsz = vm_kib("VmPeak:") - vsz0;
    printf("    %s: %s after %lld ms (%lld bytes flooded), peak +%ld KiB "
           "resident, +%ld KiB virtual: %s\n",
           says ? says : "-", emq_status_name(st), (long long)took,
           emq_peer_flooded(p), rss, vsz, err.message);
    ASSERT_EQ_INT(st, want);
    ASSERT(r == NULL);
    if (says)
        ASSERT_CONTAINS(err.message, says);
    ASSERT(took < atoll(timeout_ms) + emq_test_ms(1500));
    ASSERT(rss < 64 * 1024);
    ASSERT(vsz < 64 * 1024);
    emq_conn_destroy(c);
    emq_conf_destroy(conf);
    emq_peer_stop(p);
}

/* The flood units divide 64 KiB: ":1\r\n" is 4 bytes, the attribute
 * "|1\r\n+abc\r\n+def\r\n" and the push ">2\r\n+xyz\r\n+uvw\r\n" 16. */

TEST_TIMEOUT(hostile_endless_array_ends_at_max_reply_bytes, 30) {
    /* An array of the most elements allowed, each one fine: 64 MiB of
     * integers at full speed, stopped at 8 MiB. */
    hostile_case("*16777215\r\n", ":1\r\n", 0, "8388608", "5000", EMQ_EPROTO,
                 "max_reply");
}

/* A finite, valid reply of 10 million 4-byte integers: 40 MB on the
 * wire, under a 64 MiB limit of bytes, but 440 MB once each became a
 * node (this process grew by 2.8 GB for a 200 MB one). The limit counts
 * the nodes: the read ends early, the growth stays small. */
TEST_TIMEOUT(hostile_many_small_elements_count_their_nodes, 30) {
    hostile_case("*10000000\r\n", ":1\r\n", 0, "67108864", "5000", EMQ_EPROTO,
                 "max_reply");
}

TEST_TIMEOUT(hostile_endless_array_ends_at_the_deadline, 30) {
    /* At full speed, with the limit far enough away (1 GiB, about 13 times
     * the bytes' worth counted: about four times what arrives in 30 ms
     * here): the deadline holds while bytes keep coming; it was checked
     * only on an idle socket, so this read went on for the array's whole
     * 64 MiB. */
    hostile_case("*16777215\r\n", ":1\r\n", 0, "1073741824", "30",
                 EMQ_ETIMEDOUT, "still arriving");
    /* Paced (64 KiB every 5 ms), at the default limit: the same. */
    hostile_case("*16777215\r\n", ":1\r\n", 5, NULL, "300", EMQ_ETIMEDOUT,
                 NULL);
}

TEST_TIMEOUT(hostile_attribute_storm_ends_at_max_reply_bytes, 30) {
    hostile_case("", "|1\r\n+abc\r\n+def\r\n", 0, "8388608", "5000", EMQ_EPROTO,
                 "max_reply");
}

TEST_TIMEOUT(hostile_push_storm_ends_at_the_deadline, 30) {
    hostile_case("", ">2\r\n+xyz\r\n+uvw\r\n", 0, NULL, "500", EMQ_ETIMEDOUT,
                 "push messages dropped");
}

TEST_TIMEOUT(hostile_huge_bulk_header_reserves_nothing_big, 30) {
    /* "$536870912\r\n", then its bytes paced: no 512 MiB buffer is
     * reserved for them before they come (it was, at the header). */
    hostile_case("$536870912\r\n", "abcd", 5, NULL, "500", EMQ_ETIMEDOUT, NULL);
}
