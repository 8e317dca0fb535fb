/* SPDX-License-Identifier: MIT */
/*
 * The JSON layer: depth limits, duplicate keys, numbers, source spans,
 * UTF-8, canonical form and the generator; the fast parse path, which must
 * take the plain texts, decline the rest, and build exactly the tree the
 * yajl path builds.
 */
#include <check.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include <yajl/yajl_gen.h>

#include "proto/json.h"
#include "proto/json_internal.h"
#include "tests/unit/check_main.h"
#include "tests/unit/json_same.h"

static struct json_doc *parse_ok(const char *s)
{
	struct json_doc *doc = NULL;
	struct json_err err;
	int r = json_parse(s, strlen(s), 0, 0, &doc, &err);
	ck_assert_msg(r == 0, "parse of %s failed: %s", s, err.msg);
	return doc;
}

static enum json_error parse_fail(const char *s, size_t n, unsigned flags, unsigned depth, size_t *off)
{
	struct json_doc *doc = NULL;
	struct json_err err;
	ck_assert_int_eq(json_parse(s, n, flags, depth, &doc, &err), -EINVAL);
	ck_assert_ptr_null(doc);
	if (off)
		*off = err.offset;
	return err.code;
}

START_TEST(depth_limit_is_exact)
{
	char buf[300];
	for (int depth = 63; depth <= 65; depth++) {
		memset(buf, '[', (size_t)depth);
		memset(buf + depth, ']', (size_t)depth);
		struct json_doc *doc = NULL;
		int r = json_parse(buf, (size_t)depth * 2, 0, 64, &doc, NULL);
		ck_assert_int_eq(r, depth <= 64 ? 0 : -EINVAL);
		json_doc_unref(doc);
		/* The fast path stops at the same depth (0: the default, 64). */
		doc = NULL;
		ck_assert_int_eq(json_parse_fast(buf, (size_t)depth * 2, 0, 0, &doc), depth <= 64);
		json_doc_unref(doc);
	}
}
END_TEST

START_TEST(million_deep_is_an_error)
{
	size_t n = 1000000;
	char *s = xmalloc(n);
	memset(s, '[', n);
	ck_assert_int_eq(parse_fail(s, n, 0, 0, NULL), JSON_ERR_DEPTH);
	memset(s, '{', n);
	ck_assert_int_eq(parse_fail(s, n, 0, 0, NULL), JSON_ERR_SYNTAX);	/* keys must be strings */
	free(s);
}
END_TEST

START_TEST(duplicate_keys_refused)
{
	size_t off;
	const char *s = "{\"a\":1,\"b\":2,\"a\":3}";
	ck_assert_int_eq(parse_fail(s, strlen(s), 0, 0, &off), JSON_ERR_DUPKEY);
	ck_assert_uint_eq(off, 17);
	/* A large object takes the sorting path. */
	struct buf b = {0};
	buf_putc(&b, '{');
	for (int i = 0; i < 5000; i++)
		buf_printf(&b, "%s\"k%d\":%d", i ? "," : "", i, i);
	buf_puts(&b, ",\"k4321\":0}");
	ck_assert_int_eq(parse_fail(buf_head(&b), buf_size(&b), 0, 0, NULL), JSON_ERR_DUPKEY);
	b.len -= 11;
	buf_puts(&b, "}");
	struct json_doc *doc = parse_ok(buf_head(&b));
	ck_assert_uint_eq(json_doc_root(doc)->u.obj.n, 5000);
	json_doc_unref(doc);
	buf_free(&b);
}
END_TEST

START_TEST(numbers)
{
	struct json_doc *doc = parse_ok("[1, 1.0, 1e2, -5, 1.5, 12345678901234567890123, 0.1]");
	const struct json *a = json_doc_root(doc);
	int64_t v;
	ck_assert(json_get_int(a->u.arr.items[0], &v) && v == 1);
	ck_assert(json_get_int(a->u.arr.items[1], &v) && v == 1);
	ck_assert(json_get_int(a->u.arr.items[2], &v) && v == 100);
	ck_assert(json_get_int(a->u.arr.items[3], &v) && v == -5);
	ck_assert(!json_is_int(a->u.arr.items[4]));
	ck_assert(!json_get_int(a->u.arr.items[5], &v));
	ck_assert(json_is_int(a->u.arr.items[5]));	/* integral, just big */
	ck_assert_str_eq(json_kind_name(a->u.arr.items[1]), "integer");
	ck_assert_str_eq(json_kind_name(a->u.arr.items[6]), "number");
	ck_assert(json_equal(a->u.arr.items[0], a->u.arr.items[1]));
	ck_assert(!json_equal(a->u.arr.items[0], a->u.arr.items[4]));
	/* Numbers keep their text. */
	ck_assert_uint_eq(a->u.arr.items[5]->u.num.raw_len, 23);
	json_doc_unref(doc);
	/* Whole or not, without libm, at the edges of a double's precision. */
	ck_assert(json_double_integral(0.0) && json_double_integral(-0.0) && json_double_integral(-7.0));
	ck_assert(json_double_integral(9007199254740992.0) && json_double_integral(-9007199254740994.0));
	ck_assert(json_double_integral(1e300) && json_double_integral(-9.3e18));
	ck_assert(!json_double_integral(0.5) && !json_double_integral(-2.25) && !json_double_integral(4503599627370495.5));
	ck_assert(!json_double_integral(1.0 / 0.0) && !json_double_integral(0.0 / 0.0));
	doc = parse_ok("[-1e3, 2.5e0, 9.3e18]");
	a = json_doc_root(doc);
	ck_assert(json_get_int(a->u.arr.items[0], &v) && v == -1000);
	ck_assert(!json_is_int(a->u.arr.items[1]));
	ck_assert(json_is_int(a->u.arr.items[2]) && !json_get_int(a->u.arr.items[2], &v));
	json_doc_unref(doc);
}
END_TEST

/* Integers of every length to 19 digits decode exactly, whichever way the
 * digits are read (eight at a time or one by one), signed or not, and a
 * number with a fraction or an exponent is never taken for its digits. */
START_TEST(integer_digits)
{
	char text[64];
	for (int len = 1; len <= 19; len++) {
		/* 1, 12, 123, ... 1234567890123456789 and 9, 99, ... */
		for (int pattern = 0; pattern < 2; pattern++) {
			if (len == 19 && pattern)
				continue;	/* nineteen nines overflow int64 */
			int64_t want = 0;
			for (int k = 0; k < len; k++) {
				int d = pattern ? 9 : (k + 1) % 10;
				text[k + 1] = (char)('0' + d);
				want = want * 10 + d;
			}
			for (int neg = 0; neg < 2; neg++) {
				const char *t = neg ? text : text + 1;
				text[0] = '-';
				text[len + 1] = '\0';
				struct json_doc *doc = parse_ok(t);
				int64_t v = 0;
				ck_assert_msg(json_get_int(json_doc_root(doc), &v) && v == (neg ? -want : want),
					      "%s decoded as %" PRId64, t, v);
				json_doc_unref(doc);
			}
		}
	}
	struct json_doc *doc = parse_ok("[12345678.5, 123456789e3, 1234567812345678e-8]");
	const struct json *a = json_doc_root(doc);
	int64_t v;
	ck_assert(!json_is_int(a->u.arr.items[0]));
	ck_assert(json_get_int(a->u.arr.items[1], &v) && v == 123456789000);
	ck_assert(!json_is_int(a->u.arr.items[2]));
	json_doc_unref(doc);
}
END_TEST

START_TEST(spans_point_at_the_source)
{
	const char *s = "{ \"id\" : \"a\\\"b\\\\\" , \"n\":1.50e3, \"o\":{\"x\":[true,null]} }";
	struct json_doc *doc = parse_ok(s);
	const struct json *root = json_doc_root(doc);
	const struct json *id = json_get(root, "id");
	ck_assert_str_eq(id->u.str.s, "a\"b\\");
	ck_assert_int_eq(strncmp(s + id->off, "\"a\\\"b\\\\\"", id->len), 0);
	ck_assert_uint_eq(id->len, 8);
	const struct json *n = json_get(root, "n");
	ck_assert_int_eq(strncmp(s + n->off, "1.50e3", n->len), 0);
	const struct json *o = json_get(root, "o");
	ck_assert_int_eq(strncmp(s + o->off, "{\"x\":[true,null]}", o->len), 0);
	ck_assert_uint_eq(root->off, 0);
	json_doc_unref(doc);
}
END_TEST

START_TEST(syntax_errors)
{
	size_t off;
	ck_assert_int_eq(parse_fail("{\"a\":1} x", 9, 0, 0, NULL), JSON_ERR_SYNTAX);
	ck_assert_int_eq(parse_fail("[1,2", 4, 0, 0, &off), JSON_ERR_SYNTAX);
	ck_assert_uint_eq(off, 4);
	ck_assert_int_eq(parse_fail("   ", 3, 0, 0, NULL), JSON_ERR_EMPTY);
	ck_assert_int_eq(parse_fail("\"\xff\"", 3, 0, 0, NULL), JSON_ERR_SYNTAX);
	ck_assert_int_eq(parse_fail("{/*c*/}", 7, 0, 0, NULL), JSON_ERR_SYNTAX);
	struct json_doc *doc = NULL;
	ck_assert_int_eq(json_parse("{/*c*/ \"a\": 1 // x\n}", 20, JSON_ALLOW_COMMENTS, 0, &doc, NULL), 0);
	json_doc_unref(doc);
}
END_TEST

/* JSON text is strict UTF-8, wherever the bytes stand (yajl's own check
 * lets overlong forms, encoded surrogates and code points past U+10FFFF
 * through), and its white space is space, tab, LF and CR only. */
START_TEST(strict_utf8_and_white_space)
{
	static const struct {
		const char *text;
		size_t off;
	} bad[] = {
		{ "{\"a\":\"x\xc0\xaf\"}", 7 },		/* overlong '/' */
		{ "{\"a\":\"\xe0\x80\x80\"}", 6 },	/* overlong NUL */
		{ "{\"a\":\"\xed\xa0\x80\"}", 6 },	/* an encoded surrogate */
		{ "{\"a\":\"\xf4\x90\x80\x80\"}", 6 },	/* past U+10FFFF */
		{ "{\"a\":\"\xf5\x80\x80\x80\"}", 6 },
		{ "{\"a\":\"\xc1\x80\"}", 6 },
		{ "{\"\xc0\xaf\":1}", 2 },		/* in a key */
		{ "[1,\"\\u0041\xed\xa0\x80\"]", 10 },	/* past an escape (yajl's path) */
		{ "{\"a\":1,\f\"b\":2}", 7 },		/* form feed */
		{ "[1,\v2]", 3 },			/* vertical tab */
		{ "{\"a\":1} \f", 8 },
	};
	for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
		size_t off = 0;
		ck_assert_int_eq(parse_fail(bad[i].text, strlen(bad[i].text), 0, 0, &off), JSON_ERR_SYNTAX);
		ck_assert_msg(off == bad[i].off, "case %zu: offset %zu, not %zu", i, off, bad[i].off);
	}
	/* Not in comments either, where comments are allowed. */
	ck_assert_int_eq(parse_fail("{/* \xed\xa0\x80 */}", 12, JSON_ALLOW_COMMENTS, 0, NULL), JSON_ERR_SYNTAX);
	/* Valid UTF-8 of every length passes, by either path. */
	struct json_doc *doc = parse_ok("{\"\xc3\xa9\":\"\xe2\x82\xac\xf0\x9d\x84\x9e\xf4\x8f\xbf\xbf\",\"b\":\"\\u0041\xc3\xa9\"}");
	json_doc_unref(doc);
	/* A lone surrogate escape is JSON (its value is not UTF-8): the
	 * canonical form keeps it as an escape, so that it parses again. */
	doc = parse_ok("[\"a\\udc00b\",{\"k\\udc01\":1}]");
	struct buf c = {0};
	json_canonical(json_doc_root(doc), &c);
	ck_assert_str_eq(buf_head(&c), "[\"a\\udc00b\",{\"k\\udc01\":1}]");
	struct json_doc *again = parse_ok(buf_head(&c));
	ck_assert(json_equal(json_doc_root(doc), json_doc_root(again)));
	json_doc_unref(again);
	json_doc_unref(doc);
	buf_free(&c);
}
END_TEST

START_TEST(canonical_sorts_keys)
{
	struct json_doc *a = parse_ok("{\"b\":[1,{\"d\":1,\"c\":\"\\n\"}],\"a\":null}");
	struct json_doc *b = parse_ok("{ \"a\" : null , \"b\" : [ 1 , { \"c\" : \"\\u000a\" , \"d\" : 1 } ] }");
	struct buf x = {0}, y = {0};
	json_canonical(json_doc_root(a), &x);
	json_canonical(json_doc_root(b), &y);
	ck_assert_str_eq(buf_head(&x), "{\"a\":null,\"b\":[1,{\"c\":\"\\n\",\"d\":1}]}");
	ck_assert_str_eq(buf_head(&x), buf_head(&y));
	ck_assert(json_equal(json_doc_root(a), json_doc_root(b)));
	buf_free(&x);
	buf_free(&y);
	json_doc_unref(a);
	json_doc_unref(b);
}
END_TEST

/* Numbers are compared by value, as json_equal() does: an agent that writes
 * 1e3 where it wrote 1000 sends the same arguments. */
START_TEST(canonical_numbers_by_value)
{
	struct json_doc *a = parse_ok("{\"n\":1000,\"f\":1.5,\"z\":-0.25,\"l\":[1,2]}");
	struct json_doc *b = parse_ok("{\"l\":[1.0,2e0],\"z\":-2.5e-1,\"f\":1.50,\"n\":1e3}");
	struct json_doc *c = parse_ok("{\"l\":[1,2],\"z\":-0.25,\"f\":1.5,\"n\":1001}");
	struct buf x = {0}, y = {0}, z = {0};
	json_canonical(json_doc_root(a), &x);
	json_canonical(json_doc_root(b), &y);
	json_canonical(json_doc_root(c), &z);
	ck_assert_str_eq(buf_head(&x), "{\"f\":1.5,\"l\":[1,2],\"n\":1000,\"z\":-0.25}");
	ck_assert_str_eq(buf_head(&x), buf_head(&y));
	ck_assert_str_ne(buf_head(&x), buf_head(&z));
	/* Beyond a double: as written, so that it parses again. */
	struct json_doc *h = parse_ok("[1e400,-1E+999]");
	struct buf w = {0};
	json_canonical(json_doc_root(h), &w);
	ck_assert_str_eq(buf_head(&w), "[1e400,-1E+999]");
	buf_free(&w);
	json_doc_unref(h);
	buf_free(&x);
	buf_free(&y);
	buf_free(&z);
	json_doc_unref(a);
	json_doc_unref(b);
	json_doc_unref(c);
}
END_TEST

START_TEST(utf8_helpers)
{
	ck_assert(utf8_valid("héllo €𝄞", strlen("héllo €𝄞")));
	ck_assert(!utf8_valid("\xc0\xaf", 2));		/* overlong */
	ck_assert(!utf8_valid("\xed\xa0\x80", 3));	/* surrogate */
	ck_assert(!utf8_valid("\xe2\x82", 2));		/* cut short */
	uint32_t cp = 0;
	ck_assert_uint_eq(utf8_decode("\xc3\xa9x", 3, &cp), 2);
	ck_assert_uint_eq(cp, 0xE9);
	ck_assert_uint_eq(utf8_decode("\xf0\x9d\x84\x9e", 4, &cp), 4);
	ck_assert_uint_eq(cp, 0x1D11E);
	ck_assert_uint_eq(utf8_decode("\xed\xa0\x80", 3, &cp), 0);	/* surrogate */
	ck_assert_uint_eq(utf8_decode("\xf0\x9d\x84", 3, &cp), 0);		/* cut short */
	struct buf b = {0};
	utf8_sanitize("a\xffz", 3, &b);
	ck_assert_str_eq(buf_head(&b), "a\xef\xbf\xbdz");
	buf_free(&b);
	ck_assert_uint_eq(utf8_length("é𝄞x", strlen("é𝄞x")), 3);
}
END_TEST

START_TEST(generator_output_is_one_line_of_valid_utf8)
{
	struct buf b = {0};
	struct jgen *g = jgen_new(&b);
	jgen_obj_open(g);
	jgen_kv_str(g, "text", "line1\nline2\t\"q\"\\ \x01");
	jgen_key(g, "bad");
	jgen_strn(g, "x\xff\xfey", 4);
	jgen_kv_raw(g, "raw", "[1,2]", 5);
	jgen_key(g, "d");
	jgen_double(g, 0.1);
	jgen_key(g, "nan");
	jgen_double(g, 0.0 / 0.0);
	jgen_obj_close(g);
	jgen_free(g);
	ck_assert_ptr_null(memchr(buf_head(&b), '\n', buf_size(&b)));
	ck_assert(utf8_valid(buf_head(&b), buf_size(&b)));
	ck_assert_str_eq(buf_head(&b), "{\"text\":\"line1\\nline2\\t\\\"q\\\"\\\\ \\u0001\","
				       "\"bad\":\"x\xef\xbf\xbd\xef\xbf\xbdy\",\"raw\":[1,2],\"d\":0.1,\"nan\":null}");
	struct json_doc *doc = parse_ok(buf_head(&b));
	ck_assert_str_eq(json_str(json_get(json_doc_root(doc), "text")), "line1\nline2\t\"q\"\\ \x01");
	json_doc_unref(doc);
	buf_free(&b);
}
END_TEST

START_TEST(line_and_column)
{
	const char *t = "{\n  \"a\": 1,\n  \"é\": x\n}";
	unsigned line, col;
	json_line_col(t, strlen(t), (size_t)(strstr(t, "x") - t), &line, &col);
	ck_assert_uint_eq(line, 3);
	ck_assert_uint_eq(col, 8);
}
END_TEST

START_TEST(documents_are_refcounted)
{
	struct json_doc *doc = parse_ok("{\"a\":[1,2,3]}");
	json_doc_ref(doc);
	ck_assert_ptr_null(json_doc_unref(doc));
	ck_assert_uint_eq(json_get(json_doc_root(doc), "a")->u.arr.n, 3);
	ck_assert_ptr_null(json_doc_unref(doc));
	ck_assert_ptr_null(json_doc_unref(NULL));
}
END_TEST


/* Escaping round-trips: whatever bytes a valid UTF-8 string holds, the
 * quoted text parses back to exactly them (word-at-a-time paths included). */
START_TEST(quote_round_trips)
{
	unsigned seed = 12345;
	for (int t = 0; t < 20000; t++) {
		char s[300];
		size_t n = (size_t)(rand_r(&seed) % 300);
		for (size_t i = 0; i < n; i++) {
			int r = rand_r(&seed) % 10;
			s[i] = r == 0 ? '"' : r == 1 ? '\\' : r == 2 ? (char)(rand_r(&seed) % 32)
								   : (char)('a' + rand_r(&seed) % 26);
		}
		/* A buffer with a consumed prefix: growing it may move its
		 * contents while quoting. */
		struct buf q = {0};
		buf_puts(&q, "0123456789");
		buf_consume(&q, 7);
		json_quote(&q, s, n);
		ck_assert_int_eq(memcmp(buf_head(&q), "789", 3), 0);
		struct json_doc *doc = NULL;
		ck_assert_int_eq(json_parse(buf_head(&q) + 3, buf_size(&q) - 3, 0, 0, &doc, NULL), 0);
		const struct json *v = json_doc_root(doc);
		ck_assert_uint_eq(v->u.str.len, n);
		ck_assert_int_eq(memcmp(v->u.str.s, s, n), 0);
		json_doc_unref(doc);
		buf_free(&q);
	}
}
END_TEST

/* The byte-by-byte meaning of json_quote, to hold the vector paths to. */
static void quote_reference(struct buf *out, const unsigned char *s, size_t n)
{
	buf_putc(out, '"');
	for (size_t i = 0; i < n; i++) {
		unsigned char c = s[i];
		if (c == '"' || c == '\\')
			buf_printf(out, "\\%c", c);
		else if (c == '\n')
			buf_puts(out, "\\n");
		else if (c == '\r')
			buf_puts(out, "\\r");
		else if (c == '\t')
			buf_puts(out, "\\t");
		else if (c == '\b')
			buf_puts(out, "\\b");
		else if (c == '\f')
			buf_puts(out, "\\f");
		else if (c < 0x20)
			buf_printf(out, "\\u%04x", c);
		else
			buf_putc(out, (char)c);
	}
	buf_putc(out, '"');
}

/* Every byte that needs escaping, and its neighbours that do not (0x20,
 * 0x7f, bytes >= 0x80), is found at every offset of runs long enough for
 * the 16- and 8-byte scans; utf8_valid finds a bad byte anywhere in a
 * long ASCII run and accepts a good sequence anywhere. */
START_TEST(vector_scans_see_every_offset)
{
	static const unsigned char probes[] = { 0x00, 0x01, 0x0a, 0x1f, 0x20, '"', '\\', '/', 0x7f, 0x80, 0xc3,
						0xff };
	unsigned char s[80];
	for (size_t len = 1; len <= sizeof(s); len += 13) {
		for (size_t at = 0; at < len; at++) {
			for (size_t k = 0; k < sizeof(probes); k++) {
				for (size_t i = 0; i < len; i++)
					s[i] = (unsigned char)('a' + i % 26);
				s[at] = probes[k];
				struct buf got = {0}, want = {0};
				json_quote(&got, (const char *)s, len);
				quote_reference(&want, s, len);
				ck_assert_msg(buf_size(&got) == buf_size(&want) &&
					      memcmp(buf_head(&got), buf_head(&want), buf_size(&want)) == 0,
					      "byte 0x%02x at %zu of %zu quoted as %s", probes[k], at, len,
					      buf_head(&got));
				buf_free(&got);
				buf_free(&want);
				bool valid = probes[k] < 0x80;
				ck_assert_msg(utf8_valid((const char *)s, len) == valid,
					      "byte 0x%02x at %zu of %zu", probes[k], at, len);
			}
			/* A whole two-byte character at the offset is valid; its
			 * lead byte alone, last, is cut short. */
			if (at + 1 < len) {
				for (size_t i = 0; i < len; i++)
					s[i] = (unsigned char)('a' + i % 26);
				s[at] = 0xc3;
				s[at + 1] = 0xa9;
				ck_assert(utf8_valid((const char *)s, len));
				ck_assert(!utf8_valid((const char *)s, at + 1));
			}
		}
	}
}
END_TEST

/* --- the fast path ---------------------------------------------------- */

struct fast_case {
	const char *text;
	size_t len;		/* 0: strlen(text) */
	unsigned flags;
	unsigned depth;
	bool fast;		/* the fast path must take it (else decline) */
};

#define TAKE(t) { t, 0, 0, 0, true }
#define DECLINE(t) { t, 0, 0, 0, false }

static const struct fast_case fast_cases[] = {
	/* Typical requests. */
	TAKE("{\"jsonrpc\":\"2.0\",\"id\":1234567,\"method\":\"ping\"}"),
	TAKE("{\"jsonrpc\":\"2.0\",\"id\":\"req-7\",\"method\":\"tools/call\",\"params\":{\"name\":\"read_file\","
	     "\"arguments\":{\"path\":\"src/a b.c\",\"offset\":0,\"limit\":4096,\"flags\":[true,false,null],"
	     "\"deep\":{\"x\":[[1,[2]],{\"y\":{}}]}}}}"),
	TAKE("[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"},{\"jsonrpc\":\"2.0\",\"method\":\"n\"}]"),
	TAKE(" \t\r\n{ \"a\" :\t[ 1 ,2\n, 3 ] ,\r\n \"b\" : { } , \"c\" : [ ] }\n\t "),
	TAKE("[]"), TAKE("{}"), TAKE("[[],{},[[]],{\"\":{}}]"),
	/* Scalars, at the top and inside. */
	TAKE("true"), TAKE("false"), TAKE("null"), TAKE("  null  "), TAKE("[true,false,null]"),
	TAKE("0"), TAKE("-0"), TAKE("-5"), TAKE("1.5"), TAKE("1e3"), TAKE("1E+3"), TAKE("-1.25e-3"),
	TAKE("  42  "), TAKE("[0,-0,-5,1.5,1e3,1E+3,2e-0,0.0,-0.5e10,123456789012345678]"),
	TAKE("[12345678901234567890123,9223372036854775807,-9223372036854775808,9223372036854775808]"),
	TAKE("[1e400,-1e400,1e-400,4.9e-324,0.1,1.0,100.000e-2]"),
	TAKE("{\"id\":1.50e3}"),
	/* Strings: simple escapes, UTF-8, DEL, the top-level span to the end. */
	TAKE("\"x\""), TAKE("\"\""), TAKE("\"x\"   \n"), TAKE("  \"x\\n\"\t"),
	TAKE("[\"a\\\"b\\\\c\\/d\\be\\ff\\ng\\rh\\ti\",\"\\\\\",\"\\\"\",\"\\\\\\\"\"]"),
	TAKE("{\"k\\\"ey\\\\\":\"v\\\\\\\\\",\"k\":\"\\/\"}"),
	TAKE("{\"h\u00e9llo\":\"\u20ac \U0001D11E \u00e9\",\"\u4e2d\u6587\":[\"\u00ff\"]}"),
	TAKE("[\"\x7f\",\"a\x7f" "b\"]"),
	TAKE("\"a long string that crosses several eight-byte words, with \\\"escapes\\\" and \u00e9\""),
	/* Limits: exactly max_depth, objects past the pairwise duplicate check. */
	{ "[[1]]", 0, 0, 2, true },
	{ "{\"a\":{\"b\":{}}}", 0, 0, 3, true },
	TAKE("{\"a\":1,\"b\":2,\"c\":3,\"d\":4,\"e\":5,\"f\":6,\"g\":7,\"h\":8,\"i\":9,\"j\":10,"
	     "\"k\":11,\"l\":12,\"m\":13,\"n\":14,\"o\":15,\"p\":16,\"q\":17,\"ab\":18,\"a\\n\":0}"),

	/* Comments: the flag, or any '/'. */
	{ "{\"a\":1}", 0, JSON_ALLOW_COMMENTS, 0, false },
	{ "{/*c*/ \"a\": 1 // x\n}", 0, JSON_ALLOW_COMMENTS, 0, false },
	DECLINE("{/*c*/}"), DECLINE("[1]//x"), DECLINE("/"),
	/* \u escapes, bad escapes. */
	DECLINE("\"\\u0041\""), DECLINE("{\"a\\u00e9\":1}"), DECLINE("[\"\\ud834\\udd1e\"]"), DECLINE("\"\\u0000\""),
	DECLINE("\"\\x\""), DECLINE("\"\\'\""), DECLINE("\"\\"), DECLINE("\"\\\""), DECLINE("[\"\\U0041\"]"),
	/* Raw control bytes in strings. */
	DECLINE("\"a\x01z\""), DECLINE("\"a\tb\""), DECLINE("{\"a\nb\":1}"), DECLINE("[\"\x1f\"]"),
	{ "\"a\0b\"", 5, 0, 0, false },
	/* UTF-8 that is not strictly valid: yajl refuses some and takes
	 * others (overlong forms, surrogates), the fast path none. */
	DECLINE("\"\xff\""), DECLINE("\"\xc0\xaf\""), DECLINE("\"\xed\xa0\x80\""), DECLINE("\"\xe2\x82\""),
	DECLINE("\"\xf4\x90\x80\x80\""), DECLINE("{\"\xc3\":1}"), DECLINE("[\"\xc3(\"]"),
	/* Syntax errors. */
	DECLINE("{\"a\":1,}"), DECLINE("[1,]"), DECLINE("{\"a\" 1}"), DECLINE("[1 2]"), DECLINE("{1:2}"),
	DECLINE("tru"), DECLINE("nul"), DECLINE("fals"), DECLINE("True"), DECLINE("truex"), DECLINE("[true1]"),
	DECLINE("["), DECLINE("]"), DECLINE("{"), DECLINE("}"), DECLINE("{\"a\":1}}"), DECLINE("[1]]"),
	DECLINE("[}"), DECLINE("{]"), DECLINE("{\"a\"}"), DECLINE("{\"a\":}"), DECLINE("[,1]"), DECLINE(","),
	DECLINE("\"abc"), DECLINE("[\"abc]"), DECLINE("{'a':1}"), DECLINE("x"),
	/* Duplicate keys, small and large objects. */
	DECLINE("{\"a\":1,\"a\":2}"), DECLINE("{\"a\":{\"b\":1,\"c\":2,\"b\":3}}"),
	DECLINE("{\"a\\n\":1,\"a\\u000a\":2}"),
	DECLINE("{\"a\":1,\"b\":2,\"c\":3,\"d\":4,\"e\":5,\"f\":6,\"g\":7,\"h\":8,\"i\":9,\"j\":10,"
		"\"k\":11,\"l\":12,\"m\":13,\"n\":14,\"o\":15,\"p\":16,\"q\":17,\"g\":18}"),
	/* Nesting past max_depth. */
	{ "[[1]]", 0, 0, 1, false },
	{ "{\"a\":{\"b\":{}}}", 0, 0, 2, false },
	/* Nothing, or something after the value. */
	DECLINE(""), DECLINE("   "), DECLINE(" \n\t\r "), DECLINE("{} x"), DECLINE("1 2"), DECLINE("{}{}"),
	DECLINE("[] []"), DECLINE("\"a\" \"b\""), DECLINE("0 x"),
	{ "{\"a\":1}\0", 8, 0, 0, false },
	{ "\0{}", 3, 0, 0, false },
	{ "\0", 1, 0, 0, false },
	/* White space JSON does not allow and yajl skips. */
	DECLINE("\f{}"), DECLINE("{}\f"), DECLINE("[1,\v2]"), DECLINE("\v1"), DECLINE("{\"a\":\f1}"),
	/* Numbers outside the grammar. */
	DECLINE("01"), DECLINE("-"), DECLINE("1."), DECLINE("1e"), DECLINE("+1"), DECLINE(".5"), DECLINE("-01"),
	DECLINE("1.5e"), DECLINE("0x10"), DECLINE("1e+"), DECLINE("--1"), DECLINE("NaN"), DECLINE("Infinity"),
	DECLINE("-Infinity"), DECLINE("[01]"), DECLINE("[1.]"), DECLINE("[-]"), DECLINE("[1e5e5]"),
	DECLINE("1.5.3"), DECLINE("[.5]"), DECLINE("{\"a\":-}"), DECLINE("00"), DECLINE("-.5"), DECLINE("1.e5"),
};

/* Checks that json_parse gives what the yajl path alone gives: the same
 * result, the same error, the same tree. */
static void check_same_as_yajl(const char *text, size_t len, unsigned flags, unsigned depth)
{
	struct json_doc *a = NULL, *b = NULL;
	struct json_err ea, eb;
	memset(&ea, 0x55, sizeof(ea));
	memset(&eb, 0x55, sizeof(eb));
	int ra = json_parse(text, len, flags, depth, &a, &ea);
	int rb = json_parse_yajl(text, len, flags, depth, &b, &eb);
	ck_assert_int_eq(ra, rb);
	ck_assert_int_eq(ea.code, eb.code);
	ck_assert_uint_eq(ea.offset, eb.offset);
	ck_assert(memchr(ea.msg, '\0', sizeof(ea.msg)) && memchr(eb.msg, '\0', sizeof(eb.msg)));
	ck_assert_str_eq(ea.msg, eb.msg);
	if (ra == 0) {
		char why[200];
		const char *w = json_same_tree(json_doc_root(a), json_doc_root(b), why);
		ck_assert_msg(!w, "json_parse and yajl differ on '%.*s': %s", (int)len, text, w ? w : "");
		ck_assert_int_eq(memcmp(json_doc_text(a), text, len), 0);
		ck_assert_int_eq(json_doc_text(a)[len], '\0');
	}
	json_doc_unref(a);
	json_doc_unref(b);
}

START_TEST(fast_path_takes_plain_json_and_declines_the_rest)
{
	for (size_t k = 0; k < ELEMENTSOF(fast_cases); k++) {
		const struct fast_case *c = &fast_cases[k];
		size_t len = c->len ? c->len : strlen(c->text);
		struct json_doc *fast = NULL;
		int r = json_parse_fast(c->text, len, c->flags, c->depth, &fast);
		ck_assert_msg(r == (c->fast ? 1 : 0), "case %zu '%.*s': the fast path %s", k, (int)len,
			      c->text, r ? "took it" : "declined");
		if (r) {
			/* What it takes, yajl takes, with the same tree. */
			struct json_doc *slow = NULL;
			ck_assert_int_eq(json_parse_yajl(c->text, len, c->flags, c->depth, &slow, NULL), 0);
			char why[200];
			const char *w = json_same_tree(json_doc_root(fast), json_doc_root(slow), why);
			ck_assert_msg(!w, "case %zu '%.*s': %s", k, (int)len, c->text, w ? w : "");
			ck_assert_int_eq(memcmp(json_doc_text(fast), c->text, len), 0);
			json_doc_unref(slow);
			json_doc_unref(fast);
		} else {
			ck_assert_ptr_null(fast);
		}
		check_same_as_yajl(c->text, len, c->flags, c->depth);
	}
}
END_TEST

/* The spans the fast path writes, spelled out (the yajl path's rules). */
START_TEST(fast_path_spans)
{
	const char *s = " { \"id\" : \"a\\\"b\" , \"n\":[ -1.5e3 ,true] } ";
	struct json_doc *doc = NULL;
	ck_assert_int_eq(json_parse_fast(s, strlen(s), 0, 0, &doc), 1);
	const struct json *root = json_doc_root(doc);
	ck_assert_uint_eq(root->off, 1);
	ck_assert_uint_eq(root->len, strlen(s) - 2);
	const struct json *id = json_get(root, "id");
	ck_assert_uint_eq(id->off, 10);
	ck_assert_uint_eq(id->len, 6);
	ck_assert_str_eq(id->u.str.s, "a\"b");
	const struct json *n = json_get(root, "n");
	ck_assert_int_eq(strncmp(s + n->off, "[ -1.5e3 ,true]", n->len), 0);
	ck_assert_int_eq(strncmp(s + n->u.arr.items[0]->off, "-1.5e3", n->u.arr.items[0]->len), 0);
	ck_assert_uint_eq(n->u.arr.items[0]->len, 6);
	json_doc_unref(doc);
	/* A top-level string spans to the end of the text, white space and all. */
	ck_assert_int_eq(json_parse_fast("  \"x\"  ", 7, 0, 0, &doc), 1);
	ck_assert_uint_eq(json_doc_root(doc)->off, 2);
	ck_assert_uint_eq(json_doc_root(doc)->len, 5);
	json_doc_unref(doc);
}
END_TEST

/* Big containers, reuse of the kept stacks between parses, and long
 * strings: still the yajl path's trees. */
START_TEST(fast_path_large_inputs)
{
	struct buf b = {0};
	buf_putc(&b, '[');
	for (int i = 0; i < 20000; i++)
		buf_printf(&b, "%s{\"k%d\":[%d,\"v\\n%d\",%d.5e1]}", i ? "," : "", i, i, i, -i);
	buf_putc(&b, ']');
	struct json_doc *doc = NULL;
	ck_assert_int_eq(json_parse_fast(buf_head(&b), buf_size(&b), 0, 0, &doc), 1);
	ck_assert_uint_eq(json_doc_root(doc)->u.arr.n, 20000);
	json_doc_unref(doc);
	check_same_as_yajl(buf_head(&b), buf_size(&b), 0, 0);

	/* An object of 5000 keys: the sorted duplicate check, both ways. */
	buf_free(&b);
	buf_putc(&b, '{');
	for (int i = 0; i < 5000; i++)
		buf_printf(&b, "%s\"k%d\":%d", i ? "," : "", i, i);
	buf_puts(&b, "}");
	ck_assert_int_eq(json_parse_fast(buf_head(&b), buf_size(&b), 0, 0, &doc), 1);
	json_doc_unref(doc);
	check_same_as_yajl(buf_head(&b), buf_size(&b), 0, 0);
	b.len--;
	buf_puts(&b, ",\"k4321\":0}");
	ck_assert_int_eq(json_parse_fast(buf_head(&b), buf_size(&b), 0, 0, &doc), 0);
	check_same_as_yajl(buf_head(&b), buf_size(&b), 0, 0);

	/* A long string with escapes and UTF-8 spread through it. */
	buf_free(&b);
	buf_puts(&b, "{\"content\":\"");
	for (int i = 0; i < 3000; i++)
		buf_puts(&b, i % 7 ? "abc d\u00e9f " : "\\n\\t\\\"\\\\\\/");
	buf_puts(&b, "\"}");
	ck_assert_int_eq(json_parse_fast(buf_head(&b), buf_size(&b), 0, 0, &doc), 1);
	json_doc_unref(doc);
	check_same_as_yajl(buf_head(&b), buf_size(&b), 0, 0);
	/* The same with one \u near its end: declined after all that work,
	 * and yajl's tree all the same. */
	b.len -= 2;
	buf_puts(&b, "\\u00e9\"}");
	ck_assert_int_eq(json_parse_fast(buf_head(&b), buf_size(&b), 0, 0, &doc), 0);
	check_same_as_yajl(buf_head(&b), buf_size(&b), 0, 0);
	buf_free(&b);
}
END_TEST

/* Random texts around the fast path's edges: json_parse must always give
 * what yajl alone gives. */
START_TEST(fast_path_random_texts_match_yajl)
{
	static const char *const bits[] = {
		"{", "}", "[", "]", ",", ":", " ", "\n", "\t", "\f", "\"a\"", "\"\\n\"", "\"\\u0041\"",
		"\"\xc3\xa9\"", "\"\xc0\xaf\"", "1", "-", "0", "01", "1.5", "1e", "e5", ".", "true", "null",
		"fals", "\"k\":", "\"k\"", "/", "\\", "\"", "\x01", "\xff",
	};
	unsigned seed = 777;
	char text[256];
	for (int t = 0; t < 30000; t++) {
		size_t len = 0;
		int parts = 1 + rand_r(&seed) % 12;
		for (int p = 0; p < parts; p++) {
			const char *x = bits[rand_r(&seed) % ELEMENTSOF(bits)];
			size_t n = strlen(x);
			if (len + n > sizeof(text))
				break;
			memcpy(text + len, x, n);
			len += n;
		}
		unsigned depth = (unsigned)(rand_r(&seed) % 4);
		struct json_doc *fast = NULL, *slow = NULL;
		int r = json_parse_fast(text, len, 0, depth, &fast);
		int y = json_parse_yajl(text, len, 0, depth, &slow, NULL);
		if (r) {
			ck_assert_msg(y == 0, "the fast path took '%.*s', yajl refuses it", (int)len, text);
			char why[200];
			const char *w = json_same_tree(json_doc_root(fast), json_doc_root(slow), why);
			ck_assert_msg(!w, "'%.*s': %s", (int)len, text, w ? w : "");
		}
		json_doc_unref(fast);
		json_doc_unref(slow);
		check_same_as_yajl(text, len, 0, depth);
	}
}
END_TEST

/* jgen_int writes what yajl_gen_integer ("%lld") did, separators and all. */
/* Keys of any length come out as keys: long strings take a faster way in
 * value position, which yajl refuses for a key (a tool name of 64 bytes
 * or more in admin/stats, a long key echoed from arguments). */
START_TEST(generator_long_keys)
{
	char key[200];
	memset(key, 'k', sizeof(key) - 1);
	key[sizeof(key) - 1] = '\0';
	struct buf b = {0};
	struct jgen *g = jgen_new(&b);
	jgen_obj_open(g);
	jgen_kv_int(g, key, 1);
	jgen_key(g, "bad\xff key of more than sixty-four bytes, not UTF-8 at all ......");
	jgen_str(g, "v");
	jgen_obj_close(g);
	jgen_free(g);
	struct json_doc *doc = parse_ok(buf_head(&b));
	const struct json *root = json_doc_root(doc);
	ck_assert_uint_eq(root->u.obj.n, 2);
	ck_assert(json_is_int(json_get(root, key)));
	ck_assert_str_eq(json_str(json_get(root, "bad\xef\xbf\xbd key of more than sixty-four bytes, not UTF-8 at all ......")), "v");

	/* The same through a parsed value. */
	buf_clear(&b);
	g = jgen_new(&b);
	jgen_value(g, root);
	jgen_free(g);
	struct json_doc *again = parse_ok(buf_head(&b));
	ck_assert(json_equal(root, json_doc_root(again)));
	json_doc_unref(again);
	json_doc_unref(doc);
	buf_free(&b);
}
END_TEST

/* A lone surrogate escape decodes to bytes that are not strict UTF-8;
 * the generator replaces them, in short and long strings and in keys, so
 * every answer decodes as UTF-8. */
START_TEST(generator_replaces_encoded_surrogates)
{
	const char *text = "{\"\\udc00k\":\"\\udddd\",\"long\":\"\\udddd"
			   "................................................................\"}";
	struct json_doc *doc = parse_ok(text);
	struct buf b = {0};
	struct jgen *g = jgen_new(&b);
	jgen_value(g, json_doc_root(doc));
	jgen_free(g);
	ck_assert(utf8_valid(buf_head(&b), buf_size(&b)));
	struct json_doc *out = parse_ok(buf_head(&b));
	/* One U+FFFD per byte of the 3-byte sequence (none of them starts a
	 * valid one), as Unicode's practice for maximal subparts has it. */
#define FFFD3 "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"
	ck_assert_str_eq(json_str(json_get(json_doc_root(out), FFFD3 "k")), FFFD3);
	const char *l = json_str(json_get(json_doc_root(out), "long"));
	ck_assert_ptr_nonnull(l);
	ck_assert(strncmp(l, FFFD3 "....", 13) == 0);
#undef FFFD3
	json_doc_unref(out);
	json_doc_unref(doc);
	buf_free(&b);
}
END_TEST

/* Writes v with yajl's own generator: the reference jgen is held to. */
static void yajl_write(yajl_gen y, const struct json *v)
{
	switch (v->type) {
	case JSON_NULL:
		yajl_gen_null(y);
		break;
	case JSON_BOOL:
		yajl_gen_bool(y, v->u.b);
		break;
	case JSON_NUMBER:
		yajl_gen_number(y, v->u.num.raw, v->u.num.raw_len);
		break;
	case JSON_STRING:
		yajl_gen_string(y, (const unsigned char *)v->u.str.s, v->u.str.len);
		break;
	case JSON_ARRAY:
		yajl_gen_array_open(y);
		for (size_t i = 0; i < v->u.arr.n; i++)
			yajl_write(y, v->u.arr.items[i]);
		yajl_gen_array_close(y);
		break;
	case JSON_OBJECT:
		yajl_gen_map_open(y);
		for (size_t i = 0; i < v->u.obj.n; i++) {
			yajl_gen_string(y, (const unsigned char *)v->u.obj.members[i].key,
					v->u.obj.members[i].key_len);
			yajl_write(y, v->u.obj.members[i].value);
		}
		yajl_gen_map_close(y);
		break;
	}
}

static void yajl_print(void *ctx, const char *s, size_t n)
{
	buf_append(ctx, s, n);
}

/* yajl writes the hex of \u00XX in capitals, jgen in small letters. */
static void lower_unicode_escapes(char *s)
{
	for (; *s; s++) {
		if (*s != '\\')
			continue;
		if (s[1] == 'u')
			for (int k = 2; k < 6 && s[k]; k++)
				if (s[k] >= 'A' && s[k] <= 'F')
					s[k] = (char)(s[k] - 'A' + 'a');
		s++;
	}
}

/* Appends a random JSON value of valid UTF-8, nested at most 6 deep. */
static void random_value(struct buf *b, unsigned *seed, int depth)
{
	static const char *const scalars[] = {
		"1", "-2.5e3", "0", "true", "false", "null", "\"\"", "\"a\"", "\"\\n\\t\\u0001\"",
		"\"\\u001F \\\"q\\\" \\\\\"", "\"\xc3\xa9\xf0\x9d\x84\x9e\"", "\"\\u00e9/\\/\"",
	};
	int kind = depth >= 6 ? 0 : rand_r(seed) % 3;
	if (kind == 0) {
		buf_puts(b, scalars[rand_r(seed) % ELEMENTSOF(scalars)]);
		return;
	}
	int n = rand_r(seed) % 4;
	buf_putc(b, kind == 1 ? '[' : '{');
	for (int i = 0; i < n; i++) {
		if (i)
			buf_putc(b, ',');
		if (kind == 2)
			buf_printf(b, "\"k%d\\u0007\":", i);
		random_value(b, seed, depth + 1);
	}
	buf_putc(b, kind == 1 ? ']' : '}');
}

/* The generator writes, byte for byte, what yajl_gen writes for any parsed
 * value of valid UTF-8 (but the case of hex digits): separators of nested
 * and empty containers, escapes, numbers verbatim. */
START_TEST(generator_writes_what_yajl_writes)
{
	static const char *const fixed[] = {
		"{}", "[]", "[[],{},[[]],{\"a\":{}}]", "{\"a\":[1,{\"b\":[]},\"c\"],\"d\":{\"e\":null}}",
		"\"\\u0001\\u001f\\b\\f\\n\\r\\t\\\"\\\\/\\u007f\"", "[true,false,null,-0,1.5e300,12345678901234567890]",
		"{\"\\u00e9\":\"\xf0\x9d\x84\x9e\"}",
	};
	unsigned seed = 4242;
	size_t compared = 0;
	for (size_t t = 0; t < ELEMENTSOF(fixed) + 20000; t++) {
		struct buf src = {0};
		if (t < ELEMENTSOF(fixed))
			buf_puts(&src, fixed[t]);
		else
			random_value(&src, &seed, 0);
		const char *text = buf_head(&src);
		size_t len = buf_size(&src);
		struct json_doc *doc = NULL;
		struct json_err err;
		ck_assert_msg(json_parse(text, len, 0, 0, &doc, &err) == 0, "'%s' does not parse: %s", text, err.msg);
		struct buf got = {0}, want = {0};
		struct jgen *g = jgen_new(&got);
		jgen_value(g, json_doc_root(doc));
		jgen_free(g);
		yajl_gen y = yajl_gen_alloc(NULL);
		yajl_gen_config(y, yajl_gen_print_callback, yajl_print, &want);
		yajl_write(y, json_doc_root(doc));
		yajl_gen_free(y);
		buf_putc(&want, '\0');
		want.len--;
		lower_unicode_escapes(want.data);
		ck_assert_msg(str_eq(buf_head(&got), buf_head(&want)), "'%.*s': jgen wrote %s, yajl %s",
			      (int)len, text, buf_head(&got), buf_head(&want));
		compared++;
		buf_free(&got);
		buf_free(&want);
		json_doc_unref(doc);
		buf_free(&src);
	}
	ck_assert_uint_eq(compared, ELEMENTSOF(fixed) + 20000);
}
END_TEST

/* Values nested deeper than yajl's generator allowed (128) are written
 * whole: limits.max_json_depth goes up to 1024. */
START_TEST(generator_writes_deep_values)
{
	struct buf text = {0};
	for (int i = 0; i < 1000; i++)
		buf_puts(&text, i % 2 ? "{\"k\":" : "[");
	buf_puts(&text, "1");
	for (int i = 999; i >= 0; i--)
		buf_puts(&text, i % 2 ? "}" : "]");
	struct json_doc *doc = NULL;
	struct json_err err;
	ck_assert_int_eq(json_parse(buf_head(&text), buf_size(&text), 0, 1000, &doc, &err), 0);
	struct buf out = {0};
	struct jgen *g = jgen_new(&out);
	jgen_value(g, json_doc_root(doc));
	jgen_free(g);
	ck_assert_str_eq(buf_head(&out), buf_head(&text));
	json_doc_unref(doc);
	buf_free(&out);
	buf_free(&text);
}
END_TEST

/* A string where a key is due is written as that key. */
START_TEST(generator_string_in_key_position)
{
	struct buf b = {0};
	struct jgen *g = jgen_new(&b);
	jgen_obj_open(g);
	jgen_str(g, "a");
	jgen_int(g, 1);
	jgen_strn(g, "b", 1);
	jgen_arr_open(g);
	jgen_obj_open(g);
	jgen_obj_close(g);
	jgen_arr_close(g);
	jgen_obj_close(g);
	jgen_free(g);
	ck_assert_str_eq(buf_head(&b), "{\"a\":1,\"b\":[{}]}");
	buf_free(&b);
}
END_TEST

START_TEST(generator_integers)
{
	static const int64_t vals[] = {
		0, 1, -1, 9, 10, -10, 99, 100, 1234567, -1234567, INT32_MAX, INT32_MIN,
		(int64_t)INT32_MAX + 1, 999999999999999999, 1000000000000000000, INT64_MAX, INT64_MIN,
		INT64_MIN + 1,
	};
	struct buf got = {0}, want = {0};
	struct jgen *g = jgen_new(&got);
	jgen_obj_open(g);
	buf_putc(&want, '{');
	for (size_t i = 0; i < ELEMENTSOF(vals); i++) {
		char key[16];
		snprintf(key, sizeof(key), "k%zu", i);
		jgen_kv_int(g, key, vals[i]);
		buf_printf(&want, "%s\"%s\":%lld", i ? "," : "", key, (long long)vals[i]);
	}
	jgen_key(g, "a");
	jgen_arr_open(g);
	buf_puts(&want, ",\"a\":[");
	for (size_t i = 0; i < ELEMENTSOF(vals); i++) {
		jgen_int(g, vals[i]);
		buf_printf(&want, "%s%lld", i ? "," : "", (long long)vals[i]);
	}
	jgen_arr_close(g);
	jgen_obj_close(g);
	buf_puts(&want, "]}");
	/* A new top-level value after a reset: no separator. */
	jgen_reset(g);
	jgen_int(g, -42);
	buf_puts(&want, "-42");
	jgen_free(g);
	ck_assert_str_eq(buf_head(&got), buf_head(&want));

	unsigned seed = 99;
	for (int t = 0; t < 20000; t++) {
		int64_t v = (int64_t)(((uint64_t)rand_r(&seed) << 42) ^ ((uint64_t)rand_r(&seed) << 21) ^
				      (uint64_t)rand_r(&seed));
		v >>= rand_r(&seed) % 63;
		if (t & 1)
			v = -v;
		struct buf a = {0};
		g = jgen_new(&a);
		jgen_arr_open(g);
		jgen_int(g, v);
		jgen_int(g, v);
		jgen_arr_close(g);
		jgen_free(g);
		char w[64];
		snprintf(w, sizeof(w), "[%lld,%lld]", (long long)v, (long long)v);
		ck_assert_str_eq(buf_head(&a), w);
		buf_free(&a);
	}
	buf_free(&got);
	buf_free(&want);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("json");
	TCase *tc = tcase_create("core");
	tcase_add_test(tc, depth_limit_is_exact);
	tcase_add_test(tc, million_deep_is_an_error);
	tcase_add_test(tc, duplicate_keys_refused);
	tcase_add_test(tc, numbers);
	tcase_add_test(tc, integer_digits);
	tcase_add_test(tc, spans_point_at_the_source);
	tcase_add_test(tc, syntax_errors);
	tcase_add_test(tc, strict_utf8_and_white_space);
	tcase_add_test(tc, canonical_sorts_keys);
	tcase_add_test(tc, canonical_numbers_by_value);
	tcase_add_test(tc, utf8_helpers);
	tcase_add_test(tc, generator_output_is_one_line_of_valid_utf8);
	tcase_add_test(tc, generator_long_keys);
	tcase_add_test(tc, generator_replaces_encoded_surrogates);
	tcase_add_test(tc, generator_writes_what_yajl_writes);
	tcase_add_test(tc, generator_writes_deep_values);
	tcase_add_test(tc, generator_string_in_key_position);
	tcase_add_test(tc, line_and_column);
	tcase_add_test(tc, documents_are_refcounted);
	tcase_add_test(tc, quote_round_trips);
	tcase_add_test(tc, vector_scans_see_every_offset);
	tcase_add_test(tc, fast_path_takes_plain_json_and_declines_the_rest);
	tcase_add_test(tc, fast_path_spans);
	tcase_add_test(tc, fast_path_large_inputs);
	tcase_add_test(tc, fast_path_random_texts_match_yajl);
	tcase_add_test(tc, generator_integers);
	suite_add_tcase(s, tc);
	return run_suite(s);
}
