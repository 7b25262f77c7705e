/* SPDX-License-Identifier: BSD-3-Clause */
/* fuzz_resp.c: libFuzzer target for the RESP reader.
 *
 * The first input byte picks how the rest is split into feeds (so every
 * resume point gets exercised), whether tight limits apply (max_reply
 * among them: 256 bytes) and whether push messages are dropped (as a
 * connection's reader does; then none may come out); the rest is
 * fed to a reader and every reply is walked through the public accessors
 * and freed. Replies are kept until the end so views must survive chunk
 * moves. Any crash, sanitizer report or leak is a finding.
 */
#include "resp/resp.h"

#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Touches every node; returns a value so the walk is not optimised out. */
static size_t walk(const emq_reply *r) {
    size_t sum = (size_t)emq_reply_kind(r);
    size_t len;
    const char *s = emq_reply_str(r, &len);
    if (s && len)
        sum += (unsigned char)s[0] + (unsigned char)s[len - 1];
    sum += (size_t)emq_reply_integer(r);
    sum += emq_reply_format(r)[0];
    sum += (size_t)(emq_reply_double(r) != 0.0);
    if (emq_reply_attribute(r))
        sum += walk(emq_reply_attribute(r));
    for (size_t i = 0; i < emq_reply_len(r); i++)
        sum += walk(emq_reply_at(r, i));
    return sum;
}

#define MAX_KEPT 64

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1)
        return 0;
    uint8_t mode = data[0];
    data++;
    size--;
    emq__resp_limits limits;
    emq__resp_limits_default(&limits);
    if (mode & 0x80) {
        limits.max_bulk = 64;
        limits.max_depth = 3;
        limits.max_elements = 8;
        limits.max_line = 32;
        limits.max_reply = 256;
    }
    int drop = (mode & 0x40) != 0;
    size_t stride = (mode & 0x7f) + 1; /* 1..128 bytes per feed */
    emq__resp_reader *r = emq__resp_reader_new(&limits);
    if (r == NULL)
        return 0;
    if (drop)
        emq__resp_drop_pushes(r);
    emq_reply *kept[MAX_KEPT];
    size_t nkept = 0;
    volatile size_t sink = 0;
    emq_status st = EMQ_OK;
    for (size_t off = 0; off < size && st != EMQ_EPROTO; off += stride) {
        size_t n = size - off < stride ? size - off : stride;
        if (emq__resp_feed(r, (const char *)data + off, n, NULL) != EMQ_OK)
            break;
        emq_reply *reply;
        while ((st = emq__resp_next(r, &reply, NULL)) == EMQ_OK) {
            if (drop && emq_reply_kind(reply) == EMQ_REPLY_PUSH)
                __builtin_trap(); /* a dropped push came out */
            sink += walk(reply);
            if (nkept < MAX_KEPT)
                kept[nkept++] = reply;
            else
                emq_reply_free(reply);
        }
    }
    emq__resp_reader_free(r);
    for (size_t i = 0; i < nkept; i++) {
        sink += walk(kept[i]); /* views outlive the reader */
        emq_reply_free(kept[i]);
    }
    (void)sink;
    return 0;
}
