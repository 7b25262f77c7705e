/* SPDX-License-Identifier: BSD-3-Clause */
/* chaos.h: what the parts of the chaos harness share.
 *
 * The harness is one program (build/chaos) with two roles. Run plainly it
 * is the orchestrator (main.c): it starts a private redis-server with
 * appendonly yes / appendfsync always, a fault-injecting TCP proxy, a
 * producer thread (producer.c) and W worker processes (plus K in their own
 * PID namespace), injects the faults of a schedule drawn from a seed (also
 * second processes under a live worker's name, and MISCONF episodes),
 * waits for the queue to drain, stops the workers and runs the checker
 * (check.c). Run with --worker it is one worker (worker.c): an echomq
 * consumer whose handler records the start and the end of every call in a
 * ledger file and sleeps the job's planned duration. The orchestrator
 * starts workers by re-running its own executable, so a worker is a fresh
 * process, never a fork of a threaded one.
 */
#ifndef EMQ_CHAOS_H
#define EMQ_CHAOS_H

#include "echomq.h"

#include <stdint.h>
#include <sys/types.h>

#define CHAOS_QUEUE "chaos"
#define CHAOS_GROUP "workers"
#define CHAOS_STREAM "emq:{chaos}"
#define CHAOS_DEAD "emq:{chaos}:dead"
#define CHAOS_MAX_WORKERS 16
#define CHAOS_MAX_FAULTS 512

/* Consumer settings every worker uses; the checker's explanations of
 * duplicates depend on them. claim.min_idle_ms and lease.ttl_ms are
 * flags (chaos_settings); these are fixed. */
#define CHAOS_BLOCK_MS 500
#define CHAOS_CLAIM_INTERVAL_MS 500
#define CHAOS_COMMAND_TIMEOUT_MS 2000
#define CHAOS_INTRUDER_ID0 100 /* ledger worker ids of intruders: 100 + n */

/* The run's tunable settings: what the workers are configured with and
 * what the checker judges by. */
typedef struct chaos_settings {
    int64_t claim_idle_ms;        /* claim.min_idle_ms (--claim-idle) */
    int64_t lease_ttl_ms;         /* lease.ttl_ms (--lease-ttl) */
    int64_t retry_backoff_ms;     /* retry.backoff_ms (--retry-backoff) */
    int64_t retry_backoff_max_ms; /* retry.backoff_max_ms; 0: not set */
    int backoff_in_force;         /* 1: the library accepted retry.backoff_ms */
    int64_t settle_slack_ms;      /* --settle-slack: how long after a handler
                                     returned its settlement may still be in
                                     flight (a fault then explains a dup) */
    int64_t handler_max_ms;       /* the longest handler duration drawn */
    int64_t max_reply_bytes;      /* resp.max_reply_bytes of the workers;
                                     0: the library's default */
} chaos_settings;

/* CLOCK_MONOTONIC in milliseconds: one clock for every process of a run
 * (it is system-wide), so ledger times and fault windows compare. */
int64_t chaos_now_ms(void);
void chaos_sleep_ms(int64_t ms);

/* splitmix64: a small, well-mixed generator; the seed reproduces every
 * random choice of a run (schedule, poison jobs, delays). */
typedef struct chaos_rng {
    uint64_t s;
} chaos_rng;
uint64_t chaos_rand(chaos_rng *r);
/* Uniform in [lo, hi]. */
int64_t chaos_range(chaos_rng *r, int64_t lo, int64_t hi);

typedef enum fault_kind {
    FAULT_KILL = 0,    /* SIGKILL a worker, restart it under the same name */
    FAULT_STOP,        /* SIGSTOP a worker past claim.min_idle_ms, SIGCONT */
    FAULT_RESTART,     /* SIGKILL the server, restart it on its AOF */
    FAULT_DROP,        /* the proxy closes every worker connection */
    FAULT_STALL,       /* the proxy freezes, shorter than the command timeout */
    FAULT_HALFOPEN,    /* the proxy freezes past the command timeout */
    FAULT_STOP_LONG,   /* SIGSTOP a worker past lease.ttl_ms, SIGCONT */
    FAULT_INTRUDER,    /* a second process under a live worker's name */
    FAULT_MISCONF,     /* failed BGSAVE: writes refused with MISCONF */
    FAULT_UPKEEP_KILL, /* CLIENT KILL of a worker's upkeep connection
                          alone, every 300-400 ms, for a few seconds */
    FAULT_LEASE_DEL,   /* DEL of a worker's lease key */
    FAULT_EVICT,       /* maxmemory + volatile-lru: TTL'd keys evicted */
    FAULT_PEER_CLAIM,  /* a raw XCLAIM of pending entries to a made-up
                          consumer that then does nothing */
    FAULT_STOP_PULL,   /* SIGSTOP a pull-mode worker past lease.ttl_ms */
    FAULT_MIGRATE,     /* --cluster: the queue's slot migrated, held
                          between MIGRATING and the keys' MIGRATE */
    FAULT_FAILOVER,    /* --sentinel: the primary failed over (SENTINEL
                          FAILOVER, or the primary SIGSTOPped past
                          down-after-milliseconds); --cluster: the
                          queue's master failed over (CLUSTER FAILOVER,
                          or SIGKILLed and restarted) */
    FAULT_KINDS
} fault_kind;

const char *chaos_fault_name(fault_kind k);

/* How an intruder (FAULT_INTRUDER) ended. */
enum {
    INTRUDER_REFUSED = 1, /* exited with "in use by another live process" */
    INTRUDER_WAITED,      /* still waiting when stopped; exit status 0 */
    INTRUDER_OTHER,       /* anything else: a violation */
    INTRUDER_SKIPPED,     /* the target was not running or held no lease */
    INTRUDER_TARGET_DIED  /* the target's incarnation ended during the
                             episode: only calls before that count */
};

/* The plan of one job, drawn from the seed, carried in its fields
 * ("ms", "retries") so the worker needs no table. */
typedef struct job_plan {
    uint8_t poison;    /* answered EMQ_RETRY every time */
    uint8_t crash;     /* poison whose handler kills its own process at
                          every delivery (kind "crash"): it must reach
                          the dead letters after exactly max_deliveries
                          calls, costing no other job a delivery */
    uint8_t retries;   /* healthy: EMQ_RETRY while deliveries <= retries */
    uint8_t dead;      /* answered EMQ_DEAD at once (kind "dead") */
    uint32_t ms;       /* handler duration */
    uint32_t big;      /* bytes of its "blob" field; 0: none */
    uint32_t wide;     /* extra fields w0..w<wide-1>; 0: none */
    uint32_t delay_ms; /* produced delayed by this much (emq_produce_opts);
                          0: at once */
    uint8_t dedup;     /* produced with the idempotency key "job-<index>":
                          never in the stream twice, re-sends or not */
    int8_t priority;   /* produced with this priority (0..9); -1: none (on
                          a queue with priorities, held at 5) */
} job_plan;

/* The fields of job `index` exactly as the producer writes them (job,
 * kind, ms, retries, pad, then blob when plan->big, then w0.. when
 * plan->wide), for the producer and for the checker's comparison of dead
 * letters with their entries. Returns one allocation (the fields and every
 * byte they point to) the caller frees with free(), or NULL when out of
 * memory; *n gets the number of fields. Thread-safe (no shared state). */
emq_field *chaos_job_fields(long index, const job_plan *plan, uint64_t seed,
                            size_t *n);

/* One fault of the schedule, and when it really happened. */
typedef struct fault {
    fault_kind kind;
    int worker;  /* 1..W for KILL, STOP, STOP_LONG, STOP_PULL,
                    UPKEEP_KILL, LEASE_DEL and the target of
                    INTRUDER; 0 otherwise */
    int inc;     /* the target's incarnation when it ran */
    int pidns;   /* INTRUDER: started in its own PID namespace */
    int outcome; /* INTRUDER: INTRUDER_*; MISCONF: 1 when MISCONF
                    was seen and the restore succeeded; EVICT: 1
                    when a write was refused with OOM (then it
                    counts as a write outage) */
    int claimed; /* PEER_CLAIM: entries taken (ids below) */
    char claimed_ids[4][24];
    int64_t target_died_ms; /* INTRUDER: when the target's incarnation
                               ended during the episode; 0: it lived */
    char detail[300];       /* what happened, for the report */
    int64_t at_ms;          /* planned offset from the start of the run */
    int64_t duration_ms;    /* stop/freeze length, or the pause before a
                               restart */
    int64_t began_ms;       /* chaos_now_ms() when it began; 0: never ran */
    int64_t ended_ms;       /* ... and when the target was back */
} fault;

/* The producer thread's input and result. */
typedef struct chaos_producer {
    /* in */
    const char *url; /* the server, directly (not through the proxy) */
    long jobs;
    const job_plan *plan; /* per job: poison, retries, duration */
    int64_t start_ms;     /* pacing: job i is due at start + i / rate */
    double rate;          /* jobs per second */
    int64_t deadline_ms;  /* give up (and fail the run) after this */
    uint64_t seed;        /* for the payload padding */
    int wait_replicas;    /* producer.wait_replicas; 0: none (--sentinel:
                             2, every replica: one that a failover does
                             not promote may have confirmed a write the
                             new primary never gets) */
    /* out */
    uint8_t *resent; /* jobs sent again after an unknown outcome */
    long confirmed;  /* jobs the server confirmed (read when done) */
    long resends;    /* batches retried */
    int failed;      /* 1: gave up before every job was confirmed */
    char why[256];
    volatile int done;
} chaos_producer;

/* Thread body: publishes jobs 0..jobs-1 (chaos_job_fields), paced,
 * retrying every entry whose outcome is unknown or refused until the
 * server confirms it. */
void *chaos_produce(void *arg);

/* Worker role: argv after "--worker". Returns the process exit status. */
int chaos_worker_main(int argc, char **argv);

/* What the checker needs to know about the run. */
typedef struct chaos_run {
    uint64_t seed;
    long jobs;
    int workers;       /* every worker: plain and pidns */
    int pidns_workers; /* of which in their own PID namespace */
    int max_deliveries;
    int pull_workers;      /* of which run in pull mode */
    const char *dir;       /* run folder with the ledgers */
    const char *admin_url; /* unix socket of the server */
    const job_plan *plan;
    chaos_settings set;
    int64_t run_start; /* chaos_now_ms() at the start */
    const uint8_t *resent;
    const fault *faults;
    int nfaults;
    int workers_died;    /* unexpected worker exits */
    int tolerate_exits;  /* 1: report them without failing */
    int tolerate_unseen; /* 1: report unseen dead letters only */
    int tolerate_fields; /* 1: report dead letters that lost fields
                            only */
    int crashes;         /* workers that died on a crash job (planned) */
    int counts_bounded;  /* 1: counts below the truth are reported, not
                            failed: failovers (--sentinel) may roll a
                            raise back, or --tolerate undercounted */
    int producer_failed;
    int drained; /* 1: drained before the deadline */
} chaos_run;

/* Reads ledgers, dead letters and the server; prints the verdict. Returns
 * 0 when every promise held, 1 on any violation. */
int chaos_check(const chaos_run *run);

#endif /* EMQ_CHAOS_H */
