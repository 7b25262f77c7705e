/* SPDX-License-Identifier: BSD-3-Clause */
/* cmd_exporter.c: `echomq exporter`, the queues' numbers for Prometheus.
 *
 * A small HTTP/1.0 server on one listening socket: each GET /metrics lists
 * the queues that match the patterns (cli_scan_queues, as `ls`), describes
 * each with the library (emq_admin_describe) and answers in the Prometheus
 * text format (version 0.0.4): one family at a time, each with its HELP and
 * TYPE, names with the echomq_ prefix, base units (seconds), label values
 * escaped. One request at a time (a scrape every few seconds is the load);
 * each connection is bounded in time and size. SIGINT, SIGTERM or SIGHUP stops
 * it (exit 0).
 */
#include "cli.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static const char *const VERB = "exporter";

/* A request longer than this, or slower than this, is dropped. */
#define REQUEST_MAX 8192
#define REQUEST_MS 2000

static const cli_optdoc opts[] = {
    {O_LISTEN, "HOST:PORT",
     "where to serve GET /metrics (required); one request at a time, each "
     "bounded (8 KiB, 2 s)"},
    CLI_OPTS_END,
};

CLI_VERB(
    exporter, "serve /metrics for Prometheus",
    "echomq exporter --listen HOST:PORT [QUEUE|PATTERN...]",
    "Serves GET /metrics in the Prometheus text format: for each queue\n"
    "matching a PATTERN (a glob on queue names; default every queue):\n"
    "  echomq_queue_length, echomq_queue_entries_added_total,\n"
    "  echomq_dead_letters, echomq_group_lag, echomq_group_pending,\n"
    "  echomq_group_oldest_pending_age_seconds, echomq_consumer_pending,\n"
    "  echomq_consumer_idle_seconds, and echomq_up,\n"
    "  echomq_scrape_duration_seconds. SIGINT, SIGTERM or SIGHUP stops it.\n",
    opts,
    "Example:\n"
    "  echomq exporter --listen 127.0.0.1:9587 'orders*' jobs\n");

static atomic_int exporter_stopping; /* set by SIGINT/SIGTERM/SIGHUP */

/* ---- the text format ----------------------------------------------------- */

typedef struct out_buf {
    char *p;
    size_t len, cap;
    int failed;
    const char *family; /* the family being written: its samples' name */
} out_buf;

static void vput(out_buf *o, const char *fmt, va_list ap) {
    for (;;) {
        va_list copy;
        va_copy(copy, ap);
        size_t room = o->cap - o->len;
        int n = vsnprintf(o->p ? o->p + o->len : NULL, room, fmt, copy);
        va_end(copy);
        if (n < 0) {
            o->failed = 1;
            return;
        }
        if ((size_t)n < room) {
            o->len += (size_t)n;
            return;
        }
        size_t cap = o->cap ? o->cap * 2 : 65536;
        while (cap < o->len + (size_t)n + 1)
            cap *= 2;
        char *grown = realloc(o->p, cap);
        if (grown == NULL) {
            o->failed = 1;
            return;
        }
        o->p = grown;
        o->cap = cap;
    }
}

static void put(out_buf *o, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void put(out_buf *o, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vput(o, fmt, ap);
    va_end(ap);
}

/* A label value: backslash, double quote and newline escaped. */
static void put_label(out_buf *o, const char *v) {
    for (; v && *v; v++) {
        if (*v == '\\' || *v == '"')
            put(o, "\\%c", *v);
        else if (*v == '\n')
            put(o, "\\n");
        else
            put(o, "%c", *v);
    }
}

static void family(out_buf *o, const char *name, const char *type,
                   const char *help_text) {
    put(o, "# HELP %s %s\n# TYPE %s %s\n", name, help_text, name, type);
    o->family = name;
}

typedef cli_described described;

static void labels(out_buf *o, const char *queue, const char *group,
                   const char *consumer) {
    put(o, "{queue=\"");
    put_label(o, queue);
    if (group) {
        put(o, "\",group=\"");
        put_label(o, group);
    }
    if (consumer) {
        put(o, "\",consumer=\"");
        put_label(o, consumer);
    }
    put(o, "\"}");
}

/* One sample of the family being written: its name, {labels} (group and
 * consumer may be NULL), a space, the value as fmt writes it, a newline. */
static void sample(out_buf *o, const char *queue, const char *group,
                   const char *consumer, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

static void sample(out_buf *o, const char *queue, const char *group,
                   const char *consumer, const char *fmt, ...) {
    put(o, "%s", o->family);
    labels(o, queue, group, consumer);
    put(o, " ");
    va_list ap;
    va_start(ap, fmt);
    vput(o, fmt, ap);
    va_end(ap);
    put(o, "\n");
}

static void write_metrics(out_buf *o, const described *d, size_t n, int up,
                          double took) {
    family(o, "echomq_up", "gauge",
           "1 when the server answered the last scrape, else 0.");
    put(o, "echomq_up %d\n", up);
    family(o, "echomq_scrape_duration_seconds", "gauge",
           "How long the last scrape took.");
    put(o, "echomq_scrape_duration_seconds %.6f\n", took);
    family(o, "echomq_queue_length", "gauge", "Entries in the queue's stream.");
    for (size_t i = 0; i < n; i++)
        sample(o, d[i].queue, NULL, NULL, "%llu",
               (unsigned long long)d[i].info->length);
    family(o, "echomq_queue_entries_added_total", "counter",
           "Entries ever added to the queue's stream (Redis 7.0+, Valkey).");
    for (size_t i = 0; i < n; i++) {
        if (d[i].info->entries_added < 0)
            continue;
        sample(o, d[i].queue, NULL, NULL, "%lld",
               (long long)d[i].info->entries_added);
    }
    family(o, "echomq_dead_letters", "gauge",
           "Entries in the queue's dead letters.");
    for (size_t i = 0; i < n; i++)
        sample(o, d[i].queue, NULL, NULL, "%llu",
               (unsigned long long)d[i].info->dead_length);
    family(o, "echomq_group_lag", "gauge",
           "Entries not yet delivered to the group.");
    for (size_t i = 0; i < n; i++)
        for (size_t g = 0; g < d[i].info->ngroups; g++) {
            const emq_group_info *gi = &d[i].info->groups[g];
            if (gi->lag < 0)
                continue;
            sample(o, d[i].queue, gi->name, NULL, "%lld", (long long)gi->lag);
        }
    family(o, "echomq_group_pending", "gauge",
           "Entries delivered to the group and not acknowledged.");
    for (size_t i = 0; i < n; i++)
        for (size_t g = 0; g < d[i].info->ngroups; g++) {
            const emq_group_info *gi = &d[i].info->groups[g];
            sample(o, d[i].queue, gi->name, NULL, "%llu",
                   (unsigned long long)gi->pending);
        }
    family(o, "echomq_group_oldest_pending_age_seconds", "gauge",
           "Idle time of the group's oldest pending entry.");
    for (size_t i = 0; i < n; i++)
        for (size_t g = 0; g < d[i].info->ngroups; g++) {
            const emq_group_info *gi = &d[i].info->groups[g];
            if (gi->oldest_pending_age_ms < 0)
                continue;
            sample(o, d[i].queue, gi->name, NULL, "%.3f",
                   (double)gi->oldest_pending_age_ms / 1000.0);
        }
    family(o, "echomq_consumer_pending", "gauge",
           "Entries a consumer of the group holds.");
    for (size_t i = 0; i < n; i++)
        for (size_t g = 0; g < d[i].info->ngroups; g++) {
            const emq_group_info *gi = &d[i].info->groups[g];
            for (size_t c = 0; c < gi->nconsumers; c++)
                sample(o, d[i].queue, gi->name, gi->consumers[c].name, "%llu",
                       (unsigned long long)gi->consumers[c].pending);
        }
    family(o, "echomq_consumer_idle_seconds", "gauge",
           "Time since a consumer's last read or claim.");
    for (size_t i = 0; i < n; i++)
        for (size_t g = 0; g < d[i].info->ngroups; g++) {
            const emq_group_info *gi = &d[i].info->groups[g];
            for (size_t c = 0; c < gi->nconsumers; c++) {
                if (gi->consumers[c].idle_ms < 0)
                    continue;
                sample(o, d[i].queue, gi->name, gi->consumers[c].name, "%.3f",
                       (double)gi->consumers[c].idle_ms / 1000.0);
            }
        }
}

/* Builds one scrape's body into o. */
static void scrape(out_buf *o, char **patterns, int npatterns,
                   cli_admins *keep) {
    int64_t t0 = emq_clock_ms();
    described *d = NULL;
    size_t n = 0;
    int up = cli_describe_queues(VERB, patterns, npatterns, keep, &d, &n) ==
             CLI_OK;
    write_metrics(o, d, n, up, (double)(emq_clock_ms() - t0) / 1000.0);
    cli_described_free(d, n);
}

/* ---- HTTP ---------------------------------------------------------------- */

static void send_all(int fd, const char *p, size_t len) {
    while (len > 0) {
        ssize_t w = send(fd, p, len, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return;
        p += w;
        len -= (size_t)w;
    }
}

/* Reads the request head (bounded), answers, closes. */
static void serve(int fd, char **patterns, int npatterns, cli_admins *keep) {
    char req[REQUEST_MAX];
    size_t len = 0;
    int64_t end = emq_clock_ms() + REQUEST_MS;
    while (len < sizeof req - 1) {
        int64_t left = end - emq_clock_ms();
        struct pollfd p = {fd, POLLIN, 0};
        if (left <= 0 || poll(&p, 1, (int)left) <= 0)
            break;
        ssize_t got = recv(fd, req + len, sizeof req - 1 - len, 0);
        if (got <= 0)
            break;
        len += (size_t)got;
        req[len] = '\0';
        if (strstr(req, "\r\n\r\n") || strstr(req, "\n\n"))
            break;
    }
    req[len] = '\0';
    const char *status = "404 Not Found",
               *body_text = "not found: try /metrics\n";
    out_buf o = {0};
    if (!strncmp(req, "GET /metrics ", 13) ||
        !strncmp(req, "GET /metrics?", 13)) {
        scrape(&o, patterns, npatterns, keep);
        status = o.failed ? "500 Internal Server Error" : "200 OK";
    } else if (strncmp(req, "GET ", 4) != 0) {
        status = "405 Method Not Allowed";
        body_text = "only GET /metrics\n";
    }
    const char *body = o.p && !o.failed ? o.p : body_text;
    size_t blen = o.p && !o.failed ? o.len : strlen(body_text);
    char head[256];
    int hn = snprintf(head, sizeof head,
                      "HTTP/1.0 %s\r\nContent-Type: text/plain; "
                      "version=0.0.4; charset=utf-8\r\nContent-Length: %zu\r\n"
                      "Connection: close\r\n\r\n",
                      status, blen);
    send_all(fd, head, (size_t)hn);
    send_all(fd, body, blen);
    free(o.p);
    close(fd);
}

/* Opens the listening socket of "HOST:PORT". */
static int listen_on(const char *where, int *fd_out) {
    const char *colon = strrchr(where, ':');
    if (colon == NULL || colon == where || colon[1] == '\0')
        return cli_usage_err(VERB, "--listen '%s' is not HOST:PORT", where);
    char host[256];
    snprintf(host, sizeof host, "%.*s", (int)(colon - where), where);
    struct addrinfo hints = {.ai_family = AF_UNSPEC,
                             .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_NUMERICSERV | AI_PASSIVE};
    struct addrinfo *ai = NULL;
    int e = getaddrinfo(host, colon + 1, &hints, &ai);
    if (e != 0)
        return cli_usage_err(VERB, "--listen '%s': %s", where, gai_strerror(e));
    int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1;
    if (fd >= 0)
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (fd < 0 || bind(fd, ai->ai_addr, ai->ai_addrlen) != 0 ||
        listen(fd, 16) != 0) {
        int saved = errno;
        if (fd >= 0)
            close(fd);
        freeaddrinfo(ai);
        return cli_err(CLI_FAIL, "cannot listen on %s: %s", where,
                       strerror(saved));
    }
    freeaddrinfo(ai);
    *fd_out = fd;
    return CLI_OK;
}

int cmd_exporter(int argc, char **argv) {
    cli_args a;
    int rc = cli_begin(VERB, argc, argv, &cli_verb_exporter, 0, &a);
    if (rc != CLI_OK)
        return rc;
    rc = cli_require(VERB, &a, O_LISTEN, "--listen",
                     "HOST:PORT to serve /metrics on (127.0.0.1:9587)");
    if (rc == CLI_OK)
        rc = cli_check_patterns(VERB, a.pos, a.npos);
    int fd = -1;
    if (rc == CLI_OK)
        rc = listen_on(a.value[O_LISTEN], &fd);
    if (rc == CLI_OK) {
        cli_note("serving /metrics on %s", a.value[O_LISTEN]);
        cli_on_stop_signal(cli_stop_flag, &exporter_stopping);
        cli_admins admins = {0}; /* kept from one scrape to the next */
        while (!atomic_load(&exporter_stopping)) {
            struct pollfd p = {fd, POLLIN, 0};
            if (poll(&p, 1, 200) <= 0)
                continue; /* a stop is seen within 200 ms */
            int c = accept(fd, NULL, NULL);
            if (c >= 0)
                serve(c, a.pos, a.npos, &admins);
        }
        cli_admins_free(&admins);
        cli_signals_default();
        atomic_store(&exporter_stopping, 0);
        close(fd);
    }
    free(a.pos);
    return rc;
}
