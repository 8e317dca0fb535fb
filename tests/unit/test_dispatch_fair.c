/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of sharing one dispatcher fairly, on the fake clock: free
 * slots go round-robin across uids, then sessions, FIFO within a session; a
 * call held by its tool's cap holds up no other tool; queues, pending
 * confirmations, idempotency entries and circuits are bounded or kept per
 * uid or session so one peer cannot starve, evict or trip another; retry
 * backoff is capped and holds no slot; an idle dispatcher arms no timer.
 */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "lib/dispatch/dispatch.h"
#include "lib/events.h"
#include "lib/session.h"
#include "tests/unit/check_main.h"
#include "tests/unit/dispatch_fixture.h"
#include "tests/unit/fakeloop.h"

/* A second peer's session. */
static struct session *other;

static void setup_other(void)
{
	setup();
	ck_assert_int_eq(session_get(table, NULL, 2000, ws, &other), 0);
}

static void teardown_other(void)
{
	/* Pending attempts end (in teardown) before the session goes. */
	while (n_pending)
		complete_first(TC_OK);
	other = session_unref(other);
	teardown();
}

/* Sets the default config with the changes stmt makes to c. */
#define WITH_CONFIG(stmt)                             \
	do {                                          \
		struct dispatch_config cfg_;          \
		dispatch_config_defaults(&cfg_);      \
		struct dispatch_config *c = &cfg_;    \
		stmt;                                 \
		dispatch_set_config(d, c);            \
	} while (0)

/* Calls "slow" tagged n for session s. */
static struct caller *slow(struct session *s, int n, struct rec *r)
{
	char args[32];
	snprintf(args, sizeof(args), "{\"n\":%d}", n);
	return call_as(s, "slow", args, NULL, r);
}

/* The tag of the attempt that started last. */
static int64_t last_started(void)
{
	ck_assert_uint_gt(n_pending, 0);
	return pending_tag(n_pending - 1);
}

/* --- fair slots -------------------------------------------------------------- */

/* One uid with many calls queued gets one free slot in turn, like a uid
 * with one: the other uid's call does not wait behind the queue. */
START_TEST(free_slot_goes_round_robin_across_uids)
{
	WITH_CONFIG(c->max_concurrent = 2; c->session_concurrency = 64; c->per_uid_running = 2);
	for (int i = 0; i < 10; i++)
		ck_assert_ptr_nonnull(slow(sess, i, &recs[i]));
	ck_assert_uint_eq(exec_count, 2);
	ck_assert_ptr_nonnull(slow(other, 100, &recs[100]));
	ck_assert_uint_eq(exec_count, 2);
	complete_tag(0, TC_OK);
	ck_assert_int_eq(last_started(), 100);
	/* Then the first uid again, in its order. */
	complete_tag(1, TC_OK);
	ck_assert_int_eq(last_started(), 2);
	complete_tag(100, TC_OK);
	ck_assert_int_eq(last_started(), 3);
}
END_TEST

/* limits.per_uid_running: one uid's calls take three quarters of the
 * slots by default, and the slot left starts the other uid's call as it
 * arrives, without waiting for any call to end. */
START_TEST(no_uid_takes_every_slot)
{
	WITH_CONFIG(c->max_concurrent = 4; c->session_concurrency = 64);
	for (int i = 0; i < 10; i++)
		ck_assert_ptr_nonnull(slow(sess, i, &recs[i]));
	ck_assert_uint_eq(exec_count, 3);
	ck_assert_ptr_nonnull(slow(other, 100, &recs[100]));
	ck_assert_uint_eq(exec_count, 4);
	ck_assert_int_eq(last_started(), 100);
	/* The other uid's call ends: the free slot stays free, the first
	 * uid being at its share; one of its own ending starts its next. */
	complete_tag(100, TC_OK);
	ck_assert_uint_eq(exec_count, 4);
	complete_tag(0, TC_OK);
	ck_assert_uint_eq(exec_count, 5);
	ck_assert_int_eq(last_started(), 3);
	/* A larger share set on reload lets it take the free slot at once. */
	WITH_CONFIG(c->max_concurrent = 4; c->session_concurrency = 64; c->per_uid_running = 4);
	ck_assert_uint_eq(exec_count, 6);
	ck_assert_int_eq(last_started(), 4);
	/* A share of at least one, however few the slots. */
	WITH_CONFIG(c->max_concurrent = 1; c->session_concurrency = 64);
	ck_assert_uint_eq(n_pending, 4);
	for (int i = 0; i < 4; i++)
		complete_first(TC_OK);
	ck_assert_uint_eq(n_pending, 1);
	ck_assert_int_eq(last_started(), 5);
}
END_TEST

/* Within a uid, sessions take turns (one never served goes first); within
 * a session, calls go FIFO. */
START_TEST(sessions_take_turns_fifo_within)
{
	WITH_CONFIG(c->max_concurrent = 1);
	struct session *s2 = NULL;
	ck_assert_int_eq(session_get(table, NULL, 1000, ws, &s2), 0);
	slow(sess, 0, &recs[0]);
	for (int i = 1; i <= 3; i++)
		slow(sess, i, &recs[i]);
	slow(s2, 10, &recs[10]);
	slow(s2, 11, &recs[11]);
	static const int order[] = { 0, 10, 1, 11, 2, 3 };
	for (size_t i = 0; i < ELEMENTSOF(order); i++) {
		ck_assert_uint_eq(n_pending, 1);
		ck_assert_int_eq(pending_tag(0), order[i]);
		complete_first(TC_OK);
	}
	ck_assert_uint_eq(n_pending, 0);
	session_unref(s2);
}
END_TEST

/* A call held back only by its tool's cap does not hold up the calls of
 * other tools behind it, and gets the tool's next slot. */
START_TEST(tool_cap_holds_up_no_other_tool)
{
	call("capped", "{\"n\":1}", NULL, &recs[1]);
	call("capped", "{\"n\":2}", NULL, &recs[2]);
	ck_assert_uint_eq(exec_count, 1);
	slow(sess, 3, &recs[3]);
	ck_assert_uint_eq(exec_count, 2);
	ck_assert_int_eq(last_started(), 3);
	complete_tag(1, TC_OK);
	ck_assert_uint_eq(exec_count, 3);
	ck_assert_int_eq(last_started(), 2);
	complete_tag(2, TC_OK);
	complete_tag(3, TC_OK);
	ck_assert(recs[2].done && recs[3].done);
}
END_TEST

/* limits.per_uid_queue: past it, that uid's calls are overloaded; the
 * other uid's still queue. */
START_TEST(per_uid_queue_is_bounded)
{
	WITH_CONFIG(c->max_concurrent = 1; c->per_uid_queue = 3; c->queue_max = 100);
	struct session *s2 = NULL;
	ck_assert_int_eq(session_get(table, NULL, 1000, ws, &s2), 0);
	slow(sess, 0, &recs[0]);
	slow(sess, 1, &recs[1]);
	slow(s2, 2, &recs[2]);
	slow(s2, 3, &recs[3]);
	ck_assert_ptr_null(slow(s2, 4, &recs[4]));
	ck_assert_int_eq(recs[4].kind, TC_OVERLOADED);
	ck_assert_msg(strstr(recs[4].message, "this user"), "%s", recs[4].message);
	ck_assert_ptr_nonnull(slow(other, 5, &recs[5]));
	ck_assert(!recs[5].done);
	session_unref(s2);
}
END_TEST

/* --- confirmations ------------------------------------------------------------- */

/* limits.session_confirmations: the request past it is overloaded, the
 * other sessions can still ask; waiting for an answer holds no slot. */
START_TEST(pending_confirmations_bounded_hold_no_slot)
{
	WITH_CONFIG(c->max_concurrent = 1; c->session_confirmations = 2);
	policy.by_class[SIDE_WRITE] = CONFIRM_PROMPT;
	struct subscriber *a = event_subscribe(&bus, NULL, 1000, "*", on_event, NULL);
	struct subscriber *b = event_subscribe(&bus, NULL, 2000, "*", on_event, NULL);
	ck_assert_ptr_nonnull(call("writer", "{}", NULL, &recs[0]));
	ck_assert_ptr_nonnull(call("writer", "{}", NULL, &recs[1]));
	ck_assert_ptr_null(call("writer", "{}", NULL, &recs[2]));
	ck_assert_int_eq(recs[2].kind, TC_OVERLOADED);
	ck_assert_ptr_nonnull(call_as(other, "writer", "{}", NULL, &recs[3]));
	ck_assert(!recs[3].done);
	ck_assert_uint_eq(count_events("tool.confirmation_requested"), 3);
	/* Three wait for an answer and the one slot is free. */
	slow(other, 4, &recs[4]);
	ck_assert_uint_eq(exec_count, 1);
	/* Allowed, a call queues for a slot like any other. */
	char *id = requested_id();
	bool accepted;
	const char *dec;
	ck_assert_int_eq(dispatch_resolve(d, 1000, id, "allow", &accepted, &dec), 0);
	ck_assert_uint_eq(exec_count, 1);
	complete_tag(4, TC_OK);
	ck_assert_uint_eq(exec_count, 2);
	/* An answered request makes room for another. */
	ck_assert_ptr_nonnull(call("writer", "{}", NULL, &recs[5]));
	ck_assert(!recs[5].done);
	free(id);
	event_unsubscribe(a);
	event_unsubscribe(b);
}
END_TEST

/* --- idempotency ------------------------------------------------------------------ */

/* idempotency.max_entries holds per uid: a uid flooding keys evicts its
 * own, and the other uid's kept outcome is still replayed. */
START_TEST(idempotency_entries_per_uid)
{
	WITH_CONFIG(c->idem_max_entries = 3);
	call_as(other, "slow", "{}", "mine", &recs[0]);
	complete_first(TC_OK);
	for (int i = 1; i <= 10; i++) {
		char key[16];
		snprintf(key, sizeof(key), "k%d", i);
		call("slow", "{}", key, &recs[i]);
		complete_first(TC_OK);
	}
	unsigned runs = exec_count;
	ck_assert_ptr_null(call_as(other, "slow", "{}", "mine", &recs[20]));
	ck_assert(recs[20].replayed);
	ck_assert_uint_eq(exec_count, runs);
	/* The flooding uid lost its oldest keys, kept its newest. */
	ck_assert_ptr_nonnull(call("slow", "{}", "k1", &recs[21]));
	ck_assert_ptr_null(call("slow", "{}", "k10", &recs[22]));
	ck_assert(recs[22].replayed);
}
END_TEST

/* --- circuit ------------------------------------------------------------------------ */

/* Circuits are per tool and uid: one uid's failures pause the tool for it
 * alone. */
START_TEST(circuit_per_uid)
{
	for (int i = 0; i < 5; i++) {
		call("prog", "{}", NULL, &recs[i]);
		complete_first(TC_EXECUTION_ERROR);
	}
	ck_assert_ptr_null(call("prog", "{}", NULL, &recs[5]));
	ck_assert_int_eq(recs[5].kind, TC_CIRCUIT_OPEN);
	ck_assert_ptr_nonnull(call_as(other, "prog", "{}", NULL, &recs[6]));
	complete_first(TC_OK);
	ck_assert_int_eq(recs[6].kind, TC_OK);
}
END_TEST

/* An execution error of a built-in tool (a file that is missing) is the
 * caller's mistake: it never opens the circuit; timeouts and transient
 * errors still do. */
START_TEST(circuit_ignores_callers_mistakes)
{
	for (int i = 0; i < 10; i++) {
		call("slow", "{}", NULL, &recs[i]);
		complete_first(TC_EXECUTION_ERROR);
	}
	ck_assert_ptr_nonnull(call("slow", "{}", NULL, &recs[10]));
	complete_first(TC_OK);
	WITH_CONFIG(c->max_attempts = 1);
	for (int i = 11; i < 16; i++) {
		call("slow", "{}", NULL, &recs[i]);
		complete_first(TC_TRANSIENT);
	}
	ck_assert_ptr_null(call("slow", "{}", NULL, &recs[16]));
	ck_assert_int_eq(recs[16].kind, TC_CIRCUIT_OPEN);
}
END_TEST

/* --- retries --------------------------------------------------------------------------- */

/* retry.max_delay_ms caps the backoff, jitter included, whatever the
 * number of attempts (base × 4 per attempt would overflow by the 33rd). */
START_TEST(backoff_is_capped)
{
	WITH_CONFIG(c->max_attempts = 100; c->max_delay_ms = 10000);
	fakeloop_set_random(loop, UINT32_MAX);
	call("slow_idem", "{}", NULL, &recs[0]);
	for (unsigned attempt = 1; attempt < 100; attempt++) {
		complete_first(TC_TRANSIENT);
		ck_assert_uint_eq(n_pending, 0);
		uint64_t waited = 0;
		while (!n_pending && waited <= 10000) {
			fakeloop_advance(loop, 50);
			waited += 50;
		}
		ck_assert_msg(n_pending == 1, "attempt %u did not start within 10 s", attempt + 1);
	}
	complete_first(TC_TRANSIENT);
	ck_assert_uint_eq(recs[0].attempts, 100);
}
END_TEST

/* A call waiting out its backoff holds no slot: another call runs
 * meanwhile, and the retry waits its turn for the next free one. */
START_TEST(backoff_holds_no_slot)
{
	WITH_CONFIG(c->max_concurrent = 1);
	slow(sess, 0, &recs[0]);
	slow(other, 1, &recs[1]);
	ck_assert_uint_eq(exec_count, 1);
	complete_tag(0, TC_TRANSIENT);
	ck_assert_uint_eq(exec_count, 2);
	ck_assert_int_eq(last_started(), 1);
	fakeloop_advance(loop, 100);
	ck_assert_uint_eq(n_pending, 1);	/* the retry waits for the slot */
	complete_tag(1, TC_OK);
	ck_assert_int_eq(last_started(), 0);
	complete_tag(0, TC_OK);
	ck_assert_int_eq(recs[0].kind, TC_OK);
	ck_assert_uint_eq(recs[0].attempts, 2);
}
END_TEST

/* --- timers ----------------------------------------------------------------------------- */

/* An idle dispatcher arms no timer; one is armed only for what will
 * expire (a kept outcome, a settled confirmation), and goes with it. */
START_TEST(idle_dispatcher_arms_no_timer)
{
	ck_assert_uint_eq(fakeloop_pending(loop), 0);
	call("echo", "{\"path\":\"x\"}", NULL, &recs[0]);
	ck_assert_uint_eq(fakeloop_pending(loop), 0);
	call("slow", "{}", NULL, &recs[1]);
	complete_first(TC_OK);
	ck_assert_uint_eq(fakeloop_pending(loop), 0);

	call("echo", "{\"path\":\"x\"}", "k", &recs[2]);
	ck_assert_uint_eq(fakeloop_pending(loop), 1);
	fakeloop_advance(loop, 60000);
	ck_assert_uint_eq(fakeloop_pending(loop), 0);
	ck_assert_ptr_null(call("echo", "{\"path\":\"x\"}", "k", &recs[3]));
	ck_assert(!recs[3].replayed);	/* it expired on time */
	fakeloop_advance(loop, 60000);

	policy.by_class[SIDE_WRITE] = CONFIRM_PROMPT;
	struct subscriber *sub = event_subscribe(&bus, NULL, 1000, "*", on_event, NULL);
	call("writer", "{}", NULL, &recs[4]);
	ck_assert_uint_eq(fakeloop_pending(loop), 1);	/* its deadline */
	char *id = requested_id();
	bool accepted;
	const char *dec;
	ck_assert_int_eq(dispatch_resolve(d, 1000, id, "deny", &accepted, &dec), 0);
	ck_assert_uint_eq(fakeloop_pending(loop), 1);	/* the answer is kept a while */
	fakeloop_advance(loop, 60000);
	ck_assert_uint_eq(fakeloop_pending(loop), 0);
	ck_assert_int_eq(dispatch_resolve(d, 1000, id, "allow", &accepted, &dec), -ENOENT);
	free(id);
	event_unsubscribe(sub);
}
END_TEST

static Suite *fair_suite(void)
{
	Suite *s = suite_create("dispatch_fair");
	struct {
		const char *name;
		const TTest *tests[8];
	} groups[] = {
		{ "slots", { free_slot_goes_round_robin_across_uids, sessions_take_turns_fifo_within,
			     tool_cap_holds_up_no_other_tool, per_uid_queue_is_bounded, no_uid_takes_every_slot } },
		{ "confirmations", { pending_confirmations_bounded_hold_no_slot } },
		{ "idempotency", { idempotency_entries_per_uid } },
		{ "circuit", { circuit_per_uid, circuit_ignores_callers_mistakes } },
		{ "retries", { backoff_is_capped, backoff_holds_no_slot } },
		{ "timers", { idle_dispatcher_arms_no_timer } },
	};
	for (size_t g = 0; g < ELEMENTSOF(groups); g++) {
		TCase *tc = tcase_create(groups[g].name);
		tcase_add_checked_fixture(tc, setup_other, teardown_other);
		for (size_t i = 0; groups[g].tests[i]; i++)
			tcase_add_test(tc, groups[g].tests[i]);
		suite_add_tcase(s, tc);
	}
	return s;
}

int main(void)
{
	return run_suite(fair_suite());
}
