/* SPDX-License-Identifier: MIT */
/*
 * File work of a tool call, run off the loop as the peer who asked. A tool
 * hands fsjob_start() a run function and its arg: run executes on a worker
 * of the io pool (struct tool_env's pool), with the thread's file-system
 * identity switched to the call's when that identity says so (its change,
 * the same decision its children follow: lib/identity.h), and restored
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
 * A tool may do work it knows to be small on the loop first, when
 * fsjob_may_inline() says so (no identity switch needed): read_file reads a
 * regular file of at most FSJOB_INLINE_BYTES there, which costs far less
 * than a trip to a worker and back, and hands anything larger to the pool.
 */
#ifndef TC_FSJOB_H
#define TC_FSJOB_H

#include <stdbool.h>

#include "lib/tool.h"

struct fsjob;
struct identity;
struct workspace;

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
};

/* The most bytes a file may hold to be read on the loop. */
#define FSJOB_INLINE_BYTES (64 * 1024)

/* True when call's file work may run on the loop: no identity to take. */
bool fsjob_may_inline(const struct tool_call *call);
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

#endif
