/* SPDX-License-Identifier: BSD-3-Clause */
/* fuzz_url.c: libFuzzer target for URL parsing (conn/url.c) and for the
 * "url" property of a conf (conn/conf.c), the two ways a URL from a user
 * reaches the library.
 *
 * Input: one mode byte, then the URL text (cut at the first NUL, as a C
 * string would be). The low 3 bits of the mode byte, when not 0, make that
 * allocation of the parse fail, so the out-of-memory paths are fuzzed too.
 *
 * Besides crashes, leaks and sanitizer reports, the target checks the
 * promise that an error message never shows the password:
 *  - It finds the password part of the URL by the documented splitting
 *    rule (user info ends at the last '@' before the first '?'; the
 *    password starts after the first ':' of the user info).
 *  - It parses a twin URL whose password bytes are replaced one for one by
 *    other bytes of the same class (digit for digit, hex letter for hex
 *    letter, and so on), so every '@', ':', '%' escape and '?' stays where
 *    it was and the parse takes the same path. Both parses must end with
 *    the same status, and their error messages must be identical: a
 *    message that changes with the password's bytes shows them.
 *  - A password of at least 4 bytes (raw or percent-decoded) must not
 *    appear in the message unless the twin's message has it too (then it
 *    is the message's own text, as with a password "port").
 * When the parse succeeds, the password it returns must be the decoded
 * password part.
 */
#include "base/base.h"
#include "conn/conn.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define URL_MAX 4096

/* Where the password part of a URL lies, by the documented rule; len 0
 * when the URL has none (or no known scheme). */
typedef struct span {
    size_t off, len;
} span;

static int scheme_is(const char *s, size_t n, const char *name) {
    if (strlen(name) != n)
        return 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (c >= 'A' && c <= 'Z')
            c = (char)(c - 'A' + 'a');
        if (c != name[i])
            return 0;
    }
    return 1;
}

static span password_span(const char *text) {
    span none = {0, 0};
    const char *sep = strstr(text, "://");
    if (sep == NULL)
        return none;
    size_t sn = (size_t)(sep - text);
    int unix_scheme = scheme_is(text, sn, "unix");
    if (!unix_scheme && !scheme_is(text, sn, "redis") &&
        !scheme_is(text, sn, "rediss"))
        return none;
    const char *rest = sep + 3;
    const char *q = strchr(rest, '?');
    const char *qend = q ? q : rest + strlen(rest);
    if (unix_scheme && *rest == '/')
        return none;
    const char *at = NULL;
    for (const char *c = rest; c < qend; c++)
        if (*c == '@' && (!unix_scheme || c[1] == '/'))
            at = c;
    if (at == NULL)
        return none;
    const char *colon = memchr(rest, ':', (size_t)(at - rest));
    if (colon == NULL || at == colon + 1)
        return none;
    span s = {(size_t)(colon + 1 - text), (size_t)(at - colon - 1)};
    return s;
}

/* Maps a password byte to another byte of the same class, never to NUL
 * and never to a byte the URL grammar gives a meaning ('@', ':', '/',
 * '?', '%', '&', '='), so the twin URL parses along the same path:
 * hex-digit-ness is kept (so %XX stays a valid escape) and '0' stays '0'
 * (so %00 stays refused and nothing else becomes %00). */
static char twin_byte(char ch) {
    unsigned char c = (unsigned char)ch;
    static const char punct[] = "!$'()*+,;-._~#";
    if (c >= '1' && c <= '9')
        return c == '9' ? '1' : (char)(c + 1);
    if (c >= 'a' && c <= 'f')
        return c == 'f' ? 'a' : (char)(c + 1);
    if (c >= 'A' && c <= 'F')
        return c == 'F' ? 'A' : (char)(c + 1);
    if (c >= 'g' && c <= 'z')
        return c == 'z' ? 'g' : (char)(c + 1);
    if (c >= 'G' && c <= 'Z')
        return c == 'Z' ? 'G' : (char)(c + 1);
    if (c >= 0x80)
        return (char)(c == 0xff ? 0x80 : c + 1);
    const char *p = c ? strchr(punct, c) : NULL;
    if (p)
        return p[1] ? p[1] : punct[0];
    return ch;
}

static int hexval(char c) {
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* Percent-decodes [s, s+n) by the documented rule (%XX, two hex digits,
 * never %00); returns the length, or -1 when an escape is malformed (then
 * the parse fails and no password comes out). */
static long decode(const char *s, size_t n, char *out) {
    size_t j = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] != '%') {
            out[j++] = s[i];
            continue;
        }
        int hi = i + 2 < n ? hexval(s[i + 1]) : -1;
        int lo = hi >= 0 ? hexval(s[i + 2]) : -1;
        if (hi < 0 || lo < 0 || (hi == 0 && lo == 0))
            return -1;
        out[j++] = (char)(hi * 16 + lo);
        i += 2;
    }
    return (long)j;
}

static int contains(const char *hay, const char *needle, size_t n) {
    size_t hn = strlen(hay);
    if (n == 0 || n > hn)
        return 0;
    for (size_t i = 0; i + n <= hn; i++)
        if (memcmp(hay + i, needle, n) == 0)
            return 1;
    return 0;
}

/* One parse of text through emq__url_parse and one through emq_conf_set,
 * with the same injected allocation failure. */
typedef struct outcome {
    emq_status url_st, conf_st;
    emq_error url_err, conf_err;
} outcome;

static void parse_both(const char *text, unsigned fail_at, outcome *o,
                       char *pw_out, size_t *pw_len, int *have_pw) {
    memset(o, 0, sizeof *o);
    emq__url u;
    *have_pw = 0;
    emq__alloc_fail_at(fail_at);
    o->url_st = emq__url_parse(text, &u, &o->url_err);
    emq__alloc_fail_at(0);
    if (o->url_st == EMQ_OK) {
        if (u.scheme != EMQ_URL_UNIX && (u.port < 1 || u.port > 65535))
            abort();
        if (u.scheme == EMQ_URL_UNIX && (u.path == NULL || u.path[0] != '/'))
            abort();
        if (u.password) {
            *have_pw = 1;
            *pw_len = strlen(u.password);
            memcpy(pw_out, u.password, *pw_len);
        }
        emq__url_free(&u);
        if (u.password != NULL || u.host != NULL)
            abort();
    }
    emq_conf_t *conf = emq_conf_new();
    if (conf == NULL)
        abort();
    emq__alloc_fail_at(fail_at);
    o->conf_st = emq_conf_set(conf, "url", text, &o->conf_err);
    emq__alloc_fail_at(0);
    emq_conf_destroy(conf);
}

static void check_not_shown(const char *msg, const char *twin_msg,
                            const char *pw, size_t n) {
    if (n >= 4 && contains(msg, pw, n) && !contains(twin_msg, pw, n)) {
        fprintf(stderr, "password shown in error message: %s\n", msg);
        abort();
    }
}

/* The region a careless user may have typed a password into: from the
 * first ':' after "://" to the last '@' of the whole URL, '?' and all (a
 * password with an unescaped '?'). url.c withholds every quoted piece that
 * starts there; len 0 when there is no such region. */
static span loose_span(const char *text) {
    span none = {0, 0};
    const char *sep = strstr(text, "://");
    const char *at = strrchr(text, '@');
    if (sep == NULL || at == NULL || at < sep + 3)
        return none;
    const char *colon = memchr(sep + 3, ':', (size_t)(at - sep - 3));
    if (colon == NULL || at == colon + 1)
        return none;
    span s = {(size_t)(colon + 1 - text), (size_t)(at - colon - 1)};
    return s;
}

/* 1 when the messages a and b (of the original and the twin URL) show a
 * piece of at least 4 bytes of the region: somewhere a holds from[k..]
 * where b holds to[k..], the original bytes against the twin's. Only
 * places where a and b differ can start such a piece. */
static int shows_region(const char *a, const char *b, const char *from,
                        const char *to, size_t n) {
    size_t an = strlen(a);
    if (strlen(b) != an)
        return 0; /* the mapping changed the parse: proves nothing */
    for (size_t p = 0; p < an; p++) {
        if (a[p] == b[p])
            continue;
        for (size_t k = 0; k < n; k++) {
            if (from[k] != a[p] || to[k] != b[p])
                continue;
            size_t left = 0, right = 1;
            while (left < p && left < k &&
                   a[p - left - 1] == from[k - left - 1] &&
                   b[p - left - 1] == to[k - left - 1])
                left++;
            while (p + right < an && k + right < n &&
                   a[p + right] == from[k + right] &&
                   b[p + right] == to[k + right])
                right++;
            if (left + right >= 4)
                return 1;
        }
    }
    return 0;
}

/* The loose check: map the bytes of the loose region, parse again, and
 * fail when the messages show a piece of the region (the original's bytes
 * in one, the twin's in the other). Other differences (the mapping changed
 * the parse: a port became another port, a parameter name became unknown)
 * prove nothing. */
static void loose_check(const char *text, size_t n, unsigned fail_at) {
    span r = loose_span(text);
    if (r.len < 4)
        return;
    static char twin[URL_MAX + 1], pw_buf[URL_MAX + 1];
    memcpy(twin, text, n + 1);
    for (size_t i = 0; i < r.len; i++)
        twin[r.off + i] = twin_byte(text[r.off + i]);
    static char from[URL_MAX + 1], to[URL_MAX + 1];
    emq__printable(from, sizeof from, text + r.off, r.len);
    emq__printable(to, sizeof to, twin + r.off, r.len);
    if (strcmp(from, to) == 0)
        return;
    size_t pw_len;
    int have;
    outcome a, b;
    parse_both(text, fail_at, &a, pw_buf, &pw_len, &have);
    parse_both(twin, fail_at, &b, pw_buf, &pw_len, &have);
    if ((a.url_st != EMQ_OK && b.url_st != EMQ_OK &&
         shows_region(a.url_err.message, b.url_err.message, from, to, r.len)) ||
        (a.conf_st != EMQ_OK && b.conf_st != EMQ_OK &&
         shows_region(a.conf_err.message, b.conf_err.message, from, to,
                      r.len))) {
        fprintf(stderr, "password region shown in error message: %s\n",
                a.url_st != EMQ_OK ? a.url_err.message : a.conf_err.message);
        abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1 || size > URL_MAX)
        return 0;
    unsigned fail_at = data[0] & 7;
    static char text[URL_MAX + 1], twin[URL_MAX + 1];
    size_t n = size - 1;
    memcpy(text, data + 1, n);
    text[n] = '\0';
    n = strlen(text);

    span pw = password_span(text);
    memcpy(twin, text, n + 1);
    for (size_t i = 0; i < pw.len; i++)
        twin[pw.off + i] = twin_byte(text[pw.off + i]);

    static char got_pw[URL_MAX + 1], twin_pw[URL_MAX + 1];
    size_t got_len = 0, twin_len = 0;
    int have_got, have_twin;
    outcome a, b;
    parse_both(text, fail_at, &a, got_pw, &got_len, &have_got);
    parse_both(twin, fail_at, &b, twin_pw, &twin_len, &have_twin);

    /* The password's bytes never steer the parse. */
    if (a.url_st != b.url_st || a.conf_st != b.conf_st ||
        have_got != have_twin) {
        fprintf(stderr, "parse depends on the password bytes: %s vs %s\n",
                emq_status_name(a.url_st), emq_status_name(b.url_st));
        abort();
    }
    if (a.url_st != EMQ_OK && strcmp(a.url_err.message, b.url_err.message)) {
        fprintf(stderr, "message changes with the password:\n  %s\n  %s\n",
                a.url_err.message, b.url_err.message);
        abort();
    }
    if (a.conf_st != EMQ_OK && strcmp(a.conf_err.message, b.conf_err.message)) {
        fprintf(stderr,
                "conf message changes with the password:\n  %s\n"
                "  %s\n",
                a.conf_err.message, b.conf_err.message);
        abort();
    }
    /* Both entry points agree on a URL's validity. */
    if ((a.url_st == EMQ_OK) != (a.conf_st == EMQ_OK) &&
        a.url_st != EMQ_ENOMEM && a.conf_st != EMQ_ENOMEM) {
        fprintf(stderr, "url parse %s but conf set %s\n",
                emq_status_name(a.url_st), emq_status_name(a.conf_st));
        abort();
    }

    if (pw.len > 0) {
        static char decoded[URL_MAX + 1];
        long dn = decode(text + pw.off, pw.len, decoded);
        check_not_shown(a.url_err.message, b.url_err.message, text + pw.off,
                        pw.len);
        check_not_shown(a.conf_err.message, b.conf_err.message, text + pw.off,
                        pw.len);
        if (dn > 0) {
            check_not_shown(a.url_err.message, b.url_err.message, decoded,
                            (size_t)dn);
            check_not_shown(a.conf_err.message, b.conf_err.message, decoded,
                            (size_t)dn);
        }
        /* A successful parse returns exactly the decoded password. */
        if (a.url_st == EMQ_OK &&
            (!have_got || dn < 0 || (size_t)dn != got_len ||
             memcmp(decoded, got_pw, got_len) != 0)) {
            fprintf(stderr, "password part parsed wrongly\n");
            abort();
        }
    } else if (a.url_st == EMQ_OK && have_got && fail_at == 0) {
        /* The library found a password the rule does not see. */
        fprintf(stderr, "password outside the documented user info\n");
        abort();
    }
    loose_check(text, n, fail_at);
    return 0;
}
