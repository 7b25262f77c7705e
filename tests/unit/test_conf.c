/* SPDX-License-Identifier: BSD-3-Clause */
/* test_conf.c: the configuration object and its property table.
 *
 * Checks that every default reads back as the table says, that numbers are
 * parsed strictly and range checked with errors naming property and value,
 * that the password is never echoed, that a failed set changes nothing,
 * and that new/dup free everything on every allocation failure.
 */
#include "base/base.h"
#include "cluster/cluster.h"
#include "conn/conf.h"
#include "harness/test.h"
#include "resp/resp.h"

#include <stdlib.h>

#define PW "Zq9SecretPw"

TEST(conf_defaults_read_back_as_the_table_says) {
    emq_conf_t *c = emq_conf_new();
    ASSERT(c != NULL);
    const char *name, *def, *doc;
    size_t n = 0;
    char buf[256];
    emq_error err;
    for (; emq_conf_property(n, &name, &def, &doc) == EMQ_OK; n++) {
        ASSERT(name && def && doc && doc[0]);
        ASSERT_OK(emq_conf_get(c, name, buf, sizeof buf, &err), &err);
        ASSERT_EQ_STR(buf, def);
        for (size_t j = 0; j < n; j++) {
            const char *other;
            emq_conf_property(j, &other, NULL, NULL);
            if (strcmp(other, name) == 0)
                FAIL("property %s listed twice", name);
        }
    }
    ASSERT_EQ_SIZE(n, 81); /* 37 + tls.key_password, sentinel.master, .user,
                             .password,
                             .tls, .address_map,
                             lease.wait_replicas, .wait_timeout_ms,
                             producer.nomkstream, trim.*, cluster.*,
                             partitions, retry.*, max_in_flight, batch.max,
                             resp.max_reply_bytes, producer.timeout_ms,
                             .connect, .linger_ms, .queue.max_messages,
                             .queue.max_bytes, .delivery, .retries,
                             .wait_replicas, .wait_aof, .wait_timeout_ms,
                             consumer.connect, stats.interval_ms,
                             handler.timeout_ms, cluster.allowed_hosts,
                             delayed.poll_ms, dedup.ttl_ms, rate.limit,
                             group.max_in_flight, deliveries.exact,
                             .wait_replicas, .wait_timeout_ms,
                             sentinel.allowed_hosts */
    ASSERT_STATUS(emq_conf_property(n, &name, &def, &doc), EMQ_EINVAL, NULL);
    /* A few defaults spelled out, and the typed fields behind them. */
    ASSERT_EQ_STR(emq__cfg_url(c), "redis://127.0.0.1:6379");
    ASSERT_EQ_INT(emq__cfg_connect_timeout_ms(c), 5000);
    ASSERT_EQ_INT(emq__cfg_max_in_flight(c), 1000);
    ASSERT_EQ_INT(emq__cfg_batch_max(c), 100);
    ASSERT_EQ_INT(emq__cfg_handler_timeout_ms(c), 0);
    ASSERT_EQ_INT(emq__cfg_command_timeout_ms(c), 5000);
    ASSERT_EQ_INT(emq__cfg_tcp_keepalive_s(c), 30);
    ASSERT_EQ_INT(emq__cfg_backoff_min_ms(c), 100);
    ASSERT_EQ_INT(emq__cfg_backoff_max_ms(c), 5000);
    ASSERT_EQ_INT(emq__cfg_max_attempts(c), 10);
    ASSERT_EQ_INT(emq__cfg_pipeline_max(c), 65536);
    ASSERT_EQ_INT(emq__cfg_output_max_bytes(c), 256 * 1024 * 1024);
    ASSERT_EQ_INT(emq__cfg_protocol(c), 2);
    ASSERT_EQ_INT(emq__cfg_db(c), -1);
    ASSERT_EQ_INT(emq__cfg_tls_verify(c), EMQ_TLS_VERIFY_DEFAULT);
    ASSERT(emq__cfg_user(c) == NULL && emq__cfg_password(c) == NULL &&
           emq__cfg_client_name(c) == NULL);
    emq_conf_destroy(c);
}

TEST(conf_resp_defaults_match_the_reader) {
    emq_conf_t *c = emq_conf_new();
    ASSERT(c != NULL);
    emq__resp_limits l;
    emq__resp_limits_default(&l);
    ASSERT_EQ_SIZE((size_t)emq__cfg_resp_max_bulk(c), l.max_bulk);
    ASSERT_EQ_SIZE((size_t)emq__cfg_resp_max_depth(c), l.max_depth);
    ASSERT_EQ_SIZE((size_t)emq__cfg_resp_max_elements(c), l.max_elements);
    ASSERT_EQ_SIZE((size_t)emq__cfg_resp_max_reply(c), l.max_reply);
    ASSERT_EQ_SIZE((size_t)emq__cfg_resp_max_bulk(c),
                   EMQ_RESP_DEFAULT_MAX_BULK);
    emq_conf_destroy(c);
}

TEST(conf_numbers_are_strict_and_range_checked) {
    emq_conf_t *c = emq_conf_new();
    ASSERT(c != NULL);
    emq_error err;
    char buf[64];
    ASSERT_OK(emq_conf_set(c, "connect_timeout_ms", "250", &err), &err);
    ASSERT_EQ_INT(emq__cfg_connect_timeout_ms(c), 250);
    ASSERT_OK(emq_conf_get(c, "connect_timeout_ms", buf, sizeof buf, &err),
              &err);
    ASSERT_EQ_STR(buf, "250");

    static const char *const junk[] = {"100ms", " 100", "100 ", "+100", "",
                                       "1e3",   "0x10", "-",    "12.5"};
    for (size_t i = 0; i < sizeof junk / sizeof junk[0]; i++) {
        ASSERT_STATUS(emq_conf_set(c, "connect_timeout_ms", junk[i], &err),
                      EMQ_EINVAL, &err);
        ASSERT_CONTAINS(err.message, "connect_timeout_ms");
        ASSERT_CONTAINS(err.message, "not a decimal integer");
        ASSERT_EQ_INT(emq__cfg_connect_timeout_ms(c), 250); /* unchanged */
    }
    ASSERT_STATUS(emq_conf_set(c, "connect_timeout_ms", "100ms", &err),
                  EMQ_EINVAL, &err);
    ASSERT_EQ_STR(err.message,
                  "invalid connect_timeout_ms '100ms': not a decimal integer");

    ASSERT_STATUS(emq_conf_set(c, "connect_timeout_ms", "0", &err), EMQ_EINVAL,
                  &err);
    ASSERT_EQ_STR(err.message,
                  "invalid connect_timeout_ms '0': out of range 1-3600000");
    ASSERT_STATUS(emq_conf_set(c, "protocol", "4", &err), EMQ_EINVAL, &err);
    ASSERT_CONTAINS(err.message, "protocol '4': out of range 2-3");
    ASSERT_STATUS(emq_conf_set(c, "tcp_keepalive_s", "-1", &err), EMQ_EINVAL,
                  &err);
    ASSERT_STATUS(
        emq_conf_set(c, "pipeline.max", "99999999999999999999999", &err),
        EMQ_EINVAL, &err);
    ASSERT_CONTAINS(err.message, "pipeline.max");
    ASSERT_EQ_INT(emq__cfg_pipeline_max(c), 65536);
    /* The floor leaves a consumer's round room for its fixed commands. */
    ASSERT_STATUS(emq_conf_set(c, "pipeline.max", "15", &err), EMQ_EINVAL,
                  &err);
    ASSERT_CONTAINS(err.message, "out of range 16-");

    ASSERT_OK(emq_conf_set(c, "command_timeout_ms", "0", &err), &err);
    ASSERT_EQ_INT(emq__cfg_command_timeout_ms(c), 0);
    ASSERT_OK(emq_conf_set(c, "tcp_keepalive_s", "0", &err), &err);
    ASSERT_OK(emq_conf_set(c, "protocol", "3", &err), &err);
    ASSERT_EQ_INT(emq__cfg_protocol(c), 3);
    /* NULL restores the default. */
    ASSERT_OK(emq_conf_set(c, "protocol", NULL, &err), &err);
    ASSERT_EQ_INT(emq__cfg_protocol(c), 2);
    emq_conf_destroy(c);
}

/* Each property's bounds live in the property table: emq_conf_set refuses
 * a value outside them, naming the property and the bounds, and
 * emq_conf_property_range reports the same numbers to the documentation. */
TEST(conf_claim_min_idle_floor_is_the_tables) {
    emq_conf_t *c = emq_conf_new();
    ASSERT(c != NULL);
    emq_error err;
    ASSERT_STATUS(emq_conf_set(c, "claim.min_idle_ms", "50", &err), EMQ_EINVAL,
                  &err);
    ASSERT_EQ_STR(err.message, "invalid claim.min_idle_ms '50': out of range "
                               "100-1099511627776");
    ASSERT_EQ_INT(emq__cfg_claim_min_idle_ms(c), 60000);
    ASSERT_OK(emq_conf_set(c, "claim.min_idle_ms", "100", &err), &err);
    ASSERT_EQ_INT(emq__cfg_claim_min_idle_ms(c), 100);
    emq_conf_destroy(c);

    /* The range the documentation prints is the one enforced. */
    size_t found = 0;
    for (size_t i = 0;; i++) {
        const char *name = NULL;
        if (emq_conf_property(i, &name, NULL, NULL) != EMQ_OK) {
            ASSERT_STATUS(emq_conf_property_range(i, NULL, NULL), EMQ_EINVAL,
                          NULL);
            break;
        }
        int64_t min = 0, max = 0;
        if (strcmp(name, "claim.min_idle_ms") == 0) {
            ASSERT_OK(emq_conf_property_range(i, &min, &max), NULL);
            ASSERT_EQ_INT(min, 100);
            ASSERT_EQ_INT(max, (int64_t)1 << 40);
            found++;
        }
        if (strcmp(name, "queue") == 0) {
            ASSERT_STATUS(emq_conf_property_range(i, &min, &max), EMQ_EINVAL,
                          NULL);
            found++;
        }
    }
    ASSERT_EQ_SIZE(found, 2);
}

TEST(conf_db_is_optional) {
    emq_conf_t *c = emq_conf_new();
    ASSERT(c != NULL);
    emq_error err;
    char buf[16];
    ASSERT_OK(emq_conf_set(c, "db", "7", &err), &err);
    ASSERT_EQ_INT(emq__cfg_db(c), 7);
    ASSERT_OK(emq_conf_get(c, "db", buf, sizeof buf, &err), &err);
    ASSERT_EQ_STR(buf, "7");
    ASSERT_STATUS(emq_conf_set(c, "db", "x", &err), EMQ_EINVAL, &err);
    ASSERT_EQ_STR(err.message, "invalid db 'x': not a decimal integer");
    ASSERT_STATUS(emq_conf_set(c, "db", "-2", &err), EMQ_EINVAL, &err);
    ASSERT_OK(emq_conf_set(c, "db", "", &err), &err);
    ASSERT_EQ_INT(emq__cfg_db(c), -1);
    ASSERT_OK(emq_conf_get(c, "db", buf, sizeof buf, &err), &err);
    ASSERT_EQ_STR(buf, "");
    emq_conf_destroy(c);
}

TEST(conf_password_is_never_echoed) {
    emq_conf_t *c = emq_conf_new();
    ASSERT(c != NULL);
    emq_error err;
    char buf[64];
    ASSERT_OK(emq_conf_set(c, "password", PW, &err), &err);
    ASSERT_EQ_STR(emq__cfg_password(c), PW);
    ASSERT_OK(emq_conf_get(c, "password", buf, sizeof buf, &err), &err);
    ASSERT_EQ_STR(buf, "(set)");
    ASSERT_OK(emq_conf_set(c, "password", "", &err), &err);
    ASSERT(emq__cfg_password(c) == NULL);
    ASSERT_OK(emq_conf_get(c, "password", buf, sizeof buf, &err), &err);
    ASSERT_EQ_STR(buf, "");
    /* A bad URL with a password is refused without quoting it. */
    ASSERT_STATUS(emq_conf_set(c, "url", "redis://u:" PW "@h:99999", &err),
                  EMQ_EINVAL, &err);
    ASSERT_EQ_STR(err.message,
                  "invalid url: port '99999' is out of range 1-65535");
    ASSERT_NOT_CONTAINS(err.message, PW);
    ASSERT_STATUS(emq_conf_set(c, "url", "ftp://u:" PW "@h", &err), EMQ_EINVAL,
                  &err);
    ASSERT_CONTAINS(err.message, "unsupported scheme 'ftp'");
    ASSERT_NOT_CONTAINS(err.message, PW);
    /* The URL (which may hold a password) reads back as set. */
    ASSERT_OK(emq_conf_set(c, "url", "unix:///tmp/r.sock?db=2", &err), &err);
    ASSERT_OK(emq_conf_get(c, "url", buf, sizeof buf, &err), &err);
    ASSERT_EQ_STR(buf, "unix:///tmp/r.sock?db=2");
    emq_conf_destroy(c);
}

TEST(conf_strings_and_enums) {
    emq_conf_t *c = emq_conf_new();
    ASSERT(c != NULL);
    emq_error err;
    char buf[64];
    ASSERT_OK(emq_conf_set(c, "client_name", "worker-1", &err), &err);
    ASSERT_EQ_STR(emq__cfg_client_name(c), "worker-1");
    ASSERT_STATUS(emq_conf_set(c, "client_name", "two words", &err), EMQ_EINVAL,
                  &err);
    ASSERT_EQ_STR(err.message, "invalid client_name 'two words': use "
                               "printable characters without spaces");
    ASSERT_STATUS(emq_conf_set(c, "client_name", "a\nb", &err), EMQ_EINVAL,
                  &err);
    ASSERT_CONTAINS(err.message, "'a?b'");
    ASSERT_EQ_STR(emq__cfg_client_name(c), "worker-1");
    ASSERT_OK(emq_conf_set(c, "client_name", "", &err), &err);
    ASSERT(emq__cfg_client_name(c) == NULL);

    ASSERT_OK(emq_conf_set(c, "tls.verify", "none", &err), &err);
    ASSERT_EQ_INT(emq__cfg_tls_verify(c), EMQ_TLS_VERIFY_NONE);
    ASSERT_OK(emq_conf_get(c, "tls.verify", buf, sizeof buf, &err), &err);
    ASSERT_EQ_STR(buf, "none");
    ASSERT_STATUS(emq_conf_set(c, "tls.verify", "yes", &err), EMQ_EINVAL, &err);
    ASSERT_EQ_STR(err.message, "invalid tls.verify 'yes': use peer or none");
    ASSERT_OK(emq_conf_set(c, "tls.verify", "peer", &err), &err);
    ASSERT_EQ_INT(emq__cfg_tls_verify(c), EMQ_TLS_VERIFY_PEER);
    ASSERT_OK(emq_conf_set(c, "tls.ca_file", "/etc/ssl/ca.pem", &err), &err);
    ASSERT_OK(emq_conf_get(c, "tls.ca_file", buf, sizeof buf, &err), &err);
    ASSERT_EQ_STR(buf, "/etc/ssl/ca.pem");
    /* Truncated reads stay NUL-terminated. */
    ASSERT_OK(emq_conf_get(c, "tls.ca_file", buf, 5, &err), &err);
    ASSERT_EQ_STR(buf, "/etc");
    emq_conf_destroy(c);
}

TEST(conf_unknown_property) {
    emq_conf_t *c = emq_conf_new();
    ASSERT(c != NULL);
    emq_error err;
    char buf[8];
    ASSERT_STATUS(emq_conf_set(c, "x", "1", &err), EMQ_EINVAL, &err);
    ASSERT_EQ_STR(err.message, "unknown configuration property 'x'");
    ASSERT_STATUS(emq_conf_get(c, "tls.nope", buf, sizeof buf, &err),
                  EMQ_EINVAL, &err);
    ASSERT_EQ_STR(err.message, "unknown configuration property 'tls.nope'");
    ASSERT_STATUS(emq_conf_get(c, "db", buf, 0, &err), EMQ_EINVAL, &err);
    emq_conf_destroy(c);
}

TEST(conf_dup_is_deep) {
    emq_conf_t *c = emq_conf_new();
    ASSERT(c != NULL);
    emq_error err;
    ASSERT_OK(emq_conf_set(c, "password", PW, &err), &err);
    ASSERT_OK(emq_conf_set(c, "client_name", "n1", &err), &err);
    ASSERT_OK(emq_conf_set(c, "db", "3", &err), &err);
    emq_conf_t *d = emq_conf_dup(c);
    ASSERT(d != NULL);
    ASSERT(emq__cfg_password(d) != emq__cfg_password(c));
    ASSERT_OK(emq_conf_set(c, "client_name", "n2", &err), &err);
    emq_conf_destroy(c);
    ASSERT_EQ_STR(emq__cfg_password(d), PW);
    ASSERT_EQ_STR(emq__cfg_client_name(d), "n1");
    ASSERT_EQ_INT(emq__cfg_db(d), 3);
    emq_conf_destroy(d);
    emq_conf_destroy(NULL);
    ASSERT(emq_conf_dup(NULL) == NULL);
}

TEST(conf_new_and_dup_survive_every_allocation_failure) {
    int done = 0;
    for (uint64_t n = 1; n < 200 && !done; n++) {
        emq__alloc_fail_at(n);
        emq_conf_t *c = emq_conf_new();
        emq__alloc_fail_at(0);
        if (c == NULL)
            continue;
        emq_conf_set(c, "password", PW, NULL);
        emq_conf_set(c, "tls.sni", "s", NULL);
        emq__alloc_fail_at(1);
        emq_conf_t *d = emq_conf_dup(c);
        emq__alloc_fail_at(0);
        ASSERT(d == NULL);
        emq__alloc_fail_at(3);
        d = emq_conf_dup(c);
        emq__alloc_fail_at(0);
        ASSERT(d == NULL);
        d = emq_conf_dup(c);
        ASSERT(d != NULL);
        ASSERT_EQ_STR(emq__cfg_tls_sni(d), "s");
        emq_conf_destroy(d);
        emq_conf_destroy(c);
        done = 1;
    }
    ASSERT(done);
}

TEST(conf_set_out_of_memory_leaves_value) {
    emq_conf_t *c = emq_conf_new();
    ASSERT(c != NULL);
    emq_error err;
    ASSERT_OK(emq_conf_set(c, "user", "alice", &err), &err);
    emq__alloc_fail_at(1);
    emq_status st = emq_conf_set(c, "user", "bob", &err);
    emq__alloc_fail_at(0);
    ASSERT_STATUS(st, EMQ_ENOMEM, &err);
    ASSERT_EQ_STR(emq__cfg_user(c), "alice");
    emq_conf_destroy(c);
}

TEST(conf_choice_properties) {
    emq_conf_t *c = emq_conf_new();
    emq_error err;
    char buf[64];
    ASSERT_EQ_INT(emq__cfg_group_lost_fatal(c), 0);
    ASSERT_OK(emq_conf_set(c, "on_group_lost", "fatal", &err), &err);
    ASSERT_EQ_INT(emq__cfg_group_lost_fatal(c), 1);
    ASSERT_OK(emq_conf_get(c, "on_group_lost", buf, sizeof buf, &err), &err);
    ASSERT_EQ_STR(buf, "fatal");
    ASSERT_STATUS(emq_conf_set(c, "on_group_lost", "ignore", &err), EMQ_EINVAL,
                  &err);
    ASSERT_EQ_STR(err.message,
                  "invalid on_group_lost 'ignore': use recreate or fatal");
    ASSERT_EQ_INT(emq__cfg_group_lost_fatal(c), 1); /* unchanged on failure */
    ASSERT_STATUS(emq_conf_set(c, "log.level", "loud", &err), EMQ_EINVAL, &err);
    ASSERT_EQ_STR(
        err.message,
        "invalid log.level 'loud': use error, warning, info or debug");
    ASSERT_OK(emq_conf_set(c, "log.level", "debug", &err), &err);
    ASSERT_EQ_INT(emq__cfg_log_level(c), EMQ_LOG_DEBUG);
    emq_conf_destroy(c);
}

static int log_calls;
static char log_last[256];
static void capture_log(void *opaque, emq_log_level level,
                        const char *message) {
    (void)opaque;
    if (level == EMQ_LOG_WARNING)
        log_calls++;
    snprintf(log_last, sizeof log_last, "%s", message);
}

TEST(conf_log_callback_and_level) {
    emq_conf_t *c = emq_conf_new();
    emq_conf_set_log(c, capture_log, NULL);
    emq__conf_log(c, EMQ_LOG_WARNING, "disk %d%% full", 91);
    ASSERT_EQ_INT(log_calls, 1);
    ASSERT_EQ_STR(log_last, "disk 91% full");
    emq__conf_log(c, EMQ_LOG_INFO, "not shown at level warning");
    ASSERT_EQ_STR(log_last, "disk 91% full");
    emq_conf_t *copy = emq_conf_dup(c); /* the callback travels with it */
    emq__conf_log(copy, EMQ_LOG_WARNING, "from the copy");
    ASSERT_EQ_INT(log_calls, 2);
    /* Whatever a name or a server's text holds, a log line carries no
     * control character (C0, DEL, C1 in UTF-8); other UTF-8 is kept. */
    emq__conf_log(c, EMQ_LOG_WARNING, "group '%s' said %s",
                  "g\x1b[31m\r\nFORGED",
                  "a\xc2\x9b"
                  "2Jb\x7f \xc3\xa9\xe2\x82\xac");
    ASSERT_EQ_STR(log_last,
                  "group 'g?[31m??FORGED' said a??2Jb? \xc3\xa9\xe2\x82\xac");
    emq_conf_destroy(copy);
    emq_conf_destroy(c);
}

/* Every property names the part of the library that reads it, one of the
 * known owners; past the table there is none. */
TEST(conf_every_property_names_its_reader) {
    static const char *const owners[] = {"conn",     "cluster",  "keys",
                                         "producer", "consumer", "all"};
    size_t i = 0, seen[6] = {0};
    for (; emq_conf_property(i, NULL, NULL, NULL) == EMQ_OK; i++) {
        const char *r = emq_conf_property_readers(i);
        ASSERT(r != NULL);
        size_t k = 0;
        while (k < 6 && strcmp(r, owners[k]) != 0)
            k++;
        if (k == 6)
            FAIL("property %zu is read by '%s', not a known owner", i, r);
        seen[k]++;
    }
    ASSERT(emq_conf_property_readers(i) == NULL);
    for (size_t k = 0; k < 6; k++)
        ASSERT(seen[k] > 0);
}

/* The conn and cluster layers are told typed options, made from a conf in
 * one place each; a kept copy owns every string (the password too) and a
 * caller's own setting never reaches back into the conf. */
TEST(conf_makes_the_typed_options_of_conn_and_route) {
    emq_conf_t *conf = emq_conf_new();
    emq_error err;
    ASSERT_OK(emq_conf_set(conf, "url", "redis://127.0.0.1:7001/2", &err),
              &err);
    ASSERT_OK(emq_conf_set(conf, "password", "s3cret", &err), &err);
    ASSERT_OK(emq_conf_set(conf, "client_name", "w1", &err), &err);
    ASSERT_OK(emq_conf_set(conf, "pipeline.max", "77", &err), &err);
    ASSERT_OK(emq_conf_set(conf, "resp.max_depth", "9", &err), &err);
    ASSERT_OK(emq_conf_set(conf, "cluster.seeds", "127.0.0.1:7002", &err),
              &err);
    ASSERT_OK(emq_conf_set(conf, "cluster.max_redirects", "3", &err), &err);
    ASSERT_OK(emq_conf_set(conf, "cluster.retry_ms", "250", &err), &err);
    ASSERT_OK(emq_conf_set(conf, "cluster.allowed_hosts", "10.*", &err), &err);
    ASSERT_OK(emq_conf_set(conf, "log.level", "debug", &err), &err);

    emq__route_options ro;
    emq__route_options_of(conf, &ro);
    ASSERT_EQ_STR(ro.conn.url, "redis://127.0.0.1:7001/2");
    ASSERT_EQ_STR(ro.conn.password, "s3cret");
    ASSERT_EQ_STR(ro.conn.client_name, "w1");
    ASSERT_EQ_INT(ro.conn.pipeline_max, 77);
    ASSERT_EQ_INT(ro.conn.limits.max_depth, 9);
    ASSERT_EQ_STR(ro.cluster_seeds, "127.0.0.1:7002");
    ASSERT_EQ_INT(ro.max_redirects, 3);
    ASSERT_EQ_INT(ro.retry_ms, 250);
    ASSERT_EQ_STR(ro.allowed_hosts, "10.*");
    ASSERT_EQ_INT(ro.log.level, EMQ_LOG_DEBUG);

    emq__conn_options kept;
    ro.conn.max_attempts = 1; /* the caller's own use */
    ASSERT_OK(emq__conn_options_keep(&kept, &ro.conn, &err), &err);
    ASSERT(kept.password != ro.conn.password);
    ASSERT_EQ_STR(kept.password, "s3cret");
    ASSERT(kept.user == NULL);
    ASSERT_EQ_INT(kept.max_attempts, 1);
    char back[64];
    ASSERT_OK(
        emq_conf_get(conf, "reconnect.max_attempts", back, sizeof back, &err),
        &err);
    ASSERT(strcmp(back, "1") != 0); /* the conf is untouched */
    emq__conn_options_drop(&kept);
    ASSERT(kept.url == NULL && kept.password == NULL);
    emq_conf_destroy(conf);
}
