/* SPDX-License-Identifier: Apache-2.0
 * fuzz_scrub.c - libFuzzer target for scrub.c, the response scrubber.
 *
 * The input makes one to three values (of 1 to 20 characters from "abc",
 * or printable bytes, so that they occur often), their placeholders, and
 * a stream (bytes below 0x80 folded onto "abc\n", others kept: control
 * and high bytes appear too), then cut points.
 *
 * Invariants, each checked with abort() so that libFuzzer reports it:
 *  - scrub_oneshot() of the whole stream equals a reference written here
 *    (leftmost match, longest at a position, first of equally long ones,
 *    no overlaps), and so do its counts;
 *  - feeding the stream in two, three or four pieces cut where the input
 *    says, and byte by byte, gives the same output and counts;
 *  - after every feed fewer than the longest value's length are held, and
 *    none when the piece ends with a control byte; none after finish;
 *  - a stream may be reused after finish and gives the same result again.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "scrub.h"

#define MAXN 3

struct ref_needle {
	char value[24];
	size_t vlen;
	char ph[24];
	size_t plen;
};

static bool is_control(unsigned char c)
{
	return c < 0x20 || c == 0x7f;
}

/* The reference: the obvious quadratic replace. */
static size_t reference(const struct ref_needle *nd, size_t n, const char *in,
			size_t len, char *out, uint64_t *counts)
{
	size_t i = 0, o = 0, k;

	while (i < len) {
		size_t best = n;

		for (k = 0; k < n; k++)
			if (len - i >= nd[k].vlen && memcmp(in + i, nd[k].value, nd[k].vlen) == 0 &&
			    (best == n || nd[k].vlen > nd[best].vlen))
				best = k;
		if (best < n) {
			memcpy(out + o, nd[best].ph, nd[best].plen);
			o += nd[best].plen;
			i += nd[best].vlen;
			counts[best]++;
		} else {
			out[o++] = in[i++];
		}
	}
	return o;
}

static void run(struct scrub *s, const struct scrub_set *set, const char *in, size_t len,
		const size_t *cuts, size_t ncuts, struct scrub_buf *out)
{
	size_t from = 0, i;

	for (i = 0; i <= ncuts; i++) {
		size_t to = i < ncuts ? cuts[i] : len;

		scrub_feed(s, in + from, to - from, out);
		CHECK(scrub_held(s) < scrub_set_max_len(set));
		if (to > from && is_control((unsigned char)in[to - 1]))
			CHECK(scrub_held(s) == 0);
		from = to;
	}
	scrub_finish(s, out);
	CHECK(scrub_held(s) == 0);
}

static int cmp_size(const void *a, const void *b)
{
	size_t x = *(const size_t *)a, y = *(const size_t *)b;

	return x < y ? -1 : x > y;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct ref_needle nd[MAXN];
	struct scrub_needle sn[MAXN];
	struct scrub_set *set;
	struct scrub_buf one = { 0 };
	uint64_t rc[MAXN] = { 0 }, oc[MAXN] = { 0 };
	size_t n, p = 0, k, j, len, rlen, ncuts, i;
	size_t cuts[3];
	char *in, *ref;

	if (size < 2)
		return 0;
	n = 1 + data[p++] % MAXN;
	for (k = 0; k < n; k++) {
		bool printable = p < size && (data[p] & 0x80);

		nd[k].vlen = p < size ? 1 + data[p++] % 20 : 1;
		for (j = 0; j < nd[k].vlen; j++) {
			uint8_t b = p < size ? data[p++] : 0;

			nd[k].value[j] = printable ? (char)(0x20 + b % 0x5f) : (char)('a' + b % 3);
			CHECK(!is_control((unsigned char)nd[k].value[j]));
		}
		nd[k].plen = p < size ? data[p++] % 24 : 0;
		for (j = 0; j < nd[k].plen; j++)
			nd[k].ph[j] = (char)('P' + k + (j % 2));
		sn[k].value = nd[k].value;
		sn[k].value_len = nd[k].vlen;
		sn[k].placeholder = nd[k].ph;
		sn[k].placeholder_len = nd[k].plen;
	}
	if (p + 3 > size)
		return 0;
	ncuts = 3;
	for (i = 0; i < ncuts; i++)
		cuts[i] = data[p++];
	len = size - p;
	in = malloc(len ? len : 1);
	CHECK(in != NULL);
	for (i = 0; i < len; i++) {
		uint8_t b = data[p + i];

		in[i] = b < 0x80 ? "abc\n"[b % 4] : (char)b;
	}
	for (i = 0; i < ncuts; i++)
		cuts[i] = len ? cuts[i] * 131 % (len + 1) : 0;
	qsort(cuts, ncuts, sizeof(cuts[0]), cmp_size);

	/* every placeholder is at most 24 bytes for a value of at least 1 */
	ref = malloc(len * 24 + 1);
	CHECK(ref != NULL);
	rlen = reference(nd, n, in, len, ref, rc);

	set = scrub_set_new(sn, n);
	scrub_oneshot(set, in, len, &one, oc);
	CHECK(one.len == rlen && (rlen == 0 || memcmp(one.data, ref, rlen) == 0));
	for (k = 0; k < n; k++)
		CHECK(oc[k] == rc[k]);

	for (i = 0; i <= ncuts + 1; i++) {
		struct scrub *s = scrub_new(set);
		struct scrub_buf out = { 0 };
		int round;

		for (round = 0; round < 2; round++) {
			out.len = 0;
			if (i <= ncuts) {
				run(s, set, in, len, cuts, i, &out);
			} else if (len <= 512) {
				size_t every[512];

				for (j = 0; j + 1 < len; j++)
					every[j] = j + 1;
				run(s, set, in, len, every, len ? len - 1 : 0, &out);
			} else {
				run(s, set, in, len, NULL, 0, &out);
			}
			CHECK(out.len == rlen && (rlen == 0 || memcmp(out.data, ref, rlen) == 0));
			for (k = 0; k < n; k++)
				CHECK(scrub_counts(s)[k] == rc[k] * (uint64_t)(round + 1));
		}
		scrub_buf_free(&out);
		scrub_free(s);
	}
	scrub_set_free(set);
	scrub_buf_free(&one);
	free(ref);
	free(in);
	return 0;
}
