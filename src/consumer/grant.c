/* SPDX-License-Identifier: BSD-3-Clause */
/* grant.c: what a read of new entries may take: the group's rate and
 * in-flight limits, and the queue's priorities.
 *
 * The limits of group G live in the server, in emq:{Q}:limits:G (a hash:
 * rate, max_in_flight), so every consumer of the group, in any process,
 * applies the same ones. A consumer started with rate.limit or
 * group.max_in_flight records its values where none are recorded; where
 * others are, the server's win and the consumer says so once.
 *
 * A limited consumer reads new entries through one script (scripts may
 * not block, so it reads without BLOCK): in-flight is the work in hand,
 * the group's pending entries (XPENDING's summary: delivered and not
 * settled) less those held by a consumer whose lease is gone (it is dead:
 * nobody works on them until a peer claims them) and less those waiting
 * out a retry's backoff (the retry schedule's entries due later), so
 * neither a dead worker nor a backlog of retries holds the group's slots;
 * the rate a log of the last second's deliveries (a sorted set by
 * the server's clock, so no one-second window ever holds more than the
 * rate); it reads min(wanted, room under each limit) with XREADGROUP and
 * logs them. With deliveries.exact it marks what it read unseen in the
 * same step (recover.c: no crash falls between a delivery and its mark).
 * With nothing granted the caller sleeps as the reply says;
 * with nothing to read it waits for the next entry with XREAD BLOCK, which
 * consumes nothing. A group without limits reads as before.
 */
#include "grant.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

emq_status emq__grant_count(emq_consumer_t *c, const emq_id *ids, size_t n,
                            emq_error *err) {
    if (!atomic_load(&c->limited) || n == 0)
        return EMQ_OK;
    const char **argv = emq__alloc((6 + n) * sizeof *argv);
    if (argv == NULL)
        return emq__oom(err);
    emq__script_head(EMQ_SCRIPT_GRANT_COUNT, emq__session_functions(&c->rx),
                     argv);
    argv[2] = "2";
    argv[3] = c->limits_key;
    argv[4] = c->rate_log_key;
    argv[5] = c->group;
    for (size_t i = 0; i < n; i++)
        argv[6 + i] = ids[i].str;
    emq_reply *reply = NULL;
    emq_status st =
        emq__session_call(&c->rx, 0, (int)(6 + n), argv, NULL, &reply, err);
    if (st == EMQ_OK && emq_reply_kind(reply) == EMQ_REPLY_ERROR) {
        char shown[160];
        emq__consumer_log(c, EMQ_LOG_DEBUG,
                          "logging re-deliveries against the rate failed: "
                          "%s",
                          emq__reply_text(reply, shown, sizeof shown));
    }
    emq_reply_free(reply);
    emq__free(argv);
    return st;
}

void emq__grant_read_argv(const emq_consumer_t *c, const char *want_text,
                          const char *argv[EMQ_GRANT_ARGC]) {
    emq__script_head(EMQ_SCRIPT_GRANT, emq__session_functions(&c->rx), argv);
    argv[2] = "11";
    argv[3] = c->keys.stream;
    argv[4] = c->limits_key;
    argv[5] = c->rate_log_key;
    argv[6] = c->delayed.held;
    argv[7] = c->delayed.entries;
    argv[8] = c->delayed.levels;
    argv[9] = c->delayed.counts;
    argv[10] = c->delayed.bell;
    argv[11] = c->delayed.prio;
    argv[12] = c->retry_key;
    argv[13] = c->delayed.bad;
    argv[14] = c->group;
    argv[15] = c->name;
    argv[16] = want_text;
    argv[17] = atomic_load(&c->prioritized) ? "1" : "0";
    argv[18] = c->lease_prefix;
    argv[19] = c->exact ? c->unseen_key : "";
}

emq_status emq__grant_reply(const emq_reply *reply, emq__grant *g,
                            emq_error *err) {
    memset(g, 0, sizeof *g);
    if (emq_reply_kind(reply) != EMQ_REPLY_ARRAY || emq_reply_len(reply) != 6 ||
        emq_reply_kind(emq_reply_at(reply, 0)) != EMQ_REPLY_INTEGER ||
        emq_reply_kind(emq_reply_at(reply, 1)) != EMQ_REPLY_INTEGER)
        return emq__reply_bad_shape(err, "the limited read");
    g->granted = emq_reply_integer(emq_reply_at(reply, 0));
    g->wait_ms = emq_reply_integer(emq_reply_at(reply, 1));
    const emq_reply *r = emq_reply_at(reply, 2);
    g->entries = emq_reply_kind(r) == EMQ_REPLY_ARRAY ? r : NULL;
    g->marked = emq_reply_integer(emq_reply_at(reply, 5)) == 1;
    size_t len = 0;
    for (size_t i = 0; i < 2; i++) {
        char *to = i == 0 ? g->last_id : g->bell_id;
        const char *last = emq_reply_str(emq_reply_at(reply, 3 + i), &len);
        if (last && len < EMQ_ID_MAX) {
            memcpy(to, last, len);
            to[len] = '\0';
        }
    }
    return EMQ_OK;
}

/* Says once that the limits hash (HMGET's reply) holds a value that is
 * not a limit, which every consumer reads as none. */
static void limits_checked(emq_consumer_t *c, const emq_reply *hmget) {
    const emq_reply *rate = emq_reply_at(hmget, 0);
    const emq_reply *maxf = emq_reply_at(hmget, 1);
    if ((!emq__limit_ignored(rate) && !emq__limit_ignored(maxf)) ||
        c->limits_bad_warned++)
        return;
    char r[40], m[40];
    emq__reply_text(rate, r, sizeof r);
    emq__reply_text(maxf, m, sizeof m);
    emq__consumer_log(c, EMQ_LOG_WARNING,
                      "the group's limits in '%s' hold rate '%s' and "
                      "max_in_flight '%s': a value that is not a whole "
                      "number of at most %d digits counts as no limit "
                      "('echomq group limits' sets them)",
                      c->limits_key, r, m, EMQ_LIMIT_DIGITS_MAX);
}

/* Applies the priority record's GET: present, the queue has priorities;
 * an error reply (an ACL) changes nothing, and is said once: such a
 * consumer never reads the entries held by priority. */
static void prio_looked(emq_consumer_t *c, const emq_reply *reply) {
    if (emq_reply_kind(reply) == EMQ_REPLY_ERROR) {
        if (c->prio_refused_warned++)
            return;
        char said[160];
        emq__consumer_log(c, EMQ_LOG_WARNING,
                          "whether the queue has priorities could not be "
                          "read from '%s' (%s): this consumer reads no "
                          "entry held by priority (grant GET there, "
                          "docs/SECURITY.md)",
                          c->delayed.prio,
                          emq__reply_text(reply, said, sizeof said));
        return;
    }
    int prio = emq_reply_kind(reply) == EMQ_REPLY_STRING;
    if (prio != atomic_exchange(&c->prioritized, prio))
        emq__consumer_log(c, EMQ_LOG_INFO,
                          prio ? "queue has priorities now ('%s'); reads "
                                 "take the most urgent first"
                               : "queue has no priorities now ('%s')",
                          c->delayed.prio);
}

emq_status emq__grant_start(emq_consumer_t *c, emq_error *err) {
    int64_t rate = emq__cfg_rate_limit(c->conf);
    int64_t maxf = emq__cfg_group_max_in_flight(c->conf);
    char rate_text[24], maxf_text[24];
    snprintf(rate_text, sizeof rate_text, "%lld", (long long)rate);
    snprintf(maxf_text, sizeof maxf_text, "%lld", (long long)maxf);
    const char *set_rate[] = {"HSETNX", c->limits_key, "rate", rate_text};
    const char *set_maxf[] = {"HSETNX", c->limits_key, "max_in_flight",
                              maxf_text};
    const char *get[] = {"HMGET", c->limits_key, "rate", "max_in_flight"};
    const char *prio[] = {"GET", c->delayed.prio};
    emq__session_cmd cmds[4];
    size_t n = 0;
    if (rate > 0)
        cmds[n++] = (emq__session_cmd){4, set_rate, NULL};
    if (maxf > 0)
        cmds[n++] = (emq__session_cmd){4, set_maxf, NULL};
    cmds[n++] = (emq__session_cmd){4, get, NULL};
    cmds[n++] = (emq__session_cmd){2, prio, NULL};
    emq_reply *replies[4] = {NULL, NULL, NULL, NULL};
    /* HSETNX over maxmemory: waited out, as the lease and the door. */
    emq_status st = emq__session_pipeline(&c->rx, EMQ_SESSION_WAIT_OOM, n, cmds,
                                          replies, err);
    if (st != EMQ_OK)
        return st;
    prio_looked(c, replies[--n]);
    emq_reply_free(replies[n]);
    emq_reply *reply = replies[n - 1];
    for (size_t i = 0; i + 1 < n; i++) {
        /* A refused record of a configured limit fails the start too. */
        if (emq_reply_kind(replies[i]) == EMQ_REPLY_ERROR) {
            emq_reply_free(reply);
            reply = replies[i];
            replies[i] = NULL;
        }
        emq_reply_free(replies[i]);
    }
    if (emq_reply_kind(reply) != EMQ_REPLY_ARRAY || emq_reply_len(reply) != 2) {
        int configured = rate > 0 || maxf > 0;
        char shown[160];
        emq__reply_text(reply, shown, sizeof shown);
        emq_reply_free(reply);
        atomic_store(&c->limited, 0);
        if (!configured) {
            /* A least-privilege worker may not read them: it applies
             * none (docs/SECURITY.md says how to let it). */
            emq__consumer_log(c, EMQ_LOG_DEBUG,
                              "the group's limits could not be read from "
                              "'%s'; reading without limits",
                              c->limits_key);
            return EMQ_OK;
        }
        return emq__error_set(err, EMQ_ESERVER, 0,
                              "recording the group's limits in '%s' "
                              "failed: %s",
                              c->limits_key, shown);
    }
    int64_t have_rate = emq__limit_value(emq_reply_at(reply, 0));
    int64_t have_maxf = emq__limit_value(emq_reply_at(reply, 1));
    limits_checked(c, reply);
    emq_reply_free(reply);
    if (((rate > 0 && have_rate != rate) || (maxf > 0 && have_maxf != maxf)) &&
        !c->limits_warned++)
        emq__consumer_log(c, EMQ_LOG_WARNING,
                          "group '%s' has rate %lld/s and max_in_flight %lld "
                          "recorded in '%s' (0: none); this consumer was "
                          "started with %lld and %lld and applies the "
                          "recorded ones ('echomq group limits' changes "
                          "them)",
                          c->group, (long long)have_rate, (long long)have_maxf,
                          c->limits_key, (long long)rate, (long long)maxf);
    atomic_store(&c->limited, have_rate > 0 || have_maxf > 0);
    return EMQ_OK;
}

/* Tags of the look's two replies (tags.h). */
enum { TAG_LIMITS = EMQ_TAG(EMQ_TAGS_GRANT, 0), TAG_PRIORITY };

emq_status emq__grant_append_look(emq_consumer_t *c, emq__session *x,
                                  int64_t now, int *sent, emq_error *err) {
    *sent = 0;
    if (now < c->next_limits_ms)
        return EMQ_OK;
    c->next_limits_ms = now + EMQ_GRANT_LOOK_MS;
    const char *get[] = {"HMGET", c->limits_key, "rate", "max_in_flight"};
    const char *prio[] = {"GET", c->delayed.prio};
    emq_status st = emq__session_append(x, TAG_LIMITS, 4, get, NULL, err);
    if (st == EMQ_OK)
        st = emq__session_append(x, TAG_PRIORITY, 2, prio, NULL, err);
    *sent = st == EMQ_OK;
    return st;
}

void emq__grant_looked(emq_consumer_t *c, int tag, const emq_reply *reply) {
    if (tag == TAG_PRIORITY) {
        prio_looked(c, reply);
        return;
    }
    if (emq_reply_kind(reply) != EMQ_REPLY_ARRAY || emq_reply_len(reply) != 2)
        return; /* refused (an ACL): as it was */
    limits_checked(c, reply);
    int limited = emq__limit_value(emq_reply_at(reply, 0)) > 0 ||
                  emq__limit_value(emq_reply_at(reply, 1)) > 0;
    if (limited != atomic_exchange(&c->limited, limited))
        emq__consumer_log(c, EMQ_LOG_INFO,
                          limited ? "group '%s' has limits now; reads apply "
                                    "them"
                                  : "group '%s' has no limits now",
                          c->group);
}
