/* SPDX-License-Identifier: Apache-2.0
 * decode.c - the streaming decoder of HTTP codings (gzip, deflate, br,
 * zstd) for intercepted answers.
 *
 * DOC: Theory of Operation
 *
 * Intercepted requests ask for identity, but an upstream may send a coded
 * answer anyway, and a coded body cannot be scrubbed: the exchange decodes
 * it here, scrubs the decoded bytes and relays them uncompressed.
 *
 * The decoder is a pipeline of layers, the last coding applied first.
 * Each layer owns an input buffer of DECODE_BUF bytes: the first layer's
 * is filled by decode_put(), each later one's by pulling its predecessor.
 * decode_get() pulls the last layer into the caller's buffer. Nothing is
 * decoded ahead of what the caller asks for, so memory is the layers'
 * buffers plus each library's state, whatever the compression ratio:
 * zlib's 32 KiB window, brotli's (at most 16 MiB, as the stream declares),
 * zstd's window bounded to 8 MiB (RFC 9659's limit for HTTP) by
 * ZSTD_d_windowLogMax. Every layer's output is counted against the bound:
 * past it, the decoder stops with an error before writing more.
 *
 * deflate is the zlib format (RFC 1950) by the standard, raw deflate by
 * common practice: the first two bytes decide (a valid zlib header is
 * zlib). gzip members and zstd frames may follow each other; any byte
 * after the end of a br or deflate stream, or a stream cut short, is an
 * error. A layer that gets no byte at all is an empty body.
 */
#include "decode.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <brotli/decode.h>
#include <zlib.h>
#include <zstd.h>

#include "filter.h"
#include "util.h"

#define DECODE_BUF ((size_t)16384)
#define ZSTD_WINDOW_LOG_MAX 23 /* 8 MiB */

static const char *const coding_names[] = {
	[DECODE_GZIP] = "gzip",
	[DECODE_DEFLATE] = "deflate",
	[DECODE_BR] = "br",
	[DECODE_ZSTD] = "zstd",
};
static_assert(ARRAY_SIZE(coding_names) == DECODE_CODING_COUNT,
	      "coding_names out of sync with enum decode_coding");

const char *decode_coding_name(enum decode_coding c)
{
	if ((unsigned int)c >= DECODE_CODING_COUNT)
		return "unknown";
	return coding_names[c];
}

static const char *const codings_result_names[] = {
	[DECODE_CODINGS_OK] = "ok",
	[DECODE_CODINGS_UNKNOWN] = "unsupported coding",
	[DECODE_CODINGS_TOO_MANY] = "too many nested codings",
};
static_assert(ARRAY_SIZE(codings_result_names) == DECODE_CODINGS_RESULT_COUNT,
	      "codings_result_names out of sync with enum decode_codings_result");

const char *decode_codings_result_to_string(enum decode_codings_result r)
{
	if ((unsigned int)r >= DECODE_CODINGS_RESULT_COUNT)
		return "unknown";
	return codings_result_names[r];
}

static const char *const result_names[] = {
	[DECODE_NEED_INPUT] = "need input",
	[DECODE_OUTPUT] = "output",
	[DECODE_DONE] = "done",
	[DECODE_ERROR] = "error",
};
static_assert(ARRAY_SIZE(result_names) == DECODE_RESULT_COUNT,
	      "result_names out of sync with enum decode_result");

const char *decode_result_to_string(enum decode_result r)
{
	if ((unsigned int)r >= DECODE_RESULT_COUNT)
		return "unknown";
	return result_names[r];
}

/* --- coding lists ---------------------------------------------------------- */

static bool token_is(const char *p, size_t n, const char *name)
{
	return strlen(name) == n && strncasecmp(p, name, n) == 0;
}

static void copy_bad(const char *p, size_t n, char *bad, size_t badlen)
{
	size_t i, o = 0;

	if (!bad || badlen == 0)
		return;
	for (i = 0; i < n && o + 1 < badlen; i++) {
		unsigned char c = (unsigned char)p[i];
		char ch = p[i];

		if (c < 0x20 || c >= 0x7f)
			ch = '?';
		bad[o++] = ch;
	}
	bad[o] = '\0';
}

enum decode_codings_result decode_codings_add(struct decode_codings *cs, const char *v,
					      size_t len, bool transfer, char *bad,
					      size_t badlen)
{
	size_t p = 0;

	if (bad && badlen)
		bad[0] = '\0';
	while (p < len) {
		size_t q = p, a, b;
		enum decode_coding c;

		while (q < len && v[q] != ',')
			q++;
		a = p;
		b = q;
		p = q + 1;
		while (a < b && (v[a] == ' ' || v[a] == '\t'))
			a++;
		while (b > a && (v[b - 1] == ' ' || v[b - 1] == '\t'))
			b--;
		if (a == b || token_is(v + a, b - a, "identity") ||
		    (transfer && token_is(v + a, b - a, "chunked")))
			continue;
		if (token_is(v + a, b - a, "gzip") || token_is(v + a, b - a, "x-gzip")) {
			c = DECODE_GZIP;
		} else if (token_is(v + a, b - a, "deflate")) {
			c = DECODE_DEFLATE;
		} else if (token_is(v + a, b - a, "br")) {
			c = DECODE_BR;
		} else if (token_is(v + a, b - a, "zstd")) {
			c = DECODE_ZSTD;
		} else {
			copy_bad(v + a, b - a, bad, badlen);
			return DECODE_CODINGS_UNKNOWN;
		}
		if (cs->n >= DECODE_MAX_LAYERS) {
			copy_bad(v + a, b - a, bad, badlen);
			return DECODE_CODINGS_TOO_MANY;
		}
		cs->c[cs->n++] = c;
	}
	return DECODE_CODINGS_OK;
}

void decode_codings_format(const struct decode_codings *cs, char *out, size_t len)
{
	size_t i, o = 0;

	if (len == 0)
		return;
	out[0] = '\0';
	for (i = 0; i < cs->n && i < DECODE_MAX_LAYERS; i++) {
		int w = snprintf(out + o, len - o, "%s%s", i ? ", " : "",
				 decode_coding_name(cs->c[i]));

		if (w < 0 || (size_t)w >= len - o)
			return;
		o += (size_t)w;
	}
}

/* --- layers ---------------------------------------------------------------- */

struct layer {
	enum decode_coding coding;
	z_stream z;
	bool z_init;
	BrotliDecoderState *br;
	ZSTD_DStream *zs;
	unsigned char *ib; /* its input: ib[ipos..ilen) */
	size_t ipos, ilen;
	bool in_eof;       /* no more input will come */
	bool started;      /* it was given a byte */
	bool ended;        /* the current stream is complete */
	bool more_out;     /* the last run filled its output: run again */
	uint64_t produced;
};

struct decode {
	struct layer l[DECODE_MAX_LAYERS];
	size_t n;
	uint64_t max_out;
	bool spent;        /* an error was given */
	enum decode_coding err_coding;
	char err[160];
};

static enum decode_result set_error(struct decode *d, enum decode_coding c, const char *what,
				    const char *detail)
{
	d->spent = true;
	d->err_coding = c;
	if (c < DECODE_CODING_COUNT)
		snprintf(d->err, sizeof(d->err), "%s: %s%s%s", decode_coding_name(c), what,
			 detail ? ": " : "", detail ? detail : "");
	else
		snprintf(d->err, sizeof(d->err), "%s", what);
	return DECODE_ERROR;
}

static bool lfail(struct decode *d, enum decode_coding c, const char *what,
		  const char *detail)
{
	(void)set_error(d, c, what, detail);
	return false;
}

struct decode *decode_new(const struct decode_codings *cs, uint64_t max_out)
{
	struct decode *d = util_xcalloc(1, sizeof(*d));
	size_t i;

	ASSERT(cs->n >= 1 && cs->n <= DECODE_MAX_LAYERS);
	d->n = cs->n;
	d->max_out = max_out ? max_out : DECODE_MAX_OUT_DEFAULT;
	d->err_coding = DECODE_CODING_COUNT;
	for (i = 0; i < d->n; i++) {
		struct layer *l = &d->l[i];

		/* the last coding applied is the first undone */
		l->coding = cs->c[d->n - 1 - i];
		ASSERT((unsigned int)l->coding < DECODE_CODING_COUNT);
		l->ib = util_xmalloc(DECODE_BUF);
	}
	return d;
}

void decode_free(struct decode *d)
{
	size_t i;

	if (!d)
		return;
	for (i = 0; i < d->n; i++) {
		struct layer *l = &d->l[i];

		if (l->z_init)
			inflateEnd(&l->z);
		if (l->br)
			BrotliDecoderDestroyInstance(l->br);
		if (l->zs)
			ZSTD_freeDStream(l->zs);
		/* decoded bytes may hold a value: wipe them */
		explicit_bzero(l->ib, DECODE_BUF);
		free(l->ib);
	}
	free(d);
}

/* Starts layer @l's library on its first bytes @in[0..avail). Returns
 * false on an error (set), or when deflate needs a second byte to tell
 * zlib from raw (*wait). */
static bool layer_start(struct decode *d, struct layer *l, const unsigned char *in,
			size_t avail, bool *wait)
{
	int bits = 0;

	*wait = false;
	switch (l->coding) {
	case DECODE_GZIP:
		bits = 16 + MAX_WBITS;
		break;
	case DECODE_DEFLATE:
		if (avail < 2 && !l->in_eof) {
			*wait = true;
			return false;
		}
		/* RFC 1950: CM 8, CINFO <= 7, the header a multiple of 31 */
		bits = avail >= 2 && (in[0] & 0x0f) == 8 && (in[0] >> 4) <= 7 &&
				       ((unsigned int)in[0] * 256 + in[1]) % 31 == 0
			       ? MAX_WBITS
			       : -MAX_WBITS;
		break;
	case DECODE_BR:
		l->br = BrotliDecoderCreateInstance(NULL, NULL, NULL);
		if (!l->br) {
			set_error(d, l->coding, "out of memory", NULL);
			return false;
		}
		return true;
	case DECODE_ZSTD:
		l->zs = ZSTD_createDStream();
		if (!l->zs) {
			set_error(d, l->coding, "out of memory", NULL);
			return false;
		}
		if (ZSTD_isError(ZSTD_DCtx_setParameter(l->zs, ZSTD_d_windowLogMax,
							ZSTD_WINDOW_LOG_MAX))) {
			set_error(d, l->coding, "cannot bound the window", NULL);
			return false;
		}
		return true;
	case DECODE_CODING_COUNT:
	default:
		set_error(d, DECODE_CODING_COUNT, "unknown coding", NULL);
		return false;
	}
	memset(&l->z, 0, sizeof(l->z));
	if (inflateInit2(&l->z, bits) != Z_OK) {
		set_error(d, l->coding, "cannot start zlib", NULL);
		return false;
	}
	l->z_init = true;
	return true;
}

/* Runs layer @l's library once on its pending input. Returns false on an
 * error (set). */
static bool layer_run(struct decode *d, struct layer *l, unsigned char *out, size_t cap,
		      size_t *used, size_t *made)
{
	const unsigned char *in = l->ib + l->ipos;
	size_t avail = l->ilen - l->ipos;

	*used = *made = 0;
	switch (l->coding) {
	case DECODE_GZIP:
	case DECODE_DEFLATE: {
		int r;

		if (l->ended && avail > 0) {
			if (l->coding != DECODE_GZIP)
				return lfail(d, l->coding, "data after the end of the stream",
						 NULL);
			/* another gzip member */
			if (inflateReset(&l->z) != Z_OK)
				return lfail(d, l->coding, "cannot restart zlib", NULL);
			l->ended = false;
		}
		l->z.next_in = (unsigned char *)(uintptr_t)in;
		l->z.avail_in = avail > UINT_MAX ? UINT_MAX : (unsigned int)avail;
		l->z.next_out = out;
		l->z.avail_out = cap > UINT_MAX ? UINT_MAX : (unsigned int)cap;
		r = inflate(&l->z, Z_NO_FLUSH);
		*used = (size_t)(l->z.next_in - in);
		*made = (size_t)(l->z.next_out - out);
		if (r == Z_STREAM_END) {
			l->ended = true;
		} else if (r == Z_NEED_DICT) {
			return lfail(d, l->coding, "the stream needs a dictionary", NULL);
		} else if (r != Z_OK && r != Z_BUF_ERROR) {
			return lfail(d, l->coding, "corrupt data",
					 l->z.msg ? l->z.msg : NULL);
		}
		return true;
	}
	case DECODE_BR: {
		size_t ai = avail, ao = cap;
		const uint8_t *ni = in;
		uint8_t *no = out;
		BrotliDecoderResult r;

		if (l->ended && avail > 0)
			return lfail(d, l->coding, "data after the end of the stream", NULL);
		r = BrotliDecoderDecompressStream(l->br, &ai, &ni, &ao, &no, NULL);
		*used = avail - ai;
		*made = cap - ao;
		if (r == BROTLI_DECODER_RESULT_ERROR)
			return lfail(d, l->coding, "corrupt data",
					 BrotliDecoderErrorString(BrotliDecoderGetErrorCode(l->br)));
		if (r == BROTLI_DECODER_RESULT_SUCCESS)
			l->ended = true;
		return true;
	}
	case DECODE_ZSTD: {
		ZSTD_inBuffer ib = { in, avail, 0 };
		ZSTD_outBuffer ob = { out, cap, 0 };
		size_t r = ZSTD_decompressStream(l->zs, &ob, &ib);

		*used = ib.pos;
		*made = ob.pos;
		if (ZSTD_isError(r))
			return lfail(d, l->coding, "corrupt data", ZSTD_getErrorName(r));
		/* 0: a frame is complete and flushed; more input starts
		 * the next one (a call that moved nothing says nothing) */
		if (ib.pos > 0 || ob.pos > 0)
			l->ended = r == 0;
		return true;
	}
	case DECODE_CODING_COUNT:
	default:
		return lfail(d, DECODE_CODING_COUNT, "unknown coding", NULL);
	}
}

/* Pulls up to @cap decoded bytes out of layer @i into @out. */
static enum decode_result pull(struct decode *d, size_t i, unsigned char *out, size_t cap,
			       size_t *got)
{
	struct layer *l = &d->l[i];

	*got = 0;
	for (;;) {
		size_t avail = l->ilen - l->ipos;

		if (avail > 0 || (l->more_out && !l->ended) ||
		    (l->in_eof && l->started && !l->ended)) {
			size_t used, made;

			if (!l->started && avail > 0) {
				bool wait;

				if (!layer_start(d, l, l->ib + l->ipos, avail, &wait)) {
					if (d->spent)
						return DECODE_ERROR;
					/* deflate's second byte: fall to refill */
					goto refill;
				}
				l->started = true;
			}
			if (!layer_run(d, l, out, cap, &used, &made))
				return DECODE_ERROR;
			l->ipos += used;
			l->more_out = made == cap;
			if (made > d->max_out - l->produced) {
				char bound[64];

				snprintf(bound, sizeof(bound), "%llu bytes",
					 (unsigned long long)d->max_out);
				return set_error(d, l->coding, "decoded size over the bound", bound);
			}
			l->produced += made;
			if (made > 0) {
				*got = made;
				return DECODE_OUTPUT;
			}
			if (used > 0)
				continue;
			/* nothing moved */
			if (avail > 0)
				return set_error(d, l->coding, "the decoder made no progress",
						 NULL);
			if (l->in_eof && !l->ended)
				return set_error(d, l->coding, "truncated data", NULL);
		}
refill:
		if (l->ipos == l->ilen) {
			l->ipos = l->ilen = 0;
		}
		if (l->in_eof) {
			if (l->ipos < l->ilen) {
				/* deflate with one byte and no more to come */
				bool wait;

				if (!layer_start(d, l, l->ib + l->ipos, l->ilen - l->ipos, &wait))
					return DECODE_ERROR;
				l->started = true;
				continue;
			}
			if (l->started && !l->ended)
				return set_error(d, l->coding, "truncated data", NULL);
			return DECODE_DONE;
		}
		if (i == 0)
			return DECODE_NEED_INPUT;
		{
			size_t n = 0;
			enum decode_result r =
				pull(d, i - 1, l->ib + l->ilen, DECODE_BUF - l->ilen, &n);

			if (r == DECODE_ERROR || r == DECODE_NEED_INPUT)
				return r;
			if (r == DECODE_DONE)
				l->in_eof = true;
			else
				l->ilen += n;
		}
	}
}

size_t decode_room(const struct decode *d)
{
	const struct layer *l = &d->l[0];

	if (d->spent || l->in_eof)
		return 0;
	/* deflate waiting for its second byte holds one */
	return l->ipos < l->ilen && l->started ? 0 : DECODE_BUF - (l->ilen - l->ipos);
}

size_t decode_put(struct decode *d, const void *in, size_t len)
{
	struct layer *l = &d->l[0];
	size_t room = decode_room(d), take = len < room ? len : room;

	if (take == 0)
		return 0;
	if (l->ipos > 0) {
		memmove(l->ib, l->ib + l->ipos, l->ilen - l->ipos);
		l->ilen -= l->ipos;
		l->ipos = 0;
	}
	memcpy(l->ib + l->ilen, in, take);
	l->ilen += take;
	return take;
}

void decode_end(struct decode *d)
{
	d->l[0].in_eof = true;
}

enum decode_result decode_get(struct decode *d, void *out, size_t cap, size_t *got)
{
	enum decode_result r;

	*got = 0;
	if (d->spent)
		return DECODE_ERROR;
	ASSERT(cap >= 1);
	r = pull(d, d->n - 1, out, cap, got);
	if (r == DECODE_ERROR)
		*got = 0;
	return r;
}

const char *decode_error(const struct decode *d)
{
	return d->spent ? d->err : NULL;
}

enum decode_coding decode_error_coding(const struct decode *d)
{
	return d->err_coding;
}

uint64_t decode_total(const struct decode *d)
{
	return d->l[d->n - 1].produced;
}

/* --- an answer's head ---------------------------------------------------------- */

/* Header fields that describe the coded bytes, wrong once decoded. */
static const char *const coded_only[] = {
	"content-encoding", "content-md5", "content-digest", "repr-digest", "digest",
};

static void list_add(char *listed, size_t len, size_t *o, const char *v)
{
	int w;

	if (!len || *o >= len)
		return;
	w = snprintf(listed + *o, len - *o, "%s%s", *o ? ", " : "", v);
	if (w > 0)
		*o = *o + (size_t)w < len ? *o + (size_t)w : len - 1;
}

enum decode_codings_result decode_codings_head(const struct filter_headers *hs, bool content,
					       const char *te, struct decode_codings *cs,
					       size_t *ncontent, char *bad, size_t badlen,
					       char *listed, size_t listedlen)
{
	enum decode_codings_result r = DECODE_CODINGS_OK;
	size_t o = 0;
	int i;

	if (listedlen)
		listed[0] = '\0';
	for (i = content ? filter_headers_find(hs, "content-encoding", 0) : -1;
	     i >= 0 && r == DECODE_CODINGS_OK;
	     i = filter_headers_find(hs, "content-encoding", (size_t)i + 1)) {
		const char *v = hs->h[i].value;

		list_add(listed, listedlen, &o, v);
		r = decode_codings_add(cs, v, strlen(v), false, bad, badlen);
	}
	*ncontent = cs->n;
	if (r == DECODE_CODINGS_OK && te) {
		list_add(listed, listedlen, &o, te);
		r = decode_codings_add(cs, te, strlen(te), true, bad, badlen);
	}
	return r;
}

void decode_strip_head(struct filter_headers *hs)
{
	size_t k;

	for (k = 0; k < sizeof(coded_only) / sizeof(coded_only[0]); k++)
		filter_headers_remove(hs, coded_only[k]);
}
