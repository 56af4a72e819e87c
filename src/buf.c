/* SPDX-License-Identifier: Apache-2.0
 * buf.c - see buf.h.
 */
#include "buf.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util.h"

char *buf_reserve(struct buf *b, size_t n)
{
	ASSERT(n <= SIZE_MAX / 2 - b->len);
	if (b->len + n > b->cap) {
		size_t cap = b->cap ? b->cap : 1024;

		while (cap < b->len + n)
			cap *= 2;
		b->data = util_xrealloc(b->data, cap);
		b->cap = cap;
	}
	return b->data + b->len;
}

void buf_append(struct buf *b, const void *p, size_t n)
{
	if (n == 0)
		return;
	memcpy(buf_reserve(b, n), p, n);
	b->len += n;
}

void buf_puts(struct buf *b, const char *s)
{
	buf_append(b, s, strlen(s));
}

void buf_printf(struct buf *b, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	ASSERT(n >= 0);
	buf_reserve(b, (size_t)n + 1);
	va_start(ap, fmt);
	ASSERT(vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap) == n);
	va_end(ap);
	b->len += (size_t)n;
}

void buf_consume(struct buf *b, size_t n)
{
	ASSERT(n <= b->len);
	if (n == b->len) {
		b->len = 0;
		return;
	}
	memmove(b->data, b->data + n, b->len - n);
	b->len -= n;
}

void buf_free(struct buf *b)
{
	free(b->data);
	memset(b, 0, sizeof(*b));
}

void buf_release_empty(struct buf *b)
{
	if (b->len == 0 && b->data)
		buf_free(b);
}
