/* SPDX-License-Identifier: MIT */
/*
 * The JSON layer: depth limits, duplicate keys, numbers, source spans,
 * UTF-8, canonical form and the generator.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "proto/json.h"
#include "tests/unit/check_main.h"

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

START_TEST(utf8_helpers)
{
	ck_assert(utf8_valid("héllo €𝄞", strlen("héllo €𝄞")));
	ck_assert(!utf8_valid("\xc0\xaf", 2));		/* overlong */
	ck_assert(!utf8_valid("\xed\xa0\x80", 3));	/* surrogate */
	ck_assert(!utf8_valid("\xe2\x82", 2));		/* cut short */
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

int main(void)
{
	Suite *s = suite_create("json");
	TCase *tc = tcase_create("core");
	tcase_add_test(tc, depth_limit_is_exact);
	tcase_add_test(tc, million_deep_is_an_error);
	tcase_add_test(tc, duplicate_keys_refused);
	tcase_add_test(tc, numbers);
	tcase_add_test(tc, spans_point_at_the_source);
	tcase_add_test(tc, syntax_errors);
	tcase_add_test(tc, canonical_sorts_keys);
	tcase_add_test(tc, utf8_helpers);
	tcase_add_test(tc, generator_output_is_one_line_of_valid_utf8);
	tcase_add_test(tc, line_and_column);
	tcase_add_test(tc, documents_are_refcounted);
	tcase_add_test(tc, quote_round_trips);
	suite_add_tcase(s, tc);
	return run_suite(s);
}
