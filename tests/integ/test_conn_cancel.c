/* SPDX-License-Identifier: BSD-3-Clause */
/* test_conn_cancel.c: a connection's wait for a blocking command's reply
 * and its stop (emq__conn_cancel), against a real redis-server.
 *
 *  1. With a wake descriptor the wait sleeps until the reply, its
 *     deadline or the stop: a stop made while XREAD BLOCK 600000 waits
 *     calls on_stop at once, which ends the block from another
 *     connection, and the read returns nil (a wait that only looked at
 *     the flag in slices would not be what ends it here: it sleeps on the
 *     descriptor alone, so a missed wake would hang until the timeout).
 *  2. A descriptor left readable by a stop since cleared wakes the wait
 *     once, which then goes on in slices: the block runs out as the
 *     server ends it, on_stop is never called, and the wait does not
 *     spin on the descriptor (the thread's CPU time).
 *  3. The flag set while the wait sleeps, the descriptor not written:
 *     the wait does not look at the flag in slices (on_stop is not
 *     called; the block runs out).
 * The stop comes once the server has the read blocked and the reading
 * thread sleeps in poll(2) (/proc/self/task/TID/syscall), so that it is
 * the wait's sleep that a stop meets, not the check before it.
 */
#include "conn/conn.h"
#include "integ/inspect_conn_helpers.h"
#include "integ/thread_helpers.h"

#include <pthread.h>
#include <stdint.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

typedef struct cancel_scene {
    emq_srv *s;
    emq_conn_t *other; /* the connection on_stop ends the block from */
    long long reader_id;
    atomic_int flag;
    atomic_int told;
    int efd;
    pid_t reader_tid; /* the thread that waits */
    int write_fd;     /* the stopper writes the descriptor (0: flag only) */
} cancel_scene;

/* on_stop: ends the reader's block as the consumer's upkeep does. */
static void end_block(void *ctx) {
    cancel_scene *k = ctx;
    atomic_fetch_add(&k->told, 1);
    char id[32];
    snprintf(id, sizeof id, "%lld", k->reader_id);
    emq_reply_free(cmdv_ok(
        k->other, 4, (const char *[]){"CLIENT", "UNBLOCK", id, "TIMEOUT"}));
}

static long long blocked_clients(const emq_srv *s) {
    char out[4096];
    if (emq_srv_cmd(s, out, sizeof out, "INFO", "clients", NULL) < 0)
        return -1;
    const char *at = strstr(out, "blocked_clients:");
    return at ? atoll(at + strlen("blocked_clients:")) : -1;
}

/* Once the reader blocks and sleeps: sets the flag and, with write_fd,
 * turns the descriptor readable, as emq_consumer_stop does. */
static void *stop_when_blocked(void *arg) {
    cancel_scene *k = arg;
    WAIT_UNTIL(blocked_clients(k->s) == 1 &&
                   thread_sleeps_in_poll(k->reader_tid),
               10000, "the read to block and its wait to sleep");
    atomic_store(&k->flag, 1);
    uint64_t one = 1;
    if (k->write_fd)
        ASSERT(write(k->efd, &one, sizeof one) == (ssize_t)sizeof one);
    return NULL;
}

static void scene_open(cancel_scene *k, emq_conn_t **reader) {
    k->s = emq_srv_start(NULL);
    *reader = admin_connect(k->s);
    k->other = admin_connect(k->s);
    k->reader_id = CMD_INT(*reader, "CLIENT", "ID");
    atomic_store(&k->flag, 0);
    atomic_store(&k->told, 0);
    k->reader_tid = (pid_t)syscall(SYS_gettid);
    k->write_fd = 1;
    k->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    ASSERT(k->efd >= 0);
    emq__conn_cancel cancel = {.flag = &k->flag,
                               .grace_ms = 2000,
                               .on_stop = end_block,
                               .ctx = k,
                               .wake_fd = k->efd};
    emq__conn_set_cancel(*reader, &cancel);
}

/* XREAD BLOCK block_ms on reader while stop_when_blocked runs; the
 * reply must be nil (the block ended or ran out). */
static void read_while_stopping(cancel_scene *k, emq_conn_t *reader,
                                const char *block_ms) {
    pthread_t stopper;
    ASSERT(pthread_create(&stopper, NULL, stop_when_blocked, k) == 0);
    emq_reply *r =
        CMD(reader, "XREAD", "BLOCK", block_ms, "STREAMS", "emq:{cancel}", "$");
    pthread_join(stopper, NULL);
    ASSERT(emq_reply_kind(r) == EMQ_REPLY_NULL);
    emq_reply_free(r);
}

static void scene_close(cancel_scene *k, emq_conn_t *reader) {
    emq_conn_destroy(reader);
    emq_conn_destroy(k->other);
    close(k->efd);
    emq_srv_stop(k->s);
}

TEST_TIMEOUT(conn_cancel_wake_descriptor_ends_a_long_block_at_once, 60) {
    static cancel_scene k;
    emq_conn_t *reader;
    scene_open(&k, &reader);
    read_while_stopping(&k, reader, "600000");
    ASSERT_EQ_INT(atomic_load(&k.told), 1);
    /* The connection serves on. */
    ASSERT_EQ_INT(CMD_INT(reader, "EXISTS", "emq:{cancel}"), 0);
    scene_close(&k, reader);
}

TEST_TIMEOUT(conn_cancel_stale_wake_descriptor_changes_nothing, 60) {
    static cancel_scene k;
    emq_conn_t *reader;
    scene_open(&k, &reader);
    uint64_t one = 1; /* a stop since cleared: the flag is 0 */
    ASSERT(write(k.efd, &one, sizeof one) == (ssize_t)sizeof one);
    struct timespec before, after;
    ASSERT(clock_gettime(CLOCK_THREAD_CPUTIME_ID, &before) == 0);
    emq_reply *r =
        CMD(reader, "XREAD", "BLOCK", "1000", "STREAMS", "emq:{cancel}", "$");
    ASSERT(clock_gettime(CLOCK_THREAD_CPUTIME_ID, &after) == 0);
    ASSERT(emq_reply_kind(r) == EMQ_REPLY_NULL);
    ASSERT_EQ_INT(atomic_load(&k.told), 0);
    /* A wait spinning on the readable descriptor would burn the whole
     * second; twenty slices of 50 ms cost next to nothing (about 1 ms).
     * CPU time, which load does not stretch: a spinning thread that got
     * only a quarter of a core on a busy machine would still pass 100 ms
     * by far, and memcheck's cost of twenty wake-ups fits the scaled
     * bound. */
    long long cpu_us = (after.tv_sec - before.tv_sec) * 1000000LL +
                       (after.tv_nsec - before.tv_nsec) / 1000;
    fprintf(stderr, "    the reading thread used %lld us of CPU in 1 s\n",
            cpu_us);
    ASSERT(cpu_us < emq_test_ms(100) * 1000LL);
    emq_reply_free(r);
    emq_reply_free(CMD(k.other, "XADD", "emq:{cancel}", "*", "n", "1"));
    r = CMD(reader, "XREAD", "BLOCK", "300", "STREAMS", "emq:{cancel}", "0");
    ASSERT_EQ_SIZE(emq_reply_len(r), 1);
    emq_reply_free(r);
    scene_close(&k, reader);
}

TEST_TIMEOUT(conn_cancel_flag_alone_does_not_wake_the_sleep, 60) {
    static cancel_scene k;
    emq_conn_t *reader;
    scene_open(&k, &reader);
    k.write_fd = 0; /* the flag only */
    read_while_stopping(&k, reader, "1500");
    /* The block ran out on the server: nobody looked at the flag. */
    ASSERT_EQ_INT(atomic_load(&k.told), 0);
    scene_close(&k, reader);
}
