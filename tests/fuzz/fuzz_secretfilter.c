/* SPDX-License-Identifier: Apache-2.0
 * fuzz_secretfilter.c - libFuzzer target for the secret broker as the
 * proxy runs it on an intercepted connection: the inner request head
 * parsed (http.c, origin-form), copied as the exchange copies it, decided
 * and rewritten by the secret filter (secretfilter.c over subst.c); a
 * response head scrubbed; a response body decoded from chunked coding
 * (http.c) and scrubbed slice by slice (scrub.c) through the filter.
 *
 * Input: byte 0 holds flags (bit 0: the request came inside verified
 * TLS; bit 1: the body is chunked), then the request head up to the first
 * NUL, then the response body; cut points for the body come from the last
 * two bytes. One secret, bound to api.test, headers authorization and
 * x-api-key; its value and placeholder are fixed so that the fuzzer can
 * write them.
 *
 * Invariants, each checked with abort() so that libFuzzer reports it:
 *  - the filter answers CONTINUE or a verdict; a verdict is a 403
 *    secret.block (point broker) or a 502 proxy.filter;
 *  - outside verified TLS, and on a verdict, no header holds the value
 *    more often than the request the agent sent did;
 *  - after the response head hook, no response header holds the value;
 *  - a compressed answer (Content-Encoding other than identity) is
 *    relayed byte for byte (re-framed: never its chunk extensions or
 *    trailers);
 *  - the body, fed in three pieces cut where the input says (each first
 *    decoded by the chunked decoder when bit 1 is set), comes out equal to
 *    scrub_oneshot() of the whole decoded body, and never holds the value.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "broker.h"
#include "filter.h"
#include "fuzz.h"
#include "http.h"
#include "policy.h"
#include "scrub.h"
#include "secretfilter.h"

#define VALUE "SECRETVALUE-abc"
#define PLACEHOLDER "PH-0123456789"

static const char policy_text[] =
	"{\"version\": 1, \"mode\": \"enforce\", \"secrets\": {\"k\": {"
	"\"from_env\": \"K\", \"hosts\": [\"api.test\"], "
	"\"headers\": [\"authorization\", \"x-api-key\"]}}}";

static struct policy *pol;
static struct broker br;
static struct broker_secret bs;
static struct secretfilter *sf;

static void setup(void)
{
	struct policy_errors errs = { 0 };

	if (sf)
		return;
	pol = policy_parse(policy_text, sizeof(policy_text) - 1, NULL, &errs);
	CHECK(pol != NULL);
	bs.def = &pol->secrets[0];
	bs.placeholder = strdup(PLACEHOLDER);
	bs.placeholder_len = strlen(PLACEHOLDER);
	bs.value = strdup(VALUE);
	bs.value_len = strlen(VALUE);
	br.secrets = &bs;
	br.count = 1;
	sf = secretfilter_new(&br, pol, NULL, NULL);
}

static size_t count_in(const char *s, size_t len)
{
	size_t n = 0, i, vl = strlen(VALUE);

	for (i = 0; i + vl <= len; i++)
		if (memcmp(s + i, VALUE, vl) == 0)
			n++;
	return n;
}

static size_t count_headers(const struct filter_headers *hs)
{
	size_t i, n = 0;

	for (i = 0; i < hs->count; i++)
		n += count_in(hs->h[i].value, strlen(hs->h[i].value)) +
		     count_in(hs->h[i].name, strlen(hs->h[i].name));
	return n;
}

static char *dup_slice(struct http_slice s)
{
	char *p = malloc(s.len + 1);

	CHECK(p != NULL);
	if (s.len)
		memcpy(p, s.ptr, s.len);
	p[s.len] = '\0';
	return p;
}

/* Feeds @body (@len) to the filter's body hook in up to three pieces cut
 * at @a and @b, decoding chunked coding first when @chunked; the decoded
 * bytes go to @dec and the hook's output to @out. Returns false when the
 * coding is bad (the exchange then cuts the response: no last slice). */
static bool feed_body(void *st, const char *body, size_t len, size_t a, size_t b,
		      bool chunked, struct buf *dec, struct buf *out)
{
	struct http_chunked ch;
	const size_t cuts[4] = { 0, a, b, len };
	size_t i;
	bool done = false;

	http_chunked_init(&ch, NULL);
	for (i = 0; i < 3 && !done; i++) {
		const char *p = body + cuts[i];
		size_t n = cuts[i + 1] - cuts[i];

		while (n > 0 && !done) {
			struct http_slice data = { NULL, 0 };
			size_t used = n;

			if (chunked) {
				enum http_chunked_result r =
					http_chunked_feed(&ch, p, n, &used, &data);

				if (r == HTTP_CHUNKED_BAD)
					return false;
				done = r == HTTP_CHUNKED_DONE;
			} else {
				data.ptr = p;
				data.len = n;
			}
			if (data.len) {
				buf_append(dec, data.ptr, data.len);
				CHECK(secretfilter_ops.response_body(st, data.ptr, data.len, false,
								     out) == 0);
			}
			p += used;
			n -= used;
			if (used == 0)
				break;
		}
	}
	CHECK(secretfilter_ops.response_body(st, NULL, 0, true, out) == 0);
	return true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *in = (const char *)data;
	const char *nul;
	struct http_request req;
	struct filter_request rq;
	struct filter_response rs;
	struct filter_asks asks = { false, 0 };
	struct filter_transform tf = { false, false };
	bool compressed;
	struct filter_ref ref = { 0, 0, 0 };
	struct verdict v;
	struct filter_stats stats = { 0, 0, 0 };
	struct buf dec = { 0 }, out = { 0 };
	struct scrub_buf want = { 0 };
	enum filter_result r;
	char *method = NULL, *path = NULL, *query = NULL, *head;
	size_t hlen, before, i, a, b, blen;
	const char *body;
	uint8_t flags;
	void *st;

	setup();
	if (size < 4)
		return 0;
	flags = data[0];
	in++;
	size--;
	nul = memchr(in, '\0', size);
	hlen = nul ? (size_t)(nul - in) : size;
	head = malloc(hlen ? hlen : 1);
	CHECK(head != NULL);
	memcpy(head, in, hlen);
	if (http_parse_request(head, hlen, &req, NULL) != HTTP_OK || req.is_connect) {
		free(head);
		return 0;
	}
	memset(&rq, 0, sizeof(rq));
	method = dup_slice(req.method);
	path = req.path.len ? dup_slice(req.path) : strdup("/");
	query = req.has_query ? dup_slice(req.query) : NULL;
	rq.method = method;
	rq.host = &req.host;
	rq.port = req.port;
	rq.path = path;
	rq.query = query;
	rq.body = req.body;
	rq.content_length = req.content_length;
	rq.inner = true;
	rq.client_tls = flags & 1;
	for (i = 0; i < req.headers.count; i++) {
		const struct http_header *h = &req.headers.h[i];
		char *n, *val;

		if (http_slice_eq_ci(h->name, "host") ||
		    http_slice_eq_ci(h->name, "content-length") ||
		    http_slice_eq_ci(h->name, "transfer-encoding") ||
		    http_is_hop_by_hop(&req.headers, h->name))
			continue;
		n = dup_slice(h->name);
		val = dup_slice(h->value);
		filter_headers_add(&rq.headers, n, val);
		free(n);
		free(val);
	}
	before = count_headers(&rq.headers);

	st = secretfilter_ops.attach(sf, &rq);
	CHECK(st != NULL);
	verdict_set(&v, VERDICT_ALLOW, 0, NULL, NULL);
	r = secretfilter_ops.request_head(st, &rq, &asks, ref, &v);
	CHECK(r == FILTER_CONTINUE || r == FILTER_VERDICT);
	if (r == FILTER_VERDICT) {
		CHECK((v.action == VERDICT_DENY && v.status == 403 && v.type &&
		       strcmp(v.type, "secret.block") == 0 && v.point == RECEIPT_POINT_BROKER) ||
		      (v.action == VERDICT_FAIL && v.status == 502));
		CHECK(count_headers(&rq.headers) <= before);
	}
	if (!(flags & 1))
		CHECK(count_headers(&rq.headers) <= before);
	verdict_clear(&v);

	/* the response: the request's headers stand in for its head */
	memset(&rs, 0, sizeof(rs));
	rs.status = 200;
	rs.body = HTTP_BODY_UNTIL_CLOSE;
	for (i = 0; i < rq.headers.count; i++)
		filter_headers_add(&rs.headers, rq.headers.h[i].name, rq.headers.h[i].value);
	verdict_set(&v, VERDICT_ALLOW, 0, NULL, NULL);
	(void)secretfilter_ops.response_head(st, &rs, &tf, &v);
	verdict_clear(&v);
	CHECK(count_headers(&rs.headers) == 0);
	/* a compressed answer is relayed as it is, re-framed all the same */
	CHECK(tf.enabled);
	{
		const char *ce = filter_headers_get(&rs.headers, "content-encoding");

		compressed = ce && strcasecmp(ce, "identity") != 0;
	}

	body = nul ? nul + 1 : in + size;
	blen = nul ? size - hlen - 1 : 0;
	a = blen ? data[size - 1] % (blen + 1) : 0;
	b = blen ? data[size - 2] % (blen + 1) : 0;
	if (a > b) {
		size_t t = a;

		a = b;
		b = t;
	}
	if (!feed_body(st, body, blen, a, b, flags & 2, &dec, &out)) {
		/* cut: what went out never holds the value either */
		CHECK(count_in(out.data ? out.data : "", out.len) == 0);
		goto out;
	}
	if (compressed) {
		CHECK(out.len == dec.len);
		CHECK(out.len == 0 || memcmp(out.data, dec.data, out.len) == 0);
		goto out;
	}
	(void)scrub_oneshot(secretfilter_scrub_set(sf), dec.data ? dec.data : "", dec.len, &want,
			    NULL);
	CHECK(out.len == want.len);
	CHECK(out.len == 0 || memcmp(out.data, want.data, out.len) == 0);
	CHECK(count_in(out.data ? out.data : "", out.len) == 0);
out:
	secretfilter_ops.done(st, FILTER_OUTCOME_COMPLETE, &stats);
	scrub_buf_free(&want);
	buf_free(&dec);
	buf_free(&out);
	filter_headers_free(&rq.headers);
	filter_headers_free(&rs.headers);
	free(method);
	free(path);
	free(query);
	free(head);
	return 0;
}
