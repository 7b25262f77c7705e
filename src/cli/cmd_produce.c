/* SPDX-License-Identifier: BSD-3-Clause */
/* cmd_produce.c: `echomq produce`, entries onto a queue.
 *
 * Three sources: FIELD=VALUE arguments (one entry), stdin lines (--lines,
 * one entry per line with one field) and stdin JSON objects (--json, one
 * entry per line, parsed by emq_fields_from_json so {"base64":"..."}
 * values come back byte-exact). Arguments make one emq_produce call; stdin
 * lines go through emq_produce_async, which the producer sends pipelined
 * in windows of --batch after lingering --linger ms for company; trimming
 * is the producer's own policy (trim.* properties). The first entry that
 * fails stops the reading; what was read is still sent, and the run exits
 * as the failure says. A malformed input line stops the run with exit 2
 * after everything before it was written, and says how much that was.
 */
#include "cli.h"

#include <stdlib.h>
#include <errno.h>
#include <pthread.h>
#include <poll.h>
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

static const char *const VERB = "produce";
static const char *const SYNOPSIS =
    "echomq produce QUEUE FIELD=VALUE... (or --lines, --json)";

static const cli_optdoc opts[] = {
    {O_LINES, NULL,
     "one entry per stdin line, in field NAME (--field, default 'data'); "
     "the line without its newline, byte-exact (empty lines give empty "
     "values)"},
    {O_FIELD, "NAME", "with --lines: the field of each line (default data)"},
    {O_JSON, NULL,
     "one entry per stdin line holding a JSON object; values: strings, "
     "numbers, true/false/null (as text) or {\"base64\":\"...\"} for bytes "
     "that are not UTF-8; blank lines are skipped"},
    {O_BATCH, "N",
     "most entries per pipelined round (producer.window, default 100)"},
    {O_LINGER, "MS",
     "with --lines/--json: wait up to MS (default 100, at most 60000; "
     "producer.linger_ms) for more lines before sending what was read, so "
     "a slow source (a fifo, tail -f) is not held back until a round "
     "fills. SIGINT, SIGTERM or SIGHUP sends every line read (a last one without "
     "its newline too), reports the count, and exits 0 when all of it was "
     "written"},
    {O_MAX_LINE, "BYTES",
     "with --lines/--json: the longest line taken (default 8388608, 8 MiB; "
     "at most producer.queue.max_bytes); a longer one stops the run with "
     "exit 1, the count of entries written before it said"},
    {O_TIMEOUT, "MS",
     "each entry must be confirmed within MS (default 10000; "
     "producer.timeout_ms); past it the run fails with exit 1. With the "
     "server down the run fails at once instead of waiting out a connect "
     "per entry"},
    {O_WAIT_REPLICAS, "N",
     "an entry counts as written only once N replicas have it (WAIT after "
     "each round; producer.wait_replicas); written but not replicated "
     "within producer.wait_timeout_ms (1 s) is a failure, exit 1, naming "
     "how many replicas had it and how many entries were written"},
    {O_MAXLEN, "N", "trim the stream to N entries on every add (trim.maxlen)"},
    {O_MINID, "ID", "trim entries with IDs below ID on every add (trim.minid)"},
    {O_APPROX, NULL,
     "trim with ~ (whole nodes only: cheaper, inexact). Trimming deletes "
     "entries whether or not a group has processed them; see 'echomq trim "
     "--acked'"},
    {O_PRINT_IDS, NULL,
     "print each new entry's ID on stdout (a delayed entry's is its handle, "
     "delayed-<digits>, which 'echomq cancel' takes)"},
    {O_DELAY, "MS",
     "hand the entries to no consumer before MS milliseconds have passed "
     "(by the server's clock; at most 2^53); they wait in the server, and "
     "a running consumer of the queue moves each to the stream when it is "
     "due (docs/QUEUES.md)"},
    {O_AT, "@UNIX-MS",
     "hand the entries to no consumer before this unix time in "
     "milliseconds (the server's clock), e.g. --at @$(($(date +%s) + "
     "60))000; not with --delay"},
    {O_PRIORITY, "P",
     "the entries' priority, 0 (the most urgent) to 9: they wait in the "
     "server and every read of the queue takes the most urgent first; on "
     "a queue with priorities, entries given none are 5 (docs/QUEUES.md)"},
    {O_DEDUP_KEY, "KEY",
     "the entry's idempotency key: it is added only if no entry with KEY "
     "was added to the queue within --dedup-ttl; --print-ids prints the "
     "first entry's ID either way (docs/QUEUES.md)"},
    {O_DEDUP_FIELD, "NAME",
     "with --lines/--json: each entry's idempotency key is the value of "
     "its field NAME (entries without it have none)"},
    {O_DEDUP_TTL, "MS",
     "how long an idempotency key keeps duplicates out (default 86400000, "
     "24 h; dedup.ttl_ms)"},
    {O_PARTITIONS, "P",
     "QUEUE is a topic of P partitions (queues QUEUE.0 .. QUEUE.<P-1>, "
     "spread over a cluster's nodes, docs/SCALING.md); entries go to the "
     "partitions in turn"},
    {O_KEY_FIELD, "NAME",
     "with --partitions: the value of field NAME is the entry's message "
     "key; one key always goes to one partition, in order (entries without "
     "NAME: in turn)"},
    CLI_OPTS_END,
};

CLI_VERB(
    produce, "add entries: FIELD=VALUE words, or --lines or --json from stdin",
    "echomq produce QUEUE FIELD=VALUE...\n"
    "echomq produce QUEUE --lines [--field NAME]   < lines\n"
    "echomq produce QUEUE --json                   < json-lines",
    "Adds entries to the stream of QUEUE (key emq:{QUEUE}): one entry of\n"
    "the FIELD=VALUE words (each split at its first '='), or one per line\n"
    "of stdin with --lines or --json.\n",
    opts,
    "A progress line is shown on a terminal; a summary line (count, rate)\n"
    "goes to stderr unless -q. A malformed --json line stops with exit 2,\n"
    "naming the line; the entries before it stay written.\n"
    "\n"
    "Examples:\n"
    "  echomq produce jobs task=resize image=42.png\n"
    "  seq 1 1000 | echomq produce jobs --lines --field n\n"
    "  echo '{\"task\":\"mail\",\"to\":\"a@b.c\"}' | echomq produce jobs --json\n"
    "  echomq produce orders --partitions 6 --key-field user user=42 item=7\n");

typedef struct produce_run {
    emq_producer_t *p;
    emq_conf_t *conf;
    const char *key_field;
    const char *dedup_field; /* --dedup-field */
    emq_produce_opts when;   /* --delay, --at, --dedup-key (the message
                                key and a --dedup-field key are set per
                                entry) */
    int print_ids;
    int progress; /* stderr is a terminal and not -q */
    int64_t started_ms, last_progress_ms;
    /* Filled by the delivery callbacks (the producer's thread). */
    pthread_mutex_t mu;
    uint64_t written;     /* entries confirmed so far */
    uint64_t sent;        /* entries handed to emq_produce_async */
    atomic_int failed;    /* a delivery failed: stop reading */
    atomic_int *stopping; /* a stop signal came: give up waiting for room */
    emq_status fail_st;
    emq_error fail_err;
    /* --print-ids: IDs come back in order per queue, but a topic's
     * partitions interleave; a ring indexed by sequence number prints them
     * in input order. Its size is the producer's queue bound. */
    emq_id *ring;
    unsigned char *ring_done;
    size_t ring_size;
    uint64_t next_print;
} produce_run;

/* The value of field name in an entry (name NULL, or no such field:
 * NULL): its message key (--key-field) or idempotency key
 * (--dedup-field). */
static void key_of(const char *name, const emq_field *f, size_t nf,
                   const char **key, size_t *key_len) {
    *key = NULL;
    *key_len = 0;
    if (name == NULL)
        return;
    size_t kn = strlen(name);
    for (size_t i = 0; i < nf; i++)
        if (f[i].name_len == kn && memcmp(f[i].name, name, kn) == 0) {
            *key = f[i].value ? f[i].value : "";
            *key_len = f[i].value_len;
            return;
        }
}

/* Which entry a delivery is for. */
typedef struct seq_tag {
    produce_run *run;
    uint64_t seq;
} seq_tag;

static void on_delivery(void *opaque, const emq_delivery *d) {
    seq_tag *t = opaque;
    produce_run *r = t->run;
    pthread_mutex_lock(&r->mu);
    if (d->status == EMQ_OK) {
        r->written++;
    } else if (!atomic_load(&r->failed)) {
        r->fail_st = d->status;
        r->fail_err = *d->error;
        if (d->status == EMQ_ENOTDURABLE)
            r->written++; /* it is in the stream, just not replicated */
        atomic_store(&r->failed, 1);
    }
    if (r->ring) {
        size_t at = (size_t)(t->seq % r->ring_size);
        snprintf(r->ring[at].str, sizeof r->ring[at].str, "%s", d->id);
        r->ring_done[at] = 1;
        for (;;) {
            size_t k = (size_t)(r->next_print % r->ring_size);
            if (!r->ring_done[k])
                break;
            if (r->ring[k].str[0])
                printf("%s\n", r->ring[k].str);
            r->ring_done[k] = 0;
            r->next_print++;
        }
        fflush(stdout);
    }
    pthread_mutex_unlock(&r->mu);
    free(t);
}

/* Queues one entry (fields copied by the producer), waiting while the
 * producer's queue is full. Returns CLI_OK or CLI_FAIL after printing why. */
static int send_async(produce_run *r, const emq_field *f, size_t nf) {
    seq_tag *t = malloc(sizeof *t);
    if (t == NULL)
        return cli_err(CLI_FAIL, "out of memory");
    t->run = r;
    t->seq = r->sent;
    emq_produce_opts o = r->when;
    key_of(r->key_field, f, nf, &o.key, &o.key_len);
    if (r->dedup_field) {
        key_of(r->dedup_field, f, nf, &o.dedup_key, &o.dedup_key_len);
        if (o.dedup_key != NULL && o.dedup_key_len == 0)
            o.dedup_key = NULL; /* an empty value: no key */
    }
    for (;;) {
        emq_error err;
        emq_status st =
            emq_produce_async_ex(r->p, f, nf, &o, on_delivery, t, &err);
        if (st == EMQ_OK)
            break;
        if (st == EMQ_ELIMIT && err.retriable && r->stopping &&
            atomic_load(r->stopping)) {
            free(t); /* a stop while the queue is full: not queued */
            return cli_err(CLI_FAIL,
                           "stopped by a signal while the producer's queue "
                           "was full (the server is slow or gone); this "
                           "entry and those after it were not sent");
        }
        if (st != EMQ_ELIMIT || !err.retriable) {
            free(t);
            /* Refused at once (a link that failed for good): the entries
             * before it settle first, so the count is what was written. */
            emq_error ferr;
            (void)emq_producer_flush(r->p, -1, &ferr);
            pthread_mutex_lock(&r->mu);
            uint64_t written = r->written;
            pthread_mutex_unlock(&r->mu);
            char doing[160];
            snprintf(doing, sizeof doing, "adding an entry (%llu written)",
                     (unsigned long long)written);
            return cli_runtime_err(r->conf, st, &err, doing);
        }
        usleep(500); /* the queue is full: let deliveries drain it */
    }
    r->sent++;
    if (r->progress) {
        int64_t now = emq_clock_ms();
        if (now - r->last_progress_ms >= 200) {
            double s = (double)(now - r->started_ms) / 1000.0;
            pthread_mutex_lock(&r->mu);
            uint64_t w = r->written;
            pthread_mutex_unlock(&r->mu);
            fprintf(stderr, "\r\033[Kechomq: %llu entries written (%.0f/s)",
                    (unsigned long long)w, s > 0 ? (double)w / s : 0.0);
            r->last_progress_ms = now;
        }
    }
    return CLI_OK;
}

/* Waits for every delivery (at most STOP_FLUSH_MS when stopped by a
 * signal: a run ends within about a second of one, whatever the server
 * does). Returns CLI_OK, or the first failure's exit after printing it. */
/* --max-line's default: well under producer.queue.max_bytes (64 MiB),
 * so a line that fits is also one the producer's queue can take. */
#define DEFAULT_MAX_LINE ((long long)8 << 20)
/* How long a run stopped by a signal waits for what it queued. */
#define STOP_FLUSH_MS 300

static int finish(produce_run *r, int stopped) {
    emq_error err;
    emq_status st =
        emq_producer_flush(r->p, stopped ? STOP_FLUSH_MS : -1, &err);
    pthread_mutex_lock(&r->mu);
    int failed = atomic_load(&r->failed);
    uint64_t written = r->written;
    pthread_mutex_unlock(&r->mu);
    if (!failed && st == EMQ_OK)
        return CLI_OK;
    if (!failed && stopped && st == EMQ_ETIMEDOUT)
        return cli_err(CLI_FAIL,
                       "stopped by a signal: %llu entries written; %llu more "
                       "were not confirmed within %d ms (the server did not "
                       "answer) and may or may not have been added",
                       (unsigned long long)written,
                       (unsigned long long)(r->sent - written), STOP_FLUSH_MS);
    if (!failed) {
        r->fail_st = st;
        r->fail_err = err;
    }
    char doing[160];
    snprintf(doing, sizeof doing, "adding entries failed (%llu written)",
             (unsigned long long)written);
    return cli_runtime_err(r->conf, r->fail_st, &r->fail_err, doing);
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
    size_t scanned;         /* of them, searched for '\n' already */
    size_t max;             /* the longest line taken (--max-line) */
    int eof, failed;
    int too_long; /* a line longer than max: stop */
} line_reader;

enum { LINE_READY = 1, LINE_WAIT = 0, LINE_END = -1 };

/* The next line (without its '\n'; a last line without one counts) into
 * *line and *len, valid until the next call. LINE_WAIT when none came
 * within wait_ms (or a signal interrupted the wait), LINE_END at the end
 * of stdin or on a read error (lr->failed). */
static int next_line(line_reader *lr, char **line, size_t *len, int wait_ms) {
    for (;;) {
        /* Only what came since the last look is searched. */
        char *nl = lr->len > lr->scanned
                       ? memchr(lr->buf + lr->start + lr->scanned, '\n',
                                lr->len - lr->scanned)
                       : NULL;
        lr->scanned = lr->len;
        size_t n = nl ? (size_t)(nl - (lr->buf + lr->start)) : lr->len;
        if (n > lr->max) { /* never taken: stop before it grows more */
            lr->too_long = 1;
            return LINE_END;
        }
        if (nl != NULL || (lr->eof && lr->len > 0)) {
            *line = lr->buf + lr->start;
            *len = n;
            size_t used = nl ? n + 1 : n;
            lr->start += used;
            lr->len -= used;
            lr->scanned = 0;
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

/* Set by SIGINT/SIGTERM/SIGHUP: send what was read, then stop. */
static atomic_int produce_stopping;

/* Reads stdin line by line, each line an asynchronous entry; the producer
 * sends them in rounds (lingering producer.linger_ms for company). */
static int from_stdin(produce_run *r, int json, const char *field,
                      long long max_line) {
    line_reader lr;
    memset(&lr, 0, sizeof lr);
    lr.max = (size_t)max_line;
    r->stopping = &produce_stopping;
    char *line = NULL;
    size_t len;
    uint64_t lineno = 0;
    int rc = CLI_OK;
    cli_on_stop_signal(cli_stop_flag, &produce_stopping);
    while (rc == CLI_OK && !atomic_load(&r->failed)) {
        /* A stop: what was read goes (a last line without its '\n'
         * too), nothing more is read. */
        if (atomic_load(&produce_stopping))
            lr.eof = 1;
        int got = next_line(&lr, &line, &len, 200);
        if (got == LINE_END)
            break;
        if (got == LINE_WAIT)
            continue;
        lineno++;
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
                rc = finish(r, 0);
                if (rc == CLI_OK)
                    rc = cli_err(CLI_USAGE,
                                 "line %llu of the input is not a JSON "
                                 "object of field values: %s; %llu entries "
                                 "before it were written",
                                 (unsigned long long)lineno, err.message,
                                 (unsigned long long)r->written);
                break;
            }
            rc = send_async(r, f, nf);
            emq_fields_free(f);
        } else {
            emq_field f = {field, strlen(field), line, (size_t)len};
            rc = send_async(r, &f, 1);
        }
    }
    int stopped = atomic_load(&produce_stopping);
    atomic_store(&produce_stopping, 0);
    if (rc == CLI_OK && lr.failed)
        rc = cli_err(CLI_FAIL, "reading stdin failed after line %llu: %s",
                     (unsigned long long)lineno, strerror(lr.failed));
    if (rc == CLI_OK && lr.too_long)
        rc = CLI_FAIL; /* said once the count is known, below */
    /* What was read is sent, whatever stopped us; after a signal, within
     * STOP_FLUSH_MS. */
    int fin = finish(r, stopped);
    if (rc == CLI_OK)
        rc = fin;
    if (lr.too_long) {
        pthread_mutex_lock(&r->mu);
        uint64_t written = r->written;
        pthread_mutex_unlock(&r->mu);
        cli_err(CLI_FAIL,
                "line %llu of the input is longer than --max-line (%llu "
                "bytes); nothing from it on was sent, %llu entries before it "
                "were written",
                (unsigned long long)lineno + 1, (unsigned long long)lr.max,
                (unsigned long long)written);
    }
    if (rc == CLI_OK && stopped)
        cli_note("stopped by a signal: every line read was sent");
    cli_signals_default();
    free(lr.buf);
    return rc;
}

/* One entry from FIELD=VALUE arguments. */
static int from_args(produce_run *r, const emq_field *f, size_t nf) {
    emq_produce_opts o = r->when;
    key_of(r->key_field, f, nf, &o.key, &o.key_len);
    emq_id id;
    emq_error err;
    emq_status st = emq_produce_ex(r->p, f, nf, &o, &id, &err);
    if (st == EMQ_OK || st == EMQ_ENOTDURABLE) {
        r->written = 1;
        if (r->print_ids)
            printf("%s\n", id.str);
    }
    if (st != EMQ_OK)
        return cli_runtime_err(r->conf, st, &err,
                               st == EMQ_ENOTDURABLE
                                   ? "adding the entry (1 written)"
                                   : "adding the entry (0 written)");
    return CLI_OK;
}

/* Option -> property, in the order the numbers are checked; --batch and
 * --linger are set also when not given (the CLI's defaults). */
static const cli_prop props[] = {
    CLI_NUM_ALWAYS(O_BATCH, "producer.window", 1, 100000, 100),
    CLI_NUM_ALWAYS(O_LINGER, "producer.linger_ms", 0, 60000, 100),
    CLI_NUM(O_TIMEOUT, "producer.timeout_ms", 1, 86400000, 0),
    CLI_NUM(O_WAIT_REPLICAS, "producer.wait_replicas", 0, 1000, 0),
    CLI_NUM(O_DEDUP_TTL, "dedup.ttl_ms", 1, (int64_t)1 << 53, 0),
    CLI_NUM(O_MAXLEN, "trim.maxlen", 0, INT64_MAX, 0),
    CLI_TEXT(O_MINID, "trim.minid"),
    CLI_FLAG(O_APPROX, "trim.approx", "1"),
    CLI_TEXT(O_PARTITIONS, "partitions"),
    CLI_PROPS_END,
};

/* Reads --delay or --at, and --priority, into *when (checked by
 * check_usage's shape rules); CLI_USAGE after printing why. */
static int read_when(const cli_args *a, emq_produce_opts *when) {
    *when = (emq_produce_opts)EMQ_PRODUCE_OPTS_INIT;
    long long ms = 0, priority = -1;
    int rc = CLI_OK;
    if (a->seen[O_PRIORITY])
        rc = cli_num(VERB, "--priority", a->value[O_PRIORITY], 0, 9, &priority);
    when->priority = priority;
    if (rc != CLI_OK)
        return rc;
    if (a->seen[O_DELAY])
        rc = cli_num(VERB, "--delay", a->value[O_DELAY], 0, (1LL << 53), &ms);
    else if (a->seen[O_AT])
        rc = cli_num(VERB, "--at", a->value[O_AT] + 1, 1, (1LL << 53), &ms);
    if (a->seen[O_DELAY])
        when->delay_ms = ms;
    else
        when->due_ms = ms;
    return rc;
}

/* Every usage check that needs no server (beside a missing QUEUE): the
 * source of entries,
 * the options that go together, the numbers (props). */
static int check_usage(cli_args *a) {
    int rc = CLI_OK;
    if (a->seen[O_LINES] && a->seen[O_JSON])
        rc = cli_usage_err(VERB, "--lines and --json exclude each other");
    else if ((a->seen[O_LINES] || a->seen[O_JSON]) && a->npos > 1)
        rc = cli_usage_err(VERB,
                           "FIELD=VALUE arguments and --%s exclude "
                           "each other",
                           a->seen[O_LINES] ? "lines" : "json");
    else if (!a->seen[O_LINES] && !a->seen[O_JSON] && a->npos < 2)
        rc = cli_usage_err(VERB, "nothing to add: give FIELD=VALUE "
                                 "arguments, or --lines or --json to read "
                                 "stdin");
    else if (a->seen[O_FIELD] && !a->seen[O_LINES])
        rc = cli_usage_err(VERB, "--field goes with --lines");
    else if (a->seen[O_FIELD] && a->value[O_FIELD][0] == '\0')
        rc = cli_usage_err(VERB, "--field needs a non-empty name");
    else if (a->seen[O_MAXLEN] && a->seen[O_MINID])
        rc = cli_usage_err(VERB, "--maxlen and --minid exclude each other");
    else if (a->seen[O_APPROX] && !a->seen[O_MAXLEN] && !a->seen[O_MINID])
        rc = cli_usage_err(VERB, "--approx needs --maxlen or --minid");
    else if (a->seen[O_KEY_FIELD] && a->value[O_KEY_FIELD][0] == '\0')
        rc = cli_usage_err(VERB, "--key-field needs a non-empty name");
    else if (a->seen[O_DEDUP_KEY] && (a->seen[O_LINES] || a->seen[O_JSON]))
        rc = cli_usage_err(VERB, "--dedup-key gives one entry its key; with "
                                 "--lines or --json use --dedup-field NAME");
    else if (a->seen[O_DEDUP_FIELD] && !a->seen[O_LINES] && !a->seen[O_JSON])
        rc = cli_usage_err(VERB, "--dedup-field goes with --lines or --json");
    else if (a->seen[O_MAX_LINE] && !a->seen[O_LINES] && !a->seen[O_JSON])
        rc = cli_usage_err(VERB, "--max-line goes with --lines or --json");
    else if (a->seen[O_DEDUP_FIELD] && a->value[O_DEDUP_FIELD][0] == '\0')
        rc = cli_usage_err(VERB, "--dedup-field needs a non-empty name");
    else if (a->seen[O_DEDUP_KEY] && (a->value[O_DEDUP_KEY][0] == '\0' ||
                                      strlen(a->value[O_DEDUP_KEY]) > 512))
        rc = cli_usage_err(VERB, "--dedup-key takes 1 to 512 bytes");
    else if (a->seen[O_DEDUP_TTL] && !a->seen[O_DEDUP_KEY] &&
             !a->seen[O_DEDUP_FIELD])
        rc = cli_usage_err(VERB, "--dedup-ttl goes with --dedup-key or "
                                 "--dedup-field");
    else if (a->seen[O_DELAY] && a->seen[O_AT])
        rc = cli_usage_err(VERB, "--delay and --at exclude each other");
    else if (a->seen[O_AT] && a->value[O_AT][0] != '@')
        rc = cli_usage_err(VERB,
                           "--at takes @UNIX-MS, a unix time in "
                           "milliseconds after '@' (--at @%s?)",
                           a->value[O_AT]);
    else if ((rc = read_when(a, &(emq_produce_opts){0})) == CLI_OK)
        rc = cli_check_props(VERB, a, props);
    return rc;
}

/* The conf of the run, or NULL after printing why (a usage error). */
static emq_conf_t *configure(const cli_args *a) {
    emq_conf_t *conf = cli_conf(a->pos[0]);
    /* A bounded queue: reading waits for deliveries beyond it. */
    if (conf &&
        (cli_set_props(conf, a, props) != CLI_OK ||
         cli_set(conf, "producer.queue.max_messages", "10000") != CLI_OK)) {
        emq_conf_destroy(conf);
        conf = NULL;
    }
    return conf;
}

/* The summary line of a run that wrote everything. */
static void summary(const produce_run *r, const char *queue) {
    double s = (double)(emq_clock_ms() - r->started_ms) / 1000.0;
    char key[1100] = "";
    char parts[24] = "1"; /* --partitions, or found in the server */
    emq_conf_get(r->conf, "partitions", parts, sizeof parts, NULL);
    if (strcmp(parts, "1") != 0)
        snprintf(key, sizeof key, "topic %s (%s partitions)", queue, parts);
    else
        emq_conf_stream_key(r->conf, key, sizeof key, NULL);
    cli_note("produced %llu entr%s to %s in %.2f s (%.0f entries/s)",
             (unsigned long long)r->written, r->written == 1 ? "y" : "ies", key,
             s, s > 0 ? (double)r->written / s : 0.0);
}

int cmd_produce(int argc, char **argv) {
    cli_args a;
    int rc = cli_begin_check(VERB, argc, argv, &cli_verb_produce, SYNOPSIS,
                             check_usage, &a);
    if (rc != CLI_OK)
        return rc;
    emq_conf_t *conf = configure(&a);
    if (conf == NULL)
        rc = CLI_USAGE;
    produce_run r;
    memset(&r, 0, sizeof r);
    pthread_mutex_init(&r.mu, NULL);
    emq_field *arg_fields = NULL;
    if (rc == CLI_OK && !a.seen[O_LINES] && !a.seen[O_JSON])
        rc = fields_from_args(a.pos + 1, a.npos - 1, &arg_fields);
    if (rc != CLI_OK) {
        emq_conf_destroy(conf);
        free(a.pos);
        return rc;
    }

    r.conf = conf;
    r.print_ids = a.seen[O_PRINT_IDS] > 0;
    r.progress = !cli_g.quiet && isatty(STDERR_FILENO) &&
                 (a.seen[O_LINES] || a.seen[O_JSON]);
    r.key_field = a.seen[O_KEY_FIELD] ? a.value[O_KEY_FIELD] : NULL;
    (void)read_when(&a, &r.when); /* checked by check_usage */
    r.dedup_field = a.seen[O_DEDUP_FIELD] ? a.value[O_DEDUP_FIELD] : NULL;
    if (a.seen[O_DEDUP_KEY]) {
        r.when.dedup_key = a.value[O_DEDUP_KEY];
        r.when.dedup_key_len = strlen(a.value[O_DEDUP_KEY]);
    }
    if (r.print_ids && (a.seen[O_LINES] || a.seen[O_JSON])) {
        r.ring_size = 10000; /* producer.queue.max_messages */
        r.ring = calloc(r.ring_size, sizeof *r.ring);
        r.ring_done = calloc(r.ring_size, 1);
    }
    emq_error err;
    emq_status st = EMQ_OK;
    long long max_line = DEFAULT_MAX_LINE;
    if (r.print_ids && (a.seen[O_LINES] || a.seen[O_JSON]) &&
        (r.ring == NULL || r.ring_done == NULL))
        rc = cli_err(CLI_FAIL, "out of memory");
    else if ((rc = cli_find_topic(&a, conf)) != CLI_OK)
        ; /* said why */
    else if ((st = emq_producer_new(conf, &r.p, &err)) != EMQ_OK)
        rc = st == EMQ_EINVAL
                 ? cli_err(CLI_USAGE, "%s", err.message)
                 : cli_runtime_err(conf, st, &err, "starting the producer");
    r.started_ms = emq_clock_ms();
    if (rc == CLI_OK) {
        if (arg_fields)
            rc = from_args(&r, arg_fields, (size_t)(a.npos - 1));
        else if (!a.seen[O_MAX_LINE] ||
                 (rc = cli_num(VERB, "--max-line", a.value[O_MAX_LINE], 1,
                               (long long)1 << 32, &max_line)) == CLI_OK)
            rc = from_stdin(&r, a.seen[O_JSON] > 0,
                            a.seen[O_FIELD] ? a.value[O_FIELD] : "data",
                            max_line);
    }
    if (r.progress && r.last_progress_ms)
        fputs("\r\033[K", stderr);
    if (rc == CLI_OK)
        summary(&r, a.pos[0]);
    free(arg_fields);
    emq_producer_destroy(r.p);
    free(r.ring);
    free(r.ring_done);
    pthread_mutex_destroy(&r.mu);
    emq_conf_destroy(conf);
    free(a.pos);
    return rc;
}
