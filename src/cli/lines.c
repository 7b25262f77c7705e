/* SPDX-License-Identifier: BSD-3-Clause */
/* lines.c: how the CLI writes an entry as one line, for consume and tail:
 * the library's JSON (with a topic's partition), or a --format string.
 */
#include "cli.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

int cli_lines_partitions(cli_lines *x, const cli_args *a,
                         const emq_conf_t *conf) {
    char parts[24] = "1"; /* --partitions, or found in the server */
    emq_conf_get(conf, "partitions", parts, sizeof parts, NULL);
    long long p = strtoll(parts, NULL, 10);
    if (p <= 1)
        return CLI_OK;
    x->part_keys = calloc((size_t)p, sizeof *x->part_keys);
    if (x->part_keys == NULL)
        return cli_err(CLI_FAIL, "out of memory");
    for (long long i = 0; i < p; i++) {
        emq_conf_t *one = emq_conf_dup(conf);
        char queue[300];
        snprintf(queue, sizeof queue, "%s.%lld", a->pos[0], i);
        int rc = one ? CLI_OK : cli_err(CLI_FAIL, "out of memory");
        if (rc == CLI_OK)
            rc = cli_set(one, "partitions", "1");
        if (rc == CLI_OK)
            rc = cli_set(one, "queue", queue);
        emq_error err;
        if (rc == CLI_OK &&
            emq_conf_stream_key(one, x->part_keys[i], sizeof x->part_keys[i],
                                &err) != EMQ_OK)
            rc = cli_err(CLI_USAGE, "%s", err.message);
        emq_conf_destroy(one);
        if (rc != CLI_OK)
            return rc;
    }
    x->nparts = (int)p;
    return CLI_OK;
}

/* The entry's partition of a topic (-1: a plain queue's entry). */
static int partition_of(const cli_lines *x, const emq_entry *e) {
    for (int i = 0; i < x->nparts && e->stream; i++)
        if (!strcmp(x->part_keys[i], e->stream))
            return i;
    return -1;
}

/* The time part of an ID as UTC ("2026-12-01T20:43:16.123Z"). */
static size_t id_time(const char *id, char *out, size_t size) {
    long long ms = strtoll(id, NULL, 10);
    time_t secs = (time_t)(ms / 1000);
    struct tm tm;
    gmtime_r(&secs, &tm);
    char day[40];
    strftime(day, sizeof day, "%Y-%m-%dT%H:%M:%S", &tm);
    return (size_t)snprintf(out, size, "%s.%03lldZ", day, ms % 1000);
}

/* Writes the entry as --format says into out (snprintf semantics: writes
 * what fits, returns the full length). */
static size_t format_entry(const cli_lines *x, const emq_entry *e, char *out,
                           size_t size) {
    size_t n = 0;
#define PUT(bytes, len)                                                        \
    do {                                                                       \
        size_t len_ = (len);                                                   \
        if (n < size)                                                          \
            memcpy(out + n, (bytes), n + len_ <= size ? len_ : size - n);      \
        n += len_;                                                             \
    } while (0)
    for (const char *f = x->format; *f; f++) {
        char tmp[64];
        if (*f == '\\' && (f[1] == 'n' || f[1] == 't')) {
            PUT(f[1] == 'n' ? "\n" : "\t", 1);
            f++;
        } else if (*f != '%' || f[1] == '\0') {
            PUT(f, 1);
        } else if (f[1] == '%') {
            PUT("%", 1);
            f++;
        } else if (f[1] == 'i') {
            PUT(e->id, strlen(e->id));
            f++;
        } else if (f[1] == 'd') {
            PUT(tmp, (size_t)snprintf(tmp, sizeof tmp, "%llu",
                                      (unsigned long long)e->deliveries));
            f++;
        } else if (f[1] == 's') {
            PUT(e->stream ? e->stream : "", e->stream ? strlen(e->stream) : 0);
            f++;
        } else if (f[1] == 'p') {
            int p = partition_of(x, e);
            if (p >= 0)
                PUT(tmp, (size_t)snprintf(tmp, sizeof tmp, "%d", p));
            f++;
        } else if (f[1] == 't') {
            PUT(tmp, id_time(e->id, tmp, sizeof tmp));
            f++;
        } else if (f[1] == 'f' && f[2] == '{' && strchr(f + 3, '}')) {
            const char *name = f + 3;
            size_t len = (size_t)(strchr(name, '}') - name);
            for (size_t i = 0; i < e->nfields; i++)
                if (e->fields[i].name_len == len &&
                    !memcmp(e->fields[i].name, name, len)) {
                    PUT(e->fields[i].value, e->fields[i].value_len);
                    break;
                }
            f = name + len;
        } else {
            PUT(f, 1);
        }
    }
#undef PUT
    if (n < size)
        out[n] = '\0';
    else if (size > 0)
        out[size - 1] = '\0';
    return n;
}

int cli_line_append(const cli_lines *x, const emq_entry *e, char **buf,
                    size_t *len, size_t *cap) {
    for (;;) {
        size_t room = *cap - *len;
        size_t need = 0;
        if (room > 1)
            need = (x->format
                        ? format_entry(x, e, *buf + *len, room - 1)
                        : emq_entry_json_partition(e, partition_of(x, e),
                                                   *buf + *len, room - 1)) +
                   1;
        if (room > 1 && need < room) {
            (*buf)[*len + need - 1] = '\n';
            *len += need;
            return 0;
        }
        size_t grown = *cap ? *cap * 2 : 65536;
        while (grown < *len + need + 2)
            grown *= 2;
        char *p = realloc(*buf, grown);
        if (p == NULL)
            return -1;
        *buf = p;
        *cap = grown;
    }
}
