/* SPDX-License-Identifier: BSD-3-Clause */
/* echomq.h: the one public header of libechomq.
 *
 * echomq gives C programs reliable, at-least-once work queues on Redis and
 * Valkey Streams consumer groups. This header declares opaque handles, one
 * status type, one error struct, and accessor functions. Every function that
 * can fail returns an emq_status and fills an optional caller-owned
 * emq_error. Each declaration states who owns what it returns.
 *
 * Threads, handle by handle (each handle's section says it again):
 *   emq_conf_t      one thread at a time; a conf is copied by every handle
 *                   made from it, so it may be changed or freed after.
 *   emq_conn_t      one thread at a time.
 *   emq_producer_t  any number of threads at once (they share its
 *                   connection's round trips); destroy when no call runs.
 *   emq_consumer_t  run on one thread; stop from any thread or a signal
 *                   handler; poll, ack, retry, dead, stats, pause and
 *                   resume from any threads at once.
 *   emq_pool_t      run on one thread; stop from any thread or a signal
 *                   handler.
 *   emq_admin_t     one thread at a time.
 *   Replies and entries may be freed on any thread. Distinct handles may be
 *   used on distinct threads without locking.
 *
 * ABI policy. The shared library's SONAME names the releases that may
 * break the ABI: libechomq.so.0.<minor> before 1.0 (0.1, 0.2, ... each a
 * SONAME of its own, since a 0.x minor release may break), then
 * libechomq.so.<major>. 0.1.0 is the first release and the baseline:
 * abi/libechomq.abi records its ABI. Within one SONAME a program built
 * against an older release runs with a newer library, because:
 *   - no exported function is removed or changes its signature or its
 *     meaning (functions may be added);
 *   - no enum constant changes its value, nor a macro that sizes or
 *     encodes something (EMQ_ERROR_MESSAGE_MAX, EMQ_ID_MAX,
 *     EMQ_PRIORITY_LEVELS, EMQ_REQUEUE_FORCE, ...; the version macros
 *     and EMQ_PRODUCE_OPTS_VERSION count up);
 *   - no public struct changes its size, or the offset, type or meaning
 *     of a member. This holds for every struct of this header, whoever
 *     allocates it, alone or in an array (a program indexes an array by
 *     the element size it was built with). Handles (emq_conf_t,
 *     emq_conn_t, ...) are opaque and change freely.
 * Room to grow. A struct that may gain members ends with reserved room:
 * members named reserved, in 8-byte words (uint64_t), and reserved32
 * where a 4-byte gap comes before them. 8 words: emq_consumer_stats,
 * emq_queue_info. 4 words: emq_error (and reserved32), emq_server,
 * emq_produce_opts, emq_delivery, emq_entry, emq_group_info,
 * emq_prune_result, emq_trim_result. 2 words: emq_outcome (and
 * reserved32), emq_consumer_info, emq_delayed_info, emq_priority_info,
 * emq_pending_entry, emq_dead_letter (and reserved32). A new member
 * takes words of the room, so the size and every other offset stay as
 * they are, and its 0 means what the struct meant without it. The
 * library writes 0 in the room of every struct it fills. A caller that
 * fills one for the library (emq_entry, emq_produce_opts) starts from
 * zero (= {0}, designated initializers, EMQ_PRODUCE_OPTS_INIT); the
 * library reads a new member of emq_produce_opts only when its version
 * says the caller knows it. The other structs (emq_field, emq_id,
 * emq_message, emq_keyed_message, emq_group_limits) are fixed for the
 * SONAME: what they cannot hold comes as a new struct with new
 * functions. A struct whose room is spent grows only with a new SONAME;
 * so does any other change these rules forbid, and CHANGELOG.md says so.
 * Checks: tests/unit/test_abi_layout.c pins the size, member offsets
 * and room of every public struct (LP64), and CI's abi stage compares
 * each build's exported symbols and types with abi/libechomq.abi
 * (scripts/abi.sh; added functions pass). A member taken from the room
 * updates both in its commit, with a CHANGELOG.md line. "Added in X.Y"
 * notes name the release (EMQ_VERSION_MAJOR.MINOR) that first has a
 * declaration or member; what has no such note is in 0.1.0.
 */
#ifndef ECHOMQ_H
#define ECHOMQ_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(EMQ_BUILDING_LIBRARY) && defined(__GNUC__)
#define EMQ_EXPORT __attribute__((visibility("default")))
#else
#define EMQ_EXPORT
#endif

/* ---- version -------------------------------------------------------- */

#define EMQ_VERSION_MAJOR 0
#define EMQ_VERSION_MINOR 1
#define EMQ_VERSION_PATCH 0
/* 0xMMmmpp: compare with >= to test for a feature at compile time. */
#define EMQ_VERSION_HEX                                                        \
    ((EMQ_VERSION_MAJOR << 16) | (EMQ_VERSION_MINOR << 8) | EMQ_VERSION_PATCH)
#define EMQ_VERSION_STRING "0.1.0"

/* The EMQ_VERSION_HEX of the library actually loaded at run time. */
EMQ_EXPORT unsigned emq_version(void);
/* The version as text, e.g. "0.1.0". Static storage; never NULL. */
EMQ_EXPORT const char *emq_version_str(void);

/* ---- clock ------------------------------------------------------------ */

/* Milliseconds of the monotonic clock (CLOCK_MONOTONIC: never steps back,
 * not wall time; its zero is arbitrary): the clock every timeout, lease
 * and backoff of the library is measured by, for a caller's own deadlines
 * and rates to agree with them. Cannot fail; any thread; async-signal-safe
 * (clock_gettime). */
EMQ_EXPORT int64_t emq_clock_ms(void);

/* ---- status and errors ---------------------------------------------- */

/* Every failing call returns one of these negative categories. A reply that
 * is a server error (-BUSYGROUP ..., -WRONGTYPE ...) is NOT a failure at the
 * connection layer: it comes back as a reply of type EMQ_REPLY_ERROR. A
 * higher layer that fails because of such a reply returns EMQ_ESERVER with
 * the reply text in the emq_error message. */
/* Every status, written once: X(name, value, what emq_strerror says).
 * The enum below and emq_strerror / emq_status_name are made from it. */
#define EMQ_STATUSES(X)                                                        \
    X(EMQ_OK, 0, "success")                                                    \
    /* bad argument, configuration or URL */                                   \
    X(EMQ_EINVAL, -1, "invalid argument or configuration")                     \
    /* an allocation failed */                                                 \
    X(EMQ_ENOMEM, -2, "out of memory")                                         \
    /* the peer broke the protocol or a reply limit */                         \
    X(EMQ_EPROTO, -3, "protocol error from the server")                        \
    /* transport failure: refused, reset, closed */                            \
    X(EMQ_EIO, -4, "connection failed or was lost")                            \
    /* connect or command timeout expired */                                   \
    X(EMQ_ETIMEDOUT, -5, "timed out")                                          \
    /* TLS handshake or certificate failure */                                 \
    X(EMQ_ETLS, -6, "TLS failure")                                             \
    /* authentication refused (NOAUTH, WRONGPASS) */                           \
    X(EMQ_EAUTH, -7, "authentication failed")                                  \
    /* the server answered with an error reply (emq_error.reply_code) */       \
    X(EMQ_ESERVER, -8, "the server replied with an error")                     \
    /* a named local limit would be exceeded */                                \
    X(EMQ_ELIMIT, -9, "a configured limit would be exceeded")                  \
    /* the handle is broken or closed; reconnect */                            \
    X(EMQ_ECLOSED, -10, "connection is closed or broken")                      \
    /* host name could not be resolved */                                      \
    X(EMQ_ERESOLVE, -11, "host name could not be resolved")                    \
    /* no complete result yet (incremental APIs) */                            \
    X(EMQ_EAGAIN, -12, "no complete result yet")                               \
    /* an entry handed out was taken over by another consumer (its             \
     * ownership could not be kept) */                                         \
    X(EMQ_ELOST, -13, "the entry was taken over by another consumer")          \
    /* written (the ID is set), but not confirmed on producer.wait_replicas    \
     * replicas or the AOF in producer.wait_timeout_ms */                      \
    X(EMQ_ENOTDURABLE, -14, "written, but not confirmed durable in time")

typedef enum emq_status {
#define EMQ_STATUS_ENUM(name, value, text) name = value,
    EMQ_STATUSES(EMQ_STATUS_ENUM)
#undef EMQ_STATUS_ENUM
} emq_status;

#define EMQ_ERROR_MESSAGE_MAX 256
/* Bytes of emq_error.reply_code, with its NUL. */
#define EMQ_ERROR_CODE_MAX 32

/* Caller-owned error detail. Pass NULL wherever you do not need it. */
typedef struct emq_error {
    emq_status code; /* EMQ_OK when nothing failed */
    int retriable;   /* 1: the same call may succeed later (timeout, reset) */
    char message[EMQ_ERROR_MESSAGE_MAX]; /* one sentence for a human */
    /* When an error reply caused the failure: the server's error code, the
     * reply's first word ("NOGROUP", "WRONGTYPE", "NOPERM", "BUSY", ...),
     * for a program to compare instead of matching the message. Mostly
     * with EMQ_ESERVER; also EMQ_EAUTH (a refused login), EMQ_EINVAL (a
     * database the server lacks), a retriable EMQ_EIO (LOADING, READONLY)
     * and EMQ_ELIMIT when a bound of the library (cluster.max_redirects,
     * cluster.retry_ms) ended retrying a command: the last reply's code.
     * "" when no error reply was involved. */
    char reply_code[EMQ_ERROR_CODE_MAX];
    /* 1 when the error ended the handle's work for good, as librdkafka's
     * rd_kafka_error_is_fatal: a consumer's run (or its pull thread)
     * stopped on it, or a producer refuses every later call with it (its
     * server refused the configuration). Calling again on the handle does
     * not help until what the message names is fixed; make a new handle.
     * 0 for everything a later call may get past (retriable or not). */
    unsigned fatal;
    /* Room for members to come (the ABI policy at the top); the library
     * writes 0 there whenever it sets an error. */
    uint32_t reserved32;
    uint64_t reserved[4];
} emq_error;

/* A short description of a status. Static storage; never NULL, also for
 * values that are not an emq_status. */
EMQ_EXPORT const char *emq_strerror(emq_status status);
/* The symbolic name of a status, e.g. "EMQ_ETIMEDOUT". Never NULL. */
EMQ_EXPORT const char *emq_status_name(emq_status status);

/* ---- configuration ---------------------------------------------------- */

/* One configuration object, set by property name. The property table is in
 * docs/CONFIGURATION.md (generated from the library). Threads: one at a
 * time; every handle copies the conf it is made from. */
typedef struct emq_conf emq_conf_t;

/* Returns a conf with every default; NULL only when out of memory.
 * Caller owns the result; free with emq_conf_destroy. */
EMQ_EXPORT emq_conf_t *emq_conf_new(void);
/* Caller owns the copy; NULL when out of memory. */
EMQ_EXPORT emq_conf_t *emq_conf_dup(const emq_conf_t *conf);
/* Frees conf; NULL is a no-op. Wipes secrets before freeing. */
EMQ_EXPORT void emq_conf_destroy(emq_conf_t *conf);
/* Sets property name to value (copied). EMQ_EINVAL names the property and
 * why the value is refused; a value for "password" is never echoed. On
 * failure the conf is unchanged. */
EMQ_EXPORT emq_status emq_conf_set(emq_conf_t *conf, const char *name,
                                   const char *value, emq_error *err);
/* Copies the current value of property name into buf (NUL-terminated,
 * truncated to size). The password reads back as "(set)" or "". */
EMQ_EXPORT emq_status emq_conf_get(const emq_conf_t *conf, const char *name,
                                   char *buf, size_t size, emq_error *err);
/* Describes property index i (0-based) of the table: name, default and one
 * line of documentation, all static storage. Returns EMQ_EINVAL past the
 * end. Used to generate docs/CONFIGURATION.md. */
EMQ_EXPORT emq_status emq_conf_property(size_t i, const char **name,
                                        const char **default_value,
                                        const char **doc);
/* Which part of the library reads property i: "conn" or "cluster" (the
 * connections of every handle), "keys" (every handle's queue),
 * "producer", "consumer", or "all"; NULL past the end. Static storage. */
EMQ_EXPORT const char *emq_conf_property_readers(size_t i);
/* The bounds, inclusive, of integer property i: emq_conf_set refuses a
 * value outside [*min, *max] with EMQ_EINVAL naming the property and both
 * bounds (docs/CONFIGURATION.md prints them from here). Either pointer may
 * be NULL. Returns EMQ_EINVAL when i is past the end or the property does
 * not take an integer. Thread-safe (static table). */
EMQ_EXPORT emq_status emq_conf_property_range(size_t i, int64_t *min,
                                              int64_t *max);

/* Levels of log messages (syslog numbering). */
typedef enum emq_log_level {
    EMQ_LOG_ERROR = 3,
    EMQ_LOG_WARNING = 4,
    EMQ_LOG_INFO = 6,
    EMQ_LOG_DEBUG = 7
} emq_log_level;

/* Receives one log line (no trailing newline), on the thread that logs. */
typedef void (*emq_log_fn)(void *opaque, emq_log_level level,
                           const char *message);
/* Routes the log lines of every handle made from conf to fn (NULL: the
 * default, one line on stderr). Lines above conf's log.level are not
 * produced. Messages never contain a password. */
EMQ_EXPORT void emq_conf_set_log(emq_conf_t *conf, emq_log_fn fn, void *opaque);

/* Receives a consumer's statistics every stats.interval_ms (0, the
 * default: never), as one JSON object of len bytes (valid during the call):
 * the counters of emq_consumer_stats_json, then
 *   "handler_latency_us":{"count":N,"p50":N,"p99":N}  how long entries
 *       were out: a handler call (run, batch), or from emq_consumer_poll to
 *       the settlement (pull mode; millisecond precision), since the start;
 *   "deliveries":{"1":N,"2":N,"3":N,"4-5":N,"6-10":N,"11+":N}  entries
 *       handed out by their delivery count;
 *   "lag":N  entries of the stream not yet delivered to the group (null
 *       when the server does not say: Redis 6.2);
 *   "oldest_pending_ms":N  how long the group's oldest pending entry has
 *       been idle (null when nothing is pending).
 * Runs on the consumer's upkeep thread (a topic consumer: each partition's,
 * with that partition's numbers). Must return quickly. */
typedef void (*emq_stats_fn)(void *opaque, const char *json, size_t len);
EMQ_EXPORT void emq_conf_set_stats(emq_conf_t *conf, emq_stats_fn fn,
                                   void *opaque);

/* ---- replies ---------------------------------------------------------- */

/* A reply tree from the server. Read it through the accessors below. The
 * strings are views into the received bytes (no copy) and stay valid until
 * the reply is freed. A reply is independent of the connection that read
 * it: it may outlive it and may be freed on another thread. */
typedef struct emq_reply emq_reply;

typedef enum emq_reply_type {
    EMQ_REPLY_STRING = 1,   /* bulk string '$' */
    EMQ_REPLY_STATUS = 2,   /* simple string '+' */
    EMQ_REPLY_ERROR = 3,    /* simple '-' or blob '!' error */
    EMQ_REPLY_INTEGER = 4,  /* ':' */
    EMQ_REPLY_NULL = 5,     /* '_', and RESP2 '$-1' and '*-1' */
    EMQ_REPLY_ARRAY = 6,    /* '*' */
    EMQ_REPLY_MAP = 7,      /* '%': elements alternate key, value */
    EMQ_REPLY_SET = 8,      /* '~' */
    EMQ_REPLY_PUSH = 9,     /* '>' out-of-band message */
    EMQ_REPLY_DOUBLE = 10,  /* ',' */
    EMQ_REPLY_BOOL = 11,    /* '#' */
    EMQ_REPLY_BIGNUM = 12,  /* '(' kept as its decimal text */
    EMQ_REPLY_VERBATIM = 13 /* '=' text with a 3-letter format */
} emq_reply_type;

EMQ_EXPORT emq_reply_type emq_reply_kind(const emq_reply *r);
/* Text of STRING, STATUS, ERROR, BIGNUM, VERBATIM (without "fmt:") and the
 * source text of DOUBLE; NULL for other types. *len gets its length (may be
 * NULL). Borrowed; valid until the reply tree is freed. Not NUL-terminated
 * in general: always use the length. */
EMQ_EXPORT const char *emq_reply_str(const emq_reply *r, size_t *len);
/* INTEGER value, or BOOL as 0/1; 0 for other types. */
EMQ_EXPORT long long emq_reply_integer(const emq_reply *r);
/* DOUBLE value; 0.0 for other types. */
EMQ_EXPORT double emq_reply_double(const emq_reply *r);
/* Number of elements of ARRAY, SET, PUSH, and MAP (counting keys and
 * values: a map of 2 pairs has 4); 0 for other types. */
EMQ_EXPORT size_t emq_reply_len(const emq_reply *r);
/* Element i of an aggregate, or NULL when out of range or not aggregate.
 * Borrowed from r. */
EMQ_EXPORT const emq_reply *emq_reply_at(const emq_reply *r, size_t i);
/* The 3-letter format of a VERBATIM reply ("txt", "mkd"), "" otherwise. */
EMQ_EXPORT const char *emq_reply_format(const emq_reply *r);
/* The RESP3 attribute map sent before this reply, or NULL. Borrowed. */
EMQ_EXPORT const emq_reply *emq_reply_attribute(const emq_reply *r);
/* 1 when r is an error reply whose text starts with prefix (for example
 * "BUSYGROUP"), compared up to the first space. */
EMQ_EXPORT int emq_reply_is_error(const emq_reply *r, const char *prefix);
/* Frees a whole reply tree obtained from the library; NULL is a no-op.
 * Only the root may be freed: never an element. */
EMQ_EXPORT void emq_reply_free(emq_reply *r);

/* ---- connection ------------------------------------------------------- */

/* One connection to one server: TCP, unix socket or TLS, with AUTH, SELECT
 * and CLIENT SETNAME on connect, command timeouts, pipelining and
 * reconnection with capped exponential backoff. Threads: one at a time. */
typedef struct emq_conn emq_conn_t;

/* Connects using conf (borrowed: copied, the caller keeps and frees it).
 * On success *out is caller-owned; free with emq_conn_destroy. On failure
 * *out is NULL and err says what is wrong: a bad URL (EMQ_EINVAL), refused
 * connection (EMQ_EIO), timeout (EMQ_ETIMEDOUT), TLS (EMQ_ETLS), or a
 * refused password (EMQ_EAUTH). */
EMQ_EXPORT emq_status emq_conn_new(const emq_conf_t *conf, emq_conn_t **out,
                                   emq_error *err);
/* Closes and frees; NULL is a no-op. */
EMQ_EXPORT void emq_conn_destroy(emq_conn_t *conn);

/* Sends one command (argv of argc binary-safe byte strings; argvlen may be
 * NULL for NUL-terminated strings) and waits for its reply. An error reply
 * from the server is a success of this call: inspect emq_reply_kind.
 * On success *reply is caller-owned; free with emq_reply_free. Fails with
 * EMQ_EINVAL (misuse) when replies of appended commands are still unread, and
 * with the sticky transport error once the connection has broken. */
EMQ_EXPORT emq_status emq_conn_command(emq_conn_t *conn, int argc,
                                       const char *const *argv,
                                       const size_t *argvlen, emq_reply **reply,
                                       emq_error *err);
/* Pipelining: append a command to the output buffer without sending.
 * Fails with EMQ_ELIMIT when the pipeline limit (conf pipeline.max) or the
 * output buffer cap would be exceeded. */
EMQ_EXPORT emq_status emq_conn_append(emq_conn_t *conn, int argc,
                                      const char *const *argv,
                                      const size_t *argvlen, emq_error *err);
/* Sends whatever is appended and returns the next reply in order.
 * *reply is caller-owned; free with emq_reply_free. EMQ_EINVAL when no
 * reply is outstanding. */
EMQ_EXPORT emq_status emq_conn_get_reply(emq_conn_t *conn, emq_reply **reply,
                                         emq_error *err);
/* Number of appended commands whose replies have not been read yet. */
EMQ_EXPORT size_t emq_conn_pending(const emq_conn_t *conn);

/* What the server a connection talks to can do, learned at connect (the
 * HELLO reply; with protocol 2, INFO server) and decided in one table
 * (docs/COMPATIBILITY.md). Only behaviours the test suite has checked on a
 * real server are listed; a capability a server lacks is worked around
 * where the library uses it. */
typedef enum emq_capability {
    /* XAUTOCLAIM returns the IDs of deleted pending entries as a third
     * element (Redis 7.0+, Valkey); 6.2 returns such entries as nil. */
    EMQ_CAP_XAUTOCLAIM_DELETED = 1u << 0,
    /* XINFO STREAM reports entries-added and XINFO GROUPS entries-read and
     * lag (Redis 7.0+, Valkey); without it they are unknown (-1). */
    EMQ_CAP_STREAM_COUNTERS = 1u << 1,
    /* CLUSTER SHARDS (Redis 7.0+, Valkey); else CLUSTER SLOTS. */
    EMQ_CAP_CLUSTER_SHARDS = 1u << 2,
    /* XINFO CONSUMERS reports inactive (Redis 7.2+, Valkey). */
    EMQ_CAP_CONSUMER_INACTIVE = 1u << 3,
    /* WAITAOF (Redis 7.2+, Valkey): producer.wait_aof. */
    EMQ_CAP_WAITAOF = 1u << 4
} emq_capability;

/* The server as the connection learned it. name is "redis" or "valkey"
 * ("" when unknown: the server said nothing, or INFO was refused);
 * version as the server writes it ("7.2.6"); capabilities is a set of
 * emq_capability, 0 when unknown (then every behaviour is detected from
 * the replies themselves). */
typedef struct emq_server {
    char name[16];
    char version[24];
    int major, minor, patch;
    uint32_t capabilities;
    uint64_t reserved[4]; /* room for members to come; 0 */
} emq_server;

/* Copies what conn learned of its server at its last connect into *out.
 * Returns 1 when the server is known, 0 otherwise (out is then zeroed).
 * Any thread that owns conn. */
EMQ_EXPORT int emq_conn_server(const emq_conn_t *conn, emq_server *out);
/* The name of one capability bit ("xautoclaim_deleted", ...); NULL for
 * anything else. Static storage. */
EMQ_EXPORT const char *emq_capability_name(uint32_t cap);
/* The name of the i-th capability server has (from 0, lowest bit first);
 * NULL past the last. Static storage; any thread. */
EMQ_EXPORT const char *emq_server_capability(const emq_server *server,
                                             size_t i);
/* Drops the current transport (any unread replies are lost) and connects
 * again, sleeping a capped exponential backoff with jitter between
 * attempts, up to conf reconnect.max_attempts. Returns the last attempt's
 * error when all fail. */
EMQ_EXPORT emq_status emq_conn_reconnect(emq_conn_t *conn, emq_error *err);
/* 1 once a transport failure or protocol error broke the connection. */
EMQ_EXPORT int emq_conn_is_broken(const emq_conn_t *conn);
/* How many times the connection was re-established since emq_conn_new. */
EMQ_EXPORT uint64_t emq_conn_reconnects(const emq_conn_t *conn);
/* The socket descriptor, for poll-based integration; -1 when broken. */
EMQ_EXPORT int emq_conn_fd(const emq_conn_t *conn);

/* ---- entries ------------------------------------------------------------ */

/* One field/value pair of a stream entry. Binary-safe: use the lengths. */
typedef struct emq_field {
    const char *name;
    size_t name_len;
    const char *value;
    size_t value_len;
} emq_field;

/* Longest stream ID text: "18446744073709551615-18446744073709551615". */
#define EMQ_ID_MAX 48
/* Longest group or consumer name, bytes (names are printable ASCII
 * without spaces). */
#define EMQ_NAME_MAX 128

/* A stream entry ID as NUL-terminated text ("1732924800123-0"). */
typedef struct emq_id {
    char str[EMQ_ID_MAX];
} emq_id;

/* Parses one JSON object, {"name":"value",...}, into fields in document
 * order (the input side of emq_entry_json's "fields"). A value may be a
 * string, a number, true, false or null (numbers and words are kept as
 * their text), or {"base64":"..."} for bytes that are not UTF-8, so every
 * value emq_entry_json writes comes back byte-exact. A repeated name is
 * kept repeated. Each name and value is also NUL-terminated. Arrays, other
 * nested objects, an empty object and trailing text are EMQ_EINVAL with a
 * message naming the 1-based column ("column 12: expected ':' after the
 * field name"). On success *fields (one block holding the array and the
 * bytes) is caller-owned; free with emq_fields_free. */
EMQ_EXPORT emq_status emq_fields_from_json(const char *json, size_t len,
                                           emq_field **fields, size_t *nfields,
                                           emq_error *err);
/* Frees the fields of emq_fields_from_json; NULL is a no-op. */
EMQ_EXPORT void emq_fields_free(emq_field *fields);

/* Writes into buf (size bytes, NUL-terminated) the stream key that conf's
 * queue or stream property names ("emq:{jobs}" for queue "jobs"), without
 * touching the network: for messages and for tools that inspect the key.
 * EMQ_EINVAL names a missing or malformed queue; EMQ_ELIMIT when buf is
 * too small. */
EMQ_EXPORT emq_status emq_conf_stream_key(const emq_conf_t *conf, char *buf,
                                          size_t size, emq_error *err);

/* ---- producer ----------------------------------------------------------- */

/* Appends entries to a queue's stream (conf: url and queue, or stream).
 * Every XADD carries the queue's trimming policy (trim.maxlen or
 * trim.minid, trim.approx, trim.limit) and producer.nomkstream, so adding
 * and trimming are one atomic command. Plain trimming deletes entries no
 * matter whether a group processed them: see docs/PRODUCER.md and
 * emq_admin_trim_acked for retention that keeps unprocessed work.
 *
 * Threads: one producer may be used by any number of threads at once
 * (docs/PRODUCER.md). Calls share one connection per queue: entries of
 * threads that call together travel in one pipelined round trip, taken by
 * whichever caller finds the connection free (the others wait for their
 * results, not for a lock held over a round trip each). A producer has
 * one background thread per queue: it connects and reconnects (with the
 * reconnect backoff), and sends and reports asynchronous entries.
 *
 * Time: producer.timeout_ms bounds every call (waiting for the
 * connection, sending, the reply, WAIT). While the producer knows it is
 * disconnected (its last connect attempt failed), calls fail at once with
 * the connection's status (EMQ_EIO, EMQ_ECLOSED, ...; retriable) instead
 * of each waiting out a connect; the thread keeps trying. */
typedef struct emq_producer emq_producer_t;

/* One entry of a batch. */
typedef struct emq_message {
    const emq_field *fields; /* nfields pairs; at least one */
    size_t nfields;
    const char *id; /* explicit ID ("ms-seq", "ms-*"), or NULL for
                       an automatic one */
} emq_message;

/* Validates conf (conf borrowed: copied) and starts the producer. With
 * producer.connect lazy (the default) it returns at once and connects in
 * the background, so a server that is down is not an error here; with
 * eager it connects first and fails as a connection would. On success
 * *out is caller-owned; free with emq_producer_destroy. EMQ_EINVAL,
 * before any connection is made, names a missing or bad queue or a
 * trimming policy the server would refuse (trim.maxlen with trim.minid, a
 * malformed trim.minid, trim.limit without trim.approx 1, trim.approx or
 * trim.limit without a bound). producer.wait_aof on a server without
 * WAITAOF is EMQ_EINVAL at connect (eager: here; lazy: every call). */
EMQ_EXPORT emq_status emq_producer_new(const emq_conf_t *conf,
                                       emq_producer_t **out, emq_error *err);
/* Closes and frees; NULL is a no-op. Not while another thread uses p.
 * Asynchronous entries not sent yet are reported EMQ_ECLOSED ("the
 * producer was destroyed before it was sent"): call emq_producer_flush
 * first to send them. Every callback still owed runs before it returns
 * (in poll mode, on the calling thread). */
EMQ_EXPORT void emq_producer_destroy(emq_producer_t *p);
/* Adds one entry with an automatic ID; its ID goes to *id (may be NULL;
 * "" on failure). Any thread. A server error reply (OOM, WRONGTYPE, too
 * large) is EMQ_ESERVER with the reply text; with producer.nomkstream set,
 * a missing stream is EMQ_ESERVER "stream '<key>' does not exist and
 * producer.nomkstream is set" and nothing is created. A transport failure
 * returns its status (retriable) and the entry may or may not have been
 * added; so does EMQ_ETIMEDOUT once the entry was sent. EMQ_ETIMEDOUT
 * before it was sent says so (not added). With producer.wait_replicas or
 * wait_aof, EMQ_ENOTDURABLE: added (*id is set) but not confirmed on the
 * replicas or the AOF in producer.wait_timeout_ms. */
EMQ_EXPORT emq_status emq_produce(emq_producer_t *p, const emq_field *fields,
                                  size_t nfields, emq_id *id, emq_error *err);
/* Adds n entries, pipelined in windows of conf producer.window commands so
 * memory stays bounded whatever n is. A message without fields makes the
 * whole batch EMQ_EINVAL before anything is sent. ids (n slots, may be
 * NULL) receives each entry's ID, or "" for an entry that was not added
 * or whose outcome is unknown. *written (may be NULL) gets how many
 * entries were confirmed added.
 * - Server refusals (an ID not above the top, OOM, WRONGTYPE, a missing
 *   stream with producer.nomkstream) fail only their entry: the call goes
 *   on, then returns EMQ_ESERVER for the first one, err naming its index
 *   ("entry 3: ..."); the other entries the server accepted stay added.
 * - A transport failure stops the batch: its status is returned, and err
 *   says how many entries were confirmed and from which index on the
 *   outcome is unknown (those may or may not have been added; their ids
 *   are ""); the producer reconnects in the background.
 * - producer.timeout_ms bounds the call: the batch waits for its turn on
 *   the connection, then stops between windows once it is past, with
 *   EMQ_ETIMEDOUT saying how many were added and that the rest was not
 *   sent.
 * - With producer.wait_replicas or wait_aof, each window ends with a WAIT;
 *   a window not confirmed in time makes the call EMQ_ENOTDURABLE (its
 *   entries are added and their ids set). */
EMQ_EXPORT emq_status emq_produce_batch(emq_producer_t *p,
                                        const emq_message *msgs, size_t n,
                                        emq_id *ids, size_t *written,
                                        emq_error *err);

/* Partitioned topics (conf partitions = P > 1; docs/SCALING.md). The
 * producer then writes to the P queues "<queue>.0" .. "<queue>.<P-1>",
 * each its own stream and cluster slot, and holds one connection (route)
 * per partition, opened when the first entry goes there: a topic
 * producer's emq_producer_new validates but does not connect, so an
 * unreachable server shows at the first produce call. emq_produce and
 * emq_produce_batch spread entries over the partitions in turn (round
 * robin). Entry IDs are per partition: two partitions may hand out the
 * same ID. A batch is split by partition and each share written as its
 * own batch; all shares are tried, the first failure is returned with
 * its partition named ("partition 3 (emq:{orders.3}): entry 1: ...",
 * the index counting within that partition's share), and ids/written
 * report every entry. With partitions = 1 everything below behaves as
 * the calls above and the key is ignored. */

/* Adds one entry with a message key (key_len bytes, binary-safe; NULL:
 * no key, as emq_produce). Every entry of one key goes to partition
 * CRC16(key) mod P (the CRC16 of Redis Cluster's key slots), so the
 * entries of one key stay in production order in one stream. Results and
 * errors as emq_produce. */
EMQ_EXPORT emq_status emq_produce_keyed(emq_producer_t *p, const char *key,
                                        size_t key_len, const emq_field *fields,
                                        size_t nfields, emq_id *id,
                                        emq_error *err);

/* One entry of a keyed batch: the message and its key (NULL: no key, the
 * next partition in turn). Borrowed for the call only. */
typedef struct emq_keyed_message {
    emq_message message;
    const char *key;
    size_t key_len;
} emq_keyed_message;

/* emq_produce_batch with a key per entry (see emq_produce_keyed). The
 * entries of one key keep their batch order. */
EMQ_EXPORT emq_status emq_produce_batch_keyed(emq_producer_t *p,
                                              const emq_keyed_message *msgs,
                                              size_t n, emq_id *ids,
                                              size_t *written, emq_error *err);

/* ---- per-entry options: message key, delay ------------------------------ */

/* What a produce call asks of one entry beyond its fields: its message
 * key and when it may be handed out (docs/QUEUES.md). Start from
 * EMQ_PRODUCE_OPTS_INIT: version tells the library which fields the
 * caller knows, so a field a later version adds keeps its default for a
 * program built before it. Borrowed for the call only.
 *
 * A delayed entry (delay_ms or due_ms > 0) waits in the server, in its
 * queue's hashtag (a sorted set and a hash, docs/KEYSPACE.md), not in the
 * stream: no consumer sees it before it is due. The consumers of any
 * group move due entries to the stream in their upkeep (one script: each
 * moved exactly once, none lost if a mover dies), so one runs at most
 * delayed.poll_ms late while a consumer of the queue runs, and waits
 * while none does. When it is moved it gets a new stream ID. Until then
 * its ID (*id, ids[i], emq_delivery.id) is its handle, "delayed-" and
 * twelve digits, which emq_admin_cancel takes. The schedule is one
 * script (EVAL: a user needs +eval) with the server's clock: a delay
 * counts from when the server runs it, a due time is read on the
 * server's clock. The queue's trimming policy is applied when the
 * producer adds, not when a delayed entry is moved. */
typedef struct emq_produce_opts {
    unsigned version; /* EMQ_PRODUCE_OPTS_VERSION */
    const char *key;  /* message key (a topic's partition, as
                         emq_produce_keyed; binary-safe); NULL: none */
    size_t key_len;
    int64_t delay_ms;      /* > 0: handed out no sooner than this many ms
                              after the server took it; 0: at once */
    int64_t due_ms;        /* > 0: handed out no sooner than this unix time in
                              ms (the server's clock); not with delay_ms */
    const char *dedup_key; /* idempotency key (binary-safe, 1 to 512
                              bytes); NULL: none. The entry is added only
                              if no entry with this key was added to the
                              queue within dedup_ttl_ms; either way the
                              call answers the first entry's ID (or
                              handle). Re-sends after an unknown outcome
                              (producer.retries) add nothing twice */
    size_t dedup_key_len;
    int64_t dedup_ttl_ms; /* the key's window; 0: dedup.ttl_ms (24 h) */
    /* Version 2: the entry's priority, 0 (the most urgent) to 9; -1: none
     * (on a queue with priorities, 5). An entry with a priority waits
     * beside the stream until a consumer reads, and every read takes the
     * most urgent first (docs/QUEUES.md); the first such entry gives the
     * queue its priority record, after which the queue's producers hold
     * every entry (from their next connect; this one at once). Its *id is
     * a handle, as a delayed entry's. */
    int64_t priority;
    uint64_t reserved[4]; /* room for members to come (a later version's);
                             0, never read by this version */
} emq_produce_opts;

#define EMQ_PRODUCE_OPTS_VERSION 2
#define EMQ_PRODUCE_OPTS_INIT                                                  \
    {                                                                          \
        EMQ_PRODUCE_OPTS_VERSION, NULL, 0, 0, 0, NULL, 0, 0, -1, { 0 }         \
    }

/* emq_produce with options (opts NULL: none, as emq_produce). EMQ_EINVAL
 * before anything is sent for: an unknown opts->version, delay_ms,
 * due_ms or dedup_ttl_ms below 0 or above 2^53, delay_ms and due_ms both
 * set, a dedup_key of 0 or more than 512 bytes, or a delayed or
 * de-duplicated entry with more than 3,000 field/value pairs or an
 * explicit ID. Results and errors as emq_produce; a
 * delayed entry's *id is its handle. Any thread. */
EMQ_EXPORT emq_status emq_produce_ex(emq_producer_t *p, const emq_field *fields,
                                     size_t nfields,
                                     const emq_produce_opts *opts, emq_id *id,
                                     emq_error *err);
/* emq_produce_batch with options per entry: opts holds n of them, or is
 * NULL (none). A bad option makes the whole batch EMQ_EINVAL, naming the
 * entry, before anything is sent; a delayed entry's ids[i] is its
 * handle. Otherwise as emq_produce_batch (with keys as
 * emq_produce_batch_keyed). */
EMQ_EXPORT emq_status emq_produce_batch_ex(emq_producer_t *p,
                                           const emq_message *msgs,
                                           const emq_produce_opts *opts,
                                           size_t n, emq_id *ids,
                                           size_t *written, emq_error *err);

/* ---- asynchronous producing ---------------------------------------------- */

/* The outcome of one asynchronous entry, passed to its callback. Valid
 * during the callback only. */
typedef struct emq_delivery {
    emq_status status;      /* EMQ_OK: added; EMQ_ENOTDURABLE: added, not
                               confirmed durable; otherwise not added, or
                               unknown (outcome_unknown) */
    const char *id;         /* the entry's ID when added; "" otherwise */
    const emq_error *error; /* why, when status is not EMQ_OK; else NULL */
    int outcome_unknown;    /* 1: a transport failure (or the timeout)
                               struck after it was sent: it may or may not
                               have been added */
    unsigned attempts;      /* times it was sent: > 1 only with
                               producer.retries, after an unknown outcome,
                               and then it may have been added twice */
    const char *stream;     /* the stream it was for */
    uint64_t reserved[4];   /* room for members to come; 0 */
} emq_delivery;

/* Called exactly once per asynchronous entry with its outcome: on a thread
 * of the producer (producer.delivery thread, the default; callbacks of
 * one queue run one at a time, in the order the outcomes were learned) or
 * inside emq_producer_poll / emq_producer_flush (producer.delivery poll).
 * It may call emq_produce_async (not emq_producer_flush or destroy). */
typedef void (*emq_delivery_fn)(void *opaque, const emq_delivery *d);

/* Queues one entry (fields copied; nothing of the caller's is kept) and
 * returns at once; the producer sends queued entries pipelined, after
 * waiting up to producer.linger_ms for company, and calls cb(opaque, d)
 * once with its outcome. Any thread. EMQ_ELIMIT (nothing queued, cb never
 * called) when producer.queue.max_messages entries or
 * producer.queue.max_bytes field bytes are outstanding (queued, in flight
 * or awaiting their callback); EMQ_EINVAL for an entry without fields or
 * a NULL cb. An entry not sent within producer.timeout_ms (the server
 * down the whole time) is reported EMQ_ETIMEDOUT, not added. A transport
 * failure after it was sent is reported with outcome_unknown, or sent
 * again up to producer.retries times (then attempts > 1 says so). */
EMQ_EXPORT emq_status emq_produce_async(emq_producer_t *p,
                                        const emq_field *fields, size_t nfields,
                                        emq_delivery_fn cb, void *opaque,
                                        emq_error *err);
/* emq_produce_async with a message key (see emq_produce_keyed). */
EMQ_EXPORT emq_status emq_produce_async_keyed(
    emq_producer_t *p, const char *key, size_t key_len, const emq_field *fields,
    size_t nfields, emq_delivery_fn cb, void *opaque, emq_error *err);
/* emq_produce_async with options (opts NULL: none; see emq_produce_ex):
 * a bad option is EMQ_EINVAL at once (nothing queued, cb never called).
 * A delayed entry's emq_delivery.id is its handle. */
EMQ_EXPORT emq_status emq_produce_async_ex(emq_producer_t *p,
                                           const emq_field *fields,
                                           size_t nfields,
                                           const emq_produce_opts *opts,
                                           emq_delivery_fn cb, void *opaque,
                                           emq_error *err);
/* Runs the delivery callbacks that are due (producer.delivery poll),
 * waiting up to timeout_ms for the first (0: never waits; < 0: until
 * one). Returns how many ran. With producer.delivery thread it runs none
 * and returns 0 at once. Any thread; callbacks run on it. */
EMQ_EXPORT size_t emq_producer_poll(emq_producer_t *p, int64_t timeout_ms);
/* Sends every queued entry without lingering and waits, up to timeout_ms
 * (< 0: no bound), until every asynchronous entry has been called back
 * (in poll mode it runs the callbacks itself). EMQ_ETIMEDOUT, saying how
 * many are still outstanding, when time ran out. Any thread. */
EMQ_EXPORT emq_status emq_producer_flush(emq_producer_t *p, int64_t timeout_ms,
                                         emq_error *err);
/* Asynchronous entries not yet called back. Any thread. */
EMQ_EXPORT size_t emq_producer_outstanding(emq_producer_t *p);

/* ---- showing URLs -------------------------------------------------------- */

/* Copies URL text into out (size bytes, NUL-terminated, truncated to fit)
 * with every part that may be a secret replaced by "***", whatever shape
 * the text has, valid or not: the password (after the first ':' of the
 * user info, which ends at the last '@', or for unix:// the last "@/",
 * '?' or not); a user info without ':' (it may be a password); an unknown
 * scheme; and all of a text without "//". Returns out. The one function
 * every message, log line and read-back of a URL goes through. Any
 * thread. */
EMQ_EXPORT char *emq_url_redact(const char *text, char *out, size_t size);
/* Overwrites, in place, every character emq_url_redact would hide with
 * '*' (same length: for argv, so /proc/PID/cmdline and ps never show a
 * secret). NULL is a no-op. */
EMQ_EXPORT void emq_url_mask(char *text);

/* ---- consumer ----------------------------------------------------------- */

/* One delivery handed to a handler. Every pointer is borrowed and valid
 * only until the handler returns; copy what you keep. */
typedef struct emq_entry {
    const char *id;      /* entry ID, NUL-terminated */
    uint64_t deliveries; /* the server's delivery count; 1 = first */
    const emq_field *fields;
    size_t nfields;
    const char *stream; /* stream key */
    const char *group;
    const char *consumer;
    uint64_t reserved[4]; /* room for members to come; 0 (also in an
                             entry a caller fills to settle or print) */
} emq_entry;

/* Writes entry as one JSON object (snprintf semantics: writes what fits,
 * NUL-terminated, returns the full length):
 *   {"id":"1-0","stream":"emq:{jobs}","deliveries":1,
 *    "fields":{"name":"value",...}}
 * ("stream" only when entry->stream is set). Names and values that are
 * valid UTF-8 are JSON strings; any other byte string is {"base64":"..."},
 * so every entry survives a round trip byte-exact (docs/CLI.md). A
 * repeated field name appears repeated. Any thread. */
EMQ_EXPORT size_t emq_entry_json(const emq_entry *entry, char *buf,
                                 size_t size);
/* The "fields" value of emq_entry_json alone (snprintf semantics): an
 * object {"name":"value",...}, or [[name, value], ...] pairs when a name
 * is not UTF-8; values that are not UTF-8 are {"base64":"..."}. */
EMQ_EXPORT size_t emq_fields_json(const emq_field *fields, size_t n, char *buf,
                                  size_t size);
/* emq_entry_json with the entry's partition of a topic after "stream"
 * ("partition":3); partition < 0 writes none (emq_entry_json). */
EMQ_EXPORT size_t emq_entry_json_partition(const emq_entry *entry,
                                           int partition, char *buf,
                                           size_t size);

/* What a handler answers for one entry. */
typedef enum emq_verdict {
    EMQ_ACK = 0,   /* done: acknowledge it */
    EMQ_RETRY = 1, /* failed: delivered again to this consumer after
                      retry.backoff_ms (doubling per delivery); counts
                      toward max_deliveries */
    EMQ_DEAD = 2   /* give up now: move it to the dead letters */
} emq_verdict;

/* Called on the consumer's thread for each entry. For EMQ_RETRY and
 * EMQ_DEAD it may write a reason (NUL-terminated, at most reason_size
 * bytes) that ends up in the dead letter. A topic consumer (partitions
 * P > 1) calls it from its P partition threads at once: entry->stream
 * names the partition's stream, and entries of one partition (so of one
 * message key) come one at a time in stream order. */
typedef emq_verdict (*emq_handler_fn)(void *opaque, const emq_entry *entry,
                                      char *reason, size_t reason_size);

typedef struct emq_consumer emq_consumer_t;

/* Validates conf (queue or stream, group, consumer, start, ...) without
 * touching the network: a missing or malformed value is EMQ_EINVAL naming
 * it. conf is borrowed (copied). handler may be NULL for a consumer driven
 * by emq_consumer_poll only (pull mode, below). On success *out is
 * caller-owned; free with emq_consumer_destroy. */
EMQ_EXPORT emq_status emq_consumer_new(const emq_conf_t *conf,
                                       emq_handler_fn handler, void *opaque,
                                       emq_consumer_t **out, emq_error *err);
/* Runs the consumer contract (docs/CONSUMER.md) on the calling thread until
 * emq_consumer_stop or a fatal error. Returns EMQ_OK after a stop.
 * With conf partitions = P > 1 (a topic, docs/SCALING.md) the consumer is
 * P consumers of the same name, one per partition queue "<queue>.<i>",
 * each with its own connection, lease, door, recovery and dead letters,
 * run on P threads started here; run returns when all have stopped, with
 * the first fatal error of any (which stops the others). Stats and
 * emq_consumer_stats_json are sums over the partitions.
 * First connect: with consumer.connect fail (the default) a server that
 * does not answer ends run at once with the transport error; with wait it
 * is waited for with the reconnect backoff, as a later reconnect is, until
 * it answers or emq_consumer_stop (then EMQ_ECLOSED or EMQ_OK). A refusal
 * that will not change by itself (EMQ_EAUTH, EMQ_ETLS, EMQ_EINVAL) is
 * never waited out. Pull mode's first poll follows the same rule. */
EMQ_EXPORT emq_status emq_consumer_run(emq_consumer_t *c, emq_error *err);
/* Asks run to return: the handler in progress finishes, completed work is
 * acknowledged, nothing new starts. In pull mode: nothing more is read or
 * handed out (poll answers EMQ_ECLOSED), entries read and not handed out
 * go back to the server with their delivery count undone, and entries
 * handed out may still be settled until emq_consumer_close.
 * Async-signal-safe; any thread. */
EMQ_EXPORT void emq_consumer_stop(emq_consumer_t *c);
/* Frees a consumer that is not running (in pull mode it closes it first,
 * with no wait); NULL is a no-op. Entries poll handed out stay valid until
 * emq_entry_free, but can no longer be settled. */
EMQ_EXPORT void emq_consumer_destroy(emq_consumer_t *c);

/* ---- consumer: batches, pull mode, event loops (docs/CONSUMER.md) -------- */

/* What a batch handler answers for one entry: its verdict, and for
 * EMQ_RETRY and EMQ_DEAD an optional reason (NUL-terminated). */
typedef struct emq_outcome {
    emq_verdict verdict;
    char reason[256];
    /* Room for members to come; 0 as the handler gets the outcome. */
    uint32_t reserved32;
    uint64_t reserved[2];
} emq_outcome;

/* Called with up to batch.max entries at once (a bulk insert, say), on
 * the thread of emq_consumer_run (an entry that may have been in the
 * hands of a handler whose process died comes in a call of its own, so a
 * job that kills the process takes no other with it again); writes one
 * outcome per entry (each
 * starts as EMQ_ACK with no reason). The entries are owned and kept fresh
 * until the handler returns, however long it takes. A topic consumer's
 * batch may mix partitions (entry->stream names each one's). Entries a
 * peer took over, or whose group was deleted while the handler ran (the
 * consumer creates it again and runs on), are not settled: a warning says
 * how many; the run goes on. */
typedef void (*emq_batch_handler_fn)(void *opaque,
                                     const emq_entry *const *entries, size_t n,
                                     emq_outcome *outcomes);

/* Like emq_consumer_new, with a batch handler: emq_consumer_run then hands
 * out up to batch.max entries per call, reading the next ones meanwhile
 * (at most max_in_flight out at once). */
EMQ_EXPORT emq_status emq_consumer_new_batch(const emq_conf_t *conf,
                                             emq_batch_handler_fn handler,
                                             void *opaque, emq_consumer_t **out,
                                             emq_error *err);

/* Pull mode. A consumer made with a NULL handler (or any consumer not
 * running) is driven by poll instead of run: the first call starts its
 * threads (one reading thread per partition and the upkeep thread of
 * each), which read ahead of what poll hands out, up to max_in_flight
 * entries out at once (waiting to be handed out, or handed out and not
 * settled); at that limit nothing more is read until some are settled.
 *
 * Hands out up to max entries into entries[0..max), setting *n (one
 * alone when it may have been in the hands of a handler whose process
 * died: docs/CONSUMER.md); waits up to timeout_ms for the first (0: never
 * waits; < 0: until one comes or the consumer stops). Each entry is the
 * caller's: valid, with every pointer in it, until emq_entry_free, even after
 * the consumer is gone; it is kept owned (refreshed against claims by peers)
 * until it is settled with emq_consumer_ack, _retry or _dead, from any thread.
 * An entry that is never settled stays pending to this consumer name and is
 * delivered again at its next start. Any number of threads may poll at
 * once; no entry is handed out twice. A poll that finds nothing waiting
 * (with a timeout other than 0, on a consumer that is not a topic's) may
 * send the consumer's blocking read itself and sleep on the connection,
 * so that what arrives reaches it with no thread between: it returns
 * then at most a few milliseconds past timeout_ms (a stalled server's
 * read is left to the reading thread), and the consumer's log callback
 * may be called from its thread. Returns EMQ_OK (with *n possibly
 * 0 after the timeout), EMQ_ECLOSED once stopped, or the fatal error that
 * ended the consumer (as run would have returned it). EMQ_EINVAL while
 * emq_consumer_run runs it. */
EMQ_EXPORT emq_status emq_consumer_poll(emq_consumer_t *c, emq_entry **entries,
                                        size_t max, int64_t timeout_ms,
                                        size_t *n, emq_error *err);
/* Frees an entry poll handed out (settled or not); NULL is a no-op. Any
 * thread. Only for entries from emq_consumer_poll. */
EMQ_EXPORT void emq_entry_free(emq_entry *entry);

/* Settle an entry poll handed out, from any thread, at any time while
 * the consumer lives (also after emq_consumer_stop, until close). Only
 * entry->id and entry->stream are read, so a caller that kept just those
 * may pass an emq_entry with only them set (stream may be NULL unless the
 * consumer is a topic's). The settlement is sent by the consumer's upkeep
 * thread within milliseconds. Errors: EMQ_EINVAL when this consumer does
 * not hold the entry (settled already, never handed out, another
 * consumer's, its group deleted); EMQ_ELOST when a peer took it over
 * meanwhile (its ownership could not be refreshed: the peer handles it),
 * or when this consumer does not hold its name's lease at that moment
 * (its renewal did not get through in time, or another process took the
 * name): nothing is settled then, the entry stays pending and is
 * delivered again; the consumer's fatal error (as poll returns it) when
 * another fatal error ended the consumer. EMQ_OK means the settlement is
 * queued and will be sent, unless the name is lost before that (the
 * consumer then ends with "lost its lease").
 * ack: done. retry: delivered again to this consumer after delay_ms (< 0:
 * the retry.backoff_ms schedule), counting toward max_deliveries (at the
 * last delivery it goes to the dead letters instead). dead: to the dead
 * letters now. reason may be NULL. */
EMQ_EXPORT emq_status emq_consumer_ack(emq_consumer_t *c,
                                       const emq_entry *entry, emq_error *err);
EMQ_EXPORT emq_status emq_consumer_retry(emq_consumer_t *c,
                                         const emq_entry *entry,
                                         int64_t delay_ms, const char *reason,
                                         emq_error *err);
EMQ_EXPORT emq_status emq_consumer_dead(emq_consumer_t *c,
                                        const emq_entry *entry,
                                        const char *reason, emq_error *err);

/* Pull mode: hand out nothing more and read nothing more until resume;
 * what is out stays owned and may be settled. Meanwhile the event
 * descriptor is not readable (entries read ahead wait quietly); resume
 * makes it readable again when entries wait. Any thread. */
EMQ_EXPORT void emq_consumer_pause(emq_consumer_t *c);
EMQ_EXPORT void emq_consumer_resume(emq_consumer_t *c);

/* Ends pull mode: stops (as emq_consumer_stop), waits up to timeout_ms
 * (< 0: without end) for the entries handed out to be settled and their
 * settlements sent, then ends the consumer's threads and gives its name's
 * lease back. Entries still unsettled stay pending to the name and come
 * back at its next start (logged as a warning). Returns the fatal error
 * that ended the consumer, if any, else EMQ_OK; the consumer may be polled
 * again afterwards. A no-op when not in pull mode. Not from a signal
 * handler. */
EMQ_EXPORT emq_status emq_consumer_close(emq_consumer_t *c, int64_t timeout_ms,
                                         emq_error *err);

/* Event loops (libuv, libevent, epoll). The consumer's timers (ownership
 * refresh, lease renewal, claim beats, retries, reconnects) run on its own
 * threads, so an event loop only needs to know when entries are ready:
 * emq_consumer_fd starts pull mode (like a first poll) and returns a
 * descriptor that is readable while a step has something to do: entries
 * wait to be handed out (not while paused), the consumer has ended, or
 * the blocking read the consumer lends to the loop wants the step (its
 * reply arrived, or the next read is due: the step reads the reply or
 * sends the read on the loop's thread, so an entry reaches the loop with
 * no wake-up between threads); -1 with err set when pull mode cannot
 * start. Watch it for reading; on readiness call emq_consumer_step, which
 * may hand out nothing. It is an epoll set (Linux), so it nests in any
 * loop that polls descriptors; no byte TLS has buffered is ever missed.
 * Owned by the consumer (do not close or read it); the same for its
 * whole life. */
EMQ_EXPORT int emq_consumer_fd(emq_consumer_t *c, emq_error *err);
/* Non-blocking poll: hands out what is ready (up to max) without
 * waiting, reads the reply of a read lent to the loop or sends the next
 * one (never waiting for the server), and re-arms the descriptor. Same
 * results as emq_consumer_poll with timeout 0. */
EMQ_EXPORT emq_status emq_consumer_step(emq_consumer_t *c, emq_entry **entries,
                                        size_t max, size_t *n, emq_error *err);
/* Milliseconds until step should be called at the latest: 0 when a step
 * has something to do (as the descriptor says), -1 when only the
 * descriptor matters (nothing in the loop needs a timer). */
EMQ_EXPORT int64_t emq_consumer_timeout_ms(emq_consumer_t *c);

/* Counters of one consumer since emq_consumer_new. */
/* The consumer's counters, written once: X(name) each, in this order in
 * emq_consumer_stats, its JSON and the statistics callback's. */
#define EMQ_CONSUMER_COUNTERS(X)                                               \
    X(delivered)       /* handler calls */                                     \
    X(acked)           /* entries acknowledged after EMQ_ACK */                \
    X(retried)         /* EMQ_RETRY answers */                                 \
    X(failed)          /* deliveries that ended without an ack */              \
    X(dead_lettered)   /* entries this consumer moved to dead letters */       \
    X(claimed)         /* entries taken over from idle consumers */            \
    X(deleted_pending) /* pending entries found deleted, acked */              \
    X(reconnects)      /* connections re-established */                        \
    X(group_recreated) /* group or stream found gone and re-created */         \
    X(reads)           /* XREADGROUP calls answered */                         \
    X(round_trips)     /* network round trips, both connections */             \
    X(refreshed)       /* in-flight entries kept fresh (XCLAIM JUSTID to       \
                          itself while the handler runs) */                    \
    X(ownership_lost)  /* in-flight entries found taken by a peer */           \
    X(server_waits)    /* "not now" episodes waited out (LOADING, BUSY,        \
                          MISCONF, NOREPLICAS, OOM, ...) */                    \
    X(released)        /* read, not handed out (a stop cut the batch short),   \
                          handed back with their delivery count undone */

/* What Redis Cluster made the consumer's connections do (0 on a
 * standalone server). */
#define EMQ_CONSUMER_CLUSTER_COUNTERS(X)                                       \
    X(redirects)       /* MOVED and ASK replies followed to another node */    \
    X(cluster_retries) /* TRYAGAIN and CLUSTERDOWN replies waited out */       \
    X(cluster_gave_up) /* commands failed at cluster.max_redirects or          \
                          cluster.retry_ms (EMQ_ELIMIT) */

/* Time in hand (handler.timeout_ms). */
#define EMQ_CONSUMER_HAND_COUNTERS(X)                                          \
    X(handler_overdue) /* entries kept past handler.timeout_ms: let go (no     \
                          longer refreshed), their settlement EMQ_ELOST */

/* The queue's delayed entries (emq_produce_opts). */
#define EMQ_CONSUMER_QUEUE_COUNTERS(X)                                         \
    X(delayed_moved) /* due delayed entries this consumer's upkeep moved to    \
                        the stream */

typedef struct emq_consumer_stats {
#define EMQ_STATS_FIELD(name) uint64_t name;
    EMQ_CONSUMER_COUNTERS(EMQ_STATS_FIELD)
    uint64_t in_flight;  /* entries read and not yet settled, now */
    uint64_t handed_out; /* of those, handed out by poll or to a
                            handler and not settled, now */
    EMQ_CONSUMER_CLUSTER_COUNTERS(EMQ_STATS_FIELD)
    EMQ_CONSUMER_HAND_COUNTERS(EMQ_STATS_FIELD)
    uint64_t oldest_in_hand_ms; /* how long the entry handed out longest ago
                                   and not settled has been out, now; 0
                                   when none */
    EMQ_CONSUMER_QUEUE_COUNTERS(EMQ_STATS_FIELD)
#undef EMQ_STATS_FIELD
    uint64_t reserved[8]; /* room for counters to come; 0 */
} emq_consumer_stats;

/* Copies the counters; safe from any thread while run is going. */
EMQ_EXPORT void emq_consumer_stats_get(const emq_consumer_t *c,
                                       emq_consumer_stats *out);
/* Writes the counters as one JSON object into buf (NUL-terminated,
 * truncated to size). Returns the length the full text needs, like
 * snprintf. */
EMQ_EXPORT size_t emq_consumer_stats_json(const emq_consumer_t *c, char *buf,
                                          size_t size);

/* A pool runs n consumers on n threads, each with its own connection and
 * the stable name "<consumer>-<i>" (i = 1..n). */
typedef struct emq_pool emq_pool_t;

/* Like emq_consumer_new for n consumers; the handler is called from n
 * threads at once. *out is caller-owned; free with emq_pool_destroy. */
EMQ_EXPORT emq_status emq_pool_new(const emq_conf_t *conf, int n,
                                   emq_handler_fn handler, void *opaque,
                                   emq_pool_t **out, emq_error *err);
/* Starts the threads and waits for all of them. Returns the first fatal
 * error of any consumer (the others are stopped then), or EMQ_OK. */
EMQ_EXPORT emq_status emq_pool_run(emq_pool_t *pool, emq_error *err);
/* Stops every consumer; async-signal-safe. */
EMQ_EXPORT void emq_pool_stop(emq_pool_t *pool);
EMQ_EXPORT void emq_pool_destroy(emq_pool_t *pool);
/* Consumer i (0-based) of the pool, for its stats; borrowed. */
EMQ_EXPORT emq_consumer_t *emq_pool_consumer(emq_pool_t *pool, int i);

/* ---- admin: inspection, replay, removal, retention, dead letters -------- */

/* Operates one queue (conf: url and queue, or stream). Every verb is
 * explicit; none runs inside a consumer. Threads: one at a time. */
typedef struct emq_admin emq_admin_t;

/* Connects (conf borrowed). *out is caller-owned; free with
 * emq_admin_destroy. EMQ_EINVAL names a missing or bad queue. */
EMQ_EXPORT emq_status emq_admin_new(const emq_conf_t *conf, emq_admin_t **out,
                                    emq_error *err);
EMQ_EXPORT void emq_admin_destroy(emq_admin_t *a);

/* Topics record their partition count in the server: each partition in
 * "emq:{<topic>.<i>}:topic" (field partitions), written by the first
 * producer or consumer of the partition, or by emq_admin_topic_create. A
 * producer, consumer or admin opened with partitions P on a topic that
 * records another count fails with EMQ_EINVAL naming both (a producer at
 * its first call, a consumer when it starts, an admin at once). */

/* The partition count recorded for a's queue (conf queue; for a topic
 * handle, its own P); 0 when none is recorded (a plain queue). One round
 * trip. Lets a tool open "orders" without being told it is a topic. */
EMQ_EXPORT emq_status emq_admin_topic_partitions(emq_admin_t *a,
                                                 int64_t *partitions,
                                                 emq_error *err);
/* Records a's partition count (a topic handle: conf partitions P > 1) in
 * each partition; EMQ_EINVAL when one records another count (naming the
 * partition and both counts). Idempotent. */
EMQ_EXPORT emq_status emq_admin_topic_create(emq_admin_t *a, emq_error *err);

/* Every verb below works on a topic handle (partitions P > 1): on each
 * partition in turn, with the results summed (describe also keeps each
 * partition's, and the lists of pending entries and dead letters carry
 * each entry's partition). A failure stops at its partition and is
 * prefixed "partition i (emq:{<topic>.<i>})"; the partitions before it
 * have done their part. The calls that name entry IDs (group setid to an
 * entry ID is a position and works; dead requeue of given IDs, and
 * dead list after an ID, do not: IDs repeat across partitions) refuse a
 * topic handle with EMQ_EINVAL: use the partition's own handle. */

/* The handle of partition i (0..P-1) of topic a, borrowed (a frees it);
 * NULL when a is not a topic or i is out of range. Same thread rule as a. */
EMQ_EXPORT emq_admin_t *emq_admin_partition(emq_admin_t *a, int i);
/* P for a topic handle, 0 for a queue's (no server round trip). */
EMQ_EXPORT int emq_admin_partition_count(const emq_admin_t *a);
/* Sends one command over a's connection to the queue's node (a cluster's
 * redirections followed), for reads the verbs do not cover (XRANGE,
 * XREAD of the stream: `echomq tail`). Its keys must be the queue's
 * (emq_conf_stream_key); a topic handle has none: use a partition's.
 * Like emq_conn_command, an error reply is a success of this call and
 * *reply is caller-owned (emq_reply_free). */
EMQ_EXPORT emq_status emq_admin_command(emq_admin_t *a, int argc,
                                        const char *const *argv,
                                        const size_t *argvlen,
                                        emq_reply **reply, emq_error *err);

/* The queues on the server (conf: url and credentials; its queue is not
 * used): the names of the streams "emq:{NAME}", and of the queues whose
 * entries all wait delayed or held ("emq:{NAME}:delayed", ":held"), whose
 * NAME matches the glob pattern (NULL or "": all), found with SCAN on
 * every master of a cluster (each key lives on one), sorted, each once. A
 * topic's partitions are its queues "<topic>.<i>". At most max names (0:
 * 10000); more is EMQ_ELIMIT saying so. *names (emq_queue_names_free) holds *n
 * strings. Any thread; it opens and closes its own connections. */
EMQ_EXPORT emq_status emq_admin_scan_queues(const emq_conf_t *conf,
                                            const char *pattern, size_t max,
                                            char ***names, size_t *n,
                                            emq_error *err);
EMQ_EXPORT void emq_queue_names_free(char **names, size_t n);

/* echomq's scripts as a server-side function library (Redis 7.0+,
 * Valkey): one library per echomq version, named "echomq_<version>", its
 * functions "emq<version>_<name>", called with FCALL (docs/SECURITY.md:
 * no credential then needs EVAL). A connection whose user may load it
 * does so by itself when it is missing; otherwise the operator loads it
 * with emq_admin_functions (echomq functions load). */

/* What emq_admin_functions does on each master. */
typedef enum emq_functions_action {
    EMQ_FUNCTIONS_SHOW = 0,   /* only look */
    EMQ_FUNCTIONS_LOAD = 1,   /* load this build's library where missing */
    EMQ_FUNCTIONS_REPLACE = 2 /* also where another build's library of this
                                 version is loaded (FUNCTION LOAD REPLACE) */
} emq_functions_action;

/* This build's library on one master, after the call. */
typedef enum emq_functions_state_kind {
    EMQ_FUNCTIONS_ABSENT = 0,      /* not loaded */
    EMQ_FUNCTIONS_LOADED = 1,      /* this build's library is there */
    EMQ_FUNCTIONS_OTHER_BUILD = 2, /* a library of this version whose text
                                      differs (another build): its callers
                                      use EVAL until it is replaced */
    EMQ_FUNCTIONS_UNSUPPORTED = 3  /* the server has no functions (6.2):
                                      scripts go by EVAL */
} emq_functions_state_kind;

typedef struct emq_functions_state {
    char node[320];   /* the master, "host:port" */
    char library[32]; /* this build's library: "echomq_1" */
    emq_functions_state_kind state;
    int changed;          /* 1: this call loaded or replaced it */
    char others[256];     /* other echomq libraries there (other versions),
                             space-separated; "..." ends a longer list */
    uint64_t reserved[4]; /* room for members to come; 0 */
} emq_functions_state;

/* Looks at (and with action, loads) this build's library on every master
 * of the server or cluster of conf's url (its queue is not used): *out
 * (free with emq_functions_states_free) gets one state per master, *n of
 * them, in slot-map order. An error reply (NOPERM: the user may not run
 * FUNCTION) is EMQ_ESERVER quoting it; a master that fails ends the walk,
 * named. Any thread; it opens and closes its own connections. */
EMQ_EXPORT emq_status emq_admin_functions(const emq_conf_t *conf,
                                          emq_functions_action action,
                                          emq_functions_state **out, size_t *n,
                                          emq_error *err);
/* Deletes the echomq library named library ("echomq_<version>", for
 * example an older version after an upgrade) from every master where it
 * is; *deleted (may be NULL) counts those. A name that is not an echomq
 * library's is EMQ_EINVAL. Processes of that version then use EVAL (or
 * load it again, if their user may). Any thread. */
EMQ_EXPORT emq_status emq_admin_functions_delete(const emq_conf_t *conf,
                                                 const char *library,
                                                 size_t *deleted,
                                                 emq_error *err);
EMQ_EXPORT void emq_functions_states_free(emq_functions_state *states);

/* One consumer of a group, as XINFO CONSUMERS reports it. */
typedef struct emq_consumer_info {
    char *name;
    uint64_t pending;     /* entries it holds */
    int64_t idle_ms;      /* since its last read or claim attempt (7.2: any
                             attempt; 7.0: a successful one) */
    int64_t inactive_ms;  /* since its last successful read or claim; -1 on
                             servers that do not report it (7.0) */
    uint64_t reserved[2]; /* room for members to come; 0 */
} emq_consumer_info;

/* One group of the queue. */
/* A group's limits, kept in the server (emq:{Q}:limits:G) and applied by
 * every consumer of the group to its reads of new entries: at most rate
 * entries handed out in any one-second window, at most max_in_flight
 * delivered and not settled (the group's pending list). 0: no limit. On a
 * topic each partition has its own. */
typedef struct emq_group_limits {
    int64_t rate;
    int64_t max_in_flight;
} emq_group_limits;

typedef struct emq_group_info {
    char *name;
    uint64_t pending; /* entries delivered and not acknowledged */
    emq_id last_delivered_id;
    int64_t entries_read;          /* -1 when the server reports nil */
    int64_t lag;                   /* entries not yet delivered to the group */
    int lag_computed;              /* 1: the lag was counted by the client
                                      (XRANGE): the server reported nil,
                                      or more than is stored after the
                                      cursor (a stale counter) */
    emq_id oldest_pending_id;      /* "" when nothing is pending */
    int64_t oldest_pending_age_ms; /* its time in a handler's hands when
                                      its consumer published one, else its
                                      idle time; -1 when none */
    size_t nconsumers;
    emq_consumer_info *consumers;
    /* The group's limits (emq_admin_group_limits), read in the same round
     * trip as its consumers; each -1 when they could not be read (an ACL
     * without HMGET on emq:{Q}:limits:*). A topic's totals: partition 0's. */
    emq_group_limits limits;
    /* Limits present in the hash but not limits (not 1-9 digits: written
     * by hand or by a lower role), read as none: EMQ_LIMIT_IGNORED_RATE
     * and/or EMQ_LIMIT_IGNORED_MAX_IN_FLIGHT; 0 when none. */
    uint64_t limits_ignored;
    uint64_t reserved[3]; /* room for members to come; 0 */
} emq_group_info;

#define EMQ_LIMIT_IGNORED_RATE 1u
#define EMQ_LIMIT_IGNORED_MAX_IN_FLIGHT 2u

/* The queue's delayed entries (emq_produce_opts) at one moment. */
typedef struct emq_delayed_info {
    uint64_t waiting;    /* entries not yet due, or due and not yet moved to
                            the stream (no consumer ran since) */
    int64_t next_due_ms; /* the earliest due time, unix ms by the server's
                            clock; -1 when none waits */
    uint64_t set_aside;  /* payloads a move found were not entries (written
                            by hand or by a lower role), kept in
                            emq:{Q}:delayed:bad; 0 when none (or not
                            readable) */
    uint64_t orphaned;   /* payloads that no waiting or held entry names
                            (its handle deleted by hand or by a lower
                            role): never handed out; 0 when none (or not
                            readable) */
} emq_delayed_info;

/* Priority levels: 0, the most urgent, to EMQ_PRIORITY_LEVELS - 1. */
#define EMQ_PRIORITY_LEVELS 10

/* A queue's priorities (emq_produce_opts.priority) at one moment. */
typedef struct emq_priority_info {
    int64_t age_ms; /* the aging step: an entry held this long more than
                       another counts one level more urgent; 0: strict
                       order (the default) */
    uint64_t held;  /* entries held (waiting for a read), all levels */
    uint64_t held_at[EMQ_PRIORITY_LEVELS]; /* by level */
    uint64_t reserved[2];                  /* room for members to come; 0 */
} emq_priority_info;

/* A queue at one moment. */
typedef struct emq_queue_info {
    char *stream; /* stream key */
    char *dead;   /* dead-letter stream key */
    int exists;   /* 0: the stream does not exist (all else empty) */
    uint64_t length;
    emq_id first_id;       /* "" when empty */
    emq_id last_id;        /* last generated ID; "" when never written */
    int64_t entries_added; /* ever added to the stream; -1 when the server
                              does not report it (Redis 6.2: no
                              entries-added in XINFO STREAM), never 0 */
    uint64_t dead_length;  /* dead letters */
    size_t ngroups;
    emq_group_info *groups;
    /* A topic (partitions P > 1): npartitions = P and partitions[i]
     * describes queue "<topic>.<i>" in full. The fields above are then the
     * totals: stream and dead are patterns ("emq:{orders.*}"), exists is 1
     * when any partition exists, length, entries_added (-1 when any
     * partition reports none) and dead_length are sums, first_id and last_id
     * are "" (IDs of different partitions do not compare), and each group
     * (matched by name) sums pending, lag and entries_read (-1 when any
     * partition reports none), ORs lag_computed, has last_delivered_id "", and
     * the oldest pending entry of all partitions (by age); each of its
     * consumers sums pending and takes the smallest idle and inactive times. A
     * plain queue has npartitions 0 and partitions NULL. */
    size_t npartitions;
    struct emq_queue_info *partitions;
    /* The server that answered (a topic: its first partition's), as its
     * connection learned it (emq_conn_server); zeroed when unknown. */
    emq_server server;
    /* The server's maxmemory-policy ("noeviction", "volatile-lru", ...)
     * as CONFIG GET told it; NULL when it did not (a user without
     * +config). A topic: its first partition's. See
     * emq_eviction_warning. */
    char *maxmemory_policy;
    /* The node that answered, "host:port" (or "unix:/path"): behind
     * Sentinel, the primary the Sentinels named at the last connect; on a
     * cluster, the master serving the queue's slot. A topic: its first
     * partition's. */
    char *endpoint;
    /* Its role by ROLE, "master" or "slave" (a replica), or NULL when ROLE
     * was refused (an ACL without it). */
    char *role;
    /* The queue's delayed entries (a topic: summed, the earliest due time
     * of all); NULL when they could not be counted (an ACL without ZCARD
     * or ZRANGE). */
    emq_delayed_info *delayed;
    /* The queue's priorities (a topic: summed, partition 0's aging
     * step); NULL when it has none (no entry was ever given a priority)
     * or they could not be read (an ACL). */
    emq_priority_info *priorities;
    uint64_t reserved[8]; /* room for members to come; 0 */
} emq_queue_info;

/* What a maxmemory-policy can do to a queue, as one sentence for an
 * operator, or NULL when it evicts nothing (noeviction) or policy is NULL
 * (unknown). A volatile-* policy evicts keys with a TTL first, and the
 * consumers' lease keys are the only keys of a queue that have one;
 * allkeys-* may evict the streams themselves. Static storage; any
 * thread. */
EMQ_EXPORT const char *emq_eviction_warning(const char *policy);

/* Describes the queue: stream, every group and consumer, dead letters;
 * for a topic every partition and the totals (see emq_queue_info).
 * A missing stream is not an error (exists = 0). A lag the server reports
 * as nil is counted by the client (lag_computed = 1), and so is one it
 * reports above what is stored after the group's cursor (a queue drained
 * to its last entry has lag 0 whatever a stale counter says). *out is
 * caller-owned; free with emq_queue_info_free. */
EMQ_EXPORT emq_status emq_admin_describe(emq_admin_t *a, emq_queue_info **out,
                                         emq_error *err);
EMQ_EXPORT void emq_queue_info_free(emq_queue_info *info);
/* The description as one JSON document (snprintf semantics: writes what
 * fits, NUL-terminated, returns the full length). A topic's document is
 * its totals with "partitions":[...] holding one document per partition;
 * the total lag of a group is its "lag" at the top level. */
EMQ_EXPORT size_t emq_queue_info_json(const emq_queue_info *info, char *buf,
                                      size_t size);

/* One pending entry of a group. */
typedef struct emq_pending_entry {
    emq_id id;
    char consumer[EMQ_NAME_MAX + 1]; /* a longer name is cut */
    int64_t idle_ms; /* the server's: reset by the holder's refresh */
    uint64_t deliveries;
    int partition;        /* a topic's partition of the entry; -1 for a queue */
    int64_t in_hand_ms;   /* time since a handler got it, as the consumer
                             publishes it (within 100 ms); -1 when it is
                             not in a handler's hands */
    uint64_t reserved[2]; /* room for members to come; 0 */
} emq_pending_entry;

/* Lists at most max pending entries of group, oldest first (a topic: all
 * partitions' by ID), optionally
 * only those of consumer (NULL: all) idle at least min_idle_ms (0: all).
 * *out (emq_free_array) holds *n entries. EMQ_ESERVER with NOGROUP when
 * the group does not exist. */
EMQ_EXPORT emq_status emq_admin_pending(emq_admin_t *a, const char *group,
                                        const char *consumer,
                                        int64_t min_idle_ms, size_t max,
                                        emq_pending_entry **out, size_t *n,
                                        emq_error *err);
/* The pending list as JSON lines, one object per entry (snprintf
 * semantics): id, consumer, idle_ms, deliveries, and partition when the
 * entry has one. */
EMQ_EXPORT size_t emq_pending_json(const emq_pending_entry *entries, size_t n,
                                   char *buf, size_t size);
/* Frees the array of emq_admin_pending; NULL is a no-op. */
EMQ_EXPORT void emq_free_array(void *array);

/* Creates group at start (new, head or an ID; required, checked before
 * sending) with XGROUP CREATE ... MKSTREAM. *created gets 1 when created,
 * 0 when it existed already (BUSYGROUP, not an error; its cursor is kept).
 * Other error replies (WRONGTYPE, NOPERM) are EMQ_ESERVER with the text. */
EMQ_EXPORT emq_status emq_admin_group_create(emq_admin_t *a, const char *group,
                                             const char *start, int *created,
                                             emq_error *err);
/* Moves group's cursor (XGROUP SETID) to "head", "tail", an entry ID, or
 * "@<unix-ms>" (the last entry before that time, so entries at or after it
 * come again). The target is checked before anything is sent (EMQ_EINVAL).
 * Refuses a group that does not exist (EMQ_ESERVER naming it; nothing is
 * created). *redeliver (may be NULL) gets the exact number of stored
 * entries after the new cursor: what the group will be handed again or
 * anew. An entry still pending after the cursor is handed out again, and
 * the server restarts its delivery count at 1 (docs/ADMIN.md). On a topic
 * every partition's cursor moves to the target (an entry ID is a
 * position in time there), after checking that each has the group, so a
 * missing group moves none; *redeliver is the sum. */
EMQ_EXPORT emq_status emq_admin_group_setid(emq_admin_t *a, const char *group,
                                            const char *to, uint64_t *redeliver,
                                            emq_error *err);
/* What emq_admin_group_setid(a, group, to) would do, without moving
 * anything: *skipped (may be NULL) gets the stored entries after the
 * group's cursor that the move passes over, never to be delivered to the
 * group; *replayed (may be NULL) those at or before it that would be
 * delivered again (or anew). At most one of them is non-zero. Exact at
 * the time it is asked (entries added meanwhile may or may not count).
 * Same checks and errors as emq_admin_group_setid; a missing group is
 * EMQ_ESERVER naming it. On a topic, the sums over the partitions. */
EMQ_EXPORT emq_status emq_admin_group_setid_effect(
    emq_admin_t *a, const char *group, const char *to, uint64_t *skipped,
    uint64_t *replayed, emq_error *err);
/* Destroys group and its pending list. Explicit, never implicit.
 * *destroyed gets 0 when there was no such group. */
EMQ_EXPORT emq_status emq_admin_group_destroy(emq_admin_t *a, const char *group,
                                              int *destroyed, emq_error *err);

/* What emq_admin_prune_consumers did. */
typedef struct emq_prune_result {
    uint64_t removed;     /* consumers deleted */
    uint64_t moved;       /* pending entries handed to other consumers */
    uint64_t kept;        /* idle consumers kept (entries left to move) */
    uint64_t reserved[4]; /* room for results to come; 0 */
} emq_prune_result;

/* Removes the consumers of group idle at least idle_ms. A consumer that
 * still holds entries first has them claimed (without adding a delivery,
 * keeping their idle time) by the most recently active consumer that is
 * not being removed, in the same atomic step as the removal, so no pending
 * entry is ever destroyed (XGROUP DELCONSUMER drops them). When every
 * consumer is idle, the ones holding entries are kept. result may be NULL.
 * A missing group or stream is EMQ_ESERVER saying so (docs/ADMIN.md). */
EMQ_EXPORT emq_status emq_admin_prune_consumers(emq_admin_t *a,
                                                const char *group,
                                                int64_t idle_ms,
                                                emq_prune_result *result,
                                                emq_error *err);

/* What emq_admin_trim_acked did. */
typedef struct emq_trim_result {
    uint64_t removed;     /* entries deleted */
    emq_id floor;         /* oldest entry some group still needs; "" when
                             none is needed */
    uint64_t held_back;   /* entries the bound asked to delete that a group
                             still needs (age bound: counted up to 100000) */
    int no_groups;        /* 1: the stream has no group; nothing removed */
    uint64_t reserved[4]; /* room for results to come; 0 */
} emq_trim_result;

/* Ack-aware retention: deletes entries below the oldest entry that any
 * group still needs (its oldest pending entry, or the entry after its
 * last-delivered ID, or on 7.0+ the oldest entry the server counts as not
 * read by it, its lag: a group whose cursor lies past those makes the
 * call fail with EMQ_ESERVER naming it, nothing deleted), optionally only
 * as far as a bound asks: keep at most
 * maxlen entries (-1: no length bound) and/or none older than max_age_ms
 * (-1: no age bound). With both bounds -1, everything no group needs is
 * deleted. One script, atomic with respect to producers and consumers. A
 * stream without groups is left alone. On a topic: removed and held_back
 * are sums, floor is "" (IDs of partitions do not compare), no_groups is
 * 1 when no partition has a group; the bounds apply to each partition. */
EMQ_EXPORT emq_status emq_admin_trim_acked(emq_admin_t *a, int64_t maxlen,
                                           int64_t max_age_ms,
                                           emq_trim_result *result,
                                           emq_error *err);

/* One dead letter with its origin (docs/KEYSPACE.md). */
typedef struct emq_dead_letter {
    emq_id id;        /* in the dead-letter stream */
    emq_id origin_id; /* in the queue's stream */
    char *group;
    char *consumer;
    uint64_t deliveries;
    char *reason;
    size_t nfields;
    emq_field *fields; /* the original entry's fields */
    int partition;     /* a topic's partition of the letter; -1 for a
                          queue */
    /* Room for members to come; 0. */
    uint32_t reserved32;
    uint64_t reserved[2];
} emq_dead_letter;

/* Lists at most max dead letters (0: all), oldest first (a topic: all
 * partitions' by ID, each with its partition). *out holds *n
 * (NULL when there are none), caller-owned: the strings and fields point
 * into the same block; free it with emq_dead_letters_free. */
EMQ_EXPORT emq_status emq_admin_dead_list(emq_admin_t *a, size_t max,
                                          emq_dead_letter **out, size_t *n,
                                          emq_error *err);
/* emq_admin_dead_list of the dead letters after dead-letter ID after
 * (exclusive; NULL: from the first), for following new ones. EMQ_EINVAL
 * for an after that is not an ID, and for an after on a topic handle
 * (follow each partition's handle, emq_admin_partition). */
EMQ_EXPORT emq_status emq_admin_dead_list_after(emq_admin_t *a,
                                                const char *after, size_t max,
                                                emq_dead_letter **out,
                                                size_t *n, emq_error *err);
EMQ_EXPORT void emq_dead_letters_free(emq_dead_letter *letters, size_t n);
/* The dead letters as JSON lines (snprintf semantics), one object each:
 * {"id","deliveries","fields":{...}} as emq_entry_json writes them, then
 * "origin_id", "group", "consumer", "reason", and "partition" when the
 * letter has one. Binary-safe: see docs/CLI.md
 * for the encoding of values that are not UTF-8. */
EMQ_EXPORT size_t emq_dead_letters_json(const emq_dead_letter *letters,
                                        size_t n, char *buf, size_t size);
/* Puts dead letters back on the queue's stream with their original fields
 * (a new ID) and removes them from the dead letters, each in one atomic
 * step. ids: dead-letter IDs; nids 0 means all (a topic: every
 * partition's, each onto its own partition; IDs need the partition's
 * handle). *requeued gets how many moved; an ID not found is reported in
 * err (EMQ_EINVAL) after the others moved. A letter the queue's consumers
 * cannot have written is refused and left in place, reported the same way
 * (EMQ_EINVAL naming the first): one without the five origin pairs, or
 * whose origin ID the stream never issued (a worker credential can add
 * dead letters; docs/SECURITY.md). emq_admin_dead_requeue_flags with
 * EMQ_REQUEUE_FORCE skips these checks. */
EMQ_EXPORT emq_status emq_admin_dead_requeue(emq_admin_t *a,
                                             const char *const *ids,
                                             size_t nids, uint64_t *requeued,
                                             emq_error *err);
/* emq_admin_dead_requeue_flags: requeue a letter even when the checks
 * above refuse it. */
#define EMQ_REQUEUE_FORCE 1u
/* emq_admin_dead_requeue with flags (EMQ_REQUEUE_FORCE, or 0). */
EMQ_EXPORT emq_status emq_admin_dead_requeue_flags(emq_admin_t *a,
                                                   const char *const *ids,
                                                   size_t nids, unsigned flags,
                                                   uint64_t *requeued,
                                                   emq_error *err);
/* Deletes every dead letter; *removed (may be NULL) gets how many, 0 when
 * there were none. */
EMQ_EXPORT emq_status emq_admin_dead_purge(emq_admin_t *a, uint64_t *removed,
                                           emq_error *err);

/* ---- group limits (docs/QUEUES.md) --------------------------------------- */

/* Reads group's limits into *out (may be NULL); with set not NULL, first
 * records set's (each > 0: that limit; 0: none; -1: left as it is), in
 * the same round trip. A consumer of the group that has a limit applies a
 * change at its next read; one that started while the group had none
 * applies limits from its next start. A topic: every partition is set,
 * *out is partition 0's. EMQ_EINVAL (nothing sent) for a bad group name
 * or a value below -1. Any thread that owns a. */
EMQ_EXPORT emq_status emq_admin_group_limits(emq_admin_t *a, const char *group,
                                             const emq_group_limits *set,
                                             emq_group_limits *out,
                                             emq_error *err);

/* ---- priorities (docs/QUEUES.md) ---------------------------------------- */

/* Reads the queue's priorities into *out (may be NULL); with set_age_ms
 * >= 0, first records that aging step (ms; 0: strict order), which makes
 * the queue one with priorities if it was not (every entry is then held,
 * at level 5 when given none). A step applies to entries held after it
 * is set. *has (may be NULL) is 1 when the queue has priorities, else 0
 * (*out zeroed). A topic: every partition is set, *out sums them. One
 * round trip per partition. EMQ_EINVAL for set_age_ms below -1 or above
 * 2^53. Any thread that owns a. */
EMQ_EXPORT emq_status emq_admin_priorities(emq_admin_t *a, int64_t set_age_ms,
                                           emq_priority_info *out, int *has,
                                           emq_error *err);

/* ---- delayed entries and cancellation (docs/QUEUES.md) ------------------ */

/* Counts the queue's delayed entries into *out (a topic: the sum over its
 * partitions, the earliest due time of all). One round trip per
 * partition (ZCARD, ZRANGE); nothing waiting is not an error. Any
 * thread that owns a. */
EMQ_EXPORT emq_status emq_admin_delayed(emq_admin_t *a, emq_delayed_info *out,
                                        emq_error *err);

/* What emq_admin_cancel did with one ID. */
typedef enum emq_cancel_outcome {
    EMQ_CANCEL_REMOVED = 0,   /* removed: a delayed entry that was waiting,
                                 or a stream entry no group had been handed
                                 (above every group's cursor) */
    EMQ_CANCEL_DELIVERED = 1, /* left alone: some group's cursor is at or
                                 past it (handed out, or skipped by a
                                 group created after it) */
    EMQ_CANCEL_MISSING = 2    /* neither waiting nor in the stream: moved
                                 to the stream (its handle is gone then;
                                 cancel it by its stream ID), cancelled,
                                 trimmed, or never there */
} emq_cancel_outcome;

/* Most IDs one emq_admin_cancel call takes (one atomic step). */
#define EMQ_CANCEL_MAX 1000

/* Cancels entries not yet handed to any group: ids[0..nids) are delayed
 * entries' handles ("delayed-..." from emq_produce_ex) and stream IDs
 * ("ms-seq"), 1 to EMQ_CANCEL_MAX of them; all in one atomic step, so no
 * consumer is handed an entry while it is being cancelled. outcomes
 * (nids slots, may be NULL) gets what happened to each, *removed (may be
 * NULL) how many were removed; nothing else is touched. EMQ_EINVAL before
 * anything is sent for an ID of neither shape (naming it), nids 0 or
 * above the most, or a topic handle (IDs are a partition's: use
 * emq_admin_partition). A stream entry removed is XDEL'd: on Redis 7.0+
 * a group's lag then reads nil until its cursor passes the gap, and
 * emq_admin_describe counts it (lag_computed). */
EMQ_EXPORT emq_status emq_admin_cancel(emq_admin_t *a, const char *const *ids,
                                       size_t nids,
                                       emq_cancel_outcome *outcomes,
                                       uint64_t *removed, emq_error *err);

#ifdef __cplusplus
}
#endif

#endif /* ECHOMQ_H */
