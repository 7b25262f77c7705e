/* SPDX-License-Identifier: BSD-3-Clause */
/* ready.c: entries read and waiting to be handed out by emq_consumer_poll.
 *
 * In pull mode (emq_consumer_poll, a batch handler, the event-loop fd) a
 * consumer's own thread reads from the server and puts what it read here
 * instead of calling a handler; poll takes from here on the caller's
 * thread. Everything here is in the in-flight table already (IF_READ), so
 * the upkeep thread refreshes it while it waits; handing an entry out
 * moves it to IF_HANDLING, under this queue's lock, so no entry is handed
 * out twice however many threads poll.
 *
 * The entries of one read share one chunk: the reply they point into, the
 * field arrays and copies of the stream, group and consumer names. A
 * chunk lives until its last entry was handed out and freed (or dropped
 * unhanded), so an entry the caller holds stays valid after its consumer
 * is gone.
 *
 * The room of the queue is max_in_flight less what is out: entries
 * waiting here and entries handed out and not settled (the tables'
 * IF_HANDLING counts). The reading thread reads no more than the room.
 *
 * A reading thread about to block on the server for new entries while a
 * poller sleeps here waiting for them lends that read to the poller
 * (emq__ready_lend): the entry then reaches the thread that asked for it
 * straight from the socket, with no second thread to wake on its way.
 *
 * With no poller near and an event loop watching the event descriptor,
 * the read is lent to the loop the same way: the reading thread sends it
 * and adds the read connection's socket to the descriptor's set, so the
 * loop wakes when the reply arrives, and its step reads it on the loop's
 * thread.
 *
 * The event descriptor (an epoll set) is readable while entries wait here
 * and the consumer is not paused, or the consumer has ended (an eventfd
 * in the set says so), so an event loop knows when to poll (and sleeps
 * while nothing can be had); and while a read is lent to the loop, when
 * its reply arrives (the socket) or the next read is due (the eventfd).
 * The socket is in the set only while the reply owed on it is the loop's
 * to read, and nothing is owed on it then that was sent before: no byte
 * of it can be buffered (by TLS or by the reader) out of poll(2)'s sight.
 */
#include "ready.h"
#include "core.h"
#include "inflight.h"
#include "lease.h"
#include "upkeep.h"

#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

/* The states of the lent read (emq__ready.lend). */
enum { LEND_NONE, LEND_OFFERED, LEND_TAKEN, LEND_BACK };

/* How long reads stay offered with no poller waiting, after a poller was
 * polling: it is likely on its way to poll again. */
#define LEND_GRACE_MS 5

/* How long a read lent to an event loop may wait for a step while its
 * reply is in (or the next read is due) before the lender takes it back:
 * the loop is busy, and the reading thread reads for it meanwhile. */
#define LOOP_GRACE_MS 2

/* How long the lender to a loop sleeps at most between looks (a stop,
 * signal-safe, cannot wake it). */
#define LOOP_SLICE_MS 100

emq_status emq__ready_new(emq_consumer_t *root, emq__ready **out,
                          emq_error *err) {
    *out = NULL;
    emq__ready *r = emq__calloc(1, sizeof *r);
    if (r == NULL)
        return emq__oom(err);
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    int rc = pthread_cond_init(&r->more, &attr) |
             pthread_cond_init(&r->room, &attr) |
             pthread_cond_init(&r->lent, &attr) |
             pthread_mutex_init(&r->mu, NULL);
    pthread_condattr_destroy(&attr);
    r->lend_sock = -1;
    r->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    r->lender_wake = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    r->epfd = epoll_create1(EPOLL_CLOEXEC);
    struct epoll_event ev = {.events = EPOLLIN, .data.fd = r->efd};
    if (rc == 0 && r->efd >= 0 && r->epfd >= 0)
        rc = epoll_ctl(r->epfd, EPOLL_CTL_ADD, r->efd, &ev);
    if (rc != 0 || r->efd < 0 || r->lender_wake < 0 || r->epfd < 0) {
        emq_status st = emq__error_set(err, EMQ_ENOMEM, 0,
                                       "could not make the consumer's event "
                                       "descriptor: %s",
                                       strerror(errno));
        emq__ready_free(r);
        return st;
    }
    r->root = root;
    r->limit = (size_t)emq__cfg_max_in_flight(root->conf);
    r->wake_room = (size_t)emq__cfg_count(root->conf) < r->limit
                       ? (size_t)emq__cfg_count(root->conf)
                       : r->limit;
    *out = r;
    return EMQ_OK;
}

void emq__ready_free(emq__ready *r) {
    if (r == NULL)
        return;
    while (r->n > 0) {
        emq__chunk_unref(r->ring[r->head]->chunk);
        r->head = (r->head + 1) % r->cap;
        r->n--;
    }
    emq__free(r->ring);
    if (r->efd >= 0)
        close(r->efd);
    if (r->lender_wake >= 0)
        close(r->lender_wake);
    if (r->epfd >= 0)
        close(r->epfd);
    pthread_mutex_destroy(&r->mu);
    pthread_cond_destroy(&r->more);
    pthread_cond_destroy(&r->room);
    pthread_cond_destroy(&r->lent);
    emq__free(r);
}

void emq__chunk_unref(emq__chunk *ch) {
    if (ch == NULL || atomic_fetch_sub(&ch->refs, 1) != 1)
        return;
    emq_reply_free(ch->reply);
    emq__free(ch->fields);
    emq__free(ch->names);
    emq__free(ch);
}

/* Whether a step has something to do, the socket aside (caller holds
 * mu): entries wait and may be handed out (not paused), the consumer has
 * ended, or the read lent to a loop is due to be sent. Paused, nothing is
 * due however much waits: an event loop would wake for nothing, again and
 * again; emq__ready_notify on resume makes it due again. */
static int step_due_locked(const emq__ready *r) {
    int paused = atomic_load(&r->root->paused);
    return (r->n > 0 && !paused) || r->ended ||
           (r->lend == LEND_OFFERED && r->lend_sock >= 0 && r->lend_send_due &&
            !paused);
}

/* The eventfd follows step_due_locked (caller holds mu). */
static void signal_fd(emq__ready *r) {
    if (!r->fd_wanted) /* two system calls per read saved */
        return;
    int want = step_due_locked(r);
    if (want == r->fd_set)
        return;
    uint64_t v = 1;
    ssize_t rc = want ? write(r->efd, &v, sizeof v)
                      : read(r->efd, &v, sizeof v);
    (void)rc; /* EAGAIN only: already in the wanted state */
    r->fd_set = want;
}

/* A batch consumer of a queue with priorities reads no further ahead
 * than one batch (batch.max waiting to be handed out), so an urgent entry
 * produced meanwhile waits behind at most what is in hand and one batch;
 * 0: no such bound (caller holds mu). */
static size_t ahead_bound(const emq__ready *r) {
    const emq_consumer_t *root = r->root;
    if (root->batch_handler == NULL || !atomic_load(&root->prioritized))
        return 0;
    return (size_t)emq__cfg_batch_max(root->conf);
}

/* Caller holds mu. */
static size_t room_locked(const emq__ready *r) {
    if (atomic_load(&r->root->paused))
        return 0;
    size_t out = r->n;
    size_t n;
    emq_consumer_t *const *m = emq__consumer_members(r->root, &n);
    for (size_t i = 0; i < n; i++)
        out += atomic_load(&m[i]->table.nhandling);
    size_t room = out >= r->limit ? 0 : r->limit - out;
    size_t ahead = ahead_bound(r);
    if (ahead > 0 && room > 0)
        room = r->n >= ahead ? 0 : ahead - r->n < room ? ahead - r->n : room;
    return room;
}

size_t emq__ready_room(emq_consumer_t *c) {
    emq__ready *r = c->ready;
    if (r == NULL)
        return SIZE_MAX;
    pthread_mutex_lock(&r->mu);
    size_t room = room_locked(r);
    pthread_mutex_unlock(&r->mu);
    return room;
}

void emq__ready_wait_room(emq_consumer_t *c, int64_t ms) {
    emq__ready *r = c->ready;
    struct timespec ts;
    emq__deadline_in(&ts, ms);
    pthread_mutex_lock(&r->mu);
    atomic_fetch_add(&r->room_waiters, 1);
    if (room_locked(r) == 0 && !emq__consumer_stopping(c) && !r->closing)
        pthread_cond_timedwait(&r->room, &r->mu, &ts);
    atomic_fetch_sub(&r->room_waiters, 1);
    pthread_mutex_unlock(&r->mu);
}

void emq__ready_wait_settled(emq_consumer_t *c) {
    emq__ready *r = c->ready;
    pthread_mutex_lock(&r->mu);
    atomic_fetch_add(&r->room_waiters, 1);
    while (atomic_load(&c->table.nhandling) > 0 && !r->closing &&
           !atomic_load(&c->fatal)) {
        struct timespec ts;
        emq__deadline_in(&ts, 100);
        pthread_cond_timedwait(&r->room, &r->mu, &ts);
    }
    atomic_fetch_sub(&r->room_waiters, 1);
    pthread_mutex_unlock(&r->mu);
}

void emq__ready_settled(emq__ready *r) {
    if (atomic_load(&r->room_waiters) == 0)
        return;
    pthread_mutex_lock(&r->mu);
    /* Wake a reader only for room a whole read fits in (one wake-up per
     * read, not one per settlement), or once nothing is out. */
    size_t room = room_locked(r);
    if (room >= r->wake_room || room == r->limit)
        pthread_cond_broadcast(&r->room);
    pthread_mutex_unlock(&r->mu);
}

int emq__ready_fd(emq__ready *r) {
    pthread_mutex_lock(&r->mu);
    r->fd_wanted = 1;
    signal_fd(r);
    pthread_mutex_unlock(&r->mu);
    return r->epfd;
}

/* Whether sock has bytes (or an end) to read. */
static int sock_ready(int sock) {
    struct pollfd p = {.fd = sock, .events = POLLIN};
    return poll(&p, 1, 0) == 1 && p.revents != 0;
}

int emq__ready_step_due(emq__ready *r) {
    pthread_mutex_lock(&r->mu);
    int due = step_due_locked(r);
    int sock = r->lend == LEND_OFFERED && !atomic_load(&r->root->paused)
                   ? r->lend_sock
                   : -1;
    pthread_mutex_unlock(&r->mu);
    return due || (sock >= 0 && sock_ready(sock));
}

/* Wakes a lender lending to a loop (it sleeps in poll(2), not on lent). */
static void wake_loop_lender(emq__ready *r) {
    uint64_t v = 1;
    ssize_t rc = write(r->lender_wake, &v, sizeof v);
    (void)rc; /* EAGAIN only: woken already */
}

void emq__ready_notify(emq__ready *r) {
    pthread_mutex_lock(&r->mu);
    pthread_cond_broadcast(&r->room);
    pthread_cond_broadcast(&r->more);
    pthread_cond_broadcast(&r->lent);
    signal_fd(r);
    pthread_mutex_unlock(&r->mu);
    wake_loop_lender(r);
}

emq_status emq__ready_push(emq__ready *r, emq__chunk *ch, emq_error *err) {
    emq_status st = EMQ_OK;
    pthread_mutex_lock(&r->mu);
    if (r->n + ch->n > r->cap) {
        size_t cap = r->cap ? r->cap : 64;
        while (cap < r->n + ch->n)
            cap *= 2;
        handout **ring = emq__alloc(cap * sizeof *ring);
        if (ring == NULL) {
            st = emq__oom(err);
        } else {
            for (size_t i = 0; i < r->n; i++)
                ring[i] = r->ring[(r->head + i) % r->cap];
            emq__free(r->ring);
            r->ring = ring;
            r->cap = cap;
            r->head = 0;
        }
    }
    if (st == EMQ_OK) {
        for (size_t i = 0; i < ch->n; i++)
            r->ring[(r->head + r->n + i) % r->cap] = &ch->items[i];
        r->n += ch->n;
        signal_fd(r);
    }
    pthread_mutex_unlock(&r->mu);
    /* Once mu is free: a poller woken under it would wait for it at once,
     * a second sleep and wake on the way to every entry. */
    if (st == EMQ_OK)
        pthread_cond_broadcast(&r->more);
    return st;
}

/* Takes up to max entries off the queue into out (caller holds mu). An
 * entry is handed out only while its consumer holds the lease (else its
 * thread's next turn starts a session, which drops it from the table and
 * brings it back), and only when the table still has it unhanded (a lost
 * session dropped it, a peer took it, it went stale: dropped here). The
 * table is locked once per run of entries of one consumer. */
static size_t take_locked(emq__ready *r, emq_entry **out, size_t max) {
    size_t got = 0, dropped = 0;
    handout *run[64];
    const batch_item *items[64];
    int began[64];
    int alone = 0; /* an entry that goes out by itself ends the take */
    while (!alone && got < max && r->n > 0 && !atomic_load(&r->root->paused)) {
        emq_consumer_t *c = r->ring[r->head]->owner;
        size_t k = 0;
        while (k < 64 && got + k < max && r->n > 0 &&
               r->ring[r->head]->owner == c) {
            /* A suspect of a crash (batch_item.alone) goes out alone: the
             * take ends before it, or right after it when it is first. */
            alone = r->ring[r->head]->item.alone;
            if (alone && got + k > 0)
                break;
            run[k] = r->ring[r->head];
            items[k] = &run[k]->item;
            r->head = (r->head + 1) % r->cap;
            r->n--;
            k++;
            if (alone)
                break;
        }
        int valid = emq__lease_valid(c);
        /* Dropped for the lease, they stay in the table, refreshed, until
         * a session starts again: it takes them back from there. The
         * renewal may get through before the run thread looks at the
         * lease, so it is told; a read it has blocked ends early. */
        if (!valid && emq__machine_post(&c->machine, EMQ_POST_LAPSE))
            emq__upkeep_unblock_ask(c);
        /* Read before the begin: a clear after it raises the generation
         * these entries carry, one before it leaves nothing to begin. */
        unsigned gen = atomic_load(&c->table.generation);
        if (valid)
            emq__inflight_begin(&c->table, items, k, began);
        size_t handed = 0;
        for (size_t i = 0; i < k; i++) {
            if (valid && began[i] == 1) {
                run[i]->generation = gen;
                out[got++] = &run[i]->pub;
                handed++;
                continue;
            }
            if (valid && began[i] < 0)
                emq__machine_post(&c->machine, EMQ_POST_RECOVER_SELF);
            emq__chunk_unref(run[i]->chunk);
            dropped++;
        }
        atomic_fetch_add(&c->stats.delivered, handed);
    }
    /* Handed out, entries leave the read-ahead a batch consumer of a
     * queue with priorities bounds (ahead_bound): its reader may go on. */
    if (dropped ||
        (got > 0 && ahead_bound(r) > 0 && atomic_load(&r->room_waiters) > 0))
        pthread_cond_broadcast(&r->room);
    if (r->n == 0 && r->lender_waits_drain)
        pthread_cond_signal(&r->lent);
    signal_fd(r);
    return got;
}

/* ---- reads lent to pollers ----------------------------------------------- */

/* Whether reads may be lent on (caller holds mu). */
static int lending_locked(const emq__ready *r) {
    return !r->closing && !r->ended && !emq__consumer_stopping(r->root) &&
           !atomic_load(&r->root->paused);
}

/* Whether a poller is here, or was a moment ago (caller holds mu). */
static int poller_near_locked(const emq__ready *r, int64_t now) {
    return r->pollers > 0 || now - r->poller_seen_ms <= LEND_GRACE_MS;
}

/* The socket leaves the event descriptor's set (caller holds mu): the
 * reads are the lender's again. */
static void unwatch_sock(emq__ready *r) {
    if (r->lend_sock < 0)
        return;
    /* ENOENT or EBADF when a failed connection was closed: gone anyway. */
    (void)epoll_ctl(r->epfd, EPOLL_CTL_DEL, r->lend_sock, NULL);
    r->lend_sock = -1;
}

/* Lends the read to an event loop (emq__ready_lend): sends it here, puts
 * sock in the event descriptor's set and offers it to the steps. Watches
 * meanwhile: while no step came for a while it sleeps on the socket
 * (the loop wakes too, and steps), while steps come it looks every
 * LOOP_GRACE_MS instead of waking with each reply; a reply in, or a read
 * due, that no step took up for LOOP_GRACE_MS is taken back. */
static int lend_to_loop(emq__ready *r, emq__lent_read_fn fn, void *ctx,
                        int sock, emq_status *st, emq_error *err) {
    int again = EMQ__LENT_BACK;
    int64_t until = 0;
    *st = fn(ctx, 0, &again, &until, err);
    if (*st != EMQ_OK || again != EMQ__LENT_OWED)
        return 1; /* failed, or something else is due */
    pthread_mutex_lock(&r->mu);
    struct epoll_event ev = {.events = EPOLLIN, .data.fd = sock};
    if (r->n > 0 || !lending_locked(r) || until <= emq__now_ms() ||
        epoll_ctl(r->epfd, EPOLL_CTL_ADD, sock, &ev) != 0) {
        pthread_mutex_unlock(&r->mu);
        return 1; /* the read stays owed: the caller reads its reply */
    }
    r->lend = LEND_OFFERED;
    r->lend_fn = fn;
    r->lend_ctx = ctx;
    r->lend_sock = sock;
    r->lend_send_due = 0;
    r->lend_until_ms = until;
    unsigned turns = r->lend_turns;
    int64_t pending_at = 0; /* since when a step is wanted and none came */
    int ready = 0, checking = 0;
    for (;;) {
        if (r->lend == LEND_BACK)
            break;
        int64_t now = emq__now_ms();
        int offered = r->lend == LEND_OFFERED;
        if (offered && (!lending_locked(r) ||
                        (!r->lend_send_due && now >= r->lend_until_ms)))
            break; /* ending, paused, the block about to end, a stall */
        int took = r->lend_turns != turns;
        turns = r->lend_turns;
        if (took || !offered || !(r->lend_send_due || ready))
            pending_at = 0;
        else if (pending_at == 0)
            pending_at = now;
        else if (now - pending_at >= LOOP_GRACE_MS)
            break; /* the loop is busy: read for it */
        /* Steps coming: look now and then rather than wake with each
         * reply; none for a while: sleep until the socket has bytes. */
        checking = took || pending_at != 0 || !offered || r->lend_send_due;
        int64_t ms = LOOP_SLICE_MS;
        if (checking)
            ms = LOOP_GRACE_MS;
        else if (r->lend_until_ms - now < ms)
            ms = r->lend_until_ms - now;
        r->lender_watching = !checking;
        pthread_mutex_unlock(&r->mu);
        struct pollfd p[2] = {{.fd = r->lender_wake, .events = POLLIN},
                              {.fd = checking ? -1 : sock, .events = POLLIN}};
        (void)poll(p, 2, ms < 0 ? 0 : (int)ms);
        if (p[0].revents != 0) {
            uint64_t v;
            ssize_t rc = read(r->lender_wake, &v, sizeof v);
            (void)rc;
        }
        ready = checking ? sock_ready(sock) : p[1].revents != 0;
        pthread_mutex_lock(&r->mu);
    }
    *st = EMQ_OK;
    if (r->lend == LEND_BACK && (*st = r->lend_status) != EMQ_OK && err != NULL)
        *err = r->lend_err;
    r->lender_watching = 0;
    unwatch_sock(r);
    r->lend = LEND_NONE;
    r->lend_send_due = 0;
    signal_fd(r);
    pthread_mutex_unlock(&r->mu);
    return 1;
}

int emq__ready_lend(emq__ready *r, emq__lent_read_fn fn, void *ctx, int sock,
                    emq_status *st, emq_error *err) {
    pthread_mutex_lock(&r->mu);
    if (r->n > 0 && lending_locked(r) &&
        (poller_near_locked(r, emq__now_ms()) || (r->fd_wanted && sock >= 0))) {
        /* What the last read brought is on its way out to a taker: lend
         * once it is, if soon (else this thread reads on, and a taker
         * would meet each next entry through it again). */
        struct timespec ts;
        emq__deadline_in(&ts, LOOP_GRACE_MS);
        r->lender_waits_drain = 1;
        while (r->n > 0 && lending_locked(r) &&
               pthread_cond_timedwait(&r->lent, &r->mu, &ts) == 0) {
        }
        r->lender_waits_drain = 0;
    }
    if (r->n > 0 || !lending_locked(r)) {
        pthread_mutex_unlock(&r->mu);
        return 0;
    }
    if (!poller_near_locked(r, emq__now_ms())) {
        int loop = r->fd_wanted && sock >= 0;
        pthread_mutex_unlock(&r->mu);
        return loop ? lend_to_loop(r, fn, ctx, sock, st, err) : 0;
    }
    r->lend = LEND_OFFERED;
    r->lend_fn = fn;
    r->lend_ctx = ctx;
    int wake = r->pollers > 0;
    pthread_mutex_unlock(&r->mu);
    /* Once mu is free, as emq__ready_push does; every poller, as one
     * woken may find its time up. */
    if (wake)
        pthread_cond_broadcast(&r->more);
    pthread_mutex_lock(&r->mu);
    *st = EMQ_OK;
    while (r->lend != LEND_BACK) {
        /* Long while a poller reads or waits: the last poller to leave
         * with the reads still offered wakes it (emq__ready_poll). */
        int64_t ms = 1000;
        if (r->lend == LEND_OFFERED) {
            int64_t now = emq__now_ms();
            /* No poller came (they are busy, or gone), or the consumer
             * is ending: taken back, as a read that found nothing. */
            if (!lending_locked(r) || !poller_near_locked(r, now))
                break;
            if (r->pollers == 0)
                ms = r->poller_seen_ms + LEND_GRACE_MS + 1 - now;
        }
        r->lender_waits_long = ms >= 1000;
        struct timespec ts;
        emq__deadline_in(&ts, ms < 1 ? 1 : ms);
        pthread_cond_timedwait(&r->lent, &r->mu, &ts);
    }
    r->lender_waits_long = 0;
    if (r->lend == LEND_BACK && (*st = r->lend_status) != EMQ_OK && err != NULL)
        *err = r->lend_err;
    r->lend = LEND_NONE;
    pthread_mutex_unlock(&r->mu);
    return 1;
}

/* Runs the read lent to this poller, for at most max_ms (caller holds mu,
 * which is free meanwhile). It stays offered for the next poller when the
 * read says so; else it goes back to the lender with its status. */
static void run_lent_read(emq__ready *r, int64_t max_ms) {
    r->lend = LEND_TAKEN;
    r->lend_turns++;
    emq__lent_read_fn fn = r->lend_fn;
    void *ctx = r->lend_ctx;
    pthread_mutex_unlock(&r->mu);
    emq_error err;
    emq__error_clear(&err);
    int again = EMQ__LENT_BACK;
    int64_t until = 0;
    emq_status st = fn(ctx, max_ms, &again, &until, &err);
    pthread_mutex_lock(&r->mu);
    if (st == EMQ_OK && again != EMQ__LENT_BACK && lending_locked(r)) {
        r->lend = LEND_OFFERED;
        r->lend_send_due = r->lend_sock >= 0 && again == EMQ__LENT_SEND;
        if (again == EMQ__LENT_OWED)
            r->lend_until_ms = until;
        signal_fd(r);       /* a loop's next step sends the next read */
        if (r->pollers > 0) /* one asleep may take it now */
            pthread_cond_broadcast(&r->more);
        /* A lender asleep on the socket would not see a read due that no
         * step takes up (nothing will come on the socket). */
        if (r->lend_send_due && r->lender_watching) {
            pthread_mutex_unlock(&r->mu);
            wake_loop_lender(r);
            pthread_mutex_lock(&r->mu);
        }
        return;
    }
    r->lend_status = st;
    r->lend_err = err;
    r->lend = LEND_BACK;
    r->lend_send_due = 0;
    int loop = r->lend_sock >= 0;
    unwatch_sock(r); /* before the lender reads on: no step spins on it */
    signal_fd(r);
    pthread_mutex_unlock(&r->mu);
    pthread_cond_signal(&r->lent);
    if (loop)
        wake_loop_lender(r);
    pthread_mutex_lock(&r->mu);
}

emq_status emq__ready_poll(emq__ready *r, emq_entry **out, size_t max,
                           int64_t timeout_ms, size_t *n, emq_error *err) {
    *n = 0;
    struct timespec ts = {0, 0};
    int64_t deadline_ms = emq__now_ms() + (timeout_ms > 0 ? timeout_ms : 0);
    if (timeout_ms > 0)
        emq__deadline_in(&ts, timeout_ms);
    emq_status st = EMQ_OK;
    int stepped = 0;
    pthread_mutex_lock(&r->mu);
    for (;;) {
        if (timeout_ms != 0) /* one that may take a lent read */
            r->poller_seen_ms = emq__now_ms();
        *n = take_locked(r, out, max);
        if (*n > 0)
            break;
        if (r->ended || emq__consumer_stopping(r->root)) {
            if (r->ended && r->end_status != EMQ_OK) {
                st = r->end_status;
                if (err != NULL)
                    *err = r->end_err;
                break;
            }
            /* Ending on a fatal error: that error, not "stopped". */
            if ((st = emq__consumer_fatal_copy(r->root, err)) != EMQ_OK)
                break;
            st = emq__error_set(err, EMQ_ECLOSED, 0,
                                "consumer '%s' is stopped: settle the "
                                "entries you hold, then "
                                "emq_consumer_close",
                                r->root->name);
            break;
        }
        if (timeout_ms == 0) {
            /* An event loop's step: the read lent to the loop, once. */
            if (!stepped && r->lend == LEND_OFFERED && r->lend_sock >= 0) {
                stepped = 1;
                run_lent_read(r, 0);
                continue;
            }
            break;
        }
        /* Read on this thread; not a read lent to a loop: its socket
         * would wake the loop for as long as this poller holds it. */
        if (r->lend == LEND_OFFERED && r->lend_sock < 0) {
            int64_t left = timeout_ms > 0 ? deadline_ms - emq__now_ms()
                                          : INT64_MAX;
            if (left >= 1) {
                run_lent_read(r, left);
                continue;
            }
        }
        /* In slices: emq_consumer_stop (signal-safe) cannot signal. */
        struct timespec slice;
        emq__deadline_in(&slice, 100);
        if (timeout_ms > 0 &&
            (slice.tv_sec > ts.tv_sec ||
             (slice.tv_sec == ts.tv_sec && slice.tv_nsec > ts.tv_nsec)))
            slice = ts;
        r->pollers++;
        int rc = pthread_cond_timedwait(&r->more, &r->mu, &slice);
        r->pollers--;
        if (rc == ETIMEDOUT && timeout_ms > 0 && emq__now_ms() >= deadline_ms) {
            *n = take_locked(r, out, max);
            break;
        }
    }
    /* The last poller leaving while reads are offered: the lender takes
     * them back unless a poller comes again within LEND_GRACE_MS. */
    int wake_lender = r->pollers == 0 && r->lend == LEND_OFFERED &&
                      r->lender_waits_long;
    if (wake_lender)
        r->lender_waits_long = 0;
    pthread_mutex_unlock(&r->mu);
    if (wake_lender)
        pthread_cond_signal(&r->lent);
    /* What was read ahead long enough to be marked unseen is handed out
     * only once the mark is gone (upkeep.c): a crash in the handler then
     * counts the delivery. */
    size_t kept = 0;
    int waited = 0, unmarked = 0;
    /* The owner of the entry before, kept here: that entry's handout may
     * be gone with its chunk (emq__chunk_unref below). */
    emq_consumer_t *prev_owner = NULL;
    for (size_t i = 0; i < *n; i++) {
        handout *h = (handout *)out[i];
        /* A suspect of a crash (alone in this handout) goes out once what
         * was settled before it is written (emq__upkeep_wait_settled),
         * waited for first: the upkeep then sends the settlements in the
         * round that takes the mark away, so the mark goes last. */
        int settled = h->item.alone ? emq__upkeep_wait_settled(h->owner) : 0;
        if (i == 0 || h->owner != prev_owner || settled) {
            unmarked = emq__upkeep_wait_unmarked(h->owner);
            waited = unmarked != 0 || settled;
        }
        prev_owner = h->owner;
        /* The wait outlasted the lease (it gives up then, the mark maybe
         * still on the server, even when the lease is held again by now):
         * nothing goes out, as for a handout that found the lease lapsed
         * (take_locked). Handed out, the entry would be in a handler's
         * hands while its name may be taken over, and a crash would not
         * count it. */
        if (unmarked < 0 || (waited && !emq__lease_valid(h->owner))) {
            emq__inflight_unbegin(&h->owner->table, &h->item.id);
            if (emq__machine_post(&h->owner->machine, EMQ_POST_LAPSE))
                emq__upkeep_unblock_ask(h->owner);
            emq__chunk_unref(h->chunk);
            continue;
        }
        /* After a wait (a stop may have outlasted claim idle meanwhile,
         * and a peer whose claim found the mark may hold the entry,
         * uncounted), only what is still this consumer's goes out. */
        if (waited &&
            !emq__inflight_still_ours(&h->owner->table, &h->item.id)) {
            emq__machine_post(&h->owner->machine, EMQ_POST_RECOVER_SELF);
            emq__chunk_unref(h->chunk);
            continue;
        }
        out[kept++] = out[i];
    }
    *n = kept;
    return st;
}

void emq__ready_purge(emq_consumer_t *c, int release) {
    emq__ready *r = c->ready;
    if (r == NULL)
        return;
    pthread_mutex_lock(&r->mu);
    size_t kept = 0;
    for (size_t i = 0; i < r->n; i++) {
        handout *h = r->ring[(r->head + i) % r->cap];
        if (h->owner != c) {
            r->ring[(r->head + kept++) % r->cap] = h;
            continue;
        }
        if (release) /* read and never handed out */
            emq__inflight_release(&c->table, &h->item, NULL);
        emq__chunk_unref(h->chunk);
    }
    if (kept != r->n)
        pthread_cond_broadcast(&r->room);
    r->n = kept;
    signal_fd(r);
    pthread_mutex_unlock(&r->mu);
}

void emq__ready_ended(emq__ready *r, emq_status st, const emq_error *err) {
    pthread_mutex_lock(&r->mu);
    if (st != EMQ_OK && r->end_status == EMQ_OK) {
        r->end_status = st;
        if (err != NULL)
            r->end_err = *err;
    }
    if (--r->running == 0)
        r->ended = 1;
    pthread_cond_broadcast(&r->more);
    pthread_cond_broadcast(&r->room);
    signal_fd(r);
    pthread_mutex_unlock(&r->mu);
}

void emq__ready_reset(emq__ready *r) {
    pthread_mutex_lock(&r->mu);
    while (r->n > 0) { /* the readers handed everything back; in case */
        emq__chunk_unref(r->ring[r->head]->chunk);
        r->head = (r->head + 1) % r->cap;
        r->n--;
    }
    r->ended = r->closing = r->running = 0;
    r->end_status = EMQ_OK;
    emq__error_clear(&r->end_err);
    uint64_t v;
    ssize_t rc = read(r->efd, &v, sizeof v); /* a stop may have set it */
    (void)rc;
    r->fd_set = 0;
    pthread_mutex_unlock(&r->mu);
}
