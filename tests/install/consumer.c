/* SPDX-License-Identifier: BSD-3-Clause */
/* consumer.c: the smallest user of an installed libechomq. Built by
 * scripts/test.sh with find_package(echomq) and with pkg-config, it checks
 * that the header, the libraries and the package files fit together. */
#include <echomq.h>

#include <stdio.h>

int main(void) {
    unsigned v = emq_version();
    printf("libechomq %s (0x%06x, header %s)\n", emq_version_str(), v,
           EMQ_VERSION_STRING);
    if (v != EMQ_VERSION_HEX) {
        fprintf(stderr, "consumer: header and library versions differ\n");
        return 1;
    }
    printf("EMQ_ETIMEDOUT: %s (%s)\n", emq_strerror(EMQ_ETIMEDOUT),
           emq_status_name(EMQ_ETIMEDOUT));
    printf("unknown status: %s\n", emq_strerror((emq_status)12345));
    return 0;
}
