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

static struct tcd d;
static struct tcc *c;
static char *log_path;

static void setup(void)
{
	tcd_prepare(&d, &(struct tcd_opts){0});
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
	tcd_spawn(&d, &(struct tcd_opts){0});
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

int main(void)
{
	Suite *s = suite_create("integ_tasks");
	TCase *tc = tcase_create("one daemon, memory store");
	tcase_set_timeout(tc, 60);
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, result_names_its_task);
	tcase_add_test(tc, cancel_running);
	suite_add_tcase(s, tc);
	return run_suite(s);
}
