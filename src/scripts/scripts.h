/* SPDX-License-Identifier: BSD-3-Clause */
/* scripts.h: echomq's server-side scripts, as one function library.
 *
 * Internal header (not installed). Every script echomq runs in the
 * server is here, by id, and nowhere else. On servers with functions
 * (Redis 7.0+, Valkey) they are one library, echomq_<version>, loaded
 * with FUNCTION LOAD (by `echomq functions load`, or by the first
 * connection whose user may) and called with FCALL: no script text on the
 * wire, and no credential needs EVAL, which runs any code. Elsewhere (6.2,
 * or a user who may not call the functions) the same text goes with EVAL.
 * Which of the two a connection uses is decided at its handshake
 * (conn.c, from the probe below); a caller asks its session and takes the
 * head words from emq__script_head.
 *
 * The version is in every name, so two versions of echomq can run
 * against one server during an upgrade: each calls its own library.
 * Changing any script's text needs a new EMQ_LIBRARY_VERSION (the unit
 * test test_scripts pins the digest of each version's text).
 */
#ifndef EMQ_SCRIPTS_H
#define EMQ_SCRIPTS_H

#include "../keys/keys.h" /* layers below: cluster, conn, resp, base */

/* The library's version: in its name and in every function's. */
#define EMQ_LIBRARY_VERSION "1"
#define EMQ_LIBRARY_NAME "echomq_" EMQ_LIBRARY_VERSION
/* Every function's name starts with this. */
#define EMQ_FUNCTION_PREFIX "emq" EMQ_LIBRARY_VERSION "_"
/* The function a handshake calls (FCALL <probe> 0): it answers the
 * digest of the library's text (emq__library_digest), so a connection
 * knows the library is there and is this build's. */
#define EMQ_LIBRARY_PROBE EMQ_FUNCTION_PREFIX "library"

typedef enum emq__script_id {
    /* streams: entries beside the stream */
    EMQ_SCRIPT_ADD,
    EMQ_SCRIPT_DELAYED_MOVE,
    EMQ_SCRIPT_DELAYED_CANCEL,
    /* consumer: the name's lease */
    EMQ_SCRIPT_LEASE_ACQUIRE,
    EMQ_SCRIPT_LEASE_RENEW,
    EMQ_SCRIPT_LEASE_TAKEOVER,
    EMQ_SCRIPT_LEASE_RELEASE,
    /* consumer: settling and keeping entries */
    EMQ_SCRIPT_RETRY,
    EMQ_SCRIPT_DEADLETTER,
    EMQ_SCRIPT_RELEASE,
    EMQ_SCRIPT_REFRESH,
    EMQ_SCRIPT_INHAND_PUBLISH,
    EMQ_SCRIPT_MARK,
    /* consumer: taking entries */
    EMQ_SCRIPT_CLAIM,
    EMQ_SCRIPT_TAKE_DUE,
    EMQ_SCRIPT_RETRY_WAITS,
    EMQ_SCRIPT_GRANT,
    EMQ_SCRIPT_GRANT_COUNT,
    /* admin */
    EMQ_SCRIPT_PRUNE,
    EMQ_SCRIPT_TRIM_ACKED,
    EMQ_SCRIPT_REQUEUE,
    EMQ_SCRIPT_DEAD_PURGE,
    EMQ_SCRIPT_ORPHANS,
    EMQ_SCRIPT_COUNT
} emq__script_id;

/* The two words that call script id, before its key count: {"FCALL",
 * the function's name} when functions is 1 (the connection has this
 * library: emq__session_functions), else {"EVAL", its text}. Static
 * strings. Any thread. */
void emq__script_head(emq__script_id id, int functions, const char *words[2]);
/* The function's name of script id ("emq1_lease_acquire"). Static. */
const char *emq__script_function(emq__script_id id);
/* The text FUNCTION LOAD takes ("#!lua name=echomq_1" and every script as
 * a function, then the probe). Built once, static; any thread. NULL
 * only if it outgrew its room (test_scripts checks that it does not):
 * connections then use EVAL. */
const char *emq__library_text(void);
/* 16 lowercase hex digits: a digest (FNV-1a 64) of the library's text
 * before the probe, which the probe answers. Static; any thread. */
const char *emq__library_digest(void);

/* A delayed entry's handle: this prefix, then twelve or more digits (the
 * add script makes them). */
#define EMQ_DELAYED_PREFIX "delayed-"
/* Most field names and values the dead-letter script copies itself: it
 * passes them to XADD through Lua's unpack, whose stack holds about 8000
 * values (LUAI_MAXCSTACK). A wider entry is written by the consumer
 * (emq__settle_finish): the script answers {2, reason, deliveries} and
 * does nothing else. */
#define EMQ_DEAD_SCRIPT_MAX_ARGS 7000
#define EMQ_DEAD_SCRIPT_MAX_ARGS_TEXT "7000"
/* A group limit (rate, max_in_flight) as a hash field holds it: 1 to
 * EMQ_LIMIT_DIGITS_MAX decimal digits. Anything else a hand (or a lower
 * role) wrote there ("0.5", "-1", " 5", a huge number) is none, for the
 * scripts and the C side (emq__limit_value) alike. */
#define EMQ_LIMIT_DIGITS_MAX 9

#endif /* EMQ_SCRIPTS_H */
