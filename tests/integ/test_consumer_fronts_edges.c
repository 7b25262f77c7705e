/* SPDX-License-Identifier: BSD-3-Clause */
/* test_consumer_fronts_edges.c: the batch handler and the event-loop mode
 * at the edges run mode already survives,
 * each against a real redis-server:
 *
 * - the group deleted while a batch is in the handler: the consumer
 *   creates it again (warning, group_recreated) and runs on; the batch's
 *   entries have nothing left to settle and do not end the run; a group
 *   deleted and created again by another client does not either;
 * - a fatal error (the ACL revokes XCLAIM, so the refresh is refused)
 *   while a batch is in the handler: run returns that error, not
 *   EMQ_EINVAL for the batch's settlement; in pull mode, settling an
 *   entry the fatal end forgot answers that error too;
 * - the event descriptor while paused with entries read ahead: not
 *   readable (an event loop sleeps), readable again on resume.
 */
#include "integ/poll_helpers.h"

#include <poll.h>

#define EQ "emq:{jobs}"

/* ---- a batch handler held until the test lets it go ---------------------- */

typedef struct holder {
    recorder r;
    atomic_int calls, in_call;
    atomic_int hold; /* the next call waits until this is 0 (10 s at most) */
    pthread_mutex_t log_mu;
    char log[32768]; /* warnings and errors the consumer logged */
    size_t log_len;
} holder;

static void hold_handle(void *opaque, const emq_entry *const *entries, size_t n,
                        emq_outcome *outcomes) {
    holder *h = opaque;
    (void)outcomes; /* every entry: EMQ_ACK */
    for (size_t i = 0; i < n; i++) {
        char reason[64];
        record(&h->r, entries[i], reason, sizeof reason);
    }
    atomic_fetch_add(&h->calls, 1);
    atomic_store(&h->in_call, 1);
    int64_t end = now_ms() + emq_test_ms(10000);
    while (atomic_load(&h->hold) && now_ms() < end)
        usleep(5000);
    atomic_store(&h->in_call, 0);
}

static void hold_log(void *opaque, emq_log_level level, const char *msg) {
    holder *h = opaque;
    if (level > EMQ_LOG_WARNING)
        return;
    pthread_mutex_lock(&h->log_mu);
    int n =
        snprintf(h->log + h->log_len, sizeof h->log - h->log_len, "%s\n", msg);
    if (n > 0 && (size_t)n < sizeof h->log - h->log_len)
        h->log_len += (size_t)n;
    pthread_mutex_unlock(&h->log_mu);
}

static void holder_init(holder *h) {
    memset(h, 0, sizeof *h);
    recorder_init(&h->r);
    pthread_mutex_init(&h->log_mu, NULL);
}

static int log_has(holder *h, const char *text) {
    pthread_mutex_lock(&h->log_mu);
    int has = strstr(h->log, text) != NULL;
    pthread_mutex_unlock(&h->log_mu);
    return has;
}

static uint64_t stat_of(emq_consumer_t *c, size_t offset) {
    emq_consumer_stats st;
    emq_consumer_stats_get(c, &st);
    uint64_t v;
    memcpy(&v, (const char *)&st + offset, sizeof v);
    return v;
}
#define STAT(c, field) stat_of((c), offsetof(emq_consumer_stats, field))

/* A batch consumer "w" of jobs/g (start new), claim idle 400 ms: the
 * refresh runs every 100 ms while a batch is in the handler. */
static emq_consumer_t *hold_consumer(emq_conf_t *conf, holder *h) {
    conf_set(conf, "claim.min_idle_ms", "400");
    conf_set(conf, "claim.interval_ms", "100");
    conf_set(conf, "batch.max", "20");
    emq_conf_set_log(conf, hold_log, h);
    emq_consumer_t *c;
    emq_error err;
    ASSERT_OK(emq_consumer_new_batch(conf, hold_handle, h, &c, &err), &err);
    return c;
}

/* The run did not end: fails with what it returned if it did. */
static void still_running(bg *t, const char *when) {
    if (atomic_load(&t->done))
        FAIL("the run ended %s: %s (%s)", when, emq_status_name(t->st),
             t->err.message);
}

/* ---- 1: the group deleted while a batch is in the handler ---------------- */

/* XGROUP DESTROY while a batch of 5 is in the handler: the consumer
 * creates the group again at its declared start (the documented warning,
 * group_recreated), the batch's settlements find nothing to settle and
 * the run goes on; entries produced after it are handled. Then another
 * client deletes and creates the group in one MULTI while the next batch
 * is in the handler: the run goes on again. */
TEST_TIMEOUT(batch_group_deleted_mid_batch_runs_on, 60) {
    emq_srv *s = emq_srv_start(NULL);
    emq_conn_t *adm = admin_connect(s);
    CMD_NOERR(adm, "XGROUP", "CREATE", EQ, "g", "$", "MKSTREAM");
    static holder h;
    holder_init(&h);
    atomic_store(&h.hold, 1);
    produce_n(s, "jobs", "a", 5); /* before the start: one read, one batch */
    emq_conf_t *conf = fault_conf(emq_srv_url(s));
    emq_consumer_t *c = hold_consumer(conf, &h);
    static bg t;
    memset(&t, 0, sizeof t);
    t.c = c;
    ASSERT(pthread_create(&t.thread, NULL, bg_main, &t) == 0);
    WAIT_UNTIL(atomic_load(&h.in_call) || atomic_load(&t.done), 10000,
               "the first batch in the handler");
    ASSERT_EQ_SIZE(recorded(&h.r), 5);
    still_running(&t, "before the first batch");
    ASSERT_EQ_INT(CMD_INT(adm, "XGROUP", "DESTROY", EQ, "g"), 1);
    WAIT_UNTIL(STAT(c, group_recreated) >= 1 || atomic_load(&t.done), 10000,
               "the consumer to create the group again");
    still_running(&t, "on the group's deletion");
    ASSERT(log_has(&h, "group or stream is gone"));
    atomic_store(&h.hold, 0); /* the batch's settlements, group gone */
    WAIT_UNTIL(!atomic_load(&h.in_call), 10000, "the handler to return");
    WAIT_UNTIL(log_has(&h, "5 of the batch's 5 entries were not settled") ||
                   atomic_load(&t.done),
               10000, "the batch's settlements");
    still_running(&t, "after the batch whose group was deleted");
    ASSERT(log_has(&h, "5 of the batch's 5 entries were not settled: entry"));
    ASSERT(log_has(&h, "its group was deleted while it was out"));
    produce_n(s, "jobs", "b", 5);
    WAIT_UNTIL(times_seen(&h.r, "b4") == 1 || atomic_load(&t.done), 10000,
               "the entries produced after the group came back");
    still_running(&t, "before the entries after the re-creation");
    ASSERT_EQ_INT(times_seen(&h.r, "b0"), 1);
    ASSERT_EQ_INT(times_seen(&h.r, "b4"), 1);
    WAIT_UNTIL(pending_total(adm, EQ, "g") == 0, 5000, "b0..b4 acknowledged");

    /* Another client deletes and creates it in one step. */
    atomic_store(&h.hold, 1);
    produce_n(s, "jobs", "c", 3);
    WAIT_UNTIL(atomic_load(&h.in_call) || atomic_load(&t.done), 10000,
               "the third batch in the handler");
    still_running(&t, "before the third batch");
    CMD_NOERR(adm, "MULTI");
    CMD_NOERR(adm, "XGROUP", "DESTROY", EQ, "g");
    CMD_NOERR(adm, "XGROUP", "CREATE", EQ, "g", "$");
    CMD_NOERR(adm, "EXEC");
    usleep(500000); /* refreshes of the batch find it gone meanwhile */
    atomic_store(&h.hold, 0);
    WAIT_UNTIL(!atomic_load(&h.in_call), 10000, "the handler to return");
    usleep(300000);
    still_running(&t, "after the batch whose group another client re-made");
    produce_n(s, "jobs", "d", 3);
    WAIT_UNTIL(times_seen(&h.r, "d2") == 1 || atomic_load(&t.done), 10000,
               "the entries produced after that");
    still_running(&t, "before the last entries");
    WAIT_UNTIL(pending_total(adm, EQ, "g") == 0, 5000, "d0..d2 acknowledged");
    ASSERT(STAT(c, group_recreated) >= 1);
    ASSERT_OK(bg_stop(&t, 5000), &t.err);
    emq_consumer_destroy(c);
    emq_conf_destroy(conf);
    emq_conn_destroy(adm);
    emq_srv_stop(s);
}

/* ---- 2: a fatal error while a batch is in the handler ---------------- */

/* The ACL takes XCLAIM from the consumer's user while a batch is in the
 * handler: the refresh is refused, which is fatal. The batch's
 * settlement and the run report that error (EMQ_ESERVER naming the
 * refresh and the ACL's refusal), not EMQ_EINVAL for entries the end
 * forgot. */
TEST_TIMEOUT(batch_fatal_mid_batch_is_reported_as_itself, 40) {
    emq_srv_opts o = {.extra_config = "user w on >pw ~* &* +@all\n"};
    emq_srv *s = emq_srv_start(&o);
    emq_conn_t *adm = admin_connect(s);
    CMD_NOERR(adm, "XGROUP", "CREATE", EQ, "g", "$", "MKSTREAM");
    static holder h;
    holder_init(&h);
    atomic_store(&h.hold, 1);
    emq_conf_t *conf = fault_conf(emq_srv_url(s));
    conf_set(conf, P_USER, "w");
    conf_set(conf, P_PASSWORD, "pw");
    emq_consumer_t *c = hold_consumer(conf, &h);
    static bg t;
    memset(&t, 0, sizeof t);
    t.c = c;
    /* Added before the run, so the first read takes all three at once. */
    produce_n(s, "jobs", "a", 3);
    ASSERT(pthread_create(&t.thread, NULL, bg_main, &t) == 0);
    WAIT_UNTIL(atomic_load(&h.in_call) || atomic_load(&t.done), 10000,
               "the batch in the handler");
    still_running(&t, "before the batch");
    CMD_NOERR(adm, "ACL", "SETUSER", "w", "-xclaim");
    /* The refresh (every 100 ms) is refused; the reading thread ends and
     * its table is cleared while the batch is still in the handler. */
    WAIT_UNTIL(STAT(c, in_flight) == 0, 10000,
               "the reading thread to end on the refusal");
    atomic_store(&h.hold, 0);
    if (!bg_wait(&t, 10000))
        FAIL("the run did not end after the fatal error");
    bg_join(&t);
    ASSERT_EQ_INT(recorded(&h.r), 3);
    ASSERT_STATUS(t.st, EMQ_ESERVER, &t.err);
    ASSERT_CONTAINS(t.err.message, "refresh");
    ASSERT_CONTAINS(t.err.message, "refused");
    ASSERT(strstr(t.err.message, "NOPERM") ||
           strstr(t.err.message, "can't run this command") ||
           strstr(t.err.message, "ACL failure in script"));
    emq_consumer_destroy(c);
    emq_conf_destroy(conf);
    emq_conn_destroy(adm);
    emq_srv_stop(s);
}

/* The same in pull mode: an entry handed out by poll, then the refresh
 * refused: its settlement, the next poll and close all answer the fatal
 * error (not EMQ_EINVAL for the entry the end forgot). */
TEST_TIMEOUT(poll_settle_after_fatal_reports_the_fatal_error, 40) {
    emq_srv_opts o = {.extra_config = "user w on >pw ~* &* +@all\n"};
    emq_srv *s = emq_srv_start(&o);
    emq_conn_t *adm = admin_connect(s);
    CMD_NOERR(adm, "XGROUP", "CREATE", EQ, "g", "$", "MKSTREAM");
    emq_conf_t *conf = fault_conf(emq_srv_url(s));
    conf_set(conf, P_USER, "w");
    conf_set(conf, P_PASSWORD, "pw");
    conf_set(conf, "claim.min_idle_ms", "400");
    emq_conf_set_log(conf, quiet_log, NULL);
    emq_consumer_t *c;
    emq_error err;
    ASSERT_OK(emq_consumer_new(conf, NULL, NULL, &c, &err), &err);
    produce_n(s, "jobs", "a", 1);
    emq_entry *got[4];
    size_t n = 0;
    int64_t end = now_ms() + emq_test_ms(10000);
    while (n == 0 && now_ms() < end)
        ASSERT_OK(emq_consumer_poll(c, got, 4, 100, &n, &err), &err);
    ASSERT_EQ_SIZE(n, 1);
    CMD_NOERR(adm, "ACL", "SETUSER", "w", "-xclaim");
    WAIT_UNTIL(STAT(c, in_flight) == 0, 10000,
               "the reading thread to end on the refusal");
    ASSERT_STATUS(emq_consumer_ack(c, got[0], &err), EMQ_ESERVER, &err);
    ASSERT_CONTAINS(err.message, "refresh");
    emq_entry_free(got[0]);
    WAIT_UNTIL(emq_consumer_poll(c, got, 4, 100, &n, &err) == EMQ_ESERVER, 5000,
               "poll to report the fatal error");
    ASSERT_STATUS(emq_consumer_close(c, 2000, &err), EMQ_ESERVER, &err);
    ASSERT_CONTAINS(err.message, "refresh");
    emq_consumer_destroy(c);
    emq_conf_destroy(conf);
    emq_conn_destroy(adm);
    emq_srv_stop(s);
}

/* ---- 3: the event descriptor while paused ------------------------------- */

/* Readiness of fd within ms: 1 readable, 0 not. */
static int fd_readable(int fd, int ms) {
    struct pollfd p = {.fd = fd, .events = POLLIN};
    return poll(&p, 1, ms) == 1 && (p.revents & POLLIN);
}

/* Entries read ahead and waiting, then a pause: an event loop that
 * watches the descriptor for a second wakes a handful of times at most
 * (before the fix: millions), hands out nothing, and is told no timeout;
 * on resume the descriptor turns readable and step hands all out. */
TEST_TIMEOUT(event_fd_quiet_while_paused_and_signalled_on_resume, 30) {
    emq_srv *s = emq_srv_start(NULL);
    emq_conn_t *adm = admin_connect(s);
    CMD_NOERR(adm, "XGROUP", "CREATE", EQ, "g", "$", "MKSTREAM");
    emq_conf_t *conf = fault_conf(emq_srv_url(s));
    conf_set(conf, "claim.min_idle_ms", "400");
    conf_set(conf, "max_in_flight", "100");
    emq_consumer_t *c;
    emq_error err;
    ASSERT_OK(emq_consumer_new(conf, NULL, NULL, &c, &err), &err);
    int fd = emq_consumer_fd(c, &err);
    ASSERT(fd >= 0);
    produce_n(s, "jobs", "j", 5);
    /* Asked together until both say so: a reply lent to the loop that no
     * step took up within 2 ms is taken back, and for the moment the
     * reading thread reads it both say "nothing to do" (see
     * poll_event_fd_and_step). */
    WAIT_UNTIL(fd_readable(fd, 50) && emq_consumer_timeout_ms(c) == 0, 10000,
               "the entries read ahead");
    emq_consumer_pause(c);
    ASSERT_EQ_INT(emq_consumer_timeout_ms(c), -1);
    /* An event loop over the descriptor for one second (bounded: at most
     * 100,000 wake-ups are counted). */
    emq_entry *got[8];
    size_t n = 0, handed = 0;
    long wakeups = 0;
    int64_t end = now_ms() + 1000;
    while (now_ms() < end && wakeups < 100000) {
        int64_t left = end - now_ms();
        if (!fd_readable(fd, left > 0 ? (int)left : 0))
            continue;
        wakeups++;
        ASSERT_OK(emq_consumer_step(c, got, 8, &n, &err), &err);
        handed += n;
    }
    ASSERT_EQ_SIZE(handed, 0);
    if (wakeups > 3)
        FAIL("paused, the descriptor woke the loop %ld times in 1 s", wakeups);
    ASSERT_EQ_INT(emq_consumer_timeout_ms(c), -1);
    emq_consumer_resume(c);
    WAIT_UNTIL(fd_readable(fd, 50), 5000, "the descriptor on resume");
    ASSERT_EQ_INT(emq_consumer_timeout_ms(c), 0);
    end = now_ms() + emq_test_ms(5000);
    while (handed < 5 && now_ms() < end) {
        if (!fd_readable(fd, 100))
            continue;
        ASSERT_OK(emq_consumer_step(c, got + handed, 8 - handed, &n, &err),
                  &err);
        handed += n;
    }
    ASSERT_EQ_SIZE(handed, 5);
    /* A step with nothing to hand out leaves the descriptor quiet (one
     * that sent the read lent to the loop, when the last read was). */
    ASSERT_OK(emq_consumer_step(c, got + handed, 8 - handed, &n, &err), &err);
    ASSERT_EQ_SIZE(n, 0);
    ASSERT(!fd_readable(fd, 0));
    for (size_t i = 0; i < handed; i++) {
        ASSERT_OK(emq_consumer_ack(c, got[i], &err), &err);
        emq_entry_free(got[i]);
    }
    WAIT_UNTIL(pending_total(adm, EQ, "g") == 0, 5000, "all acknowledged");
    ASSERT_OK(emq_consumer_close(c, 2000, &err), &err);
    emq_consumer_destroy(c);
    emq_conf_destroy(conf);
    emq_conn_destroy(adm);
    emq_srv_stop(s);
}
