/* streamid.c: parsing and comparing stream entry IDs ("ms-seq").
 *
 * Used to validate a declared start position and explicit IDs before any
 * byte reaches the server, and to match replies of XPENDING with entries
 * of XREADGROUP/XAUTOCLAIM, which both come in ID order.
 */
#include "keys.h"

#include <string.h>

/* Parses 1..20 decimal digits into a uint64 without overflow. */
static int parse_u64(const char *p, size_t n, uint64_t *out) {
    if (n == 0 || n > 20)
        return -1;
    uint64_t v = 0;
    for (size_t i = 0; i < n; i++) {
        if (p[i] < '0' || p[i] > '9')
            return -1;
        unsigned d = (unsigned)(p[i] - '0');
        if (v > (UINT64_MAX - d) / 10)
            return -1;
        v = v * 10 + d;
    }
    *out = v;
    return 0;
}

int emq_stream_id_parse(const char *text, size_t len, emq_stream_id *out) {
    const char *dash = memchr(text, '-', len);
    emq_stream_id id = {0, 0};
    if (dash == NULL) {
        if (parse_u64(text, len, &id.ms) != 0)
            return -1;
    } else {
        size_t ms_len = (size_t)(dash - text);
        if (parse_u64(text, ms_len, &id.ms) != 0 ||
            parse_u64(dash + 1, len - ms_len - 1, &id.seq) != 0)
            return -1;
    }
    if (out)
        *out = id;
    return 0;
}

int emq_stream_id_cmp(emq_stream_id a, emq_stream_id b) {
    if (a.ms != b.ms)
        return a.ms < b.ms ? -1 : 1;
    if (a.seq != b.seq)
        return a.seq < b.seq ? -1 : 1;
    return 0;
}
