/* SPDX-License-Identifier: BSD-3-Clause */
/* test_sentinel.c: a redis-sentinel:// URL against real Sentinels.
 *
 * The fixture starts a primary, two replicas and three Sentinels
 * (redis-server --sentinel, the server binary under test) on loopback and
 * stops them by pid. A connection asks the Sentinels where the primary
 * is at every connect; after SENTINEL FAILOVER the producer (READONLY, or
 * its connection closed by the failover) and a consumer blocked in its
 * read find the new primary, and nothing confirmed with
 * producer.wait_replicas is lost. The two errors of a failed resolution
 * are distinct.
 */
#include "conn/conn.h" /* emq__conn_went_away */
#include "harness/fakepeer.h"
#include "integ/sentinel_helpers.h"

#include <poll.h>
#include <pthread.h>

typedef struct seen {
    pthread_mutex_t mu;
    char ids[200][EMQ_ID_MAX];
    int n;
} seen;

static emq_verdict remember(void *opaque, const emq_entry *m, char *reason,
                            size_t reason_size) {
    (void)reason;
    (void)reason_size;
    seen *s = opaque;
    pthread_mutex_lock(&s->mu);
    int dup = 0;
    for (int i = 0; i < s->n && !dup; i++)
        dup = strcmp(s->ids[i], m->id) == 0;
    if (!dup && s->n < 200)
        snprintf(s->ids[s->n++], EMQ_ID_MAX, "%s", m->id);
    pthread_mutex_unlock(&s->mu);
    return EMQ_ACK;
}

/* 1 when every one of the n IDs in ids was handled. */
static int seen_all(seen *s, char (*ids)[EMQ_ID_MAX], int n) {
    pthread_mutex_lock(&s->mu);
    int all = 1;
    for (int k = 0; k < n && all; k++) {
        int found = 0;
        for (int i = 0; i < s->n && !found; i++)
            found = strcmp(s->ids[i], ids[k]) == 0;
        all = found;
    }
    pthread_mutex_unlock(&s->mu);
    return all;
}

typedef struct runner {
    emq_consumer_t *c;
    emq_status st;
    emq_error err;
    pthread_t thread;
} runner;

static void *run_main(void *arg) {
    runner *r = arg;
    r->st = emq_consumer_run(r->c, &r->err);
    return NULL;
}

/* A plain connection, the producer and a consumer find the primary
 * through the Sentinels. SENTINEL FAILOVER while the consumer is blocked
 * in XREADGROUP: the producer's next calls go to the new primary (a call
 * during the switch fails, retriable), the consumer's connections are
 * closed when Sentinel reconfigures the old primary and resolve again,
 * and every entry confirmed (producer.wait_replicas 1) before and after
 * is on the new primary and handled. An entry the old primary took in the
 * moments before its demotion and could not confirm may be handled too
 * (the consumer read it there) and is lost with the old primary's data:
 * never one that was confirmed. */
TEST_TIMEOUT(sentinel_producer_and_consumer_follow_a_failover, 150) {
    ha h;
    ha_start(&h);
    emq_conf_t *conf = ha_conf(&h);
    emq_conn_t *conn = connect_ok(conf);
    emq_reply *r = NULL;
    emq_error err;
    const char *role[] = {"ROLE"};
    ASSERT_OK(emq_conn_command(conn, 1, role, NULL, &r, &err), &err);
    size_t n;
    ASSERT(strncmp(emq_reply_str(emq_reply_at(r, 0), &n), "master", 6) == 0);
    emq_reply_free(r);
    emq_conn_destroy(conn);

    conf_set(conf, "producer.wait_replicas", "1");
    conf_set_ms(conf, "producer.wait_timeout_ms", 10000);
    conf_set(conf, "producer.timeout_ms", "5000");
    conf_set(conf, "group", "g");
    conf_set(conf, "consumer", "w1");
    conf_set(conf, "start", "head");
    conf_set(conf, "block_ms", "200");
    conf_set(conf, "claim.min_idle_ms", "1000");
    conf_set(conf, "lease.ttl_ms", "3000");
    static seen s = {.mu = PTHREAD_MUTEX_INITIALIZER};
    emq_consumer_t *c = NULL;
    ASSERT_OK(emq_consumer_new(conf, remember, &s, &c, &err), &err);
    runner run = {.c = c};
    ASSERT(pthread_create(&run.thread, NULL, run_main, &run) == 0);
    emq_producer_t *p = NULL;
    ASSERT_OK(emq_producer_new(conf, &p, &err), &err);
    emq_field f = {"v", 1, "x", 1};
    emq_id id;
    static char confirmed[20][EMQ_ID_MAX];
    for (int i = 0; i < 10; i++) {
        ASSERT_OK(emq_produce(p, &f, 1, &id, &err), &err);
        snprintf(confirmed[i], EMQ_ID_MAX, "%s", id.str);
    }
    WAIT_UNTIL(seen_all(&s, confirmed, 10), 20000, "the first ten handled");

    emq_srv *now = fail_over(&h);
    ASSERT(now != h.node[0]);
    int added = 10, failed = 0, retriable = 1;
    while (added < 20) {
        if (emq_produce(p, &f, 1, &id, &err) == EMQ_OK) {
            snprintf(confirmed[added++], EMQ_ID_MAX, "%s", id.str);
            continue;
        }
        failed++;
        retriable &= err.retriable;
        ASSERT(failed < emq_test_ms(400)); /* 20 s of tries, scaled */
        usleep(50000);
    }
    printf("    after the failover: %d calls failed (retriable) before the "
           "new primary answered\n",
           failed);
    ASSERT_EQ_INT(retriable, 1);
    WAIT_UNTIL(seen_all(&s, confirmed, 20), 30000,
               "the ten confirmed after the failover handled");
    ASSERT(stream_len(now) >= 20);
    emq_consumer_stop(c);
    pthread_join(run.thread, NULL);
    ASSERT_OK(run.st, &run.err);
    emq_consumer_destroy(c);
    emq_producer_destroy(p);
    emq_conf_destroy(conf);
    ha_stop(&h);
}

/* The two ways a resolution fails say different things: no Sentinel
 * answers (retriable: they may come back), or those that answer do not
 * know the master (a wrong name: not retriable). */
TEST_TIMEOUT(sentinel_two_distinct_errors, 60) {
    char url[256];
    snprintf(url, sizeof url,
             "redis-sentinel://127.0.0.1:%d,127.0.0.1:%d#" MASTER,
             emq_free_port(), emq_free_port());
    emq_conf_t *conf = conf_for(url);
    emq_conn_t *conn = NULL;
    emq_error err;
    ASSERT_STATUS(emq_conn_new(conf, &conn, &err), EMQ_EIO, &err);
    ASSERT_CONTAINS(err.message, "no Sentinel reachable");
    ASSERT_EQ_INT(err.retriable, 1);
    emq_conf_destroy(conf);

    emq_srv *primary = emq_srv_start(NULL);
    char config[256];
    snprintf(config, sizeof config,
             "sentinel monitor " MASTER " 127.0.0.1 %d 1\n",
             emq_srv_port(primary));
    emq_srv_opts o = {.sentinel = 1, .extra_config = config};
    emq_srv *sentinel = emq_srv_start(&o);
    snprintf(url, sizeof url, "redis-sentinel://127.0.0.1:%d#nosuch",
             emq_srv_port(sentinel));
    conf = conf_for(url);
    ASSERT_STATUS(emq_conn_new(conf, &conn, &err), EMQ_EINVAL, &err);
    ASSERT_CONTAINS(err.message, "no Sentinel knows master 'nosuch'");
    /* sentinel.master names it instead of the URL. */
    conf_set(conf, "sentinel.master", MASTER);
    conn = connect_ok(conf);
    emq_conn_destroy(conn);
    emq_conf_destroy(conf);
    emq_srv_stop(sentinel);
    emq_srv_stop(primary);
}

/* sentinel.address_map: the primary a Sentinel announces is reached at
 * the address the map gives (here a proxy in front of it, as a NAT or a
 * container's published port would be). sentinel.tls: TLS to a Sentinel
 * that speaks none fails as "no Sentinel reachable". */
TEST_TIMEOUT(sentinel_address_map_and_tls_are_honoured, 60) {
    emq_srv *primary = emq_srv_start(NULL);
    char config[256];
    snprintf(config, sizeof config,
             "sentinel monitor " MASTER " 127.0.0.1 %d 1\n",
             emq_srv_port(primary));
    emq_srv_opts o = {.sentinel = 1, .extra_config = config};
    emq_srv *sentinel = emq_srv_start(&o);
    emq_peer_opts po = {.mode = EMQ_PEER_PROXY,
                        .upstream_port = emq_srv_port(primary)};
    emq_peer *proxy = emq_peer_start(&po);
    char url[256], map[128];
    snprintf(url, sizeof url, "redis-sentinel://127.0.0.1:%d#" MASTER,
             emq_srv_port(sentinel));
    snprintf(map, sizeof map, "127.0.0.1:%d=127.0.0.1:%d",
             emq_srv_port(primary), emq_peer_port(proxy));
    emq_conf_t *conf = conf_for(url);
    conf_set(conf, "sentinel.address_map", map);
    emq_conn_t *conn = connect_ok(conf);
    emq_reply *r = NULL;
    emq_error err;
    ASSERT_OK(
        emq_conn_command(conn, 1, (const char *[]){"PING"}, NULL, &r, &err),
        &err);
    emq_reply_free(r);
    ASSERT(emq_peer_accepted(proxy) >= 1); /* through the mapped address */
    emq_conn_destroy(conn);
    conf_set(conf, "sentinel.tls", "1");
    ASSERT_STATUS(emq_conn_new(conf, &conn, &err), EMQ_EIO, &err);
    ASSERT_CONTAINS(err.message, "no Sentinel reachable");
    emq_conf_destroy(conf);
    emq_peer_stop(proxy);
    emq_srv_stop(sentinel);
    emq_srv_stop(primary);
}

/* 1 when a describe through a says the node that answered is at port
 * with role master. */
static int described_at(emq_admin_t *a, int port) {
    emq_queue_info *info = NULL;
    emq_error err;
    if (emq_admin_describe(a, &info, &err) != EMQ_OK)
        return 0;
    char want[64];
    snprintf(want, sizeof want, "127.0.0.1:%d", port);
    int ok = info->endpoint != NULL && strcmp(info->endpoint, want) == 0 &&
             info->role != NULL && strcmp(info->role, "master") == 0;
    emq_queue_info_free(info);
    return ok;
}

/* An admin handle and `echomq info` name the primary the Sentinels
 * resolved and its role; after SENTINEL FAILOVER the same handle's calls
 * go to the new primary. */
TEST_TIMEOUT(sentinel_admin_and_info_follow_a_failover, 150) {
    static ha h;
    ha_start(&h);
    emq_conf_t *conf = ha_conf(&h);
    emq_admin_t *a = NULL;
    emq_error err;
    ASSERT_OK(emq_admin_new(conf, &a, &err), &err);
    ASSERT(described_at(a, emq_srv_port(h.node[0])));
    cli_result r;
    CLI(&r, h.url, "info", "ha");
    ASSERT_EXIT(&r, 0);
    char line[96];
    snprintf(line, sizeof line, "node          127.0.0.1:%d (master)",
             emq_srv_port(h.node[0]));
    ASSERT_CONTAINS(r.out, line);
    cli_free(&r);
    emq_srv *now = fail_over(&h);
    WAIT_UNTIL(described_at(a, emq_srv_port(now)), 10000,
               "the admin handle's describe to reach the new primary");
    CLI(&r, h.url, "info", "ha", "--json");
    ASSERT_EXIT(&r, 0);
    snprintf(line, sizeof line,
             "\"endpoint\":\"127.0.0.1:%d\",\"role\":\"master\"",
             emq_srv_port(now));
    ASSERT_CONTAINS(r.out, line);
    cli_free(&r);
    emq_admin_destroy(a);
    emq_conf_destroy(conf);
    ha_stop(&h);
}

/* One Sentinel watches two masters: ours, and "other" with a replica.
 * When "other" fails over, the +switch-master it announces is not ours:
 * our connection stays as it is (before, any announcement made every
 * connection watching that Sentinel reconnect). */
TEST_TIMEOUT(sentinel_switch_of_another_master_keeps_the_connection, 90) {
    emq_srv *ours = emq_srv_start(NULL);
    emq_srv *other = emq_srv_start(NULL);
    emq_srv *other_replica = emq_srv_start(NULL);
    replica_follow(other_replica, other);
    char config[512];
    snprintf(config, sizeof config,
             "sentinel monitor " MASTER " 127.0.0.1 %d 1\n"
             "sentinel monitor other 127.0.0.1 %d 1\n"
             "sentinel down-after-milliseconds other 1000\n"
             "sentinel failover-timeout other 5000\n",
             emq_srv_port(ours), emq_srv_port(other));
    emq_srv_opts o = {.sentinel = 1, .extra_config = config};
    emq_srv *sentinel = emq_srv_start(&o);
    static char out[16384];
    WAIT_UNTIL(emq_srv_cmd(sentinel, out, sizeof out, "SENTINEL", "replicas",
                           "other", NULL) == '*' &&
                   strstr(out, "ip") != NULL,
               30000, "the Sentinel to know the other master's replica");
    char url[256];
    snprintf(url, sizeof url, "redis-sentinel://127.0.0.1:%d#" MASTER,
             emq_srv_port(sentinel));
    emq_conf_t *conf = conf_for(url);
    emq_conn_t *conn = connect_ok(conf);
    emq_reply *r = NULL;
    emq_error err;
    const char *id[] = {"CLIENT", "ID"};
    ASSERT_OK(emq_conn_command(conn, 2, id, NULL, &r, &err), &err);
    long long before = emq_reply_integer(r);
    emq_reply_free(r);
    int from = 0;
    WAIT_UNTIL(emq_srv_cmd(sentinel, out, sizeof out, "SENTINEL", "FAILOVER",
                           "other", NULL) == '+',
               10000, "the Sentinel to accept SENTINEL FAILOVER other");
    from = emq_srv_port(other);
    WAIT_UNTIL(emq_srv_cmd(sentinel, out, sizeof out, "SENTINEL",
                           "get-master-addr-by-name", "other", NULL) == '*' &&
                   strchr(out, '\n') != NULL &&
                   atoi(strchr(out, '\n') + 1) != from,
               30000, "the Sentinel to switch the other master");
    /* The announcement went out with the switch; the connection reads it
     * and stays. */
    int64_t end = now_ms() + emq_test_ms(1000);
    while (now_ms() < end) {
        ASSERT_EQ_INT(emq__conn_went_away(conn), 0);
        usleep(50 * 1000);
    }
    ASSERT_OK(emq_conn_command(conn, 2, id, NULL, &r, &err), &err);
    ASSERT_EQ_INT(emq_reply_integer(r), before); /* the same connection */
    emq_reply_free(r);
    emq_conn_destroy(conn);
    emq_conf_destroy(conf);
    emq_srv_stop(sentinel);
    emq_srv_stop(other_replica);
    emq_srv_stop(other);
    emq_srv_stop(ours);
}

/* 1 when what conn writes lands on node: a value written through conn
 * is there. */
static int is_on(emq_conn_t *conn, const emq_srv *node) {
    static int probes;
    char value[32], out[64];
    snprintf(value, sizeof value, "probe-%d", ++probes);
    emq_reply *r = NULL;
    emq_error err;
    const char *set[] = {"SET", "emq:probe", value};
    if (emq_conn_command(conn, 3, set, NULL, &r, &err) != EMQ_OK)
        return 0;
    emq_reply_free(r);
    return emq_srv_cmd(node, out, sizeof out, "GET", "emq:probe", NULL) ==
               '$' &&
           strcmp(out, value) == 0;
}

/* A switch announced while a connection is being set up: the Sentinel
 * named the old primary, which answers ROLE master (as one resumed from a
 * pause does until the Sentinels reconfigure it), and announced the
 * switch right after. The watch subscribes before the question, so the
 * connect hears it and resolves again: the connection ends on the new
 * primary (before, it subscribed after connecting, missed the
 * announcement and stayed on the old primary, where its writes were lost
 * once that was reconfigured). An announcement of the switch to the
 * primary the connection is on costs no reconnect; one to another makes
 * it go away. A fake Sentinel plays the Sentinel; both nodes are real. */
TEST_TIMEOUT(sentinel_switch_while_connecting_is_heard, 60) {
    emq_srv *old = emq_srv_start(NULL), *now = emq_srv_start(NULL);
    emq_peer_opts po = {.mode = EMQ_PEER_SENTINEL,
                        .sentinel_master = MASTER,
                        .primary_port = emq_srv_port(old),
                        .switch_to_port = emq_srv_port(now)};
    emq_peer *sentinel = emq_peer_start(&po);
    char url[128];
    snprintf(url, sizeof url, "redis-sentinel://127.0.0.1:%d#" MASTER,
             emq_peer_port(sentinel));
    emq_conf_t *conf = conf_for(url);
    conf_set(conf, P_RECONNECT_BASE, "20");
    conf_set(conf, P_RECONNECT_MAX, "100");
    /* One attempt (emq_conn_new makes one): a retriable failure that
     * names the switch, not a connection on the old primary. */
    emq_conn_t *conn = NULL;
    emq_error err;
    ASSERT_EQ_INT(emq_conn_new(conf, &conn, &err), EMQ_EIO);
    ASSERT(err.retriable);
    ASSERT(strstr(err.message, "announced a new primary") != NULL);
    ASSERT(conn == NULL);
    conn = connect_ok(conf); /* resolves again */
    ASSERT_EQ_INT(emq_peer_sentinel_asked(sentinel), 2);
    ASSERT(is_on(conn, now));
    ASSERT(!is_on(conn, old));
    /* A late announcement of the same switch is no news. */
    emq_peer_sentinel_switch(sentinel, emq_srv_port(now));
    for (int64_t end = now_ms() + emq_test_ms(300); now_ms() < end;
         usleep(10 * 1000))
        ASSERT_EQ_INT(emq__conn_went_away(conn), 0);
    /* A switch to another primary is. */
    emq_peer_sentinel_switch(sentinel, emq_srv_port(old));
    WAIT_UNTIL(emq__conn_went_away(conn), 5000,
               "the switch back to make the connection go away");
    ASSERT_OK(emq_conn_reconnect(conn, &err), &err);
    ASSERT(is_on(conn, old));
    emq_conn_destroy(conn);
    emq_conf_destroy(conf);
    emq_peer_stop(sentinel);
    emq_srv_stop(now);
    emq_srv_stop(old);
}

/* Log lines that name lease.wait_replicas. */
static atomic_int lease_short;

static void on_log(void *opaque, emq_log_level level, const char *message) {
    (void)opaque;
    (void)level;
    if (strstr(message, "lease.wait_replicas"))
        atomic_fetch_add(&lease_short, 1);
}

/* lease.wait_replicas 1: a consumer whose lease no replica has yet hands
 * out nothing (its session says why and starts again with backoff); once
 * a replica follows, the lease reaches it and the entries are handled. A
 * failover therefore never finds a live name's lease missing. */
TEST_TIMEOUT(lease_wait_replicas_holds_work_until_a_replica_has_it, 60) {
    emq_srv *primary = emq_srv_start(NULL), *replica = emq_srv_start(NULL);
    char out[256];
    emq_srv_cmd(primary, out, sizeof out, "CONFIG", "SET",
                "repl-diskless-sync-delay", "0", NULL);
    for (int i = 0; i < 3; i++)
        emq_srv_cmd(primary, out, sizeof out, "XADD", "emq:{lw}", "*", "v", "x",
                    NULL);
    emq_conf_t *conf = conf_for(emq_srv_url(primary));
    conf_set(conf, "queue", "lw");
    conf_set(conf, "group", "g");
    conf_set(conf, "consumer", "w");
    conf_set(conf, "start", "head");
    conf_set(conf, "block_ms", "100");
    conf_set(conf, "lease.wait_replicas", "1");
    conf_set(conf, "lease.wait_timeout_ms", "100");
    conf_set(conf, "log.level", "debug"); /* a failure again: debug */
    conf_set(conf, P_RECONNECT_BASE, "20");
    conf_set(conf, P_RECONNECT_MAX, "200");
    emq_conf_set_log(conf, on_log, NULL);
    static seen s = {.mu = PTHREAD_MUTEX_INITIALIZER};
    emq_consumer_t *c = NULL;
    emq_error err;
    ASSERT_OK(emq_consumer_new(conf, remember, &s, &c, &err), &err);
    runner run = {.c = c};
    ASSERT(pthread_create(&run.thread, NULL, run_main, &run) == 0);
    WAIT_UNTIL(atomic_load(&lease_short) >= 2, 10000,
               "two sessions to find the lease on no replica");
    pthread_mutex_lock(&s.mu);
    int handled = s.n;
    pthread_mutex_unlock(&s.mu);
    ASSERT_EQ_INT(handled, 0); /* the lease comes first, always */
    replica_follow(replica, primary);
    WAIT_UNTIL((pthread_mutex_lock(&s.mu), handled = s.n,
                pthread_mutex_unlock(&s.mu), handled == 3),
               15000, "the entries handled once a replica has the lease");
    emq_consumer_stop(c);
    pthread_join(run.thread, NULL);
    ASSERT_OK(run.st, &run.err);
    emq_consumer_destroy(c);
    emq_conf_destroy(conf);
    emq_srv_stop(replica);
    emq_srv_stop(primary);
}

/* Waits until every Sentinel names a primary other than the one on port
 * and has announced the switch (a failover they started themselves).
 * Returns it. */
/* 1 when every running Sentinel (a stopped one is NULL) names the same
 * primary, not the one on port, and has announced the switch. */
static int all_moved_from(const ha *h, int port) {
    int first = h->sentinel[0] ? primary_port(h->sentinel[0]) : 0;
    if (first == 0 || first == port)
        return 0;
    for (int i = 0; i < 3; i++)
        if (h->sentinel[i] != NULL &&
            (primary_port(h->sentinel[i]) != first || !settled(h->sentinel[i])))
            return 0;
    return 1;
}

static emq_srv *new_primary_after(const ha *h, int port) {
    WAIT_UNTIL(all_moved_from(h, port), 40000,
               "the Sentinels to fail the primary over");
    emq_srv *now = node_at(h, primary_port(h->sentinel[0]));
    char out[256];
    WAIT_UNTIL((emq_srv_cmd(now, out, sizeof out, "ROLE", NULL) == '*' &&
                strncmp(out, "master", 6) == 0),
               10000, "the new primary to say ROLE master");
    return now;
}

/* A primary that stops answering (SIGSTOP: no reply, no reset) is failed
 * over by the Sentinels. The producer's connection to it is silent, but
 * the Sentinel it watches announces +switch-master: its first call after
 * the switch goes to the new primary at once, instead of waiting out
 * producer.timeout_ms on the stopped one. */
TEST_TIMEOUT(sentinel_switch_announced_leaves_a_stopped_primary, 150) {
    ha h;
    ha_start(&h);
    emq_conf_t *conf = ha_conf(&h);
    conf_set(conf, "producer.timeout_ms", "20000");
    emq_producer_t *p = NULL;
    emq_error err;
    ASSERT_OK(emq_producer_new(conf, &p, &err), &err);
    emq_field f = {"v", 1, "x", 1};
    emq_id id;
    ASSERT_OK(emq_produce(p, &f, 1, &id, &err), &err);
    int old_port = emq_srv_port(h.node[0]);
    ASSERT_EQ_INT(kill(emq_srv_pid(h.node[0]), SIGSTOP), 0);
    emq_srv *now = new_primary_after(&h, old_port);
    int64_t began = now_ms();
    ASSERT_OK(emq_produce(p, &f, 1, &id, &err), &err);
    printf("    first call after the switch: %lld ms\n",
           (long long)(now_ms() - began));
    WAIT_UNTIL(stream_len(now) >= 1, 5000, "the entry on the new primary");
    ASSERT_EQ_INT(kill(emq_srv_pid(h.node[0]), SIGCONT), 0);
    emq_producer_destroy(p);
    emq_conf_destroy(conf);
    ha_stop(&h);
}

/* ---- every consumer mode across two failovers ---------------------------- */

static void remember_batch(void *opaque, const emq_entry *const *entries,
                           size_t n, emq_outcome *outcomes) {
    for (size_t i = 0; i < n; i++)
        outcomes[i].verdict = remember(opaque, entries[i], outcomes[i].reason,
                                       sizeof outcomes[i].reason);
}

typedef struct puller {
    emq_consumer_t *c;
    seen *s;
    int event_loop; /* 1: emq_consumer_fd, poll(2) and step */
    atomic_int quit;
    int refused; /* acks that failed (a settlement lost to a failover) */
    emq_status st;
    emq_error err;
    pthread_t thread;
} puller;

/* Pull mode: polls (or, as an event loop, waits for the consumer's
 * descriptor and steps) and acknowledges on this thread until told to
 * quit. */
static void *pull_main(void *arg) {
    puller *pl = arg;
    int fd = pl->event_loop ? emq_consumer_fd(pl->c, &pl->err) : -1;
    if (pl->event_loop && fd < 0) {
        pl->st = pl->err.code;
        return NULL;
    }
    while (!atomic_load(&pl->quit)) {
        emq_entry *got[8];
        size_t n = 0;
        if (pl->event_loop) {
            struct pollfd pfd = {fd, POLLIN, 0};
            int64_t t = emq_consumer_timeout_ms(pl->c);
            poll(&pfd, 1, t < 0 || t > 100 ? 100 : (int)t);
            pl->st = emq_consumer_step(pl->c, got, 8, &n, &pl->err);
        } else {
            pl->st = emq_consumer_poll(pl->c, got, 8, 100, &n, &pl->err);
        }
        if (pl->st != EMQ_OK)
            return NULL;
        for (size_t i = 0; i < n; i++) {
            char reason[8];
            remember(pl->s, got[i], reason, sizeof reason);
            emq_error aerr;
            if (emq_consumer_ack(pl->c, got[i], &aerr) != EMQ_OK)
                pl->refused++;
            emq_entry_free(got[i]);
        }
    }
    return NULL;
}

/* Produces ten entries confirmed by a replica (producer.wait_replicas 1)
 * into ids[from..from+10), going on through the retriable failures of a
 * switch. */
static void produce_ten(emq_producer_t *p, char (*ids)[EMQ_ID_MAX], int from) {
    emq_field f = {"v", 1, "x", 1};
    emq_id id;
    emq_error err;
    int added = 0, failed = 0;
    while (added < 10) {
        if (emq_produce(p, &f, 1, &id, &err) == EMQ_OK) {
            snprintf(ids[from + added++], EMQ_ID_MAX, "%s", id.str);
            continue;
        }
        ASSERT(err.retriable);
        ASSERT(++failed < emq_test_ms(400)); /* 20 s of tries, scaled */
        usleep(50000);
    }
}

/* A pull-mode consumer (polling and acknowledging on a thread of its own),
 * an event-loop one (its descriptor, poll(2), step) and a batch consumer
 * share a group through two failovers in a row: the
 * first asked with SENTINEL FAILOVER, the second the new primary killed
 * (SIGKILL) with one of the three Sentinels down, so the other two must
 * see it down and agree. Every entry confirmed before, between and after
 * is handled, both consumers run on, and the producer's failures during
 * each switch are retriable. */
TEST_TIMEOUT(sentinel_every_consumer_mode_rides_two_failovers, 240) {
    static ha h;
    ha_start(&h);
    emq_conf_t *conf = ha_conf(&h);
    conf_set(conf, "producer.wait_replicas", "1");
    conf_set_ms(conf, "producer.wait_timeout_ms", 10000);
    conf_set(conf, "producer.timeout_ms", "5000");
    conf_set(conf, "group", "g");
    conf_set(conf, "start", "head");
    conf_set(conf, "block_ms", "200");
    conf_set(conf, "claim.min_idle_ms", "1000");
    conf_set(conf, "lease.ttl_ms", "3000");
    static seen s = {.mu = PTHREAD_MUTEX_INITIALIZER};
    emq_error err;
    conf_set(conf, "consumer", "puller");
    static puller pl;
    memset(&pl, 0, sizeof pl);
    pl.s = &s;
    ASSERT_OK(emq_consumer_new(conf, NULL, NULL, &pl.c, &err), &err);
    conf_set(conf, "consumer", "stepper");
    static puller st;
    memset(&st, 0, sizeof st);
    st.s = &s;
    st.event_loop = 1;
    ASSERT_OK(emq_consumer_new(conf, NULL, NULL, &st.c, &err), &err);
    conf_set(conf, "consumer", "batcher");
    emq_consumer_t *bc = NULL;
    ASSERT_OK(emq_consumer_new_batch(conf, remember_batch, &s, &bc, &err),
              &err);
    ASSERT(pthread_create(&pl.thread, NULL, pull_main, &pl) == 0);
    ASSERT(pthread_create(&st.thread, NULL, pull_main, &st) == 0);
    runner run = {.c = bc};
    ASSERT(pthread_create(&run.thread, NULL, run_main, &run) == 0);
    emq_producer_t *p = NULL;
    ASSERT_OK(emq_producer_new(conf, &p, &err), &err);
    static char confirmed[30][EMQ_ID_MAX];

    produce_ten(p, confirmed, 0);
    WAIT_UNTIL(seen_all(&s, confirmed, 10), 20000, "the first ten handled");
    emq_srv *first = fail_over(&h);
    produce_ten(p, confirmed, 10);
    WAIT_UNTIL(seen_all(&s, confirmed, 20), 30000,
               "the ten confirmed after the first failover handled");

    emq_srv_stop(h.sentinel[2]);
    h.sentinel[2] = NULL;
    emq_srv_kill9(first);
    emq_srv *second = new_primary_after(&h, emq_srv_port(first));
    ASSERT(second != first);
    produce_ten(p, confirmed, 20);
    WAIT_UNTIL(seen_all(&s, confirmed, 30), 30000,
               "the ten confirmed after the second failover handled");
    ASSERT(stream_len(second) >= 30);

    atomic_store(&pl.quit, 1);
    atomic_store(&st.quit, 1);
    pthread_join(pl.thread, NULL);
    pthread_join(st.thread, NULL);
    ASSERT_OK(pl.st, &pl.err);
    ASSERT_OK(st.st, &st.err);
    ASSERT_OK(emq_consumer_close(pl.c, 5000, &err), &err);
    ASSERT_OK(emq_consumer_close(st.c, 5000, &err), &err);
    emq_consumer_stop(bc);
    pthread_join(run.thread, NULL);
    ASSERT_OK(run.st, &run.err);
    emq_consumer_stats ps, ss, bs;
    emq_consumer_stats_get(pl.c, &ps);
    emq_consumer_stats_get(st.c, &ss);
    emq_consumer_stats_get(bc, &bs);
    printf("    handed out: puller %llu, stepper %llu, batcher %llu; acks "
           "that failed across the switches: puller %d, stepper %d\n",
           (unsigned long long)ps.delivered, (unsigned long long)ss.delivered,
           (unsigned long long)bs.delivered, pl.refused, st.refused);
    emq_consumer_destroy(pl.c);
    emq_consumer_destroy(st.c);
    emq_consumer_destroy(bc);
    emq_producer_destroy(p);
    emq_conf_destroy(conf);
    ha_stop(&h);
}

/* A consumer blocked in XREADGROUP on a primary that stops answering
 * (SIGSTOP), with block_ms 20 s and command_timeout_ms 60 s: once the
 * Sentinels fail it over and announce the switch, the read gives up the
 * silent primary at once and the consumer handles what is added on the
 * new one (before, it waited out block_ms plus command_timeout_ms). */
TEST_TIMEOUT(sentinel_blocked_read_leaves_a_stopped_primary, 150) {
    static ha h;
    ha_start(&h);
    emq_conf_t *conf = ha_consumer_conf(&h, "20000");
    conf_set(conf, "command_timeout_ms", "60000");
    conf_set(conf, "claim.min_idle_ms", "3000");
    conf_set(conf, "lease.ttl_ms", "61000");
    static seen s = {.mu = PTHREAD_MUTEX_INITIALIZER};
    emq_consumer_t *c = NULL;
    emq_error err;
    ASSERT_OK(emq_consumer_new(conf, remember, &s, &c, &err), &err);
    runner run = {.c = c};
    ASSERT(pthread_create(&run.thread, NULL, run_main, &run) == 0);
    emq_producer_t *p = NULL;
    ASSERT_OK(emq_producer_new(conf, &p, &err), &err);
    static char ids[10][EMQ_ID_MAX];
    produce_ten(p, ids, 0);
    WAIT_UNTIL(seen_all(&s, ids, 10), 20000, "the first entries handled");
    /* Blocked again, in a read of 20 s. */
    WAIT_UNTIL(client_id_by_name(h.node[0], "w1", 1) >= 0, 10000,
               "the consumer to block in XREADGROUP");
    int old_port = emq_srv_port(h.node[0]);
    ASSERT_EQ_INT(kill(emq_srv_pid(h.node[0]), SIGSTOP), 0);
    emq_srv *now = new_primary_after(&h, old_port);
    int64_t switched = now_ms();
    static char after[10][EMQ_ID_MAX];
    produce_ten(p, after, 0);
    WAIT_UNTIL(seen_all(&s, after, 10), 30000,
               "the consumer to handle the entries added on the new "
               "primary");
    printf("    handled on the new primary %lld ms after the switch\n",
           (long long)(now_ms() - switched));
    ASSERT(stream_len(now) >= 20);
    ASSERT_EQ_INT(kill(emq_srv_pid(h.node[0]), SIGCONT), 0);
    emq_consumer_stop(c);
    pthread_join(run.thread, NULL);
    ASSERT_OK(run.st, &run.err);
    emq_consumer_destroy(c);
    emq_producer_destroy(p);
    emq_conf_destroy(conf);
    ha_stop(&h);
}
