/* SPDX-License-Identifier: BSD-3-Clause */
/* test_cli_exporter.c: `echomq exporter` end to end: a private
 * redis-server with a queue in a known state (length, a group's lag and
 * pending, a consumer's holdings, a dead letter), the exporter on a free
 * loopback port, its /metrics checked as text, by `promtool check
 * metrics`, and scraped by a real Prometheus (started here on loopback,
 * stopped by pid) whose HTTP API must return the values. */
#include "integ/cli_helpers.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>

/* The queue: 5 entries, group w read 2 of them (pending to c, lag 3),
 * and one dead letter. */
static void known_state(const emq_srv *s) {
    const char *url = emq_srv_url(s);
    cli_result r;
    CLI_IN(&r, url, "1\n2\n3\n4\n5\n", "produce", "jobs", "--lines");
    cli_free(&r);
    CLI(&r, url, "consume", "jobs", "-g", "w", "-c", "c", "-s", "head",
        "--limit", "2", "--no-ack", "-q");
    ASSERT_EXIT(&r, 0);
    cli_free(&r);
    CLI(&r, url, "produce", "jobs", "--delay", "3600000", "n=later", "-q");
    ASSERT_EXIT(&r, 0);
    cli_free(&r);
    CLI(&r, url, "group", "limits", "jobs", "-g", "w", "--rate", "40");
    ASSERT_EXIT(&r, 0);
    cli_free(&r);
    char out[64];
    emq_srv_cmd(s, out, sizeof out, "XADD", "emq:{jobs}:dead", "*", "a", "b",
                NULL);
}

/* The exporter of the queues matching pattern, on loopback port. */
static pid_t start_exporter_of(const emq_srv *s, int port,
                               const char *pattern) {
    char listen[64];
    snprintf(listen, sizeof listen, "127.0.0.1:%d", port);
    pid_t pid = cli_spawn(
        emq_srv_url(s), CLI_ARGS("exporter", "--listen", listen, pattern, "-q"),
        NULL, NULL, NULL);
    char page[256];
    int64_t end = cli_ms() + emq_test_ms(5000);
    while (cli_ms() < end && cli_http_get(port, "/", page, sizeof page) != 0)
        usleep(20000);
    return pid;
}

static pid_t start_exporter(const emq_srv *s, int port) {
    return start_exporter_of(s, port, "jo*");
}

/* Starts a real Prometheus on loopback port pport (in s's folder),
 * scraping the exporter on port every second with a 1 s timeout. Returns
 * its pid (the caller stops it). */
static pid_t start_prometheus(const emq_srv *s, int port, int pport) {
    if (access("/usr/bin/prometheus", X_OK) != 0)
        FAIL("prometheus is not installed (scripts/deps.sh installs it)");
    char conf[512], data[512];
    snprintf(conf, sizeof conf, "%s/prometheus.yml", emq_srv_dir(s));
    snprintf(data, sizeof data, "%s/prometheus-data", emq_srv_dir(s));
    char yml[512];
    int n = snprintf(yml, sizeof yml,
                     "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n"
                     "scrape_configs:\n  - job_name: echomq\n"
                     "    static_configs:\n"
                     "      - targets: ['127.0.0.1:%d']\n",
                     port);
    int fd = open(conf, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    ASSERT(fd >= 0 && write(fd, yml, (size_t)n) == n);
    close(fd);
    char cfg_flag[600], data_flag[600], listen_flag[64];
    snprintf(cfg_flag, sizeof cfg_flag, "--config.file=%s", conf);
    snprintf(data_flag, sizeof data_flag, "--storage.tsdb.path=%s", data);
    snprintf(listen_flag, sizeof listen_flag,
             "--web.listen-address=127.0.0.1:%d", pport);
    pid_t prom = fork();
    ASSERT(prom >= 0);
    if (prom == 0) {
        int null = open("/dev/null", O_WRONLY);
        dup2(null, 1);
        dup2(null, 2);
        execl("/usr/bin/prometheus", "prometheus", cfg_flag, data_flag,
              listen_flag, (char *)NULL);
        _exit(127);
    }
    return prom;
}

/* A loopback connection to port, optionally with a tiny receive buffer
 * (set before connecting) and a first write. */
static int raw_client(int port, int tiny_rcvbuf, const char *send_first) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    ASSERT(fd >= 0);
    if (tiny_rcvbuf) {
        int size = 2048;
        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, sizeof size);
    }
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    ASSERT(connect(fd, (struct sockaddr *)&a, sizeof a) == 0);
    if (send_first)
        ASSERT(write(fd, send_first, strlen(send_first)) ==
               (ssize_t)strlen(send_first));
    return fd;
}

/* 1 when the exporter closed fd within timeout_ms (what it had sent is
 * read and thrown away on the way). */
static int closed_by_peer(int fd, int timeout_ms) {
    char buf[65536];
    int64_t end = cli_ms() + emq_test_ms(timeout_ms);
    while (cli_ms() < end) {
        struct pollfd p = {fd, POLLIN, 0};
        if (poll(&p, 1, 100) <= 0)
            continue;
        ssize_t n = read(fd, buf, sizeof buf);
        if (n <= 0)
            return 1;
    }
    return 0;
}

/* Clients that never send, send half a request, or never read a large
 * answer do not hold the exporter: another scrape is answered meanwhile,
 * and each of them is dropped. The exporter served one request at a time
 * and waited 2 s on each silent client, and forever in send() on one
 * that did not read (the answer here is about 3 MB: 20,000 consumers). */
TEST_TIMEOUT(cli_exporter_serves_beside_silent_slow_and_deaf_clients, 120) {
    emq_srv *s = emq_srv_start(NULL);
    known_state(s);
    char out[64];
    emq_srv_cmd(s, out, sizeof out, "EVAL",
                "for i = 1, 20000 do redis.call('XGROUP', 'CREATECONSUMER', "
                "KEYS[1], 'w', 'idle-consumer-' .. i) end return 1",
                "1", "emq:{jobs}", NULL);
    ASSERT_EQ_STR(out, "1");
    int port = emq_free_port();
    pid_t pid = start_exporter(s, port);
    int idle[8];
    for (int i = 0; i < 8; i++)
        idle[i] = raw_client(port, 0, NULL);
    int slow = raw_client(port, 0, "GET /metr");
    int deaf = raw_client(port, 1, "GET /metrics HTTP/1.0\r\n\r\n");
    static char page[4 << 20];
    ASSERT_EQ_INT(cli_http_get(port, "/metrics", page, sizeof page), 0);
    ASSERT(strncmp(page, "HTTP/1.0 200 OK\r\n", 17) == 0);
    ASSERT_CONTAINS(page, "echomq_up 1\n");
    ASSERT_CONTAINS(page, "consumer=\"idle-consumer-20000\"} 0\n");
    printf("    a scrape of %zu bytes served beside 10 stalled clients\n",
           strlen(page));
    for (int i = 0; i < 8; i++) {
        ASSERT(closed_by_peer(idle[i], 5000));
        close(idle[i]);
    }
    ASSERT(closed_by_peer(slow, 5000));
    close(slow);
    ASSERT(closed_by_peer(deaf, 5000));
    close(deaf);
    /* A real Prometheus (1 s scrape timeout) while stalled clients keep
     * coming: its target stays up. The consumers go first, so the scrape
     * itself is small. */
    emq_srv_cmd(s, out, sizeof out, "XGROUP", "DESTROY", "emq:{jobs}", "w",
                NULL);
    int pport = emq_free_port();
    pid_t prom = start_prometheus(s, port, pport);
    char path[128];
    snprintf(path, sizeof path,
             "/api/v1/query?query=up%%7Bjob%%3D%%22echomq%%22%%7D");
    int got = 0, rounds = 0;
    int64_t end = cli_ms() + emq_test_ms(40000);
    while (cli_ms() < end && got < 3 && rounds++ < 400) {
        int stalled[3] = {raw_client(port, 0, NULL),
                          raw_client(port, 0, "GET /metr"),
                          raw_client(port, 1, "GET /metrics HTTP/1.0\r\n\r\n")};
        usleep(100 * 1000);
        for (int i = 0; i < 3; i++)
            close(stalled[i]);
        /* Three answers in a row saying up, with the churn going on. */
        if (cli_http_get(pport, path, page, 65536) == 0 &&
            strstr(page, "\"status\":\"success\"") && strstr(page, ",\"1\"]"))
            got++;
        else
            got = 0;
    }
    kill(prom, SIGTERM);
    ASSERT(cli_wait(prom, 10000) >= 0);
    kill(pid, SIGTERM);
    ASSERT_EQ_INT(cli_wait(pid, 5000), 0);
    if (got < 3)
        FAIL("Prometheus did not see the exporter up beside stalled clients: "
             "%.500s",
             page);
    emq_srv_stop(s);
}

/* 1 when len bytes at p are valid UTF-8. */
static int valid_utf8(const char *p, size_t len) {
    const unsigned char *u = (const unsigned char *)p;
    for (size_t i = 0; i < len;) {
        size_t n = u[i] < 0x80             ? 1
                   : (u[i] & 0xe0) == 0xc0 ? 2
                   : (u[i] & 0xf0) == 0xe0 ? 3
                   : (u[i] & 0xf8) == 0xf0 ? 4
                                           : 0;
        if (n == 0 || i + n > len)
            return 0;
        for (size_t k = 1; k < n; k++)
            if ((u[i + k] & 0xc0) != 0x80)
                return 0;
        i += n;
    }
    return 1;
}

/* What a worker (or anyone) can put in the server does not blank the
 * scrape: a group name that is not UTF-8 is shown with U+FFFD (Prometheus
 * rejected the whole scrape), a queue whose dead-letter key is a string
 * and a stream whose name the library refuses are skipped and counted in
 * echomq_queue_errors (the scrape was "echomq_up 0" and nothing else),
 * and a real Prometheus scraping with a 1 s timeout has the values. */
TEST_TIMEOUT(cli_exporter_bad_names_and_keys_do_not_blank_the_scrape, 90) {
    emq_srv *s = emq_srv_start(NULL);
    known_state(s);
    char out[64];
    emq_srv_cmd(s, out, sizeof out, "XGROUP", "CREATE", "emq:{jobs}",
                "g\xff\xfe", "$", NULL);
    emq_srv_cmd(s, out, sizeof out, "XADD", "emq:{x}", "*", "n", "1", NULL);
    emq_srv_cmd(s, out, sizeof out, "SET", "emq:{x}:dead", "a string", NULL);
    emq_srv_cmd(s, out, sizeof out, "XADD", "emq:{a b}", "*", "n", "1", NULL);
    int port = emq_free_port(), pport = emq_free_port();
    pid_t exporter = start_exporter_of(s, port, "*");
    static char page[65536];
    ASSERT_EQ_INT(cli_http_get(port, "/metrics", page, sizeof page), 0);
    ASSERT(strncmp(page, "HTTP/1.0 200 OK\r\n", 17) == 0);
    ASSERT_CONTAINS(page, "echomq_up 1\n");
    ASSERT_CONTAINS(page, "echomq_queue_errors 2\n");
    ASSERT_CONTAINS(page, "echomq_queue_length{queue=\"jobs\"} 5\n");
    ASSERT_CONTAINS(page, "group=\"g\xef\xbf\xbd\xef\xbf\xbd\"");
    ASSERT(valid_utf8(page, strlen(page)));
    /* ls shows the rest too, and says what it left out (exit 1). */
    cli_result r;
    CLI(&r, emq_srv_url(s), "ls");
    ASSERT_EXIT(&r, 1);
    ASSERT_CONTAINS(r.out, "jobs ");
    ASSERT_CONTAINS(r.err, "2 queues could not be described");
    cli_free(&r);
    pid_t prom = start_prometheus(s, port, pport);
    char path[256];
    snprintf(path, sizeof path, "/api/v1/query?query=echomq_queue_errors");
    int got = 0;
    int64_t end = cli_ms() + emq_test_ms(40000);
    while (cli_ms() < end && !got) {
        usleep(500 * 1000);
        got = cli_http_get(pport, path, page, sizeof page) == 0 &&
              strstr(page, ",\"2\"]") != NULL;
    }
    if (got) {
        snprintf(path, sizeof path,
                 "/api/v1/query?query=up%%7Bjob%%3D%%22echomq%%22%%7D");
        ASSERT_EQ_INT(cli_http_get(pport, path, page, sizeof page), 0);
        ASSERT_CONTAINS(page, ",\"1\"]");
    }
    kill(prom, SIGTERM);
    ASSERT(cli_wait(prom, 10000) >= 0);
    kill(exporter, SIGTERM);
    ASSERT_EQ_INT(cli_wait(exporter, 5000), 0);
    if (!got)
        FAIL("Prometheus never had echomq_queue_errors 2: %s", page);
    emq_srv_stop(s);
}

TEST_TIMEOUT(cli_exporter_serves_prometheus_text, 40) {
    emq_srv *s = emq_srv_start(NULL);
    known_state(s);
    int port = emq_free_port();
    pid_t pid = start_exporter(s, port);
    static char page[65536];
    ASSERT_EQ_INT(cli_http_get(port, "/metrics", page, sizeof page), 0);
    ASSERT(strncmp(page, "HTTP/1.0 200 OK\r\n", 17) == 0);
    ASSERT_CONTAINS(page, "Content-Type: text/plain; version=0.0.4");
    ASSERT_CONTAINS(page, "# TYPE echomq_queue_length gauge\n");
    ASSERT_CONTAINS(page, "echomq_up 1\n");
    ASSERT_CONTAINS(page, "echomq_queue_length{queue=\"jobs\"} 5\n");
    ASSERT_CONTAINS(page, "echomq_dead_letters{queue=\"jobs\"} 1\n");
    ASSERT_CONTAINS(page, "echomq_delayed_entries{queue=\"jobs\"} 1\n");
    ASSERT_CONTAINS(page,
                    "echomq_group_rate_limit{queue=\"jobs\",group=\"w\"} 40\n");
    ASSERT_NOT_CONTAINS(page, "echomq_group_max_in_flight{");
    ASSERT_CONTAINS(page, "echomq_delayed_next_due_seconds{queue=\"jobs\"} ");
    ASSERT_CONTAINS(page,
                    "echomq_group_pending{queue=\"jobs\",group=\"w\"} 2\n");
    ASSERT_CONTAINS(page, "echomq_consumer_pending{queue=\"jobs\",group=\"w\","
                          "consumer=\"c\"} 2\n");
    ASSERT_CONTAINS(page, "echomq_group_oldest_pending_age_seconds{");
    if (emq_srv_redis_at_least(s, 7, 0) || emq_srv_is_valkey(s)) {
        ASSERT_CONTAINS(page, "echomq_group_lag{queue=\"jobs\",group=\"w\"} "
                              "3\n");
        ASSERT_CONTAINS(page,
                        "echomq_queue_entries_added_total{queue=\"jobs\"} 5\n");
    }
    /* promtool agrees it is well-formed exposition text. */
    char path[512], cmd[1200];
    snprintf(path, sizeof path, "%s/metrics.txt", emq_srv_dir(s));
    const char *body = strstr(page, "\r\n\r\n") + 4;
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    ASSERT(fd >= 0 && write(fd, body, strlen(body)) == (ssize_t)strlen(body));
    close(fd);
    if (access("/usr/bin/promtool", X_OK) != 0)
        FAIL("promtool is not installed (scripts/deps.sh installs "
             "prometheus)");
    snprintf(cmd, sizeof cmd, "promtool check metrics < '%s' > '%s.out' 2>&1",
             path, path);
    int code = system(cmd);
    if (code != 0) {
        char why[2048] = "";
        snprintf(cmd, sizeof cmd, "%s.out", path);
        int f = open(cmd, O_RDONLY);
        ssize_t n = f >= 0 ? read(f, why, sizeof why - 1) : 0;
        why[n > 0 ? n : 0] = '\0';
        FAIL("promtool check metrics failed: %s", why);
    }
    ASSERT_EQ_INT(cli_http_get(port, "/other", page, sizeof page), 0);
    ASSERT(strncmp(page, "HTTP/1.0 404", 12) == 0);
    kill(pid, SIGTERM);
    ASSERT_EQ_INT(cli_wait(pid, 5000), 0);
    cli_result r;
    CLI(&r, emq_srv_url(s), "exporter");
    ASSERT_EXIT(&r, 2);
    ASSERT_CONTAINS(r.err, "--listen");
    cli_free(&r);
    emq_srv_stop(s);
}

TEST_TIMEOUT(cli_exporter_scraped_by_a_real_prometheus, 90) {
    emq_srv *s = emq_srv_start(NULL);
    known_state(s);
    int port = emq_free_port(), pport = emq_free_port();
    pid_t exporter = start_exporter(s, port);
    pid_t prom = start_prometheus(s, port, pport);
    static char page[65536];
    char path[256];
    snprintf(
        path, sizeof path,
        "/api/v1/query?query=echomq_group_pending%%7Bqueue%%3D%%22jobs%%22%%7D");
    int got = 0;
    int64_t end = cli_ms() + emq_test_ms(40000);
    while (cli_ms() < end && !got) {
        usleep(500 * 1000);
        if (cli_http_get(pport, path, page, sizeof page) == 0 &&
            strstr(page, "\"status\":\"success\"") &&
            strstr(page, "\"group\":\"w\""))
            got = 1;
    }
    int rc = got;
    if (got) {
        ASSERT_CONTAINS(page, "\"queue\":\"jobs\"");
        ASSERT_CONTAINS(page, ",\"2\"]"); /* [time, "2"] */
        snprintf(path, sizeof path, "/api/v1/query?query=echomq_queue_length");
        ASSERT_EQ_INT(cli_http_get(pport, path, page, sizeof page), 0);
        ASSERT_CONTAINS(page, ",\"5\"]");
        snprintf(path, sizeof path,
                 "/api/v1/query?query=up%%7Bjob%%3D%%22echomq%%22%%7D");
        ASSERT_EQ_INT(cli_http_get(pport, path, page, sizeof page), 0);
        ASSERT_CONTAINS(page, ",\"1\"]");
    }
    kill(prom, SIGTERM);
    ASSERT(cli_wait(prom, 10000) >= 0); /* reaped: stopped by pid */
    kill(exporter, SIGTERM);
    ASSERT_EQ_INT(cli_wait(exporter, 5000), 0);
    if (!rc)
        FAIL("Prometheus never had the exporter's values: %s", page);
    emq_srv_stop(s);
}
