/* SPDX-License-Identifier: Apache-2.0
 * sigv4.h - AWS Signature Version 4: the canonical request, the string to
 * sign, the signing key, chunk signatures of aws-chunked uploads, and the
 * re-signing the broker does for a secret of kind "aws" (SPEC §3.4): a
 * request the agent signed with its placeholder credentials is verified
 * with the placeholder secret and signed again with the real one.
 *
 * Pure: no I/O, no clock, no policy. Tested against AWS's published
 * vectors in tests/unit/test_sigv4.c, fuzzed by tests/fuzz/fuzz_sigv4.c.
 *
 *	struct sigv4_resign rs;
 *	st = sigv4_resign_head(&msg, NULL, &placeholder, &real, &rs);
 *	SIGV4_NEED_BODY: call again with the body's SHA-256 (hex);
 *	SIGV4_OK: send rs.authorization (and rs.token as
 *	          X-Amz-Security-Token); when rs.chunked, pass the whole
 *	          aws-chunked body through sigv4_resign_chunks();
 *	else:     refuse (sigv4_status_reason()).
 *	sigv4_resign_free(&rs);
 */
#ifndef AIRLOCK_SIGV4_H
#define AIRLOCK_SIGV4_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "buf.h"

#define SIGV4_HEX_LEN 64           /* a signature or hash in hex */
#define SIGV4A_SIG_HEX_MAX 144      /* a SigV4a signature: DER ECDSA P-256,
				       at most 72 bytes, in hex */
#define SIGV4_KEY_ID_MAX 128
#define SIGV4_SCOPE_PART_MAX 63     /* region, service */
#define SIGV4_SIGNED_HEADERS_MAX 2048

/* One header field as sent (the name in any case). */
struct sigv4_field {
	const char *name;
	const char *value;
};

/* A request as the signer sees it. */
struct sigv4_msg {
	const char *method;
	const char *path;   /* the raw path as sent ("" is "/") */
	const char *query;  /* the raw query after '?', or NULL */
	const struct sigv4_field *fields;
	size_t nfields;
};

/* The parts of "AWS4-HMAC-SHA256 Credential=KEY/DATE/REGION/SERVICE/
 * aws4_request, SignedHeaders=a;b, Signature=HEX". The offsets are the
 * key id's and the signature's in the parsed value, for rewriting it with
 * nothing else changed. */
struct sigv4_auth {
	char key_id[SIGV4_KEY_ID_MAX + 1];
	char date[9];                 /* YYYYMMDD */
	char region[SIGV4_SCOPE_PART_MAX + 1];
	char service[SIGV4_SCOPE_PART_MAX + 1];
	char signed_headers[SIGV4_SIGNED_HEADERS_MAX + 1];
	char signature[SIGV4A_SIG_HEX_MAX + 1];
	size_t sig_len;               /* 64 (SigV4), or SigV4a's DER length */
	bool v4a;                     /* AWS4-ECDSA-P256-SHA256: the scope has
					 no region (empty) */
	size_t key_off, key_len, sig_off;
};

/* Parses an Authorization value of the AWS4-HMAC-SHA256 scheme, or of
 * SigV4a's AWS4-ECDSA-P256-SHA256 (Credential KEY/DATE/SERVICE/
 * aws4_request, a DER signature in lowercase hex). Returns 0, or -1 when
 * it is neither or is malformed (a part missing, too long, a signature
 * that is not 64 lowercase hex digits (SigV4), signed headers not
 * lowercase, sorted and unique). */
int sigv4_parse_auth(const char *value, struct sigv4_auth *out);

/* Does @value start with the SigV4 scheme name ("AWS4-", any variant)? */
bool sigv4_is_aws4(const char *value);

/* The canonical request of @m for @signed_headers (";"-separated, as in
 * the Authorization) and @payload_hash, appended to @out. S3 (@s3) takes
 * the path as sent; other services encode it once more (AWS's double
 * encoding). The query's parameters are decoded, encoded again and sorted.
 * Returns 0, or -1 when a signed header is absent. */
int sigv4_canonical_request(const struct sigv4_msg *m, const char *signed_headers,
			    const char *payload_hash, bool s3, struct buf *out);

/* kSigning = HMAC(HMAC(HMAC(HMAC("AWS4" + secret, date), region),
 * service), "aws4_request"). */
void sigv4_signing_key(const char *secret, size_t secret_len, const char *date,
		       const char *region, const char *service, uint8_t key[32]);

/* SigV4a's ECDSA P-256 private key, derived from the key id and the
 * secret by the counter-mode KDF of NIST SP 800-108 (HMAC-SHA256 keyed
 * with "AWS4A" + secret over 1 || "AWS4-ECDSA-P256-SHA256" || 0 ||
 * key id || counter || 256; the first result c <= n - 2 gives c + 1).
 * Returns 0, or -1. */
int sigv4a_private_key(const char *key_id, const char *secret, size_t secret_len,
		       uint8_t d[32]);

/* Does @sig_hex (DER, hex) verify as the SigV4a signature of @sts (the
 * string to sign) with the key derived from @key_id and @secret? */
bool sigv4a_verify(const char *key_id, const char *secret, size_t secret_len,
		   const char *sts, size_t sts_len, const char *sig_hex, size_t sig_len);

/* The signature (hex, NUL-terminated) of the string to sign
 * "AWS4-HMAC-SHA256\n" amz_date "\n" scope "\n" hex(SHA-256(canonical)). */
void sigv4_sign(const uint8_t key[32], const char *amz_date, const char *scope,
		const char *canonical, size_t len, char hex[SIGV4_HEX_LEN + 1]);

/* The signature of one aws-chunked chunk (@data, @len bytes; 0 for the
 * final one) chained on @prev (the seed or the previous chunk's). */
void sigv4_chunk_sign(const uint8_t key[32], const char *amz_date, const char *scope,
		      const char *prev, const void *data, size_t len,
		      char hex[SIGV4_HEX_LEN + 1]);

/* Lowercase hex SHA-256 of @len bytes. */
void sigv4_sha256_hex(const void *data, size_t len, char hex[SIGV4_HEX_LEN + 1]);

struct sigv4_creds {
	const char *key_id;
	const char *secret;
	size_t secret_len;
	const char *token;  /* the session token, or NULL */
};

/* Keep sigv4_status_to_string() and sigv4_status_reason() in sync. */
enum sigv4_status {
	SIGV4_OK = 0,
	SIGV4_NEED_BODY,     /* no x-amz-content-sha256: the body's hash
				is signed, so the body is needed */
	SIGV4_MALFORMED,     /* the Authorization cannot be parsed */
	SIGV4_UNSUPPORTED,   /* another algorithm (SigV4a), a trailer
				upload, no X-Amz-Date */
	SIGV4_NOT_SIGNED,    /* a header that must be signed is not
				(host, x-amz-date, the session token) */
	SIGV4_MISSING,       /* a signed header is absent */
	SIGV4_TOKEN,         /* the session token is not the placeholder,
				or is absent where the real credentials
				need one */
	SIGV4_MISMATCH,      /* the signature does not verify with the
				placeholder secret */
	SIGV4_CHUNK,         /* a chunk is malformed or its signature does
				not verify */
	SIGV4_SIGV4A,        /* a SigV4a (AWS4-ECDSA-P256-SHA256) streaming
				upload: not re-signed */
	SIGV4_TRAILER,       /* a signed trailer is malformed or its
				signature does not verify */
	SIGV4_STATUS_COUNT
};

const char *sigv4_status_to_string(enum sigv4_status s);
const char *sigv4_status_reason(enum sigv4_status s);

struct sigv4_resign {
	struct sigv4_auth auth;         /* the agent's */
	char *authorization;            /* the value to send (malloc'd) */
	char *token;                    /* X-Amz-Security-Token to send
					   (malloc'd: the real token), or
					   NULL when the request has none */
	bool chunked;                   /* a signed aws-chunked body */
	bool trailer;                   /* ... ending in signed trailers
					   (STREAMING-AWS4-HMAC-SHA256-
					   PAYLOAD-TRAILER) */
	bool s3;
	char amz_date[17];
	char scope[160];
	uint8_t ph_key[32], real_key[32];
	char ph_prev[SIGV4_HEX_LEN + 1], real_prev[SIGV4_HEX_LEN + 1];
	size_t chunks;                  /* chunks re-signed so far */
};

/* Verifies @m, whose Authorization names @ph's key id, with @ph's secret,
 * and signs it with @real's (SigV4, or SigV4a with the keys derived from
 * them; a SigV4a signature is randomised, and its length may differ):
 * the new Authorization differs only in the key id and the signature; the X-Amz-Security-Token field, when present, must
 * be @ph's token (and is present when @real has one) and becomes @real's.
 * @payload_hash: the body's SHA-256 in hex, for a request without
 * x-amz-content-sha256 (else NULL). @out is overwritten; free it with
 * sigv4_resign_free() whatever the status. */
enum sigv4_status sigv4_resign_head(const struct sigv4_msg *m, const char *payload_hash,
				    const struct sigv4_creds *ph,
				    const struct sigv4_creds *real,
				    struct sigv4_resign *out);

/* Verifies every chunk signature of an aws-chunked body in place (@body,
 * @len bytes: "HEX;chunk-signature=SIG\r\nDATA\r\n"..., the final chunk of
 * size 0 and "\r\n") with the placeholder chain and overwrites each with
 * the real chain's (same length: the body keeps its length). With signed
 * trailers (rs->trailer) the final chunk "0;chunk-signature=SIG\r\n" is
 * followed by trailer fields "name:value\r\n" and
 * "x-amz-trailer-signature:SIG\r\n\r\n": that signature (over the
 * fields, chained on the final chunk's) is verified and replaced too.
 * Returns SIGV4_OK, SIGV4_CHUNK or SIGV4_TRAILER (the body is then in an
 * unspecified state). */
enum sigv4_status sigv4_resign_chunks(struct sigv4_resign *rs, char *body, size_t len);

void sigv4_resign_free(struct sigv4_resign *rs);

#endif /* AIRLOCK_SIGV4_H */
