/* SPDX-License-Identifier: BSD-3-Clause */
/* test_reply_codes.c: an error reply that fails a call keeps its code.
 *
 * Every error reply becomes a failure through emq__reply_error_set (or its
 * general form emq__reply_error_as), which copies the reply's first word
 * into emq_error.reply_code, so a caller can branch on NOPERM or NOGROUP
 * without parsing the message. These are the paths that once left it
 * empty: CLIENT SETNAME and CLUSTER SLOTS in the handshake and the route,
 * answered by the intercepting proxy in front of a real server (a real
 * server refuses neither for a name and a conf the library accepts), and
 * SCAN, refused by a real server's ACL. SELECT of a database the server
 * lacks is in test_conn.c (conn_select_out_of_range_names_the_db).
 */
#include "cluster/cluster.h"
#include "harness/fakepeer.h"
#include "harness/server.h"
#include "integ/conn_helpers.h"
#include "integ/inspect_conn_helpers.h"

#include <stdio.h>
#include <string.h>

TEST(reply_code_of_client_setname) {
    emq_srv *s = emq_srv_start(NULL);
    static const char boom[] = "-ERR name refused by the test\r\n";
    emq_icept_rule rule = {"CLIENT", -1, boom, 0, -1, "SETNAME", 0};
    emq_icept *p = emq_icept_start(emq_srv_port(s), &rule, 1);
    emq_conf_t *conf = conf_for(emq_icept_url(p));
    conf_set(conf, P_CLIENT_NAME, "worker-1");
    emq_error err;
    connect_fails(conf, EMQ_ESERVER, &err);
    ASSERT_CONTAINS(err.message, "CLIENT SETNAME");
    ASSERT_CONTAINS(err.message, "name refused by the test");
    ASSERT_EQ_STR(err.reply_code, "ERR");
    ASSERT_EQ_INT(err.retriable, 0);
    ASSERT(emq_icept_replaced(p) >= 1);
    emq_conf_destroy(conf);
    emq_icept_stop(p);
    emq_srv_stop(s);
}

TEST(reply_code_of_cluster_slots) {
    emq_srv *s = emq_srv_start(NULL);
    /* CLUSTER SHARDS refused too, so the route falls back to SLOTS. */
    static const char boom[] = "-ERR slot map refused by the test\r\n";
    emq_icept_rule rule = {"CLUSTER", -1, boom, 0, -1, NULL, 0};
    emq_icept *p = emq_icept_start(emq_srv_port(s), &rule, 1);
    emq_conf_t *conf = conf_for(emq_icept_url(p));
    emq_error err;
    memset(&err, 0, sizeof err);
    emq__route *r = NULL;
    ASSERT_STATUS(emq__route_new(conf, "{jobs}", &r, &err), EMQ_ESERVER, &err);
    ASSERT(r == NULL);
    ASSERT_CONTAINS(err.message, "CLUSTER SLOTS failed");
    ASSERT_CONTAINS(err.message, "slot map refused by the test");
    ASSERT_EQ_STR(err.reply_code, "ERR");
    ASSERT(emq_icept_saw(p, "CLUSTER SLOTS", NULL));
    emq_conf_destroy(conf);
    emq_icept_stop(p);
    emq_srv_stop(s);
}

TEST(reply_code_of_scan) {
    emq_srv *s = emq_srv_start(NULL);
    emq_conn_t *adm = admin_connect(s);
    CMD_NOERR(adm, "ACL", "SETUSER", "noscan", "on", ">pw", "~*", "&*", "+@all",
              "-scan");
    emq_conn_destroy(adm);
    char url[128];
    snprintf(url, sizeof url, "redis://noscan:pw@127.0.0.1:%d",
             emq_srv_port(s));
    emq_conf_t *conf = conf_for(url);
    emq_error err;
    memset(&err, 0, sizeof err);
    char **names = NULL;
    size_t n = 0;
    ASSERT_STATUS(emq_admin_scan_queues(conf, "*", 0, &names, &n, &err),
                  EMQ_ESERVER, &err);
    ASSERT(names == NULL);
    ASSERT_CONTAINS(err.message, "SCAN failed");
    ASSERT_EQ_STR(err.reply_code, "NOPERM");
    emq_conf_destroy(conf);
    emq_srv_stop(s);
}
