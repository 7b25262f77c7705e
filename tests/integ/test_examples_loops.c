/* SPDX-License-Identifier: BSD-3-Clause */
/* test_examples_loops.c: the event-loop examples (examples/uv_worker.c,
 * event_worker.c, epoll_worker.c) run against a private redis-server:
 * each hands 300 entries to its worker threads through the consumer's
 * event descriptor, acknowledges them from those threads, and exits 0
 * with nothing left pending; and examples/request_producer.c, whose eight
 * request threads share one producer beside asynchronous audit lines.
 */
#include "integ/inspect_conn_helpers.h"

#include <errno.h>
#include <fcntl.h>

/* The example's path, next to this test binary. */
static const char *example_path(const char *name) {
    static char path[4096];
    ssize_t n = readlink("/proc/self/exe", path, sizeof path - 64);
    if (n <= 0)
        FAIL("readlink /proc/self/exe: %s", strerror(errno));
    path[n] = '\0';
    snprintf(strrchr(path, '/') + 1, 64, "example_%s", name);
    if (access(path, X_OK) != 0)
        FAIL("%s is not built (uv_worker needs libuv1-dev, event_worker "
             "libevent-dev: scripts/deps.sh installs both)",
             path);
    return path;
}

/* Runs example name on url for count entries of queue; returns its exit
 * status, its stdout in out. */
static int run_example(const char *name, const char *url, const char *queue,
                       int count, const char *dir, char *out, size_t size) {
    char log[1024], n[16];
    snprintf(log, sizeof log, "%s/%s.out", dir, name);
    snprintf(n, sizeof n, "%d", count);
    const char *exe = example_path(name);
    pid_t pid = fork();
    ASSERT(pid >= 0);
    if (pid == 0) {
        int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (fd < 0)
            _exit(125);
        dup2(fd, 1);
        execl(exe, exe, url, queue, n, (char *)NULL);
        _exit(126);
    }
    int status = wait_child(pid, 60000);
    int fd = open(log, O_RDONLY);
    ssize_t len = fd >= 0 ? read(fd, out, size - 1) : 0;
    if (fd >= 0)
        close(fd);
    out[len > 0 ? len : 0] = '\0';
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

static void example_on(const char *name, const emq_srv *s, const char *url) {
    char queue[64], stream[80], out[4096], want[128];
    snprintf(queue, sizeof queue, "ex-%s", name);
    snprintf(stream, sizeof stream, "emq:{%s}", queue);
    produce_n(s, queue, "job", 300);
    int rc =
        run_example(name, url, queue, 300, emq_srv_dir(s), out, sizeof out);
    if (rc != 0)
        FAIL("%s exited %d: %s", name, rc, out);
    snprintf(want, sizeof want, "handled 300 entries on 4 worker threads");
    ASSERT_CONTAINS(out, want);
    emq_conn_t *adm = admin_connect(s);
    ASSERT(group_done(adm, stream, "workers"));
    emq_conn_destroy(adm);
    printf("    %s", out);
}

TEST_TIMEOUT(example_epoll_worker_acks_from_worker_threads, 90) {
    emq_srv *s = emq_srv_start(NULL);
    example_on("epoll_worker", s, emq_srv_url(s));
    emq_srv_stop(s);
}

TEST_TIMEOUT(example_uv_worker_acks_from_worker_threads, 90) {
    emq_srv *s = emq_srv_start(NULL);
    example_on("uv_worker", s, emq_srv_url(s));
    emq_srv_stop(s);
}

TEST_TIMEOUT(example_event_worker_acks_from_worker_threads, 90) {
    emq_srv *s = emq_srv_start(NULL);
    example_on("event_worker", s, emq_srv_url(s));
    emq_srv_stop(s);
}

TEST_TIMEOUT(example_request_producer_threads_share_one_producer, 60) {
    emq_srv *s = emq_srv_start(NULL);
    char out[4096];
    int rc = run_example("request_producer", emq_srv_url(s), "ex-req", 800,
                         emq_srv_dir(s), out, sizeof out);
    if (rc != 0)
        FAIL("request_producer exited %d: %s", rc, out);
    ASSERT_CONTAINS(out, "produced 800 requests and 800 audit lines");
    char len[32];
    emq_srv_cmd(s, len, sizeof len, "XLEN", "emq:{ex-req}", NULL);
    ASSERT_EQ_STR(len, "1600");
    printf("    %s", out);
    emq_srv_stop(s);
}
