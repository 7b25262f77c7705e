/* SPDX-License-Identifier: BSD-3-Clause */
/* help.c: the verbs, the global options' help, and the --help printer.
 *
 * Each verb's options and their help are one table (cli_optdoc, in its
 * cmd_*.c); the parser accepts what the table lists, --help prints it
 * here, and tools/gen_clidoc writes docs/echomq.1 and docs/CLI.md from
 * the same rows, so no option is described in two places.
 */
#include "cli.h"

#include <string.h>

const cli_verb *const cli_verbs[] = {
    &cli_verb_produce,   &cli_verb_consume,    &cli_verb_ls,
    &cli_verb_exporter,  &cli_verb_top,        &cli_verb_topic,
    &cli_verb_tail,      &cli_verb_info,       &cli_verb_pending,
    &cli_verb_group,     &cli_verb_consumers,  &cli_verb_dead,
    &cli_verb_cancel,    &cli_verb_priorities, &cli_verb_trim,
    &cli_verb_functions, &cli_verb_demo,       NULL,
};

const cli_optdoc cli_global_doc[] = {
    {O_URL, "URL",
     "server: redis://[user[:password]@]host[:port][/db], rediss://... "
     "(TLS) or unix:///path.sock[?db=N]; default $ECHOMQ_URL, else "
     "redis://127.0.0.1:6379. A password in it is erased from the "
     "process's argv at once and shown as *** in messages"},
    {O_USER, "NAME",
     "ACL user (the password comes only from the URL or $ECHOMQ_PASSWORD)"},
    {O_TLS_CA, "FILE",
     "CA certificates (PEM) to verify the server with, for rediss:// URLs"},
    {O_TLS_CERT, "FILE",
     "client certificate (PEM); needs --tls-key. An unreadable file is a "
     "usage error (exit 2)"},
    {O_TLS_KEY, "FILE", "client key (PEM) of --tls-cert"},
    {O_STREAM, "KEY",
     "a raw stream key in place of QUEUE, for any command (echomq info "
     "--stream 'events:raw'); its dead letters are KEY:dead"},
    {O_X, "NAME=VALUE",
     "set any library property of docs/CONFIGURATION.md (repeatable), "
     "validated by the library: an unknown name or a bad value is exit 2 "
     "naming it. Wins over a command's flags and defaults for that "
     "property. -X list prints every property, its default and what it "
     "does. url and password are refused (an -X value shows in ps; use -u "
     "and $ECHOMQ_PASSWORD)"},
    {O_QUIET, NULL, "no progress or summary lines (errors are still printed)"},
    {O_VERBOSE, NULL,
     "more detail: -v the library's info log, -vv (-v -v, --verbose=2) its "
     "debug log (the door, recovery pages, claim beats, lease renewals, "
     "reconnects); --verbose=N takes 0 to 3"},
    {O_HELP, NULL, "this help; 'echomq COMMAND --help' for a command"},
    {O_VERSION, NULL, "print the echomq and libechomq versions"},
    CLI_OPTS_END,
};

const cli_verb *cli_verb_find(const char *name) {
    for (size_t i = 0; cli_verbs[i]; i++)
        if (!strcmp(cli_verbs[i]->name, name))
            return cli_verbs[i];
    return NULL;
}

const char *cli_opt_label(const cli_optdoc *d, char *buf, size_t size) {
    const cli_opt *o = &cli_options[d->id];
    char letter[8] = "    ";
    if (o->short_name)
        snprintf(letter, sizeof letter, "-%c, ", o->short_name);
    snprintf(buf, size, "%s--%s%s%s", letter, o->name, d->arg ? " " : "",
             d->arg ? d->arg : "");
    return buf;
}

/* The column where help text starts, and the width it is wrapped to. */
#define HELP_COL 26
#define HELP_WIDTH 79

/* Prints text from column col (the cursor is there), wrapped at
 * HELP_WIDTH, continuation lines indented to indent; ends the line. */
static void wrap(FILE *out, const char *text, int col, int indent) {
    const char *p = text;
    while (*p) {
        const char *end = p;
        while (*end && *end != ' ')
            end++;
        int len = (int)(end - p);
        if (col > indent && col + 1 + len > HELP_WIDTH) {
            fprintf(out, "\n%*s", indent, "");
            col = indent;
        } else if (col > indent) {
            fputc(' ', out);
            col++;
        }
        fwrite(p, 1, (size_t)len, out);
        col += len;
        p = end;
        while (*p == ' ')
            p++;
    }
    fputc('\n', out);
}

void cli_help_options(FILE *out, const cli_optdoc *opts) {
    for (const cli_optdoc *d = opts; d->id != O_NONE; d++) {
        char label[64];
        cli_opt_label(d, label, sizeof label);
        int col = fprintf(out, "  %s", label);
        if (col > HELP_COL - 2) {
            fprintf(out, "\n%*s", HELP_COL, "");
            col = HELP_COL;
        } else {
            col += fprintf(out, "%*s", HELP_COL - col, "");
        }
        wrap(out, d->help, col, HELP_COL);
    }
}

void cli_help_verbs(FILE *out) {
    for (size_t i = 0; cli_verbs[i]; i++) {
        int col = fprintf(out, "  %-10s ", cli_verbs[i]->name);
        wrap(out, cli_verbs[i]->summary, col, col);
    }
}

void cli_help_print(FILE *out, const cli_verb *v) {
    fputs("usage: ", out);
    for (const char *p = v->usage; *p; p++) {
        fputc(*p, out);
        if (*p == '\n')
            fputs("       ", out);
    }
    fputc('\n', out);
    if (v->about)
        fprintf(out, "\n%s", v->about);
    if (v->opts[0].id != O_NONE) {
        fputs("\nOptions (and the global ones: 'echomq --help'):\n", out);
        cli_help_options(out, v->opts);
    }
    if (v->more)
        fprintf(out, "\n%s", v->more);
}
