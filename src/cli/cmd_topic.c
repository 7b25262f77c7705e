/* SPDX-License-Identifier: BSD-3-Clause */
/* cmd_topic.c: `echomq topic create`, recording a topic's partition count
 * in the server (emq_admin_topic_create), so every verb finds it without
 * --partitions and a handle opened with another count is refused.
 */
#include "cli.h"

#include <stdlib.h>
#include <string.h>

static const char *const VERB = "topic";

static const cli_optdoc opts[] = {
    {O_PARTITIONS, "P", "the topic's partition count (required)"},
    CLI_OPTS_END,
};

CLI_VERB(topic, "record a topic's partition count (topic create)",
         "echomq topic create TOPIC --partitions P",
         "Records that TOPIC has P partitions (the queues TOPIC.0 ..\n"
         "TOPIC.<P-1>) in each partition's key emq:{TOPIC.<i>}:topic. Then\n"
         "produce, consume and info find the count without --partitions, and\n"
         "a producer or consumer given another count is refused. The first\n"
         "producer or consumer of a topic records it too. Idempotent; another\n"
         "count than the recorded one is exit 2.\n",
         opts, NULL);

int cmd_topic(int argc, char **argv) {
    cli_args a;
    int rc = cli_begin(VERB, argc, argv, &cli_verb_topic, 0, &a);
    if (rc != CLI_OK)
        return rc;
    if (a.npos < 1 || strcmp(a.pos[0], "create") != 0)
        rc = cli_usage_err(VERB,
                           a.npos ? "unknown subcommand '%s' (create)"
                                  : "a subcommand is missing (create)%s",
                           a.npos ? a.pos[0] : "");
    else if (a.npos != 2)
        rc = cli_usage_err(
            VERB, a.npos < 2 ? "TOPIC is missing" : "unexpected argument '%s'",
            a.npos < 2 ? "" : a.pos[2]);
    else
        rc = cli_require(VERB, &a, O_PARTITIONS, "--partitions",
                         "how many partitions the topic has (2 or more)");
    long long p = 0;
    if (rc == CLI_OK)
        rc = cli_num(VERB, "--partitions", a.value[O_PARTITIONS], 2, 1024, &p);
    emq_conf_t *conf = NULL;
    emq_admin_t *admin = NULL;
    if (rc == CLI_OK)
        rc = cli_admin_open_args(VERB, a.pos[1], &a, &conf, &admin);
    if (rc == CLI_OK) {
        emq_error err;
        emq_status st = emq_admin_topic_create(admin, &err);
        if (st == EMQ_OK)
            printf("topic '%s': %lld partitions (queues %s.0 .. %s.%lld)\n",
                   a.pos[1], p, a.pos[1], a.pos[1], p - 1);
        else
            rc = st == EMQ_EINVAL
                     ? cli_err(CLI_USAGE, "%s", err.message)
                     : cli_runtime_err(conf, st, &err, "creating the topic");
    }
    emq_admin_destroy(admin);
    emq_conf_destroy(conf);
    free(a.pos);
    return rc;
}
