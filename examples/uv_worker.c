/* SPDX-License-Identifier: BSD-3-Clause */
/* uv_worker.c: the pull API in a libuv loop (Debian: libuv1-dev).
 *
 *   uv_worker URL QUEUE COUNT
 *
 * A uv_poll_t watches the consumer's event descriptor (emq_consumer_fd),
 * readable while a step has something to do; its callback takes what is
 * ready with emq_consumer_step (never waits) and hands it to four worker
 * threads, which acknowledge each from their own thread (worker_pool.h).
 * A uv_timer_t ends the loop once COUNT entries were handled.
 */
#include "worker_pool.h"

#include <uv.h>

typedef struct app {
    worker_pool pool;
    long want;
    int failed;
    uv_poll_t poll;
    uv_timer_t timer;
} app;

static void on_ready(uv_poll_t *handle, int status, int events) {
    app *a = handle->data;
    (void)events;
    if (status < 0 || pool_step(&a->pool, "uv-worker") != 0) {
        a->failed = 1;
        uv_stop(handle->loop);
    }
}

static void on_tick(uv_timer_t *timer) {
    app *a = timer->data;
    if (atomic_load(&a->pool.handled) >= a->want)
        uv_stop(timer->loop);
}

int main(int argc, char **argv) {
    static app a;
    a.want = pool_args(argc, argv);
    if (a.want < 0)
        return 2;
    emq_consumer_t *c = pool_consumer(argv[1], argv[2], "uv-worker");
    if (c == NULL || pool_start(&a.pool, c) != 0)
        return 1;
    emq_error err;
    int fd = emq_consumer_fd(c, &err);
    if (fd < 0) {
        fprintf(stderr, "uv-worker: %s\n", err.message);
        return 1;
    }
    uv_loop_t *loop = uv_default_loop();
    uv_poll_init(loop, &a.poll, fd);
    a.poll.data = &a;
    uv_poll_start(&a.poll, UV_READABLE, on_ready);
    uv_timer_init(loop, &a.timer);
    a.timer.data = &a;
    uv_timer_start(&a.timer, on_tick, 100, 100);
    uv_run(loop, UV_RUN_DEFAULT);
    uv_poll_stop(&a.poll);
    uv_timer_stop(&a.timer);
    uv_close((uv_handle_t *)&a.poll, NULL);
    uv_close((uv_handle_t *)&a.timer, NULL);
    uv_run(loop, UV_RUN_NOWAIT);
    uv_loop_close(loop);
    int rc = pool_finish(&a.pool, "uv-worker", a.want);
    return a.failed ? 1 : rc;
}
