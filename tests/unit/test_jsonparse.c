/* SPDX-License-Identifier: BSD-3-Clause */
/* test_jsonparse.c: emq_fields_from_json, the JSON input of produce --json:
 * every value kind, escapes, base64, round trips with the writer, and an
 * error naming the column for each kind of malformed line. */
#include "harness/test.h"
#include "base/base.h"

#include <stdlib.h>

static emq_field *parse_ok(const char *text, size_t *n) {
    emq_field *f = NULL;
    emq_error err;
    ASSERT_OK(emq_fields_from_json(text, strlen(text), &f, n, &err), &err);
    ASSERT(f != NULL);
    return f;
}

/* The error message for a malformed line. */
static const char *parse_err(const char *text) {
    static emq_error err;
    emq_field *f = (emq_field *)1;
    size_t n = 7;
    ASSERT_STATUS(emq_fields_from_json(text, strlen(text), &f, &n, &err),
                  EMQ_EINVAL, &err);
    ASSERT(f == NULL);
    ASSERT_EQ_SIZE(n, 0);
    return err.message;
}

TEST(jsonparse_value_kinds) {
    size_t n;
    emq_field *f =
        parse_ok(" { \"s\" : \"text\", \"n\":-12.50e+3,\"t\":true,\"f\":false,"
                 "\"z\":null, \"i\":0 } ",
                 &n);
    ASSERT_EQ_SIZE(n, 6);
    ASSERT_EQ_MEM(f[0].name, f[0].name_len, "s", 1);
    ASSERT_EQ_MEM(f[0].value, f[0].value_len, "text", 4);
    ASSERT_EQ_MEM(f[1].value, f[1].value_len, "-12.50e+3", 9);
    ASSERT_EQ_MEM(f[2].value, f[2].value_len, "true", 4);
    ASSERT_EQ_MEM(f[3].value, f[3].value_len, "false", 5);
    ASSERT_EQ_MEM(f[4].value, f[4].value_len, "null", 4);
    ASSERT_EQ_MEM(f[5].value, f[5].value_len, "0", 1);
    ASSERT_EQ_STR(f[0].value, "text"); /* NUL-terminated too */
    emq_fields_free(f);
}

TEST(jsonparse_escapes_and_utf8) {
    size_t n;
    emq_field *f = parse_ok("{\"a\\\"b\":\"l1\\nl2\\t\\\\\\/\\u0000"
                            "\\u00e9\\ud83d\\ude00\xe2\x82\xac\"}",
                            &n);
    ASSERT_EQ_SIZE(n, 1);
    ASSERT_EQ_MEM(f[0].name, f[0].name_len, "a\"b", 3);
    ASSERT_EQ_MEM(f[0].value, f[0].value_len,
                  "l1\nl2\t\\/\0\xc3\xa9\xf0\x9f\x98\x80\xe2\x82\xac", 18);
    emq_fields_free(f);
}

TEST(jsonparse_base64_and_repeats) {
    size_t n;
    emq_field *f = parse_ok("{\"k\":{\"base64\":\"/w==\"},\"k\":{ \"base64\" : "
                            "\"Yf9i\" },\"e\":{\"base64\":\"\"},"
                            "\"u\":{\"base64\":\"4oI\"}}",
                            &n);
    ASSERT_EQ_SIZE(n, 4);
    ASSERT_EQ_MEM(f[0].value, f[0].value_len, "\xff", 1);
    ASSERT_EQ_MEM(f[1].name, f[1].name_len, "k", 1);
    ASSERT_EQ_MEM(f[1].value, f[1].value_len,
                  "a\xff"
                  "b",
                  3);
    ASSERT_EQ_SIZE(f[2].value_len, 0);
    ASSERT_EQ_MEM(f[3].value, f[3].value_len, "\xe2\x82", 2);
    emq_fields_free(f);
}

/* Whatever the writer produces, the parser gives back byte-exact. */
TEST(jsonparse_round_trips_the_writer) {
    static const struct {
        const char *p;
        size_t n;
    } cases[] = {{"plain", 5}, {"\xff\x00\x01", 3}, {"a\"\\\n\r\t\x01", 7},
                 {"", 0},      {"\xed\xa0\x80", 3}, {"caf\xc3\xa9", 5},
                 {"\0", 1}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        /* The real writer: an entry's JSON line, whose "fields" part is
         * what produce --json reads back (an object, or pairs when the
         * name is not UTF-8). */
        emq_field field = {cases[c].p, cases[c].n, cases[c].p, cases[c].n};
        emq_entry e = {.id = "1-0",
                       .deliveries = 1,
                       .fields = &field,
                       .nfields = 1,
                       .stream = "s",
                       .group = "g",
                       .consumer = "c"};
        char buf[256];
        emq_entry_json(&e, buf, sizeof buf);
        char *fields = strstr(buf, "\"fields\":");
        ASSERT(fields != NULL);
        fields += strlen("\"fields\":");
        buf[strlen(buf) - 1] = '\0'; /* the entry's closing brace */
        size_t n;
        emq_field *f = parse_ok(fields, &n);
        ASSERT_EQ_SIZE(n, 1);
        ASSERT_EQ_MEM(f[0].name, f[0].name_len, cases[c].p, cases[c].n);
        ASSERT_EQ_MEM(f[0].value, f[0].value_len, cases[c].p, cases[c].n);
        emq_fields_free(f);
    }
}

TEST(jsonparse_errors_name_the_column) {
    ASSERT_CONTAINS(parse_err(""), "column 1: empty line");
    ASSERT_CONTAINS(parse_err("1"), "column 1: expected a JSON object");
    ASSERT_CONTAINS(parse_err("[1]"),
                    "column 2: expected a [name, value] pair");
    ASSERT_CONTAINS(parse_err("[]"), "column 2: no fields");
    ASSERT_CONTAINS(parse_err("[[\"a\":1]]"),
                    "expected ',' after the field name");
    ASSERT_CONTAINS(parse_err("[[\"a\",1,2]]"),
                    "expected ']' after a [name, value] pair");
    ASSERT_CONTAINS(parse_err("{}"), "column 2: no fields");
    ASSERT_CONTAINS(parse_err("{\"a\" 1}"), "column 6: expected ':'");
    ASSERT_CONTAINS(parse_err("{\"a\":1"), "column 7: the line ends inside");
    ASSERT_CONTAINS(parse_err("{\"a\":1 \"b\":2}"),
                    "column 8: expected ',' or '}'");
    ASSERT_CONTAINS(parse_err("{\"a\":[1]}"), "column 6: arrays are not");
    ASSERT_CONTAINS(parse_err("{\"a\":{\"x\":1}}"),
                    "column 7: an object must be");
    ASSERT_CONTAINS(parse_err("{\"a\":tru}"), "column 6: a value must be");
    ASSERT_CONTAINS(parse_err("{\"a\":01}"), "column 7: expected ',' or '}'");
    ASSERT_CONTAINS(parse_err("{\"a\":1.}"), "a digit must follow '.'");
    ASSERT_CONTAINS(parse_err("{\"a\":-}"), "a digit must follow '-'");
    ASSERT_CONTAINS(parse_err("{\"a\":\"x\\q\"}"), "column 8: unknown escape");
    ASSERT_CONTAINS(parse_err("{\"a\":\"\\u12\"}"), "four hex digits");
    ASSERT_CONTAINS(parse_err("{\"a\":\"\\ud800x\"}"), "high surrogate");
    ASSERT_CONTAINS(parse_err("{\"a\":\"\\udc00\"}"), "lone low surrogate");
    ASSERT_CONTAINS(parse_err("{\"a\":\"\xff\"}"), "column 7: a value holds "
                                                   "bytes that are not UTF-8");
    ASSERT_CONTAINS(parse_err("{\"a\":\"x\ty\"}"), "control character 0x09");
    ASSERT_CONTAINS(parse_err("{\"a\":\"open}"), "not closed");
    ASSERT_CONTAINS(parse_err("{\"a\":{\"base64\":\"@@\"}}"), "not base64");
    ASSERT_CONTAINS(parse_err("{\"a\":{\"base64\":\"A\"}}"), "wrong length");
    ASSERT_CONTAINS(parse_err("{\"a\":{\"base64\":\"AA=A\"}}"), "not base64");
    ASSERT_CONTAINS(parse_err("{\"a\":1} x"), "column 9: unexpected text");
    ASSERT_CONTAINS(parse_err("{a:1}"), "column 2: expected a field name");
    /* A binary name is only legal in the pairs form: object names are
     * strings in JSON. */
    ASSERT_CONTAINS(parse_err("{{\"base64\":\"/w==\"}:1}"),
                    "column 2: expected a field name in double quotes");
    ASSERT_CONTAINS(parse_err("[[{\"x\":1},1]]"), "must be {\"base64\"");
}

/* The parser never reads past len: the same text cut at every length is
 * refused, never accepted or overrun (run under ASan in CI). */
TEST(jsonparse_every_prefix_is_refused) {
    const char *full = "{\"k\":\"v\\u00e9\",\"b\":{\"base64\":\"/w==\"},"
                       "\"n\":-1.5e3,\"t\":true}";
    size_t len = strlen(full);
    for (size_t cut = 0; cut < len; cut++) {
        char *copy = malloc(cut ? cut : 1);
        ASSERT(copy != NULL);
        memcpy(copy, full, cut);
        emq_field *f = NULL;
        size_t n = 0;
        emq_error err;
        emq_status st = emq_fields_from_json(copy, cut, &f, &n, &err);
        free(copy);
        if (st == EMQ_OK)
            FAIL("prefix of %zu bytes accepted", cut);
        ASSERT_CONTAINS(err.message, "column ");
    }
}

TEST(jsonparse_out_of_memory) {
    emq_field *f = NULL;
    size_t n = 0;
    emq_error err;
    emq__alloc_fail_at(1);
    ASSERT_STATUS(emq_fields_from_json("{\"a\":1}", 7, &f, &n, &err),
                  EMQ_ENOMEM, &err);
    emq__alloc_fail_at(0);
    ASSERT(f == NULL);
}
