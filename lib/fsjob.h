/* SPDX-License-Identifier: MIT */
/*
 * File work of a tool call, run off the loop as the peer who asked. A tool
 * hands fsjob_start() a run function and its arg: run executes on a worker
 * of the io pool (struct tool_env's pool), with the thread's file-system
 * identity switched to the peer's when the call carries one that needs it
 * (lib/identity.h), and restored after; then, back on the loop, done turns
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
 * fails (the loop never switches). There is no inline fast path: measured,
 * a 4 KiB read_file through the pool is as fast as inline, and only the
 * pool guarantees that a slow disk or a huge file never stalls the loop.
 */
#ifndef TC_FSJOB_H
#define TC_FSJOB_H

#include <stdbool.h>

#include "lib/tool.h"

struct fsjob;
struct workspace;

/* On a worker (or inline): the blocking work; 0 or a negative errno. */
typedef int (*fsjob_run_fn)(struct fsjob *job, void *arg);
/* On the loop, not cancelled: sets call's outcome from arg and r. */
typedef void (*fsjob_done_fn)(struct tool_call *call, void *arg, int r);

struct fsjob_ops {
	fsjob_run_fn run;
	fsjob_done_fn done;
	void (*free)(void *arg);	/* NULL: free() */
};

/* Starts arg's work for call (arg is owned from here, freed by ops->free). */
enum tool_ret fsjob_start(struct tool_call *call, const struct fsjob_ops *ops, void *arg);
/* tool_def.cancel of tools that use fsjob_start. */
void fsjob_cancel(struct tool_call *call);
/* For run to poll between steps: the call was cancelled or timed out. */
bool fsjob_cancelled(const struct fsjob *job);
/* The workspace the job works in. */
const struct workspace *fsjob_ws(const struct fsjob *job);
/* True when the job runs on a worker thread (not inline on the loop). */
bool fsjob_on_worker(const struct fsjob *job);

#endif
