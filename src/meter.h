/* SPDX-License-Identifier: Apache-2.0
 * meter.h - the spend meter: which provider requests are metered, what a
 * request reserves, and what its answer costs (docs/SPEND.md).
 *
 * Pure functions over bytes the caller gives: no I/O, no clock, no global
 * state; the only allocations are the rewritten request body and the
 * response parser's bounded buffers. The ledger (ledger.h) holds the money;
 * the proxy moves bytes and calls these in this order for each request on
 * an intercepted connection to a spend provider's host:
 *
 *	route = meter_classify(api, method, mlen, target, tlen, &ep);
 *	METER_ROUTE_PASS:   forward unmetered.
 *	METER_ROUTE_REFUSE: answer 400 (rule "spend.path"), forward nothing.
 *	METER_ROUTE_UNMETERED: under a cap, unless meter_pass_match() with
 *	                    spend.pass: answer 403 (rule "spend.unmetered").
 *	METER_ROUTE_METER:  read the whole body (at most cfg->max_body_bytes,
 *	                    else 413, rule "spend.max_body_bytes"), then
 *	  if (!meter_request_parse(cfg, ep, body, len, &req, &why))
 *	          answer why.status, rule why.rule, forward nothing;
 *	  reserve req.reservation in the ledger (refused: 429);
 *	  new = meter_request_rewrite(&req, body, len, &newlen);
 *	          (non-NULL: forward new instead, with Content-Length newlen:
 *	          the bound reserved written in, openai streams asking for
 *	          usage)
 *	  on the answer's head:
 *	          r = meter_response_new(cfg, &req, status, ctype, ctlen);
 *	  for every slice of the decoded body (any split, as relayed):
 *	          meter_response_feed(r, buf, n);
 *	  at the end of the answer (or when either side hangs up):
 *	          meter_response_finish(r, body_complete, &charge);
 *	          settle the reservation with charge.cost;
 *	  no answer at all after the request was forwarded:
 *	          meter_charge_unanswered(&req, &charge): the reservation.
 *
 * Money is integer nano-dollars (1e-9 USD) in an int64_t; prices are
 * integer nano-dollars per million tokens, so that every cost is an exact
 * integer computation (meter.c's DOC block gives the rounding).
 */
#ifndef AIRLOCK_METER_H
#define AIRLOCK_METER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Nano-dollars per dollar. */
#define METER_NANO_PER_USD INT64_C(1000000000)
/* The largest amount of money the meter and the ledger handle: one
 * billion dollars, in nano-dollars. Caps, prices and reservations above it
 * are refused; sums of many of them still fit in an int64_t. */
#define METER_MONEY_MAX (INT64_C(1000000000) * METER_NANO_PER_USD)
/* The largest price: two million dollars per million tokens (a policy
 * price is at most 1e6, its cache_write 1.25e6). */
#define METER_PRICE_MAX (INT64_C(2000000) * METER_NANO_PER_USD)

/* Defaults of the spend policy fields. */
#define METER_DEFAULT_MAX_BODY_BYTES (UINT64_C(32) * 1024 * 1024)
#define METER_DEFAULT_MAX_OUTPUT_TOKENS UINT64_C(8192)
/* Response parser limits: an SSE event's data (all its data: lines) and a
 * JSON answer. What does not fit is not parsed (docs/SPEND.md says what
 * that costs). */
#define METER_DEFAULT_MAX_SSE_EVENT ((size_t)1024 * 1024)
#define METER_DEFAULT_MAX_JSON_BODY ((size_t)8 * 1024 * 1024)

/* The longest model name a request may carry (bytes, after JSON escapes
 * are decoded). */
#define METER_MODEL_MAX 255

/* Keep meter_api_to_string() in sync (static_assert on the table). */
enum meter_api {
	METER_API_ANTHROPIC = 0,
	METER_API_OPENAI,
	METER_API_COUNT
};

/* "anthropic", "openai": the policy's spend.providers[].api. */
const char *meter_api_to_string(enum meter_api a);
bool meter_api_from_string(const char *s, enum meter_api *out);

/* The metered endpoints. Keep meter_endpoint_to_string() in sync. */
enum meter_endpoint {
	METER_ENDPOINT_NONE = 0,
	METER_ENDPOINT_ANTHROPIC_MESSAGES,  /* POST /v1/messages */
	METER_ENDPOINT_OPENAI_CHAT,         /* POST /v1/chat/completions */
	METER_ENDPOINT_OPENAI_RESPONSES,    /* POST /v1/responses */
	METER_ENDPOINT_OPENAI_COMPLETIONS,  /* POST /v1/completions */
	METER_ENDPOINT_OPENAI_EMBEDDINGS,   /* POST /v1/embeddings: input only */
	METER_ENDPOINT_COUNT
};

/* Its path, e.g. "/v1/messages"; "none" for METER_ENDPOINT_NONE. */
const char *meter_endpoint_to_string(enum meter_endpoint e);

enum meter_route {
	METER_ROUTE_PASS = 0, /* not metered: forward as it is */
	METER_ROUTE_METER,    /* metered: reserve before forwarding */
	METER_ROUTE_REFUSE,   /* a disguised spelling of a metered request
				 (e.g. "//v1/messages", "/v1/Messages/",
				 "/v1/%6dessages", method "post"): refuse
				 with 400, rule "spend.path" */
	METER_ROUTE_UNMETERED, /* any other request but GET and HEAD (and a
				  GET or HEAD under a path where a read opens
				  a billed session: openai's /v1/realtime,
				  the Realtime WebSocket; the caller also
				  counts any request that asks to upgrade):
				  it may cost money and the meter
				  cannot price it. Under a cap it is refused
				  (403, rule "spend.unmetered") unless its
				  path is one of spend.pass
				  (meter_pass_match) */
	METER_ROUTE_COUNT
};

const char *meter_route_to_string(enum meter_route r);

/* Is the request @method @target (the raw request-target: origin-form, or
 * absolute-form whose path is taken) to a host of an @api provider
 * metered? The path is compared exactly with the query dropped; only
 * POST is metered. Sets *ep (METER_ENDPOINT_NONE unless METER). */
enum meter_route meter_classify(enum meter_api api, const char *method,
				size_t method_len, const char *target,
				size_t target_len, enum meter_endpoint *ep);

/* Is the path of @target (query dropped) under one of the @n path
 * prefixes @prefixes (whole segments: "/a/b" covers "/a/b" and "/a/b/..."),
 * spelled canonically: no percent-escape, backslash, empty, "." or ".."
 * segment, ";" or "#" (a spelling a server could read as another path
 * never passes)? */
bool meter_pass_match(char *const *prefixes, size_t n, const char *target,
		      size_t target_len);

/* One price of spend.prices, in nano-dollars per million tokens. */
struct meter_price {
	const char *model;    /* exact name, or a prefix ending in '*'
				 ("*" alone: every model); borrowed */
	int64_t input;
	int64_t output;
	int64_t cache_write;
	int64_t cache_read;
};

/* Fills @p from the policy's dollars per million tokens: @cache_write
 * and @cache_read may be NULL (defaults: 1.25 x input and 0.1 x input,
 * rounded to the nearest nano-dollar). Each price is rounded to the
 * nearest nano-dollar per million tokens. Returns false, @p untouched,
 * when a price is negative, not finite or above METER_PRICE_MAX. @model is
 * borrowed. */
bool meter_price_set(struct meter_price *p, const char *model, double input,
		     double output, const double *cache_write,
		     const double *cache_read);

/* The price for @model among @n prices: an exact name wins, else the
 * longest matching prefix. NULL: no price (the request is refused, rule
 * "spend.prices"). */
const struct meter_price *meter_price_lookup(const struct meter_price *prices,
					     size_t n, const char *model);

/* Dollars (a cap) to nano-dollars, rounded to the nearest. False when
 * negative, not finite or above METER_MONEY_MAX. */
bool meter_usd_to_nano(double usd, int64_t *out);

/* "0.003", "5", "12.000000001", "-0.5": @nano as dollars, exact, without
 * trailing zeros. @out holds METER_USD_LEN bytes. */
#define METER_USD_LEN 32
void meter_format_usd(int64_t nano, char out[METER_USD_LEN]);

/* The spend section of the policy, as the meter uses it. */
struct meter_config {
	const struct meter_price *prices; /* borrowed */
	size_t nprices;
	uint64_t max_body_bytes;            /* 0: the default */
	uint64_t default_max_output_tokens; /* 0: the default */
	size_t max_sse_event;               /* 0: the default */
	size_t max_json_body;               /* 0: the default */
	bool server_state_allow;            /* spend.server_state "allow" */
	int64_t server_state_reserve;       /* nano-dollars reserved on top
					       of such a request */
};

struct policy;

/* Fills @cfg from @p's spend section: its prices (in a malloc'd array
 * that borrows the policy's model names: @p must outlive @cfg),
 * max_body_bytes and default_max_output_tokens; the answer limits are
 * the defaults. Returns false (and @cfg empty) when a price is out of
 * the meter's range, which a valid policy never is. Free with
 * meter_config_free(). */
bool meter_config_from_policy(struct meter_config *cfg, const struct policy *p);
void meter_config_free(struct meter_config *cfg);

/* The meter's name for a spend provider's api. */
enum meter_api meter_api_of_policy(int policy_spend_api);

/* Why a metered request is refused before anything is forwarded. */
struct meter_refusal {
	int status;         /* the answer's status: 400, 403 or 413 */
	const char *rule;   /* "spend.body", "spend.prices",
			       "spend.max_body_bytes", "spend.unbounded" */
	char reason[160];   /* one line; quotes at most a bounded,
			       printable-only copy of the model name */
};

/* A parsed metered request. Plain data: copy it freely; it borrows
 * nothing but ->price (from the config). */
struct meter_request {
	enum meter_endpoint endpoint;
	char model[METER_MODEL_MAX + 1];    /* decoded, NUL-free */
	const struct meter_price *price;
	uint64_t body_bytes;       /* the body the agent sent */
	uint64_t max_output;       /* the output bound reserved for (all
				      choices); an answer reporting more
				      output is an overrun */
	uint64_t bound;            /* the bound per choice, as sent */
	bool bound_given;          /* false: default_max_output_tokens,
				      written into the body sent */
	bool stream;               /* "stream": true */
	const char *server_state;  /* static: the first member that pulls
				      input from stored state
				      ("previous_response_id", "file_id",
				      ...), or NULL */
	int64_t server_state_reserve; /* nano-dollars of the reservation
					 for that state (0 without) */
	int64_t reservation;       /* nano-dollars, all included */

	/* The rewrites, in body order: the output bound when none was
	 * given, stream_options.include_usage for openai chat and
	 * completions streams. Each replaces [at, at + len) by its text
	 * (static, or bound_text). */
	struct meter_edit {
		size_t at;
		size_t len;
		const char *text;  /* static; NULL: bound_text */
	} edits[2];
	size_t nedits;
	char bound_text[48];       /* "\"max_tokens\":8192," or "8192" */
};

/* Parses the metered request body @body of @len bytes (the whole body as
 * the agent sent it, de-chunked) for endpoint @ep. On success fills @out
 * (model, price, bound, reservation, rewrite) and returns true; else fills
 * @why and returns false: a body over max_body_bytes (413), one that is
 * not a strict JSON object (RFC 8259, UTF-8, no duplicate member among
 * those the meter reads), a missing or non-string model, an output bound
 * that is not an integer in range (400, "spend.body"), an unpriced model
 * (403, "spend.prices"), input the provider adds from stored state
 * (previous_response_id, conversation, a stored prompt, a file id, an
 * item_reference, vector_store_ids, an anthropic container) unless
 * cfg->server_state_allow (403, "spend.unbounded"). */
bool meter_request_parse(const struct meter_config *cfg,
			 enum meter_endpoint ep, const char *body, size_t len,
			 struct meter_request *out, struct meter_refusal *why);

/* The body to forward when @req asks for a rewrite: a malloc'd copy of
 * @body with the edit applied (the caller frees it and re-frames the
 * request with Content-Length *out_len). NULL when the body goes as it
 * is. @body and @len must be those given to meter_request_parse(). */
char *meter_request_rewrite(const struct meter_request *req, const char *body,
			    size_t len, size_t *out_len);

/* The reservation of @body_bytes with output bound @max_output at @p, in
 * nano-dollars, rounded up; false when above METER_MONEY_MAX. */
bool meter_reservation(const struct meter_price *p, uint64_t body_bytes,
		       uint64_t max_output, int64_t *out);

/* Token counts of one answer. input excludes cache reads (openai's
 * cached_tokens are taken out of prompt_tokens) and cache writes. */
struct meter_usage {
	uint64_t input;
	uint64_t output;
	uint64_t cache_write;
	uint64_t cache_read;
};

/* The cost of @u at @p, in nano-dollars, rounded up; false when above
 * METER_MONEY_MAX. */
bool meter_cost(const struct meter_price *p, const struct meter_usage *u,
		int64_t *out);

/* What an answer is charged. Keep meter_outcome_to_string() in sync. */
enum meter_outcome {
	METER_OUTCOME_USAGE = 0, /* complete, with usage: its cost */
	METER_OUTCOME_CUT,       /* a 2xx answer that ended before it was
				    complete, or never came: the
				    reservation */
	METER_OUTCOME_NO_USAGE,  /* a complete 2xx answer without a usable
				    usage: the reservation */
	METER_OUTCOME_ERROR,     /* a non-2xx answer without usage:
				    nothing */
	METER_OUTCOME_COUNT
};

const char *meter_outcome_to_string(enum meter_outcome o);

struct meter_charge {
	enum meter_outcome outcome;
	bool have_usage;            /* usage holds the provider's counts */
	struct meter_usage usage;   /* zero unless have_usage */
	bool overrun;               /* the answer reports more output
				       tokens than the bound sent: charged
				       in full all the same */
	int64_t cost;               /* nano-dollars to settle with */
	const char *reason;         /* static, one line */
};

struct meter_response;

/* Starts metering the answer to @req: @status is the final status (not
 * 1xx), @ctype the Content-Type value (NULL if absent). @cfg and @req
 * must outlive the parser. Never NULL (allocation failure aborts). */
struct meter_response *meter_response_new(const struct meter_config *cfg,
					  const struct meter_request *req,
					  int status, const char *ctype,
					  size_t ctype_len);

/* Feeds the next @len bytes of the answer's body, after transfer and
 * content decoding, in any split. Memory stays within the config's
 * limits whatever is fed. */
void meter_response_feed(struct meter_response *r, const char *buf, size_t len);

/* The charge once the answer is over: @body_complete is true when its
 * body ended as its framing said (Content-Length reached, last chunk, or
 * close for a close-delimited body), false when either side hung up or
 * the framing was broken. */
void meter_response_finish(struct meter_response *r, bool body_complete,
			   struct meter_charge *out);

void meter_response_free(struct meter_response *r);

/* The charge of a request that was forwarded but never answered (no
 * status line): its reservation. */
void meter_charge_unanswered(const struct meter_request *req,
			     struct meter_charge *out);

#endif /* AIRLOCK_METER_H */
