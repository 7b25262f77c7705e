/* SPDX-License-Identifier: BSD-3-Clause */
/* cli.h: what the files of the echomq program share.
 *
 * The program is a client of libechomq: it includes echomq.h and nothing
 * else of the library. This header holds the option parser (args.c), the
 * global options, the configuration and error helpers, and one entry point
 * per verb (cmd_*.c). Exit codes: CLI_OK (0) success, CLI_FAIL (1) a
 * runtime failure, CLI_USAGE (2) a usage error found before any command
 * reached the server (docs/CLI.md).
 */
#ifndef EMQ_CLI_H
#define EMQ_CLI_H

#include "echomq.h"

#include <stdint.h>
#include <stdio.h>

#define CLI_OK 0
#define CLI_FAIL 1
#define CLI_USAGE 2

/* ---- options ------------------------------------------------------------ */

/* Every option of every verb, once: NAME (its id is O_NAME), the long name
 * without "--", the short letter (0: none) and what it takes (0: a flag,
 * 1: --name VALUE or --name=VALUE, 2: --name A B). The global ones are
 * accepted by every verb, before and after it; a verb lists the others it
 * takes. */
#define CLI_GLOBAL_OPTIONS(OPT)                                                \
    OPT(URL, "url", 'u', 1)                                                    \
    OPT(USER, "user", 0, 1)                                                    \
    OPT(TLS_CA, "tls-ca", 0, 1)                                                \
    OPT(TLS_CERT, "tls-cert", 0, 1)                                            \
    OPT(TLS_KEY, "tls-key", 0, 1)                                              \
    OPT(QUIET, "quiet", 'q', 0)                                                \
    OPT(VERBOSE, "verbose", 'v', 0)                                            \
    OPT(HELP, "help", 'h', 0)                                                  \
    OPT(VERSION, "version", 0, 0)                                              \
    OPT(X, "property", 'X', 1)                                                 \
    OPT(STREAM, "stream", 0, 1)
#define CLI_VERB_OPTIONS(OPT)                                                  \
    OPT(LINES, "lines", 0, 0)                                                  \
    OPT(JSON, "json", 0, 0)                                                    \
    OPT(FIELD, "field", 0, 1)                                                  \
    OPT(MAXLEN, "maxlen", 0, 1)                                                \
    OPT(MINID, "minid", 0, 1)                                                  \
    OPT(APPROX, "approx", 0, 0)                                                \
    OPT(BATCH, "batch", 0, 1)                                                  \
    OPT(PRINT_IDS, "print-ids", 0, 0)                                          \
    OPT(GROUP, "group", 'g', 1)                                                \
    OPT(CONSUMER, "consumer", 'c', 1)                                          \
    OPT(START, "start", 's', 1)                                                \
    OPT(COUNT, "count", 0, 1)                                                  \
    OPT(BLOCK, "block", 0, 1)                                                  \
    OPT(CLAIM_IDLE, "claim-idle", 0, 1)                                        \
    OPT(CLAIM_INTERVAL, "claim-interval", 0, 1)                                \
    OPT(MAX_DELIVERIES, "max-deliveries", 0, 1)                                \
    OPT(LIMIT, "limit", 0, 1)                                                  \
    OPT(UNTIL_IDLE, "until-idle", 0, 1)                                        \
    OPT(EXEC, "exec", 'e', 1)                                                  \
    OPT(CONCURRENCY, "concurrency", 0, 1)                                      \
    OPT(MIN_IDLE, "min-idle", 0, 1)                                            \
    OPT(TO, "to", 0, 1)                                                        \
    OPT(YES, "yes", 0, 0)                                                      \
    OPT(IDLE, "idle", 0, 1)                                                    \
    OPT(ALL, "all", 0, 0)                                                      \
    OPT(FORCE, "force", 0, 0)                                                  \
    OPT(ACKED, "acked", 0, 0)                                                  \
    OPT(JOBS, "jobs", 0, 1)                                                    \
    OPT(WORKERS, "workers", 0, 1)                                              \
    OPT(POISON, "poison", 0, 1)                                                \
    OPT(KEEP, "keep", 0, 0)                                                    \
    OPT(SENTINEL, "sentinel", 0, 0)                                            \
    OPT(WORK_US, "work-us", 0, 1)                                              \
    OPT(PARTITIONS, "partitions", 0, 1)                                        \
    OPT(KEY_FIELD, "key-field", 0, 1)                                          \
    OPT(RETRY_BACKOFF, "retry-backoff", 0, 1)                                  \
    OPT(RETRY_BACKOFF_MAX, "retry-backoff-max", 0, 1)                          \
    OPT(EXEC_BATCH, "exec-batch", 0, 2)                                        \
    OPT(NO_ACK, "no-ack", 0, 0)                                                \
    OPT(EXEC_TIMEOUT, "exec-timeout", 0, 1)                                    \
    OPT(LINGER, "linger", 0, 1)                                                \
    OPT(MAX_LINE, "max-line", 0, 1)                                            \
    OPT(TIMEOUT, "timeout", 0, 1)                                              \
    OPT(WAIT_REPLICAS, "wait-replicas", 0, 1)                                  \
    OPT(WAIT_FOR_SERVER, "wait-for-server", 0, 0)                              \
    OPT(FORMAT, "format", 0, 1)                                                \
    OPT(FOLLOW, "follow", 'f', 0)                                              \
    OPT(FROM, "from", 0, 1)                                                    \
    OPT(OLDER_THAN, "older-than", 0, 1)                                        \
    OPT(REASON, "reason", 0, 1)                                                \
    OPT(STATS_INTERVAL, "stats-interval", 0, 1)                                \
    OPT(LISTEN, "listen", 0, 1)                                                \
    OPT(INTERVAL, "interval", 0, 1)                                            \
    OPT(CACHE, "cache", 0, 1)                                                  \
    OPT(CLIENT_TIMEOUT, "client-timeout", 0, 1)                                \
    OPT(PARTITION, "partition", 'p', 1)                                        \
    OPT(DELAY, "delay", 0, 1)                                                  \
    OPT(AT, "at", 0, 1)                                                        \
    OPT(DEDUP_KEY, "dedup-key", 0, 1)                                          \
    OPT(DEDUP_TTL, "dedup-ttl", 0, 1)                                          \
    OPT(DEDUP_FIELD, "dedup-field", 0, 1)                                      \
    OPT(PRIORITY, "priority", 0, 1)                                            \
    OPT(AGE, "age", 0, 1)                                                      \
    OPT(RATE, "rate", 0, 1)                                                    \
    OPT(GROUP_MAX_IN_FLIGHT, "group-max-in-flight", 0, 1)                      \
    OPT(MAX_IN_FLIGHT, "max-in-flight", 0, 1)                                  \
    OPT(REPLACE, "replace", 0, 0)
#define CLI_OPTION_ID(name, word, letter, takes) O_##name,

/* Option ids: the index of each in cli_options and in cli_args. */
enum {
    O_NONE = 0,
    CLI_GLOBAL_OPTIONS(CLI_OPTION_ID) O_GLOBAL_END,
    CLI_VERB_OPTIONS(CLI_OPTION_ID) O_COUNT_IDS,
    /* Spellings that store under another id: -n N for --count (tail, top). */
    O_COUNT_N = O_COUNT_IDS,
    O_TABLE_END
};

/* One option: its words and where the parser stores its value. The
 * table of them, cli_options (args.c, made from the lists above), is
 * indexed by O_*; a verb names the options it accepts, with their help,
 * in a table of cli_optdoc ending with O_NONE (below). */
typedef struct cli_opt {
    const char *name; /* long name without "--" */
    char short_name;  /* 'g' for -g; 0: none */
    int takes_value;  /* 1: --name VALUE or --name=VALUE; 2: --name A B */
    int id;           /* O_* its value is stored under */
} cli_opt;

extern const cli_opt cli_options[O_TABLE_END];

/* One option as a verb takes and documents it: its id (O_*), the name of
 * its value in help ("G", "MS"; NULL for a flag, "N CMD" for one that
 * takes two words) and its help, one paragraph of plain text that the
 * printers wrap. A verb's table, ending with id O_NONE, is both the list
 * of options its parser accepts and the one source of their help in
 * `echomq VERB --help`, docs/echomq.1 and docs/CLI.md (tools/gen_clidoc
 * writes the last two; scripts/clidoc.sh checks them). */
typedef struct cli_optdoc {
    int id;
    const char *arg;
    const char *help;
} cli_optdoc;

/* The row of --partitions P for a verb that finds a topic in the server
 * (cli_find_topic): the sentence every such verb shares, then what, what
 * the verb does on a topic. */
#define CLI_OPT_PARTITIONS(what)                                               \
    {                                                                          \
        O_PARTITIONS, "P",                                                     \
            "QUEUE is a topic of P partitions (found in the server when not "  \
            "given): " what                                                    \
    }
/* The row that ends a verb's table. */
#define CLI_OPTS_END                                                           \
    { O_NONE, NULL, NULL }

/* A verb: its name, entry point (returns the exit status, or CLI_DONE
 * after its help), summary (one line of the program's overview), and
 * the text of its --help: usage (the synopsis lines after "usage: ",
 * newline-separated), about (what comes before the options; may be
 * NULL), opts, and more (after them: examples; may be NULL). Static
 * storage; read-only, any thread. */
typedef struct cli_verb {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *summary;
    const char *usage;
    const char *about;
    const cli_optdoc *opts;
    const char *more;
} cli_verb;

/* Defines cli_verb_NAME: the verb NAME, run by cmd_NAME, with the rest of
 * its cli_verb in order (summary, usage, about, opts, more). */
#define CLI_VERB(NAME, summary, usage, about, opts, more)                      \
    const cli_verb cli_verb_##NAME = {                                         \
        #NAME, cmd_##NAME, summary, usage, about, opts, more,                  \
    }

/* Every verb, in the order the overview lists them, then NULL (help.c). */
extern const cli_verb *const cli_verbs[];
/* The global options, documented like a verb's (ends with O_NONE). */
extern const cli_optdoc cli_global_doc[];
/* The verb named name, or NULL. */
const cli_verb *cli_verb_find(const char *name);
/* How help shows option d: "-g, --group G" or "    --count N" (into buf,
 * size bytes). Returns buf. */
const char *cli_opt_label(const cli_optdoc *d, char *buf, size_t size);
/* Prints v's whole --help to out: usage, about, "Options:" with each row
 * of v->opts wrapped to 79 columns, then more. */
void cli_help_print(FILE *out, const cli_verb *v);
/* Prints each verb's name and summary, one verb a row, wrapped. */
void cli_help_verbs(FILE *out);
/* Prints the rows of opts (ending with O_NONE) as help does, wrapped. */
void cli_help_options(FILE *out, const cli_optdoc *opts);

/* One metric `echomq exporter` serves (cmd_exporter.c): its family name,
 * Prometheus type, labels as the documents list them ("" for none) and
 * HELP text, which the table of docs/CLI.md shows too (tools/gen_clidoc,
 * "clidoc metrics exporter"). */
typedef struct cli_metric {
    const char *name;
    const char *type;
    const char *labels;
    const char *help;
} cli_metric;
/* Every metric the exporter serves, in the order a scrape lists them,
 * then a row of NULLs. */
extern const cli_metric cli_exporter_metrics[];

/* What the parser found for a verb. */
typedef struct cli_args {
    const char *value[O_COUNT_IDS];  /* last value of each option; flags "" */
    const char *value2[O_COUNT_IDS]; /* second value (takes_value 2) */
    int seen[O_COUNT_IDS];           /* how often each option was given */
    long long num[O_COUNT_IDS];      /* whole numbers, by cli_check_props */
    char **pos;                      /* positional arguments (in argv) */
    int npos;
} cli_args;

/* Global options in effect (set in main.c and by cli_parse). */
typedef struct cli_global {
    char *url;       /* effective URL, password included (own copy) */
    char *url_shown; /* the same with the password masked, for messages */
    const char *user;
    const char *tls_ca, *tls_cert, *tls_key;
    int quiet;
    int verbose;
    int url_from_flag;   /* 1: -u/--url; 0: $ECHOMQ_URL or the default */
    const char *stream;  /* --stream KEY: a raw stream key for QUEUE */
    const char **xprops; /* -X name=value words, in order (argv's) */
    int nx;
} cli_global;

extern cli_global cli_g;

/* Parses argv[0..argc) (the words after the verb) against opts (O_* ids
 * ending with O_NONE, or NULL; the global options are always accepted).
 * Fills out. A URL given with -u/--url is copied and its password bytes
 * overwritten in argv at once, so it never shows in ps or
 * /proc/PID/cmdline. Returns CLI_OK, or CLI_USAGE after printing one line
 * naming the bad word and `echomq VERB --help`. */
int cli_parse(const char *verb, int argc, char **argv, const cli_optdoc *opts,
              cli_args *out);
/* What cli_begin returns when it printed the verb's help: the verb is done
 * and returns it as it is; main makes it exit status 0. */
#define CLI_DONE (-1)
/* The prologue every verb shares: cli_parse against v->opts (messages name
 * verb, which may be "group create"), then -h/--help prints v's help
 * (cli_help_print) and returns CLI_DONE; with one_queue, exactly one
 * positional argument (QUEUE) is required. Returns CLI_OK to go on; on
 * anything else a->pos is already freed. */
int cli_begin(const char *verb, int argc, char **argv, const cli_verb *v,
              int one_queue, cli_args *a);
/* cli_begin for a verb whose QUEUE comes first: then --stream's KEY takes
 * its place (cli_stream_queue), a missing QUEUE is a usage error that
 * shows usage (the verb's synopsis), and check(a), the verb's other usage
 * checks, runs. Returns as cli_begin. */
int cli_begin_check(const char *verb, int argc, char **argv, const cli_verb *v,
                    const char *usage, int (*check)(cli_args *), cli_args *a);
/* Applies -u/--url (value in argv, scrubbed in place), --user, --tls-*,
 * -q and -v to cli_g. Returns CLI_OK or CLI_USAGE. */
int cli_apply_global(int id, char *value);
/* With --stream KEY: puts KEY in the positional arguments at index at,
 * where the verb takes its QUEUE, so the verb reads on as with a QUEUE
 * (cli_conf then sets the stream property instead of queue). Returns
 * CLI_OK, or CLI_FAIL out of memory. */
int cli_stream_queue(cli_args *a, int at);
/* Resolves the URL once every option is parsed: the flag, else
 * $ECHOMQ_URL, else redis://127.0.0.1:6379. */
void cli_url_finish(void);
/* How many words the global option word w takes before the verb: 2 for
 * one that takes a value not attached to it (-u URL, -X name=value), else
 * 1. */
int cli_global_words(const char *w);
/* The candidate closest to word (at most 2 edits away, or a prefix of
 * it), or NULL: what "did you mean" suggests. */
const char *cli_closest(const char *word, const char *const *candidates,
                        size_t n);

/* Prints "echomq: <message>" (one line) on stderr. Returns code. */
int cli_err(int code, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Prints "echomq VERB: <message>; see 'echomq VERB --help'". Returns 2. */
int cli_usage_err(const char *verb, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Progress and summaries: printed unless -q. */
void cli_note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Copies text into out (size bytes, NUL-terminated, truncated to fit)
 * with control characters (C0, DEL, and C1 in UTF-8: \xc2\x9b) shown as
 * \xNN and backslashes
 * doubled: names, reasons and replies shown to an operator's terminal
 * never carry an escape sequence, a carriage return or a line break.
 * Messages (cli_err, cli_usage_err, cli_note) pass through it; tables use
 * it per cell. Returns out. */
const char *cli_esc(const char *text, char *out, size_t size);

/* Parses a whole number of option opt within [min, max] into *out.
 * Returns CLI_OK, or CLI_USAGE after printing which option and why (*out
 * is then 0). */
int cli_num(const char *verb, const char *opt, const char *text, long long min,
            long long max, long long *out);
/* Requires option id to be present; prints what to give when it is not. */
int cli_require(const char *verb, const cli_args *a, int id, const char *opt,
                const char *hint);

/* One row of a verb's option -> property table. cli_check_props checks
 * the option's value; cli_set_props sets the property from it. */
typedef struct cli_prop {
    int id;               /* O_* */
    const char *property; /* set when the option is given; NULL: the verb
                             reads a->num[id] (a value it derives from) */
    long long min, max;   /* a whole number within; min > max: any text */
    long long def;        /* a->num[id] when the option is not given */
    const char *fixed;    /* the value set instead of the option's (a
                             flag's); NULL: the option's */
    int always;           /* 1: set def also when the option is absent */
} cli_prop;
/* The rows of a table: a whole number in [min, max] (def when absent; set
 * also when absent with _ALWAYS), text, a flag that sets value, the end. */
#define CLI_NUM(id, prop, min, max, def)                                       \
    { id, prop, min, max, def, NULL, 0 }
#define CLI_NUM_ALWAYS(id, prop, min, max, def)                                \
    { id, prop, min, max, def, NULL, 1 }
#define CLI_TEXT(id, prop)                                                     \
    { id, prop, 1, 0, 0, NULL, 0 }
#define CLI_FLAG(id, prop, value)                                              \
    { id, prop, 1, 0, 0, value, 0 }
#define CLI_PROPS_END                                                          \
    { O_NONE, NULL, 0, 0, 0, NULL, 0 }
/* Checks every numeric option of table t (rows up to one with id O_NONE)
 * that a holds, in table order, into a->num (def where absent). A row
 * that sets a property is held to the narrower of [min, max] and the
 * property's own range (emq_conf_property_range), so a flag never
 * accepts what the library refuses. Returns
 * CLI_OK, or CLI_USAGE after printing which option and why. */
int cli_check_props(const char *verb, cli_args *a, const cli_prop *t);
/* Sets, in table order, the property of each row of t whose option was
 * given (or that is set always): the number a->num holds, the row's fixed
 * value or the option's text. Returns CLI_OK or CLI_USAGE (cli_set). */
int cli_set_props(emq_conf_t *conf, const cli_args *a, const cli_prop *t);
/* cli_set of a whole number. */
int cli_set_num(emq_conf_t *conf, const char *name, long long value);

/* A conf for queue (may be NULL) with url, user, password
 * ($ECHOMQ_PASSWORD), tls.* and log.level set from the global options.
 * NULL after printing why (a usage error: exit 2). */
emq_conf_t *cli_conf(const char *queue);
/* Sets one property; prints the library's message on failure (a usage
 * error). A property given with -X keeps its -X value: -X wins over every
 * flag and default of the verb. Returns CLI_OK or CLI_USAGE. */
int cli_set(emq_conf_t *conf, const char *name, const char *value);
/* Applies --partitions P (when given) to conf: QUEUE then names a topic
 * of P partitions. Returns CLI_OK or CLI_USAGE. */
int cli_partitions(const cli_args *a, emq_conf_t *conf);
/* Without --partitions (and --stream): asks the server whether conf's
 * queue names a topic (emq_admin_topic_partitions) and sets its count.
 * Call it after every usage check, right before the handle is made: it
 * connects (bounded by producer.timeout_ms). Returns CLI_OK or an exit
 * code. */
int cli_find_topic(const cli_args *a, emq_conf_t *conf);

/* Prints one line for a runtime failure of st and returns CLI_FAIL: a
 * failure to connect names the URL and what to check, WRONGTYPE names the
 * key and what it holds, anything else is "<doing>: <message>". */
int cli_runtime_err(const emq_conf_t *conf, emq_status st, const emq_error *err,
                    const char *doing);

/* Appends to *names (*n of them; a malloc'd array of malloc'd strings,
 * sorted on return) the queues whose stream key emq:{NAME} matches the
 * glob PATTERN on the server of conf (SCAN, bounded; cmd_ls.c). Returns
 * CLI_OK or an exit code after printing why. */
int cli_scan_queues(const emq_conf_t *conf, const char *pattern, char ***names,
                    size_t *n);

/* One queue at one moment, as the library describes it. */
typedef struct cli_described {
    char *queue;          /* its name (malloc) */
    emq_queue_info *info; /* emq_admin_describe's */
} cli_described;

/* The HELD cell of ls and top: entries held by priority, or "-" when the
 * queue has no priorities (cmd_ls.c). */
void cli_held_text(const emq_queue_info *info, char *out, size_t size);

/* Admin handles kept from one description to the next (top's refreshes,
 * the exporter's scrapes). A handle reconnects by itself, so a queue costs
 * a connection once, not once per refresh; a queue no longer found loses
 * its handle. Zero-initialize; free with cli_admins_free. */
typedef struct cli_admins {
    char **queue;        /* malloc'd names */
    emq_conf_t **conf;   /* each handle's configuration */
    emq_admin_t **admin; /* the handles */
    unsigned char *used; /* found by the current description */
    size_t n, cap;
} cli_admins;
void cli_admins_free(cli_admins *k);

/* The queues a description skipped: how many, and the first one's
 * "queue 'NAME': why" (raw: escape it to show it, as cli_err does). */
typedef struct cli_skipped {
    size_t n;
    char first[480];
} cli_skipped;

/* Every queue matching one of the patterns (none: every queue), described:
 * *rows (malloc'd, *n of them; free with cli_described_free), each name
 * once, through the handles in keep (NULL: a handle per queue, closed at
 * once). A queue that cannot be described for reasons of its own (a name
 * the library refuses, a key of another type at one of its keys, a reply
 * it cannot read) is skipped and counted in *skipped, nothing printed;
 * the rest are described. Used by ls, top and exporter. Returns CLI_OK or
 * an exit code after printing why, when the server itself fails (rows
 * then hold what was described before). */
int cli_describe_queues(char **patterns, int npatterns, cli_admins *keep,
                        cli_described **rows, size_t *n, cli_skipped *skipped);
void cli_described_free(cli_described *rows, size_t n);
/* The usage check of top's and exporter's QUEUE|PATTERN words: a queue
 * name or glob has no braces. Returns CLI_OK, or CLI_USAGE after printing
 * the first word that has. */
int cli_check_patterns(const char *verb, char *const *patterns, int npatterns);

/* ---- entry lines (lines.c) ---------------------------------------------- */

/* How entries are written: JSON lines (emq_entry_json_partition), or the
 * --format string (%i ID, %d deliveries, %s stream, %p partition, %t the
 * ID's time in UTC, %f{NAME} a field's value, %% and \n \t). */
typedef struct cli_lines {
    const char *format;     /* NULL: JSON */
    char (*part_keys)[256]; /* a topic's partition stream keys */
    int nparts;             /* 0: a plain queue */
} cli_lines;

/* With --partitions P > 1: the stream key of each partition (the queue
 * "<QUEUE>.<i>", docs/SCALING.md, named by the library), so each line can
 * say its partition. Returns CLI_OK or an exit code after printing why. */
int cli_lines_partitions(cli_lines *x, const cli_args *a,
                         const emq_conf_t *conf);
/* Appends the entry's line and a newline to *buf (grown as needed, *cap
 * bytes); 0, or -1 out of memory. */
int cli_line_append(const cli_lines *x, const emq_entry *e, char **buf,
                    size_t *len, size_t *cap);

/* Installs SIGINT/SIGTERM/SIGHUP handlers: the first calls stop(opaque) (must
 * be async-signal-safe), the second exits at once with 128+signal. */
void cli_on_stop_signal(void (*stop)(void *), void *opaque);
/* The stop of a verb that only polls a flag: opaque is its atomic_int,
 * set to 1 (an atomic store: async-signal-safe). */
void cli_stop_flag(void *flag);
/* Restores the default handlers. */
void cli_signals_default(void);
/* Installs handler (or SIG_DFL) for SIGINT, SIGTERM and SIGHUP, the
 * signals that stop a verb. */
void cli_signals(void (*handler)(int));
/* 1 when stdout is a pipe whose reader has gone (echomq top | head): a
 * verb that runs until stopped ends then, also while it has nothing to
 * write. Does not wait. */
int cli_stdout_gone(void);
/* What a failed write to stdout means: CLI_DONE (exit 0, nothing said)
 * when its reader has gone, else CLI_FAIL, said with errno's text. */
int cli_write_failed(void);

/* Prints the program's help (the overview: commands, then the global
 * options from cli_global_doc) to out. */
void cli_help_overview(FILE *out);

/* Opens the admin handle of queue: *conf and *admin are set (free both)
 * or CLI_USAGE/CLI_FAIL is returned after printing why. */
int cli_admin_open(const char *verb, const char *queue, emq_conf_t **conf,
                   emq_admin_t **admin);
/* The same, applying the verb's --partitions (a may be NULL). */
int cli_admin_open_args(const char *verb, const char *queue, const cli_args *a,
                        emq_conf_t **conf, emq_admin_t **admin);
/* The step after a verb's usage checks: when rc is CLI_OK, opens the admin
 * handle of a->pos[at] with the verb's --partitions (cli_admin_open_args);
 * on any failure (rc given, or the open's) frees a->pos. Returns the
 * resulting exit code: CLI_OK with *conf and *admin set (free both). */
int cli_admin_begin(const char *verb, int rc, cli_args *a, int at,
                    emq_conf_t **conf, emq_admin_t **admin);
/* "queue 'NAME'", or "topic 'NAME' (P partitions)" for a topic handle,
 * into buf: how a verb's messages name what it worked on. */
const char *cli_target(const emq_admin_t *admin, const char *name, char *buf,
                       size_t size);
/* Calls fn(ctx, buf, size), which writes with snprintf semantics, into a
 * buffer of the right size and prints the result on stdout (a newline
 * added when it has none). Returns CLI_OK or CLI_FAIL. */
int cli_print_json(size_t (*fn)(const void *ctx, char *buf, size_t size),
                   const void *ctx);
/* The ctx of cli_print_json for a list the library writes as JSON lines:
 * items[0..n). */
typedef struct cli_json_list {
    const void *items;
    size_t n;
} cli_json_list;
/* Formats a duration in milliseconds for tables: "850ms", "12.3s",
 * "4m05s", "2h10m", "3d4h"; "-" for a negative value. */
const char *cli_duration(int64_t ms, char *buf, size_t size);
/* This machine's wall clock, unix ms (for showing times the server
 * stated; every timeout uses emq_clock_ms). */
int64_t cli_wall_ms(void);

/* ---- verbs --------------------------------------------------------------- */

extern const cli_verb cli_verb_produce, cli_verb_consume, cli_verb_info,
    cli_verb_pending, cli_verb_group, cli_verb_consumers, cli_verb_dead,
    cli_verb_trim, cli_verb_demo, cli_verb_tail, cli_verb_ls, cli_verb_exporter,
    cli_verb_top, cli_verb_topic, cli_verb_cancel, cli_verb_priorities,
    cli_verb_functions;

int cmd_produce(int argc, char **argv);
int cmd_consume(int argc, char **argv);
int cmd_info(int argc, char **argv);
int cmd_pending(int argc, char **argv);
int cmd_group(int argc, char **argv);
int cmd_consumers(int argc, char **argv);
int cmd_dead(int argc, char **argv);
int cmd_trim(int argc, char **argv);
int cmd_demo(int argc, char **argv);
int cmd_tail(int argc, char **argv);
int cmd_ls(int argc, char **argv);
int cmd_exporter(int argc, char **argv);
int cmd_top(int argc, char **argv);
int cmd_topic(int argc, char **argv);
int cmd_cancel(int argc, char **argv);
int cmd_priorities(int argc, char **argv);
int cmd_functions(int argc, char **argv);

#endif /* EMQ_CLI_H */
