/* SPDX-License-Identifier: MIT */
/*
 * The MCP task methods: a tools/call made as a task, tasks/get,
 * tasks/result, tasks/list, tasks/cancel, and notifications/tasks/status
 * and the call's notifications/progress to the connection that made the
 * task (until it closes: store_binding.c's hook unwatches its tasks).
 * Lookups of tasks of other daemons wait for the store; such a request is
 * cancelled with its connection. The table of tasks is opened with the
 * store (store_binding.c).
 */
#include "daemon/methods_tasks.h"

#include <errno.h>
#include <stddef.h>
#include <string.h>

#include "daemon/answer.h"
#include "daemon/client_session.h"
#include "daemon/conn.h"
#include "daemon/log.h"
#include "daemon/methods_internal.h"
#include "daemon/server_state.h"
#include "lib/dispatch/dispatch.h"
#include "lib/errors.h"
#include "lib/session.h"
#include "lib/tasks/tasks.h"
#include "proto/json.h"

#define TASK_ID_MAX 64
#define RELATED_TASK "io.modelcontextprotocol/related-task"
/* Deeper than any result the daemon writes (arguments and structured
 * content: limits.max_json_depth is at most 1024). */
#define RESULT_DEPTH 1100

void methods_tasks_write_capability(struct jgen *g)
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

void methods_tasks_write_tool_execution(struct jgen *g)
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

/* The task's call printed: notifications/progress with the token of the
 * tools/call that made the task, naming the task as MCP asks of messages
 * about one; dropped (and counted) for a client that does not read, as
 * for a plain call. */
static void task_progress(void *ctx, const char *id, const char *token, size_t token_len, uint64_t progress,
			  const char *stream, const char *data, size_t n)
{
	struct conn *c = ctx;
	if (!answer_progress(c, id, token, token_len, progress, stream, data, n))
		server_of(c)->progress_dropped++;
}

static const struct task_watch_ops watch_ops = { .status = task_status, .progress = task_progress };

bool methods_tasks_params(struct pending *p, const char *tool, const struct json *task, int64_t *ret_ttl)
{
	*ret_ttl = -1;
	if (task->type != JSON_OBJECT) {
		answer_invalid_call(p, tool, "task must be an object");
		return false;
	}
	const struct json *ttl = json_get(task, "ttl");
	if (ttl && ttl->type != JSON_NULL && (!json_get_int(ttl, ret_ttl) || *ret_ttl < 0)) {
		answer_invalid_call(p, tool, "task.ttl must be an integer >= 0 (milliseconds)");
		return false;
	}
	return true;
}

/* A call made as a task, waiting for the store to have the task. */
struct task_start {
	struct server *s;
	struct conn *c;
	struct pending *p;
	struct call_params cp;		/* its strings live in cp.doc */
	struct task_req *q;
};

static void start_forget(void *upper)
{
	struct task_start *ts = upper;
	task_req_cancel(ts->q);
	json_doc_unref(ts->cp.doc);
	free(ts);
}

/* The store has the task (or refused it): answer {task}, then run it. */
static void task_made(void *arg, int r, struct task *k)
{
	struct task_start *ts = arg;
	struct pending *p = ts->p;
	struct conn *c = ts->c;
	struct server *s = ts->s;
	p->upper = NULL;
	p->upper_free = NULL;
	if (r < 0) {
		/* A failed call, answered as every other (its tool named, an
		 * isError result under toolErrors "result"). */
		_cleanup_(outcome_unrefp) struct outcome *o = r == -EBUSY
			? outcome_error(TC_OVERLOADED, "Too many tasks are kept for this user; wait for some to "
					"expire or fetch their results")
			: outcome_error(TC_TRANSIENT, "The task store cannot be reached; retry later");
		o->call_id = dispatch_new_call_id(s->dispatcher);
		o->tool = ts->cp.tool ? xstrdup(ts->cp.tool) : NULL;
		answer_outcome(p, o, false);
	} else {
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
		struct session *session = client_session(c);
		conn_work_begin(c);
		struct caller *caller = dispatch_call(s->dispatcher, session, &ts->cp, &task_caller_ops, k);
		conn_work_end(c);
		if (caller)
			task_set_caller(k, caller);
	}
	json_doc_unref(ts->cp.doc);
	free(ts);
}

void methods_tasks_call(struct conn *c, struct pending *p, const struct call_params *cp, int64_t ttl)
{
	struct task_start *ts = xcalloc(1, sizeof(*ts));
	ts->s = server_of(c);
	ts->c = c;
	ts->p = p;
	ts->cp = *cp;
	ts->cp.doc = json_doc_ref(cp->doc);
	/* Until the store answers, the request's end (its connection went)
	 * drops the task: its creator never heard of it. */
	p->upper = ts;
	p->upper_free = start_forget;
	struct task_req *q = tasks_create(server_of(c)->tasks, c->cred.uid, ttl, task_made, ts);
	if (q)
		ts->q = q;
}

/* --- the task methods --------------------------------------------------- */

/* The taskId of params, or NULL after answering the error. */
static const char *task_id_param(struct pending *p, const struct jrpc_req *req)
{
	const struct json *id = json_get(req->params, "taskId");
	if (!id || id->type != JSON_STRING || id->u.str.len == 0 || id->u.str.len > TASK_ID_MAX ||
	    strlen(id->u.str.s) != id->u.str.len || strchr(id->u.str.s, '\x1f')) {
		answer_invalid_params(p, "Invalid params: taskId must be a task id this server gave");
		return NULL;
	}
	return id->u.str.s;
}

static void lookup_failed(struct pending *p, int r)
{
	if (r == -ENOENT) {
		answer_invalid_params(p, "Unknown task: it is another user's, or it expired");
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
	const char *id = task_id_param(p, req);
	if (id)
		park(p, tasks_get(server_of(c)->tasks, c->cred.uid, id, false, got_task, p));
}

/*
 * Writes the JSON object obj (n bytes) with "_meta" holding
 * io.modelcontextprotocol/related-task: {taskId} beside what it held;
 * false (nothing written) when obj is not an object this can read.
 */
static bool with_related_task(const char *obj, size_t n, const char *id, struct buf *out)
{
	struct json_doc *doc = NULL;
	struct json_err err;
	if (json_parse(obj, n, 0, RESULT_DEPTH, &doc, &err) < 0)
		return false;
	const struct json *root = json_doc_root(doc);
	if (root->type != JSON_OBJECT) {
		json_doc_unref(doc);
		return false;
	}
	struct jgen *g = jgen_new(out);
	jgen_obj_open(g);
	const struct json *meta = NULL;
	for (size_t i = 0; i < root->u.obj.n; i++) {
		const struct json_member *m = &root->u.obj.members[i];
		if (str_eq(m->key, "_meta") && m->value->type == JSON_OBJECT)
			meta = m->value;
		else
			jgen_kv_raw(g, m->key, obj + m->value->off, m->value->len);
	}
	jgen_key(g, "_meta");
	jgen_obj_open(g);
	for (size_t i = 0; meta && i < meta->u.obj.n; i++) {
		const struct json_member *m = &meta->u.obj.members[i];
		if (!str_eq(m->key, RELATED_TASK))
			jgen_kv_raw(g, m->key, obj + m->value->off, m->value->len);
	}
	jgen_key(g, RELATED_TASK);
	jgen_obj_open(g);
	jgen_kv_str(g, "taskId", id);
	jgen_obj_close(g);
	jgen_obj_close(g);
	jgen_obj_close(g);
	jgen_free(g);
	json_doc_unref(doc);
	return true;
}

/* Answers tasks/result: what the call would have answered, its _meta (an
 * error's data._meta) naming the task, as MCP asks of tasks/result. */
static void answer_result(struct pending *p, const struct outcome *o, const char *id)
{
	const struct answer_call call = { o->call_id, o->tool, o->attempts, o->duration_ms };
	struct buf b = {0}, out = {0};
	if (o->kind == TC_OK) {
		outcome_write_result(o, false, &b);
		if (with_related_task(buf_head(&b), buf_size(&b), id, &out))
			conn_call_result(p, &call, buf_head(&out), buf_size(&out));
		else
			answer_outcome(p, o, false);
	} else if (outcome_write_error_data(o, false, &b),
		   !with_related_task(buf_head(&b), buf_size(&b), id, &out)) {
		answer_outcome(p, o, false);
	} else {
		const char *msg = answer_error_message(o);
		if (p->conn->client->tool_errors_result && o->kind != TC_NOT_FOUND) {
			/* As a tools/call answers such a client: an isError result. */
			struct buf r = {0};
			answer_write_error_result(&r, msg, buf_head(&b), buf_size(&b));
			buf_clear(&out);
			if (with_related_task(buf_head(&r), buf_size(&r), id, &out))
				conn_call_result(p, &call, buf_head(&out), buf_size(&out));
			else
				answer_outcome(p, o, false);
			buf_free(&r);
		} else {
			buf_putc(&out, '\0');
			conn_call_error(p, &call, tc_kind_code(o->kind), msg, buf_head(&out));
		}
	}
	buf_free(&b);
	buf_free(&out);
}

/* The taskId member of a task object. */
static char *task_json_id(const char *task_json, size_t n)
{
	struct json_doc *doc = NULL;
	struct json_err err;
	if (json_parse(task_json, n, 0, 0, &doc, &err) < 0)
		return NULL;
	const char *id = json_str(json_get(json_doc_root(doc), "taskId"));
	char *ret = id ? xstrdup(id) : NULL;
	json_doc_unref(doc);
	return ret;
}

static void got_result(void *arg, int r, const char *task_json, size_t n, const struct outcome *o)
{
	struct pending *p = unpark(arg);
	_cleanup_free_ char *id = r == 0 && o ? task_json_id(task_json, n) : NULL;
	if (!id) {
		lookup_failed(p, r < 0 ? r : -EIO);
		return;
	}
	answer_result(p, o, id);
}

static void m_tasks_result(struct conn *c, const struct jrpc_req *req, struct pending *p)
{
	if (!p)
		return;
	const char *id = task_id_param(p, req);
	if (id)
		park(p, tasks_get(server_of(c)->tasks, c->cred.uid, id, true, got_result, p));
}

static void got_list(void *arg, int r, const char *tasks_json, size_t n, const char *next)
{
	struct pending *p = unpark(arg);
	if (r == -EINVAL) {
		answer_invalid_params(p, "Invalid params: cursor is not one this server gave");
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
		answer_invalid_params(p, "Invalid params: cursor must be a string");
		return;
	}
	const char *cursor = cur && cur->type == JSON_STRING ? cur->u.str.s : NULL;
	park(p, tasks_list(server_of(c)->tasks, c->cred.uid, cursor, got_list, p));
}

static void got_cancel(void *arg, int r, const char *task_json, size_t n, const struct outcome *o)
{
	struct pending *p = unpark(arg);
	if (r == -EALREADY)
		answer_invalid_params(p, "Invalid params: the task has already ended");
	else if (r < 0)
		lookup_failed(p, r);
	else
		conn_result(p, task_json, n);
}

static void m_tasks_cancel(struct conn *c, const struct jrpc_req *req, struct pending *p)
{
	if (!p)
		return;
	const char *id = task_id_param(p, req);
	if (id)
		park(p, tasks_cancel(server_of(c)->tasks, c->cred.uid, id, got_cancel, p));
}

const struct method task_methods[] = {
	{ .name = "tasks/get", .exec = m_tasks_get, .flags = METHOD_REQUEST_ONLY },
	{ .name = "tasks/result", .exec = m_tasks_result, .flags = METHOD_REQUEST_ONLY },
	{ .name = "tasks/list", .exec = m_tasks_list, .flags = METHOD_REQUEST_ONLY },
	{ .name = "tasks/cancel", .exec = m_tasks_cancel, .flags = METHOD_REQUEST_ONLY },
	{ .name = NULL },
};
