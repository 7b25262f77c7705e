/* SPDX-License-Identifier: BSD-3-Clause */
/* gen_clidoc: the echomq program's option tables (src/cli, cli_optdoc),
 * printed for the documents, so docs/echomq.1 and docs/CLI.md can never
 * disagree with `echomq VERB --help`. scripts/clidoc.sh writes or checks
 * the documents with it.
 *
 * Usage:
 *   gen_clidoc FILE          FILE with every generated region rewritten:
 *                            the lines between a begin marker,
 *                            "<!-- clidoc md VERB -->" (a markdown table)
 *                            or ".\" clidoc man VERB" (roff .TP items),
 *                            and the next line holding "/clidoc". VERB
 *                            "global" is the global options.
 *                            "<!-- clidoc usage VERB -->" is the verb's
 *                            usage lines as a markdown code block,
 *                            ".\" clidoc synopsis VERB" the same as a
 *                            roff no-fill block.
 *                            "<!-- clidoc metrics exporter -->" is the
 *                            table of the metrics the exporter serves
 *                            (cli_exporter_metrics).
 *   gen_clidoc help VERB     what `echomq VERB --help` prints
 *   gen_clidoc verbs         the verbs, one a line
 *   gen_clidoc options VERB  how help shows each option of VERB ("global":
 *                            the global options), one a line
 *
 * Exit status: 0, 1 on an unknown verb, an unterminated region or an I/O
 * error (named on stderr), 2 on a usage error.
 */
#include "cli.h"

#include <stdlib.h>
#include <string.h>

/* The table of name: a verb's options, or the global ones. */
static const cli_optdoc *table_of(const char *name) {
    if (!strcmp(name, "global"))
        return cli_global_doc;
    const cli_verb *v = cli_verb_find(name);
    return v ? v->opts : NULL;
}

/* Markdown cell text, shown as written: '|' would end the cell, '*' and
 * '_' start emphasis, '<' a tag (QUEUE.<P-1>), '`' code. */
static void md_text(FILE *out, const char *s) {
    for (; *s; s++) {
        if (strchr("|*_`\\", *s))
            fprintf(out, "\\%c", *s);
        else if (*s == '<')
            fputs("&lt;", out);
        else
            fputc(*s, out);
    }
}

/* Text inside a code span: only '|' needs escaping (a table cell). */
static void md_code(FILE *out, const char *s) {
    for (; *s; s++) {
        if (*s == '|')
            fputs("\\|", out);
        else
            fputc(*s, out);
    }
}

/* The exporter's metrics as a markdown table, in the order it serves
 * them, each meaning its HELP text. */
static void md_metrics(FILE *out) {
    fputs("| metric | type | labels | meaning |\n| --- | --- | --- | --- |\n",
          out);
    for (const cli_metric *m = cli_exporter_metrics; m->name; m++) {
        fputs("| `", out);
        md_code(out, m->name);
        fprintf(out, "` | %s | ", m->type);
        md_text(out, m->labels);
        fputs(" | ", out);
        md_text(out, m->help);
        fputs(" |\n", out);
    }
}

static void md_table(FILE *out, const cli_optdoc *t) {
    fputs("| option | meaning |\n| --- | --- |\n", out);
    for (const cli_optdoc *d = t; d->id != O_NONE; d++) {
        const cli_opt *o = &cli_options[d->id];
        fputs("| ", out);
        if (o->short_name)
            fprintf(out, "`-%c`, ", o->short_name);
        fprintf(out, "`--%s", o->name);
        if (d->arg) {
            fputc(' ', out);
            md_code(out, d->arg);
        }
        fputs("` | ", out);
        md_text(out, d->help);
        fputs(" |\n", out);
    }
}

/* roff text: a backslash is \e, a hyphen \- (a minus, as options are
 * typed); a line may not start with '.' or '\''. */
static void roff_text(FILE *out, const char *s) {
    if (*s == '.' || *s == '\'')
        fputs("\\&", out);
    for (; *s; s++) {
        if (*s == '\\')
            fputs("\\e", out);
        else if (*s == '-')
            fputs("\\-", out);
        else
            fputc(*s, out);
    }
}

/* A verb's usage lines as a roff no-fill block, each line escaped. */
static void man_synopsis(FILE *out, const char *usage) {
    fputs(".nf\n", out);
    for (const char *line = usage; *line;) {
        const char *nl = strchr(line, '\n');
        size_t n = nl ? (size_t)(nl - line) : strlen(line);
        char buf[512];
        snprintf(buf, sizeof buf, "%.*s", (int)(n < 511 ? n : 511), line);
        roff_text(out, buf);
        fputc('\n', out);
        line += n + (nl != NULL);
    }
    fputs(".fi\n", out);
}

static void man_items(FILE *out, const cli_optdoc *t) {
    for (const cli_optdoc *d = t; d->id != O_NONE; d++) {
        const cli_opt *o = &cli_options[d->id];
        fputs(".TP\n", out);
        if (o->short_name)
            fprintf(out, "\\fB\\-%c\\fR, ", o->short_name);
        fputs("\\fB\\-\\-", out);
        roff_text(out, o->name);
        fputs("\\fR", out);
        if (d->arg) {
            fputs(" \\fI", out);
            roff_text(out, d->arg);
            fputs("\\fR", out);
        }
        fputc('\n', out);
        roff_text(out, d->help);
        fputc('\n', out);
    }
}

/* Copies path to stdout with each region regenerated. */
static int rewrite(const char *path) {
    FILE *in = fopen(path, "r");
    if (!in) {
        fprintf(stderr, "gen_clidoc: cannot open %s\n", path);
        return 1;
    }
    char line[4096];
    unsigned long n = 0, begun = 0;
    int inside = 0, rc = 0;
    while (fgets(line, sizeof line, in)) {
        n++;
        if (inside) {
            if (strstr(line, "/clidoc")) {
                inside = 0;
                fputs(line, stdout);
            }
            continue;
        }
        fputs(line, stdout);
        const char *m = strstr(line, "clidoc ");
        static const char *const kinds[] = {"md ", "man ", "usage ",
                                            "synopsis ", "metrics "};
        int kind = -1;
        for (int k = 0; m && k < 5; k++)
            if (!strncmp(m + 7, kinds[k], strlen(kinds[k])))
                kind = k;
        if (kind < 0)
            continue;
        char name[64];
        if (sscanf(m + 7 + strlen(kinds[kind]), "%63[a-z]", name) != 1) {
            fprintf(stderr, "gen_clidoc: %s:%lu: a marker without a verb\n",
                    path, n);
            rc = 1;
            break;
        }
        const cli_optdoc *t = table_of(name);
        if (!t) {
            fprintf(stderr, "gen_clidoc: %s:%lu: unknown verb '%s'\n", path, n,
                    name);
            rc = 1;
            break;
        }
        if (kind == 4 && strcmp(name, "exporter") != 0) {
            fprintf(stderr, "gen_clidoc: %s:%lu: no metrics for '%s'\n", path,
                    n, name);
            rc = 1;
            break;
        }
        if (kind == 4)
            md_metrics(stdout);
        else if (kind == 1)
            man_items(stdout, t);
        else if (kind == 0)
            md_table(stdout, t);
        else if (cli_verb_find(name) && kind == 3)
            man_synopsis(stdout, cli_verb_find(name)->usage);
        else if (cli_verb_find(name))
            printf("```\n%s\n```\n", cli_verb_find(name)->usage);
        else {
            fprintf(stderr, "gen_clidoc: %s:%lu: no usage for '%s'\n", path, n,
                    name);
            rc = 1;
            break;
        }
        inside = 1;
        begun = n;
    }
    if (rc == 0 && inside) {
        fprintf(stderr, "gen_clidoc: %s:%lu: region without its /clidoc end\n",
                path, begun);
        rc = 1;
    }
    if (ferror(in)) {
        fprintf(stderr, "gen_clidoc: reading %s failed\n", path);
        rc = 1;
    }
    fclose(in);
    return rc;
}

int main(int argc, char **argv) {
    int rc;
    if (argc == 2 && !strcmp(argv[1], "verbs")) {
        for (size_t i = 0; cli_verbs[i]; i++)
            puts(cli_verbs[i]->name);
        rc = 0;
    } else if (argc == 3 && !strcmp(argv[1], "help")) {
        const cli_verb *v = cli_verb_find(argv[2]);
        if (!v) {
            fprintf(stderr, "gen_clidoc: unknown verb '%s'\n", argv[2]);
            return 1;
        }
        cli_help_print(stdout, v);
        rc = 0;
    } else if (argc == 3 && !strcmp(argv[1], "options")) {
        const cli_optdoc *t = table_of(argv[2]);
        if (!t) {
            fprintf(stderr, "gen_clidoc: unknown verb '%s'\n", argv[2]);
            return 1;
        }
        for (; t->id != O_NONE; t++) {
            char label[64];
            puts(cli_opt_label(t, label, sizeof label));
        }
        rc = 0;
    } else if (argc == 2 && argv[1][0] != '-') {
        rc = rewrite(argv[1]);
    } else {
        fprintf(stderr, "usage: gen_clidoc FILE | help VERB | options VERB | "
                        "verbs\n");
        return 2;
    }
    if (fflush(stdout) != 0 || ferror(stdout)) {
        fprintf(stderr, "gen_clidoc: writing failed\n");
        return 1;
    }
    return rc;
}
