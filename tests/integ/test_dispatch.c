/* SPDX-License-Identifier: MIT */
/*
 * The dispatch engine, black-box through the socket of the real daemon:
 * idempotency (joining, replay, conflicts, disconnects, explicit cancels),
 * concurrency caps and the queue limit, retries with backoff, timeouts,
 * budgets (a path refused by the workspace check spends none), the
 * circuit breaker, batches and sessions/cancel, and the envelope every
 * failed call carries, whatever failed it.
 * Long because each rule needs the real daemon and the probe's log helpers shared here.
 *
 * Calls go to a "command" tool running tests/integ/tools/probe.sh, which
 * appends "start TAG NS" and "end TAG NS" lines to a log, so the tests can
 * count handler runs and see when each one ran.
 */
#include <check.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/integ/harness.h"
#include "tests/unit/check_main.h"

/* --- the probe tool and its log ------------------------------------------- */

/* Where the helper scripts live (set by tests/meson.build). */
static const char *tools_src(void)
{
	const char *p = getenv("TC_INTEG_TOOLS");
	ck_assert_msg(p && *p, "TC_INTEG_TOOLS is not set");
	return p;
}

/* Declares a command tool named name that runs probe.sh. */
static void write_probe_tool(struct tcd *d, const char *name, bool idempotent, unsigned timeout_ms)
{
	char *file = xasprintf("%s.json", name);
	char *json = xasprintf(
		"{\"name\":\"%s\",\"kind\":\"command\","
		"\"description\":\"Records its start and end, sleeps, exits with a status\","
		"\"argv\":[\"%s/probe.sh\",\"{{log}}\",\"{{tag}}\",\"{{secs}}\",\"{{status}}\"],"
		"\"side_effects\":\"read\",\"idempotent\":%s,\"timeout_ms\":%u,"
		/* Its log lies beside the workspace. */
		"\"sandbox\":{\"write_extra\":[\"%s\"]},"
		"\"input_schema\":{\"type\":\"object\",\"properties\":{"
		"\"log\":{\"type\":\"string\"},\"tag\":{\"type\":\"string\"},"
		"\"secs\":{\"type\":\"number\",\"minimum\":0},\"status\":{\"type\":\"integer\"}},"
		"\"required\":[\"log\",\"tag\",\"secs\",\"status\"],\"additionalProperties\":false}}",
		name, tools_src(), idempotent ? "true" : "false", timeout_ms, d->dir);
	tcd_write_tool(d, file, json);
	free(json);
	free(file);
}

/* The probe log of a daemon (malloc'd). */
static char *probe_log(const struct tcd *d)
{
	return xasprintf("%s/probe.log", d->dir);
}

/* Starts a daemon with config and the tools "probe" (not idempotent),
 * "probe_idem" (idempotent), both with a 20 s timeout, and "probe_short"
 * (300 ms timeout); returns the path of the log the probes write
 * (malloc'd). */
static char *start_probes(struct tcd *d, const char *config)
{
	struct tcd_opts o = { .config = config };
	tcd_prepare(d, &o);
	write_probe_tool(d, "probe", false, 20000);
	write_probe_tool(d, "probe_idem", true, 20000);
	write_probe_tool(d, "probe_short", false, 300);
	/* Made before the first call: write_extra covers files that exist
	 * when the sandbox's rules are made (the daemon's own files in the
	 * same directory are kept from its children). */
	char *probe = xasprintf("%s/probe.log", d->dir);
	tc_write_file_atomic(probe, "", 0);
	free(probe);
	tcd_spawn(d, &o);
	if (tcd_wait_socket(d, d->sock, TCD_START_TIMEOUT_MS) < 0) {
		char *log = tcd_log(d);
		ck_abort_msg("the daemon did not start; its log:\n%s", log);
	}
	return probe_log(d);
}

/* Arguments for one probe run. */
static const char *probe_args(struct tcc *c, const char *log, const char *tag, const char *secs, int status)
{
	char *q = tj_quote(log);
	const char *a = tcc_fmt(c, "{\"log\":%s,\"tag\":\"%s\",\"secs\":%s,\"status\":%d}", q, tag, secs, status);
	free(q);
	return a;
}

/* tools/call params: tool, arguments, and _meta members (NULL: none). */
static const char *call_params(struct tcc *c, const char *tool, const char *args, const char *meta)
{
	if (meta)
		return tcc_fmt(c, "{\"name\":\"%s\",\"arguments\":%s,\"_meta\":{%s}}", tool, args, meta);
	return tcc_fmt(c, "{\"name\":\"%s\",\"arguments\":%s}", tool, args);
}

/* Sends a call without waiting; returns its id as text (owned by c). */
static const char *send_call(struct tcc *c, const char *tool, const char *args, const char *meta)
{
	int64_t id = tcc_send_request(c, "tools/call", call_params(c, tool, args, meta));
	return tcc_fmt(c, "%lld", (long long)id);
}

/* Waits for the response to id; fails the test on timeout. */
static const struct json *wait_response(struct tcc *c, const char *id, int timeout_ms)
{
	const struct json *r = tcc_wait_id(c, id, timeout_ms);
	ck_assert_msg(r != NULL, "no response to request %s within %d ms", id, timeout_ms);
	return r;
}

struct probe_event {
	bool start;
	char tag[64];
	uint64_t ns;
};

/* Parses the probe log; returns the number of events (*ret malloc'd). */
static size_t read_events(const struct tcd *d, struct probe_event **ret)
{
	char *path = probe_log(d);
	char *text = tcd_read(d, path, NULL);
	free(path);
	struct probe_event *v = NULL;
	size_t n = 0;
	for (char *line = text ? strtok(text, "\n") : NULL; line; line = strtok(NULL, "\n")) {
		char kind[8], tag[64];
		unsigned long long ns;
		if (sscanf(line, "%7s %63s %llu", kind, tag, &ns) != 3)
			continue;
		v = xreallocarray(v, n + 1, sizeof(*v));
		v[n].start = str_eq(kind, "start");
		snprintf(v[n].tag, sizeof(v[n].tag), "%s", tag);
		v[n].ns = ns;
		n++;
	}
	free(text);
	*ret = v;
	return n;
}

/* Counts starts (or ends) in the log whose tag is tag (NULL: any). */
static unsigned count_events(const struct tcd *d, bool start, const char *tag)
{
	struct probe_event *v;
	size_t n = read_events(d, &v);
	unsigned k = 0;
	for (size_t i = 0; i < n; i++)
		if (v[i].start == start && (!tag || str_eq(v[i].tag, tag)))
			k++;
	free(v);
	return k;
}

/* Waits until the log holds at least want starts of tag (NULL: any). */
static void wait_starts(const struct tcd *d, const char *tag, unsigned want, int timeout_ms)
{
	uint64_t end = tc_now_ms() + (uint64_t)timeout_ms;
	while (count_events(d, true, tag) < want) {
		ck_assert_msg(tc_now_ms() < end, "%u runs of the probe '%s' did not start within %d ms", want,
			      tag ? tag : "*", timeout_ms);
		tc_pause_ms(TC_POLL_MS);
	}
}

static int cmp_event(const void *a, const void *b)
{
	const struct probe_event *x = a, *y = b;
	if (x->ns != y->ns)
		return x->ns < y->ns ? -1 : 1;
	/* At the same instant an end comes first: that is no overlap. */
	return (int)x->start - (int)y->start;
}

/* The largest number of probe runs that were running at once. */
static unsigned max_overlap(const struct tcd *d)
{
	struct probe_event *v;
	size_t n = read_events(d, &v);
	qsort(v, n, sizeof(*v), cmp_event);
	unsigned cur = 0, max = 0;
	for (size_t i = 0; i < n; i++) {
		if (v[i].start) {
			cur++;
			max = MAX(max, cur);
		} else if (cur) {
			cur--;
		}
	}
	free(v);
	return max;
}

/* Nanosecond time of the k-th (from 0) start or end of tag; 0 when absent. */
static uint64_t event_ns(const struct tcd *d, bool start, const char *tag, unsigned k)
{
	struct probe_event *v;
	size_t n = read_events(d, &v);
	qsort(v, n, sizeof(*v), cmp_event);
	uint64_t ns = 0;
	for (size_t i = 0; i < n; i++)
		if (v[i].start == start && str_eq(v[i].tag, tag) && k-- == 0) {
			ns = v[i].ns;
			break;
		}
	free(v);
	return ns;
}

static const char *call_id_of(const struct json *r)
{
	const char *id = tj_str(r, "result._meta.toolcalld/callId");
	if (!id)
		id = tj_str(r, "error.data.callId");
	return id;
}

/* --- idempotency ------------------------------------------------------------ */

/* Twenty connections naming one key share one run and one outcome; a later
 * call with the key is a replay. */
START_TEST(idem_twenty_callers_one_run)
{
	struct tcd d;
	char *log = start_probes(&d, NULL);
	enum { N = 20 };
	struct tcc *c[N];
	const char *ids[N];
	for (int i = 0; i < N; i++)
		c[i] = tcc_connect(&d);
	for (int i = 0; i < N; i++)
		ids[i] = send_call(c[i], "probe", probe_args(c[i], log, "shared", "1", 0),
				   "\"idempotencyKey\":\"key-twenty\"");
	const char *call_id = NULL;
	for (int i = 0; i < N; i++) {
		const struct json *r = wait_response(c[i], ids[i], 10000);
		tc_assert_ok(r);
		ck_assert_str_eq(tj_str(r, "result.structuredContent.stdout"), "ran shared\n");
		ck_assert(!tj_bool(r, "result._meta.toolcalld/replayed"));
		const char *id = call_id_of(r);
		ck_assert_ptr_nonnull(id);
		if (!call_id)
			call_id = xstrdup(id);
		ck_assert_str_eq(id, call_id);
	}
	ck_assert_uint_eq(count_events(&d, true, "shared"), 1);

	/* After the end: the kept outcome, marked as a replay. */
	const struct json *r = tcc_request(c[0], "tools/call",
					   call_params(c[0], "probe", probe_args(c[0], log, "shared", "1", 0),
						       "\"idempotencyKey\":\"key-twenty\""));
	tc_assert_ok(r);
	ck_assert(tj_bool(r, "result._meta.toolcalld/replayed"));
	ck_assert_str_eq(call_id_of(r), call_id);
	ck_assert_str_eq(tj_str(r, "result.structuredContent.stdout"), "ran shared\n");
	ck_assert_uint_eq(count_events(&d, true, "shared"), 1);

	const struct json *st = tcc_request(c[0], "admin/stats", NULL);
	ck_assert_int_ge(tj_int(st, "result.idempotency.joins"), N - 1);
	ck_assert_int_ge(tj_int(st, "result.idempotency.hits"), 1);

	for (int i = 0; i < N; i++)
		tcc_close(c[i]);
	free((char *)call_id);
	free(log);
	tcd_finish(&d);
}
END_TEST

/* Same key, other arguments or another tool: idempotency_conflict; the same
 * arguments with their keys in another order are the same call. */
START_TEST(idem_conflict_and_key_order)
{
	struct tcd d;
	char *log = start_probes(&d, NULL);
	struct tcc *c = tcc_connect(&d);
	char *q = tj_quote(log);

	const struct json *r = tcc_request(c, "tools/call",
		call_params(c, "probe", tcc_fmt(c, "{\"log\":%s,\"tag\":\"ord\",\"secs\":0,\"status\":0}", q),
			    "\"idempotencyKey\":\"key-order\""));
	tc_assert_ok(r);
	ck_assert(!tj_bool(r, "result._meta.toolcalld/replayed"));
	const char *first = call_id_of(r);

	/* Keys reordered (and spaced): the same call, replayed. */
	r = tcc_request(c, "tools/call",
		call_params(c, "probe", tcc_fmt(c, "{ \"status\": 0, \"secs\": 0, \"tag\": \"ord\", \"log\": %s }", q),
			    "\"idempotencyKey\":\"key-order\""));
	tc_assert_ok(r);
	ck_assert(tj_bool(r, "result._meta.toolcalld/replayed"));
	ck_assert_str_eq(call_id_of(r), first);

	/* Other arguments. */
	r = tcc_request(c, "tools/call",
		call_params(c, "probe", probe_args(c, log, "ord", "0", 1), "\"idempotencyKey\":\"key-order\""));
	tc_assert_kind(r, "idempotency_conflict");
	ck_assert_int_eq(tj_int(r, "error.code"), -32602);
	ck_assert(!tj_bool(r, "error.data.retryable"));

	/* Another tool, same arguments. */
	r = tcc_request(c, "tools/call",
		call_params(c, "probe_idem", probe_args(c, log, "ord", "0", 0), "\"idempotencyKey\":\"key-order\""));
	tc_assert_kind(r, "idempotency_conflict");
	ck_assert_int_eq(tj_int(r, "error.code"), -32602);

	ck_assert_uint_eq(count_events(&d, true, "ord"), 1);

	/* A kept error is replayed too, and says so in its data. */
	r = tcc_request(c, "tools/call",
		call_params(c, "read_file", "{\"path\":\"missing.txt\"}", "\"idempotencyKey\":\"key-err\""));
	tc_assert_kind(r, "execution_error");
	ck_assert(!tj_has(r, "error.data.replayed"));
	char *err_call = xstrdup(tj_str(r, "error.data.callId"));
	r = tcc_request(c, "tools/call",
		call_params(c, "read_file", "{\"path\":\"missing.txt\"}", "\"idempotencyKey\":\"key-err\""));
	tc_assert_kind(r, "execution_error");
	ck_assert(tj_bool(r, "error.data.replayed"));
	ck_assert_str_eq(tj_str(r, "error.data.callId"), err_call);
	free(err_call);

	/* A keyed command that fails counts toward its tool's circuit (the
	 * circuit of a keyed call is found once its key is claimed), and the
	 * daemon goes on serving. */
	r = tcc_request(c, "tools/call",
		call_params(c, "probe", probe_args(c, log, "fails", "0", 1), "\"idempotencyKey\":\"key-fails\""));
	tc_assert_kind(r, "execution_error");
	tc_assert_ok(tcc_request(c, "ping", NULL));
	free(q);
	tcc_close(c);
	free(log);
	tcd_finish(&d);
}
END_TEST

/* A keyed call whose client goes away runs to its end; the client comes
 * back with the key and gets the kept outcome, without a second run. */
START_TEST(idem_disconnect_then_replay)
{
	struct tcd d;
	char *log = start_probes(&d, NULL);
	struct tcc *a = tcc_connect(&d);
	send_call(a, "probe", probe_args(a, log, "gone", "0.6", 0), "\"idempotencyKey\":\"key-gone\"");
	wait_starts(&d, "gone", 1, 5000);
	tcc_close(a);

	/* The run is not cancelled: it ends normally. */
	uint64_t end = tc_now_ms() + 5000;
	while (count_events(&d, false, "gone") < 1) {
		ck_assert_msg(tc_now_ms() < end, "the keyed call was stopped when its client disconnected");
		tc_pause_ms(TC_POLL_MS);
	}
	ck_assert(tcd_wait_stat(&d, "result.calls", 1, 3000));	/* its outcome is kept */

	struct tcc *b = tcc_connect(&d);
	const struct json *r = tcc_request(b, "tools/call",
		call_params(b, "probe", probe_args(b, log, "gone", "0.6", 0), "\"idempotencyKey\":\"key-gone\""));
	tc_assert_ok(r);
	ck_assert(tj_bool(r, "result._meta.toolcalld/replayed"));
	ck_assert_str_eq(tj_str(r, "result.structuredContent.stdout"), "ran gone\n");
	ck_assert_uint_eq(count_events(&d, true, "gone"), 1);
	tcc_close(b);
	free(log);
	tcd_finish(&d);
}
END_TEST

/* notifications/cancelled detaches one caller of a shared run: the run goes
 * on for the other, and the cancelled call gets no response at all. */
START_TEST(idem_cancel_one_joined_caller)
{
	struct tcd d;
	char *log = start_probes(&d, NULL);
	struct tcc *a = tcc_connect(&d), *b = tcc_connect(&d);
	const char *ida = send_call(a, "probe", probe_args(a, log, "joined", "0.8", 0), "\"idempotencyKey\":\"key-j\"");
	wait_starts(&d, "joined", 1, 5000);
	const char *idb = send_call(b, "probe", probe_args(b, log, "joined", "0.8", 0), "\"idempotencyKey\":\"key-j\"");
	/* b has joined once its request is read: a ping sent after it comes back after it. */
	tc_assert_ok(tcc_request(b, "ping", NULL));
	tcc_send(b, tcc_fmt(b, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\","
			       "\"params\":{\"requestId\":%s,\"reason\":\"test\"}}", idb));

	const struct json *r = wait_response(a, ida, 10000);
	tc_assert_ok(r);
	ck_assert_str_eq(tj_str(r, "result.structuredContent.stdout"), "ran joined\n");
	ck_assert_uint_eq(count_events(&d, false, "joined"), 1);

	/* Nothing for b's cancelled call, and b still works. */
	ck_assert_ptr_null(tcc_wait_id(b, idb, 500));
	tc_assert_ok(tcc_request(b, "ping", NULL));
	ck_assert_ptr_null(tcc_wait_id(b, idb, 0));
	ck_assert_uint_eq(count_events(&d, true, "joined"), 1);
	tcc_close(a);
	tcc_close(b);
	free(log);
	tcd_finish(&d);
}
END_TEST

/* When the last caller of a keyed run cancels, the run stops, and its
 * cancelled outcome is not kept: the key runs afresh. */
START_TEST(idem_cancel_last_caller_stops_run)
{
	struct tcd d;
	char *log = start_probes(&d, NULL);
	struct tcc *a = tcc_connect(&d);
	const char *id = send_call(a, "probe", probe_args(a, log, "last", "1.5", 0), "\"idempotencyKey\":\"key-last\"");
	wait_starts(&d, "last", 1, 5000);
	tcc_send(a, tcc_fmt(a, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\","
			       "\"params\":{\"requestId\":%s}}", id));
	ck_assert_ptr_null(tcc_wait_id(a, id, 500));
	/* The run was stopped: it never logged its end. */
	ck_assert_uint_eq(count_events(&d, false, "last"), 0);

	/* Not a replay of a cancelled outcome: the key runs again, to its end. */
	const struct json *r = tcc_request(a, "tools/call",
		call_params(a, "probe", probe_args(a, log, "last", "1.5", 0), "\"idempotencyKey\":\"key-last\""));
	tc_assert_ok(r);
	ck_assert(!tj_bool(r, "result._meta.toolcalld/replayed"));
	ck_assert_uint_eq(count_events(&d, true, "last"), 2);
	ck_assert_uint_eq(count_events(&d, false, "last"), 1);
	tcc_close(a);
	free(log);
	tcd_finish(&d);
}
END_TEST

/* --- concurrency ---------------------------------------------------------- */

/* Six calls on a session capped at 4: four run at once, the other two
 * wait their turn (FIFO) and every call completes. */
START_TEST(session_cap_four)
{
	TC_SKIP_UNDER_VALGRIND("starting a child there takes longer than these calls run");
	struct tcd d;
	char *log = start_probes(&d, "{\"limits\":{\"session_concurrency\":4}}");
	struct tcc *c = tcc_connect(&d);
	const char *ids[6];
	for (int i = 0; i < 6; i++)
		ids[i] = send_call(c, "probe", probe_args(c, log, tcc_fmt(c, "s%d", i), "0.5", 0), NULL);
	for (int i = 0; i < 6; i++)
		tc_assert_ok(wait_response(c, ids[i], 10000));
	ck_assert_uint_eq(max_overlap(&d), 4);
	/* FIFO: the last two started only after one of the first four ended. */
	uint64_t first_end = UINT64_MAX;
	for (int i = 0; i < 4; i++)
		first_end = MIN(first_end, event_ns(&d, false, tcc_fmt(c, "s%d", i), 0));
	for (int i = 4; i < 6; i++)
		ck_assert_uint_ge(event_ns(&d, true, tcc_fmt(c, "s%d", i), 0), first_end);
	tcc_close(c);
	free(log);
	tcd_finish(&d);
}
END_TEST

/* The global cap holds across sessions (of one uid allowed every slot). */
START_TEST(global_cap)
{
	struct tcd d;
	char *log = start_probes(&d, "{\"limits\":{\"max_concurrent\":2,\"per_uid_running\":2}}");
	enum { N = 5 };
	struct tcc *c[N];
	const char *ids[N];
	for (int i = 0; i < N; i++) {
		c[i] = tcc_connect(&d);
		ids[i] = send_call(c[i], "probe", probe_args(c[i], log, tcc_fmt(c[i], "g%d", i), "0.4", 0), NULL);
	}
	for (int i = 0; i < N; i++)
		tc_assert_ok(wait_response(c[i], ids[i], 10000));
	ck_assert_uint_eq(max_overlap(&d), 2);
	for (int i = 0; i < N; i++)
		tcc_close(c[i]);
	free(log);
	tcd_finish(&d);
}
END_TEST

/* Past queue_max waiting calls, a call is refused at once as overloaded. */
START_TEST(queue_max_overloaded)
{
	struct tcd d;
	char *log = start_probes(&d, "{\"limits\":{\"session_concurrency\":1,\"queue_max\":2}}");
	struct tcc *c = tcc_connect(&d);
	const char *ids[4];
	/* Each call takes 500 ms: the refusal comes while the first still
	 * runs, before any call has ended (what "at once" means here, however
	 * slow the machine). */
	for (int i = 0; i < 4; i++)
		ids[i] = send_call(c, "probe", probe_args(c, log, tcc_fmt(c, "q%d", i), "0.5", 0), NULL);
	const struct json *r = wait_response(c, ids[3], 5000);
	ck_assert_uint_eq(count_events(&d, false, NULL), 0);
	tc_assert_kind(r, "overloaded");
	ck_assert_int_eq(tj_int(r, "error.code"), -32603);
	ck_assert(tj_bool(r, "error.data.retryable"));
	for (int i = 0; i < 3; i++)
		tc_assert_ok(wait_response(c, ids[i], 10000));
	ck_assert_uint_eq(count_events(&d, true, NULL), 3);
	ck_assert_uint_eq(max_overlap(&d), 1);
	tcc_close(c);
	free(log);
	tcd_finish(&d);
}
END_TEST

/* --- retries and timeouts --------------------------------------------------- */

/* Milliseconds since midnight UTC of an event's "time" (ISO 8601 with
 * milliseconds). */
static int64_t event_ms(const struct json *ev)
{
	const char *t = tj_str(ev, "time");
	int h, m, sec, ms;
	ck_assert_msg(t && sscanf(t, "%*d-%*d-%*dT%d:%d:%d.%dZ", &h, &m, &sec, &ms) == 4, "time: %s", t);
	return ((int64_t)h * 3600 + m * 60 + sec) * 1000 + ms;
}

/* Exit status 75 is transient: three attempts, 100-150 ms then 400-600 ms
 * apart, then the error with attempts 3. */
START_TEST(retry_transient_backoff)
{
	struct tcd d;
	char *log = start_probes(&d, NULL);
	struct tcc *sub = tcc_connect(&d);
	tc_assert_ok(tcc_request(sub, "events/subscribe", "{\"types\":[\"dispatch.retry\",\"dispatch.attempt\"]}"));
	struct tcc *c = tcc_connect(&d);
	const struct json *r = tcc_call(c, "probe", probe_args(c, log, "flaky", "0", 75));
	tc_assert_kind(r, "transient");
	ck_assert_int_eq(tj_int(r, "error.code"), -32603);
	ck_assert_int_eq(tj_int(r, "error.data.attempts"), 3);
	ck_assert(tj_bool(r, "error.data.retryable"));
	ck_assert_ptr_nonnull(strstr(tj_str(r, "error.message"), "75"));
	ck_assert_uint_eq(count_events(&d, true, "flaky"), 3);

	/* The delays the daemon chose are the contract's... */
	static const int64_t lo[] = { 100, 400 }, hi[] = { 150, 600 };
	int64_t delay[2];
	for (int i = 0; i < 2; i++) {
		const struct json *ev = tcc_wait_event(sub, "dispatch.retry", 5000);
		ck_assert_msg(ev, "no dispatch.retry for attempt %d", i + 2);
		ck_assert_int_eq(tj_int(ev, "attempt"), i + 2);
		delay[i] = tj_int(ev, "delayMs");
		ck_assert_msg(delay[i] >= lo[i] && delay[i] <= hi[i], "delay before attempt %d: %lld ms", i + 2,
			      (long long)delay[i]);
		/* ...and kept: the next attempt starts once it has passed, on the
		 * daemon's clock and not much later (its timer's lateness; the
		 * program's start-up is not in it, which on a loaded machine
		 * took a second). */
		int64_t retry_ms = event_ms(ev);
		ev = tcc_wait_event(sub, "dispatch.attempt", 5000);
		ck_assert_msg(ev, "no dispatch.attempt %d", i + 2);
		ck_assert_int_eq(tj_int(ev, "attempt"), i + 2);
		int64_t waited = event_ms(ev) - retry_ms;
		if (waited < 0)
			waited += 24 * 3600 * 1000;	/* midnight passed */
		ck_assert_msg(waited >= delay[i] - 1 && waited <= delay[i] + 300,
			      "attempt %d started %lld ms after a retry told %lld ms", i + 2, (long long)waited,
			      (long long)delay[i]);
	}
	/* From one attempt's end to the next one's start, as the program saw
	 * it: at least the contract's delay (a loaded machine only adds). */
	uint64_t gap1 = (event_ns(&d, true, "flaky", 1) - event_ns(&d, false, "flaky", 0)) / 1000000;
	uint64_t gap2 = (event_ns(&d, true, "flaky", 2) - event_ns(&d, false, "flaky", 1)) / 1000000;
	ck_assert_msg(gap1 >= 100, "delay before attempt 2: %llu ms", (unsigned long long)gap1);
	ck_assert_msg(gap2 >= 400, "delay before attempt 3: %llu ms", (unsigned long long)gap2);
	tcc_close(sub);
	tcc_close(c);
	free(log);
	tcd_finish(&d);
}
END_TEST

/* A timeout ends a non-idempotent tool's call at once; an idempotent one is
 * tried again. _meta.timeoutMs overrides the tool's limit both ways. */
START_TEST(timeout_retry_only_idempotent)
{
	struct tcd d;
	char *log = start_probes(&d, NULL);
	struct tcc *c = tcc_connect(&d);

	uint64_t t0 = tc_now_ms();
	const struct json *r = tcc_request(c, "tools/call",
		call_params(c, "probe", probe_args(c, log, "slow1", "5", 0), "\"timeoutMs\":300"));
	uint64_t took = tc_now_ms() - t0;
	tc_assert_kind(r, "timeout");
	ck_assert_int_eq(tj_int(r, "error.code"), -32603);
	ck_assert_int_eq(tj_int(r, "error.data.attempts"), 1);
	ck_assert(!tj_bool(r, "error.data.retryable"));
	ck_assert_ptr_nonnull(strstr(tj_str(r, "error.message"), "300 ms"));
	ck_assert_msg(took >= 290 && took < 2000, "a 300 ms timeout took %llu ms", (unsigned long long)took);
	ck_assert_uint_eq(count_events(&d, true, "slow1"), 1);

	t0 = tc_now_ms();
	r = tcc_request(c, "tools/call",
		call_params(c, "probe_idem", probe_args(c, log, "slow2", "5", 0), "\"timeoutMs\":300"));
	took = tc_now_ms() - t0;
	tc_assert_kind(r, "timeout");
	ck_assert_int_eq(tj_int(r, "error.data.attempts"), 3);
	ck_assert(tj_bool(r, "error.data.retryable"));
	ck_assert_uint_eq(count_events(&d, true, "slow2"), 3);
	/* 3 × 300 ms plus backoff of 100-150 and 400-600 ms. */
	ck_assert_msg(took >= 1400 && took < 3500, "three 300 ms attempts took %llu ms", (unsigned long long)took);

	/* A tool declared with 300 ms, given more per call. */
	r = tcc_request(c, "tools/call",
		call_params(c, "probe_short", probe_args(c, log, "slow3", "0.6", 0), "\"timeoutMs\":5000"));
	tc_assert_ok(r);
	r = tcc_call(c, "probe_short", probe_args(c, log, "slow4", "0.6", 0));
	tc_assert_kind(r, "timeout");
	tcc_close(c);
	free(log);
	tcd_finish(&d);
}
END_TEST

/* --- budgets ------------------------------------------------------------------ */

START_TEST(budget_session_and_call)
{
	struct tcd d;
	char *log = start_probes(&d, NULL);
	struct tcc *c = tcc_connect(&d);
	tcc_initialize(c, "\"budget\":{\"toolCalls\":2}");
	tc_assert_ok(tcc_call(c, "probe", probe_args(c, log, "b1", "0", 0)));
	tc_assert_ok(tcc_call(c, "probe", probe_args(c, log, "b2", "0", 0)));
	const struct json *r = tcc_call(c, "probe", probe_args(c, log, "b3", "0", 0));
	tc_assert_kind(r, "budget_exceeded");
	ck_assert_int_eq(tj_int(r, "error.code"), -32603);
	ck_assert_int_eq(tj_int(r, "error.data.attempts"), 0);
	ck_assert_uint_eq(count_events(&d, true, "b3"), 0);
	ck_assert_uint_eq(count_events(&d, true, NULL), 2);

	/* A per-call budget of 0 on a session without one. */
	struct tcc *e = tcc_connect(&d);
	r = tcc_request(e, "tools/call", call_params(e, "probe", probe_args(e, log, "b4", "0", 0), "\"budget\":0"));
	tc_assert_kind(r, "budget_exceeded");
	ck_assert_uint_eq(count_events(&d, true, "b4"), 0);

	/* Every attempt spends one: with 2, a transient failure stops after
	 * two attempts with the last error. */
	r = tcc_request(e, "tools/call", call_params(e, "probe", probe_args(e, log, "b5", "0", 75), "\"budget\":2"));
	tc_assert_kind(r, "transient");
	ck_assert_int_eq(tj_int(r, "error.data.attempts"), 2);
	ck_assert_uint_eq(count_events(&d, true, "b5"), 2);
	tcc_close(c);
	tcc_close(e);
	free(log);
	tcd_finish(&d);
}
END_TEST

/* --- circuit breaker -------------------------------------------------------- */

START_TEST(circuit_opens_and_probe_closes)
{
	struct tcd d;
	char *log = start_probes(&d, "{\"circuit\":{\"failures\":3,\"window_ms\":10000,\"open_ms\":1000}}");
	struct tcc *c = tcc_connect(&d);
	for (int i = 0; i < 3; i++)
		tc_assert_kind(tcc_call(c, "probe", probe_args(c, log, tcc_fmt(c, "f%d", i), "0", 1)),
			       "execution_error");
	const struct json *r = tcc_call(c, "probe", probe_args(c, log, "f3", "0", 0));
	tc_assert_kind(r, "circuit_open");
	ck_assert_int_eq(tj_int(r, "error.code"), -32603);
	ck_assert(tj_bool(r, "error.data.retryable"));
	int64_t after = tj_int(r, "error.data.retryAfterMs");
	ck_assert_int_gt(after, 0);
	ck_assert_int_le(after, 1000);
	ck_assert_uint_eq(count_events(&d, true, "f3"), 0);
	/* Other tools are not affected. */
	tc_assert_ok(tcc_call(c, "probe_idem", probe_args(c, log, "other", "0", 0)));

	/* The cooldown runs on the daemon's clock: as a client does, call
	 * again once the retryAfterMs it was told has passed, and again while
	 * still told to wait (a refused call never starts). */
	const char *probe;
	uint64_t deadline = tc_now_ms() + tc_wait_scaled(10000);
	for (;;) {
		tc_pause_ms((int)after);	/* as told: retryAfterMs */
		probe = send_call(c, "probe", probe_args(c, log, "p0", "0.5", 0), NULL);
		const struct json *refused = NULL;
		while (!count_events(&d, true, "p0") && !(refused = tcc_wait_id(c, probe, TC_POLL_MS)))
			ck_assert_msg(tc_now_ms() < deadline, "the probe neither started nor was refused");
		if (!refused)
			break;
		tc_assert_kind(refused, "circuit_open");
		after = tj_int(refused, "error.data.retryAfterMs");
		ck_assert_msg(tc_now_ms() < deadline, "the circuit stayed open past its cooldown");
	}
	/* One probe call goes through; while it runs, the others still wait. */
	wait_starts(&d, "p0", 1, 5000);
	r = tcc_call(c, "probe", probe_args(c, log, "p1", "0", 0));
	tc_assert_kind(r, "circuit_open");
	ck_assert_int_gt(tj_int(r, "error.data.retryAfterMs"), 0);
	tc_assert_ok(wait_response(c, probe, 5000));
	/* Closed again. */
	tc_assert_ok(tcc_call(c, "probe", probe_args(c, log, "p2", "0", 0)));
	tc_assert_kind(tcc_call(c, "probe", probe_args(c, log, "p3", "0", 1)), "execution_error");
	tc_assert_ok(tcc_call(c, "probe", probe_args(c, log, "p4", "0", 0)));
	tcc_close(c);
	free(log);
	tcd_finish(&d);
}
END_TEST

/* --- batches and sessions/cancel ---------------------------------------------- */

/* A batch of 40 calls runs within the caps (fanned out, never over) and is
 * answered with one array in input order. */
START_TEST(batch_forty_in_order)
{
	TC_SKIP_UNDER_VALGRIND("starting a child there takes longer than these calls run");
	struct tcd d;
	char *log = start_probes(&d, "{\"limits\":{\"session_concurrency\":8}}");
	struct tcc *c = tcc_connect(&d);
	char *q = tj_quote(log);
	struct buf b = {0};
	buf_putc(&b, '[');
	enum { N = 40 };
	for (int i = 0; i < N; i++) {
		/* Later elements finish first, so order is the daemon's doing. */
		buf_printf(&b, "%s{\"jsonrpc\":\"2.0\",\"id\":\"b%d\",\"method\":\"tools/call\","
			   "\"params\":{\"name\":\"probe\",\"arguments\":{\"log\":%s,\"tag\":\"b%d\","
			   "\"secs\":%s,\"status\":0}}}",
			   i ? "," : "", i, q, i, (N - i) % 4 == 0 ? "0.3" : (N - i) % 4 == 1 ? "0.2" :
			   (N - i) % 4 == 2 ? "0.1" : "0");
	}
	buf_putc(&b, ']');
	buf_putc(&b, '\0');
	tcc_send(c, buf_head(&b));
	buf_free(&b);

	struct json_doc *doc = tcc_recv(c, 20000);
	ck_assert_msg(doc != NULL, "no answer to the batch");
	const struct json *arr = json_doc_root(doc);
	ck_assert_int_eq(arr->type, JSON_ARRAY);
	ck_assert_uint_eq(arr->u.arr.n, N);
	for (int i = 0; i < N; i++) {
		const struct json *r = arr->u.arr.items[i];
		ck_assert_str_eq(tj_str(r, "id"), tcc_fmt(c, "b%d", i));
		tc_assert_ok(r);
		ck_assert_str_eq(tj_str(r, "result.structuredContent.stdout"), tcc_fmt(c, "ran b%d\n", i));
	}
	unsigned overlap = max_overlap(&d);
	ck_assert_msg(overlap >= 2 && overlap <= 8, "%u batch members ran at once (cap 8)", overlap);
	ck_assert_uint_eq(count_events(&d, true, NULL), N);
	free(q);
	tcc_close(c);
	free(log);
	tcd_finish(&d);
}
END_TEST

/* sessions/cancel answers every call in flight of the session (running and
 * queued) with "cancelled" and says how many; the programs stop. */
START_TEST(sessions_cancel_all_calls)
{
	struct tcd d;
	char *log = start_probes(&d, "{\"limits\":{\"session_concurrency\":2}}");
	struct tcc *a = tcc_connect(&d);
	const char *sid = tj_str(tcc_initialize(a, NULL), "sessionId");
	ck_assert_ptr_nonnull(sid);
	const char *ids[3];
	for (int i = 0; i < 3; i++)
		ids[i] = send_call(a, "probe", probe_args(a, log, tcc_fmt(a, "x%d", i), "5", 0), NULL);
	wait_starts(&d, NULL, 2, 5000);

	struct tcc *b = tcc_connect(&d);
	char *qs = tj_quote(sid);
	tcc_initialize(b, tcc_fmt(b, "\"sessionId\":%s", qs));
	const struct json *r = tcc_request(b, "sessions/cancel", tcc_fmt(b, "{\"sessionId\":%s}", qs));
	tc_assert_ok(r);
	ck_assert_int_eq(tj_int(r, "result.cancelled"), 3);
	for (int i = 0; i < 3; i++) {
		r = wait_response(a, ids[i], 3000);
		tc_assert_kind(r, "cancelled");
		ck_assert_int_eq(tj_int(r, "error.code"), -32603);
	}
	/* The queued one never started, and never will: once nothing runs
	 * or waits, the daemon counts the two attempts alone. The running
	 * ones were stopped. */
	ck_assert(tc_wait_until(({
		r = tcc_request(b, "admin/stats", NULL);
		tj_int(r, "result.running") == 0 && tj_int(r, "result.queued") == 0;
	}), tc_wait_scaled(5000)));
	ck_assert_int_eq(tj_int(r, "result.attempts"), 2);
	ck_assert_uint_eq(count_events(&d, true, NULL), 2);
	ck_assert_uint_eq(count_events(&d, false, NULL), 0);
	/* Nothing left to cancel. */
	r = tcc_request(b, "sessions/cancel", tcc_fmt(b, "{\"sessionId\":%s}", qs));
	ck_assert_int_eq(tj_int(r, "result.cancelled"), 0);
	free(qs);
	tcc_close(a);
	tcc_close(b);
	free(log);
	tcd_finish(&d);
}
END_TEST

/* Waits until the daemon holds exactly n calls in flight. */
static void wait_in_flight(struct tcd *d, int64_t n, int timeout_ms)
{
	struct tcc *s = tcc_connect(d);
	ck_assert_msg(tc_wait_until(tj_int(tcc_request(s, "admin/stats", NULL), "result.inFlight") == n,
				    tc_wait_scaled(timeout_ms)),
		      "the daemon did not come to %lld calls in flight", (long long)n);
	tcc_close(s);
}

/* A batch of a slow probe (id A), a ping and a stat, each id prefixed. */
static const char *slow_batch(struct tcc *c, const char *log, const char *tool, const char *pfx)
{
	return tcc_fmt(c, "["
		"{\"jsonrpc\":\"2.0\",\"id\":\"%sA\",\"method\":\"tools/call\",\"params\":%s},"
		"{\"jsonrpc\":\"2.0\",\"id\":\"%sB\",\"method\":\"ping\"},"
		"{\"jsonrpc\":\"2.0\",\"id\":\"%sD\",\"method\":\"tools/call\",\"params\":"
		"{\"name\":\"stat\",\"arguments\":{\"path\":\".\"}}}]",
		pfx, call_params(c, tool, probe_args(c, log, pfx, "5", 0), NULL), pfx, pfx);
}

/* Asserts the batch's next answer: an array holding the answers of the
 * ids in ids (in that order), the ping's and the stat's successes. */
static const struct json *wait_batch(struct tcc *c, const char *const *ids, size_t n)
{
	struct json_doc *doc = tcc_recv(c, 5000);
	ck_assert_msg(doc != NULL, "the batch was never answered");
	const struct json *arr = json_doc_root(doc);
	ck_assert_msg(arr->type == JSON_ARRAY, "not the batch's array: %s", tcc_raw(c, arr));
	ck_assert_msg(arr->u.arr.n == n, "%zu answers in the batch's array: %s", arr->u.arr.n, tcc_raw(c, arr));
	for (size_t i = 0; i < n; i++) {
		ck_assert_str_eq(tj_str(arr->u.arr.items[i], "id"), ids[i]);
		if (ids[i][strlen(ids[i]) - 1] != 'A')
			tc_assert_ok(arr->u.arr.items[i]);
	}
	return arr;
}

/* A batch member that ends after its siblings were answered completes the
 * batch, however it ends: cancelled by a later notification (no answer
 * for it in the array), cancelled with its session, or timed out (their
 * envelopes in it). */
START_TEST(batch_member_ended_later)
{
	struct tcd d;
	char *log = start_probes(&d, "{}");
	struct tcc *c = tcc_connect(&d);
	tcc_initialize(c, NULL);

	tcc_send(c, slow_batch(c, log, "probe", "n"));
	wait_starts(&d, "n", 1, 5000);
	wait_in_flight(&d, 1, 5000);	/* the stat is done, the probe runs */
	tcc_send(c, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\",\"params\":{\"requestId\":\"nA\"}}");
	wait_batch(c, (const char *const[]){ "nB", "nD" }, 2);
	wait_in_flight(&d, 0, 5000);
	/* Nothing comes for the cancelled member, and its id is free. */
	const struct json *r = tcc_wait_id(c, "\"nA\"", 300);
	ck_assert_msg(r == NULL, "the cancelled member was answered: %s", tcc_raw(c, r));
	tcc_send(c, "{\"jsonrpc\":\"2.0\",\"id\":\"nA\",\"method\":\"ping\"}");
	tc_assert_ok(tcc_wait_id(c, "\"nA\"", 5000));

	/* The same for a tools/dispatch member, whose calls are cancelled. */
	tcc_send(c, tcc_fmt(c, "[{\"jsonrpc\":\"2.0\",\"id\":\"lA\",\"method\":\"tools/dispatch\",\"params\":"
			    "{\"format\":\"anthropic\",\"calls\":[{\"type\":\"tool_use\",\"id\":\"tu1\","
			    "\"name\":\"probe\",\"input\":%s}]}},"
			    "{\"jsonrpc\":\"2.0\",\"id\":\"lB\",\"method\":\"ping\"}]",
			    probe_args(c, log, "l", "5", 0)));
	wait_starts(&d, "l", 1, 5000);
	tcc_send(c, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\",\"params\":{\"requestId\":\"lA\"}}");
	wait_batch(c, (const char *const[]){ "lB" }, 1);
	wait_in_flight(&d, 0, 5000);

	/* Every call of a batch cancelled later: nothing at all is sent. */
	tcc_send(c, tcc_fmt(c, "[{\"jsonrpc\":\"2.0\",\"id\":\"eA\",\"method\":\"tools/call\",\"params\":%s}]",
			    call_params(c, "probe", probe_args(c, log, "e", "5", 0), NULL)));
	wait_starts(&d, "e", 1, 5000);
	tcc_send(c, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\",\"params\":{\"requestId\":\"eA\"}}");
	wait_in_flight(&d, 0, 5000);
	ck_assert_msg(tcc_quiet(c, 300), "a batch of cancelled calls got an answer: %s", tcc_recv_line(c, 0, NULL));

	/* sessions/cancel: the member's "cancelled" envelope is in the array,
	 * which comes before the cancel's own answer. */
	tcc_send(c, slow_batch(c, log, "probe", "s"));
	wait_starts(&d, "s", 1, 5000);
	wait_in_flight(&d, 1, 5000);
	tcc_send(c, "{\"jsonrpc\":\"2.0\",\"id\":\"sc\",\"method\":\"sessions/cancel\"}");
	r = wait_batch(c, (const char *const[]){ "sA", "sB", "sD" }, 3);
	tc_assert_kind(tj(r, "0"), "cancelled");
	r = tcc_wait_id(c, "\"sc\"", 5000);
	tc_assert_ok(r);
	ck_assert_int_eq(tj_int(r, "result.cancelled"), 1);

	/* A member past its time limit: its "timeout" envelope is in it. */
	tcc_send(c, slow_batch(c, log, "probe_short", "t"));
	r = wait_batch(c, (const char *const[]){ "tA", "tB", "tD" }, 3);
	tc_assert_kind(tj(r, "0"), "timeout");
	wait_in_flight(&d, 0, 5000);

	tcc_close(c);
	free(log);
	tcd_finish(&d);
}
END_TEST

/* A path the workspace check refuses runs nothing: as a value the schema
 * refuses, it is no attempt (attempts 0) and spends no budget; a file the
 * tool looked for and did not find is an attempt. */
START_TEST(path_refusal_spends_no_budget)
{
	struct tcd d;
	tcd_start(&d, NULL);
	tcd_put(&d, "a.txt", "hi");
	struct tcc *c = tcc_connect(&d);
	ck_assert_int_eq(tj_int(tcc_initialize(c, "\"budget\":{\"toolCalls\":2}"), "budgetLeft"), 2);
	const struct json *r = tcc_call(c, "read_file", "{\"path\":\"../../etc/passwd\"}");
	tc_assert_kind(r, "permission_denied");
	ck_assert_int_eq(tj_int(r, "error.data.attempts"), 0);
	r = tcc_call(c, "write_file", "{\"path\":\"../out.txt\",\"content\":\"x\"}");
	tc_assert_kind(r, "permission_denied");
	ck_assert_int_eq(tj_int(r, "error.data.attempts"), 0);
	r = tcc_call(c, "read_file", "{\"path\":\"missing.txt\"}");
	tc_assert_kind(r, "execution_error");
	ck_assert_int_eq(tj_int(r, "error.data.attempts"), 1);
	/* One call of the two is left. */
	tc_assert_ok(tcc_call(c, "read_file", "{\"path\":\"a.txt\"}"));
	tc_assert_kind(tcc_call(c, "read_file", "{\"path\":\"a.txt\"}"), "budget_exceeded");
	tcc_close(c);
	tcd_finish(&d);
}
END_TEST

/* admin/stats and admin/metrics count attempts as the answers do: a call
 * refused before the tool acted (a path outside the workspace, a value the
 * tool refuses as an option) is a call but no attempt; a call that runs is
 * one attempt; a transient call retried counts each of its attempts. */
START_TEST(stats_attempts_as_answers_say)
{
	struct tcd d;
	char *log = start_probes(&d, NULL);
	struct tcc *c = tcc_connect(&d);
	const struct json *st = tj(tcc_request(c, "admin/stats", NULL), "result");
	int64_t calls = tj_int(st, "calls"), attempts = tj_int(st, "attempts"), retries = tj_int(st, "retries");

	const struct json *r = tcc_call(c, "read_file", "{\"path\":\"../../etc/passwd\"}");
	tc_assert_kind(r, "permission_denied");
	ck_assert_int_eq(tj_int(r, "error.data.attempts"), 0);
	r = tcc_call(c, "probe", probe_args(c, log, "-x", "0", 0));
	tc_assert_kind(r, "validation_error");
	ck_assert_int_eq(tj_int(r, "error.data.attempts"), 0);
	st = tj(tcc_request(c, "admin/stats", NULL), "result");
	ck_assert_int_eq(tj_int(st, "calls"), calls + 2);
	ck_assert_int_eq(tj_int(st, "attempts"), attempts);
	ck_assert_uint_eq(count_events(&d, true, NULL), 0);

	r = tcc_call(c, "probe", probe_args(c, log, "once", "0", 0));
	tc_assert_ok(r);
	ck_assert_int_eq(tj_int(r, "result._meta.toolcalld/attempts"), 1);
	st = tj(tcc_request(c, "admin/stats", NULL), "result");
	ck_assert_int_eq(tj_int(st, "calls"), calls + 3);
	ck_assert_int_eq(tj_int(st, "attempts"), attempts + 1);

	r = tcc_call(c, "probe", probe_args(c, log, "flaky", "0", 75));
	tc_assert_kind(r, "transient");
	int64_t tries = tj_int(r, "error.data.attempts");
	ck_assert_int_eq(tries, 3);
	st = tj(tcc_request(c, "admin/stats", NULL), "result");
	ck_assert_int_eq(tj_int(st, "calls"), calls + 4);
	ck_assert_int_eq(tj_int(st, "attempts"), attempts + 1 + tries);
	ck_assert_int_eq(tj_int(st, "retries"), retries + tries - 1);

	/* The metric is the same counter. */
	const char *metrics = tj_str(tcc_request(c, "admin/metrics", NULL), "result.text");
	char *line = xasprintf("\ntoolcalld_attempts_total %lld\n", (long long)(attempts + 1 + tries));
	ck_assert_msg(metrics && strstr(metrics, line), "wanted%s in %s", line, metrics);
	free(line);
	tcc_close(c);
	free(log);
	tcd_finish(&d);
}
END_TEST

/* --- every failed call names itself ------------------------------------------ */

/* Asserts the envelope of a failed call (CONTRACT §4): kind, retryable
 * (a boolean), attempts and durationMs (integers >= 0, attempts as want
 * when want >= 0), callId (a call id) and tool (the tool called). */
static void assert_envelope(const struct json *r, const char *kind, const char *tool, int want_attempts)
{
	_cleanup_free_ char *text = tj_text(r);
	const struct json *data = tj(r, "error.data");
	ck_assert_msg(data && data->type == JSON_OBJECT, "no error.data: %s", text);
	ck_assert_msg(str_eq(tj_str(data, "kind"), kind), "kind %s wanted: %s", kind, text);
	const struct json *v = tj(data, "retryable");
	ck_assert_msg(v && v->type == JSON_BOOL, "retryable: %s", text);
	v = tj(data, "attempts");
	ck_assert_msg(v && json_is_int(v) && tj_int(data, "attempts") >= 0, "attempts: %s", text);
	if (want_attempts >= 0)
		ck_assert_msg(tj_int(data, "attempts") == want_attempts, "attempts %d wanted: %s", want_attempts, text);
	v = tj(data, "durationMs");
	ck_assert_msg(v && json_is_int(v) && tj_int(data, "durationMs") >= 0, "durationMs: %s", text);
	v = tj(data, "callId");
	ck_assert_msg(v && v->type == JSON_STRING && strncmp(v->u.str.s, "c-", 2) == 0, "callId: %s", text);
	ck_assert_msg(str_eq(tj_str(data, "tool"), tool), "tool %s wanted: %s", tool, text);
}

/*
 * Each way a call fails that a client can reach carries the six fields of
 * the call it stands for: a tool that does not exist, arguments the schema
 * refuses, a path outside the workspace, no budget left, a full queue, an
 * answer a batch drops past limits.max_output_bytes, a cancel, a timeout,
 * and the daemon's stop.
 */
START_TEST(every_failed_call_names_itself)
{
	struct tcd d;
	char *log = start_probes(&d, "{\"grace_ms\":300,\"limits\":{\"session_concurrency\":1,\"queue_max\":1,"
				     "\"max_output_bytes\":65536}}");
	/* 200 lines of 100 bytes (an answer holds them twice, numbered):
	 * one answer of it fits in 65536 bytes, two do not. */
	tcd_put_filler(&d, "big.txt", 20000, 100);
	struct tcc *c = tcc_connect(&d);

	assert_envelope(tcc_call(c, "red_file", "{}"), "not_found", "red_file", 0);
	assert_envelope(tcc_call(c, "read_file", "{\"path\":1}"), "validation_error", "read_file", 0);
	assert_envelope(tcc_call(c, "read_file", "{\"path\":\"../../etc/passwd\"}"), "permission_denied", "read_file",
			0);
	assert_envelope(tcc_call(c, "read_file", "{\"path\":\"missing.txt\"}"), "execution_error", "read_file", 1);
	assert_envelope(tcc_request(c, "tools/call", call_params(c, "probe", probe_args(c, log, "b", "0", 0),
								   "\"budget\":0")),
			"budget_exceeded", "probe", 0);

	/* One runs, one waits, the third finds the queue full. */
	const char *run = send_call(c, "probe", probe_args(c, log, "run", "5", 0), NULL);
	const char *queued = send_call(c, "probe", probe_args(c, log, "queued", "5", 0), NULL);
	const char *full = send_call(c, "probe", probe_args(c, log, "full", "5", 0), NULL);
	assert_envelope(wait_response(c, full, 5000), "overloaded", "probe", 0);
	wait_starts(&d, "run", 1, 5000);
	/* Cancelled: the running one (its attempt ran) and the queued one
	 * (none did). */
	const char *sc = tcc_fmt(c, "%lld", (long long)tcc_send_request(c, "sessions/cancel", "{}"));
	ck_assert_int_eq(tj_int(wait_response(c, sc, 5000), "result.cancelled"), 2);
	assert_envelope(wait_response(c, run, 5000), "cancelled", "probe", 1);
	assert_envelope(wait_response(c, queued, 5000), "cancelled", "probe", 0);

	/* Timed out (300 ms, not idempotent: one attempt). */
	assert_envelope(tcc_call(c, "probe_short", probe_args(c, log, "slow", "3", 0)), "timeout", "probe_short", 1);

	/* A batch whose second answer goes past the limit. */
	const char *call = "{\"jsonrpc\":\"2.0\",\"id\":%d,\"method\":\"tools/call\","
			   "\"params\":{\"name\":\"read_file\",\"arguments\":{\"path\":\"big.txt\"}}}";
	struct tcc *b = tcc_connect(&d);
	tcc_send(b, tcc_fmt(b, "[%s,%s]", tcc_fmt(b, call, 1), tcc_fmt(b, call, 2)));
	_cleanup_(json_doc_unrefp) struct json_doc *doc = tcc_recv(b, TCC_TIMEOUT_MS);
	ck_assert_ptr_nonnull(doc);
	const struct json *arr = json_doc_root(doc);
	ck_assert_int_eq(arr->type, JSON_ARRAY);
	ck_assert_int_eq(tj_len(arr, ""), 2);
	int dropped = 0;
	for (int i = 0; i < 2; i++) {
		const struct json *e = tj(arr, tcc_fmt(b, "%d", i));
		if (tj_has(e, "error")) {
			assert_envelope(e, "execution_error", "read_file", 1);
			dropped++;
		}
	}
	ck_assert_int_eq(dropped, 1);

	/* Cancelled by the daemon's stop. */
	const char *last = send_call(b, "probe", probe_args(b, log, "last", "30", 0), NULL);
	wait_starts(&d, "last", 1, 5000);
	tcd_kill(&d, SIGTERM);
	const struct json *r = wait_response(b, last, TCC_TIMEOUT_MS);
	assert_envelope(r, "cancelled", "probe", 1);
	ck_assert(tj_bool(r, "error.data.restart"));
	ck_assert_int_eq(tcd_wait_exit(&d, 10000), 0);
	tcc_close(b);
	tcc_close(c);
	free(log);
	tcd_free(&d);
}
END_TEST

static Suite *dispatch_suite(void)
{
	Suite *s = suite_create("integ_dispatch");
	TCase *tc = tcase_create("idempotency");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, idem_twenty_callers_one_run);
	tcase_add_test(tc, idem_conflict_and_key_order);
	tcase_add_test(tc, idem_disconnect_then_replay);
	tcase_add_test(tc, idem_cancel_one_joined_caller);
	tcase_add_test(tc, idem_cancel_last_caller_stops_run);
	suite_add_tcase(s, tc);

	tc = tcase_create("concurrency");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, session_cap_four);
	tcase_add_test(tc, global_cap);
	tcase_add_test(tc, queue_max_overloaded);
	tcase_add_test(tc, batch_forty_in_order);
	tcase_add_test(tc, sessions_cancel_all_calls);
	tcase_add_test(tc, batch_member_ended_later);
	tcase_add_test(tc, every_failed_call_names_itself);
	tcase_add_test(tc, stats_attempts_as_answers_say);
	suite_add_tcase(s, tc);

	tc = tcase_create("failures");
	/* Asserts wall-clock gaps and timeouts of a few hundred ms: make
	 * valgrind, ten times slower, leaves these out (CK_EXCLUDE_TAGS). */
	tcase_set_tags(tc, "timing");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, retry_transient_backoff);
	tcase_add_test(tc, timeout_retry_only_idempotent);
	tcase_add_test(tc, budget_session_and_call);
	tcase_add_test(tc, path_refusal_spends_no_budget);
	tcase_add_test(tc, circuit_opens_and_probe_closes);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return run_suite(dispatch_suite());
}
