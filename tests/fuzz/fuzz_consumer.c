/* SPDX-License-Identifier: BSD-3-Clause */
/* fuzz_consumer.c: libFuzzer target for a consumer facing a hostile server.
 *
 * Each input runs one emq_consumer_run against a fake server played by a
 * thread of this process on a unix socket. The fake server answers the
 * handshake (HELLO, AUTH, SELECT, CLIENT SETNAME) and the group door
 * (XGROUP CREATE) as Redis would, and answers the commands that carry
 * stream data (XREADGROUP, XPENDING, XAUTOCLAIM, and the EVAL of a
 * dead-letter move) with bytes taken from the input, one chunk per
 * command, in the order the consumer sends them. When the chunks run out
 * the server asks the consumer to stop and answers everything else as an
 * empty server would, so every input ends within a few round trips. The
 * finding is a crash, a sanitizer report, a leak, a hang, or a message
 * (error or log line) carrying raw control bytes from the server.
 *
 * Input layout: one flags byte, then chunks separated by "\n---\n":
 *   bit 0  protocol 3 (HELLO 3) instead of 2
 *   bit 1  on_group_lost fatal instead of recreate
 *   bit 2  lease commands (EVAL of the lease scripts, GET, PTTL) and the
 *          deferred XACK/HSET/HDEL replies are fuzzed too
 *   bit 3-4 handler verdicts: ack all, retry all, dead all, or chosen by
 *          the first byte of the first field value
 *   bit 5  max_deliveries 1 instead of 3
 *   bit 6  a claim beat between reads (claim.interval_ms 1; the fake
 *          server answers a '>' read after 2 ms so the first beat comes
 *          right after the first read, on every run)
 *   bit 7  count 1 instead of 10
 * A chunk that holds no complete reply is sent and the connection closed
 * after it (a reply cut mid-way), so no input waits for a timeout. A
 * chunk that would only make the consumer sleep (a LOADING-like error, a
 * second NOGROUP) ends the input instead (see send_chunk).
 */
#include "base/base.h"
#include "resp/resp.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_CHUNKS 6     /* fuzzed replies per input */
#define MAX_COMMANDS 400 /* commands served per input before a forced stop */
#define BUDGET_MS 400    /* then the server stops the consumer regardless */
#define SEP "\n---\n"

typedef struct chunk {
    const uint8_t *p;
    size_t n;
} chunk;

typedef struct fake {
    int listen_fd;
    int client_fd;
    uint8_t flags;
    chunk chunks[MAX_CHUNKS];
    size_t nchunks, next_chunk;
    int group_lost; /* a NOGROUP or UNBLOCKED chunk was sent */
    int commands;
    int64_t started_ms;
    emq_consumer_t *consumer;
    atomic_int quit; /* the test is over: the thread leaves */
    int wake[2];     /* a byte on wake[1] ends the server's poll at once */
    char in[1 << 16];
    size_t in_len;
} fake;

/* Finds needle in [p, p+n) (memmem is a GNU extension). */
static const void *find(const void *p, size_t n, const char *needle,
                        size_t nn) {
    const char *s = p;
    for (size_t i = 0; nn <= n && i <= n - nn; i++)
        if (memcmp(s + i, needle, nn) == 0)
            return s + i;
    return NULL;
}

static int trace; /* FUZZ_CONSUMER_TRACE set: print each command served */
static char sock_dir[64];
static char sock_path[128];

static void cleanup_socket(void) {
    unlink(sock_path);
    rmdir(sock_dir);
}

/* Fails the run: a message from the library carries a control byte. */
static void check_printable(const char *what, const char *msg) {
    for (const char *s = msg; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c < 0x20 || c == 0x7f) {
            fprintf(stderr, "%s holds control byte 0x%02x: %s\n", what, c, msg);
            abort();
        }
    }
}

static void log_sink(void *opaque, emq_log_level level, const char *msg) {
    (void)opaque;
    (void)level;
    check_printable("log line", msg);
    if (trace)
        fprintf(stderr, "log: %s\n", msg);
}

/* ---- the fake server ----------------------------------------------------- */

static void send_all(fake *f, const void *p, size_t n) {
    const char *s = p;
    while (n > 0 && f->client_fd >= 0) {
        ssize_t w = send(f->client_fd, s, n, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            close(f->client_fd);
            f->client_fd = -1;
            return;
        }
        s += w;
        n -= (size_t)w;
    }
}

static void send_str(fake *f, const char *s) { send_all(f, s, strlen(s)); }

/* What a chunk is to the client's reader. */
enum { CHUNK_CUT, CHUNK_REPLY, CHUNK_PAUSE, CHUNK_GROUP_LOST };

/* CHUNK_CUT when bytes hold no complete reply (nor bytes the client's
 * reader refuses at once, which break the connection without a wait);
 * CHUNK_PAUSE for an error reply the consumer answers by sleeping 100 ms
 * (LOADING, BUSY, TRYAGAIN, CLUSTERDOWN, MASTERDOWN); CHUNK_GROUP_LOST for
 * NOGROUP and UNBLOCKED, after which the consumer re-creates the group at
 * most once a second; CHUNK_REPLY otherwise. */
static int classify(const uint8_t *p, size_t n) {
    static const char *const pauses[] = {"LOADING", "BUSY", "TRYAGAIN",
                                         "CLUSTERDOWN", "MASTERDOWN"};
    emq__resp_limits limits;
    emq__resp_limits_default(&limits);
    emq__resp_reader *r = emq__resp_reader_new(&limits);
    if (r == NULL)
        abort();
    emq_reply *reply = NULL;
    emq_status st = emq__resp_feed(r, (const char *)p, n, NULL);
    if (st == EMQ_OK)
        st = emq__resp_next(r, &reply, NULL);
    int kind = st == EMQ_EAGAIN ? CHUNK_CUT : CHUNK_REPLY;
    for (size_t i = 0; reply && i < sizeof pauses / sizeof pauses[0]; i++)
        if (emq_reply_is_error(reply, pauses[i]))
            kind = CHUNK_PAUSE;
    if (emq_reply_is_error(reply, "NOGROUP") ||
        emq_reply_is_error(reply, "UNBLOCKED"))
        kind = CHUNK_GROUP_LOST;
    emq_reply_free(reply);
    emq__resp_reader_free(r);
    return kind;
}

/* Sends the next chunk; returns 0 when none is left or when the chunk
 * would only make the consumer sleep (then the input ends here: the
 * caller stops the consumer). Sleeping is the consumer's answer to those
 * replies, not a finding, and would cut the fuzzer's pace a hundredfold;
 * the first group-lost reply of an input costs no sleep and is sent. */
static int send_chunk(fake *f) {
    if (f->next_chunk >= f->nchunks)
        return 0;
    chunk c = f->chunks[f->next_chunk];
    int kind = classify(c.p, c.n);
    if (kind == CHUNK_PAUSE || (kind == CHUNK_GROUP_LOST && f->group_lost))
        return 0;
    f->next_chunk++;
    if (kind == CHUNK_GROUP_LOST)
        f->group_lost = 1;
    send_all(f, c.p, c.n);
    if (kind == CHUNK_CUT && f->client_fd >= 0) {
        close(f->client_fd);
        f->client_fd = -1;
    }
    return 1;
}

static int is(const char *arg, size_t n, const char *word) {
    size_t w = strlen(word);
    if (n != w)
        return 0;
    for (size_t i = 0; i < n; i++) {
        char c = arg[i];
        if (c >= 'a' && c <= 'z')
            c = (char)(c - 'a' + 'A');
        if (c != word[i])
            return 0;
    }
    return 1;
}

/* Answers one command (argv as pointers into f->in). */
static void answer(fake *f, int argc, const char **argv, const size_t *len) {
    int resp3 = f->flags & 1;
    int fuzz_all = f->flags & 4;
    f->commands++;
    if (f->commands > MAX_COMMANDS || emq__now_ms() - f->started_ms > BUDGET_MS)
        emq_consumer_stop(f->consumer);
    const char *cmd = argv[0];
    size_t cn = len[0];
    if (is(cmd, cn, "HELLO")) {
        send_str(f,
                 "%2\r\n$6\r\nserver\r\n$5\r\nredis\r\n$5\r\nproto\r\n:3\r\n");
        return;
    }
    if (is(cmd, cn, "AUTH") || is(cmd, cn, "SELECT") || is(cmd, cn, "CLIENT")) {
        send_str(f, "+OK\r\n");
        return;
    }
    if (is(cmd, cn, "XGROUP")) {
        send_str(f, f->commands & 1 ? "+OK\r\n"
                                    : "-BUSYGROUP Consumer Group name already "
                                      "exists\r\n");
        return;
    }
    /* With beats on, a '>' read takes 2 ms, so the beat that is due 1 ms
     * after the start comes right after the first read, every time. */
    if ((f->flags & 64) && is(cmd, cn, "XREADGROUP") && argc > 0 &&
        is(argv[argc - 1], len[argc - 1], ">"))
        emq__sleep_ms(2);
    int data = is(cmd, cn, "XREADGROUP") || is(cmd, cn, "XPENDING") ||
               is(cmd, cn, "XAUTOCLAIM");
    int lease = 0;
    if (is(cmd, cn, "EVAL")) {
        /* The dead-letter script is the one that calls XPENDING. */
        int dead = argc > 1 && len[1] > 20 &&
                   find(argv[1], len[1], "XPENDING", 8) != NULL;
        if (dead)
            data = 1;
        else
            lease = 1;
    }
    int other = is(cmd, cn, "GET") || is(cmd, cn, "PTTL") ||
                is(cmd, cn, "XACK") || is(cmd, cn, "HSET") ||
                is(cmd, cn, "HDEL");
    if (trace)
        fprintf(stderr, "fake server +%lldms: %.*s%s\n",
                (long long)(emq__now_ms() - f->started_ms), (int)cn, cmd,
                (data || (fuzz_all && (lease || other))) &&
                        f->next_chunk < f->nchunks
                    ? " <- chunk"
                    : "");
    if ((data || (fuzz_all && (lease || other))) && send_chunk(f))
        return;
    if (data || (fuzz_all && (lease || other)))
        emq_consumer_stop(f->consumer); /* chunks used up: wind down */
    /* The answers of an empty, well-behaved server. */
    if (is(cmd, cn, "XREADGROUP")) {
        send_str(f, resp3 ? "_\r\n" : "*-1\r\n");
    } else if (is(cmd, cn, "XPENDING")) {
        send_str(f, "*0\r\n");
    } else if (is(cmd, cn, "XAUTOCLAIM")) {
        send_str(f, "*3\r\n$3\r\n0-0\r\n*0\r\n*0\r\n");
    } else if (is(cmd, cn, "XACK")) {
        char buf[32];
        snprintf(buf, sizeof buf, ":%d\r\n", argc > 3 ? argc - 3 : 0);
        send_str(f, buf);
    } else if (is(cmd, cn, "GET")) {
        send_str(f, resp3 ? "_\r\n" : "$-1\r\n");
    } else if (is(cmd, cn, "PTTL")) {
        send_str(f, ":-2\r\n");
    } else if (lease || data || is(cmd, cn, "HSET") || is(cmd, cn, "HDEL")) {
        send_str(f, ":1\r\n");
    } else {
        send_str(f, "-ERR unknown command\r\n");
    }
}

/* Parses and answers every complete command in f->in. The library only
 * sends arrays of bulk strings; anything else is a library bug. */
static void serve_input(fake *f) {
    size_t off = 0;
    for (;;) {
        const char *p = f->in + off, *end = f->in + f->in_len;
        if (p >= end)
            break;
        if (*p != '*')
            abort();
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        if (nl == NULL)
            break;
        int argc = atoi(p + 1);
        if (argc < 1 || argc > 4096)
            abort();
        const char *argv[4096];
        size_t len[4096];
        const char *q = nl + 1;
        int i = 0;
        for (; i < argc; i++) {
            if (q >= end)
                break;
            if (*q != '$')
                abort();
            const char *l = memchr(q, '\n', (size_t)(end - q));
            if (l == NULL)
                break;
            long n = atol(q + 1);
            if (n < 0)
                abort();
            if ((size_t)(end - (l + 1)) < (size_t)n + 2)
                break;
            argv[i] = l + 1;
            len[i] = (size_t)n;
            q = l + 1 + n + 2;
        }
        if (i < argc)
            break; /* incomplete: wait for more bytes */
        answer(f, argc, argv, len);
        off = (size_t)(q - f->in);
        if (f->client_fd < 0) {
            off = f->in_len;
            break;
        }
    }
    memmove(f->in, f->in + off, f->in_len - off);
    f->in_len -= off;
}

static void *server_main(void *arg) {
    fake *f = arg;
    while (!atomic_load(&f->quit)) {
        struct pollfd pfd[3] = {{f->wake[0], POLLIN, 0},
                                {f->listen_fd, POLLIN, 0},
                                {f->client_fd, POLLIN, 0}};
        int n = poll(pfd, f->client_fd >= 0 ? 3 : 2, 100);
        if (n <= 0)
            continue;
        if (pfd[0].revents & POLLIN)
            break;
        if (pfd[1].revents & POLLIN) {
            int fd = accept(f->listen_fd, NULL, NULL);
            if (fd >= 0) {
                if (f->client_fd >= 0)
                    close(f->client_fd);
                f->client_fd = fd;
                f->in_len = 0;
            }
            continue;
        }
        if (f->client_fd >= 0 && (pfd[2].revents & (POLLIN | POLLHUP))) {
            if (f->in_len == sizeof f->in)
                abort(); /* one command larger than 64 KiB: not expected */
            ssize_t r = recv(f->client_fd, f->in + f->in_len,
                             sizeof f->in - f->in_len, 0);
            if (r <= 0) {
                close(f->client_fd);
                f->client_fd = -1;
                continue;
            }
            f->in_len += (size_t)r;
            serve_input(f);
        }
    }
    if (f->client_fd >= 0)
        close(f->client_fd);
    return NULL;
}

/* ---- the consumer side --------------------------------------------------- */

typedef struct handler_state {
    uint8_t flags;
    size_t calls;
} handler_state;

static emq_verdict handler(void *opaque, const emq_entry *e, char *reason,
                           size_t reason_size) {
    handler_state *h = opaque;
    h->calls++;
    /* Whatever the server sent must make a well-formed delivery. */
    if (e->id == NULL || e->stream == NULL || e->group == NULL ||
        e->consumer == NULL || (e->nfields && e->fields == NULL) ||
        e->deliveries == 0)
        abort();
    volatile size_t sum = 0;
    for (size_t i = 0; i < e->nfields; i++) {
        if (e->fields[i].name == NULL || e->fields[i].value == NULL)
            abort();
        if (e->fields[i].name_len)
            sum += (unsigned char)e->fields[i].name[e->fields[i].name_len - 1];
        if (e->fields[i].value_len)
            sum +=
                (unsigned char)e->fields[i].value[e->fields[i].value_len - 1];
    }
    char small[16], big[4096];
    size_t need = emq_entry_json(e, small, sizeof small);
    size_t got = emq_entry_json(e, big, sizeof big);
    if (need != got || strlen(small) >= sizeof small ||
        (got < sizeof big && strlen(big) != got))
        abort();
    int policy = (h->flags >> 3) & 3;
    if (policy == 3)
        policy = e->nfields && e->fields[0].value_len
                     ? (unsigned char)e->fields[0].value[0] % 3
                     : 0;
    /* A reason longer than the buffer must be cut, not overrun. */
    memset(reason, 'r', reason_size - 1);
    reason[reason_size - 1] = '\0';
    (void)sum;
    return policy == 1 ? EMQ_RETRY : policy == 2 ? EMQ_DEAD : EMQ_ACK;
}

static void set(emq_conf_t *conf, const char *name, const char *value) {
    emq_error err;
    if (emq_conf_set(conf, name, value, &err) != EMQ_OK) {
        fprintf(stderr, "conf %s: %s\n", name, err.message);
        abort();
    }
}

static int listen_fd = -1;

static void setup_once(void) {
    if (listen_fd >= 0)
        return;
    signal(SIGPIPE, SIG_IGN);
    trace = getenv("FUZZ_CONSUMER_TRACE") != NULL;
    snprintf(sock_dir, sizeof sock_dir, "/tmp/emq-fuzz-consumer-XXXXXX");
    if (mkdtemp(sock_dir) == NULL)
        abort();
    snprintf(sock_path, sizeof sock_path, "%s/s.sock", sock_dir);
    listen_fd = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un sa;
    memset(&sa, 0, sizeof sa);
    sa.sun_family = AF_UNIX;
    snprintf(sa.sun_path, sizeof sa.sun_path, "%s", sock_path);
    if (listen_fd < 0 || bind(listen_fd, (struct sockaddr *)&sa, sizeof sa) ||
        listen(listen_fd, 16))
        abort();
    atexit(cleanup_socket);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1 || size > 32768)
        return 0;
    setup_once();
    static fake f;
    memset(&f, 0, offsetof(fake, in));
    f.in_len = 0;
    f.listen_fd = listen_fd;
    f.client_fd = -1;
    f.flags = data[0];
    if (pipe(f.wake) != 0)
        abort();
    const uint8_t *p = data + 1, *end = data + size;
    while (p <= end && f.nchunks < MAX_CHUNKS) {
        const uint8_t *s = find(p, (size_t)(end - p), SEP, strlen(SEP));
        const uint8_t *e = s ? s : end;
        if (e > p)
            f.chunks[f.nchunks++] = (chunk){p, (size_t)(e - p)};
        if (s == NULL)
            break;
        p = s + strlen(SEP);
    }

    emq_conf_t *conf = emq_conf_new();
    if (conf == NULL)
        abort();
    char url[200];
    snprintf(url, sizeof url, "unix://%s", sock_path);
    set(conf, "url", url);
    set(conf, "protocol", f.flags & 1 ? "3" : "2");
    set(conf, "on_group_lost", f.flags & 2 ? "fatal" : "recreate");
    set(conf, "max_deliveries", f.flags & 32 ? "1" : "3");
    set(conf, "claim.interval_ms", f.flags & 64 ? "1" : "100000");
    set(conf, "claim.min_idle_ms", "1000");
    set(conf, "count", f.flags & 128 ? "1" : "10");
    set(conf, "queue", "q");
    set(conf, "group", "g");
    set(conf, "consumer", "c1");
    set(conf, "start", "head");
    set(conf, "block_ms", "10");
    set(conf, "lease.ttl_ms", "1100");
    set(conf, "connect_timeout_ms", "300");
    set(conf, "command_timeout_ms", "300");
    set(conf, "reconnect.backoff_min_ms", "0");
    set(conf, "reconnect.backoff_max_ms", "0");
    set(conf, "reconnect.max_attempts", "1");
    set(conf, "log.level", "debug");
    emq_conf_set_log(conf, log_sink, NULL);

    handler_state h = {f.flags, 0};
    emq_consumer_t *c = NULL;
    emq_error err;
    if (emq_consumer_new(conf, handler, &h, &c, &err) != EMQ_OK) {
        fprintf(stderr, "consumer_new: %s\n", err.message);
        abort();
    }
    emq_conf_destroy(conf);
    f.consumer = c;
    f.started_ms = emq__now_ms();
    pthread_t thread;
    if (pthread_create(&thread, NULL, server_main, &f) != 0)
        abort();
    memset(&err, 0, sizeof err);
    emq_status st = emq_consumer_run(c, &err);
    if (st != EMQ_OK && err.code != st) {
        fprintf(stderr, "run returned %s but err says %s\n",
                emq_status_name(st), emq_status_name(err.code));
        abort();
    }
    check_printable("error message", err.message);
    if (trace)
        fprintf(stderr, "run: %s %s\n", emq_status_name(st), err.message);
    atomic_store(&f.quit, 1);
    if (write(f.wake[1], "x", 1) != 1)
        abort();
    pthread_join(thread, NULL);
    close(f.wake[0]);
    close(f.wake[1]);

    char stats[2048];
    size_t need = emq_consumer_stats_json(c, stats, sizeof stats);
    if (need >= sizeof stats || strlen(stats) != need)
        abort();
    emq_consumer_destroy(c);
    return 0;
}
