/* SPDX-License-Identifier: Apache-2.0
 * fuzz_http.c - libFuzzer target for http.c: request and response heads
 * and the chunked decoder.
 *
 * The whole input is parsed as a request head, as a response head (to GET
 * and to HEAD) and as a chunked body, each with the default limits and
 * with small ones (so that the TOO_LARGE paths are reached by small
 * inputs). A request or response that parses with a chunked body has the
 * bytes after its head fed to the decoder too. Every parse runs on an
 * exact-size heap copy, so ASan reports any read past len.
 *
 * Invariants, each checked with abort() so that libFuzzer reports it:
 *  - heads: the result is in range; OK means 0 < head_len <= len, the head
 *    ends with CRLF CRLF, holds no NUL, no bare CR and no bare LF, every
 *    slice lies inside the head, names are tokens, values carry no
 *    control byte but HTAB and no outer OWS, the framing fields agree with
 *    the header table (one Host, one Content-Length or one
 *    Transfer-Encoding, never both), a normalised host re-normalises to
 *    itself; an error has a reason and an offset inside the buffer;
 *    INCOMPLETE means the buffer holds no CRLF CRLF and is within the
 *    limits;
 *  - prefix consistency: a prefix (at a few cut points chosen from the
 *    input) gives INCOMPLETE or the whole buffer's very result, reason,
 *    offset and fields (compared as offsets into the buffer);
 *  - the first-flight sniff (http_sniff_request): in range, prefix
 *    consistent, never INCOMPLETE at HTTP_SNIFF_MAX bytes, and every head
 *    the strict parser accepts is sniffed as HTTP (so that nothing the
 *    parser would take can pass a tunnel as another protocol);
 *  - chunked: feeding in one piece, in two or three pieces and one byte at
 *    a time gives the same result, payload, consumed count, reason and
 *    error offset; MORE consumes everything it is given; payload slices lie
 *    inside what was fed; DONE ends with CRLF; BAD's error offset is the
 *    count consumed.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "hostname.h"
#include "http.h"
#include "fuzz.h"

static const struct http_limits small_limits = {
	.max_start_line = 48,
	.max_header_block = 160,
	.max_headers = 6,
	.max_chunk_line = 24,
	.max_trailer_block = 48,
};

static char *copy_exact(const uint8_t *s, size_t len)
{
	char *p = malloc(len ? len : 1);

	CHECK(p != NULL);
	if (len)
		memcpy(p, s, len);
	return p;
}

static bool is_tchar(unsigned char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	       (c >= '0' && c <= '9') ||
	       (c != '\0' && strchr("!#$%&'*+-.^_`|~", c) != NULL);
}

static void check_slice_in(struct http_slice s, const char *lo, size_t n)
{
	if (s.ptr == NULL) {
		CHECK(s.len == 0);
		return;
	}
	CHECK(s.ptr >= lo && s.len <= n && (size_t)(s.ptr - lo) <= n - s.len);
}

static bool slices_same(struct http_slice a, const char *abase,
			struct http_slice b, const char *bbase)
{
	if (a.len != b.len || (a.ptr == NULL) != (b.ptr == NULL))
		return false;
	return a.ptr == NULL || a.ptr - abase == b.ptr - bbase;
}

static bool headers_same(const struct http_headers *a, const char *abase,
			 const struct http_headers *b, const char *bbase)
{
	size_t i;

	if (a->count != b->count)
		return false;
	for (i = 0; i < a->count; i++) {
		if (!slices_same(a->h[i].name, abase, b->h[i].name, bbase) ||
		    !slices_same(a->h[i].value, abase, b->h[i].value, bbase))
			return false;
	}
	return true;
}

static bool same_str(const char *a, const char *b)
{
	return (a && b) ? strcmp(a, b) == 0 : a == b;
}

/* The head bytes themselves: CRLF only, no NUL, ends with CRLF CRLF. */
static void check_head_bytes(const char *buf, size_t head_len)
{
	size_t i;

	CHECK(head_len >= 4 && memcmp(buf + head_len - 4, "\r\n\r\n", 4) == 0);
	for (i = 0; i < head_len; i++) {
		CHECK(buf[i] != '\0');
		if (buf[i] == '\r')
			CHECK(i + 1 < head_len && buf[i + 1] == '\n');
		if (buf[i] == '\n')
			CHECK(i > 0 && buf[i - 1] == '\r');
	}
	/* the only empty line is the last one */
	for (i = 0; i + 4 < head_len; i++)
		CHECK(memcmp(buf + i, "\r\n\r\n", 4) != 0);
}

static void check_headers(const struct http_headers *hs, const char *buf,
			  size_t head_len, const struct http_limits *lim)
{
	size_t i, j;

	CHECK(hs->count <= HTTP_MAX_HEADERS &&
	      hs->count <= (lim ? lim->max_headers :
				  http_limits_default.max_headers));
	for (i = 0; i < hs->count; i++) {
		const struct http_header *h = &hs->h[i];

		check_slice_in(h->name, buf, head_len);
		check_slice_in(h->value, buf, head_len);
		CHECK(h->name.len > 0);
		for (j = 0; j < h->name.len; j++)
			CHECK(is_tchar((unsigned char)h->name.ptr[j]));
		for (j = 0; j < h->value.len; j++) {
			unsigned char c = (unsigned char)h->value.ptr[j];

			CHECK(c == '\t' || (c >= 0x20 && c != 0x7f));
		}
		if (h->value.len) {
			unsigned char a = (unsigned char)h->value.ptr[0];
			unsigned char z =
				(unsigned char)h->value.ptr[h->value.len - 1];

			CHECK(a != ' ' && a != '\t' && z != ' ' && z != '\t');
		}
		(void)http_is_hop_by_hop(hs, h->name);
	}
}

static int count_header(const struct http_headers *hs, const char *name)
{
	int i, n = 0;

	for (i = http_header_find(hs, name, 0); i >= 0;
	     i = http_header_find(hs, name, (size_t)i + 1))
		n++;
	return n;
}

/* Content-Length and Transfer-Encoding in the table agree with the parsed
 * framing. */
static void check_framing(const struct http_headers *hs, enum http_body body,
			  uint64_t cl, bool is_response)
{
	int ncl = count_header(hs, "content-length");
	int nte = count_header(hs, "transfer-encoding");

	CHECK(ncl <= 1 && nte <= 1 && !(ncl && nte));
	if (body == HTTP_BODY_CHUNKED)
		CHECK(nte == 1);
	if (body == HTTP_BODY_LENGTH) {
		const struct http_header *h;
		uint64_t v = 0;
		size_t i;

		CHECK(ncl == 1);
		h = &hs->h[http_header_find(hs, "content-length", 0)];
		for (i = 0; i < h->value.len; i++) {
			CHECK(h->value.ptr[i] >= '0' && h->value.ptr[i] <= '9');
			v = v * 10 + (uint64_t)(h->value.ptr[i] - '0');
		}
		CHECK(v == cl && h->value.len > 0);
	}
	if (body == HTTP_BODY_UNTIL_CLOSE)
		CHECK(is_response && ncl == 0 && nte == 0);
}

static void check_host(const struct host_target *t)
{
	char text[HOSTNAME_MAX + 3];
	struct host_target again;
	size_t n = strlen(t->name);

	CHECK(n > 0 && n <= HOSTNAME_MAX);
	if (t->is_addr && t->addr.family == AF_INET6)
		snprintf(text, sizeof(text), "[%s]", t->name);
	else
		snprintf(text, sizeof(text), "%s", t->name);
	CHECK(hostname_normalise(text, strlen(text), &again) == HOSTNAME_OK);
	CHECK(again.is_addr == t->is_addr && strcmp(again.name, t->name) == 0);
}

static bool requests_same(const struct http_request *a, const char *abase,
			  const struct http_request *b, const char *bbase)
{
	return slices_same(a->method, abase, b->method, bbase) &&
	       slices_same(a->target, abase, b->target, bbase) &&
	       slices_same(a->path, abase, b->path, bbase) &&
	       slices_same(a->query, abase, b->query, bbase) &&
	       a->form == b->form && a->is_connect == b->is_connect &&
	       a->version_minor == b->version_minor &&
	       a->has_host == b->has_host && a->port == b->port &&
	       a->port_explicit == b->port_explicit &&
	       a->has_query == b->has_query &&
	       strcmp(a->host.name, b->host.name) == 0 &&
	       a->host.is_addr == b->host.is_addr && a->body == b->body &&
	       a->content_length == b->content_length &&
	       a->keep_alive == b->keep_alive && a->head_len == b->head_len &&
	       headers_same(&a->headers, abase, &b->headers, bbase);
}

static bool responses_same(const struct http_response *a, const char *abase,
			   const struct http_response *b, const char *bbase)
{
	return a->version_minor == b->version_minor &&
	       a->status == b->status &&
	       slices_same(a->reason_phrase, abase, b->reason_phrase, bbase) &&
	       a->body == b->body && a->content_length == b->content_length &&
	       a->keep_alive == b->keep_alive && a->head_len == b->head_len &&
	       headers_same(&a->headers, abase, &b->headers, bbase);
}

static size_t max_head(const struct http_limits *lim)
{
	const struct http_limits *l = lim ? lim : &http_limits_default;

	return l->max_start_line + 2 + l->max_header_block;
}

static bool has_crlfcrlf(const char *buf, size_t len)
{
	return memmem(buf, len, "\r\n\r\n", 4) != NULL;
}

static void check_error(const char *error, size_t offset, size_t len)
{
	CHECK(error != NULL && error[0] != '\0');
	CHECK(offset < len);
}

/* ------------------------------------------------------------------ */
/* Chunked                                                            */
/* ------------------------------------------------------------------ */

struct outcome {
	enum http_chunked_result r;
	uint64_t consumed, data_len, data_hash;
	const char *error;
	uint64_t error_offset;
};

/* Feeds buf cut at @cuts (sorted offsets <= len). */
static void run_chunked(const uint8_t *buf, size_t len, const size_t *cuts,
			size_t ncuts, const struct http_limits *lim,
			struct outcome *o)
{
	struct http_chunked st;
	size_t piece, start = 0;

	memset(o, 0, sizeof(*o));
	o->data_hash = 1469598103934665603ULL;
	o->r = HTTP_CHUNKED_MORE;
	http_chunked_init(&st, lim);
	for (piece = 0; piece <= ncuts; piece++) {
		size_t end = piece < ncuts ? cuts[piece] : len, off = 0;
		size_t plen = end - start;
		char *p = copy_exact(buf + start, plen);

		for (;;) {
			struct http_slice d;
			size_t n;

			o->r = http_chunked_feed(&st, p + off, plen - off, &n,
						 &d);
			CHECK((unsigned int)o->r < HTTP_CHUNKED_RESULT_COUNT);
			CHECK(n <= plen - off);
			if (o->r == HTTP_CHUNKED_DATA) {
				size_t i;

				CHECK(d.len > 0 && d.ptr >= p + off &&
				      d.ptr + d.len == p + off + n);
				for (i = 0; i < d.len; i++)
					o->data_hash = (o->data_hash ^
							(uint8_t)d.ptr[i]) *
						       1099511628211ULL;
				o->data_len += d.len;
			} else {
				CHECK(d.ptr == NULL && d.len == 0);
			}
			off += n;
			o->consumed += n;
			if (o->r == HTTP_CHUNKED_DATA)
				continue;
			if (o->r == HTTP_CHUNKED_MORE)
				CHECK(off == plen);
			if (o->r == HTTP_CHUNKED_DONE)
				CHECK(o->consumed >= 5 && off >= 1 &&
				      p[off - 1] == '\n');
			break;
		}
		free(p);
		start = end;
		if (o->r == HTTP_CHUNKED_DONE || o->r == HTTP_CHUNKED_BAD)
			break;
	}
	o->error = st.error;
	o->error_offset = st.error_offset;
	if (o->r == HTTP_CHUNKED_BAD)
		CHECK(o->error && o->error_offset == o->consumed);
	else
		CHECK(o->error == NULL);
	CHECK(o->data_len <= o->consumed && o->consumed <= len);
}

static bool outcomes_same(const struct outcome *a, const struct outcome *b)
{
	return a->r == b->r && a->consumed == b->consumed &&
	       a->data_len == b->data_len && a->data_hash == b->data_hash &&
	       same_str(a->error, b->error) &&
	       a->error_offset == b->error_offset;
}

static void check_chunked(const uint8_t *buf, size_t len,
			  const struct http_limits *lim, size_t k1, size_t k2)
{
	struct outcome whole, other;
	size_t cuts[2];

	run_chunked(buf, len, NULL, 0, lim, &whole);
	k1 = k1 < len ? k1 : len;
	k2 = k2 < len ? k2 : len;
	cuts[0] = k1 < k2 ? k1 : k2;
	cuts[1] = k1 < k2 ? k2 : k1;
	run_chunked(buf, len, cuts, 1, lim, &other);
	CHECK(outcomes_same(&whole, &other));
	run_chunked(buf, len, cuts, 2, lim, &other);
	CHECK(outcomes_same(&whole, &other));
	if (len > 0 && len <= 512) {
		size_t all[512], i;

		for (i = 0; i + 1 < len; i++)
			all[i] = i + 1;
		run_chunked(buf, len, all, len - 1, lim, &other);
		CHECK(outcomes_same(&whole, &other));
	}
}

/* ------------------------------------------------------------------ */
/* Heads                                                              */
/* ------------------------------------------------------------------ */

static void check_request(const uint8_t *data, size_t size,
			  const struct http_limits *lim, const size_t *cuts,
			  size_t ncuts)
{
	static struct http_request req, part, again;
	char *buf = copy_exact(data, size);
	enum http_result r, rp;
	size_t i;

	r = http_parse_request(buf, size, &req, lim);
	CHECK((unsigned int)r < HTTP_RESULT_COUNT);
	CHECK(http_parse_request(buf, size, &again, lim) == r);
	switch (r) {
	case HTTP_OK:
		CHECK(req.head_len > 0 && req.head_len <= size);
		check_head_bytes(buf, req.head_len);
		check_slice_in(req.method, buf, req.head_len);
		check_slice_in(req.target, buf, req.head_len);
		check_slice_in(req.path, buf, req.head_len);
		check_slice_in(req.query, buf, req.head_len);
		CHECK(req.method.len > 0 && req.target.len > 0);
		for (i = 0; i < req.method.len; i++)
			CHECK(is_tchar((unsigned char)req.method.ptr[i]));
		check_headers(&req.headers, buf, req.head_len, lim);
		check_framing(&req.headers, req.body, req.content_length,
			      false);
		CHECK(req.body != HTTP_BODY_UNTIL_CLOSE);
		CHECK(req.version_minor == 0 || req.version_minor == 1);
		CHECK(count_header(&req.headers, "host") <= 1);
		if (req.version_minor == 1 && !req.is_connect)
			CHECK(count_header(&req.headers, "host") == 1);
		if (req.version_minor == 0)
			CHECK(!req.keep_alive && req.body != HTTP_BODY_CHUNKED);
		CHECK(req.is_connect == (req.form == HTTP_FORM_AUTHORITY));
		if (req.is_connect)
			CHECK(req.body == HTTP_BODY_NONE ||
			      (req.body == HTTP_BODY_LENGTH &&
			       req.content_length == 0));
		if (req.form != HTTP_FORM_ORIGIN)
			CHECK(req.has_host);
		if (req.has_host) {
			check_host(&req.host);
			CHECK(req.port > 0);
		}
		if (req.form == HTTP_FORM_ORIGIN)
			CHECK(req.path.len > 0 && req.path.ptr[0] == '/');
		if (req.form == HTTP_FORM_AUTHORITY)
			CHECK(req.path.ptr == NULL && !req.has_query);
		CHECK(memchr(req.target.ptr, '#', req.target.len) == NULL);
		if (req.body == HTTP_BODY_CHUNKED) {
			size_t rest = size - req.head_len;

			check_chunked(data + req.head_len, rest, lim, rest / 3,
				      rest / 2);
		}
		break;
	case HTTP_INCOMPLETE:
		CHECK(!has_crlfcrlf(buf, size));
		CHECK(size <= max_head(lim));
		break;
	default:
		check_error(req.error, req.error_offset, size);
		CHECK(same_str(req.error, again.error) &&
		      same_str(req.error_detail, again.error_detail) &&
		      req.error_offset == again.error_offset);
		break;
	}
	for (i = 0; i < ncuts; i++) {
		size_t k = cuts[i];
		char *pb;

		if (k >= size)
			continue;
		pb = copy_exact(data, k);
		rp = http_parse_request(pb, k, &part, lim);
		if (rp == HTTP_INCOMPLETE) {
			CHECK(r != HTTP_OK || k < req.head_len);
		} else {
			CHECK(rp == r);
			if (r == HTTP_OK)
				CHECK(requests_same(&req, buf, &part, pb));
			else
				CHECK(same_str(req.error, part.error) &&
				      same_str(req.error_detail,
					       part.error_detail) &&
				      req.error_offset == part.error_offset);
		}
		free(pb);
	}
	free(buf);
}

static void check_response(const uint8_t *data, size_t size,
			   const struct http_limits *lim, bool to_head,
			   const size_t *cuts, size_t ncuts)
{
	static struct http_response resp, part;
	char *buf = copy_exact(data, size);
	enum http_result r, rp;
	size_t i;

	r = http_parse_response(buf, size, &resp, lim, to_head);
	CHECK((unsigned int)r < HTTP_RESULT_COUNT);
	switch (r) {
	case HTTP_OK:
		CHECK(resp.head_len > 0 && resp.head_len <= size);
		check_head_bytes(buf, resp.head_len);
		check_slice_in(resp.reason_phrase, buf, resp.head_len);
		check_headers(&resp.headers, buf, resp.head_len, lim);
		check_framing(&resp.headers, resp.body, resp.content_length,
			      true);
		CHECK(resp.status >= 100 && resp.status <= 599);
		if (to_head || resp.status < 200 || resp.status == 204 ||
		    resp.status == 304)
			CHECK(resp.body == HTTP_BODY_NONE);
		if (resp.version_minor == 0)
			CHECK(!resp.keep_alive &&
			      count_header(&resp.headers,
					   "transfer-encoding") == 0);
		if (resp.body == HTTP_BODY_UNTIL_CLOSE)
			CHECK(!resp.keep_alive);
		if (resp.body == HTTP_BODY_CHUNKED) {
			size_t rest = size - resp.head_len;

			check_chunked(data + resp.head_len, rest, lim,
				      rest / 2, rest / 2 + 1);
		}
		break;
	case HTTP_INCOMPLETE:
		CHECK(!has_crlfcrlf(buf, size));
		CHECK(size <= max_head(lim));
		break;
	default:
		check_error(resp.error, resp.error_offset, size);
		break;
	}
	for (i = 0; i < ncuts; i++) {
		size_t k = cuts[i];
		char *pb;

		if (k >= size)
			continue;
		pb = copy_exact(data, k);
		rp = http_parse_response(pb, k, &part, lim, to_head);
		if (rp == HTTP_INCOMPLETE) {
			CHECK(r != HTTP_OK || k < resp.head_len);
		} else {
			CHECK(rp == r);
			if (r == HTTP_OK)
				CHECK(responses_same(&resp, buf, &part, pb));
			else
				CHECK(same_str(resp.error, part.error) &&
				      resp.error_offset == part.error_offset);
		}
		free(pb);
	}
	free(buf);
}

static void check_sniff(const uint8_t *data, size_t size, const size_t *cuts,
			size_t ncuts)
{
	static struct http_request req;
	char *buf = copy_exact(data, size);
	enum http_result r = http_sniff_request(buf, size), p;
	size_t i;

	CHECK(r == HTTP_OK || r == HTTP_BAD || r == HTTP_INCOMPLETE);
	CHECK(http_sniff_request(buf, size) == r);
	if (size >= HTTP_SNIFF_MAX)
		CHECK(r != HTTP_INCOMPLETE);
	for (i = 0; i < ncuts; i++) {
		if (cuts[i] > size)
			continue;
		p = http_sniff_request(buf, cuts[i]);
		CHECK(p == HTTP_INCOMPLETE || p == r);
	}
	if (http_parse_request(buf, size, &req, NULL) == HTTP_OK)
		CHECK(r == HTTP_OK);
	free(buf);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	size_t cuts[4], seed = 0, i;

	/* Cut points from the input itself, so that the fuzzer can steer
	 * them, plus the middle and the last byte. */
	for (i = 0; i < size && i < 8; i++)
		seed = seed * 131 + data[i];
	cuts[0] = size ? seed % size : 0;
	cuts[1] = size / 2;
	cuts[2] = size ? size - 1 : 0;
	cuts[3] = size ? (seed / 7) % size : 0;

	check_sniff(data, size, cuts, 4);
	check_request(data, size, NULL, cuts, 4);
	check_request(data, size, &small_limits, cuts, 4);
	check_response(data, size, NULL, false, cuts, 4);
	check_response(data, size, NULL, true, cuts, 2);
	check_response(data, size, &small_limits, false, cuts, 2);
	check_chunked(data, size, NULL, cuts[0], cuts[3]);
	check_chunked(data, size, &small_limits, cuts[0], cuts[1]);
	return 0;
}
