/* SPDX-License-Identifier: MIT */
/*
 * toolcallctl mcp: a stdio MCP server for hosts (Claude Code, Cursor, VS
 * Code, Codex ...) that can only start a program and talk to its stdin and
 * stdout. It relays both ways between stdio and the daemon's socket, one
 * message (line) at a time, with one change: the host's `initialize` gets
 * what a host cannot send itself: `toolErrors: "result"` (failed calls come
 * back as isError results the model sees) and, with -w, the `workspace`.
 * Members the host did send are never overridden.
 * This file is long because the relay and the reconnection below share
 * one state (what the host said, what is in flight, what is queued while
 * the daemon is away) that a split would have to pass around whole.
 *
 * When the daemon cannot be reached at start, the host still gets an
 * answer to its first request, an error naming the socket tried and how to
 * start the daemon, and the bridge exits 3.
 *
 * The bridge outlives the daemon: when its connection drops (a restart, an
 * upgrade, a crash), the host sees no disconnect. The bridge connects again
 * with backoff for up to --reconnect-s seconds and tells the new connection
 * what the host told the old one: its initialize (with the session id the
 * daemon gave, so the session goes on; when the daemon did not have the
 * session, or has it with more calls left than the answers to the host's
 * calls say are left, a second initialize gives it that budget),
 * notifications/initialized, its
 * last roots answer, its events/subscribe; then the host gets
 * notifications/tools/list_changed (the tools may have changed). Requests
 * that are safe to send twice (ping, tools/list, tasks/get, tasks/result ...)
 * are sent again; a call in flight is answered `transient` (its outcome is
 * unknown: it may have run), as the host's toolErrors asks: an isError
 * result or an error envelope; a batch the daemon had not answered gets
 * one array of such answers. A call with an idempotency key is sent
 * again instead when the new connection's daemon had the session (the
 * same daemon, or a shared store): it knows the key, so it joins the run,
 * replays its outcome or says it is unknown; a daemon that did not have
 * the session does not know the key either, and the call is answered
 * `transient` as a plain one (sent again, it would run twice). A task's
 * call is not lost: its tasks/result is sent again and the task resumes
 * from the daemon's store; when the new daemon does not know the task (a
 * restart without a shared store), its answer is replaced by `transient`
 * with data.restart, for a retry.
 *
 * A daemon that stops gracefully answers the calls it stops `cancelled`
 * with data.restart: the bridge tells the host of those as of a call a
 * restart took, `transient` with data.restart (the host retries; the
 * daemon's callId, attempts and durationMs kept), but for keyed calls,
 * which it sends again itself; from a call's such answer on, the
 * host's requests wait for the next daemon (its answers to the daemon's
 * questions still go to the one stopping). One line on
 * stderr says each disconnect, each reconnect and, when the daemon does not
 * come back in time, that the bridge gives up; every request still waiting
 * is then answered with an error saying so, and the bridge exits 3.
 *
 * Both directions are buffered without blocking and bounded: while one
 * side does not read, the bridge stops reading the other.
 */
#include "daemon/ctl/mcp.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "daemon/ctl/client.h"
#include "proto/base/buf.h"
#include "proto/base/util.h"
#include "proto/json.h"

/* Bytes held for one direction before reading the other side pauses. */
#define RELAY_CAP (16u << 20)
/* Longest line read from the host: beyond it the daemon would refuse the
 * message anyway; the bridge passes the excess through unparsed. */
#define PARSE_MAX (8u << 20)
/* Longest line of the daemon the bridge reads (to follow its answers). */
#define PARSE_MAX_DOWN (64u << 20)
/* How long the bridge tries to reach a daemon that went away, by default,
 * and at most. */
#define RECONNECT_S_DEFAULT 60
#define RECONNECT_S_MAX 86400
/* Backoff between attempts: doubling from the first to the last. */
#define BACKOFF_FIRST_MS 100
#define BACKOFF_MAX_MS 2000
/* Requests of the host followed at once; beyond, they are relayed
 * untracked (a restart then leaves them unanswered). */
#define MAX_PENDING 4096
/* Longest request kept to send again, roots answer or subscribe kept. */
#define MAX_KEPT (1u << 20)
/* roots/list requests of the daemon followed at once (it sends at most 16). */
#define MAX_ROOTS_ASKED 16
/* The ids of the bridge's own requests: strings with this prefix. */
#define OWN_ID "toolcallctl-"

#define MSG_RESTARTED "toolcalld restarted while this call was in flight, so its outcome is unknown; retry the call"
#define MSG_STOPPED "toolcalld restarted (it was stopped) before this call finished, so the call was stopped; retry it"
/* What the daemon appends to the message of a call stopped with output
 * (lib/dispatch: the output it had produced, kept for the host). */
#define OUTPUT_MARK ". Output before it was stopped:\n"
#define MSG_TASK_LOST "toolcalld restarted and the new daemon does not have this task (tasks outlive a restart " \
		      "only with a shared store), so its outcome is unknown; retry the call"

/* Methods the bridge sends again to a new daemon when their answer was
 * lost: they read, or they are the host's own setup. */
static const char *const again_methods[] = {
	"initialize", "ping", "server/discover", "tools/list", "tasks/get", "tasks/result",
	"tasks/list", "events/subscribe", "admin/stats", "admin/metrics",
};

enum pend_kind {
	PEND_CALL,	/* tools/call: answered transient, as toolErrors asks */
	PEND_KEYED,	/* tools/call with an idempotency key: sent again */
	PEND_AGAIN,	/* sent again to the new daemon */
	PEND_FAIL,	/* answered with a transient error envelope */
};

/* A host request the daemon has not answered yet. */
struct pend {
	char *id;		/* the id's canonical JSON text */
	char *tool;		/* PEND_CALL, PEND_KEYED: the tool called */
	char *line;		/* PEND_AGAIN, PEND_KEYED: the request as sent */
	enum pend_kind kind;
	bool resend;		/* sent to a daemon that went away (or stopped it) */
	bool resent;		/* goes to a new connection (sent again, or not sent before the loss) */
	char task_q;		/* 'r': tasks/result, 'g': tasks/get, else 0 */
	unsigned batch;		/* a member of the host's batch of this number, or 0 */
};

struct relay {
	int in_fd, out_fd, sock;
	const char *socket;
	const char *workspace;		/* absolute, or NULL */
	int reconnect_s;		/* 0: end with the connection */
	struct buf up;			/* host -> daemon, complete lines */
	bool up_mid;			/* the head line of up was partly sent */
	struct buf own;			/* the bridge's own messages to the daemon */
	struct buf line;		/* host's current line, not yet complete */
	bool line_passthru;		/* line too long to parse: relayed as it comes */
	bool line_skip;			/* the rest of a long line half sent to a daemon gone */
	struct buf from;		/* daemon's bytes, the last line incomplete */
	bool from_passthru;		/* inside a daemon line too long to read */
	struct buf down;		/* daemon -> host, complete lines */
	bool in_eof, up_shut;

	/* What a new connection is told for the host's session to go on. */
	char *init_id;			/* the host's initialize, until answered */
	char *init_params;		/* its params as sent (toolErrors, workspace added) */
	char *session_id;		/* the session the daemon gave */
	bool tool_errors_result;	/* failed calls are isError results */
	bool initialized;		/* the host sent notifications/initialized */
	char *subscribe_id;		/* the host's events/subscribe, until answered */
	char *subscribe_params;		/* its params */
	bool subscribed;		/* the daemon took it */
	char *roots;			/* the host's last answer to roots/list (result text) */
	char *roots_asked[MAX_ROOTS_ASKED];	/* ids of the daemon's roots/list waiting */
	size_t n_roots_asked;
	bool answer_roots;		/* the new connection's roots/list is answered with roots */

	struct pend *pends;
	size_t n_pends;
	unsigned batch_seq;		/* the last batch's number */
	unsigned own_seq;
	/* Reconnecting: the backoff and the deadline hold until the new
	 * connection has answered something (a daemon that takes the
	 * connection and closes it at once is not a daemon back). */
	uint64_t give_up_at, next_try, backoff;
	uint64_t connected_at;
	bool heard;
	char *own_init;			/* id of the initialize sent again, until answered */
	/* The daemon said it stops (a call answered with data.restart): the
	 * host's next requests wait for the next daemon (its answers and
	 * notifications still go: a call may wait for an answer to finish
	 * within the grace period). */
	bool stopping;
	struct buf held;		/* the host's requests meanwhile */
	/* The host's budget (initialize budget.toolCalls; -1: none) and the
	 * attempts its calls' answers said they spent: a daemon that lost
	 * the session (a restart without a shared store) or knows it from a
	 * record older than the last calls (a crash) is told what is left. */
	int64_t budget;
	int64_t spent;
	bool budget_told;		/* own_init is the initialize that tells it */
	/* The new connection's daemon had the session (the same daemon, or
	 * one that took it back from a shared store): it knows the keys of
	 * the calls in flight, so keyed calls are sent again. */
	bool session_back;
};

static char *canonical(const struct json *v)
{
	struct buf b = {0};
	json_canonical(v, &b);
	return buf_steal(&b);
}

/* --- the host's requests ------------------------------------------------ */

static struct pend *pend_find(struct relay *r, const char *id)
{
	for (size_t i = 0; i < r->n_pends; i++)
		if (str_eq(r->pends[i].id, id))
			return &r->pends[i];
	return NULL;
}

static void pend_remove(struct relay *r, struct pend *p)
{
	free(p->id);
	free(p->tool);
	free(p->line);
	*p = r->pends[--r->n_pends];
}

static void pend_add(struct relay *r, const struct json *msg, const char *method, const char *text, size_t n)
{
	if (r->n_pends >= MAX_PENDING)
		return;
	_cleanup_free_ char *id = canonical(json_get(msg, "id"));
	struct pend *old = pend_find(r, id);
	if (old)
		pend_remove(r, old);	/* an id reused: the newest is followed */
	struct pend p = { .kind = PEND_FAIL };
	const struct json *params = json_get(msg, "params");
	if (str_eq(method, "tools/call") && !json_get(params, "task")) {
		p.kind = PEND_CALL;
		const char *tool = json_str(json_get(params, "name"));
		p.tool = tool ? xstrdup(tool) : NULL;
		/* With a key, sending it again to a daemon that knows the key
		 * never runs it twice: it joins the run or replays its
		 * outcome (replay_rest()). */
		if (json_str(json_get(json_get(params, "_meta"), "idempotencyKey")) && n <= MAX_KEPT) {
			p.kind = PEND_KEYED;
			p.line = xstrndup(text, n);
		}
	}
	for (size_t i = 0; i < ELEMENTSOF(again_methods); i++) {
		if (str_eq(method, again_methods[i]) && n <= MAX_KEPT) {
			p.kind = PEND_AGAIN;
			p.line = xstrndup(text, n);
		}
	}
	p.task_q = str_eq(method, "tasks/result") ? 'r' : str_eq(method, "tasks/get") ? 'g' : 0;
	p.id = TAKE_PTR(id);
	r->pends = xreallocarray(r->pends, r->n_pends + 1, sizeof(*r->pends));
	r->pends[r->n_pends++] = p;
}

/* Follows a request in the host's batch: answered, with the batch's other
 * requests, in one array of transient failures when the daemon goes away
 * before it answers the batch (a batch is never sent again). */
static void pend_add_member(struct relay *r, const struct json *msg, const char *method, unsigned batch)
{
	if (r->n_pends >= MAX_PENDING)
		return;
	_cleanup_free_ char *id = canonical(json_get(msg, "id"));
	struct pend *old = pend_find(r, id);
	if (old)
		pend_remove(r, old);
	struct pend p = { .kind = PEND_FAIL, .batch = batch };
	if (str_eq(method, "tools/call")) {
		const char *tool = json_str(json_get(json_get(msg, "params"), "name"));
		p.kind = PEND_CALL;
		p.tool = tool ? xstrdup(tool) : NULL;
	}
	p.id = TAKE_PTR(id);
	r->pends = xreallocarray(r->pends, r->n_pends + 1, sizeof(*r->pends));
	r->pends[r->n_pends++] = p;
}

/* Writes the initialize request again with toolErrors and workspace added
 * to its params (unless the host set them); *ret_params gets the params. */
static void rewrite_initialize(const struct json *root, const struct json *params, const char *workspace,
			       struct buf *out, char **ret_params)
{
	struct buf pb = {0};
	struct jgen *g = jgen_new(&pb);
	jgen_obj_open(g);
	for (size_t i = 0; params && i < params->u.obj.n; i++) {
		jgen_key(g, params->u.obj.members[i].key);
		jgen_value(g, params->u.obj.members[i].value);
	}
	if (!json_get(params, "toolErrors"))
		jgen_kv_str(g, "toolErrors", "result");
	if (workspace && !json_get(params, "workspace"))
		jgen_kv_str(g, "workspace", workspace);
	jgen_obj_close(g);
	jgen_free(g);

	g = jgen_new(out);
	jgen_obj_open(g);
	for (size_t i = 0; i < root->u.obj.n; i++) {
		const struct json_member *m = &root->u.obj.members[i];
		if (str_eq(m->key, "params"))
			continue;
		jgen_key(g, m->key);
		jgen_value(g, m->value);
	}
	jgen_kv_raw(g, "params", buf_head(&pb), buf_size(&pb));
	jgen_obj_close(g);
	jgen_free(g);
	*ret_params = buf_steal(&pb);
}

static void set_str(char **slot, char *value)
{
	free(*slot);
	*slot = value;
}

/* One complete line of the host (without its newline): followed where it
 * matters after a restart, then queued for the daemon. */
static void host_line(struct relay *r, const char *text, size_t n)
{
	_cleanup_doc_ struct json_doc *doc = NULL;
	struct json_err err;
	const struct json *root = NULL;
	if (n <= PARSE_MAX && json_parse(text, n, 0, 0, &doc, &err) == 0)
		root = json_doc_root(doc);
	if (root && root->type == JSON_ARRAY && root->u.arr.n) {
		/* A batch: its requests are followed as one. */
		unsigned batch = ++r->batch_seq ? r->batch_seq : ++r->batch_seq;
		for (size_t i = 0; i < root->u.arr.n; i++) {
			const struct json *m = root->u.arr.items[i];
			const char *mm = m->type == JSON_OBJECT ? json_str(json_get(m, "method")) : NULL;
			if (mm && json_get(m, "id"))
				pend_add_member(r, m, mm, batch);
		}
	}
	if (!root || root->type != JSON_OBJECT) {
		/* Not for the bridge to judge: the daemon answers it. */
		buf_append(&r->up, text, n);
		buf_append(&r->up, "\n", 1);
		return;
	}
	const char *method = json_str(json_get(root, "method"));
	const struct json *id = json_get(root, "id");
	const struct json *params = json_get(root, "params");
	struct buf *q = r->stopping && method && id ? &r->held : &r->up;
	size_t start = buf_size(q);

	if (!method && id) {
		/* The host answers the daemon: keep its roots for a new connection. */
		_cleanup_free_ char *idt = canonical(id);
		for (size_t i = 0; i < r->n_roots_asked; i++) {
			if (!str_eq(r->roots_asked[i], idt))
				continue;
			const struct json *result = json_get(root, "result");
			if (result && result->type == JSON_OBJECT) {
				char *t = canonical(result);
				set_str(&r->roots, strlen(t) <= MAX_KEPT ? t : (free(t), NULL));
			}
			free(r->roots_asked[i]);
			r->roots_asked[i] = r->roots_asked[--r->n_roots_asked];
			break;
		}
	} else if (str_eq(method, "initialize") && (!params || params->type == JSON_OBJECT)) {
		char *p = NULL;
		rewrite_initialize(root, params, r->workspace, q, &p);
		const char *te = json_str(json_get(params, "toolErrors"));
		r->tool_errors_result = !te || str_eq(te, "result");
		int64_t calls;
		if (json_get_int(json_get(json_get(params, "budget"), "toolCalls"), &calls) && calls >= 0) {
			r->budget = calls;
			r->spent = 0;
		}
		set_str(&r->init_params, p);
		set_str(&r->init_id, id ? canonical(id) : NULL);
	} else if (str_eq(method, "notifications/initialized")) {
		r->initialized = true;
	} else if (str_eq(method, "notifications/cancelled")) {
		/* Cancelled by the host: no answer is owed any more. */
		_cleanup_free_ char *rid = canonical(json_get(params, "requestId"));
		struct pend *p = pend_find(r, rid);
		if (p)
			pend_remove(r, p);
	} else if (str_eq(method, "events/subscribe") && id) {
		char *t = params ? canonical(params) : xstrdup("{}");
		set_str(&r->subscribe_params, strlen(t) <= MAX_KEPT ? t : (free(t), NULL));
		set_str(&r->subscribe_id, canonical(id));
	}
	if (buf_size(q) == start)
		buf_append(q, text, n);
	if (method && id)
		pend_add(r, root, method, buf_head(q) + start, buf_size(q) - start);
	buf_append(q, "\n", 1);
}

/* Takes the host's bytes: complete lines go up. */
static void take_input(struct relay *r, const char *data, size_t n)
{
	while (n > 0) {
		const char *nl = memchr(data, '\n', n);
		size_t k = nl ? (size_t)(nl - data) + 1 : n;
		if (r->line_skip) {
			/* The rest of a line whose head went to a daemon now gone. */
		} else if (r->line_passthru) {
			buf_append(&r->up, data, k);
		} else {
			buf_append(&r->line, data, k);
			if (!nl && buf_size(&r->line) > PARSE_MAX) {
				buf_append(&r->up, buf_head(&r->line), buf_size(&r->line));
				buf_clear(&r->line);
				r->line_passthru = true;
			}
		}
		if (nl) {
			if (!r->line_passthru && !r->line_skip) {
				host_line(r, buf_head(&r->line), buf_size(&r->line) - 1);
				buf_clear(&r->line);
			}
			r->line_passthru = false;
			r->line_skip = false;
		}
		data += k;
		n -= k;
	}
}

/* --- what goes to the host ---------------------------------------------- */

/* Answers the host's request id with a transient failure: for a call and
 * a host that takes errors as results, an isError CallResult; else an
 * error envelope. */
static void write_transient(struct buf *out, const char *id, const char *tool, bool as_result, const char *msg,
			    bool restart)
{
	struct jgen *g = jgen_new(out);
	jgen_obj_open(g);
	jgen_kv_str(g, "jsonrpc", "2.0");
	jgen_kv_raw(g, "id", id, strlen(id));
	if (as_result) {
		jgen_key(g, "result");
		jgen_obj_open(g);
		jgen_key(g, "content");
		jgen_arr_open(g);
		jgen_obj_open(g);
		jgen_kv_str(g, "type", "text");
		jgen_kv_str(g, "text", msg);
		jgen_obj_close(g);
		jgen_arr_close(g);
		jgen_key(g, "structuredContent");
		jgen_obj_open(g);
	} else {
		jgen_key(g, "error");
		jgen_obj_open(g);
		jgen_kv_int(g, "code", -32603);
		jgen_kv_str(g, "message", msg);
	}
	jgen_key(g, as_result ? "error" : "data");
	jgen_obj_open(g);
	jgen_kv_str(g, "kind", "transient");
	jgen_kv_bool(g, "retryable", true);
	if (tool)
		jgen_kv_str(g, "tool", tool);
	if (restart)
		jgen_kv_bool(g, "restart", true);
	jgen_obj_close(g);	/* data, or error */
	jgen_obj_close(g);	/* error, or structuredContent */
	if (as_result) {
		jgen_kv_bool(g, "isError", true);
		jgen_obj_close(g);	/* result */
	}
	jgen_obj_close(g);
	jgen_free(g);
}

static void answer_transient(struct relay *r, const char *id, const char *tool, bool as_result, const char *msg,
			     bool restart)
{
	write_transient(&r->down, id, tool, as_result, msg, restart);
	buf_append(&r->down, "\n", 1);
}

static bool queued(char *const *ids, const char *id);

/* Answers the members of batch that are not queued (in ids) in one
 * array, as answer_transient answers one request (a call with msg, as a
 * result when results and the host asks so; the others with other), and
 * forgets them. */
static void answer_batch(struct relay *r, unsigned batch, char *const *ids, const char *msg, const char *other,
			 bool results, bool restart)
{
	bool first = true;
	for (size_t i = 0; i < r->n_pends;) {
		struct pend *p = &r->pends[i];
		if (p->batch != batch || queued(ids, p->id)) {
			i++;
			continue;
		}
		buf_puts(&r->down, first ? "[" : ",");
		first = false;
		bool call = p->kind == PEND_CALL;
		write_transient(&r->down, p->id, call ? p->tool : NULL, call && results && r->tool_errors_result,
				call ? msg : other, restart);
		pend_remove(r, p);
	}
	if (!first)
		buf_puts(&r->down, "]\n");
}

static void tell_host(struct relay *r, const char *method)
{
	buf_printf(&r->down, "{\"jsonrpc\":\"2.0\",\"method\":\"%s\"}\n", method);
}

/* --- the bridge's own messages to the daemon ------------------------------ */

/* Queues a request of the bridge; returns its id (canonical text). */
static char *own_request(struct relay *r, const char *method, const char *params)
{
	char *id = xasprintf("\"" OWN_ID "%u\"", ++r->own_seq);
	buf_printf(&r->own, "{\"jsonrpc\":\"2.0\",\"id\":%s,\"method\":\"%s\",\"params\":%s}\n", id, method, params);
	return id;
}

/* The host's initialize params with the session id the daemon gave. */
static char *params_with_session(const char *params, const char *sid, int64_t budget)
{
	_cleanup_doc_ struct json_doc *doc = NULL;
	struct json_err err;
	struct buf b = {0};
	struct jgen *g = jgen_new(&b);
	jgen_obj_open(g);
	if (json_parse(params, strlen(params), 0, 0, &doc, &err) == 0) {
		const struct json *p = json_doc_root(doc);
		for (size_t i = 0; p->type == JSON_OBJECT && i < p->u.obj.n; i++) {
			/* A session taken back keeps the budget it has left. */
			if (str_eq(p->u.obj.members[i].key, "sessionId") ||
			    str_eq(p->u.obj.members[i].key, "budget"))
				continue;
			jgen_key(g, p->u.obj.members[i].key);
			jgen_value(g, p->u.obj.members[i].value);
		}
	}
	jgen_kv_str(g, "sessionId", sid);
	if (budget >= 0) {
		jgen_key(g, "budget");
		jgen_obj_open(g);
		jgen_kv_int(g, "toolCalls", budget);
		jgen_obj_close(g);
	}
	jgen_obj_close(g);
	jgen_free(g);
	return buf_steal(&b);
}

/* After the session is back: the rest of what the host had told the old
 * connection, then what the old one did not answer, sent again. */
static void replay_rest(struct relay *r)
{
	if (r->session_id && r->init_params) {
		if (r->initialized)
			buf_puts(&r->own, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n");
		r->answer_roots = r->roots != NULL;
		if (r->subscribed && r->subscribe_params)
			free(own_request(r, "events/subscribe", r->subscribe_params));
	}
	for (size_t i = 0; i < r->n_pends;) {
		struct pend *p = &r->pends[i];
		if (p->kind == PEND_KEYED && p->resend && !r->session_back) {
			/* A daemon that did not have the session does not know
			 * the key either (a restart without a shared store):
			 * sent again, the call would run a second time. */
			answer_transient(r, p->id, p->tool, r->tool_errors_result, MSG_RESTARTED, true);
			pend_remove(r, p);
			continue;
		}
		if ((p->kind == PEND_AGAIN || p->kind == PEND_KEYED) && p->resend) {
			buf_puts(&r->own, p->line);
			buf_puts(&r->own, "\n");
			p->resend = false;
			p->resent = true;
		}
		i++;
	}
}

/* A new connection: first the host's initialize with the session id the
 * daemon gave; nothing else goes until it is answered (the daemon may
 * have to fetch the session from its store). */
static void replay(struct relay *r)
{
	if (r->session_id && r->init_params) {
		_cleanup_free_ char *p = params_with_session(r->init_params, r->session_id, -1);
		r->budget_told = false;
		set_str(&r->own_init, own_request(r, "initialize", p));
		return;
	}
	r->session_back = false;
	replay_rest(r);
	fprintf(stderr, "toolcallctl mcp: reconnected to %s\n", r->socket);
}

/* An answer to the bridge's own request. */
static void own_answer(struct relay *r, const struct json *root, const char *id)
{
	if (!r->own_init || !str_eq(id, r->own_init))
		return;
	const struct json *error = json_get(root, "error");
	const struct json *result = json_get(root, "result");
	int64_t left = r->budget - r->spent, daemon_left = -1;
	if (!r->budget_told)
		r->session_back = result && json_is_true(json_get(result, "resumed"));
	if (result && !r->budget_told && r->budget >= 0 &&
	    (!json_is_true(json_get(result, "resumed")) || !json_get_int(json_get(result, "budgetLeft"), &daemon_left) ||
	     daemon_left > left)) {
		/* The session came back with more calls left than the host's
		 * answers say it has (or none at all): it is told. */
		_cleanup_free_ char *p = params_with_session(r->init_params, r->session_id, MAX(left, 0));
		r->budget_told = true;
		set_str(&r->own_init, own_request(r, "initialize", p));
		return;
	}
	if (error)
		fprintf(stderr, "toolcallctl mcp: reconnected to %s, but session %s was not taken back: %s\n",
			r->socket, r->session_id, json_str(json_get(error, "message")) ?: "(no message)");
	else
		fprintf(stderr, "toolcallctl mcp: reconnected to %s, session %s\n", r->socket, r->session_id);
	set_str(&r->own_init, NULL);
	replay_rest(r);
	/* The daemon may have new tools: the host asks for them again. */
	tell_host(r, "notifications/tools/list_changed");
}

/* True for an answer saying the daemon stopped the call (it stops):
 * data.restart in an error envelope or in an isError result (kind
 * `cancelled`; `transient` from daemons before it said cancelled). */
static bool stopped_call(const struct json *root)
{
	const struct json *e = json_get(json_get(root, "error"), "data");
	if (!e)
		e = json_get(json_get(json_get(root, "result"), "structuredContent"), "error");
	const struct json *v = json_get(e, "restart");
	return v && v->type == JSON_BOOL && v->u.b;
}

/* The envelope's data (or an isError result's structuredContent.error) of
 * a stopped call, as `transient` and retryable; the rest as it came. */
static void write_data_transient(struct jgen *g, const struct json *data)
{
	jgen_obj_open(g);
	jgen_kv_str(g, "kind", "transient");
	jgen_kv_bool(g, "retryable", true);
	for (size_t i = 0; data->type == JSON_OBJECT && i < data->u.obj.n; i++) {
		const struct json_member *m = &data->u.obj.members[i];
		if (str_eq(m->key, "kind") || str_eq(m->key, "retryable"))
			continue;
		jgen_key(g, m->key);
		jgen_value(g, m->value);
	}
	jgen_obj_close(g);
}

/* The message for the host of a call the daemon stopped: the restart's,
 * with the output the call had produced (the daemon's message ends with it). */
static void write_stopped_message(struct jgen *g, const struct json *daemon_msg)
{
	const char *m = json_str(daemon_msg);
	const char *out = m ? strstr(m, OUTPUT_MARK) : NULL;
	if (!out) {
		jgen_str(g, MSG_STOPPED);
		return;
	}
	_cleanup_free_ char *t = xasprintf("%s%s", MSG_STOPPED, out);
	jgen_str(g, t);
}

/*
 * Writes a daemon's answer to a call its stop ended (`cancelled` with
 * data.restart) as what the host is told of a call a restart took
 * (CONTRACT §21): `transient`, retryable, "restarted; retry", with the
 * daemon's callId, attempts, durationMs, tool and restart kept.
 */
static void write_stopped_as_transient(struct jgen *g, const struct json *root)
{
	jgen_obj_open(g);
	for (size_t i = 0; i < root->u.obj.n; i++) {
		const struct json_member *m = &root->u.obj.members[i];
		const struct json *v = m->value;
		jgen_key(g, m->key);
		if (str_eq(m->key, "error") && v->type == JSON_OBJECT) {
			jgen_obj_open(g);
			for (size_t k = 0; k < v->u.obj.n; k++) {
				const struct json_member *e = &v->u.obj.members[k];
				jgen_key(g, e->key);
				if (str_eq(e->key, "message"))
					write_stopped_message(g, e->value);
				else if (str_eq(e->key, "data"))
					write_data_transient(g, e->value);
				else
					jgen_value(g, e->value);
			}
			jgen_obj_close(g);
		} else if (str_eq(m->key, "result") && v->type == JSON_OBJECT) {
			jgen_obj_open(g);
			for (size_t k = 0; k < v->u.obj.n; k++) {
				const struct json_member *e = &v->u.obj.members[k];
				const struct json *sc = e->value;
				jgen_key(g, e->key);
				if (str_eq(e->key, "content")) {
					jgen_arr_open(g);
					jgen_obj_open(g);
					jgen_kv_str(g, "type", "text");
					jgen_key(g, "text");
					const struct json *first =
						sc->type == JSON_ARRAY && sc->u.arr.n ? sc->u.arr.items[0] : NULL;
					write_stopped_message(g, json_get(first, "text"));
					jgen_obj_close(g);
					jgen_arr_close(g);
				} else if (str_eq(e->key, "structuredContent") && sc->type == JSON_OBJECT) {
					jgen_obj_open(g);
					for (size_t j = 0; j < sc->u.obj.n; j++) {
						jgen_key(g, sc->u.obj.members[j].key);
						if (str_eq(sc->u.obj.members[j].key, "error"))
							write_data_transient(g, sc->u.obj.members[j].value);
						else
							jgen_value(g, sc->u.obj.members[j].value);
					}
					jgen_obj_close(g);
				} else {
					jgen_value(g, sc);
				}
			}
			jgen_obj_close(g);
		} else {
			jgen_value(g, v);
		}
	}
	jgen_obj_close(g);
}

/* Relays the daemon's line to the host: as it came, or, for an answer (or
 * a batch's answers) to a call the daemon's stop ended, rewritten so. */
static void relay_down(struct relay *r, const struct json *root, const char *text, size_t n)
{
	bool stopped = false;
	if (root && root->type == JSON_OBJECT)
		stopped = stopped_call(root);
	for (size_t i = 0; root && root->type == JSON_ARRAY && i < root->u.arr.n; i++)
		stopped |= root->u.arr.items[i]->type == JSON_OBJECT && stopped_call(root->u.arr.items[i]);
	if (!stopped) {
		buf_append(&r->down, text, n);
		buf_append(&r->down, "\n", 1);
		return;
	}
	struct jgen *g = jgen_new(&r->down);
	if (root->type == JSON_OBJECT) {
		write_stopped_as_transient(g, root);
	} else {
		jgen_arr_open(g);
		for (size_t i = 0; i < root->u.arr.n; i++) {
			const struct json *m = root->u.arr.items[i];
			if (m->type == JSON_OBJECT && stopped_call(m))
				write_stopped_as_transient(g, m);
			else
				jgen_value(g, m);
		}
		jgen_arr_close(g);
	}
	jgen_free(g);
	buf_append(&r->down, "\n", 1);
}

/* The attempts a call's answer says it spent of the budget (none when it
 * was replayed or joined). */
static int64_t answer_attempts(const struct json *root)
{
	const struct json *meta = json_get(json_get(root, "result"), "_meta");
	const struct json *data = json_get(json_get(root, "error"), "data");
	if (!data)
		data = json_get(json_get(json_get(root, "result"), "structuredContent"), "error");
	int64_t n = 0;
	if (json_is_true(json_get(meta, "toolcalld/replayed")) || json_is_true(json_get(data, "replayed")))
		return 0;
	if (!json_get_int(json_get(meta, "toolcalld/attempts"), &n))
		json_get_int(json_get(data, "attempts"), &n);
	return n > 0 ? n : 0;
}

/* One complete line of the daemon (without its newline). */
static void daemon_line(struct relay *r, const char *text, size_t n)
{
	_cleanup_doc_ struct json_doc *doc = NULL;
	struct json_err err;
	const struct json *root = NULL;
	if (json_parse(text, n, 0, MAX_DEPTH, &doc, &err) == 0)
		root = json_doc_root(doc);
	const char *method = root && root->type == JSON_OBJECT ? json_str(json_get(root, "method")) : NULL;
	const struct json *id = root && root->type == JSON_OBJECT ? json_get(root, "id") : NULL;

	if (!method && id) {
		_cleanup_free_ char *idt = canonical(id);
		if (strncmp(idt, "\"" OWN_ID, strlen(OWN_ID) + 1) == 0) {
			own_answer(r, root, idt);
			return;
		}
		struct pend *p = pend_find(r, idt);
		if (p && (p->kind == PEND_CALL || p->kind == PEND_KEYED))
			r->spent += answer_attempts(root);
		int64_t code = 0;
		if (p && p->resent && p->task_q && !r->session_back &&
		    json_get_int(json_get(json_get(root, "error"), "code"), &code) && code == -32602) {
			/* A task the daemon that went away made, unknown to
			 * the next one (a restart without a shared store):
			 * lost with the restart, not another user's. */
			answer_transient(r, idt, NULL, p->task_q == 'r' && r->tool_errors_result, MSG_TASK_LOST, true);
			pend_remove(r, p);
			return;
		}
		if ((!p || p->kind == PEND_CALL || p->kind == PEND_KEYED) && stopped_call(root)) {
			/* The daemon stops: the host's next requests go to the
			 * next one, and a keyed call is sent there again (it
			 * was stopped before it ended, or never started). Only
			 * a call's answer says so: a task's result read back
			 * from the store by the next daemon may carry the mark
			 * of the stop that ended it. */
			r->stopping = true;
			if (p && p->kind == PEND_KEYED && r->reconnect_s > 0) {
				p->resend = true;
				return;
			}
		}
		if (p)
			pend_remove(r, p);
		if (r->init_id && str_eq(idt, r->init_id)) {
			const char *sid = json_str(json_get(json_get(root, "result"), "sessionId"));
			if (sid)
				set_str(&r->session_id, xstrdup(sid));
			set_str(&r->init_id, NULL);
		}
		if (r->subscribe_id && str_eq(idt, r->subscribe_id)) {
			r->subscribed = json_get(root, "result") != NULL;
			set_str(&r->subscribe_id, NULL);
		}
	} else if (root && root->type == JSON_ARRAY) {
		/* A batch answered: its members are no longer owed. */
		for (size_t i = 0; i < root->u.arr.n; i++) {
			const struct json *mid = json_get(root->u.arr.items[i], "id");
			if (!mid || mid->type == JSON_NULL)
				continue;
			_cleanup_free_ char *idt = canonical(mid);
			struct pend *p = pend_find(r, idt);
			if (p && p->batch)
				pend_remove(r, p);
		}
	} else if (method && id && str_eq(method, "roots/list")) {
		_cleanup_free_ char *idt = canonical(id);
		if (r->answer_roots && r->roots) {
			/* The new connection asks what the host answered already. */
			buf_printf(&r->own, "{\"jsonrpc\":\"2.0\",\"id\":%s,\"result\":%s}\n", idt, r->roots);
			r->answer_roots = false;
			return;
		}
		if (r->n_roots_asked < MAX_ROOTS_ASKED)
			r->roots_asked[r->n_roots_asked++] = TAKE_PTR(idt);
	}
	relay_down(r, root, text, n);
}

static void take_output(struct relay *r)
{
	r->heard = true;
	for (;;) {
		const char *nl = memchr(buf_head(&r->from), '\n', buf_size(&r->from));
		size_t len = nl ? (size_t)(nl - buf_head(&r->from)) + 1 : buf_size(&r->from);
		if (r->from_passthru || (!nl && len > PARSE_MAX_DOWN)) {
			/* Longer than the bridge reads: relayed as it comes,
			 * unread (an answer the bridge cannot see). */
			buf_append(&r->down, buf_head(&r->from), len);
			buf_consume(&r->from, len);
			r->from_passthru = !nl;
			if (!nl)
				return;
			continue;
		}
		if (!nl)
			return;
		daemon_line(r, buf_head(&r->from), len - 1);
		buf_consume(&r->from, len);
	}
}

/* --- the connection ----------------------------------------------------- */

/* Writes what b holds to fd without blocking; -errno on a hard error. */
static int drain(int fd, struct buf *b)
{
	while (buf_size(b) > 0) {
		ssize_t w = write(fd, buf_head(b), buf_size(b));
		if (w < 0) {
			if (errno == EINTR)
				continue;
			return errno == EAGAIN ? 0 : -errno;
		}
		buf_consume(b, (size_t)w);
	}
	return 0;
}

/* Sends the bridge's own messages (between the host's lines) and the
 * host's; -errno when the daemon is gone. */
static int drain_up(struct relay *r)
{
	for (;;) {
		struct buf *b = !r->up_mid && buf_size(&r->own) ? &r->own : &r->up;
		if (!buf_size(b) || (b == &r->up && r->own_init))
			return 0;	/* the host's lines wait for the session to be back */
		ssize_t w = send(r->sock, buf_head(b), buf_size(b), MSG_NOSIGNAL);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			return errno == EAGAIN ? 0 : -errno;
		}
		if (b == &r->up && w > 0)
			r->up_mid = buf_head(b)[w - 1] != '\n';
		buf_consume(b, (size_t)w);
	}
}

static int connect_nonblock(struct relay *r)
{
	struct client c = { .fd = -1 };
	int k = client_connect(&c, r->socket);
	if (k < 0)
		return k;
	int fl = fcntl(c.fd, F_GETFL);
	if (fl < 0 || fcntl(c.fd, F_SETFL, fl | O_NONBLOCK) < 0) {
		k = -errno;
		client_close(&c);
		return k;
	}
	r->sock = c.fd;
	return 0;
}

/* The ids of the requests still waiting in up (never sent), NULL-terminated. */
static char **queued_ids(struct relay *r)
{
	char **ids = xcalloc(1, sizeof(*ids));
	size_t n = 0;
	const char *s = buf_head(&r->up), *end = s + buf_size(&r->up);
	while (s < end) {
		const char *nl = memchr(s, '\n', (size_t)(end - s));
		size_t len = nl ? (size_t)(nl - s) : (size_t)(end - s);
		_cleanup_doc_ struct json_doc *doc = NULL;
		struct json_err err;
		const struct json *root = NULL;
		if (len <= PARSE_MAX && json_parse(s, len, 0, 0, &doc, &err) == 0)
			root = json_doc_root(doc);
		/* A line, or each member of a batch. */
		size_t k = root && root->type == JSON_ARRAY ? root->u.arr.n : 1;
		for (size_t i = 0; root && i < k; i++) {
			const struct json *m = root->type == JSON_ARRAY ? root->u.arr.items[i] : root;
			if (json_get(m, "method") && json_get(m, "id")) {
				ids = xreallocarray(ids, n + 2, sizeof(*ids));
				ids[n++] = canonical(json_get(m, "id"));
				ids[n] = NULL;
			}
		}
		s += len + 1;
	}
	return ids;
}

static bool queued(char *const *ids, const char *id)
{
	for (; *ids; ids++)
		if (str_eq(*ids, id))
			return true;
	return false;
}

/* The daemon's connection dropped: what it owed the host is answered or
 * kept to be sent again. */
static void lost(struct relay *r, int err)
{
	close(r->sock);
	r->sock = -1;
	buf_clear(&r->from);
	if (r->from_passthru) {
		/* The host got part of a line: end it, so its next line parses. */
		buf_append(&r->down, "\n", 1);
		r->from_passthru = false;
	}
	buf_clear(&r->own);
	if (r->up_mid) {
		/* The daemon got part of a line: the rest would be garbage to
		 * the next one (its request, if any, is answered below). */
		const char *nl = memchr(buf_head(&r->up), '\n', buf_size(&r->up));
		if (nl) {
			buf_consume(&r->up, (size_t)(nl - buf_head(&r->up)) + 1);
		} else {
			buf_clear(&r->up);
			r->line_skip = r->line_passthru;
			r->line_passthru = false;
		}
		r->up_mid = false;
	}
	for (size_t i = 0; i < r->n_roots_asked; i++)
		free(r->roots_asked[i]);
	r->n_roots_asked = 0;
	r->answer_roots = false;
	set_str(&r->own_init, NULL);
	/* The requests held for the next daemon go to it, after those queued. */
	r->stopping = false;
	buf_append(&r->up, buf_head(&r->held), buf_size(&r->held));
	buf_clear(&r->held);
	char **ids = queued_ids(r);
	if (r->subscribe_id && !queued(ids, r->subscribe_id))
		r->subscribed = false;	/* sent again as the host's, if at all */

	/* A batch is answered whole: one array. */
	for (size_t i = 0; i < r->n_pends;) {
		if (r->pends[i].batch && !queued(ids, r->pends[i].id)) {
			answer_batch(r, r->pends[i].batch, ids, MSG_RESTARTED,
				     "toolcalld restarted before answering; send the request again", true, true);
			i = 0;	/* its members are gone: look again */
		} else {
			i++;
		}
	}
	for (size_t i = 0; i < r->n_pends;) {
		struct pend *p = &r->pends[i];
		if (queued(ids, p->id)) {
			/* A task's request not sent yet goes to the next
			 * daemon all the same: the task may be lost with this
			 * one (daemon_line). */
			if (p->task_q)
				p->resent = true;
			i++;
			continue;
		}
		if ((p->kind == PEND_AGAIN || p->kind == PEND_KEYED) && r->reconnect_s > 0) {
			p->resend = true;
			i++;
			continue;
		}
		bool call = p->kind == PEND_CALL || p->kind == PEND_KEYED;
		answer_transient(r, p->id, p->tool, call && r->tool_errors_result,
				 call ? MSG_RESTARTED : "toolcalld restarted before answering; send the request again", true);
		pend_remove(r, p);
	}
	for (size_t i = 0; ids[i]; i++)
		free(ids[i]);
	free(ids);
	if (r->reconnect_s > 0)
		fprintf(stderr, "toolcallctl mcp: lost the connection to toolcalld (%s: %s); reconnecting for up to %d s\n",
			r->socket, err ? strerror(err) : "closed", r->reconnect_s);
	else
		fprintf(stderr, "toolcallctl mcp: toolcalld closed the connection (%s)\n", r->socket);
}

/* The daemon did not come back: every request still waiting gets an
 * error saying so. */
static void give_up(struct relay *r, int err)
{
	char *msg = xasprintf("toolcalld is not reachable: it went away and did not come back within %d s "
			      "(cannot connect to %s: %s). Start it (`toolcalld` in the workspace, or "
			      "`systemctl --user start toolcalld.socket`), then restart this MCP server.",
			      r->reconnect_s, r->socket, strerror(err));
	/* A batch is answered whole, one array; the rest one by one. */
	char *none[] = { NULL };
	for (size_t i = 0; i < r->n_pends;) {
		if (r->pends[i].batch) {
			answer_batch(r, r->pends[i].batch, none, msg, msg, false, false);
			i = 0;	/* its members are gone: look again */
		} else {
			i++;
		}
	}
	for (size_t i = 0; i < r->n_pends; i++)
		answer_transient(r, r->pends[i].id, NULL, false, msg, false);
	fprintf(stderr, "toolcallctl mcp: toolcalld did not come back within %d s (%s: %s); giving up\n",
		r->reconnect_s, r->socket, strerror(err));
	free(msg);
}

/* Relays until the host or the daemon is done; returns the exit status. */
static int relay_run(struct relay *r)
{
	char chunk[65536];
	int last_err = 0;
	for (;;) {
		if (r->sock >= 0 && r->in_eof && !r->up_shut && buf_size(&r->up) == 0 && buf_size(&r->own) == 0 &&
		    buf_size(&r->held) == 0) {
			/* A last line without its newline still counts. */
			if (buf_size(&r->line) > 0) {
				host_line(r, buf_head(&r->line), buf_size(&r->line));
				buf_clear(&r->line);
				continue;
			}
			shutdown(r->sock, SHUT_WR);
			r->up_shut = true;
		}
		if (r->sock < 0) {
			/* Nothing more to deliver: the host has gone, or the
			 * daemon may not be waited for. */
			if (r->reconnect_s == 0 || (r->in_eof && r->n_pends == 0 && buf_size(&r->up) == 0)) {
				if (buf_size(&r->down) == 0)
					return r->in_eof ? EXIT_OK : EXIT_CONNECT;
			} else if (mono_ms() >= r->next_try) {
				int k = connect_nonblock(r);
				if (k == 0) {
					r->heard = false;
					r->connected_at = mono_ms();
					replay(r);
					continue;
				}
				last_err = -k;
				if (mono_ms() >= r->give_up_at) {
					give_up(r, last_err);
					drain(r->out_fd, &r->down);
					return EXIT_CONNECT;
				}
				r->next_try = mono_ms() + r->backoff;
				r->backoff = MIN(r->backoff * 2, (uint64_t)BACKOFF_MAX_MS);
			}
		}

		bool up_full = buf_size(&r->up) + buf_size(&r->held) > RELAY_CAP;
		/* from holds at most one line being read (PARSE_MAX_DOWN). */
		bool down_full = buf_size(&r->down) > RELAY_CAP;
		bool sending = (buf_size(&r->up) && !r->own_init) || buf_size(&r->own);
		struct pollfd p[3] = {
			{ .fd = r->in_eof || up_full ? -1 : r->in_fd, .events = POLLIN },
			{ .fd = r->sock, .events = (down_full ? 0 : POLLIN) | (sending && !r->up_shut ? POLLOUT : 0) },
			{ .fd = buf_size(&r->down) ? r->out_fd : -1, .events = POLLOUT },
		};
		int timeout = -1;
		if (r->sock < 0 && r->reconnect_s > 0) {
			uint64_t now = mono_ms();
			timeout = r->next_try > now ? (int)MIN(r->next_try - now, (uint64_t)INT32_MAX) : 0;
		}
		if (poll(p, 3, timeout) < 0) {
			if (errno == EINTR && !interrupted)
				continue;
			return interrupted ? EXIT_INTERRUPTED : EXIT_CONNECT;
		}
		if (p[0].revents) {
			ssize_t n = read(r->in_fd, chunk, sizeof(chunk));
			if (n > 0)
				take_input(r, chunk, (size_t)n);
			else if (n == 0 || (errno != EINTR && errno != EAGAIN))
				r->in_eof = true;
		}
		int gone = -1;
		if (r->sock >= 0 && (p[1].revents & (POLLIN | POLLHUP | POLLERR))) {
			ssize_t n = recv(r->sock, chunk, sizeof(chunk), 0);
			if (n > 0) {
				buf_append(&r->from, chunk, (size_t)n);
				take_output(r);
			} else if (n == 0 || (errno != EINTR && errno != EAGAIN)) {
				gone = n == 0 ? 0 : errno;
			}
		}
		if (gone < 0 && r->sock >= 0 && !r->up_shut) {
			int k = drain_up(r);
			if (k < 0)
				gone = -k;
		}
		if (gone >= 0) {
			if (r->up_shut) {
				/* The host is done and the daemon has answered. */
				close(r->sock);
				r->sock = -1;
				r->reconnect_s = 0;
				for (size_t i = 0; i < r->n_pends; i++)
					answer_transient(r, r->pends[i].id, r->pends[i].tool,
							 r->pends[i].kind != PEND_AGAIN && r->pends[i].kind != PEND_FAIL &&
								 r->tool_errors_result,
							 MSG_RESTARTED, true);
				while (r->n_pends)
					pend_remove(r, &r->pends[0]);
			} else {
				lost(r, gone);
				if (r->heard || mono_ms() - r->connected_at >= 1000) {
					/* A fresh outage (else the last one goes on). */
					r->give_up_at = mono_ms() + (uint64_t)r->reconnect_s * 1000;
					r->backoff = BACKOFF_FIRST_MS;
				} else if (r->reconnect_s > 0 && mono_ms() >= r->give_up_at) {
					give_up(r, gone ? gone : ECONNRESET);
					drain(r->out_fd, &r->down);
					return EXIT_CONNECT;
				}
				r->next_try = mono_ms() + r->backoff;
				r->backoff = MIN(r->backoff * 2, (uint64_t)BACKOFF_MAX_MS);
			}
		}
		if (buf_size(&r->down) && drain(r->out_fd, &r->down) < 0)
			return EXIT_OUTPUT;	/* the host is gone */
	}
}

static void relay_free(struct relay *r)
{
	if (r->sock >= 0)
		close(r->sock);
	buf_free(&r->up);
	buf_free(&r->held);
	buf_free(&r->own);
	buf_free(&r->line);
	buf_free(&r->from);
	buf_free(&r->down);
	while (r->n_pends)
		pend_remove(r, &r->pends[0]);
	free(r->pends);
	for (size_t i = 0; i < r->n_roots_asked; i++)
		free(r->roots_asked[i]);
	free(r->init_id);
	free(r->init_params);
	free(r->session_id);
	free(r->subscribe_id);
	free(r->subscribe_params);
	free(r->roots);
	free(r->own_init);
}

/*
 * The daemon is down: answers the host's first request with an error that
 * says which socket was tried and how to start the daemon (a host shows
 * it to its user), then gives up.
 */
static int answer_unreachable(const char *socket, int err)
{
	struct buf in = {0};
	char chunk[4096];
	for (;;) {
		const char *nl = memchr(buf_head(&in), '\n', buf_size(&in));
		if (!nl) {
			if (buf_size(&in) > PARSE_MAX)
				break;
			ssize_t n = read(STDIN_FILENO, chunk, sizeof(chunk));
			if (n < 0 && errno == EINTR && !interrupted)
				continue;
			if (n <= 0)
				break;
			buf_append(&in, chunk, (size_t)n);
			continue;
		}
		size_t len = (size_t)(nl - buf_head(&in));
		struct json_doc *doc = NULL;
		struct json_err jerr;
		const struct json *id = NULL;
		if (json_parse(buf_head(&in), len, 0, 0, &doc, &jerr) == 0)
			id = json_get(json_doc_root(doc), "id");
		if (id) {
			_cleanup_free_ char *hint = client_connect_hint(socket, err);
			char *msg = xasprintf("toolcalld is not reachable: cannot connect to %s: %s", socket, hint);
			struct buf out = {0};
			struct jgen *g = jgen_new(&out);
			jgen_obj_open(g);
			jgen_kv_str(g, "jsonrpc", "2.0");
			jgen_key(g, "id");
			jgen_value(g, id);
			jgen_key(g, "error");
			jgen_obj_open(g);
			jgen_kv_int(g, "code", -32603);
			jgen_kv_str(g, "message", msg);
			jgen_obj_close(g);
			jgen_obj_close(g);
			jgen_free(g);
			buf_append(&out, "\n", 1);
			fwrite(buf_head(&out), 1, buf_size(&out), stdout);
			buf_free(&out);
			free(msg);
			json_doc_unref(doc);
			break;
		}
		json_doc_unref(doc);
		buf_consume(&in, len + 1);	/* a notification: nothing to answer */
	}
	buf_free(&in);
	_cleanup_free_ char *hint = client_connect_hint(socket, err);
	fprintf(stderr, "toolcallctl mcp: cannot connect to %s: %s\n", socket, hint);
	return EXIT_CONNECT;
}

int ctl_mcp(const char *socket, char **args, int n)
{
	static const struct option longopts[] = {
		{ "socket", required_argument, NULL, 's' },
		{ "workspace", required_argument, NULL, 'w' },
		{ "reconnect-s", required_argument, NULL, 'r' },
		{},
	};
	/* A host stops its servers with SIGTERM or by closing stdin: the
	 * bridge has nothing to clean up, so the default dispositions do. */
	signal(SIGINT, SIG_DFL);
	signal(SIGTERM, SIG_DFL);
	sigset_t unblock;
	sigemptyset(&unblock);
	sigaddset(&unblock, SIGINT);
	sigaddset(&unblock, SIGTERM);
	sigprocmask(SIG_UNBLOCK, &unblock, NULL);

	const char *sock = socket;
	const char *ws = NULL;
	int reconnect_s = RECONNECT_S_DEFAULT;
	/* getopt wants argv[0] first. */
	_cleanup_free_ char **argv = xmalloc(sizeof(char *) * ((size_t)n + 2));
	argv[0] = (char *)"mcp";
	memcpy(argv + 1, args, sizeof(char *) * (size_t)n);
	argv[n + 1] = NULL;
	optind = 1;
	int ch;
	while ((ch = getopt_long(n + 1, argv, "s:w:r:", longopts, NULL)) != -1) {
		if (ch == 's') {
			sock = optarg;
		} else if (ch == 'w') {
			ws = optarg;
		} else if (ch == 'r') {
			char *end;
			errno = 0;
			long v = strtol(optarg, &end, 10);
			if (errno || end == optarg || *end || v < 0 || v > RECONNECT_S_MAX) {
				fprintf(stderr, "toolcallctl mcp: --reconnect-s: expected 0 to %d seconds, not '%s'\n",
					RECONNECT_S_MAX, optarg);
				return EXIT_USAGE;
			}
			reconnect_s = (int)v;
		} else {
			return EXIT_USAGE;
		}
	}
	if (optind != n + 1) {
		fprintf(stderr, "Usage: toolcallctl mcp [-s SOCKET] [-w DIR] [--reconnect-s SECONDS]\n");
		return EXIT_USAGE;
	}
	_cleanup_free_ char *ws_abs = NULL;
	if (ws) {
		ws_abs = realpath(ws, NULL);
		if (!ws_abs) {
			fprintf(stderr, "toolcallctl mcp: -w %s: %s\n", ws, strerror(errno));
			return EXIT_USAGE;
		}
	}

	struct relay rl = {
		.in_fd = STDIN_FILENO,
		.out_fd = STDOUT_FILENO,
		.sock = -1,
		.socket = sock,
		.workspace = ws_abs,
		.reconnect_s = reconnect_s,
		.budget = -1,
	};
	int r = connect_nonblock(&rl);
	if (r < 0)
		return answer_unreachable(sock, -r);
	rl.heard = true;
	int status = relay_run(&rl);
	relay_free(&rl);
	return status;
}
