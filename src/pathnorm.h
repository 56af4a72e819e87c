/* SPDX-License-Identifier: Apache-2.0
 * pathnorm.h - the one reading of a URL path that every path rule of the
 * proxy uses: the git binding's smart-HTTP paths (git.hosts), its REST
 * binding (git.api_hosts, git.api_allow, git.api_admin) and the secrets'
 * `paths` (subst.c). A rule decides on what pathnorm_parse() gives it,
 * never on the raw bytes, so two rules cannot read one path two ways.
 *
 * The normaliser refuses instead of repairing. Whatever a server, a
 * framework or a proxy in between could read as another path is an error:
 *  - a byte outside RFC 3986's path characters, NUL, control and raw
 *    non-ASCII bytes, a backslash;
 *  - a ';' (a path parameter: "..;" is ".." to Java servers), raw or
 *    escaped;
 *  - a segment made of dots only (".", "..", "...": Windows servers read
 *    "..." as ".."), or of dots and spaces ("..%20": they trim those);
 *  - percent-escapes that are malformed or stand for '/', '\\', '.', '%'
 *    (double encoding), ';', '?', '#', NUL or a control byte, and escapes
 *    that do not decode to well-formed UTF-8 (an overlong '/');
 *  - an empty segment ("//"), unless the caller asks for empty segments to
 *    be dropped (smart-HTTP paths, which git clients send with "//");
 *  - a path that does not start with '/', or is too long.
 * Every other escape (a space, a non-ASCII letter, an escaped letter) is
 * decoded: rules compare decoded segments, which is what a decoding server
 * reads, and may still ask whether a segment was escaped at all.
 *
 * Pure: no I/O, no allocation. Table-tested in tests/unit/test_pathnorm.c,
 * fuzzed by tests/fuzz/fuzz_pathnorm.c.
 */
#ifndef AIRLOCK_PATHNORM_H
#define AIRLOCK_PATHNORM_H

#include <stdbool.h>
#include <stddef.h>

/* Longest path (without its query) the normaliser reads; callers may ask
 * for less. */
#define PATHNORM_MAX 8192
/* Segments of a path (after empty ones are dropped, when they are). */
#define PATHNORM_SEGMENTS_MAX 256

/* Flags of pathnorm_parse(). */
#define PATHNORM_ESCAPES 1u      /* decode the percent-escapes that are safe
				    (without it, every '%' is refused) */
#define PATHNORM_DROP_EMPTY 2u   /* drop empty segments ("//", a trailing
				    '/') instead of refusing "//" */

/* Keep pathnorm_error_to_string() and pathnorm_error_reason() in sync
 * (static_assert). */
enum pathnorm_error {
	PATHNORM_OK = 0,
	PATHNORM_NOT_ABSOLUTE,     /* "relative": no leading '/' */
	PATHNORM_TOO_LONG,         /* "too-long" */
	PATHNORM_TOO_MANY_SEGMENTS, /* "segments" */
	PATHNORM_NUL,              /* "nul": a NUL byte, raw or %00 */
	PATHNORM_CONTROL,          /* "control": a control byte, raw or escaped */
	PATHNORM_NON_ASCII,        /* "non-ascii": a raw byte >= 0x80 */
	PATHNORM_BACKSLASH,        /* "backslash": '\\' */
	PATHNORM_PARAMETER,        /* "parameter": ';', raw or %3B */
	PATHNORM_BYTE,             /* "byte": another byte no URL path holds */
	PATHNORM_ESCAPE,           /* "escape": a '%' where none is read */
	PATHNORM_BAD_ESCAPE,       /* "bad-escape": '%' without two hex digits */
	PATHNORM_ENCODED_SLASH,    /* "encoded-slash": %2F, %5C */
	PATHNORM_ENCODED_DOT,      /* "encoded-dot": %2E */
	PATHNORM_ENCODED_DELIM,    /* "encoded-delimiter": %25, %3F, %23 */
	PATHNORM_UTF8,             /* "utf8": escapes that are not UTF-8 */
	PATHNORM_DOT_SEGMENT,      /* "dot-segment": ".", "..", "...", ".. " */
	PATHNORM_EMPTY_SEGMENT,    /* "empty-segment": "//" */
	PATHNORM_ERROR_COUNT
};

/* A short id ("encoded-dot"), and a reason phrase ("the path has a '.' or
 * '..' segment"): one line of printable ASCII each. */
const char *pathnorm_error_to_string(enum pathnorm_error e);
const char *pathnorm_error_reason(enum pathnorm_error e);

struct pathnorm_seg {
	size_t off, len;         /* the decoded segment in pathnorm.path */
	size_t raw_off, raw_len; /* the segment as written, in the input */
	bool escaped;            /* it held a percent-escape */
};

/* A path as rules read it. */
struct pathnorm {
	/* "/" + the decoded segments joined by '/', + "/" when the path
	 * ended in '/' (unless PATHNORM_DROP_EMPTY); "/" for no segment.
	 * NUL-terminated, no NUL inside; may hold UTF-8. */
	char path[PATHNORM_MAX + 1];
	size_t len;
	struct pathnorm_seg seg[PATHNORM_SEGMENTS_MAX];
	int nseg;
	bool trailing_slash; /* the path ended in '/' (after a segment) */
	bool escaped;        /* some segment held a percent-escape */
};

/* Reads @len bytes of @raw (the path of a request-target, from its '/' up
 * to its '?'; not NUL-terminated, may hold any byte), at most @max bytes
 * (<= PATHNORM_MAX), as @flags say, into @out. Returns PATHNORM_OK, or the
 * first reason it refuses the path (then @out is unspecified). */
enum pathnorm_error pathnorm_parse(const char *raw, size_t len, size_t max,
				   unsigned int flags, struct pathnorm *out);

/* Is segment @i of @n the literal @lit (exactly, or ignoring ASCII case)? */
bool pathnorm_seg_is(const struct pathnorm *n, int i, const char *lit);
bool pathnorm_seg_is_ci(const struct pathnorm *n, int i, const char *lit);

/* Does @n's normal path start with @prefix (a path from the policy, which
 * starts with '/')? Byte-wise when @whole_segments is false ("/v1/" covers
 * "/v1/x"; "/v1" covers "/v1x"), else by whole segments ("/graphql" covers
 * "/graphql" and "/graphql/x", not "/graphqlx"; a trailing '/' of @prefix
 * is ignored then). */
bool pathnorm_under(const struct pathnorm *n, const char *prefix, bool whole_segments);

#endif /* AIRLOCK_PATHNORM_H */
