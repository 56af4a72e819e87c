/* SPDX-License-Identifier: Apache-2.0
 * test_scrub.c - the response scrubber: replacements, leftmost-longest
 * matching, every split of the input giving the one-shot result, what is
 * held back (bounded, released at control bytes, independent of the
 * values' contents), counts, long inputs.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "scrub.h"
#include "tap.h"
#include "util.h"

/* Values and placeholders of the tables: needles[k] for k < nneedles. */
struct set_def {
	const char *values[3];
	const char *placeholders[3];
};

static const struct set_def sets[] = {
	/* 0: one value, a longer placeholder */
	{ { "sk-REAL-1234" }, { "airlock-ph-a-XXXXXXXXXXXXXXXXXXXXXXXX" } },
	/* 1: overlapping values: longest at a position wins, leftmost first */
	{ { "abcd", "bc", "abc" }, { "<ABCD>", "<BC>", "<ABC>" } },
	/* 2: same length as the placeholder */
	{ { "0123456789", "9876543210" }, { "PPPPPPPPPP", "QQQQQQQQQQ" } },
};

static struct scrub_set *make_set(const struct set_def *d)
{
	struct scrub_needle nd[3];
	size_t n = 0;

	while (n < 3 && d->values[n]) {
		nd[n].value = d->values[n];
		nd[n].value_len = strlen(d->values[n]);
		nd[n].placeholder = d->placeholders[n];
		nd[n].placeholder_len = strlen(d->placeholders[n]);
		n++;
	}
	return scrub_set_new(nd, n);
}

struct case_ {
	int set;
	const char *in;
	const char *want;
	uint64_t counts[3];
};

static const struct case_ cases[] = {
	{ 0, "", "", { 0 } },
	{ 0, "nothing here", "nothing here", { 0 } },
	{ 0, "sk-REAL-1234", "airlock-ph-a-XXXXXXXXXXXXXXXXXXXXXXXX", { 1 } },
	{ 0, "{\"key\":\"sk-REAL-1234\",\"again\":\"sk-REAL-1234\"}",
	  "{\"key\":\"airlock-ph-a-XXXXXXXXXXXXXXXXXXXXXXXX\",\"again\":"
	  "\"airlock-ph-a-XXXXXXXXXXXXXXXXXXXXXXXX\"}", { 2 } },
	{ 0, "sk-REAL-1234sk-REAL-1234",
	  "airlock-ph-a-XXXXXXXXXXXXXXXXXXXXXXXXairlock-ph-a-XXXXXXXXXXXXXXXXXXXXXXXX", { 2 } },
	{ 0, "sk-REAL-123", "sk-REAL-123", { 0 } },
	{ 0, "sk-REAL-12345", "airlock-ph-a-XXXXXXXXXXXXXXXXXXXXXXXX5", { 1 } },
	{ 0, "ssk-REAL-1234", "sairlock-ph-a-XXXXXXXXXXXXXXXXXXXXXXXX", { 1 } },
	/* no case folding: another string */
	{ 0, "SK-REAL-1234", "SK-REAL-1234", { 0 } },
	{ 0, "line\nsk-REAL-1234\r\n", "line\nairlock-ph-a-XXXXXXXXXXXXXXXXXXXXXXXX\r\n", { 1 } },
	/* a control byte inside is not the value */
	{ 0, "sk-REAL-\n1234", "sk-REAL-\n1234", { 0 } },
	{ 1, "abcd", "<ABCD>", { 1, 0, 0 } },
	{ 1, "abc", "<ABC>", { 0, 0, 1 } },
	{ 1, "abcabcd", "<ABC><ABCD>", { 1, 0, 1 } },
	{ 1, "xbcx", "x<BC>x", { 0, 1, 0 } },
	{ 1, "aabcdd", "a<ABCD>d", { 1, 0, 0 } },
	{ 1, "bcbcbc", "<BC><BC><BC>", { 0, 3, 0 } },
	{ 1, "ab", "ab", { 0 } },
	{ 2, "x0123456789y9876543210z", "xPPPPPPPPPPyQQQQQQQQQQz", { 1, 1 } },
	{ 2, "01234567899876543210", "PPPPPPPPPPQQQQQQQQQQ", { 1, 1 } },
};

/* @s with control bytes written as escapes, for test names. */
static const char *show(const char *s, char *buf, size_t len)
{
	size_t o = 0;

	for (; *s && o + 5 < len; s++) {
		if ((unsigned char)*s < 0x20)
			o += (size_t)snprintf(buf + o, len - o, "\\x%02x", *s);
		else
			buf[o++] = *s;
	}
	buf[o] = '\0';
	return buf;
}

static bool out_is(const struct scrub_buf *b, const char *want)
{
	return b->len == strlen(want) && (b->len == 0 || memcmp(b->data, want, b->len) == 0);
}

/* Feeds @in cut at @cuts (ascending); checks the hold bound after each
 * feed. Returns the output's equality with @want. */
static bool streamed(struct scrub_set *set, const char *in, const size_t *cuts,
		     size_t ncuts, const char *want, const uint64_t *counts,
		     bool *bounded)
{
	struct scrub *s = scrub_new(set);
	struct scrub_buf out = { 0 };
	size_t len = strlen(in), from = 0, i, k;
	bool ok;

	*bounded = true;
	for (i = 0; i <= ncuts; i++) {
		size_t to = i < ncuts ? cuts[i] : len;

		scrub_feed(s, in + from, to - from, &out);
		if (scrub_held(s) >= scrub_set_max_len(set))
			*bounded = false;
		from = to;
	}
	scrub_finish(s, &out);
	ok = out_is(&out, want) && scrub_held(s) == 0;
	for (k = 0; k < scrub_set_count(set); k++)
		ok = ok && scrub_counts(s)[k] == counts[k];
	scrub_buf_free(&out);
	scrub_free(s);
	return ok;
}

static void test_cases(void)
{
	size_t i;

	for (i = 0; i < ARRAY_SIZE(cases); i++) {
		const struct case_ *c = &cases[i];
		struct scrub_set *set = make_set(&sets[c->set]);
		struct scrub_buf out = { 0 };
		uint64_t counts[3] = { 0 }, total;
		size_t len = strlen(c->in), a, b, k;
		bool all = true, bounded = true, bnd;
		char sin[128], swant[128];

		total = scrub_oneshot(set, c->in, len, &out, counts);
		tap_ok(out_is(&out, c->want), "one-shot '%s' -> '%s'",
		       show(c->in, sin, sizeof(sin)), show(c->want, swant, sizeof(swant)));
		if (!out_is(&out, c->want))
			tap_diag("got '%.*s'", (int)out.len, out.data ? out.data : "");
		for (k = 0; k < 3; k++)
			all = all && counts[k] == c->counts[k];
		tap_ok(all && total == c->counts[0] + c->counts[1] + c->counts[2],
		       "  counts per value");
		scrub_buf_free(&out);

		all = streamed(set, c->in, &len, 0, c->want, c->counts, &bnd);
		bounded = bounded && bnd;
		for (a = 0; a <= len; a++) {
			all = all && streamed(set, c->in, &a, 1, c->want, c->counts, &bnd);
			bounded = bounded && bnd;
			for (b = a; b <= len; b++) {
				size_t two[2] = { a, b };

				all = all && streamed(set, c->in, two, 2, c->want, c->counts, &bnd);
				bounded = bounded && bnd;
			}
		}
		if (len > 1) {
			size_t *every = util_xcalloc(len - 1, sizeof(*every));

			for (a = 0; a + 1 < len; a++)
				every[a] = a + 1;
			all = all && streamed(set, c->in, every, len - 1, c->want, c->counts, &bnd);
			bounded = bounded && bnd;
			free(every);
		}
		tap_ok(all, "  the same for every split in one, two and three pieces, "
			    "and byte by byte");
		tap_ok(bounded, "  never more than the longest value - 1 held back");
		scrub_set_free(set);
	}
}

static void test_hold(void)
{
	struct scrub_set *a = make_set(&sets[0]);
	/* the same lengths as set 0, other contents */
	static const struct set_def other = { { "zz-ZZZZ-9999" },
					      { "airlock-ph-a-YYYYYYYYYYYYYYYYYYYYYYYY" } };
	struct scrub_set *b = make_set(&other);
	struct scrub *sa = scrub_new(a), *sb = scrub_new(b);
	struct scrub_buf out = { 0 };

	scrub_feed(sa, "data: hello\n\n", 13, &out);
	tap_ok(scrub_held(sa) == 0 && out_is(&out, "data: hello\n\n"),
	       "a read ending in a newline is released whole (SSE)");
	out.len = 0;
	scrub_feed(sa, "data: sk-REAL-12", 16, &out);
	tap_is_int(scrub_held(sa), 11, "a read without a control byte holds its last "
				       "max - 1 bytes");
	tap_ok(out_is(&out, "data:"), "  and releases the rest");
	scrub_feed(sb, "data: sk-REAL-12", 16, &out);
	tap_is_int(scrub_held(sb), scrub_held(sa),
		   "what is held depends on the values' lengths, not their contents");
	out.len = 0;
	scrub_feed(sa, "34\n", 3, &out);
	tap_ok(scrub_held(sa) == 0 &&
		       out_is(&out, " airlock-ph-a-XXXXXXXXXXXXXXXXXXXXXXXX\n"),
	       "the value completed by the next read is replaced");
	out.len = 0;
	scrub_feed(sa, "ab\tsk-R", 7, &out);
	tap_ok(scrub_held(sa) == 4 && out_is(&out, "ab\t"),
	       "held bytes start after the last control byte");
	scrub_finish(sa, &out);
	tap_ok(scrub_held(sa) == 0 && out_is(&out, "ab\tsk-R"), "finish releases them");
	scrub_buf_free(&out);
	scrub_free(sa);
	scrub_free(sb);
	scrub_set_free(a);
	scrub_set_free(b);
}

static void test_lengths(void)
{
	struct scrub_set *a = make_set(&sets[0]), *c = make_set(&sets[2]);

	tap_ok(!scrub_set_keeps_length(a), "a longer placeholder changes the length");
	tap_ok(scrub_set_keeps_length(c), "placeholders as long as their values keep it");
	tap_is_int(scrub_set_max_len(a), 12, "the longest value");
	scrub_set_free(a);
	scrub_set_free(c);
}

/* Values placed across the internal pieces (16 KiB) and across reads of
 * odd sizes, in a 200 KB body. */
static void test_long(void)
{
	static const size_t at[] = { 0, 16376, 16390, 32766, 50000, 131070, 199988 };
	static const size_t reads[] = { 1, 7, 4096, 16384, 16385, 65536, 200000 };
	struct scrub_set *set = make_set(&sets[0]);
	const size_t n = 200000, vlen = 12;
	char *in = util_xmalloc(n), *want;
	struct scrub_buf ref = { 0 };
	size_t i, r, wn = 0;
	bool all = true;

	for (i = 0; i < n; i++)
		in[i] = (char)('a' + i % 26);
	for (i = 0; i < ARRAY_SIZE(at); i++)
		memcpy(in + at[i], "sk-REAL-1234", vlen);
	/* the expected output, built by hand */
	want = util_xmalloc(n + ARRAY_SIZE(at) * 64);
	for (i = 0; i < n;) {
		size_t k;
		bool hit = false;

		for (k = 0; k < ARRAY_SIZE(at); k++)
			hit = hit || at[k] == i;
		if (hit) {
			memcpy(want + wn, "airlock-ph-a-XXXXXXXXXXXXXXXXXXXXXXXX", 37);
			wn += 37;
			i += vlen;
		} else {
			want[wn++] = in[i++];
		}
	}
	tap_is_int(scrub_oneshot(set, in, n, &ref, NULL), ARRAY_SIZE(at),
		   "a 200 KB body: every value found");
	tap_ok(ref.len == wn && memcmp(ref.data, want, wn) == 0, "  and replaced");
	for (r = 0; r < ARRAY_SIZE(reads); r++) {
		struct scrub *s = scrub_new(set);
		struct scrub_buf out = { 0 };

		for (i = 0; i < n; i += reads[r])
			scrub_feed(s, in + i, n - i < reads[r] ? n - i : reads[r], &out);
		scrub_finish(s, &out);
		all = all && out.len == wn && memcmp(out.data, want, wn) == 0 &&
		      scrub_counts(s)[0] == ARRAY_SIZE(at);
		scrub_buf_free(&out);
		scrub_free(s);
	}
	tap_ok(all, "  the same in reads of 1, 7, 4096, 16384, 16385, 65536 bytes");
	scrub_buf_free(&ref);
	free(want);
	free(in);
	scrub_set_free(set);
}

int main(void)
{
	test_cases();
	test_hold();
	test_lengths();
	test_long();
	return tap_done();
}
