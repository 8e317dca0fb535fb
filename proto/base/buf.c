/* SPDX-License-Identifier: MIT */
/*
 * Growable byte buffer with a consumed-prefix offset, so queues drain from
 * the front without memmove on every write.
 */
#include "proto/base/buf.h"

#include <stdio.h>
#include <string.h>

void buf_grow(struct buf *b, size_t n)
{
	if (b->cap - b->len > n)
		return;
	/* Reuse the consumed prefix before growing. */
	if (b->off > 0 && b->off >= b->cap / 2) {
		memmove(b->data, b->data + b->off, b->len - b->off);
		b->len -= b->off;
		b->off = 0;
		if (b->cap - b->len > n)
			return;
	}
	size_t cap = b->cap ? b->cap : 256;
	while (cap - b->len <= n) {
		if (cap > SIZE_MAX / 2)
			abort();
		cap *= 2;
	}
	b->data = xrealloc(b->data, cap);
	b->cap = cap;
}

void buf_puts(struct buf *b, const char *s)
{
	buf_append(b, s, strlen(s));
}

char *fmt_u64(char *end, uint64_t v)
{
	do {
		*--end = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	return end;
}

void buf_put_u64(struct buf *b, uint64_t v)
{
	char digits[20];
	char *end = digits + sizeof(digits), *p = fmt_u64(end, v);
	buf_append(b, p, (size_t)(end - p));
}

void buf_printf(struct buf *b, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	char tmp[256];
	va_list ap2;
	va_copy(ap2, ap);
	int n = vsnprintf(tmp, sizeof(tmp), fmt, ap2);
	va_end(ap2);
	if (n < 0) {
		va_end(ap);
		return;
	}
	if ((size_t)n < sizeof(tmp)) {
		buf_append(b, tmp, (size_t)n);
	} else {
		buf_reserve(b, (size_t)n + 1);
		vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
		b->len += (size_t)n;
	}
	va_end(ap);
}

void buf_consume(struct buf *b, size_t n)
{
	b->off += n;
	if (b->off >= b->len)
		b->off = b->len = 0;
}

void buf_clear(struct buf *b)
{
	b->off = b->len = 0;
	if (b->data)
		b->data[0] = '\0';
}

void buf_free(struct buf *b)
{
	free(b->data);
	*b = (struct buf){0};
}

char *buf_steal(struct buf *b)
{
	char *s;
	if (b->off) {
		s = xstrndup(b->data + b->off, b->len - b->off);
		buf_free(b);
		return s;
	}
	if (!b->data)
		return xstrdup("");
	s = b->data;
	s[b->len] = '\0';
	*b = (struct buf){0};
	return s;
}
