/* SPDX-License-Identifier: BSD-3-Clause */
/* test_json.c: the JSON writer (escapes, UTF-8 check, base64, truncation). */
#include "harness/test.h"
#include "base/base.h"

static const char *write_bytes(const char *p, size_t n) {
    static char buf[512];
    emq__json j;
    emq__json_init(&j, buf, sizeof buf);
    emq__json_bytes(&j, p, n);
    ASSERT_EQ_SIZE(j.len, strlen(buf));
    return buf;
}

TEST(json_strings_are_escaped) {
    ASSERT_EQ_STR(write_bytes("plain", 5), "\"plain\"");
    ASSERT_EQ_STR(write_bytes("a\"b\\c", 5), "\"a\\\"b\\\\c\"");
    ASSERT_EQ_STR(write_bytes("l1\nl2\r\t", 7), "\"l1\\nl2\\r\\t\"");
    ASSERT_EQ_STR(write_bytes("\x01\x1f", 2), "\"\\u0001\\u001f\"");
    ASSERT_EQ_STR(write_bytes("\0", 1), "\"\\u0000\"");
    ASSERT_EQ_STR(write_bytes("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80", 14),
                  "\"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80\"");
    ASSERT_EQ_STR(write_bytes("", 0), "\"\"");
}

/* Every byte that needs escaping, and a two-byte UTF-8 character or a
 * byte that is not UTF-8, at every position of strings of 1 to 40 bytes:
 * the writer reads eight bytes at a time where none needs escaping, so
 * each place in a block and each tail length is tried. */
TEST(json_escapes_at_every_position) {
    static const char special[] = {'"', '\\', '\n', '\x01', '\x1f', '\0'};
    static const char *const escaped[] = {"\\\"",    "\\\\",    "\\n",
                                          "\\u0001", "\\u001f", "\\u0000"};
    for (size_t n = 1; n <= 40; n++) {
        for (size_t at = 0; at < n; at++) {
            char in[48], want[128];
            for (size_t k = 0; k < sizeof special; k++) {
                memset(in, 'x', n);
                in[at] = special[k];
                int w = snprintf(want, sizeof want, "\"%.*s%s%.*s\"", (int)at,
                                 in, escaped[k], (int)(n - at - 1),
                                 in + at + 1);
                ASSERT(w > 0 && (size_t)w < sizeof want);
                ASSERT_EQ_STR(write_bytes(in, n), want);
            }
            if (at + 1 < n) { /* e-acute: passes through as it is */
                memset(in, 'x', n);
                in[at] = '\xc3';
                in[at + 1] = '\xa9';
                snprintf(want, sizeof want, "\"%.*s\"", (int)n, in);
                ASSERT_EQ_STR(write_bytes(in, n), want);
            }
            memset(in, 'x', n); /* a lone continuation byte: base64 */
            in[at] = '\x80';
            ASSERT(strncmp(write_bytes(in, n), "{\"base64\":", 10) == 0);
        }
    }
}

TEST(json_non_utf8_becomes_base64) {
    ASSERT_EQ_STR(write_bytes("\xff", 1), "{\"base64\":\"/w==\"}");
    ASSERT_EQ_STR(write_bytes("a\xff"
                              "b",
                              3),
                  "{\"base64\":\"Yf9i\"}");
    ASSERT_EQ_STR(write_bytes("\xc0\xaf", 2),
                  "{\"base64\":\"wK8=\"}"); /* overlong */
    ASSERT_EQ_STR(write_bytes("\xed\xa0\x80", 3),
                  "{\"base64\":\"7aCA\"}"); /* surrogate */
    ASSERT_EQ_STR(write_bytes("\xe2\x82", 2),
                  "{\"base64\":\"4oI=\"}"); /* cut */
    ASSERT_EQ_STR(write_bytes("\xf4\x90\x80\x80", 4),
                  "{\"base64\":\"9JCAgA==\"}");
}

TEST(json_truncates_like_snprintf) {
    char small[8];
    emq__json j;
    emq__json_init(&j, small, sizeof small);
    emq__json_raw(&j, "{\"k\":");
    emq__json_cstr(&j, "a long value");
    emq__json_raw(&j, "}");
    ASSERT_EQ_STR(small, "{\"k\":\"a");
    ASSERT_EQ_SIZE(j.len, strlen("{\"k\":\"a long value\"}"));
    /* Measuring with no buffer at all. */
    emq__json_init(&j, NULL, 0);
    emq__json_cstr(&j, "abc");
    ASSERT_EQ_SIZE(j.len, 5);
}

TEST(json_entry_is_binary_safe) {
    emq_field fields[] = {{"data", 4, "hello", 5},
                          {"bin", 3, "\x00\xff", 2},
                          {"data", 4, "again", 5}};
    emq_entry e = {.id = "1-0",
                   .deliveries = 2,
                   .fields = fields,
                   .nfields = 3,
                   .stream = "s",
                   .group = "g",
                   .consumer = "c"};
    char buf[256];
    size_t n = emq_entry_json(&e, buf, sizeof buf);
    ASSERT_EQ_STR(buf, "{\"id\":\"1-0\",\"stream\":\"s\",\"deliveries\":2,"
                       "\"fields\":{\"data\":"
                       "\"hello\",\"bin\":{\"base64\":\"AP8=\"},\"data\":"
                       "\"again\"}}");
    ASSERT_EQ_SIZE(n, strlen(buf));
}

TEST(json_entry_with_binary_name_uses_pairs) {
    emq_field fields[] = {{"\xff", 1, "v", 1}, {"n", 1, "1", 1}};
    emq_entry e = {.id = "2-0",
                   .deliveries = 1,
                   .fields = fields,
                   .nfields = 2,
                   .stream = "s",
                   .group = "g",
                   .consumer = "c"};
    char buf[256];
    emq_entry_json(&e, buf, sizeof buf);
    ASSERT_EQ_STR(buf,
                  "{\"id\":\"2-0\",\"stream\":\"s\",\"deliveries\":1,"
                  "\"fields\":[[{\"base64\":\"/w==\"},\"v\"],[\"n\",\"1\"]]}");
    /* A topic's partition after the stream; none without a stream. */
    emq_entry_json_partition(&e, 3, buf, sizeof buf);
    ASSERT_CONTAINS(buf, "\"stream\":\"s\",\"partition\":3,\"deliveries\":1");
    e.stream = NULL;
    emq_entry_json(&e, buf, sizeof buf);
    ASSERT(strncmp(buf, "{\"id\":\"2-0\",\"deliveries\":1,", 26) == 0);
}

/* emq_fields_json is the "fields" value of emq_entry_json, alone, in both
 * of its shapes; a short buffer gets what fits and the full length. */
TEST(fields_json_is_the_entry_fields_value) {
    emq_field f[2] = {{"a", 1, "1", 1}, {"b", 1, "x\xff", 2}};
    char buf[256];
    ASSERT_EQ_SIZE(emq_fields_json(f, 2, buf, sizeof buf), strlen(buf));
    ASSERT_EQ_STR(buf, "{\"a\":\"1\",\"b\":{\"base64\":\"eP8=\"}}");
    emq_entry e = {.id = "1-0", .deliveries = 1, .fields = f, .nfields = 2};
    char whole[256];
    emq_entry_json(&e, whole, sizeof whole);
    ASSERT_CONTAINS(whole, buf);
    emq_field odd = {"\xff", 1, "v", 1}; /* a name that is not UTF-8 */
    emq_fields_json(&odd, 1, buf, sizeof buf);
    ASSERT_EQ_STR(buf, "[[{\"base64\":\"/w==\"},\"v\"]]");
    char small[4];
    ASSERT_EQ_SIZE(emq_fields_json(f, 2, small, sizeof small), 31);
    ASSERT_EQ_STR(small, "{\"a");
}
