/* SPDX-License-Identifier: Apache-2.0
 * test_http.c - table tests of http.c: every strictness rule of docs/PROXY.md
 * with a valid and an invalid form, the request-smuggling classics (CL.TE,
 * TE.CL, TE.TE obfuscations), Host/target agreement, response framing,
 * the chunked decoder, and prefix consistency at every split position.
 *
 * Every parse runs on an exact-size heap copy of its input, so that under
 * `make SAN=1` a read past len is an ASan error, not a silent pass.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http.h"
#include "tap.h"
#include "util.h"

/* ------------------------------------------------------------------ */
/* Helpers                                                            */
/* ------------------------------------------------------------------ */

static char *copy_exact(const char *s, size_t len)
{
	char *p = util_xmalloc(len ? len : 1);

	memcpy(p, s, len);
	return p;
}

static bool slice_is(struct http_slice s, const char *want)
{
	return s.len == strlen(want) && (s.len == 0 || memcmp(s.ptr, want,
							      s.len) == 0);
}

static enum http_target_form form_of(char c)
{
	return c == 'o' ? HTTP_FORM_ORIGIN :
	       c == 'a' ? HTTP_FORM_ABSOLUTE : HTTP_FORM_AUTHORITY;
}

static enum http_body body_of(char c)
{
	return c == 'n' ? HTTP_BODY_NONE :
	       c == 'l' ? HTTP_BODY_LENGTH :
	       c == 'c' ? HTTP_BODY_CHUNKED : HTTP_BODY_UNTIL_CLOSE;
}

static const char *result_name(enum http_result r)
{
	return http_result_to_string(r);
}

/* Offsets of a slice relative to its buffer, for comparing two parses of
 * different copies of the same bytes. */
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

static bool same_error(const char *a, const char *b)
{
	return (a && b) ? strcmp(a, b) == 0 : a == b;
}

/* Every proper prefix of @raw gives INCOMPLETE or exactly the result of
 * the whole (same error and offset; same fields when OK). */
static bool request_prefixes_consistent(const char *raw, size_t len,
					const struct http_limits *lim,
					size_t *bad_k)
{
	struct http_request full, part;
	char *fb = copy_exact(raw, len);
	enum http_result rf;
	bool ok = true;
	size_t k;

	rf = http_parse_request(fb, len, &full, lim);
	for (k = 0; k < len && ok; k++) {
		char *pb = copy_exact(raw, k);
		enum http_result rp = http_parse_request(pb, k, &part, lim);

		if (rp == HTTP_INCOMPLETE) {
			ok = rf != HTTP_OK || k < full.head_len;
		} else if (rp != rf) {
			ok = false;
		} else if (rp == HTTP_OK) {
			ok = requests_same(&full, fb, &part, pb);
		} else {
			ok = same_error(full.error, part.error) &&
			     full.error_offset == part.error_offset;
		}
		if (!ok)
			*bad_k = k;
		free(pb);
	}
	free(fb);
	return ok;
}

static bool response_prefixes_consistent(const char *raw, size_t len,
					 bool to_head, size_t *bad_k)
{
	struct http_response full, part;
	char *fb = copy_exact(raw, len);
	enum http_result rf;
	bool ok = true;
	size_t k;

	rf = http_parse_response(fb, len, &full, NULL, to_head);
	for (k = 0; k < len && ok; k++) {
		char *pb = copy_exact(raw, k);
		enum http_result rp =
			http_parse_response(pb, k, &part, NULL, to_head);

		if (rp == HTTP_INCOMPLETE)
			ok = rf != HTTP_OK || k < full.head_len;
		else if (rp != rf)
			ok = false;
		else if (rp == HTTP_OK)
			ok = responses_same(&full, fb, &part, pb);
		else
			ok = same_error(full.error, part.error) &&
			     full.error_offset == part.error_offset;
		if (!ok)
			*bad_k = k;
		free(pb);
	}
	free(fb);
	return ok;
}

/* ------------------------------------------------------------------ */
/* Request table                                                      */
/* ------------------------------------------------------------------ */

#define H11 " HTTP/1.1\r\n"
#define GET "GET http://x.com/" H11
#define HX "Host: x.com\r\n"
#define END "\r\n"

struct rq_case {
	const char *desc;
	const char *raw;
	size_t len;                /* 0: strlen(raw) */
	enum http_result want;
	const char *error;         /* checked when not NULL */
	const char *detail;        /* checked when not NULL */
	/* checked on HTTP_OK when set: */
	const char *host;
	int port;
	char form;                 /* 'o', 'a', 'c' */
	char body;                 /* 'n', 'l', 'c' */
	long long cl;              /* with body 'l' */
	char ka;                   /* 'y', 'n' */
	const char *path;
	const char *query;         /* "-" = no '?' */
};

#define OK(d, r, ...) { .desc = d, .raw = r, .want = HTTP_OK, __VA_ARGS__ }
#define BAD(d, r, why) { .desc = d, .raw = r, .want = HTTP_BAD, .error = why }
#define BADD(d, r, why, det)                                               \
	{ .desc = d, .raw = r, .want = HTTP_BAD, .error = why, .detail = det }
#define BADN(d, r, n, why)                                                 \
	{ .desc = d, .raw = r, .len = n, .want = HTTP_BAD, .error = why }

static const struct rq_case rq_cases[] = {
	/* Request-line and forms */
	OK("absolute-form GET", GET HX END, .host = "x.com", .port = 80,
	   .form = 'a', .body = 'n', .ka = 'y', .path = "/", .query = "-"),
	OK("CONNECT with matching Host",
	   "CONNECT x.com:443" H11 "Host: x.com:443\r\n" END, .host = "x.com",
	   .port = 443, .form = 'c', .body = 'n'),
	OK("CONNECT without Host", "CONNECT x.com:443" H11 END,
	   .host = "x.com", .port = 443, .form = 'c'),
	OK("CONNECT, Host without port means 443",
	   "CONNECT x.com:443" H11 HX END, .port = 443),
	BAD("CONNECT :8443, Host without port (443)",
	    "CONNECT x.com:8443" H11 HX END,
	    "Host differs from the request target"),
	BAD("CONNECT, Host names another host",
	    "CONNECT x.com:443" H11 "Host: y.com:443\r\n" END,
	    "Host differs from the request target"),
	OK("origin-form takes the target from Host", "GET /a?b" H11 HX END,
	   .host = "x.com", .port = 443, .form = 'o', .path = "/a",
	   .query = "b"),
	OK("origin-form with Host port", "GET /" H11 "Host: x.com:8443\r\n" END,
	   .host = "x.com", .port = 8443, .form = 'o'),
	BAD("origin-form HTTP/1.1 without Host", "GET /" H11 END,
	    "missing Host"),
	OK("origin-form HTTP/1.0 without Host", "GET / HTTP/1.0\r\n" END,
	   .form = 'o', .ka = 'n'),
	OK("HTTP/1.0 absolute-form without Host",
	   "GET http://x.com/ HTTP/1.0\r\n" END, .host = "x.com", .ka = 'n'),
	BAD("HTTP/1.1 absolute-form without Host", GET END, "missing Host"),
	OK("any token method", "M-SEARCH http://x.com/" H11 HX END,
	   .form = 'a'),
	OK("POST with a body length",
	   "POST http://x.com/up" H11 HX "Content-Length: 3\r\n" END "abc",
	   .body = 'l', .cl = 3, .path = "/up"),
	BAD("two spaces after method", "GET  http://x.com/" H11 HX END,
	    "malformed request-line"),
	BAD("two spaces before version", "GET http://x.com/  HTTP/1.1\r\n" HX
	    END, "malformed request-line"),
	BAD("trailing space after version", "GET http://x.com/ HTTP/1.1 \r\n"
	    HX END, "malformed request-line"),
	BAD("leading space", " GET http://x.com/" H11 HX END,
	    "malformed request-line"),
	BAD("HTAB as separator", "GET\thttp://x.com/" H11 HX END,
	    "malformed request-line"),
	BAD("HTTP/0.9 request-line", "GET http://x.com/\r\n" HX END,
	    "malformed request-line"),
	BAD("method not a token", "G@T http://x.com/" H11 HX END,
	    "invalid method"),
	BAD("HTTP/1.2", "GET http://x.com/ HTTP/1.2\r\n" HX END,
	    "unsupported HTTP version"),
	BAD("HTTP/2.0", "GET http://x.com/ HTTP/2.0\r\n" HX END,
	    "unsupported HTTP version"),
	BAD("lowercase version", "GET http://x.com/ http/1.1\r\n" HX END,
	    "unsupported HTTP version"),
	BAD("leading empty line", "\r\n" GET HX END,
	    "empty line before request-line"),
	BAD("asterisk-form", "OPTIONS *" H11 HX END,
	    "asterisk-form not supported"),
	BAD("authority-form for GET", "GET x.com:80" H11 HX END,
	    "request target is neither origin- nor absolute-form"),
	BAD("lowercase connect is not CONNECT", "connect x.com:443" H11 END,
	    "request target is neither origin- nor absolute-form"),
	BAD("CONNECT with absolute-form", "CONNECT http://x.com/" H11 END,
	    "CONNECT needs an authority-form target"),
	BAD("CONNECT with origin-form", "CONNECT /x" H11 END,
	    "CONNECT needs an authority-form target"),
	BADD("CONNECT without port", "CONNECT x.com" H11 END,
	     "bad CONNECT authority",
	     "character outside a-z 0-9 - _ in host name"),
	BAD("CONNECT port 0", "CONNECT x.com:0" H11 END,
	    "bad CONNECT authority"),
	BAD("CONNECT with user-info", "CONNECT u@x.com:443" H11 END,
	    "user-info in request target"),

	/* Line endings and bytes */
	BAD("bare LF after request-line", "GET http://x.com/ HTTP/1.1\n" HX END,
	    "bare LF line ending"),
	BAD("bare LF after a field", GET "Host: x.com\n" END,
	    "bare LF line ending"),
	BAD("bare LF as the final line", GET HX "\n", "bare LF line ending"),
	BAD("bare CR inside the head", GET "Host: x.com\rX: y\r\n" END,
	    "bare CR in head"),
	BAD("bare CR in request-line", "GET http://x.com/\r HTTP/1.1\r\n" HX
	    END, "bare CR in head"),
	BADN("NUL in a field value", GET "X: a\0b\r\n" HX END,
	     sizeof(GET "X: a\0b\r\n" HX END) - 1, "NUL in head"),
	BADN("NUL in the target", "GET http://x.com/\0" H11 HX END,
	     sizeof("GET http://x.com/\0" H11 HX END) - 1, "NUL in head"),

	/* Field lines */
	OK("OWS around a value is trimmed", GET HX "X-A:\t v \t\r\n" END,
	   .ka = 'y'),
	OK("empty value", GET HX "X-Empty:\r\n" END, .ka = 'y'),
	BAD("obs-fold with SP", GET HX "X: a\r\n b\r\n" END,
	    "obs-fold in header block"),
	BAD("obs-fold with HTAB", GET HX "X: a\r\n\tb\r\n" END,
	    "obs-fold in header block"),
	BAD("obs-fold right after the request-line", GET " Host: x.com\r\n" END,
	    "obs-fold in header block"),
	BAD("space before colon", GET "Host : x.com\r\n" END,
	    "whitespace between field name and colon"),
	BAD("HTAB before colon", GET "Host\t: x.com\r\n" END,
	    "whitespace between field name and colon"),
	BAD("separator in field name", GET HX "X(y): z\r\n" END,
	    "invalid character in field name"),
	BAD("non-ASCII in field name", GET HX "X\xc3\xa9: z\r\n" END,
	    "invalid character in field name"),
	BAD("empty field name", GET HX ": z\r\n" END, "empty field name"),
	BAD("field line without colon", GET HX "NoColon\r\n" END,
	    "header line without colon"),
	BAD("control byte in value", GET HX "X: a\x01" "b\r\n" END,
	    "control character in field value"),
	BAD("ESC in value", GET HX "X: \x1b[31m\r\n" END,
	    "control character in field value"),
	BAD("DEL in value", GET HX "X: a\x7f" "b\r\n" END,
	    "control character in field value"),
	OK("obs-text in value", GET HX "X: caf\xc3\xa9\r\n" END, .ka = 'y'),

	/* Framing: Content-Length */
	OK("Content-Length 0", "POST http://x.com/" H11 HX
	   "Content-Length: 0\r\n" END, .body = 'l', .cl = 0),
	OK("Content-Length with OWS", "POST http://x.com/" H11 HX
	   "Content-Length:  42 \r\n" END, .body = 'l', .cl = 42),
	OK("Content-Length with leading zeros", "POST http://x.com/" H11 HX
	   "Content-Length: 007\r\n" END, .body = 'l', .cl = 7),
	OK("Content-Length 2^63-1", "POST http://x.com/" H11 HX
	   "Content-Length: 9223372036854775807\r\n" END, .body = 'l',
	   .cl = 9223372036854775807LL),
	BAD("Content-Length 2^63", GET HX
	    "Content-Length: 9223372036854775808\r\n" END,
	    "Content-Length too large"),
	BAD("Content-Length 20 digits", GET HX
	    "Content-Length: 99999999999999999999\r\n" END,
	    "Content-Length too large"),
	BAD("Content-Length list 4, 4", GET HX "Content-Length: 4, 4\r\n" END,
	    "invalid Content-Length"),
	BAD("Content-Length +4", GET HX "Content-Length: +4\r\n" END,
	    "invalid Content-Length"),
	BAD("Content-Length -1", GET HX "Content-Length: -1\r\n" END,
	    "invalid Content-Length"),
	BAD("Content-Length 0x10", GET HX "Content-Length: 0x10\r\n" END,
	    "invalid Content-Length"),
	BAD("Content-Length 1 2", GET HX "Content-Length: 1 2\r\n" END,
	    "invalid Content-Length"),
	BAD("Content-Length empty", GET HX "Content-Length:\r\n" END,
	    "invalid Content-Length"),
	BAD("Content-Length 4.0", GET HX "Content-Length: 4.0\r\n" END,
	    "invalid Content-Length"),
	BAD("duplicate equal Content-Length", GET HX
	    "Content-Length: 4\r\nContent-Length: 4\r\n" END,
	    "duplicate Content-Length"),
	BAD("duplicate differing Content-Length", GET HX
	    "Content-Length: 4\r\ncontent-length: 5\r\n" END,
	    "duplicate Content-Length"),

	/* Framing: Transfer-Encoding and the smuggling classics */
	OK("chunked request", "POST http://x.com/" H11 HX
	   "Transfer-Encoding: chunked\r\n" END, .body = 'c', .ka = 'y'),
	OK("TE value with HTAB OWS", "POST http://x.com/" H11 HX
	   "Transfer-Encoding:\tchunked\r\n" END, .body = 'c'),
	OK("TE coding name is case-insensitive", "POST http://x.com/" H11 HX
	   "Transfer-Encoding: Chunked\r\n" END, .body = 'c'),
	BAD("CL.TE", "POST http://x.com/" H11 HX
	    "Content-Length: 6\r\nTransfer-Encoding: chunked\r\n" END
	    "0\r\n\r\nG",
	    "Content-Length with Transfer-Encoding"),
	BAD("TE.CL", "POST http://x.com/" H11 HX
	    "Transfer-Encoding: chunked\r\nContent-Length: 3\r\n" END
	    "8\r\nSMUGGLED\r\n0\r\n\r\n",
	    "Content-Length with Transfer-Encoding"),
	BAD("TE.TE: space before colon", "POST http://x.com/" H11 HX
	    "Transfer-Encoding : chunked\r\n" END,
	    "whitespace between field name and colon"),
	BAD("TE.TE: second TE with other value", "POST http://x.com/" H11 HX
	    "Transfer-Encoding: chunked\r\nTransfer-encoding: x\r\n" END,
	    "duplicate Transfer-Encoding"),
	BAD("TE.TE: duplicate chunked", "POST http://x.com/" H11 HX
	    "Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n"
	    END, "duplicate Transfer-Encoding"),
	BAD("TE.TE: chunked, chunked", "POST http://x.com/" H11 HX
	    "Transfer-Encoding: chunked, chunked\r\n" END,
	    "Transfer-Encoding other than chunked"),
	BAD("TE.TE: xchunked", "POST http://x.com/" H11 HX
	    "Transfer-Encoding: xchunked\r\n" END,
	    "Transfer-Encoding other than chunked"),
	BAD("TE.TE: chunked;x", "POST http://x.com/" H11 HX
	    "Transfer-Encoding: chunked;x\r\n" END,
	    "Transfer-Encoding other than chunked"),
	BAD("TE.TE: gzip, chunked in a request", "POST http://x.com/" H11 HX
	    "Transfer-Encoding: gzip, chunked\r\n" END,
	    "Transfer-Encoding other than chunked"),
	BAD("TE.TE: identity", "POST http://x.com/" H11 HX
	    "Transfer-Encoding: identity\r\n" END,
	    "Transfer-Encoding other than chunked"),
	BAD("TE.TE: empty", "POST http://x.com/" H11 HX
	    "Transfer-Encoding:\r\n" END,
	    "Transfer-Encoding other than chunked"),
	BAD("TE.TE: quoted", "POST http://x.com/" H11 HX
	    "Transfer-Encoding: \"chunked\"\r\n" END,
	    "Transfer-Encoding other than chunked"),
	BAD("TE.TE: obs-fold (empty first line)", "POST http://x.com/" H11 HX
	    "Transfer-Encoding:\r\n chunked\r\n" END,
	    "Transfer-Encoding other than chunked"),
	BAD("TE.TE: obs-fold adding a coding", "POST http://x.com/" H11 HX
	    "Transfer-Encoding: chunked\r\n , identity\r\n" END,
	    "obs-fold in header block"),
	BAD("TE.TE: vertical tab", "POST http://x.com/" H11 HX
	    "Transfer-Encoding: \x0b" "chunked\r\n" END,
	    "control character in field value"),
	BAD("TE.TE: bare LF before TE", "POST http://x.com/" H11 HX
	    "X: y\nTransfer-Encoding: chunked\r\n" END,
	    "bare LF line ending"),
	BAD("TE.TE: name with trailing junk", "POST http://x.com/" H11 HX
	    "Transfer-Encoding\x0b: chunked\r\n" END,
	    "invalid character in field name"),
	BAD("TE in HTTP/1.0", "POST http://x.com/ HTTP/1.0\r\n"
	    "Transfer-Encoding: chunked\r\n" END,
	    "Transfer-Encoding in HTTP/1.0"),
	BAD("CONNECT with a body length", "CONNECT x.com:443" H11
	    "Content-Length: 5\r\n" END, "body on CONNECT"),
	OK("CONNECT with Content-Length 0", "CONNECT x.com:443" H11
	   "Content-Length: 0\r\n" END, .form = 'c', .body = 'l', .cl = 0),
	BAD("CONNECT chunked", "CONNECT x.com:443" H11
	    "Transfer-Encoding: chunked\r\n" END, "body on CONNECT"),

	/* Host and target agreement */
	BAD("duplicate Host", GET HX HX END, "duplicate Host"),
	BAD("duplicate Host, other case", GET HX "host: x.com\r\n" END,
	    "duplicate Host"),
	BAD("Host names another host", GET "Host: y.com\r\n" END,
	    "Host differs from the request target"),
	BAD("Host without target port 8080", "GET http://x.com:8080/" H11 HX
	    END, "Host differs from the request target"),
	BAD("Host port 8080, target default", GET "Host: x.com:8080\r\n" END,
	    "Host differs from the request target"),
	OK("same non-default port on both", "GET http://x.com:8080/" H11
	   "Host: x.com:8080\r\n" END, .port = 8080),
	BADD("IPv6 zone id in target", "GET http://[fe80::1%25eth0]/" H11 HX
	     END, "bad host in request target", "IPv6 zone id in host"),
	OK("explicit :80 in target", "GET http://x.com:80/" H11 HX END,
	   .host = "x.com", .port = 80),
	OK("explicit :80 in Host", GET "Host: x.com:80\r\n" END, .port = 80),
	OK("X.COM. vs x.com", "GET http://X.COM./" H11 HX END,
	   .host = "x.com", .port = 80),
	OK("x.com vs Host X.Com.", GET "Host: X.Com.\r\n" END, .host = "x.com"),
	OK("Host with trailing OWS", GET "Host: x.com \r\n" END,
	   .host = "x.com"),
	OK("IPv6 literal with port", "GET http://[::1]:8080/" H11
	   "Host: [::1]:8080\r\n" END, .host = "::1", .port = 8080),
	BAD("IPv6 literal, Host without port", "GET http://[::1]:8080/" H11
	    "Host: [::1]\r\n" END, "Host differs from the request target"),
	OK("IPv6 spellings normalise equal", "GET http://[::1]/" H11
	   "Host: [0:0::1]\r\n" END, .host = "::1", .port = 80),
	BAD("unbracketed IPv6 target", "GET http://::1/" H11 HX END,
	    "bad host in request target"),
	BAD("unbracketed IPv6 Host", "CONNECT [::1]:443" H11 "Host: ::1\r\n"
	    END, "bad Host header"),
	OK("CONNECT IPv6", "CONNECT [2001:db8::1]:443" H11 END,
	   .host = "2001:db8::1", .port = 443),
	OK("IPv4 short notation is the address", "GET http://127.1/" H11
	   "Host: 127.0.0.1\r\n" END, .host = "127.0.0.1"),
	OK("hex IPv4 and dotted Host agree", "GET http://0x7f.1/" H11
	   "Host: 127.0.0.1\r\n" END, .host = "127.0.0.1"),
	BAD("IPv4 vs name", "GET http://127.0.0.1/" H11 "Host: localhost\r\n"
	    END, "Host differs from the request target"),
	BADD("bracketed name in target", "GET http://[x.com]/" H11 HX END,
	     "bad host in request target",
	     "brackets must enclose exactly one IPv6 literal"),
	BADD("doubly bracketed name in target", "GET http://[[x.com]]/" H11 HX
	     END, "bad host in request target",
	     "brackets must enclose exactly one IPv6 literal"),
	BADD("bracketed name in Host", GET "Host: [x.com]\r\n" END,
	     "bad Host header",
	     "brackets must enclose exactly one IPv6 literal"),
	BADD("doubly bracketed Host", GET "Host: [[x.com]]\r\n" END,
	     "bad Host header",
	     "brackets must enclose exactly one IPv6 literal"),
	BADD("bracketed CONNECT name", "CONNECT [x.com]:443" H11 END,
	     "bad CONNECT authority",
	     "brackets must enclose exactly one IPv6 literal"),
	BADD("doubly bracketed CONNECT IPv6", "CONNECT [[::1]]:443" H11 END,
	     "bad CONNECT authority",
	     "brackets must enclose exactly one IPv6 literal"),
	BADD("empty Host", GET "Host:\r\n" END, "bad Host header",
	     "empty host"),
	BAD("Host list", GET "Host: x.com, y.com\r\n" END, "bad Host header"),
	BADD("Host with user-info", GET "Host: u@x.com\r\n" END,
	     "bad Host header", "user-info ('@') in host"),
	BAD("Host with two ports", GET "Host: x.com:80:80\r\n" END,
	    "bad Host header"),

	/* Target syntax */
	BAD("user-info u:p@", "GET http://u:p@x.com/" H11 HX END,
	    "user-info in request target"),
	BAD("user-info u@", "GET http://u@x.com/" H11 HX END,
	    "user-info in request target"),
	BAD("user-info hidden behind a port", "GET http://x.com:80@y.com/" H11
	    HX END, "user-info in request target"),
	BAD("fragment", "GET http://x.com/#frag" H11 HX END,
	    "fragment in request target"),
	BAD("empty fragment", "GET http://x.com/a#" H11 HX END,
	    "fragment in request target"),
	BAD("https in absolute-form", "GET https://x.com/" H11 HX END,
	    "https:// in absolute-form (use CONNECT)"),
	BAD("HTTPS uppercase", "GET HTTPS://x.com/" H11 HX END,
	    "https:// in absolute-form (use CONNECT)"),
	BAD("ftp scheme", "GET ftp://x.com/" H11 HX END,
	    "unsupported scheme in request target"),
	OK("uppercase http scheme", "GET HTTP://x.com/" H11 HX END,
	   .host = "x.com", .form = 'a'),
	BAD("http: without //", "GET http:/x.com/" H11 HX END,
	    "request target is neither origin- nor absolute-form"),
	BADD("empty host", "GET http:///p" H11 HX END,
	     "bad host in request target", "empty host"),
	BADD("percent-escape in host", "GET http://x%2ecom/" H11 HX END,
	     "bad host in request target", "percent-escape in host name"),
	BAD("invalid character in host", "GET http://x!y.com/" H11 HX END,
	    "bad host in request target"),
	BAD("empty port", "GET http://x.com:/" H11 HX END,
	    "bad host in request target"),
	BAD("port 0", "GET http://x.com:0/" H11 HX END,
	    "bad host in request target"),
	BAD("port 65536", "GET http://x.com:65536/" H11 HX END,
	    "bad host in request target"),
	BAD("port with leading zero", "GET http://x.com:080/" H11 HX END,
	    "bad host in request target"),
	BADD("numeric last label", "GET http://1.2.3.4.5/" H11 HX END,
	     "bad host in request target",
	     "ambiguous numeric host (invalid IPv4 notation)"),
	BAD("bad percent-escape in path", "GET http://x.com/%zz" H11 HX END,
	    "bad percent-escape in request target"),
	BAD("truncated percent-escape", "GET http://x.com/%4" H11 HX END,
	    "bad percent-escape in request target"),
	OK("valid percent-escapes", "GET http://x.com/%41?q=%20" H11 HX END,
	   .path = "/%41", .query = "q=%20"),
	BAD("non-ASCII in target", "GET http://x.com/caf\xc3\xa9" H11 HX END,
	    "invalid character in request target"),
	BAD("backslash in target", "GET http://x.com\\@y.com/" H11 HX END,
	    "backslash in request target"),
	BAD("DEL in target", "GET http://x.com/\x7f" H11 HX END,
	    "invalid character in request target"),
	OK("path and query", "GET http://x.com/a/b?c=d&e" H11 HX END,
	   .path = "/a/b", .query = "c=d&e"),
	OK("no path", "GET http://x.com" H11 HX END, .path = "", .query = "-"),
	OK("query without path", "GET http://x.com?q" H11 HX END, .path = "",
	   .query = "q"),
	OK("empty query", "GET http://x.com/?" H11 HX END, .path = "/",
	   .query = ""),
	OK("brackets and braces in query", "GET http://x.com/?a[]={1}|2" H11
	   HX END, .query = "a[]={1}|2"),

	/* Connection */
	OK("Connection: close", GET HX "Connection: close\r\n" END, .ka = 'n'),
	OK("Connection: CLOSE among others", GET HX
	   "Connection: keep-alive, CLOSE\r\n" END, .ka = 'n'),
	OK("Connection: keep-alive", GET HX "Connection: keep-alive, X-Foo\r\n"
	   END, .ka = 'y'),
	OK("HTTP/1.0 never keeps alive", "GET http://x.com/ HTTP/1.0\r\n"
	   "Connection: keep-alive\r\n" END, .ka = 'n'),
	OK("empty list elements", GET HX "Connection: , close ,\r\n" END,
	   .ka = 'n'),
	BAD("Connection names Host", GET HX "Connection: close, host\r\n" END,
	    "Connection names Host or Content-Length"),
	BAD("Connection names Content-Length", GET HX
	    "Connection: Content-Length\r\n" END,
	    "Connection names Host or Content-Length"),
	BAD("Connection not a token list", GET HX "Connection: a b\r\n" END,
	    "invalid Connection header"),
};

static void check_rq_case(const struct rq_case *c)
{
	size_t len = c->len ? c->len : strlen(c->raw), bad_k = 0;
	char *buf = copy_exact(c->raw, len);
	struct http_request req;
	enum http_result r;
	bool ok;

	r = http_parse_request(buf, len, &req, NULL);
	ok = r == c->want;
	if (ok && c->error)
		ok = req.error && strcmp(req.error, c->error) == 0;
	if (ok && c->detail)
		ok = req.error_detail &&
		     strcmp(req.error_detail, c->detail) == 0;
	if (ok && r != HTTP_OK)
		ok = req.error_offset <= len;
	if (ok && r == HTTP_OK) {
		if (c->host)
			ok = ok && strcmp(req.host.name, c->host) == 0;
		if (c->port)
			ok = ok && req.port == c->port;
		if (c->form)
			ok = ok && req.form == form_of(c->form);
		if (c->body)
			ok = ok && req.body == body_of(c->body);
		if (c->body == 'l')
			ok = ok && req.content_length == (uint64_t)c->cl;
		if (c->ka)
			ok = ok && req.keep_alive == (c->ka == 'y');
		if (c->path)
			ok = ok && slice_is(req.path, c->path);
		if (c->query && strcmp(c->query, "-") == 0)
			ok = ok && !req.has_query;
		else if (c->query)
			ok = ok && req.has_query &&
			     slice_is(req.query, c->query);
		ok = ok && req.head_len <= len &&
		     memcmp(buf + req.head_len - 4, "\r\n\r\n", 4) == 0;
	}
	if (!tap_ok(ok, "request: %s -> %s", c->desc, result_name(c->want)))
		tap_diag("got %s (%s%s%s) at %zu", result_name(r),
			 req.error ? req.error : "-",
			 req.error_detail ? ": " : "",
			 req.error_detail ? req.error_detail : "",
			 req.error_offset);
	tap_ok(request_prefixes_consistent(c->raw, len, NULL, &bad_k),
	       "request: %s: every prefix is INCOMPLETE or the same result",
	       c->desc);
	free(buf);
}

/* ------------------------------------------------------------------ */
/* Incremental parsing, field contents, limits                        */
/* ------------------------------------------------------------------ */

static void test_incremental(void)
{
	static const char *const valid[] = {
		"POST http://x.com:8080/a?b=c" H11 "Host: x.com:8080\r\n"
		"Content-Length: 5\r\nX-Long: a b\tc\r\n" END "hello",
		"CONNECT [::1]:443" H11 "Host: [::1]:443\r\n"
		"Proxy-Authorization: Basic Zm9vOmJhcg==\r\n" END,
		"PUT /x HTTP/1.1\r\nHost: api.example.com\r\n"
		"Transfer-Encoding: chunked\r\nConnection: close\r\n" END
		"5\r\nhello\r\n0\r\n\r\n",
	};
	size_t i;

	for (i = 0; i < ARRAY_SIZE(valid); i++) {
		size_t len = strlen(valid[i]), k, bad = 0;
		struct http_request full, part;
		char *fb = copy_exact(valid[i], len);
		bool all_incomplete = true, same = true;

		tap_is_int(http_parse_request(fb, len, &full, NULL), HTTP_OK,
			   "incremental #%zu: whole buffer parses", i);
		for (k = 0; k < len; k++) {
			char *pb = copy_exact(valid[i], k);
			enum http_result r;

			r = http_parse_request(pb, k, &part, NULL);
			if (k < full.head_len && r != HTTP_INCOMPLETE) {
				all_incomplete = false;
				bad = k;
			}
			if (k >= full.head_len &&
			    (r != HTTP_OK ||
			     !requests_same(&full, fb, &part, pb))) {
				same = false;
				bad = k;
			}
			free(pb);
		}
		tap_ok(all_incomplete,
		       "incremental #%zu: every split before the end of the "
		       "head is INCOMPLETE (first failure at %zu)",
		       i, bad);
		tap_ok(same,
		       "incremental #%zu: every split after the head gives "
		       "identical fields",
		       i);
		free(fb);
	}
}

static void test_request_fields(void)
{
	static const char raw[] = "PATCH http://Api.Example.com:8443/v1/x?y=1"
				  H11 "Host: api.example.com:8443\r\n"
				  "X-A: one\r\nx-a: two\r\n"
				  "Connection: X-Secret-Hop\r\n" END "tail";
	char *buf = copy_exact(raw, sizeof(raw) - 1);
	struct http_request req;
	struct http_slice n;
	int i, count = 0;

	tap_is_int(http_parse_request(buf, sizeof(raw) - 1, &req, NULL),
		   HTTP_OK, "fields: parse");
	tap_ok(slice_is(req.method, "PATCH"), "fields: method");
	tap_ok(slice_is(req.target, "http://Api.Example.com:8443/v1/x?y=1"),
	       "fields: raw target");
	tap_is_str(req.host.name, "api.example.com", "fields: host lowercased");
	tap_ok(req.port == 8443 && req.port_explicit, "fields: explicit port");
	tap_is_int(req.version_minor, 1, "fields: HTTP/1.1");
	tap_is_int(req.headers.count, 4, "fields: four header lines");
	tap_ok(slice_is(req.headers.h[1].name, "X-A") &&
	       slice_is(req.headers.h[1].value, "one"),
	       "fields: header order kept");
	tap_is_int(req.head_len, sizeof(raw) - 1 - 4, "fields: head_len");
	for (i = http_header_find(&req.headers, "x-a", 0); i >= 0;
	     i = http_header_find(&req.headers, "X-A", (size_t)i + 1))
		count++;
	tap_is_int(count, 2, "http_header_find: iterates both X-A lines");
	tap_is_int(http_header_find(&req.headers, "HOST", 0), 0,
		   "http_header_find: case-insensitive");
	tap_is_int(http_header_find(&req.headers, "x-missing", 0), -1,
		   "http_header_find: absent");
	tap_is_int(http_header_find(&req.headers, "host", 1), -1,
		   "http_header_find: from past the match");

	n.ptr = "Proxy-Authorization";
	n.len = strlen(n.ptr);
	tap_ok(http_is_hop_by_hop(&req.headers, n),
	       "hop-by-hop: Proxy-Authorization");
	n.ptr = "UPGRADE";
	n.len = strlen(n.ptr);
	tap_ok(http_is_hop_by_hop(NULL, n), "hop-by-hop: Upgrade, any case");
	n.ptr = "x-secret-hop";
	n.len = strlen(n.ptr);
	tap_ok(http_is_hop_by_hop(&req.headers, n),
	       "hop-by-hop: a name listed in Connection");
	n.ptr = "x-secret";
	n.len = strlen(n.ptr);
	tap_ok(!http_is_hop_by_hop(&req.headers, n),
	       "hop-by-hop: not a prefix of a listed name");
	n.ptr = "X-A";
	n.len = strlen(n.ptr);
	tap_ok(!http_is_hop_by_hop(&req.headers, n),
	       "hop-by-hop: an end-to-end field");
	n.ptr = "Host";
	n.len = 4;
	tap_ok(!http_is_hop_by_hop(&req.headers, n), "hop-by-hop: Host is not");
	free(buf);
}

/* A request with @nfields header lines (Host first) whose header block is
 * exactly @block bytes when @block is not 0. */
static char *build_request(size_t line_len, size_t nfields, size_t block,
			   size_t *len)
{
	static const char tail[] = " HTTP/1.1\r\n";
	size_t cap = line_len + 64 + nfields * 32 + block + 64, n = 0;
	char *b = util_xmalloc(cap);

	/* "GET http://x.com/aaaa... HTTP/1.1": line_len bytes before CRLF */
	n += (size_t)snprintf(b, cap, "GET http://x.com/");
	while (n < line_len - (sizeof(tail) - 3))
		b[n++] = 'a';
	memcpy(b + n, tail, sizeof(tail) - 1);
	n += sizeof(tail) - 1;
	{
		size_t start = n, i;

		n += (size_t)snprintf(b + n, cap - n, "Host: x.com\r\n");
		for (i = 1; i < nfields; i++)
			n += (size_t)snprintf(b + n, cap - n, "X-%zu: v\r\n",
					      i);
		if (block) {
			/* pad one more field so that the block (with the
			 * final CRLF) is exactly @block bytes */
			size_t have = n - start + 2, need;

			ASSERT(block >= have + 5);
			need = block - have;
			memcpy(b + n, "P: ", 3);
			memset(b + n + 3, 'p', need - 5);
			memcpy(b + n + need - 2, "\r\n", 2);
			n += need;
		}
	}
	memcpy(b + n, "\r\n", 2);
	n += 2;
	*len = n;
	return b;
}

static void expect_limit(const char *desc, size_t line_len, size_t nfields,
			 size_t block, const struct http_limits *lim,
			 enum http_result want, const char *why)
{
	struct http_request req;
	enum http_result r;
	size_t len, bad = 0;
	char *raw = build_request(line_len, nfields, block, &len);
	char *buf = copy_exact(raw, len);

	r = http_parse_request(buf, len, &req, lim);
	if (!tap_ok(r == want && (!why || (req.error &&
					   strcmp(req.error, why) == 0)),
		    "limits: %s -> %s", desc, result_name(want)))
		tap_diag("got %s (%s)", result_name(r),
			 req.error ? req.error : "-");
	if (len < 20000)
		tap_ok(request_prefixes_consistent(raw, len, lim, &bad),
		       "limits: %s: prefixes consistent", desc);
	free(buf);
	free(raw);
}

static void test_limits(void)
{
	struct http_limits small = http_limits_default;
	struct http_request req;
	size_t n;
	char *big;

	expect_limit("request-line of 8192 bytes", 8192, 1, 0, NULL, HTTP_OK,
		     NULL);
	expect_limit("request-line of 8193 bytes", 8193, 1, 0, NULL,
		     HTTP_TOO_LARGE, "start line too long");
	expect_limit("100 header fields", 40, 100, 0, NULL, HTTP_OK, NULL);
	expect_limit("101 header fields", 40, 101, 0, NULL, HTTP_TOO_LARGE,
		     "too many header fields");
	expect_limit("header block of 32768 bytes", 40, 3, 32768, NULL,
		     HTTP_OK, NULL);
	expect_limit("header block of 32769 bytes", 40, 3, 32769, NULL,
		     HTTP_TOO_LARGE, "header block too large");
	small.max_headers = 2;
	expect_limit("max_headers 2 with 2 fields", 40, 2, 0, &small, HTTP_OK,
		     NULL);
	expect_limit("max_headers 2 with 3 fields", 40, 3, 0, &small,
		     HTTP_TOO_LARGE, "too many header fields");
	small.max_headers = 1000;
	expect_limit("max_headers above the table is clamped to 100", 40, 101,
		     0, &small, HTTP_TOO_LARGE, "too many header fields");
	small = http_limits_default;
	small.max_start_line = 100;
	small.max_header_block = 64;
	expect_limit("small limits: 100-byte line", 100, 1, 0, &small,
		     HTTP_OK, NULL);
	expect_limit("small limits: 101-byte line", 101, 1, 0, &small,
		     HTTP_TOO_LARGE, "start line too long");
	expect_limit("small limits: 64-byte block", 40, 1, 64, &small,
		     HTTP_OK, NULL);
	expect_limit("small limits: 65-byte block", 40, 1, 65, &small,
		     HTTP_TOO_LARGE, "header block too large");

	/* An endless request-line is refused before its end arrives. */
	n = 9000;
	big = util_xmalloc(n);
	memset(big, 'a', n);
	memcpy(big, "GET http://x.com/", 17);
	tap_is_int(http_parse_request(big, n, &req, NULL), HTTP_TOO_LARGE,
		   "limits: unterminated 9000-byte request-line");
	tap_is_int(http_parse_request(big, 8192, &req, NULL), HTTP_INCOMPLETE,
		   "limits: unterminated 8192 bytes is still incomplete");
	free(big);
}

static void test_misc(void)
{
	struct http_request req;
	struct http_response resp;
	size_t i;

	for (i = 0; i < HTTP_RESULT_COUNT; i++)
		tap_ok(strcmp(http_result_to_string(i), "unknown result") != 0,
		       "http_result_to_string(%zu) = %s", i,
		       http_result_to_string(i));
	tap_is_str(http_result_to_string(HTTP_RESULT_COUNT), "unknown result",
		   "http_result_to_string out of range");
	for (i = 0; i < HTTP_CHUNKED_RESULT_COUNT; i++)
		tap_ok(strcmp(http_chunked_result_to_string(i),
			      "unknown result") != 0,
		       "http_chunked_result_to_string(%zu) = %s", i,
		       http_chunked_result_to_string(i));
	tap_is_int(http_parse_request(NULL, 0, &req, NULL), HTTP_INCOMPLETE,
		   "empty buffer is incomplete");
	tap_is_int(http_parse_request("G", 1, &req, NULL), HTTP_INCOMPLETE,
		   "one byte is incomplete");
	tap_is_int(http_parse_response("", 0, &resp, NULL, false),
		   HTTP_INCOMPLETE, "empty response is incomplete");
	tap_ok(http_slice_eq_ci((struct http_slice){ "ChUnKeD", 7 }, "chunked"),
	       "http_slice_eq_ci: case-insensitive");
	tap_ok(!http_slice_eq_ci((struct http_slice){ "chunked", 6 },
				 "chunked"),
	       "http_slice_eq_ci: length counts");
}

/* ------------------------------------------------------------------ */
/* Responses                                                          */
/* ------------------------------------------------------------------ */

struct rs_case {
	const char *desc;
	const char *raw;
	bool to_head;
	enum http_result want;
	const char *error;
	unsigned int status;   /* checked when not 0 */
	char body;             /* 'n', 'l', 'c', 'u' */
	long long cl;
	char ka;
	const char *reason;
};

#define ROK(d, r, ...) { .desc = d, .raw = r, .want = HTTP_OK, __VA_ARGS__ }
#define RBAD(d, r, why) { .desc = d, .raw = r, .want = HTTP_BAD, .error = why }
#define S200 "HTTP/1.1 200 OK\r\n"

static const struct rs_case rs_cases[] = {
	ROK("200 with Content-Length", S200 "Content-Length: 5\r\n" END "hello",
	    .status = 200, .body = 'l', .cl = 5, .ka = 'y', .reason = "OK"),
	ROK("200 chunked", S200 "Transfer-Encoding: chunked\r\n" END,
	    .body = 'c', .ka = 'y'),
	ROK("200 gzip, chunked", S200 "Transfer-Encoding: gzip, chunked\r\n"
	    END, .body = 'c'),
	ROK("200 until close", S200 "Server: x\r\n" END, .body = 'u',
	    .ka = 'n'),
	ROK("204 has no body", "HTTP/1.1 204 No Content\r\n" END,
	    .status = 204, .body = 'n', .ka = 'y'),
	ROK("304 with Content-Length has no body",
	    "HTTP/1.1 304 Not Modified\r\nContent-Length: 100\r\n" END,
	    .body = 'n'),
	ROK("100 Continue is a complete head", "HTTP/1.1 100 Continue\r\n" END
	    "HTTP/1.1 200 OK\r\n", .status = 100, .body = 'n'),
	ROK("101 Switching Protocols", "HTTP/1.1 101 Switching Protocols\r\n"
	    "Upgrade: websocket\r\nConnection: Upgrade\r\n" END, .status = 101,
	    .body = 'n'),
	ROK("response to HEAD with Content-Length", S200
	    "Content-Length: 100\r\n" END, .to_head = true, .body = 'n'),
	ROK("response to HEAD with chunked", S200
	    "Transfer-Encoding: chunked\r\n" END, .to_head = true,
	    .body = 'n'),
	ROK("no reason-phrase, no SP", "HTTP/1.1 200\r\n"
	    "Content-Length: 0\r\n" END, .status = 200, .reason = ""),
	ROK("empty reason-phrase", "HTTP/1.1 404 \r\n"
	    "Content-Length: 0\r\n" END, .status = 404, .reason = ""),
	ROK("reason-phrase with obs-text and HTAB", "HTTP/1.1 200 \xc3\xa9\tok"
	    "\r\nContent-Length: 0\r\n" END, .reason = "\xc3\xa9\tok"),
	ROK("HTTP/1.0 never keeps alive", "HTTP/1.0 200 OK\r\n"
	    "Content-Length: 1\r\n" END, .body = 'l', .cl = 1, .ka = 'n'),
	ROK("Connection: close", S200 "Content-Length: 1\r\n"
	    "Connection: close\r\n" END, .ka = 'n'),
	ROK("duplicate non-framing fields", S200 "Set-Cookie: a=1\r\n"
	    "Set-Cookie: b=2\r\nContent-Length: 0\r\n" END, .ka = 'y'),
	RBAD("4-digit status", "HTTP/1.1 2000 OK\r\n" END,
	     "invalid status code"),
	RBAD("2-digit status", "HTTP/1.1 20 OK\r\n" END,
	     "invalid status code"),
	RBAD("status-line too short", "HTTP/1.1 20\r\n" END,
	     "malformed status-line"),
	RBAD("status 600", "HTTP/1.1 600 X\r\n" END,
	     "status code out of range"),
	RBAD("status 099", "HTTP/1.1 099 X\r\n" END,
	     "status code out of range"),
	RBAD("HTTP/2", "HTTP/2 200 OK\r\n" END, "unsupported HTTP version"),
	RBAD("not HTTP", "ICY 200 OK\r\n" END, "malformed status-line"),
	RBAD("HTTP/1.2", "HTTP/1.2 200 OK\r\n" END,
	     "unsupported HTTP version"),
	RBAD("two spaces", "HTTP/1.1  200 OK\r\n" END, "invalid status code"),
	RBAD("lowercase http", "http/1.1 200 OK\r\n" END,
	     "malformed status-line"),
	RBAD("empty line before status", "\r\n" S200 END,
	     "empty line before status-line"),
	RBAD("control byte in reason", "HTTP/1.1 200 O\x01K\r\n" END,
	     "control character in reason-phrase"),
	RBAD("CL with TE", S200 "Content-Length: 5\r\n"
	     "Transfer-Encoding: chunked\r\n" END,
	     "Content-Length with Transfer-Encoding"),
	RBAD("TE with CL", S200 "Transfer-Encoding: chunked\r\n"
	     "Content-Length: 5\r\n" END,
	     "Content-Length with Transfer-Encoding"),
	RBAD("duplicate Content-Length", S200 "Content-Length: 5\r\n"
	     "Content-Length: 5\r\n" END, "duplicate Content-Length"),
	RBAD("Content-Length list", S200 "Content-Length: 1,1\r\n" END,
	     "invalid Content-Length"),
	RBAD("duplicate TE", S200 "Transfer-Encoding: chunked\r\n"
	     "Transfer-Encoding: chunked\r\n" END,
	     "duplicate Transfer-Encoding"),
	RBAD("TE gzip alone", S200 "Transfer-Encoding: gzip\r\n" END,
	     "Transfer-Encoding without final chunked"),
	RBAD("TE chunked, gzip", S200 "Transfer-Encoding: chunked, gzip\r\n"
	     END,
	     "Transfer-Encoding without final chunked"),
	RBAD("TE chunked, chunked", S200
	     "Transfer-Encoding: chunked, chunked\r\n" END,
	     "chunked applied more than once"),
	RBAD("TE with parameters", S200
	     "Transfer-Encoding: gzip;q=1, chunked\r\n" END,
	     "invalid Transfer-Encoding"),
	RBAD("TE with empty element", S200 "Transfer-Encoding: , chunked\r\n"
	     END, "invalid Transfer-Encoding"),
	RBAD("TE in HTTP/1.0", "HTTP/1.0 200 OK\r\n"
	     "Transfer-Encoding: chunked\r\n" END,
	     "Transfer-Encoding in HTTP/1.0"),
	RBAD("obs-fold", S200 "X: a\r\n b\r\n" END, "obs-fold in header block"),
	RBAD("bare LF", "HTTP/1.1 200 OK\n" END, "bare LF line ending"),
	RBAD("space before colon", S200 "Content-Length : 5\r\n" END,
	     "whitespace between field name and colon"),
	RBAD("Connection names Content-Length", S200
	     "Connection: content-length\r\nContent-Length: 5\r\n" END,
	     "Connection names Host or Content-Length"),
};

static void check_rs_case(const struct rs_case *c)
{
	size_t len = strlen(c->raw), bad_k = 0;
	char *buf = copy_exact(c->raw, len);
	struct http_response resp;
	enum http_result r;
	bool ok;

	r = http_parse_response(buf, len, &resp, NULL, c->to_head);
	ok = r == c->want;
	if (ok && c->error)
		ok = resp.error && strcmp(resp.error, c->error) == 0;
	if (ok && r == HTTP_OK) {
		if (c->status)
			ok = ok && resp.status == c->status;
		if (c->body)
			ok = ok && resp.body == body_of(c->body);
		if (c->body == 'l')
			ok = ok && resp.content_length == (uint64_t)c->cl;
		if (c->ka)
			ok = ok && resp.keep_alive == (c->ka == 'y');
		if (c->reason)
			ok = ok && slice_is(resp.reason_phrase, c->reason);
	}
	if (!tap_ok(ok, "response: %s -> %s", c->desc, result_name(c->want)))
		tap_diag("got %s (%s) status %u body %d", result_name(r),
			 resp.error ? resp.error : "-", resp.status,
			 (int)resp.body);
	tap_ok(response_prefixes_consistent(c->raw, len, c->to_head, &bad_k),
	       "response: %s: every prefix is INCOMPLETE or the same result",
	       c->desc);
	free(buf);
}

/* ------------------------------------------------------------------ */
/* Chunked bodies                                                     */
/* ------------------------------------------------------------------ */

struct ch_outcome {
	enum http_chunked_result r;
	char data[256];
	size_t data_len;       /* may exceed sizeof(data): then truncated */
	uint64_t consumed;
	const char *error;
	uint64_t error_offset;
	bool inconsistent;     /* a MORE that left bytes unconsumed */
};

/* Feeds @body cut at the sorted offsets @cuts (each piece an exact-size
 * copy) until DONE or BAD. */
static void run_chunked(const char *body, size_t len, const size_t *cuts,
			size_t ncuts, const struct http_limits *lim,
			struct ch_outcome *o)
{
	struct http_chunked st;
	size_t piece, start = 0;

	memset(o, 0, sizeof(*o));
	http_chunked_init(&st, lim);
	o->r = HTTP_CHUNKED_MORE;
	for (piece = 0; piece <= ncuts; piece++) {
		size_t end = (cuts && piece < ncuts) ? cuts[piece] : len;
		size_t off = 0;
		char *p = copy_exact(body + start, end - start);

		for (;;) {
			struct http_slice d;
			size_t n;

			o->r = http_chunked_feed(&st, p + off,
						 end - start - off, &n, &d);
			off += n;
			o->consumed += n;
			if (o->r == HTTP_CHUNKED_DATA) {
				if (o->data_len + d.len <= sizeof(o->data))
					memcpy(o->data + o->data_len, d.ptr,
					       d.len);
				o->data_len += d.len;
				continue;
			}
			if (o->r == HTTP_CHUNKED_MORE && off != end - start)
				o->inconsistent = true;
			break;
		}
		free(p);
		start = end;
		if (o->r == HTTP_CHUNKED_DONE || o->r == HTTP_CHUNKED_BAD)
			break;
	}
	o->error = st.error;
	o->error_offset = st.error_offset;
}

static bool outcomes_equal(const struct ch_outcome *a,
			   const struct ch_outcome *b)
{
	size_t n = a->data_len < sizeof(a->data) ? a->data_len :
						   sizeof(a->data);

	return a->r == b->r && a->data_len == b->data_len &&
	       memcmp(a->data, b->data, n) == 0 &&
	       a->consumed == b->consumed && same_error(a->error, b->error) &&
	       a->error_offset == b->error_offset && !a->inconsistent &&
	       !b->inconsistent;
}

struct ch_case {
	const char *desc;
	const char *raw;
	size_t len;                   /* 0: strlen */
	enum http_chunked_result want;
	const char *data;             /* decoded payload, when not NULL */
	const char *error;
	long long consumed;           /* -1: all of it */
};

#define CDONE(d, r, payload, used)                                         \
	{ .desc = d, .raw = r, .want = HTTP_CHUNKED_DONE, .data = payload,  \
	  .consumed = used }
#define CBAD(d, r, why)                                                    \
	{ .desc = d, .raw = r, .want = HTTP_CHUNKED_BAD, .error = why,      \
	  .consumed = -2 }
#define CMORE(d, r, payload)                                               \
	{ .desc = d, .raw = r, .want = HTTP_CHUNKED_MORE, .data = payload,  \
	  .consumed = -1 }

static const struct ch_case ch_cases[] = {
	CDONE("one chunk", "5\r\nhello\r\n0\r\n\r\n", "hello", -1),
	CDONE("two chunks", "5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n",
	      "hello world", -1),
	CDONE("empty body", "0\r\n\r\n", "", -1),
	CDONE("uppercase hex", "A\r\n0123456789\r\n0\r\n\r\n", "0123456789",
	      -1),
	CDONE("lowercase hex", "a\r\n0123456789\r\n0\r\n\r\n", "0123456789",
	      -1),
	CDONE("leading zeros", "0005\r\nhello\r\n000\r\n\r\n", "hello", -1),
	CDONE("16 hex digits", "0000000000000005\r\nhello\r\n0\r\n\r\n",
	      "hello", -1),
	CDONE("extensions", "5;name=val;flag\r\nhello\r\n0;last\r\n\r\n",
	      "hello", -1),
	CDONE("quoted extension", "5;a=\"b c\\\"d;e\"\r\nhello\r\n0\r\n\r\n",
	      "hello", -1),
	CDONE("trailers", "5\r\nhello\r\n0\r\nX-Sum: abc\r\nX-B:\r\n\r\n",
	      "hello", -1),
	CDONE("long trailer name sharing a forbidden prefix",
	      "0\r\nContent-Length-Digest: x\r\n\r\n", "", -1),
	CDONE("next message after the body",
	      "3\r\nabc\r\n0\r\n\r\nGET / HTTP/1.1\r\n", "abc", 13),
	CDONE("payload with CR LF and NUL bytes",
	      "4\r\n\r\n\n\r\r\n0\r\n\r\n", "\r\n\n\r", -1),
	CMORE("incomplete payload", "5\r\nhel", "hel"),
	CMORE("incomplete size line", "5;a=b", ""),
	CMORE("huge chunk size, payload pending", "ffffffffffffffff\r\nab",
	      "ab"),
	CMORE("incomplete trailers", "0\r\nX: y\r\n", ""),
	CBAD("17 hex digits", "00000000000000005\r\nhello\r\n0\r\n\r\n",
	     "chunk size too long"),
	CBAD("0x prefix", "0x5\r\nhello\r\n0\r\n\r\n", "invalid chunk size"),
	CBAD("plus sign", "+5\r\nhello\r\n0\r\n\r\n", "invalid chunk size"),
	CBAD("minus sign", "-5\r\nhello\r\n0\r\n\r\n", "invalid chunk size"),
	CBAD("leading space", " 5\r\nhello\r\n0\r\n\r\n", "invalid chunk size"),
	CBAD("trailing space", "5 \r\nhello\r\n0\r\n\r\n",
	     "whitespace in chunk line"),
	CBAD("space before extension", "5 ;a\r\nhello\r\n0\r\n\r\n",
	     "whitespace in chunk line"),
	CBAD("space after semicolon", "5; a\r\nhello\r\n0\r\n\r\n",
	     "invalid chunk extension"),
	CBAD("empty chunk size", "\r\nhello\r\n0\r\n\r\n",
	     "invalid chunk size"),
	CBAD("non-hex digit", "5g\r\nhello\r\n0\r\n\r\n", "invalid chunk size"),
	CBAD("bare LF after size", "5\nhello\r\n0\r\n\r\n",
	     "bare LF in chunked body"),
	CBAD("bare CR after size", "5\rhello\r\n0\r\n\r\n",
	     "bare CR in chunked body"),
	CBAD("payload longer than its size (TE.CL style)",
	     "5\r\nhelloX\r\n0\r\n\r\n", "chunk data not followed by CRLF"),
	CBAD("payload followed by bare LF", "5\r\nhello\n0\r\n\r\n",
	     "chunk data not followed by CRLF"),
	CBAD("payload followed by CR only", "5\r\nhello\r0\r\n\r\n",
	     "chunk data not followed by CRLF"),
	CBAD("empty extension", "5;\r\nhello\r\n0\r\n\r\n",
	     "invalid chunk extension"),
	CBAD("extension without name", "5;=x\r\nhello\r\n0\r\n\r\n",
	     "invalid chunk extension"),
	CBAD("extension without value", "5;a=\r\nhello\r\n0\r\n\r\n",
	     "invalid chunk extension"),
	CBAD("unterminated quoted extension", "5;a=\"x\r\nhello\r\n0\r\n\r\n",
	     "invalid chunk extension"),
	CBAD("junk after quoted extension", "5;a=\"x\"y\r\nhello\r\n0\r\n\r\n",
	     "invalid chunk extension"),
	CBAD("bare LF in extension", "5;a\nhello\r\n0\r\n\r\n",
	     "bare LF in chunked body"),
	CBAD("obs-fold in trailers", "0\r\nX: a\r\n b\r\n\r\n",
	     "obs-fold in trailer section"),
	CBAD("Content-Length trailer", "0\r\nContent-Length: 5\r\n\r\n",
	     "framing field in trailer section"),
	CBAD("Transfer-Encoding trailer",
	     "0\r\ntransfer-encoding: chunked\r\n\r\n",
	     "framing field in trailer section"),
	CBAD("Host trailer", "0\r\nHOST: y.com\r\n\r\n",
	     "framing field in trailer section"),
	CBAD("space before colon in trailer", "0\r\nX : a\r\n\r\n",
	     "whitespace between field name and colon"),
	CBAD("control byte in trailer", "0\r\nX: a\x01\r\n\r\n",
	     "control character in field value"),
	CBAD("trailer without colon", "0\r\nFoo\r\n\r\n",
	     "header line without colon"),
	CBAD("empty trailer name", "0\r\n: x\r\n\r\n", "empty field name"),
	CBAD("bare LF in trailer", "0\r\nX: a\n\r\n",
	     "bare LF in chunked body"),
	CBAD("bare CR at the end", "0\r\n\r\r", "bare CR in chunked body"),
	CBAD("bare LF at the end", "0\r\n\n", "bare LF in chunked body"),
	CBAD("request right after the last chunk", "0\r\nGET /",
	     "whitespace between field name and colon"),
};

static void check_ch_case(const struct ch_case *c)
{
	size_t len = c->len ? c->len : strlen(c->raw), k;
	struct ch_outcome whole, other;
	size_t cuts[2];
	bool ok, splits_ok = true, bytes_ok = true;

	run_chunked(c->raw, len, NULL, 0, NULL, &whole);
	ok = whole.r == c->want && !whole.inconsistent;
	if (ok && c->data)
		ok = whole.data_len == strlen(c->data) &&
		     memcmp(whole.data, c->data, whole.data_len) == 0;
	if (ok && c->error)
		ok = whole.error && strcmp(whole.error, c->error) == 0 &&
		     whole.consumed == whole.error_offset;
	if (ok && c->consumed == -1)
		ok = whole.consumed == len;
	else if (ok && c->consumed >= 0)
		ok = whole.consumed == (uint64_t)c->consumed;
	if (!tap_ok(ok, "chunked: %s -> %s", c->desc,
		    http_chunked_result_to_string(c->want)))
		tap_diag("got %s (%s) consumed %llu data %zu",
			 http_chunked_result_to_string(whole.r),
			 whole.error ? whole.error : "-",
			 (unsigned long long)whole.consumed, whole.data_len);

	for (k = 0; k <= len; k++) {
		size_t j;

		cuts[0] = k;
		run_chunked(c->raw, len, cuts, 1, NULL, &other);
		if (!outcomes_equal(&whole, &other))
			splits_ok = false;
		/* three pieces: a second cut a few bytes further on */
		for (j = k; j <= len && j < k + 4; j++) {
			cuts[1] = j;
			run_chunked(c->raw, len, cuts, 2, NULL, &other);
			if (!outcomes_equal(&whole, &other))
				splits_ok = false;
		}
	}
	tap_ok(splits_ok, "chunked: %s: same outcome at every split", c->desc);
	{
		size_t *all = util_xcalloc(len + 1, sizeof(size_t));

		for (k = 0; k < len; k++)
			all[k] = k + 1;
		run_chunked(c->raw, len, all, len ? len - 1 : 0, NULL, &other);
		bytes_ok = outcomes_equal(&whole, &other);
		free(all);
	}
	tap_ok(bytes_ok, "chunked: %s: same outcome one byte at a time",
	       c->desc);
}

static void test_chunked_limits(void)
{
	struct http_limits lim = http_limits_default;
	struct ch_outcome o;
	size_t n, i;
	char *b;

	/* chunk-size line of exactly max_chunk_line bytes, then one more */
	b = util_xmalloc(16384);
	for (i = 0; i < 2; i++) {
		n = 0;
		b[n++] = '1';
		b[n++] = ';';
		b[n++] = 'x';
		b[n++] = '=';
		while (n < 4096 + i)
			b[n++] = 'v';
		memcpy(b + n, "\r\na\r\n0\r\n\r\n", 10);
		n += 10;
		run_chunked(b, n, NULL, 0, NULL, &o);
		if (i == 0)
			tap_ok(o.r == HTTP_CHUNKED_DONE && o.data_len == 1,
			       "chunked limits: 4096-byte chunk line");
		else
			tap_ok(o.r == HTTP_CHUNKED_BAD && o.error &&
			       strcmp(o.error, "chunk line too long") == 0 &&
			       o.error_offset == 4096,
			       "chunked limits: 4097-byte chunk line");
	}
	/* trailer section of exactly max_trailer_block bytes, then one more */
	for (i = 0; i < 2; i++) {
		n = 0;
		memcpy(b, "0\r\nT: ", 6);
		n = 6;
		while (n < 3 + 8192 - 4 + i)
			b[n++] = 't';
		memcpy(b + n, "\r\n\r\n", 4);
		n += 4;
		run_chunked(b, n, NULL, 0, NULL, &o);
		if (i == 0)
			tap_ok(o.r == HTTP_CHUNKED_DONE && o.consumed == n,
			       "chunked limits: 8192-byte trailer section");
		else
			tap_ok(o.r == HTTP_CHUNKED_BAD && o.error &&
			       strcmp(o.error, "trailer section too large") ==
				       0,
			       "chunked limits: 8193-byte trailer section");
	}
	free(b);
	lim.max_headers = 2;
	run_chunked("0\r\nA: 1\r\nB: 2\r\n\r\n", 17, NULL, 0, &lim, &o);
	tap_ok(o.r == HTTP_CHUNKED_DONE, "chunked limits: 2 trailer fields");
	run_chunked("0\r\nA: 1\r\nB: 2\r\nC: 3\r\n\r\n", 23, NULL, 0, &lim, &o);
	tap_ok(o.r == HTTP_CHUNKED_BAD && o.error &&
	       strcmp(o.error, "too many trailer fields") == 0,
	       "chunked limits: 3 trailer fields over max_headers 2");
}

static void test_chunked_sticky(void)
{
	struct http_chunked st;
	struct http_slice d;
	size_t n;

	http_chunked_init(&st, NULL);
	tap_is_int(http_chunked_feed(&st, "0\r\n\r\nxyz", 8, &n, &d),
		   HTTP_CHUNKED_DONE, "chunked: done");
	tap_is_int(n, 5, "chunked: done consumed the body only");
	tap_is_int(http_chunked_feed(&st, "xyz", 3, &n, &d), HTTP_CHUNKED_DONE,
		   "chunked: done is final");
	tap_is_int(n, 0, "chunked: nothing consumed after done");
	http_chunked_init(&st, NULL);
	tap_is_int(http_chunked_feed(&st, "z", 1, &n, &d), HTTP_CHUNKED_BAD,
		   "chunked: bad");
	tap_is_int(http_chunked_feed(&st, "0\r\n\r\n", 5, &n, &d),
		   HTTP_CHUNKED_BAD, "chunked: bad is final");
	http_chunked_init(&st, NULL);
	tap_is_int(http_chunked_feed(&st, NULL, 0, &n, &d), HTTP_CHUNKED_MORE,
		   "chunked: empty feed is MORE");
}

struct sniff_case {
	const char *in;
	enum http_result want;
};

static const struct sniff_case sniff_cases[] = {
	{ "GET / HTTP/1.1\r\n", HTTP_OK },
	{ "GET / HTTP/1.0\r\n", HTTP_OK },
	{ "POST http://x/ HTTP/1.1", HTTP_OK },
	{ "get / http/1.1\r\n", HTTP_OK },           /* any case: then refused strictly */
	{ "GET  / HTTP/1.1\r\n", HTTP_OK },          /* two spaces: HTTP, refused */
	{ "GET / HTTP", HTTP_INCOMPLETE },             /* "HTTP/" not whole yet */
	{ "GET / HT", HTTP_INCOMPLETE },
	{ "GET", HTTP_INCOMPLETE },
	{ "G", HTTP_INCOMPLETE },
	{ "", HTTP_INCOMPLETE },
	{ "GET /\r\n", HTTP_BAD },                   /* HTTP/0.9: no version */
	{ "GET /\n", HTTP_BAD },
	{ "SSH-2.0-OpenSSH_9.2\r\n", HTTP_BAD },      /* no space after a token */
	{ "SET key HTTP/1.1\r\n", HTTP_OK },         /* leans towards HTTP */
	{ "SET key value\r\n", HTTP_BAD },           /* redis inline command */
	{ "*1\r\n$4\r\nPING\r\n", HTTP_BAD },          /* redis RESP */
	{ "R 0000000000000400 00000400     \n", HTTP_BAD }, /* the bench's protocol */
	{ "\x16\x03\x01\x02\x00", HTTP_BAD },          /* TLS */
	{ " GET / HTTP/1.1", HTTP_BAD },               /* no token first */
	{ "GE\tT / HTTP/1.1", HTTP_BAD },
};

static void test_sniff(void)
{
	char *big;
	size_t i, j;

	for (i = 0; i < ARRAY_SIZE(sniff_cases); i++) {
		const struct sniff_case *sc = &sniff_cases[i];
		size_t len = strlen(sc->in);
		enum http_result r;
		bool prefixes = true;

		if (strcmp(sc->in, "\x16\x03\x01\x02\x00") == 0)
			len = 5;
		r = http_sniff_request(sc->in, len);
		tap_ok(r == sc->want, "sniff '%.20s': %s (got %s)", sc->in,
		       http_result_to_string(sc->want), http_result_to_string(r));
		for (j = 0; j < len; j++) {
			enum http_result p = http_sniff_request(sc->in, j);

			if (p != HTTP_INCOMPLETE && p != r)
				prefixes = false;
		}
		tap_ok(prefixes, "sniff '%.20s': every prefix is INCOMPLETE or the same", sc->in);
	}
	big = util_xmalloc(HTTP_SNIFF_MAX + 10);
	memset(big, 'a', HTTP_SNIFF_MAX + 10);
	tap_ok(http_sniff_request(big, HTTP_SNIFF_MAX) == HTTP_BAD,
	       "a token of HTTP_SNIFF_MAX bytes: not HTTP");
	big[3] = ' ';
	tap_ok(http_sniff_request(big, HTTP_SNIFF_MAX - 1) == HTTP_INCOMPLETE &&
		       http_sniff_request(big, HTTP_SNIFF_MAX) == HTTP_OK,
	       "a token, a space and no end of line in HTTP_SNIFF_MAX bytes: HTTP (fail closed)");
	free(big);
}

int main(void)
{
	size_t i;

	test_sniff();
	for (i = 0; i < ARRAY_SIZE(rq_cases); i++)
		check_rq_case(&rq_cases[i]);
	test_incremental();
	test_request_fields();
	test_limits();
	test_misc();
	for (i = 0; i < ARRAY_SIZE(rs_cases); i++)
		check_rs_case(&rs_cases[i]);
	for (i = 0; i < ARRAY_SIZE(ch_cases); i++)
		check_ch_case(&ch_cases[i]);
	test_chunked_limits();
	test_chunked_sticky();
	return tap_done();
}
