/* SPDX-License-Identifier: BSD-3-Clause */
/* main.c: the echomq command-line tool, "kcat for Redis Streams".
 *
 * Reads the global options that come before the verb, then hands the rest
 * of argv to the verb (cmd_*.c), which parses its own options and the
 * global ones again (they are accepted after the verb too). Uses only the
 * public header, like any program outside the library. Exit codes and
 * output formats are documented in docs/CLI.md and docs/echomq.1.
 */
#include "cli.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>

void cli_help_overview(FILE *out) {
    fprintf(out, "usage: echomq [global options] <command> [options]\n"
                 "\n"
                 "echomq: reliable work queues on Redis and Valkey Streams.\n"
                 "\n"
                 "Commands ('echomq COMMAND --help' for each):\n");
    cli_help_verbs(out);
    fprintf(out, "\n"
                 "Global options (before or after the command):\n");
    cli_help_options(out, cli_global_doc);
    fprintf(out, "\n"
                 "Exit status: 0 success, 1 runtime failure, 2 usage error.\n"
                 "Documentation: docs/CLI.md, man echomq.\n");
}

static int version(void) {
    unsigned v = emq_version();
    printf("echomq %s (libechomq %u.%u.%u)\n", EMQ_VERSION_STRING,
           (v >> 16) & 0xff, (v >> 8) & 0xff, v & 0xff);
    return CLI_OK;
}

int main(int argc, char **argv) {
    /* A closed pipe shows up as a failed write, reported once. */
    signal(SIGPIPE, SIG_IGN);
    /* Global options before the verb. */
    cli_args pre;
    int i = 1;
    for (; i < argc && argv[i][0] == '-' && argv[i][1] != '\0'; i++) {
        /* The parser handles one option (and its value): the global
         * options have one table, args.c's. */
        int take = cli_global_words(argv[i]);
        if (i + take > argc)
            take = 1; /* the parser says what is missing */
        int rc = cli_parse(NULL, take, argv + i, NULL, &pre);
        free(pre.pos);
        if (rc != CLI_OK)
            return rc;
        /* -h alone or --help; inside grouped flags (-vh) it is taken as
         * a flag and the verb still comes, as it always did. */
        if (pre.seen[O_HELP] && (argv[i][1] == '-' || argv[i][2] == '\0')) {
            cli_help_overview(stdout);
            return CLI_OK;
        }
        if (pre.seen[O_VERSION])
            return version();
        i += take - 1;
    }
    if (i >= argc) {
        cli_help_overview(stderr);
        return CLI_USAGE;
    }
    const cli_verb *v = cli_verb_find(argv[i]);
    if (v) {
        int rc = v->run(argc - i - 1, argv + i + 1);
        return rc == CLI_DONE ? CLI_OK : rc; /* the help was asked for */
    }
    const char *names[32];
    size_t n = 0;
    for (; cli_verbs[n] && n < sizeof names / sizeof names[0]; n++)
        names[n] = cli_verbs[n]->name;
    const char *near = cli_closest(argv[i], names, n);
    if (near)
        return cli_usage_err(NULL,
                             "unknown command '%s' (did you mean "
                             "'%s'?)",
                             argv[i], near);
    return cli_usage_err(NULL, "unknown command '%s'", argv[i]);
}
