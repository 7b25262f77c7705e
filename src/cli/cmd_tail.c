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

static const cli_opt opts[] = {
    {"count", 'n', 1, O_COUNT},  {"follow", 'f', 0, O_FOLLOW},
    {"from", 0, 1, O_FROM},      {"format", 0, 1, O_FORMAT},
    {"partitions", 0, 1, O_PARTITIONS},
    {NULL, 0, 0, 0},
};

static void help(void) {
    printf(
        "usage: echomq tail QUEUE [-n N] [-f] [--from ID|@UNIX-MS|-N]\n"
        "\n"
        "Prints entries of QUEUE's stream without joining a group: nothing is\n"
        "acknowledged, nothing stays pending, nothing keeps 'trim --acked'\n"
        "from trimming.\n"
        "\n"
        "  -n, --count N     how many (default 10; with --from ID: all up to\n"
        "                    N, default 10)\n"
        "  --from ID         the entries from ID on (inclusive)\n"
        "  --from @UNIX-MS   the entries added at or after that time\n"
        "  --from -N         the last N entries (as -n N)\n"
        "  -f, --follow      then wait for new entries and print them as they\n"
        "                    come, until SIGINT or SIGTERM (exit 0)\n"
        "  --format FMT      plain lines, as 'echomq consume --format'\n"
        "\n"
        "Examples:\n"
        "  echomq tail jobs\n"
        "  echomq tail jobs -f --format '%%t %%f{task}'\n"
        "  echomq tail jobs --from @1700000000000 -n 100\n");
}

static atomic_int tail_stopping;

static void stop_tail(void *opaque) {
    (void)opaque;
    atomic_store(&tail_stopping, 1);
}

/* Writes the entries of an XRANGE-shaped reply (an array of [id,
 * [name, value, ...]]) as lines, oldest first (reverse: the reply is
 * newest first). Sets last to the newest ID. Returns CLI_OK or CLI_FAIL. */
static int print_entries(const cli_lines *lines, const char *stream,
                         const emq_reply *r, int reverse, char *last,
                         size_t last_size) {
    size_t n = emq_reply_len(r);
    char *buf = NULL;
    size_t len = 0, cap = 0;
    int rc = CLI_OK;
    for (size_t k = 0; k < n && rc == CLI_OK; k++) {
        const emq_reply *e = emq_reply_at(r, reverse ? n - 1 - k : k);
        const emq_reply *pairs = emq_reply_at(e, 1);
        size_t idlen, nf = emq_reply_len(pairs) / 2;
        const char *id = emq_reply_str(emq_reply_at(e, 0), &idlen);
        if (id == NULL || idlen >= 64)
            continue;
        char idz[64];
        memcpy(idz, id, idlen);
        idz[idlen] = '\0';
        emq_field *f = calloc(nf ? nf : 1, sizeof *f);
        if (f == NULL) {
            rc = cli_err(CLI_FAIL, "out of memory");
            break;
        }
        for (size_t i = 0; i < nf; i++) {
            f[i].name = emq_reply_str(emq_reply_at(pairs, 2 * i),
                                      &f[i].name_len);
            f[i].value = emq_reply_str(emq_reply_at(pairs, 2 * i + 1),
                                       &f[i].value_len);
        }
        emq_entry entry = {idz, 0, f, nf, stream, NULL, NULL};
        if (cli_line_append(lines, &entry, &buf, &len, &cap) != 0)
            rc = cli_err(CLI_FAIL, "out of memory");
        free(f);
        snprintf(last, last_size, "%s", idz);
    }
    if (rc == CLI_OK && len > 0 &&
        (fwrite(buf, 1, len, stdout) != len || fflush(stdout) != 0))
        rc = cli_err(CLI_FAIL, "writing stdout failed");
    free(buf);
    return rc;
}

/* One command; an error reply is a failure naming what was asked. */
static int ask(emq_conn_t *conn, const emq_conf_t *conf, int argc,
               const char *const *argv, emq_reply **out) {
    emq_error err;
    emq_status st = emq_conn_command(conn, argc, argv, NULL, out, &err);
    if (st != EMQ_OK)
        return cli_runtime_err(conf, st, &err, "reading the stream");
    if (emq_reply_kind(*out) == EMQ_REPLY_ERROR) {
        char text[300];
        snprintf(text, sizeof text, "%s failed: %s", argv[0],
                 emq_reply_format(*out));
        emq_reply_free(*out);
        *out = NULL;
        return cli_err(CLI_FAIL, "%s", text);
    }
    return CLI_OK;
}

int cmd_tail(int argc, char **argv) {
    cli_args a;
    int rc = cli_begin(VERB, argc, argv, opts, help, 1, &a);
    if (rc != CLI_OK)
        return rc == CLI_DONE ? CLI_OK : rc;
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
    }
    emq_conf_t *conf = NULL;
    char key[1100];
    cli_lines lines = {a.seen[O_FORMAT] ? a.value[O_FORMAT] : NULL, NULL, 0};
    if (rc == CLI_OK && (conf = cli_conf(a.pos[0])) == NULL)
        rc = CLI_USAGE;
    emq_error err;
    if (rc == CLI_OK && a.seen[O_PARTITIONS] &&
        strcmp(a.value[O_PARTITIONS], "1") != 0)
        rc = cli_usage_err(VERB, "tail reads one stream: give a partition "
                                 "queue (QUEUE.3) or --stream KEY");
    if (rc == CLI_OK && emq_conf_stream_key(conf, key, sizeof key, &err) !=
                            EMQ_OK)
        rc = cli_err(CLI_USAGE, "%s", err.message);
    emq_conn_t *conn = NULL;
    emq_status st;
    if (rc == CLI_OK && (st = emq_conn_new(conf, &conn, &err)) != EMQ_OK)
        rc = cli_runtime_err(conf, st, &err, "connecting");
    char n[24], last[64] = "0-0";
    snprintf(n, sizeof n, "%lld", count);
    emq_reply *r = NULL;
    if (rc == CLI_OK && from) {
        const char *argv_range[] = {"XRANGE", key, from, "+", "COUNT", n};
        rc = ask(conn, conf, 6, argv_range, &r);
        if (rc == CLI_OK)
            rc = print_entries(&lines, key, r, 0, last, sizeof last);
    } else if (rc == CLI_OK) {
        const char *argv_rev[] = {"XREVRANGE", key, "+", "-", "COUNT", n};
        rc = ask(conn, conf, 6, argv_rev, &r);
        if (rc == CLI_OK)
            rc = print_entries(&lines, key, r, 1, last, sizeof last);
        /* An empty stream: -f follows from its first entry ("0-0"). */
    }
    emq_reply_free(r);
    if (rc == CLI_OK && a.seen[O_FOLLOW]) {
        cli_on_stop_signal(stop_tail, NULL);
        /* Short blocks, so a stop is seen within a second. */
        while (rc == CLI_OK && !atomic_load(&tail_stopping)) {
            const char *argv_read[] = {"XREAD", "COUNT", "1000", "BLOCK",
                                       "1000", "STREAMS", key, last};
            r = NULL;
            rc = ask(conn, conf, 8, argv_read, &r);
            if (rc == CLI_OK && emq_reply_kind(r) == EMQ_REPLY_ARRAY &&
                emq_reply_len(r) == 1) {
                const emq_reply *entries = emq_reply_at(emq_reply_at(r, 0), 1);
                rc = print_entries(&lines, key, entries, 0, last,
                                   sizeof last);
            } else if (rc == CLI_OK && emq_reply_kind(r) == EMQ_REPLY_MAP) {
                /* RESP3: {key: entries} */
                rc = print_entries(&lines, key, emq_reply_at(r, 1), 0, last,
                                   sizeof last);
            }
            emq_reply_free(r);
        }
        cli_signals_default();
        atomic_store(&tail_stopping, 0);
    }
    emq_conn_destroy(conn);
    emq_conf_destroy(conf);
    free(a.pos);
    return rc;
}
