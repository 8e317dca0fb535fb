/* SPDX-License-Identifier: MIT */
/*
 * A tool call's file work on the io pool, as the peer (see fsjob.h). The
 * job holds everything its worker reads: the tool's arg, a reference to
 * the workspace (taken here, on the loop) and a copy of the identity, so
 * nothing the loop frees meanwhile (the call's arguments on a timeout, the
 * session) is reached from the worker.
 */
#include "lib/fsjob.h"

#include <stdlib.h>
#include <sys/resource.h>
#include <unistd.h>

#include "lib/identity.h"
#include "lib/iopool.h"
#include "lib/workspace.h"
#include "proto/base/util.h"

struct fsjob {
	struct tool_call *call;
	const struct fsjob_ops *ops;
	void *arg;
	struct workspace *ws;		/* referenced on the loop */
	struct identity ident;
	bool switch_ident;
	bool cancelled;			/* loop side: fsjob_cancel came */
	struct iojob *io;		/* loop side: the pool's handle, while queued or running */
	struct iopool *pool;
	const struct iojob *running;	/* worker side: set while run executes */
	int r;
};

static void job_free(struct fsjob *job)
{
	if (job->ops->free)
		job->ops->free(job->arg);
	else
		free(job->arg);
	ws_unref(job->ws);
	identity_clear(&job->ident);
	free(job);
}

/* The niceness of a worker doing file work. Where the loop and the
 * workers share a CPU (a daemon pinned to one, a busy machine), a worker
 * sorting a huge directory or copying a large file must not hold the CPU
 * while the loop has a ping to answer: the scheduler preempts a niced
 * thread as soon as the loop wakes. */
#define WORKER_NICE 10

/* Lowers the calling worker's priority, once per thread. */
static void nice_worker(void)
{
	static _Thread_local bool done;
	if (done)
		return;
	done = true;
	/* Per thread on Linux; best effort. */
	(void)setpriority(PRIO_PROCESS, (id_t)gettid(), WORKER_NICE);
}

/* On a worker: runs the work as the peer, leaving the thread as it found it. */
static void job_run(struct iojob *io, void *p)
{
	struct fsjob *job = p;
	nice_worker();
	/* An identity left over from an earlier job would be a peer acting
	 * with another's rights: never go on with one. */
	if (!identity_thread_clean())
		abort();
	struct identity_saved saved = {};
	if (job->switch_ident) {
		job->r = identity_enter(&job->ident, &saved);
		if (job->r < 0)
			return;	/* the thread is as it was */
	}
	job->running = io;
	job->r = job->ops->run(job, job->arg);
	identity_leave(&saved);
	job->running = NULL;
	if (!identity_thread_clean())
		abort();
}

/* On the loop: the outcome, or cancelled, then the call ends. */
static void job_done(void *p, bool cancelled)
{
	struct fsjob *job = p;
	struct tool_call *call = job->call;
	if (!cancelled && !job->cancelled && job->r == FSJOB_AGAIN) {
		/* A part is done: shown, then the next one queued (behind
		 * the jobs that came meanwhile). */
		if (job->ops->part)
			job->ops->part(call, job->arg);
		job->io = iopool_submit(job->pool, job_run, job_done, job);
		return;
	}
	if (cancelled || job->cancelled)
		tool_call_fail(call, TC_CANCELLED, "The call was cancelled before its file work was done");
	else
		job->ops->done(call, job->arg, job->r);
	call->state = NULL;
	job_free(job);
	tool_call_finish(call);
}

/* True when work for call has to take the peer's identity: the identity
 * says so (run_as "peer", the daemon root, the peer another uid; decided
 * by identity_for_children()), as it does for the call's children. */
static bool needs_switch(const struct tool_call *call)
{
	return call->ident && call->ident->change;
}

bool fsjob_may_inline(const struct tool_call *call)
{
	return !needs_switch(call);
}

struct open_job {
	const struct workspace *ws;
	const char *path;
	size_t len;
	int flags;
	int fd;
};

/* As the identity (identity_run()): the open itself. */
static int open_as(void *arg)
{
	struct open_job *o = arg;
	return ws_openat(o->ws, o->path, o->len, o->flags, 0, &o->fd);
}

int fsjob_openat_as(const struct tool_call *call, const struct identity *id, const char *path, size_t len,
		    int flags, int *ret_fd)
{
	struct open_job o = { call->ws, path, len, flags, -1 };
	int r = id && id->change ? identity_run(id, open_as, &o) : open_as(&o);
	if (r < 0)
		return r;
	*ret_fd = o.fd;
	return 0;
}

enum tool_ret fsjob_start(struct tool_call *call, const struct fsjob_ops *ops, void *arg)
{
	struct fsjob *job = xcalloc(1, sizeof(*job));
	job->call = call;
	job->ops = ops;
	job->arg = arg;
	job->ws = ws_ref(call->ws);
	const struct tool_env *env = call->env;
	if (needs_switch(call)) {
		identity_copy(&job->ident, call->ident);
		job->switch_ident = true;
	}
	struct iopool *pool = env ? env->pool : NULL;

	if (!pool) {
		if (job->switch_ident) {
			/* The loop never takes another identity. */
			tool_call_fail(call, TC_INTERNAL, "No io thread to act as the peer on files");
		} else {
			while ((job->r = ops->run(job, arg)) == FSJOB_AGAIN)
				if (ops->part)
					ops->part(call, arg);
			ops->done(call, arg, job->r);
		}
		job_free(job);
		return TOOL_DONE;
	}
	call->state = job;
	job->pool = pool;
	job->io = iopool_submit(pool, job_run, job_done, job);
	return TOOL_PENDING;
}

void fsjob_cancel(struct tool_call *call)
{
	struct fsjob *job = call->state;
	if (!job || job->cancelled)
		return;
	job->cancelled = true;
	iojob_cancel(job->io);
}

bool fsjob_cancelled(const struct fsjob *job)
{
	return job && job->running && iojob_cancelled(job->running);
}

const struct workspace *fsjob_ws(const struct fsjob *job)
{
	return job->ws;
}

bool fsjob_on_worker(const struct fsjob *job)
{
	return job->running != NULL;
}
