/* SPDX-License-Identifier: BSD-3-Clause */
/* library.c: the scripts as one function library, and the words that
 * call each (scripts.h).
 *
 * Each script's text becomes the body of a function of its own,
 * emq<version>_<name>, whose parameters are named KEYS and ARGV so that
 * one text serves EVAL and FCALL alike. Its flags: "no-writes" for a
 * script that only reads; "allow-oom" for one that settles, renews or
 * removes, which a server past maxmemory must still let run (as EVAL
 * does, where only a first write that grows memory is refused); none for
 * one whose first write adds an entry (add, the delayed move, requeue):
 * past maxmemory it is refused whole, as its EVAL would be at that write.
 */
#include "lua.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

typedef struct script {
    const char *function; /* emq1_... */
    const char *flags;    /* Lua table items: "'allow-oom'" or "" */
    const char *text;
} script;

#define OOM "'allow-oom'"
#define READS "'no-writes'"

static const script scripts[EMQ_SCRIPT_COUNT] = {
    [EMQ_SCRIPT_ADD] = {EMQ_FUNCTION_PREFIX "add", "", emq__lua_add},
    [EMQ_SCRIPT_DELAYED_MOVE] = {EMQ_FUNCTION_PREFIX "delayed_move", "",
                                 emq__lua_delayed_move},
    [EMQ_SCRIPT_DELAYED_CANCEL] = {EMQ_FUNCTION_PREFIX "delayed_cancel", OOM,
                                   emq__lua_delayed_cancel},
    [EMQ_SCRIPT_LEASE_ACQUIRE] = {EMQ_FUNCTION_PREFIX "lease_acquire", OOM,
                                  emq__lua_lease_acquire},
    [EMQ_SCRIPT_LEASE_RENEW] = {EMQ_FUNCTION_PREFIX "lease_renew", OOM,
                                emq__lua_lease_renew},
    [EMQ_SCRIPT_LEASE_TAKEOVER] = {EMQ_FUNCTION_PREFIX "lease_takeover", OOM,
                                   emq__lua_lease_takeover},
    [EMQ_SCRIPT_LEASE_RELEASE] = {EMQ_FUNCTION_PREFIX "lease_release", OOM,
                                  emq__lua_lease_release},
    [EMQ_SCRIPT_RETRY] = {EMQ_FUNCTION_PREFIX "retry", OOM, emq__lua_retry},
    [EMQ_SCRIPT_DEADLETTER] = {EMQ_FUNCTION_PREFIX "deadletter", OOM,
                               emq__lua_deadletter},
    [EMQ_SCRIPT_RELEASE] = {EMQ_FUNCTION_PREFIX "release", OOM,
                            emq__lua_release},
    [EMQ_SCRIPT_REFRESH] = {EMQ_FUNCTION_PREFIX "refresh", OOM,
                            emq__lua_refresh},
    [EMQ_SCRIPT_INHAND_PUBLISH] = {EMQ_FUNCTION_PREFIX "inhand_publish", OOM,
                                   emq__lua_inhand_publish},
    [EMQ_SCRIPT_MARK] = {EMQ_FUNCTION_PREFIX "mark", OOM, emq__lua_mark},
    [EMQ_SCRIPT_CLAIM] = {EMQ_FUNCTION_PREFIX "claim", OOM, emq__lua_claim},
    [EMQ_SCRIPT_TAKE_DUE] = {EMQ_FUNCTION_PREFIX "take_due", OOM,
                             emq__lua_take_due},
    [EMQ_SCRIPT_RETRY_WAITS] = {EMQ_FUNCTION_PREFIX "retry_waits", READS,
                                emq__lua_retry_waits},
    [EMQ_SCRIPT_GRANT] = {EMQ_FUNCTION_PREFIX "grant", OOM, emq__lua_grant},
    [EMQ_SCRIPT_GRANT_COUNT] = {EMQ_FUNCTION_PREFIX "grant_count", OOM,
                                emq__lua_grant_count},
    [EMQ_SCRIPT_PRUNE] = {EMQ_FUNCTION_PREFIX "prune", OOM, emq__lua_prune},
    [EMQ_SCRIPT_TRIM_ACKED] = {EMQ_FUNCTION_PREFIX "trim_acked", OOM,
                               emq__lua_trim_acked},
    [EMQ_SCRIPT_REQUEUE] = {EMQ_FUNCTION_PREFIX "requeue", "",
                            emq__lua_requeue},
    [EMQ_SCRIPT_DEAD_PURGE] = {EMQ_FUNCTION_PREFIX "dead_purge", OOM,
                               emq__lua_dead_purge},
    [EMQ_SCRIPT_ORPHANS] = {EMQ_FUNCTION_PREFIX "orphans", READS,
                            emq__lua_orphans},
};

void emq__script_head(emq__script_id id, int functions, const char *words[2]) {
    words[0] = functions ? "FCALL" : "EVAL";
    words[1] = functions ? scripts[id].function : scripts[id].text;
}

const char *emq__script_function(emq__script_id id) {
    return scripts[id].function;
}

/* ---- the library's text -------------------------------------------------- */

static const char head[] = "#!lua name=" EMQ_LIBRARY_NAME "\n";
static const char fn_open[] = "redis.register_function{function_name='%s', "
                              "flags={%s}, callback=function(KEYS, ARGV)\n";
static const char fn_close[] = "\nend}\n";
static const char probe[] =
    "redis.register_function{function_name='" EMQ_LIBRARY_PROBE
    "', flags={" READS "}, callback=function() return '%s' end}\n";

/* Room for the library's text: a static buffer, so the text is built
 * once and never freed (the unit test test_scripts checks it fits). */
#define LIBRARY_ROOM (96 * 1024)
static char room[LIBRARY_ROOM];
static const char *library; /* room once built, NULL when it did not fit */
static char digest[17];
static pthread_once_t built = PTHREAD_ONCE_INIT;

/* Writes the library into room and returns its length (LIBRARY_ROOM or
 * more when it did not fit), the probe included when with_probe. */
static size_t write_library(int with_probe) {
    size_t n = 0;
#define PUT(...)                                                               \
    n += (size_t)snprintf(room + (n < LIBRARY_ROOM ? n : LIBRARY_ROOM),        \
                          n < LIBRARY_ROOM ? LIBRARY_ROOM - n : 0,             \
                          __VA_ARGS__)
    PUT("%s", head);
    for (size_t i = 0; i < EMQ_SCRIPT_COUNT; i++) {
        PUT(fn_open, scripts[i].function, scripts[i].flags);
        PUT("%s", scripts[i].text);
        PUT("%s", fn_close);
    }
    if (with_probe)
        PUT(probe, digest);
#undef PUT
    return n;
}

static void build(void) {
    size_t body = write_library(0);
    if (body >= LIBRARY_ROOM)
        return;
    uint64_t h = 1469598103934665603ULL; /* FNV-1a 64 */
    for (size_t i = 0; i < body; i++)
        h = (h ^ (unsigned char)room[i]) * 1099511628211ULL;
    snprintf(digest, sizeof digest, "%016llx", (unsigned long long)h);
    if (write_library(1) < LIBRARY_ROOM)
        library = room;
}

const char *emq__library_text(void) {
    pthread_once(&built, build);
    return library;
}

const char *emq__library_digest(void) {
    pthread_once(&built, build);
    return digest;
}
