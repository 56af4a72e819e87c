/* SPDX-License-Identifier: Apache-2.0
 * buf.h - a growable byte buffer for the proxy's connections.
 *
 * The bytes live in data[0, len); consuming moves the rest to the front, so
 * a pointer into a buffer is valid only until the next call that changes
 * it. That is why the proxy copies every field it decides on out of a
 * parsed head before it consumes the head (see conn.h). Allocation cannot
 * fail (util_xrealloc aborts); every append checks for overflow.
 */
#ifndef AIRLOCK_BUF_H
#define AIRLOCK_BUF_H

#include <stddef.h>

struct buf {
	char *data;
	size_t len, cap;
};

/* Makes room for @n more bytes; returns data + len. */
char *buf_reserve(struct buf *b, size_t n);
void buf_append(struct buf *b, const void *p, size_t n);
void buf_puts(struct buf *b, const char *s);
__attribute__((format(printf, 2, 3))) void buf_printf(struct buf *b,
						      const char *fmt, ...);
/* Drops the first @n bytes (n <= len). */
void buf_consume(struct buf *b, size_t n);
/* Frees the storage; @b is empty and reusable. */
void buf_free(struct buf *b);
/* Frees the storage of an empty @b (an idle connection holds none). */
void buf_release_empty(struct buf *b);

#endif /* AIRLOCK_BUF_H */
