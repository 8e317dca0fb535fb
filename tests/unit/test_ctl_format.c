/* SPDX-License-Identifier: MIT */
/*
 * What toolcallctl prints (daemon/ctl_format.c): pretty JSON, call text,
 * error envelopes, the tool list, event lines, the approver's question and
 * the answers it accepts; and that text from the daemon cannot drive the
 * terminal.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/ctl/ctl_format.h"
#include "tests/unit/check_main.h"

/* Parses text (asserting it is valid) into *doc and returns its root. */
static const struct json *parse(const char *text, struct json_doc **doc)
{
	struct json_err err;
	int r = json_parse(text, strlen(text), 0, 0, doc, &err);
	ck_assert_msg(r == 0, "%s: %s", text, err.msg);
	return json_doc_root(*doc);
}

/* Runs fmt on the parsed text and compares the output with want. */
#define ASSERT_FORMAT(fmt, text, want)                                  \
	do {                                                             \
		struct json_doc *_d = NULL;                              \
		struct buf _b = {};                                      \
		fmt(parse(text, &_d), &_b);                              \
		buf_putc(&_b, '\0');                                     \
		ck_assert_str_eq(buf_head(&_b), want);                   \
		buf_free(&_b);                                           \
		json_doc_unref(_d);                                      \
	} while (0)

START_TEST(pretty)
{
	ASSERT_FORMAT(ctl_pretty, "{}", "{}\n");
	ASSERT_FORMAT(ctl_pretty, "[]", "[]\n");
	ASSERT_FORMAT(ctl_pretty, "{\"a\":[1,2.50,{\"b\":null}],\"c\":\"x\\ny\",\"d\":true,\"e\":{}}",
		      "{\n"
		      "  \"a\": [\n"
		      "    1,\n"
		      "    2.50,\n"
		      "    {\n"
		      "      \"b\": null\n"
		      "    }\n"
		      "  ],\n"
		      "  \"c\": \"x\\ny\",\n"
		      "  \"d\": true,\n"
		      "  \"e\": {}\n"
		      "}\n");
}
END_TEST

START_TEST(call_text)
{
	struct json_doc *d = NULL;
	struct buf b = {};
	/* Text items only, each ending with one newline; output as is. */
	bool is_error = ctl_call_text(parse("{\"content\":[{\"type\":\"text\",\"text\":\"a\\u001b[1m\"},"
					    "{\"type\":\"image\",\"data\":\"x\"},"
					    "{\"type\":\"text\",\"text\":\"b\\n\"}],\"isError\":false}", &d), &b);
	buf_putc(&b, '\0');
	ck_assert(!is_error);
	ck_assert_str_eq(buf_head(&b), "a\x1b[1m\nb\n");
	buf_free(&b);
	json_doc_unref(d);

	is_error = ctl_call_text(parse("{\"content\":[],\"isError\":true}", &d), &b);
	ck_assert(is_error);
	ck_assert_uint_eq(buf_size(&b), 0);
	json_doc_unref(d);
}
END_TEST

START_TEST(error_lines)
{
	ASSERT_FORMAT(ctl_error_lines,
		      "{\"code\":-32603,\"message\":\"Tool 'shell' exceeded its 60000 ms limit\","
		      "\"data\":{\"kind\":\"timeout\",\"retryable\":false}}",
		      "error: timeout: Tool 'shell' exceeded its 60000 ms limit\n");
	ASSERT_FORMAT(ctl_error_lines,
		      "{\"code\":-32602,\"message\":\"Invalid arguments for 'read_file'\","
		      "\"data\":{\"kind\":\"validation_error\",\"errors\":["
		      "{\"path\":\"/path\",\"message\":\"expected string, got number\"},"
		      "{\"path\":\"\",\"message\":\"required property 'path' missing\"}]}}",
		      "error: validation_error: Invalid arguments for 'read_file'\n"
		      "  /path: expected string, got number\n"
		      "  /: required property 'path' missing\n");
	/* An entry that names no argument and repeats the message is not
	 * printed again. */
	ASSERT_FORMAT(ctl_error_lines,
		      "{\"code\":-32602,\"message\":\"No process 'zz' of yours\","
		      "\"data\":{\"kind\":\"validation_error\",\"errors\":["
		      "{\"path\":\"\",\"message\":\"No process 'zz' of yours\"}]}}",
		      "error: validation_error: No process 'zz' of yours\n");
	/* Errors outside calls have no kind: the code stands in. */
	ASSERT_FORMAT(ctl_error_lines, "{\"code\":-32601,\"message\":\"Method not found\"}",
		      "error: code -32601: Method not found\n");
	/* A message cannot reach the terminal's control sequences. */
	ASSERT_FORMAT(ctl_error_lines,
		      "{\"code\":-32603,\"message\":\"bad\\u001b]0;pwned\\u0007\",\"data\":{\"kind\":\"internal\"}}",
		      "error: internal: bad?]0;pwned?\n");
}
END_TEST

START_TEST(tool_lines)
{
	struct json_doc *d = NULL;
	const struct json *list = parse(
		"[{\"name\":\"read_file\",\"description\":\"Read a file.\\nSecond line.\","
		"\"_meta\":{\"toolcalld/sideEffects\":\"read\"}},"
		"{\"name\":\"fs_write\",\"description\":\"\",\"_meta\":{\"toolcalld/sideEffects\":\"write\"}},"
		"{\"name\":\"x\",\"description\":\"No meta\"},"
		"{\"name\":\"shell\",\"description\":\"Run\\ta command\","
		"\"_meta\":{\"toolcalld/sideEffects\":\"execute\"}}]", &d);
	struct buf b = {};
	ctl_tool_lines((const struct json *const *)list->u.arr.items, list->u.arr.n, &b);
	buf_putc(&b, '\0');
	ck_assert_str_eq(buf_head(&b),
			 "read_file  read     Read a file.\n"
			 "fs_write   write\n"
			 "x          -        No meta\n"
			 "shell      execute  Run?a command\n");
	buf_free(&b);

	/* An empty list prints nothing. */
	ctl_tool_lines(NULL, 0, &b);
	ck_assert_uint_eq(buf_size(&b), 0);
	json_doc_unref(d);
}
END_TEST

START_TEST(event_lines)
{
	ASSERT_FORMAT(ctl_event_line,
		      "{\"type\":\"tool.completed\",\"time\":\"2026-01-02T03:04:05.678Z\",\"sessionId\":\"s1\","
		      "\"callId\":\"c7\",\"tool\":\"read_file\",\"durationMs\":12,\"attempts\":1}",
		      "2026-01-02T03:04:05.678Z tool.completed read_file call=c7 session=s1 durationMs=12 attempts=1\n");
	/* Numeric times are shown in UTC; nested values compactly. */
	ASSERT_FORMAT(ctl_event_line,
		      "{\"type\":\"registry.reloaded\",\"time\":0,\"added\":[\"a\",\"b\"],\"note\":\"two words\"}",
		      "1970-01-01T00:00:00.000Z registry.reloaded added=[\"a\",\"b\"] note=\"two words\"\n");
	/* Long values are cut; control characters never reach the terminal. */
	char text[1024];
	char longv[400];
	memset(longv, 'x', sizeof(longv) - 1);
	longv[sizeof(longv) - 1] = '\0';
	snprintf(text, sizeof(text), "{\"type\":\"tool.output_delta\",\"time\":1,\"data\":\"%s\"}", longv);
	struct json_doc *d = NULL;
	struct buf b = {};
	ctl_event_line(parse(text, &d), &b);
	ck_assert_uint_lt(buf_size(&b), 300);
	ck_assert_ptr_nonnull(memmem(buf_head(&b), buf_size(&b), "xxx...\n", 7));
	buf_free(&b);
	json_doc_unref(d);
	ASSERT_FORMAT(ctl_event_line, "{\"type\":\"tool.called\",\"tool\":\"a\\u001b[2Jb\"}",
		      "- tool.called \"a\\u001b[2Jb\"\n");
}
END_TEST

START_TEST(confirm_prompt)
{
	ASSERT_FORMAT(ctl_confirm_prompt,
		      "{\"type\":\"tool.confirmation_requested\",\"requestId\":\"r1\",\"tool\":\"write_file\","
		      "\"sideEffects\":\"write\",\"summary\":\"path=src/a.c (120 bytes)\",\"files\":[\"src/a.c\"]}",
		      "Allow write_file (write) path=src/a.c (120 bytes) [files: src/a.c]? [y]es/[n]o/[a]lways: ");
	/* A connection through the network proxy: host and port. */
	ASSERT_FORMAT(ctl_confirm_prompt,
		      "{\"type\":\"tool.confirmation_requested\",\"requestId\":\"nc-1\",\"kind\":\"network.connect\","
		      "\"tool\":\"shell\",\"host\":\"registry.npmjs.org\",\"port\":443,\"sideEffect\":\"network\","
		      "\"input\":\"{\\\"host\\\":\\\"registry.npmjs.org\\\",\\\"port\\\":443}\",\"files\":[]}",
		      "Allow shell to connect to registry.npmjs.org:443 (network.connect)? [y]es/[n]o/[a]lways: ");
	/* A summary cannot forge a second question or wipe the screen. */
	ASSERT_FORMAT(ctl_confirm_prompt,
		      "{\"tool\":\"shell\",\"sideEffect\":\"execute\","
		      "\"summary\":\"ls\\rAllow read_file (read) x\\u001b[2K\"}",
		      "Allow shell (execute) ls?Allow read_file (read) x?[2K? [y]es/[n]o/[a]lways: ");
	/* The arguments are shown whole, one a line, strings with their
	 * length; control characters and stray bytes escaped, not hidden. */
	ASSERT_FORMAT(ctl_confirm_prompt, "{\"tool\":\"shell\",\"input\":{\"command\":\"make\"}}",
		      "Allow shell:\n  command (4 bytes): make\nAllow it? [y]es/[n]o/[a]lways: ");
	ASSERT_FORMAT(ctl_confirm_prompt,
		      "{\"tool\":\"write_file\",\"sideEffect\":\"write\",\"files\":[\"NOTES.md -> .git/config\"],"
		      "\"input\":\"{\\\"content\\\":\\\"a\\\\nb\\\\u001b[2K\\\",\\\"n\\\":3,\\\"path\\\":\\\"NOTES.md\\\"}\"}",
		      "Allow write_file (write):\n  content (7 bytes): a\\nb\\u{1B}[2K\n  n: 3\n"
		      "  path (8 bytes): NOTES.md\n  files: NOTES.md -> .git/config\nAllow it? [y]es/[n]o/[a]lways: ");
	/* The diff of an edit comes first, line by line, tabs as spaces, no escapes. */
	ASSERT_FORMAT(ctl_confirm_prompt,
		      "{\"tool\":\"edit_file\",\"sideEffect\":\"write\",\"files\":[\"a.c\"],"
		      "\"diff\":\"--- a/a.c\\n+++ b/a.c\\n@@ -1 +1 @@\\n-\\told\\n+new\\u001b[2K\\n\"}",
		      "--- a/a.c\n+++ b/a.c\n@@ -1 +1 @@\n-    old\n+new?[2K\n"
		      "Allow edit_file (write) [files: a.c]? [y]es/[n]o/[a]lways: ");

	struct json_doc *d = NULL;
	const struct json *id = ctl_confirm_request_id(parse("{\"requestId\":42}", &d));
	int64_t v;
	ck_assert(json_get_int(id, &v));
	ck_assert_int_eq(v, 42);
	json_doc_unref(d);
	ck_assert_ptr_null(ctl_confirm_request_id(parse("{\"tool\":\"x\"}", &d)));
	json_doc_unref(d);
}
END_TEST

START_TEST(answers)
{
	ck_assert_str_eq(ctl_parse_answer("y", 1), "allow");
	ck_assert_str_eq(ctl_parse_answer(" Yes \r", 6), "allow");
	ck_assert_str_eq(ctl_parse_answer("n", 1), "deny");
	ck_assert_str_eq(ctl_parse_answer("NO", 2), "deny");
	ck_assert_str_eq(ctl_parse_answer("a", 1), "always_allow");
	ck_assert_str_eq(ctl_parse_answer("always", 6), "always_allow");
	ck_assert_ptr_null(ctl_parse_answer("", 0));
	ck_assert_ptr_null(ctl_parse_answer("yep", 3));
	ck_assert_ptr_null(ctl_parse_answer("y\0", 2));
	/* Only the given length counts. */
	ck_assert_str_eq(ctl_parse_answer("nope", 1), "deny");
}
END_TEST

START_TEST(sanitize)
{
	struct buf b = {};
	/* C0, DEL, C1, line separators and bidi overrides are replaced;
	 * other UTF-8 is kept. */
	const char in[] = "a\tb\x7f" "c\xc2\x9b" "d\xe2\x80\xae" "e\xc3\xa9\xff" "f\xe2\x80\xa8" "g\xe2\x80\xa7";
	ctl_sanitize(in, sizeof(in) - 1, 100, &b);
	buf_putc(&b, '\0');
	ck_assert_str_eq(buf_head(&b), "a?b?c?d?e\xc3\xa9?f?g\xe2\x80\xa7");
	buf_clear(&b);

	/* Cut at a character boundary. */
	ctl_sanitize("\xc3\xa9\xc3\xa9\xc3\xa9", 6, 5, &b);
	buf_putc(&b, '\0');
	ck_assert_str_eq(buf_head(&b), "\xc3\xa9\xc3\xa9...");
	buf_free(&b);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("ctl_format");
	TCase *tc = tcase_create("format");
	tcase_add_test(tc, pretty);
	tcase_add_test(tc, call_text);
	tcase_add_test(tc, error_lines);
	tcase_add_test(tc, tool_lines);
	tcase_add_test(tc, event_lines);
	tcase_add_test(tc, confirm_prompt);
	tcase_add_test(tc, answers);
	tcase_add_test(tc, sanitize);
	suite_add_tcase(s, tc);

	return run_suite(s);
}
