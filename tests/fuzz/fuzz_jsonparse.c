/* SPDX-License-Identifier: BSD-3-Clause */
/* fuzz_jsonparse.c: libFuzzer target for emq_fields_from_json, the parser
 * of `echomq produce --json` input lines (src/base/jsonparse.c).
 *
 * The input is one line of JSON as a user or a pipe may send it. Besides
 * crashes, leaks and sanitizer reports, the target checks the parser's
 * promises: a failure is EMQ_EINVAL (or EMQ_ENOMEM) with a message naming
 * a column within the input; on success every name and value is
 * NUL-terminated at its length, and the fields survive a round trip: the
 * "fields" member of emq_entry_json over them parses back to the same
 * fields, byte for byte and in the same order.
 */
#include "echomq.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_fields(const emq_field *f, size_t n) {
    for (size_t i = 0; i < n; i++) {
        if (f[i].name == NULL || f[i].value == NULL ||
            f[i].name[f[i].name_len] != '\0' ||
            f[i].value[f[i].value_len] != '\0')
            abort();
    }
}

static int same(const emq_field *a, size_t an, const emq_field *b, size_t bn) {
    if (an != bn)
        return 0;
    for (size_t i = 0; i < an; i++)
        if (a[i].name_len != b[i].name_len ||
            a[i].value_len != b[i].value_len ||
            memcmp(a[i].name, b[i].name, a[i].name_len) != 0 ||
            memcmp(a[i].value, b[i].value, a[i].value_len) != 0)
            return 0;
    return 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    emq_field *fields = NULL;
    size_t n = 0;
    emq_error err;
    memset(&err, 0, sizeof err);
    emq_status st =
        emq_fields_from_json((const char *)data, size, &fields, &n, &err);
    if (st != EMQ_OK) {
        if (fields != NULL || (st != EMQ_EINVAL && st != EMQ_ENOMEM) ||
            err.code != st || err.message[0] == '\0')
            abort();
        unsigned long col = 0;
        if (st == EMQ_EINVAL && (sscanf(err.message, "column %lu", &col) != 1 ||
                                 col == 0 || col > size + 1))
            abort();
        return 0;
    }
    if (n == 0)
        abort(); /* an empty object is refused */
    check_fields(fields, n);

    /* Round trip through the writer the consumer side uses. */
    emq_entry e = {.id = "1-0",
                   .deliveries = 1,
                   .fields = fields,
                   .nfields = n,
                   .stream = "s",
                   .group = "g",
                   .consumer = "c"};
    size_t need = emq_entry_json(&e, NULL, 0);
    char *json = malloc(need + 1);
    if (json == NULL)
        abort();
    if (emq_entry_json(&e, json, need + 1) != need || strlen(json) != need)
        abort();
    const char *key = "\"fields\":";
    char *at = strstr(json, key);
    if (at == NULL || need < 2 || json[need - 1] != '}')
        abort();
    at += strlen(key);
    size_t len = (size_t)(json + need - 1 - at); /* without the entry's } */
    emq_field *again = NULL;
    size_t n2 = 0;
    st = emq_fields_from_json(at, len, &again, &n2, &err);
    if (st != EMQ_OK) {
        fprintf(stderr, "round trip refused: %s\n%s\n", err.message, json);
        abort();
    }
    if (!same(fields, n, again, n2)) {
        fprintf(stderr, "round trip changed the fields: %s\n", json);
        abort();
    }
    emq_fields_free(again);
    emq_fields_free(fields);
    free(json);
    return 0;
}
