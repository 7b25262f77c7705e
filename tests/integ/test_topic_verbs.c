/* SPDX-License-Identifier: BSD-3-Clause */
/* test_topic_verbs.c: every admin verb on a topic, found in the server
 * without --partitions, per partition and in total, against a private
 * redis-server and a real 3-master Redis Cluster (through a node that
 * serves none of the partitions' slots it is asked about first).
 *
 * The scenario makes dead letters the real way (a command that fails,
 * --max-deliveries 1), lists them with their partitions, requeues one by
 * partition and ID, some by filter and the rest with --all, leaves the
 * requeued entries pending, then trims, lists pending, prunes, moves the
 * group (and refuses to move it when one partition lacks it, moving
 * none), and tails the topic. */
#include "cluster/cluster.h" /* emq__cluster_key_slot */
#include "harness/cluster.h"
#include "integ/cli_helpers.h"

#include <stdlib.h>

/* Where the scenario reads raw lengths: one server, or a cluster (each
 * key asked of its slot's master). */
typedef struct where {
    emq_srv *one;
    emq_cl *cl;
} where;

static long long len_of(where *w, const char *key) {
    emq_srv *s = w->one;
    if (s == NULL) {
        int owner =
            emq_cl_owner(w->cl, 0, emq__cluster_key_slot(key, strlen(key)));
        ASSERT(owner >= 0);
        s = emq_cl_node(w->cl, owner);
    }
    return srv_int(s, "XLEN", key);
}

/* The sum of XLEN over the 3 partitions' keys "emq:{orders.i}<suffix>". */
static long long total_len(where *w, const char *suffix) {
    long long n = 0;
    for (int i = 0; i < 3; i++) {
        char key[64];
        snprintf(key, sizeof key, "emq:{orders.%d}%s", i, suffix);
        n += len_of(w, key);
    }
    return n;
}

/* Copies the line at *at (without its newline, cut to size) into buf
 * and moves *at past it; 0 at the end of the text. */
static int next_line(const char **at, char *buf, size_t size) {
    if (**at == '\0')
        return 0;
    size_t len = strcspn(*at, "\n");
    snprintf(buf, size, "%.*s", (int)(len < size ? len : size - 1), *at);
    *at += len + ((*at)[len] == '\n');
    return 1;
}

/* Lines of text that contain needle. */
static int lines_with(const char *text, const char *needle) {
    int n = 0;
    char buf[4096];
    for (const char *at = text; next_line(&at, buf, sizeof buf);)
        n += strstr(buf, needle) != NULL;
    return n;
}

/* The ID of the first JSON line with "partition":p, into id. */
static void first_id_of(const char *json, int p, char *id, size_t size) {
    char want[32], buf[4096];
    snprintf(want, sizeof want, "\"partition\":%d", p);
    for (const char *at = json; next_line(&at, buf, sizeof buf);)
        if (strstr(buf, want) && strncmp(buf, "{\"id\":\"", 7) == 0) {
            snprintf(id, size, "%.*s", (int)strcspn(buf + 7, "\""), buf + 7);
            return;
        }
    FAIL("no line of partition %d in:\n%s", p, json);
}

static void topic_scenario(const char *url, where *w) {
    cli_result r;
    CLI(&r, url, "topic", "create", "orders", "--partitions", "3");
    ASSERT_EXIT(&r, 0);
    cli_free(&r);
    CLI_IN(&r, url, "a\nb\nc\nd\ne\nf\ng\nh\ni\n", "produce", "orders",
           "--lines");
    ASSERT_EXIT(&r, 0);
    cli_free(&r);
    ASSERT_EQ_INT(total_len(w, ""), 9);
    /* Nine dead letters, three in each partition. */
    CLI(&r, url, "consume", "orders", "-g", "g", "-c", "c", "-s", "head",
        "--exec", "exit 3", "--max-deliveries", "1", "--until-idle", "600",
        "-q");
    ASSERT_EXIT(&r, 0);
    cli_free(&r);
    ASSERT_EQ_INT(total_len(w, ":dead"), 9);

    /* dead list: a PARTITION column, every partition, the total. */
    CLI(&r, url, "dead", "list", "orders");
    ASSERT_EXIT(&r, 0);
    ASSERT(strncmp(r.out, "PARTITION", 9) == 0);
    ASSERT_EQ_INT(cli_lines(r.out), 10);
    for (int p = 0; p < 3; p++) {
        char col[16];
        snprintf(col, sizeof col, "\n%9d  ", p);
        ASSERT_CONTAINS(r.out, col);
    }
    ASSERT_CONTAINS(r.err, "9 dead letters in all partitions");
    cli_free(&r);
    CLI(&r, url, "dead", "list", "orders", "--json");
    ASSERT_EXIT(&r, 0);
    ASSERT_EQ_INT(cli_lines(r.out), 9);
    ASSERT_EQ_INT(lines_with(r.out, "\"partition\":"), 9);
    ASSERT_EQ_INT(lines_with(r.out, "\"reason\":\"exit 3\""), 9);
    char id1[64];
    first_id_of(r.out, 1, id1, sizeof id1);
    cli_free(&r);

    /* By ID: IDs repeat across partitions, so the partition is named. */
    CLI(&r, url, "dead", "requeue", "orders", id1);
    ASSERT_EXIT(&r, 2);
    ASSERT_CONTAINS(r.err, "--partition");
    cli_free(&r);
    CLI(&r, url, "dead", "requeue", "orders", "-p", "3", id1);
    ASSERT_EXIT(&r, 2); /* partitions are 0..2 */
    cli_free(&r);
    CLI(&r, url, "dead", "requeue", "orders", "--partition", "1", id1);
    ASSERT_EXIT(&r, 0);
    ASSERT_CONTAINS(
        r.out, "requeued 1 dead letter onto topic 'orders' (3 partitions)");
    cli_free(&r);
    ASSERT_EQ_INT(len_of(w, "emq:{orders.1}:dead"), 2);
    ASSERT_EQ_INT(len_of(w, "emq:{orders.1}"), 4);
    /* By filter, then the rest. */
    CLI(&r, url, "dead", "requeue", "orders", "--reason", "exit 3", "--limit",
        "2");
    ASSERT_EXIT(&r, 0);
    ASSERT_CONTAINS(r.out, "requeued 2 dead letters onto topic 'orders'");
    cli_free(&r);
    ASSERT_EQ_INT(total_len(w, ":dead"), 6);
    CLI(&r, url, "dead", "requeue", "orders", "--all");
    ASSERT_EXIT(&r, 0);
    ASSERT_CONTAINS(r.out, "requeued 6 dead letters");
    cli_free(&r);
    ASSERT_EQ_INT(total_len(w, ":dead"), 0);
    ASSERT_EQ_INT(total_len(w, ""), 18);

    /* The requeued nine, delivered and left pending to c2. */
    CLI(&r, url, "consume", "orders", "-g", "g", "-c", "c2", "-s", "head",
        "--no-ack", "--limit", "9", "-q");
    ASSERT_EXIT(&r, 0);
    ASSERT_EQ_INT(cli_lines(r.out), 9);
    cli_free(&r);

    /* trim --acked: the acknowledged nine go, the pending nine stay. */
    CLI(&r, url, "trim", "orders", "--acked");
    ASSERT_EXIT(&r, 0);
    ASSERT_EQ_INT(lines_with(r.out, "partition "), 3);
    ASSERT_CONTAINS(r.out, "removed 9 entries from topic 'orders' (3 "
                           "partitions)");
    cli_free(&r);
    ASSERT_EQ_INT(total_len(w, ""), 9);

    /* pending: all partitions' entries, oldest first, partition named. */
    CLI(&r, url, "pending", "orders", "--group", "g");
    ASSERT_EXIT(&r, 0);
    ASSERT_EQ_INT(cli_lines(r.out), 10);
    ASSERT(strncmp(r.out, "PARTITION", 9) == 0);
    ASSERT_EQ_INT(lines_with(r.out, "c2"), 9);
    cli_free(&r);
    CLI(&r, url, "pending", "orders", "--group", "g", "--json");
    ASSERT_EXIT(&r, 0);
    ASSERT_EQ_INT(lines_with(r.out, "\"partition\":"), 9);
    cli_free(&r);

    /* prune: c (nothing pending) goes from every partition, c2 stays. */
    CLI(&r, url, "consumers", "prune", "orders", "--group", "g", "--idle", "0");
    ASSERT_EXIT(&r, 0);
    ASSERT_EQ_INT(lines_with(r.out, "partition "), 3);
    ASSERT_CONTAINS(r.out, "removed 3 consumers");
    ASSERT_CONTAINS(r.out, "3 idle consumers kept");
    ASSERT_CONTAINS(r.out, "(all partitions)");
    cli_free(&r);

    /* setid on every partition, the sum of what comes again; what it
     * replays is said first, and needs --yes. */
    CLI(&r, url, "group", "setid", "orders", "--group", "g", "--to", "head");
    ASSERT_EXIT(&r, 2);
    ASSERT_CONTAINS(r.err, "would replay 9 entries");
    cli_free(&r);
    CLI(&r, url, "group", "setid", "orders", "--group", "g", "--to", "head",
        "--yes");
    ASSERT_EXIT(&r, 0);
    ASSERT_CONTAINS(r.out, "group 'g' of topic 'orders' (3 partitions) "
                           "moved to head: 9 stored entries");
    cli_free(&r);
    /* One partition without the group: no partition moves. */
    CLI(&r, url, "group", "destroy", "orders.2", "--group", "g", "--yes");
    ASSERT_EXIT(&r, 0);
    cli_free(&r);
    CLI(&r, url, "group", "setid", "orders", "--group", "g", "--to", "tail");
    ASSERT_EXIT(&r, 1);
    ASSERT_CONTAINS(r.err, "partition 2");
    ASSERT_CONTAINS(r.err, "no partition was moved");
    cli_free(&r);
    CLI(&r, url, "info", "orders.0", "--json");
    ASSERT_EXIT(&r, 0);
    ASSERT_CONTAINS(r.out, "\"lag\":3");
    cli_free(&r);

    /* tail: the newest entries of all partitions, oldest first. */
    CLI(&r, url, "tail", "orders", "-n", "5");
    ASSERT_EXIT(&r, 0);
    ASSERT_EQ_INT(cli_lines(r.out), 5);
    ASSERT_EQ_INT(lines_with(r.out, "\"partition\":"), 5);
    cli_free(&r);
    CLI(&r, url, "tail", "orders", "-n", "100", "--format", "%p %i");
    ASSERT_EXIT(&r, 0);
    ASSERT_EQ_INT(cli_lines(r.out), 9);
    unsigned long long prev = 0;
    int seen[3] = {0, 0, 0};
    for (char *line = strtok(r.out, "\n"); line; line = strtok(NULL, "\n")) {
        int p = atoi(line);
        ASSERT(p >= 0 && p < 3);
        seen[p]++;
        unsigned long long ms = strtoull(strchr(line, ' ') + 1, NULL, 10);
        ASSERT(ms >= prev); /* ordered by ID time across partitions */
        prev = ms;
    }
    ASSERT_EQ_INT(seen[0] + seen[1] + seen[2], 9);
    ASSERT(seen[0] > 0 && seen[1] > 0 && seen[2] > 0);
    cli_free(&r);
    /* A queue takes no --partition. */
    CLI(&r, url, "dead", "requeue", "orders.0", "-p", "0", "1-0");
    ASSERT_EXIT(&r, 2);
    ASSERT_CONTAINS(r.err, "is a queue");
    cli_free(&r);
}

TEST_TIMEOUT(cli_every_verb_on_a_topic, 90) {
    emq_srv *s = emq_srv_start(NULL);
    where w = {s, NULL};
    topic_scenario(emq_srv_url(s), &w);
    emq_srv_stop(s);
}

TEST_TIMEOUT(cluster_every_verb_on_a_topic, 120) {
    emq_cl *c = emq_cl_start(3, 0);
    /* Through a master that does not serve partition 0. */
    unsigned slot = emq__cluster_key_slot("emq:{orders.0}", 14);
    int wrong = emq_cl_other_master(c, emq_cl_owner(c, 0, slot));
    where w = {NULL, c};
    topic_scenario(emq_srv_url(emq_cl_node(c, wrong)), &w);
    emq_cl_stop(c);
}

/* The library's topic handle: summed verbs, merged lists carrying their
 * partition, calls naming IDs refused with the way to name a partition. */
TEST_TIMEOUT(admin_topic_handle_verbs, 60) {
    emq_srv *s = emq_srv_start(NULL);
    emq_conf_t *conf = emq_conf_new();
    emq_error err;
    ASSERT_OK(emq_conf_set(conf, "url", emq_srv_url(s), &err), &err);
    ASSERT_OK(emq_conf_set(conf, "queue", "t", &err), &err);
    ASSERT_OK(emq_conf_set(conf, "partitions", "4", &err), &err);
    emq_producer_t *p;
    ASSERT_OK(emq_producer_new(conf, &p, &err), &err);
    emq_field f = {"v", 1, "x", 1};
    for (int i = 0; i < 8; i++) /* two per partition, in turn */
        ASSERT_OK(emq_produce(p, &f, 1, NULL, &err), &err);
    emq_producer_destroy(p);
    emq_admin_t *a;
    ASSERT_OK(emq_admin_new(conf, &a, &err), &err);
    ASSERT_EQ_INT(emq_admin_partition_count(a), 4);
    ASSERT(emq_admin_partition(a, 4) == NULL);
    ASSERT(emq_admin_partition(a, -1) == NULL);
    emq_admin_t *p3 = emq_admin_partition(a, 3);
    ASSERT(p3 != NULL && emq_admin_partition_count(p3) == 0);
    int created = 0;
    ASSERT_OK(emq_admin_group_create(a, "g", "head", &created, &err), &err);
    ASSERT_EQ_INT(created, 1);
    /* Read everything through each partition's handle, no ack. */
    for (int i = 0; i < 4; i++) {
        char key[32];
        snprintf(key, sizeof key, "emq:{t.%d}", i);
        const char *argv[] = {"XREADGROUP", "GROUP",   "g", "w", "COUNT",
                              "10",         "STREAMS", key, ">"};
        emq_reply *r;
        ASSERT_OK(emq_admin_command(emq_admin_partition(a, i), 9, argv, NULL,
                                    &r, &err),
                  &err);
        ASSERT(emq_reply_kind(r) != EMQ_REPLY_ERROR);
        emq_reply_free(r);
    }
    const char *ping[] = {"PING"};
    emq_reply *r = NULL;
    ASSERT_STATUS(emq_admin_command(a, 1, ping, NULL, &r, &err), EMQ_EINVAL,
                  &err);
    ASSERT_CONTAINS(err.message, "emq_admin_partition");
    emq_pending_entry *e = NULL;
    size_t n = 0;
    ASSERT_OK(emq_admin_pending(a, "g", NULL, 0, 1000, &e, &n, &err), &err);
    ASSERT_EQ_INT(n, 8);
    int per[4] = {0, 0, 0, 0};
    for (size_t i = 0; i < n; i++) {
        ASSERT(e[i].partition >= 0 && e[i].partition < 4);
        per[e[i].partition]++;
        if (i > 0) /* oldest first across partitions */
            ASSERT(strtoull(e[i - 1].id.str, NULL, 10) <=
                   strtoull(e[i].id.str, NULL, 10));
    }
    for (int i = 0; i < 4; i++)
        ASSERT_EQ_INT(per[i], 2);
    char json[4096];
    emq_pending_json(e, 1, json, sizeof json);
    ASSERT_CONTAINS(json, "\"partition\":");
    emq_free_array(e);
    /* max bounds the merged list, not each partition's. */
    ASSERT_OK(emq_admin_pending(a, "g", NULL, 0, 3, &e, &n, &err), &err);
    ASSERT_EQ_INT(n, 3);
    emq_free_array(e);
    /* A queue's entries say partition -1 and no "partition" in JSON. */
    ASSERT_OK(emq_admin_pending(p3, "g", NULL, 0, 10, &e, &n, &err), &err);
    ASSERT_EQ_INT(n, 2);
    ASSERT_EQ_INT(e[0].partition, -1);
    emq_pending_json(e, 1, json, sizeof json);
    ASSERT_NOT_CONTAINS(json, "partition");
    emq_free_array(e);
    /* setid sums; prune and trim sum over partitions. */
    uint64_t again = 0, skipped = 9, replayed = 0;
    ASSERT_OK(
        emq_admin_group_setid_effect(a, "g", "head", &skipped, &replayed, &err),
        &err);
    ASSERT_EQ_INT(skipped, 0);
    uint64_t effect = replayed; /* what was delivered, over the partitions */
    ASSERT_OK(emq_admin_group_setid(a, "g", "head", &again, &err), &err);
    ASSERT_EQ_INT(again, 8);
    /* After head, tail skips every stored entry of every partition. */
    ASSERT_OK(
        emq_admin_group_setid_effect(a, "g", "tail", &skipped, &replayed, &err),
        &err);
    ASSERT_EQ_INT(skipped, 8);
    ASSERT_EQ_INT(replayed, 0);
    ASSERT_EQ_INT(effect, 8); /* all 8 were delivered */
    emq_prune_result pr;
    ASSERT_OK(emq_admin_prune_consumers(a, "g", 0, &pr, &err), &err);
    ASSERT_EQ_INT(pr.kept, 4); /* w holds entries in each, nobody to take */
    emq_trim_result tr;
    ASSERT_OK(emq_admin_trim_acked(a, -1, -1, &tr, &err), &err);
    ASSERT_EQ_INT(tr.removed, 0);
    ASSERT_EQ_INT(tr.no_groups, 0);
    ASSERT_EQ_STR(tr.floor.str, "");
    /* Calls naming IDs need the partition's handle. */
    const char *ids[] = {"1-0"};
    uint64_t moved = 0;
    ASSERT_STATUS(emq_admin_dead_requeue(a, ids, 1, &moved, &err), EMQ_EINVAL,
                  &err);
    ASSERT_CONTAINS(err.message, "emq_admin_partition");
    emq_dead_letter *l = NULL;
    ASSERT_STATUS(emq_admin_dead_list_after(a, "1-0", 10, &l, &n, &err),
                  EMQ_EINVAL, &err);
    ASSERT_OK(emq_admin_dead_list(a, 0, &l, &n, &err), &err);
    ASSERT_EQ_INT(n, 0);
    /* A missing group on one partition: setid moves none. */
    int destroyed = 0;
    ASSERT_OK(emq_admin_group_destroy(p3, "g", &destroyed, &err), &err);
    ASSERT_EQ_INT(destroyed, 1);
    ASSERT_STATUS(emq_admin_group_setid(a, "g", "tail", &again, &err),
                  EMQ_ESERVER, &err);
    ASSERT_CONTAINS(err.message, "partition 3");
    ASSERT_STATUS(
        emq_admin_group_setid_effect(a, "g", "tail", &skipped, NULL, &err),
        EMQ_ESERVER, &err);
    ASSERT_CONTAINS(err.message, "partition 3");
    ASSERT_EQ_INT(skipped, 0);
    emq_queue_info *info;
    ASSERT_OK(emq_admin_describe(emq_admin_partition(a, 0), &info, &err), &err);
    ASSERT_EQ_INT(info->ngroups, 1);
    ASSERT_EQ_INT(info->groups[0].lag, 2); /* still at head */
    emq_queue_info_free(info);
    emq_admin_destroy(a);
    emq_conf_destroy(conf);
    emq_srv_stop(s);
}

/* ls, top and the exporter find the queues of every master: queues whose
 * slots lie on each of the 3 masters, asked through one node. */
TEST_TIMEOUT(cluster_ls_top_exporter_see_every_master, 90) {
    emq_cl *c = emq_cl_start(3, 0);
    /* A queue on each master: names tried until each master has one. */
    char names[3][16] = {"", "", ""};
    for (int i = 0, found = 0; found < 3 && i < 200; i++) {
        char name[16], key[32];
        snprintf(name, sizeof name, "q%d", i);
        snprintf(key, sizeof key, "emq:{%s}", name);
        int owner = emq_cl_owner(c, 0, emq__cluster_key_slot(key, strlen(key)));
        ASSERT(owner >= 0 && owner < 3);
        if (names[owner][0] == '\0') {
            snprintf(names[owner], sizeof names[owner], "%s", name);
            found++;
        }
    }
    const char *url = emq_srv_url(emq_cl_node(c, 0));
    cli_result r;
    for (int m = 0; m < 3; m++) {
        ASSERT(names[m][0] != '\0');
        CLI(&r, url, "produce", names[m], "n=1");
        ASSERT_EXIT(&r, 0);
        cli_free(&r);
    }
    CLI(&r, url, "ls");
    ASSERT_EXIT(&r, 0);
    for (int m = 0; m < 3; m++) {
        char row[64];
        snprintf(row, sizeof row, "\n%s ", names[m]);
        ASSERT_CONTAINS(r.out, row);
    }
    cli_free(&r);
    CLI(&r, url, "top", "-n", "1", "--interval", "100");
    ASSERT_EXIT(&r, 0);
    for (int m = 0; m < 3; m++)
        ASSERT_CONTAINS(r.out, names[m]);
    cli_free(&r);
    int port = emq_free_port();
    char listen[64];
    snprintf(listen, sizeof listen, "127.0.0.1:%d", port);
    pid_t pid = cli_spawn(url, CLI_ARGS("exporter", "--listen", listen, "-q"),
                          NULL, NULL, NULL);
    static char page[65536];
    int64_t end = cli_ms() + emq_test_ms(10000);
    int have = 0;
    while (!have && cli_ms() < end) {
        if (cli_http_get(port, "/metrics", page, sizeof page) == 0) {
            have = 1;
            for (int m = 0; m < 3; m++) {
                char metric[96];
                snprintf(metric, sizeof metric,
                         "echomq_queue_length{queue=\"%s\"} 1\n", names[m]);
                have &= strstr(page, metric) != NULL;
            }
        }
        if (!have)
            usleep(100 * 1000);
    }
    kill(pid, SIGTERM);
    int status;
    waitpid(pid, &status, 0);
    if (!have)
        FAIL("the exporter does not show every master's queue:\n%.3000s", page);
    emq_cl_stop(c);
}
