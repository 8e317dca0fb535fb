/* SPDX-License-Identifier: MIT */
/*
 * The circuit breaker of one tool for one uid (lib/dispatch/circuit.c),
 * driven with explicit times: it opens after circuit_failures failures
 * inside the window (older ones do not count), refuses with the time left
 * while open, lets one probe through once the pause is over (half-open)
 * and refuses the rest meanwhile, closes when the probe succeeds and opens
 * again when it fails; only timeouts, transient errors and the execution
 * errors of tools whose errors are their own count; opening and closing
 * are told as events to the session's uid.
 */
#include <check.h>
#include <string.h>

#include "lib/dispatch/dispatch_internal.h"
#include "lib/dispatch/dispatch.h"
#include "lib/events.h"
#include "lib/session.h"
#include "lib/tool.h"
#include "tests/unit/check_main.h"

static struct event_bus bus;
static struct session_table *table;
static struct session *sess;
static struct dispatch_config cfg;
static char events[16][512];
static unsigned n_events;

static const struct tool_def def_file = { .name = "read_file" };
static const struct tool_def def_prog = { .name = "prog", .errors_trip_circuit = true };
static struct tool file_tool = { .name = (char *)"read_file", .def = &def_file };
static struct tool prog_tool = { .name = (char *)"prog", .def = &def_prog };

static bool on_event(void *ctx, const char *params, size_t n)
{
	if (n_events < 16)
		snprintf(events[n_events++], sizeof(events[0]), "%.*s", (int)n, params);
	return true;
}

static unsigned count_events(const char *needle)
{
	unsigned n = 0;
	for (unsigned i = 0; i < n_events; i++)
		n += strstr(events[i], needle) != NULL;
	return n;
}

static void circuit_setup(void)
{
	n_events = 0;
	event_bus_init(&bus);
	table = session_table_new();
	ck_assert_int_eq(session_get(table, NULL, 1000, NULL, &sess), 0);
	ck_assert_ptr_nonnull(event_subscribe(&bus, NULL, 1000, "*", on_event, NULL));
	dispatch_config_defaults(&cfg);
	cfg.circuit_failures = 3;
	cfg.circuit_window_ms = 10000;
	cfg.circuit_open_ms = 5000;
}

static void circuit_teardown(void)
{
	while (!list_empty(&bus.subs))
		event_unsubscribe(list_first(&bus.subs, struct subscriber, node));
	session_unref(sess);
	table = session_table_free(table);
}

/* Records a failure (or success) of t at now, not as a probe. */
static void record(struct circuit *c, struct tool *t, enum tc_kind kind, uint64_t now)
{
	circuit_record(c, &cfg, &bus, sess, t, false, kind, now);
}

/* Whether a call may run at now; *probe and *retry as circuit_allows says. */
static bool allows(struct circuit *c, uint64_t now, bool *probe, uint64_t *retry)
{
	*retry = 0;
	return circuit_allows(c, &cfg, now, retry, probe);
}

START_TEST(opens_after_n_failures_in_the_window)
{
	struct circuit c = {0};
	bool probe;
	uint64_t retry;
	record(&c, &prog_tool, TC_TIMEOUT, 1000);
	record(&c, &prog_tool, TC_TRANSIENT, 2000);
	ck_assert(allows(&c, 2500, &probe, &retry));
	ck_assert(!probe);
	ck_assert_str_eq(circuit_state_name(&c), "closed");
	ck_assert_uint_eq(count_events("circuit.opened"), 0);

	record(&c, &prog_tool, TC_EXECUTION_ERROR, 3000);
	ck_assert_str_eq(circuit_state_name(&c), "open");
	ck_assert_uint_eq(count_events("circuit.opened"), 1);
	ck_assert_ptr_nonnull(strstr(events[0], "\"prog\""));
	/* Refused with the pause's time left. */
	ck_assert(!allows(&c, 4000, &probe, &retry));
	ck_assert_uint_eq(retry, 4000);
	ck_assert(!allows(&c, 7999, &probe, &retry));
	ck_assert_uint_eq(retry, 1);
}
END_TEST

START_TEST(failures_outside_the_window_do_not_count)
{
	struct circuit c = {0};
	bool probe;
	uint64_t retry;
	record(&c, &prog_tool, TC_TIMEOUT, 1000);
	record(&c, &prog_tool, TC_TIMEOUT, 2000);
	/* The first two left the window (10 s) before the third. */
	record(&c, &prog_tool, TC_TIMEOUT, 12500);
	ck_assert_str_eq(circuit_state_name(&c), "closed");
	ck_assert(allows(&c, 12500, &probe, &retry));
	record(&c, &prog_tool, TC_TIMEOUT, 13000);
	ck_assert_str_eq(circuit_state_name(&c), "closed");
	record(&c, &prog_tool, TC_TIMEOUT, 14000);
	ck_assert_str_eq(circuit_state_name(&c), "open");
}
END_TEST

START_TEST(only_failures_of_the_tool_count)
{
	struct circuit c = {0};
	/* A file tool's execution error is the caller's mistake; invalid
	 * arguments and successes never count. */
	for (uint64_t t = 1; t <= 10; t++) {
		record(&c, &file_tool, TC_EXECUTION_ERROR, t);
		record(&c, &prog_tool, TC_VALIDATION_ERROR, t);
		record(&c, &prog_tool, TC_OK, t);
	}
	ck_assert_str_eq(circuit_state_name(&c), "closed");
	/* A file tool's timeouts do. */
	for (uint64_t t = 11; t <= 13; t++)
		record(&c, &file_tool, TC_TIMEOUT, t);
	ck_assert_str_eq(circuit_state_name(&c), "open");
}
END_TEST

START_TEST(half_opens_after_the_pause_and_a_good_probe_closes)
{
	struct circuit c = {0};
	bool probe;
	uint64_t retry;
	for (uint64_t t = 1; t <= 3; t++)
		record(&c, &prog_tool, TC_TIMEOUT, t * 100);
	ck_assert_str_eq(circuit_state_name(&c), "open");
	/* The pause (5 s from the third failure) is over: one probe. */
	ck_assert(allows(&c, 5300, &probe, &retry));
	ck_assert(probe);
	ck_assert_str_eq(circuit_state_name(&c), "half-open");
	/* While it runs, the others wait (at most a second, then ask again). */
	ck_assert(!allows(&c, 5400, &probe, &retry));
	ck_assert(!probe);
	ck_assert_uint_eq(retry, 1000);
	circuit_record(&c, &cfg, &bus, sess, &prog_tool, true, TC_OK, 5500);
	ck_assert_str_eq(circuit_state_name(&c), "closed");
	ck_assert_uint_eq(count_events("circuit.closed"), 1);
	ck_assert(allows(&c, 5600, &probe, &retry));
	ck_assert(!probe);
	/* Closed afresh: the old failures are forgotten. */
	record(&c, &prog_tool, TC_TIMEOUT, 5700);
	record(&c, &prog_tool, TC_TIMEOUT, 5800);
	ck_assert_str_eq(circuit_state_name(&c), "closed");
}
END_TEST

START_TEST(a_failed_probe_opens_it_again)
{
	struct circuit c = {0};
	bool probe;
	uint64_t retry;
	for (uint64_t t = 1; t <= 3; t++)
		record(&c, &prog_tool, TC_TRANSIENT, t);
	ck_assert(allows(&c, 6000, &probe, &retry));
	ck_assert(probe);
	circuit_record(&c, &cfg, &bus, sess, &prog_tool, true, TC_TIMEOUT, 6100);
	ck_assert_str_eq(circuit_state_name(&c), "open");
	ck_assert_uint_eq(count_events("circuit.opened"), 2);
	ck_assert_uint_eq(count_events("circuit.closed"), 0);
	/* A new pause from the probe's failure. */
	ck_assert(!allows(&c, 11000, &probe, &retry));
	ck_assert_uint_eq(retry, 100);
	ck_assert(allows(&c, 11100, &probe, &retry));
	ck_assert(probe);
}
END_TEST

START_TEST(an_aborted_probe_lets_another_through)
{
	struct circuit c = {0};
	bool probe;
	uint64_t retry;
	for (uint64_t t = 1; t <= 3; t++)
		record(&c, &prog_tool, TC_TIMEOUT, t);
	ck_assert(allows(&c, 6000, &probe, &retry));
	ck_assert(probe);
	circuit_probe_abort(&c);
	ck_assert(allows(&c, 6001, &probe, &retry));
	ck_assert(probe);
}
END_TEST

START_TEST(zero_failures_never_opens)
{
	struct circuit c = {0};
	cfg.circuit_failures = 0;
	for (uint64_t t = 1; t <= 100; t++)
		record(&c, &prog_tool, TC_TIMEOUT, t);
	ck_assert_str_eq(circuit_state_name(&c), "closed");
	ck_assert_uint_eq(count_events("circuit.opened"), 0);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("circuit");
	TCase *tc = tcase_create("circuit");
	tcase_add_checked_fixture(tc, circuit_setup, circuit_teardown);
	tcase_add_test(tc, opens_after_n_failures_in_the_window);
	tcase_add_test(tc, failures_outside_the_window_do_not_count);
	tcase_add_test(tc, only_failures_of_the_tool_count);
	tcase_add_test(tc, half_opens_after_the_pause_and_a_good_probe_closes);
	tcase_add_test(tc, a_failed_probe_opens_it_again);
	tcase_add_test(tc, an_aborted_probe_lets_another_through);
	tcase_add_test(tc, zero_failures_never_opens);
	suite_add_tcase(s, tc);
	return run_suite(s);
}
