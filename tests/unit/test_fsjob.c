/* SPDX-License-Identifier: MIT */
/*
 * File work of tool calls on the io pool (lib/fsjob/fsjob.h) and the per-thread
 * identity switch under it (lib/files/identity.h): a worker acting as a peer is
 * refused what the peer may not open and creates files the peer owns,
 * while other threads keep the daemon's rights; its credentials are back
 * after the job, so the next job runs as the daemon; cancelled jobs do not
 * start, a running one stops at its next check, and both calls end
 * cancelled; a job in parts shows each on the loop and stops between them;
 * identity_run acts as a peer on a thread of its own, or not at all; a
 * recursive delete goes in parts, after a look through the tree that finds
 * a nested repository before anything goes; protected paths are found
 * where the kernel leads; the daemon's own store is reached by its
 * directory alone. The identity cases need root and skip without it.
 * It is long because every part of the file job shares one fixture and its loop.
 */
#include <check.h>
#include <errno.h>
#include <ev.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "lib/fsjob/fsjob.h"
#include "lib/files/identity.h"
#include "lib/base/iopool.h"
#include "lib/base/loop.h"
#include "lib/sandbox/sandbox.h"
#include "lib/files/workspace.h"
#include "lib/files/workspace_root.h"
#include "lib/files/workspace_internal.h"
#include "proto/base/util.h"
#include "tests/unit/check_main.h"
#include "tests/unit/loop_spin.h"

#define NOBODY 65534

struct fixture {
	struct ev_loop *ev;
	struct tc_loop *loop;
	struct iopool *pool;
	struct workspace *ws;
	struct tool_env env;
	char dir[64];
};

static void setup(struct fixture *f, unsigned threads)
{
	f->ev = ev_loop_new(EVFLAG_AUTO);
	f->loop = tc_loop_ev_new(f->ev);
	ck_assert_int_eq(iopool_new(f->loop, threads, &f->pool), 0);
	strcpy(f->dir, "/tmp/tc-fsjob-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(f->dir));
	ck_assert_int_eq(chmod(f->dir, 0755), 0);
	ck_assert_int_eq(ws_open(f->dir, &f->ws), 0);
	f->env = (struct tool_env){ .pool = f->pool };
}

static void teardown(struct fixture *f)
{
	f->pool = iopool_free(f->pool);
	f->ws = ws_unref(f->ws);
	tc_loop_ev_free(f->loop);
	ev_loop_destroy(f->ev);
	char *cmd = xasprintf("rm -rf '%s'", f->dir);
	ck_assert_int_eq(system(cmd), 0);
	free(cmd);
}

/* What a test job saw and how its call ended. */
struct probe {
	struct tool_call call;
	atomic_bool ran;
	bool done, saw_cancel, wait_for_cancel;
	uid_t fsuid;
	int open_err;		/* errno of opening the secret, 0 when it opened */
	const char *secret;
};

static void probe_finish(struct tool_call *c)
{
	container_of(c, struct probe, call)->done = true;
}

/* On a worker: notes the thread's fsuid, tries the secret, and waits for
 * a cancel when asked to (at most 10 s). */
static int probe_run(struct fsjob *job, void *arg)
{
	struct probe *p = arg;
	atomic_store(&p->ran, true);
	p->fsuid = (uid_t)syscall(SYS_setfsuid, (uid_t)-1);
	if (p->secret) {
		int fd = openat(-1, p->secret, O_RDONLY | O_CLOEXEC);
		p->open_err = fd < 0 ? errno : 0;
		if (fd >= 0)
			close(fd);
	}
	uint64_t end = mono_ms() + 10000;
	while (p->wait_for_cancel && !fsjob_cancelled(job) && mono_ms() < end)
		usleep(1000);
	p->saw_cancel = fsjob_cancelled(job);
	return 0;
}

static void probe_done(struct tool_call *call, void *arg, int r)
{
	tool_call_succeed(call, xstrdup("ok"), NULL, false);
}

static void no_free(void *arg) { }

static const struct fsjob_ops probe_ops = { .run = probe_run, .done = probe_done, .free = no_free };

static void probe_init(struct probe *p, struct fixture *f, const struct identity *id)
{
	*p = (struct probe){ .call = { .ws = f->ws, .env = &f->env, .ident = id, .on_finish = probe_finish } };
}

static bool probe_done_p(void *arg)
{
	return ((struct probe *)arg)->done;
}

static bool probe_ran(void *arg)
{
	return atomic_load(&((struct probe *)arg)->ran);
}

static bool both_done(void *arg)
{
	struct probe *p = arg;
	return p[0].done && p[1].done;
}

/* Writes a root-owned 0600 file in dir; returns its path. */
static char *make_secret(const char *dir)
{
	char *path = xasprintf("%s/secret", dir);
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, "s\n", 2), 2);
	close(fd);
	return path;
}

/* --- the switch on one thread ------------------------------------------- */

struct twin {
	const char *dir, *secret;
	atomic_int step;
	int err_as_peer, err_after;
	uid_t owner;
	bool clean_after;
};

static void wait_step(struct twin *t, int want)
{
	uint64_t end = mono_ms() + 10000;
	while (atomic_load(&t->step) < want && mono_ms() < end)
		usleep(200);
	ck_assert_int_ge(atomic_load(&t->step), want);
}

static void *as_nobody(void *arg)
{
	struct twin *t = arg;
	gid_t groups[] = { NOBODY };
	struct identity id = { .uid = NOBODY, .gid = NOBODY, .groups = groups, .n_groups = 1 };
	struct identity_saved saved;
	if (identity_enter(&id, &saved) < 0)
		return NULL;
	int fd = open(t->secret, O_RDONLY | O_CLOEXEC);
	t->err_as_peer = fd < 0 ? errno : 0;
	if (fd >= 0)
		close(fd);
	char *mine = xasprintf("%s/mine", t->dir);
	fd = open(mine, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	struct stat st = {};
	if (fd >= 0 && fstat(fd, &st) == 0)
		t->owner = st.st_uid;
	if (fd >= 0)
		close(fd);
	free(mine);
	/* The main thread checks its own rights while this one is nobody. */
	atomic_store(&t->step, 1);
	wait_step(t, 2);
	identity_leave(&saved);
	t->clean_after = identity_thread_clean();
	fd = open(t->secret, O_RDONLY | O_CLOEXEC);
	t->err_after = fd < 0 ? errno : 0;
	if (fd >= 0)
		close(fd);
	return NULL;
}

START_TEST(switch_is_per_thread_and_restored)
{
	if (geteuid() != 0)
		TC_SKIP("needs root to act as uid %d", NOBODY);
	char dir[] = "/tmp/tc-ident-XXXXXX";
	ck_assert_ptr_nonnull(mkdtemp(dir));
	ck_assert_int_eq(chmod(dir, 0777), 0);
	char *secret = make_secret(dir);
	struct twin t = { .dir = dir, .secret = secret };
	pthread_t th;
	ck_assert_int_eq(pthread_create(&th, NULL, as_nobody, &t), 0);
	wait_step(&t, 1);
	/* This thread is still root: it reads the secret. */
	int fd = open(secret, O_RDONLY | O_CLOEXEC);
	ck_assert_int_ge(fd, 0);
	close(fd);
	ck_assert(identity_thread_clean());
	atomic_store(&t.step, 2);
	pthread_join(th, NULL);

	ck_assert_int_eq(t.err_as_peer, EACCES);	/* no CAP_DAC_OVERRIDE as nobody */
	ck_assert_uint_eq(t.owner, NOBODY);
	ck_assert(t.clean_after);
	ck_assert_int_eq(t.err_after, 0);		/* rights back after leaving */
	unlink(secret);
	char *mine = xasprintf("%s/mine", dir);
	unlink(mine);
	free(mine);
	rmdir(dir);
	free(secret);
}
END_TEST

static int note_fsuid(void *arg)
{
	*(uid_t *)arg = (uid_t)syscall(SYS_setfsuid, (uid_t)-1);
	return 7;
}

/* identity_run: fn runs as the identity on another thread, the caller
 * never changes; an identity that cannot be taken runs nothing. */
/* A job burning CPU: its worker's niceness at its start, after 20 ms of
 * CPU and after 80 ms (fsjob_cancelled() polled all along). */
struct burner {
	struct tool_call call;
	bool done;
	int nice_start, nice_early, nice_late;
};

static uint64_t cpu_ms_of_thread(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static int burner_run(struct fsjob *job, void *arg)
{
	struct burner *b = arg;
	b->nice_start = getpriority(PRIO_PROCESS, (id_t)gettid());
	uint64_t t0 = cpu_ms_of_thread();
	while (cpu_ms_of_thread() - t0 < 20)
		(void)fsjob_cancelled(job);
	b->nice_early = getpriority(PRIO_PROCESS, (id_t)gettid());
	while (cpu_ms_of_thread() - t0 < 80)
		(void)fsjob_cancelled(job);
	b->nice_late = getpriority(PRIO_PROCESS, (id_t)gettid());
	return 0;
}

static void burner_done(struct tool_call *call, void *arg, int r)
{
	tool_call_succeed(call, xstrdup("ok"), NULL, false);
}

static void burner_finish(struct tool_call *c)
{
	container_of(c, struct burner, call)->done = true;
}

static bool burner_done_p(void *arg)
{
	return ((struct burner *)arg)->done;
}

static const struct fsjob_ops burner_ops = { .run = burner_run, .done = burner_done, .free = no_free };

/* A short job keeps the daemon's priority (a niced one gets a ninth of a
 * busy CPU); one past 50 ms of CPU gives way to the loop; the next job on
 * the same worker starts at the daemon's priority again (root may raise
 * it back). */
START_TEST(short_jobs_keep_their_priority)
{
	struct fixture f;
	setup(&f, 1);
	int base = getpriority(PRIO_PROCESS, 0);
	for (int round = 0; round < 2; round++) {
		struct burner b = { .call = { .ws = f.ws, .env = &f.env, .on_finish = burner_finish } };
		ck_assert_int_eq(fsjob_start(&b.call, &burner_ops, &b), TOOL_PENDING);
		ck_assert(loop_spin(f.ev, burner_done_p, &b, 10000));
		if (round == 0 || geteuid() == 0) {
			ck_assert_int_eq(b.nice_start, base);
			ck_assert_int_eq(b.nice_early, base);
		}
		ck_assert_int_eq(b.nice_late, 10);
		tool_call_clear(&b.call);
	}
	teardown(&f);
}
END_TEST

START_TEST(run_as_on_a_thread_of_its_own)
{
	if (geteuid() != 0)
		TC_SKIP("needs root to act as uid %d", NOBODY);
	gid_t groups[] = { NOBODY };
	struct identity id = { .uid = NOBODY, .gid = NOBODY, .groups = groups, .n_groups = 1, .change = true };
	uid_t seen = 0;
	ck_assert_int_eq(identity_run(&id, note_fsuid, &seen), 7);
	ck_assert_uint_eq(seen, NOBODY);
	ck_assert(identity_thread_clean());

	id.n_groups = IDENTITY_MAX_GROUPS + 1;	/* more than the kernel takes */
	seen = 1;
	ck_assert_int_eq(identity_run(&id, note_fsuid, &seen), -E2BIG);
	ck_assert_uint_eq(seen, 1);
	ck_assert(identity_thread_clean());
}
END_TEST

/* --- jobs on the pool ----------------------------------------------------- */

START_TEST(next_job_runs_as_the_daemon)
{
	if (geteuid() != 0)
		TC_SKIP("needs root to act as uid %d", NOBODY);
	struct fixture f;
	setup(&f, 1);	/* one worker: both jobs on the same thread */
	char *secret = make_secret(f.dir);
	/* run_as "peer": the identity says its work takes its ids. */
	struct identity nobody = { .uid = NOBODY, .gid = NOBODY };
	identity_for_children(&nobody, true);
	ck_assert(nobody.change);
	struct probe p[2];
	probe_init(&p[0], &f, &nobody);
	probe_init(&p[1], &f, NULL);
	p[0].secret = p[1].secret = secret;
	ck_assert_int_eq(fsjob_start(&p[0].call, &probe_ops, &p[0]), TOOL_PENDING);
	ck_assert_int_eq(fsjob_start(&p[1].call, &probe_ops, &p[1]), TOOL_PENDING);
	ck_assert(loop_spin(f.ev, both_done, p, 10000));
	ck_assert_uint_eq(p[0].fsuid, NOBODY);
	ck_assert_int_eq(p[0].open_err, EACCES);
	ck_assert_uint_eq(p[1].fsuid, 0);
	ck_assert_int_eq(p[1].open_err, 0);
	ck_assert_int_eq(p[0].call.kind, TC_OK);

	/* run_as "daemon" (a reload decides again): the peer's job runs as
	 * the daemon. */
	identity_for_children(&nobody, false);
	ck_assert(!nobody.change);
	tool_call_clear(&p[0].call);
	probe_init(&p[0], &f, &nobody);
	p[0].secret = secret;
	ck_assert_int_eq(fsjob_start(&p[0].call, &probe_ops, &p[0]), TOOL_PENDING);
	ck_assert(loop_spin(f.ev, probe_done_p, &p[0], 10000));
	ck_assert_uint_eq(p[0].fsuid, 0);
	ck_assert_int_eq(p[0].open_err, 0);
	tool_call_clear(&p[0].call);
	tool_call_clear(&p[1].call);
	identity_clear(&nobody);
	free(secret);
	teardown(&f);
}
END_TEST

START_TEST(peer_work_never_runs_on_the_loop)
{
	if (geteuid() != 0)
		TC_SKIP("needs root to act as uid %d", NOBODY);
	struct fixture f;
	setup(&f, 1);
	f.env.pool = NULL;
	struct identity nobody = { .uid = NOBODY, .gid = NOBODY, .change = true };
	struct probe p;
	probe_init(&p, &f, &nobody);
	ck_assert_int_eq(fsjob_start(&p.call, &probe_ops, &p), TOOL_DONE);
	ck_assert(!p.ran);
	ck_assert_int_eq(p.call.kind, TC_INTERNAL);
	ck_assert(identity_thread_clean());
	tool_call_clear(&p.call);
	teardown(&f);
}
END_TEST

/* A job tried on the loop first: small work (the probe's "big" false)
 * ends there; big work says FSJOB_NOT_INLINE and goes to a worker; work
 * that takes the peer's identity never runs on the loop. */
struct trial {
	struct probe p;
	bool big;
	int tries_inline, on_worker;
};

static int trial_run(struct fsjob *job, void *arg)
{
	struct trial *t = arg;
	if (fsjob_trying_inline(job)) {
		t->tries_inline++;
		if (t->big)
			return FSJOB_NOT_INLINE;
	}
	if (fsjob_on_worker(job))
		t->on_worker++;
	return probe_run(job, &t->p);
}

static const struct fsjob_ops trial_ops = {
	.run = trial_run, .done = probe_done, .free = no_free, .inline_first = true,
};

START_TEST(small_work_tried_on_the_loop_first)
{
	struct fixture f;
	setup(&f, 1);
	struct trial small = {0}, big = { .big = true };
	probe_init(&small.p, &f, NULL);
	probe_init(&big.p, &f, NULL);
	ck_assert_int_eq(fsjob_start(&small.p.call, &trial_ops, &small), TOOL_DONE);
	ck_assert_int_eq(small.tries_inline, 1);
	ck_assert_int_eq(small.on_worker, 0);
	ck_assert_int_eq(small.p.call.kind, TC_OK);
	ck_assert_int_eq(fsjob_start(&big.p.call, &trial_ops, &big), TOOL_PENDING);
	ck_assert(loop_spin(f.ev, probe_done_p, &big.p, 10000));
	ck_assert_int_eq(big.tries_inline, 1);
	ck_assert_int_eq(big.on_worker, 1);
	ck_assert_int_eq(big.p.call.kind, TC_OK);
	if (geteuid() == 0) {
		struct identity nobody = { .uid = NOBODY, .gid = NOBODY, .change = true };
		struct trial peer = {0};
		probe_init(&peer.p, &f, &nobody);
		ck_assert_int_eq(fsjob_start(&peer.p.call, &trial_ops, &peer), TOOL_PENDING);
		ck_assert(loop_spin(f.ev, probe_done_p, &peer.p, 10000));
		ck_assert_int_eq(peer.tries_inline, 0);
		ck_assert_int_eq(peer.on_worker, 1);
		ck_assert_uint_eq(peer.p.fsuid, NOBODY);
		tool_call_clear(&peer.p.call);
	}
	tool_call_clear(&small.p.call);
	tool_call_clear(&big.p.call);
	teardown(&f);
}
END_TEST

START_TEST(without_a_pool_work_runs_inline)
{
	struct fixture f;
	setup(&f, 1);
	f.env.pool = NULL;
	struct probe p;
	probe_init(&p, &f, NULL);
	ck_assert_int_eq(fsjob_start(&p.call, &probe_ops, &p), TOOL_DONE);
	ck_assert(p.ran);
	ck_assert_int_eq(p.call.kind, TC_OK);
	tool_call_clear(&p.call);
	teardown(&f);
}
END_TEST

/* What a store job did: the directory it was given and what it opened. */
struct store_probe {
	struct tool_call call;
	int scope_r, slash_r, dotdot_r, link_r;
	char root[128];
};

static int store_run(struct fsjob *job, void *arg)
{
	struct store_probe *p = arg;
	snprintf(p->root, sizeof(p->root), "%s", fsjob_ws(job)->root);
	int fd = -1;
	p->scope_r = fsjob_store_dir(job, "memories", &fd);
	if (fd >= 0) {
		int sub = -1;
		/* Beneath it, through the job: no symlink followed. */
		ck_assert_int_eq(symlinkat("/etc", fd, "out"), 0);
		p->link_r = fsjob_open_nofollow(job, fd, "out/passwd", O_RDONLY | O_CLOEXEC, &sub);
		ck_assert_int_eq(sub, -1);
		close(fd);
	}
	p->slash_r = fsjob_store_dir(job, "a/b", &fd);
	p->dotdot_r = fsjob_store_dir(job, "..", &fd);
	return 0;
}

/* The same calls in a job of a workspace: refused. */
static int not_store_run(struct fsjob *job, void *arg)
{
	struct store_probe *p = arg;
	int fd = -1;
	p->scope_r = fsjob_store_dir(job, "memories", &fd);
	return 0;
}

static void store_done(struct tool_call *call, void *arg, int r)
{
	tool_call_succeed(call, xstrdup("ok"), NULL, false);
}

static const struct fsjob_ops store_ops = { .run = store_run, .done = store_done, .free = no_free };
static const struct fsjob_ops not_store_ops = { .run = not_store_run, .done = store_done, .free = no_free };

/* The daemon's own store is reached by its configured directory alone: the
 * job's workspace is DIR/<uid>, made 0700; its scope directories are one
 * component, made 0700, and nothing beneath them follows a symlink; a
 * job of a workspace cannot make one; a uid directory that is not the
 * uid's alone is never used. */
START_TEST(the_store_is_reached_by_its_directory_alone)
{
	struct fixture f;
	setup(&f, 1);
	f.env.pool = NULL;
	_cleanup_free_ char *dir = xasprintf("%s/store/mem", f.dir);
	struct store_probe p = { .call = { .ws = f.ws, .env = &f.env } };
	enum tool_ret ret = TOOL_PENDING;
	ck_assert_int_eq(fsjob_start_store(&p.call, dir, &store_ops, &p, &ret), 0);
	ck_assert_int_eq(ret, TOOL_DONE);
	ck_assert_int_eq(p.call.kind, TC_OK);
	/* The call keeps its own workspace. */
	ck_assert_ptr_eq(p.call.ws, f.ws);
	_cleanup_free_ char *mine = xasprintf("%s/%u", dir, (unsigned)geteuid());
	ck_assert_str_eq(p.root, mine);
	ck_assert_int_eq(p.scope_r, 0);
	_cleanup_free_ char *scope = xasprintf("%s/memories", mine);
	struct stat st;
	ck_assert_int_eq(stat(mine, &st), 0);
	ck_assert_int_eq(st.st_mode & 07777, 0700);
	ck_assert_int_eq(stat(scope, &st), 0);
	ck_assert_int_eq(st.st_mode & 07777, 0700);
	ck_assert_int_eq(p.link_r, -ELOOP);
	ck_assert_int_eq(p.slash_r, -EINVAL);
	ck_assert_int_eq(p.dotdot_r, -EINVAL);
	tool_call_clear(&p.call);

	/* A job of a workspace makes no store directory in it. */
	struct store_probe q = { .call = { .ws = f.ws, .env = &f.env } };
	ck_assert_int_eq(fsjob_start(&q.call, &not_store_ops, &q), TOOL_DONE);
	ck_assert_int_eq(q.scope_r, -EPERM);
	_cleanup_free_ char *in_ws = xasprintf("%s/memories", f.dir);
	ck_assert_int_eq(access(in_ws, F_OK), -1);
	tool_call_clear(&q.call);

	/* Writable by others: refused, the job not started. */
	ck_assert_int_eq(chmod(mine, 0777), 0);
	struct store_probe r = { .call = { .ws = f.ws, .env = &f.env } };
	ck_assert_int_eq(fsjob_start_store(&r.call, dir, &store_ops, &r, &ret), -EPERM);
	ck_assert_str_eq(r.root, "");
	tool_call_clear(&r.call);
	teardown(&f);
}
END_TEST

START_TEST(cancel_stops_running_and_queued_jobs)
{
	struct fixture f;
	setup(&f, 1);
	struct probe p[2];
	probe_init(&p[0], &f, NULL);
	probe_init(&p[1], &f, NULL);
	p[0].wait_for_cancel = true;
	ck_assert_int_eq(fsjob_start(&p[0].call, &probe_ops, &p[0]), TOOL_PENDING);
	ck_assert_int_eq(fsjob_start(&p[1].call, &probe_ops, &p[1]), TOOL_PENDING);
	/* The queued one is cancelled first: it never runs. */
	fsjob_cancel(&p[1].call);
	ck_assert(loop_spin(f.ev, probe_ran, &p[0], 10000));
	uint64_t t0 = mono_ms();
	fsjob_cancel(&p[0].call);
	ck_assert(loop_spin(f.ev, both_done, p, 10000));
	ck_assert_uint_lt(mono_ms() - t0, 5000);	/* stopped at its check, not at its 10 s bound */
	ck_assert(p[0].ran && p[0].saw_cancel);
	ck_assert(!p[1].ran);
	ck_assert_int_eq(p[0].call.kind, TC_CANCELLED);
	ck_assert_int_eq(p[1].call.kind, TC_CANCELLED);
	ck_assert_ptr_null(p[0].call.state);
	tool_call_clear(&p[0].call);
	tool_call_clear(&p[1].call);
	teardown(&f);
}
END_TEST

START_TEST(shutdown_ends_pending_calls_cancelled)
{
	struct fixture f;
	setup(&f, 1);
	struct probe p[2];
	probe_init(&p[0], &f, NULL);
	probe_init(&p[1], &f, NULL);
	p[0].wait_for_cancel = true;
	ck_assert_int_eq(fsjob_start(&p[0].call, &probe_ops, &p[0]), TOOL_PENDING);
	ck_assert_int_eq(fsjob_start(&p[1].call, &probe_ops, &p[1]), TOOL_PENDING);
	f.pool = iopool_free(f.pool);
	ck_assert(p[0].done && p[1].done);
	ck_assert_int_eq(p[0].call.kind, TC_CANCELLED);
	ck_assert_int_eq(p[1].call.kind, TC_CANCELLED);
	tool_call_clear(&p[0].call);
	tool_call_clear(&p[1].call);
	teardown(&f);
}
END_TEST

/* --- jobs in parts -------------------------------------------------------- */

/* A job of `parts` parts: which thread ran each, and what the loop saw
 * between them. */
struct parted {
	struct tool_call call;
	bool done;
	int parts, ran, shown;
	bool on_loop;		/* a part ran on the loop's thread */
	pthread_t loop_thread;
	atomic_bool stop_after_first;	/* the test cancels after part 1 */
	atomic_int seen;		/* parts run, as the loop reads it */
};

static void parted_finish(struct tool_call *c)
{
	container_of(c, struct parted, call)->done = true;
}

static int parted_run(struct fsjob *job, void *arg)
{
	struct parted *p = arg;
	if (pthread_equal(pthread_self(), p->loop_thread))
		p->on_loop = true;
	if (fsjob_cancelled(job))
		return -ECANCELED;
	p->ran++;
	atomic_store(&p->seen, p->ran);
	if (atomic_load(&p->stop_after_first)) {
		/* Waits for the cancel (at most 10 s): the next part must not run. */
		uint64_t end = mono_ms() + 10000;
		while (!fsjob_cancelled(job) && mono_ms() < end)
			usleep(1000);
		return FSJOB_AGAIN;
	}
	return p->ran < p->parts ? FSJOB_AGAIN : 0;
}

static void parted_part(struct tool_call *call, void *arg)
{
	struct parted *p = arg;
	ck_assert(pthread_equal(pthread_self(), p->loop_thread));
	p->shown++;
	tool_call_output(call, "stdout", "x", 1);
}

static void parted_done(struct tool_call *call, void *arg, int r)
{
	ck_assert_int_eq(r, 0);
	tool_call_succeed(call, xasprintf("%d parts", ((struct parted *)arg)->ran), NULL, false);
}

static const struct fsjob_ops parted_ops = {
	.run = parted_run, .done = parted_done, .free = no_free, .part = parted_part,
};

static bool parted_done_p(void *arg)
{
	return ((struct parted *)arg)->done;
}

static bool parted_started(void *arg)
{
	return atomic_load(&((struct parted *)arg)->seen) > 0;
}

static void parted_init(struct parted *p, struct fixture *f, int parts)
{
	*p = (struct parted){ .call = { .ws = f->ws, .env = &f->env, .on_finish = parted_finish },
			      .parts = parts, .loop_thread = pthread_self() };
}

/* A job that says FSJOB_AGAIN runs again on a worker, the loop seeing
 * each part in between; without a pool, the parts run inline. */
START_TEST(job_runs_in_parts)
{
	struct fixture f;
	setup(&f, 1);
	struct parted p;
	parted_init(&p, &f, 4);
	ck_assert_int_eq(fsjob_start(&p.call, &parted_ops, &p), TOOL_PENDING);
	ck_assert(loop_spin(f.ev, parted_done_p, &p, 10000));
	ck_assert_int_eq(p.ran, 4);
	ck_assert_int_eq(p.shown, 3);
	ck_assert(!p.on_loop);
	ck_assert_int_eq(p.call.kind, TC_OK);
	tool_call_clear(&p.call);

	f.env.pool = NULL;
	parted_init(&p, &f, 3);
	ck_assert_int_eq(fsjob_start(&p.call, &parted_ops, &p), TOOL_DONE);
	ck_assert_int_eq(p.ran, 3);
	ck_assert_int_eq(p.shown, 2);
	ck_assert_int_eq(p.call.kind, TC_OK);
	tool_call_clear(&p.call);
	teardown(&f);
}
END_TEST

/* Cancelled during a part: no further part runs and the call ends
 * cancelled; at shutdown, a part queued by a completion ends the same. */
START_TEST(cancel_stops_a_job_in_parts)
{
	struct fixture f;
	setup(&f, 1);
	struct parted p;
	parted_init(&p, &f, 100);
	atomic_store(&p.stop_after_first, true);
	ck_assert_int_eq(fsjob_start(&p.call, &parted_ops, &p), TOOL_PENDING);
	ck_assert(loop_spin(f.ev, parted_started, &p, 10000));
	fsjob_cancel(&p.call);
	ck_assert(loop_spin(f.ev, parted_done_p, &p, 10000));
	ck_assert_int_eq(p.ran, 1);
	ck_assert_int_eq(p.shown, 0);
	ck_assert_int_eq(p.call.kind, TC_CANCELLED);
	tool_call_clear(&p.call);

	/* Shutdown while parts go on: the pool ends, the call ends cancelled. */
	parted_init(&p, &f, 1000000);
	ck_assert_int_eq(fsjob_start(&p.call, &parted_ops, &p), TOOL_PENDING);
	ck_assert(loop_spin(f.ev, parted_started, &p, 10000));
	f.pool = iopool_free(f.pool);
	ck_assert(p.done);
	ck_assert_int_eq(p.call.kind, TC_CANCELLED);
	tool_call_clear(&p.call);
	teardown(&f);
}
END_TEST


/* --- deletes in parts, protected paths ---------------------------------- */

/* Makes dir/name with n files in each of n subdirectories. */
static void make_tree(const char *dir, const char *name, int n)
{
	char *top = xasprintf("%s/%s", dir, name);
	ck_assert_int_eq(mkdir(top, 0755), 0);
	for (int i = 0; i < n; i++) {
		char *sub = xasprintf("%s/d%d", top, i);
		ck_assert_int_eq(mkdir(sub, 0755), 0);
		for (int k = 0; k < n; k++) {
			char *p = xasprintf("%s/f%d", sub, k);
			int fd = open(p, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
			ck_assert_int_ge(fd, 0);
			close(fd);
			free(p);
		}
		free(sub);
	}
	free(top);
}

/* A recursive delete goes a part at a time, keeps its place between
 * parts, counts every entry, removes a symlink as itself (never what it
 * leads to) and leaves nothing behind. */
START_TEST(delete_goes_in_parts)
{
	struct fixture f;
	setup(&f, 1);
	make_tree(f.dir, "big", 80);	/* 80 dirs, 6,400 files */
	char *keep = xasprintf("%s/keep", f.dir), *link = xasprintf("%s/big/d0/out", f.dir);
	ck_assert_int_eq(mkdir(keep, 0755), 0);
	ck_assert_int_eq(symlink(keep, link), 0);

	struct ws_deleter *del = NULL;
	ck_assert_int_eq(ws_delete_begin(f.ws, "big", 3, true, &del), WS_MORE);
	int parts = 0, r;
	while ((r = ws_delete_step(del, 1)) == WS_MORE)
		parts++;
	ck_assert_int_eq(r, 0);
	ck_assert_int_gt(parts, 0);
	ck_assert_int_eq(ws_delete_count(del), 6400 + 80 + 1 + 1);
	ws_delete_free(del);
	struct stat st;
	char *big = xasprintf("%s/big", f.dir);
	ck_assert_int_eq(lstat(big, &st), -1);
	ck_assert_int_eq(lstat(keep, &st), 0);

	/* Not recursive: refused, nothing removed, no state to go on with. */
	make_tree(f.dir, "big", 2);
	ck_assert_int_eq(ws_delete_begin(f.ws, "big", 3, false, &del), -ENOTEMPTY);
	ck_assert_int_eq(ws_delete_count(del), 0);
	ws_delete_free(del);
	ck_assert_int_eq(lstat(big, &st), 0);
	/* A file at once. */
	ck_assert_int_eq(ws_delete_begin(f.ws, "big/d1/f1", 9, false, &del), 0);
	ck_assert_int_eq(ws_delete_count(del), 1);
	ws_delete_free(del);
	free(big);
	free(keep);
	free(link);
	teardown(&f);
}
END_TEST

static void touch_at(const char *dir, const char *rel)
{
	char *p = xasprintf("%s/%s", dir, rel);
	int fd = open(p, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
	ck_assert_msg(fd >= 0, "create %s", p);
	close(fd);
	free(p);
}

static void mkdir_at(const char *dir, const char *rel)
{
	char *p = xasprintf("%s/%s", dir, rel);
	ck_assert_msg(mkdir(p, 0755) == 0, "mkdir %s", p);
	free(p);
}

static void symlink_at(const char *dir, const char *target, const char *rel)
{
	char *p = xasprintf("%s/%s", dir, rel);
	ck_assert_msg(symlink(target, p) == 0, "symlink %s", p);
	free(p);
}

/* What writing path as how would touch, or "-". */
static const char *prot(const struct fixture *f, const char *path, enum fsjob_touch how)
{
	static const char *const protect[] = {
		".git/hooks", ".git/config", ".git/commondir", ".git/info", ".git/modules", NULL,
	};
	const char *e = fsjob_protected_in(f->ws, protect, path, strlen(path), how);
	return e ? e : "-";
}

/* Protected paths are found where the kernel leads, existing or not:
 * through "..", through symlinks (a dangling one too, for a write), for a
 * directory that holds one when it is taken whole, and a .git file. */
START_TEST(protected_where_the_kernel_leads)
{
	struct fixture f;
	setup(&f, 1);
	mkdir_at(f.dir, ".git");
	touch_at(f.dir, ".git/config");
	mkdir_at(f.dir, "src");
	symlink_at(f.dir, ".git/hooks", "h");		/* hooks missing yet */
	symlink_at(f.dir, ".git", "g");
	symlink_at(f.dir, ".git/config", "c");
	symlink_at(f.dir, ".git/hooks/pre-commit", "dangling");

	ck_assert_str_eq(prot(&f, "src/a.c", FSJOB_WRITE), "-");
	ck_assert_str_eq(prot(&f, ".git/config", FSJOB_WRITE), ".git/config");
	ck_assert_str_eq(prot(&f, ".git/hooks", FSJOB_MKDIR), ".git/hooks");
	ck_assert_str_eq(prot(&f, ".git/hooks/pre-commit", FSJOB_WRITE), ".git/hooks");
	ck_assert_str_eq(prot(&f, ".git/hooks/a/b/c", FSJOB_MKDIR), ".git/hooks");
	ck_assert_str_eq(prot(&f, "src/../.git/hooks/x", FSJOB_WRITE), ".git/hooks");
	ck_assert_str_eq(prot(&f, "./.git//info/exclude", FSJOB_WRITE), ".git/info");
	ck_assert_str_eq(prot(&f, "h/pre-commit", FSJOB_WRITE), ".git/hooks");
	ck_assert_str_eq(prot(&f, "g/commondir", FSJOB_WRITE), ".git/commondir");
	ck_assert_str_eq(prot(&f, "c", FSJOB_WRITE), ".git/config");
	ck_assert_str_eq(prot(&f, "dangling", FSJOB_WRITE), ".git/hooks");
	/* The link itself, deleted or moved, is not what it leads to. */
	ck_assert_str_eq(prot(&f, "c", FSJOB_TAKE), "-");
	/* .git taken whole takes what it holds; a .git file is a pointer. */
	ck_assert_str_eq(prot(&f, ".git", FSJOB_TAKE), ".git/hooks");
	ck_assert_str_eq(prot(&f, "src/..", FSJOB_TAKE), "-");	/* the root: never taken */
	ck_assert_str_eq(prot(&f, ".git", FSJOB_WRITE), ".git");
	ck_assert_str_eq(prot(&f, ".git", FSJOB_MKDIR), "-");
	ck_assert_str_eq(prot(&f, ".git/objects", FSJOB_MKDIR), "-");
	ck_assert_str_eq(prot(&f, ".gitignore", FSJOB_WRITE), "-");
	/* Nested repositories and submodules' git directories too. */
	ck_assert_str_eq(prot(&f, "sub/.git/hooks/x", FSJOB_WRITE), ".git/hooks");
	ck_assert_str_eq(prot(&f, "a/b/.git/config", FSJOB_WRITE), ".git/config");
	ck_assert_str_eq(prot(&f, "a/b/.git", FSJOB_TAKE), ".git/hooks");
	ck_assert_str_eq(prot(&f, "sub/.git", FSJOB_WRITE), ".git");
	ck_assert_str_eq(prot(&f, ".git/modules/lib/hooks/pre-push", FSJOB_WRITE), ".git/modules");
	ck_assert_str_eq(prot(&f, "sub/.git/modules/lib/config", FSJOB_WRITE), ".git/modules");
	ck_assert_str_eq(prot(&f, "sub/.git/objects/ab", FSJOB_MKDIR), "-");
	ck_assert_str_eq(prot(&f, "sub/.gitignore", FSJOB_WRITE), "-");
	ck_assert_str_eq(prot(&f, "sub/x.git/hooks", FSJOB_MKDIR), "-");
	/* Missing directories on the way, made as written. */
	ck_assert_str_eq(prot(&f, "new/dir/../../.git/hooks/x", FSJOB_WRITE), ".git/hooks");
	/* No list, nothing protected. */
	ck_assert_ptr_null(fsjob_protected_in(f.ws, NULL, ".git/config", 11, FSJOB_WRITE));
	teardown(&f);
}
END_TEST

/* The guard a file job sets, over sandbox.protect's default list. */
static const char *default_match(const struct ws_guard *g, const char *rel, bool whole, bool dir)
{
	return sandbox_protected(g->list, rel, whole, dir);
}

static bool exists_at(const char *dir, const char *rel)
{
	char *p = xasprintf("%s/%s", dir, rel);
	struct stat st;
	bool ok = lstat(p, &st) == 0;
	free(p);
	return ok;
}

/*
 * A recursive delete looks through the whole tree, in parts, before it
 * removes anything: a repository three levels down (an empty .git at that)
 * stops it with -EPERM, nothing deleted, the entry and protection named.
 * The look follows no symlink; without a guard there is none; a tree with
 * no repository is deleted after it.
 */
START_TEST(delete_looks_through_the_tree_first)
{
	struct fixture f;
	setup(&f, 1);
	struct sandbox_config cfg;
	sandbox_config_init(&cfg);
	struct ws_guard g = { .match = default_match, .list = (const char *const *)cfg.protect };
	struct ws_guard *old = ws_guard_set(&g);

	make_tree(f.dir, "big", 80);	/* 6,400 files */
	mkdir_at(f.dir, "big/d7/a");
	mkdir_at(f.dir, "big/d7/a/b");
	mkdir_at(f.dir, "big/d7/a/b/.git");
	struct ws_deleter *del = NULL;
	ck_assert_int_eq(ws_delete_begin(f.ws, "big", 3, true, &del), WS_MORE);
	int r;
	while ((r = ws_delete_step(del, 1)) == WS_MORE)
		;
	ck_assert_int_eq(r, -EPERM);
	ck_assert_int_eq(ws_delete_count(del), 0);
	const char *entry = NULL;
	ck_assert_str_eq(ws_scan_hit(ws_delete_scan(del), &entry), "big/d7/a/b/.git");
	ck_assert_str_eq(ws_scan_top(ws_delete_scan(del)), "big");
	ck_assert_ptr_nonnull(entry);
	ck_assert_int_eq(strncmp(entry, ".git/", 5), 0);
	ck_assert_ptr_eq(g.hit, entry);
	ck_assert_int_eq(ws_delete_step(del, 0), -EPERM);	/* and stays refused */
	ws_delete_free(del);
	ck_assert(exists_at(f.dir, "big/d79/f79") && exists_at(f.dir, "big/d0/f0"));
	ck_assert(exists_at(f.dir, "big/d7/a/b/.git"));

	/* The look alone, in parts: a tree with no repository; a symlink to
	 * one is not followed. */
	mkdir_at(f.dir, "repo");
	mkdir_at(f.dir, "repo/.git");
	mkdir_at(f.dir, "clean");
	char *link = xasprintf("%s/clean/to-repo", f.dir);
	ck_assert_int_eq(symlink("../repo", link), 0);
	free(link);
	char *git = xasprintf("%s/big/d7/a/b/.git", f.dir);
	ck_assert_int_eq(rmdir(git), 0);
	free(git);
	struct ws_scan *scan = NULL;
	ck_assert_int_eq(ws_scan_begin(f.ws, "big", 3, &scan), WS_MORE);
	int parts = 0;
	while ((r = ws_scan_step(scan, 1)) == WS_MORE)
		parts++;
	ck_assert_int_eq(r, 0);
	ck_assert_int_gt(parts, 0);
	ck_assert_ptr_null(ws_scan_hit(scan, NULL));
	scan = ws_scan_free(scan);
	ck_assert_int_eq(ws_scan_begin(f.ws, "clean", 5, &scan), WS_MORE);
	ck_assert_int_eq(ws_scan_step(scan, 0), 0);
	scan = ws_scan_free(scan);
	ck_assert_int_eq(ws_scan_begin(f.ws, "repo", 4, &scan), WS_MORE);
	ck_assert_int_eq(ws_scan_step(scan, 0), -EPERM);
	ck_assert_str_eq(ws_scan_hit(scan, NULL), "repo/.git");
	scan = ws_scan_free(scan);
	/* A file, or a missing path: nothing to look through. */
	ck_assert_int_eq(ws_scan_begin(f.ws, "big/d0/f0", 9, &scan), 0);
	ck_assert_ptr_null(scan);
	ck_assert_int_eq(ws_scan_begin(f.ws, "nowhere", 7, &scan), 0);
	ck_assert_ptr_null(scan);

	/* The repository gone, the tree goes. */
	uint64_t n = 0;
	ck_assert_int_eq(ws_delete(f.ws, "big", 3, true, &n), 0);
	ck_assert(!exists_at(f.dir, "big"));
	/* Renamed away once looked through, a repository put in its place:
	 * the directory the look read is emptied, the repository kept. */
	make_tree(f.dir, "swap", 3);
	ck_assert_int_eq(ws_delete_begin(f.ws, "swap", 4, true, &del), WS_MORE);
	while (ws_delete_scan(del))
		ck_assert_int_eq(ws_delete_step(del, 1), WS_MORE);
	char *from = xasprintf("%s/swap", f.dir), *to = xasprintf("%s/swapped", f.dir);
	char *repo = xasprintf("%s/repo", f.dir);
	ck_assert_int_eq(rename(from, to), 0);
	ck_assert_int_eq(rename(repo, from), 0);
	while ((r = ws_delete_step(del, 0)) == WS_MORE)
		;
	ck_assert_int_eq(r, -ENOTEMPTY);
	ws_delete_free(del);
	ck_assert(exists_at(f.dir, "swap/.git") && !exists_at(f.dir, "swapped/d0"));
	ck_assert_int_eq(rename(from, repo), 0);
	free(from);
	free(to);
	free(repo);
	/* No guard: no look, the repository is the caller's. */
	ws_guard_set(old);
	ck_assert_int_eq(ws_scan_begin(f.ws, "repo", 4, &scan), 0);
	ck_assert_ptr_null(scan);
	ck_assert_int_eq(ws_delete(f.ws, "repo", 4, true, &n), 0);
	ck_assert(!exists_at(f.dir, "repo"));
	sandbox_config_clear(&cfg);
	teardown(&f);
}
END_TEST

/* What a racing job did. */
struct racer {
	struct tool_call call;
	const char *dir;
	bool done;
	int guard_r, write_r, mkdir_r, rename_r;
};

static void racer_finish(struct tool_call *c)
{
	container_of(c, struct racer, call)->done = true;
}

static bool racer_done(void *arg)
{
	return ((struct racer *)arg)->done;
}

/* Checks "d/x", then swaps d for a symlink to .git/hooks, as a child of
 * the same peer could between the check and the write, then writes. */
static int racer_run(struct fsjob *job, void *arg)
{
	struct racer *rc = arg;
	rc->guard_r = fsjob_guard(job, "d/x", 3, FSJOB_WRITE);
	char *d = xasprintf("%s/d", rc->dir), *moved = xasprintf("%s/d-old", rc->dir);
	ck_assert_int_eq(rename(d, moved), 0);
	ck_assert_int_eq(symlink(".git/hooks", d), 0);
	rc->write_r = fsjob_write_atomic(job, "d/x", 3, "evil", 4, false, NULL);
	rc->mkdir_r = fsjob_mkdir(job, "d/sub/deeper", 12, true, &(bool){ false });
	rc->rename_r = fsjob_rename(job, "d-old", 5, "d/moved", 7, false);
	free(d);
	free(moved);
	return rc->write_r;
}

static void racer_done_fn(struct tool_call *call, void *arg, int r)
{
	tool_call_succeed(call, xstrdup("written"), NULL, false);
}

static const struct fsjob_ops racer_ops = { .run = racer_run, .done = racer_done_fn, .free = no_free };

/* A protected path is refused at the write itself, on the directory the
 * kernel reached: a symlink swapped in after the check leads nowhere. */
START_TEST(protected_at_the_write_itself)
{
	struct fixture f;
	setup(&f, 1);
	struct sandbox_config cfg;
	sandbox_config_init(&cfg);
	f.env.sandbox = &cfg;
	mkdir_at(f.dir, ".git");
	mkdir_at(f.dir, ".git/hooks");
	mkdir_at(f.dir, "d");
	struct racer rc = { .call = { .ws = f.ws, .env = &f.env, .on_finish = racer_finish }, .dir = f.dir };
	ck_assert_int_eq(fsjob_start(&rc.call, &racer_ops, &rc), TOOL_PENDING);
	ck_assert(loop_spin(f.ev, racer_done, &rc, 10000));
	ck_assert_int_eq(rc.guard_r, 0);
	ck_assert_int_eq(rc.write_r, -EPERM);
	ck_assert_int_eq(rc.mkdir_r, -EPERM);
	ck_assert_int_eq(rc.rename_r, -EPERM);
	ck_assert_int_eq(rc.call.kind, TC_PERMISSION_DENIED);
	ck_assert_ptr_nonnull(strstr(rc.call.message, ".git/hooks"));
	ck_assert_ptr_nonnull(strstr(rc.call.message, "sandbox.protect"));
	char *x = xasprintf("%s/.git/hooks/x", f.dir), *sub = xasprintf("%s/.git/hooks/sub", f.dir);
	char *moved = xasprintf("%s/.git/hooks/moved", f.dir);
	struct stat st;
	ck_assert_int_eq(lstat(x, &st), -1);
	ck_assert_int_eq(lstat(sub, &st), -1);
	ck_assert_int_eq(lstat(moved, &st), -1);
	free(x);
	free(sub);
	free(moved);
	tool_call_clear(&rc.call);
	sandbox_config_clear(&cfg);
	teardown(&f);
}
END_TEST

static Suite *fsjob_suite(void)
{
	Suite *s = suite_create("fsjob");
	TCase *tc = tcase_create("fsjob");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, switch_is_per_thread_and_restored);
	tcase_add_test(tc, next_job_runs_as_the_daemon);
	tcase_add_test(tc, peer_work_never_runs_on_the_loop);
	tcase_add_test(tc, without_a_pool_work_runs_inline);
	tcase_add_test(tc, small_work_tried_on_the_loop_first);
	tcase_add_test(tc, cancel_stops_running_and_queued_jobs);
	tcase_add_test(tc, shutdown_ends_pending_calls_cancelled);
	tcase_add_test(tc, job_runs_in_parts);
	tcase_add_test(tc, cancel_stops_a_job_in_parts);
	tcase_add_test(tc, run_as_on_a_thread_of_its_own);
	tcase_add_test(tc, short_jobs_keep_their_priority);
	tcase_add_test(tc, delete_goes_in_parts);
	tcase_add_test(tc, protected_where_the_kernel_leads);
	tcase_add_test(tc, protected_at_the_write_itself);
	tcase_add_test(tc, delete_looks_through_the_tree_first);
	tcase_add_test(tc, the_store_is_reached_by_its_directory_alone);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return run_suite(fsjob_suite());
}
