/* SPDX-License-Identifier: Apache-2.0
 * receipt.h - the signed, hash-chained event stream (SPEC §6).
 */
#ifndef AIRLOCK_RECEIPT_H
#define AIRLOCK_RECEIPT_H

#include <jansson.h>
#include <openssl/evp.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

enum receipt_decision {
	RECEIPT_ALLOW = 0,
	RECEIPT_BLOCK,
	RECEIPT_WOULD_BLOCK,
	RECEIPT_INFO,
	RECEIPT_DECISION_COUNT
};

enum receipt_point {
	RECEIPT_POINT_SUPERVISOR = 0,
	RECEIPT_POINT_SANDBOX,
	RECEIPT_POINT_EGRESS_PROXY,
	RECEIPT_POINT_BROKER,
	RECEIPT_POINT_GIT,
	RECEIPT_POINT_COUNT
};

const char *receipt_decision_to_string(enum receipt_decision d);
const char *receipt_point_to_string(enum receipt_point p);

/* Signing keys. receipt_key_load() reads a PKCS#8 PEM Ed25519 private key and
 * refuses any other type; receipt_key_generate() makes a fresh one. Both
 * return NULL on failure with a reason in @err. Free with EVP_PKEY_free(). */
EVP_PKEY *receipt_key_generate(void);
EVP_PKEY *receipt_key_load(const char *path, char *err, size_t errlen);

/* Base64 of the 32 raw public key bytes, as in session.start's "pubkey".
 * @out holds at least 45 bytes. */
bool receipt_pubkey_b64(EVP_PKEY *key, char *out, size_t len);

/* `airlock keygen`: writes the private key to @path (PKCS#8 PEM, created
 * 0600, refusing to overwrite) and the public key (SPKI PEM) to @pub_out.
 * Returns 0 or -errno-style failure with a reason in @err. */
int receipt_keygen(const char *path, FILE *pub_out, char *err, size_t errlen);

struct receipt_writer;

/* Opens an event stream. @dest is "-" (stdout), "fd:N", or a path (opened
 * O_APPEND|O_CREAT, mode 0600). The writer takes a reference on @key.
 * Returns NULL with a reason in @err. */
struct receipt_writer *receipt_open(const char *dest, EVP_PKEY *key,
				    const char *session, const char *policy_digest,
				    char *err, size_t errlen);

/* Appends one receipt. @subject is borrowed (may be NULL: an empty object).
 * Returns the seq written, or -1 on I/O failure (the stream is then marked
 * broken and later appends fail too). Counts types for session.end. */
int64_t receipt_append(struct receipt_writer *w, const char *type,
		       enum receipt_decision decision, enum receipt_point point,
		       const char *rule, json_t *subject, const char *reason);

/* Writes session.end with {"exit": @exit_status, "counts": {...}}, fsyncs
 * the stream, closes it and frees @w. Returns 0 or -1 on I/O failure. */
int receipt_close(struct receipt_writer *w, int exit_status);

/* Frees @w without writing session.end (for a stream that is abandoned). */
void receipt_abort(struct receipt_writer *w);

/* Result of verifying one stream file. */
struct receipt_verify_result {
	bool ok;
	size_t lines;          /* lines read */
	size_t sessions;       /* complete session streams */
	size_t bad_line;       /* 1-based line of the first failure, 0 if none */
	char reason[256];      /* why it failed */
	json_t *counts;        /* type -> number over all sessions (owned) */
};

/* Verifies a stream (SPEC §6). A file may hold several session streams one
 * after the other (the events path is appended to); each must be complete.
 * @pubkey (NULL: trust each stream's session.start pubkey) must have signed
 * every line. @text is @len bytes, not necessarily NUL-terminated. */
void receipt_verify_buffer(const char *text, size_t len, EVP_PKEY *pubkey,
			   struct receipt_verify_result *res);

/* Reads an SPKI PEM public key (`airlock keygen` output). */
EVP_PKEY *receipt_pubkey_load(const char *path, char *err, size_t errlen);

void receipt_verify_result_free(struct receipt_verify_result *res);

#endif /* AIRLOCK_RECEIPT_H */
