/* SPDX-License-Identifier: Apache-2.0
 * test_decode.c - the streaming decoder of HTTP codings: coding lists,
 * each coding (gzip, deflate as zlib and raw, br, zstd), chains of two,
 * every split of the input across puts, small output pieces, corrupt
 * and truncated input, data after the end, empty bodies, and the bound on
 * the decoded size (a bomb is an error after at most the bound).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <brotli/encode.h>
#include <zlib.h>
#include <zstd.h>

#include "decode.h"
#include "tap.h"
#include "util.h"

struct bytes {
	unsigned char *p;
	size_t n;
};

static void bytes_free(struct bytes *b)
{
	free(b->p);
	b->p = NULL;
	b->n = 0;
}

/* zlib's three framings: @bits 31 gzip, 15 zlib, -15 raw deflate. */
static struct bytes z_compress(const unsigned char *in, size_t len, int bits)
{
	struct bytes out;
	z_stream z;
	int r;

	memset(&z, 0, sizeof(z));
	r = deflateInit2(&z, 6, Z_DEFLATED, bits, 8, Z_DEFAULT_STRATEGY);
	ASSERT(r == Z_OK);
	out.n = deflateBound(&z, (uLong)len) + 32;
	out.p = util_xmalloc(out.n);
	z.next_in = (unsigned char *)(uintptr_t)in;
	z.avail_in = (unsigned int)len;
	z.next_out = out.p;
	z.avail_out = (unsigned int)out.n;
	r = deflate(&z, Z_FINISH);
	ASSERT(r == Z_STREAM_END);
	out.n = z.total_out;
	deflateEnd(&z);
	return out;
}

static struct bytes br_compress(const unsigned char *in, size_t len)
{
	struct bytes out;

	out.n = BrotliEncoderMaxCompressedSize(len) + 64;
	out.p = util_xmalloc(out.n);
	ASSERT(BrotliEncoderCompress(5, BROTLI_DEFAULT_WINDOW, BROTLI_MODE_GENERIC, len, in,
				     &out.n, out.p));
	return out;
}

static struct bytes zstd_compress(const unsigned char *in, size_t len)
{
	struct bytes out;

	out.n = ZSTD_compressBound(len);
	out.p = util_xmalloc(out.n);
	out.n = ZSTD_compress(out.p, out.n, in, len, 3);
	ASSERT(!ZSTD_isError(out.n));
	return out;
}

static struct bytes encode(enum decode_coding c, const unsigned char *in, size_t len,
			   bool raw)
{
	switch (c) {
	case DECODE_GZIP:
		return z_compress(in, len, 31);
	case DECODE_DEFLATE:
		return z_compress(in, len, raw ? -15 : 15);
	case DECODE_BR:
		return br_compress(in, len);
	case DECODE_ZSTD:
		return zstd_compress(in, len);
	case DECODE_CODING_COUNT:
	default:
		ASSERT(0);
	}
	return (struct bytes){ NULL, 0 };
}

/* Runs @d over @in, put in pieces cut at @cuts (sorted), getting @cap
 * bytes at most at a time; returns the last result, the output in @out. */
static enum decode_result run(struct decode *d, const unsigned char *in, size_t len,
			      const size_t *cuts, size_t ncuts, size_t cap, struct bytes *out)
{
	unsigned char *piece = util_xmalloc(cap);
	size_t from = 0, i, outcap = 1024;
	enum decode_result r = DECODE_NEED_INPUT;
	unsigned int guard = 0;

	out->p = util_xmalloc(outcap);
	out->n = 0;
	for (i = 0; i <= ncuts; i++) {
		size_t to = i < ncuts && cuts ? cuts[i] : len;
		bool ended = false;

		for (;;) {
			size_t got = 0;

			ASSERT(++guard < 100000000);
			if (from < to) {
				from += decode_put(d, in + from, to - from);
			} else if (i == ncuts && !ended) {
				decode_end(d);
				ended = true;
			}
			r = decode_get(d, piece, cap, &got);
			if (r == DECODE_OUTPUT) {
				while (out->n + got > outcap)
					outcap *= 2;
				out->p = util_xrealloc(out->p, outcap);
				memcpy(out->p + out->n, piece, got);
				out->n += got;
				continue;
			}
			if (r == DECODE_ERROR || r == DECODE_DONE)
				goto end;
			/* needs input */
			if (from == to && i < ncuts)
				break;
			ASSERT(!ended);
		}
	}
end:
	free(piece);
	return r;
}

static struct decode *one(enum decode_coding c, uint64_t max)
{
	struct decode_codings cs = { { c }, 1 };

	return decode_new(&cs, max);
}

/* A text worth compressing: repeated lines with a counter. */
static struct bytes sample(size_t lines)
{
	struct bytes b;
	size_t i, o = 0;

	b.p = util_xmalloc(lines * 64 + 1);
	for (i = 0; i < lines; i++)
		o += (size_t)sprintf((char *)b.p + o, "line %zu: token=sk-REAL-%zu-value\n", i,
				     i * 7919 % 1000);
	b.n = o;
	return b;
}

static void test_codings(void)
{
	struct decode_codings cs = { { 0 }, 0 };
	char bad[16], text[64];

	tap_is_int(decode_codings_add(&cs, "gzip", 4, false, bad, sizeof(bad)), DECODE_CODINGS_OK,
		   "gzip is known");
	tap_ok(cs.n == 1 && cs.c[0] == DECODE_GZIP, "one coding, gzip");
	cs.n = 0;
	tap_is_int(decode_codings_add(&cs, "identity", 8, false, bad, sizeof(bad)),
		   DECODE_CODINGS_OK, "identity is skipped");
	tap_is_int(cs.n, 0, "identity adds nothing");
	tap_is_int(decode_codings_add(&cs, " , X-GZip ,\tbr,", 15, false, bad, sizeof(bad)),
		   DECODE_CODINGS_OK, "a list with empty elements, x-gzip, case");
	tap_ok(cs.n == 2 && cs.c[0] == DECODE_GZIP && cs.c[1] == DECODE_BR, "gzip then br");
	decode_codings_format(&cs, text, sizeof(text));
	tap_is_str(text, "gzip, br", "formatted in the order applied");
	tap_is_int(decode_codings_add(&cs, "zstd", 4, false, bad, sizeof(bad)),
		   DECODE_CODINGS_TOO_MANY, "a third coding is too many");
	tap_is_str(bad, "zstd", "names the coding refused");
	cs.n = 0;
	tap_is_int(decode_codings_add(&cs, "identity", 8, false, bad, sizeof(bad)),
		   DECODE_CODINGS_OK, "identity in a first field");
	tap_is_int(decode_codings_add(&cs, "gzip", 4, false, bad, sizeof(bad)),
		   DECODE_CODINGS_OK, "gzip in a second field");
	tap_ok(cs.n == 1 && cs.c[0] == DECODE_GZIP, "identity then gzip: gzip");
	cs.n = 0;
	tap_is_int(decode_codings_add(&cs, "gzip, chunked", 13, true, bad, sizeof(bad)),
		   DECODE_CODINGS_OK, "Transfer-Encoding gzip, chunked");
	tap_ok(cs.n == 1 && cs.c[0] == DECODE_GZIP, "chunked is framing, gzip a coding");
	cs.n = 0;
	tap_is_int(decode_codings_add(&cs, "chunked", 7, false, bad, sizeof(bad)),
		   DECODE_CODINGS_UNKNOWN, "chunked is no content coding");
	tap_is_int(decode_codings_add(&cs, "compress", 8, false, bad, sizeof(bad)),
		   DECODE_CODINGS_UNKNOWN, "compress is refused");
	tap_is_str(bad, "compress", "named");
	tap_is_int(decode_codings_add(&cs, "gzip;q=1", 8, false, bad, sizeof(bad)),
		   DECODE_CODINGS_UNKNOWN, "parameters are refused");
	tap_is_int(decode_codings_add(&cs, "a-very-long-coding-name\x01", 24, false, bad,
				      sizeof(bad)),
		   DECODE_CODINGS_UNKNOWN, "a long name");
	tap_ok(strlen(bad) == sizeof(bad) - 1 && !strchr(bad, '\x01'),
	       "cut to fit, printable");
}

static const char *const raw_name[2] = { "", " (raw)" };

/* Each coding: whole, every split (on a small body), byte by byte, small
 * output pieces. */
static void test_each(void)
{
	struct bytes small = sample(12), big = sample(4000);
	unsigned int c;
	int raw;

	for (c = 0; c < DECODE_CODING_COUNT; c++) {
		for (raw = 0; raw < (c == DECODE_DEFLATE ? 2 : 1); raw++) {
			const char *name = decode_coding_name((enum decode_coding)c);
			struct bytes enc = encode((enum decode_coding)c, small.p, small.n, raw);
			struct bytes benc = encode((enum decode_coding)c, big.p, big.n, raw);
			struct bytes out;
			struct decode *d;
			size_t k, *every;
			bool all = true;

			d = one((enum decode_coding)c, 0);
			tap_is_int(run(d, enc.p, enc.n, NULL, 0, 4096, &out), DECODE_DONE,
				   "%s%s: whole", name, raw_name[raw]);
			tap_ok(out.n == small.n && memcmp(out.p, small.p, small.n) == 0,
			       "%s%s: decoded equals the original", name, raw_name[raw]);
			tap_is_int(decode_total(d), small.n, "%s%s: total", name, raw_name[raw]);
			bytes_free(&out);
			decode_free(d);

			for (k = 0; k <= enc.n; k++) {
				enum decode_result r;

				d = one((enum decode_coding)c, 0);
				r = run(d, enc.p, enc.n, &k, 1, 4096, &out);
				if (r != DECODE_DONE || out.n != small.n ||
				    memcmp(out.p, small.p, small.n) != 0) {
					all = false;
					tap_ok(false, "%s%s: split at %zu: %s", name, raw_name[raw], k,
					       decode_error(d) ? decode_error(d) : "");
				}
				bytes_free(&out);
				decode_free(d);
			}
			tap_ok(all, "%s%s: every split of %zu bytes in two", name, raw_name[raw],
			       enc.n);

			every = util_xcalloc(enc.n, sizeof(*every));
			for (k = 0; k + 1 < enc.n; k++)
				every[k] = k + 1;
			d = one((enum decode_coding)c, 0);
			tap_is_int(run(d, enc.p, enc.n, every, enc.n - 1, 3, &out), DECODE_DONE,
				   "%s%s: byte by byte, 3 bytes out at a time", name, raw_name[raw]);
			tap_ok(out.n == small.n && memcmp(out.p, small.p, small.n) == 0,
			       "%s%s: same output", name, raw_name[raw]);
			bytes_free(&out);
			decode_free(d);
			free(every);

			d = one((enum decode_coding)c, 0);
			tap_is_int(run(d, benc.p, benc.n, NULL, 0, 1000, &out), DECODE_DONE,
				   "%s%s: %zu bytes from %zu", name, raw_name[raw], big.n, benc.n);
			tap_ok(out.n == big.n && memcmp(out.p, big.p, big.n) == 0,
			       "%s%s: big body equal", name, raw_name[raw]);
			bytes_free(&out);
			decode_free(d);

			/* truncated: every proper prefix but the empty one */
			all = true;
			for (k = 1; k < enc.n; k++) {
				enum decode_result r;

				d = one((enum decode_coding)c, 0);
				r = run(d, enc.p, k, NULL, 0, 4096, &out);
				if (r != DECODE_ERROR) {
					all = false;
					tap_ok(false, "%s%s: cut at %zu: %s", name, raw_name[raw], k,
					       decode_result_to_string(r));
				}
				bytes_free(&out);
				decode_free(d);
			}
			tap_ok(all, "%s%s: every truncation is an error", name, raw_name[raw]);
			d = one((enum decode_coding)c, 0);
			tap_is_int(run(d, enc.p, enc.n / 2, NULL, 0, 4096, &out), DECODE_ERROR,
				   "%s%s: half", name, raw_name[raw]);
			tap_ok(decode_error(d) && strstr(decode_error(d), name) == decode_error(d),
			       "%s%s: the error names the coding: %s", name, raw_name[raw],
			       decode_error(d));
			tap_is_int(decode_error_coding(d), c, "%s%s: error coding", name,
				   raw_name[raw]);
			bytes_free(&out);
			decode_free(d);

			/* empty body */
			d = one((enum decode_coding)c, 0);
			tap_is_int(run(d, enc.p, 0, NULL, 0, 4096, &out), DECODE_DONE,
				   "%s%s: an empty body is empty", name, raw_name[raw]);
			tap_is_int(out.n, 0, "%s%s: nothing out", name, raw_name[raw]);
			bytes_free(&out);
			decode_free(d);

			bytes_free(&enc);
			bytes_free(&benc);
		}
	}
	bytes_free(&small);
	bytes_free(&big);
}

static void test_corrupt(void)
{
	static const char plain[] = "this is not compressed at all, whatever it says";
	struct bytes s = sample(40), enc, out;
	struct decode *d;
	unsigned int c;

	for (c = 0; c < DECODE_CODING_COUNT; c++) {
		d = one((enum decode_coding)c, 0);
		tap_is_int(run(d, (const unsigned char *)plain, sizeof(plain) - 1, NULL, 0, 4096,
			       &out),
			   DECODE_ERROR, "%s: plain text is an error: %s",
			   decode_coding_name((enum decode_coding)c),
			   decode_error(d) ? decode_error(d) : "");
		bytes_free(&out);
		decode_free(d);
	}
	/* a flipped byte in gzip's CRC, in zstd's and br's data */
	enc = encode(DECODE_GZIP, s.p, s.n, false);
	enc.p[enc.n - 6] ^= 0x55;
	d = one(DECODE_GZIP, 0);
	tap_is_int(run(d, enc.p, enc.n, NULL, 0, 4096, &out), DECODE_ERROR,
		   "gzip: a wrong CRC is an error: %s", decode_error(d) ? decode_error(d) : "");
	bytes_free(&out);
	decode_free(d);
	bytes_free(&enc);

	enc = encode(DECODE_ZSTD, s.p, s.n, false);
	enc.p[enc.n / 2] ^= 0xff;
	enc.p[enc.n / 2 + 1] ^= 0xff;
	d = one(DECODE_ZSTD, 0);
	tap_ok(run(d, enc.p, enc.n, NULL, 0, 4096, &out) == DECODE_ERROR ||
		       out.n != s.n || memcmp(out.p, s.p, s.n) != 0,
	       "zstd: flipped bytes do not decode to the original");
	bytes_free(&out);
	decode_free(d);
	bytes_free(&enc);

	/* data after the end */
	enc = encode(DECODE_BR, s.p, s.n, false);
	enc.p = util_xrealloc(enc.p, enc.n + 3);
	memcpy(enc.p + enc.n, "xyz", 3);
	d = one(DECODE_BR, 0);
	tap_is_int(run(d, enc.p, enc.n + 3, NULL, 0, 4096, &out), DECODE_ERROR,
		   "br: bytes after the end are an error: %s",
		   decode_error(d) ? decode_error(d) : "");
	bytes_free(&out);
	decode_free(d);
	bytes_free(&enc);

	enc = encode(DECODE_DEFLATE, s.p, s.n, false);
	enc.p = util_xrealloc(enc.p, enc.n + 1);
	enc.p[enc.n] = 0;
	d = one(DECODE_DEFLATE, 0);
	tap_is_int(run(d, enc.p, enc.n + 1, NULL, 0, 4096, &out), DECODE_ERROR,
		   "deflate: a byte after the end is an error");
	bytes_free(&out);
	decode_free(d);
	bytes_free(&enc);

	/* one byte of deflate, then the end */
	d = one(DECODE_DEFLATE, 0);
	tap_is_int(run(d, (const unsigned char *)"x", 1, NULL, 0, 4096, &out), DECODE_ERROR,
		   "deflate: one byte is truncated");
	bytes_free(&out);
	decode_free(d);

	/* the decoder stays spent */
	d = one(DECODE_GZIP, 0);
	(void)run(d, (const unsigned char *)plain, sizeof(plain) - 1, NULL, 0, 4096, &out);
	bytes_free(&out);
	{
		unsigned char b[8];
		size_t got = 1;

		tap_is_int(decode_room(d), 0, "a spent decoder takes nothing");
		tap_is_int(decode_get(d, b, sizeof(b), &got), DECODE_ERROR, "and stays in error");
		tap_is_int(got, 0, "giving nothing");
	}
	decode_free(d);
	bytes_free(&s);
}

/* gzip members and zstd frames one after the other. */
static void test_concatenated(void)
{
	struct bytes a = sample(30), b = sample(7), ea, eb, cat, out;
	unsigned int c;
	enum decode_coding cc[2] = { DECODE_GZIP, DECODE_ZSTD };

	for (c = 0; c < 2; c++) {
		struct decode *d;

		ea = encode(cc[c], a.p, a.n, false);
		eb = encode(cc[c], b.p, b.n, false);
		cat.n = ea.n + eb.n;
		cat.p = util_xmalloc(cat.n);
		memcpy(cat.p, ea.p, ea.n);
		memcpy(cat.p + ea.n, eb.p, eb.n);
		d = one(cc[c], 0);
		tap_is_int(run(d, cat.p, cat.n, &ea.n, 1, 100, &out), DECODE_DONE,
			   "%s: two streams one after the other", decode_coding_name(cc[c]));
		tap_ok(out.n == a.n + b.n && memcmp(out.p, a.p, a.n) == 0 &&
			       memcmp(out.p + a.n, b.p, b.n) == 0,
		       "%s: both decoded in order", decode_coding_name(cc[c]));
		bytes_free(&out);
		decode_free(d);
		bytes_free(&ea);
		bytes_free(&eb);
		bytes_free(&cat);
	}
	bytes_free(&a);
	bytes_free(&b);
}

/* Chains: the first coding applied is the last undone. */
static void test_chains(void)
{
	struct bytes s = sample(200), in1, in2, out;
	unsigned int c1, c2;
	size_t k;

	for (c1 = 0; c1 < DECODE_CODING_COUNT; c1++) {
		for (c2 = 0; c2 < DECODE_CODING_COUNT; c2++) {
			struct decode_codings cs = { { (enum decode_coding)c1,
						       (enum decode_coding)c2 },
						     2 };
			struct decode *d;
			bool all = true;

			in1 = encode((enum decode_coding)c1, s.p, s.n, false);
			in2 = encode((enum decode_coding)c2, in1.p, in1.n, false);
			d = decode_new(&cs, 0);
			tap_is_int(run(d, in2.p, in2.n, NULL, 0, 4096, &out), DECODE_DONE,
				   "%s then %s: decoded", decode_coding_name(cs.c[0]),
				   decode_coding_name(cs.c[1]));
			tap_ok(out.n == s.n && memcmp(out.p, s.p, s.n) == 0, "%s then %s: equal",
			       decode_coding_name(cs.c[0]), decode_coding_name(cs.c[1]));
			bytes_free(&out);
			decode_free(d);
			for (k = 0; k <= in2.n; k += 1 + in2.n / 64) {
				d = decode_new(&cs, 0);
				if (run(d, in2.p, in2.n, &k, 1, 7, &out) != DECODE_DONE ||
				    out.n != s.n || memcmp(out.p, s.p, s.n) != 0)
					all = false;
				bytes_free(&out);
				decode_free(d);
			}
			tap_ok(all, "%s then %s: splits, 7 bytes out at a time",
			       decode_coding_name(cs.c[0]), decode_coding_name(cs.c[1]));
			/* the inner stream cut short inside a whole outer one */
			bytes_free(&in2);
			in2 = encode((enum decode_coding)c2, in1.p, in1.n / 2, false);
			d = decode_new(&cs, 0);
			tap_is_int(run(d, in2.p, in2.n, NULL, 0, 4096, &out), DECODE_ERROR,
				   "%s then %s: inner truncated: %s", decode_coding_name(cs.c[0]),
				   decode_coding_name(cs.c[1]), decode_error(d) ? decode_error(d) : "");
			tap_is_int(decode_error_coding(d), c1, "the inner coding is named");
			bytes_free(&out);
			decode_free(d);
			bytes_free(&in1);
			bytes_free(&in2);
		}
	}
	bytes_free(&s);
}

/* A bomb: 64 MiB of zeros, bounded to 1 MiB. */
static void test_bomb(void)
{
	size_t big = (size_t)64 << 20;
	unsigned char *zeros = util_xcalloc(1, big);
	unsigned int c;

	for (c = 0; c < DECODE_CODING_COUNT; c++) {
		struct bytes enc = encode((enum decode_coding)c, zeros, big, false), out;
		struct decode *d = one((enum decode_coding)c, (uint64_t)1 << 20);

		tap_is_int(run(d, enc.p, enc.n, NULL, 0, 16384, &out), DECODE_ERROR,
			   "%s: %zu bytes expanding to 64 MiB over a 1 MiB bound",
			   decode_coding_name((enum decode_coding)c), enc.n);
		tap_ok(out.n <= ((size_t)1 << 20) && decode_total(d) <= ((uint64_t)1 << 20),
		       "%s: at most the bound came out (%zu)",
		       decode_coding_name((enum decode_coding)c), out.n);
		tap_ok(decode_error(d) && strstr(decode_error(d), "bound"), "%s: says so: %s",
		       decode_coding_name((enum decode_coding)c),
		       decode_error(d) ? decode_error(d) : "");
		bytes_free(&out);
		decode_free(d);
		bytes_free(&enc);
	}
	/* exactly the bound is fine */
	{
		struct bytes enc = encode(DECODE_GZIP, zeros, 4096, false), out;
		struct decode *d = one(DECODE_GZIP, 4096);

		tap_is_int(run(d, enc.p, enc.n, NULL, 0, 1000, &out), DECODE_DONE,
			   "exactly the bound decodes");
		tap_is_int(out.n, 4096, "all of it");
		bytes_free(&out);
		decode_free(d);
		bytes_free(&enc);
	}
	/* a bomb inside a chain: gzip of a zstd bomb is caught too */
	{
		struct bytes in1 = encode(DECODE_ZSTD, zeros, big, false);
		struct bytes in2 = encode(DECODE_GZIP, in1.p, in1.n, false), out;
		struct decode_codings cs = { { DECODE_ZSTD, DECODE_GZIP }, 2 };
		struct decode *d = decode_new(&cs, (uint64_t)1 << 20);

		tap_is_int(run(d, in2.p, in2.n, NULL, 0, 16384, &out), DECODE_ERROR,
			   "zstd then gzip: the bound holds");
		tap_ok(out.n <= ((size_t)1 << 20), "at most the bound came out");
		bytes_free(&out);
		decode_free(d);
		bytes_free(&in1);
		bytes_free(&in2);
	}
	free(zeros);
}

int main(void)
{
	test_codings();
	test_each();
	test_corrupt();
	test_concatenated();
	test_chains();
	test_bomb();
	return tap_done();
}
