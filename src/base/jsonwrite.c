/* SPDX-License-Identifier: BSD-3-Clause */
/* jsonwrite.c: writing JSON with snprintf semantics, binary-safe.
 *
 * Every JSON document the library produces (stats, queue descriptions,
 * pending lists, dead letters, entries for the CLI) goes through this
 * writer, so escaping and the encoding of bytes that are not UTF-8 are
 * decided in one place: valid UTF-8 becomes a JSON string; anything else
 * becomes {"base64":"..."} (standard alphabet, padded).
 */
#include "base.h"

#include <stdio.h>
#include <string.h>

void emq__json_init(emq__json *j, char *buf, size_t size) {
    j->buf = buf;
    j->size = size;
    j->len = 0;
    if (buf && size)
        buf[0] = '\0';
}

/* Appends n bytes verbatim (they need no escaping). */
static void put_bytes(emq__json *j, const char *p, size_t n) {
    if (j->len < j->size) {
        size_t room = j->size - j->len - 1;
        size_t k = n < room ? n : room;
        memcpy(j->buf + j->len, p, k);
        j->buf[j->len + k] = '\0';
    }
    j->len += n;
}

void emq__json_raw(emq__json *j, const char *fmt, ...) {
    if (strchr(fmt, '%') == NULL) { /* a literal: nothing to format */
        put_bytes(j, fmt, strlen(fmt));
        return;
    }
    va_list ap;
    va_start(ap, fmt);
    size_t room = j->len < j->size ? j->size - j->len : 0;
    int n = vsnprintf(room ? j->buf + j->len : NULL, room, fmt, ap);
    va_end(ap);
    if (n > 0)
        j->len += (size_t)n;
}

int emq__utf8_valid(const char *p, size_t n) {
    const unsigned char *s = (const unsigned char *)p;
    size_t i = 0;
    while (i < n) {
        /* ASCII eight bytes at a time: no byte with its high bit set. */
        while (n - i >= 8) {
            uint64_t w;
            memcpy(&w, s + i, 8);
            if (w & UINT64_C(0x8080808080808080))
                break;
            i += 8;
        }
        if (i == n)
            break;
        unsigned char c = s[i];
        size_t extra;
        uint32_t cp;
        if (c < 0x80) {
            i++;
            continue;
        } else if ((c & 0xe0) == 0xc0) {
            extra = 1;
            cp = c & 0x1f;
        } else if ((c & 0xf0) == 0xe0) {
            extra = 2;
            cp = c & 0x0f;
        } else if ((c & 0xf8) == 0xf0) {
            extra = 3;
            cp = c & 0x07;
        } else {
            return 0;
        }
        if (n - i <= extra)
            return 0;
        for (size_t k = 1; k <= extra; k++) {
            if ((s[i + k] & 0xc0) != 0x80)
                return 0;
            cp = (cp << 6) | (s[i + k] & 0x3f);
        }
        if ((extra == 1 && cp < 0x80) || (extra == 2 && cp < 0x800) ||
            (extra == 3 && cp < 0x10000) || cp > 0x10ffff ||
            (cp >= 0xd800 && cp <= 0xdfff))
            return 0;
        i += extra + 1;
    }
    return 1;
}

/* 1 when none of the eight bytes of w needs escaping in a JSON string (a
 * control character, '"' or '\\'): whether any byte is below 0x20 or
 * equal to one of the two, each tested for all eight at once. */
static int plain8(uint64_t w) {
    const uint64_t ones = UINT64_C(0x0101010101010101);
    const uint64_t highs = UINT64_C(0x8080808080808080);
    uint64_t quote = w ^ (ones * '"'), slash = w ^ (ones * '\\');
    uint64_t hit = ((w - ones * 0x20) & ~w) | ((quote - ones) & ~quote) |
                   ((slash - ones) & ~slash);
    return (hit & highs) == 0;
}

/* Appends bytes known to be valid UTF-8 as a JSON string. */
static void put_string(emq__json *j, const char *p, size_t n) {
    put_bytes(j, "\"", 1);
    size_t start = 0;
    for (size_t i = 0; i < n; i++) {
        uint64_t w;
        while (n - i >= 8 && (memcpy(&w, p + i, 8), plain8(w)))
            i += 8;
        if (i == n)
            break;
        unsigned char c = (unsigned char)p[i];
        if (c >= 0x20 && c != '"' && c != '\\')
            continue;
        put_bytes(j, p + start, i - start);
        switch (c) {
        case '"':
            put_bytes(j, "\\\"", 2);
            break;
        case '\\':
            put_bytes(j, "\\\\", 2);
            break;
        case '\n':
            put_bytes(j, "\\n", 2);
            break;
        case '\r':
            put_bytes(j, "\\r", 2);
            break;
        case '\t':
            put_bytes(j, "\\t", 2);
            break;
        default:
            emq__json_raw(j, "\\u%04x", c);
            break;
        }
        start = i + 1;
    }
    put_bytes(j, p + start, n - start);
    put_bytes(j, "\"", 1);
}

static void put_base64(emq__json *j, const char *p, size_t n) {
    static const char alphabet[] =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    const unsigned char *s = (const unsigned char *)p;
    put_bytes(j, "{\"base64\":\"", 11);
    for (size_t i = 0; i < n; i += 3) {
        uint32_t v = (uint32_t)s[i] << 16;
        if (i + 1 < n)
            v |= (uint32_t)s[i + 1] << 8;
        if (i + 2 < n)
            v |= s[i + 2];
        char quad[4] = {alphabet[(v >> 18) & 63], alphabet[(v >> 12) & 63],
                        i + 1 < n ? alphabet[(v >> 6) & 63] : '=',
                        i + 2 < n ? alphabet[v & 63] : '='};
        put_bytes(j, quad, 4);
    }
    put_bytes(j, "\"}", 2);
}

void emq__json_cstr(emq__json *j, const char *s) {
    size_t n = 0;
    while (s[n])
        n++;
    emq__json_bytes(j, s, n);
}

void emq__json_bytes(emq__json *j, const char *p, size_t n) {
    if (emq__utf8_valid(p, n))
        put_string(j, p, n);
    else
        put_base64(j, p, n);
}
