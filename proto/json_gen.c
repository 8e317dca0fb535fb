/* SPDX-License-Identifier: MIT */
/*
 * The JSON generator: string quoting (one pass, clean runs copied whole)
 * and jgen, which writes compact JSON into a struct buf, separators decided
 * by one byte of state per open container.
 */
#include "proto/json.h"
#include "proto/json_internal.h"

#ifdef __SSE2__
#include <emmintrin.h>
#endif
#include <math.h>
#include <stdio.h>
#include <string.h>

#ifdef __SSE2__
/* The bytes of a block of 16 that need escaping, as a bit mask. */
static inline unsigned dirty_mask16(__m128i x)
{
	const __m128i quote = _mm_set1_epi8('"'), backslash = _mm_set1_epi8('\\');
	const __m128i below = _mm_set1_epi8(0x1f);
	/* x <= 0x1f, unsigned: the larger of x and 0x1f is 0x1f. */
	__m128i ctl = _mm_cmpeq_epi8(_mm_max_epu8(x, below), below);
	__m128i hit = _mm_or_si128(ctl, _mm_or_si128(_mm_cmpeq_epi8(x, quote), _mm_cmpeq_epi8(x, backslash)));
	return (unsigned)_mm_movemask_epi8(hit);
}
#endif

/* Index of the first byte at or after i that needs escaping, or n. */
static inline size_t next_dirty(const char *s, size_t i, size_t n)
{
#ifdef __SSE2__
	/* Sixteen bytes at a time where SSE2 is there (all of x86-64): file
	 * contents are quoted whole into answers, and this scan was the
	 * largest share of a read_file call's instructions. */
	while (i + 16 <= n) {
		unsigned m = dirty_mask16(_mm_loadu_si128((const __m128i *)(const void *)(s + i)));
		if (m)
			return i + (size_t)__builtin_ctz(m);
		i += 16;
	}
#endif
	while (i + 8 <= n) {
		uint64_t w;
		memcpy(&w, s + i, 8);
		uint64_t d = json_word_dirty(w);
		if (d)
			return i + ((size_t)__builtin_ctzll(d) >> 3);
		i += 8;
	}
	while (i < n) {
		unsigned char c = (unsigned char)s[i];
		if (c < 0x20 || c == '"' || c == '\\')
			return i;
		i++;
	}
	return n;
}

/* Writes the escape of c (one of the bytes next_dirty stops at) at o;
 * returns the end. */
static inline char *put_escape(char *o, unsigned char c)
{
	static const char hex[] = "0123456789abcdef";
	*o++ = '\\';
	switch (c) {
	case '"': *o++ = '"'; break;
	case '\\': *o++ = '\\'; break;
	case '\n': *o++ = 'n'; break;
	case '\r': *o++ = 'r'; break;
	case '\t': *o++ = 't'; break;
	case '\b': *o++ = 'b'; break;
	case '\f': *o++ = 'f'; break;
	default:
		*o++ = 'u';
		*o++ = '0';
		*o++ = '0';
		*o++ = hex[c >> 4];
		*o++ = hex[c & 15];
	}
	return o;
}

void json_quote(struct buf *out, const char *s, size_t n)
{
	/* One pass: room for the text plus a little is reserved up front and
	 * grown only when escapes use it. */
	buf_reserve(out, n + n / 16 + 40);
	char *o = out->data + out->len;
	*o++ = '"';
	size_t i = 0;
#ifdef __SSE2__
	/* Sixteen bytes at a time, copied as they are scanned: stored whole,
	 * the output advanced past the clean ones, the first dirty one
	 * escaped. Text with a newline every line (a file's) then costs a
	 * block store per 16 bytes and no call per run. */
	while (i + 16 <= n) {
		/* The block and one escape (6 bytes) fit. */
		if ((size_t)(out->data + out->cap - o) <= 16 + 6 + 2) {
			out->len = (size_t)(o - out->data);
			buf_reserve(out, 24 + (n - i) + (n - i) / 8);
			o = out->data + out->len;	/* reserving may move the contents */
		}
		__m128i x = _mm_loadu_si128((const __m128i *)(const void *)(s + i));
		_mm_storeu_si128((__m128i *)(void *)o, x);
		unsigned m = dirty_mask16(x);
		if (!m) {
			i += 16;
			o += 16;
			continue;
		}
		size_t k = (size_t)__builtin_ctz(m);
		o = put_escape(o + k, (unsigned char)s[i + k]);
		i += k + 1;
	}
#endif
	while (i < n) {
		size_t d = next_dirty(s, i, n);
		/* The run, one escape (at most 6 bytes) and the closing quote. */
		size_t need = (d - i) + 8;
		if ((size_t)(out->data + out->cap - o) <= need) {
			out->len = (size_t)(o - out->data);
			buf_reserve(out, need + (n - d) + (n - d) / 8);
			o = out->data + out->len;
		}
		memcpy(o, s + i, d - i);
		o += d - i;
		if (d < n)
			o = put_escape(o, (unsigned char)s[d]);
		i = d + 1;
	}
	out->len = (size_t)(o - out->data);
	buf_reserve(out, 2);
	out->data[out->len++] = '"';
	out->data[out->len] = '\0';
}
/* --- generator -------------------------------------------------------- */

/*
 * Our own, not yajl's: every answer is a handful of keys and values, and
 * yajl_gen escaped them a character at a time through a print callback
 * (about a quarter of a small call's instructions), capped nesting at 128
 * (a parsed value may be nested up to limits.max_json_depth, 1024 at most)
 * and let encoded surrogates through. Here strings are checked as strict
 * UTF-8 and quoted in one pass (json_quote), and a byte of state per open
 * container says which separator comes next.
 */
enum gen_state {
	GEN_ARR_FIRST,		/* in an array, before its first element */
	GEN_ARR_MORE,		/* in an array, after an element: ',' */
	GEN_OBJ_FIRST,		/* in an object, before its first key */
	GEN_OBJ_MORE,		/* in an object, after a member: ',' before the key */
	GEN_OBJ_VALUE,		/* in an object, after a key and ':' */
};

#define GEN_INLINE_DEPTH 32

struct jgen {
	struct buf *out;
	size_t depth, cap;
	uint8_t *st;				/* state per open container */
	uint8_t inline_st[GEN_INLINE_DEPTH];
};

struct jgen *jgen_new(struct buf *out)
{
	struct jgen *g = xmalloc(sizeof(*g));
	g->out = out;
	g->depth = 0;
	g->cap = GEN_INLINE_DEPTH;
	g->st = g->inline_st;
	return g;
}

struct jgen *jgen_free(struct jgen *g)
{
	if (g) {
		if (g->st != g->inline_st)
			free(g->st);
		free(g);
	}
	return NULL;
}

void jgen_reset(struct jgen *g)
{
	g->depth = 0;
}

/* True when the next thing written is an object's key. */
static inline bool gen_at_key(const struct jgen *g)
{
	return g->depth && g->st[g->depth - 1] != GEN_OBJ_VALUE && g->st[g->depth - 1] >= GEN_OBJ_FIRST;
}

/* Writes the separator a value needs where the generator stands. */
static inline void gen_before_value(struct jgen *g)
{
	if (!g->depth)
		return;
	uint8_t *s = &g->st[g->depth - 1];
	switch (*s) {
	case GEN_ARR_FIRST:
		*s = GEN_ARR_MORE;
		break;
	case GEN_ARR_MORE:
		buf_putc(g->out, ',');
		break;
	case GEN_OBJ_VALUE:
		*s = GEN_OBJ_MORE;
		break;
	}
}

static void gen_push(struct jgen *g, enum gen_state s)
{
	if (g->depth == g->cap) {
		size_t cap = g->cap * 2;
		uint8_t *st = xmalloc(cap);
		memcpy(st, g->st, g->depth);
		if (g->st != g->inline_st)
			free(g->st);
		g->st = st;
		g->cap = cap;
	}
	g->st[g->depth++] = (uint8_t)s;
}

void jgen_obj_open(struct jgen *g)
{
	gen_before_value(g);
	buf_putc(g->out, '{');
	gen_push(g, GEN_OBJ_FIRST);
}

void jgen_obj_close(struct jgen *g)
{
	if (g->depth)
		g->depth--;
	buf_putc(g->out, '}');
}

void jgen_arr_open(struct jgen *g)
{
	gen_before_value(g);
	buf_putc(g->out, '[');
	gen_push(g, GEN_ARR_FIRST);
}

void jgen_arr_close(struct jgen *g)
{
	if (g->depth)
		g->depth--;
	buf_putc(g->out, ']');
}

void json_quote_utf8(struct buf *out, const char *s, size_t n)
{
	/* Keys and short values are mostly printable ASCII with nothing to
	 * escape: copied at once, without the scans set up for long text. */
	if (n <= 32) {
		size_t i = 0;
		while (i < n && (unsigned char)s[i] >= 0x20 && (unsigned char)s[i] < 0x80 && s[i] != '"' &&
		       s[i] != '\\')
			i++;
		if (i == n) {
			buf_reserve(out, n + 2);
			char *o = out->data + out->len;
			o[0] = '"';
			memcpy(o + 1, s, n);
			o[n + 1] = '"';
			out->len += n + 2;
			out->data[out->len] = '\0';
			return;
		}
	}
	if (utf8_valid(s, n)) {
		json_quote(out, s, n);
		return;
	}
	struct buf b = {0};
	utf8_sanitize(s, n, &b);
	json_quote(out, buf_head(&b), buf_size(&b));
	buf_free(&b);
}

/* Writes an object key and its ':'. */
static void gen_key(struct jgen *g, const char *key, size_t n)
{
	if (g->depth) {
		uint8_t *s = &g->st[g->depth - 1];
		if (*s == GEN_OBJ_MORE)
			buf_putc(g->out, ',');
		*s = GEN_OBJ_VALUE;
	}
	json_quote_utf8(g->out, key, n);
	buf_putc(g->out, ':');
}

void jgen_key(struct jgen *g, const char *key)
{
	gen_key(g, key, strlen(key));
}

void jgen_strn(struct jgen *g, const char *s, size_t n)
{
	if (!s) {
		jgen_null(g);
		return;
	}
	/* A string where a key is due is that key, as with yajl. */
	if (gen_at_key(g)) {
		gen_key(g, s, n);
		return;
	}
	gen_before_value(g);
	json_quote_utf8(g->out, s, n);
}

void jgen_strn_valid(struct jgen *g, const char *s, size_t n)
{
	gen_before_value(g);
	json_quote(g->out, s, n);
}

void jgen_str(struct jgen *g, const char *s)
{
	jgen_strn(g, s, s ? strlen(s) : 0);
}

void jgen_int(struct jgen *g, int64_t v)
{
	char tmp[21];
	char *end = tmp + sizeof(tmp);
	/* The magnitude as unsigned: -INT64_MIN does not fit an int64. */
	char *p = fmt_u64(end, v < 0 ? -(uint64_t)v : (uint64_t)v);
	if (v < 0)
		*--p = '-';
	jgen_raw(g, p, (size_t)(end - p));
}

void jgen_double(struct jgen *g, double v)
{
	if (!isfinite(v)) {
		jgen_null(g);
		return;
	}
	char tmp[40];
	int n = snprintf(tmp, sizeof(tmp), "%.15g", v);
	if (strtod(tmp, NULL) != v)
		n = snprintf(tmp, sizeof(tmp), "%.17g", v);
	jgen_raw(g, tmp, (size_t)n);
}

void jgen_bool(struct jgen *g, bool v)
{
	jgen_raw(g, v ? "true" : "false", v ? 4 : 5);
}

void jgen_null(struct jgen *g)
{
	jgen_raw(g, "null", 4);
}

void jgen_raw(struct jgen *g, const char *json, size_t n)
{
	gen_before_value(g);
	buf_append(g->out, json, n);
}

void jgen_value(struct jgen *g, const struct json *v)
{
	if (!v) {
		jgen_null(g);
		return;
	}
	switch (v->type) {
	case JSON_NULL:
		jgen_null(g);
		break;
	case JSON_BOOL:
		jgen_bool(g, v->u.b);
		break;
	case JSON_NUMBER:
		jgen_raw(g, v->u.num.raw, v->u.num.raw_len);
		break;
	case JSON_STRING:
		jgen_strn(g, v->u.str.s, v->u.str.len);
		break;
	case JSON_ARRAY:
		jgen_arr_open(g);
		for (size_t i = 0; i < v->u.arr.n; i++)
			jgen_value(g, v->u.arr.items[i]);
		jgen_arr_close(g);
		break;
	case JSON_OBJECT:
		jgen_obj_open(g);
		for (size_t i = 0; i < v->u.obj.n; i++) {
			gen_key(g, v->u.obj.members[i].key, v->u.obj.members[i].key_len);
			jgen_value(g, v->u.obj.members[i].value);
		}
		jgen_obj_close(g);
		break;
	}
}

void jgen_kv_str(struct jgen *g, const char *key, const char *s)
{
	jgen_key(g, key);
	jgen_str(g, s);
}

void jgen_kv_int(struct jgen *g, const char *key, int64_t v)
{
	jgen_key(g, key);
	jgen_int(g, v);
}

void jgen_kv_bool(struct jgen *g, const char *key, bool v)
{
	jgen_key(g, key);
	jgen_bool(g, v);
}

void jgen_kv_raw(struct jgen *g, const char *key, const char *json, size_t n)
{
	jgen_key(g, key);
	jgen_raw(g, json, n);
}
