/* admin.h: internals shared by the files of the admin layer.
 *
 * Internal header (not installed); the API is in echomq.h. The admin layer
 * inspects and operates a queue: describe, pending, group create/setid/
 * destroy, safe consumer pruning, ack-aware retention, dead letters. Each
 * verb is explicit and named; none runs inside a consumer. Verbs that must
 * be atomic against producers and consumers are Lua scripts over keys of
 * the queue's one hashtag.
 */
#ifndef EMQ_ADMIN_H
#define EMQ_ADMIN_H

#include "../consumer/consumer.h" /* layers below: keys, conn, resp */

struct emq_admin {
    emq_conf_t *conf; /* own copy */
    emq_keys keys;
    emq_conn_t *conn;
};

/* Sends one command and returns its reply (caller frees). An error reply
 * becomes EMQ_ESERVER with "<what> failed: <reply text>" and *reply NULL. */
emq_status emq_admin_call(emq_admin_t *a, const char *what, int argc,
                          const char *const *argv, const size_t *argvlen,
                          emq_reply **reply, emq_error *err);

/* ---- shared helpers (prune, retention, dead letters) ------------------ */

/* The value of field key in a flat [key, value, ...] reply, as XINFO
 * returns them (a RESP2 array or a RESP3 map), or NULL when absent.
 * Borrowed from r. */
const emq_reply *emq_admin_field(const emq_reply *r, const char *key);

#endif /* EMQ_ADMIN_H */
