/* cmd_produce.c: `echomq produce`, entries onto a queue.
 *
 * Three sources: FIELD=VALUE arguments (one entry), stdin lines (--lines,
 * one entry per line with one field) and stdin JSON objects (--json, one
 * entry per line, parsed by emq_fields_from_json so {"base64":"..."}
 * values come back byte-exact). Entries go out in pipelined batches of
 * --batch (emq_produce_batch); trimming is the producer's own policy
 * (trim.* properties). A malformed input line stops the run with exit 2
 * after everything before it was written, and says how much that was.
 */
#include "cli.h"

#include <stdlib.h>
#include <errno.h>
#include <poll.h>
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

static const char *const VERB = "produce";

static const cli_opt opts[] = {
    {"lines", 0, 0, O_LINES},         {"json", 0, 0, O_JSON},
    {"field", 0, 1, O_FIELD},         {"maxlen", 0, 1, O_MAXLEN},
    {"minid", 0, 1, O_MINID},         {"approx", 0, 0, O_APPROX},
    {"batch", 0, 1, O_BATCH},         {"print-ids", 0, 0, O_PRINT_IDS},
    {"partitions", 0, 1, O_PARTITIONS}, {"key-field", 0, 1, O_KEY_FIELD},
    {"linger", 0, 1, O_LINGER},
    {NULL, 0, 0, 0},
};

static void help(void) {
    printf(
        "usage: echomq produce QUEUE FIELD=VALUE...\n"
        "       echomq produce QUEUE --lines [--field NAME]   < lines\n"
        "       echomq produce QUEUE --json                   < json-lines\n"
        "\n"
        "Adds entries to the stream of QUEUE (key emq:{QUEUE}).\n"
        "\n"
        "  FIELD=VALUE     one entry with these fields (split at the first '=')\n"
        "  --lines         one entry per stdin line, in field NAME (--field,\n"
        "                  default 'data'); the line without its newline\n"
        "  --json          one entry per stdin line holding a JSON object;\n"
        "                  values: strings, numbers, true/false/null (as text)\n"
        "                  or {\"base64\":\"...\"} for bytes that are not UTF-8;\n"
        "                  blank lines are skipped\n"
        "  --batch N       entries per pipelined batch (default 100)\n"
        "  --linger MS     send what was read once no more arrived for MS\n"
        "                  (default 100): a slow source (a fifo, tail -f)\n"
        "                  is not held back until a batch fills. SIGINT or\n"
        "                  SIGTERM sends what was read, then exits (0 when\n"
        "                  all of it was written)\n"
        "  --maxlen N      trim the stream to N entries on every add\n"
        "  --minid ID      trim entries with IDs below ID on every add\n"
        "  --approx        trim with ~ (whole nodes only: cheaper, inexact)\n"
        "                  Trimming deletes entries whether or not a group has\n"
        "                  processed them; see 'echomq trim --acked'.\n"
        "  --print-ids     print each new entry's ID on stdout\n"
        "  --partitions P  QUEUE is a topic of P partitions (queues QUEUE.0 ..\n"
        "                  QUEUE.<P-1>, spread over a cluster's nodes);\n"
        "                  entries go to the partitions in turn\n"
        "  --key-field NAME  with --partitions: the value of field NAME is the\n"
        "                  entry's message key; one key always goes to one\n"
        "                  partition, in order (entries without NAME: in turn)\n"
        "\n"
        "A progress line is shown on a terminal; a summary line (count, rate)\n"
        "goes to stderr unless -q. A malformed --json line stops with exit 2,\n"
        "naming the line; the entries before it stay written.\n"
        "\n"
        "Examples:\n"
        "  echomq produce jobs task=resize image=42.png\n"
        "  seq 1 1000 | echomq produce jobs --lines --field n\n"
        "  echo '{\"task\":\"mail\",\"to\":\"a@b.c\"}' | echomq produce jobs --json\n"
        "  echomq produce orders --partitions 6 --key-field user user=42 item=7\n");
}

/* One entry waiting in the batch, with the storage it points into. */
typedef struct pending_msg {
    emq_field *fields; /* --json: from emq_fields_from_json; else malloc */
    int from_json;
    char *line;        /* --lines: the line */
} pending_msg;

typedef struct produce_run {
    emq_producer_t *p;
    emq_conf_t *conf;
    size_t batch;
    emq_message *msgs;
    emq_keyed_message *kmsgs; /* with --key-field */
    const char *key_field;
    pending_msg *own;
    emq_id *ids;
    size_t n;           /* entries in the batch */
    uint64_t written;   /* entries confirmed so far */
    int print_ids;
    int progress;       /* stderr is a terminal and not -q */
    int64_t started_ms, last_progress_ms;
} produce_run;

static void release(produce_run *r) {
    for (size_t i = 0; i < r->n; i++) {
        if (r->own[i].from_json)
            emq_free_array(r->own[i].fields);
        else
            free(r->own[i].fields);
        free(r->own[i].line);
    }
    r->n = 0;
}

/* Sends the batch. Returns CLI_OK or CLI_FAIL after printing why. */
static int flush_batch(produce_run *r) {
    if (r->n == 0)
        return CLI_OK;
    size_t written = 0;
    emq_error err;
    emq_status st;
    if (r->key_field) {
        size_t kn = strlen(r->key_field);
        for (size_t i = 0; i < r->n; i++) {
            emq_keyed_message *k = &r->kmsgs[i];
            k->message = r->msgs[i];
            k->key = NULL;
            k->key_len = 0;
            for (size_t f = 0; f < r->msgs[i].nfields; f++) {
                const emq_field *fd = &r->msgs[i].fields[f];
                if (fd->name_len == kn &&
                    memcmp(fd->name, r->key_field, kn) == 0) {
                    k->key = fd->value ? fd->value : "";
                    k->key_len = fd->value_len;
                    break;
                }
            }
        }
        st = emq_produce_batch_keyed(r->p, r->kmsgs, r->n, r->ids, &written,
                                     &err);
    } else {
        st = emq_produce_batch(r->p, r->msgs, r->n, r->ids, &written, &err);
    }
    r->written += written;
    if (r->print_ids) {
        for (size_t i = 0; i < r->n; i++)
            if (r->ids[i].str[0])
                printf("%s\n", r->ids[i].str);
        fflush(stdout);
    }
    release(r);
    if (st != EMQ_OK) {
        char doing[160];
        snprintf(doing, sizeof doing,
                 "adding entries failed (%llu written)",
                 (unsigned long long)r->written);
        return cli_runtime_err(r->conf, st, &err, doing);
    }
    if (r->progress) {
        int64_t now = cli_now_ms();
        if (now - r->last_progress_ms >= 200) {
            double s = (double)(now - r->started_ms) / 1000.0;
            fprintf(stderr, "\r\033[Kechomq: %llu entries written (%.0f/s)",
                    (unsigned long long)r->written,
                    s > 0 ? (double)r->written / s : 0.0);
            r->last_progress_ms = now;
        }
    }
    return CLI_OK;
}

/* Splits "name=value" words into a fields array (malloc). */
static int fields_from_args(char **words, int n, emq_field **out) {
    emq_field *f = calloc((size_t)n, sizeof *f);
    if (f == NULL)
        return cli_err(CLI_FAIL, "out of memory");
    for (int i = 0; i < n; i++) {
        char *eq = strchr(words[i], '=');
        if (eq == NULL || eq == words[i]) {
            free(f);
            return cli_usage_err(VERB,
                                 "'%s' is not FIELD=VALUE (a field name, "
                                 "'=', then the value)",
                                 words[i]);
        }
        f[i].name = words[i];
        f[i].name_len = (size_t)(eq - words[i]);
        f[i].value = eq + 1;
        f[i].value_len = strlen(eq + 1);
    }
    *out = f;
    return CLI_OK;
}

/* stdin, read as it comes: lines out of a buffer filled by read(2) with
 * poll(2), so a batch can go out once no more arrived for --linger ms. */
typedef struct line_reader {
    char *buf;
    size_t start, len, cap; /* unread bytes: buf[start, start + len) */
    int eof, failed;
} line_reader;

enum { LINE_READY = 1, LINE_WAIT = 0, LINE_END = -1 };

/* The next line (without its '\n'; a last line without one counts) into
 * *line and *len, valid until the next call. LINE_WAIT when none came
 * within wait_ms (or a signal interrupted the wait), LINE_END at the end
 * of stdin or on a read error (lr->failed). */
static int next_line(line_reader *lr, char **line, size_t *len, int wait_ms) {
    for (;;) {
        char *nl = lr->len ? memchr(lr->buf + lr->start, '\n', lr->len) : NULL;
        if (nl != NULL || (lr->eof && lr->len > 0)) {
            size_t n = nl ? (size_t)(nl - (lr->buf + lr->start)) : lr->len;
            *line = lr->buf + lr->start;
            *len = n;
            size_t used = nl ? n + 1 : n;
            lr->start += used;
            lr->len -= used;
            return LINE_READY;
        }
        if (lr->eof)
            return LINE_END;
        if (lr->start > 0) { /* keep the partial line at the front */
            memmove(lr->buf, lr->buf + lr->start, lr->len);
            lr->start = 0;
        }
        if (lr->len + 4096 > lr->cap) {
            size_t cap = lr->cap ? lr->cap * 2 : 65536;
            char *b = realloc(lr->buf, cap);
            if (b == NULL) {
                lr->failed = ENOMEM;
                return LINE_END;
            }
            lr->buf = b;
            lr->cap = cap;
        }
        struct pollfd p = {STDIN_FILENO, POLLIN, 0};
        int ready = poll(&p, 1, wait_ms);
        if (ready <= 0)
            return LINE_WAIT; /* nothing within the linger, or a signal */
        ssize_t got = read(STDIN_FILENO, lr->buf + lr->len, lr->cap - lr->len);
        if (got < 0 && (errno == EINTR || errno == EAGAIN))
            return LINE_WAIT;
        if (got < 0)
            lr->failed = errno;
        if (got <= 0)
            lr->eof = 1;
        else
            lr->len += (size_t)got;
    }
}

static atomic_int produce_stopping;

/* SIGINT/SIGTERM: send what was read, then stop (async-signal-safe). */
static void stop_producing(void *opaque) {
    (void)opaque;
    atomic_store(&produce_stopping, 1);
}

/* Reads stdin line by line into batches; a batch goes out when full, or
 * once no more input arrived for linger_ms. */
static int from_stdin(produce_run *r, int json, const char *field,
                      int linger_ms) {
    line_reader lr;
    memset(&lr, 0, sizeof lr);
    char *line = NULL;
    size_t len;
    uint64_t lineno = 0;
    int rc = CLI_OK;
    cli_on_stop_signal(stop_producing, NULL);
    while (rc == CLI_OK) {
        /* A stop: what was read goes (a last line without its '\n'
         * too), nothing more is read. */
        if (atomic_load(&produce_stopping))
            lr.eof = 1;
        int got = next_line(&lr, &line, &len, r->n > 0 ? linger_ms : 200);
        if (got == LINE_END)
            break;
        if (got == LINE_WAIT) {
            rc = flush_batch(r); /* lingered long enough (or a stop) */
            continue;
        }
        lineno++;
        pending_msg *own = &r->own[r->n];
        memset(own, 0, sizeof *own);
        if (json) {
            size_t k = 0;
            while (k < (size_t)len && strchr(" \t\r", line[k]))
                k++;
            if (k == (size_t)len)
                continue; /* blank line */
            emq_field *f;
            size_t nf;
            emq_error err;
            emq_status st =
                emq_fields_from_json(line, (size_t)len, &f, &nf, &err);
            if (st != EMQ_OK) {
                rc = flush_batch(r);
                if (rc == CLI_OK)
                    rc = cli_err(CLI_USAGE,
                                 "line %llu of the input is not a JSON "
                                 "object of field values: %s; %llu entries "
                                 "before it were written",
                                 (unsigned long long)lineno, err.message,
                                 (unsigned long long)r->written);
                break;
            }
            own->fields = f;
            own->from_json = 1;
            r->msgs[r->n] = (emq_message){f, nf, NULL};
        } else {
            own->line = malloc((size_t)len + 1);
            own->fields = calloc(1, sizeof *own->fields);
            if (own->line == NULL || own->fields == NULL) {
                free(own->line);
                free(own->fields);
                rc = cli_err(CLI_FAIL, "out of memory");
                break;
            }
            memcpy(own->line, line, (size_t)len);
            own->line[len] = '\0';
            own->fields[0] = (emq_field){field, strlen(field), own->line,
                                         (size_t)len};
            r->msgs[r->n] = (emq_message){own->fields, 1, NULL};
        }
        if (++r->n == r->batch)
            rc = flush_batch(r);
    }
    int stopped = atomic_load(&produce_stopping);
    atomic_store(&produce_stopping, 0);
    if (rc == CLI_OK && lr.failed)
        rc = cli_err(CLI_FAIL, "reading stdin failed after line %llu: %s",
                     (unsigned long long)lineno, strerror(lr.failed));
    if (rc == CLI_OK)
        rc = flush_batch(r);
    if (rc == CLI_OK && stopped)
        cli_note("stopped by a signal: every line read was sent");
    cli_signals_default();
    release(r);
    free(lr.buf);
    return rc;
}

int cmd_produce(int argc, char **argv) {
    cli_args a;
    int rc = cli_begin(VERB, argc, argv, opts, help, 0, &a);
    if (rc != CLI_OK)
        return rc == CLI_DONE ? CLI_OK : rc;
    long long batch = 100, linger = 100;
    if (a.npos < 1)
        rc = cli_usage_err(VERB, "QUEUE is missing: echomq produce QUEUE "
                                 "FIELD=VALUE... (or --lines, --json)");
    else if (a.seen[O_LINES] && a.seen[O_JSON])
        rc = cli_usage_err(VERB, "--lines and --json exclude each other");
    else if ((a.seen[O_LINES] || a.seen[O_JSON]) && a.npos > 1)
        rc = cli_usage_err(VERB, "FIELD=VALUE arguments and --%s exclude "
                                 "each other",
                           a.seen[O_LINES] ? "lines" : "json");
    else if (!a.seen[O_LINES] && !a.seen[O_JSON] && a.npos < 2)
        rc = cli_usage_err(VERB, "nothing to add: give FIELD=VALUE "
                                 "arguments, or --lines or --json to read "
                                 "stdin");
    else if (a.seen[O_FIELD] && !a.seen[O_LINES])
        rc = cli_usage_err(VERB, "--field goes with --lines");
    else if (a.seen[O_FIELD] && a.value[O_FIELD][0] == '\0')
        rc = cli_usage_err(VERB, "--field needs a non-empty name");
    else if (a.seen[O_MAXLEN] && a.seen[O_MINID])
        rc = cli_usage_err(VERB, "--maxlen and --minid exclude each other");
    else if (a.seen[O_APPROX] && !a.seen[O_MAXLEN] && !a.seen[O_MINID])
        rc = cli_usage_err(VERB, "--approx needs --maxlen or --minid");
    else if (a.seen[O_KEY_FIELD] && a.value[O_KEY_FIELD][0] == '\0')
        rc = cli_usage_err(VERB, "--key-field needs a non-empty name");
    else if (a.seen[O_BATCH])
        rc = cli_num(VERB, "--batch", a.value[O_BATCH], 1, 100000, &batch);
    if (rc == CLI_OK && a.seen[O_LINGER])
        rc = cli_num(VERB, "--linger", a.value[O_LINGER], 0, 3600000,
                     &linger);
    long long dummy;
    if (rc == CLI_OK && a.seen[O_MAXLEN])
        rc = cli_num(VERB, "--maxlen", a.value[O_MAXLEN], 0, INT64_MAX,
                     &dummy);
    emq_conf_t *conf = NULL;
    if (rc == CLI_OK) {
        conf = cli_conf(a.pos[0]);
        if (conf == NULL)
            rc = CLI_USAGE;
    }
    if (rc == CLI_OK)
        rc = cli_partitions(&a, conf);
    if (rc == CLI_OK && a.seen[O_MAXLEN])
        rc = cli_set(conf, "trim.maxlen", a.value[O_MAXLEN]);
    if (rc == CLI_OK && a.seen[O_MINID])
        rc = cli_set(conf, "trim.minid", a.value[O_MINID]);
    if (rc == CLI_OK && a.seen[O_APPROX])
        rc = cli_set(conf, "trim.approx", "1");
    produce_run r;
    memset(&r, 0, sizeof r);
    emq_field *arg_fields = NULL;
    if (rc == CLI_OK && !a.seen[O_LINES] && !a.seen[O_JSON])
        rc = fields_from_args(a.pos + 1, a.npos - 1, &arg_fields);
    if (rc != CLI_OK) {
        emq_conf_destroy(conf);
        free(a.pos);
        return rc;
    }

    r.conf = conf;
    r.batch = (size_t)batch;
    r.print_ids = a.seen[O_PRINT_IDS] > 0;
    r.progress = !cli_g.quiet && isatty(STDERR_FILENO) &&
                 (a.seen[O_LINES] || a.seen[O_JSON]);
    r.msgs = calloc(r.batch, sizeof *r.msgs);
    r.key_field = a.seen[O_KEY_FIELD] ? a.value[O_KEY_FIELD] : NULL;
    r.kmsgs = calloc(r.batch, sizeof *r.kmsgs);
    r.own = calloc(r.batch, sizeof *r.own);
    r.ids = calloc(r.batch, sizeof *r.ids);
    emq_error err;
    emq_status st = EMQ_OK;
    if (r.msgs == NULL || r.own == NULL || r.ids == NULL || r.kmsgs == NULL)
        rc = cli_err(CLI_FAIL, "out of memory");
    else if ((st = emq_producer_new(conf, &r.p, &err)) != EMQ_OK)
        rc = st == EMQ_EINVAL ? cli_err(CLI_USAGE, "%s", err.message)
                              : cli_runtime_err(conf, st, &err,
                                                "starting the producer");
    r.started_ms = cli_now_ms();
    if (rc == CLI_OK) {
        if (arg_fields) {
            r.msgs[0] = (emq_message){arg_fields, (size_t)(a.npos - 1), NULL};
            r.n = 1;
            r.own[0].fields = arg_fields; /* freed by release() */
            arg_fields = NULL;
            rc = flush_batch(&r);
        } else {
            rc = from_stdin(&r, a.seen[O_JSON] > 0,
                            a.seen[O_FIELD] ? a.value[O_FIELD] : "data",
                            (int)linger);
        }
    }
    if (r.progress && r.last_progress_ms)
        fputs("\r\033[K", stderr);
    if (rc == CLI_OK) {
        double s = (double)(cli_now_ms() - r.started_ms) / 1000.0;
        char key[1100] = "";
        if (a.seen[O_PARTITIONS] && strcmp(a.value[O_PARTITIONS], "1") != 0)
            snprintf(key, sizeof key, "topic %s (%s partitions)", a.pos[0],
                     a.value[O_PARTITIONS]);
        else
            emq_conf_stream_key(conf, key, sizeof key, NULL);
        cli_note("produced %llu entr%s to %s in %.2f s (%.0f entries/s)",
                 (unsigned long long)r.written, r.written == 1 ? "y" : "ies",
                 key, s, s > 0 ? (double)r.written / s : 0.0);
    }
    free(arg_fields);
    emq_producer_destroy(r.p);
    free(r.msgs);
    free(r.kmsgs);
    free(r.own);
    free(r.ids);
    emq_conf_destroy(conf);
    free(a.pos);
    return rc;
}
