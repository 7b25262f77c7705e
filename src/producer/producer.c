/* producer.c: appending entries to a queue's stream.
 *
 * One entry is one XADD. A batch is pipelined in windows of
 * producer.window commands: append a window, read its replies, go on, so
 * memory stays bounded whatever the batch size while the network stays
 * busy. Each entry's outcome is known: its ID, or "" when the server
 * refused it (the first refusal is returned, naming the entry's index).
 * The producer never reads entries and never trims on its own.
 */
#include "producer.h"

#include <stdio.h>
#include <string.h>

emq_status emq_producer_new(const emq_conf_t *conf, emq_producer_t **out,
                            emq_error *err) {
    *out = NULL;
    if (conf == NULL)
        return emq_error_set(err, EMQ_EINVAL, 0,
                             "a producer needs a configuration");
    emq_producer_t *p = emq_calloc(1, sizeof *p);
    if (p == NULL)
        return emq_error_set(err, EMQ_ENOMEM, 0, "out of memory");
    emq_status st;
    p->conf = emq_conf_dup(conf);
    if (p->conf == NULL)
        st = emq_error_set(err, EMQ_ENOMEM, 0, "out of memory");
    else
        st = emq_keys_resolve(conf->queue, conf->stream, &p->keys, err);
    if (st == EMQ_OK)
        st = emq_conn_new(p->conf, &p->conn, err);
    if (st != EMQ_OK) {
        emq_producer_destroy(p);
        return st;
    }
    *out = p;
    return EMQ_OK;
}

void emq_producer_destroy(emq_producer_t *p) {
    if (p == NULL)
        return;
    emq_conn_destroy(p->conn);
    emq_keys_free(&p->keys);
    emq_conf_destroy(p->conf);
    emq_free(p);
}

/* Appends XADD <stream> <id|*> f v ... for one message. */
static emq_status append_xadd(emq_producer_t *p, const emq_message *m,
                              size_t index, emq_error *err) {
    if (m->fields == NULL || m->nfields == 0)
        return emq_error_set(err, EMQ_EINVAL, 0,
                             "entry %zu has no fields; a stream entry needs "
                             "at least one field/value pair",
                             index);
    size_t argc = 3 + 2 * m->nfields;
    const char **argv = emq_alloc(argc * sizeof *argv);
    size_t *lens = emq_alloc(argc * sizeof *lens);
    if (argv == NULL || lens == NULL) {
        emq_free(argv);
        emq_free(lens);
        return emq_error_set(err, EMQ_ENOMEM, 0, "out of memory");
    }
    argv[0] = "XADD";
    lens[0] = 4;
    argv[1] = p->keys.stream;
    lens[1] = strlen(p->keys.stream);
    argv[2] = m->id ? m->id : "*";
    lens[2] = strlen(argv[2]);
    for (size_t i = 0; i < m->nfields; i++) {
        argv[3 + 2 * i] = m->fields[i].name ? m->fields[i].name : "";
        lens[3 + 2 * i] = m->fields[i].name_len;
        argv[4 + 2 * i] = m->fields[i].value ? m->fields[i].value : "";
        lens[4 + 2 * i] = m->fields[i].value_len;
    }
    emq_status st = emq_conn_append(p->conn, (int)argc, argv, lens, err);
    emq_free(argv);
    emq_free(lens);
    return st;
}

/* Reads one XADD reply into *id. EMQ_ESERVER with the reply text for an
 * error reply. */
static emq_status read_xadd(emq_producer_t *p, size_t index, emq_id *id,
                            emq_error *err) {
    emq_reply *reply;
    emq_status st = emq_conn_get_reply(p->conn, &reply, err);
    if (st != EMQ_OK)
        return st;
    size_t n;
    const char *text = emq_reply_str(reply, &n);
    if (emq_reply_kind(reply) == EMQ_REPLY_STRING && n < EMQ_ID_MAX) {
        if (id) {
            memcpy(id->str, text, n);
            id->str[n] = '\0';
        }
    } else {
        char shown[200];
        st = emq_error_set(err, EMQ_ESERVER, 0,
                           "adding entry %zu to '%s' failed: %s", index,
                           p->keys.stream,
                           emq_reply_text(reply, shown, sizeof shown));
        if (id)
            id->str[0] = '\0';
    }
    emq_reply_free(reply);
    return st;
}

emq_status emq_produce(emq_producer_t *p, const emq_field *fields,
                       size_t nfields, emq_id *id, emq_error *err) {
    emq_message m = {fields, nfields, NULL};
    size_t written;
    emq_status st = emq_produce_batch(p, &m, 1, id, &written, err);
    if (st == EMQ_ESERVER && err) /* no index for a single entry */
        emq_error_set(err, st, 0, "%s",
                      strstr(err->message, "failed: ")
                          ? strstr(err->message, "failed: ") + 8
                          : err->message);
    return st;
}

emq_status emq_produce_batch(emq_producer_t *p, const emq_message *msgs,
                             size_t n, emq_id *ids, size_t *written,
                             emq_error *err) {
    size_t confirmed = 0, ok = 0;
    emq_status first = EMQ_OK;
    emq_error first_err;
    emq_error_clear(&first_err);
    size_t window = (size_t)p->conf->producer_window;
    while (confirmed < n) {
        size_t end = n - confirmed < window ? n : confirmed + window;
        size_t appended = confirmed;
        emq_status st = EMQ_OK;
        emq_error app_err;
        for (; appended < end; appended++)
            if ((st = append_xadd(p, &msgs[appended], appended, &app_err)) !=
                EMQ_OK)
                break;
        for (size_t i = confirmed; i < appended; i++) {
            emq_error one;
            emq_status rs = read_xadd(p, i, ids ? &ids[i] : NULL, &one);
            if (rs == EMQ_OK) {
                ok++;
                continue;
            }
            if (rs != EMQ_ESERVER) { /* transport: the rest is unknown */
                if (written)
                    *written = ok;
                return emq_error_set(
                    err, rs, one.retriable,
                    "%s; %zu of %zu entries confirmed added, entries from "
                    "index %zu on may or may not have been added",
                    one.message, ok, n, i);
            }
            if (first == EMQ_OK) {
                first = rs;
                first_err = one;
            }
        }
        confirmed = appended;
        if (st != EMQ_OK) { /* an entry we could not even send */
            if (ids)
                for (size_t i = appended; i < n; i++)
                    ids[i].str[0] = '\0';
            if (written)
                *written = ok;
            if (first == EMQ_OK) {
                first = st;
                first_err = app_err;
            }
            break;
        }
    }
    if (written)
        *written = ok;
    if (first != EMQ_OK) {
        if (err)
            *err = first_err;
        return first;
    }
    emq_error_clear(err);
    return EMQ_OK;
}
