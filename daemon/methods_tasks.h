/* SPDX-License-Identifier: MIT */
/*
 * The MCP task methods: tools/call made as a task, tasks/get, tasks/result,
 * tasks/list, tasks/cancel, notifications/tasks/status (see
 * methods_tasks.c). The table of tasks is opened with the store
 * (store_binding.h).
 */
#ifndef TC_METHODS_TASKS_H
#define TC_METHODS_TASKS_H

#include <stdbool.h>
#include <stdint.h>

struct call_params;
struct conn;
struct jgen;
struct json;
struct pending;

/* initialize's capabilities.tasks; a listed tool's execution member. */
void methods_tasks_write_capability(struct jgen *g);
void methods_tasks_write_tool_execution(struct jgen *g);

/* Checks tools/call's params.task: its ttl (-1: none) or false after
 * answering the error. */
bool methods_tasks_params(struct pending *p, const char *tool, const struct json *task, int64_t *ret_ttl);
/* Makes a task for the checked call, answers {task} and runs the call. */
void methods_tasks_call(struct conn *c, struct pending *p, const struct call_params *cp, int64_t ttl);
/* The task methods (tasks/get, tasks/result, tasks/list, tasks/cancel):
 * task_methods in methods_internal.h. */

#endif
