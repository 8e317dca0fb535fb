/* SPDX-License-Identifier: MIT */
/*
 * The methods that make and shape a session: initialize (protocol
 * version, session id, workspace chosen race-free, budget, tool errors as
 * results, the client's capabilities), notifications/initialized and
 * notifications/roots/list_changed (which ask the client for its roots),
 * and sessions/cancel.
 */
#include "daemon/methods.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "daemon/client_asks.h"
#include "daemon/client_session.h"
#include "daemon/conn.h"
#include "daemon/methods_tasks.h"
#include "daemon/log.h"
#include "daemon/methods_internal.h"
#include "daemon/server_state.h"
#include "lib/dispatch/dispatch.h"
#include "lib/session.h"
#include "lib/store/store.h"
#include "lib/files/workspace.h"
#include "lib/files/workspace_root.h"
#include "proto/json.h"

/* --- initialize -------------------------------------------------------- */

/* The one answer for a workspace that may not be used, whatever the reason,
 * so that it tells nothing about the path. */
#define WS_REFUSED "Workspace not allowed: it must be an existing directory that is, or lies beneath, " \
		   "one of workspaces.allowed in the daemon's config, and that you can search"

static void initialize_go(struct conn *c, const struct json *params, struct pending *p, const char *version,
			  int64_t calls);

/* An initialize waiting for the shared store's record of its session. */
struct resume {
	struct pending *p;
	struct store_wait *w;
	char *params;			/* the request's params, as text */
	char *id;
	const char *version;
	bool calling;			/* inside store_session_get */
	bool answered;			/* the store answered during it */
	int r;
	char *rec;
	size_t n;
};

static void resume_free(void *arg)
{
	struct resume *q = arg;
	store_wait_cancel(q->w);
	free(q->params);
	free(q->id);
	free(q->rec);
	free(q);
}

/* Goes on with the initialize once the store answered. */
static void resume_go(struct resume *q)
{
	struct pending *p = q->p;
	p->upper = NULL;
	p->upper_free = NULL;
	struct conn *c = p->conn;
	if (q->r == 0 && client_session_restore(c, q->id, q->rec, q->n) < 0)
		log_debug("session %s: its record in the store cannot be used; it starts afresh", q->id);
	_cleanup_(json_doc_unrefp) struct json_doc *doc = NULL;
	struct json_err err;
	if (json_parse(q->params, strlen(q->params), 0, 0, &doc, &err) < 0) {
		resume_free(q);
		conn_error(p, JRPC_INTERNAL_ERROR, "Internal error in toolcalld; the details are in its log",
			   "{\"kind\":\"internal\"}");
		return;
	}
	const struct json *params = json_doc_root(doc);
	int64_t calls = -1;
	json_get_int(json_get(json_get(params, "budget"), "toolCalls"), &calls);
	const char *version = q->version;
	resume_free(q);
	initialize_go(c, params, p, version, calls);
	conn_go_on_input(c);
}

static void got_record(void *arg, int r, const char *rec, size_t n)
{
	struct resume *q = arg;
	q->w = NULL;
	q->r = r;
	if (r == 0) {
		q->rec = xstrndup(rec, n);
		q->n = n;
	}
	if (q->calling)
		q->answered = true;
	else
		resume_go(q);
}

static void resume_from_store(struct conn *c, const struct json *params, struct pending *p, const char *id)
{
	struct resume *q = xcalloc(1, sizeof(*q));
	struct buf b = {0};
	struct jgen *g = jgen_new(&b);
	jgen_value(g, params);
	jgen_free(g);
	q->params = buf_steal(&b);
	q->id = xstrdup(id);
	q->p = p;
	const char *want = json_str(json_get(params, "protocolVersion"));
	q->version = METHODS_LATEST_VERSION;
	for (size_t i = 0; want && i < methods_n_versions; i++)
		if (str_eq(want, methods_versions[i]))
			q->version = methods_versions[i];
	p->upper = q;
	p->upper_free = resume_free;
	q->calling = true;
	struct store_wait *w = store_session_get(client_session_store(server_of(c)), c->cred.uid, id, got_record, q);
	q->calling = false;
	if (q->answered) {
		resume_go(q);
	} else {
		/* The connection's next requests are for the session this
		 * initialize names: they wait for it, as they would without a
		 * store (other connections are served meanwhile). */
		q->w = w;
		conn_wait_input(c);
	}
}

static void m_initialize(struct conn *c, const struct jrpc_req *req, struct pending *p)
{
	struct server *s = server_of(c);
	const struct json *params = req->params;
	const char *want = json_str(json_get(params, "protocolVersion"));
	const char *version = METHODS_LATEST_VERSION;
	for (size_t i = 0; want && i < methods_n_versions; i++)
		if (str_eq(want, methods_versions[i]))
			version = methods_versions[i];

	const struct json *sid = json_get(params, "sessionId");
	const struct json *wsv = json_get(params, "workspace");
	const struct json *budget = json_get(params, "budget");
	if (sid && (sid->type != JSON_STRING || sid->u.str.len == 0 || sid->u.str.len > 128 ||
		    strlen(sid->u.str.s) != sid->u.str.len)) {
		methods_invalid_params(p, "sessionId must be a non-empty string of at most 128 bytes");
		return;
	}
	if (wsv && (wsv->type != JSON_STRING || strlen(wsv->u.str.s) != wsv->u.str.len)) {
		methods_invalid_params(p, "workspace must be a path");
		return;
	}
	const struct json *te = json_get(params, "toolErrors");
	const char *te_s = json_str(te);
	if (te && (!te_s || (!str_eq(te_s, "result") && !str_eq(te_s, "envelope")))) {
		methods_invalid_params(p, "toolErrors must be \"result\" or \"envelope\"");
		return;
	}
	const struct json *mem = json_get(params, "memory");
	if (mem && mem->type != JSON_BOOL) {
		methods_invalid_params(p, "memory must be true or false");
		return;
	}
	int64_t calls = -1;
	if (budget) {
		const struct json *tc = json_get(budget, "toolCalls");
		if (budget->type != JSON_OBJECT || !json_get_int(tc, &calls) || calls < 0) {
			methods_invalid_params(p, "budget must be {\"toolCalls\": N} with N >= 0");
			return;
		}
	}
	/* A session this daemon does not know may be in the shared store:
	 * one that outlived the daemon that made it (a restart). */
	if (sid && p && !session_find(s->sessions, c->cred.uid, sid->u.str.s) && client_session_store(s)) {
		resume_from_store(c, params, p, sid->u.str.s);
		return;
	}
	initialize_go(c, params, p, version, calls);
}

/* initialize once its params are checked (and a session taken back from
 * the shared store, if any). */
static void initialize_go(struct conn *c, const struct json *params, struct pending *p, const char *version,
			  int64_t calls)
{
	struct server *s = server_of(c);
	const struct json *sid = json_get(params, "sessionId");
	const struct json *wsv = json_get(params, "workspace");
	const char *te_s = json_str(json_get(params, "toolErrors"));
	const struct json *mem = json_get(params, "memory");

	struct workspace *ws = ws_ref(s->default_ws);
	if (wsv) {
		struct workspace *asked = NULL;
		int r = client_open_workspace(c, wsv->u.str.s, &asked);
		if (r < 0) {
			ws_unref(ws);
			if (r == -EINVAL)
				methods_invalid_params(p, "workspace must be an absolute path");
			else
				methods_invalid_params(p, WS_REFUSED);
			return;
		}
		ws_unref(ws);
		ws = asked;
	}

	/* Another uid's session id names no session of this peer's: a fresh
	 * one is made, as for an id nobody used (lib/session.c). */
	struct session *session = NULL;
	bool resumed = sid && session_find(s->sessions, c->cred.uid, sid->u.str.s);
	(void)session_get(s->sessions, sid ? sid->u.str.s : NULL, c->cred.uid, ws, &session);
	client_session_peer(c, session);
	if (wsv && !str_eq(session->base->root, ws->root)) {
		ws_unref(ws);
		methods_invalid_params(p, "Session '%s' already works in '%s'", session->id, session->base->root);
		session_unref(session);
		return;
	}
	ws_unref(ws);
	if (mem)
		session->no_memory = !mem->u.b;
	if (calls >= 0) {
		session->has_budget = true;
		session->budget_left = calls;
	}
	struct client_state *cl = client_state_of(c);
	session_unref(cl->session);
	cl->session = session;
	cl->initialized = true;
	client_session_save(s, session);
	if (te_s)
		cl->tool_errors_result = str_eq(te_s, "result");
	asks_capabilities(c, json_get(params, "capabilities"));

	struct buf b = {0};
	struct jgen *g = jgen_new(&b);
	jgen_obj_open(g);
	jgen_kv_str(g, "protocolVersion", version);
	jgen_key(g, "capabilities");
	jgen_obj_open(g);
	jgen_key(g, "tools");
	jgen_obj_open(g);
	jgen_kv_bool(g, "listChanged", true);
	jgen_obj_close(g);
	methods_tasks_write_capability(g);
	jgen_obj_close(g);
	jgen_key(g, "serverInfo");
	methods_write_server_info(g);
	jgen_kv_str(g, "sessionId", session->id);
	jgen_kv_str(g, "workspace", session->ws->root);
	/* Whether the id named a session that goes on, and what it has left:
	 * a client coming back (the bridge after a restart) sees what it got. */
	jgen_kv_bool(g, "resumed", resumed);
	if (session->has_budget)
		jgen_kv_int(g, "budgetLeft", session->budget_left);
	jgen_obj_close(g);
	jgen_free(g);
	methods_answer(p, &b);
}

static void m_initialized(struct conn *c, const struct jrpc_req *req, struct pending *p)
{
	client_state_of(c)->initialized = true;
	asks_roots(c);
	if (p) {
		struct buf b = {0};
		buf_puts(&b, "{}");
		methods_answer(p, &b);
	}
}

/* notifications/roots/list_changed: the client's roots are asked again. */
static void m_roots_changed(struct conn *c, const struct jrpc_req *req, struct pending *p)
{
	asks_roots(c);
	if (p)
		conn_result(p, "{}", 2);
}

static void m_sessions_cancel(struct conn *c, const struct jrpc_req *req, struct pending *p)
{
	struct server *s = server_of(c);
	const struct json *sid = json_get(req->params, "sessionId");
	struct session *session;
	if (sid && sid->type != JSON_NULL) {
		if (sid->type != JSON_STRING) {
			methods_invalid_params(p, "sessionId must be a string");
			return;
		}
		session = session_find(s->sessions, c->cred.uid, sid->u.str.s);
		if (!session) {
			methods_invalid_params(p, "Unknown session '%s'", sid->u.str.s);
			return;
		}
	} else {
		session = client_session(c);
	}
	unsigned n = dispatch_cancel_session(s->dispatcher, session);
	if (p) {
		char out[64];
		int len = snprintf(out, sizeof(out), "{\"cancelled\":%u}", n);
		conn_result(p, out, (size_t)len);
	}
}

const struct method session_methods[] = {
	{ .name = "initialize", .exec = m_initialize },
	{ .name = "notifications/initialized", .exec = m_initialized },
	{ .name = "notifications/roots/list_changed", .exec = m_roots_changed },
	{ .name = "sessions/cancel", .exec = m_sessions_cancel },
	{ .name = NULL },
};
