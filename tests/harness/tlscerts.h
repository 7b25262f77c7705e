/* SPDX-License-Identifier: BSD-3-Clause */
/* tlscerts.h: test certificates made with the openssl command line.
 *
 * emq_certs_get() generates, once per test process, a small PKI in
 * <emq_test_tmpdir()>/certs: a CA, a server certificate for 127.0.0.1 and
 * localhost, an expired server certificate, a certificate for another host
 * name, a client certificate for mutual TLS, and a second unrelated CA. All
 * keys are unencrypted EC P-256 (fast to make). Paths are absolute.
 */
#ifndef EMQ_TEST_TLSCERTS_H
#define EMQ_TEST_TLSCERTS_H

#define EMQ_CERT_PATH_MAX 512

typedef struct emq_certs {
    char dir[EMQ_CERT_PATH_MAX - 112]; /* folder holding every file */
    char ca_crt[EMQ_CERT_PATH_MAX];    /* the test CA (trust anchor) */
    char ca_key[EMQ_CERT_PATH_MAX];
    char server_crt[EMQ_CERT_PATH_MAX];  /* SAN IP:127.0.0.1, DNS:localhost */
    char server_key[EMQ_CERT_PATH_MAX];  /* key of server, expired, wronghost */
    char expired_crt[EMQ_CERT_PATH_MAX]; /* same names, notAfter in the past */
    char wronghost_crt[EMQ_CERT_PATH_MAX]; /* SAN DNS:wrong.example.invalid */
    char client_crt[EMQ_CERT_PATH_MAX];    /* clientAuth, signed by the CA */
    char client_key[EMQ_CERT_PATH_MAX];
    char client_key_encrypted[EMQ_CERT_PATH_MAX]; /* the same, encrypted
                                                     (AES-256) with
                                                     EMQ_CERTS_KEY_PASSPHRASE */
    char other_ca_crt[EMQ_CERT_PATH_MAX]; /* unrelated CA: "wrong CA" tests */
} emq_certs;

#define EMQ_CERTS_KEY_PASSPHRASE "KeyPass1"

/* Returns the certificates of this test process, generating them on the
 * first call. Fails the test (with openssl's output) when generation fails.
 * Static storage; never NULL. */
const emq_certs *emq_certs_get(void);

/* Runs argv (argv[0] looked up in PATH) with stdout and stderr appended to
 * log_path, waiting at most timeout_ms. Returns the exit status, or -1 when
 * it could not run, was killed or overran (then it is killed). Shared by
 * the fixture helpers; no shell is involved. */
int emq_run_tool(char *const argv[], const char *log_path, int timeout_ms);

/* Prints the last max_lines lines of a text file to stderr, indented, for
 * failure messages. Missing files are reported, not fatal. */
void emq_print_tail(const char *path, int max_lines);

#endif /* EMQ_TEST_TLSCERTS_H */
