/* SPDX-License-Identifier: BSD-3-Clause */
/* test_consumer_ahead.c: reads sent ahead in pull mode, against a real
 * redis-server. When a read comes back full, the reading thread sends the
 * next XREADGROUPs (without BLOCK, two on the wire at most) before it
 * queues what came, so the server reads while it parses. The server's
 * MONITOR shows those reads, a proxy that holds the replies how many are
 * on the wire at once; the tests check that they happen with a backlog,
 * two at a time, that nothing is lost or handed out twice when the
 * connection is cut again and again while they are on the wire, that a
 * close with them on the wire hands back what they read, and that a
 * paused holder (SIGSTOP, longer than claim idle and the lease) hands out
 * nothing a peer took meanwhile.
 */
#include "harness/fakepeer.h"
#include "integ/poll_helpers.h"

#include <errno.h>
#include <sys/socket.h>

#define PQ "emq:{jobs}"

/* ---- the server's MONITOR, read on a thread ------------------------------ */

/* Counts the consumer's reads of new entries in the MONITOR stream: those
 * sent ahead (XREADGROUP ... > without BLOCK) and the blocking ones. */
typedef struct read_monitor {
    int fd;
    pthread_t thread;
    atomic_long ahead, blocking;
    char line[1024]; /* the start of the current line */
    size_t len;
} read_monitor;

static void monitor_line(read_monitor *m) {
    m->line[m->len < sizeof m->line ? m->len : sizeof m->line - 1] = '\0';
    const char *read = strstr(m->line, "\"XREADGROUP\"");
    if (read == NULL || m->len >= sizeof m->line - 1)
        return; /* not a read (a long line is an ack or a script) */
    size_t n = strlen(m->line);
    while (n > 0 && (m->line[n - 1] == '\r' || m->line[n - 1] == '\n'))
        m->line[--n] = '\0';
    if (n < 3 || strcmp(m->line + n - 3, "\">\"") != 0)
        return; /* its own pending entries (an ID, not ">") */
    if (strstr(read, "\"BLOCK\"") != NULL)
        atomic_fetch_add(&m->blocking, 1);
    else
        atomic_fetch_add(&m->ahead, 1);
}

static void *monitor_main(void *arg) {
    read_monitor *m = arg;
    char buf[16384];
    for (;;) {
        ssize_t r = read(m->fd, buf, sizeof buf);
        if (r < 0 && (errno == EINTR || errno == EAGAIN))
            continue; /* EAGAIN: the socket's 5 s receive timeout */
        if (r <= 0)
            return NULL; /* shut down by monitor_stop, or the server */
        for (ssize_t i = 0; i < r; i++) {
            if (m->len < sizeof m->line)
                m->line[m->len] = buf[i];
            m->len++;
            if (buf[i] == '\n') {
                monitor_line(m);
                m->len = 0;
            }
        }
    }
}

static void monitor_start(read_monitor *m, const emq_srv *s) {
    memset(m, 0, sizeof *m);
    m->fd = emq_srv_monitor(s);
    ASSERT(m->fd >= 0);
    ASSERT(pthread_create(&m->thread, NULL, monitor_main, m) == 0);
}

static void monitor_stop(read_monitor *m) {
    shutdown(m->fd, SHUT_RDWR);
    pthread_join(m->thread, NULL);
    close(m->fd);
}

/* ---- helpers --------------------------------------------------------------
 */

/* A pull consumer reading 50 at a time with room for many reads. */
static emq_conf_t *ahead_conf(const char *url) {
    emq_conf_t *conf = poll_conf(url, "1000");
    conf_set(conf, "count", "50");
    conf_set(conf, "claim.min_idle_ms", "5000");
    conf_set(conf, "claim.interval_ms", "1000");
    return conf;
}

/* A server whose queue jobs has group g (at its end) and then n entries
 * j0..j<n-1> waiting; *adm an admin connection to it. */
static emq_srv *backlog(int n, emq_conn_t **adm) {
    emq_srv *s = emq_srv_start(NULL);
    *adm = admin_connect(s);
    CMD_NOERR(*adm, "XGROUP", "CREATE", PQ, "g", "$", "MKSTREAM");
    produce_n(s, "jobs", "j", n);
    return s;
}

/* Waits (bounded) until the pool recorded want entries and the group has
 * nothing pending, then checks that each of the n values j0..j<n-1> came,
 * none twice at one delivery count. */
static void all_handled_once(work_pool *pool, emq_conn_t *adm, size_t n,
                             int bound_ms) {
    WAIT_UNTIL((recorded(&pool->r) >= n && pending_total(adm, PQ, "g") == 0) ||
                   atomic_load(&pool->poller_ended),
               bound_ms, "every entry handled and acknowledged");
    if (atomic_load(&pool->poller_ended))
        FAIL("poll failed: %s: %s", emq_status_name(pool->poll_status),
             pool->poll_error);
    int twice = 0;
    ASSERT_EQ_INT((long long)wp_distinct(&pool->r, &twice), (long long)n);
    ASSERT_EQ_INT(twice, 0);
    ASSERT_EQ_INT(atomic_load(&pool->settle_errors), 0);
}

/* ---- tests ----------------------------------------------------------------
 */

/* A backlog read by a pull consumer: reads go ahead (the MONITOR shows
 * XREADGROUP ... > without BLOCK), and every entry is handed out once and
 * acknowledged, the acks riding with the reads. */
TEST_TIMEOUT(ahead_reads_go_out_with_a_backlog, 60) {
    emq_conn_t *adm;
    emq_srv *s = backlog(3000, &adm);
    static read_monitor mon;
    monitor_start(&mon, s);
    emq_conf_t *conf = ahead_conf(emq_srv_url(s));
    emq_consumer_t *c = poll_consumer(conf);
    static work_pool pool;
    wp_start(&pool, c, 4, 0);
    all_handled_once(&pool, adm, 3000, 30000);
    wp_stop(&pool);
    emq_error err;
    ASSERT_OK(emq_consumer_close(c, 2000, &err), &err);
    emq_consumer_stats st;
    emq_consumer_stats_get(c, &st);
    monitor_stop(&mon);
    printf("    %ld reads sent ahead, %ld blocking, %llu answered\n",
           atomic_load(&mon.ahead), atomic_load(&mon.blocking),
           (unsigned long long)st.reads);
    ASSERT(atomic_load(&mon.ahead) > 0);
    ASSERT_EQ_INT((long long)st.acked, 3000);
    ASSERT_EQ_INT((long long)st.delivered, 3000);
    emq_consumer_destroy(c);
    emq_conf_destroy(conf);
    emq_conn_destroy(adm);
    emq_srv_stop(s);
}

/* The connection cut again and again (every 10 ms, 60 times) while reads
 * go ahead with a backlog: each cut loses the read on the wire and the
 * acks riding with it, and nothing else; every entry is handled (an entry
 * whose ack was cut comes again with its next delivery count) and none is
 * handed out twice at one count. */
TEST_TIMEOUT(ahead_read_cut_again_and_again_loses_nothing, 90) {
    emq_conn_t *adm;
    emq_srv *s = backlog(10000, &adm);
    static read_monitor mon;
    monitor_start(&mon, s);
    emq_peer_opts po = {.mode = EMQ_PEER_PROXY,
                        .upstream_port = emq_srv_port(s)};
    emq_peer *proxy = emq_peer_start(&po);
    emq_conf_t *conf = ahead_conf(emq_peer_url(proxy));
    conf_set(conf, P_RECONNECT_BASE, "5");
    conf_set(conf, P_RECONNECT_MAX, "20");
    emq_consumer_t *c = poll_consumer(conf);
    static work_pool pool;
    wp_start(&pool, c, 8, 1);
    /* Cuts once the consumer is up: a first connection that fails is
     * fatal by design (consumer.connect waits instead), and under
     * memcheck the first connect through the proxy was cut. */
    WAIT_UNTIL(recorded(&pool.r) > 0 || atomic_load(&pool.poller_ended), 10000,
               "the first entry handed out");
    if (atomic_load(&pool.poller_ended))
        FAIL("poll failed: %s: %s", emq_status_name(pool.poll_status),
             pool.poll_error);
    int cuts = 0;
    for (; cuts < 60 && recorded(&pool.r) < 10000; cuts++) {
        usleep(10 * 1000);
        emq_peer_drop(proxy);
    }
    /* An ack cut with its connection is sent again or the entry comes
     * back to this name (recover self): either way it ends acknowledged. */
    all_handled_once(&pool, adm, 10000, 60000);
    wp_stop(&pool);
    emq_consumer_stats st;
    emq_consumer_stats_get(c, &st);
    monitor_stop(&mon);
    printf("    %d cuts, %llu reconnects, %zu handler calls for 10000, "
           "%ld reads sent ahead\n",
           cuts, (unsigned long long)st.reconnects, recorded(&pool.r),
           atomic_load(&mon.ahead));
    ASSERT(cuts > 0);
    ASSERT(atomic_load(&mon.ahead) > 0);
    emq_error err;
    ASSERT_OK(emq_consumer_close(c, 2000, &err), &err);
    emq_consumer_destroy(c);
    emq_conf_destroy(conf);
    emq_peer_stop(proxy);
    emq_conn_destroy(adm);
    emq_srv_stop(s);
}

/* Reads go ahead two at a time: while the server's replies are held at a
 * proxy, the consumer has two reads of new entries on the wire (it sends
 * the next before the last one's reply came), never more; with the
 * replies flowing again every entry is handled once. Each hold is a fresh
 * chance (a claim beat or a full ready queue pauses the reads ahead), at
 * most 20 of them. */
TEST_TIMEOUT(ahead_two_reads_on_the_wire_at_once, 90) {
    enum { N = 20000 };
    emq_conn_t *adm;
    emq_srv *s = backlog(N, &adm);
    emq_icept *proxy = emq_icept_start(emq_srv_port(s), NULL, 0);
    emq_conf_t *conf = ahead_conf(emq_icept_url(proxy));
    emq_consumer_t *c = poll_consumer(conf);
    static work_pool pool;
    wp_start(&pool, c, 8, 1);
    int holds = 0;
    for (; holds < 20 && emq_icept_most_reads(proxy) < 2; holds++) {
        size_t before = recorded(&pool.r);
        WAIT_UNTIL(recorded(&pool.r) > before || recorded(&pool.r) >= N ||
                       atomic_load(&pool.poller_ended),
                   10000, "entries handed out");
        if (recorded(&pool.r) >= N || atomic_load(&pool.poller_ended))
            break;
        emq_icept_hold(proxy, 1);
        int64_t end = now_ms() + emq_test_ms(200);
        while (emq_icept_most_reads(proxy) < 2 && now_ms() < end)
            usleep(2000);
        emq_icept_hold(proxy, 0);
    }
    all_handled_once(&pool, adm, N, 60000);
    wp_stop(&pool);
    printf("    %d holds; at most %d reads on the wire at once\n", holds,
           emq_icept_most_reads(proxy));
    ASSERT_EQ_INT(emq_icept_most_reads(proxy), 2);
    emq_error err;
    ASSERT_OK(emq_consumer_close(c, 2000, &err), &err);
    emq_consumer_destroy(c);
    emq_conf_destroy(conf);
    emq_icept_stop(proxy);
    emq_conn_destroy(adm);
    emq_srv_stop(s);
}

/* A close while reads go ahead: what was read and not handed out (a read
 * on the wire included) is handed back, released with its count undone or
 * marked unseen, and the name's next consumer gets all of it at its first
 * delivery; what was handed out and acknowledged is gone. */
TEST_TIMEOUT(ahead_close_hands_back_what_went_ahead, 60) {
    emq_conn_t *adm;
    emq_srv *s = backlog(2000, &adm);
    emq_conf_t *conf = ahead_conf(emq_srv_url(s));
    emq_consumer_t *c = poll_consumer(conf);
    emq_entry *got[64];
    emq_error err;
    size_t acked = 0;
    while (acked < 300) {
        size_t n = poll_until(c, got, 64, 5000);
        ASSERT(n > 0);
        for (size_t i = 0; i < n; i++) {
            ASSERT_EQ_INT((long long)got[i]->deliveries, 1);
            ASSERT_OK(emq_consumer_ack(c, got[i], &err), &err);
            emq_entry_free(got[i]);
        }
        acked += n;
    }
    ASSERT_OK(emq_consumer_close(c, 2000, &err), &err);
    emq_consumer_stats st;
    emq_consumer_stats_get(c, &st);
    long long left = pending_of(adm, PQ, "g", "w");
    long long marked = CMD_INT(adm, "SCARD", "emq:{jobs}:unseen:g");
    printf("    %zu acknowledged, %llu reads; %lld left pending: %llu "
           "released, %lld marked unseen\n",
           acked, (unsigned long long)st.reads, left,
           (unsigned long long)st.released, marked);
    ASSERT_EQ_INT((long long)st.acked, (long long)acked);
    ASSERT_EQ_INT((long long)st.released + marked, left);
    emq_consumer_destroy(c);
    /* The next consumer of the name: the rest, each at its first
     * delivery (a count undone, or not counted again). */
    c = poll_consumer(conf);
    size_t rest = 0;
    int64_t end = now_ms() + emq_test_ms(20000);
    while (acked + rest < 2000 && now_ms() < end) {
        size_t n = 0;
        ASSERT_OK(emq_consumer_poll(c, got, 64, 100, &n, &err), &err);
        for (size_t i = 0; i < n; i++) {
            ASSERT_EQ_INT((long long)got[i]->deliveries, 1);
            ASSERT_OK(emq_consumer_ack(c, got[i], &err), &err);
            emq_entry_free(got[i]);
        }
        rest += n;
    }
    ASSERT_EQ_INT((long long)(acked + rest), 2000);
    ASSERT_OK(emq_consumer_close(c, 2000, &err), &err);
    WAIT_UNTIL(pending_total(adm, PQ, "g") == 0, 5000, "all acknowledged");
    emq_consumer_destroy(c);
    emq_conf_destroy(conf);
    emq_conn_destroy(adm);
    emq_srv_stop(s);
}

/* Holds the server with a script for 300 ms past its BUSY threshold,
 * then kills it (on a thread of its own, while the test polls). */
static void *hold_server_busy(void *arg) {
    busy_script *b = arg;
    pthread_t script;
    if (pthread_create(&script, NULL, run_busy_script, b) != 0)
        return NULL;
    int64_t end = now_ms() + emq_test_ms(5000);
    while (!server_busy(b->s) && now_ms() < end)
        usleep(5000);
    usleep(300 * 1000); /* reads meet BUSY meanwhile */
    char out[256];
    emq_srv_cmd(b->s, out, sizeof out, "SCRIPT", "KILL", NULL);
    pthread_join(script, NULL);
    return NULL;
}

/* A long script holds the server while reads go ahead through a backlog
 * of 40,000: a read sent ahead is answered BUSY (not run) and dropped,
 * the next read waits BUSY out, and after SCRIPT KILL every entry is
 * handled, none twice at one delivery count, with no reconnect. */
TEST_TIMEOUT(ahead_read_answered_busy_is_read_again, 90) {
    enum { N = 40000 };
    emq_srv_opts opts = {.extra_config = "lua-time-limit 100\n"};
    emq_srv *s = emq_srv_start(&opts);
    emq_conn_t *adm = admin_connect(s);
    CMD_NOERR(adm, "XGROUP", "CREATE", PQ, "g", "$", "MKSTREAM");
    produce_n(s, "jobs", "j", N);
    emq_conf_t *conf = ahead_conf(emq_srv_url(s));
    emq_consumer_t *c = poll_consumer(conf);
    static long long first_count[N]; /* delivery count first seen; 0 none */
    memset(first_count, 0, sizeof first_count);
    static busy_script b;
    memset(&b, 0, sizeof b);
    b.s = s;
    pthread_t holder;
    int holding = 0;
    size_t distinct = 0, calls = 0;
    emq_entry *got[64];
    emq_error err;
    int64_t end = now_ms() + emq_test_ms(60000);
    while (distinct < N && now_ms() < end) {
        size_t n = 0;
        ASSERT_OK(emq_consumer_poll(c, got, 64, 100, &n, &err), &err);
        for (size_t i = 0; i < n; i++) {
            char v[32];
            value_of(got[i], v, sizeof v);
            long idx = strtol(v + 1, NULL, 10);
            ASSERT(v[0] == 'j' && idx >= 0 && idx < N);
            if (first_count[idx] == (long long)got[i]->deliveries)
                FAIL("%s handed out twice at delivery %lld", v,
                     (long long)got[i]->deliveries);
            if (first_count[idx] == 0) {
                first_count[idx] = (long long)got[i]->deliveries;
                distinct++;
            }
            calls++;
            ASSERT_OK(emq_consumer_ack(c, got[i], &err), &err);
            emq_entry_free(got[i]);
        }
        if (!holding && distinct >= 2000) {
            ASSERT(pthread_create(&holder, NULL, hold_server_busy, &b) == 0);
            holding = 1;
        }
    }
    ASSERT(holding);
    pthread_join(holder, NULL);
    ASSERT_CONTAINS(b.out, "killed");
    ASSERT_EQ_INT((long long)distinct, N);
    WAIT_UNTIL(pending_total(adm, PQ, "g") == 0, 10000, "all acknowledged");
    emq_consumer_stats st;
    emq_consumer_stats_get(c, &st);
    printf("    %llu server waits, %llu reconnects, %zu handed out for %d\n",
           (unsigned long long)st.server_waits,
           (unsigned long long)st.reconnects, calls, N);
    ASSERT_EQ_INT((long long)st.reconnects, 0);
    ASSERT_OK(emq_consumer_close(c, 2000, &err), &err);
    emq_consumer_destroy(c);
    emq_conf_destroy(conf);
    emq_conn_destroy(adm);
    emq_srv_stop(s);
}

/* Reads ahead with entries held longer than claim idle and the lease:
 * 200 entries waiting, 100 workers holding each for 5.5 s
 * (claim.min_idle_ms STALL_CLAIM_IDLE_MS, 8 s, and lease.ttl_ms
 * STALL_LEASE_TTL, 10 s: a stall of 5 s loses neither), reads of 50 going
 * ahead into a queue of up to 1000, while a peer claims everything idle
 * 8 s every 100 ms. The second hundred waits and then is in a worker's
 * hands for 11 s in all.
 * What waits and what is in a handler's hands stays owned: the peer takes
 * nothing, and every entry is handled once. The consumer's own claim
 * beat is off (once a minute): it would take back what it failed to
 * refresh (as its own again) before the peer did. */
TEST_TIMEOUT(ahead_reads_with_slow_handlers_stay_owned, 90) {
    emq_conn_t *adm;
    emq_srv *s = backlog(200, &adm);
    static read_monitor mon;
    monitor_start(&mon, s);
    emq_conf_t *conf = ahead_conf(emq_srv_url(s));
    conf_set(conf, "claim.min_idle_ms", STALL_CLAIM_IDLE);
    conf_set(conf, "claim.interval_ms", "60000");
    conf_set(conf, "lease.ttl_ms", STALL_LEASE_TTL);
    emq_consumer_t *c = poll_consumer(conf);
    static claimer peer;
    claimer_start_idle(&peer, s, STALL_CLAIM_IDLE_MS);
    static work_pool pool;
    wp_start(&pool, c, 100, 5500);
    /* An entry the peer took fails here, not at the bound below. */
    WAIT_UNTIL((recorded(&pool.r) >= 200 && pending_total(adm, PQ, "g") == 0) ||
                   atomic_load(&peer.claimed) > 0 ||
                   atomic_load(&pool.poller_ended),
               40000, "every entry handled and acknowledged");
    ASSERT_EQ_INT(atomic_load(&peer.claimed), 0);
    all_handled_once(&pool, adm, 200, 40000);
    wp_stop(&pool);
    claimer_stop(&peer);
    monitor_stop(&mon);
    emq_consumer_stats st;
    emq_consumer_stats_get(c, &st);
    printf("    %ld reads sent ahead, %d peer beats, %llu refreshes\n",
           atomic_load(&mon.ahead), atomic_load(&peer.beats),
           (unsigned long long)st.refreshed);
    ASSERT(atomic_load(&mon.ahead) > 0);
    ASSERT(atomic_load(&peer.beats) > 20);
    ASSERT_EQ_INT(atomic_load(&peer.claimed), 0);
    ASSERT_EQ_INT((long long)recorded(&pool.r), 200);
    ASSERT_EQ_INT((long long)st.ownership_lost, 0);
    ASSERT(st.refreshed > 0);
    emq_error err;
    ASSERT_OK(emq_consumer_close(c, 5000, &err), &err);
    emq_consumer_destroy(c);
    emq_conf_destroy(conf);
    emq_conn_destroy(adm);
    emq_srv_stop(s);
}
