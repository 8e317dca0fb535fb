/* SPDX-License-Identifier: MIT */
/*
 * File work of a tool call, run off the loop as the peer who asked. A tool
 * hands fsjob_start() a run function and its arg: run executes on a worker
 * of the io pool (struct tool_env's pool), with the thread's file-system
 * identity switched to the call's when that identity says so (its change,
 * the same decision its children follow: lib/files/identity.h), and restored
 * after; then, back on the loop, done turns
 * what run left in arg into the call's outcome, the arg is freed and the
 * call finished. The tool returns what fsjob_start() returned and uses
 * fsjob_cancel as its tool_def.cancel: a cancelled job (timeout, cancel,
 * shutdown) does not start, a long one stops at its next fsjob_cancelled()
 * check, its result is dropped and the call ends cancelled.
 *
 * run gets only what the job carries: the arg (the tool's own copies of its
 * inputs, never call->args, which the call may drop on a timeout) and the
 * workspace, referenced by the job for as long as it runs. It must not
 * touch the loop's state.
 *
 * Without a pool (unit tests) run executes inline on the loop and
 * fsjob_start() returns TOOL_DONE; work that needs another identity then
 * fails (the loop never switches).
 *
 * A tool may do work it knows to be small on the loop first, through
 * fsjob_inline(), which runs it only when no identity switch is needed
 * (fsjob_may_inline()): read_file reads a regular file of at most
 * FSJOB_INLINE_BYTES there, which costs far less than a trip to a worker
 * and back, and hands anything larger to the pool.
 *
 * The job is the only way a tool reaches the file system: the workspace
 * primitives that touch it (ws_openat, ws_read, ws_write_atomic, ws_lstat,
 * ws_rename, ws_delete, ws_mkdir, ws_open_nofollow and their kin) are in
 * lib/files' private header, which code built with TC_TOOL_CODE (every
 * file under tools/) cannot include (see lib/files/workspace.h), and the
 * fsjob_* versions below take the job, which a tool holds only inside its
 * run function (or a preview, made with the call's rights). So a tool
 * cannot act on files on the loop as the daemon, whoever writes it.
 */
#ifndef TC_FSJOB_H
#define TC_FSJOB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "lib/tool.h"

struct buf;
struct fsjob;
struct identity;
struct json;
struct stat;
struct workspace;
struct ws_deleter;
struct ws_scan;

/* On a worker (or inline): the blocking work; 0 or a negative errno, or
 * FSJOB_AGAIN when a part is done and run is to be called again. */
typedef int (*fsjob_run_fn)(struct fsjob *job, void *arg);
/* On the loop, not cancelled: sets call's outcome from arg and r. */
typedef void (*fsjob_done_fn)(struct tool_call *call, void *arg, int r);

/* run's answer when more is to come: the loop calls ops->part (which may
 * stream what was found, tool_call_output) and queues run again, so a long
 * job gives way to other jobs now and then and shows its progress. */
#define FSJOB_AGAIN 1

struct fsjob_ops {
	fsjob_run_fn run;
	fsjob_done_fn done;
	void (*free)(void *arg);	/* NULL: free() */
	/* On the loop after each part (run returned FSJOB_AGAIN); NULL: none. */
	void (*part)(struct tool_call *call, void *arg);
	/* Run is tried on the loop first when no identity is to be taken
	 * (fsjob_may_inline()); it returns FSJOB_NOT_INLINE, having changed
	 * nothing, when fsjob_trying_inline() and the work is more than
	 * FSJOB_INLINE_BYTES of reading, and is then run on a worker. For
	 * reads that are most often small (memory's view). */
	bool inline_first;
};

/* The most bytes a file may hold to be read on the loop. */
#define FSJOB_INLINE_BYTES (64 * 1024)

/* True when call's file work may run on the loop: no identity to take. */
bool fsjob_may_inline(const struct tool_call *call);
/* What fsjob_inline() returns when it may not run on the loop. */
#define FSJOB_NOT_INLINE 2
/* Runs run(job, arg) at once on the loop when fsjob_may_inline(call), and
 * returns what it returned (-EPERM when it touched a protected path);
 * else FSJOB_NOT_INLINE, run not called. For small work that changes
 * nothing (a read, a stat). */
int fsjob_inline(struct tool_call *call, fsjob_run_fn run, void *arg);
/* Makes def's confirmation preview of args in ws (tool_def.preview),
 * with the rights of the calling thread: the caller has taken the call's
 * identity (identity_run()) when it needs one. */
char *fsjob_preview(const struct tool_def *def, const struct json *args, struct workspace *ws);
/*
 * Opens path beneath call's workspace (ws_openat, mode 0) with id's rights
 * (NULL: the daemon's): when id->change, on a short-lived thread acting as
 * id (identity_run()), so no directory id could not reach itself, beneath
 * one it may not search, is reached for it. For the little file work a
 * tool does before it starts a child as id (its working directory). 0 or
 * ws_openat's negative errno.
 */
int fsjob_openat_as(const struct tool_call *call, const struct identity *id, const char *path, size_t len,
		    int flags, int *ret_fd);
/* Starts arg's work for call (arg is owned from here, freed by ops->free). */
enum tool_ret fsjob_start(struct tool_call *call, const struct fsjob_ops *ops, void *arg);
/* tool_def.cancel of tools that use fsjob_start. */
void fsjob_cancel(struct tool_call *call);
/* For run to poll between steps: the call was cancelled or timed out
 * (false for NULL, and inline, where nothing can cancel meanwhile). */
bool fsjob_cancelled(const struct fsjob *job);
/* The workspace the job works in. */
const struct workspace *fsjob_ws(const struct fsjob *job);
/* True when the job runs on a worker thread (not inline on the loop). */
bool fsjob_on_worker(const struct fsjob *job);
/* True while run is tried on the loop (fsjob_ops.inline_first): it may
 * answer FSJOB_NOT_INLINE to be run on a worker instead. */
bool fsjob_trying_inline(const struct fsjob *job);

/*
 * The file system, for run functions: the workspace primitives of
 * lib/files (workspace_internal.h) applied to the job's workspace,
 * with the job's identity. Same arguments and answers as those.
 */
int fsjob_openat(const struct fsjob *job, const char *path, size_t len, int flags, mode_t mode, int *ret_fd);
/* Opens rel beneath dirfd following no symlink at all, as the walk of a
 * tree read from directories does (ws_open_nofollow: a symlink on the way
 * fails with -ELOOP, rel holds no ".."); dirfd is a directory the job
 * opened (fsjob_openat(), fsjob_store_dir(), or an earlier call). */
int fsjob_open_nofollow(const struct fsjob *job, int dirfd, const char *rel, int flags, int *ret_fd);
int fsjob_read(const struct fsjob *job, const char *path, size_t len, uint64_t offset, size_t max,
	       struct buf *out, struct stat *ret_st);
int fsjob_read_small(const struct fsjob *job, const char *path, size_t len, uint64_t offset, size_t max,
		     uint64_t small, struct buf *out, struct stat *ret_st);
int fsjob_write_atomic(const struct fsjob *job, const char *path, size_t len, const void *data, size_t n,
		       bool create_dirs, bool *ret_created);
int fsjob_check(const struct fsjob *job, const char *path, size_t len);
int fsjob_lstat(const struct fsjob *job, const char *path, size_t len, struct stat *ret_st, char **ret_target);
int fsjob_rename(const struct fsjob *job, const char *from, size_t from_len, const char *to, size_t to_len,
		 bool overwrite);
int fsjob_mkdir(const struct fsjob *job, const char *path, size_t len, bool parents, bool *ret_created);
int fsjob_delete_begin(const struct fsjob *job, const char *path, size_t len, bool recursive,
		       struct ws_deleter **ret);
/* A recursive delete first looks through the whole tree, reading only
 * (fsjob_scan_step()), and removes nothing when it holds a protected path. */
int fsjob_delete_step(struct fsjob *job, struct ws_deleter *del, uint64_t budget_ms);
/*
 * Before a directory is taken whole by other means than the delete above
 * (a rename: fsjob_rename() of a directory must come after this): looks
 * through the tree beneath path, reading directories only, following no
 * symlink, for an entry that could not be deleted or moved on its own
 * (sandbox.protect: a nested repository's .git, at any depth, or a .git
 * file). fsjob_scan_begin() answers 0 with *ret NULL when there is
 * nothing to look at (no protection, not a directory, a path the operation
 * will refuse itself), WS_MORE when fsjob_scan_step() is to go on; that
 * one answers WS_MORE after about budget_ms (0: to the end), 0 when the
 * tree holds nothing protected, -EPERM at the first protected entry (the
 * call then fails with permission_denied naming it and the protection),
 * or a negative errno. The scan is freed with ws_scan_free(). A tree
 * changed while it is read may hold a protected entry made after the look
 * passed its place (see lib/files/workspace_scan.c).
 */
int fsjob_scan_begin(const struct fsjob *job, const char *path, size_t len, struct ws_scan **ret);
int fsjob_scan_step(struct fsjob *job, struct ws_scan *scan, uint64_t budget_ms);
/*
 * The daemon's own store (memory.dir, of the memory tool): files the
 * daemon keeps for each peer uid, outside every workspace. Named by the
 * directory the operator configured, never by an fd or a workspace, so
 * a tool cannot point a job at a directory it opened itself.
 *
 * fsjob_start_store() opens (making it) the calling peer's directory
 * DIR/<uid> on the loop, as the daemon (which owns DIR): 0700 and, when
 * the daemon is root, owned by the peer; a directory there owned by
 * anyone else or writable by others is refused with -EPERM, never used.
 * It then starts ops' work as fsjob_start() does, with that directory as
 * the job's workspace and the call's identity (the kernel decides, as
 * for any job); *ret is fsjob_start()'s answer. On a negative errno
 * nothing is started and arg is still the caller's.
 *
 * fsjob_store_dir() (in such a job's run function; -EPERM in any other
 * job) opens the directory name (one component) of the peer's
 * directory, making it 0700 (the peer's) when missing, following no
 * symlink: the place its files go (fsjob_open_nofollow() beneath it).
 */
int fsjob_start_store(struct tool_call *call, const char *dir, const struct fsjob_ops *ops, void *arg,
		      enum tool_ret *ret);
int fsjob_store_dir(const struct fsjob *job, const char *name, int *ret_fd);
/* How a tool is about to change a path. */
enum fsjob_touch {
	FSJOB_WRITE,	/* its content: a final symlink is followed, as a write does */
	FSJOB_MKDIR,	/* a directory made there */
	FSJOB_TAKE,	/* deleted or moved (either end) with all it holds */
};
/*
 * Refuses to change path as how says when that touches a protected path
 * (sandbox.protect, lib/sandbox/sandbox.h), as the kernel resolves it: the
 * directories it reaches (symlinks followed beneath the root), the missing
 * rest as it would be made, whether or not it exists yet. -EPERM then, and
 * the call fails with permission_denied naming the protection, whatever
 * run returns; else 0 (also for a path it cannot resolve: the operation
 * itself then fails). Made with the job's identity.
 */
int fsjob_guard(struct fsjob *job, const char *path, size_t len, enum fsjob_touch how);
/* The entry of sandbox.protect (the list in protect) that changing path in
 * ws as how says touches, or NULL; for checks outside a job, made with the
 * calling thread's rights. */
const char *fsjob_protected_in(const struct workspace *ws, const char *const *protect, const char *path,
			       size_t len, enum fsjob_touch how);

/* Made outside a job, with the calling thread's rights: not for tools,
 * whose file work a job does (see lib/files/workspace.h). */
#ifdef TC_TOOL_CODE
#pragma GCC poison fsjob_preview fsjob_protected_in
#endif

#endif
