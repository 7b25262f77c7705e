/* SPDX-License-Identifier: BSD-3-Clause */
/* machine.h: the state machine of a consumer's session.
 *
 * One thread owns it, the one that runs the consumer's loop (consumer.c):
 * only it changes the state, through emq__machine_apply, which logs every
 * transition at debug level. The other threads (pollers and event loops
 * handing out entries, batch handlers, the upkeep) never write what the
 * loop decides on: they post event bits (emq__machine_post), which the
 * loop reads and takes. Whether the loop may read new entries now is one
 * function of the state, the posted bits and the loop's other inputs
 * (emq__machine_may_read). Pure: no server, no consumer; unit-tested
 * event by event in every state (tests/unit/test_machine.c), and
 * docs/CONSUMER.md's table of transitions is printed from it
 * (tools/gen_machinedoc.c, scripts/machinedoc.sh).
 */
#ifndef EMQ_CONSUMER_MACHINE_H
#define EMQ_CONSUMER_MACHINE_H

#include <stdatomic.h>
#include <stddef.h>

/* The session's states. */
typedef enum emq__sess_state {
    EMQ_SESS_STARTING,     /* takes the lease, opens the door, starts the
                              upkeep, takes its own pending entries back */
    EMQ_SESS_RUNNING,      /* turns: claim beats, due retries, reads */
    EMQ_SESS_RECONNECTING, /* a failure a new connection cures (a cut, a
                              replica, a reply too large): connects again */
    EMQ_SESS_GROUP_LOST,   /* NOGROUP: opens the door again at the
                              declared start (or fails, on_group_lost) */
    EMQ_SESS_LAPSED,       /* the lease is not known held, or a handout
                              found its deadline passed: nothing is handed
                              out until the session starts again */
    EMQ_SESS_STOPPED,      /* a stop was asked: the run ends */
    EMQ_SESS_FAILED,       /* a fatal error: the run ends with it */
    EMQ_SESS_NSTATES
} emq__sess_state;

/* How a state's step ended (consumer.c classifies its status). */
typedef enum emq__sess_event {
    EMQ_EV_DONE,      /* the step did its work */
    EMQ_EV_TRANSPORT, /* it failed in a way a new connection cures */
    EMQ_EV_NOGROUP,   /* it met NOGROUP: the group or stream is gone */
    EMQ_EV_LAPSE,     /* the lease is not known held, or a lapse posted */
    EMQ_EV_STOP,      /* a stop was asked */
    EMQ_EV_FATAL,     /* any other failure */
    EMQ_EV_NEVENTS
} emq__sess_event;

/* Bits other threads post (any thread, lock-free). */
enum {
    /* A handout (a poll, a batch it cut short) found the lease's deadline
     * passed and left entries read for it: the session starts again before
     * the loop reads on, even if the lease is held again by then, and its
     * recover self takes them back. Taken when the session starts. */
    EMQ_POST_LAPSE = 1u << 0,
    /* Own pending entries left the in-flight table unhandled (released,
     * not refreshed in time, a settlement refused): recover self on the
     * next turn. Taken by that turn. */
    EMQ_POST_RECOVER_SELF = 1u << 1
};

typedef struct emq__machine {
    emq__sess_state state; /* the owning thread's only */
    atomic_uint posted;    /* EMQ_POST_* bits, any thread */
    unsigned long transitions;
    /* Where transitions are logged (debug): line is "STATE -> STATE
     * (event)". NULL: not logged. */
    void (*log)(void *ctx, const char *line);
    void *log_ctx;
} emq__machine;

/* Starts m in EMQ_SESS_STARTING with nothing posted, logging through log
 * (may be NULL). Not thread-safe: before the other threads start. */
void emq__machine_init(emq__machine *m, void (*log)(void *, const char *),
                       void *log_ctx);

/* A run begins: m goes (back) to EMQ_SESS_STARTING, what was posted kept.
 * The owning thread, before the run's first step. */
void emq__machine_start(emq__machine *m);

/* The state after event e in state s. Pure: the transition table. */
emq__sess_state emq__machine_next(emq__sess_state s, emq__sess_event e);

/* The owning thread's single setter: moves m to
 * emq__machine_next(m->state, e), logging the transition when the state
 * changes. Returns the new state. */
emq__sess_state emq__machine_apply(emq__machine *m, emq__sess_event e);

/* Names, as the log and the documentation spell them. */
const char *emq__sess_state_name(emq__sess_state s);
const char *emq__sess_event_name(emq__sess_event e);
/* One sentence on what the loop does in state s. */
const char *emq__sess_state_doc(emq__sess_state s);

/* Posts bits (EMQ_POST_*); returns those of them that were not posted
 * yet (0: all were). Any thread. */
unsigned emq__machine_post(emq__machine *m, unsigned bits);
/* Nonzero when any of bits is posted. Any thread. */
unsigned emq__machine_posted(emq__machine *m, unsigned bits);
/* Takes bits: clears them; returns those of them that were posted. The
 * owning thread. */
unsigned emq__machine_take(emq__machine *m, unsigned bits);

/* What the decision to read new entries depends on, besides the state and
 * the posted bits. */
typedef struct emq__read_inputs {
    int stopping;       /* a stop was asked, or a fatal error recorded */
    size_t room;        /* entries that may be read now (max_in_flight) */
    int upkeep_in_step; /* the upkeep's connection is up: what is read can
                           be refreshed and marked unseen */
    int lease_valid;    /* the lease is known held */
    int route_gone;     /* the read connection was closed, or Sentinel
                           announced a new primary */
} emq__read_inputs;

/* 1 when the consumer may read new entries now: in EMQ_SESS_RUNNING, no
 * lapse posted, not stopping, with room, the upkeep in step, the lease
 * held and the connection not gone. The one place that decides it. */
int emq__machine_may_read(emq__machine *m, const emq__read_inputs *in);

/* Writes docs/CONSUMER.md's table of transitions (markdown) to buf, of
 * size bytes (truncated, always terminated); returns the length it needs
 * (as snprintf). */
size_t emq__machine_doc(char *buf, size_t size);

#endif
