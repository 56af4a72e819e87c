/* SPDX-License-Identifier: Apache-2.0
 * tlog.c - checkpoints, signed notes and cosignatures (see tlog.h).
 *
 * DOC: Theory of Operation
 *
 * The texts follow the C2SP specifications byte for byte, so that any
 * witness or verifier written for them (Go's sumdb/note, litewitness, a
 * few lines of Python) reads airlock's checkpoints:
 * - tlog-checkpoint: the origin line, the tree size in decimal, the root
 *   hash in base64, each ending with a newline;
 * - signed-note: the body, an empty line, then one line per signature,
 *   "— " (U+2014 and a space), the key name, a space and the base64 of
 *   the 4-byte key ID and the signature; an Ed25519 key's ID is the
 *   first four bytes of SHA-256(name || "\n" || 0x01 || public key);
 * - tlog-cosignature: the same line with type 0x04 in the key ID, and an
 *   8-byte big-endian timestamp before the signature, which covers
 *   "cosignature/v1\ntime T\n" followed by the checkpoint body.
 */
#include "tlog.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/err.h>

#include "util.h"

static const char sig_dash[] = "\xe2\x80\x94 "; /* U+2014 and a space */

bool tlog_key_name_valid(const char *name)
{
	const unsigned char *p = (const unsigned char *)name;

	if (!*p)
		return false;
	for (; *p; p++)
		if (*p <= 0x20 || *p >= 0x7f || *p == '+')
			return false;
	return true;
}

void tlog_key_id(const char *name, uint8_t type, const uint8_t pub[32],
		 uint8_t out[4])
{
	EVP_MD_CTX *ctx = EVP_MD_CTX_new();
	uint8_t md[32];
	unsigned int n = 0;

	ASSERT(ctx);
	ASSERT(EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) == 1 &&
	       EVP_DigestUpdate(ctx, name, strlen(name)) == 1 &&
	       EVP_DigestUpdate(ctx, "\n", 1) == 1 &&
	       EVP_DigestUpdate(ctx, &type, 1) == 1 &&
	       EVP_DigestUpdate(ctx, pub, 32) == 1 &&
	       EVP_DigestFinal_ex(ctx, md, &n) == 1);
	EVP_MD_CTX_free(ctx);
	memcpy(out, md, 4);
}

char *tlog_b64(const uint8_t *data, size_t len)
{
	char *out = util_xmalloc(4 * ((len + 2) / 3) + 1);

	EVP_EncodeBlock((unsigned char *)out, data, (int)len);
	return out;
}

int tlog_unb64(const char *s, size_t slen, uint8_t *out, size_t max)
{
	uint8_t *tmp;
	char *again;
	size_t n;
	int got, rc = -1;

	if (slen == 0 || slen % 4 || slen / 4 * 3 > max + 2)
		return -1;
	tmp = util_xmalloc(slen / 4 * 3);
	got = EVP_DecodeBlock(tmp, (const unsigned char *)s, (int)slen);
	if (got != (int)(slen / 4 * 3))
		goto out;
	n = (size_t)got;
	if (s[slen - 1] == '=')
		n -= s[slen - 2] == '=' ? 2 : 1;
	if (n > max)
		goto out;
	/* canonical only: the one encoding of these bytes */
	again = tlog_b64(tmp, n);
	if (strlen(again) == slen && memcmp(again, s, slen) == 0) {
		memcpy(out, tmp, n);
		rc = (int)n;
	}
	free(again);
out:
	free(tmp);
	return rc;
}

char *tlog_checkpoint_body(const char *origin, uint64_t size, const merkle_hash root)
{
	char *b64 = tlog_b64(root, MERKLE_HASH_LEN);
	char *body = util_xasprintf("%s\n%" PRIu64 "\n%s\n", origin, size, b64);

	free(b64);
	return body;
}

static bool ed25519_sign(EVP_PKEY *key, const void *msg, size_t len, uint8_t sig[64])
{
	EVP_MD_CTX *ctx = EVP_MD_CTX_new();
	size_t siglen = 64;
	bool ok = ctx && EVP_DigestSignInit(ctx, NULL, NULL, NULL, key) == 1 &&
		  EVP_DigestSign(ctx, sig, &siglen, msg, len) == 1 && siglen == 64;

	if (!ok)
		ERR_clear_error();
	EVP_MD_CTX_free(ctx);
	return ok;
}

static bool ed25519_verify(const uint8_t pub[32], const void *msg, size_t len,
			   const uint8_t sig[64])
{
	EVP_PKEY *key = EVP_PKEY_new_raw_public_key(EVP_PKEY_ED25519, NULL, pub, 32);
	EVP_MD_CTX *ctx = EVP_MD_CTX_new();
	bool ok = key && ctx && EVP_DigestVerifyInit(ctx, NULL, NULL, NULL, key) == 1 &&
		  EVP_DigestVerify(ctx, sig, 64, msg, len) == 1;

	if (!ok)
		ERR_clear_error();
	EVP_MD_CTX_free(ctx);
	EVP_PKEY_free(key);
	return ok;
}

static bool raw_public(EVP_PKEY *key, uint8_t pub[32])
{
	size_t n = 32;

	if (EVP_PKEY_get_raw_public_key(key, pub, &n) != 1 || n != 32) {
		ERR_clear_error();
		return false;
	}
	return true;
}

/* "— NAME BASE64(BLOB)\n" */
static char *sig_line(const char *name, const uint8_t *blob, size_t len)
{
	char *b64 = tlog_b64(blob, len);
	char *line = util_xasprintf("%s%s %s\n", sig_dash, name, b64);

	free(b64);
	return line;
}

char *tlog_note_sign(EVP_PKEY *key, const char *name, const char *body)
{
	uint8_t pub[32], blob[4 + 64];
	char *line, *note;

	if (!tlog_key_name_valid(name) || !raw_public(key, pub))
		return NULL;
	tlog_key_id(name, TLOG_SIG_ED25519, pub, blob);
	if (!ed25519_sign(key, body, strlen(body), blob + 4))
		return NULL;
	line = sig_line(name, blob, sizeof(blob));
	note = util_xasprintf("%s\n%s", body, line);
	free(line);
	return note;
}

static char *cosig_message(const char *body, size_t body_len, uint64_t time, size_t *len)
{
	char *msg = util_xasprintf("cosignature/v1\ntime %" PRIu64 "\n%.*s", time,
				   (int)body_len, body);

	*len = strlen(msg);
	return msg;
}

char *tlog_cosign(EVP_PKEY *key, const char *name, const char *body, uint64_t time)
{
	uint8_t pub[32], blob[4 + 8 + 64];
	size_t len;
	char *msg;
	bool ok;
	int i;

	if (!tlog_key_name_valid(name) || !raw_public(key, pub))
		return NULL;
	tlog_key_id(name, TLOG_SIG_COSIGNATURE_V1, pub, blob);
	for (i = 0; i < 8; i++)
		blob[4 + i] = (uint8_t)(time >> (56 - 8 * i));
	msg = cosig_message(body, strlen(body), time, &len);
	ok = ed25519_sign(key, msg, len, blob + 12);
	free(msg);
	return ok ? sig_line(name, blob, sizeof(blob)) : NULL;
}

void tlog_checkpoint_free(struct tlog_checkpoint *c)
{
	free(c->origin);
	free(c->body);
	free(c->sigs);
	memset(c, 0, sizeof(*c));
}

__attribute__((format(printf, 3, 4))) static bool
bad(char *why, size_t whylen, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(why, whylen, fmt, ap);
	va_end(ap);
	return false;
}

bool tlog_checkpoint_parse(const char *note, size_t len, struct tlog_checkpoint *out,
			   char *why, size_t whylen)
{
	const char *l1, *l2, *l3, *end, *sep = NULL, *p;
	char num[24];
	size_t i;

	memset(out, 0, sizeof(*out));
	if (memchr(note, '\0', len))
		return bad(why, whylen, "the checkpoint holds a NUL byte");
	/* the body ends at the first empty line */
	for (p = note; p + 1 < note + len; p++)
		if (p[0] == '\n' && p[1] == '\n') {
			sep = p;
			break;
		}
	if (!sep || len == 0 || note[len - 1] != '\n')
		return bad(why, whylen, "not a signed note (body, empty line, signatures)");
	end = sep + 1; /* the body with its last newline */
	l1 = memchr(note, '\n', (size_t)(end - note));
	l2 = l1 ? memchr(l1 + 1, '\n', (size_t)(end - l1 - 1)) : NULL;
	l3 = l2 ? memchr(l2 + 1, '\n', (size_t)(end - l2 - 1)) : NULL;
	if (!l3 || l1 == note)
		return bad(why, whylen, "a checkpoint has an origin, a size and a root hash");
	if (l3 + 1 != end)
		return bad(why, whylen, "the checkpoint has extension lines");
	if ((size_t)(l2 - l1 - 1) == 0 || (size_t)(l2 - l1 - 1) >= sizeof(num))
		return bad(why, whylen, "the tree size is not a decimal number");
	memcpy(num, l1 + 1, (size_t)(l2 - l1 - 1));
	num[l2 - l1 - 1] = '\0';
	for (i = 0; num[i]; i++)
		if (num[i] < '0' || num[i] > '9')
			return bad(why, whylen, "the tree size is not a decimal number");
	if ((num[0] == '0' && num[1]) || strlen(num) > 19)
		return bad(why, whylen, "the tree size is not a decimal number");
	out->size = strtoull(num, NULL, 10);
	if (tlog_unb64(l2 + 1, (size_t)(l3 - l2 - 1), out->root, MERKLE_HASH_LEN) !=
	    MERKLE_HASH_LEN)
		return bad(why, whylen, "the root hash is not base64 of 32 bytes");
	out->origin = util_xstrndup(note, (size_t)(l1 - note));
	out->body = util_xstrndup(note, (size_t)(end - note));
	out->body_len = (size_t)(end - note);
	out->sigs = util_xstrndup(end + 1, len - (size_t)(end + 1 - note));
	if (!out->sigs[0]) {
		tlog_checkpoint_free(out);
		return bad(why, whylen, "the note has no signature");
	}
	return true;
}

/* Calls @fn on each signature line of @c by @name whose decoded blob has
 * @blob_len bytes and key ID @id; true as soon as @fn says so. */
static bool each_sig(const struct tlog_checkpoint *c, const char *name,
		     const uint8_t id[4], size_t blob_len,
		     bool (*fn)(const uint8_t *blob, void *arg), void *arg)
{
	const char *p = c->sigs;
	size_t nlen = strlen(name);
	uint8_t blob[128];

	while (*p) {
		const char *nl = strchr(p, '\n');

		if (!nl)
			break;
		if (strncmp(p, sig_dash, strlen(sig_dash)) == 0 &&
		    strncmp(p + strlen(sig_dash), name, nlen) == 0 &&
		    p[strlen(sig_dash) + nlen] == ' ') {
			const char *b64 = p + strlen(sig_dash) + nlen + 1;

			if (tlog_unb64(b64, (size_t)(nl - b64), blob, sizeof(blob)) ==
				    (int)blob_len &&
			    memcmp(blob, id, 4) == 0 && fn(blob, arg))
				return true;
		}
		p = nl + 1;
	}
	return false;
}

struct note_arg {
	const struct tlog_checkpoint *c;
	const uint8_t *pub;
	uint64_t time;
};

static bool note_sig_ok(const uint8_t *blob, void *arg)
{
	struct note_arg *a = arg;

	return ed25519_verify(a->pub, a->c->body, a->c->body_len, blob + 4);
}

bool tlog_note_verify(const struct tlog_checkpoint *c, const char *name,
		      const uint8_t pub[32])
{
	struct note_arg a = { c, pub, 0 };
	uint8_t id[4];

	tlog_key_id(name, TLOG_SIG_ED25519, pub, id);
	return each_sig(c, name, id, 4 + 64, note_sig_ok, &a);
}

static bool cosig_ok(const uint8_t *blob, void *arg)
{
	struct note_arg *a = arg;
	uint64_t t = 0;
	size_t len;
	char *msg;
	bool ok;
	int i;

	for (i = 0; i < 8; i++)
		t = (t << 8) | blob[4 + i];
	msg = cosig_message(a->c->body, a->c->body_len, t, &len);
	ok = ed25519_verify(a->pub, msg, len, blob + 12);
	free(msg);
	if (ok)
		a->time = t;
	return ok;
}

bool tlog_cosig_verify(const struct tlog_checkpoint *c, const char *name,
		       const uint8_t pub[32], uint64_t *time)
{
	struct note_arg a = { c, pub, 0 };
	uint8_t id[4];

	tlog_key_id(name, TLOG_SIG_COSIGNATURE_V1, pub, id);
	if (!each_sig(c, name, id, 4 + 8 + 64, cosig_ok, &a))
		return false;
	if (time)
		*time = a.time;
	return true;
}
