/* SPDX-License-Identifier: BSD-3-Clause */
/* cmd_trim.c: `echomq trim QUEUE --acked [--maxlen N]`, ack-aware retention.
 *
 * Deletes only what no group still needs (emq_admin_trim_acked): below
 * the oldest pending or undelivered entry of every group, and with
 * --maxlen only as far as needed to get down to N entries. --acked is
 * required so that nobody mistakes this for a blind MAXLEN trim.
 */
#include "cli.h"

#include <stdlib.h>
#include <string.h>

static const char *const VERB = "trim";

static const cli_optdoc opts[] = {
    {O_ACKED, NULL, "required: delete only what no group needs"},
    {O_MAXLEN, "N", "keep at most N entries (as far as groups allow)"},
    CLI_OPT_PARTITIONS("every partition, --maxlen bounding each"),
    CLI_OPTS_END,
};

CLI_VERB(trim, "delete what no group still needs (--acked)",
         "echomq trim QUEUE --acked [--maxlen N]",
         "Ack-aware retention: deletes the entries of QUEUE that every group\n"
         "has processed (below the oldest entry some group still needs: its\n"
         "oldest pending entry, or the one after its last-delivered ID), in\n"
         "one atomic step. With --maxlen N, deletes only as many as needed to\n"
         "keep at most N entries, and never one a group still needs. A\n"
         "stream without groups is left alone. On a topic every partition is\n"
         "trimmed, a line each, then the totals.\n",
         opts,
         "Example:\n"
         "  echomq trim jobs --acked --maxlen 100000\n");

int cmd_trim(int argc, char **argv) {
    cli_args a;
    long long maxlen = -1;
    int rc = cli_begin(VERB, argc, argv, &cli_verb_trim, 1, &a);
    if (rc != CLI_OK)
        return rc;
    if (!a.seen[O_ACKED])
        rc = cli_usage_err(VERB, "--acked is required: echomq trims only "
                                 "entries that no group still needs");
    if (rc == CLI_OK && a.seen[O_MAXLEN])
        rc =
            cli_num(VERB, "--maxlen", a.value[O_MAXLEN], 0, INT64_MAX, &maxlen);
    emq_conf_t *conf;
    emq_admin_t *admin;
    if ((rc = cli_admin_begin(VERB, rc, &a, 0, &conf, &admin)) != CLI_OK)
        return rc;
    /* A topic: partition by partition, a line each, then the totals. */
    int parts = emq_admin_partition_count(admin);
    emq_trim_result sum;
    memset(&sum, 0, sizeof sum);
    sum.no_groups = 1;
    for (int i = parts > 0 ? 0 : -1; rc == CLI_OK && i < parts; i++) {
        emq_trim_result r;
        memset(&r, 0, sizeof r);
        emq_error err;
        emq_status st =
            emq_admin_trim_acked(i < 0 ? admin : emq_admin_partition(admin, i),
                                 maxlen, -1, &r, &err);
        if (st != EMQ_OK)
            rc = cli_runtime_err(conf, st, &err, "trimming");
        else if (i >= 0)
            printf("partition %d: removed %llu; oldest entry still needed: "
                   "%s; %llu kept\n",
                   i, (unsigned long long)r.removed,
                   r.no_groups      ? "- (no group)"
                   : r.floor.str[0] ? r.floor.str
                                    : "none",
                   (unsigned long long)r.held_back);
        sum.removed += r.removed;
        sum.held_back += r.held_back;
        sum.no_groups &= r.no_groups;
        if (i < 0)
            sum.floor = r.floor;
    }
    char target[400];
    cli_target(admin, a.pos[0], target, sizeof target);
    if (rc == CLI_OK && sum.no_groups)
        printf("%s has no consumer group; nothing removed (without a "
               "group echomq cannot tell what was processed)\n",
               target);
    else if (rc == CLI_OK)
        printf("removed %llu entr%s from %s; %s%s%s%llu entr%s kept because "
               "a group still needs them\n",
               (unsigned long long)sum.removed, sum.removed == 1 ? "y" : "ies",
               target, parts > 0 ? "" : "oldest entry still needed: ",
               parts > 0          ? ""
               : sum.floor.str[0] ? sum.floor.str
                                  : "none",
               parts > 0 ? "" : "; ", (unsigned long long)sum.held_back,
               sum.held_back == 1 ? "y" : "ies");
    emq_admin_destroy(admin);
    emq_conf_destroy(conf);
    free(a.pos);
    return rc;
}
