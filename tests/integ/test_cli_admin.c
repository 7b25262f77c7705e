/* SPDX-License-Identifier: BSD-3-Clause */
/* test_cli_admin.c: the inspection and operation verbs end to end against
 * a private redis-server: info (table and --json), pending, group
 * create/setid/destroy, consumers prune, dead list/requeue/purge, trim
 * --acked, and the demo with small numbers reporting 0 lost.
 */
#include "integ/cli_helpers.h"

#include <sys/stat.h>

/* Five entries on queue q; consumer c of group g reads two and acks
 * none (they stay pending). */
static void setup(emq_srv *s) {
    cli_result r;
    CLI_IN(&r, emq_srv_url(s), "a\nb\nc\nd\ne\n", "produce", "q", "--lines",
           "-q");
    ASSERT_EXIT(&r, 0);
    cli_free(&r);
    CLI(&r, emq_srv_url(s), "group", "create", "q", "--group", "g", "--start",
        "head");
    ASSERT_EXIT(&r, 0);
    ASSERT_CONTAINS(r.out, "created group 'g' on queue 'q' at head");
    cli_free(&r);
    char out[4096];
    emq_srv_cmd(s, out, sizeof out, "XREADGROUP", "GROUP", "g", "c", "COUNT",
                "2", "STREAMS", "emq:{q}", ">", NULL);
}

TEST(cli_info_and_pending) {
    emq_srv *s = emq_srv_start(NULL);
    const char *url = emq_srv_url(s);
    setup(s);
    cli_result r;
    CLI(&r, url, "info", "q");
    ASSERT_EXIT(&r, 0);
    ASSERT_CONTAINS(r.out, "stream        emq:{q}");
    ASSERT_CONTAINS(r.out, "length        5");
    ASSERT_CONTAINS(r.out, "GROUP");
    ASSERT_CONTAINS(r.out, "PENDING");
    ASSERT_CONTAINS(r.out, "CONSUMER");
    cli_free(&r);
    CLI(&r, url, "info", "q", "--json");
    ASSERT_EXIT(&r, 0);
    ASSERT(r.out[0] == '{');
    ASSERT_CONTAINS(r.out, "\"g\"");
    cli_free(&r);
    CLI(&r, url, "pending", "q", "--group", "g");
    ASSERT_EXIT(&r, 0);
    ASSERT_EQ_INT(cli_lines(r.out), 3); /* header + 2 */
    ASSERT_CONTAINS(r.out, " c ");
    ASSERT_CONTAINS(r.err, "2 pending entries");
    cli_free(&r);
    CLI(&r, url, "pending", "q", "--group", "g", "--json", "--consumer", "c");
    ASSERT_EXIT(&r, 0);
    ASSERT_EQ_INT(cli_lines(r.out), 2);
    cli_free(&r);
    CLI(&r, url, "pending", "q", "--group", "nope");
    ASSERT_EXIT(&r, 1);
    ASSERT_ONE_LINE(r.err);
    ASSERT_CONTAINS(r.err, "no group 'nope' on queue 'q'");
    cli_free(&r);
    emq_srv_stop(s);
}

/* info says when the server's maxmemory-policy can evict the queue's
 * keys (the lease keys first, under volatile-*), and not otherwise. */
TEST(cli_info_warns_of_an_evicting_maxmemory_policy) {
    emq_srv *s = emq_srv_start(NULL);
    const char *url = emq_srv_url(s);
    setup(s);
    cli_result r;
    CLI(&r, url, "info", "q");
    ASSERT_EXIT(&r, 0);
    ASSERT_NOT_CONTAINS(r.err, "maxmemory-policy");
    cli_free(&r);
    char out[64];
    ASSERT(emq_srv_cmd(s, out, sizeof out, "CONFIG", "SET", "maxmemory-policy",
                       "volatile-lru", NULL) == '+');
    CLI(&r, url, "info", "q");
    ASSERT_EXIT(&r, 0);
    ASSERT_CONTAINS(r.err, "warning: maxmemory-policy is volatile-lru");
    ASSERT_CONTAINS(r.err, "lease keys");
    ASSERT_CONTAINS(r.out, "stream        emq:{q}");
    cli_free(&r);
    CLI(&r, url, "info", "q", "--json");
    ASSERT_EXIT(&r, 0);
    ASSERT_CONTAINS(r.out, "\"maxmemory_policy\":\"volatile-lru\"");
    ASSERT_CONTAINS(r.out, "\"eviction_warning\":\"the server's");
    cli_free(&r);
    ASSERT(emq_srv_cmd(s, out, sizeof out, "CONFIG", "SET", "maxmemory-policy",
                       "allkeys-lru", NULL) == '+');
    CLI(&r, url, "info", "q");
    ASSERT_EXIT(&r, 0);
    ASSERT_CONTAINS(r.err, "may evict any key");
    cli_free(&r);
    ASSERT(emq_eviction_warning("noeviction") == NULL);
    ASSERT(emq_eviction_warning(NULL) == NULL);
    emq_srv_stop(s);
}

TEST(cli_group_verbs) {
    emq_srv *s = emq_srv_start(NULL);
    const char *url = emq_srv_url(s);
    setup(s);
    cli_result r;
    CLI(&r, url, "group", "create", "q", "--group", "g", "--start", "new");
    ASSERT_EXIT(&r, 0);
    ASSERT_CONTAINS(r.out, "exists already");
    cli_free(&r);
    /* A move that replays or skips entries says how many, and is made
     * only with --yes: 2 of the 5 were delivered, the cursor is on the
     * 2nd. */
    char before[256], after[256];
    emq_srv_cmd(s, before, sizeof before, "XINFO", "GROUPS", "emq:{q}", NULL);
    CLI(&r, url, "group", "setid", "q", "--group", "g", "--to", "head");
    ASSERT_EXIT(&r, 2);
    ASSERT_ONE_LINE(r.err);
    ASSERT_CONTAINS(r.err, "would replay 2 entries behind its cursor");
    ASSERT_CONTAINS(r.err, "nothing was moved: add --yes");
    cli_free(&r);
    emq_srv_cmd(s, after, sizeof after, "XINFO", "GROUPS", "emq:{q}", NULL);
    ASSERT_EQ_STR(after, before);
    CLI(&r, url, "group", "setid", "q", "--group", "g", "--to", "head",
        "--yes");
    ASSERT_EXIT(&r, 0);
    ASSERT_CONTAINS(r.out, "moved to head: 5 stored entries will be "
                           "delivered again");
    cli_free(&r);
    CLI(&r, url, "group", "setid", "q", "--group", "g", "--to", "tail");
    ASSERT_EXIT(&r, 2);
    ASSERT_CONTAINS(r.err, "would skip 5 entries never delivered to it");
    cli_free(&r);
    CLI(&r, url, "group", "setid", "q", "--group", "g", "--to", "tail",
        "--yes");
    ASSERT_EXIT(&r, 0);
    ASSERT_CONTAINS(r.out, "skipped 5 entries never delivered; 0 stored");
    cli_free(&r);
    /* Nothing to skip or replay: no --yes needed. */
    CLI(&r, url, "group", "setid", "q", "--group", "g", "--to", "tail");
    ASSERT_EXIT(&r, 0);
    ASSERT_CONTAINS(r.out, "moved to tail: 0 stored entries");
    cli_free(&r);
    CLI(&r, url, "group", "setid", "q", "--group", "x", "--to", "head");
    ASSERT_EXIT(&r, 1);
    ASSERT_ONE_LINE(r.err);
    cli_free(&r);
    CLI(&r, url, "group", "destroy", "q", "--group", "g");
    ASSERT_EXIT(&r, 2);
    ASSERT_CONTAINS(r.err, "add --yes");
    cli_free(&r);
    CLI(&r, url, "group", "destroy", "q", "--group", "g", "--yes");
    ASSERT_EXIT(&r, 0);
    ASSERT_CONTAINS(r.out, "destroyed group 'g'");
    cli_free(&r);
    CLI(&r, url, "group", "destroy", "q", "--group", "g", "--yes");
    ASSERT_EXIT(&r, 1);
    ASSERT_CONTAINS(r.err, "no group 'g'");
    cli_free(&r);
    emq_srv_stop(s);
}

TEST(cli_consumers_prune_and_trim) {
    emq_srv *s = emq_srv_start(NULL);
    const char *url = emq_srv_url(s);
    setup(s);
    cli_result r;
    CLI(&r, url, "consumers", "prune", "q", "--group", "g", "--idle", "0");
    ASSERT_EXIT(&r, 0);
    ASSERT_CONTAINS(r.out, "removed 0 consumers");
    ASSERT_CONTAINS(r.out, "1 idle consumer kept");
    cli_free(&r);
    CLI(&r, url, "trim", "q", "--acked");
    ASSERT_EXIT(&r, 0);
    ASSERT_CONTAINS(r.out, "removed 0 entries");
    cli_free(&r);
    /* Consume everything (c's two come back first), then trim. */
    CLI(&r, url, "consume", "q", "-g", "g", "-c", "c", "--start", "head",
        "--until-idle", "300", "-q");
    ASSERT_EXIT(&r, 0);
    ASSERT_EQ_INT(cli_lines(r.out), 5);
    cli_free(&r);
    CLI(&r, url, "trim", "q", "--acked", "--maxlen", "1");
    ASSERT_EXIT(&r, 0);
    ASSERT_CONTAINS(r.out, "removed 4 entries");
    cli_free(&r);
    ASSERT_EQ_INT(srv_int(s, "XLEN", "emq:{q}"), 1);
    emq_srv_stop(s);
}

TEST(cli_dead_letters) {
    emq_srv *s = emq_srv_start(NULL);
    const char *url = emq_srv_url(s);
    cli_result r;
    CLI(&r, url, "produce", "q", "job=7", "-q");
    cli_free(&r);
    CLI(&r, url, "consume", "q", "-g", "g", "-c", "w", "--start", "head",
        "--max-deliveries", "1", "--until-idle", "300", "-q", "--exec",
        "exit 9");
    ASSERT_EXIT(&r, 0);
    cli_free(&r);
    CLI(&r, url, "dead", "list", "q");
    ASSERT_EXIT(&r, 0);
    ASSERT_CONTAINS(r.out, "exit 9");
    ASSERT_CONTAINS(r.out, "{\"job\":\"7\"}");
    ASSERT_CONTAINS(r.err, "1 dead letter");
    cli_free(&r);
    CLI(&r, url, "dead", "list", "q", "--json");
    ASSERT_EXIT(&r, 0);
    ASSERT_EQ_INT(cli_lines(r.out), 1);
    ASSERT_CONTAINS(r.out, "exit 9");
    cli_free(&r);
    CLI(&r, url, "dead", "requeue", "q", "--all");
    ASSERT_EXIT(&r, 0);
    ASSERT_CONTAINS(r.out, "requeued 1 dead letter onto queue 'q'");
    cli_free(&r);
    ASSERT_EQ_INT(srv_int(s, "XLEN", "emq:{q}:dead"), 0);
    ASSERT_EQ_INT(srv_int(s, "XLEN", "emq:{q}"), 2);
    CLI(&r, url, "consume", "q", "-g", "g", "-c", "w", "--start", "head",
        "--max-deliveries", "1", "--until-idle", "300", "-q", "--exec",
        "exit 9");
    cli_free(&r);
    CLI(&r, url, "dead", "purge", "q", "--yes");
    ASSERT_EXIT(&r, 0);
    ASSERT_CONTAINS(r.out, "purged 1 dead letter");
    cli_free(&r);
    emq_srv_stop(s);
}

TEST_TIMEOUT(cli_demo_reports_nothing_lost, 90) {
    cli_result r;
    /* A TMPDIR with a space in it (redis.conf splits on spaces: the demo
     * quotes its paths). */
    char tmp[600];
    snprintf(tmp, sizeof tmp, "%s/with space", emq_test_tmpdir());
    ASSERT(mkdir(tmp, 0700) == 0);
    setenv("TMPDIR", tmp, 1);
    cli_run_in(&r, NULL, NULL, 0, 80000,
               CLI_ARGS("demo", "--jobs", "3000", "--workers", "3", "--poison",
                        "2", "--work-us", "400", "--claim-idle", "300"));
    ASSERT_EXIT(&r, 0);
    ASSERT_CONTAINS(r.out, "killed demo-2 with SIGKILL");
    ASSERT_CONTAINS(r.out, "== recovered:");
    ASSERT_CONTAINS(r.out, "produced                                 3000");
    ASSERT_CONTAINS(r.out, "dead-lettered (poison jobs)                 2");
    ASSERT_CONTAINS(r.out, "lost                                        0");
    ASSERT_CONTAINS(r.out, "nothing lost");
    cli_free(&r);
    /* It cleaned up: no demo folder is left. */
    char cmd[700];
    snprintf(cmd, sizeof cmd, "ls -d '%s'/echomq-demo.* 2>/dev/null", tmp);
    FILE *p = popen(cmd, "r");
    char line[256] = "";
    ASSERT(p != NULL);
    if (fgets(line, sizeof line, p) == NULL)
        line[0] = '\0';
    pclose(p);
    ASSERT_EQ_STR(line, "");
}

/* --sentinel: a primary, two replicas and three Sentinels on loopback;
 * the jobs are confirmed by a replica, the Sentinels fail the primary
 * over half-way, the workers follow, and nothing is lost (duplicates are
 * the work done on the old primary after the promotion). */
TEST_TIMEOUT(cli_demo_sentinel_fails_over_and_loses_nothing, 150) {
    cli_result r;
    cli_run_in(&r, NULL, NULL, 0, 140000,
               CLI_ARGS("demo", "--sentinel", "--jobs", "3000", "--workers",
                        "2", "--poison", "2", "--work-us", "400"));
    ASSERT_EXIT(&r, 0);
    ASSERT_CONTAINS(r.out, "three Sentinels");
    ASSERT_CONTAINS(r.out, "SENTINEL FAILOVER while the workers run");
    ASSERT_CONTAINS(r.out, "== failover: the Sentinels moved the primary");
    ASSERT_CONTAINS(r.out, "produced                                 3000");
    ASSERT_CONTAINS(r.out, "dead-lettered (poison jobs)                 2");
    ASSERT_CONTAINS(r.out, "lost                                        0");
    ASSERT_CONTAINS(r.out, "nothing lost");
    cli_free(&r);
}
