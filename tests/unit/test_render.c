/* SPDX-License-Identifier: MIT */
/*
 * The text the built-in tools show the model (tools/render.c), against
 * golden files: each case renders into tests/data/render/NAME.txt. Run with
 * TC_UPDATE_GOLDEN=1 to rewrite them (then read the diff).
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto/base/buf.h"
#include "proto/json.h"
#include "proto/base/util.h"
#include "tests/unit/check_main.h"
#include "tests/unit/golden.h"
#include "tools/render.h"

static void golden_read(const char *name, struct read_view v)
{
	struct buf out = {0};
	if (!v.len && v.data)
		v.len = strlen(v.data);
	render_read_file(&v, &out);
	golden(name, &out);
	buf_free(&out);
}

START_TEST(read_file_lines)
{
	/* a whole small file, numbered; the last line has no newline */
	golden_read("read_whole", (struct read_view){ .data = "int main(void)\n{\n\treturn 0;\n}", .by_lines = true,
						      .numbered = true, .first_line = 1, .shown_lines = 4,
						      .total_lines = 4, .size = 30 });
	/* a window that stops before the end says how to read on */
	golden_read("read_window", (struct read_view){ .data = "l3\nl4\n", .by_lines = true, .numbered = true,
						       .first_line = 3, .shown_lines = 2, .total_lines = 96334,
						       .size = 600000, .more = true });
	/* numbers wider than 6 columns, and unnumbered */
	golden_read("read_wide", (struct read_view){ .data = "x\ny\n", .by_lines = true, .numbered = true,
						     .first_line = 999999, .shown_lines = 2, .total_lines = 1000000,
						     .size = 2000000 });
	golden_read("read_bare", (struct read_view){ .data = "a\nb\n", .by_lines = true, .first_line = 1,
						     .shown_lines = 2, .total_lines = 3, .size = 6, .more = true });
	golden_read("read_empty", (struct read_view){ .data = "", .by_lines = true, .first_line = 1 });
	golden_read("read_past_end", (struct read_view){ .data = "", .by_lines = true, .first_line = 20,
							 .total_lines = 10, .size = 50 });
	golden_read("read_line_cut", (struct read_view){ .data = "abcdef", .by_lines = true, .numbered = true,
							 .first_line = 7, .shown_lines = 1, .total_lines = 9,
							 .line_cut = true, .offset = 100, .size = 5000, .more = true });
}
END_TEST

START_TEST(read_file_long_line)
{
	/* 2500 characters, two bytes each: 2000 shown and a marker */
	struct buf line = {0};
	for (int i = 0; i < 2500; i++)
		buf_puts(&line, i % 10 == 9 ? "\xc3\xa9" : "\xc3\xa0");
	buf_puts(&line, "\nshort\n");
	golden_read("read_long_line", (struct read_view){ .data = buf_head(&line), .len = buf_size(&line),
							  .by_lines = true, .numbered = true, .first_line = 1,
							  .shown_lines = 2, .total_lines = 2, .size = buf_size(&line) });
	buf_free(&line);
}
END_TEST

/* The text's JSON literal made from the window's, against the text
 * quoted whole; NULL only where it does not apply. */
static void check_json(struct read_view v, bool applies)
{
	if (!v.len && v.data)
		v.len = strlen(v.data);
	struct buf text = {0}, lit = {0}, want = {0};
	render_read_file(&v, &text);
	json_quote(&lit, v.data, v.len);
	json_quote(&want, buf_head(&text), buf_size(&text));
	char *got = render_read_file_json(&v, buf_head(&lit), buf_size(&lit), buf_head(&text), buf_size(&text));
	if (applies) {
		ck_assert_ptr_nonnull(got);
		ck_assert_str_eq(got, buf_head(&want));
	} else {
		ck_assert_ptr_null(got);
	}
	free(got);
	buf_free(&text);
	buf_free(&lit);
	buf_free(&want);
}

START_TEST(read_file_json)
{
	/* escapes of every kind inside lines: quotes, a backslash before an
	 * n, a tab, control bytes (\u00XX), multibyte characters */
	const char *data = "say \"hi\"\n\\n not a newline\n\ttab\x01\x1f\n\xc3\xa9t\xc3\xa9\n\nlast";
	check_json((struct read_view){ .data = data, .by_lines = true, .numbered = true, .first_line = 1,
				       .shown_lines = 6, .total_lines = 6, .size = 60 }, true);
	/* a window with its note, unnumbered, wide numbers */
	check_json((struct read_view){ .data = "l3\n\"l4\"\n", .by_lines = true, .numbered = true, .first_line = 3,
				       .shown_lines = 2, .total_lines = 96334, .size = 600000, .more = true }, true);
	check_json((struct read_view){ .data = "a\nb\n", .by_lines = true, .first_line = 1, .shown_lines = 2,
				       .total_lines = 3, .size = 6, .more = true }, true);
	check_json((struct read_view){ .data = "x\ny\n", .by_lines = true, .numbered = true, .first_line = 999999,
				       .shown_lines = 2, .total_lines = 1000000, .size = 2000000 }, true);
	check_json((struct read_view){ .data = "abcdef", .by_lines = true, .numbered = true, .first_line = 7,
				       .shown_lines = 1, .total_lines = 9, .line_cut = true, .offset = 100,
				       .size = 5000, .more = true }, true);
	/* numbers counted up across a new digit, and wider than 8 */
	struct read_view wide = { .data = "a\nb\nc\n", .by_lines = true, .numbered = true, .first_line = 99999998,
				  .shown_lines = 3, .total_lines = 100000000, .size = 300000000 };
	check_json(wide, true);
	struct buf text = {0};
	wide.len = strlen(wide.data);
	render_read_file(&wide, &text);
	ck_assert_str_eq(buf_head(&text), "99999998\ta\n99999999\tb\n100000000\tc\n");
	buf_free(&text);
	struct read_view tens = { .data = "a\nb\nc", .len = 5, .by_lines = true, .numbered = true, .first_line = 9,
				  .shown_lines = 3, .total_lines = 11, .size = 5 };
	render_read_file(&tens, &text);
	ck_assert_str_eq(buf_head(&text), "     9\ta\n    10\tb\n    11\tc");
	buf_free(&text);
	check_json(tens, true);
	/* where it does not apply: by bytes, nothing shown, a long line */
	check_json((struct read_view){ .data = "45678", .offset = 4, .size = 16, .limit_arg = 5, .more = true }, false);
	check_json((struct read_view){ .data = "", .by_lines = true, .first_line = 20, .total_lines = 10,
				       .size = 50 }, false);
	struct buf line = {0};
	for (int i = 0; i < 2100; i++)
		buf_putc(&line, 'a');
	check_json((struct read_view){ .data = buf_head(&line), .len = buf_size(&line), .by_lines = true,
				       .numbered = true, .first_line = 1, .shown_lines = 1, .total_lines = 1,
				       .size = buf_size(&line) }, false);
	buf_free(&line);
}
END_TEST

START_TEST(read_file_bytes)
{
	golden_read("read_bytes", (struct read_view){ .data = "45678", .offset = 4, .size = 16, .limit_arg = 5,
						      .more = true });
	golden_read("read_bytes_end", (struct read_view){ .data = "9abcdef", .offset = 9, .size = 16 });
	golden_read("read_bytes_large", (struct read_view){ .data = "line 1\nline 2\nli", .size = 70000000,
							    .more = true,
							    .why = "the file is too large to read by lines" });
	struct buf out = {0};
	render_read_binary("bin/tool", "ELF executable or object", 16384, &out);
	golden("read_binary", &out);
	buf_free(&out);
}
END_TEST

START_TEST(search_text)
{
	struct buf out = {0};
	/* content: two files, context, a gap, a cut line */
	render_search_heading("src/a.c", true, &out);
	render_search_line(1, false, "one", 3, &out);
	render_search_line(2, true, "two key", 7, &out);
	render_search_line(3, false, "three", 5, &out);
	render_search_gap(&out);
	render_search_line(7, true, "seven key", 9, &out);
	render_search_heading("src/b.c", false, &out);
	struct buf longl = {0};
	for (int i = 0; i < 600; i++)
		buf_putc(&longl, i == 0 ? 'k' : 'x');
	render_search_line(12, true, buf_head(&longl), buf_size(&longl), &out);
	buf_free(&longl);
	render_search_summary(&(struct search_summary){ .content = true, .matches = 3, .files_searched = 10,
							.max_results = 3, .truncated = true }, &out);
	golden("search_content", &out);
	buf_clear(&out);

	/* files and count */
	render_search_hit("src/new.c", false, 0, &out);
	render_search_hit("old.md", false, 0, &out);
	render_search_summary(&(struct search_summary){ .files = 2, .files_searched = 40, .skipped = 7 }, &out);
	golden("search_files", &out);
	buf_clear(&out);
	render_search_hit("src/a.c", true, 3, &out);
	render_search_summary(&(struct search_summary){ .files = 1, .files_searched = 1, .skipped_large = 2,
							.large_mib = 32 }, &out);
	golden("search_count", &out);
	buf_clear(&out);

	/* nothing found: what was skipped */
	render_search_summary(&(struct search_summary){ .content = true, .files_searched = 4, .skipped = 11 }, &out);
	golden("search_none", &out);
	buf_free(&out);
}
END_TEST

/* memory's numbered lines, as "\n%6zu\t%s" would write them: the reference. */
static void numbered_reference(const char *t, size_t n, size_t first, size_t last, struct buf *out)
{
	size_t no = 1;
	for (const char *p = t, *end = t + n; p < end && no <= last; no++) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		size_t len = nl ? (size_t)(nl - p) : (size_t)(end - p);
		if (no >= first)
			buf_printf(out, "\n%6zu\t%.*s", no, (int)len, p);
		p += len + 1;
	}
}

static void numbered_same(const char *t, size_t n, size_t first, size_t last)
{
	struct buf a = {0}, b = {0};
	render_numbered_lines(t, n, first, last, &a);
	numbered_reference(t, n, first, last, &b);
	ck_assert_uint_eq(buf_size(&a), buf_size(&b));
	ck_assert(memcmp(buf_head(&a), buf_head(&b), buf_size(&b)) == 0);
	buf_free(&a);
	buf_free(&b);
}

START_TEST(numbered_lines_as_printf)
{
	const char *small = "a\n\nccc\n\tlast";
	numbered_same(small, strlen(small), 1, SIZE_MAX);
	numbered_same(small, strlen(small), 2, 3);
	numbered_same("x\n", 2, 1, SIZE_MAX);
	numbered_same("", 0, 1, SIZE_MAX);
	/* Past 999,999 lines the number is one digit wider, unpadded. */
	struct buf big = {0};
	for (int i = 0; i < 1000010; i++)
		buf_append(&big, i % 7 ? "line\n" : "\n", i % 7 ? 5 : 1);
	numbered_same(buf_head(&big), buf_size(&big), 999990, 1000005);
	numbered_same(buf_head(&big), buf_size(&big), 95, 105);
	buf_free(&big);
}
END_TEST

static Suite *render_suite(void)
{
	Suite *s = suite_create("render");
	TCase *tc = tcase_create("read_file");
	tcase_add_test(tc, read_file_lines);
	tcase_add_test(tc, numbered_lines_as_printf);
	tcase_add_test(tc, read_file_long_line);
	tcase_add_test(tc, read_file_bytes);
	tcase_add_test(tc, read_file_json);
	suite_add_tcase(s, tc);
	tc = tcase_create("search");
	tcase_add_test(tc, search_text);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return run_suite(render_suite());
}
