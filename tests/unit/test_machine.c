/* SPDX-License-Identifier: BSD-3-Clause */
/* test_machine.c: the state machine of a consumer's session, without a
 * server (consumer/machine.h).
 *
 * Every event in every state against the rules written out here a second
 * time (a table copied from the code would check nothing); the single
 * setter logs each change of state and nothing else; bits posted by other
 * threads are neither lost nor invented; the one decision to read new
 * entries, input by input; the documentation's table.
 */
#include "harness/test.h"
#include "consumer/machine.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The rules of machine.h, stated independently of its table. */
static emq__sess_state expected_next(emq__sess_state s, emq__sess_event e) {
    if (s == EMQ_SESS_FAILED || e == EMQ_EV_FATAL)
        return EMQ_SESS_FAILED; /* a fatal error ends any run */
    if (s == EMQ_SESS_STOPPED || e == EMQ_EV_STOP)
        return EMQ_SESS_STOPPED;
    switch (e) {
    case EMQ_EV_TRANSPORT:
        return EMQ_SESS_RECONNECTING;
    case EMQ_EV_NOGROUP:
        return EMQ_SESS_GROUP_LOST;
    case EMQ_EV_LAPSE:
        return EMQ_SESS_LAPSED;
    case EMQ_EV_DONE:
        /* A start or a turn that did its work runs on; the way back from
         * anything else is a start. */
        return s == EMQ_SESS_STARTING || s == EMQ_SESS_RUNNING
                   ? EMQ_SESS_RUNNING
                   : EMQ_SESS_STARTING;
    default:
        return EMQ_SESS_FAILED;
    }
}

typedef struct log_book {
    int lines;
    char last[128];
} log_book;

static void book_log(void *ctx, const char *line) {
    log_book *b = ctx;
    b->lines++;
    snprintf(b->last, sizeof b->last, "%s", line);
}

TEST(machine_every_event_in_every_state) {
    for (int s = 0; s < EMQ_SESS_NSTATES; s++)
        for (int e = 0; e < EMQ_EV_NEVENTS; e++) {
            emq__sess_state want =
                expected_next((emq__sess_state)s, (emq__sess_event)e);
            emq__sess_state got =
                emq__machine_next((emq__sess_state)s, (emq__sess_event)e);
            if (got != want)
                FAIL("%s + %s: %s, want %s",
                     emq__sess_state_name((emq__sess_state)s),
                     emq__sess_event_name((emq__sess_event)e),
                     emq__sess_state_name(got), emq__sess_state_name(want));
            /* The setter moves there, logging only a change of state. */
            log_book b = {0};
            emq__machine m;
            emq__machine_init(&m, book_log, &b);
            m.state = (emq__sess_state)s;
            ASSERT_EQ_INT(emq__machine_apply(&m, (emq__sess_event)e), want);
            ASSERT_EQ_INT(m.state, want);
            ASSERT_EQ_INT(b.lines, want != (emq__sess_state)s);
            ASSERT_EQ_INT(m.transitions, want != (emq__sess_state)s);
            if (want != (emq__sess_state)s) {
                char line[128];
                snprintf(line, sizeof line, "session: %s -> %s (%s)",
                         emq__sess_state_name((emq__sess_state)s),
                         emq__sess_state_name(want),
                         emq__sess_event_name((emq__sess_event)e));
                ASSERT_EQ_STR(b.last, line);
            }
        }
    /* Out of range: never a live state. */
    ASSERT_EQ_INT(emq__machine_next(EMQ_SESS_NSTATES, EMQ_EV_DONE),
                  EMQ_SESS_FAILED);
    ASSERT_EQ_INT(emq__machine_next(EMQ_SESS_RUNNING, EMQ_EV_NEVENTS),
                  EMQ_SESS_FAILED);
    ASSERT_EQ_STR(emq__sess_state_name(EMQ_SESS_NSTATES), "?");
    ASSERT_EQ_STR(emq__sess_event_name(EMQ_EV_NEVENTS), "?");
}

TEST(machine_a_session_from_start_to_stop) {
    log_book b = {0};
    emq__machine m;
    emq__machine_init(&m, book_log, &b);
    ASSERT_EQ_INT(m.state, EMQ_SESS_STARTING);
    static const emq__sess_event steps[] = {
        EMQ_EV_DONE,  EMQ_EV_DONE,      EMQ_EV_TRANSPORT, EMQ_EV_TRANSPORT,
        EMQ_EV_DONE,  EMQ_EV_NOGROUP,   EMQ_EV_DONE,      EMQ_EV_DONE,
        EMQ_EV_LAPSE, EMQ_EV_DONE,      EMQ_EV_DONE,      EMQ_EV_STOP,
        EMQ_EV_DONE,  EMQ_EV_TRANSPORT, EMQ_EV_FATAL};
    static const emq__sess_state states[] = {
        EMQ_SESS_RUNNING,      EMQ_SESS_RUNNING,  EMQ_SESS_RECONNECTING,
        EMQ_SESS_RECONNECTING, EMQ_SESS_STARTING, EMQ_SESS_GROUP_LOST,
        EMQ_SESS_STARTING,     EMQ_SESS_RUNNING,  EMQ_SESS_LAPSED,
        EMQ_SESS_STARTING,     EMQ_SESS_RUNNING,  EMQ_SESS_STOPPED,
        EMQ_SESS_STOPPED,      EMQ_SESS_STOPPED,  EMQ_SESS_FAILED};
    for (size_t i = 0; i < sizeof steps / sizeof steps[0]; i++)
        ASSERT_EQ_INT(emq__machine_apply(&m, steps[i]), states[i]);
    ASSERT_EQ_INT(b.lines, 11);
    /* A new run starts again, what was posted kept. */
    emq__machine_post(&m, EMQ_POST_RECOVER_SELF);
    emq__machine_start(&m);
    ASSERT_EQ_INT(m.state, EMQ_SESS_STARTING);
    ASSERT_EQ_STR(b.last, "session: FAILED -> STARTING (a run begins)");
    ASSERT(emq__machine_posted(&m, EMQ_POST_RECOVER_SELF));
}

TEST(machine_posted_bits_say_when_they_are_new) {
    emq__machine m;
    emq__machine_init(&m, NULL, NULL);
    ASSERT_EQ_INT(emq__machine_posted(&m, EMQ_POST_LAPSE), 0);
    ASSERT_EQ_INT(emq__machine_post(&m, EMQ_POST_LAPSE), EMQ_POST_LAPSE);
    ASSERT_EQ_INT(emq__machine_post(&m, EMQ_POST_LAPSE), 0); /* not new */
    ASSERT_EQ_INT(emq__machine_post(&m, EMQ_POST_LAPSE | EMQ_POST_RECOVER_SELF),
                  EMQ_POST_RECOVER_SELF);
    ASSERT_EQ_INT(emq__machine_take(&m, EMQ_POST_RECOVER_SELF),
                  EMQ_POST_RECOVER_SELF);
    ASSERT_EQ_INT(emq__machine_take(&m, EMQ_POST_RECOVER_SELF), 0);
    ASSERT_EQ_INT(emq__machine_posted(&m, EMQ_POST_LAPSE), EMQ_POST_LAPSE);
    ASSERT_EQ_INT(emq__machine_take(&m, EMQ_POST_LAPSE), EMQ_POST_LAPSE);
    ASSERT_EQ_INT(emq__machine_posted(&m, ~0u), 0);
}

typedef struct poster {
    emq__machine *m;
    int rounds;
    long newly; /* posts that found the bit clear */
} poster;

static void *post_many(void *arg) {
    poster *p = arg;
    for (int i = 0; i < p->rounds; i++)
        p->newly += emq__machine_post(p->m, EMQ_POST_RECOVER_SELF) != 0;
    return NULL;
}

/* Threads post while the owner takes: every take that finds the bit
 * matches one post that found it clear, and one left posted at the end
 * is still there: none lost, none invented. */
TEST(machine_posts_from_threads_are_neither_lost_nor_invented) {
    emq__machine m;
    emq__machine_init(&m, NULL, NULL);
    poster p[3];
    pthread_t th[3];
    for (int i = 0; i < 3; i++) {
        p[i] = (poster){.m = &m, .rounds = 20000};
        ASSERT_EQ_INT(pthread_create(&th[i], NULL, post_many, &p[i]), 0);
    }
    long taken = 0;
    for (int i = 0; i < 20000; i++)
        taken += emq__machine_take(&m, EMQ_POST_RECOVER_SELF) != 0;
    for (int i = 0; i < 3; i++)
        pthread_join(th[i], NULL);
    taken += emq__machine_take(&m, EMQ_POST_RECOVER_SELF) != 0;
    ASSERT_EQ_INT(p[0].newly + p[1].newly + p[2].newly, taken);
    ASSERT(taken >= 1);
}

TEST(machine_may_read_input_by_input) {
    emq__machine m;
    emq__machine_init(&m, NULL, NULL);
    emq__read_inputs ok = {.stopping = 0,
                           .room = 5,
                           .upkeep_in_step = 1,
                           .lease_valid = 1,
                           .route_gone = 0};
    /* Only a running session reads. */
    for (int s = 0; s < EMQ_SESS_NSTATES; s++) {
        m.state = (emq__sess_state)s;
        ASSERT_EQ_INT(emq__machine_may_read(&m, &ok), s == EMQ_SESS_RUNNING);
    }
    m.state = EMQ_SESS_RUNNING;
    emq__read_inputs in = ok;
    in.stopping = 1;
    ASSERT_EQ_INT(emq__machine_may_read(&m, &in), 0);
    in = ok;
    in.room = 0;
    ASSERT_EQ_INT(emq__machine_may_read(&m, &in), 0);
    in = ok;
    in.upkeep_in_step = 0;
    ASSERT_EQ_INT(emq__machine_may_read(&m, &in), 0);
    in = ok;
    in.lease_valid = 0;
    ASSERT_EQ_INT(emq__machine_may_read(&m, &in), 0);
    in = ok;
    in.route_gone = 1;
    ASSERT_EQ_INT(emq__machine_may_read(&m, &in), 0);
    /* A lapse posted by a handout: not until the session starts again;
     * recover self posted does not keep a read from going. */
    emq__machine_post(&m, EMQ_POST_RECOVER_SELF);
    ASSERT_EQ_INT(emq__machine_may_read(&m, &ok), 1);
    emq__machine_post(&m, EMQ_POST_LAPSE);
    ASSERT_EQ_INT(emq__machine_may_read(&m, &ok), 0);
    emq__machine_take(&m, EMQ_POST_LAPSE);
    ASSERT_EQ_INT(emq__machine_may_read(&m, &ok), 1);
}

TEST(machine_doc_names_every_state_and_event) {
    size_t need = emq__machine_doc(NULL, 0);
    char *doc = malloc(need + 1);
    ASSERT(doc != NULL);
    ASSERT_EQ_SIZE(emq__machine_doc(doc, need + 1), need);
    ASSERT_EQ_SIZE(strlen(doc), need);
    for (int s = 0; s < EMQ_SESS_NSTATES; s++) {
        char row[64];
        snprintf(row, sizeof row, "| %s | ",
                 emq__sess_state_name((emq__sess_state)s));
        ASSERT_CONTAINS(doc, row);
    }
    for (int e = 0; e < EMQ_EV_NEVENTS; e++) {
        char item[64];
        snprintf(item, sizeof item,
                 "- `%s`: ", emq__sess_event_name((emq__sess_event)e));
        ASSERT_CONTAINS(doc, item);
    }
    /* Truncated, still terminated. */
    char small[16];
    ASSERT_EQ_SIZE(emq__machine_doc(small, sizeof small), need);
    ASSERT_EQ_SIZE(strlen(small), sizeof small - 1);
    free(doc);
}
