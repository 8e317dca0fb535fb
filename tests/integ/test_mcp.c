/* SPDX-License-Identifier: MIT */
/*
 * The "mcp" tool kind through the socket: a stdio MCP server declared in a
 * tool file starts when its tools are first wanted, its tools are listed
 * under the prefix, calls are multiplexed, and a crash fails the pending
 * call as transient while the next call starts the server again.
 */
#include <check.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "tests/integ/harness.h"
#include "tests/unit/check_main.h"

/* Starts the daemon with the test server as provider "demo"; arg, when
 * not NULL, is passed to the server. */
static void start_with(struct tcd *d, const char *arg)
{
	tcd_prepare(d, &(struct tcd_opts){ .config = "{\"retry\":{\"max_attempts\":1}}" });
	const char *server = getenv("TC_MCP_SERVER");
	ck_assert_ptr_nonnull(server);
	char *decl = xasprintf("{ \"name\": \"demo\", \"kind\": \"mcp\", \"command\": [\"%s\"%s%s%s],"
			       "  \"prefix\": \"demo_\", \"side_effects\": \"read\","
			       /* A sanitizer build of the server maps terabytes of
			        * shadow memory: no address-space limit for it. */
			       "  \"sandbox\": {\"limits\": {\"memory_mb\": null}} }", server,
			       arg ? ", \"" : "", arg ? arg : "", arg ? "\"" : "");
	tcd_write_tool(d, "demo.json", decl);
	free(decl);
	tcd_spawn(d, &(struct tcd_opts){ .config = "{\"retry\":{\"max_attempts\":1}}" });
	ck_assert_int_eq(tcd_wait_socket(d, d->sock, 5000), 0);
}

static void start(struct tcd *d)
{
	start_with(d, NULL);
}

/* The pid of the demo server, as it answers demo_pid (to be freed). */
static char *server_pid(struct tcc *c)
{
	const struct json *r = tcc_call(c, "demo_pid", "{}");
	tc_assert_ok(r);
	return xstrdup(tj_str(r, "result.content.0.text"));
}

/* The next call is served by a new demo server: the one whose pid was
 * old is gone. Frees old. */
static void assert_server_replaced(struct tcc *c, char *old)
{
	char *now = server_pid(c);
	ck_assert_str_ne(now, old);
	ck_assert_int_ne(kill(atoi(old), 0), 0);
	free(now);
	free(old);
}

static bool listed(const struct json *r, const char *name)
{
	const struct json *tools = tj(r, "result.tools");
	for (size_t i = 0; tools && i < tools->u.arr.n; i++)
		if (str_eq(json_str(json_get(tools->u.arr.items[i], "name")), name))
			return true;
	return false;
}

START_TEST(tools_are_imported_under_the_prefix)
{
	struct tcd d;
	start(&d);
	struct tcc *c = tcc_connect(&d);
	const struct json *r = tcc_request(c, "tools/list", "{}");
	ck_assert(listed(r, "demo_echo"));
	ck_assert(listed(r, "demo_add"));
	ck_assert(listed(r, "read_file"));
	/* A tool whose schema is outside the subset is not offered. */
	ck_assert(!listed(r, "demo_bad_schema"));

	r = tcc_call(c, "demo_echo", "{\"text\":\"hi there\"}");
	tc_assert_ok(r);
	ck_assert_str_eq(tj_str(r, "result.content.0.text"), "hi there");
	r = tcc_call(c, "demo_add", "{\"a\":2,\"b\":40}");
	tc_assert_ok(r);
	ck_assert_int_eq(tj_int(r, "result.structuredContent.sum"), 42);
	/* Arguments are validated against the imported schema. */
	r = tcc_call(c, "demo_echo", "{\"text\":5}");
	tc_assert_kind(r, "validation_error");
	/* A tool error inside the server is isError, not an envelope. */
	r = tcc_call(c, "demo_fail", "{}");
	tc_assert_ok(r);
	ck_assert(tj_bool(r, "result.isError"));

	tcc_close(c);
	tcd_finish(&d);
}
END_TEST

START_TEST(first_call_starts_the_server)
{
	struct tcd d;
	start(&d);
	struct tcc *c = tcc_connect(&d);
	const struct json *r = tcc_call(c, "demo_echo", "{\"text\":\"lazy\"}");
	tc_assert_ok(r);
	ck_assert_str_eq(tj_str(r, "result.content.0.text"), "lazy");
	tcc_close(c);
	tcd_finish(&d);
}
END_TEST

/* A call made as a task for a server not started yet waits for its tools,
 * then runs as a task; the request's state while it waited is freed (a
 * sanitizer build's daemon exits non-zero on a leak). */
START_TEST(first_task_call_starts_the_server)
{
	struct tcd d;
	start(&d);
	struct tcc *c = tcc_connect(&d);
	const struct json *made = tcc_request(c, "tools/call",
		"{\"name\":\"demo_echo\",\"arguments\":{\"text\":\"lazy\"},\"task\":{}}");
	tc_assert_ok(made);
	const char *id = tj_str(made, "result.task.taskId");
	ck_assert_ptr_nonnull(id);
	const struct json *res = tcc_request_t(c, "tasks/result", tcc_fmt(c, "{\"taskId\":\"%s\"}", id), 10000);
	tc_assert_ok(res);
	ck_assert_str_eq(tj_str(res, "result.content.0.text"), "lazy");
	tcc_close(c);
	tcd_finish(&d);
}
END_TEST

START_TEST(calls_are_multiplexed)
{
	struct tcd d;
	start(&d);
	struct tcc *c = tcc_connect(&d);
	tc_assert_ok(tcc_call(c, "demo_echo", "{\"text\":\"warm\"}"));
	/* The server answers in order, so 4 calls of 300 ms on one server
	 * take about 1.2 s in all; what matters is that all are answered
	 * and matched to their ids. */
	int64_t ids[4];
	for (int i = 0; i < 4; i++)
		ids[i] = tcc_send_request(c, "tools/call", "{\"name\":\"demo_slow\",\"arguments\":{\"ms\":300}}");
	for (int i = 0; i < 4; i++) {
		char idt[32];
		snprintf(idt, sizeof(idt), "%lld", (long long)ids[i]);
		const struct json *r = tcc_wait_id(c, idt, 10000);
		ck_assert_ptr_nonnull(r);
		tc_assert_ok(r);
		ck_assert_str_eq(tj_str(r, "result.content.0.text"), "slept");
	}
	tcc_close(c);
	tcd_finish(&d);
}
END_TEST

START_TEST(crash_fails_pending_and_respawns)
{
	struct tcd d;
	start(&d);
	struct tcc *c = tcc_connect(&d);
	char *pid1 = server_pid(c);
	const struct json *r;
	r = tcc_call(c, "demo_crash", "{}");
	tc_assert_kind(r, "transient");
	ck_assert(tj_bool(r, "error.data.retryable"));
	assert_server_replaced(c, pid1);
	tcc_close(c);
	tcd_finish(&d);
}
END_TEST

/* What a server sends is taken with care: bytes that are not UTF-8 become
 * U+FFFD; an answer over 8 MiB fails its call once (no retry: it may have
 * done its work) and the server stays; tools it names badly are not
 * offered, and the log says why. */
START_TEST(server_output_is_checked)
{
	struct tcd d;
	start(&d);
	struct tcc *c = tcc_connect(&d);
	const struct json *r = tcc_call(c, "demo_badutf", "{}");
	tc_assert_ok(r);
	ck_assert_str_eq(tj_str(r, "result.content.0.text"), "bad\xef\xbf\xbd\xef\xbf\xbd!");

	char *pid1 = server_pid(c);
	r = tcc_call(c, "demo_huge", "{\"n\":9437184}");
	tc_assert_kind(r, "execution_error");
	ck_assert_int_eq(tj_int(r, "error.data.attempts"), 1);
	ck_assert_msg(strstr(tj_str(r, "error.message"), "longer than 8 MiB"), "%s", tj_str(r, "error.message"));
	r = tcc_call(c, "demo_pid", "{}");
	tc_assert_ok(r);
	ck_assert_str_eq(tj_str(r, "result.content.0.text"), pid1);
	free(pid1);
	/* Under the limit, a long answer comes through whole. */
	r = tcc_call(c, "demo_huge", "{\"n\":1048576}");
	tc_assert_ok(r);
	ck_assert_uint_eq(strlen(tj_str(r, "result.content.0.text")), 1048576);

	r = tcc_request(c, "tools/list", "{}");
	ck_assert(!listed(r, "demo_bad name"));
	ck_assert(listed(r, "demo_add"));
	char *log = tcd_log(&d);
	ck_assert_msg(strstr(log, "MCP server 'demo': tools not offered") && strstr(log, "bad name") &&
		      strstr(log, "'echo': listed twice") && strstr(log, "'demo_bad_schema'"),
		      "log: %s", log);
	free(log);
	tcc_close(c);
	tcd_finish(&d);
}
END_TEST

/* A server that closes its output but stays cannot answer: it is stopped
 * at once, its call fails as transient, the next call starts it again. */
START_TEST(closed_output_is_a_crash)
{
	struct tcd d;
	start(&d);
	struct tcc *c = tcc_connect(&d);
	char *pid1 = server_pid(c);
	const struct json *r;
	uint64_t t0 = tc_now_ms();
	r = tcc_call(c, "demo_closeout", "{}");
	tc_assert_kind(r, "transient");
	ck_assert_uint_lt(tc_now_ms() - t0, 4000);
	assert_server_replaced(c, pid1);
	tcc_close(c);
	tcd_finish(&d);
}
END_TEST

/* A call that waits for its server to start counts that wait. */
START_TEST(waiting_for_the_server_counts)
{
	struct tcd d;
	start_with(&d, "slowinit");
	struct tcc *c = tcc_connect(&d);
	const struct json *r = tcc_call(c, "demo_echo", "{\"text\":\"late\"}");
	tc_assert_ok(r);
	ck_assert_int_ge(tj_int(r, "result._meta.toolcalld/durationMs"), 900);
	tcc_close(c);
	tcd_finish(&d);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("mcp");
	TCase *tc = tcase_create("provider");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, tools_are_imported_under_the_prefix);
	tcase_add_test(tc, first_call_starts_the_server);
	tcase_add_test(tc, first_task_call_starts_the_server);
	tcase_add_test(tc, calls_are_multiplexed);
	tcase_add_test(tc, crash_fails_pending_and_respawns);
	tcase_add_test(tc, server_output_is_checked);
	tcase_add_test(tc, closed_output_is_a_crash);
	tcase_add_test(tc, waiting_for_the_server_counts);
	suite_add_tcase(s, tc);
	return run_suite(s);
}
