/* SPDX-License-Identifier: BSD-3-Clause */
/* topicrecord.c: a topic's partition count in the server.
 *
 * Each partition records its topic's count in "emq:{<topic>.<i>}:topic"
 * (keys/partition.c names it), in its own hashtag, so the record lives on the
 * partition's node. The producer, consumer and admin of a partition claim
 * it (HSETNX, then HGET to compare) on the route they already hold; the
 * admin reads partition 0's to find a topic by its name.
 */
#include "streams.h"

#include "../conn/conf.h"

#include <stdio.h>
#include <stdlib.h>

/* Reads HGET key partitions from a reply: the count, 0 for nil. */
static emq_status count_of(const emq_reply *r, const char *key, int64_t *out,
                           emq_error *err) {
    *out = 0;
    if (emq_reply_kind(r) == EMQ_REPLY_NULL)
        return EMQ_OK;
    size_t len;
    const char *text = emq_reply_str(r, &len);
    if (text == NULL || emq_reply_kind(r) == EMQ_REPLY_ERROR)
        return emq__reply_error_set(
            err, r, "reading the topic record '%s' failed", key);
    char digits[24];
    snprintf(digits, sizeof digits, "%.*s", (int)(len < 23 ? len : 23), text);
    *out = strtoll(digits, NULL, 10);
    return EMQ_OK;
}

emq_status emq__topic_claim(emq__route *route, const emq_conf_t *conf,
                            emq_error *err) {
    if (emq__cfg_topic_partitions(conf) <= 1 || emq__cfg_queue(conf) == NULL)
        return EMQ_OK;
    char *key = emq__topic_record_key(emq__cfg_queue(conf));
    if (key == NULL)
        return emq__oom(err);
    char count[24];
    snprintf(count, sizeof count, "%lld",
             (long long)emq__cfg_topic_partitions(conf));
    const char *setnx[] = {"HSETNX", key, "partitions", count};
    const char *get[] = {"HGET", key, "partitions"};
    int appended = 0;
    emq_status st = emq__route_append(route, 4, setnx, NULL, err);
    if (st == EMQ_OK) {
        appended = 1;
        st = emq__route_append(route, 3, get, NULL, err);
    }
    if (st == EMQ_OK)
        appended = 2;
    /* Every appended reply is read, so the route is left in step. */
    emq_reply *replies[2] = {NULL, NULL};
    for (int i = 0; i < appended; i++) {
        emq_error one;
        emq_status rs = emq__route_get_reply(route, &replies[i], &one);
        if (rs != EMQ_OK && st == EMQ_OK) {
            st = rs;
            if (err)
                *err = one;
        }
        if (rs != EMQ_OK && !emq__route_only_this_failed(route, rs))
            break;
    }
    emq_reply *r1 = replies[0], *r2 = replies[1];
    int64_t recorded = 0;
    if (st == EMQ_OK && emq_reply_kind(r1) == EMQ_REPLY_ERROR) {
        st = emq__reply_error_set(err, r1,
                                  "recording the topic's partitions in '%s' "
                                  "failed",
                                  key);
    }
    if (st == EMQ_OK)
        st = count_of(r2, key, &recorded, err);
    if (st == EMQ_OK && recorded != emq__cfg_topic_partitions(conf))
        st = emq__error_set(err, EMQ_EINVAL, 0,
                            "the topic has %lld partitions (recorded in "
                            "'%s'), not %lld: give partitions %lld, or "
                            "another topic name",
                            (long long)recorded, key,
                            (long long)emq__cfg_topic_partitions(conf),
                            (long long)recorded);
    emq_reply_free(r1);
    emq_reply_free(r2);
    emq__free(key);
    return st;
}

emq_status emq__topic_recorded(emq__route *route, const char *queue,
                               int64_t *partitions, emq_error *err) {
    *partitions = 0;
    char name[EMQ_KEYS_MAX_QUEUE + 16];
    snprintf(name, sizeof name, "%s.0", queue);
    char *key = emq__topic_record_key(name);
    if (key == NULL)
        return emq__error_set(err, EMQ_EINVAL, 0, "'%.64s' cannot name a topic",
                              queue);
    const char *get[] = {"HGET", key, "partitions"};
    emq_reply *r = NULL;
    emq_status st = emq__route_command(route, 3, get, NULL, &r, err);
    if (st == EMQ_OK)
        st = count_of(r, key, partitions, err);
    emq_reply_free(r);
    emq__free(key);
    return st;
}
