/* SPDX-License-Identifier: Apache-2.0
 * sigv4.c - AWS Signature Version 4 and the broker's re-signing.
 *
 * DOC: Theory of Operation
 *
 * The secret access key of AWS is never sent: it signs. A placeholder
 * substituted into a header cannot work, so for a secret of kind "aws"
 * (SPEC §3.4) the agent holds placeholder credentials shaped like the real
 * ones, signs with them as it would with the real ones, and the proxy
 * checks that signature with the placeholder secret, then signs the same
 * canonical request with the real secret. The request that leaves differs
 * from the agent's only in the Authorization's key id and signature (and,
 * for temporary credentials, the X-Amz-Security-Token value).
 *
 * Verifying before re-signing is what keeps the proxy from being a signing
 * oracle for requests it never saw: what is re-signed is exactly what the
 * agent signed (every signed header, the path, the query, the payload
 * hash), so a request altered after signing, or assembled without the
 * placeholder secret, is refused.
 *
 * Canonicalisation follows the SigV4 rules: the method; the path (S3: as
 * sent, one encoding; other services: encoded once more); the query's
 * parameters decoded, encoded with the unreserved set and sorted by name,
 * then value; the signed headers' values trimmed, runs of white space
 * made one space, repeated fields joined with ','; the signed header
 * names; the payload hash (x-amz-content-sha256, or the body's SHA-256).
 * Where the agent's signer canonicalises otherwise, its signature simply
 * does not verify: refused, never forwarded with a guess.
 *
 * aws-chunked uploads (STREAMING-AWS4-HMAC-SHA256-PAYLOAD): the head's
 * signature seeds a chain; each chunk's signature signs the previous one
 * and the chunk's hash. Both chains are followed side by side, every
 * chunk's placeholder signature is verified and replaced by the real
 * chain's, of the same length, so the body keeps its length.
 *
 * SigV4a (AWS4-ECDSA-P256-SHA256, multi-region): the same canonical
 * request; the scope has no region (the X-Amz-Region-Set header says
 * where, signed like any other); the string to sign starts with the
 * algorithm's name; the signature is ECDSA P-256 over SHA-256 of it, DER
 * in hex, with a key derived from the key id and the secret
 * (sigv4a_private_key()). Verified with the placeholder's key, signed
 * with the real one's. Its streaming uploads
 * (STREAMING-AWS4-ECDSA-P256-SHA256-PAYLOAD) are refused.
 *
 * HMAC-SHA256 through OpenSSL 3's EVP_MAC; every key and derived key is
 * wiped after use.
 */
#include "sigv4.h"

#include <assert.h>
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/bn.h>
#include <openssl/ec.h>
#include <openssl/evp.h>
#include <openssl/obj_mac.h>
#include <openssl/param_build.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "util.h"

#define ALGO "AWS4-HMAC-SHA256"
#define EMPTY_SHA256 "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
#define STREAMING "STREAMING-AWS4-HMAC-SHA256-PAYLOAD"
#define STREAMING_TRAILER STREAMING "-TRAILER"
#define ALGO_V4A "AWS4-ECDSA-P256-SHA256"
#define TRAILER_TAG "x-amz-trailer-signature:"

static const char *const status_names[] = {
	"ok", "need-body", "malformed", "unsupported", "not-signed",
	"missing-header", "token", "signature", "chunk", "sigv4a", "trailer",
};
static_assert(ARRAY_SIZE(status_names) == SIGV4_STATUS_COUNT, "sigv4 status names");

static const char *const status_reasons[] = {
	"re-signed",
	"the body's hash is needed",
	"the Authorization is not a well-formed AWS4-HMAC-SHA256 signature",
	"a SigV4 variant the broker does not re-sign (an unknown STREAMING payload, "
	"no X-Amz-Date)",
	"a header that must be signed is not (host, x-amz-date, "
	"x-amz-security-token)",
	"a signed header is absent",
	"the session token is not the placeholder the agent holds",
	"the signature does not verify with the placeholder secret",
	"an aws-chunked chunk is malformed or its signature does not verify",
	"a SigV4a (AWS4-ECDSA-P256-SHA256) streaming upload is not re-signed by the "
	"broker: sign the payload's hash (or UNSIGNED-PAYLOAD), or use SigV4",
	"a signed trailer is malformed or its signature does not verify",
};
static_assert(ARRAY_SIZE(status_reasons) == SIGV4_STATUS_COUNT, "sigv4 status reasons");

const char *sigv4_status_to_string(enum sigv4_status s)
{
	return (unsigned)s < SIGV4_STATUS_COUNT ? status_names[s] : "?";
}

const char *sigv4_status_reason(enum sigv4_status s)
{
	return (unsigned)s < SIGV4_STATUS_COUNT ? status_reasons[s] : "?";
}

/* ---- primitives ------------------------------------------------------- */

/* One HMAC-SHA256 context per process, keyed again for every MAC (a
 * worker is single-threaded): fetching and allocating it each time cost
 * more than the MAC of a short string. */
static void hmac(const void *key, size_t klen, const void *data, size_t len,
		 uint8_t out[32])
{
	static EVP_MAC_CTX *ctx;
	OSSL_PARAM params[2];
	size_t outl = 0;

	if (!ctx) {
		EVP_MAC *mac = EVP_MAC_fetch(NULL, "HMAC", NULL);

		ASSERT(mac);
		ctx = EVP_MAC_CTX_new(mac);
		ASSERT(ctx);
		EVP_MAC_free(mac); /* the context holds its own reference */
		params[0] = OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, "SHA256", 0);
		params[1] = OSSL_PARAM_construct_end();
		ASSERT(EVP_MAC_CTX_set_params(ctx, params) == 1);
	}
	ASSERT(EVP_MAC_init(ctx, key, klen, NULL) == 1);
	ASSERT(EVP_MAC_update(ctx, data, len) == 1);
	ASSERT(EVP_MAC_final(ctx, out, &outl, 32) == 1 && outl == 32);
	/* the key (a secret, or one derived from it) does not stay in it */
	ASSERT(EVP_MAC_init(ctx, (const unsigned char *)"", 1, NULL) == 1);
}

void sigv4_sha256_hex(const void *data, size_t len, char hex[SIGV4_HEX_LEN + 1])
{
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int mdlen = 0;

	ASSERT(EVP_Digest(data, len, md, &mdlen, EVP_sha256(), NULL) == 1 && mdlen == 32);
	util_hex(md, 32, hex);
}

void sigv4_signing_key(const char *secret, size_t secret_len, const char *date,
		       const char *region, const char *service, uint8_t key[32])
{
	size_t klen = 4 + secret_len;
	char *k = util_xmalloc(klen);
	uint8_t a[32], b[32];

	k[0] = 'A';
	k[1] = 'W';
	k[2] = 'S';
	k[3] = '4';
	memcpy(k + 4, secret, secret_len);
	hmac(k, klen, date, strlen(date), a);
	hmac(a, 32, region, strlen(region), b);
	hmac(b, 32, service, strlen(service), a);
	hmac(a, 32, "aws4_request", strlen("aws4_request"), key);
	OPENSSL_cleanse(k, klen);
	OPENSSL_cleanse(a, sizeof(a));
	OPENSSL_cleanse(b, sizeof(b));
	free(k);
}

static void sign_string(const uint8_t key[32], const char *sts, size_t len,
			char hex[SIGV4_HEX_LEN + 1])
{
	uint8_t sig[32];

	hmac(key, 32, sts, len, sig);
	util_hex(sig, 32, hex);
}

void sigv4_sign(const uint8_t key[32], const char *amz_date, const char *scope,
		const char *canonical, size_t len, char hex[SIGV4_HEX_LEN + 1])
{
	char h[SIGV4_HEX_LEN + 1];
	struct buf sts = { 0 };

	sigv4_sha256_hex(canonical, len, h);
	buf_printf(&sts, ALGO "\n%s\n%s\n%s", amz_date, scope, h);
	sign_string(key, sts.data, sts.len, hex);
	buf_free(&sts);
}

/* A chunk's signature from its data's hash @h (hex). */
static void chunk_sign_hash(const uint8_t key[32], const char *amz_date, const char *scope,
			    const char *prev, const char *h, char hex[SIGV4_HEX_LEN + 1])
{
	struct buf sts = { 0 };

	buf_printf(&sts, ALGO "-PAYLOAD\n%s\n%s\n%s\n" EMPTY_SHA256 "\n%s", amz_date,
		   scope, prev, h);
	sign_string(key, sts.data, sts.len, hex);
	buf_free(&sts);
}

void sigv4_chunk_sign(const uint8_t key[32], const char *amz_date, const char *scope,
		      const char *prev, const void *data, size_t len,
		      char hex[SIGV4_HEX_LEN + 1])
{
	char h[SIGV4_HEX_LEN + 1];

	sigv4_sha256_hex(data, len, h);
	chunk_sign_hash(key, amz_date, scope, prev, h, hex);
}

/* ---- the Authorization ------------------------------------------------ */

/* ---- SigV4a: ECDSA P-256 ---------------------------------------------- */

int sigv4a_private_key(const char *key_id, const char *secret, size_t secret_len,
		       uint8_t d[32])
{
	/* n - 2, n the order of P-256 */
	static const uint8_t n_minus_2[32] = {
		0xff, 0xff, 0xff, 0xff, 0x00, 0x00, 0x00, 0x00, 0xff, 0xff, 0xff,
		0xff, 0xff, 0xff, 0xff, 0xff, 0xbc, 0xe6, 0xfa, 0xad, 0xa7, 0x17,
		0x9e, 0x84, 0xf3, 0xb9, 0xca, 0xc2, 0xfc, 0x63, 0x25, 0x4f,
	};
	size_t klen = strlen(key_id), i;
	struct buf key = { 0 }, in = { 0 };
	int counter, rc = -1;

	buf_append(&key, "AWS4A", 5);
	buf_append(&key, secret, secret_len);
	for (counter = 1; counter <= 254 && rc < 0; counter++) {
		uint8_t k0[32];
		unsigned char c = (unsigned char)counter;

		in.len = 0;
		buf_append(&in, "\0\0\0\1", 4);
		buf_append(&in, ALGO_V4A, strlen(ALGO_V4A) + 1); /* and its 0 */
		buf_append(&in, key_id, klen);
		buf_append(&in, &c, 1);
		buf_append(&in, "\0\0\1\0", 4);
		hmac(key.data, key.len, in.data, in.len, k0);
		if (memcmp(k0, n_minus_2, 32) <= 0) {
			/* d = k0 + 1 (big-endian; k0 <= n - 2, so no carry out) */
			for (i = 32; i-- > 0;)
				if (++k0[i] != 0)
					break;
			memcpy(d, k0, 32);
			rc = 0;
		}
		OPENSSL_cleanse(k0, sizeof(k0));
	}
	OPENSSL_cleanse(key.data, key.len);
	buf_free(&key);
	buf_free(&in);
	return rc;
}

/* The P-256 key pair of private scalar @d, or NULL. */
static EVP_PKEY *p256_key(const uint8_t d[32])
{
	EC_GROUP *g = EC_GROUP_new_by_curve_name(NID_X9_62_prime256v1);
	BIGNUM *bn = BN_bin2bn(d, 32, NULL);
	EC_POINT *pt = g ? EC_POINT_new(g) : NULL;
	OSSL_PARAM_BLD *b = OSSL_PARAM_BLD_new();
	OSSL_PARAM *params = NULL;
	EVP_PKEY_CTX *ctx = NULL;
	EVP_PKEY *pkey = NULL;
	unsigned char pub[65];
	size_t publen = 0;

	if (g && bn && pt && b && EC_POINT_mul(g, pt, bn, NULL, NULL, NULL) == 1)
		publen = EC_POINT_point2oct(g, pt, POINT_CONVERSION_UNCOMPRESSED, pub,
					    sizeof(pub), NULL);
	if (publen &&
	    OSSL_PARAM_BLD_push_utf8_string(b, OSSL_PKEY_PARAM_GROUP_NAME, "prime256v1", 0) &&
	    OSSL_PARAM_BLD_push_BN(b, OSSL_PKEY_PARAM_PRIV_KEY, bn) &&
	    OSSL_PARAM_BLD_push_octet_string(b, OSSL_PKEY_PARAM_PUB_KEY, pub, publen))
		params = OSSL_PARAM_BLD_to_param(b);
	if (params)
		ctx = EVP_PKEY_CTX_new_from_name(NULL, "EC", NULL);
	if (ctx && (EVP_PKEY_fromdata_init(ctx) != 1 ||
		    EVP_PKEY_fromdata(ctx, &pkey, EVP_PKEY_KEYPAIR, params) != 1))
		pkey = NULL;
	EVP_PKEY_CTX_free(ctx);
	OSSL_PARAM_free(params);
	OSSL_PARAM_BLD_free(b);
	EC_POINT_free(pt);
	BN_clear_free(bn);
	EC_GROUP_free(g);
	return pkey;
}

/* The key of @key_id and @secret, or NULL. */
static EVP_PKEY *v4a_key(const char *key_id, const char *secret, size_t secret_len)
{
	uint8_t d[32];
	EVP_PKEY *k = NULL;

	if (sigv4a_private_key(key_id, secret, secret_len, d) == 0)
		k = p256_key(d);
	OPENSSL_cleanse(d, sizeof(d));
	return k;
}

bool sigv4a_verify(const char *key_id, const char *secret, size_t secret_len,
		   const char *sts, size_t sts_len, const char *sig_hex, size_t sig_len)
{
	unsigned char der[SIGV4A_SIG_HEX_MAX / 2];
	EVP_PKEY *k;
	EVP_MD_CTX *md;
	bool ok = false;
	size_t i;

	if (sig_len % 2 || sig_len > SIGV4A_SIG_HEX_MAX)
		return false;
	for (i = 0; i < sig_len; i++) {
		char ch = sig_hex[i];
		unsigned int v = ch >= '0' && ch <= '9'   ? (unsigned int)(ch - '0')
				 : ch >= 'a' && ch <= 'f' ? (unsigned int)(ch - 'a' + 10)
							  : 16;

		if (v > 15)
			return false;
		der[i / 2] = (unsigned char)(i % 2 ? (der[i / 2] << 4) | v : v);
	}
	k = v4a_key(key_id, secret, secret_len);
	md = k ? EVP_MD_CTX_new() : NULL;
	if (md && EVP_DigestVerifyInit(md, NULL, EVP_sha256(), NULL, k) == 1)
		ok = EVP_DigestVerify(md, der, sig_len / 2, (const unsigned char *)sts,
				      sts_len) == 1;
	EVP_MD_CTX_free(md);
	EVP_PKEY_free(k);
	return ok;
}

/* SigV4a's signature of @sts in hex into @hex (NUL-terminated); its
 * length, or 0. */
static size_t v4a_sign(const char *key_id, const char *secret, size_t secret_len,
		       const char *sts, size_t sts_len, char hex[SIGV4A_SIG_HEX_MAX + 1])
{
	unsigned char der[80];
	size_t dlen = sizeof(der), n = 0;
	EVP_PKEY *k = v4a_key(key_id, secret, secret_len);
	EVP_MD_CTX *md = k ? EVP_MD_CTX_new() : NULL;

	if (md && EVP_DigestSignInit(md, NULL, EVP_sha256(), NULL, k) == 1 &&
	    EVP_DigestSign(md, der, &dlen, (const unsigned char *)sts, sts_len) == 1 &&
	    dlen * 2 <= SIGV4A_SIG_HEX_MAX) {
		for (size_t i = 0; i < dlen; i++)
			snprintf(hex + 2 * i, 3, "%02x", der[i]);
		n = 2 * dlen;
	}
	EVP_MD_CTX_free(md);
	EVP_PKEY_free(k);
	return n;
}

/* SigV4a's string to sign. */
static char *v4a_sts(const char *amz_date, const char *scope, const char *canonical,
		     size_t len)
{
	char h[SIGV4_HEX_LEN + 1];

	sigv4_sha256_hex(canonical, len, h);
	return util_xasprintf("%s\n%s\n%s\n%s", ALGO_V4A, amz_date, scope, h);
}

bool sigv4_is_aws4(const char *value)
{
	while (*value == ' ' || *value == '\t')
		value++;
	return strncmp(value, "AWS4-", 5) == 0;
}

static bool is_hex_lower(const char *s, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
			return false;
	return true;
}

/* Copies [s, s+n) into @out of @size bytes; false if it does not fit or
 * is empty. */
static bool part(char *out, size_t size, const char *s, size_t n)
{
	if (n == 0 || n >= size)
		return false;
	memcpy(out, s, n);
	out[n] = '\0';
	return true;
}

static bool signed_headers_ok(const char *s)
{
	const char *prev = NULL, *p = s;
	size_t prevlen = 0;

	if (!*s)
		return false;
	for (;;) {
		size_t n = strcspn(p, ";"), i;

		if (n == 0)
			return false;
		for (i = 0; i < n; i++)
			if (!((p[i] >= 'a' && p[i] <= 'z') || (p[i] >= '0' && p[i] <= '9') ||
			      p[i] == '-' || p[i] == '_' || p[i] == '.'))
				return false;
		if (prev) {
			size_t m = prevlen < n ? prevlen : n;
			int c = memcmp(prev, p, m);

			if (c > 0 || (c == 0 && prevlen >= n))
				return false; /* unsorted or repeated */
		}
		prev = p;
		prevlen = n;
		if (!p[n])
			return true;
		p += n + 1;
	}
}

int sigv4_parse_auth(const char *value, struct sigv4_auth *out)
{
	const char *p = value, *v;
	bool cred = false, sh = false, sig = false;

	size_t nparts;

	memset(out, 0, sizeof(*out));
	while (*p == ' ' || *p == '\t')
		p++;
	if (strncmp(p, ALGO_V4A " ", strlen(ALGO_V4A) + 1) == 0) {
		out->v4a = true;
		p += strlen(ALGO_V4A);
	} else if (strncmp(p, ALGO " ", strlen(ALGO) + 1) == 0) {
		p += strlen(ALGO);
	} else {
		return -1;
	}
	nparts = out->v4a ? 4 : 5;
	while (*p) {
		size_t n;

		while (*p == ' ' || *p == ',' || *p == '\t')
			p++;
		if (!*p)
			break;
		n = strcspn(p, ", \t");
		if (strncmp(p, "Credential=", 11) == 0 && !cred) {
			const char *s[5];
			size_t l[5], k;

			v = p + 11;
			for (k = 0; k < nparts; k++) {
				s[k] = v;
				l[k] = strcspn(v, "/, \t");
				v += l[k];
				if (k + 1 < nparts && *v++ != '/')
					return -1;
			}
			if (out->v4a) { /* no region */
				s[4] = s[3];
				l[4] = l[3];
				s[3] = s[2];
				l[3] = l[2];
			}
			if (v != p + n || l[1] != 8 || !part(out->key_id, sizeof(out->key_id), s[0], l[0]) ||
			    !part(out->date, sizeof(out->date), s[1], l[1]) ||
			    (!out->v4a && !part(out->region, sizeof(out->region), s[2], l[2])) ||
			    !part(out->service, sizeof(out->service), s[3], l[3]) ||
			    l[4] != strlen("aws4_request") || strncmp(s[4], "aws4_request", l[4]) != 0)
				return -1;
			for (k = 0; k < 8; k++)
				if (out->date[k] < '0' || out->date[k] > '9')
					return -1;
			out->key_off = (size_t)(s[0] - value);
			out->key_len = l[0];
			cred = true;
		} else if (strncmp(p, "SignedHeaders=", 14) == 0 && !sh) {
			if (!part(out->signed_headers, sizeof(out->signed_headers), p + 14, n - 14) ||
			    !signed_headers_ok(out->signed_headers))
				return -1;
			sh = true;
		} else if (strncmp(p, "Signature=", 10) == 0 && !sig) {
			size_t sl = n - 10;

			if (out->v4a ? (sl < 16 || sl > SIGV4A_SIG_HEX_MAX || sl % 2)
				     : sl != SIGV4_HEX_LEN)
				return -1;
			if (!is_hex_lower(p + 10, sl))
				return -1;
			memcpy(out->signature, p + 10, sl);
			out->sig_len = sl;
			out->sig_off = (size_t)(p + 10 - value);
			sig = true;
		} else {
			return -1;
		}
		p += n;
	}
	return cred && sh && sig ? 0 : -1;
}

/* ---- the canonical request -------------------------------------------- */

static bool unreserved(unsigned char c)
{
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
	       c == '-' || c == '_' || c == '.' || c == '~';
}

static void uri_encode(struct buf *out, const char *s, size_t n, bool keep_slash)
{
	static const char hexd[] = "0123456789ABCDEF";
	size_t i;

	for (i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];

		if (unreserved(c) || (keep_slash && c == '/')) {
			buf_append(out, &s[i], 1);
		} else {
			char e[3] = { '%', hexd[c >> 4], hexd[c & 15] };

			buf_append(out, e, 3);
		}
	}
}

/* Percent-decodes [s, s+n) into @out (a malformed escape stays as it is). */
static void uri_decode(struct buf *out, const char *s, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++) {
		int h, l;

		if (s[i] == '%' && i + 2 < n &&
		    (h = util_hex_value((unsigned char)s[i + 1])) >= 0 &&
		    (l = util_hex_value((unsigned char)s[i + 2])) >= 0) {
			char c = (char)(h * 16 + l);

			buf_append(out, &c, 1);
			i += 2;
		} else {
			buf_append(out, &s[i], 1);
		}
	}
}

/* [s, s+n) decoded and encoded again, as a NUL-terminated malloc'd string. */
static char *reencode(const char *s, size_t n)
{
	struct buf d = { 0 }, e = { 0 };

	uri_decode(&d, s, n);
	uri_encode(&e, d.data ? d.data : "", d.len, false);
	buf_append(&e, "", 1);
	buf_free(&d);
	return e.data;
}

struct qparam {
	char *name, *value;
};

static int qparam_cmp(const void *a, const void *b)
{
	const struct qparam *x = a, *y = b;
	int c = strcmp(x->name, y->name);

	return c ? c : strcmp(x->value, y->value);
}

static void canonical_query(struct buf *out, const char *q)
{
	struct qparam *ps = NULL;
	size_t n = 0, cap = 0, i;
	const char *p = q;

	while (p && *p) {
		size_t len = strcspn(p, "&");
		const char *eq = memchr(p, '=', len);

		if (len) {
			if (n == cap) {
				cap = cap ? cap * 2 : 8;
				ps = util_xrealloc(ps, cap * sizeof(*ps));
			}
			ps[n].name = reencode(p, eq ? (size_t)(eq - p) : len);
			ps[n].value = eq ? reencode(eq + 1, len - (size_t)(eq + 1 - p))
					 : util_xstrdup("");
			n++;
		}
		p += len;
		if (*p == '&')
			p++;
	}
	if (n)
		qsort(ps, n, sizeof(*ps), qparam_cmp);
	for (i = 0; i < n; i++) {
		buf_printf(out, "%s%s=%s", i ? "&" : "", ps[i].name, ps[i].value);
		free(ps[i].name);
		free(ps[i].value);
	}
	free(ps);
}

/* Appends the value trimmed, runs of white space one space. */
static void header_value(struct buf *out, const char *v)
{
	bool space = false, any = false;

	for (; *v; v++) {
		if (*v == ' ' || *v == '\t') {
			space = any;
			continue;
		}
		if (space)
			buf_append(out, " ", 1);
		space = false;
		any = true;
		buf_append(out, v, 1);
	}
}

static bool name_is(const char *field, const char *name, size_t n)
{
	return strlen(field) == n && strncasecmp(field, name, n) == 0;
}

int sigv4_canonical_request(const struct sigv4_msg *m, const char *signed_headers,
			    const char *payload_hash, bool s3, struct buf *out)
{
	const char *path = m->path && *m->path ? m->path : "/";
	const char *p;

	buf_printf(out, "%s\n", m->method);
	if (s3)
		buf_puts(out, path);
	else
		uri_encode(out, path, strlen(path), true);
	buf_puts(out, "\n");
	canonical_query(out, m->query);
	buf_puts(out, "\n");
	for (p = signed_headers;;) {
		size_t n = strcspn(p, ";"), i;
		bool found = false;

		buf_append(out, p, n);
		buf_puts(out, ":");
		for (i = 0; i < m->nfields; i++) {
			if (!name_is(m->fields[i].name, p, n))
				continue;
			if (found)
				buf_puts(out, ",");
			header_value(out, m->fields[i].value);
			found = true;
		}
		if (!found)
			return -1;
		buf_puts(out, "\n");
		if (!p[n])
			break;
		p += n + 1;
	}
	buf_printf(out, "\n%s\n%s", signed_headers, payload_hash);
	return 0;
}

/* ---- re-signing -------------------------------------------------------- */

static const char *field(const struct sigv4_msg *m, const char *name, size_t *count)
{
	const char *v = NULL;
	size_t i, c = 0;

	for (i = 0; i < m->nfields; i++)
		if (strcasecmp(m->fields[i].name, name) == 0) {
			if (!v)
				v = m->fields[i].value;
			c++;
		}
	if (count)
		*count = c;
	return v;
}

static bool signs(const char *signed_headers, const char *name)
{
	size_t n = strlen(name);
	const char *p = signed_headers;

	for (;;) {
		size_t l = strcspn(p, ";");

		if (l == n && strncmp(p, name, n) == 0)
			return true;
		if (!p[l])
			return false;
		p += l + 1;
	}
}

static bool amz_date_ok(const char *d, const char *date)
{
	size_t i;

	if (strlen(d) != 16 || d[8] != 'T' || d[15] != 'Z' || strncmp(d, date, 8) != 0)
		return false;
	for (i = 0; i < 15; i++)
		if (i != 8 && (d[i] < '0' || d[i] > '9'))
			return false;
	return true;
}

void sigv4_resign_free(struct sigv4_resign *rs)
{
	if (rs->token)
		OPENSSL_cleanse(rs->token, strlen(rs->token));
	free(rs->token);
	free(rs->authorization);
	OPENSSL_cleanse(rs, sizeof(*rs));
}

/* The request with the real session token in place of the placeholder's
 * (@token: the agent sent one), canonical, into @canon. */
static void real_canonical(const struct sigv4_msg *m, const char *payload_hash,
			   const struct sigv4_creds *real, const char *token,
			   const struct sigv4_resign *out, struct buf *canon)
{
	struct sigv4_field *fields = util_xcalloc(m->nfields ? m->nfields : 1, sizeof(*fields));
	struct sigv4_msg rm = *m;
	size_t i;

	for (i = 0; i < m->nfields; i++) {
		fields[i] = m->fields[i];
		if (token && strcasecmp(fields[i].name, "x-amz-security-token") == 0)
			fields[i].value = real->token;
	}
	rm.fields = fields;
	canon->len = 0;
	ASSERT(sigv4_canonical_request(&rm, out->auth.signed_headers, payload_hash, out->s3,
				       canon) == 0);
	free(fields);
}

/* The Authorization @auth with @real's key id and @sig in place of the
 * agent's. */
static char *new_authorization(const char *auth, const struct sigv4_auth *a,
			       const struct sigv4_creds *real, const char *sig, size_t siglen)
{
	size_t alen = strlen(auth), klen = strlen(real->key_id);
	struct buf nb = { 0 };

	buf_append(&nb, auth, a->key_off);
	buf_append(&nb, real->key_id, klen);
	buf_append(&nb, auth + a->key_off + a->key_len, a->sig_off - a->key_off - a->key_len);
	buf_append(&nb, sig, siglen);
	buf_append(&nb, auth + a->sig_off + a->sig_len, alen - a->sig_off - a->sig_len + 1);
	return nb.data;
}

/* SigV4a: verified with the placeholder's derived key, signed with the
 * real one's. */
static enum sigv4_status resign_v4a(const struct sigv4_msg *m, const char *payload_hash,
				    const struct sigv4_creds *ph,
				    const struct sigv4_creds *real, const char *token,
				    struct sigv4_resign *out)
{
	const struct sigv4_auth *a = &out->auth;
	struct buf canon = { 0 };
	char *sts;
	enum sigv4_status st = SIGV4_OK;

	if (sigv4_canonical_request(m, a->signed_headers, payload_hash, out->s3, &canon) < 0) {
		buf_free(&canon);
		return SIGV4_MISSING;
	}
	sts = v4a_sts(out->amz_date, out->scope, canon.data, canon.len);
	if (!sigv4a_verify(ph->key_id, ph->secret, ph->secret_len, sts, strlen(sts),
			   a->signature, a->sig_len))
		st = SIGV4_MISMATCH;
	free(sts);
	if (st == SIGV4_OK) {
		char sig[SIGV4A_SIG_HEX_MAX + 1];
		size_t n;

		real_canonical(m, payload_hash, real, token, out, &canon);
		sts = v4a_sts(out->amz_date, out->scope, canon.data, canon.len);
		n = v4a_sign(real->key_id, real->secret, real->secret_len, sts, strlen(sts), sig);
		free(sts);
		ASSERT(n > 0);
		out->authorization =
			new_authorization(field(m, "authorization", NULL), a, real, sig, n);
		if (token)
			out->token = util_xstrdup(real->token);
		OPENSSL_cleanse(sig, sizeof(sig));
	}
	buf_free(&canon);
	return st;
}

enum sigv4_status sigv4_resign_head(const struct sigv4_msg *m, const char *payload_hash,
				    const struct sigv4_creds *ph,
				    const struct sigv4_creds *real,
				    struct sigv4_resign *out)
{
	struct sigv4_auth *a = &out->auth;
	const char *auth, *date, *token, *sha;
	struct buf canon = { 0 };
	char sig[SIGV4_HEX_LEN + 1];
	size_t nauth, ntoken, ndate;
	enum sigv4_status st;

	memset(out, 0, sizeof(*out));
	auth = field(m, "authorization", &nauth);
	if (!auth || nauth != 1 || sigv4_parse_auth(auth, a) < 0)
		return SIGV4_MALFORMED;
	if (strcmp(a->key_id, ph->key_id) != 0)
		return SIGV4_MALFORMED;
	date = field(m, "x-amz-date", &ndate);
	if (!date || ndate != 1 || !amz_date_ok(date, a->date))
		return SIGV4_UNSUPPORTED;
	if (!signs(a->signed_headers, "host") || !signs(a->signed_headers, "x-amz-date"))
		return SIGV4_NOT_SIGNED;
	token = field(m, "x-amz-security-token", &ntoken);
	if (ntoken > 1 || (token && (!ph->token || strcmp(token, ph->token) != 0)) ||
	    (!token && real->token))
		return SIGV4_TOKEN;
	if (token && !signs(a->signed_headers, "x-amz-security-token"))
		return SIGV4_NOT_SIGNED;
	out->s3 = strcmp(a->service, "s3") == 0;
	sha = field(m, "x-amz-content-sha256", NULL);
	if (sha) {
		if (strncmp(sha, "STREAMING-", 10) == 0) {
			if (a->v4a && strcmp(sha, "STREAMING-UNSIGNED-PAYLOAD-TRAILER") != 0)
				return SIGV4_SIGV4A;
			if (strcmp(sha, STREAMING) == 0)
				out->chunked = true;
			else if (strcmp(sha, STREAMING_TRAILER) == 0)
				out->chunked = out->trailer = true;
			else if (strcmp(sha, "STREAMING-UNSIGNED-PAYLOAD-TRAILER") != 0)
				return SIGV4_UNSUPPORTED;
		}
		payload_hash = sha;
	} else if (!payload_hash) {
		return SIGV4_NEED_BODY;
	}
	(void)util_strlcpy(out->amz_date, date, sizeof(out->amz_date));
	if (a->v4a)
		snprintf(out->scope, sizeof(out->scope), "%s/%s/aws4_request", a->date,
			 a->service);
	else
		snprintf(out->scope, sizeof(out->scope), "%s/%s/%s/aws4_request", a->date,
			 a->region, a->service);
	if (a->v4a)
		return resign_v4a(m, payload_hash, ph, real, token, out);

	/* verify with the placeholder secret */
	if (sigv4_canonical_request(m, a->signed_headers, payload_hash, out->s3, &canon) < 0) {
		st = SIGV4_MISSING;
		goto out;
	}
	sigv4_signing_key(ph->secret, ph->secret_len, a->date, a->region, a->service,
			  out->ph_key);
	sigv4_sign(out->ph_key, date, out->scope, canon.data, canon.len, sig);
	if (CRYPTO_memcmp(sig, a->signature, SIGV4_HEX_LEN) != 0) {
		st = SIGV4_MISMATCH;
		goto out;
	}

	/* sign the same request, with the real token, with the real secret */
	real_canonical(m, payload_hash, real, token, out, &canon);
	sigv4_signing_key(real->secret, real->secret_len, a->date, a->region, a->service,
			  out->real_key);
	sigv4_sign(out->real_key, date, out->scope, canon.data, canon.len, sig);
	out->authorization = new_authorization(auth, a, real, sig, SIGV4_HEX_LEN);
	if (token)
		out->token = util_xstrdup(real->token);
	memcpy(out->ph_prev, a->signature, SIGV4_HEX_LEN + 1);
	memcpy(out->real_prev, sig, SIGV4_HEX_LEN + 1);
	st = SIGV4_OK;
out:
	OPENSSL_cleanse(sig, sizeof(sig));
	buf_free(&canon);
	return st;
}

/* The trailer's signature: its fields' hash, chained on @prev. */
static void trailer_sign(const uint8_t key[32], const char *amz_date, const char *scope,
			 const char *prev, const char *h, char hex[SIGV4_HEX_LEN + 1])
{
	struct buf sts = { 0 };

	buf_printf(&sts, ALGO "-TRAILER\n%s\n%s\n%s\n%s", amz_date, scope, prev, h);
	sign_string(key, sts.data, sts.len, hex);
	buf_free(&sts);
}

/* The signed trailer at @off (after the final chunk's line): "name:value
 * \r\n" fields, then TRAILER_TAG SIG "\r\n\r\n", the end of @body. The
 * fields' canonical form is each "name:value\n". */
static enum sigv4_status resign_trailer(struct sigv4_resign *rs, char *body, size_t len,
					size_t off)
{
	const size_t tl = strlen(TRAILER_TAG);
	struct buf canon = { 0 };
	char h[SIGV4_HEX_LEN + 1], ph[SIGV4_HEX_LEN + 1], real[SIGV4_HEX_LEN + 1];
	enum sigv4_status st = SIGV4_TRAILER;

	while (off < len) {
		const char *eol = memmem(body + off, len - off, "\r\n", 2);
		char *sigp = body + off + tl;
		size_t n = eol ? (size_t)(eol - (body + off)) : 0;

		if (!eol || n == 0 || canon.len > 8192)
			break;
		if (n != tl + SIGV4_HEX_LEN || strncasecmp(body + off, TRAILER_TAG, tl) != 0) {
			/* a field: a name, a colon, a value */
			const char *colon = memchr(body + off, ':', n);

			if (!colon || colon == body + off)
				break;
			buf_append(&canon, body + off, n);
			buf_append(&canon, "\n", 1);
			off += n + 2;
			continue;
		}
		if (!canon.len || !is_hex_lower(sigp, SIGV4_HEX_LEN) || len - off - n != 4 ||
		    memcmp(body + off + n, "\r\n\r\n", 4) != 0)
			break;
		sigv4_sha256_hex(canon.data, canon.len, h);
		trailer_sign(rs->ph_key, rs->amz_date, rs->scope, rs->ph_prev, h, ph);
		if (CRYPTO_memcmp(ph, sigp, SIGV4_HEX_LEN) != 0)
			break;
		trailer_sign(rs->real_key, rs->amz_date, rs->scope, rs->real_prev, h, real);
		memcpy(sigp, real, SIGV4_HEX_LEN);
		st = SIGV4_OK;
		break;
	}
	buf_free(&canon);
	return st;
}

enum sigv4_status sigv4_resign_chunks(struct sigv4_resign *rs, char *body, size_t len)
{
	static const char tag[] = ";chunk-signature=";
	size_t off = 0;

	for (;;) {
		char *sigp, ph[SIGV4_HEX_LEN + 1], real[SIGV4_HEX_LEN + 1], h[SIGV4_HEX_LEN + 1];
		uint64_t size = 0;
		size_t i = off, data;
		bool trailer;

		while (i < len && util_hex_value((unsigned char)body[i]) >= 0) {
			if (i - off >= 16)
				return SIGV4_CHUNK;
			size = size * 16 + (uint64_t)util_hex_value((unsigned char)body[i]);
			i++;
		}
		if (i == off || len - i < strlen(tag) + SIGV4_HEX_LEN + 2 ||
		    memcmp(body + i, tag, strlen(tag)) != 0)
			return SIGV4_CHUNK;
		sigp = body + i + strlen(tag);
		if (!is_hex_lower(sigp, SIGV4_HEX_LEN) || sigp[SIGV4_HEX_LEN] != '\r' ||
		    sigp[SIGV4_HEX_LEN + 1] != '\n')
			return SIGV4_CHUNK;
		data = (size_t)(sigp + SIGV4_HEX_LEN + 2 - body);
		trailer = size == 0 && rs->trailer; /* the trailer follows at once */
		if (!trailer && (size > len - data || len - data - size < 2 ||
				 body[data + size] != '\r' || body[data + size + 1] != '\n'))
			return SIGV4_CHUNK;
		/* the data's hash once, for both chains */
		sigv4_sha256_hex(body + data, (size_t)size, h);
		chunk_sign_hash(rs->ph_key, rs->amz_date, rs->scope, rs->ph_prev, h, ph);
		if (CRYPTO_memcmp(ph, sigp, SIGV4_HEX_LEN) != 0)
			return SIGV4_CHUNK;
		chunk_sign_hash(rs->real_key, rs->amz_date, rs->scope, rs->real_prev, h, real);
		memcpy(rs->ph_prev, ph, sizeof(ph));
		memcpy(rs->real_prev, real, sizeof(real));
		memcpy(sigp, real, SIGV4_HEX_LEN);
		rs->chunks++;
		if (trailer)
			return resign_trailer(rs, body, len, data);
		off = data + (size_t)size + 2;
		if (size == 0)
			/* the final chunk: "0;chunk-signature=S\r\n\r\n" */
			return off == len ? SIGV4_OK : SIGV4_CHUNK;
	}
}
