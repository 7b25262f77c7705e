/* SPDX-License-Identifier: BSD-3-Clause */
/* admin_tour.c: the admin verbs on a queue with something to show.
 *
 *   admin_tour URL QUEUE
 *
 * 1. Produces 10 entries to QUEUE (emq_produce, field "n" = 1..10).
 * 2. A pull-mode consumer ("tour-1" of group "tour", from the head) takes
 *    all 10: it acknowledges 1..6, sends 7 and 8 to the dead letters
 *    (emq_consumer_dead) and leaves 9 and 10 unsettled, so they stay
 *    pending to its name after emq_consumer_close.
 * 3. With an admin handle, what an operator looks at: the description
 *    (emq_admin_describe, as JSON), the group's pending entries
 *    (emq_admin_pending), the dead letters with their reasons
 *    (emq_admin_dead_list); then what an operator does: requeue the dead
 *    letters onto the queue (emq_admin_dead_requeue) and trim what no
 *    group needs any more (emq_admin_trim_acked), and describe again.
 *
 * Exits 0 when it saw 2 pending entries and 2 dead letters, requeued both
 * and trimmed something, else 1 (usage: 2). Run it on a fresh queue name.
 * Uses only echomq.h, like any program outside the library.
 */
#include <echomq.h>

#include <stdio.h>
#include <string.h>

#define ENTRIES 10

static int fail(const char *what, const emq_error *err) {
    fprintf(stderr, "admin_tour: %s: %s\n", what, err->message);
    return 1;
}

/* The number in an entry's field "n" (0 when absent). */
static int entry_number(const emq_entry *e) {
    for (size_t i = 0; i < e->nfields; i++)
        if (e->fields[i].name_len == 1 && e->fields[i].name[0] == 'n' &&
            e->fields[i].value_len < 4) {
            char digits[4];
            memcpy(digits, e->fields[i].value, e->fields[i].value_len);
            digits[e->fields[i].value_len] = '\0';
            int n = 0;
            sscanf(digits, "%d", &n);
            return n;
        }
    return 0;
}

/* 1. Ten entries, n = 1..10. */
static int produce(const emq_conf_t *conf) {
    emq_error err;
    emq_producer_t *p;
    if (emq_producer_new(conf, &p, &err) != EMQ_OK)
        return fail("producer", &err);
    for (int i = 1; i <= ENTRIES; i++) {
        char n[4];
        int len = snprintf(n, sizeof n, "%d", i);
        emq_field f = {"n", 1, n, (size_t)len};
        if (emq_produce(p, &f, 1, NULL, &err) != EMQ_OK) {
            emq_producer_destroy(p);
            return fail("produce", &err);
        }
    }
    emq_producer_destroy(p);
    printf("produced %d entries\n", ENTRIES);
    return 0;
}

/* 2. Takes all ten and settles them as the header says. */
static int consume(const emq_conf_t *conf) {
    emq_error err;
    emq_consumer_t *c;
    if (emq_consumer_new(conf, NULL, NULL, &c, &err) != EMQ_OK)
        return fail("consumer", &err);
    int got = 0, acked = 0, dead = 0;
    for (int round = 0; got < ENTRIES && round < 50; round++) {
        emq_entry *entries[ENTRIES];
        size_t n = 0;
        if (emq_consumer_poll(c, entries, ENTRIES - (size_t)got, 200, &n,
                              &err) != EMQ_OK) {
            emq_consumer_destroy(c);
            return fail("poll", &err);
        }
        for (size_t i = 0; i < n; i++, got++) {
            int number = entry_number(entries[i]);
            emq_status st = EMQ_OK;
            if (number <= 6) {
                st = emq_consumer_ack(c, entries[i], &err);
                acked += st == EMQ_OK;
            } else if (number <= 8) {
                st = emq_consumer_dead(c, entries[i], "not a tour stop", &err);
                dead += st == EMQ_OK;
            } /* 9 and 10: left pending on purpose */
            if (st != EMQ_OK)
                fprintf(stderr, "admin_tour: settle: %s\n", err.message);
            emq_entry_free(entries[i]);
        }
    }
    /* The two unsettled entries stay pending to "tour-1" (a warning in the
     * log says so): what the pending list shows below. */
    emq_consumer_close(c, 500, NULL);
    emq_consumer_destroy(c);
    printf("consumed %d: acknowledged %d, dead-lettered %d, left %d "
           "pending\n",
           got, acked, dead, got - acked - dead);
    return got == ENTRIES ? 0 : 1;
}

/* Prints the queue's description as JSON. */
static int describe(emq_admin_t *admin, const char *when) {
    emq_error err;
    emq_queue_info *info;
    if (emq_admin_describe(admin, &info, &err) != EMQ_OK)
        return fail("describe", &err);
    char json[8192];
    emq_queue_info_json(info, json, sizeof json);
    printf("describe (%s): %s\n", when, json);
    emq_queue_info_free(info);
    return 0;
}

/* 3. Look, then act. Returns 0 when everything came out as expected. */
static int tour(emq_admin_t *admin) {
    emq_error err;
    char json[8192];
    if (describe(admin, "before") != 0)
        return 1;
    emq_pending_entry *pending;
    size_t npending;
    if (emq_admin_pending(admin, "tour", NULL, 0, 100, &pending, &npending,
                          &err) != EMQ_OK)
        return fail("pending", &err);
    emq_pending_json(pending, npending, json, sizeof json);
    printf("pending (%zu):\n%s", npending, json);
    emq_free_array(pending);

    emq_dead_letter *letters;
    size_t nletters;
    if (emq_admin_dead_list(admin, 0, &letters, &nletters, &err) != EMQ_OK)
        return fail("dead list", &err);
    emq_dead_letters_json(letters, nletters, json, sizeof json);
    printf("dead letters (%zu):\n%s", nletters, json);
    emq_dead_letters_free(letters, nletters);

    uint64_t requeued = 0;
    if (emq_admin_dead_requeue(admin, NULL, 0, &requeued, &err) != EMQ_OK)
        return fail("requeue", &err);
    printf("requeued %llu dead letters onto the queue\n",
           (unsigned long long)requeued);

    emq_trim_result trimmed;
    if (emq_admin_trim_acked(admin, -1, -1, &trimmed, &err) != EMQ_OK)
        return fail("trim", &err);
    printf("trimmed %llu entries no group needs (the oldest one needed: "
           "%s)\n",
           (unsigned long long)trimmed.removed,
           trimmed.floor.str[0] ? trimmed.floor.str : "none");
    if (describe(admin, "after") != 0)
        return 1;
    return npending == 2 && nletters == 2 && requeued == 2 &&
                   trimmed.removed > 0
               ? 0
               : 1;
}

/* One conf serves the producer, the consumer and the admin handle: the
 * queue, and the group and consumer name the consumer joins as. NULL
 * after saying why. */
static emq_conf_t *tour_conf(const char *url, const char *queue) {
    static const char *const props[][2] = {
        {"group", "tour"},
        {"consumer", "tour-1"},
        {"start", "head"},
        {"block_ms", "100"},
    };
    emq_error err;
    emq_conf_t *conf = emq_conf_new();
    if (conf == NULL)
        return NULL;
    emq_status st = emq_conf_set(conf, "url", url, &err);
    if (st == EMQ_OK)
        st = emq_conf_set(conf, "queue", queue, &err);
    for (size_t i = 0; st == EMQ_OK && i < sizeof props / sizeof props[0]; i++)
        st = emq_conf_set(conf, props[i][0], props[i][1], &err);
    if (st != EMQ_OK) {
        fail("configuration", &err);
        emq_conf_destroy(conf);
        return NULL;
    }
    return conf;
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: admin_tour URL QUEUE\n");
        return 2;
    }
    emq_conf_t *conf = tour_conf(argv[1], argv[2]);
    if (conf == NULL)
        return 1;
    emq_error err;
    int rc = produce(conf);
    if (rc == 0)
        rc = consume(conf);
    emq_admin_t *admin = NULL;
    if (rc == 0 && emq_admin_new(conf, &admin, &err) != EMQ_OK)
        rc = fail("admin", &err);
    if (rc == 0)
        rc = tour(admin);
    emq_admin_destroy(admin);
    emq_conf_destroy(conf);
    return rc;
}
