/* SPDX-License-Identifier: BSD-3-Clause */
/* test_delayed.c: delayed entries (emq_produce_opts delay_ms, due_ms)
 * against a real redis-server.
 *
 * A delayed entry is in no stream and handed to no consumer before it is
 * due, then to one consumer, with its fields byte-exact; its ID until
 * then is its handle. Single, batch (delayed and immediate entries mixed),
 * async and topic calls all delay. Bad options are refused before
 * anything is sent. Waiting entries survive a server restart (AOF), and
 * a consumer that is gone leaves them to the next one. With no consumer
 * running they wait.
 */
#include "integ/admin_inspect_helpers.h"
#include "integ/cli_helpers.h"
#include "integ/inspect_conn_helpers.h"
#include "integ/consumer_helpers.h"

#include <stdatomic.h>
#include <stdlib.h>

/* The number ZCARD key answers. */
static long long zcard(const emq_srv *s, const char *key) {
    char out[64];
    ASSERT(emq_srv_cmd(s, out, sizeof out, "ZCARD", key, NULL) == ':');
    return atoll(out);
}

/* The number XLEN key answers. */
static long long xlen(const emq_srv *s, const char *key) {
    char out[64];
    ASSERT(emq_srv_cmd(s, out, sizeof out, "XLEN", key, NULL) == ':');
    return atoll(out);
}

/* The server's clock, ms. */
static int64_t server_ms(const emq_srv *s) {
    emq_conn_t *conn = connect_url(emq_srv_url(s));
    emq_reply *r = CMD(conn, "TIME");
    ASSERT_EQ_SIZE(emq_reply_len(r), 2);
    size_t n;
    char secs[32], usecs[32];
    const char *t = emq_reply_str(emq_reply_at(r, 0), &n);
    snprintf(secs, sizeof secs, "%.*s", (int)n, t);
    t = emq_reply_str(emq_reply_at(r, 1), &n);
    snprintf(usecs, sizeof usecs, "%.*s", (int)n, t);
    emq_reply_free(r);
    emq_conn_destroy(conn);
    return atoll(secs) * 1000 + atoll(usecs) / 1000;
}

/* Checks id has a delayed entry's handle's shape. */
static void assert_handle(const char *id) {
    ASSERT(strncmp(id, "delayed-", 8) == 0);
    ASSERT(strlen(id) >= 20);
    for (const char *p = id + 8; *p; p++)
        ASSERT(*p >= '0' && *p <= '9');
}

TEST(delayed_entry_waits_then_goes_to_one_consumer_byte_exact) {
    emq_srv *s = emq_srv_start(NULL);
    emq_producer_t *p = producer_for(s, "dly");
    static const char value[] = "v\0\r\n\xff";
    emq_field f[2] = {{"n", 1, "late", 4},
                      {"bin\xff", 4, value, sizeof value - 1}};
    emq_produce_opts o = EMQ_PRODUCE_OPTS_INIT;
    o.delay_ms = emq_test_ms(1500);
    emq_id id;
    emq_error err;
    memset(&err, 0, sizeof err);
    int64_t before = server_ms(s);
    ASSERT_OK(emq_produce_ex(p, f, 2, &o, &id, &err), &err);
    assert_handle(id.str);
    emq_field g = {"n", 1, "now", 3};
    ASSERT_OK(emq_produce(p, &g, 1, NULL, &err), &err);
    ASSERT_EQ_INT(xlen(s, "emq:{dly}"), 1);
    ASSERT_EQ_INT(zcard(s, "emq:{dly}:delayed"), 1);

    emq_conf_t *conf = consumer_conf(s, "dly", "g", "c1", "head");
    recorder rec;
    recorder_init(&rec);
    emq_consumer_t *c = consumer_ok(conf, record, &rec);
    runner_thread t;
    start_consumer(&t, c);
    wait_for(&rec, 1, 10000);
    ASSERT_EQ_STR(rec.values[0], "now");
    wait_for(&rec, 2, 20000);
    int64_t seen = server_ms(s);
    ASSERT(seen - before >= o.delay_ms);
    ASSERT_EQ_STR(rec.values[1], "late");
    ASSERT_EQ_INT(zcard(s, "emq:{dly}:delayed"), 0);
    ASSERT_EQ_INT(xlen(s, "emq:{dly}"), 2);
    /* The moved entry has every field byte-exact, and a stream ID. */
    emq_conn_t *conn = connect_url(emq_srv_url(s));
    emq_reply *r = CMD(conn, "XRANGE", "emq:{dly}", "-", "+");
    const emq_reply *moved = emq_reply_at(emq_reply_at(r, 1), 1);
    ASSERT_EQ_SIZE(emq_reply_len(moved), 4);
    size_t n;
    const char *t1 = emq_reply_str(emq_reply_at(moved, 2), &n);
    ASSERT_EQ_MEM(t1, n, "bin\xff", 4);
    t1 = emq_reply_str(emq_reply_at(moved, 3), &n);
    ASSERT_EQ_MEM(t1, n, value, sizeof value - 1);
    emq_reply_free(r);
    ASSERT_EQ_STR(rec.ids[1], rec.ids[1]); /* a stream ID, not the handle */
    ASSERT(strncmp(rec.ids[1], "delayed-", 8) != 0);
    emq_consumer_stop(c);
    ASSERT_EQ_INT(join_consumer(&t), EMQ_OK);
    /* Read once stopped: the upkeep counts the move when it reads the
     * script's reply, and the reading thread can hand the moved entry out
     * before that. */
    emq_consumer_stats st;
    emq_consumer_stats_get(c, &st);
    ASSERT_EQ_INT(st.delayed_moved, 1);
    ASSERT_EQ_SIZE(rec.n, 2);
    emq_conn_destroy(conn);
    emq_consumer_destroy(c);
    emq_conf_destroy(conf);
    emq_producer_destroy(p);
    emq_srv_stop(s);
}

TEST(delayed_entries_wait_while_no_consumer_runs) {
    emq_srv *s = emq_srv_start(NULL);
    emq_producer_t *p = producer_for(s, "idle");
    emq_field f = {"n", 1, "x", 1};
    emq_produce_opts o = EMQ_PRODUCE_OPTS_INIT;
    o.due_ms = server_ms(s) + 50; /* due almost at once */
    emq_error err;
    ASSERT_OK(emq_produce_ex(p, &f, 1, &o, NULL, &err), &err);
    usleep(300 * 1000);
    ASSERT_EQ_INT(zcard(s, "emq:{idle}:delayed"), 1);
    ASSERT_EQ_INT(xlen(s, "emq:{idle}"), 0);
    emq_producer_destroy(p);
    emq_srv_stop(s);
}

TEST(delayed_bad_options_are_refused_before_anything_is_sent) {
    emq_srv *s = emq_srv_start(NULL);
    emq_producer_t *p = producer_for(s, "bad");
    emq_field f = {"n", 1, "x", 1};
    emq_error err;
    emq_id id;
    emq_produce_opts o = EMQ_PRODUCE_OPTS_INIT;
    o.delay_ms = 10;
    o.due_ms = 10;
    ASSERT_EQ_INT(emq_produce_ex(p, &f, 1, &o, &id, &err), EMQ_EINVAL);
    ASSERT_CONTAINS(err.message, "both set");
    ASSERT_EQ_STR(id.str, "");
    o = (emq_produce_opts)EMQ_PRODUCE_OPTS_INIT;
    o.delay_ms = -1;
    ASSERT_EQ_INT(emq_produce_ex(p, &f, 1, &o, &id, &err), EMQ_EINVAL);
    ASSERT_CONTAINS(err.message, "delay_ms -1 is out of range");
    o = (emq_produce_opts)EMQ_PRODUCE_OPTS_INIT;
    o.version = 0;
    ASSERT_EQ_INT(emq_produce_ex(p, &f, 1, &o, &id, &err), EMQ_EINVAL);
    ASSERT_CONTAINS(err.message, "EMQ_PRODUCE_OPTS_INIT");
    /* A batch: the bad entry is named and nothing is sent. */
    emq_message m[3] = {{&f, 1, NULL}, {&f, 1, "5-1"}, {&f, 1, NULL}};
    emq_produce_opts os[3] = {EMQ_PRODUCE_OPTS_INIT, EMQ_PRODUCE_OPTS_INIT,
                              EMQ_PRODUCE_OPTS_INIT};
    os[1].delay_ms = 1000;
    size_t written = 9;
    ASSERT_EQ_INT(emq_produce_batch_ex(p, m, os, 3, NULL, &written, &err),
                  EMQ_EINVAL);
    ASSERT_CONTAINS(err.message, "entry 1 is delayed and has an explicit ID");
    ASSERT_EQ_SIZE(written, 0);
    os[1].delay_ms = 0;
    os[2].due_ms = -5;
    ASSERT_EQ_INT(emq_produce_batch_ex(p, m, os, 3, NULL, &written, &err),
                  EMQ_EINVAL);
    ASSERT_CONTAINS(err.message, "entry 2: due_ms -5 is out of range");
    emq_produce_opts big = EMQ_PRODUCE_OPTS_INIT;
    big.delay_ms = 1000;
    emq_field *many = calloc(3001, sizeof *many);
    for (int i = 0; i < 3001; i++)
        many[i] = f;
    ASSERT_EQ_INT(emq_produce_ex(p, many, 3001, &big, &id, &err), EMQ_EINVAL);
    ASSERT_CONTAINS(err.message, "more than 3,000 field/value pairs");
    free(many);
    ASSERT_EQ_INT(xlen(s, "emq:{bad}"), 0);
    ASSERT_EQ_INT(zcard(s, "emq:{bad}:delayed"), 0);
    emq_producer_destroy(p);
    emq_srv_stop(s);
}

TEST(delayed_batch_mixes_delayed_and_immediate_entries) {
    emq_srv *s = emq_srv_start(NULL);
    emq_producer_t *p = producer_for(s, "mix");
    enum { N = 200 };
    emq_message m[N];
    emq_produce_opts os[N];
    emq_field f[N];
    char vals[N][16];
    emq_id ids[N];
    for (int i = 0; i < N; i++) {
        int len = snprintf(vals[i], sizeof vals[i], "%d", i);
        f[i] = (emq_field){"n", 1, vals[i], (size_t)len};
        m[i] = (emq_message){&f[i], 1, NULL};
        os[i] = (emq_produce_opts)EMQ_PRODUCE_OPTS_INIT;
        if (i % 2)
            os[i].delay_ms = emq_test_ms(1000);
    }
    size_t written = 0;
    emq_error err;
    ASSERT_OK(emq_produce_batch_ex(p, m, os, N, ids, &written, &err), &err);
    ASSERT_EQ_SIZE(written, N);
    for (int i = 0; i < N; i++)
        if (i % 2)
            assert_handle(ids[i].str);
        else
            ASSERT(strncmp(ids[i].str, "delayed-", 8) != 0);
    ASSERT_EQ_INT(xlen(s, "emq:{mix}"), N / 2);
    ASSERT_EQ_INT(zcard(s, "emq:{mix}:delayed"), N / 2);

    emq_conf_t *conf = consumer_conf(s, "mix", "g", "c1", "head");
    recorder rec;
    recorder_init(&rec);
    emq_consumer_t *c = consumer_ok(conf, record, &rec);
    runner_thread t;
    start_consumer(&t, c);
    wait_for(&rec, N, 30000);
    /* The delayed half came last, in the order it was produced. */
    for (int i = 0; i < N / 2; i++) {
        char want[16];
        snprintf(want, sizeof want, "%d", 2 * i + 1);
        ASSERT_EQ_STR(rec.values[N / 2 + i], want);
    }
    emq_consumer_stop(c);
    ASSERT_EQ_INT(join_consumer(&t), EMQ_OK);
    ASSERT_EQ_SIZE(rec.n, N);
    emq_consumer_destroy(c);
    emq_conf_destroy(conf);
    emq_producer_destroy(p);
    emq_srv_stop(s);
}

TEST(delayed_cancel_removes_waiting_and_unread_entries_only) {
    emq_srv *s = emq_srv_start(NULL);
    emq_producer_t *p = producer_for(s, "cx");
    emq_field f = {"n", 1, "x", 1};
    emq_produce_opts o = EMQ_PRODUCE_OPTS_INIT;
    o.delay_ms = 3600000;
    emq_id waiting, kept, read, unread;
    emq_error err;
    ASSERT_OK(emq_produce_ex(p, &f, 1, &o, &waiting, &err), &err);
    ASSERT_OK(emq_produce_ex(p, &f, 1, &o, &kept, &err), &err);
    ASSERT_OK(emq_produce(p, &f, 1, &read, &err), &err);
    /* A group is handed the first stream entry; the second stays unread. */
    char out[256];
    ASSERT(emq_srv_cmd(s, out, sizeof out, "XGROUP", "CREATE", "emq:{cx}", "g",
                       "0", NULL) == '+');
    ASSERT(emq_srv_cmd(s, out, sizeof out, "XREADGROUP", "GROUP", "g", "c",
                       "COUNT", "1", "STREAMS", "emq:{cx}", ">", NULL) == '*');
    ASSERT_OK(emq_produce(p, &f, 1, &unread, &err), &err);

    emq_admin_t *a = admin_open(s, "cx", "3");
    emq_delayed_info di;
    ASSERT_OK(emq_admin_delayed(a, &di, &err), &err);
    ASSERT_EQ_INT(di.waiting, 2);
    ASSERT(di.next_due_ms > 0);
    const char *ids[] = {waiting.str, read.str, unread.str,
                         "delayed-000000000099", "1-1"};
    emq_cancel_outcome oc[5];
    uint64_t removed = 0;
    ASSERT_OK(emq_admin_cancel(a, ids, 5, oc, &removed, &err), &err);
    ASSERT_EQ_INT(removed, 2);
    ASSERT_EQ_INT(oc[0], EMQ_CANCEL_REMOVED);
    ASSERT_EQ_INT(oc[1], EMQ_CANCEL_DELIVERED);
    ASSERT_EQ_INT(oc[2], EMQ_CANCEL_REMOVED);
    ASSERT_EQ_INT(oc[3], EMQ_CANCEL_MISSING);
    ASSERT_EQ_INT(oc[4], EMQ_CANCEL_MISSING);
    /* Cancelled twice: missing the second time. */
    ASSERT_OK(emq_admin_cancel(a, ids, 1, oc, &removed, &err), &err);
    ASSERT_EQ_INT(oc[0], EMQ_CANCEL_MISSING);
    ASSERT_EQ_INT(removed, 0);
    /* Nothing else touched: the other waiting entry, the read one. */
    ASSERT_OK(emq_admin_delayed(a, &di, &err), &err);
    ASSERT_EQ_INT(di.waiting, 1);
    ASSERT_EQ_INT(xlen(s, "emq:{cx}"), 1);
    char hlen[32];
    ASSERT(emq_srv_cmd(s, hlen, sizeof hlen, "HLEN", "emq:{cx}:delayed:entries",
                       NULL) == ':');
    ASSERT_EQ_STR(hlen, "1");
    /* A malformed ID: refused, nothing cancelled. */
    const char *bad[] = {kept.str, "delayed-12x"};
    ASSERT_EQ_INT(emq_admin_cancel(a, bad, 2, oc, &removed, &err), EMQ_EINVAL);
    ASSERT_CONTAINS(err.message, "'delayed-12x' (ID 1) is neither");
    ASSERT_OK(emq_admin_delayed(a, &di, &err), &err);
    ASSERT_EQ_INT(di.waiting, 1);
    emq_admin_destroy(a);
    emq_producer_destroy(p);
    emq_srv_stop(s);
}

typedef struct async_seen {
    pthread_mutex_t mu;
    int n;
    emq_status st;
    char id[EMQ_ID_MAX];
} async_seen;

static void on_delivery(void *opaque, const emq_delivery *d) {
    async_seen *a = opaque;
    pthread_mutex_lock(&a->mu);
    a->n++;
    a->st = d->status;
    snprintf(a->id, sizeof a->id, "%s", d->id);
    pthread_mutex_unlock(&a->mu);
}

TEST(delayed_async_and_topic_entries_wait_in_their_partition) {
    emq_srv *s = emq_srv_start(NULL);
    emq_conf_t *conf = conf_for(emq_srv_url(s));
    conf_set(conf, "queue", "tp");
    conf_set(conf, "partitions", "3");
    emq_producer_t *p;
    emq_error err;
    ASSERT_OK(emq_producer_new(conf, &p, &err), &err);
    emq_field f = {"n", 1, "k", 1};
    emq_produce_opts o = EMQ_PRODUCE_OPTS_INIT;
    o.delay_ms = 3600000;
    o.key = "user-7";
    o.key_len = 6;
    async_seen seen = {.mu = PTHREAD_MUTEX_INITIALIZER};
    ASSERT_OK(emq_produce_async_ex(p, &f, 1, &o, on_delivery, &seen, &err),
              &err);
    ASSERT_OK(emq_producer_flush(p, emq_test_ms(10000), &err), &err);
    ASSERT_EQ_INT(seen.n, 1);
    ASSERT_EQ_INT(seen.st, EMQ_OK);
    assert_handle(seen.id);
    emq_id id;
    ASSERT_OK(emq_produce_ex(p, &f, 1, &o, &id, &err), &err);
    assert_handle(id.str);
    /* Both in the key's partition, none in another, none in a stream. */
    unsigned part = 0;
    long long total = 0;
    for (unsigned i = 0; i < 3; i++) {
        char key[64];
        snprintf(key, sizeof key, "emq:{tp.%u}:delayed", i);
        long long n = zcard(s, key);
        if (n > 0)
            part = i;
        total += n;
    }
    ASSERT_EQ_INT(total, 2);
    char key[64];
    snprintf(key, sizeof key, "emq:{tp.%u}:delayed", part);
    ASSERT_EQ_INT(zcard(s, key), 2);
    /* The topic's admin sums the partitions; cancel needs a partition. */
    emq_admin_t *a;
    ASSERT_OK(emq_admin_new(conf, &a, &err), &err);
    emq_delayed_info di;
    ASSERT_OK(emq_admin_delayed(a, &di, &err), &err);
    ASSERT_EQ_INT(di.waiting, 2);
    const char *ids[] = {id.str};
    emq_cancel_outcome oc;
    ASSERT_EQ_INT(emq_admin_cancel(a, ids, 1, &oc, NULL, &err), EMQ_EINVAL);
    ASSERT_CONTAINS(err.message, "partition");
    ASSERT_OK(emq_admin_cancel(emq_admin_partition(a, (int)part), ids, 1, &oc,
                               NULL, &err),
              &err);
    ASSERT_EQ_INT(oc, EMQ_CANCEL_REMOVED);
    ASSERT_EQ_INT(zcard(s, key), 1);
    emq_admin_destroy(a);
    emq_producer_destroy(p);
    emq_conf_destroy(conf);
    emq_srv_stop(s);
}

TEST(delayed_entries_survive_a_restart_and_a_consumer_that_left) {
    emq_srv_opts opts = {.appendonly = 1};
    emq_srv *s = emq_srv_start(&opts);
    emq_producer_t *p = producer_for(s, "aof");
    emq_field f = {"n", 1, "due", 3};
    emq_produce_opts o = EMQ_PRODUCE_OPTS_INIT;
    o.delay_ms = emq_test_ms(1500);
    emq_error err;
    ASSERT_OK(emq_produce_ex(p, &f, 1, &o, NULL, &err), &err);
    emq_producer_destroy(p);
    /* A consumer comes and goes before it is due: it moves nothing. */
    emq_conf_t *conf = consumer_conf(s, "aof", "g", "c1", "head");
    recorder rec;
    recorder_init(&rec);
    emq_consumer_t *c = consumer_ok(conf, record, &rec);
    runner_thread t;
    start_consumer(&t, c);
    usleep(200 * 1000);
    emq_consumer_stop(c);
    ASSERT_EQ_INT(join_consumer(&t), EMQ_OK);
    emq_consumer_destroy(c);
    ASSERT_EQ_SIZE(rec.n, 0);
    emq_srv_kill9(s); /* appendfsync always: the schedule is on disk */
    emq_srv_restart(s);
    ASSERT_EQ_INT(zcard(s, "emq:{aof}:delayed"), 1);
    c = consumer_ok(conf, record, &rec);
    start_consumer(&t, c);
    wait_for(&rec, 1, 20000);
    ASSERT_EQ_STR(rec.values[0], "due");
    emq_consumer_stop(c);
    ASSERT_EQ_INT(join_consumer(&t), EMQ_OK);
    ASSERT_EQ_SIZE(rec.n, 1);
    emq_consumer_destroy(c);
    emq_conf_destroy(conf);
    emq_srv_stop(s);
}

/* The child's handler: holds its first entry until the process is
 * killed. */
static emq_verdict hold_forever(void *opaque, const emq_entry *e, char *reason,
                                size_t size) {
    (void)opaque;
    (void)e;
    (void)reason;
    (void)size;
    for (;;)
        pause();
    return EMQ_ACK;
}

TEST(delayed_mover_killed_mid_move_moves_nothing_twice_loses_nothing) {
    emq_srv *s = emq_srv_start(NULL);
    enum { N = 5000 };
    emq_producer_t *p = producer_for(s, "kill");
    static char vals[N][8];
    static emq_field f[N];
    static emq_message m[N];
    static emq_produce_opts o[N];
    int64_t due = server_ms(s) + emq_test_ms(300);
    for (int i = 0; i < N; i++) {
        int len = snprintf(vals[i], sizeof vals[i], "%d", i);
        f[i] = (emq_field){"n", 1, vals[i], (size_t)len};
        m[i] = (emq_message){&f[i], 1, NULL};
        o[i] = (emq_produce_opts)EMQ_PRODUCE_OPTS_INIT;
        o[i].due_ms = due;
    }
    emq_error err;
    size_t written;
    ASSERT_OK(emq_produce_batch_ex(p, m, o, N, NULL, &written, &err), &err);
    emq_producer_destroy(p);
    /* A mover in another process, killed while the moves go on. */
    pid_t child = fork();
    ASSERT(child >= 0);
    if (child == 0) {
        emq_conf_t *conf = consumer_conf(s, "kill", "g", "mover", "head");
        conf_set(conf, "delayed.poll_ms", "1");
        emq_consumer_t *c;
        if (emq_consumer_new(conf, hold_forever, NULL, &c, &err) != EMQ_OK)
            _exit(3);
        emq_consumer_run(c, &err);
        _exit(4);
    }
    WAIT_UNTIL(zcard(s, "emq:{kill}:delayed") < N, 20000,
               "the mover to move some entries");
    kill(child, SIGKILL);
    waitpid(child, NULL, 0);
    long long left = zcard(s, "emq:{kill}:delayed"), in = xlen(s, "emq:{kill}");
    fprintf(stderr, "    killed with %lld moved, %lld waiting\n", in, left);
    ASSERT_EQ_INT(in + left, N);
    /* A consumer of another name moves the rest and takes over what the
     * dead one held: each entry handled once. */
    emq_conf_t *conf = consumer_conf(s, "kill", "g", "heir", "head");
    conf_set(conf, "claim.min_idle_ms", "500");
    static recorder rec;
    recorder_init(&rec);
    emq_consumer_t *c = consumer_ok(conf, record, &rec);
    runner_thread t;
    start_consumer(&t, c);
    wait_for(&rec, N, 60000);
    usleep((useconds_t)emq_test_ms(300) * 1000); /* a duplicate shows */
    emq_consumer_stop(c);
    ASSERT_EQ_INT(join_consumer(&t), EMQ_OK);
    ASSERT_EQ_SIZE(rec.n, N);
    static unsigned char seen[N];
    for (size_t i = 0; i < rec.n; i++) {
        int v = atoi(rec.values[i]);
        ASSERT(v >= 0 && v < N);
        if (seen[v]++)
            FAIL("entry %d handled twice", v);
    }
    ASSERT_EQ_INT(xlen(s, "emq:{kill}"), N);
    ASSERT_EQ_INT(zcard(s, "emq:{kill}:delayed"), 0);
    emq_consumer_destroy(c);
    emq_conf_destroy(conf);
    emq_srv_stop(s);
}

/* Log lines that tell of due handles without a payload. */
static atomic_int vanished_said;

static void count_vanished(void *opaque, emq_log_level level,
                           const char *message) {
    (void)opaque;
    (void)level;
    if (strstr(message, "had no payload"))
        atomic_fetch_add(&vanished_said, 1);
}

/* What a scheduling producer's credential can write into the schedule
 * stops no move: a forged entry due first (score -1) whose payload is
 * not MessagePack, one whose payload is MessagePack but not pairs of
 * strings, one due at +inf, and one whose payload was deleted. The real
 * entries are moved and handled; the payload-less one is dropped, said;
 * the two bad payloads are set aside (delayed:bad, counted by info and
 * shown by `echomq info`), the +inf one waits and can be cancelled.
 * Before, the probe read the -1 as "none waits", and the first bad
 * payload made every move fail, for ever, so nothing behind it came. */
TEST_TIMEOUT(delayed_forged_schedule_entries_block_nothing, 60) {
    emq_srv *s = emq_srv_start(NULL);
    emq_producer_t *p = producer_for(s, "fge");
    emq_produce_opts o = EMQ_PRODUCE_OPTS_INIT;
    o.delay_ms = 300;
    emq_error err;
    for (int i = 0; i < 3; i++) {
        char v[8];
        snprintf(v, sizeof v, "r%d", i);
        emq_field f = {"n", 1, v, strlen(v)};
        ASSERT_OK(emq_produce_ex(p, &f, 1, &o, NULL, &err), &err);
    }
    emq_conn_t *conn = connect_url(emq_srv_url(s));
    CMD_NOERR(conn, "ZADD", "emq:{fge}:delayed", "-1", "delayed-900000000001",
              "0", "delayed-900000000002", "+inf", "delayed-900000000003", "1",
              "delayed-900000000004"); /* ...04: no payload at all */
    CMD_NOERR(conn, "HSET", "emq:{fge}:delayed:entries", "delayed-900000000001",
              "not messagepack \x01\xff", "delayed-900000000003", "\x91\x01");
    /* MessagePack of {1}: a list, but of a number. */
    CMD_NOERR(conn, "HSET", "emq:{fge}:delayed:entries", "delayed-900000000002",
              "\x91\x01");
    emq_conf_t *conf = consumer_conf(s, "fge", "g", "c1", "head");
    atomic_store(&vanished_said, 0);
    emq_conf_set_log(conf, count_vanished, NULL);
    recorder rec;
    recorder_init(&rec);
    emq_consumer_t *c = consumer_ok(conf, record, &rec);
    runner_thread t;
    start_consumer(&t, c);
    wait_for(&rec, 3, 20000);
    WAIT_UNTIL(atomic_load(&vanished_said) >= 1, 10000,
               "the payload-less handle told");
    emq_consumer_stop(c);
    ASSERT_EQ_INT(join_consumer(&t), EMQ_OK);
    emq_consumer_destroy(c);
    ASSERT_EQ_SIZE(rec.n, 3);
    ASSERT_EQ_INT(CMD_INT(conn, "HLEN", "emq:{fge}:delayed:bad"), 2);
    ASSERT_EQ_INT(zcard(s, "emq:{fge}:delayed"), 1); /* the +inf one */
    emq_admin_t *a = admin_open(s, "fge", "3");
    emq_queue_info *info = NULL;
    ASSERT_OK(emq_admin_describe(a, &info, &err), &err);
    ASSERT(info->delayed != NULL);
    ASSERT_EQ_INT(info->delayed->set_aside, 2);
    ASSERT_EQ_INT(info->delayed->waiting, 1);
    ASSERT(info->delayed->next_due_ms > 0); /* clamped, not a cast of inf */
    emq_queue_info_free(info);
    cli_result r;
    CLI(&r, emq_srv_url(s), "info", "fge");
    ASSERT_EXIT(&r, 0);
    ASSERT_CONTAINS(r.out, "2 set aside: not entries (delayed:bad)");
    cli_free(&r);
    /* A set-aside handle and the +inf one can be cancelled. */
    CLI(&r, emq_srv_url(s), "cancel", "fge", "delayed-900000000001",
        "delayed-900000000003");
    ASSERT_EXIT(&r, 0);
    cli_free(&r);
    ASSERT_EQ_INT(CMD_INT(conn, "HLEN", "emq:{fge}:delayed:bad"), 1);
    ASSERT_EQ_INT(zcard(s, "emq:{fge}:delayed"), 0);
    emq_admin_destroy(a);
    emq_conn_destroy(conn);
    emq_conf_destroy(conf);
    emq_producer_destroy(p);
    emq_srv_stop(s);
}

/* A waiting handle deleted by hand (ZREM, which a scheduling credential
 * may send) leaves its payload behind: info counts it as orphaned, in
 * the API, the JSON and the text, so an operator sees work that will
 * never be handed out. Before: nothing showed it. */
TEST(delayed_orphaned_payloads_are_counted) {
    emq_srv *s = emq_srv_start(NULL);
    emq_producer_t *p = producer_for(s, "orph");
    emq_produce_opts o = EMQ_PRODUCE_OPTS_INIT;
    o.delay_ms = 3600000;
    emq_error err;
    emq_id h[2];
    for (int i = 0; i < 2; i++) {
        emq_field f = {"n", 1, "x", 1};
        ASSERT_OK(emq_produce_ex(p, &f, 1, &o, &h[i], &err), &err);
    }
    emq_producer_destroy(p);
    char out[64];
    emq_srv_cmd(s, out, sizeof out, "ZREM", "emq:{orph}:delayed", h[0].str,
                NULL);
    ASSERT_EQ_STR(out, "1");
    emq_conf_t *conf = conf_for(emq_srv_url(s));
    conf_set(conf, "queue", "orph");
    emq_admin_t *a = NULL;
    ASSERT_OK(emq_admin_new(conf, &a, &err), &err);
    emq_delayed_info d;
    ASSERT_OK(emq_admin_delayed(a, &d, &err), &err);
    ASSERT_EQ_SIZE(d.waiting, 1);
    ASSERT_EQ_SIZE(d.orphaned, 1);
    emq_admin_destroy(a);
    emq_conf_destroy(conf);
    cli_result r;
    CLI(&r, emq_srv_url(s), "info", "orph");
    ASSERT_EXIT(&r, 0);
    ASSERT_CONTAINS(r.out, "1 orphaned");
    cli_free(&r);
    CLI(&r, emq_srv_url(s), "info", "orph", "--json");
    ASSERT_EXIT(&r, 0);
    ASSERT_CONTAINS(r.out, "\"orphaned\":1");
    cli_free(&r);
    emq_srv_stop(s);
}
