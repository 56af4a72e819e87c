/* SPDX-License-Identifier: Apache-2.0
 * subst.c - placeholder detection and the substitution decision.
 *
 * DOC: Theory of Operation
 *
 * The agent holds placeholders, never values. The proxy puts a value on
 * the wire only where the policy binds its secret: in a header value (of
 * one of `headers`, when given), on a request to one of `hosts`, on a path
 * under one of `paths` and with one of `methods` (when given), inside TLS
 * that the proxy intercepted and whose upstream certificate it verified.
 * Anywhere else a placeholder is refused: the whole request gets a 403 and
 * nothing of it is forwarded, so that a hostile instruction that tries to
 * move a credential somewhere new leaves a receipt instead of a request.
 *
 * The protection is the first paragraph: a value is written only where
 * bound. Everything below is detection, so that attempts are seen. An
 * agent that transforms its placeholder (reverses it, hex-encodes it,
 * splits it over two headers or sends it in a body) gains nothing -- the
 * upstream gets a worthless string -- but is not recorded either.
 *
 * Each text of the head is searched: the method, the path, the query, the
 * whole target, every header name and value. Forms found, per secret:
 *  - raw: the placeholder byte for byte (no case folding: a placeholder in
 *    another case is not the placeholder);
 *  - basic: a header value "Basic TOKEN" (scheme in any case) whose TOKEN
 *    is base64 of bytes holding the placeholder (HTTP Basic credentials,
 *    in the user or the password);
 *  - percent: the text after one to four rounds of percent-decoding
 *    (double encoding included) holds it;
 *  - base64: the text, or a percent-decoded round of it, holds the base64
 *    or base64url encoding of any text holding the placeholder, at any of
 *    the three alignments, padded or not (the characters fully determined
 *    by the placeholder are searched for).
 * Raw and Basic occurrences are blanked before the other forms are looked
 * for, so a substitutable placeholder is never mistaken for an encoded one.
 *
 * Decision, first refusal wins:
 *  1. any form in the method, target or a header name: refused;
 *  2. in a header value, percent or base64 form: refused (it cannot be
 *     substituted, so it is not a client using its credential);
 *  3. raw or basic form: refused unless tls_verified, the host is bound,
 *     the path, method and header are listed; the checks are made in that
 *     order and the first failing one is the reason;
 *  4. otherwise each such header is rewritten: raw occurrences replaced by
 *     the value (which covers "Bearer X" and "token X" and any other
 *     scheme), a Basic token decoded, substituted and re-encoded.
 * A header holding placeholders of two secrets is rewritten only if both
 * are bound there. A request without any placeholder passes unchanged:
 * an Authorization the agent brings itself is not touched.
 *
 * A path is under a prefix only if pathnorm.c, the normaliser of every
 * path rule, reads it without ambiguity (no dot segment, ';' parameter,
 * backslash, "//", encoded dot or separator...) and its decoded form
 * starts with the prefix.
 *
 * No value is compared here (only placeholders, which the agent knows);
 * values are only copied into rewritten headers, which subst_result_free()
 * wipes.
 */
#include "subst.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "pathnorm.h"
#include "util.h"

static const char *const verdict_names[] = {
	[SUBST_PASS] = "pass",
	[SUBST_REWRITE] = "rewrite",
	[SUBST_REFUSE] = "refuse",
};
static_assert(ARRAY_SIZE(verdict_names) == SUBST_VERDICT_COUNT, "verdict_names");

static const char *const where_names[] = {
	[SUBST_WHERE_METHOD] = "method",
	[SUBST_WHERE_PATH] = "path",
	[SUBST_WHERE_QUERY] = "query",
	[SUBST_WHERE_HEADER_NAME] = "header-name",
	[SUBST_WHERE_HEADER] = "header",
};
static_assert(ARRAY_SIZE(where_names) == SUBST_WHERE_COUNT, "where_names");

static const struct {
	const char *name;
	const char *reason;
} whys[] = {
	[SUBST_WHY_NOT_A_HEADER] = {
		"not-a-header",
		"a secret placeholder in the request line or a header name "
		"(only header values are substituted)" },
	[SUBST_WHY_ENCODED] = {
		"encoded", "an encoded secret placeholder (never substituted)" },
	[SUBST_WHY_PLAIN_HTTP] = {
		"plain-http", "a secret placeholder outside intercepted, verified TLS" },
	[SUBST_WHY_HOST] = {
		"host", "a secret placeholder to a host the secret is not bound to" },
	[SUBST_WHY_PATH] = {
		"path", "a secret placeholder on a path the secret does not list" },
	[SUBST_WHY_METHOD] = {
		"method", "a secret placeholder with a method the secret does not list" },
	[SUBST_WHY_HEADER] = {
		"header", "a secret placeholder in a header the secret does not list" },
};
static_assert(ARRAY_SIZE(whys) == SUBST_WHY_COUNT, "whys");

static const char *const form_names[] = {
	[SUBST_FORM_RAW] = "raw",
	[SUBST_FORM_BASIC] = "basic",
	[SUBST_FORM_PERCENT] = "percent",
	[SUBST_FORM_BASE64] = "base64",
};
static_assert(ARRAY_SIZE(form_names) == SUBST_FORM_COUNT, "form_names");

const char *subst_verdict_to_string(enum subst_verdict v)
{
	return (unsigned int)v < SUBST_VERDICT_COUNT ? verdict_names[v] : "?";
}

const char *subst_where_to_string(enum subst_where w)
{
	return (unsigned int)w < SUBST_WHERE_COUNT ? where_names[w] : "?";
}

const char *subst_why_to_string(enum subst_why w)
{
	return (unsigned int)w < SUBST_WHY_COUNT ? whys[w].name : "?";
}

const char *subst_why_reason(enum subst_why w)
{
	return (unsigned int)w < SUBST_WHY_COUNT ? whys[w].reason : "?";
}

const char *subst_form_to_string(enum subst_form f)
{
	return (unsigned int)f < SUBST_FORM_COUNT ? form_names[f] : "?";
}

#define FORM_BIT(f) (1u << (unsigned int)(f))
#define PERCENT_ROUNDS 4
/* A base64 needle shorter than this would match by chance. */
#define B64_NEEDLE_MIN 16

/* ------------------------------------------------------------------ */
/* Buffers and encodings                                              */
/* ------------------------------------------------------------------ */

/* A growable byte string; wiped when freed (it may hold a value). */
struct sbuf {
	char *p;
	size_t len, cap;
};

static void sbuf_add(struct sbuf *b, const void *p, size_t n)
{
	if (n == 0)
		return;
	ASSERT(n <= SIZE_MAX / 4 - b->len);
	if (b->cap - b->len < n + 1) {
		size_t cap = b->cap ? b->cap : 64;
		char *np;

		while (cap - b->len < n + 1)
			cap *= 2;
		/* not realloc: the old block may hold a value */
		np = util_xmalloc(cap);
		if (b->p) {
			memcpy(np, b->p, b->len);
			explicit_bzero(b->p, b->cap);
			free(b->p);
		}
		b->p = np;
		b->cap = cap;
	}
	memcpy(b->p + b->len, p, n);
	b->len += n;
	b->p[b->len] = '\0';
}

static void sbuf_wipe(struct sbuf *b)
{
	if (b->p) {
		explicit_bzero(b->p, b->cap);
		free(b->p);
	}
	memset(b, 0, sizeof(*b));
}

static const char b64_std[] =
	"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
static const char b64_url[] =
	"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

/* Base64 of @n bytes with alphabet @abc, padded when @pad. */
static void b64_encode(const unsigned char *in, size_t n, const char *abc,
		       bool pad, struct sbuf *out)
{
	size_t i;

	for (i = 0; i + 3 <= n; i += 3) {
		char q[4] = {
			abc[in[i] >> 2],
			abc[((in[i] & 3) << 4) | (in[i + 1] >> 4)],
			abc[((in[i + 1] & 15) << 2) | (in[i + 2] >> 6)],
			abc[in[i + 2] & 63],
		};

		sbuf_add(out, q, 4);
	}
	if (n - i == 1) {
		char q[4] = { abc[in[i] >> 2], abc[(in[i] & 3) << 4], '=', '=' };

		sbuf_add(out, q, pad ? 4 : 2);
	} else if (n - i == 2) {
		char q[4] = { abc[in[i] >> 2],
			      abc[((in[i] & 3) << 4) | (in[i + 1] >> 4)],
			      abc[(in[i + 1] & 15) << 2], '=' };

		sbuf_add(out, q, pad ? 4 : 3);
	}
}

static int b64_std_value(char c)
{
	const char *p = c ? strchr(b64_std, c) : NULL;

	return p ? (int)(p - b64_std) : -1;
}

/* Strict standard base64 (RFC 4648 section 4), padded or not; false on
 * any other byte, misplaced '=' or non-zero trailing bits. */
static bool b64_decode(const char *in, size_t n, struct sbuf *out)
{
	unsigned int acc = 0, bits = 0;
	size_t i, data = n;

	while (data > 0 && in[data - 1] == '=')
		data--;
	if (n - data > 2 || (n != data && n % 4 != 0) || data % 4 == 1)
		return false;
	for (i = 0; i < data; i++) {
		int v = b64_std_value(in[i]);

		if (v < 0)
			return false;
		acc = (acc << 6) | (unsigned int)v;
		bits += 6;
		if (bits >= 8) {
			unsigned char c = (unsigned char)(acc >> (bits - 8));

			bits -= 8;
			sbuf_add(out, &c, 1);
			acc &= (1u << bits) - 1;
		}
	}
	return acc == 0;
}

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* Decodes every valid %XX of @in into @out (a '%' without two hex digits
 * stays); returns whether anything was decoded. */
static bool pct_decode(const char *in, size_t n, struct sbuf *out)
{
	bool changed = false;
	size_t i;

	for (i = 0; i < n; i++) {
		int hi = i + 2 < n ? hexval(in[i + 1]) : -1;
		int lo = i + 2 < n ? hexval(in[i + 2]) : -1;

		if (in[i] == '%' && hi >= 0 && lo >= 0) {
			char c = (char)(hi * 16 + lo);

			sbuf_add(out, &c, 1);
			i += 2;
			changed = true;
		} else {
			sbuf_add(out, &in[i], 1);
		}
	}
	return changed;
}

/* ------------------------------------------------------------------ */
/* Finding placeholders                                               */
/* ------------------------------------------------------------------ */

static bool contains(const char *hay, size_t n, const char *needle, size_t m)
{
	return m > 0 && m <= n && memmem(hay, n, needle, m) != NULL;
}

/* Replaces every occurrence of @needle in @p by NULs (never part of a
 * placeholder); returns whether there was one. */
static bool blank(char *p, size_t n, const char *needle, size_t m)
{
	bool found = false;
	char *at, *from = p;

	while (m > 0 && (size_t)(from - p) + m <= n &&
	       (at = memmem(from, n - (size_t)(from - p), needle, m)) != NULL) {
		memset(at, 0, m);
		from = at + m;
		found = true;
	}
	return found;
}

#define B64_SMALL 256 /* base64 of a placeholder encoded on the stack */

/* Does @text hold the base64 or base64url form of a text that holds @s's
 * placeholder? */
static bool has_b64_form(const struct subst_secret *s, const char *text, size_t n)
{
	const char *const abcs[2] = { b64_std, b64_url };
	size_t a, k;

	for (a = 0; a < 3; a++) {
		/* the placeholder from its @a-th byte starts a 3-byte group */
		size_t full = s->placeholder_len > a ? (s->placeholder_len - a) / 3 * 3 : 0;

		if (full / 3 * 4 < B64_NEEDLE_MIN)
			continue;
		for (k = 0; k < 2; k++) {
			struct sbuf needle = { 0 };
			char small[B64_SMALL];
			bool hit;

			if (full / 3 * 4 <= sizeof(small)) {
				/* the common case, on every text of every
				 * request: no allocation */
				size_t i, m = 0;
				const char *abc = abcs[k];
				const unsigned char *in =
					(const unsigned char *)s->placeholder + a;

				for (i = 0; i < full; i += 3) {
					small[m++] = abc[in[i] >> 2];
					small[m++] = abc[((in[i] & 3) << 4) | (in[i + 1] >> 4)];
					small[m++] = abc[((in[i + 1] & 15) << 2) | (in[i + 2] >> 6)];
					small[m++] = abc[in[i + 2] & 63];
				}
				if (contains(text, n, small, m))
					return true;
				continue;
			}
			b64_encode((const unsigned char *)s->placeholder + a, full,
				   abcs[k], false, &needle);
			hit = contains(text, n, needle.p, needle.len);
			sbuf_wipe(&needle);
			if (hit)
				return true;
		}
	}
	return false;
}

/* What scan_text() found in one text. */
struct found {
	unsigned int *masks; /* per secret: FORM_BIT()s */
	bool any;
	/* "Basic TOKEN" with a placeholder inside: the decoded TOKEN */
	struct sbuf basic;
};

static void mark(struct found *f, size_t k, enum subst_form form)
{
	f->masks[k] |= FORM_BIT(form);
	f->any = true;
}

/* If @v is "Basic TOKEN" with a valid standard-base64 TOKEN, decodes it
 * into @out and sets *tok to TOKEN's offset in @v (it runs to the end). */
static bool basic_token(const char *v, size_t n, struct sbuf *out, size_t *tok)
{
	size_t i = 5;

	if (n < 7 || strncasecmp(v, "basic", 5) != 0 || v[5] != ' ')
		return false;
	while (i < n && v[i] == ' ')
		i++;
	if (i == n || !b64_decode(v + i, n - i, out)) {
		sbuf_wipe(out);
		return false;
	}
	*tok = i;
	return true;
}

/* Finds every form of every placeholder in @text (@n bytes); a header
 * value (@header_value) is also read as Basic credentials. */
static void scan_text(const struct subst_set *set, const char *text, size_t n,
		      bool header_value, struct found *f)
{
	struct sbuf work = { 0 }, round = { 0 }, next = { 0 };
	size_t k, tok = 0, r;

	memset(f->masks, 0, set->n * sizeof(*f->masks));
	f->any = false;
	memset(&f->basic, 0, sizeof(f->basic));
	if (n == 0)
		return;
	sbuf_add(&work, text, n);

	if (header_value && basic_token(text, n, &f->basic, &tok)) {
		bool inside = false;

		for (k = 0; k < set->n; k++) {
			const struct subst_secret *s = &set->secrets[k];

			if (contains(f->basic.p, f->basic.len, s->placeholder,
				     s->placeholder_len)) {
				mark(f, k, SUBST_FORM_BASIC);
				inside = true;
			}
		}
		if (inside)
			memset(work.p + tok, 0, n - tok);
		else
			sbuf_wipe(&f->basic);
	}
	for (k = 0; k < set->n; k++) {
		const struct subst_secret *s = &set->secrets[k];

		if (blank(work.p, work.len, s->placeholder, s->placeholder_len))
			mark(f, k, SUBST_FORM_RAW);
	}
	for (k = 0; k < set->n; k++)
		if (has_b64_form(&set->secrets[k], work.p, work.len))
			mark(f, k, SUBST_FORM_BASE64);

	sbuf_add(&round, work.p, work.len);
	for (r = 0; r < PERCENT_ROUNDS && memchr(round.p, '%', round.len); r++) {
		if (!pct_decode(round.p, round.len, &next))
			break;
		for (k = 0; k < set->n; k++) {
			const struct subst_secret *s = &set->secrets[k];

			if (contains(next.p, next.len, s->placeholder, s->placeholder_len))
				mark(f, k, SUBST_FORM_PERCENT);
			else if (has_b64_form(s, next.p, next.len))
				mark(f, k, SUBST_FORM_BASE64);
		}
		sbuf_wipe(&round);
		round = next;
		memset(&next, 0, sizeof(next));
	}
	sbuf_wipe(&next);
	sbuf_wipe(&round);
	sbuf_wipe(&work);
}

/* The first form in @mask, in enum order. */
static enum subst_form first_form(unsigned int mask)
{
	unsigned int f;

	for (f = 0; f < SUBST_FORM_COUNT; f++)
		if (mask & FORM_BIT(f))
			return (enum subst_form)f;
	return SUBST_FORM_RAW;
}

/* ------------------------------------------------------------------ */
/* Bindings                                                           */
/* ------------------------------------------------------------------ */

bool subst_path_under(const char *path, size_t len, const char *prefix)
{
	struct pathnorm pn;

	/* The one normaliser of every path rule (pathnorm.c): escapes that
	 * are safe are decoded, everything ambiguous refused. A prefix
	 * covers whole segments: "/sessions/1/pr" covers "/sessions/1/pr"
	 * and what lies under it, never "/sessions/1/provider-auth". */
	size_t k = strlen(prefix);

	if (pathnorm_parse(path, len, PATHNORM_MAX, PATHNORM_ESCAPES, &pn) != PATHNORM_OK)
		return false;
	/* "/v1/" covers what lies under /v1, not /v1 itself */
	if (k > 1 && prefix[k - 1] == '/' && pn.len == k - 1)
		return false;
	return pathnorm_under(&pn, prefix, true);
}

static bool slice_is(struct http_slice s, const char *lit)
{
	size_t n = strlen(lit);

	return s.len == n && (n == 0 || memcmp(s.ptr, lit, n) == 0);
}

static bool host_of(const struct subst_set *set, const struct subst_secret *s,
		    const struct host_target *host, uint16_t port)
{
	size_t i;

	for (i = 0; i < s->nhosts; i++)
		if (host_rule_matches(&s->hosts[i], host, port, set->ports, set->nports,
				      false))
			return true;
	return false;
}

bool subst_host_bound(const struct subst_set *set, const struct host_target *host,
		      uint16_t port)
{
	size_t k;

	for (k = 0; k < set->n; k++)
		if (host_of(set, &set->secrets[k], host, port))
			return true;
	return false;
}

/* Is @s allowed in header @name of this request? SUBST_WHY_COUNT if so,
 * else the first reason it is not. */
static enum subst_why binding(const struct subst_set *set, const struct subst_secret *s,
			      const struct http_request *req,
			      const struct host_target *host, uint16_t port,
			      bool tls_verified, struct http_slice name)
{
	struct http_slice path = req->path;
	bool ok;
	size_t i;

	if (!tls_verified)
		return SUBST_WHY_PLAIN_HTTP;
	if (!host_of(set, s, host, port))
		return SUBST_WHY_HOST;
	if (path.len == 0) {
		path.ptr = "/";
		path.len = 1;
	}
	for (ok = !s->paths, i = 0; s->paths && i < s->npaths && !ok; i++)
		ok = subst_path_under(path.ptr, path.len, s->paths[i]);
	if (!ok)
		return SUBST_WHY_PATH;
	for (ok = !s->methods, i = 0; s->methods && i < s->nmethods && !ok; i++)
		ok = slice_is(req->method, s->methods[i]);
	if (!ok)
		return SUBST_WHY_METHOD;
	for (ok = !s->headers, i = 0; s->headers && i < s->nheaders && !ok; i++)
		ok = http_slice_eq_ci(name, s->headers[i]);
	if (!ok)
		return SUBST_WHY_HEADER;
	return SUBST_WHY_COUNT;
}

/* ------------------------------------------------------------------ */
/* The decision                                                       */
/* ------------------------------------------------------------------ */

static void refuse(struct subst_result *r, size_t k, enum subst_where where,
		   enum subst_why why, enum subst_form form, size_t header)
{
	r->verdict = SUBST_REFUSE;
	r->secret = k;
	r->where = where;
	r->why = why;
	r->form = form;
	r->header = header;
}

/* Refuses for the first secret found in @text, if any; returns whether. */
static bool refuse_anywhere(const struct subst_set *set, struct found *f,
			    const char *text, size_t n, enum subst_where where,
			    size_t header, struct subst_result *r)
{
	size_t k;

	scan_text(set, text, n, false, f);
	for (k = 0; f->any && k < set->n; k++) {
		if (f->masks[k]) {
			refuse(r, k, where, SUBST_WHY_NOT_A_HEADER, first_form(f->masks[k]),
			       header);
			return true;
		}
	}
	return false;
}

/* @p with every placeholder of @set replaced by its value. */
static void replace_all(const struct subst_set *set, const char *p, size_t n,
			struct sbuf *out)
{
	size_t i = 0, k;

	while (i < n) {
		for (k = 0; k < set->n; k++) {
			const struct subst_secret *s = &set->secrets[k];

			if (n - i >= s->placeholder_len &&
			    memcmp(p + i, s->placeholder, s->placeholder_len) == 0)
				break;
		}
		if (k < set->n) {
			sbuf_add(out, set->secrets[k].value, set->secrets[k].value_len);
			i += set->secrets[k].placeholder_len;
		} else {
			sbuf_add(out, p + i, 1);
			i++;
		}
	}
}

static void add_rewrite(struct subst_result *r, const struct subst_set *set,
			const struct found *f, size_t h, struct http_slice value)
{
	struct sbuf out = { 0 };
	struct subst_rewrite *rw;
	size_t k;

	if (f->basic.p) {
		struct sbuf plain = { 0 };

		replace_all(set, f->basic.p, f->basic.len, &plain);
		sbuf_add(&out, "Basic ", 6);
		b64_encode((const unsigned char *)(plain.p ? plain.p : ""), plain.len,
			   b64_std, true, &out);
		sbuf_wipe(&plain);
	} else {
		replace_all(set, value.ptr, value.len, &out);
	}
	/* values hold no control byte (broker.c refuses them): a CR or LF
	 * here would end the header */
	for (k = 0; k < out.len; k++)
		ASSERT(out.p[k] != '\r' && out.p[k] != '\n' && out.p[k] != '\0');
	r->rewrites = util_xrealloc(r->rewrites, (r->nrewrites + 1) * sizeof(*r->rewrites));
	rw = &r->rewrites[r->nrewrites++];
	rw->header = h;
	rw->len = out.len;
	/* an empty value (a secret with an empty value) still needs a
	 * string to point at */
	rw->value = out.p ? out.p : util_xstrdup("");
	for (k = 0; k < set->n; k++) {
		if (!(f->masks[k] & (FORM_BIT(SUBST_FORM_RAW) | FORM_BIT(SUBST_FORM_BASIC))))
			continue;
		r->injections = util_xrealloc(r->injections,
					      (r->ninjections + 1) * sizeof(*r->injections));
		r->injections[r->ninjections].secret = k;
		r->injections[r->ninjections].header = h;
		r->ninjections++;
	}
}

void subst_decide(const struct subst_set *set, const struct http_request *req,
		  const struct host_target *host, uint16_t port, bool tls_verified,
		  struct subst_result *r)
{
	struct found f = { 0 };
	bool *rewrite = NULL;
	size_t h, k;

	memset(r, 0, sizeof(*r));
	r->verdict = SUBST_PASS;
	if (set->n == 0)
		return;
	f.masks = util_xcalloc(set->n, sizeof(*f.masks));

	if (refuse_anywhere(set, &f, req->method.ptr, req->method.len,
			    SUBST_WHERE_METHOD, 0, r) ||
	    refuse_anywhere(set, &f, req->path.ptr, req->path.len, SUBST_WHERE_PATH, 0, r) ||
	    refuse_anywhere(set, &f, req->query.ptr, req->query.len, SUBST_WHERE_QUERY, 0, r) ||
	    refuse_anywhere(set, &f, req->target.ptr, req->target.len, SUBST_WHERE_PATH, 0, r))
		goto out;
	for (h = 0; h < req->headers.count; h++)
		if (refuse_anywhere(set, &f, req->headers.h[h].name.ptr,
				    req->headers.h[h].name.len, SUBST_WHERE_HEADER_NAME, h, r))
			goto out;

	/* Values: decide every header before rewriting any. */
	rewrite = util_xcalloc(req->headers.count ? req->headers.count : 1, sizeof(*rewrite));
	for (h = 0; h < req->headers.count; h++) {
		const struct http_header *hd = &req->headers.h[h];

		scan_text(set, hd->value.ptr, hd->value.len, true, &f);
		for (k = 0; f.any && k < set->n; k++) {
			unsigned int m = f.masks[k];
			enum subst_why why;

			if (!m)
				continue;
			if (m & (FORM_BIT(SUBST_FORM_PERCENT) | FORM_BIT(SUBST_FORM_BASE64))) {
				refuse(r, k, SUBST_WHERE_HEADER, SUBST_WHY_ENCODED,
				       (m & FORM_BIT(SUBST_FORM_PERCENT)) ? SUBST_FORM_PERCENT
									: SUBST_FORM_BASE64,
				       h);
				goto out;
			}
			why = binding(set, &set->secrets[k], req, host, port, tls_verified,
				      hd->name);
			if (why != SUBST_WHY_COUNT) {
				refuse(r, k, SUBST_WHERE_HEADER, why, first_form(m), h);
				goto out;
			}
			rewrite[h] = true;
		}
		sbuf_wipe(&f.basic);
	}
	for (h = 0; h < req->headers.count; h++) {
		if (!rewrite[h])
			continue;
		scan_text(set, req->headers.h[h].value.ptr, req->headers.h[h].value.len,
			  true, &f);
		add_rewrite(r, set, &f, h, req->headers.h[h].value);
		sbuf_wipe(&f.basic);
		r->verdict = SUBST_REWRITE;
	}
out:
	if (r->verdict == SUBST_REFUSE) {
		/* nothing half-built survives a refusal */
		struct subst_result keep = *r;

		keep.rewrites = NULL;
		keep.nrewrites = 0;
		keep.injections = NULL;
		keep.ninjections = 0;
		subst_result_free(r);
		*r = keep;
	}
	sbuf_wipe(&f.basic);
	free(f.masks);
	free(rewrite);
}

void subst_result_free(struct subst_result *r)
{
	size_t i;

	for (i = 0; i < r->nrewrites; i++) {
		explicit_bzero(r->rewrites[i].value, r->rewrites[i].len);
		free(r->rewrites[i].value);
	}
	free(r->rewrites);
	free(r->injections);
	r->rewrites = NULL;
	r->injections = NULL;
	r->nrewrites = r->ninjections = 0;
}

void subst_rule(const struct subst_set *set, const struct subst_result *r,
		char *buf, size_t len)
{
	const char *name = r->secret < set->n ? set->secrets[r->secret].name : "?";
	const char *field = NULL;

	switch (r->why) {
	case SUBST_WHY_HOST:
		field = "hosts";
		break;
	case SUBST_WHY_PATH:
		field = "paths";
		break;
	case SUBST_WHY_METHOD:
		field = "methods";
		break;
	case SUBST_WHY_HEADER:
		field = "headers";
		break;
	case SUBST_WHY_NOT_A_HEADER:
	case SUBST_WHY_ENCODED:
	case SUBST_WHY_PLAIN_HTTP:
	case SUBST_WHY_COUNT:
	default:
		break;
	}
	if (field)
		snprintf(buf, len, "secrets.%s.%s", name, field);
	else
		snprintf(buf, len, "secrets.%s", name);
}
