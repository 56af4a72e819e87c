/* SPDX-License-Identifier: Apache-2.0
 * http.c - strict HTTP/1.1 head parsing and chunked decoding for the egress
 * proxy.
 *
 * DOC: Theory of Operation
 *
 * The proxy sits between a hostile client and servers it does not control.
 * Request smuggling lives in the gap between two parsers: if the proxy and
 * the upstream (or the client and the proxy, for responses) disagree on
 * where a message ends, the bytes one of them takes for a body the other
 * takes for the next request, which the proxy never checked. The defence
 * is not to be clever about ambiguous input but to refuse it: whatever this
 * parser accepts has exactly one reading under RFC 9112, so every
 * compliant parser downstream frames it the same way. Hence:
 *
 *  - CRLF only. A bare LF or bare CR is a line ending to some parsers and a
 *    byte to others. NUL ends strings in others still.
 *  - No obs-fold, no whitespace before a field's colon, no control bytes in
 *    values, tokens where the grammar says token: each has been used to
 *    hide a header from one parser and show it to another
 *    ("Transfer-Encoding : chunked", "Transfer-Encoding:\r\n chunked").
 *  - One framing. Host, Content-Length and Transfer-Encoding may appear at
 *    most once (even duplicates with equal values: the next hop may pick
 *    either); Content-Length is digits only (no "+4", "4, 4", "0x10");
 *    Transfer-Encoding in a request is exactly "chunked"; both together
 *    are refused outright (CL.TE / TE.CL), as is Transfer-Encoding in
 *    HTTP/1.0, which some peers ignore. OWS (SP or HTAB) around a value is
 *    RFC-legal and accepted, so "Transfer-Encoding:\tchunked" is chunked;
 *    the proxy never forwards framing headers verbatim but writes its own
 *    from the parsed fields, so the next hop never sees the tab.
 *  - One destination. The proxy routes by the request target; a Host
 *    header naming anything else (after the same normalisation as the
 *    target, ports included) is refused, so that no upstream can be
 *    steered by a Host the policy never checked. Hosts go through
 *    hostname_normalise(), which refuses user-info, percent-escapes,
 *    brackets around names and other parser-confusion tricks.
 *  - Bounded. Lines, header blocks, field counts, chunk-size lines and
 *    trailers all have limits (struct http_limits); nothing is allocated.
 *
 * Heads are parsed by a single left-to-right pass that re-runs from byte 0
 * on every call (the buffer may have moved). Each check is made at a fixed
 * point of that pass and depends only on the bytes before it: byte checks
 * (NUL, bare CR/LF, length limits) as each byte is reached, line checks
 * when a line's CRLF is seen, and "missing Host" at the empty line. A
 * prefix therefore gives either HTTP_INCOMPLETE or the very result of the
 * whole buffer, whatever the split. No empty line is tolerated before the
 * request-line (RFC 9112 §2.2 allows ignoring one; nothing we proxy needs
 * it and rejecting is the one reading).
 *
 * The chunked decoder is a byte-at-a-time state machine for the same
 * reason: errors are found at the offending byte whatever the split, and
 * the caller may relay the consumed bytes verbatim because only the strict
 * grammar gets through.
 */
#include "http.h"

#include <assert.h>
#include <string.h>

#include "util.h"

const struct http_limits http_limits_default = {
	.max_start_line = 8192,
	.max_header_block = 32768,
	.max_headers = HTTP_MAX_HEADERS,
	.max_chunk_line = 4096,
	.max_trailer_block = 8192,
};

static const char *const result_names[] = {
	[HTTP_OK] = "ok",
	[HTTP_INCOMPLETE] = "incomplete",
	[HTTP_BAD] = "bad message",
	[HTTP_TOO_LARGE] = "message head too large",
};
static_assert(ARRAY_SIZE(result_names) == HTTP_RESULT_COUNT,
	      "result_names out of sync with enum http_result");

const char *http_result_to_string(enum http_result r)
{
	if ((unsigned int)r >= HTTP_RESULT_COUNT)
		return "unknown result";
	return result_names[r];
}

static const char *const chunked_names[] = {
	[HTTP_CHUNKED_MORE] = "more",
	[HTTP_CHUNKED_DATA] = "data",
	[HTTP_CHUNKED_DONE] = "done",
	[HTTP_CHUNKED_BAD] = "bad chunked body",
};
static_assert(ARRAY_SIZE(chunked_names) == HTTP_CHUNKED_RESULT_COUNT,
	      "chunked_names out of sync with enum http_chunked_result");

const char *http_chunked_result_to_string(enum http_chunked_result r)
{
	if ((unsigned int)r >= HTTP_CHUNKED_RESULT_COUNT)
		return "unknown result";
	return chunked_names[r];
}

/* ------------------------------------------------------------------ */
/* Character classes (RFC 9110 §5.6)                                  */
/* ------------------------------------------------------------------ */

static bool is_tchar(unsigned char c)
{
	return util_is_alpha(c) || util_is_digit(c) ||
	       (c != '\0' && strchr("!#$%&'*+-.^_`|~", c) != NULL);
}

static bool is_ows(unsigned char c)
{
	return c == ' ' || c == '\t';
}

/* VCHAR or obs-text: what a field value holds besides SP and HTAB. */
static bool is_field_vchar(unsigned char c)
{
	return c > 0x20 && c != 0x7f;
}

static bool eq_ci_n(const char *a, const char *b, size_t len)
{
	size_t i;

	for (i = 0; i < len; i++) {
		if (util_ascii_lower(a[i]) != util_ascii_lower(b[i]))
			return false;
	}
	return true;
}

static bool eq_ci(const char *s, size_t len, const char *lit)
{
	return strlen(lit) == len && eq_ci_n(s, lit, len);
}

bool http_slice_eq_ci(struct http_slice s, const char *lit)
{
	return s.ptr ? eq_ci(s.ptr, s.len, lit) : lit[0] == '\0';
}

static bool all_tchar(const char *s, size_t len)
{
	size_t i;

	for (i = 0; i < len; i++) {
		if (!is_tchar((unsigned char)s[i]))
			return false;
	}
	return len > 0;
}

static struct http_slice slice(const char *p, size_t len)
{
	struct http_slice s = { p, len };

	return s;
}

/* Comma-separated list elements with OWS trimmed (RFC 9110 §5.6.1); an
 * empty element comes back as an empty slice. */
struct list_iter {
	const char *p;
	size_t len, off;
	bool done;
};

static void list_init(struct list_iter *it, struct http_slice v)
{
	it->p = v.ptr;
	it->len = v.len;
	it->off = 0;
	it->done = false;
}

static bool list_next(struct list_iter *it, struct http_slice *elem)
{
	size_t start, end;

	if (it->done)
		return false;
	start = it->off;
	end = start;
	while (end < it->len && it->p[end] != ',')
		end++;
	if (end == it->len)
		it->done = true;
	else
		it->off = end + 1;
	while (start < end && is_ows((unsigned char)it->p[start]))
		start++;
	while (end > start && is_ows((unsigned char)it->p[end - 1]))
		end--;
	*elem = slice(it->p + start, end - start);
	return true;
}

/* ------------------------------------------------------------------ */
/* Lines                                                              */
/* ------------------------------------------------------------------ */

struct head {
	const char *buf;
	size_t len;
	size_t pos;          /* start of the next line */
	size_t block_start;  /* first byte after the start line */
	struct http_limits lim;
	const char *error;
	const char *detail;
	size_t error_offset;
};

static void head_init(struct head *h, const char *buf, size_t len,
		      const struct http_limits *lim)
{
	memset(h, 0, sizeof(*h));
	h->buf = buf;
	h->len = buf ? len : 0;
	h->lim = lim ? *lim : http_limits_default;
	if (h->lim.max_headers > HTTP_MAX_HEADERS)
		h->lim.max_headers = HTTP_MAX_HEADERS;
}

static enum http_result fail(struct head *h, enum http_result r,
			     const char *why, size_t at)
{
	h->error = why;
	h->error_offset = at;
	return r;
}

/* The next CRLF-terminated line from h->pos: *line excludes the CRLF and
 * h->pos moves past it. Byte checks come first, in byte order, so that the
 * first offending byte decides whatever the split. The start line is
 * bounded by max_start_line (CRLF excluded), the rest of the head by
 * max_header_block (CRLFs included). */
static enum http_result next_line(struct head *h, bool start_line,
				  struct http_slice *line)
{
	const char *what = start_line ? "start line too long"
				      : "header block too large";
	size_t i;

	for (i = h->pos; i < h->len; i++) {
		unsigned char c = (unsigned char)h->buf[i];

		if (!start_line &&
		    i - h->block_start >= h->lim.max_header_block)
			return fail(h, HTTP_TOO_LARGE, what, i);
		if (c == '\r') {
			if (i + 1 == h->len)
				return HTTP_INCOMPLETE;
			if (h->buf[i + 1] != '\n')
				return fail(h, HTTP_BAD, "bare CR in head", i);
			if (!start_line &&
			    i + 1 - h->block_start >= h->lim.max_header_block)
				return fail(h, HTTP_TOO_LARGE, what, i + 1);
			*line = slice(h->buf + h->pos, i - h->pos);
			h->pos = i + 2;
			return HTTP_OK;
		}
		if (c == '\n')
			return fail(h, HTTP_BAD, "bare LF line ending", i);
		if (start_line && i - h->pos >= h->lim.max_start_line)
			return fail(h, HTTP_TOO_LARGE, what, i);
		if (c == '\0')
			return fail(h, HTTP_BAD, "NUL in head", i);
	}
	return HTTP_INCOMPLETE;
}

/* token ":" OWS value OWS (RFC 9112 §5). */
static enum http_result parse_field(struct head *h, struct http_slice line,
				    struct http_header *out)
{
	const unsigned char *p = (const unsigned char *)line.ptr;
	size_t at = (size_t)(line.ptr - h->buf), n = line.len, i = 0, vs, ve,
	       j;

	if (is_ows(p[0]))
		return fail(h, HTTP_BAD, "obs-fold in header block", at);
	while (i < n && is_tchar(p[i]))
		i++;
	if (i == n)
		return fail(h, HTTP_BAD, "header line without colon", at);
	if (p[i] != ':') {
		if (is_ows(p[i]))
			return fail(h, HTTP_BAD,
				    "whitespace between field name and colon",
				    at + i);
		return fail(h, HTTP_BAD, "invalid character in field name",
			    at + i);
	}
	if (i == 0)
		return fail(h, HTTP_BAD, "empty field name", at);
	vs = i + 1;
	while (vs < n && is_ows(p[vs]))
		vs++;
	ve = n;
	while (ve > vs && is_ows(p[ve - 1]))
		ve--;
	for (j = vs; j < ve; j++) {
		if (!is_field_vchar(p[j]) && !is_ows(p[j]))
			return fail(h, HTTP_BAD,
				    "control character in field value",
				    at + j);
	}
	out->name = slice(line.ptr, i);
	out->value = slice(line.ptr + vs, ve - vs);
	return HTTP_OK;
}

/* ------------------------------------------------------------------ */
/* Field values with framing meaning                                  */
/* ------------------------------------------------------------------ */

/* 1*DIGIT below 2^63. Returns NULL or the reason. */
static const char *parse_content_length(struct http_slice v, uint64_t *out)
{
	uint64_t n = 0;
	size_t i;

	if (v.len == 0)
		return "invalid Content-Length";
	for (i = 0; i < v.len; i++) {
		unsigned char c = (unsigned char)v.ptr[i];

		if (!util_is_digit(c))
			return "invalid Content-Length";
		if (n > (UINT64_C(0x7fffffffffffffff) - (c - '0')) / 10)
			return "Content-Length too large";
		n = n * 10 + (uint64_t)(c - '0');
	}
	*out = n;
	return NULL;
}

/* A response's Transfer-Encoding: a list of codings (tokens, no
 * parameters) whose final and only "chunked" is last. */
static const char *check_response_te(struct http_slice v)
{
	struct list_iter it;
	struct http_slice e;
	bool last_chunked = false;
	int chunked = 0;

	list_init(&it, v);
	while (list_next(&it, &e)) {
		if (!all_tchar(e.ptr, e.len))
			return "invalid Transfer-Encoding";
		last_chunked = eq_ci(e.ptr, e.len, "chunked");
		if (last_chunked)
			chunked++;
	}
	if (chunked > 1)
		return "chunked applied more than once";
	if (!last_chunked)
		return "Transfer-Encoding without final chunked";
	return NULL;
}

/* A Connection value: a list of tokens (empty elements allowed). Sets
 * *want_close for "close". Naming Host or Content-Length would let a hop
 * that honours Connection drop the very fields that route and frame the
 * message. */
static const char *check_connection(struct http_slice v, bool *want_close)
{
	struct list_iter it;
	struct http_slice e;

	list_init(&it, v);
	while (list_next(&it, &e)) {
		if (e.len == 0)
			continue;
		if (!all_tchar(e.ptr, e.len))
			return "invalid Connection header";
		if (eq_ci(e.ptr, e.len, "close"))
			*want_close = true;
		else if (eq_ci(e.ptr, e.len, "host") ||
			 eq_ci(e.ptr, e.len, "content-length"))
			return "Connection names Host or Content-Length";
	}
	return NULL;
}

/* "host[:port]" with the host through the shared normaliser; @dflt is the
 * port when none is written. */
static enum hostname_error parse_host_port(const char *s, size_t n,
					   uint16_t dflt,
					   struct host_target *t,
					   uint16_t *port, bool *explicit_port)
{
	bool has_port;

	if (n > 0 && s[0] == '[') {
		const char *rb = memchr(s, ']', n);

		has_port = rb && (size_t)(rb - s) + 1 < n && rb[1] == ':';
	} else {
		has_port = memchr(s, ':', n) != NULL;
	}
	*explicit_port = has_port;
	if (has_port)
		return hostname_parse_authority(s, n, t, port);
	*port = dflt;
	return hostname_normalise(s, n, t);
}

static bool same_target(const struct host_target *a, uint16_t aport,
			const struct host_target *b, uint16_t bport)
{
	return aport == bport && a->is_addr == b->is_addr &&
	       strcmp(a->name, b->name) == 0;
}

/* ------------------------------------------------------------------ */
/* Requests                                                           */
/* ------------------------------------------------------------------ */

/* Framing fields seen so far in a head. */
struct fields {
	bool host, cl, te, close;
	size_t host_off;
};

static enum http_result version_of(struct head *h, struct http_slice v,
				   size_t at, int *minor)
{
	if (v.len == 8 && memcmp(v.ptr, "HTTP/1.1", 8) == 0)
		*minor = 1;
	else if (v.len == 8 && memcmp(v.ptr, "HTTP/1.0", 8) == 0)
		*minor = 0;
	else
		return fail(h, HTTP_BAD, "unsupported HTTP version", at);
	return HTTP_OK;
}

static void split_path(struct http_request *req, const char *p, size_t n)
{
	const char *q = memchr(p, '?', n);

	if (q) {
		req->path = slice(p, (size_t)(q - p));
		req->query = slice(q + 1, n - (size_t)(q - p) - 1);
		req->has_query = true;
	} else {
		req->path = slice(p, n);
	}
}

/* Visible ASCII; no fragment; no backslash (WHATWG parsers read it as
 * '/'); '%' only as a complete escape. */
static enum http_result check_target_chars(struct head *h,
					   struct http_slice t)
{
	size_t at = (size_t)(t.ptr - h->buf), i;

	for (i = 0; i < t.len; i++) {
		unsigned char c = (unsigned char)t.ptr[i];

		if (c <= 0x20 || c >= 0x7f)
			return fail(h, HTTP_BAD,
				    "invalid character in request target",
				    at + i);
		if (c == '#')
			return fail(h, HTTP_BAD, "fragment in request target",
				    at + i);
		if (c == '\\')
			return fail(h, HTTP_BAD, "backslash in request target",
				    at + i);
		if (c == '%' &&
		    (i + 2 >= t.len ||
		     util_hex_value((unsigned char)t.ptr[i + 1]) < 0 ||
		     util_hex_value((unsigned char)t.ptr[i + 2]) < 0))
			return fail(h, HTTP_BAD,
				    "bad percent-escape in request target",
				    at + i);
	}
	return HTTP_OK;
}

static enum http_result host_fail(struct head *h, const char *why,
				  enum hostname_error e, size_t at)
{
	h->detail = hostname_error_to_string(e);
	return fail(h, HTTP_BAD, why, at);
}

static enum http_result parse_target(struct head *h, struct http_request *req)
{
	struct http_slice t = req->target;
	size_t at = (size_t)(t.ptr - h->buf), i = 0, a;
	enum hostname_error e;
	enum http_result r;

	r = check_target_chars(h, t);
	if (r != HTTP_OK)
		return r;
	if (req->is_connect) {
		if (memchr(t.ptr, '/', t.len) || memchr(t.ptr, '?', t.len))
			return fail(h, HTTP_BAD,
				    "CONNECT needs an authority-form target",
				    at);
		if (memchr(t.ptr, '@', t.len))
			return fail(h, HTTP_BAD, "user-info in request target",
				    at);
		e = hostname_parse_authority(t.ptr, t.len, &req->host,
					     &req->port);
		if (e != HOSTNAME_OK)
			return host_fail(h, "bad CONNECT authority", e, at);
		req->form = HTTP_FORM_AUTHORITY;
		req->has_host = true;
		req->port_explicit = true;
		return HTTP_OK;
	}
	if (t.ptr[0] == '/') {
		req->form = HTTP_FORM_ORIGIN;
		split_path(req, t.ptr, t.len);
		return HTTP_OK;
	}
	if (t.len == 1 && t.ptr[0] == '*')
		return fail(h, HTTP_BAD, "asterisk-form not supported", at);
	/* scheme = ALPHA *( ALPHA / DIGIT / "+" / "-" / "." ) ":" "//" */
	while (i < t.len && (util_is_alpha((unsigned char)t.ptr[i]) ||
			     (i > 0 && (util_is_digit((unsigned char)t.ptr[i]) ||
					t.ptr[i] == '+' || t.ptr[i] == '-' ||
					t.ptr[i] == '.'))))
		i++;
	if (i == 0 || t.len - i < 3 || memcmp(t.ptr + i, "://", 3) != 0)
		return fail(h, HTTP_BAD,
			    "request target is neither origin- nor "
			    "absolute-form",
			    at);
	if (eq_ci(t.ptr, i, "https"))
		return fail(h, HTTP_BAD,
			    "https:// in absolute-form (use CONNECT)", at);
	if (!eq_ci(t.ptr, i, "http"))
		return fail(h, HTTP_BAD, "unsupported scheme in request target",
			    at);
	i += 3;
	a = i;
	while (i < t.len && t.ptr[i] != '/' && t.ptr[i] != '?')
		i++;
	if (memchr(t.ptr + a, '@', i - a))
		return fail(h, HTTP_BAD, "user-info in request target", at);
	e = parse_host_port(t.ptr + a, i - a, 80, &req->host, &req->port,
			    &req->port_explicit);
	if (e != HOSTNAME_OK)
		return host_fail(h, "bad host in request target", e, at + a);
	req->form = HTTP_FORM_ABSOLUTE;
	req->has_host = true;
	split_path(req, t.ptr + i, t.len - i);
	return HTTP_OK;
}

/* method SP request-target SP HTTP-version: exactly three parts. */
static enum http_result parse_request_line(struct head *h,
					   struct http_slice line,
					   struct http_request *req)
{
	const char *p = line.ptr, *end = p + line.len, *sp1, *sp2;
	enum http_result r;

	if (line.len == 0)
		return fail(h, HTTP_BAD, "empty line before request-line", 0);
	sp1 = memchr(p, ' ', line.len);
	if (!sp1)
		return fail(h, HTTP_BAD, "malformed request-line", 0);
	sp2 = memchr(sp1 + 1, ' ', (size_t)(end - sp1 - 1));
	if (sp1 == p || !sp2 || sp2 == sp1 + 1 ||
	    memchr(sp2 + 1, ' ', (size_t)(end - sp2 - 1)))
		return fail(h, HTTP_BAD, "malformed request-line", 0);
	req->method = slice(p, (size_t)(sp1 - p));
	req->target = slice(sp1 + 1, (size_t)(sp2 - sp1 - 1));
	if (!all_tchar(req->method.ptr, req->method.len))
		return fail(h, HTTP_BAD, "invalid method", 0);
	r = version_of(h, slice(sp2 + 1, (size_t)(end - sp2 - 1)),
		       (size_t)(sp2 + 1 - h->buf), &req->version_minor);
	if (r != HTTP_OK)
		return r;
	req->is_connect = req->method.len == 7 &&
			  memcmp(req->method.ptr, "CONNECT", 7) == 0;
	return parse_target(h, req);
}

/* Checks one request field with framing or routing meaning, in the order
 * received; everything that can be decided on this line is. */
static enum http_result request_field(struct head *h, struct http_request *req,
				      struct fields *f,
				      const struct http_header *hd)
{
	size_t at = (size_t)(hd->name.ptr - h->buf);
	const char *why;

	if (http_slice_eq_ci(hd->name, "host")) {
		struct host_target ht;
		enum hostname_error e;
		uint16_t port;
		bool explicit_port;

		if (f->host)
			return fail(h, HTTP_BAD, "duplicate Host", at);
		f->host = true;
		f->host_off = at;
		e = parse_host_port(hd->value.ptr, hd->value.len,
				    req->is_connect ? 443 :
				    req->form == HTTP_FORM_ABSOLUTE ? 80 : 443,
				    &ht, &port, &explicit_port);
		if (e != HOSTNAME_OK)
			return host_fail(h, "bad Host header", e, at);
		if (req->form == HTTP_FORM_ORIGIN) {
			req->host = ht;
			req->port = port;
			req->port_explicit = explicit_port;
			req->has_host = true;
		} else if (!same_target(&ht, port, &req->host, req->port)) {
			return fail(h, HTTP_BAD,
				    "Host differs from the request target", at);
		}
	} else if (http_slice_eq_ci(hd->name, "content-length")) {
		if (f->cl)
			return fail(h, HTTP_BAD, "duplicate Content-Length",
				    at);
		f->cl = true;
		why = parse_content_length(hd->value, &req->content_length);
		if (why)
			return fail(h, HTTP_BAD, why, at);
		if (f->te)
			return fail(h, HTTP_BAD,
				    "Content-Length with Transfer-Encoding",
				    at);
		if (req->is_connect && req->content_length != 0)
			return fail(h, HTTP_BAD, "body on CONNECT", at);
		req->body = HTTP_BODY_LENGTH;
	} else if (http_slice_eq_ci(hd->name, "transfer-encoding")) {
		if (f->te)
			return fail(h, HTTP_BAD, "duplicate Transfer-Encoding",
				    at);
		f->te = true;
		if (!http_slice_eq_ci(hd->value, "chunked"))
			return fail(h, HTTP_BAD,
				    "Transfer-Encoding other than chunked", at);
		if (f->cl)
			return fail(h, HTTP_BAD,
				    "Content-Length with Transfer-Encoding",
				    at);
		if (req->version_minor == 0)
			return fail(h, HTTP_BAD,
				    "Transfer-Encoding in HTTP/1.0", at);
		if (req->is_connect)
			return fail(h, HTTP_BAD, "body on CONNECT", at);
		req->body = HTTP_BODY_CHUNKED;
	} else if (http_slice_eq_ci(hd->name, "connection")) {
		why = check_connection(hd->value, &f->close);
		if (why)
			return fail(h, HTTP_BAD, why, at);
	}
	return HTTP_OK;
}

/* The header lines up to the empty line; @field is called on each. */
typedef enum http_result (*field_fn)(struct head *h, void *msg,
				     struct fields *f,
				     const struct http_header *hd);

static enum http_result parse_fields(struct head *h, struct http_headers *hs,
				     struct fields *f, field_fn field,
				     void *msg)
{
	h->block_start = h->pos;
	for (;;) {
		struct http_slice line;
		struct http_header hd;
		enum http_result r;

		r = next_line(h, false, &line);
		if (r != HTTP_OK)
			return r;
		if (line.len == 0)
			return HTTP_OK;
		if (hs->count == h->lim.max_headers)
			return fail(h, HTTP_TOO_LARGE, "too many header fields",
				    (size_t)(line.ptr - h->buf));
		r = parse_field(h, line, &hd);
		if (r != HTTP_OK)
			return r;
		r = field(h, msg, f, &hd);
		if (r != HTTP_OK)
			return r;
		hs->h[hs->count++] = hd;
	}
}

static enum http_result request_field_cb(struct head *h, void *msg,
					 struct fields *f,
					 const struct http_header *hd)
{
	return request_field(h, msg, f, hd);
}

static enum http_result finish(struct head *h, enum http_result r,
			       const char **error, const char **detail,
			       size_t *offset)
{
	if (r == HTTP_BAD || r == HTTP_TOO_LARGE) {
		ASSERT(h->error != NULL);
		*error = h->error;
		*detail = h->detail;
		*offset = h->error_offset;
	}
	return r;
}

static enum http_result request_head(struct head *h, struct http_request *req)
{
	struct fields f = { 0 };
	struct http_slice line;
	enum http_result r;

	r = next_line(h, true, &line);
	if (r != HTTP_OK)
		return r;
	r = parse_request_line(h, line, req);
	if (r != HTTP_OK)
		return r;
	r = parse_fields(h, &req->headers, &f, request_field_cb, req);
	if (r != HTTP_OK)
		return r;
	req->head_len = h->pos;
	/* CONNECT's authority is the whole target; its Host is optional. */
	if (!f.host && req->version_minor == 1 && !req->is_connect)
		return fail(h, HTTP_BAD, "missing Host", h->pos - 2);
	req->keep_alive = req->version_minor == 1 && !f.close;
	return HTTP_OK;
}

enum http_result http_parse_request(const char *buf, size_t len,
				    struct http_request *req,
				    const struct http_limits *lim)
{
	struct head h;

	memset(req, 0, sizeof(*req));
	head_init(&h, buf, len, lim);
	return finish(&h, request_head(&h, req), &req->error,
		      &req->error_detail, &req->error_offset);
}

/* ------------------------------------------------------------------ */
/* Responses                                                          */
/* ------------------------------------------------------------------ */

/* HTTP-version SP 3DIGIT [SP reason-phrase]. The SP before an empty
 * reason is optional: servers omit it, and it frames nothing. */
static enum http_result parse_status_line(struct head *h,
					  struct http_slice line,
					  struct http_response *resp)
{
	const unsigned char *p = (const unsigned char *)line.ptr;
	size_t i;
	enum http_result r;

	if (line.len == 0)
		return fail(h, HTTP_BAD, "empty line before status-line", 0);
	if (line.len < 8 || memcmp(p, "HTTP/", 5) != 0)
		return fail(h, HTTP_BAD, "malformed status-line", 0);
	r = version_of(h, slice(line.ptr, 8), 0, &resp->version_minor);
	if (r != HTTP_OK)
		return r;
	if (line.len < 12 || p[8] != ' ')
		return fail(h, HTTP_BAD, "malformed status-line", 0);
	if (!util_is_digit(p[9]) || !util_is_digit(p[10]) || !util_is_digit(p[11]) ||
	    (line.len > 12 && p[12] != ' '))
		return fail(h, HTTP_BAD, "invalid status code", 9);
	resp->status = (unsigned int)(p[9] - '0') * 100 +
		       (unsigned int)(p[10] - '0') * 10 +
		       (unsigned int)(p[11] - '0');
	if (resp->status < 100 || resp->status > 599)
		return fail(h, HTTP_BAD, "status code out of range", 9);
	for (i = 13; i < line.len; i++) {
		if (!is_field_vchar(p[i]) && !is_ows(p[i]))
			return fail(h, HTTP_BAD,
				    "control character in reason-phrase", i);
	}
	if (line.len > 13)
		resp->reason_phrase = slice(line.ptr + 13, line.len - 13);
	return HTTP_OK;
}

static enum http_result response_field(struct head *h,
				       struct http_response *resp,
				       struct fields *f,
				       const struct http_header *hd)
{
	size_t at = (size_t)(hd->name.ptr - h->buf);
	const char *why;

	if (http_slice_eq_ci(hd->name, "content-length")) {
		if (f->cl)
			return fail(h, HTTP_BAD, "duplicate Content-Length",
				    at);
		f->cl = true;
		why = parse_content_length(hd->value, &resp->content_length);
		if (why)
			return fail(h, HTTP_BAD, why, at);
		if (f->te)
			return fail(h, HTTP_BAD,
				    "Content-Length with Transfer-Encoding",
				    at);
	} else if (http_slice_eq_ci(hd->name, "transfer-encoding")) {
		if (f->te)
			return fail(h, HTTP_BAD, "duplicate Transfer-Encoding",
				    at);
		f->te = true;
		why = check_response_te(hd->value);
		if (why)
			return fail(h, HTTP_BAD, why, at);
		if (f->cl)
			return fail(h, HTTP_BAD,
				    "Content-Length with Transfer-Encoding",
				    at);
		if (resp->version_minor == 0)
			return fail(h, HTTP_BAD,
				    "Transfer-Encoding in HTTP/1.0", at);
	} else if (http_slice_eq_ci(hd->name, "connection")) {
		why = check_connection(hd->value, &f->close);
		if (why)
			return fail(h, HTTP_BAD, why, at);
	}
	return HTTP_OK;
}

static enum http_result response_field_cb(struct head *h, void *msg,
					  struct fields *f,
					  const struct http_header *hd)
{
	return response_field(h, msg, f, hd);
}

static enum http_result response_head(struct head *h,
				      struct http_response *resp, bool to_head)
{
	struct fields f = { 0 };
	struct http_slice line;
	enum http_result r;
	unsigned int s;

	r = next_line(h, true, &line);
	if (r != HTTP_OK)
		return r;
	r = parse_status_line(h, line, resp);
	if (r != HTTP_OK)
		return r;
	r = parse_fields(h, &resp->headers, &f, response_field_cb, resp);
	if (r != HTTP_OK)
		return r;
	resp->head_len = h->pos;
	s = resp->status;
	if (to_head || s < 200 || s == 204 || s == 304)
		resp->body = HTTP_BODY_NONE;
	else if (f.te)
		resp->body = HTTP_BODY_CHUNKED;
	else if (f.cl)
		resp->body = HTTP_BODY_LENGTH;
	else
		resp->body = HTTP_BODY_UNTIL_CLOSE;
	if (resp->body != HTTP_BODY_LENGTH)
		resp->content_length = 0;
	resp->keep_alive = resp->version_minor == 1 && !f.close &&
			   resp->body != HTTP_BODY_UNTIL_CLOSE;
	return HTTP_OK;
}

enum http_result http_parse_response(const char *buf, size_t len,
				     struct http_response *resp,
				     const struct http_limits *lim,
				     bool to_head)
{
	struct head h;

	memset(resp, 0, sizeof(*resp));
	head_init(&h, buf, len, lim);
	return finish(&h, response_head(&h, resp, to_head), &resp->error,
		      &resp->error_detail, &resp->error_offset);
}

/* ------------------------------------------------------------------ */
/* Header helpers                                                     */
/* ------------------------------------------------------------------ */

int http_header_find(const struct http_headers *hs, const char *name,
		     size_t from)
{
	size_t i;

	for (i = from; i < hs->count && i < HTTP_MAX_HEADERS; i++) {
		if (http_slice_eq_ci(hs->h[i].name, name))
			return (int)i;
	}
	return -1;
}

bool http_is_hop_by_hop(const struct http_headers *hs, struct http_slice name)
{
	static const char *const fixed[] = {
		"connection",        "keep-alive", "proxy-connection",
		"proxy-authorization", "proxy-authenticate", "te",
		"trailer",           "transfer-encoding", "upgrade",
	};
	size_t i;
	int k;

	for (i = 0; i < ARRAY_SIZE(fixed); i++) {
		if (http_slice_eq_ci(name, fixed[i]))
			return true;
	}
	if (!hs || name.len == 0)
		return false;
	for (k = http_header_find(hs, "connection", 0); k >= 0;
	     k = http_header_find(hs, "connection", (size_t)k + 1)) {
		struct list_iter it;
		struct http_slice e;

		list_init(&it, hs->h[k].value);
		while (list_next(&it, &e)) {
			if (e.len == name.len &&
			    eq_ci_n(e.ptr, name.ptr, e.len))
				return true;
		}
	}
	return false;
}

/* ------------------------------------------------------------------ */
/* Chunked bodies (RFC 9112 §7.1)                                     */
/* ------------------------------------------------------------------ */

enum chunk_state {
	CH_SIZE_START = 0,  /* first hex digit of chunk-size */
	CH_SIZE,            /* more hex digits, ';' or CR */
	CH_EXT_NAME_START,  /* after ';' */
	CH_EXT_NAME,
	CH_EXT_VAL_START,   /* after '=' */
	CH_EXT_TOKEN,
	CH_EXT_QUOTED,
	CH_EXT_QPAIR,       /* after '\\' inside quotes */
	CH_EXT_AFTER_QUOTE,
	CH_SIZE_LF,         /* CR seen, LF due */
	CH_DATA,
	CH_DATA_CR,
	CH_DATA_LF,
	CH_TR_START,        /* start of a trailer line or the final CRLF */
	CH_TR_NAME,
	CH_TR_VALUE,
	CH_TR_LF,
	CH_FINAL_LF,
	CH_DONE,
	CH_BAD,
};

void http_chunked_init(struct http_chunked *st, const struct http_limits *lim)
{
	memset(st, 0, sizeof(*st));
	st->state = CH_SIZE_START;
	st->lim = lim ? *lim : http_limits_default;
	if (st->lim.max_headers > HTTP_MAX_HEADERS)
		st->lim.max_headers = HTTP_MAX_HEADERS;
}

static bool in_chunk_line(int s)
{
	return s >= CH_SIZE_START && s <= CH_EXT_AFTER_QUOTE;
}

static bool in_trailers(int s)
{
	return s >= CH_TR_START && s <= CH_FINAL_LF;
}

/* Trailers are merged into nothing, but a recipient that did merge one of
 * these would reframe or reroute the message after the fact. */
static bool forbidden_trailer(const struct http_chunked *st)
{
	static const char *const names[] = {
		"content-length", "transfer-encoding", "host",
	};
	size_t i;

	for (i = 0; i < ARRAY_SIZE(names); i++) {
		if (st->name_len == strlen(names[i]) &&
		    memcmp(st->name, names[i], st->name_len) == 0)
			return true;
	}
	return false;
}

/* Keeps the first bytes of a trailer name, lowercased, for
 * forbidden_trailer(); longer names cannot be forbidden ones. */
static void name_byte(struct http_chunked *st, unsigned char c)
{
	if (st->name_len < sizeof(st->name))
		st->name[st->name_len] = util_ascii_lower((char)c);
	st->name_len++;
}

/* Consumes one framing byte (any state but CH_DATA, CH_DONE, CH_BAD).
 * Returns NULL or the reason the byte is refused. */
static const char *chunk_step(struct http_chunked *st, unsigned char c)
{
	int v;

	if (in_chunk_line(st->state) && c != '\r' &&
	    ++st->line_len > st->lim.max_chunk_line)
		return "chunk line too long";
	if (in_trailers(st->state) &&
	    ++st->trailer_bytes > st->lim.max_trailer_block)
		return "trailer section too large";
	if (c == '\n' && (in_chunk_line(st->state) ||
			  (in_trailers(st->state) && st->state != CH_TR_LF &&
			   st->state != CH_FINAL_LF)))
		return "bare LF in chunked body";

	switch (st->state) {
	case CH_SIZE_START:
	case CH_SIZE:
		v = util_hex_value(c);
		if (v >= 0) {
			if (++st->digits > 16)
				return "chunk size too long";
			st->remaining = st->remaining * 16 + (uint64_t)v;
			st->state = CH_SIZE;
			return NULL;
		}
		if (st->state == CH_SIZE_START)
			return "invalid chunk size";
		if (c == ';')
			st->state = CH_EXT_NAME_START;
		else if (c == '\r')
			st->state = CH_SIZE_LF;
		else if (is_ows(c))
			return "whitespace in chunk line";
		else
			return "invalid chunk size";
		return NULL;
	case CH_EXT_NAME_START:
		if (!is_tchar(c))
			return "invalid chunk extension";
		st->state = CH_EXT_NAME;
		return NULL;
	case CH_EXT_NAME:
		if (is_tchar(c))
			return NULL;
		if (c == '=')
			st->state = CH_EXT_VAL_START;
		else if (c == ';')
			st->state = CH_EXT_NAME_START;
		else if (c == '\r')
			st->state = CH_SIZE_LF;
		else
			return "invalid chunk extension";
		return NULL;
	case CH_EXT_VAL_START:
		if (is_tchar(c))
			st->state = CH_EXT_TOKEN;
		else if (c == '"')
			st->state = CH_EXT_QUOTED;
		else
			return "invalid chunk extension";
		return NULL;
	case CH_EXT_TOKEN:
		if (is_tchar(c))
			return NULL;
		if (c == ';')
			st->state = CH_EXT_NAME_START;
		else if (c == '\r')
			st->state = CH_SIZE_LF;
		else
			return "invalid chunk extension";
		return NULL;
	case CH_EXT_QUOTED:
		/* qdtext = HTAB / SP / %x21 / %x23-5B / %x5D-7E / obs-text */
		if (c == '"')
			st->state = CH_EXT_AFTER_QUOTE;
		else if (c == '\\')
			st->state = CH_EXT_QPAIR;
		else if (!is_field_vchar(c) && !is_ows(c))
			return "invalid chunk extension";
		return NULL;
	case CH_EXT_QPAIR:
		if (!is_field_vchar(c) && !is_ows(c))
			return "invalid chunk extension";
		st->state = CH_EXT_QUOTED;
		return NULL;
	case CH_EXT_AFTER_QUOTE:
		if (c == ';')
			st->state = CH_EXT_NAME_START;
		else if (c == '\r')
			st->state = CH_SIZE_LF;
		else
			return "invalid chunk extension";
		return NULL;
	case CH_SIZE_LF:
		if (c != '\n')
			return "bare CR in chunked body";
		st->line_len = 0;
		st->digits = 0;
		st->state = st->remaining ? CH_DATA : CH_TR_START;
		return NULL;
	case CH_DATA_CR:
		if (c != '\r')
			return "chunk data not followed by CRLF";
		st->state = CH_DATA_LF;
		return NULL;
	case CH_DATA_LF:
		if (c != '\n')
			return "chunk data not followed by CRLF";
		st->state = CH_SIZE_START;
		return NULL;
	case CH_TR_START:
		if (c == '\r') {
			st->state = CH_FINAL_LF;
			return NULL;
		}
		if (is_ows(c))
			return "obs-fold in trailer section";
		if (c == ':')
			return "empty field name";
		if (!is_tchar(c))
			return "invalid character in field name";
		if (++st->trailers > st->lim.max_headers)
			return "too many trailer fields";
		st->name_len = 0;
		st->state = CH_TR_NAME;
		name_byte(st, c);
		return NULL;
	case CH_TR_NAME:
		if (is_tchar(c)) {
			name_byte(st, c);
			return NULL;
		}
		if (c == ':') {
			if (forbidden_trailer(st))
				return "framing field in trailer section";
			st->state = CH_TR_VALUE;
			return NULL;
		}
		if (is_ows(c))
			return "whitespace between field name and colon";
		if (c == '\r')
			return "header line without colon";
		return "invalid character in field name";
	case CH_TR_VALUE:
		if (c == '\r')
			st->state = CH_TR_LF;
		else if (!is_field_vchar(c) && !is_ows(c))
			return "control character in field value";
		return NULL;
	case CH_TR_LF:
		if (c != '\n')
			return "bare CR in chunked body";
		st->state = CH_TR_START;
		return NULL;
	case CH_FINAL_LF:
		if (c != '\n')
			return "bare CR in chunked body";
		st->state = CH_DONE;
		return NULL;
	default:
		ASSERT(!"chunk_step in a state without framing bytes");
		return "internal error";
	}
}

enum http_chunked_result http_chunked_feed(struct http_chunked *st,
					   const char *buf, size_t len,
					   size_t *consumed,
					   struct http_slice *data)
{
	size_t i = 0;

	*consumed = 0;
	*data = slice(NULL, 0);
	if (st->state == CH_DONE)
		return HTTP_CHUNKED_DONE;
	if (st->state == CH_BAD)
		return HTTP_CHUNKED_BAD;
	if (!buf)
		len = 0;
	while (i < len) {
		const char *why;

		if (st->state == CH_DATA) {
			size_t n = len - i;

			if ((uint64_t)n > st->remaining)
				n = (size_t)st->remaining;
			*data = slice(buf + i, n);
			st->remaining -= n;
			st->offset += n;
			if (st->remaining == 0)
				st->state = CH_DATA_CR;
			*consumed = i + n;
			return HTTP_CHUNKED_DATA;
		}
		why = chunk_step(st, (unsigned char)buf[i]);
		if (why) {
			st->state = CH_BAD;
			st->error = why;
			st->error_offset = st->offset;
			*consumed = i;
			return HTTP_CHUNKED_BAD;
		}
		i++;
		st->offset++;
		if (st->state == CH_DONE) {
			*consumed = i;
			return HTTP_CHUNKED_DONE;
		}
	}
	*consumed = i;
	return HTTP_CHUNKED_MORE;
}

enum http_result http_sniff_request(const char *buf, size_t len)
{
	bool full = len >= HTTP_SNIFF_MAX;
	size_t i, n;

	if (len == 0)
		return HTTP_INCOMPLETE;
	n = full ? HTTP_SNIFF_MAX : len;
	for (i = 0; i < n && is_tchar((unsigned char)buf[i]); i++)
		;
	if (i == n) /* a token so far */
		return full ? HTTP_BAD : HTTP_INCOMPLETE;
	if (i == 0 || buf[i] != ' ')
		return HTTP_BAD;
	for (; i < n; i++) {
		if (buf[i] == '\n')
			return HTTP_BAD;
		if (i + 5 <= n && eq_ci_n(buf + i, "HTTP/", 5))
			return HTTP_OK;
	}
	/* "HTTP/" may straddle the end; once n bytes are there it cannot */
	return full ? HTTP_OK : HTTP_INCOMPLETE;
}
