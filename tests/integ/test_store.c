/* SPDX-License-Identifier: MIT */
/*
 * Many daemons, one Redis: two real daemons share a redis-server that the
 * test starts on a Unix socket. A keyed call running on one is joined from
 * the other and runs once; it is replayed there, and a key reused with
 * other arguments is a conflict there too; tasks made on one are fetched on
 * the other (known there as soon as the creator answers), cancelled from
 * the other, and bounded per uid across both; a daemon SIGKILLed mid-call
 * leaves idempotent calls to run again and non-idempotent ones "unknown";
 * Redis stopped (SIGSTOP) or killed and restarted is survived and used
 * again; a reload tells which store settings wait for a restart. A
 * replayed result keeps its image content.
 *
 * Fault drills: across Redis stalled (SIGSTOP) or killed and restarted
 * empty, no key runs twice, and none is answered "unknown" for a claim of
 * the daemon's own; a task made during an outage leaves on its TTL.
 *
 * Calls go to command tools running tests/integ/tools/probe.sh, which logs
 * each start to a file both daemons write to.
 */
#include <check.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/integ/harness.h"
#include "tests/unit/check_main.h"
#include "tests/unit/redis_server.h"

static struct redis_server rs;
static char *probe_log;

/* Declares the probe tools: "probe" (not idempotent), "probe_idem". */
static void write_probes(struct tcd *d)
{
	const char *dir = getenv("TC_INTEG_TOOLS");
	ck_assert_msg(dir && *dir, "TC_INTEG_TOOLS is not set");
	for (int idem = 0; idem < 2; idem++) {
		char *json = xasprintf(
			"{\"name\":\"%s\",\"kind\":\"command\",\"description\":\"Logs its start, sleeps\","
			"\"argv\":[\"%s/probe.sh\",\"{{log}}\",\"{{tag}}\",\"{{secs}}\",\"0\"],"
			"\"side_effects\":\"read\",\"idempotent\":%s,\"timeout_ms\":30000,"
			/* It logs to the test's directory, beside the workspace. */
			"\"sandbox\":{\"profile\":\"off\"},"
			"\"input_schema\":{\"type\":\"object\",\"properties\":{\"log\":{\"type\":\"string\"},"
			"\"tag\":{\"type\":\"string\"},\"secs\":{\"type\":\"number\"}},"
			"\"required\":[\"log\",\"tag\",\"secs\"],\"additionalProperties\":false}}",
			idem ? "probe_idem" : "probe", dir, idem ? "true" : "false");
		tcd_write_tool(d, idem ? "probe_idem.json" : "probe.json", json);
		free(json);
	}
}

/* Starts a daemon on the shared Redis; extra: more store members. */
static void start(struct tcd *d, const char *extra)
{
	/* A store answer later than timeout_ms is an outage: scaled, as the
	 * harness's waits are, under valgrind, where the daemon is that slow. */
	char *config = xasprintf("{\"store\":{\"kind\":\"redis\",\"address\":\"unix:%s\",\"prefix\":\"it:\","
				 "\"lease_ms\":%llu,\"timeout_ms\":%llu%s%s}}",
				 rs.sock, (unsigned long long)tc_wait_scaled(1000),
				 (unsigned long long)tc_wait_scaled(300), extra ? "," : "", extra ? extra : "");
	struct tcd_opts o = { .config = config };
	tcd_prepare(d, &o);
	write_probes(d);
	tcd_spawn(d, &o);
	if (tcd_wait_socket(d, d->sock, TCD_START_TIMEOUT_MS) < 0) {
		char *log = tcd_log(d);
		ck_abort_msg("the daemon did not start; its log:\n%s", log);
	}
	free(config);
}

/* Sends a probe call with key (NULL: none); returns its id. */
static const char *send_probe(struct tcc *c, const char *tool, const char *tag, const char *secs,
			      const char *key)
{
	char *log = tj_quote(probe_log);
	const char *params = tcc_fmt(c, "{\"name\":\"%s\",\"arguments\":{\"log\":%s,\"tag\":\"%s\",\"secs\":%s}%s%s%s}",
				     tool, log, tag, secs, key ? ",\"_meta\":{\"idempotencyKey\":\"" : "",
				     key ? key : "", key ? "\"}" : "");
	free(log);
	return tcc_fmt(c, "%lld", (long long)tcc_send_request(c, "tools/call", params));
}

static const struct json *wait_for(struct tcc *c, const char *id, int ms)
{
	const struct json *r = tcc_wait_id(c, id, ms);
	ck_assert_msg(r != NULL, "no answer to %s within %d ms", id, ms);
	return r;
}

/* Lines "what tag ..." in the shared log. */
static unsigned logged(const char *what, const char *tag)
{
	FILE *f = fopen(probe_log, "r");
	unsigned n = 0;
	char line[256], want[80];
	snprintf(want, sizeof(want), "%s %s ", what, tag);
	while (f && fgets(line, sizeof(line), f))
		if (str_has_prefix(line, want))
			n++;
	if (f)
		fclose(f);
	return n;
}

static unsigned starts(const char *tag) { return logged("start", tag); }

static void wait_starts(const char *tag, unsigned n)
{
	uint64_t end = mono_ms() + 10000;
	while (starts(tag) < n) {
		ck_assert_msg(mono_ms() < end, "probe %s did not start", tag);
		usleep(10000);
	}
}

/* Makes a task of the probe on c: the tools/call answer. */
static const struct json *make_task(struct tcc *c, const char *tag, const char *secs)
{
	char *log = tj_quote(probe_log);
	const struct json *made = tcc_request(c, "tools/call", tcc_fmt(c,
		"{\"name\":\"probe\",\"arguments\":{\"log\":%s,\"tag\":\"%s\",\"secs\":%s},\"task\":{\"ttl\":60000}}",
		log, tag, secs));
	free(log);
	return made;
}

/* The taskId of a result's (or an error data's) related-task _meta. */
static const char *related_task(const struct json *r)
{
	const struct json *meta = tj(r, "result._meta");
	if (!meta)
		meta = tj(r, "error.data._meta");
	return json_str(json_get(json_get(meta, "io.modelcontextprotocol/related-task"), "taskId"));
}

/* Waits until admin/stats says the store is connected (or not). */
static void wait_connected(struct tcc *c, bool want)
{
	uint64_t end = mono_ms() + 15000;
	for (;;) {
		const struct json *r = tcc_request(c, "admin/stats", NULL);
		if (tj_bool(r, "result.store.connected") == want)
			return;
		ck_assert_msg(mono_ms() < end, "the store did not become %s", want ? "connected" : "disconnected");
		usleep(50000);
	}
}

/* The two daemons of a case and a client on each (the cases run one
 * after another in this process). */
static struct tcd d1, d2;
static struct tcc *c1, *c2;

/* Starts both daemons on the shared Redis and connects to each. */
static void start_two(void)
{
	start(&d1, NULL);
	start(&d2, NULL);
	c1 = tcc_connect(&d1);
	c2 = tcc_connect(&d2);
}

/* Kills the first daemon mid-call and waits until it is gone. */
static void kill_first(void)
{
	tcd_kill(&d1, SIGKILL);
	tcd_wait_exit(&d1, 5000);
}

/* Closes the clients; the daemons stop cleanly (the first only when it
 * was not killed). */
static void stop_two(bool first_killed)
{
	tcc_close(c1);
	tcc_close(c2);
	if (!first_killed)
		ck_assert_int_eq(tcd_stop(&d1), 0);
	ck_assert_int_eq(tcd_stop(&d2), 0);
	tcd_free(&d1);
	tcd_free(&d2);
}

static void setup(void)
{
	if (rs.pid <= 0)
		redis_server_start(&rs);
	redis_server_flush(&rs);
	free(probe_log);
	probe_log = xasprintf("%s/probe.log", rs.dir);
	unlink(probe_log);
}

START_TEST(join_replay_conflict)
{
	start_two();
	const char *id1 = send_probe(c1, "probe", "J", "1", "k-join");
	wait_starts("J", 1);
	const char *id2 = send_probe(c2, "probe", "J", "1", "k-join");
	const struct json *r1 = wait_for(c1, id1, 10000), *r2 = wait_for(c2, id2, 10000);
	tc_assert_ok(r1);
	tc_assert_ok(r2);
	ck_assert_str_eq(tj_str(r2, "result._meta.toolcalld/callId"), tj_str(r1, "result._meta.toolcalld/callId"));
	ck_assert_uint_eq(starts("J"), 1);
	/* Replayed on the other daemon. */
	const struct json *r3 = wait_for(c2, send_probe(c2, "probe", "J", "1", "k-join"), 5000);
	tc_assert_ok(r3);
	ck_assert(tj_bool(r3, "result._meta.toolcalld/replayed"));
	ck_assert_uint_eq(starts("J"), 1);
	/* The same key with other arguments. */
	tc_assert_kind(wait_for(c2, send_probe(c2, "probe", "OTHER", "0", "k-join"), 5000), "idempotency_conflict");
	const struct json *st = tcc_request(c2, "admin/stats", NULL);
	ck_assert_str_eq(tj_str(st, "result.store.kind"), "redis");
	ck_assert(tj_bool(st, "result.store.connected"));
	stop_two(false);
}
END_TEST

/* A keyed read_file of a PNG, replayed from Redis on the other daemon,
 * answers the same image item, not its base64 as text. */
START_TEST(replay_keeps_images)
{
	start_two();
	free(tcd_write_ws(&d1, "a.png", "\x89PNG\r\n\x1a\n\0\0\0\rIHDR", 16, 0644));
	const char *params = "{\"name\":\"read_file\",\"arguments\":{\"path\":\"a.png\",\"encoding\":\"base64\"},"
			     "\"_meta\":{\"idempotencyKey\":\"k-image\"}}";
	const struct json *r1 = tcc_request(c1, "tools/call", params);
	tc_assert_ok(r1);
	ck_assert_str_eq(tj_str(r1, "result.content.0.type"), "image");
	const struct json *r2 = tcc_request(c2, "tools/call", params);
	tc_assert_ok(r2);
	ck_assert(tj_bool(r2, "result._meta.toolcalld/replayed"));
	ck_assert_int_eq(tj_len(r2, "result.content"), 1);
	ck_assert_str_eq(tj_str(r2, "result.content.0.type"), "image");
	ck_assert_str_eq(tj_str(r2, "result.content.0.mimeType"), "image/png");
	ck_assert_str_eq(tj_str(r2, "result.content.0.data"), tj_str(r1, "result.content.0.data"));
	ck_assert_str_eq(tj_str(r2, "result.structuredContent.content"), tj_str(r1, "result.content.0.data"));
	stop_two(false);
}
END_TEST

/* The daemon running a keyed call dies: after its lease, an idempotent
 * tool runs again elsewhere, a non-idempotent one is never run twice. */
START_TEST(holder_killed)
{
	start_two();
	send_probe(c1, "probe", "K", "30", "k-kill");
	wait_starts("K", 1);
	kill_first();
	const struct json *ra = wait_for(c2, send_probe(c2, "probe", "K", "30", "k-kill"), 10000);
	tc_assert_kind(ra, "execution_error");
	ck_assert_str_eq(tj_str(ra, "error.data.outcome"), "unknown");
	ck_assert_uint_eq(starts("K"), 1);
	/* And again: never a second run under that key. */
	tc_assert_kind(wait_for(c2, send_probe(c2, "probe", "K", "30", "k-kill"), 10000), "execution_error");
	ck_assert_uint_eq(starts("K"), 1);
	stop_two(true);
}
END_TEST

START_TEST(idempotent_holder_killed)
{
	start_two();
	send_probe(c1, "probe_idem", "KI", "1", "k-idem");
	wait_starts("KI", 1);
	kill_first();
	const struct json *r = wait_for(c2, send_probe(c2, "probe_idem", "KI", "1", "k-idem"), 15000);
	tc_assert_ok(r);
	ck_assert_uint_eq(starts("KI"), 2);
	stop_two(true);
}
END_TEST

START_TEST(tasks_across)
{
	start_two();
	const struct json *init = tcc_initialize(c1, NULL);
	ck_assert(tj_has(init, "capabilities.tasks.requests.tools.call"));
	const struct json *list = tcc_request(c1, "tools/list", NULL);
	ck_assert_str_eq(tj_str(list, "result.tools.0.execution.taskSupport"), "optional");
	char *log = tj_quote(probe_log);
	const struct json *made = tcc_request(c1, "tools/call", tcc_fmt(c1,
		"{\"name\":\"probe\",\"arguments\":{\"log\":%s,\"tag\":\"T\",\"secs\":1},\"task\":{\"ttl\":60000}}", log));
	free(log);
	tc_assert_ok(made);
	ck_assert_str_eq(tj_str(made, "result.task.status"), "working");
	ck_assert_int_eq(tj_int(made, "result.task.ttl"), 60000);
	const char *id = tj_str(made, "result.task.taskId");
	ck_assert(id && *id);
	const char *q = tcc_fmt(c2, "{\"taskId\":\"%s\"}", id);
	/* The creator answered once Redis had the task: the other knows it. */
	const struct json *got = tcc_request(c2, "tasks/get", q);
	tc_assert_ok(got);
	ck_assert_str_eq(tj_str(got, "result.taskId"), id);
	/* tasks/result waits for the end, on the other daemon. */
	const struct json *res = tcc_request_t(c2, "tasks/result", q, 15000);
	tc_assert_ok(res);
	ck_assert(strstr(tj_str(res, "result.content.0.text"), "ran T") != NULL);
	/* MCP: tasks/result names its task in _meta; the call's own _meta stays. */
	ck_assert_str_eq(related_task(res), id);
	ck_assert(tj_str(res, "result._meta.toolcalld/callId") != NULL);
	got = tcc_request(c2, "tasks/get", q);
	ck_assert_str_eq(tj_str(got, "result.status"), "completed");
	const struct json *all = tcc_request(c2, "tasks/list", NULL);
	ck_assert_int_ge(tj_len(all, "result.tasks"), 1);
	/* The creator heard of the change. */
	ck_assert(tcc_wait_notification(c1, "notifications/tasks/status", 5000) != NULL);
	/* Unknown tasks are invalid params. */
	const struct json *bad = tcc_request(c2, "tasks/get", "{\"taskId\":\"nope\"}");
	ck_assert_int_eq(tj_int(bad, "error.code"), -32602);
	stop_two(false);
}
END_TEST

/* Right after the creator's answer, the other daemon knows the task:
 * many times over, so a write still on its way would be caught. */
START_TEST(task_known_at_once)
{
	start_two();
	wait_connected(c1, true);
	for (int i = 0; i < 100; i++) {
		const struct json *made = make_task(c1, "N", "0");
		tc_assert_ok(made);
		const char *id = tj_str(made, "result.task.taskId");
		const struct json *got = tcc_request(c2, "tasks/get", tcc_fmt(c2, "{\"taskId\":\"%s\"}", id));
		ck_assert_msg(tj_has(got, "result"), "task %d unknown on the other daemon", i);
		ck_assert_str_eq(tj_str(got, "result.taskId"), id);
	}
	stop_two(false);
}
END_TEST

/* tasks/cancel on the daemon that does not run the task stops its call
 * where it runs; both then say "cancelled", and so does tasks/result. */
START_TEST(cancel_across)
{
	start_two();
	wait_connected(c1, true);
	wait_connected(c2, true);
	tcc_initialize(c1, NULL);
	const struct json *made = make_task(c1, "C", "30");
	tc_assert_ok(made);
	const char *id = tj_str(made, "result.task.taskId");
	wait_starts("C", 1);
	const char *q1 = tcc_fmt(c1, "{\"taskId\":\"%s\"}", id);
	const char *q2 = tcc_fmt(c2, "{\"taskId\":\"%s\"}", id);
	const struct json *cancelled = tcc_request(c2, "tasks/cancel", q2);
	tc_assert_ok(cancelled);
	ck_assert_str_eq(tj_str(cancelled, "result.status"), "cancelled");
	ck_assert_str_eq(tj_str(cancelled, "result.taskId"), id);
	/* The running daemon stopped the call: tasks/result answers there. */
	const struct json *res = tcc_request_t(c1, "tasks/result", q1, 10000);
	tc_assert_kind(res, "cancelled");
	ck_assert_str_eq(related_task(res), id);
	ck_assert_str_eq(tj_str(tcc_request(c1, "tasks/get", q1), "result.status"), "cancelled");
	ck_assert_str_eq(tj_str(tcc_request(c2, "tasks/get", q2), "result.status"), "cancelled");
	tc_assert_kind(tcc_request(c2, "tasks/result", q2), "cancelled");
	/* The creator heard; the probe never reached its end. */
	const struct json *n = tcc_wait_notification(c1, "notifications/tasks/status", 5000);
	ck_assert(n != NULL);
	ck_assert_str_eq(tj_str(n, "params.status"), "cancelled");
	ck_assert_uint_eq(logged("end", "C"), 0);
	/* A task that ended cannot be cancelled, on either daemon. */
	ck_assert_int_eq(tj_int(tcc_request(c2, "tasks/cancel", q2), "error.code"), -32602);
	ck_assert_int_eq(tj_int(tcc_request(c1, "tasks/cancel", q1), "error.code"), -32602);
	ck_assert_int_eq(tj_int(tcc_request(c2, "tasks/cancel", "{\"taskId\":\"nope\"}"), "error.code"), -32602);
	stop_two(false);
}
END_TEST

/* Replaces the first from in the file at path by to. */
static void edit_config(const char *path, const char *from, const char *to)
{
	size_t n;
	_cleanup_free_ char *text = tcd_read(NULL, path, &n);
	ck_assert(text != NULL);
	char *at = strstr(text, from);
	ck_assert_msg(at != NULL, "'%s' is not in %s", from, path);
	char *out = xasprintf("%.*s%s%s", (int)(at - text), text, to, at + strlen(from));
	tc_write_file_atomic(path, out, strlen(out));
	free(out);
}

/* A reload that changes the store's prefix says so and keeps the prefix
 * in use until a restart; the tasks bound applies at once, and it holds
 * across daemons (the other daemon's tasks count). */
START_TEST(reload_store_settings)
{
	start_two();
	wait_connected(c1, true);
	edit_config(d1.config, "\"prefix\":\"it:\"", "\"prefix\":\"other:\"");
	edit_config(d1.config, "\"store\":{", "\"tasks\":{\"max_per_uid\":1},\"store\":{");
	tc_assert_ok(tcc_request(c1, "admin/reload", NULL));
	ck_assert(tcd_wait_log(&d1, "store.prefix changes from 'it:' to 'other:' at the next restart", 1, 5000));
	const struct json *st = tcc_request(c1, "admin/stats", NULL);
	ck_assert_str_eq(tj_str(st, "result.storeRestartPending.0"), "store.prefix");
	/* Still "it:": a task made on the other daemon counts here. */
	tc_assert_ok(make_task(c2, "B1", "5"));
	const struct json *over = make_task(c1, "B2", "5");
	tc_assert_kind(over, "overloaded");
	ck_assert_uint_eq(starts("B2"), 0);
	stop_two(false);
}
END_TEST

/* Redis is in use again: both daemons are connected, and a call started
 * on the first is joined from the second and runs once. */
static void shared_again(const char *tag, const char *key)
{
	wait_connected(c1, true);
	wait_connected(c2, true);
	const char *a = send_probe(c1, "probe", tag, "1", key);
	wait_starts(tag, 1);
	tc_assert_ok(wait_for(c2, send_probe(c2, "probe", tag, "1", key), 10000));
	tc_assert_ok(wait_for(c1, a, 10000));
	ck_assert_uint_eq(starts(tag), 1);
}

START_TEST(redis_stalled)
{
	struct tcd df;
	start_two();
	start(&df, "\"on_unavailable\":\"fail\"");
	struct tcc *cf = tcc_connect(&df);
	wait_connected(c1, true);
	redis_server_pause(&rs, true);
	/* "local": keyed calls still work on each daemon. */
	tc_assert_ok(wait_for(c1, send_probe(c1, "probe", "S1", "0", "k-stall"), 10000));
	tc_assert_kind(wait_for(cf, send_probe(cf, "probe", "S2", "0", "k-stall-f"), 10000), "transient");
	/* Unkeyed calls never wait for the store. */
	tc_assert_ok(wait_for(cf, send_probe(cf, "probe", "S3", "0", NULL), 5000));
	const struct json *st = tcc_request(c1, "admin/stats", NULL);
	ck_assert_int_ge(tj_int(st, "result.store.outages"), 1);
	redis_server_pause(&rs, false);
	shared_again("S4", "k-after");
	tcc_close(cf);
	tcd_finish(&df);
	stop_two(false);
}
END_TEST

/* The probe's answer for key on c: run (or replayed) and fine. */
static const struct json *keyed(struct tcc *c, const char *tag, const char *key)
{
	const struct json *r = wait_for(c, send_probe(c, "probe", tag, "0", key), 15000);
	tc_assert_ok(r);
	return r;
}

static bool replayed(const struct json *r)
{
	return tj_bool(r, "result._meta.toolcalld/replayed");
}

/* Drill 1: a key run with Redis up is replayed while Redis is stalled,
 * from the daemon's own record: it ran once. */
START_TEST(drill_stalled_replays_own)
{
	start_two();
	wait_connected(c1, true);
	ck_assert(!replayed(keyed(c1, "D1", "k-d1")));
	redis_server_pause(&rs, true);
	ck_assert(replayed(keyed(c1, "D1", "k-d1")));
	ck_assert_uint_eq(starts("D1"), 1);
	redis_server_pause(&rs, false);
	stop_two(false);
}
END_TEST

/* Drill 2: Redis down, a key runs on the first daemon alone; Redis comes
 * back empty: the first replays it, and so does the second, to which the
 * first wrote it back. */
START_TEST(drill_alone_written_back)
{
	start_two();
	wait_connected(c1, true);
	wait_connected(c2, true);
	redis_server_kill(&rs);
	ck_assert(!replayed(keyed(c1, "D2", "k-d2")));
	wait_connected(c1, false);
	redis_server_start(&rs);
	wait_connected(c1, true);
	wait_connected(c2, true);
	ck_assert(replayed(keyed(c1, "D2", "k-d2")));
	ck_assert(replayed(keyed(c2, "D2", "k-d2")));
	ck_assert_uint_eq(starts("D2"), 1);
	const struct json *st = tcc_request(c1, "admin/stats", NULL);
	ck_assert_int_ge(tj_int(st, "result.store.writtenBack"), 1);
	ck_assert_int_eq(tj_int(st, "result.store.writeBackPending"), 0);
	stop_two(false);
}
END_TEST

/* Drill 3: Redis stalls as a claim is sent. The call runs once; the next
 * callers, on that daemon while Redis is away and on either once it is
 * back, get its real outcome, never "unknown". */
START_TEST(drill_claim_as_redis_stalls)
{
	start_two();
	wait_connected(c1, true);
	wait_connected(c2, true);
	const char *id = send_probe(c1, "probe", "D3", "0", "k-d3");
	redis_server_pause(&rs, true);
	tc_assert_ok(wait_for(c1, id, 15000));
	ck_assert(replayed(keyed(c1, "D3", "k-d3")));
	redis_server_pause(&rs, false);
	wait_connected(c1, true);
	wait_connected(c2, true);
	ck_assert(replayed(keyed(c2, "D3", "k-d3")));
	ck_assert(replayed(keyed(c1, "D3", "k-d3")));
	ck_assert_uint_eq(starts("D3"), 1);
	stop_two(false);
}
END_TEST

/* Drill 4: a task made while Redis is stalled lives in the daemon's
 * fallback; after its TTL it is gone from admin/stats. */
START_TEST(drill_outage_task_expires)
{
	start(&d1, NULL);
	c1 = tcc_connect(&d1);
	wait_connected(c1, true);
	redis_server_pause(&rs, true);
	char *log = tj_quote(probe_log);
	const struct json *made = tcc_request_t(c1, "tools/call", tcc_fmt(c1,
		"{\"name\":\"probe\",\"arguments\":{\"log\":%s,\"tag\":\"D4\",\"secs\":0},\"task\":{\"ttl\":500}}",
		log), 15000);
	free(log);
	tc_assert_ok(made);
	const char *q = tcc_fmt(c1, "{\"taskId\":\"%s\"}", tj_str(made, "result.task.taskId"));
	tc_assert_ok(tcc_request_t(c1, "tasks/result", q, 15000));
	const struct json *st = tcc_request(c1, "admin/stats", NULL);
	ck_assert_int_ge(tj_int(st, "result.store.local.tasks"), 1);
	uint64_t end = mono_ms() + 10000;
	for (;;) {
		st = tcc_request(c1, "admin/stats", NULL);
		if (tj_int(st, "result.store.local.tasks") == 0 && tj_int(st, "result.tasks.tasks") == 0)
			break;
		ck_assert_msg(mono_ms() < end, "the task outlived its TTL: %s", tj_text(tj(st, "result")));
		usleep(50000);
	}
	redis_server_pause(&rs, false);
	tcc_close(c1);
	tcd_finish(&d1);
}
END_TEST

START_TEST(redis_killed_and_restarted)
{
	start_two();
	wait_connected(c1, true);
	redis_server_kill(&rs);
	tc_assert_ok(wait_for(c1, send_probe(c1, "probe", "R1", "0", "k-down"), 10000));
	wait_connected(c1, false);
	redis_server_start(&rs);
	shared_again("R2", "k-back");
	stop_two(false);
}
END_TEST

int main(void)
{
	const char *why;
	if (!redis_server_available(&why)) {
		fprintf(stderr, "SKIP %s\n", why);
		return TC_EXIT_SKIP;
	}
	Suite *s = suite_create("integ_store");
	TCase *tc = tcase_create("two daemons, one redis");
	tcase_set_timeout(tc, 120);
	tcase_add_checked_fixture(tc, setup, NULL);
	tcase_add_test(tc, join_replay_conflict);
	tcase_add_test(tc, replay_keeps_images);
	tcase_add_test(tc, holder_killed);
	tcase_add_test(tc, idempotent_holder_killed);
	tcase_add_test(tc, tasks_across);
	tcase_add_test(tc, redis_stalled);
	tcase_add_test(tc, redis_killed_and_restarted);
	tcase_add_test(tc, task_known_at_once);
	tcase_add_test(tc, cancel_across);
	tcase_add_test(tc, reload_store_settings);
	tcase_add_test(tc, drill_stalled_replays_own);
	tcase_add_test(tc, drill_alone_written_back);
	tcase_add_test(tc, drill_claim_as_redis_stalls);
	tcase_add_test(tc, drill_outage_task_expires);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	/* One redis-server for all the cases: they run in this process. */
	srunner_set_fork_status(sr, CK_NOFORK);
	srunner_run_all(sr, CK_ENV);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	redis_server_free(&rs);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
