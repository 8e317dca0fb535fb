/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of the dispatch engine with fake tools, a fake clock and a
 * scripted random source: every branch of the flow for one call (lookup,
 * validation, idempotency join/replay/conflict, budget, circuit,
 * confirmation, caps, timeout, retry with backoff), exactly and at once.
 * The fake tools and recorders are in tests/unit/dispatch_fixture.h;
 * sharing between uids and sessions is tested in test_dispatch_fair.c.
 * It is long because every branch of one call's flow is a case of its own.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/dispatch/dispatch.h"
#include "lib/events.h"
#include "lib/policy/policy.h"
#include "lib/registry.h"
#include "lib/session.h"
#include "lib/files/workspace.h"
#include "proto/json.h"
#include "tests/unit/dispatch_fixture.h"
#include "tests/unit/fakeloop.h"
#include "tests/unit/check_main.h"


/* --- lookup and validation ---------------------------------------------- */

START_TEST(unknown_tool_lists_available)
{
	ck_assert_ptr_null(call("red_file", "{}", NULL, &recs[0]));
	ck_assert(recs[0].done);
	ck_assert_int_eq(recs[0].kind, TC_NOT_FOUND);
	ck_assert_str_eq(recs[0].message, "Tool 'red_file' not found. Available: [capped, echo, prog, slow, slow_idem, writer]");
	ck_assert_uint_eq(exec_count, 0);
	ck_assert_uint_eq(count_events("tool.failed"), 0);	/* no subscriber */
}
END_TEST

static int u64_cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

/* Every call gets its own id, "c-" + 8 hex digits of this run + "-" + 16
 * more, so logs, audit lines and answers can be matched up; the second
 * part does not count the calls (a uid would learn how many others made). */
START_TEST(call_ids_distinct_and_shaped)
{
	ck_assert_ptr_null(call("red_file", "{}", NULL, &recs[0]));
	ck_assert_ptr_null(call("red_file", "{}", NULL, &recs[1]));
	unsigned long long n0 = 0, n1 = 0;
	char hex0[9] = "", hex1[9] = "";
	int used = 0;
	ck_assert_int_eq(sscanf(recs[0].call_id, "c-%8[0-9a-f]-%16llx%n", hex0, &n0, &used), 2);
	ck_assert_uint_eq(strlen(hex0), 8);
	ck_assert_uint_eq((size_t)used, strlen(recs[0].call_id));
	ck_assert_uint_eq(strlen(recs[0].call_id), 2 + 8 + 1 + 16);
	ck_assert_int_eq(sscanf(recs[1].call_id, "c-%8[0-9a-f]-%16llx", hex1, &n1), 2);
	ck_assert_str_eq(hex0, hex1);
	ck_assert_uint_ne(n1, n0);
	ck_assert_uint_ne(n1, n0 + 1);	/* 1 in 2^64 by chance */
}
END_TEST

/* Session ids do not count the sessions either. */
START_TEST(session_ids_do_not_count)
{
	struct session *a = NULL, *b = NULL;
	ck_assert_int_eq(session_get(table, NULL, 1000, ws, &a), 0);
	ck_assert_int_eq(session_get(table, NULL, 2000, ws, &b), 0);
	unsigned long long na = 0, nb = 0;
	char ha[9] = "", hb[9] = "";
	ck_assert_int_eq(sscanf(a->id, "s-%8[0-9a-f]-%16llx", ha, &na), 2);
	ck_assert_int_eq(sscanf(b->id, "s-%8[0-9a-f]-%16llx", hb, &nb), 2);
	ck_assert_str_eq(ha, hb);
	ck_assert_uint_ne(nb, na + 1);
	ck_assert_uint_ne(nb, na);
	session_unref(a);
	session_unref(b);
}
END_TEST

/* The hiding is a bijection: the first 65,536 counts give as many ids,
 * none equal to its count; another key gives others. */
START_TEST(id_hide_is_one_to_one)
{
	static const uint32_t key[4] = { 1, 2, 3, 4 }, other[4] = { 1, 2, 3, 5 };
	enum { N = 65536 };
	uint64_t *ids = xcalloc(N, sizeof(*ids));
	unsigned same = 0;
	for (uint64_t n = 0; n < N; n++) {
		ids[n] = id_hide(n, key);
		ck_assert_uint_ne(ids[n], n);
		same += ids[n] == id_hide(n, other);
	}
	ck_assert_uint_eq(same, 0);
	qsort(ids, N, sizeof(*ids), u64_cmp);
	for (size_t i = 1; i < N; i++)
		ck_assert_uint_ne(ids[i], ids[i - 1]);
	free(ids);
	char hex[16], *end = hex + sizeof(hex);
	ck_assert_ptr_eq(fmt_hex64(end, 0x0123456789abcdefULL), hex);
	ck_assert_int_eq(memcmp(hex, "0123456789abcdef", 16), 0);
}
END_TEST

START_TEST(validation_reports_every_error)
{
	ck_assert_ptr_null(call("echo", "{\"n\":1.5,\"x\":1}", NULL, &recs[0]));
	ck_assert_int_eq(recs[0].kind, TC_VALIDATION_ERROR);
	ck_assert_ptr_nonnull(strstr(recs[0].message, "Invalid arguments for 'echo': "));
	ck_assert_ptr_nonnull(strstr(recs[0].message, "path"));
	ck_assert_ptr_nonnull(strstr(recs[0].message, "/n"));
	ck_assert_ptr_nonnull(strstr(recs[0].message, "x"));
	ck_assert_uint_eq(exec_count, 0);
}
END_TEST

START_TEST(arguments_as_json_string)
{
	struct json_doc *doc = NULL;
	const char *msg = "{\"a\":\"{\\\"path\\\":\\\"x\\\"}\",\"b\":\"{\\\"path\\\": \"}";
	ck_assert_int_eq(json_parse(msg, strlen(msg), 0, 0, &doc, NULL), 0);
	struct call_params p = { .tool = "echo", .timeout_ms = -1, .budget = -1, .doc = doc };
	p.arguments = json_get(json_doc_root(doc), "a");
	ck_assert_ptr_null(dispatch_call(d, sess, &p, &ops, &recs[0]));
	ck_assert_int_eq(recs[0].kind, TC_OK);
	p.arguments = json_get(json_doc_root(doc), "b");
	ck_assert_ptr_null(dispatch_call(d, sess, &p, &ops, &recs[1]));
	ck_assert_int_eq(recs[1].kind, TC_VALIDATION_ERROR);
	ck_assert_ptr_nonnull(strstr(recs[1].message, "not valid JSON"));
	ck_assert_ptr_nonnull(strstr(recs[1].message, "at byte 9"));
	json_doc_unref(doc);
}
END_TEST

/* --- timeouts and retries ------------------------------------------------ */

START_TEST(transient_retries_with_backoff)
{
	ck_assert_ptr_nonnull(call("slow", "{}", NULL, &recs[0]));
	ck_assert_uint_eq(exec_count, 1);
	complete_first(TC_TRANSIENT);
	/* 100 ms × (1 + U[0, 0.5]) with U = 0: exactly 100 ms. */
	fakeloop_advance(loop, 99);
	ck_assert_uint_eq(exec_count, 1);
	fakeloop_advance(loop, 1);
	ck_assert_uint_eq(exec_count, 2);
	complete_first(TC_TRANSIENT);
	fakeloop_advance(loop, 399);
	ck_assert_uint_eq(exec_count, 2);
	fakeloop_advance(loop, 1);
	ck_assert_uint_eq(exec_count, 3);
	complete_first(TC_TRANSIENT);
	/* Three attempts is the most: the last error stands. */
	ck_assert(recs[0].done);
	ck_assert_int_eq(recs[0].kind, TC_TRANSIENT);
	ck_assert_uint_eq(recs[0].attempts, 3);
	fakeloop_advance(loop, 10000);
	ck_assert_uint_eq(exec_count, 3);
}
END_TEST

START_TEST(jitter_stays_within_half)
{
	fakeloop_set_random(loop, UINT32_MAX);
	call("slow", "{}", NULL, &recs[0]);
	complete_first(TC_TRANSIENT);
	fakeloop_advance(loop, 149);
	ck_assert_uint_eq(exec_count, 1);
	fakeloop_advance(loop, 1);
	ck_assert_uint_eq(exec_count, 2);
	complete_first(TC_TRANSIENT);
	fakeloop_advance(loop, 599);
	ck_assert_uint_eq(exec_count, 2);
	fakeloop_advance(loop, 1);
	ck_assert_uint_eq(exec_count, 3);
	complete_first(TC_OK);
	ck_assert_int_eq(recs[0].kind, TC_OK);
	ck_assert_uint_eq(recs[0].attempts, 3);
}
END_TEST

START_TEST(execution_error_does_not_retry)
{
	call("slow", "{}", NULL, &recs[0]);
	complete_first(TC_EXECUTION_ERROR);
	ck_assert_int_eq(recs[0].kind, TC_EXECUTION_ERROR);
	ck_assert_uint_eq(recs[0].attempts, 1);
	fakeloop_advance(loop, 10000);
	ck_assert_uint_eq(exec_count, 1);
}
END_TEST

START_TEST(timeout_not_retried_for_non_idempotent)
{
	call("slow", "{}", NULL, &recs[0]);
	fakeloop_advance(loop, 999);
	ck_assert(!recs[0].done);
	fakeloop_advance(loop, 1);
	ck_assert(recs[0].done);
	ck_assert_int_eq(recs[0].kind, TC_TIMEOUT);
	ck_assert_str_eq(recs[0].message, "Tool 'slow' exceeded its 1000 ms limit");
	ck_assert_uint_eq(recs[0].attempts, 1);
	ck_assert_uint_eq(cancel_count, 1);
	ck_assert_uint_eq(exec_count, 1);
}
END_TEST

START_TEST(timeout_retried_for_idempotent)
{
	call("slow_idem", "{}", NULL, &recs[0]);
	fakeloop_advance(loop, 1000);	/* attempt 1 times out */
	fakeloop_advance(loop, 100);	/* backoff */
	ck_assert_uint_eq(exec_count, 2);
	fakeloop_advance(loop, 1000);
	fakeloop_advance(loop, 400);
	ck_assert_uint_eq(exec_count, 3);
	fakeloop_advance(loop, 1000);
	ck_assert_int_eq(recs[0].kind, TC_TIMEOUT);
	ck_assert_uint_eq(recs[0].attempts, 3);
	ck_assert_uint_eq(cancel_count, 3);
}
END_TEST

START_TEST(per_call_timeout_overrides)
{
	struct json_doc *doc = NULL;
	ck_assert_int_eq(json_parse("{}", 2, 0, 0, &doc, NULL), 0);
	struct call_params p = { .tool = "slow", .arguments = json_doc_root(doc), .doc = doc,
				 .timeout_ms = 50, .budget = -1 };
	dispatch_call(d, sess, &p, &ops, &recs[0]);
	json_doc_unref(doc);
	fakeloop_advance(loop, 49);
	ck_assert(!recs[0].done);
	fakeloop_advance(loop, 1);
	ck_assert_int_eq(recs[0].kind, TC_TIMEOUT);
}
END_TEST

/* --- budgets -------------------------------------------------------------- */

START_TEST(session_budget_stops_calls_before_they_run)
{
	sess->has_budget = true;
	sess->budget_left = 1;
	ck_assert_ptr_null(call("echo", "{\"path\":\"a\"}", NULL, &recs[0]));
	ck_assert_int_eq(recs[0].kind, TC_OK);
	ck_assert_ptr_null(call("echo", "{\"path\":\"a\"}", NULL, &recs[1]));
	ck_assert_int_eq(recs[1].kind, TC_BUDGET_EXCEEDED);
	ck_assert_uint_eq(recs[1].attempts, 0);
	ck_assert_uint_eq(exec_count, 1);
}
END_TEST

START_TEST(budget_exhausted_before_retry_returns_last_error)
{
	struct json_doc *doc = NULL;
	ck_assert_int_eq(json_parse("{}", 2, 0, 0, &doc, NULL), 0);
	struct call_params p = { .tool = "slow", .arguments = json_doc_root(doc), .doc = doc,
				 .timeout_ms = -1, .budget = 2 };
	dispatch_call(d, sess, &p, &ops, &recs[0]);
	p.budget = 0;
	dispatch_call(d, sess, &p, &ops, &recs[1]);
	json_doc_unref(doc);
	ck_assert_int_eq(recs[1].kind, TC_BUDGET_EXCEEDED);
	complete_first(TC_TRANSIENT);
	fakeloop_advance(loop, 100);
	complete_first(TC_TRANSIENT);
	fakeloop_advance(loop, 400);
	ck_assert(recs[0].done);
	ck_assert_int_eq(recs[0].kind, TC_TRANSIENT);
	ck_assert_uint_eq(recs[0].attempts, 2);
	ck_assert_uint_eq(exec_count, 2);
}
END_TEST

/* --- idempotency ----------------------------------------------------------- */

START_TEST(joiners_share_one_execution)
{
	struct caller *c[20];
	for (int i = 0; i < 20; i++)
		c[i] = call("slow", "{\"a\":1,\"b\":2}", "k1", &recs[i]);
	for (int i = 0; i < 20; i++)
		ck_assert_ptr_nonnull(c[i]);
	ck_assert_uint_eq(exec_count, 1);
	complete_first(TC_OK);
	for (int i = 0; i < 20; i++) {
		ck_assert(recs[i].done);
		ck_assert_int_eq(recs[i].kind, TC_OK);
		ck_assert(!recs[i].replayed);
		ck_assert_str_eq(recs[i].call_id, recs[0].call_id);
	}
	/* Afterwards: replayed, key order ignored. */
	ck_assert_ptr_null(call("slow", "{\"b\":2,\"a\":1}", "k1", &recs[20]));
	ck_assert(recs[20].replayed);
	ck_assert_str_eq(recs[20].call_id, recs[0].call_id);
	ck_assert_uint_eq(exec_count, 1);
}
END_TEST

START_TEST(key_reuse_with_other_arguments_conflicts)
{
	call("slow", "{\"a\":1}", "k", &recs[0]);
	ck_assert_ptr_null(call("slow", "{\"a\":2}", "k", &recs[1]));
	ck_assert_int_eq(recs[1].kind, TC_IDEMPOTENCY_CONFLICT);
	ck_assert_ptr_null(call("writer", "{\"a\":1}", "k", &recs[2]));
	ck_assert_int_eq(recs[2].kind, TC_IDEMPOTENCY_CONFLICT);
	complete_first(TC_OK);
	ck_assert_ptr_null(call("slow", "{\"a\":2}", "k", &recs[3]));
	ck_assert_int_eq(recs[3].kind, TC_IDEMPOTENCY_CONFLICT);
}
END_TEST

START_TEST(kept_outcomes_expire_after_ttl)
{
	call("slow", "{}", "k", &recs[0]);
	complete_first(TC_OK);
	fakeloop_advance(loop, 59999);
	ck_assert_ptr_null(call("slow", "{}", "k", &recs[1]));
	ck_assert(recs[1].replayed);
	fakeloop_advance(loop, 1);
	ck_assert_ptr_nonnull(call("slow", "{}", "k", &recs[2]));
	ck_assert_uint_eq(exec_count, 2);
}
END_TEST

/* A synchronous tool answers inside dispatch_call, keyed (the memory
 * store grants the claim at once, and the execution starts from its
 * answer) or not: the caller is not handed back, since it is gone. */
START_TEST(synchronous_calls_answered_inside)
{
	ck_assert_ptr_null(call("echo", "{\"path\":\"a\"}", NULL, &recs[0]));
	ck_assert(recs[0].done);
	ck_assert_int_eq(recs[0].kind, TC_OK);
	ck_assert_ptr_null(call("echo", "{\"path\":\"a\"}", "k", &recs[1]));
	ck_assert(recs[1].done);
	ck_assert(!recs[1].replayed);
	ck_assert_ptr_null(call("echo", "{\"path\":\"a\"}", "k", &recs[2]));
	ck_assert(recs[2].done && recs[2].replayed);
	ck_assert_uint_eq(exec_count, 2);
	/* An asynchronous keyed call waits, and is handed back. */
	ck_assert_ptr_nonnull(call("slow_idem", "{\"n\":1}", "s", &recs[3]));
	ck_assert(!recs[3].done);
	complete_first(TC_OK);
	ck_assert(recs[3].done);
}
END_TEST

/* Kept outcomes are bounded by bytes too: a large one pushes the least
 * recently used out, and one larger than the bound is not kept. */
START_TEST(cache_is_bounded_in_bytes)
{
	struct dispatch_config cfg;
	dispatch_config_defaults(&cfg);
	cfg.idem_max_bytes = 4000;
	dispatch_set_config(d, &cfg);
	call("echo", "{\"path\":\"a\"}", "a", &recs[0]);
	ck_assert_ptr_null(call("echo", "{\"path\":\"a\"}", "a", &recs[1]));
	ck_assert(recs[1].replayed);
	ck_assert_uint_eq(exec_count, 1);
	char big[6000];
	memset(big, 'x', sizeof(big));
	char *args = xasprintf("{\"path\":\"%.*s\"}", 5000, big);
	call("echo", args, "b", &recs[2]);
	ck_assert_uint_eq(exec_count, 2);
	/* b (over 5000 bytes) did not fit: it went, and a before it. */
	call("echo", args, "b", &recs[3]);
	ck_assert(!recs[3].replayed);
	ck_assert_uint_eq(exec_count, 3);
	call("echo", "{\"path\":\"a\"}", "a", &recs[4]);
	ck_assert(!recs[4].replayed);
	ck_assert_uint_eq(exec_count, 4);
	free(args);
}
END_TEST

START_TEST(cache_is_bounded_lru)
{
	struct dispatch_config cfg;
	dispatch_config_defaults(&cfg);
	cfg.idem_max_entries = 2;
	dispatch_set_config(d, &cfg);
	call("echo", "{\"path\":\"1\"}", "a", &recs[0]);
	call("echo", "{\"path\":\"2\"}", "b", &recs[1]);
	call("echo", "{\"path\":\"1\"}", "a", &recs[2]);	/* a is now the most recent */
	ck_assert(recs[2].replayed);
	call("echo", "{\"path\":\"3\"}", "c", &recs[3]);	/* evicts b */
	call("echo", "{\"path\":\"2\"}", "b", &recs[4]);
	ck_assert(!recs[4].replayed);
	ck_assert_uint_eq(exec_count, 4);
}
END_TEST

START_TEST(disconnect_keeps_keyed_execution)
{
	struct caller *c = call("slow", "{}", "k", &recs[0]);
	dispatch_detach(c);
	ck_assert_uint_eq(cancel_count, 0);
	complete_first(TC_OK);
	ck_assert(!recs[0].done);	/* detached: never answered */
	ck_assert_ptr_null(call("slow", "{}", "k", &recs[1]));
	ck_assert(recs[1].replayed);
	ck_assert_int_eq(recs[1].kind, TC_OK);
	ck_assert_uint_eq(exec_count, 1);
}
END_TEST

START_TEST(disconnect_cancels_unkeyed_execution)
{
	struct caller *c = call("slow", "{}", NULL, &recs[0]);
	dispatch_detach(c);
	ck_assert_uint_eq(cancel_count, 1);
	ck_assert(!recs[0].done);
}
END_TEST

START_TEST(explicit_cancel_detaches_until_none_left)
{
	struct caller *a = call("slow", "{}", "k", &recs[0]);
	struct caller *b = call("slow", "{}", "k", &recs[1]);
	dispatch_cancel(a, false);
	ck_assert(!recs[0].done);
	ck_assert_uint_eq(cancel_count, 0);
	dispatch_cancel(b, true);
	ck_assert(recs[1].done);
	ck_assert_int_eq(recs[1].kind, TC_CANCELLED);
	ck_assert_uint_eq(cancel_count, 1);
	/* Cancelled outcomes are not kept. */
	ck_assert_ptr_nonnull(call("slow", "{}", "k", &recs[2]));
	ck_assert_uint_eq(exec_count, 2);
}
END_TEST

/* A stop (a restart) ends the calls in flight cancelled, marked with
 * data.restart for their callers to send again, and runs nothing after
 * it; a client's own cancel carries no such mark. */
START_TEST(stop_ends_calls_cancelled)
{
	call("slow", "{}", NULL, &recs[3]);
	ck_assert_uint_eq(dispatch_cancel_session(d, sess), 1);
	ck_assert_int_eq(recs[3].kind, TC_CANCELLED);
	ck_assert(!recs[3].restart);
	call("slow", "{}", NULL, &recs[0]);
	call("slow", "{}", "k", &recs[1]);
	dispatch_stop_all(d, "toolcalld is stopping; retry");
	for (int i = 0; i < 2; i++) {
		ck_assert(recs[i].done);
		ck_assert_int_eq(recs[i].kind, TC_CANCELLED);
		ck_assert(recs[i].restart);
		ck_assert_str_eq(recs[i].message, "toolcalld is stopping; retry");
		ck_assert_uint_eq(recs[i].attempts, 1);
	}
	ck_assert_uint_eq(cancel_count, 1 + 2);
	ck_assert_uint_eq(dispatch_inflight(d), 0);
	ck_assert_ptr_null(call("slow", "{}", NULL, &recs[2]));
	ck_assert_int_eq(recs[2].kind, TC_CANCELLED);
	ck_assert(recs[2].restart);
	ck_assert_uint_eq(recs[2].attempts, 0);
	ck_assert_uint_eq(exec_count, 1 + 2);
}
END_TEST

START_TEST(session_cancel_answers_every_call)
{
	call("slow", "{}", NULL, &recs[0]);
	call("slow", "{}", NULL, &recs[1]);
	ck_assert_uint_eq(dispatch_cancel_session(d, sess), 2);
	ck_assert_int_eq(recs[0].kind, TC_CANCELLED);
	ck_assert_int_eq(recs[1].kind, TC_CANCELLED);
	ck_assert_uint_eq(cancel_count, 2);
	ck_assert_uint_eq(dispatch_inflight(d), 0);
}
END_TEST

/* Cancelling a session's running call frees its slot: the session's
 * queued calls are cancelled without ever starting (no attempt, no budget
 * spent). */
START_TEST(session_cancel_does_not_start_queued_calls)
{
	struct dispatch_config cfg;
	dispatch_config_defaults(&cfg);
	cfg.session_concurrency = 1;
	dispatch_set_config(d, &cfg);
	call("slow", "{}", NULL, &recs[0]);
	call("slow", "{}", NULL, &recs[1]);
	call("slow", "{}", NULL, &recs[2]);
	ck_assert_uint_eq(exec_count, 1);
	ck_assert_uint_eq(dispatch_cancel_session(d, sess), 3);
	ck_assert_uint_eq(exec_count, 1);
	ck_assert_uint_eq(cancel_count, 1);
	ck_assert_int_eq(recs[1].kind, TC_CANCELLED);
	ck_assert_uint_eq(recs[1].attempts, 0);
	ck_assert_uint_eq(recs[2].attempts, 0);
	/* Slots are free again: the next call runs at once. */
	call("slow", "{}", NULL, &recs[3]);
	ck_assert_uint_eq(exec_count, 2);
}
END_TEST

/* The same for a connection that goes away with calls running and queued. */
START_TEST(detach_does_not_start_queued_calls)
{
	struct dispatch_config cfg;
	dispatch_config_defaults(&cfg);
	cfg.session_concurrency = 1;
	dispatch_set_config(d, &cfg);
	struct caller *a = call("slow", "{}", NULL, &recs[0]);
	struct caller *b = call("slow", "{}", NULL, &recs[1]);
	ck_assert_uint_eq(exec_count, 1);
	dispatch_hold(d);
	dispatch_detach(a);
	dispatch_detach(b);
	dispatch_release(d);
	ck_assert_uint_eq(exec_count, 1);
	ck_assert_uint_eq(dispatch_inflight(d), 0);
}
END_TEST

/* --- concurrency ------------------------------------------------------------ */

START_TEST(session_cap_queues_fifo)
{
	for (int i = 0; i < 6; i++)
		call("slow", "{}", NULL, &recs[i]);
	ck_assert_uint_eq(exec_count, 4);
	complete_first(TC_OK);
	ck_assert_uint_eq(exec_count, 5);
	ck_assert(recs[0].done);
	complete_first(TC_OK);
	ck_assert_uint_eq(exec_count, 6);
	while (n_pending)
		complete_first(TC_OK);
	for (int i = 0; i < 6; i++)
		ck_assert_int_eq(recs[i].kind, TC_OK);
}
END_TEST

START_TEST(queue_overflow_is_overloaded)
{
	struct dispatch_config cfg;
	dispatch_config_defaults(&cfg);
	cfg.session_concurrency = 1;
	cfg.queue_max = 2;
	dispatch_set_config(d, &cfg);
	for (int i = 0; i < 4; i++)
		call("slow", "{}", NULL, &recs[i]);
	ck_assert_uint_eq(exec_count, 1);
	ck_assert(!recs[1].done);
	ck_assert(!recs[2].done);
	ck_assert_int_eq(recs[3].kind, TC_OVERLOADED);
}
END_TEST

/* queue_max bounds the calls that wait, not those that can run: with 0,
 * a call runs when a slot is free and is refused only when it would wait. */
START_TEST(queue_max_zero_runs_what_can_run)
{
	struct dispatch_config cfg;
	dispatch_config_defaults(&cfg);
	cfg.session_concurrency = 1;
	cfg.queue_max = 0;
	dispatch_set_config(d, &cfg);
	call("slow", "{}", NULL, &recs[0]);
	ck_assert_uint_eq(exec_count, 1);
	ck_assert(!recs[0].done);
	call("slow", "{}", NULL, &recs[1]);
	ck_assert_int_eq(recs[1].kind, TC_OVERLOADED);
	complete_first(TC_OK);
	ck_assert_int_eq(recs[0].kind, TC_OK);
	call("slow", "{}", NULL, &recs[2]);
	ck_assert_uint_eq(exec_count, 2);
	ck_assert(!recs[2].done);
}
END_TEST

/* limits.queue_max_total bounds what waits in all sessions together. */
START_TEST(queue_max_total_is_overloaded)
{
	struct dispatch_config cfg;
	dispatch_config_defaults(&cfg);
	cfg.session_concurrency = 1;
	cfg.queue_max = 10;
	cfg.queue_max_total = 2;
	dispatch_set_config(d, &cfg);
	for (int i = 0; i < 4; i++)
		call("slow", "{}", NULL, &recs[i]);
	ck_assert_uint_eq(exec_count, 1);
	ck_assert(!recs[1].done);
	ck_assert(!recs[2].done);
	ck_assert_int_eq(recs[3].kind, TC_OVERLOADED);
	ck_assert_msg(strstr(recs[3].message, "all sessions"), "%s", recs[3].message);
	/* One ends, one starts: room to wait again. */
	complete_first(TC_OK);
	ck_assert_uint_eq(exec_count, 2);
	call("slow", "{}", NULL, &recs[4]);
	ck_assert(!recs[4].done);
}
END_TEST

START_TEST(timeout_clock_starts_with_the_attempt)
{
	struct dispatch_config cfg;
	dispatch_config_defaults(&cfg);
	cfg.session_concurrency = 1;
	dispatch_set_config(d, &cfg);
	call("slow", "{}", NULL, &recs[0]);
	call("slow", "{}", NULL, &recs[1]);
	fakeloop_advance(loop, 900);
	complete_first(TC_OK);
	/* The second waited 900 ms in the queue; its 1000 ms start now. */
	fakeloop_advance(loop, 999);
	ck_assert(!recs[1].done);
	fakeloop_advance(loop, 1);
	ck_assert_int_eq(recs[1].kind, TC_TIMEOUT);
}
END_TEST

/* --- circuit breaker -------------------------------------------------------- */

START_TEST(circuit_opens_and_probe_closes)
{
	for (int i = 0; i < 5; i++) {
		call("prog", "{}", NULL, &recs[i]);
		complete_first(TC_EXECUTION_ERROR);
	}
	ck_assert_ptr_null(call("prog", "{}", NULL, &recs[5]));
	ck_assert_int_eq(recs[5].kind, TC_CIRCUIT_OPEN);
	ck_assert_uint_eq(recs[5].retry_after, 30000);
	fakeloop_advance(loop, 30000);
	ck_assert_ptr_nonnull(call("prog", "{}", NULL, &recs[6]));	/* the probe */
	ck_assert_ptr_null(call("prog", "{}", NULL, &recs[7]));
	ck_assert_int_eq(recs[7].kind, TC_CIRCUIT_OPEN);
	complete_first(TC_OK);
	ck_assert_int_eq(recs[6].kind, TC_OK);
	ck_assert_ptr_nonnull(call("prog", "{}", NULL, &recs[8]));
	/* Another tool was never affected. */
	ck_assert_ptr_null(call("echo", "{\"path\":\"x\"}", NULL, &recs[9]));
	ck_assert_int_eq(recs[9].kind, TC_OK);
}
END_TEST

START_TEST(old_failures_leave_the_window)
{
	for (int i = 0; i < 4; i++) {
		call("prog", "{}", NULL, &recs[i]);
		complete_first(TC_EXECUTION_ERROR);
	}
	fakeloop_advance(loop, 30001);
	call("prog", "{}", NULL, &recs[4]);
	complete_first(TC_EXECUTION_ERROR);
	ck_assert_ptr_nonnull(call("prog", "{}", NULL, &recs[5]));
}
END_TEST

START_TEST(failed_probe_reopens)
{
	for (int i = 0; i < 5; i++) {
		call("prog", "{}", NULL, &recs[i]);
		complete_first(TC_TRANSIENT);
		fakeloop_advance(loop, 100);
		complete_first(TC_TRANSIENT);
		fakeloop_advance(loop, 400);
		complete_first(TC_TRANSIENT);
	}
	fakeloop_advance(loop, 30000);
	call("prog", "{}", NULL, &recs[5]);
	complete_first(TC_EXECUTION_ERROR);
	ck_assert_ptr_null(call("prog", "{}", NULL, &recs[6]));
	ck_assert_int_eq(recs[6].kind, TC_CIRCUIT_OPEN);
}
END_TEST

/* --- confirmation ------------------------------------------------------------ */

START_TEST(no_approver_denies_at_once)
{
	policy.by_class[SIDE_WRITE] = CONFIRM_PROMPT;
	ck_assert_ptr_null(call("writer", "{}", NULL, &recs[0]));
	ck_assert_int_eq(recs[0].kind, TC_USER_DENIED);
	ck_assert_ptr_nonnull(strstr(recs[0].message, "toolcallctl approve"));
	ck_assert_uint_eq(exec_count, 0);
}
END_TEST

START_TEST(approver_allows_then_always)
{
	policy.by_class[SIDE_WRITE] = CONFIRM_PROMPT;
	const char *pats[] = { "tool.confirmation_*", NULL };
	struct subscriber *sub = event_subscribe(&bus, pats, 1000, "*", on_event, NULL);
	call("writer", "{\"x\":1}", NULL, &recs[0]);
	ck_assert_uint_eq(exec_count, 0);
	char *id = requested_id();
	ck_assert_ptr_nonnull(id);
	ck_assert_uint_eq(count_events("\"sideEffect\":\"write\""), 1);
	bool accepted;
	const char *dec;
	ck_assert_int_eq(dispatch_resolve(d, 1001, id, "allow", &accepted, &dec), -ENOENT);
	ck_assert_int_eq(dispatch_resolve(d, 1000, id, "maybe", &accepted, &dec), -EINVAL);
	ck_assert_int_eq(dispatch_resolve(d, 1000, id, "always_allow", &accepted, &dec), 0);
	ck_assert(accepted);
	ck_assert_uint_eq(exec_count, 1);
	/* First write wins. */
	ck_assert_int_eq(dispatch_resolve(d, 1000, id, "deny", &accepted, &dec), 0);
	ck_assert(!accepted);
	ck_assert_str_eq(dec, "always_allow");
	ck_assert_uint_eq(count_events("tool.confirmation_resolved"), 1);
	complete_first(TC_OK);
	ck_assert_int_eq(recs[0].kind, TC_OK);
	/* always_allow: the rest of the session runs without asking. */
	call("writer", "{}", NULL, &recs[1]);
	ck_assert_uint_eq(exec_count, 2);
	ck_assert_uint_eq(count_events("tool.confirmation_requested"), 1);
	free(id);
	event_unsubscribe(sub);
}
END_TEST

START_TEST(approver_denies)
{
	policy.by_class[SIDE_WRITE] = CONFIRM_PROMPT;
	struct subscriber *sub = event_subscribe(&bus, NULL, 1000, "*", on_event, NULL);
	call("writer", "{}", NULL, &recs[0]);
	char *id = requested_id();
	bool accepted;
	const char *dec;
	ck_assert_int_eq(dispatch_resolve(d, 1000, id, "deny", &accepted, &dec), 0);
	ck_assert_int_eq(recs[0].kind, TC_USER_DENIED);
	ck_assert_uint_eq(exec_count, 0);
	ck_assert_uint_eq(count_events("\"kind\":\"user_denied\""), 1);
	free(id);
	event_unsubscribe(sub);
}
END_TEST

START_TEST(confirmation_times_out)
{
	policy.by_class[SIDE_WRITE] = CONFIRM_PROMPT;
	struct subscriber *sub = event_subscribe(&bus, NULL, 1000, "*", on_event, NULL);
	call("writer", "{}", NULL, &recs[0]);
	fakeloop_advance(loop, 299999);
	ck_assert(!recs[0].done);
	fakeloop_advance(loop, 1);
	ck_assert_int_eq(recs[0].kind, TC_CONFIRMATION_TIMEOUT);
	ck_assert_uint_eq(exec_count, 0);
	event_unsubscribe(sub);
}
END_TEST

START_TEST(policy_deny_is_permission_denied)
{
	policy.by_class[SIDE_WRITE] = CONFIRM_DENY;
	ck_assert_ptr_null(call("writer", "{}", NULL, &recs[0]));
	ck_assert_int_eq(recs[0].kind, TC_PERMISSION_DENIED);
	ck_assert(!dispatch_tool_visible(d, sess, registry_find(reg, "writer")));
	ck_assert(dispatch_tool_visible(d, sess, registry_find(reg, "slow")));
	/* Hidden tools are not offered in not_found either. */
	call("nope", "{}", NULL, &recs[1]);
	ck_assert_str_eq(recs[1].message, "Tool 'nope' not found. Available: [capped, echo, prog, slow, slow_idem]");
}
END_TEST

/* --- events ------------------------------------------------------------------- */

START_TEST(events_follow_the_call)
{
	struct subscriber *sub = event_subscribe(&bus, NULL, 1000, "*", on_event, NULL);
	call("slow", "{}", NULL, &recs[0]);
	complete_first(TC_TRANSIENT);
	fakeloop_advance(loop, 100);
	complete_first(TC_OK);
	ck_assert_uint_eq(count_events("\"type\":\"tool.called\""), 1);
	ck_assert_uint_eq(count_events("\"sideEffect\":\"read\""), 1);
	ck_assert_uint_eq(count_events("\"type\":\"dispatch.attempt\""), 2);
	ck_assert_uint_eq(count_events("\"type\":\"dispatch.retry\""), 1);
	ck_assert_uint_eq(count_events("\"type\":\"tool.completed\""), 1);
	/* Another uid sees nothing of it. */
	event_unsubscribe(sub);
	n_events = 0;
	sub = event_subscribe(&bus, NULL, 1001, "*", on_event, NULL);
	call("echo", "{\"path\":\"x\"}", NULL, &recs[1]);
	ck_assert_uint_eq(n_events, 0);
	event_unsubscribe(sub);
}
END_TEST


/* The answer of a success is valid JSON with every field, whatever bytes
 * the tool's text holds. */
START_TEST(result_is_valid_json)
{
	struct outcome o = { .refs = 1, .kind = TC_OK, .attempts = 2, .duration_ms = 7 };
	o.text = xstrdup("line\n\"q\" \xff\x01 end");
	o.structured = xstrdup("{\"a\":1}");
	o.call_id = xstrdup("c-1");
	struct buf b = {0};
	outcome_write_result(&o, true, &b);
	struct json_doc *doc = NULL;
	ck_assert_msg(json_parse(buf_head(&b), buf_size(&b), 0, 0, &doc, NULL) == 0, "%s", buf_head(&b));
	const struct json *r = json_doc_root(doc);
	const struct json *item = json_get(r, "content")->u.arr.items[0];
	ck_assert_str_eq(json_str(json_get(item, "type")), "text");
	ck_assert_str_eq(json_str(json_get(item, "text")), "line\n\"q\" \xef\xbf\xbd\x01 end");
	ck_assert(json_equal(json_get(r, "structuredContent"), json_get(r, "structuredContent")));
	int64_t v;
	ck_assert(json_get_int(json_get(json_get(r, "structuredContent"), "a"), &v) && v == 1);
	ck_assert(!json_is_true(json_get(r, "isError")));
	const struct json *meta = json_get(r, "_meta");
	ck_assert_str_eq(json_str(json_get(meta, "toolcalld/callId")), "c-1");
	ck_assert(json_get_int(json_get(meta, "toolcalld/attempts"), &v) && v == 2);
	ck_assert(json_get_int(json_get(meta, "toolcalld/durationMs"), &v) && v == 7);
	ck_assert(json_is_true(json_get(meta, "toolcalld/replayed")));
	json_doc_unref(doc);
	buf_free(&b);
	/* No text: the structured content is the text. */
	free(o.text);
	o.text = NULL;
	outcome_write_result(&o, false, &b);
	ck_assert_int_eq(json_parse(buf_head(&b), buf_size(&b), 0, 0, &doc, NULL), 0);
	item = json_get(json_doc_root(doc), "content")->u.arr.items[0];
	ck_assert_str_eq(json_str(json_get(item, "text")), "{\"a\":1}");
	json_doc_unref(doc);
	buf_free(&b);
	free(o.structured);
	free(o.call_id);
}
END_TEST

/* The data of an error: our members, then the tool's own, in one object;
 * extra members that are not an object add nothing. */
START_TEST(error_data_carries_the_tools_members)
{
	struct outcome o = { .refs = 1, .kind = TC_VALIDATION_ERROR, .attempts = 1, .duration_ms = 3 };
	o.call_id = xstrdup("c-1");
	o.tool = xstrdup("write_file");
	o.error_data = xstrdup("{\"errors\":[{\"path\":\"/content\",\"message\":\"caf\xc3\xa9 \\\"q\\\"\"}],"
			       "\"n\":1.50}");
	struct buf b = {0};
	outcome_write_error_data(&o, true, &b);
	ck_assert_str_eq(buf_head(&b), "{\"kind\":\"validation_error\",\"retryable\":false,\"attempts\":1,"
			 "\"durationMs\":3,\"callId\":\"c-1\",\"tool\":\"write_file\",\"replayed\":true,"
			 "\"errors\":[{\"path\":\"/content\",\"message\":\"caf\xc3\xa9 \\\"q\\\"\"}],\"n\":1.50}");
	buf_free(&b);
	free(o.error_data);
	o.error_data = xstrdup("{}");
	o.kind = TC_CIRCUIT_OPEN;
	o.retry_after_ms = 900;
	outcome_write_error_data(&o, false, &b);
	ck_assert_str_eq(buf_head(&b), "{\"kind\":\"circuit_open\",\"retryable\":true,\"attempts\":1,"
			 "\"durationMs\":3,\"callId\":\"c-1\",\"tool\":\"write_file\",\"retryAfterMs\":900}");
	buf_free(&b);
	free(o.error_data);
	o.error_data = xstrdup("[1,2]");
	outcome_write_error_data(&o, false, &b);
	ck_assert_str_eq(buf_head(&b), "{\"kind\":\"circuit_open\",\"retryable\":true,\"attempts\":1,"
			 "\"durationMs\":3,\"callId\":\"c-1\",\"tool\":\"write_file\",\"retryAfterMs\":900}");
	buf_free(&b);
	free(o.error_data);
	free(o.call_id);
	free(o.tool);
}
END_TEST

/* A validation_error whose tool named no argument still carries
 * data.errors: one entry, path "", the message; its other members stay. */
START_TEST(validation_error_data_always_has_errors)
{
	struct outcome o = { .refs = 1, .kind = TC_VALIDATION_ERROR };
	o.message = xstrdup("bad \"x\"");
	o.error_data = xstrdup("{\"output\":\"o\"}");
	struct buf b = {0};
	outcome_write_error_data(&o, false, &b);
	ck_assert_str_eq(buf_head(&b), "{\"kind\":\"validation_error\",\"retryable\":false,\"attempts\":0,"
			 "\"durationMs\":0,\"callId\":null,\"tool\":null,\"output\":\"o\","
			 "\"errors\":[{\"path\":\"\",\"message\":\"bad \\\"x\\\"\"}]}");
	buf_free(&b);
	/* An empty array is no list of errors either. */
	free(o.error_data);
	o.error_data = xstrdup("{\"errors\":[]}");
	outcome_write_error_data(&o, false, &b);
	ck_assert_ptr_nonnull(strstr(buf_head(&b), "\"errors\":[{\"path\":\"\",\"message\":\"bad"));
	buf_free(&b);
	free(o.error_data);
	o.error_data = NULL;
	outcome_write_error_data(&o, false, &b);
	ck_assert_ptr_nonnull(strstr(buf_head(&b), "\"errors\":[{\"path\":\"\",\"message\":\"bad"));
	buf_free(&b);
	/* Other kinds are left as they are. */
	o.kind = TC_EXECUTION_ERROR;
	outcome_write_error_data(&o, false, &b);
	ck_assert_ptr_null(strstr(buf_head(&b), "errors"));
	buf_free(&b);
	free(o.message);
}
END_TEST

static Suite *dispatch_suite(void)
{
	Suite *s = suite_create("dispatch");
	struct {
		const char *name;
		const TTest *tests[16];
	} groups[] = {
		{ "lookup", { unknown_tool_lists_available, call_ids_distinct_and_shaped, id_hide_is_one_to_one,
			      session_ids_do_not_count, validation_reports_every_error, arguments_as_json_string } },
		{ "retry", { transient_retries_with_backoff, jitter_stays_within_half,
			     execution_error_does_not_retry, timeout_not_retried_for_non_idempotent,
			     timeout_retried_for_idempotent, per_call_timeout_overrides } },
		{ "budget", { session_budget_stops_calls_before_they_run,
			      budget_exhausted_before_retry_returns_last_error } },
		{ "idempotency", { synchronous_calls_answered_inside, joiners_share_one_execution, key_reuse_with_other_arguments_conflicts,
				   kept_outcomes_expire_after_ttl, cache_is_bounded_lru, cache_is_bounded_in_bytes,
				   disconnect_keeps_keyed_execution, disconnect_cancels_unkeyed_execution,
				   explicit_cancel_detaches_until_none_left, session_cancel_answers_every_call,
				   stop_ends_calls_cancelled } },
		{ "caps", { session_cap_queues_fifo, queue_overflow_is_overloaded, queue_max_zero_runs_what_can_run,
			    queue_max_total_is_overloaded,
			    timeout_clock_starts_with_the_attempt, session_cancel_does_not_start_queued_calls,
			    detach_does_not_start_queued_calls } },
		{ "circuit", { circuit_opens_and_probe_closes, old_failures_leave_the_window,
			       failed_probe_reopens } },
		{ "confirmation", { no_approver_denies_at_once, approver_allows_then_always, approver_denies,
				    confirmation_times_out, policy_deny_is_permission_denied } },
		{ "events", { events_follow_the_call } },
		{ "answers", { result_is_valid_json, error_data_carries_the_tools_members, validation_error_data_always_has_errors } },
	};
	for (size_t g = 0; g < sizeof(groups) / sizeof(groups[0]); g++) {
		TCase *tc = tcase_create(groups[g].name);
		tcase_add_checked_fixture(tc, setup, teardown);
		for (size_t i = 0; groups[g].tests[i]; i++)
			tcase_add_test(tc, groups[g].tests[i]);
		suite_add_tcase(s, tc);
	}
	return s;
}

int main(void)
{
	return run_suite(dispatch_suite());
}
