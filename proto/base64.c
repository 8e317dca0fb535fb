/* SPDX-License-Identifier: MIT */
/*
 * Base64 encoding and decoding (RFC 4648, standard alphabet), the one
 * implementation for every file content sent or received as base64.
 */
#include "proto/base64.h"

#include <errno.h>
#include <stdint.h>

/* Appends the base64 form of n bytes to out. */
void base64_encode(const void *data, size_t n, struct buf *out)
{
	const unsigned char *s = data;
	static const char tbl[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

	buf_reserve(out, (n + 2) / 3 * 4 + 1);
	for (size_t i = 0; i < n; i += 3) {
		uint32_t v = (uint32_t)s[i] << 16;
		if (i + 1 < n)
			v |= (uint32_t)s[i + 1] << 8;
		if (i + 2 < n)
			v |= s[i + 2];
		char q[4] = { tbl[(v >> 18) & 63], tbl[(v >> 12) & 63],
			      i + 1 < n ? tbl[(v >> 6) & 63] : '=', i + 2 < n ? tbl[v & 63] : '=' };
		buf_append(out, q, 4);
	}
}

/* Value of a base64 digit, or -1. */
static int b64_digit(unsigned char c)
{
	if (c >= 'A' && c <= 'Z')
		return c - 'A';
	if (c >= 'a' && c <= 'z')
		return c - 'a' + 26;
	if (c >= '0' && c <= '9')
		return c - '0' + 52;
	if (c == '+')
		return 62;
	if (c == '/')
		return 63;
	return -1;
}

/*
 * Decodes standard base64 (line breaks and spaces between digits are
 * skipped; "=" padding is optional but only at the end). -EINVAL when the
 * text is not base64.
 */
int base64_decode(const char *s, size_t n, struct buf *out)
{
	uint32_t acc = 0;
	unsigned bits = 0, digits = 0, pad = 0;

	buf_reserve(out, n / 4 * 3 + 3);
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		if (c == ' ' || c == '\n' || c == '\r' || c == '\t')
			continue;
		if (c == '=') {
			pad++;
			continue;
		}
		int d = b64_digit(c);
		if (d < 0 || pad > 0)
			return -EINVAL;
		acc = (acc << 6) | (uint32_t)d;
		bits += 6;
		digits++;
		if (bits >= 8) {
			bits -= 8;
			buf_putc(out, (char)((acc >> bits) & 0xFF));
		}
	}
	/* One digit alone cannot encode a byte; padding only fills a group. */
	if (digits % 4 == 1 || pad > 2 || (pad > 0 && (digits + pad) % 4 != 0))
		return -EINVAL;
	return 0;
}
