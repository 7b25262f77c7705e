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

/* Option ids. The global ones are accepted before and after the verb. */
enum {
    O_NONE = 0,
    O_URL, O_USER, O_TLS_CA, O_TLS_CERT, O_TLS_KEY, O_QUIET, O_VERBOSE,
    O_HELP, O_VERSION, O_X, O_STREAM,
    O_GLOBAL_END,
    /* verbs */
    O_LINES, O_JSON, O_FIELD, O_MAXLEN, O_MINID, O_APPROX, O_BATCH,
    O_PRINT_IDS, O_GROUP, O_CONSUMER, O_START, O_COUNT, O_BLOCK,
    O_CLAIM_IDLE, O_CLAIM_INTERVAL, O_MAX_DELIVERIES, O_LIMIT, O_UNTIL_IDLE,
    O_EXEC, O_CONCURRENCY, O_MIN_IDLE, O_TO, O_YES, O_IDLE, O_ALL, O_ACKED,
    O_JOBS, O_WORKERS, O_POISON, O_KEEP, O_WORK_US, O_PARTITIONS,
    O_KEY_FIELD, O_RETRY_BACKOFF, O_RETRY_BACKOFF_MAX,
    O_EXEC_BATCH, O_NO_ACK, O_EXEC_TIMEOUT, O_LINGER, O_TIMEOUT,
    O_WAIT_REPLICAS, O_WAIT_FOR_SERVER, O_FORMAT, O_FOLLOW, O_FROM,
    O_OLDER_THAN, O_REASON, O_STATS_INTERVAL, O_LISTEN, O_INTERVAL,
    O_PARTITION, O_COUNT_IDS
};

/* One option a verb accepts. */
typedef struct cli_opt {
    const char *name; /* long name without "--" */
    char short_name;  /* 'g' for -g; 0: none */
    int takes_value;  /* 1: --name VALUE or --name=VALUE; 2: --name A B */
    int id;           /* O_* */
} cli_opt;

/* What the parser found for a verb. */
typedef struct cli_args {
    const char *value[O_COUNT_IDS]; /* last value of each option; flags "" */
    const char *value2[O_COUNT_IDS]; /* second value (takes_value 2) */
    int seen[O_COUNT_IDS];          /* how often each option was given */
    char **pos;                     /* positional arguments (in argv) */
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
    int url_from_flag; /* 1: -u/--url; 0: $ECHOMQ_URL or the default */
    const char *stream; /* --stream KEY: a raw stream key for QUEUE */
    const char **xprops; /* -X name=value words, in order (argv's) */
    int nx;
} cli_global;

extern cli_global cli_g;

/* Parses argv[0..argc) (the words after the verb) against opts (a table
 * ending with a NULL name; the global options are always accepted too).
 * Fills out. A URL given with -u/--url is copied and its password bytes
 * overwritten in argv at once, so it never shows in ps or
 * /proc/PID/cmdline. Returns CLI_OK, or CLI_USAGE after printing one line
 * naming the bad word and `echomq VERB --help`. */
int cli_parse(const char *verb, int argc, char **argv, const cli_opt *opts,
              cli_args *out);
/* What cli_begin returns when it printed the verb's help: the verb is done
 * and exits 0. */
#define CLI_DONE (-1)
/* The prologue every verb shares: cli_parse, then -h/--help prints help()
 * and returns CLI_DONE; with one_queue, exactly one positional argument
 * (QUEUE) is required. Returns CLI_OK to go on; on anything else a->pos is
 * already freed. */
int cli_begin(const char *verb, int argc, char **argv, const cli_opt *opts,
              void (*help)(void), int one_queue, cli_args *a);
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
 * with control characters (and DEL) shown as \xNN and backslashes
 * doubled: names, reasons and replies shown to an operator's terminal
 * never carry an escape sequence, a carriage return or a line break.
 * Messages (cli_err, cli_usage_err, cli_note) pass through it; tables use
 * it per cell. Returns out. */
const char *cli_esc(const char *text, char *out, size_t size);

/* Parses a whole number of option opt within [min, max]. Returns CLI_OK,
 * or CLI_USAGE after printing which option and why. */
int cli_num(const char *verb, const char *opt, const char *text,
            long long min, long long max, long long *out);
/* Requires option id to be present; prints what to give when it is not. */
int cli_require(const char *verb, const cli_args *a, int id,
                const char *opt, const char *hint);

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
int cli_runtime_err(const emq_conf_t *conf, emq_status st,
                    const emq_error *err, const char *doing);

/* Appends to *names (*n of them; a malloc'd array of malloc'd strings,
 * sorted on return) the queues whose stream key emq:{NAME} matches the
 * glob PATTERN on the server of conf (SCAN, bounded; cmd_ls.c). Returns
 * CLI_OK or an exit code after printing why. */
int cli_scan_queues(const emq_conf_t *conf, const char *pattern,
                    char ***names, size_t *n);

/* One queue at one moment, as the library describes it. */
typedef struct cli_described {
    char *queue;          /* its name (malloc) */
    emq_queue_info *info; /* emq_admin_describe's */
} cli_described;

/* Every queue matching one of the patterns (none: every queue), described:
 * *rows (malloc'd, *n of them; free with cli_described_free), each name
 * once. Used by ls, top and exporter. Returns CLI_OK or an exit code after
 * printing why (rows then hold what was described before). */
int cli_describe_queues(const char *verb, char **patterns, int npatterns,
                        cli_described **rows, size_t *n);
void cli_described_free(cli_described *rows, size_t n);

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

/* Installs SIGINT/SIGTERM handlers: the first calls stop(opaque) (must be
 * async-signal-safe), the second exits at once with 128+signal. */
void cli_on_stop_signal(void (*stop)(void *), void *opaque);
/* Restores the default handlers. */
void cli_signals_default(void);

/* Monotonic milliseconds. */
int64_t cli_now_ms(void);
/* Prints help text (a verb's or the overview) to out. */
void cli_help_overview(FILE *out);

/* Opens the admin handle of queue: *conf and *admin are set (free both)
 * or CLI_USAGE/CLI_FAIL is returned after printing why. */
int cli_admin_open(const char *verb, const char *queue, emq_conf_t **conf,
                   emq_admin_t **admin);
/* The same, applying the verb's --partitions (a may be NULL). */
int cli_admin_open_args(const char *verb, const char *queue,
                        const cli_args *a, emq_conf_t **conf,
                        emq_admin_t **admin);
/* "queue 'NAME'", or "topic 'NAME' (P partitions)" for a topic handle,
 * into buf: how a verb's messages name what it worked on. */
const char *cli_target(const emq_admin_t *admin, const char *name, char *buf,
                       size_t size);
/* Calls fn(ctx, buf, size), which writes with snprintf semantics, into a
 * buffer of the right size and prints the result on stdout (a newline
 * added when it has none). Returns CLI_OK or CLI_FAIL. */
int cli_print_json(size_t (*fn)(const void *ctx, char *buf, size_t size),
                   const void *ctx);
/* Formats a duration in milliseconds for tables: "850ms", "12.3s",
 * "4m05s", "2h10m", "3d4h"; "-" for a negative value. */
const char *cli_duration(int64_t ms, char *buf, size_t size);

/* ---- verbs ---------------------------------------------------------------- */

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

#endif /* EMQ_CLI_H */
