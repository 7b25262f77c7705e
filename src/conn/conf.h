/* SPDX-License-Identifier: BSD-3-Clause */
/* conf.h: the typed fields behind emq_conf_t, for the layers above base.
 *
 * Internal header (not installed). The public API sets and reads properties
 * by name (emq_conf_set/emq_conf_get); the library itself reads the typed
 * fields below directly. Every field is valid at all times: emq_conf_set
 * validates a value before storing it, and emq_conf_new applies the
 * defaults of the property table through the same validators.
 *
 * Strings are emq_alloc'd and NULL when empty. The password is wiped when
 * it is replaced and when the conf is destroyed.
 */
#ifndef EMQ_CONN_CONF_H
#define EMQ_CONN_CONF_H

#include "../base/base.h"

/* tls.verify values. EMQ_TLS_VERIFY_DEFAULT means "not set": the URL's
 * tls.verify parameter applies, else peer. */
#define EMQ_TLS_VERIFY_DEFAULT (-1)
#define EMQ_TLS_VERIFY_NONE 0
#define EMQ_TLS_VERIFY_PEER 1

struct emq_conf {
    char *url;                   /* never NULL; parsed and valid */
    char *user;                  /* ACL user; NULL: the URL's, else default */
    char *password;              /* NULL: the URL's, else none; wiped */
    int64_t db;                  /* -1: the URL's (else 0); else SELECT db */
    char *client_name;           /* CLIENT SETNAME on connect; NULL: none */
    int64_t protocol;            /* 2 or 3 (3 sends HELLO 3 first) */
    int64_t connect_timeout_ms;  /* connect, TLS handshake and handshake
                                    commands, as one deadline */
    int64_t command_timeout_ms;  /* per reply; 0: wait forever */
    int64_t tcp_keepalive_s;     /* TCP_KEEPIDLE seconds; 0: off */
    char *tls_ca_file;           /* PEM CA bundle; NULL: URL's or system */
    char *tls_cert_file;         /* client certificate chain (PEM) */
    char *tls_key_file;          /* client private key (PEM) */
    char *tls_sni;               /* SNI name; NULL: host unless IP */
    int64_t tls_verify;          /* EMQ_TLS_VERIFY_* */
    int64_t backoff_min_ms;      /* reconnect.backoff_min_ms */
    int64_t backoff_max_ms;      /* reconnect.backoff_max_ms */
    int64_t max_attempts;        /* reconnect.max_attempts */
    int64_t pipeline_max;        /* most appended commands left unread */
    int64_t output_max_bytes;    /* cap of the unsent output buffer */
    int64_t resp_max_bulk;       /* emq_resp_limits.max_bulk */
    int64_t resp_max_depth;      /* emq_resp_limits.max_depth */
    int64_t resp_max_elements;   /* emq_resp_limits.max_elements */
    int64_t resp_max_reply;      /* emq_resp_limits.max_reply */
    char *cluster_seeds;         /* "host:port,..." after url; NULL: none */
    int64_t cluster_max_redirects; /* MOVED/ASK followed per command */
    int64_t cluster_retry_ms;    /* TRYAGAIN/CLUSTERDOWN retry budget */

    /* Queues, producers and consumers (validated by their layers). */
    char *queue;                 /* queue name; NULL: use stream */
    char *stream;                /* raw stream key; NULL: use queue */
    int64_t partitions;          /* 1: a plain queue; P > 1: queue names a
                                    topic of P partitions (keys/topic.c) */
    int64_t topic_partitions;    /* not a property: a partition's conf
                                    (emq_topic_partition_conf) says its
                                    topic's P here; 0 otherwise */
    char *group;                 /* consumer group */
    char *consumer;              /* consumer name */
    char *start;                 /* new | head | <id>; NULL: not declared */
    int64_t count;               /* entries per read */
    int64_t block_ms;            /* BLOCK of a read */
    int64_t claim_min_idle_ms;   /* XAUTOCLAIM min-idle-time */
    int64_t claim_interval_ms;   /* time between claim beats */
    int64_t claim_count;         /* XAUTOCLAIM COUNT */
    int64_t max_deliveries;      /* deliveries before the dead letters */
    int64_t max_in_flight;       /* entries handed out (poll) and not settled */
    int64_t batch_max;           /* most entries one batch handler call gets */
    int64_t lease_ttl_ms;        /* lifetime of the consumer name's lease */
    int64_t retry_backoff_ms;    /* first delay of a retried entry */
    int64_t retry_backoff_max_ms; /* its cap (doubling per delivery) */
    int64_t group_lost_fatal;    /* on_group_lost: 0 recreate, 1 fatal */
    int64_t producer_window;     /* XADDs in flight in a batch */
    int64_t producer_nomkstream; /* 1: XADD NOMKSTREAM (never create) */
    int64_t producer_timeout_ms; /* bound of one produce call, and of an
                                    async entry's wait for its outcome */
    int64_t producer_connect_eager; /* 1: emq_producer_new connects */
    int64_t producer_linger_ms;  /* async: wait for company this long */
    int64_t producer_queue_max_messages; /* async entries not yet reported */
    int64_t producer_queue_max_bytes;    /* ... and their field bytes */
    int64_t producer_delivery_poll; /* 1: callbacks from emq_producer_poll */
    int64_t producer_retries;    /* async re-sends of an unknown outcome */
    int64_t producer_wait_replicas; /* WAIT numreplicas after writes; 0 */
    int64_t producer_wait_aof;   /* 1: WAITAOF 1 <replicas> */
    int64_t producer_wait_timeout_ms; /* WAIT/WAITAOF timeout */
    int64_t consumer_connect_wait; /* 1: the first connect waits, too */
    int64_t trim_maxlen;         /* XADD MAXLEN threshold; -1: not set */
    char *trim_minid;            /* XADD MINID threshold; NULL: not set
                                    (an ID, checked by the producer) */
    int64_t trim_approx;         /* 1: trim with ~ (whole nodes only) */
    int64_t trim_limit;          /* XADD LIMIT (with ~ only); -1: not set */
    int64_t log_level;           /* EMQ_LOG_*: most verbose level logged */
    emq_log_fn log_fn;           /* NULL: stderr */
    void *log_opaque;
    int64_t stats_interval_ms;   /* 0: no statistics callback */
    emq_stats_fn stats_fn;       /* emq_conf_set_stats */
    void *stats_opaque;
};

/* Where a layer that is not handed a whole conf logs to: the log.level,
 * log callback and its opaque of a conf (emq_log_sink_of). */
typedef struct emq_log_sink {
    emq_log_fn fn;   /* NULL: stderr */
    void *opaque;
    int64_t level;   /* most verbose level logged */
} emq_log_sink;

void emq_log_sink_of(const emq_conf_t *conf, emq_log_sink *out);
/* Logs one line through sink's callback, or to stderr, when level is at
 * or above the sink's level. sink NULL: stderr, every level. */
void emq_log_to(const emq_log_sink *sink, emq_log_level level,
                const char *fmt, ...) EMQ_PRINTF(3, 4);
/* emq_log_to with conf's sink. */
void emq_conf_log(const emq_conf_t *conf, emq_log_level level,
                  const char *fmt, ...) EMQ_PRINTF(3, 4);

#endif /* EMQ_CONN_CONF_H */
