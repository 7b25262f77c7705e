/* SPDX-License-Identifier: BSD-3-Clause */
/* jsonparse.c: one JSON object of field values into stream-entry fields.
 *
 * The input side of the encoding jsonwrite.c writes: `echomq produce --json`
 * reads one object per line and adds it as one entry. A value may be a
 * JSON string (decoded, escapes and surrogate pairs included), a number,
 * true, false or null (each kept as its own text: "12.50", "true",
 * "null"), or {"base64":"..."} for bytes that are not UTF-8, so whatever
 * emq_entry_json wrote comes back byte-exact. The fields may also come as
 * an array of [name, value] pairs, the form emq_entry_json uses when a
 * name is not UTF-8 (JSON object names can only be strings); a name is
 * then a string or {"base64":"..."}. Other arrays, other objects and raw
 * bytes that are not UTF-8 are refused. Every error names the 1-based
 * column (byte offset) where the input went wrong and what was expected.
 *
 * The parser runs twice over the same text: a first pass validates and
 * counts fields and bytes, a second one writes them into one allocation
 * (the field array followed by the decoded bytes), so the result is one
 * block the caller frees with emq_free_array. It never reads past len and
 * never allocates per byte.
 */
#include "base.h"

#include <stdio.h>
#include <string.h>

typedef struct jp {
    const char *s;  /* input */
    size_t n;       /* its length */
    size_t i;       /* read position */
    emq_field *out; /* second pass: where fields go; NULL on the first */
    char *store;    /* second pass: where decoded bytes go */
    size_t nfields; /* fields seen so far */
    size_t bytes;   /* decoded bytes so far (names, values, NULs) */
    emq_error *err;
} jp;

/* Fails at the current position (1-based column). */
static emq_status fail(jp *p, const char *what) {
    return emq__error_set(p->err, EMQ_EINVAL, 0, "column %zu: %s", p->i + 1,
                          what);
}

static void skip_ws(jp *p) {
    while (p->i < p->n && (p->s[p->i] == ' ' || p->s[p->i] == '\t' ||
                           p->s[p->i] == '\n' || p->s[p->i] == '\r'))
        p->i++;
}

/* Appends decoded bytes (second pass writes them; both passes count). */
static void put(jp *p, const char *b, size_t k) {
    if (p->store)
        memcpy(p->store + p->bytes, b, k);
    p->bytes += k;
}

static int hex4(const char *s, uint32_t *v) {
    *v = 0;
    for (int k = 0; k < 4; k++) {
        char c = s[k];
        int d = c >= '0' && c <= '9'   ? c - '0'
                : c >= 'a' && c <= 'f' ? c - 'a' + 10
                : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                       : -1;
        if (d < 0)
            return -1;
        *v = (*v << 4) | (uint32_t)d;
    }
    return 0;
}

/* Writes code point cp as UTF-8. */
static void put_utf8(jp *p, uint32_t cp) {
    char b[4];
    size_t k;
    if (cp < 0x80) {
        b[0] = (char)cp;
        k = 1;
    } else if (cp < 0x800) {
        b[0] = (char)(0xc0 | (cp >> 6));
        b[1] = (char)(0x80 | (cp & 0x3f));
        k = 2;
    } else if (cp < 0x10000) {
        b[0] = (char)(0xe0 | (cp >> 12));
        b[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
        b[2] = (char)(0x80 | (cp & 0x3f));
        k = 3;
    } else {
        b[0] = (char)(0xf0 | (cp >> 18));
        b[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
        b[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
        b[3] = (char)(0x80 | (cp & 0x3f));
        k = 4;
    }
    put(p, b, k);
}

/* Parses a JSON string at p->i (on its opening quote) and appends its
 * decoded bytes. what names it for errors ("field name", "value"). */
static emq_status string(jp *p, const char *what) {
    char msg[120];
    p->i++; /* the opening quote */
    size_t run = p->i;
    while (p->i < p->n) {
        unsigned char c = (unsigned char)p->s[p->i];
        if (c == '"') {
            put(p, p->s + run, p->i - run);
            p->i++;
            return EMQ_OK;
        }
        if (c < 0x20) {
            snprintf(msg, sizeof msg,
                     "control character 0x%02x inside a %s; escape it "
                     "(\\n, \\t, \\u00XX)",
                     c, what);
            return fail(p, msg);
        }
        if (c >= 0x80) { /* a UTF-8 sequence: validate it whole */
            size_t k = (c & 0xe0) == 0xc0   ? 2
                       : (c & 0xf0) == 0xe0 ? 3
                       : (c & 0xf8) == 0xf0 ? 4
                                            : 0;
            if (k == 0 || p->n - p->i < k || !emq__utf8_valid(p->s + p->i, k)) {
                snprintf(msg, sizeof msg,
                         "a %s holds bytes that are not UTF-8; write such "
                         "a value as {\"base64\":\"...\"}",
                         what);
                return fail(p, msg);
            }
            p->i += k;
            continue;
        }
        if (c != '\\') {
            p->i++;
            continue;
        }
        put(p, p->s + run, p->i - run);
        if (p->n - p->i < 2)
            break;
        char e = p->s[p->i + 1];
        const char *simple = NULL;
        switch (e) {
        case '"':
            simple = "\"";
            break;
        case '\\':
            simple = "\\";
            break;
        case '/':
            simple = "/";
            break;
        case 'b':
            simple = "\b";
            break;
        case 'f':
            simple = "\f";
            break;
        case 'n':
            simple = "\n";
            break;
        case 'r':
            simple = "\r";
            break;
        case 't':
            simple = "\t";
            break;
        case 'u':
            break;
        default:
            return fail(p, "unknown escape; JSON knows \\\" \\\\ \\/ \\b "
                           "\\f \\n \\r \\t and \\uXXXX");
        }
        if (simple) {
            put(p, simple, 1);
            p->i += 2;
            run = p->i;
            continue;
        }
        uint32_t cp, lo;
        if (p->n - p->i < 6 || hex4(p->s + p->i + 2, &cp) != 0)
            return fail(p, "\\u needs four hex digits");
        if (cp >= 0xdc00 && cp <= 0xdfff)
            return fail(p, "\\u escape is a lone low surrogate");
        if (cp >= 0xd800 && cp <= 0xdbff) {
            if (p->n - p->i < 12 || p->s[p->i + 6] != '\\' ||
                p->s[p->i + 7] != 'u' || hex4(p->s + p->i + 8, &lo) != 0 ||
                lo < 0xdc00 || lo > 0xdfff)
                return fail(p, "\\u escape is a high surrogate without "
                               "its low surrogate");
            cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
            p->i += 6;
        }
        put_utf8(p, cp);
        p->i += 6;
        run = p->i;
    }
    snprintf(msg, sizeof msg, "the %s string is not closed (missing '\"')",
             what);
    return fail(p, msg);
}

/* Parses a JSON number; appends its text as it stands. */
static emq_status number(jp *p) {
    size_t start = p->i;
    if (p->s[p->i] == '-')
        p->i++;
    if (p->i >= p->n || p->s[p->i] < '0' || p->s[p->i] > '9')
        return fail(p, "malformed number: a digit must follow '-'");
    if (p->s[p->i] == '0')
        p->i++;
    else
        while (p->i < p->n && p->s[p->i] >= '0' && p->s[p->i] <= '9')
            p->i++;
    if (p->i < p->n && p->s[p->i] == '.') {
        p->i++;
        size_t d = p->i;
        while (p->i < p->n && p->s[p->i] >= '0' && p->s[p->i] <= '9')
            p->i++;
        if (p->i == d)
            return fail(p, "malformed number: a digit must follow '.'");
    }
    if (p->i < p->n && (p->s[p->i] == 'e' || p->s[p->i] == 'E')) {
        p->i++;
        if (p->i < p->n && (p->s[p->i] == '+' || p->s[p->i] == '-'))
            p->i++;
        size_t d = p->i;
        while (p->i < p->n && p->s[p->i] >= '0' && p->s[p->i] <= '9')
            p->i++;
        if (p->i == d)
            return fail(p, "malformed number: the exponent has no digits");
    }
    put(p, p->s + start, p->i - start);
    return EMQ_OK;
}

static int b64val(char c) {
    if (c >= 'A' && c <= 'Z')
        return c - 'A';
    if (c >= 'a' && c <= 'z')
        return c - 'a' + 26;
    if (c >= '0' && c <= '9')
        return c - '0' + 52;
    if (c == '+')
        return 62;
    if (c == '/')
        return 63;
    return -1;
}

/* Parses {"base64":"..."} at p->i (on '{') and appends the decoded bytes.
 * Standard alphabet; padding optional; whitespace around tokens only. */
static emq_status base64_object(jp *p) {
    p->i++;
    skip_ws(p);
    static const char key[] = "\"base64\"";
    if (p->n - p->i < sizeof key - 1 ||
        memcmp(p->s + p->i, key, sizeof key - 1) != 0)
        return fail(p, "an object must be {\"base64\":\"...\"}; other "
                       "nested objects are not supported");
    p->i += sizeof key - 1;
    skip_ws(p);
    if (p->i >= p->n || p->s[p->i] != ':')
        return fail(p, "expected ':' after \"base64\"");
    p->i++;
    skip_ws(p);
    if (p->i >= p->n || p->s[p->i] != '"')
        return fail(p, "expected the base64 text as a string");
    p->i++;
    uint32_t acc = 0;
    int bits = 0, pad = 0;
    size_t digits = 0;
    while (p->i < p->n && p->s[p->i] != '"') {
        char c = p->s[p->i];
        if (c == '=') {
            pad++;
        } else {
            int v = b64val(c);
            if (v < 0 || pad)
                return fail(p, "not base64 (alphabet A-Z a-z 0-9 + /, '=' "
                               "padding only at the end)");
            acc = (acc << 6) | (uint32_t)v;
            bits += 6;
            digits++;
            if (bits >= 8) {
                bits -= 8;
                char b = (char)((acc >> bits) & 0xff);
                put(p, &b, 1);
            }
        }
        p->i++;
    }
    if (p->i >= p->n)
        return fail(p, "the base64 string is not closed (missing '\"')");
    if (digits % 4 == 1 || pad > 2 || (pad && (digits + (size_t)pad) % 4))
        return fail(p, "base64 text has a wrong length");
    p->i++;
    skip_ws(p);
    if (p->i >= p->n || p->s[p->i] != '}')
        return fail(p, "expected '}' to close {\"base64\":\"...\"}");
    p->i++;
    return EMQ_OK;
}

/* Matches a literal word (true, false, null) and appends it. */
static emq_status word(jp *p, const char *w) {
    size_t k = strlen(w);
    if (p->n - p->i < k || memcmp(p->s + p->i, w, k) != 0)
        return fail(p, "a value must be a string, a number, true, false, "
                       "null or {\"base64\":\"...\"}");
    put(p, w, k);
    p->i += k;
    return EMQ_OK;
}

static emq_status value(jp *p) {
    if (p->i >= p->n)
        return fail(p, "the line ends where a value should be");
    char c = p->s[p->i];
    if (c == '"')
        return string(p, "value");
    if (c == '-' || (c >= '0' && c <= '9'))
        return number(p);
    if (c == '{')
        return base64_object(p);
    if (c == '[')
        return fail(p, "arrays are not supported; a value must be a "
                       "string, a number, true, false, null or "
                       "{\"base64\":\"...\"}");
    if (c == 't')
        return word(p, "true");
    if (c == 'f')
        return word(p, "false");
    return word(p, "null");
}

/* One pass over the object (or array of pairs); the second pass (p->out
 * set) stores. */
static emq_status object(jp *p) {
    skip_ws(p);
    if (p->i >= p->n)
        return fail(p, "empty line; expected a JSON object {\"field\":"
                       "\"value\",...}");
    if (p->s[p->i] != '{' && p->s[p->i] != '[')
        return fail(p, "expected a JSON object {\"field\":\"value\",...}");
    int pairs = p->s[p->i] == '[';
    char close = pairs ? ']' : '}';
    p->i++;
    skip_ws(p);
    if (p->i < p->n && p->s[p->i] == close)
        return fail(p, "no fields; an entry needs at least one field");
    for (;;) {
        skip_ws(p);
        if (pairs) {
            if (p->i >= p->n || p->s[p->i] != '[')
                return fail(p, "expected a [name, value] pair");
            p->i++;
            skip_ws(p);
        }
        if (p->i >= p->n || p->s[p->i] != '"') {
            if (!(pairs && p->i < p->n && p->s[p->i] == '{'))
                return fail(p, p->i >= p->n ? "the line ends inside the object "
                                              "(missing '}')"
                                            : "expected a field name in double "
                                              "quotes");
        }
        size_t name_at = p->bytes;
        emq_status st = p->s[p->i] == '"' ? string(p, "field name")
                                          : base64_object(p);
        if (st != EMQ_OK)
            return st;
        size_t name_len = p->bytes - name_at;
        put(p, "", 1); /* NUL after each name and value, for C callers */
        skip_ws(p);
        char sep = pairs ? ',' : ':';
        if (p->i >= p->n || p->s[p->i] != sep)
            return fail(p, pairs ? "expected ',' after the field name"
                                 : "expected ':' after the field name");
        p->i++;
        skip_ws(p);
        size_t value_at = p->bytes;
        if ((st = value(p)) != EMQ_OK)
            return st;
        size_t value_len = p->bytes - value_at;
        put(p, "", 1);
        if (p->out) {
            emq_field *f = &p->out[p->nfields];
            f->name = p->store + name_at;
            f->name_len = name_len;
            f->value = p->store + value_at;
            f->value_len = value_len;
        }
        p->nfields++;
        skip_ws(p);
        if (pairs) {
            if (p->i >= p->n || p->s[p->i] != ']')
                return fail(p, "expected ']' after a [name, value] pair");
            p->i++;
            skip_ws(p);
        }
        if (p->i < p->n && p->s[p->i] == ',') {
            p->i++;
            continue;
        }
        if (p->i < p->n && p->s[p->i] == close) {
            p->i++;
            break;
        }
        return fail(p, p->i >= p->n
                           ? "the line ends inside the object (missing '}')"
                           : "expected ',' or '}' after a value");
    }
    skip_ws(p);
    if (p->i < p->n)
        return fail(p, "unexpected text after the object; one object per "
                       "line");
    return EMQ_OK;
}

emq_status emq_fields_from_json(const char *json, size_t len,
                                emq_field **fields, size_t *nfields,
                                emq_error *err) {
    if (fields)
        *fields = NULL;
    if (nfields)
        *nfields = 0;
    if (json == NULL || fields == NULL || nfields == NULL)
        return emq__error_set(err, EMQ_EINVAL, 0,
                              "emq_fields_from_json needs text and outputs");
    jp p = {json, len, 0, NULL, NULL, 0, 0, err};
    emq_status st = object(&p);
    if (st != EMQ_OK)
        return st;
    size_t head = p.nfields * sizeof(emq_field);
    char *block = emq__alloc(head + p.bytes);
    if (block == NULL)
        return emq__oom(err);
    jp q = {json, len, 0, (emq_field *)(void *)block, block + head, 0, 0, err};
    st = object(&q); /* cannot fail: same input */
    if (st != EMQ_OK) {
        emq__free(block);
        return st;
    }
    *fields = q.out;
    *nfields = q.nfields;
    emq__error_clear(err);
    return EMQ_OK;
}

void emq_fields_free(emq_field *fields) { emq__free(fields); }
