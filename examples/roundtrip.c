/* SPDX-License-Identifier: BSD-3-Clause */
/* roundtrip.c: one round trip through a Redis stream with libechomq.
 *
 *   roundtrip URL [QUEUE]
 *
 * Connects to URL (redis://host:port, rediss://..., unix:///path/to.sock),
 * sends PING, appends one job to QUEUE's stream (default queue
 * "example-roundtrip": the stream emq:{example-roundtrip} that
 * `echomq consume example-roundtrip` reads, named by emq_conf_stream_key)
 * with XADD, reads that very entry back with XRANGE and prints every reply.
 * The stream is capped at about 1000 entries (MAXLEN ~), so running the
 * example many times does not grow it without bound.
 *
 * Every call is checked. A transport failure prints the emq_error message;
 * an error reply from the server (a reply of type EMQ_REPLY_ERROR, which is
 * data, not a transport failure) prints the server's text. Uses only
 * echomq.h, like any program outside the library.
 */
#include <echomq.h>

#include <stdio.h>
#include <string.h>

/* Prints len bytes of s, escaping what is not printable ASCII. */
static void print_bytes(const char *s, size_t len) {
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\')
            printf("\\%c", c);
        else if (c >= 0x20 && c < 0x7f)
            putchar(c);
        else
            printf("\\x%02x", c);
    }
}

static void indent(int depth) {
    for (int i = 0; i < depth; i++)
        fputs("  ", stdout);
}

/* Prints a reply tree, one element per line, in the style of redis-cli. */
static void print_reply(const emq_reply *r, int depth) {
    size_t len = 0;
    const char *s;
    switch (emq_reply_kind(r)) {
    case EMQ_REPLY_STRING:
    case EMQ_REPLY_VERBATIM:
        s = emq_reply_str(r, &len);
        putchar('"');
        print_bytes(s, len);
        puts("\"");
        break;
    case EMQ_REPLY_STATUS:
    case EMQ_REPLY_BIGNUM:
    case EMQ_REPLY_DOUBLE:
        s = emq_reply_str(r, &len);
        print_bytes(s, len);
        putchar('\n');
        break;
    case EMQ_REPLY_ERROR:
        s = emq_reply_str(r, &len);
        fputs("(error) ", stdout);
        print_bytes(s, len);
        putchar('\n');
        break;
    case EMQ_REPLY_INTEGER:
        printf("(integer) %lld\n", emq_reply_integer(r));
        break;
    case EMQ_REPLY_BOOL:
        printf("(boolean) %s\n", emq_reply_integer(r) ? "true" : "false");
        break;
    case EMQ_REPLY_NULL:
        puts("(nil)");
        break;
    case EMQ_REPLY_ARRAY:
    case EMQ_REPLY_SET:
    case EMQ_REPLY_PUSH:
    case EMQ_REPLY_MAP: {
        size_t n = emq_reply_len(r);
        if (n == 0) {
            puts("(empty)");
            break;
        }
        printf("(%zu element%s)\n", n, n == 1 ? "" : "s");
        for (size_t i = 0; i < n; i++) {
            indent(depth + 1);
            printf("%zu) ", i + 1);
            print_reply(emq_reply_at(r, i), depth + 1);
        }
        break;
    }
    default:
        printf("(reply of type %d)\n", (int)emq_reply_kind(r));
        break;
    }
}

/* Sends argv and returns its reply (caller frees), or NULL after printing
 * why: a transport failure or an error reply both end the example. */
static emq_reply *run(emq_conn_t *conn, int argc, const char *const *argv) {
    emq_error err;
    emq_reply *reply = NULL;
    printf("> %s", argv[0]);
    for (int i = 1; i < argc; i++)
        printf(" %s", argv[i]);
    putchar('\n');
    emq_status st = emq_conn_command(conn, argc, argv, NULL, &reply, &err);
    if (st != EMQ_OK) {
        fprintf(stderr, "roundtrip: %s failed: %s (%s)\n", argv[0], err.message,
                emq_status_name(st));
        return NULL;
    }
    if (emq_reply_kind(reply) == EMQ_REPLY_ERROR) {
        size_t len = 0;
        const char *text = emq_reply_str(reply, &len);
        fprintf(stderr, "roundtrip: the server refused %s: %.*s\n", argv[0],
                (int)len, text);
        emq_reply_free(reply);
        return NULL;
    }
    return reply;
}

int main(int argc, char **argv) {
    if (argc < 2 || argc > 3 || !strcmp(argv[1], "-h") ||
        !strcmp(argv[1], "--help")) {
        fprintf(stderr,
                "usage: %s URL [QUEUE]\n"
                "  e.g. %s redis://127.0.0.1:6379\n",
                argv[0], argv[0]);
        return 2;
    }
    const char *url = argv[1];
    const char *queue = argc > 2 ? argv[2] : "example-roundtrip";
    char stream[256];
    int rc = 1;
    emq_error err;
    emq_conn_t *conn = NULL;
    emq_reply *reply = NULL;

    printf("libechomq %s\n", emq_version_str());
    emq_conf_t *conf = emq_conf_new();
    if (conf == NULL) {
        fprintf(stderr, "roundtrip: emq_conf_new: %s\n",
                emq_strerror(EMQ_ENOMEM));
        return 1;
    }
    if (emq_conf_set(conf, "url", url, &err) != EMQ_OK ||
        emq_conf_set(conf, "queue", queue, &err) != EMQ_OK ||
        emq_conf_stream_key(conf, stream, sizeof stream, &err) != EMQ_OK) {
        fprintf(stderr, "roundtrip: %s\n", err.message);
        goto out;
    }
    if (emq_conn_new(conf, &conn, &err) != EMQ_OK) {
        fprintf(stderr, "roundtrip: cannot connect to %s: %s\n", url,
                err.message);
        goto out;
    }
    printf("connected to %s\n", url);

    /* 1. PING: the server answers +PONG. */
    const char *ping[] = {"PING"};
    if ((reply = run(conn, 1, ping)) == NULL)
        goto out;
    print_reply(reply, 0);
    emq_reply_free(reply);

    /* 2. XADD: append one job; the reply is the new entry's ID. */
    const char *xadd[] = {
        "XADD",         stream, "MAXLEN",       "~",       "1000", "*", "job",
        "resize-image", "path", "/tmp/cat.png", "attempt", "1"};
    if ((reply = run(conn, 12, xadd)) == NULL)
        goto out;
    size_t id_len = 0;
    const char *id_text = emq_reply_str(reply, &id_len);
    char id[64];
    if (emq_reply_kind(reply) != EMQ_REPLY_STRING || id_len == 0 ||
        id_len >= sizeof id) {
        fprintf(stderr, "roundtrip: XADD did not return an entry ID\n");
        emq_reply_free(reply);
        goto out;
    }
    memcpy(id, id_text, id_len);
    id[id_len] = '\0';
    emq_reply_free(reply);
    printf("added entry %s to %s\n", id, stream);

    /* 3. XRANGE id id: exactly the entry just added, as
     *    [[id, [field, value, ...]]]. */
    const char *xrange[] = {"XRANGE", stream, id, id};
    if ((reply = run(conn, 4, xrange)) == NULL)
        goto out;
    print_reply(reply, 0);
    const emq_reply *entry = emq_reply_at(reply, 0);
    const emq_reply *fields = emq_reply_at(entry, 1);
    size_t got_len = 0;
    const char *got_id = emq_reply_str(emq_reply_at(entry, 0), &got_len);
    if (emq_reply_len(reply) != 1 || got_id == NULL || got_len != id_len ||
        memcmp(got_id, id, id_len) != 0 || emq_reply_len(fields) != 6) {
        fprintf(stderr, "roundtrip: XRANGE did not return entry %s\n", id);
        emq_reply_free(reply);
        goto out;
    }
    printf("read back entry %s:\n", id);
    for (size_t i = 0; i + 1 < emq_reply_len(fields); i += 2) {
        size_t klen = 0, vlen = 0;
        const char *k = emq_reply_str(emq_reply_at(fields, i), &klen);
        const char *v = emq_reply_str(emq_reply_at(fields, i + 1), &vlen);
        fputs("  ", stdout);
        print_bytes(k ? k : "", k ? klen : 0);
        fputs(" = ", stdout);
        print_bytes(v ? v : "", v ? vlen : 0);
        putchar('\n');
    }
    emq_reply_free(reply);
    puts("roundtrip ok");
    rc = 0;
out:
    emq_conn_destroy(conn);
    emq_conf_destroy(conf);
    return rc;
}
