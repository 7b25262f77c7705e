/* SPDX-License-Identifier: BSD-3-Clause */
/* topic_pipeline.c: a keyed topic end to end: a batch producer, a pool of
 * workers, and the admin verbs an operator script runs.
 *
 *   topic_pipeline URL TOPIC
 *
 * 1. Produces 400 entries to TOPIC, a topic of 4 partitions, in one keyed
 *    batch (emq_produce_batch_keyed): the field "user" is the message key,
 *    so every user's entries go to one partition, in order, and each
 *    carries its sequence number for that user.
 * 2. Runs a pool of 3 workers (emq_pool_new: consumers "pipeline-1".."3"
 *    of group "pipeline", each on every partition) whose handler records
 *    each (user, seq) it is handed, until all 400 are handled. (Per-key
 *    order holds within one consumer; workers of one group share the
 *    partitions' entries, so across them only exactly-once is checked.)
 * 3. With an admin handle on the topic: prints its description as JSON,
 *    then trims what the group has acknowledged (emq_admin_trim_acked) and
 *    says how much went.
 *
 * Exits 0 when all 400 came once each, else 1 (usage: 2).
 * Uses only echomq.h, like any program outside the library.
 */
#include <echomq.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define USERS 8
#define ENTRIES 400

#define PER_USER (ENTRIES / USERS)

static atomic_int handled;
static atomic_int duplicates, strangers;
static atomic_int seen[USERS][PER_USER]; /* handed out, per (user, seq) */

/* A field's value as a number (-1 when absent). */
static long field_number(const emq_entry *e, const char *name) {
    for (size_t i = 0; i < e->nfields; i++)
        if (e->fields[i].name_len == strlen(name) &&
            memcmp(e->fields[i].name, name, e->fields[i].name_len) == 0) {
            char digits[24];
            size_t n = e->fields[i].value_len < 23 ? e->fields[i].value_len
                                                   : 23;
            memcpy(digits, e->fields[i].value, n);
            digits[n] = '\0';
            return strtol(digits, NULL, 10);
        }
    return -1;
}

/* Called from the pool's threads at once: counts each (user, seq). */
static emq_verdict handle(void *opaque, const emq_entry *e, char *reason,
                          size_t reason_size) {
    (void)opaque;
    (void)reason;
    (void)reason_size;
    long user = field_number(e, "user"), seq = field_number(e, "seq");
    if (user < 0 || user >= USERS || seq < 1 || seq > PER_USER)
        atomic_fetch_add(&strangers, 1);
    else if (atomic_fetch_add(&seen[user][seq - 1], 1) > 0)
        atomic_fetch_add(&duplicates, 1);
    atomic_fetch_add(&handled, 1);
    return EMQ_ACK;
}

/* Stops the pool once every entry was handled (or after 30 s). */
static void *stopper(void *pool) {
    for (int i = 0; i < 3000 && atomic_load(&handled) < ENTRIES; i++) {
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    emq_pool_stop(pool);
    return NULL;
}

static int fail(const char *what, const emq_error *err) {
    fprintf(stderr, "topic_pipeline: %s: %s\n", what, err->message);
    return 1;
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: topic_pipeline URL TOPIC\n");
        return 2;
    }
    emq_error err;
    emq_conf_t *conf = emq_conf_new();
    if (conf == NULL || emq_conf_set(conf, "url", argv[1], &err) != EMQ_OK ||
        emq_conf_set(conf, "queue", argv[2], &err) != EMQ_OK ||
        emq_conf_set(conf, "partitions", "4", &err) != EMQ_OK)
        return conf ? fail("configuration", &err) : 1;

    /* 1. One keyed batch: user u's entries carry seq 1, 2, ... */
    static char users[ENTRIES][8], seqs[ENTRIES][12];
    static emq_field fields[ENTRIES][2];
    static emq_keyed_message batch[ENTRIES];
    int next_seq[USERS] = {0};
    for (int i = 0; i < ENTRIES; i++) {
        int u = i % USERS;
        int ulen = snprintf(users[i], sizeof users[i], "%d", u);
        int slen = snprintf(seqs[i], sizeof seqs[i], "%d", ++next_seq[u]);
        fields[i][0] = (emq_field){"user", 4, users[i], (size_t)ulen};
        fields[i][1] = (emq_field){"seq", 3, seqs[i], (size_t)slen};
        batch[i] =
            (emq_keyed_message){{fields[i], 2, NULL}, users[i], (size_t)ulen};
    }
    emq_producer_t *producer;
    size_t written = 0;
    if (emq_producer_new(conf, &producer, &err) != EMQ_OK)
        return fail("producer", &err);
    emq_status st =
        emq_produce_batch_keyed(producer, batch, ENTRIES, NULL, &written, &err);
    emq_producer_destroy(producer);
    if (st != EMQ_OK)
        return fail("produce", &err);
    printf("produced %zu entries to topic '%s' (4 partitions)\n", written,
           argv[2]);

    /* 2. A pool of 3 workers on the group. */
    if (emq_conf_set(conf, "group", "pipeline", &err) != EMQ_OK ||
        emq_conf_set(conf, "consumer", "pipeline", &err) != EMQ_OK ||
        emq_conf_set(conf, "start", "head", &err) != EMQ_OK ||
        emq_conf_set(conf, "block_ms", "100", &err) != EMQ_OK)
        return fail("configuration", &err);
    emq_pool_t *pool;
    if (emq_pool_new(conf, 3, handle, NULL, &pool, &err) != EMQ_OK)
        return fail("pool", &err);
    pthread_t t;
    pthread_create(&t, NULL, stopper, pool);
    st = emq_pool_run(pool, &err);
    pthread_join(t, NULL);
    emq_pool_destroy(pool);
    if (st != EMQ_OK)
        return fail("pool run", &err);
    printf("handled %d entries: %d twice, %d not produced here\n",
           atomic_load(&handled), atomic_load(&duplicates),
           atomic_load(&strangers));

    /* 3. The operator's view: describe, then trim what was acknowledged. */
    emq_admin_t *admin;
    if (emq_admin_new(conf, &admin, &err) != EMQ_OK)
        return fail("admin", &err);
    emq_queue_info *info;
    if (emq_admin_describe(admin, &info, &err) != EMQ_OK)
        return fail("describe", &err);
    char json[16384];
    emq_queue_info_json(info, json, sizeof json);
    printf("%s\n", json);
    emq_queue_info_free(info);
    emq_trim_result trimmed;
    if (emq_admin_trim_acked(admin, -1, -1, &trimmed, &err) != EMQ_OK)
        return fail("trim", &err);
    printf("trimmed %llu acknowledged entries\n",
           (unsigned long long)trimmed.removed);
    emq_admin_destroy(admin);
    emq_conf_destroy(conf);
    return atomic_load(&handled) == ENTRIES && atomic_load(&duplicates) == 0 &&
                   atomic_load(&strangers) == 0 && written == ENTRIES
               ? 0
               : 1;
}
