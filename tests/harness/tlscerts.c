/* SPDX-License-Identifier: BSD-3-Clause */
/* tlscerts.c: makes the test PKI with the openssl command-line tool.
 *
 * Each test process that needs TLS gets its own certificates in its private
 * scratch folder, made by running `openssl` (no shell, bounded in time) with
 * a small config file written here, so nothing depends on the system's
 * openssl.cnf. The expired certificate is signed with `x509 -req -days -1`:
 * OpenSSL 3.0's x509 has no -not_before/-not_after (those arrived in 3.4),
 * and a negative day count gives notBefore = now, notAfter = now - 1 day,
 * which verification reports as "certificate has expired". This module
 * never touches the library; it uses malloc-free fixed buffers only.
 */
#include "harness/tlscerts.h"
#include "harness/test.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static emq_certs certs;
static int certs_ready;

static int64_t mono_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int emq_run_tool(char *const argv[], const char *log_path, int timeout_ms) {
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        int fd = open(log_path, O_WRONLY | O_CREAT | O_APPEND, 0600);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
            close(fd);
        }
        int nul = open("/dev/null", O_RDONLY);
        if (nul >= 0) {
            dup2(nul, 0);
            close(nul);
        }
        execvp(argv[0], argv);
        _exit(127);
    }
    int64_t deadline = mono_ms() + timeout_ms;
    int status = 0;
    for (;;) {
        pid_t w = waitpid(pid, &status, WNOHANG);
        if (w == pid)
            break;
        if (w < 0 && errno != EINTR)
            return -1;
        if (mono_ms() > deadline) {
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
            return -1;
        }
        usleep(2000);
    }
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

void emq_print_tail(const char *path, int max_lines) {
    FILE *f = fopen(path, "r");
    if (f == NULL) {
        fprintf(stderr, "    (no file %s)\n", path);
        return;
    }
    /* Keep a ring of the last max_lines lines (bounded: 64 x 512 bytes). */
    enum { RING = 64, WIDTH = 512 };
    static char ring[RING][WIDTH];
    if (max_lines > RING)
        max_lines = RING;
    int n = 0;
    while (fgets(ring[n % max_lines], WIDTH, f) != NULL)
        n++;
    fclose(f);
    fprintf(stderr, "    --- last lines of %s ---\n", path);
    int first = n > max_lines ? n - max_lines : 0;
    for (int i = first; i < n; i++) {
        const char *line = ring[i % max_lines];
        size_t len = strlen(line);
        fprintf(stderr, "    | %s%s", line,
                len && line[len - 1] == '\n' ? "" : "\n");
    }
}

static const char cnf_text[] =
    "[req]\n"
    "distinguished_name = dn\n"
    "prompt = no\n"
    "[dn]\n"
    "CN = placeholder\n"
    "[v3_ca]\n"
    "basicConstraints = critical,CA:TRUE\n"
    "keyUsage = critical,keyCertSign,cRLSign\n"
    "subjectKeyIdentifier = hash\n"
    "[server]\n"
    "basicConstraints = CA:FALSE\n"
    "keyUsage = critical,digitalSignature,keyEncipherment\n"
    "extendedKeyUsage = serverAuth\n"
    "subjectAltName = IP:127.0.0.1,DNS:localhost\n"
    "[wronghost]\n"
    "basicConstraints = CA:FALSE\n"
    "keyUsage = critical,digitalSignature,keyEncipherment\n"
    "extendedKeyUsage = serverAuth\n"
    "subjectAltName = DNS:wrong.example.invalid\n"
    "[client]\n"
    "basicConstraints = CA:FALSE\n"
    "keyUsage = critical,digitalSignature,keyEncipherment\n"
    "extendedKeyUsage = clientAuth\n";

static char log_path[EMQ_CERT_PATH_MAX + 16];
static char cnf_path[EMQ_CERT_PATH_MAX + 16];

/* Runs one openssl invocation; fails the test with its output on error. */
static void openssl(char *const argv[]) {
    int rc = emq_run_tool(argv, log_path, 20000);
    if (rc != 0) {
        fprintf(stderr, "    openssl %s failed (status %d)\n", argv[1], rc);
        emq_print_tail(log_path, 20);
        FAIL("could not generate test certificates in %s", certs.dir);
    }
}

static void path_in(char *out, const char *name) {
    snprintf(out, EMQ_CERT_PATH_MAX, "%s/%s", certs.dir, name);
}

/* A self-signed CA certificate and its key. */
static void make_ca(const char *crt, const char *key, const char *subj) {
    char *argv[] = {
        "openssl",    "req",     "-x509",     "-new",
        "-newkey",    "ec",      "-pkeyopt",  "ec_paramgen_curve:prime256v1",
        "-nodes",     "-keyout", (char *)key, "-out",
        (char *)crt,  "-days",   "30",        "-subj",
        (char *)subj, "-config", cnf_path,    "-extensions",
        "v3_ca",      NULL};
    openssl(argv);
}

/* A key and a signing request for it. */
static void make_csr(const char *key, const char *csr, const char *subj) {
    char *argv[] = {"openssl",
                    "req",
                    "-new",
                    "-newkey",
                    "ec",
                    "-pkeyopt",
                    "ec_paramgen_curve:prime256v1",
                    "-nodes",
                    "-keyout",
                    (char *)key,
                    "-out",
                    (char *)csr,
                    "-subj",
                    (char *)subj,
                    "-config",
                    cnf_path,
                    NULL};
    openssl(argv);
}

/* A signing request for an existing key. */
static void make_csr_for_key(const char *key, const char *csr,
                             const char *subj) {
    char *argv[] = {"openssl",    "req",     "-new",      "-key",
                    (char *)key,  "-out",    (char *)csr, "-subj",
                    (char *)subj, "-config", cnf_path,    NULL};
    openssl(argv);
}

/* Signs csr with the test CA for days (negative: already expired). */
static void sign(const char *csr, const char *crt, const char *section,
                 const char *days, const char *serial) {
    char *argv[] = {
        "openssl",       "x509",        "-req",         "-in",
        (char *)csr,     "-CA",         certs.ca_crt,   "-CAkey",
        certs.ca_key,    "-set_serial", (char *)serial, "-days",
        (char *)days,    "-extfile",    cnf_path,       "-extensions",
        (char *)section, "-out",        (char *)crt,    NULL};
    openssl(argv);
}

const emq_certs *emq_certs_get(void) {
    /* The folder is the test's own: with --no-fork a later test gets a new
     * one (the old is gone), so the files are made again. */
    if (certs_ready && access(certs.ca_crt, R_OK) == 0 &&
        strncmp(certs.dir, emq_test_tmpdir(), strlen(emq_test_tmpdir())) == 0)
        return &certs;
    snprintf(certs.dir, sizeof certs.dir, "%s/certs", emq_test_tmpdir());
    if (mkdir(certs.dir, 0700) != 0 && errno != EEXIST)
        FAIL("mkdir %s: %s", certs.dir, strerror(errno));
    snprintf(log_path, sizeof log_path, "%s/openssl.log", certs.dir);
    snprintf(cnf_path, sizeof cnf_path, "%s/openssl.cnf", certs.dir);
    FILE *f = fopen(cnf_path, "w");
    if (f == NULL || fputs(cnf_text, f) == EOF || fclose(f) != 0)
        FAIL("cannot write %s", cnf_path);

    char other_key[EMQ_CERT_PATH_MAX], server_csr[EMQ_CERT_PATH_MAX],
        client_csr[EMQ_CERT_PATH_MAX], wronghost_csr[EMQ_CERT_PATH_MAX];
    path_in(certs.ca_crt, "ca.crt");
    path_in(certs.ca_key, "ca.key");
    path_in(certs.server_crt, "server.crt");
    path_in(certs.server_key, "server.key");
    path_in(certs.expired_crt, "expired.crt");
    path_in(certs.wronghost_crt, "wronghost.crt");
    path_in(certs.client_crt, "client.crt");
    path_in(certs.client_key, "client.key");
    path_in(certs.client_key_encrypted, "client-encrypted.key");
    path_in(certs.other_ca_crt, "other-ca.crt");
    path_in(other_key, "other-ca.key");
    path_in(server_csr, "server.csr");
    path_in(client_csr, "client.csr");
    path_in(wronghost_csr, "wronghost.csr");

    make_ca(certs.ca_crt, certs.ca_key, "/CN=echomq test CA");
    make_ca(certs.other_ca_crt, other_key, "/CN=echomq unrelated CA");
    make_csr(certs.server_key, server_csr, "/CN=localhost");
    sign(server_csr, certs.server_crt, "server", "30", "2");
    sign(server_csr, certs.expired_crt, "server", "-1", "3");
    /* Its CN names the wrong host too, so no CN fallback can match. */
    make_csr_for_key(certs.server_key, wronghost_csr,
                     "/CN=wrong.example.invalid");
    sign(wronghost_csr, certs.wronghost_crt, "wronghost", "30", "4");
    make_csr(certs.client_key, client_csr, "/CN=echomq test client");
    sign(client_csr, certs.client_crt, "client", "30", "5");
    char *encrypt[] = {"openssl",
                       "pkey",
                       "-in",
                       certs.client_key,
                       "-out",
                       certs.client_key_encrypted,
                       "-aes256",
                       "-passout",
                       "pass:" EMQ_CERTS_KEY_PASSPHRASE,
                       NULL};
    openssl(encrypt);
    certs_ready = 1;
    return &certs;
}
