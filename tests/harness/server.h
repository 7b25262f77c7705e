/* SPDX-License-Identifier: BSD-3-Clause */
/* server.h: a private redis-server per test, started and stopped by pid.
 *
 * emq_srv_start() writes a config file into a private folder under
 * emq_test_tmpdir(), fork/execs `redis-server` in the test's own process
 * group, and waits (bounded) until it answers.
 *
 * Which server: one setting, the environment variable EMQ_SERVER_BIN_DIR,
 * names the folder holding `redis-server` and `redis-cli` (for Valkey,
 * scripts/servers.sh links those names to valkey-server and valkey-cli).
 * Unset or empty: both are looked up on PATH. Nothing else is guessed.
 * emq_srv_server() tells a test which server it got (INFO server). Every server
 * also listens on a unix socket in its folder ("admin socket"), which the raw
 * helper emq_srv_cmd() uses for setup and inspection without the library,
 * whatever the main transport is (TCP, unix or TLS).
 *
 * Cleanup: emq_srv_stop() ends the server (SIGTERM, bounded wait, SIGKILL).
 * A failing test exits through exit(), and an atexit hook kills whatever is
 * still running; a test that times out has its whole process group killed
 * by the runner, which includes the server; on Linux a server started from
 * the main thread also gets SIGKILL when the test process dies
 * (PR_SET_PDEATHSIG follows the forking thread, so not from helpers).
 */
#ifndef EMQ_TEST_SERVER_H
#define EMQ_TEST_SERVER_H

#include <stddef.h>
#include <sys/types.h>

typedef enum emq_srv_transport {
    EMQ_SRV_TCP = 0, /* redis://127.0.0.1:PORT */
    EMQ_SRV_UNIX,    /* unix:///.../redis.sock (no TCP port at all) */
    EMQ_SRV_TLS      /* rediss://127.0.0.1:PORT (plain port 0) */
} emq_srv_transport;

typedef enum emq_srv_cert {
    EMQ_SRV_CERT_GOOD = 0, /* server.crt: 127.0.0.1 and localhost */
    EMQ_SRV_CERT_EXPIRED,  /* expired.crt */
    EMQ_SRV_CERT_WRONGHOST /* wronghost.crt: wrong.example.invalid */
} emq_srv_cert;

typedef enum emq_srv_client_auth {
    EMQ_SRV_CLIENT_AUTH_NO = 0, /* tls-auth-clients no */
    EMQ_SRV_CLIENT_AUTH_YES,    /* tls-auth-clients yes */
    EMQ_SRV_CLIENT_AUTH_OPTIONAL
} emq_srv_client_auth;

typedef struct emq_srv_opts {
    emq_srv_transport transport;
    const char *requirepass;         /* NULL: none */
    const char *extra_config;        /* raw config lines ("user alice on >pw ~*
                                        +@all\n"), appended verbatim; NULL: none */
    int appendonly;                  /* 1: appendonly yes, appendfsync always */
    emq_srv_cert cert;               /* TLS only: which server certificate */
    emq_srv_client_auth client_auth; /* TLS only */
    int start_timeout_ms;            /* 0: 5000 */
    int port;                        /* TCP/TLS port; 0: a free one */
    int sentinel; /* 1: a Sentinel (redis-server --sentinel), TCP only;
                     extra_config holds its "sentinel monitor" lines */
} emq_srv_opts;

typedef struct emq_srv emq_srv;

/* Starts a server; opts may be NULL (TCP, no password). Fails the test with
 * the tail of the server's log when it does not come up in time. Returns a
 * handle owned by the fixture; end it with emq_srv_stop. */
emq_srv *emq_srv_start(const emq_srv_opts *opts);
/* Like emq_srv_start but returns NULL on failure instead of failing the
 * test, with a reason in why (may be NULL). For the fixture's self-tests. */
emq_srv *emq_srv_try_start(const emq_srv_opts *opts, char *why,
                           size_t why_size);
/* Prints the tails of the log and stdout of the last server that failed
 * to start (quietly kept by emq_srv_try_start), to stderr. */
void emq_srv_print_failure(void);
/* SIGTERM, wait up to 3 s, then SIGKILL; reaps the pid and frees s. NULL
 * is a no-op. */
void emq_srv_stop(emq_srv *s);
/* SIGKILL now and reap; s keeps its folder, port and config. */
void emq_srv_kill9(emq_srv *s);
/* Starts the same config again (same port, folder and data) after
 * emq_srv_kill9; fails the test if it does not come up. */
void emq_srv_restart(emq_srv *s);

/* The URL a client connects to. Valid until emq_srv_stop. */
const char *emq_srv_url(const emq_srv *s);
/* TCP or TLS port; 0 for a unix-socket server. */
int emq_srv_port(const emq_srv *s);
/* The server's pid, or -1 after emq_srv_kill9. */
pid_t emq_srv_pid(const emq_srv *s);
/* The server's private folder (config, log, data, sockets). */
const char *emq_srv_dir(const emq_srv *s);
/* Path of the main unix socket (also the admin socket). */
const char *emq_srv_socket(const emq_srv *s);

/* Raw blocking command over the admin socket, with AUTH (requirepass)
 * first when set. args is a NULL-terminated list of C strings. The reply
 * is flattened into out (NUL-terminated, truncated to size): the text of
 * a status, error or bulk string, the digits of an integer, "(nil)" for a
 * null, and the elements of an array one per line. Returns the reply's
 * type byte ('+', '-', ':', '$', '*'), or -1 on I/O error or a 5 s stall
 * (out then says why). */
int emq_srv_cmdv(const emq_srv *s, char *out, size_t size,
                 const char *const *args);
/* A connection in MONITOR mode (after AUTH when set): returns its fd, the
 * server's "+OK" read, every command the server runs from then on
 * arriving as a line; -1 on failure. The caller reads and closes it. */
int emq_srv_monitor(const emq_srv *s);
/* emq_srv_cmdv with the arguments inline, ending with NULL. */
int emq_srv_cmd(const emq_srv *s, char *out, size_t size, const char *arg0, ...)
    __attribute__((sentinel));

/* ---- which server runs -------------------------------------------------
 *
 * EMQ_SERVER_BIN_DIR (see the top): the folder, or NULL for PATH. */
const char *emq_srv_bin_dir(void);
/* The file to exec for prog ("redis-server", "redis-cli"): <dir>/prog with
 * EMQ_SERVER_BIN_DIR, else the first executable prog on PATH. Returns 0 and
 * the path in out, or -1 (out says what is missing) when there is none. */
int emq_srv_program(const char *prog, char *out, size_t size);

typedef struct emq_srv_server_info {
    char name[16];           /* "redis" or "valkey" (server_name, else redis) */
    char version[32];        /* that server's own version: valkey_version
                                for Valkey, redis_version for Redis */
    char redis_version[32];  /* redis_version as INFO says it (Valkey 8.0.1:
                                7.2.4, the Redis it is compatible with) */
    int major, minor, patch; /* of version */
    int compat;              /* redis_version as major*10000+minor*100+patch:
                                what command-level behaviour to expect */
    char label[48];          /* "redis 6.2.16", "valkey 8.0.1" */
} emq_srv_server_info;

/* Which server s is, from INFO server (redis_version, valkey_version,
 * server_name), asked once over the admin socket and kept. Fails the test
 * when INFO does not answer. */
const emq_srv_server_info *emq_srv_server(const emq_srv *s);
/* The version `redis-server --version` prints for the binary the fixture
 * runs, as major*10000+minor*100+patch (valkey: its own version), before any
 * server is started; name gets "redis" or "valkey" (may be NULL). 0 when
 * it cannot be run. Asked once, then kept. */
int emq_srv_binary_version(char *name, size_t name_size);
/* The command echomq's scripts go by on the servers the tests start
 * (whose default user may load the function library): "FCALL" on 7.0 and
 * later (and Valkey), "EVAL" before. */
const char *emq_srv_script_command(void);
/* 1 when s speaks at least Redis major.minor (by redis_version, so Valkey
 * 8.0.1 counts as 7.2). */
int emq_srv_redis_at_least(const emq_srv *s, int major, int minor);
/* 1 when s is Valkey. */
int emq_srv_is_valkey(const emq_srv *s);
/* Ends the test as skipped with "<label> lacks <feature>" when cond is 0:
 * a feature the server does not have is a named skip, never a pass. */
void emq_srv_require(const emq_srv *s, int cond, const char *feature);
/* calls= of command cmd in INFO commandstats (0 when never called). cmd is
 * lower case; "xgroup|create" names a subcommand. Servers before Redis 7.0
 * keep no per-subcommand stats: there "a|b" reads the count of a, which
 * adds up every subcommand of a, and *exact (may be NULL) gets 0; else 1. */
long long emq_srv_calls(const emq_srv *s, const char *cmd, int *exact);

/* A loopback TCP port nothing listens on, from the block of ports this
 * test process holds alone (server.c): no other test, in this run or
 * another, is handed it. Successive calls hand out different ports. Fails
 * the test if none can be had. */
int emq_free_port(void);
/* 1 when loopback port can be bound now (SO_REUSEADDR), else 0. */
int emq_port_bindable(int port);

#endif /* EMQ_TEST_SERVER_H */
