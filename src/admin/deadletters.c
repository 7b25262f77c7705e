/* SPDX-License-Identifier: BSD-3-Clause */
/* deadletters.c: listing, requeueing and purging a queue's dead letters.
 *
 * A dead letter (docs/KEYSPACE.md, written by src/consumer/deadletter.c)
 * holds five origin pairs first (emq.id, emq.group, emq.consumer,
 * emq.deliveries, emq.reason), then the original entry's fields. The
 * origin is recognised positionally: the leading pairs whose names match
 * that sequence, in order, are origin; every pair after them is an
 * original field, even one that reuses an "emq." name. The requeue script
 * applies the same rule, so what a listing shows as fields is exactly what
 * a requeue puts back.
 *
 * A listing is copied into one caller-owned block (letters, field arrays
 * and bytes together), so it outlives the reply and frees with one call.
 * A requeue moves one dead letter per script call: the XADD to the stream
 * and the XDEL from the dead letters happen together or not at all; a
 * dead letter too wide for the script (Lua's unpack holds about 8000
 * values) is read and added from here, then deleted (requeue_wide). Purge
 * counts and deletes in one script. Nothing here reads or changes a
 * group.
 */
#include "admin.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The names of the origin pairs, in order. */
static const char *const origin_names[5] = {
    "emq.id", "emq.group", "emq.consumer", "emq.deliveries", "emq.reason"};

/* How many leading pairs of a dead letter's flat field list (npairs
 * pairs) are origin pairs: 0..5. */
static size_t origin_pairs(const emq_reply *flat, size_t npairs) {
    size_t k = 0;
    while (k < 5 && k < npairs) {
        size_t len = 0;
        const char *s = emq_reply_str(emq_reply_at(flat, 2 * k), &len);
        if (s == NULL || len != strlen(origin_names[k]) ||
            memcmp(s, origin_names[k], len) != 0)
            break;
        k++;
    }
    return k;
}

/* A bump allocator over the block of a listing. */
typedef struct arena {
    char *next;
} arena;

/* Copies len bytes of s and a NUL into the arena; returns the copy. */
static char *arena_copy(arena *ar, const char *s, size_t len) {
    char *out = ar->next;
    if (len)
        memcpy(out, s, len);
    out[len] = '\0';
    ar->next += len + 1;
    return out;
}

/* Bytes a reply string needs in the arena, with its NUL. */
static size_t copy_size(const emq_reply *r) {
    size_t len = 0;
    emq_reply_str(r, &len);
    return len + 1;
}

/* Fills letter from one XRANGE entry [id, [f, v, ...]], copying into the
 * arena. Values of origin pairs that are missing read as "" (and 0). */
static void fill_letter(emq_dead_letter *d, const emq_reply *entry,
                        emq_field *fields, arena *ar) {
    memset(d, 0, sizeof *d); /* the reserved room too */
    const emq_reply *flat = emq_reply_at(entry, 1);
    size_t npairs = emq_reply_len(flat) / 2;
    size_t norigin = origin_pairs(flat, npairs);
    const char *origin[5] = {"", "", "", "", ""};
    size_t origin_len[5] = {0, 0, 0, 0, 0};
    for (size_t k = 0; k < norigin; k++) {
        origin[k] =
            emq_reply_str(emq_reply_at(flat, 2 * k + 1), &origin_len[k]);
        if (origin[k] == NULL) {
            origin[k] = "";
            origin_len[k] = 0;
        }
    }
    if (emq__admin_id(emq_reply_at(entry, 0), &d->id, NULL) != 0)
        d->id.str[0] = '\0';
    size_t olen = origin_len[0] < sizeof d->origin_id.str ? origin_len[0] : 0;
    memcpy(d->origin_id.str, origin[0], olen);
    d->origin_id.str[olen] = '\0';
    d->group = arena_copy(ar, origin[1], origin_len[1]);
    d->consumer = arena_copy(ar, origin[2], origin_len[2]);
    char digits[24] = "";
    if (origin_len[3] < sizeof digits) {
        memcpy(digits, origin[3], origin_len[3]);
        digits[origin_len[3]] = '\0';
    }
    d->deliveries = strtoull(digits, NULL, 10);
    d->reason = arena_copy(ar, origin[4], origin_len[4]);
    d->nfields = npairs - norigin;
    d->fields = d->nfields ? fields : NULL;
    for (size_t i = 0; i < d->nfields; i++) {
        size_t base = 2 * (norigin + i);
        size_t nlen = 0, vlen = 0;
        const char *name = emq_reply_str(emq_reply_at(flat, base), &nlen);
        const char *value = emq_reply_str(emq_reply_at(flat, base + 1), &vlen);
        fields[i].name = arena_copy(ar, name ? name : "", name ? nlen : 0);
        fields[i].name_len = name ? nlen : 0;
        fields[i].value = arena_copy(ar, value ? value : "", value ? vlen : 0);
        fields[i].value_len = value ? vlen : 0;
    }
}

/* 1 when e looks like a stream entry: [id, [f, v, ...]]. */
static int entry_shape_ok(const emq_reply *e) {
    return emq_reply_len(e) == 2 &&
           emq_reply_kind(emq_reply_at(e, 0)) == EMQ_REPLY_STRING &&
           emq_reply_kind(emq_reply_at(e, 1)) == EMQ_REPLY_ARRAY;
}

/* Copies the dead letters of nr XRANGE replies (r[k] read from partition
 * part[k]; -1 for a queue) into one caller-owned block: at most max (0:
 * all), oldest first by ID across the replies. */
emq_status emq__admin_letters_build(emq_reply *const *r, const int *part,
                                    size_t nr, size_t max,
                                    emq_dead_letter **out, size_t *n,
                                    emq_error *err) {
    size_t all = 0;
    for (size_t k = 0; k < nr; k++)
        for (size_t i = 0; i < emq_reply_len(r[k]); i++) {
            if (!entry_shape_ok(emq_reply_at(r[k], i)))
                return emq__error_set(err, EMQ_EPROTO, 0,
                                      "XRANGE of the dead letters: "
                                      "unexpected reply shape");
            all++;
        }
    if (all == 0)
        return EMQ_OK;
    emq__admin_order *order = emq__calloc(all, sizeof *order);
    const emq_reply **entry = emq__calloc(all, sizeof *entry);
    if (order == NULL || entry == NULL) {
        emq__free(order);
        emq__free(entry);
        return emq__oom(err);
    }
    size_t at = 0;
    for (size_t k = 0; k < nr; k++)
        for (size_t i = 0; i < emq_reply_len(r[k]); i++, at++) {
            entry[at] = emq_reply_at(r[k], i);
            order[at].partition = part[k];
            order[at].at = at;
            (void)emq__admin_id(emq_reply_at(entry[at], 0), NULL,
                                &order[at].id);
        }
    if (nr > 1)
        emq__admin_by_id(order, all);
    size_t nletters = max > 0 && max < all ? max : all;
    /* First pass: the size of the one block holding everything. */
    size_t nfields = 0, bytes = 0;
    for (size_t i = 0; i < nletters; i++) {
        const emq_reply *flat = emq_reply_at(entry[order[i].at], 1);
        size_t npairs = emq_reply_len(flat) / 2;
        size_t norigin = origin_pairs(flat, npairs);
        nfields += npairs - norigin;
        for (size_t k = 0; k < 2 * npairs; k++)
            bytes += copy_size(emq_reply_at(flat, k));
        bytes += 3 * (5 - norigin); /* "" for missing origin strings */
    }
    size_t head = nletters * sizeof(emq_dead_letter);
    char *block = emq__alloc(head + nfields * sizeof(emq_field) + bytes);
    if (block == NULL) {
        emq__free(order);
        emq__free(entry);
        return emq__oom(err);
    }
    emq_dead_letter *letters = (emq_dead_letter *)(void *)block;
    emq_field *fields = (emq_field *)(void *)(block + head);
    arena ar = {block + head + nfields * sizeof(emq_field)};
    for (size_t i = 0; i < nletters; i++) {
        fill_letter(&letters[i], entry[order[i].at], fields, &ar);
        letters[i].partition = order[i].partition;
        fields += letters[i].nfields;
    }
    emq__free(order);
    emq__free(entry);
    *out = letters;
    *n = nletters;
    return EMQ_OK;
}

/* XRANGE of a's dead letters from start, at most count ("": all). */
emq_status emq__admin_dead_range(emq_admin_t *a, const char *start,
                                 const char *count, emq_reply **r,
                                 emq_error *err) {
    const char *argv[] = {"XRANGE", a->keys.dead, start, "+", "COUNT", count};
    return emq__admin_call(a, "XRANGE of the dead letters", count[0] ? 6 : 4,
                           argv, NULL, r, err);
}

emq_status emq__admin_queue_dead_list(emq_admin_t *a, const char *after,
                                      size_t max, emq_dead_letter **out,
                                      size_t *n, emq_error *err) {
    *out = NULL;
    *n = 0;
    char start[EMQ_ID_MAX + 2] = "-";
    if (after != NULL) {
        if (emq__stream_id_parse(after, strlen(after), NULL) != 0) {
            char shown[64];
            emq__printable(shown, sizeof shown, after, strlen(after));
            return emq__error_set(err, EMQ_EINVAL, 0,
                                  "'%s' is not a dead-letter ID (ms-seq)",
                                  shown);
        }
        snprintf(start, sizeof start, "(%s", after); /* exclusive */
    }
    if (a == NULL)
        return emq__error_set(err, EMQ_EINVAL, 0,
                              "listing dead letters needs an admin handle");
    char count[24] = "";
    if (max > 0)
        snprintf(count, sizeof count, "%zu", max);
    emq_reply *r = NULL;
    emq_status st = emq__admin_dead_range(a, start, count, &r, err);
    int none = -1;
    if (st == EMQ_OK)
        st = emq__admin_letters_build(&r, &none, 1, max, out, n, err);
    emq_reply_free(r);
    return st;
}

void emq_dead_letters_free(emq_dead_letter *letters, size_t n) {
    (void)n; /* one block holds the letters and everything they point to */
    emq__free(letters);
}

size_t emq_dead_letters_json(const emq_dead_letter *letters, size_t n,
                             char *buf, size_t size) {
    emq__json j;
    emq__json_init(&j, buf, size);
    for (size_t i = 0; i < n; i++) {
        const emq_dead_letter *d = &letters[i];
        /* The letter's ID, delivery count and original fields are written
         * by emq_entry_json, so they read exactly like a consumed entry
         * (and back through the CLI's reader); its closing brace is then
         * overwritten by the origin. */
        emq_entry entry = {.id = d->id.str,
                           .deliveries = d->deliveries,
                           .fields = d->fields,
                           .nfields = d->nfields};
        size_t room = j.len < j.size ? j.size - j.len : 0;
        size_t len = emq_entry_json(&entry, room ? j.buf + j.len : NULL, room);
        j.len += len - 1;
        if (j.len < j.size)
            j.buf[j.len] = '\0';
        emq__json_raw(&j, ",\"origin_id\":");
        emq__json_cstr(&j, d->origin_id.str);
        emq__json_raw(&j, ",\"group\":");
        emq__json_cstr(&j, d->group ? d->group : "");
        emq__json_raw(&j, ",\"consumer\":");
        emq__json_cstr(&j, d->consumer ? d->consumer : "");
        emq__json_raw(&j, ",\"reason\":");
        emq__json_cstr(&j, d->reason ? d->reason : "");
        if (d->partition >= 0)
            emq__json_raw(&j, ",\"partition\":%d", d->partition);
        emq__json_raw(&j, "}\n");
    }
    return j.len;
}

/* Requeues dead letter id, too wide for the script, with every field:
 * reads it, adds its original fields to the stream in one XADD of any
 * width, then deletes it. Not one atomic step: an interruption between
 * the two leaves the dead letter in place too (a later requeue puts it
 * back again: at least once, never truncated). */
static emq_status requeue_wide(emq_admin_t *a, const char *id, size_t idlen,
                               int *moved, emq_error *err) {
    const char *get[] = {"XRANGE", a->keys.dead, id, id};
    size_t getlens[] = {6, strlen(a->keys.dead), idlen, idlen};
    emq_reply *r = NULL;
    emq_status st = emq__admin_call(a, "reading a wide dead letter", 4, get,
                                    getlens, &r, err);
    if (st != EMQ_OK)
        return st;
    const emq_reply *flat = emq_reply_at(emq_reply_at(r, 0), 1);
    if (emq_reply_len(r) != 1 || emq_reply_kind(flat) != EMQ_REPLY_ARRAY) {
        emq_reply_free(r); /* deleted meanwhile */
        return EMQ_OK;
    }
    size_t total = emq_reply_len(flat);
    size_t skip = 2 * origin_pairs(flat, total / 2);
    size_t argc = 3 + total - skip;
    const char **argv = emq__alloc(argc * sizeof *argv);
    size_t *lens = emq__alloc(argc * sizeof *lens);
    if (argv == NULL || lens == NULL) {
        emq__free(argv);
        emq__free(lens);
        emq_reply_free(r);
        return emq__oom(err);
    }
    argv[0] = "XADD";
    argv[1] = a->keys.stream;
    argv[2] = "*";
    for (size_t i = 0; i < 3; i++)
        lens[i] = strlen(argv[i]);
    for (size_t i = skip; i < total; i++) {
        size_t k = 3 + i - skip;
        argv[k] = emq_reply_str(emq_reply_at(flat, i), &lens[k]);
        if (argv[k] == NULL) {
            argv[k] = "";
            lens[k] = 0;
        }
    }
    emq_reply *added = NULL;
    st = emq__admin_call(a, "requeue of a wide dead letter (XADD)", (int)argc,
                         argv, lens, &added, err);
    emq__free(argv);
    emq__free(lens);
    emq_reply_free(r);
    emq_reply_free(added);
    if (st != EMQ_OK)
        return st;
    const char *del[] = {"XDEL", a->keys.dead, id};
    size_t dellens[] = {4, strlen(a->keys.dead), idlen};
    st = emq__admin_call(a, "requeue of a wide dead letter (XDEL)", 3, del,
                         dellens, &r, err);
    if (st != EMQ_OK)
        return st;
    emq_reply_free(r);
    *moved = 1;
    return EMQ_OK;
}

/* What a requeue refused: how many letters, and the first one's why. */
typedef struct requeue_refusals {
    size_t n;
    char first[EMQ_ID_MAX];
    char why[160];
} requeue_refusals;

/* Requeues one dead letter. *moved gets 1 when it moved, 0 when there is
 * no such dead letter or the checks refused it (counted in *refused). A
 * server error (OOM, a letter without fields) is EMQ_ESERVER and moves
 * nothing. */
static emq_status requeue_one(emq_admin_t *a, const char *id, size_t idlen,
                              int force, int *moved, requeue_refusals *refused,
                              emq_error *err) {
    *moved = 0;
    const char *w[2];
    emq_status st = emq__admin_script_head(a, EMQ_SCRIPT_REQUEUE, w, err);
    if (st != EMQ_OK)
        return st;
    const char *argv[] = {
        w[0], w[1], "2", a->keys.stream, a->keys.dead, id, force ? "1" : "0"};
    /* id may be a reply view, not NUL-terminated: use its length. */
    size_t lens[7];
    for (size_t i = 0; i < 7; i++)
        lens[i] = i == 5 ? idlen : strlen(argv[i]);
    emq_reply *r = NULL;
    st = emq__admin_call(a, "requeue of a dead letter", 7, argv, lens, &r, err);
    if (st != EMQ_OK)
        return st;
    *moved = emq_reply_kind(r) == EMQ_REPLY_STRING;
    int wide = emq_reply_kind(r) == EMQ_REPLY_ARRAY &&
               emq_reply_integer(emq_reply_at(r, 0)) == 2;
    if (emq_reply_kind(r) == EMQ_REPLY_ARRAY && !wide && refused->n++ == 0) {
        size_t n = 0;
        const char *why = emq_reply_str(emq_reply_at(r, 1), &n);
        emq__printable(refused->why, sizeof refused->why, why ? why : "",
                       why ? n : 0);
        emq__printable(refused->first, sizeof refused->first, id, idlen);
    }
    emq_reply_free(r);
    return wide ? requeue_wide(a, id, idlen, moved, err) : EMQ_OK;
}

/* The error of a requeue that refused letters (after the others moved). */
static emq_status refusals_error(const emq_admin_t *a,
                                 const requeue_refusals *refused,
                                 uint64_t requeued, emq_error *err) {
    return emq__error_set(err, EMQ_EINVAL, 0,
                          "dead letter %s of %.60s not requeued: %.80s (%zu "
                          "refused, left in place; %llu requeued); workers "
                          "can add dead letters: check, then --force "
                          "(EMQ_REQUEUE_FORCE)",
                          refused->first, a->keys.dead, refused->why,
                          refused->n, (unsigned long long)requeued);
}

/* Requeues every dead letter that exists when the call starts, paging by
 * ID. Letters added meanwhile (an entry requeued and dead-lettered again)
 * wait for the next call, so this always ends. */
static emq_status requeue_all(emq_admin_t *a, int force, uint64_t *requeued,
                              requeue_refusals *refused, emq_error *err) {
    const char *last_argv[] = {"XREVRANGE", a->keys.dead, "+",
                               "-",         "COUNT",      "1"};
    emq_reply *r = NULL;
    emq_status st = emq__admin_call(a, "XREVRANGE of the dead letters", 6,
                                    last_argv, NULL, &r, err);
    if (st != EMQ_OK)
        return st;
    emq_id last;
    int none =
        emq_reply_len(r) != 1 ||
        emq__admin_id(emq_reply_at(emq_reply_at(r, 0), 0), &last, NULL) != 0;
    emq_reply_free(r);
    if (none)
        return EMQ_OK; /* no dead letters */
    size_t len = 0;
    char from[EMQ_ID_MAX + 1] = "-";
    char page[24];
    snprintf(page, sizeof page, "%d", EMQ_ADMIN_PAGE);
    for (;;) {
        const char *argv[] = {"XRANGE", a->keys.dead, from,
                              last.str, "COUNT",      page};
        st = emq__admin_call(a, "XRANGE of the dead letters", 6, argv, NULL, &r,
                             err);
        if (st != EMQ_OK)
            return st;
        size_t n = emq_reply_len(r);
        for (size_t i = 0; i < n && st == EMQ_OK; i++) {
            const char *id =
                emq_reply_str(emq_reply_at(emq_reply_at(r, i), 0), &len);
            if (id == NULL || len >= EMQ_ID_MAX)
                continue;
            int moved = 0;
            st = requeue_one(a, id, len, force, &moved, refused, err);
            *requeued += (uint64_t)moved;
            if (i + 1 == n)
                snprintf(from, sizeof from, "(%.*s", (int)len, id);
        }
        emq_reply_free(r);
        if (st != EMQ_OK || n < EMQ_ADMIN_PAGE)
            return st;
    }
}

emq_status emq__admin_queue_requeue(emq_admin_t *a, const char *const *ids,
                                    size_t nids, int force, uint64_t *requeued,
                                    emq_error *err) {
    uint64_t count = 0;
    requeue_refusals refused = {0, "", ""};
    if (requeued)
        *requeued = 0;
    if (a == NULL || (nids > 0 && ids == NULL))
        return emq__error_set(err, EMQ_EINVAL, 0,
                              "requeue needs an admin handle and IDs");
    if (nids == 0) {
        emq_status st = requeue_all(a, force, &count, &refused, err);
        if (requeued)
            *requeued = count;
        if (st == EMQ_OK && refused.n > 0)
            st = refusals_error(a, &refused, count, err);
        return st;
    }
    const char *first_missing = NULL;
    size_t nmissing = 0;
    emq_status st = EMQ_OK;
    for (size_t i = 0; i < nids && st == EMQ_OK; i++) {
        int moved = 0;
        size_t before = refused.n;
        const char *id = ids[i] ? ids[i] : "";
        if (emq__stream_id_parse(id, strlen(id), NULL) == 0)
            st = requeue_one(a, id, strlen(id), force, &moved, &refused, err);
        count += (uint64_t)moved;
        if (st == EMQ_OK && !moved && refused.n == before && nmissing++ == 0)
            first_missing = id;
    }
    if (requeued)
        *requeued = count;
    if (st != EMQ_OK)
        return st;
    if (nmissing > 0) {
        char shown[EMQ_ID_MAX + 8];
        emq__printable(shown, sizeof shown, first_missing,
                       strlen(first_missing));
        return emq__error_set(err, EMQ_EINVAL, 0,
                              "no dead letter '%s' in %s (%zu of %zu IDs not "
                              "found); %llu requeued",
                              shown, a->keys.dead, nmissing, nids,
                              (unsigned long long)count);
    }
    return refused.n > 0 ? refusals_error(a, &refused, count, err) : EMQ_OK;
}

emq_status emq__admin_queue_purge(emq_admin_t *a, uint64_t *removed,
                                  emq_error *err) {
    if (removed)
        *removed = 0;
    if (a == NULL)
        return emq__error_set(err, EMQ_EINVAL, 0,
                              "purge needs an admin handle");
    const char *w[2];
    emq_status st = emq__admin_script_head(a, EMQ_SCRIPT_DEAD_PURGE, w, err);
    if (st != EMQ_OK)
        return st;
    const char *argv[] = {w[0], w[1], "1", a->keys.dead};
    emq_reply *r = NULL;
    st =
        emq__admin_call(a, "purge of the dead letters", 4, argv, NULL, &r, err);
    if (st != EMQ_OK)
        return st;
    long long n = emq_reply_integer(r);
    emq_reply_free(r);
    if (removed)
        *removed = n > 0 ? (uint64_t)n : 0;
    return EMQ_OK;
}
