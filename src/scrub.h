/* SPDX-License-Identifier: Apache-2.0
 * scrub.h - the response scrubber: every real secret value in a byte
 * stream replaced by its placeholder, whatever the stream's split into
 * reads and chunks.
 *
 * Pure: no I/O; memory is the caller's output buffer plus, per stream, a
 * fixed state sized by the longest value. Table-tested in
 * tests/unit/test_scrub.c and fuzzed by tests/fuzz/fuzz_scrub.c (the
 * output for every split equals scrub_oneshot() of the whole input).
 *
 * Calling pattern (one response body):
 *
 *	set = scrub_set_new(needles, n);        once per proxy, read-only after
 *	s = scrub_new(set);                     per body (or header block)
 *	scrub_feed(s, buf, len, &out);          per read / decoded chunk
 *	  ... send out.data[0..out.len), then out.len = 0 ...
 *	scrub_finish(s, &out);                  at the end of the body
 *	scrub_counts(s)[k]                      replacements of needle k
 *	scrub_free(s);
 *
 * The output's length differs from the input's whenever a replaced value
 * and its placeholder differ in length: a body with a Content-Length must
 * be re-framed (chunked towards HTTP/1.1 clients, close-delimited towards
 * HTTP/1.0 ones) unless scrub_set_keeps_length() is true.
 *
 * Latency: a read is released whole when it ends with a control byte (CR,
 * LF, ...: values never hold one), so line-based streams such as SSE are
 * never delayed; otherwise at most scrub_set_max_len() - 1 bytes of its end
 * wait for the next read or scrub_finish().
 */
#ifndef AIRLOCK_SCRUB_H
#define AIRLOCK_SCRUB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* One value to hide. Both strings are borrowed: they must outlive the set.
 * value: 1 byte or more, no control byte (< 0x20 or 0x7f; broker.c
 * refuses such values). */
struct scrub_needle {
	const char *value;
	size_t value_len;
	const char *placeholder;
	size_t placeholder_len;
};

/* Output of a feed: appended to, grown with realloc as needed. The caller
 * owns data (free() it), reads data[0..len) and may reset len to 0 at any
 * time. Holds placeholders, never a value found in the input. */
struct scrub_buf {
	char *data;
	size_t len;
	size_t cap;
};

struct scrub_set;
struct scrub;

/* Builds a set from @n needles (@n >= 1; an invalid needle aborts: it is
 * the caller's bug). When several values match at one position the longest
 * wins, and of equally long ones the first in @needles. Free with
 * scrub_set_free(), after every stream made from it. */
struct scrub_set *scrub_set_new(const struct scrub_needle *needles, size_t n);
void scrub_set_free(struct scrub_set *set);

size_t scrub_set_count(const struct scrub_set *set);
/* The longest value (a stream holds back at most this - 1 bytes). */
size_t scrub_set_max_len(const struct scrub_set *set);
/* True when every placeholder is exactly as long as its value, so the
 * output is as long as the input. */
bool scrub_set_keeps_length(const struct scrub_set *set);

/* A stream. scrub_free() wipes what it holds back. */
struct scrub *scrub_new(const struct scrub_set *set);
void scrub_free(struct scrub *s);

/* Feeds @len bytes; appends to @out everything that can be decided. */
void scrub_feed(struct scrub *s, const void *in, size_t len, struct scrub_buf *out);

/* Appends what was held back; the stream is then empty and may be fed
 * again (a new body). */
void scrub_finish(struct scrub *s, struct scrub_buf *out);

/* Bytes currently held back (< scrub_set_max_len()). */
size_t scrub_held(const struct scrub *s);

/* Replacements so far, indexed like the needles; cumulative over the
 * stream's life (scrub_finish() does not reset them). */
const uint64_t *scrub_counts(const struct scrub *s);

/* The whole of @in at once (a header value, a response head): appends to
 * @out and, when @counts is not NULL, adds each needle's replacements to
 * counts[k]. Returns the number of replacements. */
uint64_t scrub_oneshot(const struct scrub_set *set, const void *in, size_t len,
		       struct scrub_buf *out, uint64_t *counts);

/* Frees @b's data; @b is then empty. */
void scrub_buf_free(struct scrub_buf *b);

#endif /* AIRLOCK_SCRUB_H */
