/* SPDX-License-Identifier: MIT */
/*
 * The process table on a fake clock (lib/process/): the ring and what it
 * drops, a read position per session, until over new output, wait timers,
 * the keep delay after the end, and the text helpers (escape sequences,
 * signal names). Processes here are made without a child: the table's
 * bookkeeping is what is tested; tests/integ/test_processes.c runs real
 * ones.
 */
#include <check.h>
#include <signal.h>
#include <string.h>
#include <stdio.h>
#include <time.h>

#include "lib/process/process_internal.h"
#include "lib/regex/regex.h"
#include "lib/session.h"
#include "proto/json.h"
#include "tests/unit/check_main.h"
#include "tests/unit/fakeloop.h"

struct fixture {
	struct tc_loop *loop;
	struct process_table *t;
	struct tool_env env;
};

static unsigned finished;

static void on_finish(struct tool_call *c)
{
	finished++;
}

static void fx_init(struct fixture *fx, size_t ring)
{
	fx->loop = fakeloop_new();
	fx->t = process_table_new(fx->loop, NULL);
	struct process_limits l = PROCESS_LIMITS_DEFAULT;
	l.buffer_bytes = ring;
	l.keep_ms = 1000;
	process_table_set_limits(fx->t, &l);
	fx->env = (struct tool_env){ .processes = fx->t };
	finished = 0;
}

static void fx_free(struct fixture *fx)
{
	process_table_free(fx->t);
	fakeloop_free(fx->loop);
}

/* A call of session sid (its args parsed from json). */
static struct json_doc *call_init(struct fixture *fx, struct tool_call *c, struct session *s, const char *sid,
				  const char *json)
{
	*s = (struct session){ .id = (char *)sid, .uid = 1000 };
	struct json_doc *doc = NULL;
	ck_assert_int_eq(json_parse(json, strlen(json), 0, 64, &doc, NULL), 0);
	*c = (struct tool_call){ .args = json_doc_root(doc), .loop = fx->loop, .env = &fx->env, .session = s,
				 .on_finish = on_finish };
	return doc;
}

static const char *structured_str(struct tool_call *c, const char *key, struct json_doc **doc)
{
	ck_assert_ptr_nonnull(c->structured);
	ck_assert_int_eq(json_parse(c->structured, strlen(c->structured), 0, 64, doc, NULL), 0);
	const struct json *v = json_get(json_doc_root(*doc), key);
	return v && v->type == JSON_STRING ? v->u.str.s : NULL;
}

static int64_t structured_int(struct tool_call *c, const char *key)
{
	struct json_doc *doc = NULL;
	structured_str(c, key, &doc);
	int64_t v = -1;
	json_get_int(json_get(json_doc_root(doc), key), &v);
	json_doc_unref(doc);
	return v;
}

START_TEST(ring_drops_and_positions_are_per_session)
{
	struct fixture fx;
	fx_init(&fx, 8);
	struct tool_call c;
	struct session s;
	struct json_doc *args = call_init(&fx, &c, &s, "A", "{}");
	struct process *p = proc_new(fx.t, &c, "cmd");
	proc_output(p, "0123", 4);
	/* Session A reads the four bytes. */
	proc_result(&c, p, PROC_WAIT_IO, 64);
	struct json_doc *doc = NULL;
	ck_assert_str_eq(structured_str(&c, "output", &doc), "0123");
	json_doc_unref(doc);
	ck_assert_int_eq(structured_int(&c, "dropped_bytes"), 0);
	tool_call_clear(&c);

	/* Ten more: the ring of 8 keeps the last 8; A missed 6 of them. */
	proc_output(p, "456789abcd", 10);
	ck_assert_int_eq(proc_ring_start(p), 6);
	proc_result(&c, p, PROC_WAIT_IO, 64);
	ck_assert_str_eq(structured_str(&c, "output", &doc), "6789abcd");
	json_doc_unref(doc);
	ck_assert_int_eq(structured_int(&c, "dropped_bytes"), 2);
	tool_call_clear(&c);

	/* Session B starts from what the ring holds, capped by max_bytes. */
	struct tool_call cb;
	struct session sb;
	struct json_doc *args_b = call_init(&fx, &cb, &sb, "B", "{}");
	proc_result(&cb, p, PROC_WAIT_IO, 3);
	ck_assert_str_eq(structured_str(&cb, "output", &doc), "678");
	json_doc_unref(doc);
	ck_assert_int_eq(structured_int(&cb, "dropped_bytes"), 6);
	ck_assert_int_eq(structured_int(&cb, "unread_bytes"), 5);
	tool_call_clear(&cb);
	proc_result(&cb, p, PROC_WAIT_IO, 64);
	ck_assert_str_eq(structured_str(&cb, "output", &doc), "9abcd");
	json_doc_unref(doc);
	tool_call_clear(&cb);
	/* max_bytes never cuts a character: the rest waits. */
	proc_output(p, "x\xc3\xa9", 3);
	proc_result(&cb, p, PROC_WAIT_IO, 2);
	ck_assert_str_eq(structured_str(&cb, "output", &doc), "x");
	json_doc_unref(doc);
	ck_assert_int_eq(structured_int(&cb, "unread_bytes"), 2);
	tool_call_clear(&cb);
	proc_result(&cb, p, PROC_WAIT_IO, 2);
	ck_assert_str_eq(structured_str(&cb, "output", &doc), "\xc3\xa9");
	json_doc_unref(doc);
	tool_call_clear(&cb);
	json_doc_unref(args);
	json_doc_unref(args_b);
	fx_free(&fx);
}
END_TEST

/* Process ids ("p" and 16 hex digits) do not count the processes, which
 * every uid's share. */
START_TEST(ids_do_not_count)
{
	struct fixture fx;
	fx_init(&fx, 8);
	struct tool_call c;
	struct session s;
	struct json_doc *args = call_init(&fx, &c, &s, "A", "{}");
	struct process *a = proc_new(fx.t, &c, "a"), *b = proc_new(fx.t, &c, "b");
	unsigned long long na = 0, nb = 0;
	int used = 0;
	ck_assert_int_eq(sscanf(a->id, "p%16llx%n", &na, &used), 1);
	ck_assert_uint_eq(strlen(a->id), 17);
	ck_assert_int_eq(used, 17);
	ck_assert_int_eq(sscanf(b->id, "p%16llx", &nb), 1);
	ck_assert_uint_ne(na, nb);
	ck_assert_uint_ne(nb, na + 1);
	tool_call_clear(&c);
	json_doc_unref(args);
	fx_free(&fx);
}
END_TEST

START_TEST(until_and_timers_answer_waiting_calls)
{
	struct fixture fx;
	fx_init(&fx, 1024);
	struct tool_call c;
	struct session s;
	struct json_doc *args = call_init(&fx, &c, &s, "A", "{}");
	struct process *p = proc_new(fx.t, &c, "cmd");
	struct regex *re = NULL;
	ck_assert_int_eq(regex_compile("lis+tening", 10, &re, NULL), 0);
	ck_assert_int_eq(proc_wait(p, &c, PROC_WAIT_IO, 5000, re, 1024, 0), TOOL_PENDING);
	proc_output(p, "starting\nlis", 12);
	ck_assert_uint_eq(finished, 0);
	/* A match across two chunks. */
	proc_output(p, "tening on 8000\n", 15);
	ck_assert_uint_eq(finished, 1);
	struct json_doc *doc = NULL;
	ck_assert_str_eq(structured_str(&c, "output", &doc), "starting\nlistening on 8000\n");
	json_doc_unref(doc);
	tool_call_clear(&c);

	/* After input, until looks only at what comes after it. */
	proc_output(p, ">>> ", 4);
	ck_assert_int_eq(regex_compile(">>> ", 4, &re, NULL), 0);
	ck_assert_int_eq(proc_wait(p, &c, PROC_WAIT_IO, 5000, re, 1024, p->total), TOOL_PENDING);
	proc_output(p, "42\n>>> ", 7);
	ck_assert_uint_eq(finished, 2);
	ck_assert_str_eq(structured_str(&c, "output", &doc), ">>> 42\n>>> ");
	json_doc_unref(doc);
	tool_call_clear(&c);

	/* Without until: the wait ends after wait_ms. */
	ck_assert_int_eq(proc_wait(p, &c, PROC_WAIT_IO, 5000, NULL, 1024, 0), TOOL_PENDING);
	proc_output(p, "more\n", 5);
	fakeloop_advance(fx.loop, 4999);
	ck_assert_uint_eq(finished, 2);
	fakeloop_advance(fx.loop, 1);
	ck_assert_uint_eq(finished, 3);
	ck_assert_str_eq(structured_str(&c, "output", &doc), "more\n");
	json_doc_unref(doc);
	tool_call_clear(&c);

	/* The end answers a kill's wait; the process stays listed keep_ms. */
	ck_assert_int_eq(proc_wait(p, &c, PROC_WAIT_KILL, 0, NULL, 1024, 0), TOOL_PENDING);
	p->end = PROC_END_KILLED;
	proc_ended(p, -1, SIGTERM);
	ck_assert_uint_eq(finished, 4);
	/* As with shell, a result that reports a signal is an error, the
	 * kill's own too. */
	ck_assert(c.is_error);
	ck_assert_str_eq(structured_str(&c, "signal", &doc), "SIGTERM");
	json_doc_unref(doc);
	tool_call_clear(&c);
	struct process_stats st;
	process_table_stats(fx.t, &st);
	ck_assert_uint_eq(st.listed, 1);
	ck_assert_uint_eq(st.killed, 1);
	fakeloop_advance(fx.loop, 1000);
	process_table_stats(fx.t, &st);
	ck_assert_uint_eq(st.listed, 0);
	json_doc_unref(args);
	fx_free(&fx);
}
END_TEST

static double cpu_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* A costly until on busy output, many calls waiting with it: each turn
 * of the loop (here, each output, each advance of 0 ms) spends a bounded
 * time on it, the calls are taken in turn, and a look that takes too
 * long answers with an error instead of burning on. */
START_TEST(until_takes_bounded_time_per_turn)
{
	struct fixture fx;
	fx_init(&fx, 1024 * 1024);
	enum { N = PROC_WAITERS_MAX };
	struct tool_call c[N];
	struct session s[N];
	struct json_doc *args[N];
	struct tool_call c0;
	struct session s0;
	struct json_doc *a0 = call_init(&fx, &c0, &s0, "A", "{}");
	struct process *p = proc_new(fx.t, &c0, "cmd");
	/* Random a and b: "a[ab]{1000}Z" keeps a thousand threads alive. */
	char *chunk = xmalloc(1600);
	uint32_t x = 1;
	for (size_t i = 0; i < 1600; i++) {
		x = x * 1103515245 + 12345;
		chunk[i] = (x >> 16) & 1 ? 'a' : 'b';
	}
	for (int i = 0; i < 64; i++)
		proc_output(p, chunk, 1600);
	double worst = 0;
	for (int i = 0; i < N; i++) {
		char sid[8];
		snprintf(sid, sizeof(sid), "s%d", i);
		args[i] = call_init(&fx, &c[i], &s[i], sid, "{}");
		struct regex *re = NULL;
		ck_assert_int_eq(regex_compile("a[ab]{1000}Z", 12, &re, NULL), 0);
		double t0 = cpu_ms();
		ck_assert_int_eq(proc_wait(p, &c[i], PROC_WAIT_IO, 600000, re, 1024, 0), TOOL_PENDING);
		worst = MAX(worst, cpu_ms() - t0);
	}
	/* More output in the same turn: the turn's share is spent already. */
	for (int i = 0; i < 20; i++) {
		double t0 = cpu_ms();
		proc_output(p, chunk, 1600);
		worst = MAX(worst, cpu_ms() - t0);
	}
	ck_assert_uint_eq(finished, 0);
	/* A turn's share is a few milliseconds, whatever the calls (it was
	 * 64 Mi steps a call and an output: seconds). */
	ck_assert_msg(worst < 40, "a turn took %.1f ms of CPU", worst);
	/* Left to turn on their own, the looks end in errors that say
	 * why. */
	for (int i = 0; i < 600; i++)
		proc_output(p, chunk, 1600);
	double t0 = cpu_ms(), turn_worst = 0;
	for (int i = 0; i < 100000 && finished < N; i++) {
		double t1 = cpu_ms();
		fakeloop_advance(fx.loop, 1);
		turn_worst = MAX(turn_worst, cpu_ms() - t1);
	}
	fprintf(stderr, "until: the longest share %.2f ms, then %.2f ms a turn; all the rest %.0f ms of CPU\n",
		worst, turn_worst, cpu_ms() - t0);
	ck_assert_msg(turn_worst < 40, "a turn took %.1f ms of CPU", turn_worst);
	ck_assert_uint_eq(finished, N);
	ck_assert_msg(worst < 40, "a turn took %.1f ms of CPU", worst);
	for (int i = 0; i < N; i++) {
		ck_assert_int_eq(c[i].kind, TC_VALIDATION_ERROR);
		ck_assert_msg(strstr(c[i].message, "took too long"), "%s", c[i].message);
		tool_call_clear(&c[i]);
		json_doc_unref(args[i]);
	}
	free(chunk);
	json_doc_unref(a0);
	fx_free(&fx);
}
END_TEST

/* The shell call that started a process, whose until costs too much,
 * still returns the process's id, saying why it did not wait longer. */
START_TEST(a_costly_until_of_shell_still_returns_the_id)
{
	struct fixture fx;
	fx_init(&fx, 1024 * 1024);
	struct tool_call c;
	struct session s;
	struct json_doc *args = call_init(&fx, &c, &s, "A", "{}");
	struct process *p = proc_new(fx.t, &c, "cmd");
	struct regex *re = NULL;
	ck_assert_int_eq(regex_compile("a[ab]{1000}Z", 12, &re, NULL), 0);
	ck_assert_int_eq(proc_wait(p, &c, PROC_WAIT_SHELL, 600000, re, 1024, 0), TOOL_PENDING);
	char chunk[1600];
	uint32_t x = 7;
	for (int turn = 0; turn < 100000 && !finished; turn++) {
		for (size_t i = 0; i < sizeof(chunk); i++) {
			x = x * 1103515245 + 12345;
			chunk[i] = (x >> 16) & 1 ? 'a' : 'b';
		}
		proc_output(p, chunk, sizeof(chunk));
		fakeloop_advance(fx.loop, 1);
	}
	ck_assert_uint_eq(finished, 1);
	ck_assert_int_eq(c.kind, TC_OK);
	ck_assert_msg(strstr(c.text, "until took too long"), "%s", c.text);
	struct json_doc *doc = NULL;
	ck_assert_str_eq(structured_str(&c, "process_id", &doc), p->id);
	json_doc_unref(doc);
	tool_call_clear(&c);
	json_doc_unref(args);
	fx_free(&fx);
}
END_TEST

/* until on a terminal's output: an escape sequence or a character cut
 * between two chunks is matched whole. */
START_TEST(until_on_a_terminal_across_chunks)
{
	struct fixture fx;
	fx_init(&fx, 4096);
	struct tool_call c;
	struct session s;
	struct json_doc *args = call_init(&fx, &c, &s, "A", "{}");
	struct process *p = proc_new(fx.t, &c, "cmd");
	p->tty = true;
	struct regex *re = NULL;
	ck_assert_int_eq(regex_compile("ready caf\\u00e9$", 16, &re, NULL), 0);
	ck_assert_int_eq(proc_wait(p, &c, PROC_WAIT_IO, 5000, re, 1024, 0), TOOL_PENDING);
	proc_output(p, "rea\x1b[1", 6);
	proc_output(p, ";32mdy caf\xc3", 11);
	ck_assert_uint_eq(finished, 0);
	proc_output(p, "\xa9", 1);
	ck_assert_uint_eq(finished, 1);
	tool_call_clear(&c);
	ck_assert_uint_eq(proc_terminal_whole("ab\x1b]0;t", 7), 2);
	ck_assert_uint_eq(proc_terminal_whole("ab\x1b]0;t\x07", 8), 8);
	ck_assert_uint_eq(proc_terminal_whole("ab\x1b", 3), 2);
	ck_assert_uint_eq(proc_terminal_whole("ab\xe2\x82", 4), 2);
	ck_assert_uint_eq(proc_terminal_whole("ab\xe2\x82\xac", 5), 5);
	json_doc_unref(args);
	fx_free(&fx);
}
END_TEST

/* Ended processes: their ring cut to what it holds; forgotten over
 * keep_max read out ones first, then the oldest, never one a call waits
 * on, and remembered as forgotten for their uid only. */
START_TEST(ended_ones_are_kept_and_forgotten_in_order)
{
	struct fixture fx;
	fx_init(&fx, 1024);
	struct tool_call c;
	struct session s;
	struct json_doc *args = call_init(&fx, &c, &s, "A", "{}");
	struct process *p[3];
	for (int i = 0; i < 3; i++) {
		p[i] = proc_new(fx.t, &c, "cmd");
		proc_output(p[i], "out\n", 4);
		proc_ended(p[i], 0, 0);
	}
	ck_assert_uint_eq(p[0]->ring_cap, 4);
	ck_assert_uint_eq(proc_count(fx.t, 1000, true), 3);
	ck_assert_uint_eq(proc_count(fx.t, 1000, false), 0);
	/* The second is read out: it goes first, though not the oldest. */
	proc_result(&c, p[1], PROC_WAIT_IO, 64);
	tool_call_clear(&c);
	char id1[32], id0[32], gone[32];
	memcpy(id1, p[1]->id, 32);
	memcpy(id0, p[0]->id, 32);
	ck_assert(proc_forget_one(fx.t, 1000, gone));
	ck_assert_str_eq(gone, id1);
	/* Then the oldest, unread. */
	ck_assert(proc_forget_one(fx.t, 1000, gone));
	ck_assert_str_eq(gone, id0);
	ck_assert(proc_was_forgotten(fx.t, id0, 1000));
	ck_assert(!proc_was_forgotten(fx.t, id0, 1001));
	/* One a call waits on stays. */
	p[2]->n_waiters++;
	ck_assert(!proc_forget_one(fx.t, 1000, gone));
	p[2]->n_waiters--;
	ck_assert(!proc_forget_one(fx.t, 1001, gone));
	json_doc_unref(args);
	fx_free(&fx);
}
END_TEST

static void strip_is(const char *in, const char *want)
{
	struct buf b = {0};
	process_strip_terminal(in, strlen(in), &b);
	ck_assert_str_eq(buf_head(&b) ? buf_head(&b) : "", want);
	buf_free(&b);
}

START_TEST(terminal_text_and_signal_names)
{
	strip_is("\x1b[1;32mok\x1b[0m\r\n", "ok\n");
	strip_is("\x1b]0;title\x07$ ls\r\n", "$ ls\n");
	strip_is("\x1b]8;;http://x\x1b\\link\x1b]8;;\x1b\\", "link");
	strip_is("a\x1b(Bb\x1b=c\bd\x7f", "abcd");
	strip_is("tab\there\n", "tab\there\n");
	strip_is("caf\xc3\xa9 \xff", "caf\xc3\xa9 \xef\xbf\xbd");
	ck_assert_int_eq(process_signal_from_name("TERM"), SIGTERM);
	ck_assert_int_eq(process_signal_from_name("SIGKILL"), SIGKILL);
	ck_assert_int_eq(process_signal_from_name("int"), SIGINT);
	ck_assert_int_eq(process_signal_from_name("9"), 9);
	ck_assert_int_eq(process_signal_from_name("NOPE"), -1);
	ck_assert_int_eq(process_signal_from_name("99"), -1);
}
END_TEST

static Suite *process_suite(void)
{
	Suite *s = suite_create("process");
	TCase *tc = tcase_create("process");
	tcase_add_test(tc, ring_drops_and_positions_are_per_session);
	tcase_add_test(tc, ids_do_not_count);
	tcase_add_test(tc, until_and_timers_answer_waiting_calls);
	tcase_add_test(tc, terminal_text_and_signal_names);
	tcase_add_test(tc, until_takes_bounded_time_per_turn);
	tcase_add_test(tc, until_on_a_terminal_across_chunks);
	tcase_add_test(tc, ended_ones_are_kept_and_forgotten_in_order);
	tcase_add_test(tc, a_costly_until_of_shell_still_returns_the_id);
	tcase_set_timeout(tc, 120);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return run_suite(process_suite());
}
