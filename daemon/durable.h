/* SPDX-License-Identifier: MIT */
/*
 * Durable calls in the daemon: the store (memory or Redis) and MCP tasks
 * (tools/call made as a task, tasks/get, tasks/result, tasks/list,
 * tasks/cancel, notifications/tasks/status).
 */
#ifndef TC_DURABLE_H
#define TC_DURABLE_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

struct call_params;
struct config;
struct conn;
struct jgen;
struct json;
struct jrpc_req;
struct pending;
struct server;

/* Opens the configured store (after the dispatcher) and the tasks, whose
 * watchers go with their connections: 0, or a negative errno with a
 * message in *ret_err. */
int durable_open(struct server *s, char **ret_err);
void durable_close(struct server *s);
/* A reload with fresh: the store's kind, address and prefix wait for a
 * restart (logged, listed in admin/stats' storeRestartPending, and put
 * back in fresh, which stays true about what is in use); lease_ms,
 * timeout_ms, on_unavailable and the tasks section apply at once. */
void durable_reload(struct server *s, struct config *fresh);

/* admin/stats' "tasks" member. */
void durable_write_stats(struct server *s, struct jgen *g);
/* The tasks member of admin/stats for a peer of uid: its own tasks alone. */
void durable_write_stats_of(struct server *s, uid_t uid, struct jgen *g);
/* initialize's capabilities.tasks; a listed tool's execution member. */
void durable_write_capability(struct jgen *g);
void durable_write_tool_execution(struct jgen *g);

/* Checks tools/call's params.task: its ttl (-1: none) or false after
 * answering the error. */
bool durable_task_params(struct pending *p, const struct json *task, int64_t *ret_ttl);
/* Makes a task for the checked call, answers {task} and runs the call. */
void durable_call_as_task(struct conn *c, struct pending *p, const struct call_params *cp, int64_t ttl);
/* The task methods (tasks/get, tasks/result, tasks/list, tasks/cancel):
 * task_methods in methods_internal.h. */

#endif
