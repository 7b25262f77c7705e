/* SPDX-License-Identifier: BSD-3-Clause */
/* cmd_priorities.c: `echomq priorities QUEUE [--age MS]`, a queue's held
 * entries by level, and its aging step.
 *
 * emq_admin_priorities reads (and with --age first sets) the queue's
 * priority record and its held counts: one line per level with entries
 * held, then the aging rule. A queue without priorities says so (exit 0);
 * --age gives it priorities.
 */
#include "cli.h"

#include <stdlib.h>

static const char *const VERB = "priorities";

static const cli_optdoc opts[] = {
    {O_AGE, "MS",
     "set the aging step first: an entry held MS longer than another counts "
     "one level more urgent, so the least urgent are not starved; 0: strict "
     "order (the default). Applies to entries held after it is set; gives "
     "the queue priorities if it had none"},
    {O_JSON, NULL,
     "one JSON object: age_ms, held, held_at (by level); null without "
     "priorities"},
    CLI_OPT_PARTITIONS("the sums over every partition (--age sets each)"),
    CLI_OPTS_END,
};

CLI_VERB(priorities, "a queue's held entries by priority, and its aging",
         "echomq priorities QUEUE [--age MS] [--json]",
         "Shows how many entries of QUEUE are held by priority level (0, the\n"
         "most urgent, to 9), waiting for a consumer's read, which takes the\n"
         "most urgent first, and the aging rule. Entries get a priority with\n"
         "'echomq produce --priority P' (emq_produce_opts.priority).\n",
         opts,
         "Examples:\n"
         "  echomq priorities jobs\n"
         "  echomq priorities jobs --age 60000\n");

int cmd_priorities(int argc, char **argv) {
    cli_args a;
    int rc = cli_begin(VERB, argc, argv, &cli_verb_priorities, 1, &a);
    if (rc != CLI_OK)
        return rc;
    long long age = -1;
    if (a.seen[O_AGE])
        rc = cli_num(VERB, "--age", a.value[O_AGE], 0, 1LL << 53, &age);
    emq_conf_t *conf;
    emq_admin_t *admin;
    if ((rc = cli_admin_begin(VERB, rc, &a, 0, &conf, &admin)) != CLI_OK)
        return rc;
    emq_priority_info p;
    int has = 0;
    emq_error err;
    emq_status st = emq_admin_priorities(admin, age, &p, &has, &err);
    if (st != EMQ_OK) {
        rc = cli_runtime_err(conf, st, &err, "reading the priorities");
    } else if (a.seen[O_JSON] && !has) {
        printf("null\n");
    } else if (a.seen[O_JSON]) {
        printf("{\"age_ms\":%lld,\"held\":%llu,\"held_at\":[",
               (long long)p.age_ms, (unsigned long long)p.held);
        for (int l = 0; l < EMQ_PRIORITY_LEVELS; l++)
            printf("%s%llu", l ? "," : "", (unsigned long long)p.held_at[l]);
        printf("]}\n");
    } else if (!has) {
        printf("queue %s has no priorities (no entry was given one)\n",
               a.pos[0]);
    } else {
        printf("%-6s %10s\n", "LEVEL", "HELD");
        for (int l = 0; l < EMQ_PRIORITY_LEVELS; l++)
            if (p.held_at[l] > 0)
                printf("%-6d %10llu\n", l, (unsigned long long)p.held_at[l]);
        printf("%-6s %10llu\n", "all", (unsigned long long)p.held);
        if (p.age_ms > 0)
            cli_note("aging: an entry held %lld ms longer than another "
                     "counts one level more urgent",
                     (long long)p.age_ms);
        else
            cli_note("strict order: no entry goes before a more urgent one");
    }
    if (fflush(stdout) != 0 && rc == CLI_OK)
        rc = cli_write_failed();
    emq_admin_destroy(admin);
    emq_conf_destroy(conf);
    free(a.pos);
    return rc;
}
