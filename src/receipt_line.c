/* SPDX-License-Identifier: Apache-2.0
 * receipt_line.c - the parts of a receipt line (see receipt_line.h).
 *
 * DOC: Theory of Operation
 *
 * Every decision an enforcement point makes becomes one line of JSON: a
 * compact object whose members come in a fixed order, the last two being
 * "prev" and "sig". The stream is made tamper-evident by two independent
 * mechanisms, both of which an auditor can recompute with stock tools
 * (sha256sum, openssl pkeyutl -rawin) without trusting this code:
 *
 * - the chain: "prev" is the SHA-256 of the previous line's exact bytes
 *   (without its newline), 64 zeros at seq 0. Removing, inserting or
 *   reordering lines breaks it, and so does "seq", which counts 0, 1, 2...
 * - the signature: "sig" is Ed25519 over the line's exact bytes with the
 *   final `,"sig":"..."` removed, i.e. the bytes `{...,"prev":"..."}`. The
 *   signed bytes are what the writer serialised, never a re-serialisation,
 *   so verification does not depend on how any JSON library formats.
 *
 * A stream begins with session.start, whose subject carries the signing
 * public key, and ends with session.end, whose subject counts the lines of
 * each type (including both of these) so that a stream cut short or with
 * lines dropped from the end is detected. A session that could not start
 * (enforce mode on a host without a capability) opens its stream with
 * session.refused instead, which carries the key too and may be followed
 * only by session.end. The events path is appended to
 * across sessions, so one file may hold several streams back to back: a
 * new one may begin (seq 0, session.start, prev all zeros) only right after
 * a session.end. Each stream is its own chain, so removing a whole session
 * from such a file is not detected by the chain: an auditor who needs that
 * keeps one file per session.
 *
 * Trust: without a pinned key, each stream is verified against the key its
 * own session.start names. That proves the stream was not altered after it
 * was written (integrity) but not who wrote it; `verify --pubkey` pins the
 * key that must have signed every line (authenticity).
 *
 * The receipt modules: this one (what a line is made of: member names and
 * order, the format of each member, UTF-8 cleaning, hashing, the
 * signature's framing), receipt_key.c (signing keys and `airlock keygen`),
 * receipt_writer.c (one stream's chain and its single writer) and
 * receipt_verify.c (`airlock verify`). The writer and the verifier share
 * the formats below, so what one writes the other accepts; the key holder
 * (keeper.c) vets a less trusted process's requests with them too.
 */
#include "receipt_line.h"

#include <assert.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

const char receipt_sig_open[] = ",\"sig\":\"";
static_assert(sizeof(receipt_sig_open) - 1 == RECEIPT_SIG_OPEN_LEN,
	      "RECEIPT_SIG_OPEN_LEN is the length of receipt_sig_open");

const char receipt_zero_prev[RECEIPT_SHA256_HEX_LEN + 1] =
	"0000000000000000000000000000000000000000000000000000000000000000";

static const char *const decision_names[] = {
	[RECEIPT_ALLOW] = "allow",
	[RECEIPT_BLOCK] = "block",
	[RECEIPT_WOULD_BLOCK] = "would_block",
	[RECEIPT_INFO] = "info",
};
static_assert(ARRAY_SIZE(decision_names) == RECEIPT_DECISION_COUNT,
	      "decision_names matches enum receipt_decision");

static const char *const point_names[] = {
	[RECEIPT_POINT_SUPERVISOR] = "supervisor",
	[RECEIPT_POINT_SANDBOX] = "sandbox",
	[RECEIPT_POINT_EGRESS_PROXY] = "egress-proxy",
	[RECEIPT_POINT_BROKER] = "broker",
	[RECEIPT_POINT_GIT] = "git",
};
static_assert(ARRAY_SIZE(point_names) == RECEIPT_POINT_COUNT,
	      "point_names matches enum receipt_point");

static const char *const member_names[] = {
	[RECEIPT_MEMBER_V] = "v",
	[RECEIPT_MEMBER_SEQ] = "seq",
	[RECEIPT_MEMBER_TS] = "ts",
	[RECEIPT_MEMBER_SESSION] = "session",
	[RECEIPT_MEMBER_TYPE] = "type",
	[RECEIPT_MEMBER_DECISION] = "decision",
	[RECEIPT_MEMBER_POINT] = "point",
	[RECEIPT_MEMBER_RULE] = "rule",
	[RECEIPT_MEMBER_POLICY] = "policy",
	[RECEIPT_MEMBER_SUBJECT] = "subject",
	[RECEIPT_MEMBER_REASON] = "reason",
	[RECEIPT_MEMBER_PREV] = "prev",
	[RECEIPT_MEMBER_SIG] = "sig",
};
static_assert(ARRAY_SIZE(member_names) == RECEIPT_MEMBER_COUNT,
	      "member_names matches enum receipt_member");

const char *receipt_decision_to_string(enum receipt_decision d)
{
	ASSERT((unsigned)d < RECEIPT_DECISION_COUNT);
	return decision_names[d];
}

const char *receipt_point_to_string(enum receipt_point p)
{
	ASSERT((unsigned)p < RECEIPT_POINT_COUNT);
	return point_names[p];
}

/* The index of @s in @names, or -1. */
static int index_of(const char *s, const char *const *names, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (strcmp(s, names[i]) == 0)
			return (int)i;
	return -1;
}

const char *receipt_member_to_string(enum receipt_member m)
{
	ASSERT((unsigned)m < RECEIPT_MEMBER_COUNT);
	return member_names[m];
}

bool receipt_decision_from_string(const char *s, enum receipt_decision *out)
{
	int i = index_of(s, decision_names, ARRAY_SIZE(decision_names));

	if (i < 0)
		return false;
	*out = (enum receipt_decision)i;
	return true;
}

bool receipt_point_from_string(const char *s, enum receipt_point *out)
{
	int i = index_of(s, point_names, ARRAY_SIZE(point_names));

	if (i < 0)
		return false;
	*out = (enum receipt_point)i;
	return true;
}

void receipt_set_err(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	if (!err || errlen == 0)
		return;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

/* Length of the well-formed UTF-8 sequence at @s (@n bytes available), or 0
 * when it is not one (overlong forms and surrogates included). */
size_t receipt_utf8_seq(const unsigned char *s, size_t n)
{
	uint32_t c;
	size_t len, i;

	if (s[0] < 0x80)
		return 1;
	if (s[0] >= 0xc2 && s[0] <= 0xdf) {
		len = 2;
		c = s[0] & 0x1f;
	} else if ((s[0] & 0xf0) == 0xe0) {
		len = 3;
		c = s[0] & 0x0f;
	} else if (s[0] >= 0xf0 && s[0] <= 0xf4) {
		len = 4;
		c = s[0] & 0x07;
	} else {
		return 0;
	}
	if (n < len)
		return 0;
	for (i = 1; i < len; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		c = c << 6 | (s[i] & 0x3f);
	}
	if (len == 3 && (c < 0x800 || (c >= 0xd800 && c <= 0xdfff)))
		return 0;
	if (len == 4 && (c < 0x10000 || c > 0x10ffff))
		return 0;
	return len;
}

bool receipt_utf8_valid(const char *s)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t n = strlen(s);

	while (n > 0) {
		size_t k = receipt_utf8_seq(p, n);

		if (k == 0)
			return false;
		p += k;
		n -= k;
	}
	return true;
}

/* A malloc'd copy of @s with each byte that does not start a well-formed
 * UTF-8 sequence replaced by U+FFFD, cut on a character boundary to at most
 * @max bytes. */
char *receipt_utf8_clean(const char *s, size_t max)
{
	static const char replacement[] = "\xef\xbf\xbd";
	const unsigned char *p = (const unsigned char *)s;
	size_t n = strlen(s), used = 0;
	char *out = util_xmalloc(max + 1);

	while (n > 0) {
		size_t k = receipt_utf8_seq(p, n);
		const void *piece = k ? (const void *)p : replacement;
		size_t plen = k ? k : sizeof(replacement) - 1;

		if (used + plen > max)
			break;
		memcpy(out + used, piece, plen);
		used += plen;
		p += k ? k : 1;
		n -= k ? k : 1;
	}
	out[used] = '\0';
	return out;
}

bool receipt_type_valid(const char *s, size_t len)
{
	size_t i;

	if (len == 0 || len > RECEIPT_TYPE_MAX)
		return false;
	for (i = 0; i < len; i++) {
		char c = s[i];

		if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
		      c == '.' || c == '_' || c == '-'))
			return false;
	}
	return true;
}

bool receipt_hex64_valid(const char *s, size_t len)
{
	size_t i;

	if (len != RECEIPT_SHA256_HEX_LEN)
		return false;
	for (i = 0; i < len; i++)
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
			return false;
	return true;
}

bool receipt_digest_valid(const char *s, size_t len)
{
	return len == 7 + RECEIPT_SHA256_HEX_LEN && memcmp(s, "sha256:", 7) == 0 &&
	       receipt_hex64_valid(s + 7, RECEIPT_SHA256_HEX_LEN);
}

static unsigned digits(const char *s, size_t n)
{
	unsigned v = 0;
	size_t i;

	for (i = 0; i < n; i++)
		v = v * 10 + (unsigned)(s[i] - '0');
	return v;
}

/* "YYYY-MM-DDTHH:MM:SS.mmmZ", as util_rfc3339_now() writes it. */
bool receipt_ts_valid(const char *s, size_t len)
{
	static const char pattern[] = "dddd-dd-ddTdd:dd:dd.dddZ";
	static const unsigned mdays[] = {31, 29, 31, 30, 31, 30,
					 31, 31, 30, 31, 30, 31};
	unsigned year, mon, day;
	size_t i;

	if (len != sizeof(pattern) - 1)
		return false;
	for (i = 0; i < len; i++) {
		if (pattern[i] == 'd' ? (s[i] < '0' || s[i] > '9')
				      : s[i] != pattern[i])
			return false;
	}
	year = digits(s, 4);
	mon = digits(s + 5, 2);
	day = digits(s + 8, 2);
	if (mon < 1 || mon > 12 || day < 1 || day > mdays[mon - 1])
		return false;
	if (mon == 2 && day == 29 &&
	    !(year % 4 == 0 && (year % 100 != 0 || year % 400 == 0)))
		return false;
	return digits(s + 11, 2) <= 23 && digits(s + 14, 2) <= 59 &&
	       digits(s + 17, 2) <= 60;
}

/* Standard base64 with padding of exactly @outlen bytes, in canonical form
 * only (the one encoding EVP_EncodeBlock produces). */
bool receipt_b64_decode_exact(const char *s, size_t slen, uint8_t *out,
			     size_t outlen)
{
	uint8_t tmp[3 * (RECEIPT_SIG_B64_LEN / 4)];
	char again[RECEIPT_SIG_B64_LEN + 1];
	bool ok = false;

	ASSERT(outlen <= RECEIPT_ED25519_SIG_LEN);
	if (slen != 4 * ((outlen + 2) / 3))
		goto out;
	if (EVP_DecodeBlock(tmp, (const unsigned char *)s, (int)slen) !=
	    (int)(3 * (slen / 4)))
		goto out;
	EVP_EncodeBlock((unsigned char *)again, tmp, (int)outlen);
	if (memcmp(again, s, slen) != 0)
		goto out;
	memcpy(out, tmp, outlen);
	ok = true;
out:
	return ok;
}

void receipt_sha256_hex(const void *data, size_t len,
		       char out[RECEIPT_SHA256_HEX_LEN + 1])
{
	/* Fetched once: an implicit fetch per line (EVP_sha256()) showed up
	 * in the proxy's profile. Never freed: it lives as long as the
	 * process, like OpenSSL's own tables. */
	static EVP_MD *sha256;
	static EVP_MD_CTX *ctx; /* kept too: EVP_Digest() makes one a call */
	uint8_t md[32];
	unsigned int mdlen = 0;

	if (!sha256)
		sha256 = EVP_MD_fetch(NULL, "SHA256", NULL);
	if (!ctx)
		ctx = EVP_MD_CTX_new();
	ASSERT(sha256 && ctx);
	ASSERT(EVP_DigestInit_ex(ctx, sha256, NULL) == 1 &&
	       EVP_DigestUpdate(ctx, data, len) == 1 &&
	       EVP_DigestFinal_ex(ctx, md, &mdlen) == 1);
	ASSERT(mdlen == sizeof(md));
	util_hex(md, sizeof(md), out);
}

static int cmp_key(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* A new object holding @obj's members (referenced, not copied) with its
 * keys in strcmp order. */
json_t *receipt_sorted_copy(json_t *obj)
{
	size_t n = json_object_size(obj), i = 0;
	const char **keys = util_xcalloc(n, sizeof(*keys));
	json_t *out = json_object(), *val;
	const char *key;

	ASSERT(out);
	json_object_foreach(obj, key, val)
		keys[i++] = key;
	qsort(keys, n, sizeof(*keys), cmp_key);
	for (i = 0; i < n; i++)
		ASSERT(json_object_set(out, keys[i], json_object_get(obj, keys[i])) == 0);
	free(keys);
	return out;
}

json_int_t receipt_count_of(json_t *counts, const char *type)
{
	return json_integer_value(json_object_get(counts, type));
}

void receipt_count_add(json_t *counts, const char *type, json_int_t n)
{
	ASSERT(json_object_set_new(counts, type,
				   json_integer(receipt_count_of(counts, type) + n)) == 0);
}

bool receipt_key_is_ed25519(EVP_PKEY *key)
{
	return key && EVP_PKEY_is_a(key, "ED25519");
}

bool receipt_key_raw_public(EVP_PKEY *key, uint8_t out[RECEIPT_ED25519_KEY_LEN])
{
	size_t len = RECEIPT_ED25519_KEY_LEN;

	return receipt_key_is_ed25519(key) &&
	       EVP_PKEY_get_raw_public_key(key, out, &len) == 1 &&
	       len == RECEIPT_ED25519_KEY_LEN;
}

static void put(char **buf, size_t *len, size_t *cap, const char *s, size_t n)
{
	if (*len + n + 1 > *cap) {
		*cap = *len + n + 1 > 2 * *cap ? *len + n + 1 : 2 * *cap;
		*buf = util_xrealloc(*buf, *cap);
	}
	memcpy(*buf + *len, s, n);
	*len += n;
	(*buf)[*len] = '\0';
}

void receipt_json_str(char **buf, size_t *len, size_t *cap, const char *s)
{
	const char *run = s;
	char esc[7];

	put(buf, len, cap, "\"", 1);
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;

		if (c != '"' && c != '\\' && c >= 0x20)
			continue;
		put(buf, len, cap, run, (size_t)(s - run));
		switch (c) {
		case '"': put(buf, len, cap, "\\\"", 2); break;
		case '\\': put(buf, len, cap, "\\\\", 2); break;
		case '\b': put(buf, len, cap, "\\b", 2); break;
		case '\f': put(buf, len, cap, "\\f", 2); break;
		case '\n': put(buf, len, cap, "\\n", 2); break;
		case '\r': put(buf, len, cap, "\\r", 2); break;
		case '\t': put(buf, len, cap, "\\t", 2); break;
		default:
			snprintf(esc, sizeof(esc), "\\u%04X", c);
			put(buf, len, cap, esc, 6);
			break;
		}
		run = s + 1;
	}
	put(buf, len, cap, run, (size_t)(s - run));
	put(buf, len, cap, "\"", 1);
}

/* --- canonical subjects ----------------------------------------------------- */

/* How deep and how wide a subject the fast path takes; anything beyond
 * is checked and re-serialised by jansson instead. */
#define CANON_DEPTH 16
#define CANON_KEYS 32

struct canon {
	const char *p, *end;
	int depth;
};

/* A string of printable ASCII with only the escapes jansson writes for
 * the characters it escapes (\" \\ \b \f \n \r \t): its span in *@s. */
static bool canon_string(struct canon *c, const char **s, size_t *n)
{
	const char *start;

	if (c->p >= c->end || *c->p != '"')
		return false;
	start = ++c->p;
	while (c->p < c->end) {
		unsigned char ch = (unsigned char)*c->p;

		if (ch == '"') {
			*s = start;
			*n = (size_t)(c->p - start);
			c->p++;
			return true;
		}
		if (ch < 0x20 || ch > 0x7e)
			return false; /* raw controls are invalid; UTF-8: jansson checks */
		if (ch == '\\') {
			if (c->end - c->p < 2 || !strchr("\"\\bfnrt", c->p[1]) || !c->p[1])
				return false; /* \u, \/ or anything else: not jansson's */
			c->p++;
		}
		c->p++;
	}
	return false;
}

/* -?(0|[1-9][0-9]*) of at most 18 digits (within json_int_t, printed back
 * alike); "-0", fractions and exponents are jansson's to judge. */
static bool canon_integer(struct canon *c)
{
	bool neg = c->p < c->end && *c->p == '-';
	const char *start;

	if (neg)
		c->p++;
	start = c->p;
	while (c->p < c->end && *c->p >= '0' && *c->p <= '9')
		c->p++;
	if (c->p == start || c->p - start > 18 || (*start == '0' && (neg || c->p - start > 1)))
		return false;
	return c->p == c->end || (*c->p != '.' && *c->p != 'e' && *c->p != 'E');
}

static bool canon_literal(struct canon *c, const char *lit)
{
	size_t n = strlen(lit);

	if ((size_t)(c->end - c->p) < n || memcmp(c->p, lit, n) != 0)
		return false;
	c->p += n;
	return true;
}

static bool canon_value(struct canon *c);

static bool canon_object(struct canon *c)
{
	const char *key[CANON_KEYS];
	size_t klen[CANON_KEYS], nkeys = 0, i;

	if (c->p >= c->end || *c->p != '{' || ++c->depth > CANON_DEPTH)
		return false;
	c->p++;
	if (c->p < c->end && *c->p == '}') {
		c->p++;
		c->depth--;
		return true;
	}
	for (;;) {
		if (nkeys == CANON_KEYS || !canon_string(c, &key[nkeys], &klen[nkeys]))
			return false;
		/* a duplicate, even spelt with other escapes: jansson refuses
		 * it or keeps one (compared as written; \" and \\ aside the
		 * escapes are distinct characters) */
		for (i = 0; i < nkeys; i++)
			if (klen[i] == klen[nkeys] && memcmp(key[i], key[nkeys], klen[i]) == 0)
				return false;
		nkeys++;
		if (c->p >= c->end || *c->p++ != ':' || !canon_value(c))
			return false;
		if (c->p >= c->end)
			return false;
		if (*c->p == '}') {
			c->p++;
			c->depth--;
			return true;
		}
		if (*c->p++ != ',')
			return false;
	}
}

static bool canon_array(struct canon *c)
{
	if (c->p >= c->end || *c->p != '[' || ++c->depth > CANON_DEPTH)
		return false;
	c->p++;
	if (c->p < c->end && *c->p == ']') {
		c->p++;
		c->depth--;
		return true;
	}
	for (;;) {
		if (!canon_value(c) || c->p >= c->end)
			return false;
		if (*c->p == ']') {
			c->p++;
			c->depth--;
			return true;
		}
		if (*c->p++ != ',')
			return false;
	}
}

static bool canon_value(struct canon *c)
{
	const char *s;
	size_t n;

	if (c->p >= c->end)
		return false;
	switch (*c->p) {
	case '{': return canon_object(c);
	case '[': return canon_array(c);
	case '"': return canon_string(c, &s, &n);
	case 't': return canon_literal(c, "true");
	case 'f': return canon_literal(c, "false");
	case 'n': return canon_literal(c, "null");
	default: return canon_integer(c);
	}
}

bool receipt_json_canonical(const char *s, size_t len)
{
	struct canon c = { s, s + len, 0 };

	return canon_object(&c) && c.p == c.end;
}
