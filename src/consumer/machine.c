/* SPDX-License-Identifier: BSD-3-Clause */
/* machine.c: the state machine of a consumer's session (machine.h). */
#include "machine.h"

#include <stdio.h>
#include <string.h>

#define S(x) EMQ_SESS_##x

/* next[state][event]. A failure a new connection cures reconnects from
 * anywhere alive; NOGROUP opens the door again; a lapse starts the
 * session again; a stop ends the run, a fatal error too (after a stop
 * as well: the run ends with it). */
static const emq__sess_state next_state[EMQ_SESS_NSTATES][EMQ_EV_NEVENTS] = {
    /*                 DONE         TRANSPORT        NOGROUP         LAPSE
                       STOP         FATAL */
    [S(STARTING)] = {S(RUNNING), S(RECONNECTING), S(GROUP_LOST), S(LAPSED),
                     S(STOPPED), S(FAILED)},
    [S(RUNNING)] = {S(RUNNING), S(RECONNECTING), S(GROUP_LOST), S(LAPSED),
                    S(STOPPED), S(FAILED)},
    [S(RECONNECTING)] = {S(STARTING), S(RECONNECTING), S(GROUP_LOST), S(LAPSED),
                         S(STOPPED), S(FAILED)},
    [S(GROUP_LOST)] = {S(STARTING), S(RECONNECTING), S(GROUP_LOST), S(LAPSED),
                       S(STOPPED), S(FAILED)},
    [S(LAPSED)] = {S(STARTING), S(RECONNECTING), S(GROUP_LOST), S(LAPSED),
                   S(STOPPED), S(FAILED)},
    [S(STOPPED)] = {S(STOPPED), S(STOPPED), S(STOPPED), S(STOPPED), S(STOPPED),
                    S(FAILED)},
    [S(FAILED)] = {S(FAILED), S(FAILED), S(FAILED), S(FAILED), S(FAILED),
                   S(FAILED)},
};

static const char *const state_names[EMQ_SESS_NSTATES] = {
    "STARTING", "RUNNING", "RECONNECTING", "GROUP_LOST",
    "LAPSED",   "STOPPED", "FAILED"};

static const char *const state_docs[EMQ_SESS_NSTATES] = {
    "takes the lease, opens the door (XGROUP CREATE), starts the upkeep, "
    "takes its own pending entries back (recover self)",
    "turns: recover self when posted, the claim beat, due retries, a read "
    "of new entries when emq__machine_may_read says so",
    "connects again (with backoff), then starts the session again",
    "opens the door again at the declared start (or fails: on_group_lost "
    "fatal)",
    "logs the lapse; hands out nothing until the session starts again",
    "the run ends: what was read and not handed out goes back",
    "the run ends with the error"};

static const char *const event_names[EMQ_EV_NEVENTS] = {
    "done", "transport", "nogroup", "lapse", "stop", "fatal"};

static const char *const event_docs[EMQ_EV_NEVENTS] = {
    "the state's step did its work",
    "it failed in a way a new connection cures (a cut, a timeout, a "
    "replica, a reply over resp.max_reply_bytes)",
    "it met NOGROUP: the group or the stream is gone",
    "the lease is not known held after the step, or a handout posted a "
    "lapse",
    "a stop was asked",
    "any other failure"};

void emq__machine_init(emq__machine *m, void (*log)(void *, const char *),
                       void *log_ctx) {
    m->state = EMQ_SESS_STARTING;
    atomic_store(&m->posted, 0);
    m->transitions = 0;
    m->log = log;
    m->log_ctx = log_ctx;
}

void emq__machine_start(emq__machine *m) {
    if (m->state != EMQ_SESS_STARTING && m->log != NULL) {
        char line[64];
        snprintf(line, sizeof line, "session: %s -> STARTING (a run begins)",
                 emq__sess_state_name(m->state));
        m->log(m->log_ctx, line);
    }
    m->state = EMQ_SESS_STARTING;
}

emq__sess_state emq__machine_next(emq__sess_state s, emq__sess_event e) {
    if ((unsigned)s >= EMQ_SESS_NSTATES || (unsigned)e >= EMQ_EV_NEVENTS)
        return EMQ_SESS_FAILED;
    return next_state[s][e];
}

const char *emq__sess_state_name(emq__sess_state s) {
    return (unsigned)s < EMQ_SESS_NSTATES ? state_names[s] : "?";
}

const char *emq__sess_event_name(emq__sess_event e) {
    return (unsigned)e < EMQ_EV_NEVENTS ? event_names[e] : "?";
}

const char *emq__sess_state_doc(emq__sess_state s) {
    return (unsigned)s < EMQ_SESS_NSTATES ? state_docs[s] : "?";
}

emq__sess_state emq__machine_apply(emq__machine *m, emq__sess_event e) {
    emq__sess_state to = emq__machine_next(m->state, e);
    if (to != m->state) {
        m->transitions++;
        if (m->log != NULL) {
            char line[96];
            snprintf(line, sizeof line, "session: %s -> %s (%s)",
                     emq__sess_state_name(m->state), emq__sess_state_name(to),
                     emq__sess_event_name(e));
            m->log(m->log_ctx, line);
        }
        m->state = to;
    }
    return to;
}

unsigned emq__machine_post(emq__machine *m, unsigned bits) {
    return bits & ~atomic_fetch_or(&m->posted, bits);
}

unsigned emq__machine_posted(emq__machine *m, unsigned bits) {
    return atomic_load(&m->posted) & bits;
}

unsigned emq__machine_take(emq__machine *m, unsigned bits) {
    return atomic_fetch_and(&m->posted, ~bits) & bits;
}

int emq__machine_may_read(emq__machine *m, const emq__read_inputs *in) {
    return m->state == EMQ_SESS_RUNNING &&
           !emq__machine_posted(m, EMQ_POST_LAPSE) && !in->stopping &&
           in->room > 0 && in->upkeep_in_step && in->lease_valid &&
           !in->route_gone;
}

/* Appends to buf (of size, used *at) as snprintf would. */
static void put(char *buf, size_t size, size_t *at, const char *text) {
    size_t n = strlen(text);
    if (*at < size) {
        size_t room = size - *at - 1;
        memcpy(buf + *at, text, n < room ? n : room);
        buf[*at + (n < room ? n : room)] = '\0';
    }
    *at += n;
}

size_t emq__machine_doc(char *buf, size_t size) {
    size_t at = 0;
    if (size > 0)
        buf[0] = '\0';
    put(buf, size, &at, "| state | what the loop does |");
    for (int e = 0; e < EMQ_EV_NEVENTS; e++) {
        put(buf, size, &at, " ");
        put(buf, size, &at, event_names[e]);
        put(buf, size, &at, " |");
    }
    put(buf, size, &at, "\n|---|---|");
    for (int e = 0; e < EMQ_EV_NEVENTS; e++)
        put(buf, size, &at, "---|");
    put(buf, size, &at, "\n");
    for (int s = 0; s < EMQ_SESS_NSTATES; s++) {
        put(buf, size, &at, "| ");
        put(buf, size, &at, state_names[s]);
        put(buf, size, &at, " | ");
        put(buf, size, &at, state_docs[s]);
        put(buf, size, &at, " |");
        for (int e = 0; e < EMQ_EV_NEVENTS; e++) {
            put(buf, size, &at, " ");
            put(buf, size, &at, state_names[next_state[s][e]]);
            put(buf, size, &at, " |");
        }
        put(buf, size, &at, "\n");
    }
    put(buf, size, &at, "\nEvents:\n\n");
    for (int e = 0; e < EMQ_EV_NEVENTS; e++) {
        put(buf, size, &at, "- `");
        put(buf, size, &at, event_names[e]);
        put(buf, size, &at, "`: ");
        put(buf, size, &at, event_docs[e]);
        put(buf, size, &at, ".\n");
    }
    return at;
}
