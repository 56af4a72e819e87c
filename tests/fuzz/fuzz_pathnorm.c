/* SPDX-License-Identifier: Apache-2.0
 * fuzz_pathnorm.c - libFuzzer target for pathnorm.c, the one path
 * normaliser of every path rule.
 *
 * Input layout: one byte of flags (its low two bits: PATHNORM_ESCAPES,
 * PATHNORM_DROP_EMPTY), then the path.
 *
 * Invariants (abort() on failure, so libFuzzer keeps the input):
 *  - reading the same path twice gives the same answer;
 *  - a path that is read starts with '/', and so does its normal form,
 *    which holds no NUL, no "//", is no longer than the input, and whose
 *    segments are the ones listed: none empty, none of dots (and spaces)
 *    only, none holding '/', '\\', ';', a control byte or NUL, every one
 *    well-formed UTF-8;
 *  - the input of a path that is read holds no ';', no '\\', no %2E, %2F,
 *    %5C, %25, %3B (any case), no control byte, and no '%' at all without
 *    PATHNORM_ESCAPES;
 *  - a normal form without escapes is a fixed point;
 *  - subst_path_under() (the secrets' paths) refuses every path the
 *    normaliser refuses.
 */
#include <string.h>
#include <strings.h>

#include "fuzz.h"
#include "pathnorm.h"
#include "subst.h"

static bool has_ci(const char *p, size_t n, const char *needle)
{
	size_t k = strlen(needle), i;

	for (i = 0; i + k <= n; i++)
		if (strncasecmp(p + i, needle, k) == 0)
			return true;
	return false;
}

static bool utf8_ok(const unsigned char *s, size_t n)
{
	size_t i = 0;

	while (i < n) {
		size_t len, k;
		unsigned int cp;

		if (s[i] < 0x80) {
			i++;
			continue;
		}
		if (s[i] >= 0xc2 && s[i] <= 0xdf)
			len = 2, cp = s[i] & 0x1f;
		else if (s[i] >= 0xe0 && s[i] <= 0xef)
			len = 3, cp = s[i] & 0x0f;
		else if (s[i] >= 0xf0 && s[i] <= 0xf4)
			len = 4, cp = s[i] & 0x07;
		else
			return false;
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

static struct pathnorm a, b;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *path = (const char *)data + 1;
	unsigned int flags;
	enum pathnorm_error e, e2;
	size_t n, i, at;
	int k;

	if (size < 1)
		return 0;
	flags = data[0] & 3u;
	n = size - 1;
	if (n > PATHNORM_MAX + 16)
		n = PATHNORM_MAX + 16;
	e = pathnorm_parse(path, n, PATHNORM_MAX, flags, &a);
	e2 = pathnorm_parse(path, n, PATHNORM_MAX, flags, &b);
	CHECK(e == e2);
	CHECK((unsigned int)e < PATHNORM_ERROR_COUNT);
	CHECK(strcmp(pathnorm_error_reason(e), "?") != 0);
	if (e != PATHNORM_OK) {
		if (flags & PATHNORM_ESCAPES)
			CHECK(!subst_path_under(path, n, "/"));
		return 0;
	}
	CHECK(a.len == b.len && memcmp(a.path, b.path, a.len) == 0 && a.nseg == b.nseg);

	/* the input */
	CHECK(n >= 1 && path[0] == '/' && n <= PATHNORM_MAX);
	CHECK(!memchr(path, ';', n) && !memchr(path, '\\', n));
	CHECK(!has_ci(path, n, "%2e") && !has_ci(path, n, "%2f") && !has_ci(path, n, "%5c") &&
	      !has_ci(path, n, "%25") && !has_ci(path, n, "%3b"));
	for (i = 0; i < n; i++)
		CHECK((unsigned char)path[i] > 0x20 && (unsigned char)path[i] < 0x7f);
	if (!(flags & PATHNORM_ESCAPES))
		CHECK(!memchr(path, '%', n));
	if (!(flags & PATHNORM_DROP_EMPTY))
		CHECK(!memmem(path, n, "//", 2));

	/* the normal form */
	CHECK(a.len >= 1 && a.len <= n && a.path[0] == '/' && a.path[a.len] == '\0');
	CHECK(strlen(a.path) == a.len);
	CHECK(!memmem(a.path, a.len, "//", 2));
	CHECK(a.nseg >= 0 && a.nseg <= PATHNORM_SEGMENTS_MAX);
	CHECK(utf8_ok((const unsigned char *)a.path, a.len));
	at = 1;
	for (k = 0; k < a.nseg; k++) {
		const struct pathnorm_seg *s = &a.seg[k];
		const char *p = a.path + s->off;
		bool dots = true;

		CHECK(s->off == at && s->len > 0 && s->off + s->len <= a.len);
		CHECK(s->raw_off + s->raw_len <= n && s->raw_len >= s->len);
		for (i = 0; i < s->len; i++) {
			unsigned char c = (unsigned char)p[i];

			CHECK(c != '/' && c != '\\' && c != ';' && c >= 0x20 && c != 0x7f);
			if (c != '.' && c != ' ')
				dots = false;
		}
		CHECK(!dots || !memchr(p, '.', s->len));
		if (!s->escaped)
			CHECK(s->raw_len == s->len && memcmp(path + s->raw_off, p, s->len) == 0);
		at = s->off + s->len + 1;
	}
	CHECK(a.nseg == 0 ? a.len == 1 : (a.len == at - 1 || (a.trailing_slash && a.len == at)));

	/* a fixed point */
	if (!a.escaped) {
		CHECK(pathnorm_parse(a.path, a.len, PATHNORM_MAX, flags, &b) == PATHNORM_OK);
		CHECK(b.len == a.len && memcmp(a.path, b.path, a.len) == 0);
	}
	return 0;
}
