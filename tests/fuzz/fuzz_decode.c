/* SPDX-License-Identifier: Apache-2.0
 * fuzz_decode.c - libFuzzer target for the decoder-plus-scrubber pipeline
 * of a coded intercepted answer (decode.c, then scrub.c, as exchange.c
 * runs them).
 *
 * Input: a first byte choosing the codings (one or two of gzip, deflate,
 * br, zstd) and the mode; a second and third byte the size of each put and
 * of each get; the rest is either
 *  - the coded body itself (raw mode: whatever the bytes, decoded as far
 *    as they go), or
 *  - a plain body, into which the registered values are spliced where
 *    its bytes say, then coded here with zlib, brotli or zstd (coded
 *    mode: the decoder must give back exactly the plain body, scrubbed).
 *
 * Invariants, each checked with abort() so that libFuzzer reports it:
 *  - no registered value is in what the pipeline gives out, whatever the
 *    input (the whole output, held-back bytes included, as if the answer
 *    had ended there: also after a decoding error);
 *  - the decoded size never passes the bound;
 *  - coded mode: the output is the plain body with every value replaced,
 *    the same as scrub_oneshot() of it.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <brotli/encode.h>
#include <zlib.h>
#include <zstd.h>

#include "decode.h"
#include "fuzz.h"
#include "scrub.h"

/* Placeholders whose characters never begin a value, so that no value
 * can straddle a placeholder and the bytes after it. */
static const struct scrub_needle needles[] = {
	{ "SECRETvalue-0123456789abcdef", 28, "ph-xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx", 35 },
	{ "Tok_9Z", 6, "ph-yyyyyyyyyy", 13 },
};
#define NNEEDLES (sizeof(needles) / sizeof(needles[0]))
#define BOUND ((uint64_t)64 << 10)

static struct scrub_set *set;

static void grow(unsigned char **p, size_t *cap, size_t need)
{
	if (need <= *cap)
		return;
	while (*cap < need)
		*cap = *cap ? *cap * 2 : 1024;
	*p = realloc(*p, *cap);
	CHECK(*p != NULL);
}

static size_t z_code(const unsigned char *in, size_t len, int bits, unsigned char **out)
{
	z_stream z;
	size_t cap;

	memset(&z, 0, sizeof(z));
	CHECK(deflateInit2(&z, 6, Z_DEFLATED, bits, 8, Z_DEFAULT_STRATEGY) == Z_OK);
	cap = deflateBound(&z, (uLong)len) + 64;
	*out = malloc(cap);
	CHECK(*out != NULL);
	z.next_in = (unsigned char *)(uintptr_t)in;
	z.avail_in = (unsigned int)len;
	z.next_out = *out;
	z.avail_out = (unsigned int)cap;
	CHECK(deflate(&z, Z_FINISH) == Z_STREAM_END);
	cap = z.total_out;
	deflateEnd(&z);
	return cap;
}

static size_t code(enum decode_coding c, bool raw, const unsigned char *in, size_t len,
		   unsigned char **out)
{
	size_t n;

	switch (c) {
	case DECODE_GZIP:
		return z_code(in, len, 31, out);
	case DECODE_DEFLATE:
		return z_code(in, len, raw ? -15 : 15, out);
	case DECODE_BR:
		n = BrotliEncoderMaxCompressedSize(len) + 64;
		*out = malloc(n);
		CHECK(*out != NULL);
		CHECK(BrotliEncoderCompress(1, 16, BROTLI_MODE_GENERIC, len, in, &n, *out));
		return n;
	case DECODE_ZSTD:
		n = ZSTD_compressBound(len);
		*out = malloc(n);
		CHECK(*out != NULL);
		n = ZSTD_compress(*out, n, in, len, 1);
		CHECK(!ZSTD_isError(n));
		return n;
	case DECODE_CODING_COUNT:
	default:
		abort();
	}
}

static void no_value(const char *p, size_t n)
{
	size_t k;

	for (k = 0; k < NNEEDLES; k++)
		CHECK(!memmem(p, n, needles[k].value, needles[k].value_len));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct decode_codings cs = { .n = 0 };
	struct scrub_buf out = { 0 };
	unsigned char *coded = NULL, *plain = NULL, piece[4096];
	size_t clen, plen = 0, pcap = 0, put_size, get_size, from = 0;
	bool coded_mode, raw;
	struct decode *d;
	struct scrub *s;
	unsigned int guard = 0;

	if (!set)
		set = scrub_set_new(needles, NNEEDLES);
	if (size < 3)
		return 0;
	cs.c[0] = (enum decode_coding)(data[0] & 3);
	cs.n = 1;
	if (data[0] & 4) {
		cs.c[1] = (enum decode_coding)((data[0] >> 3) & 3);
		cs.n = 2;
	}
	coded_mode = data[0] & 0x20;
	raw = data[0] & 0x40;
	put_size = 1 + (size_t)data[1] * 37;
	get_size = 1 + (size_t)data[2] * 17 % sizeof(piece);
	data += 3;
	size -= 3;

	if (coded_mode) {
		size_t i;

		/* the plain body: bytes, and a value wherever a byte says */
		for (i = 0; i < size; i++) {
			const struct scrub_needle *nd = NULL;

			if (data[i] == 0xfe)
				nd = &needles[0];
			else if (data[i] == 0xfd)
				nd = &needles[1];
			grow(&plain, &pcap, plen + 64);
			if (nd) {
				memcpy(plain + plen, nd->value, nd->value_len);
				plen += nd->value_len;
			} else {
				plain[plen++] = data[i];
			}
		}
		{
			unsigned char *a = NULL, *b = NULL;

			clen = code(cs.c[0], raw, plain ? plain : (const unsigned char *)"", plen,
				    &a);
			if (cs.n == 2) {
				clen = code(cs.c[1], raw, a, clen, &b);
				free(a);
				a = b;
			}
			coded = a;
		}
	} else {
		clen = size;
		coded = malloc(clen ? clen : 1);
		CHECK(coded != NULL);
		memcpy(coded, data, clen);
	}

	d = decode_new(&cs, BOUND);
	s = scrub_new(set);
	for (;;) {
		size_t got = 0;
		enum decode_result r;

		CHECK(++guard < 10000000);
		if (from < clen && decode_room(d) > 0) {
			size_t n = clen - from < put_size ? clen - from : put_size;

			from += decode_put(d, coded + from, n);
			if (from == clen)
				decode_end(d);
		} else if (from == clen && clen == 0) {
			decode_end(d);
		}
		r = decode_get(d, piece, get_size, &got);
		CHECK(decode_total(d) <= BOUND);
		if (r == DECODE_OUTPUT) {
			CHECK(got > 0 && got <= get_size);
			scrub_feed(s, piece, got, &out);
			continue;
		}
		if (r == DECODE_DONE || r == DECODE_ERROR) {
			if (coded_mode) {
				struct scrub_buf want = { 0 };

				/* what was coded here decodes, unless over the bound */
				CHECK(r == DECODE_DONE || plen > BOUND);
				if (r == DECODE_DONE) {
					scrub_finish(s, &out);
					scrub_oneshot(set, plain ? plain : (unsigned char *)"", plen,
						      &want, NULL);
					CHECK(out.len == want.len &&
					      (want.len == 0 || memcmp(out.data, want.data, want.len) == 0));
				}
				scrub_buf_free(&want);
			}
			break;
		}
		/* needs input: there must be some left */
		CHECK(from < clen);
	}
	scrub_finish(s, &out);
	no_value(out.data ? out.data : "", out.len);
	scrub_free(s);
	decode_free(d);
	scrub_buf_free(&out);
	free(coded);
	free(plain);
	return 0;
}
