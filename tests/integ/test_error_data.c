/* SPDX-License-Identifier: MIT */
/*
 * What an error says and what the audit log holds, against the real
 * daemon: every validation_error carries data.errors (CONTRACT §4), with
 * the argument's JSON pointer when a tool refuses one itself (a command's
 * value that would be an option, an unknown process id) and path ""
 * when no argument is named; and every line of the audit log is one JSON
 * object, the records of background processes (§19) included.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "proto/json.h"
#include "tests/integ/harness.h"
#include "tests/unit/check_main.h"

#define CFG_AUTO "\"confirmation\":{\"default\":{\"execute\":\"auto\",\"write\":\"auto\",\"read\":\"auto\"}}"

/* Asserts r is a validation_error whose data.errors is exactly one entry
 * at path, its message holding needle. */
static void assert_one_error(struct tcc *c, const struct json *r, const char *path, const char *needle)
{
	tc_assert_kind(r, "validation_error");
	ck_assert_msg(tj_len(r, "error.data.errors") == 1, "data.errors: %s", tj_text(r));
	ck_assert_pstr_eq(tj_str(r, "error.data.errors.0.path"), path);
	const char *m = tj_str(r, "error.data.errors.0.message");
	ck_assert_msg(m && strstr(m, needle), "errors.0.message lacks \"%s\": %s", needle, tj_text(r));
	(void)c;
}

START_TEST(tool_refusals_carry_data_errors)
{
	struct tcd d;
	struct tcd_opts o = { .config = "{" CFG_AUTO "}" };
	tcd_prepare(&d, &o);
	tcd_write_tool(&d, "echoer.json",
		       "{\"name\":\"echoer\",\"kind\":\"command\",\"description\":\"Echoes a and b joined\","
		       "\"argv\":[\"echo\",\"{{a}}{{b}}\"],\"side_effects\":\"read\","
		       "\"input_schema\":{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"string\"},"
		       "\"b\":{\"type\":\"string\"}},\"required\":[\"a\",\"b\"]}}");
	tcd_spawn(&d, &o);
	ck_assert_int_eq(tcd_wait_socket(&d, d.sock, TCD_START_TIMEOUT_MS), 0);
	struct tcc *c = tcc_connect(&d);

	/* The command tool's own refusal names the argument that starts the
	 * element with '-'. */
	const struct json *r = tcc_call(c, "echoer", "{\"a\":\"-n\",\"b\":\"x\"}");
	assert_one_error(c, r, "/a", "starting with '-'");
	ck_assert_msg(strstr(tj_str(r, "error.message"), "/a: "), "%s", tj_text(r));
	/* A value that does not start the element is no option. */
	r = tcc_call(c, "echoer", "{\"a\":\"x\",\"b\":\"-n\"}");
	tc_assert_ok(r);

	/* An unknown process id: the same message as before, and the path. */
	r = tcc_call(c, "process_io", "{\"process_id\":\"zz\"}");
	assert_one_error(c, r, "/process_id", "No process 'zz' of yours");
	ck_assert_msg(str_has_prefix(tj_str(r, "error.message"), "No process 'zz' of yours"), "%s", tj_text(r));
	r = tcc_call(c, "process_kill", "{\"process_id\":\"zz\"}");
	assert_one_error(c, r, "/process_id", "No process 'zz' of yours");

	/* A tool's own check of a pattern. */
	r = tcc_call(c, "glob", "{\"pattern\":\"[\"}");
	if (tj_has(r, "error"))
		assert_one_error(c, r, "/pattern", "");

	/* Params no argument of a tool is at fault for: path "". */
	r = tcc_request(c, "tools/call", "{\"name\":1,\"arguments\":{}}");
	assert_one_error(c, r, "", "name must be a string");
	r = tcc_request(c, "tools/call", "{\"name\":\"echoer\",\"arguments\":\"{\\\"a\\\":\"}");
	ck_assert_str_eq(tj_kind(r), "validation_error");
	ck_assert_int_eq(tj_len(r, "error.data.errors"), 1);
	ck_assert_pstr_eq(tj_str(r, "error.data.errors.0.path"), "");
	ck_assert_msg(strstr(tj_str(r, "error.message"), tj_str(r, "error.data.errors.0.message")), "%s", tj_text(r));
	r = tcc_request(c, "tasks/get", "{\"taskId\":\"not-one\"}");
	if (tj_has(r, "error.data.kind") && str_eq(tj_str(r, "error.data.kind"), "validation_error"))
		assert_one_error(c, r, "", "");

	tcc_close(c);
	ck_assert_int_eq(tcd_stop(&d), 0);
	tcd_free(&d);
}
END_TEST

START_TEST(audit_lines_are_json_with_processes)
{
	struct tcd d;
	tcd_start(&d, "{" CFG_AUTO ",\"audit_log\":\"@DIR@/audit.log\",\"audit_fsync_ms\":0}");
	struct tcc *c = tcc_connect(&d);
	/* One process that ends by itself, one killed, and plain calls around. */
	tc_assert_ok(tcc_call(c, "shell", "{\"command\":\"echo one\"}"));
	const struct json *r = tcc_call(c, "shell", "{\"command\":\"echo short\",\"background\":true}");
	tc_assert_ok(r);
	r = tcc_call(c, "shell", "{\"command\":\"echo ready; sleep 300\",\"background\":true,\"until\":\"ready\"}");
	tc_assert_ok(r);
	const char *id = tj_str(r, "result.structuredContent.process_id");
	ck_assert_ptr_nonnull(id);
	tc_assert_ok(tcc_call(c, "process_kill", tcc_fmt(c, "{\"process_id\":\"%s\"}", id)));
	tc_assert_ok(tcc_call(c, "shell", "{\"command\":\"echo two\"}"));

	char *log = xasprintf("%s/audit.log", d.dir);
	uint64_t end = tc_now_ms() + tc_wait_scaled(10000);
	size_t exited = 0;
	while (tc_now_ms() < end) {
		char *text = tcd_read(NULL, log, NULL);
		exited = 0;
		for (const char *p = text; p && (p = strstr(p, "\"event\":\"process.exited\"")); p++)
			exited++;
		bool two = exited >= 2 && strstr(text, "echo two");
		free(text);
		if (two)
			break;
		tc_pause_ms(20);
	}
	ck_assert_msg(exited >= 2, "the audit log has %zu process.exited records", exited);
	size_t len = 0;
	char *text = tcd_read(NULL, log, &len);
	ck_assert_ptr_nonnull(text);
	ck_assert(strstr(text, "\"event\":\"process.started\""));
	ck_assert_msg(len > 0 && text[len - 1] == '\n', "the audit log does not end with a newline");
	size_t lines = 0;
	for (size_t at = 0; at < len;) {
		const char *nl = memchr(text + at, '\n', len - at);
		size_t n = nl ? (size_t)(nl - (text + at)) : len - at;
		lines++;
		ck_assert_msg(n > 0, "line %zu of the audit log is empty:\n%s", lines, text);
		struct json_doc *doc = NULL;
		ck_assert_msg(json_parse(text + at, n, 0, 0, &doc, NULL) == 0, "line %zu is not JSON: %.*s", lines,
			      (int)n, text + at);
		ck_assert_msg(json_doc_root(doc)->type == JSON_OBJECT, "line %zu is not an object", lines);
		json_doc_unref(doc);
		at += n + 1;
	}
	ck_assert_uint_ge(lines, 7);
	free(text);
	free(log);
	tcc_close(c);
	ck_assert_int_eq(tcd_stop(&d), 0);
	tcd_free(&d);
}
END_TEST

static Suite *error_data_suite(void)
{
	Suite *s = suite_create("error_data");
	TCase *tc = tcase_create("error_data");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, tool_refusals_carry_data_errors);
	tcase_add_test(tc, audit_lines_are_json_with_processes);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return run_suite(error_data_suite());
}
