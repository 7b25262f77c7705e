/* SPDX-License-Identifier: BSD-3-Clause */
/* producer.c: appending entries to a queue's stream.
 *
 * One entry is one XADD. A batch is pipelined in windows of
 * producer.window commands: append a window, read its replies, go on, so
 * memory stays bounded whatever the batch size while the network stays
 * busy. Each entry's outcome is known: its ID, or "" when the server
 * refused it (the first refusal is returned, naming the entry's index) or
 * when a transport failure left its outcome unknown (the error then says
 * how many entries were confirmed).
 *
 * The queue's trimming policy (trim.maxlen or trim.minid, exact or ~, with
 * an optional LIMIT) and producer.nomkstream travel inside every XADD, so
 * adding and trimming are one atomic command and no XTRIM is ever sent.
 * The words every XADD starts with are built once, when the producer is
 * created, after the policy is validated: a policy the server would refuse
 * (both bounds, LIMIT without ~, a malformed MINID) is refused there with
 * EMQ_EINVAL naming the property, before any connection is made.
 *
 * This file and sender.c know one queue. The public calls are produce.c's:
 * a queue's producer goes to emq__producer_queue and its sender, a topic's
 * (partitions > 1) splits the entries over its partitions' producers.
 *
 * This file builds every XADD (and the WAIT of a durable round) and reads
 * their replies; sender.c puts them on the wire, over the session layer.
 *
 * Plain trimming deletes entries whether or not a group has processed them
 * (docs/PRODUCER.md); ack-aware retention is emq_admin_trim_acked. The
 * producer never reads entries and never trims other than through XADD; it
 * sends an XADD again only when the server did not run it ("not now",
 * READONLY) or, for an asynchronous entry, within producer.retries.
 */
#include "producer.h"

#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

/* Validates conf's trimming policy and builds p's head words:
 * XADD <stream> [NOMKSTREAM] [MAXLEN|MINID [~] <threshold> [LIMIT <n>]].
 * EMQ_EINVAL names the property at fault; nothing touches the network. */
static emq_status build_head(emq_producer_t *p, emq_error *err) {
    const emq_conf_t *c = p->conf;
    int has_maxlen = emq__cfg_trim_maxlen(c) >= 0,
        has_minid = emq__cfg_trim_minid(c) != NULL;
    if (has_maxlen && has_minid)
        return emq__error_set(err, EMQ_EINVAL, 0,
                              "trim.maxlen and trim.minid are both set; a "
                              "queue trims by one of them (XADD accepts "
                              "only one)");
    if (has_minid &&
        emq__stream_id_parse(emq__cfg_trim_minid(c),
                             strlen(emq__cfg_trim_minid(c)), NULL) != 0) {
        char shown[64];
        emq__printable(shown, sizeof shown, emq__cfg_trim_minid(c),
                       strlen(emq__cfg_trim_minid(c)));
        return emq__error_set(err, EMQ_EINVAL, 0,
                              "invalid trim.minid '%s': not a stream ID "
                              "(ms or ms-seq, digits only)",
                              shown);
    }
    if (emq__cfg_trim_limit(c) >= 0 && !emq__cfg_trim_approx(c))
        return emq__error_set(err, EMQ_EINVAL, 0,
                              "trim.limit needs trim.approx 1: the server "
                              "accepts LIMIT only with ~ trimming");
    if (!has_maxlen && !has_minid) {
        if (emq__cfg_trim_limit(c) >= 0)
            return emq__error_set(err, EMQ_EINVAL, 0,
                                  "trim.limit is set but neither trim.maxlen "
                                  "nor trim.minid is");
        if (emq__cfg_trim_approx(c))
            return emq__error_set(err, EMQ_EINVAL, 0,
                                  "trim.approx is set but neither "
                                  "trim.maxlen nor trim.minid is");
    }

    size_t n = 0;
    p->head[n] = "XADD";
    p->headlen[n++] = 4;
    p->head[n] = p->keys.stream;
    p->headlen[n++] = strlen(p->keys.stream);
    if (emq__cfg_producer_nomkstream(c)) {
        p->head[n] = "NOMKSTREAM";
        p->headlen[n++] = 10;
    }
    if (has_maxlen || has_minid) {
        p->head[n] = has_maxlen ? "MAXLEN" : "MINID";
        p->headlen[n] = strlen(p->head[n]);
        n++;
        if (emq__cfg_trim_approx(c)) {
            p->head[n] = "~";
            p->headlen[n++] = 1;
        }
        if (has_maxlen) {
            snprintf(p->threshold, sizeof p->threshold, "%" PRId64,
                     emq__cfg_trim_maxlen(c));
            p->head[n] = p->threshold;
        } else {
            p->head[n] = emq__cfg_trim_minid(c);
        }
        p->headlen[n] = strlen(p->head[n]);
        n++;
        if (emq__cfg_trim_limit(c) >= 0) {
            snprintf(p->limit, sizeof p->limit, "%" PRId64,
                     emq__cfg_trim_limit(c));
            p->head[n] = "LIMIT";
            p->headlen[n++] = 5;
            p->head[n] = p->limit;
            p->headlen[n] = strlen(p->limit);
            n++;
        }
    }
    p->nhead = n;
    return EMQ_OK;
}

/* Makes room for argc words in the scratch argv. EMQ_ENOMEM leaves the
 * old arrays in place. */
static emq_status grow_argv(emq_producer_t *p, size_t argc, emq_error *err) {
    size_t cap = p->argv_cap;
    while (cap < argc)
        cap *= 2;
    const char **argv = emq__realloc(p->argv, cap * sizeof *argv);
    if (argv == NULL)
        return emq__oom(err);
    p->argv = argv;
    size_t *lens = emq__realloc(p->argvlen, cap * sizeof *lens);
    if (lens == NULL)
        return emq__oom(err);
    p->argvlen = lens;
    p->argv_cap = cap;
    return EMQ_OK;
}

/* The level entry m is held at: its own (x), else on a queue with
 * priorities the default for one that the script can take (no explicit
 * ID, not too wide: those go to the stream, docs/QUEUES.md); -1: none. */
static int level_of(emq_producer_t *p, const emq_message *m,
                    const emq__extra *x) {
    if (x && x->level1 > 0)
        return x->level1 - 1;
    return m->id == NULL && m->nfields <= EMQ_ADD_MAX_PAIRS &&
                   atomic_load(&p->prioritized)
               ? EMQ_PRIO_DEFAULT
               : -1;
}

/* The plain XADD of m into p's scratch; sets *argc. */
static emq_status xadd_words(emq_producer_t *p, const emq_message *m,
                             int *argc_out, emq_error *err) {
    size_t argc = p->nhead + 1 + 2 * m->nfields;
    if (argc > p->argv_cap) {
        emq_status st = grow_argv(p, argc, err);
        if (st != EMQ_OK)
            return st;
    }
    memcpy(p->argv, p->head, p->nhead * sizeof *p->argv);
    memcpy(p->argvlen, p->headlen, p->nhead * sizeof *p->argvlen);
    size_t w = p->nhead;
    p->argv[w] = m->id ? m->id : "*";
    p->argvlen[w++] = m->id ? strlen(m->id) : 1;
    for (size_t i = 0; i < m->nfields; i++) {
        const emq_field *f = &m->fields[i];
        p->argv[w] = f->name ? f->name : "";
        p->argvlen[w++] = f->name_len;
        p->argv[w] = f->value ? f->value : "";
        p->argvlen[w++] = f->value_len;
    }
    *argc_out = (int)argc;
    return EMQ_OK;
}

/* Makes p->dedup_names hold the idempotency key names of e[0..n), one
 * after another, each behind the queue's prefix. */
static emq_status dedup_names(emq_producer_t *p, const emq__entry_ref *e,
                              size_t n, emq_error *err) {
    size_t need = 1;
    for (size_t i = 0; i < n; i++)
        if (e[i].x && e[i].x->dedup)
            need += p->dedup_prefix_len + e[i].x->dedup_len + 1;
    if (need > p->dedup_cap) {
        char *grown = emq__realloc(p->dedup_names, need);
        if (grown == NULL)
            return emq__oom(err);
        p->dedup_names = grown;
        p->dedup_cap = need;
    }
    char *at = p->dedup_names;
    for (size_t i = 0; i < n; i++) {
        const emq__extra *x = e[i].x;
        emq__add_plan *pl = &p->plans[i];
        pl->dedup_key = NULL;
        pl->dedup_key_len = 0;
        if (x == NULL || x->dedup == NULL)
            continue;
        memcpy(at, p->dedup_prefix, p->dedup_prefix_len);
        memcpy(at + p->dedup_prefix_len, x->dedup, x->dedup_len);
        pl->dedup_key = at;
        pl->dedup_key_len = p->dedup_prefix_len + x->dedup_len;
        at += pl->dedup_key_len;
        *at++ = '\0';
    }
    return EMQ_OK;
}

emq_status emq__producer_command(emq_producer_t *p, const emq__entry_ref *e,
                                 size_t n, size_t *used, int *scripted,
                                 int *argc, emq_error *err) {
    int level = level_of(p, e[0].m, e[0].x);
    *used = 1;
    *scripted = emq__extra_scripted(e[0].x) || level >= 0;
    if (!*scripted)
        return xadd_words(p, e[0].m, argc, err);
    /* The scripted entries that follow, with a level as the first has
     * one or not, within the call's bounds: each one's plan, its level
     * read once. */
    size_t words = 0, k = 0;
    for (int lv = level; k < n && k < EMQ_ADD_BATCH_MAX;) {
        const emq__extra *x = e[k].x;
        if (k > 0 && (!(emq__extra_scripted(x) || lv >= 0) ||
                      (lv >= 0) != (level >= 0) ||
                      words + 2 * e[k].m->nfields > EMQ_ADD_BATCH_WORDS))
            break;
        if (x && x->level1 > 0)
            atomic_store(&p->prioritized, 1);
        p->plans[k] = (emq__add_plan){x ? x->delay_ms : 0,
                                      x ? x->due_ms : 0,
                                      NULL,
                                      0,
                                      x ? x->dedup_ttl_ms : 0,
                                      lv,
                                      e[k].m->fields,
                                      e[k].m->nfields};
        words += 2 * e[k].m->nfields;
        if (++k < n)
            lv = level_of(p, e[k].m, e[k].x);
    }
    emq_status st = dedup_names(p, e, k, err);
    size_t most = emq__add_words_max(p->plans, k, p->nhead - 2);
    if (st == EMQ_OK && most > p->argv_cap)
        st = grow_argv(p, most, err);
    if (st != EMQ_OK)
        return st;
    /* The XADD's words after its key: NOMKSTREAM, the trimming. */
    *argc = (int)emq__add_call(p->argv, p->argvlen, &p->add_head, p->texts,
                               &p->delayed, p->keys.stream, p->plans, k,
                               emq__cfg_producer_nomkstream(p->conf),
                               p->head + 2, p->headlen + 2, p->nhead - 2,
                               emq__session_functions(&p->tx.x));
    *used = k;
    return EMQ_OK;
}

/* Bytes of a stream key shown in a message. */
#define SHOWN_KEY 96

emq_status emq__producer_xadd_reply(const emq_producer_t *p,
                                    const emq_reply *reply, emq_id *id,
                                    emq_error *err) {
    size_t n;
    const char *text = emq_reply_str(reply, &n);
    emq_reply_type kind = emq_reply_kind(reply);
    if (kind == EMQ_REPLY_STRING && n < EMQ_ID_MAX) {
        memcpy(id->str, text, n);
        id->str[n] = '\0';
        return EMQ_OK;
    }
    id->str[0] = '\0';
    char key[SHOWN_KEY];
    emq__printable(key, sizeof key, p->keys.stream, strlen(p->keys.stream));
    if (kind == EMQ_REPLY_NULL && emq__cfg_producer_nomkstream(p->conf))
        return emq__error_set(err, EMQ_ESERVER, 0,
                              "stream '%s' does not exist and "
                              "producer.nomkstream is set",
                              key);
    return emq__reply_error_set(err, reply, "adding to '%s' failed", key);
}

int emq__producer_durable(const emq_producer_t *p) {
    return emq__cfg_producer_wait_replicas(p->conf) > 0 ||
           emq__cfg_producer_wait_aof(p->conf);
}

int emq__producer_wait_words(const emq_producer_t *p, char replicas[24],
                             char timeout[24], const char *argv[4]) {
    snprintf(replicas, 24, "%lld",
             (long long)emq__cfg_producer_wait_replicas(p->conf));
    snprintf(timeout, 24, "%lld",
             (long long)emq__cfg_producer_wait_timeout_ms(p->conf));
    int n = 0;
    if (emq__cfg_producer_wait_aof(p->conf)) {
        argv[n++] = "WAITAOF";
        argv[n++] = "1";
    } else {
        argv[n++] = "WAIT";
    }
    argv[n++] = replicas;
    argv[n++] = timeout;
    return n;
}

emq_status emq__producer_wait_reply(const emq_producer_t *p,
                                    const emq_reply *reply,
                                    const emq_error *failed, emq_error *err) {
    const emq_conf_t *c = p->conf;
    const char *what = emq__cfg_producer_wait_aof(c) ? "WAITAOF" : "WAIT";
    if (reply == NULL)
        return emq__error_set(err, EMQ_ENOTDURABLE, 1,
                              "added, but %s was not run: %s", what,
                              failed->message);
    long long replicas = -1, local = 1;
    if (emq_reply_kind(reply) == EMQ_REPLY_INTEGER) {
        replicas = emq_reply_integer(reply);
    } else if (emq_reply_kind(reply) == EMQ_REPLY_ARRAY &&
               emq_reply_len(reply) == 2 &&
               emq_reply_kind(emq_reply_at(reply, 0)) == EMQ_REPLY_INTEGER &&
               emq_reply_kind(emq_reply_at(reply, 1)) == EMQ_REPLY_INTEGER) {
        local = emq_reply_integer(emq_reply_at(reply, 0));
        replicas = emq_reply_integer(emq_reply_at(reply, 1));
    } else {
        return emq__reply_error_as(err, EMQ_ENOTDURABLE, 0, reply,
                                   "added, but %s was refused", what);
    }
    if (replicas >= emq__cfg_producer_wait_replicas(c) && local >= 1)
        return EMQ_OK;
    if (local < 1)
        return emq__error_set(err, EMQ_ENOTDURABLE, 1,
                              "added, but not yet in the AOF after %lld ms "
                              "(producer.wait_timeout_ms)",
                              (long long)emq__cfg_producer_wait_timeout_ms(c));
    return emq__error_set(err, EMQ_ENOTDURABLE, 1,
                          "added, but on %lld of %lld replicas after %lld ms "
                          "(producer.wait_replicas, producer.wait_timeout_ms)",
                          replicas,
                          (long long)emq__cfg_producer_wait_replicas(c),
                          (long long)emq__cfg_producer_wait_timeout_ms(c));
}

emq_status emq__producer_open(const emq_conf_t *conf, emq_producer_t **out,
                              emq_error *err) {
    if (out == NULL)
        return emq__error_set(err, EMQ_EINVAL, 0, "out must not be NULL");
    *out = NULL;
    if (conf == NULL)
        return emq__error_set(err, EMQ_EINVAL, 0,
                              "a producer needs a configuration");
    emq_producer_t *p = emq__calloc(1, sizeof *p);
    if (p == NULL)
        return emq__oom(err);
    emq_status st = EMQ_OK;
    p->conf = emq_conf_dup(conf);
    p->argv_cap = 64; /* head, ID and 27 pairs before the first growth */
    p->argv = emq__alloc(p->argv_cap * sizeof *p->argv);
    p->argvlen = emq__alloc(p->argv_cap * sizeof *p->argvlen);
    if (p->conf == NULL || p->argv == NULL || p->argvlen == NULL)
        st = emq__oom(err);
    int topic = emq__topic_is(conf);
    if (st == EMQ_OK && topic)
        st = emq__topic_check(conf, err);
    if (st == EMQ_OK)
        st = emq__keys_resolve(emq__cfg_queue(conf), emq__cfg_stream(conf),
                               &p->keys, err);
    if (st == EMQ_OK)
        st = emq__delayed_keys_make(&p->keys, &p->delayed, err);
    if (st == EMQ_OK &&
        ((p->dedup_prefix = emq__keys_join(&p->keys, "dedup:", NULL)) == NULL ||
         (p->plans = emq__alloc(EMQ_ADD_BATCH_MAX * sizeof *p->plans)) ==
             NULL ||
         (p->texts = emq__alloc(EMQ_ADD_BATCH_MAX * sizeof *p->texts)) == NULL))
        st = emq__oom(err);
    if (st == EMQ_OK)
        p->dedup_prefix_len = strlen(p->dedup_prefix);
    if (st == EMQ_OK)
        st = build_head(p, err); /* a topic's policy is checked here too */
    if (st == EMQ_OK && !topic)  /* a topic's partitions send */
        st = emq__sender_start(p, err);
    if (st != EMQ_OK) {
        emq__producer_close(p);
        return st;
    }
    *out = p;
    return EMQ_OK;
}

void emq__producer_close(emq_producer_t *p) {
    if (p == NULL)
        return;
    emq__sender_stop(p);
    emq__delayed_keys_free(&p->delayed);
    emq__free(p->dedup_prefix);
    emq__free(p->dedup_names);
    emq__free(p->plans);
    emq__free(p->texts);
    emq__keys_free(&p->keys);
    emq__free(p->argv);
    emq__free(p->argvlen);
    emq_conf_destroy(p->conf);
    emq__free(p);
}

void emq__producer_clear_ids(emq_id *ids, size_t n) {
    if (ids)
        for (size_t i = 0; i < n; i++)
            ids[i].str[0] = '\0';
}

_Static_assert(EMQ_ADD_MAX_PAIRS == 3000, "the message below says 3,000");

emq_status emq__producer_check(const emq_producer_t *p, const emq_message *msgs,
                               const emq__extra *when, size_t n, int single,
                               emq_error *err) {
    if (n > 0 && msgs == NULL)
        return emq__error_set(err, EMQ_EINVAL, 0, "msgs is NULL but n is %zu",
                              n);
    size_t max_pairs = ((size_t)INT_MAX - p->nhead - 1) / 2;
    for (size_t i = 0; i < n; i++) {
        const emq_message *m = &msgs[i];
        const emq__extra *x = when ? &when[i] : NULL;
        int delays = emq__extra_delays(x), scripted = emq__extra_scripted(x);
        const char *what = NULL;
        if (m->fields == NULL || m->nfields == 0)
            what = "has no fields; a stream entry needs at least one "
                   "field/value pair";
        else if (m->nfields > max_pairs)
            what = "has too many fields for one command";
        else if (delays && m->id != NULL)
            what = "is delayed and has an explicit ID; a delayed entry gets "
                   "its ID when it is moved to the stream";
        else if (x && x->level1 > 0 && m->id != NULL)
            what = "has a priority and an explicit ID; an entry with a "
                   "priority gets its ID when a consumer reads it";
        else if (scripted && m->id != NULL)
            what = "has an idempotency key and an explicit ID; a "
                   "de-duplicated entry's ID is automatic";
        else if (scripted && m->nfields > EMQ_ADD_MAX_PAIRS)
            what = "is delayed, has an idempotency key or a priority and "
                   "has more than 3,000 field/value pairs, the most such "
                   "an entry may have";
        if (what == NULL)
            continue;
        if (single)
            return emq__error_set(err, EMQ_EINVAL, 0, "the entry %s", what);
        return emq__error_set(err, EMQ_EINVAL, 0,
                              "entry %zu %s; nothing of the batch was sent", i,
                              what);
    }
    return EMQ_OK;
}

emq_status emq__producer_opts(const emq_producer_t *p,
                              const emq_produce_opts *opts, emq__extra *x,
                              const char **key, size_t *key_len,
                              emq_error *err) {
    memset(x, 0, sizeof *x);
    if (key) {
        *key = NULL;
        *key_len = 0;
    }
    if (opts == NULL)
        return EMQ_OK;
    if (opts->version < 1 || opts->version > EMQ_PRODUCE_OPTS_VERSION)
        return emq__error_set(err, EMQ_EINVAL, 0,
                              "emq_produce_opts version %u is not one this "
                              "library knows (1 to %d); start from "
                              "EMQ_PRODUCE_OPTS_INIT",
                              opts->version, EMQ_PRODUCE_OPTS_VERSION);
    struct {
        const char *name;
        int64_t value;
    } const numbers[] = {{"delay_ms", opts->delay_ms},
                         {"due_ms", opts->due_ms},
                         {"dedup_ttl_ms", opts->dedup_ttl_ms}};
    for (size_t i = 0; i < 3; i++)
        if (numbers[i].value < 0 || numbers[i].value > EMQ_DELAYED_MAX_MS)
            return emq__error_set(err, EMQ_EINVAL, 0,
                                  "%s %" PRId64
                                  " is out of range (0 to 2^53 ms)",
                                  numbers[i].name, numbers[i].value);
    if (opts->delay_ms > 0 && opts->due_ms > 0)
        return emq__error_set(err, EMQ_EINVAL, 0,
                              "delay_ms and due_ms are both set; an entry "
                              "is delayed by one of them");
    if (opts->dedup_key != NULL &&
        (opts->dedup_key_len == 0 || opts->dedup_key_len > EMQ_DEDUP_KEY_MAX))
        return emq__error_set(err, EMQ_EINVAL, 0,
                              "dedup_key is %zu bytes; an idempotency key "
                              "has 1 to %d",
                              opts->dedup_key_len, EMQ_DEDUP_KEY_MAX);
    int64_t priority = opts->version >= 2 ? opts->priority : -1;
    if (priority < -1 || priority >= EMQ_PRIORITY_LEVELS)
        return emq__error_set(err, EMQ_EINVAL, 0,
                              "priority %" PRId64
                              " is out of range (0, the most urgent, to 9; "
                              "-1: none)",
                              priority);
    x->level1 = (int)priority + 1;
    x->delay_ms = opts->delay_ms;
    x->due_ms = opts->due_ms;
    x->dedup = opts->dedup_key;
    x->dedup_len = opts->dedup_key ? opts->dedup_key_len : 0;
    x->dedup_ttl_ms = opts->dedup_ttl_ms > 0 ? opts->dedup_ttl_ms
                                             : emq__cfg_dedup_ttl_ms(p->conf);
    if (key) {
        *key = opts->key;
        *key_len = opts->key ? opts->key_len : 0;
    }
    return EMQ_OK;
}

emq_status emq__producer_queue(emq_producer_t *p, const emq_message *msgs,
                               const emq__extra *when, size_t n, emq_id *ids,
                               size_t *written, int single, emq_error *err) {
    if (written)
        *written = 0;
    if (p == NULL) {
        emq__producer_clear_ids(ids, n);
        return emq__error_set(err, EMQ_EINVAL, 0, "producer is NULL");
    }
    emq_status st = emq__producer_check(p, msgs, when, n, single, err);
    if (st != EMQ_OK) {
        emq__producer_clear_ids(ids, n);
        return st;
    }
    if (single && n == 1) {
        st = emq__sender_one(p, msgs, when, ids, err);
        if (written)
            *written = st == EMQ_OK || st == EMQ_ENOTDURABLE;
        return st;
    }
    return emq__sender_batch(p, msgs, when, n, ids, written, single, err);
}
