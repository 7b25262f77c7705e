/* SPDX-License-Identifier: BSD-3-Clause */
/* options.c: the conn layer's typed options, made from a conf.
 *
 * The one place that reads the conn layer's rows of a conf: a connection
 * (conn.c) and a route (the cluster layer, which passes them on to every
 * node connection) only ever see an emq__conn_options. A kept copy owns
 * its strings; the password, and every other string (a URL may hold
 * credentials), is wiped when it is dropped.
 */
#include "conn.h"

#include "conf.h"

#include <string.h>

void emq__conn_options_of(const emq_conf_t *conf, emq__conn_options *out) {
    memset(out, 0, sizeof *out);
    out->url = emq__cfg_url(conf);
    out->user = emq__cfg_user(conf);
    out->password = emq__cfg_password(conf);
    out->db = emq__cfg_db(conf);
    out->client_name = emq__cfg_client_name(conf);
    out->protocol = emq__cfg_protocol(conf);
    out->connect_timeout_ms = emq__cfg_connect_timeout_ms(conf);
    out->command_timeout_ms = emq__cfg_command_timeout_ms(conf);
    out->tcp_keepalive_s = emq__cfg_tcp_keepalive_s(conf);
    out->tls_ca_file = emq__cfg_tls_ca_file(conf);
    out->tls_cert_file = emq__cfg_tls_cert_file(conf);
    out->tls_key_file = emq__cfg_tls_key_file(conf);
    out->tls_key_password = emq__cfg_tls_key_password(conf);
    out->tls_sni = emq__cfg_tls_sni(conf);
    out->sentinel_master = emq__cfg_sentinel_master(conf);
    out->sentinel_user = emq__cfg_sentinel_user(conf);
    out->sentinel_password = emq__cfg_sentinel_password(conf);
    out->sentinel_tls = emq__cfg_sentinel_tls(conf);
    out->sentinel_address_map = emq__cfg_sentinel_address_map(conf);
    out->sentinel_allowed_hosts = emq__cfg_sentinel_allowed_hosts(conf);
    out->tls_verify = emq__cfg_tls_verify(conf);
    out->backoff_min_ms = emq__cfg_backoff_min_ms(conf);
    out->backoff_max_ms = emq__cfg_backoff_max_ms(conf);
    out->max_attempts = emq__cfg_max_attempts(conf);
    out->pipeline_max = emq__cfg_pipeline_max(conf);
    out->output_max_bytes = emq__cfg_output_max_bytes(conf);
    emq__log_sink_of(conf, &out->log);
    emq__resp_limits_default(&out->limits);
    out->limits.max_bulk = (size_t)emq__cfg_resp_max_bulk(conf);
    out->limits.max_depth = (size_t)emq__cfg_resp_max_depth(conf);
    out->limits.max_elements = (size_t)emq__cfg_resp_max_elements(conf);
    out->limits.max_reply = (size_t)emq__cfg_resp_max_reply(conf);
}

/* The string fields of an options struct, for keep and drop. */
#define STRING_FIELDS(o)                                                       \
    {                                                                          \
        &(o)->url, &(o)->host, &(o)->user, &(o)->password, &(o)->client_name,  \
            &(o)->tls_ca_file, &(o)->tls_cert_file, &(o)->tls_key_file,        \
            &(o)->tls_key_password, &(o)->tls_sni, &(o)->sentinel_master,      \
            &(o)->sentinel_user, &(o)->sentinel_password,                      \
            &(o)->sentinel_address_map, &(o)->sentinel_allowed_hosts           \
    }
#define NSTRINGS 15

void emq__conn_options_drop(emq__conn_options *o) {
    if (o == NULL)
        return;
    const char **fields[NSTRINGS] = STRING_FIELDS(o);
    for (size_t i = 0; i < NSTRINGS; i++) {
        char *s = (char *)(uintptr_t)*fields[i];
        if (s) {
            emq__wipe(s, strlen(s));
            emq__free(s);
        }
    }
    memset(o, 0, sizeof *o);
}

emq_status emq__conn_options_keep(emq__conn_options *dst,
                                  const emq__conn_options *src,
                                  emq_error *err) {
    *dst = *src;
    const char **fields[NSTRINGS] = STRING_FIELDS(dst);
    size_t kept = 0;
    for (; kept < NSTRINGS; kept++) {
        if (*fields[kept] == NULL)
            continue;
        char *copy = emq__strdup(*fields[kept]);
        if (copy == NULL)
            break;
        *fields[kept] = copy;
    }
    if (kept == NSTRINGS)
        return EMQ_OK;
    for (size_t i = kept; i < NSTRINGS; i++) /* not copied: not ours */
        *fields[i] = NULL;
    emq__conn_options_drop(dst);
    return emq__oom(err);
}

int emq__url_tls_verifies(const emq__url *u, int64_t property) {
    if (property != EMQ_TLS_VERIFY_DEFAULT)
        return property == EMQ_TLS_VERIFY_PEER;
    return u->tls_verify >= 0 ? u->tls_verify != 0 : 1;
}
