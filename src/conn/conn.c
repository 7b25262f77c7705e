/* SPDX-License-Identifier: BSD-3-Clause */
/* conn.c: one connection to one server, synchronous and pipelined.
 *
 * emq_conn_new parses the URL, connects the transport (TCP, unix or TLS),
 * and runs the handshake as one pipelined round trip: HELLO 3 (protocol 3,
 * with AUTH folded in) or AUTH, then SELECT when the database is not 0, then
 * CLIENT SETNAME when a name is set. It never sends PING, INFO or anything
 * else a restricted ACL user (+@stream) could be refused; a NOPERM reply to
 * CLIENT SETNAME is tolerated because the name is optional.
 *
 * Commands are encoded into a capped output buffer (emq_conn_append) and
 * sent when a reply is asked for; replies come back in order. Each reply is
 * waited for under command_timeout_ms plus the blocking time its command
 * declared when appended (BLOCK ms, a BLPOP timeout...), so a long BLOCK
 * never trips the timeout and BLOCK 0 waits forever. The block is counted
 * from when the command was sent, when it was the only one waiting for a
 * reply (then nothing ahead of it delays its start), so a reply read
 * later, or by another thread, is not given a second block.
 *
 * Behind Sentinel (a redis-sentinel:// URL), every connect first asks
 * the Sentinels for the primary (sentinel_client.c), then checks after
 * the handshake that it says ROLE master; the watch that resolution
 * leaves is waited on beside every reply, and a switch it announces
 * breaks the connection, so the next connect resolves again.
 *
 * An error reply is a reply value, returned as success. A transport
 * failure, a timeout or a protocol error breaks the connection for good:
 * a late reply would otherwise be paired with the wrong command. Every
 * later call returns the same status and message until emq_conn_reconnect.
 *
 * Never: put a password in a message (messages name the endpoint only),
 * retry a command, or interpret what a reply means beyond the handshake.
 */
#include "conn.h"

#include "conf.h"
#include "../resp/resp.h"
#include "transport.h"

#include <poll.h>
#include <stdio.h>
#include <string.h>

/* The output buffer a connection keeps between commands: one larger (a
 * huge batch) is freed after it was sent. */
#define OUT_KEEP_MAX ((size_t)1 << 20)
/* The least room a read asks of the reply parser. */
#define READ_CHUNK_MIN 4096
/* The pauses between handshakes a server busy with a script refused. */
#define BUSY_PAUSE_MIN_MS 50
#define BUSY_PAUSE_MAX_MS 500

/* What a reply may take beyond command_timeout_ms. */
struct reply_wait {
    int64_t extra_ms;     /* the command's blocking time; -1: no deadline */
    int64_t block_end_ms; /* when that block ends, counted from the send
                             (-1: not sent yet; 0: not known, counted from
                             the first wait) */
};

struct emq_conn {
    emq__conn_options opt;    /* what it was told (a kept copy) */
    emq__url url;             /* opt.url, parsed */
    char name[320];           /* endpoint for messages: "host:port",
                                 "[v6]:port" or "unix:/path" */
    const char *user;         /* effective AUTH user (opt's, else URL's) */
    const char *password;     /* effective password; never in a message */
    int64_t db;               /* effective database; 0: no SELECT */
    emq__tls_opts tls;        /* effective TLS options (rediss only) */
    emq__transport *t;        /* NULL when broken or not connected */
    emq__resp_reader *reader; /* replies of t; NULL with t */
    emq__buf out;             /* encoded commands not yet sent */
    struct reply_wait *waits; /* ring: per unread reply, its extra wait */
    size_t waits_cap;         /* slots in waits */
    size_t head;              /* ring index of the next reply's wait */
    size_t pending;           /* appended commands whose reply is unread */
    emq_error broken;         /* code != EMQ_OK once broken (sticky) */
    int too_large;            /* broken by a reply over resp.max_reply_bytes */
    uint64_t reconnects;      /* successful emq_conn_reconnect calls */
    uint64_t rng;             /* backoff jitter state */
    emq__conn_cancel cancel;  /* emq__conn_set_cancel; flag NULL: none */
    int64_t client_id;        /* learned at the last handshake; 0: unknown */
    int64_t overdue_at;       /* when the awaited reply is overdue; -1 */
    int64_t fill_ms;          /* when the unparsed bytes began to arrive */
    int64_t reply_began_ms;   /* when the last reply read began to arrive */
    emq_server server;        /* learned at the last handshake (server.c) */
    /* Behind Sentinel: a connection to the Sentinel that named the
     * primary, subscribed to +switch-master (sentinel_client.c); its
     * announcement of this master's switch (or its end) makes the
     * connection go away (emq__conn_went_away reads it), so the next
     * command resolves again. conn NULL: none (it could not be set up;
     * the failures a demoted primary causes still lead there). */
    emq__sentinel_watch watch;
    uint64_t said; /* the key of the last Sentinel episode told (say_once) */
    int functions; /* opt.library is there: FCALL */
    char functions_why[512]; /* why not, when the server has functions */
};

static emq_status check_still_named(emq_conn_t *c, emq_error *err);
static const char *master_name(const emq_conn_t *c);
static int sentinel_hold(emq_conn_t *c);

/* ---- blocking commands -------------------------------------------------- */

/* Compares argument i with word, case-insensitively. */
static int arg_is(const char *const *argv, const size_t *argvlen, int i,
                  const char *word) {
    size_t n = argvlen ? argvlen[i] : strlen(argv[i]);
    if (n != strlen(word))
        return 0;
    for (size_t k = 0; k < n; k++) {
        char c = argv[i][k];
        if (c >= 'a' && c <= 'z')
            c = (char)(c - 'a' + 'A');
        if (c != word[k])
            return 0;
    }
    return 1;
}

/* Parses a timeout argument: non-negative decimal, with a fraction when
 * seconds. Returns milliseconds (rounded up), or -2 when it is not such a
 * number (the server will refuse it at once, so no extra wait). Values are
 * clamped to about 30 years so adding them cannot overflow. */
static int64_t parse_timeout(const char *s, size_t n, int seconds) {
    const int64_t clamp = (int64_t)1000 * 86400 * 365 * 30;
    int64_t whole = 0, frac = 0, scale = 1;
    size_t i = 0;
    int digits = 0;
    for (; i < n && s[i] >= '0' && s[i] <= '9'; i++, digits++)
        if (whole < clamp)
            whole = whole * 10 + (s[i] - '0');
    if (seconds && i < n && s[i] == '.') {
        for (i++; i < n && s[i] >= '0' && s[i] <= '9'; i++, digits++) {
            if (scale < 1000) {
                frac = frac * 10 + (s[i] - '0');
                scale *= 10;
            } else if (s[i] != '0') {
                frac += 1; /* round the sub-millisecond part up */
                break;
            }
        }
        while (i < n && s[i] >= '0' && s[i] <= '9')
            i++;
    }
    if (i != n || digits == 0)
        return -2;
    if (!seconds)
        return whole < clamp ? whole : clamp;
    int64_t ms = whole < clamp / 1000 ? whole * 1000 : clamp;
    ms += (frac * 1000 + scale - 1) / scale;
    return ms < clamp ? ms : clamp;
}

/* Returns the extra wait for one timeout argument: its ms, -1 for 0 (block
 * forever), 0 when unparsable. */
static int64_t timeout_arg(const char *const *argv, const size_t *argvlen,
                           int i, int seconds) {
    size_t n = argvlen ? argvlen[i] : strlen(argv[i]);
    int64_t ms = parse_timeout(argv[i], n, seconds);
    if (ms == -2)
        return 0;
    return ms == 0 ? -1 : ms;
}

int64_t emq__conn_block_ms(int argc, const char *const *argv,
                           const size_t *argvlen) {
    if (argc < 2 || argv == NULL || argv[0] == NULL)
        return 0;
    /* Every blocking command's name starts with B or W, or is XREAD or
     * XREADGROUP: the first letter and the length rule out the rest (an
     * XADD among them) without a comparison each. */
    size_t n0 = argvlen ? argvlen[0] : strlen(argv[0]);
    char first = (char)(n0 > 0 ? argv[0][0] & ~0x20 : 0); /* upper case */
    if (first != 'B' && first != 'W' &&
        !(first == 'X' && (n0 == 5 || n0 == 10)))
        return 0;
    for (int i = 0; i < argc; i++)
        if (argv[i] == NULL)
            return 0;
    if (arg_is(argv, argvlen, 0, "XREAD") ||
        arg_is(argv, argvlen, 0, "XREADGROUP")) {
        for (int i = 1; i + 1 < argc; i++) {
            if (arg_is(argv, argvlen, i, "STREAMS"))
                break;
            if (arg_is(argv, argvlen, i, "BLOCK"))
                return timeout_arg(argv, argvlen, i + 1, 0);
        }
        return 0;
    }
    if (arg_is(argv, argvlen, 0, "BLPOP") ||
        arg_is(argv, argvlen, 0, "BRPOP") ||
        arg_is(argv, argvlen, 0, "BZPOPMIN") ||
        arg_is(argv, argvlen, 0, "BZPOPMAX") ||
        arg_is(argv, argvlen, 0, "BRPOPLPUSH") ||
        arg_is(argv, argvlen, 0, "BLMOVE"))
        return argc >= 3 ? timeout_arg(argv, argvlen, argc - 1, 1) : 0;
    if (arg_is(argv, argvlen, 0, "BLMPOP") ||
        arg_is(argv, argvlen, 0, "BZMPOP"))
        return timeout_arg(argv, argvlen, 1, 1);
    if (arg_is(argv, argvlen, 0, "WAIT"))
        return argc >= 3 ? timeout_arg(argv, argvlen, 2, 0) : 0;
    if (arg_is(argv, argvlen, 0, "WAITAOF"))
        return argc >= 4 ? timeout_arg(argv, argvlen, 3, 0) : 0;
    return 0;
}

/* ---- breaking and sticky errors -------------------------------------- */

/* Copies the sticky error into err and returns its code. */
static emq_status sticky(const emq_conn_t *c, emq_error *err) {
    if (err)
        *err = c->broken;
    return c->broken.code;
}

/* Closes the transport and reader and drops unsent output. */
static void drop_transport(emq_conn_t *c) {
    emq__sentinel_watch_close(&c->watch);
    if (c->t)
        c->t->ops->close(c->t);
    c->t = NULL;
    emq__resp_reader_free(c->reader);
    c->reader = NULL;
    c->out.len = 0;
}

/* Marks c broken with e (sticky) and closes the transport. Returns the
 * code, and copies e into err. */
static emq_status break_conn(emq_conn_t *c, const emq_error *e,
                             emq_error *err) {
    c->broken = *e;
    if (c->broken.code == EMQ_OK)
        c->broken.code = EMQ_EIO;
    c->broken.retriable = c->broken.code == EMQ_EIO ||
                          c->broken.code == EMQ_ETIMEDOUT;
    c->too_large = c->broken.code == EMQ_EPROTO && c->reader != NULL &&
                   emq__resp_over_max_reply(c->reader);
    drop_transport(c);
    return sticky(c, err);
}

/* After a read_chunk outside read_reply that failed (n < 0), the
 * connection is broken with that failure, so the read that follows
 * reports it as it was (read again, the transport may say something
 * else: a TLS error as a plain close, a reset as an end). */
static void keep_failure(emq_conn_t *c, ssize_t n, const emq_error *e) {
    if (n < 0 && n != EMQ_EAGAIN && n != EMQ_ENOMEM) { /* memory: again */
        emq_error ignored;
        break_conn(c, e, &ignored);
    }
}

/* A read with a cancel flag looks at it this often. */
#define CANCEL_SLICE_MS 50

/* ---- a failover heard under way ----------------------------------------- */

/* Behind Sentinel, before commands go out: reads the Sentinels' news
 * and, while a failover of the master is heard under way (its leader's
 * steps before the promotion), waits for its switch or end, so that no
 * entry is confirmed by, and no acknowledgement sent to, a primary about
 * to be demoted. Bounded by the Sentinels' failover-timeout (then the
 * commands go where they point, told once); a stop ends the wait. 1
 * when the master switched (the commands must not go to this primary:
 * resolve again), 0 to go on. */
static int sentinel_hold(emq_conn_t *c) {
    if (c->url.nsentinels == 0)
        return 0;
    if (emq__sentinel_watch_switched(&c->watch, &c->opt, &c->url, &c->tls))
        return 1;
    for (int64_t until; (until = emq__sentinel_watch_hold_until(&c->watch));) {
        int64_t now = emq__now_ms();
        int fd = emq__sentinel_watch_fd(&c->watch);
        if (now >= until || fd < 0) {
            emq__sentinel_watch_hold_over(&c->watch, &c->opt, &c->url);
            break;
        }
        if (c->cancel.flag != NULL && atomic_load(c->cancel.flag))
            break;
        int64_t slice = now + CANCEL_SLICE_MS;
        int w = emq__transport_wait(fd, POLLIN, slice < until ? slice : until);
        if (w > 0)
            emq__sentinel_watch_news(&c->watch, &c->opt, &c->url);
    }
    return c->watch.switched;
}

/* sentinel_hold before commands are sent: EMQ_EIO (retriable, e filled)
 * when the master switched, nothing sent. */
static emq_status hold_before_send(emq_conn_t *c, emq_error *e) {
    if (!sentinel_hold(c))
        return EMQ_OK;
    return emq__error_set(e, EMQ_EIO, 1,
                          "the Sentinels announced a new primary of "
                          "'%.100s'; nothing was sent to %s",
                          master_name(c), c->name);
}

/* ---- I/O under deadlines ---------------------------------------------- */

/* Writes all of c->out before deadline (-1: none). Returns EMQ_OK, or the
 * transport's error / EMQ_ETIMEDOUT with e filled (the caller breaks). */
static emq_status flush(emq_conn_t *c, int64_t deadline, int64_t timeout_ms,
                        emq_error *e) {
    size_t sent = 0;
    while (sent < c->out.len) {
        ssize_t n =
            c->t->ops->write(c->t, c->out.data + sent, c->out.len - sent, e);
        if (n > 0) {
            sent += (size_t)n;
            continue;
        }
        if (n != EMQ_EAGAIN)
            return n == 0 ? emq__error_set(e, EMQ_EIO, 1, "write to %s failed",
                                           c->name)
                          : (emq_status)n;
        int w = emq__transport_wait(c->t->fd, c->t->want, deadline);
        if (w == 0)
            return emq__error_set(e, EMQ_ETIMEDOUT, 1,
                                  "could not send to %s within %lld ms",
                                  c->name, (long long)timeout_ms);
        if (w < 0)
            return emq__error_set(e, EMQ_EIO, 1, "waiting for %s failed",
                                  c->name);
    }
    c->out.len = 0;
    if (c->out.cap > OUT_KEEP_MAX)
        emq__buf_free(&c->out); /* one huge batch must not pin memory */
    return EMQ_OK;
}

/* Reads the next reply within base_ms plus the command's extra wait
 * extra_ms (base 0: no bound; extra -1: blocks forever, no bound), counted
 * from the first moment it is not all here yet: a reply already read
 * with an earlier one costs no clock. RESP3 push messages (out-of-band,
 * not a reply to a command) are skipped. Returns EMQ_OK with *out
 * caller-owned, or a failure with e filled that breaks the connection
 * (EMQ_EIO, EMQ_ETIMEDOUT, EMQ_EPROTO, EMQ_ENOMEM, EMQ_ETLS). When
 * just_sent, the request left a moment ago and no reply can be here yet:
 * wait for the socket first instead of a read that would only say "not
 * yet" (one system call less per round trip). */
/* One read of what the transport has now into c's reader: the bytes
 * read (> 0; fill_ms is when the first of a reply came), 0 when the peer
 * closed, EMQ_EAGAIN when nothing is there yet, or another status (e set
 * by the transport or the reader's reserve). */
static ssize_t read_chunk(emq_conn_t *c, emq_error *e) {
    char *space;
    size_t avail;
    emq_status st =
        emq__resp_reserve(c->reader, READ_CHUNK_MIN, &space, &avail, e);
    if (st != EMQ_OK)
        return st;
    ssize_t n = c->t->ops->read(c->t, space, avail, e);
    if (n > 0) {
        if (emq__resp_buffered(c->reader) == 0)
            c->fill_ms = emq__now_ms();
        emq__resp_commit(c->reader, (size_t)n);
    }
    return n;
}

static emq_status read_reply(emq_conn_t *c, int64_t base_ms, int64_t extra_ms,
                             int just_sent, emq_reply **out, emq_error *e) {
    *out = NULL;
    int wait_first = just_sent && !c->t->buffers &&
                     emq__resp_buffered(c->reader) == 0;
    int64_t deadline = -1;
    int timed = 0; /* deadline and overdue_at are set */
    int told = 0;  /* cancel.on_stop was called for this reply */
    /* A blocking command's wait watches the wake descriptor. */
    int watch_wake = extra_ms > 0 && c->cancel.flag != NULL &&
                     c->cancel.on_stop != NULL && c->cancel.wake_fd >= 0;
    for (;;) {
        emq_reply *r = NULL;
        emq_status st = wait_first ? EMQ_EAGAIN
                                   : emq__resp_next(c->reader, &r, e);
        if (st != EMQ_OK && st != EMQ_EPROTO && !timed) {
            timed = 1;
            int64_t now = extra_ms >= 0 ? emq__now_ms() : 0;
            c->overdue_at = extra_ms >= 0 ? now + extra_ms + c->cancel.grace_ms
                                          : -1;
            if (base_ms > 0 && extra_ms >= 0)
                deadline = now + base_ms + extra_ms;
        }
        if (st == EMQ_OK) {
            if (emq_reply_kind(r) ==
                EMQ_REPLY_PUSH) { /* the reader drops them */
                emq_reply_free(r);
                continue;
            }
            *out = r;
            c->reply_began_ms = c->fill_ms;
            return EMQ_OK;
        }
        if (st == EMQ_EPROTO) {
            emq__error_prefix(e, "reply from %s", c->name);
            return EMQ_EPROTO;
        }
        if (st != EMQ_EAGAIN)
            return st;
        ssize_t n = EMQ_EAGAIN;
        if (!wait_first) {
            n = read_chunk(c, e);
            if (n > 0) {
                /* The deadline holds while bytes keep coming too (an
                 * endless reply never leaves the socket idle). */
                if (deadline >= 0 && emq__now_ms() >= deadline) {
                    char pushes[64] = "";
                    uint64_t dropped = emq__resp_pushes_dropped(c->reader);
                    if (dropped > 0)
                        snprintf(pushes, sizeof pushes,
                                 " (%llu push messages dropped)",
                                 (unsigned long long)dropped);
                    return emq__error_set(
                        e, EMQ_ETIMEDOUT, 1,
                        "the reply from %s was still "
                        "arriving after %lld ms%s",
                        c->name, (long long)(base_ms + extra_ms), pushes);
                }
                continue;
            }
            if (n == 0)
                return emq__error_set(e, EMQ_EIO, 1,
                                      "server closed the connection to %s",
                                      c->name);
            if (n != EMQ_EAGAIN)
                return (emq_status)n;
        }
        short events = wait_first ? POLLIN : c->t->want;
        wait_first = 0;
        /* With a cancel flag, wait in slices to look at it; a blocking
         * command's wait with a wake descriptor sleeps until the reply,
         * its deadline or the stop, then in slices (to give up a reply
         * overdue past the stop). */
        int64_t until = deadline;
        int woken = 0;
        /* Set before the descriptor could say so (or it was drained by a
         * clear racing the stop): as good as woken. */
        if (watch_wake && atomic_load(c->cancel.flag))
            woken = 1;
        if (c->cancel.flag != NULL && !watch_wake) {
            int64_t slice = emq__now_ms() + CANCEL_SLICE_MS;
            if (until < 0 || slice < until)
                until = slice;
        }
        /* Behind Sentinel, the watch too: once it announces this master's
         * switch, a reply from the old primary (silent, or paused) is not
         * worth waiting for. */
        int others[2] = {emq__sentinel_watch_fd(&c->watch),
                         watch_wake ? c->cancel.wake_fd : -1};
        int w =
            woken ? 0
                  : emq__transport_wait_either(c->t->fd, events, others, until);
        if (w == 3 || woken) { /* looked at below, as at a slice's end */
            woken = 1;
            watch_wake = 0; /* once per reply: it stays readable */
            w = 0;
        }
        if (w == 2) {
            emq__sentinel_watch_news(&c->watch, &c->opt, &c->url);
            if (c->watch.switched)
                return emq__error_set(e, EMQ_EIO, 1,
                                      "the Sentinels announced a new primary "
                                      "of '%.100s' while waiting for a reply "
                                      "from %s",
                                      master_name(c), c->name);
            continue;
        }
        if (w == 0 && (until != deadline || woken)) {
            int stopping = atomic_load(c->cancel.flag);
            if (stopping && extra_ms > 0 && !told && c->cancel.on_stop) {
                told = 1; /* once per reply */
                c->cancel.on_stop(c->cancel.ctx);
            }
            if (stopping && c->overdue_at >= 0 &&
                emq__now_ms() >= c->overdue_at)
                return emq__error_set(e, EMQ_ECLOSED, 1,
                                      "gave up waiting for a reply from %s: "
                                      "a stop was asked and the reply is "
                                      "overdue",
                                      c->name);
            continue;
        }
        if (w == 0) {
            if (extra_ms > 0)
                return emq__error_set(e, EMQ_ETIMEDOUT, 1,
                                      "no reply from %s within %lld ms (%lld "
                                      "ms plus %lld ms of blocking time)",
                                      c->name, (long long)(base_ms + extra_ms),
                                      (long long)base_ms, (long long)extra_ms);
            return emq__error_set(e, EMQ_ETIMEDOUT, 1,
                                  "no reply from %s within %lld ms", c->name,
                                  (long long)base_ms);
        }
        if (w < 0)
            return emq__error_set(e, EMQ_EIO, 1, "waiting for %s failed",
                                  c->name);
    }
}

void emq__conn_set_cancel(emq_conn_t *c, const emq__conn_cancel *cancel) {
    c->cancel = cancel ? *cancel : (emq__conn_cancel){NULL, 0, NULL, NULL, -1};
}

int emq__conn_functions(const emq_conn_t *c, const char **why) {
    if (why)
        *why = c ? c->functions_why : "";
    return c ? c->functions : 0;
}

int64_t emq__conn_client_id(const emq_conn_t *c) {
    return c != NULL && c->t != NULL ? c->client_id : 0;
}

/* ---- pipeline bookkeeping --------------------------------------------- */

/* Encodes a command and records its extra wait. Returns EMQ_OK, or
 * EMQ_ELIMIT / EMQ_ENOMEM / EMQ_EINVAL with nothing appended. */
static emq_status append(emq_conn_t *c, int argc, const char *const *argv,
                         const size_t *argvlen, emq_error *err) {
    if (c->pending >= (size_t)c->opt.pipeline_max)
        return emq__error_set(err, EMQ_ELIMIT, 0,
                              "%zu commands are already waiting for replies "
                              "(pipeline.max); read replies with "
                              "emq_conn_get_reply first",
                              c->pending);
    if (c->pending == c->waits_cap) {
        size_t cap = c->waits_cap ? c->waits_cap * 2 : 16;
        if (cap > (size_t)c->opt.pipeline_max)
            cap = (size_t)c->opt.pipeline_max;
        struct reply_wait *w = emq__alloc(cap * sizeof *w);
        if (w == NULL)
            return emq__error_set(err, EMQ_ENOMEM, 0,
                                  "out of memory growing the pipeline");
        for (size_t i = 0; i < c->pending; i++)
            w[i] = c->waits[(c->head + i) % c->waits_cap];
        emq__free(c->waits);
        c->waits = w;
        c->waits_cap = cap;
        c->head = 0;
    }
    emq_status st = emq__resp_encode(&c->out, argc, argv, argvlen, err);
    if (st != EMQ_OK)
        return st;
    int64_t extra = emq__conn_block_ms(argc, argv, argvlen);
    c->waits[(c->head + c->pending) % c->waits_cap] = (struct reply_wait){
        .extra_ms = extra,
        .block_end_ms = extra > 0 && c->pending == 0 ? -1 : 0};
    c->pending++;
    return EMQ_OK;
}

/* The next reply's command has just been sent: its block starts now
 * (when nothing was waiting ahead of it). */
static void block_started(emq_conn_t *c) {
    struct reply_wait *w = &c->waits[c->head];
    if (c->pending > 0 && w->block_end_ms == -1)
        w->block_end_ms = emq__now_ms() + w->extra_ms;
}

/* Sends the output and reads the next reply in order under the deadline
 * for it (base_timeout_ms plus the command's extra wait; base 0 = none).
 * Returns EMQ_OK with *reply caller-owned, or a failure with e filled;
 * the caller decides whether it breaks c. */
static emq_status next_reply(emq_conn_t *c, int64_t base_timeout_ms,
                             emq_reply **reply, emq_error *e) {
    int just_sent = c->out.len > 0;
    if (just_sent) {
        emq_status held = hold_before_send(c, e);
        if (held != EMQ_OK)
            return held;
        int64_t wdeadline =
            base_timeout_ms > 0 ? emq__now_ms() + base_timeout_ms : -1;
        emq_status st = flush(c, wdeadline, base_timeout_ms, e);
        if (st != EMQ_OK)
            return st;
    }
    block_started(c);
    /* What is left of a block that began when it was sent (a read
     * sent by one thread and read by another after its block: not a
     * second block), at least 1 ms: it stays a blocking command's wait. */
    struct reply_wait w = c->waits[c->head];
    int64_t extra = w.extra_ms;
    if (extra > 0 && w.block_end_ms > 0) {
        int64_t left = w.block_end_ms - emq__now_ms();
        extra = left > 1 ? left : 1;
    }
    emq_status st = read_reply(c, base_timeout_ms, extra, just_sent, reply, e);
    if (st != EMQ_OK)
        return st;
    c->head = (c->head + 1) % c->waits_cap;
    c->pending--;
    return EMQ_OK;
}

/* ---- handshake ---------------------------------------------------------- */

/* Sets err from an error reply to AUTH or HELLO: the sentence, then only
 * the reply's first word. The rest is never quoted: a server or proxy
 * that does not know the command echoes its arguments, the password
 * among them. Returns code. */
static emq_status auth_reply_error(emq_error *err, emq_status code,
                                   const emq_reply *r, const char *fmt, ...)
    EMQ_PRINTF(4, 5);
static emq_status auth_reply_error(emq_error *err, emq_status code,
                                   const emq_reply *r, const char *fmt, ...) {
    char what[EMQ_ERROR_MESSAGE_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    emq_error coded;
    emq__reply_code_copy(&coded, r);
    emq__error_set(err, code, 0,
                   "%.300s (the server answered %s; the rest of its reply is "
                   "not shown, as it may quote the credentials)",
                   what, coded.reply_code[0] ? coded.reply_code : "an error");
    emq__reply_code_copy(err, r);
    return code;
}

/* Turns an error reply to HELLO or AUTH into EMQ_EAUTH/EMQ_ESERVER with a
 * sentence a user can act on (auth_reply_error: the reply is not quoted).
 * A user name is shown only when it was given as one (a URL's lone user
 * info may be a password). */
emq_status emq__conn_auth_error(emq_conn_t *c, const emq_reply *r,
                                const char *cmd, emq_error *err) {
    char text[160];
    emq__reply_text(r, text, sizeof text);
    char who[200];
    if (c->user == NULL)
        snprintf(who, sizeof who, "user 'default'");
    else if (c->opt.user == NULL && c->url.user_alone)
        snprintf(who, sizeof who, "the URL's user (not shown)");
    else
        snprintf(who, sizeof who, "user '%.150s'", c->user);
    if (emq_reply_is_error(r, "WRONGPASS"))
        return auth_reply_error(err, EMQ_EAUTH, r,
                                "authentication to %s as %s failed: wrong "
                                "user name or password, or the user is "
                                "disabled",
                                c->name, who);
    if (emq_reply_is_error(r, "NOAUTH"))
        return auth_reply_error(err, EMQ_EAUTH, r,
                                "server %s requires authentication; set a "
                                "password (and user) in the URL or the conf",
                                c->name);
    if (strstr(text, "without any password configured"))
        return auth_reply_error(err, EMQ_EAUTH, r,
                                "a password was given but server %s has no "
                                "password configured for the default user; "
                                "remove the password or configure the "
                                "server",
                                c->name);
    if (strcmp(cmd, "HELLO") == 0 &&
        (emq_reply_is_error(r, "NOPROTO") || strstr(text, "unknown command")))
        return auth_reply_error(err, EMQ_ESERVER, r,
                                "server %s does not support RESP3 (HELLO "
                                "3); set protocol to 2",
                                c->name);
    if (strstr(text, "unknown command"))
        return auth_reply_error(err, EMQ_EAUTH, r,
                                "%s to %s failed: the server does not know "
                                "the command (renamed, or a proxy without "
                                "it)",
                                cmd, c->name);
    return auth_reply_error(err, EMQ_EAUTH, r, "%s to %s failed", cmd, c->name);
}

/* Appends the handshake commands; returns how many, or a negative status
 * (EMQ_ENOMEM/EMQ_ELIMIT) with err filled. kinds gets what each is. */
enum { HS_HELLO, HS_AUTH, HS_SELECT, HS_SETNAME, HS_INFO, HS_ID, HS_FUNCTIONS };
#define HS_MAX 7

static int append_handshake(emq_conn_t *c, int kinds[HS_MAX], emq_error *err) {
    int n = 0;
    emq_status st;
    char dbtext[24];
    const char *user = c->user ? c->user : "default";
    const char *pw = c->password ? c->password : "";
    if (c->opt.protocol == 3) {
        const char *argv[5] = {"HELLO", "3", "AUTH", user, pw};
        st = append(c, c->password || c->user ? 5 : 2, argv, NULL, err);
        kinds[n++] = HS_HELLO;
    } else if (c->password || c->user) {
        /* A user without a password authenticates with an empty one, which
         * a "nopass" ACL user accepts. */
        const char *argv2[2] = {"AUTH", pw};
        const char *argv3[3] = {"AUTH", user, pw};
        st = c->user ? append(c, 3, argv3, NULL, err)
                     : append(c, 2, argv2, NULL, err);
        kinds[n++] = HS_AUTH;
    } else {
        st = EMQ_OK;
    }
    if (st == EMQ_OK && c->db != 0) {
        snprintf(dbtext, sizeof dbtext, "%lld", (long long)c->db);
        const char *argv[2] = {"SELECT", dbtext};
        st = append(c, 2, argv, NULL, err);
        kinds[n++] = HS_SELECT;
    }
    if (st == EMQ_OK && c->opt.client_name) {
        const char *argv[3] = {"CLIENT", "SETNAME", c->opt.client_name};
        st = append(c, 3, argv, NULL, err);
        kinds[n++] = HS_SETNAME;
    }
    if (st == EMQ_OK && c->opt.protocol != 3) {
        /* Without HELLO, the server's name and version come from INFO
         * (an ACL may refuse it: then they stay unknown). */
        const char *argv[2] = {"INFO", "server"};
        st = append(c, 2, argv, NULL, err);
        kinds[n++] = HS_INFO;
    }
    if (st == EMQ_OK && c->opt.learn_client_id && c->opt.protocol != 3) {
        const char *argv[2] = {"CLIENT", "ID"}; /* HELLO's map has "id" */
        st = append(c, 2, argv, NULL, err);
        kinds[n++] = HS_ID;
    }
    if (st == EMQ_OK && c->opt.library) {
        const char *argv[3] = {"FCALL", c->opt.library->probe, "0"};
        st = append(c, 3, argv, NULL, err);
        kinds[n++] = HS_FUNCTIONS;
    }
    return st == EMQ_OK ? n : (int)st;
}

/* Runs the handshake as one round trip before deadline. Returns EMQ_OK, or
 * EMQ_EAUTH / EMQ_EINVAL / EMQ_ESERVER for a refusal, or a transport
 * failure. A NOPERM reply to CLIENT SETNAME is not an error. A server busy
 * with a long script answers -BUSY and runs nothing: the handshake is sent
 * again until the deadline, then EMQ_ETIMEDOUT (retriable). */
static emq_status handshake_once(emq_conn_t *c, int64_t deadline, int *busy,
                                 emq_error *err);

static emq_status handshake(emq_conn_t *c, int64_t deadline, emq_error *err) {
    emq__retry retry;
    emq__retry_begin(&retry, BUSY_PAUSE_MIN_MS, BUSY_PAUSE_MAX_MS, 0, deadline,
                     &c->rng);
    while (emq__retry_next(&retry) &&
           (retry.attempt == 1 || emq__now_ms() < deadline)) {
        int busy = 0;
        emq_status st = handshake_once(c, deadline, &busy, err);
        if (st != EMQ_OK || !busy)
            return st;
    }
    return emq__error_set(err, EMQ_ETIMEDOUT, 1,
                          "%s stayed busy running a script for "
                          "connect_timeout_ms (%lld ms)",
                          c->name, (long long)c->opt.connect_timeout_ms);
}

/* Reads the reply to the handshake's FCALL of the library's probe into
 * c->functions and c->functions_why; returns 1 when the library is not
 * there (the function is not found), so it is loaded. */
static int functions_probed(emq_conn_t *c, const emq_reply *r) {
    size_t len;
    const char *text = emq_reply_str(r, &len);
    if (emq_reply_kind(r) != EMQ_REPLY_ERROR) {
        c->functions = text != NULL && len == strlen(c->opt.library->digest) &&
                       memcmp(text, c->opt.library->digest, len) == 0;
        if (!c->functions)
            snprintf(c->functions_why, sizeof c->functions_why,
                     "another build's library of this version is loaded "
                     "(%s answered another digest)",
                     c->opt.library->probe);
        return 0;
    }
    if (emq__reply_mentions(r, "Function not found"))
        return 1;
    if (emq_reply_is_error(r, "NOPERM"))
        snprintf(c->functions_why, sizeof c->functions_why,
                 "this user may not run FCALL %s", c->opt.library->probe);
    else if (!emq__reply_mentions(r, "unknown command")) {
        char said[120];
        emq__reply_text(r, said, sizeof said);
        snprintf(c->functions_why, sizeof c->functions_why,
                 "FCALL %s failed: %s", c->opt.library->probe, said);
    } /* else a server without functions (6.2): EVAL, no news */
    return 0;
}

/* Loads the function library the probe did not find (one more round
 * trip, before deadline): c->functions 1 when it is there now (loaded, or
 * loaded meanwhile by another process), else 0 with why. Only a transport
 * failure is returned: a refusal leaves the connection on EVAL. */
static emq_status functions_load(emq_conn_t *c, int64_t deadline,
                                 emq_error *err) {
    const char *argv[3] = {"FUNCTION", "LOAD", c->opt.library->text};
    emq_status st = append(c, 3, argv, NULL, err);
    emq_reply *r = NULL;
    int64_t left = deadline - emq__now_ms();
    if (st == EMQ_OK)
        st = next_reply(c, left > 1 ? left : 1, &r, err);
    if (st != EMQ_OK)
        return st;
    if (emq_reply_kind(r) != EMQ_REPLY_ERROR ||
        emq__reply_mentions(r, "already exists")) {
        c->functions = 1;
        emq__log_to(&c->opt.log, EMQ_LOG_INFO,
                    "loaded the function library %s on %s",
                    c->opt.library->name, c->name);
    } else if (emq_reply_is_error(r, "NOPERM")) {
        snprintf(c->functions_why, sizeof c->functions_why,
                 "the function library is not loaded on %s and this user "
                 "may not load it (run `echomq functions load` as the "
                 "operator)",
                 c->name);
    } else {
        char said[120];
        emq__reply_text(r, said, sizeof said);
        snprintf(c->functions_why, sizeof c->functions_why,
                 "loading the function library on %s failed: %s", c->name,
                 said);
    }
    emq_reply_free(r);
    return EMQ_OK;
}

static emq_status handshake_once(emq_conn_t *c, int64_t deadline, int *busy,
                                 emq_error *err) {
    int kinds[HS_MAX];
    memset(&c->server, 0, sizeof c->server);
    c->client_id = 0;
    c->functions = 0;
    c->functions_why[0] = '\0';
    int load = 0; /* the probe found no library: FUNCTION LOAD it */
    int n = append_handshake(c, kinds, err);
    if (n <= 0)
        return n == 0 ? EMQ_OK : (emq_status)n;
    int64_t left = deadline - emq__now_ms();
    if (left < 1)
        left = 1;
    for (int i = 0; i < n; i++) {
        emq_reply *r = NULL;
        emq_status st = next_reply(c, left, &r, err);
        if (st != EMQ_OK) {
            if (st == EMQ_ETIMEDOUT)
                emq__error_set(err, EMQ_ETIMEDOUT, 1,
                               "no handshake reply from %s within "
                               "connect_timeout_ms (%lld ms)",
                               c->name, (long long)c->opt.connect_timeout_ms);
            return st;
        }
        left = deadline - emq__now_ms();
        if (left < 1)
            left = 1;
        if (kinds[i] == HS_FUNCTIONS && !emq_reply_is_error(r, "BUSY")) {
            load = functions_probed(c, r);
            emq_reply_free(r);
            continue;
        }
        if (emq_reply_kind(r) != EMQ_REPLY_ERROR) {
            if (kinds[i] == HS_HELLO) {
                emq__server_from_hello(r, &c->server);
                c->client_id = emq__hello_client_id(r);
            } else if (kinds[i] == HS_ID) {
                c->client_id = emq_reply_integer(r);
            } else if (kinds[i] == HS_INFO) {
                size_t len;
                const char *text = emq_reply_str(r, &len);
                emq__server_from_info(text, len, &c->server);
            }
            emq_reply_free(r);
            continue;
        }
        if (kinds[i] == HS_INFO || kinds[i] == HS_ID) { /* optional */
            emq_reply_free(r);
            continue;
        }
        if (emq_reply_is_error(r, "BUSY")) {
            *busy = 1; /* nothing ran; read the rest, then start over */
            emq_reply_free(r);
            continue;
        }
        switch (kinds[i]) {
        case HS_HELLO:
            st = emq__conn_auth_error(c, r, "HELLO", err);
            break;
        case HS_AUTH:
            st = emq__conn_auth_error(c, r, "AUTH", err);
            break;
        case HS_SELECT: {
            char text[160];
            emq__reply_text(r, text, sizeof text);
            if (emq_reply_is_error(r, "NOAUTH"))
                st = emq__conn_auth_error(c, r, "SELECT", err);
            else if (strstr(text, "out of range"))
                st = emq__reply_error_as(err, EMQ_EINVAL, 0, r,
                                         "database %lld does not exist on %s",
                                         (long long)c->db, c->name);
            else
                st = emq__reply_error_set(err, r, "SELECT %lld on %s failed",
                                          (long long)c->db, c->name);
            break;
        }
        default:
            if (emq_reply_is_error(r, "NOPERM"))
                st = EMQ_OK; /* the name is optional; an ACL may forbid it */
            else if (emq_reply_is_error(r, "NOAUTH"))
                st = emq__conn_auth_error(c, r, "CLIENT SETNAME", err);
            else
                st = emq__reply_error_set(err, r, "CLIENT SETNAME on %s failed",
                                          c->name);
            break;
        }
        emq_reply_free(r);
        if (st != EMQ_OK)
            return st;
    }
    if (load && !*busy)
        return functions_load(c, deadline, err);
    return EMQ_OK;
}

/* ---- connecting ---------------------------------------------------------- */

/* Writes the endpoint name of host and port into out. */
void emq__conn_endpoint_name(const char *host, int port, char *out,
                             size_t size) {
    if (strchr(host, ':'))
        snprintf(out, size, "[%s]:%d", host, port);
    else
        snprintf(out, size, "%s:%d", host, port);
}

/* The name of the master the Sentinels watch (sentinel.master, else the
 * URL's #NAME). */
static const char *master_name(const emq_conn_t *c) {
    return emq__sentinel_master_name(&c->opt, &c->url);
}

/* Tells a Sentinel episode once through the connection's log: a line
 * whose key is the last one told is not told again (until another is,
 * or a resolution is plain again: say_done). */
static void say_once(emq_conn_t *c, emq_log_level level, const char *key,
                     const char *fmt, ...) EMQ_PRINTF(4, 5);
static void say_once(emq_conn_t *c, emq_log_level level, const char *key,
                     const char *fmt, ...) {
    uint64_t h = 1469598103934665603ULL; /* FNV-1a */
    for (const char *k = key; *k; k++)
        h = (h ^ (unsigned char)*k) * 1099511628211ULL;
    if (h == c->said)
        return;
    c->said = h;
    char line[600];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    emq__log_to(&c->opt.log, level, "%s", line);
}

static void say_done(emq_conn_t *c) { c->said = 0; }

/* After the handshake with a primary a Sentinel named: ROLE must say
 * master, else a failover is under way (or the Sentinel is wrong) and
 * the caller tries another. An ACL that refuses ROLE leaves it
 * unchecked. */
static emq_status check_primary(emq_conn_t *c, int64_t deadline,
                                emq_error *err) {
    const char *argv[] = {"ROLE"};
    emq_status st = append(c, 1, argv, NULL, err);
    if (st != EMQ_OK)
        return st;
    int64_t left = deadline - emq__now_ms();
    emq_reply *r = NULL;
    st = next_reply(c, left < 1 ? 1 : left, &r, err);
    if (st != EMQ_OK)
        return st;
    int master = emq__sentinel_role_is_master(r);
    emq_reply_free(r);
    c->pending = 0;
    c->head = 0;
    if (master == 0)
        return emq__error_set(err, EMQ_EIO, 1,
                              "%s, named the primary of '%.100s' by %s%s, "
                              "is not a primary (ROLE): a failover under "
                              "way, or a Sentinel that is wrong",
                              c->name, master_name(c),
                              c->watch.by[0] ? "Sentinel " : "",
                              c->watch.by[0] ? c->watch.by : "the Sentinels");
    return EMQ_OK;
}

/* Connects the transport, creates the reader and runs the handshake at
 * the address c->url names (behind Sentinel: the one a Sentinel named,
 * checked with ROLE, its watch in c->watch). Returns EMQ_OK with c->t
 * set, or a failure with err filled and c left without a transport. */
static emq_status connect_node(emq_conn_t *c, int64_t deadline,
                               emq_error *err) {
    const emq__conn_options *o = &c->opt;
    emq_status st;
    if (c->url.scheme == EMQ_URL_UNIX) {
        st = emq__transport_unix_connect(c->url.path, deadline, c->name, &c->t,
                                         err);
    } else {
        st = emq__transport_tcp_connect(c->url.host, c->url.port,
                                        (int)o->tcp_keepalive_s, deadline,
                                        c->name, &c->t, err);
#ifdef EMQ_HAVE_TLS
        if (st == EMQ_OK && c->url.scheme == EMQ_URL_TLS) {
            emq__transport *inner = c->t;
            c->t = NULL;
            st = emq__transport_tls_wrap(inner, c->url.host, &c->tls, deadline,
                                         &c->t, err);
        }
#endif
    }
    if (st == EMQ_ETIMEDOUT && err) {
        char what[EMQ_ERROR_MESSAGE_MAX];
        memcpy(what, err->message, sizeof what);
        emq__error_set(err, EMQ_ETIMEDOUT, 1,
                       "%.200s after %lld ms (connect_timeout_ms)", what,
                       (long long)o->connect_timeout_ms);
    }
    if (st != EMQ_OK) {
        drop_transport(c); /* the watch */
        return st;
    }
    c->reader = emq__resp_reader_new(&o->limits);
    /* Subscribed to nothing: push messages are never replies. */
    if (c->reader != NULL)
        emq__resp_drop_pushes(c->reader);
    if (c->reader == NULL) {
        drop_transport(c);
        return emq__oom(err);
    }
    st = handshake(c, deadline, err);
    c->pending = 0;
    c->head = 0;
    if (st == EMQ_OK && c->url.nsentinels > 0)
        st = check_primary(c, deadline, err);
    if (st == EMQ_OK && c->url.nsentinels > 0)
        st = check_still_named(c, err);
    if (st != EMQ_OK) {
        drop_transport(c);
        return st;
    }
    return EMQ_OK;
}

/* Points c at host:port, a primary a Sentinel named (or the last one),
 * for connect_node. */
static emq_status aim_at(emq_conn_t *c, const char *host, int port,
                         emq_error *err) {
    if (c->url.host != host) {
        char *copy = emq__strndup(host, strlen(host));
        if (copy == NULL)
            return emq__oom(err);
        emq__free(c->url.host);
        c->url.host = copy;
    }
    c->url.port = port;
    emq__conn_endpoint_name(c->url.host, c->url.port, c->name, sizeof c->name);
    return EMQ_OK;
}

/* No Sentinel could be asked (why): the last primary named, when there
 * is one, with the ROLE check; its watch is reopened later. */
static emq_status connect_last_primary(emq_conn_t *c, int64_t deadline,
                                       const emq_error *why, emq_error *err) {
    if (c->url.host == NULL) {
        *err = *why;
        return why->code;
    }
    emq_status st = aim_at(c, c->url.host, c->url.port, err);
    if (st != EMQ_OK)
        return st;
    char key[400];
    snprintf(key, sizeof key, "last %s", c->name);
    say_once(c, EMQ_LOG_WARNING, key,
             "no Sentinel of master '%.100s' answered (%.200s); using %s, "
             "the primary named last, while it says ROLE master",
             master_name(c), why->message, c->name);
    c->watch.by[0] = '\0';
    c->watch.at = (emq__hostport){NULL, 0};
    st = connect_node(c, deadline, err);
    if (st == EMQ_OK)
        emq__sentinel_watch_lose(&c->watch); /* asked again later */
    else
        emq__error_prefix(err,
                          "no Sentinel answered (%.200s); the primary "
                          "named last",
                          why->message);
    return st;
}

/* Tells, once per episode, that the Sentinels disagreed or that the
 * primary the most named (failing with first) was skipped for the k-th
 * of pick, now in use; a plain resolution ends the episode. */
static void told_pick(emq_conn_t *c, const emq__sentinel_pick *pick, size_t k,
                      const emq_error *first) {
    if (pick->n == 1) {
        say_done(c);
        return;
    }
    char told[512], key[900];
    emq__sentinel_pick_text(pick, told, sizeof told);
    snprintf(key, sizeof key, "%s -> %s", told, c->name);
    if (k == 0)
        say_once(c, EMQ_LOG_WARNING, key,
                 "the Sentinels disagree on the primary of '%.100s' (%s): "
                 "using %s, %s",
                 master_name(c), told, c->name,
                 pick->named[0].votes < pick->named[1].votes
                     ? "the one a switch announced"
                     : "the most named");
    else
        say_once(c, EMQ_LOG_WARNING, key,
                 "the Sentinels disagree on the primary of '%.100s' (%s): "
                 "using %s, as %.200s",
                 master_name(c), told, c->name, first->message);
}

/* A switch announced to a primary the Sentinels disagree about (the
 * leader names the promoted replica before the others hear of it) puts
 * that primary first, whatever the votes: the announcement is newer
 * than the votes for the old one. Used once. */
static void prefer_announced(emq_conn_t *c, emq__sentinel_pick *pick) {
    for (size_t k = 1; k < pick->n && c->watch.announced[0]; k++) {
        char addr[300];
        emq__conn_endpoint_name(pick->named[k].host, pick->named[k].port, addr,
                                sizeof addr);
        if (strcmp(addr, c->watch.announced) != 0)
            continue;
        emq__sentinel_named first = pick->named[k];
        memmove(&pick->named[1], &pick->named[0], k * sizeof pick->named[0]);
        pick->named[0] = first;
        break;
    }
    c->watch.announced[0] = '\0';
}

/* Behind Sentinel: asks the Sentinels (emq__sentinel_resolve) and
 * connects to the primary the most of them name; one that cannot be
 * reached or is not a primary is skipped for the next, and the Sentinels
 * that named it are asked last next time. */
static emq_status connect_sentinel(emq_conn_t *c, int64_t deadline,
                                   emq_error *err) {
    emq__sentinel_pick *pick = emq__alloc(sizeof *pick);
    if (pick == NULL)
        return emq__oom(err);
    emq_error why;
    emq_status st =
        emq__sentinel_resolve(&c->opt, &c->url, &c->tls, deadline, pick, &why);
    if (st != EMQ_OK) {
        emq__free(pick);
        if (st == EMQ_EIO)
            return connect_last_primary(c, deadline, &why, err);
        *err = why;
        return st;
    }
    prefer_announced(c, pick);
    emq_error first;
    emq__error_clear(&first);
    for (size_t k = 0; k < pick->n; k++) {
        emq__sentinel_named *n = &pick->named[k];
        st = aim_at(c, n->host, n->port, err);
        if (st != EMQ_OK)
            break;
        emq__sentinel_watch_close(&c->watch);
        emq__sentinel_watch_set(&c->watch, n->watch, &n->voters[0],
                                pick->failover_ms);
        n->watch = NULL;
        st = connect_node(c, deadline, err);
        if (st == EMQ_OK) {
            told_pick(c, pick, k, &first);
            emq__sentinel_watch_listen(&c->watch, &c->opt, &c->url, &c->tls,
                                       EMQ_SENTINELS_MAX);
            break;
        }
        if (k == 0)
            first = *err;
        for (size_t v = 0; v < n->votes; v++)
            emq__sentinel_to_back(&c->url, n->voters[v].host,
                                  n->voters[v].port);
        if (st == EMQ_ENOMEM || emq__now_ms() >= deadline)
            break;
    }
    if (st != EMQ_OK && first.code != EMQ_OK && pick->n > 1)
        *err = first; /* the most named primary's failure */
    emq__sentinel_pick_drop(pick);
    emq__free(pick);
    return st;
}

/* One connect: behind Sentinel, asks the Sentinels first. */
static emq_status connect_once(emq_conn_t *c, emq_error *err) {
    int64_t deadline = emq__now_ms() + c->opt.connect_timeout_ms;
    c->pending = 0;
    c->head = 0;
    c->out.len = 0;
    return c->url.nsentinels > 0 ? connect_sentinel(c, deadline, err)
                                 : connect_node(c, deadline, err);
}

/* Makes *u the URL of o->host, o->port and o->tls, without parsing any
 * text: EMQ_EINVAL for an address emq__host_valid refuses or a port
 * outside 1-65535, EMQ_ENOMEM. */
static emq_status address_as_url(const emq__conn_options *o, emq__url *u,
                                 emq_error *err) {
    memset(u, 0, sizeof *u);
    u->db = -1;
    u->tls_verify = -1;
    if (!emq__host_valid(o->host, strlen(o->host)) || o->port < 1 ||
        o->port > 65535) {
        char shown[80];
        emq__printable(shown, sizeof shown, o->host, strlen(o->host));
        return emq__error_set(err, EMQ_EINVAL, 0,
                              "'%s' port %lld is not an address to connect "
                              "to",
                              shown, (long long)o->port);
    }
    u->scheme = o->tls == 1 ? EMQ_URL_TLS : EMQ_URL_TCP;
    u->port = (int)o->port;
    u->host = emq__strdup(o->host);
    return u->host ? EMQ_OK : emq__oom(err);
}

/* Resolves the effective settings: properties set explicitly win over the
 * URL's. Returns EMQ_OK or EMQ_EINVAL for a combination that cannot work. */
static emq_status resolve_settings(emq_conn_t *c, emq_error *err) {
    const emq__conn_options *o = &c->opt;
    emq__url *u = &c->url;
    c->user = o->user ? o->user : u->user;
    c->password = o->password ? o->password : u->password;
    c->db = o->db >= 0 ? o->db : (u->db >= 0 ? u->db : 0);
    c->tls.ca_file = o->tls_ca_file ? o->tls_ca_file : u->tls_ca_file;
    c->tls.cert_file = o->tls_cert_file ? o->tls_cert_file : u->tls_cert_file;
    c->tls.key_file = o->tls_key_file ? o->tls_key_file : u->tls_key_file;
    c->tls.key_password = o->tls_key_password;
    c->tls.sni = o->tls_sni ? o->tls_sni : u->tls_sni;
    c->tls.verify = emq__url_tls_verifies(u, o->tls_verify);
    if (u->scheme == EMQ_URL_UNIX)
        snprintf(c->name, sizeof c->name, "unix:%s", u->path);
    else if (u->nsentinels > 0) /* until a Sentinel names the primary */
        snprintf(c->name, sizeof c->name, "the primary of '%.100s'",
                 master_name(c) ? master_name(c) : "");
    else
        emq__conn_endpoint_name(u->host, u->port, c->name, sizeof c->name);
#ifndef EMQ_HAVE_TLS
    if (u->scheme == EMQ_URL_TLS)
        return emq__error_set(err, EMQ_EINVAL, 0,
                              "rediss:// needs TLS, but this libechomq was "
                              "built without it (EMQ_TLS=OFF)");
#endif
    if (o->backoff_min_ms > o->backoff_max_ms)
        return emq__error_set(err, EMQ_EINVAL, 0,
                              "reconnect.backoff_min_ms (%lld) is larger than "
                              "reconnect.backoff_max_ms (%lld)",
                              (long long)o->backoff_min_ms,
                              (long long)o->backoff_max_ms);
    return EMQ_OK;
}

emq_status emq_conn_new(const emq_conf_t *conf, emq_conn_t **out,
                        emq_error *err) {
    if (out)
        *out = NULL;
    if (conf == NULL || out == NULL)
        return emq__error_set(err, EMQ_EINVAL, 0,
                              "emq_conn_new: conf and out must not be NULL");
    emq__conn_options opts;
    emq__conn_options_of(conf, &opts);
    return emq__conn_open(&opts, out, err);
}

emq_status emq__conn_open(const emq__conn_options *opts, emq_conn_t **out,
                          emq_error *err) {
    if (out)
        *out = NULL;
    if (opts == NULL || (opts->url == NULL && opts->host == NULL) ||
        out == NULL)
        return emq__error_set(err, EMQ_EINVAL, 0,
                              "emq__conn_open: options, url (or host) and "
                              "out must not be NULL");
    emq_conn_t *c = emq__calloc(1, sizeof *c);
    if (c == NULL)
        return emq__oom(err);
    emq__sentinel_watch_init(&c->watch);
    c->url.db = -1;
    if (emq__conn_options_keep(&c->opt, opts, err) != EMQ_OK) {
        emq__free(c);
        return EMQ_ENOMEM;
    }
    emq__buf_init(&c->out, (size_t)c->opt.output_max_bytes,
                  "output buffer (output.max_bytes)");
    c->rng = (uint64_t)emq__now_ms() ^ (uint64_t)(uintptr_t)c;
    emq_status st = c->opt.host ? address_as_url(&c->opt, &c->url, err)
                                : emq__url_parse(c->opt.url, &c->url, err);
    if (st == EMQ_EINVAL && c->opt.host == NULL)
        emq__error_prefix(err, "invalid url");
    if (st == EMQ_OK)
        st = resolve_settings(c, err);
    if (st == EMQ_OK)
        st = connect_once(c, err);
    if (st != EMQ_OK) {
        emq_conn_destroy(c);
        return st;
    }
    emq__error_clear(err);
    *out = c;
    return EMQ_OK;
}

void emq_conn_destroy(emq_conn_t *conn) {
    if (conn == NULL)
        return;
    drop_transport(conn);
    emq__buf_free(&conn->out);
    emq__free(conn->waits);
    emq__url_free(&conn->url);
    emq__conn_options_drop(&conn->opt);
    emq__wipe(conn, sizeof *conn);
    emq__free(conn);
}

/* ---- commands ------------------------------------------------------------ */

emq_status emq_conn_append(emq_conn_t *conn, int argc, const char *const *argv,
                           const size_t *argvlen, emq_error *err) {
    if (conn == NULL)
        return emq__error_set(err, EMQ_EINVAL, 0, "connection is NULL");
    if (conn->broken.code != EMQ_OK)
        return sticky(conn, err);
    emq_status st = append(conn, argc, argv, argvlen, err);
    if (st == EMQ_OK)
        emq__error_clear(err);
    return st;
}

emq_status emq__conn_send(emq_conn_t *conn, emq_error *err) {
    if (conn == NULL)
        return emq__error_set(err, EMQ_EINVAL, 0, "connection is NULL");
    if (conn->broken.code != EMQ_OK)
        return sticky(conn, err);
    int64_t timeout_ms = conn->opt.command_timeout_ms;
    emq_error e;
    emq__error_clear(&e);
    emq_status st = hold_before_send(conn, &e);
    if (st == EMQ_OK)
        st = flush(conn, timeout_ms > 0 ? emq__now_ms() + timeout_ms : -1,
                   timeout_ms, &e);
    if (st != EMQ_OK)
        return break_conn(conn, &e, err);
    block_started(conn);
    emq__error_clear(err);
    return EMQ_OK;
}

int emq_conn_server(const emq_conn_t *conn, emq_server *out) {
    if (out == NULL)
        return 0;
    if (conn == NULL || conn->server.name[0] == '\0') {
        memset(out, 0, sizeof *out);
        return 0;
    }
    *out = conn->server;
    return 1;
}

/* The checks every call that reads a reply starts with: *reply NULL,
 * the arguments, a connection already broken. */
static emq_status reply_call_begins(emq_conn_t *conn, emq_reply **reply,
                                    emq_error *err) {
    if (reply)
        *reply = NULL;
    if (conn == NULL || reply == NULL)
        return emq__error_set(err, EMQ_EINVAL, 0,
                              "connection and reply must not be NULL");
    if (conn->broken.code != EMQ_OK)
        return sticky(conn, err);
    return EMQ_OK;
}

emq_status emq_conn_get_reply(emq_conn_t *conn, emq_reply **reply,
                              emq_error *err) {
    emq_status st = reply_call_begins(conn, reply, err);
    if (st != EMQ_OK)
        return st;
    if (conn->pending == 0)
        return emq__error_set(err, EMQ_EINVAL, 0,
                              "no reply is outstanding: append a command "
                              "first");
    emq_error e;
    emq__error_clear(&e);
    st = next_reply(conn, conn->opt.command_timeout_ms, reply, &e);
    if (st != EMQ_OK)
        return break_conn(conn, &e, err);
    emq__error_clear(err);
    return EMQ_OK;
}

emq_status emq_conn_command(emq_conn_t *conn, int argc, const char *const *argv,
                            const size_t *argvlen, emq_reply **reply,
                            emq_error *err) {
    emq_status st = reply_call_begins(conn, reply, err);
    if (st != EMQ_OK)
        return st;
    if (conn->pending > 0)
        return emq__error_set(err, EMQ_EINVAL, 0,
                              "%zu pipelined replies are still unread; read "
                              "them with emq_conn_get_reply before "
                              "emq_conn_command",
                              conn->pending);
    st = append(conn, argc, argv, argvlen, err);
    if (st != EMQ_OK)
        return st;
    return emq_conn_get_reply(conn, reply, err);
}

size_t emq_conn_pending(const emq_conn_t *conn) {
    return conn ? conn->pending : 0;
}

emq_status emq_conn_reconnect(emq_conn_t *conn, emq_error *err) {
    if (conn == NULL)
        return emq__error_set(err, EMQ_EINVAL, 0, "connection is NULL");
    drop_transport(conn);
    conn->pending = 0;
    conn->head = 0;
    conn->too_large = 0;
    const emq__conn_options *o = &conn->opt;
    emq_error e;
    emq__error_clear(&e);
    emq_status st = EMQ_EIO;
    emq__retry retry;
    emq__retry_begin(&retry, o->backoff_min_ms, o->backoff_max_ms,
                     o->max_attempts, -1, &conn->rng);
    while (emq__retry_next(&retry)) {
        emq__error_clear(&e);
        st = connect_once(conn, &e);
        if (st == EMQ_OK) {
            conn->reconnects++;
            emq__error_clear(&conn->broken);
            emq__error_clear(err);
            return EMQ_OK;
        }
        if (!e.retriable || st == EMQ_ENOMEM)
            break; /* a wrong password or a bad certificate stays wrong;
                      out of memory is the caller's to know at once */
    }
    if (retry.attempt > 1)
        emq__error_prefix(&e, "reconnect gave up after %lld attempts",
                          (long long)retry.attempt);
    conn->broken = e;
    if (conn->broken.code == EMQ_OK)
        conn->broken.code = st;
    return sticky(conn, err);
}

int emq_conn_is_broken(const emq_conn_t *conn) {
    return conn == NULL || conn->broken.code != EMQ_OK;
}

/* After ROLE said master: a switch the watch announced since the
 * Sentinel named the primary (an old primary resumed from a pause says
 * ROLE master until the Sentinels reconfigure it) makes the caller
 * resolve again. */
static emq_status check_still_named(emq_conn_t *c, emq_error *err) {
    if (!emq__sentinel_watch_switched(&c->watch, &c->opt, &c->url, &c->tls))
        return EMQ_OK;
    return emq__error_set(err, EMQ_EIO, 1,
                          "the Sentinels announced a new primary of "
                          "'%.100s' while %s was being connected; resolving "
                          "again",
                          master_name(c), c->name);
}

int emq__conn_went_away(emq_conn_t *conn) {
    if (conn == NULL || conn->t == NULL || conn->broken.code != EMQ_OK)
        return 1;
    if (conn->pending > 0 || conn->out.len > 0)
        return 0; /* replies are due: readable is expected */
    if (conn->reader != NULL && emq__resp_buffered(conn->reader) > 0)
        return 1; /* bytes nobody asked for */
    /* Behind Sentinel: a +switch-master of this master (a watch that
     * ended is reopened, the connection kept). */
    if (sentinel_hold(conn))
        return 1;
    struct pollfd pfd = {.fd = conn->t->fd, .events = POLLIN};
    return poll(&pfd, 1, 0) > 0; /* EOF, a reset, or unasked bytes */
}

int emq__conn_reply_whole(emq_conn_t *c, int64_t ms) {
    if (c == NULL || c->t == NULL || c->broken.code != EMQ_OK)
        return 1;
    int wake = c->cancel.flag != NULL && c->cancel.on_stop != NULL &&
               c->cancel.wake_fd >= 0;
    int64_t deadline = emq__now_ms() + (ms > 0 ? ms : 0);
    for (;;) {
        if (emq__resp_whole(c->reader) ||
            (c->cancel.flag != NULL && atomic_load(c->cancel.flag)))
            return 1;
        emq_error e;
        ssize_t n = read_chunk(c, &e);
        if (n > 0)
            continue;
        if (n != EMQ_EAGAIN) { /* closed (the read sees it again), failed */
            keep_failure(c, n, &e);
            return 1;
        }
        if (ms <= 0)
            return 0;
        int others[2] = {-1, wake ? c->cancel.wake_fd : -1};
        int w =
            emq__transport_wait_either(c->t->fd, c->t->want, others, deadline);
        if (w == 0)
            return 0;
        if (w != 1)
            return 1; /* a stop, or the wait failed */
    }
}

int emq__conn_read_now(emq_conn_t *c, size_t most) {
    if (c == NULL || c->t == NULL || c->reader == NULL)
        return -1;
    emq_error e;
    for (size_t got = 0; got < most;) { /* what is there now */
        ssize_t n = read_chunk(c, &e);
        if (n > 0) {
            got += (size_t)n;
            continue;
        }
        return n == EMQ_EAGAIN ? 0 : -1;
    }
    return 0; /* the rest on the next call */
}

emq_status emq__conn_take_read(emq_conn_t *c, emq_reply **reply,
                               emq_error *err) {
    return emq__resp_next(c->reader, reply, err);
}

const char *emq__conn_name(const emq_conn_t *conn) {
    return conn != NULL ? conn->name : "";
}

int64_t emq__conn_reply_began_ms(const emq_conn_t *conn) {
    return conn != NULL ? conn->reply_began_ms : 0;
}

int emq__conn_switch_announced(const emq_conn_t *conn) {
    return conn != NULL && conn->watch.switched;
}

int emq__conn_reply_too_large(const emq_conn_t *conn) {
    return conn != NULL && conn->broken.code == EMQ_EPROTO && conn->too_large;
}

uint64_t emq_conn_reconnects(const emq_conn_t *conn) {
    return conn ? conn->reconnects : 0;
}

int emq_conn_fd(const emq_conn_t *conn) {
    return conn && conn->t ? conn->t->fd : -1;
}
