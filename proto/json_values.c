/* SPDX-License-Identifier: MIT */
/*
 * JSON values once parsed: number nodes filled from their text (both
 * parsers use it), accessors, deep equality, the canonical form used to
 * compare arguments, and line/column positions for messages.
 */
#include "proto/json.h"
#include "proto/json_internal.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Reads eight ASCII digits at p as a number: false if one is not a digit.
 * The combining multiplications are those of Lemire's "fast integer
 * parsing" (little-endian; elsewhere the caller's loop does the work). */
static inline bool digits8(const char *p, uint32_t *ret)
{
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
	uint64_t w;
	memcpy(&w, p, 8);
	if ((w & 0xF0F0F0F0F0F0F0F0ull) != 0x3030303030303030ull ||
	    ((w + 0x0606060606060606ull) & 0xF0F0F0F0F0F0F0F0ull) != 0x3030303030303030ull)
		return false;
	w -= 0x3030303030303030ull;
	w = w * 10 + (w >> 8);	/* pairs of digits in every other byte */
	w = ((w & 0x000000FF000000FFull) * (100 + (1000000ull << 32)) +
	     ((w >> 16) & 0x000000FF000000FFull) * (1 + (10000ull << 32))) >> 32;
	*ret = (uint32_t)w;
	return true;
#else
	(void)p;
	(void)ret;
	return false;
#endif
}

/* Fills a number node from its text. */
/* Whether d is finite with no fraction: a double of magnitude 2^53 or more
 * is a whole number; below that, the round trip through int64_t says. (Not
 * floor(): libm would be loaded for it alone, some 300 KiB of the
 * daemon's resident memory.) */
bool json_double_integral(double d)
{
	if (!isfinite(d))
		return false;
	if (d >= 0x1p53 || d <= -0x1p53)
		return true;
	return d == (double)(int64_t)d;
}

void json_set_number(struct json *v, const char *raw, size_t n)
{
	char tmp[64];
	char *heap = NULL;
	char *s = tmp;

	v->u.num.raw = raw;
	v->u.num.raw_len = n;
	/* Fast path: short integers (ids, counts) need neither strtod nor
	 * strtoll. */
	if (n <= 18) {
		size_t i = raw[0] == '-';
		int64_t x = 0;
		size_t k = i;
		uint32_t eight;
		/* Eight digits at a time while eight remain (ids are often
		 * long: times, sequence numbers), then one by one. */
		while (n - k >= 8 && digits8(raw + k, &eight)) {
			x = x * 100000000 + eight;
			k += 8;
		}
		for (; k < n; k++) {
			unsigned d = (unsigned char)raw[k] - (unsigned)'0';
			if (d > 9)
				break;
			x = x * 10 + d;
		}
		if (i < n && k == n) {
			v->u.num.i = i ? -x : x;
			v->u.num.d = (double)v->u.num.i;
			v->u.num.is_int = true;
			return;
		}
	}
	if (n >= sizeof(tmp))
		s = heap = xmalloc(n + 1);
	memcpy(s, raw, n);
	s[n] = '\0';
	v->u.num.d = strtod(s, NULL);
	if (!strpbrk(s, ".eE")) {
		errno = 0;
		long long i = strtoll(s, NULL, 10);
		if (errno == 0) {
			v->u.num.i = i;
			v->u.num.is_int = true;
		}
	} else if (json_double_integral(v->u.num.d) && v->u.num.d < 9.2e18 && v->u.num.d > -9.2e18) {
		v->u.num.i = (int64_t)v->u.num.d;
		v->u.num.is_int = true;
	}
	free(heap);
}

int json_key_cmp(const void *a, const void *b)
{
	const struct json_member *x = *(const struct json_member *const *)a;
	const struct json_member *y = *(const struct json_member *const *)b;
	size_t n = MIN(x->key_len, y->key_len);
	int c = memcmp(x->key, y->key, n);
	if (c)
		return c;
	return x->key_len < y->key_len ? -1 : x->key_len > y->key_len;
}

/* --- accessors -------------------------------------------------------- */

const struct json *json_get(const struct json *obj, const char *key)
{
	if (!obj || obj->type != JSON_OBJECT)
		return NULL;
	size_t n = strlen(key);
	for (size_t i = 0; i < obj->u.obj.n; i++) {
		const struct json_member *m = &obj->u.obj.members[i];
		if (m->key_len == n && memcmp(m->key, key, n) == 0)
			return m->value;
	}
	return NULL;
}

const char *json_str(const struct json *v)
{
	return v && v->type == JSON_STRING ? v->u.str.s : NULL;
}

bool json_is_int(const struct json *v)
{
	if (!v || v->type != JSON_NUMBER)
		return false;
	if (v->u.num.is_int)
		return true;
	return json_double_integral(v->u.num.d);
}

bool json_get_int(const struct json *v, int64_t *ret)
{
	if (!v || v->type != JSON_NUMBER || !v->u.num.is_int)
		return false;
	*ret = v->u.num.i;
	return true;
}

bool json_is_true(const struct json *v)
{
	return v && v->type == JSON_BOOL && v->u.b;
}

const char *json_type_name(enum json_type t)
{
	static const char *const names[] = {
		[JSON_NULL] = "null", [JSON_BOOL] = "boolean", [JSON_NUMBER] = "number",
		[JSON_STRING] = "string", [JSON_ARRAY] = "array", [JSON_OBJECT] = "object",
	};
	return (unsigned)t < ELEMENTSOF(names) ? names[t] : "?";
}

const char *json_kind_name(const struct json *v)
{
	if (!v)
		return "nothing";
	if (v->type == JSON_NUMBER && json_is_int(v))
		return "integer";
	return json_type_name(v->type);
}

bool json_equal(const struct json *a, const struct json *b)
{
	if (!a || !b)
		return a == b;
	if (a->type != b->type)
		return false;
	switch (a->type) {
	case JSON_NULL:
		return true;
	case JSON_BOOL:
		return a->u.b == b->u.b;
	case JSON_NUMBER:
		if (a->u.num.is_int && b->u.num.is_int)
			return a->u.num.i == b->u.num.i;
		return a->u.num.d == b->u.num.d;
	case JSON_STRING:
		return a->u.str.len == b->u.str.len &&
		       memcmp(a->u.str.s, b->u.str.s, a->u.str.len) == 0;
	case JSON_ARRAY:
		if (a->u.arr.n != b->u.arr.n)
			return false;
		for (size_t i = 0; i < a->u.arr.n; i++)
			if (!json_equal(a->u.arr.items[i], b->u.arr.items[i]))
				return false;
		return true;
	case JSON_OBJECT:
		if (a->u.obj.n != b->u.obj.n)
			return false;
		for (size_t i = 0; i < a->u.obj.n; i++) {
			const struct json_member *m = &a->u.obj.members[i];
			bool found = false;
			for (size_t j = 0; j < b->u.obj.n; j++) {
				const struct json_member *o = &b->u.obj.members[j];
				if (json_same_key(m, o)) {
					if (!json_equal(m->value, o->value))
						return false;
					found = true;
					break;
				}
			}
			if (!found)
				return false;
		}
		return true;
	}
	return false;
}

/*
 * Quotes s as JSON text that parses back to the same bytes. A lone
 * surrogate escape ("\udc00") decodes to bytes that are not UTF-8, which
 * the parser would refuse raw: they are written as that escape again.
 * (Input is strict UTF-8, so nothing else invalid can be in a value; were
 * it there, it would come out as U+FFFD.)
 */
static void quote_lossless(struct buf *out, const char *s, size_t n)
{
	if (utf8_valid(s, n)) {
		json_quote(out, s, n);
		return;
	}
	struct buf run = {0};
	buf_putc(out, '"');
	size_t i = 0;
	while (i < n) {
		size_t ok = utf8_valid_prefix(s + i, n - i);
		if (ok) {
			run.len = run.off = 0;
			json_quote(&run, s + i, ok);
			buf_append(out, buf_head(&run) + 1, buf_size(&run) - 2);
			i += ok;
			continue;
		}
		const unsigned char *u = (const unsigned char *)s + i;
		if (n - i >= 3 && u[0] == 0xED && u[1] >= 0xA0 && u[1] <= 0xBF && (u[2] & 0xC0) == 0x80) {
			unsigned cp = 0xD000u | ((unsigned)(u[1] & 0x3F) << 6) | (u[2] & 0x3F);
			buf_printf(out, "\\u%04x", cp);
			i += 3;
		} else {
			buf_puts(out, "\xef\xbf\xbd");
			i++;
		}
	}
	buf_putc(out, '"');
	buf_free(&run);
}

void json_canonical(const struct json *v, struct buf *out)
{
	if (!v) {
		buf_puts(out, "null");
		return;
	}
	switch (v->type) {
	case JSON_NULL:
		buf_puts(out, "null");
		break;
	case JSON_BOOL:
		buf_puts(out, v->u.b ? "true" : "false");
		break;
	case JSON_NUMBER:
		/* By value, as json_equal() compares: 1000, 1e3 and 1000.0 are
		 * one text; 1.5 and 1.50 another. */
		if (v->u.num.is_int)
			buf_printf(out, "%" PRId64, v->u.num.i);
		else if (isfinite(v->u.num.d))
			buf_printf(out, "%.17g", v->u.num.d);
		else	/* beyond a double (1e400): as written, which parses again */
			buf_append(out, v->u.num.raw, v->u.num.raw_len);
		break;
	case JSON_STRING:
		quote_lossless(out, v->u.str.s, v->u.str.len);
		break;
	case JSON_ARRAY:
		buf_putc(out, '[');
		for (size_t i = 0; i < v->u.arr.n; i++) {
			if (i)
				buf_putc(out, ',');
			json_canonical(v->u.arr.items[i], out);
		}
		buf_putc(out, ']');
		break;
	case JSON_OBJECT: {
		size_t n = v->u.obj.n;
		const struct json_member **m = xreallocarray(NULL, n ? n : 1, sizeof(*m));
		for (size_t i = 0; i < n; i++)
			m[i] = &v->u.obj.members[i];
		qsort(m, n, sizeof(*m), json_key_cmp);
		buf_putc(out, '{');
		for (size_t i = 0; i < n; i++) {
			if (i)
				buf_putc(out, ',');
			quote_lossless(out, m[i]->key, m[i]->key_len);
			buf_putc(out, ':');
			json_canonical(m[i]->value, out);
		}
		buf_putc(out, '}');
		free(m);
		break;
	}
	}
}

void json_line_col(const char *text, size_t len, size_t off, unsigned *line, unsigned *col)
{
	unsigned l = 1, c = 1;
	for (size_t i = 0; i < off && i < len; i++) {
		if (text[i] == '\n') {
			l++;
			c = 1;
		} else if (((unsigned char)text[i] & 0xC0) != 0x80) {
			c++;
		}
	}
	*line = l;
	*col = c;
}
