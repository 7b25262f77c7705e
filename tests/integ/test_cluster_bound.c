/* SPDX-License-Identifier: BSD-3-Clause */
/* test_cluster_bound.c: the route's own bound (cluster.max_redirects) seen
 * from the consumer and the producer.
 *
 * A consumer whose reads reach it reconnects and loses nothing; a producer
 * fails that entry alone (EMQ_ELIMIT, not a broken link) and goes on.
 *
 * Two intercepting proxies in front of one real server play a cluster in
 * flux: both refuse CLUSTER (so the route learns the cluster from MOVED,
 * as under an ACL without CLUSTER), and each answers the first two new
 * reads (XREADGROUP ... >) with a MOVED to the next. The server really ran
 * those reads, so their entries sit unseen in the consumer's pending list.
 * With cluster.max_redirects 1 each of those reads fails with EMQ_ELIMIT:
 * the consumer must take that as "reconnect" (a fresh map), never as a
 * fatal error, and its recovery must hand out what the hidden reads
 * delivered.
 */
#include "integ/consumer_helpers.h"
#include "integ/redirect_helpers.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static recorder rec;

TEST_TIMEOUT(consumer_reconnects_past_the_routes_redirect_bound, 40) {
    emq_srv *s = emq_srv_start(NULL);
    produce_n(s, "jobs", "e", 30);
    emq_icept *next = redirecting_proxy(s, "XREADGROUP", 1, 2, emq_srv_port(s));
    emq_icept *seed =
        redirecting_proxy(s, "XREADGROUP", 1, 2, url_port(emq_icept_url(next)));
    emq_conf_t *conf = consumer_conf(s, "jobs", "g", "w", "head");
    conf_set(conf, "url", emq_icept_url(seed));
    conf_set(conf, "cluster.max_redirects", "1");
    conf_set(conf, "count", "4");
    recorder_init(&rec);
    emq_consumer_t *c;
    emq_error err;
    ASSERT_OK(emq_consumer_new(conf, record, &rec, &c, &err), &err);
    runner_thread t;
    start_consumer(&t, c);
    wait_for(&rec, 30, 20000);
    emq_consumer_stop(c);
    ASSERT_STATUS(join_consumer(&t), EMQ_OK, &t.err);

    /* Every entry handled, none twice, none left pending. */
    for (size_t i = 0; i < rec.n; i++)
        for (size_t k = i + 1; k < rec.n; k++)
            if (strcmp(rec.ids[i], rec.ids[k]) == 0)
                FAIL("entry %s handled twice", rec.ids[i]);
    ASSERT_EQ_SIZE(rec.n, 30);
    emq_consumer_stats st;
    emq_consumer_stats_get(c, &st);
    fprintf(stderr,
            "    redirects %llu, gave up %llu, reconnects %llu, acked %llu\n",
            (unsigned long long)st.redirects,
            (unsigned long long)st.cluster_gave_up,
            (unsigned long long)st.reconnects, (unsigned long long)st.acked);
    ASSERT_EQ_INT(st.cluster_gave_up, 2);
    ASSERT_EQ_INT(st.redirects, 2); /* one followed per hidden read */
    ASSERT(st.reconnects >= 2);
    ASSERT_EQ_INT(st.acked, 30);
    ASSERT(emq_icept_replaced(next) == 2);
    char out[64];
    ASSERT_EQ_INT(
        emq_srv_cmd(s, out, sizeof out, "XPENDING", "emq:{jobs}", "g", NULL),
        '*');
    ASSERT(strncmp(out, "0\n", 2) == 0); /* nothing pending */

    emq_consumer_destroy(c);
    emq_conf_destroy(conf);
    emq_icept_stop(seed);
    emq_icept_stop(next);
    emq_srv_stop(s);
}

/* The producer: the two XADDs that meet the bound fail alone with the
 * route's EMQ_ELIMIT (the link stays up, no reconnect), the next goes
 * through on the same connection. */
TEST_TIMEOUT(producer_fails_only_the_entry_at_the_routes_bound, 30) {
    emq_srv *s = emq_srv_start(NULL);
    emq_icept *next = redirecting_proxy(s, "XADD", -1, 2, emq_srv_port(s));
    emq_icept *seed =
        redirecting_proxy(s, "XADD", -1, 2, url_port(emq_icept_url(next)));
    emq_conf_t *conf = conf_for(emq_icept_url(seed));
    conf_set(conf, "queue", "jobs");
    conf_set(conf, "cluster.max_redirects", "1");
    emq_producer_t *p;
    emq_error err;
    ASSERT_OK(emq_producer_new(conf, &p, &err), &err);
    emq_field f = {"n", 1, "x", 1};
    emq_id id;
    for (int i = 0; i < 2; i++) {
        ASSERT_STATUS(emq_produce(p, &f, 1, &id, &err), EMQ_ELIMIT, &err);
        ASSERT_CONTAINS(err.message, "cluster.max_redirects");
        ASSERT_EQ_STR(err.reply_code, "MOVED");
        ASSERT_EQ_STR(id.str, "");
    }
    ASSERT_OK(emq_produce(p, &f, 1, &id, &err), &err);
    ASSERT(id.str[0] != '\0');
    ASSERT_EQ_INT(emq_icept_accepted(seed), 1); /* never reconnected */
    emq_producer_destroy(p);
    emq_conf_destroy(conf);
    emq_icept_stop(seed);
    emq_icept_stop(next);
    emq_srv_stop(s);
}
