/* SPDX-License-Identifier: MIT */
/*
 * A growable byte buffer: the input and output queues of connections, the
 * target of the JSON generator, captured child output.
 */
#ifndef TC_BUF_H
#define TC_BUF_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "proto/base/util.h"

struct buf {
	char *data;
	size_t len;
	size_t cap;
	size_t off;		/* bytes already consumed from the front */
};

/* The slow half of buf_reserve: compacts or grows the buffer. */
void buf_grow(struct buf *b, size_t n);

/* Makes room for n more bytes after the end (and a NUL after them).
 * Inline: every answer is a handful of appends to a buffer that already
 * has room, and the calls showed in profiles of small answers. */
static inline void buf_reserve(struct buf *b, size_t n)
{
	if (b->off && b->off == b->len)
		b->off = b->len = 0;
	if (__builtin_expect(b->cap - b->len <= n, 0))
		buf_grow(b, n);
}

static inline void buf_append(struct buf *b, const void *p, size_t n)
{
	buf_reserve(b, n);
	if (n)
		memcpy(b->data + b->len, p, n);
	b->len += n;
	b->data[b->len] = '\0';
}

static inline void buf_putc(struct buf *b, char c)
{
	buf_reserve(b, 1);
	b->data[b->len++] = c;
	b->data[b->len] = '\0';
}

void buf_puts(struct buf *b, const char *s);
/* Writes v in decimal to end at end (so at most 20 digits before it, no
 * NUL) and returns where the digits start: printf showed in profiles of
 * small answers. */
char *fmt_u64(char *end, uint64_t v);
/* Appends v in decimal. */
void buf_put_u64(struct buf *b, uint64_t v);
void buf_printf(struct buf *b, const char *fmt, ...) PRINTF(2, 3);
/* The unconsumed bytes. */
static inline const char *buf_head(const struct buf *b) { return b->data ? b->data + b->off : ""; }
static inline size_t buf_size(const struct buf *b) { return b->len - b->off; }
/* Drops n bytes from the front (cheaply; compacts when worthwhile). */
void buf_consume(struct buf *b, size_t n);
void buf_clear(struct buf *b);
void buf_free(struct buf *b);
/* Returns the contents as a NUL-terminated string and empties the buffer. */
char *buf_steal(struct buf *b);

#endif
