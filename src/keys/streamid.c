/* SPDX-License-Identifier: BSD-3-Clause */
/* streamid.c: parsing and comparing stream entry IDs ("ms-seq").
 *
 * Used to validate a declared start position and explicit IDs before any
 * byte reaches the server, and to match replies of XPENDING with entries
 * of XREADGROUP/XAUTOCLAIM, which both come in ID order.
 */
#include "keys.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
/* Reads the eight bytes of x (as loaded from memory) as ASCII digits into
 * *out, all at once (the milliseconds of an ID have 13); -1 when one of
 * them is not a digit. */
static int eight_digits_word(uint64_t x, uint64_t *out) {
    /* A digit is 0x30..0x39: high nibble 3, and still 3 after adding 6
     * (a byte that fails the first test is what may carry into the next). */
    if ((x & 0xF0F0F0F0F0F0F0F0ULL) != 0x3030303030303030ULL ||
        ((x + 0x0606060606060606ULL) & 0xF0F0F0F0F0F0F0F0ULL) !=
            0x3030303030303030ULL)
        return -1;
    /* Pairs of digits into bytes, pairs of those into 16 bits, then the
     * two halves; the first byte in memory is the most significant. */
    x = (x & 0x0F0F0F0F0F0F0F0FULL) * 2561 >> 8;
    x = (x & 0x00FF00FF00FF00FFULL) * 6553601 >> 16;
    *out = (x & 0x0000FFFF0000FFFFULL) * 42949672960001ULL >> 32;
    return 0;
}

/* The eight bytes at p as ASCII digits (eight_digits_word). */
static int eight_digits(const char *p, uint64_t *out) {
    uint64_t x;
    memcpy(&x, p, 8);
    return eight_digits_word(x, out);
}

/* Milliseconds of thirteen digits followed by '-' (every ID from 2001 to
 * 2286): the first eight at once, then the eight ending at the dash with
 * the three already read taken as zeros. Returns 13, or 0 when text is
 * not so. */
static size_t thirteen_digits(const char *text, size_t len, uint64_t *out) {
    uint64_t hi, lo, x;
    if (len < 15 || text[13] != '-' || eight_digits(text, &hi) != 0)
        return 0;
    memcpy(&x, text + 5, 8);
    if (eight_digits_word((x & ~0xFFFFFFULL) | 0x303030ULL, &lo) != 0)
        return 0;
    *out = hi * 100000 + lo;
    return 13;
}
#endif

/* Reads the leading decimal digits of p[0..n) into *out: returns how many
 * there were (0: none), or SIZE_MAX when more than 20, or when they do not
 * fit 64 bits. One pass, as this runs for every entry a consumer reads. */
static size_t leading_u64(const char *p, size_t n, uint64_t *out) {
    uint64_t v = 0;
    size_t i = 0;
    /* Nineteen digits never overflow; only a twentieth can. */
    size_t safe = n < 19 ? n : 19;
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    if (safe >= 8 && eight_digits(p, &v) == 0)
        i = 8;
#endif
    for (; i < safe; i++) {
        unsigned d = (unsigned)(unsigned char)p[i] - '0';
        if (d > 9)
            break;
        v = v * 10 + d;
    }
    if (i == 19 && n > 19) {
        unsigned d = (unsigned)(unsigned char)p[19] - '0';
        if (d <= 9) {
            if (v > (UINT64_MAX - d) / 10 ||
                (n > 20 && (unsigned)(unsigned char)p[20] - '0' <= 9))
                return SIZE_MAX;
            v = v * 10 + d;
            i = 20;
        }
    }
    *out = v;
    return i;
}

int emq__stream_id_parse(const char *text, size_t len, emq__stream_id *out) {
    emq__stream_id id = {0, 0};
    size_t ms_len = 0;
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    ms_len = thirteen_digits(text, len, &id.ms);
#endif
    if (ms_len == 0)
        ms_len = leading_u64(text, len, &id.ms);
    if (ms_len == 0 || ms_len == SIZE_MAX)
        return -1;
    if (ms_len < len) {
        size_t seq_len = len - ms_len - 1;
        if (text[ms_len] != '-' || seq_len == 0)
            return -1;
        const char *seq = text + ms_len + 1;
        if (seq_len < 19) { /* cannot overflow: all digits, no more */
            for (size_t i = 0; i < seq_len; i++) {
                unsigned d = (unsigned)(unsigned char)seq[i] - '0';
                if (d > 9)
                    return -1;
                id.seq = id.seq * 10 + d;
            }
        } else if (leading_u64(seq, seq_len, &id.seq) != seq_len) {
            return -1;
        }
    }
    if (out)
        *out = id;
    return 0;
}

int emq__stream_id_cmp(emq__stream_id a, emq__stream_id b) {
    if (a.ms != b.ms)
        return a.ms < b.ms ? -1 : 1;
    if (a.seq != b.seq)
        return a.seq < b.seq ? -1 : 1;
    return 0;
}

/* Maps the declared start to an XGROUP CREATE ID: new -> $, head -> 0, or
 * an explicit stream ID. There is no default: the start is declared
 * (docs/CONSUMER.md, "The contract, in order"). */
emq_status emq__stream_start_parse(const char *start, char *out,
                                   emq_error *err) {
    if (start == NULL || *start == '\0')
        return emq__error_set(err, EMQ_EINVAL, 0,
                              "start is required: new (only entries added "
                              "after the group is created), head (replay the "
                              "stream from its first entry) or an entry ID");
    if (strcmp(start, "new") == 0) {
        strcpy(out, "$");
        return EMQ_OK;
    }
    if (strcmp(start, "head") == 0) {
        strcpy(out, "0");
        return EMQ_OK;
    }
    size_t n = strlen(start);
    if (n >= EMQ_ID_MAX || emq__stream_id_parse(start, n, NULL) != 0) {
        char shown[64];
        return emq__error_set(err, EMQ_EINVAL, 0,
                              "start '%s' is not valid: use new, head or an "
                              "entry ID such as 1732924800000-0 (each part "
                              "within 64 bits)",
                              emq__printable(shown, sizeof shown, start, n));
    }
    memcpy(out, start, n + 1);
    return EMQ_OK;
}
