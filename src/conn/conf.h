/* SPDX-License-Identifier: BSD-3-Clause */
/* conf.h: the typed fields behind emq_conf_t, for the layers above base.
 *
 * Internal header (not installed). The public API sets and reads properties
 * by name (emq_conf_set/emq_conf_get); the library itself reads the typed
 * fields through the getters below (the struct is private to conf.c).
 * Every field is valid at all times: emq_conf_set validates a value before
 * storing it, and emq_conf_new applies the defaults of the property table
 * through the same validators.
 *
 * Strings are emq__alloc'd and NULL when empty. The password is wiped when
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

/* Every field of a conf, written once: conf.c makes struct emq_conf from
 * this list (private to it: only conf.c writes a field, through the
 * validators of the property table, so every field is valid at all times)
 * and one getter per field, emq__cfg_<name>(conf), which is how the layers
 * read a conf. X(kind, name): kind STR (NULL when empty; emq__alloc'd,
 * wiped when replaced or freed), INT, LOG_FN, STATS_FN or PTR. */
#define EMQ_CONF_FIELDS(X)                                                       \
    X(STR, url)                  /* never NULL; parsed and valid */              \
    X(STR, user)                 /* ACL user; NULL: the URL's, else default */   \
    X(STR, password)             /* NULL: the URL's, else none; wiped */         \
    X(INT, db)                   /* -1: the URL's (else 0); else SELECT db */    \
    X(STR, client_name)          /* CLIENT SETNAME on connect; NULL: none */     \
    X(INT, protocol)             /* 2 or 3 (3 sends HELLO 3 first) */            \
    X(INT, connect_timeout_ms)   /* connect, TLS handshake and handshake         \
                                    commands, as one deadline */                 \
    X(INT, command_timeout_ms)   /* per reply; 0: wait forever */                \
    X(INT, tcp_keepalive_s)      /* TCP_KEEPIDLE seconds; 0: off */              \
    X(STR, tls_ca_file)          /* PEM CA bundle; NULL: URL's or system */      \
    X(STR, tls_cert_file)        /* client certificate chain (PEM) */            \
    X(STR, tls_key_file)         /* client private key (PEM) */                  \
    X(STR, tls_key_password)     /* its passphrase; NULL: none; wiped */         \
    X(STR, tls_sni)              /* SNI name; NULL: host unless IP */            \
    X(INT, tls_verify)           /* EMQ_TLS_VERIFY_* */                          \
    X(STR, sentinel_master)      /* NULL: the URL's #NAME */                     \
    X(STR, sentinel_user)        /* ACL user at the Sentinels; NULL: none */     \
    X(STR, sentinel_password)    /* NULL: no AUTH at the Sentinels; wiped */     \
    X(INT, sentinel_tls)         /* -1: as the URL's scheme; 0/1: off/on */      \
    X(STR, sentinel_address_map) /* "FROM=TO,..."; NULL: none */                 \
    X(STR, sentinel_allowed_hosts) /* patterns; NULL: any host */                \
    X(INT, backoff_min_ms)         /* reconnect.backoff_min_ms */                \
    X(INT, backoff_max_ms)         /* reconnect.backoff_max_ms */                \
    X(INT, max_attempts)           /* reconnect.max_attempts */                  \
    X(INT, pipeline_max)           /* most appended commands left unread */      \
    X(INT, output_max_bytes)       /* cap of the unsent output buffer */         \
    X(INT, resp_max_bulk)          /* emq__resp_limits.max_bulk */               \
    X(INT, resp_max_depth)         /* emq__resp_limits.max_depth */              \
    X(INT, resp_max_elements)      /* emq__resp_limits.max_elements */           \
    X(INT, resp_max_reply)         /* emq__resp_limits.max_reply */              \
    X(STR, cluster_seeds)          /* "host:port,..." after url; NULL: none */   \
    X(INT, cluster_max_redirects)  /* MOVED/ASK followed per command */          \
    X(INT, cluster_retry_ms)       /* TRYAGAIN/CLUSTERDOWN retry budget */       \
    X(STR, cluster_allowed_hosts)  /* patterns; NULL: any host */                \
    /* Queues, producers and consumers (validated by their layers). */           \
    X(STR, queue)      /* queue name; NULL: use stream */                        \
    X(STR, stream)     /* raw stream key; NULL: use queue */                     \
    X(INT, partitions) /* 1: a plain queue; P > 1: queue names a topic of P      \
                          partitions (keys/partition.c) */                       \
    X(INT, topic_partitions)   /* not a property: a partition's conf             \
                                  (emq__topic_partition_conf) says its topic's P \
                                  here; 0 otherwise */                           \
    X(STR, group)              /* consumer group */                              \
    X(STR, consumer)           /* consumer name */                               \
    X(STR, start)              /* new | head | <id>; NULL: not declared */       \
    X(INT, count)              /* entries per read */                            \
    X(INT, block_ms)           /* BLOCK of a read */                             \
    X(INT, claim_min_idle_ms)  /* XAUTOCLAIM min-idle-time */                    \
    X(INT, claim_interval_ms)  /* time between claim beats */                    \
    X(INT, claim_count)        /* XAUTOCLAIM COUNT */                            \
    X(INT, max_deliveries)     /* deliveries before the dead letters */          \
    X(INT, max_in_flight)      /* entries handed out (poll) and not settled */   \
    X(INT, batch_max)          /* most entries one batch handler call gets */    \
    X(INT, handler_timeout_ms) /* time in hand before an entry is let go; 0 */   \
    X(INT, lease_ttl_ms)       /* lifetime of the consumer name's lease */       \
    X(INT, lease_wait_replicas)   /* WAIT after taking the lease; 0: none */     \
    X(INT, lease_wait_timeout_ms) /* that WAIT's timeout */                      \
    X(INT, retry_backoff_ms)      /* first delay of a retried entry */           \
    X(INT, retry_backoff_max_ms)  /* its cap (doubling per delivery) */          \
    X(INT, group_lost_fatal)      /* on_group_lost: 0 recreate, 1 fatal */       \
    X(INT, producer_window)       /* XADDs in flight in a batch */               \
    X(INT, producer_nomkstream)   /* 1: XADD NOMKSTREAM (never create) */        \
    X(INT, producer_timeout_ms) /* bound of one produce call, and of an async    \
                                   entry's wait for its outcome */               \
    X(INT, producer_connect_eager) /* 1: emq_producer_new connects */            \
    X(INT, producer_linger_ms)     /* async: wait for company this long */       \
    X(INT, producer_queue_max_messages) /* async entries not yet reported */     \
    X(INT, producer_queue_max_bytes)    /* ... and their field bytes */          \
    X(INT, producer_delivery_poll) /* 1: callbacks from emq_producer_poll */     \
    X(INT, producer_retries)       /* async re-sends of an unknown outcome */    \
    X(INT, producer_wait_replicas) /* WAIT numreplicas after writes; 0 */        \
    X(INT, producer_wait_aof)      /* 1: WAITAOF 1 <replicas> */                 \
    X(INT, producer_wait_timeout_ms) /* WAIT/WAITAOF timeout */                  \
    X(INT, consumer_connect_wait)    /* 1: the first connect waits, too */       \
    X(INT, delayed_poll_ms) /* upkeep looks for due delayed entries; 0: no */    \
    X(INT, dedup_ttl_ms)    /* default window of an idempotency key */           \
    X(INT, rate_limit)      /* the group's entries per second; 0: none */        \
    X(INT, group_max_in_flight) /* the group's pending bound; 0: none */         \
    X(INT, deliveries_exact)    /* 1: reads mark what they deliver unseen */     \
    X(INT, deliveries_wait_replicas)   /* replicas a handout's record needs */   \
    X(INT, deliveries_wait_timeout_ms) /* that WAIT's timeout */                 \
    X(INT, trim_maxlen) /* XADD MAXLEN threshold; -1: not set */                 \
    X(STR, trim_minid)  /* XADD MINID threshold; NULL: not set (an ID, checked   \
                           by the producer) */                                   \
    X(INT, trim_approx) /* 1: trim with ~ (whole nodes only) */                  \
    X(INT, trim_limit)  /* XADD LIMIT (with ~ only); -1: not set */              \
    X(INT, log_level)   /* EMQ_LOG_*: most verbose level logged */               \
    X(LOG_FN, log_fn)   /* NULL: stderr */                                       \
    X(PTR, log_opaque)                                                           \
    X(INT, stats_interval_ms) /* 0: no statistics callback */                    \
    X(STATS_FN, stats_fn)     /* emq_conf_set_stats */                           \
    X(PTR, stats_opaque)

#define EMQ_CONF_RET_STR const char *
#define EMQ_CONF_RET_INT int64_t
#define EMQ_CONF_RET_LOG_FN emq_log_fn
#define EMQ_CONF_RET_STATS_FN emq_stats_fn
#define EMQ_CONF_RET_PTR void *

/* The one field that is not a property: marks conf as a partition's conf
 * of a topic of p partitions (keys/partition.c). */
void emq__conf_set_topic_partitions(emq_conf_t *conf, int64_t p);

/* emq__cfg_url(conf), emq__cfg_count(conf), ...: field name of conf. conf
 * must not be NULL; a string is borrowed from conf (valid until the
 * property is set again or the conf is destroyed). */
#define EMQ_CONF_GETTER_DECL(kind, name)                                       \
    EMQ_CONF_RET_##kind emq__cfg_##name(const emq_conf_t *conf);
EMQ_CONF_FIELDS(EMQ_CONF_GETTER_DECL)
#undef EMQ_CONF_GETTER_DECL

/* Where a layer that is not handed a whole conf logs to: the log.level,
 * log callback and its opaque of a conf (emq__log_sink_of). */
typedef struct emq__log_sink {
    emq_log_fn fn; /* NULL: stderr */
    void *opaque;
    int64_t level; /* most verbose level logged */
} emq__log_sink;

void emq__log_sink_of(const emq_conf_t *conf, emq__log_sink *out);
/* Logs one line through sink's callback, or to stderr, when level is at
 * or above the sink's level. sink NULL: stderr, every level. */
void emq__log_to(const emq__log_sink *sink, emq_log_level level,
                 const char *fmt, ...) EMQ_PRINTF(3, 4);
/* emq__log_to with conf's sink. */
void emq__conf_log(const emq_conf_t *conf, emq_log_level level, const char *fmt,
                   ...) EMQ_PRINTF(3, 4);
/* Logs a warning, through conf's logger, when conf connects over TLS
 * without verifying the server (tls.verify none, or the URL's
 * ?tls.verify=none); handle names what was made ("producer"). Called
 * once by each handle's constructor. EMQ_OK, or EMQ_ENOMEM (err filled)
 * when reading the URL ran out of memory: the constructor fails then.
 * Any thread. */
emq_status emq__conf_warn_unverified(const emq_conf_t *conf, const char *handle,
                                     emq_error *err);

#endif /* EMQ_CONN_CONF_H */
