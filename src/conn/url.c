/* SPDX-License-Identifier: BSD-3-Clause */
/* url.c: parses redis://, rediss:// and unix:// URLs into struct emq__url.
 *
 * Forms accepted:
 *   redis://[user[:password]@]host[:port][/db]
 *   rediss://[user[:password]@]host[:port][/db][?tls.ca_file=..&tls.verify=..]
 *   unix://[user[:password]@]/path/to/socket[?db=N]
 *   redis-sentinel://[user[:password]@]host[:port][,host[:port]...][/db]#NAME
 *   rediss-sentinel://... (TLS to the Sentinels and the data nodes)
 * The Sentinel form is the Lettuce client's (also with '+' for '-'): the
 * hosts are Sentinels (port 26379 by default), NAME the master they
 * watch; the user and password are the data nodes' (Sentinel's own are
 * properties, sentinel.user and sentinel.password).
 * host may be an IPv6 address in brackets ("[::1]"). user, password, the
 * socket path and query values are percent-decoded.
 *
 * Splitting rule: the query starts at the first '?', and the user info ends
 * at the last '@' before it (for unix://, the last one followed by '/'), so a
 * password may hold raw '@', ':', '/' and
 * '#' (as generated base64 passwords do); only '?' and '%' must be escaped.
 *
 * What this file never does: put the password in an error message. Every
 * error that quotes a piece of the URL goes through `quote`, which withholds
 * any piece that starts at or before the URL's last '@', the region where a
 * password can be, whatever the parse made of it. It does no I/O and no
 * name resolution.
 */
#include "conn.h"

#include <ctype.h>

#include <stdio.h>
#include <string.h>

typedef struct parser {
    const char *text;       /* the whole URL */
    const char *secret_end; /* last '@' of the URL, or NULL */
    emq_error *err;
} parser;

/* Writes into out (size bytes) the fragment [s, s+n) in single quotes, or
 * "(withheld)" when it lies where a password may be. Returns out. */
static const char *quote(const parser *ps, const char *s, size_t n, char *out,
                         size_t size) {
    if (ps->secret_end != NULL && s <= ps->secret_end) {
        snprintf(out, size, "(withheld)");
        return out;
    }
    char shown[80];
    emq__printable(shown, sizeof shown, s, n);
    snprintf(out, size, "'%s'%s", shown, n >= sizeof shown ? "..." : "");
    return out;
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

/* Percent-decodes [s, s+n) into a new string in *out. what names the part
 * for the error ("password"); its text is never quoted. Returns EMQ_OK,
 * EMQ_ENOMEM, or EMQ_EINVAL for a bad escape or an escaped NUL. */
static emq_status decode(const parser *ps, const char *s, size_t n,
                         const char *what, char **out) {
    char *d = emq__alloc(n + 1);
    if (d == NULL)
        return emq__error_set(ps->err, EMQ_ENOMEM, 0,
                              "out of memory parsing the URL");
    size_t j = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] != '%') {
            d[j++] = s[i];
            continue;
        }
        int hi = i + 2 < n ? hexval(s[i + 1]) : -1;
        int lo = hi >= 0 ? hexval(s[i + 2]) : -1;
        if (hi < 0 || lo < 0 || (hi == 0 && lo == 0)) {
            emq__wipe(d, n + 1);
            emq__free(d);
            return emq__error_set(ps->err, EMQ_EINVAL, 0,
                                  "%s has an invalid percent escape (use %%XX "
                                  "with two hex digits, not %%00)",
                                  what);
        }
        d[j++] = (char)(hi * 16 + lo);
        i += 2;
    }
    d[j] = '\0';
    *out = d;
    return EMQ_OK;
}

/* Parses a decimal number in [min, max] from [s, s+n) with no sign, space
 * or trailing junk. Returns 1 and sets *out, 0 when not such a number, -1
 * when a number out of range. */
static int parse_num(const char *s, size_t n, int64_t min, int64_t max,
                     int64_t *out) {
    if (n == 0)
        return 0;
    int64_t v = 0;
    int big = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return 0;
        if (v > (INT64_MAX - 9) / 10)
            big = 1;
        else
            v = v * 10 + (s[i] - '0');
    }
    if (big || v < min || v > max)
        return -1;
    *out = v;
    return 1;
}

/* Parses the database number in [s, s+n). Returns EMQ_OK or EMQ_EINVAL. */
static emq_status parse_db(const parser *ps, const char *s, size_t n,
                           emq__url *u) {
    char q[100];
    int r = parse_num(s, n, 0, INT32_MAX, &u->db);
    if (r == 0)
        return emq__error_set(ps->err, EMQ_EINVAL, 0,
                              "database %s is not a number",
                              quote(ps, s, n, q, sizeof q));
    if (r < 0)
        return emq__error_set(ps->err, EMQ_EINVAL, 0,
                              "database %s is out of range 0-2147483647",
                              quote(ps, s, n, q, sizeof q));
    return EMQ_OK;
}

static int host_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
           (c >= '0' && c <= '9') || c == '-' || c == '.' || c == '_';
}

int emq__host_valid(const char *host, size_t len) {
    if (host == NULL || len == 0 || len > EMQ_HOST_MAX)
        return 0;
    size_t colons = 0, i = 0;
    for (; i < len && host[i] != '%'; i++) {
        if (host[i] == ':')
            colons++;
        else if (!host_char(host[i]))
            return 0;
    }
    if (i < len && colons < 2) /* a zone belongs to an IPv6 address */
        return 0;
    for (i++; i < len; i++) /* the zone: "fe80::1%eth0" */
        if (!host_char(host[i]))
            return 0;
    return colons == 0 || colons >= 2;
}

/* 1 when pattern[0..n) matches all of host: '*' any run, '?' one
 * character, the rest compared without case. */
static int glob_match(const char *pattern, size_t n, const char *host) {
    size_t star = SIZE_MAX, back = 0, i = 0, h = 0;
    while (host[h] != '\0') {
        if (i < n &&
            (pattern[i] == '?' || tolower((unsigned char)pattern[i]) ==
                                      tolower((unsigned char)host[h]))) {
            i++;
            h++;
        } else if (i < n && pattern[i] == '*') {
            star = i++;
            back = h;
        } else if (star != SIZE_MAX) {
            i = star + 1;
            h = ++back;
        } else {
            return 0;
        }
    }
    while (i < n && pattern[i] == '*')
        i++;
    return i == n;
}

int emq__host_allowed(const char *patterns, const char *host) {
    if (patterns == NULL || *patterns == '\0')
        return 1;
    for (const char *s = patterns;;) {
        size_t n = strcspn(s, ",");
        if (glob_match(s, n, host))
            return 1;
        if (s[n] == '\0')
            return 0;
        s += n + 1;
    }
}

/* Parses host[:port] or [v6]:port from [s, e) into u. Returns EMQ_OK,
 * EMQ_ENOMEM or EMQ_EINVAL naming the bad part. */
static emq_status parse_hostport(const parser *ps, const char *s, const char *e,
                                 emq__url *u) {
    char q[100];
    const char *hs, *he, *port = NULL;
    if (s < e && *s == '[') {
        const char *close = memchr(s, ']', (size_t)(e - s));
        if (close == NULL)
            return emq__error_set(ps->err, EMQ_EINVAL, 0,
                                  "IPv6 address %s has no closing ']'",
                                  quote(ps, s, (size_t)(e - s), q, sizeof q));
        hs = s + 1;
        he = close;
        for (const char *c = hs; c < he; c++)
            if (!host_char(*c) && *c != ':' && *c != '%')
                return emq__error_set(
                    ps->err, EMQ_EINVAL, 0, "IPv6 address %s is not valid",
                    quote(ps, hs, (size_t)(he - hs), q, sizeof q));
        if (close + 1 < e) {
            if (close[1] != ':')
                return emq__error_set(
                    ps->err, EMQ_EINVAL, 0,
                    "unexpected %s after IPv6 address; use [addr]:port",
                    quote(ps, close + 1, (size_t)(e - close - 1), q, sizeof q));
            port = close + 2;
        }
    } else {
        hs = s;
        const char *colon = memchr(s, ':', (size_t)(e - s));
        he = colon ? colon : e;
        if (colon && memchr(colon + 1, ':', (size_t)(e - colon - 1)))
            return emq__error_set(ps->err, EMQ_EINVAL, 0,
                                  "host %s looks like an IPv6 address; put it "
                                  "in brackets, e.g. redis://[::1]:6379",
                                  quote(ps, s, (size_t)(e - s), q, sizeof q));
        for (const char *c = hs; c < he; c++)
            if (!host_char(*c))
                return emq__error_set(
                    ps->err, EMQ_EINVAL, 0, "host %s is not a valid host name",
                    quote(ps, hs, (size_t)(he - hs), q, sizeof q));
        if (colon)
            port = colon + 1;
    }
    if (he == hs)
        return emq__error_set(ps->err, EMQ_EINVAL, 0,
                              "host is missing; e.g. redis://127.0.0.1:6379");
    u->port = 6379;
    if (port) {
        int64_t v;
        int r = parse_num(port, (size_t)(e - port), 1, 65535, &v);
        if (r == 0)
            return emq__error_set(
                ps->err, EMQ_EINVAL, 0, "port %s is not a number",
                quote(ps, port, (size_t)(e - port), q, sizeof q));
        if (r < 0)
            return emq__error_set(
                ps->err, EMQ_EINVAL, 0, "port %s is out of range 1-65535",
                quote(ps, port, (size_t)(e - port), q, sizeof q));
        u->port = (int)v;
    }
    u->host = emq__strndup(hs, (size_t)(he - hs));
    if (u->host == NULL)
        return emq__error_set(ps->err, EMQ_ENOMEM, 0,
                              "out of memory parsing the URL");
    return EMQ_OK;
}

/* Parses the Sentinels "host[:port],host[:port]..." of [s, e) into
 * u->sentinels (port 26379 when absent). */
static emq_status parse_sentinels(const parser *ps, const char *s,
                                  const char *e, emq__url *u) {
    size_t n = 1;
    for (const char *c = s; c < e; c++)
        n += *c == ',';
    if (n > EMQ_SENTINELS_MAX)
        return emq__error_set(ps->err, EMQ_EINVAL, 0,
                              "a Sentinel URL names %zu Sentinels; at most "
                              "%d",
                              n, EMQ_SENTINELS_MAX);
    /* Room for those a Sentinel names later (emq__sentinel_learn). */
    u->sentinels = emq__calloc(EMQ_SENTINELS_MAX, sizeof *u->sentinels);
    if (u->sentinels == NULL)
        return emq__error_set(ps->err, EMQ_ENOMEM, 0,
                              "out of memory parsing the URL");
    while (s <= e) {
        const char *comma = memchr(s, ',', (size_t)(e - s));
        const char *end = comma ? comma : e;
        emq__url one;
        memset(&one, 0, sizeof one);
        emq_status st = parse_hostport(ps, s, end, &one);
        if (st != EMQ_OK)
            return st;
        /* A port was given: a ':' outside an IPv6 address's brackets. */
        const char *close = *s == '[' ? memchr(s, ']', (size_t)(end - s)) : s;
        int given = close != NULL &&
                    memchr(close, ':', (size_t)(end - close)) != NULL;
        u->sentinels[u->nsentinels].host = one.host;
        u->sentinels[u->nsentinels++].port = given ? one.port
                                                   : EMQ_SENTINEL_PORT;
        if (comma == NULL)
            break;
        s = comma + 1;
    }
    return EMQ_OK;
}

/* Stores the decoded value of one query parameter [k, k+kn) = [v, v+vn)
 * into u. Returns EMQ_OK, EMQ_ENOMEM, or EMQ_EINVAL naming the parameter. */
static emq_status parse_param(const parser *ps, const char *k, size_t kn,
                              const char *v, size_t vn, emq__url *u) {
    static const char *const tls_names[] = {"tls.ca_file", "tls.cert_file",
                                            "tls.key_file", "tls.sni",
                                            "tls.verify"};
    char q[100];
    if (kn == 2 && memcmp(k, "db", 2) == 0) {
        if (u->scheme != EMQ_URL_UNIX)
            return emq__error_set(ps->err, EMQ_EINVAL, 0,
                                  "parameter 'db' is for unix:// URLs; give "
                                  "the database as the path, e.g. "
                                  "redis://host:6379/2");
        return parse_db(ps, v, vn, u);
    }
    size_t which = sizeof tls_names / sizeof tls_names[0];
    for (size_t i = 0; i < sizeof tls_names / sizeof tls_names[0]; i++)
        if (strlen(tls_names[i]) == kn && memcmp(k, tls_names[i], kn) == 0)
            which = i;
    if (which == sizeof tls_names / sizeof tls_names[0])
        return emq__error_set(ps->err, EMQ_EINVAL, 0,
                              "unknown URL parameter %s; use db (unix://) or "
                              "tls.ca_file, tls.cert_file, tls.key_file, "
                              "tls.sni, tls.verify (rediss://)",
                              quote(ps, k, kn, q, sizeof q));
    if (u->scheme != EMQ_URL_TLS)
        return emq__error_set(ps->err, EMQ_EINVAL, 0,
                              "parameter '%s' needs a rediss:// URL",
                              tls_names[which]);
    if (vn == 0)
        return emq__error_set(ps->err, EMQ_EINVAL, 0, "parameter '%s' is empty",
                              tls_names[which]);
    char *value = NULL;
    emq_status st = decode(ps, v, vn, tls_names[which], &value);
    if (st != EMQ_OK)
        return st;
    char **slot = NULL;
    switch (which) {
    case 0:
        slot = &u->tls_ca_file;
        break;
    case 1:
        slot = &u->tls_cert_file;
        break;
    case 2:
        slot = &u->tls_key_file;
        break;
    case 3:
        slot = &u->tls_sni;
        break;
    default:
        if (strcmp(value, "peer") == 0 || strcmp(value, "none") == 0) {
            u->tls_verify = value[0] == 'p';
            emq__free(value);
            return EMQ_OK;
        }
        emq__free(value);
        return emq__error_set(ps->err, EMQ_EINVAL, 0,
                              "parameter 'tls.verify' is %s; use peer or none",
                              quote(ps, v, vn, q, sizeof q));
    }
    emq__free(*slot); /* a repeated parameter: the last one wins */
    *slot = value;
    return EMQ_OK;
}

/* Parses the query [s, e) (without the '?'). */
static emq_status parse_query(const parser *ps, const char *s, const char *e,
                              emq__url *u) {
    while (s < e) {
        const char *amp = memchr(s, '&', (size_t)(e - s));
        const char *end = amp ? amp : e;
        if (end > s) {
            const char *eq = memchr(s, '=', (size_t)(end - s));
            const char *k = s;
            size_t kn = (size_t)((eq ? eq : end) - s);
            const char *v = eq ? eq + 1 : end;
            emq_status st = parse_param(ps, k, kn, v, (size_t)(end - v), u);
            if (st != EMQ_OK)
                return st;
        }
        s = amp ? amp + 1 : e;
    }
    return EMQ_OK;
}

/* Matches the scheme [s, s+n) case-insensitively. Returns 1 on a match. */
static int scheme_is(const char *s, size_t n, const char *name);

/* Every scheme a URL may have, and what it means: the parser's and the
 * redaction's one list. */
static const struct {
    const char *name;
    emq__url_scheme scheme;
    int sentinel;
} schemes[] = {
    {"redis", EMQ_URL_TCP, 0},           {"rediss", EMQ_URL_TLS, 0},
    {"unix", EMQ_URL_UNIX, 0},           {"redis-sentinel", EMQ_URL_TCP, 1},
    {"redis+sentinel", EMQ_URL_TCP, 1},  {"rediss-sentinel", EMQ_URL_TLS, 1},
    {"rediss+sentinel", EMQ_URL_TLS, 1},
};

/* The index in schemes of the scheme [s, s+n); -1 when it is none. */
static int scheme_find(const char *s, size_t n) {
    for (size_t i = 0; i < sizeof schemes / sizeof schemes[0]; i++)
        if (scheme_is(s, n, schemes[i].name))
            return (int)i;
    return -1;
}

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

/* The '@' that ends the user info of the part of a URL after "://" (rest
 * up to qend, the query's '?' or the end), or NULL when there is none: the
 * last '@', and for unix:// the last one followed by the path's '/', so a
 * socket path may hold '@' too. */
static const char *userinfo_end(int is_unix, const char *rest,
                                const char *qend) {
    const char *at = NULL;
    if (!(is_unix && *rest == '/'))
        for (const char *c = rest; c < qend; c++)
            if (*c == '@' && (!is_unix || c[1] == '/'))
                at = c;
    return at;
}

/* The body of emq__url_parse; u is zeroed by the caller and freed by it on
 * failure. */
static emq_status parse(const parser *ps, emq__url *u) {
    const char *text = ps->text;
    char q[100];
    emq_status st0;
    const char *sep = strstr(text, "://");
    if (sep == NULL)
        return emq__error_set(ps->err, EMQ_EINVAL, 0,
                              "URL has no scheme; use redis://host:port, "
                              "rediss://host:port or unix:///path");
    size_t sn = (size_t)(sep - text);
    int known = scheme_find(text, sn);
    int sentinel = known >= 0 && schemes[known].sentinel;
    if (known >= 0) {
        u->scheme = schemes[known].scheme;
    } else {
        /* A scheme is a short word of letters (http, tcp, valkey, redis+tls);
         * anything else is withheld, since it may be a password typed where
         * the scheme should be, and a password mostly holds a digit. */
        int word = sn > 0 && sn <= 16;
        for (size_t i = 0; i < sn && word; i++) {
            char c = text[i];
            word = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                   c == '+' || c == '-' || c == '.';
        }
        char shown[24];
        if (word)
            emq__printable(shown, sizeof shown, text, sn);
        return emq__error_set(ps->err, EMQ_EINVAL, 0,
                              "unsupported scheme '%s'; use redis://, "
                              "rediss://, unix:// or redis-sentinel://",
                              word ? shown : "(withheld)");
    }

    const char *rest = sep + 3;
    const char *end = rest + strlen(rest);
    if (sentinel) { /* #NAME ends it (after the last '@': not a password) */
        const char *from = ps->secret_end ? ps->secret_end : rest;
        const char *hash = strchr(from, '#');
        if (hash == NULL || hash[1] == '\0')
            return emq__error_set(ps->err, EMQ_EINVAL, 0,
                                  "a Sentinel URL names its master after "
                                  "'#', e.g. "
                                  "redis-sentinel://127.0.0.1:26379#mymaster");
        st0 = decode(ps, hash + 1, (size_t)(end - hash - 1), "master name",
                     &u->master);
        if (st0 != EMQ_OK)
            return st0;
        end = hash;
    }
    const char *qmark = memchr(rest, '?', (size_t)(end - rest));
    const char *qend = qmark ? qmark : end;
    const char *at = userinfo_end(u->scheme == EMQ_URL_UNIX, rest, qend);

    emq_status st;
    const char *body = rest;
    if (at) {
        const char *colon = memchr(rest, ':', (size_t)(at - rest));
        const char *ue = colon ? colon : at;
        if (ue > rest) {
            st = decode(ps, rest, (size_t)(ue - rest), "user name", &u->user);
            if (st != EMQ_OK)
                return st;
            u->user_alone = colon == NULL;
        }
        if (colon && at > colon + 1) {
            st = decode(ps, colon + 1, (size_t)(at - colon - 1), "password",
                        &u->password);
            if (st != EMQ_OK)
                return st;
        }
        body = at + 1;
    }

    if (u->scheme == EMQ_URL_UNIX) {
        if (body == qend)
            return emq__error_set(ps->err, EMQ_EINVAL, 0,
                                  "socket path is missing; e.g. "
                                  "unix:///run/redis.sock");
        if (*body != '/')
            return emq__error_set(
                ps->err, EMQ_EINVAL, 0,
                "socket path %s is not absolute; e.g. "
                "unix:///run/redis.sock",
                quote(ps, body, (size_t)(qend - body), q, sizeof q));
        st = decode(ps, body, (size_t)(qend - body), "socket path", &u->path);
        if (st != EMQ_OK)
            return st;
    } else {
        const char *slash = memchr(body, '/', (size_t)(qend - body));
        const char *hpe = slash ? slash : qend;
        st = sentinel ? parse_sentinels(ps, body, hpe, u)
                      : parse_hostport(ps, body, hpe, u);
        if (st != EMQ_OK)
            return st;
        if (slash && qend > slash + 1) {
            st = parse_db(ps, slash + 1, (size_t)(qend - slash - 1), u);
            if (st != EMQ_OK)
                return st;
        }
    }
    if (qmark)
        return parse_query(ps, qmark + 1, end, u);
    return EMQ_OK;
}

emq_status emq__hostport_parse(const char *text, size_t len, emq__url *out,
                               emq_error *err) {
    memset(out, 0, sizeof *out);
    out->scheme = EMQ_URL_TCP;
    out->db = -1;
    out->tls_verify = -1;
    parser ps = {text, NULL, err};
    emq_status st = parse_hostport(&ps, text, text + len, out);
    if (st != EMQ_OK)
        emq__url_free(out);
    return st;
}

emq_status emq__url_parse(const char *text, emq__url *out, emq_error *err) {
    memset(out, 0, sizeof *out);
    out->db = -1;
    out->tls_verify = -1;
    if (text == NULL)
        return emq__error_set(err, EMQ_EINVAL, 0, "URL is missing");
    parser ps = {text, strrchr(text, '@'), err};
    emq_status st = parse(&ps, out);
    if (st != EMQ_OK) {
        emq__url_free(out);
        return st;
    }
    return EMQ_OK;
}

void emq__url_free(emq__url *u) {
    if (u == NULL)
        return;
    for (size_t i = 0; i < u->nsentinels; i++)
        emq__free(u->sentinels[i].host);
    emq__free(u->sentinels);
    if (u->password)
        emq__wipe(u->password, strlen(u->password));
    char *strings[] = {u->host,         u->path,        u->user,
                       u->password,     u->tls_ca_file, u->tls_cert_file,
                       u->tls_key_file, u->tls_sni,     u->master};
    for (size_t i = 0; i < sizeof strings / sizeof strings[0]; i++)
        emq__free(strings[i]);
    memset(u, 0, sizeof *u);
    u->db = -1;
    u->tls_verify = -1;
}

/* Adds to spans (n of them) the secret of the user info that ends at at
 * (rest: where it begins): after its first ':' when it has one, else all
 * of it (a lone user info may be a password, as redis-cli reads it). */
static void add_userinfo_span(const char *text, const char *rest,
                              const char *at, size_t spans[5][2], size_t *n) {
    if (at == NULL || at <= rest)
        return;
    const char *colon = memchr(rest, ':', (size_t)(at - rest));
    const char *from = colon ? colon + 1 : rest;
    if (at > from) {
        spans[*n][0] = (size_t)(from - text);
        spans[(*n)++][1] = (size_t)(at - text);
    }
}

/* The stretches of text that may hold a secret, whatever shape the text
 * has (it may be a URL the parser refuses): [spans[i][0], spans[i][1]),
 * sorted, apart. Without "//" the whole text (a password typed where a
 * URL belongs); an unknown scheme (a password before "://"); the user
 * info as the parser reads it (up to the last '@' before the first '?',
 * for unix:// the last "@/"); and for a text it refuses, every other way
 * it may be meant too: up to the last '@' of all (an unescaped '?' in the
 * password), for unix:// also the last '@' not before a '/'. Returns the
 * number of spans (at most 5). */
static size_t secret_spans(const char *text, size_t spans[5][2]) {
    emq__url parsed_url;
    int parsed = emq__url_parse(text, &parsed_url, NULL) == EMQ_OK;
    if (parsed)
        emq__url_free(&parsed_url);
    size_t len = strlen(text), n = 0;
    const char *sep = strstr(text, "//");
    if (sep == NULL) {
        if (len == 0)
            return 0;
        spans[0][0] = 0;
        spans[0][1] = len;
        return 1;
    }
    size_t sn = (size_t)(sep - text);
    if (sn > 0 && text[sn - 1] == ':')
        sn--;
    int is_unix = scheme_is(text, sn, "unix");
    if (sn > 0 && scheme_find(text, sn) < 0) {
        spans[n][0] = 0;
        spans[n++][1] = sn;
    }
    const char *rest = sep + 2, *end = rest + strlen(rest);
    const char *q = strchr(rest, '?');
    add_userinfo_span(text, rest, userinfo_end(is_unix, rest, q ? q : end),
                      spans, &n);
    if (!parsed) {
        for (int unix_rule = 0; unix_rule <= is_unix; unix_rule++)
            add_userinfo_span(text, rest, userinfo_end(unix_rule, rest, end),
                              spans, &n);
        if (is_unix && q != NULL)
            add_userinfo_span(text, rest, userinfo_end(0, rest, q), spans, &n);
    }
    /* Sorted by start, overlapping ones joined. */
    for (size_t i = 1; i < n; i++)
        for (size_t k = i; k > 0 && spans[k][0] < spans[k - 1][0]; k--) {
            size_t s0 = spans[k][0], s1 = spans[k][1];
            spans[k][0] = spans[k - 1][0];
            spans[k][1] = spans[k - 1][1];
            spans[k - 1][0] = s0;
            spans[k - 1][1] = s1;
        }
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        if (m > 0 && spans[i][0] <= spans[m - 1][1]) {
            if (spans[i][1] > spans[m - 1][1])
                spans[m - 1][1] = spans[i][1];
            continue;
        }
        spans[m][0] = spans[i][0];
        spans[m++][1] = spans[i][1];
    }
    return m;
}

char *emq_url_redact(const char *text, char *out, size_t size) {
    if (size == 0)
        return out;
    size_t spans[5][2];
    size_t n = text ? secret_spans(text, spans) : 0;
    size_t done = 0, pos = 0;
    out[0] = '\0';
    for (size_t i = 0; i <= n && text; i++) {
        size_t end = i < n ? spans[i][0] : strlen(text);
        int w = snprintf(out + done, size - done, "%.*s%s", (int)(end - pos),
                         text + pos, i < n ? "***" : "");
        if (w < 0 || (size_t)w >= size - done)
            break; /* truncated: what is there holds no secret */
        done += (size_t)w;
        if (i < n)
            pos = spans[i][1];
    }
    return out;
}

void emq_url_mask(char *text) {
    size_t spans[5][2];
    size_t n = text ? secret_spans(text, spans) : 0;
    for (size_t i = 0; i < n; i++)
        memset(text + spans[i][0], '*', spans[i][1] - spans[i][0]);
}
