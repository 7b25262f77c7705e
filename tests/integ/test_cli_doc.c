/* SPDX-License-Identifier: BSD-3-Clause */
/* test_cli_doc.c: `echomq VERB --help` is printed from the verb's option
 * table, the one tools/gen_clidoc writes docs/echomq.1 and docs/CLI.md
 * from: for every verb the program's help equals the generator's, and it
 * shows every option of the table (gen_clidoc options VERB); the
 * overview lists every verb and global option. A flag that sets a
 * property takes the property table's bounds. */
#include "integ/cli_helpers.h"

#include <stdio.h>

/* Runs the gen_clidoc built beside the test runner with args (one string,
 * no shell metacharacters) and returns its stdout (malloc'd). */
static char *gen_clidoc(const char *args) {
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "%s", cli_path());
    char *slash = strrchr(cmd, '/');
    snprintf(slash + 1, sizeof cmd - (size_t)(slash + 1 - cmd), "gen_clidoc %s",
             args);
    FILE *p = popen(cmd, "r");
    ASSERT(p != NULL);
    size_t cap = 1 << 16, len = 0;
    char *out = malloc(cap);
    ASSERT(out != NULL);
    size_t n;
    while ((n = fread(out + len, 1, cap - 1 - len, p)) > 0) {
        len += n;
        if (len + 1 == cap) {
            cap *= 2;
            out = realloc(out, cap);
            ASSERT(out != NULL);
        }
    }
    out[len] = '\0';
    int st = pclose(p);
    if (st != 0)
        FAIL("'%s' failed (status %d); build it: cmake --build BUILD "
             "--target gen_clidoc",
             cmd, st);
    return out;
}

TEST(cli_help_is_the_option_table) {
    char *verbs = gen_clidoc("verbs");
    int nverbs = 0;
    for (char *save = NULL, *v = strtok_r(verbs, "\n", &save); v;
         v = strtok_r(NULL, "\n", &save), nverbs++) {
        char args[128];
        snprintf(args, sizeof args, "help %s", v);
        char *want = gen_clidoc(args);
        cli_result r;
        CLI(&r, NULL, v, "--help");
        ASSERT_EXIT(&r, 0);
        ASSERT_EQ_STR(r.err, "");
        ASSERT_EQ_STR(r.out, want);
        /* Every row of the table is in it, as its label. */
        snprintf(args, sizeof args, "options %s", v);
        char *labels = gen_clidoc(args);
        int nlabels = 0;
        for (char *s2 = NULL, *l = strtok_r(labels, "\n", &s2); l;
             l = strtok_r(NULL, "\n", &s2), nlabels++)
            ASSERT_CONTAINS(r.out, l);
        if (nlabels == 0)
            FAIL("verb %s documents no option", v);
        free(labels);
        free(want);
        cli_free(&r);
    }
    ASSERT_EQ_INT(nverbs, 17);
    free(verbs);

    /* The overview shows every global option of its table. */
    char *labels = gen_clidoc("options global");
    cli_result r;
    CLI(&r, NULL, "--help");
    ASSERT_EXIT(&r, 0);
    int n = 0;
    for (char *s2 = NULL, *l = strtok_r(labels, "\n", &s2); l;
         l = strtok_r(NULL, "\n", &s2), n++)
        ASSERT_CONTAINS(r.out, l);
    ASSERT(n >= 10);
    /* And every verb, from the same list. */
    char *names = gen_clidoc("verbs");
    for (char *s2 = NULL, *v = strtok_r(names, "\n", &s2); v;
         v = strtok_r(NULL, "\n", &s2)) {
        char row[64];
        snprintf(row, sizeof row, "\n  %-10s ", v);
        ASSERT_CONTAINS(r.out, row);
    }
    free(names);
    cli_free(&r);
    free(labels);
}

/* A flag that sets a property is held to the property table's bounds, and
 * says so naming the flag, before any server is asked. */
TEST(cli_flag_bounds_are_the_propertys) {
    cli_result r;
    CLI(&r, "redis://127.0.0.1:1", "consume", "q", "-g", "g", "-c", "c", "-s",
        "new", "--claim-idle", "50");
    ASSERT_EXIT(&r, 2);
    ASSERT_CONTAINS(r.err, "--claim-idle: '50' is not a whole number from "
                           "100 to ");
    cli_free(&r);
    /* The same value through -X gets the library's message. */
    CLI(&r, "redis://127.0.0.1:1", "consume", "q", "-g", "g", "-c", "c", "-s",
        "new", "-X", "claim.min_idle_ms=50");
    ASSERT_EXIT(&r, 2);
    ASSERT_CONTAINS(r.err, "claim.min_idle_ms '50': out of range 100-");
    cli_free(&r);
}
