/* lease.c: one consumer name, one live process.
 *
 * Running two processes under one consumer name is a classic mistake:
 * both read the same pending list and each steals the other's entries on
 * restart. The consumer therefore holds a lease key per name, in the
 * queue's hashtag, whose value is a token naming the process
 * (host:pid:random) and which expires after lease.ttl_ms unless renewed.
 * A second process with the same name is refused with an error naming the
 * holder. A lease left behind by a process of this host that no longer
 * exists is taken over at once, so a crashed worker restarts without
 * waiting for the lease to expire; elsewhere, a dead holder's lease simply
 * expires.
 */
#include "consumer.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Renew: extend if ours; take it again if it expired meanwhile (a
 * stalled process whose name nobody took); 0 if another process has it. */
static const char renew_script[] =
    "local v = redis.call('GET', KEYS[1])\n"
    "if v == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end\n"
    "if not v then\n"
    "  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])\n"
    "  return 1\n"
    "end\n"
    "return 0\n";

/* Take over: replace the holder's token only if it is still there. */
static const char takeover_script[] =
    "if redis.call('GET', KEYS[1]) == ARGV[1] then\n"
    "  redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])\n"
    "  return 1\n"
    "end\n"
    "return 0\n";

static const char release_script[] =
    "if redis.call('GET', KEYS[1]) == ARGV[1] then\n"
    "  return redis.call('DEL', KEYS[1])\n"
    "end\n"
    "return 0\n";

/* 1 when holder names a process of this host that no longer exists. */
static int holder_is_dead_local(const emq_consumer_t *c, const char *holder) {
    const char *ours = strchr(c->token, ':');
    const char *theirs = strchr(holder, ':');
    if (!ours || !theirs || ours - c->token != theirs - holder ||
        memcmp(c->token, holder, (size_t)(ours - c->token)) != 0)
        return 0; /* another host: only expiry can free it */
    char *end;
    long pid = strtol(theirs + 1, &end, 10);
    if (pid <= 0 || *end != ':')
        return 0;
    return kill((pid_t)pid, 0) == -1 && errno == ESRCH;
}

emq_status emq_lease_acquire(emq_consumer_t *c, emq_error *err) {
    char ttl[24];
    snprintf(ttl, sizeof ttl, "%lld", (long long)c->conf->lease_ttl_ms);
    for (int attempt = 0; attempt < 3; attempt++) {
        const char *renew[] = {"EVAL", renew_script, "1", c->lease_key,
                               c->token, ttl};
        emq_reply *reply;
        emq_status st = emq_consumer_call(c, 6, renew, NULL, &reply, err);
        if (st != EMQ_OK)
            return st;
        if (emq_reply_kind(reply) == EMQ_REPLY_ERROR) {
            char shown[200];
            st = emq_error_set(err, EMQ_ESERVER, 0,
                               "taking the lease of consumer '%s' failed: %s",
                               c->name,
                               emq_reply_text(reply, shown, sizeof shown));
            emq_reply_free(reply);
            return st;
        }
        long long got = emq_reply_integer(reply);
        emq_reply_free(reply);
        if (got == 1) {
            c->next_renew_ms = emq_now_ms() + c->conf->lease_ttl_ms / 3;
            return EMQ_OK;
        }
        /* Someone holds it: who, and for how long? */
        const char *get[] = {"GET", c->lease_key};
        const char *pttl[] = {"PTTL", c->lease_key};
        emq_reply *holder = NULL, *left = NULL;
        if ((st = emq_consumer_call(c, 2, get, NULL, &holder, err)) != EMQ_OK)
            return st;
        if ((st = emq_consumer_call(c, 2, pttl, NULL, &left, err)) != EMQ_OK) {
            emq_reply_free(holder);
            return st;
        }
        size_t hn;
        const char *htext = emq_reply_str(holder, &hn);
        char hold[160];
        emq_printable(hold, sizeof hold, htext ? htext : "", hn);
        long long ms = emq_reply_integer(left);
        emq_reply_free(holder);
        emq_reply_free(left);
        if (htext == NULL)
            continue; /* it expired in between: try again */
        if (holder_is_dead_local(c, hold)) {
            const char *take[] = {"EVAL", takeover_script, "1", c->lease_key,
                                  hold, c->token, ttl};
            if ((st = emq_consumer_call(c, 7, take, NULL, &reply, err)) !=
                EMQ_OK)
                return st;
            got = emq_reply_integer(reply);
            emq_reply_free(reply);
            if (got == 1) {
                emq_consumer_log(c, EMQ_LOG_INFO,
                                 "took over the lease left by dead process "
                                 "%s",
                                 hold);
                c->next_renew_ms = emq_now_ms() + c->conf->lease_ttl_ms / 3;
                return EMQ_OK;
            }
            continue;
        }
        return emq_error_set(
            err, EMQ_EINVAL, 0,
            "consumer name '%s' of group '%s' is in use by another live "
            "process (%s; its lease %s expires in %lld ms unless renewed): "
            "give each process its own consumer name",
            c->name, c->group, hold, c->lease_key, ms);
    }
    return emq_error_set(err, EMQ_EINVAL, 0,
                         "could not take the lease of consumer '%s': it "
                         "changed hands repeatedly",
                         c->name);
}

emq_status emq_lease_renew_if_due(emq_consumer_t *c, emq_error *err) {
    int64_t now = emq_now_ms();
    if (now < c->next_renew_ms)
        return EMQ_OK;
    char ttl[24];
    snprintf(ttl, sizeof ttl, "%lld", (long long)c->conf->lease_ttl_ms);
    const char *argv[] = {"EVAL", renew_script, "1", c->lease_key, c->token,
                          ttl};
    emq_status st = emq_consumer_defer(c, DEFERRED_RENEW, 6, argv, NULL, err);
    if (st == EMQ_OK)
        c->next_renew_ms = now + c->conf->lease_ttl_ms / 3;
    return st;
}

void emq_lease_release(emq_consumer_t *c) {
    const char *argv[] = {"EVAL", release_script, "1", c->lease_key,
                          c->token};
    emq_reply *reply;
    if (emq_route_command(c->route, 5, argv, NULL, &reply, NULL) == EMQ_OK)
        emq_reply_free(reply);
}
