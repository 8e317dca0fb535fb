/* SPDX-License-Identifier: MIT */
/*
 * UTF-8: strict validation (with an ASCII fast path), decoding of one
 * character, repair (invalid sequences made U+FFFD), counting, and the one
 * rule for cutting text short without splitting a character.
 */
#include "proto/utf8.h"

#ifdef __SSE2__
#include <emmintrin.h>
#endif
#include <string.h>

size_t utf8_decode(const char *str, size_t n, uint32_t *ret_cp)
{
	const unsigned char *s = (const unsigned char *)str;
	unsigned char c = s[0];
	if (c < 0x80) {
		*ret_cp = c;
		return 1;
	}
	size_t len;
	uint32_t cp;
	if (c >= 0xC2 && c <= 0xDF) {
		len = 2;
		cp = c & 0x1F;
	} else if (c >= 0xE0 && c <= 0xEF) {
		len = 3;
		cp = c & 0x0F;
	} else if (c >= 0xF0 && c <= 0xF4) {
		len = 4;
		cp = c & 0x07;
	} else {
		return 0;
	}
	if (n < len)
		return 0;
	for (size_t i = 1; i < len; i++) {
		if ((s[i] & 0xC0) != 0x80)
			return 0;
		cp = (cp << 6) | (s[i] & 0x3F);
	}
	if ((len == 3 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) ||
	    (len == 4 && (cp < 0x10000 || cp > 0x10FFFF)))
		return 0;
	*ret_cp = cp;
	return len;
}

bool utf8_is_control(uint32_t cp)
{
	return cp < 0x20 || (cp >= 0x7f && cp <= 0x9f) || cp == 0x2028 || cp == 0x2029 ||
	       (cp >= 0x202a && cp <= 0x202e) || (cp >= 0x2066 && cp <= 0x2069);
}

/* Length of the valid UTF-8 sequence at s (at most n bytes), or 0. */
static size_t utf8_seq(const unsigned char *s, size_t n)
{
	uint32_t cp;
	return utf8_decode((const char *)s, n, &cp);
}

bool utf8_valid(const char *s, size_t n)
{
	return utf8_valid_prefix(s, n) == n;
}

size_t utf8_valid_prefix(const char *s, size_t n)
{
	const unsigned char *u = (const unsigned char *)s;
	size_t i = 0;
	while (i < n) {
		/* ASCII fast path: 32 bytes at a time with SSE2, then 8. */
#ifdef __SSE2__
		while (i + 32 <= n) {
			__m128i a = _mm_loadu_si128((const __m128i *)(const void *)(u + i));
			__m128i b = _mm_loadu_si128((const __m128i *)(const void *)(u + i + 16));
			if (_mm_movemask_epi8(_mm_or_si128(a, b)))
				break;
			i += 32;
		}
#endif
		while (i + 8 <= n) {
			uint64_t w;
			memcpy(&w, u + i, 8);
			if (w & 0x8080808080808080ULL)
				break;
			i += 8;
		}
		if (i >= n)
			break;
		size_t l = utf8_seq(u + i, n - i);
		if (!l)
			return i;
		i += l;
	}
	return n;
}

void utf8_sanitize(const char *s, size_t n, struct buf *out)
{
	const unsigned char *u = (const unsigned char *)s;
	size_t i = 0, start = 0;
	buf_reserve(out, n);
	while (i < n) {
		size_t l = utf8_seq(u + i, n - i);
		if (l) {
			i += l;
			continue;
		}
		buf_append(out, s + start, i - start);
		buf_append(out, "\xEF\xBF\xBD", 3);
		i++;
		start = i;
	}
	buf_append(out, s + start, n - start);
}

size_t utf8_length(const char *s, size_t n)
{
	size_t count = 0;
	for (size_t i = 0; i < n; i++)
		if (((unsigned char)s[i] & 0xC0) != 0x80)
			count++;
	return count;
}

size_t utf8_cut(const char *s, size_t n, size_t max)
{
	if (n <= max)
		return n;
	/* A character has at most three continuation bytes: backing over
	 * more would only skip garbage, which validation reports. */
	size_t j = max;
	while (j > 0 && max - j < 3 && ((unsigned char)s[j] & 0xC0) == 0x80)
		j--;
	return ((unsigned char)s[j] & 0xC0) == 0x80 ? max : j;
}
