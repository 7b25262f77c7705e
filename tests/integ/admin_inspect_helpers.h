/* SPDX-License-Identifier: BSD-3-Clause */
/* admin_inspect_helpers.h: helpers for the inspection and replay tests
 * (test_admin_inspect.c, test_admin_replay.c).
 *
 * On top of tally_helpers.h (INFO numbers) and inspect_conn_helpers.h (a raw
 * library connection for setup and structured inspection): an admin handle
 * on the fixture server in RESP2 or RESP3, entries with explicit IDs, a
 * group read that reports what it was handed, a lookup of a group in a
 * description, and a JSON check run by python3 (skipped when it is not
 * installed).
 */
#ifndef EMQ_TEST_ADMIN_INSPECT_HELPERS_H
#define EMQ_TEST_ADMIN_INSPECT_HELPERS_H

#include "integ/tally_helpers.h"
#include "integ/inspect_conn_helpers.h"

#include <sys/wait.h>

/* An admin handle on queue, speaking RESP protocol ("2" or "3"). */
static inline emq_admin_t *admin_open(const emq_srv *s, const char *queue,
                                      const char *protocol) {
    emq_conf_t *conf = conf_for(emq_srv_url(s));
    conf_set(conf, "queue", queue);
    conf_set(conf, "protocol", protocol);
    emq_admin_t *a = NULL;
    emq_error err;
    memset(&err, 0, sizeof err);
    ASSERT_OK(emq_admin_new(conf, &a, &err), &err);
    emq_conf_destroy(conf);
    ASSERT(a != NULL);
    return a;
}

/* XADD stream <ms>-0 n <ms> for ms = first..last. */
static inline void add_ids(emq_conn_t *conn, const char *stream, unsigned first,
                           unsigned last) {
    for (unsigned ms = first; ms <= last; ms++) {
        char id[32], v[16];
        snprintf(id, sizeof id, "%u-0", ms);
        snprintf(v, sizeof v, "%u", ms);
        CMD_NOERR(conn, "XADD", stream, id, "n", v);
    }
}

/* XREADGROUP GROUP group consumer COUNT count STREAMS stream <from>
 * ("> " for new entries, an ID for history); returns how many entries came
 * and copies the first and last IDs (may be NULL). Acks them when ack. */
static inline size_t group_read(emq_conn_t *conn, const char *stream,
                                const char *group, const char *consumer,
                                const char *count, const char *from, int ack,
                                char *first, char *last) {
    emq_reply *r = CMD(conn, "XREADGROUP", "GROUP", group, consumer, "COUNT",
                       count, "STREAMS", stream, from);
    if (first)
        first[0] = '\0';
    if (last)
        last[0] = '\0';
    if (emq_reply_kind(r) == EMQ_REPLY_NULL) {
        emq_reply_free(r);
        return 0;
    }
    if (emq_reply_kind(r) != EMQ_REPLY_ARRAY) {
        char t[200];
        reply_text(r, t, sizeof t);
        emq_reply_free(r);
        FAIL("XREADGROUP: %s", t);
    }
    const emq_reply *entries = emq_reply_at(emq_reply_at(r, 0), 1);
    size_t n = emq_reply_len(entries);
    for (size_t i = 0; i < n; i++) {
        char id[EMQ_ID_MAX];
        reply_text(emq_reply_at(emq_reply_at(entries, i), 0), id, sizeof id);
        if (i == 0 && first)
            strcpy(first, id);
        if (i + 1 == n && last)
            strcpy(last, id);
        if (ack)
            ASSERT_EQ_INT(CMD_INT(conn, "XACK", stream, group, id), 1);
    }
    emq_reply_free(r);
    return n;
}

/* The group called name in info; fails the test when it is absent. */
static inline const emq_group_info *group_named(const emq_queue_info *info,
                                                const char *name) {
    for (size_t i = 0; i < info->ngroups; i++)
        if (strcmp(info->groups[i].name, name) == 0)
            return &info->groups[i];
    FAIL("group %s not in the description (%zu groups)", name, info->ngroups);
}

/* The consumer called name in g; fails the test when it is absent. */
static inline const emq_consumer_info *consumer_named(const emq_group_info *g,
                                                      const char *name) {
    for (size_t i = 0; i < g->nconsumers; i++)
        if (strcmp(g->consumers[i].name, name) == 0)
            return &g->consumers[i];
    FAIL("consumer %s not in group %s", name, g->name);
}

/* Feeds text to python3 running script (which reads stdin) and fails the
 * test unless it exits 0. Skips when python3 is missing. */
static inline void python_check(const char *text, const char *script) {
    if (system("python3 -c 'pass' >/dev/null 2>&1") != 0)
        SKIP("python3 is not installed");
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "python3 -c '%s'", script);
    FILE *p = popen(cmd, "w");
    ASSERT(p != NULL);
    fputs(text, p);
    int status = pclose(p);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        FAIL("python3 rejected the JSON (%s): %s", script, text);
}

/* total_commands_processed; each call adds one (the INFO itself). */
static inline long long commands_total(const emq_srv *s) {
    return info_number(s, "stats", "total_commands_processed");
}

#endif /* EMQ_TEST_ADMIN_INSPECT_HELPERS_H */
