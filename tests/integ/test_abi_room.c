/* SPDX-License-Identifier: BSD-3-Clause */
/* test_abi_room.c: the library writes 0 in the reserved room of every
 * struct it fills, against a real redis-server.
 *
 * The ABI policy of echomq.h lets a later release give a member of the
 * room a meaning whose 0 is "as before"; that holds only if a program
 * built today never sees anything but 0 there. Caller-allocated results
 * are filled with 0xA5 first, and malloc fills what it returns with
 * 0x5A (M_PERTURB; calloc still zeroes), so a member the library skips
 * shows. The
 * admin verbs (describe with its groups, consumers, server, delayed
 * entries and priorities; pending entries; dead letters; delayed;
 * priorities; trim and prune), an asynchronous delivery, an entry handed
 * out by poll and the outcomes a batch handler gets are each checked. The
 * layout itself is pinned by unit/test_abi_layout.c.
 */
#include "integ/admin_inspect_helpers.h"

#include <malloc.h> /* mallopt(M_PERTURB): glibc */
#include <stdatomic.h>

#define ROOM_ZERO(p)                                                           \
    do {                                                                       \
        const unsigned char *b_ = (const unsigned char *)&(p);                 \
        for (size_t i_ = 0; i_ < sizeof(p); i_++)                              \
            if (b_[i_] != 0)                                                   \
                FAIL("%s: byte %zu is 0x%02x, not 0", #p, i_, b_[i_]);         \
    } while (0)

TEST(abi_room_admin_results_are_zero) {
    mallopt(M_PERTURB, 0xA5);
    emq_srv *s = emq_srv_start(NULL);
    emq_conn_t *conn = admin_connect(s);
    add_ids(conn, "emq:{room}", 1, 3);
    CMD_NOERR(conn, "XGROUP", "CREATE", "emq:{room}", "g", "0");
    ASSERT_EQ_SIZE(
        group_read(conn, "emq:{room}", "g", "c1", "2", ">", 0, NULL, NULL), 2);
    CMD_NOERR(conn, "XADD", "emq:{room}:dead", "*", "emq.id", "1-0",
              "emq.group", "g", "emq.consumer", "c1", "emq.deliveries", "3",
              "emq.reason", "poison", "n", "1");
    emq_admin_t *a = admin_open(s, "room", "3");
    emq_error err;

    emq_priority_info prio;
    memset(&prio, 0xA5, sizeof prio);
    int has = 0;
    ASSERT_OK(emq_admin_priorities(a, 0, &prio, &has, &err), &err);
    ASSERT_EQ_INT(has, 1);
    ROOM_ZERO(prio.reserved);

    emq_delayed_info delayed;
    memset(&delayed, 0xA5, sizeof delayed);
    ASSERT_OK(emq_admin_delayed(a, &delayed, &err), &err);
    ASSERT_EQ_SIZE(delayed.waiting, 0);
    ASSERT_EQ_SIZE(delayed.orphaned, 0); /* its last word of room */

    emq_queue_info *info = NULL;
    ASSERT_OK(emq_admin_describe(a, &info, &err), &err);
    ROOM_ZERO(info->reserved);
    ROOM_ZERO(info->server.reserved);
    ASSERT_EQ_SIZE(info->ngroups, 1);
    ROOM_ZERO(info->groups[0].reserved);
    ASSERT_EQ_SIZE(info->groups[0].nconsumers, 1);
    ROOM_ZERO(info->groups[0].consumers[0].reserved);
    ASSERT(info->delayed != NULL);
    ASSERT_EQ_SIZE(info->delayed->orphaned, 0);
    ASSERT(info->priorities != NULL);
    ROOM_ZERO(info->priorities->reserved);
    emq_queue_info_free(info);

    emq_pending_entry *pending = NULL;
    size_t n = 0;
    ASSERT_OK(emq_admin_pending(a, "g", NULL, 0, 10, &pending, &n, &err), &err);
    ASSERT_EQ_SIZE(n, 2);
    for (size_t i = 0; i < n; i++)
        ROOM_ZERO(pending[i].reserved);
    emq_free_array(pending);

    emq_dead_letter *letters = NULL;
    ASSERT_OK(emq_admin_dead_list(a, 0, &letters, &n, &err), &err);
    ASSERT_EQ_SIZE(n, 1);
    ROOM_ZERO(letters[0].reserved32);
    ROOM_ZERO(letters[0].reserved);
    emq_dead_letters_free(letters, n);

    emq_trim_result trim;
    memset(&trim, 0xA5, sizeof trim);
    ASSERT_OK(emq_admin_trim_acked(a, -1, -1, &trim, &err), &err);
    ROOM_ZERO(trim.reserved);
    emq_prune_result prune;
    memset(&prune, 0xA5, sizeof prune);
    ASSERT_OK(emq_admin_prune_consumers(a, "g", 3600000, &prune, &err), &err);
    ROOM_ZERO(prune.reserved);

    /* An error the library sets: a group that does not exist. */
    memset(&err, 0xA5, sizeof err);
    ASSERT_STATUS(
        emq_admin_pending(a, "nogroup", NULL, 0, 10, &pending, &n, &err),
        EMQ_ESERVER, &err);
    ROOM_ZERO(err.reserved32);
    ROOM_ZERO(err.reserved);

    emq_admin_destroy(a);
    emq_conn_destroy(conn);
    emq_srv_stop(s);
    mallopt(M_PERTURB, 0);
}

typedef struct room_seen {
    atomic_int deliveries; /* callbacks seen */
    atomic_int dirty;      /* of those, with a non-zero byte in the room */
} room_seen;

static int room_dirty(const void *p, size_t size) {
    const unsigned char *b = p;
    for (size_t i = 0; i < size; i++)
        if (b[i] != 0)
            return 1;
    return 0;
}

static void room_delivered(void *opaque, const emq_delivery *d) {
    room_seen *seen = opaque;
    if (room_dirty(d->reserved, sizeof d->reserved))
        atomic_fetch_add(&seen->dirty, 1);
    atomic_fetch_add(&seen->deliveries, 1);
}

typedef struct room_batch {
    emq_consumer_t *c;
    atomic_int calls;
    atomic_int dirty;
} room_batch;

static void room_batch_handle(void *opaque, const emq_entry *const *entries,
                              size_t n, emq_outcome *outcomes) {
    room_batch *b = opaque;
    for (size_t i = 0; i < n; i++)
        if (room_dirty(&outcomes[i].reserved32,
                       sizeof outcomes[i].reserved32) ||
            room_dirty(outcomes[i].reserved, sizeof outcomes[i].reserved) ||
            room_dirty(entries[i]->reserved, sizeof entries[i]->reserved))
            atomic_fetch_add(&b->dirty, 1);
    atomic_fetch_add(&b->calls, 1);
    emq_consumer_stop(b->c);
}

TEST(abi_room_deliveries_entries_and_outcomes_are_zero) {
    mallopt(M_PERTURB, 0xA5);
    emq_srv *s = emq_srv_start(NULL);
    emq_producer_t *p = queue_producer(s, "roomq");
    room_seen seen = {0, 0};
    emq_error err;
    for (int i = 0; i < 4; i++) {
        emq_field f = {"n", 1, "v", 1};
        ASSERT_OK(emq_produce_async(p, &f, 1, room_delivered, &seen, &err),
                  &err);
    }
    ASSERT_OK(emq_producer_flush(p, emq_test_ms(10000), &err), &err);
    ASSERT_EQ_INT(atomic_load(&seen.deliveries), 4);
    ASSERT_EQ_INT(atomic_load(&seen.dirty), 0);
    emq_producer_destroy(p);

    /* Pull mode: an entry poll hands out. */
    emq_conf_t *conf = consumer_conf(s, "roomq", "pull", "c", "head");
    emq_consumer_t *c = NULL;
    ASSERT_OK(emq_consumer_new(conf, NULL, NULL, &c, &err), &err);
    emq_conf_destroy(conf);
    emq_entry *got[4] = {NULL};
    size_t have = 0;
    int64_t end = now_ms() + emq_test_ms(10000);
    while (have < 4 && now_ms() < end) {
        size_t k = 0;
        ASSERT_OK(emq_consumer_poll(c, got + have, 4 - have, 50, &k, &err),
                  &err);
        have += k;
    }
    ASSERT_EQ_SIZE(have, 4);
    for (size_t i = 0; i < have; i++) {
        ROOM_ZERO(got[i]->reserved);
        ASSERT_OK(emq_consumer_ack(c, got[i], &err), &err);
        emq_entry_free(got[i]);
    }
    ASSERT_OK(emq_consumer_close(c, emq_test_ms(10000), &err), &err);
    emq_consumer_destroy(c);

    /* A batch handler's entries and outcomes. */
    conf = consumer_conf(s, "roomq", "batch", "c", "head");
    room_batch b = {NULL, 0, 0};
    ASSERT_OK(emq_consumer_new_batch(conf, room_batch_handle, &b, &b.c, &err),
              &err);
    emq_conf_destroy(conf);
    ASSERT_OK(emq_consumer_run(b.c, &err), &err);
    ASSERT(atomic_load(&b.calls) >= 1);
    ASSERT_EQ_INT(atomic_load(&b.dirty), 0);
    emq_consumer_destroy(b.c);
    emq_srv_stop(s);
    mallopt(M_PERTURB, 0);
}
