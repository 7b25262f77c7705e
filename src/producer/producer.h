/* producer.h: internals of the producer layer (XADD, single and batched,
 * with a queue's trimming policy).
 *
 * Internal header (not installed); the API is in echomq.h.
 */
#ifndef EMQ_PRODUCER_H
#define EMQ_PRODUCER_H

#include "../keys/keys.h"
#include "../conn/conf.h"

/* Most words before the entry ID: XADD <stream> NOMKSTREAM MINID ~ <id>
 * LIMIT <n>. */
#define EMQ_PRODUCER_HEAD_MAX 8

struct emq_producer {
    emq_conf_t *conf;  /* own copy; head may point into its strings */
    emq_keys keys;
    emq_route *route;
    const char **argv; /* scratch argv of one XADD: the head words, then
                          the ID and the field/value pairs; grown to the
                          largest entry seen, never shrunk */
    size_t *argvlen;   /* lengths of argv's words */
    size_t argv_cap;   /* slots in argv and argvlen; >= nhead + 1 */
    size_t nhead;      /* words every XADD starts with (argv[0..nhead)) */
    char threshold[EMQ_ID_MAX]; /* MAXLEN's number as text */
    char limit[24];             /* LIMIT's number as text */

    /* A topic (conf partitions > 1): route is NULL and each entry goes to
     * one of the partitions' producers, opened on first use. */
    emq_producer_t **parts;    /* nparts slots, NULL until opened */
    size_t nparts;             /* 0 for a plain queue */
    uint64_t next;             /* round-robin cursor for entries without
                                  a key */
};

#endif /* EMQ_PRODUCER_H */
