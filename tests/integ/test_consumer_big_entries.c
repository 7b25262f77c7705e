/* SPDX-License-Identifier: BSD-3-Clause */
/* test_consumer_big_entries.c: reads that fit resp.max_reply_bytes,
 * against a real redis-server.
 *
 * Entries of 300 kB with resp.max_reply_bytes at 1 MB (a scaled-down 40
 * entries of 1 MB with a 10 MB limit, fast under valgrind): a read of
 * 100, a recovery page or a claim of them all makes a reply far over the
 * limit, which breaks the connection. Sending the same request again
 * would fail for ever and deliver nothing; so each reply over
 * the limit halves what the consumer asks for, down to 1, and says so
 * once in the log; a take whose reply was lost raised counts that reached
 * no handler, so the smaller ones after it raise nothing more (at most 2
 * deliveries where the failed takes made 5). Every entry is handled once:
 * in run mode, in poll
 * mode, in self-recovery (pending to this name from an earlier run) and
 * through a claim (pending to a dead peer). One entry larger than the
 * limit by itself goes to the dead letters with every field intact and
 * the reason "entry larger than resp.max_reply_bytes", while the entries
 * around it are handled and the consumer keeps running. On a real
 * 3-master cluster too, where the route (not a single connection) has to
 * say that the reply was too large.
 */
#include "cluster/cluster.h" /* emq__cluster_key_slot */
#include "harness/cluster.h"
#include "integ/poll_helpers.h"

#define BQ "emq:{jobs}"
#define BQ_DEAD "emq:{jobs}:dead"
#define LIMIT "1000000"
#define SMALL_BYTES ((size_t)100 * 1000)
#define ENTRY_BYTES ((size_t)300 * 1000)
#define HUGE_BYTES ((size_t)1500 * 1000)
#define WAIT_MS 60000

/* The log lines this feature writes at warning level. */
#define HALVED "ask for at most"
#define ALONE "alone is larger than resp.max_reply_bytes"

/* A blob of len bytes whose content depends on seed (so a copy can be
 * checked byte for byte), NUL-terminated. Caller frees. */
static char *blob_of(unsigned seed, size_t len) {
    char *b = malloc(len + 1);
    ASSERT(b != NULL);
    for (size_t i = 0; i < len; i++)
        b[i] = (char)('a' + (i * 7 + seed) % 26);
    b[len] = '\0';
    return b;
}

/* Adds entries {"n": "<prefix><i>", "blob": <bytes>} for i in
 * [from, from + n) over the admin connection. */
static void add_big(emq_conn_t *adm, const char *prefix, int from, int n,
                    size_t bytes) {
    for (int i = from; i < from + n; i++) {
        char value[32];
        snprintf(value, sizeof value, "%s%d", prefix, i);
        char *blob = blob_of((unsigned)i, bytes);
        const char *argv[] = {"XADD", BQ, "*", "n", value, "blob", blob};
        emq_reply_free(cmdv_ok(adm, 7, argv));
        free(blob);
    }
}

/* Makes entries of the stream pending to consumer `who` without sending
 * them anywhere (a script reads them and returns nothing). */
static void read_into_pel(emq_conn_t *adm, const char *who) {
    CMD_NOERR(adm, "EVAL",
              "redis.call('XREADGROUP', 'GROUP', 'g', ARGV[1], 'COUNT',"
              " '1000', 'STREAMS', KEYS[1], '>') return 1",
              "1", BQ, who);
}

/* Lines of level `level` in the capture that contain phrase. */
static int log_lines(logcap *l, int level, const char *phrase) {
    char head[8];
    snprintf(head, sizeof head, "%d ", level);
    int n = 0;
    pthread_mutex_lock(&l->lock);
    for (const char *line = l->text; line && *line;) {
        const char *nl = strchr(line, '\n');
        size_t len = nl ? (size_t)(nl - line) : strlen(line);
        char buf[1024];
        snprintf(buf, sizeof buf, "%.*s", (int)len, line);
        if (strncmp(buf, head, strlen(head)) == 0 && strstr(buf, phrase))
            n++;
        line = nl ? nl + 1 : NULL;
    }
    pthread_mutex_unlock(&l->lock);
    return n;
}

/* fault_conf (consumer "w" of jobs/g, block 100 ms, lease 5 s, quick
 * reconnects) with the 1 MB reply limit and a log capture. */
static emq_conf_t *big_conf(const emq_srv *s, logcap *log) {
    emq_conf_t *conf = fault_conf(emq_srv_url(s));
    conf_set(conf, "resp.max_reply_bytes", LIMIT);
    emq_conf_set_log(conf, logcap_fn, log);
    return conf;
}

/* A server with group g on the queue at $ and an admin connection. */
static emq_srv *big_server(emq_conn_t **adm) {
    emq_srv *s = emq_srv_start(NULL);
    *adm = admin_connect(s);
    CMD_NOERR(*adm, "XGROUP", "CREATE", BQ, "g", "$", "MKSTREAM");
    return s;
}

/* Every value <prefix>0..n-1 was recorded exactly once. */
static void each_once(recorder *r, const char *prefix, int n) {
    for (int i = 0; i < n; i++) {
        char v[32];
        snprintf(v, sizeof v, "%s%d", prefix, i);
        if (times_seen(r, v) != 1)
            FAIL("%s was handled %d times, not once", v, times_seen(r, v));
    }
}

/* A take whose reply was too large raised counts that reached no
 * handler: the smaller take after it raises nothing more. At most one
 * raise for a first session's own pending entry, or for a claim. */
static void at_most_two_deliveries(recorder *r) {
    for (size_t i = 0; i < recorded(r); i++)
        if (r->deliveries[i] > 2)
            FAIL("%s came with %llu deliveries, more than 2", r->values[i],
                 (unsigned long long)r->deliveries[i]);
}

/* Runs consumer conf in run mode until n entries were handled and the
 * group holds nothing pending; checks each was handled once, nothing
 * went to the dead letters, and the halving was logged once. */
static void run_all_once(emq_srv *s, emq_conn_t *adm, emq_conf_t *conf,
                         logcap *log, int n) {
    static slow h;
    slow_init(&h);
    bg b;
    bg_start(&b, conf, slow_handle, &h);
    WAIT_UNTIL(recorded(&h.r) >= (size_t)n && pending_total(adm, BQ, "g") == 0,
               WAIT_MS, "every big entry to be handled and acknowledged");
    ASSERT_OK(bg_stop(&b, 10000), &b.err);
    emq_consumer_destroy(b.c);
    ASSERT_EQ_SIZE(recorded(&h.r), (size_t)n);
    each_once(&h.r, "v", n);
    at_most_two_deliveries(&h.r);
    ASSERT_EQ_INT(CMD_INT(adm, "XLEN", BQ_DEAD), 0);
    ASSERT_EQ_INT(log_lines(log, EMQ_LOG_WARNING, HALVED), 1);
    ASSERT_EQ_INT(log_lines(log, EMQ_LOG_WARNING, ALONE), 0);
    (void)s;
}

/* Polls consumer conf with two workers until n entries were settled;
 * the same checks as run_all_once. */
static void poll_all_once(emq_conn_t *adm, emq_conf_t *conf, logcap *log,
                          int n) {
    emq_consumer_t *c;
    emq_error err;
    ASSERT_OK(emq_consumer_new(conf, NULL, NULL, &c, &err), &err);
    emq_conf_destroy(conf);
    static work_pool p;
    wp_start(&p, c, 2, 0);
    WAIT_UNTIL(recorded(&p.r) >= (size_t)n && pending_total(adm, BQ, "g") == 0,
               WAIT_MS, "every big entry to be polled and acknowledged");
    wp_stop(&p);
    ASSERT_OK(emq_consumer_close(c, 5000, &err), &err);
    emq_consumer_destroy(c);
    ASSERT_EQ_INT(atomic_load(&p.settle_errors), 0);
    ASSERT_EQ_SIZE(recorded(&p.r), (size_t)n);
    each_once(&p.r, "v", n);
    at_most_two_deliveries(&p.r);
    ASSERT_EQ_INT(CMD_INT(adm, "XLEN", BQ_DEAD), 0);
    ASSERT_EQ_INT(log_lines(log, EMQ_LOG_WARNING, HALVED), 1);
    ASSERT_EQ_INT(log_lines(log, EMQ_LOG_WARNING, ALONE), 0);
}

TEST_TIMEOUT(big_entries_fit_in_run_mode, 180) {
    emq_conn_t *adm;
    emq_srv *s = big_server(&adm);
    add_big(adm, "v", 0, 20, ENTRY_BYTES);
    static logcap log;
    logcap_init(&log);
    run_all_once(s, adm, big_conf(s, &log), &log, 20);
    emq_conn_destroy(adm);
    emq_srv_stop(s);
}

TEST_TIMEOUT(big_entries_fit_in_poll_mode, 180) {
    emq_conn_t *adm;
    emq_srv *s = big_server(&adm);
    add_big(adm, "v", 0, 20, ENTRY_BYTES);
    static logcap log;
    logcap_init(&log);
    poll_all_once(adm, big_conf(s, &log), &log, 20);
    emq_conn_destroy(adm);
    emq_srv_stop(s);
}

/* Entries pending to this very name from an earlier run: the history
 * pages of recover self halve too. */
TEST_TIMEOUT(big_entries_fit_in_self_recovery, 180) {
    emq_conn_t *adm;
    emq_srv *s = big_server(&adm);
    add_big(adm, "v", 0, 20, ENTRY_BYTES);
    read_into_pel(adm, "w");
    ASSERT_EQ_INT(pending_of(adm, BQ, "g", "w"), 20);
    static logcap log;
    logcap_init(&log);
    run_all_once(s, adm, big_conf(s, &log), &log, 20);
    emq_conn_destroy(adm);
    emq_srv_stop(s);
}

/* Deletes the lease key of consumer w every few ms until told to stop:
 * each session of w then finds its lease gone (not continued), the case
 * in which a take raises the counts of its own pending entries. */
typedef struct lease_deleter {
    const emq_srv *s;
    atomic_int quit;
    pthread_t t;
} lease_deleter;

static void *delete_lease(void *arg) {
    lease_deleter *d = arg;
    while (!atomic_load(&d->quit)) {
        char out[64];
        emq_srv_cmd(d->s, out, sizeof out, "DEL", "emq:{jobs}:lease:g:w", NULL);
        usleep(2000);
    }
    return NULL;
}

/* The same with the lease gone at every session (as eviction or a
 * MISCONF episode can make it): each take whose reply is too large
 * raises the counts, and the smaller take after it must not raise them
 * again (it did: 5 deliveries, then the dead letters). */
TEST_TIMEOUT(big_entries_fit_in_self_recovery_without_the_lease, 180) {
    emq_conn_t *adm;
    emq_srv *s = big_server(&adm);
    add_big(adm, "v", 0, 20, ENTRY_BYTES);
    read_into_pel(adm, "w");
    static lease_deleter d;
    d.s = s;
    atomic_store(&d.quit, 0);
    ASSERT(pthread_create(&d.t, NULL, delete_lease, &d) == 0);
    static logcap log;
    logcap_init(&log);
    emq_conf_t *conf = big_conf(s, &log);
    conf_set(conf, "max_deliveries", "4");
    static slow h;
    slow_init(&h);
    bg b;
    bg_start(&b, conf, slow_handle, &h);
    WAIT_UNTIL(recorded(&h.r) >= 20 || CMD_INT(adm, "XLEN", BQ_DEAD) > 0,
               WAIT_MS, "the big entries to be handled");
    atomic_store(&d.quit, 1);
    pthread_join(d.t, NULL);
    WAIT_UNTIL(pending_total(adm, BQ, "g") == 0, WAIT_MS,
               "every big entry to be acknowledged");
    ASSERT_OK(bg_stop(&b, 10000), &b.err);
    emq_consumer_destroy(b.c);
    ASSERT_EQ_INT(CMD_INT(adm, "XLEN", BQ_DEAD), 0);
    each_once(&h.r, "v", 20);
    at_most_two_deliveries(&h.r);
    emq_conn_destroy(adm);
    emq_srv_stop(s);
}

/* Entries pending to a peer that died: the claim beat's pages halve, in
 * poll mode. */
TEST_TIMEOUT(big_entries_fit_in_claims, 180) {
    emq_conn_t *adm;
    emq_srv *s = big_server(&adm);
    add_big(adm, "v", 0, 20, ENTRY_BYTES);
    read_into_pel(adm, "dead-peer");
    ASSERT_EQ_INT(pending_of(adm, BQ, "g", "dead-peer"), 20);
    static logcap log;
    logcap_init(&log);
    emq_conf_t *conf = big_conf(s, &log);
    conf_set(conf, "claim.min_idle_ms", "300");
    conf_set(conf, "claim.interval_ms", "100");
    poll_all_once(adm, conf, &log, 20);
    ASSERT_EQ_INT(pending_of(adm, BQ, "g", "dead-peer"), 0);
    emq_conn_destroy(adm);
    emq_srv_stop(s);
}

/* The same on a Redis Cluster: the route tells a reply over the limit
 * from other failures of its node's connection. */
TEST_TIMEOUT(big_entries_fit_on_a_cluster, 180) {
    emq_cl *cl = emq_cl_start(3, 0);
    int owner = emq_cl_owner(cl, 0, emq__cluster_key_slot(BQ, strlen(BQ)));
    ASSERT(owner >= 0);
    emq_srv *s = emq_cl_node(cl, owner);
    emq_conn_t *adm = admin_connect(s);
    CMD_NOERR(adm, "XGROUP", "CREATE", BQ, "g", "$", "MKSTREAM");
    add_big(adm, "v", 0, 20, ENTRY_BYTES);
    static logcap log;
    logcap_init(&log);
    /* Given another node: the route learns the slot map first. */
    emq_conf_t *conf =
        big_conf(emq_cl_node(cl, emq_cl_other_master(cl, owner)), &log);
    run_all_once(s, adm, conf, &log, 20);
    emq_conn_destroy(adm);
    emq_cl_stop(cl);
}

/* The one dead letter: origin, the reason, then the entry's own fields,
 * "n" and a blob equal to the original byte for byte. */
static void check_oversize_dead_letter(emq_conn_t *adm, const char *id) {
    ASSERT_EQ_INT(CMD_INT(adm, "XLEN", BQ_DEAD), 1);
    emq_reply *dead = CMD(adm, "XRANGE", BQ_DEAD, "-", "+");
    const emq_reply *f = emq_reply_at(emq_reply_at(dead, 0), 1);
    ASSERT_EQ_SIZE(emq_reply_len(f), 14);
    char buf[300];
    ASSERT(field_of(f, "emq.id", buf, sizeof buf));
    ASSERT_EQ_STR(buf, id);
    ASSERT(field_of(f, "emq.consumer", buf, sizeof buf));
    ASSERT_EQ_STR(buf, "w");
    ASSERT(field_of(f, "emq.reason", buf, sizeof buf));
    ASSERT_EQ_STR(buf, "entry larger than resp.max_reply_bytes");
    ASSERT(field_of(f, "n", buf, sizeof buf));
    ASSERT_EQ_STR(buf, "huge");
    ASSERT_REPLY_TEXT(emq_reply_at(f, 12), EMQ_REPLY_STRING, "blob");
    size_t len = 0;
    const char *blob = emq_reply_str(emq_reply_at(f, 13), &len);
    char *want = blob_of(1000, HUGE_BYTES);
    ASSERT_EQ_SIZE(len, HUGE_BYTES);
    ASSERT(memcmp(blob, want, len) == 0);
    free(want);
    emq_reply_free(dead);
}

/* Ten entries of 100 kB around one of 1.5 MB (larger than the 1 MB limit
 * by itself); the huge one is added with seed 1000. Returns its ID in
 * id. */
static void add_around_huge(emq_conn_t *adm, char *id, size_t size) {
    add_big(adm, "v", 0, 5, SMALL_BYTES);
    char *blob = blob_of(1000, HUGE_BYTES);
    const char *argv[] = {"XADD", BQ, "*", "n", "huge", "blob", blob};
    emq_reply *r = cmdv_ok(adm, 7, argv);
    reply_text(r, id, size);
    emq_reply_free(r);
    free(blob);
    add_big(adm, "v", 5, 5, SMALL_BYTES);
}

TEST_TIMEOUT(entry_larger_than_limit_is_dead_lettered_run_mode, 180) {
    emq_conn_t *adm;
    emq_srv *s = big_server(&adm);
    char huge_id[EMQ_ID_MAX];
    add_around_huge(adm, huge_id, sizeof huge_id);
    static logcap log;
    logcap_init(&log);
    static slow h;
    slow_init(&h);
    bg b;
    bg_start(&b, big_conf(s, &log), slow_handle, &h);
    WAIT_UNTIL(recorded(&h.r) >= 10 && pending_total(adm, BQ, "g") == 0 &&
                   CMD_INT(adm, "XLEN", BQ_DEAD) == 1,
               WAIT_MS, "the ten entries handled and the huge one dead");
    /* It keeps running: entries added now are handled too. */
    add_big(adm, "v", 10, 3, SMALL_BYTES);
    WAIT_UNTIL(recorded(&h.r) >= 13 && pending_total(adm, BQ, "g") == 0,
               WAIT_MS, "the entries added after the dead letter");
    ASSERT(!atomic_load(&b.done));
    ASSERT_OK(bg_stop(&b, 10000), &b.err);
    emq_consumer_destroy(b.c);
    ASSERT_EQ_SIZE(recorded(&h.r), 13);
    each_once(&h.r, "v", 13);
    ASSERT_EQ_INT(times_seen(&h.r, "huge"), 0);
    check_oversize_dead_letter(adm, huge_id);
    ASSERT_EQ_INT(log_lines(&log, EMQ_LOG_WARNING, HALVED), 1);
    ASSERT_EQ_INT(log_lines(&log, EMQ_LOG_WARNING, ALONE), 1);
    emq_conn_destroy(adm);
    emq_srv_stop(s);
}

TEST_TIMEOUT(entry_larger_than_limit_is_dead_lettered_poll_mode, 180) {
    emq_conn_t *adm;
    emq_srv *s = big_server(&adm);
    char huge_id[EMQ_ID_MAX];
    add_around_huge(adm, huge_id, sizeof huge_id);
    static logcap log;
    logcap_init(&log);
    emq_consumer_t *c;
    emq_error err;
    emq_conf_t *conf = big_conf(s, &log);
    ASSERT_OK(emq_consumer_new(conf, NULL, NULL, &c, &err), &err);
    emq_conf_destroy(conf);
    static work_pool p;
    wp_start(&p, c, 2, 0);
    WAIT_UNTIL(recorded(&p.r) >= 10 && pending_total(adm, BQ, "g") == 0 &&
                   CMD_INT(adm, "XLEN", BQ_DEAD) == 1,
               WAIT_MS, "the ten entries polled and the huge one dead");
    add_big(adm, "v", 10, 3, SMALL_BYTES);
    WAIT_UNTIL(recorded(&p.r) >= 13 && pending_total(adm, BQ, "g") == 0,
               WAIT_MS, "the entries added after the dead letter");
    ASSERT_EQ_INT(p.poll_status, EMQ_OK);
    wp_stop(&p);
    ASSERT_OK(emq_consumer_close(c, 5000, &err), &err);
    emq_consumer_destroy(c);
    ASSERT_EQ_INT(atomic_load(&p.settle_errors), 0);
    ASSERT_EQ_SIZE(recorded(&p.r), 13);
    each_once(&p.r, "v", 13);
    ASSERT_EQ_INT(times_seen(&p.r, "huge"), 0);
    check_oversize_dead_letter(adm, huge_id);
    ASSERT_EQ_INT(log_lines(&log, EMQ_LOG_WARNING, HALVED), 1);
    ASSERT_EQ_INT(log_lines(&log, EMQ_LOG_WARNING, ALONE), 1);
    emq_conn_destroy(adm);
    emq_srv_stop(s);
}

/* The huge entry and its neighbours pending to `holder` (this name from
 * an earlier run, or a peer that died): self-recovery or a claim brings
 * them back, and the huge one goes to the dead letters all the same. */
static void huge_pending_to(const char *holder) {
    emq_conn_t *adm;
    emq_srv *s = big_server(&adm);
    char huge_id[EMQ_ID_MAX];
    add_around_huge(adm, huge_id, sizeof huge_id);
    read_into_pel(adm, holder);
    ASSERT_EQ_INT(pending_of(adm, BQ, "g", holder), 11);
    static logcap log;
    logcap_init(&log);
    static slow h;
    slow_init(&h);
    emq_conf_t *conf = big_conf(s, &log);
    conf_set(conf, "claim.min_idle_ms", "300");
    conf_set(conf, "claim.interval_ms", "100");
    bg b;
    bg_start(&b, conf, slow_handle, &h);
    WAIT_UNTIL(recorded(&h.r) >= 10 && pending_total(adm, BQ, "g") == 0 &&
                   CMD_INT(adm, "XLEN", BQ_DEAD) == 1,
               WAIT_MS, "the ten entries handled and the huge one dead");
    ASSERT(!atomic_load(&b.done));
    ASSERT_OK(bg_stop(&b, 10000), &b.err);
    emq_consumer_destroy(b.c);
    ASSERT_EQ_SIZE(recorded(&h.r), 10);
    each_once(&h.r, "v", 10);
    check_oversize_dead_letter(adm, huge_id);
    ASSERT_EQ_INT(log_lines(&log, EMQ_LOG_WARNING, HALVED), 1);
    ASSERT_EQ_INT(log_lines(&log, EMQ_LOG_WARNING, ALONE), 1);
    emq_conn_destroy(adm);
    emq_srv_stop(s);
}

TEST_TIMEOUT(entry_larger_than_limit_is_dead_lettered_in_self_recovery, 180) {
    huge_pending_to("w");
}

TEST_TIMEOUT(entry_larger_than_limit_is_dead_lettered_from_a_claim, 180) {
    huge_pending_to("dead-peer");
}
