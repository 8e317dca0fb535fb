/* SPDX-License-Identifier: MIT */
/*
 * MCP tasks on one daemon with the memory store (no Redis needed): the
 * creation answer, tasks/result naming its task in _meta (a result's, and
 * an error's data), tasks/cancel of a running call, and the errors MCP
 * asks for (an ended task cannot be cancelled; an unknown one is invalid
 * params).
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/integ/harness.h"
#include "tests/unit/check_main.h"

/* The shell runs without asking. */
#define EXEC_AUTO "{\"confirmation\":{\"default\":{\"execute\":\"auto\"}}}"

static struct tcd d;
static struct tcc *c;
static char *log_path;

static void setup(void)
{
	tcd_prepare(&d, &(struct tcd_opts){ .config = EXEC_AUTO });
	const char *dir = getenv("TC_INTEG_TOOLS");
	ck_assert_msg(dir && *dir, "TC_INTEG_TOOLS is not set");
	char *json = xasprintf(
		"{\"name\":\"probe\",\"kind\":\"command\",\"description\":\"Logs its start, sleeps\","
		"\"argv\":[\"%s/probe.sh\",\"{{log}}\",\"{{tag}}\",\"{{secs}}\",\"{{status}}\"],"
		"\"side_effects\":\"read\",\"sandbox\":{\"profile\":\"off\"},"
		"\"input_schema\":{\"type\":\"object\",\"properties\":{\"log\":{\"type\":\"string\"},"
		"\"tag\":{\"type\":\"string\"},\"secs\":{\"type\":\"number\"},\"status\":{\"type\":\"number\"}},"
		"\"required\":[\"log\",\"tag\",\"secs\",\"status\"],\"additionalProperties\":false}}", dir);
	tcd_write_tool(&d, "probe.json", json);
	free(json);
	tcd_spawn(&d, &(struct tcd_opts){ .config = EXEC_AUTO });
	ck_assert_int_eq(tcd_wait_socket(&d, d.sock, TCD_START_TIMEOUT_MS), 0);
	log_path = xasprintf("%s/probe.log", d.dir);
	c = tcc_connect(&d);
	tcc_initialize(c, NULL);
}

static void teardown(void)
{
	tcc_close(c);
	ck_assert_int_eq(tcd_stop(&d), 0);
	tcd_free(&d);
	free(log_path);
}

/* Makes a task of the probe: its id. */
static const char *make_task(const char *tag, const char *secs, const char *status)
{
	char *log = tj_quote(log_path);
	const struct json *made = tcc_request(c, "tools/call", tcc_fmt(c,
		"{\"name\":\"probe\",\"arguments\":{\"log\":%s,\"tag\":\"%s\",\"secs\":%s,\"status\":%s},"
		"\"task\":{}}", log, tag, secs, status));
	free(log);
	tc_assert_ok(made);
	ck_assert_str_eq(tj_str(made, "result.task.status"), "working");
	return tj_str(made, "result.task.taskId");
}

/* The taskId of a result's (or an error data's) related-task _meta. */
static const char *related_task(const struct json *r)
{
	const struct json *meta = tj(r, "result._meta");
	if (!meta)
		meta = tj(r, "error.data._meta");
	return json_str(json_get(json_get(meta, "io.modelcontextprotocol/related-task"), "taskId"));
}

START_TEST(result_names_its_task)
{
	const char *id = make_task("R", "0", "0");
	const char *q = tcc_fmt(c, "{\"taskId\":\"%s\"}", id);
	const struct json *res = tcc_request_t(c, "tasks/result", q, 10000);
	tc_assert_ok(res);
	ck_assert_str_eq(related_task(res), id);
	ck_assert(strstr(tj_str(res, "result.content.0.text"), "ran R") != NULL);
	ck_assert(tj_str(res, "result._meta.toolcalld/callId") != NULL);
	/* tasks/get does not carry it: the taskId is in the result. */
	const struct json *got = tcc_request(c, "tasks/get", q);
	ck_assert_str_eq(tj_str(got, "result.status"), "completed");
	ck_assert(!tj_has(got, "result._meta"));
	/* Ended: cannot be cancelled. */
	ck_assert_int_eq(tj_int(tcc_request(c, "tasks/cancel", q), "error.code"), -32602);
	ck_assert_int_eq(tj_int(tcc_request(c, "tasks/cancel", "{\"taskId\":\"nope\"}"), "error.code"), -32602);
}
END_TEST

START_TEST(cancel_running)
{
	const char *id = make_task("C", "30", "0");
	const char *q = tcc_fmt(c, "{\"taskId\":\"%s\"}", id);
	const struct json *cancelled = tcc_request(c, "tasks/cancel", q);
	tc_assert_ok(cancelled);
	ck_assert_str_eq(tj_str(cancelled, "result.status"), "cancelled");
	const struct json *res = tcc_request_t(c, "tasks/result", q, 10000);
	tc_assert_kind(res, "cancelled");
	ck_assert_str_eq(related_task(res), id);
	ck_assert_str_eq(tj_str(tcc_request(c, "tasks/get", q), "result.status"), "cancelled");
}
END_TEST

/* Makes a task of a shell command on cl with progress token "tp-1". */
static const char *make_shell_task(struct tcc *cl, const char *command)
{
	char *q = tj_quote(command);
	const struct json *made = tcc_request(cl, "tools/call", tcc_fmt(cl,
		"{\"name\":\"shell\",\"arguments\":{\"command\":%s},\"task\":{},"
		"\"_meta\":{\"progressToken\":\"tp-1\"}}", q));
	free(q);
	tc_assert_ok(made);
	ck_assert_str_eq(tj_str(made, "result.task.status"), "working");
	return tj_str(made, "result.task.taskId");
}

/* MCP: the progressToken of a task-augmented request holds for the task's
 * life. Output streams to the creating connection as notifications/progress
 * with that token, naming the task, before the terminal status; nothing
 * follows the end, and another connection of the same user hears none. */
START_TEST(progress_follows_the_task)
{
	struct tcc *other = tcc_connect(&d);
	tcc_initialize(other, NULL);
	const char *id = make_shell_task(c, "for i in 1 2 3; do echo line$i; sleep 0.2; done");
	struct buf seen = {0};
	int64_t last = -1;
	unsigned notes = 0;
	const struct json *status = NULL;
	while (!status) {
		struct json_doc *doc = tcc_recv(c, 10000);
		ck_assert_msg(doc != NULL, "the task neither progressed nor ended");
		const struct json *m = json_doc_root(doc);
		const char *method = tj_str(m, "method");
		ck_assert_msg(method != NULL, "an answer nobody asked for");
		if (str_eq(method, "notifications/tasks/status")) {
			status = m;
			break;
		}
		ck_assert_str_eq(method, "notifications/progress");
		ck_assert_str_eq(tj_str(m, "params.progressToken"), "tp-1");
		ck_assert_int_gt(tj_int(m, "params.progress"), last);
		last = tj_int(m, "params.progress");
		ck_assert_str_eq(tj_str(m, "params._meta.toolcalld/stream"), "stdout");
		const struct json *rel = json_get(tj(m, "params._meta"), "io.modelcontextprotocol/related-task");
		ck_assert_str_eq(json_str(json_get(rel, "taskId")), id);
		buf_puts(&seen, tj_str(m, "params.message"));
		notes++;
	}
	ck_assert_str_eq(tj_str(status, "params.taskId"), id);
	ck_assert_str_eq(tj_str(status, "params.status"), "completed");
	ck_assert_uint_ge(notes, 2);
	buf_putc(&seen, '\0');
	ck_assert_str_eq(buf_head(&seen), "line1\nline2\nline3\n");
	buf_free(&seen);
	/* Nothing after the end; nothing at all to the other connection. */
	ck_assert(tcc_quiet(c, 300));
	ck_assert(tcc_quiet(other, 100));
	const struct json *res = tcc_request_t(c, "tasks/result", tcc_fmt(c, "{\"taskId\":\"%s\"}", id), 10000);
	tc_assert_ok(res);
	ck_assert_str_eq(tj_str(res, "result.structuredContent.stdout"), "line1\nline2\nline3\n");
	tcc_close(other);
}
END_TEST

/* The creator goes mid-task: the task runs on to its end unheard (nothing
 * is written to a closed connection, the daemon lives on and, under ASan,
 * exits without a leak), and its result waits for the user elsewhere. */
START_TEST(progress_creator_gone)
{
	const char *id = xstrdup(make_shell_task(c, "for i in 1 2 3 4 5 6; do echo l$i; sleep 0.2; done"));
	ck_assert(tcc_wait_notification(c, "notifications/progress", 10000) != NULL);
	tcc_close(c);
	c = tcc_connect(&d);
	tcc_initialize(c, NULL);
	const struct json *res = tcc_request_t(c, "tasks/result", tcc_fmt(c, "{\"taskId\":\"%s\"}", id), 10000);
	tc_assert_ok(res);
	ck_assert_str_eq(tj_str(res, "result.structuredContent.stdout"), "l1\nl2\nl3\nl4\nl5\nl6\n");
	/* The new connection did not make the task: it hears none of it. */
	ck_assert_uint_eq(tcc_count_notifications(c, NULL), 0);
	ck_assert(tcc_quiet(c, 100));
	free((char *)id);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("integ_tasks");
	TCase *tc = tcase_create("one daemon, memory store");
	tcase_set_timeout(tc, 60);
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, result_names_its_task);
	tcase_add_test(tc, cancel_running);
	tcase_add_test(tc, progress_follows_the_task);
	tcase_add_test(tc, progress_creator_gone);
	suite_add_tcase(s, tc);
	return run_suite(s);
}
