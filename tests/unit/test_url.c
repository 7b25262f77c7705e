/* SPDX-License-Identifier: BSD-3-Clause */
/* test_url.c: URL parsing (conn/url.c), without a server.
 *
 * Good URLs are checked field by field. Every bad URL carries the same
 * distinctive password, and every error message is checked to name the
 * bad part and to contain no piece of that password.
 */
#include "harness/test.h"
#include "base/base.h"
#include "conn/conn.h"

#define PW "Zq9SecretPw"

/* Fails unless msg is free of the password and of its halves. */
static void assert_no_password(const char *msg) {
    ASSERT_NOT_CONTAINS(msg, PW);
    ASSERT_NOT_CONTAINS(msg, "Zq9S");
    ASSERT_NOT_CONTAINS(msg, "SecretPw");
    ASSERT_NOT_CONTAINS(msg, "cretP");
}

TEST(url_plain_defaults) {
    emq__url u;
    emq_error err;
    ASSERT_OK(emq__url_parse("redis://127.0.0.1", &u, &err), &err);
    ASSERT_EQ_INT(u.scheme, EMQ_URL_TCP);
    ASSERT_EQ_STR(u.host, "127.0.0.1");
    ASSERT_EQ_INT(u.port, 6379);
    ASSERT_EQ_INT(u.db, -1);
    ASSERT(u.user == NULL && u.password == NULL && u.path == NULL);
    ASSERT_EQ_INT(u.tls_verify, -1);
    emq__url_free(&u);
}

TEST(url_full_tcp_with_percent_decoding) {
    emq__url u;
    emq_error err;
    ASSERT_OK(
        emq__url_parse("REDIS://al%69ce:p%40ss%3Aw@cache-1.example.com:6380/3",
                       &u, &err),
        &err);
    ASSERT_EQ_INT(u.scheme, EMQ_URL_TCP);
    ASSERT_EQ_STR(u.user, "alice");
    ASSERT_EQ_STR(u.password, "p@ss:w");
    ASSERT_EQ_STR(u.host, "cache-1.example.com");
    ASSERT_EQ_INT(u.port, 6380);
    ASSERT_EQ_INT(u.db, 3);
    emq__url_free(&u);
    ASSERT(u.password == NULL && u.host == NULL);
}

TEST(url_raw_at_slash_colon_in_password) {
    /* Generated (base64) passwords hold '/', '+', '='; users paste '@'. */
    emq__url u;
    emq_error err;
    ASSERT_OK(emq__url_parse("redis://:ab/c+d=@x:y@h.local:7000/2", &u, &err),
              &err);
    ASSERT(u.user == NULL);
    ASSERT_EQ_STR(u.password, "ab/c+d=@x:y");
    ASSERT_EQ_STR(u.host, "h.local");
    ASSERT_EQ_INT(u.port, 7000);
    ASSERT_EQ_INT(u.db, 2);
    emq__url_free(&u);
}

TEST(url_user_only_and_empty_password) {
    emq__url u;
    emq_error err;
    ASSERT_OK(emq__url_parse("redis://worker@h", &u, &err), &err);
    ASSERT_EQ_STR(u.user, "worker");
    ASSERT(u.password == NULL);
    emq__url_free(&u);
    ASSERT_OK(emq__url_parse("redis://:@h/", &u, &err), &err);
    ASSERT(u.user == NULL && u.password == NULL);
    ASSERT_EQ_INT(u.db, -1);
    emq__url_free(&u);
}

TEST(url_ipv6_in_brackets) {
    emq__url u;
    emq_error err;
    ASSERT_OK(emq__url_parse("redis://[::1]:7001/1", &u, &err), &err);
    ASSERT_EQ_STR(u.host, "::1");
    ASSERT_EQ_INT(u.port, 7001);
    ASSERT_EQ_INT(u.db, 1);
    emq__url_free(&u);
    ASSERT_OK(emq__url_parse("rediss://[2001:db8::7]", &u, &err), &err);
    ASSERT_EQ_STR(u.host, "2001:db8::7");
    ASSERT_EQ_INT(u.port, 6379);
    ASSERT_EQ_INT(u.scheme, EMQ_URL_TLS);
    emq__url_free(&u);
}

TEST(url_unix_socket) {
    emq__url u;
    emq_error err;
    ASSERT_OK(emq__url_parse("unix:///run/redis%20x/r.sock?db=4", &u, &err),
              &err);
    ASSERT_EQ_INT(u.scheme, EMQ_URL_UNIX);
    ASSERT_EQ_STR(u.path, "/run/redis x/r.sock");
    ASSERT_EQ_INT(u.db, 4);
    ASSERT(u.host == NULL);
    emq__url_free(&u);
    ASSERT_OK(emq__url_parse("unix://bob:pw@/tmp/a@b.sock", &u, &err), &err);
    ASSERT_EQ_STR(u.user, "bob");
    ASSERT_EQ_STR(u.password, "pw");
    ASSERT_EQ_STR(u.path, "/tmp/a@b.sock");
    emq__url_free(&u);
    /* A path right after // has no user info, even with '@' in it. */
    ASSERT_OK(emq__url_parse("unix:///tmp/x@y.sock", &u, &err), &err);
    ASSERT_EQ_STR(u.path, "/tmp/x@y.sock");
    ASSERT(u.user == NULL && u.password == NULL);
    emq__url_free(&u);
}

TEST(url_rediss_tls_parameters) {
    emq__url u;
    emq_error err;
    ASSERT_OK(emq__url_parse("rediss://h:6380/0?tls.ca_file=/etc/ca%20b.pem&"
                             "tls.verify=none&tls.sni=cache.internal&"
                             "tls.cert_file=/c.pem&tls.key_file=/k.pem",
                             &u, &err),
              &err);
    ASSERT_EQ_INT(u.scheme, EMQ_URL_TLS);
    ASSERT_EQ_INT(u.port, 6380);
    ASSERT_EQ_INT(u.db, 0);
    ASSERT_EQ_STR(u.tls_ca_file, "/etc/ca b.pem");
    ASSERT_EQ_INT(u.tls_verify, 0);
    ASSERT_EQ_STR(u.tls_sni, "cache.internal");
    ASSERT_EQ_STR(u.tls_cert_file, "/c.pem");
    ASSERT_EQ_STR(u.tls_key_file, "/k.pem");
    emq__url_free(&u);
    ASSERT_OK(emq__url_parse("rediss://h?tls.verify=peer&tls.sni=a&tls.sni=b",
                             &u, &err),
              &err);
    ASSERT_EQ_INT(u.tls_verify, 1);
    ASSERT_EQ_STR(u.tls_sni, "b"); /* the last one wins */
    emq__url_free(&u);
}

/* Each bad URL, with the sentence its error must contain. */
static const struct {
    const char *url;
    const char *want;
} bad_urls[] = {
    {"http://u:" PW "@h",
     "unsupported scheme 'http'; use redis://, rediss://, unix:// or redis-sentinel://"},
    {"u:" PW "@h:6379", "URL has no scheme"},
    {"redis://u:" PW "@h:99999", "port '99999' is out of range 1-65535"},
    {"redis://u:" PW "@h:0", "port '0' is out of range 1-65535"},
    {"redis://u:" PW "@h:12ab", "port '12ab' is not a number"},
    {"redis://u:" PW "@h:", "port '' is not a number"},
    {"redis://u:" PW "@h/x", "database 'x' is not a number"},
    {"redis://u:" PW "@h/-1", "database '-1' is not a number"},
    {"redis://u:" PW "@h/99999999999",
     "database '99999999999' is out of range"},
    {"redis://u:" PW "@h/0/1", "database '0/1' is not a number"},
    {"redis://u:" PW "@:6379", "host is missing"},
    {"redis://u:" PW "@/0", "host is missing"},
    {"redis://u:" PW "@ho st", "host 'ho st' is not a valid host name"},
    {"redis://u:" PW "@::1:6379", "looks like an IPv6 address"},
    {"redis://u:" PW "@[::1:6379", "has no closing ']'"},
    {"redis://u:" PW "@[::1]x", "after IPv6 address"},
    {"redis://u:Zq9Secret%zzPw@h", "password has an invalid percent escape"},
    {"redis://u:Zq9Secret%00Pw@h", "password has an invalid percent escape"},
    {"redis://u:Zq9SecretPw%4@h", "password has an invalid percent escape"},
    {"redis://u%g:" PW "@h", "user name has an invalid percent escape"},
    {"rediss://u:" PW "@h?tls.verify=maybe",
     "'tls.verify' is 'maybe'; use peer or none"},
    {"rediss://u:" PW "@h?tls.ca_file=", "parameter 'tls.ca_file' is empty"},
    {"redis://u:" PW "@h?tls.ca_file=/x",
     "parameter 'tls.ca_file' needs a rediss:// URL"},
    {"redis://u:" PW "@h?foo=1", "unknown URL parameter 'foo'"},
    {"redis://u:" PW "@h:6379/0?db=1", "parameter 'db' is for unix:// URLs"},
    {"unix://u:" PW "@tmp/x.sock", "is not absolute"},
    {"unix://u:" PW "@", "socket path (withheld) is not absolute"},
    {"unix://", "socket path is missing"},
    {"unix://u:" PW "@/tmp/x?db=x", "database 'x' is not a number"},
    /* Raw '?' in a password breaks the split; the message still may not
     * quote any of it. */
    {"redis://u:Zq9Secret?Pw@h:1", "port (withheld) is not a number"},
    {"redis://:Zq9Secret?Pw@h:1", "host is missing"},
    {"redis://Zq9SecretPw:x?y@h", "port (withheld) is not a number"},
};

TEST(url_errors_name_the_part_and_never_the_password) {
    for (size_t i = 0; i < sizeof bad_urls / sizeof bad_urls[0]; i++) {
        emq__url u;
        emq_error err;
        emq__error_clear(&err);
        emq_status st = emq__url_parse(bad_urls[i].url, &u, &err);
        if (st != EMQ_EINVAL)
            FAIL("%s: got %s, want EMQ_EINVAL", bad_urls[i].url,
                 emq_status_name(st));
        ASSERT_EQ_INT(err.code, EMQ_EINVAL);
        ASSERT_EQ_INT(err.retriable, 0);
        if (strstr(err.message, bad_urls[i].want) == NULL)
            FAIL("%s: message \"%s\" lacks \"%s\"", bad_urls[i].url,
                 err.message, bad_urls[i].want);
        assert_no_password(err.message);
        /* Nothing is left to free after a failure. */
        ASSERT(u.host == NULL && u.user == NULL && u.password == NULL);
    }
}

TEST(url_quoted_parts_after_an_at_in_the_query_are_withheld) {
    /* The last '@' of the whole URL bounds what may be quoted. */
    emq__url u;
    emq_error err;
    ASSERT_STATUS(
        emq__url_parse("rediss://u:" PW "@h:99999?tls.ca_file=/a@b", &u, &err),
        EMQ_EINVAL, &err);
    ASSERT_CONTAINS(err.message, "port (withheld) is out of range");
    assert_no_password(err.message);
}

TEST(url_parse_survives_every_allocation_failure) {
    const char *text = "rediss://user:pw@h:1/2?tls.ca_file=/a&tls.cert_file=/b"
                       "&tls.key_file=/c&tls.sni=s";
    int ok = 0;
    for (uint64_t n = 1; n < 64 && !ok; n++) {
        emq__url u;
        emq_error err;
        emq__alloc_fail_at(n);
        emq_status st = emq__url_parse(text, &u, &err);
        emq__alloc_fail_at(0);
        if (st == EMQ_OK) {
            ASSERT_EQ_STR(u.tls_sni, "s");
            emq__url_free(&u);
            ok = 1;
        } else {
            ASSERT_STATUS(st, EMQ_ENOMEM, &err);
        }
    }
    ASSERT(ok);
}

/* ---- redaction: every shape, valid or not --------------------- */

/* Each shape holds the secret "Zq9", once or split by odd characters;
 * redaction and in-place masking must hide all of it, and keep what is
 * not secret. */
static const struct {
    const char *url, *shown;
} shapes[] = {
    {"redis://u:Zq9@127.0.0.1:6379", "redis://u:***@127.0.0.1:6379"},
    {"redis://u:Zq?9@127.0.0.1:6379", "redis://u:***@127.0.0.1:6379"},
    {"redis://u:Z@q9@h", "redis://u:***@h"},
    {"redis://:Zq9@h/2", "redis://:***@h/2"},
    {"redis://Zq9@h:1", "redis://***@h:1"},
    {"redis://u:Zq%399@h", "redis://u:***@h"},
    {"rediss://u:Zq9@[::1]:7001?tls.ca=/a",
     "rediss://u:***@[::1]:7001?tls.ca=/a"},
    {"unix://:Zq9@/tmp/a@b.sock?db=1", "unix://:***@/tmp/a@b.sock?db=1"},
    {"redis//u:Zq9@h", "redis//u:***@h"},
    {"Zq9://h", "***://h"},
    {"Zq9", "***"},
    {"redis://h:1/0", "redis://h:1/0"},
    {"unix:///tmp/x.sock", "unix:///tmp/x.sock"},
};

TEST(url_redact_hides_every_secret_shape) {
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        char out[256];
        emq_url_redact(shapes[i].url, out, sizeof out);
        ASSERT_EQ_STR(out, shapes[i].shown);
        ASSERT(strstr(out, "Zq") == NULL && strstr(out, "q9") == NULL);
        char masked[256];
        snprintf(masked, sizeof masked, "%s", shapes[i].url);
        emq_url_mask(masked);
        ASSERT_EQ_SIZE(strlen(masked), strlen(shapes[i].url));
        ASSERT(strstr(masked, "Zq") == NULL && strstr(masked, "q9") == NULL);
    }
    /* Truncated output never ends inside a secret. */
    char small[12];
    emq_url_redact("redis://u:Zq9Zq9Zq9@h", small, sizeof small);
    ASSERT(strstr(small, "Zq") == NULL);
    emq_url_mask(NULL);
}

/* ---- Sentinel URLs (the Lettuce form) ---------------------------------- */

TEST(url_sentinel_hosts_master_and_data_credentials) {
    emq__url u;
    emq_error err;
    ASSERT_OK(emq__url_parse("redis-sentinel://app:" PW "#x@10.0.0.1,"
                             "s2.example:26380,[::1]:26381/2#my%20master",
                             &u, &err),
              &err);
    ASSERT_EQ_INT(u.scheme, EMQ_URL_TCP);
    ASSERT_EQ_STR(u.user, "app");
    ASSERT_EQ_STR(u.password, PW "#x"); /* a '#' before the '@' is the
                                           password's */
    ASSERT(u.host == NULL);             /* until a Sentinel names it */
    ASSERT_EQ_SIZE(u.nsentinels, 3);
    ASSERT_EQ_STR(u.sentinels[0].host, "10.0.0.1");
    ASSERT_EQ_INT(u.sentinels[0].port, EMQ_SENTINEL_PORT);
    ASSERT_EQ_STR(u.sentinels[1].host, "s2.example");
    ASSERT_EQ_INT(u.sentinels[1].port, 26380);
    ASSERT_EQ_STR(u.sentinels[2].host, "::1");
    ASSERT_EQ_INT(u.sentinels[2].port, 26381);
    ASSERT_EQ_INT(u.db, 2);
    ASSERT_EQ_STR(u.master, "my master");
    emq__url_free(&u);
    char shown[256];
    emq_url_redact("redis-sentinel://app:" PW "@10.0.0.1,s2:26380#m", shown,
                   sizeof shown);
    assert_no_password(shown);
    ASSERT_EQ_STR(shown, "redis-sentinel://app:***@10.0.0.1,s2:26380#m");
    emq_url_redact("rediss+sentinel://h#m", shown, sizeof shown);
    ASSERT_EQ_STR(shown, "rediss+sentinel://h#m"); /* the scheme shown */
    ASSERT_OK(emq__url_parse("rediss+sentinel://h#m", &u, &err), &err);
    ASSERT_EQ_INT(u.scheme, EMQ_URL_TLS);
    ASSERT_EQ_SIZE(u.nsentinels, 1);
    ASSERT_EQ_STR(u.master, "m");
    emq__url_free(&u);
}

TEST(url_sentinel_refusals_name_what_is_wrong) {
    emq__url u;
    emq_error err;
    ASSERT_STATUS(
        emq__url_parse("redis-sentinel://u:" PW "@127.0.0.1", &u, &err),
        EMQ_EINVAL, &err);
    ASSERT_CONTAINS(err.message, "names its master after '#'");
    assert_no_password(err.message);
    ASSERT_STATUS(emq__url_parse("redis-sentinel://h:99999#m", &u, &err),
                  EMQ_EINVAL, &err);
    ASSERT_CONTAINS(err.message, "out of range");
    char many[600] = "redis-sentinel://";
    for (int i = 0; i < EMQ_SENTINELS_MAX + 1; i++)
        strcat(many, i ? ",h" : "h");
    strcat(many, "#m");
    ASSERT_STATUS(emq__url_parse(many, &u, &err), EMQ_EINVAL, &err);
    ASSERT_CONTAINS(err.message, "at most");
}

/* Fails, naming the shape, when text holds a piece of the password. */
static void shape_check(const char *url, const char *where, const char *text) {
    static const char *const pieces[] = {PW, "Zq9S", "SecretPw", "cretP"};
    for (size_t i = 0; i < sizeof pieces / sizeof pieces[0]; i++)
        if (strstr(text, pieces[i]) != NULL)
            FAIL("%s shows \"%s\" for the URL %s: %s", where, pieces[i], url,
                 text);
}

/* Thousands of URL shapes, valid and not, each with the password where a
 * user types one (after a user and ':', alone before '@', with '@', '?',
 * '#', '/' or ':' inside it, as the scheme): the parser's error, the
 * redaction and the configuration's error and read-back never show a
 * piece of it. */
TEST(url_shapes_by_the_thousand_never_show_the_password) {
    static const char *const schemes[] = {"redis",
                                          "rediss",
                                          "unix",
                                          "redis-sentinel",
                                          "rediss+sentinel",
                                          "REDIS",
                                          "valkey",
                                          "",
                                          PW};
    static const char *const seps[] = {"://", ":/", "//", ":"};
    static const char *const users[] = {
        "u:" PW "@",    ":" PW "@",    PW "@",        "u:" PW ":x@",
        "u:" PW "@x@",  "u:" PW "?x@", "u:" PW "#x@", "u:" PW "/x@",
        "u:%41" PW "@", "u:" PW "@@",  "u@:" PW "@",  "u:" PW "@/"};
    static const char *const hosts[] = {"127.0.0.1:6379", "[::1]:1",
                                        "localhost/s.sock", "/tmp/s.sock",
                                        "h:99999"};
    static const char *const tails[] = {"", "/1#m", "?x@y", "?db=1"};
    size_t tried = 0;
    emq_conf_t *conf = emq_conf_new();
    ASSERT(conf != NULL);
    for (size_t a = 0; a < sizeof schemes / sizeof *schemes; a++)
        for (size_t b = 0; b < sizeof seps / sizeof *seps; b++)
            for (size_t c = 0; c < sizeof users / sizeof *users; c++)
                for (size_t d = 0; d < sizeof hosts / sizeof *hosts; d++)
                    for (size_t e = 0; e < sizeof tails / sizeof *tails; e++) {
                        char url[256], out[512];
                        snprintf(url, sizeof url, "%s%s%s%s%s", schemes[a],
                                 seps[b], users[c], hosts[d], tails[e]);
                        emq__url u;
                        emq_error err;
                        emq__error_clear(&err);
                        if (emq__url_parse(url, &u, &err) == EMQ_OK)
                            emq__url_free(&u);
                        else
                            shape_check(url, "the parser's error", err.message);
                        shape_check(url, "emq_url_redact",
                                    emq_url_redact(url, out, sizeof out));
                        if (emq_conf_set(conf, "url", url, &err) != EMQ_OK)
                            shape_check(url, "emq_conf_set's error",
                                        err.message);
                        else if (emq_conf_get(conf, "url", out, sizeof out,
                                              &err) == EMQ_OK)
                            shape_check(url, "emq_conf_get(url)", out);
                        tried++;
                    }
    emq_conf_destroy(conf);
    ASSERT(tried >= 1000);
    printf("    %zu URL shapes\n", tried);
}

TEST(url_host_patterns_allow_hosts) {
    ASSERT_EQ_INT(emq__host_allowed(NULL, "anything"), 1);
    ASSERT_EQ_INT(emq__host_allowed("", "anything"), 1);
    const char *p = "10.0.*,*.Cache.internal,node-?";
    ASSERT_EQ_INT(emq__host_allowed(p, "10.0.3.4"), 1);
    ASSERT_EQ_INT(emq__host_allowed(p, "10.1.3.4"), 0);
    ASSERT_EQ_INT(emq__host_allowed(p, "a.b.cache.INTERNAL"), 1);
    ASSERT_EQ_INT(emq__host_allowed(p, "cache.internal"), 0);
    ASSERT_EQ_INT(emq__host_allowed(p, "node-7"), 1);
    ASSERT_EQ_INT(emq__host_allowed(p, "node-77"), 0);
    ASSERT_EQ_INT(emq__host_allowed("*", "x"), 1);
    ASSERT_EQ_INT(emq__host_allowed("a*b*c", "axxbyyc"), 1);
    ASSERT_EQ_INT(emq__host_allowed("a*b*c", "axxbyy"), 0);
    ASSERT_EQ_INT(emq__host_allowed("127.0.0.1", "127.0.0.10"), 0);

    emq_conf_t *conf = emq_conf_new();
    emq_error err;
    ASSERT_OK(emq_conf_set(conf, "cluster.allowed_hosts", p, &err), &err);
    ASSERT_OK(emq_conf_set(conf, "cluster.allowed_hosts", "fe80::*%eth0", &err),
              &err);
    ASSERT_OK(emq_conf_set(conf, "cluster.allowed_hosts", "", &err), &err);
    static const char *const bad[] = {"a,,b", "a,",      ",a", "a b",
                                      "a/b",  "a?x=1&b", "u@h"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        if (emq_conf_set(conf, "cluster.allowed_hosts", bad[i], &err) !=
            EMQ_EINVAL)
            FAIL("cluster.allowed_hosts '%s' accepted", bad[i]);
        ASSERT_CONTAINS(err.message, "cluster.allowed_hosts");
    }
    emq_conf_destroy(conf);
}
