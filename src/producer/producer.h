/* producer.h: internals of the producer layer (XADD, single and batched).
 *
 * Internal header (not installed); the API is in echomq.h.
 */
#ifndef EMQ_PRODUCER_H
#define EMQ_PRODUCER_H

#include "../keys/keys.h"
#include "../conn/conf.h"

struct emq_producer {
    emq_conf_t *conf; /* own copy */
    emq_keys keys;
    emq_conn_t *conn;
};

#endif /* EMQ_PRODUCER_H */
