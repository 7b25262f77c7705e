/* SPDX-License-Identifier: BSD-3-Clause */
/* test_sentinel_planned.c: a planned failover (SENTINEL FAILOVER) under
 * load, against real Sentinels, a primary and two replicas the fixture
 * starts (sentinel_helpers.h): entries produced at 200 a second and
 * consumed, with a ledger of what the producer was told and what the
 * handlers saw; measured with and without producer.wait_replicas.
 */
#include "conn/conn.h" /* emq__conn_went_away */
#include "harness/fakepeer.h"
#include "integ/consumer_helpers.h"
#include "integ/inspect_conn_helpers.h" /* cmdstat */
#include "integ/sentinel_helpers.h"

#include <stdatomic.h>

#define PLANNED_MAX 4000

/* What the producer thread was told. */
typedef struct planned {
    emq_producer_t *p;
    atomic_int stop;
    int confirmed[PLANNED_MAX]; /* value numbers */
    int n;
    int failed;
    int unconfirmed;        /* EMQ_ENOTDURABLE: added, not on enough replicas */
    int64_t longest_gap_ms; /* without a confirmed call (the end too) */
} planned;

/* Produces {"n": "e<k>"} every 5 ms (200 a second) until told to stop. */
static void *produce_main(void *arg) {
    planned *pl = arg;
    int64_t last = now_ms();
    for (int k = 0; !atomic_load(&pl->stop) && pl->n < PLANNED_MAX; k++) {
        char v[32];
        int len = snprintf(v, sizeof v, "e%d", k);
        emq_field f = {"n", 1, v, (size_t)len};
        emq_error err;
        emq_status st = emq_produce(pl->p, &f, 1, NULL, &err);
        int64_t now = now_ms();
        if (st == EMQ_OK) {
            pl->confirmed[pl->n++] = k;
            if (now - last > pl->longest_gap_ms)
                pl->longest_gap_ms = now - last;
            last = now;
        } else if (st == EMQ_ENOTDURABLE) {
            pl->unconfirmed++;
        } else if (pl->failed++ < 3) {
            printf("    produce e%d failed: %s\n", k, err.message);
        }
        usleep(5 * 1000);
    }
    if (now_ms() - last > pl->longest_gap_ms)
        pl->longest_gap_ms = now_ms() - last;
    return NULL;
}

/* How many of the values pl confirmed the stream on node lacks. */
static int absent_on(const emq_srv *node, const planned *pl) {
    static unsigned char there[PLANNED_MAX * 2];
    memset(there, 0, sizeof there);
    emq_conf_t *conf = conf_for(emq_srv_url(node));
    emq_conn_t *conn = connect_ok(conf);
    emq_reply *r = CMD(conn, "XRANGE", "emq:{ha}", "-", "+");
    for (size_t i = 0; i < emq_reply_len(r); i++) {
        const emq_reply *fields = emq_reply_at(emq_reply_at(r, i), 1);
        for (size_t f = 0; f + 1 < emq_reply_len(fields); f += 2) {
            char name[8], v[32];
            reply_text(emq_reply_at(fields, f), name, sizeof name);
            reply_text(emq_reply_at(fields, f + 1), v, sizeof v);
            int k = atoi(v + 1);
            if (strcmp(name, "n") == 0 && k >= 0 && k < (int)sizeof there)
                there[k] = 1;
        }
    }
    emq_reply_free(r);
    emq_conn_destroy(conn);
    emq_conf_destroy(conf);
    int absent = 0;
    for (int i = 0; i < pl->n; i++)
        absent += !there[pl->confirmed[i]];
    return absent;
}

/* One planned failover 2 s into a run of 200 entries a second and a
 * consumer; 2 s after every Sentinel names the new primary, the run
 * ends. Every confirmed entry is on the new primary and is handled. */
static void planned_failover(const char *wait_replicas) {
    static ha h;
    ha_start(&h);
    emq_conf_t *conf = ha_consumer_conf(&h, "200");
    conf_set(conf, "producer.wait_replicas", wait_replicas);
    static planned pl;
    memset(&pl, 0, sizeof pl);
    emq_error err;
    ASSERT_OK(emq_producer_new(conf, &pl.p, &err), &err);
    static recorder rec;
    recorder_init(&rec);
    emq_consumer_t *c;
    ASSERT_OK(emq_consumer_new(conf, record, &rec, &c, &err), &err);
    runner_thread run;
    start_consumer(&run, c);
    pthread_t producer;
    ASSERT(pthread_create(&producer, NULL, produce_main, &pl) == 0);
    usleep(2000 * 1000);
    int before = pl.n;
    int64_t asked = now_ms();
    emq_srv *now = fail_over(&h);
    int64_t moved = now_ms();
    usleep(2000 * 1000);
    atomic_store(&pl.stop, 1);
    pthread_join(producer, NULL);
    WAIT_UNTIL(recorder_handled_values(&rec, pl.confirmed, pl.n), 30000,
               "every confirmed entry handled");
    int absent = absent_on(now, &pl);
    pthread_mutex_lock(&rec.lock);
    size_t calls = rec.n;
    pthread_mutex_unlock(&rec.lock);
    printf("    wait_replicas %s: %d confirmed (%d before the failover), %d "
           "unconfirmed (EMQ_ENOTDURABLE), %d failed calls, %d absent from "
           "the new primary, %zu handler calls (%zu beyond the confirmed), "
           "longest time without a confirmed call %lld ms, failover %lld "
           "ms\n",
           wait_replicas, pl.n, before, pl.unconfirmed, pl.failed, absent,
           calls, calls - (size_t)pl.n, (long long)pl.longest_gap_ms,
           (long long)(moved - asked));
    ASSERT_EQ_INT(absent, 0);
    ASSERT_EQ_INT(pl.failed, 0);
    emq_consumer_stop(c);
    ASSERT_EQ_INT(join_consumer(&run), EMQ_OK);
    emq_consumer_destroy(c);
    emq_producer_destroy(pl.p);
    emq_conf_destroy(conf);
    pthread_mutex_destroy(&rec.lock);
    ha_stop(&h);
}

/* Without producer.wait_replicas: the hold from the failover's first
 * step to its switch keeps entries off the primary being demoted. Before
 * it, every planned failover left 166-198 confirmed entries (of 200 a
 * second) only on the old primary. */
TEST_TIMEOUT(sentinel_planned_failover_loses_nothing, 150) {
    planned_failover("0");
}

/* The same with producer.wait_replicas 1 and 2 (both replicas): the
 * entries a replica confirmed are all there; with 2, entries are
 * EMQ_ENOTDURABLE (added, not confirmed) until the old primary follows
 * the new one as a replica. */
TEST_TIMEOUT(sentinel_planned_failover_loses_nothing_wait_1, 150) {
    planned_failover("1");
}

TEST_TIMEOUT(sentinel_planned_failover_loses_nothing_wait_2, 150) {
    planned_failover("2");
}

/* Log lines about a failover's hold. */
static atomic_int hold_over, hold_ended;

static void on_hold_log(void *opaque, emq_log_level level,
                        const char *message) {
    (void)opaque;
    (void)level;
    if (strstr(message, "has not switched or ended"))
        atomic_fetch_add(&hold_over, 1);
    if (strstr(message, "ended the failover"))
        atomic_fetch_add(&hold_ended, 1);
}

typedef struct later {
    emq_peer *sentinel;
    const char *channel;
    char payload[128];
    int after_ms;
} later;

/* Publishes l's message after l->after_ms, on a thread of its own. */
static void *publish_later(void *arg) {
    later *l = arg;
    usleep((useconds_t)l->after_ms * 1000);
    emq_peer_sentinel_publish(l->sentinel, l->channel, l->payload);
    return NULL;
}

/* Sends PING on conn: its status; *ms how long it took. */
static emq_status timed_ping(emq_conn_t *conn, int64_t *ms, emq_error *err) {
    int64_t began = now_ms();
    emq_reply *r = NULL;
    emq_status st =
        emq_conn_command(conn, 1, (const char *[]){"PING"}, NULL, &r, err);
    emq_reply_free(r);
    *ms = now_ms() - began;
    return st;
}

/* A failover heard begun (a fake Sentinel's +try-failover) holds a
 * connection's commands: until the Sentinels' failover-timeout (here
 * 1 s) when nothing follows, then they go to the primary in use, told
 * once; until its abort when one comes; and a switch that follows makes
 * them go nowhere (not sent: resolve again). Both nodes are real. */
TEST_TIMEOUT(sentinel_failover_begun_holds_commands, 60) {
    emq_srv *primary = emq_srv_start(NULL), *next = emq_srv_start(NULL);
    char url[128], begun[128];
    emq_peer *sentinel =
        fake_sentinel((emq_peer_opts){.failover_timeout_ms = 1000},
                      emq_srv_port(primary), url, sizeof url);
    snprintf(begun, sizeof begun, "master " MASTER " 127.0.0.1 %d",
             emq_srv_port(primary));
    emq_conf_t *conf = conf_for(url);
    conf_set(conf, "log.level", "info");
    emq_conf_set_log(conf, on_hold_log, NULL);
    emq_conn_t *conn = connect_ok(conf);
    emq_error err;
    int64_t ms;
    ASSERT_OK(timed_ping(conn, &ms, &err), &err);

    /* Begun, then nothing: held for the failover-timeout, then sent. */
    emq_peer_sentinel_publish(sentinel, "+try-failover", begun);
    ASSERT_OK(timed_ping(conn, &ms, &err), &err);
    printf("    held %lld ms by a failover that never ended\n", (long long)ms);
    ASSERT(ms >= 900);
    ASSERT_EQ_INT(atomic_load(&hold_over), 1);

    /* Begun, then aborted 300 ms later: held until the abort. */
    emq_peer_sentinel_publish(sentinel, "+try-failover", begun);
    later abort = {sentinel, "-failover-abort-not-elected", "", 300};
    snprintf(abort.payload, sizeof abort.payload, "%s", begun);
    pthread_t t;
    ASSERT(pthread_create(&t, NULL, publish_later, &abort) == 0);
    ASSERT_OK(timed_ping(conn, &ms, &err), &err);
    pthread_join(t, NULL);
    printf("    held %lld ms by a failover aborted after 300 ms\n",
           (long long)ms);
    ASSERT(ms >= 250);
    ASSERT_EQ_INT(atomic_load(&hold_ended), 1);
    ASSERT_EQ_INT(atomic_load(&hold_over), 1); /* not by the bound */

    /* Begun, then switched: nothing sent to the old primary. */
    emq_peer_sentinel_publish(sentinel, "+try-failover", begun);
    later promoted = {sentinel, "+promoted-slave", "", 200};
    snprintf(promoted.payload, sizeof promoted.payload,
             "slave 127.0.0.1:%d 127.0.0.1 %d @ " MASTER " 127.0.0.1 %d",
             emq_srv_port(next), emq_srv_port(next), emq_srv_port(primary));
    ASSERT(pthread_create(&t, NULL, publish_later, &promoted) == 0);
    long long calls = 0, usec = 0;
    emq_conn_t *adm = admin_connect(primary);
    cmdstat(adm, "ping", &calls, &usec);
    ASSERT_STATUS(timed_ping(conn, &ms, &err), EMQ_EIO, &err);
    pthread_join(t, NULL);
    ASSERT_CONTAINS(err.message, "nothing was sent");
    long long after = 0;
    cmdstat(adm, "ping", &after, &usec);
    ASSERT_EQ_INT(after, calls); /* the old primary never saw it */
    emq_conn_destroy(adm);
    emq_conn_destroy(conn);
    emq_conf_destroy(conf);
    emq_peer_stop(sentinel);
    emq_srv_stop(next);
    emq_srv_stop(primary);
}

/* A Sentinel whose ACL grants the switch's channels only refuses the
 * subscription to a failover's steps: the watch subscribes to the switch
 * alone (no hold), and a switch is still heard. */
TEST_TIMEOUT(sentinel_switch_heard_without_the_failover_channels, 30) {
    emq_srv *primary = emq_srv_start(NULL), *next = emq_srv_start(NULL);
    char url[128];
    emq_peer *sentinel =
        fake_sentinel((emq_peer_opts){.switch_channels_only = 1},
                      emq_srv_port(primary), url, sizeof url);
    emq_conf_t *conf = conf_for(url);
    emq_conn_t *conn = connect_ok(conf);
    ASSERT_EQ_INT(emq__conn_went_away(conn), 0);
    emq_peer_sentinel_switch(sentinel, emq_srv_port(next));
    WAIT_UNTIL(emq__conn_went_away(conn), 5000,
               "the switch to make the connection go away");
    emq_conn_destroy(conn);
    emq_conf_destroy(conf);
    emq_peer_stop(sentinel);
    emq_srv_stop(next);
    emq_srv_stop(primary);
}

/* Log lines saying a Sentinel sent what cannot be news. */
static atomic_int not_news;

static void on_flood_log(void *opaque, emq_log_level level,
                         const char *message) {
    (void)opaque;
    (void)level;
    if (strstr(message, "not news of its channels"))
        atomic_fetch_add(&not_news, 1);
}

typedef struct flood {
    emq_peer *sentinel;
    int count;
    size_t bytes;
    atomic_int done;
} flood;

static void *flood_main(void *arg) {
    flood *f = arg;
    emq_peer_sentinel_flood(f->sentinel, f->count, f->bytes);
    atomic_store(&f->done, 1);
    return NULL;
}

/* A Sentinel that floods the watch: 20,000 messages of another master
 * (2.1 MB) are read 64 KiB per look, each look short, with no reconnect;
 * then one message larger than resp.max_reply_bytes is not news but a
 * Sentinel misbehaving: its watch is dropped (and asked again later),
 * told once, and the connection kept. Before, every look read all there
 * was (a client held 9 s by 160 MB), and the giant message made the
 * connection go away as if a new primary had been announced. */
TEST_TIMEOUT(sentinel_watch_flood_holds_no_caller, 60) {
    emq_srv *primary = emq_srv_start(NULL);
    char url[128];
    emq_peer *sentinel = fake_sentinel((emq_peer_opts){0},
                                       emq_srv_port(primary), url, sizeof url);
    emq_conf_t *conf = conf_for(url);
    conf_set(conf, "resp.max_reply_bytes", "1048576");
    conf_set(conf, "log.level", "info");
    emq_conf_set_log(conf, on_flood_log, NULL);
    emq_conn_t *conn = connect_ok(conf);
    flood f = {sentinel, 20000, 100, 0};
    pthread_t t;
    ASSERT(pthread_create(&t, NULL, flood_main, &f) == 0);
    int64_t longest = 0, end = now_ms() + emq_test_ms(20000);
    while (!atomic_load(&f.done) && now_ms() < end) {
        int64_t began = now_ms();
        ASSERT_EQ_INT(emq__conn_went_away(conn), 0);
        if (now_ms() - began > longest)
            longest = now_ms() - began;
    }
    pthread_join(t, NULL);
    ASSERT(atomic_load(&f.done));
    for (int i = 0; i < 100; i++) /* what is left of it */
        ASSERT_EQ_INT(emq__conn_went_away(conn), 0);
    printf("    the longest look at the flood: %lld ms\n", (long long)longest);
    /* One message too large to be news. */
    flood giant = {sentinel, 1, 2 * 1024 * 1024, 0};
    ASSERT(pthread_create(&t, NULL, flood_main, &giant) == 0);
    int gone = 0;
    WAIT_UNTIL((gone |= emq__conn_went_away(conn), atomic_load(&not_news) == 1),
               20000, "the giant message to drop the watch");
    ASSERT_EQ_INT(gone, 0); /* no "new primary" */
    pthread_join(t, NULL);
    emq_reply *r = NULL;
    emq_error err;
    ASSERT_OK(
        emq_conn_command(conn, 1, (const char *[]){"PING"}, NULL, &r, &err),
        &err);
    emq_reply_free(r);
    ASSERT_EQ_INT(emq_conn_reconnects(conn), 0);
    emq_conn_destroy(conn);
    emq_conf_destroy(conf);
    emq_peer_stop(sentinel);
    emq_srv_stop(primary);
}
