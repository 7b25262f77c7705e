/* SPDX-License-Identifier: BSD-3-Clause */
/* test_consumer_poll_reads.c: a poller that reads for itself, against a
 * real redis-server (docs/CONSUMER.md, pull mode).
 *
 * While a poller waits for entries, the reading thread lends it the
 * blocking read: the poller sends XREADGROUP ... BLOCK, sleeps on the
 * socket itself and queues what comes, so an entry reaches it with no
 * wake-up of one thread by another. The tests check that the poller
 * sleeps in poll(2) (on the socket), not on a lock; that an entry added
 * then reaches it; that a stalled server does not hold a poll past its
 * timeout (the read is left to the reading thread) and loses nothing; and
 * that a stop ends a poll blocked on a lent read at once.
 */
#include "harness/fakepeer.h"
#include "integ/poll_helpers.h"
#include "integ/tally_helpers.h"
#include "integ/thread_helpers.h"

#include <sys/syscall.h>
#include <unistd.h>

#define RQ "emq:{reads}"

/* A pull consumer of reads/g named w (starting at start) whose reads
 * block block_ms, with no claim beat or lease renewal to interrupt them. */
static emq_consumer_t *long_read_consumer(const char *url, const char *start,
                                          const char *block_ms) {
    emq_conf_t *conf = conf_for(url);
    conf_set(conf, "queue", "reads");
    conf_set(conf, "group", "g");
    conf_set(conf, "consumer", "w");
    conf_set(conf, "start", start);
    long_reads(conf, block_ms);
    emq_consumer_t *c;
    emq_error err;
    ASSERT_OK(emq_consumer_new(conf, NULL, NULL, &c, &err), &err);
    emq_conf_destroy(conf);
    return c;
}

/* One emq_consumer_poll on a thread of its own. */
typedef struct poller {
    emq_consumer_t *c;
    int64_t timeout_ms;
    pthread_t thread;
    atomic_long tid;
    emq_entry *got[8];
    size_t n;
    emq_status st;
    emq_error err;
    atomic_int done;
} poller;

static void *poller_main(void *arg) {
    poller *p = arg;
    atomic_store(&p->tid, (long)syscall(SYS_gettid));
    p->st = emq_consumer_poll(p->c, p->got, 8, p->timeout_ms, &p->n, &p->err);
    atomic_store(&p->done, 1);
    return NULL;
}

static void poller_start(poller *p, emq_consumer_t *c, int64_t timeout_ms) {
    memset(p, 0, sizeof *p);
    p->c = c;
    p->timeout_ms = timeout_ms;
    ASSERT(pthread_create(&p->thread, NULL, poller_main, p) == 0);
    WAIT_UNTIL(atomic_load(&p->tid) != 0, 5000, "the poller to start");
}

/* Waits (bounded) until the poller sleeps in poll(2): on the socket of
 * the read lent to it (a poller waiting for the reading thread sleeps on
 * a futex instead).
 *
 * The reading thread lends a read only when it is about to block while
 * a poller waits (emq_consumer_poll "may" send the read, no more). The
 * poller starts the reading thread, whose start takes a millisecond or
 * two: a poller descheduled longer on a loaded machine comes after the
 * first read was sent, and waits on the futex for all of block_ms (with
 * a 2 ms sleep put before its wait, every run did). So each half second
 * the poller is not on the socket (ample for a lent read to get there:
 * ending that one would only make the poller send it again), the read
 * the connection blocks on is ended (CLIENT UNBLOCK, as a read that
 * found nothing): the reading thread's next read is lent to the poller,
 * which waits by then. */
static void wait_poller_on_socket(const emq_srv *s, poller *p) {
    long tid = atomic_load(&p->tid);
    int64_t end = now_ms() + emq_test_ms(10000);
    int64_t unblock_at = now_ms() + emq_test_ms(500);
    int unblocked = 0;
    while (!thread_sleeps_in_poll(tid) && !atomic_load(&p->done)) {
        if (now_ms() > end)
            FAIL("timed out after %d ms waiting for the poller to sleep in "
                 "poll(2) (%d reads of the reading thread ended)",
                 emq_test_ms(10000), unblocked);
        long long id = now_ms() >= unblock_at ? client_id_by_name(s, "w", 1)
                                              : -1;
        if (id > 0) {
            char ids[32], out[64];
            snprintf(ids, sizeof ids, "%lld", id);
            if (emq_srv_cmd(s, out, sizeof out, "CLIENT", "UNBLOCK", ids,
                            "TIMEOUT", NULL) == ':')
                unblocked += atoi(out); /* 0: it ended meanwhile */
            unblock_at = now_ms() + emq_test_ms(500);
        }
        usleep(5000);
    }
    ASSERT(!atomic_load(&p->done));
    if (unblocked > 0)
        printf("    the reading thread blocked first: %d of its reads "
               "ended\n",
               unblocked);
}

/* Polls k times for 300 ms, each finding nothing; the longest took. */
static int64_t longest_empty_poll(emq_consumer_t *c, int k) {
    int64_t longest = 0;
    for (int i = 0; i < k; i++) {
        emq_entry *got[8];
        size_t n = 9;
        emq_error err;
        int64_t t0 = now_ms();
        ASSERT_OK(emq_consumer_poll(c, got, 8, 300, &n, &err), &err);
        int64_t took = now_ms() - t0;
        if (took > longest)
            longest = took;
        ASSERT_EQ_SIZE(n, 0);
    }
    return longest;
}

/* An idle poller sleeps on the socket itself, and the entry added then
 * reaches it there, once, at its first delivery. */
TEST_TIMEOUT(poll_waits_on_the_socket_itself, 60) {
    emq_srv *s = emq_srv_start(NULL);
    emq_consumer_t *c = long_read_consumer(emq_srv_url(s), "new", "60000");
    static poller p;
    poller_start(&p, c, emq_test_ms(30000));
    wait_poller_on_socket(s, &p);
    produce_n(s, "reads", "r", 1);
    pthread_join(p.thread, NULL);
    ASSERT_OK(p.st, &p.err);
    ASSERT_EQ_SIZE(p.n, 1);
    ASSERT_EQ_INT((long long)p.got[0]->deliveries, 1);
    emq_error err;
    ASSERT_OK(emq_consumer_ack(c, p.got[0], &err), &err);
    emq_entry_free(p.got[0]);
    ASSERT_OK(emq_consumer_close(c, 2000, &err), &err);
    ASSERT_EQ_INT(pending_count(s, RQ, "g"), 0);
    emq_consumer_destroy(c);
    emq_srv_stop(s);
}

/* The server's replies held (a stalled server, command_timeout_ms a
 * minute) with reads that block block_ms: each poll still returns at
 * about its timeout, with nothing. A read whose block outlasts the poll
 * stays owed for the next poller; one whose reply is overdue is left to
 * the reading thread. Once the replies flow again the entries added
 * meanwhile come, once each. */
static void polls_keep_their_timeout(const char *block_ms) {
    emq_srv *s = emq_srv_start(NULL);
    emq_icept *proxy = emq_icept_start(emq_srv_port(s), NULL, 0);
    emq_consumer_t *c =
        long_read_consumer(emq_icept_url(proxy), "head", block_ms);
    emq_entry *got[8];
    emq_error err;
    produce_n(s, "reads", "a", 1);
    ASSERT_EQ_SIZE(poll_until(c, got, 1, 10000), 1);
    ASSERT_OK(emq_consumer_ack(c, got[0], &err), &err);
    emq_entry_free(got[0]);
    emq_icept_hold(proxy, 1);
    int64_t longest = longest_empty_poll(c, 4);
    printf("    block_ms %s: the longest of 4 polls of 300 ms took %lld ms "
           "with the replies held\n",
           block_ms, (long long)longest);
    /* Held, a read the poller waited for would have waited a minute. */
    if (longest > emq_test_ms(10000))
        FAIL("a poll of 300 ms took %lld ms", (long long)longest);
    produce_n(s, "reads", "b", 3);
    emq_icept_hold(proxy, 0);
    size_t n = poll_until(c, got, 3, 20000);
    ASSERT_EQ_SIZE(n, 3);
    for (size_t i = 0; i < n; i++) {
        ASSERT_EQ_INT((long long)got[i]->deliveries, 1);
        ASSERT_OK(emq_consumer_ack(c, got[i], &err), &err);
        emq_entry_free(got[i]);
    }
    ASSERT_OK(emq_consumer_close(c, 2000, &err), &err);
    wait_pending_zero(s, RQ, "g", 5000);
    emq_consumer_destroy(c);
    emq_icept_stop(proxy);
    emq_srv_stop(s);
}

TEST_TIMEOUT(poll_keeps_its_timeout_when_the_server_stalls, 90) {
    polls_keep_their_timeout("60000");
}

TEST_TIMEOUT(poll_keeps_its_timeout_when_a_short_block_stalls, 90) {
    polls_keep_their_timeout("200");
}

/* A poll after an ack on an idle queue: the ack rides with the read lent
 * to the next poll and is answered at once; the poll still returns at
 * about its timeout (block_ms is a minute), and the ack lands. */
TEST_TIMEOUT(poll_after_an_ack_keeps_its_timeout, 60) {
    emq_srv *s = emq_srv_start(NULL);
    emq_consumer_t *c = long_read_consumer(emq_srv_url(s), "head", "60000");
    emq_entry *got[8];
    emq_error err;
    produce_n(s, "reads", "a", 3);
    for (int i = 0; i < 3; i++) {
        ASSERT_EQ_SIZE(poll_until(c, got, 1, 10000), 1);
        ASSERT_OK(emq_consumer_ack(c, got[0], &err), &err);
        emq_entry_free(got[0]);
    }
    int64_t longest = longest_empty_poll(c, 3);
    printf("    the longest of 3 polls of 300 ms after acks took %lld ms\n",
           (long long)longest);
    if (longest > emq_test_ms(10000))
        FAIL("a poll of 300 ms took %lld ms", (long long)longest);
    ASSERT_EQ_INT(pending_count(s, RQ, "g"), 0);
    ASSERT_OK(emq_consumer_close(c, 2000, &err), &err);
    emq_consumer_destroy(c);
    emq_srv_stop(s);
}

/* A poll that waits without end on a lent read: a stop from another
 * thread ends it at once with EMQ_ECLOSED (block_ms is a minute). */
TEST_TIMEOUT(poll_stop_ends_a_lent_read_at_once, 60) {
    emq_srv *s = emq_srv_start(NULL);
    emq_consumer_t *c = long_read_consumer(emq_srv_url(s), "new", "60000");
    static poller p;
    poller_start(&p, c, -1);
    wait_poller_on_socket(s, &p);
    int64_t t0 = now_ms();
    emq_consumer_stop(c);
    pthread_join(p.thread, NULL);
    int64_t took = now_ms() - t0;
    printf("    the poll returned %lld ms after the stop\n", (long long)took);
    ASSERT_EQ_INT(p.st, EMQ_ECLOSED);
    ASSERT_EQ_SIZE(p.n, 0);
    /* At once (a few ms); without the wake-up, after the block's minute. */
    if (took > emq_test_ms(5000))
        FAIL("the poll returned %lld ms after the stop", (long long)took);
    emq_error err;
    ASSERT_OK(emq_consumer_close(c, 2000, &err), &err);
    produce_n(s, "reads", "late", 2);
    ASSERT_EQ_INT(pending_count(s, RQ, "g"), 0);
    emq_consumer_destroy(c);
    emq_srv_stop(s);
}

/* A reply of a few hundred KiB that arrives slowly (a proxy pauses 100 ms
 * after each 16 KiB) to a read lent to pollers: each poll keeps its
 * timeout of 50 ms, reading what came meanwhile, and the next goes on
 * from there (one poll took the whole second before).
 *
 * The check is on the structure of the run, not on a poll's speed: the
 * entries need at least a second to arrive (the proxy's pauses, which a
 * loaded machine only makes longer), and no poll may take half of that.
 * A poll that waits for the whole reply spans most of it (1,103 of
 * 1,203 ms with the defect put back); one that keeps its 50 ms would
 * need a stall of half a second to come near. The pauses scale with the
 * run, so that under memcheck the entries take 4.8 s to arrive: a stall
 * of 1.5 s (the process stopped) failed a run with pauses of 100 ms. */
TEST_TIMEOUT(poll_keeps_its_timeout_while_a_reply_trickles_in, 90) {
    emq_srv *s = emq_srv_start(NULL);
    emq_peer_opts po = {.mode = EMQ_PEER_PROXY,
                        .upstream_port = emq_srv_port(s)};
    emq_peer *proxy = emq_peer_start(&po);
    emq_peer_pace(proxy, emq_test_ms(100));
    emq_consumer_t *c = long_read_consumer(emq_peer_url(proxy), "new", "60000");
    emq_entry *got[64];
    size_t k = 0;
    emq_error err;
    ASSERT_OK(emq_consumer_poll(c, got, 64, 0, &k, &err), &err);
    WAIT_UNTIL(client_id_by_name(s, "w", 1) > 0, 5000, "the read");
    const int n = 12; /* one reply of ~200 KiB */
    produce_blobs(s, "reads", "r", 0, n, 16384);
    int64_t began = now_ms(), end = began + emq_test_ms(30000);
    int64_t longest = 0;
    long polls = 0, empty = 0;
    size_t total = 0;
    while (total < (size_t)n && now_ms() < end) {
        int64_t t0 = now_ms();
        ASSERT_OK(emq_consumer_poll(c, got, 64, 50, &k, &err), &err);
        if (now_ms() - t0 > longest)
            longest = now_ms() - t0;
        polls++;
        empty += k == 0;
        for (size_t i = 0; i < k; i++) {
            ASSERT_OK(emq_consumer_ack(c, got[i], &err), &err);
            emq_entry_free(got[i]);
        }
        total += k;
    }
    int64_t spread = now_ms() - began;
    printf("    %d entries of 16 KiB over %lld ms: %ld polls of 50 ms (%ld "
           "empty), the longest took %lld ms\n",
           n, (long long)spread, polls, empty, (long long)longest);
    ASSERT_EQ_SIZE(total, (size_t)n);
    /* 12 x 16 KiB through the proxy: about twelve of its pauses (some
     * may pass during the produce). */
    ASSERT(spread >= 500);
    if (longest * 2 >= spread)
        FAIL("a poll of 50 ms took %lld of the %lld ms the entries took to "
             "arrive: it waited for the reply",
             (long long)longest, (long long)spread);
    ASSERT_OK(emq_consumer_close(c, 3000, &err), &err);
    ASSERT_EQ_INT(pending_count(s, RQ, "g"), 0);
    emq_consumer_destroy(c);
    emq_peer_stop(proxy);
    emq_srv_stop(s);
}
