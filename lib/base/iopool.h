/* SPDX-License-Identifier: MIT */
/*
 * The io pool: a few worker threads that run blocking file-system work
 * (open, read, list, write, fsync, rename) so the event loop never waits on
 * a disk. The loop stays the only owner of the daemon's state: a job
 * carries its inputs and room for its results in its own arg, its run
 * function (on a worker) touches nothing else, and its completion runs back
 * on the loop, woken through an eventfd watched by the loop seam.
 *
 * A job's completion is called exactly once, on the loop: after run
 * returned, or told cancelled when iojob_cancel came first (the result, if
 * any, is to be dropped) or when the pool shut down before it ran. The
 * caller frees its arg in the completion, never before.
 */
#ifndef TC_IOPOOL_H
#define TC_IOPOOL_H

#include <stdbool.h>

struct tc_loop;
struct iopool;
struct iojob;

/* On a worker: does the blocking work, writing results into arg only. */
typedef void (*iojob_run_fn)(struct iojob *job, void *arg);
/* On the loop: consumes the results (or, cancelled, drops them). */
typedef void (*iojob_done_fn)(void *arg, bool cancelled);

#define IOPOOL_DEFAULT_THREADS 4
#define IOPOOL_MAX_THREADS 64

/* Starts threads workers (0: the default) whose completions run on loop. */
int iopool_new(struct tc_loop *loop, unsigned threads, struct iopool **ret);
/* Cancels every job (a running one sees iojob_cancelled), waits for the
 * running ones, joins the workers and runs every outstanding completion.
 * Accepts NULL; returns NULL. */
struct iopool *iopool_free(struct iopool *p);
/* Queues a job; the handle is valid until its completion has run. */
struct iojob *iopool_submit(struct iopool *p, iojob_run_fn run, iojob_done_fn done, void *arg);
/* Marks job cancelled: it will not start if it has not, a running one may
 * stop early (iojob_cancelled), and its completion is told cancelled. */
void iojob_cancel(struct iojob *job);
/* For a long run function to poll between steps (e.g. directory entries). */
bool iojob_cancelled(const struct iojob *job);
/* Jobs submitted whose completion has not run yet. */
unsigned iopool_pending(const struct iopool *p);

#endif
