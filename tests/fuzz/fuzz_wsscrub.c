/* SPDX-License-Identifier: Apache-2.0
 * fuzz_wsscrub.c - libFuzzer target for wsscrub.c, the scrubber of an
 * upstream's WebSocket frames.
 *
 * The input's first byte makes a value (16 to 23 characters of "abc", so
 * that it occurs often) and chooses its placeholder's length (characters
 * of "XYZ", none of the value's); the second a cut point; the rest is the
 * upstream's byte stream (frames, or anything).
 *
 * Invariants, each checked with abort() so that libFuzzer reports it:
 *  - whatever the stream, the output is well-formed frames: unmasked, no
 *    RSV bit, a known opcode, control frames whole and at most 125 bytes,
 *    continuations only inside a message;
 *  - no message's payload (reassembled from its frames) and no control
 *    frame's payload holds the value: no registered value in the output,
 *    whatever the input;
 *  - the stream fed in two pieces (cut where the input says) gives the
 *    same verdict as fed at once, and, when accepted, the same messages
 *    and control frames to the client (the fragments may differ: a frame
 *    over 1 MiB is relayed as it comes).
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "scrub.h"
#include "wsscrub.h"

static void canon_append(struct scrub_buf *b, const void *p, size_t n)
{
	if (b->cap - b->len < n + 1) {
		size_t cap = b->cap ? b->cap : 64;

		while (cap - b->len < n + 1)
			cap *= 2;
		b->data = realloc(b->data, cap);
		CHECK(b->data);
		b->cap = cap;
	}
	if (n)
		memcpy(b->data + b->len, p, n);
	b->len += n;
}

static int run(const struct scrub_set *set, const uint8_t *d, size_t n, size_t cut,
	       struct scrub_buf *out)
{
	struct wsscrub *w = wsscrub_new(set);
	int r = wsscrub_feed(w, d, cut, out);

	if (r == 0)
		r = wsscrub_feed(w, d + cut, n - cut, out);
	wsscrub_free(w);
	return r;
}

static bool holds(const char *p, size_t n, const char *v, size_t vl)
{
	return n >= vl && memmem(p, n, v, vl) != NULL;
}

/* Appends a token to @c: a tag, a length and bytes. */
static void token(struct scrub_buf *c, char tag, const char *p, size_t n)
{
	uint64_t n64 = n;
	char h[9];

	h[0] = tag;
	memcpy(h + 1, &n64, 8);
	canon_append(c, h, 9);
	canon_append(c, p, n);
}

/* Checks the frames of @out and writes to @canon what the client makes
 * of them: each control frame, each whole message, the open message's
 * bytes; independent of how the frames were cut into fragments. */
static void check_frames(const struct scrub_buf *out, const char *v, size_t vl,
			 struct scrub_buf *canon)
{
	const uint8_t *p = (const uint8_t *)out->data;
	size_t at = 0;
	bool in_msg = false;
	char *msg = malloc(out->len + 1);
	size_t mlen = 0;

	CHECK(msg);
	while (at < out->len) {
		uint8_t b0, b1, op;
		uint64_t len;
		size_t h = 2, i;

		CHECK(out->len - at >= 2);
		b0 = p[at];
		b1 = p[at + 1];
		op = b0 & 0x0f;
		CHECK((b0 & 0x70) == 0);
		CHECK((b1 & 0x80) == 0);
		len = b1 & 0x7f;
		if (len == 126) {
			CHECK(out->len - at >= 4);
			len = (uint64_t)p[at + 2] << 8 | p[at + 3];
			h = 4;
		} else if (len == 127) {
			CHECK(out->len - at >= 10);
			len = 0;
			for (i = 0; i < 8; i++)
				len = len << 8 | p[at + 2 + i];
			h = 10;
		}
		CHECK(out->len - at - h >= len);
		if (op >= 8) {
			CHECK(op <= 10 && (b0 & 0x80) && len <= 125);
			CHECK(!holds((const char *)p + at + h, (size_t)len, v, vl));
			token(canon, (char)('0' + op), (const char *)p + at + h, (size_t)len);
		} else {
			CHECK(op <= 2);
			CHECK((op == 0) == in_msg);
			memcpy(msg + mlen, p + at + h, (size_t)len);
			mlen += (size_t)len;
			in_msg = !(b0 & 0x80);
			if (!in_msg) {
				CHECK(!holds(msg, mlen, v, vl));
				token(canon, 'M', msg, mlen);
				mlen = 0;
			}
		}
		at += h + (size_t)len;
	}
	/* a message still open: what was written of it holds no value */
	CHECK(!holds(msg, mlen, v, vl));
	token(canon, 'O', msg, mlen);
	free(msg);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char abc[] = "abc", xyz[] = "XYZ";
	char value[24], ph[40];
	size_t vl, pl, i, cut;
	struct scrub_needle nd;
	struct scrub_set *set;
	struct scrub_buf a = { 0 }, b = { 0 }, ca = { 0 }, cb = { 0 };
	int ra, rb;

	if (size < 2)
		return 0;
	vl = 16 + (data[0] & 7);
	pl = 8 + (size_t)(data[0] >> 3) % 32;
	for (i = 0; i < vl; i++)
		value[i] = abc[(i * 7 + data[0]) % 3];
	for (i = 0; i < pl; i++)
		ph[i] = xyz[i % 3];
	cut = size > 2 ? data[1] % (size - 2 + 1) : 0;
	data += 2;
	size -= 2;
	nd = (struct scrub_needle){ value, vl, ph, pl };
	set = scrub_set_new(&nd, 1);
	ra = run(set, data, size, size, &a);
	rb = run(set, data, size, cut, &b);
	CHECK(ra == rb);
	check_frames(&a, value, vl, &ca);
	check_frames(&b, value, vl, &cb);
	if (ra == 0)
		CHECK(ca.len == cb.len && memcmp(ca.data, cb.data, ca.len) == 0);
	scrub_buf_free(&a);
	scrub_buf_free(&b);
	scrub_buf_free(&ca);
	scrub_buf_free(&cb);
	scrub_set_free(set);
	return 0;
}
