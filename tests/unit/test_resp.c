/* SPDX-License-Identifier: BSD-3-Clause */
/* test_resp.c: the RESP reader and encoder, without a server.
 *
 * Replies are rendered to a canonical text (render()) and compared with the
 * expected rendering, so one line states the whole shape of a reply. The
 * split tests feed a buffer of many replies cut at every byte position and
 * require the same renderings as an unsplit feed.
 */
#include "harness/test.h"
#include "resp/resp.h"

#include <stdlib.h>

/* ---- rendering ----------------------------------------------------------- */

typedef struct text {
    char data[8192];
    size_t len;
} text;

static void put(text *t, const char *s, size_t n) {
    if (t->len + n >= sizeof t->data)
        FAIL("rendering too long");
    memcpy(t->data + t->len, s, n);
    t->len += n;
    t->data[t->len] = '\0';
}

static void puts_(text *t, const char *s) { put(t, s, strlen(s)); }

/* Strings render with C-style escapes for bytes outside printable ASCII. */
static void put_escaped(text *t, const char *s, size_t n) {
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        char esc[8];
        if (c >= 0x20 && c < 0x7f && c != '\\' && c != '"')
            put(t, (const char *)&c, 1);
        else {
            snprintf(esc, sizeof esc, "\\x%02x", c);
            puts_(t, esc);
        }
    }
}

static void render_into(text *t, const emq_reply *r) {
    char num[64];
    size_t n;
    const char *s;
    const emq_reply *attr = emq_reply_attribute(r);
    if (attr) {
        puts_(t, "@");
        render_into(t, attr);
    }
    switch (emq_reply_kind(r)) {
    case EMQ_REPLY_STRING:
        s = emq_reply_str(r, &n);
        puts_(t, "\"");
        put_escaped(t, s, n);
        puts_(t, "\"");
        break;
    case EMQ_REPLY_STATUS:
        s = emq_reply_str(r, &n);
        puts_(t, "+");
        put_escaped(t, s, n);
        break;
    case EMQ_REPLY_ERROR:
        s = emq_reply_str(r, &n);
        puts_(t, "-");
        put_escaped(t, s, n);
        break;
    case EMQ_REPLY_INTEGER:
        snprintf(num, sizeof num, "%lld", emq_reply_integer(r));
        puts_(t, num);
        break;
    case EMQ_REPLY_NULL:
        puts_(t, "nil");
        break;
    case EMQ_REPLY_DOUBLE:
        snprintf(num, sizeof num, "d%g", emq_reply_double(r));
        puts_(t, num);
        break;
    case EMQ_REPLY_BOOL:
        puts_(t, emq_reply_integer(r) ? "true" : "false");
        break;
    case EMQ_REPLY_BIGNUM:
        s = emq_reply_str(r, &n);
        puts_(t, "(");
        put(t, s, n);
        break;
    case EMQ_REPLY_VERBATIM:
        s = emq_reply_str(r, &n);
        puts_(t, "=");
        puts_(t, emq_reply_format(r));
        puts_(t, ":");
        put_escaped(t, s, n);
        break;
    case EMQ_REPLY_ARRAY:
    case EMQ_REPLY_SET:
    case EMQ_REPLY_PUSH:
    case EMQ_REPLY_MAP: {
        emq_reply_type k = emq_reply_kind(r);
        const char *open = k == EMQ_REPLY_ARRAY  ? "["
                           : k == EMQ_REPLY_SET  ? "~["
                           : k == EMQ_REPLY_PUSH ? ">["
                                                 : "{";
        puts_(t, open);
        for (size_t i = 0; i < emq_reply_len(r); i++) {
            if (i)
                puts_(t, k == EMQ_REPLY_MAP && i % 2 ? ":" : ",");
            render_into(t, emq_reply_at(r, i));
        }
        puts_(t, k == EMQ_REPLY_MAP ? "}" : "]");
        break;
    }
    default:
        FAIL("unknown reply kind %d", (int)emq_reply_kind(r));
    }
}

static const char *render(const emq_reply *r) {
    static text t;
    t.len = 0;
    t.data[0] = '\0';
    render_into(&t, r);
    return t.data;
}

/* Parses exactly one reply from bytes (fed whole) and checks its rendering
 * and that nothing is left over. */
static void expect_one(const char *bytes, size_t len, const char *want) {
    emq_error err;
    emq__resp_reader *r = emq__resp_reader_new(NULL);
    ASSERT(r != NULL);
    ASSERT_OK(emq__resp_feed(r, bytes, len, &err), &err);
    emq_reply *reply;
    ASSERT_OK(emq__resp_next(r, &reply, &err), &err);
    ASSERT_EQ_STR(render(reply), want);
    emq_reply_free(reply);
    ASSERT_EQ_SIZE(emq__resp_buffered(r), 0);
    ASSERT_STATUS(emq__resp_next(r, &reply, &err), EMQ_EAGAIN, &err);
    ASSERT(reply == NULL);
    emq__resp_reader_free(r);
}
#define EXPECT(lit, want) expect_one(lit, sizeof(lit) - 1, want)

/* Feeds bytes and expects a protocol error whose message contains what. */
static void expect_error(const emq__resp_limits *limits, const char *bytes,
                         size_t len, emq_status want, const char *what) {
    emq_error err;
    emq__resp_reader *r = emq__resp_reader_new(limits);
    ASSERT(r != NULL);
    ASSERT_OK(emq__resp_feed(r, bytes, len, &err), &err);
    emq_reply *reply = NULL;
    emq_status st;
    while ((st = emq__resp_next(r, &reply, &err)) == EMQ_OK)
        emq_reply_free(reply);
    ASSERT_STATUS(st, want, &err);
    ASSERT(reply == NULL);
    ASSERT_CONTAINS(err.message, what);
    /* Sticky: the same error again, also after more input. */
    emq_error again;
    ASSERT_STATUS(emq__resp_feed(r, "+OK\r\n", 5, &again), want, &again);
    ASSERT_STATUS(emq__resp_next(r, &reply, &again), want, &again);
    ASSERT_EQ_STR(again.message, err.message);
    ASSERT(emq__resp_failed(r) == want);
    emq__resp_reader_free(r);
}
#define EXPECT_ERROR(lit, what)                                                \
    expect_error(NULL, lit, sizeof(lit) - 1, EMQ_EPROTO, what)

/* ---- every type ---------------------------------------------------------- */

TEST(resp_simple_types) {
    EXPECT("+OK\r\n", "+OK");
    EXPECT("+\r\n", "+");
    EXPECT("-BUSYGROUP Consumer Group name already exists\r\n",
           "-BUSYGROUP Consumer Group name already exists");
    EXPECT(":0\r\n", "0");
    EXPECT(":-1\r\n", "-1");
    EXPECT(":9223372036854775807\r\n", "9223372036854775807");
    EXPECT(":-9223372036854775808\r\n", "-9223372036854775808");
    EXPECT("_\r\n", "nil");
    EXPECT("#t\r\n", "true");
    EXPECT("#f\r\n", "false");
    EXPECT(",1.5\r\n", "d1.5");
    EXPECT(",-0.25\r\n", "d-0.25");
    EXPECT(",inf\r\n", "dinf");
    EXPECT(",-inf\r\n", "d-inf");
    EXPECT(",1e10\r\n", "d1e+10");
    EXPECT("(3492890328409238509324850943850943825024385\r\n",
           "(3492890328409238509324850943850943825024385");
    EXPECT("(-1\r\n", "(-1");
}

TEST(resp_double_nan_and_text) {
    emq_error err;
    emq__resp_reader *r = emq__resp_reader_new(NULL);
    ASSERT_OK(emq__resp_feed(r, ",nan\r\n,3.25\r\n", 13, &err), &err);
    emq_reply *a, *b;
    ASSERT_OK(emq__resp_next(r, &a, &err), &err);
    ASSERT_OK(emq__resp_next(r, &b, &err), &err);
    double d = emq_reply_double(a);
    ASSERT(d != d); /* NaN */
    size_t n;
    const char *s = emq_reply_str(b, &n);
    ASSERT_EQ_MEM(s, n, "3.25", 4);
    ASSERT(emq_reply_double(b) == 3.25);
    emq_reply_free(a);
    emq_reply_free(b);
    emq__resp_reader_free(r);
}

TEST(resp_bulk_strings) {
    EXPECT("$5\r\nhello\r\n", "\"hello\"");
    EXPECT("$0\r\n\r\n", "\"\"");
    EXPECT("$-1\r\n", "nil");
    /* Binary-safe: NUL, CR, LF and 0xff inside the payload. */
    EXPECT("$6\r\na\0\r\n\xff"
           "b\r\n",
           "\"a\\x00\\x0d\\x0a\\xffb\"");
    EXPECT("!21\r\nSYNTAX invalid syntax\r\n", "-SYNTAX invalid syntax");
    EXPECT("=15\r\ntxt:Some string\r\n", "=txt:Some string");
    EXPECT("=4\r\nmkd:\r\n", "=mkd:");
}

TEST(resp_aggregates) {
    EXPECT("*0\r\n", "[]");
    EXPECT("*-1\r\n", "nil");
    EXPECT("*3\r\n:1\r\n$3\r\nfoo\r\n+bar\r\n", "[1,\"foo\",+bar]");
    EXPECT("*2\r\n*2\r\n:1\r\n:2\r\n*0\r\n", "[[1,2],[]]");
    EXPECT("*2\r\n$-1\r\n*-1\r\n", "[nil,nil]");
    EXPECT("%2\r\n+first\r\n:1\r\n+second\r\n:2\r\n", "{+first:1,+second:2}");
    EXPECT("%0\r\n", "{}");
    EXPECT("~3\r\n+a\r\n+b\r\n+c\r\n", "~[+a,+b,+c]");
    EXPECT(">3\r\n+message\r\n+chan\r\n$2\r\nhi\r\n",
           ">[+message,+chan,\"hi\"]");
    EXPECT("*3\r\n_\r\n#t\r\n,2.5\r\n", "[nil,true,d2.5]");
}

TEST(resp_attributes) {
    /* An attribute annotates the value that follows it. */
    EXPECT("|1\r\n+key-popularity\r\n%2\r\n$1\r\na\r\n,0.1923\r\n$1\r\nb\r\n"
           ",0.0012\r\n*2\r\n:2039123\r\n:9543892\r\n",
           "@{+key-popularity:{\"a\":d0.1923,\"b\":d0.0012}}[2039123,9543892]");
    /* Nested inside an aggregate, it is not counted as an element. */
    EXPECT("*2\r\n|1\r\n+ttl\r\n:3600\r\n+a\r\n+b\r\n", "[@{+ttl:3600}+a,+b]");
    /* Empty attribute, and an attribute on the last element. */
    EXPECT("|0\r\n:7\r\n", "@{}7");
    EXPECT("*1\r\n|1\r\n+k\r\n+v\r\n:1\r\n", "[@{+k:+v}1]");
}

TEST(resp_xreadgroup_shapes) {
    /* RESP2: [[stream, [[id, [f, v, ...]], ...]]] including a deleted
     * entry ([id, nil]) as a history read returns it. */
    EXPECT("*1\r\n*2\r\n$1\r\nq\r\n*2\r\n*2\r\n$3\r\n1-0\r\n*2\r\n$1\r\nf\r\n"
           "$1\r\nv\r\n*2\r\n$3\r\n2-0\r\n*-1\r\n",
           "[[\"q\",[[\"1-0\",[\"f\",\"v\"]],[\"2-0\",nil]]]]");
    /* RESP3: a map keyed by stream. */
    EXPECT("%1\r\n$1\r\nq\r\n*1\r\n*2\r\n$3\r\n1-0\r\n*2\r\n$1\r\nf\r\n$1\r\n"
           "v\r\n",
           "{\"q\":[[\"1-0\",[\"f\",\"v\"]]]}");
    /* XAUTOCLAIM: [cursor, entries, deleted ids]. */
    EXPECT("*3\r\n$3\r\n0-0\r\n*0\r\n*2\r\n$3\r\n1-0\r\n$3\r\n2-0\r\n",
           "[\"0-0\",[],[\"1-0\",\"2-0\"]]");
}

TEST(resp_accessors_are_total) {
    ASSERT(emq_reply_kind(NULL) == EMQ_REPLY_NULL);
    ASSERT(emq_reply_str(NULL, NULL) == NULL);
    ASSERT_EQ_INT(emq_reply_integer(NULL), 0);
    ASSERT_EQ_SIZE(emq_reply_len(NULL), 0);
    ASSERT(emq_reply_at(NULL, 0) == NULL);
    ASSERT_EQ_STR(emq_reply_format(NULL), "");
    emq_reply_free(NULL);

    emq_error err;
    emq__resp_reader *r = emq__resp_reader_new(NULL);
    const char in[] = "*1\r\n:5\r\n-NOGROUP No such key\r\n-BUSYGROUPX y\r\n";
    ASSERT_OK(emq__resp_feed(r, in, sizeof in - 1, &err), &err);
    emq_reply *arr, *nogroup, *busyx;
    ASSERT_OK(emq__resp_next(r, &arr, &err), &err);
    ASSERT_OK(emq__resp_next(r, &nogroup, &err), &err);
    ASSERT_OK(emq__resp_next(r, &busyx, &err), &err);
    ASSERT(emq_reply_at(arr, 1) == NULL);
    ASSERT(emq_reply_at(emq_reply_at(arr, 0), 0) == NULL);
    size_t n = 99;
    ASSERT(emq_reply_str(arr, &n) == NULL);
    ASSERT_EQ_SIZE(n, 0);
    ASSERT_EQ_INT(emq_reply_integer(emq_reply_at(arr, 0)), 5);
    ASSERT(emq_reply_double(emq_reply_at(arr, 0)) == 0.0);
    ASSERT(emq_reply_is_error(nogroup, "NOGROUP"));
    ASSERT(emq_reply_is_error(nogroup, ""));
    ASSERT(!emq_reply_is_error(nogroup, "NOGR"));
    ASSERT(!emq_reply_is_error(busyx, "BUSYGROUP"));
    ASSERT(!emq_reply_is_error(arr, "NOGROUP"));
    emq_reply_free(arr);
    emq_reply_free(nogroup);
    emq_reply_free(busyx);
    emq__resp_reader_free(r);
}

/* ---- resumable at every byte --------------------------------------------- */

/* Many replies of every type in one buffer, with their renderings. */
static const char many[] =
    "+OK\r\n"
    "-ERR unknown command\r\n"
    ":12345\r\n"
    ":1234\r\n" /* the longest line read before the general path */
    ":-7\r\n"
    ":007\r\n"
    "$12\r\nhello\r\nworld\r\n"
    "$-1\r\n"
    "*-1\r\n"
    "*3\r\n$1\r\na\r\n*2\r\n:1\r\n:2\r\n%1\r\n+k\r\n$1\r\nv\r\n"
    "_\r\n"
    ",3.5\r\n"
    "#f\r\n"
    "(12345678901234567890\r\n"
    "=9\r\ntxt:hello\r\n"
    "~2\r\n+x\r\n+y\r\n"
    ">2\r\n+invalidate\r\n*1\r\n$3\r\nkey\r\n"
    "|1\r\n+a\r\n+b\r\n:1\r\n"
    "!5\r\nERR x\r\n"
    "*0\r\n";
static const char *const many_rendered[] = {
    "+OK",
    "-ERR unknown command",
    "12345",
    "1234",
    "-7",
    "7",
    "\"hello\\x0d\\x0aworld\"",
    "nil",
    "nil",
    "[\"a\",[1,2],{+k:\"v\"}]",
    "nil",
    "d3.5",
    "false",
    "(12345678901234567890",
    "=txt:hello",
    "~[+x,+y]",
    ">[+invalidate,[\"key\"]]",
    "@{+a:+b}1",
    "-ERR x",
    "[]",
};
#define MANY_COUNT (sizeof many_rendered / sizeof many_rendered[0])

/* Parses whatever is complete; keeps replies alive to check later that
 * their views survived further feeds and chunk moves. */
static void drain(emq__resp_reader *r, emq_reply **kept, size_t *count) {
    emq_error err;
    emq_reply *reply;
    emq_status st;
    while ((st = emq__resp_next(r, &reply, &err)) == EMQ_OK) {
        ASSERT(*count < MANY_COUNT);
        ASSERT_EQ_STR(render(reply), many_rendered[*count]);
        kept[(*count)++] = reply;
    }
    ASSERT_STATUS(st, EMQ_EAGAIN, &err);
}

static void check_kept(emq_reply **kept, size_t count) {
    ASSERT_EQ_SIZE(count, MANY_COUNT);
    for (size_t i = 0; i < count; i++) {
        ASSERT_EQ_STR(render(kept[i]), many_rendered[i]);
        emq_reply_free(kept[i]);
    }
}

TEST(resp_every_split_point) {
    size_t total = sizeof many - 1;
    for (size_t cut = 0; cut <= total; cut++) {
        emq_error err;
        emq__resp_reader *r = emq__resp_reader_new(NULL);
        emq_reply *kept[MANY_COUNT];
        size_t count = 0;
        ASSERT_OK(emq__resp_feed(r, many, cut, &err), &err);
        drain(r, kept, &count);
        ASSERT_OK(emq__resp_feed(r, many + cut, total - cut, &err), &err);
        drain(r, kept, &count);
        ASSERT_EQ_SIZE(emq__resp_buffered(r), 0);
        emq__resp_reader_free(r); /* replies outlive their reader */
        check_kept(kept, count);
    }
}

TEST(resp_every_two_split_points) {
    size_t total = sizeof many - 1;
    for (size_t a = 0; a <= total; a += 3) {
        for (size_t b = a; b <= total; b += 5) {
            emq_error err;
            emq__resp_reader *r = emq__resp_reader_new(NULL);
            emq_reply *kept[MANY_COUNT];
            size_t count = 0;
            ASSERT_OK(emq__resp_feed(r, many, a, &err), &err);
            drain(r, kept, &count);
            ASSERT_OK(emq__resp_feed(r, many + a, b - a, &err), &err);
            drain(r, kept, &count);
            ASSERT_OK(emq__resp_feed(r, many + b, total - b, &err), &err);
            drain(r, kept, &count);
            check_kept(kept, count);
            emq__resp_reader_free(r);
        }
    }
}

TEST(resp_byte_at_a_time_with_reserve) {
    emq_error err;
    emq__resp_reader *r = emq__resp_reader_new(NULL);
    emq_reply *kept[MANY_COUNT];
    size_t count = 0;
    for (size_t i = 0; i < sizeof many - 1; i++) {
        char *space;
        size_t avail;
        ASSERT_OK(emq__resp_reserve(r, 1, &space, &avail, &err), &err);
        ASSERT(avail >= 1);
        space[0] = many[i];
        emq__resp_commit(r, 1);
        drain(r, kept, &count);
    }
    check_kept(kept, count);
    emq__resp_reader_free(r);
}

/* A large bulk arriving in small pieces, while an earlier reply is still
 * held: the chunk must move without breaking the held reply's views. */
TEST(resp_large_bulk_in_pieces) {
    size_t size = 3 * 1024 * 1024 + 7;
    char *payload = malloc(size);
    ASSERT(payload != NULL);
    for (size_t i = 0; i < size; i++)
        payload[i] = (char)(i * 131 + 7);
    char header[64];
    int hl = snprintf(header, sizeof header, "+first\r\n$%zu\r\n", size);
    emq_error err;
    emq__resp_reader *r = emq__resp_reader_new(NULL);
    ASSERT_OK(emq__resp_feed(r, header, (size_t)hl, &err), &err);
    emq_reply *first, *big;
    ASSERT_OK(emq__resp_next(r, &first, &err), &err);
    size_t off = 0;
    while (off < size) {
        size_t n = size - off < 4000 ? size - off : 4000;
        ASSERT_OK(emq__resp_feed(r, payload + off, n, &err), &err);
        ASSERT_STATUS(emq__resp_next(r, &big, &err), EMQ_EAGAIN, &err);
        off += n;
    }
    ASSERT_OK(emq__resp_feed(r, "\r\n", 2, &err), &err);
    ASSERT_OK(emq__resp_next(r, &big, &err), &err);
    size_t n;
    const char *s = emq_reply_str(big, &n);
    ASSERT_EQ_SIZE(n, size);
    ASSERT(memcmp(s, payload, size) == 0);
    ASSERT_EQ_STR(render(first), "+first");
    emq_reply_free(big);
    /* The big chunk is released once idle; the next reply parses fine. */
    ASSERT_OK(emq__resp_feed(r, ":1\r\n", 4, &err), &err);
    emq_reply *one;
    ASSERT_OK(emq__resp_next(r, &one, &err), &err);
    ASSERT_EQ_STR(render(one), "1");
    emq_reply_free(one);
    emq_reply_free(first);
    emq__resp_reader_free(r);
    free(payload);
}

TEST(resp_truncated_input_waits) {
    const char *cuts[] = {"+OK",
                          "+OK\r",
                          "$5\r\nhel",
                          "$5\r\nhello\r",
                          "*2\r\n:1\r\n",
                          "%1\r\n+k\r\n",
                          "|1\r\n+a\r\n+b\r\n",
                          ":12",
                          "$",
                          "*"};
    for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++) {
        emq_error err;
        emq__resp_reader *r = emq__resp_reader_new(NULL);
        ASSERT_OK(emq__resp_feed(r, cuts[i], strlen(cuts[i]), &err), &err);
        emq_reply *reply = (emq_reply *)1;
        ASSERT_STATUS(emq__resp_next(r, &reply, &err), EMQ_EAGAIN, &err);
        ASSERT(reply == NULL);
        ASSERT_EQ_SIZE(emq__resp_buffered(r), strlen(cuts[i]));
        emq__resp_reader_free(r);
    }
}

/* ---- malformed input ----------------------------------------------------- */

TEST(resp_malformed_input) {
    EXPECT_ERROR("?3\r\n", "streamed");
    EXPECT_ERROR("@foo\r\n", "unknown reply type byte 0x40");
    EXPECT_ERROR("\x01\r\n", "unknown reply type byte 0x01");
    EXPECT_ERROR("$abc\r\n", "invalid bulk string length");
    EXPECT_ERROR("$\r\n", "invalid bulk string length");
    EXPECT_ERROR("$+5\r\nhello\r\n", "invalid bulk string length");
    EXPECT_ERROR("$ 5\r\nhello\r\n", "invalid bulk string length");
    EXPECT_ERROR("$-2\r\n", "negative bulk string length -2");
    EXPECT_ERROR("*-5\r\n", "negative array length -5");
    EXPECT_ERROR("%-1\r\n", "negative map length -1");
    EXPECT_ERROR("!-1\r\n", "negative blob error length -1");
    EXPECT_ERROR("$3\r\nfooXY", "bulk string of 3 bytes not followed by CRLF");
    EXPECT_ERROR("+OK\rX\r\n", "expected CRLF");
    EXPECT_ERROR(":12a\r\n", "invalid integer");
    EXPECT_ERROR(":\r\n", "invalid integer");
    EXPECT_ERROR(":9223372036854775808\r\n", "invalid integer");
    EXPECT_ERROR(":99999999999999999999\r\n", "invalid integer");
    EXPECT_ERROR("#x\r\n", "boolean");
    EXPECT_ERROR("_x\r\n", "null");
    EXPECT_ERROR(",1.5x\r\n", "invalid double");
    EXPECT_ERROR(",\r\n", "invalid double");
    EXPECT_ERROR("(12a\r\n", "invalid big number");
    EXPECT_ERROR("=3\r\ntxt\r\n", "format prefix");
    EXPECT_ERROR("=5\r\ntxtxy\r\n", "format prefix");
    /* An error after good replies: the good ones still come out first. */
    EXPECT_ERROR("+OK\r\n:1\r\n~x\r\n", "invalid set length");
}

/* ---- limits -------------------------------------------------------------- */

TEST(resp_limit_max_bulk) {
    emq__resp_limits l;
    emq__resp_limits_default(&l);
    l.max_bulk = 10;
    expect_error(&l, "$11\r\n", 5, EMQ_EPROTO,
                 "bulk string length 11 exceeds max_bulk 10");
    expect_error(&l, "=11\r\n", 5, EMQ_EPROTO, "exceeds max_bulk 10");
    /* At the limit it parses. */
    emq_error err;
    emq__resp_reader *r = emq__resp_reader_new(&l);
    ASSERT_OK(emq__resp_feed(r, "$10\r\n0123456789\r\n", 17, &err), &err);
    emq_reply *reply;
    ASSERT_OK(emq__resp_next(r, &reply, &err), &err);
    emq_reply_free(reply);
    emq__resp_reader_free(r);
    /* The default limit refuses a hostile length before any allocation. */
    uint64_t before = emq__alloc_calls();
    expect_error(NULL, "$999999999999\r\n", 15, EMQ_EPROTO,
                 "bulk string length 999999999999 exceeds max_bulk 536870912");
    ASSERT(emq__alloc_calls() - before < 10);
}

TEST(resp_limit_max_elements) {
    emq__resp_limits l;
    emq__resp_limits_default(&l);
    l.max_elements = 4;
    expect_error(&l, "*5\r\n", 4, EMQ_EPROTO,
                 "array of 5 elements exceeds max_elements 4");
    expect_error(&l, "%3\r\n", 4, EMQ_EPROTO,
                 "map of 3 pairs exceeds max_elements 4");
    expect_error(&l, "~5\r\n", 4, EMQ_EPROTO, "set of 5 elements");
    expect_error(NULL, "*4294967296\r\n", 13, EMQ_EPROTO,
                 "exceeds max_elements 16777216");
    emq_error err;
    emq__resp_reader *r = emq__resp_reader_new(&l);
    ASSERT_OK(emq__resp_feed(r, "%2\r\n:1\r\n:2\r\n:3\r\n:4\r\n", 20, &err),
              &err);
    emq_reply *reply;
    ASSERT_OK(emq__resp_next(r, &reply, &err), &err);
    ASSERT_EQ_STR(render(reply), "{1:2,3:4}");
    emq_reply_free(reply);
    emq__resp_reader_free(r);
}

TEST(resp_limit_max_depth) {
    emq__resp_limits l;
    emq__resp_limits_default(&l);
    l.max_depth = 3;
    /* Depth 3 is fine, depth 4 is refused. */
    emq_error err;
    emq__resp_reader *r = emq__resp_reader_new(&l);
    ASSERT_OK(emq__resp_feed(r, "*1\r\n*1\r\n*1\r\n:1\r\n", 16, &err), &err);
    emq_reply *reply;
    ASSERT_OK(emq__resp_next(r, &reply, &err), &err);
    ASSERT_EQ_STR(render(reply), "[[[1]]]");
    emq_reply_free(reply);
    emq__resp_reader_free(r);
    expect_error(&l, "*1\r\n*1\r\n*1\r\n*1\r\n:1\r\n", 20, EMQ_EPROTO,
                 "nested deeper than max_depth 3");
    /* The default depth is bounded too. */
    char deep[200];
    size_t n = 0;
    for (int i = 0; i < 20; i++) {
        memcpy(deep + n, "*1\r\n", 4);
        n += 4;
    }
    expect_error(NULL, deep, n, EMQ_EPROTO, "max_depth 16");
}

TEST(resp_limit_max_line) {
    emq__resp_limits l;
    emq__resp_limits_default(&l);
    l.max_line = 32;
    char line[100];
    line[0] = '+';
    memset(line + 1, 'a', sizeof line - 1);
    /* No CRLF yet and already past the limit: refused without waiting. */
    expect_error(&l, line, sizeof line, EMQ_EPROTO,
                 "line is longer than max_line 32");
}

/* A reply (one bulk string of payload bytes) read the way a connection
 * reads: reserve, then commit as much as the space given holds. */
static emq_status read_bulk_reply(emq__resp_reader *r, size_t payload,
                                  emq_error *err) {
    char head[32];
    int h = snprintf(head, sizeof head, "$%zu\r\n", payload);
    size_t at = 0, total = (size_t)h + payload + 2;
    char *all = malloc(total);
    ASSERT(all != NULL);
    memcpy(all, head, (size_t)h);
    memset(all + h, 'x', payload);
    memcpy(all + h + payload, "\r\n", 2);
    emq_status st = EMQ_EAGAIN;
    while (at < total) {
        char *space;
        size_t avail;
        if ((st = emq__resp_reserve(r, 4096, &space, &avail, err)) != EMQ_OK)
            break;
        size_t n = total - at < avail ? total - at : avail;
        memcpy(space, all + at, n);
        emq__resp_commit(r, n);
        at += n;
    }
    free(all);
    if (st != EMQ_OK && st != EMQ_EAGAIN)
        return st;
    emq_reply *reply = NULL;
    st = emq__resp_next(r, &reply, err);
    emq_reply_free(reply);
    return st;
}

TEST(resp_limit_max_reply_is_exact_and_named) {
    emq__resp_limits l;
    emq__resp_limits_default(&l);
    l.max_reply = 10000;
    emq_error err;
    /* 12 kB arrive within the first 16 kB buffer: refused all the
     * same, and the reader says max_reply was the cause. */
    emq__resp_reader *r = emq__resp_reader_new(&l);
    ASSERT_EQ_INT(read_bulk_reply(r, 12000, &err), EMQ_EPROTO);
    ASSERT(strstr(err.message, "max_reply 10000") != NULL);
    ASSERT_EQ_INT(emq__resp_over_max_reply(r), 1);
    emq__resp_reader_free(r);
    /* Within the limit it parses, and nothing is flagged. */
    r = emq__resp_reader_new(&l);
    ASSERT_OK(read_bulk_reply(r, 5000, &err), &err);
    ASSERT_EQ_INT(emq__resp_over_max_reply(r), 0);
    emq__resp_reader_free(r);
    /* Another protocol error is not taken for a reply too large. */
    r = emq__resp_reader_new(&l);
    ASSERT_OK(emq__resp_feed(r, "~x\r\n", 5, &err), &err);
    emq_reply *reply = NULL;
    ASSERT_EQ_INT(emq__resp_next(r, &reply, &err), EMQ_EPROTO);
    ASSERT_EQ_INT(emq__resp_over_max_reply(r), 0);
    emq__resp_reader_free(r);
}

/* ---- out of memory ------------------------------------------------------- */

TEST(resp_allocation_failures) {
    static const char in[] = "*2\r\n$3\r\nfoo\r\n:1\r\n";
    /* Walk the failing allocation over reader creation, feed and parse:
     * each failure is reported, nothing leaks, and a retry succeeds. */
    for (uint64_t n = 1; n <= 6; n++) {
        uint64_t live = emq__alloc_live();
        emq__alloc_fail_at(n);
        emq_error err;
        emq__resp_reader *r = emq__resp_reader_new(NULL);
        if (r == NULL) {
            emq__alloc_fail_at(0);
            ASSERT_EQ_SIZE(emq__alloc_live(), live);
            continue;
        }
        emq_status st = emq__resp_feed(r, in, sizeof in - 1, &err);
        if (st != EMQ_OK) {
            ASSERT_STATUS(st, EMQ_ENOMEM, &err);
            ASSERT_OK(emq__resp_feed(r, in, sizeof in - 1, &err), &err);
        }
        emq_reply *reply;
        st = emq__resp_next(r, &reply, &err);
        if (st != EMQ_OK) {
            ASSERT_STATUS(st, EMQ_ENOMEM, &err);
            ASSERT_CONTAINS(err.message, "out of memory");
            ASSERT_OK(emq__resp_next(r, &reply, &err), &err);
        }
        ASSERT_EQ_STR(render(reply), "[\"foo\",1]");
        emq__alloc_fail_at(0);
        emq_reply_free(reply);
        emq__resp_reader_free(r);
        ASSERT_EQ_SIZE(emq__alloc_live(), live);
    }
}

/* ---- encoder ------------------------------------------------------------- */

TEST(resp_encode_command) {
    emq__buf b;
    emq__buf_init(&b, 0, "output buffer");
    emq_error err;
    const char *argv[] = {"XADD", "q", "*", "f", "v"};
    ASSERT_OK(emq__resp_encode(&b, 5, argv, NULL, &err), &err);
    static const char want[] =
        "*5\r\n$4\r\nXADD\r\n$1\r\nq\r\n$1\r\n*\r\n$1\r\nf\r\n$1\r\nv\r\n";
    ASSERT_EQ_MEM(b.data, b.len, want, sizeof want - 1);
    ASSERT_EQ_SIZE(emq__resp_encoded_len(5, argv, NULL), sizeof want - 1);
    emq__buf_free(&b);
}

TEST(resp_encode_binary_safe) {
    emq__buf b;
    emq__buf_init(&b, 0, "output buffer");
    emq_error err;
    const char value[] = {'a', '\0', '\r', '\n', (char)0xff};
    const char *argv[] = {"SET", "k", value, ""};
    size_t lens[] = {3, 1, sizeof value, 0};
    ASSERT_OK(emq__resp_encode(&b, 4, argv, lens, &err), &err);
    static const char want[] = "*4\r\n$3\r\nSET\r\n$1\r\nk\r\n$5\r\na\0\r\n\xff"
                               "\r\n$0\r\n\r\n";
    ASSERT_EQ_MEM(b.data, b.len, want, sizeof want - 1);
    /* A long argument: length digits beyond one. */
    char big[12345];
    memset(big, 'x', sizeof big);
    const char *argv2[] = {big};
    size_t lens2[] = {sizeof big};
    size_t before = b.len;
    ASSERT_OK(emq__resp_encode(&b, 1, argv2, lens2, &err), &err);
    ASSERT_EQ_MEM(b.data + before, 12, "*1\r\n$12345\r\n", 12);
    ASSERT_EQ_SIZE(b.len - before, 12 + sizeof big + 2);
    ASSERT_EQ_SIZE(emq__resp_encoded_len(1, argv2, lens2), b.len - before);
    emq__buf_free(&b);
}

TEST(resp_encode_round_trips_through_reader) {
    /* The encoding of a command is itself valid RESP: an array of bulks. */
    emq__buf b;
    emq__buf_init(&b, 0, "output buffer");
    emq_error err;
    const char *argv[] = {"XREADGROUP", "GROUP", "g", "c\r\n",
                          "STREAMS",    "q",     ">"};
    ASSERT_OK(emq__resp_encode(&b, 7, argv, NULL, &err), &err);
    emq__resp_reader *r = emq__resp_reader_new(NULL);
    ASSERT_OK(emq__resp_feed(r, b.data, b.len, &err), &err);
    emq_reply *reply;
    ASSERT_OK(emq__resp_next(r, &reply, &err), &err);
    ASSERT_EQ_STR(render(reply), "[\"XREADGROUP\",\"GROUP\",\"g\","
                                 "\"c\\x0d\\x0a\",\"STREAMS\",\"q\",\">\"]");
    emq_reply_free(reply);
    emq__resp_reader_free(r);
    emq__buf_free(&b);
}

TEST(resp_encode_errors_leave_buffer_unchanged) {
    emq__buf b;
    emq__buf_init(&b, 32, "output buffer");
    emq_error err;
    const char *argv[] = {"PING"};
    ASSERT_OK(emq__resp_encode(&b, 1, argv, NULL, &err), &err);
    size_t len = b.len;
    const char *big[] = {"SET", "key", "a value that does not fit in 32"};
    ASSERT_STATUS(emq__resp_encode(&b, 3, big, NULL, &err), EMQ_ELIMIT, &err);
    ASSERT_CONTAINS(err.message, "output buffer");
    ASSERT_CONTAINS(err.message, "limit of 32 bytes");
    ASSERT_EQ_SIZE(b.len, len);
    ASSERT_STATUS(emq__resp_encode(&b, 0, argv, NULL, &err), EMQ_EINVAL, &err);
    const char *with_null[] = {"GET", NULL};
    ASSERT_STATUS(emq__resp_encode(&b, 2, with_null, NULL, &err), EMQ_EINVAL,
                  &err);
    ASSERT_CONTAINS(err.message, "argument 1 is NULL");
    ASSERT_EQ_SIZE(b.len, len);
    emq__buf_free(&b);
}

/* A reader told to drop pushes skips them where they lie, also a push
 * behind attributes, and counts them; the replies around them come out
 * in order (the second case was a fuzz_resp finding). */
TEST(resp_dropped_pushes_never_come_out) {
    emq__resp_reader *r = emq__resp_reader_new(NULL);
    ASSERT(r != NULL);
    emq__resp_drop_pushes(r);
    static const char in[] = ">2\r\n+a\r\n+b\r\n+one\r\n"
                             "|1\r\n+k\r\n+v\r\n>1\r\n:7\r\n"
                             ">1\r\n:8\r\n+two\r\n";
    emq_error err;
    ASSERT_OK(emq__resp_feed(r, in, sizeof in - 1, &err), &err);
    emq_reply *rep = NULL;
    ASSERT_OK(emq__resp_next(r, &rep, &err), &err);
    ASSERT_EQ_INT(emq_reply_kind(rep), EMQ_REPLY_STATUS);
    emq_reply_free(rep);
    ASSERT_OK(emq__resp_next(r, &rep, &err), &err);
    ASSERT_EQ_INT(emq_reply_kind(rep), EMQ_REPLY_STATUS);
    size_t len;
    ASSERT_EQ_MEM(emq_reply_str(rep, &len), len, "two", 3);
    emq_reply_free(rep);
    ASSERT_EQ_INT(emq__resp_next(r, &rep, &err), EMQ_EAGAIN);
    ASSERT_EQ_INT((long long)emq__resp_pushes_dropped(r), 3);
    emq__resp_reader_free(r);
}

/* Parses the one reply in bytes (the caller frees it). */
static emq_reply *parse_one(const char *bytes, size_t len) {
    emq__resp_reader *r = emq__resp_reader_new(NULL);
    ASSERT(r != NULL);
    emq_error err;
    ASSERT_OK(emq__resp_feed(r, bytes, len, &err), &err);
    emq_reply *rep = NULL;
    ASSERT_OK(emq__resp_next(r, &rep, &err), &err);
    emq__resp_reader_free(r); /* the reply keeps its bytes */
    return rep;
}

TEST(resp_field_views_of_an_entry) {
    static const char in[] = "*4\r\n$4\r\nname\r\n$0\r\n\r\n$1\r\nk\r\n$3\r\n"
                             "v\0w\r\n";
    emq_reply *rep = parse_one(in, sizeof in - 1);
    emq_field f[2];
    ASSERT_EQ_INT(emq__reply_field_views(rep, f, 2), 0);
    ASSERT_EQ_MEM(f[0].name, f[0].name_len, "name", 4);
    ASSERT_EQ_MEM(f[0].value, f[0].value_len, "", 0);
    ASSERT(f[0].value != NULL);
    ASSERT_EQ_MEM(f[1].name, f[1].name_len, "k", 1);
    ASSERT_EQ_MEM(f[1].value, f[1].value_len, "v\0w", 3);
    /* Fewer pairs than asked, or none asked of no reply at all. */
    ASSERT_EQ_INT(emq__reply_field_views(rep, f, 3), -1);
    ASSERT_EQ_INT(emq__reply_field_views(NULL, f, 0), 0);
    emq_reply_free(rep);
    /* A name or value that is not a string. */
    static const char bad[] = "*2\r\n$1\r\na\r\n:1\r\n";
    rep = parse_one(bad, sizeof bad - 1);
    ASSERT_EQ_INT(emq__reply_field_views(rep, f, 1), -1);
    emq_reply_free(rep);
}
