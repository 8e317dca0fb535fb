/* SPDX-License-Identifier: MIT */
/*
 * Durable calls, the daemon's side: opening the configured store (memory,
 * or Redis shared by many daemons) and logging its outages once each, and
 * the MCP task methods: a tools/call made as a task, tasks/get,
 * tasks/result, tasks/list, tasks/cancel, and notifications/tasks/status
 * to the connection that made the task. Lookups of tasks of other daemons
 * wait for the store; such a request is cancelled with its connection.
 */
#include "daemon/durable.h"

#include <errno.h>
#include <string.h>

#include "daemon/conn.h"
#include "daemon/log.h"
#include "daemon/methods.h"
#include "daemon/server.h"
#include "lib/dispatch.h"
#include "lib/outcome.h"
#include "lib/session.h"
#include "lib/store.h"
#include "lib/tasks.h"
#include "proto/json.h"

#define TASK_ID_MAX 64

/* The store went away or came back: one line each time. */
static void store_notify(void *arg, bool up, const char *why)
{
	struct server *s = arg;
	if (up)
		log_info("store: %s is reachable again; idempotency records are shared again",
			 s->cfg.store.address);
	else
		log_warning("store: %s is unreachable (%s); keyed calls %s until it is back",
			    s->cfg.store.address, why,
			    s->cfg.store.fail ? "fail as transient" : "work on this daemon alone");
}

int durable_open(struct server *s, char **ret_err)
{
	const struct config *c = &s->cfg;
	if (!str_eq(c->store.kind, "memory")) {
		struct store_config sc;
		store_config_defaults(&sc);
		sc.kind = c->store.kind;
		sc.address = c->store.address;
		sc.prefix = c->store.prefix;
		sc.lease_ms = c->store.lease_ms;
		sc.timeout_ms = c->store.timeout_ms;
		sc.fail_unavailable = c->store.fail;
		sc.max_tasks = c->store.max_tasks;
		sc.notify = store_notify;
		sc.notify_arg = s;
		int r = dispatch_open_store(s->dispatcher, &sc);
		if (r < 0) {
			*ret_err = xasprintf("store: cannot use %s store at '%s': %s", c->store.kind,
					     c->store.address ? c->store.address : "", strerror(-r));
			return r;
		}
	}
	struct tasks_config tc;
	tasks_config_defaults(&tc);
	tc.default_ttl_ms = c->store.task_ttl_ms;
	tc.max_per_uid = c->store.max_tasks;
	s->tasks = tasks_new(s->loop, &tc);
	tasks_set_store(s->tasks, dispatch_store(s->dispatcher));
	return 0;
}

void durable_close(struct server *s)
{
	s->tasks = tasks_free(s->tasks);
}

void durable_conn_closed(struct conn *c)
{
	if (c->srv->tasks)
		tasks_unwatch(c->srv->tasks, c);
}

void durable_write_stats(struct server *s, struct jgen *g)
{
	jgen_key(g, "tasks");
	jgen_obj_open(g);
	tasks_write_stats(s->tasks, g);
	jgen_obj_close(g);
}

void durable_write_capability(struct jgen *g)
{
	jgen_key(g, "tasks");
	jgen_obj_open(g);
	jgen_key(g, "list");
	jgen_obj_open(g);
	jgen_obj_close(g);
	jgen_key(g, "cancel");
	jgen_obj_open(g);
	jgen_obj_close(g);
	jgen_key(g, "requests");
	jgen_obj_open(g);
	jgen_key(g, "tools");
	jgen_obj_open(g);
	jgen_key(g, "call");
	jgen_obj_open(g);
	jgen_obj_close(g);
	jgen_obj_close(g);
	jgen_obj_close(g);
	jgen_obj_close(g);
}

void durable_write_tool_execution(struct jgen *g)
{
	jgen_key(g, "execution");
	jgen_obj_open(g);
	jgen_kv_str(g, "taskSupport", "optional");
	jgen_obj_close(g);
}

/* --- a call made as a task --------------------------------------------- */

static void task_status(void *ctx, const char *task_json, size_t n)
{
	struct conn *c = ctx;
	if (!c->dead)
		conn_notify(c, "notifications/tasks/status", task_json, n);
}

static const struct task_watch_ops watch_ops = { .status = task_status };

bool durable_task_params(struct pending *p, const struct json *task, int64_t *ret_ttl)
{
	*ret_ttl = -1;
	if (task->type != JSON_OBJECT) {
		conn_error(p, JRPC_INVALID_PARAMS, "Invalid params for tools/call: task must be an object",
			   "{\"kind\":\"validation_error\"}");
		return false;
	}
	const struct json *ttl = json_get(task, "ttl");
	if (ttl && ttl->type != JSON_NULL && (!json_get_int(ttl, ret_ttl) || *ret_ttl < 0)) {
		conn_error(p, JRPC_INVALID_PARAMS,
			   "Invalid params for tools/call: task.ttl must be an integer >= 0 (milliseconds)",
			   "{\"kind\":\"validation_error\"}");
		return false;
	}
	return true;
}

void durable_call_as_task(struct conn *c, struct pending *p, const struct call_params *cp, int64_t ttl)
{
	struct server *s = c->srv;
	struct task *k;
	if (tasks_create(s->tasks, c->cred.uid, ttl, &k) < 0) {
		conn_error(p, JRPC_INTERNAL_ERROR,
			   "Too many tasks are kept for this user; wait for some to expire or fetch their results",
			   "{\"kind\":\"overloaded\",\"retryable\":true}");
		return;
	}
	task_watch(k, &watch_ops, c);
	/* The answer goes out first: the task's notifications follow it. */
	struct buf b = {0};
	struct jgen *g = jgen_new(&b);
	jgen_obj_open(g);
	jgen_key(g, "task");
	task_write(k, g);
	jgen_obj_close(g);
	jgen_free(g);
	conn_result(p, buf_head(&b), buf_size(&b));
	buf_free(&b);
	struct session *session = conn_session(c);
	conn_work_begin(s);
	struct caller *caller = dispatch_call(s->dispatcher, session, cp, &task_caller_ops, k);
	conn_work_end(s);
	if (caller)
		task_set_caller(k, caller);
}

/* --- the task methods --------------------------------------------------- */

/* The taskId of params, or NULL after answering the error. */
static const char *task_id(struct pending *p, const struct jrpc_req *req)
{
	const struct json *id = json_get(req->params, "taskId");
	if (!id || id->type != JSON_STRING || id->u.str.len == 0 || id->u.str.len > TASK_ID_MAX ||
	    strlen(id->u.str.s) != id->u.str.len || strchr(id->u.str.s, '\x1f')) {
		conn_error(p, JRPC_INVALID_PARAMS, "Invalid params: taskId must be a task id this server gave",
			   NULL);
		return NULL;
	}
	return id->u.str.s;
}

static void lookup_failed(struct pending *p, int r)
{
	if (r == -ENOENT) {
		conn_error(p, JRPC_INVALID_PARAMS, "Unknown task: it is another user's, or it expired", NULL);
	} else {
		conn_error(p, JRPC_INTERNAL_ERROR, "The task store cannot be reached; retry later",
			   "{\"kind\":\"transient\",\"retryable\":true}");
	}
}

/* A lookup waiting for the store belongs to its request: the request's
 * end (its connection went) cancels it. */
static void req_forget(void *upper)
{
	task_req_cancel(upper);
}

static void park(struct pending *p, struct task_req *q)
{
	if (!q)
		return;
	p->upper = q;
	p->upper_free = req_forget;
}

static struct pending *unpark(void *arg)
{
	struct pending *p = arg;
	p->upper = NULL;
	p->upper_free = NULL;
	return p;
}

static void got_task(void *arg, int r, const char *task_json, size_t n, const struct outcome *o)
{
	struct pending *p = unpark(arg);
	if (r < 0) {
		lookup_failed(p, r);
		return;
	}
	conn_result(p, task_json, n);
}

static void m_tasks_get(struct conn *c, const struct jrpc_req *req, struct pending *p)
{
	if (!p)
		return;
	const char *id = task_id(p, req);
	if (id)
		park(p, tasks_get(c->srv->tasks, c->cred.uid, id, false, got_task, p));
}

static void got_result(void *arg, int r, const char *task_json, size_t n, const struct outcome *o)
{
	struct pending *p = unpark(arg);
	if (r < 0 || !o) {
		lookup_failed(p, r < 0 ? r : -EIO);
		return;
	}
	methods_answer_outcome(p, o, false);
}

static void m_tasks_result(struct conn *c, const struct jrpc_req *req, struct pending *p)
{
	if (!p)
		return;
	const char *id = task_id(p, req);
	if (id)
		park(p, tasks_get(c->srv->tasks, c->cred.uid, id, true, got_result, p));
}

static void got_list(void *arg, int r, const char *tasks_json, size_t n, const char *next)
{
	struct pending *p = unpark(arg);
	if (r == -EINVAL) {
		conn_error(p, JRPC_INVALID_PARAMS, "Invalid params: cursor is not one this server gave", NULL);
		return;
	}
	if (r < 0) {
		lookup_failed(p, r);
		return;
	}
	struct buf b = {0};
	buf_puts(&b, "{\"tasks\":");
	buf_append(&b, tasks_json, n);
	if (next) {
		buf_puts(&b, ",\"nextCursor\":");
		json_quote(&b, next, strlen(next));
	}
	buf_putc(&b, '}');
	conn_result(p, buf_head(&b), buf_size(&b));
	buf_free(&b);
}

static void m_tasks_list(struct conn *c, const struct jrpc_req *req, struct pending *p)
{
	if (!p)
		return;
	const struct json *cur = json_get(req->params, "cursor");
	if (cur && cur->type != JSON_STRING && cur->type != JSON_NULL) {
		conn_error(p, JRPC_INVALID_PARAMS, "Invalid params: cursor must be a string", NULL);
		return;
	}
	const char *cursor = cur && cur->type == JSON_STRING ? cur->u.str.s : NULL;
	park(p, tasks_list(c->srv->tasks, c->cred.uid, cursor, got_list, p));
}

static void m_tasks_cancel(struct conn *c, const struct jrpc_req *req, struct pending *p)
{
	if (!p)
		return;
	const char *id = task_id(p, req);
	if (!id)
		return;
	int r = tasks_cancel(c->srv->tasks, c->cred.uid, id);
	if (r == -EALREADY) {
		conn_error(p, JRPC_INVALID_PARAMS, "Invalid params: the task has already ended", NULL);
		return;
	}
	if (r == -ENOENT) {
		char *msg = xasprintf("Unknown task '%s': only the daemon running a task can cancel it", id);
		conn_error(p, JRPC_INVALID_PARAMS, msg, NULL);
		free(msg);
		return;
	}
	/* Cancelled: answer the task as it now stands. */
	park(p, tasks_get(c->srv->tasks, c->cred.uid, id, false, got_task, p));
}

const struct durable_method durable_methods[] = {
	{ "tasks/get", m_tasks_get },
	{ "tasks/result", m_tasks_result },
	{ "tasks/list", m_tasks_list },
	{ "tasks/cancel", m_tasks_cancel },
	{ NULL, NULL },
};
