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

static const cli_opt opts[] = {
    {"json", 0, 0, O_JSON},
    {"all", 0, 0, O_ALL},
    {"yes", 0, 0, O_YES},
    {"count", 0, 1, O_COUNT},
    {"follow", 'f', 0, O_FOLLOW},
    {"older-than", 0, 1, O_OLDER_THAN},
    {"reason", 0, 1, O_REASON},
    {"limit", 0, 1, O_LIMIT},
    {NULL, 0, 0, 0},
};

static void help(void) {
    printf(
        "usage: echomq dead list    QUEUE [--count N] [--json] [-f]\n"
        "       echomq dead requeue QUEUE --all | ID... | FILTERS\n"
        "       echomq dead purge   QUEUE --yes\n"
        "\n"
        "  list     the dead letters, oldest first (default at most 1000):\n"
        "           dead-letter ID, original ID, group, consumer, deliveries,\n"
        "           last failure reason and the entry's fields\n"
        "           -f: then print new dead letters as they come, until\n"
        "           SIGINT or SIGTERM (exit 0)\n"
        "  requeue  puts dead letters (--all, or the dead-letter IDs given)\n"
        "           back on the queue with their original fields (new IDs)\n"
        "           and removes them from the dead letters. FILTERS choose\n"
        "           them instead (they may be combined):\n"
        "             --older-than MS    dead for at least MS\n"
        "             --reason PATTERN   a last failure reason matching the\n"
        "                                glob PATTERN ('exit 3*', '*timeout*')\n"
        "             --limit N          at most N (the oldest first)\n"
        "  purge    deletes every dead letter (needs --yes)\n"
        "\n"
        "Examples:\n"
        "  echomq dead list jobs\n"
        "  echomq dead requeue jobs --all\n"
        "  echomq dead purge jobs --yes\n");
}

typedef struct letters {
    const emq_dead_letter *l;
    size_t n;
} letters;

static size_t letters_json(const void *ctx, char *buf, size_t size) {
    const letters *x = ctx;
    return emq_dead_letters_json(x->l, x->n, buf, size);
}

/* Prints a dead letter's fields as the JSON object emq_entry_json writes
 * for them (binary-safe). */
static void print_fields(const emq_dead_letter *d) {
    emq_entry e = {.id = "", .deliveries = 0, .fields = d->fields,
                   .nfields = d->nfields};
    char probe[1];
    size_t need = emq_entry_json(&e, probe, sizeof probe);
    char *buf = malloc(need + 1);
    if (buf == NULL) {
        fputs("?", stdout);
        return;
    }
    emq_entry_json(&e, buf, need + 1);
    const char *f = strstr(buf, "\"fields\":");
    if (f && need > 0) {
        f += 9;
        fwrite(f, 1, strlen(f) - 1, stdout); /* without the outer '}' */
    }
    free(buf);
}

/* Prints the dead letters after *last (NULL: from the first), at most
 * count, and moves *last to the newest printed. header: the table's
 * header line and the summary note (not while following). */
static int list_after(emq_admin_t *admin, const emq_conf_t *conf,
                      const cli_args *a, long long count, char *last,
                      int header) {
    emq_dead_letter *l = NULL;
    size_t n = 0;
    emq_error err;
    emq_status st = emq_admin_dead_list_after(admin, last[0] ? last : NULL,
                                              (size_t)count, &l, &n, &err);
    if (st != EMQ_OK)
        return cli_runtime_err(conf, st, &err, "listing the dead letters");
    int rc = CLI_OK;
    if (a->seen[O_JSON]) {
        letters x = {l, n};
        if (n)
            rc = cli_print_json(letters_json, &x);
    } else {
        if (header)
            printf("%-22s  %-22s  %-12s  %-12s  %10s  %-20s  %s\n",
                   "DEAD-ID", "ORIGIN-ID", "GROUP", "CONSUMER", "DELIVERIES",
                   "REASON", "FIELDS");
        for (size_t i = 0; i < n; i++) {
            /* Group, consumer and reason are the dead letter's own text:
             * escaped, so they cannot drive the terminal or forge rows. */
            char group[300], consumer[300], reason[1100];
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
        if (header)
            cli_note("%zu dead letter%s%s", n, n == 1 ? "" : "s",
                     n == (size_t)count
                         ? " (the --count limit; there may be more)"
                         : "");
        fflush(stdout);
    }
    if (n > 0)
        snprintf(last, EMQ_ID_MAX, "%s", l[n - 1].id.str);
    emq_dead_letters_free(l, n);
    return rc;
}

static atomic_int dead_stopping;

static void stop_following(void *opaque) {
    (void)opaque;
    atomic_store(&dead_stopping, 1);
}

/* dead list, and with -f the new ones every 500 ms until a stop. */
static int list(emq_admin_t *admin, const emq_conf_t *conf, const cli_args *a,
                long long count) {
    char last[EMQ_ID_MAX] = "";
    int rc = list_after(admin, conf, a, count, last, 1);
    if (rc != CLI_OK || !a->seen[O_FOLLOW])
        return rc;
    cli_on_stop_signal(stop_following, NULL);
    while (rc == CLI_OK && !atomic_load(&dead_stopping)) {
        for (int i = 0; i < 10 && !atomic_load(&dead_stopping); i++)
            usleep(50 * 1000);
        if (!atomic_load(&dead_stopping))
            rc = list_after(admin, conf, a, count, last, 0);
    }
    cli_signals_default();
    return rc;
}

/* The dead letters the requeue filters choose (dead-letter IDs, malloc'd
 * strings in *ids). */
static int choose(emq_admin_t *admin, const emq_conf_t *conf,
                  const cli_args *a, char ***ids, size_t *nids) {
    long long older = -1, limit = 0;
    int rc = CLI_OK;
    if (a->seen[O_OLDER_THAN])
        rc = cli_num(VERB, "--older-than", a->value[O_OLDER_THAN], 0,
                     INT64_MAX, &older);
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
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    long long now_ms = (long long)now.tv_sec * 1000 + now.tv_nsec / 1000000;
    *ids = calloc(n ? n : 1, sizeof **ids);
    if (*ids == NULL) {
        emq_dead_letters_free(l, n);
        return cli_err(CLI_FAIL, "out of memory");
    }
    for (size_t i = 0; i < n; i++) {
        if (limit > 0 && (long long)*nids >= limit)
            break;
        long long at = strtoll(l[i].id.str, NULL, 10);
        if (older >= 0 && now_ms - at < older)
            continue;
        if (a->seen[O_REASON] &&
            fnmatch(a->value[O_REASON], l[i].reason ? l[i].reason : "", 0) !=
                0)
            continue;
        if (((*ids)[*nids] = strdup(l[i].id.str)) == NULL) {
            rc = cli_err(CLI_FAIL, "out of memory");
            break;
        }
        (*nids)++;
    }
    emq_dead_letters_free(l, n);
    return rc;
}

int cmd_dead(int argc, char **argv) {
    cli_args a;
    long long count = 1000;
    int rc = cli_begin(VERB, argc, argv, opts, help, 0, &a);
    if (rc != CLI_OK)
        return rc == CLI_DONE ? CLI_OK : rc;
    if (a.npos >= 1)
        cli_stream_queue(&a, 1);
    const char *sub = rc == CLI_OK && a.npos ? a.pos[0] : "";
    int is_list = !strcmp(sub, "list"), requeue = !strcmp(sub, "requeue"),
        purge = !strcmp(sub, "purge");
    if (rc == CLI_OK && a.npos == 0)
        rc = cli_usage_err(VERB, "a subcommand is missing (list, requeue, "
                                 "purge)");
    else if (rc == CLI_OK && !is_list && !requeue && !purge)
        rc = cli_usage_err(VERB, "unknown subcommand '%s' (list, requeue, "
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
    if (rc == CLI_OK && requeue && !a.seen[O_ALL] && !filtered &&
        a.npos == 2)
        rc = cli_usage_err(VERB, "which dead letters? give --all, their "
                                 "IDs (see 'echomq dead list') or filters "
                                 "(--older-than, --reason, --limit)");
    if (rc == CLI_OK && purge && !a.seen[O_YES])
        rc = cli_usage_err(VERB, "purging deletes every dead letter of the "
                                 "queue; add --yes to confirm");
    if (rc == CLI_OK && a.seen[O_COUNT])
        rc = cli_num(VERB, "--count", a.value[O_COUNT], 1, 10000000, &count);
    emq_conf_t *conf = NULL;
    emq_admin_t *admin = NULL;
    if (rc == CLI_OK)
        rc = cli_admin_open(VERB, a.pos[1], &conf, &admin);
    if (rc != CLI_OK) {
        free(a.pos);
        return rc;
    }
    emq_error err;
    emq_status st = EMQ_OK;
    if (is_list) {
        rc = list(admin, conf, &a, count);
    } else if (requeue) {
        uint64_t moved = 0;
        char **chosen = NULL;
        size_t nchosen = 0;
        if (filtered)
            rc = choose(admin, conf, &a, &chosen, &nchosen);
        if (rc != CLI_OK)
            st = EMQ_OK;
        else if (filtered && nchosen == 0)
            st = EMQ_OK; /* none matches: nothing moves (nids 0 is all) */
        else if (filtered)
            st = emq_admin_dead_requeue(admin, (const char *const *)chosen,
                                        nchosen, &moved, &err);
        else
            st = emq_admin_dead_requeue(admin,
                                        (const char *const *)(a.pos + 2),
                                        (size_t)(a.npos - 2), &moved, &err);
        for (size_t i = 0; i < nchosen; i++)
            free(chosen[i]);
        free(chosen);
        if (rc == CLI_OK && (st == EMQ_OK || st == EMQ_EINVAL))
            printf("requeued %llu dead letter%s onto queue '%s'\n",
                   (unsigned long long)moved, moved == 1 ? "" : "s", a.pos[1]);
        if (st == EMQ_EINVAL)
            rc = cli_err(CLI_FAIL, "%s", err.message);
        else if (st != EMQ_OK)
            rc = cli_runtime_err(conf, st, &err, "requeueing dead letters");
    } else {
        uint64_t removed = 0;
        st = emq_admin_dead_purge(admin, &removed, &err);
        if (st == EMQ_OK)
            printf("purged %llu dead letter%s of queue '%s'\n",
                   (unsigned long long)removed, removed == 1 ? "" : "s",
                   a.pos[1]);
        else
            rc = cli_runtime_err(conf, st, &err, "purging dead letters");
    }
    emq_admin_destroy(admin);
    emq_conf_destroy(conf);
    free(a.pos);
    return rc;
}
