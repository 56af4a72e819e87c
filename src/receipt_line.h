/* SPDX-License-Identifier: Apache-2.0
 * receipt_line.h - what a receipt line is made of, shared by the modules
 * that write, verify and vet lines (receipt_writer.c, receipt_verify.c,
 * keeper.c): the member order, the formats of each member, text cleaning,
 * hashing and the signature's framing. Not an API for other modules:
 * they use receipt.h.
 */
#ifndef AIRLOCK_RECEIPT_LINE_H
#define AIRLOCK_RECEIPT_LINE_H

#include <jansson.h>
#include <openssl/evp.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "receipt.h"

#define RECEIPT_ED25519_KEY_LEN 32
#define RECEIPT_ED25519_SIG_LEN 64
#define RECEIPT_PUBKEY_B64_LEN 44
#define RECEIPT_SIG_B64_LEN 88
#define RECEIPT_SHA256_HEX_LEN 64
#define RECEIPT_TYPE_MAX 64

/* A line ends with this, the signature and `"}`: the signed bytes are the
 * line with that tail cut off and `}` put back. */
extern const char receipt_sig_open[];
#define RECEIPT_SIG_OPEN_LEN 8
#define RECEIPT_SIG_TAIL_LEN (RECEIPT_SIG_OPEN_LEN + RECEIPT_SIG_B64_LEN + 2)

/* "prev" of a stream's first line: 64 zeros. */
extern const char receipt_zero_prev[RECEIPT_SHA256_HEX_LEN + 1];

/* The members of a line, in the one order they appear. */
enum receipt_member {
	RECEIPT_MEMBER_V = 0,
	RECEIPT_MEMBER_SEQ,
	RECEIPT_MEMBER_TS,
	RECEIPT_MEMBER_SESSION,
	RECEIPT_MEMBER_TYPE,
	RECEIPT_MEMBER_DECISION,
	RECEIPT_MEMBER_POINT,
	RECEIPT_MEMBER_RULE,
	RECEIPT_MEMBER_POLICY,
	RECEIPT_MEMBER_SUBJECT,
	RECEIPT_MEMBER_REASON,
	RECEIPT_MEMBER_PREV,
	RECEIPT_MEMBER_SIG,
	RECEIPT_MEMBER_COUNT
};

const char *receipt_member_to_string(enum receipt_member m);

/* The enum value named @s; false for any other text. */
bool receipt_decision_from_string(const char *s, enum receipt_decision *out);
bool receipt_point_from_string(const char *s, enum receipt_point *out);

/* Length of the well-formed UTF-8 sequence at @s (@n > 0 bytes
 * available), or 0 when it is not one (overlong forms and surrogates
 * included). */
size_t receipt_utf8_seq(const unsigned char *s, size_t n);

/* Is the NUL-terminated @s well-formed UTF-8? */
bool receipt_utf8_valid(const char *s);

/* A malloc'd copy of @s with each byte that does not start a well-formed
 * UTF-8 sequence replaced by U+FFFD, cut on a character boundary to at
 * most @max bytes. The caller frees it. */
char *receipt_utf8_clean(const char *s, size_t max);

/* @len bytes of @s: 1-RECEIPT_TYPE_MAX characters of [a-z0-9._-]. */
bool receipt_type_valid(const char *s, size_t len);

/* 64 lowercase hex digits. */
bool receipt_hex64_valid(const char *s, size_t len);

/* "sha256:" and 64 lowercase hex digits. */
bool receipt_digest_valid(const char *s, size_t len);

/* "YYYY-MM-DDTHH:MM:SS.mmmZ" naming a real date, as util_rfc3339_now()
 * writes it. */
bool receipt_ts_valid(const char *s, size_t len);

/* Standard base64 with padding decoding to exactly @outlen (at most 64)
 * bytes, in canonical form only (the one encoding EVP_EncodeBlock
 * produces). */
bool receipt_b64_decode_exact(const char *s, size_t slen, uint8_t *out,
			      size_t outlen);

/* Lowercase hex SHA-256 of @len bytes. */
void receipt_sha256_hex(const void *data, size_t len,
			char out[RECEIPT_SHA256_HEX_LEN + 1]);

/* A new object holding @obj's members (referenced, not copied) with its
 * keys in strcmp order. */
json_t *receipt_sorted_copy(json_t *obj);

/* session.end's counts: the number under @type (0 if absent); add @n. */
json_int_t receipt_count_of(json_t *counts, const char *type);
void receipt_count_add(json_t *counts, const char *type, json_int_t n);

/* Is @key an Ed25519 key? Its 32 raw public bytes into @out. */
bool receipt_key_is_ed25519(EVP_PKEY *key);
bool receipt_key_raw_public(EVP_PKEY *key, uint8_t out[RECEIPT_ED25519_KEY_LEN]);

/* Appends to @buf (*@len bytes used of *@cap, grown with realloc) the JSON
 * string of the UTF-8 text @s, escaped byte for byte as jansson's
 * json_dumps() escapes it without flags: '"', '\\' and the control
 * characters, those with a short form as \b \f \n \r \t, the others as
 * \u00XX (uppercase hex); everything else as it is. */
void receipt_json_str(char **buf, size_t *len, size_t *cap, const char *s);

/* Are the @len bytes at @s a JSON object exactly as jansson prints what
 * it reads from them (json_loadb() with JSON_REJECT_DUPLICATES, then
 * json_dumps() with JSON_COMPACT and JSON_REAL_PRECISION(15), as the
 * writer prints a subject)? True only for a subset whose printing is
 * certain: compact, printable-ASCII strings with jansson's escapes,
 * integers, no reals, no duplicate keys, 16 levels and 32 keys an object
 * at most. False says nothing: such bytes must go through jansson. */
bool receipt_json_canonical(const char *s, size_t len);

/* snprintf into @err when it is not NULL. */
__attribute__((format(printf, 3, 4))) void
receipt_set_err(char *err, size_t errlen, const char *fmt, ...);

#endif /* AIRLOCK_RECEIPT_LINE_H */
