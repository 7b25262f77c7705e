/* SPDX-License-Identifier: BSD-3-Clause */
/* reply_helpers.h: replies built from RESP bytes, for the unit tests of
 * code that reads replies (no server). */
#ifndef EMQ_TEST_REPLY_HELPERS_H
#define EMQ_TEST_REPLY_HELPERS_H

#include "harness/test.h"
#include "resp/resp.h"

#include <string.h>

/* The reply bytes hold (one whole reply); the test fails if they do not
 * parse. Caller frees it (emq_reply_free). */
static inline emq_reply *parse_reply(const char *bytes) {
    emq__resp_reader *rd = emq__resp_reader_new(NULL);
    ASSERT(rd != NULL);
    emq_error err;
    emq_reply *r = NULL;
    ASSERT_OK(emq__resp_feed(rd, bytes, strlen(bytes), &err), &err);
    ASSERT_OK(emq__resp_next(rd, &r, &err), &err);
    ASSERT(r != NULL);
    emq__resp_reader_free(rd);
    return r;
}

#endif /* EMQ_TEST_REPLY_HELPERS_H */
