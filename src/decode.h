/* SPDX-License-Identifier: Apache-2.0
 * decode.h - a streaming decoder for the HTTP content and transfer codings
 * an intercepted upstream may send although it was asked for identity:
 * gzip, deflate (zlib or raw), br (libbrotli) and zstd (libzstd), and
 * chains of them up to DECODE_MAX_LAYERS deep.
 *
 * Pull-based, so that memory is bounded whatever the ratio: the caller
 * puts at most decode_room() bytes of input, then gets output in pieces of
 * its own size until the decoder needs input again. The decoded size is
 * bounded (a decompression bomb is an error once it passes the bound,
 * never an allocation); so is every intermediate layer's.
 *
 *	struct decode_codings cs = { 0 };
 *	decode_codings_add(&cs, "gzip", 4, false, bad, sizeof(bad));
 *	d = decode_new(&cs, max_out);
 *	loop: n = decode_put(d, in, len); ... decode_get(d, out, cap, &got)
 *	      until DECODE_NEED_INPUT; decode_end(d) when the body ended;
 *	      decode_get() then gives the rest and DECODE_DONE, or an error
 *	      (a truncated stream).
 *	decode_free(d);
 *
 * A layer given no byte at all is an empty body (no error: servers label
 * empty answers with a coding). Concatenated gzip members and zstd frames
 * are decoded in turn; any other byte after a stream's end is an error.
 * Unit-tested in tests/unit/test_decode.c, fuzzed with the scrubber in
 * tests/fuzz/fuzz_decode.c.
 */
#ifndef AIRLOCK_DECODE_H
#define AIRLOCK_DECODE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Keep decode_coding_name() in sync. */
enum decode_coding {
	DECODE_GZIP = 0,
	DECODE_DEFLATE,
	DECODE_BR,
	DECODE_ZSTD,
	DECODE_CODING_COUNT
};

/* Codings applied on top of each other at most (a chain of two). */
#define DECODE_MAX_LAYERS 2
/* The default bound on the decoded size (SPEC §3.4 max_decoded_bytes). */
#define DECODE_MAX_OUT_DEFAULT ((uint64_t)256 * 1024 * 1024)

const char *decode_coding_name(enum decode_coding c);

/* The codings of a message, in the order they were applied. */
struct decode_codings {
	enum decode_coding c[DECODE_MAX_LAYERS];
	size_t n;
};

/* Keep decode_codings_result_to_string() in sync. */
enum decode_codings_result {
	DECODE_CODINGS_OK = 0,
	DECODE_CODINGS_UNKNOWN,   /* a coding this decoder does not know */
	DECODE_CODINGS_TOO_MANY,  /* more than DECODE_MAX_LAYERS */
	DECODE_CODINGS_RESULT_COUNT
};

const char *decode_codings_result_to_string(enum decode_codings_result r);

/* Appends the codings listed in one field value (@v, @len bytes: a
 * comma-separated list, optional whitespace, empty elements allowed):
 * gzip (x-gzip), deflate, br, zstd; "identity" is skipped, and so is
 * "chunked" when @transfer (a Transfer-Encoding value). Calls for several
 * fields add up, in order: Content-Encoding fields first, then
 * Transfer-Encoding. On an error @bad (when not NULL) names the coding
 * that was refused (printable ASCII, cut to fit). */
enum decode_codings_result decode_codings_add(struct decode_codings *cs, const char *v,
					      size_t len, bool transfer, char *bad,
					      size_t badlen);

/* "gzip, br": the codings in the order applied. */
void decode_codings_format(const struct decode_codings *cs, char *out, size_t len);

struct filter_headers;

/* The codings of an answer's head, added to @cs: every Content-Encoding
 * field of @hs in order (when @content; *@ncontent receives how many
 * codings they name), then @te (a Transfer-Encoding value, or NULL).
 * @listed receives the values as written ("identity, gzip, chunked"), for
 * a receipt; @bad as in decode_codings_add(). */
enum decode_codings_result decode_codings_head(const struct filter_headers *hs, bool content,
					       const char *te, struct decode_codings *cs,
					       size_t *ncontent, char *bad, size_t badlen,
					       char *listed, size_t listedlen);
/* Removes the header fields that describe the coded bytes (wrong once
 * decoded: Content-Encoding, Content-MD5, the digests). */
void decode_strip_head(struct filter_headers *hs);

/* Keep decode_result_to_string() in sync. */
enum decode_result {
	DECODE_NEED_INPUT = 0, /* put more, or end */
	DECODE_OUTPUT,         /* *got > 0 bytes were written */
	DECODE_DONE,           /* every stream ended and all was given */
	DECODE_ERROR,          /* see decode_error(); the decoder is spent */
	DECODE_RESULT_COUNT
};

const char *decode_result_to_string(enum decode_result r);

struct decode;

/* @cs: 1 to DECODE_MAX_LAYERS codings. @max_out: the bound on the decoded
 * size (0: DECODE_MAX_OUT_DEFAULT). */
struct decode *decode_new(const struct decode_codings *cs, uint64_t max_out);
void decode_free(struct decode *d);

/* How many bytes decode_put() takes now (0 while the decoder holds input
 * it has not worked through: get first). */
size_t decode_room(const struct decode *d);
/* Copies up to decode_room() bytes of @in; returns how many. */
size_t decode_put(struct decode *d, const void *in, size_t len);
/* No more input. */
void decode_end(struct decode *d);
/* Writes up to @cap (>= 1) bytes to @out, *got their number. */
enum decode_result decode_get(struct decode *d, void *out, size_t cap, size_t *got);

/* After DECODE_ERROR: what went wrong, naming the coding ("gzip: invalid
 * block type", "decoded size over 268435456 bytes"). */
const char *decode_error(const struct decode *d);
/* The coding that failed (DECODE_CODING_COUNT: none, or the bound). */
enum decode_coding decode_error_coding(const struct decode *d);
/* Decoded bytes given out so far. */
uint64_t decode_total(const struct decode *d);

#endif /* AIRLOCK_DECODE_H */
