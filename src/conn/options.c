/* SPDX-License-Identifier: BSD-3-Clause */
/* options.c: the conn layer's typed options, made from a conf.
 *
 * The one place that reads the conn layer's rows of a conf: a connection
 * (conn.c) and a route (the cluster layer, which passes them on to every
 * node connection) only ever see an emq_conn_options. A kept copy owns
 * its strings; the password, and every other string (a URL may hold
 * credentials), is wiped when it is dropped.
 */
#include "conn.h"

#include "conf.h"

#include <string.h>

void emq_conn_options_of(const emq_conf_t *conf, emq_conn_options *out) {
    memset(out, 0, sizeof *out);
    out->url = conf->url;
    out->user = conf->user;
    out->password = conf->password;
    out->db = conf->db;
    out->client_name = conf->client_name;
    out->protocol = conf->protocol;
    out->connect_timeout_ms = conf->connect_timeout_ms;
    out->command_timeout_ms = conf->command_timeout_ms;
    out->tcp_keepalive_s = conf->tcp_keepalive_s;
    out->tls_ca_file = conf->tls_ca_file;
    out->tls_cert_file = conf->tls_cert_file;
    out->tls_key_file = conf->tls_key_file;
    out->tls_sni = conf->tls_sni;
    out->tls_verify = conf->tls_verify;
    out->backoff_min_ms = conf->backoff_min_ms;
    out->backoff_max_ms = conf->backoff_max_ms;
    out->max_attempts = conf->max_attempts;
    out->pipeline_max = conf->pipeline_max;
    out->output_max_bytes = conf->output_max_bytes;
    emq_resp_limits_default(&out->limits);
    out->limits.max_bulk = (size_t)conf->resp_max_bulk;
    out->limits.max_depth = (size_t)conf->resp_max_depth;
    out->limits.max_elements = (size_t)conf->resp_max_elements;
    out->limits.max_reply = (size_t)conf->resp_max_reply;
}

/* The string fields of an options struct, for keep and drop. */
#define STRING_FIELDS(o)                                                    \
    {&(o)->url,           &(o)->user,          &(o)->password,            \
     &(o)->client_name,   &(o)->tls_ca_file,   &(o)->tls_cert_file,       \
     &(o)->tls_key_file,  &(o)->tls_sni}
#define NSTRINGS 8

void emq_conn_options_drop(emq_conn_options *o) {
    if (o == NULL)
        return;
    const char **fields[NSTRINGS] = STRING_FIELDS(o);
    for (size_t i = 0; i < NSTRINGS; i++) {
        char *s = (char *)(uintptr_t)*fields[i];
        if (s) {
            emq_wipe(s, strlen(s));
            emq_free(s);
        }
    }
    memset(o, 0, sizeof *o);
}

emq_status emq_conn_options_keep(emq_conn_options *dst,
                                 const emq_conn_options *src,
                                 emq_error *err) {
    *dst = *src;
    const char **fields[NSTRINGS] = STRING_FIELDS(dst);
    size_t kept = 0;
    for (; kept < NSTRINGS; kept++) {
        if (*fields[kept] == NULL)
            continue;
        char *copy = emq_strdup(*fields[kept]);
        if (copy == NULL)
            break;
        *fields[kept] = copy;
    }
    if (kept == NSTRINGS)
        return EMQ_OK;
    for (size_t i = kept; i < NSTRINGS; i++) /* not copied: not ours */
        *fields[i] = NULL;
    emq_conn_options_drop(dst);
    return emq_oom(err);
}
