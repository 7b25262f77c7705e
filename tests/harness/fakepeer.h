/* SPDX-License-Identifier: BSD-3-Clause */
/* fakepeer.h: a misbehaving Redis peer on loopback, for transport tests.
 *
 * A fake peer is one thread listening on 127.0.0.1 at a free port. Every
 * connection it accepts plays the scripted misbehaviour of its mode. It
 * parses incoming commands (RESP arrays or inline lines) so it can answer
 * the handshake a client may send (HELLO gets an "unknown command" error
 * like an old server; every other command "+OK", PING "+PONG") and
 * misbehave only on the trigger command (or on every command when the
 * trigger is NULL). The proxy mode forwards bytes to a real server and can
 * be told to cut every connection or to freeze forwarding.
 *
 * Every wait is bounded; emq_peer_stop joins the thread and closes every
 * socket. The peer uses plain malloc (it is not the library).
 */
#ifndef EMQ_TEST_FAKEPEER_H
#define EMQ_TEST_FAKEPEER_H

#include <stddef.h>

typedef enum emq_peer_mode {
    EMQ_PEER_SILENT = 1,  /* accept, read and discard, never answer */
    EMQ_PEER_CLOSE,       /* accept and close at once */
    EMQ_PEER_REPLY,       /* answer each trigger command with the raw bytes */
    EMQ_PEER_REPLY_CLOSE, /* send the bytes, then close the connection */
    EMQ_PEER_REPLY_STALL, /* send the bytes, then never send or read again */
    EMQ_PEER_PROXY,       /* forward to 127.0.0.1:upstream_port */
    EMQ_PEER_REPLY_FLOOD, /* send the bytes, then the flood unit again and
                             again as fast as the client reads, until it
                             closes (an endless reply, a storm) */
    EMQ_PEER_SENTINEL     /* a Sentinel of one master (sentinel_master):
                             SENTINEL get-master-addr-by-name names
                             127.0.0.1:primary_port, SENTINEL sentinels
                             none, SUBSCRIBE subscribes; with
                             switch_to_port, the first answer is followed
                             at once by a +switch-master to that port (a
                             failover while the client connects) */
} emq_peer_mode;

typedef struct emq_peer_opts {
    emq_peer_mode mode;
    const char *reply;   /* raw bytes for the REPLY modes */
    size_t reply_len;    /* 0: strlen(reply) */
    const char *trigger; /* command name (case-insensitive) that triggers
                            the misbehaviour; NULL: every command. In
                            SILENT mode a trigger means: answer the others */
    int upstream_port;   /* PROXY only */
    const char *flood;   /* REPLY_FLOOD: the unit repeated after reply */
    size_t flood_len;    /* 0: strlen(flood); must divide 65536 */
    int flood_pace_ms;   /* pause after each 64 KiB of flood (0: none) */
    const char *sentinel_master; /* SENTINEL: the master's name */
    int primary_port;            /* SENTINEL: the primary it names first */
    int switch_to_port;      /* SENTINEL: 0, or switch after the first answer */
    int failover_timeout_ms; /* SENTINEL: given in SENTINEL master (0: an
                                empty reply) */
    int switch_channels_only; /* SENTINEL: a SUBSCRIBE naming a failover
                                 step is refused with NOPERM (an ACL that
                                 grants +switch-master and +promoted-slave
                                 only) */
} emq_peer_opts;

typedef struct emq_peer emq_peer;

/* Starts the peer thread; fails the test when it cannot. */
emq_peer *emq_peer_start(const emq_peer_opts *opts);
/* Stops the thread (bounded), closes every socket and frees p. NULL is a
 * no-op. */
void emq_peer_stop(emq_peer *p);
/* "redis://127.0.0.1:PORT". Valid until emq_peer_stop. */
const char *emq_peer_url(const emq_peer *p);
int emq_peer_port(const emq_peer *p);
/* REPLY_FLOOD: bytes of flood sent so far, over all connections. */
long long emq_peer_flooded(const emq_peer *p);
/* Connections accepted so far. */
int emq_peer_accepted(const emq_peer *p);
/* Commands parsed so far, over all connections (not counted in PROXY). */
int emq_peer_commands(const emq_peer *p);
/* Name of the last command parsed (upper-cased, "" if none), copied. */
void emq_peer_last_command(const emq_peer *p, char *out, size_t size);

/* PROXY: closes every open connection (both sides) now; new connections
 * are still accepted and forwarded. Returns once done (bounded). */
void emq_peer_drop(emq_peer *p);
/* PROXY: 1 freezes forwarding in both directions (bytes pile up in the
 * kernel; connections stay open), 0 resumes. Takes effect before return. */
void emq_peer_freeze(emq_peer *p, int on);
/* PROXY: the connections open now stop forwarding for good, both ways,
 * and stay open (a half-open link, a NAT that dropped its mapping); new
 * connections are forwarded as before. Takes effect before return. */
void emq_peer_stall_open(emq_peer *p);
/* PROXY: after each full 16 KiB read of what a server sent, pause ms (0:
 * no pause): a reply of megabytes then takes seconds to arrive, short
 * ones come at once. Takes effect before return. */
void emq_peer_pace(emq_peer *p, int ms);

/* SENTINEL: announces +switch-master of its master from the primary it
 * names to 127.0.0.1:port on every subscribed connection, and names that
 * one from now on. Returns once sent (bounded). */
void emq_peer_sentinel_switch(emq_peer *p, int port);
/* SENTINEL: sends count messages on +switch-master, each with a payload
 * of "other " and bytes of 'x', to every subscribed connection; returns
 * once sent (each send waits at most 2 s for room, then that connection
 * is closed). */
void emq_peer_sentinel_flood(emq_peer *p, int count, size_t bytes);
/* SENTINEL: names 127.0.0.1:port from now on, announcing nothing (a
 * failover its watchers did not hear of). */
void emq_peer_sentinel_name(emq_peer *p, int port);
/* SENTINEL: sends a message on channel (e.g. "+try-failover", payload
 * "master mymaster 127.0.0.1 6379") to every subscribed connection.
 * Returns once sent (bounded). */
void emq_peer_sentinel_publish(emq_peer *p, const char *channel,
                               const char *payload);
/* SENTINEL: get-master-addr-by-name questions answered so far. */
int emq_peer_sentinel_asked(const emq_peer *p);

/* ---- intercepting proxy ------------------------------------------------
 *
 * A proxy to a real server that parses the client's commands and the
 * server's replies, forwards every command (so the server really runs it),
 * and replaces the server's reply to a matching command with scripted
 * bytes. Order and pipelining are kept: replies are matched to commands
 * one by one. Every command seen is recorded (its arguments joined by
 * spaces, each argument cut at 200 bytes) so a test can check what the
 * client sent. One thread, poll(2) in 100 ms rounds; emq_icept_stop joins
 * it. */
typedef struct emq_icept_rule {
    const char *command;  /* command name, case-insensitive */
    int last_arg_gt;      /* 1: only when the last argument is ">"; 0: only
                             when it is not; -1: either */
    const char *reply;    /* raw RESP bytes sent instead of the reply;
                             NULL (with delay_ms): the server's reply */
    size_t reply_len;     /* 0: strlen(reply) */
    int times;            /* matches to replace; -1: every one */
    const char *contains; /* NULL, or text the recorded command line must
                             hold (e.g. a word of a script) */
    int delay_ms;         /* > 0: the command, and what the client sent
                             after it on that connection, wait this long in
                             the proxy before they go up (recorded then) */
} emq_icept_rule;

typedef struct emq_icept emq_icept;

/* Starts the proxy to 127.0.0.1:upstream_port with n rules (copied; the
 * first matching rule with uses left wins). Fails the test when it cannot. */
emq_icept *emq_icept_start(int upstream_port, const emq_icept_rule *rules,
                           size_t n);
void emq_icept_stop(emq_icept *p);
const char *emq_icept_url(const emq_icept *p);
/* REPLY_FLOOD: bytes of flood sent so far, over all connections. */
long long emq_peer_flooded(const emq_peer *p);
/* Connections accepted so far. */
int emq_icept_accepted(const emq_icept *p);
/* Commands a rule's delay_ms holds in the proxy now. */
int emq_icept_held(const emq_icept *p);
/* 1: the server's replies wait upstream (commands still go up); 0:
 * they flow again. The proxy is woken to see it; replies it is passing
 * on at that moment still go. */
void emq_icept_hold(emq_icept *p, int on);
/* The most reads of new entries (XREADGROUP ... >) one connection had
 * sent to the server and not yet had answered, at any moment so far. */
int emq_icept_most_reads(const emq_icept *p);
/* Replies replaced so far. */
int emq_icept_replaced(const emq_icept *p);
/* 1 when one recorded command line contains needle and needle2 (NULL:
 * only needle). */
int emq_icept_saw(const emq_icept *p, const char *needle, const char *needle2);

#endif /* EMQ_TEST_FAKEPEER_H */
