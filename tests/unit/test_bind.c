/* SPDX-License-Identifier: MIT */
/*
 * The strict JSON binder (lib/bind): each kind of key checked and stored,
 * bounds, unknown and missing keys, defaults kept, nested paths in
 * messages, and every mistake of a text collected in one run.
 */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/bind/bind.h"
#include "proto/base/strv.h"
#include "tests/unit/check_main.h"

struct inner {
	uint32_t n;
	char *s;
};

struct obj {
	uint32_t u32;
	uint64_t u64;
	int i;
	bool b;
	int tri;
	char *str;
	char *text;
	char *path;
	char *maybe;
	char **paths;
	size_t n_paths;
	int color;
	bool yes;
	const struct json *raw;
	struct inner in;
	char *seen_path;	/* what the custom parser was told */
	int req;
};

static const char *const colors[] = { "red", "green", "blue", NULL };
static const char *const no_yes[] = { "no", "yes", NULL };

/* A parser of its own, as a sub-value goes to one: it sees the value and
 * its JSON path. */
static int parse_even(struct bind *b, const char *path, const struct json *v, void *at)
{
	struct obj *o = at;
	int64_t n;
	free(o->seen_path);
	o->seen_path = xstrdup(path);
	if (!json_get_int(v, &n) || n % 2)
		return bind_fail(b, v->off, path, "expected an even integer");
	return 0;
}

static const struct bind_field inner_fields[] = {
	B_U32(struct inner, "n", n, 1, 10),
	B_STRING(struct inner, "s", s, 1, 0),
	{},
};

static const struct bind_field fields[] = {
	B_U32(struct obj, "u32", u32, 1, 100),
	B_U64(struct obj, "u64", u64, 0, UINT64_C(1) << 40),
	B_INT(struct obj, "i", i, 5, 9),
	B_BOOL(struct obj, "b", b),
	B_TRISTATE(struct obj, "tri", tri),
	B_STRING(struct obj, "str", str, 1, 8),
	B_STRING(struct obj, "text", text, 0, 0),
	B_PATH(struct obj, "path", path),
	B_PATH_NULL(struct obj, "maybe", maybe),
	B_PATHS(struct obj, "paths", paths, n_paths),
	B_NAME(struct obj, "color", color, colors),
	B_NAME(struct obj, "yes", yes, no_yes),
	B_VALUE(struct obj, "raw", raw),
	B_OBJECT(struct obj, "in", in, inner_fields, NULL),
	B_WHOLE("even", parse_even),
	{ .key = "req", .kind = BIND_INT, .required = true, .off = offsetof(struct obj, req), .max = 3 },
	{},
};

static struct json_doc *doc;
static struct bind b;
static struct obj o;

static void obj_clear(void)
{
	free(o.str);
	free(o.text);
	free(o.path);
	free(o.maybe);
	strv_free(o.paths);
	free(o.in.s);
	free(o.seen_path);
	memset(&o, 0, sizeof(o));
}

/* Binds text (named t.json, paths relative to /base) over defaults. */
static int bind_text(const char *text)
{
	struct json_err jerr;
	obj_clear();
	o = (struct obj){ .u32 = 7, .u64 = 8, .i = 6, .tri = -1, .color = 2, .in = { .n = 3 } };
	o.maybe = xstrdup("/default");
	free(b.err);
	b = (struct bind){ .name = "t.json", .text = text, .len = strlen(text), .base_dir = "/base" };
	json_doc_unref(doc);
	doc = NULL;
	ck_assert_msg(json_parse(text, strlen(text), JSON_ALLOW_COMMENTS, 0, &doc, &jerr) == 0, "%s", jerr.msg);
	return bind_object(&b, NULL, json_doc_root(doc), fields, NULL, &o);
}

/* Parses text into doc, and readies b for it (no base directory). */
static const struct json *parse(const char *text)
{
	struct json_err jerr;
	json_doc_unref(doc);
	doc = NULL;
	ck_assert_msg(json_parse(text, strlen(text), 0, 0, &doc, &jerr) == 0, "%s", jerr.msg);
	free(b.err);
	b = (struct bind){ .name = "t.json", .text = text, .len = strlen(text) };
	return json_doc_root(doc);
}

/* Asserts that text binds with exactly the errors want (lines). */
static void assert_errors(const char *text, const char *want)
{
	ck_assert_int_eq(bind_text(text), -EINVAL);
	char *got = bind_errors(&b);
	ck_assert_msg(got && strcmp(got, want) == 0, "text %s:\ngot:  %s\nwant: %s", text, got ? got : "(none)", want);
	free(got);
}

static void teardown(void)
{
	obj_clear();
	free(b.err);
	b.err = NULL;
	json_doc_unref(doc);
	doc = NULL;
}

START_TEST(each_kind_stored)
{
	int r = bind_text("{\"req\": 0, \"u32\": 100, \"u64\": 1099511627776, \"i\": 9, \"b\": true, \"tri\": false,"
			  " \"str\": \"12345678\", \"text\": \"\", \"path\": \"a/./b//\", \"maybe\": null,"
			  " \"paths\": [\"/x\", \"y\"], \"color\": \"green\", \"yes\": \"yes\", \"raw\": [1],"
			  " \"in\": {\"n\": 10, \"s\": \"deep\"}, \"even\": 4}");
	ck_assert_msg(r == 0, "%s", b.err);
	ck_assert_uint_eq(o.u32, 100);
	ck_assert_uint_eq(o.u64, UINT64_C(1) << 40);
	ck_assert_int_eq(o.i, 9);
	ck_assert(o.b);
	ck_assert_int_eq(o.tri, 0);
	ck_assert_str_eq(o.str, "12345678");
	ck_assert_str_eq(o.text, "");
	ck_assert_str_eq(o.path, "/base/a/b");
	ck_assert_ptr_null(o.maybe);
	ck_assert_uint_eq(o.n_paths, 2);
	ck_assert_str_eq(o.paths[0], "/x");
	ck_assert_str_eq(o.paths[1], "/base/y");
	ck_assert_ptr_null(o.paths[2]);
	ck_assert_int_eq(o.color, 1);
	ck_assert(o.yes);
	ck_assert_int_eq(o.raw->type, JSON_ARRAY);
	ck_assert_uint_eq(o.in.n, 10);
	ck_assert_str_eq(o.in.s, "deep");
	ck_assert_str_eq(o.seen_path, "even");
	ck_assert_ptr_null(b.err);
	ck_assert_uint_eq(b.n_errors, 0);
}
END_TEST

START_TEST(defaults_kept)
{
	ck_assert_int_eq(bind_text("{\"req\": 1}"), 0);
	ck_assert_uint_eq(o.u32, 7);
	ck_assert_uint_eq(o.u64, 8);
	ck_assert_int_eq(o.i, 6);
	ck_assert_int_eq(o.tri, -1);
	ck_assert_int_eq(o.color, 2);
	ck_assert_str_eq(o.maybe, "/default");
	ck_assert_uint_eq(o.in.n, 3);
	ck_assert_ptr_null(o.str);
	ck_assert_ptr_null(o.raw);
	/* a value that fails leaves the default too */
	ck_assert_int_eq(bind_text("{\"req\": 1, \"u32\": 0, \"color\": \"pink\", \"maybe\": 5}"), -EINVAL);
	ck_assert_uint_eq(o.u32, 7);
	ck_assert_int_eq(o.color, 2);
	ck_assert_str_eq(o.maybe, "/default");
}
END_TEST

START_TEST(types_and_bounds)
{
	assert_errors("{\"req\": 1, \"u32\": \"5\"}", "t.json:1:19: u32: expected a positive integer, got string");
	assert_errors("{\"req\": 1, \"u32\": 101}", "t.json:1:19: u32: expected a positive integer of at most 100");
	assert_errors("{\"req\": 1, \"u32\": 1.5}", "t.json:1:19: u32: expected a positive integer, got 1.5");
	assert_errors("{\"req\": 1, \"u64\": -1}", "t.json:1:19: u64: expected a non-negative integer");
	assert_errors("{\"req\": 1, \"i\": 4}", "t.json:1:17: i: expected an integer of at least 5");
	assert_errors("{\"req\": 1, \"b\": 1}", "t.json:1:17: b: expected true or false, got integer");
	assert_errors("{\"req\": 1, \"tri\": null}", "t.json:1:19: tri: expected true or false, got null");
	assert_errors("{\"req\": 1, \"str\": \"\"}", "t.json:1:19: str: expected a non-empty string");
	assert_errors("{\"req\": 1, \"str\": \"123456789\"}", "t.json:1:19: str: expected a string of at most 8 bytes");
	assert_errors("{\"req\": 1, \"str\": \"a\\u0000b\"}", "t.json:1:19: str: must not contain NUL bytes");
	assert_errors("{\"req\": 1, \"path\": null}", "t.json:1:20: path: expected a string, got null");
	assert_errors("{\"req\": 1, \"paths\": \"/x\"}", "t.json:1:21: paths: expected an array of strings, got string");
	assert_errors("{\"req\": 1, \"color\": \"pink\"}",
		      "t.json:1:21: color: expected \"red\", \"green\" or \"blue\"");
	assert_errors("{\"req\": 1, \"color\": 1}",
		      "t.json:1:21: color: expected \"red\", \"green\" or \"blue\", got integer");
	assert_errors("{\"req\": 1, \"yes\": \"maybe\"}", "t.json:1:19: yes: expected \"no\" or \"yes\"");
	assert_errors("{\"req\": 1, \"in\": []}", "t.json:1:18: in: expected an object, got array");
	assert_errors("[]", "t.json:1:1: expected an object at the top level, got array");
}
END_TEST

START_TEST(unknown_keys)
{
	assert_errors("{\"req\": 1,\n  \"colour\": \"red\"}", "t.json:2:3: colour: unknown key");
	/* a key with a control character and a NUL byte is printed safely */
	assert_errors("{\"req\": 1, \"a\\nb\\u0000\": 1}", "t.json:1:12: a?b?: unknown key");

	/* the section's own message, or the list of the keys it knows */
	static const struct bind_field small[] = { B_U32(struct inner, "n", n, 0, 1), {} };
	struct inner in = {0};
	const struct json *v = parse("{\"m\": 1}");
	ck_assert_int_eq(bind_object(&b, "sec", v, small, "not here", &in), -EINVAL);
	ck_assert_int_eq(bind_object(&b, "sec", v, small, bind_list_known, &in), -EINVAL);
	char *got = bind_errors(&b);
	ck_assert_str_eq(got, "t.json:1:2: sec.m: not here\nt.json:1:2: sec.m: unknown key (known: n)");
	free(got);
}
END_TEST

START_TEST(required_keys)
{
	assert_errors("{}", "t.json:1:1: req: missing");
	assert_errors("{\n \"u32\": 1\n}", "t.json:1:1: req: missing");
	/* nested: named by its whole path */
	static const struct bind_field need[] = {
		{ .key = "x", .kind = BIND_U32, .required = true, .off = offsetof(struct inner, n), .max = 9 },
		{},
	};
	static const struct bind_field outer[] = { B_OBJECT(struct obj, "in", in, need, NULL), {} };
	ck_assert_int_eq(bind_object(&b, NULL, parse("{\"in\": {}}"), outer, NULL, &o), -EINVAL);
	char *got = bind_errors(&b);
	ck_assert_str_eq(got, "t.json:1:8: in.x: missing");
	free(got);
}
END_TEST

START_TEST(nested_paths)
{
	assert_errors("{\"req\": 1, \"in\": {\"n\": 11, \"t\": 1}}",
		      "t.json:1:24: in.n: expected a positive integer of at most 10\n"
		      "t.json:1:28: in.t: unknown key");
	assert_errors("{\"req\": 1, \"paths\": [\"/a\", 2, \"\"]}",
		      "t.json:1:28: paths[1]: expected a string, got integer\n"
		      "t.json:1:31: paths[2]: expected a non-empty string");
	assert_errors("{\"req\": 1, \"even\": 3}", "t.json:1:20: even: expected an even integer");
	ck_assert_str_eq(o.seen_path, "even");
}
END_TEST

START_TEST(every_error_collected)
{
	assert_errors("{\n"
		      "  \"u32\": 0,\n"
		      "  \"bogus\": 1,\n"
		      "  \"in\": {\"n\": 0, \"s\": 5},\n"
		      "  \"color\": \"pink\",\n"
		      "  \"even\": 1\n"
		      "}",
		      "t.json:2:10: u32: expected a positive integer\n"
		      "t.json:3:3: bogus: unknown key\n"
		      "t.json:4:15: in.n: expected a positive integer\n"
		      "t.json:4:23: in.s: expected a string, got integer\n"
		      "t.json:5:12: color: expected \"red\", \"green\" or \"blue\"\n"
		      "t.json:6:11: even: expected an even integer\n"
		      "t.json:1:1: req: missing");
	ck_assert_uint_eq(b.n_errors, 0);	/* bind_errors took them */
}
END_TEST

START_TEST(errors_bounded)
{
	struct buf t = {0};
	buf_puts(&t, "{\"req\": 1");
	for (int i = 0; i < BIND_MAX_ERRORS + 5; i++)
		buf_printf(&t, ", \"k%d\": 1", i);
	buf_puts(&t, "}");
	ck_assert_int_eq(bind_text(buf_head(&t)), -EINVAL);
	ck_assert_uint_eq(b.n_errors, BIND_MAX_ERRORS + 5);
	char *got = bind_errors(&b);
	size_t lines = 1;
	for (const char *s = got; *s; s++)
		lines += *s == '\n';
	ck_assert_uint_eq(lines, BIND_MAX_ERRORS + 1);
	ck_assert_ptr_nonnull(strstr(got, "t.json: 5 more errors not shown"));
	free(got);
	buf_free(&t);
}
END_TEST

START_TEST(without_a_text)
{
	/* Outside a file (a unit's own JSON), messages carry the path alone. */
	const struct json *v = parse("{\"in\": {\"n\": 0}}");
	b = (struct bind){0};
	ck_assert_int_eq(bind_object(&b, "top", v, fields, NULL, &o), -EINVAL);
	char *got = bind_errors(&b);
	ck_assert_str_eq(got, "top.in.n: expected a positive integer\ntop.req: missing");
	free(got);
}
END_TEST

/* Counts members, failing the odd ones. */
static int each_even(struct bind *bb, const char *path, const struct json_member *m, size_t i, void *arg)
{
	(*(int *)arg)++;
	return i % 2 ? bind_fail(bb, m->value->off, path, "odd") : 0;
}

START_TEST(members_and_env)
{
	const char *text = "{\"a\": 1, \"b\": 2, \"c\": 3, \"d\": 4}";
	parse(text);
	int n = 0;
	ck_assert_int_eq(bind_members(&b, "m", json_doc_root(doc), 0, each_even, &n), -EINVAL);
	ck_assert_int_eq(n, 4);		/* went on past the first */
	ck_assert_int_eq(bind_members(&b, "m", json_doc_root(doc), 3, each_even, &n), -EINVAL);
	char *got = bind_errors(&b);
	ck_assert_str_eq(got, "t.json:1:15: m.b: odd\nt.json:1:31: m.d: odd\n"
			      "t.json:1:1: m: expected an object of at most 3 keys");
	free(got);

	text = "{\"A\": \"1\", \"B=C\": \"2\", \"D\": 3, \"E\": \"\"}";
	parse(text);
	char **env = NULL;
	size_t ne = 0;
	ck_assert_int_eq(bind_want_env(&b, "env", json_doc_root(doc), 0, &env, &ne), -EINVAL);
	got = bind_errors(&b);
	ck_assert_str_eq(got, "t.json:1:12: env: 'B=C' is not a variable name\n"
			      "t.json:1:29: env.D: expected a string without NUL characters");
	free(got);
	text = "{\"A\": \"1\", \"E\": \"\"}";
	parse(text);
	ck_assert_int_eq(bind_want_env(&b, "env", json_doc_root(doc), 0, &env, &ne), 0);
	ck_assert_uint_eq(ne, 2);
	ck_assert_str_eq(env[0], "A=1");
	ck_assert_str_eq(env[1], "E=");
	ck_assert_ptr_null(env[2]);
	strv_free(env);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("bind");
	TCase *tc = tcase_create("binder");
	tcase_add_checked_fixture(tc, NULL, teardown);
	tcase_add_test(tc, each_kind_stored);
	tcase_add_test(tc, defaults_kept);
	tcase_add_test(tc, types_and_bounds);
	tcase_add_test(tc, unknown_keys);
	tcase_add_test(tc, required_keys);
	tcase_add_test(tc, nested_paths);
	tcase_add_test(tc, every_error_collected);
	tcase_add_test(tc, errors_bounded);
	tcase_add_test(tc, without_a_text);
	tcase_add_test(tc, members_and_env);
	suite_add_tcase(s, tc);
	return run_suite(s);
}
