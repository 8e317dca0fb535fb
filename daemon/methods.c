/* SPDX-License-Identifier: MIT */
/*
 * The JSON-RPC methods the daemon answers, one function each, listed in one
 * table. Parameters are checked here; the work is the dispatcher's. A
 * request that needs MCP providers still starting is parked here until
 * they settle. When a connection closes, its calls are detached here.
 *
 * Here live the hot methods (tools/list, tools/call, ping) and those parked
 * for providers; the others live by subject beside them, each file
 * exporting its entries (methods_session.c, methods_events.c,
 * methods_admin.c, methods_tasks.c; methods_llm.c the handler of
 * tools/dispatch, assistant messages in the formats of LLM providers).
 * The one table lists every file's entries; methods_init() sorts it by
 * name once, and each request finds its method by binary search.
 */
#include "daemon/methods.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "daemon/answer.h"
#include "daemon/client_asks.h"
#include "daemon/client_session.h"
#include "daemon/conn.h"
#include "daemon/methods_internal.h"
#include "daemon/methods_tasks.h"
#include "daemon/log.h"
#include "daemon/methods_llm.h"
#include "daemon/metrics.h"
#include "daemon/providers.h"
#include "daemon/server_state.h"
#include "lib/dispatch/dispatch.h"
#include "lib/events.h"
#include "lib/base/loop.h"
#include "lib/base/map.h"
#include "lib/registry.h"
#include "lib/sandbox/sandbox.h"
#include "lib/session.h"
#include "lib/files/workspace.h"
#include "lib/files/workspace_root.h"
#include "proto/json.h"
#include "proto/llm.h"
#include "version.h"

#define LIST_PAGE 200

/* What server/discover lists is what initialize echoes: one list. */
const char *const methods_versions[] = {
	"2026-07-28", METHODS_LATEST_VERSION, "2025-06-18", "2025-03-26", "2024-11-05",
};
const size_t methods_n_versions = ELEMENTSOF(methods_versions);

void methods_invalid_params(struct pending *p, const char *fmt, ...)
{
	if (!p)
		return;
	va_list ap;
	va_start(ap, fmt);
	char *msg = xvasprintf(fmt, ap);
	va_end(ap);
	answer_invalid_params(p, msg);
	free(msg);
}

void methods_answer(struct pending *p, struct buf *b)
{
	if (p)
		conn_result(p, buf_head(b), buf_size(b));
	buf_free(b);
}

void methods_write_server_info(struct jgen *g)
{
	jgen_obj_open(g);
	jgen_kv_str(g, "name", "toolcalld");
	jgen_kv_str(g, "version", TOOLCALLD_VERSION);
	jgen_obj_close(g);
}

static void m_ping(struct conn *c, const struct jrpc_req *req, struct pending *p)
{
	conn_result(p, "{}", 2);
}

static void m_discover(struct conn *c, const struct jrpc_req *req, struct pending *p)
{
	struct buf b = {0};
	struct jgen *g = jgen_new(&b);
	jgen_obj_open(g);
	jgen_kv_str(g, "resultType", "complete");
	jgen_key(g, "supportedVersions");
	jgen_arr_open(g);
	for (size_t i = 0; i < methods_n_versions; i++)
		jgen_str(g, methods_versions[i]);
	jgen_arr_close(g);
	jgen_key(g, "capabilities");
	jgen_obj_open(g);
	jgen_key(g, "tools");
	jgen_obj_open(g);
	jgen_kv_bool(g, "listChanged", true);
	jgen_obj_close(g);
	jgen_obj_close(g);
	jgen_key(g, "_meta");
	jgen_obj_open(g);
	jgen_key(g, "serverInfo");
	methods_write_server_info(g);
	jgen_key(g, "io.modelcontextprotocol/serverInfo");
	methods_write_server_info(g);
	jgen_obj_close(g);
	jgen_obj_close(g);
	jgen_free(g);
	methods_answer(p, &b);
}

/* --- requests waiting for MCP providers -------------------------------- */

/* A request parked until the MCP providers being started have settled. */
struct deferral {
	struct list node;		/* server->deferred */
	struct pending *p;
	struct json_doc *doc;
	const struct json *msg;
	uint64_t accepted_ms;		/* when it was parked (tc_now), for durationMs */
};

/* Frees a deferral with the request it belongs to. */
static void deferral_free(void *arg)
{
	struct deferral *d = arg;
	list_remove(&d->node);
	json_doc_unref(d->doc);
	free(d);
}

/* The deferral being handled again by methods_resume(), NULL otherwise. */
static const struct deferral *resuming;

/* The deferral of a request handled again once providers settled, or NULL. */
static const struct deferral *resumed(const struct pending *p)
{
	return resuming && resuming->p == p ? resuming : NULL;
}

/* Parks a request until the providers being started have settled. */
static void defer(struct conn *c, const struct jrpc_req *req, struct pending *p)
{
	struct deferral *d = xcalloc(1, sizeof(*d));
	d->p = p;
	d->accepted_ms = tc_now(server_of(c)->loop);
	d->doc = json_doc_ref(req->doc);
	d->msg = req->msg;
	list_insert_tail(&server_of(c)->deferred, &d->node);
	p->upper = d;
	p->upper_free = deferral_free;
}

void methods_defer(struct conn *c, const struct jrpc_req *req, struct pending *p)
{
	defer(c, req, p);
}

bool methods_resumed(const struct pending *p)
{
	return resumed(p) != NULL;
}

/*
 * Handles the parked requests again. Each deferral leaves its request
 * first and is freed here after: handled again, the request's upper state
 * is the handler's to set (a task's start, a dispatch group). A request
 * handled again may settle providers: the loop running goes on with the
 * list, no second one starts.
 */
void methods_resume(struct server *s)
{
	if (resuming || providers_starting(&s->providers))
		return;
	while (!list_empty(&s->deferred)) {
		struct deferral *d = list_first(&s->deferred, struct deferral, node);
		list_remove(&d->node);
		struct pending *p = d->p;
		p->upper = NULL;
		p->upper_free = NULL;
		struct jrpc_req req;
		const char *why;
		jrpc_parse_request(d->msg, json_doc_text(d->doc), &req, &why);
		req.doc = d->doc;
		resuming = d;
		methods_handle(p->conn, &req, p);	/* may free p */
		resuming = NULL;
		deferral_free(d);
	}
}

/* --- tools ------------------------------------------------------------- */

/* Whom the connection's calls act as, or NULL when unknown. */
static const struct identity *caller(struct conn *c)
{
	struct session *ss = client_session(c);
	return ss ? session_identity(ss) : NULL;
}

static void write_tool(struct jgen *g, const struct tool *t, const struct sandbox_config *sb)
{
	jgen_obj_open(g);
	jgen_kv_str(g, "name", t->name);
	jgen_kv_str(g, "description", t->description);
	jgen_kv_raw(g, "inputSchema", t->input_schema, strlen(t->input_schema));
	jgen_key(g, "annotations");
	jgen_obj_open(g);
	jgen_kv_bool(g, "readOnlyHint", t->read_only_hint ? t->read_only_hint == TOOL_HINT_TRUE
							  : t->side_effects <= SIDE_READ);
	jgen_kv_bool(g, "destructiveHint", t->destructive_hint ? t->destructive_hint == TOOL_HINT_TRUE
								 : t->side_effects >= SIDE_WRITE);
	jgen_kv_bool(g, "idempotentHint", t->idempotent);
	jgen_kv_bool(g, "openWorldHint", t->side_effects >= SIDE_EXECUTE);
	jgen_obj_close(g);
	jgen_key(g, "_meta");
	jgen_obj_open(g);
	jgen_kv_str(g, "toolcalld/sideEffects", side_effect_name(t->side_effects));
	jgen_kv_int(g, "toolcalld/timeoutMs", t->timeout_ms);
	jgen_kv_bool(g, "toolcalld/idempotent", t->idempotent);
	if (t->def->runs_children) {
		/* The profile its children run under; "off": unconfined. */
		struct sandbox_req req;
		sandbox_req_init(&req, sb, t->name, t->side_effects == SIDE_NETWORK, t->sandbox);
		jgen_kv_str(g, "toolcalld/sandbox", sandbox_profile_name(req.profile));
		if (req.net_proxy && req.profile != SANDBOX_OFF)
			jgen_kv_str(g, "toolcalld/network", "proxy");
		else
			jgen_kv_bool(g, "toolcalld/network", req.network || req.profile == SANDBOX_OFF);
	}
	jgen_obj_close(g);
	methods_tasks_write_tool_execution(g);
	jgen_obj_close(g);
}

static void m_tools_list(struct conn *c, const struct jrpc_req *req, struct pending *p)
{
	struct server *s = server_of(c);
	/* MCP servers start when their tools are first asked for. */
	if (!resumed(p) && providers_start_all(&s->providers, caller(c))) {
		defer(c, req, p);
		return;
	}
	enum llm_format format = LLM_MCP;
	const struct json *fv = json_get(req->params, "format");
	if (fv && fv->type != JSON_NULL && llm_format_from_name(json_str(fv), &format) < 0) {
		methods_invalid_params(p, "format must be \"mcp\", \"openai\" or \"anthropic\"");
		return;
	}
	struct session *session = client_session(c);
	size_t start = 0;
	const struct json *cursor = json_get(req->params, "cursor");
	if (cursor && cursor->type != JSON_NULL) {
		const char *cs = json_str(cursor);
		char *end = NULL;
		unsigned long v = cs ? strtoul(cs, &end, 10) : 0;
		if (!cs || !*cs || *end || v > s->registry->n) {
			methods_invalid_params(p, "cursor is not one this server gave");
			return;
		}
		start = v;
	}
	struct buf b = {0};
	struct jgen *g = jgen_new(&b);
	jgen_obj_open(g);
	jgen_key(g, "tools");
	jgen_arr_open(g);
	size_t i, listed = 0;
	struct dispatcher *d = s->dispatcher;
	for (i = start; i < s->registry->n && listed < LIST_PAGE; i++) {
		const struct tool *t = s->registry->tools[i];
		if (!dispatch_tool_visible(d, session, t))
			continue;
		if (format == LLM_MCP)
			write_tool(g, t, &s->cfg.sandbox);
		else
			llm_write_tool(g, format, t->name, t->description, t->input_schema);
		listed++;
	}
	jgen_arr_close(g);
	if (i < s->registry->n) {
		char next[32];
		snprintf(next, sizeof(next), "%zu", i);
		jgen_kv_str(g, "nextCursor", next);
	}
	jgen_obj_close(g);
	jgen_free(g);
	methods_answer(p, &b);
}

static void call_complete(void *ctx, const struct outcome *o, bool replayed)
{
	answer_outcome(ctx, o, replayed);
}

static void call_progress(void *ctx, const char *token, size_t token_len, uint64_t progress,
			  const char *stream, const char *data, size_t n)
{
	struct pending *p = ctx;
	if (!answer_progress(p->conn, NULL, token, token_len, progress, stream, data, n))
		server_of(p->conn)->progress_dropped++;
}

static const struct caller_ops call_ops = {
	.complete = call_complete,
	.progress = call_progress,
	.ask = asks_confirm,
	.withdraw = asks_withdraw,
};

static void m_tools_call(struct conn *c, const struct jrpc_req *req, struct pending *p)
{
	const struct json *params = req->params;
	const struct json *name = json_get(params, "name");
	if (!params || params->type != JSON_OBJECT) {
		answer_invalid_call(p, NULL, "params must be an object with name and arguments");
		return;
	}
	if (!name || name->type != JSON_STRING || strlen(name->u.str.s) != name->u.str.len) {
		answer_invalid_call(p, NULL, "name must be a string");
		return;
	}
	struct server *s = server_of(c);
	const struct deferral *d = resumed(p);
	/* Failures the connection layer answers itself (a batch answer too
	 * large to keep) take the form this client asked for too. */
	if (c->client->tool_errors_result)
		p->write_error_result = answer_write_error_result;
	/* A tool of an MCP server not imported yet: start it, wait. */
	if (!d && !registry_find(s->registry, name->u.str.s) &&
	    providers_start_for(&s->providers, name->u.str.s, caller(c))) {
		defer(c, req, p);
		return;
	}
	const char *down = registry_find(s->registry, name->u.str.s) ? NULL
			   : providers_down_for(&s->providers, name->u.str.s, caller(c));
	if (down) {
		/* Maybe a tool of a provider that failed to start: transient,
		 * unless its program was refused. */
		bool refused = providers_refused_for(&s->providers, name->u.str.s, caller(c));
		struct outcome *o = outcome_error(refused ? TC_PERMISSION_DENIED : TC_TRANSIENT, "%s", down);
		o->call_id = dispatch_new_call_id(s->dispatcher);
		o->tool = xstrdup(name->u.str.s);
		answer_outcome(p, o, false);
		outcome_unref(o);
		return;
	}
	struct call_params cp = {
		.tool = name->u.str.s,
		.arguments = json_get(params, "arguments"),
		.doc = NULL,
		.timeout_ms = -1,
		.budget = -1,
		.pid = c->cred.pid,
		.accepted_ms = d ? d->accepted_ms : 0,
	};
	const struct json *meta = json_get(params, "_meta");
	if (meta && meta->type != JSON_OBJECT && meta->type != JSON_NULL) {
		answer_invalid_call(p, cp.tool, "_meta must be an object");
		return;
	}
	const struct json *v;
	if ((v = json_get(meta, "idempotencyKey"))) {
		if (v->type != JSON_STRING || v->u.str.len == 0 || v->u.str.len > 256 ||
		    strlen(v->u.str.s) != v->u.str.len) {
			answer_invalid_call(p, cp.tool, "_meta.idempotencyKey must be a non-empty string of at most 256 bytes");
			return;
		}
		cp.idempotency_key = v->u.str.s;
	}
	if ((v = json_get(meta, "timeoutMs"))) {
		if (!json_get_int(v, &cp.timeout_ms) || cp.timeout_ms <= 0 || cp.timeout_ms > 86400000) {
			answer_invalid_call(p, cp.tool, "_meta.timeoutMs must be an integer from 1 to 86400000");
			return;
		}
	}
	if ((v = json_get(meta, "budget"))) {
		if (!json_get_int(v, &cp.budget) || cp.budget < 0) {
			answer_invalid_call(p, cp.tool, "_meta.budget must be an integer >= 0");
			return;
		}
	}
	if ((v = json_get(meta, "progressToken"))) {
		if (v->type != JSON_STRING && !(v->type == JSON_NUMBER && json_is_int(v))) {
			answer_invalid_call(p, cp.tool, "_meta.progressToken must be a string or an integer");
			return;
		}
		cp.progress_token = req->src + v->off;
		cp.progress_token_len = v->len;
	}
	const struct json *args = cp.arguments;
	if (args && args->type != JSON_OBJECT && args->type != JSON_STRING && args->type != JSON_NULL) {
		answer_invalid_call(p, cp.tool, "arguments must be an object (or a string holding JSON text)");
		return;
	}
	/* The dispatcher keeps a reference on the message's document for as
	 * long as it needs the arguments. */
	cp.doc = req->doc;
	if ((v = json_get(params, "task")) && v->type != JSON_NULL) {
		int64_t ttl;
		if (methods_tasks_params(p, cp.tool, v, &ttl))
			methods_tasks_call(c, p, &cp, ttl);
		return;
	}
	struct session *session = client_session(c);
	conn_work_begin(c);
	struct caller *caller = dispatch_call(s->dispatcher, session, &cp, &call_ops, p);
	conn_work_end(c);
	/* p is gone when the call was answered inside. */
	if (caller)
		p->caller = caller;
}

/* --- cancellation ------------------------------------------------------ */

static void m_cancelled(struct conn *c, const struct jrpc_req *req, struct pending *p)
{
	const struct json *rid = json_get(req->params, "requestId");
	if (rid && (rid->type == JSON_STRING || rid->type == JSON_NUMBER)) {
		char *key = xstrndup(req->src + rid->off, rid->len);
		struct pending *target = conn_pending_by_id(c, key);
		free(key);
		if (target && methods_llm_cancel(target)) {
			/* tools/dispatch: its calls are cancelled, no response. */
		} else if (target && target->caller) {
			/* As MCP says: the cancelled call gets no response. */
			struct caller *caller = TAKE_PTR(target->caller);
			conn_drop(target);
			dispatch_cancel(caller, false);
		}
	}
	if (p)
		conn_result(p, "{}", 2);
}

/* --- the table --------------------------------------------------------- */

/* A call nobody will hear the outcome of is not run: tools/call and
 * tools/dispatch answer requests only. */
static const struct method core_methods[] = {
	{ .name = "ping", .exec = m_ping, .flags = METHOD_REQUEST_ONLY },
	{ .name = "server/discover", .exec = m_discover, .flags = METHOD_REQUEST_ONLY },
	{ .name = "tools/list", .exec = m_tools_list, .flags = METHOD_REQUEST_ONLY },
	{ .name = "tools/call", .exec = m_tools_call, .flags = METHOD_REQUEST_ONLY },
	{ .name = "tools/dispatch", .exec = m_tools_dispatch, .flags = METHOD_REQUEST_ONLY },
	{ .name = "notifications/cancelled", .exec = m_cancelled },
	{ .name = NULL },
};

/* Every method file's entries. */
static const struct method *const method_files[] = {
	core_methods, session_methods, event_methods, admin_methods, task_methods, process_methods,
};

#define METHODS_MAX 64

/* The one table: every method, sorted by name (methods_init). */
static struct method_slot {
	const char *name;
	size_t len;
	const struct method *m;
} table[METHODS_MAX];
static size_t table_n;

/* Orders names as bytes, a shorter prefix first. */
static int name_cmp(const char *a, size_t alen, const char *b, size_t blen)
{
	int r = memcmp(a, b, MIN(alen, blen));
	return r ? r : (alen > blen) - (alen < blen);
}

static int slot_cmp(const void *x, const void *y)
{
	const struct method_slot *a = x, *b = y;
	return name_cmp(a->name, a->len, b->name, b->len);
}

/* The key of a lookup: a request's method name, not NUL-terminated. */
struct method_key {
	const char *name;
	size_t len;
};

static int key_cmp(const void *k, const void *x)
{
	const struct method_key *key = k;
	const struct method_slot *slot = x;
	return name_cmp(key->name, key->len, slot->name, slot->len);
}

/* Sorts every file's entries into the table, once; a name listed twice
 * is a mistake of the program's. */
static void table_build(void)
{
	if (table_n)
		return;
	for (size_t f = 0; f < ELEMENTSOF(method_files); f++)
		for (const struct method *m = method_files[f]; m->name; m++) {
			if (table_n == METHODS_MAX)
				abort();	/* a fixed set: raise METHODS_MAX */
			table[table_n++] = (struct method_slot){ m->name, strlen(m->name), m };
		}
	qsort(table, table_n, sizeof(table[0]), slot_cmp);
	for (size_t i = 1; i < table_n; i++)
		if (slot_cmp(&table[i - 1], &table[i]) == 0)
			abort();	/* one name, two methods */
}

void methods_handle(struct conn *c, const struct jrpc_req *req, struct pending *p)
{
	client_state_of(c);
	const struct method_key key = { req->method, req->method_len };
	const struct method_slot *slot = bsearch(&key, table, table_n, sizeof(table[0]), key_cmp);
	if (slot) {
		if (p || !(slot->m->flags & METHOD_REQUEST_ONLY))
			slot->m->exec(c, req, p);
		return;
	}
	if (p) {
		char *msg = xasprintf("Method not found: '%.200s'", req->method);
		conn_error(p, JRPC_METHOD_NOT_FOUND, msg, "{\"kind\":\"not_found\"}");
		free(msg);
	}
}

void methods_broadcast_list_changed(struct server *s)
{
	static const char line[] = "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/tools/list_changed\"}";
	struct list *pos, *tmp;
	list_foreach_safe(pos, tmp, &s->conns.all) {
		struct conn *c = list_entry(pos, struct conn, node);
		if (c->client && c->client->initialized)
			conn_send(c, line, sizeof(line) - 1);
	}
}

/* --- a connection closing ---------------------------------------------- */

/* Lets go of what a closing connection's requests hold: its subscription
 * first (so that nothing is delivered to it any more), then its calls,
 * detached with the dispatcher held, so that none of them starts in a slot
 * another one freed (keyed executions run on, the others are cancelled). */
static void conn_closing(void *arg, struct conn *c)
{
	struct server *s = arg;
	struct client_state *cl = c->client;
	if (cl) {
		cl->was_subscribed = cl->sub != NULL;
		event_unsubscribe(TAKE_PTR(cl->sub));
		c->listening = false;
	}
	dispatch_hold(s->dispatcher);
	while (!list_empty(&c->pendings)) {
		struct pending *p = list_first(&c->pendings, struct pending, node);
		if (p->caller)
			dispatch_detach(TAKE_PTR(p->caller));
		conn_drop(p);
	}
	dispatch_release(s->dispatcher);
}

/* Once its requests and the daemon's own have ended: an approver gone may
 * leave confirmations nobody can answer; the session is let go. */
static void conn_closed(void *arg, struct conn *c)
{
	struct server *s = arg;
	struct client_state *cl = c->client;
	if (!cl)
		return;
	if (cl->was_subscribed)
		dispatch_approvers_left(s->dispatcher);
	if (cl->initialized)
		client_session_keep(s, cl->session);
	client_state_free(c);
}

static const struct conn_hook close_hook = {
	.closing = conn_closing,
	.closed = conn_closed,
};

void methods_init(struct server *s, const struct methods_ops *ops)
{
	s->methods_ops = ops;
	table_build();
	conns_add_hook(&s->conns, &close_hook, s);
}
