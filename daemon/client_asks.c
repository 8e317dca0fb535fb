/* SPDX-License-Identifier: MIT */
/*
 * Requests the daemon makes of an MCP client: roots/list, whose file://
 * roots within workspaces.allowed become the session's workspaces (the
 * first the primary), and elicitation/create, which puts a confirmation
 * request to the client's user next to the approvers. Everything the
 * client answers is hostile: bounded, checked, and an answer that comes
 * after the question was settled elsewhere changes nothing.
 */
#include "daemon/client_asks.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/client_session.h"
#include "daemon/conn.h"
#include "daemon/log.h"
#include "daemon/server_state.h"
#include "lib/dispatch/dispatch.h"
#include "lib/events.h"
#include "lib/session.h"
#include "lib/files/workspace.h"
#include "lib/files/workspace_root.h"
#include "proto/json.h"

/* Roots of one answer looked at; the rest are refused as too many. */
#define ROOTS_MAX 64
/* The longest root URI taken. */
#define ROOT_URI_MAX 4096
/* How long a client may take to list its roots. */
#define ROOTS_TIMEOUT_MS 30000

void asks_capabilities(struct conn *c, const struct json *caps)
{
	struct client_state *cl = client_state_of(c);
	cl->roots_cap = json_get(caps, "roots") && json_get(caps, "roots")->type == JSON_OBJECT;
	const struct json *el = json_get(caps, "elicitation");
	/* {} means form mode (as before modes existed); {url: {}} alone does not. */
	cl->elicit_cap = el && el->type == JSON_OBJECT &&
			(el->u.obj.n == 0 || json_get(el, "form"));
}

static int hex(char ch)
{
	if (ch >= '0' && ch <= '9')
		return ch - '0';
	if (ch >= 'a' && ch <= 'f')
		return ch - 'a' + 10;
	if (ch >= 'A' && ch <= 'F')
		return ch - 'A' + 10;
	return -1;
}

/* The absolute path a file:// URI names, percent-decoded, or NULL with
 * *why set. Only local files: no host but "localhost", no query. */
static char *file_uri_path(const char *uri, size_t len, const char **why)
{
	if (len < 8 || strncasecmp(uri, "file://", 7) != 0) {
		*why = "not a file:// URI";
		return NULL;
	}
	const char *p = uri + 7, *end = uri + len;
	if ((size_t)(end - p) >= 9 && strncasecmp(p, "localhost", 9) == 0)
		p += 9;
	if (p == end || *p != '/') {
		*why = "names a host other than this one";
		return NULL;
	}
	char *out = xmalloc((size_t)(end - p) + 1), *o = out;
	for (; p < end; p++) {
		if (*p == '?' || *p == '#') {
			free(out);
			*why = "has a query or fragment";
			return NULL;
		}
		if (*p != '%') {
			*o++ = *p;
			continue;
		}
		int hi = p + 2 < end ? hex(p[1]) : -1, lo = p + 2 < end ? hex(p[2]) : -1;
		if (hi < 0 || lo < 0 || (hi == 0 && lo == 0)) {
			free(out);
			*why = "has a bad percent escape";
			return NULL;
		}
		*o++ = (char)(hi * 16 + lo);
		p += 2;
	}
	*o = '\0';
	return out;
}

struct refused {
	const char *uri;
	size_t len;
	const char *why;
};

struct roots_event {
	const struct workspace *ws;
	const struct refused *refused;
	size_t n_refused;
	size_t n_listed;
};

/* Writes the members of session.roots: the workspaces in force (the
 * primary first) and the roots left out, with why. */
static void extra_roots(struct jgen *g, void *arg)
{
	const struct roots_event *ev = arg;
	jgen_kv_int(g, "listed", (int64_t)ev->n_listed);
	jgen_key(g, "workspaces");
	jgen_arr_open(g);
	const char *roots[WS_GROUP_MAX + 1];
	size_t n = ws_group_roots(ev->ws, roots, WS_GROUP_MAX + 1);
	for (size_t i = 0; i < n; i++)
		jgen_str(g, roots[i]);
	jgen_arr_close(g);
	jgen_key(g, "refused");
	jgen_arr_open(g);
	for (size_t i = 0; i < ev->n_refused; i++) {
		jgen_obj_open(g);
		jgen_key(g, "uri");
		jgen_strn(g, ev->refused[i].uri, ev->refused[i].len);
		jgen_kv_str(g, "reason", ev->refused[i].why);
		jgen_obj_close(g);
	}
	jgen_arr_close(g);
}

/* A client's text fit for a log line: at most 300 bytes, control
 * characters replaced, so that it cannot forge lines. */
static char *loggable(const char *s, size_t n)
{
	n = MIN(n, (size_t)300);
	char *out = xstrndup(s, n);
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)out[i] < 0x20 || out[i] == 0x7f)
			out[i] = '?';
	return out;
}

/* Judges one root: NULL (with *why) or its workspace, opened race-free as
 * initialize's is. */
static struct workspace *open_root(struct conn *c, const struct json *root, const char **why)
{
	const struct json *uri = json_get(root, "uri");
	if (!uri || uri->type != JSON_STRING) {
		*why = "no uri";
		return NULL;
	}
	if (uri->u.str.len > ROOT_URI_MAX) {
		*why = "uri longer than 4096 bytes";
		return NULL;
	}
	if (memchr(uri->u.str.s, '\0', uri->u.str.len)) {
		*why = "uri holds a NUL byte";
		return NULL;
	}
	_cleanup_free_ char *path = file_uri_path(uri->u.str.s, uri->u.str.len, why);
	if (!path)
		return NULL;
	struct workspace *ws = NULL;
	if (client_open_workspace(c, path, &ws) < 0) {
		*why = "not within workspaces.allowed (or not a directory you can search)";
		return NULL;
	}
	return ws;
}

/* Makes the allowed roots of the client's answer the session's workspaces. */
static void on_roots(void *arg, int r, const struct json *result, const struct json *error)
{
	struct conn *c = arg;
	c->client->roots_req = NULL;	/* set through it: the state is there */
	if (c->dead)
		return;
	const struct json *list = json_get(result, "roots");
	if (r < 0 || error || !list || list->type != JSON_ARRAY) {
		const char *msg = json_str(json_get(error, "message"));
		_cleanup_free_ char *why = loggable(r < 0 ? strerror(-r) : msg ? msg : "no roots array",
						    r < 0 ? strlen(strerror(-r)) : msg ? strlen(msg) : 14);
		log_info("roots/list of uid %u (pid %d) got no list of roots (%s): the session keeps its workspaces",
			 (unsigned)c->cred.uid, (int)c->cred.pid, why);
		return;
	}
	struct session *s = client_session(c);
	if (!s)
		return;
	struct workspace *ok[WS_GROUP_MAX];
	size_t n_ok = 0, n_refused = 0;
	size_t n = list->u.arr.n;
	_cleanup_free_ struct refused *refused = xcalloc(MIN(n, (size_t)ROOTS_MAX) + 1, sizeof(*refused));
	for (size_t i = 0; i < n && i < ROOTS_MAX; i++) {
		const struct json *root = list->u.arr.items[i];
		const struct json *uri = json_get(root, "uri");
		const char *why = NULL;
		struct workspace *ws = open_root(c, root, &why);
		for (size_t k = 0; ws && k < n_ok; k++)
			if (str_eq(ok[k]->root, ws->root))
				ws = ws_unref(ws);	/* named twice: once is enough */
		if (ws && n_ok == WS_GROUP_MAX) {
			ws = ws_unref(ws);
			why = "more roots than the 32 a session may have";
		}
		if (ws) {
			ok[n_ok++] = ws;
		} else if (why) {
			bool has_uri = uri && uri->type == JSON_STRING;
			size_t len = has_uri ? MIN(uri->u.str.len, (size_t)ROOT_URI_MAX) : 0;
			refused[n_refused++] = (struct refused){ has_uri ? uri->u.str.s : "", len, why };
			_cleanup_free_ char *shown = loggable(refused[n_refused - 1].uri, len);
			log_warning("root %s of uid %u (pid %d) left out: %s", shown, (unsigned)c->cred.uid,
				    (int)c->cred.pid, why);
		}
	}
	if (n > ROOTS_MAX) {
		refused[n_refused++] = (struct refused){ "", 0, "more than 64 roots listed: the rest were not looked at" };
		log_warning("uid %u (pid %d) listed %zu roots; only the first %d were looked at",
			    (unsigned)c->cred.uid, (int)c->cred.pid, n, ROOTS_MAX);
	}
	/* None allowed: the workspace initialize chose stays. */
	struct workspace *group = n_ok ? ws_group(ok[0], ok + 1, n_ok - 1) : NULL;
	session_set_workspace(s, group);
	ws_unref(group);
	for (size_t i = 0; i < n_ok; i++)
		ws_unref(ok[i]);
	log_info("session %s of uid %u works in %s%s (%zu roots listed, %zu allowed)", s->id,
		 (unsigned)c->cred.uid, s->ws->root, s->ws->n_others ? " and more" : "", n, n_ok);
	struct roots_event ev = { s->ws, refused, n_refused, n };
	event_emit(&server_of(c)->bus, "session.roots", s, NULL, NULL, extra_roots, &ev);
}

void asks_roots(struct conn *c)
{
	struct client_state *cl = client_state_of(c);
	if (!cl->roots_cap || c->dead)
		return;
	conn_request_forget(TAKE_PTR(cl->roots_req));
	struct outreq *o = NULL;
	int r = conn_request(c, "roots/list", NULL, 0, ROOTS_TIMEOUT_MS, on_roots, c, NULL, &o);
	if (r < 0) {
		log_debug("roots/list not sent: %s", strerror(-r));
		return;
	}
	cl->roots_req = o;
}

/* A confirmation put to a client's user: answered through the dispatcher
 * by its request id, so that it changes nothing once settled elsewhere. */
struct elicit {
	struct server *srv;
	uid_t uid;
	char *request_id;
};

static void elicit_free(void *arg)
{
	struct elicit *el = arg;
	free(el->request_id);
	free(el);
}

/* Takes the user's answer (or the lack of one) to a confirmation. */
static void on_elicit(void *arg, int r, const struct json *result, const struct json *error)
{
	struct elicit *el = arg;
	struct dispatcher *d = el->srv->dispatcher;
	const char *action = json_str(json_get(result, "action"));
	const char *decision = NULL;
	if (r == 0 && !error && action) {
		if (str_eq(action, "decline") || str_eq(action, "cancel"))
			decision = "deny";
		else if (str_eq(action, "accept"))
			decision = json_str(json_get(json_get(result, "content"), "decision"));
	}
	bool accepted;
	const char *in_force;
	if (!decision || dispatch_resolve(d, el->uid, el->request_id, decision, &accepted, &in_force) == -EINVAL) {
		log_debug("confirmation %s: the client gave no usable answer (%s)", el->request_id,
			  r < 0 ? strerror(-r) : error ? "an error" : "no decision");
		dispatch_elicit_failed(d, el->request_id);
	}
}

/* The text the user reads: the tool, its side effect, the input in full,
 * the files and the change. */
static void write_message(struct buf *b, const struct confirm_question *q)
{
	if (q->question)
		buf_printf(b, "%s\n\nInput: ", q->question);
	else
		buf_printf(b, "Allow the tool '%s' (side effect: %s) to run?\n\nInput: ", q->tool, q->side_effect);
	buf_append(b, q->input, q->input_len);
	if (q->n_files) {
		buf_puts(b, "\n\nFiles:");
		for (size_t i = 0; i < q->n_files; i++) {
			buf_puts(b, "\n  ");
			buf_puts(b, q->files[i]);
		}
	}
	if (q->diff) {
		buf_puts(b, "\n\nChange:\n");
		buf_puts(b, q->diff);
	}
}

bool asks_confirm(void *ctx, const struct confirm_question *q)
{
	struct pending *p = ctx;
	struct conn *c = p->conn;
	if (!client_state_of(c)->elicit_cap || c->dead || c->read_closed)
		return false;
	if (!q)
		return c->outreqs.n < CONN_OUTREQS_MAX;
	_cleanup_(buf_free) struct buf msg = {0}, b = {0};
	write_message(&msg, q);
	struct jgen *g = jgen_new(&b);
	jgen_obj_open(g);
	jgen_key(g, "message");
	jgen_strn(g, buf_head(&msg), buf_size(&msg));
	jgen_key(g, "requestedSchema");
	jgen_obj_open(g);
	jgen_kv_str(g, "type", "object");
	jgen_key(g, "properties");
	jgen_obj_open(g);
	jgen_key(g, "decision");
	jgen_obj_open(g);
	jgen_kv_str(g, "type", "string");
	jgen_kv_str(g, "title", "Decision");
	jgen_kv_str(g, "description", "allow: run it once; deny: do not run it; always_allow: run it, and this "
				      "tool without asking for the rest of the session");
	jgen_key(g, "enum");
	jgen_arr_open(g);
	jgen_str(g, "allow");
	jgen_str(g, "deny");
	jgen_str(g, "always_allow");
	jgen_arr_close(g);
	jgen_obj_close(g);
	jgen_obj_close(g);
	jgen_key(g, "required");
	jgen_arr_open(g);
	jgen_str(g, "decision");
	jgen_arr_close(g);
	jgen_obj_close(g);
	jgen_key(g, "_meta");
	jgen_obj_open(g);
	jgen_kv_str(g, "toolcalld/requestId", q->request_id);
	jgen_obj_close(g);
	jgen_obj_close(g);
	jgen_free(g);
	struct elicit *el = xcalloc(1, sizeof(*el));
	el->srv = server_of(c);
	el->uid = c->cred.uid;
	el->request_id = xstrdup(q->request_id);
	int r = conn_request(c, "elicitation/create", buf_head(&b), buf_size(&b), q->timeout_ms, on_elicit, el,
			     elicit_free, NULL);
	if (r < 0) {
		elicit_free(el);
		return false;
	}
	return true;
}

void asks_withdraw(void *ctx, const char *request_id)
{
	struct pending *p = ctx;
	struct conn *c = p->conn;
	if (c->dead)
		return;
	for (struct list *pos = c->outreqs.list.next; pos != &c->outreqs.list; pos = pos->next) {
		struct outreq *o = list_entry(pos, struct outreq, node);
		if (o->fn != on_elicit || !str_eq(((struct elicit *)o->arg)->request_id, request_id))
			continue;
		char params[128];
		int n = snprintf(params, sizeof(params), "{\"requestId\":\"tc-%llu\",\"reason\":\"The confirmation was "
				 "settled elsewhere\"}", (unsigned long long)o->n);
		conn_notify(c, "notifications/cancelled", params, (size_t)n);
		conn_request_forget(o);
		return;
	}
}
