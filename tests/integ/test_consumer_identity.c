/* SPDX-License-Identifier: BSD-3-Clause */
/* test_consumer_identity.c: stable consumer names (docs/CONSUMER.md,
 * the contract's point 3) and the lease that keeps one name in one process,
 * against a real redis-server.
 *
 * The name is required and validated (missing, a space, a control
 * character, more than 128 bytes: EMQ_EINVAL naming the problem), and it
 * is the connection's name (CLIENT LIST). Two live consumers under one
 * name: the second's run fails with an error naming the name as in use. A
 * lease left by a process that no longer exists (a child killed with
 * SIGKILL) is taken over at once, and the dead child's pending entries come
 * back to the new holder. A lease held by another host is refused until it
 * expires, and taken afterwards.
 */
#include "integ/tally_helpers.h"

#include <signal.h>
#include <stdatomic.h>
#include <sys/wait.h>
#include <unistd.h>

/* The first EMQ_EINVAL met while configuring and creating a consumer with
 * the given name (NULL: unset); fails the test when both steps accept it. */
static void name_refused(emq_srv *s, const char *name, char *msg, size_t size) {
    emq_conf_t *conf = conf_for(emq_srv_url(s));
    conf_set(conf, "queue", "idq");
    conf_set(conf, "group", "g");
    conf_set(conf, "start", "new");
    emq_error err;
    memset(&err, 0, sizeof err);
    if (name != NULL && emq_conf_set(conf, "consumer", name, &err) != EMQ_OK) {
        ASSERT_EQ_INT(err.code, EMQ_EINVAL);
    } else {
        emq_consumer_t *c = (emq_consumer_t *)(uintptr_t)1;
        memset(&err, 0, sizeof err);
        emq_status st = emq_consumer_new(conf, record, NULL, &c, &err);
        if (st == EMQ_OK) {
            emq_consumer_destroy(c);
            emq_conf_destroy(conf);
            FAIL("consumer name '%s' was accepted", name ? name : "(unset)");
        }
        ASSERT_STATUS(st, EMQ_EINVAL, &err);
        ASSERT(c == NULL);
    }
    emq_conf_destroy(conf);
    snprintf(msg, size, "%s", err.message);
}

TEST(consumer_name_required_and_validated) {
    emq_srv *s = emq_srv_start(NULL);
    long long cmds0 = info_number(s, "stats", "total_commands_processed");
    char msg[EMQ_ERROR_MESSAGE_MAX];

    name_refused(s, NULL, msg, sizeof msg);
    ASSERT_CONTAINS(msg, "consumer");
    ASSERT_CONTAINS(msg, "required");

    name_refused(s, "two words", msg, sizeof msg);
    ASSERT_CONTAINS(msg, "consumer");
    ASSERT_CONTAINS_CI(msg, "space");

    name_refused(s, "bell\x07name", msg, sizeof msg);
    ASSERT_CONTAINS(msg, "consumer");
    ASSERT(contains_ci(msg, "control") || contains_ci(msg, "printable"));

    char long_name[200];
    memset(long_name, 'n', 129);
    long_name[129] = '\0';
    name_refused(s, long_name, msg, sizeof msg);
    ASSERT_CONTAINS(msg, "consumer");
    ASSERT_CONTAINS(msg, "128");

    /* Exactly 128 bytes is fine. */
    long_name[128] = '\0';
    emq_conf_t *conf = consumer_conf(s, "idq", "g", long_name, "new");
    emq_consumer_t *c = consumer_ok(conf, record, NULL);
    emq_consumer_destroy(c);
    emq_conf_destroy(conf);

    /* None of that reached the server (one INFO of ours in between). */
    ASSERT_EQ_INT(info_number(s, "stats", "total_commands_processed") - cmds0,
                  1);
    emq_srv_stop(s);
}

TEST(consumer_connection_is_named_after_consumer) {
    emq_srv *s = emq_srv_start(NULL);
    emq_conf_t *conf = consumer_conf(s, "named", "g", "worker-7.a", "new");
    static recorder r;
    recorder_init(&r);
    emq_consumer_t *c = consumer_ok(conf, record, &r);
    emq_conf_destroy(conf);
    runner_thread t;
    start_consumer(&t, c);
    wait_reads(c, &t, 2, 3000);
    static char out[16384];
    ASSERT_EQ_INT(emq_srv_cmd(s, out, sizeof out, "CLIENT", "LIST", NULL), '$');
    ASSERT_CONTAINS(out, " name=worker-7.a ");
    emq_consumer_stop(c);
    ASSERT_OK(join_consumer(&t), &t.err);
    emq_consumer_destroy(c);
    emq_srv_stop(s);
}

TEST(consumer_same_name_twice_second_refused) {
    emq_srv *s = emq_srv_start(NULL);
    emq_conf_t *conf = consumer_conf(s, "twice", "g", "w1", "head");
    /* A lease of 10 s: refused at once, not after its TTL and a second
     * (11 s), which a loose bound (6 s: a loaded machine holds a process
     * off the CPU for 2-4 s now and then) tells apart on any machine. */
    conf_set(conf, "lease.ttl_ms", "10000");
    static recorder r1, r2;
    recorder_init(&r1);
    recorder_init(&r2);
    emq_consumer_t *a = consumer_ok(conf, record, &r1);
    emq_consumer_t *b = consumer_ok(conf, record, &r2);
    emq_conf_destroy(conf);
    runner_thread ta;
    start_consumer(&ta, a);
    wait_reads(a, &ta, 2, 10000);

    emq_error err;
    memset(&err, 0, sizeof err);
    int64_t t0 = now_ms();
    emq_status st = emq_consumer_run(b, &err);
    ASSERT(st != EMQ_OK);
    ASSERT(now_ms() - t0 < emq_test_ms(6000));
    ASSERT_EQ_INT(err.code, st);
    ASSERT_CONTAINS(err.message, "'w1'");
    ASSERT_CONTAINS(err.message, "in use");
    emq_consumer_stats bs;
    emq_consumer_stats_get(b, &bs);
    ASSERT_EQ_INT(bs.reads, 0);

    /* The first one is unharmed and still gets work. */
    produce_n(s, "twice", "v", 3);
    wait_for(&r1, 3, 10000);
    ASSERT_EQ_SIZE(r2.n, 0);
    emq_consumer_stop(a);
    ASSERT_OK(join_consumer(&ta), &ta.err);
    /* After a clean stop the lease is released: the name is free again. */
    char out[256];
    emq_srv_cmd(s, out, sizeof out, "EXISTS", "emq:{twice}:lease:g:w1", NULL);
    ASSERT_EQ_STR(out, "0");
    emq_consumer_destroy(a);
    emq_consumer_destroy(b);
    emq_srv_stop(s);
}

/* Child side: a handler that never returns, so its entries stay pending. */
static emq_verdict hang(void *opaque, const emq_entry *e, char *reason,
                        size_t reason_size) {
    (void)opaque;
    (void)e;
    (void)reason;
    (void)reason_size;
    for (;;)
        pause();
    return EMQ_ACK;
}

TEST_TIMEOUT(consumer_lease_of_killed_process_taken_over, 20) {
    emq_srv *s = emq_srv_start(NULL);
    produce_n(s, "crash", "v", 3);
    emq_conf_t *conf = consumer_conf(s, "crash", "g", "w1", "head");
    conf_set(conf, "count", "3");
    /* The child's lease lives 15 s: taken over at once, not after its
     * expiry, which a loose bound (8 s: room for a stalled process) tells
     * apart on any machine. */
    conf_set(conf, "lease.ttl_ms", "15000");
    fflush(NULL);
    pid_t child = fork();
    ASSERT(child >= 0);
    if (child == 0) {
        /* Never return into the harness from here: _exit only. */
        emq_consumer_t *c = NULL;
        if (emq_consumer_new(conf, hang, NULL, &c, NULL) != EMQ_OK)
            _exit(3);
        emq_consumer_run(c, NULL);
        _exit(4);
    }
    /* Wait until the child holds the lease and the 3 entries. */
    char want[64], out[4096];
    snprintf(want, sizeof want, ":%ld:", (long)child);
    int64_t end = now_ms() + emq_test_ms(5000);
    int ready = 0;
    while (!ready && now_ms() < end) {
        emq_srv_cmd(s, out, sizeof out, "GET", "emq:{crash}:lease:g:w1", NULL);
        ready = strstr(out, want) != NULL;
        if (ready) {
            /* The lease is taken before the group is made (the door):
             * NOGROUP until then, not ready yet. */
            ready = emq_srv_cmd(s, out, sizeof out, "XPENDING", "emq:{crash}",
                                "g", NULL) == '*' &&
                    strtoll(out, NULL, 10) == 3;
        }
        if (!ready)
            usleep(5000);
    }
    if (!ready) {
        kill(child, SIGKILL);
        waitpid(child, NULL, 0);
        FAIL("child never held the lease and 3 entries: %s", out);
    }
    ASSERT_EQ_INT(kill(child, SIGKILL), 0);
    int status;
    ASSERT_EQ_INT(waitpid(child, &status, 0), child);
    ASSERT(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
    /* The lease (ttl 15 s) is still there, naming the dead child. */
    emq_srv_cmd(s, out, sizeof out, "GET", "emq:{crash}:lease:g:w1", NULL);
    ASSERT_CONTAINS(out, want);

    static recorder r;
    recorder_init(&r);
    emq_consumer_t *c = consumer_ok(conf, record, &r);
    emq_conf_destroy(conf);
    runner_thread t;
    int64_t t0 = now_ms();
    start_consumer(&t, c);
    wait_for(&r, 3, 8000);
    /* Taken over at once, not after the lease's 15 s expiry. */
    ASSERT(now_ms() - t0 < emq_test_ms(8000));
    emq_srv_cmd(s, out, sizeof out, "GET", "emq:{crash}:lease:g:w1", NULL);
    snprintf(want, sizeof want, ":%ld:", (long)getpid());
    ASSERT_CONTAINS(out, want);
    emq_consumer_stop(c);
    ASSERT_OK(join_consumer(&t), &t.err);
    /* The dead child's entries came back to the same name. */
    ASSERT_EQ_SIZE(r.n, 3);
    for (int i = 0; i < 3; i++) {
        char v[16];
        snprintf(v, sizeof v, "v%d", i);
        ASSERT_EQ_STR(r.values[i], v);
        ASSERT_EQ_INT(r.deliveries[i], 2);
    }
    ASSERT_EQ_INT(pending_count(s, "emq:{crash}", "g"), 0);
    emq_consumer_destroy(c);
    emq_srv_stop(s);
}

/* A holder that cannot be judged from here (another host, boot or PID
 * namespace) is waited for: its lease is taken once it expires, and a
 * holder that keeps renewing is refused after one TTL and a second. */
TEST(consumer_lease_of_other_host_taken_only_after_expiry) {
    emq_srv *s = emq_srv_start(NULL);
    char out[512];
    ASSERT_EQ_INT(emq_srv_cmd(s, out, sizeof out, "SET", "emq:{exp}:lease:g:w1",
                              "otherhost:boot:1:1:1:abc", "PX", "1000", NULL),
                  '+');
    emq_conf_t *conf = consumer_conf(s, "exp", "g", "w1", "new");
    static recorder r;
    recorder_init(&r);
    emq_consumer_t *c = consumer_ok(conf, record, &r);
    emq_conf_destroy(conf);
    int64_t t0 = now_ms();
    runner_thread t;
    start_consumer(&t, c);
    wait_reads(c, &t, 2, 10000);
    /* Not before the other host's lease expired. */
    ASSERT(now_ms() - t0 >= 900);
    emq_srv_cmd(s, out, sizeof out, "GET", "emq:{exp}:lease:g:w1", NULL);
    char want[64];
    snprintf(want, sizeof want, ":%ld:", (long)getpid());
    ASSERT_CONTAINS(out, want);
    emq_consumer_stop(c);
    ASSERT_OK(join_consumer(&t), &t.err);
    emq_consumer_destroy(c);
    emq_srv_stop(s);
}

/* Renews the planted lease every 200 ms until told to stop, to 5 s: a
 * stall of this process (or the server) shorter than that must not let it
 * expire, or w1 would take the name and run on for good. */
typedef struct renewer {
    emq_srv *s;
    atomic_int stop;
} renewer;

static void *renew_other_host(void *arg) {
    renewer *rn = arg;
    char out[64];
    while (!atomic_load(&rn->stop)) {
        emq_srv_cmd(rn->s, out, sizeof out, "PEXPIRE", "emq:{exp}:lease:g:w1",
                    "5000", NULL);
        usleep(200 * 1000);
    }
    return NULL;
}

TEST(consumer_lease_of_live_other_host_refused_after_waiting) {
    emq_srv *s = emq_srv_start(NULL);
    char out[512];
    emq_srv_cmd(s, out, sizeof out, "SET", "emq:{exp}:lease:g:w1",
                "otherhost:boot:1:1:1:abc", "PX", "5000", NULL);
    static renewer rn;
    rn.s = s;
    atomic_store(&rn.stop, 0);
    pthread_t th;
    pthread_create(&th, NULL, renew_other_host, &rn);
    emq_conf_t *conf = consumer_conf(s, "exp", "g", "w1", "new");
    conf_set(conf, "lease.ttl_ms", "2000");
    conf_set(conf, "block_ms", "200");
    static recorder r;
    recorder_init(&r);
    emq_consumer_t *c = consumer_ok(conf, record, &r);
    emq_conf_destroy(conf);
    int64_t t0 = now_ms();
    emq_error err;
    memset(&err, 0, sizeof err);
    emq_status st = emq_consumer_run(c, &err);
    int64_t took = now_ms() - t0;
    atomic_store(&rn.stop, 1);
    pthread_join(th, NULL);
    ASSERT(st != EMQ_OK);
    ASSERT_CONTAINS(err.message, "'w1'");
    ASSERT_CONTAINS(err.message, "in use");
    ASSERT_CONTAINS(err.message, "otherhost");
    /* It waited one TTL and a second (3 s), not much more (a loaded or
     * valgrind run is slower: the bound scales). */
    ASSERT(took >= 2500 && took < emq_test_ms(8000));
    emq_srv_cmd(s, out, sizeof out, "GET", "emq:{exp}:lease:g:w1", NULL);
    ASSERT_EQ_STR(out, "otherhost:boot:1:1:1:abc");
    ASSERT_EQ_INT(cmdstat_calls(s, "xreadgroup"), 0);
    emq_consumer_destroy(c);
    emq_srv_stop(s);
}

TEST(consumer_lease_of_live_local_process_refused) {
    emq_srv *s = emq_srv_start(NULL);
    /* A token of this host naming a live process that is not us (pid 1):
     * not dead, so not taken over. */
    char host[64] = "localhost";
    gethostname(host, sizeof host - 1);
    host[sizeof host - 1] = '\0';
    char token[128], out[512];
    snprintf(token, sizeof token, "%s:1:feedface", host);
    emq_srv_cmd(s, out, sizeof out, "SET", "emq:{live}:lease:g:w1", token, "PX",
                "10000", NULL);
    emq_conf_t *conf = consumer_conf(s, "live", "g", "w1", "new");
    emq_consumer_t *c = consumer_ok(conf, record, NULL);
    emq_conf_destroy(conf);
    emq_error err;
    memset(&err, 0, sizeof err);
    ASSERT(emq_consumer_run(c, &err) != EMQ_OK);
    ASSERT_CONTAINS(err.message, "in use");
    emq_srv_cmd(s, out, sizeof out, "GET", "emq:{live}:lease:g:w1", NULL);
    ASSERT_EQ_STR(out, token);
    emq_consumer_destroy(c);
    emq_srv_stop(s);
}
