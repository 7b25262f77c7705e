/* SPDX-License-Identifier: BSD-3-Clause */
/* test_fuzz_regressions.c: one test per finding of the fuzz targets
 * (tests/fuzz/), named after the target and what it found, so the fix
 * stays fixed without running a fuzzer. Each test replays the smallest
 * input that showed the problem through the layer it was in; no server.
 */
#include "harness/test.h"
#include "resp/resp.h"

/* Fails when msg holds a byte outside printable ASCII. */
static void assert_printable(const char *msg) {
    for (const char *s = msg; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c < 0x20 || c == 0x7f)
            FAIL("message holds control byte 0x%02x: \"%s\"", c, msg);
    }
}

/* Feeds in to a fresh reader and returns the error of the first reply. */
static emq_status first_reply_error(const emq__resp_limits *limits,
                                    const char *in, size_t n, emq_error *err) {
    emq__resp_limits l;
    emq__resp_limits_default(&l);
    emq__resp_reader *r = emq__resp_reader_new(limits ? limits : &l);
    ASSERT(r != NULL);
    emq_status st = emq__resp_feed(r, in, n, err);
    emq_reply *reply = NULL;
    if (st == EMQ_OK)
        st = emq__resp_next(r, &reply, err);
    emq_reply_free(reply);
    emq__resp_reader_free(r);
    return st;
}

/* fuzz_consumer: a reply whose type byte was a newline, followed by CR and
 * no LF, made the reader's error say "after a '\n' line" with the raw
 * byte, and the consumer logged that line with a newline inside it (log
 * injection from a hostile server). The type byte is now shown as 0x0a. */
TEST(fuzz_consumer_resp_error_shows_type_byte_as_hex) {
    static const char in[] = "\nab\rX";
    emq_error err;
    ASSERT_STATUS(first_reply_error(NULL, in, sizeof in - 1, &err), EMQ_EPROTO,
                  &err);
    assert_printable(err.message);
    ASSERT_CONTAINS(err.message, "expected CRLF after a 0x0a line");

    /* The same byte in the over-long-line error. */
    emq__resp_limits l;
    emq__resp_limits_default(&l);
    l.max_line = 16;
    char line[32];
    memset(line, 'a', sizeof line);
    line[0] = '\x1b';
    ASSERT_STATUS(first_reply_error(&l, line, sizeof line, &err), EMQ_EPROTO,
                  &err);
    assert_printable(err.message);
    ASSERT_CONTAINS(err.message, "a 0x1b line is longer than max_line 16");

    /* A printable type byte still reads as itself. */
    static const char plus[] = "+ok\rX";
    ASSERT_STATUS(first_reply_error(NULL, plus, sizeof plus - 1, &err),
                  EMQ_EPROTO, &err);
    ASSERT_CONTAINS(err.message, "expected CRLF after a '+' line");
}
