/* SPDX-License-Identifier: BSD-3-Clause */
/* resp: the RESP2/RESP3 reply parser and the command encoder.
 *
 * Internal header (not installed). This layer never touches a socket: bytes
 * go in through emq__resp_feed (or emq__resp_reserve + emq__resp_commit, which
 * let a caller read(2) straight into the reader's buffer) and replies come
 * out of emq__resp_next. Parsing resumes at any byte boundary.
 *
 * Memory: each reply is one allocation (its node array). Strings are views
 * into the reader's receive chunk; the reply holds a reference on that
 * chunk, so it stays valid after further feeds and after the reader is
 * freed, until emq_reply_free.
 *
 * Limits: a bulk length, an aggregate element count or a nesting depth
 * beyond its limit is a protocol error naming the limit and its value. No
 * memory is allocated for an aggregate until all of its bytes have arrived,
 * so a hostile length costs nothing but the bytes actually received.
 */
#ifndef EMQ_RESP_H
#define EMQ_RESP_H

#include "../base/base.h"

/* Default limits. max_bulk matches redis-server's proto-max-bulk-len. */
#define EMQ_RESP_DEFAULT_MAX_BULK ((size_t)512 * 1024 * 1024)
#define EMQ_RESP_DEFAULT_MAX_DEPTH 16
#define EMQ_RESP_DEFAULT_MAX_ELEMENTS ((size_t)1 << 24)
/* Most memory one reply (with its attributes) may take built: its bytes
 * plus a node (sizeof(struct emq_reply), 40 bytes on 64-bit) per element.
 * Sized for a work queue: an endless but well-formed reply (every element
 * within the other limits) ends at a bound a service can afford, and an
 * entry larger than this is dead-lettered, never read. */
#define EMQ_RESP_DEFAULT_MAX_REPLY ((size_t)128 * 1024 * 1024)
/* A receive chunk larger than this is released once it holds no unparsed
 * bytes, so one huge reply does not pin memory for the connection's life. */
#define EMQ_RESP_IDLE_CHUNK_MAX ((size_t)64 * 1024)
/* Longest header line (type byte, length or number, CRLF) accepted. Simple
 * strings and errors are lines too, so this also bounds them. */
#define EMQ_RESP_DEFAULT_MAX_LINE ((size_t)64 * 1024)

typedef struct emq__resp_limits {
    size_t max_bulk;     /* longest bulk/blob/verbatim string, bytes */
    size_t max_depth;    /* deepest nesting of aggregates */
    size_t max_elements; /* most elements in one aggregate (map: pairs*2) */
    size_t max_line;     /* longest simple line (status, error, number) */
    size_t max_reply;    /* most bytes of one reply; 0: no limit */
} emq__resp_limits;

/* Fills l with the defaults above. */
void emq__resp_limits_default(emq__resp_limits *l);

typedef struct emq__resp_reader emq__resp_reader;

/* Creates a reader with the given limits (NULL: defaults). Caller owns the
 * result; free with emq__resp_reader_free. NULL when out of memory. */
emq__resp_reader *emq__resp_reader_new(const emq__resp_limits *limits);
/* Frees the reader; replies already returned stay valid. NULL is a no-op. */
void emq__resp_reader_free(emq__resp_reader *r);

/* Copies len bytes into the reader. EMQ_ENOMEM, or the sticky error once
 * the reader has failed. */
emq_status emq__resp_feed(emq__resp_reader *r, const char *buf, size_t len,
                          emq_error *err);
/* Returns in *space at least min writable bytes at the end of the reader's
 * buffer (*avail gets how many), for a read(2) straight into it. Follow
 * with emq__resp_commit(r, n) for the n bytes actually written. */
emq_status emq__resp_reserve(emq__resp_reader *r, size_t min, char **space,
                             size_t *avail, emq_error *err);
void emq__resp_commit(emq__resp_reader *r, size_t n);

/* Parses the next complete reply.
 *   EMQ_OK:     *out is a caller-owned reply; free with emq_reply_free.
 *   EMQ_EAGAIN: the bytes so far do not hold a whole reply; feed more.
 *   EMQ_EPROTO: malformed input or a limit exceeded (err names which);
 *               the reader is then broken for good (sticky).
 *   EMQ_ENOMEM: out of memory; nothing is consumed, the call may be
 *               repeated once memory is available.
 * *out is NULL whenever the status is not EMQ_OK. */
emq_status emq__resp_next(emq__resp_reader *r, emq_reply **out, emq_error *err);
/* From now on emq__resp_next skips RESP3 push messages (a top-level '>')
 * without building them, counting them (a connection subscribed to
 * nothing: a storm of them costs no memory). */
void emq__resp_drop_pushes(emq__resp_reader *r);
/* Push messages skipped so far. */
uint64_t emq__resp_pushes_dropped(const emq__resp_reader *r);
/* 1 when the bytes received hold the whole next reply (emq__resp_next
 * would return it, or fail on it) without waiting for more; 0 when more
 * must come first. Scans only (nothing is built); the scan is not done
 * twice. */
int emq__resp_whole(emq__resp_reader *r);
/* Bytes received and not yet returned as replies. */
size_t emq__resp_buffered(const emq__resp_reader *r);
/* Non-zero once the reader has failed; every later call returns it. */
emq_status emq__resp_failed(const emq__resp_reader *r);
/* 1 when the reader failed (EMQ_EPROTO) because one reply grew past
 * limits.max_reply (resp.max_reply_bytes), and not for another reason:
 * a well-formed reply that was merely too large, which a smaller request
 * may avoid. 0 while healthy. */
int emq__resp_over_max_reply(const emq__resp_reader *r);

/* The text of a reply for a message: the string of a STATUS, ERROR or
 * STRING reply made printable (emq__printable), else "(reply of type N)".
 * Writes into buf (size bytes) and returns it. */
char *emq__reply_text(const emq_reply *r, char *buf, size_t size);
/* Points out[0..n) at the name/value pairs of arr, an array of at least
 * 2n strings (the fields of a stream entry), in one pass: a string
 * without text reads "". -1 when one of them is not a string (out is
 * then partly written). The views live as long as arr's reply. */
int emq__reply_field_views(const emq_reply *arr, emq_field *out, size_t n);
/* 1 when r is an error reply of code word (its first word), or a script
 * error whose text names it (scripts wrap the errors of the commands they
 * call, differently on each server: 6.2 writes "... -READONLY ..."). */
int emq__reply_mentions(const emq_reply *r, const char *word);
/* 1 when r is an error reply that means "not now, the command was not
 * run" and the same command may succeed later: LOADING, BUSY, TRYAGAIN,
 * CLUSTERDOWN, MASTERDOWN, MISCONF, NOREPLICAS. */
int emq__reply_transient(const emq_reply *r);
/* Sets err->reply_code to error reply r's first word (its code); "" when
 * r is not an error reply. The rest of err is left as it is. */
void emq__reply_code_copy(emq_error *err, const emq_reply *r);
/* The one way an error reply becomes a failure: status code with the
 * retriable flag given (EMQ_EAUTH for a refused login, EMQ_EINVAL for a
 * database the server lacks, a retriable EMQ_EIO for "not now"), the
 * message the caller's words (fmt) then ": " and the reply's text,
 * reply_code the reply's code. Returns code. */
emq_status emq__reply_error_as(emq_error *err, emq_status code, int retriable,
                               const emq_reply *r, const char *fmt, ...)
    EMQ_PRINTF(5, 6);
/* emq__reply_error_as for the common case: EMQ_ESERVER, not retriable.
 * Returns EMQ_ESERVER. */
emq_status emq__reply_error_set(emq_error *err, const emq_reply *r,
                                const char *fmt, ...) EMQ_PRINTF(3, 4);

/* Appends the RESP encoding of a command (an array of bulk strings) to out.
 * argvlen may be NULL when every argument is NUL-terminated. Binary-safe.
 * EMQ_EINVAL for argc < 1 or a NULL argument; EMQ_ELIMIT/EMQ_ENOMEM from
 * the buffer, which is then unchanged. */
emq_status emq__resp_encode(emq__buf *out, int argc, const char *const *argv,
                            const size_t *argvlen, emq_error *err);
/* Exact number of bytes emq__resp_encode would append. */
size_t emq__resp_encoded_len(int argc, const char *const *argv,
                             const size_t *argvlen);

#endif /* EMQ_RESP_H */
