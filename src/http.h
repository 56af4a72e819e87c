/* SPDX-License-Identifier: Apache-2.0
 * http.h - strict HTTP/1.1 request/response head parsing and the chunked
 * body decoder of the egress proxy (docs/PROXY.md).
 *
 * Pure functions over the caller's buffer: no I/O, no allocation, fixed
 * tables. Every string the parser returns is a slice (pointer + length)
 * into the buffer it was given, valid as long as that buffer is; slices are
 * never NUL-terminated. Table-tested in tests/unit/test_http.c and fuzzed
 * by tests/fuzz/fuzz_http.c. See the DOC block at the top of http.c for
 * why each rule exists.
 *
 * Calling pattern (heads): the proxy appends what it reads to one buffer
 * and calls http_parse_request() (or _response()) on the whole buffer after
 * every read. The parse is stateless and restarts from byte 0, so the
 * buffer may move between calls. Results are prefix-consistent: if a buffer
 * gives HTTP_OK, HTTP_BAD or HTTP_TOO_LARGE, every longer buffer with the
 * same first bytes gives the same result, reason and (for HTTP_OK) the same
 * fields; a prefix of a buffer gives HTTP_INCOMPLETE or that same result.
 * A call costs O(len) and len is bounded by the limits; a caller that wants
 * to avoid re-scanning may skip the call while the new bytes hold no '\n'
 * (the result can then only be HTTP_INCOMPLETE, or an error that a later
 * call reports), but must then enforce max_start_line + max_header_block
 * itself.
 */
#ifndef AIRLOCK_HTTP_H
#define AIRLOCK_HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hostname.h"

/* Hard size of the header tables; http_limits.max_headers may only lower
 * it. */
#define HTTP_MAX_HEADERS 100

/* Keep http_result_to_string() in sync (static_assert on the table). */
enum http_result {
	HTTP_OK = 0,     /* the whole head is parsed and valid */
	HTTP_INCOMPLETE, /* valid so far; call again with more bytes */
	HTTP_BAD,        /* malformed or ambiguous: answer 400 (502 for a
			    response) and close; ->error says why */
	HTTP_TOO_LARGE,  /* a limit of struct http_limits was exceeded; the
			    proxy answers 400 too (->error names the limit) */
	HTTP_RESULT_COUNT
};

const char *http_result_to_string(enum http_result r);

/* Limits; a NULL pointer wherever one is taken means http_limits_default. */
struct http_limits {
	size_t max_start_line;    /* request/status line, without CRLF:
				     8192 */
	size_t max_header_block;  /* the header lines after the start line,
				     each with its CRLF, plus the final empty
				     line: 32768 */
	size_t max_headers;       /* header fields; also trailer fields of a
				     chunked body: 100 (values above
				     HTTP_MAX_HEADERS are treated as it) */
	size_t max_chunk_line;    /* chunk-size line with its extensions,
				     without CRLF: 4096 */
	size_t max_trailer_block; /* trailer section of a chunked body, CRLFs
				     and the final empty line included:
				     8192 */
};

extern const struct http_limits http_limits_default;

/* A run of bytes inside the parsed buffer (never NUL-terminated). An
 * absent field is {NULL, 0}. */
struct http_slice {
	const char *ptr;
	size_t len;
};

/* One field line, in the order received. name is a non-empty token;
 * value has leading and trailing SP/HTAB removed and holds no CR, LF, NUL
 * or other control byte but HTAB (obs-text 0x80-0xff is kept). */
struct http_header {
	struct http_slice name;
	struct http_slice value;
};

struct http_headers {
	size_t count;
	struct http_header h[HTTP_MAX_HEADERS];
};

enum http_target_form {
	HTTP_FORM_ORIGIN = 0, /* "/path?query": only valid inside an
				 intercepted TLS tunnel, where Host names the
				 target */
	HTTP_FORM_ABSOLUTE,   /* "http://host[:port]/path?query" */
	HTTP_FORM_AUTHORITY,  /* "host:port", CONNECT only */
};

/* How the body that follows the head is delimited. */
enum http_body {
	HTTP_BODY_NONE = 0,    /* no body: the next message starts at
				  head_len */
	HTTP_BODY_LENGTH,      /* exactly content_length bytes (may be 0) */
	HTTP_BODY_CHUNKED,     /* chunked coding: use http_chunked_feed() */
	HTTP_BODY_UNTIL_CLOSE, /* responses only: until the server closes */
};

struct http_request {
	struct http_slice method;  /* a token, case preserved */
	struct http_slice target;  /* the raw request-target */
	enum http_target_form form;
	bool is_connect;           /* method is exactly "CONNECT" */
	int version_minor;         /* 0 (HTTP/1.0) or 1 (HTTP/1.1) */

	/* The destination: from the target in absolute- and
	 * authority-form, from the Host header in origin-form (has_host is
	 * then false only for an HTTP/1.0 request without Host). The parser
	 * cannot know the tunnel an origin-form request arrived in: the
	 * caller compares host/port with that tunnel's CONNECT target. */
	bool has_host;
	struct host_target host;   /* normalised (hostname_normalise) */
	uint16_t port;             /* explicit, else 80 (absolute-form) or
				      443 (origin-form: inside TLS) */
	bool port_explicit;        /* the port was written out */

	/* absolute- and origin-form only: path from the first '/' up to
	 * '?' (empty for "http://x.com" or "http://x.com?q"), query after
	 * '?' (has_query tells "?" from no '?'). The origin-form to send
	 * upstream is (path.len ? path : "/") followed by "?" query when
	 * has_query. */
	struct http_slice path;
	struct http_slice query;
	bool has_query;

	struct http_headers headers;

	/* Framing. Never forward the received Content-Length or
	 * Transfer-Encoding bytes: write "Content-Length: <content_length>"
	 * or "Transfer-Encoding: chunked" from these fields. */
	enum http_body body;       /* NONE, LENGTH or CHUNKED */
	uint64_t content_length;   /* valid when body == HTTP_BODY_LENGTH */
	bool keep_alive;           /* HTTP/1.1 without "Connection: close";
				      always false for HTTP/1.0 */
	size_t head_len;           /* bytes of the head, final CRLF included:
				      the body starts at buf + head_len */

	/* When the result is HTTP_BAD or HTTP_TOO_LARGE: a short static
	 * reason ("duplicate Host"), an optional static detail (the host
	 * normaliser's reason, else NULL) and the offset in the buffer of
	 * the offending byte or the start of the offending line. */
	const char *error;
	const char *error_detail;
	size_t error_offset;
};

struct http_response {
	int version_minor;         /* 0 or 1 */
	unsigned int status;       /* 100..599 */
	struct http_slice reason_phrase; /* may be empty */
	struct http_headers headers;
	enum http_body body;       /* NONE for 1xx, 204, 304 and responses to
				      HEAD whatever the headers say */
	uint64_t content_length;   /* valid when body == HTTP_BODY_LENGTH */
	bool keep_alive;           /* HTTP/1.1, no "Connection: close" and
				      not delimited by close */
	size_t head_len;
	const char *error;         /* as in struct http_request */
	const char *error_detail;
	size_t error_offset;
};

/* Parses the request head at the start of @buf (@len bytes; bytes after
 * the head are ignored). @lim may be NULL. Returns:
 *  HTTP_OK         *req is filled; the body (req->body) starts at
 *                  buf + req->head_len;
 *  HTTP_INCOMPLETE valid so far, call again with more bytes;
 *  HTTP_BAD / HTTP_TOO_LARGE  req->error says why.
 * On any result but HTTP_OK the other fields of *req are unspecified. The
 * rules (every one refuses, none repairs):
 *  - CRLF line endings only (bare CR, bare LF: BAD); no NUL anywhere; no
 *    empty line before the request-line;
 *  - request-line: token SP target SP ("HTTP/1.1" | "HTTP/1.0"), exactly
 *    one SP between parts;
 *  - target: visible ASCII only, no '#' (fragment), no '\\', every '%'
 *    followed by two hex digits; CONNECT takes exactly authority-form
 *    host:port, every other method absolute-form with scheme http (https
 *    is BAD: use CONNECT) or origin-form; no user-info, no asterisk-form;
 *    hosts go through hostname_normalise() (brackets only around one IPv6
 *    literal, no percent-escape, ...);
 *  - field lines: token ":" OWS value OWS; no obs-fold (a line starting
 *    with SP/HTAB), no space before the colon, no control byte but HTAB
 *    in values;
 *  - Host, Content-Length and Transfer-Encoding at most once each (equal
 *    duplicates too); Content-Length 1*DIGIT without sign, list or
 *    overflow (< 2^63); Transfer-Encoding exactly "chunked"
 *    (case-insensitive), not with Content-Length, not in HTTP/1.0; no
 *    body framing on CONNECT but "Content-Length: 0";
 *  - Host required in HTTP/1.1 but for CONNECT; when present with an
 *    absolute- or authority-form target it must name the same normalised
 *    host and port (a Host without port means 80 for http://, 443 for
 *    CONNECT);
 *  - Connection is a token list and may not name Host or Content-Length;
 *  - request-line > max_start_line, header block > max_header_block or
 *    more than max_headers fields: HTTP_TOO_LARGE. */
enum http_result http_parse_request(const char *buf, size_t len,
				    struct http_request *req,
				    const struct http_limits *lim);

/* Parses a response head, with the same line and field rules and the same
 * prefix consistency. Status-line: ("HTTP/1.1" | "HTTP/1.0") SP 3DIGIT
 * (100..599) [SP reason-phrase]. Framing (RFC 9112 §6.3): no body for
 * 1xx, 204, 304 and when @to_head (the request was HEAD); else
 * Transfer-Encoding, a comma list of tokens whose last and only "chunked"
 * is final (e.g. "gzip, chunked"), means chunked; else Content-Length;
 * else until close. Content-Length with Transfer-Encoding, duplicates,
 * a Transfer-Encoding without final chunked, or any Transfer-Encoding in
 * HTTP/1.0: HTTP_BAD (the proxy answers 502). A 1xx head is complete on
 * its own; the caller parses the final response after it. */
enum http_result http_parse_response(const char *buf, size_t len,
				     struct http_response *resp,
				     const struct http_limits *lim,
				     bool to_head);

/* Bytes http_sniff_request() needs at most to answer. */
#define HTTP_SNIFF_MAX 8192

/* Is the start of a byte stream (@len bytes of it) shaped like an HTTP/1.x
 * request line: a method token, a space, and "HTTP/" (any case) later on
 * the first line? For a CONNECT tunnel's first flight: what is shaped so
 * is served as HTTP and parsed strictly (a malformed one is refused, never
 * relayed as another protocol), so the test leans towards HTTP: a token
 * and a space with no end of line within HTTP_SNIFF_MAX bytes counts too.
 * Returns HTTP_OK (HTTP), HTTP_BAD (something else: TLS, SSH, a binary
 * protocol, a text protocol whose first line has no "HTTP/") or
 * HTTP_INCOMPLETE (more bytes are needed; never once @len reaches
 * HTTP_SNIFF_MAX). Prefix-consistent like the parsers. */
enum http_result http_sniff_request(const char *buf, size_t len);

/* Index of the first header at index >= @from whose name equals @name
 * (ASCII case-insensitive), or -1. Iterate all with
 *	for (i = http_header_find(h, n, 0); i >= 0;
 *	     i = http_header_find(h, n, i + 1)) */
int http_header_find(const struct http_headers *hs, const char *name,
		     size_t from);

/* Does @s hold exactly @lit, ASCII case-insensitively? */
bool http_slice_eq_ci(struct http_slice s, const char *lit);

/* Is the field named @name hop-by-hop for a message with headers @hs, so
 * that the proxy must not forward it? True for Connection, Keep-Alive,
 * Proxy-Connection, Proxy-Authorization, Proxy-Authenticate, TE, Trailer,
 * Transfer-Encoding, Upgrade, and any name listed in a Connection header
 * of @hs. Case-insensitive. */
bool http_is_hop_by_hop(const struct http_headers *hs, struct http_slice name);

/* ------------------------------------------------------------------ */
/* Chunked body decoder                                               */
/* ------------------------------------------------------------------ */

/* Keep http_chunked_result_to_string() in sync. */
enum http_chunked_result {
	HTTP_CHUNKED_MORE = 0, /* all of buf consumed; feed more bytes */
	HTTP_CHUNKED_DATA,     /* *data is chunk payload inside buf; feed the
				  rest (buf + *consumed) next */
	HTTP_CHUNKED_DONE,     /* last chunk and trailers consumed; bytes
				  from buf + *consumed on are the next
				  message */
	HTTP_CHUNKED_BAD,      /* malformed or over a limit: st->error */
	HTTP_CHUNKED_RESULT_COUNT
};

const char *http_chunked_result_to_string(enum http_chunked_result r);

/* Decoder state; fields are private to http.c except error and
 * error_offset. */
struct http_chunked {
	int state;
	uint64_t remaining;       /* payload bytes left in this chunk */
	unsigned int digits;      /* hex digits of the current chunk-size */
	size_t line_len;          /* bytes of the current chunk-size line */
	size_t trailer_bytes;     /* bytes of the trailer section so far */
	size_t trailers;          /* trailer fields so far */
	size_t name_len;          /* current trailer field name length */
	char name[20];            /* its first bytes, lowercased */
	uint64_t offset;          /* body bytes consumed so far */
	struct http_limits lim;
	const char *error;        /* static reason once BAD */
	uint64_t error_offset;    /* offset of the offending byte in the
				     body (over all feeds) */
};

/* Starts decoding a chunked body. @lim may be NULL. */
void http_chunked_init(struct http_chunked *st, const struct http_limits *lim);

/* Feeds the next @len body bytes (any split: one byte at a time gives the
 * same outcome as all at once). *consumed receives how many bytes of @buf
 * belong to the body and were consumed; *data (when DATA, else {NULL, 0})
 * is the payload inside buf[0, *consumed), which the caller may inspect.
 * A relay forwards buf[0, *consumed) verbatim: the decoder accepts only
 * the strict grammar, so what it consumed is exactly what any compliant
 * recipient will read as this body. Rules: chunk-size is 1..16 hex digits
 * (no sign, space or "0x"); extensions are ;name[=token|quoted-string]
 * without whitespace; the chunk-size line is at most max_chunk_line bytes;
 * payload is followed by exactly CRLF; trailer fields follow the header
 * field rules, may not be Content-Length, Transfer-Encoding or Host, and
 * are bounded by max_trailer_block and max_headers. DONE and BAD are
 * final: later calls return them again and consume nothing. */
enum http_chunked_result http_chunked_feed(struct http_chunked *st,
					   const char *buf, size_t len,
					   size_t *consumed,
					   struct http_slice *data);

#endif /* AIRLOCK_HTTP_H */
