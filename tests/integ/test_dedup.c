/* SPDX-License-Identifier: BSD-3-Clause */
/* test_dedup.c: idempotency keys (emq_produce_opts dedup_key) against a
 * real redis-server.
 *
 * An entry with a key already used within its window is not added and the
 * call answers the first entry's ID; other keys, and the same key after
 * its window, add. Eight threads racing with one key add one entry and all
 * get its ID. Duplicates inside one batch, delayed entries with a key,
 * and bad keys. The producer's own re-sends add nothing twice: after a
 * "not now" reply to a script the server did run, and after an unknown
 * outcome with producer.retries (a reply lost to a protocol error, the
 * entry sent again, attempts 2).
 */
#include "harness/fakepeer.h"
#include "integ/consumer_helpers.h"
#include "integ/tally_helpers.h"

#include <stdlib.h>

static long long xlen_of(const emq_srv *s, const char *key) {
    char out[64];
    ASSERT(emq_srv_cmd(s, out, sizeof out, "XLEN", key, NULL) == ':');
    return atoll(out);
}

/* Produces {"n": value} with idempotency key key into *id. */
static emq_status produce_keyed_once(emq_producer_t *p, const char *value,
                                     const char *key, int64_t ttl_ms,
                                     emq_id *id, emq_error *err) {
    emq_field f = {"n", 1, value, strlen(value)};
    emq_produce_opts o = EMQ_PRODUCE_OPTS_INIT;
    o.dedup_key = key;
    o.dedup_key_len = strlen(key);
    o.dedup_ttl_ms = ttl_ms;
    return emq_produce_ex(p, &f, 1, &o, id, err);
}

TEST(dedup_second_entry_with_a_key_is_not_added_and_answers_the_first_id) {
    emq_srv *s = emq_srv_start(NULL);
    emq_producer_t *p = producer_for(s, "dd");
    emq_id a, b, c, d;
    emq_error err;
    ASSERT_OK(produce_keyed_once(p, "1", "order-42", 0, &a, &err), &err);
    ASSERT_OK(produce_keyed_once(p, "2", "order-42", 0, &b, &err), &err);
    ASSERT_OK(produce_keyed_once(p, "3", "order-43", 0, &c, &err), &err);
    ASSERT_EQ_STR(a.str, b.str);
    ASSERT(strcmp(a.str, c.str) != 0);
    ASSERT_EQ_INT(xlen_of(s, "emq:{dd}"), 2);
    /* The stored entry is the first one. */
    char out[256];
    emq_srv_cmd(s, out, sizeof out, "XRANGE", "emq:{dd}", a.str, a.str, NULL);
    ASSERT_CONTAINS(out, "\n1");
    /* The key lives 24 h by default (dedup.ttl_ms). */
    emq_srv_cmd(s, out, sizeof out, "PTTL", "emq:{dd}:dedup:order-42", NULL);
    long long ttl = atoll(out);
    ASSERT(ttl > 86000000 && ttl <= 86400000);
    /* A short window: after it, the key adds again. */
    ASSERT_OK(produce_keyed_once(p, "4", "short", 200, &c, &err), &err);
    usleep(400 * 1000);
    ASSERT_OK(produce_keyed_once(p, "5", "short", 200, &d, &err), &err);
    ASSERT(strcmp(c.str, d.str) != 0);
    ASSERT_EQ_INT(xlen_of(s, "emq:{dd}"), 4);
    /* A plain entry without a key is still one XADD. */
    emq_field f = {"n", 1, "plain", 5};
    ASSERT_OK(emq_produce(p, &f, 1, NULL, &err), &err);
    ASSERT_EQ_INT(xlen_of(s, "emq:{dd}"), 5);
    emq_producer_destroy(p);
    emq_srv_stop(s);
}

typedef struct racer {
    emq_producer_t *p;
    emq_id id;
    emq_status st;
    emq_error err;
    char value[8];
} racer;

static void *race(void *arg) {
    racer *r = arg;
    r->st = produce_keyed_once(r->p, r->value, "same", 0, &r->id, &r->err);
    return NULL;
}

TEST(dedup_racing_producers_add_one_entry) {
    emq_srv *s = emq_srv_start(NULL);
    enum { T = 8 };
    emq_producer_t *ps[T];
    racer r[T];
    pthread_t th[T];
    for (int i = 0; i < T; i++) {
        ps[i] = producer_for(s, "race"); /* eight connections */
        r[i] = (racer){.p = ps[i]};
        snprintf(r[i].value, sizeof r[i].value, "%d", i);
    }
    for (int i = 0; i < T; i++)
        ASSERT(pthread_create(&th[i], NULL, race, &r[i]) == 0);
    for (int i = 0; i < T; i++)
        pthread_join(th[i], NULL);
    for (int i = 0; i < T; i++) {
        ASSERT_OK(r[i].st, &r[i].err);
        ASSERT_EQ_STR(r[i].id.str, r[0].id.str);
        emq_producer_destroy(ps[i]);
    }
    ASSERT_EQ_INT(xlen_of(s, "emq:{race}"), 1);
    emq_srv_stop(s);
}

TEST(dedup_in_one_batch_delayed_and_bad_keys) {
    emq_srv *s = emq_srv_start(NULL);
    emq_producer_t *p = producer_for(s, "db");
    emq_field f = {"n", 1, "x", 1};
    emq_message m[4] = {
        {&f, 1, NULL}, {&f, 1, NULL}, {&f, 1, NULL}, {&f, 1, NULL}};
    emq_produce_opts o[4] = {EMQ_PRODUCE_OPTS_INIT, EMQ_PRODUCE_OPTS_INIT,
                             EMQ_PRODUCE_OPTS_INIT, EMQ_PRODUCE_OPTS_INIT};
    const char *keys[4] = {"k1", "k2", "k1", NULL};
    for (int i = 0; i < 4; i++) {
        o[i].dedup_key = keys[i];
        o[i].dedup_key_len = keys[i] ? strlen(keys[i]) : 0;
    }
    emq_id ids[4];
    size_t written;
    emq_error err;
    ASSERT_OK(emq_produce_batch_ex(p, m, o, 4, ids, &written, &err), &err);
    ASSERT_EQ_SIZE(written, 4);
    ASSERT_EQ_STR(ids[0].str, ids[2].str);
    ASSERT(strcmp(ids[0].str, ids[1].str) != 0);
    ASSERT_EQ_INT(xlen_of(s, "emq:{db}"), 3);
    /* Delayed with a key: one waiting entry, its handle answered twice. */
    emq_produce_opts d = EMQ_PRODUCE_OPTS_INIT;
    d.delay_ms = 3600000;
    d.dedup_key = "later";
    d.dedup_key_len = 5;
    emq_id h1, h2;
    ASSERT_OK(emq_produce_ex(p, &f, 1, &d, &h1, &err), &err);
    ASSERT_OK(emq_produce_ex(p, &f, 1, &d, &h2, &err), &err);
    ASSERT(strncmp(h1.str, "delayed-", 8) == 0);
    ASSERT_EQ_STR(h1.str, h2.str);
    char out[64];
    emq_srv_cmd(s, out, sizeof out, "ZCARD", "emq:{db}:delayed", NULL);
    ASSERT_EQ_STR(out, "1");
    /* Binary keys are kept byte-exact in the key name. */
    static const char bin[] = "k\0\xff";
    emq_produce_opts b = EMQ_PRODUCE_OPTS_INIT;
    b.dedup_key = bin;
    b.dedup_key_len = 3;
    ASSERT_OK(emq_produce_ex(p, &f, 1, &b, &h1, &err), &err);
    ASSERT_OK(emq_produce_ex(p, &f, 1, &b, &h2, &err), &err);
    ASSERT_EQ_STR(h1.str, h2.str);
    /* Bad keys: refused before anything is sent. */
    long long before = xlen_of(s, "emq:{db}");
    b.dedup_key_len = 0;
    ASSERT_EQ_INT(emq_produce_ex(p, &f, 1, &b, &h1, &err), EMQ_EINVAL);
    ASSERT_CONTAINS(err.message, "dedup_key is 0 bytes");
    static char big[600];
    memset(big, 'k', sizeof big);
    b.dedup_key = big;
    b.dedup_key_len = sizeof big;
    ASSERT_EQ_INT(emq_produce_ex(p, &f, 1, &b, &h1, &err), EMQ_EINVAL);
    ASSERT_CONTAINS(err.message, "1 to 512");
    emq_message with_id = {&f, 1, "99-1"};
    o[0].dedup_key = "k9";
    o[0].dedup_key_len = 2;
    ASSERT_EQ_INT(emq_produce_batch_ex(p, &with_id, o, 1, ids, &written, &err),
                  EMQ_EINVAL);
    ASSERT_CONTAINS(err.message, "idempotency key and an explicit ID");
    ASSERT_EQ_INT(xlen_of(s, "emq:{db}"), before);
    emq_producer_destroy(p);
    emq_srv_stop(s);
}

/* A batch of keyed entries goes 100 to one add call: 300 entries with
 * 250 keys (50 repeat a key of the same batch, 25 a key of an earlier
 * call) are three calls; each key's entry is added once and every repeat
 * answers its first ID, in the batch's order. */
TEST(dedup_batch_goes_in_few_calls_each_key_once) {
    emq_srv *s = emq_srv_start(NULL);
    emq_producer_t *p = producer_for(s, "bk");
    emq_field f = {"n", 1, "x", 1};
    emq_produce_opts one = EMQ_PRODUCE_OPTS_INIT;
    one.dedup_key = "k0";
    one.dedup_key_len = 2;
    emq_id first;
    emq_error err;
    ASSERT_OK(emq_produce_ex(p, &f, 1, &one, &first, &err), &err);
    enum { N = 300 };
    static emq_message m[N];
    static emq_produce_opts o[N];
    static char keys[N][16];
    for (int i = 0; i < N; i++) {
        /* 0..249 new keys; 250..299 repeat keys 0..49 */
        snprintf(keys[i], sizeof keys[i], "k%d", i < 250 ? i : i - 250);
        m[i] = (emq_message){&f, 1, NULL};
        o[i] = (emq_produce_opts)EMQ_PRODUCE_OPTS_INIT;
        o[i].dedup_key = keys[i];
        o[i].dedup_key_len = strlen(keys[i]);
    }
    const char *script = emq_srv_script_command();
    char lower[8];
    snprintf(lower, sizeof lower, "%s",
             strcmp(script, "FCALL") ? "eval" : "fcall");
    long long calls = emq_srv_calls(s, lower, NULL);
    static emq_id ids[N];
    size_t written;
    ASSERT_OK(emq_produce_batch_ex(p, m, o, N, ids, &written, &err), &err);
    ASSERT_EQ_SIZE(written, N);
    long long used = emq_srv_calls(s, lower, NULL) - calls;
    ASSERT(used >= 3 && used <= 4);       /* 100 to a call (a window may cut) */
    ASSERT_EQ_STR(ids[0].str, first.str); /* "k0" was added before */
    for (int i = 250; i < N; i++)
        ASSERT_EQ_STR(ids[i].str, ids[i - 250].str);
    for (int i = 2; i < 250; i++) /* each new key its own entry */
        ASSERT(strcmp(ids[i - 1].str, ids[i].str) != 0);
    ASSERT_EQ_INT(xlen_of(s, "emq:{bk}"), 250);
    emq_producer_destroy(p);
    emq_srv_stop(s);
}

TEST(dedup_resend_after_a_not_now_reply_adds_nothing_twice) {
    emq_srv *s = emq_srv_start(NULL);
    /* The server runs the first script; the client is told LOADING (the
     * reply a server restarting from its AOF gives) and sends it again. */
    emq_icept_rule rule = {emq_srv_script_command(),
                           -1,
                           "-LOADING Redis is loading\r\n",
                           0,
                           1,
                           "dedup",
                           0};
    emq_icept *x = emq_icept_start(emq_srv_port(s), &rule, 1);
    emq_conf_t *conf = conf_for(emq_icept_url(x));
    conf_set(conf, "queue", "nn");
    emq_producer_t *p;
    emq_error err;
    ASSERT_OK(emq_producer_new(conf, &p, &err), &err);
    emq_id id;
    ASSERT_OK(produce_keyed_once(p, "1", "once", 0, &id, &err), &err);
    ASSERT_EQ_INT(emq_icept_replaced(x), 1);
    ASSERT_EQ_INT(xlen_of(s, "emq:{nn}"), 1);
    char out[64];
    emq_srv_cmd(s, out, sizeof out, "GET", "emq:{nn}:dedup:once", NULL);
    ASSERT_EQ_STR(out, id.str);
    emq_producer_destroy(p);
    emq_conf_destroy(conf);
    emq_icept_stop(x);
    emq_srv_stop(s);
}

typedef struct outcome {
    pthread_mutex_t mu;
    int calls;
    emq_status st;
    unsigned attempts;
    char id[EMQ_ID_MAX];
} outcome;

static void on_outcome(void *opaque, const emq_delivery *d) {
    outcome *o = opaque;
    pthread_mutex_lock(&o->mu);
    o->calls++;
    o->st = d->status;
    o->attempts = d->attempts;
    snprintf(o->id, sizeof o->id, "%s", d->id);
    pthread_mutex_unlock(&o->mu);
}

TEST(dedup_retries_after_an_unknown_outcome_add_nothing_twice) {
    emq_srv *s = emq_srv_start(NULL);
    /* The server runs the script; its reply is replaced by bytes no RESP
     * reply starts with: the connection fails after the entry was added,
     * so its outcome is unknown and producer.retries sends it again. */
    emq_icept_rule rule = {
        emq_srv_script_command(), -1, "?\r\n", 0, 1, "dedup", 0};
    emq_icept *x = emq_icept_start(emq_srv_port(s), &rule, 1);
    emq_conf_t *conf = conf_for(emq_icept_url(x));
    conf_set(conf, "queue", "uo");
    conf_set(conf, "producer.retries", "3");
    emq_producer_t *p;
    emq_error err;
    ASSERT_OK(emq_producer_new(conf, &p, &err), &err);
    emq_field f = {"n", 1, "1", 1};
    emq_produce_opts o = EMQ_PRODUCE_OPTS_INIT;
    o.dedup_key = "pay-7";
    o.dedup_key_len = 5;
    outcome out = {.mu = PTHREAD_MUTEX_INITIALIZER};
    ASSERT_OK(emq_produce_async_ex(p, &f, 1, &o, on_outcome, &out, &err), &err);
    ASSERT_OK(emq_producer_flush(p, emq_test_ms(20000), &err), &err);
    ASSERT_EQ_INT(out.calls, 1);
    ASSERT_EQ_INT(out.st, EMQ_OK);
    ASSERT_EQ_INT(out.attempts, 2);
    ASSERT_EQ_INT(emq_icept_replaced(x), 1);
    ASSERT_EQ_INT(xlen_of(s, "emq:{uo}"), 1);
    char stored[64];
    emq_srv_cmd(s, stored, sizeof stored, "GET", "emq:{uo}:dedup:pay-7", NULL);
    ASSERT_EQ_STR(out.id, stored);
    emq_producer_destroy(p);
    emq_conf_destroy(conf);
    emq_icept_stop(x);
    emq_srv_stop(s);
}

/* Idempotency keys squatted by a hand or a lower role (the producer line
 * may SET them): a value that is not an ID (terminal escapes), and an
 * ID kept for ever (no TTL), are not records of an entry: the entry is
 * added, the key written over, and the call answers the new ID. Before,
 * either suppressed the job for ever, and `produce` printed the value
 * raw. A record this client wrote still answers its ID. */
TEST(dedup_squatted_keys_suppress_nothing) {
    emq_srv *s = emq_srv_start(NULL);
    char out[128];
    emq_srv_cmd(s, out, sizeof out, "SET", "emq:{sq}:dedup:pay-1", "\x1b[2J0-1",
                "PX", "100000", NULL);
    emq_srv_cmd(s, out, sizeof out, "SET", "emq:{sq}:dedup:pay-2", "0-1", NULL);
    emq_producer_t *p = producer_for(s, "sq");
    emq_id a, b, c;
    emq_error err;
    ASSERT_OK(produce_keyed_once(p, "1", "pay-1", 0, &a, &err), &err);
    ASSERT_OK(produce_keyed_once(p, "2", "pay-2", 0, &b, &err), &err);
    ASSERT(strchr(a.str, '\x1b') == NULL);
    ASSERT(strcmp(b.str, "0-1") != 0);
    ASSERT_EQ_INT(xlen_of(s, "emq:{sq}"), 2);
    /* Now they are records: a second call adds nothing. */
    ASSERT_OK(produce_keyed_once(p, "3", "pay-2", 0, &c, &err), &err);
    ASSERT_EQ_STR(c.str, b.str);
    ASSERT_EQ_INT(xlen_of(s, "emq:{sq}"), 2);
    emq_producer_destroy(p);
    emq_srv_stop(s);
}
