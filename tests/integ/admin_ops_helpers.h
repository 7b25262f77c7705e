/* admin_ops_helpers.h: helpers for the tests of consumer removal,
 * retention and dead letters (test_admin_prune.c, test_admin_retention.c,
 * test_admin_dead.c).
 *
 * On top of ctests1_helpers.h (producer_for, wait_pending_zero) and
 * ctests2_helpers.h (admin connection, CMD/CMD_INT, pending
 * inspection, recording consumers): an admin handle on a queue of the
 * fixture server, reading a consumer into existence with a given number of
 * entries pending, and the names of a consumer group's members. Setup and
 * inspection go through a plain connection, never through the verbs under
 * test.
 */
#ifndef EMQ_TEST_ADMIN_OPS_HELPERS_H
#define EMQ_TEST_ADMIN_OPS_HELPERS_H

#include "integ/ctests1_helpers.h"
#include "integ/ctests2_helpers.h"

/* An admin handle on queue; caller destroys. */
static inline emq_admin_t *admin_open(const emq_srv *s, const char *queue) {
    emq_conf_t *conf = conf_for(emq_srv_url(s));
    conf_set(conf, "queue", queue);
    conf_set(conf, P_COMMAND_TIMEOUT, "20000");
    emq_admin_t *a = NULL;
    emq_error err;
    memset(&err, 0, sizeof err);
    ASSERT_OK(emq_admin_new(conf, &a, &err), &err);
    emq_conf_destroy(conf);
    return a;
}

/* Consumer reads count new entries of stream for group (XREADGROUP >),
 * leaving them pending; returns how many it got. */
static inline long long read_new(emq_conn_t *adm, const char *stream,
                                 const char *group, const char *consumer,
                                 int count) {
    char n[16];
    snprintf(n, sizeof n, "%d", count);
    emq_reply *r = CMD(adm, "XREADGROUP", "GROUP", group, consumer, "COUNT",
                       n, "STREAMS", stream, ">");
    long long got = 0;
    if (emq_reply_kind(r) == EMQ_REPLY_ARRAY && emq_reply_len(r) == 1)
        got = (long long)emq_reply_len(
            emq_reply_at(emq_reply_at(r, 0), 1));
    emq_reply_free(r);
    return got;
}

/* Number of consumers of group (XINFO GROUPS), -1 when no such group. */
static inline long long consumer_count(emq_conn_t *adm, const char *stream,
                                       const char *group) {
    emq_reply *r = CMD(adm, "XINFO", "GROUPS", stream);
    long long n = -1;
    for (size_t i = 0; i < emq_reply_len(r); i++) {
        const emq_reply *g = emq_reply_at(r, i);
        char name[256], consumers[32];
        if (field_of(g, "name", name, sizeof name) &&
            strcmp(name, group) == 0) {
            /* consumers is an integer: field_of reads strings only */
            for (size_t k = 0; k + 1 < emq_reply_len(g); k += 2) {
                reply_text(emq_reply_at(g, k), consumers, sizeof consumers);
                if (strcmp(consumers, "consumers") == 0)
                    n = emq_reply_integer(emq_reply_at(g, k + 1));
            }
        }
    }
    emq_reply_free(r);
    return n;
}

/* 1 when group has a consumer called name (XINFO CONSUMERS). */
static inline int has_consumer(emq_conn_t *adm, const char *stream,
                               const char *group, const char *name) {
    emq_reply *r = CMD(adm, "XINFO", "CONSUMERS", stream, group);
    int found = 0;
    for (size_t i = 0; i < emq_reply_len(r); i++) {
        char got[256];
        if (field_of(emq_reply_at(r, i), "name", got, sizeof got) &&
            strcmp(got, name) == 0)
            found = 1;
    }
    emq_reply_free(r);
    return found;
}

#endif /* EMQ_TEST_ADMIN_OPS_HELPERS_H */
