/* SPDX-License-Identifier: MIT */
/*
 * JSON-RPC framing and codec. The codec is checked against golden files:
 * each tests/data/codec/NAME.in holds one message; NAME.golden holds what
 * the codec makes of it (one line per element: its classification and the
 * response a server writes). Run with TC_UPDATE_GOLDEN=1 to rewrite them.
 */
#include <check.h>
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "proto/jsonrpc.h"
#include "tests/unit/check_main.h"

static char *slurp(const char *path)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return NULL;
	struct buf b = {0};
	char tmp[4096];
	size_t n;
	while ((n = fread(tmp, 1, sizeof(tmp), f)) > 0)
		buf_append(&b, tmp, n);
	fclose(f);
	return buf_steal(&b);
}

/* Describes one element and the answer a server gives to it. */
static void describe(const struct json *v, const char *src, struct buf *out)
{
	struct jrpc_req req;
	const char *why = NULL;
	int r = jrpc_parse_request(v, src, &req, &why);
	if (r < 0) {
		buf_printf(out, "invalid (%s) -> ", why);
		jrpc_write_error(out, NULL, 0, r, "Invalid Request", NULL, 0);
	} else if (!req.id) {
		buf_printf(out, "notification %s -> (nothing)", req.method);
	} else {
		buf_printf(out, "request %s -> ", req.method);
		jrpc_write_result(out, req.id, req.id_len, "{}", 2);
	}
	buf_putc(out, '\n');
}

static void codec(const char *text, size_t len, struct buf *out)
{
	struct json_doc *doc = NULL;
	struct json_err err;
	if (json_parse(text, len, 0, 64, &doc, &err) < 0) {
		buf_printf(out, "%s -> ", err.code == JSON_ERR_DEPTH ? "too deep" : "not json");
		jrpc_write_error(out, NULL, 0, err.code == JSON_ERR_DEPTH ? JRPC_INVALID_REQUEST : JRPC_PARSE_ERROR,
				 "error", NULL, 0);
		buf_putc(out, '\n');
		return;
	}
	const struct json *root = json_doc_root(doc);
	if (root->type == JSON_ARRAY) {
		buf_printf(out, "batch of %zu\n", root->u.arr.n);
		if (root->u.arr.n == 0) {
			jrpc_write_error(out, NULL, 0, JRPC_INVALID_REQUEST, "Invalid Request", NULL, 0);
			buf_putc(out, '\n');
		}
		for (size_t i = 0; i < root->u.arr.n; i++)
			describe(root->u.arr.items[i], json_doc_text(doc), out);
	} else {
		describe(root, json_doc_text(doc), out);
	}
	json_doc_unref(doc);
}

START_TEST(golden_files)
{
	const char *src = getenv("TC_SOURCE_ROOT");
	ck_assert_msg(src != NULL, "TC_SOURCE_ROOT is not set (run through meson test)");
	char dir[4096];
	snprintf(dir, sizeof(dir), "%s/tests/data/codec", src);
	DIR *d = opendir(dir);
	ck_assert_ptr_nonnull(d);
	struct dirent *de;
	unsigned cases = 0;
	bool update = getenv("TC_UPDATE_GOLDEN") != NULL;
	while ((de = readdir(d))) {
		size_t l = strlen(de->d_name);
		if (l < 4 || strcmp(de->d_name + l - 3, ".in") != 0)
			continue;
		char path[8192], gold[8192];
		snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
		snprintf(gold, sizeof(gold), "%s/%.*s.golden", dir, (int)(l - 3), de->d_name);
		char *in = slurp(path);
		ck_assert_ptr_nonnull(in);
		size_t n = strlen(in);
		while (n && in[n - 1] == '\n')
			n--;
		struct buf out = {0};
		codec(in, n, &out);
		if (update) {
			FILE *f = fopen(gold, "wb");
			fwrite(buf_head(&out), 1, buf_size(&out), f);
			fclose(f);
		}
		char *want = slurp(gold);
		ck_assert_msg(want != NULL, "missing golden file %s", gold);
		ck_assert_msg(strcmp(want, buf_head(&out)) == 0, "%s:\nwant:\n%s\ngot:\n%s", de->d_name, want,
			      buf_head(&out));
		free(want);
		free(in);
		buf_free(&out);
		cases++;
	}
	closedir(d);
	ck_assert_uint_ge(cases, 18);
}
END_TEST

/* Feeds text to a framer in pieces of step bytes; collects lines. */
static void frame_all(const char *text, size_t step, size_t max, struct buf *lines)
{
	struct framer f = { .max = max };
	struct buf in = {0};
	size_t n = strlen(text);
	for (size_t i = 0; i < n; i += step) {
		buf_append(&in, text + i, MIN(step, n - i));
		const char *line;
		size_t len;
		enum frame_result r;
		while ((r = framer_next(&f, &in, &line, &len)) != FRAME_NONE) {
			if (r == FRAME_TOO_LONG)
				buf_puts(lines, "<too long>|");
			else {
				buf_append(lines, line, len);
				buf_putc(lines, '|');
			}
		}
	}
	buf_free(&in);
}

START_TEST(framing)
{
	const char *text = "{\"a\":1}\r\n\n   \n{\"b\":2}\n" "0123456789012345678901234567890123456789\n" "{\"c\":3}\n";
	for (size_t step = 1; step <= strlen(text); step++) {
		struct buf lines = {0};
		frame_all(text, step, 16, &lines);
		ck_assert_msg(strcmp(buf_head(&lines), "{\"a\":1}|{\"b\":2}|<too long>|{\"c\":3}|") == 0,
			      "step %zu: %s", step, buf_head(&lines));
		buf_free(&lines);
	}
}
END_TEST

START_TEST(too_long_is_reported_once)
{
	struct framer f = { .max = 8 };
	struct buf in = {0};
	unsigned reports = 0;
	for (int i = 0; i < 1000; i++) {
		buf_append(&in, "xxxxxxxxxxxxxxxxxxxx", 20);
		const char *line;
		size_t len;
		enum frame_result r;
		while ((r = framer_next(&f, &in, &line, &len)) != FRAME_NONE)
			reports += r == FRAME_TOO_LONG;
		/* Discarded input is not kept. */
		ck_assert_uint_le(buf_size(&in), 20);
	}
	ck_assert_uint_eq(reports, 1);
	buf_append(&in, "yy\n{}\n", 6);
	const char *line;
	size_t len;
	ck_assert_int_eq(framer_next(&f, &in, &line, &len), FRAME_LINE);
	ck_assert_int_eq(len, 2);
	ck_assert_int_eq(memcmp(line, "{}", 2), 0);
	buf_free(&in);
}
END_TEST

START_TEST(notification_writer)
{
	struct buf b = {0};
	jrpc_write_notification(&b, "notifications/event", "{\"type\":\"x\"}", 12);
	ck_assert_str_eq(buf_head(&b), "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/event\",\"params\":{\"type\":\"x\"}}");
	buf_clear(&b);
	jrpc_write_error(&b, "7", 1, -32603, "bad \xff\n", "{\"kind\":\"internal\"}", 19);
	ck_assert_str_eq(buf_head(&b), "{\"jsonrpc\":\"2.0\",\"id\":7,\"error\":{\"code\":-32603,\"message\":\"bad \xef\xbf\xbd\\n\",\"data\":{\"kind\":\"internal\"}}}");
	buf_free(&b);
}
END_TEST

/* Result answers: written whole or head first (the value appended in
 * place), the same bytes either way; ids echoed as sent, null when absent. */
START_TEST(result_writers)
{
	struct buf a = {0}, b = {0};
	jrpc_write_result(&a, "\"x-1\"", 5, "{\"ok\":true}", 11);
	ck_assert_str_eq(buf_head(&a), "{\"jsonrpc\":\"2.0\",\"id\":\"x-1\",\"result\":{\"ok\":true}}");
	jrpc_write_result_head(&b, "\"x-1\"", 5);
	buf_puts(&b, "{\"ok\":true}}");
	ck_assert_str_eq(buf_head(&a), buf_head(&b));
	buf_clear(&a);
	jrpc_write_result(&a, NULL, 0, "{}", 2);
	ck_assert_str_eq(buf_head(&a), "{\"jsonrpc\":\"2.0\",\"id\":null,\"result\":{}}");
	/* Appended after what the buffer held, still NUL-terminated. */
	jrpc_write_result(&a, "12", 2, "[]", 2);
	ck_assert_str_eq(buf_head(&a), "{\"jsonrpc\":\"2.0\",\"id\":null,\"result\":{}}"
					"{\"jsonrpc\":\"2.0\",\"id\":12,\"result\":[]}");
	buf_free(&a);
	buf_free(&b);
}
END_TEST

START_TEST(decimal_numbers)
{
	struct buf b = {0};
	buf_put_u64(&b, 0);
	buf_putc(&b, ' ');
	buf_put_u64(&b, 7);
	buf_putc(&b, ' ');
	buf_put_u64(&b, 1234567890);
	buf_putc(&b, ' ');
	buf_put_u64(&b, UINT64_MAX);
	ck_assert_str_eq(buf_head(&b), "0 7 1234567890 18446744073709551615");
	buf_free(&b);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("jsonrpc");
	TCase *tc = tcase_create("core");
	tcase_add_test(tc, golden_files);
	tcase_add_test(tc, framing);
	tcase_add_test(tc, too_long_is_reported_once);
	tcase_add_test(tc, notification_writer);
	tcase_add_test(tc, result_writers);
	tcase_add_test(tc, decimal_numbers);
	suite_add_tcase(s, tc);
	return run_suite(s);
}
