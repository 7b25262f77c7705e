/* SPDX-License-Identifier: BSD-3-Clause */
/* args.c: option parsing, configuration and error reporting for every verb.
 *
 * One small parser serves every verb: --name VALUE, --name=VALUE, -x VALUE,
 * flags, "--" to end options, and the global options accepted anywhere.
 * Every option is a row of one table (cli_options, made from cli.h's
 * lists); a verb's cli_optdoc table lists the ones it takes with their
 * help (help.c prints it), and a verb whose flags set
 * library properties gives a cli_prop table that cli_check_props and
 * cli_set_props walk.
 * Everything a user can get wrong on the command line is refused here with
 * exit 2 and one line naming the word and what to do, before any command
 * reaches the server. The password never appears on the command line of
 * the running process: a URL given with -u/--url is copied and its
 * password bytes are overwritten in argv. Runtime failures are turned into
 * one line that says what failed and what to check (cli_runtime_err).
 */
#include "cli.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

cli_global cli_g;

#define CLI_OPTION_ROW(name, word, letter, takes)                              \
    [O_##name] = {word, letter, takes, O_##name},
const cli_opt cli_options[O_TABLE_END] = {
    CLI_GLOBAL_OPTIONS(CLI_OPTION_ROW) CLI_VERB_OPTIONS(
        CLI_OPTION_ROW)[O_COUNT_N] = {"count", 'n', 1, O_COUNT},
};

/* The options a verb accepts: the global ones, then those of its list
 * opts (may be NULL), in that order; *at is the cursor (start at 0).
 * NULL at the end. */
static const cli_opt *next_opt(const cli_optdoc *opts, int *at) {
    int i = (*at)++;
    if (i + 1 < O_GLOBAL_END)
        return &cli_options[i + 1];
    i -= O_GLOBAL_END - 1;
    if (opts == NULL || opts[i].id == O_NONE)
        return NULL;
    return &cli_options[opts[i].id];
}

/* -X list: every property, its default, what it does and, for a number,
 * the range the library accepts. */
static void print_properties(void) {
    const char *name, *def, *doc;
    for (size_t i = 0; emq_conf_property(i, &name, &def, &doc) == EMQ_OK; i++) {
        printf("%-30s %-14s %s", name, def[0] ? def : "(none)", doc);
        int64_t min, max;
        if (emq_conf_property_range(i, &min, &max) == EMQ_OK)
            printf(" Range: %lld to %lld.", (long long)min, (long long)max);
        putchar('\n');
    }
}

/* -X name=value: kept for cli_conf, which lets the library validate it. */
static int take_property(char *value) {
    if (!strcmp(value, "list")) {
        print_properties();
        exit(CLI_OK);
    }
    char *eq = strchr(value, '=');
    if (eq == NULL || eq == value)
        return cli_usage_err(NULL,
                             "-X '%s' is not property=value (or -X "
                             "list for the properties)",
                             value);
    size_t n = (size_t)(eq - value);
    /* Out of the argv a secret would show in (ps): each has its own way
     * in (-u masks the URL's). */
    static const struct {
        const char *name, *instead;
    } secret_props[] = {
        {"url", "-u/--url or $ECHOMQ_URL"},
        {"password", "the URL or $ECHOMQ_PASSWORD"},
        {"sentinel.password", "$ECHOMQ_SENTINEL_PASSWORD"},
        {"tls.key_password", "$ECHOMQ_TLS_KEY_PASSWORD"},
    };
    for (size_t i = 0; i < sizeof secret_props / sizeof *secret_props; i++) {
        if (strlen(secret_props[i].name) != n ||
            strncmp(value, secret_props[i].name, n) != 0)
            continue;
        memset(eq + 1, '*', strlen(eq + 1));
        return cli_usage_err(NULL,
                             "-X %s is not taken: give it with %s (an -X "
                             "value shows in ps)",
                             secret_props[i].name, secret_props[i].instead);
    }
    const char **grown =
        realloc(cli_g.xprops, (size_t)(cli_g.nx + 1) * sizeof *grown);
    if (grown == NULL)
        return cli_err(CLI_FAIL, "out of memory");
    cli_g.xprops = grown;
    cli_g.xprops[cli_g.nx++] = value;
    return CLI_OK;
}

/* 1 when property name was given with -X. */
static int given_by_x(const char *name) {
    size_t n = strlen(name);
    for (int i = 0; i < cli_g.nx; i++)
        if (!strncmp(cli_g.xprops[i], name, n) && cli_g.xprops[i][n] == '=')
            return 1;
    return 0;
}

int cli_stream_queue(cli_args *a, int at) {
    if (cli_g.stream == NULL || a->npos < at)
        return CLI_OK;
    /* pos has room for argc + 1 words (cli_parse). */
    memmove(a->pos + at + 1, a->pos + at,
            (size_t)(a->npos - at) * sizeof *a->pos);
    a->pos[at] = (char *)cli_g.stream;
    a->npos++;
    return CLI_OK;
}

int cli_global_words(const char *w) {
    int at = 0;
    for (const cli_opt *o; (o = next_opt(NULL, &at)) != NULL;) {
        if (!o->takes_value)
            continue;
        if ((w[0] == '-' && w[1] == o->short_name && o->short_name &&
             w[2] == '\0') ||
            (w[0] == '-' && w[1] == '-' && !strcmp(w + 2, o->name)))
            return 2;
    }
    return 1;
}

/* Edit distance of a and b (bounded by small lengths: option names). */
static size_t edits(const char *a, const char *b) {
    size_t la = strlen(a), lb = strlen(b);
    if (la > 40 || lb > 40)
        return 99;
    size_t row[41];
    for (size_t j = 0; j <= lb; j++)
        row[j] = j;
    for (size_t i = 1; i <= la; i++) {
        size_t diag = row[0];
        row[0] = i;
        for (size_t j = 1; j <= lb; j++) {
            size_t up = row[j];
            size_t best = diag + (a[i - 1] != b[j - 1]);
            if (row[j] + 1 < best)
                best = row[j] + 1;
            if (row[j - 1] + 1 < best)
                best = row[j - 1] + 1;
            row[j] = best;
            diag = up;
        }
    }
    return row[lb];
}

const char *cli_closest(const char *word, const char *const *candidates,
                        size_t n) {
    const char *best = NULL;
    size_t best_d = 3;
    for (size_t i = 0; i < n; i++) {
        size_t d = edits(word, candidates[i]);
        if (d == 0)
            continue;
        if (strlen(word) >= 3 && !strncmp(candidates[i], word, strlen(word)))
            d = 1; /* a prefix: --conc for --concurrency */
        if (d < best_d) {
            best_d = d;
            best = candidates[i];
        }
    }
    return best;
}

/* The option of opts (or a global one) closest to name, for "did you
 * mean". */
static const char *closest_option(const cli_optdoc *opts, const char *name) {
    const char *names[128];
    size_t n = 0;
    int at = 0;
    for (const cli_opt *o; n < 128 && (o = next_opt(opts, &at)) != NULL;)
        names[n++] = o->name;
    return cli_closest(name, names, n);
}

const char *cli_esc(const char *text, char *out, size_t size) {
    size_t n = 0;
    for (const unsigned char *p = (const unsigned char *)text;
         p != NULL && *p && n + 5 < size; p++) {
        if (*p < 0x20 || *p == 0x7f)
            n += (size_t)snprintf(out + n, size - n, "\\x%02x", *p);
        else if (*p == 0xc2 && p[1] >= 0x80 && p[1] <= 0x9f) {
            if (n + 9 >= size)
                break;
            /* A C1 control in UTF-8 (U+009B is a CSI to some terminals). */
            n += (size_t)snprintf(out + n, size - n, "\\xc2\\x%02x", p[1]);
            p++;
        } else if (*p == '\\')
            n += (size_t)snprintf(out + n, size - n, "\\\\");
        else
            out[n++] = (char)*p;
    }
    if (size > 0)
        out[n < size ? n : size - 1] = '\0';
    return out;
}

/* Formats one message line with its control characters escaped (the
 * one-line rule holds whatever a name or a reply holds). */
static void format_line(char *line, size_t size, const char *fmt, va_list ap) {
    char raw[1024];
    vsnprintf(raw, sizeof raw, fmt, ap);
    cli_esc(raw, line, size);
}

int cli_err(int code, const char *fmt, ...) {
    char line[2048];
    va_list ap;
    va_start(ap, fmt);
    format_line(line, sizeof line, fmt, ap);
    va_end(ap);
    fflush(stdout);
    fprintf(stderr, "echomq: %s\n", line);
    return code;
}

int cli_usage_err(const char *verb, const char *fmt, ...) {
    char line[2048];
    va_list ap;
    va_start(ap, fmt);
    format_line(line, sizeof line, fmt, ap);
    va_end(ap);
    if (verb)
        fprintf(stderr, "echomq: %s; see 'echomq %s --help'\n", line, verb);
    else
        fprintf(stderr, "echomq: %s; see 'echomq --help'\n", line);
    return CLI_USAGE;
}

void cli_note(const char *fmt, ...) {
    if (cli_g.quiet)
        return;
    char line[2048];
    va_list ap;
    va_start(ap, fmt);
    format_line(line, sizeof line, fmt, ap);
    va_end(ap);
    fprintf(stderr, "echomq: %s\n", line);
}

/* ---- the URL and its password -------------------------------------------- */

/* Sets cli_g.url to a copy of url and cli_g.url_shown to the copy with
 * every secret hidden (emq_url_redact). */
static void set_url(const char *url) {
    if (cli_g.url != NULL)
        emq_url_mask(cli_g.url); /* the password gone from the heap too */
    free(cli_g.url);
    free(cli_g.url_shown);
    cli_g.url = strdup(url);
    size_t size = strlen(url) + 8; /* "***" may be longer than a span */
    cli_g.url_shown = malloc(size * 2);
    if (cli_g.url == NULL || cli_g.url_shown == NULL) {
        fprintf(stderr, "echomq: out of memory\n");
        exit(CLI_FAIL);
    }
    emq_url_redact(url, cli_g.url_shown, size * 2);
}

void cli_url_finish(void) {
    if (cli_g.url_from_flag)
        return;
    const char *env = getenv("ECHOMQ_URL");
    set_url(env && *env ? env : "redis://127.0.0.1:6379");
}

/* The global options that keep their word as it is, and where. */
static const struct {
    int id;
    const char **to;
} global_words[] = {
    {O_USER, &cli_g.user},         {O_TLS_CA, &cli_g.tls_ca},
    {O_TLS_CERT, &cli_g.tls_cert}, {O_TLS_KEY, &cli_g.tls_key},
    {O_STREAM, &cli_g.stream},
};

int cli_apply_global(int id, char *value) {
    for (size_t i = 0; i < sizeof global_words / sizeof global_words[0]; i++)
        if (global_words[i].id == id) {
            *global_words[i].to = value;
            return CLI_OK;
        }
    switch (id) {
    case O_URL:
        set_url(value);
        cli_g.url_from_flag = 1;
        emq_url_mask(value); /* out of ps and /proc/PID/cmdline */
        return CLI_OK;
    case O_QUIET:
        cli_g.quiet = 1;
        return CLI_OK;
    case O_VERBOSE:
        cli_g.verbose++;
        return CLI_OK;
    case O_X:
        return take_property(value);
    default:
        return CLI_OK;
    }
}

/* ---- the parser -------------------------------------------------------- */

static const cli_opt *find_long(const cli_optdoc *opts, const char *name,
                                size_t n) {
    int at = 0;
    for (const cli_opt *o; (o = next_opt(opts, &at)) != NULL;)
        if (strlen(o->name) == n && !strncmp(o->name, name, n))
            return o;
    return NULL;
}

static const cli_opt *find_short(const cli_optdoc *opts, char c) {
    int at = 0;
    for (const cli_opt *o; (o = next_opt(opts, &at)) != NULL;)
        if (o->short_name == c)
            return o;
    return NULL;
}

int cli_parse(const char *verb, int argc, char **argv, const cli_optdoc *opts,
              cli_args *out) {
    memset(out, 0, sizeof *out);
    out->pos = calloc((size_t)argc + 1, sizeof *out->pos);
    if (out->pos == NULL)
        return cli_err(CLI_FAIL, "out of memory");
    int only_pos = 0;
    for (int i = 0; i < argc; i++) {
        char *w = argv[i];
        if (only_pos || w[0] != '-' || w[1] == '\0') {
            out->pos[out->npos++] = w;
            continue;
        }
        if (!strcmp(w, "--")) {
            only_pos = 1;
            continue;
        }
        const cli_opt *o;
        char *value = NULL;
        if (w[1] == '-') {
            char *eq = strchr(w + 2, '=');
            size_t n = eq ? (size_t)(eq - w - 2) : strlen(w + 2);
            o = find_long(opts, w + 2, n);
            if (o == NULL) {
                char name[64];
                snprintf(name, sizeof name, "%.*s", (int)n, w + 2);
                const char *near = closest_option(opts, name);
                if (near)
                    return cli_usage_err(verb,
                                         "unknown option '%.*s' (did you "
                                         "mean '--%s'?)",
                                         (int)(n + 2), w, near);
                return cli_usage_err(verb, "unknown option '%.*s'",
                                     (int)(n + 2), w);
            }
            if (eq && o->id == O_VERBOSE) { /* --verbose=N: a level */
                long long level;
                int rc = cli_num(verb, "--verbose", eq + 1, 0, 3, &level);
                if (rc != CLI_OK)
                    return rc;
                cli_g.verbose = (int)level;
                out->seen[o->id]++;
                continue;
            }
            if (eq) {
                if (!o->takes_value)
                    return cli_usage_err(verb, "--%s takes no value", o->name);
                value = eq + 1;
            }
        } else {
            o = find_short(opts, w[1]);
            if (o == NULL)
                return cli_usage_err(verb, "unknown option '-%c'", w[1]);
            if (w[2] != '\0' && !o->takes_value) {
                /* Flags together: -vv, -qv. */
                for (const char *c = w + 1; *c; c++) {
                    const cli_opt *f = find_short(opts, *c);
                    if (f == NULL || f->takes_value)
                        return cli_usage_err(verb, "unknown option '%s'", w);
                    out->seen[f->id]++;
                    out->value[f->id] = "";
                    if (f->id < O_GLOBAL_END) {
                        int rc = cli_apply_global(f->id, NULL);
                        if (rc != CLI_OK)
                            return rc;
                    }
                }
                continue;
            }
            if (w[2] != '\0')
                value = w + 2;
        }
        if (o->takes_value && value == NULL) {
            if (i + 1 >= argc)
                return cli_usage_err(verb, "--%s needs a value", o->name);
            value = argv[++i];
        }
        if (o->takes_value == 2) {
            if (i + 1 >= argc)
                return cli_usage_err(verb, "--%s needs two values", o->name);
            out->value2[o->id] = argv[++i];
        }
        out->seen[o->id]++;
        out->value[o->id] = value ? value : "";
        if (o->id < O_GLOBAL_END) {
            int rc = cli_apply_global(o->id, value);
            if (rc != CLI_OK)
                return rc;
        }
    }
    cli_url_finish();
    return CLI_OK;
}

int cli_num(const char *verb, const char *opt, const char *text, long long min,
            long long max, long long *out) {
    char *end;
    errno = 0;
    long long v = strtoll(text, &end, 10);
    *out = 0; /* defined on every path, failures too */
    if (text[0] == '\0' || *end != '\0' || errno == ERANGE || v < min ||
        v > max || (text[0] < '0' || text[0] > '9'))
        return cli_usage_err(verb,
                             "%s: '%s' is not a whole number from %lld to "
                             "%lld",
                             opt, text, min, max);
    *out = v;
    return CLI_OK;
}

int cli_require(const char *verb, const cli_args *a, int id, const char *opt,
                const char *hint) {
    if (a->seen[id] && a->value[id][0] != '\0')
        return CLI_OK;
    return cli_usage_err(verb, "%s is required: %s", opt, hint);
}

/* ---- configuration ------------------------------------------------------- */

/* Sets name without the -X rule. */
static int set_property(emq_conf_t *conf, const char *name, const char *value) {
    emq_error err;
    if (emq_conf_set(conf, name, value, &err) == EMQ_OK)
        return CLI_OK;
    if (!strcmp(name, "url"))
        return cli_err(CLI_USAGE,
                       "malformed URL %s: %s; e.g. redis://host:6379, "
                       "rediss://host:6380 or unix:///path/redis.sock",
                       cli_g.url_shown, err.message);
    return cli_err(CLI_USAGE, "%s", err.message);
}

int cli_set(emq_conf_t *conf, const char *name, const char *value) {
    if (given_by_x(name))
        return CLI_OK; /* -X wins; cli_conf set it */
    return set_property(conf, name, value);
}

int cli_set_num(emq_conf_t *conf, const char *name, long long value) {
    char text[24];
    snprintf(text, sizeof text, "%lld", value);
    return cli_set(conf, name, text);
}

/* Narrows [*min, *max] to the range the library accepts for property
 * name (emq_conf_property_range): the property table holds its bounds. */
static void narrow_to_property(const char *name, long long *min,
                               long long *max) {
    const char *n;
    for (size_t i = 0; emq_conf_property(i, &n, NULL, NULL) == EMQ_OK; i++) {
        int64_t lo, hi;
        if (strcmp(n, name) != 0 ||
            emq_conf_property_range(i, &lo, &hi) != EMQ_OK)
            continue;
        if (*min < lo)
            *min = lo;
        if (*max > hi)
            *max = hi;
        return;
    }
}

int cli_check_props(const char *verb, cli_args *a, const cli_prop *t) {
    for (; t->id != O_NONE; t++) {
        a->num[t->id] = t->def;
        if (!a->seen[t->id] || t->min > t->max)
            continue;
        long long min = t->min, max = t->max;
        if (t->property && !t->fixed)
            narrow_to_property(t->property, &min, &max);
        char flag[64];
        snprintf(flag, sizeof flag, "--%s", cli_options[t->id].name);
        int rc = cli_num(verb, flag, a->value[t->id], min, max, &a->num[t->id]);
        if (rc != CLI_OK)
            return rc;
    }
    return CLI_OK;
}

int cli_set_props(emq_conf_t *conf, const cli_args *a, const cli_prop *t) {
    for (; t->id != O_NONE; t++) {
        if (t->property == NULL || (!a->seen[t->id] && !t->always))
            continue;
        int rc = t->fixed ? cli_set(conf, t->property, t->fixed)
                 : t->min <= t->max
                     ? cli_set_num(conf, t->property, a->num[t->id])
                     : cli_set(conf, t->property, a->value[t->id]);
        if (rc != CLI_OK)
            return rc;
    }
    return CLI_OK;
}

/* Applies every -X (the library validates each: an unknown property or a
 * bad value is a usage error naming it). */
static int apply_properties(emq_conf_t *conf) {
    for (int i = 0; i < cli_g.nx; i++) {
        const char *eq = strchr(cli_g.xprops[i], '=');
        char name[128];
        snprintf(name, sizeof name, "%.*s", (int)(eq - cli_g.xprops[i]),
                 cli_g.xprops[i]);
        emq_error err;
        if (emq_conf_set(conf, name, eq + 1, &err) != EMQ_OK)
            return cli_err(CLI_USAGE,
                           "-X %s: %s (echomq -X list shows "
                           "every property)",
                           name, err.message);
    }
    return CLI_OK;
}

/* A --tls-* file must be readable: refused as a usage error (exit 2)
 * before connecting, naming the flag and the file. */
static int tls_file_ok(const char *flag, const char *path) {
    if (path == NULL || access(path, R_OK) == 0)
        return 1;
    cli_err(CLI_USAGE, "%s %s: cannot read the file: %s", flag, path,
            strerror(errno));
    return 0;
}

int cli_partitions(const cli_args *a, emq_conf_t *conf) {
    if (!a->seen[O_PARTITIONS])
        return CLI_OK;
    return cli_set(conf, "partitions", a->value[O_PARTITIONS]);
}

int cli_find_topic(const cli_args *a, emq_conf_t *conf) {
    if (a->seen[O_PARTITIONS] || cli_g.stream)
        return CLI_OK; /* told, or a raw stream (never a topic) */
    /* The count the server records for a topic of this name, if any; a
     * failure to ask is the verb's to report. No longer than a produce
     * call may take. */
    emq_conf_t *ask = emq_conf_dup(conf);
    if (ask == NULL)
        return cli_err(CLI_FAIL, "out of memory");
    char bound[24];
    if (emq_conf_get(conf, "producer.timeout_ms", bound, sizeof bound, NULL) ==
        EMQ_OK) {
        char have[24];
        if (emq_conf_get(conf, "connect_timeout_ms", have, sizeof have, NULL) ==
                EMQ_OK &&
            strtoll(bound, NULL, 10) < strtoll(have, NULL, 10))
            emq_conf_set(ask, "connect_timeout_ms", bound, NULL);
        emq_conf_set(ask, "command_timeout_ms", bound, NULL);
    }
    emq_admin_t *admin;
    emq_error err;
    int64_t p = 0;
    if (emq_admin_new(ask, &admin, &err) == EMQ_OK) {
        if (emq_admin_topic_partitions(admin, &p, &err) != EMQ_OK)
            p = 0;
        emq_admin_destroy(admin);
    }
    emq_conf_destroy(ask);
    if (p <= 1)
        return CLI_OK;
    char text[24];
    snprintf(text, sizeof text, "%lld", (long long)p);
    return cli_set(conf, "partitions", text);
}

/* While the process holds a password, it makes no core dump (a dump of a
 * long run held the password many times over) and cannot be attached to
 * by other processes of its user (PR_SET_DUMPABLE 0), unless
 * ECHOMQ_ALLOW_CORE_DUMPS=1. Said once under -v. */
static void keep_secrets_out_of_core_dumps(void) {
    static int done;
    if (done)
        return;
    done = 1;
    const char *allow = getenv("ECHOMQ_ALLOW_CORE_DUMPS");
    if (allow != NULL && strcmp(allow, "1") == 0)
        return;
    if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) == 0 && cli_g.verbose > 0)
        cli_note("no core dumps while this process holds a password "
                 "(ECHOMQ_ALLOW_CORE_DUMPS=1 allows them)");
}

emq_conf_t *cli_conf(const char *queue) {
    if (!tls_file_ok("--tls-ca", cli_g.tls_ca) ||
        !tls_file_ok("--tls-cert", cli_g.tls_cert) ||
        !tls_file_ok("--tls-key", cli_g.tls_key))
        return NULL;
    if ((cli_g.tls_cert == NULL) != (cli_g.tls_key == NULL)) {
        cli_err(CLI_USAGE, "--tls-cert and --tls-key go together: the "
                           "client certificate and its private key");
        return NULL;
    }
    emq_conf_t *conf = emq_conf_new();
    if (conf == NULL) {
        cli_err(CLI_FAIL, "out of memory");
        return NULL;
    }
    const char *password = getenv("ECHOMQ_PASSWORD");
    /* The Sentinels' own password (a redis-sentinel:// URL's is the data
     * nodes'): from the environment only, never argv. */
    const char *sentinel_password = getenv("ECHOMQ_SENTINEL_PASSWORD");
    const char *key_password = getenv("ECHOMQ_TLS_KEY_PASSWORD");
    const char *level = cli_g.verbose >= 2   ? "debug"
                        : cli_g.verbose == 1 ? "info"
                        : cli_g.quiet        ? "error"
                                             : "warning";
    if ((password && *password) || (sentinel_password && *sentinel_password) ||
        (key_password && *key_password) ||
        strcmp(cli_g.url, cli_g.url_shown) != 0)
        keep_secrets_out_of_core_dumps();
    if (cli_set(conf, "url", cli_g.url) != CLI_OK ||
        (cli_g.user && cli_set(conf, "user", cli_g.user) != CLI_OK) ||
        (password && *password &&
         cli_set(conf, "password", password) != CLI_OK) ||
        (sentinel_password && *sentinel_password &&
         cli_set(conf, "sentinel.password", sentinel_password) != CLI_OK) ||
        (cli_g.tls_ca &&
         cli_set(conf, "tls.ca_file", cli_g.tls_ca) != CLI_OK) ||
        (cli_g.tls_cert &&
         cli_set(conf, "tls.cert_file", cli_g.tls_cert) != CLI_OK) ||
        (cli_g.tls_key &&
         cli_set(conf, "tls.key_file", cli_g.tls_key) != CLI_OK) ||
        (key_password && *key_password &&
         cli_set(conf, "tls.key_password", key_password) != CLI_OK) ||
        cli_set(conf, "log.level", level) != CLI_OK ||
        (queue && cli_set(conf, cli_g.stream ? "stream" : "queue",
                          cli_g.stream ? cli_g.stream : queue) != CLI_OK) ||
        apply_properties(conf) != CLI_OK) {
        emq_conf_destroy(conf);
        return NULL;
    }
    return conf;
}

/* The type of key on the server ("string", "hash", ...), into out; "" when
 * it cannot be asked. */
static void key_type(const emq_conf_t *conf, const char *key, char *out,
                     size_t size) {
    out[0] = '\0';
    emq_conn_t *conn;
    if (emq_conn_new(conf, &conn, NULL) != EMQ_OK)
        return;
    const char *argv[] = {"TYPE", key};
    emq_reply *r;
    if (emq_conn_command(conn, 2, argv, NULL, &r, NULL) == EMQ_OK) {
        size_t n;
        const char *t = emq_reply_str(r, &n);
        if (t && emq_reply_kind(r) == EMQ_REPLY_STATUS && n < size) {
            memcpy(out, t, n);
            out[n] = '\0';
        }
        emq_reply_free(r);
    }
    emq_conn_destroy(conn);
}

int cli_runtime_err(const emq_conf_t *conf, emq_status st, const emq_error *err,
                    const char *doing) {
    const char *msg = err && err->message[0] ? err->message : emq_strerror(st);
    switch (st) {
    case EMQ_EINVAL:
        /* A configuration found wrong once running (a database that does
         * not exist, a consumer name another live process holds): exit 2,
         * as when it is found before (every verb alike). */
        return cli_err(CLI_USAGE, "%s: %s", doing, msg);
    case EMQ_ETLS:
        /* The server is there; its certificate, ours or the name is not
         * what the other side accepts. */
        return cli_err(CLI_FAIL,
                       "cannot connect to %s: %s; check --tls-ca (the CA "
                       "that signed the server's certificate), --tls-cert "
                       "and --tls-key (when the server wants a client "
                       "certificate) and the host name in --url",
                       cli_g.url_shown, msg);
    case EMQ_EIO:
    case EMQ_ETIMEDOUT:
    case EMQ_ERESOLVE:
        return cli_err(CLI_FAIL,
                       "cannot connect to %s: %s; check --url (or "
                       "$ECHOMQ_URL) and that the server is running",
                       cli_g.url_shown, msg);
    case EMQ_EAUTH:
        return cli_err(CLI_FAIL,
                       "%s refused the credentials: %s; check --user and "
                       "$ECHOMQ_PASSWORD (or the URL)",
                       cli_g.url_shown, msg);
    default:
        break;
    }
    if (st == EMQ_ESERVER && strstr(msg, "WRONGTYPE")) {
        char key[1100] = "", type[64] = "";
        if (conf && emq_conf_stream_key(conf, key, sizeof key, NULL) == EMQ_OK)
            key_type(conf, key, type, sizeof type);
        if (type[0] && strcmp(type, "stream") != 0)
            return cli_err(CLI_FAIL,
                           "WRONGTYPE: key '%s' holds a %s, not a stream; "
                           "use another queue name or remove that key",
                           key, type);
        return cli_err(CLI_FAIL,
                       "WRONGTYPE: a key of the queue%s%s%s holds another "
                       "type than echomq expects: %s",
                       key[0] ? " ('" : "", key, key[0] ? "')" : "", msg);
    }
    return cli_err(CLI_FAIL, "%s: %s", doing, msg);
}

/* ---- signals ----------------------------------------------------------- */

static void (*stop_fn)(void *);
static void *stop_opaque;
static volatile sig_atomic_t stop_signals;

static void on_signal(int sig) {
    if (stop_signals++ > 0)
        _exit(128 + sig); /* the second one: at once */
    if (stop_fn)
        stop_fn(stop_opaque);
}

void cli_signals(void (*handler)(int)) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = handler;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    /* A closed terminal or a supervisor's reload: a stop like the others,
     * so consume never leaves its --exec handler behind. */
    sigaction(SIGHUP, &sa, NULL);
}

int cli_write_failed(void) {
    int e = errno;
    if (cli_stdout_gone())
        return CLI_DONE; /* the end of the pipeline, not a failure */
    return cli_err(CLI_FAIL, "writing stdout failed: %s", strerror(e));
}

int cli_stdout_gone(void) {
    /* POLLERR on a pipe's write end: its reader closed it. */
    struct pollfd p = {.fd = STDOUT_FILENO, .events = 0, .revents = 0};
    return poll(&p, 1, 0) == 1 && (p.revents & (POLLERR | POLLHUP)) != 0;
}

void cli_on_stop_signal(void (*stop)(void *), void *opaque) {
    stop_fn = stop;
    stop_opaque = opaque;
    cli_signals(on_signal);
}

void cli_stop_flag(void *flag) { atomic_store((atomic_int *)flag, 1); }

void cli_signals_default(void) {
    cli_signals(SIG_DFL);
    stop_fn = NULL;
}

int cli_begin(const char *verb, int argc, char **argv, const cli_verb *v,
              int one_queue, cli_args *a) {
    int rc = cli_parse(verb, argc, argv, v->opts, a);
    if (rc == CLI_OK && a->seen[O_HELP]) {
        cli_help_print(stdout, v);
        rc = CLI_DONE;
    } else if (rc == CLI_OK && one_queue &&
               (cli_stream_queue(a, 0), a->npos != 1)) {
        rc = cli_usage_err(
            verb, a->npos ? "unexpected argument '%s'" : "QUEUE is missing%s",
            a->npos ? a->pos[1] : "");
    }
    if (rc != CLI_OK)
        free(a->pos);
    return rc;
}

int cli_begin_check(const char *verb, int argc, char **argv, const cli_verb *v,
                    const char *usage, int (*check)(cli_args *), cli_args *a) {
    int rc = cli_begin(verb, argc, argv, v, 0, a);
    if (rc != CLI_OK)
        return rc;
    cli_stream_queue(a, 0);
    rc = a->npos < 1 ? cli_usage_err(verb, "QUEUE is missing: %s", usage)
                     : check(a);
    if (rc != CLI_OK)
        free(a->pos);
    return rc;
}
