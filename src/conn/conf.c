/* SPDX-License-Identifier: BSD-3-Clause */
/* conf.c: the configuration object and its one property table.
 *
 * Every property has one row in `props`: its name, its default as text,
 * one line of documentation, and how a value is validated and stored in
 * the typed fields of struct emq_conf (conf.h). emq_conf_new applies each
 * default through the same path as emq_conf_set, so the table is the only
 * place a default is written; emq_conf_property walks it to generate
 * docs/CONFIGURATION.md.
 *
 * This file never talks to a server and never echoes a password: the
 * password is wiped when replaced or freed and reads back as "(set)".
 * Setting "url" parses it with emq__url_parse (url.c), so a bad URL is
 * refused when it is set rather than at connect time. The table lives in
 * the conn layer for that reason: the layers above read its typed fields,
 * and validate their own properties' meaning (a queue name, a start
 * position) when their handle is created, before any network traffic.
 */
#include "conf.h"

#include "conn.h"

#include <errno.h>
#include <stdarg.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef enum prop_type {
    P_STRING, /* free text, stored as char * (NULL when empty) */
    P_SECRET, /* like P_STRING, never echoed, wiped */
    P_INT,    /* decimal integer in [min, max], stored as int64_t */
    P_OPTINT, /* like P_INT, or empty for "not set" (-1) */
    P_VERIFY, /* "peer" or "none", stored as int64_t */
    P_CHOICE  /* one of the words in choices, stored as its value */
} prop_type;

typedef struct prop prop;

/* Extra check for a string value; returns EMQ_OK or fills err. */
typedef emq_status (*prop_check)(const prop *p, const char *value,
                                 emq_error *err);

/* The conf itself, private to this file (conf.h lists its fields). */
#define EMQ_CONF_TYPE_STR char *
#define EMQ_CONF_TYPE_INT int64_t
#define EMQ_CONF_TYPE_LOG_FN emq_log_fn
#define EMQ_CONF_TYPE_STATS_FN emq_stats_fn
#define EMQ_CONF_TYPE_PTR void *
#define CONF_FIELD(kind, name) EMQ_CONF_TYPE_##kind name;
struct emq_conf {
    EMQ_CONF_FIELDS(CONF_FIELD)
};
#undef CONF_FIELD

#define CONF_GETTER(kind, name)                                                \
    EMQ_CONF_RET_##kind emq__cfg_##name(const emq_conf_t *conf) {              \
        return conf->name;                                                     \
    }
EMQ_CONF_FIELDS(CONF_GETTER)
#undef CONF_GETTER

void emq__conf_set_topic_partitions(emq_conf_t *conf, int64_t p) {
    conf->topic_partitions = p;
}

struct prop {
    const char *name;
    const char *def; /* default as text, as accepted by emq_conf_set */
    const char *doc; /* one line for docs/CONFIGURATION.md */
    prop_type type;
    size_t offset;              /* of the field in struct emq_conf */
    int64_t min, max;           /* P_INT/P_OPTINT bounds, inclusive */
    prop_check check;           /* NULL or an extra validation for strings */
    const char *const *choices; /* P_CHOICE: words; NULL-terminated */
    const int64_t *values;      /* P_CHOICE: the value of each word */
    /* The layer that reads it: "conn" and "cluster" (every handle's
     * connections), "keys" (every handle's queue), "producer",
     * "consumer", or "all" (each handle, for its own messages). The one
     * place a property's owner is written. */
    const char *readers;
};

static const char *const group_lost_words[] = {"recreate", "fatal", NULL};
static const int64_t group_lost_values[] = {0, 1};
static const char *const connect_words[] = {"lazy", "eager", NULL};
static const int64_t connect_values[] = {0, 1};
static const char *const delivery_words[] = {"thread", "poll", NULL};
static const int64_t delivery_values[] = {0, 1};
static const char *const cwait_words[] = {"fail", "wait", NULL};
static const int64_t cwait_values[] = {0, 1};
static const char *const log_words[] = {"error", "warning", "info", "debug",
                                        NULL};
static const int64_t log_values[] = {EMQ_LOG_ERROR, EMQ_LOG_WARNING,
                                     EMQ_LOG_INFO, EMQ_LOG_DEBUG};

static emq_status check_url(const prop *p, const char *value, emq_error *err);
static emq_status check_name(const prop *p, const char *value, emq_error *err);
static emq_status check_path(const prop *p, const char *value, emq_error *err);
static emq_status check_seeds(const prop *p, const char *value, emq_error *err);
static emq_status check_host_patterns(const prop *p, const char *value,
                                      emq_error *err);
static emq_status check_address_map(const prop *p, const char *value,
                                    emq_error *err);

#define F(field) offsetof(struct emq_conf, field)

/* The property table. Keep docs one line each: they become table rows. The
 * resp.* defaults must equal the EMQ_RESP_DEFAULT_* macros (a unit test
 * checks). */
static const prop props[] = {
    {"url", "redis://127.0.0.1:6379",
     "Server to connect to: redis://[user[:password]@]host[:port][/db], "
     "rediss://... for TLS (tls.* properties may be given as query "
     "parameters), unix:///path[?db=N], or "
     "redis-sentinel://[user[:password]@]host[:port][,host[:port]...]"
     "[/db]#MASTER to ask Sentinels for the primary (docs/HA.md).",
     P_STRING, F(url), 0, 0, check_url, NULL, NULL, "conn"},
    {"user", "",
     "ACL user name for AUTH; overrides the URL's. Empty: the URL's, else "
     "the default user.",
     P_STRING, F(user), 0, 0, check_name, NULL, NULL, "conn"},
    {"password", "",
     "Password for AUTH; overrides the URL's. Never echoed; reads back as "
     "\"(set)\".",
     P_SECRET, F(password), 0, 0, NULL, NULL, NULL, "conn"},
    {"db", "",
     "Database to SELECT on connect; overrides the URL's. Empty: the URL's, "
     "else 0 (no SELECT).",
     P_OPTINT, F(db), 0, INT32_MAX, NULL, NULL, NULL, "conn"},
    {"client_name", "",
     "Connection name sent with CLIENT SETNAME on connect (printable, no "
     "spaces). Empty: none. A NOPERM reply is tolerated.",
     P_STRING, F(client_name), 0, 0, check_name, NULL, NULL, "conn"},
    {"protocol", "2", "RESP protocol version: 2, or 3 (sends HELLO 3 first).",
     P_INT, F(protocol), 2, 3, NULL, NULL, NULL, "conn"},
    {"connect_timeout_ms", "5000",
     "Deadline for connecting, the TLS handshake and the AUTH/SELECT/"
     "SETNAME handshake together, in milliseconds.",
     P_INT, F(connect_timeout_ms), 1, 3600000, NULL, NULL, NULL, "conn"},
    {"command_timeout_ms", "5000",
     "How long to wait for each reply, in milliseconds, plus the BLOCK or "
     "timeout argument of a blocking command. 0: wait forever.",
     P_INT, F(command_timeout_ms), 0, 86400000, NULL, NULL, NULL, "conn"},
    {"tcp_keepalive_s", "30",
     "TCP keepalive idle time in seconds (SO_KEEPALIVE, TCP_KEEPIDLE). "
     "0: off.",
     P_INT, F(tcp_keepalive_s), 0, 86400, NULL, NULL, NULL, "conn"},
    {"tls.ca_file", "",
     "PEM file of CA certificates to verify the server with. Empty: the "
     "system's default paths.",
     P_STRING, F(tls_ca_file), 0, 0, check_path, NULL, NULL, "conn"},
    {"tls.cert_file", "", "PEM client certificate (chain) for mutual TLS.",
     P_STRING, F(tls_cert_file), 0, 0, check_path, NULL, NULL, "conn"},
    {"tls.key_file", "", "PEM private key of tls.cert_file.", P_STRING,
     F(tls_key_file), 0, 0, check_path, NULL, NULL, "conn"},
    {"tls.key_password", "",
     "Passphrase of an encrypted tls.key_file. Nothing ever prompts for "
     "one: an encrypted key without it fails at once. Never echoed; reads "
     "back as \"(set)\".",
     P_SECRET, F(tls_key_password), 0, 0, NULL, NULL, NULL, "conn"},
    {"tls.sni", "",
     "Server name sent in the TLS handshake (SNI). Empty: the URL's host "
     "when it is not an IP address.",
     P_STRING, F(tls_sni), 0, 0, check_name, NULL, NULL, "conn"},
    {"tls.verify", "peer",
     "peer: verify the server certificate and its host name or IP; none: "
     "accept any certificate (testing only).",
     P_VERIFY, F(tls_verify), 0, 0, NULL, NULL, NULL, "conn"},
    {"sentinel.master", "",
     "The master the Sentinels watch, for a redis-sentinel:// URL; "
     "overrides the URL's #NAME.",
     P_STRING, F(sentinel_master), 0, 0, check_name, NULL, NULL, "conn"},
    {"sentinel.user", "",
     "ACL user name for AUTH at the Sentinels (the URL's user is the data "
     "nodes'). Empty: the default user.",
     P_STRING, F(sentinel_user), 0, 0, check_name, NULL, NULL, "conn"},
    {"sentinel.password", "",
     "Password for AUTH at the Sentinels (the URL's password is the data "
     "nodes'). Empty: no AUTH. Never echoed; reads back as \"(set)\".",
     P_SECRET, F(sentinel_password), 0, 0, NULL, NULL, NULL, "conn"},
    {"sentinel.tls", "",
     "1: TLS to the Sentinels, 0: plain; empty: as the URL's scheme "
     "(rediss-sentinel://: TLS to both). Uses the tls.* files.",
     P_OPTINT, F(sentinel_tls), 0, 1, NULL, NULL, NULL, "conn"},
    {"sentinel.address_map", "",
     "Addresses the Sentinels announce mapped to ones this host reaches "
     "(NAT, containers): FROM=TO[,FROM=TO...], each host:port.",
     P_STRING, F(sentinel_address_map), 0, 0, check_address_map, NULL, NULL,
     "conn"},
    {"sentinel.allowed_hosts", "",
     "The only addresses the Sentinels may send this client to: the "
     "primary they name (which gets the data password) and the Sentinels "
     "they list (which get sentinel.password). Host patterns as "
     "cluster.allowed_hosts, compared to the address after "
     "sentinel.address_map. A primary outside them is never connected to "
     "(the resolution fails with EMQ_EPROTO naming this property); a "
     "Sentinel outside them is not learned. Empty: any host "
     "(docs/HA.md, Trust).",
     P_STRING, F(sentinel_allowed_hosts), 0, 0, check_host_patterns, NULL, NULL,
     "conn"},
    {"reconnect.backoff_min_ms", "100",
     "First delay between reconnect attempts, in milliseconds; doubles "
     "each attempt, with jitter.",
     P_INT, F(backoff_min_ms), 0, 3600000, NULL, NULL, NULL, "conn"},
    {"reconnect.backoff_max_ms", "5000",
     "Cap on the delay between reconnect attempts, in milliseconds.", P_INT,
     F(backoff_max_ms), 0, 3600000, NULL, NULL, NULL, "conn"},
    {"reconnect.max_attempts", "10",
     "Connect attempts made by one emq_conn_reconnect call.", P_INT,
     F(max_attempts), 1, 1000000, NULL, NULL, NULL, "conn"},
    {"pipeline.max", "65536",
     "Most appended commands whose replies are not read yet (a consumer's "
     "round of settlements needs a few besides its retries).",
     P_INT, F(pipeline_max), 16, (int64_t)1 << 24, NULL, NULL, NULL, "conn"},
    {"output.max_bytes", "268435456",
     "Cap on the buffer of encoded commands not yet sent, in bytes.", P_INT,
     F(output_max_bytes), 1024, (int64_t)1 << 40, NULL, NULL, NULL, "conn"},
    {"resp.max_bulk", "536870912",
     "Longest bulk string accepted in a reply, in bytes (the server's "
     "proto-max-bulk-len).",
     P_INT, F(resp_max_bulk), 1, (int64_t)1 << 40, NULL, NULL, NULL, "conn"},
    {"resp.max_depth", "16",
     "Deepest nesting of aggregates accepted in a reply.", P_INT,
     F(resp_max_depth), 1, 1024, NULL, NULL, NULL, "conn"},
    {"resp.max_elements", "16777216",
     "Most elements accepted in one aggregate of a reply (a map counts "
     "keys and values).",
     P_INT, F(resp_max_elements), 1, (int64_t)1 << 32, NULL, NULL, NULL,
     "conn"},
    {"resp.max_reply_bytes", "134217728",
     "Most memory one reply may take, attributes included: its bytes plus "
     "a 40-byte node per element once built. A reply that grows past it "
     "(an endless array, a storm of attributes, millions of tiny "
     "elements) breaks the connection with EMQ_EPROTO. One reply holds at "
     "most twice this (the receive buffer grows by doubling). A A "
     "consumer that meets such a reply halves its read, recovery and claim "
     "sizes for the run (down to 1 entry, one warning) and goes on; an "
     "entry larger than this by itself goes to the dead letters, whole, "
     "with the reason \"entry larger than resp.max_reply_bytes\" "
     "(docs/CONSUMER.md, Faults).",
     P_INT, F(resp_max_reply), 1, (int64_t)1 << 42, NULL, NULL, NULL, "conn"},
    {"cluster.seeds", "",
     "More Redis Cluster nodes to discover the cluster from, after url: "
     "host:port[,host:port...] with url's scheme, credentials and TLS "
     "settings (docs/CLUSTER.md). Empty: url only.",
     P_STRING, F(cluster_seeds), 0, 0, check_seeds, NULL, NULL, "cluster"},
    {"cluster.max_redirects", "16",
     "Most MOVED/ASK redirections followed for one command; past it the "
     "command fails alone with EMQ_ELIMIT naming this property.",
     P_INT, F(cluster_max_redirects), 1, 1000, NULL, NULL, NULL, "cluster"},
    {"cluster.retry_ms", "5000",
     "How long one command is retried, with backoff, while the cluster "
     "answers TRYAGAIN or CLUSTERDOWN, in milliseconds; past it the "
     "command fails alone with EMQ_ELIMIT (retriable) naming this "
     "property.",
     P_INT, F(cluster_retry_ms), 0, 3600000, NULL, NULL, NULL, "cluster"},
    {"cluster.allowed_hosts", "",
     "The only node addresses a cluster may send this client to, with its "
     "credentials: host patterns, comma-separated, '*' any run of "
     "characters, '?' one, compared without case to the address as the "
     "cluster names it (e.g. 10.0.*,*.cache.internal). A node outside "
     "them is never connected to; its command fails with EMQ_EPROTO "
     "naming this property. Empty: any host, as Redis Cluster works "
     "(docs/CLUSTER.md, Trust).",
     P_STRING, F(cluster_allowed_hosts), 0, 0, check_host_patterns, NULL, NULL,
     "cluster"},
    {"queue", "",
     "Queue name (letters, digits, . _ - :); its keys share the hashtag "
     "{name} (docs/KEYSPACE.md). Set queue or stream.",
     P_STRING, F(queue), 0, 0, check_name, NULL, NULL, "keys"},
    {"stream", "", "Raw stream key of an existing stream, instead of queue.",
     P_STRING, F(stream), 0, 0, NULL, NULL, NULL, "keys"},
    {"partitions", "1",
     "1: queue is one stream. P > 1: queue names a topic of P partitions, "
     "queues <queue>.0 .. <queue>.<P-1>, each its own stream and hashtag, "
     "spread over a Redis Cluster's nodes (docs/SCALING.md). Producers, "
     "consumers and admin handles of one topic must agree on P.",
     P_INT, F(partitions), 1, 1024, NULL, NULL, NULL, "keys"},
    {"group", "", "Consumer group name. Required for a consumer.", P_STRING,
     F(group), 0, 0, check_name, NULL, NULL, "consumer"},
    {"consumer", "",
     "Consumer name: required, stable across restarts, never a pid or a "
     "random value; also the connection name.",
     P_STRING, F(consumer), 0, 0, check_name, NULL, NULL, "consumer"},
    {"start", "",
     "Where a new group starts: new (entries added after it is created), "
     "head (the whole stream) or an entry ID. Required; no default.",
     P_STRING, F(start), 0, 0, NULL, NULL, NULL, "consumer"},
    {"count", "100", "Most entries one read returns (XREADGROUP COUNT).", P_INT,
     F(count), 1, 1000000, NULL, NULL, NULL, "consumer"},
    {"block_ms", "2000",
     "How long a read waits for new entries (XREADGROUP BLOCK); also the "
     "longest a stop waits for a blocked read.",
     P_INT, F(block_ms), 1, 600000, NULL, NULL, NULL, "consumer"},
    {"claim.min_idle_ms", "60000",
     "An entry pending this long with another consumer is taken over by "
     "the claim beat (XAUTOCLAIM min-idle-time). Entries in hand are "
     "refreshed every quarter of it, so it detects dead consumers, never "
     "slow ones.",
     P_INT, F(claim_min_idle_ms), 100, (int64_t)1 << 40, NULL, NULL, NULL,
     "consumer"},
    {"claim.interval_ms", "5000", "Time between claim beats.", P_INT,
     F(claim_interval_ms), 1, (int64_t)1 << 40, NULL, NULL, NULL, "consumer"},
    {"delayed.poll_ms", "100",
     "How often a consumer's upkeep moves the queue's due delayed entries "
     "to the stream (sooner when it knows the next is due sooner); 0: this "
     "consumer moves none (others of the queue must).",
     P_INT, F(delayed_poll_ms), 0, 3600000, NULL, NULL, NULL, "consumer"},
    {"dedup.ttl_ms", "86400000",
     "How long an idempotency key (emq_produce_opts.dedup_key, produce "
     "--dedup-key) keeps a second entry with the same key out, when the "
     "call does not say (dedup_ttl_ms 0).",
     P_INT, F(dedup_ttl_ms), 1, (int64_t)1 << 53, NULL, NULL, NULL, "producer"},
    {"rate.limit", "0",
     "Most entries the whole group (every consumer, in any process) is "
     "handed in any one-second window, new reads only; 0: no limit. "
     "Recorded in the server where the group has none (the server's "
     "value wins; docs/QUEUES.md).",
     P_INT, F(rate_limit), 0, 100000000, NULL, NULL, NULL, "consumer"},
    {"group.max_in_flight", "0",
     "Most entries the whole group holds in hand: delivered and not "
     "settled (its pending list), less a dead consumer's (lease gone) and "
     "retries waiting their backoff; new reads wait below it; 0: no limit. "
     "Recorded in the server like rate.limit.",
     P_INT, F(group_max_in_flight), 0, 100000000, NULL, NULL, NULL, "consumer"},
    {"claim.count", "100",
     "Most entries one XAUTOCLAIM call takes over (it examines up to 10x "
     "as many).",
     P_INT, F(claim_count), 1, 100000, NULL, NULL, NULL, "consumer"},
    {"max_deliveries", "5",
     "Deliveries after which a failing entry goes to the dead letters.", P_INT,
     F(max_deliveries), 1, 1000000, NULL, NULL, NULL, "consumer"},
    {"deliveries.exact", "0",
     "1: delivery counts are exact across any crash: every read marks the "
     "entries it delivers unseen in the same script, and each handout "
     "removes its entry's mark first (one round trip per handout, or per "
     "batch handler call), so no entry waits unmarked. 0: entries waiting "
     "to be handed out are marked after 50 ms (2 ms behind handlers that "
     "take 2 ms or more), and a process killed while one waits unmarked "
     "counts it once more than handlers had it (docs/CONSUMER.md, "
     "Delivery counts).",
     P_INT, F(deliveries_exact), 0, 1, NULL, NULL, NULL, "consumer"},
    {"deliveries.wait_replicas", "0",
     "With deliveries.exact 1: replicas that must have each handout's "
     "record (its entry's unseen mark removed, and the read before it) "
     "before the handler gets the entry (WAIT), so a failover cannot roll "
     "back a delivery a handler had and the count stays exact; short of "
     "them the removal is sent again and the handout waits, bounded by "
     "the lease. Settlements are followed by the same WAIT, and one that "
     "reaches fewer is logged (a failover then may hand its entry out "
     "again, counted). 0: not waited for.",
     P_INT, F(deliveries_wait_replicas), 0, 64, NULL, NULL, NULL, "consumer"},
    {"deliveries.wait_timeout_ms", "500",
     "How long each WAIT of deliveries.wait_replicas waits; below a third "
     "of claim.min_idle_ms (the upkeep's reply bound).",
     P_INT, F(deliveries_wait_timeout_ms), 1, (int64_t)1 << 31, NULL, NULL,
     NULL, "consumer"},
    {"max_in_flight", "1000",
     "Most entries a consumer has out at once through emq_consumer_poll or "
     "a batch handler: read and not yet handed out, or handed out and not "
     "settled. At the limit nothing more is read from the server until "
     "some are settled.",
     P_INT, F(max_in_flight), 1, 1000000, NULL, NULL, NULL, "consumer"},
    {"batch.max", "100",
     "Most entries one call of a batch handler (emq_consumer_new_batch) "
     "receives.",
     P_INT, F(batch_max), 1, 100000, NULL, NULL, NULL, "consumer"},
    {"handler.timeout_ms", "0",
     "Longest an entry stays in hand (a handler call, or from "
     "emq_consumer_poll to its settlement) while this consumer keeps it "
     "from peers; 0: no bound. Past it the entry is no longer refreshed "
     "(a peer may take it after claim.min_idle_ms), the event is logged "
     "once and counted (handler_overdue), and its settlement answers "
     "EMQ_ELOST instead of being sent.",
     P_INT, F(handler_timeout_ms), 0, (int64_t)1 << 40, NULL, NULL, NULL,
     "consumer"},
    {"lease.wait_replicas", "0",
     "Replicas that must have a consumer's lease before it hands out "
     "anything (WAIT after taking it), so a failover does not give a live "
     "name to a second process; short of them the session starts again "
     "with backoff. 0: not waited for.",
     P_INT, F(lease_wait_replicas), 0, 64, NULL, NULL, NULL, "consumer"},
    {"lease.wait_timeout_ms", "1000",
     "How long the WAIT of lease.wait_replicas waits.", P_INT,
     F(lease_wait_timeout_ms), 1, (int64_t)1 << 31, NULL, NULL, NULL,
     "consumer"},
    {"lease.ttl_ms", "30000",
     "Lifetime of the lease that keeps one consumer name in one process; "
     "renewed every third of it on a timer of its own; past it (less a "
     "tenth) a process that could not renew hands out and settles "
     "nothing. At least 3 x block_ms + 1000.",
     P_INT, F(lease_ttl_ms), 1000, (int64_t)1 << 40, NULL, NULL, NULL,
     "consumer"},
    {"retry.backoff_ms", "1000",
     "Delay before an entry the handler answered EMQ_RETRY is delivered "
     "again to the same consumer, doubling with each delivery (with "
     "jitter); 0: at once. Kept in the server, so it survives a restart.",
     P_INT, F(retry_backoff_ms), 0, (int64_t)1 << 40, NULL, NULL, NULL,
     "consumer"},
    {"retry.backoff_max_ms", "60000",
     "Longest retry delay. At least retry.backoff_ms.", P_INT,
     F(retry_backoff_max_ms), 0, (int64_t)1 << 40, NULL, NULL, NULL,
     "consumer"},
    {"on_group_lost", "recreate",
     "When the group or stream vanishes mid-run: recreate (open the door "
     "again at the declared start, with a warning) or fatal.",
     P_CHOICE, F(group_lost_fatal), 0, 0, NULL, group_lost_words,
     group_lost_values, "consumer"},
    {"producer.window", "256",
     "XADD commands a batch keeps in flight before reading their replies.",
     P_INT, F(producer_window), 1, 65536, NULL, NULL, NULL, "producer"},
    {"producer.nomkstream", "0",
     "1: add with XADD NOMKSTREAM, so a producer never creates its stream; "
     "an entry for a missing stream fails (EMQ_ESERVER) and nothing is "
     "created. 0: the first XADD creates the stream.",
     P_INT, F(producer_nomkstream), 0, 1, NULL, NULL, NULL, "producer"},
    {"producer.timeout_ms", "10000",
     "Bound of a whole produce call (waiting for the connection, sending, "
     "the reply and any WAIT), and of an asynchronous entry's wait for its "
     "outcome; past it the call fails with EMQ_ETIMEDOUT.",
     P_INT, F(producer_timeout_ms), 1, (int64_t)1 << 40, NULL, NULL, NULL,
     "producer"},
    {"producer.connect", "lazy",
     "lazy: emq_producer_new returns at once and connects in the "
     "background (a server that is down is not an error until a call "
     "needs it); eager: emq_producer_new connects and fails if it cannot.",
     P_CHOICE, F(producer_connect_eager), 0, 0, NULL, connect_words,
     connect_values, "producer"},
    {"producer.linger_ms", "1",
     "How long emq_produce_async lets an entry wait for others to share "
     "its round trip; 0: send at once.",
     P_INT, F(producer_linger_ms), 0, 60000, NULL, NULL, NULL, "producer"},
    {"producer.queue.max_messages", "100000",
     "Most asynchronous entries not yet reported (queued, in flight, or "
     "waiting for emq_producer_poll); past it emq_produce_async fails "
     "with EMQ_ELIMIT.",
     P_INT, F(producer_queue_max_messages), 1, (int64_t)1 << 30, NULL, NULL,
     NULL, "producer"},
    {"producer.queue.max_bytes", "67108864",
     "Most field bytes of those entries; past it EMQ_ELIMIT.", P_INT,
     F(producer_queue_max_bytes), 1024, (int64_t)1 << 40, NULL, NULL, NULL,
     "producer"},
    {"producer.delivery", "thread",
     "Where asynchronous delivery callbacks run: thread (a thread of the "
     "producer) or poll (inside emq_producer_poll and emq_producer_flush, "
     "on the caller's thread).",
     P_CHOICE, F(producer_delivery_poll), 0, 0, NULL, delivery_words,
     delivery_values, "producer"},
    {"producer.retries", "0",
     "Times an asynchronous entry whose outcome a transport failure left "
     "unknown is sent again; its report then says it may be duplicated. "
     "0: reported as unknown, never re-sent.",
     P_INT, F(producer_retries), 0, 1000, NULL, NULL, NULL, "producer"},
    {"producer.wait_replicas", "0",
     "Report an entry added only once this many replicas have it (WAIT "
     "after each round of XADDs); else EMQ_ENOTDURABLE with its ID. 0: do "
     "not wait.",
     P_INT, F(producer_wait_replicas), 0, 1000, NULL, NULL, NULL, "producer"},
    {"producer.wait_aof", "0",
     "1: report an entry added only once the master's AOF (and "
     "producer.wait_replicas replicas' AOF) has it (WAITAOF, Redis 7.2+, "
     "Valkey; refused on older servers).",
     P_INT, F(producer_wait_aof), 0, 1, NULL, NULL, NULL, "producer"},
    {"producer.wait_timeout_ms", "1000",
     "How long WAIT or WAITAOF waits for the replicas or the AOF.", P_INT,
     F(producer_wait_timeout_ms), 1, (int64_t)1 << 31, NULL, NULL, NULL,
     "producer"},
    {"stats.interval_ms", "0",
     "How often a consumer passes its statistics (JSON: counters, handler "
     "latency, delivery counts, lag, oldest pending age) to the callback "
     "of emq_conf_set_stats; 0: never.",
     P_INT, F(stats_interval_ms), 0, (int64_t)1 << 31, NULL, NULL, NULL,
     "consumer"},
    {"consumer.connect", "fail",
     "fail: a consumer whose server does not answer at its first connect "
     "fails at once; wait: it waits for the server with the reconnect "
     "backoff, like a later reconnect, until it answers or the consumer "
     "is stopped.",
     P_CHOICE, F(consumer_connect_wait), 0, 0, NULL, cwait_words, cwait_values,
     "consumer"},
    {"trim.maxlen", "",
     "Trim the stream on every XADD to this many entries (MAXLEN). Deletes "
     "entries whether or not a group processed them (docs/PRODUCER.md). "
     "Empty: no length trimming. Not with trim.minid.",
     P_OPTINT, F(trim_maxlen), 0, INT64_MAX, NULL, NULL, NULL, "producer"},
    {"trim.minid", "",
     "Trim the stream on every XADD to entries with IDs at or above this "
     "one (MINID, ms or ms-seq). Same warning as trim.maxlen. Empty: none. "
     "Not with trim.maxlen.",
     P_STRING, F(trim_minid), 0, 0, NULL, NULL, NULL, "producer"},
    {"trim.approx", "0",
     "1: trim with ~ (the server removes whole radix-tree nodes only, so "
     "more entries may stay; much cheaper). 0: trim exactly. Needs "
     "trim.maxlen or trim.minid.",
     P_INT, F(trim_approx), 0, 1, NULL, NULL, NULL, "producer"},
    {"trim.limit", "",
     "Most entries one XADD may trim (LIMIT; 0: no bound). Only with "
     "trim.approx 1. Empty: the server's default (100 x "
     "stream-node-max-entries).",
     P_OPTINT, F(trim_limit), 0, INT64_MAX, NULL, NULL, NULL, "producer"},
    {"log.level", "warning",
     "Most verbose level logged: error, warning, info or debug.", P_CHOICE,
     F(log_level), 0, 0, NULL, log_words, log_values, "all"},
};

#define NPROPS (sizeof props / sizeof props[0])

/* Returns the row named name, or NULL. */
static const prop *find_prop(const char *name) {
    for (size_t i = 0; i < NPROPS; i++)
        if (strcmp(props[i].name, name) == 0)
            return &props[i];
    return NULL;
}

static char **str_field(emq_conf_t *c, const prop *p) {
    return (char **)((char *)c + p->offset);
}

static int64_t *int_field(emq_conf_t *c, const prop *p) {
    return (int64_t *)((char *)c + p->offset);
}

/* Parses a strict decimal integer (optional '-', digits, nothing else).
 * Returns 1 and sets *out, or 0 when the text is not such a number or does
 * not fit in int64_t. */
static int parse_int64(const char *s, int64_t *out) {
    if (*s == '\0' || (*s != '-' && (*s < '0' || *s > '9')))
        return 0;
    if (*s == '-' && (s[1] < '0' || s[1] > '9'))
        return 0;
    errno = 0;
    char *end = NULL;
    long long v = strtoll(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0')
        return 0;
    *out = (int64_t)v;
    return 1;
}

static emq_status check_url(const prop *p, const char *value, emq_error *err) {
    emq__url u;
    emq_status st = emq__url_parse(value, &u, err);
    if (st == EMQ_OK)
        emq__url_free(&u);
    else if (st == EMQ_EINVAL)
        emq__error_prefix(err, "invalid %s", p->name);
    return st;
}

/* Names (user, client_name, SNI) are printable ASCII without spaces: the
 * server refuses spaces in CLIENT SETNAME, and a control character in a
 * name is always a mistake. */
static emq_status check_name(const prop *p, const char *value, emq_error *err) {
    for (const char *s = value; *s; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch <= 0x20 || ch >= 0x7f) {
            char shown[64];
            emq__printable(shown, sizeof shown, value, strlen(value));
            return emq__error_set(err, EMQ_EINVAL, 0,
                                  "invalid %s '%s': use printable characters "
                                  "without spaces",
                                  p->name, shown);
        }
    }
    return EMQ_OK;
}

/* File paths: anything but control characters. Existence is checked when
 * connecting, where the error can say what OpenSSL thought of the file. */
static emq_status check_path(const prop *p, const char *value, emq_error *err) {
    for (const char *s = value; *s; s++) {
        if ((unsigned char)*s < 0x20 || *s == 0x7f) {
            char shown[128];
            emq__printable(shown, sizeof shown, value, strlen(value));
            return emq__error_set(err, EMQ_EINVAL, 0,
                                  "invalid %s '%s': control character in "
                                  "path",
                                  p->name, shown);
        }
    }
    return EMQ_OK;
}

/* cluster.seeds: a comma-separated list of host[:port] (each parsed like
 * a URL's host part; empty entries are refused). */
static emq_status check_seeds(const prop *p, const char *value,
                              emq_error *err) {
    const char *s = value;
    while (*s) {
        const char *comma = strchr(s, ',');
        size_t n = comma ? (size_t)(comma - s) : strlen(s);
        emq__url u;
        emq_status st = n == 0
                            ? emq__error_set(err, EMQ_EINVAL, 0, "empty entry")
                            : emq__hostport_parse(s, n, &u, err);
        if (st != EMQ_OK) {
            if (st == EMQ_EINVAL)
                emq__error_prefix(err, "invalid %s (host:port,...)", p->name);
            return st;
        }
        emq__url_free(&u);
        if (comma == NULL)
            break;
        s = comma + 1;
        if (*s == '\0')
            return emq__error_set(err, EMQ_EINVAL, 0,
                                  "invalid %s (host:port,...): empty entry",
                                  p->name);
    }
    return EMQ_OK;
}

/* cluster.allowed_hosts: comma-separated host patterns, each made of the
 * characters of an address (emq__host_valid's) and '*' or '?'. */
static emq_status check_host_patterns(const prop *p, const char *value,
                                      emq_error *err) {
    static const char chars[] = "abcdefghijklmnopqrstuvwxyz"
                                "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                "0123456789-._:%*?";
    for (const char *s = value; *value;) {
        size_t n = strcspn(s, ",");
        if (n == 0 || n > EMQ_HOST_MAX)
            return emq__error_set(err, EMQ_EINVAL, 0,
                                  "invalid %s: an entry is empty or longer "
                                  "than %d bytes",
                                  p->name, EMQ_HOST_MAX);
        if (strspn(s, chars) < n) {
            char shown[80];
            emq__printable(shown, sizeof shown, s, n);
            return emq__error_set(err, EMQ_EINVAL, 0,
                                  "invalid %s: '%s' is not a host pattern "
                                  "(a host name or address, '*' and '?')",
                                  p->name, shown);
        }
        if (s[n] == '\0')
            return EMQ_OK;
        s += n + 1;
    }
    return EMQ_OK; /* empty: any host */
}

/* sentinel.address_map: FROM=TO pairs of host:port, comma-separated;
 * the mapping itself is emq__sentinel_map's. */
static emq_status check_address_map(const prop *p, const char *value,
                                    emq_error *err) {
    char host[8] = "";
    int port = 1;
    emq_status st = emq__sentinel_map(value, host, sizeof host, &port, err);
    if (st == EMQ_EINVAL)
        emq__error_prefix(err,
                          "invalid %s (FROM=TO[,FROM=TO...], each "
                          "host:port)",
                          p->name);
    return st;
}

/* "a, b or c" for the words of a P_CHOICE property. Static storage. */
static const char *choice_list(const prop *p) {
    static _Thread_local char list[128];
    size_t n = 0, count = 0;
    while (p->choices[count])
        count++;
    list[0] = '\0';
    for (size_t i = 0; i < count; i++) {
        const char *sep = i == 0 ? "" : i + 1 == count ? " or " : ", ";
        n += (size_t)snprintf(list + n, n < sizeof list ? sizeof list - n : 0,
                              "%s%s", sep, p->choices[i]);
    }
    return list;
}

/* Validates value for p and stores it in c. Returns EMQ_OK, EMQ_ENOMEM,
 * or EMQ_EINVAL naming the property and the value (never a password's).
 * On failure c is unchanged. */
static emq_status set_prop(emq_conf_t *c, const prop *p, const char *value,
                           emq_error *err) {
    char shown[96];
    switch (p->type) {
    case P_STRING:
    case P_SECRET: {
        if (p->check) {
            emq_status st = p->check(p, value, err);
            if (st != EMQ_OK)
                return st;
        }
        char *copy = NULL;
        if (*value || p->offset == offsetof(struct emq_conf, url)) {
            copy = emq__strdup(value);
            if (copy == NULL)
                return emq__error_set(err, EMQ_ENOMEM, 0,
                                      "out of memory setting %s", p->name);
        }
        char **field = str_field(c, p);
        /* Every string is wiped, not only the password: a URL may hold
         * one too. */
        if (*field)
            emq__wipe(*field, strlen(*field));
        emq__free(*field);
        *field = copy;
        return EMQ_OK;
    }
    case P_OPTINT:
        if (*value == '\0') {
            *int_field(c, p) = -1;
            return EMQ_OK;
        }
        /* fall through */
    case P_INT: {
        int64_t v;
        emq__printable(shown, sizeof shown, value, strlen(value));
        if (!parse_int64(value, &v))
            return emq__error_set(err, EMQ_EINVAL, 0,
                                  "invalid %s '%s': not a decimal integer",
                                  p->name, shown);
        if (v < p->min || v > p->max)
            return emq__error_set(err, EMQ_EINVAL, 0,
                                  "invalid %s '%s': out of range %" PRId64
                                  "-%" PRId64,
                                  p->name, shown, p->min, p->max);
        *int_field(c, p) = v;
        return EMQ_OK;
    }
    case P_CHOICE:
        for (size_t i = 0; p->choices[i]; i++)
            if (strcmp(value, p->choices[i]) == 0) {
                *int_field(c, p) = p->values[i];
                return EMQ_OK;
            }
        return emq__error_set(
            err, EMQ_EINVAL, 0, "invalid %s '%s': use %s", p->name,
            emq__printable(shown, sizeof shown, value, strlen(value)),
            choice_list(p));
    case P_VERIFY:
        if (strcmp(value, "peer") == 0)
            *int_field(c, p) = EMQ_TLS_VERIFY_PEER;
        else if (strcmp(value, "none") == 0)
            *int_field(c, p) = EMQ_TLS_VERIFY_NONE;
        else
            return emq__error_set(
                err, EMQ_EINVAL, 0, "invalid %s '%s': use peer or none",
                p->name,
                emq__printable(shown, sizeof shown, value, strlen(value)));
        return EMQ_OK;
    }
    return emq__error_set(err, EMQ_EINVAL, 0, "invalid property type");
}

/* Frees every string of c (wiping the password) and leaves them NULL. */
static void free_fields(emq_conf_t *c) {
    for (size_t i = 0; i < NPROPS; i++) {
        if (props[i].type != P_STRING && props[i].type != P_SECRET)
            continue;
        char **field = str_field(c, &props[i]);
        if (*field) /* a URL may hold a password too */
            emq__wipe(*field, strlen(*field));
        emq__free(*field);
        *field = NULL;
    }
}

emq_conf_t *emq_conf_new(void) {
    emq_conf_t *c = emq__calloc(1, sizeof *c);
    if (c == NULL)
        return NULL;
    for (size_t i = 0; i < NPROPS; i++) {
        if (set_prop(c, &props[i], props[i].def, NULL) != EMQ_OK) {
            emq_conf_destroy(c);
            return NULL;
        }
    }
    /* "peer" is the default, but "not set" lets the URL's tls.verify win. */
    c->tls_verify = EMQ_TLS_VERIFY_DEFAULT;
    return c;
}

emq_conf_t *emq_conf_dup(const emq_conf_t *conf) {
    if (conf == NULL)
        return NULL;
    emq_conf_t *c = emq__alloc(sizeof *c);
    if (c == NULL)
        return NULL;
    *c = *conf;
    int failed = 0;
    for (size_t i = 0; i < NPROPS; i++) {
        if (props[i].type != P_STRING && props[i].type != P_SECRET)
            continue;
        char **field = str_field(c, &props[i]);
        if (*field == NULL)
            continue;
        *field = failed ? NULL : emq__strdup(*field);
        if (*field == NULL)
            failed = 1;
    }
    if (failed) {
        emq_conf_destroy(c);
        return NULL;
    }
    return c;
}

void emq_conf_destroy(emq_conf_t *conf) {
    if (conf == NULL)
        return;
    free_fields(conf);
    emq__wipe(conf, sizeof *conf);
    emq__free(conf);
}

/* Returns EMQ_EINVAL naming an unknown property. */
static emq_status unknown(const char *name, emq_error *err) {
    char shown[64];
    emq__printable(shown, sizeof shown, name ? name : "",
                   name ? strlen(name) : 0);
    return emq__error_set(err, EMQ_EINVAL, 0,
                          "unknown configuration property '%s'", shown);
}

emq_status emq_conf_set(emq_conf_t *conf, const char *name, const char *value,
                        emq_error *err) {
    if (conf == NULL || name == NULL)
        return emq__error_set(err, EMQ_EINVAL, 0,
                              "emq_conf_set: conf and name must not be NULL");
    const prop *p = find_prop(name);
    if (p == NULL)
        return unknown(name, err);
    if (value == NULL)
        value = p->def;
    emq_status st = set_prop(conf, p, value, err);
    if (st == EMQ_OK)
        emq__error_clear(err);
    return st;
}

emq_status emq_conf_get(const emq_conf_t *conf, const char *name, char *buf,
                        size_t size, emq_error *err) {
    if (conf == NULL || name == NULL || buf == NULL || size == 0)
        return emq__error_set(err, EMQ_EINVAL, 0,
                              "emq_conf_get: conf, name and buf must not be "
                              "NULL or empty");
    const prop *p = find_prop(name);
    if (p == NULL)
        return unknown(name, err);
    emq_conf_t *c = (emq_conf_t *)conf; /* read only below */
    switch (p->type) {
    case P_STRING: {
        const char *s = *str_field(c, p);
        if (p->offset == offsetof(struct emq_conf, url) && s)
            emq_url_redact(s, buf, size); /* never read a password back */
        else
            snprintf(buf, size, "%s", s ? s : "");
        break;
    }
    case P_SECRET:
        snprintf(buf, size, "%s", *str_field(c, p) ? "(set)" : "");
        break;
    case P_OPTINT:
        if (*int_field(c, p) < 0) {
            buf[0] = '\0';
            break;
        }
        /* fall through */
    case P_INT:
        snprintf(buf, size, "%" PRId64, *int_field(c, p));
        break;
    case P_VERIFY:
        snprintf(buf, size, "%s",
                 *int_field(c, p) == EMQ_TLS_VERIFY_NONE ? "none" : "peer");
        break;
    case P_CHOICE:
        for (size_t i = 0; p->choices[i]; i++)
            if (p->values[i] == *int_field(c, p))
                snprintf(buf, size, "%s", p->choices[i]);
        break;
    }
    emq__error_clear(err);
    return EMQ_OK;
}

const char *emq_conf_property_readers(size_t i) {
    return i < NPROPS ? props[i].readers : NULL;
}

emq_status emq_conf_property_range(size_t i, int64_t *min, int64_t *max) {
    if (i >= NPROPS || (props[i].type != P_INT && props[i].type != P_OPTINT))
        return EMQ_EINVAL;
    if (min)
        *min = props[i].min;
    if (max)
        *max = props[i].max;
    return EMQ_OK;
}

emq_status emq_conf_property(size_t i, const char **name,
                             const char **default_value, const char **doc) {
    if (i >= NPROPS)
        return EMQ_EINVAL;
    if (name)
        *name = props[i].name;
    if (default_value)
        *default_value = props[i].def;
    if (doc)
        *doc = props[i].doc;
    return EMQ_OK;
}

void emq_conf_set_stats(emq_conf_t *conf, emq_stats_fn fn, void *opaque) {
    if (conf) {
        conf->stats_fn = fn;
        conf->stats_opaque = opaque;
    }
}

void emq_conf_set_log(emq_conf_t *conf, emq_log_fn fn, void *opaque) {
    if (conf) {
        conf->log_fn = fn;
        conf->log_opaque = opaque;
    }
}

void emq__log_sink_of(const emq_conf_t *conf, emq__log_sink *out) {
    out->fn = conf->log_fn;
    out->opaque = conf->log_opaque;
    out->level = conf->log_level;
}

static void log_line(const emq__log_sink *sink, emq_log_level level,
                     const char *fmt, va_list ap) EMQ_PRINTF(3, 0);

void emq__log_to(const emq__log_sink *sink, emq_log_level level,
                 const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    log_line(sink, level, fmt, ap);
    va_end(ap);
}

emq_status emq__conf_warn_unverified(const emq_conf_t *conf, const char *handle,
                                     emq_error *err) {
    emq__url u;
    emq_status st = emq__url_parse(emq__cfg_url(conf), &u, err);
    if (st == EMQ_ENOMEM)
        return st;
    if (st != EMQ_OK) { /* a handle was made with it: not seen */
        emq__error_clear(err);
        return EMQ_OK;
    }
    int none = !emq__url_tls_verifies(&u, emq__cfg_tls_verify(conf));
    int tls = u.scheme == EMQ_URL_TLS;
    emq__url_free(&u);
    if (tls && none)
        emq__conf_log(conf, EMQ_LOG_WARNING,
                      "%s: tls.verify is none: the server's certificate is "
                      "not checked, so whoever sits between here and the "
                      "server can read and change the traffic, the password "
                      "included (for tests only)",
                      handle);
    return EMQ_OK;
}

void emq__conf_log(const emq_conf_t *conf, emq_log_level level, const char *fmt,
                   ...) {
    emq__log_sink sink;
    if (conf)
        emq__log_sink_of(conf, &sink);
    va_list ap;
    va_start(ap, fmt);
    log_line(conf ? &sink : NULL, level, fmt, ap);
    va_end(ap);
}

static void log_line(const emq__log_sink *sink, emq_log_level level,
                     const char *fmt, va_list ap) {
    if (sink && (int64_t)level > sink->level)
        return;
    char message[768];
    vsnprintf(message, sizeof message, fmt, ap);
    /* A name or a server's text in it never drives a terminal. */
    emq__hide_controls(message);
    if (sink && sink->fn) {
        sink->fn(sink->opaque, level, message);
        return;
    }
    const char *name = level <= EMQ_LOG_ERROR     ? "error"
                       : level == EMQ_LOG_WARNING ? "warning"
                       : level == EMQ_LOG_INFO    ? "info"
                                                  : "debug";
    fprintf(stderr, "echomq: %s: %s\n", name, message);
}
