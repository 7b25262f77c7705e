/* SPDX-License-Identifier: BSD-3-Clause */
/* worker.c: a complete echomq worker, the smallest useful consumer.
 *
 *   worker [-s new|head|ID] URL QUEUE GROUP CONSUMER
 *
 * Joins consumer group GROUP of queue QUEUE on the server at URL
 * (redis://host:port, rediss://..., unix:///path/to.sock) under the stable
 * name CONSUMER, prints every entry it receives (ID, delivery count, and
 * each field as name="value" with non-printable bytes escaped) and
 * acknowledges it. The group is created if it does not exist yet, starting
 * at -s: "new" (the default: only entries added from now on), "head" (the
 * whole stream) or an entry ID. An existing group keeps its position.
 *
 * Ctrl-C (SIGINT) or SIGTERM asks the consumer to stop: the entry being
 * printed is finished and acknowledged, nothing new starts, and the run
 * returns within the read's block time (conf block_ms). The worker then
 * prints its counters as one JSON object on stderr and exits 0. Any
 * failure prints the library's error message and exits 1; bad arguments
 * exit 2.
 *
 * Uses only echomq.h, like any program outside the library. Every call
 * that can fail is checked.
 */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L /* sigaction, getopt */
#endif

#include <echomq.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The consumer the signal handler stops. It is set once, before the
 * handlers are installed, and never changes while they can run. */
static emq_consumer_t *the_consumer;

/* emq_consumer_stop only sets an atomic flag: async-signal-safe. */
static void on_signal(int sig) {
    (void)sig;
    if (the_consumer)
        emq_consumer_stop(the_consumer);
}

/* Prints len bytes of s between quotes, escaping quotes, backslashes and
 * every byte that is not printable ASCII (values are binary-safe). */
static void print_escaped(const char *s, size_t len) {
    putchar('"');
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\')
            printf("\\%c", c);
        else if (c == '\n')
            fputs("\\n", stdout);
        else if (c == '\t')
            fputs("\\t", stdout);
        else if (c >= 0x20 && c < 0x7f)
            putchar(c);
        else
            printf("\\x%02x", c);
    }
    putchar('"');
}

/* The handler: called on the consumer's thread for each entry. Everything
 * in entry is borrowed until we return. Answering EMQ_ACK acknowledges the
 * entry (the XACK travels with the next read). A real worker would return
 * EMQ_RETRY with a reason when the work failed, so the entry is delivered
 * again later and ends in the dead letters after max_deliveries. */
static emq_verdict handle(void *opaque, const emq_entry *entry, char *reason,
                          size_t reason_size) {
    (void)opaque;
    (void)reason;
    (void)reason_size;
    printf("%s (delivery %llu)", entry->id,
           (unsigned long long)entry->deliveries);
    for (size_t i = 0; i < entry->nfields; i++) {
        putchar(' ');
        print_escaped(entry->fields[i].name, entry->fields[i].name_len);
        putchar('=');
        print_escaped(entry->fields[i].value, entry->fields[i].value_len);
    }
    putchar('\n');
    fflush(stdout); /* show each entry at once, also through a pipe */
    return EMQ_ACK;
}

static void usage(const char *prog) {
    fprintf(stderr,
            "usage: %s [-s new|head|ID] URL QUEUE GROUP CONSUMER\n"
            "  -s  where a new group starts: new (default), head or an "
            "entry ID\n",
            prog);
}

/* Sets one configuration property, printing why on failure. */
static int set(emq_conf_t *conf, const char *name, const char *value) {
    emq_error err;
    if (emq_conf_set(conf, name, value, &err) != EMQ_OK) {
        fprintf(stderr, "worker: %s\n", err.message);
        return -1;
    }
    return 0;
}

/* Prints the consumer's counters as JSON on stderr. */
static void print_stats(const emq_consumer_t *c) {
    char small[512];
    size_t need = emq_consumer_stats_json(c, small, sizeof small);
    if (need < sizeof small) {
        fprintf(stderr, "%s\n", small);
        return;
    }
    char *big = malloc(need + 1); /* more counters than we planned for */
    if (big == NULL) {
        fprintf(stderr, "worker: out of memory printing the counters\n");
        return;
    }
    emq_consumer_stats_json(c, big, need + 1);
    fprintf(stderr, "%s\n", big);
    free(big);
}

int main(int argc, char **argv) {
    const char *start = "new";
    int opt;
    while ((opt = getopt(argc, argv, "s:h")) != -1) {
        if (opt == 's') {
            start = optarg;
        } else {
            usage(argv[0]);
            return 2;
        }
    }
    if (argc - optind != 4) {
        usage(argv[0]);
        return 2;
    }
    const char *url = argv[optind], *queue = argv[optind + 1],
               *group = argv[optind + 2], *name = argv[optind + 3];

    /* The configuration is copied by emq_consumer_new: free it after. */
    emq_conf_t *conf = emq_conf_new();
    if (conf == NULL) {
        fprintf(stderr, "worker: out of memory\n");
        return 1;
    }
    if (set(conf, "url", url) != 0 || set(conf, "queue", queue) != 0 ||
        set(conf, "group", group) != 0 || set(conf, "consumer", name) != 0 ||
        set(conf, "start", start) != 0) {
        emq_conf_destroy(conf);
        return 2; /* a refused argument is a usage error */
    }

    /* Validates everything without touching the network. */
    emq_consumer_t *consumer;
    emq_error err;
    emq_status st = emq_consumer_new(conf, handle, NULL, &consumer, &err);
    emq_conf_destroy(conf);
    if (st != EMQ_OK) {
        fprintf(stderr, "worker: %s\n", err.message);
        return 2;
    }

    the_consumer = consumer;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGINT, &sa, NULL) != 0 ||
        sigaction(SIGTERM, &sa, NULL) != 0) {
        perror("worker: sigaction");
        emq_consumer_destroy(consumer);
        return 1;
    }

    fprintf(stderr,
            "worker: %s consuming %s as %s (group %s, start %s); "
            "Ctrl-C stops\n",
            emq_version_str(), queue, name, group, start);
    /* Connects, opens the group, takes back this name's pending entries,
     * then reads and acknowledges until a stop or a fatal error. Transient
     * failures (a dropped connection) are retried inside. */
    st = emq_consumer_run(consumer, &err);
    if (st != EMQ_OK)
        fprintf(stderr, "worker: %s (%s)\n", err.message, emq_status_name(st));
    print_stats(consumer);

    /* No signal may reach a freed consumer. */
    sa.sa_handler = SIG_DFL;
    if (sigaction(SIGINT, &sa, NULL) != 0 || sigaction(SIGTERM, &sa, NULL) != 0)
        perror("worker: sigaction");
    the_consumer = NULL;
    emq_consumer_destroy(consumer);
    return st == EMQ_OK ? 0 : 1;
}
