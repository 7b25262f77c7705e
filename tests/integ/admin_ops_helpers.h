/* SPDX-License-Identifier: BSD-3-Clause */
/* admin_ops_helpers.h: helpers for the tests of consumer removal,
 * retention and dead letters (test_admin_prune.c, test_admin_retention.c,
 * test_admin_dead.c).
 *
 * On top of admin_inspect_helpers.h (admin handles, group reads), itself on top
 * of tally_helpers.h and inspect_conn_helpers.h (a raw connection for setup
 * and inspection, recording consumers): taking entries into a consumer's
 * pending list, and whether a group has a consumer of a given name, asked
 * of the server directly rather than through the verbs under test.
 */
#ifndef EMQ_TEST_ADMIN_OPS_HELPERS_H
#define EMQ_TEST_ADMIN_OPS_HELPERS_H

#include "integ/admin_inspect_helpers.h"

/* consumer takes up to count new entries of group and leaves them pending
 * (group_read with ">", no ack); returns how many came. */
static inline long long take_new(emq_conn_t *adm, const char *stream,
                                 const char *group, const char *consumer,
                                 const char *count) {
    return (long long)group_read(adm, stream, group, consumer, count, ">", 0,
                                 NULL, NULL);
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
