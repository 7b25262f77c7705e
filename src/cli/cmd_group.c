/* SPDX-License-Identifier: BSD-3-Clause */
/* cmd_group.c: `echomq group create|setid|destroy` and `echomq consumers
 * prune`, the explicit operations on a consumer group.
 *
 * Thin wrappers over the admin API. Destroying a group takes --yes, since
 * its pending entries go with it; pruning consumers is the safe kind
 * (pending entries are handed over before a consumer is removed, never
 * dropped: emq_admin_prune_consumers).
 */
#include "cli.h"

#include <stdlib.h>
#include <string.h>

/* 1 when text is a whole number within 64 bits ([from, to) of digits). */
static int u64_ok(const char *from, const char *to) {
    if (from == to || to - from > 20)
        return 0;
    for (const char *p = from; p < to; p++)
        if (*p < '0' || *p > '9')
            return 0;
    return to - from < 20 || strncmp(from, "18446744073709551615", 20) <= 0;
}

/* An entry ID: MS or MS-SEQ. */
static int id_ok(const char *text) {
    const char *dash = strchr(text, '-');
    const char *end = text + strlen(text);
    return dash ? u64_ok(text, dash) && u64_ok(dash + 1, end)
                : u64_ok(text, end);
}

static int start_ok(const char *text) {
    return !strcmp(text, "new") || !strcmp(text, "head") || id_ok(text);
}

static int to_ok(const char *text) {
    return !strcmp(text, "head") || !strcmp(text, "tail") ||
           (text[0] == '@' && u64_ok(text + 1, text + strlen(text))) ||
           id_ok(text);
}

/* cli_begin for a verb with a subcommand first (QUEUE after it): returns
 * as cli_begin (CLI_DONE after the help; a->pos freed on anything but
 * CLI_OK). */
static int parse_sub(const char *verb, int argc, char **argv, const cli_verb *v,
                     cli_args *a) {
    int rc = cli_begin(verb, argc, argv, v, 0, a);
    if (rc != CLI_OK)
        return rc;
    if (a->npos < 1)
        rc = cli_usage_err(verb, "a subcommand is missing");
    else
        rc = cli_stream_queue(a, 1);
    if (rc != CLI_OK)
        free(a->pos);
    return rc;
}

/* The subcommands of group: the option each requires, what it is for,
 * and what a runtime failure says it was doing. */
enum { G_CREATE, G_SETID, G_DESTROY, G_LIMITS, G_NSUBS };
static const struct {
    const char *name;
    int needs;               /* O_* */
    const char *flag, *hint; /* how a missing one is asked for */
    const char *doing;
} group_subs[G_NSUBS] = {
    [G_CREATE] = {"create", O_START, "--start",
                  "new (only new entries) or head (replay the stream), or "
                  "an entry ID",
                  "creating the group"},
    [G_SETID] = {"setid", O_TO, "--to",
                 "head (replay everything), tail (skip everything), an "
                 "entry ID or @UNIXMS",
                 "moving the group"},
    [G_DESTROY] = {"destroy", O_YES, "--yes", NULL, "destroying the group"},
    [G_LIMITS] = {"limits", O_NONE, NULL, NULL, "the group's limits"},
};

/* Every usage check of `group SUB` that needs no server; *sub is set. */
static int group_usage(const char *verb, const cli_args *a, int *sub) {
    for (*sub = 0; *sub < G_NSUBS; (*sub)++)
        if (!strcmp(a->pos[0], group_subs[*sub].name))
            break;
    int rc = CLI_OK;
    if (*sub == G_NSUBS)
        return cli_usage_err(verb,
                             "unknown subcommand '%s' (create, setid, "
                             "destroy, limits)",
                             a->pos[0]);
    if (a->npos != 2)
        rc = cli_usage_err(verb,
                           a->npos < 2 ? "QUEUE is missing%s"
                                       : "unexpected argument '%s'",
                           a->npos < 2 ? "" : a->pos[2]);
    if (rc == CLI_OK)
        rc = cli_require(verb, a, O_GROUP, "--group", "the group's name");
    if (rc == CLI_OK && *sub == G_DESTROY && !a->seen[O_YES])
        rc = cli_usage_err(verb,
                           "destroying group '%s' drops its pending "
                           "entries; add --yes to confirm",
                           a->value[O_GROUP]);
    else if (rc == CLI_OK && *sub != G_DESTROY && *sub != G_LIMITS)
        rc = cli_require(verb, a, group_subs[*sub].needs, group_subs[*sub].flag,
                         group_subs[*sub].hint);
    if (rc == CLI_OK && *sub != G_LIMITS &&
        (a->seen[O_RATE] || a->seen[O_MAX_IN_FLIGHT]))
        rc = cli_usage_err(verb, "--%s goes with 'group limits'",
                           a->seen[O_RATE] ? "rate" : "max-in-flight");
    if (rc == CLI_OK && (a->seen[O_START] && *sub != G_CREATE))
        rc = cli_usage_err(verb, "--start goes with 'group create'");
    if (rc == CLI_OK && (a->seen[O_TO] && *sub != G_SETID))
        rc = cli_usage_err(verb, "--to goes with 'group setid'");
    /* Refuse a bad --start or --to before connecting. */
    if (rc == CLI_OK && *sub == G_CREATE && !start_ok(a->value[O_START]))
        rc = cli_usage_err(verb,
                           "--start '%s' is not valid: use new, head "
                           "or an entry ID such as 1732924800000-0",
                           a->value[O_START]);
    if (rc == CLI_OK && *sub == G_SETID && !to_ok(a->value[O_TO]))
        rc = cli_usage_err(verb,
                           "--to '%s' is not valid: use head, tail, an "
                           "entry ID such as 1732924800000-0 or "
                           "@UNIXMS",
                           a->value[O_TO]);
    return rc;
}

/* Runs subcommand sub on group of queue (how messages name it) and prints
 * what it did. Returns the library's status (err filled); *rc is set to
 * CLI_FAIL when destroy found no group, and to CLI_USAGE (said) when a
 * setid that skips or replays entries lacks yes. */
static emq_status group_apply(emq_admin_t *admin, int sub, const char *group,
                              const char *value, const char *queue, int yes,
                              int *rc, emq_error *err) {
    emq_status st;
    if (sub == G_CREATE) {
        int created = 0;
        st = emq_admin_group_create(admin, group, value, &created, err);
        if (st == EMQ_OK)
            printf(created ? "created group '%s' on %s at %s\n"
                           : "group '%s' exists already on %s; its "
                             "position is unchanged (--start %s not "
                             "applied)\n",
                   group, queue, value);
    } else if (sub == G_SETID) {
        /* A move that skips or replays entries is said first, and made
         * only when confirmed. */
        uint64_t skipped = 0, replayed = 0, redeliver = 0;
        st = emq_admin_group_setid_effect(admin, group, value, &skipped,
                                          &replayed, err);
        if (st == EMQ_OK && (skipped || replayed) && !yes) {
            *rc = cli_err(CLI_USAGE,
                          "moving group '%s' of %s to %s would %s %llu "
                          "entr%s%s; nothing was moved: add --yes to "
                          "confirm",
                          group, queue, value, skipped ? "skip" : "replay",
                          (unsigned long long)(skipped ? skipped : replayed),
                          (skipped ? skipped : replayed) == 1 ? "y" : "ies",
                          skipped ? " never delivered to it"
                                  : " behind its cursor");
            return EMQ_OK;
        }
        if (st == EMQ_OK)
            st = emq_admin_group_setid(admin, group, value, &redeliver, err);
        char skip_text[96] = "";
        if (skipped)
            snprintf(skip_text, sizeof skip_text,
                     "skipped %llu entr%s never delivered; ",
                     (unsigned long long)skipped, skipped == 1 ? "y" : "ies");
        if (st == EMQ_OK)
            printf("group '%s' of %s moved to %s: %s%llu stored entr%s will "
                   "be delivered again or anew\n",
                   group, queue, value, skip_text,
                   (unsigned long long)redeliver, redeliver == 1 ? "y" : "ies");
    } else {
        int destroyed = 0;
        st = emq_admin_group_destroy(admin, group, &destroyed, err);
        if (st == EMQ_OK && destroyed)
            printf("destroyed group '%s' of %s\n", group, queue);
        else if (st == EMQ_OK)
            *rc = cli_err(CLI_FAIL,
                          "no group '%s' on %s; nothing "
                          "destroyed",
                          group, queue);
    }
    return st;
}

/* group limits: sets what --rate and --max-in-flight say (0: none), then
 * prints what is recorded. */
static int group_limits(emq_admin_t *admin, const emq_conf_t *conf,
                        const cli_args *a, const char *queue) {
    const char *verb = "group limits";
    emq_group_limits set = {-1, -1}, now;
    long long n;
    int rc = CLI_OK;
    if (a->seen[O_RATE] && (rc = cli_num(verb, "--rate", a->value[O_RATE], 0,
                                         100000000, &n)) == CLI_OK)
        set.rate = n;
    if (rc == CLI_OK && a->seen[O_MAX_IN_FLIGHT] &&
        (rc = cli_num(verb, "--max-in-flight", a->value[O_MAX_IN_FLIGHT], 0,
                      100000000, &n)) == CLI_OK)
        set.max_in_flight = n;
    if (rc != CLI_OK)
        return rc;
    int setting = a->seen[O_RATE] || a->seen[O_MAX_IN_FLIGHT];
    emq_error err;
    emq_status st = emq_admin_group_limits(admin, a->value[O_GROUP],
                                           setting ? &set : NULL, &now, &err);
    if (st == EMQ_EINVAL)
        return cli_err(CLI_USAGE, "%s", err.message);
    if (st != EMQ_OK)
        return cli_runtime_err(conf, st, &err, "the group's limits");
    char rate[32] = "none", maxf[32] = "none";
    if (now.rate > 0)
        snprintf(rate, sizeof rate, "%lld/s", (long long)now.rate);
    if (now.max_in_flight > 0)
        snprintf(maxf, sizeof maxf, "%lld", (long long)now.max_in_flight);
    printf("group '%s' of %s: rate %s, max in flight %s%s\n", a->value[O_GROUP],
           queue, rate, maxf,
           emq_admin_partition_count(admin) > 0 ? " (each partition)" : "");
    return CLI_OK;
}

int cmd_group(int argc, char **argv) {
    const char *verb = "group";
    cli_args a;
    int rc = parse_sub(verb, argc, argv, &cli_verb_group, &a);
    if (rc != CLI_OK)
        return rc;
    int sub;
    emq_conf_t *conf;
    emq_admin_t *admin;
    rc = group_usage(verb, &a, &sub);
    if ((rc = cli_admin_begin(verb, rc, &a, 1, &conf, &admin)) != CLI_OK)
        return rc;
    char target[400];
    const char *group = a.value[O_GROUP];
    const char *queue = cli_target(admin, a.pos[1], target, sizeof target);
    if (sub == G_LIMITS) {
        rc = group_limits(admin, conf, &a, queue);
        emq_admin_destroy(admin);
        emq_conf_destroy(conf);
        free(a.pos);
        return rc;
    }
    emq_error err;
    emq_status st = group_apply(admin, sub, group,
                                a.value[group_subs[sub].needs], queue,
                                a.seen[O_YES], &rc, &err);
    if (st == EMQ_EINVAL) /* a value the library refused unsent */
        rc = cli_err(CLI_USAGE, "%s", err.message);
    else if (st == EMQ_ESERVER && strcmp(err.reply_code, "NOGROUP") == 0)
        rc = cli_err(CLI_FAIL,
                     "no group '%s' on %s; create it with "
                     "'echomq group create'",
                     group, queue);
    else if (st != EMQ_OK)
        rc = cli_runtime_err(conf, st, &err, group_subs[sub].doing);
    emq_admin_destroy(admin);
    emq_conf_destroy(conf);
    free(a.pos);
    return rc;
}

/* ---- consumers prune --------------------------------------------------- */

int cmd_consumers(int argc, char **argv) {
    const char *verb = "consumers";
    cli_args a;
    int rc = parse_sub(verb, argc, argv, &cli_verb_consumers, &a);
    if (rc != CLI_OK)
        return rc;
    if (strcmp(a.pos[0], "prune") != 0)
        rc = cli_usage_err(verb, "unknown subcommand '%s' (prune)", a.pos[0]);
    else if (a.npos != 2)
        rc = cli_usage_err(verb,
                           a.npos < 2 ? "QUEUE is missing%s"
                                      : "unexpected argument '%s'",
                           a.npos < 2 ? "" : a.pos[2]);
    if (rc == CLI_OK)
        rc = cli_require(verb, &a, O_GROUP, "--group", "the group to prune");
    if (rc == CLI_OK)
        rc = cli_require(verb, &a, O_IDLE, "--idle",
                         "how long (ms) a consumer must have been idle");
    long long idle = 0;
    if (rc == CLI_OK)
        rc = cli_num(verb, "--idle", a.value[O_IDLE], 0, INT64_MAX, &idle);
    emq_conf_t *conf;
    emq_admin_t *admin;
    if ((rc = cli_admin_begin(verb, rc, &a, 1, &conf, &admin)) != CLI_OK)
        return rc;
    /* A topic: partition by partition, a line each, then the totals. */
    int parts = emq_admin_partition_count(admin);
    emq_prune_result sum = {0, 0, 0, {0, 0, 0, 0}};
    for (int i = parts > 0 ? 0 : -1; rc == CLI_OK && i < parts; i++) {
        emq_prune_result r = {0, 0, 0, {0, 0, 0, 0}};
        emq_error err;
        emq_status st = emq_admin_prune_consumers(
            i < 0 ? admin : emq_admin_partition(admin, i), a.value[O_GROUP],
            idle, &r, &err);
        char target[400];
        if (st == EMQ_ESERVER && strcmp(err.reply_code, "NOGROUP") == 0)
            rc = cli_err(CLI_FAIL, "no group '%s' on %s%s", a.value[O_GROUP],
                         cli_target(admin, a.pos[1], target, sizeof target),
                         i < 0 ? "" : " (a partition lacks it)");
        else if (st != EMQ_OK)
            rc = cli_runtime_err(conf, st, &err, "pruning consumers");
        else if (i >= 0)
            printf("partition %d: removed %llu, handed over %llu, kept "
                   "%llu\n",
                   i, (unsigned long long)r.removed,
                   (unsigned long long)r.moved, (unsigned long long)r.kept);
        sum.removed += r.removed;
        sum.moved += r.moved;
        sum.kept += r.kept;
    }
    if (rc == CLI_OK)
        printf("removed %llu consumer%s idle at least %lld ms; %llu pending "
               "entr%s handed to other consumers; %llu idle consumer%s kept "
               "(they hold entries and no active consumer can take them)%s\n",
               (unsigned long long)sum.removed, sum.removed == 1 ? "" : "s",
               idle, (unsigned long long)sum.moved,
               sum.moved == 1 ? "y" : "ies", (unsigned long long)sum.kept,
               sum.kept == 1 ? "" : "s", parts > 0 ? " (all partitions)" : "");
    emq_admin_destroy(admin);
    emq_conf_destroy(conf);
    free(a.pos);
    return rc;
}

/* ---- the options and help of group and consumers ------------------------ */

static const cli_optdoc group_opts[] = {
    {O_GROUP, "G", "the group (required)"},
    {O_START, "new|head|ID",
     "create: where the group starts: new = only entries added from now "
     "on, head = the whole stream, or an entry ID (required)"},
    {O_TO, "head|tail|ID|@UNIXMS",
     "setid: the new cursor: head replays the whole stream, tail skips "
     "everything stored, an ID or @UNIXMS (the last entry before that time) "
     "replays what follows (required)"},
    {O_YES, NULL,
     "destroy: required, to confirm; setid: required when the move skips "
     "entries never delivered or replays delivered ones (it says how many "
     "without it, and moves nothing)"},
    {O_RATE, "N",
     "limits: the group is handed at most N new entries in any one-second "
     "window, by all its consumers together (0: no limit)"},
    {O_MAX_IN_FLIGHT, "N",
     "limits: the group holds at most N entries delivered and not settled "
     "(0: no limit)"},
    CLI_OPT_PARTITIONS(
        "every partition; setid moves none unless every partition has G"),
    CLI_OPTS_END,
};
static const cli_optdoc consumers_opts[] = {
    {O_GROUP, "G", "the group (required)"},
    {O_IDLE, "MS", "remove consumers idle at least MS (required)"},
    CLI_OPT_PARTITIONS("every partition, a line each, then the totals"),
    CLI_OPTS_END,
};

CLI_VERB(
    group, "create a group, move its cursor, set its limits or destroy it",
    "echomq group create  QUEUE --group G --start new|head|ID\n"
    "echomq group setid   QUEUE --group G --to head|tail|ID|@UNIXMS "
    "[--yes]\n"
    "echomq group destroy QUEUE --group G --yes\n"
    "echomq group limits  QUEUE --group G [--rate N] [--max-in-flight N]",
    "  create   creates group G (and the stream if needed) at --start. An\n"
    "           existing group is left as it is (exit 0, says so).\n"
    "  setid    moves G's cursor to --to; a move that skips or replays\n"
    "           entries says how many and needs --yes; prints what it did.\n"
    "  destroy  removes G and its pending list (needs --yes); consumers of\n"
    "           G that still run will re-create it at their --start.\n"
    "  limits   shows G's limits, after setting those given (0 removes\n"
    "           one); kept in the server, applied by every consumer of G\n"
    "           at its next read (one started while G had none: at its\n"
    "           next start). docs/QUEUES.md.\n",
    group_opts,
    "Examples:\n"
    "  echomq group create jobs --group workers --start head\n"
    "  echomq group setid jobs --group workers --to @1700000000000 --yes\n"
    "  echomq group destroy jobs --group old --yes\n"
    "  echomq group limits jobs --group workers --rate 50 --max-in-flight 10\n");

CLI_VERB(consumers,
         "remove idle consumers, handing over what they hold (prune)",
         "echomq consumers prune QUEUE --group G --idle MS",
         "Removes the consumers of group G idle at least MS milliseconds. A\n"
         "consumer that still holds entries first hands them to the most\n"
         "recently active consumer that stays, in the same atomic step, so no\n"
         "pending entry is lost (XGROUP DELCONSUMER alone would drop them).\n"
         "When every consumer is idle, those holding entries are kept.\n",
         consumers_opts,
         "Example:\n"
         "  echomq consumers prune jobs --group workers --idle 86400000\n");
