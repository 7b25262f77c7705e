/* cluster: the Redis Cluster slot of a key.
 *
 * Internal header (not installed). For now this layer holds only the slot
 * function that the keys layer uses to prove every key of a queue shares
 * one slot; the slot map, redirections and per-node connections follow
 * with cluster support.
 */
#ifndef EMQ_CLUSTER_H
#define EMQ_CLUSTER_H

#include "../conn/conn.h"

#include <stddef.h>
#include <stdint.h>

#define EMQ_CLUSTER_SLOTS 16384

/* CRC16-CCITT (XMODEM: polynomial 0x1021, initial value 0), the checksum
 * Redis Cluster uses for key slots. */
uint16_t emq_cluster_crc16(const char *buf, size_t len);

/* The slot of key: CRC16 of its hashtag (the bytes between the first '{'
 * and the first '}' after it, when that is non-empty) or of the whole key,
 * modulo 16384. */
unsigned emq_cluster_key_slot(const char *key, size_t len);

#endif /* EMQ_CLUSTER_H */
