/* SPDX-License-Identifier: BSD-3-Clause */
/* reader.c: the incremental RESP2/RESP3 reply parser.
 *
 * Bytes arrive in a receive chunk; emq__resp_next parses one reply in two
 * passes. The scan pass validates every header against the limits and
 * counts nodes, and can stop at any byte and resume later: it keeps an
 * explicit stack of "elements still expected" per open aggregate and
 * restarts at the first element not yet complete, so no byte is scanned
 * twice except the header of a bulk string whose payload is still in
 * flight. Once the scan reaches the end of a reply, the build pass walks
 * the same (now trusted) bytes and fills one allocation of nodes whose
 * strings point into the chunk. The reader never touches a socket and
 * never allocates memory in proportion to a length it was told but has
 * not received.
 */
#include "reply.h"

#include <limits.h>
#include <locale.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define INITIAL_CHUNK ((size_t)16 * 1024)
/* Longest text accepted for a RESP3 double: "%.17g" needs 24 bytes; extra
 * room for servers that print more digits. */
#define MAX_DOUBLE_TEXT 128

typedef struct scan_frame {
    size_t remaining; /* elements (map: keys + values) still expected */
    int is_attribute; /* an attribute is not a value of its parent */
} scan_frame;

struct emq__resp_reader {
    emq__resp_limits limits;
    resp_chunk *chunk; /* current receive chunk, or NULL */
    size_t len;        /* bytes of chunk->data holding input */
    size_t pos;        /* start of the first reply not yet returned */
    size_t scan;       /* where the scan pass resumes (pos <= scan <= len) */
    size_t nodes;      /* nodes counted so far in the current reply */
    size_t need;       /* bytes from pos the current element needs, if known */
    size_t depth;      /* open aggregates in stack */
    int complete;      /* [pos, scan) holds a whole reply not yet built */
    int drop_pushes;   /* skip RESP3 push messages without building them */
    uint64_t pushes_dropped;
    scan_frame *stack;  /* limits.max_depth frames */
    emq_status failed;  /* sticky error, EMQ_OK while healthy */
    int over_max_reply; /* failed because a reply outgrew limits.max_reply */
    char failure[EMQ_ERROR_MESSAGE_MAX]; /* the sticky error's message */
};

void emq__resp_limits_default(emq__resp_limits *l) {
    l->max_bulk = EMQ_RESP_DEFAULT_MAX_BULK;
    l->max_depth = EMQ_RESP_DEFAULT_MAX_DEPTH;
    l->max_elements = EMQ_RESP_DEFAULT_MAX_ELEMENTS;
    l->max_line = EMQ_RESP_DEFAULT_MAX_LINE;
    l->max_reply = EMQ_RESP_DEFAULT_MAX_REPLY;
}

emq__resp_reader *emq__resp_reader_new(const emq__resp_limits *limits) {
    emq__resp_reader *r = emq__calloc(1, sizeof *r);
    if (r == NULL)
        return NULL;
    if (limits)
        r->limits = *limits;
    else
        emq__resp_limits_default(&r->limits);
    if (r->limits.max_depth == 0)
        r->limits.max_depth = 1;
    if (r->limits.max_line < 16)
        r->limits.max_line = 16;
    r->stack = emq__alloc(r->limits.max_depth * sizeof *r->stack);
    if (r->stack == NULL) {
        emq__free(r);
        return NULL;
    }
    return r;
}

void emq__resp_reader_free(emq__resp_reader *r) {
    if (r == NULL)
        return;
    emq__resp_chunk_release(r->chunk);
    emq__free(r->stack);
    emq__free(r);
}

size_t emq__resp_buffered(const emq__resp_reader *r) { return r->len - r->pos; }

emq_status emq__resp_failed(const emq__resp_reader *r) { return r->failed; }

int emq__resp_over_max_reply(const emq__resp_reader *r) {
    return r->failed != EMQ_OK && r->over_max_reply;
}

static emq_status sticky(const emq__resp_reader *r, emq_error *err) {
    return emq__error_set(err, r->failed, 0, "%s", r->failure);
}

/* Records a protocol error; every later call returns it. */
static emq_status fail(emq__resp_reader *r, emq_error *err, const char *fmt,
                       ...) EMQ_PRINTF(3, 4);
static emq_status fail(emq__resp_reader *r, emq_error *err, const char *fmt,
                       ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->failure, sizeof r->failure, fmt, ap);
    va_end(ap);
    r->failed = EMQ_EPROTO;
    return sticky(r, err);
}

/* What the reply in progress costs in memory once built, with wire bytes
 * of it received: the bytes (the nodes' strings view them) and a node
 * per element counted so far. Each element takes at least 3 bytes on the
 * wire, so this does not overflow. */
static size_t reply_cost(const emq__resp_reader *r, size_t wire) {
    return wire + r->nodes * sizeof(struct emq_reply);
}

/* Records that a reply outgrew limits.max_reply (a protocol error, and
 * emq__resp_over_max_reply). */
static emq_status fail_too_large(emq__resp_reader *r, emq_error *err) {
    r->over_max_reply = 1;
    return fail(r, err,
                "protocol error: a reply of more than max_reply %zu bytes "
                "(resp.max_reply_bytes)",
                r->limits.max_reply);
}

/* Makes room for at least min more bytes after r->len. Replies may view
 * the current chunk, so it is moved or grown in place only while the
 * reader holds the sole reference; otherwise the unparsed tail is copied
 * into a fresh chunk and the old one lives on until its replies go. */
static emq_status make_room(emq__resp_reader *r, size_t min, emq_error *err) {
    resp_chunk *c = r->chunk;
    if (c && c->cap - r->len >= min)
        return EMQ_OK;
    size_t unparsed = r->len - r->pos;
    int sole = c && emq__resp_chunk_sole(c);
    if (sole && r->pos > 0 && c->cap - unparsed >= min &&
        c->cap <= EMQ_RESP_IDLE_CHUNK_MAX) {
        memmove(c->data, c->data + r->pos, unparsed);
        r->len = unparsed;
        r->scan -= r->pos;
        r->pos = 0;
        return EMQ_OK;
    }
    /* Everything from pos is the one reply in progress (the caller reads
     * more only when no whole reply is buffered). */
    if (r->limits.max_reply &&
        reply_cost(r, unparsed + min) > r->limits.max_reply)
        return fail_too_large(r, err);
    size_t want = unparsed + min;
    /* A bulk in flight: grow toward its announced size, but never beyond
     * twice what has arrived (a 12-byte header announcing 512 MiB
     * reserves nothing big before the bytes come). */
    if (r->need > want) {
        size_t paced = 2 * unparsed + min;
        want = r->need < paced ? r->need : paced;
    }
    size_t cap = INITIAL_CHUNK;
    while (cap < want) {
        if (cap > SIZE_MAX / 4)
            return emq__error_set(err, EMQ_ENOMEM, 0,
                                  "receive buffer of %zu bytes is too large",
                                  want);
        cap *= 2;
    }
    resp_chunk *fresh;
    if (sole && r->pos == 0) {
        fresh = emq__resp_chunk_grow(c, cap);
        if (fresh == NULL)
            return emq__error_set(err, EMQ_ENOMEM, 0,
                                  "out of memory growing the receive buffer "
                                  "to %zu bytes",
                                  cap);
        r->chunk = fresh;
        return EMQ_OK;
    }
    fresh = emq__resp_chunk_new(cap);
    if (fresh == NULL)
        return emq__error_set(err, EMQ_ENOMEM, 0,
                              "out of memory allocating a receive buffer of "
                              "%zu bytes",
                              cap);
    if (unparsed)
        memcpy(fresh->data, c->data + r->pos, unparsed);
    emq__resp_chunk_release(c);
    r->chunk = fresh;
    r->scan -= r->pos;
    r->len = unparsed;
    r->pos = 0;
    return EMQ_OK;
}

emq_status emq__resp_reserve(emq__resp_reader *r, size_t min, char **space,
                             size_t *avail, emq_error *err) {
    if (r->failed)
        return sticky(r, err);
    /* Everything parsed: start over at the front, or drop a big chunk. */
    if (r->chunk && r->pos == r->len && emq__resp_chunk_sole(r->chunk)) {
        if (r->chunk->cap > EMQ_RESP_IDLE_CHUNK_MAX) {
            emq__resp_chunk_release(r->chunk);
            r->chunk = NULL;
        }
        r->len = r->pos = r->scan = 0;
    }
    if (min == 0)
        min = 1;
    emq_status st = make_room(r, min, err);
    if (st != EMQ_OK)
        return st;
    *space = r->chunk->data + r->len;
    *avail = r->chunk->cap - r->len;
    return EMQ_OK;
}

void emq__resp_commit(emq__resp_reader *r, size_t n) { r->len += n; }

emq_status emq__resp_feed(emq__resp_reader *r, const char *buf, size_t len,
                          emq_error *err) {
    char *space = NULL;
    size_t avail = 0;
    emq_status st = emq__resp_reserve(r, len, &space, &avail, err);
    if (st != EMQ_OK)
        return st;
    if (len)
        memcpy(space, buf, len);
    emq__resp_commit(r, len);
    return EMQ_OK;
}

/* ---- scan pass ---------------------------------------------------------- */

/* Parses a strict decimal integer: optional '-', 1 to 19 digits, nothing
 * else. Returns 0 on success. */
static int parse_int(const char *p, size_t n, long long *out) {
    int neg = 0;
    if (n > 0 && *p == '-') {
        neg = 1;
        p++;
        n--;
    }
    if (n == 0 || n > 19)
        return -1;
    unsigned long long v = 0;
    for (size_t i = 0; i < n; i++) {
        if (p[i] < '0' || p[i] > '9')
            return -1;
        v = v * 10 + (unsigned long long)(p[i] - '0');
    }
    if (neg ? v > (unsigned long long)LLONG_MAX + 1 : v > LLONG_MAX)
        return -1;
    *out = neg ? (v == 0 ? 0 : -(long long)(v - 1) - 1) : (long long)v;
    return 0;
}

/* 1 for the types whose line is one integer: a length, a count or a
 * number (looked up, as it is asked twice for every element). */
static const unsigned char int_line_type[256] = {
    [':'] = 1, ['$'] = 1, ['!'] = 1, ['='] = 1, ['*'] = 1,
    ['%'] = 1, ['~'] = 1, ['>'] = 1, ['|'] = 1};

static int int_line(char type) { return int_line_type[(unsigned char)type]; }

/* The common integer line, read in one pass: an optional '-' and 1 to 18
 * digits (too few to overflow), then '\r', within avail bytes. Returns
 * the offset of the '\r' with *value set, or 0 for any other line, which
 * the general path then judges (and names what is wrong with it). */
static size_t short_int_line(const char *p, size_t avail, long long *value) {
    /* Up to four digits first, with no bound to check per digit: the
     * length or count of most elements. */
    if (avail > 4) {
        unsigned v = 0;
        size_t i = 0;
        for (; i < 4; i++) {
            unsigned d = (unsigned)(unsigned char)p[i] - '0';
            if (d > 9)
                break;
            v = v * 10 + d;
        }
        if (i > 0 && p[i] == '\r') {
            *value = v;
            return i;
        }
    }
    size_t i = avail > 0 && p[0] == '-';
    size_t first = i;
    unsigned long long v = 0;
    for (; i < avail && i < first + 18; i++) {
        unsigned d = (unsigned)(unsigned char)p[i] - '0';
        if (d > 9)
            break;
        v = v * 10 + d;
    }
    if (i == first || i >= avail || p[i] != '\r')
        return 0;
    *value = first ? -(long long)v : (long long)v;
    return i;
}

static locale_t c_locale;
static pthread_once_t c_locale_once = PTHREAD_ONCE_INIT;
static void make_c_locale(void) {
    c_locale = newlocale(LC_NUMERIC_MASK, "C", (locale_t)0);
}

/* Parses RESP3 double text ("1.5", "-inf", "nan", "1e-3") independent of
 * the process locale. Returns 0 on success. */
static int parse_double(const char *p, size_t n, double *out) {
    char text[MAX_DOUBLE_TEXT + 1];
    if (n == 0 || n > MAX_DOUBLE_TEXT)
        return -1;
    memcpy(text, p, n);
    text[n] = '\0';
    pthread_once(&c_locale_once, make_c_locale);
    char *end;
    /* Out-of-range text yields +-HUGE_VAL or 0, which is what we want. */
    /* uselocale is per thread, so other threads keep their locale. */
    locale_t previous = c_locale ? uselocale(c_locale) : (locale_t)0;
    double v = strtod(text, &end);
    if (previous)
        uselocale(previous);
    if (end != text + n)
        return -1;
    *out = v;
    return 0;
}

/* Digits with an optional sign: the text of a RESP3 big number. */
static int valid_bignum(const char *p, size_t n) {
    if (n > 0 && (*p == '-' || *p == '+')) {
        p++;
        n--;
    }
    if (n == 0)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (p[i] < '0' || p[i] > '9')
            return 0;
    return 1;
}

/* The type byte as a message shows it: 'x' when printable, else 0xNN, so
 * a hostile byte never puts a control character into an error message. */
static const char *type_shown(char t, char buf[8]) {
    unsigned char c = (unsigned char)t;
    if (c >= 0x20 && c < 0x7f)
        snprintf(buf, 8, "'%c'", t);
    else
        snprintf(buf, 8, "0x%02x", c);
    return buf;
}

static const char *type_name(char t) {
    switch (t) {
    case '$':
        return "bulk string";
    case '!':
        return "blob error";
    case '=':
        return "verbatim string";
    case '*':
        return "array";
    case '%':
        return "map";
    case '~':
        return "set";
    case '>':
        return "push";
    case '|':
        return "attribute";
    default:
        return "reply";
    }
}

/* Outcome of scanning one element. */
enum { SCAN_OK, SCAN_MORE, SCAN_FAIL };

/* Scans the element starting at r->scan. SCAN_OK: the element's header
 * (and for strings its payload) is complete and valid; r->scan moved past
 * it, a frame was pushed for a non-empty aggregate (*opened = 1).
 * SCAN_MORE: input ends inside it; nothing changed. SCAN_FAIL: invalid. */
static int scan_element(emq__resp_reader *r, int *opened, emq_error *err) {
    const char *data = r->chunk->data;
    size_t at = r->scan;
    *opened = 0;
    if (at >= r->len)
        return SCAN_MORE;
    char type = data[at];
    size_t line = at + 1; /* first byte after the type byte */
    long long n = 0;
    int counted = 0; /* n holds the line's integer already */
    const char *cr = NULL;
    if (int_line(type)) {
        size_t avail = r->len - line;
        size_t digits = short_int_line(
            data + line,
            avail < r->limits.max_line ? avail : r->limits.max_line, &n);
        if (digits > 0) {
            cr = data + line + digits;
            counted = 1;
        }
    }
    if (cr == NULL) {
        size_t limit = r->len - line;
        if (limit > r->limits.max_line + 1)
            limit = r->limits.max_line + 1;
        cr = memchr(data + line, '\r', limit);
    }
    if (cr == NULL) {
        if (r->len - line > r->limits.max_line) {
            char shown[8];
            fail(r, err,
                 "protocol error: a %s line is longer than max_line %zu",
                 type_shown(type, shown), r->limits.max_line);
            return SCAN_FAIL;
        }
        return SCAN_MORE;
    }
    size_t cr_at = (size_t)(cr - data);
    if (cr_at + 1 >= r->len)
        return SCAN_MORE;
    if (data[cr_at + 1] != '\n') {
        char shown[8];
        fail(r, err, "protocol error: expected CRLF after a %s line",
             type_shown(type, shown));
        return SCAN_FAIL;
    }
    const char *text = data + line;
    size_t text_len = cr_at - line;
    size_t next = cr_at + 2;
    double d;

    switch (type) {
    case '+':
    case '-':
        break;
    case ':':
        if (!counted && parse_int(text, text_len, &n) != 0) {
            fail(r, err, "protocol error: invalid integer reply");
            return SCAN_FAIL;
        }
        break;
    case ',':
        if (parse_double(text, text_len, &d) != 0) {
            fail(r, err, "protocol error: invalid double reply");
            return SCAN_FAIL;
        }
        break;
    case '(':
        if (!valid_bignum(text, text_len)) {
            fail(r, err, "protocol error: invalid big number reply");
            return SCAN_FAIL;
        }
        break;
    case '#':
        if (text_len != 1 || (text[0] != 't' && text[0] != 'f')) {
            fail(r, err, "protocol error: boolean must be #t or #f");
            return SCAN_FAIL;
        }
        break;
    case '_':
        if (text_len != 0) {
            fail(r, err, "protocol error: null '_' must have no payload");
            return SCAN_FAIL;
        }
        break;
    case '$':
    case '!':
    case '=':
        if (!counted && parse_int(text, text_len, &n) != 0) {
            fail(r, err, "protocol error: invalid %s length", type_name(type));
            return SCAN_FAIL;
        }
        if (n == -1 && type == '$')
            break; /* RESP2 null bulk string */
        if (n < 0) {
            fail(r, err, "protocol error: negative %s length %lld",
                 type_name(type), n);
            return SCAN_FAIL;
        }
        if ((unsigned long long)n > r->limits.max_bulk) {
            fail(r, err, "protocol error: %s length %lld exceeds max_bulk %zu",
                 type_name(type), n, r->limits.max_bulk);
            return SCAN_FAIL;
        }
        if (r->len - next < (size_t)n + 2) {
            r->need = next - r->pos + (size_t)n + 2;
            return SCAN_MORE;
        }
        if (data[next + n] != '\r' || data[next + n + 1] != '\n') {
            fail(r, err,
                 "protocol error: %s of %lld bytes not followed by "
                 "CRLF",
                 type_name(type), n);
            return SCAN_FAIL;
        }
        if (type == '=' && (n < 4 || data[next + 3] != ':')) {
            fail(r, err,
                 "protocol error: verbatim string lacks its "
                 "'xxx:' format prefix");
            return SCAN_FAIL;
        }
        next += (size_t)n + 2;
        break;
    case '*':
    case '%':
    case '~':
    case '>':
    case '|': {
        if (!counted && parse_int(text, text_len, &n) != 0) {
            fail(r, err, "protocol error: invalid %s length", type_name(type));
            return SCAN_FAIL;
        }
        if (n == -1 && type == '*')
            break; /* RESP2 null array */
        if (n < 0) {
            fail(r, err, "protocol error: negative %s length %lld",
                 type_name(type), n);
            return SCAN_FAIL;
        }
        int paired = type == '%' || type == '|';
        size_t max = r->limits.max_elements;
        if ((unsigned long long)n > (paired ? max / 2 : max)) {
            fail(r, err,
                 "protocol error: %s of %lld %s exceeds max_elements "
                 "%zu",
                 type_name(type), n, paired ? "pairs" : "elements", max);
            return SCAN_FAIL;
        }
        if (r->depth >= r->limits.max_depth) {
            fail(r, err,
                 "protocol error: replies nested deeper than "
                 "max_depth %zu",
                 r->limits.max_depth);
            return SCAN_FAIL;
        }
        size_t elements = (size_t)n * (paired ? 2 : 1);
        if (elements > 0) {
            r->stack[r->depth].remaining = elements;
            r->stack[r->depth].is_attribute = type == '|';
            r->depth++;
            *opened = 1;
        } else if (type == '|') {
            *opened = 2; /* an empty attribute: annotates the next value */
        }
        break;
    }
    case '?':
        fail(r, err,
             "protocol error: streamed (chunked) replies are not "
             "supported");
        return SCAN_FAIL;
    default:
        fail(r, err, "protocol error: unknown reply type byte 0x%02x",
             (unsigned)(unsigned char)type);
        return SCAN_FAIL;
    }
    r->nodes++;
    /* Counted as it is scanned: a reply of many small elements costs far
     * more built than on the wire (a 4-byte ":1" becomes a node). */
    if (r->limits.max_reply &&
        reply_cost(r, next - r->pos) > r->limits.max_reply) {
        fail_too_large(r, err);
        return SCAN_FAIL;
    }
    r->scan = next;
    r->need = 0;
    return SCAN_OK;
}

/* Scans until one whole reply lies in [pos, scan). Returns EMQ_OK when it
 * does, EMQ_EAGAIN when more input is needed, EMQ_EPROTO on bad input. */
static emq_status scan_reply(emq__resp_reader *r, emq_error *err) {
    for (;;) {
        int opened;
        int rc = scan_element(r, &opened, err);
        if (rc == SCAN_MORE)
            return EMQ_EAGAIN;
        if (rc == SCAN_FAIL)
            return EMQ_EPROTO;
        if (opened)
            continue; /* its elements follow; an attribute's value too */
        /* A value completed: close every aggregate it completes. A closed
         * attribute is not a value of its parent, so it stops here. */
        int attribute_closed = 0;
        while (r->depth > 0) {
            scan_frame *f = &r->stack[r->depth - 1];
            if (--f->remaining > 0)
                break;
            r->depth--;
            if (f->is_attribute) {
                attribute_closed = 1;
                break;
            }
        }
        if (r->depth == 0 && !attribute_closed)
            return EMQ_OK;
    }
}

/* ---- build pass --------------------------------------------------------- */

/* Builds the bulk string at p (a '$' line with a length of 0 or more,
 * validated by the scan pass) into slot, without the general path's
 * call: most elements of a reply are these. Returns the first byte after
 * it. */
static const char *build_bulk(const char *p, struct emq_reply *slot) {
    const char *q = p + 1;
    size_t n = 0;
    for (; *q != '\r'; q++)
        n = n * 10 + (size_t)(*q - '0');
    memset(slot, 0, sizeof *slot);
    slot->type = EMQ_REPLY_STRING;
    slot->str = q + 2;
    slot->len = n;
    return q + 2 + n + 2;
}

/* Builds the value at p into slot, taking aggregate element arrays from
 * *cursor. The bytes were validated by the scan pass. Returns the first
 * byte after the value. */
static const char *build_value(const char *p, const char *end,
                               struct emq_reply *slot,
                               struct emq_reply **cursor) {
    struct emq_reply *attribute = NULL;
    for (;;) {
        char type = *p;
        const char *text = p + 1;
        const char *cr;
        long long n = 0;
        if (int_line(type)) {
            /* The scan validated it: [-]digits CR LF, within 64 bits. */
            const char *q = text + (*text == '-');
            unsigned long long v = 0;
            for (; *q != '\r'; q++)
                v = v * 10 + (unsigned)(*q - '0');
            n = *text != '-' ? (long long)v
                : v == 0     ? 0
                             : -(long long)(v - 1) - 1;
            cr = q;
        } else {
            cr = memchr(text, '\r', (size_t)(end - text));
        }
        size_t text_len = (size_t)(cr - text);
        const char *next = cr + 2;
        memset(slot, 0, sizeof *slot);
        switch (type) {
        case '+':
        case '-':
            slot->type = type == '+' ? EMQ_REPLY_STATUS : EMQ_REPLY_ERROR;
            slot->str = text;
            slot->len = text_len;
            break;
        case ':':
            slot->type = EMQ_REPLY_INTEGER;
            slot->u.integer = n;
            break;
        case ',':
            slot->type = EMQ_REPLY_DOUBLE;
            slot->str = text;
            slot->len = text_len;
            parse_double(text, text_len, &slot->u.dval);
            break;
        case '(':
            slot->type = EMQ_REPLY_BIGNUM;
            slot->str = text;
            slot->len = text_len;
            break;
        case '#':
            slot->type = EMQ_REPLY_BOOL;
            slot->u.integer = text[0] == 't';
            break;
        case '_':
            slot->type = EMQ_REPLY_NULL;
            break;
        case '$':
        case '!':
        case '=':
            if (n < 0) {
                slot->type = EMQ_REPLY_NULL;
                break;
            }
            slot->type = type == '$'   ? EMQ_REPLY_STRING
                         : type == '!' ? EMQ_REPLY_ERROR
                                       : EMQ_REPLY_VERBATIM;
            slot->str = next;
            slot->len = (size_t)n;
            if (type == '=') {
                memcpy(slot->format, next, 3);
                slot->str += 4;
                slot->len -= 4;
            }
            next += n + 2;
            break;
        default: { /* aggregates */
            if (n < 0) {
                slot->type = EMQ_REPLY_NULL;
                break;
            }
            size_t count = (size_t)n * (type == '%' || type == '|' ? 2 : 1);
            slot->type = type == '*'   ? EMQ_REPLY_ARRAY
                         : type == '~' ? EMQ_REPLY_SET
                         : type == '>' ? EMQ_REPLY_PUSH
                                       : EMQ_REPLY_MAP;
            slot->len = count;
            slot->u.element = *cursor;
            *cursor += count;
            for (size_t i = 0; i < count; i++) {
                struct emq_reply *child = &slot->u.element[i];
                if (*next == '$' && next[1] != '-') /* most children */
                    next = build_bulk(next, child);
                else
                    next = build_value(next, end, child, cursor);
            }
            break;
        }
        }
        if (type != '|') {
            slot->attribute = attribute;
            return next;
        }
        /* An attribute annotates the value after it: park it in a slot of
         * its own and build that value into this slot. */
        struct emq_reply *parked = (*cursor)++;
        *parked = *slot;
        attribute = parked;
        p = next;
    }
}

/* Scans until the next reply to return lies whole in [pos, scan)
 * (r->complete), skipping pushes when they are dropped; each byte is
 * scanned once however often it is called. EMQ_EAGAIN while more must
 * come, EMQ_EPROTO on bad input or a reply past limits.max_reply. */
static emq_status scan_whole(emq__resp_reader *r, emq_error *err) {
    for (;;) {
        if (!r->complete) {
            if (r->chunk == NULL || r->pos == r->len)
                return EMQ_EAGAIN;
            emq_status st = scan_reply(r, err);
            if (st != EMQ_OK)
                return st;
            /* The buffer grows in steps (make_room checks the limit at
             * each), so a whole reply may have arrived within one step:
             * the limit holds for it too, whatever the timing. */
            if (r->limits.max_reply &&
                reply_cost(r, r->scan - r->pos) > r->limits.max_reply)
                return fail_too_large(r, err);
            r->complete = 1; /* kept if the allocation below fails */
        }
        if (!r->drop_pushes || r->chunk->data[r->pos] != '>')
            return EMQ_OK;
        /* A push nobody subscribed to: skipped where it lies, nothing
         * allocated, counted. */
        r->pos = r->scan;
        r->nodes = 0;
        r->need = 0;
        r->complete = 0;
        r->pushes_dropped++;
    }
}

/* emq__resp_next without the dropping of pushes behind attributes. */
static emq_status next_reply(emq__resp_reader *r, emq_reply **out,
                             emq_error *err) {
    *out = NULL;
    if (r->failed)
        return sticky(r, err);
    emq_status st = scan_whole(r, err);
    if (st != EMQ_OK)
        return st;
    /* One allocation for every node of the reply. */
    if (r->nodes > (SIZE_MAX - sizeof(resp_block)) / sizeof(struct emq_reply))
        return fail(r, err, "protocol error: reply has too many elements");
    resp_block *block =
        emq__alloc(sizeof *block + r->nodes * sizeof(struct emq_reply));
    if (block == NULL)
        return emq__error_set(err, EMQ_ENOMEM, 1,
                              "out of memory building a reply of %zu elements",
                              r->nodes);
    struct emq_reply *cursor = block->nodes + 1;
    build_value(r->chunk->data + r->pos, r->chunk->data + r->scan,
                &block->nodes[0], &cursor);
    emq__resp_chunk_hold(r->chunk);
    block->chunk = r->chunk;
    r->pos = r->scan;
    r->nodes = 0;
    r->need = 0;
    r->complete = 0;
    *out = &block->nodes[0];
    return EMQ_OK;
}

int emq__resp_whole(emq__resp_reader *r) {
    emq_error err;
    return r->failed || scan_whole(r, &err) != EMQ_EAGAIN;
}

emq_status emq__resp_next(emq__resp_reader *r, emq_reply **out,
                          emq_error *err) {
    for (;;) {
        emq_status st = next_reply(r, out, err);
        if (st != EMQ_OK || !r->drop_pushes || (*out)->type != EMQ_REPLY_PUSH)
            return st;
        /* A push behind attributes (its first byte is '|'): built, then
         * dropped all the same. */
        emq_reply_free(*out);
        *out = NULL;
        r->pushes_dropped++;
    }
}

void emq__resp_drop_pushes(emq__resp_reader *r) { r->drop_pushes = 1; }

uint64_t emq__resp_pushes_dropped(const emq__resp_reader *r) {
    return r->pushes_dropped;
}
