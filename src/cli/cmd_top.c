/* SPDX-License-Identifier: BSD-3-Clause */
/* cmd_top.c: `echomq top`, a live view of queues.
 *
 * Every --interval (default 1 s) each queue matching the patterns (as
 * `ls`) is described by the library; the view shows per queue and group
 * the length, lag, pending, oldest pending age, dead letters and the in
 * and out rates (entries added and entries read by the group per second,
 * from two successive looks), and per consumer its pending, idle and
 * inactive times. On a terminal it is full-screen (the alternate screen,
 * redrawn in place) with keys: q quits, s cycles the sort (name, length,
 * lag, pending, dead). Not on a terminal, the same table is printed each
 * time under a time line, -n N times (default: until SIGINT/SIGTERM/SIGHUP).
 */
#include "cli.h"

#include <poll.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

static const char *const VERB = "top";

static const cli_optdoc opts[] = {
    {O_INTERVAL, "MS", "time between refreshes (default 1000, at least 100)"},
    {O_COUNT_N, "N",
     "when stdout is not a terminal: print the table N times (default: "
     "until SIGINT, SIGTERM or SIGHUP)"},
    CLI_OPTS_END,
};

CLI_VERB(top, "a live view of queues, groups and consumers",
         "echomq top [QUEUE|PATTERN...] [--interval MS] [-n N]",
         "A live view of the queues (default every queue): per queue and\n"
         "group the length, lag, pending, oldest pending age, dead letters,\n"
         "in and out rates; per consumer pending, idle and inactive time.\n"
         "On a terminal: full-screen, redrawn every --interval; keys: q quit,\n"
         "s sort by name, length, lag, pending, dead. Otherwise the table is\n"
         "printed every interval, -n N times.\n",
         opts, NULL);

static atomic_int top_stopping; /* set by SIGINT/SIGTERM/SIGHUP, or q */

typedef cli_described row;

/* What the last look saw, for rates: per queue its entries added (or
 * length), per group its entries read. */
typedef struct seen {
    char key[600]; /* "queue" or "queue\tgroup" */
    long long value;
} seen;

typedef struct top_state {
    seen *prev;
    size_t nprev;
    int64_t prev_ms;
    int sort; /* 0 name, 1 length, 2 lag, 3 pending, 4 dead */
} top_state;

static const char *const sort_names[] = {"name", "length", "lag", "pending",
                                         "dead"};

static long long previous(const top_state *t, const char *key, int *found) {
    for (size_t i = 0; i < t->nprev; i++)
        if (!strcmp(t->prev[i].key, key)) {
            *found = 1;
            return t->prev[i].value;
        }
    *found = 0;
    return 0;
}

static long long total_lag(const emq_queue_info *q) {
    long long lag = 0;
    for (size_t g = 0; g < q->ngroups; g++)
        lag += q->groups[g].lag > 0 ? q->groups[g].lag : 0;
    return lag;
}

static long long total_pending(const emq_queue_info *q) {
    long long n = 0;
    for (size_t g = 0; g < q->ngroups; g++)
        n += (long long)q->groups[g].pending;
    return n;
}

static int sort_key;

static int cmp_rows(const void *a, const void *b) {
    const row *x = a, *y = b;
    long long vx = 0, vy = 0;
    switch (sort_key) {
    case 1:
        vx = (long long)x->info->length;
        vy = (long long)y->info->length;
        break;
    case 2:
        vx = total_lag(x->info);
        vy = total_lag(y->info);
        break;
    case 3:
        vx = total_pending(x->info);
        vy = total_pending(y->info);
        break;
    case 4:
        vx = (long long)x->info->dead_length;
        vy = (long long)y->info->dead_length;
        break;
    default:
        return strcmp(x->queue, y->queue);
    }
    return vx < vy ? 1 : vx > vy ? -1 : strcmp(x->queue, y->queue);
}

/* A rate per second from the last look ("-" the first time). */
static const char *rate(top_state *t, const char *key, long long now_value,
                        double secs, char *buf, size_t size) {
    int found;
    long long before = previous(t, key, &found);
    if (!found || secs <= 0 || now_value < 0)
        snprintf(buf, size, "-");
    else
        snprintf(buf, size, "%.1f", (double)(now_value - before) / secs);
    return buf;
}

/* Draws one look into stdout; remembers what rates need. Returns CLI_OK,
 * or cli_write_failed's code. */
static int draw(top_state *t, row *rows, size_t n, const cli_skipped *skipped,
                int tty) {
    int64_t now = emq_clock_ms();
    double secs = t->prev_ms ? (double)(now - t->prev_ms) / 1000.0 : 0;
    sort_key = t->sort;
    qsort(rows, n, sizeof *rows, cmp_rows);
    time_t wall = time(NULL);
    struct tm tm;
    localtime_r(&wall, &tm);
    char clock[32];
    strftime(clock, sizeof clock, "%H:%M:%S", &tm);
    if (tty)
        printf("\033[H\033[2J");
    printf("echomq top  %s  %zu queue%s  sort: %s%s\n\n", clock, n,
           n == 1 ? "" : "s", sort_names[t->sort],
           tty ? "  (q quit, s sort)" : "");
    printf("%-24s %-16s %10s %8s %8s %10s %6s %8s %8s %9s %9s\n", "QUEUE",
           "GROUP", "LENGTH", "LAG", "PENDING", "OLDEST", "DEAD", "DELAYED",
           "HELD", "IN/s", "OUT/s");
    seen *next = calloc(1, sizeof *next);
    size_t nnext = 0;
    for (size_t i = 0; i < n; i++) {
        const emq_queue_info *q = rows[i].info;
        char name[300], in[32], out[32], oldest[32], key[600];
        cli_esc(rows[i].queue, name, sizeof name);
        long long added = q->entries_added >= 0 ? q->entries_added
                                                : (long long)q->length;
        snprintf(key, sizeof key, "%s", rows[i].queue);
        rate(t, key, added, secs, in, sizeof in);
        seen *grown = realloc(next, (nnext + 1) * sizeof *next);
        if (grown) {
            next = grown;
            snprintf(next[nnext].key, sizeof next[nnext].key, "%s", key);
            next[nnext++].value = added;
        }
        char delayed[24] = "?"; /* not counted: ZCARD refused */
        if (q->delayed)
            snprintf(delayed, sizeof delayed, "%llu",
                     (unsigned long long)q->delayed->waiting);
        char held[24];
        cli_held_text(q, held, sizeof held);
        printf("%-24s %-16s %10llu %8s %8s %10s %6llu %8s %8s %9s %9s\n", name,
               "-", (unsigned long long)q->length, "", "", "",
               (unsigned long long)q->dead_length, delayed, held, in, "");
        for (size_t g = 0; g < q->ngroups; g++) {
            const emq_group_info *gi = &q->groups[g];
            char group[300], lag[32];
            cli_esc(gi->name, group, sizeof group);
            snprintf(lag, sizeof lag, gi->lag >= 0 ? "%lld" : "?",
                     (long long)gi->lag);
            cli_duration(gi->oldest_pending_age_ms, oldest, sizeof oldest);
            snprintf(key, sizeof key, "%s\t%s", rows[i].queue, gi->name);
            rate(t, key, gi->entries_read, secs, out, sizeof out);
            grown = realloc(next, (nnext + 1) * sizeof *next);
            if (grown) {
                next = grown;
                snprintf(next[nnext].key, sizeof next[nnext].key, "%s", key);
                next[nnext++].value = gi->entries_read;
            }
            char limits[64] = "";
            const emq_group_limits *l = &gi->limits;
            if (l->rate > 0 || l->max_in_flight > 0)
                snprintf(limits, sizeof limits, "  limits %lld/s %lld",
                         (long long)l->rate, (long long)l->max_in_flight);
            printf("%-24s %-16s %10s %8s %8llu %10s %6s %8s %8s %9s %9s%s\n",
                   "", group, "", lag, (unsigned long long)gi->pending, oldest,
                   "", "", "", "", out, limits);
            for (size_t c = 0; c < gi->nconsumers; c++) {
                const emq_consumer_info *ci = &gi->consumers[c];
                char consumer[300], idle[32], inactive[32];
                cli_esc(ci->name, consumer, sizeof consumer);
                cli_duration(ci->idle_ms, idle, sizeof idle);
                cli_duration(ci->inactive_ms, inactive, sizeof inactive);
                printf("%-24s   consumer %-20s pending %-8llu idle %-8s "
                       "inactive %s\n",
                       "", consumer, (unsigned long long)ci->pending, idle,
                       inactive);
            }
        }
    }
    if (skipped->n > 0) {
        char shown[sizeof skipped->first + 16];
        printf("%zu queue%s not described; the first: %s\n", skipped->n,
               skipped->n == 1 ? "" : "s",
               cli_esc(skipped->first, shown, sizeof shown));
    }
    if (!tty)
        putchar('\n');
    int failed = fflush(stdout) != 0 || ferror(stdout);
    free(t->prev);
    t->prev = next;
    t->nprev = nnext;
    t->prev_ms = now;
    return !failed ? CLI_OK : cli_write_failed();
}

int cmd_top(int argc, char **argv) {
    cli_args a;
    int rc = cli_begin(VERB, argc, argv, &cli_verb_top, 0, &a);
    if (rc != CLI_OK)
        return rc;
    long long interval = 1000, count = 0;
    if (a.seen[O_INTERVAL])
        rc = cli_num(VERB, "--interval", a.value[O_INTERVAL], 100, 3600000,
                     &interval);
    if (rc == CLI_OK && a.seen[O_COUNT])
        rc = cli_num(VERB, "--count", a.value[O_COUNT], 1, 1000000000, &count);
    if (rc == CLI_OK)
        rc = cli_check_patterns(VERB, a.pos, a.npos);
    if (rc != CLI_OK) {
        free(a.pos);
        return rc;
    }
    int tty = isatty(STDOUT_FILENO) && isatty(STDIN_FILENO);
    struct termios saved, raw;
    if (tty && tcgetattr(STDIN_FILENO, &saved) == 0) {
        raw = saved;
        raw.c_lflag &= (tcflag_t) ~(ICANON | ECHO);
        raw.c_cc[VMIN] = 0;
        raw.c_cc[VTIME] = 0;
        tcsetattr(STDIN_FILENO, TCSANOW, &raw);
        printf("\033[?1049h"); /* the alternate screen */
    } else {
        tty = 0;
    }
    cli_on_stop_signal(cli_stop_flag, &top_stopping);
    top_state t = {0};
    cli_admins admins = {0}; /* kept from one refresh to the next */
    for (long long shown = 0; rc == CLI_OK && !atomic_load(&top_stopping) &&
                              (count == 0 || shown < count);
         shown++) {
        row *rows;
        size_t n;
        cli_skipped skipped;
        rc = cli_describe_queues(a.pos, a.npos, &admins, &rows, &n, &skipped);
        if (rc == CLI_OK)
            rc = draw(&t, rows, n, &skipped, tty);
        cli_described_free(rows, n);
        if (count && shown + 1 >= count)
            break;
        /* Wait out the interval, reading keys on a terminal. */
        int64_t until = emq_clock_ms() + interval;
        int redraw = 0;
        while (!redraw && !atomic_load(&top_stopping) &&
               emq_clock_ms() < until) {
            if (cli_stdout_gone()) {
                atomic_store(&top_stopping, 1);
                break;
            }
            struct pollfd p = {STDIN_FILENO, POLLIN, 0};
            int left = (int)(until - emq_clock_ms());
            if (!tty) {
                usleep((useconds_t)(left < 100 ? left : 100) * 1000);
                continue;
            }
            if (poll(&p, 1, left < 100 ? left : 100) <= 0)
                continue;
            char key;
            if (read(STDIN_FILENO, &key, 1) != 1)
                continue;
            if (key == 'q' || key == 'Q')
                atomic_store(&top_stopping, 1);
            else if (key == 's' || key == 'S') {
                t.sort = (t.sort + 1) % 5;
                redraw = 1;
            }
        }
    }
    cli_signals_default();
    atomic_store(&top_stopping, 0);
    if (tty) {
        printf("\033[?1049l");
        fflush(stdout);
        tcsetattr(STDIN_FILENO, TCSANOW, &saved);
    }
    cli_admins_free(&admins);
    free(t.prev);
    free(a.pos);
    return rc;
}
