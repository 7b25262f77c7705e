/* SPDX-License-Identifier: BSD-3-Clause */
/* queue_features.c: the work-queue features together: priorities, a
 * delay, an idempotency key, a cancellation and group limits.
 *
 *   queue_features URL [QUEUE]
 *
 * Produces to QUEUE (default "example-features"): three jobs of
 * priorities 9, 5 and 1; one with the idempotency key "invoice-42",
 * produced twice (held once: the second call answers the first handle);
 * one of priority 0 due in 300 ms; one delayed by a minute and then
 * cancelled (emq_admin_cancel). It limits the group "workers" to 100
 * entries a second and 2 in flight (emq_admin_group_limits), shows what
 * waits (emq_admin_priorities, emq_admin_delayed), then consumes in pull
 * mode, one job at a time (max_in_flight 1), each taking 150 ms of work:
 * the jobs come most urgent first, the delayed urgent one as soon as it
 * is due (ahead of what still waits then), never the cancelled one. It stops
 * when the five came, or after 10 s. Every call is checked and a failure prints
 * the emq_error message. Uses only echomq.h.
 */
#include <echomq.h>

#include <stdio.h>
#include <string.h>
#include <time.h>

static int failed(const char *what, const emq_error *err) {
    fprintf(stderr, "queue_features: %s: %s\n", what, err->message);
    return 1;
}

/* Produces {"job": name} with opts; prints the handle it got. */
static int produce(emq_producer_t *p, const char *name,
                   const emq_produce_opts *o, emq_id *id) {
    emq_error err;
    emq_field f = {"job", 3, name, strlen(name)};
    if (emq_produce_ex(p, &f, 1, o, id, &err) != EMQ_OK)
        return failed("produce", &err);
    printf("produced %s as %s\n", name, id->str);
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 2 || argc > 3) {
        fprintf(stderr, "usage: queue_features URL [QUEUE]\n");
        return 2;
    }
    const char *queue = argc > 2 ? argv[2] : "example-features";
    emq_error err;
    emq_conf_t *conf = emq_conf_new();
    if (conf == NULL || emq_conf_set(conf, "url", argv[1], &err) != EMQ_OK ||
        emq_conf_set(conf, "queue", queue, &err) != EMQ_OK)
        return conf ? failed("configuration", &err) : 1;

    emq_producer_t *p;
    if (emq_producer_new(conf, &p, &err) != EMQ_OK)
        return failed("producer", &err);
    emq_id id, first, later;
    static const char *const jobs[] = {"report-9", "email-5", "refund-1"};
    static const int levels[] = {9, 5, 1};
    int rc = 0;
    for (int i = 0; i < 3 && rc == 0; i++) {
        emq_produce_opts o = EMQ_PRODUCE_OPTS_INIT;
        o.priority = levels[i];
        rc = produce(p, jobs[i], &o, &id);
    }
    emq_produce_opts once = EMQ_PRODUCE_OPTS_INIT;
    once.priority = 3;
    once.dedup_key = "invoice-42";
    once.dedup_key_len = strlen(once.dedup_key);
    if (rc == 0)
        rc = produce(p, "invoice-3", &once, &first);
    if (rc == 0)
        rc = produce(p, "invoice-3", &once, &id); /* a retry: no second job */
    if (rc == 0 && strcmp(id.str, first.str) != 0)
        rc = 1;
    emq_produce_opts soon = EMQ_PRODUCE_OPTS_INIT;
    soon.priority = 0;
    soon.delay_ms = 300;
    if (rc == 0)
        rc = produce(p, "page-0", &soon, &id);
    emq_produce_opts hour = EMQ_PRODUCE_OPTS_INIT;
    hour.delay_ms = 60000;
    if (rc == 0)
        rc = produce(p, "cancelled", &hour, &later);
    emq_producer_destroy(p);
    if (rc != 0)
        return rc;

    emq_admin_t *a;
    if (emq_admin_new(conf, &a, &err) != EMQ_OK)
        return failed("admin", &err);
    const char *cancel[] = {later.str};
    emq_cancel_outcome outcome;
    if (emq_admin_cancel(a, cancel, 1, &outcome, NULL, &err) != EMQ_OK)
        return failed("cancel", &err);
    printf("cancelled %s: %s\n", later.str,
           outcome == EMQ_CANCEL_REMOVED ? "removed" : "not removed");
    emq_group_limits limits = {100, 2};
    if (emq_admin_group_limits(a, "workers", &limits, NULL, &err) != EMQ_OK)
        return failed("group limits", &err);
    emq_priority_info pi;
    emq_delayed_info di;
    if (emq_admin_priorities(a, -1, &pi, NULL, &err) != EMQ_OK ||
        emq_admin_delayed(a, &di, &err) != EMQ_OK)
        return failed("counting", &err);
    printf("held %llu (level 1: %llu), delayed %llu\n",
           (unsigned long long)pi.held, (unsigned long long)pi.held_at[1],
           (unsigned long long)di.waiting);
    emq_admin_destroy(a);

    if (emq_conf_set(conf, "group", "workers", &err) != EMQ_OK ||
        emq_conf_set(conf, "consumer", "example-1", &err) != EMQ_OK ||
        emq_conf_set(conf, "start", "head", &err) != EMQ_OK ||
        emq_conf_set(conf, "block_ms", "200", &err) != EMQ_OK ||
        emq_conf_set(conf, "max_in_flight", "1", &err) != EMQ_OK)
        return failed("configuration", &err);
    emq_consumer_t *c;
    if (emq_consumer_new(conf, NULL, NULL, &c, &err) != EMQ_OK)
        return failed("consumer", &err);
    emq_conf_destroy(conf);
    /* Bounded: 10 s at most, whatever came. The delayed page comes once
     * due: ahead of whatever still waits then. */
    int64_t start = emq_clock_ms();
    int handled = 0;
    emq_status st = EMQ_OK;
    while (handled < 5 && emq_clock_ms() - start < 10000 && st == EMQ_OK) {
        emq_entry *e[1];
        size_t n = 0;
        st = emq_consumer_poll(c, e, 1, 200, &n, &err);
        for (size_t i = 0; i < n; i++) {
            printf("handled %.*s\n", (int)e[i]->fields[0].value_len,
                   e[i]->fields[0].value);
            struct timespec work = {0, 150 * 1000 * 1000};
            nanosleep(&work, NULL);
            handled++;
            if (st == EMQ_OK)
                st = emq_consumer_ack(c, e[i], &err);
            emq_entry_free(e[i]);
        }
    }
    emq_consumer_destroy(c);
    if (st != EMQ_OK)
        return failed("consume", &err);
    return handled == 5 ? 0 : 1;
}
