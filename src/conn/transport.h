/* SPDX-License-Identifier: BSD-3-Clause */
/* transport.h: the byte pipe under a connection (TCP, unix socket, TLS).
 *
 * Internal header. conn.c talks to a transport only through this small
 * table: read, write, close. Every transport is non-blocking; when a call
 * would block it returns EMQ_EAGAIN and sets t->want to the poll(2) events
 * it needs (TLS may need POLLIN to write, or POLLOUT to read). The caller
 * waits with emq__transport_wait under its own deadline and calls again.
 *
 * Transports stack: emq__transport_tls_wrap takes a connected TCP transport
 * and runs TLS over its socket. Nothing above this header knows which one
 * it has.
 */
#ifndef EMQ_CONN_TRANSPORT_H
#define EMQ_CONN_TRANSPORT_H

#include "../base/base.h"

#include <sys/types.h>

typedef struct emq__transport emq__transport;

typedef struct emq__transport_ops {
    /* Reads up to len bytes into buf. Returns the count (> 0); 0 when the
     * peer closed the connection in order; EMQ_EAGAIN (t->want set) when
     * nothing is available yet; or another negative emq_status with err
     * filled (EMQ_EIO, EMQ_ETLS). */
    ssize_t (*read)(emq__transport *t, char *buf, size_t len, emq_error *err);
    /* Writes up to len bytes. Returns the count written (> 0), EMQ_EAGAIN
     * (t->want set), or a negative emq_status with err filled. */
    ssize_t (*write)(emq__transport *t, const char *buf, size_t len,
                     emq_error *err);
    /* Closes the socket and frees t (and whatever it wraps). Never blocks. */
    void (*close)(emq__transport *t);
} emq__transport_ops;

struct emq__transport {
    const emq__transport_ops *ops;
    int fd;           /* the socket, for poll */
    short want;       /* POLLIN/POLLOUT needed after EMQ_EAGAIN */
    const char *name; /* endpoint for messages, e.g. "127.0.0.1:6379";
                         owned by the connection, outlives t */
    int buffers;      /* 1: may hold readable bytes the socket does not
                         show (TLS), so never poll before reading */
};

/* TLS options resolved from conf and URL (strings borrowed, may be NULL). */
typedef struct emq__tls_opts {
    const char *ca_file;
    const char *cert_file;
    const char *key_file;
    const char *key_password; /* NULL: none; never in a message */
    const char *sni;          /* NULL: host, unless host is an IP literal */
    int verify;               /* 1: verify peer certificate and host; 0: none */
} emq__tls_opts;

/* Waits until fd is ready for events or until deadline (emq__now_ms time;
 * -1: no deadline). Returns 1 when ready (or in error/hangup state, which
 * the next read or write reports), 0 on timeout, -1 on a poll failure
 * (errno set). */
int emq__transport_wait(int fd, short events, int64_t deadline);
/* The same, also watching others[0] and others[1] (-1: not watched) for
 * reading: 2 + i when others[i] is readable (or closed) and fd and
 * others[0..i) are not. */
int emq__transport_wait_either(int fd, short events, const int others[2],
                               int64_t deadline);

/* Connects to host:port over TCP within the deadline, trying each address
 * getaddrinfo returns, and sets TCP_NODELAY and, when keepalive_s > 0,
 * SO_KEEPALIVE with TCP_KEEPIDLE. name is the endpoint for messages.
 * Returns EMQ_OK with *out caller-owned (free with ops->close),
 * EMQ_ERESOLVE, EMQ_EIO ("connect to X refused"), EMQ_ETIMEDOUT or
 * EMQ_ENOMEM. */
emq_status emq__transport_tcp_connect(const char *host, int port,
                                      int keepalive_s, int64_t deadline,
                                      const char *name, emq__transport **out,
                                      emq_error *err);
/* Connects to the unix socket at path; as above. */
emq_status emq__transport_unix_connect(const char *path, int64_t deadline,
                                       const char *name, emq__transport **out,
                                       emq_error *err);

#ifdef EMQ_HAVE_TLS
/* Runs a TLS client handshake over inner (taken in all cases: on failure
 * it is closed) within the deadline. host is the URL's host, for SNI and
 * the certificate check. Returns EMQ_OK with *out caller-owned, EMQ_ETLS
 * naming what failed, EMQ_ETIMEDOUT, EMQ_EIO or EMQ_ENOMEM. */
emq_status emq__transport_tls_wrap(emq__transport *inner, const char *host,
                                   const emq__tls_opts *opts, int64_t deadline,
                                   emq__transport **out, emq_error *err);
#endif

#endif /* EMQ_CONN_TRANSPORT_H */
