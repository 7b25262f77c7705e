/* SPDX-License-Identifier: BSD-3-Clause */
/* fakepeer.c: a scripted misbehaving Redis peer and a breakable TCP proxy.
 *
 * One thread owns a loopback listener, a wake-up pipe and up to MAX_CONNS
 * connections, and multiplexes them with poll(2) in 100 ms rounds, so a
 * stop request is seen within one round. In the scripted modes it parses
 * each command the client sends and answers as the mode says (nothing,
 * raw bytes, bytes then close, bytes then stall). In PROXY mode it copies
 * bytes between each client and its own upstream connection to a real
 * server, until told to drop every connection or to freeze. Writes wait at
 * most SEND_WAIT_MS for room and then give the connection up, so a client
 * that never reads cannot wedge the thread. Control calls from the test
 * thread (drop, freeze, stop) are applied by the peer thread between rounds
 * and acknowledged, so they have taken effect when the call returns.
 */
#include "harness/fakepeer.h"
#include "harness/test.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MAX_CONNS 32
#define IN_MAX (1024 * 1024) /* a client sending more unparsed is dropped */
#define SEND_WAIT_MS 2000
#define CONTROL_WAIT_MS 3000

typedef struct peer_conn {
    int fd;         /* client side; -1 when the slot is free */
    int up;         /* upstream (PROXY); -1 otherwise */
    int stalled;    /* REPLY_STALL fired: never read or write again */
    int flooding;   /* REPLY_FLOOD fired: write the flood, read nothing */
    int subscribed; /* SENTINEL: a SUBSCRIBE came */
    char *in;       /* unparsed client bytes (scripted modes) */
    size_t len, cap;
} peer_conn;

struct emq_peer {
    emq_peer_opts opts; /* reply and trigger point at the copies below */
    char *reply;        /* copy of opts.reply */
    char trigger[64];   /* copy of opts.trigger; "" = every command */
    int listen_fd;
    int port;
    char url[64];
    int wake[2]; /* pipe: control requests */
    pthread_t thread;
    pthread_mutex_t mu; /* guards everything below */
    pthread_cond_t cv;
    int stop;                /* ask the thread to end */
    int drop;                /* ask the thread to close every connection */
    int freeze;              /* PROXY: forwarding frozen */
    int pace_ms;             /* PROXY: pause after each full read of a
                                server's reply (emq_peer_pace) */
    int stall_open;          /* PROXY: stall the open connections
                                (emq_peer_stall_open), once */
    unsigned long requested; /* control sequence asked for */
    unsigned long applied;   /* control sequence the thread has applied */
    int accepted;            /* connections accepted */
    int commands;            /* commands parsed */
    char last[64];           /* last command name, upper-cased */
    char master[64];         /* SENTINEL: copy of opts.sentinel_master */
    int named_port;          /* SENTINEL: the primary it names now */
    int switch_to;           /* SENTINEL: a switch asked, not yet sent */
    int asked;               /* SENTINEL: get-master-addr-by-name answered */
    char publish[512];       /* SENTINEL: a message to send ("" none) */
    int flood_count;         /* SENTINEL: messages of a flood to send */
    size_t flood_bytes;      /* SENTINEL: the payload of each */
    char *flood_block;       /* REPLY_FLOOD: flood units, FLOOD_BLOCK bytes */
    long long flooded;       /* bytes of it sent */
    peer_conn conns[MAX_CONNS]; /* owned by the peer thread */
};

static int64_t mono_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void conn_close(peer_conn *c) {
    if (c->fd >= 0)
        close(c->fd);
    if (c->up >= 0)
        close(c->up);
    free(c->in);
    memset(c, 0, sizeof *c);
    c->fd = c->up = -1;
}

/* Sends all n bytes, waiting at most SEND_WAIT_MS in total for room.
 * Returns 0, or -1 when the peer went away or never made room. */
static int send_bounded(int fd, const char *p, size_t n) {
    int64_t deadline = mono_ms() + SEND_WAIT_MS;
    while (n > 0) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w > 0) {
            p += w;
            n -= (size_t)w;
            continue;
        }
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            int64_t left = deadline - mono_ms();
            if (left <= 0)
                return -1;
            struct pollfd pfd = {fd, POLLOUT, 0};
            poll(&pfd, 1, (int)left);
            continue;
        }
        return -1;
    }
    return 0;
}

static int send_str(int fd, const char *s) {
    return send_bounded(fd, s, strlen(s));
}

/* The decimal number at p (optional '-'), read no further than end, which
 * is within the buffer: the input is not NUL-terminated. -1 when absent. */
static long line_number(const char *p, const char *end) {
    int neg = 0;
    if (p < end && *p == '-') {
        neg = 1;
        p++;
    }
    long n = 0;
    int digits = 0;
    while (p < end && *p >= '0' && *p <= '9' && digits < 12) {
        n = n * 10 + (*p++ - '0');
        digits++;
    }
    return digits ? (neg ? -n : n) : -1;
}

/* Parses one command at the start of buf. Returns bytes consumed, 0 when
 * incomplete, -1 when malformed. name gets the command name upper-cased. */
static long parse_command(const char *buf, size_t len, char *name,
                          size_t name_size) {
    name[0] = '\0';
    if (len == 0)
        return 0;
    if (buf[0] != '*') { /* inline command: one line */
        const char *nl = memchr(buf, '\n', len);
        if (nl == NULL)
            return len > 4096 ? -1 : 0;
        size_t i = 0;
        while (buf + i < nl && buf[i] != ' ' && buf[i] != '\r' &&
               i + 1 < name_size) {
            name[i] = (char)toupper((unsigned char)buf[i]);
            i++;
        }
        name[i] = '\0';
        return (long)(nl - buf + 1);
    }
    size_t pos = 0;
    long count = -1;
    for (long arg = -1; arg < 0 || arg < count; arg++) {
        const char *nl = memchr(buf + pos, '\n', len - pos);
        if (nl == NULL)
            return len - pos > 64 ? -1 : 0;
        char expect = arg < 0 ? '*' : '$';
        if (buf[pos] != expect)
            return -1;
        long n = line_number(buf + pos + 1, nl);
        pos = (size_t)(nl - buf) + 1;
        if (arg < 0) {
            if (n < 1 || n > 1024 * 1024)
                return -1;
            count = n;
            continue;
        }
        if (n < 0 || (size_t)n > IN_MAX)
            return -1;
        if (len - pos < (size_t)n + 2)
            return 0;
        if (arg == 0) {
            size_t k = (size_t)n < name_size - 1 ? (size_t)n : name_size - 1;
            for (size_t i = 0; i < k; i++)
                name[i] = (char)toupper((unsigned char)buf[pos + i]);
            name[k] = '\0';
        }
        pos += (size_t)n + 2;
    }
    return (long)pos;
}

/* 1 when the n bytes at buf hold word (a command's arguments are not
 * strings). */
static int bytes_hold(const char *buf, size_t n, const char *word) {
    size_t k = strlen(word);
    for (size_t i = 0; k <= n && i <= n - k; i++)
        if (memcmp(buf + i, word, k) == 0)
            return 1;
    return 0;
}

/* SENTINEL: sends the RESP message msg to every subscribed connection.
 * The peer thread. */
static void sentinel_send_all(emq_peer *p, const char *msg) {
    for (int i = 0; i < MAX_CONNS; i++)
        if (p->conns[i].fd >= 0 && p->conns[i].subscribed &&
            send_str(p->conns[i].fd, msg) != 0)
            conn_close(&p->conns[i]);
}

/* SENTINEL: sends count messages on +switch-master whose payloads are
 * "other " and then bytes of 'x' (news of another master, or no news
 * at all when too long) to every subscribed connection. The peer
 * thread. */
static void sentinel_flood(emq_peer *p, int count, size_t bytes) {
    char head[96];
    int h = snprintf(head, sizeof head,
                     "*3\r\n$7\r\nmessage\r\n$14\r\n+switch-master\r\n"
                     "$%zu\r\nother ",
                     bytes + 6);
    size_t len = (size_t)h + bytes + 2;
    char *msg = malloc(len + 1);
    if (msg == NULL)
        return;
    memcpy(msg, head, (size_t)h);
    memset(msg + h, 'x', bytes);
    memcpy(msg + h + bytes, "\r\n", 3);
    for (int k = 0; k < count; k++)
        for (int i = 0; i < MAX_CONNS; i++)
            if (p->conns[i].fd >= 0 && p->conns[i].subscribed &&
                send_bounded(p->conns[i].fd, msg, len) != 0)
                conn_close(&p->conns[i]);
    free(msg);
}

/* SENTINEL: announces a switch of its master from the primary it names
 * to port on every subscribed connection; names port from then on. The
 * peer thread. */
static void sentinel_announce(emq_peer *p, int port) {
    char payload[160], msg[256];
    pthread_mutex_lock(&p->mu);
    int from = p->named_port;
    p->named_port = port;
    pthread_mutex_unlock(&p->mu);
    int n = snprintf(payload, sizeof payload, "%s 127.0.0.1 %d 127.0.0.1 %d",
                     p->master, from, port);
    snprintf(msg, sizeof msg,
             "*3\r\n$7\r\nmessage\r\n$14\r\n+switch-master\r\n$%d\r\n%s"
             "\r\n",
             n, payload);
    sentinel_send_all(p, msg);
}

/* SENTINEL: answers the command of `used` bytes at cmd (named name) on c.
 * Returns -1 when c must be closed. */
static int sentinel_serve(emq_peer *p, peer_conn *c, const char *name,
                          const char *cmd, size_t used) {
    char out[256];
    if (strcmp(name, "SUBSCRIBE") == 0) {
        if (p->opts.switch_channels_only && bytes_hold(cmd, used, "failover"))
            return send_str(c->fd, "-NOPERM this user has no permissions to "
                                   "access one of the channels used as "
                                   "arguments\r\n");
        c->subscribed = 1;
        const char *channels[] = {"+switch-master", "+promoted-slave"};
        for (int i = 0; i < 2; i++) {
            if (!bytes_hold(cmd, used, channels[i]))
                continue;
            snprintf(out, sizeof out,
                     "*3\r\n$9\r\nsubscribe\r\n$%zu\r\n%s\r\n:%d\r\n",
                     strlen(channels[i]), channels[i], i + 1);
            if (send_str(c->fd, out) != 0)
                return -1;
        }
        return 0;
    }
    if (strcmp(name, "SENTINEL") != 0) {
        const char *answer = !strcmp(name, "HELLO")
                                 ? "-ERR unknown command 'HELLO'\r\n"
                             : !strcmp(name, "PING") ? "+PONG\r\n"
                                                     : "+OK\r\n";
        return send_str(c->fd, answer);
    }
    if (bytes_hold(cmd, used, "sentinels"))
        return send_str(c->fd, "*0\r\n"); /* SENTINEL sentinels: none */
    if (!bytes_hold(cmd, used, "get-master-addr-by-name")) {
        /* SENTINEL master: its failover-timeout, when given. */
        if (p->opts.failover_timeout_ms <= 0)
            return send_str(c->fd, "*0\r\n");
        char ms[24];
        int m = snprintf(ms, sizeof ms, "%d", p->opts.failover_timeout_ms);
        snprintf(out, sizeof out,
                 "*2\r\n$16\r\nfailover-timeout\r\n$%d\r\n%s\r\n", m, ms);
        return send_str(c->fd, out);
    }
    pthread_mutex_lock(&p->mu);
    int port = p->named_port, first = p->asked++ == 0;
    pthread_mutex_unlock(&p->mu);
    char num[16];
    int n = snprintf(num, sizeof num, "%d", port);
    snprintf(out, sizeof out, "*2\r\n$9\r\n127.0.0.1\r\n$%d\r\n%s\r\n", n, num);
    if (send_str(c->fd, out) != 0)
        return -1;
    if (first && p->opts.switch_to_port > 0)
        sentinel_announce(p, p->opts.switch_to_port);
    return 0;
}

/* Acts on every complete command buffered on c. Returns -1 when c must be
 * closed. */
static int serve_commands(emq_peer *p, peer_conn *c) {
    size_t off = 0;
    int rc = 0;
    while (off < c->len && !c->stalled) {
        char name[64];
        long used = parse_command(c->in + off, c->len - off, name, sizeof name);
        if (used < 0) {
            rc = -1;
            break;
        }
        if (used == 0)
            break;
        off += (size_t)used;
        pthread_mutex_lock(&p->mu);
        p->commands++;
        snprintf(p->last, sizeof p->last, "%s", name);
        pthread_mutex_unlock(&p->mu);
        if (p->opts.mode == EMQ_PEER_SENTINEL) {
            if (sentinel_serve(p, c, name, c->in + off - used, (size_t)used) !=
                0) {
                rc = -1;
                break;
            }
            continue;
        }
        int hit = p->trigger[0] == '\0' || strcasecmp(name, p->trigger) == 0;
        if (!hit) {
            const char *answer = !strcmp(name, "HELLO")
                                     ? "-ERR unknown command 'HELLO'\r\n"
                                 : !strcmp(name, "PING") ? "+PONG\r\n"
                                                         : "+OK\r\n";
            if (send_str(c->fd, answer) != 0) {
                rc = -1;
                break;
            }
            continue;
        }
        if (p->opts.mode == EMQ_PEER_SILENT)
            continue;
        if (send_bounded(c->fd, p->reply, p->opts.reply_len) != 0) {
            rc = -1;
            break;
        }
        if (p->opts.mode == EMQ_PEER_REPLY_CLOSE) {
            rc = -1;
            break;
        }
        if (p->opts.mode == EMQ_PEER_REPLY_STALL) {
            c->stalled = 1;
            off = c->len;
        }
        if (p->opts.mode == EMQ_PEER_REPLY_FLOOD) {
            c->flooding = 1;
            off = c->len;
            break;
        }
    }
    memmove(c->in, c->in + off, c->len - off);
    c->len -= off;
    return rc;
}

static int connect_upstream(int port) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0)
        return -1;
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons((uint16_t)port);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        close(fd);
        return -1;
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return fd;
}

static void accept_one(emq_peer *p) {
    int fd = accept(p->listen_fd, NULL, NULL);
    if (fd < 0)
        return;
    pthread_mutex_lock(&p->mu);
    p->accepted++;
    pthread_mutex_unlock(&p->mu);
    if (p->opts.mode == EMQ_PEER_CLOSE) {
        close(fd);
        return;
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    peer_conn *slot = NULL;
    for (int i = 0; i < MAX_CONNS && slot == NULL; i++)
        if (p->conns[i].fd < 0)
            slot = &p->conns[i];
    if (slot == NULL) {
        close(fd);
        return;
    }
    slot->fd = fd;
    if (p->opts.mode == EMQ_PEER_PROXY) {
        slot->up = connect_upstream(p->opts.upstream_port);
        if (slot->up < 0)
            conn_close(slot);
    }
}

/* Reads what c's client sent and handles it. */
static void client_readable(emq_peer *p, peer_conn *c) {
    char buf[16384];
    ssize_t n = recv(c->fd, buf, sizeof buf, 0);
    if (n < 0 && (errno == EINTR || errno == EAGAIN))
        return;
    if (n <= 0) {
        conn_close(c);
        return;
    }
    if (p->opts.mode == EMQ_PEER_PROXY) {
        if (send_bounded(c->up, buf, (size_t)n) != 0)
            conn_close(c);
        return;
    }
    if (c->len + (size_t)n > IN_MAX) {
        conn_close(c);
        return;
    }
    if (c->len + (size_t)n > c->cap) {
        size_t cap = c->cap ? c->cap : 4096;
        while (cap < c->len + (size_t)n)
            cap *= 2;
        char *in = realloc(c->in, cap);
        if (in == NULL) {
            conn_close(c);
            return;
        }
        c->in = in;
        c->cap = cap;
    }
    memcpy(c->in + c->len, buf, (size_t)n);
    c->len += (size_t)n;
    if (serve_commands(p, c) != 0)
        conn_close(c);
}

/* Forwards what the server sent to c's client; paced, a full buffer (a
 * big reply, never a short one) is followed by a pause. */
static void upstream_readable(peer_conn *c, int pace_ms) {
    char buf[16384];
    ssize_t n = recv(c->up, buf, sizeof buf, 0);
    if (n < 0 && (errno == EINTR || errno == EAGAIN))
        return;
    if (n <= 0 || send_bounded(c->fd, buf, (size_t)n) != 0)
        conn_close(c);
    else if (pace_ms > 0 && (size_t)n == sizeof buf)
        usleep((useconds_t)pace_ms * 1000);
}

/* Applies pending control requests; returns 1 when asked to stop. */
static int apply_control(emq_peer *p, int *frozen, int *pace_ms) {
    char drain[64];
    while (read(p->wake[0], drain, sizeof drain) > 0)
        ;
    pthread_mutex_lock(&p->mu);
    int stop = p->stop, drop = p->drop, stall = p->stall_open;
    int switch_to = p->switch_to;
    char publish[sizeof p->publish];
    memcpy(publish, p->publish, sizeof publish);
    p->publish[0] = '\0';
    int flood_count = p->flood_count;
    size_t flood_bytes = p->flood_bytes;
    p->flood_count = 0;
    p->drop = 0;
    p->stall_open = 0;
    p->switch_to = 0;
    *frozen = p->freeze;
    *pace_ms = p->pace_ms;
    pthread_mutex_unlock(&p->mu);
    if (drop || stop)
        for (int i = 0; i < MAX_CONNS; i++)
            if (p->conns[i].fd >= 0)
                conn_close(&p->conns[i]);
    if (stall)
        for (int i = 0; i < MAX_CONNS; i++)
            if (p->conns[i].fd >= 0)
                p->conns[i].stalled = 1;
    if (switch_to > 0)
        sentinel_announce(p, switch_to);
    if (publish[0] != '\0')
        sentinel_send_all(p, publish);
    if (flood_count > 0)
        sentinel_flood(p, flood_count, flood_bytes);
    pthread_mutex_lock(&p->mu);
    p->applied = p->requested;
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
    return stop;
}

#define FLOOD_BLOCK 65536

/* REPLY_FLOOD: one block of the flood to a writable client; a client
 * that closed (or broke) ends it. */
static void flood_some(emq_peer *p, peer_conn *c) {
    ssize_t w =
        send(c->fd, p->flood_block, FLOOD_BLOCK, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (w > 0) {
        pthread_mutex_lock(&p->mu);
        p->flooded += w;
        pthread_mutex_unlock(&p->mu);
        if (p->opts.flood_pace_ms > 0)
            usleep((useconds_t)p->opts.flood_pace_ms * 1000);
        return;
    }
    if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
        return;
    conn_close(c); /* its input buffer too */
}

long long emq_peer_flooded(const emq_peer *p) {
    emq_peer *m = (emq_peer *)p;
    pthread_mutex_lock(&m->mu);
    long long n = m->flooded;
    pthread_mutex_unlock(&m->mu);
    return n;
}

static void *peer_main(void *arg) {
    emq_peer *p = arg;
    for (;;) {
        int frozen, pace_ms;
        if (apply_control(p, &frozen, &pace_ms))
            break;
        struct pollfd fds[2 + 2 * MAX_CONNS];
        peer_conn *owner[2 + 2 * MAX_CONNS];
        int nfds = 0;
        fds[nfds++] = (struct pollfd){p->wake[0], POLLIN, 0};
        fds[nfds++] = (struct pollfd){p->listen_fd, POLLIN, 0};
        for (int i = 0; i < MAX_CONNS; i++) {
            peer_conn *c = &p->conns[i];
            if (c->fd < 0 || c->stalled || frozen)
                continue;
            owner[nfds] = c;
            fds[nfds++] =
                (struct pollfd){c->fd, c->flooding ? POLLOUT : POLLIN, 0};
            if (c->up >= 0) {
                owner[nfds] = c;
                fds[nfds++] = (struct pollfd){c->up, POLLIN, 0};
            }
        }
        int ready = poll(fds, (nfds_t)nfds, 100);
        if (ready <= 0)
            continue;
        if (fds[1].revents & POLLIN)
            accept_one(p);
        for (int i = 2; i < nfds; i++) {
            peer_conn *c = owner[i];
            if (fds[i].revents == 0 || c->fd < 0)
                continue; /* closed earlier in this round */
            if (fds[i].fd == c->fd && c->flooding)
                flood_some(p, c);
            else if (fds[i].fd == c->fd)
                client_readable(p, c);
            else if (fds[i].fd == c->up)
                upstream_readable(c, pace_ms);
        }
    }
    return NULL;
}

/* Posts a control request and waits (bounded) until the thread applied it. */
static void control(emq_peer *p, int drop, int freeze) {
    pthread_mutex_lock(&p->mu);
    if (drop)
        p->drop = 1;
    if (freeze >= 0)
        p->freeze = freeze;
    unsigned long seq = ++p->requested;
    pthread_mutex_unlock(&p->mu);
    if (write(p->wake[1], "x", 1) < 0) {
        /* Full pipe: the thread wakes anyway within one poll round. */
    }
    int64_t deadline = mono_ms() + CONTROL_WAIT_MS;
    pthread_mutex_lock(&p->mu);
    while (p->applied < seq && mono_ms() < deadline) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 20 * 1000000L;
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&p->cv, &p->mu, &ts);
    }
    int done = p->applied >= seq;
    pthread_mutex_unlock(&p->mu);
    if (!done)
        FAIL("fake peer did not apply a control request in %d ms",
             CONTROL_WAIT_MS);
}

emq_peer *emq_peer_start(const emq_peer_opts *opts) {
    if (opts == NULL || opts->mode < EMQ_PEER_SILENT ||
        opts->mode > EMQ_PEER_SENTINEL ||
        (opts->mode == EMQ_PEER_SENTINEL &&
         (opts->sentinel_master == NULL || opts->primary_port <= 0)) ||
        (opts->mode == EMQ_PEER_REPLY_FLOOD && opts->flood == NULL))
        FAIL("emq_peer_start: bad options");
    emq_peer *p = calloc(1, sizeof *p);
    if (p == NULL)
        FAIL("emq_peer_start: out of memory");
    p->opts = *opts;
    if (opts->reply) {
        size_t n = opts->reply_len ? opts->reply_len : strlen(opts->reply);
        p->reply = malloc(n ? n : 1);
        if (p->reply == NULL)
            FAIL("emq_peer_start: out of memory");
        memcpy(p->reply, opts->reply, n);
        p->opts.reply_len = n;
    }
    p->opts.reply = p->reply;
    if (opts->mode == EMQ_PEER_REPLY_FLOOD) {
        size_t n = opts->flood_len ? opts->flood_len : strlen(opts->flood);
        p->opts.flood_len = n;
        p->flood_block = malloc(FLOOD_BLOCK);
        if (p->flood_block == NULL || n == 0 || n > FLOOD_BLOCK)
            FAIL("emq_peer_start: bad flood unit");
        /* Whole units, then the start of the next: the stream stays one
         * endless run of units. */
        for (size_t i = 0; i < FLOOD_BLOCK; i++)
            p->flood_block[i] = opts->flood[i % n];
        if (FLOOD_BLOCK % n != 0)
            FAIL("emq_peer_start: the flood unit must divide %d bytes",
                 FLOOD_BLOCK);
    }
    p->opts.flood = NULL;
    if (opts->sentinel_master != NULL)
        snprintf(p->master, sizeof p->master, "%s", opts->sentinel_master);
    p->opts.sentinel_master = p->master;
    p->named_port = opts->primary_port;
    if (opts->trigger)
        snprintf(p->trigger, sizeof p->trigger, "%s", opts->trigger);
    p->opts.trigger = p->trigger;
    for (int i = 0; i < MAX_CONNS; i++)
        p->conns[i].fd = p->conns[i].up = -1;

    p->listen_fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t alen = sizeof a;
    if (p->listen_fd < 0 ||
        bind(p->listen_fd, (struct sockaddr *)&a, sizeof a) != 0 ||
        listen(p->listen_fd, 16) != 0 ||
        getsockname(p->listen_fd, (struct sockaddr *)&a, &alen) != 0)
        FAIL("fake peer listen: %s", strerror(errno));
    p->port = ntohs(a.sin_port);
    snprintf(p->url, sizeof p->url, "redis://127.0.0.1:%d", p->port);
    if (pipe(p->wake) != 0)
        FAIL("pipe: %s", strerror(errno));
    fcntl(p->wake[0], F_SETFL, O_NONBLOCK);
    fcntl(p->wake[1], F_SETFL, O_NONBLOCK);
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv, NULL);
    if (pthread_create(&p->thread, NULL, peer_main, p) != 0)
        FAIL("fake peer: pthread_create failed");
    return p;
}

void emq_peer_stop(emq_peer *p) {
    if (p == NULL)
        return;
    pthread_mutex_lock(&p->mu);
    p->stop = 1;
    pthread_mutex_unlock(&p->mu);
    if (write(p->wake[1], "x", 1) < 0) {
        /* The thread sees stop within one poll round anyway. */
    }
    pthread_join(p->thread, NULL); /* bounded: <= one round + SEND_WAIT_MS */
    for (int i = 0; i < MAX_CONNS; i++)
        if (p->conns[i].fd >= 0)
            conn_close(&p->conns[i]);
    close(p->listen_fd);
    close(p->wake[0]);
    close(p->wake[1]);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->cv);
    free(p->reply);
    free(p->flood_block);
    free(p);
}

const char *emq_peer_url(const emq_peer *p) { return p->url; }
int emq_peer_port(const emq_peer *p) { return p->port; }

/* Reads a counter of p's that the peer thread writes under p->mu. */
static int counter(const emq_peer *p, const int *field) {
    emq_peer *q = (emq_peer *)p;
    pthread_mutex_lock(&q->mu);
    int n = *field;
    pthread_mutex_unlock(&q->mu);
    return n;
}

int emq_peer_accepted(const emq_peer *p) { return counter(p, &p->accepted); }
int emq_peer_commands(const emq_peer *p) { return counter(p, &p->commands); }

void emq_peer_last_command(const emq_peer *p, char *out, size_t size) {
    emq_peer *q = (emq_peer *)p;
    pthread_mutex_lock(&q->mu);
    snprintf(out, size, "%s", q->last);
    pthread_mutex_unlock(&q->mu);
}

void emq_peer_drop(emq_peer *p) { control(p, 1, -1); }
void emq_peer_freeze(emq_peer *p, int on) { control(p, 0, on ? 1 : 0); }

/* Sets a request field of p's under p->mu and waits until the peer
 * thread applied it. */
static void request(emq_peer *p, int *field, int value) {
    pthread_mutex_lock(&p->mu);
    *field = value;
    pthread_mutex_unlock(&p->mu);
    control(p, 0, -1);
}

void emq_peer_stall_open(emq_peer *p) { request(p, &p->stall_open, 1); }

void emq_peer_sentinel_switch(emq_peer *p, int port) {
    request(p, &p->switch_to, port);
}

int emq_peer_sentinel_asked(const emq_peer *p) { return counter(p, &p->asked); }

void emq_peer_sentinel_flood(emq_peer *p, int count, size_t bytes) {
    pthread_mutex_lock(&p->mu);
    p->flood_count = count;
    p->flood_bytes = bytes;
    pthread_mutex_unlock(&p->mu);
    control(p, 0, -1);
}

void emq_peer_sentinel_name(emq_peer *p, int port) {
    pthread_mutex_lock(&p->mu);
    p->named_port = port;
    pthread_mutex_unlock(&p->mu);
}

void emq_peer_sentinel_publish(emq_peer *p, const char *channel,
                               const char *payload) {
    pthread_mutex_lock(&p->mu);
    snprintf(p->publish, sizeof p->publish,
             "*3\r\n$7\r\nmessage\r\n$%zu\r\n%s\r\n$%zu\r\n%s\r\n",
             strlen(channel), channel, strlen(payload), payload);
    pthread_mutex_unlock(&p->mu);
    control(p, 0, -1);
}

void emq_peer_pace(emq_peer *p, int ms) { request(p, &p->pace_ms, ms); }

/* ---- intercepting proxy ------------------------------------------------ */

#define ICEPT_RULES 8
#define ICEPT_LOG_MAX (1024 * 1024)
#define ICEPT_TAGS 65536
/* A tag's bit for a read of new entries (XREADGROUP ... >); the rest is
 * the rule's index, or ICEPT_NO_RULE. */
#define ICEPT_READ 0x10000
#define ICEPT_NO_RULE 0xffff

typedef struct icept_conn {
    int fd, up;
    char *cin, *uin; /* unparsed client / upstream bytes */
    size_t clen, ccap, ulen, ucap;
    int *tags; /* per command in flight: rule index, ICEPT_READ */
    size_t thead, ttail;
    int reads;          /* reads of new entries sent up and not answered yet */
    int64_t release_ms; /* the command at the head of cin, matched by a
                           rule with delay_ms, goes up then (0: none) */
} icept_conn;

struct emq_icept {
    emq_icept_rule rules[ICEPT_RULES];
    int left[ICEPT_RULES];
    char cmd[ICEPT_RULES][64];
    size_t nrules;
    int upstream_port, listen_fd, port, wake[2];
    char url[64];
    pthread_t thread;
    pthread_mutex_t mu; /* guards stop, counters and log */
    int stop, accepted, replaced;
    int hold;       /* replies are held upstream (emq_icept_hold) */
    int held;       /* commands a rule's delay_ms holds now */
    int most_reads; /* the most reads of new entries one connection had
                       sent up unanswered at once */
    char *log;
    size_t loglen;
    icept_conn conns[MAX_CONNS];
};

static void icept_close(icept_conn *c) {
    if (c->fd >= 0)
        close(c->fd);
    if (c->up >= 0)
        close(c->up);
    free(c->cin);
    free(c->uin);
    free(c->tags);
    memset(c, 0, sizeof *c);
    c->fd = c->up = -1;
}

static int buf_add(char **b, size_t *len, size_t *cap, const char *p,
                   size_t n) {
    if (*len + n > IN_MAX * 8)
        return -1;
    if (*len + n > *cap) {
        size_t nc = *cap ? *cap : 4096;
        while (nc < *len + n)
            nc *= 2;
        char *q = realloc(*b, nc);
        if (q == NULL)
            return -1;
        *b = q;
        *cap = nc;
    }
    memcpy(*b + *len, p, n);
    *len += n;
    return 0;
}

/* Bytes of one complete RESP2/RESP3 reply at b; 0 incomplete, -1 bad. */
static long resp_skip(const char *b, size_t len, int depth) {
    if (len == 0)
        return 0;
    if (depth > 32)
        return -1;
    const char *nl = memchr(b, '\n', len);
    if (nl == NULL)
        return 0;
    size_t pos = (size_t)(nl - b) + 1;
    long n;
    switch (b[0]) {
    case '+':
    case '-':
    case ':':
    case '_':
    case ',':
    case '#':
    case '(':
        return (long)pos;
    case '$':
    case '!':
    case '=':
        n = line_number(b + 1, nl);
        if (n < 0)
            return (long)pos;
        if (len - pos < (size_t)n + 2)
            return 0;
        return (long)(pos + (size_t)n + 2);
    case '*':
    case '~':
    case '>':
    case '%':
    case '|': {
        n = line_number(b + 1, nl);
        if (n < 0)
            return (long)pos;
        long elems = (b[0] == '%' || b[0] == '|') ? 2 * n : n;
        for (long i = 0; i < elems; i++) {
            long k = resp_skip(b + pos, len - pos, depth + 1);
            if (k <= 0)
                return k;
            pos += (size_t)k;
        }
        if (b[0] == '|') { /* an attribute precedes the real reply */
            long k = resp_skip(b + pos, len - pos, depth + 1);
            if (k <= 0)
                return k;
            pos += (size_t)k;
        }
        return (long)pos;
    }
    default:
        return -1;
    }
}

/* Parses one RESP array command: consumed bytes (0 incomplete, -1 bad);
 * name upper-cased, whether the last argument is ">", and the joined text
 * into line. */
static long icept_parse(const char *buf, size_t len, char *name,
                        size_t name_size, int *last_gt, char *line,
                        size_t line_size) {
    name[0] = '\0';
    line[0] = '\0';
    *last_gt = 0;
    size_t lpos = 0;
    if (len == 0)
        return 0;
    if (buf[0] != '*')
        return -1;
    size_t pos = 0;
    long count = -1;
    for (long arg = -1; arg < 0 || arg < count; arg++) {
        const char *nl = memchr(buf + pos, '\n', len - pos);
        if (nl == NULL)
            return len - pos > 64 ? -1 : 0;
        if (buf[pos] != (arg < 0 ? '*' : '$'))
            return -1;
        long n = line_number(buf + pos + 1, nl);
        pos = (size_t)(nl - buf) + 1;
        if (arg < 0) {
            if (n < 1 || n > 1024 * 1024)
                return -1;
            count = n;
            continue;
        }
        if (n < 0 || (size_t)n > IN_MAX * 8)
            return -1;
        if (len - pos < (size_t)n + 2)
            return 0;
        if (arg == 0) {
            size_t k = (size_t)n < name_size - 1 ? (size_t)n : name_size - 1;
            for (size_t i = 0; i < k; i++)
                name[i] = (char)toupper((unsigned char)buf[pos + i]);
            name[k] = '\0';
        }
        size_t k = (size_t)n < 200 ? (size_t)n : 200;
        if (lpos + k + 2 < line_size) {
            if (lpos)
                line[lpos++] = ' ';
            memcpy(line + lpos, buf + pos, k);
            lpos += k;
            line[lpos] = '\0';
        }
        if (arg == count - 1)
            *last_gt = n == 1 && buf[pos] == '>';
        pos += (size_t)n + 2;
    }
    return (long)pos;
}

static void icept_log(emq_icept *p, const char *line) {
    size_t n = strlen(line);
    pthread_mutex_lock(&p->mu);
    if (p->loglen + n + 2 <= ICEPT_LOG_MAX) {
        memcpy(p->log + p->loglen, line, n);
        p->loglen += n;
        p->log[p->loglen++] = '\n';
        p->log[p->loglen] = '\0';
    }
    pthread_mutex_unlock(&p->mu);
}

/* Sends up the commands in c->cin, but none past one that a rule delays
 * until its time (c->release_ms). */
static int icept_pump(emq_icept *p, icept_conn *c) {
    size_t off = 0;
    char line[2048];
    while (off < c->clen) {
        char name[64];
        int last_gt;
        long used = icept_parse(c->cin + off, c->clen - off, name, sizeof name,
                                &last_gt, line, sizeof line);
        if (used < 0)
            return -1;
        if (used == 0)
            break;
        int tag = -1;
        int is_read = last_gt && strcasecmp(name, "XREADGROUP") == 0;
        for (size_t i = 0; i < p->nrules && tag < 0; i++) {
            if (strcasecmp(p->cmd[i], name) != 0 || p->left[i] == 0)
                continue;
            if (p->rules[i].last_arg_gt >= 0 &&
                p->rules[i].last_arg_gt != last_gt)
                continue;
            if (p->rules[i].contains != NULL &&
                strstr(line, p->rules[i].contains) == NULL)
                continue;
            tag = (int)i;
        }
        if (tag >= 0 && p->rules[tag].delay_ms > 0) {
            int64_t now = mono_ms();
            if (c->release_ms == 0) {
                c->release_ms = now + p->rules[tag].delay_ms;
                pthread_mutex_lock(&p->mu);
                p->held++;
                pthread_mutex_unlock(&p->mu);
            }
            if (now < c->release_ms)
                break; /* it and what follows wait */
            c->release_ms = 0;
            pthread_mutex_lock(&p->mu);
            p->held--;
            pthread_mutex_unlock(&p->mu);
        }
        if (is_read) {
            c->reads++;
            pthread_mutex_lock(&p->mu);
            if (c->reads > p->most_reads)
                p->most_reads = c->reads;
            pthread_mutex_unlock(&p->mu);
        }
        if (tag >= 0 && p->left[tag] > 0)
            p->left[tag]--;
        if (tag >= 0 && p->rules[tag].reply == NULL)
            tag = -1; /* delayed only: the server's reply goes back */
        icept_log(p, line);
        if ((c->ttail + 1) % ICEPT_TAGS == c->thead)
            return -1;
        c->tags[c->ttail] = (tag < 0 ? ICEPT_NO_RULE : tag) |
                            (is_read ? ICEPT_READ : 0);
        c->ttail = (c->ttail + 1) % ICEPT_TAGS;
        if (send_bounded(c->up, c->cin + off, (size_t)used) != 0)
            return -1;
        off += (size_t)used;
    }
    memmove(c->cin, c->cin + off, c->clen - off);
    c->clen -= off;
    return 0;
}

static int icept_client(emq_icept *p, icept_conn *c) {
    char buf[16384];
    ssize_t n = recv(c->fd, buf, sizeof buf, 0);
    if (n < 0 && (errno == EINTR || errno == EAGAIN))
        return 0;
    if (n <= 0 || buf_add(&c->cin, &c->clen, &c->ccap, buf, (size_t)n) != 0)
        return -1;
    return icept_pump(p, c);
}

static int icept_upstream(emq_icept *p, icept_conn *c) {
    char buf[16384];
    ssize_t n = recv(c->up, buf, sizeof buf, 0);
    if (n < 0 && (errno == EINTR || errno == EAGAIN))
        return 0;
    if (n <= 0 || buf_add(&c->uin, &c->ulen, &c->ucap, buf, (size_t)n) != 0)
        return -1;
    size_t off = 0;
    while (off < c->ulen) {
        long used = resp_skip(c->uin + off, c->ulen - off, 0);
        if (used < 0)
            return -1;
        if (used == 0)
            break;
        int tag = -1;
        int is_push = c->uin[off] == '>';
        if (!is_push && c->thead != c->ttail) {
            int t = c->tags[c->thead];
            c->thead = (c->thead + 1) % ICEPT_TAGS;
            if (t & ICEPT_READ)
                c->reads--;
            t &= ~ICEPT_READ;
            tag = t == ICEPT_NO_RULE ? -1 : t;
        }
        int rc;
        if (tag >= 0) {
            const emq_icept_rule *r = &p->rules[tag];
            /* Counted before it is sent: a client that has the reply
             * must find it counted. */
            pthread_mutex_lock(&p->mu);
            p->replaced++;
            pthread_mutex_unlock(&p->mu);
            rc = send_bounded(c->fd, r->reply, r->reply_len);
        } else {
            rc = send_bounded(c->fd, c->uin + off, (size_t)used);
        }
        if (rc != 0)
            return -1;
        off += (size_t)used;
    }
    memmove(c->uin, c->uin + off, c->ulen - off);
    c->ulen -= off;
    return 0;
}

static void *icept_main(void *arg) {
    emq_icept *p = arg;
    for (;;) {
        char drain[64];
        while (read(p->wake[0], drain, sizeof drain) > 0)
            ;
        pthread_mutex_lock(&p->mu);
        int stop = p->stop, hold = p->hold;
        pthread_mutex_unlock(&p->mu);
        if (stop)
            break;
        struct pollfd fds[2 + 2 * MAX_CONNS];
        icept_conn *owner[2 + 2 * MAX_CONNS];
        int nfds = 0;
        fds[nfds++] = (struct pollfd){p->wake[0], POLLIN, 0};
        fds[nfds++] = (struct pollfd){p->listen_fd, POLLIN, 0};
        for (int i = 0; i < MAX_CONNS; i++) {
            icept_conn *c = &p->conns[i];
            if (c->fd < 0)
                continue;
            owner[nfds] = c;
            fds[nfds++] = (struct pollfd){c->fd, POLLIN, 0};
            owner[nfds] = c;
            fds[nfds++] = (struct pollfd){c->up, hold ? 0 : POLLIN, 0};
        }
        /* A delayed command's time bounds the wait. */
        int64_t wait = 100, now = mono_ms();
        for (int i = 0; i < MAX_CONNS; i++)
            if (p->conns[i].fd >= 0 && p->conns[i].release_ms > 0 &&
                p->conns[i].release_ms - now < wait)
                wait = p->conns[i].release_ms - now;
        int ready = poll(fds, (nfds_t)nfds, wait < 0 ? 0 : (int)wait);
        now = mono_ms();
        for (int i = 0; i < MAX_CONNS; i++) {
            icept_conn *c = &p->conns[i];
            if (c->fd >= 0 && c->release_ms > 0 && now >= c->release_ms &&
                icept_pump(p, c) != 0)
                icept_close(c);
        }
        if (ready <= 0)
            continue;
        if (fds[1].revents & POLLIN) {
            int fd = accept(p->listen_fd, NULL, NULL);
            if (fd >= 0) {
                pthread_mutex_lock(&p->mu);
                p->accepted++;
                pthread_mutex_unlock(&p->mu);
                icept_conn *slot = NULL;
                for (int i = 0; i < MAX_CONNS && slot == NULL; i++)
                    if (p->conns[i].fd < 0)
                        slot = &p->conns[i];
                int up = slot ? connect_upstream(p->upstream_port) : -1;
                int *tags = up >= 0 ? malloc(ICEPT_TAGS * sizeof *tags) : NULL;
                if (slot == NULL || up < 0 || tags == NULL) {
                    close(fd);
                    if (up >= 0)
                        close(up);
                    free(tags);
                } else {
                    int one = 1;
                    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
                    slot->fd = fd;
                    slot->up = up;
                    slot->tags = tags;
                }
            }
        }
        for (int i = 2; i < nfds; i++) {
            icept_conn *c = owner[i];
            if (fds[i].revents == 0 || c->fd < 0)
                continue;
            int rc = fds[i].fd == c->fd ? icept_client(p, c)
                                        : icept_upstream(p, c);
            if (rc != 0)
                icept_close(c);
        }
    }
    return NULL;
}

emq_icept *emq_icept_start(int upstream_port, const emq_icept_rule *rules,
                           size_t n) {
    if (n > ICEPT_RULES)
        FAIL("emq_icept_start: at most %d rules", ICEPT_RULES);
    emq_icept *p = calloc(1, sizeof *p);
    if (p == NULL || (p->log = malloc(ICEPT_LOG_MAX + 1)) == NULL)
        FAIL("emq_icept_start: out of memory");
    p->log[0] = '\0';
    p->nrules = n;
    p->upstream_port = upstream_port;
    for (size_t i = 0; i < n; i++) {
        p->rules[i] = rules[i];
        p->left[i] = rules[i].times;
        snprintf(p->cmd[i], sizeof p->cmd[i], "%s", rules[i].command);
        if (rules[i].reply == NULL) /* delay_ms only */
            continue;
        size_t len = rules[i].reply_len ? rules[i].reply_len
                                        : strlen(rules[i].reply);
        char *copy = malloc(len ? len : 1);
        if (copy == NULL)
            FAIL("emq_icept_start: out of memory");
        memcpy(copy, rules[i].reply, len);
        p->rules[i].reply = copy;
        p->rules[i].reply_len = len;
        p->left[i] = rules[i].times;
        snprintf(p->cmd[i], sizeof p->cmd[i], "%s", rules[i].command);
    }
    for (int i = 0; i < MAX_CONNS; i++)
        p->conns[i].fd = p->conns[i].up = -1;
    p->listen_fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t alen = sizeof a;
    if (p->listen_fd < 0 ||
        bind(p->listen_fd, (struct sockaddr *)&a, sizeof a) != 0 ||
        listen(p->listen_fd, 16) != 0 ||
        getsockname(p->listen_fd, (struct sockaddr *)&a, &alen) != 0)
        FAIL("intercepting proxy listen: %s", strerror(errno));
    p->port = ntohs(a.sin_port);
    snprintf(p->url, sizeof p->url, "redis://127.0.0.1:%d", p->port);
    if (pipe(p->wake) != 0)
        FAIL("pipe: %s", strerror(errno));
    fcntl(p->wake[0], F_SETFL, O_NONBLOCK);
    fcntl(p->wake[1], F_SETFL, O_NONBLOCK);
    pthread_mutex_init(&p->mu, NULL);
    if (pthread_create(&p->thread, NULL, icept_main, p) != 0)
        FAIL("intercepting proxy: pthread_create failed");
    return p;
}

void emq_icept_stop(emq_icept *p) {
    if (p == NULL)
        return;
    pthread_mutex_lock(&p->mu);
    p->stop = 1;
    pthread_mutex_unlock(&p->mu);
    if (write(p->wake[1], "x", 1) < 0) {
        /* seen within one poll round anyway */
    }
    pthread_join(p->thread, NULL);
    for (int i = 0; i < MAX_CONNS; i++)
        if (p->conns[i].fd >= 0)
            icept_close(&p->conns[i]);
    close(p->listen_fd);
    close(p->wake[0]);
    close(p->wake[1]);
    pthread_mutex_destroy(&p->mu);
    for (size_t i = 0; i < p->nrules; i++)
        free((char *)p->rules[i].reply);
    free(p->log);
    free(p);
}

const char *emq_icept_url(const emq_icept *p) { return p->url; }

void emq_icept_hold(emq_icept *p, int on) {
    pthread_mutex_lock(&p->mu);
    p->hold = on;
    pthread_mutex_unlock(&p->mu);
    if (write(p->wake[1], "x", 1) < 0) {
        /* seen within one poll round anyway */
    }
}

int emq_icept_most_reads(const emq_icept *p) {
    emq_icept *q = (emq_icept *)p;
    pthread_mutex_lock(&q->mu);
    int n = q->most_reads;
    pthread_mutex_unlock(&q->mu);
    return n;
}

int emq_icept_held(const emq_icept *p) {
    emq_icept *q = (emq_icept *)p;
    pthread_mutex_lock(&q->mu);
    int n = q->held;
    pthread_mutex_unlock(&q->mu);
    return n;
}

int emq_icept_accepted(const emq_icept *p) {
    emq_icept *q = (emq_icept *)p;
    pthread_mutex_lock(&q->mu);
    int n = q->accepted;
    pthread_mutex_unlock(&q->mu);
    return n;
}

int emq_icept_replaced(const emq_icept *p) {
    emq_icept *q = (emq_icept *)p;
    pthread_mutex_lock(&q->mu);
    int n = q->replaced;
    pthread_mutex_unlock(&q->mu);
    return n;
}

int emq_icept_saw(const emq_icept *p, const char *needle, const char *needle2) {
    emq_icept *q = (emq_icept *)p;
    int found = 0;
    pthread_mutex_lock(&q->mu);
    for (char *line = q->log; *line && !found;) {
        char *end = strchr(line, '\n');
        size_t n = end ? (size_t)(end - line) : strlen(line);
        char save = line[n];
        line[n] = '\0';
        found = strstr(line, needle) != NULL &&
                (needle2 == NULL || strstr(line, needle2) != NULL);
        line[n] = save;
        line = end ? end + 1 : line + n;
    }
    pthread_mutex_unlock(&q->mu);
    return found;
}
