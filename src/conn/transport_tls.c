/* SPDX-License-Identifier: BSD-3-Clause */
/* transport_tls.c: TLS over a connected socket transport, with OpenSSL.
 *
 * emq__transport_tls_wrap stacks on a TCP transport: it builds a client
 * context (CA file or the system's default paths, optional client
 * certificate and key, TLS 1.2 minimum), sets SNI and the expected host
 * name or IP address for verification, and runs the handshake
 * non-blocking under the caller's deadline. Reads and writes map OpenSSL's
 * WANT_READ/WANT_WRITE to EMQ_EAGAIN with t->want set.
 *
 * Errors say what failed, with OpenSSL's reason and, for a certificate,
 * the verify result ("certificate verify failed (self-signed certificate
 * in certificate chain)"). OpenSSL writes to the socket with write(2), so
 * SIGPIPE is blocked on the calling thread around each SSL call that may
 * write and a pending one is consumed. This file never reads a URL or a
 * conf and never retries.
 */
#include "transport.h"

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

typedef struct tls_transport {
    emq__transport base;   /* first: the transport seen by conn.c */
    emq__transport *inner; /* the socket transport underneath */
    SSL_CTX *ctx;
    SSL *ssl;
} tls_transport;

/* SIGPIPE guard: blocks SIGPIPE on this thread; sigpipe_restore consumes a
 * SIGPIPE raised meanwhile (unless one was pending before) and restores
 * the mask. */
typedef struct sigpipe_guard {
    sigset_t old;
    int was_pending;
} sigpipe_guard;

static void sigpipe_block(sigpipe_guard *g) {
    sigset_t set, pending;
    sigemptyset(&set);
    sigaddset(&set, SIGPIPE);
    sigemptyset(&pending);
    sigpending(&pending);
    g->was_pending = sigismember(&pending, SIGPIPE) == 1;
    pthread_sigmask(SIG_BLOCK, &set, &g->old);
}

static void sigpipe_restore(sigpipe_guard *g) {
    if (!g->was_pending) {
        sigset_t set, pending;
        sigemptyset(&set);
        sigaddset(&set, SIGPIPE);
        sigemptyset(&pending);
        sigpending(&pending);
        if (sigismember(&pending, SIGPIPE) == 1) {
            struct timespec zero = {0, 0};
            while (sigtimedwait(&set, NULL, &zero) < 0 && errno == EINTR)
                ;
        }
    }
    pthread_sigmask(SIG_SETMASK, &g->old, NULL);
}

/* Writes OpenSSL's oldest queued error reason into out and clears the
 * queue. Returns out ("" when the queue is empty). */
static const char *ssl_reason(char *out, size_t size) {
    unsigned long e = ERR_get_error();
    out[0] = '\0';
    if (e != 0) {
#ifdef ERR_SYSTEM_ERROR
        if (ERR_SYSTEM_ERROR(e)) {
            snprintf(out, size, "%s", strerror(ERR_GET_REASON(e)));
            ERR_clear_error();
            return out;
        }
#endif
        const char *r = ERR_reason_error_string(e);
        if (r)
            snprintf(out, size, "%s", r);
        else
            ERR_error_string_n(e, out, size);
    }
    ERR_clear_error();
    return out;
}

/* A server that ended the connection without close_notify (killed,
 * restarted, a proxy that dropped it): a cut connection. */
static ssize_t closed_unclean(const tls_transport *t, emq_error *err) {
    return emq__error_set(err, EMQ_EIO, 1,
                          "server closed the TLS connection to %s without "
                          "close_notify",
                          t->base.name);
}

/* Maps the result of an SSL I/O call. Returns EMQ_EAGAIN with want set,
 * 0 for an orderly close, or a negative status with err filled. what is
 * "read from" or "write to". */
static ssize_t ssl_fail(tls_transport *t, int rc, const char *what,
                        emq_error *err) {
    int e = SSL_get_error(t->ssl, rc);
    int sys = errno;
    char why[160];
    switch (e) {
    case SSL_ERROR_WANT_READ:
        t->base.want = POLLIN;
        return EMQ_EAGAIN;
    case SSL_ERROR_WANT_WRITE:
        t->base.want = POLLOUT;
        return EMQ_EAGAIN;
    case SSL_ERROR_ZERO_RETURN:
        return 0;
    case SSL_ERROR_SYSCALL:
        ERR_clear_error();
        if (sys == 0 || rc == 0)
            return closed_unclean(t, err);
        return emq__error_set(err, EMQ_EIO, 1, "%s %s failed: %s", what,
                              t->base.name, strerror(sys));
    default:
#ifdef SSL_R_UNEXPECTED_EOF_WHILE_READING
        /* How OpenSSL 3 reports an end without close_notify. */
        if (ERR_GET_REASON(ERR_peek_error()) ==
            SSL_R_UNEXPECTED_EOF_WHILE_READING) {
            ERR_clear_error();
            return closed_unclean(t, err);
        }
#endif
        ssl_reason(why, sizeof why);
        return emq__error_set(err, EMQ_ETLS, 0, "TLS %s %s failed: %s", what,
                              t->base.name, why[0] ? why : "unknown error");
    }
}

/* Runs one SSL_read (buf) or SSL_write (cbuf) of at most len bytes with
 * SIGPIPE blocked and the error queues cleared first, keeping the errno the
 * call left for ssl_fail. Returns SSL_read/SSL_write's result. */
static int guarded_io(tls_transport *t, char *buf, const char *cbuf,
                      size_t len) {
    int n = len > 0x7fffffff ? 0x7fffffff : (int)len;
    ERR_clear_error();
    errno = 0;
    sigpipe_guard g;
    sigpipe_block(&g);
    int rc = buf ? SSL_read(t->ssl, buf, n) : SSL_write(t->ssl, cbuf, n);
    int sys = errno;
    sigpipe_restore(&g);
    errno = sys;
    return rc;
}

static ssize_t tls_read(emq__transport *base, char *buf, size_t len,
                        emq_error *err) {
    tls_transport *t = (tls_transport *)base;
    int rc = guarded_io(t, buf, NULL, len);
    if (rc > 0)
        return rc;
    return ssl_fail(t, rc, "read from", err);
}

static ssize_t tls_write(emq__transport *base, const char *buf, size_t len,
                         emq_error *err) {
    tls_transport *t = (tls_transport *)base;
    int rc = guarded_io(t, NULL, buf, len);
    if (rc > 0)
        return rc;
    ssize_t r = ssl_fail(t, rc, "write to", err);
    if (r == 0) /* close_notify while writing: the peer is gone */
        return emq__error_set(err, EMQ_EIO, 1,
                              "server closed the connection to %s",
                              t->base.name);
    return r;
}

/* Sends close_notify without waiting for the peer's, then frees all. */
static void tls_close(emq__transport *base) {
    tls_transport *t = (tls_transport *)base;
    if (t == NULL)
        return;
    if (t->ssl && SSL_is_init_finished(t->ssl)) {
        sigpipe_guard g;
        sigpipe_block(&g);
        SSL_shutdown(t->ssl);
        sigpipe_restore(&g);
    }
    if (t->ssl)
        SSL_free(t->ssl);
    if (t->ctx)
        SSL_CTX_free(t->ctx);
    ERR_clear_error();
    if (t->inner)
        t->inner->ops->close(t->inner);
    emq__free(t);
}

static const emq__transport_ops tls_ops = {tls_read, tls_write, tls_close};

/* Returns 1 when host is an IPv4 or IPv6 literal. */
static int is_ip_literal(const char *host) {
    unsigned char buf[sizeof(struct in6_addr)];
    return inet_pton(AF_INET, host, buf) == 1 ||
           inet_pton(AF_INET6, host, buf) == 1;
}

/* What the passphrase callback is given and found. */
typedef struct key_pass {
    const char *password; /* tls.key_password; NULL: none */
    int asked;            /* OpenSSL asked for a passphrase */
} key_pass;

/* OpenSSL's passphrase callback: tls.key_password, never a prompt (the
 * default one reads the terminal, or stdin when there is none). Without a
 * password it answers none, and the load fails at once. */
static int key_passphrase(char *buf, int size, int rwflag, void *opaque) {
    (void)rwflag;
    key_pass *k = opaque;
    if (k == NULL) /* after setup: nothing to give, nothing to record */
        return 0;
    k->asked = 1;
    if (k->password == NULL || size <= 0)
        return 0;
    size_t n = strlen(k->password);
    if (n > (size_t)size)
        return 0;
    memcpy(buf, k->password, n);
    return (int)n;
}

/* Builds the context and SSL object of t. Returns EMQ_OK, EMQ_EINVAL (an
 * encrypted key without its password, or a wrong one), EMQ_ETLS /
 * EMQ_ENOMEM naming the file or setting that failed. */
static emq_status setup(tls_transport *t, const char *host,
                        const emq__tls_opts *o, emq_error *err) {
    char why[160];
    t->ctx = SSL_CTX_new(TLS_client_method());
    if (t->ctx == NULL)
        return emq__error_set(err, EMQ_ENOMEM, 0,
                              "cannot create a TLS context: %s",
                              ssl_reason(why, sizeof why));
    SSL_CTX_set_min_proto_version(t->ctx, TLS1_2_VERSION);
    SSL_CTX_set_mode(t->ctx, SSL_MODE_ENABLE_PARTIAL_WRITE |
                                 SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
    if (o->ca_file && o->ca_file[0]) {
        if (SSL_CTX_load_verify_locations(t->ctx, o->ca_file, NULL) != 1)
            return emq__error_set(err, EMQ_ETLS, 0,
                                  "cannot load tls.ca_file '%s': %s",
                                  o->ca_file, ssl_reason(why, sizeof why));
    } else if (o->verify && SSL_CTX_set_default_verify_paths(t->ctx) != 1) {
        return emq__error_set(err, EMQ_ETLS, 0,
                              "cannot load the system CA certificates: %s",
                              ssl_reason(why, sizeof why));
    }
    if ((o->cert_file && o->cert_file[0]) != (o->key_file && o->key_file[0]))
        return emq__error_set(err, EMQ_ETLS, 0,
                              "tls.cert_file and tls.key_file must be set "
                              "together");
    key_pass pass = {
        o->key_password && o->key_password[0] ? o->key_password : NULL, 0};
    SSL_CTX_set_default_passwd_cb(t->ctx, key_passphrase);
    SSL_CTX_set_default_passwd_cb_userdata(t->ctx, &pass);
    if (o->cert_file && o->cert_file[0]) {
        int chain = SSL_CTX_use_certificate_chain_file(t->ctx, o->cert_file) ==
                    1;
        int loaded = chain && SSL_CTX_use_PrivateKey_file(
                                  t->ctx, o->key_file, SSL_FILETYPE_PEM) == 1;
        /* &pass lives on this stack: no later call may reach it. */
        SSL_CTX_set_default_passwd_cb_userdata(t->ctx, NULL);
        if (!chain)
            return emq__error_set(err, EMQ_ETLS, 0,
                                  "cannot load tls.cert_file '%s': %s",
                                  o->cert_file, ssl_reason(why, sizeof why));
        /* Both are the configuration's to fix, never a retry's: EINVAL,
         * so that no handle tries again (an async producer would until
         * producer.timeout_ms). */
        if (!loaded && pass.asked && pass.password == NULL) {
            ERR_clear_error();
            return emq__error_set(err, EMQ_EINVAL, 0,
                                  "tls.key_file '%s' is encrypted: set "
                                  "tls.key_password (the CLI reads "
                                  "$ECHOMQ_TLS_KEY_PASSWORD)",
                                  o->key_file);
        }
        if (!loaded && pass.asked)
            return emq__error_set(err, EMQ_EINVAL, 0,
                                  "cannot decrypt tls.key_file '%s' with "
                                  "tls.key_password (a wrong password?): %s",
                                  o->key_file, ssl_reason(why, sizeof why));
        if (!loaded)
            return emq__error_set(err, EMQ_ETLS, 0,
                                  "cannot load tls.key_file '%s': %s",
                                  o->key_file, ssl_reason(why, sizeof why));
        if (SSL_CTX_check_private_key(t->ctx) != 1)
            return emq__error_set(err, EMQ_ETLS, 0,
                                  "tls.key_file '%s' does not match "
                                  "tls.cert_file '%s'",
                                  o->key_file, o->cert_file);
    }
    SSL_CTX_set_verify(t->ctx, o->verify ? SSL_VERIFY_PEER : SSL_VERIFY_NONE,
                       NULL);
    t->ssl = SSL_new(t->ctx);
    if (t->ssl == NULL || SSL_set_fd(t->ssl, t->inner->fd) != 1)
        return emq__error_set(err, EMQ_ENOMEM, 0,
                              "cannot create a TLS session: %s",
                              ssl_reason(why, sizeof why));
    int ip = is_ip_literal(host);
    const char *sni = o->sni && o->sni[0] ? o->sni : (ip ? NULL : host);
    if (sni && SSL_set_tlsext_host_name(t->ssl, sni) != 1)
        return emq__error_set(err, EMQ_ETLS, 0, "cannot set SNI '%s': %s", sni,
                              ssl_reason(why, sizeof why));
    if (o->verify) {
        /* The certificate must name tls.sni when it is set (the name the
         * server is reached by, say behind a tunnel to 127.0.0.1), else
         * the URL's host (docs/SECURITY.md). */
        const char *expect = o->sni && o->sni[0] ? o->sni : host;
        int expect_ip = is_ip_literal(expect);
        X509_VERIFY_PARAM *param = SSL_get0_param(t->ssl);
        X509_VERIFY_PARAM_set_hostflags(param,
                                        X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
        int ok = expect_ip ? X509_VERIFY_PARAM_set1_ip_asc(param, expect)
                           : X509_VERIFY_PARAM_set1_host(param, expect, 0);
        if (ok != 1)
            return emq__error_set(err, EMQ_ETLS, 0,
                                  "cannot set the expected server name '%s' "
                                  "for verification",
                                  expect);
    }
    return EMQ_OK;
}

/* Runs SSL_connect until done or the deadline. Returns EMQ_OK, EMQ_ETLS
 * with the reason (and verify result), EMQ_ETIMEDOUT or EMQ_EIO. */
static emq_status handshake(tls_transport *t, int64_t deadline,
                            emq_error *err) {
    char why[160];
    const char *name = t->base.name;
    for (;;) {
        ERR_clear_error();
        errno = 0;
        sigpipe_guard g;
        sigpipe_block(&g);
        int rc = SSL_connect(t->ssl);
        int sys = errno;
        sigpipe_restore(&g);
        if (rc == 1)
            return EMQ_OK;
        int e = SSL_get_error(t->ssl, rc);
        short want = 0;
        if (e == SSL_ERROR_WANT_READ)
            want = POLLIN;
        else if (e == SSL_ERROR_WANT_WRITE)
            want = POLLOUT;
        if (want) {
            int w = emq__transport_wait(t->inner->fd, want, deadline);
            if (w == 0)
                return emq__error_set(err, EMQ_ETIMEDOUT, 1,
                                      "TLS handshake with %s timed out", name);
            if (w < 0)
                return emq__error_set(err, EMQ_EIO, 1,
                                      "TLS handshake with %s failed: %s", name,
                                      strerror(errno));
            continue;
        }
        long vr = SSL_get_verify_result(t->ssl);
        if (e == SSL_ERROR_SSL && vr != X509_V_OK) {
            ssl_reason(why, sizeof why);
            return emq__error_set(err, EMQ_ETLS, 0,
                                  "TLS handshake with %s failed: %s (%s)", name,
                                  why[0] ? why : "certificate verify failed",
                                  X509_verify_cert_error_string(vr));
        }
        if (e == SSL_ERROR_SYSCALL ||
            (e == SSL_ERROR_SSL && ERR_peek_error() == 0)) {
            ERR_clear_error();
            return emq__error_set(err, EMQ_EIO, 1,
                                  "TLS handshake with %s failed: %s", name,
                                  sys ? strerror(sys)
                                      : "the server closed the connection "
                                        "(is it a TLS port?)");
        }
        ssl_reason(why, sizeof why);
        return emq__error_set(err, EMQ_ETLS, 0,
                              "TLS handshake with %s failed: %s", name,
                              why[0] ? why : "unknown error");
    }
}

emq_status emq__transport_tls_wrap(emq__transport *inner, const char *host,
                                   const emq__tls_opts *opts, int64_t deadline,
                                   emq__transport **out, emq_error *err) {
    *out = NULL;
    tls_transport *t = emq__calloc(1, sizeof *t);
    if (t == NULL) {
        inner->ops->close(inner);
        return emq__oom(err);
    }
    t->base.ops = &tls_ops;
    t->base.buffers = 1;
    t->base.fd = inner->fd;
    t->base.name = inner->name;
    t->inner = inner;
    emq_status st = setup(t, host, opts, err);
    if (st == EMQ_OK)
        st = handshake(t, deadline, err);
    if (st != EMQ_OK) {
        tls_close(&t->base);
        return st;
    }
    *out = &t->base;
    return EMQ_OK;
}
