/* SPDX-License-Identifier: BSD-3-Clause */
/* conn.h: internal interfaces of the conn layer, one section per file:
 * URL parsing, Sentinel's replies, backoff, the server's capabilities,
 * the typed options, the Sentinel client (resolution and watch) and the
 * connection itself (the blocking-command wait rules among them).
 *
 * Internal header (not installed). The public connection API is in
 * echomq.h; this header exposes the pure pieces so unit tests can reach
 * them without a server, and so conf.c can validate a URL when it is
 * set (the one place a lower folder calls into conn: parsing is pure and
 * owns no state, see conf.c).
 */
#ifndef EMQ_CONN_H
#define EMQ_CONN_H

#include "../resp/resp.h"
#include "conf.h"

#include <stdatomic.h>

/* ---- url.c ------------------------------------------------------------ */

typedef enum emq__url_scheme {
    EMQ_URL_TCP = 1, /* redis://, redis-sentinel:// */
    EMQ_URL_TLS = 2, /* rediss://, rediss-sentinel:// */
    EMQ_URL_UNIX = 3 /* unix:// */
} emq__url_scheme;

/* One host and port (a Sentinel's). */
typedef struct emq__hostport {
    char *host; /* emq__alloc'd; IPv6 without [] */
    int port;
} emq__hostport;

/* A parsed URL. Strings are emq__alloc'd, NUL-terminated and NULL when the
 * URL does not give them. Free with emq__url_free, which wipes password. */
typedef struct emq__url {
    emq__url_scheme scheme;
    char *host;          /* tcp/tls: name or address, IPv6 without [] */
    int port;            /* tcp/tls: 1-65535, default 6379 */
    char *path;          /* unix: socket path (percent-decoded) */
    char *user;          /* percent-decoded ACL user name */
    int user_alone;      /* the user info had no ':': it may be a password
                            (redis-cli reads it so), never shown */
    char *password;      /* percent-decoded; never put in a message */
    int64_t db;          /* /N or ?db=N; -1 when absent */
    char *tls_ca_file;   /* ?tls.ca_file= (rediss only) */
    char *tls_cert_file; /* ?tls.cert_file= */
    char *tls_key_file;  /* ?tls.key_file= */
    char *tls_sni;       /* ?tls.sni= */
    int tls_verify;      /* ?tls.verify=peer|none: 1|0; -1 when absent */
    /* A Sentinel URL (redis-sentinel://, rediss-sentinel://, also with
     * '+'): the Sentinels in the order given (port 26379 by default) and
     * the master's name (#NAME); host is NULL until a Sentinel names the
     * primary. nsentinels is 0 for every other URL. */
    emq__hostport *sentinels;
    size_t nsentinels;
    char *master;
} emq__url;

/* The most Sentinels one URL (or the list a Sentinel reports) holds. */
#define EMQ_SENTINELS_MAX 16
/* A Sentinel's port when the URL gives none. */
#define EMQ_SENTINEL_PORT 26379

/* Parses text into *out (which the caller provides; its previous contents
 * are not freed). Returns EMQ_OK, EMQ_ENOMEM, or EMQ_EINVAL with a
 * message naming the bad part ("port '99999' is out of range 1-65535").
 * A message never contains the password, nor any byte of the URL that
 * comes before its last '@'. On failure *out holds nothing to free. */
emq_status emq__url_parse(const char *text, emq__url *out, emq_error *err);
/* Parses "host[:port]" or "[v6addr][:port]" (len bytes of text, no
 * scheme, user or path) with the same rules as a URL's host part into
 * out->host and out->port (default 6379); the cluster.seeds entries use
 * it. Returns EMQ_OK, EMQ_ENOMEM or EMQ_EINVAL naming the bad part; free
 * out with emq__url_free. */
emq_status emq__hostport_parse(const char *text, size_t len, emq__url *out,
                               emq_error *err);
/* The longest host a connection takes as data (a Sentinel's or a
 * cluster node's address). */
#define EMQ_HOST_MAX 255
/* 1 when len bytes at host are an address a peer may name: a host name
 * or IPv4 address (letters, digits, '-', '.', '_'), or an IPv6 address
 * without brackets (those and ':', with at least two; a "%zone" after
 * it), 1 to EMQ_HOST_MAX bytes. Anything else (a '?', '@', '/', ']',
 * a space, a control byte) is refused: an address is data and can never
 * carry URL settings. Pure. */
int emq__host_valid(const char *host, size_t len);
/* 1 when host may be connected to under patterns (cluster.allowed_hosts,
 * sentinel.allowed_hosts): a comma-separated list ('*' any run of
 * characters, '?' one, the rest compared without case), NULL or ""
 * allowing any. Pure. */
int emq__host_allowed(const char *patterns, const char *host);
/* Frees the strings of u (wiping the password) and zeroes it. */
void emq__url_free(emq__url *u);

/* ---- sentinel.c: what Sentinel's replies say (pure) -------------------- */

/* Every address read from a Sentinel's reply passes emq__host_valid; one
 * it refuses is read as no address (a reply of another shape). */

/* Reads the reply of SENTINEL get-master-addr-by-name: 1 with the
 * primary's host (into host, size bytes) and *port; 0 when the Sentinel
 * does not know the master (a nil); -1 for a reply of another shape. */
int emq__sentinel_master_addr(const emq_reply *r, char *host, size_t size,
                              int *port);
/* Reads a ROLE reply: 1 for a master, 0 for a replica (or a Sentinel),
 * -1 when it is not a ROLE reply. */
int emq__sentinel_role_is_master(const emq_reply *r);
/* The channels a Sentinel watch subscribes to (EMQ_SENTINEL_CHANNELS of
 * them): a switch (+switch-master, and +promoted-slave from the
 * failover's leader), the leader's steps before it (from +try-failover
 * to the promotion it waits for) and the failover's end or abort. */
#define EMQ_SENTINEL_CHANNELS 13
extern const char *const emq__sentinel_channels[EMQ_SENTINEL_CHANNELS];

/* What a Sentinel's message says of one master. */
typedef enum emq__sentinel_news {
    EMQ_SENTINEL_UNREADABLE = -1, /* not a message of those channels */
    EMQ_SENTINEL_NONE = 0,        /* another master's, or a confirmation */
    EMQ_SENTINEL_SWITCH = 1,      /* its switch, or its replica promoted */
    EMQ_SENTINEL_BEGUN = 2,       /* a failover of it under way */
    EMQ_SENTINEL_ENDED = 3        /* a failover of it ended or aborted */
} emq__sentinel_news;

/* Reads a message of a connection subscribed to emq__sentinel_channels
 * for master: for EMQ_SENTINEL_SWITCH the new primary's address as
 * announced in host (size bytes) and *port (an empty host and 0 when the
 * message does not carry a readable one); host "" and 0 otherwise. */
emq__sentinel_news emq__sentinel_news_of(const emq_reply *r, const char *master,
                                         char *host, size_t size, int *port);
/* The failover-timeout (ms) in a reply of SENTINEL master NAME (a flat
 * field/value array or a map); 0 when it has none. */
int64_t emq__sentinel_failover_timeout(const emq_reply *r);
/* Moves u's Sentinel at host (the pointer u holds) and port to the back
 * (one that named a primary that failed is asked last next time); no-op
 * when u has none such. */
void emq__sentinel_to_back(emq__url *u, const char *host, int port);
/* Moves u's Sentinel i to the front (the one that answered is asked
 * first next time); the order of the others is kept. */
void emq__sentinel_to_front(emq__url *u, size_t i);
/* Adds to u's Sentinels those that a reply of SENTINEL sentinels NAME
 * names and u does not know yet, each through map (sentinel.address_map,
 * emq__sentinel_map; NULL: none) and allowed by allowed
 * (sentinel.allowed_hosts, emq__host_allowed), at most EMQ_SENTINELS_MAX
 * in all (the list has room for them). Returns how many were added. */
size_t emq__sentinel_learn(emq__url *u, const emq_reply *r, const char *map,
                           const char *allowed);
/* Applies sentinel.address_map (map: "FROM=TO[,FROM=TO...]", each side
 * host[:port] parsed as a URL's host part, port 6379 when absent; NULL
 * or "": no entry) to an address a Sentinel announced, host (a buffer of
 * size bytes) and *port: the first FROM equal to it (host names compared
 * without case) replaces them by its TO. EMQ_OK whether or not one
 * matched; EMQ_EINVAL naming a malformed entry (the conf refuses those
 * on set), or a TO that does not fit in size; EMQ_ENOMEM. */
emq_status emq__sentinel_map(const char *map, char *host, size_t size,
                             int *port, emq_error *err);

/* The EMQ_EAUTH error for an authentication refusal r (WRONGPASS, NOAUTH,
 * a password the server does not need) answered to cmd on c, naming the
 * server and user, never the password (other refusals: "cmd to server
 * failed: text", also EMQ_EAUTH). For
 * the handshake, and for a first command a server refused for want of
 * AUTH (the cluster route's CLUSTER SHARDS). */
emq_status emq__conn_auth_error(emq_conn_t *c, const emq_reply *r,
                                const char *cmd, emq_error *err);

/* ---- backoff.c -------------------------------------------------------- */

/* One step of a small PRNG (splitmix64) over *state; returns 64 random
 * bits. Deterministic for a given seed, so tests can pin it. */
uint64_t emq__backoff_random(uint64_t *state);
/* The uncapped-then-capped base delay for attempt n (0-based):
 * min(max_ms, min_ms * 2^n), computed without overflow for any n. */
int64_t emq__backoff_base(int64_t min_ms, int64_t max_ms, unsigned attempt);
/* The delay to sleep before retry attempt n, with "equal jitter": half
 * of the base delay is fixed and the other half random, so the result is
 * in [base/2, base] and never above max_ms. */
int64_t emq__backoff_delay(int64_t min_ms, int64_t max_ms, unsigned attempt,
                           uint64_t *state);

/* The one way echomq retries: attempts, a capped jittered delay between
 * them (emq__backoff_delay, doubling from min_ms to max_ms), an optional
 * bound on attempts and a deadline, and a stop predicate the waits
 * watch. Set it up with emq__retry_begin, then loop:
 *
 *     emq__retry r;
 *     emq__retry_begin(&r, min, max, attempts, deadline, &rng);
 *     while (emq__retry_next(&r)) { try; if done: break; }
 *
 * The first emq__retry_next returns 1 at once; each later one sleeps the
 * next delay first (cut short by the deadline, after which one last
 * attempt is made; in slices of EMQ_RETRY_SLICE_MS when a stop predicate
 * is set, so a stop is seen within one), and returns 0 instead when the
 * attempts are spent, the deadline had passed before the wait, or the
 * predicate says stop. */
typedef struct emq__retry {
    int64_t min_ms, max_ms;
    int64_t max_attempts;     /* 0: no bound */
    int64_t deadline_ms;      /* monotonic (emq__now_ms); -1: none */
    int (*halted)(void *ctx); /* NULL, or 1 when the waiting must end */
    void *ctx;
    int stop_ends;   /* 1: a stop also ends the retrying */
    uint64_t *rng;   /* the jitter's state, the caller's */
    int64_t attempt; /* attempts begun so far */
} emq__retry;

/* The slice a stop-aware wait sleeps in. */
#define EMQ_RETRY_SLICE_MS 20

void emq__retry_begin(emq__retry *r, int64_t min_ms, int64_t max_ms,
                      int64_t max_attempts, int64_t deadline_ms, uint64_t *rng);
/* Makes r's waits stop-aware: halted(ctx) is asked during each one and
 * cuts it short. With ends 1 a stop also ends the retrying (asked before
 * and after each wait: emq__retry_next returns 0); with ends 0 the attempt
 * after a cut wait is still made and the caller decides what the stop
 * means. */
void emq__retry_stop_when(emq__retry *r, int (*halted)(void *), void *ctx,
                          int ends);
/* 1: make attempt r->attempt (counted); 0: no more (see above). */
int emq__retry_next(emq__retry *r);
/* Sleeps ms, in slices that end early when halted(ctx) says so (NULL:
 * one sleep); what a stop-aware wait of its own uses. */
void emq__nap(int64_t ms, int (*halted)(void *), void *ctx);

/* ---- server.c --------------------------------------------------------- */

/* The capability table: what a server of this name and version can do
 * (emq_capability bits). Unknown names or versions: 0. One place decides
 * every version difference the library acts on; a newer feature (Redis
 * 8.2's XACKDEL/XDELEX and ACKED trimming, 8.4's XREADGROUP ... CLAIM) is
 * a new bit here once a server that has it can be tested. */
uint32_t emq__server_caps(const char *name, int major, int minor, int patch);
/* Fills *out from a HELLO reply (a map or, in RESP2, a flat array with
 * "server" and "version"). Returns 1 when both were found. */
int emq__server_from_hello(const emq_reply *hello, emq_server *out);
/* The connection's id in a HELLO reply (its "id" field); 0 when absent. */
int64_t emq__hello_client_id(const emq_reply *hello);
/* Fills *out from the text of INFO server (valkey_version and
 * server_name win over redis_version, which Valkey sets to 7.2.4).
 * Returns 1 when a version was found. */
int emq__server_from_info(const char *text, size_t len, emq_server *out);

/* ---- options.c -------------------------------------------------------- */

/* What one connection is told, typed: the rows of the property table that
 * the conn layer reads (docs/CONFIGURATION.md, "Read by"), and nothing
 * else. A layer above makes one with emq__conn_options_of and may set a
 * field for its own use of the connection (a producer bounds the
 * timeouts by its own, a consumer makes single reconnect attempts); it
 * never edits a conf to steer the conn layer. Strings are borrowed:
 * emq__conn_open copies what it keeps. */
/* A server-side function library (the session gives src/scripts' own):
 * a handshake sends FCALL probe 0, which must answer digest; when the
 * server says the function is not found, FUNCTION LOAD text is sent once.
 * The outcome is emq__conn_functions. */
typedef struct emq__conn_library {
    const char *name;   /* for messages: "echomq_1" */
    const char *probe;  /* a function of it that answers digest */
    const char *digest; /* what this build's text answers */
    const char *text;   /* what FUNCTION LOAD takes */
} emq__conn_library;

typedef struct emq__conn_options {
    const char *url; /* NULL only with host */
    /* An address a peer named (a Sentinel's, a cluster node's), taken as
     * data and never parsed as URL text: with host set, url is not read
     * and the connection goes to host:port, over TLS when tls is 1; the
     * fields below give every other setting. NULL: the URL's. */
    const char *host;
    int64_t port;
    int64_t tls;
    const char *user;        /* NULL: the URL's */
    const char *password;    /* NULL: the URL's; never in a message */
    int64_t db;              /* -1: the URL's (else 0) */
    const char *client_name; /* CLIENT SETNAME; NULL: none */
    /* 1: learn the connection's id at each handshake (HELLO's, or a
     * CLIENT ID sent with it), for emq__conn_client_id. */
    int64_t learn_client_id;
    int64_t protocol;           /* 2 or 3 */
    int64_t connect_timeout_ms; /* connect, TLS and handshake together */
    int64_t command_timeout_ms; /* per reply; 0: forever */
    int64_t tcp_keepalive_s;    /* 0: off */
    const char *tls_ca_file;    /* NULL: the URL's, else the system's */
    const char *tls_cert_file;
    const char *tls_key_file;
    const char *tls_key_password; /* NULL: none; never in a message */
    const char *tls_sni;
    int64_t tls_verify;                 /* EMQ_TLS_VERIFY_* */
    const char *sentinel_master;        /* NULL: the URL's #NAME */
    const char *sentinel_user;          /* AUTH at the Sentinels; NULL: none */
    const char *sentinel_password;      /* never in a message */
    int64_t sentinel_tls;               /* -1: as the URL; 0/1: off/on */
    const char *sentinel_address_map;   /* NULL: none */
    const char *sentinel_allowed_hosts; /* patterns; NULL: any host */
    int64_t backoff_min_ms;             /* emq_conn_reconnect's pauses */
    int64_t backoff_max_ms;
    int64_t max_attempts;     /* per emq_conn_reconnect; 0: no bound */
    int64_t pipeline_max;     /* appended commands left unread */
    int64_t output_max_bytes; /* unsent output */
    emq__resp_limits limits;  /* what one reply may be */
    emq__log_sink log;        /* where a Sentinel's news is told */
    /* A function library each handshake makes sure of (NULL: none asked:
     * EVAL, or no scripts). Static, never copied. */
    const struct emq__conn_library *library;
} emq__conn_options;

/* Fills *out from conf (every string borrowed from conf). */
void emq__conn_options_of(const emq_conf_t *conf, emq__conn_options *out);
/* Makes *dst a copy of *src that owns its strings (free with
 * emq__conn_options_drop). EMQ_ENOMEM leaves *dst owning nothing. */
emq_status emq__conn_options_keep(emq__conn_options *dst,
                                  const emq__conn_options *src, emq_error *err);
/* Wipes and frees the strings a kept copy owns; the struct is zeroed. */
void emq__conn_options_drop(emq__conn_options *o);

/* 1 when a TLS connection verifies the server: the tls.verify property
 * (EMQ_TLS_VERIFY_*) when set, else the URL's ?tls.verify (u->tls_verify,
 * -1 when absent), else on. Pure. */
int emq__url_tls_verifies(const emq__url *u, int64_t property);

/* ---- sentinel_client.c: the primary behind Sentinel, asked and watched - */

struct emq__tls_opts; /* transport.h */

/* A connection's watch of the Sentinels: a connection to the Sentinel
 * that named its primary, and to each other one it knows (its ears: any
 * Sentinel may lead a failover, and only the leader tells its steps
 * before the promotion), each subscribed to emq__sentinel_channels. The
 * end of the named one is not a switch: the data connection is kept and
 * the watch reopened on the next Sentinel, with backoff
 * (emq__sentinel_watch_mend), which also checks that it still names the
 * primary in use. A failover heard begun holds the connection's commands
 * (emq__sentinel_watch_holding) until its switch, its end, or the
 * Sentinels' failover-timeout. */
typedef struct emq__sentinel_watch {
    emq_conn_t *conn; /* the named one's; NULL: none (not behind
                         Sentinel, lost, or it could not be set up) */
    emq__hostport at; /* its address (host borrowed from the URL) */
    emq_conn_t *ears[EMQ_SENTINELS_MAX]; /* the others' (NULL: none) */
    emq__hostport ears_at[EMQ_SENTINELS_MAX];
    size_t nears;
    int epfd;              /* an epoll set of every connection above; -1 */
    int switched;          /* a Sentinel announced the master's switch away
                              from the primary, or named another one when the
                              watch was reopened: resolve again */
    char announced[300];   /* the primary a switch named ("" none) */
    int64_t failover_at;   /* when a failover was heard begun (0: none) */
    int64_t failover_ms;   /* the Sentinels' failover-timeout (0: unknown) */
    char failover_by[300]; /* the Sentinel that told it */
    int64_t listen_at;     /* when missing ears are opened again */
    int64_t lost_at;       /* when the named one ended (0: not lost); then
                              reopened from reopen_at on */
    int64_t reopen_at;     /* the next reopen's time */
    unsigned reopens;      /* reopens failed since lost_at */
    size_t next;           /* the Sentinel the next reopen asks */
    uint64_t rng;          /* backoff jitter */
    char by[300];          /* the named Sentinel (or last), for messages */
} emq__sentinel_watch;

/* What the Sentinels asked at one connect named as the master's
 * primary: each primary named, the most named first (ties: the first
 * named first), with the Sentinels that named it and a watch of the
 * first of them. emq__sentinel_pick_drop closes the watches left. */
typedef struct emq__sentinel_named {
    char host[256];
    int port;
    size_t votes;
    emq__hostport voters[EMQ_SENTINELS_MAX]; /* hosts borrowed from url */
    emq_conn_t *watch;                       /* NULL: none */
} emq__sentinel_named;

typedef struct emq__sentinel_pick {
    emq__sentinel_named named[EMQ_SENTINELS_MAX];
    size_t n;            /* primaries named */
    size_t asked;        /* Sentinels asked */
    size_t answered;     /* of them, those that named one */
    int64_t failover_ms; /* the failover-timeout they gave (0: none) */
} emq__sentinel_pick;

/* The name of the master the Sentinels watch: sentinel.master, else the
 * URL's #NAME (NULL when neither). */
const char *emq__sentinel_master_name(const emq__conn_options *opt,
                                      const emq__url *url);
/* Asks url's Sentinels for the primary of its master, for a connection
 * with options opt and effective TLS options tls, each in turn (at most
 * 1 s each, within deadline), until two have named one (one when url
 * lists one) and agree; when they disagree, every Sentinel is asked and
 * the primaries are ranked by how many named them (pick). The first to
 * answer moves to the front of url's Sentinels and teaches url the
 * Sentinels it knows. Each primary is read through sentinel.address_map.
 * EMQ_OK with pick->n >= 1; EMQ_EIO (retriable) when no Sentinel could
 * be asked, EMQ_EINVAL when every one that answered does not know the
 * master (or no master is named), EMQ_ENOMEM; pick then holds nothing. */
emq_status emq__sentinel_resolve(const emq__conn_options *opt, emq__url *url,
                                 const struct emq__tls_opts *tls,
                                 int64_t deadline, emq__sentinel_pick *pick,
                                 emq_error *err);
/* Closes the watches pick still holds. */
void emq__sentinel_pick_drop(emq__sentinel_pick *pick);
/* Writes what pick says into out ("127.0.0.1:6380 by 127.0.0.1:26379,
 * 127.0.0.1:26380; 127.0.0.1:6381 by 127.0.0.1:26381"), for a message. */
void emq__sentinel_pick_text(const emq__sentinel_pick *pick, char *out,
                             size_t size);
/* Makes w an empty watch (no connection, not lost): once, before use. */
void emq__sentinel_watch_init(emq__sentinel_watch *w);
/* Closes w's connections; w is then none, not lost. */
void emq__sentinel_watch_close(emq__sentinel_watch *w);
/* Makes conn (a Sentinel connection subscribed to the channels, NULL:
 * none) the named one of w, at at (host borrowed from the URL), with the
 * failover-timeout failover_ms the Sentinels gave (0: unknown). */
void emq__sentinel_watch_set(emq__sentinel_watch *w, emq_conn_t *conn,
                             const emq__hostport *at, int64_t failover_ms);
/* Opens w's ears: a connection, subscribed to the channels, to each
 * Sentinel of url that w does not hear yet, at most most of them now
 * (the mend opens one per look: each costs a look up to
 * SENTINEL_REOPEN_MS when its Sentinel does not answer), within
 * SENTINEL_REOPEN_MS each (best effort: one that cannot be opened, or
 * was left for later, is tried again after a while). */
void emq__sentinel_watch_listen(emq__sentinel_watch *w,
                                const emq__conn_options *opt,
                                const emq__url *url,
                                const struct emq__tls_opts *tls, size_t most);
/* Makes w a watch that was lost at now: reopened from the next
 * Sentinel on, after a backoff (first at once). */
void emq__sentinel_watch_lose(emq__sentinel_watch *w);
/* The descriptor to wait on for w's news (readable when any of its
 * connections is); -1 without a watch or once it switched. */
int emq__sentinel_watch_fd(const emq__sentinel_watch *w);
/* Reads what w's Sentinels sent (without waiting): sets w->switched
 * when one announced a switch of the master of opt and url to another
 * primary than url's, or sent something unreadable; starts or ends the
 * hold of a failover begun, ended or aborted. Announcements of other
 * masters the same Sentinels watch, and of a switch to the primary url
 * is already on (resolved while the failover was being announced), are
 * read and dropped. The named Sentinel's end leaves w lost
 * (emq__sentinel_watch_lose, told once through opt->log); an ear's end
 * closes it (opened again later). The data connection is kept. */
void emq__sentinel_watch_news(emq__sentinel_watch *w,
                              const emq__conn_options *opt,
                              const emq__url *url);
/* 1 when w announced a switch of the master away from url's primary
 * (reads what they sent, without waiting); 0 without a watch. A lost
 * watch whose reopen is due is reopened first, and missing ears opened
 * (emq__sentinel_watch_mend). */
int emq__sentinel_watch_switched(emq__sentinel_watch *w,
                                 const emq__conn_options *opt,
                                 const emq__url *url,
                                 const struct emq__tls_opts *tls);
/* When a failover heard begun stops holding commands (its start plus the
 * Sentinels' failover-timeout, 180 s when unknown); 0 when none is under
 * way (or w switched: nothing to hold, resolve again). */
int64_t emq__sentinel_watch_hold_until(const emq__sentinel_watch *w);
/* A failover held past hold_until: stop holding (told once through
 * opt->log: commands go where the Sentinels point). */
void emq__sentinel_watch_hold_over(emq__sentinel_watch *w,
                                   const emq__conn_options *opt,
                                   const emq__url *url);
/* A lost watch whose reopen is due: asks one Sentinel (the next in turn,
 * within SENTINEL_REOPEN_MS) for the primary, subscribed before the
 * question. Naming url's primary: w watches it again (told at info level).
 * Naming another: w->switched. No answer: the next Sentinel after a
 * backoff (up to 10 s). Also opens missing ears when due. Blocks for at
 * most one question per Sentinel asked; the data connection is never
 * touched. */
void emq__sentinel_watch_mend(emq__sentinel_watch *w,
                              const emq__conn_options *opt, const emq__url *url,
                              const struct emq__tls_opts *tls);

/* ---- conn.c ----------------------------------------------------------- */

/* Writes the endpoint name of host and port into out (size bytes):
 * "host:port", or "[host]:port" for an IPv6 address. */
void emq__conn_endpoint_name(const char *host, int port, char *out,
                             size_t size);

/* emq_conn_new with typed options (copied): the library's way to connect;
 * emq_conn_new is this with emq__conn_options_of(conf). Fails as
 * emq_conn_new does. */
emq_status emq__conn_open(const emq__conn_options *opts, emq_conn_t **out,
                          emq_error *err);

/* Extra time, in ms, to wait for the reply of a blocking command beyond
 * the command timeout: XREAD/XREADGROUP ... BLOCK ms, the timeout seconds
 * of BLPOP, BRPOP, BLMOVE, BRPOPLPUSH, BZPOPMIN, BZPOPMAX, BLMPOP, BZMPOP,
 * and the ms of WAIT/WAITAOF. Returns 0 for a non-blocking command (or an
 * argument the server will refuse anyway) and -1 when the command may
 * block forever (a zero timeout). */
int64_t emq__conn_block_ms(int argc, const char *const *argv,
                           const size_t *argvlen);

/* Writes what is appended to conn now, without reading any reply (the
 * replies are read later, in order, as usual), so the server works on it
 * while the caller does something else. Bounded by command_timeout_ms.
 * EMQ_OK (also with nothing appended), or the failure that broke conn.
 * One thread at a time, as every call on conn. */
emq_status emq__conn_send(emq_conn_t *conn, emq_error *err);

/* A stop the waits of a connection watch (emq__conn_set_cancel). */
typedef struct emq__conn_cancel {
    /* Read, never written; must outlive its use. NULL: none (the
     * default). */
    const atomic_int *flag;
    /* Once *flag is non-zero, a reply overdue by this long past the
     * command's own blocking time is given up: the read fails with
     * EMQ_ECLOSED and the connection is broken, so a stop is not held up
     * by a stalled server for command_timeout_ms. */
    int64_t grace_ms;
    /* Called (NULL: nothing) from the waiting thread the first time a
     * wait for a blocking command's reply (XREADGROUP ... BLOCK) sees
     * *flag set, once per such reply: whoever can end the block from
     * another connection (CLIENT UNBLOCK) is told to now, not when the
     * block times out. */
    void (*on_stop)(void *ctx);
    void *ctx;
    /* With on_stop: a descriptor that turns readable when *flag is set
     * (-1: none). A wait for a blocking command's reply then sleeps until
     * the reply, its deadline or this, and sees the stop at once; without
     * it, every wait looks at *flag every 50 ms. Watched, never read; a
     * wait that finds it readable with *flag clear (a stop since
     * cleared) goes on in slices. */
    int wake_fd;
} emq__conn_cancel;

/* Makes c's waits watch *cancel (copied; NULL: none). */
void emq__conn_set_cancel(emq_conn_t *c, const emq__conn_cancel *cancel);

/* The server's id of c's connection (CLIENT ID), learned at the last
 * handshake when options.learn_client_id is 1; 0 when not known (not
 * asked, refused by an ACL, or not connected). */
int64_t emq__conn_client_id(const emq_conn_t *c);
/* 1 when the last handshake found opts.library on the server
 * (there already, or loaded by it): scripts go by FCALL. 0 otherwise:
 * scripts go by EVAL, and *why (when why is not NULL) says why in one
 * clause ("" when the server has no functions, or none were asked: no
 * news). The text lives until the next handshake. Any thread that owns c. */
int emq__conn_functions(const emq_conn_t *c, const char **why);

/* 1 when conn cannot serve the next command as it stands: broken, or
 * idle (nothing appended, no reply due) while its socket is readable,
 * which on an idle connection means the peer closed it (a server restart,
 * a timeout of idle clients) or sent what nobody asked for. Asked before
 * a command goes out on a connection that may have sat idle, so that it
 * is replaced before, not after, the command is lost with it. Behind
 * Sentinel also 1 once the Sentinel the connection watches announced a
 * switch of its master (+switch-master) or closed: the next connect
 * resolves again; announcements of other masters are read and dropped.
 * Never blocks; reads nothing from conn itself. The thread that uses
 * conn. */
int emq__conn_went_away(emq_conn_t *conn);

/* 1 when the whole next reply is in the reply buffer, reading what
 * arrives for up to ms (0: what is there now, never waiting); also when
 * the connection failed or a stop was asked (the read that follows says
 * which); 0 when more of it must come. Scans what it reads, never builds
 * a reply. The thread that uses conn. */
int emq__conn_reply_whole(emq_conn_t *conn, int64_t ms);

/* The endpoint conn is connected to, "host:port", "[v6]:port" or
 * "unix:/path" (behind Sentinel: the primary resolved last). Valid until
 * conn's next reconnect or destroy. The thread that uses conn. */
const char *emq__conn_name(const emq_conn_t *conn);

/* When the first bytes of the last reply read arrived (emq__now_ms), or
 * earlier when they shared a read with the reply before: a bound, close
 * to its send, on when the server ran the command. A reply of megabytes
 * takes long to arrive whole, and what the server did at its start (an
 * entry's idle time began) is then that much older. 0 before any reply.
 * The thread that reads conn. */
int64_t emq__conn_reply_began_ms(const emq_conn_t *conn);

/* 1 when the Sentinel conn watches announced a switch of its master
 * (+switch-master) or closed, as emq__conn_went_away found: the reason it
 * said 1, for a log line. 0 without Sentinel. The thread that uses
 * conn. */
int emq__conn_switch_announced(const emq_conn_t *conn);

/* For a connection that only listens (a Sentinel watch): reads what its
 * transport has now into its reader, never waiting, and at most about
 * most bytes (a peer that floods it holds no caller). 0 when it read all
 * there was or most; -1 when the peer closed, a read failed or c is not
 * connected (c is not broken by it). */
int emq__conn_read_now(emq_conn_t *c, size_t most);
/* The next whole reply among what emq__conn_read_now read: EMQ_OK with
 * *reply caller-owned, EMQ_EAGAIN when none is whole yet, or the
 * reader's error (a protocol error: nothing more is readable). */
emq_status emq__conn_take_read(emq_conn_t *c, emq_reply **reply,
                               emq_error *err);

/* 1 while conn is broken because a reply grew past resp.max_reply_bytes
 * (its status EMQ_EPROTO; emq__resp_over_max_reply), 0 while healthy,
 * after a reconnect, and for every other failure: how a caller tells a
 * well-formed but too large reply (a smaller request may fit) from a
 * broken peer without matching the message. Any thread that may read
 * conn. */
int emq__conn_reply_too_large(const emq_conn_t *conn);

#endif /* EMQ_CONN_H */
