/* SPDX-License-Identifier: Apache-2.0
 * test_meter.c - table tests of meter.c: which requests are metered, the
 * price match, money formatting, request parsing and the reservation, the
 * stream_options rewrite, and what every shape of answer costs, against
 * hand-computed values (the arithmetic is in the comment of each row).
 *
 * Every answer is also fed split at every byte, a byte at a time, in
 * three pieces, and with CRLF and CR line ends: the charge must not
 * change. Parses run on exact-size heap copies so that ASan catches a
 * read past the end.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ledger.h"
#include "meter.h"
#include "policy.h"
#include "tap.h"
#include "util.h"

static char *copy_exact(const char *s, size_t len)
{
	char *p = util_xmalloc(len ? len : 1);

	memcpy(p, s, len);
	return p;
}

/* ------------------------------------------------------------------ */
/* The prices used throughout (dollars per million tokens)            */
/* ------------------------------------------------------------------ */

static struct meter_price prices[7];
static struct meter_config cfg;

/* Per body byte max(input, cache_write), per output token output, in
 * nano-dollars:
 *   claude-sonnet-4-5*  3 / 15, cache 3.75 / 0.3 (defaults)  -> 3750, 15000
 *   claude-opus-4-1     15 / 75, cache 18.75 / 1.5           -> 18750, 75000
 *   gpt-4o              2.5 / 10, cache 3.125 (default) / 1.25 -> 3125, 10000
 *   gpt-4o*             5 / 20
 *   gpt-4o-mini*        0.15 / 0.6, cache 0.1875 / 0.015     -> 187.5, 600
 *   tiny                0.0375 / 0.0375, cache 0.046875 / 0.00375
 *   free                0 / 0 */
static void setup_prices(void)
{
	double cw_opus = 18.75, cr_opus = 1.5, cr_4o = 1.25;

	ASSERT(meter_price_set(&prices[0], "claude-sonnet-4-5*", 3.0, 15.0, NULL,
			       NULL));
	ASSERT(meter_price_set(&prices[1], "claude-opus-4-1", 15.0, 75.0, &cw_opus,
			       &cr_opus));
	ASSERT(meter_price_set(&prices[2], "gpt-4o", 2.5, 10.0, NULL, &cr_4o));
	ASSERT(meter_price_set(&prices[3], "gpt-4o*", 5.0, 20.0, NULL, NULL));
	ASSERT(meter_price_set(&prices[4], "gpt-4o-mini*", 0.15, 0.6, NULL, NULL));
	ASSERT(meter_price_set(&prices[5], "tiny", 0.0375, 0.0375, NULL, NULL));
	ASSERT(meter_price_set(&prices[6], "free", 0, 0, NULL, NULL));
	cfg.prices = prices;
	cfg.nprices = ARRAY_SIZE(prices);
}

static void test_prices(void)
{
	static const struct {
		const char *model;
		int want; /* index in prices, -1: none */
	} cases[] = {
		{ "claude-sonnet-4-5", 0 },
		{ "claude-sonnet-4-5-20250929", 0 },
		{ "claude-sonnet-4", -1 },
		{ "claude-opus-4-1", 1 },
		{ "claude-opus-4-1-20250805", -1 }, /* an exact name only */
		{ "gpt-4o", 2 },                    /* exact beats "gpt-4o*" */
		{ "gpt-4o-2024-08-06", 3 },
		{ "gpt-4o-mini", 4 },               /* the longest prefix */
		{ "gpt-4o-mini-2024-07-18", 4 },
		{ "gpt-4", -1 },
		{ "GPT-4O", -1 },                   /* case matters */
		{ "", -1 },
	};
	struct meter_price star[2];
	double neg = -1, big = 3e6, nan = NAN;
	size_t i;

	for (i = 0; i < ARRAY_SIZE(cases); i++) {
		const struct meter_price *got = meter_price_lookup(prices,
			ARRAY_SIZE(prices), cases[i].model);

		tap_is_int(got ? got - prices : -1, cases[i].want, "price of '%s'",
			   cases[i].model);
	}
	ASSERT(meter_price_set(&star[0], "*", 1, 1, NULL, NULL));
	ASSERT(meter_price_set(&star[1], "gpt*", 2, 2, NULL, NULL));
	tap_ok(meter_price_lookup(star, 2, "o3") == &star[0], "'*' prices every model");
	tap_ok(meter_price_lookup(star, 2, "gpt-5") == &star[1],
	       "a longer prefix beats '*'");

	tap_is_int(prices[0].input, 3000000000LL, "3 $/Mtok is 3e9 n$/Mtok");
	tap_is_int(prices[0].cache_write, 3750000000LL, "cache_write defaults to 1.25 x input");
	tap_is_int(prices[0].cache_read, 300000000LL, "cache_read defaults to 0.1 x input");
	tap_is_int(prices[4].cache_write, 187500000LL, "1.25 x 0.15 = 0.1875");
	tap_is_int(prices[4].cache_read, 15000000LL, "0.1 x 0.15 = 0.015");
	tap_is_int(prices[1].cache_write, 18750000000LL, "an explicit cache_write");
	tap_ok(!meter_price_set(&star[0], "x", neg, 1, NULL, NULL), "a negative price is refused");
	tap_ok(!meter_price_set(&star[0], "x", 1, big, NULL, NULL), "a price above $2e6/Mtok is refused");
	tap_ok(!meter_price_set(&star[0], "x", 1, 1, &nan, NULL), "a NaN cache price is refused");
	tap_ok(!meter_price_set(&star[0], "x", 1, 1, NULL, &neg), "a negative cache_read is refused");
}

static void test_money(void)
{
	static const struct {
		int64_t nano;
		const char *usd;
	} fmt[] = {
		{ 0, "0" },
		{ 3000000, "0.003" },
		{ 5000000000LL, "5" },
		{ 12000000001LL, "12.000000001" },
		{ -500000000, "-0.5" },
		{ 1, "0.000000001" },
		{ 1000000000000000000LL, "1000000000" },
		{ INT64_MIN, "-9223372036.854775808" },
	};
	static const struct {
		double usd;
		bool ok;
		int64_t nano;
	} conv[] = {
		{ 0, true, 0 },
		{ 5.0, true, 5000000000LL },
		{ 0.1, true, 100000000 },
		{ 0.3, true, 300000000 },
		{ 1e-10, true, 0 },
		{ 1e9, true, 1000000000000000000LL },
		{ 1.1e9, false, 0 },
		{ -0.01, false, 0 },
	};
	char buf[METER_USD_LEN];
	int64_t n;
	size_t i;

	for (i = 0; i < ARRAY_SIZE(fmt); i++) {
		meter_format_usd(fmt[i].nano, buf);
		tap_is_str(buf, fmt[i].usd, "format %lld n$", (long long)fmt[i].nano);
	}
	for (i = 0; i < ARRAY_SIZE(conv); i++) {
		n = -1;
		tap_ok(meter_usd_to_nano(conv[i].usd, &n) == conv[i].ok &&
		       (!conv[i].ok || n == conv[i].nano), "$%g -> %lld n$ (%s)",
		       conv[i].usd, (long long)conv[i].nano,
		       conv[i].ok ? "ok" : "refused");
	}
}

/* ------------------------------------------------------------------ */
/* Which requests are metered                                         */
/* ------------------------------------------------------------------ */

static void test_classify(void)
{
	static const struct {
		enum meter_api api;
		const char *method, *target;
		enum meter_route route;
		enum meter_endpoint ep;
	} cases[] = {
#define A METER_API_ANTHROPIC
#define O METER_API_OPENAI
#define M METER_ROUTE_METER
#define P METER_ROUTE_PASS
#define R METER_ROUTE_REFUSE
#define U METER_ROUTE_UNMETERED
		{ A, "POST", "/v1/messages", M, METER_ENDPOINT_ANTHROPIC_MESSAGES },
		{ A, "POST", "/v1/messages?beta=true", M, METER_ENDPOINT_ANTHROPIC_MESSAGES },
		{ A, "POST", "/v1/messages?", M, METER_ENDPOINT_ANTHROPIC_MESSAGES },
		{ A, "POST", "https://api.anthropic.com/v1/messages", M,
		  METER_ENDPOINT_ANTHROPIC_MESSAGES },
		{ A, "POST", "/v1/messages/count_tokens", U, METER_ENDPOINT_NONE },
		{ A, "POST", "/v1/messages/batches", U, METER_ENDPOINT_NONE },
		{ A, "GET", "/v1/messages", P, METER_ENDPOINT_NONE },
		{ A, "GET", "/v1/models", P, METER_ENDPOINT_NONE },
		{ A, "POST", "/v1/complete", U, METER_ENDPOINT_NONE },
		{ A, "POST", "/v1/chat/completions", U, METER_ENDPOINT_NONE },
		{ A, "POST", "*", U, METER_ENDPOINT_NONE },
		{ A, "POST", "", U, METER_ENDPOINT_NONE },
		/* disguised spellings of a metered request */
		{ A, "post", "/v1/messages", R, METER_ENDPOINT_NONE },
		{ A, "Post", "/v1/messages?x", R, METER_ENDPOINT_NONE },
		{ A, "POST", "//v1/messages", R, METER_ENDPOINT_NONE },
		{ A, "POST", "/v1//messages", R, METER_ENDPOINT_NONE },
		{ A, "POST", "/v1/messages/", R, METER_ENDPOINT_NONE },
		{ A, "POST", "/V1/Messages", R, METER_ENDPOINT_NONE },
		{ A, "POST", "/v1/%6dessages", R, METER_ENDPOINT_NONE },
		{ A, "POST", "/v1/%256dessages", R, METER_ENDPOINT_NONE },
		{ A, "POST", "/v1%2Fmessages", R, METER_ENDPOINT_NONE },
		{ A, "POST", "/v1/./messages", R, METER_ENDPOINT_NONE },
		{ A, "POST", "/v1/x/../messages", R, METER_ENDPOINT_NONE },
		{ A, "POST", "/v1/messages;a=b", R, METER_ENDPOINT_NONE },
		{ A, "POST", "/v1\\messages", R, METER_ENDPOINT_NONE },
		{ A, "POST", "/v1/messages#frag", R, METER_ENDPOINT_NONE },
		{ A, "GET", "//v1/messages", P, METER_ENDPOINT_NONE },
		{ O, "POST", "/v1/chat/completions", M, METER_ENDPOINT_OPENAI_CHAT },
		{ O, "POST", "/v1/responses", M, METER_ENDPOINT_OPENAI_RESPONSES },
		{ O, "POST", "/v1/completions", M, METER_ENDPOINT_OPENAI_COMPLETIONS },
		{ O, "POST", "/v1/completions?api-version=1", M,
		  METER_ENDPOINT_OPENAI_COMPLETIONS },
		{ O, "POST", "HTTPS://api.openai.com/v1/chat/completions", M,
		  METER_ENDPOINT_OPENAI_CHAT },
		{ O, "POST", "http://api.openai.com/v1/responses?stream=1", M,
		  METER_ENDPOINT_OPENAI_RESPONSES },
		{ O, "POST", "/v1/responses/resp_123/cancel", U, METER_ENDPOINT_NONE },
		{ O, "GET", "/v1/responses/resp_123", P, METER_ENDPOINT_NONE },
		{ O, "POST", "/v1/embeddings", M, METER_ENDPOINT_OPENAI_EMBEDDINGS },
		{ O, "POST", "/v1/batches", U, METER_ENDPOINT_NONE },
		{ O, "POST", "/v1/images/generations", U, METER_ENDPOINT_NONE },
		{ O, "POST", "/v1/audio/speech", U, METER_ENDPOINT_NONE },
		{ O, "DELETE", "/v1/files/f1", U, METER_ENDPOINT_NONE },
		{ O, "HEAD", "/v1/models", P, METER_ENDPOINT_NONE },
		{ O, "get", "/v1/models", U, METER_ENDPOINT_NONE },
		{ O, "post", "/v1/embeddings", R, METER_ENDPOINT_NONE },
		{ O, "POST", "/v1/messages", U, METER_ENDPOINT_NONE },
		{ O, "PUT", "/v1/responses", U, METER_ENDPOINT_NONE },
		{ O, "POST", "/v1/chat/completions/", R, METER_ENDPOINT_NONE },
		{ O, "POST", "/v1/chat//completions", R, METER_ENDPOINT_NONE },
		{ O, "POST", "/v1/Responses", R, METER_ENDPOINT_NONE },
		{ O, "POST", "/x/../v1/completions", R, METER_ENDPOINT_NONE },
		/* the Realtime WebSocket: a GET, by its path, however the
		 * upgrade travels (h2 drops Upgrade) */
		{ O, "GET", "/v1/realtime", U, METER_ENDPOINT_NONE },
		{ O, "GET", "/v1/realtime?model=gpt-realtime", U, METER_ENDPOINT_NONE },
		{ O, "HEAD", "/v1/realtime/x", U, METER_ENDPOINT_NONE },
		{ O, "GET", "//V1/Realtime/", U, METER_ENDPOINT_NONE },
		{ O, "GET", "/v1/%72ealtime", U, METER_ENDPOINT_NONE },
		{ O, "CONNECT", "/v1/realtime", U, METER_ENDPOINT_NONE },
		{ O, "GET", "/v1/realtimex", P, METER_ENDPOINT_NONE },
		{ A, "GET", "/v1/realtime", P, METER_ENDPOINT_NONE },
#undef A
#undef O
#undef M
#undef P
#undef R
#undef U
	};
	enum meter_endpoint ep;
	size_t i;

	for (i = 0; i < ARRAY_SIZE(cases); i++) {
		char *m = copy_exact(cases[i].method, strlen(cases[i].method));
		char *t = copy_exact(cases[i].target, strlen(cases[i].target));
		enum meter_route r = meter_classify(cases[i].api, m, strlen(cases[i].method), t,
				   strlen(cases[i].target), &ep);
		tap_ok(r == cases[i].route && ep == cases[i].ep, "%s %s %s -> %s %s",
		       meter_api_to_string(cases[i].api), cases[i].method,
		       cases[i].target, meter_route_to_string(cases[i].route),
		       meter_endpoint_to_string(cases[i].ep));
		if (r != cases[i].route || ep != cases[i].ep)
			tap_diag("got %s %s", meter_route_to_string(r),
				 meter_endpoint_to_string(ep));
		free(m);
		free(t);
	}
	{
		/* A NUL inside the target is a byte like another (under SAN,
		 * a copy that stopped at it would be read past its end). */
		static const char nul[] = "/v1/\0/messages%2";
		char *t = copy_exact(nul, sizeof(nul) - 1);

		tap_ok(meter_classify(METER_API_ANTHROPIC, "POST", 4, t, sizeof(nul) - 1,
				      &ep) == METER_ROUTE_UNMETERED,
		       "a target with a NUL byte is unmetered, read to its end");
		free(t);
	}
}

/* ------------------------------------------------------------------ */
/* Requests                                                           */
/* ------------------------------------------------------------------ */

#define AM METER_ENDPOINT_ANTHROPIC_MESSAGES
#define OC METER_ENDPOINT_OPENAI_CHAT
#define OR METER_ENDPOINT_OPENAI_RESPONSES
#define OP METER_ENDPOINT_OPENAI_COMPLETIONS

struct req_case {
	enum meter_endpoint ep;
	const char *body;
	int status;           /* 0: accepted */
	const char *rule;     /* when refused */
	const char *model;    /* when accepted */
	uint64_t max_output;
	int64_t reservation;
	bool stream;
	const char *rewritten; /* NULL: no rewrite */
};

static const struct req_case req_cases[] = {
	/* 94 bytes x 3750 + 1024 x 15000 = 352500 + 15360000 */
	{ AM, "{\"model\":\"claude-sonnet-4-5\",\"max_tokens\":1024,\"messages\":"
	      "[{\"role\":\"user\",\"content\":\"Hello\"}]}",
	  0, NULL, "claude-sonnet-4-5", 1024, 15712500, false, NULL },
	/* no bound: the default 8192; 66 x 3750 + 8192 x 15000 */
	{ AM, "{\"model\":\"claude-sonnet-4-5-20250929\",\"messages\":[],"
	      "\"stream\":true}",
	  0, NULL, "claude-sonnet-4-5-20250929", 8192, 123127500, true,
	  /* the bound reserved is written into the body sent */
	  "{\"max_tokens\":8192,\"model\":\"claude-sonnet-4-5-20250929\",\"messages\":[],"
	  "\"stream\":true}" },
	/* an escaped key is the key; 48 x 18750 + 10 x 75000 */
	{ AM, "{\"mo\\u0064el\":\"claude-opus-4-1\",\"max_tokens\":10}",
	  0, NULL, "claude-opus-4-1", 10, 1650000, false, NULL },
	/* an escaped model name is decoded before the price is looked up:
	 * 48 x 18750 + 10 x 75000 */
	{ AM, "{\"model\":\"claude-opus\\u002d4-1\",\"max_tokens\":10}",
	  0, NULL, "claude-opus-4-1", 10, 1650000, false, NULL },
	/* anthropic reads max_tokens only: 70 x 3750 + 8192 x 15000 */
	{ AM, "{\"model\":\"claude-sonnet-4-5\",\"max_completion_tokens\":5,"
	      "\"stream\":false}",
	  0, NULL, "claude-sonnet-4-5", 8192, 123142500, false,
	  "{\"max_tokens\":8192,\"model\":\"claude-sonnet-4-5\",\"max_completion_tokens\":5,"
	  "\"stream\":false}" },
	/* rounding up: (31 x 46875000 + 1 x 37500000) / 1e6 = 1490.625 */
	{ AM, "{\"model\":\"tiny\",\"max_tokens\":1}",
	  0, NULL, "tiny", 1, 1491, false, NULL },
	{ AM, "{\"model\":\"free\",\"max_tokens\":100000}",
	  0, NULL, "free", 100000, 0, false, NULL },
	/* openai: the largest bound; 107 x 3125 + 300 x 10000 */
	{ OC, "{\"model\":\"gpt-4o\",\"messages\":[{\"role\":\"user\",\"content\":"
	      "\"hi\"}],\"max_tokens\":100,\"max_completion_tokens\":300}",
	  0, NULL, "gpt-4o", 300, 3334375, false, NULL },
	/* n choices: 56 x 187.5 + 3 x 50 x 600 */
	{ OC, "{\"model\":\"gpt-4o-mini\",\"n\":3,\"max_completion_tokens\":50}",
	  0, NULL, "gpt-4o-mini", 150, 100500, false, NULL },
	/* completions: max(n, best_of); 65 x 3125 + 5 x 16 x 10000 */
	{ OP, "{\"model\":\"gpt-4o\",\"prompt\":\"x\",\"n\":2,\"best_of\":5,"
	      "\"max_tokens\":16}",
	  0, NULL, "gpt-4o", 80, 1003125, false, NULL },
	/* responses has no n: 61 x 3125 + 200 x 10000 */
	{ OR, "{\"model\":\"gpt-4o\",\"input\":\"hi\",\"max_output_tokens\":200,"
	      "\"n\":7}",
	  0, NULL, "gpt-4o", 200, 2190625, false, NULL },
	/* null bounds are absent: 56 x 3125 + 8192 x 10000 */
	{ OR, "{\"model\":\"gpt-4o\",\"input\":\"hi\",\"max_output_tokens\":null}",
	  0, NULL, "gpt-4o", 8192, 82095000, false,
	  /* a null bound is replaced by the one reserved */
	  "{\"model\":\"gpt-4o\",\"input\":\"hi\",\"max_output_tokens\":8192}" },
	/* responses streams need no rewrite: 67 x 3125 + 10 x 10000 */
	{ OR, "{\"model\":\"gpt-4o\",\"input\":\"x\",\"stream\":true,"
	      "\"max_output_tokens\":10}",
	  0, NULL, "gpt-4o", 10, 309375, true, NULL },

	/* The rewrite that makes an openai stream report usage; the
	 * reservation is of the body the agent sent: 59 x 3125 + 10 x 10000 */
	{ OC, "{\"model\":\"gpt-4o\",\"stream\":true,\"max_completion_tokens\":10}",
	  0, NULL, "gpt-4o", 10, 284375, true,
	  "{\"stream_options\":{\"include_usage\":true},\"model\":\"gpt-4o\","
	  "\"stream\":true,\"max_completion_tokens\":10}" },
	/* 54 x 3125 + 8192 x 10000 */
	{ OC, "{\"model\":\"gpt-4o\",\"stream\":true,\"stream_options\":null}",
	  0, NULL, "gpt-4o", 8192, 82088750, true,
	  "{\"max_completion_tokens\":8192,\"model\":\"gpt-4o\",\"stream\":true,\"stream_options\":"
	  "{\"include_usage\":true}}" },
	/* 52 x 3125 + 8192 x 10000 */
	{ OC, "{\"model\":\"gpt-4o\",\"stream\":true,\"stream_options\":{}}",
	  0, NULL, "gpt-4o", 8192, 82082500, true,
	  "{\"max_completion_tokens\":8192,\"model\":\"gpt-4o\",\"stream\":true,\"stream_options\":"
	  "{\"include_usage\":true}}" },
	/* 79 x 3125 + 8192 x 10000 */
	{ OC, "{\"model\":\"gpt-4o\",\"stream\":true,\"stream_options\":"
	      "{\"include_obfuscation\":false}}",
	  0, NULL, "gpt-4o", 8192, 82166875, true,
	  "{\"max_completion_tokens\":8192,\"model\":\"gpt-4o\",\"stream\":true,\"stream_options\":"
	  "{\"include_usage\":true,\"include_obfuscation\":false}}" },
	/* 101 x 3125 + 8192 x 10000 */
	{ OC, "{ \"model\" : \"gpt-4o\" , \"stream\" : true , \"stream_options\""
	      " : { \"include_usage\" : false , \"x\" : [1] } }",
	  0, NULL, "gpt-4o", 8192, 82235625, true,
	  "{\"max_completion_tokens\":8192, \"model\" : \"gpt-4o\" , \"stream\" : true , \"stream_options\""
	  " : { \"include_usage\" : true , \"x\" : [1] } }" },
	/* 72 x 3125 + 8192 x 10000 */
	{ OC, "{\"model\":\"gpt-4o\",\"stream\":true,\"stream_options\":"
	      "{\"include_usage\":null}}",
	  0, NULL, "gpt-4o", 8192, 82145000, true,
	  "{\"max_completion_tokens\":8192,\"model\":\"gpt-4o\",\"stream\":true,\"stream_options\":"
	  "{\"include_usage\":true}}" },
	/* already set: 72 x 3125 + 8192 x 10000 */
	{ OC, "{\"model\":\"gpt-4o\",\"stream\":true,\"stream_options\":"
	      "{\"include_usage\":true}}",
	  0, NULL, "gpt-4o", 8192, 82145000, true,
	  "{\"max_completion_tokens\":8192,\"model\":\"gpt-4o\",\"stream\":true,\"stream_options\":"
	  "{\"include_usage\":true}}" },
	/* completions streams too: 48 x 3125 + 16 x 10000 */
	{ OP, "{\"model\":\"gpt-4o\",\"stream\":true,\"max_tokens\":16}",
	  0, NULL, "gpt-4o", 16, 310000, true,
	  "{\"stream_options\":{\"include_usage\":true},\"model\":\"gpt-4o\","
	  "\"stream\":true,\"max_tokens\":16}" },
	/* a key nested deeper is not the member: 86 x 3125 + 8192 x 10000 */
	{ OC, "{\"model\":\"gpt-4o\",\"stream\":true,\"metadata\":{\"stream_options\""
	      ":{\"include_usage\":false}}}",
	  0, NULL, "gpt-4o", 8192, 82188750, true,
	  "{\"stream_options\":{\"include_usage\":true},\"max_completion_tokens\":8192,\"model\":\"gpt-4o\","
	  "\"stream\":true,\"metadata\":{\"stream_options\":"
	  "{\"include_usage\":false}}}" },

	/* Refused before anything is forwarded. */
	{ AM, "", 400, "spend.body", NULL, 0, 0, false, NULL },
	{ AM, "[{\"model\":\"claude-sonnet-4-5\"}]", 400, "spend.body", NULL, 0, 0,
	  false, NULL },
	{ AM, "{\"model\":\"claude-sonnet-4-5\"} x", 400, "spend.body", NULL, 0, 0,
	  false, NULL },
	{ AM, "{\"model\":\"claude-sonnet-4-5\",}", 400, "spend.body", NULL, 0, 0,
	  false, NULL },
	{ AM, "{\"model\":\"claude-sonnet-4-5\"", 400, "spend.body", NULL, 0, 0,
	  false, NULL },
	{ AM, "{'model':'claude-sonnet-4-5'}", 400, "spend.body", NULL, 0, 0,
	  false, NULL },
	{ AM, "{\"model\":\"tiny\",\"model\":\"claude-opus-4-1\"}", 400,
	  "spend.body", NULL, 0, 0, false, NULL },
	{ AM, "{\"model\":\"tiny\",\"m\\u006fdel\":\"claude-opus-4-1\"}", 400,
	  "spend.body", NULL, 0, 0, false, NULL },
	{ AM, "{\"model\":\"tiny\",\"max_tokens\":1,\"max_tokens\":99999}", 400,
	  "spend.body", NULL, 0, 0, false, NULL },
	{ OC, "{\"model\":\"gpt-4o\",\"stream\":true,\"stream\":false}", 400,
	  "spend.body", NULL, 0, 0, false, NULL },
	{ OC, "{\"model\":\"gpt-4o\",\"stream\":true,\"stream_options\":"
	      "{\"include_usage\":false,\"include_usage\":false}}", 400,
	  "spend.body", NULL, 0, 0, false, NULL },
	{ AM, "{\"messages\":[]}", 400, "spend.body", NULL, 0, 0, false, NULL },
	{ AM, "{\"model\":5}", 400, "spend.body", NULL, 0, 0, false, NULL },
	{ AM, "{\"model\":\"\"}", 400, "spend.body", NULL, 0, 0, false, NULL },
	{ AM, "{\"model\":\"tiny\\u0000\"}", 400, "spend.body", NULL, 0, 0, false,
	  NULL },
	{ AM, "{\"model\":\"tiny\",\"max_tokens\":-1}", 400, "spend.body", NULL, 0,
	  0, false, NULL },
	{ AM, "{\"model\":\"tiny\",\"max_tokens\":1.5}", 400, "spend.body", NULL, 0,
	  0, false, NULL },
	{ AM, "{\"model\":\"tiny\",\"max_tokens\":1e3}", 400, "spend.body", NULL, 0,
	  0, false, NULL },
	{ AM, "{\"model\":\"tiny\",\"max_tokens\":\"100\"}", 400, "spend.body", NULL,
	  0, 0, false, NULL },
	{ AM, "{\"model\":\"tiny\",\"max_tokens\":4294967296}", 400, "spend.body",
	  NULL, 0, 0, false, NULL },
	{ AM, "{\"model\":\"tiny\",\"max_tokens\":01}", 400, "spend.body", NULL, 0,
	  0, false, NULL },
	{ OC, "{\"model\":\"gpt-4o\",\"n\":0}", 400, "spend.body", NULL, 0, 0, false,
	  NULL },
	{ OC, "{\"model\":\"gpt-4o\",\"n\":129}", 400, "spend.body", NULL, 0, 0,
	  false, NULL },
	{ OC, "{\"model\":\"gpt-4o\",\"stream\":\"yes\"}", 400, "spend.body", NULL, 0,
	  0, false, NULL },
	{ OC, "{\"model\":\"gpt-4o\",\"stream\":true,\"stream_options\":5}", 400,
	  "spend.body", NULL, 0, 0, false, NULL },
	{ OC, "{\"model\":\"gpt-4o\",\"stream\":true,\"stream_options\":"
	      "{\"include_usage\":1}}", 400, "spend.body", NULL, 0, 0, false, NULL },
	{ AM, "{\"model\":\"tiny\",\"x\":\"\\ud800\"}", 400, "spend.body", NULL, 0, 0,
	  false, NULL },
	{ AM, "{\"model\":\"tiny\",\"x\":\"\\udc00\\ud800\"}", 400, "spend.body", NULL,
	  0, 0, false, NULL },
	{ AM, "{\"model\":\"tiny\",\"x\":\"\\q\"}", 400, "spend.body", NULL, 0, 0,
	  false, NULL },
	{ AM, "{\"model\":\"tiny\",\"x\":\"a\tb\"}", 400, "spend.body", NULL, 0, 0,
	  false, NULL },
	{ AM, "{\"model\":\"tiny\",\"x\":\"\xc0\xaf\"}", 400, "spend.body", NULL, 0, 0,
	  false, NULL },
	{ AM, "{\"model\":\"tiny\",\"x\":\"\xed\xa0\x80\"}", 400, "spend.body", NULL, 0,
	  0, false, NULL },
	{ AM, "{\"model\":\"tiny\",\"x\":\"\xf4\x90\x80\x80\"}", 400, "spend.body", NULL,
	  0, 0, false, NULL },
	{ AM, "{\"model\":\"tiny\",\"x\":NaN}", 400, "spend.body", NULL, 0, 0, false,
	  NULL },
	{ AM, "{\"model\":\"tiny\",\"x\":-}", 400, "spend.body", NULL, 0, 0, false,
	  NULL },
	{ AM, "{\"model\":\"tiny\",\"x\":1.}", 400, "spend.body", NULL, 0, 0, false,
	  NULL },
	{ AM, "{\"model\":\"tiny\",\"x\":tru}", 400, "spend.body", NULL, 0, 0, false,
	  NULL },
	{ AM, "\xef\xbb\xbf{\"model\":\"tiny\"}", 400, "spend.body", NULL, 0, 0,
	  false, NULL },
	{ AM, "{\"model\":\"claude-3-haiku\",\"max_tokens\":1}", 403, "spend.prices",
	  NULL, 0, 0, false, NULL },
	{ OC, "{\"model\":\"gpt-5\"}", 403, "spend.prices", NULL, 0, 0, false, NULL },
	/* a valid body in valid UTF-8: 95 x 3750 + 1 x 15000 */
	{ AM, "{\"model\":\"claude-sonnet-4-5\",\"max_tokens\":1,\"x\":\"\xc3\xa9\xe2\x82\xac"
	      "\xf0\x9f\x98\x80\\ud83d\\ude00\\\"\\n\",\"y\":[-0.5e+3,0,{}]}",
	  0, NULL, "claude-sonnet-4-5", 1, 371250, false, NULL },
};

static void test_requests(void)
{
	size_t i;

	for (i = 0; i < ARRAY_SIZE(req_cases); i++) {
		const struct req_case *c = &req_cases[i];
		size_t len = strlen(c->body), newlen = 0;
		char *body = copy_exact(c->body, len), *nb;
		struct meter_request r;
		struct meter_refusal why;
		bool ok = meter_request_parse(&cfg, c->ep, body, len, &r, &why);

		if (c->status) {
			if (!tap_ok(!ok && why.status == c->status &&
				    strcmp(why.rule, c->rule) == 0,
				    "request %zu refused %d %s", i, c->status, c->rule))
				tap_diag("%s %d %s: %s", ok ? "accepted" : "refused",
					 why.status, ok ? "" : why.rule, why.reason);
			free(body);
			continue;
		}
		if (!tap_ok(ok, "request %zu accepted", i)) {
			tap_diag("%d %s: %s", why.status, why.rule, why.reason);
			free(body);
			continue;
		}
		tap_is_str(r.model, c->model, "request %zu model", i);
		tap_is_int(r.max_output, c->max_output, "request %zu output bound", i);
		tap_is_int(r.reservation, c->reservation, "request %zu reservation", i);
		tap_is_int(r.stream, c->stream, "request %zu stream", i);
		nb = meter_request_rewrite(&r, body, len, &newlen);
		if (!c->rewritten) {
			tap_ok(nb == NULL, "request %zu is forwarded as it is", i);
		} else {
			tap_is_str(nb, c->rewritten, "request %zu rewritten", i);
			tap_is_int(newlen, strlen(c->rewritten),
				   "request %zu rewritten length", i);
		}
		if (nb) {
			/* The rewrite is itself a valid request that needs no
			 * further rewrite. */
			struct meter_request r2;
			char *nb2 = copy_exact(nb, newlen);

			tap_ok(meter_request_parse(&cfg, c->ep, nb2, newlen, &r2, &why) &&
			       r2.nedits == 0 && strcmp(r2.model, r.model) == 0,
			       "request %zu: the rewrite parses and is final", i);
			free(nb2);
		}
		free(nb);
		free(body);
	}
}

static void test_request_limits(void)
{
	struct meter_config small = cfg;
	struct meter_request r;
	struct meter_refusal why;
	const char *b = "{\"model\":\"tiny\",\"max_tokens\":1}";
	size_t len = strlen(b), i, depth;

	small.max_body_bytes = len;
	tap_ok(meter_request_parse(&small, AM, b, len, &r, &why),
	       "a body of exactly max_body_bytes is read");
	small.max_body_bytes = len - 1;
	tap_ok(!meter_request_parse(&small, AM, b, len, &r, &why) &&
	       why.status == 413 && strcmp(why.rule, "spend.max_body_bytes") == 0,
	       "a body over max_body_bytes is 413");
	small.max_body_bytes = 0;
	small.default_max_output_tokens = 7;
	tap_ok(meter_request_parse(&small, AM, "{\"model\":\"tiny\"}", 16, &r, &why) &&
	       r.max_output == 7 && !r.bound_given,
	       "default_max_output_tokens is the bound of a request without one");

	for (depth = 1023; depth <= 1025; depth++) {
		size_t n = 0;
		char *deep = util_xmalloc(64 + 2 * depth);

		n += (size_t)sprintf(deep, "{\"model\":\"tiny\",\"x\":");
		for (i = 1; i < depth; i++)
			deep[n++] = '[';
		for (i = 1; i < depth; i++)
			deep[n++] = ']';
		deep[n++] = '}';
		tap_ok(meter_request_parse(&cfg, AM, deep, n, &r, &why) == (depth <= 1024),
		       "nesting %zu deep is %s", depth,
		       depth <= 1024 ? "read" : "refused");
		free(deep);
	}

	/* A model name of 255 bytes is read, 256 is refused. */
	for (i = 255; i <= 256; i++) {
		char *body = util_xmalloc(i + 64);
		size_t n = (size_t)sprintf(body, "{\"model\":\"");

		memset(body + n, 'm', i);
		n += i;
		n += (size_t)sprintf(body + n, "\"}");
		ASSERT(!meter_request_parse(&cfg, AM, body, n, &r, &why));
		tap_is_str(why.rule, i == 255 ? "spend.prices" : "spend.body",
			   "a %zu-byte model name is %s", i,
			   i == 255 ? "read (and unpriced)" : "refused");
		free(body);
	}
}

/* ------------------------------------------------------------------ */
/* Answers                                                            */
/* ------------------------------------------------------------------ */

/* anthropic's event stream, as the Messages API sends it: input and cache
 * counts in message_start, cumulative output in each message_delta (the
 * last one says 15), text that looks like usage. */
static const char anthropic_sse[] =
	"event: message_start\n"
	"data: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_01XFDUDYJgAACzvnptvVoYEL\","
	"\"type\":\"message\",\"role\":\"assistant\",\"content\":[],\"model\":"
	"\"claude-sonnet-4-5-20250929\",\"stop_reason\":null,\"stop_sequence\":null,"
	"\"usage\":{\"input_tokens\":25,\"cache_creation_input_tokens\":100,"
	"\"cache_read_input_tokens\":200,\"output_tokens\":1}}}\n"
	"\n"
	"event: content_block_start\n"
	"data: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":"
	"{\"type\":\"text\",\"text\":\"\"}}\n"
	"\n"
	"event: ping\n"
	"data: {\"type\": \"ping\"}\n"
	"\n"
	"event: content_block_delta\n"
	"data: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":"
	"\"text_delta\",\"text\":\"Hello \\\"usage\\\":{\\\"output_tokens\\\":999}\\n\\n"
	"event: message_stop\"}}\n"
	"\n"
	"event: message_delta\n"
	"data: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":null,"
	"\"stop_sequence\":null},\"usage\":{\"output_tokens\":5}}\n"
	"\n"
	": a comment line\n"
	"event: message_delta\n"
	"data: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":null,"
	"\"stop_sequence\":null},\"usage\":{\"output_tokens\":10}}\n"
	"\n"
	"event: content_block_stop\n"
	"data: {\"type\":\"content_block_stop\",\"index\":0}\n"
	"\n"
	"event: message_delta\n"
	"data: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\","
	"\"stop_sequence\":null},\"usage\":{\"output_tokens\":15}}\n"
	"\n"
	"event: message_stop\n"
	"data: {\"type\":\"message_stop\"}\n"
	"\n";

/* The same stream cut before message_stop. */
static const char anthropic_sse_cut[] =
	"event: message_start\n"
	"data: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":"
	"\"message\",\"role\":\"assistant\",\"content\":[],\"model\":\"claude-sonnet-4-5\","
	"\"usage\":{\"input_tokens\":25,\"output_tokens\":1}}}\n"
	"\n"
	"event: message_delta\n"
	"data: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},"
	"\"usage\":{\"output_tokens\":15}}\n"
	"\n"
	"event: message_stop\n"
	"data: {\"type\":\"message_stop\"}\n";

/* A newer message_delta that repeats cumulative input counts: they
 * replace message_start's. */
static const char anthropic_sse_delta_input[] =
	"event: message_start\n"
	"data: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":25,"
	"\"cache_creation_input_tokens\":100,\"cache_read_input_tokens\":200,"
	"\"output_tokens\":1}}}\n"
	"\n"
	"event: message_delta\n"
	"data: {\"type\":\"message_delta\",\"delta\":{},\"usage\":{\"input_tokens\":40,"
	"\"cache_read_input_tokens\":0,\"output_tokens\":15}}\n"
	"\n"
	"event: message_stop\n"
	"data: {\"type\":\"message_stop\"}\n"
	"\n";

static const char anthropic_sse_error[] =
	"event: message_start\n"
	"data: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":25,"
	"\"output_tokens\":1}}}\n"
	"\n"
	"event: error\n"
	"data: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\","
	"\"message\":\"Overloaded\"}}\n"
	"\n";

/* Without event: lines (the type decides) and with a data field split
 * over two lines, which SSE joins with a newline. */
static const char anthropic_sse_bare[] =
	"data: {\"type\":\"message_start\",\"message\":{\"usage\":{\"input_tokens\":7,\n"
	"data: \"output_tokens\":1}}}\n"
	"\n"
	"data: {\"type\":\"message_delta\",\"usage\":{\"output_tokens\":3}}\n"
	"\n"
	"data: {\"type\":\"message_stop\"}\n"
	"\n";

static const char anthropic_json[] =
	"{\"id\":\"msg_013Zva2CMHLNnXjNJJKqJ2EF\",\"type\":\"message\",\"role\":"
	"\"assistant\",\"model\":\"claude-sonnet-4-5-20250929\",\"content\":[{\"type\":"
	"\"text\",\"text\":\"Hi! \\\"usage\\\": {}\"}],\"stop_reason\":\"end_turn\","
	"\"stop_sequence\":null,\"usage\":{\"input_tokens\":1000,"
	"\"cache_creation_input_tokens\":0,\"cache_read_input_tokens\":0,"
	"\"output_tokens\":500}}";

static const char anthropic_error_json[] =
	"{\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":"
	"\"Overloaded\"}}";

#define OAI_CHUNK(choices, usage)                                           \
	"data: {\"id\":\"chatcmpl-B9MHDbslfkBeAs8l4bebGdFOJ6PeG\",\"object\":"  \
	"\"chat.completion.chunk\",\"created\":1741570283,\"model\":"           \
	"\"gpt-4o-2024-08-06\",\"service_tier\":\"default\",\"system_fingerprint\":" \
	"\"fp_eb9dce56a8\",\"choices\":" choices ",\"usage\":" usage "}\n\n"

static const char openai_chat_sse[] =
	OAI_CHUNK("[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\","
		  "\"refusal\":null},\"logprobs\":null,\"finish_reason\":null}]", "null")
	OAI_CHUNK("[{\"index\":0,\"delta\":{\"content\":\"\\\"usage\\\":{}\"},"
		  "\"logprobs\":null,\"finish_reason\":null}]", "null")
	OAI_CHUNK("[{\"index\":0,\"delta\":{},\"logprobs\":null,\"finish_reason\":"
		  "\"stop\"}]", "null")
	OAI_CHUNK("[]", "{\"prompt_tokens\":1000,\"completion_tokens\":50,"
		  "\"total_tokens\":1050,\"prompt_tokens_details\":{\"cached_tokens\":400,"
		  "\"audio_tokens\":0},\"completion_tokens_details\":{\"reasoning_tokens\":0,"
		  "\"audio_tokens\":0,\"accepted_prediction_tokens\":0,"
		  "\"rejected_prediction_tokens\":0}}")
	"data: [DONE]\n\n";

/* A stream whose request did not ask for usage: [DONE] without a usage
 * chunk. */
static const char openai_chat_sse_no_usage[] =
	"data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"choices\":"
	"[{\"index\":0,\"delta\":{\"content\":\"Hi\"},\"finish_reason\":\"stop\"}]}\n\n"
	"data: [DONE]\n\n";

static const char openai_chat_sse_error[] =
	"data: {\"id\":\"chatcmpl-1\",\"object\":\"chat.completion.chunk\",\"choices\":"
	"[{\"index\":0,\"delta\":{\"content\":\"Hi\"},\"finish_reason\":null}],"
	"\"usage\":null}\n\n"
	"data: {\"error\":{\"message\":\"The server had an error\",\"type\":"
	"\"server_error\",\"param\":null,\"code\":null}}\n\n";

static const char openai_responses_sse[] =
	"event: response.created\n"
	"data: {\"type\":\"response.created\",\"sequence_number\":0,\"response\":{\"id\":"
	"\"resp_67c9fdcecf488190bdd9a0409de3a1ec07b8b0ad4e5eb654\",\"object\":\"response\","
	"\"created_at\":1741290958,\"status\":\"in_progress\",\"model\":"
	"\"gpt-4o-2024-08-06\",\"output\":[],\"usage\":null}}\n"
	"\n"
	"event: response.in_progress\n"
	"data: {\"type\":\"response.in_progress\",\"sequence_number\":1,\"response\":"
	"{\"id\":\"resp_1\",\"status\":\"in_progress\",\"usage\":null}}\n"
	"\n"
	"event: response.output_item.added\n"
	"data: {\"type\":\"response.output_item.added\",\"sequence_number\":2,"
	"\"output_index\":0,\"item\":{\"id\":\"msg_1\",\"type\":\"message\",\"status\":"
	"\"in_progress\",\"role\":\"assistant\",\"content\":[]}}\n"
	"\n"
	"event: response.output_text.delta\n"
	"data: {\"type\":\"response.output_text.delta\",\"sequence_number\":3,"
	"\"item_id\":\"msg_1\",\"output_index\":0,\"content_index\":0,\"delta\":\"Hi\"}\n"
	"\n"
	"event: response.output_text.done\n"
	"data: {\"type\":\"response.output_text.done\",\"sequence_number\":4,"
	"\"item_id\":\"msg_1\",\"output_index\":0,\"content_index\":0,\"text\":\"Hi\"}\n"
	"\n"
	"event: response.completed\n"
	"data: {\"type\":\"response.completed\",\"sequence_number\":5,\"response\":{\"id\":"
	"\"resp_1\",\"object\":\"response\",\"created_at\":1741290958,\"status\":"
	"\"completed\",\"model\":\"gpt-4o-2024-08-06\",\"output\":[],\"usage\":"
	"{\"input_tokens\":300,\"input_tokens_details\":{\"cached_tokens\":0},"
	"\"output_tokens\":120,\"output_tokens_details\":{\"reasoning_tokens\":0},"
	"\"total_tokens\":420}}}\n"
	"\n";

static const char openai_responses_sse_failed[] =
	"event: response.created\n"
	"data: {\"type\":\"response.created\",\"sequence_number\":0,\"response\":"
	"{\"id\":\"resp_1\",\"status\":\"in_progress\",\"usage\":null}}\n"
	"\n"
	"event: response.failed\n"
	"data: {\"type\":\"response.failed\",\"sequence_number\":1,\"response\":"
	"{\"id\":\"resp_1\",\"status\":\"failed\",\"error\":{\"code\":\"server_error\","
	"\"message\":\"x\"},\"usage\":null}}\n"
	"\n";

static const char openai_chat_json[] =
	"{\"id\":\"chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT\",\"object\":\"chat.completion\","
	"\"created\":1741569952,\"model\":\"gpt-4o-mini-2024-07-18\",\"choices\":[{\"index\":"
	"0,\"message\":{\"role\":\"assistant\",\"content\":\"Hello!\",\"refusal\":null,"
	"\"annotations\":[]},\"logprobs\":null,\"finish_reason\":\"stop\"}],\"usage\":"
	"{\"prompt_tokens\":12,\"completion_tokens\":7,\"total_tokens\":19},"
	"\"service_tier\":\"default\",\"system_fingerprint\":\"fp_fc9f1d7035\"}";

static const char openai_completions_json[] =
	"{\"id\":\"cmpl-uqkvlQyYK7bGYrRHQ0eXlWi7\",\"object\":\"text_completion\","
	"\"created\":1589478378,\"model\":\"gpt-4o\",\"choices\":[{\"text\":\"\\n\\nThis is\","
	"\"index\":0,\"logprobs\":null,\"finish_reason\":\"length\"}],\"usage\":"
	"{\"prompt_tokens\":5,\"completion_tokens\":16,\"total_tokens\":21}}";

static const char openai_responses_json[] =
	"{\"id\":\"resp_1\",\"object\":\"response\",\"created_at\":1741476542,\"status\":"
	"\"completed\",\"model\":\"gpt-4o-2024-08-06\",\"output\":[{\"type\":\"message\","
	"\"id\":\"msg_1\",\"status\":\"completed\",\"role\":\"assistant\",\"content\":"
	"[{\"type\":\"output_text\",\"text\":\"Hi\",\"annotations\":[]}]}],\"usage\":"
	"{\"input_tokens\":2000,\"input_tokens_details\":{\"cached_tokens\":1024},"
	"\"output_tokens\":10,\"output_tokens_details\":{\"reasoning_tokens\":0},"
	"\"total_tokens\":2010}}";

static const char openai_background_json[] =
	"{\"id\":\"resp_1\",\"object\":\"response\",\"status\":\"queued\",\"background\":"
	"true,\"usage\":null}";

static const char openai_error_json[] =
	"{\"error\":{\"message\":\"Rate limit reached\",\"type\":\"requests\",\"param\":"
	"null,\"code\":\"rate_limit_exceeded\"}}";

static const char openai_bad_usage_json[] =
	"{\"id\":\"chatcmpl-1\",\"usage\":{\"prompt_tokens\":10,\"completion_tokens\":5,"
	"\"prompt_tokens_details\":{\"cached_tokens\":11}}}";

static const char openai_negative_usage_json[] =
	"{\"id\":\"chatcmpl-1\",\"usage\":{\"prompt_tokens\":-10,\"completion_tokens\":5}}";

static const char tiny_json[] =
	"{\"type\":\"message\",\"usage\":{\"input_tokens\":3,\"output_tokens\":0}}";

#define SSE "text/event-stream; charset=utf-8"
#define JSON "application/json"

struct resp_case {
	const char *name;
	enum meter_endpoint ep;
	const char *request;
	int status;
	const char *ctype;
	const char *body;
	bool complete;                    /* body_complete */
	enum meter_outcome outcome;
	int64_t cost;                     /* -1: the reservation */
	uint64_t in, out, cw, cr;
};

/* The requests behind the answers: */
#define REQ_SONNET "{\"model\":\"claude-sonnet-4-5\",\"max_tokens\":1024,\"stream\":true}"
#define REQ_4O "{\"model\":\"gpt-4o\",\"stream\":true,\"max_completion_tokens\":64}"
#define REQ_4O_JSON "{\"model\":\"gpt-4o\",\"max_tokens\":64}"
#define REQ_MINI "{\"model\":\"gpt-4o-mini\",\"max_tokens\":64}"
#define REQ_TINY "{\"model\":\"tiny\",\"max_tokens\":1}"

static const struct resp_case resp_cases[] = {
	/* 25 x 3000 + 100 x 3750 + 200 x 300 + 15 x 15000
	 * = 75000 + 375000 + 60000 + 225000 (summing the deltas would say
	 * 30 output tokens: 960000) */
	{ "anthropic stream", AM, REQ_SONNET, 200, SSE, anthropic_sse, true,
	  METER_OUTCOME_USAGE, 735000, 25, 15, 100, 200 },
	{ "anthropic stream, connection cut after the last event", AM, REQ_SONNET,
	  200, SSE, anthropic_sse, false, METER_OUTCOME_USAGE, 735000, 25, 15, 100,
	  200 },
	{ "anthropic stream cut before message_stop's blank line", AM, REQ_SONNET,
	  200, SSE, anthropic_sse_cut, false, METER_OUTCOME_CUT, -1, 0, 0, 0, 0 },
	/* 40 x 3000 + 100 x 3750 + 0 x 300 + 15 x 15000 */
	{ "anthropic delta with cumulative input counts", AM, REQ_SONNET, 200, SSE,
	  anthropic_sse_delta_input, true, METER_OUTCOME_USAGE, 720000, 40, 15, 100,
	  0 },
	{ "anthropic stream with an error event", AM, REQ_SONNET, 200, SSE,
	  anthropic_sse_error, true, METER_OUTCOME_CUT, -1, 0, 0, 0, 0 },
	/* 7 x 3000 + 3 x 15000 */
	{ "anthropic stream without event names, data over two lines", AM,
	  REQ_SONNET, 200, SSE, anthropic_sse_bare, true, METER_OUTCOME_USAGE, 66000,
	  7, 3, 0, 0 },
	/* 1000 x 3000 + 500 x 15000 */
	{ "anthropic JSON", AM, REQ_SONNET, 200, JSON, anthropic_json, true,
	  METER_OUTCOME_USAGE, 10500000, 1000, 500, 0, 0 },
	{ "anthropic JSON cut short", AM, REQ_SONNET, 200, JSON, anthropic_json,
	  false, METER_OUTCOME_CUT, -1, 0, 0, 0, 0 },
	{ "anthropic 529 overloaded", AM, REQ_SONNET, 529, JSON,
	  anthropic_error_json, true, METER_OUTCOME_ERROR, 0, 0, 0, 0, 0 },
	{ "anthropic 400 cut short", AM, REQ_SONNET, 400, JSON,
	  anthropic_error_json, false, METER_OUTCOME_ERROR, 0, 0, 0, 0, 0 },
	{ "anthropic 200 in an unknown type", AM, REQ_SONNET, 200, "text/plain",
	  anthropic_json, true, METER_OUTCOME_NO_USAGE, -1, 0, 0, 0, 0 },
	{ "anthropic 200 JSON without usage", AM, REQ_SONNET, 200, JSON,
	  anthropic_error_json, true, METER_OUTCOME_NO_USAGE, -1, 0, 0, 0, 0 },
	{ "anthropic 200 with a stream where JSON was due", AM, REQ_SONNET, 200,
	  JSON, anthropic_sse, true, METER_OUTCOME_NO_USAGE, -1, 0, 0, 0, 0 },
	/* 3 x 37.5 = 112.5, rounded up */
	{ "rounding up to a whole nano-dollar", AM, REQ_TINY, 200, JSON, tiny_json,
	  true, METER_OUTCOME_USAGE, 113, 3, 0, 0, 0 },

	/* (1000 - 400) x 2500 + 400 x 1250 + 50 x 10000 */
	{ "openai chat stream with the usage chunk", OC, REQ_4O, 200, SSE,
	  openai_chat_sse, true, METER_OUTCOME_USAGE, 2500000, 600, 50, 0, 400 },
	{ "openai chat stream without usage", OC, REQ_4O, 200, SSE,
	  openai_chat_sse_no_usage, true, METER_OUTCOME_CUT, -1, 0, 0, 0, 0 },
	{ "openai chat stream with an error chunk", OC, REQ_4O, 200, SSE,
	  openai_chat_sse_error, true, METER_OUTCOME_CUT, -1, 0, 0, 0, 0 },
	/* 12 x 150 + 7 x 600 */
	{ "openai chat JSON", OC, REQ_MINI, 200, "application/json", openai_chat_json,
	  true, METER_OUTCOME_USAGE, 6000, 12, 7, 0, 0 },
	/* 5 x 2500 + 16 x 10000 */
	{ "openai completions JSON", OP, REQ_4O_JSON, 200, JSON,
	  openai_completions_json, true, METER_OUTCOME_USAGE, 172500, 5, 16, 0, 0 },
	/* 300 x 2500 + 120 x 10000 */
	{ "openai responses stream", OR, REQ_4O, 200, SSE, openai_responses_sse, true,
	  METER_OUTCOME_USAGE, 1950000, 300, 120, 0, 0 },
	{ "openai responses stream that failed", OR, REQ_4O, 200, SSE,
	  openai_responses_sse_failed, true, METER_OUTCOME_CUT, -1, 0, 0, 0, 0 },
	/* (2000 - 1024) x 2500 + 1024 x 1250 + 10 x 10000 */
	{ "openai responses JSON", OR, REQ_4O_JSON, 200, "application/json; charset=utf-8",
	  openai_responses_json, true, METER_OUTCOME_USAGE, 3820000, 976, 10, 0, 1024 },
	{ "openai background response", OR, REQ_4O_JSON, 200, JSON,
	  openai_background_json, true, METER_OUTCOME_NO_USAGE, -1, 0, 0, 0, 0 },
	{ "openai 429", OC, REQ_4O_JSON, 429, JSON, openai_error_json, true,
	  METER_OUTCOME_ERROR, 0, 0, 0, 0, 0 },
	{ "openai 500 stream cut", OC, REQ_4O, 500, SSE, openai_chat_sse_no_usage,
	  false, METER_OUTCOME_ERROR, 0, 0, 0, 0, 0 },
	{ "openai cached above prompt", OC, REQ_4O_JSON, 200, JSON,
	  openai_bad_usage_json, true, METER_OUTCOME_NO_USAGE, -1, 0, 0, 0, 0 },
	{ "openai negative usage", OC, REQ_4O_JSON, 200, JSON,
	  openai_negative_usage_json, true, METER_OUTCOME_NO_USAGE, -1, 0, 0, 0, 0 },
	{ "openai 200 with no Content-Type", OC, REQ_4O_JSON, 200, NULL,
	  openai_chat_json, true, METER_OUTCOME_NO_USAGE, -1, 0, 0, 0, 0 },
	{ "openai 200 with an empty body", OC, REQ_4O_JSON, 200, JSON, "", true,
	  METER_OUTCOME_NO_USAGE, -1, 0, 0, 0, 0 },
};

struct piece {
	size_t at, len;
};

static void run_response(const struct meter_request *req, const struct resp_case *c,
			 const char *body, const struct piece *pieces,
			 size_t npieces, struct meter_charge *out)
{
	struct meter_response *r = meter_response_new(&cfg, req, c->status, c->ctype,
						      c->ctype ? strlen(c->ctype) : 0);
	size_t i;

	for (i = 0; i < npieces; i++) {
		char *p = copy_exact(body + pieces[i].at, pieces[i].len);

		meter_response_feed(r, p, pieces[i].len);
		free(p);
	}
	meter_response_finish(r, c->complete, out);
	meter_response_free(r);
}

static bool same_charge(const struct meter_charge *a, const struct meter_charge *b)
{
	return a->outcome == b->outcome && a->cost == b->cost &&
	       a->have_usage == b->have_usage &&
	       memcmp(&a->usage, &b->usage, sizeof(a->usage)) == 0;
}

/* @body with every LF replaced by @eol. */
static char *with_eol(const char *body, const char *eol, size_t *len)
{
	size_t n = 0, i, el = strlen(eol);
	char *out = util_xmalloc(strlen(body) * el + 1);

	for (i = 0; body[i]; i++) {
		if (body[i] == '\n') {
			memcpy(out + n, eol, el);
			n += el;
		} else {
			out[n++] = body[i];
		}
	}
	out[n] = '\0';
	*len = n;
	return out;
}

static void test_responses(void)
{
	size_t i;

	for (i = 0; i < ARRAY_SIZE(resp_cases); i++) {
		const struct resp_case *c = &resp_cases[i];
		struct meter_request req;
		struct meter_refusal why;
		struct meter_charge whole, got;
		struct piece p[3];
		size_t len = strlen(c->body), k, j, bad = 0;
		int64_t want_cost;
		static const char *const eol[] = { "\r\n", "\r" };

		ASSERT(meter_request_parse(&cfg, c->ep, c->request, strlen(c->request),
					   &req, &why));
		want_cost = c->cost < 0 ? req.reservation : c->cost;
		p[0] = (struct piece){ 0, len };
		run_response(&req, c, c->body, p, 1, &whole);
		tap_ok(whole.outcome == c->outcome && whole.cost == want_cost,
		       "%s: %s, %lld n$", c->name, meter_outcome_to_string(c->outcome),
		       (long long)want_cost);
		if (whole.outcome != c->outcome || whole.cost != want_cost)
			tap_diag("got %s, %lld n$ (%s)",
				 meter_outcome_to_string(whole.outcome),
				 (long long)whole.cost, whole.reason);
		if (c->outcome == METER_OUTCOME_USAGE)
			tap_ok(whole.have_usage && whole.usage.input == c->in &&
			       whole.usage.output == c->out &&
			       whole.usage.cache_write == c->cw &&
			       whole.usage.cache_read == c->cr,
			       "%s: tokens in %llu out %llu cache write %llu read %llu",
			       c->name, (unsigned long long)c->in,
			       (unsigned long long)c->out, (unsigned long long)c->cw,
			       (unsigned long long)c->cr);
		else
			tap_ok(!whole.have_usage, "%s: no usage", c->name);

		/* Every split in two, every byte alone, 64 splits in three. */
		for (k = 0; k <= len; k++) {
			p[0] = (struct piece){ 0, k };
			p[1] = (struct piece){ k, len - k };
			run_response(&req, c, c->body, p, 2, &got);
			bad += !same_charge(&got, &whole);
		}
		{
			struct piece *bytes = util_xcalloc(len ? len : 1, sizeof(*bytes));

			for (k = 0; k < len; k++)
				bytes[k] = (struct piece){ k, 1 };
			run_response(&req, c, c->body, bytes, len, &got);
			bad += !same_charge(&got, &whole);
			free(bytes);
		}
		for (j = 0; j < 64 && len > 2; j++) {
			size_t a = (j * 7919) % len, b = (j * 104729) % len;

			if (a > b) {
				size_t t = a;

				a = b;
				b = t;
			}
			p[0] = (struct piece){ 0, a };
			p[1] = (struct piece){ a, b - a };
			p[2] = (struct piece){ b, len - b };
			run_response(&req, c, c->body, p, 3, &got);
			bad += !same_charge(&got, &whole);
		}
		tap_is_int(bad, 0, "%s: the same charge at every split", c->name);

		if (c->ctype != NULL && strncmp(c->ctype, "text/event-stream", 17) == 0) {
			for (size_t eols = 0; eols < ARRAY_SIZE(eol); eols++) {
				size_t elen;
				char *b = with_eol(c->body, eol[eols], &elen);

				bad = 0;
				for (k = 0; k <= elen; k++) {
					p[0] = (struct piece){ 0, k };
					p[1] = (struct piece){ k, elen - k };
					run_response(&req, c, b, p, 2, &got);
					bad += !same_charge(&got, &whole);
				}
				tap_is_int(bad, 0, "%s: the same charge with %s line ends",
					   c->name, eols == 0 ? "CRLF" : "CR");
				free(b);
			}
		}
	}
}

static void test_response_limits(void)
{
	struct meter_config small = cfg;
	struct meter_request req;
	struct meter_refusal why;
	struct meter_charge ch;
	struct meter_response *r;
	const char *reqb = REQ_SONNET;
	char *big;
	size_t n;

	ASSERT(meter_request_parse(&cfg, AM, reqb, strlen(reqb), &req, &why));

	/* An event over max_sse_event is dropped whole: a long text delta
	 * costs nothing, a long message_start leaves the stream without
	 * usage (charged its reservation). */
	small.max_sse_event = 400;
	big = util_xmalloc(4096);
	n = (size_t)snprintf(big, 4096, "event: message_start\ndata: {\"type\":"
			     "\"message_start\",\"message\":{\"usage\":{\"input_tokens\""
			     ":2,\"output_tokens\":1}}}\n\nevent: content_block_delta\n"
			     "data: {\"type\":\"content_block_delta\",\"delta\":{\"text\":\"");
	memset(big + n, 'x', 1000);
	n += 1000;
	n += (size_t)snprintf(big + n, 4096 - n, "\"}}\n\nevent: message_delta\ndata: "
			      "{\"type\":\"message_delta\",\"usage\":{\"output_tokens\":"
			      "4}}\n\nevent: message_stop\ndata: {\"type\":"
			      "\"message_stop\"}\n\n");
	r = meter_response_new(&small, &req, 200, SSE, strlen(SSE));
	meter_response_feed(r, big, n);
	meter_response_finish(r, true, &ch);
	meter_response_free(r);
	/* 2 x 3000 + 4 x 15000 */
	tap_ok(ch.outcome == METER_OUTCOME_USAGE && ch.cost == 66000,
	       "an overlong content event is skipped, the usage still read");

	n = (size_t)snprintf(big, 4096, "event: message_start\ndata: {\"type\":"
			     "\"message_start\",\"message\":{\"pad\":\"");
	memset(big + n, 'x', 1000);
	n += 1000;
	n += (size_t)snprintf(big + n, 4096 - n, "\",\"usage\":{\"input_tokens\":2,"
			      "\"output_tokens\":1}}}\n\nevent: message_stop\ndata: "
			      "{\"type\":\"message_stop\"}\n\n");
	r = meter_response_new(&small, &req, 200, SSE, strlen(SSE));
	meter_response_feed(r, big, n);
	meter_response_finish(r, true, &ch);
	meter_response_free(r);
	tap_ok(ch.outcome == METER_OUTCOME_CUT && ch.cost == req.reservation,
	       "an overlong message_start leaves the stream charged its reservation");

	small.max_json_body = 100;
	r = meter_response_new(&small, &req, 200, JSON, strlen(JSON));
	meter_response_feed(r, anthropic_json, 60);
	meter_response_feed(r, anthropic_json + 60, strlen(anthropic_json) - 60);
	meter_response_finish(r, true, &ch);
	meter_response_free(r);
	tap_ok(ch.outcome == METER_OUTCOME_NO_USAGE && ch.cost == req.reservation,
	       "a JSON answer over max_json_body is charged its reservation");
	free(big);

	meter_charge_unanswered(&req, &ch);
	tap_ok(ch.outcome == METER_OUTCOME_CUT && ch.cost == req.reservation &&
	       req.reservation == 1024 * 15000 + 61 * 3750,
	       "a request without an answer is charged its reservation");
}

/* The meter's config and the ledger's cap, from a parsed policy. */
static void test_from_policy(void)
{
	static const char doc[] =
		"{\"version\":1,\"spend\":{\"cap_usd\":5.25,\"providers\":[{\"api\":"
		"\"anthropic\",\"hosts\":[\"api.anthropic.com\"]},{\"api\":\"openai\","
		"\"hosts\":[\"api.openai.com\"]}],\"prices\":{\"claude-sonnet-4-5*\":"
		"{\"input\":3,\"output\":15},\"gpt-4o\":{\"input\":2.5,\"output\":10,"
		"\"cache_read\":1.25}},\"max_body_bytes\":1000,"
		"\"default_max_output_tokens\":77}}";
	struct policy_errors errs = { 0 };
	struct policy *p = policy_parse(doc, strlen(doc), NULL, &errs);
	const struct policy_spend_provider *prov;
	struct meter_config c;
	struct meter_request r;
	struct meter_refusal why;
	const struct meter_price *price;
	const char *body = "{\"model\":\"claude-sonnet-4-5-20250929\"}";

	if (!tap_ok(p != NULL, "the spend policy parses")) {
		tap_diag("%s: %s", errs.count ? errs.items[0].path : "?",
			 errs.count ? errs.items[0].message : "?");
		policy_errors_free(&errs);
		return;
	}
	tap_ok(meter_config_from_policy(&c, p), "the meter's config from it");
	tap_is_int(c.nprices, 2, "two prices");
	price = meter_price_lookup(c.prices, c.nprices, "claude-sonnet-4-5-20250929");
	tap_ok(price && price->input == 3000000000LL && price->cache_write == 3750000000LL &&
	       price->cache_read == 300000000LL && price->output == 15000000000LL,
	       "a prefix price with its defaulted cache prices");
	price = meter_price_lookup(c.prices, c.nprices, "gpt-4o");
	tap_ok(price && price->cache_read == 1250000000LL && price->cache_write == 3125000000LL,
	       "an exact price with its own cache_read");
	/* 38 bytes x 3750 + 77 x 15000 */
	tap_ok(meter_request_parse(&c, METER_ENDPOINT_ANTHROPIC_MESSAGES, body, strlen(body),
				   &r, &why) && r.max_output == 77 && r.reservation == 1297500,
	       "default_max_output_tokens from the policy");
	tap_ok(!meter_request_parse(&c, METER_ENDPOINT_ANTHROPIC_MESSAGES, body, 1001, &r,
				    &why) || why.status == 413, "max_body_bytes from the policy");
	prov = policy_spend_provider_for_host(p, "api.openai.com");
	tap_ok(prov && meter_api_of_policy((int)prov->api) == METER_API_OPENAI,
	       "a provider's api is the meter's");
	tap_is_int(ledger_cap_of_policy(p), 5250000000LL, "cap_usd 5.25 is 5.25e9 n$");
	meter_config_free(&c);
	policy_free(p);

	body = "{\"version\":1,\"spend\":{\"cap_usd\":null}}";
	p = policy_parse(body, strlen(body), NULL, &errs);
	tap_ok(p && ledger_cap_of_policy(p) == LEDGER_NO_CAP, "cap_usd null: no cap");
	policy_free(p);
	body = "{\"version\":1,\"spend\":{\"cap_usd\":1e12}}";
	p = policy_parse(body, strlen(body), NULL, &errs);
	tap_ok(p && ledger_cap_of_policy(p) == METER_MONEY_MAX,
	       "a cap above a billion dollars is held at a billion");
	policy_free(p);
	policy_errors_free(&errs);
}

/* ------------------------------------------------------------------ */
/* What holds the cap: the bound sent, stored input, overruns          */
/* ------------------------------------------------------------------ */

static bool parse_str(const struct meter_config *c, enum meter_endpoint ep,
		      const char *body, struct meter_request *r,
		      struct meter_refusal *why)
{
	char *b = copy_exact(body, strlen(body));
	bool ok = meter_request_parse(c, ep, b, strlen(body), r, why);

	free(b);
	return ok;
}

static void test_server_state(void)
{
	static const struct {
		enum meter_endpoint ep;
		const char *body;
		const char *field; /* NULL: accepted */
	} cases[] = {
		{ OR, "{\"model\":\"gpt-4o\",\"max_output_tokens\":5,\"previous_response_id\":\"resp_1\",\"input\":\"x\"}", "previous_response_id" },
		{ OR, "{\"model\":\"gpt-4o\",\"max_output_tokens\":5,\"conversation\":\"conv_1\"}", "conversation" },
		{ OR, "{\"model\":\"gpt-4o\",\"max_output_tokens\":5,\"conversation\":{\"id\":\"conv_1\"}}", "conversation" },
		{ OR, "{\"model\":\"gpt-4o\",\"max_output_tokens\":5,\"prompt\":{\"id\":\"pmpt_1\"}}", "prompt" },
		{ OR, "{\"model\":\"gpt-4o\",\"max_output_tokens\":5,\"input\":[{\"role\":\"user\",\"content\":[{\"type\":\"input_file\",\"file_id\":\"file-1\"}]}]}", "file_id" },
		{ OR, "{\"model\":\"gpt-4o\",\"max_output_tokens\":5,\"input\":[{\"type\":\"item_reference\",\"id\":\"msg_1\"}]}", "item_reference" },
		{ OR, "{\"model\":\"gpt-4o\",\"max_output_tokens\":5,\"input\":[{\"type\":\"item_\\u0072eference\",\"id\":\"msg_1\"}]}", "item_reference" },
		{ OR, "{\"model\":\"gpt-4o\",\"max_output_tokens\":5,\"tools\":[{\"type\":\"file_search\",\"vector_store_ids\":[\"vs_1\"]}]}", "vector_store_ids" },
		{ OC, "{\"model\":\"gpt-4o\",\"max_tokens\":5,\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"file\",\"file\":{\"file_id\":\"file-1\"}}]}]}", "file_id" },
		{ OC, "{\"model\":\"gpt-4o\",\"max_tokens\":5,\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"file\",\"file\":{\"fil\\u0065_id\":\"file-1\"}}]}]}", "file_id" },
		{ AM, "{\"model\":\"claude-sonnet-4-5\",\"max_tokens\":5,\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"document\",\"source\":{\"type\":\"file\",\"file_id\":\"file_1\"}}]}]}", "file_id" },
		{ AM, "{\"model\":\"claude-sonnet-4-5\",\"max_tokens\":5,\"container\":\"cntr_1\",\"messages\":[]}", "container" },
		/* null is absent; a schema naming a property is no id; the
		 * completions prompt is text */
		{ OR, "{\"model\":\"gpt-4o\",\"max_output_tokens\":5,\"previous_response_id\":null,\"conversation\":null,\"prompt\":null}", NULL },
		{ OC, "{\"model\":\"gpt-4o\",\"max_tokens\":5,\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"parameters\":{\"type\":\"object\",\"properties\":{\"file_id\":{\"type\":\"string\"}}}}}]}", NULL },
		{ OP, "{\"model\":\"gpt-4o\",\"max_tokens\":5,\"prompt\":\"hello\"}", NULL },
		{ OC, "{\"model\":\"gpt-4o\",\"max_tokens\":5,\"messages\":[{\"role\":\"user\",\"content\":\"file_id previous_response_id\"}]}", NULL },
		{ AM, "{\"model\":\"claude-sonnet-4-5\",\"max_tokens\":5,\"metadata\":{\"container\":\"x\"}}", NULL },
	};
	struct meter_config allow = cfg;
	struct meter_request r;
	struct meter_refusal why;
	size_t i;

	for (i = 0; i < ARRAY_SIZE(cases); i++) {
		bool ok = parse_str(&cfg, cases[i].ep, cases[i].body, &r, &why);

		if (!cases[i].field) {
			tap_ok(ok && !r.server_state, "stored-state case %zu: accepted", i);
			continue;
		}
		tap_ok(!ok && why.status == 403 && strcmp(why.rule, "spend.unbounded") == 0 &&
		       strstr(why.reason, cases[i].field) != NULL,
		       "stored-state case %zu: %s is refused (403 spend.unbounded)", i,
		       cases[i].field);
	}
	/* server_state "allow": the reserve on top */
	allow.server_state_allow = true;
	allow.server_state_reserve = 50000000;
	tap_ok(parse_str(&allow, OR, cases[0].body, &r, &why) &&
	       r.server_state && strcmp(r.server_state, "previous_response_id") == 0 &&
	       r.server_state_reserve == 50000000 &&
	       r.reservation == 50000000 + (int64_t)strlen(cases[0].body) * 3125 +
				5 * 10000,
	       "server_state allow: reserved server_state_reserve_usd on top");
	tap_ok(parse_str(&allow, OR, cases[12].body, &r, &why) && r.server_state_reserve == 0,
	       "server_state allow: nothing more without such a member");
}

static void test_bound_sent(void)
{
	struct meter_request r;
	struct meter_refusal why;
	struct meter_response *resp;
	struct meter_charge ch;
	const char *b = "{\"model\":\"gpt-4o\",\"messages\":[]}";
	char *nb;
	size_t nlen;
	static const char ok_json[] = "{\"usage\":{\"prompt_tokens\":10,"
		"\"completion_tokens\":8192}}";
	static const char over_json[] = "{\"usage\":{\"prompt_tokens\":10,"
		"\"completion_tokens\":200000}}";

	tap_ok(parse_str(&cfg, OC, b, &r, &why) && !r.bound_given && r.bound == 8192 &&
	       r.max_output == 8192, "chat without a bound reserves the default");
	nb = meter_request_rewrite(&r, b, strlen(b), &nlen);
	tap_is_str(nb, "{\"max_completion_tokens\":8192,\"model\":\"gpt-4o\",\"messages\":[]}",
		   "and sends it as max_completion_tokens");
	free(nb);
	b = "{\"model\":\"gpt-4o\",\"prompt\":\"x\",\"n\":2}";
	tap_ok(parse_str(&cfg, OP, b, &r, &why) && r.bound == 8192 && r.max_output == 16384,
	       "completions: the bound per choice, reserved for every choice");
	nb = meter_request_rewrite(&r, b, strlen(b), &nlen);
	tap_is_str(nb, "{\"max_tokens\":8192,\"model\":\"gpt-4o\",\"prompt\":\"x\",\"n\":2}",
		   "and sent as max_tokens");
	free(nb);
	b = "{\"model\":\"gpt-4o\",\"input\":\"x\"}";
	tap_ok(parse_str(&cfg, OR, b, &r, &why), "responses without a bound");
	nb = meter_request_rewrite(&r, b, strlen(b), &nlen);
	tap_is_str(nb, "{\"max_output_tokens\":8192,\"model\":\"gpt-4o\",\"input\":\"x\"}",
		   "sent as max_output_tokens");
	free(nb);

	/* the answer: within the bound, and past it */
	b = "{\"model\":\"gpt-4o\",\"messages\":[]}";
	ASSERT(parse_str(&cfg, OC, b, &r, &why));
	resp = meter_response_new(&cfg, &r, 200, "application/json", 16);
	meter_response_feed(resp, ok_json, strlen(ok_json));
	meter_response_finish(resp, true, &ch);
	tap_ok(ch.outcome == METER_OUTCOME_USAGE && !ch.overrun &&
	       ch.cost == 10 * 2500 + 8192 * 10000,
	       "an answer within the bound: charged, no overrun (cost %lld)",
	       (long long)ch.cost);
	meter_response_free(resp);
	resp = meter_response_new(&cfg, &r, 200, "application/json", 16);
	meter_response_feed(resp, over_json, strlen(over_json));
	meter_response_finish(resp, true, &ch);
	tap_ok(ch.outcome == METER_OUTCOME_USAGE && ch.overrun &&
	       ch.cost == 10 * 2500 + 200000 * (int64_t)10000,
	       "an answer past the bound sent: charged in full, an overrun");
	meter_response_free(resp);
}

static void test_embeddings_and_pass(void)
{
	struct meter_request r;
	struct meter_refusal why;
	struct meter_response *resp;
	struct meter_charge ch;
	const char *b = "{\"model\":\"gpt-4o\",\"input\":\"hello\"}";
	static const char ans[] = "{\"object\":\"list\",\"data\":[],\"usage\":"
		"{\"prompt_tokens\":400,\"total_tokens\":400}}";
	char *pass[] = { "/v1/messages/count_tokens", "/v1/files" };
	static const struct {
		const char *target;
		bool passes;
	} pc[] = {
		{ "/v1/messages/count_tokens", true },
		{ "/v1/messages/count_tokens?beta=true", true },
		{ "https://api.anthropic.com/v1/messages/count_tokens", true },
		{ "/v1/files/file-1/content", true },
		{ "/v1/files", true },
		{ "/v1/filesx", false },
		{ "/v1/messages/count_tokens/../batches", false },
		{ "/v1/messages/count_tokens/./x", false },
		{ "/v1/files//x", false },
		{ "/v1/files/%2e%2e/batches", false },
		{ "/v1/files\\..\\batches", false },
		{ "/v1/files;x", false },
		{ "/v1/messages/batches", false },
		{ "/V1/files", false },
	};
	size_t i;

	tap_ok(parse_str(&cfg, METER_ENDPOINT_OPENAI_EMBEDDINGS, b, &r, &why) &&
	       r.max_output == 0 && r.nedits == 0 &&
	       r.reservation == (int64_t)strlen(b) * 3125,
	       "embeddings reserve their input only, no bound written");
	tap_ok(!parse_str(&cfg, METER_ENDPOINT_OPENAI_EMBEDDINGS,
			  "{\"model\":\"gpt-4o\",\"stream\":true}", &r, &why) &&
	       why.status == 400, "embeddings do not stream");
	ASSERT(parse_str(&cfg, METER_ENDPOINT_OPENAI_EMBEDDINGS, b, &r, &why));
	resp = meter_response_new(&cfg, &r, 200, "application/json", 16);
	meter_response_feed(resp, ans, strlen(ans));
	meter_response_finish(resp, true, &ch);
	tap_ok(ch.outcome == METER_OUTCOME_USAGE && ch.usage.input == 400 &&
	       ch.usage.output == 0 && ch.cost == 400 * 2500,
	       "embeddings are charged from their usage: 400 x 2500 n$");
	meter_response_free(resp);

	for (i = 0; i < ARRAY_SIZE(pc); i++)
		tap_ok(meter_pass_match(pass, ARRAY_SIZE(pass), pc[i].target,
					strlen(pc[i].target)) == pc[i].passes,
		       "spend.pass: %s %s", pc[i].target,
		       pc[i].passes ? "passes" : "does not pass");
}

int main(void)
{
	setup_prices();
	test_prices();
	test_money();
	test_classify();
	test_requests();
	test_request_limits();
	test_responses();
	test_response_limits();
	test_from_policy();
	test_server_state();
	test_bound_sent();
	test_embeddings_and_pass();
	return tap_done();
}
