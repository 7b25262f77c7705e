/* SPDX-License-Identifier: BSD-3-Clause */
/* functions.c: echomq's function library on every master (echomq.h,
 * emq_admin_functions).
 *
 * On each master: FUNCTION LIST LIBRARYNAME echomq_* names the echomq
 * libraries there; this build's (EMQ_LIBRARY_NAME) is told apart from
 * another build's of the same version by its probe's answer (the digest
 * of its text, scripts.h); then, as asked, FUNCTION LOAD (REPLACE) puts
 * this build's there. A server without functions answers "unknown
 * command": unsupported, not a failure.
 */
#include "admin.h"

#include <stdio.h>
#include <string.h>

typedef struct fn_ctx {
    emq_functions_action action;
    emq_functions_state *states;
    size_t n, cap;
    const char *library; /* emq_admin_functions_delete: the one to delete */
    size_t deleted;
} fn_ctx;

/* One command on conn; an error reply is EMQ_ESERVER quoting it, except
 * "unknown command" (a server without functions), returned as it is. */
static emq_status command(emq_conn_t *conn, const char *name, int argc,
                          const char *const *argv, emq_reply **reply,
                          emq_error *err) {
    emq_status st = emq_conn_command(conn, argc, argv, NULL, reply, err);
    if (st == EMQ_OK && emq_reply_kind(*reply) == EMQ_REPLY_ERROR &&
        !emq__reply_mentions(*reply, "unknown command") &&
        !emq__reply_mentions(*reply, "unknown subcommand")) {
        st = emq__reply_error_set(err, *reply, "%s %s on %s failed", argv[0],
                                  argv[1], name);
        emq_reply_free(*reply);
        *reply = NULL;
    }
    return st;
}

/* Adds name (n bytes) to the state's others, "..." when full. */
static void add_other(emq_functions_state *s, const char *name, size_t n) {
    size_t used = strlen(s->others);
    if (used + n + 5 >= sizeof s->others) {
        if (strstr(s->others, "...") == NULL)
            snprintf(s->others + used, sizeof s->others - used, "%s...",
                     used ? " " : "");
        return;
    }
    snprintf(s->others + used, sizeof s->others - used, "%s%.*s",
             used ? " " : "", (int)n, name);
}

/* Fills s from FUNCTION LIST and the probe. */
static emq_status look(emq_conn_t *conn, const char *name,
                       emq_functions_state *s, emq_error *err) {
    const char *list[] = {"FUNCTION", "LIST", "LIBRARYNAME", "echomq_*"};
    emq_reply *r = NULL;
    emq_status st = command(conn, name, 4, list, &r, err);
    if (st != EMQ_OK)
        return st;
    if (emq_reply_kind(r) == EMQ_REPLY_ERROR) { /* unknown: 6.2 */
        s->state = EMQ_FUNCTIONS_UNSUPPORTED;
        emq_reply_free(r);
        return EMQ_OK;
    }
    int ours = 0;
    for (size_t i = 0; i < emq_reply_len(r); i++) {
        size_t n = 0;
        const char *lib = emq_reply_str(
            emq__stream_field(emq_reply_at(r, i), "library_name"), &n);
        if (lib == NULL)
            continue;
        if (n == strlen(EMQ_LIBRARY_NAME) &&
            memcmp(lib, EMQ_LIBRARY_NAME, n) == 0)
            ours = 1;
        else
            add_other(s, lib, n);
    }
    emq_reply_free(r);
    s->state = EMQ_FUNCTIONS_ABSENT;
    if (!ours)
        return EMQ_OK;
    const char *probe[] = {"FCALL", EMQ_LIBRARY_PROBE, "0"};
    if ((st = command(conn, name, 3, probe, &r, err)) != EMQ_OK)
        return st;
    size_t n = 0;
    const char *digest = emq_reply_str(r, &n);
    const char *want = emq__library_digest();
    s->state = digest && n == strlen(want) && memcmp(digest, want, n) == 0
                   ? EMQ_FUNCTIONS_LOADED
                   : EMQ_FUNCTIONS_OTHER_BUILD;
    emq_reply_free(r);
    return EMQ_OK;
}

static emq_status load(emq_conn_t *conn, const char *name, int replace,
                       emq_functions_state *s, emq_error *err) {
    const char *text = emq__library_text();
    if (text == NULL)
        return emq__error_set(err, EMQ_ENOMEM, 0,
                              "the function library's text does not fit");
    const char *argv[] = {"FUNCTION", "LOAD", replace ? "REPLACE" : text, text};
    emq_reply *r = NULL;
    emq_status st = command(conn, name, replace ? 4 : 3, argv, &r, err);
    if (st != EMQ_OK)
        return st;
    emq_reply_free(r);
    s->state = EMQ_FUNCTIONS_LOADED;
    s->changed = 1;
    return EMQ_OK;
}

static emq_status on_master(emq_conn_t *conn, const char *name, void *ctx,
                            emq_error *err) {
    fn_ctx *t = ctx;
    if (t->n == t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 4;
        emq_functions_state *grown =
            emq__realloc(t->states, cap * sizeof *grown);
        if (grown == NULL)
            return emq__oom(err);
        t->states = grown;
        t->cap = cap;
    }
    emq_functions_state *s = &t->states[t->n++];
    memset(s, 0, sizeof *s);
    snprintf(s->node, sizeof s->node, "%s", name);
    snprintf(s->library, sizeof s->library, "%s", EMQ_LIBRARY_NAME);
    emq_status st = look(conn, name, s, err);
    if (st != EMQ_OK)
        return st;
    if (s->state == EMQ_FUNCTIONS_ABSENT && t->action != EMQ_FUNCTIONS_SHOW)
        return load(conn, name, 0, s, err);
    if (s->state == EMQ_FUNCTIONS_OTHER_BUILD &&
        t->action == EMQ_FUNCTIONS_REPLACE)
        return load(conn, name, 1, s, err);
    return EMQ_OK;
}

/* Runs fn on every master of conf's server. */
static emq_status each_master(const emq_conf_t *conf, emq__route_master_fn fn,
                              fn_ctx *t, emq_error *err) {
    if (conf == NULL)
        return emq__error_set(err, EMQ_EINVAL, 0,
                              "the function library needs a configuration");
    emq__route *route = NULL;
    /* Any key will do: the route only lends its connections. */
    emq_status st = emq__route_new(conf, "emq:{}", &route, err);
    if (st == EMQ_OK)
        st = emq__route_each_master(route, fn, t, err);
    emq__route_destroy(route);
    return st;
}

emq_status emq_admin_functions(const emq_conf_t *conf,
                               emq_functions_action action,
                               emq_functions_state **out, size_t *n,
                               emq_error *err) {
    *out = NULL;
    *n = 0;
    if (action != EMQ_FUNCTIONS_SHOW && action != EMQ_FUNCTIONS_LOAD &&
        action != EMQ_FUNCTIONS_REPLACE)
        return emq__error_set(err, EMQ_EINVAL, 0,
                              "unknown function library action %d",
                              (int)action);
    fn_ctx t = {.action = action};
    emq_status st = each_master(conf, on_master, &t, err);
    if (st != EMQ_OK) {
        emq__free(t.states);
        return st;
    }
    emq__error_clear(err);
    *out = t.states;
    *n = t.n;
    return EMQ_OK;
}

static emq_status delete_on(emq_conn_t *conn, const char *name, void *ctx,
                            emq_error *err) {
    fn_ctx *t = ctx;
    const char *argv[] = {"FUNCTION", "DELETE", t->library};
    emq_reply *r = NULL;
    emq_status st = emq_conn_command(conn, 3, argv, NULL, &r, err);
    if (st != EMQ_OK)
        return st;
    if (emq_reply_kind(r) != EMQ_REPLY_ERROR)
        t->deleted++;
    else if (!emq__reply_mentions(r, "not found"))
        st = emq__reply_error_set(err, r, "FUNCTION DELETE on %s failed", name);
    emq_reply_free(r);
    return st;
}

emq_status emq_admin_functions_delete(const emq_conf_t *conf,
                                      const char *library, size_t *deleted,
                                      emq_error *err) {
    if (deleted)
        *deleted = 0;
    size_t prefix = sizeof "echomq_" - 1;
    int named = library != NULL && strncmp(library, "echomq_", prefix) == 0 &&
                library[prefix] != '\0' && strlen(library) < 24;
    for (size_t i = prefix; named && library[i]; i++)
        named = library[i] >= '0' && library[i] <= '9';
    if (!named) {
        char shown[64];
        emq__printable(shown, sizeof shown, library ? library : "(null)",
                       library ? strlen(library) : 6);
        return emq__error_set(err, EMQ_EINVAL, 0,
                              "'%s' is not an echomq function library's "
                              "name (echomq_<version>, as `echomq functions "
                              "ls` shows)",
                              shown);
    }
    fn_ctx t = {.library = library};
    emq_status st = each_master(conf, delete_on, &t, err);
    if (st == EMQ_OK) {
        emq__error_clear(err);
        if (deleted)
            *deleted = t.deleted;
    }
    return st;
}

void emq_functions_states_free(emq_functions_state *states) {
    emq__free(states);
}
