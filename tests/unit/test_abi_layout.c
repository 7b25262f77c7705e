/* SPDX-License-Identifier: BSD-3-Clause */
/* test_abi_layout.c: the layout of every public struct of echomq.h,
 * pinned as 0.1.0 released it, and the reserved room the library fills.
 *
 * The ABI policy at the top of echomq.h: within one SONAME no public
 * struct changes its size or the offset of a member, and a struct grows
 * only by taking words of its reserved room. The table below holds each
 * struct's size and each member's offset and size on LP64 (x86-64,
 * aarch64, ...: the platforms abi/libechomq.abi is recorded on), the room
 * included. A member added at the end or in the middle changes a size or
 * an offset and fails the first test, naming every row that moved; a
 * member that takes room on purpose goes in as a row of its own, the
 * room's row shrinks and the size stays, in the commit that re-records
 * abi/libechomq.abi (scripts/abi.sh record) and says so in CHANGELOG.md.
 * The other tests check that the library writes 0 in the room of what it
 * fills without a server (with one: integ/test_abi_room.c).
 */
#include "harness/test.h"

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

typedef struct layout_row {
    const char *type;
    const char *member; /* NULL: the row is the struct's own size */
    size_t got_offset, want_offset;
    size_t got_size, want_size;
} layout_row;

#define SIZE(T, size)                                                          \
    { #T, NULL, 0, 0, sizeof(T), size }
#define AT(T, m, off, size)                                                    \
    { #T, #m, offsetof(T, m), off, sizeof(((T *)0)->m), size }

/* clang-format off */
static const layout_row rows[] = {
    SIZE(emq_error, 336),
    AT(emq_error, code, 0, 4),
    AT(emq_error, retriable, 4, 4),
    AT(emq_error, message, 8, 256),
    AT(emq_error, reply_code, 264, 32),
    AT(emq_error, fatal, 296, 4),
    AT(emq_error, reserved32, 300, 4),
    AT(emq_error, reserved, 304, 32),

    SIZE(emq_server, 88),
    AT(emq_server, name, 0, 16),
    AT(emq_server, version, 16, 24),
    AT(emq_server, major, 40, 4),
    AT(emq_server, minor, 44, 4),
    AT(emq_server, patch, 48, 4),
    AT(emq_server, capabilities, 52, 4),
    AT(emq_server, reserved, 56, 32),

    SIZE(emq_field, 32), /* fixed: no room */
    AT(emq_field, name, 0, 8),
    AT(emq_field, name_len, 8, 8),
    AT(emq_field, value, 16, 8),
    AT(emq_field, value_len, 24, 8),

    SIZE(emq_id, 48), /* fixed: no room */
    AT(emq_id, str, 0, 48),

    SIZE(emq_message, 24), /* fixed: no room */
    AT(emq_message, fields, 0, 8),
    AT(emq_message, nfields, 8, 8),
    AT(emq_message, id, 16, 8),

    SIZE(emq_keyed_message, 40), /* fixed: no room */
    AT(emq_keyed_message, message, 0, 24),
    AT(emq_keyed_message, key, 24, 8),
    AT(emq_keyed_message, key_len, 32, 8),

    SIZE(emq_produce_opts, 104),
    AT(emq_produce_opts, version, 0, 4),
    AT(emq_produce_opts, key, 8, 8),
    AT(emq_produce_opts, key_len, 16, 8),
    AT(emq_produce_opts, delay_ms, 24, 8),
    AT(emq_produce_opts, due_ms, 32, 8),
    AT(emq_produce_opts, dedup_key, 40, 8),
    AT(emq_produce_opts, dedup_key_len, 48, 8),
    AT(emq_produce_opts, dedup_ttl_ms, 56, 8),
    AT(emq_produce_opts, priority, 64, 8),
    AT(emq_produce_opts, reserved, 72, 32),

    SIZE(emq_delivery, 72),
    AT(emq_delivery, status, 0, 4),
    AT(emq_delivery, id, 8, 8),
    AT(emq_delivery, error, 16, 8),
    AT(emq_delivery, outcome_unknown, 24, 4),
    AT(emq_delivery, attempts, 28, 4),
    AT(emq_delivery, stream, 32, 8),
    AT(emq_delivery, reserved, 40, 32),

    SIZE(emq_entry, 88),
    AT(emq_entry, id, 0, 8),
    AT(emq_entry, deliveries, 8, 8),
    AT(emq_entry, fields, 16, 8),
    AT(emq_entry, nfields, 24, 8),
    AT(emq_entry, stream, 32, 8),
    AT(emq_entry, group, 40, 8),
    AT(emq_entry, consumer, 48, 8),
    AT(emq_entry, reserved, 56, 32),

    SIZE(emq_outcome, 280),
    AT(emq_outcome, verdict, 0, 4),
    AT(emq_outcome, reason, 4, 256),
    AT(emq_outcome, reserved32, 260, 4),
    AT(emq_outcome, reserved, 264, 16),

    SIZE(emq_consumer_stats, 248),
    AT(emq_consumer_stats, delivered, 0, 8),
    AT(emq_consumer_stats, acked, 8, 8),
    AT(emq_consumer_stats, retried, 16, 8),
    AT(emq_consumer_stats, failed, 24, 8),
    AT(emq_consumer_stats, dead_lettered, 32, 8),
    AT(emq_consumer_stats, claimed, 40, 8),
    AT(emq_consumer_stats, deleted_pending, 48, 8),
    AT(emq_consumer_stats, reconnects, 56, 8),
    AT(emq_consumer_stats, group_recreated, 64, 8),
    AT(emq_consumer_stats, reads, 72, 8),
    AT(emq_consumer_stats, round_trips, 80, 8),
    AT(emq_consumer_stats, refreshed, 88, 8),
    AT(emq_consumer_stats, ownership_lost, 96, 8),
    AT(emq_consumer_stats, server_waits, 104, 8),
    AT(emq_consumer_stats, released, 112, 8),
    AT(emq_consumer_stats, in_flight, 120, 8),
    AT(emq_consumer_stats, handed_out, 128, 8),
    AT(emq_consumer_stats, redirects, 136, 8),
    AT(emq_consumer_stats, cluster_retries, 144, 8),
    AT(emq_consumer_stats, cluster_gave_up, 152, 8),
    AT(emq_consumer_stats, handler_overdue, 160, 8),
    AT(emq_consumer_stats, oldest_in_hand_ms, 168, 8),
    AT(emq_consumer_stats, delayed_moved, 176, 8),
    AT(emq_consumer_stats, reserved, 184, 64),

    SIZE(emq_consumer_info, 48),
    AT(emq_consumer_info, name, 0, 8),
    AT(emq_consumer_info, pending, 8, 8),
    AT(emq_consumer_info, idle_ms, 16, 8),
    AT(emq_consumer_info, inactive_ms, 24, 8),
    AT(emq_consumer_info, reserved, 32, 16),

    SIZE(emq_group_limits, 16), /* fixed: no room */
    AT(emq_group_limits, rate, 0, 8),
    AT(emq_group_limits, max_in_flight, 8, 8),

    SIZE(emq_group_info, 208),
    AT(emq_group_info, name, 0, 8),
    AT(emq_group_info, pending, 8, 8),
    AT(emq_group_info, last_delivered_id, 16, 48),
    AT(emq_group_info, entries_read, 64, 8),
    AT(emq_group_info, lag, 72, 8),
    AT(emq_group_info, lag_computed, 80, 4),
    AT(emq_group_info, oldest_pending_id, 84, 48),
    AT(emq_group_info, oldest_pending_age_ms, 136, 8),
    AT(emq_group_info, nconsumers, 144, 8),
    AT(emq_group_info, consumers, 152, 8),
    AT(emq_group_info, limits, 160, 16),
    AT(emq_group_info, limits_ignored, 176, 8), /* took a word of the room */
    AT(emq_group_info, reserved, 184, 24),

    SIZE(emq_delayed_info, 32),
    AT(emq_delayed_info, waiting, 0, 8),
    AT(emq_delayed_info, next_due_ms, 8, 8),
    AT(emq_delayed_info, set_aside, 16, 8), /* took a word of the room */
    AT(emq_delayed_info, orphaned, 24, 8),  /* took the last word */

    SIZE(emq_priority_info, 112),
    AT(emq_priority_info, age_ms, 0, 8),
    AT(emq_priority_info, held, 8, 8),
    AT(emq_priority_info, held_at, 16, 80),
    AT(emq_priority_info, reserved, 96, 16),

    SIZE(emq_queue_info, 368),
    AT(emq_queue_info, stream, 0, 8),
    AT(emq_queue_info, dead, 8, 8),
    AT(emq_queue_info, exists, 16, 4),
    AT(emq_queue_info, length, 24, 8),
    AT(emq_queue_info, first_id, 32, 48),
    AT(emq_queue_info, last_id, 80, 48),
    AT(emq_queue_info, entries_added, 128, 8),
    AT(emq_queue_info, dead_length, 136, 8),
    AT(emq_queue_info, ngroups, 144, 8),
    AT(emq_queue_info, groups, 152, 8),
    AT(emq_queue_info, npartitions, 160, 8),
    AT(emq_queue_info, partitions, 168, 8),
    AT(emq_queue_info, server, 176, 88),
    AT(emq_queue_info, maxmemory_policy, 264, 8),
    AT(emq_queue_info, endpoint, 272, 8),
    AT(emq_queue_info, role, 280, 8),
    AT(emq_queue_info, delayed, 288, 8),
    AT(emq_queue_info, priorities, 296, 8),
    AT(emq_queue_info, reserved, 304, 64),

    SIZE(emq_pending_entry, 232),
    AT(emq_pending_entry, id, 0, 48),
    AT(emq_pending_entry, consumer, 48, 129),
    AT(emq_pending_entry, idle_ms, 184, 8),
    AT(emq_pending_entry, deliveries, 192, 8),
    AT(emq_pending_entry, partition, 200, 4),
    AT(emq_pending_entry, in_hand_ms, 208, 8),
    AT(emq_pending_entry, reserved, 216, 16),

    SIZE(emq_prune_result, 56),
    AT(emq_prune_result, removed, 0, 8),
    AT(emq_prune_result, moved, 8, 8),
    AT(emq_prune_result, kept, 16, 8),
    AT(emq_prune_result, reserved, 24, 32),

    SIZE(emq_trim_result, 104),
    AT(emq_trim_result, removed, 0, 8),
    AT(emq_trim_result, floor, 8, 48),
    AT(emq_trim_result, held_back, 56, 8),
    AT(emq_trim_result, no_groups, 64, 4),
    AT(emq_trim_result, reserved, 72, 32),

    SIZE(emq_dead_letter, 168),
    AT(emq_dead_letter, id, 0, 48),
    AT(emq_dead_letter, origin_id, 48, 48),
    AT(emq_dead_letter, group, 96, 8),
    AT(emq_dead_letter, consumer, 104, 8),
    AT(emq_dead_letter, deliveries, 112, 8),
    AT(emq_dead_letter, reason, 120, 8),
    AT(emq_dead_letter, nfields, 128, 8),
    AT(emq_dead_letter, fields, 136, 8),
    AT(emq_dead_letter, partition, 144, 4),
    AT(emq_dead_letter, reserved32, 148, 4),
    AT(emq_dead_letter, reserved, 152, 16),
    /* added with the function library (not in 0.1.0's first record) */
    SIZE(emq_functions_state, 648),
    AT(emq_functions_state, node, 0, 320),
    AT(emq_functions_state, library, 320, 32),
    AT(emq_functions_state, state, 352, 4),
    AT(emq_functions_state, changed, 356, 4),
    AT(emq_functions_state, others, 360, 256),
    AT(emq_functions_state, reserved, 616, 32),
};
/* clang-format on */

/* The table is for LP64 with 8-byte aligned 64-bit integers (x86-64,
 * aarch64, ppc64le, s390x, riscv64): elsewhere sizes differ, and the
 * policy's promise is the same struct by struct but not these numbers. */
static int lp64(void) {
    return sizeof(void *) == 8 && sizeof(long) == 8 && _Alignof(int64_t) == 8 &&
           sizeof(int) == 4;
}

TEST(abi_layout_public_structs_keep_size_and_offsets) {
    if (!lp64())
        SKIP("the pinned layout is LP64's");
    char report[4096] = "";
    size_t len = 0, bad = 0;
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        const layout_row *r = &rows[i];
        if (r->got_offset == r->want_offset && r->got_size == r->want_size)
            continue;
        bad++;
        if (len >= sizeof report)
            continue;
        if (r->member == NULL)
            len += (size_t)snprintf(report + len, sizeof report - len,
                                    "\n  sizeof(%s) %zu (pinned %zu)", r->type,
                                    r->got_size, r->want_size);
        else
            len += (size_t)snprintf(
                report + len, sizeof report - len,
                "\n  %s.%s: offset %zu (pinned %zu), size %zu (pinned %zu)",
                r->type, r->member, r->got_offset, r->want_offset, r->got_size,
                r->want_size);
    }
    if (bad)
        FAIL("%zu row(s) of the 0.1.0 layout moved (a member added without "
             "taking reserved room? see the ABI policy in echomq.h):%s",
             bad, report);
}

/* Every struct with room ends with it: the last row of each struct that
 * has a reserved member reaches the struct's end, so nothing was added
 * after the room (the size row would catch it too, this names why). */
TEST(abi_layout_room_is_last) {
    if (!lp64())
        SKIP("the pinned layout is LP64's");
    size_t n = sizeof rows / sizeof rows[0];
    for (size_t i = 0; i < n; i++) {
        if (rows[i].member == NULL || strcmp(rows[i].member, "reserved") != 0)
            continue;
        size_t size = 0;
        for (size_t k = 0; k < n; k++)
            if (rows[k].member == NULL &&
                strcmp(rows[k].type, rows[i].type) == 0)
                size = rows[k].got_size;
        if (rows[i].got_offset + rows[i].got_size != size)
            FAIL("%s.reserved ends at %zu, the struct at %zu: room must "
                 "be last",
                 rows[i].type, rows[i].got_offset + rows[i].got_size, size);
    }
}

/* Every public struct has a row: the list the ABI policy names. */
TEST(abi_layout_every_struct_is_pinned) {
    static const char *const all[] = {
        "emq_error",          "emq_server",
        "emq_field",          "emq_id",
        "emq_message",        "emq_keyed_message",
        "emq_produce_opts",   "emq_delivery",
        "emq_entry",          "emq_outcome",
        "emq_consumer_stats", "emq_consumer_info",
        "emq_group_limits",   "emq_group_info",
        "emq_delayed_info",   "emq_priority_info",
        "emq_queue_info",     "emq_pending_entry",
        "emq_prune_result",   "emq_trim_result",
        "emq_dead_letter",    "emq_functions_state",
    };
    for (size_t a = 0; a < sizeof all / sizeof all[0]; a++) {
        int found = 0;
        for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++)
            found |= rows[i].member == NULL &&
                     strcmp(rows[i].type, all[a]) == 0;
        if (!found)
            FAIL("%s has no size row", all[a]);
    }
}

static int all_zero(const void *p, size_t n) {
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++)
        if (b[i] != 0)
            return 0;
    return 1;
}

TEST(abi_room_error_is_zero_when_set) {
    emq_conf_t *conf = emq_conf_new();
    ASSERT(conf != NULL);
    emq_error err;
    memset(&err, 0xA5, sizeof err);
    ASSERT_STATUS(emq_conf_set(conf, "no.such.property", "1", &err), EMQ_EINVAL,
                  &err);
    ASSERT_EQ_INT(err.reserved32, 0);
    ASSERT(all_zero(err.reserved, sizeof err.reserved));
    ASSERT_EQ_INT(err.fatal, 0);
    emq_conf_destroy(conf);
}

TEST(abi_room_produce_opts_init_is_zero) {
    emq_produce_opts o = EMQ_PRODUCE_OPTS_INIT;
    ASSERT_EQ_INT(o.version, EMQ_PRODUCE_OPTS_VERSION);
    ASSERT_EQ_INT(o.priority, -1);
    ASSERT(all_zero(o.reserved, sizeof o.reserved));
}

TEST(abi_room_server_and_stats_are_zero) {
    emq_server s;
    memset(&s, 0xA5, sizeof s);
    ASSERT_EQ_INT(emq_conn_server(NULL, &s), 0);
    ASSERT(all_zero(&s, sizeof s));
    /* A consumer is made without touching the network. */
    emq_conf_t *conf = emq_conf_new();
    ASSERT(conf != NULL);
    emq_error err;
    ASSERT_OK(emq_conf_set(conf, "url", "redis://127.0.0.1:1", &err), &err);
    ASSERT_OK(emq_conf_set(conf, "queue", "room", &err), &err);
    ASSERT_OK(emq_conf_set(conf, "group", "g", &err), &err);
    ASSERT_OK(emq_conf_set(conf, "consumer", "c", &err), &err);
    ASSERT_OK(emq_conf_set(conf, "start", "new", &err), &err);
    emq_consumer_t *c = NULL;
    ASSERT_OK(emq_consumer_new(conf, NULL, NULL, &c, &err), &err);
    emq_consumer_stats st;
    memset(&st, 0xA5, sizeof st);
    emq_consumer_stats_get(c, &st);
    ASSERT(all_zero(st.reserved, sizeof st.reserved));
    emq_consumer_destroy(c);
    emq_conf_destroy(conf);
}
