/* SPDX-License-Identifier: MIT */
/*
 * A tool call's file work on the io pool, as the peer (see fsjob.h). The
 * job holds everything its worker reads: the tool's arg, a reference to
 * the workspace (taken here, on the loop) and a copy of the identity, so
 * nothing the loop frees meanwhile (the call's arguments on a timeout, the
 * session) is reached from the worker.
 */
#include "lib/fsjob/fsjob.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "lib/files/identity.h"
#include "lib/base/iopool.h"
#include "lib/sandbox/sandbox.h"
#include "lib/files/workspace.h"
#include "lib/files/workspace_internal.h"
#include "proto/base/strv.h"
#include "proto/base/util.h"

static void fail_protected(struct tool_call *call, const char *path, const char *inner, const char *entry);

struct fsjob {
	struct tool_call *call;
	const struct fsjob_ops *ops;
	void *arg;
	struct workspace *ws;		/* referenced on the loop */
	struct identity ident;
	char **protect;			/* sandbox.protect, copied: a reload may free the config */
	char **deny;			/* sandbox.deny_read beneath its roots (call_deny()) */
	char *denied;			/* the first of them refused */
	char *refused_path;		/* what fsjob_guard() refused, first */
	char *refused_inner;		/* the entry beneath it that is protected */
	const char *refused_entry;	/* the protection, in protect (or ".git") */
	bool switch_ident;
	bool store;			/* its workspace is a directory of the daemon's
					 * own store (fsjob_start_store()) */
	bool cancelled;			/* loop side: fsjob_cancel came */
	struct iojob *io;		/* loop side: the pool's handle, while queued or running */
	struct iopool *pool;
	const struct iojob *running;	/* worker side: set while run executes */
	unsigned parts;			/* parts done (FSJOB_AGAIN) */
	bool trying_inline;		/* loop side: run tried at once (ops->inline_first) */
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
	strv_free(job->protect);
	strv_free(job->deny);
	free(job->denied);
	free(job->refused_path);
	free(job->refused_inner);
	free(job);
}

/*
 * The niceness of a worker doing long file work. Where the loop and the
 * workers share a CPU (a daemon pinned to one, a busy machine), a worker
 * sorting a huge directory or copying a large file must not hold the CPU
 * while the loop has a ping to answer: the scheduler preempts a niced
 * thread as soon as the loop wakes. But a niced thread also gets a ninth
 * of the CPU beside the machine's other programs: a glob of 7,000 files
 * (20 ms of CPU) took 7× find's time on a loaded machine, 1.2× unniced.
 * So a job runs at the daemon's priority for its first FSJOB_BRISK_CPU_NS
 * of CPU, and niced after that (checked every FSJOB_CLOCK_POLLS of its
 * fsjob_cancelled() polls) and for its later parts (FSJOB_AGAIN). A
 * daemon that may not raise a worker's priority again (no CAP_SYS_NICE,
 * RLIMIT_NICE 0) leaves a worker niced after its first long job.
 */
#define WORKER_NICE 10
#define FSJOB_BRISK_CPU_NS (50 * 1000000ULL)
#define FSJOB_CLOCK_POLLS 64

/* The calling worker's niceness as last set, and the
 * running job's CPU clock at its start, polls so far, whether niced. */
static _Thread_local int worker_nice;
static _Thread_local uint64_t job_cpu0;
static _Thread_local unsigned job_polls;
static _Thread_local bool job_niced;

static uint64_t thread_cpu_ns(void)
{
	struct timespec ts;
	if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) < 0)
		return 0;
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

/* The niceness a worker started with (the daemon's), read once. */
static _Thread_local bool worker_base_known;
static _Thread_local int worker_base;

/* Sets the calling worker's niceness (per thread on Linux; best effort). */
static void worker_set_nice(int nice)
{
	if (worker_nice == nice)
		return;
	if (setpriority(PRIO_PROCESS, (id_t)gettid(), nice) == 0)
		worker_nice = nice;
}

/* A job starts on a worker: its later parts niced, a first part brisk. */
static void worker_job_starts(bool later_part)
{
	if (!worker_base_known) {
		errno = 0;
		int n = getpriority(PRIO_PROCESS, (id_t)gettid());
		worker_base = errno ? 0 : n;
		worker_nice = worker_base;
		worker_base_known = true;
	}
	worker_set_nice(later_part ? MAX(WORKER_NICE, worker_base) : worker_base);
	job_niced = later_part;
	job_polls = 0;
	job_cpu0 = later_part ? 0 : thread_cpu_ns();
}

/* What a call's file work may not change: sandbox.protect, and the
 * daemon's own directories beneath its workspace (sandbox.read_only: the
 * config's, with the tool files and hook scripts beside it), relative to
 * the root. A copy: a reload may free the config. */
static char **call_protect(const struct tool_call *call)
{
	const struct tool_env *env = call->env;
	if (!env || !env->sandbox)
		return NULL;
	char **v = strv_dup((const char *const *)env->sandbox->protect);
	const char *root = call->ws ? call->ws->root : NULL;
	size_t n = root ? strlen(root) : 0, k = 0;
	while (v && v[k])
		k++;
	for (char **p = env->sandbox->read_only; n && p && *p; p++)
		if (strncmp(*p, root, n) == 0 && (*p)[n] == '/' && (*p)[n + 1]) {
			v = xreallocarray(v, k + 2, sizeof(char *));
			v[k++] = xstrdup(*p + n + 1);
			v[k] = NULL;
		}
	return v;
}

/* The canonical home of a peer, as deny_read's "~/" names it (a few
 * kept: one realpath a home). */
static const char *home_real(const char *home)
{
	static struct {
		char *home, *real;
	} kept[8];
	static unsigned next;
	for (size_t i = 0; i < ELEMENTSOF(kept); i++)
		if (kept[i].home && str_eq(kept[i].home, home))
			return kept[i].real;
	unsigned i = next++ % ELEMENTSOF(kept);
	free(kept[i].home);
	free(kept[i].real);
	kept[i].home = xstrdup(home);
	kept[i].real = realpath(home, NULL);
	if (!kept[i].real)
		kept[i].real = xstrdup(home);
	return kept[i].real;
}

/* Whether head + tail (tail's own length n) lies beneath root (or is it),
 * compared in place: nothing is built for a path that lies elsewhere. */
static bool beneath(const char *head, const char *tail, size_t n, const char *root)
{
	size_t h = strlen(head), k = strlen(root);
	if (k == 1 && root[0] == '/')
		return true;
	if (h + n < k)
		return false;
	if (k <= h) {
		if (strncmp(head, root, k) != 0)
			return false;
		char next = k < h ? head[k] : n ? tail[0] : '\0';
		return next == '/' || next == '\0';
	}
	if (strncmp(head, root, h) != 0 || strncmp(tail, root + h, k - h) != 0)
		return false;
	return k - h == n || tail[k - h] == '/';
}

/* Whether path (head + tail) lies beneath one of the call's roots. */
static bool beneath_roots(const struct workspace *ws, const char *head, const char *tail, size_t n)
{
	if (beneath(head, tail, n, ws->root))
		return true;
	for (size_t i = 0; i < ws->n_others; i++)
		if (beneath(head, tail, n, ws->others[i]->root))
			return true;
	return false;
}

/* What a call's file work may not read: the sandbox.deny_read paths
 * beneath the workspace's roots ("~/" the peer's home, canonical; others
 * as written, absolute, a final "/" dropped), as children may not. NULL
 * when none lies there: then nothing is looked at. Every file call asks:
 * nothing is allocated for a path that lies elsewhere. */
static char **call_deny(const struct tool_call *call)
{
	const struct tool_env *env = call->env;
	if (!env || !env->sandbox || !call->ws)
		return NULL;
	static const char *daemon_home;
	static bool daemon_home_read;
	if (!daemon_home_read) {
		daemon_home = getenv("HOME");
		daemon_home_read = true;
	}
	const struct identity *id = call->ident;
	const char *home = id && (id->change || id->home) ? id->home : daemon_home;
	const char *real_home = NULL;
	char **v = NULL;
	size_t k = 0;
	for (char **p = env->sandbox->deny_read; p && *p; p++) {
		const char *head = "", *tail = *p;
		if ((*p)[0] == '~' && ((*p)[1] == '/' || !(*p)[1])) {
			if (!home || home[0] != '/')
				continue;
			if (!real_home)
				real_home = home_real(home);
			head = real_home;
			tail = *p + 1;
		} else if ((*p)[0] != '/') {
			continue;
		}
		size_t n = strlen(tail);
		while (n > 0 && tail[n - 1] == '/' && (n > 1 || *head))
			n--;
		if (!beneath_roots(call->ws, head, tail, n))
			continue;
		v = xreallocarray(v, k + 2, sizeof(char *));
		v[k++] = xasprintf("%s%.*s", head, (int)n, tail);
		v[k] = NULL;
	}
	return v;
}

/* Whether the workspace's top .git is the empty directory the sandbox
 * holds where there is no repository (lib/sandbox/run.c). */
static bool git_placeholder(const struct workspace *ws)
{
	return ws && ws_dir_empty(ws->dirfd, ".git");
}

/* The guard's answer: sandbox.protect's rule; and in the placeholder of a
 * repository (an empty top .git), nothing may be made: the file tools do
 * not make a repository where the sandbox keeps commands from making one. */
static const char *guard_match(const struct ws_guard *g, const char *rel, bool whole, bool dir)
{
	const char *entry = sandbox_protected(g->list, rel, whole, dir);
	if (!entry && strncmp(rel, ".git/", 5) == 0 && rel[5] && !strchr(rel + 5, '/') && g->list && *g->list &&
	    git_placeholder(g->arg))
		return ".git";
	return entry;
}

/* Runs one part of the job's work with its protected paths guarded at
 * every write (ws_guard_set()); notes a refusal for the outcome. */
static int run_guarded(struct fsjob *job)
{
	struct ws_guard g = { .match = guard_match,
			      .list = (const char *const *)job->protect,
			      .arg = job->ws,
			      .deny = (const char *const *)job->deny };
	struct ws_guard *old = ws_guard_set(&g);
	int r = job->ops->run(job, job->arg);
	ws_guard_set(old);
	if (g.hit && !job->refused_entry)
		job->refused_entry = g.hit;
	if (g.denied && !job->denied)
		job->denied = xstrdup(g.denied);
	return r;
}

/* On a worker: runs the work as the peer, leaving the thread as it found it. */
static void job_run(struct iojob *io, void *p)
{
	struct fsjob *job = p;
	worker_job_starts(job->parts > 0);
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
	job->r = run_guarded(job);
	identity_leave(&saved);
	job->running = NULL;
	if (!identity_thread_clean())
		abort();
}

/* On the loop: the outcome of a job that ran to its end. */
static void job_outcome(struct fsjob *job)
{
	if (job->refused_entry)
		fail_protected(job->call, job->refused_path, job->refused_inner, job->refused_entry);
	else if (job->denied)
		tool_call_fail(job->call, TC_PERMISSION_DENIED,
			       "%s is a private path (sandbox.deny_read): file tools may not read or change it, "
			       "as the sandbox keeps it from commands", job->denied);
	else
		job->ops->done(job->call, job->arg, job->r);
}

/* On the loop: the outcome, or cancelled, then the call ends. */
static void job_done(void *p, bool cancelled)
{
	struct fsjob *job = p;
	struct tool_call *call = job->call;
	if (!cancelled && !job->cancelled && job->r == FSJOB_AGAIN && !job->refused_entry) {
		/* A part is done: shown, then the next one queued (behind
		 * the jobs that came meanwhile). */
		job->parts++;
		if (job->ops->part)
			job->ops->part(call, job->arg);
		job->io = iopool_submit(job->pool, job_run, job_done, job);
		return;
	}
	if (cancelled || job->cancelled)
		tool_call_fail(call, TC_CANCELLED, "The call was cancelled before its file work was done");
	else
		job_outcome(job);
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

int fsjob_inline(struct tool_call *call, fsjob_run_fn run, void *arg)
{
	if (!fsjob_may_inline(call))
		return FSJOB_NOT_INLINE;
	struct fsjob job = { .call = call, .ws = call->ws, .protect = call_protect(call), .deny = call_deny(call) };
	struct ws_guard g = { .match = guard_match,
			      .list = (const char *const *)job.protect,
			      .arg = job.ws,
			      .deny = (const char *const *)job.deny };
	struct ws_guard *old = ws_guard_set(&g);
	int r = run(&job, arg);
	ws_guard_set(old);
	strv_free(job.deny);
	/* A refusal (fsjob_guard()) is the caller's to tell, as -EPERM. */
	if (job.refused_entry || g.hit)
		r = -EPERM;
	free(job.refused_path);
	free(job.refused_inner);
	strv_free(job.protect);
	return r;
}

char *fsjob_preview(const struct tool_def *def, const struct json *args, struct workspace *ws)
{
	struct fsjob job = { .ws = ws };
	return def->preview ? def->preview(args, &job) : NULL;
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

static enum tool_ret start(struct tool_call *call, const struct fsjob_ops *ops, void *arg, bool store)
{
	struct fsjob *job = xcalloc(1, sizeof(*job));
	job->store = store;
	job->call = call;
	job->ops = ops;
	job->arg = arg;
	job->ws = ws_ref(call->ws);
	const struct tool_env *env = call->env;
	job->protect = call_protect(call);
	job->deny = call_deny(call);
	if (needs_switch(call)) {
		identity_copy(&job->ident, call->ident);
		job->switch_ident = true;
	}
	struct iopool *pool = env ? env->pool : NULL;

	if (pool && ops->inline_first && !job->switch_ident) {
		/* Work that is most often small is tried on the loop first,
		 * as read_file's is (fsjob_inline()): no hand-off to a worker
		 * and back. Its run says FSJOB_NOT_INLINE, having changed
		 * nothing, when it finds more than that; then a worker does it. */
		job->trying_inline = true;
		job->r = run_guarded(job);
		job->trying_inline = false;
		if (job->r != FSJOB_NOT_INLINE || job->refused_entry) {
			job_outcome(job);
			job_free(job);
			return TOOL_DONE;
		}
	}
	if (!pool) {
		if (job->switch_ident) {
			/* The loop never takes another identity. */
			tool_call_fail(call, TC_INTERNAL, "No io thread to act as the peer on files");
		} else {
			while ((job->r = run_guarded(job)) == FSJOB_AGAIN && !job->refused_entry)
				if (ops->part)
					ops->part(call, arg);
			job_outcome(job);
		}
		job_free(job);
		return TOOL_DONE;
	}
	call->state = job;
	/* Its path check is done on the worker: a refusal comes later. */
	call->may_refuse = true;
	job->pool = pool;
	job->io = iopool_submit(pool, job_run, job_done, job);
	return TOOL_PENDING;
}

enum tool_ret fsjob_start(struct tool_call *call, const struct fsjob_ops *ops, void *arg)
{
	return start(call, ops, arg, false);
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
	if (!job || !job->running)
		return false;
	/* A long job gives way to the loop from here on (see WORKER_NICE). */
	if (!job_niced && ++job_polls % FSJOB_CLOCK_POLLS == 0 && thread_cpu_ns() - job_cpu0 > FSJOB_BRISK_CPU_NS) {
		worker_set_nice(MAX(WORKER_NICE, worker_base));
		job_niced = true;
	}
	return iojob_cancelled(job->running);
}

const struct workspace *fsjob_ws(const struct fsjob *job)
{
	return job->ws;
}

bool fsjob_on_worker(const struct fsjob *job)
{
	return job->running != NULL;
}

bool fsjob_trying_inline(const struct fsjob *job)
{
	return job->trying_inline;
}

int fsjob_openat(const struct fsjob *job, const char *path, size_t len, int flags, mode_t mode, int *ret_fd)
{
	return ws_openat(job->ws, path, len, flags, mode, ret_fd);
}

int fsjob_open_nofollow(const struct fsjob *job, int dirfd, const char *rel, int flags, int *ret_fd)
{
	(void)job;	/* held only by a run function: the thread acts as the job's identity */
	return ws_open_nofollow(dirfd, rel, flags, ret_fd);
}

int fsjob_read(const struct fsjob *job, const char *path, size_t len, uint64_t offset, size_t max,
	       struct buf *out, struct stat *ret_st)
{
	return ws_read(job->ws, path, len, offset, max, out, ret_st);
}

int fsjob_read_small(const struct fsjob *job, const char *path, size_t len, uint64_t offset, size_t max,
		     uint64_t small, struct buf *out, struct stat *ret_st)
{
	return ws_read_small(job->ws, path, len, offset, max, small, out, ret_st);
}

int fsjob_write_atomic(const struct fsjob *job, const char *path, size_t len, const void *data, size_t n,
		       bool create_dirs, bool *ret_created)
{
	return ws_write_atomic(job->ws, path, len, data, n, create_dirs, ret_created);
}

int fsjob_check(const struct fsjob *job, const char *path, size_t len)
{
	return ws_check(job->ws, path, len);
}

int fsjob_lstat(const struct fsjob *job, const char *path, size_t len, struct stat *ret_st, char **ret_target)
{
	return ws_lstat(job->ws, path, len, ret_st, ret_target);
}

int fsjob_rename(const struct fsjob *job, const char *from, size_t from_len, const char *to, size_t to_len,
		 bool overwrite)
{
	return ws_rename(job->ws, from, from_len, to, to_len, overwrite);
}

int fsjob_mkdir(const struct fsjob *job, const char *path, size_t len, bool parents, bool *ret_created)
{
	return ws_mkdir(job->ws, path, len, parents, ret_created);
}

int fsjob_delete_begin(const struct fsjob *job, const char *path, size_t len, bool recursive,
		       struct ws_deleter **ret)
{
	return ws_delete_begin(job->ws, path, len, recursive, ret);
}

/* Notes what a look beneath a directory refused (scan), for the outcome. */
static int scan_refused(struct fsjob *job, const struct ws_scan *scan, int r)
{
	const char *entry = NULL;
	const char *hit = ws_scan_hit(scan, &entry);
	if (r != -EPERM || !hit || !entry || job->refused_entry)
		return r;
	job->refused_path = xstrdup(ws_scan_top(scan));
	job->refused_inner = xstrdup(hit);
	job->refused_entry = entry;
	return r;
}

int fsjob_delete_step(struct fsjob *job, struct ws_deleter *del, uint64_t budget_ms)
{
	int r = ws_delete_step(del, budget_ms);
	return scan_refused(job, ws_delete_scan(del), r);
}

int fsjob_scan_begin(const struct fsjob *job, const char *path, size_t len, struct ws_scan **ret)
{
	return ws_scan_begin(job->ws, path, len, ret);
}

int fsjob_scan_step(struct fsjob *job, struct ws_scan *scan, uint64_t budget_ms)
{
	return scan_refused(job, scan, ws_scan_step(scan, budget_ms));
}

/* --- the daemon's own store ------------------------------------------------ */

/* Opens dir (O_PATH), making it and its missing parents: 0711 for root
 * (peers pass through to their own directory, list nothing), else 0700. */
static int open_base(const char *dir, int *ret_fd)
{
	int fd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (fd >= 0 || errno != ENOENT) {
		*ret_fd = fd;
		return fd < 0 ? -errno : 0;
	}
	mode_t mode = geteuid() == 0 ? 0711 : 0700;
	_cleanup_free_ char *p = xstrdup(dir);
	for (char *s = p + 1; (s = strchr(s, '/')); s++) {
		*s = '\0';
		if (mkdir(p, mode) < 0 && errno != EEXIST)
			return -errno;
		*s = '/';
	}
	if (mkdir(p, mode) < 0 && errno != EEXIST)
		return -errno;
	fd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	*ret_fd = fd;
	return 0;
}

/*
 * Opens the peer's directory beneath dir (O_PATH), making it 0700 and,
 * when the daemon is root, owned by the peer. Done as the daemon, which
 * owns dir; a few system calls, on the loop.
 */
static int open_uid_dir(const char *dir, uid_t uid, gid_t gid, int *ret_fd)
{
	_cleanup_close_ int base = -1;
	int r = open_base(dir, &base);
	if (r < 0)
		return r;
	char name[16];
	snprintf(name, sizeof(name), "%u", (unsigned)uid);
	int fd = openat(base, name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0 && errno == ENOENT) {
		if (mkdirat(base, name, 0700) < 0 && errno != EEXIST)
			return -errno;
		if (geteuid() == 0 && uid != 0 && fchownat(base, name, uid, gid, AT_SYMLINK_NOFOLLOW) < 0)
			return -errno;
		fd = openat(base, name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	}
	if (fd < 0)
		return -errno;
	/* Someone else's directory put there (dir in a place others may
	 * write) is never used as the peer's. */
	struct stat st;
	uid_t owner = geteuid() == 0 ? uid : geteuid();
	if (fstat(fd, &st) < 0 || st.st_uid != owner || (st.st_mode & 0022)) {
		close(fd);
		return -EPERM;
	}
	*ret_fd = fd;
	return 0;
}

int fsjob_start_store(struct tool_call *call, const char *dir, const struct fsjob_ops *ops, void *arg,
		      enum tool_ret *ret)
{
	uid_t uid = call->ident ? call->ident->uid : geteuid();
	gid_t gid = call->ident ? call->ident->gid : getegid();
	int fd = -1;
	int r = open_uid_dir(dir, uid, gid, &fd);
	if (r < 0)
		return r;
	_cleanup_free_ char *root = xasprintf("%s/%u", dir, (unsigned)uid);
	struct workspace *ws = ws_new_at(fd, root);
	/* The call's own workspace is not the job's: the store is not in it. */
	struct workspace *keep = call->ws;
	call->ws = ws;
	*ret = start(call, ops, arg, true);
	call->ws = keep;
	ws_unref(ws);
	return 0;
}

int fsjob_store_dir(const struct fsjob *job, const char *name, int *ret_fd)
{
	if (!job->store)
		return -EPERM;
	if (!*name || strchr(name, '/') || str_eq(name, ".") || str_eq(name, ".."))
		return -EINVAL;
	int ufd = job->ws->dirfd;
	if (mkdirat(ufd, name, 0700) == 0) {
		/* Made by a root daemon acting as itself (run_as "daemon"):
		 * the peer's all the same, as the directory that holds it. */
		struct stat st;
		if (geteuid() == 0 && identity_thread_clean() && fstat(ufd, &st) == 0 && st.st_uid != 0 &&
		    fchownat(ufd, name, st.st_uid, st.st_gid, AT_SYMLINK_NOFOLLOW) < 0)
			return -errno;
	} else if (errno != EEXIST) {
		return -errno;
	}
	return ws_open_nofollow(ufd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC, ret_fd);
}

const char *fsjob_protected_in(const struct workspace *ws, const char *const *protect, const char *path,
			       size_t len, enum fsjob_touch how)
{
	if (!protect || !*protect || !ws)
		return NULL;
	_cleanup_free_ char *rel = NULL;
	if (ws_resolved(ws, path, len, how == FSJOB_WRITE, &rel) < 0)
		return NULL;
	return sandbox_protected(protect, rel, how == FSJOB_TAKE, how == FSJOB_MKDIR);
}

int fsjob_guard(struct fsjob *job, const char *path, size_t len, enum fsjob_touch how)
{
	const char *entry = fsjob_protected_in(job->ws, (const char *const *)job->protect, path, len, how);
	if (!entry)
		return 0;
	if (!job->refused_entry) {
		job->refused_path = xstrndup(path, len);
		job->refused_entry = entry;
	}
	return -EPERM;
}

/* Fails call for the protected path entry that path (NULL: unknown, found
 * at the write itself) touches; inner: the entry beneath the directory path
 * that does (a nested repository's .git), or NULL. */
static void fail_protected(struct tool_call *call, const char *path, const char *inner, const char *entry)
{
	if (path && inner)
		tool_call_fail(call, TC_PERMISSION_DENIED,
			       "'%s' holds '%s', which would change the protected path '%s' (sandbox.protect); "
			       "file tools may not move or delete a directory that holds a repository's .git or "
			       "another protected path, at any depth", path, inner, entry);
	else if (!path)
		tool_call_fail(call, TC_PERMISSION_DENIED,
			       "The call would change the protected path '%s' (sandbox.protect), reached through a "
			       "symlink or directory changed while it ran; file tools may not write, create, move "
			       "or delete it", entry);
	else if (str_eq(entry, ".git"))
		tool_call_fail(call, TC_PERMISSION_DENIED,
			       "'%s' would change the workspace's .git, which is protected (sandbox.protect covers "
			       "paths beneath .git, and a .git file would point git elsewhere); file tools may not "
			       "write, move or delete it", path);
	else
		tool_call_fail(call, TC_PERMISSION_DENIED,
			       "'%s' would change the protected path '%s' (sandbox.protect); file tools may not "
			       "write, create, move or delete it, whether or not it exists", path, entry);
}
