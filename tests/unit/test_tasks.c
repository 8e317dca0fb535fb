/* SPDX-License-Identifier: MIT */
/*
 * MCP tasks (lib/tasks/tasks.c) on the dispatch fixture's fake clock: a
 * task is working while its call runs, then completed, failed or
 * cancelled with the call's outcome; lookups answer at once or wait for
 * the end; cancel ends the call; an ended task goes ttl later (a working
 * one never does); the ttl is defaulted and capped; tasks of one uid are
 * bounded and another uid sees none of them. Most cases keep tasks in
 * this daemon alone; the last goes through the memory store.
 */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "lib/dispatch/dispatch.h"
#include "lib/session.h"
#include "lib/store/store.h"
#include "lib/tasks/tasks.h"
#include "proto/json.h"
#include "tests/unit/check_main.h"
#include "tests/unit/dispatch_fixture.h"
#include "tests/unit/fakeloop.h"

static struct tasks *tasks;

/* What one answer said. */
struct got {
	unsigned calls;
	int r;
	char json[1024];
	bool has_outcome;
	enum tc_kind kind;
};

static void on_made(void *arg, int r, struct task *k)
{
	struct task **ret = arg;
	ck_assert_int_eq(r, 0);
	*ret = k;
}

static void on_made_r(void *arg, int r, struct task *k)
{
	*(int *)arg = r;
}

static void on_task(void *arg, int r, const char *task_json, size_t n, const struct outcome *o)
{
	struct got *g = arg;
	g->calls++;
	g->r = r;
	g->json[0] = '\0';
	if (task_json)
		snprintf(g->json, sizeof(g->json), "%.*s", (int)n, task_json);
	g->has_outcome = o != NULL;
	g->kind = o ? o->kind : TC_OK;
}

static void make_tasks(const struct tasks_config *cfg)
{
	struct tasks_config def;
	tasks_config_defaults(&def);
	tasks = tasks_new(loop, cfg ? cfg : &def);
}

static void tasks_setup(void)
{
	setup();
	make_tasks(NULL);
}

static void tasks_teardown(void)
{
	tasks = tasks_free(tasks);
	teardown();
}

/* Makes a task of sess's uid whose call is a "slow" run, pending. */
static struct task *task_with_call(int64_t ttl_ms)
{
	struct task *k = NULL;
	/* With a store, the task is made once the store has it: the store's
	 * requests start from a timer of their own. */
	tasks_create(tasks, sess->uid, ttl_ms, on_made, &k);
	fakeloop_advance(loop, 0);
	ck_assert_ptr_nonnull(k);
	struct json_doc *doc = NULL;
	ck_assert_int_eq(json_parse("{\"n\":1}", 7, 0, 0, &doc, NULL), 0);
	struct call_params p = { .tool = "slow", .arguments = json_doc_root(doc), .doc = doc,
				 .timeout_ms = -1, .budget = -1 };
	struct caller *c = dispatch_call(d, sess, &p, &task_caller_ops, k);
	json_doc_unref(doc);
	ck_assert_ptr_nonnull(c);
	task_set_caller(k, c);
	return k;
}

/* Looks id up for uid now; the answer is expected at once. */
static struct got lookup(uid_t uid, const char *id)
{
	struct got g = {0};
	ck_assert_ptr_null(tasks_get(tasks, uid, id, false, on_task, &g));
	ck_assert_uint_eq(g.calls, 1);
	return g;
}

static bool has_status(const struct got *g, const char *status)
{
	char needle[64];
	snprintf(needle, sizeof(needle), "\"status\":\"%s\"", status);
	return strstr(g->json, needle) != NULL;
}

START_TEST(task_works_then_completes_with_its_outcome)
{
	struct task *k = task_with_call(-1);
	char id[64];
	snprintf(id, sizeof(id), "%s", task_id(k));
	ck_assert_uint_eq(n_pending, 1);
	struct got g = lookup(sess->uid, id);
	ck_assert_int_eq(g.r, 0);
	ck_assert(has_status(&g, "working"));
	ck_assert(!g.has_outcome);
	ck_assert_ptr_nonnull(strstr(g.json, id));

	complete_first(TC_OK);
	g = lookup(sess->uid, id);
	ck_assert_int_eq(g.r, 0);
	ck_assert(has_status(&g, "completed"));
	ck_assert(g.has_outcome);
	ck_assert_int_eq(g.kind, TC_OK);
	ck_assert_ptr_null(strstr(g.json, "statusMessage"));
}
END_TEST

START_TEST(task_fails_with_a_message)
{
	struct task *k = task_with_call(-1);
	complete_first(TC_EXECUTION_ERROR);
	struct got g = lookup(sess->uid, task_id(k));
	ck_assert(has_status(&g, "failed"));
	ck_assert_ptr_nonnull(strstr(g.json, "\"statusMessage\":"));
	ck_assert(g.has_outcome);
	ck_assert_int_eq(g.kind, TC_EXECUTION_ERROR);
}
END_TEST

START_TEST(waiting_lookup_is_answered_when_the_task_ends)
{
	struct task *k = task_with_call(-1);
	struct got g = {0};
	ck_assert_ptr_nonnull(tasks_get(tasks, sess->uid, task_id(k), true, on_task, &g));
	ck_assert_uint_eq(g.calls, 0);
	complete_first(TC_OK);
	ck_assert_uint_eq(g.calls, 1);
	ck_assert_int_eq(g.r, 0);
	ck_assert(has_status(&g, "completed"));
	ck_assert(g.has_outcome);
}
END_TEST

START_TEST(cancel_ends_the_call_and_the_task)
{
	struct task *k = task_with_call(-1);
	char id[64];
	snprintf(id, sizeof(id), "%s", task_id(k));
	struct got waiter = {0};
	ck_assert_ptr_nonnull(tasks_get(tasks, sess->uid, id, true, on_task, &waiter));

	struct got g = {0};
	ck_assert_ptr_null(tasks_cancel(tasks, sess->uid, id, on_task, &g));
	ck_assert_uint_eq(g.calls, 1);
	ck_assert_int_eq(g.r, 0);
	ck_assert(has_status(&g, "cancelled"));
	/* The call's attempt was cancelled, and whoever waited heard. */
	ck_assert_uint_eq(cancel_count, 1);
	ck_assert_uint_eq(waiter.calls, 1);
	ck_assert(has_status(&waiter, "cancelled"));

	g = lookup(sess->uid, id);
	ck_assert(has_status(&g, "cancelled"));
	/* An ended task cannot be cancelled again. */
	g = (struct got){0};
	ck_assert_ptr_null(tasks_cancel(tasks, sess->uid, id, on_task, &g));
	ck_assert_int_eq(g.r, -EALREADY);
}
END_TEST

START_TEST(another_uid_sees_nothing)
{
	struct task *k = task_with_call(-1);
	struct got g = lookup(sess->uid + 1, task_id(k));
	ck_assert_int_eq(g.r, -ENOENT);
	g = (struct got){0};
	ck_assert_ptr_null(tasks_cancel(tasks, sess->uid + 1, task_id(k), on_task, &g));
	ck_assert_int_eq(g.r, -ENOENT);
	/* Its call still runs. */
	ck_assert_uint_eq(cancel_count, 0);
	g = lookup(sess->uid, task_id(k));
	ck_assert(has_status(&g, "working"));
}
END_TEST

START_TEST(ended_task_goes_after_its_ttl)
{
	struct task *k = task_with_call(5000);
	char id[64];
	snprintf(id, sizeof(id), "%s", task_id(k));
	complete_first(TC_OK);
	struct got g;
	fakeloop_advance(loop, 4999);
	g = lookup(sess->uid, id);
	ck_assert_int_eq(g.r, 0);
	ck_assert(has_status(&g, "completed"));
	fakeloop_advance(loop, 2);
	g = lookup(sess->uid, id);
	ck_assert_int_eq(g.r, -ENOENT);
}
END_TEST

START_TEST(working_task_outlives_its_ttl)
{
	struct task *k = NULL;
	ck_assert_ptr_null(tasks_create(tasks, sess->uid, 100, on_made, &k));
	ck_assert_ptr_nonnull(k);
	fakeloop_advance(loop, 10000);
	struct got g = lookup(sess->uid, task_id(k));
	ck_assert_int_eq(g.r, 0);
	ck_assert(has_status(&g, "working"));
}
END_TEST

START_TEST(ttl_is_defaulted_and_capped)
{
	struct tasks_config cfg;
	tasks_config_defaults(&cfg);
	cfg.default_ttl_ms = 7000;
	cfg.max_ttl_ms = 60000;
	tasks = tasks_free(tasks);
	make_tasks(&cfg);
	struct task *a = NULL, *b = NULL, *c = NULL;
	ck_assert_ptr_null(tasks_create(tasks, sess->uid, -1, on_made, &a));
	ck_assert_ptr_null(tasks_create(tasks, sess->uid, 1000000000, on_made, &b));
	ck_assert_ptr_null(tasks_create(tasks, sess->uid, 3000, on_made, &c));
	struct got g = lookup(sess->uid, task_id(a));
	ck_assert_ptr_nonnull(strstr(g.json, "\"ttl\":7000,"));
	g = lookup(sess->uid, task_id(b));
	ck_assert_ptr_nonnull(strstr(g.json, "\"ttl\":60000,"));
	g = lookup(sess->uid, task_id(c));
	ck_assert_ptr_nonnull(strstr(g.json, "\"ttl\":3000,"));
}
END_TEST

START_TEST(tasks_of_one_uid_are_bounded)
{
	struct tasks_config cfg;
	tasks_config_defaults(&cfg);
	cfg.max_per_uid = 2;
	tasks = tasks_free(tasks);
	make_tasks(&cfg);
	struct task *a = NULL, *b = NULL, *other = NULL;
	ck_assert_ptr_null(tasks_create(tasks, sess->uid, -1, on_made, &a));
	ck_assert_ptr_null(tasks_create(tasks, sess->uid, -1, on_made, &b));
	int r = 0;
	ck_assert_ptr_null(tasks_create(tasks, sess->uid, -1, on_made_r, &r));
	ck_assert_int_eq(r, -EBUSY);
	/* Another uid has its own bound. */
	ck_assert_ptr_null(tasks_create(tasks, sess->uid + 1, -1, on_made, &other));
	ck_assert_ptr_nonnull(other);
	ck_assert_str_ne(task_id(a), task_id(b));
}
END_TEST

/* Shared through a store (the memory one): made, ended and read back
 * through it. */
START_TEST(through_the_memory_store)
{
	struct store_config sc;
	store_config_defaults(&sc);
	struct store *s = NULL;
	ck_assert_int_eq(store_open(loop, &sc, &outcome_store_ops, &s), 0);
	tasks_set_store(tasks, s);
	struct task *k = task_with_call(5000);
	char id[64];
	snprintf(id, sizeof(id), "%s", task_id(k));
	complete_first(TC_OK);
	fakeloop_advance(loop, 0);
	struct got g = {0};
	tasks_get(tasks, sess->uid, id, false, on_task, &g);
	fakeloop_advance(loop, 0);
	ck_assert_uint_eq(g.calls, 1);
	ck_assert_int_eq(g.r, 0);
	ck_assert(has_status(&g, "completed"));
	ck_assert(g.has_outcome);
	/* An unknown id is asked of the store, which does not know it. */
	g = (struct got){0};
	tasks_get(tasks, sess->uid, "00000000000000000000000000000000", false, on_task, &g);
	fakeloop_advance(loop, 0);
	ck_assert_uint_eq(g.calls, 1);
	ck_assert_int_eq(g.r, -ENOENT);
	tasks = tasks_free(tasks);
	store_free(s);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("tasks");
	TCase *tc = tcase_create("tasks");
	tcase_add_checked_fixture(tc, tasks_setup, tasks_teardown);
	tcase_add_test(tc, task_works_then_completes_with_its_outcome);
	tcase_add_test(tc, task_fails_with_a_message);
	tcase_add_test(tc, waiting_lookup_is_answered_when_the_task_ends);
	tcase_add_test(tc, cancel_ends_the_call_and_the_task);
	tcase_add_test(tc, another_uid_sees_nothing);
	tcase_add_test(tc, ended_task_goes_after_its_ttl);
	tcase_add_test(tc, working_task_outlives_its_ttl);
	tcase_add_test(tc, ttl_is_defaulted_and_capped);
	tcase_add_test(tc, tasks_of_one_uid_are_bounded);
	tcase_add_test(tc, through_the_memory_store);
	suite_add_tcase(s, tc);
	return run_suite(s);
}
