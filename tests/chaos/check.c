/* SPDX-License-Identifier: BSD-3-Clause */
/* check.c: the chaos harness's checker and its view of the server.
 *
 * After the workers have stopped, the checker puts together three sources
 * that do not depend on each other:
 *   - the ledgers: every handler call any process made (job, delivery
 *     count, entry ID, ledger worker id, incarnation, pid, start time and,
 *     unless the process died or was stopped mid-way, end time and
 *     verdict), the regular workers' and the intruders';
 *   - the server: every entry of the stream (XRANGE, paged), the dead
 *     letters of emq:{chaos}:dead (their emq.id and the job field),
 *     XPENDING and XINFO of the group;
 *   - the run: each job's plan (poison, retries asked, duration), which
 *     jobs the producer re-sent after an unknown outcome, and every fault:
 *     when it began and ended, and which worker incarnation it hit.
 * Jobs are keyed by their job field, never by entry ID: a job re-sent after
 * a lost XADD reply may be in the stream twice and is still one job.
 *
 * The duplicate rule (docs/RELIABILITY.md, "How the checker decides"):
 * the handler calls of a healthy job, in start order, are one call plus
 * one per EMQ_RETRY it asked for (a call that follows a T verdict, after
 * that call ended, is an intended re-delivery). Every other call is a
 * duplicate of the call before it, r; it is explained only when, while r's
 * process held the entry (from r's start until the duplicate started, and
 * no later than settle-slack after r returned), that process was SIGKILLed
 * or SIGSTOPped (past claim.min_idle_ms, or past the lease TTL), or a
 * proxy fault, server kill or MISCONF episode was under way (plus the
 * command timeout and block_ms after it), or the job is in the stream
 * twice because the producer re-sent it. Anything else is a VIOLATION.
 * The raw commands use the public emq_conn API over the server's unix
 * socket.
 */
#include "chaos.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- raw commands ------------------------------------------------------ */

static emq_conn_t *admin_connect(const char *url) {
    emq_conf_t *conf = emq_conf_new();
    emq_conn_t *conn = NULL;
    emq_error err;
    if (conf && emq_conf_set(conf, "url", url, &err) == EMQ_OK &&
        emq_conf_set(conf, "command_timeout_ms", "10000", &err) == EMQ_OK &&
        emq_conn_new(conf, &conn, &err) != EMQ_OK) {
        fprintf(stderr, "checker: cannot connect to %s: %s\n", url,
                err.message);
        conn = NULL;
    }
    emq_conf_destroy(conf);
    return conn;
}

/* Sends argv (NULL-terminated); NULL on a transport failure. */
static emq_reply *cmd(emq_conn_t *conn, const char *const *argv) {
    int argc = 0;
    while (argv[argc])
        argc++;
    emq_reply *r = NULL;
    emq_error err;
    if (emq_conn_command(conn, argc, argv, NULL, &r, &err) != EMQ_OK) {
        fprintf(stderr, "checker: %s failed: %s\n", argv[0], err.message);
        return NULL;
    }
    return r;
}

/* Copies a string reply into buf; "" for anything else. */
static const char *text(const emq_reply *r, char *buf, size_t size) {
    size_t n = 0;
    const char *s = emq_reply_str(r, &n);
    if (s == NULL || size == 0) {
        if (size)
            buf[0] = '\0';
        return buf;
    }
    if (n >= size)
        n = size - 1;
    memcpy(buf, s, n);
    buf[n] = '\0';
    return buf;
}

/* The value of name in a flat [k, v, k, v, ...] reply, or NULL. */
static const emq_reply *lookup(const emq_reply *flat, const char *name) {
    for (size_t i = 0; i + 1 < emq_reply_len(flat); i += 2) {
        char k[64];
        if (strcmp(text(emq_reply_at(flat, i), k, sizeof k), name) == 0)
            return emq_reply_at(flat, i + 1);
    }
    return NULL;
}

/* Pending count and whether the group has delivered every entry. Returns
 * -1 when the server could not be asked. */
static int queue_state(emq_conn_t *conn, long long *pending, int *behind,
                       char *last_delivered, char *last_generated) {
    const char *xp[] = {"XPENDING", CHAOS_STREAM, CHAOS_GROUP, NULL};
    const char *groups[] = {"XINFO", "GROUPS", CHAOS_STREAM, NULL};
    const char *stream[] = {"XINFO", "STREAM", CHAOS_STREAM, NULL};
    emq_reply *a = cmd(conn, xp), *b = a ? cmd(conn, groups) : NULL,
              *c = b ? cmd(conn, stream) : NULL;
    int rc = -1;
    if (a && b && c && emq_reply_kind(a) == EMQ_REPLY_ARRAY &&
        emq_reply_kind(c) == EMQ_REPLY_ARRAY) {
        *pending = emq_reply_integer(emq_reply_at(a, 0));
        last_delivered[0] = '\0';
        for (size_t i = 0; i < emq_reply_len(b); i++) {
            const emq_reply *g = emq_reply_at(b, i);
            char name[64];
            if (strcmp(text(lookup(g, "name"), name, sizeof name),
                       CHAOS_GROUP) == 0)
                text(lookup(g, "last-delivered-id"), last_delivered,
                     EMQ_ID_MAX);
        }
        text(lookup(c, "last-generated-id"), last_generated, EMQ_ID_MAX);
        *behind = strcmp(last_delivered, last_generated) != 0;
        rc = 0;
    }
    emq_reply_free(a);
    emq_reply_free(b);
    emq_reply_free(c);
    return rc;
}

int chaos_drained(const char *url, long long *pending, int *behind);
int chaos_drained(const char *url, long long *pending, int *behind) {
    emq_conn_t *conn = admin_connect(url);
    if (conn == NULL)
        return -1;
    char ld[EMQ_ID_MAX], lg[EMQ_ID_MAX];
    int rc = queue_state(conn, pending, behind, ld, lg);
    emq_conn_destroy(conn);
    return rc;
}

/* Pages through a stream with XRANGE; calls fn for each entry. */
typedef void (*entry_fn)(void *ctx, const char *id, const emq_reply *fields);

static int scan(emq_conn_t *conn, const char *key, entry_fn fn, void *ctx) {
    char start[EMQ_ID_MAX + 2] = "-";
    for (int page = 0; page < 1000000; page++) {
        const char *argv[] = {"XRANGE", key, start, "+", "COUNT", "2000", NULL};
        emq_reply *r = cmd(conn, argv);
        if (r == NULL || emq_reply_kind(r) != EMQ_REPLY_ARRAY) {
            emq_reply_free(r);
            return -1;
        }
        size_t n = emq_reply_len(r);
        char id[EMQ_ID_MAX];
        for (size_t i = 0; i < n; i++) {
            const emq_reply *e = emq_reply_at(r, i);
            text(emq_reply_at(e, 0), id, sizeof id);
            fn(ctx, id, emq_reply_at(e, 1));
        }
        if (n > 0)
            snprintf(start, sizeof start, "(%s", id);
        emq_reply_free(r);
        if (n < 2000)
            return 0;
    }
    return -1;
}

/* ---- what the server holds ------------------------------------------- */

/* One dead letter: its job, the entry it came from, and whether it holds
 * every field of that entry as the producer wrote it. */
typedef struct dead_letter {
    long job;
    char origin[24];
    int fields_ok;
} dead_letter;

typedef struct seen {
    long jobs;
    const job_plan *plan; /* to rebuild each job's fields */
    uint64_t seed;
    dead_letter *dl;
    long ndl, dl_cap;
    long fields_bad;      /* dead letters missing or changing a field */
    uint8_t *in_stream;   /* entries per job, saturating at 255 */
    char (*first_id)[24]; /* first entry ID of each job */
    uint8_t *dead;        /* dead letters per job */
    long stream_entries, stream_foreign;
    long dead_letters, dead_foreign;
    char (*origins)[24]; /* emq.id of every dead letter */
    long norigins, origins_cap;
} seen;

static long job_of(const emq_reply *fields, long jobs) {
    char v[32];
    const emq_reply *j = lookup(fields, "job");
    if (j == NULL)
        return -1;
    char *end;
    long job = strtol(text(j, v, sizeof v), &end, 10);
    if (*end != '\0' || end == v || job < 0 || job >= jobs)
        return -1;
    return job;
}

static void on_stream(void *ctx, const char *id, const emq_reply *fields) {
    seen *s = ctx;
    s->stream_entries++;
    long job = job_of(fields, s->jobs);
    if (job < 0) {
        s->stream_foreign++;
        return;
    }
    if (s->in_stream[job] == 0)
        snprintf(s->first_id[job], sizeof s->first_id[job], "%s", id);
    if (s->in_stream[job] < 255)
        s->in_stream[job]++;
}

/* 1 when a dead letter's fields, the emq.* origin pairs aside, are the
 * fields of job `job` as the producer wrote them (chaos_job_fields): the
 * same number, each name with its value. In order first; when the order
 * differs, each is looked up by name. */
static int same_fields(const emq_reply *flat, long job, const job_plan *plan,
                       uint64_t seed) {
    size_t n = 0;
    emq_field *want = chaos_job_fields(job, plan, seed, &n);
    if (want == NULL)
        return 0;
    size_t len = emq_reply_len(flat), got = 0, k = 0;
    int in_order = 1;
    for (size_t i = 0; i + 1 < len; i += 2) {
        size_t nl = 0, vl = 0;
        const char *name = emq_reply_str(emq_reply_at(flat, i), &nl);
        const char *value = emq_reply_str(emq_reply_at(flat, i + 1), &vl);
        if (name == NULL || (nl > 4 && memcmp(name, "emq.", 4) == 0))
            continue;
        got++;
        if (k < n && in_order && value && nl == want[k].name_len &&
            vl == want[k].value_len && memcmp(name, want[k].name, nl) == 0 &&
            memcmp(value, want[k].value, vl) == 0)
            k++;
        else
            in_order = 0;
    }
    int ok = got == n && (in_order ? k == n : 1);
    for (size_t w = 0; ok && !in_order && w < n; w++) {
        int found = 0;
        for (size_t i = 0; !found && i + 1 < len; i += 2) {
            size_t nl = 0, vl = 0;
            const char *name = emq_reply_str(emq_reply_at(flat, i), &nl);
            const char *value = emq_reply_str(emq_reply_at(flat, i + 1), &vl);
            found = name && value && nl == want[w].name_len &&
                    memcmp(name, want[w].name, nl) == 0 &&
                    vl == want[w].value_len &&
                    memcmp(value, want[w].value, vl) == 0;
        }
        ok = found;
    }
    free(want);
    return ok;
}

static void on_dead(void *ctx, const char *id, const emq_reply *fields) {
    (void)id;
    seen *s = ctx;
    s->dead_letters++;
    long job = job_of(fields, s->jobs);
    if (job < 0) {
        s->dead_foreign++;
        return;
    }
    if (s->dead[job] < 255)
        s->dead[job]++;
    if (s->norigins == s->origins_cap) {
        long cap = s->origins_cap ? s->origins_cap * 2 : 256;
        void *o = realloc(s->origins, (size_t)cap * sizeof *s->origins);
        if (o == NULL)
            return;
        s->origins = o;
        s->origins_cap = cap;
    }
    char origin[24];
    text(lookup(fields, "emq.id"), origin, sizeof origin);
    memcpy(s->origins[s->norigins++], origin, sizeof origin);
    if (s->ndl == s->dl_cap) {
        long cap = s->dl_cap ? s->dl_cap * 2 : 256;
        void *d = realloc(s->dl, (size_t)cap * sizeof *s->dl);
        if (d == NULL)
            return;
        s->dl = d;
        s->dl_cap = cap;
    }
    dead_letter *d = &s->dl[s->ndl++];
    d->job = job;
    memcpy(d->origin, origin, sizeof origin);
    d->fields_ok = same_fields(fields, job, &s->plan[job], s->seed);
    s->fields_bad += !d->fields_ok;
}

static int cmp_origin(const void *a, const void *b) { return strcmp(a, b); }

/* ---- the ledgers --------------------------------------------------------- */

/* One handler call: an S line and, when the handler returned, its E line. */
typedef struct rec {
    long job;
    unsigned long long deliveries;
    long long t_start, t_end; /* t_end 0: never returned (killed) */
    char id[24];
    int worker; /* ledger worker id: 1..W, or 100 + n for intruder n */
    int inc;
    long pid;
    char verdict; /* A, R, T; '-' when it never returned */
} rec;

typedef struct ledgers {
    rec *r;
    size_t n, cap;
    long bad_lines;
    long unmatched_ends;
} ledgers;

static long parse_job(const char *job, long jobs) {
    char *end;
    long j = strtol(job, &end, 10);
    if (*end != '\0' || end == job || j < 0 || j >= jobs)
        return -1;
    return j;
}

/* Reads one ledger; returns the number of handler calls it holds, or -1
 * when out of memory. */
static long read_ledger(ledgers *l, const char *path, long jobs) {
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return 0; /* a process that never got an entry has none */
    size_t first = l->n;
    char line[320];
    while (fgets(line, sizeof line, f)) {
        rec x;
        char job[32];
        memset(&x, 0, sizeof x);
        if (line[0] == 'S' &&
            sscanf(line, "S %31s %llu %23s %d %d %ld %lld", job, &x.deliveries,
                   x.id, &x.worker, &x.inc, &x.pid, &x.t_start) == 7) {
            if ((x.job = parse_job(job, jobs)) < 0) {
                l->bad_lines++;
                continue;
            }
            x.verdict = '-';
            if (l->n == l->cap) {
                size_t cap = l->cap ? l->cap * 2 : 65536;
                rec *r = realloc(l->r, cap * sizeof *r);
                if (r == NULL) {
                    fclose(f);
                    return -1;
                }
                l->r = r;
                l->cap = cap;
            }
            l->r[l->n++] = x;
        } else if (line[0] == 'E' &&
                   sscanf(line, "E %31s %llu %23s %d %d %ld %lld %lld %c", job,
                          &x.deliveries, x.id, &x.worker, &x.inc, &x.pid,
                          &x.t_start, &x.t_end, &x.verdict) == 9 &&
                   (x.verdict == 'A' || x.verdict == 'R' || x.verdict == 'T' ||
                    x.verdict == 'D')) {
            /* Its S line is the latest open one of the same call: one
             * process runs one handler at a time. */
            int found = 0;
            for (size_t k = l->n; k > first && k + 64 > l->n; k--) {
                rec *o = &l->r[k - 1];
                if (o->verdict == '-' && o->t_start == x.t_start &&
                    o->inc == x.inc && o->pid == x.pid &&
                    strcmp(o->id, x.id) == 0) {
                    o->t_end = x.t_end;
                    o->verdict = x.verdict;
                    found = 1;
                    break;
                }
            }
            if (!found)
                l->unmatched_ends++;
        } else {
            l->bad_lines++;
        }
    }
    fclose(f);
    return (long)(l->n - first);
}

static int cmp_rec(const void *a, const void *b) {
    const rec *x = a, *y = b;
    if (x->job != y->job)
        return x->job < y->job ? -1 : 1;
    if (x->t_start != y->t_start)
        return (x->t_start > y->t_start) - (x->t_start < y->t_start);
    return (x->worker > y->worker) - (x->worker < y->worker);
}

/* ---- explaining a duplicate ---------------------------------------------- */

enum {
    WHY_NONE = 0,
    WHY_READDED,   /* two entries of one job: the producer re-sent it */
    WHY_KILL,      /* r's process was SIGKILLed while it held the entry */
    WHY_STOP,      /* ... SIGSTOPped past claim.min_idle_ms */
    WHY_STOP_LONG, /* ... SIGSTOPped past the lease TTL */
    WHY_NET,       /* a proxy fault while r's entry was in hand or settling */
    WHY_SERVER,    /* a server kill or MISCONF episode, likewise */
    WHY_PEER,      /* the entry was XCLAIMed by a made-up peer while r's
                      process held it (peer-claim) */
    WHY_KINDS
};

static const char *why_name[WHY_KINDS] = {"unexplained",
                                          "re-added by the producer",
                                          "kill",
                                          "stop",
                                          "stop past lease",
                                          "proxy fault",
                                          "server fault",
                                          "peer claim"};

static int is_process_fault(fault_kind k) {
    return k == FAULT_KILL || k == FAULT_STOP || k == FAULT_STOP_LONG ||
           k == FAULT_STOP_PULL;
}

static int is_global_fault(fault_kind k) {
    return k == FAULT_DROP || k == FAULT_STALL || k == FAULT_HALFOPEN ||
           k == FAULT_RESTART || k == FAULT_MISCONF;
}

/* An eviction episode is a write outage only when a write was refused
 * with OOM (nothing with a TTL was left to evict); otherwise it explains
 * nothing: losing a lease key must not cost a duplicate. */
static int is_write_outage(const fault *f) {
    return f->kind == FAULT_RESTART || f->kind == FAULT_MISCONF ||
           f->kind == FAULT_FAILOVER ||
           (f->kind == FAULT_EVICT && f->outcome == 1);
}

/* 1 when a server restart, MISCONF episode or OOM (the server refused
 * writes) overlapped [from_ms, to_ms]. */
static int write_outage(const chaos_run *run, long long from_ms,
                        long long to_ms) {
    for (int i = 0; i < run->nfaults; i++) {
        const fault *f = &run->faults[i];
        if (is_write_outage(f) && f->began_ms != 0 && f->began_ms <= to_ms &&
            f->ended_ms >= from_ms)
            return 1;
    }
    return 0;
}

/* The start of worker's last handler call in incarnation inc, among the
 * first n records (LLONG_MIN: none). */
static long long last_call_start(const ledgers *l, size_t n, int worker,
                                 int inc) {
    long long last = LLONG_MIN;
    for (size_t k = 0; k < n; k++)
        if (l->r[k].worker == worker && l->r[k].inc == inc &&
            l->r[k].t_start > last)
            last = l->r[k].t_start;
    return last;
}

/* A handler call that starts this soon after its worker's SIGCONT may
 * have been handed its entry before the SIGSTOP. */
#define CHAOS_RESUME_SLACK_MS 1000

/* Why the call h repeats the call r, or WHY_NONE. Process faults come
 * first: they are the stronger explanation. */
static int explain(const chaos_run *run, const rec *r, const rec *h) {
    if (strcmp(r->id, h->id) != 0 && run->resent[r->job])
        return WHY_READDED;
    long long lo = r->t_start, hi = h->t_start;
    if (r->t_end && r->t_end + run->set.settle_slack_ms < hi)
        hi = r->t_end + run->set.settle_slack_ms;
    const long long after = CHAOS_COMMAND_TIMEOUT_MS + CHAOS_BLOCK_MS;
    int global = WHY_NONE;
    for (int i = 0; i < run->nfaults; i++) {
        const fault *f = &run->faults[i];
        if (f->began_ms == 0)
            continue;
        if (is_process_fault(f->kind) && f->worker == r->worker &&
            f->inc == r->inc && f->began_ms <= hi && f->ended_ms >= lo)
            return f->kind == FAULT_KILL   ? WHY_KILL
                   : f->kind == FAULT_STOP ? WHY_STOP
                                           : WHY_STOP_LONG;
        /* The second call's worker was stopped holding the entry: handed
         * to its handler before the stop (its count is below the peer's,
         * which claimed it meanwhile), the handler's first line ran only
         * after SIGCONT. A stopped process reads no clock, so a start
         * stamped inside the stop was taken at the resume, before the
         * harness stamped the stop's end (seed 8204: 1 ms before). */
        if (is_process_fault(f->kind) && f->kind != FAULT_KILL &&
            f->worker == h->worker && f->inc == h->inc &&
            f->began_ms <= r->t_start && f->began_ms <= h->t_start &&
            h->t_start - f->ended_ms <= CHAOS_RESUME_SLACK_MS &&
            h->deliveries < r->deliveries)
            return f->kind == FAULT_STOP ? WHY_STOP : WHY_STOP_LONG;
        if (f->kind == FAULT_PEER_CLAIM && f->began_ms <= hi &&
            f->ended_ms >= lo)
            for (int k = 0; k < f->claimed; k++)
                if (strcmp(f->claimed_ids[k], r->id) == 0)
                    return WHY_PEER;
        if (global == WHY_NONE &&
            (is_global_fault(f->kind) || is_write_outage(f)) &&
            f->began_ms <= hi && f->ended_ms + after >= lo)
            global = is_write_outage(f) ? WHY_SERVER : WHY_NET;
        /* A failover between the two calls: what the first wrote (the
         * read, the acknowledgement) reaches the promoted replica only as
         * fast as it replicates, and a replica still syncing (a full
         * resync of big entries takes seconds) may be promoted without
         * it. Replication is asynchronous: no bound is assumed. */
        if (global == WHY_NONE && f->kind == FAULT_FAILOVER &&
            f->began_ms >= r->t_start && f->began_ms <= h->t_start)
            global = WHY_SERVER;
    }
    return global;
}

static double rel(const chaos_run *run, long long t) {
    return (double)(t - run->run_start) / 1000.0;
}

static void show_job(const chaos_run *run, const seen *s, const ledgers *l,
                     size_t from, size_t to, long job, const char *what) {
    const job_plan *p = &run->plan[job];
    printf("    job %ld (%s, handler %u ms, asks %u retries): %s; %u "
           "entr%s in the stream (first %s), %u dead letter(s), %zu handler "
           "calls\n",
           job, p->poison ? "poison" : "healthy", (unsigned)p->ms,
           (unsigned)p->retries, what, s->in_stream[job],
           s->in_stream[job] == 1 ? "y" : "ies",
           s->in_stream[job] ? s->first_id[job] : "-", s->dead[job], to - from);
    long long t_lo = 0, t_hi = 0;
    for (size_t i = from; i < to && i < from + 8; i++) {
        const rec *x = &l->r[i];
        char name[32];
        if (x->worker >= CHAOS_INTRUDER_ID0)
            snprintf(name, sizeof name, "intruder-%d",
                     x->worker - CHAOS_INTRUDER_ID0);
        else
            snprintf(name, sizeof name, "chaos-%d", x->worker);
        if (x->t_end)
            printf("      call: entry %s deliveries %llu %s incarnation %d "
                   "pid %ld, %.3f-%.3f s, verdict %c\n",
                   x->id, x->deliveries, name, x->inc, x->pid,
                   rel(run, x->t_start), rel(run, x->t_end), x->verdict);
        else
            printf("      call: entry %s deliveries %llu %s incarnation %d "
                   "pid %ld, from %.3f s, never returned\n",
                   x->id, x->deliveries, name, x->inc, x->pid,
                   rel(run, x->t_start));
        if (i == from || x->t_start < t_lo)
            t_lo = x->t_start;
        long long e = x->t_end ? x->t_end : x->t_start;
        if (e > t_hi)
            t_hi = e;
    }
    /* The faults around it, for the post-mortem. */
    for (int i = 0; i < run->nfaults; i++) {
        const fault *f = &run->faults[i];
        if (f->began_ms == 0 || f->ended_ms + 5000 < t_lo || f->began_ms > t_hi)
            continue;
        if (f->worker)
            printf("      fault nearby: %s chaos-%d incarnation %d, "
                   "%.3f-%.3f s\n",
                   chaos_fault_name(f->kind), f->worker, f->inc,
                   rel(run, f->began_ms), rel(run, f->ended_ms));
        else
            printf("      fault nearby: %s, %.3f-%.3f s\n",
                   chaos_fault_name(f->kind), rel(run, f->began_ms),
                   rel(run, f->ended_ms));
    }
}

/* The retry delay the library promises for a retry at this delivery count:
 * min(max, backoff * 2^(d-1)), with jitter down to half of it. */
static long long backoff_floor(const chaos_run *run, unsigned long long d) {
    long long b = run->set.retry_backoff_ms;
    long long max = run->set.retry_backoff_max_ms > 0
                        ? run->set.retry_backoff_max_ms
                        : 60000;
    for (unsigned long long k = 1; k < d && b < max; k++)
        b *= 2;
    if (b > max)
        b = max;
    return b / 2;
}

/* Deliveries of entry id to a peer-claim's made-up consumer (a claim
 * that raised its count; a delivery to a peer that died, whose handler
 * may have begun, counts as one). */
static long ghost_deliveries(const chaos_run *run, const char *id) {
    long n = 0;
    for (int fi = 0; fi < run->nfaults; fi++)
        for (int k = 0; k < run->faults[fi].claimed; k++)
            n += strcmp(run->faults[fi].claimed_ids[k], id) == 0;
    return n;
}

static int cmp_ll(const void *a, const void *b) {
    long long x = *(const long long *)a, y = *(const long long *)b;
    return (x > y) - (x < y);
}

int chaos_check(const chaos_run *run) {
    long N = run->jobs;
    int violations = 0;
    seen s;
    memset(&s, 0, sizeof s);
    s.jobs = N;
    s.plan = run->plan;
    s.seed = run->seed;
    s.in_stream = calloc((size_t)N, 1);
    s.dead = calloc((size_t)N, 1);
    s.first_id = calloc((size_t)N, sizeof *s.first_id);
    ledgers l;
    memset(&l, 0, sizeof l);
    emq_conn_t *conn = admin_connect(run->admin_url);
    if (!s.in_stream || !s.dead || !s.first_id || conn == NULL) {
        printf("checker: cannot start (memory or server)\n");
        emq_conn_destroy(conn);
        free(s.in_stream);
        free(s.dead);
        free(s.first_id);
        return 1;
    }

    /* The server. */
    long long pending = -1;
    int behind = 1;
    char last_delivered[EMQ_ID_MAX] = "", last_generated[EMQ_ID_MAX] = "";
    int server_ok = scan(conn, CHAOS_STREAM, on_stream, &s) == 0 &&
                    scan(conn, CHAOS_DEAD, on_dead, &s) == 0 &&
                    queue_state(conn, &pending, &behind, last_delivered,
                                last_generated) == 0;
    char pend_detail[2048] = "";
    if (server_ok && pending != 0) {
        const char *argv[] = {"XPENDING", CHAOS_STREAM, CHAOS_GROUP, "-",
                              "+",        "10",         NULL};
        emq_reply *r = cmd(conn, argv);
        size_t used = 0;
        for (size_t i = 0; r && i < emq_reply_len(r); i++) {
            const emq_reply *e = emq_reply_at(r, i);
            char id[EMQ_ID_MAX], who[64];
            int n = snprintf(pend_detail + used, sizeof pend_detail - used,
                             "      pending: %s held by %s, idle %lld ms, "
                             "deliveries %lld\n",
                             text(emq_reply_at(e, 0), id, sizeof id),
                             text(emq_reply_at(e, 1), who, sizeof who),
                             emq_reply_integer(emq_reply_at(e, 2)),
                             emq_reply_integer(emq_reply_at(e, 3)));
            if (n < 0 || (size_t)n >= sizeof pend_detail - used)
                break;
            used += (size_t)n;
        }
        emq_reply_free(r);
    }
    emq_conn_destroy(conn);

    /* The ledgers: the workers', then each intruder's. */
    for (int w = 1; w <= run->workers; w++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/chaos-%d.ledger", run->dir, w);
        if (read_ledger(&l, path, N) < 0) {
            printf("checker: out of memory reading %s\n", path);
            violations++;
        }
    }
    size_t workers_end = l.n; /* the workers' calls, before the intruders' */
    int intruders = 0, intruders_refused = 0, intruders_waited = 0,
        intruders_pidns = 0, intruders_bad = 0, intruders_skipped = 0,
        intruders_fenced = 0;
    long intruder_calls = 0;
    char intruder_report[2048] = "";
    size_t ir_used = 0;
    for (int i = 0; i < run->nfaults; i++) {
        const fault *f = &run->faults[i];
        if (f->kind != FAULT_INTRUDER || f->began_ms == 0)
            continue;
        if (f->outcome == INTRUDER_SKIPPED) {
            intruders_skipped++;
            continue;
        }
        intruders++;
        intruders_pidns += f->pidns;
        char path[4096];
        snprintf(path, sizeof path, "%s/intruder-%d.ledger", run->dir, i + 1);
        size_t first = l.n;
        long calls = read_ledger(&l, path, N);
        if (calls < 0) {
            printf("checker: out of memory reading %s\n", path);
            violations++;
            calls = 0;
        }
        /* Calls made while the target's incarnation lived break the
         * promise; later ones (the name was free) are only reported. */
        long live_calls = 0;
        long long first_call = LLONG_MAX;
        for (size_t k = first; k < l.n; k++)
            if (f->target_died_ms == 0 || l.r[k].t_start < f->target_died_ms) {
                live_calls++;
                if (l.r[k].t_start < first_call)
                    first_call = l.r[k].t_start;
            }
        /* One exception, the lease's own limit: a lease the server
         * refuses to renew (down, or refusing writes) for longer than its
         * TTL expires, and a waiting intruder may take it. The promise is
         * then the fence: the target handed out nothing from the moment
         * the intruder began (its deadline passed before the TTL did). */
        int fenced = live_calls > 0 &&
                     write_outage(run, f->began_ms - run->set.lease_ttl_ms,
                                  first_call) &&
                     last_call_start(&l, workers_end, f->worker, f->inc) <
                         first_call;
        intruders_fenced += fenced;
        if (!fenced)
            intruder_calls += live_calls;
        int bad = (live_calls > 0 && !fenced) || f->outcome == INTRUDER_OTHER;
        intruders_bad += bad;
        intruders_refused += f->outcome == INTRUDER_REFUSED;
        intruders_waited += f->outcome == INTRUDER_WAITED;
        int n = snprintf(
            intruder_report + ir_used, sizeof intruder_report - ir_used,
            "      %sintruder-%d: %s; %ld handler calls, %ld of "
            "them while its target lived%s\n",
            bad ? "VIOLATION " : "", i + 1, f->detail, calls, live_calls,
            fenced ? " (the server refused the target's "
                     "renewals past the lease TTL; the target "
                     "had fenced itself: its last handler call "
                     "began before the intruder's first)"
                   : "");
        if (n > 0 && (size_t)n < sizeof intruder_report - ir_used)
            ir_used += (size_t)n;
    }
    qsort(l.r, l.n, sizeof *l.r, cmp_rec);

    /* Duplicate dead letters of one entry. */
    long dead_dups = 0;
    qsort(s.origins, (size_t)s.norigins, sizeof *s.origins, cmp_origin);
    for (long i = 1; i < s.norigins; i++)
        if (strcmp(s.origins[i], s.origins[i - 1]) == 0)
            dead_dups++;

    long poison = 0, handled = 0, handler_calls = (long)l.n, dead_jobs = 0,
         dead_healthy = 0, dead_poison = 0, lost = 0, missing = 0,
         poison_acked = 0, twice_in_stream = 0, dedup_twice = 0, dup_jobs = 0,
         dup_calls = 0, dup_unexplained = 0, retry_jobs = 0, intended = 0,
         early = 0, unfinished = 0, long_jobs = 0, long_dup = 0,
         dead_given_up = 0, dead_planned = 0, unseen = 0;
    long why[WHY_KINDS] = {0};
    long long *gaps = calloc(l.n + 16, sizeof *gaps); /* <= one per call */
    long ngaps = 0;
    int shown = 0;
    const char *kinds[8] = {NULL};
    int kind_shown[8] = {0};
    size_t i = 0;
    for (long job = 0; job < N; job++) {
        size_t from = i;
        while (i < l.n && l.r[i].job == job)
            i++;
        size_t to = i;
        const job_plan *p = &run->plan[job];
        long acks = 0;
        for (size_t k = from; k < to; k++) {
            acks += l.r[k].verdict == 'A';
            unfinished += l.r[k].verdict == '-';
        }
        if (p->poison)
            poison++;
        dead_planned += p->dead;
        if (p->retries)
            retry_jobs++;
        int is_long = p->ms >= (uint32_t)(run->set.claim_idle_ms / 4);
        long_jobs += is_long && !p->poison;
        if (s.in_stream[job] > 1)
            twice_in_stream++;
        if (s.in_stream[job] > 1 && p->dedup)
            dedup_twice++;
        if (acks > 0)
            handled++;
        if (s.dead[job] > 0) {
            dead_jobs++;
            if (p->poison)
                dead_poison++;
            else if (p->dead)
                dead_given_up++;
            else
                dead_healthy++;
        }
        const char *what = NULL;
        if (s.in_stream[job] == 0)
            what = "MISSING from the stream";
        else if (p->poison && acks > 0)
            what = "poison job ACKNOWLEDGED";
        else if (p->poison && s.dead[job] == 0)
            what = "poison job LOST (not dead-lettered)";
        else if (p->dead && s.dead[job] == 0)
            what = "dead job LOST (not dead-lettered)";
        else if (!p->poison && !p->dead && s.dead[job] > 0)
            what = "healthy job DEAD-LETTERED";
        else if (!p->poison && !p->dead && acks == 0)
            what = "healthy job LOST (never acknowledged, not dead-lettered)";
        if (s.in_stream[job] == 0)
            missing++;
        if (p->poison && acks > 0)
            poison_acked++;
        if (acks == 0 && s.dead[job] == 0)
            lost++;
        /* Duplicates and intended re-deliveries of a healthy job. */
        int job_dup = 0, job_bad_dup = 0;
        if (!p->poison) {
            for (size_t k = from + 1; k < to; k++) {
                const rec *r = &l.r[k - 1], *h = &l.r[k];
                if (r->verdict == 'T' && r->t_end && r->t_end <= h->t_start) {
                    intended++;
                    long long gap = h->t_start - r->t_end;
                    if (gaps)
                        gaps[ngaps++] = gap;
                    /* Another entry of a re-added job has no schedule of
                     * r's: its call may come at once. */
                    if (run->set.backoff_in_force &&
                        strcmp(r->id, h->id) == 0 &&
                        gap + 20 < backoff_floor(run, r->deliveries) &&
                        explain(run, r, h) < WHY_KILL)
                        early++;
                    continue;
                }
                job_dup = 1;
                dup_calls++;
                int w = explain(run, r, h);
                why[w]++;
                if (w == WHY_NONE)
                    job_bad_dup = 1;
            }
        }
        if (job_dup) {
            dup_jobs++;
            long_dup += is_long;
        }
        if (job_bad_dup) {
            dup_unexplained++;
            if (what == NULL)
                what = "UNEXPLAINED duplicate";
        }
        if (what) {
            /* The first 5 jobs of each kind of broken promise. */
            int slot = 0;
            while (slot < 8 && kinds[slot] && kinds[slot] != what)
                slot++;
            if (slot < 8 && kinds[slot] == NULL)
                kinds[slot] = what;
            if (slot < 8 && kind_shown[slot] < 5) {
                if (shown == 0)
                    printf("  jobs that break a promise (the first 5 of "
                           "each kind):\n");
                show_job(run, &s, &l, from, to, job, what);
                kind_shown[slot]++;
                shown++;
            }
        }
    }
    long long gap_min = 0, gap_med = 0, gap_max = 0;
    if (ngaps > 0) {
        qsort(gaps, (size_t)ngaps, sizeof *gaps, cmp_ll);
        gap_min = gaps[0];
        gap_med = gaps[ngaps / 2];
        gap_max = gaps[ngaps - 1];
    }
    free(gaps);

    /* Delivery counts: a handler is never told a lower count than the
     * truth, the calls on that entry ID that started before it + 1 (a
     * count above it is a delivery that reached no handler: reported,
     * beyond a peer-claim's delivery to its made-up consumer, which counts
     * as one for every call on that entry). l.r is sorted by job, then
     * start time. */
    long undercounted = 0, overcounted = 0, under_shown = 0, over_shown = 0;
    unsigned long long most_over = 0;
    for (size_t a = 0; a < l.n;) {
        size_t b = a;
        while (b < l.n && l.r[b].job == l.r[a].job)
            b++;
        for (size_t k = a; k < b; k++) {
            unsigned long long earlier = 0;
            for (size_t j = a; j < k; j++)
                earlier += strcmp(l.r[j].id, l.r[k].id) == 0;
            if (l.r[k].deliveries < earlier + 1) {
                undercounted++;
                if (under_shown++ < 5)
                    printf("    UNDERCOUNTED call: job %ld, entry %s told "
                           "deliveries %llu after %llu handler calls on it "
                           "(worker %d, incarnation %d)\n",
                           l.r[k].job, l.r[k].id, l.r[k].deliveries, earlier,
                           l.r[k].worker, l.r[k].inc);
            } else if (l.r[k].deliveries >
                       earlier + 1 +
                           (unsigned long long)ghost_deliveries(run,
                                                                l.r[k].id)) {
                overcounted++;
                if (over_shown++ < 5)
                    printf("    overcounted call: job %ld, entry %s told "
                           "deliveries %llu after %llu handler calls on it "
                           "(worker %d, incarnation %d)\n",
                           l.r[k].job, l.r[k].id, l.r[k].deliveries, earlier,
                           l.r[k].worker, l.r[k].inc);
                if (l.r[k].deliveries - earlier - 1 > most_over)
                    most_over = l.r[k].deliveries - earlier - 1;
            }
        }
        a = b;
    }

    /* Unseen dead letters: a dead letter is seen when a handler gave up
     * on its entry (a D call on that entry ID) or its entry was handed to
     * handlers max_deliveries times (calls on that entry ID, killed ones
     * included). Anything else reached the dead letters without a
     * handler's say. */
    long unseen_shown = 0, bad_shown = 0;
    for (long d = 0; d < s.ndl; d++) {
        const dead_letter *x = &s.dl[d];
        size_t lo = 0, hi = l.n;
        while (lo < hi) { /* the first call of the job: l.r is sorted */
            size_t mid = lo + (hi - lo) / 2;
            if (l.r[mid].job < x->job)
                lo = mid + 1;
            else
                hi = mid;
        }
        long calls = 0, gave_up = 0;
        for (size_t k = lo; k < l.n && l.r[k].job == x->job; k++)
            if (strcmp(l.r[k].id, x->origin) == 0) {
                calls++;
                gave_up += l.r[k].verdict == 'D';
            }
        calls += ghost_deliveries(run, x->origin);
        if (gave_up == 0 && calls < run->max_deliveries) {
            unseen++;
            if (unseen_shown++ < 5)
                printf("    UNSEEN dead letter: job %ld (%s), entry %s: %ld "
                       "handler calls on it, none gave up (max_deliveries "
                       "%d)\n",
                       x->job,
                       run->plan[x->job].poison ? "poison"
                       : run->plan[x->job].dead ? "dead"
                                                : "healthy",
                       x->origin, calls, run->max_deliveries);
        }
        if (!x->fields_ok && bad_shown++ < 5)
            printf("    dead letter of job %ld (entry %s) does NOT hold every "
                   "field of its entry (%u wide fields, blob %u bytes)\n",
                   x->job, x->origin, (unsigned)run->plan[x->job].wide,
                   (unsigned)run->plan[x->job].big);
    }

    int misconf_bad = 0;
    for (int k = 0; k < run->nfaults; k++)
        if (run->faults[k].kind == FAULT_MISCONF && run->faults[k].began_ms &&
            run->faults[k].outcome != 1)
            misconf_bad++;

    violations +=
        (lost > 0) + (missing > 0) + (poison_acked > 0) + (dead_dups > 0) +
        (dead_healthy > 0) + (unseen > 0 && !run->tolerate_unseen) +
        (undercounted > 0 && !run->counts_bounded) +
        (s.fields_bad > 0 && !run->tolerate_fields) + (dup_unexplained > 0) +
        (intruders_bad > 0) + (early > 0) + (misconf_bad > 0) +
        (l.bad_lines > 0) + (run->workers_died > 0 && !run->tolerate_exits) +
        (run->producer_failed != 0) + (!run->drained) + (!server_ok) +
        (pending != 0) + (behind != 0) + (dedup_twice > 0);
    int counts[FAULT_KINDS] = {0};
    for (int k = 0; k < run->nfaults; k++)
        if (run->faults[k].began_ms)
            counts[run->faults[k].kind]++;

    printf("\nchaos verdict (seed %llu): %s\n", (unsigned long long)run->seed,
           violations ? "FAIL" : "PASS");
    printf("  produced            %ld jobs (%ld poison, %ld healthy ones ask "
           "1-2 retries, %ld long handlers >= claim idle / 4); %ld stream "
           "entries, %ld jobs in the stream twice (re-sent after an unknown "
           "outcome)\n",
           N, poison, retry_jobs, long_jobs, s.stream_entries, twice_in_stream);
    printf(
        "  idempotency keys    %ld jobs with a key in the stream twice (must "
        "be 0)\n",
        dedup_twice);
    printf("  handled             %ld jobs acknowledged by a handler (%ld "
           "handler calls, retries included; %ld never returned: killed "
           "mid-way)\n",
           handled, handler_calls, unfinished);
    printf("  dead-lettered       %ld jobs: %ld poison of %ld, %ld HEALTHY "
           "(must be 0); %ld dead letters, %ld for an entry already "
           "dead-lettered\n",
           dead_jobs, dead_poison, poison, dead_healthy, s.dead_letters,
           dead_dups);
    printf("  dead jobs           %ld (their handler answers EMQ_DEAD), %ld "
           "dead-lettered; "
           "%ld UNSEEN dead letters (no handler gave up on the entry and it "
           "was not handed out max_deliveries times; must be 0); %ld dead "
           "letters missing or changing a field of their entry (must be "
           "0)%s%s\n",
           dead_planned, dead_given_up, unseen, s.fields_bad,
           run->tolerate_unseen ? "; unseen ones tolerated" : "",
           run->tolerate_fields ? "; lost fields tolerated" : "");
    printf("  delivery counts     %ld handler calls told a count BELOW the "
           "calls before them + 1 (must be 0%s); %ld told more (a delivery "
           "that reached no handler, by up to %llu)\n",
           undercounted,
           run->counts_bounded ? "; reported only (--sentinel, or "
                                 "--tolerate undercounted)"
                               : "",
           overcounted, most_over);
    printf("  retries             %ld intended re-deliveries after EMQ_RETRY "
           "(not duplicates); gap from the retry to the next call: min %lld, "
           "median %lld, max %lld ms; %ld sooner than the backoff%s\n",
           intended, gap_min, gap_med, gap_max, early,
           run->set.backoff_in_force ? ""
                                     : " (not checked: backoff not in force)");
    printf("  duplicates          %ld jobs handled more than once (%ld of "
           "them long), %ld extra calls:",
           dup_jobs, long_dup, dup_calls);
    for (int w = WHY_READDED; w < WHY_KINDS; w++)
        printf(" %ld %s,", why[w], why_name[w]);
    printf(" %ld UNEXPLAINED (in %ld jobs)\n", why[WHY_NONE], dup_unexplained);
    printf("  intruders           %d started (%d in their own PID namespace; "
           "%d skipped: target not settled): %d refused, %d still waiting "
           "when stopped, %d let in by a write outage longer than the lease "
           "with the target fenced, %d VIOLATIONS; %ld handler calls while "
           "the target lived, not fenced (must be 0)\n",
           intruders, intruders_pidns, intruders_skipped, intruders_refused,
           intruders_waited, intruders_fenced, intruders_bad, intruder_calls);
    if (intruder_report[0])
        printf("%s", intruder_report);
    printf("  crash jobs          %d worker deaths on a job that kills its "
           "process (planned; each a kill above)\n",
           run->crashes);
    printf("  pid namespaces      %d of %d workers in their own\n",
           run->pidns_workers, run->workers);
    printf("  misconf episodes    %d, %d with a setup problem\n",
           counts[FAULT_MISCONF], misconf_bad);
    printf("  lost                %ld (neither handled nor dead-lettered)\n",
           lost);
    printf("  missing             %ld confirmed jobs not in the stream\n",
           missing);
    printf("  poison acknowledged %ld\n", poison_acked);
    printf("  pending at the end  %lld (XPENDING)\n", pending);
    printf("  undelivered at end  %s (last-delivered %s, last-generated "
           "%s)\n",
           behind ? "yes" : "none", last_delivered, last_generated);
    if (pend_detail[0])
        printf("%s", pend_detail);
    printf("  drained in time     %s\n", run->drained ? "yes" : "NO");
    printf("  workers died        %d (exits nobody asked for)%s\n",
           run->workers_died,
           run->workers_died && run->tolerate_exits
               ? "; tolerated (--tolerate-worker-exits)"
               : "");
    printf("  producer            %s\n",
           run->producer_failed ? "GAVE UP" : "every job confirmed");
    printf("  ledger lines        %zu handler calls (%ld unreadable lines, "
           "%ld end lines without a start)\n",
           l.n, l.bad_lines, l.unmatched_ends);
    printf("  faults              ");
    for (int k = 0; k < FAULT_KINDS; k++)
        printf("%s %d%s", chaos_fault_name((fault_kind)k), counts[k],
               k + 1 < FAULT_KINDS ? ", " : "\n");
    printf("  violations          %d\n", violations);
    /* One line for scripts (tests/chaos/long_runs.sh). */
    printf("chaos summary: seed=%llu jobs=%ld verdict=%s lost=%ld "
           "missing=%ld pending=%lld healthy_dead=%ld poison_dead=%ld/%ld "
           "dup_jobs=%ld dup_calls=%ld kill=%ld stop=%ld stop_long=%ld "
           "net=%ld server=%ld readded=%ld unexplained=%ld intended=%ld "
           "early_retries=%ld intruders=%d intruder_bad=%d "
           "intruder_calls=%ld intruder_fenced=%d workers_died=%d "
           "peer=%ld unseen_dead=%ld dead_fields_bad=%ld undercounted=%ld "
           "overcounted=%ld violations=%d\n",
           (unsigned long long)run->seed, N, violations ? "FAIL" : "PASS", lost,
           missing, pending, dead_healthy, dead_poison, poison, dup_jobs,
           dup_calls, why[WHY_KILL], why[WHY_STOP], why[WHY_STOP_LONG],
           why[WHY_NET], why[WHY_SERVER], why[WHY_READDED], why[WHY_NONE],
           intended, early, intruders, intruders_bad, intruder_calls,
           intruders_fenced, run->workers_died, why[WHY_PEER], unseen,
           s.fields_bad, undercounted, overcounted, violations);
    fflush(stdout);
    free(s.in_stream);
    free(s.dead);
    free(s.first_id);
    free(s.origins);
    free(s.dl);
    free(l.r);
    return violations ? 1 : 0;
}
