/* SPDX-License-Identifier: Apache-2.0
 * fuzz_meter.c - libFuzzer target for meter.c: request classification,
 * request bodies (the strict JSON scanner, the reservation, the
 * stream_options rewrite) and answers (JSON and SSE, any split).
 *
 * The first byte picks what the rest is: a request body (for each
 * endpoint), an answer (the second byte picks endpoint, status and
 * content type; the rest is the body), or a request line (method and
 * target). Every parse runs on an exact-size heap copy, so ASan reports
 * any read past the end.
 *
 * Invariants, each checked with abort() so that libFuzzer reports it:
 *  - requests: a refusal has a status of 400, 403 or 413, a rule and a
 *    reason; an accepted body has a non-empty NUL-free model no longer
 *    than METER_MODEL_MAX, a price, and the reservation that
 *    meter_reservation() gives for its length and bound; jansson agrees
 *    that an accepted body is a JSON object (unless a number overflows
 *    jansson's range) and, when both parse, on the model and max_tokens;
 *  - the rewrite: its result is a valid request with the same model,
 *    bound and stream flag, stream_options.include_usage true (jansson
 *    says), and needs no further rewrite;
 *  - answers: the charge is the same fed whole, a byte at a time and in
 *    pieces cut where the input says; USAGE has usage and costs exactly
 *    meter_cost() of it, CUT and NO_USAGE cost the reservation, ERROR
 *    costs nothing and comes only from a non-2xx status;
 *  - classification: METER only for POST and a target whose path, query
 *    dropped, is the endpoint's exactly.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "fuzz.h"
#include "meter.h"

static struct meter_price prices[3];
static struct meter_config cfg;

static void setup(void)
{
	static int done;

	if (done)
		return;
	done = 1;
	CHECK(meter_price_set(&prices[0], "*", 0.5, 1.5, NULL, NULL));
	CHECK(meter_price_set(&prices[1], "claude-sonnet-4-5*", 3, 15, NULL, NULL));
	CHECK(meter_price_set(&prices[2], "gpt-4o", 2.5, 10, NULL, NULL));
	cfg.prices = prices;
	cfg.nprices = 3;
	cfg.max_sse_event = 512;   /* small, so that the limits are reached */
	cfg.max_json_body = 4096;
}

static char *copy_exact(const uint8_t *s, size_t len)
{
	char *p = malloc(len ? len : 1);

	CHECK(p != NULL);
	if (len)
		memcpy(p, s, len);
	return p;
}

static bool jansson_overflow(const json_error_t *e)
{
	return strstr(e->text, "too big") || strstr(e->text, "overflow");
}

static void check_request(enum meter_endpoint ep, const uint8_t *data, size_t size)
{
	char *body = copy_exact(data, size), *nb;
	struct meter_request r, r2;
	struct meter_refusal why;
	json_error_t jerr;
	json_t *j = NULL, *j2 = NULL;
	size_t nlen = 0;
	int64_t want;

	if (!meter_request_parse(&cfg, ep, body, size, &r, &why)) {
		CHECK(why.status == 400 || why.status == 403 || why.status == 413);
		CHECK(why.rule != NULL && why.reason[0] != '\0');
		CHECK(strlen(why.reason) < sizeof(why.reason));
		goto out;
	}
	CHECK(r.model[0] != '\0' && strlen(r.model) <= METER_MODEL_MAX);
	CHECK(r.price != NULL && r.body_bytes == size);
	CHECK(meter_reservation(r.price, size, r.max_output, &want));
	CHECK(want == r.reservation);

	j = json_loadb(body, size, JSON_ALLOW_NUL, &jerr);
	CHECK(j != NULL || jansson_overflow(&jerr));
	if (j) {
		json_t *m = json_object_get(j, "model"), *mt;

		CHECK(json_is_object(j) && json_is_string(m));
		CHECK(json_string_length(m) == strlen(r.model) &&
		      memcmp(json_string_value(m), r.model, strlen(r.model)) == 0);
		mt = json_object_get(j, "max_tokens");
		if (ep == METER_ENDPOINT_ANTHROPIC_MESSAGES && json_is_integer(mt))
			CHECK((uint64_t)json_integer_value(mt) == r.max_output);
	}

	nb = meter_request_rewrite(&r, body, size, &nlen);
	if (nb) {
		char *again = copy_exact((const uint8_t *)nb, nlen);

		/* a stream asking for usage, or a bound written in */
		CHECK(r.stream || !r.bound_given);
		CHECK(meter_request_parse(&cfg, ep, again, nlen, &r2, &why));
		CHECK(r2.nedits == 0 && strcmp(r2.model, r.model) == 0 &&
		      r2.max_output == r.max_output && r2.stream == r.stream &&
		      r2.bound_given);
		j2 = json_loadb(again, nlen, JSON_ALLOW_NUL, &jerr);
		CHECK(j2 != NULL || jansson_overflow(&jerr));
		if (j2 && r.stream && (ep == METER_ENDPOINT_OPENAI_CHAT ||
				       ep == METER_ENDPOINT_OPENAI_COMPLETIONS))
			CHECK(json_is_true(json_object_get(json_object_get(j2,
						"stream_options"), "include_usage")));
		free(again);
		free(nb);
	}
out:
	json_decref(j);
	json_decref(j2);
	free(body);
}

static void feed(const struct meter_request *req, int status, const char *ct,
		 const char *body, size_t len, const size_t *cuts, size_t ncuts,
		 bool complete, struct meter_charge *out)
{
	struct meter_response *r = meter_response_new(&cfg, req, status, ct,
						      ct ? strlen(ct) : 0);
	size_t i, at = 0;

	for (i = 0; i <= ncuts; i++) {
		size_t end = i < ncuts ? cuts[i] : len;

		if (end < at)
			end = at;
		if (end > len)
			end = len;
		meter_response_feed(r, body + at, end - at);
		at = end;
	}
	meter_response_finish(r, complete, out);
	meter_response_free(r);
}

static bool same(const struct meter_charge *a, const struct meter_charge *b)
{
	return a->outcome == b->outcome && a->cost == b->cost &&
	       a->have_usage == b->have_usage &&
	       memcmp(&a->usage, &b->usage, sizeof(a->usage)) == 0;
}

static void check_answer(const uint8_t *data, size_t size)
{
	static const char *const reqs[] = {
		"{\"model\":\"claude-sonnet-4-5\",\"max_tokens\":100,\"stream\":true}",
		"{\"model\":\"gpt-4o\",\"stream\":true,\"max_tokens\":50}",
		"{\"model\":\"gpt-4o\",\"stream\":true}",
		"{\"model\":\"gpt-4o\",\"n\":2}",
	};
	static const enum meter_endpoint eps[] = {
		METER_ENDPOINT_ANTHROPIC_MESSAGES, METER_ENDPOINT_OPENAI_CHAT,
		METER_ENDPOINT_OPENAI_RESPONSES, METER_ENDPOINT_OPENAI_COMPLETIONS,
	};
	static const char *const cts[] = {
		"text/event-stream", "application/json; charset=utf-8", NULL,
		"text/plain",
	};
	static const int statuses[] = { 200, 200, 429, 529 };
	struct meter_request req;
	struct meter_refusal why;
	struct meter_charge whole, got;
	size_t cuts[4], i;
	char *body;
	int64_t cost;
	unsigned sel;
	bool complete;

	if (size < 1)
		return;
	sel = data[0];
	data++;
	size--;
	CHECK(meter_request_parse(&cfg, eps[sel & 3], reqs[sel & 3],
				  strlen(reqs[sel & 3]), &req, &why));
	complete = (sel & 0x40) == 0;
	body = copy_exact(data, size);
	feed(&req, statuses[(sel >> 2) & 3], cts[(sel >> 4) & 3], body, size, cuts, 0,
	     complete, &whole);

	CHECK((unsigned)whole.outcome < METER_OUTCOME_COUNT && whole.reason);
	switch (whole.outcome) {
	case METER_OUTCOME_USAGE:
		CHECK(whole.have_usage);
		CHECK(meter_cost(req.price, &whole.usage, &cost) && cost == whole.cost);
		break;
	case METER_OUTCOME_CUT:
	case METER_OUTCOME_NO_USAGE:
		CHECK(!whole.have_usage && whole.cost == req.reservation);
		CHECK(statuses[(sel >> 2) & 3] / 100 == 2);
		break;
	case METER_OUTCOME_ERROR:
		CHECK(!whole.have_usage && whole.cost == 0);
		CHECK(statuses[(sel >> 2) & 3] / 100 != 2);
		break;
	case METER_OUTCOME_COUNT:
	default:
		CHECK(0);
	}

	/* The same charge however the body is cut into slices. */
	for (i = 0; i < 4; i++)
		cuts[i] = size ? (size_t)data[i % size] * (i + 1) * 7 % (size + 1) : 0;
	for (i = 1; i < 4; i++)
		if (cuts[i] < cuts[i - 1])
			cuts[i] = cuts[i - 1];
	feed(&req, statuses[(sel >> 2) & 3], cts[(sel >> 4) & 3], body, size, cuts, 4,
	     complete, &got);
	CHECK(same(&got, &whole));
	if (size <= 4096) {
		struct meter_response *r = meter_response_new(&cfg, &req,
			statuses[(sel >> 2) & 3], cts[(sel >> 4) & 3],
			cts[(sel >> 4) & 3] ? strlen(cts[(sel >> 4) & 3]) : 0);

		for (i = 0; i < size; i++)
			meter_response_feed(r, body + i, 1);
		meter_response_finish(r, complete, &got);
		meter_response_free(r);
		CHECK(same(&got, &whole));
	}
	free(body);
}

static void check_classify(const uint8_t *data, size_t size)
{
	const uint8_t *sp = memchr(data, ' ', size);
	size_t mlen = sp ? (size_t)(sp - data) : size;
	size_t tlen = sp ? size - mlen - 1 : 0;
	char *m = copy_exact(data, mlen), *t = copy_exact(sp ? sp + 1 : data, tlen);
	unsigned a;

	for (a = 0; a < METER_API_COUNT; a++) {
		enum meter_endpoint ep;
		enum meter_route r = meter_classify((enum meter_api)a, m, mlen, t, tlen,
						    &ep);

		CHECK((unsigned)r < METER_ROUTE_COUNT);
		if (r == METER_ROUTE_METER) {
			const char *path = meter_endpoint_to_string(ep);
			const char *q = memchr(t, '?', tlen);
			size_t plen = q ? (size_t)(q - t) : tlen;
			size_t el = strlen(path);

			CHECK(mlen == 4 && memcmp(m, "POST", 4) == 0);
			CHECK(plen >= el && memcmp(t + plen - el, path, el) == 0);
			CHECK(plen == el || t[0] != '/');
		} else {
			CHECK(ep == METER_ENDPOINT_NONE);
		}
	}
	free(m);
	free(t);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	unsigned e;

	setup();
	if (size < 1)
		return 0;
	switch (data[0] % 3) {
	case 0:
		for (e = 1; e < METER_ENDPOINT_COUNT; e++)
			check_request((enum meter_endpoint)e, data + 1, size - 1);
		break;
	case 1:
		check_answer(data + 1, size - 1);
		break;
	default:
		check_classify(data + 1, size - 1);
		break;
	}
	return 0;
}
