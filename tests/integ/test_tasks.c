/* SPDX-License-Identifier: MIT */
/*
 * MCP tasks on one daemon with the memory store (no Redis needed): the
 * creation answer, tasks/result naming its task in _meta (a result's, and
 * an error's data), tasks/cancel of a running call, the errors MCP asks
 * for (an ended task cannot be cancelled; an unknown one is invalid
 * params), and a task call's output as notifications/progress to its
 * creator alone, until the end or until the creator goes.
 *
 * Then two daemons on a Redis the test starts and kills ("local" and
 * "fail"): each cancels its own tasks while Redis is away, another
 * daemon's task answers transient, and the cancelled state reaches the
 * other daemon once a fresh Redis is there.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/integ/harness.h"
#include "tests/unit/check_main.h"
#include "tests/unit/redis_server.h"

/* The shell runs without asking. */
#define EXEC_AUTO "{\"confirmation\":{\"default\":{\"execute\":\"auto\"}}}"

static struct tcd d;
static struct tcc *c;
static char *log_path;

/* Declares the probe tool in dd's tools directory. */
static void write_probe(struct tcd *dd)
{
	const char *dir = getenv("TC_INTEG_TOOLS");
	ck_assert_msg(dir && *dir, "TC_INTEG_TOOLS is not set");
	char *json = xasprintf(
		"{\"name\":\"probe\",\"kind\":\"command\",\"description\":\"Logs its start, sleeps\","
		"\"argv\":[\"%s/probe.sh\",\"{{log}}\",\"{{tag}}\",\"{{secs}}\",\"{{status}}\"],"
		"\"side_effects\":\"read\",\"sandbox\":{\"profile\":\"off\"},"
		"\"input_schema\":{\"type\":\"object\",\"properties\":{\"log\":{\"type\":\"string\"},"
		"\"tag\":{\"type\":\"string\"},\"secs\":{\"type\":\"number\"},\"status\":{\"type\":\"number\"}},"
		"\"required\":[\"log\",\"tag\",\"secs\",\"status\"],\"additionalProperties\":false}}", dir);
	tcd_write_tool(dd, "probe.json", json);
	free(json);
}

static void setup(void)
{
	tcd_prepare(&d, &(struct tcd_opts){ .config = EXEC_AUTO });
	write_probe(&d);
	tcd_spawn(&d, &(struct tcd_opts){ .config = EXEC_AUTO });
	ck_assert_int_eq(tcd_wait_socket(&d, d.sock, TCD_START_TIMEOUT_MS), 0);
	log_path = xasprintf("%s/probe.log", d.dir);
	c = tcc_connect(&d);
	tcc_initialize(c, NULL);
}

static void teardown(void)
{
	tcc_close(c);
	tcd_finish(&d);
	free(log_path);
}

/* Makes a task of the probe on cl: its id. */
static const char *make_task_on(struct tcc *cl, const char *tag, const char *secs, const char *status)
{
	char *log = tj_quote(log_path);
	const struct json *made = tcc_request(cl, "tools/call", tcc_fmt(cl,
		"{\"name\":\"probe\",\"arguments\":{\"log\":%s,\"tag\":\"%s\",\"secs\":%s,\"status\":%s},"
		"\"task\":{}}", log, tag, secs, status));
	free(log);
	tc_assert_ok(made);
	ck_assert_str_eq(tj_str(made, "result.task.status"), "working");
	return tj_str(made, "result.task.taskId");
}

static const char *make_task(const char *tag, const char *secs, const char *status)
{
	return make_task_on(c, tag, secs, status);
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
	/* Each with a kind, as every error of a request is. */
	static const char *const bad[][2] = {
		{ "tasks/cancel", NULL }, { "tasks/get", "{\"taskId\":\"nope\"}" }, { "tasks/result", "{\"taskId\":5}" },
		{ "tasks/list", "{\"cursor\":5}" }, { "tasks/list", "{\"cursor\":\"zz\"}" },
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
		const struct json *e = tcc_request(c, bad[i][0], bad[i][1] ? bad[i][1] : q);
		ck_assert_int_eq(tj_int(e, "error.code"), -32602);
		ck_assert_msg(str_eq(tj_str(e, "error.data.kind"), "validation_error"), "%s", tj_text(e));
	}
	/* A tools/call whose task is malformed is a failed call: its error
	 * has the call envelope's members. */
	static const char *const bad_task[] = { "5", "{\"ttl\":-1}", "{\"ttl\":99999999999999999999}" };
	for (size_t i = 0; i < sizeof(bad_task) / sizeof(*bad_task); i++) {
		const struct json *e = tcc_request(c, "tools/call", tcc_fmt(c, "{\"name\":\"stat\",\"arguments\":"
							 "{\"path\":\".\"},\"task\":%s}", bad_task[i]));
		tc_assert_kind(e, "validation_error");
		ck_assert_msg(str_eq(tj_str(e, "error.data.tool"), "stat") && tj_has(e, "error.data.attempts") &&
			      tj_has(e, "error.data.retryable"), "%s", tj_text(e));
	}
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

/* --- a shared store that goes away -------------------------------------- */

static struct redis_server rs;

/* A failed case exits its process: the Redis it started goes with it. */
static void redis_gone(void)
{
	redis_server_free(&rs);
}

/* Starts dd on rs, with on_unavailable "fail" or "local". */
static void start_on_redis(struct tcd *dd, bool fail)
{
	char *config = xasprintf("{\"store\":{\"kind\":\"redis\",\"address\":\"unix:%s\",\"prefix\":\"tt:\","
				 "\"timeout_ms\":300,\"on_unavailable\":\"%s\"}}", rs.sock, fail ? "fail" : "local");
	struct tcd_opts o = { .config = config };
	tcd_prepare(dd, &o);
	write_probe(dd);
	tcd_spawn(dd, &o);
	ck_assert_int_eq(tcd_wait_socket(dd, dd->sock, TCD_START_TIMEOUT_MS), 0);
	free(config);
}

/* Waits until admin/stats says the store is connected (or not). */
static void wait_store(struct tcc *cl, bool connected)
{
	ck_assert_msg(tc_wait_until(tj_bool(tcc_request(cl, "admin/stats", NULL), "result.store.connected") == connected,
				    15000),
		      "the store did not become %s", connected ? "connected" : "unreachable");
}

/* Waits until tasks/get of id on cl says status. */
static void wait_status(struct tcc *cl, const char *id, const char *status)
{
	const char *q = tcc_fmt(cl, "{\"taskId\":\"%s\"}", id);
	const char *now = NULL;
	ck_assert_msg(tc_wait_until((now = tj_str(tcc_request(cl, "tasks/get", q), "result.status")) &&
				    str_eq(now, status), 15000),
		      "task %s is %s, not %s", id, now ? now : "unknown", status);
}

static const struct json *ask(struct tcc *cl, const char *method, const char *id)
{
	return tcc_request(cl, method, tcc_fmt(cl, "{\"taskId\":\"%s\"}", id));
}

/* Redis killed while tasks run on two daemons, one "local", one "fail":
 * each daemon cancels its own task at once (the call stops there); the
 * other daemon's task cannot be reached, so cancelling, getting or listing
 * it answers transient and it runs on. A fresh, empty Redis then hears
 * every task again from the daemon holding it, cancelled ones cancelled. */
START_TEST(cancel_while_redis_away)
{
	const char *why;
	if (!redis_server_available(&why))
		TC_SKIP("%s", why);
	atexit(redis_gone);
	redis_server_start(&rs);
	log_path = xasprintf("%s/probe.log", rs.dir);
	struct tcd dl, df;
	start_on_redis(&dl, false);
	start_on_redis(&df, true);
	struct tcc *cl = tcc_connect(&dl), *cf = tcc_connect(&df);
	tcc_initialize(cl, NULL);
	tcc_initialize(cf, NULL);
	wait_store(cl, true);
	wait_store(cf, true);
	const char *a = make_task_on(cl, "A", "30", "0");
	const char *b = make_task_on(cf, "B", "30", "0");
	const char *cc = make_task_on(cf, "C", "30", "0");
	wait_status(cf, a, "working");
	wait_status(cl, cc, "working");

	redis_server_kill(&rs);
	wait_store(cl, false);
	wait_store(cf, false);
	const struct json *r = ask(cl, "tasks/cancel", a);
	tc_assert_ok(r);
	ck_assert_str_eq(tj_str(r, "result.status"), "cancelled");
	r = ask(cf, "tasks/cancel", b);
	tc_assert_ok(r);
	ck_assert_str_eq(tj_str(r, "result.status"), "cancelled");
	tc_assert_kind(ask(cl, "tasks/result", a), "cancelled");
	tc_assert_kind(ask(cl, "tasks/cancel", cc), "transient");
	tc_assert_kind(ask(cl, "tasks/get", cc), "transient");
	tc_assert_kind(ask(cf, "tasks/get", a), "transient");
	tc_assert_kind(tcc_request(cl, "tasks/list", NULL), "transient");
	ck_assert_str_eq(tj_str(ask(cf, "tasks/get", cc), "result.status"), "working");

	redis_server_start(&rs);
	wait_store(cl, true);
	wait_store(cf, true);
	wait_status(cf, a, "cancelled");
	wait_status(cl, b, "cancelled");
	wait_status(cl, cc, "working");
	tc_assert_kind(ask(cf, "tasks/result", a), "cancelled");
	r = tcc_request(cl, "tasks/list", NULL);
	tc_assert_ok(r);
	ck_assert_uint_eq(tj(r, "result.tasks")->u.arr.n, 3);
	/* Reachable again: the other daemon's task is cancelled where it runs. */
	r = ask(cl, "tasks/cancel", cc);
	tc_assert_ok(r);
	ck_assert_str_eq(tj_str(r, "result.status"), "cancelled");
	tc_assert_kind(tcc_request_t(cf, "tasks/result", tcc_fmt(cf, "{\"taskId\":\"%s\"}", cc), 10000),
		       "cancelled");
	tcc_close(cl);
	tcc_close(cf);
	ck_assert_int_eq(tcd_stop(&dl), 0);
	ck_assert_int_eq(tcd_stop(&df), 0);
	tcd_free(&dl);
	tcd_free(&df);
	free(log_path);
	log_path = NULL;
	redis_server_free(&rs);
}
END_TEST

/* More tasks than the uid may keep: the call fails overloaded, answered
 * as every failed call is (its tool named; an isError result when the
 * client takes errors as results). */
START_TEST(too_many_tasks_is_a_failed_call)
{
	struct tcd dd;
	tcd_start(&dd, "{\"tasks\":{\"max_per_uid\":1}}");
	struct tcc *cl = tcc_connect(&dd);
	tc_assert_ok(tcc_request(cl, "tools/call", "{\"name\":\"stat\",\"arguments\":{\"path\":\".\"},\"task\":{}}"));
	const struct json *r = tcc_request(cl, "tools/call", "{\"name\":\"stat\",\"arguments\":{\"path\":\".\"},\"task\":{}}");
	tc_assert_kind(r, "overloaded");
	ck_assert_int_eq(tj_int(r, "error.code"), -32603);
	ck_assert_msg(str_eq(tj_str(r, "error.data.tool"), "stat") && tj_bool(r, "error.data.retryable") &&
		      tj_has(r, "error.data.attempts") && tj_has(r, "error.data.durationMs"), "%s", tj_text(r));
	/* A call id of its own, as every failed call has. */
	ck_assert_msg(tj_str(r, "error.data.callId") && strncmp(tj_str(r, "error.data.callId"), "c-", 2) == 0, "%s",
		      tj_text(r));
	tcc_close(cl);
	cl = tcc_connect(&dd);
	tcc_initialize(cl, "\"toolErrors\":\"result\"");
	r = tcc_request(cl, "tools/call", "{\"name\":\"stat\",\"arguments\":{\"path\":\".\"},\"task\":{}}");
	ck_assert_msg(tj_bool(r, "result.isError"), "%s", tj_text(r));
	ck_assert_str_eq(tj_str(r, "result.structuredContent.error.kind"), "overloaded");
	tcc_close(cl);
	tcd_finish(&dd);
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
	tc = tcase_create("bounds");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, too_many_tasks_is_a_failed_call);
	suite_add_tcase(s, tc);
	tc = tcase_create("two daemons, redis away");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, cancel_while_redis_away);
	suite_add_tcase(s, tc);
	return run_suite(s);
}
