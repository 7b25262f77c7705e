/* SPDX-License-Identifier: BSD-3-Clause */
/* cmd_ls.c: `echomq ls`, the queues on a server, one line each.
 *
 * The library finds the queues (emq_admin_scan_queues: SCAN on every
 * master, at most LS_MAX), then describes each (emq_admin_describe):
 * length, groups, total lag, pending and dead letters.
 */
#include "cli.h"

#include <stdlib.h>
#include <string.h>

static const char *const VERB = "ls";

/* The most queues listed. */
#define LS_MAX 10000

static const cli_optdoc opts[] = {
    {O_JSON, NULL,
     "each queue's document (as 'echomq info --json' writes it), one per "
     "line"},
    CLI_OPTS_END,
};

CLI_VERB(
    ls, "the queues, one line each", "echomq ls [PATTERN] [--json]",
    "Lists the queues on the server (their streams emq:{NAME}, and queues\n"
    "whose entries all wait delayed), one line each: length, groups,\n"
    "total lag, pending, dead letters, delayed entries, entries held by\n"
    "priority ('-': the queue has no priorities), and the group\n"
    "limits (the one limited group's RATE/s,MAX, or how many groups are\n"
    "limited; 'echomq info' names them). PATTERN is a glob on the queue\n"
    "name (default *). A topic's partitions are the queues NAME.0 ..\n"
    "NAME.<P-1>.\n",
    opts,
    "Examples:\n"
    "  echomq ls\n"
    "  echomq ls 'orders*' --json\n");

int cli_scan_queues(const emq_conf_t *conf, const char *pattern, char ***names,
                    size_t *n) {
    char **found = NULL;
    size_t nfound = 0;
    emq_error err;
    emq_status st =
        emq_admin_scan_queues(conf, pattern, LS_MAX, &found, &nfound, &err);
    if (st != EMQ_OK)
        return cli_runtime_err(conf, st, &err, "listing the queues (SCAN)");
    char **grown = realloc(*names, (*n + nfound + 1) * sizeof *grown);
    int rc = grown ? CLI_OK : cli_err(CLI_FAIL, "out of memory");
    if (grown)
        *names = grown;
    for (size_t i = 0; rc == CLI_OK && i < nfound; i++)
        if (((*names)[*n] = strdup(found[i])) != NULL)
            (*n)++;
        else
            rc = cli_err(CLI_FAIL, "out of memory");
    emq_queue_names_free(found, nfound);
    return rc;
}

int cli_check_patterns(const char *verb, char *const *patterns, int npatterns) {
    for (int i = 0; i < npatterns; i++)
        if (strchr(patterns[i], '{') || strchr(patterns[i], '}'))
            return cli_usage_err(
                verb, "'%s': a queue name or glob has no braces", patterns[i]);
    return CLI_OK;
}

void cli_admins_free(cli_admins *k) {
    for (size_t i = 0; i < k->n; i++) {
        emq_admin_destroy(k->admin[i]);
        emq_conf_destroy(k->conf[i]);
        free(k->queue[i]);
    }
    free(k->queue);
    free(k->conf);
    free(k->admin);
    free(k->used);
    memset(k, 0, sizeof *k);
}

/* Makes room for one more handle in k; 0, or -1 out of memory. */
static int admins_room(cli_admins *k) {
    if (k->n < k->cap)
        return 0;
    size_t cap = k->cap ? k->cap * 2 : 16;
    char **q = realloc(k->queue, cap * sizeof *q);
    if (q != NULL)
        k->queue = q;
    emq_conf_t **c = realloc(k->conf, cap * sizeof *c);
    if (c != NULL)
        k->conf = c;
    emq_admin_t **a = realloc(k->admin, cap * sizeof *a);
    if (a != NULL)
        k->admin = a;
    unsigned char *u = realloc(k->used, cap * sizeof *u);
    if (u != NULL)
        k->used = u;
    if (q == NULL || c == NULL || a == NULL || u == NULL)
        return -1;
    k->cap = cap;
    return 0;
}

/* The handle of queue in keep, opened (from base, nothing printed) and
 * kept there when it is new; or, without keep, a new one for the caller
 * to close. */
static emq_status admin_of(const emq_conf_t *base, const char *queue,
                           cli_admins *keep, emq_conf_t **conf,
                           emq_admin_t **admin, emq_error *err) {
    for (size_t i = 0; keep && i < keep->n; i++)
        if (strcmp(keep->queue[i], queue) == 0) {
            keep->used[i] = 1;
            *conf = keep->conf[i];
            *admin = keep->admin[i];
            return EMQ_OK;
        }
    *admin = NULL;
    *conf = NULL;
    char *name = keep ? strdup(queue) : NULL;
    emq_conf_t *qc = emq_conf_dup(base);
    emq_status st = (keep && (admins_room(keep) != 0 || name == NULL)) ||
                            qc == NULL
                        ? EMQ_ENOMEM
                        : emq_conf_set(qc, "queue", queue, err);
    if (st == EMQ_ENOMEM)
        snprintf(err->message, sizeof err->message, "out of memory");
    if (st == EMQ_OK)
        st = emq_admin_new(qc, admin, err);
    if (st != EMQ_OK || keep == NULL) {
        free(name);
        if (st != EMQ_OK)
            emq_conf_destroy(qc);
        else
            *conf = qc;
        return st;
    }
    *conf = qc;
    keep->queue[keep->n] = name;
    keep->conf[keep->n] = *conf;
    keep->admin[keep->n] = *admin;
    keep->used[keep->n++] = 1;
    return EMQ_OK;
}

/* 1 when st, from opening or describing one queue, is that queue's own
 * problem (a name the library refuses, a key of another type, a reply it
 * cannot read), so the others are still described; 0 when the server
 * itself failed (unreachable, a refused login, out of memory). */
static int queue_own_failure(emq_status st) {
    return st == EMQ_EINVAL || st == EMQ_ESERVER || st == EMQ_EPROTO ||
           st == EMQ_ELIMIT;
}

/* Closes the kept handles of queues the last description did not find. */
static void admins_prune(cli_admins *k) {
    size_t kept = 0;
    for (size_t i = 0; i < k->n; i++) {
        if (!k->used[i]) {
            emq_admin_destroy(k->admin[i]);
            emq_conf_destroy(k->conf[i]);
            free(k->queue[i]);
            continue;
        }
        k->queue[kept] = k->queue[i];
        k->conf[kept] = k->conf[i];
        k->admin[kept] = k->admin[i];
        kept++;
    }
    k->n = kept;
}

int cli_describe_queues(char **patterns, int npatterns, cli_admins *keep,
                        cli_described **rows, size_t *n, cli_skipped *skipped) {
    *rows = NULL;
    *n = 0;
    skipped->n = 0;
    skipped->first[0] = '\0';
    for (size_t i = 0; keep && i < keep->n; i++)
        keep->used[i] = 0;
    emq_conf_t *conf = cli_conf(NULL);
    if (conf == NULL)
        return CLI_USAGE;
    char **names = NULL;
    size_t nnames = 0;
    int rc = CLI_OK;
    for (int p = 0; rc == CLI_OK && p < (npatterns ? npatterns : 1); p++)
        rc = cli_scan_queues(conf, npatterns ? patterns[p] : "*", &names,
                             &nnames);
    *rows = calloc(nnames ? nnames : 1, sizeof **rows);
    if (*rows == NULL && rc == CLI_OK)
        rc = cli_err(CLI_FAIL, "out of memory");
    for (size_t i = 0; rc == CLI_OK && i < nnames; i++) {
        int dup = 0; /* a name two patterns matched is described once */
        for (size_t k = 0; k < *n && !dup; k++)
            dup = !strcmp((*rows)[k].queue, names[i]);
        for (size_t k = 0; k < i && !dup; k++)
            dup = names[k] != NULL && !strcmp(names[k], names[i]);
        if (dup)
            continue;
        emq_conf_t *qc = NULL;
        emq_admin_t *admin = NULL;
        emq_error err;
        emq_queue_info *info = NULL;
        emq_status st = admin_of(conf, names[i], keep, &qc, &admin, &err);
        if (st == EMQ_OK)
            st = emq_admin_describe(admin, &info, &err);
        if (st == EMQ_OK) {
            (*rows)[*n].queue = names[i];
            names[i] = NULL; /* the row owns it */
            (*rows)[(*n)++].info = info;
        } else if (queue_own_failure(st)) {
            /* Skipped and counted; the rest are still described. */
            if (skipped->n++ == 0)
                snprintf(skipped->first, sizeof skipped->first,
                         "queue '%.200s': %s", names[i], err.message);
        } else {
            rc =
                cli_runtime_err(qc ? qc : conf, st, &err, "describing a queue");
        }
        if (keep == NULL) {
            emq_admin_destroy(admin);
            emq_conf_destroy(qc);
        }
    }
    emq_conf_destroy(conf);
    if (keep != NULL && rc == CLI_OK)
        admins_prune(keep);
    for (size_t i = 0; i < nnames; i++)
        free(names[i]);
    free(names);
    return rc;
}

void cli_described_free(cli_described *rows, size_t n) {
    for (size_t i = 0; rows && i < n; i++) {
        free(rows[i].queue);
        emq_queue_info_free(rows[i].info);
    }
    free(rows);
}

static size_t queue_json(const void *ctx, char *buf, size_t size) {
    return emq_queue_info_json(ctx, buf, size);
}

void cli_held_text(const emq_queue_info *info, char *out, size_t size) {
    if (info->priorities)
        snprintf(out, size, "%llu", (unsigned long long)info->priorities->held);
    else
        snprintf(out, size, "-");
}

/* The LIMITS cell: "-" when no group has limits; the one limited group's
 * "RATE/s,MAX" ("-" for the one it lacks); else how many groups are
 * limited ("echomq info" names them). */
static void limits_text(const emq_queue_info *info, char *out, size_t size) {
    size_t limited = 0;
    const emq_group_limits *one = NULL;
    for (size_t g = 0; g < info->ngroups; g++) {
        const emq_group_limits *l = &info->groups[g].limits;
        if (l->rate > 0 || l->max_in_flight > 0) {
            limited++;
            one = l;
        }
    }
    if (limited == 0) {
        snprintf(out, size, "-");
    } else if (limited > 1) {
        snprintf(out, size, "%zu groups", limited);
    } else {
        char rate[24] = "-", maxf[24] = "-";
        if (one->rate > 0)
            snprintf(rate, sizeof rate, "%lld/s", (long long)one->rate);
        if (one->max_in_flight > 0)
            snprintf(maxf, sizeof maxf, "%lld", (long long)one->max_in_flight);
        snprintf(out, size, "%s,%s", rate, maxf);
    }
}

/* One queue's line: a table row, or with --json the library's document of
 * the queue (emq_queue_info_json) on one line. */
static int print_queue(const cli_described *q, int json) {
    const emq_queue_info *info = q->info;
    if (json)
        return cli_print_json(queue_json, info);
    long long lag = 0, pending = 0;
    int lag_known = 1;
    for (size_t g = 0; g < info->ngroups; g++) {
        pending += (long long)info->groups[g].pending;
        if (info->groups[g].lag < 0)
            lag_known = 0;
        else
            lag += info->groups[g].lag;
    }
    char shown[600], lag_text[24];
    cli_esc(q->queue, shown, sizeof shown);
    snprintf(lag_text, sizeof lag_text, lag_known ? "%lld" : "?", lag);
    char delayed[24] = "?"; /* not counted: ZCARD refused */
    if (info->delayed)
        snprintf(delayed, sizeof delayed, "%llu",
                 (unsigned long long)info->delayed->waiting);
    char limits[48], held[24];
    limits_text(info, limits, sizeof limits);
    cli_held_text(info, held, sizeof held);
    printf("%-30s %10llu %6zu %10s %10lld %8llu %8s %8s  %s\n", shown,
           (unsigned long long)info->length, info->ngroups, lag_text, pending,
           (unsigned long long)info->dead_length, delayed, held, limits);
    return CLI_OK;
}

int cmd_ls(int argc, char **argv) {
    cli_args a;
    int rc = cli_begin(VERB, argc, argv, &cli_verb_ls, 0, &a);
    if (rc != CLI_OK)
        return rc;
    if (a.npos > 1)
        rc = cli_usage_err(VERB, "unexpected argument '%s'", a.pos[1]);
    const char *pattern = a.npos ? a.pos[0] : "*";
    if (rc == CLI_OK && (strchr(pattern, '{') || strchr(pattern, '}')))
        rc = cli_usage_err(VERB, "PATTERN is a glob on queue names: braces "
                                 "are not part of a name");
    cli_described *rows = NULL;
    size_t n = 0;
    cli_skipped skipped;
    char *one[1] = {(char *)pattern};
    if (rc == CLI_OK)
        rc = cli_describe_queues(one, 1, NULL, &rows, &n, &skipped);
    int json = a.seen[O_JSON] > 0;
    if (rc == CLI_OK && !json)
        printf("%-30s %10s %6s %10s %10s %8s %8s %8s  %s\n", "QUEUE", "LENGTH",
               "GROUPS", "LAG", "PENDING", "DEAD", "DELAYED", "HELD", "LIMITS");
    for (size_t i = 0; i < n && rc == CLI_OK; i++)
        rc = print_queue(&rows[i], json);
    if (fflush(stdout) != 0 && rc == CLI_OK)
        rc = cli_write_failed();
    /* The rest are shown; the run still says it is not the whole. */
    if (rc == CLI_OK && skipped.n > 0)
        rc = cli_err(CLI_FAIL,
                     "%zu queue%s could not be described and %s left out; "
                     "the first: %s",
                     skipped.n, skipped.n == 1 ? "" : "s",
                     skipped.n == 1 ? "is" : "are", skipped.first);
    cli_described_free(rows, n);
    free(a.pos);
    return rc;
}
