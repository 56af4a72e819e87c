/* SPDX-License-Identifier: Apache-2.0
 * tlog.h - the transparency-log texts of a receipt stream: C2SP
 * tlog-checkpoint bodies, C2SP signed-note signatures (Ed25519, type 0x01)
 * and C2SP tlog-cosignature (cosignature/v1, type 0x04) lines.
 */
#ifndef AIRLOCK_TLOG_H
#define AIRLOCK_TLOG_H

#include <openssl/evp.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "merkle.h"

/* A stream's origin is this prefix and its session id; it is also the
 * key name of the session key's note signature. */
#define TLOG_ORIGIN_PREFIX "airlock/"
#define TLOG_SIG_ED25519 0x01
#define TLOG_SIG_COSIGNATURE_V1 0x04

/* May @name be a note key name (non-empty, printable ASCII without
 * spaces or '+')? */
bool tlog_key_name_valid(const char *name);

/* The key ID: the first 4 bytes of SHA-256(name || 0x0A || type || pub). */
void tlog_key_id(const char *name, uint8_t type, const uint8_t pub[32],
		 uint8_t out[4]);

/* "ORIGIN\nSIZE\nBASE64(ROOT)\n", malloc'd. */
char *tlog_checkpoint_body(const char *origin, uint64_t size, const merkle_hash root);

/* The note of @body signed by @key under @name: body, an empty line and
 * "— NAME BASE64(KEYID || SIG)\n". NULL when signing failed. */
char *tlog_note_sign(EVP_PKEY *key, const char *name, const char *body);

/* A parsed checkpoint note. */
struct tlog_checkpoint {
	char *origin;
	uint64_t size;
	merkle_hash root;
	char *body;         /* the signed text, through its last newline */
	size_t body_len;
	char *sigs;         /* the signature lines */
};

/* Parses a note holding a checkpoint (extension lines are refused: a
 * receipt checkpoint has none). False with the reason in @why. */
bool tlog_checkpoint_parse(const char *note, size_t len, struct tlog_checkpoint *out,
			   char *why, size_t whylen);
void tlog_checkpoint_free(struct tlog_checkpoint *c);

/* Is there a signature line by @name whose key ID is @pub's and whose
 * Ed25519 signature over the body verifies with @pub? */
bool tlog_note_verify(const struct tlog_checkpoint *c, const char *name,
		      const uint8_t pub[32]);

/* A cosignature/v1 line by witness @name (key @key) over @body at @time
 * (seconds since the epoch): "— NAME BASE64(KEYID || TIME(8, big
 * endian) || SIG)\n", malloc'd; NULL when signing failed. */
char *tlog_cosign(EVP_PKEY *key, const char *name, const char *body, uint64_t time);

/* Does @c carry a valid cosignature/v1 by @name with @pub? Its time into
 * *@time. */
bool tlog_cosig_verify(const struct tlog_checkpoint *c, const char *name,
		       const uint8_t pub[32], uint64_t *time);

/* Standard base64 (with padding) of @len bytes, malloc'd; and its
 * canonical decoding into at most @max bytes (returns the length, or -1). */
char *tlog_b64(const uint8_t *data, size_t len);
int tlog_unb64(const char *s, size_t slen, uint8_t *out, size_t max);

#endif /* AIRLOCK_TLOG_H */
