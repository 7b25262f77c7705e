/* SPDX-License-Identifier: BSD-3-Clause */
/* cmd_tail.c: `echomq tail`, looking at a queue's entries without joining
 * a group.
 *
 * XREVRANGE (the last N) or XRANGE (from an ID or a time), then with -f
 * XREAD BLOCK after the last entry shown. No group is created or read, so
 * nothing is acknowledged and nothing is pinned (a throwaway group would
 * keep `trim --acked` from trimming what it never read). Lines are written
 * as consume writes them (lines.c): JSON, or --format.
 */
#include "cli.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *const VERB = "tail";

static const cli_optdoc opts[] = {
    {O_COUNT_N, "N",
     "how many (default 10; with --from ID: all up to N, default 10)"},
    {O_FROM, "ID|@UNIX-MS|-N",
     "the entries from ID on (inclusive), those added at or after a time "
     "(@UNIX-MS), or the last N (-N, as -n N)"},
    {O_FOLLOW, NULL,
     "then wait for new entries and print them as they come, until SIGINT, "
     "SIGTERM or SIGHUP, or until stdout closes (exit 0)"},
    {O_FORMAT, "FMT", "plain lines, as 'echomq consume --format'"},
    CLI_OPT_PARTITIONS(
        "all partitions in ID order, each line naming its partition"),
    CLI_OPTS_END,
};

CLI_VERB(
    tail, "look at entries without joining a group",
    "echomq tail QUEUE [-n N] [-f] [--from ID|@UNIX-MS|-N]\n"
    "            [--format FMT]",
    "Prints entries of QUEUE's stream without joining a group: nothing is\n"
    "acknowledged, nothing stays pending, nothing keeps 'trim --acked'\n"
    "from trimming.\n",
    opts,
    "Examples:\n"
    "  echomq tail jobs\n"
    "  echomq tail jobs -f --format '%t %f{task}'\n"
    "  echomq tail jobs --from @1700000000000 -n 100\n");

static atomic_int tail_stopping; /* set by SIGINT/SIGTERM/SIGHUP (-f) */

/* One stream tailed: a queue's, or a topic partition's. */
typedef struct tailed {
    const char *key;
    emq_admin_t *handle; /* borrowed: the queue's or the partition's */
    char last[64];       /* the newest ID shown (XREAD's exclusive start) */
} tailed;

/* An entry of a gathered reply, for ordering the streams' entries. */
typedef struct tail_id {
    unsigned long long ms, seq;
} tail_id;

/* Parses "ms-seq" (or "ms"): 0, or -1 when text is not an ID. */
static int id_parse(const char *text, size_t len, tail_id *out) {
    char buf[64], *end;
    if (len == 0 || len >= sizeof buf || text[0] < '0' || text[0] > '9')
        return -1;
    memcpy(buf, text, len);
    buf[len] = '\0';
    out->seq = 0;
    out->ms = strtoull(buf, &end, 10);
    if (*end == '-') {
        const char *seq = end + 1;
        if (*seq < '0' || *seq > '9')
            return -1;
        out->seq = strtoull(seq, &end, 10);
    }
    return *end == '\0' ? 0 : -1;
}

typedef struct tail_item {
    tail_id id;
    int stream;
    const emq_reply *entry;
} tail_item;

static int item_cmp(const void *x, const void *y) {
    const tail_item *a = x, *b = y;
    if (a->id.ms != b->id.ms)
        return a->id.ms < b->id.ms ? -1 : 1;
    if (a->id.seq != b->id.seq)
        return a->id.seq < b->id.seq ? -1 : 1;
    return (a->stream > b->stream) - (a->stream < b->stream);
}

/* Writes one entry [id, [name, value, ...]] of stream t as a line into
 * buf and moves t->last to its ID. Returns CLI_OK or CLI_FAIL. */
static int add_line(const cli_lines *lines, tailed *t, const emq_reply *e,
                    char **buf, size_t *len, size_t *cap) {
    const emq_reply *pairs = emq_reply_at(e, 1);
    size_t idlen, nf = emq_reply_len(pairs) / 2;
    const char *id = emq_reply_str(emq_reply_at(e, 0), &idlen);
    if (id == NULL || idlen >= sizeof t->last)
        return CLI_OK;
    char idz[64];
    memcpy(idz, id, idlen);
    idz[idlen] = '\0';
    emq_field *f = calloc(nf ? nf : 1, sizeof *f);
    if (f == NULL)
        return cli_err(CLI_FAIL, "out of memory");
    for (size_t i = 0; i < nf; i++) {
        f[i].name = emq_reply_str(emq_reply_at(pairs, 2 * i), &f[i].name_len);
        f[i].value =
            emq_reply_str(emq_reply_at(pairs, 2 * i + 1), &f[i].value_len);
    }
    emq_entry entry = {.id = idz, .fields = f, .nfields = nf, .stream = t->key};
    int rc = cli_line_append(lines, &entry, buf, len, cap) == 0
                 ? CLI_OK
                 : cli_err(CLI_FAIL, "out of memory");
    free(f);
    snprintf(t->last, sizeof t->last, "%s", idz);
    return rc;
}

/* Writes the entries of n XRANGE-shaped replies (r[i] from stream t[i]:
 * arrays of [id, [name, value, ...]]) as lines, oldest first by ID across
 * the streams: the first count of them, or with newest the last count.
 * Returns CLI_OK or CLI_FAIL. */
static int print_entries(const cli_lines *lines, tailed *t, emq_reply *const *r,
                         int n, size_t count, int newest) {
    size_t all = 0;
    for (int i = 0; i < n; i++)
        all += emq_reply_len(r[i]);
    tail_item *items = calloc(all ? all : 1, sizeof *items);
    if (items == NULL)
        return cli_err(CLI_FAIL, "out of memory");
    size_t k = 0;
    for (int i = 0; i < n; i++)
        for (size_t j = 0; j < emq_reply_len(r[i]); j++) {
            const emq_reply *e = emq_reply_at(r[i], j);
            size_t idlen;
            const char *id = emq_reply_str(emq_reply_at(e, 0), &idlen);
            if (id == NULL || id_parse(id, idlen, &items[k].id) != 0)
                continue;
            items[k].stream = i;
            items[k++].entry = e;
        }
    qsort(items, k, sizeof *items, item_cmp);
    size_t from = newest && k > count ? k - count : 0;
    size_t to = !newest && k > count ? count : k;
    char *buf = NULL;
    size_t len = 0, cap = 0;
    int rc = CLI_OK;
    for (size_t x = from; x < to && rc == CLI_OK; x++)
        rc = add_line(lines, &t[items[x].stream], items[x].entry, &buf, &len,
                      &cap);
    if (rc == CLI_OK && len > 0 &&
        (fwrite(buf, 1, len, stdout) != len || fflush(stdout) != 0))
        rc = cli_write_failed();
    free(buf);
    free(items);
    return rc;
}

/* One command on stream t's route; an error reply is a failure naming
 * what was asked. */
static int ask(tailed *t, const emq_conf_t *conf, int argc,
               const char *const *argv, emq_reply **out) {
    emq_error err;
    emq_status st = emq_admin_command(t->handle, argc, argv, NULL, out, &err);
    if (st != EMQ_OK)
        return cli_runtime_err(conf, st, &err, "reading the stream");
    if (emq_reply_kind(*out) == EMQ_REPLY_ERROR) {
        char text[300];
        size_t len = 0;
        const char *why = emq_reply_str(*out, &len); /* a view: by length */
        snprintf(text, sizeof text, "%s %s failed: %.*s", argv[0], t->key,
                 (int)(len < 200 ? len : 200), why ? why : "");
        emq_reply_free(*out);
        *out = NULL;
        return cli_err(CLI_FAIL, "%s", text);
    }
    return CLI_OK;
}

/* The entries of an XREAD reply for one stream (RESP2 [[key, entries]],
 * RESP3 {key: entries}); NULL when none came. Borrowed. */
static const emq_reply *read_entries(const emq_reply *r) {
    if (emq_reply_kind(r) == EMQ_REPLY_ARRAY && emq_reply_len(r) == 1)
        return emq_reply_at(emq_reply_at(r, 0), 1);
    if (emq_reply_kind(r) == EMQ_REPLY_MAP && emq_reply_len(r) == 2)
        return emq_reply_at(r, 1);
    return NULL;
}

/* -f: new entries as they come, until a stop. A queue blocks on its one
 * stream (1 s at a time, so a stop is seen); a topic reads each
 * partition after its last shown entry and naps 200 ms when none had any. */
static int follow(const cli_lines *lines, tailed *t, int n,
                  const emq_conf_t *conf) {
    int rc = CLI_OK;
    cli_on_stop_signal(cli_stop_flag, &tail_stopping);
    while (rc == CLI_OK && !atomic_load(&tail_stopping) && !cli_stdout_gone()) {
        int got = 0;
        for (int i = 0; i < n && rc == CLI_OK; i++) {
            const char *argv_read[] = {"XREAD", "COUNT",   "1000",   "BLOCK",
                                       "1000",  "STREAMS", t[i].key, t[i].last};
            emq_reply *r = NULL;
            const char *const *args = argv_read;
            int argc = 8;
            if (n > 1) { /* a topic: no BLOCK, every partition in turn */
                static const int keep[] = {0, 1, 2, 5, 6, 7};
                const char *nb[6];
                for (int k = 0; k < 6; k++)
                    nb[k] = argv_read[keep[k]];
                rc = ask(&t[i], conf, 6, nb, &r);
            } else {
                rc = ask(&t[i], conf, argc, args, &r);
            }
            const emq_reply *entries = rc == CLI_OK ? read_entries(r) : NULL;
            if (entries != NULL && emq_reply_len(entries) > 0) {
                got = 1;
                emq_reply *one = (emq_reply *)entries;
                rc = print_entries(lines, &t[i], &one, 1, SIZE_MAX, 0);
            }
            emq_reply_free(r);
        }
        if (n > 1 && !got && rc == CLI_OK)
            for (int k = 0; k < 4 && !atomic_load(&tail_stopping); k++)
                usleep(50 * 1000);
    }
    cli_signals_default();
    atomic_store(&tail_stopping, 0);
    return rc;
}

/* The ID just before id ("ms-seq"), for XREAD's exclusive start. */
static void id_before(const char *id, char *out, size_t size) {
    tail_id s = {0, 0};
    (void)id_parse(id, strlen(id), &s);
    if (s.seq > 0)
        snprintf(out, size, "%llu-%llu", (unsigned long long)s.ms,
                 (unsigned long long)s.seq - 1);
    else if (s.ms > 0)
        snprintf(out, size, "%llu-%llu", (unsigned long long)s.ms - 1,
                 (unsigned long long)UINT64_MAX);
    else
        snprintf(out, size, "0-0");
}

int cmd_tail(int argc, char **argv) {
    cli_args a;
    int rc = cli_begin(VERB, argc, argv, &cli_verb_tail, 1, &a);
    if (rc != CLI_OK)
        return rc;
    long long count = 10;
    const char *from = a.seen[O_FROM] ? a.value[O_FROM] : NULL;
    char from_id[48] = "";
    if (a.seen[O_COUNT])
        rc = cli_num(VERB, "--count", a.value[O_COUNT], 1, 1000000, &count);
    if (rc == CLI_OK && from && from[0] == '-') {
        rc = cli_num(VERB, "--from -N", from + 1, 1, 1000000, &count);
        from = NULL; /* the last N */
    } else if (rc == CLI_OK && from && from[0] == '@') {
        long long ms;
        rc = cli_num(VERB, "--from @", from + 1, 0, INT64_MAX, &ms);
        snprintf(from_id, sizeof from_id, "%lld-0", ms);
        from = from_id;
    } else if (rc == CLI_OK && from) {
        tail_id check;
        if (id_parse(from, strlen(from), &check) != 0)
            rc = cli_usage_err(VERB,
                               "--from '%s' is not an entry ID, "
                               "@UNIX-MS or -N",
                               from);
    }
    emq_conf_t *conf = NULL;
    emq_admin_t *admin = NULL;
    char key[1100];
    cli_lines lines = {a.seen[O_FORMAT] ? a.value[O_FORMAT] : NULL, NULL, 0};
    /* A topic (told, or recorded in the server): every partition. */
    if (rc == CLI_OK)
        rc = cli_admin_open_args(VERB, a.pos[0], &a, &conf, &admin);
    if (rc == CLI_OK)
        rc = cli_lines_partitions(&lines, &a, conf);
    emq_error err;
    if (rc == CLI_OK && lines.nparts == 0 &&
        emq_conf_stream_key(conf, key, sizeof key, &err) != EMQ_OK)
        rc = cli_err(CLI_USAGE, "%s", err.message);
    int n = lines.nparts > 0 ? lines.nparts : 1;
    tailed *t = calloc((size_t)n, sizeof *t);
    emq_reply **r = calloc((size_t)n, sizeof *r);
    if (rc == CLI_OK && (t == NULL || r == NULL))
        rc = cli_err(CLI_FAIL, "out of memory");
    for (int i = 0; rc == CLI_OK && i < n; i++) {
        t[i].key = lines.nparts > 0 ? lines.part_keys[i] : key;
        snprintf(t[i].last, sizeof t[i].last, "0-0");
        t[i].handle = lines.nparts > 0 ? emq_admin_partition(admin, i) : admin;
    }
    char num[24];
    snprintf(num, sizeof num, "%lld", count);
    for (int i = 0; rc == CLI_OK && i < n; i++) {
        const char *argv_range[] = {"XRANGE", t[i].key, from,
                                    "+",      "COUNT",  num};
        const char *argv_rev[] = {"XREVRANGE", t[i].key, "+",
                                  "-",         "COUNT",  num};
        rc = ask(&t[i], conf, 6, from ? argv_range : argv_rev, &r[i]);
        if (rc != CLI_OK)
            break;
        /* Follow on from what each stream holds now (the last N), or
         * from the first entry not shown (--from). */
        const emq_reply *newest = emq_reply_at(r[i], 0);
        size_t idlen;
        const char *id = emq_reply_str(emq_reply_at(newest, 0), &idlen);
        if (from)
            id_before(from, t[i].last, sizeof t[i].last);
        else if (id != NULL && idlen < sizeof t[i].last)
            snprintf(t[i].last, sizeof t[i].last, "%.*s", (int)idlen, id);
    }
    if (rc == CLI_OK)
        rc = print_entries(&lines, t, r, n, (size_t)count, from == NULL);
    if (rc == CLI_OK && a.seen[O_FOLLOW])
        rc = follow(&lines, t, n, conf);
    for (int i = 0; r && i < n; i++)
        emq_reply_free(r[i]);
    emq_admin_destroy(admin);
    free(t);
    free(r);
    free(lines.part_keys);
    emq_conf_destroy(conf);
    free(a.pos);
    return rc;
}
