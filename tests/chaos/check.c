/* check.c: the chaos harness's checker and its view of the server.
 *
 * After the workers have stopped, the checker puts together three sources
 * that do not depend on each other:
 *   - the ledgers: every delivery any worker's handler saw (job, delivery
 *     count, entry ID, worker, time, verdict), written before the handler
 *     answered;
 *   - the server: every entry of the stream (XRANGE, paged), the dead
 *     letters of emq:{chaos}:dead (their emq.id, emq.deliveries and the
 *     job field), XPENDING and XINFO of the group;
 *   - the run: which jobs were poison, which were re-sent by the producer
 *     after an unknown outcome, and the fault windows.
 * Jobs are keyed by their job field, never by entry ID: a job re-sent after
 * a lost XADD reply may be in the stream twice and is still one job.
 *
 * A violation is: a job neither handled (acknowledged by a handler) nor
 * dead-lettered (lost); a job the producer had confirmed that is missing
 * from the stream; a poison job acknowledged; an entry dead-lettered twice;
 * anything pending, or undelivered, at the end; a duplicate that no fault
 * explains; a worker that exited on its own; a producer that gave up; a
 * queue that did not drain in time. The raw commands use the public
 * emq_conn API over the server's unix socket.
 */
#include "chaos.h"

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
        const char *argv[] = {"XRANGE", key, start, "+", "COUNT", "2000",
                              NULL};
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

typedef struct seen {
    long jobs;
    uint8_t *in_stream;    /* entries per job, saturating at 255 */
    char (*first_id)[24];  /* first entry ID of each job */
    uint8_t *dead;         /* dead letters per job */
    long stream_entries, stream_foreign;
    long dead_letters, dead_foreign;
    char (*origins)[24];   /* emq.id of every dead letter */
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
}

static int cmp_origin(const void *a, const void *b) {
    return strcmp(a, b);
}

/* ---- the ledgers --------------------------------------------------------- */

typedef struct rec {
    long job;
    unsigned long long deliveries;
    long long t;
    char id[24];
    int worker;
    char verdict;
} rec;

typedef struct ledgers {
    rec *r;
    size_t n, cap;
    long bad_lines;
} ledgers;

static int read_ledger(ledgers *l, const char *path, long jobs) {
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return 0; /* a worker that never got an entry has none */
    char line[256];
    while (fgets(line, sizeof line, f)) {
        rec x;
        char job[32];
        if (sscanf(line, "%31s %llu %23s %d %lld %c", job, &x.deliveries,
                   x.id, &x.worker, &x.t, &x.verdict) != 6 ||
            (x.verdict != 'A' && x.verdict != 'R')) {
            l->bad_lines++;
            continue;
        }
        char *end;
        x.job = strtol(job, &end, 10);
        if (*end != '\0' || x.job < 0 || x.job >= jobs) {
            l->bad_lines++;
            continue;
        }
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
    }
    fclose(f);
    return 0;
}

static int cmp_rec(const void *a, const void *b) {
    const rec *x = a, *y = b;
    if (x->job != y->job)
        return x->job < y->job ? -1 : 1;
    return (x->t > y->t) - (x->t < y->t);
}

/* 1 when t falls in or shortly after a fault window: long enough after it
 * for everything the fault left pending to be claimed or recovered. */
static int near_fault(const chaos_run *run, long long t) {
    const int64_t before = 1000;
    const int64_t after = CHAOS_CLAIM_MIN_IDLE_MS +
                          2 * CHAOS_CLAIM_INTERVAL_MS +
                          CHAOS_COMMAND_TIMEOUT_MS + CHAOS_BLOCK_MS + 3000;
    for (int i = 0; i < run->nfaults; i++) {
        const fault *f = &run->faults[i];
        if (f->began_ms == 0)
            continue;
        if (t >= f->began_ms - before && t <= f->ended_ms + after)
            return 1;
    }
    return 0;
}

static void show_job(const chaos_run *run, const seen *s, const ledgers *l,
                     size_t from, size_t to, long job) {
    printf("    job %ld (%s): %u entr%s in the stream (first %s), %u dead "
           "letter(s), %zu deliveries in the ledgers\n",
           job, run->poison[job] ? "poison" : "ok", s->in_stream[job],
           s->in_stream[job] == 1 ? "y" : "ies",
           s->in_stream[job] ? s->first_id[job] : "-", s->dead[job],
           to - from);
    for (size_t i = from; i < to && i < from + 8; i++)
        printf("      delivery: entry %s deliveries %llu worker chaos-%d "
               "t=%lld verdict %c\n",
               l->r[i].id, l->r[i].deliveries, l->r[i].worker, l->r[i].t,
               l->r[i].verdict);
}

int chaos_check(const chaos_run *run) {
    long N = run->jobs;
    int violations = 0;
    seen s;
    memset(&s, 0, sizeof s);
    s.jobs = N;
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
        const char *argv[] = {"XPENDING", CHAOS_STREAM, CHAOS_GROUP, "-", "+",
                              "10", NULL};
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

    /* The ledgers. */
    for (int w = 1; w <= run->workers; w++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/chaos-%d.ledger", run->dir, w);
        if (read_ledger(&l, path, N) != 0) {
            printf("checker: out of memory reading %s\n", path);
            violations++;
        }
    }
    qsort(l.r, l.n, sizeof *l.r, cmp_rec);

    /* Duplicate dead letters of one entry. */
    long dead_dups = 0;
    qsort(s.origins, (size_t)s.norigins, sizeof *s.origins, cmp_origin);
    for (long i = 1; i < s.norigins; i++)
        if (strcmp(s.origins[i], s.origins[i - 1]) == 0)
            dead_dups++;

    long poison = 0, handled = 0, handler_calls = (long)l.n, dead_jobs = 0,
         dead_normal = 0, dead_poison = 0, lost = 0, missing = 0,
         poison_acked = 0, twice_in_stream = 0, dup = 0, dup_redelivered = 0,
         dup_readded = 0, dup_near = 0, dup_unexplained = 0;
    int shown = 0;
    size_t i = 0;
    for (long job = 0; job < N; job++) {
        size_t from = i;
        while (i < l.n && l.r[i].job == job)
            i++;
        size_t to = i;
        long acks = 0;
        int redelivered = 0, near = 0, ids_differ = 0;
        const char *first_id = NULL;
        for (size_t k = from; k < to; k++) {
            if (l.r[k].verdict != 'A')
                continue;
            acks++;
            if (first_id == NULL)
                first_id = l.r[k].id;
            else if (strcmp(first_id, l.r[k].id) != 0)
                ids_differ = 1;
            /* The pair includes a redelivery: the first handling was not
             * acknowledged in time (killed, stopped, cut off) or its
             * acknowledgement was lost. The redelivery may even come
             * first, when a stopped worker resumes with a batch its peers
             * have claimed meanwhile. */
            if (l.r[k].deliveries > 1)
                redelivered = 1;
            if (near_fault(run, l.r[k].t))
                near = 1;
        }
        if (run->poison[job])
            poison++;
        if (s.in_stream[job] > 1)
            twice_in_stream++;
        if (acks > 0)
            handled++;
        if (s.dead[job] > 0) {
            dead_jobs++;
            if (run->poison[job])
                dead_poison++;
            else
                dead_normal++;
        }
        int bad = 0;
        if (s.in_stream[job] == 0) {
            missing++;
            bad = 1;
        }
        if (run->poison[job] && acks > 0) {
            poison_acked++;
            bad = 1;
        }
        if (acks == 0 && s.dead[job] == 0) {
            lost++;
            bad = 1;
        }
        if (acks > 1) {
            dup++;
            if (redelivered)
                dup_redelivered++;
            else if (ids_differ && run->resent[job])
                dup_readded++;
            else if (near)
                dup_near++;
            else {
                dup_unexplained++;
                bad = 1;
            }
        }
        if (bad && shown < 10) {
            if (shown == 0)
                printf("  jobs that break a promise (first 10):\n");
            show_job(run, &s, &l, from, to, job);
            shown++;
        }
    }

    violations += (lost > 0) + (missing > 0) + (poison_acked > 0) +
                  (dead_dups > 0) + (dup_unexplained > 0) +
                  (run->workers_died > 0 && !run->tolerate_exits) +
                  (run->producer_failed != 0) +
                  (!run->drained) + (!server_ok) + (pending != 0) +
                  (behind != 0);
    int counts[FAULT_KINDS] = {0};
    for (int k = 0; k < run->nfaults; k++)
        if (run->faults[k].began_ms)
            counts[run->faults[k].kind]++;

    printf("\nchaos verdict (seed %llu): %s\n",
           (unsigned long long)run->seed, violations ? "FAIL" : "PASS");
    printf("  produced            %ld jobs (%ld poison); %ld stream entries, "
           "%ld jobs in the stream twice (re-sent after an unknown "
           "outcome)\n",
           N, poison, s.stream_entries, twice_in_stream);
    printf("  handled             %ld jobs acknowledged by a handler (%ld "
           "handler calls, retries included)\n",
           handled, handler_calls);
    printf("  dead-lettered       %ld jobs (%ld poison of %ld, %ld normal "
           "jobs past max_deliveries %d); %ld dead letters, %ld for an "
           "entry already dead-lettered\n",
           dead_jobs, dead_poison, poison, dead_normal, run->max_deliveries,
           s.dead_letters, dead_dups);
    printf("  duplicates          %ld jobs handled more than once: %ld "
           "redelivered (deliveries > 1), %ld re-added by the producer, "
           "%ld near a fault window, %ld unexplained\n",
           dup, dup_redelivered, dup_readded, dup_near, dup_unexplained);
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
    printf("  ledger lines        %zu (%ld unreadable)\n", l.n, l.bad_lines);
    printf("  faults              ");
    for (int k = 0; k < FAULT_KINDS; k++)
        printf("%s %d%s", chaos_fault_name((fault_kind)k), counts[k],
               k + 1 < FAULT_KINDS ? ", " : "\n");
    printf("  violations          %d\n", violations);
    fflush(stdout);
    free(s.in_stream);
    free(s.dead);
    free(s.first_id);
    free(s.origins);
    free(l.r);
    return violations ? 1 : 0;
}
