/* SPDX-License-Identifier: BSD-3-Clause */
/* test_consumer_loop_reads.c: an event loop that reads for itself, against
 * a real redis-server (docs/CONSUMER.md, event loops).
 *
 * While an event loop watches the consumer's descriptor and nothing waits
 * to be handed out, the reading thread lends it the blocking read: it
 * sends XREADGROUP ... BLOCK and puts the read connection's socket in the
 * descriptor's epoll set, so the loop wakes when the reply arrives and
 * its step reads it on the loop's thread; the step after the entries went
 * out sends the next read. The tests run a loop over epoll the way a
 * service would and check that the steps read the replies themselves,
 * that an idle loop and a loop whose replies are held do not spin, that a
 * close ends a read lent to a loop at once, that connections cut again
 * and again lose nothing, that a handler slower than claim.min_idle_ms
 * keeps what the loop read (a peer claims nothing), that a loop and a
 * poller of one consumer do not make each other spin, and that a step
 * never waits for a reply that arrives slowly.
 */
#include "consumer/ready.h"
#include "harness/fakepeer.h"
#include "integ/poll_helpers.h"
#include "integ/tally_helpers.h"

#include <poll.h>
#include <sys/epoll.h>
#include <unistd.h>

#define LQ "emq:{jobs}"
#define LOOP_MAX 64

/* A service's event loop over the consumer's descriptor. */
typedef struct loop {
    emq_consumer_t *c;
    int ep;                  /* the loop's own epoll set */
    long wakeups;            /* the descriptor was ready */
    long empty_steps;        /* steps that handed out nothing */
    int handle_ms;           /* per entry, before its ack */
    size_t long_at;          /* this hand-out (1-based) is held... */
    int long_ms;             /* ...this long instead (0: none) */
    int seen[LOOP_MAX];      /* per produced index: hand-outs */
    int unexplained;         /* a second hand-out at delivery 1 */
    size_t handed, distinct; /* hand-outs; indexes seen */
    int closed;              /* a step said EMQ_ECLOSED */
    emq_status ack_status;   /* the first failed ack's */
} loop;

static void loop_open(loop *l, emq_consumer_t *c) {
    memset(l, 0, sizeof *l);
    l->c = c;
    emq_error err;
    int fd = emq_consumer_fd(c, &err);
    ASSERT(fd >= 0);
    l->ep = epoll_create1(EPOLL_CLOEXEC);
    struct epoll_event ev = {.events = EPOLLIN, .data.fd = fd};
    ASSERT(l->ep >= 0 && epoll_ctl(l->ep, EPOLL_CTL_ADD, fd, &ev) == 0);
}

static void loop_close(loop *l) { close(l->ep); }

/* Hands one entry to the service: counts it by the index in its value
 * ("e<i>"), holds it handle_ms, acks it. */
static void loop_handle(loop *l, emq_entry *e) {
    char v[32];
    snprintf(v, sizeof v, "%.*s", (int)e->fields[0].value_len,
             e->fields[0].value);
    int i = atoi(v + 1);
    ASSERT(v[0] == 'e' && i >= 0 && i < LOOP_MAX);
    if (l->seen[i]++ == 0)
        l->distinct++;
    else if (e->deliveries < 2)
        l->unexplained++;
    l->handed++;
    int ms = l->long_ms > 0 && l->handed == l->long_at ? l->long_ms
                                                       : l->handle_ms;
    if (ms > 0)
        usleep((useconds_t)ms * 1000);
    emq_error err;
    emq_status st = emq_consumer_ack(l->c, e, &err);
    if (st != EMQ_OK && l->ack_status == EMQ_OK)
        l->ack_status = st;
    emq_entry_free(e);
}

/* Runs the loop for at most ms, until distinct indexes were handed out
 * (0: for the whole ms), or a step says the consumer stopped. */
static void loop_run(loop *l, size_t distinct, int ms) {
    int64_t end = now_ms() + ms;
    while (now_ms() < end && (distinct == 0 || l->distinct < distinct)) {
        struct epoll_event ev;
        int64_t left = end - now_ms();
        if (epoll_wait(l->ep, &ev, 1, left < 100 ? (int)left : 100) <= 0)
            continue;
        l->wakeups++;
        emq_entry *got[8];
        size_t n = 0;
        emq_error err;
        emq_status st = emq_consumer_step(l->c, got, 8, &n, &err);
        if (st == EMQ_ECLOSED) {
            l->closed = 1;
            return;
        }
        ASSERT_OK(st, &err);
        if (n == 0)
            l->empty_steps++;
        for (size_t i = 0; i < n; i++)
            loop_handle(l, got[i]);
    }
}

/* Adds entries {"n": "e<first>"} .. "e<first + n - 1>" to jobs. */
static void produce_from(const emq_srv *s, int first, int n) {
    produce_range(s, "jobs", "e", first, n);
}

/* Reads taken up by steps or pollers so far (ready.c). */
static unsigned lent_turns(emq_consumer_t *c) {
    emq__ready *r = c->ready;
    pthread_mutex_lock(&r->mu);
    unsigned turns = r->lend_turns;
    pthread_mutex_unlock(&r->mu);
    return turns;
}

/* A poller of the same consumer on a thread of its own: takes one entry
 * at a time with a timeout of 200 ms, holds it 3 ms, acks it. */
typedef struct poller_thread {
    emq_consumer_t *c;
    pthread_t thread;
    atomic_int quit, got;
} poller_thread;

static void *poller_thread_main(void *arg) {
    poller_thread *p = arg;
    while (!atomic_load(&p->quit)) {
        emq_entry *e;
        size_t n = 0;
        emq_error err;
        if (emq_consumer_poll(p->c, &e, 1, 200, &n, &err) != EMQ_OK)
            break;
        if (n == 0)
            continue;
        usleep(3000);
        (void)emq_consumer_ack(p->c, e, &err);
        emq_entry_free(e);
        atomic_fetch_add(&p->got, 1);
    }
    return NULL;
}

static void poller_thread_start(poller_thread *p, emq_consumer_t *c) {
    memset(p, 0, sizeof *p);
    p->c = c;
    ASSERT(pthread_create(&p->thread, NULL, poller_thread_main, p) == 0);
}

static void poller_thread_stop(poller_thread *p) {
    atomic_store(&p->quit, 1);
    pthread_join(p->thread, NULL);
}

/* Adds n entries e0.. to jobs from a thread of its own, gap_ms apart. */
typedef struct producer_thread {
    const emq_srv *s;
    int n, gap_ms;
    pthread_t thread;
} producer_thread;

static void *producer_thread_main(void *arg) {
    producer_thread *t = arg;
    for (int i = 0; i < t->n; i++) {
        produce_from(t->s, i, 1);
        usleep((useconds_t)t->gap_ms * 1000);
    }
    return NULL;
}

static void producer_thread_start(producer_thread *t, const emq_srv *s, int n,
                                  int gap_ms) {
    t->s = s;
    t->n = n;
    t->gap_ms = gap_ms;
    ASSERT(pthread_create(&t->thread, NULL, producer_thread_main, t) == 0);
}

/* A consumer w of jobs/g (made here, at s) at url with long_reads of
 * block_ms. */
static emq_consumer_t *loop_consumer(const emq_srv *s, const char *url,
                                     const char *block_ms) {
    char out[256];
    ASSERT_EQ_INT(emq_srv_cmd(s, out, sizeof out, "XGROUP", "CREATE", LQ, "g",
                              "$", "MKSTREAM", NULL),
                  '+');
    emq_conf_t *conf = fault_conf(url);
    long_reads(conf, block_ms);
    emq_consumer_t *c;
    emq_error err;
    ASSERT_OK(emq_consumer_new(conf, NULL, NULL, &c, &err), &err);
    emq_conf_destroy(conf);
    return c;
}

static void loop_end(loop *l, const emq_srv *s) {
    emq_error err;
    ASSERT_OK(emq_consumer_close(l->c, 3000, &err), &err);
    ASSERT_EQ_INT(l->ack_status, EMQ_OK);
    ASSERT_EQ_INT(pending_count(s, LQ, "g"), 0);
    emq_consumer_destroy(l->c);
    loop_close(l);
}

/* Entries added one at a time reach the loop through steps that read the
 * replies themselves; an idle loop is not woken (the empty reply at a
 * block's end is the reading thread's to read), and no step spins. */
TEST_TIMEOUT(loop_steps_read_the_replies_themselves, 90) {
    emq_srv *s = emq_srv_start(NULL);
    static loop l;
    loop_open(&l, loop_consumer(s, emq_srv_url(s), "300"));
    loop_run(&l, 0, 1000); /* three blocks end meanwhile */
    ASSERT_EQ_SIZE(l.handed, 0);
    if (l.wakeups > 2)
        FAIL("idle, the descriptor woke the loop %ld times in 1 s", l.wakeups);
    unsigned before = lent_turns(l.c);
    const int rounds = 30;
    for (int i = 0; i < rounds; i++) {
        produce_from(s, i, 1);
        loop_run(&l, (size_t)i + 1, emq_test_ms(10000));
        ASSERT_EQ_SIZE(l.distinct, (size_t)i + 1);
    }
    ASSERT_EQ_SIZE(l.handed, (size_t)rounds);
    unsigned turns = lent_turns(l.c) - before;
    printf("    %d entries: %u reads taken up by the loop's steps, %ld "
           "wake-ups, %ld steps with nothing\n",
           rounds, turns, l.wakeups, l.empty_steps);
    ASSERT(turns >= 1);
    if (l.wakeups > 4L * rounds + 10)
        FAIL("%ld wake-ups for %d entries: the loop spins", l.wakeups, rounds);
    loop_end(&l, s);
    emq_srv_stop(s);
}

/* The server's replies held (a stalled server) while the loop's read is
 * lent: the loop is not woken for nothing, and once the replies flow the
 * entries added meanwhile come, once each. Then a close ends the read
 * lent to the idle loop (a block of a minute) at once. */
TEST_TIMEOUT(loop_lend_rides_out_held_replies_and_a_close, 90) {
    emq_srv *s = emq_srv_start(NULL);
    emq_icept *proxy = emq_icept_start(emq_srv_port(s), NULL, 0);
    static loop l;
    loop_open(&l, loop_consumer(s, emq_icept_url(proxy), "60000"));
    produce_from(s, 0, 1);
    loop_run(&l, 1, emq_test_ms(10000));
    ASSERT_EQ_SIZE(l.distinct, 1);
    loop_run(&l, 0, 100); /* the step that sends the next read */
    emq_icept_hold(proxy, 1);
    usleep((useconds_t)emq_test_ms(100) * 1000); /* the proxy holds now */
    produce_from(s, 1, 5);
    long woke = l.wakeups;
    loop_run(&l, 0, 1000);
    ASSERT_EQ_SIZE(l.handed, 1);
    if (l.wakeups - woke > 3)
        FAIL("replies held, the loop woke %ld times in 1 s", l.wakeups - woke);
    emq_icept_hold(proxy, 0);
    loop_run(&l, 6, emq_test_ms(10000));
    ASSERT_EQ_SIZE(l.distinct, 6);
    ASSERT_EQ_SIZE(l.handed, 6);
    loop_run(&l, 0, 300); /* idle: the read is lent again */
    emq_error err;
    int64_t t0 = now_ms();
    ASSERT_OK(emq_consumer_close(l.c, 3000, &err), &err);
    int64_t took = now_ms() - t0;
    printf("    close returned %lld ms after it was called\n", (long long)took);
    if (took > emq_test_ms(2000))
        FAIL("close took %lld ms with a read lent to the loop",
             (long long)took);
    loop_end(&l, s);
    emq_icept_stop(proxy);
    emq_srv_stop(s);
}

/* Every connection of the consumer cut again and again, mid-read, while
 * the loop's reads are lent: every entry reaches the loop, a second time
 * only as a redelivery, and nothing is left pending. */
TEST_TIMEOUT(loop_lend_survives_cut_connections, 120) {
    emq_srv *s = emq_srv_start(NULL);
    static loop l;
    loop_open(&l, loop_consumer(s, emq_srv_url(s), "1000"));
    const int rounds = 5, per = 10;
    for (int r = 0; r < rounds; r++) {
        loop_run(&l, 0, 100); /* the read is lent */
        produce_from(s, r * per, per);
        char out[256];
        ASSERT_EQ_INT(emq_srv_cmd(s, out, sizeof out, "CLIENT", "KILL", "TYPE",
                                  "normal", "SKIPME", "yes", NULL),
                      ':');
        loop_run(&l, (size_t)(r + 1) * per, emq_test_ms(15000));
        ASSERT_EQ_SIZE(l.distinct, (size_t)(r + 1) * per);
    }
    ASSERT_EQ_INT(l.unexplained, 0);
    emq_consumer_stats st;
    emq_consumer_stats_get(l.c, &st);
    printf("    %d entries over %d cuts: %zu hand-outs, %llu reconnects\n",
           rounds * per, rounds, l.handed, (unsigned long long)st.reconnects);
    ASSERT(st.reconnects >= (uint64_t)rounds);
    if (l.wakeups > 4L * rounds * per + 50)
        FAIL("%ld wake-ups for %d entries: the loop spins", l.wakeups,
             rounds * per);
    /* Acks cut off with a connection may fail: the entry comes again,
     * and the loop runs until that one is handed out and acked too. */
    int64_t end = now_ms() + emq_test_ms(15000);
    while (pending_count(s, LQ, "g") > 0 && now_ms() < end)
        loop_run(&l, 0, 100);
    ASSERT_EQ_INT(l.unexplained, 0);
    l.ack_status = EMQ_OK;
    loop_end(&l, s);
    emq_srv_stop(s);
}

/* A loop whose handler holds an entry longer than claim.min_idle_ms, with
 * a peer claiming anything idle that long: the reads the loop's steps do
 * not take up go back to the reading thread, what was read stays the
 * loop's (refreshed), and the peer claims nothing. The second entry
 * handed out is held 9 s and the last two wait behind it as long; the
 * others are held 600 ms. Claim idle is STALL_CLAIM_IDLE_MS (8 s: a stall
 * must pass 5 s for the peer to take a live entry; on a loaded machine a
 * process gets no CPU for 2-4 s now and then) and the lease
 * STALL_LEASE_TTL (an ack past its local deadline would answer
 * EMQ_ELOST). The peer only claims (it reads nothing new), so it beats
 * from the start, and the consumer's own claim beat is off (once a
 * minute): it would take back what it failed to refresh (as its own
 * again) before the peer did. */
TEST_TIMEOUT(loop_slow_handler_keeps_what_it_read, 90) {
    emq_srv *s = emq_srv_start(NULL);
    emq_conn_t *adm = admin_connect(s);
    CMD_NOERR(adm, "XGROUP", "CREATE", LQ, "g", "$", "MKSTREAM");
    emq_conf_t *conf = fault_conf(emq_srv_url(s));
    conf_set(conf, "claim.min_idle_ms", STALL_CLAIM_IDLE);
    conf_set(conf, "claim.interval_ms", "60000");
    conf_set(conf, "lease.ttl_ms", STALL_LEASE_TTL);
    emq_consumer_t *c;
    emq_error err;
    ASSERT_OK(emq_consumer_new(conf, NULL, NULL, &c, &err), &err);
    emq_conf_destroy(conf);
    static claimer peer;
    claimer_start_idle(&peer, s, STALL_CLAIM_IDLE_MS);
    static loop l;
    loop_open(&l, c);
    l.handle_ms = 600;
    l.long_at = 2;
    l.long_ms = STALL_CLAIM_IDLE_MS + 1000;
    loop_run(&l, 0, 300); /* the read is lent */
    produce_from(s, 0, 4);
    loop_run(&l, 4, emq_test_ms(20000) + l.long_ms);
    claimer_stop(&peer);
    ASSERT_EQ_INT(atomic_load(&peer.claimed), 0);
    ASSERT_EQ_SIZE(l.distinct, 4);
    ASSERT_EQ_SIZE(l.handed, 4);
    ASSERT_EQ_INT(l.unexplained, 0);
    ASSERT(atomic_load(&peer.beats) > 20);
    loop_end(&l, s);
    emq_conn_destroy(adm);
    emq_srv_stop(s);
}

/* One poller with a timeout and a loop over the descriptor, on one
 * consumer: the reads lent to the poller are none of the loop's, so its
 * descriptor says nothing of them (it woke once per read before this was
 * right: hundreds of thousands of empty steps). */
TEST_TIMEOUT(loop_and_poller_together_do_not_spin, 60) {
    emq_srv *s = emq_srv_start(NULL);
    static loop l;
    loop_open(&l, loop_consumer(s, emq_srv_url(s), "1000"));
    static poller_thread p;
    poller_thread_start(&p, l.c);
    const int n = 60;
    static producer_thread pt;
    producer_thread_start(&pt, s, n, 5);
    int64_t end = now_ms() + emq_test_ms(15000);
    while (l.distinct + (size_t)atomic_load(&p.got) < (size_t)n &&
           now_ms() < end)
        loop_run(&l, 0, 50);
    pthread_join(pt.thread, NULL);
    poller_thread_stop(&p);
    printf("    %d entries: %zu to the loop, %d to the poller; the loop "
           "woke %ld times, %ld with nothing\n",
           n, l.distinct, atomic_load(&p.got), l.wakeups, l.empty_steps);
    ASSERT_EQ_SIZE(l.distinct + (size_t)atomic_load(&p.got), (size_t)n);
    if (l.empty_steps > 4L * n + 20)
        FAIL("%ld steps with nothing for %d entries: the loop spins",
             l.empty_steps, n);
    loop_end(&l, s);
    emq_srv_stop(s);
}

/* A reply of a few hundred KiB that arrives slowly (a proxy pauses 100 ms
 * after each 16 KiB): each step reads what came and returns; none waits
 * for the rest (one step took the whole second before).
 *
 * Checked against the run's own structure, not a step's speed: the
 * entries need at least a second to arrive (the proxy's pauses, which a
 * loaded machine only makes longer), and no step may take half of that.
 * A step that waits for the reply spans most of it; one that reads what
 * is there takes a millisecond, and would need a stall of half a second
 * to come near. */
TEST_TIMEOUT(loop_step_never_waits_for_a_slow_reply, 90) {
    emq_srv *s = emq_srv_start(NULL);
    emq_peer_opts po = {.mode = EMQ_PEER_PROXY,
                        .upstream_port = emq_srv_port(s)};
    emq_peer *proxy = emq_peer_start(&po);
    emq_peer_pace(proxy, 100);
    static loop l;
    loop_open(&l, loop_consumer(s, emq_peer_url(proxy), "60000"));
    loop_run(&l, 0, 300); /* the read is lent */
    const int n = 12;     /* one reply of ~200 KiB */
    produce_blobs(s, "jobs", "e", 0, n, 16384);
    emq_error err;
    int64_t began = now_ms(), end = began + emq_test_ms(30000);
    int64_t longest = 0;
    while (l.distinct < (size_t)n && now_ms() < end) {
        struct epoll_event ev;
        if (epoll_wait(l.ep, &ev, 1, 100) <= 0)
            continue;
        l.wakeups++;
        emq_entry *got[LOOP_MAX];
        size_t k = 0;
        int64_t t0 = now_ms();
        ASSERT_OK(emq_consumer_step(l.c, got, LOOP_MAX, &k, &err), &err);
        if (now_ms() - t0 > longest)
            longest = now_ms() - t0;
        for (size_t i = 0; i < k; i++)
            loop_handle(&l, got[i]);
    }
    int64_t spread = now_ms() - began;
    printf("    %d entries of 16 KiB over %lld ms: the longest step took %lld "
           "ms (%ld wake-ups)\n",
           n, (long long)spread, (long long)longest, l.wakeups);
    ASSERT_EQ_SIZE(l.distinct, (size_t)n);
    /* 12 x 16 KiB through the proxy: about twelve of its pauses (some
     * may pass during the produce). */
    ASSERT(spread >= 500);
    if (longest * 2 >= spread)
        FAIL("a step took %lld of the %lld ms the entries took to arrive: "
             "it waited for the reply",
             (long long)longest, (long long)spread);
    loop_end(&l, s);
    emq_peer_stop(proxy);
    emq_srv_stop(s);
}
