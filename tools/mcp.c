/* SPDX-License-Identifier: MIT */
/*
 * MCP providers: a stdio MCP server as a source of tools. One child per
 * provider, newline-delimited JSON-RPC on its stdin and stdout, requests
 * matched to answers by id. The import (initialize, notifications/
 * initialized, tools/list with its pages) runs once per spawn; tools/call
 * requests wait until the server is initialized.
 *
 * Long because one provider's protocol state (import, id multiplexing,
 * crash and restart, its process tree) is one machine; splitting it would
 * spread that state across files.
 */
#include "tools/mcp.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "lib/child.h"
#include "lib/list.h"
#include "lib/loop.h"
#include "lib/map.h"
#include "lib/registry.h"
#include "lib/sandbox/sandbox.h"
#include "proto/base/strv.h"
#include "proto/json.h"
#include "proto/jsonrpc.h"
#include "proto/mcp.h"
#include "version.h"

#define MCP_LINE_MAX (8u << 20)		/* a message from the server */
#define MCP_IMPORT_MS 15000		/* spawn to tool list */
#define MCP_TOOLS_MAX 1024

struct mcp_import {
	char *name;
	char *description;
	char *schema;
};

/* A call waiting for the server (queued before it is ready, or sent). */
struct mcp_call {
	struct list node;		/* p->queued or p->sent */
	struct tool_call *tc;
	char *remote;
	uint64_t id;			/* 0 until sent */
};

struct mcp_provider {
	unsigned refs;
	char *name;
	char *prefix;
	char *source;
	char *fingerprint;
	char **argv;
	char **env_extra;		/* "NAME=value" */
	enum side_effect side_effects;
	bool idempotent;
	uint32_t timeout_ms;
	struct sandbox_tool sandbox;	/* the file's "sandbox" */
	struct sandbox_peer run_as;	/* the file's "run_as" user, when id.change */
	struct sandbox_run *run;	/* the running server's sandbox */

	struct tc_loop *loop;
	const struct tool_env *tenv;
	char *cwd;
	void (*on_settled)(void *arg, struct mcp_provider *p);
	void *arg;

	enum mcp_state state;
	char *error;
	struct child *child;
	int in_fd;
	struct tc_io *in_io;
	struct buf out;			/* to the server */
	struct buf line;		/* from the server, up to a newline */
	bool discarding;		/* dropping the rest of a line too long */
	struct buf notes;		/* tools not offered, and why ("; "-joined) */
	size_t import_notes;		/* how much of notes the last tool list made */
	struct tc_timer *import_timer;
	uint64_t next_id;
	uint64_t init_id;
	uint64_t list_id;
	bool initialized;		/* the server answered initialize */
	struct list queued;
	struct list sent;
	/* The imported tools, and the list being read. */
	struct mcp_import *tools;
	size_t n_tools;
	bool imported;
	struct mcp_import *next_tools;
	size_t n_next;
};

/* What a registered imported tool points to. */
struct mcp_tool {
	struct mcp_provider *p;
	char *remote;
};

static void provider_down(struct mcp_provider *p, const char *why);

/* --- declarations --------------------------------------------------------- */

static void imports_free(struct mcp_import *t, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(t[i].name);
		free(t[i].description);
		free(t[i].schema);
	}
	free(t);
}

int mcp_provider_from_json(const struct json *decl, const char *source, struct mcp_provider **ret,
			   char **ret_err)
{
	static const char *const keys[] = { "name", "kind", "command", "prefix", "side_effects",
					     "idempotent", "timeout_ms", "description", "env", "sandbox",
					     "run_as", NULL };
	for (size_t i = 0; i < decl->u.obj.n; i++) {
		bool known = false;
		for (const char *const *k = keys; *k; k++)
			known |= strcmp(*k, decl->u.obj.members[i].key) == 0;
		if (!known)
			return set_errorf(ret_err, "%s: unknown key (known: name, kind, command, prefix, side_effects, "
				   "idempotent, timeout_ms, description, env, sandbox, run_as)", decl->u.obj.members[i].key);
	}
	const char *name = json_str(json_get(decl, "name"));
	if (!name || !*name || strlen(name) > 128)
		return set_errorf(ret_err, "name: a non-empty string is required");
	const struct json *cmd = json_get(decl, "command");
	if (!cmd || cmd->type != JSON_ARRAY || cmd->u.arr.n == 0 || cmd->u.arr.n > 1024)
		return set_errorf(ret_err, "command: a non-empty array of strings is required");
	for (size_t i = 0; i < cmd->u.arr.n; i++) {
		const struct json *a = cmd->u.arr.items[i];
		if (a->type != JSON_STRING || strlen(a->u.str.s) != a->u.str.len || (i == 0 && !a->u.str.len))
			return set_errorf(ret_err, "command[%zu]: must be a string without NUL bytes", i);
	}
	const struct json *prefix = json_get(decl, "prefix");
	if (prefix && (prefix->type != JSON_STRING || prefix->u.str.len > 64))
		return set_errorf(ret_err, "prefix: must be a string of at most 64 bytes");
	const char *se = json_str(json_get(decl, "side_effects"));
	int side = side_effect_from_name(se);
	if (side < 0)
		return set_errorf(ret_err, "side_effects: one of \"none\", \"read\", \"write\", \"execute\", \"network\" is required");
	const struct json *idem = json_get(decl, "idempotent");
	if (idem && idem->type != JSON_BOOL)
		return set_errorf(ret_err, "idempotent: must be true or false");
	int64_t timeout = 0;
	const struct json *to = json_get(decl, "timeout_ms");
	if (to && (!json_get_int(to, &timeout) || timeout < 1 || timeout > 86400000))
		return set_errorf(ret_err, "timeout_ms: an integer from 1 to 86400000");
	const struct json *env = json_get(decl, "env");
	if (env && env->type != JSON_OBJECT)
		return set_errorf(ret_err, "env: must be an object of strings");
	for (size_t i = 0; env && i < env->u.obj.n; i++) {
		const struct json_member *m = &env->u.obj.members[i];
		if (m->value->type != JSON_STRING || !*m->key || strchr(m->key, '=') ||
		    strlen(m->value->u.str.s) != m->value->u.str.len)
			return set_errorf(ret_err, "env.%s: must be a string", m->key);
	}

	struct sandbox_tool sb = SANDBOX_TOOL_UNSET;
	const struct json *sbv = json_get(decl, "sandbox");
	if (sbv && sandbox_tool_from_json(sbv, &sb, ret_err) < 0)
		return -EINVAL;
	struct sandbox_peer run_as = {0};
	const struct json *ra = json_get(decl, "run_as");
	if (ra) {
		int r = sandbox_peer_from_json(ra, &run_as, ret_err);
		if (r < 0) {
			sandbox_tool_clear(&sb);
			return r;
		}
	}

	struct mcp_provider *p = xcalloc(1, sizeof(*p));
	p->refs = 1;
	p->sandbox = sb;
	p->run_as = run_as;
	p->name = xstrdup(name);
	p->prefix = xstrdup(prefix ? prefix->u.str.s : "");
	p->source = xstrdup(source ? source : "");
	p->side_effects = (enum side_effect)side;
	p->idempotent = json_is_true(idem);
	p->timeout_ms = (uint32_t)timeout;
	p->argv = xcalloc(cmd->u.arr.n + 1, sizeof(char *));
	for (size_t i = 0; i < cmd->u.arr.n; i++)
		p->argv[i] = xstrdup(cmd->u.arr.items[i]->u.str.s);
	size_t ne = env ? env->u.obj.n : 0;
	p->env_extra = xcalloc(ne + 1, sizeof(char *));
	for (size_t i = 0; i < ne; i++)
		p->env_extra[i] = xasprintf("%s=%s", env->u.obj.members[i].key, env->u.obj.members[i].value->u.str.s);
	struct buf fp = {0};
	json_canonical(decl, &fp);
	p->fingerprint = buf_steal(&fp);
	p->in_fd = -1;
	list_init(&p->queued);
	list_init(&p->sent);
	*ret = p;
	return 0;
}

struct mcp_provider *mcp_provider_ref(struct mcp_provider *p)
{
	if (p)
		p->refs++;
	return p;
}

struct mcp_provider *mcp_provider_unref(struct mcp_provider *p)
{
	if (!p || --p->refs > 0)
		return NULL;
	p->on_settled = NULL;
	provider_down(p, "the provider was removed");
	tc_timer_free(p->import_timer);
	imports_free(p->tools, p->n_tools);
	imports_free(p->next_tools, p->n_next);
	strv_free(p->argv);
	strv_free(p->env_extra);
	buf_free(&p->out);
	buf_free(&p->line);
	buf_free(&p->notes);
	free(p->name);
	free(p->prefix);
	free(p->source);
	free(p->fingerprint);
	free(p->error);
	free(p->cwd);
	sandbox_tool_clear(&p->sandbox);
	sandbox_peer_clear(&p->run_as);
	free(p);
	return NULL;
}

const char *mcp_provider_name(const struct mcp_provider *p) { return p->name; }
const char *mcp_provider_prefix(const struct mcp_provider *p) { return p->prefix; }
const char *mcp_provider_source(const struct mcp_provider *p) { return p->source; }
const char *mcp_provider_fingerprint(const struct mcp_provider *p) { return p->fingerprint; }
enum mcp_state mcp_provider_state(const struct mcp_provider *p) { return p->state; }
const char *mcp_provider_error(const struct mcp_provider *p) { return p->error; }
const char *mcp_provider_notes(const struct mcp_provider *p) { return buf_size(&p->notes) ? buf_head(&p->notes) : NULL; }

/* Notes a tool of the server that is not offered, for the daemon's log. */
static void note(struct mcp_provider *p, const char *fmt, ...) PRINTF(2, 3);
static void note(struct mcp_provider *p, const char *fmt, ...)
{
	if (buf_size(&p->notes) > 4096)
		return;
	if (buf_size(&p->notes))
		buf_puts(&p->notes, "; ");
	va_list ap;
	va_start(ap, fmt);
	char *s = xvasprintf(fmt, ap);
	va_end(ap);
	buf_puts(&p->notes, s);
	free(s);
}
bool mcp_provider_imported(const struct mcp_provider *p) { return p->imported; }

void mcp_provider_setup(struct mcp_provider *p, struct tc_loop *loop, const struct tool_env *env,
			const char *cwd, void (*on_settled)(void *arg, struct mcp_provider *p), void *arg)
{
	p->loop = loop;
	p->tenv = env;
	free(p->cwd);
	p->cwd = cwd ? xstrdup(cwd) : NULL;
	p->on_settled = on_settled;
	p->arg = arg;
}

/* --- talking to the server ------------------------------------------------- */

static void flush_out(struct mcp_provider *p);

static void on_writable(void *arg, int revents)
{
	flush_out(arg);
}

static void flush_out(struct mcp_provider *p)
{
	while (p->in_fd >= 0 && buf_size(&p->out)) {
		ssize_t n = write(p->in_fd, buf_head(&p->out), buf_size(&p->out));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN) {
			if (!p->in_io)
				p->in_io = tc_io_new(p->loop, p->in_fd, TC_IO_WRITE, on_writable, p);
			tc_io_start(p->in_io);
			return;
		}
		if (n < 0) {
			/* The server closed its stdin: its exit follows. */
			buf_clear(&p->out);
			break;
		}
		buf_consume(&p->out, (size_t)n);
	}
	if (p->in_io)
		tc_io_stop(p->in_io);
}

/* Sends a request; returns its id. */
static uint64_t send_request(struct mcp_provider *p, const char *method, void (*params)(struct jgen *g, void *arg),
			     void *arg)
{
	uint64_t id = ++p->next_id;
	struct jgen *g = jgen_new(&p->out);
	jgen_obj_open(g);
	jgen_kv_str(g, "jsonrpc", "2.0");
	jgen_kv_int(g, "id", (int64_t)id);
	jgen_kv_str(g, "method", method);
	if (params) {
		jgen_key(g, "params");
		params(g, arg);
	}
	jgen_obj_close(g);
	jgen_free(g);
	buf_putc(&p->out, '\n');
	flush_out(p);
	return id;
}

static void send_line(struct mcp_provider *p, const char *line)
{
	buf_puts(&p->out, line);
	buf_putc(&p->out, '\n');
	flush_out(p);
}

static void init_params(struct jgen *g, void *arg)
{
	mcp_initialize_params(g, "toolcalld", TOOLCALLD_VERSION);
}

static void list_params(struct jgen *g, void *arg)
{
	jgen_obj_open(g);
	if (arg)
		jgen_kv_str(g, "cursor", arg);
	jgen_obj_close(g);
}

struct call_arg {
	const char *remote;
	const struct json *args;
};

static void call_params(struct jgen *g, void *arg)
{
	struct call_arg *c = arg;
	jgen_obj_open(g);
	jgen_kv_str(g, "name", c->remote);
	jgen_key(g, "arguments");
	jgen_value(g, c->args);
	jgen_obj_close(g);
}

static void send_call(struct mcp_provider *p, struct mcp_call *mc)
{
	struct call_arg ca = { mc->remote, mc->tc->args };
	mc->id = send_request(p, "tools/call", call_params, &ca);
	list_remove(&mc->node);
	list_insert_tail(&p->sent, &mc->node);
}

static void settle(struct mcp_provider *p)
{
	if (p->on_settled)
		p->on_settled(p->arg, p);
}

/* Ends a waiting call with an outcome already set on its tool_call. */
static void call_end(struct mcp_call *mc)
{
	struct tool_call *tc = mc->tc;
	list_remove(&mc->node);
	tc->state = NULL;
	free(mc->remote);
	free(mc);
	tool_call_finish(tc);
}

/* The server is gone (or being stopped): fail what waits for it. */
static void provider_down(struct mcp_provider *p, const char *why)
{
	struct list *pos, *tmp;
	list_foreach_safe(pos, tmp, &p->sent) {
		struct mcp_call *mc = list_entry(pos, struct mcp_call, node);
		tool_call_fail(mc->tc, TC_TRANSIENT, "MCP server '%s' %s before answering; retry the call", p->name, why);
		call_end(mc);
	}
	list_foreach_safe(pos, tmp, &p->queued) {
		struct mcp_call *mc = list_entry(pos, struct mcp_call, node);
		tool_call_fail(mc->tc, TC_TRANSIENT, "MCP server '%s' %s", p->name, why);
		call_end(mc);
	}
	p->in_io = tc_io_free(p->in_io);
	if (p->in_fd >= 0) {
		close(p->in_fd);
		p->in_fd = -1;
	}
	if (p->child) {
		struct child *ch = TAKE_PTR(p->child);
		child_free(ch);
	}
	/* The server's whole tree goes with it. */
	p->run = sandbox_run_end(p->run);
	tc_timer_stop(p->import_timer);
	buf_clear(&p->out);
	buf_clear(&p->line);
	p->discarding = false;
	p->initialized = false;
	imports_free(p->next_tools, p->n_next);
	p->next_tools = NULL;
	p->n_next = 0;
}

static void import_failed(struct mcp_provider *p, const char *fmt, ...) PRINTF(2, 3);
static void import_failed(struct mcp_provider *p, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	free(p->error);
	p->error = xvasprintf(fmt, ap);
	va_end(ap);
	provider_down(p, "failed to start");
	p->state = MCP_FAILED;
	settle(p);
}

/* Takes the tools of one tools/list page. */
static bool take_tools(struct mcp_provider *p, const struct json *result, const char *src)
{
	const struct json *tools = json_get(result, "tools");
	if (!tools || tools->type != JSON_ARRAY)
		return false;
	if (p->n_next == 0) {
		buf_clear(&p->notes);	/* a new list: new notes */
		p->import_notes = 0;
	}
	for (size_t i = 0; i < tools->u.arr.n && p->n_next < MCP_TOOLS_MAX; i++) {
		const struct json *t = tools->u.arr.items[i];
		const struct json *jname = json_get(t, "name");
		const char *name = json_str(jname);
		const struct json *schema = json_get(t, "inputSchema");
		/* Offered as prefix + name: that must be a valid tool name. */
		size_t plen = strlen(p->prefix);
		if (!name || jname->u.str.len > TOOL_NAME_MAX - plen || strlen(name) != jname->u.str.len ||
		    !tool_name_valid(name, jname->u.str.len)) {
			struct buf shown = {0};
			json_quote_utf8(&shown, name ? name : "", name ? MIN(jname->u.str.len, (size_t)64) : 0);
			note(p, "%s%s: not a valid tool name (1 to %zu characters of A-Z a-z 0-9 _ - . after the "
			     "prefix)", buf_head(&shown), name && jname->u.str.len > 64 ? "..." : "",
			     TOOL_NAME_MAX - plen);
			buf_free(&shown);
			continue;
		}
		bool seen = false;
		for (size_t k = 0; k < p->n_next && !seen; k++)
			seen = str_eq(p->next_tools[k].name, name);
		if (seen) {
			note(p, "'%s': listed twice, the first is offered", name);
			continue;
		}
		p->next_tools = xreallocarray(p->next_tools, p->n_next + 1, sizeof(*p->next_tools));
		struct mcp_import *im = &p->next_tools[p->n_next++];
		im->name = xstrdup(name);
		const char *desc = json_str(json_get(t, "description"));
		im->description = xstrdup(desc ? desc : "");
		im->schema = schema && schema->type == JSON_OBJECT ? xstrndup(src + schema->off, schema->len)
								   : xstrdup("{\"type\":\"object\"}");
	}
	return true;
}

/* Sets a call's outcome from the server's answer. */
static void call_answered(struct mcp_provider *p, struct mcp_call *mc, const struct json *msg, const char *src)
{
	struct tool_call *tc = mc->tc;
	const struct json *err = json_get(msg, "error");
	const struct json *res = json_get(msg, "result");
	if (err || !res || res->type != JSON_OBJECT) {
		const char *m = json_str(json_get(err, "message"));
		int64_t code = 0;
		json_get_int(json_get(err, "code"), &code);
		tool_call_fail(tc, TC_EXECUTION_ERROR, "MCP server '%s' answered error %lld: %s", p->name,
			       (long long)code, m ? m : "(no message)");
		call_end(mc);
		return;
	}
	struct buf text = {0};
	const struct json *content = json_get(res, "content");
	for (size_t i = 0; content && content->type == JSON_ARRAY && i < content->u.arr.n; i++) {
		const char *t = json_str(json_get(content->u.arr.items[i], "text"));
		if (!t)
			continue;
		if (buf_size(&text))
			buf_putc(&text, '\n');
		buf_append(&text, t, json_get(content->u.arr.items[i], "text")->u.str.len);
	}
	char *structured;
	const struct json *sc = json_get(res, "structuredContent");
	if (sc && sc->type == JSON_OBJECT) {
		structured = xstrndup(src + sc->off, sc->len);
	} else {
		struct buf b = {0};
		struct jgen *g = jgen_new(&b);
		jgen_obj_open(g);
		jgen_key(g, "content");
		if (content)
			jgen_value(g, content);
		else {
			jgen_arr_open(g);
			jgen_arr_close(g);
		}
		jgen_obj_close(g);
		jgen_free(g);
		structured = buf_steal(&b);
	}
	/* A tool that failed inside the server is a dispatch that succeeded,
	 * like a shell command exiting non-zero. */
	tool_call_succeed(tc, buf_steal(&text), structured, json_is_true(json_get(res, "isError")));
	call_end(mc);
}

/* Handles one message from the server. */
static void on_message(struct mcp_provider *p, const char *line, size_t len)
{
	struct json_doc *doc = NULL;
	/* Bytes that are not UTF-8 (in a tool's output, most likely) become
	 * U+FFFD, as everywhere tool output is shown; JSON text must be UTF-8. */
	struct buf clean = {0};
	if (!utf8_valid(line, len)) {
		utf8_sanitize(line, len, &clean);
		line = buf_head(&clean);
		len = buf_size(&clean);
	}
	int r = json_parse(line, len, 0, 64, &doc, NULL);
	buf_free(&clean);
	if (r < 0)
		return;	/* servers print junk at times: skip it */
	const struct json *msg = json_doc_root(doc);
	const char *src = json_doc_text(doc);
	const struct json *id = json_get(msg, "id");
	const char *method = json_str(json_get(msg, "method"));

	if (method) {
		/* A request or notification from the server. */
		if (str_eq(method, "notifications/tools/list_changed") && p->state == MCP_READY) {
			p->list_id = send_request(p, "tools/list", list_params, NULL);
		} else if (id) {
			struct buf out = {0};
			if (str_eq(method, "ping"))
				jrpc_write_result(&out, src + id->off, id->len, "{}", 2);
			else
				jrpc_write_error(&out, src + id->off, id->len, JRPC_METHOD_NOT_FOUND,
						 "toolcalld does not offer this to servers", NULL, 0);
			send_line(p, buf_head(&out));
			buf_free(&out);
		}
		json_doc_unref(doc);
		return;
	}
	int64_t n;
	if (!json_get_int(id, &n) || n <= 0) {
		json_doc_unref(doc);
		return;
	}
	uint64_t rid = (uint64_t)n;
	if (rid == p->init_id) {
		if (!json_get(msg, "result")) {
			const char *m = json_str(json_get(json_get(msg, "error"), "message"));
			import_failed(p, "MCP server '%s' refused initialize: %s", p->name, m ? m : "error");
			json_doc_unref(doc);
			return;
		}
		p->initialized = true;
		send_line(p, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}");
		p->list_id = send_request(p, "tools/list", list_params, NULL);
		/* Calls queued while it started go now. */
		struct list *pos, *tmp;
		list_foreach_safe(pos, tmp, &p->queued)
			send_call(p, list_entry(pos, struct mcp_call, node));
	} else if (rid == p->list_id) {
		const struct json *res = json_get(msg, "result");
		if (!res || !take_tools(p, res, src)) {
			if (p->state == MCP_STARTING)
				import_failed(p, "MCP server '%s' did not list its tools", p->name);
			json_doc_unref(doc);
			return;
		}
		const char *cursor = json_str(json_get(res, "nextCursor"));
		if (cursor && *cursor) {
			p->list_id = send_request(p, "tools/list", list_params, (void *)cursor);
		} else {
			imports_free(p->tools, p->n_tools);
			p->tools = TAKE_PTR(p->next_tools);
			p->n_tools = p->n_next;
			p->n_next = 0;
			p->imported = true;
			p->import_notes = buf_size(&p->notes);
			p->state = MCP_READY;
			tc_timer_stop(p->import_timer);
			settle(p);
		}
	} else {
		struct list *pos, *tmp;
		list_foreach_safe(pos, tmp, &p->sent) {
			struct mcp_call *mc = list_entry(pos, struct mcp_call, node);
			if (mc->id == rid) {
				call_answered(p, mc, msg, src);
				break;
			}
		}
	}
	json_doc_unref(doc);
}

/* Reads the id of an answer from the start of its text, when it comes
 * first as servers write it ({"jsonrpc":"2.0","id":7,...}). */
static bool sniff_id(const char *s, size_t n, uint64_t *ret)
{
	const char *end = s + MIN(n, (size_t)256);
	const char *k = memmem(s, (size_t)(end - s), "\"id\"", 4);
	if (!k || memmem(s, (size_t)(k - s), "\"result\"", 8) || memmem(s, (size_t)(k - s), "\"error\"", 7))
		return false;
	const char *q = k + 4;
	while (q < end && (*q == ' ' || *q == ':'))
		q++;
	uint64_t v = 0;
	const char *digits = q;
	while (q < end && *q >= '0' && *q <= '9' && q - digits < 19)
		v = v * 10 + (uint64_t)(*q++ - '0');
	if (q == digits || q == end || (*q != ',' && *q != '}' && *q != ' '))
		return false;
	*ret = v;
	return true;
}

/*
 * A message longer than MCP_LINE_MAX is dropped as it comes (up to its
 * newline) instead of being held. The call it answers fails, without a
 * retry (it may have done its work); when that call cannot be told, every
 * call sent to the server fails so. The server is kept: the stream is in
 * step again after the newline.
 */
static void line_too_long(struct mcp_provider *p)
{
	uint64_t rid;
	bool known = sniff_id(buf_head(&p->line), buf_size(&p->line), &rid);
	buf_clear(&p->line);
	p->discarding = true;
	struct list *pos, *tmp;
	list_foreach_safe(pos, tmp, &p->sent) {
		struct mcp_call *mc = list_entry(pos, struct mcp_call, node);
		if (known && mc->id != rid)
			continue;
		tool_call_fail(mc->tc, TC_EXECUTION_ERROR,
			       "MCP server '%s' sent a message longer than %u MiB%s; it was not read",
			       p->name, MCP_LINE_MAX >> 20, known ? " as the answer" : ", and the call it answers "
			       "cannot be told, so every call in flight failed");
		call_end(mc);
	}
}

static void on_output(void *arg, enum child_stream s, const char *data, size_t n)
{
	struct mcp_provider *p = arg;
	if (s != CHILD_STDOUT)
		return;
	if (p->discarding) {
		const char *nl = memchr(data, '\n', n);
		if (!nl)
			return;
		p->discarding = false;
		n -= (size_t)(nl + 1 - data);
		data = nl + 1;
	}
	buf_append(&p->line, data, n);
	for (;;) {
		const char *head = buf_head(&p->line);
		const char *nl = memchr(head, '\n', buf_size(&p->line));
		if (!nl)
			break;
		size_t len = (size_t)(nl - head);
		/* Copy: handling a message may write to p->line (it does not,
		 * but the server may be restarted underneath). */
		char *msg = xstrndup(head, len);
		buf_consume(&p->line, len + 1);
		on_message(p, msg, len);
		free(msg);
		if (!p->child)
			return;
	}
	if (buf_size(&p->line) > MCP_LINE_MAX)
		line_too_long(p);
}

/* The server closed its output: it cannot answer any more. It is stopped;
 * its exit fails what waits for it, and the next call starts it again. */
static void on_eof(void *arg, enum child_stream s)
{
	struct mcp_provider *p = arg;
	if (s == CHILD_STDOUT && p->child && child_running(p->child))
		child_terminate(p->child);
}

static void on_child_done(void *arg, struct child *ch, struct child_result *r)
{
	struct mcp_provider *p = arg;
	char why[64];
	if (r->signal) {
		char sig[16];
		snprintf(why, sizeof(why), "was killed by %s", child_signal_name(r->signal, sig));
	} else {
		snprintf(why, sizeof(why), "exited with status %d", r->exit_code);
	}
	bool starting = p->state == MCP_STARTING;
	_cleanup_free_ char *note = starting ? sandbox_run_denial_note(p->run, r->out[CHILD_STDERR],
								       r->out_len[CHILD_STDERR]) : NULL;
	p->child = NULL;
	child_free(ch);
	p->run = sandbox_run_end(p->run);
	if (starting) {
		import_failed(p, "MCP server '%s' %s while starting%s%s", p->name, why, note ? "\n" : "",
			      note ? note : "");
		return;
	}
	provider_down(p, why);
	p->state = MCP_IDLE;
}

static void on_import_timeout(void *arg)
{
	struct mcp_provider *p = arg;
	import_failed(p, "MCP server '%s' did not list its tools within %d ms", p->name, MCP_IMPORT_MS);
}

void mcp_provider_start(struct mcp_provider *p)
{
	if (p->child || !p->loop)
		return;
	char **env = child_env_new(p->tenv ? p->tenv->shell_env_allow : NULL);
	for (char **e = p->env_extra; *e; e++) {
		char *eq = strchr(*e, '=');
		char *name = xstrndup(*e, (size_t)(eq - *e));
		child_env_put(&env, name, eq + 1);
		free(name);
	}
	/* The server's sandbox: its own profile over the config's, the
	 * daemon's default workspace writable, as the daemon unless the file
	 * names a user. */
	const struct sandbox_config *sbc = p->tenv ? p->tenv->sandbox : NULL;
	if (sbc) {
		struct sandbox_req req;
		sandbox_req_init(&req, sbc, p->name, p->side_effects == SIDE_NETWORK, &p->sandbox);
		const char *ws[] = { p->cwd, NULL };
		static const struct sandbox_identity daemon_id = { .change = false };
		req.workspaces = p->cwd ? ws : NULL;
		req.id = p->run_as.id.change ? &p->run_as.id : &daemon_id;
		_cleanup_free_ char *msg = NULL;
		if (sandbox_prepare(&req, &p->run, &msg) < 0) {
			child_env_free(env);
			import_failed(p, "MCP server '%s' cannot be started: %s", p->name, msg ? msg : "sandbox");
			return;
		}
		if (sandbox_run_tmpdir(p->run))
			child_env_put(&env, "TMPDIR", sandbox_run_tmpdir(p->run));
		if (p->run_as.id.change && p->run_as.home)
			child_env_put(&env, "HOME", p->run_as.home);
	}
	int cwd_fd = p->cwd ? open(p->cwd, O_PATH | O_DIRECTORY | O_CLOEXEC) : -1;
	struct child_opts o = {
		.sandbox = p->run,
		.argv = p->argv,
		.envp = env,
		.cwd_fd = cwd_fd,
		.output_cap = 64 * 1024,
		.on_output = on_output,
		.on_eof = on_eof,
		.on_done = on_child_done,
		.arg = p,
		.ret_stdin_fd = &p->in_fd,
	};
	int r = child_spawn(p->loop, &o, &p->child);
	if (cwd_fd >= 0)
		close(cwd_fd);
	child_env_free(env);
	if (r < 0) {
		const struct sandbox_child *sc = sandbox_run_child(p->run);
		p->child = NULL;
		if (sc && sc->failed)
			import_failed(p, "MCP server '%s' cannot be started: its sandbox could not be set up (%s): %s",
				      p->name, sc->failed, strerror(-r));
		else
			import_failed(p, "MCP server '%s' cannot be started (%s): %s", p->name, p->argv[0],
				      strerror(-r));
		p->run = sandbox_run_end(p->run);
		return;
	}
	free(p->error);
	p->error = NULL;
	p->state = MCP_STARTING;
	if (!p->import_timer)
		p->import_timer = tc_timer_new(p->loop, on_import_timeout, p);
	tc_timer_start(p->import_timer, MCP_IMPORT_MS);
	p->init_id = send_request(p, "initialize", init_params, NULL);
}

/* --- the tools it offers ------------------------------------------------------ */

static void mcp_tool_free(void *priv)
{
	struct mcp_tool *mt = priv;
	mcp_provider_unref(mt->p);
	free(mt->remote);
	free(mt);
}

static enum tool_ret mcp_exec(struct tool_call *c)
{
	struct mcp_tool *mt = c->tool->priv;
	struct mcp_provider *p = mt->p;
	struct mcp_call *mc = xcalloc(1, sizeof(*mc));
	mc->tc = c;
	mc->remote = xstrdup(mt->remote);
	list_init(&mc->node);
	c->state = mc;
	list_insert_tail(&p->queued, &mc->node);
	if (!p->child)
		mcp_provider_start(p);	/* may fail the call at once */
	else if (p->initialized)
		send_call(p, mc);
	return TOOL_PENDING;
}

static void mcp_cancel(struct tool_call *c)
{
	struct mcp_call *mc = c->state;
	if (!mc)
		return;
	struct mcp_provider *p = ((struct mcp_tool *)c->tool->priv)->p;
	if (mc->id) {
		char line[128];
		snprintf(line, sizeof(line), "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\","
			 "\"params\":{\"requestId\":%llu,\"reason\":\"cancelled\"}}", (unsigned long long)mc->id);
		send_line(p, line);
	}
	tool_call_fail(c, TC_CANCELLED, "The call was cancelled");
	call_end(mc);
}

const struct tool_def tool_kind_mcp = {
	.name = "mcp",
	.description = "A tool of a stdio MCP server",
	.input_schema = "{\"type\":\"object\"}",
	.side_effects = SIDE_EXECUTE,
	.exec = mcp_exec,
	.errors_trip_circuit = true,
	.cancel = mcp_cancel,
	.priv_free = mcp_tool_free,
	.runs_children = true,
};

int mcp_provider_register(struct mcp_provider *p, struct registry *r, char **ret_err)
{
	/* Notes of the last registration go; those of the import stay. */
	p->notes.len = p->notes.off + p->import_notes;
	if (p->notes.data)
		p->notes.data[p->notes.len] = '\0';
	for (size_t i = 0; i < p->n_tools; i++) {
		const struct mcp_import *im = &p->tools[i];
		char *name = xasprintf("%s%s", p->prefix, im->name);
		struct mcp_tool *mt = xcalloc(1, sizeof(*mt));
		mt->p = mcp_provider_ref(p);
		mt->remote = xstrdup(im->name);
		struct tool *t = NULL;
		char *err = NULL;
		int rr = tool_new(&tool_kind_mcp, name, im->description, im->schema, mt, &t, &err);
		if (rr < 0) {
			/* A schema outside the supported subset: the tool cannot be
			 * validated, so it is not offered. */
			note(p, "'%s': %s", name, err ? err : "invalid input schema");
			mcp_tool_free(mt);
			free(err);
			free(name);
			continue;
		}
		t->side_effects = p->side_effects;
		t->sandbox = &p->sandbox;	/* the tool holds a reference on p */
		t->idempotent = p->idempotent;
		t->timeout_ms = p->timeout_ms ? p->timeout_ms : tool_default_timeout(p->side_effects);
		free(t->source);
		t->source = xstrdup(p->source);
		struct buf fp = {0};
		buf_printf(&fp, "%s|%s|%s|%s", p->fingerprint, im->name, im->description, im->schema);
		t->fingerprint = buf_steal(&fp);
		/* A name another tool already has is not offered: one server
		 * must not make the whole registry fail to load. */
		char *clash = NULL;
		if (registry_add(r, t, &clash) < 0) {
			note(p, "'%s': another tool has this name", name);
			free(clash);
		}
		free(name);
	}
	return 0;
}
