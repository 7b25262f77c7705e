/* SPDX-License-Identifier: BSD-3-Clause */
/* gen_machinedoc: prints the table of the consumer session's states and
 * transitions (src/consumer/machine.c) that docs/CONSUMER.md carries
 * between its "machine table" markers, so the document can never
 * disagree with the code. scripts/machinedoc.sh writes or checks it.
 *
 * Usage: gen_machinedoc
 */
#include "consumer/machine.h"

#include <stdio.h>
#include <stdlib.h>

int main(void) {
    size_t need = emq__machine_doc(NULL, 0);
    char *doc = malloc(need + 1);
    if (doc == NULL) {
        fputs("gen_machinedoc: out of memory\n", stderr);
        return 1;
    }
    emq__machine_doc(doc, need + 1);
    fputs(doc, stdout);
    free(doc);
    return 0;
}
