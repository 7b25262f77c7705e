/* SPDX-License-Identifier: BSD-3-Clause */
/* cmd_dead.c: `echomq dead list|requeue|purge`, the dead letters of a queue.
 *
 * Thin wrappers over emq_admin_dead_*: a table (or the library's JSON
 * lines) of the entries that failed --max-deliveries times or that a
 * handler gave up on, each with its origin and last failure reason; a
 * requeue that puts them back on the queue with their original fields;
 * and a purge that needs --yes.
 */
#include "cli.h"

#include <fnmatch.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const char *const VERB = "dead";

static const cli_optdoc opts[] = {
    {O_COUNT, "N", "list: at most N dead letters (default 1000)"},
    {O_JSON, NULL, "list: one JSON object per line instead of a table"},
    {O_FOLLOW, NULL,
     "list: then print new dead letters as they come (every half second), "
     "until SIGINT, SIGTERM or SIGHUP (exit 0)"},
    {O_ALL, NULL, "requeue: every dead letter"},
    {O_OLDER_THAN, "MS",
     "requeue: only letters dead for at least MS (by the dead letter's ID "
     "time)"},
    {O_REASON, "PATTERN",
     "requeue: only letters whose last failure reason matches the glob "
     "PATTERN ('exit 3*', '*timeout*')"},
    {O_LIMIT, "N", "requeue: at most N, the oldest first"},
    {O_FORCE, NULL,
     "requeue: also letters the queue's consumers cannot have written "
     "(without the origin fields, or an origin ID the stream never "
     "issued), which are otherwise refused and left in place"},
    {O_YES, NULL, "purge: required, to confirm"},
    CLI_OPT_PARTITIONS("every partition, each letter naming its partition"),
    {O_PARTITION, "I",
     "on a topic, only partition I (0..P-1); required to requeue by ID, "
     "as dead-letter IDs repeat across partitions"},
    CLI_OPTS_END,
};

CLI_VERB(
    dead, "list, requeue or purge the dead letters",
    "echomq dead list    QUEUE [--count N] [--json] [-f]\n"
    "echomq dead requeue QUEUE --all | [-p I] ID... | [-p I] FILTERS\n"
    "echomq dead purge   QUEUE --yes",
    "  list     the dead letters, oldest first: dead-letter ID, original ID,\n"
    "           group, consumer, deliveries, last failure reason and the\n"
    "           entry's fields\n"
    "  requeue  puts dead letters (--all, the dead-letter IDs given, or\n"
    "           those the FILTERS --older-than, --reason and --limit choose,\n"
    "           combined) back on the queue with their original fields (new\n"
    "           IDs) and removes them from the dead letters\n"
    "  purge    deletes every dead letter (needs --yes)\n",
    opts,
    "On a topic (found in the server, or --partitions P) every verb works\n"
    "on all partitions and each letter names its partition (a PARTITION\n"
    "column, \"partition\" in JSON).\n"
    "\n"
    "Examples:\n"
    "  echomq dead list jobs\n"
    "  echomq dead requeue jobs --all\n"
    "  echomq dead purge jobs --yes\n");

/* Prints a dead letter's fields as the JSON emq_entry_json writes for
 * them (binary-safe). */
static void print_fields(const emq_dead_letter *d) {
    char probe[1];
    size_t need = emq_fields_json(d->fields, d->nfields, probe, sizeof probe);
    char *buf = malloc(need + 1);
    if (buf == NULL) {
        fputs("?", stdout);
        return;
    }
    emq_fields_json(d->fields, d->nfields, buf, need + 1);
    fputs(buf, stdout);
    free(buf);
}

/* cli_print_json's writer of a cli_json_list of dead letters. */
static size_t letters_json(const void *ctx, char *buf, size_t size) {
    const cli_json_list *x = ctx;
    return emq_dead_letters_json(x->items, x->n, buf, size);
}

/* Prints n dead letters as rows (the PARTITION column for a topic:
 * topic) or JSON lines. header: the table's header line. */
static int print_letters(const emq_dead_letter *l, size_t n, int topic,
                         int json, int header) {
    if (json) {
        cli_json_list x = {l, n};
        return n ? cli_print_json(letters_json, &x) : CLI_OK;
    }
    if (header)
        printf("%s%-22s  %-22s  %-12s  %-12s  %10s  %-20s  %s\n",
               topic ? "PARTITION  " : "", "DEAD-ID", "ORIGIN-ID", "GROUP",
               "CONSUMER", "DELIVERIES", "REASON", "FIELDS");
    for (size_t i = 0; i < n; i++) {
        /* Group, consumer and reason are the dead letter's own text:
         * escaped, so they cannot drive the terminal or forge rows. */
        char group[300], consumer[300], reason[1100];
        if (topic)
            printf("%9d  ", l[i].partition);
        printf("%-22s  %-22s  %-12s  %-12s  %10llu  %-20s  ", l[i].id.str,
               l[i].origin_id.str,
               cli_esc(l[i].group ? l[i].group : "-", group, sizeof group),
               cli_esc(l[i].consumer ? l[i].consumer : "-", consumer,
                       sizeof consumer),
               (unsigned long long)l[i].deliveries,
               cli_esc(l[i].reason && l[i].reason[0] ? l[i].reason : "-",
                       reason, sizeof reason));
        print_fields(&l[i]);
        putchar('\n');
    }
    fflush(stdout);
    return CLI_OK;
}

/* Prints the dead letters of handle h after last (""; from the first), at
 * most count, and moves last to the newest printed. part >= 0: h is that
 * partition of a topic. */
static int follow_after(emq_admin_t *h, int part, const emq_conf_t *conf,
                        const cli_args *a, long long count, char *last) {
    emq_dead_letter *l = NULL;
    size_t n = 0;
    emq_error err;
    emq_status st = emq_admin_dead_list_after(h, last[0] ? last : NULL,
                                              (size_t)count, &l, &n, &err);
    if (st != EMQ_OK)
        return cli_runtime_err(conf, st, &err, "listing the dead letters");
    for (size_t i = 0; i < n; i++)
        l[i].partition = part;
    int rc = print_letters(l, n, part >= 0, a->seen[O_JSON], 0);
    if (n > 0)
        snprintf(last, EMQ_ID_MAX, "%s", l[n - 1].id.str);
    emq_dead_letters_free(l, n);
    return rc;
}

static atomic_int dead_stopping; /* set by SIGINT/SIGTERM/SIGHUP (-f) */

/* dead list, and with -f the new ones every 500 ms until a stop (a topic:
 * each partition followed from its newest printed letter). */
static int list(emq_admin_t *admin, const emq_conf_t *conf, const cli_args *a,
                long long count) {
    int parts = emq_admin_partition_count(admin);
    emq_dead_letter *l = NULL;
    size_t n = 0;
    emq_error err;
    emq_status st = emq_admin_dead_list(admin, (size_t)count, &l, &n, &err);
    if (st != EMQ_OK)
        return cli_runtime_err(conf, st, &err, "listing the dead letters");
    int rc = print_letters(l, n, parts > 0, a->seen[O_JSON], 1);
    if (!a->seen[O_JSON])
        cli_note("%zu dead letter%s%s%s", n, n == 1 ? "" : "s",
                 parts > 0 ? " in all partitions" : "",
                 n == (size_t)count ? " (the --count limit; there may be more)"
                                    : "");
    int cursors = parts > 0 ? parts : 1;
    char(*last)[EMQ_ID_MAX] = calloc((size_t)cursors, sizeof *last);
    if (last == NULL)
        rc = cli_err(CLI_FAIL, "out of memory");
    for (size_t i = 0; last && i < n; i++) /* oldest first: the last wins */
        snprintf(last[parts > 0 ? l[i].partition : 0], EMQ_ID_MAX, "%s",
                 l[i].id.str);
    emq_dead_letters_free(l, n);
    if (rc == CLI_OK && a->seen[O_FOLLOW]) {
        cli_on_stop_signal(cli_stop_flag, &dead_stopping);
        while (rc == CLI_OK && !atomic_load(&dead_stopping)) {
            for (int i = 0; i < 10 && !atomic_load(&dead_stopping); i++)
                usleep(50 * 1000);
            for (int i = 0;
                 rc == CLI_OK && i < cursors && !atomic_load(&dead_stopping);
                 i++)
                rc = follow_after(parts > 0 ? emq_admin_partition(admin, i)
                                            : admin,
                                  parts > 0 ? i : -1, conf, a, count, last[i]);
        }
        cli_signals_default();
    }
    free(last);
    return rc;
}

/* The dead letters the requeue filters choose (dead-letter IDs, malloc'd
 * strings in *ids, and their partitions in *part: -1 for a queue), only
 * partition only when it is >= 0. */
static int choose(emq_admin_t *admin, const emq_conf_t *conf, const cli_args *a,
                  int only, char ***ids, int **part, size_t *nids) {
    long long older = -1, limit = 0;
    int rc = CLI_OK;
    if (a->seen[O_OLDER_THAN])
        rc = cli_num(VERB, "--older-than", a->value[O_OLDER_THAN], 0, INT64_MAX,
                     &older);
    if (rc == CLI_OK && a->seen[O_LIMIT])
        rc = cli_num(VERB, "--limit", a->value[O_LIMIT], 1, 10000000, &limit);
    if (rc != CLI_OK)
        return rc;
    emq_dead_letter *l = NULL;
    size_t n = 0;
    emq_error err;
    /* Bounded: the oldest million. */
    emq_status st = emq_admin_dead_list(admin, 1000000, &l, &n, &err);
    if (st != EMQ_OK)
        return cli_runtime_err(conf, st, &err, "listing the dead letters");
    long long now_ms = cli_wall_ms();
    *ids = calloc(n ? n : 1, sizeof **ids);
    *part = calloc(n ? n : 1, sizeof **part);
    if (*ids == NULL || *part == NULL) {
        emq_dead_letters_free(l, n);
        return cli_err(CLI_FAIL, "out of memory");
    }
    for (size_t i = 0; i < n; i++) {
        if (limit > 0 && (long long)*nids >= limit)
            break;
        long long at = strtoll(l[i].id.str, NULL, 10);
        if (older >= 0 && now_ms - at < older)
            continue;
        if (only >= 0 && l[i].partition != only)
            continue;
        if (a->seen[O_REASON] &&
            fnmatch(a->value[O_REASON], l[i].reason ? l[i].reason : "", 0) != 0)
            continue;
        if (((*ids)[*nids] = strdup(l[i].id.str)) == NULL) {
            rc = cli_err(CLI_FAIL, "out of memory");
            break;
        }
        (*part)[(*nids)++] = l[i].partition;
    }
    emq_dead_letters_free(l, n);
    return rc;
}

/* dead requeue: --all, IDs (of partition --partition on a topic) or the
 * filters' choice, each moved by its partition's handle. */
static int requeue_letters(emq_admin_t *admin, const emq_conf_t *conf,
                           const cli_args *a, int filtered) {
    int parts = emq_admin_partition_count(admin);
    long long only = -1;
    int rc = CLI_OK;
    if (a->seen[O_PARTITION] && parts == 0)
        return cli_usage_err(VERB,
                             "--partition names a partition of a "
                             "topic, and '%s' is a queue",
                             a->pos[1]);
    if (a->seen[O_PARTITION])
        rc = cli_num(VERB, "--partition", a->value[O_PARTITION], 0, parts - 1,
                     &only);
    if (rc == CLI_OK && parts > 0 && only < 0 && a->npos > 2)
        rc = cli_usage_err(VERB,
                           "dead-letter IDs repeat across the %d "
                           "partitions of topic '%s': name the "
                           "partition with --partition I (see the "
                           "PARTITION column of 'echomq dead list')",
                           parts, a->pos[1]);
    if (rc != CLI_OK)
        return rc;
    char **chosen = NULL;
    int *part = NULL;
    size_t nchosen = 0;
    if (filtered)
        rc = choose(admin, conf, a, (int)only, &chosen, &part, &nchosen);
    char *const *ids = filtered ? chosen : a->pos + 2;
    size_t nids = filtered ? nchosen : (size_t)(a->npos - 2);
    uint64_t moved = 0;
    emq_error err, one_err;
    emq_status st = EMQ_OK;
    int failed = -1; /* the partition whose requeue failed first */
    /* One requeue per partition (or the queue) with its share of IDs; a
     * partition's refused or missing letters (EMQ_EINVAL) do not stop the
     * others. */
    for (int p = parts > 0 ? 0 : -1;
         rc == CLI_OK && (st == EMQ_OK || st == EMQ_EINVAL) && p < parts; p++) {
        if (only >= 0 && p != only)
            continue;
        emq_admin_t *h = p < 0 ? admin : emq_admin_partition(admin, p);
        const char **share = calloc(nids ? nids : 1, sizeof *share);
        size_t nshare = 0;
        if (share == NULL) {
            rc = cli_err(CLI_FAIL, "out of memory");
            break;
        }
        for (size_t i = 0; i < nids; i++)
            if (!filtered || part[i] == p)
                share[nshare++] = ids[i];
        uint64_t one = 0;
        emq_status one_st = EMQ_OK;
        /* nids 0 is "all": a filter that chose none moves nothing. */
        if (nshare > 0 || !filtered)
            one_st = emq_admin_dead_requeue_flags(
                h, share, nshare, a->seen[O_FORCE] ? EMQ_REQUEUE_FORCE : 0,
                &one, &one_err);
        if (one_st != EMQ_OK && (st == EMQ_OK || one_st != EMQ_EINVAL)) {
            st = one_st;
            err = one_err;
            failed = p;
        }
        moved += one;
        free(share);
    }
    for (size_t i = 0; i < nchosen; i++)
        free(chosen[i]);
    free(chosen);
    free(part);
    char target[400];
    if (rc == CLI_OK && (st == EMQ_OK || st == EMQ_EINVAL))
        printf("requeued %llu dead letter%s onto %s\n",
               (unsigned long long)moved, moved == 1 ? "" : "s",
               cli_target(admin, a->pos[1], target, sizeof target));
    char what[64] = "requeueing dead letters";
    if (failed >= 0)
        snprintf(what, sizeof what, "requeueing dead letters of partition %d",
                 failed);
    if (rc == CLI_OK && st == EMQ_EINVAL && failed >= 0)
        rc = cli_err(CLI_FAIL, "partition %d: %s", failed, err.message);
    else if (rc == CLI_OK && st == EMQ_EINVAL)
        rc = cli_err(CLI_FAIL, "%s", err.message);
    else if (rc == CLI_OK && st != EMQ_OK)
        rc = cli_runtime_err(conf, st, &err, what);
    return rc;
}

int cmd_dead(int argc, char **argv) {
    cli_args a;
    long long count = 1000;
    int rc = cli_begin(VERB, argc, argv, &cli_verb_dead, 0, &a);
    if (rc != CLI_OK)
        return rc;
    if (a.npos >= 1)
        cli_stream_queue(&a, 1);
    const char *sub = rc == CLI_OK && a.npos ? a.pos[0] : "";
    int is_list = !strcmp(sub, "list"), requeue = !strcmp(sub, "requeue"),
        purge = !strcmp(sub, "purge");
    if (rc == CLI_OK && a.npos == 0)
        rc = cli_usage_err(VERB, "a subcommand is missing (list, requeue, "
                                 "purge)");
    else if (rc == CLI_OK && !is_list && !requeue && !purge)
        rc = cli_usage_err(VERB,
                           "unknown subcommand '%s' (list, requeue, "
                           "purge)",
                           sub);
    else if (rc == CLI_OK && a.npos < 2)
        rc = cli_usage_err(VERB, "QUEUE is missing");
    else if (rc == CLI_OK && !requeue && a.npos > 2)
        rc = cli_usage_err(VERB, "unexpected argument '%s'", a.pos[2]);
    int filtered = a.seen[O_OLDER_THAN] || a.seen[O_REASON] || a.seen[O_LIMIT];
    if (rc == CLI_OK && !requeue && filtered)
        rc = cli_usage_err(VERB, "--older-than, --reason and --limit choose "
                                 "what 'dead requeue' moves");
    if (rc == CLI_OK && !is_list && a.seen[O_FOLLOW])
        rc = cli_usage_err(VERB, "-f follows 'dead list'");
    if (rc == CLI_OK && requeue && a.seen[O_ALL] && a.npos > 2)
        rc = cli_usage_err(VERB, "give --all or dead-letter IDs, not both");
    if (rc == CLI_OK && requeue && filtered && a.npos > 2)
        rc = cli_usage_err(VERB, "give dead-letter IDs or filters, not both");
    if (rc == CLI_OK && requeue && !a.seen[O_ALL] && !filtered && a.npos == 2)
        rc = cli_usage_err(VERB, "which dead letters? give --all, their "
                                 "IDs (see 'echomq dead list') or filters "
                                 "(--older-than, --reason, --limit)");
    if (rc == CLI_OK && purge && !a.seen[O_YES])
        rc = cli_usage_err(VERB, "purging deletes every dead letter of the "
                                 "queue; add --yes to confirm");
    if (rc == CLI_OK && a.seen[O_COUNT])
        rc = cli_num(VERB, "--count", a.value[O_COUNT], 1, 10000000, &count);
    emq_conf_t *conf;
    emq_admin_t *admin;
    if ((rc = cli_admin_begin(VERB, rc, &a, 1, &conf, &admin)) != CLI_OK)
        return rc;
    emq_error err;
    emq_status st = EMQ_OK;
    char target[400];
    if (is_list) {
        rc = list(admin, conf, &a, count);
    } else if (requeue) {
        rc = requeue_letters(admin, conf, &a, filtered);
    } else {
        uint64_t removed = 0;
        st = emq_admin_dead_purge(admin, &removed, &err);
        if (st == EMQ_OK)
            printf("purged %llu dead letter%s of %s\n",
                   (unsigned long long)removed, removed == 1 ? "" : "s",
                   cli_target(admin, a.pos[1], target, sizeof target));
        else
            rc = cli_runtime_err(conf, st, &err, "purging dead letters");
    }
    emq_admin_destroy(admin);
    emq_conf_destroy(conf);
    free(a.pos);
    return rc;
}
