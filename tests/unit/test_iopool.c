/* SPDX-License-Identifier: MIT */
/*
 * The io pool on a real libev loop: completions come back on the loop's
 * thread, cancellation drops results, many jobs all complete, and shutdown
 * with jobs pending joins the workers and still runs every completion.
 */
#include <check.h>
#include <ev.h>
#include <pthread.h>
#include <stdatomic.h>
#include <time.h>

#include "lib/base/iopool.h"
#include "lib/base/loop.h"
#include "tests/unit/check_main.h"
#include "tests/unit/loop_spin.h"

struct fixture {
	struct ev_loop *ev;
	struct tc_loop *loop;
	struct iopool *pool;
};

static void setup(struct fixture *f, unsigned threads)
{
	f->ev = ev_loop_new(EVFLAG_AUTO);
	ck_assert_ptr_nonnull(f->ev);
	f->loop = tc_loop_ev_new(f->ev);
	ck_assert_int_eq(iopool_new(f->loop, threads, &f->pool), 0);
}

static void teardown(struct fixture *f)
{
	f->pool = iopool_free(f->pool);
	tc_loop_ev_free(f->loop);
	ev_loop_destroy(f->ev);
}

static bool pool_idle(void *arg)
{
	return iopool_pending(arg) == 0;
}

/* One job's own data: its input, its result and where things ran. */
struct job {
	unsigned in;
	unsigned out;
	pthread_t ran_on;
	bool ran;
	bool completed;
	bool cancelled;
	pthread_t completed_on;
	unsigned *completions;
};

static void square(struct iojob *job, void *arg)
{
	struct job *j = arg;
	j->ran = true;
	j->ran_on = pthread_self();
	j->out = j->in * j->in;
}

static void record_done(void *arg, bool cancelled)
{
	struct job *j = arg;
	ck_assert(!j->completed);	/* exactly once */
	j->completed = true;
	j->cancelled = cancelled;
	j->completed_on = pthread_self();
	if (j->completions)
		(*j->completions)++;
}

START_TEST(completions_run_on_the_loop_thread)
{
	struct fixture f;
	setup(&f, 0);
	enum { N = 64 };
	struct job jobs[N] = { 0 };
	unsigned completions = 0;
	for (unsigned i = 0; i < N; i++) {
		jobs[i] = (struct job){ .in = i, .completions = &completions };
		iopool_submit(f.pool, square, record_done, &jobs[i]);
	}
	ck_assert_uint_eq(iopool_pending(f.pool), N);
	ck_assert(loop_spin(f.ev, pool_idle, f.pool, 10000));
	ck_assert_uint_eq(completions, N);
	for (unsigned i = 0; i < N; i++) {
		ck_assert(jobs[i].ran);
		ck_assert(!jobs[i].cancelled);
		ck_assert_uint_eq(jobs[i].out, i * i);
		ck_assert(!pthread_equal(jobs[i].ran_on, pthread_self()));
		ck_assert(pthread_equal(jobs[i].completed_on, pthread_self()));
	}
	teardown(&f);
}
END_TEST

/* A long job: spins until cancelled, as a list_dir between entries. */
static atomic_bool long_started;

static void until_cancelled(struct iojob *job, void *arg)
{
	struct job *j = arg;
	j->ran = true;
	atomic_store(&long_started, true);
	while (!iojob_cancelled(job)) {
		struct timespec ts = { 0, 1000000 };
		nanosleep(&ts, NULL);	/* polling the flag, not synchronising */
	}
}

static bool long_is_running(void *arg)
{
	return atomic_load(&long_started);
}

START_TEST(cancel_drops_the_result)
{
	struct fixture f;
	setup(&f, 1);
	atomic_store(&long_started, false);
	struct job longj = { 0 }, queued = { .in = 3 }, normal = { .in = 4 };
	struct iojob *lj = iopool_submit(f.pool, until_cancelled, record_done, &longj);
	struct iojob *qj = iopool_submit(f.pool, square, record_done, &queued);
	ck_assert(loop_spin(f.ev, long_is_running, NULL, 10000));
	/* The queued job behind it is cancelled before it starts: it never
	 * runs; the running one sees its flag and stops. */
	iojob_cancel(qj);
	iojob_cancel(lj);
	iopool_submit(f.pool, square, record_done, &normal);
	ck_assert(loop_spin(f.ev, pool_idle, f.pool, 10000));
	ck_assert(longj.completed && longj.cancelled);
	ck_assert(queued.completed && queued.cancelled);
	ck_assert(!queued.ran);
	ck_assert(normal.completed && !normal.cancelled);
	ck_assert_uint_eq(normal.out, 16);
	teardown(&f);
}
END_TEST

START_TEST(many_jobs)
{
	struct fixture f;
	setup(&f, 4);
	enum { N = 20000 };
	struct job *jobs = xcalloc(N, sizeof(*jobs));
	unsigned completions = 0;
	for (unsigned i = 0; i < N; i++) {
		jobs[i] = (struct job){ .in = i % 1000, .completions = &completions };
		iopool_submit(f.pool, square, record_done, &jobs[i]);
	}
	ck_assert(loop_spin(f.ev, pool_idle, f.pool, 60000));
	ck_assert_uint_eq(completions, N);
	for (unsigned i = 0; i < N; i++)
		ck_assert_uint_eq(jobs[i].out, (i % 1000) * (i % 1000));
	free(jobs);
	teardown(&f);
}
END_TEST

START_TEST(shutdown_with_jobs_pending)
{
	struct fixture f;
	setup(&f, 2);
	atomic_store(&long_started, false);
	enum { N = 200 };
	struct job longj = { 0 };
	struct job *jobs = xcalloc(N, sizeof(*jobs));
	unsigned completions = 0;
	longj.completions = &completions;
	iopool_submit(f.pool, until_cancelled, record_done, &longj);
	ck_assert(loop_spin(f.ev, long_is_running, NULL, 10000));
	for (unsigned i = 0; i < N; i++) {
		jobs[i] = (struct job){ .in = i, .completions = &completions };
		iopool_submit(f.pool, square, record_done, &jobs[i]);
	}
	/* Without running the loop: free joins the workers (the long job
	 * stops at its flag) and runs every completion, here, once. */
	f.pool = iopool_free(f.pool);
	ck_assert_uint_eq(completions, N + 1);
	ck_assert(longj.cancelled);
	for (unsigned i = 0; i < N; i++) {
		ck_assert(jobs[i].completed);
		ck_assert(pthread_equal(jobs[i].completed_on, pthread_self()));
		/* It ran before the stop, or is told cancelled (or both:
		 * cancelled while it ran). */
		ck_assert(jobs[i].ran || jobs[i].cancelled);
		if (jobs[i].ran)
			ck_assert_uint_eq(jobs[i].out, i * i);
	}
	free(jobs);
	teardown(&f);
}
END_TEST

START_TEST(thread_count_is_bounded)
{
	struct fixture f = { 0 };
	f.ev = ev_loop_new(EVFLAG_AUTO);
	f.loop = tc_loop_ev_new(f.ev);
	struct iopool *p = NULL;
	ck_assert_int_eq(iopool_new(f.loop, IOPOOL_MAX_THREADS + 1, &p), -EINVAL);
	ck_assert_ptr_null(p);
	teardown(&f);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("iopool");
	TCase *tc = tcase_create("iopool");
	tcase_add_test(tc, completions_run_on_the_loop_thread);
	tcase_add_test(tc, cancel_drops_the_result);
	tcase_add_test(tc, many_jobs);
	tcase_add_test(tc, shutdown_with_jobs_pending);
	tcase_add_test(tc, thread_count_is_bounded);
	suite_add_tcase(s, tc);
	return run_suite(s);
}
