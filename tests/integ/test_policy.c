/* SPDX-License-Identifier: MIT */
/*
 * Policy, confirmation, events and audit, black-box through the socket of
 * the real daemon: the confirmation flow (no approver, allow, deny,
 * always_allow, timeout, racing approvers, waiting for an approver),
 * trusted workspaces and per-tool denial, the event stream (types, payloads,
 * a subscriber that stops reading), the audit log, and the walls between
 * peers of different uids.
 */
#include <check.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tests/integ/harness.h"
#include "tests/unit/check_main.h"

/* Everything runs at once except what a test sets itself. */
#define ALL_AUTO "{\"confirmation\":{\"default\":{\"write\":\"auto\",\"execute\":\"auto\"}}}"

/* --- helpers ------------------------------------------------------------- */

/* The params of the next notifications/event, NULL on timeout. */
static const struct json *next_event(struct tcc *c, int timeout_ms)
{
	const struct json *n = tcc_wait_notification(c, "notifications/event", timeout_ms);
	return n ? json_get(n, "params") : NULL;
}

/* Collects events until none comes for quiet_ms (at most 64). */
static size_t drain_events(struct tcc *c, const struct json **out, size_t max, int quiet_ms)
{
	size_t n = 0;
	const struct json *e;
	while ((e = next_event(c, quiet_ms))) {
		if (n < max)
			out[n++] = e;
	}
	return n;
}

/* The event of a type for callId among evs, or NULL. */
static const struct json *find_event(const struct json **evs, size_t n, const char *type, const char *call_id)
{
	for (size_t i = 0; i < n; i++)
		if (str_eq(tj_str(evs[i], "type"), type) && (!call_id || str_eq(tj_str(evs[i], "callId"), call_id)))
			return evs[i];
	return NULL;
}

static const char *call_id_of(const struct json *r)
{
	const char *id = tj_str(r, "result._meta.toolcalld/callId");
	return id ? id : tj_str(r, "error.data.callId");
}

/* A connection subscribed to types (a JSON array text, NULL: all). */
static struct tcc *subscriber(struct tcd *d, const char *types)
{
	struct tcc *c = tcc_connect(d);
	const struct json *r = tcc_request(c, "events/subscribe",
					   types ? tcc_fmt(c, "{\"types\":%s}", types) : "{}");
	tc_assert_ok(r);
	return c;
}

/* An approver: subscribed to the confirmation events of its uid. */
static struct tcc *approver(struct tcd *d)
{
	return subscriber(d, "[\"tool.confirmation_requested\",\"tool.confirmation_resolved\"]");
}

static const char *send_call(struct tcc *c, const char *tool, const char *args)
{
	int64_t id = tcc_send_request(c, "tools/call", tcc_fmt(c, "{\"name\":\"%s\",\"arguments\":%s}", tool, args));
	return tcc_fmt(c, "%lld", (long long)id);
}

static const struct json *wait_response(struct tcc *c, const char *id, int timeout_ms)
{
	const struct json *r = tcc_wait_id(c, id, timeout_ms);
	ck_assert_msg(r != NULL, "no response to request %s within %d ms", id, timeout_ms);
	return r;
}

static const struct json *resolve(struct tcc *c, const char *request_id, const char *decision)
{
	char *q = tj_quote(request_id);
	const struct json *r = tcc_request(c, "confirmations/resolve",
					   tcc_fmt(c, "{\"requestId\":%s,\"decision\":\"%s\"}", q, decision));
	free(q);
	return r;
}

static bool ws_exists(const struct tcd *d, const char *rel)
{
	char *p = tcd_ws_path(d, rel);
	bool ok = access(p, F_OK) == 0;
	free(p);
	return ok;
}

/* Declares a command tool running `sh -c "exit CODE"` (side effect read). */
static void write_exit_tool(struct tcd *d, const char *name)
{
	char *file = xasprintf("%s.json", name);
	char *json = xasprintf(
		"{\"name\":\"%s\",\"kind\":\"command\",\"description\":\"Exits with the status given\","
		"\"argv\":[\"/bin/sh\",\"-c\",\"exit {{code}}\"],\"side_effects\":\"read\","
		"\"input_schema\":{\"type\":\"object\",\"properties\":{\"code\":{\"type\":\"integer\","
		"\"minimum\":0,\"maximum\":255}},\"required\":[\"code\"],\"additionalProperties\":false}}",
		name);
	tcd_write_tool(d, file, json);
	free(json);
	free(file);
}

/* --- confirmation --------------------------------------------------------- */

/* Default policy, nobody to ask: refused at once, saying how to approve. */
START_TEST(no_approver_denied_at_once)
{
	struct tcd d;
	tcd_start(&d, NULL);
	struct tcc *c = tcc_connect(&d);
	/* At once: within tcc_call's wait, while one waiting for an approver
	 * would wait the confirmation timeout (300 s) and end in
	 * confirmation_timeout. */
	const struct json *r = tcc_call(c, "write_file", "{\"path\":\"a.txt\",\"content\":\"x\"}");
	tc_assert_kind(r, "user_denied");
	ck_assert_int_eq(tj_int(r, "error.code"), -32603);
	ck_assert(!tj_bool(r, "error.data.retryable"));
	const char *msg = tj_str(r, "error.message");
	ck_assert_ptr_nonnull(msg);
	ck_assert_msg(strstr(msg, "confirmations/resolve") || strstr(msg, "toolcallctl approve"),
		      "the message does not say how to approve: %s", msg);
	ck_assert(!ws_exists(&d, "a.txt"));
	/* Reads run without asking. */
	tc_assert_ok(tcc_call(c, "list_dir", "{}"));
	tcc_close(c);
	tcd_finish(&d);
}
END_TEST

/* The request carries tool, side effect, input, files and an id; "allow"
 * lets the write happen; every approver sees the resolution. */
START_TEST(confirm_allow)
{
	struct tcd d;
	tcd_start(&d, NULL);
	struct tcc *ap = approver(&d);
	struct tcc *c = tcc_connect(&d);
	const char *sid = tj_str(tcc_initialize(c, NULL), "sessionId");
	const char *id = send_call(c, "write_file",
				   "{\"path\":\"notes/./a.txt\",\"content\":\"hello approver\",\"create_dirs\":true}");
	const struct json *ev = tcc_wait_event(ap, "tool.confirmation_requested", 5000);
	ck_assert_msg(ev != NULL, "no tool.confirmation_requested event");
	ck_assert_str_eq(tj_str(ev, "tool"), "write_file");
	ck_assert_str_eq(tj_str(ev, "sideEffect"), "write");
	ck_assert_str_eq(tj_str(ev, "sessionId"), sid);
	ck_assert_ptr_nonnull(tj_str(ev, "callId"));
	const char *input = tj_str(ev, "input");
	ck_assert_ptr_nonnull(input);
	ck_assert_ptr_nonnull(strstr(input, "hello approver"));
	ck_assert_ptr_nonnull(strstr(input, "a.txt"));
	ck_assert_int_eq(tj_len(ev, "files"), 1);
	ck_assert_str_eq(tj_str(ev, "files.0"), "notes/a.txt");
	const char *req = tj_str(ev, "requestId");
	ck_assert_ptr_nonnull(req);
	/* Not run while waiting. */
	ck_assert(tcc_quiet(c, 200));
	ck_assert(!ws_exists(&d, "notes/a.txt"));

	const struct json *r = resolve(ap, req, "allow");
	tc_assert_ok(r);
	ck_assert(tj_bool(r, "result.accepted"));
	ck_assert_str_eq(tj_str(r, "result.decision"), "allow");
	r = wait_response(c, id, 5000);
	tc_assert_ok(r);
	ck_assert_str_eq(tj_str(ev, "callId"), call_id_of(r));
	char *content = tcd_read(&d, "notes/a.txt", NULL);
	ck_assert_str_eq(content, "hello approver");
	free(content);
	ev = tcc_wait_event(ap, "tool.confirmation_resolved", 2000);
	ck_assert_ptr_nonnull(ev);
	ck_assert_str_eq(tj_str(ev, "requestId"), req);
	ck_assert_str_eq(tj_str(ev, "decision"), "allow");
	tcc_close(c);
	tcc_close(ap);
	tcd_finish(&d);
}
END_TEST

START_TEST(confirm_deny)
{
	struct tcd d;
	tcd_start(&d, NULL);
	struct tcc *ap = approver(&d);
	struct tcc *c = tcc_connect(&d);
	const char *id = send_call(c, "write_file", "{\"path\":\"b.txt\",\"content\":\"no\"}");
	const struct json *ev = tcc_wait_event(ap, "tool.confirmation_requested", 5000);
	ck_assert_ptr_nonnull(ev);
	const struct json *r = resolve(ap, tj_str(ev, "requestId"), "deny");
	ck_assert(tj_bool(r, "result.accepted"));
	r = wait_response(c, id, 5000);
	tc_assert_kind(r, "user_denied");
	ck_assert_int_eq(tj_int(r, "error.code"), -32603);
	ck_assert(!ws_exists(&d, "b.txt"));
	/* An unknown request id is refused. */
	r = resolve(ap, "cf-no-such-request", "allow");
	ck_assert_ptr_nonnull(tj(r, "error"));
	tcc_close(c);
	tcc_close(ap);
	tcd_finish(&d);
}
END_TEST

/* The only approver leaves without answering: the call fails at once with
 * user_denied, as one finding no approver does, not after the timeout. */
START_TEST(confirm_approver_leaves)
{
	struct tcd d;
	tcd_start(&d, NULL);
	struct tcc *ap = approver(&d);
	struct tcc *c = tcc_connect(&d);
	const char *id = send_call(c, "write_file", "{\"path\":\"c.txt\",\"content\":\"no\"}");
	ck_assert_ptr_nonnull(tcc_wait_event(ap, "tool.confirmation_requested", 5000));
	tcc_close(ap);
	/* Denied for the approver's leaving (not the 300 s timeout). */
	const struct json *r = wait_response(c, id, 5000);
	tc_assert_kind(r, "user_denied");
	ck_assert_msg(strstr(tj_str(r, "error.message"), "approver left"), "%s", tj_str(r, "error.message"));
	ck_assert(!ws_exists(&d, "c.txt"));
	tcc_close(c);
	tcd_finish(&d);
}
END_TEST

/* always_allow: the rest of the session's calls of that tool run without a
 * prompt (on any connection of the session); other sessions still ask. */
START_TEST(confirm_always_allow)
{
	struct tcd d;
	tcd_start(&d, NULL);
	struct tcc *ap = approver(&d);
	struct tcc *c = tcc_connect(&d);
	const char *sid = tj_str(tcc_initialize(c, NULL), "sessionId");
	const char *id = send_call(c, "write_file", "{\"path\":\"c1.txt\",\"content\":\"1\"}");
	const struct json *ev = tcc_wait_event(ap, "tool.confirmation_requested", 5000);
	ck_assert_ptr_nonnull(ev);
	const struct json *r = resolve(ap, tj_str(ev, "requestId"), "always_allow");
	ck_assert(tj_bool(r, "result.accepted"));
	ck_assert_str_eq(tj_str(r, "result.decision"), "always_allow");
	tc_assert_ok(wait_response(c, id, 5000));
	ck_assert(tcc_wait_event(ap, "tool.confirmation_resolved", 2000) != NULL);

	tc_assert_ok(tcc_call(c, "write_file", "{\"path\":\"c2.txt\",\"content\":\"2\"}"));
	struct tcc *c2 = tcc_connect(&d);
	char *q = tj_quote(sid);
	tcc_initialize(c2, tcc_fmt(c2, "\"sessionId\":%s", q));
	free(q);
	tc_assert_ok(tcc_call(c2, "write_file", "{\"path\":\"c3.txt\",\"content\":\"3\"}"));
	ck_assert(ws_exists(&d, "c2.txt") && ws_exists(&d, "c3.txt"));
	ck_assert_msg(tcc_wait_event(ap, "tool.confirmation_requested", 300) == NULL,
		      "always_allow did not hold for the rest of the session");

	/* Another session is asked again. */
	struct tcc *other = tcc_connect(&d);
	id = send_call(other, "write_file", "{\"path\":\"c4.txt\",\"content\":\"4\"}");
	ev = tcc_wait_event(ap, "tool.confirmation_requested", 5000);
	ck_assert_msg(ev != NULL, "always_allow leaked into another session");
	resolve(ap, tj_str(ev, "requestId"), "deny");
	tc_assert_kind(wait_response(other, id, 5000), "user_denied");
	/* And another tool of the same session is asked too. */
	id = send_call(c, "patch_file", "{\"path\":\"c1.txt\",\"old\":\"1\",\"new\":\"one\"}");
	ev = tcc_wait_event(ap, "tool.confirmation_requested", 5000);
	ck_assert_ptr_nonnull(ev);
	ck_assert_str_eq(tj_str(ev, "tool"), "patch_file");
	resolve(ap, tj_str(ev, "requestId"), "deny");
	tc_assert_kind(wait_response(c, id, 5000), "user_denied");
	tcc_close(c);
	tcc_close(c2);
	tcc_close(other);
	tcc_close(ap);
	tcd_finish(&d);
}
END_TEST

START_TEST(confirm_timeout)
{
	struct tcd d;
	tcd_start(&d, "{\"confirmation\":{\"timeout_ms\":1000}}");
	struct tcc *ap = approver(&d);
	struct tcc *c = tcc_connect(&d);
	uint64_t t0 = tc_now_ms();
	const char *id = send_call(c, "write_file", "{\"path\":\"t.txt\",\"content\":\"late\"}");
	const struct json *ev = tcc_wait_event(ap, "tool.confirmation_requested", 5000);
	ck_assert_ptr_nonnull(ev);
	const char *req = tj_str(ev, "requestId");
	const struct json *r = wait_response(c, id, 5000);
	uint64_t took = tc_now_ms() - t0;
	tc_assert_kind(r, "confirmation_timeout");
	ck_assert_int_eq(tj_int(r, "error.code"), -32603);
	ck_assert_msg(took >= 950 && took < 3000, "a 1000 ms confirmation timeout took %llu ms",
		      (unsigned long long)took);
	ck_assert(!ws_exists(&d, "t.txt"));
	ev = tcc_wait_event(ap, "tool.confirmation_resolved", 2000);
	ck_assert_ptr_nonnull(ev);
	ck_assert_str_eq(tj_str(ev, "requestId"), req);
	/* Too late to answer: the first decision (the timeout) stands. */
	r = resolve(ap, req, "allow");
	tc_assert_ok(r);
	ck_assert(!tj_bool(r, "result.accepted"));
	ck_assert_str_ne(tj_str(r, "result.decision"), "allow");
	ck_assert(!ws_exists(&d, "t.txt"));
	tcc_close(c);
	tcc_close(ap);
	tcd_finish(&d);
}
END_TEST

/* Two approvers answer at once: one wins, the other is told the decision in
 * force; both see the resolution. */
START_TEST(confirm_approvers_race)
{
	struct tcd d;
	tcd_start(&d, NULL);
	struct tcc *a1 = approver(&d), *a2 = approver(&d);
	struct tcc *c = tcc_connect(&d);
	const char *id = send_call(c, "write_file", "{\"path\":\"race.txt\",\"content\":\"r\"}");
	const struct json *e1 = tcc_wait_event(a1, "tool.confirmation_requested", 5000);
	const struct json *e2 = tcc_wait_event(a2, "tool.confirmation_requested", 5000);
	ck_assert(e1 && e2);
	const char *req = tj_str(e1, "requestId");
	ck_assert_str_eq(tj_str(e2, "requestId"), req);

	char *q = tj_quote(req);
	int64_t n1 = tcc_send_request(a1, "confirmations/resolve",
				      tcc_fmt(a1, "{\"requestId\":%s,\"decision\":\"allow\"}", q));
	int64_t n2 = tcc_send_request(a2, "confirmations/resolve",
				      tcc_fmt(a2, "{\"requestId\":%s,\"decision\":\"deny\"}", q));
	free(q);
	const struct json *r1 = wait_response(a1, tcc_fmt(a1, "%lld", (long long)n1), 5000);
	const struct json *r2 = wait_response(a2, tcc_fmt(a2, "%lld", (long long)n2), 5000);
	tc_assert_ok(r1);
	tc_assert_ok(r2);
	bool won1 = tj_bool(r1, "result.accepted"), won2 = tj_bool(r2, "result.accepted");
	ck_assert_msg(won1 != won2, "exactly one approver must win (got %d and %d)", won1, won2);
	const char *winner = won1 ? "allow" : "deny";
	ck_assert_str_eq(tj_str(r1, "result.decision"), winner);
	ck_assert_str_eq(tj_str(r2, "result.decision"), winner);

	const struct json *r = wait_response(c, id, 5000);
	if (won1) {
		tc_assert_ok(r);
		ck_assert(ws_exists(&d, "race.txt"));
	} else {
		tc_assert_kind(r, "user_denied");
		ck_assert(!ws_exists(&d, "race.txt"));
	}
	const struct json *s1 = tcc_wait_event(a1, "tool.confirmation_resolved", 2000);
	const struct json *s2 = tcc_wait_event(a2, "tool.confirmation_resolved", 2000);
	ck_assert(s1 && s2);
	ck_assert_str_eq(tj_str(s1, "decision"), winner);
	ck_assert_str_eq(tj_str(s2, "decision"), winner);
	ck_assert_str_eq(tj_str(s1, "requestId"), req);
	tcc_close(c);
	tcc_close(a1);
	tcc_close(a2);
	tcd_finish(&d);
}
END_TEST

/* no_approver "wait": the call waits; an approver who comes later is shown
 * the request and can answer it. */
START_TEST(no_approver_wait_late_approver)
{
	struct tcd d;
	tcd_start(&d, "{\"confirmation\":{\"no_approver\":\"wait\",\"timeout_ms\":5000}}");
	struct tcc *c = tcc_connect(&d);
	const char *id = send_call(c, "write_file", "{\"path\":\"w.txt\",\"content\":\"waited\"}");
	ck_assert_msg(tcc_quiet(c, 500), "with no_approver \"wait\" the call did not wait");

	struct tcc *ap = approver(&d);
	const struct json *ev = tcc_wait_event(ap, "tool.confirmation_requested", 1500);
	ck_assert_msg(ev != NULL, "an approver that subscribes while a call waits is not shown its "
				  "confirmation request, so nobody can ever approve it");
	tc_assert_ok(resolve(ap, tj_str(ev, "requestId"), "allow"));
	tc_assert_ok(wait_response(c, id, 5000));
	ck_assert(ws_exists(&d, "w.txt"));
	tcc_close(c);
	tcc_close(ap);
	tcd_finish(&d);
}
END_TEST

/* no_approver "wait" with nobody ever coming: confirmation_timeout, not
 * user_denied. */
START_TEST(no_approver_wait_times_out)
{
	struct tcd d;
	tcd_start(&d, "{\"confirmation\":{\"no_approver\":\"wait\",\"timeout_ms\":800}}");
	struct tcc *c = tcc_connect(&d);
	uint64_t t0 = tc_now_ms();
	const struct json *r = tcc_call(c, "write_file", "{\"path\":\"w.txt\",\"content\":\"x\"}");
	ck_assert_uint_ge(tc_now_ms() - t0, 750);
	tc_assert_kind(r, "confirmation_timeout");
	ck_assert(!ws_exists(&d, "w.txt"));
	tcc_close(c);
	tcd_finish(&d);
}
END_TEST

/* A trusted workspace with the override {write: auto, execute: prompt}:
 * writes run at once, the shell still asks. */
START_TEST(trusted_workspace)
{
	struct tcd d;
	tcd_start(&d, "{\"confirmation\":{\"trusted_workspaces\":[\"@WS@\"],"
		      "\"trusted_workspace_overrides\":{\"write\":\"auto\",\"execute\":\"prompt\"}}}");
	struct tcc *ap = approver(&d);
	struct tcc *c = tcc_connect(&d);
	tc_assert_ok(tcc_call(c, "write_file", "{\"path\":\"trusted.txt\",\"content\":\"t\"}"));
	ck_assert(ws_exists(&d, "trusted.txt"));
	tc_assert_ok(tcc_call(c, "patch_file", "{\"path\":\"trusted.txt\",\"old\":\"t\",\"new\":\"u\"}"));
	ck_assert_msg(tcc_wait_event(ap, "tool.confirmation_requested", 200) == NULL,
		      "a write in a trusted workspace asked for confirmation");

	const char *id = send_call(c, "shell", "{\"command\":\"echo hi > shell.txt\"}");
	const struct json *ev = tcc_wait_event(ap, "tool.confirmation_requested", 5000);
	ck_assert_msg(ev != NULL, "the shell did not ask in a trusted workspace");
	ck_assert_str_eq(tj_str(ev, "tool"), "shell");
	ck_assert_str_eq(tj_str(ev, "sideEffect"), "execute");
	ck_assert(!ws_exists(&d, "shell.txt"));
	resolve(ap, tj_str(ev, "requestId"), "deny");
	tc_assert_kind(wait_response(c, id, 5000), "user_denied");
	ck_assert(!ws_exists(&d, "shell.txt"));
	tcc_close(c);
	tcc_close(ap);
	tcd_finish(&d);
}
END_TEST

/* per_tool "deny": the tool is not listed and cannot be called. */
START_TEST(per_tool_deny)
{
	struct tcd d;
	tcd_start(&d, "{\"confirmation\":{\"per_tool\":{\"shell\":\"deny\"}}}");
	struct tcc *c = tcc_connect(&d);
	const struct json *r = tcc_request(c, "tools/list", NULL);
	tc_assert_ok(r);
	long n = tj_len(r, "result.tools");
	ck_assert_int_ge(n, 4);
	bool has_read = false;
	for (long i = 0; i < n; i++) {
		const char *name = tj_str(r, tcc_fmt(c, "result.tools.%ld.name", i));
		ck_assert_str_ne(name, "shell");
		has_read |= str_eq(name, "read_file");
	}
	ck_assert(has_read);
	r = tcc_call(c, "shell", "{\"command\":\"touch denied.txt\"}");
	tc_assert_kind(r, "permission_denied");
	ck_assert_int_eq(tj_int(r, "error.code"), -32603);
	ck_assert(!ws_exists(&d, "denied.txt"));
	/* Not offered among the alternatives either. */
	r = tcc_call(c, "shel", "{}");
	tc_assert_kind(r, "not_found");
	ck_assert_ptr_null(strstr(tj_str(r, "error.message"), "shell"));
	tcc_close(c);
	tcd_finish(&d);
}
END_TEST

/* --- events ---------------------------------------------------------------- */

/* tool.* events: tool.called with each built-in's declared side effect,
 * tool.completed, tool.failed with its kind, tool.input_invalid; nothing
 * outside the subscribed types. */
START_TEST(events_tool_lifecycle)
{
	struct tcd d;
	tcd_start(&d, ALL_AUTO);
	struct tcc *sub = subscriber(&d, "[\"tool.*\"]");
	struct tcc *c = tcc_connect(&d);
	const char *sid = tj_str(tcc_initialize(c, NULL), "sessionId");

	const struct json *list = tcc_request(c, "tools/list", NULL);
	static const struct {
		const char *tool, *args, *side;
	} calls[] = {
		{ "write_file", "{\"path\":\"e.txt\",\"content\":\"one\"}", "write" },
		{ "read_file", "{\"path\":\"e.txt\"}", "read" },
		{ "patch_file", "{\"path\":\"e.txt\",\"old\":\"one\",\"new\":\"two\"}", "write" },
		{ "list_dir", "{\"path\":\".\"}", "read" },
		{ "shell", "{\"command\":\"true\"}", "execute" },
	};
	const char *ids[ELEMENTSOF(calls)];
	for (size_t i = 0; i < ELEMENTSOF(calls); i++) {
		const struct json *r = tcc_call(c, calls[i].tool, calls[i].args);
		tc_assert_ok(r);
		ids[i] = call_id_of(r);
	}
	const struct json *fail = tcc_call(c, "read_file", "{\"path\":\"missing.txt\"}");
	tc_assert_kind(fail, "execution_error");
	const struct json *bad = tcc_call(c, "read_file", "{\"path\":7}");
	tc_assert_kind(bad, "validation_error");

	const struct json *evs[64];
	size_t n = drain_events(sub, evs, ELEMENTSOF(evs), 500);
	for (size_t i = 0; i < n; i++) {
		const char *type = tj_str(evs[i], "type");
		ck_assert_msg(type && strncmp(type, "tool.", 5) == 0, "subscribed to tool.*, got %s", type);
		ck_assert_ptr_nonnull(tj_str(evs[i], "time"));
	}
	for (size_t i = 0; i < ELEMENTSOF(calls); i++) {
		const struct json *called = find_event(evs, n, "tool.called", ids[i]);
		ck_assert_msg(called != NULL, "no tool.called for %s", calls[i].tool);
		ck_assert_str_eq(tj_str(called, "tool"), calls[i].tool);
		ck_assert_str_eq(tj_str(called, "sessionId"), sid);
		/* The declared class, as tools/list shows it and as the seed says. */
		const char *declared = NULL;
		for (long k = 0; k < tj_len(list, "result.tools"); k++)
			if (str_eq(tj_str(list, tcc_fmt(c, "result.tools.%ld.name", k)), calls[i].tool))
				declared = tj_str(list, tcc_fmt(c, "result.tools.%ld._meta.toolcalld/sideEffects", k));
		ck_assert_ptr_nonnull(declared);
		ck_assert_str_eq(declared, calls[i].side);
		ck_assert_str_eq(tj_str(called, "sideEffect"), calls[i].side);
		const struct json *done = find_event(evs, n, "tool.completed", ids[i]);
		ck_assert_msg(done != NULL, "no tool.completed for %s", calls[i].tool);
		ck_assert_int_eq(tj_int(done, "attempts"), 1);
		ck_assert_int_ge(tj_int(done, "durationMs"), 0);
		ck_assert_ptr_null(find_event(evs, n, "tool.failed", ids[i]));
	}
	const struct json *failed = find_event(evs, n, "tool.failed", call_id_of(fail));
	ck_assert_ptr_nonnull(failed);
	ck_assert_str_eq(tj_str(failed, "kind"), "execution_error");
	ck_assert_str_eq(tj_str(failed, "tool"), "read_file");
	const struct json *invalid = find_event(evs, n, "tool.input_invalid", NULL);
	ck_assert_ptr_nonnull(invalid);
	ck_assert_str_eq(tj_str(invalid, "tool"), "read_file");
	ck_assert_str_eq(tj_str(invalid, "sessionId"), sid);
	failed = find_event(evs, n, "tool.failed", call_id_of(bad));
	ck_assert_ptr_nonnull(failed);
	ck_assert_str_eq(tj_str(failed, "kind"), "validation_error");
	tcc_close(c);
	tcc_close(sub);
	tcd_finish(&d);
}
END_TEST

/* A call refused before its tool acted (arguments the schema or the tool
 * refuses, a path outside the workspace, a tool the policy denies, no
 * budget) answers attempts 0, and the events agree: its tool.failed (and
 * tool.input_invalid) but no tool.called and no dispatch.attempt. A call
 * that reached its tool has both. */
START_TEST(events_refused_calls_never_start)
{
	struct tcd d;
	tcd_start(&d, "{\"confirmation\":{\"default\":{\"write\":\"auto\",\"execute\":\"auto\"},"
		      "\"per_tool\":{\"make_dir\":\"deny\"}}}");
	tcd_put(&d, "a.txt", "hi");
	struct tcc *sub = subscriber(&d, "[\"tool.*\",\"dispatch.*\",\"process.started\"]");
	struct tcc *c = tcc_connect(&d);
	tcc_initialize(c, NULL);

	static const struct {
		const char *tool, *args, *kind;
	} refused[] = {
		{ "read_file", "{\"path\":7}", "validation_error" },
		{ "read_file", "{\"path\":\"../../etc/passwd\"}", "permission_denied" },
		{ "write_file", "{\"path\":\"../out.txt\",\"content\":\"x\"}", "permission_denied" },
		{ "list_dir", "{\"path\":\"../..\"}", "permission_denied" },
		{ "shell", "{\"command\":\"echo a\\u0000b\"}", "validation_error" },
		{ "make_dir", "{\"path\":\"d\"}", NULL },
	};
	const char *ids[ELEMENTSOF(refused) + 1];
	for (size_t i = 0; i < ELEMENTSOF(refused); i++) {
		const struct json *r = tcc_call(c, refused[i].tool, refused[i].args);
		if (refused[i].kind)
			tc_assert_kind(r, refused[i].kind);
		ck_assert_msg(tj_has(r, "error"), "%s %s ran", refused[i].tool, refused[i].args);
		ck_assert_int_eq(tj_int(r, "error.data.attempts"), 0);
		ids[i] = call_id_of(r);
		ck_assert_ptr_nonnull(ids[i]);
	}
	const struct json *r = tcc_request(c, "tools/call", "{\"name\":\"read_file\",\"arguments\":{\"path\":\"a.txt\"},"
							"\"_meta\":{\"budget\":0}}");
	tc_assert_kind(r, "budget_exceeded");
	ck_assert_int_eq(tj_int(r, "error.data.attempts"), 0);
	ids[ELEMENTSOF(refused)] = call_id_of(r);

	static const struct {
		const char *tool, *args;
	} ran[] = {
		{ "read_file", "{\"path\":\"a.txt\"}" },
		{ "write_file", "{\"path\":\"b.txt\",\"content\":\"x\"}" },
		{ "list_dir", "{\"path\":\".\"}" },
		{ "shell", "{\"command\":\"true\"}" },
		{ "read_file", "{\"path\":\"missing.txt\"}" },
		{ "shell", "{\"command\":\"echo bg\",\"background\":true,\"yield_ms\":0}" },
	};
	const char *ran_ids[ELEMENTSOF(ran)];
	for (size_t i = 0; i < ELEMENTSOF(ran); i++) {
		r = tcc_call(c, ran[i].tool, ran[i].args);
		ran_ids[i] = call_id_of(r);
		ck_assert_ptr_nonnull(ran_ids[i]);
	}

	const struct json *evs[64];
	size_t n = drain_events(sub, evs, ELEMENTSOF(evs), 500);
	for (size_t i = 0; i < ELEMENTSOF(ids); i++) {
		const char *what = i < ELEMENTSOF(refused) ? refused[i].args : "budget 0";
		ck_assert_msg(find_event(evs, n, "tool.failed", ids[i]), "no tool.failed for %s", what);
		ck_assert_msg(!find_event(evs, n, "tool.called", ids[i]), "tool.called for %s", what);
		ck_assert_msg(!find_event(evs, n, "dispatch.attempt", ids[i]), "dispatch.attempt for %s", what);
	}
	ck_assert_ptr_nonnull(find_event(evs, n, "tool.input_invalid", NULL));
	for (size_t i = 0; i < ELEMENTSOF(ran); i++) {
		ck_assert_msg(find_event(evs, n, "tool.called", ran_ids[i]), "no tool.called for %s", ran[i].args);
		const struct json *at = find_event(evs, n, "dispatch.attempt", ran_ids[i]);
		ck_assert_msg(at, "no dispatch.attempt for %s", ran[i].args);
		ck_assert_int_eq(tj_int(at, "attempt"), 1);
		ck_assert_msg(find_event(evs, n, "tool.completed", ran_ids[i]) || find_event(evs, n, "tool.failed", ran_ids[i]),
			      "no end for %s", ran[i].args);
		/* tool.called before dispatch.attempt before the end. */
		size_t called = n, attempt = n, end = n;
		for (size_t k = 0; k < n; k++) {
			if (!str_eq(tj_str(evs[k], "callId"), ran_ids[i]))
				continue;
			const char *type = tj_str(evs[k], "type");
			if (str_eq(type, "tool.called"))
				called = k;
			else if (str_eq(type, "dispatch.attempt"))
				attempt = k;
			else if (str_eq(type, "tool.completed") || str_eq(type, "tool.failed"))
				end = k;
		}
		ck_assert_msg(called < attempt && attempt < end, "order for %s", ran[i].args);
		/* What the tool's action tells of comes after. */
		const struct json *started = find_event(evs, n, "process.started", ran_ids[i]);
		for (size_t k = 0; started && k < n; k++)
			if (evs[k] == started)
				ck_assert_msg(attempt < k, "process.started before dispatch.attempt");
		ck_assert(!str_eq(ran[i].tool, "shell") || !strstr(ran[i].args, "background") || started);
	}

	/* A tool that runs on is told while it runs, not only at its end. */
	const char *id = send_call(c, "shell", "{\"command\":\"i=0; until [ -e go ] || [ $i -ge 600 ]; do sleep 0.05; "
					       "i=$((i+1)); done\"}");
	const struct json *e = tcc_wait_event(sub, "dispatch.attempt", 10000);
	ck_assert_msg(e && str_eq(tj_str(e, "tool"), "shell"), "no dispatch.attempt while shell runs");
	ck_assert_ptr_null(tcc_wait_id(c, id, 0));
	tcd_put(&d, "go", "");
	tc_assert_ok(wait_response(c, id, 40000));
	tcc_close(c);
	tcc_close(sub);
	tcd_finish(&d);
}
END_TEST

/* dispatch.attempt and dispatch.retry for a transient tool,
 * registry.reloaded on admin/reload, circuit.opened and circuit.closed. */
START_TEST(events_dispatch_registry_circuit)
{
	struct tcd d;
	struct tcd_opts o = { .config = "{\"circuit\":{\"failures\":2,\"window_ms\":10000,\"open_ms\":500}}" };
	tcd_prepare(&d, &o);
	write_exit_tool(&d, "flaky");
	write_exit_tool(&d, "breaker");
	tcd_spawn(&d, &o);
	ck_assert_int_eq(tcd_wait_socket(&d, d.sock, TCD_START_TIMEOUT_MS), 0);
	struct tcc *sub = subscriber(&d, "[\"dispatch.*\",\"registry.*\",\"circuit.*\"]");
	struct tcc *c = tcc_connect(&d);

	const struct json *r = tcc_call(c, "flaky", "{\"code\":75}");
	tc_assert_kind(r, "transient");
	ck_assert_int_eq(tj_int(r, "error.data.attempts"), 3);
	const char *cid = call_id_of(r);
	const struct json *evs[64];
	size_t n = drain_events(sub, evs, ELEMENTSOF(evs), 300);
	unsigned attempts = 0, retries = 0;
	for (size_t i = 0; i < n; i++) {
		const char *type = tj_str(evs[i], "type");
		ck_assert_msg(strncmp(type, "dispatch.", 9) == 0, "unexpected event %s", type);
		ck_assert_str_eq(tj_str(evs[i], "callId"), cid);
		ck_assert_str_eq(tj_str(evs[i], "tool"), "flaky");
		if (str_eq(type, "dispatch.attempt")) {
			ck_assert_int_eq(tj_int(evs[i], "attempt"), ++attempts);
		} else if (str_eq(type, "dispatch.retry")) {
			retries++;
			ck_assert_int_eq(tj_int(evs[i], "attempt"), retries + 1);
			ck_assert_str_eq(tj_str(evs[i], "kind"), "transient");
			int64_t delay = tj_int(evs[i], "delayMs");
			if (retries == 1)
				ck_assert(delay >= 100 && delay <= 150);
			else
				ck_assert(delay >= 400 && delay <= 600);
		}
	}
	ck_assert_uint_eq(attempts, 3);
	ck_assert_uint_eq(retries, 2);

	r = tcc_request(c, "admin/reload", NULL);
	tc_assert_ok(r);
	const struct json *ev = tcc_wait_event(sub, "registry.reloaded", 2000);
	ck_assert_ptr_nonnull(ev);
	ck_assert_int_eq(tj_int(ev, "tools"), tj_int(r, "result.tools"));
	ck_assert_int_eq(tj_int(ev, "tools"), 18);

	tc_assert_kind(tcc_call(c, "breaker", "{\"code\":1}"), "execution_error");
	tc_assert_kind(tcc_call(c, "breaker", "{\"code\":1}"), "execution_error");
	ev = tcc_wait_event(sub, "circuit.opened", 2000);
	ck_assert_msg(ev != NULL, "no circuit.opened after 2 failures");
	ck_assert_str_eq(tj_str(ev, "tool"), "breaker");
	r = tcc_call(c, "breaker", "{\"code\":0}");
	tc_assert_kind(r, "circuit_open");
	ck_assert(tc_wait_until(!tj_has(tcc_call(c, "breaker", "{\"code\":0}"), "error"), tj_int(r, "error.data.retryAfterMs") + 2000));
	tc_assert_ok(tcc_call(c, "breaker", "{\"code\":0}"));
	ev = tcc_wait_event(sub, "circuit.closed", 2000);
	ck_assert_msg(ev != NULL, "no circuit.closed after a successful probe");
	ck_assert_str_eq(tj_str(ev, "tool"), "breaker");
	tcc_close(c);
	tcc_close(sub);
	tcd_finish(&d);
}
END_TEST

/* A subscriber that stops reading neither stalls the daemon nor makes it
 * buffer without bound: events are dropped for it, counted, and it is told
 * how many once it reads again. */
START_TEST(events_slow_subscriber)
{
	struct tcd d;
	tcd_start(&d, "{\"confirmation\":{\"default\":{\"execute\":\"auto\"}},\"limits\":{\"event_queue\":16},"
		      "\"tools\":{\"shell\":{\"output_cap\":4096}}}");
	struct tcc *slow = subscriber(&d, NULL);
	struct tcc *c = tcc_connect(&d);

	/* Megabytes of tool.output_delta events, then many small calls. */
	uint64_t t0 = tc_now_ms();
	const struct json *r = tcc_call(c, "shell", "{\"command\":\"head -c 6000000 /dev/zero | tr '\\\\0' a\"}");
	tc_assert_ok(r);
	ck_assert(tj_bool(r, "result.structuredContent.truncated"));
	ck_assert_uint_lt(tc_now_ms() - t0, 8000);
	/* Answered at all while the subscriber does not read: a daemon
	 * waiting on it would answer none (how long each took says nothing
	 * on a loaded machine). */
	for (int i = 0; i < 30; i++)
		tc_assert_ok(tcc_call(c, "list_dir", "{}"));
	const struct json *st = tcc_request(c, "admin/stats", NULL);
	int64_t dropped = tj_int(st, "result.events.dropped");
	ck_assert_int_gt(dropped, 0);

	/* Read everything queued, then one more event brings the report. */
	while (tcc_recv_line(slow, 500, NULL))
		;
	ck_assert(!tcc_eof(slow));
	tc_assert_ok(tcc_call(c, "list_dir", "{}"));
	const struct json *ev = tcc_wait_event(slow, "events.dropped", 5000);
	ck_assert_msg(ev != NULL, "no events.dropped event after reading again");
	ck_assert_int_gt(tj_int(ev, "count"), 0);
	ck_assert_int_le(tj_int(ev, "count"), dropped);
	/* Deliveries resumed. */
	ck_assert(tcc_wait_event(slow, "tool.completed", 2000) != NULL);
	tcc_close(c);
	tcc_close(slow);
	tcd_finish(&d);
}
END_TEST

/* --- audit ---------------------------------------------------------------- */

/* One JSON line per finished call with the contract's fields, for several
 * outcome kinds, on disk by the time SIGTERM has been handled. */
START_TEST(audit_log_lines)
{
	struct tcd d;
	tcd_start(&d, "{\"audit_log\":\"@DIR@/audit.log\",\"audit_fsync_ms\":60000,"
		      "\"confirmation\":{\"default\":{\"write\":\"auto\",\"execute\":\"auto\"},"
		      "\"per_tool\":{\"patch_file\":\"prompt\"}}}");
	struct tcc *c = tcc_connect(&d);
	const char *sid = tj_str(tcc_initialize(c, NULL), "sessionId");
	static const struct {
		const char *tool, *args, *kind, *side;
	} calls[] = {
		{ "write_file", "{\"path\":\"sub/a.txt\",\"content\":\"x\",\"create_dirs\":true}", NULL, "write" },
		{ "shell", "{\"command\":\"echo audit-me\"}", NULL, "execute" },
		{ "read_file", "{\"path\":\"missing.txt\"}", "execution_error", "read" },
		{ "read_file", "{\"path\":5}", "validation_error", "read" },
		{ "patch_file", "{\"path\":\"sub/a.txt\",\"old\":\"x\",\"new\":\"y\"}", "user_denied", "write" },
		{ "no_such_tool", "{}", "not_found", NULL },
		{ "shell", "{\"command\":\"sleep 5\",\"timeout_ms\":200}", "timeout", "execute" },
	};
	enum { N = ELEMENTSOF(calls) };
	const char *ids[N];
	for (size_t i = 0; i < N; i++) {
		const struct json *r = tcc_call(c, calls[i].tool, calls[i].args);
		if (calls[i].kind)
			tc_assert_kind(r, calls[i].kind);
		else
			tc_assert_ok(r);
		ids[i] = call_id_of(r);
		ck_assert_ptr_nonnull(ids[i]);
	}
	ck_assert_int_eq(tcd_stop(&d), 0);

	char *path = xasprintf("%s/audit.log", d.dir);
	char *text = tcd_read(&d, path, NULL);
	ck_assert_msg(text != NULL, "no audit log at %s", path);
	const struct json *lines[16];
	size_t n = 0;
	for (char *p = text, *nl; *p; p = nl + 1) {
		nl = strchr(p, '\n');
		ck_assert_msg(nl != NULL, "the audit log ends in the middle of a line");
		ck_assert(n < ELEMENTSOF(lines));
		lines[n++] = tcc_parse(c, p, (size_t)(nl - p));
	}
	ck_assert_uint_eq(n, N);
	for (size_t i = 0; i < N; i++) {
		const struct json *l = NULL;
		for (size_t k = 0; k < n; k++)
			if (str_eq(tj_str(lines[k], "callId"), ids[i]))
				l = lines[k];
		ck_assert_msg(l != NULL, "no audit line for the %s call %s", calls[i].tool, ids[i]);
		ck_assert_ptr_nonnull(tj_str(l, "time"));
		ck_assert_str_eq(tj_str(l, "session"), sid);
		ck_assert_int_eq(tj_int(l, "uid"), getuid());
		ck_assert_int_eq(tj_int(l, "pid"), getpid());
		ck_assert_str_eq(tj_str(l, "tool"), calls[i].tool);
		if (calls[i].side)
			ck_assert_str_eq(tj_str(l, "sideEffect"), calls[i].side);
		ck_assert_str_eq(tj_str(l, "outcome"), calls[i].kind ? calls[i].kind : "ok");
		ck_assert_int_ge(tj_int(l, "attempts"), 0);
		ck_assert_int_ge(tj_int(l, "durationMs"), 0);
		ck_assert_int_ge(tj_len(l, "files"), 0);
		ck_assert(tj_has(l, "command"));
	}
	/* What was modified and what was run. */
	const struct json *w = lines[0], *sh = lines[1], *to = lines[6];
	for (size_t k = 0; k < n; k++) {
		if (str_eq(tj_str(lines[k], "callId"), ids[0]))
			w = lines[k];
		if (str_eq(tj_str(lines[k], "callId"), ids[1]))
			sh = lines[k];
		if (str_eq(tj_str(lines[k], "callId"), ids[6]))
			to = lines[k];
	}
	ck_assert_int_eq(tj_len(w, "files"), 1);
	ck_assert_str_eq(tj_str(w, "files.0"), "sub/a.txt");
	ck_assert_int_eq(tj_int(w, "attempts"), 1);
	ck_assert_str_eq(tj_str(sh, "command"), "echo audit-me");
	ck_assert_str_eq(tj_str(to, "command"), "sleep 5");
	ck_assert_int_ge(tj_int(to, "durationMs"), 200);
	free(text);
	free(path);
	tcc_close(c);
	tcd_free(&d);
}
END_TEST

/* --- peers of another uid --------------------------------------------------- */

START_TEST(peers_other_uid)
{
	if (geteuid() != 0) {
		TC_SKIP("peers_other_uid: needs root to connect as user nobody");
	}
	struct passwd *pw = getpwnam("nobody");
	if (!pw) {
		TC_SKIP("peers_other_uid: no user nobody");
	}
	uid_t nuid = pw->pw_uid;
	gid_t ngid = pw->pw_gid;

	struct tcd d;
	/* As the daemon, with its dir writable: both uids count in one file. */
	tcd_start(&d, "{\"socket_mode\":\"0666\",\"confirmation\":{\"default\":{\"execute\":\"auto\"}},"
		      "\"run_as\":\"daemon\",\"sandbox\":{\"write_extra\":[\"@DIR@/count\"]}}");
	char *count_path = xasprintf("%s/count", d.dir);
	tc_write_file_atomic(count_path, "", 0);
	free(count_path);
	/* The temp dir is 0700; nobody needs to reach the socket in it. */
	ck_assert(chmod(d.dir, 0711) == 0);

	struct tcc *own_sub = subscriber(&d, "[\"tool.called\"]");
	struct tcc *c = tcc_connect(&d);
	const char *sid = tj_str(tcc_initialize(c, NULL), "sessionId");
	char *qs = tj_quote(sid);
	/* A call of root's in flight while nobody tries to cancel it. */
	const char *busy = send_call(c, "shell", "{\"command\":\"sleep 0.7; echo survived\"}");

	struct tcc *n = tcc_connect_as(&d, nuid, ngid);
	const struct json *r = tcc_request(n, "initialize",
		tcc_fmt(n, "{\"protocolVersion\":\"2025-06-18\",\"capabilities\":{},"
			   "\"clientInfo\":{\"name\":\"x\",\"version\":\"1\"},\"sessionId\":%s}", qs));
	/* Session ids are each uid's own: nobody gets what an unused id
	 * gets, a fresh session of its own under that id, and reaches none
	 * of root's through it (root's call survives, its events stay). */
	ck_assert_msg(tj(r, "result") != NULL, "%s", tj_text(r));
	ck_assert_str_eq(tj_str(r, "result.sessionId"), sid);
	r = tcc_request(n, "sessions/cancel", tcc_fmt(n, "{\"sessionId\":%s}", qs));
	ck_assert_int_eq(tj_int(r, "result.cancelled"), 0);
	r = tcc_request(n, "events/subscribe", tcc_fmt(n, "{\"sessionId\":%s}", qs));
	tc_assert_ok(r);
	/* A watcher of every session of nobody's. */
	struct tcc *nsub = tcc_connect_as(&d, nuid, ngid);
	r = tcc_request(nsub, "events/subscribe", "{\"sessionId\":\"*\"}");
	tc_assert_ok(r);

	r = wait_response(c, busy, 5000);
	tc_assert_ok(r);
	ck_assert_str_eq(tj_str(r, "result.structuredContent.stdout"), "survived\n");

	/* Keys are per uid: the same key and arguments run again for nobody. */
	const char *counted = "{\"name\":\"shell\",\"arguments\":{\"command\":\"echo run >> ../count; echo done\"},"
			      "\"_meta\":{\"idempotencyKey\":\"shared-key\"}}";
	r = tcc_request(c, "tools/call", counted);
	tc_assert_ok(r);
	const char *root_call = call_id_of(r);
	struct tcc *n2 = tcc_connect_as(&d, nuid, ngid);
	r = tcc_request(n2, "tools/call", counted);
	tc_assert_ok(r);
	ck_assert(!tj_bool(r, "result._meta.toolcalld/replayed"));
	ck_assert_str_ne(call_id_of(r), root_call);
	char *count = tcd_read(&d, tcc_fmt(c, "%s/count", d.dir), NULL);
	ck_assert_str_eq(count, "run\nrun\n");
	free(count);
	/* While root's own key still replays for root. */
	r = tcc_request(c, "tools/call", counted);
	ck_assert(tj_bool(r, "result._meta.toolcalld/replayed"));

	/* The watcher saw nobody's own call, and none of root's calls, which
	 * root's subscriber did see. */
	ck_assert(tcc_wait_event(own_sub, "tool.called", 2000) != NULL);
	const struct json *evs[64];
	size_t nev = drain_events(nsub, evs, ELEMENTSOF(evs), 300);
	unsigned own_calls = 0;
	for (size_t i = 0; i < nev; i++) {
		const char *esid = tj_str(evs[i], "sessionId");
		ck_assert_msg(!esid || !str_eq(esid, sid), "another uid received this uid's event %s",
			      tj_text(evs[i]));
		own_calls += str_eq(tj_str(evs[i], "type"), "tool.called");
	}
	ck_assert_uint_eq(own_calls, 1);
	/* Nobody's session of root's session id heard none of root's calls. */
	ck_assert(tcc_wait_event(n, "tool.called", 300) == NULL);

	/* An approver of another uid is no approver: root's write is refused
	 * at once, and nobody is not shown it. */
	struct tcc *nap = tcc_connect_as(&d, nuid, ngid);
	tc_assert_ok(tcc_request(nap, "events/subscribe", "{\"types\":[\"tool.confirmation_requested\"]}"));
	r = tcc_call(c, "write_file", "{\"path\":\"x.txt\",\"content\":\"x\"}");
	tc_assert_kind(r, "user_denied");
	ck_assert(tcc_wait_event(nap, "tool.confirmation_requested", 300) == NULL);

	free(qs);
	tcc_close(nap);
	tcc_close(nsub);
	tcc_close(n2);
	tcc_close(n);
	tcc_close(c);
	tcc_close(own_sub);
	tcd_finish(&d);
}
END_TEST

static Suite *policy_suite(void)
{
	Suite *s = suite_create("integ_policy");
	TCase *tc = tcase_create("confirmation");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, no_approver_denied_at_once);
	tcase_add_test(tc, confirm_allow);
	tcase_add_test(tc, confirm_deny);
	tcase_add_test(tc, confirm_approver_leaves);
	tcase_add_test(tc, confirm_always_allow);
	tcase_add_test(tc, confirm_timeout);
	tcase_add_test(tc, confirm_approvers_race);
	tcase_add_test(tc, no_approver_wait_late_approver);
	tcase_add_test(tc, no_approver_wait_times_out);
	tcase_add_test(tc, trusted_workspace);
	tcase_add_test(tc, per_tool_deny);
	suite_add_tcase(s, tc);

	tc = tcase_create("events");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, events_tool_lifecycle);
	tcase_add_test(tc, events_refused_calls_never_start);
	tcase_add_test(tc, events_dispatch_registry_circuit);
	tcase_add_test(tc, events_slow_subscriber);
	suite_add_tcase(s, tc);

	tc = tcase_create("audit_and_peers");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, audit_log_lines);
	tcase_add_test(tc, peers_other_uid);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return run_suite(policy_suite());
}
