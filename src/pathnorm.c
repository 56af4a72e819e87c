/* SPDX-License-Identifier: Apache-2.0
 * pathnorm.c - the one URL path normaliser of the proxy's path rules.
 *
 * DOC: Theory of Operation
 *
 * A path rule binds something (a credential, a repository, a secret) to a
 * path. It holds only if the proxy and every server behind it read the
 * path the same way, and servers disagree: Tomcat and Jetty strip ";..."
 * parameters before resolving "..", so "/a/..;/b" is "/b" there and an
 * opaque segment "..;" here; IIS drops trailing dots ("..." is ".."); some
 * servers decode "%2F" into a separator, some twice ("%252e" is "."),
 * some turn '\\' into '/'; decoders of old accept overlong UTF-8
 * ("%C0%AF" is '/'). No rule can know which reading a given upstream
 * makes, so the normaliser refuses every path on which two readings could
 * differ, and decodes only escapes that cannot change the path's
 * structure under any of them (a space, a letter, a well-formed non-ASCII
 * character). Rules then compare decoded segments: what the normaliser
 * gives is what a decoding server reads, and a server that does not
 * decode reads a name that no rule allowed by mistake, only one that it
 * allowed under another spelling.
 *
 * Nothing is resolved: ".." is refused, never applied, since applying it
 * is exactly the reading that differs between servers.
 */
#include "pathnorm.h"

#include <assert.h>
#include <string.h>
#include <strings.h>

#include "util.h"

static const char *const error_names[] = {
	[PATHNORM_OK] = "ok",
	[PATHNORM_NOT_ABSOLUTE] = "relative",
	[PATHNORM_TOO_LONG] = "too-long",
	[PATHNORM_TOO_MANY_SEGMENTS] = "segments",
	[PATHNORM_NUL] = "nul",
	[PATHNORM_CONTROL] = "control",
	[PATHNORM_NON_ASCII] = "non-ascii",
	[PATHNORM_BACKSLASH] = "backslash",
	[PATHNORM_PARAMETER] = "parameter",
	[PATHNORM_BYTE] = "byte",
	[PATHNORM_ESCAPE] = "escape",
	[PATHNORM_BAD_ESCAPE] = "bad-escape",
	[PATHNORM_ENCODED_SLASH] = "encoded-slash",
	[PATHNORM_ENCODED_DOT] = "encoded-dot",
	[PATHNORM_ENCODED_DELIM] = "encoded-delimiter",
	[PATHNORM_UTF8] = "utf8",
	[PATHNORM_DOT_SEGMENT] = "dot-segment",
	[PATHNORM_EMPTY_SEGMENT] = "empty-segment",
};
static_assert(ARRAY_SIZE(error_names) == PATHNORM_ERROR_COUNT, "error_names");

static const char *const error_reasons[] = {
	[PATHNORM_OK] = "the path is unambiguous",
	[PATHNORM_NOT_ABSOLUTE] = "the path does not start with '/'",
	[PATHNORM_TOO_LONG] = "the path is too long",
	[PATHNORM_TOO_MANY_SEGMENTS] = "the path has too many segments",
	[PATHNORM_NUL] = "the path holds a NUL byte",
	[PATHNORM_CONTROL] = "the path holds a control byte",
	[PATHNORM_NON_ASCII] = "the path holds a non-ASCII byte",
	[PATHNORM_BACKSLASH] = "the path holds a backslash",
	[PATHNORM_PARAMETER] = "the path holds a ';' parameter (\"..;\" is \"..\" to some servers)",
	[PATHNORM_BYTE] = "the path holds a byte no URL path holds",
	[PATHNORM_ESCAPE] = "the path holds a percent-escape",
	[PATHNORM_BAD_ESCAPE] = "the path holds a malformed percent-escape",
	[PATHNORM_ENCODED_SLASH] = "the path holds %2F or %5C, a separator once decoded",
	[PATHNORM_ENCODED_DOT] = "the path holds %2E, a dot once decoded",
	[PATHNORM_ENCODED_DELIM] = "the path holds %25, %3F or %23, which could change the path once decoded",
	[PATHNORM_UTF8] = "the path's escapes are not well-formed UTF-8",
	[PATHNORM_DOT_SEGMENT] = "the path has a \".\" or \"..\" segment (or one of dots only)",
	[PATHNORM_EMPTY_SEGMENT] = "the path has an empty segment (\"//\")",
};
static_assert(ARRAY_SIZE(error_reasons) == PATHNORM_ERROR_COUNT, "error_reasons");

const char *pathnorm_error_to_string(enum pathnorm_error e)
{
	return (unsigned int)e < PATHNORM_ERROR_COUNT ? error_names[e] : "?";
}

const char *pathnorm_error_reason(enum pathnorm_error e)
{
	return (unsigned int)e < PATHNORM_ERROR_COUNT ? error_reasons[e] : "?";
}

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* Why raw byte @c may not be in a path (PATHNORM_OK if it may): RFC 3986
 * pchar and '/', less ';'. '%' is the caller's. */
static enum pathnorm_error raw_byte(unsigned char c)
{
	if (c == 0)
		return PATHNORM_NUL;
	if (c < 0x20 || c == 0x7f)
		return PATHNORM_CONTROL;
	if (c >= 0x80)
		return PATHNORM_NON_ASCII;
	if (c == '\\')
		return PATHNORM_BACKSLASH;
	if (c == ';')
		return PATHNORM_PARAMETER;
	if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	    strchr("-._~!$&'()*+,=:@/", c))
		return PATHNORM_OK;
	return PATHNORM_BYTE;
}

/* Why the escaped byte @d may not be decoded (PATHNORM_OK if it may). */
static enum pathnorm_error escaped_byte(unsigned char d)
{
	if (d == 0)
		return PATHNORM_NUL;
	if (d < 0x20 || d == 0x7f)
		return PATHNORM_CONTROL;
	if (d == '/' || d == '\\')
		return PATHNORM_ENCODED_SLASH;
	if (d == '.')
		return PATHNORM_ENCODED_DOT;
	if (d == ';')
		return PATHNORM_PARAMETER;
	if (d == '%' || d == '?' || d == '#')
		return PATHNORM_ENCODED_DELIM;
	return PATHNORM_OK;
}

/* Is @s (@n bytes) well-formed UTF-8: no overlong form, no surrogate,
 * nothing above U+10FFFF? */
static bool utf8_valid(const unsigned char *s, size_t n)
{
	size_t i = 0;

	while (i < n) {
		unsigned char c = s[i];
		size_t k, len;
		unsigned int cp;

		if (c < 0x80) {
			i++;
			continue;
		}
		if (c >= 0xc2 && c <= 0xdf) {
			len = 2;
			cp = c & 0x1f;
		} else if (c >= 0xe0 && c <= 0xef) {
			len = 3;
			cp = c & 0x0f;
		} else if (c >= 0xf0 && c <= 0xf4) {
			len = 4;
			cp = c & 0x07;
		} else {
			return false;
		}
		if (n - i < len)
			return false;
		for (k = 1; k < len; k++) {
			if ((s[i + k] & 0xc0) != 0x80)
				return false;
			cp = (cp << 6) | (s[i + k] & 0x3f);
		}
		if ((len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
		    (cp >= 0xd800 && cp <= 0xdfff))
			return false;
		i += len;
	}
	return true;
}

/* Ends the segment being read (its decoded bytes are out->path[start..]):
 * checks it and records it, or drops it when empty. */
static enum pathnorm_error end_segment(struct pathnorm *out, size_t start, size_t raw_off,
				       size_t raw_len, bool escaped, unsigned int flags,
				       bool last)
{
	const char *s = out->path + start;
	size_t n = out->len - start, i;
	struct pathnorm_seg *g;

	if (n == 0) {
		/* the '/' written before it is taken back */
		out->len = start - 1;
		if (last) {
			if (out->nseg > 0 && !(flags & PATHNORM_DROP_EMPTY))
				out->trailing_slash = true;
			return PATHNORM_OK;
		}
		return (flags & PATHNORM_DROP_EMPTY) ? PATHNORM_OK : PATHNORM_EMPTY_SEGMENT;
	}
	/* ".", "..", and what some server trims into one ("...", ".. ") */
	for (i = 0; i < n && (s[i] == '.' || s[i] == ' '); i++)
		;
	if (i == n && memchr(s, '.', n))
		return PATHNORM_DOT_SEGMENT;
	if (escaped && !utf8_valid((const unsigned char *)s, n))
		return PATHNORM_UTF8;
	if (out->nseg == PATHNORM_SEGMENTS_MAX)
		return PATHNORM_TOO_MANY_SEGMENTS;
	g = &out->seg[out->nseg++];
	g->off = start;
	g->len = n;
	g->raw_off = raw_off;
	g->raw_len = raw_len;
	g->escaped = escaped;
	out->escaped |= escaped;
	return PATHNORM_OK;
}

enum pathnorm_error pathnorm_parse(const char *raw, size_t len, size_t max,
				   unsigned int flags, struct pathnorm *out)
{
	size_t i = 1, seg_raw = 1, seg_start;
	bool escaped = false;
	enum pathnorm_error e;

	ASSERT(max <= PATHNORM_MAX);
	out->len = 0;
	out->nseg = 0;
	out->trailing_slash = false;
	out->escaped = false;
	out->path[0] = '\0';
	if (len == 0 || raw[0] != '/')
		return PATHNORM_NOT_ABSOLUTE;
	if (len > max)
		return PATHNORM_TOO_LONG;
	/* Decoding only shortens: out->path never holds more than @len
	 * bytes, and len <= PATHNORM_MAX. */
	out->path[out->len++] = '/';
	seg_start = out->len;
	for (;;) {
		unsigned char c;
		int hi, lo;

		if (i == len || raw[i] == '/') {
			e = end_segment(out, seg_start, seg_raw, i - seg_raw, escaped, flags,
					i == len);
			if (e != PATHNORM_OK)
				return e;
			if (i == len)
				break;
			out->path[out->len++] = '/';
			seg_start = out->len;
			seg_raw = ++i;
			escaped = false;
			continue;
		}
		c = (unsigned char)raw[i];
		if (c != '%') {
			e = raw_byte(c);
			if (e != PATHNORM_OK)
				return e;
			out->path[out->len++] = (char)c;
			i++;
			continue;
		}
		if (!(flags & PATHNORM_ESCAPES))
			return PATHNORM_ESCAPE;
		hi = len - i > 2 ? hexval(raw[i + 1]) : -1;
		lo = len - i > 2 ? hexval(raw[i + 2]) : -1;
		if (hi < 0 || lo < 0)
			return PATHNORM_BAD_ESCAPE;
		e = escaped_byte((unsigned char)(hi * 16 + lo));
		if (e != PATHNORM_OK)
			return e;
		out->path[out->len++] = (char)(hi * 16 + lo);
		escaped = true;
		i += 3;
	}
	/* the root, or the trailing '/' that was kept */
	if (out->len == 0 || out->trailing_slash)
		out->path[out->len++] = '/';
	out->path[out->len] = '\0';
	return PATHNORM_OK;
}

bool pathnorm_seg_is(const struct pathnorm *n, int i, const char *lit)
{
	size_t k = strlen(lit);

	return i >= 0 && i < n->nseg && n->seg[i].len == k &&
	       memcmp(n->path + n->seg[i].off, lit, k) == 0;
}

bool pathnorm_seg_is_ci(const struct pathnorm *n, int i, const char *lit)
{
	size_t k = strlen(lit);

	return i >= 0 && i < n->nseg && n->seg[i].len == k &&
	       strncasecmp(n->path + n->seg[i].off, lit, k) == 0;
}

bool pathnorm_under(const struct pathnorm *n, const char *prefix, bool whole_segments)
{
	size_t k = strlen(prefix);

	if (whole_segments && k > 1 && prefix[k - 1] == '/')
		k--;
	if (n->len < k || memcmp(n->path, prefix, k) != 0)
		return false;
	if (!whole_segments || (k == 1 && prefix[0] == '/'))
		return true;
	return n->len == k || n->path[k] == '/';
}
