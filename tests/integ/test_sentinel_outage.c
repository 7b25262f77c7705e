/* SPDX-License-Identifier: BSD-3-Clause */
/* test_sentinel_outage.c: the control plane down or wrong, the data plane
 * running: Sentinels killed while the primary is healthy, and a stale
 * Sentinel first in the URL, against real Sentinels and servers the
 * fixture starts (sentinel_helpers.h). A fake Sentinel (fakepeer.h) plays
 * the stale one.
 */
#include "conn/conn.h" /* emq__conn_went_away */
#include "harness/fakepeer.h"
#include "integ/consumer_helpers.h"
#include "integ/sentinel_helpers.h"

#include <stdatomic.h>

/* The log lines of one test, by what they say. */
static atomic_int reconnected, watch_closed, watch_again, last_primary,
    disagree;

static void on_log(void *opaque, emq_log_level level, const char *message) {
    (void)opaque;
    (void)level;
    int told = 1;
    if (strstr(message, "re-established"))
        atomic_fetch_add(&reconnected, 1);
    else if (strstr(message, "closed the connection;"))
        atomic_fetch_add(&watch_closed, 1);
    else if (strstr(message, "watching it again"))
        atomic_fetch_add(&watch_again, 1);
    else if (strstr(message, "the primary named last"))
        atomic_fetch_add(&last_primary, 1);
    else if (strstr(message, "disagree"))
        atomic_fetch_add(&disagree, 1);
    else
        told = strstr(message, "Sentinel") != NULL;
    if (told)
        printf("    log: %s\n", message);
}

static void counts_reset(void) {
    atomic_store(&reconnected, 0);
    atomic_store(&watch_closed, 0);
    atomic_store(&watch_again, 0);
    atomic_store(&last_primary, 0);
    atomic_store(&disagree, 0);
}

#define LEDGER_MAX 8000

/* What the producer was told: the values confirmed, and the calls that
 * failed. */
typedef struct ledger {
    int confirmed[LEDGER_MAX]; /* value numbers, in order */
    int n;
    int failed;
    int next; /* the next value number */
} ledger;

/* Produces one entry {"n": "e<k>"} every 10 ms for ms. */
static void produce_for(emq_producer_t *p, ledger *l, int64_t ms) {
    for (int64_t end = now_ms() + ms; now_ms() < end && l->n < LEDGER_MAX;
         usleep(10 * 1000)) {
        char v[32];
        int k = l->next++;
        int len = snprintf(v, sizeof v, "e%d", k);
        emq_field f = {"n", 1, v, (size_t)len};
        emq_error err;
        emq_status st = emq_produce(p, &f, 1, NULL, &err);
        if (st == EMQ_OK) {
            l->confirmed[l->n++] = k;
            continue;
        }
        if (l->failed++ < 3)
            printf("    produce e%d failed: %s\n", k, err.message);
    }
}

/* A producer, a consumer (run mode) and a plain connection on the
 * Sentinel URL, logging to on_log. */
typedef struct clients {
    emq_conf_t *conf;
    emq_producer_t *p;
    emq_consumer_t *c;
    emq_conn_t *conn;
    runner_thread run;
    recorder rec;
} clients;

static void clients_start(clients *k, const ha *h) {
    memset(k, 0, sizeof *k);
    k->conf = ha_consumer_conf(h, "200");
    conf_set(k->conf, "log.level", "info");
    emq_conf_set_log(k->conf, on_log, NULL);
    emq_error err;
    ASSERT_OK(emq_producer_new(k->conf, &k->p, &err), &err);
    recorder_init(&k->rec);
    ASSERT_OK(emq_consumer_new(k->conf, record, &k->rec, &k->c, &err), &err);
    start_consumer(&k->run, k->c);
    k->conn = connect_ok(k->conf);
}

static void clients_stop(clients *k) {
    emq_consumer_stop(k->c);
    ASSERT_EQ_INT(join_consumer(&k->run), EMQ_OK);
    emq_consumer_destroy(k->c);
    emq_producer_destroy(k->p);
    emq_conn_destroy(k->conn);
    emq_conf_destroy(k->conf);
    pthread_mutex_destroy(&k->rec.lock);
}

static uint64_t consumer_reconnects(emq_consumer_t *c) {
    emq_consumer_stats st;
    emq_consumer_stats_get(c, &st);
    return st.reconnects;
}

/* The Sentinels down, the primary healthy: the queue runs on. First the
 * Sentinel every connection watches (the first of the URL) is killed:
 * no connection reconnects, the watches move to another Sentinel. Then
 * all three, for 30 s, produce and consume going on, with every client
 * connection of the primary killed halfway (so each reconnects while no
 * Sentinel answers, to the primary named last). Then they come back and
 * are watched again. Every produce call succeeds and every confirmed
 * entry is handled. Before: the watch's end counted as a switch, a
 * resolution reaching no Sentinel failed, and 0 of 794 calls succeeded
 * while they were down. */
TEST_TIMEOUT(sentinel_outage_leaves_the_queue_running, 240) {
    static ha h;
    ha_start(&h);
    counts_reset();
    static clients k;
    clients_start(&k, &h);
    static ledger l;
    memset(&l, 0, sizeof l);
    produce_for(k.p, &l, 1000);
    WAIT_UNTIL(recorder_handled_values(&k.rec, l.confirmed, l.n), 20000,
               "the first entries handled");

    /* One Sentinel: the one every watch is on. */
    emq_srv_kill9(h.sentinel[0]);
    produce_for(k.p, &l, 2000);
    for (int64_t end = now_ms() + emq_test_ms(500); now_ms() < end;
         usleep(20 * 1000))
        ASSERT_EQ_INT(emq__conn_went_away(k.conn), 0);
    WAIT_UNTIL(recorder_handled_values(&k.rec, l.confirmed, l.n), 20000,
               "entries handled, one down");
    ASSERT_EQ_INT(emq_conn_reconnects(k.conn), 0);
    ASSERT_EQ_INT(consumer_reconnects(k.c), 0);
    ASSERT_EQ_INT(atomic_load(&reconnected), 0);
    ASSERT(atomic_load(&watch_closed) >= 1);
    /* The plain connection's watch is on another Sentinel by now. */
    WAIT_UNTIL((emq__conn_went_away(k.conn), atomic_load(&watch_again) >= 1),
               10000, "a watch reopened on another Sentinel");

    /* All of them, for 30 s; every client of the primary cut halfway. */
    emq_srv_kill9(h.sentinel[1]);
    emq_srv_kill9(h.sentinel[2]);
    printf("    all Sentinels down\n");
    produce_for(k.p, &l, 15000);
    char out[64];
    emq_srv_cmd(h.node[0], out, sizeof out, "CLIENT", "KILL", "TYPE", "normal",
                NULL);
    printf("    every client of the primary cut (%s)\n", out);
    produce_for(k.p, &l, 15000);
    WAIT_UNTIL(recorder_handled_values(&k.rec, l.confirmed, l.n), 20000,
               "every entry handled, the Sentinels down");
    ASSERT(atomic_load(&last_primary) >= 1);
    ASSERT(consumer_reconnects(k.c) >= 1); /* through the last primary */

    /* Back: the watches are reopened on them. */
    int again = atomic_load(&watch_again);
    for (int i = 0; i < 3; i++)
        emq_srv_restart(h.sentinel[i]);
    printf("    Sentinels back\n");
    WAIT_UNTIL((emq__conn_went_away(k.conn), produce_for(k.p, &l, 100),
                atomic_load(&watch_again) > again),
               30000, "the watches reopened once the Sentinels are back");
    produce_for(k.p, &l, 1000);
    WAIT_UNTIL(recorder_handled_values(&k.rec, l.confirmed, l.n), 20000,
               "every entry handled");
    printf("    %d confirmed, %d failed calls, %zu handler calls\n", l.n,
           l.failed, k.rec.n);
    ASSERT_EQ_INT(l.failed, 0);
    ASSERT(l.n >= 1000);
    clients_stop(&k);
    ha_stop(&h);
}

/* A stale Sentinel first in the URL (a fake one, that names a replica, a
 * closed port, or another live master, and knows no other Sentinel),
 * then the three real ones: a connection asks two, they disagree, the
 * rest are asked, and the primary most of them name is used; the
 * disagreement is told once per connection. Before, the first Sentinel
 * that answered was trusted: every call failed for good (a replica, a
 * closed port), or went silently to the other master. */
TEST_TIMEOUT(sentinel_stale_first_is_outvoted, 180) {
    static ha h;
    ha_start(&h);
    emq_srv *other = emq_srv_start(NULL);
    int closed = emq_srv_port(other) + 0;
    {
        /* A port nothing listens on: a server started and stopped. */
        emq_srv *gone = emq_srv_start(NULL);
        closed = emq_srv_port(gone);
        emq_srv_stop(gone);
    }
    const struct {
        const char *what;
        int port;
    } cases[] = {{"a replica", emq_srv_port(h.node[1])},
                 {"a closed port", closed},
                 {"another live master", emq_srv_port(other)}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        printf("    the stale Sentinel names %s\n", cases[i].what);
        emq_peer_opts po = {.mode = EMQ_PEER_SENTINEL,
                            .sentinel_master = MASTER,
                            .primary_port = cases[i].port};
        emq_peer *stale = emq_peer_start(&po);
        char url[320];
        snprintf(url, sizeof url,
                 "redis-sentinel://127.0.0.1:%d,127.0.0.1:%d,127.0.0.1:%d,"
                 "127.0.0.1:%d#" MASTER,
                 emq_peer_port(stale), emq_srv_port(h.sentinel[0]),
                 emq_srv_port(h.sentinel[1]), emq_srv_port(h.sentinel[2]));
        counts_reset();
        emq_conf_t *conf = conf_for(url);
        conf_set(conf, "queue", "ha");
        conf_set(conf, "log.level", "info");
        emq_conf_set_log(conf, on_log, NULL);
        int64_t began = now_ms();
        emq_producer_t *p;
        emq_error err;
        ASSERT_OK(emq_producer_new(conf, &p, &err), &err);
        long long before = stream_len(h.node[0]);
        for (int n = 0; n < 20; n++) {
            emq_field f = {"n", 1, "x", 1};
            ASSERT_OK(emq_produce(p, &f, 1, NULL, &err), &err);
        }
        printf("    20 produced in %lld ms\n", (long long)(now_ms() - began));
        ASSERT_EQ_INT(stream_len(h.node[0]) - before, 20);
        ASSERT_EQ_INT(stream_len(other), 0);
        ASSERT(emq_peer_sentinel_asked(stale) >= 1);
        ASSERT_EQ_INT(atomic_load(&disagree), 1);
        emq_producer_destroy(p);
        emq_conf_destroy(conf);
        emq_peer_stop(stale);
    }
    emq_srv_stop(other);
    ha_stop(&h);
}

/* A primary that becomes a replica whose master is down, with
 * replica-serve-stale-data no, answers writes READONLY and reads
 * MASTERDOWN: neither is a "not now" (waiting does not make it a master)
 * but a node that is not the master, so a producer and an admin handle
 * resolve again and reach the primary the Sentinel names now, after one
 * call that fails EMQ_EIO (retriable). A fake Sentinel that announces
 * nothing plays one whose announcement was missed; both nodes are real.
 * Before, the admin handle's reads were answered MASTERDOWN for good
 * (waited out for each call, then failed, on the same connection). */
TEST_TIMEOUT(sentinel_not_master_replies_resolve_again, 60) {
    emq_srv *old = emq_srv_start(NULL), *now = emq_srv_start(NULL);
    emq_srv *gone = emq_srv_start(NULL);
    int closed = emq_srv_port(gone);
    emq_srv_stop(gone);
    char url[128], port[16];
    emq_peer *sentinel =
        fake_sentinel((emq_peer_opts){0}, emq_srv_port(old), url, sizeof url);
    emq_conf_t *conf = conf_for(url);
    conf_set(conf, "queue", "ha");
    emq_producer_t *p;
    emq_admin_t *a;
    emq_error err;
    ASSERT_OK(emq_producer_new(conf, &p, &err), &err);
    ASSERT_OK(emq_admin_new(conf, &a, &err), &err);
    emq_field f = {"n", 1, "1", 1};
    ASSERT_OK(emq_produce(p, &f, 1, NULL, &err), &err);
    emq_queue_info *info = NULL;
    ASSERT_OK(emq_admin_describe(a, &info, &err), &err);
    emq_queue_info_free(info);
    /* old: a replica of nothing, stale reads refused. */
    char out[256];
    emq_srv_cmd(old, out, sizeof out, "CONFIG", "SET",
                "replica-serve-stale-data", "no", NULL);
    snprintf(port, sizeof port, "%d", closed);
    ASSERT_EQ_INT(
        emq_srv_cmd(old, out, sizeof out, "REPLICAOF", "127.0.0.1", port, NULL),
        '+');
    WAIT_UNTIL(emq_srv_cmd(old, out, sizeof out, "XLEN", "emq:{ha}", NULL) ==
                       '-' &&
                   strstr(out, "MASTERDOWN") != NULL,
               10000, "the old primary to answer MASTERDOWN");
    emq_peer_sentinel_name(sentinel, emq_srv_port(now));
    /* The admin handle: MASTERDOWN, then the new primary. */
    emq_status st = EMQ_EIO;
    for (int i = 0; i < 3 && st != EMQ_OK; i++) {
        st = emq_admin_describe(a, &info, &err);
        if (st != EMQ_OK) {
            printf("    describe %d: %s\n", i + 1, err.message);
            ASSERT(err.retriable);
        }
    }
    ASSERT_OK(st, &err);
    char want[64];
    snprintf(want, sizeof want, "127.0.0.1:%d", emq_srv_port(now));
    ASSERT_EQ_STR(info->endpoint, want);
    emq_queue_info_free(info);
    /* The producer: READONLY, then the new primary. */
    st = EMQ_EIO;
    for (int i = 0; i < 3 && st != EMQ_OK; i++) {
        emq_field g = {"n", 1, "2", 1};
        st = emq_produce(p, &g, 1, NULL, &err);
        if (st != EMQ_OK) {
            printf("    produce %d: %s\n", i + 1, err.message);
            ASSERT(err.retriable);
        }
    }
    ASSERT_OK(st, &err);
    ASSERT_EQ_INT(stream_len(now), 1);
    emq_admin_destroy(a);
    emq_producer_destroy(p);
    emq_conf_destroy(conf);
    emq_peer_stop(sentinel);
    emq_srv_stop(now);
    emq_srv_stop(old);
}

/* sentinel.allowed_hosts: a Sentinel that names a primary outside the
 * patterns sends nothing anywhere (the resolution fails, EMQ_EPROTO,
 * naming the property; the named node never sees a connection, so never
 * the data password); within them, the connection is made. A fake
 * Sentinel names a fake primary that counts its connections. */
TEST_TIMEOUT(sentinel_allowed_hosts_bound_where_the_password_goes, 30) {
    emq_peer_opts silent = {.mode = EMQ_PEER_SILENT};
    emq_peer *named = emq_peer_start(&silent);
    emq_peer_opts po = {.mode = EMQ_PEER_SENTINEL,
                        .sentinel_master = MASTER,
                        .primary_port = emq_peer_port(named)};
    emq_peer *sentinel = emq_peer_start(&po);
    char url[160];
    snprintf(url, sizeof url, "redis-sentinel://:secret@127.0.0.1:%d#" MASTER,
             emq_peer_port(sentinel));
    emq_conf_t *conf = conf_for(url);
    conf_set(conf, "sentinel.allowed_hosts", "10.0.*,*.cache.internal");
    conf_set(conf, "connect_timeout_ms", "500");
    emq_conn_t *conn = NULL;
    emq_error err;
    ASSERT_STATUS(emq_conn_new(conf, &conn, &err), EMQ_EPROTO, &err);
    ASSERT_CONTAINS(err.message, "sentinel.allowed_hosts does not allow");
    ASSERT_CONTAINS(err.message, "127.0.0.1");
    ASSERT(strstr(err.message, "secret") == NULL);
    ASSERT_EQ_INT(emq_peer_accepted(named), 0);
    /* Allowed: connected (the silent peer then answers nothing). */
    conf_set(conf, "sentinel.allowed_hosts", "10.0.*,127.0.0.?");
    ASSERT_STATUS(emq_conn_new(conf, &conn, &err), EMQ_ETIMEDOUT, &err);
    ASSERT_EQ_INT(emq_peer_accepted(named), 1);
    /* A pattern that is not one is refused when set. */
    emq_conf_t *bad = emq_conf_new();
    ASSERT_STATUS(
        emq_conf_set(bad, "sentinel.allowed_hosts", "10.0.0.1/8", &err),
        EMQ_EINVAL, &err);
    ASSERT_CONTAINS(err.message, "sentinel.allowed_hosts");
    emq_conf_destroy(bad);
    emq_conf_destroy(conf);
    emq_peer_stop(sentinel);
    emq_peer_stop(named);
}
