/* SPDX-License-Identifier: BSD-3-Clause */
/* cmd_functions.c: `echomq functions ls|load|rm`, echomq's function
 * library on the server (every master of a cluster).
 *
 * A thin wrapper over emq_admin_functions and _delete: one line per master
 * with the state of this build's library (and the other echomq versions
 * there); load puts it where it is missing (--replace: also over another
 * build's library of this version); rm deletes a library by name (an
 * older version once no process of it runs). Exit 1 when a master is
 * left without this build's library after load.
 */
#include "cli.h"

#include <stdlib.h>
#include <string.h>

static const char *const VERB = "functions";

static const cli_optdoc opts[] = {
    {O_REPLACE, NULL,
     "load: also replace a library of this version that another build "
     "loaded (its text differs; processes of that build then use EVAL "
     "until they are upgraded too)"},
    CLI_OPTS_END,
};

CLI_VERB(functions, "echomq's function library on the server: ls, load, rm",
         "echomq functions ls|load [--replace]|rm LIBRARY",
         "On Redis 7.0+ and Valkey echomq's scripts are one function library\n"
         "per echomq version (echomq_1, ...), called with FCALL, so that no\n"
         "credential needs EVAL (docs/SECURITY.md). A process whose user may\n"
         "load it does so when it is missing; otherwise load it here, as the\n"
         "operator, once per server (on every master of a cluster) and again\n"
         "after an upgrade. Versions live side by side: remove an old one\n"
         "with rm once none of its processes runs. 6.2 has no functions:\n"
         "scripts go by EVAL there.\n",
         opts,
         "Examples:\n"
         "  echomq functions ls\n"
         "  echomq functions load\n"
         "  echomq functions rm echomq_0\n");

static const char *state_text(emq_functions_state_kind k) {
    switch (k) {
    case EMQ_FUNCTIONS_LOADED:
        return "loaded";
    case EMQ_FUNCTIONS_OTHER_BUILD:
        return "another build's (load --replace)";
    case EMQ_FUNCTIONS_UNSUPPORTED:
        return "no functions on this server (EVAL)";
    case EMQ_FUNCTIONS_ABSENT:
        break;
    }
    return "not loaded";
}

static int show(const emq_conf_t *conf, emq_functions_action action) {
    emq_functions_state *s = NULL;
    size_t n = 0;
    emq_error err;
    emq_status st = emq_admin_functions(conf, action, &s, &n, &err);
    if (st != EMQ_OK)
        return cli_runtime_err(conf, st, &err,
                               action == EMQ_FUNCTIONS_SHOW
                                   ? "reading the function library"
                                   : "loading the function library");
    int rc = CLI_OK, missing = 0;
    printf("%-24s %-10s %-8s %s\n", "NODE", "LIBRARY", "CHANGED", "STATE");
    for (size_t i = 0; i < n; i++) {
        printf("%-24s %-10s %-8s %s", s[i].node, s[i].library,
               s[i].changed ? "loaded" : "-", state_text(s[i].state));
        if (s[i].others[0])
            printf("; other versions: %s", s[i].others);
        printf("\n");
        missing += s[i].state == EMQ_FUNCTIONS_ABSENT ||
                   s[i].state == EMQ_FUNCTIONS_OTHER_BUILD;
    }
    if (fflush(stdout) != 0)
        rc = cli_write_failed();
    if (rc == CLI_OK && missing && action != EMQ_FUNCTIONS_SHOW)
        rc = cli_err(CLI_FAIL,
                     "%zu master%s still without this build's library "
                     "(another build's is there: load --replace)",
                     (size_t)missing, missing == 1 ? " is" : "s are");
    emq_functions_states_free(s);
    return rc;
}

int cmd_functions(int argc, char **argv) {
    cli_args a;
    int rc = cli_begin(VERB, argc, argv, &cli_verb_functions, 0, &a);
    if (rc != CLI_OK)
        return rc;
    const char *sub = a.npos ? a.pos[0] : "";
    int want = !strcmp(sub, "rm") ? 2 : 1;
    if (a.npos < 1)
        rc = cli_usage_err(VERB, "a subcommand is missing (ls, load or rm)");
    else if (strcmp(sub, "ls") && strcmp(sub, "load") && strcmp(sub, "rm"))
        rc = cli_usage_err(VERB, "unknown subcommand '%s' (ls, load or rm)",
                           sub);
    else if ((size_t)a.npos < (size_t)want)
        rc = cli_usage_err(VERB, "rm needs the LIBRARY to delete");
    else if ((size_t)a.npos > (size_t)want)
        rc = cli_usage_err(VERB, "unexpected argument '%s'", a.pos[want]);
    else if (a.seen[O_REPLACE] && strcmp(sub, "load"))
        rc = cli_usage_err(VERB, "--replace goes with load");
    emq_conf_t *conf = rc == CLI_OK ? cli_conf(NULL) : NULL;
    if (rc == CLI_OK && conf == NULL)
        rc = CLI_USAGE;
    if (rc == CLI_OK && !strcmp(sub, "rm")) {
        size_t deleted = 0;
        emq_error err;
        emq_status st =
            emq_admin_functions_delete(conf, a.pos[1], &deleted, &err);
        if (st == EMQ_EINVAL)
            rc = cli_usage_err(VERB, "%s", err.message);
        else if (st != EMQ_OK)
            rc = cli_runtime_err(conf, st, &err, "deleting the library");
        else
            cli_note("deleted %s from %zu master%s", a.pos[1], deleted,
                     deleted == 1 ? "" : "s");
    } else if (rc == CLI_OK) {
        rc = show(conf, !strcmp(sub, "ls")  ? EMQ_FUNCTIONS_SHOW
                        : a.seen[O_REPLACE] ? EMQ_FUNCTIONS_REPLACE
                                            : EMQ_FUNCTIONS_LOAD);
    }
    emq_conf_destroy(conf);
    free(a.pos);
    return rc;
}
