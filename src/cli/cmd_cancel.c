/* SPDX-License-Identifier: BSD-3-Clause */
/* cmd_cancel.c: `echomq cancel QUEUE ID...`, entries taken back before any
 * group was handed them.
 *
 * The IDs are delayed entries' handles (what `produce --delay --print-ids`
 * printed) and stream IDs; emq_admin_cancel removes, in one atomic step
 * per EMQ_CANCEL_MAX of them, those still waiting or not yet handed to any
 * group, and says what it did with each: one line per ID. Exit 0 when
 * every ID was removed, 1 when some was not (handed out already, or not
 * there), 2 for an ID of neither shape (nothing is cancelled then).
 */
#include "cli.h"

#include <stdlib.h>
#include <string.h>

static const char *const VERB = "cancel";

static const cli_optdoc opts[] = {
    CLI_OPT_PARTITIONS("with --partition: the partition's IDs"),
    {O_PARTITION, "I",
     "on a topic, the partition the IDs are from (0..P-1): required, as "
     "handles and IDs repeat across partitions"},
    CLI_OPTS_END,
};

CLI_VERB(cancel, "take back entries no group was handed yet",
         "echomq cancel QUEUE ID...",
         "Removes each ID from QUEUE if no consumer group has been handed it:\n"
         "a delayed entry's handle (delayed-<digits>, printed by 'produce\n"
         "--delay --print-ids') while it waits, or a stream ID (ms-seq) that\n"
         "every group's cursor is still below. Anything else is left alone.\n"
         "One line per ID says what happened: removed, delivered (a group\n"
         "has been handed it, or skipped it: left alone) or missing (not\n"
         "waiting and not in the stream: moved to the stream already, and\n"
         "then cancelled by its stream ID, or cancelled, trimmed, never\n"
         "there). Exit 0 when every ID was removed, 1 when one was not.\n",
         opts,
         "Example:\n"
         "  id=$(echomq produce jobs --delay 60000 --print-ids task=mail)\n"
         "  echomq cancel jobs \"$id\"\n");

/* The word an outcome prints as. */
static const char *outcome_word(emq_cancel_outcome o) {
    switch (o) {
    case EMQ_CANCEL_REMOVED:
        return "removed";
    case EMQ_CANCEL_DELIVERED:
        return "delivered (left alone)";
    default:
        return "missing";
    }
}

/* The handle IDs go to: the queue's, or --partition's of a topic. NULL
 * after printing why. */
static emq_admin_t *target_of(emq_admin_t *admin, const cli_args *a) {
    int parts = emq_admin_partition_count(admin);
    if (a->seen[O_PARTITION] && parts == 0) {
        cli_usage_err(VERB,
                      "--partition names a partition of a topic, and '%s' "
                      "is a queue",
                      a->pos[0]);
        return NULL;
    }
    if (parts == 0)
        return admin;
    if (!a->seen[O_PARTITION]) {
        cli_usage_err(VERB,
                      "IDs repeat across the %d partitions of topic '%s': "
                      "name the partition with --partition I",
                      parts, a->pos[0]);
        return NULL;
    }
    long long only;
    if (cli_num(VERB, "--partition", a->value[O_PARTITION], 0, parts - 1,
                &only) != CLI_OK)
        return NULL;
    return emq_admin_partition(admin, (int)only);
}

/* The usage checks beside QUEUE: at least one ID. */
static int check_usage(cli_args *a) {
    if (a->npos < 2)
        return cli_usage_err(VERB, "give the IDs to cancel after QUEUE");
    return CLI_OK;
}

int cmd_cancel(int argc, char **argv) {
    cli_args a;
    int rc = cli_begin_check(VERB, argc, argv, &cli_verb_cancel,
                             "echomq cancel QUEUE ID...", check_usage, &a);
    if (rc != CLI_OK)
        return rc;
    emq_conf_t *conf;
    emq_admin_t *admin;
    if ((rc = cli_admin_begin(VERB, rc, &a, 0, &conf, &admin)) != CLI_OK)
        return rc;
    emq_admin_t *h = target_of(admin, &a);
    size_t nids = (size_t)(a.npos - 1);
    emq_cancel_outcome *oc = calloc(nids, sizeof *oc);
    if (h == NULL)
        rc = CLI_USAGE;
    else if (oc == NULL)
        rc = cli_err(CLI_FAIL, "out of memory");
    uint64_t removed = 0;
    for (size_t at = 0; rc == CLI_OK && at < nids; at += EMQ_CANCEL_MAX) {
        size_t n = nids - at < EMQ_CANCEL_MAX ? nids - at : EMQ_CANCEL_MAX;
        uint64_t one = 0;
        emq_error err;
        emq_status st = emq_admin_cancel(h, (const char *const *)a.pos + 1 + at,
                                         n, oc + at, &one, &err);
        if (st == EMQ_EINVAL)
            rc = cli_err(CLI_USAGE, "%s", err.message);
        else if (st != EMQ_OK)
            rc = cli_runtime_err(conf, st, &err, "cancelling");
        removed += one;
        for (size_t i = at; rc == CLI_OK && i < at + n; i++) {
            char shown[128];
            printf("%s %s\n", cli_esc(a.pos[1 + i], shown, sizeof shown),
                   outcome_word(oc[i]));
        }
    }
    char target[400];
    if (rc == CLI_OK) {
        cli_note("cancelled %llu of %zu on %s", (unsigned long long)removed,
                 nids, cli_target(admin, a.pos[0], target, sizeof target));
        if (removed < nids)
            rc = CLI_FAIL;
    }
    free(oc);
    emq_admin_destroy(admin);
    emq_conf_destroy(conf);
    free(a.pos);
    return rc;
}
