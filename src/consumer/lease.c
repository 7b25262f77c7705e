/* SPDX-License-Identifier: BSD-3-Clause */
/* lease.c: one consumer name, one live process.
 *
 * Two processes under one consumer name read the same pending list and
 * redo each other's work. The consumer therefore holds a lease key per
 * name, in the queue's hashtag, whose value names the holding process and
 * which expires after lease.ttl_ms unless renewed. The upkeep thread
 * renews it every third of the TTL, on a timer independent of the handler;
 * the consumer keeps a local deadline (the monotonic send time of the last
 * renewal that succeeded, plus the TTL, less a tenth) past which it hands
 * out and settles nothing. The upkeep renews it whether or not the
 * deadline passed: a renewal extends the lease while the key holds this
 * process's token, and takes the key again, loudly, when it is gone
 * (deleted, evicted, expired during a stall), exactly as acquire takes a
 * free lease; it never takes the name from another holder.
 *
 * The holder's identity is "host:boot_id:pidns:pid:start:random", where
 * boot_id is the kernel's boot id, pidns the inode of the PID namespace
 * and start the process's start time in clock ticks (/proc/<pid>/stat).
 * A lease is taken over at once only when its holder is provably dead:
 * same boot and PID namespace as ours, and no process with that pid and
 * start time. A live local holder is refused at once. A holder that cannot
 * be judged (another host, boot or namespace) is waited for until its
 * lease expires, at most one TTL and a second; then, if it was renewed
 * meanwhile, refused.
 */
#include "lease.h"
#include "core.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- identity ------------------------------------------------------------ */

typedef struct identity {
    char host[64];
    char boot[40];
    unsigned long long pidns;
    long pid;
    unsigned long long start;
} identity;

/* The start time (field 22 of /proc/<pid>/stat, clock ticks since boot);
 * 0 when the process does not exist. */
static unsigned long long process_start(long pid) {
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%ld/stat", pid);
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return 0;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    /* The command name (field 2) may hold spaces and parentheses: count
     * fields from the last ')'. */
    char *p = strrchr(buf, ')');
    if (p == NULL)
        return 0;
    for (int field = 2; field < 22 && p; field++)
        p = strchr(p + 1, ' ');
    return p ? strtoull(p + 1, NULL, 10) : 0;
}

static void own_identity(identity *me) {
    memset(me, 0, sizeof *me);
    strcpy(me->host, "localhost");
    gethostname(me->host, sizeof me->host - 1);
    for (char *p = me->host; *p; p++)
        if (*p == ':' || (unsigned char)*p <= 0x20)
            *p = '_';
    strcpy(me->boot, "-");
    FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
    if (f != NULL) {
        if (fgets(me->boot, sizeof me->boot, f) == NULL)
            strcpy(me->boot, "-");
        fclose(f);
        me->boot[strcspn(me->boot, "\r\n")] = '\0';
    }
    struct stat st;
    if (stat("/proc/self/ns/pid", &st) == 0)
        me->pidns = (unsigned long long)st.st_ino;
    me->pid = (long)getpid();
    me->start = process_start(me->pid);
}

/* Parses a token; 0 on success. */
static int parse_token(const char *token, identity *out) {
    memset(out, 0, sizeof *out);
    int host_len = 0, boot_len = 0;
    const char *p = strchr(token, ':');
    if (p == NULL || p - token >= (long)sizeof out->host)
        return -1;
    host_len = (int)(p - token);
    const char *q = strchr(p + 1, ':');
    if (q == NULL || q - p - 1 >= (long)sizeof out->boot)
        return -1;
    boot_len = (int)(q - p - 1);
    memcpy(out->host, token, (size_t)host_len);
    memcpy(out->boot, p + 1, (size_t)boot_len);
    char *end;
    out->pidns = strtoull(q + 1, &end, 10);
    if (*end != ':')
        return -1;
    out->pid = strtol(end + 1, &end, 10);
    if (*end != ':' || out->pid <= 0)
        return -1;
    out->start = strtoull(end + 1, &end, 10);
    return *end == ':' ? 0 : -1;
}

void emq__lease_make_token(emq_consumer_t *c) {
    identity me;
    own_identity(&me);
    uint64_t seed = (uint64_t)emq__now_ms() ^ ((uint64_t)me.pid << 32) ^
                    (uint64_t)(uintptr_t)c;
    FILE *f = fopen("/dev/urandom", "rb");
    if (f) {
        if (fread(&seed, sizeof seed, 1, f) != 1)
            seed ^= (uint64_t)emq__now_ms();
        fclose(f);
    }
    snprintf(c->token, sizeof c->token, "%s:%s:%llu:%ld:%llu:%016llx", me.host,
             me.boot, me.pidns, me.pid, me.start, (unsigned long long)seed);
}

typedef enum holder_verdict {
    HOLDER_DEAD,   /* provably gone: take over now */
    HOLDER_LIVE,   /* a live process of this machine */
    HOLDER_UNKNOWN /* cannot be judged from here: wait for expiry */
} holder_verdict;

static holder_verdict judge_holder(const char *holder) {
    identity me, them;
    own_identity(&me);
    if (parse_token(holder, &them) != 0 || strcmp(me.boot, "-") == 0 ||
        me.pidns == 0 || strcmp(me.boot, them.boot) != 0 ||
        me.pidns != them.pidns)
        return HOLDER_UNKNOWN;
    unsigned long long start = process_start(them.pid);
    return start != 0 && start == them.start ? HOLDER_LIVE : HOLDER_DEAD;
}

/* ---- acquire, renew, release --------------------------------------------- */

int emq__lease_valid(emq_consumer_t *c) {
    return emq__lease_valid_at(c, emq__now_coarse_ms());
}

int emq__lease_valid_at(emq_consumer_t *c, int64_t now_ms) {
    /* Checked before every handler call: the coarse clock is a few ms
     * behind at most, against a margin of a tenth of the TTL. */
    return now_ms < atomic_load(&c->lease_deadline_ms);
}

/* Moves the local deadline to sent_ms + TTL - TTL/10, never back: a
 * renewal and an acquire on two threads may land in either order. */
static void extend_deadline(emq_consumer_t *c, int64_t sent_ms) {
    int64_t ttl = emq__cfg_lease_ttl_ms(c->conf);
    int64_t want = sent_ms + ttl - ttl / 10;
    int64_t seen = atomic_load(&c->lease_deadline_ms);
    while (seen < want &&
           !atomic_compare_exchange_weak(&c->lease_deadline_ms, &seen, want))
        ;
}

static emq_status refused(emq_consumer_t *c, const char *holder, long long ms,
                          emq_error *err) {
    if (c->lease_lapsed) {
        atomic_store(&c->lease_lost, 1);
        return emq__error_set(
            err, EMQ_ESERVER, 0,
            "consumer '%s' lost its lease '%s': another process (%s) took "
            "the name while this one was stalled; stopping so that one name "
            "never runs twice",
            c->name, c->lease_key, holder);
    }
    return emq__error_set(
        err, EMQ_EINVAL, 0,
        "consumer name '%s' of group '%s' is in use by another live process "
        "(%s; its lease %s expires in %lld ms unless renewed): give each "
        "process its own consumer name",
        c->name, c->group, holder, c->lease_key, ms);
}

/* A lease of a holder that cannot be judged, found with this little
 * left once the wait for it is over, is waited out to its end. */
#define LEASE_ENDING_MS 1000

/* With lease.wait_replicas, waits (WAIT) until that many replicas have
 * the lease just taken: EMQ_OK, or EMQ_ETIMEDOUT (retriable: the session
 * starts again with backoff, and takes its own lease again) saying how
 * many had it. A failover to a replica that lacks the lease would let a
 * second process take a live name. */
static emq_status lease_replicated(emq_consumer_t *c, emq_error *err) {
    long long want = (long long)emq__cfg_lease_wait_replicas(c->conf);
    if (want <= 0)
        return EMQ_OK;
    char replicas[24], timeout[24];
    snprintf(replicas, sizeof replicas, "%lld", want);
    snprintf(timeout, sizeof timeout, "%lld",
             (long long)emq__cfg_lease_wait_timeout_ms(c->conf));
    const char *argv[] = {"WAIT", replicas, timeout};
    emq_reply *reply;
    emq_status st = emq__session_call(&c->rx, 0, 3, argv, NULL, &reply, err);
    if (st != EMQ_OK)
        return st;
    if (emq_reply_kind(reply) != EMQ_REPLY_INTEGER) {
        st = emq__reply_error_set(err, reply,
                                  "WAIT for the lease's replicas failed");
        emq_reply_free(reply);
        return st;
    }
    long long got = emq_reply_integer(reply);
    emq_reply_free(reply);
    if (got >= want)
        return EMQ_OK;
    return emq__error_set(err, EMQ_ETIMEDOUT, 1,
                          "the lease was taken but reached %lld of %lld "
                          "replicas within %s ms (lease.wait_replicas, "
                          "lease.wait_timeout_ms); nothing is handed out "
                          "until it does",
                          got, want, timeout);
}

emq_status emq__lease_acquire(emq_consumer_t *c, emq_error *err) {
    char ttl[24];
    snprintf(ttl, sizeof ttl, "%lld",
             (long long)emq__cfg_lease_ttl_ms(c->conf));
    char waited_for[160] = "";
    int64_t wait_until = 0;
    int extended = 0; /* the bound was stretched to the lease's end */
    for (int attempt = 0; attempt < 1000 && !emq__consumer_stopping(c);
         attempt++) {
        const char *argv[] = {"", "", "1", c->lease_key, c->token, ttl};
        emq__script_head(EMQ_SCRIPT_LEASE_ACQUIRE,
                         emq__session_functions(&c->rx), argv);
        emq_reply *reply;
        int64_t sent = emq__now_ms();
        /* OOM (the key's SET, over maxmemory) is waited out, as by
         * every step of a session's start: a run that has begun must not
         * end on it (consumer.c, start_session). */
        emq_status st = emq__session_call(&c->rx, EMQ_SESSION_WAIT_OOM, 6, argv,
                                          NULL, &reply, err);
        if (st != EMQ_OK)
            return st;
        if (emq_reply_kind(reply) != EMQ_REPLY_ARRAY ||
            emq_reply_len(reply) < 1) {
            char what[200];
            snprintf(what, sizeof what, "taking the lease of consumer '%s'",
                     c->name);
            st = emq_reply_kind(reply) == EMQ_REPLY_ERROR
                     ? emq__reply_error_set(err, reply, "%s failed", what)
                     : emq__error_set(err, EMQ_EPROTO, 0,
                                      "unexpected reply shape from the "
                                      "server: %s",
                                      what);
            emq_reply_free(reply);
            return st;
        }
        long long got_it = emq_reply_integer(emq_reply_at(reply, 0));
        if (got_it >= 1 && got_it <= 3) {
            emq_reply_free(reply);
            /* 2, still our own token: nobody used the name since (see
             * recover.c on counting deliveries). 3, a key the upkeep had
             * to take again (it was gone), breaks the chain: someone may
             * have used the name meanwhile. */
            if ((st = lease_replicated(c, err)) != EMQ_OK)
                return st;
            c->lease_continued = got_it == 2;
            extend_deadline(c, sent);
            c->lease_lapsed = 0;
            c->lease_held = 1;
            if (waited_for[0])
                emq__consumer_log(c, EMQ_LOG_INFO,
                                  "took the lease after %s let it expire",
                                  waited_for);
            return EMQ_OK;
        }
        size_t hn;
        const char *htext = emq_reply_str(emq_reply_at(reply, 1), &hn);
        char hold[160];
        emq__printable(hold, sizeof hold, htext ? htext : "", htext ? hn : 0);
        char holder_raw[256];
        snprintf(holder_raw, sizeof holder_raw, "%.*s",
                 (int)(htext && hn < sizeof holder_raw ? hn : 0),
                 htext ? htext : "");
        long long ms = emq_reply_integer(emq_reply_at(reply, 2));
        emq_reply_free(reply);
        switch (judge_holder(holder_raw)) {
        case HOLDER_LIVE:
            return refused(c, hold, ms, err);
        case HOLDER_DEAD: {
            const char *take[] = {"",         "",       "1", c->lease_key,
                                  holder_raw, c->token, ttl};
            emq__script_head(EMQ_SCRIPT_LEASE_TAKEOVER,
                             emq__session_functions(&c->rx), take);
            sent = emq__now_ms();
            if ((st = emq__session_call(&c->rx, EMQ_SESSION_WAIT_OOM, 7, take,
                                        NULL, &reply, err)) != EMQ_OK)
                return st;
            long long got = emq_reply_integer(reply);
            emq_reply_free(reply);
            if (got == 1) {
                c->lease_continued = 0;
                if ((st = lease_replicated(c, err)) != EMQ_OK)
                    return st;
                extend_deadline(c, sent);
                c->lease_lapsed = 0;
                c->lease_held = 1;
                emq__consumer_log(c, EMQ_LOG_INFO,
                                  "took over the lease left by dead process "
                                  "%s",
                                  hold);
                return EMQ_OK;
            }
            continue; /* it changed hands meanwhile: look again */
        }
        case HOLDER_UNKNOWN:
            break;
        }
        /* A holder we cannot judge: wait for its lease to expire, once.
         * Past the bound, a lease about to end (a loaded machine or server
         * let the bound pass first) is waited out to its end, once more;
         * one that was renewed meanwhile has a live holder. */
        if (strcmp(waited_for, hold) == 0 && emq__now_ms() >= wait_until) {
            if (extended || ms <= 0 || ms > LEASE_ENDING_MS)
                return refused(c, hold, ms, err);
            extended = 1;
            wait_until = emq__now_ms() + ms + 100;
        }
        if (strcmp(waited_for, hold) != 0) {
            snprintf(waited_for, sizeof waited_for, "%s", hold);
            wait_until = emq__now_ms() + emq__cfg_lease_ttl_ms(c->conf) + 1000;
            emq__consumer_log(c, EMQ_LOG_WARNING,
                              "consumer name is held by %s, which cannot be "
                              "checked from this machine; waiting up to "
                              "%lld ms for its lease to expire",
                              hold, (long long)(ms > 0 ? ms : 0));
        }
        int64_t nap = ms > 0 ? ms + 10 : 50;
        int64_t left = wait_until - emq__now_ms();
        emq__consumer_nap(c, nap < left ? nap : (left > 0 ? left : 1));
    }
    if (emq__consumer_stopping(c))
        return emq__error_set(err, EMQ_ECLOSED, 0, "stopped");
    return emq__error_set(err, EMQ_EINVAL, 0,
                          "could not take the lease of consumer '%s': it "
                          "changed hands repeatedly",
                          c->name);
}

emq_status emq__lease_append_renew(emq_consumer_t *c, emq__session *x, int tag,
                                   emq_error *err) {
    char ttl[24];
    snprintf(ttl, sizeof ttl, "%lld",
             (long long)emq__cfg_lease_ttl_ms(c->conf));
    const char *argv[] = {"", "", "1", c->lease_key, c->token, ttl};
    emq__script_head(EMQ_SCRIPT_LEASE_RENEW, emq__session_functions(x), argv);
    return emq__session_append(x, tag, 6, argv, NULL, err);
}

emq_status emq__lease_renewed(emq_consumer_t *c, const emq_reply *reply,
                              int64_t sent_ms, emq_error *err) {
    if (emq_reply_kind(reply) == EMQ_REPLY_ERROR) {
        /* Not renewed: the upkeep sends it again shortly. Said once per
         * episode: a server refusing writes (MISCONF) for seconds would
         * otherwise fill the log ten times a second. */
        char shown[160];
        emq__consumer_log(c, c->renew_failing ? EMQ_LOG_DEBUG : EMQ_LOG_WARNING,
                          "lease renewal failed: %s",
                          emq__reply_text(reply, shown, sizeof shown));
        c->renew_failing = 1;
        return EMQ_OK;
    }
    c->renew_failing = 0;
    long long got = emq_reply_integer(reply);
    if (got == 1 || got == 2) {
        /* 1: the key held our token all along, so nobody used the name
         * since we last wrote it, even if our local deadline passed (a
         * stall): holding it on is sound. 2: the key was gone and is
         * ours again; no other process held it at that moment. */
        int was_valid = emq__lease_valid(c);
        extend_deadline(c, sent_ms);
        if (got == 2) {
            emq__consumer_log(c, EMQ_LOG_WARNING,
                              "the lease key %s was gone (deleted, evicted "
                              "under a volatile maxmemory-policy, or expired "
                              "during a stall); it is held again",
                              c->lease_key);
        } else if (!was_valid) {
            emq__consumer_log(c, EMQ_LOG_INFO,
                              "lease renewed after its local deadline had "
                              "passed; nobody used the name meanwhile");
        } else {
            emq__consumer_log(c, EMQ_LOG_DEBUG, "lease renewed for %lld ms",
                              (long long)emq__cfg_lease_ttl_ms(c->conf));
        }
        return EMQ_OK;
    }
    atomic_store(&c->lease_deadline_ms, 0);
    atomic_store(&c->lease_lost, 1);
    emq_status st = emq__error_set(
        err, EMQ_ESERVER, 0,
        "consumer '%s' lost its lease '%s': another process took the name "
        "while this one was stalled; stopping so that one name never runs "
        "twice",
        c->name, c->lease_key);
    emq__consumer_fatal(c, err);
    return st;
}

void emq__lease_release(emq_consumer_t *c, emq__session *x) {
    const char *argv[] = {"", "", "1", c->lease_key, c->token};
    emq__script_head(EMQ_SCRIPT_LEASE_RELEASE, emq__session_functions(x), argv);
    emq_reply *reply;
    if (emq__route_command(x->route, 5, argv, NULL, &reply, NULL) == EMQ_OK)
        emq_reply_free(reply);
    atomic_store(&c->lease_deadline_ms, 0);
}
