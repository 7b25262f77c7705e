/* SPDX-License-Identifier: BSD-3-Clause */
/* lease.c: the Lua of the consumer name's lease: acquire, renew, take over and
 * release (consumer/lease.c sends them).
 *
 * Each text is the body of one function of the library (library.c):
 * KEYS and ARGV are its keys and arguments, under EVAL and FCALL alike.
 */
#include "lua.h"

/* A key the upkeep had to take again (it was gone: deleted, evicted,
 * expired during a stall) holds the token with this suffix, until the
 * next acquire: someone may have used the name while it was gone, so
 * that acquire must not count the session as continued. Kept in the key,
 * so the acquire learns it atomically, whatever became of the renewal's
 * reply. */
#define RETAKEN_SUFFIX ":retaken"

/* Acquire: extend it if ours ({2}: held without a break; {3}: ours since
 * the upkeep took it again), take it if free ({1}); else report the
 * holder and its time left: {0, holder, pttl}. */
const char emq__lua_lease_acquire[] =
    "local v = redis.call('GET', KEYS[1])\n"
    "if not v or v == ARGV[1] or v == ARGV[1] .. '" RETAKEN_SUFFIX "' then\n"
    "  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])\n"
    "  if v == ARGV[1] then return {2} end\n"
    "  if v then return {3} end\n"
    "  return {1}\n"
    "end\n"
    "return {0, v, redis.call('PTTL', KEYS[1])}\n";

/* Renew: 1 extended (the key held our token: nobody used the name since
 * we last wrote it); 2 the key was gone (deleted, evicted, or expired
 * while this process stalled) and is ours again, taken as acquire takes a
 * free lease, marked RETAKEN_SUFFIX; 0 another holder (never taken from
 * it here). */
const char emq__lua_lease_renew[] =
    "local v = redis.call('GET', KEYS[1])\n"
    "if v == ARGV[1] or v == ARGV[1] .. '" RETAKEN_SUFFIX "' then\n"
    "  redis.call('PEXPIRE', KEYS[1], ARGV[2])\n"
    "  return 1\n"
    "end\n"
    "if not v then\n"
    "  redis.call('SET', KEYS[1], ARGV[1] .. '" RETAKEN_SUFFIX "', 'PX', "
    "ARGV[2])\n"
    "  return 2\n"
    "end\n"
    "return 0\n";

const char emq__lua_lease_takeover[] =
    "if redis.call('GET', KEYS[1]) == ARGV[1] then\n"
    "  redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])\n"
    "  return 1\n"
    "end\n"
    "return 0\n";

const char emq__lua_lease_release[] =
    "local v = redis.call('GET', KEYS[1])\n"
    "if v == ARGV[1] or v == ARGV[1] .. '" RETAKEN_SUFFIX "' then\n"
    "  return redis.call('DEL', KEYS[1])\n"
    "end\n"
    "return 0\n";
