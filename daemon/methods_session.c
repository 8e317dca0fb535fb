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
#include "daemon/durable.h"
#include "daemon/log.h"
#include "daemon/methods_internal.h"
#include "daemon/server_state.h"
#include "lib/dispatch.h"
#include "lib/session.h"
#include "lib/workspace.h"
#include "lib/workspace_root.h"
#include "proto/json.h"

/* --- initialize -------------------------------------------------------- */

/* The one answer for a workspace that may not be used, whatever the reason,
 * so that it tells nothing about the path. */
#define WS_REFUSED "Workspace not allowed: it must be an existing directory that is, or lies beneath, " \
		   "one of workspaces.allowed in the daemon's config, and that you can search"

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
	int64_t calls = -1;
	if (budget) {
		const struct json *tc = json_get(budget, "toolCalls");
		if (budget->type != JSON_OBJECT || !json_get_int(tc, &calls) || calls < 0) {
			methods_invalid_params(p, "budget must be {\"toolCalls\": N} with N >= 0");
			return;
		}
	}

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

	struct session *session = NULL;
	int r = session_get(s->sessions, sid ? sid->u.str.s : NULL, c->cred.uid, ws, &session);
	if (r < 0) {
		ws_unref(ws);
		methods_invalid_params(p, "Session '%s' belongs to another user", sid->u.str.s);
		return;
	}
	client_session_peer(c, session);
	if (wsv && !str_eq(session->ws->root, ws->root)) {
		ws_unref(ws);
		session_unref(session);
		methods_invalid_params(p, "Session '%s' already works in '%s'", session->id, session->ws->root);
		return;
	}
	ws_unref(ws);
	if (calls >= 0) {
		session->has_budget = true;
		session->budget_left = calls;
	}
	session_unref(c->session);
	c->session = session;
	c->initialized = true;
	if (te_s)
		c->tool_errors_result = str_eq(te_s, "result");
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
	durable_write_capability(g);
	jgen_obj_close(g);
	jgen_key(g, "serverInfo");
	methods_write_server_info(g);
	jgen_kv_str(g, "sessionId", session->id);
	jgen_kv_str(g, "workspace", session->ws->root);
	jgen_obj_close(g);
	jgen_free(g);
	methods_answer(p, &b);
}

static void m_initialized(struct conn *c, const struct jrpc_req *req, struct pending *p)
{
	c->initialized = true;
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
		session = session_find(s->sessions, sid->u.str.s);
		if (!session || session->uid != c->cred.uid) {
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
