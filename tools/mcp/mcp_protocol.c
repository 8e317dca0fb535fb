/* SPDX-License-Identifier: MIT */
/*
 * The MCP protocol with a provider's server: JSON-RPC written to its stdin
 * a line each, initialize and the import of its tools (tools/list with its
 * pages, again when it says its list changed), tools/call requests matched
 * to answers by id, and the content of those answers (image items checked).
 * Calls wait until the server is initialized. The process that carries it
 * is mcp_proc.c's, which hands each line it reads to mcp_on_message().
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "lib/base/loop.h"
#include "proto/json.h"
#include "proto/jsonrpc.h"
#include "proto/mcp.h"
#include "proto/utf8.h"
#include "tools/mcp/mcp_internal.h"
#include "version.h"

/* --- to the server ------------------------------------------------------------ */

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

uint64_t mcp_send_request(struct mcp_provider *p, const char *method, void (*params)(struct jgen *g, void *arg),
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

void mcp_send_line(struct mcp_provider *p, const char *line)
{
	buf_puts(&p->out, line);
	buf_putc(&p->out, '\n');
	flush_out(p);
}

/* --- requests and the calls waiting ------------------------------------------ */

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

void mcp_send_call(struct mcp_provider *p, struct mcp_call *mc)
{
	struct call_arg ca = { mc->remote, mc->tc->args };
	mc->id = mcp_send_request(p, "tools/call", call_params, &ca);
	list_remove(&mc->node);
	list_insert_tail(&p->sent, &mc->node);
}

void mcp_send_initialize(struct mcp_provider *p)
{
	p->init_id = mcp_send_request(p, "initialize", init_params, NULL);
}

void mcp_instance_touch(struct mcp_provider *inst)
{
	if (!inst->parent || !inst->idle_timer)
		return;
	if (list_empty(&inst->queued) && list_empty(&inst->sent) && inst->child)
		tc_timer_start(inst->idle_timer, (uint64_t)inst->idle_s * 1000);
	else
		tc_timer_stop(inst->idle_timer);
}

void mcp_call_end(struct mcp_call *mc)
{
	struct tool_call *tc = mc->tc;
	struct mcp_provider *p = mc->p;
	list_remove(&mc->node);
	tc->state = NULL;
	free(mc->remote);
	free(mc);
	mcp_instance_touch(p);
	tool_call_finish(tc);
}

void mcp_calls_fail(struct mcp_provider *p, const char *why)
{
	struct list *pos, *tmp;
	list_foreach_safe(pos, tmp, &p->sent) {
		struct mcp_call *mc = list_entry(pos, struct mcp_call, node);
		tool_call_fail(mc->tc, TC_TRANSIENT, "MCP server '%s' %s before answering; retry the call", p->name, why);
		mcp_call_end(mc);
	}
	list_foreach_safe(pos, tmp, &p->queued) {
		struct mcp_call *mc = list_entry(pos, struct mcp_call, node);
		/* A failed start says why, with what the server printed. */
		if (p->state == MCP_FAILED && p->error)
			tool_call_fail(mc->tc, p->refused ? TC_PERMISSION_DENIED : TC_TRANSIENT, "%s", p->error);
		else
			tool_call_fail(mc->tc, TC_TRANSIENT, "MCP server '%s' %s", p->name, why);
		mcp_call_end(mc);
	}
}

/* --- its answers ------------------------------------------------------------ */

void mcp_warn_unmatched(struct mcp_provider *p)
{
	_cleanup_free_ char *unmatched = mcp_provider_unmatched(p);
	if (unmatched && p->on_log) {
		_cleanup_free_ char *w = xasprintf("\"tools\" keys of %s that match none of its tools: %s",
						   p->source, unmatched);
		p->on_log(p->arg, p, true, w);
	}
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
			mcp_note(p, "%s%s: not a valid tool name (1 to %zu characters of A-Z a-z 0-9 _ - . after the "
			     "prefix)", buf_head(&shown), name && jname->u.str.len > 64 ? "..." : "",
			     TOOL_NAME_MAX - plen);
			buf_free(&shown);
			continue;
		}
		bool seen = false;
		for (size_t k = 0; k < p->n_next && !seen; k++)
			seen = str_eq(p->next_tools[k].name, name);
		if (seen) {
			mcp_note(p, "'%s': listed twice, the first is offered", name);
			continue;
		}
		p->next_tools = xreallocarray(p->next_tools, p->n_next + 1, sizeof(*p->next_tools));
		struct mcp_import *im = &p->next_tools[p->n_next++];
		im->name = xstrdup(name);
		const char *desc = json_str(json_get(t, "description"));
		im->description = xstrdup(desc ? desc : "");
		im->schema = schema && schema->type == JSON_OBJECT ? xstrndup(src + schema->off, schema->len)
								   : xstrdup("{\"type\":\"object\"}");
		/* Its hints, shown as it gave them (and trusted where the file says). */
		const struct json *ann = json_get(t, "annotations");
		const struct json *ro = json_get(ann, "readOnlyHint"), *de = json_get(ann, "destructiveHint");
		im->read_only = ro && ro->type == JSON_BOOL ? json_is_true(ro) : -1;
		im->destructive = de && de->type == JSON_BOOL ? json_is_true(de) : -1;
	}
	return true;
}

#define IMAGES_MAX 64		/* image items of one answer */

/* Why an image item of a server's answer cannot be passed on, or NULL. */
static const char *image_invalid(const struct json *item)
{
	const struct json *data = json_get(item, "data");
	const struct json *mime = json_get(item, "mimeType");
	if (!data || data->type != JSON_STRING || data->u.str.len == 0 || data->u.str.len % 4)
		return "its data is not base64";
	for (size_t i = 0; i < data->u.str.len; i++) {
		char c = data->u.str.s[i];
		bool pad = c == '=' && i + 2 >= data->u.str.len;
		if (!pad && !(c >= 'A' && c <= 'Z') && !(c >= 'a' && c <= 'z') && !(c >= '0' && c <= '9') &&
		    c != '+' && c != '/')
			return "its data is not base64";
	}
	if (!mime || mime->type != JSON_STRING || mime->u.str.len == 0 || mime->u.str.len > 127 ||
	    strlen(mime->u.str.s) != mime->u.str.len)
		return "its mimeType is not a string of 1 to 127 bytes";
	return NULL;
}

/*
 * The content array to answer with: the server's as it came, byte for
 * byte, every item of every type (text, image, audio, resource,
 * resource_link, with their annotations and _meta), unless an image item
 * is not valid: then each item as it came but that image, which becomes a
 * text saying why it was left out. NULL when there is no array.
 */
static char *content_whole(const struct json *content, const char *src)
{
	if (!content || content->type != JSON_ARRAY)
		return NULL;
	bool bad = false;
	size_t images = 0;
	for (size_t i = 0; i < content->u.arr.n && !bad; i++) {
		const struct json *item = content->u.arr.items[i];
		if (str_eq(json_str(json_get(item, "type")), "image"))
			bad = ++images > IMAGES_MAX || image_invalid(item);
	}
	if (!bad)
		return xstrndup(src + content->off, content->len);
	struct buf b = {0};
	struct jgen *g = jgen_new(&b);
	jgen_arr_open(g);
	images = 0;
	for (size_t i = 0; i < content->u.arr.n; i++) {
		const struct json *item = content->u.arr.items[i];
		const char *why = NULL;
		if (str_eq(json_str(json_get(item, "type")), "image"))
			why = ++images > IMAGES_MAX ? "more than 64 images" : image_invalid(item);
		if (why) {
			char msg[128];
			snprintf(msg, sizeof(msg), "[an image of the answer was left out: %s]", why);
			jgen_obj_open(g);
			jgen_kv_str(g, "type", "text");
			jgen_kv_str(g, "text", msg);
			jgen_obj_close(g);
		} else {
			jgen_value(g, item);
		}
	}
	jgen_arr_close(g);
	jgen_free(g);
	return buf_steal(&b);
}

/* The members of the answer's _meta, to follow the daemon's own in the
 * result's (those named "toolcalld/..." are the daemon's: left out); NULL
 * when none. */
static char *result_meta(const struct json *meta)
{
	if (!meta || meta->type != JSON_OBJECT)
		return NULL;
	struct buf b = {0};
	struct jgen *g = jgen_new(&b);
	jgen_obj_open(g);
	size_t n = 0;
	for (size_t i = 0; i < meta->u.obj.n; i++) {
		const struct json_member *m = &meta->u.obj.members[i];
		if (str_has_prefix(m->key, "toolcalld/"))
			continue;
		jgen_key(g, m->key);
		jgen_value(g, m->value);
		n++;
	}
	jgen_obj_close(g);
	jgen_free(g);
	if (!n) {
		buf_free(&b);
		return NULL;
	}
	return buf_steal(&b);
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
		mcp_call_end(mc);
		return;
	}
	struct buf text = {0};
	const struct json *content = json_get(res, "content");
	/* The text: its text items, the text of its embedded resources and
	 * a line for each resource link, one after the other. */
	for (size_t i = 0; content && content->type == JSON_ARRAY && i < content->u.arr.n; i++) {
		const struct json *item = content->u.arr.items[i];
		const char *type = json_str(json_get(item, "type"));
		const struct json *t = str_eq(type, "resource") ? json_get(json_get(item, "resource"), "text")
								: json_get(item, "text");
		const char *uri = json_str(json_get(item, "uri"));
		if (str_eq(type, "resource_link") && uri) {
			if (buf_size(&text))
				buf_putc(&text, '\n');
			buf_printf(&text, "[resource link: %s]", uri);
		}
		if (!t || t->type != JSON_STRING)
			continue;
		if (buf_size(&text))
			buf_putc(&text, '\n');
		buf_append(&text, t->u.str.s, t->u.str.len);
	}
	/* structuredContent as it came; none when it gave none. */
	const struct json *sc = json_get(res, "structuredContent");
	char *structured = sc && sc->type == JSON_OBJECT ? xstrndup(src + sc->off, sc->len) : NULL;
	/* A tool that failed inside the server is a dispatch that succeeded,
	 * like a shell command exiting non-zero. */
	tool_call_succeed(tc, buf_steal(&text), structured, json_is_true(json_get(res, "isError")));
	tool_call_set_content(tc, content_whole(content, src));
	tool_call_set_meta(tc, result_meta(json_get(res, "_meta")));
	mcp_call_end(mc);
}

int mcp_on_message(struct mcp_provider *p, const char *line, size_t len, char **ret_why)
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
		return 0;	/* servers print junk at times: skip it */
	const struct json *msg = json_doc_root(doc);
	const char *src = json_doc_text(doc);
	const struct json *id = json_get(msg, "id");
	const char *method = json_str(json_get(msg, "method"));

	if (method) {
		/* A request or notification from the server. */
		if (str_eq(method, "notifications/tools/list_changed") && p->state == MCP_READY) {
			p->list_id = mcp_send_request(p, "tools/list", list_params, NULL);
		} else if (id) {
			struct buf out = {0};
			if (str_eq(method, "ping"))
				jrpc_write_result(&out, src + id->off, id->len, "{}", 2);
			else
				jrpc_write_error(&out, src + id->off, id->len, JRPC_METHOD_NOT_FOUND,
						 "toolcalld does not offer this to servers", NULL, 0);
			mcp_send_line(p, buf_head(&out));
			buf_free(&out);
		}
		json_doc_unref(doc);
		return 0;
	}
	int64_t n;
	if (!json_get_int(id, &n) || n <= 0) {
		json_doc_unref(doc);
		return 0;
	}
	uint64_t rid = (uint64_t)n;
	if (rid == p->init_id) {
		if (!json_get(msg, "result")) {
			const char *m = json_str(json_get(json_get(msg, "error"), "message"));
			*ret_why = xasprintf("MCP server '%s' refused initialize: %s", p->name, m ? m : "error");
			json_doc_unref(doc);
			return -EPROTO;
		}
		p->initialized = true;
		mcp_send_line(p, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}");
		p->list_id = mcp_send_request(p, "tools/list", list_params, NULL);
		/* Calls queued while it started go now. */
		struct list *pos, *tmp;
		list_foreach_safe(pos, tmp, &p->queued)
			mcp_send_call(p, list_entry(pos, struct mcp_call, node));
	} else if (rid == p->list_id) {
		const struct json *res = json_get(msg, "result");
		if (!res || !take_tools(p, res, src)) {
			json_doc_unref(doc);
			if (p->state != MCP_STARTING)
				return 0;
			*ret_why = xasprintf("MCP server '%s' did not list its tools", p->name);
			return -EPROTO;
		}
		const char *cursor = json_str(json_get(res, "nextCursor"));
		if (cursor && *cursor) {
			p->list_id = mcp_send_request(p, "tools/list", list_params, (void *)cursor);
		} else {
			mcp_imports_free(p->tools, p->n_tools);
			p->tools = TAKE_PTR(p->next_tools);
			p->n_tools = p->n_next;
			p->n_next = 0;
			p->imported = true;
			p->import_notes = buf_size(&p->notes);
			p->relisted = p->state == MCP_READY;
			p->state = MCP_READY;
			tc_timer_stop(p->import_timer);
			if (!p->parent)
				mcp_warn_unmatched(p);
			mcp_settle(p);
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
	return 0;
}
