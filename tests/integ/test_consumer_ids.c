/* SPDX-License-Identifier: BSD-3-Clause */
/* test_consumer_ids.c: entry IDs at the edges of the ID space, against a
 * real redis-server.
 *
 * Own pending entries and a dead peer's entries at 0-1, max-0 and max-max
 * (max = 18446744073709551615; 0-0 is not a valid entry ID, XADD refuses
 * it) are recovered, claimed and counted like any others: pages never
 * build a range past the largest ID, and every entry reaches the handler
 * once with its exact delivery count.
 */
#include "integ/ownership_helpers.h"
#include "integ/tally_helpers.h"

#define IQ "emq:{ids}"
#define MAXN "18446744073709551615"

static const char *const edge_ids[] = {"0-1", MAXN "-0", MAXN "-" MAXN};

/* Adds the three edge entries (values e0..e2) and has reader read them,
 * so they are pending to it. */
static void edge_pending(emq_conn_t *adm, const char *reader) {
    CMD_NOERR(adm, "XGROUP", "CREATE", IQ, "g", "$", "MKSTREAM");
    CMD_NOERR(adm, "XADD", IQ, edge_ids[0], "n", "e0");
    CMD_NOERR(adm, "XADD", IQ, edge_ids[1], "n", "e1");
    CMD_NOERR(adm, "XADD", IQ, edge_ids[2], "n", "e2");
    emq_reply *r = CMD(adm, "XREADGROUP", "GROUP", "g", reader, "COUNT", "10",
                       "STREAMS", IQ, ">");
    emq_reply_free(r);
    ASSERT_EQ_INT(pending_of(adm, IQ, "g", reader), 3);
}

/* Runs consumer w until e0..e2 were handled, then checks each came once
 * with deliveries 2 and nothing is left pending. */
static void run_and_check(emq_srv *s, emq_conn_t *adm, int min_idle_ms) {
    static slow h;
    slow_init(&h);
    bg b;
    emq_consumer_t *c =
        bg_start(&b, own_conf(s, "ids", "w", min_idle_ms), slow_handle, &h);
    WAIT_UNTIL(recorded(&h.r) >= 3, 5000, "the three edge entries");
    WAIT_UNTIL(pending_total(adm, IQ, "g") == 0, 3000, "all acknowledged");
    wait_two_more_reads(c, NULL, 5000); /* a second delivery would show */
    ASSERT_OK(bg_stop(&b, 3000), &b.err);
    ASSERT_EQ_SIZE(recorded(&h.r), 3);
    for (int i = 0; i < 3; i++) {
        char v[8];
        snprintf(v, sizeof v, "e%d", i);
        int at = recorded_index(&h.r, v);
        ASSERT(at >= 0);
        ASSERT_EQ_INT(h.r.deliveries[at], 2);
    }
    emq_consumer_destroy(c);
}

TEST_TIMEOUT(ids_own_pending_at_the_edges_recovered_once, 30) {
    emq_srv *s = emq_srv_start(NULL);
    emq_conn_t *adm = admin_connect(s);
    edge_pending(adm, "w");
    run_and_check(s, adm, 60000);
    emq_conn_destroy(adm);
    emq_srv_stop(s);
}

TEST_TIMEOUT(ids_dead_peer_entries_at_the_edges_claimed_once, 30) {
    emq_srv *s = emq_srv_start(NULL);
    emq_conn_t *adm = admin_connect(s);
    edge_pending(adm, "dead");
    usleep(150 * 1000); /* idle past claim.min_idle_ms 100 */
    run_and_check(s, adm, 100);
    emq_conn_destroy(adm);
    emq_srv_stop(s);
}
