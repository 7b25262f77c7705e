/* SPDX-License-Identifier: BSD-3-Clause */
/* transport_tcp.c: plain socket transports, TCP and unix, and poll waits.
 *
 * Sockets are non-blocking from the start: connect(2) is waited for with
 * poll(2) under the caller's deadline, and every read and write returns
 * EMQ_EAGAIN instead of blocking. Writes use send(MSG_NOSIGNAL), so a peer
 * that went away yields EMQ_EIO, never SIGPIPE. Messages name the endpoint
 * (never credentials, which this file never sees). This file never speaks
 * RESP and never retries: reconnecting is conn.c's job.
 */
#include "transport.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

int emq__transport_wait(int fd, short events, int64_t deadline) {
    static const int none[2] = {-1, -1};
    return emq__transport_wait_either(fd, events, none, deadline);
}

int emq__transport_wait_either(int fd, short events, const int others[2],
                               int64_t deadline) {
    for (;;) {
        int timeout = -1;
        if (deadline >= 0) {
            int64_t left = deadline - emq__now_ms();
            if (left <= 0)
                left = 0;
            timeout = left > 0x7fffffff ? 0x7fffffff : (int)left;
        }
        /* poll(2) skips an entry whose descriptor is negative. */
        struct pollfd p[3] = {
            {fd, events, 0}, {others[0], POLLIN, 0}, {others[1], POLLIN, 0}};
        int n = poll(p, 3, timeout);
        if (n > 0)
            return p[0].revents != 0 ? 1 : p[1].revents != 0 ? 2 : 3;
        if (n == 0) {
            if (timeout != 0 && deadline >= 0 && emq__now_ms() < deadline)
                continue; /* woke early (clock granularity); wait the rest */
            return 0;
        }
        if (errno != EINTR)
            return -1;
    }
}

static ssize_t sock_read(emq__transport *t, char *buf, size_t len,
                         emq_error *err) {
    for (;;) {
        ssize_t n = recv(t->fd, buf, len, 0);
        if (n >= 0)
            return n;
        if (errno == EINTR)
            continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) {
            t->want = POLLIN;
            return EMQ_EAGAIN;
        }
        if (errno == ECONNRESET)
            return emq__error_set(err, EMQ_EIO, 1,
                                  "connection to %s was reset by the server",
                                  t->name);
        return emq__error_set(err, EMQ_EIO, 1, "read from %s failed: %s",
                              t->name, strerror(errno));
    }
}

static ssize_t sock_write(emq__transport *t, const char *buf, size_t len,
                          emq_error *err) {
    for (;;) {
        ssize_t n = send(t->fd, buf, len, MSG_NOSIGNAL);
        if (n >= 0)
            return n;
        if (errno == EINTR)
            continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) {
            t->want = POLLOUT;
            return EMQ_EAGAIN;
        }
        if (errno == EPIPE || errno == ECONNRESET)
            return emq__error_set(
                err, EMQ_EIO, 1, "server closed the connection to %s", t->name);
        return emq__error_set(err, EMQ_EIO, 1, "write to %s failed: %s",
                              t->name, strerror(errno));
    }
}

static void sock_close(emq__transport *t) {
    if (t == NULL)
        return;
    if (t->fd >= 0)
        close(t->fd);
    emq__free(t);
}

static const emq__transport_ops sock_ops = {sock_read, sock_write, sock_close};

/* Returns a new transport over fd, or NULL when out of memory (fd is then
 * closed). */
static emq__transport *wrap_fd(int fd, const char *name) {
    emq__transport *t = emq__calloc(1, sizeof *t);
    if (t == NULL) {
        close(fd);
        return NULL;
    }
    t->ops = &sock_ops;
    t->fd = fd;
    t->name = name;
    return t;
}

/* Starts a non-blocking connect of a new socket to addr and waits for it
 * under deadline. Returns the connected fd, or -1 with *st and err set
 * (EMQ_EIO with retriable=1 for refused/unreachable, EMQ_ETIMEDOUT). */
static int connect_addr(int family, int socktype, int protocol,
                        const struct sockaddr *addr, socklen_t addrlen,
                        int64_t deadline, const char *name, emq_status *st,
                        emq_error *err) {
    int fd = socket(family, socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, protocol);
    if (fd < 0) {
        *st = emq__error_set(err, EMQ_EIO, 1,
                             "cannot create a socket for %s: %s", name,
                             strerror(errno));
        return -1;
    }
    int rc;
    do
        rc = connect(fd, addr, addrlen);
    while (rc < 0 && errno == EINTR);
    if (rc < 0 && errno != EINPROGRESS && errno != EAGAIN)
        goto failed;
    if (rc < 0) {
        int w = emq__transport_wait(fd, POLLOUT, deadline);
        if (w == 0) {
            close(fd);
            *st = emq__error_set(err, EMQ_ETIMEDOUT, 1,
                                 "connect to %s timed out", name);
            return -1;
        }
        if (w < 0)
            goto failed;
        int soerr = 0;
        socklen_t len = sizeof soerr;
        if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &len) < 0)
            goto failed;
        if (soerr != 0) {
            errno = soerr;
            goto failed;
        }
    }
    return fd;
failed : {
    int e = errno;
    close(fd);
    if (e == ECONNREFUSED)
        *st = emq__error_set(err, EMQ_EIO, 1, "connect to %s refused", name);
    else
        *st = emq__error_set(err, EMQ_EIO, 1, "connect to %s failed: %s", name,
                             strerror(e));
    return -1;
}
}

/* Sets TCP_NODELAY and keepalive on a connected TCP socket. Failures are
 * ignored: both are optimisations, not correctness. */
static void tune_tcp(int fd, int keepalive_s) {
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (keepalive_s > 0) {
        setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof one);
#ifdef TCP_KEEPIDLE
        setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &keepalive_s,
                   sizeof keepalive_s);
#endif
#ifdef TCP_KEEPINTVL
        int intvl = keepalive_s / 3 > 0 ? keepalive_s / 3 : 1;
        setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof intvl);
#endif
#ifdef TCP_KEEPCNT
        int cnt = 3;
        setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof cnt);
#endif
    }
}

emq_status emq__transport_tcp_connect(const char *host, int port,
                                      int keepalive_s, int64_t deadline,
                                      const char *name, emq__transport **out,
                                      emq_error *err) {
    *out = NULL;
    char service[16];
    snprintf(service, sizeof service, "%d", port);
    struct addrinfo hints, *res = NULL;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_ADDRCONFIG | AI_NUMERICSERV;
    int gai = getaddrinfo(host, service, &hints, &res);
    if (gai == EAI_NONAME) {
        /* AI_ADDRCONFIG hides ::1 on hosts with only loopback IPv6. */
        hints.ai_flags = AI_NUMERICSERV;
        gai = getaddrinfo(host, service, &hints, &res);
    }
    if (gai != 0) {
        char shown[128];
        emq__printable(shown, sizeof shown, host, strlen(host));
        return emq__error_set(
            err, EMQ_ERESOLVE, gai == EAI_AGAIN, "cannot resolve host '%s': %s",
            shown, gai == EAI_SYSTEM ? strerror(errno) : gai_strerror(gai));
    }
    emq_status st = EMQ_EIO;
    int fd = -1;
    for (struct addrinfo *ai = res; ai != NULL && fd < 0; ai = ai->ai_next) {
        fd = connect_addr(ai->ai_family, ai->ai_socktype, ai->ai_protocol,
                          ai->ai_addr, ai->ai_addrlen, deadline, name, &st,
                          err);
        if (fd < 0 && st == EMQ_ETIMEDOUT)
            break; /* the deadline covers all addresses */
    }
    freeaddrinfo(res);
    if (fd < 0)
        return st;
    tune_tcp(fd, keepalive_s);
    *out = wrap_fd(fd, name);
    if (*out == NULL)
        return emq__oom(err);
    return EMQ_OK;
}

emq_status emq__transport_unix_connect(const char *path, int64_t deadline,
                                       const char *name, emq__transport **out,
                                       emq_error *err) {
    *out = NULL;
    struct sockaddr_un sa;
    memset(&sa, 0, sizeof sa);
    sa.sun_family = AF_UNIX;
    if (strlen(path) >= sizeof sa.sun_path)
        return emq__error_set(err, EMQ_EINVAL, 0,
                              "unix socket path is longer than %zu bytes: %s",
                              sizeof sa.sun_path - 1, name);
    memcpy(sa.sun_path, path, strlen(path) + 1);
    emq_status st = EMQ_EIO;
    int fd = connect_addr(AF_UNIX, SOCK_STREAM, 0, (struct sockaddr *)&sa,
                          sizeof sa, deadline, name, &st, err);
    if (fd < 0)
        return st;
    *out = wrap_fd(fd, name);
    if (*out == NULL)
        return emq__oom(err);
    return EMQ_OK;
}
