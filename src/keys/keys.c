/* SPDX-License-Identifier: BSD-3-Clause */
/* keys.c: queue names and raw stream keys to the keys of one slot.
 *
 * The invariant this file keeps: every key it returns for a queue hashes to
 * the same cluster slot as the stream. It is checked with the real slot
 * function after the names are built, so a naming mistake fails loudly
 * here instead of as a CROSSSLOT error in production.
 */
#include "keys.h"

#include "../cluster/cluster.h" /* emq__cluster_key_slot */

#include <stdio.h>
#include <string.h>

static int queue_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
           (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-' ||
           c == ':';
}

/* Builds "<a><b>" into a new string. */
static char *concat(const char *a, const char *b) {
    size_t na = strlen(a), nb = strlen(b);
    char *s = emq__alloc(na + nb + 1);
    if (s) {
        memcpy(s, a, na);
        memcpy(s + na, b, nb + 1);
    }
    return s;
}

/* Fills k from a stream key and the prefix of the other keys, then checks
 * that they share the stream's slot. */
static emq_status fill(emq__keys *k, const char *stream, const char *prefix,
                       emq_error *err) {
    memset(k, 0, sizeof *k);
    k->stream = emq__strdup(stream);
    k->prefix = emq__strdup(prefix);
    k->dead = concat(prefix, "dead");
    if (!k->stream || !k->prefix || !k->dead) {
        emq__keys_free(k);
        return emq__error_set(err, EMQ_ENOMEM, 0, "out of memory naming keys");
    }
    k->slot = emq__cluster_key_slot(k->stream, strlen(k->stream));
    if (emq__cluster_key_slot(k->dead, strlen(k->dead)) != k->slot ||
        emq__cluster_key_slot(k->prefix, strlen(k->prefix)) != k->slot) {
        emq__keys_free(k);
        return emq__error_set(err, EMQ_EINVAL, 0,
                              "internal error: keys of stream would not share "
                              "one cluster slot");
    }
    return EMQ_OK;
}

emq_status emq__keys_for_queue(const char *queue, emq__keys *out,
                               emq_error *err) {
    memset(out, 0, sizeof *out);
    if (queue == NULL || *queue == '\0')
        return emq__error_set(err, EMQ_EINVAL, 0,
                              "queue name is empty; give a name such as "
                              "'jobs'");
    size_t n = strlen(queue);
    if (n > EMQ_KEYS_MAX_QUEUE)
        return emq__error_set(err, EMQ_EINVAL, 0,
                              "queue name is %zu bytes long; the limit is %d",
                              n, EMQ_KEYS_MAX_QUEUE);
    for (size_t i = 0; i < n; i++)
        if (!queue_char(queue[i])) {
            char shown[EMQ_KEYS_MAX_QUEUE + 1];
            return emq__error_set(
                err, EMQ_EINVAL, 0,
                "queue name '%s' has a character that is not allowed at "
                "byte %zu; use letters, digits and . _ - : only (braces "
                "would break the queue's hashtag)",
                emq__printable(shown, sizeof shown, queue, n), i);
        }
    char stream[EMQ_KEYS_MAX_QUEUE + 8], prefix[EMQ_KEYS_MAX_QUEUE + 8];
    snprintf(stream, sizeof stream, "emq:{%s}", queue);
    snprintf(prefix, sizeof prefix, "emq:{%s}:", queue);
    return fill(out, stream, prefix, err);
}

emq_status emq__keys_for_stream(const char *stream, emq__keys *out,
                                emq_error *err) {
    memset(out, 0, sizeof *out);
    if (stream == NULL || *stream == '\0')
        return emq__error_set(err, EMQ_EINVAL, 0, "stream key is empty");
    size_t n = strlen(stream);
    if (n > EMQ_KEYS_MAX_STREAM)
        return emq__error_set(err, EMQ_EINVAL, 0,
                              "stream key is %zu bytes long; the limit is %d",
                              n, EMQ_KEYS_MAX_STREAM);
    const char *open = strchr(stream, '{');
    const char *close = open ? strchr(open + 1, '}') : NULL;
    int has_tag = open && close && close > open + 1;
    char shown[96];
    emq__printable(shown, sizeof shown, stream, n);
    if (!has_tag && (strchr(stream, '{') || strchr(stream, '}')))
        return emq__error_set(
            err, EMQ_EINVAL, 0,
            "stream key '%s' has braces that do not form a hashtag, so its "
            "dead-letter key could land in another cluster slot; use a key "
            "without braces or with a non-empty {tag}",
            shown);
    char *prefix;
    if (has_tag) {
        prefix = concat(stream, ":");
    } else {
        /* "{k}:..." hashes "k", the same slot as the brace-less key "k". */
        prefix = emq__alloc(n + 4);
        if (prefix)
            snprintf(prefix, n + 4, "{%s}:", stream);
    }
    if (prefix == NULL)
        return emq__error_set(err, EMQ_ENOMEM, 0, "out of memory naming keys");
    emq_status st = fill(out, stream, prefix, err);
    emq__free(prefix);
    return st;
}

emq_status emq__keys_resolve(const char *queue, const char *stream,
                             emq__keys *out, emq_error *err) {
    memset(out, 0, sizeof *out);
    if (queue && stream)
        return emq__error_set(err, EMQ_EINVAL, 0,
                              "set either queue or stream, not both");
    if (queue)
        return emq__keys_for_queue(queue, out, err);
    if (stream)
        return emq__keys_for_stream(stream, out, err);
    return emq__error_set(err, EMQ_EINVAL, 0,
                          "queue is required (or stream, for an existing "
                          "stream key)");
}

char *emq__keys_join(const emq__keys *k, const char *part1, const char *part2) {
    size_t np = strlen(k->prefix), n1 = strlen(part1);
    size_t n2 = part2 ? strlen(part2) + 1 : 0;
    char *s = emq__alloc(np + n1 + n2 + 1);
    if (s == NULL)
        return NULL;
    memcpy(s, k->prefix, np);
    memcpy(s + np, part1, n1);
    if (part2) {
        s[np + n1] = ':';
        memcpy(s + np + n1 + 1, part2, n2 - 1);
    }
    s[np + n1 + n2] = '\0';
    return s;
}

char *emq__keys_of_group(const emq__keys *k, const char *kind,
                         const char *group, const char *consumer) {
    size_t nk = strlen(kind), ng = strlen(group);
    char *part = emq__alloc(nk + ng + 2);
    if (part == NULL)
        return NULL;
    memcpy(part, kind, nk);
    part[nk] = ':';
    memcpy(part + nk + 1, group, ng + 1);
    char *key = emq__keys_join(k, part, consumer);
    emq__free(part);
    return key;
}

void emq__keys_free(emq__keys *k) {
    emq__free(k->stream);
    emq__free(k->dead);
    emq__free(k->prefix);
    memset(k, 0, sizeof *k);
}

emq_status emq__keys_check_name(const char *what, const char *name,
                                emq_error *err) {
    if (name == NULL || *name == '\0')
        return emq__error_set(err, EMQ_EINVAL, 0,
                              "%s is required: give a stable name, the same "
                              "across restarts (never a pid or a random one)",
                              what);
    size_t n = strlen(name);
    if (n > EMQ_NAME_MAX)
        return emq__error_set(err, EMQ_EINVAL, 0,
                              "%s is %zu bytes long; the limit is %d", what, n,
                              EMQ_NAME_MAX);
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)name[i];
        if (ch <= 0x20 || ch >= 0x7f) {
            char shown[140];
            return emq__error_set(
                err, EMQ_EINVAL, 0,
                "%s '%s' has a space or control character "
                "at byte %zu; use printable characters only",
                what, emq__printable(shown, sizeof shown, name, n), i);
        }
    }
    return EMQ_OK;
}
