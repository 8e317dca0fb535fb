/* SPDX-License-Identifier: MIT */
/*
 * Elicitation for confirmation (CONTRACT §12), with a fake MCP client that
 * declares elicitation and answers the daemon's elicitation/create: accept
 * with allow runs the call, decline and deny refuse it (user_denied, told
 * as the user's refusal, not as a missing approver), a subscribed approver
 * may answer first (the client's later answer changes nothing), and an
 * answer that is not one of the decisions is no answer.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/integ/harness.h"
#include "tests/unit/check_main.h"

#define CFG "{\"socket_mode\":\"0600\",\"confirmation\":{\"per_tool\":{\"write_file\":\"prompt\"}}}"

static struct tcc *elicit_client(struct tcd *d)
{
	struct tcc *c = tcc_connect(d);
	tc_assert_ok(tcc_request(c, "initialize", "{\"protocolVersion\":\"2025-11-25\","
				 "\"capabilities\":{\"elicitation\":{\"form\":{}}},"
				 "\"clientInfo\":{\"name\":\"fake-host\",\"version\":\"1\"}}"));
	tcc_send(c, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}");
	return c;
}

/* Sends a write_file call of name; returns its id text. */
static const char *send_write(struct tcc *c, const char *name)
{
	int64_t id = tcc_send_request(c, "tools/call",
				      tcc_fmt(c, "{\"name\":\"write_file\",\"arguments\":{\"path\":\"%s\","
					      "\"content\":\"hello\"}}", name));
	return tcc_fmt(c, "%lld", (long long)id);
}

/* Waits for the daemon's elicitation/create and answers it with result
 * (JSON text); returns the request. */
static const struct json *answer(struct tcc *c, const char *result)
{
	const struct json *rq = tcc_wait_daemon_request(c, "elicitation/create", 5000);
	ck_assert_msg(rq, "the daemon never asked the client");
	if (result)
		tcc_send(c, tcc_fmt(c, "{\"jsonrpc\":\"2.0\",\"id\":%s,\"result\":%s}", tcc_raw(c, tj(rq, "id")),
				    result));
	return rq;
}

START_TEST(elicitation_answers)
{
	struct tcd d;
	tcd_start(&d, CFG);
	struct tcc *c = elicit_client(&d);

	/* accept + allow: it runs. The question shows the tool, its side
	 * effect, the input and the file, and asks for a decision. */
	const char *id = send_write(c, "yes.txt");
	const struct json *rq = answer(c, "{\"action\":\"accept\",\"content\":{\"decision\":\"allow\"}}");
	_cleanup_free_ char *t = tj_text(rq);
	const char *msg = tj_str(rq, "params.message");
	ck_assert_msg(msg && strstr(msg, "write_file") && strstr(msg, "write") && strstr(msg, "hello") &&
		      strstr(msg, "yes.txt"), "%s", t);
	ck_assert_str_eq(tj_str(rq, "params.requestedSchema.type"), "object");
	ck_assert_int_eq(tj_len(rq, "params.requestedSchema.properties.decision.enum"), 3);
	ck_assert_str_eq(tj_str(rq, "params.requestedSchema.properties.decision.enum.2"), "always_allow");
	const struct json *r = tcc_wait_id(c, id, 5000);
	tc_assert_ok(r);
	_cleanup_free_ char *yes = tcd_ws_path(&d, "yes.txt");
	ck_assert_int_eq(access(yes, F_OK), 0);

	/* decline, cancel, accept + deny: user_denied, saying the user said no. */
	static const char *const refusals[] = {
		"{\"action\":\"decline\"}",
		"{\"action\":\"cancel\"}",
		"{\"action\":\"accept\",\"content\":{\"decision\":\"deny\"}}",
	};
	for (size_t i = 0; i < ELEMENTSOF(refusals); i++) {
		id = send_write(c, "no.txt");
		answer(c, refusals[i]);
		r = tcc_wait_id(c, id, 5000);
		tc_assert_kind(r, "user_denied");
		const char *m = tj_str(r, "error.message");
		ck_assert_msg(strstr(m, "denied") && !strstr(m, "toolcallctl"), "%s", m);
	}
	_cleanup_free_ char *no = tcd_ws_path(&d, "no.txt");
	ck_assert_int_lt(access(no, F_OK), 0);

	/* An answer that is no decision is no answer: with nobody else to
	 * ask, the call is refused. */
	id = send_write(c, "maybe.txt");
	answer(c, "{\"action\":\"accept\",\"content\":{\"decision\":\"sure\"}}");
	r = tcc_wait_id(c, id, 5000);
	tc_assert_kind(r, "user_denied");
	ck_assert_msg(strstr(tj_str(r, "error.message"), "no answer"), "%s", tj_str(r, "error.message"));
	/* Nor is an error. */
	id = send_write(c, "error.txt");
	const struct json *q = answer(c, NULL);
	tcc_send(c, tcc_fmt(c, "{\"jsonrpc\":\"2.0\",\"id\":%s,\"error\":{\"code\":-32601,\"message\":\"no\"}}",
			    tcc_raw(c, tj(q, "id"))));
	tc_assert_kind(tcc_wait_id(c, id, 5000), "user_denied");

	/* always_allow: this tool runs without asking for the rest of the session. */
	id = send_write(c, "always.txt");
	answer(c, "{\"action\":\"accept\",\"content\":{\"decision\":\"always_allow\"}}");
	tc_assert_ok(tcc_wait_id(c, id, 5000));
	tc_assert_ok(tcc_call(c, "write_file", "{\"path\":\"again.txt\",\"content\":\"x\"}"));

	tcc_close(c);
	tcd_finish(&d);
}
END_TEST

/* The client does not answer; an approver does, first: the call runs, and
 * the client's late answer changes nothing. */
START_TEST(elicitation_approver_wins)
{
	struct tcd d;
	tcd_start(&d, CFG);
	struct tcc *ap = tcc_connect(&d);
	tc_assert_ok(tcc_request(ap, "events/subscribe", "{\"types\":[\"tool.confirmation_requested\"]}"));
	struct tcc *c = elicit_client(&d);
	const char *id = send_write(c, "ap.txt");
	const struct json *rq = answer(c, NULL);
	const char *rq_id = tcc_raw(c, tj(rq, "id"));
	const struct json *ev = tcc_wait_event(ap, "tool.confirmation_requested", 5000);
	ck_assert_ptr_nonnull(ev);
	tc_assert_ok(tcc_request(ap, "confirmations/resolve",
				 tcc_fmt(ap, "{\"requestId\":\"%s\",\"decision\":\"allow\"}", tj_str(ev, "requestId"))));
	tc_assert_ok(tcc_wait_id(c, id, 5000));
	/* The client's question is taken down: notifications/cancelled
	 * naming the daemon's request. */
	const struct json *n = tcc_wait_notification(c, "notifications/cancelled", 5000);
	ck_assert_msg(n, "the client's question was not withdrawn");
	ck_assert_str_eq(tcc_raw(c, tj(n, "params.requestId")), rq_id);
	ck_assert(tj_has(n, "params.reason"));
	/* Too late, and wrong: ignored. */
	tcc_send(c, tcc_fmt(c, "{\"jsonrpc\":\"2.0\",\"id\":%s,\"result\":{\"action\":\"decline\"}}", rq_id));
	tc_assert_ok(tcc_request(c, "ping", NULL));
	_cleanup_free_ char *p = tcd_ws_path(&d, "ap.txt");
	ck_assert_int_eq(access(p, F_OK), 0);

	/* A call cancelled while the client is asked: its answer comes to nothing. */
	id = send_write(c, "cancelled.txt");
	rq = answer(c, NULL);
	tcc_send(c, tcc_fmt(c, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\",\"params\":{\"requestId\":%s}}",
			    id));
	tcc_send(c, tcc_fmt(c, "{\"jsonrpc\":\"2.0\",\"id\":%s,\"result\":{\"action\":\"accept\","
			    "\"content\":{\"decision\":\"allow\"}}}", tcc_raw(c, tj(rq, "id"))));
	tc_assert_ok(tcc_request(c, "ping", NULL));
	_cleanup_free_ char *cp = tcd_ws_path(&d, "cancelled.txt");
	/* Answered by the client itself: nothing is withdrawn. */
	ck_assert_uint_eq(tcc_count_notifications(c, "notifications/cancelled"), 0);
	ck_assert_int_lt(access(cp, F_OK), 0);

	tcc_close(c);
	tcc_close(ap);
	tcd_finish(&d);
}
END_TEST

/* tools/dispatch asks the client like tools/call does, one question per
 * call that needs one; a call the client allows runs, one it declines
 * is an error message for the model. */
START_TEST(elicitation_for_dispatch)
{
	struct tcd d;
	tcd_start(&d, CFG);
	struct tcc *c = elicit_client(&d);
	int64_t id = tcc_send_request(c, "tools/dispatch",
		"{\"format\":\"openai\",\"calls\":["
		"{\"id\":\"call_1\",\"type\":\"function\",\"function\":{\"name\":\"write_file\","
		"\"arguments\":\"{\\\"path\\\":\\\"d1.txt\\\",\\\"content\\\":\\\"one\\\"}\"}},"
		"{\"id\":\"call_2\",\"type\":\"function\",\"function\":{\"name\":\"write_file\","
		"\"arguments\":\"{\\\"path\\\":\\\"d2.txt\\\",\\\"content\\\":\\\"two\\\"}\"}}]}");
	for (int i = 0; i < 2; i++) {
		const struct json *rq = tcc_wait_daemon_request(c, "elicitation/create", 5000);
		ck_assert_msg(rq, "the daemon never asked the client about call %d", i + 1);
		bool first = strstr(tj_str(rq, "params.message"), "d1.txt") != NULL;
		tcc_send(c, tcc_fmt(c, "{\"jsonrpc\":\"2.0\",\"id\":%s,\"result\":%s}", tcc_raw(c, tj(rq, "id")),
				    first ? "{\"action\":\"accept\",\"content\":{\"decision\":\"allow\"}}"
					  : "{\"action\":\"decline\"}"));
	}
	const struct json *r = tcc_wait_id(c, tcc_fmt(c, "%lld", (long long)id), 5000);
	tc_assert_ok(r);
	ck_assert_int_eq(tj_len(r, "result.messages"), 2);
	ck_assert_str_eq(tj_str(r, "result.messages.0.tool_call_id"), "call_1");
	const char *denied = tj_str(r, "result.messages.1.content");
	ck_assert_msg(denied && strstr(denied, "denied"), "%s", denied ? denied : "(none)");
	_cleanup_free_ char *p1 = tcd_ws_path(&d, "d1.txt"), *p2 = tcd_ws_path(&d, "d2.txt");
	ck_assert_int_eq(access(p1, F_OK), 0);
	ck_assert_int_lt(access(p2, F_OK), 0);
	tcc_close(c);
	tcd_finish(&d);
}
END_TEST

/* A client that goes away while asked: the call is abandoned, the daemon
 * stays well. */
START_TEST(elicitation_client_leaves)
{
	struct tcd d;
	tcd_start(&d, CFG);
	struct tcc *c = elicit_client(&d);
	send_write(c, "gone.txt");
	answer(c, NULL);
	tcc_close(c);
	c = tcc_connect(&d);
	tc_assert_ok(tcc_request(c, "ping", NULL));
	tcc_close(c);
	_cleanup_free_ char *p = tcd_ws_path(&d, "gone.txt");
	ck_assert_int_lt(access(p, F_OK), 0);
	tcd_finish(&d);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("integ_elicit");
	TCase *tc = tcase_create("elicit");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, elicitation_answers);
	tcase_add_test(tc, elicitation_approver_wins);
	tcase_add_test(tc, elicitation_client_leaves);
	tcase_add_test(tc, elicitation_for_dispatch);
	suite_add_tcase(s, tc);
	return run_suite(s);
}
