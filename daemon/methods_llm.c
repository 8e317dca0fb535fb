/* SPDX-License-Identifier: MIT */
/*
 * tools/dispatch: an assistant message's tool calls, as OpenAI or Anthropic
 * send them, run concurrently within the caps, answered with the messages
 * to append to the conversation (proto/llm.h has the shapes). Each call is
 * an ordinary tools/call for the dispatcher: validated, confirmed, timed
 * out, retried and audited alike; failures become their model-readable
 * message. Tools of MCP servers not started yet are waited for, as by
 * tools/call. The answer is written once every call has ended; a disconnect
 * detaches the calls still running, a notifications/cancelled for the
 * request cancels them.
 */
#include "daemon/methods_llm.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/answer.h"
#include "daemon/client_asks.h"
#include "daemon/client_session.h"
#include "daemon/methods_internal.h"
#include "daemon/providers.h"
#include "daemon/server_state.h"
#include "lib/dispatch/dispatch.h"
#include "lib/registry.h"
#include "lib/session.h"
#include "proto/base/buf.h"
#include "proto/base/util.h"
#include "proto/json.h"
#include "proto/llm.h"

struct group;

struct member {
	struct group *group;
	struct caller *caller;		/* NULL once it has ended */
	char *text;
	char *content;			/* the content array, when not one text item */
	bool is_error;
	bool done;
};

struct group {
	struct pending *p;
	enum llm_format format;
	struct json_doc *doc;		/* holds the calls' ids and arguments */
	struct llm_call *calls;
	struct member *m;
	size_t n;
	size_t remaining;
	bool starting;			/* still handing calls to the dispatcher */
};

static void group_free(void *arg)
{
	struct group *g = arg;
	for (size_t i = 0; i < g->n; i++) {
		if (g->m[i].caller)
			dispatch_detach(TAKE_PTR(g->m[i].caller));
		free(g->m[i].text);
		free(g->m[i].content);
	}
	free(g->m);
	free(g->calls);
	json_doc_unref(g->doc);
	free(g);
}

/* Writes the answer: {messages: [...]} in the calls' order. */
static void group_answer(struct group *g)
{
	_cleanup_free_ struct llm_result *r = xcalloc(g->n ? g->n : 1, sizeof(*r));
	for (size_t i = 0; i < g->n; i++)
		r[i] = (struct llm_result){ g->calls[i].id, g->m[i].text ? g->m[i].text : "", g->m[i].is_error,
					    g->m[i].content };
	struct buf b = {0};
	struct jgen *gen = jgen_new(&b);
	jgen_obj_open(gen);
	jgen_key(gen, "messages");
	llm_write_messages(gen, g->format, r, g->n);
	jgen_obj_close(gen);
	jgen_free(gen);
	/* Frees g through the pending's upper_free. */
	conn_result(g->p, buf_head(&b), buf_size(&b));
	buf_free(&b);
}

static void member_complete(void *ctx, const struct outcome *o, bool replayed)
{
	struct member *m = ctx;
	struct group *g = m->group;
	m->caller = NULL;
	m->done = true;
	if (o->kind == TC_OK) {
		m->text = xstrdup(o->text ? o->text : o->structured ? o->structured : "");
		m->content = o->content ? xstrdup(o->content) : NULL;	/* images, told apart */
		m->is_error = o->is_error;
	} else {
		m->text = xstrdup(answer_error_message(o));
		m->is_error = true;
	}
	if (--g->remaining == 0 && !g->starting)
		group_answer(g);
}

/* A confirmation of one of the calls is put to the client of the whole
 * request, like a tools/call's. */
static bool member_ask(void *ctx, const struct confirm_question *q)
{
	struct member *m = ctx;
	return asks_confirm(m->group->p, q);
}

static void member_withdraw(void *ctx, const char *request_id)
{
	struct member *m = ctx;
	asks_withdraw(m->group->p, request_id);
}

static const struct caller_ops member_ops = {
	.complete = member_complete,
	.ask = member_ask,
	.withdraw = member_withdraw,
};

/* Whom the connection's calls act as, or NULL when unknown. */
static const struct identity *caller_of(struct conn *c)
{
	struct session *s = client_session(c);
	return s ? session_identity(s) : NULL;
}

/* Answers a bad tools/dispatch request. */
static void dispatch_invalid(struct pending *p, const char *msg)
{
	char *m = xasprintf("Invalid params for tools/dispatch: %s", msg);
	answer_invalid_params(p, m);
	free(m);
}

void m_tools_dispatch(struct conn *c, const struct jrpc_req *req, struct pending *p)
{
	if (!p)
		return;
	const struct json *params = req->params;
	enum llm_format f;
	if (!params || params->type != JSON_OBJECT ||
	    llm_format_from_name(json_str(json_get(params, "format")), &f) < 0 || f == LLM_MCP) {
		dispatch_invalid(p, "format must be \"openai\" or \"anthropic\"");
		return;
	}
	const struct json *meta = json_get(params, "_meta");
	int64_t timeout_ms = -1;
	if (meta && (meta->type != JSON_OBJECT ||
		     (json_get(meta, "timeoutMs") &&
		      (!json_get_int(json_get(meta, "timeoutMs"), &timeout_ms) || timeout_ms <= 0 ||
		       timeout_ms > 86400000)))) {
		dispatch_invalid(p, "_meta must be an object; _meta.timeoutMs an integer from 1 to 86400000");
		return;
	}
	struct server *s = server_of(c);
	struct group *g = xcalloc(1, sizeof(*g));
	char *err = NULL;
	if (llm_parse_calls(f, json_get(params, "calls"), s->cfg.limits.max_batch, &g->calls, &g->n, &err) < 0) {
		dispatch_invalid(p, err);
		free(err);
		free(g);
		return;
	}
	/* Tools of MCP servers not imported yet: start them, wait. */
	if (!methods_resumed(p)) {
		bool wait = false;
		for (size_t i = 0; i < g->n; i++)
			wait |= !registry_find(s->registry, g->calls[i].name) &&
				providers_start_for(&s->providers, g->calls[i].name, caller_of(c));
		if (wait) {
			free(g->calls);
			free(g);
			methods_defer(c, req, p);
			return;
		}
	} else if (p->upper_free) {
		/* The parked request's deferral goes; the group takes its place. */
		p->upper_free(TAKE_PTR(p->upper));
		p->upper_free = NULL;
	}
	g->p = p;
	g->format = f;
	g->doc = json_doc_ref(req->doc);
	g->m = xcalloc(g->n ? g->n : 1, sizeof(*g->m));
	g->remaining = g->n;
	p->upper = g;
	p->upper_free = group_free;

	struct session *session = client_session(c);
	g->starting = true;
	for (size_t i = 0; i < g->n; i++) {
		struct member *m = &g->m[i];
		m->group = g;
		const struct call_params cp = {
			.tool = g->calls[i].name,
			.arguments = g->calls[i].arguments,
			.doc = req->doc,
			.timeout_ms = timeout_ms,
			.budget = -1,
			.pid = c->cred.pid,
		};
		conn_work_begin(c);
		struct caller *caller = dispatch_call(s->dispatcher, session, &cp, &member_ops, m);
		conn_work_end(c);
		if (!m->done)
			m->caller = caller;
	}
	g->starting = false;
	if (g->remaining == 0)
		group_answer(g);
}

bool methods_llm_cancel(struct pending *p)
{
	if (p->upper_free != group_free)
		return false;
	struct group *g = p->upper;
	/* As for tools/call: the cancelled request gets no response. The
	 * group goes with the pending; its calls are cancelled first. */
	for (size_t i = 0; i < g->n; i++)
		if (g->m[i].caller)
			dispatch_cancel(TAKE_PTR(g->m[i].caller), false);
	conn_drop(p);
	return true;
}
