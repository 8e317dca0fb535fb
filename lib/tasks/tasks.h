/* SPDX-License-Identifier: MIT */
/*
 * MCP tasks (2025-11-25) for tools/call: a call made now whose outcome is
 * fetched later, by the same peer uid, from any connection and, with a
 * shared store, from any daemon. A task is "working" while its call runs,
 * then "completed" (a result, isError or not), "failed" (an error) or
 * "cancelled"; it is kept ttl after it ends. Tasks of one uid are bounded.
 *
 * The daemon creates a task and dispatches the call with the task as the
 * caller's context (task_caller_ops); lookups answer through callbacks, at
 * once for tasks of this daemon, after a store round trip for others.
 */
#ifndef TC_TASKS_H
#define TC_TASKS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct caller;
struct caller_ops;
struct jgen;
struct outcome;
struct store;
struct tc_loop;

struct tasks_config {
	uint64_t default_ttl_ms;	/* 3600000: kept an hour after the end */
	uint64_t max_ttl_ms;		/* 86400000 */
	uint64_t poll_interval_ms;	/* 1000: what clients are told */
	size_t max_per_uid;		/* 1000 */
};

void tasks_config_defaults(struct tasks_config *c);

struct tasks;
struct task;

/* Told of each change of a task, and of its call's output while it runs
 * when the call carried a progress token (the creating connection's). */
struct task_watch_ops {
	void (*status)(void *ctx, const char *task_json, size_t n);
	/* As struct caller_ops.progress, for the task id. */
	void (*progress)(void *ctx, const char *id, const char *token, size_t token_len, uint64_t progress,
			 const char *stream, const char *data, size_t n);
};

struct tasks *tasks_new(struct tc_loop *loop, const struct tasks_config *cfg);
/* Cancels the calls of running tasks, answers waiting lookups with
 * -ECANCELED, frees. Accepts NULL; returns NULL. */
struct tasks *tasks_free(struct tasks *t);
/* Shares tasks through a store (NULL: this daemon only). */
void tasks_set_store(struct tasks *t, struct store *s);

struct task_req;

/*
 * Makes a working task for uid, kept ttl_ms after it ends (< 0: the
 * default; capped), and writes it to the store. cb gets r = 0 and the task
 * once the store has it (so every daemon sharing the store knows it): at
 * once with the memory store, and while a shared store is away with
 * on_unavailable "local" (then only this daemon knows it). Else -EBUSY:
 * the uid has max_per_uid tasks, here or across the daemons sharing the
 * store; -EIO: the shared store cannot be reached ("fail"). cb may run
 * before tasks_create returns (then NULL is returned). Cancelling the
 * request first drops the task.
 */
typedef void (*task_made_cb)(void *arg, int r, struct task *k);
struct task_req *tasks_create(struct tasks *t, uid_t uid, int64_t ttl_ms, task_made_cb cb, void *arg);
/* The task's id. */
const char *task_id(const struct task *k);
/*
 * Tells whether the shared store can be reached (its outage notices).
 * While it cannot, a lookup or cancel of a task this daemon does not hold
 * answers -EIO (it may be another daemon's), and so does a list; tasks
 * this daemon holds keep answering and can be cancelled. When it is back,
 * every task this daemon holds is written to it again.
 */
void tasks_store_state(struct tasks *t, bool up);
/* Whether a task's record is still on its way to the store (a stopping
 * daemon waits for it). */
bool tasks_writing(const struct tasks *t);
/* Applies new settings (a reload) to tasks made from now on. */
void tasks_reconfigure(struct tasks *t, const struct tasks_config *cfg);
/* Watches the task for the creating connection (ctx); ops NULL stops. */
void task_watch(struct task *k, const struct task_watch_ops *ops, void *ctx);
/* Stops every watch of ctx (its connection went away). */
void tasks_unwatch(struct tasks *t, void *ctx);
/* The call behind the task (for tasks/cancel); NULL once answered. */
void task_set_caller(struct task *k, struct caller *c);
/* The caller ops to dispatch a task's call with (ctx: the task). */
extern const struct caller_ops task_caller_ops;
/* Writes the task object (taskId, status, ...). */
void task_write(const struct task *k, struct jgen *g);

/*
 * Looks a task of uid up. cb gets r = 0 with the task's JSON object and,
 * once it ended, its outcome (NULL while working); -ENOENT for an unknown
 * task (or another uid's); -EIO when the shared store cannot tell. With
 * wait, the answer waits until the task ends. cb may run before tasks_get
 * returns (then NULL is returned); else the request can be cancelled.
 */
typedef void (*task_cb)(void *arg, int r, const char *task_json, size_t n, const struct outcome *o);
struct task_req *tasks_get(struct tasks *t, uid_t uid, const char *id, bool wait, task_cb cb, void *arg);
void task_req_cancel(struct task_req *q);

/* Lists uid's tasks after cursor (NULL: from the start): cb gets the
 * JSON array text of tasks and the next cursor (NULL: no more). */
typedef void (*task_list_cb)(void *arg, int r, const char *tasks_json, size_t n, const char *next);
struct task_req *tasks_list(struct tasks *t, uid_t uid, const char *cursor, task_list_cb cb, void *arg);

/*
 * Cancels uid's task, whichever daemon sharing the store runs it: cb gets
 * the task, "cancelled", once the store has it so (the daemon running it
 * hears, cancels its call and keeps it cancelled); else -ENOENT,
 * -EALREADY (it already ended) or -EIO (the store cannot be reached).
 */
struct task_req *tasks_cancel(struct tasks *t, uid_t uid, const char *id, task_cb cb, void *arg);

/* Writes admin/stats members: tasks, working. */
void tasks_write_stats(const struct tasks *t, struct jgen *g);
/* The same members, counting uid's tasks alone. */
void tasks_write_stats_of(struct tasks *t, uid_t uid, struct jgen *g);

#endif
