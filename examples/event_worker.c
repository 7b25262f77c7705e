/* SPDX-License-Identifier: BSD-3-Clause */
/* event_worker.c: the pull API in a libevent loop (Debian: libevent-dev).
 *
 *   event_worker URL QUEUE COUNT
 *
 * A persistent read event on the consumer's event descriptor
 * (emq_consumer_fd), readable while a step has something to do, takes
 * what is ready with emq_consumer_step (never waits) and hands it to four
 * worker threads, which acknowledge each from their own thread
 * (worker_pool.h). A timer ends the loop once COUNT entries were handled.
 */
#include "worker_pool.h"

#include <event2/event.h>

typedef struct app {
    worker_pool pool;
    long want;
    int failed;
    struct event_base *base;
} app;

static void on_ready(evutil_socket_t fd, short what, void *arg) {
    app *a = arg;
    (void)fd;
    (void)what;
    if (pool_step(&a->pool, "event-worker") != 0) {
        a->failed = 1;
        event_base_loopbreak(a->base);
    }
}

static void on_tick(evutil_socket_t fd, short what, void *arg) {
    app *a = arg;
    (void)fd;
    (void)what;
    if (atomic_load(&a->pool.handled) >= a->want)
        event_base_loopbreak(a->base);
}

int main(int argc, char **argv) {
    static app a;
    a.want = pool_args(argc, argv);
    if (a.want < 0)
        return 2;
    emq_consumer_t *c = pool_consumer(argv[1], argv[2], "event-worker");
    if (c == NULL || pool_start(&a.pool, c) != 0)
        return 1;
    emq_error err;
    int fd = emq_consumer_fd(c, &err);
    a.base = event_base_new();
    if (fd < 0 || a.base == NULL) {
        fprintf(stderr, "event-worker: %s\n",
                fd < 0 ? err.message : "event_base_new failed");
        return 1;
    }
    struct event *ready =
        event_new(a.base, fd, EV_READ | EV_PERSIST, on_ready, &a);
    struct event *tick = event_new(a.base, -1, EV_PERSIST, on_tick, &a);
    struct timeval every = {0, 100000};
    if (ready == NULL || tick == NULL || event_add(ready, NULL) != 0 ||
        event_add(tick, &every) != 0) {
        fprintf(stderr, "event-worker: event setup failed\n");
        return 1;
    }
    event_base_dispatch(a.base);
    event_free(ready);
    event_free(tick);
    event_base_free(a.base);
    int rc = pool_finish(&a.pool, "event-worker", a.want);
    return a.failed ? 1 : rc;
}
