/* SPDX-License-Identifier: Apache-2.0
 * fuzz_sigv4.c - libFuzzer target for sigv4.c: the canonicaliser and the
 * broker's re-signing of requests signed with placeholder credentials.
 *
 * Input layout: one byte of flags (bit 0: a session token; bits 1-2: the
 * payload, UNSIGNED-PAYLOAD / a hash / aws-chunked / none, i.e. the body's
 * hash; bit 3: S3 or another service; bits 4-7: the chunk size's scale),
 * then lines: the method, the request target (path?query), header fields
 * "name:value" up to an empty line; the rest is the body.
 *
 * The target signs the request as an AWS client would, with the
 * placeholder credentials (every field signed), then re-signs it.
 * Invariants (abort() on failure, so libFuzzer keeps the input):
 *  - the agent's request verifies with the placeholder secret;
 *  - the re-signed request verifies with the real secret, and signed
 *    again with the real secret it is unchanged (a fixed point);
 *  - it differs from the agent's only in the Authorization's key id and
 *    signature, and the session token (placeholder -> real);
 *  - a signature changed in one digit does not verify;
 *  - an aws-chunked body: every chunk verifies with the placeholder chain,
 *    the re-signed body is as long, differs only inside the chunk
 *    signatures, and verifies with the real chain;
 *  - parsing the raw input as an Authorization, and re-signing with it,
 *    neither crashes nor reads out of bounds (ASan).
 */
#include <openssl/crypto.h>
#include <string.h>
#include <strings.h>

#include "fuzz.h"
#include "sigv4.h"
#include "util.h"

#define PH_KEY "AKIAPLACEHOLDER12345"
#define PH_SECRET "placeholderSecret/0123456789+abcdefghijK"
#define PH_TOKEN "PlaceholderToken0123456789+/abcdefghijklmnopqrstuvwxyzABCDEF="
#define RE_KEY "AKIAREALKEY000000001"
#define RE_SECRET "realSecretAccessKey/0123456789+abcdefghi"
#define RE_TOKEN "RealSessionToken0123456789+/abcdefghijklmnopqrstuvwxyzABCDEFG"
#define DATE "20260101"
#define AMZ_DATE "20260101T000000Z"
#define MAX_FIELDS 24

static const struct sigv4_creds ph = { PH_KEY, PH_SECRET, sizeof(PH_SECRET) - 1, PH_TOKEN };
static const struct sigv4_creds re = { RE_KEY, RE_SECRET, sizeof(RE_SECRET) - 1, RE_TOKEN };
static const struct sigv4_creds ph0 = { PH_KEY, PH_SECRET, sizeof(PH_SECRET) - 1, NULL };
static const struct sigv4_creds re0 = { RE_KEY, RE_SECRET, sizeof(RE_SECRET) - 1, NULL };

static int name_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* A header name the signer accepts: lowercase letters, digits, '-'. */
static bool name_ok(const char *s)
{
	size_t i;

	if (!*s || strlen(s) > 40)
		return false;
	for (i = 0; s[i]; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '-'))
			return false;
	return true;
}

static bool reserved(const char *s)
{
	return !strcmp(s, "authorization") || !strcmp(s, "host") || !strcmp(s, "x-amz-date") ||
	       !strcmp(s, "x-amz-security-token") || !strcmp(s, "x-amz-content-sha256");
}

/* The resign of @m (whose field @ai is the Authorization) verified, and
 * checked against the agent's; @tk is the token field's index or -1. */
static void check_resign(struct sigv4_msg *m, struct sigv4_field *f, size_t ai, int tk,
			 const char *hash, bool token, struct sigv4_resign *rs)
{
	const struct sigv4_creds *p = token ? &ph : &ph0, *r = token ? &re : &re0;
	struct sigv4_field g[MAX_FIELDS + 8];
	struct sigv4_msg rm = *m;
	struct sigv4_resign again;
	const char *agent = f[ai].value, *sig;
	char want[4096];
	size_t i;

	CHECK(sigv4_resign_head(m, hash, p, r, rs) == SIGV4_OK);
	CHECK(!token == !rs->token);
	CHECK(!rs->token || strcmp(rs->token, RE_TOKEN) == 0);
	/* only the key id and the signature changed */
	CHECK(strlen(agent) < sizeof(want));
	strcpy(want, agent);
	memcpy(strstr(want, PH_KEY), RE_KEY, strlen(RE_KEY));
	sig = strstr(rs->authorization, "Signature=");
	CHECK(sig);
	memcpy(strstr(want, "Signature=") + 10, sig + 10, SIGV4_HEX_LEN);
	CHECK(strcmp(want, rs->authorization) == 0);
	/* it verifies with the real secret, a fixed point */
	memcpy(g, f, m->nfields * sizeof(*f));
	g[ai].value = rs->authorization;
	if (tk >= 0)
		g[tk].value = rs->token;
	rm.fields = g;
	CHECK(sigv4_resign_head(&rm, hash, r, r, &again) == SIGV4_OK);
	CHECK(strcmp(again.authorization, rs->authorization) == 0);
	sigv4_resign_free(&again);
	/* and not with another signature */
	strcpy(want, rs->authorization);
	i = (size_t)(strstr(want, "Signature=") - want) + 10;
	want[i] = want[i] == '0' ? '1' : '0';
	g[ai].value = want;
	CHECK(sigv4_resign_head(&rm, hash, r, r, &again) == SIGV4_MISMATCH);
	sigv4_resign_free(&again);
}

static void check_chunks(struct sigv4_resign *rs, const char *seed, const uint8_t *data,
			 size_t len, size_t size)
{
	uint8_t key[32];
	struct buf b = { 0 };
	char prev[SIGV4_HEX_LEN + 1], *orig;
	size_t off = 0, i;
	struct sigv4_resign real;

	sigv4_signing_key(PH_SECRET, strlen(PH_SECRET), DATE, "us-east-1", "s3", key);
	memcpy(prev, seed, sizeof(prev));
	for (;;) {
		size_t n = len - off < size ? len - off : size;

		sigv4_chunk_sign(key, AMZ_DATE, DATE "/us-east-1/s3/aws4_request", prev, data + off,
				 n, prev);
		buf_printf(&b, "%zx;chunk-signature=%s\r\n", n, prev);
		buf_append(&b, data + off, n);
		buf_puts(&b, "\r\n");
		off += n;
		if (n == 0)
			break;
	}
	orig = util_xmalloc(b.len);
	memcpy(orig, b.data, b.len);
	/* the real chain, followed side by side, verifies */
	real = *rs;
	memcpy(real.ph_key, rs->real_key, 32);
	memcpy(real.ph_prev, rs->real_prev, sizeof(real.ph_prev));
	real.authorization = NULL;
	real.token = NULL;
	CHECK(sigv4_resign_chunks(rs, b.data, b.len) == SIGV4_OK);
	for (i = 0; i < b.len; i++)
		if (orig[i] != b.data[i])
			/* inside a signature: hex after "chunk-signature=" */
			CHECK(i >= 16 && memmem(b.data + (i > 80 ? i - 80 : 0), i > 80 ? 80 : i,
						"chunk-signature=", 16));
	CHECK(sigv4_resign_chunks(&real, b.data, b.len) == SIGV4_OK);
	OPENSSL_cleanse(&real, sizeof(real));
	free(orig);
	buf_free(&b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *text, *line, *save = NULL, *names[MAX_FIELDS], *body;
	struct sigv4_field f[MAX_FIELDS + 8];
	struct sigv4_msg m = { 0 };
	struct sigv4_auth a;
	struct sigv4_resign rs;
	struct buf sh = { 0 }, canon = { 0 };
	char auth[4096], sig[SIGV4_HEX_LEN + 1], hash[SIGV4_HEX_LEN + 1], *q;
	const char *payload;
	uint8_t key[32];
	unsigned int flags;
	size_t n = 0, nn = 0, i, blen = 0, csize;
	bool token, s3, chunked = false;
	int tk = -1;

	if (size < 1 || size > 65536)
		return 0;
	flags = data[0];
	token = flags & 1;
	s3 = flags & 8;
	csize = (size_t)1 << (4 + (flags >> 4) % 8);
	text = util_xmalloc(size);
	memcpy(text, data + 1, size - 1);
	text[size - 1] = '\0';

	/* robustness: the raw input as an Authorization */
	(void)sigv4_parse_auth(text, &a);
	f[0] = (struct sigv4_field){ "Authorization", text };
	f[1] = (struct sigv4_field){ "x-amz-date", AMZ_DATE };
	f[2] = (struct sigv4_field){ "x-amz-content-sha256", "UNSIGNED-PAYLOAD" };
	m = (struct sigv4_msg){ "GET", "/", NULL, f, 3 };
	(void)sigv4_resign_head(&m, NULL, &ph0, &re0, &rs);
	sigv4_resign_free(&rs);

	/* the request: method, target, fields, body */
	body = strstr(text, "\n\n");
	if (body) {
		*body = '\0';
		body += 2;
		blen = strlen(body);
	}
	line = strtok_r(text, "\n", &save);
	m.method = line && *line && !strpbrk(line, " \r") ? line : "GET";
	line = strtok_r(NULL, "\n", &save);
	m.path = line && *line == '/' ? line : "/";
	q = strchr(m.path, '?');
	m.query = q ? q + 1 : NULL;
	if (q)
		*q = '\0';
	if (strpbrk(m.path, " \r"))
		m.path = "/";
	while ((line = strtok_r(NULL, "\n", &save)) && n < MAX_FIELDS) {
		char *colon = strchr(line, ':');

		if (!colon || strchr(colon, '\r'))
			continue;
		*colon = '\0';
		for (i = 0; line[i]; i++)
			if (line[i] >= 'A' && line[i] <= 'Z')
				line[i] = (char)(line[i] - 'A' + 'a');
		if (!name_ok(line) || reserved(line))
			continue;
		f[n++] = (struct sigv4_field){ line, colon + 1 };
		for (i = 0; i < nn && strcmp(names[i], line) != 0; i++)
			;
		if (i == nn)
			names[nn++] = line;
	}
	switch ((flags >> 1) & 3) {
	case 0:
		payload = "UNSIGNED-PAYLOAD";
		break;
	case 1:
		sigv4_sha256_hex(body ? body : "", blen, hash);
		payload = hash;
		break;
	case 2:
		payload = "STREAMING-AWS4-HMAC-SHA256-PAYLOAD";
		chunked = s3 = true;
		break;
	default:
		payload = NULL; /* the body's hash, given apart */
		sigv4_sha256_hex(body ? body : "", blen, hash);
		break;
	}
	f[n++] = (struct sigv4_field){ "Host", "bucket.s3.amazonaws.com" };
	names[nn++] = "host";
	f[n++] = (struct sigv4_field){ "X-Amz-Date", AMZ_DATE };
	names[nn++] = "x-amz-date";
	if (payload) {
		f[n++] = (struct sigv4_field){ "x-amz-content-sha256", payload };
		names[nn++] = "x-amz-content-sha256";
	}
	if (token) {
		tk = (int)n;
		f[n++] = (struct sigv4_field){ "X-Amz-Security-Token", PH_TOKEN };
		names[nn++] = "x-amz-security-token";
	}
	qsort(names, nn, sizeof(*names), name_cmp);
	for (i = 0; i < nn; i++)
		buf_printf(&sh, "%s%s", i ? ";" : "", names[i]);
	buf_append(&sh, "", 1);
	m.fields = f;
	m.nfields = n;

	/* the agent signs with the placeholder */
	CHECK(sigv4_canonical_request(&m, sh.data, payload ? payload : hash, s3, &canon) == 0);
	sigv4_signing_key(PH_SECRET, strlen(PH_SECRET), DATE, "us-east-1", s3 ? "s3" : "svc", key);
	sigv4_sign(key, AMZ_DATE, s3 ? DATE "/us-east-1/s3/aws4_request"
				 : DATE "/us-east-1/svc/aws4_request",
		   canon.data, canon.len, sig);
	if (sh.len + 200 < sizeof(auth)) {
		snprintf(auth, sizeof(auth),
			 "AWS4-HMAC-SHA256 Credential=" PH_KEY "/" DATE "/us-east-1/%s/aws4_request,"
			 " SignedHeaders=%s, Signature=%s", s3 ? "s3" : "svc", sh.data, sig);
		f[n] = (struct sigv4_field){ "Authorization", auth };
		m.nfields = n + 1;
		check_resign(&m, f, n, tk, payload ? NULL : hash, token, &rs);
		CHECK(rs.chunked == chunked);
		if (chunked)
			check_chunks(&rs, sig, (const uint8_t *)(body ? body : ""), blen, csize);
		sigv4_resign_free(&rs);
	}
	buf_free(&canon);
	buf_free(&sh);
	free(text);
	return 0;
}
