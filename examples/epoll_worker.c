/* SPDX-License-Identifier: BSD-3-Clause */
/* epoll_worker.c: the pull API in a plain epoll(7) loop.
 *
 *   epoll_worker URL QUEUE COUNT
 *
 * The loop watches the consumer's event descriptor (emq_consumer_fd): it
 * is readable while a step has something to do (entries wait, or the
 * read the consumer lends to the loop has its reply in or is due). On
 * readiness, emq_consumer_step does it without waiting and hands out what
 * is ready, and the loop passes it to four worker threads, which
 * acknowledge each from their own thread (worker_pool.h). The loop never
 * waits on the network: the consumer's own threads refresh ownership,
 * renew the lease, send settlements and read whenever the loop is busy.
 * Exits 0 after COUNT entries were handled.
 */
#include "worker_pool.h"

#include <sys/epoll.h>
#include <unistd.h>

int main(int argc, char **argv) {
    long want = pool_args(argc, argv);
    if (want < 0)
        return 2;
    emq_consumer_t *c = pool_consumer(argv[1], argv[2], "epoll-worker");
    worker_pool pool;
    if (c == NULL || pool_start(&pool, c) != 0)
        return 1;
    emq_error err;
    int fd = emq_consumer_fd(c, &err);
    int ep = epoll_create1(EPOLL_CLOEXEC);
    struct epoll_event ev = {.events = EPOLLIN, .data.fd = fd};
    if (fd < 0 || ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) != 0) {
        fprintf(stderr, "epoll-worker: %s\n",
                fd < 0 ? err.message : "epoll setup failed");
        return 1;
    }
    while (atomic_load(&pool.handled) < want) {
        /* The consumer needs no timer from the loop (timeout -1); wake
         * every 100 ms anyway to see whether the workers are done. */
        int64_t t = emq_consumer_timeout_ms(c);
        int ms = t < 0 || t > 100 ? 100 : (int)t;
        struct epoll_event got;
        if (epoll_wait(ep, &got, 1, ms) < 0)
            continue; /* EINTR */
        if (pool_step(&pool, "epoll-worker") != 0)
            break;
    }
    close(ep);
    return pool_finish(&pool, "epoll-worker", want);
}
