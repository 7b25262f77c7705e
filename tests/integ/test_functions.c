/* SPDX-License-Identifier: BSD-3-Clause */
/* test_functions.c: echomq's scripts as a function library, against real
 * servers (docs/SECURITY.md).
 *
 * On 7.0+ and Valkey: the first process whose user may loads the library
 * and every script then goes by FCALL (no EVAL at all); a FUNCTION FLUSH
 * under a running consumer is repaired by the next connection; another
 * build's library of the same version is not called (EVAL, said once)
 * until `functions load --replace`; a user who may not load it uses EVAL
 * and says how to fix it; two versions live side by side and `functions
 * rm` removes one; `functions load` loads every master of a cluster. On
 * 6.2: no functions, everything by EVAL, `functions ls` says so.
 */
#include "harness/cluster.h"
#include "integ/cli_check_helpers.h"
#include "integ/inspect_conn_helpers.h"
#include "integ/ownership_helpers.h"
#include "scripts/scripts.h" /* the library's text, digest and names */

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

static int has_functions(void) {
    return emq_srv_binary_version(NULL, 0) >= 70000;
}

static void need_functions(void) {
    if (!has_functions())
        SKIP("functions need Redis 7.0 or later (this server is older)");
}

/* FUNCTION LIST's names of the echomq libraries on s, space-separated. */
static void libraries(const emq_srv *s, char *out, size_t size) {
    char raw[4096];
    emq_srv_cmd(s, raw, sizeof raw, "FUNCTION", "LIST", "LIBRARYNAME",
                "echomq_*", NULL);
    out[0] = '\0';
    for (const char *p = raw; (p = strstr(p, "echomq_")) != NULL;) {
        size_t n = strspn(p, "echomq_0123456789");
        size_t used = strlen(out);
        snprintf(out + used, size - used, "%s%.*s", used ? " " : "", (int)n, p);
        p += n;
    }
}

/* Produces a delayed, a keyed and a prioritized entry and three plain
 * ones, then consumes them all (one asks for a retry), through the CLI. */
static void produce_and_consume(const emq_srv *s, const char *url) {
    (void)s;
    cli_result r;
    CLI(&r, url, "produce", "fq", "--delay", "50", "-q", "n=d");
    ASSERT_EXIT(&r, 0);
    cli_free(&r);
    CLI(&r, url, "produce", "fq", "--dedup-key", "k", "-q", "n=k");
    ASSERT_EXIT(&r, 0);
    cli_free(&r);
    CLI(&r, url, "produce", "fq", "--priority", "3", "-q", "n=p");
    ASSERT_EXIT(&r, 0);
    cli_free(&r);
    CLI_IN(&r, url, "a\nb\nc\n", "produce", "fq", "--lines", "-q");
    ASSERT_EXIT(&r, 0);
    cli_free(&r);
    usleep(100 * 1000); /* the delayed one is due */
    CLI(&r, url, "consume", "fq", "-g", "g", "-c", "w", "--start", "head",
        "--until-idle", "800");
    ASSERT_EXIT(&r, 0);
    ASSERT_EQ_INT(cli_lines(r.out), 6);
    cli_free(&r);
}

/* The first process whose user may loads the library; then every script
 * goes by FCALL: a delayed, keyed, prioritized and plain cycle and the
 * admin verbs send no EVAL. On 6.2 all of it goes by EVAL. */
TEST_TIMEOUT(functions_loaded_by_the_first_process_and_used_alone, 60) {
    emq_srv *s = emq_srv_start(NULL);
    long long evals = emq_srv_calls(s, "eval", NULL);
    produce_and_consume(s, emq_srv_url(s));
    cli_result r;
    CLI(&r, emq_srv_url(s), "trim", "fq", "--acked", "--maxlen", "0");
    ASSERT_EXIT(&r, 0);
    cli_free(&r);
    CLI(&r, emq_srv_url(s), "dead", "purge", "fq", "--yes");
    ASSERT_EXIT(&r, 0);
    cli_free(&r);
    CLI(&r, emq_srv_url(s), "functions", "ls");
    ASSERT_EXIT(&r, 0);
    if (has_functions()) {
        char libs[256];
        libraries(s, libs, sizeof libs);
        ASSERT_EQ_STR(libs, EMQ_LIBRARY_NAME);
        ASSERT_EQ_INT(emq_srv_calls(s, "eval", NULL), evals);
        ASSERT(emq_srv_calls(s, "fcall", NULL) > 10);
        ASSERT_CONTAINS(r.out, "loaded");
    } else {
        ASSERT(emq_srv_calls(s, "eval", NULL) > evals + 10);
        ASSERT_CONTAINS(r.out, "no functions on this server");
    }
    cli_free(&r);
    emq_srv_stop(s);
}

typedef struct counted {
    atomic_int handled;
} counted;

static emq_verdict count_one(void *opaque, const emq_entry *e, char *reason,
                             size_t size) {
    (void)e;
    (void)reason;
    (void)size;
    atomic_fetch_add(&((counted *)opaque)->handled, 1);
    return EMQ_ACK;
}

/* A FUNCTION FLUSH under a running consumer (an operator's mistake, or a
 * server restored without it): its next script finds no function, the
 * session reconnects, the handshake loads the library again, and the
 * consumer goes on. Before: every script failed with "Function not
 * found". */
TEST_TIMEOUT(functions_flushed_under_a_consumer_are_loaded_again, 60) {
    need_functions();
    emq_srv *s = emq_srv_start(NULL);
    emq_conf_t *conf = conf_for(emq_srv_url(s));
    conf_set(conf, "queue", "fq");
    conf_set(conf, "group", "g");
    conf_set(conf, "consumer", "w");
    conf_set(conf, "start", "head");
    conf_set(conf, "block_ms", "50");
    conf_set(conf, "delayed.poll_ms", "20");
    static counted n;
    atomic_store(&n.handled, 0);
    bg b;
    bg_start(&b, conf, count_one, &n);
    cli_result r;
    CLI(&r, emq_srv_url(s), "produce", "fq", "--delay", "20", "-q", "n=0");
    ASSERT_EXIT(&r, 0);
    cli_free(&r);
    WAIT_UNTIL(atomic_load(&n.handled) >= 1, 10000, "the first entry");
    char out[256];
    emq_srv_cmd(s, out, sizeof out, "FUNCTION", "FLUSH", NULL);
    ASSERT_EQ_STR(out, "OK");
    /* Delayed ones: the mover's script must run again to hand them out. */
    for (int i = 1; i <= 5; i++) {
        char field[16];
        snprintf(field, sizeof field, "n=%d", i);
        CLI(&r, emq_srv_url(s), "produce", "fq", "--delay", "20", "-q", field);
        ASSERT_EXIT(&r, 0);
        cli_free(&r);
    }
    WAIT_UNTIL(atomic_load(&n.handled) >= 6, 15000,
               "the entries delayed after the flush");
    ASSERT_OK(bg_stop(&b, 5000), &b.err);
    char libs[256];
    libraries(s, libs, sizeof libs);
    ASSERT_EQ_STR(libs, EMQ_LIBRARY_NAME);
    emq_consumer_destroy(b.c);
    emq_srv_stop(s);
}

/* The library's text with its probe answering another digest: what
 * another build of the same version would have loaded; each of its other
 * functions answers an error, so a call of one shows. */
static char *other_build_text(void) {
    const char *text = emq__library_text();
    ASSERT(text != NULL);
    static const char from[] = "callback=function(KEYS, ARGV)\n";
    static const char to[] = "callback=function(KEYS, ARGV)\n"
                             "if true then return redis.error_reply("
                             "'OTHER BUILD CALLED') end\n";
    char *copy = malloc(strlen(text) * 2 + 1);
    ASSERT(copy != NULL);
    char *w = copy;
    for (const char *p = text; *p;) {
        if (strncmp(p, from, sizeof from - 1) == 0) {
            memcpy(w, to, sizeof to - 1);
            w += sizeof to - 1;
            p += sizeof from - 1;
        } else {
            *w++ = *p++;
        }
    }
    *w = '\0';
    char *at = strstr(copy, emq__library_digest());
    ASSERT(at != NULL);
    memcpy(at, "0123456789abcdef", 16);
    return copy;
}

/* Another build's library of this version (same names, another text) is
 * never called: processes use EVAL and say why once; `functions load`
 * exits 1 naming --replace, which puts this build's there. */
TEST_TIMEOUT(functions_of_another_build_are_not_called_until_replaced, 60) {
    need_functions();
    emq_srv *s = emq_srv_start(NULL);
    char *other = other_build_text();
    const char *load[] = {"FUNCTION", "LOAD", other, NULL};
    char out[256];
    emq_srv_cmdv(s, out, sizeof out, load);
    ASSERT_EQ_STR(out, EMQ_LIBRARY_NAME);
    free(other);
    long long fcalls = emq_srv_calls(s, "fcall", NULL);
    long long evals = emq_srv_calls(s, "eval", NULL);
    cli_result r;
    CLI(&r, emq_srv_url(s), "produce", "fq", "--delay", "10", "n=d");
    ASSERT_EXIT(&r, 0);
    ASSERT_NOT_CONTAINS(r.err, "OTHER BUILD");
    ASSERT_CONTAINS(r.err, "scripts go by EVAL");
    ASSERT_CONTAINS(r.err, "another build's library");
    ASSERT_EQ_INT(cli_count(r.err, "go by EVAL"), 1);
    cli_free(&r);
    /* The handshakes' probes went by FCALL, the add script by EVAL (the
     * other build's functions answer an error). */
    ASSERT(emq_srv_calls(s, "fcall", NULL) > fcalls);
    ASSERT(emq_srv_calls(s, "eval", NULL) > evals);
    CLI(&r, emq_srv_url(s), "functions", "load");
    ASSERT_EXIT(&r, 1);
    ASSERT_CONTAINS(r.out, "another build's");
    ASSERT_CONTAINS(r.err, "--replace");
    cli_free(&r);
    CLI(&r, emq_srv_url(s), "functions", "load", "--replace");
    ASSERT_EXIT(&r, 0);
    cli_free(&r);
    evals = emq_srv_calls(s, "eval", NULL);
    CLI(&r, emq_srv_url(s), "produce", "fq", "--delay", "10", "n=e");
    ASSERT_EXIT(&r, 0);
    ASSERT_NOT_CONTAINS(r.err, "EVAL");
    cli_free(&r);
    ASSERT_EQ_INT(emq_srv_calls(s, "eval", NULL), evals);
    emq_srv_stop(s);
}

/* A user who may run the scripts by EVAL but not load the library (an
 * upgrade before the operator loaded it): EVAL, and the process says what
 * to do once. */
TEST_TIMEOUT(functions_not_loadable_by_the_user_fall_back_and_say_so, 60) {
    need_functions();
    emq_srv_opts o = {.extra_config = "user app on >app-secret-1 ~* &* +@all "
                                      "-function\n"};
    emq_srv *s = emq_srv_start(&o);
    char url[160];
    snprintf(url, sizeof url, "redis://app:app-secret-1@127.0.0.1:%d",
             emq_srv_port(s));
    cli_result r;
    CLI(&r, url, "produce", "fq", "--dedup-key", "k", "n=1");
    ASSERT_EXIT(&r, 0);
    ASSERT_CONTAINS(r.err, "may not load it");
    ASSERT_CONTAINS(r.err, "echomq functions load");
    ASSERT_NOT_CONTAINS(r.err, "app-secret-1");
    cli_free(&r);
    char libs[256];
    libraries(s, libs, sizeof libs);
    ASSERT_EQ_STR(libs, "");
    emq_srv_stop(s);
}

/* Two versions side by side (an upgrade in progress): each process calls
 * its own; ls shows the other; rm deletes it and leaves this one. */
TEST_TIMEOUT(functions_versions_live_side_by_side_until_removed, 60) {
    need_functions();
    emq_srv *s = emq_srv_start(NULL);
    const char *old[] = {
        "FUNCTION", "LOAD",
        "#!lua name=echomq_0\n"
        "redis.register_function('emq0_library', function() return 'x' end)",
        NULL};
    char out[256];
    emq_srv_cmdv(s, out, sizeof out, old);
    ASSERT_EQ_STR(out, "echomq_0");
    produce_and_consume(s, emq_srv_url(s));
    cli_result r;
    CLI(&r, emq_srv_url(s), "functions", "ls");
    ASSERT_EXIT(&r, 0);
    ASSERT_CONTAINS(r.out, "other versions: echomq_0");
    cli_free(&r);
    CLI(&r, emq_srv_url(s), "functions", "rm", "echomq_0");
    ASSERT_EXIT(&r, 0);
    ASSERT_CONTAINS(r.err, "from 1 master");
    cli_free(&r);
    char libs[256];
    libraries(s, libs, sizeof libs);
    ASSERT_EQ_STR(libs, EMQ_LIBRARY_NAME);
    emq_srv_stop(s);
}

/* Bad input: usage errors, exit 2, nothing sent. */
TEST(functions_cli_refuses_bad_input) {
    emq_srv *s = emq_srv_start(NULL);
    static const char *const bad[][4] = {
        {"functions", NULL, NULL, NULL},
        {"functions", "lod", NULL, NULL},
        {"functions", "rm", NULL, NULL},
        {"functions", "rm", "mylib", NULL},
        {"functions", "rm", "echomq_1\x1b[31m", NULL},
        {"functions", "ls", "--replace", NULL},
        {"functions", "load", "extra", NULL},
    };
    long long before = emq_srv_calls(s, "function|load", NULL) +
                       emq_srv_calls(s, "function|delete", NULL);
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        cli_result r;
        cli_run_in(&r, emq_srv_url(s), NULL, 0, 20000, bad[i]);
        ASSERT_EXIT(&r, 2);
        ASSERT(strchr(r.err, '\x1b') == NULL);
        cli_free(&r);
    }
    ASSERT_EQ_INT(emq_srv_calls(s, "function|load", NULL) +
                      emq_srv_calls(s, "function|delete", NULL),
                  before);
    emq_srv_stop(s);
}

/* `functions load` on a cluster loads every master (functions are not
 * shared between masters), and ls shows each. */
TEST_TIMEOUT(functions_load_reaches_every_master_of_a_cluster, 90) {
    need_functions();
    emq_cl *c = emq_cl_start(3, 0);
    cli_result r;
    CLI(&r, emq_srv_url(emq_cl_node(c, 0)), "functions", "load");
    ASSERT_EXIT(&r, 0);
    ASSERT_EQ_INT(cli_count(r.out, "loaded   loaded"), 3);
    cli_free(&r);
    for (int i = 0; i < 3; i++) {
        char libs[256];
        libraries(emq_cl_node(c, i), libs, sizeof libs);
        ASSERT_EQ_STR(libs, EMQ_LIBRARY_NAME);
    }
    CLI(&r, emq_srv_url(emq_cl_node(c, 1)), "functions", "ls");
    ASSERT_EXIT(&r, 0);
    ASSERT_EQ_INT(cli_count(r.out, " loaded\n"), 3);
    cli_free(&r);
    emq_cl_stop(c);
}
