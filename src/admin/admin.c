/* admin.c: the admin handle and the helpers its verbs share. */
#include "admin.h"

#include <string.h>

emq_status emq_admin_new(const emq_conf_t *conf, emq_admin_t **out,
                         emq_error *err) {
    *out = NULL;
    if (conf == NULL)
        return emq_error_set(err, EMQ_EINVAL, 0,
                             "admin needs a configuration");
    emq_admin_t *a = emq_calloc(1, sizeof *a);
    if (a == NULL)
        return emq_error_set(err, EMQ_ENOMEM, 0, "out of memory");
    emq_status st;
    a->conf = emq_conf_dup(conf);
    if (a->conf == NULL)
        st = emq_error_set(err, EMQ_ENOMEM, 0, "out of memory");
    else
        st = emq_keys_resolve(conf->queue, conf->stream, &a->keys, err);
    if (st == EMQ_OK)
        st = emq_conn_new(a->conf, &a->conn, err);
    if (st != EMQ_OK) {
        emq_admin_destroy(a);
        return st;
    }
    *out = a;
    return EMQ_OK;
}

void emq_admin_destroy(emq_admin_t *a) {
    if (a == NULL)
        return;
    emq_conn_destroy(a->conn);
    emq_keys_free(&a->keys);
    emq_conf_destroy(a->conf);
    emq_free(a);
}

void emq_free_array(void *array) { emq_free(array); }

emq_status emq_admin_call(emq_admin_t *a, const char *what, int argc,
                          const char *const *argv, const size_t *argvlen,
                          emq_reply **reply, emq_error *err) {
    emq_status st = emq_conn_command(a->conn, argc, argv, argvlen, reply, err);
    if (st != EMQ_OK)
        return st;
    if (emq_reply_kind(*reply) == EMQ_REPLY_ERROR) {
        char shown[200];
        st = emq_error_set(err, EMQ_ESERVER, 0, "%s failed: %s", what,
                           emq_reply_text(*reply, shown, sizeof shown));
        emq_reply_free(*reply);
        *reply = NULL;
    }
    return st;
}

/* ---- shared helpers (prune, retention, dead letters) ------------------ */

const emq_reply *emq_admin_field(const emq_reply *r, const char *key) {
    size_t n = emq_reply_len(r), klen = strlen(key);
    for (size_t i = 0; i + 1 < n; i += 2) {
        size_t len = 0;
        const char *s = emq_reply_str(emq_reply_at(r, i), &len);
        if (s && len == klen && memcmp(s, key, len) == 0)
            return emq_reply_at(r, i + 1);
    }
    return NULL;
}
