/* SPDX-License-Identifier: BSD-3-Clause */
/* delayed_jobs.c: jobs that run later, and one taken back before it runs.
 *
 *   delayed_jobs URL [QUEUE]
 *
 * Produces three reminders to QUEUE (default "example-delayed"): one at
 * once, one in 500 ms and one in 1 s (emq_produce_ex with delay_ms), then
 * cancels the third by the handle its produce call returned
 * (emq_admin_cancel) and shows what waits (emq_admin_delayed). A consumer
 * then handles what comes: the first at once, the second once it is due,
 * never the cancelled one (pull mode: emq_consumer_poll, then ack); it
 * stops when both came, or after 10 s. Every
 * call is checked and a failure prints the emq_error message. Uses only
 * echomq.h.
 */
#include <echomq.h>

#include <stdio.h>
#include <string.h>

static int64_t started_ms;

/* Prints what a handled entry was. */
static void remind(const emq_entry *e) {
    printf("handled %.*s after %lld ms (entry %s)\n",
           (int)e->fields[0].value_len, e->fields[0].value,
           (long long)(emq_clock_ms() - started_ms), e->id);
}

static int failed(const char *what, const emq_error *err) {
    fprintf(stderr, "delayed_jobs: %s: %s\n", what, err->message);
    return 1;
}

int main(int argc, char **argv) {
    if (argc < 2 || argc > 3) {
        fprintf(stderr, "usage: delayed_jobs URL [QUEUE]\n");
        return 2;
    }
    const char *queue = argc > 2 ? argv[2] : "example-delayed";
    emq_error err;
    emq_conf_t *conf = emq_conf_new();
    if (conf == NULL || emq_conf_set(conf, "url", argv[1], &err) != EMQ_OK ||
        emq_conf_set(conf, "queue", queue, &err) != EMQ_OK)
        return conf ? failed("configuration", &err) : 1;

    emq_producer_t *p;
    if (emq_producer_new(conf, &p, &err) != EMQ_OK)
        return failed("producer", &err);
    static const char *const what[] = {"now", "in-500-ms", "in-1-s"};
    static const int64_t delays[] = {0, 500, 1000};
    emq_id ids[3];
    started_ms = emq_clock_ms();
    for (int i = 0; i < 3; i++) {
        emq_field f = {"reminder", 8, what[i], strlen(what[i])};
        emq_produce_opts o = EMQ_PRODUCE_OPTS_INIT;
        o.delay_ms = delays[i];
        if (emq_produce_ex(p, &f, 1, &o, &ids[i], &err) != EMQ_OK)
            return failed("produce", &err);
        printf("produced %s as %s\n", what[i], ids[i].str);
    }
    emq_producer_destroy(p);

    emq_admin_t *a;
    if (emq_admin_new(conf, &a, &err) != EMQ_OK)
        return failed("admin", &err);
    const char *cancel[] = {ids[2].str};
    emq_cancel_outcome outcome;
    if (emq_admin_cancel(a, cancel, 1, &outcome, NULL, &err) != EMQ_OK)
        return failed("cancel", &err);
    printf("cancelled %s: %s\n", ids[2].str,
           outcome == EMQ_CANCEL_REMOVED ? "removed" : "not removed");
    emq_delayed_info d;
    if (emq_admin_delayed(a, &d, &err) != EMQ_OK)
        return failed("delayed", &err);
    printf("waiting %llu\n", (unsigned long long)d.waiting);
    emq_admin_destroy(a);

    if (emq_conf_set(conf, "group", "reminders", &err) != EMQ_OK ||
        emq_conf_set(conf, "consumer", "example-1", &err) != EMQ_OK ||
        emq_conf_set(conf, "start", "head", &err) != EMQ_OK ||
        emq_conf_set(conf, "block_ms", "200", &err) != EMQ_OK)
        return failed("configuration", &err);
    emq_consumer_t *c;
    if (emq_consumer_new(conf, NULL, NULL, &c, &err) != EMQ_OK)
        return failed("consumer", &err);
    emq_conf_destroy(conf);
    /* Bounded: 10 s at most, whatever came. */
    int handled = 0;
    emq_status st = EMQ_OK;
    while (handled < 2 && emq_clock_ms() - started_ms < 10000 && st == EMQ_OK) {
        emq_entry *e[8];
        size_t n = 0;
        st = emq_consumer_poll(c, e, 8, 200, &n, &err);
        for (size_t i = 0; i < n; i++) {
            remind(e[i]);
            handled++;
            if (st == EMQ_OK)
                st = emq_consumer_ack(c, e[i], &err);
            emq_entry_free(e[i]);
        }
    }
    emq_consumer_destroy(c);
    if (st != EMQ_OK)
        return failed("consume", &err);
    return handled == 2 ? 0 : 1;
}
