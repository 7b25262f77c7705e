/* SPDX-License-Identifier: BSD-3-Clause */
/* cmd_info.c: `echomq info` and `echomq pending`, inspection of a queue.
 *
 * Thin wrappers over emq_admin_describe and emq_admin_pending: a readable
 * table by default, the library's JSON with --json. Also the helpers the
 * admin verbs share: opening the admin handle, printing a JSON document of
 * any size, and formatting durations for tables.
 */
#include "cli.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

int cli_admin_open(const char *verb, const char *queue, emq_conf_t **conf,
                   emq_admin_t **admin) {
    return cli_admin_open_args(verb, queue, NULL, conf, admin);
}

int cli_admin_begin(const char *verb, int rc, cli_args *a, int at,
                    emq_conf_t **conf, emq_admin_t **admin) {
    *conf = NULL;
    *admin = NULL;
    if (rc == CLI_OK)
        rc = cli_admin_open_args(verb, a->pos[at], a, conf, admin);
    if (rc != CLI_OK)
        free(a->pos);
    return rc;
}

int cli_admin_open_args(const char *verb, const char *queue, const cli_args *a,
                        emq_conf_t **conf, emq_admin_t **admin) {
    (void)verb;
    *admin = NULL;
    *conf = cli_conf(queue);
    if (*conf == NULL)
        return CLI_USAGE;
    if (a != NULL && (cli_partitions(a, *conf) != CLI_OK ||
                      cli_find_topic(a, *conf) != CLI_OK)) {
        emq_conf_destroy(*conf);
        *conf = NULL;
        return CLI_USAGE;
    }
    emq_error err;
    emq_status st = emq_admin_new(*conf, admin, &err);
    if (st == EMQ_OK)
        return CLI_OK;
    int rc = st == EMQ_EINVAL ? cli_err(CLI_USAGE, "%s", err.message)
                              : cli_runtime_err(*conf, st, &err, "connecting");
    emq_conf_destroy(*conf);
    *conf = NULL;
    return rc;
}

const char *cli_target(const emq_admin_t *admin, const char *name, char *buf,
                       size_t size) {
    char shown[300];
    int parts = emq_admin_partition_count(admin);
    if (parts > 0)
        snprintf(buf, size, "topic '%s' (%d partitions)",
                 cli_esc(name, shown, sizeof shown), parts);
    else
        snprintf(buf, size, "queue '%s'", cli_esc(name, shown, sizeof shown));
    return buf;
}

int cli_print_json(size_t (*fn)(const void *ctx, char *buf, size_t size),
                   const void *ctx) {
    char probe[1];
    size_t need = fn(ctx, probe, sizeof probe);
    char *buf = malloc(need + 1);
    if (buf == NULL)
        return cli_err(CLI_FAIL, "out of memory");
    fn(ctx, buf, need + 1);
    fputs(buf, stdout);
    if (need == 0 || buf[need - 1] != '\n')
        fputc('\n', stdout);
    free(buf);
    if (fflush(stdout) != 0)
        return cli_err(CLI_FAIL, "cannot write to stdout");
    return CLI_OK;
}

int64_t cli_wall_ms(void) {
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    return (int64_t)now.tv_sec * 1000 + now.tv_nsec / 1000000;
}

const char *cli_duration(int64_t ms, char *buf, size_t size) {
    if (ms < 0)
        snprintf(buf, size, "-");
    else if (ms < 1000)
        snprintf(buf, size, "%lldms", (long long)ms);
    else if (ms < 60000)
        snprintf(buf, size, "%.1fs", (double)ms / 1000.0);
    else if (ms < 3600000)
        snprintf(buf, size, "%lldm%02llds", (long long)(ms / 60000),
                 (long long)(ms / 1000 % 60));
    else if (ms < 86400000)
        snprintf(buf, size, "%lldh%02lldm", (long long)(ms / 3600000),
                 (long long)(ms / 60000 % 60));
    else
        snprintf(buf, size, "%lldd%lldh", (long long)(ms / 86400000),
                 (long long)(ms / 3600000 % 24));
    return buf;
}

/* ---- info ------------------------------------------------------------- */

static size_t info_json(const void *ctx, char *buf, size_t size) {
    return emq_queue_info_json(ctx, buf, size);
}

/* "redis 7.2.6 (capability, ...)", or "?" when the server said nothing. */
static void print_server(const emq_server *server) {
    if (server->name[0] == '\0') {
        printf("server        ? (not learned: protocol 2 with INFO refused)\n");
        return;
    }
    printf("server        %s %s (", server->name, server->version);
    const char *name;
    size_t i = 0;
    for (; (name = emq_server_capability(server, i)) != NULL; i++)
        printf("%s%s", i ? ", " : "", name);
    printf("%s)\n", i ? "" : "none of the optional features");
}

/* The delayed line: how many wait, and when the next is due. */
static void print_delayed(const emq_queue_info *q) {
    const emq_delayed_info *d = q->delayed;
    if (d == NULL) {
        printf("delayed       ? (not counted: ZCARD or ZRANGE refused)\n");
        return;
    }
    char aside[192] = "";
    if (d->set_aside > 0)
        snprintf(aside, sizeof aside,
                 "; %llu set aside: not entries (delayed:bad)",
                 (unsigned long long)d->set_aside);
    if (d->orphaned > 0)
        snprintf(aside + strlen(aside), sizeof aside - strlen(aside),
                 "; %llu orphaned: payloads no handle names",
                 (unsigned long long)d->orphaned);
    if (d->waiting == 0) {
        printf("delayed       0%s\n", aside);
        return;
    }
    char in[32];
    int64_t left = d->next_due_ms - cli_wall_ms();
    printf("delayed       %llu (next due %s%s, at %lld)%s\n",
           (unsigned long long)d->waiting, left > 0 ? "in " : "now",
           left > 0 ? cli_duration(left, in, sizeof in) : "",
           (long long)d->next_due_ms, aside);
}

/* The priorities line: entries held by level, and the aging rule. */
static void print_priorities(const emq_queue_info *q) {
    const emq_priority_info *p = q->priorities;
    if (p == NULL)
        return; /* none (or not readable): no line */
    printf("priorities    %llu held", (unsigned long long)p->held);
    const char *sep = " (";
    for (int l = 0; l < EMQ_PRIORITY_LEVELS; l++)
        if (p->held_at[l] > 0) {
            printf("%slevel %d: %llu", sep, l,
                   (unsigned long long)p->held_at[l]);
            sep = ", ";
        }
    printf("%s; ", *sep == ',' ? ")" : "");
    if (p->age_ms > 0)
        printf("aging %lld ms a level\n", (long long)p->age_ms);
    else
        printf("strict order\n");
}

static void print_info(const char *queue, const emq_queue_info *q) {
    print_server(&q->server);
    if (q->endpoint != NULL) /* behind Sentinel: the primary it resolved */
        printf("node          %s (%s)\n", q->endpoint,
               q->role == NULL                 ? "role not known: ROLE refused"
               : strcmp(q->role, "slave") == 0 ? "replica"
                                               : q->role);
    if (!q->exists) {
        printf("queue %s: stream %s does not exist (nothing was added yet)\n",
               queue, q->stream);
        printf("dead letters: %llu in %s\n", (unsigned long long)q->dead_length,
               q->dead);
        print_delayed(q);
        print_priorities(q);
        return;
    }
    printf("queue         %s\n", queue);
    printf("stream        %s\n", q->stream);
    printf("length        %llu\n", (unsigned long long)q->length);
    printf("first entry   %s\n", q->first_id.str[0] ? q->first_id.str : "-");
    printf("last entry    %s\n", q->last_id.str[0] ? q->last_id.str : "-");
    if (q->entries_added < 0)
        printf("entries added ? (not reported by this server)\n");
    else
        printf("entries added %lld\n", (long long)q->entries_added);
    printf("dead letters  %llu (%s)\n", (unsigned long long)q->dead_length,
           q->dead);
    print_delayed(q);
    print_priorities(q);
    printf("groups        %zu\n", q->ngroups);
    if (q->ngroups == 0)
        return;
    /* Names as the server has them may hold anything: each cell is
     * escaped (cli_esc), and the widths are those of what is shown. */
    int gw = 5, cw = 8;
    char gname[300], cname[300];
    for (size_t i = 0; i < q->ngroups; i++) {
        int n = (int)strlen(cli_esc(q->groups[i].name, gname, sizeof gname));
        gw = n > gw ? n : gw;
        for (size_t k = 0; k < q->groups[i].nconsumers; k++) {
            int m = (int)strlen(
                cli_esc(q->groups[i].consumers[k].name, cname, sizeof cname));
            cw = m > cw ? m : cw;
        }
    }
    printf("\n%-*s  %8s  %8s  %-22s  %-22s  %8s  %9s\n", gw, "GROUP", "PENDING",
           "LAG", "LAST-DELIVERED", "OLDEST-PENDING", "AGE", "CONSUMERS");
    for (size_t i = 0; i < q->ngroups; i++) {
        const emq_group_info *g = &q->groups[i];
        char age[32], lag[32];
        if (g->lag < 0)
            snprintf(lag, sizeof lag, "?");
        else
            snprintf(lag, sizeof lag, "%lld%s", (long long)g->lag,
                     g->lag_computed ? "*" : "");
        printf("%-*s  %8llu  %8s  %-22s  %-22s  %8s  %9zu\n", gw,
               cli_esc(g->name, gname, sizeof gname),
               (unsigned long long)g->pending, lag,
               g->last_delivered_id.str[0] ? g->last_delivered_id.str : "-",
               g->oldest_pending_id.str[0] ? g->oldest_pending_id.str : "-",
               cli_duration(g->oldest_pending_age_ms, age, sizeof age),
               g->nconsumers);
    }
    int any = 0;
    for (size_t i = 0; i < q->ngroups; i++)
        any |= q->groups[i].nconsumers > 0;
    if (!any)
        return;
    printf("\n%-*s  %-*s  %8s  %8s  %8s\n", gw, "GROUP", cw, "CONSUMER",
           "PENDING", "IDLE", "INACTIVE");
    for (size_t i = 0; i < q->ngroups; i++)
        for (size_t k = 0; k < q->groups[i].nconsumers; k++) {
            const emq_consumer_info *c = &q->groups[i].consumers[k];
            char idle[32], inactive[32];
            printf("%-*s  %-*s  %8llu  %8s  %8s\n", gw,
                   cli_esc(q->groups[i].name, gname, sizeof gname), cw,
                   cli_esc(c->name, cname, sizeof cname),
                   (unsigned long long)c->pending,
                   cli_duration(c->idle_ms, idle, sizeof idle),
                   cli_duration(c->inactive_ms, inactive, sizeof inactive));
        }
}

/* One line per group that has limits (echomq group limits); a group
 * whose limits cannot be read (an ACL) is left out. */
static void print_limits(const emq_queue_info *q) {
    int first = 1;
    for (size_t g = 0; g < q->ngroups; g++) {
        emq_group_limits l = q->groups[g].limits;
        uint64_t ignored = q->groups[g].limits_ignored;
        if (l.rate <= 0 && l.max_in_flight <= 0 && ignored == 0)
            continue;
        char name[300], rate[32] = "none", maxf[32] = "none";
        if (l.rate > 0)
            snprintf(rate, sizeof rate, "%lld/s", (long long)l.rate);
        if (l.max_in_flight > 0)
            snprintf(maxf, sizeof maxf, "%lld", (long long)l.max_in_flight);
        if (ignored & EMQ_LIMIT_IGNORED_RATE)
            snprintf(rate, sizeof rate, "none (a value that is no limit)");
        if (ignored & EMQ_LIMIT_IGNORED_MAX_IN_FLIGHT)
            snprintf(maxf, sizeof maxf, "none (a value that is no limit)");
        printf("%slimits of %s: rate %s, max in flight %s\n", first ? "\n" : "",
               cli_esc(q->groups[g].name, name, sizeof name), rate, maxf);
        first = 0;
    }
}

/* A topic: one line per partition and group, then the totals. */
static void print_partitions(const emq_queue_info *q) {
    printf("\n%-9s  %-28s  %10s  %6s  %-16s  %8s  %8s\n", "PARTITION", "STREAM",
           "LENGTH", "DEAD", "GROUP", "PENDING", "LAG");
    for (size_t i = 0; i < q->npartitions; i++) {
        const emq_queue_info *p = &q->partitions[i];
        if (p->ngroups == 0)
            printf("%-9zu  %-28s  %10llu  %6llu  %-16s  %8s  %8s\n", i,
                   p->stream, (unsigned long long)p->length,
                   (unsigned long long)p->dead_length, "-", "-", "-");
        for (size_t g = 0; g < p->ngroups; g++) {
            char lag[32];
            if (p->groups[g].lag < 0)
                snprintf(lag, sizeof lag, "?");
            else
                snprintf(lag, sizeof lag, "%lld%s", (long long)p->groups[g].lag,
                         p->groups[g].lag_computed ? "*" : "");
            printf("%-9zu  %-28s  %10llu  %6llu  %-16s  %8llu  %8s\n", i,
                   p->stream, (unsigned long long)p->length,
                   (unsigned long long)p->dead_length, p->groups[g].name,
                   (unsigned long long)p->groups[g].pending, lag);
        }
    }
    for (size_t g = 0; g < q->ngroups; g++)
        printf("%-9s  %-28s  %10llu  %6llu  %-16s  %8llu  %8lld\n", "total",
               q->stream, (unsigned long long)q->length,
               (unsigned long long)q->dead_length, q->groups[g].name,
               (unsigned long long)q->groups[g].pending,
               (long long)q->groups[g].lag);
}

int cmd_info(int argc, char **argv) {
    const char *verb = "info";
    cli_args a;
    int rc = cli_begin(verb, argc, argv, &cli_verb_info, 1, &a);
    if (rc != CLI_OK)
        return rc;
    emq_conf_t *conf;
    emq_admin_t *admin;
    if ((rc = cli_admin_begin(verb, rc, &a, 0, &conf, &admin)) != CLI_OK)
        return rc;
    emq_queue_info *q = NULL;
    emq_error err;
    emq_status st = emq_admin_describe(admin, &q, &err);
    const char *eviction =
        st == EMQ_OK ? emq_eviction_warning(q->maxmemory_policy) : NULL;
    if (eviction != NULL)
        cli_note("warning: maxmemory-policy is %s: %s", q->maxmemory_policy,
                 eviction);
    if (st != EMQ_OK)
        rc = cli_runtime_err(conf, st, &err, "describing the queue");
    else if (a.seen[O_JSON])
        rc = cli_print_json(info_json, q);
    else {
        print_info(a.pos[0], q);
        print_limits(q);
        if (q->npartitions > 0)
            print_partitions(q);
    }
    emq_queue_info_free(q);
    emq_admin_destroy(admin);
    emq_conf_destroy(conf);
    free(a.pos);
    return rc;
}

/* ---- pending ---------------------------------------------------------- */

static size_t pending_json(const void *ctx, char *buf, size_t size) {
    const cli_json_list *l = ctx;
    return emq_pending_json(l->items, l->n, buf, size);
}

/* The pending entries of queue or topic (every partition's, oldest first,
 * each line naming its partition), as rows or JSON lines; *total counts
 * them and *parts gets the partition count (0: a queue). */
static int pending_of(const char *verb, const cli_args *a, long long min_idle,
                      long long count, size_t *total, int *parts) {
    emq_conf_t *conf = NULL;
    emq_admin_t *admin = NULL;
    int rc = cli_admin_open_args(verb, a->pos[0], a, &conf, &admin);
    if (rc != CLI_OK)
        return rc;
    *parts = emq_admin_partition_count(admin);
    emq_pending_entry *e = NULL;
    size_t n = 0;
    emq_error err;
    emq_status st =
        emq_admin_pending(admin, a->value[O_GROUP],
                          a->seen[O_CONSUMER] ? a->value[O_CONSUMER] : NULL,
                          min_idle, (size_t)count, &e, &n, &err);
    char target[400];
    if (st == EMQ_ESERVER && strcmp(err.reply_code, "NOGROUP") == 0)
        rc = cli_err(CLI_FAIL,
                     "no group '%s' on %s; see 'echomq info "
                     "%s' for its groups",
                     a->value[O_GROUP],
                     cli_target(admin, a->pos[0], target, sizeof target),
                     a->pos[0]);
    else if (st != EMQ_OK)
        rc = cli_runtime_err(conf, st, &err, "listing pending entries");
    else if (a->seen[O_JSON] && n) {
        cli_json_list l = {e, n};
        rc = cli_print_json(pending_json, &l);
    } else if (!a->seen[O_JSON]) {
        char cname[300];
        printf("%s%-22s  %-20s  %8s  %8s  %10s\n", *parts ? "PARTITION  " : "",
               "ID", "CONSUMER", "IDLE", "IN HAND", "DELIVERIES");
        for (size_t i = 0; i < n; i++) {
            char idle[32], hand[32];
            if (*parts)
                printf("%9d  ", e[i].partition);
            printf("%-22s  %-20s  %8s  %8s  %10llu\n", e[i].id.str,
                   cli_esc(e[i].consumer, cname, sizeof cname),
                   cli_duration(e[i].idle_ms, idle, sizeof idle),
                   cli_duration(e[i].in_hand_ms, hand, sizeof hand),
                   (unsigned long long)e[i].deliveries);
        }
    }
    *total = n;
    emq_free_array(e);
    emq_admin_destroy(admin);
    emq_conf_destroy(conf);
    return rc;
}

int cmd_pending(int argc, char **argv) {
    const char *verb = "pending";
    cli_args a;
    long long min_idle = 0, count = 1000;
    int rc = cli_begin(verb, argc, argv, &cli_verb_pending, 1, &a);
    if (rc != CLI_OK)
        return rc;
    rc = cli_require(verb, &a, O_GROUP, "--group", "the group to list");
    if (rc == CLI_OK && a.seen[O_MIN_IDLE])
        rc = cli_num(verb, "--min-idle", a.value[O_MIN_IDLE], 0, INT64_MAX,
                     &min_idle);
    if (rc == CLI_OK && a.seen[O_COUNT])
        rc = cli_num(verb, "--count", a.value[O_COUNT], 1, 10000000, &count);
    size_t total = 0;
    int parts = 0;
    if (rc == CLI_OK)
        rc = pending_of(verb, &a, min_idle, count, &total, &parts);
    if (rc == CLI_OK && !a.seen[O_JSON])
        cli_note("%zu pending entr%s%s%s", total, total == 1 ? "y" : "ies",
                 parts > 0 ? " in all partitions" : "",
                 total == (size_t)count
                     ? " (the --count limit; there may be more)"
                     : "");
    free(a.pos);
    return rc;
}

/* ---- the options and help of info and pending --------------------------- */

static const cli_optdoc info_opts[] = {
    {O_JSON, NULL, "one JSON document instead of tables"},
    CLI_OPT_PARTITIONS(
        "the totals (lag and pending summed over the partitions), "
        "then one line per partition and group"),
    CLI_OPTS_END,
};
static const cli_optdoc pending_opts[] = {
    {O_GROUP, "G", "the group (required)"},
    {O_CONSUMER, "C", "only the entries consumer C holds"},
    {O_MIN_IDLE, "MS", "only entries idle at least MS"},
    {O_COUNT, "N", "at most N entries (default 1000)"},
    {O_JSON, NULL, "one JSON object per line instead of a table"},
    CLI_OPT_PARTITIONS(
        "every partition's entries, each line naming its partition"),
    CLI_OPTS_END,
};

CLI_VERB(info, "the queue, its groups and consumers",
         "echomq info QUEUE [--partitions P] [--json]",
         "Describes QUEUE: its stream (length, first and last IDs, entries\n"
         "ever added), the dead letters, every group (pending entries, lag,\n"
         "last-delivered ID, oldest pending entry and its age) and every\n"
         "consumer (pending entries, idle and inactive time).\n",
         info_opts,
         "Example:\n"
         "  echomq info jobs\n");

CLI_VERB(
    pending, "entries delivered, not acknowledged",
    "echomq pending QUEUE --group G [--consumer C] [--min-idle MS]\n"
    "               [--count N] [--json]",
    "Lists the entries of group G that were delivered and not yet\n"
    "acknowledged, oldest first: ID, consumer holding it, idle time, time\n"
    "in a handler's hands and delivery count.\n",
    pending_opts,
    "Example:\n"
    "  echomq pending jobs --group workers --min-idle 60000\n");
