/* SPDX-License-Identifier: Apache-2.0
 * meter.c - the spend meter (meter.h, docs/SPEND.md).
 *
 * DOC: Theory of Operation
 *
 * The cap holds only if every metered call is reserved before it is
 * forwarded and charged from what the provider itself answered. The meter
 * decides the three things that needs, each as a pure function:
 *
 * 1. Which requests are metered (meter_classify). The provider's metered
 *    paths are compared exactly, query dropped, POST only. GET and HEAD
 *    pass, except under a path where a read opens a billed session
 *    (costly_reads: the Realtime WebSocket, told by its path however the
 *    upgrade travels); every other request is "unmetered": it may cost money (batches,
 *    realtime, images, audio) and the caller refuses it under a cap unless
 *    the policy's spend.pass lists its path (meter_pass_match, plain
 *    spellings only). A spelling that a lenient server could read as a
 *    metered path ("//v1/messages", "/v1/messages/", "/V1/%6Dessages",
 *    "/v1/./messages", method "post") is refused rather than passed:
 *    passing it would be a way around the meter.
 *
 * 2. What a request reserves (meter_request_parse). The whole body is read
 *    by a strict RFC 8259 scanner written here, because the meter needs
 *    what no JSON library gives: the byte offsets of the members it reads
 *    (so that the stream_options rewrite changes only those bytes and the
 *    agent's request reaches the provider otherwise byte for byte), and
 *    one pass without building a tree (a 32 MiB body costs one scan, no
 *    allocation). Keys are compared after their escapes are decoded
 *    ("mo\u0064el" is "model"), and a member the meter reads that appears
 *    twice is refused: a provider that keeps the other copy would run a
 *    model or a bound the meter never saw. The reservation is
 *        body_bytes x max(input, cache_write) + max_output x output
 *    (prices per million tokens): every input token comes from at least
 *    one body byte except those a provider adds itself, so the first term
 *    bounds input and cache writes; the second bounds what the request
 *    allows to be generated (openai's n and best_of multiply it). A
 *    request without a bound is sent with the one reserved written into
 *    its body (the bound reserved is the bound sent). Members that make
 *    the provider add input from its own storage (previous_response_id, a
 *    file_id, a stored prompt, ...) are found at any depth in the same
 *    scan: such a request is refused, or with server_state "allow"
 *    reserves the policy's server_state_reserve on top. Embeddings
 *    reserve their input only.
 *
 * 3. What an answer costs (meter_response_*). The parser is fed the
 *    decoded body in whatever slices the proxy relays and keeps only
 *    bounded state: an SSE line and event (max_sse_event) or a JSON body
 *    (max_json_body). Usage is read from anthropic's message_start (input
 *    and cache tokens) and the last message_delta (output: cumulative, so
 *    it replaces, never adds; input and cache counts a delta carries
 *    replace message_start's the same way), complete at message_stop;
 *    openai's usage chunk (complete there) and response.completed (or
 *    response.incomplete, which carries the same final usage); a JSON
 *    body's "usage". openai counts cached tokens inside prompt_tokens: the
 *    meter charges prompt - cached as input and cached as cache reads.
 *
 * Outcomes, fail-closed: a complete answer with usage is charged its
 * cost (one reporting more output than the bound sent is an overrun,
 * charged all the same); a 2xx answer that is cut, reports an error mid-stream, or has no
 * usable usage is charged its whole reservation (the provider may have
 * billed it and the meter cannot prove otherwise); a non-2xx answer
 * without usage is charged nothing (providers do not bill refused calls).
 *
 * Arithmetic is exact: prices are integer nano-dollars per million tokens
 * (a policy price is rounded once, to the nearest), token counts are
 * integers, and a cost or reservation is their sum of products in 128
 * bits divided by 10^6 and rounded up to a whole nano-dollar, once per
 * call. A call is never charged less than its tokens cost; the rounding
 * adds less than one nano-dollar per call.
 */
#include "meter.h"

#include <assert.h>
#include <ctype.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "policy.h"
#include "util.h"

/* ------------------------------------------------------------------ */
/* Names                                                              */
/* ------------------------------------------------------------------ */

static const char *const api_names[] = {
	[METER_API_ANTHROPIC] = "anthropic",
	[METER_API_OPENAI] = "openai",
};
static_assert(ARRAY_SIZE(api_names) == METER_API_COUNT,
	      "api_names out of sync with enum meter_api");

const char *meter_api_to_string(enum meter_api a)
{
	if ((unsigned int)a >= METER_API_COUNT)
		return "unknown";
	return api_names[a];
}

bool meter_api_from_string(const char *s, enum meter_api *out)
{
	size_t i;

	for (i = 0; i < METER_API_COUNT; i++) {
		if (strcmp(s, api_names[i]) == 0) {
			*out = (enum meter_api)i;
			return true;
		}
	}
	return false;
}

static const char *const endpoint_paths[] = {
	[METER_ENDPOINT_NONE] = "none",
	[METER_ENDPOINT_ANTHROPIC_MESSAGES] = "/v1/messages",
	[METER_ENDPOINT_OPENAI_CHAT] = "/v1/chat/completions",
	[METER_ENDPOINT_OPENAI_RESPONSES] = "/v1/responses",
	[METER_ENDPOINT_OPENAI_COMPLETIONS] = "/v1/completions",
	[METER_ENDPOINT_OPENAI_EMBEDDINGS] = "/v1/embeddings",
};
static_assert(ARRAY_SIZE(endpoint_paths) == METER_ENDPOINT_COUNT,
	      "endpoint_paths out of sync with enum meter_endpoint");

static const enum meter_api endpoint_api[] = {
	[METER_ENDPOINT_NONE] = METER_API_COUNT,
	[METER_ENDPOINT_ANTHROPIC_MESSAGES] = METER_API_ANTHROPIC,
	[METER_ENDPOINT_OPENAI_CHAT] = METER_API_OPENAI,
	[METER_ENDPOINT_OPENAI_RESPONSES] = METER_API_OPENAI,
	[METER_ENDPOINT_OPENAI_COMPLETIONS] = METER_API_OPENAI,
	[METER_ENDPOINT_OPENAI_EMBEDDINGS] = METER_API_OPENAI,
};
static_assert(ARRAY_SIZE(endpoint_api) == METER_ENDPOINT_COUNT,
	      "endpoint_api out of sync with enum meter_endpoint");

const char *meter_endpoint_to_string(enum meter_endpoint e)
{
	if ((unsigned int)e >= METER_ENDPOINT_COUNT)
		return "unknown";
	return endpoint_paths[e];
}

static const char *const route_names[] = {
	[METER_ROUTE_PASS] = "pass",
	[METER_ROUTE_METER] = "meter",
	[METER_ROUTE_REFUSE] = "refuse",
	[METER_ROUTE_UNMETERED] = "unmetered",
};
static_assert(ARRAY_SIZE(route_names) == METER_ROUTE_COUNT,
	      "route_names out of sync with enum meter_route");

const char *meter_route_to_string(enum meter_route r)
{
	if ((unsigned int)r >= METER_ROUTE_COUNT)
		return "unknown";
	return route_names[r];
}

static const char *const outcome_names[] = {
	[METER_OUTCOME_USAGE] = "usage",
	[METER_OUTCOME_CUT] = "cut",
	[METER_OUTCOME_NO_USAGE] = "no_usage",
	[METER_OUTCOME_ERROR] = "error",
};
static_assert(ARRAY_SIZE(outcome_names) == METER_OUTCOME_COUNT,
	      "outcome_names out of sync with enum meter_outcome");

const char *meter_outcome_to_string(enum meter_outcome o)
{
	if ((unsigned int)o >= METER_OUTCOME_COUNT)
		return "unknown";
	return outcome_names[o];
}

bool meter_config_from_policy(struct meter_config *cfg, const struct policy *p)
{
	struct meter_price *prices;
	size_t i;

	memset(cfg, 0, sizeof(*cfg));
	prices = util_xcalloc(p->nspend_prices ? p->nspend_prices : 1,
			      sizeof(*prices));
	for (i = 0; i < p->nspend_prices; i++) {
		const struct policy_price *pp = &p->spend_prices[i];

		if (!meter_price_set(&prices[i], pp->model, pp->input, pp->output,
				     &pp->cache_write, &pp->cache_read)) {
			free(prices);
			return false;
		}
	}
	cfg->prices = prices;
	cfg->nprices = p->nspend_prices;
	cfg->max_body_bytes = p->spend_max_body_bytes;
	cfg->default_max_output_tokens = p->spend_default_max_output_tokens;
	cfg->server_state_allow = p->spend_server_state == POLICY_SERVER_STATE_ALLOW;
	if (cfg->server_state_allow && p->spend_has_server_state_reserve &&
	    !meter_usd_to_nano(p->spend_server_state_reserve_usd,
			       &cfg->server_state_reserve)) {
		free(prices);
		memset(cfg, 0, sizeof(*cfg));
		return false;
	}
	return true;
}

void meter_config_free(struct meter_config *cfg)
{
	free((void *)cfg->prices);
	memset(cfg, 0, sizeof(*cfg));
}

static_assert((int)POLICY_SPEND_ANTHROPIC == (int)METER_API_ANTHROPIC &&
	      (int)POLICY_SPEND_OPENAI == (int)METER_API_OPENAI &&
	      (int)POLICY_SPEND_API_COUNT == (int)METER_API_COUNT,
	      "the policy's spend apis are the meter's");

enum meter_api meter_api_of_policy(int policy_spend_api)
{
	ASSERT(policy_spend_api >= 0 && policy_spend_api < METER_API_COUNT);
	return (enum meter_api)policy_spend_api;
}

/* ------------------------------------------------------------------ */
/* Which requests are metered                                         */
/* ------------------------------------------------------------------ */

static int hexval(unsigned char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* Decodes every %XX of @s in place; returns the new length. */
static size_t percent_decode(char *s, size_t len, bool *changed)
{
	size_t i, o = 0;

	*changed = false;
	for (i = 0; i < len; i++) {
		int hi, lo;

		if (s[i] == '%' && i + 2 < len &&
		    (hi = hexval((unsigned char)s[i + 1])) >= 0 &&
		    (lo = hexval((unsigned char)s[i + 2])) >= 0) {
			s[o++] = (char)(hi * 16 + lo);
			i += 2;
			*changed = true;
		} else {
			s[o++] = s[i];
		}
	}
	return o;
}

/* The path a lenient server might read @path as: percent-decoded (until
 * nothing changes, at most 4 rounds), lowercase, '\' as '/', fragment and
 * ";params" dropped, empty and "." segments removed, ".." applied, no
 * trailing slash. Returns a malloc'd string. */
static char *lenient_path(const char *path, size_t len)
{
	char *s = util_xmalloc(len + 1), *out; /* not strndup: @path may hold NULs */
	size_t n = len, i, o = 0, seg;
	bool changed = true;
	int round;

	memcpy(s, path, len);
	s[len] = '\0';
	for (round = 0; round < 4 && changed; round++)
		n = percent_decode(s, n, &changed);
	for (i = 0; i < n; i++) {
		if (s[i] == '#') {
			n = i;
			break;
		}
		s[i] = (char)(s[i] == '\\' ? '/' : tolower((unsigned char)s[i]));
	}
	out = util_xmalloc(n + 2);
	i = 0;
	while (i < n) {
		size_t start, end, cut;

		while (i < n && s[i] == '/')
			i++;
		start = i;
		while (i < n && s[i] != '/')
			i++;
		end = i;
		for (cut = start; cut < end && s[cut] != ';'; cut++)
			;
		end = cut;
		if (end == start || (end - start == 1 && s[start] == '.'))
			continue;
		if (end - start == 2 && s[start] == '.' && s[start + 1] == '.') {
			while (o > 0 && out[o - 1] != '/')
				o--;
			if (o > 0)
				o--;
			continue;
		}
		out[o++] = '/';
		for (seg = start; seg < end; seg++)
			out[o++] = s[seg];
	}
	if (o == 0)
		out[o++] = '/';
	out[o] = '\0';
	free(s);
	return out;
}

static bool ascii_caseeq(const char *a, size_t alen, const char *b)
{
	size_t i;

	if (alen != strlen(b))
		return false;
	for (i = 0; i < alen; i++)
		if (tolower((unsigned char)a[i]) != tolower((unsigned char)b[i]))
			return false;
	return true;
}

/* Paths where even a read costs money: a GET there opens a session the
 * provider bills (the Realtime API's WebSocket). Classified by the path,
 * whatever carries the upgrade (an HTTP/1.1 Upgrade header, RFC 8441's
 * extended CONNECT over h2, or nothing: an h2 client drops Upgrade), and
 * compared in the lenient spelling, whole segments. */
static const struct {
	enum meter_api api;
	const char *prefix;
} costly_reads[] = {
	{ METER_API_OPENAI, "/v1/realtime" },
};

static bool costly_read(enum meter_api api, const char *path, size_t plen)
{
	char *lenient = NULL;
	bool hit = false;
	size_t i;

	for (i = 0; i < ARRAY_SIZE(costly_reads) && !hit; i++) {
		size_t n = strlen(costly_reads[i].prefix);

		if (costly_reads[i].api != api)
			continue;
		if (!lenient)
			lenient = lenient_path(path, plen);
		hit = strncmp(lenient, costly_reads[i].prefix, n) == 0 &&
		      (lenient[n] == '\0' || lenient[n] == '/');
	}
	free(lenient);
	return hit;
}

enum meter_route meter_classify(enum meter_api api, const char *method,
				size_t method_len, const char *target,
				size_t target_len, enum meter_endpoint *ep)
{
	const char *path = target;
	size_t plen, i;
	bool post, post_like;
	enum meter_route route;
	char *lenient = NULL;

	*ep = METER_ENDPOINT_NONE;
	if (target_len >= 8 && ascii_caseeq(target, 8, "https://"))
		i = 8;
	else if (target_len >= 7 && ascii_caseeq(target, 7, "http://"))
		i = 7;
	else
		i = 0;
	if (i > 0) {
		while (i < target_len && target[i] != '/' && target[i] != '?')
			i++;
		path = target + i;
		target_len -= i;
	} else if (target_len == 0 || target[0] != '/') {
		/* "*" (OPTIONS) or nonsense: nothing the meter can price */
		return (method_len == 3 && memcmp(method, "GET", 3) == 0) ||
		       (method_len == 4 && memcmp(method, "HEAD", 4) == 0)
			       ? METER_ROUTE_PASS : METER_ROUTE_UNMETERED;
	}
	for (plen = 0; plen < target_len && path[plen] != '?'; plen++)
		;
	post = method_len == 4 && memcmp(method, "POST", 4) == 0;
	post_like = ascii_caseeq(method, method_len, "POST");
	/* What costs nothing: reading. Anything else the meter does not
	 * price is unmetered (the caller refuses it under a cap). */
	if ((method_len == 3 && memcmp(method, "GET", 3) == 0) ||
	    (method_len == 4 && memcmp(method, "HEAD", 4) == 0))
		route = costly_read(api, path, plen) ? METER_ROUTE_UNMETERED
						     : METER_ROUTE_PASS;
	else
		route = METER_ROUTE_UNMETERED;

	for (i = 1; i < METER_ENDPOINT_COUNT; i++) {
		if (endpoint_api[i] != api)
			continue;
		if (plen == strlen(endpoint_paths[i]) &&
		    memcmp(path, endpoint_paths[i], plen) == 0) {
			if (post) {
				*ep = (enum meter_endpoint)i;
				return METER_ROUTE_METER;
			}
			return post_like ? METER_ROUTE_REFUSE : route;
		}
	}
	if (!post_like)
		return route;
	lenient = lenient_path(path, plen);
	for (i = 1; i < METER_ENDPOINT_COUNT; i++)
		if (endpoint_api[i] == api && strcmp(lenient, endpoint_paths[i]) == 0)
			route = METER_ROUTE_REFUSE;
	free(lenient);
	return route;
}

/* The path of an origin-form or absolute-form @target, query dropped. */
static void target_path(const char *target, size_t tlen, const char **path,
			size_t *plen)
{
	size_t i = 0, n;

	if (tlen >= 8 && ascii_caseeq(target, 8, "https://"))
		i = 8;
	else if (tlen >= 7 && ascii_caseeq(target, 7, "http://"))
		i = 7;
	if (i > 0)
		while (i < tlen && target[i] != '/' && target[i] != '?')
			i++;
	for (n = 0; i + n < tlen && target[i + n] != '?'; n++)
		;
	*path = target + i;
	*plen = n;
}

bool meter_pass_match(char *const *prefixes, size_t n, const char *target,
		      size_t target_len)
{
	const char *path;
	size_t plen, i;

	target_path(target, target_len, &path, &plen);
	if (plen == 0 || path[0] != '/')
		return false;
	for (i = 0; i < plen; i++) {
		char c = path[i];

		if (c == '%' || c == '\\' || c == ';' || c == '#' || c == '\0' ||
		    (unsigned char)c < 0x21 || (unsigned char)c >= 0x7f)
			return false;
		if (c == '/') {
			size_t seg = i + 1, len = 0;

			while (seg + len < plen && path[seg + len] != '/')
				len++;
			if ((len == 0 && seg < plen) ||
			    (len == 1 && path[seg] == '.') ||
			    (len == 2 && path[seg] == '.' && path[seg + 1] == '.'))
				return false;
		}
	}
	for (i = 0; i < n; i++) {
		size_t l = strlen(prefixes[i]);

		if (l <= plen && memcmp(path, prefixes[i], l) == 0 &&
		    (l == plen || path[l] == '/'))
			return true;
	}
	return false;
}

/* ------------------------------------------------------------------ */
/* Money                                                              */
/* ------------------------------------------------------------------ */

typedef unsigned __int128 u128;

#define TOKENS_PER_PRICE_UNIT 1000000u /* prices are per million tokens */

static bool dollars_to_nano(double usd, int64_t max, int64_t *out)
{
	double v;

	if (!isfinite(usd) || usd < 0)
		return false;
	v = usd * (double)METER_NANO_PER_USD;
	if (v > (double)max)
		return false;
	/* Round half up; v is non-negative and at most 1e18 (no libm). */
	*out = (int64_t)(v + 0.5);
	return *out <= max;
}

bool meter_usd_to_nano(double usd, int64_t *out)
{
	return dollars_to_nano(usd, METER_MONEY_MAX, out);
}

void meter_format_usd(int64_t nano, char out[METER_USD_LEN])
{
	uint64_t mag = nano < 0 ? (uint64_t)0 - (uint64_t)nano : (uint64_t)nano;
	uint64_t whole = mag / (uint64_t)METER_NANO_PER_USD;
	uint64_t frac = mag % (uint64_t)METER_NANO_PER_USD;
	int n, digits = 9;

	n = snprintf(out, METER_USD_LEN, "%s%llu", nano < 0 ? "-" : "",
		     (unsigned long long)whole);
	ASSERT(n > 0 && n < METER_USD_LEN);
	if (frac == 0)
		return;
	while (frac % 10 == 0) {
		frac /= 10;
		digits--;
	}
	n = snprintf(out + n, METER_USD_LEN - (size_t)n, ".%0*llu", digits,
		     (unsigned long long)frac);
	ASSERT(n > 0 && n < 11);
}

bool meter_price_set(struct meter_price *p, const char *model, double input,
		     double output, const double *cache_write,
		     const double *cache_read)
{
	struct meter_price q = { .model = model };

	if (!dollars_to_nano(input, METER_PRICE_MAX, &q.input) ||
	    !dollars_to_nano(output, METER_PRICE_MAX, &q.output))
		return false;
	if (cache_write) {
		if (!dollars_to_nano(*cache_write, METER_PRICE_MAX, &q.cache_write))
			return false;
	} else {
		/* 1.25 x input, to the nearest; input <= 1e15 cannot overflow */
		q.cache_write = (q.input * 5 + 2) / 4;
	}
	if (cache_read) {
		if (!dollars_to_nano(*cache_read, METER_PRICE_MAX, &q.cache_read))
			return false;
	} else {
		q.cache_read = (q.input + 5) / 10;
	}
	*p = q;
	return true;
}

const struct meter_price *meter_price_lookup(const struct meter_price *prices,
					     size_t n, const char *model)
{
	const struct meter_price *best = NULL;
	size_t i, best_len = 0;

	for (i = 0; i < n; i++)
		if (strcmp(prices[i].model, model) == 0)
			return &prices[i];
	for (i = 0; i < n; i++) {
		size_t plen = strlen(prices[i].model);

		if (plen == 0 || prices[i].model[plen - 1] != '*')
			continue;
		plen--;
		if (strncmp(prices[i].model, model, plen) == 0 &&
		    (!best || plen > best_len)) {
			best = &prices[i];
			best_len = plen;
		}
	}
	return best;
}

/* ceil(@num / 10^6) as nano-dollars; false above METER_MONEY_MAX. */
static bool per_million_ceil(u128 num, int64_t *out)
{
	u128 v = (num + (TOKENS_PER_PRICE_UNIT - 1)) / TOKENS_PER_PRICE_UNIT;

	if (v > (u128)METER_MONEY_MAX)
		return false;
	*out = (int64_t)v;
	return true;
}

bool meter_reservation(const struct meter_price *p, uint64_t body_bytes,
		       uint64_t max_output, int64_t *out)
{
	int64_t in = p->input > p->cache_write ? p->input : p->cache_write;

	ASSERT(in >= 0 && p->output >= 0);
	return per_million_ceil((u128)body_bytes * (u128)in +
				(u128)max_output * (u128)p->output, out);
}

bool meter_cost(const struct meter_price *p, const struct meter_usage *u,
		int64_t *out)
{
	ASSERT(p->input >= 0 && p->output >= 0 && p->cache_write >= 0 &&
	       p->cache_read >= 0);
	return per_million_ceil((u128)u->input * (u128)p->input +
				(u128)u->output * (u128)p->output +
				(u128)u->cache_write * (u128)p->cache_write +
				(u128)u->cache_read * (u128)p->cache_read, out);
}

/* ------------------------------------------------------------------ */
/* The request body: a strict JSON scanner that remembers offsets      */
/* ------------------------------------------------------------------ */

/* Containers deeper than this are refused (Python's json and jansson
 * stop near 1000 and 2048). */
#define JSON_MAX_DEPTH 1024

enum jkind { JK_NONE = 0, JK_OBJECT, JK_ARRAY, JK_STRING, JK_NUMBER, JK_TRUE,
	     JK_FALSE, JK_NULL };

/* A member value: bytes [start, end) of the body. */
struct jspan {
	bool seen;
	enum jkind kind;
	size_t start, end;
};

/* The top-level members the meter reads. */
enum member { M_MODEL, M_MAX_TOKENS, M_MAX_COMPLETION_TOKENS,
	      M_MAX_OUTPUT_TOKENS, M_STREAM, M_STREAM_OPTIONS, M_N, M_BEST_OF,
	      M_COUNT };

static const char *const member_names[] = {
	[M_MODEL] = "model",
	[M_MAX_TOKENS] = "max_tokens",
	[M_MAX_COMPLETION_TOKENS] = "max_completion_tokens",
	[M_MAX_OUTPUT_TOKENS] = "max_output_tokens",
	[M_STREAM] = "stream",
	[M_STREAM_OPTIONS] = "stream_options",
	[M_N] = "n",
	[M_BEST_OF] = "best_of",
};
static_assert(ARRAY_SIZE(member_names) == M_COUNT,
	      "member_names out of sync with enum member");

/* Longest key the scanner decodes to compare; longer keys are none of
 * ours. */
#define KEY_MAX 32

struct scan {
	const char *b;
	size_t len, pos;
	enum meter_endpoint ep;
	const char *server_state;    /* static: the first member that pulls
					stored input, or NULL */
	size_t open;                 /* offset of the top-level '{' */
	struct jspan m[M_COUNT];
	struct jspan include_usage;  /* stream_options.include_usage */
	size_t so_members;           /* members of stream_options */
	const char *error;           /* static; NULL while valid */
	size_t error_at;
};

static bool scan_fail(struct scan *s, const char *why, size_t at)
{
	if (!s->error) {
		s->error = why;
		s->error_at = at;
	}
	return false;
}

/* Length of the well-formed UTF-8 sequence at @p (RFC 3629: no
 * overlongs, no surrogates, nothing above U+10FFFF), 0 if there is none. */
static size_t utf8_seq(const unsigned char *p, size_t avail)
{
	unsigned char c = p[0];
	size_t n, i;
	unsigned char lo = 0x80, hi = 0xbf;

	if (c >= 0xc2 && c <= 0xdf)
		n = 2;
	else if (c >= 0xe0 && c <= 0xef)
		n = 3;
	else if (c >= 0xf0 && c <= 0xf4)
		n = 4;
	else
		return 0;
	if (avail < n)
		return 0;
	if (c == 0xe0)
		lo = 0xa0;
	else if (c == 0xed)
		hi = 0x9f;
	else if (c == 0xf0)
		lo = 0x90;
	else if (c == 0xf4)
		hi = 0x8f;
	if (p[1] < lo || p[1] > hi)
		return 0;
	for (i = 2; i < n; i++)
		if (p[i] < 0x80 || p[i] > 0xbf)
			return 0;
	return n;
}

struct decoded {
	char *buf;       /* NULL: validate only */
	size_t cap, len;
	bool overflow;   /* more than cap bytes */
	bool nul;        /* holds U+0000 */
};

static void dec_put(struct decoded *d, const char *p, size_t n)
{
	if (!d->buf)
		return;
	if (d->len + n > d->cap) {
		d->overflow = true;
		return;
	}
	memcpy(d->buf + d->len, p, n);
	d->len += n;
}

static void dec_put_cp(struct decoded *d, unsigned long cp)
{
	char u[4];
	size_t n;

	if (cp == 0)
		d->nul = true;
	if (cp < 0x80) {
		u[0] = (char)cp;
		n = 1;
	} else if (cp < 0x800) {
		u[0] = (char)(0xc0 | (cp >> 6));
		u[1] = (char)(0x80 | (cp & 0x3f));
		n = 2;
	} else if (cp < 0x10000) {
		u[0] = (char)(0xe0 | (cp >> 12));
		u[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
		u[2] = (char)(0x80 | (cp & 0x3f));
		n = 3;
	} else {
		u[0] = (char)(0xf0 | (cp >> 18));
		u[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
		u[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
		u[3] = (char)(0x80 | (cp & 0x3f));
		n = 4;
	}
	dec_put(d, u, n);
}

static bool read_hex4(struct scan *s, size_t at, unsigned long *out)
{
	unsigned long v = 0;
	size_t i;

	if (at + 4 > s->len)
		return scan_fail(s, "a \\u escape is cut short", at);
	for (i = 0; i < 4; i++) {
		int h = hexval((unsigned char)s->b[at + i]);

		if (h < 0)
			return scan_fail(s, "a \\u escape is not four hex digits", at);
		v = v * 16 + (unsigned long)h;
	}
	*out = v;
	return true;
}

/* Scans the string at s->pos (a '"'), decoding it into @d when d->buf is
 * set; leaves s->pos after the closing quote. */
static bool scan_string(struct scan *s, struct decoded *d)
{
	const unsigned char *b = (const unsigned char *)s->b;
	size_t i = s->pos + 1;

	for (;;) {
		size_t run = i;

		while (i < s->len && b[i] >= 0x20 && b[i] < 0x80 && b[i] != '"' &&
		       b[i] != '\\')
			i++;
		dec_put(d, s->b + run, i - run);
		if (i >= s->len)
			return scan_fail(s, "a string is not terminated", s->pos);
		if (b[i] == '"')
			break;
		if (b[i] == '\\') {
			unsigned long cp = 0, lo = 0;
			char e;

			if (i + 1 >= s->len)
				return scan_fail(s, "a string is not terminated", s->pos);
			e = s->b[i + 1];
			i += 2;
			switch (e) {
			case '"': case '\\': case '/':
				dec_put(d, &e, 1);
				continue;
			case 'b': dec_put_cp(d, 8); continue;
			case 'f': dec_put_cp(d, 12); continue;
			case 'n': dec_put_cp(d, 10); continue;
			case 'r': dec_put_cp(d, 13); continue;
			case 't': dec_put_cp(d, 9); continue;
			case 'u':
				break;
			default:
				return scan_fail(s, "a string holds an invalid escape",
						 i - 2);
			}
			if (!read_hex4(s, i, &cp))
				return false;
			i += 4;
			if (cp >= 0xdc00 && cp <= 0xdfff)
				return scan_fail(s, "a string holds a lone surrogate",
						 i - 6);
			if (cp >= 0xd800 && cp <= 0xdbff) {
				if (i + 2 > s->len || b[i] != '\\' || b[i + 1] != 'u')
					return scan_fail(s, "a string holds a lone "
							 "surrogate", i - 6);
				if (!read_hex4(s, i + 2, &lo))
					return false;
				if (lo < 0xdc00 || lo > 0xdfff)
					return scan_fail(s, "a string holds a lone "
							 "surrogate", i - 6);
				cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
				i += 6;
			}
			dec_put_cp(d, cp);
			continue;
		}
		if (b[i] < 0x20)
			return scan_fail(s, "a string holds a control character", i);
		run = utf8_seq(b + i, s->len - i);
		if (run == 0)
			return scan_fail(s, "a string is not valid UTF-8", i);
		dec_put(d, s->b + i, run);
		i += run;
	}
	s->pos = i + 1;
	return true;
}

static bool is_digit(char c)
{
	return c >= '0' && c <= '9';
}

static bool scan_number(struct scan *s)
{
	size_t i = s->pos;

	if (i < s->len && s->b[i] == '-')
		i++;
	if (i >= s->len || !is_digit(s->b[i]))
		return scan_fail(s, "a number has no digits", s->pos);
	if (s->b[i] == '0')
		i++;
	else
		while (i < s->len && is_digit(s->b[i]))
			i++;
	if (i < s->len && s->b[i] == '.') {
		i++;
		if (i >= s->len || !is_digit(s->b[i]))
			return scan_fail(s, "a number has no digits after '.'", i);
		while (i < s->len && is_digit(s->b[i]))
			i++;
	}
	if (i < s->len && (s->b[i] == 'e' || s->b[i] == 'E')) {
		i++;
		if (i < s->len && (s->b[i] == '+' || s->b[i] == '-'))
			i++;
		if (i >= s->len || !is_digit(s->b[i]))
			return scan_fail(s, "a number has no exponent digits", i);
		while (i < s->len && is_digit(s->b[i]))
			i++;
	}
	s->pos = i;
	return true;
}

static bool scan_literal(struct scan *s, const char *lit)
{
	size_t n = strlen(lit);

	if (s->len - s->pos < n || memcmp(s->b + s->pos, lit, n) != 0)
		return scan_fail(s, "unexpected character", s->pos);
	s->pos += n;
	return true;
}

static void skip_ws(struct scan *s)
{
	while (s->pos < s->len && (s->b[s->pos] == ' ' || s->b[s->pos] == '\t' ||
				   s->b[s->pos] == '\n' || s->b[s->pos] == '\r'))
		s->pos++;
}

/* Where the value being scanned belongs: a top-level member the meter
 * reads (cur1), stream_options.include_usage (cur2). */
struct scan_ctx {
	int cur1;            /* enum member, or -1 */
	bool cur2;
	bool in_so;          /* inside the stream_options object */
	const char *cur_state; /* the value is of a member that pulls stored
				  input (when of kind state_kind) */
	enum jkind state_kind; /* JK_NONE: any but null */
	bool cur_type;       /* the value is of a "type" member */
};

static void value_begin(struct scan *s, struct scan_ctx *c, size_t depth,
			enum jkind k)
{
	if (c->cur_state) {
		if (!s->server_state && k != JK_NULL &&
		    (c->state_kind == JK_NONE || c->state_kind == k))
			s->server_state = c->cur_state;
		c->cur_state = NULL;
	}
	c->cur_type = false;
	if (depth == 1 && c->cur1 >= 0) {
		s->m[c->cur1].kind = k;
		s->m[c->cur1].start = s->pos;
	} else if (depth == 2 && c->in_so && c->cur2) {
		s->include_usage.kind = k;
		s->include_usage.start = s->pos;
	}
}

/* A value that began at depth @depth ended at s->pos. */
static void value_end(struct scan *s, struct scan_ctx *c, size_t depth)
{
	if (depth == 1 && c->cur1 >= 0) {
		s->m[c->cur1].end = s->pos;
		c->cur1 = -1;
	} else if (depth == 2 && c->in_so && c->cur2) {
		s->include_usage.end = s->pos;
		c->cur2 = false;
	}
}

static int member_of(const char *key, size_t len)
{
	size_t i;

	for (i = 0; i < M_COUNT; i++)
		if (strlen(member_names[i]) == len &&
		    memcmp(member_names[i], key, len) == 0)
			return (int)i;
	return -1;
}

/* Members that make the provider add input from state the proxy cannot
 * see (its own storage), by the kind of value that does it: a JSON
 * schema that merely names a property "file_id" holds an object there,
 * not an id. @depth 1 is the top level. */
static const char *state_member(const struct scan *s, const char *key, size_t len,
				size_t depth, enum jkind *kind)
{
	static const struct {
		const char *name;
		bool top_only;
		enum meter_endpoint only; /* METER_ENDPOINT_NONE: every one */
		enum jkind kind;
	} members[] = {
		/* the provider's copy of an earlier exchange */
		{ "previous_response_id", true, METER_ENDPOINT_NONE, JK_NONE },
		{ "conversation", true, METER_ENDPOINT_NONE, JK_NONE },
		/* a stored prompt template (completions' "prompt" is text) */
		{ "prompt", true, METER_ENDPOINT_OPENAI_RESPONSES, JK_NONE },
		/* a code execution container and the files in it */
		{ "container", true, METER_ENDPOINT_ANTHROPIC_MESSAGES, JK_NONE },
		/* the Files API, anywhere in the messages */
		{ "file_id", false, METER_ENDPOINT_NONE, JK_STRING },
		/* file search over stored vector stores */
		{ "vector_store_ids", false, METER_ENDPOINT_NONE, JK_ARRAY },
	};
	size_t i;

	for (i = 0; i < ARRAY_SIZE(members); i++) {
		if (strlen(members[i].name) != len ||
		    memcmp(members[i].name, key, len) != 0)
			continue;
		if (members[i].top_only && depth != 1)
			continue;
		if (members[i].only != METER_ENDPOINT_NONE && members[i].only != s->ep)
			continue;
		*kind = members[i].kind;
		return members[i].name;
	}
	return NULL;
}

/* Scans the key at s->pos and the ':' after it; records which member
 * the value that follows belongs to. */
static bool scan_key(struct scan *s, struct scan_ctx *c, size_t depth)
{
	char key[KEY_MAX];
	struct decoded d = { .buf = key, .cap = sizeof(key) };
	size_t at = s->pos;

	c->cur1 = -1;
	c->cur2 = false;
	c->cur_state = NULL;
	c->cur_type = false;
	if (s->pos >= s->len || s->b[s->pos] != '"')
		return scan_fail(s, "a member name is not a string", s->pos);
	if (!scan_string(s, &d))
		return false;
	skip_ws(s);
	if (s->pos >= s->len || s->b[s->pos] != ':')
		return scan_fail(s, "a member name is not followed by ':'", s->pos);
	s->pos++;
	if (d.overflow || d.nul)
		return true;
	c->cur_state = state_member(s, key, d.len, depth, &c->state_kind);
	c->cur_type = d.len == 4 && memcmp(key, "type", 4) == 0;
	if (depth == 1) {
		c->cur1 = member_of(key, d.len);
		if (c->cur1 >= 0) {
			if (s->m[c->cur1].seen)
				return scan_fail(s, "a member the meter reads appears "
						 "twice", at);
			s->m[c->cur1].seen = true;
		}
	} else if (depth == 2 && c->in_so) {
		s->so_members++;
		c->cur2 = d.len == 13 && memcmp(key, "include_usage", 13) == 0;
		if (c->cur2) {
			if (s->include_usage.seen)
				return scan_fail(s, "stream_options.include_usage "
						 "appears twice", at);
			s->include_usage.seen = true;
		}
	}
	return true;
}

/* Validates the whole body as one JSON object and records the members of
 * enum member (and stream_options.include_usage). */
static bool scan_body(struct scan *s)
{
	enum { ST_VALUE, ST_OBJ_FIRST, ST_OBJ_KEY, ST_ARR_FIRST, ST_AFTER } st;
	unsigned char stack[JSON_MAX_DEPTH];
	struct scan_ctx c = { .cur1 = -1 };
	size_t depth = 0;

	skip_ws(s);
	if (s->pos >= s->len || s->b[s->pos] != '{')
		return scan_fail(s, "the body is not a JSON object", s->pos);
	s->open = s->pos;
	st = ST_VALUE;
	for (;;) {
		char ch;

		skip_ws(s);
		if (s->pos >= s->len)
			return scan_fail(s, "the body ends inside the JSON object",
					 s->pos);
		ch = s->b[s->pos];
		switch (st) {
		case ST_VALUE:
			if (ch == '{' || ch == '[') {
				if (depth == JSON_MAX_DEPTH)
					return scan_fail(s, "the JSON nests too deeply",
							 s->pos);
				value_begin(s, &c, depth, ch == '{' ? JK_OBJECT
								  : JK_ARRAY);
				if (ch == '{' && depth == 1 &&
				    c.cur1 == M_STREAM_OPTIONS)
					c.in_so = true;
				stack[depth++] = (unsigned char)ch;
				s->pos++;
				st = ch == '{' ? ST_OBJ_FIRST : ST_ARR_FIRST;
				continue;
			}
			if (ch == '"') {
				char tv[16] = { 0 };
				bool was_type = c.cur_type;
				struct decoded dv = { .buf = was_type ? tv : NULL,
						      .cap = sizeof(tv) };

				value_begin(s, &c, depth, JK_STRING);
				if (!scan_string(s, &dv))
					return false;
				/* an input item the provider fetches from its
				 * own storage by id */
				if (was_type && !dv.overflow && dv.len == 14 &&
				    memcmp(tv, "item_reference", 14) == 0 &&
				    !s->server_state)
					s->server_state = "item_reference";
			} else if (ch == '-' || is_digit(ch)) {
				value_begin(s, &c, depth, JK_NUMBER);
				if (!scan_number(s))
					return false;
			} else if (ch == 't' || ch == 'f' || ch == 'n') {
				enum jkind k = ch == 't' ? JK_TRUE :
					       ch == 'f' ? JK_FALSE : JK_NULL;

				value_begin(s, &c, depth, k);
				if (!scan_literal(s, ch == 't' ? "true" :
						  ch == 'f' ? "false" : "null"))
					return false;
			} else {
				return scan_fail(s, "unexpected character", s->pos);
			}
			value_end(s, &c, depth);
			st = ST_AFTER;
			continue;
		case ST_OBJ_FIRST:
		case ST_ARR_FIRST:
			if (ch == (st == ST_OBJ_FIRST ? '}' : ']'))
				break; /* an empty container closes below */
			st = st == ST_OBJ_FIRST ? ST_OBJ_KEY : ST_VALUE;
			continue;
		case ST_OBJ_KEY:
			if (!scan_key(s, &c, depth))
				return false;
			st = ST_VALUE;
			continue;
		case ST_AFTER:
			if (depth == 0) /* cannot be: the top object closed ends the loop */
				return scan_fail(s, "unexpected character", s->pos);
			if (ch == ',') {
				s->pos++;
				st = stack[depth - 1] == '{' ? ST_OBJ_KEY : ST_VALUE;
				continue;
			}
			if (ch != (stack[depth - 1] == '{' ? '}' : ']'))
				return scan_fail(s, stack[depth - 1] == '{' ?
						 "expected ',' or '}'" :
						 "expected ',' or ']'", s->pos);
			break;
		default:
			ASSERT(0);
		}
		/* ch closes the innermost container. */
		s->pos++;
		if (--depth == 0)
			break;
		if (depth == 1 && c.in_so)
			c.in_so = false;
		value_end(s, &c, depth);
		st = ST_AFTER;
	}
	skip_ws(s);
	if (s->pos != s->len)
		return scan_fail(s, "data follows the JSON object", s->pos);
	return true;
}

/* ------------------------------------------------------------------ */
/* The request                                                        */
/* ------------------------------------------------------------------ */

/* The largest output bound a request may name (a token count), and the
 * most choices (openai's n, best_of). */
#define OUTPUT_BOUND_MAX UINT64_C(4294967295)
#define CHOICES_MAX 128u

static bool refuse(struct meter_refusal *why, int status, const char *rule,
		   const char *fmt, ...) __attribute__((format(printf, 4, 5)));

static bool refuse(struct meter_refusal *why, int status, const char *rule,
		   const char *fmt, ...)
{
	va_list ap;

	why->status = status;
	why->rule = rule;
	va_start(ap, fmt);
	vsnprintf(why->reason, sizeof(why->reason), fmt, ap);
	va_end(ap);
	return false;
}

/* A printable, bounded copy of @model for a reason line. */
static void printable(const char *model, char *out, size_t cap)
{
	size_t i, o = 0;

	for (i = 0; model[i] && o + 4 < cap; i++)
		out[o++] = (char)((model[i] >= 0x20 && model[i] < 0x7f &&
				   model[i] != '"') ? model[i] : '?');
	if (model[i])
		for (i = 0; i < 3; i++)
			out[o++] = '.';
	out[o] = '\0';
}

/* Reads member @m as an unsigned integer at most @max (null and absent:
 * *present false). */
static bool get_uint(const struct scan *s, enum member m, uint64_t max,
		     uint64_t *out, bool *present, struct meter_refusal *why)
{
	const struct jspan *v = &s->m[m];
	uint64_t n = 0;
	size_t i;

	*present = false;
	if (!v->seen || v->kind == JK_NULL)
		return true;
	if (v->kind != JK_NUMBER || s->b[v->start] == '-')
		return refuse(why, 400, "spend.body", "%s must be a whole number "
			      "from 0 to %llu", member_names[m],
			      (unsigned long long)max);
	for (i = v->start; i < v->end; i++) {
		if (!is_digit(s->b[i]) || n > max / 10 ||
		    n * 10 + (uint64_t)(s->b[i] - '0') > max)
			return refuse(why, 400, "spend.body", "%s must be a whole "
				      "number from 0 to %llu", member_names[m],
				      (unsigned long long)max);
		n = n * 10 + (uint64_t)(s->b[i] - '0');
	}
	*out = n;
	*present = true;
	return true;
}

static bool get_model(const struct scan *s, struct meter_request *out,
		      struct meter_refusal *why)
{
	const struct jspan *v = &s->m[M_MODEL];
	struct scan t = { .b = s->b, .len = s->len, .pos = v->start };
	struct decoded d = { .buf = out->model, .cap = METER_MODEL_MAX };

	if (!v->seen)
		return refuse(why, 400, "spend.body", "the request names no model");
	if (v->kind != JK_STRING)
		return refuse(why, 400, "spend.body", "model must be a string");
	if (!scan_string(&t, &d))
		ASSERT(0); /* scan_body() validated it */
	if (d.overflow)
		return refuse(why, 400, "spend.body", "the model name is longer "
			      "than %d bytes", METER_MODEL_MAX);
	if (d.nul || d.len == 0)
		return refuse(why, 400, "spend.body", "the model name is empty or "
			      "holds a NUL");
	out->model[d.len] = '\0';
	return true;
}

/* Adds an edit, kept in body order (an insertion at the same offset as
 * one before it goes after it). @text NULL: req->bound_text. */
static void add_edit(struct meter_request *req, size_t at, size_t len,
		     const char *text)
{
	size_t i = req->nedits;

	ASSERT(req->nedits < ARRAY_SIZE(req->edits));
	while (i > 0 && req->edits[i - 1].at > at) {
		req->edits[i] = req->edits[i - 1];
		i--;
	}
	req->edits[i] = (struct meter_edit){ .at = at, .len = len, .text = text };
	req->nedits++;
}

/* The member each endpoint takes its output bound in, when the proxy
 * writes the one it reserved. */
static enum member bound_member(enum meter_endpoint ep)
{
	switch (ep) {
	case METER_ENDPOINT_OPENAI_CHAT:
		return M_MAX_COMPLETION_TOKENS;
	case METER_ENDPOINT_OPENAI_RESPONSES:
		return M_MAX_OUTPUT_TOKENS;
	case METER_ENDPOINT_ANTHROPIC_MESSAGES:
	case METER_ENDPOINT_OPENAI_COMPLETIONS:
	case METER_ENDPOINT_OPENAI_EMBEDDINGS:
	case METER_ENDPOINT_NONE:
	case METER_ENDPOINT_COUNT:
	default:
		return M_MAX_TOKENS;
	}
}

/* Plans the rewrite that sends the bound reserved when the request gave
 * none: a null member of that name is replaced, else the member is
 * inserted first. */
static void plan_bound(const struct scan *s, struct meter_request *out)
{
	enum member m = bound_member(out->endpoint);
	const struct jspan *v = &s->m[m];

	if (v->seen && v->kind == JK_NULL) {
		snprintf(out->bound_text, sizeof(out->bound_text), "%llu",
			 (unsigned long long)out->bound);
		add_edit(out, v->start, v->end - v->start, NULL);
	} else {
		/* absent: the object has a member at least (model) */
		snprintf(out->bound_text, sizeof(out->bound_text), "\"%s\":%llu,",
			 member_names[m], (unsigned long long)out->bound);
		add_edit(out, s->open + 1, 0, NULL);
	}
}

/* Plans the rewrite that makes an openai stream report its usage. */
static bool plan_include_usage(const struct scan *s, struct meter_request *out,
			       struct meter_refusal *why)
{
	const struct jspan *so = &s->m[M_STREAM_OPTIONS];
	const struct jspan *iu = &s->include_usage;

	if (!so->seen) {
		add_edit(out, s->open + 1, 0,
			 "\"stream_options\":{\"include_usage\":true},");
		return true;
	}
	if (so->kind == JK_NULL) {
		add_edit(out, so->start, so->end - so->start,
			 "{\"include_usage\":true}");
		return true;
	}
	if (so->kind != JK_OBJECT)
		return refuse(why, 400, "spend.body",
			      "stream_options must be an object");
	if (!iu->seen) {
		add_edit(out, so->start + 1, 0,
			 s->so_members ? "\"include_usage\":true,"
				       : "\"include_usage\":true");
		return true;
	}
	if (iu->kind == JK_TRUE)
		return true;
	if (iu->kind != JK_FALSE && iu->kind != JK_NULL)
		return refuse(why, 400, "spend.body",
			      "stream_options.include_usage must be a boolean");
	add_edit(out, iu->start, iu->end - iu->start, "true");
	return true;
}

static uint64_t cfg_max_body(const struct meter_config *cfg)
{
	return cfg->max_body_bytes ? cfg->max_body_bytes
				   : METER_DEFAULT_MAX_BODY_BYTES;
}

bool meter_request_parse(const struct meter_config *cfg,
			 enum meter_endpoint ep, const char *body, size_t len,
			 struct meter_request *out, struct meter_refusal *why)
{
	struct scan s = { .b = body, .len = len, .ep = ep };
	uint64_t bound = 0, v = 0, choices = 1;
	bool present;
	static const enum member openai_bounds[] = {
		M_MAX_TOKENS, M_MAX_COMPLETION_TOKENS, M_MAX_OUTPUT_TOKENS,
	};
	size_t i;

	ASSERT(ep > METER_ENDPOINT_NONE && ep < METER_ENDPOINT_COUNT);
	memset(out, 0, sizeof(*out));
	memset(why, 0, sizeof(*why));
	out->endpoint = ep;
	out->body_bytes = len;
	if ((uint64_t)len > cfg_max_body(cfg))
		return refuse(why, 413, "spend.max_body_bytes", "the request body "
			      "is larger than spend.max_body_bytes (%llu bytes)",
			      (unsigned long long)cfg_max_body(cfg));
	if (!scan_body(&s))
		return refuse(why, 400, "spend.body", "the request body is not "
			      "valid JSON: %s at byte %zu", s.error, s.error_at);
	if (!get_model(&s, out, why))
		return false;
	out->server_state = s.server_state;
	if (s.server_state && !cfg->server_state_allow)
		return refuse(why, 403, "spend.unbounded", "the request pulls input "
			      "from state stored at the provider (%s), which the "
			      "meter cannot see or bound (spend.server_state)",
			      s.server_state);

	if (ep == METER_ENDPOINT_OPENAI_EMBEDDINGS) {
		/* no output: every token comes from the body */
		out->bound_given = true;
	} else if (endpoint_api[ep] == METER_API_ANTHROPIC) {
		if (!get_uint(&s, M_MAX_TOKENS, OUTPUT_BOUND_MAX, &bound,
			      &out->bound_given, why))
			return false;
	} else {
		for (i = 0; i < ARRAY_SIZE(openai_bounds); i++) {
			if (!get_uint(&s, openai_bounds[i], OUTPUT_BOUND_MAX, &v,
				      &present, why))
				return false;
			if (present && (!out->bound_given || v > bound))
				bound = v;
			out->bound_given |= present;
		}
	}
	if (!out->bound_given)
		bound = cfg->default_max_output_tokens
			? cfg->default_max_output_tokens
			: METER_DEFAULT_MAX_OUTPUT_TOKENS;
	out->bound = bound;
	if (ep == METER_ENDPOINT_OPENAI_CHAT ||
	    ep == METER_ENDPOINT_OPENAI_COMPLETIONS) {
		static const enum member counts[] = { M_N, M_BEST_OF };

		for (i = 0; i < ARRAY_SIZE(counts); i++) {
			if (counts[i] == M_BEST_OF &&
			    ep != METER_ENDPOINT_OPENAI_COMPLETIONS)
				continue;
			if (!get_uint(&s, counts[i], CHOICES_MAX, &v, &present, why))
				return false;
			if (present && v == 0)
				return refuse(why, 400, "spend.body", "%s must be "
					      "from 1 to %u", member_names[counts[i]],
					      CHOICES_MAX);
			if (present && v > choices)
				choices = v;
		}
	}
	out->max_output = bound * choices;

	switch (s.m[M_STREAM].seen ? s.m[M_STREAM].kind : JK_NULL) {
	case JK_TRUE:
		out->stream = true;
		break;
	case JK_FALSE:
	case JK_NULL:
		break;
	case JK_NONE:
	case JK_OBJECT:
	case JK_ARRAY:
	case JK_STRING:
	case JK_NUMBER:
	default:
		return refuse(why, 400, "spend.body", "stream must be a boolean");
	}
	if (out->stream && ep == METER_ENDPOINT_OPENAI_EMBEDDINGS)
		return refuse(why, 400, "spend.body", "embeddings do not stream");
	if (out->stream && (ep == METER_ENDPOINT_OPENAI_CHAT ||
			    ep == METER_ENDPOINT_OPENAI_COMPLETIONS) &&
	    !plan_include_usage(&s, out, why))
		return false;
	/* The bound reserved is the bound sent. */
	if (!out->bound_given)
		plan_bound(&s, out);

	out->price = meter_price_lookup(cfg->prices, cfg->nprices, out->model);
	if (!out->price) {
		char shown[72];

		printable(out->model, shown, sizeof(shown));
		return refuse(why, 403, "spend.prices", "model \"%s\" has no price "
			      "in spend.prices", shown);
	}
	if (!meter_reservation(out->price, out->body_bytes, out->max_output,
			       &out->reservation))
		return refuse(why, 400, "spend.body", "the reservation for this "
			      "request is above the largest amount the ledger "
			      "holds (lower max_tokens)");
	if (out->server_state) {
		out->server_state_reserve = cfg->server_state_reserve;
		if (out->reservation > METER_MONEY_MAX - out->server_state_reserve)
			return refuse(why, 400, "spend.body", "the reservation for "
				      "this request is above the largest amount "
				      "the ledger holds");
		out->reservation += out->server_state_reserve;
	}
	return true;
}

char *meter_request_rewrite(const struct meter_request *req, const char *body,
			    size_t len, size_t *out_len)
{
	size_t n = len, i, from = 0, o = 0;
	char *out;

	if (req->nedits == 0)
		return NULL;
	ASSERT(req->body_bytes == len && req->nedits <= ARRAY_SIZE(req->edits));
	for (i = 0; i < req->nedits; i++) {
		const struct meter_edit *e = &req->edits[i];
		const char *t = e->text ? e->text : req->bound_text;

		ASSERT(e->at >= from && e->at <= len && e->len <= len - e->at);
		from = e->at + e->len;
		n = n - e->len + strlen(t);
	}
	out = util_xmalloc(n + 1);
	from = 0;
	for (i = 0; i < req->nedits; i++) {
		const struct meter_edit *e = &req->edits[i];
		const char *t = e->text ? e->text : req->bound_text;
		size_t tl = strlen(t);

		memcpy(out + o, body + from, e->at - from);
		o += e->at - from;
		memcpy(out + o, t, tl);
		o += tl;
		from = e->at + e->len;
	}
	memcpy(out + o, body + from, len - from);
	o += len - from;
	ASSERT(o == n);
	out[n] = '\0';
	*out_len = n;
	return out;
}

/* ------------------------------------------------------------------ */
/* The answer                                                         */
/* ------------------------------------------------------------------ */

enum body_mode { MODE_OTHER, MODE_JSON, MODE_SSE };

/* Longest SSE event name kept (ours are shorter); longer ones are none of
 * ours. */
#define EVENT_NAME_MAX 40

struct meter_response {
	const struct meter_config *cfg;
	const struct meter_request *req;
	int status;
	enum body_mode mode;
	size_t limit;            /* max_json_body or max_sse_event */

	/* JSON: the body; SSE: the line being read. */
	char *buf;
	size_t len, cap;
	bool over;               /* the body (line) was longer than limit */
	bool cr;                 /* SSE: the last byte was CR */

	/* SSE: the event being read. */
	char *data;
	size_t data_len, data_cap;
	bool data_any, data_over;
	char event[EVENT_NAME_MAX + 1];
	bool event_over;

	/* What the answer said. */
	bool started;            /* anthropic message_start */
	bool complete;
	bool failed;             /* an error event, or usage that does not
				    add up */
	bool have_usage;
	struct meter_usage usage;
	const char *why;         /* static reason for failed */
};

static enum body_mode mode_of(const char *ct, size_t len)
{
	size_t i = 0, end;
	const char *slash;

	if (!ct)
		return MODE_OTHER;
	while (i < len && (ct[i] == ' ' || ct[i] == '\t'))
		i++;
	for (end = i; end < len && ct[end] != ';'; end++)
		;
	while (end > i && (ct[end - 1] == ' ' || ct[end - 1] == '\t'))
		end--;
	if (ascii_caseeq(ct + i, end - i, "text/event-stream"))
		return MODE_SSE;
	if (ascii_caseeq(ct + i, end - i, "application/json"))
		return MODE_JSON;
	slash = memchr(ct + i, '/', end - i);
	if (slash && end - i >= 5 && ascii_caseeq(ct + end - 5, 5, "+json"))
		return MODE_JSON;
	return MODE_OTHER;
}

struct meter_response *meter_response_new(const struct meter_config *cfg,
					  const struct meter_request *req,
					  int status, const char *ctype,
					  size_t ctype_len)
{
	struct meter_response *r = util_xcalloc(1, sizeof(*r));

	r->cfg = cfg;
	r->req = req;
	r->status = status;
	r->mode = mode_of(ctype, ctype_len);
	if (r->mode == MODE_JSON)
		r->limit = cfg->max_json_body ? cfg->max_json_body
					      : METER_DEFAULT_MAX_JSON_BODY;
	else
		r->limit = cfg->max_sse_event ? cfg->max_sse_event
					      : METER_DEFAULT_MAX_SSE_EVENT;
	return r;
}

void meter_response_free(struct meter_response *r)
{
	if (!r)
		return;
	free(r->buf);
	free(r->data);
	free(r);
}

/* Appends to a buffer bounded by r->limit; false (nothing kept) when it
 * would pass the limit. */
static bool bounded_append(const struct meter_response *r, char **buf,
			   size_t *len, size_t *cap, const char *p, size_t n)
{
	size_t want;

	if (n == 0)
		return true;
	if (n > r->limit - *len)
		return false;
	want = *len + n;
	if (want > *cap) {
		size_t c = *cap ? *cap : 256;

		while (c < want)
			c = c > r->limit / 2 ? r->limit : c * 2;
		*buf = util_xrealloc(*buf, c);
		*cap = c;
	}
	memcpy(*buf + *len, p, n);
	*len += n;
	return true;
}

static void fail(struct meter_response *r, const char *why)
{
	if (!r->failed) {
		r->failed = true;
		r->why = why;
	}
}

/* A token count member of @obj: absent or null is 0 unless @required;
 * false for anything but a non-negative integer. */
static bool count_of(json_t *obj, const char *key, bool required, uint64_t *out)
{
	json_t *v = json_object_get(obj, key);

	if (!v || json_is_null(v)) {
		*out = 0;
		return !required;
	}
	if (!json_is_integer(v) || json_integer_value(v) < 0)
		return false;
	*out = (uint64_t)json_integer_value(v);
	return true;
}

/* Reads an openai usage object: @in_key/@out_key (prompt/completion or
 * input/output tokens) and @details.cached_tokens, taken out of input. */
static bool openai_usage(json_t *u, const char *in_key, const char *out_key,
			 const char *details, struct meter_usage *out)
{
	uint64_t prompt, cached = 0;
	json_t *d;

	if (!json_is_object(u) || !count_of(u, in_key, true, &prompt) ||
	    !count_of(u, out_key, true, &out->output))
		return false;
	d = json_object_get(u, details);
	if (d && !json_is_null(d) &&
	    (!json_is_object(d) || !count_of(d, "cached_tokens", false, &cached)))
		return false;
	if (cached > prompt)
		return false;
	out->input = prompt - cached;
	out->cache_read = cached;
	out->cache_write = 0;
	return true;
}

static bool anthropic_usage(json_t *u, bool need_input, struct meter_usage *out)
{
	return json_is_object(u) &&
	       count_of(u, "input_tokens", need_input, &out->input) &&
	       count_of(u, "output_tokens", true, &out->output) &&
	       count_of(u, "cache_creation_input_tokens", false, &out->cache_write) &&
	       count_of(u, "cache_read_input_tokens", false, &out->cache_read);
}

static const char *type_of(json_t *o)
{
	const char *t = json_string_value(json_object_get(o, "type"));

	return t ? t : "";
}

static void anthropic_event(struct meter_response *r, json_t *o)
{
	const char *type = type_of(o);
	struct meter_usage u;
	json_t *usage;

	if (strcmp(type, "message_start") == 0) {
		if (r->started)
			{ fail(r, "the stream has two message_start events"); return; }
		if (!anthropic_usage(json_object_get(json_object_get(o, "message"),
						     "usage"), true, &r->usage))
			{ fail(r, "message_start has no valid usage"); return; }
		r->started = true;
	} else if (strcmp(type, "message_delta") == 0) {
		if (!r->started)
			{ fail(r, "message_delta before message_start"); return; }
		usage = json_object_get(o, "usage");
		/* Cumulative counts: a present count replaces the one before
		 * it, an absent one keeps it. */
		u = r->usage;
		if (!json_is_object(usage) ||
		    !count_of(usage, "output_tokens", true, &u.output))
			{ fail(r, "message_delta has no valid usage"); return; }
		if ((json_object_get(usage, "input_tokens") &&
		     !count_of(usage, "input_tokens", true, &u.input)) ||
		    (json_object_get(usage, "cache_creation_input_tokens") &&
		     !count_of(usage, "cache_creation_input_tokens", true,
			       &u.cache_write)) ||
		    (json_object_get(usage, "cache_read_input_tokens") &&
		     !count_of(usage, "cache_read_input_tokens", true,
			       &u.cache_read)))
			{ fail(r, "message_delta has no valid usage"); return; }
		r->usage = u;
	} else if (strcmp(type, "message_stop") == 0) {
		if (!r->started)
			{ fail(r, "message_stop before message_start"); return; }
		r->complete = true;
		r->have_usage = true;
	} else if (strcmp(type, "error") == 0) {
		fail(r, "the stream reported an error");
	}
}

static void openai_chunk(struct meter_response *r, json_t *o)
{
	json_t *u = json_object_get(o, "usage");
	struct meter_usage got = { 0 };

	if (json_object_get(o, "error"))
		{ fail(r, "the stream reported an error"); return; }
	if (!u || json_is_null(u))
		return;
	if (r->complete)
		{ fail(r, "the stream has two usage chunks"); return; }
	if (!openai_usage(u, "prompt_tokens", "completion_tokens",
			  "prompt_tokens_details", &got))
		{ fail(r, "the usage chunk is not valid"); return; }
	r->usage = got;
	r->complete = true;
	r->have_usage = true;
}

static void responses_event(struct meter_response *r, json_t *o)
{
	const char *type = type_of(o);
	struct meter_usage got = { 0 };

	if (strcmp(type, "response.completed") == 0 ||
	    strcmp(type, "response.incomplete") == 0) {
		if (r->complete)
			{ fail(r, "the stream has two final events"); return; }
		if (!openai_usage(json_object_get(json_object_get(o, "response"),
						  "usage"),
				  "input_tokens", "output_tokens",
				  "input_tokens_details", &got))
			{ fail(r, "the final event has no valid usage"); return; }
		r->usage = got;
		r->complete = true;
		r->have_usage = true;
	} else if (strcmp(type, "response.failed") == 0 ||
		   strcmp(type, "error") == 0) {
		fail(r, "the stream reported an error");
	}
}

/* Is an event of this name (as the stream named it) one the meter reads?
 * Without an event: field, SSE names it "message". */
static bool event_wanted(const struct meter_response *r)
{
	static const char *const anthropic[] = {
		"message", "message_start", "message_delta", "message_stop",
		"error",
	};
	static const char *const responses[] = {
		"message", "response.completed", "response.incomplete",
		"response.failed", "error",
	};
	const char *const *names = anthropic;
	size_t i, n = ARRAY_SIZE(anthropic);

	if (r->event_over)
		return false;
	switch (r->req->endpoint) {
	case METER_ENDPOINT_ANTHROPIC_MESSAGES:
		break;
	case METER_ENDPOINT_OPENAI_RESPONSES:
		names = responses;
		n = ARRAY_SIZE(responses);
		break;
	case METER_ENDPOINT_OPENAI_CHAT:
	case METER_ENDPOINT_OPENAI_COMPLETIONS:
		return true;
	case METER_ENDPOINT_OPENAI_EMBEDDINGS:
	case METER_ENDPOINT_NONE:
	case METER_ENDPOINT_COUNT:
	default:
		return false;
	}
	for (i = 0; i < n; i++)
		if (strcmp(r->event[0] ? r->event : "message", names[i]) == 0)
			return true;
	return false;
}

/* Does @data hold a "usage" member name whose value is not null? The
 * name cannot occur inside a JSON string, where its quotes would be
 * escaped. */
static bool usage_not_null(const char *data, size_t len)
{
	size_t off = 0;

	while (off < len) {
		const char *hit = memmem(data + off, len - off, "\"usage\"", 7);
		size_t i;

		if (!hit)
			return false;
		i = (size_t)(hit - data) + 7;
		while (i < len && (data[i] == ' ' || data[i] == '\t' ||
				   data[i] == '\n' || data[i] == '\r' || data[i] == ':'))
			i++;
		/* cppcheck-suppress knownConditionTrueFalse ; i may be anywhere up
		 * to len (cppcheck 2.10 takes it for len) */
		if (len - i < 4 || memcmp(data + i, "null", 4) != 0)
			return true;
		off = i + 4;
	}
	return false;
}

static void dispatch(struct meter_response *r)
{
	json_t *o = NULL;
	json_error_t err;
	size_t len;

	if (!r->data_any)
		goto out;
	if (r->data_over || !event_wanted(r))
		goto out;
	len = r->data_len - 1; /* each data line added a '\n' */
	if (r->req->endpoint == METER_ENDPOINT_OPENAI_CHAT ||
	    r->req->endpoint == METER_ENDPOINT_OPENAI_COMPLETIONS) {
		/* Only the usage chunk and an error need a parse: skip the
		 * content chunks, whose usage is absent or null. */
		if (!usage_not_null(r->data, len) &&
		    !memmem(r->data, len, "\"error\"", 7))
			goto out;
	}
	o = json_loadb(r->data, len, JSON_REJECT_DUPLICATES, &err);
	if (!json_is_object(o))
		goto out;
	switch (r->req->endpoint) {
	case METER_ENDPOINT_ANTHROPIC_MESSAGES:
		anthropic_event(r, o);
		break;
	case METER_ENDPOINT_OPENAI_CHAT:
	case METER_ENDPOINT_OPENAI_COMPLETIONS:
		openai_chunk(r, o);
		break;
	case METER_ENDPOINT_OPENAI_RESPONSES:
		responses_event(r, o);
		break;
	case METER_ENDPOINT_OPENAI_EMBEDDINGS:
	case METER_ENDPOINT_NONE:
	case METER_ENDPOINT_COUNT:
	default:
		break;
	}
out:
	json_decref(o);
	r->data_len = 0;
	r->data_any = r->data_over = false;
	r->event[0] = '\0';
	r->event_over = false;
}

/* One complete SSE line (without its end), per the WHATWG event-stream
 * rules. */
static void sse_line(struct meter_response *r, const char *line, size_t len,
		     bool over)
{
	const char *colon, *value;
	size_t flen, vlen;

	if (over) {
		/* A line too long to read spoils its event. */
		r->data_any = r->data_over = true;
		return;
	}
	if (len == 0) {
		dispatch(r);
		return;
	}
	if (line[0] == ':')
		return;
	colon = memchr(line, ':', len);
	flen = colon ? (size_t)(colon - line) : len;
	value = colon ? colon + 1 : line + len;
	vlen = (size_t)(line + len - value);
	if (vlen > 0 && value[0] == ' ') {
		value++;
		vlen--;
	}
	if (flen == 4 && memcmp(line, "data", 4) == 0) {
		r->data_any = true;
		if (r->data_over ||
		    !bounded_append(r, &r->data, &r->data_len, &r->data_cap,
				    value, vlen) ||
		    !bounded_append(r, &r->data, &r->data_len, &r->data_cap,
				    "\n", 1))
			r->data_over = true;
	} else if (flen == 5 && memcmp(line, "event", 5) == 0) {
		if (vlen > EVENT_NAME_MAX) {
			r->event_over = true;
		} else {
			memcpy(r->event, value, vlen);
			r->event[vlen] = '\0';
			r->event_over = memchr(value, '\0', vlen) != NULL;
		}
	}
}

static void sse_feed(struct meter_response *r, const char *p, size_t n)
{
	size_t i = 0;

	while (i < n) {
		size_t start = i;

		if (r->cr) {
			r->cr = false;
			if (p[i] == '\n') {
				i++;
				continue;
			}
		}
		while (i < n && p[i] != '\n' && p[i] != '\r')
			i++;
		if (!r->over && !bounded_append(r, &r->buf, &r->len, &r->cap,
						p + start, i - start))
			r->over = true;
		if (i == n)
			break;
		r->cr = p[i] == '\r';
		i++;
		sse_line(r, r->buf, r->len, r->over);
		r->len = 0;
		r->over = false;
	}
}

void meter_response_feed(struct meter_response *r, const char *buf, size_t len)
{
	switch (r->mode) {
	case MODE_JSON:
		if (!r->over && !bounded_append(r, &r->buf, &r->len, &r->cap, buf,
						len)) {
			r->over = true;
			free(r->buf);
			r->buf = NULL;
			r->len = r->cap = 0;
		}
		break;
	case MODE_SSE:
		sse_feed(r, buf, len);
		break;
	case MODE_OTHER:
	default:
		break;
	}
}

static void json_body(struct meter_response *r)
{
	json_t *o, *u;
	json_error_t err;
	bool ok = false;

	if (r->over || r->len == 0)
		return;
	o = json_loadb(r->buf, r->len, JSON_REJECT_DUPLICATES, &err);
	if (!json_is_object(o))
		goto out;
	u = json_object_get(o, "usage");
	if (!u || json_is_null(u))
		goto out;
	switch (r->req->endpoint) {
	case METER_ENDPOINT_ANTHROPIC_MESSAGES:
		ok = anthropic_usage(u, true, &r->usage);
		break;
	case METER_ENDPOINT_OPENAI_CHAT:
	case METER_ENDPOINT_OPENAI_COMPLETIONS:
		ok = openai_usage(u, "prompt_tokens", "completion_tokens",
				  "prompt_tokens_details", &r->usage);
		break;
	case METER_ENDPOINT_OPENAI_RESPONSES:
		ok = openai_usage(u, "input_tokens", "output_tokens",
				  "input_tokens_details", &r->usage);
		break;
	case METER_ENDPOINT_OPENAI_EMBEDDINGS:
		/* input only: prompt_tokens (total_tokens is the same) */
		memset(&r->usage, 0, sizeof(r->usage));
		ok = json_is_object(u) &&
		     count_of(u, "prompt_tokens", true, &r->usage.input);
		break;
	case METER_ENDPOINT_NONE:
	case METER_ENDPOINT_COUNT:
	default:
		break;
	}
	if (!ok) {
		memset(&r->usage, 0, sizeof(r->usage));
		fail(r, "the answer's usage is not valid");
		goto out;
	}
	r->complete = true;
	r->have_usage = true;
out:
	json_decref(o);
}

static void charge_reservation(const struct meter_request *req,
			       enum meter_outcome o, const char *why,
			       struct meter_charge *out)
{
	out->outcome = o;
	out->cost = req->reservation;
	out->reason = why;
}

void meter_response_finish(struct meter_response *r, bool body_complete,
			   struct meter_charge *out)
{
	bool ok2xx = r->status >= 200 && r->status <= 299;
	bool usage;

	memset(out, 0, sizeof(*out));
	if (r->mode == MODE_JSON && body_complete)
		json_body(r);
	usage = r->complete && r->have_usage && !r->failed;
	if (usage && !meter_cost(r->req->price, &r->usage, &out->cost))
		usage = false;
	if (usage) {
		out->outcome = METER_OUTCOME_USAGE;
		out->have_usage = true;
		out->usage = r->usage;
		out->overrun = r->usage.output > r->req->max_output;
		out->reason = out->overrun ? "charged the answer's usage, which "
			"passes the output bound sent (an overrun)"
					   : "charged the answer's usage";
		return;
	}
	out->cost = 0;
	if (!ok2xx) {
		out->outcome = METER_OUTCOME_ERROR;
		out->reason = "an error answer without usage costs nothing";
		return;
	}
	switch (r->mode) {
	case MODE_SSE:
		charge_reservation(r->req, METER_OUTCOME_CUT, r->failed ? r->why :
				   "the stream ended before it was complete", out);
		break;
	case MODE_JSON:
		if (!body_complete)
			charge_reservation(r->req, METER_OUTCOME_CUT,
					   "the answer was cut short", out);
		else
			charge_reservation(r->req, METER_OUTCOME_NO_USAGE,
					   r->over ? "the answer is larger than "
					   "the meter reads" : r->failed ? r->why :
					   "the answer has no usage", out);
		break;
	case MODE_OTHER:
	default:
		charge_reservation(r->req, body_complete ? METER_OUTCOME_NO_USAGE
				   : METER_OUTCOME_CUT, "the answer is neither "
				   "JSON nor an event stream", out);
		break;
	}
}

void meter_charge_unanswered(const struct meter_request *req,
			     struct meter_charge *out)
{
	memset(out, 0, sizeof(*out));
	charge_reservation(req, METER_OUTCOME_CUT, "the request got no answer", out);
}
