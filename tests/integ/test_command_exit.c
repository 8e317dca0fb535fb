/* SPDX-License-Identifier: MIT */
/*
 * How a command tool's exit is read: "ok_exit_codes" says which statuses
 * are a success (grep finding nothing exits 1), and a run that failed
 * keeps what it printed: the ends of stdout and stderr are in the error's
 * data (structuredContent.error with toolErrors "result"). A value the
 * tool refuses (one that would be an option) runs nothing: attempts 0,
 * and the session's budget is not spent. A failure's message (the text a
 * model reads) holds stdout, then stderr under a "[stderr]" line, the
 * head and tail of each within limits.shell_output_kb.
 */
#include <check.h>
#include <string.h>

#include "tests/integ/harness.h"
#include "tests/unit/check_main.h"

static void start(struct tcd *d)
{
	const char *cfg = "{\"retry\":{\"max_attempts\":1},\"limits\":{\"shell_output_kb\":1}}";
	tcd_prepare(d, &(struct tcd_opts){ .config = cfg });
	tcd_write_tool(d, "count.json",
		       "{\"name\":\"count\",\"kind\":\"command\",\"side_effects\":\"read\",\"description\":\"Count\","
		       " \"argv\":[\"grep\",\"-c\",\"--\",\"{{pattern}}\",\"notes.txt\"], \"ok_exit_codes\":[0,1],"
		       " \"input_schema\":{\"type\":\"object\",\"properties\":{\"pattern\":{\"type\":\"string\"}},"
		       "                 \"required\":[\"pattern\"]}}");
	tcd_write_tool(d, "strict.json",
		       "{\"name\":\"strict\",\"kind\":\"command\",\"side_effects\":\"read\",\"description\":\"Count\","
		       " \"argv\":[\"grep\",\"-c\",\"--\",\"{{pattern}}\",\"notes.txt\"],"
		       " \"input_schema\":{\"type\":\"object\",\"properties\":{\"pattern\":{\"type\":\"string\"}},"
		       "                 \"required\":[\"pattern\"]}}");
	tcd_write_tool(d, "echoer.json",
		       "{\"name\":\"echoer\",\"kind\":\"command\",\"side_effects\":\"read\",\"description\":\"Echo\","
		       " \"argv\":[\"echo\",\"{{msg}}\"],"
		       " \"input_schema\":{\"type\":\"object\",\"properties\":{\"msg\":{\"type\":\"string\"}},"
		       "                 \"required\":[\"msg\"]}}");
	tcd_write_tool(d, "build.json",
		       "{\"name\":\"build\",\"kind\":\"command\",\"side_effects\":\"read\",\"description\":\"Fails\","
		       " \"argv\":[\"sh\",\"-c\",\"echo compiling a.c; echo compiling b.c; echo 'b.c:3: error' >&2; exit 2\"],"
		       " \"input_schema\":{\"type\":\"object\"}}");
	tcd_write_tool(d, "test.json",
		       "{\"name\":\"test\",\"kind\":\"command\",\"side_effects\":\"read\",\"description\":\"Fails\","
		       " \"argv\":[\"/bin/sh\",\"-c\",\"echo 'FAIL: test_parse expected 3 got 4'; echo 'warning: deprecated' >&2;"
		       " exit 1\"], \"input_schema\":{\"type\":\"object\"}}");
	tcd_write_tool(d, "quiet.json",
		       "{\"name\":\"quiet\",\"kind\":\"command\",\"side_effects\":\"read\",\"description\":\"Fails\","
		       " \"argv\":[\"/bin/sh\",\"-c\",\"echo 'FAIL: one'; exit 1\"], \"input_schema\":{\"type\":\"object\"}}");
	tcd_write_tool(d, "loud.json",
		       "{\"name\":\"loud\",\"kind\":\"command\",\"side_effects\":\"read\",\"description\":\"Fails\","
		       " \"argv\":[\"/bin/sh\",\"-c\",\"seq 1 3000; echo 'warning: slow' >&2; exit 4\"],"
		       " \"input_schema\":{\"type\":\"object\"}}");
	tcd_write_tool(d, "both.json",
		       "{\"name\":\"both\",\"kind\":\"command\",\"side_effects\":\"read\",\"description\":\"Fails\","
		       " \"argv\":[\"/bin/sh\",\"-c\",\"seq 1 3000; seq 5001 8000 >&2; exit 5\"],"
		       " \"input_schema\":{\"type\":\"object\"}}");
	tcd_spawn(d, &(struct tcd_opts){ .config = cfg });
	ck_assert_int_eq(tcd_wait_socket(d, d->sock, 5000), 0);
	tcd_put(d, "notes.txt", "alpha\nbeta\n");
}

START_TEST(ok_exit_codes_are_a_success)
{
	struct tcd d;
	start(&d);
	struct tcc *c = tcc_connect(&d);
	const struct json *r = tcc_call(c, "count", "{\"pattern\":\"alpha\"}");
	tc_assert_ok(r);
	ck_assert(!tj_bool(r, "result.isError"));
	/* No match: grep exits 1, which the file says is fine. */
	r = tcc_call(c, "count", "{\"pattern\":\"gamma\"}");
	tc_assert_ok(r);
	ck_assert(!tj_bool(r, "result.isError"));
	ck_assert_int_eq(tj_int(r, "result.structuredContent.exit_code"), 1);
	ck_assert_str_eq(tj_str(r, "result.structuredContent.stdout"), "0\n");
	/* Without ok_exit_codes, only 0 is. */
	r = tcc_call(c, "strict", "{\"pattern\":\"gamma\"}");
	tc_assert_kind(r, "execution_error");
	ck_assert_int_eq(tj_int(r, "error.data.exitCode"), 1);
	tcc_close(c);
	tcd_finish(&d);
}
END_TEST

START_TEST(failure_keeps_stdout)
{
	struct tcd d;
	start(&d);
	struct tcc *c = tcc_connect(&d);
	const struct json *r = tcc_call(c, "build", "{}");
	tc_assert_kind(r, "execution_error");
	ck_assert_int_eq(tj_int(r, "error.data.exitCode"), 2);
	ck_assert_str_eq(tj_str(r, "error.data.stdout"), "compiling a.c\ncompiling b.c");
	ck_assert_str_eq(tj_str(r, "error.data.stderr"), "b.c:3: error");
	tcc_close(c);

	/* As a result for the model: next to the kind in structuredContent. */
	c = tcc_connect(&d);
	tcc_initialize(c, "\"toolErrors\":\"result\"");
	r = tcc_call(c, "build", "{}");
	ck_assert(tj_bool(r, "result.isError"));
	ck_assert_str_eq(tj_str(r, "result.structuredContent.error.stdout"), "compiling a.c\ncompiling b.c");
	ck_assert_str_eq(tj_str(r, "result.structuredContent.error.stderr"), "b.c:3: error");
	tcc_close(c);
	tcd_finish(&d);
}
END_TEST

/* The message says what both streams hold, each under its name. */
START_TEST(failure_message_has_both_streams)
{
	struct tcd d;
	start(&d);
	struct tcc *c = tcc_connect(&d);
	const struct json *r = tcc_call(c, "test", "{}");
	tc_assert_kind(r, "execution_error");
	ck_assert_str_eq(tj_str(r, "error.message"), "Command '/bin/sh' exited with status 1:\n"
						      "FAIL: test_parse expected 3 got 4\n[stderr]\nwarning: deprecated");
	ck_assert_str_eq(tj_str(r, "error.data.stdout"), "FAIL: test_parse expected 3 got 4");
	ck_assert_str_eq(tj_str(r, "error.data.stderr"), "warning: deprecated");
	/* stdout alone. */
	r = tcc_call(c, "quiet", "{}");
	ck_assert_str_eq(tj_str(r, "error.message"), "Command '/bin/sh' exited with status 1:\nFAIL: one");
	/* Long: the head and the tail of stdout within the 1 KiB of
	 * limits.shell_output_kb, and stderr whole. */
	r = tcc_call(c, "loud", "{}");
	const char *m = tj_str(r, "error.message");
	ck_assert_msg(strncmp(m, "Command '/bin/sh' exited with status 4:\n1\n2\n3\n", 46) == 0, "%s", m);
	ck_assert_msg(strstr(m, " bytes omitted ...]\n"), "%s", m);
	ck_assert_msg(strstr(m, "\n2999\n3000\n[stderr]\nwarning: slow") == m + strlen(m) - 33, "%s", m);
	ck_assert_uint_le(strlen(m), 1024 + 100);
	ck_assert_uint_ge(strlen(m), 1024);
	/* Both long: half the cap each, the head and the tail of each. */
	r = tcc_call(c, "both", "{}");
	m = tj_str(r, "error.message");
	ck_assert_msg(strncmp(m, "Command '/bin/sh' exited with status 5:\n1\n2\n3\n", 46) == 0, "%s", m);
	ck_assert_msg(strstr(m, "\n2999\n3000\n[stderr]\n5001\n5002\n"), "%s", m);
	ck_assert_msg(strstr(m, "\n7999\n8000") == m + strlen(m) - 10, "%s", m);
	const char *second = strstr(m, "[stderr]");
	const char *cut = strstr(m, " bytes omitted ...]\n");
	ck_assert_msg(second && cut && cut < second, "%s", m);
	ck_assert_msg(strstr(second, " bytes omitted ...]\n"), "%s", m);
	ck_assert_uint_le(strlen(m), 1024 + 150);
	ck_assert_uint_ge(strlen(m), 1024);
	tcc_close(c);

	/* As a result for the model: the same text. */
	c = tcc_connect(&d);
	tcc_initialize(c, "\"toolErrors\":\"result\"");
	r = tcc_call(c, "test", "{}");
	ck_assert(tj_bool(r, "result.isError"));
	ck_assert_str_eq(tj_str(r, "result.content.0.text"), "Command '/bin/sh' exited with status 1:\n"
							     "FAIL: test_parse expected 3 got 4\n[stderr]\nwarning: deprecated");
	ck_assert_str_eq(tj_str(r, "result.structuredContent.error.stdout"), "FAIL: test_parse expected 3 got 4");
	tcc_close(c);
	tcd_finish(&d);
}
END_TEST

START_TEST(ok_exit_codes_are_checked)
{
	struct tcd d;
	tcd_prepare(&d, &(struct tcd_opts){ 0 });
	tcd_write_tool(&d, "bad.json", "{\"name\":\"bad\",\"kind\":\"command\",\"side_effects\":\"read\","
				       "\"argv\":[\"true\"],\"ok_exit_codes\":[0,300],\"input_schema\":{\"type\":\"object\"}}");
	const char *argv[] = { tc_daemon_path(), "--check-config", "--config", d.config, NULL };
	char *out = NULL, *err = NULL;
	ck_assert_int_eq(tc_run(argv, NULL, d.dir, &out, &err, 10000), 1);
	ck_assert_msg(strstr(err, "ok_exit_codes[1]: an integer from 0 to 255"), "%s", err);
	free(out);
	free(err);
	tcd_free(&d);
}
END_TEST

/* A value the tool refuses before running anything is refused as the
 * schema refuses: no attempt ran, none is spent. */
START_TEST(refused_value_runs_nothing)
{
	struct tcd d;
	start(&d);
	struct tcc *c = tcc_connect(&d);
	const struct json *r = tcc_initialize(c, "\"budget\":{\"toolCalls\":1}");
	ck_assert_int_eq(tj_int(r, "budgetLeft"), 1);
	r = tcc_call(c, "echoer", "{\"msg\":\"-n\"}");
	tc_assert_kind(r, "validation_error");
	ck_assert_int_eq(tj_int(r, "error.data.attempts"), 0);
	/* The one call the budget allows is still there. */
	r = tcc_call(c, "echoer", "{\"msg\":\"hi\"}");
	tc_assert_ok(r);
	ck_assert_str_eq(tj_str(r, "result.structuredContent.stdout"), "hi\n");
	tc_assert_kind(tcc_call(c, "echoer", "{\"msg\":\"again\"}"), "budget_exceeded");
	tcc_close(c);
	tcd_finish(&d);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("command_exit");
	TCase *tc = tcase_create("command_exit");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, ok_exit_codes_are_a_success);
	tcase_add_test(tc, failure_keeps_stdout);
	tcase_add_test(tc, failure_message_has_both_streams);
	tcase_add_test(tc, ok_exit_codes_are_checked);
	tcase_add_test(tc, refused_value_runs_nothing);
	suite_add_tcase(s, tc);
	return run_suite(s);
}
