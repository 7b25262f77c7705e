/* SPDX-License-Identifier: BSD-3-Clause */
/* crc16.c: CRC16 and key slots, as Redis Cluster computes them.
 *
 * The table is built once from the polynomial rather than pasted, so the
 * algorithm is visible: CRC16-CCITT/XMODEM (poly 0x1021, init 0, no
 * reflection, no final xor). The known check value of "123456789" is
 * 0x31C3 (tested).
 */
#include "cluster.h"

#include <pthread.h>
#include <string.h>

static uint16_t table[256];
static pthread_once_t table_once = PTHREAD_ONCE_INIT;

static void build_table(void) {
    for (unsigned byte = 0; byte < 256; byte++) {
        uint16_t crc = (uint16_t)(byte << 8);
        for (int bit = 0; bit < 8; bit++)
            crc = (uint16_t)(crc & 0x8000 ? (crc << 1) ^ 0x1021 : crc << 1);
        table[byte] = crc;
    }
}

uint16_t emq__cluster_crc16(const char *buf, size_t len) {
    pthread_once(&table_once, build_table);
    uint16_t crc = 0;
    for (size_t i = 0; i < len; i++)
        crc = (uint16_t)((crc << 8) ^
                         table[((crc >> 8) ^ (unsigned char)buf[i]) & 0xff]);
    return crc;
}

unsigned emq__cluster_key_slot(const char *key, size_t len) {
    const char *open = memchr(key, '{', len);
    if (open) {
        size_t start = (size_t)(open - key) + 1;
        const char *close = memchr(key + start, '}', len - start);
        if (close && close > key + start) /* "{}" hashes the whole key */
            return emq__cluster_crc16(key + start,
                                      (size_t)(close - (key + start))) &
                   (EMQ_CLUSTER_SLOTS - 1);
    }
    return emq__cluster_crc16(key, len) & (EMQ_CLUSTER_SLOTS - 1);
}
