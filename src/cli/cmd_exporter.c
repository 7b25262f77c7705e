/* SPDX-License-Identifier: BSD-3-Clause */
/* cmd_exporter.c: `echomq exporter`, the queues' numbers for Prometheus.
 *
 * A small HTTP/1.0 server on one listening socket: each GET /metrics lists
 * the queues that match the patterns (cli_scan_queues, as `ls`), describes
 * each with the library (emq_admin_describe) and answers in the Prometheus
 * text format (version 0.0.4): one family at a time, each with its HELP and
 * TYPE, names with the echomq_ prefix, base units (seconds), label values
 * escaped (bytes that are not UTF-8 shown as U+FFFD). One poll loop
 * serves every client, each dropped when it makes no progress for
 * --client-timeout; a scrape's result is shared by the requests of one
 * --cache interval, and a queue that cannot be described is left out and
 * counted (echomq_queue_errors). SIGINT, SIGTERM or SIGHUP stops it
 * (exit 0).
 */
#include "cli.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
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

/* A request head longer than this is answered as it is (a 404). */
#define REQUEST_MAX 8192
/* Clients served at once; past it a new connection is closed at once. */
#define CLIENTS_MAX 64

/* The metrics, in the order a scrape lists them: X(id, name, type,
 * labels, help). The one list behind each family's HELP and TYPE lines,
 * the list in --help and the table of docs/CLI.md (cli_exporter_metrics,
 * tools/gen_clidoc): a family is written by its id, so none is served
 * without its row here. */
#define EXPORTER_METRICS(X)                                                    \
    X(UP, "echomq_up", "gauge", "",                                            \
      "1 when the server answered the last scrape, else 0.")                   \
    X(SCRAPE_DURATION, "echomq_scrape_duration_seconds", "gauge", "",          \
      "How long the last scrape took.")                                        \
    X(QUEUE_LENGTH, "echomq_queue_length", "gauge", "queue",                   \
      "Entries in the queue's stream.")                                        \
    X(ENTRIES_ADDED, "echomq_queue_entries_added_total", "counter", "queue",   \
      "Entries ever added to the queue's stream (Redis 7.0+, Valkey).")        \
    X(DEAD_LETTERS, "echomq_dead_letters", "gauge", "queue",                   \
      "Entries in the queue's dead letters.")                                  \
    X(DELAYED, "echomq_delayed_entries", "gauge", "queue",                     \
      "Delayed entries waiting in the server to be moved to the stream.")      \
    X(HELD, "echomq_held_entries", "gauge", "queue, level",                    \
      "Entries held by priority, waiting for a read (label level, 0 the "      \
      "most urgent); absent for a queue without priorities.")                  \
    X(DELAYED_NEXT_DUE, "echomq_delayed_next_due_seconds", "gauge", "queue",   \
      "When the earliest delayed entry is due, unix time (the server's "       \
      "clock); absent when none waits.")                                       \
    X(RATE_LIMIT, "echomq_group_rate_limit", "gauge", "queue, group",          \
      "The group's rate limit, entries per second (echomq group limits); "     \
      "absent when it has none.")                                              \
    X(MAX_IN_FLIGHT, "echomq_group_max_in_flight", "gauge", "queue, group",    \
      "The group's bound on entries delivered and not settled; absent when "   \
      "it has none.")                                                          \
    X(GROUP_LAG, "echomq_group_lag", "gauge", "queue, group",                  \
      "Entries not yet delivered to the group.")                               \
    X(GROUP_PENDING, "echomq_group_pending", "gauge", "queue, group",          \
      "Entries delivered to the group and not acknowledged.")                  \
    X(OLDEST_PENDING, "echomq_group_oldest_pending_age_seconds", "gauge",      \
      "queue, group",                                                          \
      "Age of the group's oldest pending entry: its time in a handler's "      \
      "hands (which the holder's refresh does not reset), else its idle "      \
      "time.")                                                                 \
    X(CONSUMER_PENDING, "echomq_consumer_pending", "gauge",                    \
      "queue, group, consumer", "Entries a consumer of the group holds.")      \
    X(CONSUMER_IDLE, "echomq_consumer_idle_seconds", "gauge",                  \
      "queue, group, consumer", "Time since a consumer's last read or claim.") \
    X(QUEUE_ERRORS, "echomq_queue_errors", "gauge", "",                        \
      "Queues found but not described in the last scrape (a name or key the "  \
      "library refuses); the others are listed.")

#define METRIC_ID(id, name, type, labels, help) M_##id,
enum { EXPORTER_METRICS(METRIC_ID) M_COUNT };
#undef METRIC_ID

#define METRIC_ROW(id, name, type, labels, help) {name, type, labels, help},
const cli_metric cli_exporter_metrics[] = {
    EXPORTER_METRICS(METRIC_ROW){NULL, NULL, NULL, NULL},
};
#undef METRIC_ROW

/* --help's paragraph: one line per metric. */
#define METRIC_LINE(id, name, type, labels, help) "  " name "\n"
static const char about[] =
    "Serves GET /metrics in the Prometheus text format, for the queues\n"
    "matching the PATTERNs (globs on queue names; default every queue):\n"
    /* clang-format off */
    EXPORTER_METRICS(METRIC_LINE)
    /* clang-format on */
    "SIGINT, SIGTERM or SIGHUP stops it.\n";
#undef METRIC_LINE

static const cli_optdoc opts[] = {
    {O_LISTEN, "HOST:PORT",
     "where to serve GET /metrics (required); up to 64 clients at once, "
     "each dropped when it sends or reads nothing for --client-timeout"},
    {O_CACHE, "MS",
     "answer every scrape within MS of the last one with its result "
     "(default 1000; 0: describe the queues for each scrape)"},
    {O_CLIENT_TIMEOUT, "MS",
     "drop a client that sends nothing, or reads nothing of its answer, "
     "for MS (default 200)"},
    CLI_OPTS_END,
};

CLI_VERB(exporter, "serve /metrics for Prometheus",
         "echomq exporter --listen HOST:PORT [QUEUE|PATTERN...]", about, opts,
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

/* The length of the valid UTF-8 sequence at p (1-4), or 0 when the bytes
 * there are not one (a stray continuation, an overlong form, a surrogate,
 * past U+10FFFF, cut short). */
static size_t utf8_len(const unsigned char *p) {
    if (p[0] < 0x80)
        return 1;
    size_t n = p[0] >= 0xc2 && p[0] <= 0xdf   ? 2
               : p[0] >= 0xe0 && p[0] <= 0xef ? 3
               : p[0] >= 0xf0 && p[0] <= 0xf4 ? 4
                                              : 0;
    unsigned char lo = 0x80, hi = 0xbf; /* the second byte's range */
    if (p[0] == 0xe0)
        lo = 0xa0;
    else if (p[0] == 0xed)
        hi = 0x9f;
    else if (p[0] == 0xf0)
        lo = 0x90;
    else if (p[0] == 0xf4)
        hi = 0x8f;
    if (n == 0 || p[1] < lo || p[1] > hi)
        return 0;
    for (size_t i = 2; i < n; i++)
        if (p[i] < 0x80 || p[i] > 0xbf)
            return 0;
    return n;
}

/* A label value: backslash, double quote and newline escaped, and bytes
 * that are not UTF-8 (a group name may hold any) replaced by U+FFFD, so
 * one name never makes Prometheus reject the whole scrape. */
static void put_label(out_buf *o, const char *v) {
    const unsigned char *p = (const unsigned char *)v;
    while (p && *p) {
        size_t n = utf8_len(p);
        if (n == 0) {
            put(o, "\xef\xbf\xbd");
            p++;
        } else if (*p == '\\' || *p == '"') {
            put(o, "\\%c", *p++);
        } else if (*p == '\n') {
            put(o, "\\n");
            p++;
        } else {
            put(o, "%.*s", (int)n, (const char *)p);
            p += n;
        }
    }
}

/* Begins the family of metric id: its HELP and TYPE lines. */
static void family(out_buf *o, int id) {
    const cli_metric *m = &cli_exporter_metrics[id];
    put(o, "# HELP %s %s\n# TYPE %s %s\n", m->name, m->help, m->name, m->type);
    o->family = m->name;
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
    family(o, M_UP);
    put(o, "%s %d\n", o->family, up);
    family(o, M_SCRAPE_DURATION);
    put(o, "%s %.6f\n", o->family, took);
    family(o, M_QUEUE_LENGTH);
    for (size_t i = 0; i < n; i++)
        sample(o, d[i].queue, NULL, NULL, "%llu",
               (unsigned long long)d[i].info->length);
    family(o, M_ENTRIES_ADDED);
    for (size_t i = 0; i < n; i++) {
        if (d[i].info->entries_added < 0)
            continue;
        sample(o, d[i].queue, NULL, NULL, "%lld",
               (long long)d[i].info->entries_added);
    }
    family(o, M_DEAD_LETTERS);
    for (size_t i = 0; i < n; i++)
        sample(o, d[i].queue, NULL, NULL, "%llu",
               (unsigned long long)d[i].info->dead_length);
    family(o, M_DELAYED);
    for (size_t i = 0; i < n; i++)
        if (d[i].info->delayed)
            sample(o, d[i].queue, NULL, NULL, "%llu",
                   (unsigned long long)d[i].info->delayed->waiting);
    family(o, M_HELD);
    for (size_t i = 0; i < n; i++)
        for (int l = 0; d[i].info->priorities && l < EMQ_PRIORITY_LEVELS; l++) {
            char level[8];
            snprintf(level, sizeof level, "%d", l);
            put(o, "%s", o->family);
            put(o, "{queue=\"");
            put_label(o, d[i].queue);
            put(o, "\",level=\"%s\"} %llu\n", level,
                (unsigned long long)d[i].info->priorities->held_at[l]);
        }
    family(o, M_DELAYED_NEXT_DUE);
    for (size_t i = 0; i < n; i++)
        if (d[i].info->delayed && d[i].info->delayed->next_due_ms >= 0)
            sample(o, d[i].queue, NULL, NULL, "%.3f",
                   (double)d[i].info->delayed->next_due_ms / 1000.0);
    family(o, M_RATE_LIMIT);
    for (size_t i = 0; i < n; i++)
        for (size_t g = 0; g < d[i].info->ngroups; g++)
            if (d[i].info->groups[g].limits.rate > 0)
                sample(o, d[i].queue, d[i].info->groups[g].name, NULL, "%lld",
                       (long long)d[i].info->groups[g].limits.rate);
    family(o, M_MAX_IN_FLIGHT);
    for (size_t i = 0; i < n; i++)
        for (size_t g = 0; g < d[i].info->ngroups; g++)
            if (d[i].info->groups[g].limits.max_in_flight > 0)
                sample(o, d[i].queue, d[i].info->groups[g].name, NULL, "%lld",
                       (long long)d[i].info->groups[g].limits.max_in_flight);
    family(o, M_GROUP_LAG);
    for (size_t i = 0; i < n; i++)
        for (size_t g = 0; g < d[i].info->ngroups; g++) {
            const emq_group_info *gi = &d[i].info->groups[g];
            if (gi->lag < 0)
                continue;
            sample(o, d[i].queue, gi->name, NULL, "%lld", (long long)gi->lag);
        }
    family(o, M_GROUP_PENDING);
    for (size_t i = 0; i < n; i++)
        for (size_t g = 0; g < d[i].info->ngroups; g++) {
            const emq_group_info *gi = &d[i].info->groups[g];
            sample(o, d[i].queue, gi->name, NULL, "%llu",
                   (unsigned long long)gi->pending);
        }
    family(o, M_OLDEST_PENDING);
    for (size_t i = 0; i < n; i++)
        for (size_t g = 0; g < d[i].info->ngroups; g++) {
            const emq_group_info *gi = &d[i].info->groups[g];
            if (gi->oldest_pending_age_ms < 0)
                continue;
            sample(o, d[i].queue, gi->name, NULL, "%.3f",
                   (double)gi->oldest_pending_age_ms / 1000.0);
        }
    family(o, M_CONSUMER_PENDING);
    for (size_t i = 0; i < n; i++)
        for (size_t g = 0; g < d[i].info->ngroups; g++) {
            const emq_group_info *gi = &d[i].info->groups[g];
            for (size_t c = 0; c < gi->nconsumers; c++)
                sample(o, d[i].queue, gi->name, gi->consumers[c].name, "%llu",
                       (unsigned long long)gi->consumers[c].pending);
        }
    family(o, M_CONSUMER_IDLE);
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
    cli_skipped skipped = {0, ""};
    int up = cli_describe_queues(patterns, npatterns, keep, &d, &n, &skipped) ==
             CLI_OK;
    write_metrics(o, d, n, up, (double)(emq_clock_ms() - t0) / 1000.0);
    family(o, M_QUEUE_ERRORS);
    put(o, "%s %zu\n", o->family, skipped.n);
    cli_described_free(d, n);
}

/* ---- HTTP: one poll loop, every connection bounded ----------------------- */

/* One client: its request being read, then its answer being written. */
typedef struct client {
    int fd;                /* -1: a free slot */
    char req[REQUEST_MAX]; /* the request head so far */
    size_t len;
    char *answer; /* malloc'd head and body, once the request is read */
    size_t answer_len, sent;
    int64_t deadline; /* dropped when no progress before it */
} client;

/* The scrape shared by the requests of one --cache interval. */
typedef struct cached_scrape {
    out_buf body;
    int64_t at; /* when it was made; 0: never */
} cached_scrape;

typedef struct exporter {
    client clients[CLIENTS_MAX];
    cached_scrape cache;
    int64_t cache_ms, client_ms;
    char **patterns;
    int npatterns;
    cli_admins admins; /* kept from one scrape to the next */
} exporter;

static void drop(client *c) {
    close(c->fd);
    free(c->answer);
    c->fd = -1;
    c->answer = NULL;
    c->len = c->answer_len = c->sent = 0;
}

/* The body of GET /metrics: the cached scrape while it is fresh, else a
 * new one. NULL when it could not be built. */
static const out_buf *metrics(exporter *x) {
    int64_t now = emq_clock_ms();
    if (x->cache.at != 0 && !x->cache.body.failed &&
        now - x->cache.at < x->cache_ms)
        return &x->cache.body;
    free(x->cache.body.p);
    memset(&x->cache.body, 0, sizeof x->cache.body);
    scrape(&x->cache.body, x->patterns, x->npatterns, &x->admins);
    x->cache.at = emq_clock_ms();
    return x->cache.body.failed ? NULL : &x->cache.body;
}

/* Makes c's answer to the request it has read. */
static void answer(exporter *x, client *c) {
    const char *status = "404 Not Found", *text = "not found: try /metrics\n";
    const out_buf *o = NULL;
    if (!strncmp(c->req, "GET /metrics ", 13) ||
        !strncmp(c->req, "GET /metrics?", 13)) {
        o = metrics(x);
        status = o ? "200 OK" : "500 Internal Server Error";
        text = "the scrape could not be built (out of memory)\n";
    } else if (strncmp(c->req, "GET ", 4) != 0) {
        status = "405 Method Not Allowed";
        text = "only GET /metrics\n";
    }
    const char *body = o ? o->p : text;
    size_t blen = o ? o->len : strlen(text);
    char head[256];
    int hn = snprintf(head, sizeof head,
                      "HTTP/1.0 %s\r\nContent-Type: text/plain; "
                      "version=0.0.4; charset=utf-8\r\nContent-Length: %zu\r\n"
                      "Connection: close\r\n\r\n",
                      status, blen);
    c->answer = malloc((size_t)hn + blen);
    if (c->answer == NULL) {
        drop(c);
        return;
    }
    memcpy(c->answer, head, (size_t)hn);
    memcpy(c->answer + hn, body, blen);
    c->answer_len = (size_t)hn + blen;
}

/* Reads what c sent; once the head is whole (or full), answers. */
static void read_some(exporter *x, client *c) {
    ssize_t got = recv(c->fd, c->req + c->len, sizeof c->req - 1 - c->len, 0);
    if (got < 0 && (errno == EAGAIN || errno == EINTR))
        return;
    if (got <= 0) {
        drop(c);
        return;
    }
    c->len += (size_t)got;
    c->req[c->len] = '\0';
    c->deadline = emq_clock_ms() + x->client_ms;
    if (strstr(c->req, "\r\n\r\n") || strstr(c->req, "\n\n") ||
        c->len == sizeof c->req - 1)
        answer(x, c);
}

/* Writes what c will take of its answer; done, closes it. */
static void write_some(exporter *x, client *c) {
    ssize_t w = send(c->fd, c->answer + c->sent, c->answer_len - c->sent,
                     MSG_NOSIGNAL | MSG_DONTWAIT);
    if (w < 0 && (errno == EAGAIN || errno == EINTR))
        return;
    if (w <= 0) {
        drop(c);
        return;
    }
    c->sent += (size_t)w;
    c->deadline = emq_clock_ms() + x->client_ms;
    if (c->sent == c->answer_len)
        drop(c);
}

/* One round of the loop: waits up to 200 ms (a stop is seen within it),
 * accepts, reads, writes, and drops every client that made no progress
 * within client_ms. */
static void serve_round(exporter *x, int listen_fd) {
    struct pollfd p[CLIENTS_MAX + 1];
    int owner[CLIENTS_MAX + 1];
    nfds_t np = 0;
    p[np] = (struct pollfd){listen_fd, POLLIN, 0};
    owner[np++] = -1;
    for (int i = 0; i < CLIENTS_MAX; i++)
        if (x->clients[i].fd >= 0) {
            p[np] = (struct pollfd){x->clients[i].fd,
                                    x->clients[i].answer ? POLLOUT : POLLIN, 0};
            owner[np++] = i;
        }
    int ready = poll(p, np, 200);
    for (nfds_t k = 1; ready > 0 && k < np; k++) {
        client *c = &x->clients[owner[k]];
        if (p[k].revents == 0 || c->fd != p[k].fd)
            continue;
        int64_t t0 = emq_clock_ms();
        if (c->answer)
            write_some(x, c);
        else
            read_some(x, c);
        /* A scrape blocks the loop: nobody else is late for it. */
        int64_t spent = emq_clock_ms() - t0;
        for (int i = 0; spent > 0 && i < CLIENTS_MAX; i++)
            if (x->clients[i].fd >= 0)
                x->clients[i].deadline += spent;
    }
    if (ready > 0 && (p[0].revents & POLLIN)) {
        int fd = accept(listen_fd, NULL, NULL);
        if (fd >= 0)
            fcntl(fd, F_SETFL, O_NONBLOCK | fcntl(fd, F_GETFL));
        client *slot = NULL;
        for (int i = 0; fd >= 0 && i < CLIENTS_MAX && slot == NULL; i++)
            if (x->clients[i].fd < 0)
                slot = &x->clients[i];
        if (slot != NULL) {
            slot->fd = fd;
            slot->deadline = emq_clock_ms() + x->client_ms;
        } else if (fd >= 0) {
            close(fd); /* every slot busy: the newest waits its turn out */
        }
    }
    int64_t now = emq_clock_ms();
    for (int i = 0; i < CLIENTS_MAX; i++)
        if (x->clients[i].fd >= 0 && now > x->clients[i].deadline)
            drop(&x->clients[i]); /* silent, or not reading */
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
    long long cache_ms = 1000, client_ms = 200;
    if (rc == CLI_OK && a.seen[O_CACHE])
        rc = cli_num(VERB, "--cache", a.value[O_CACHE], 0, 3600000, &cache_ms);
    if (rc == CLI_OK && a.seen[O_CLIENT_TIMEOUT])
        rc = cli_num(VERB, "--client-timeout", a.value[O_CLIENT_TIMEOUT], 10,
                     60000, &client_ms);
    int fd = -1;
    if (rc == CLI_OK)
        rc = listen_on(a.value[O_LISTEN], &fd);
    exporter *x = rc == CLI_OK ? calloc(1, sizeof *x) : NULL;
    if (rc == CLI_OK && x == NULL)
        rc = cli_err(CLI_FAIL, "out of memory");
    if (rc == CLI_OK) {
        x->cache_ms = cache_ms;
        x->client_ms = client_ms;
        x->patterns = a.pos;
        x->npatterns = a.npos;
        for (int i = 0; i < CLIENTS_MAX; i++)
            x->clients[i].fd = -1;
        cli_note("serving /metrics on %s", a.value[O_LISTEN]);
        cli_on_stop_signal(cli_stop_flag, &exporter_stopping);
        while (!atomic_load(&exporter_stopping))
            serve_round(x, fd);
        for (int i = 0; i < CLIENTS_MAX; i++)
            if (x->clients[i].fd >= 0)
                drop(&x->clients[i]);
        cli_admins_free(&x->admins);
        free(x->cache.body.p);
        cli_signals_default();
        atomic_store(&exporter_stopping, 0);
    }
    if (fd >= 0)
        close(fd);
    free(x);
    free(a.pos);
    return rc;
}
