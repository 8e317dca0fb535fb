/* SPDX-License-Identifier: MIT */
/*
 * OpenAI and Anthropic shapes of tools, tool calls and tool results (see
 * llm.h). Everything read here came from a client: each element is
 * checked and named in the message when it is wrong.
 */
#include "proto/llm.h"

#include <errno.h>
#include <string.h>

#include "proto/base/util.h"
#include "proto/json.h"

static const struct {
	const char *name;
	enum llm_format f;
} formats[] = {
	{ "mcp", LLM_MCP },
	{ "openai", LLM_OPENAI },
	{ "anthropic", LLM_ANTHROPIC },
};

int llm_format_from_name(const char *s, enum llm_format *ret)
{
	for (size_t i = 0; s && i < ELEMENTSOF(formats); i++)
		if (str_eq(s, formats[i].name)) {
			*ret = formats[i].f;
			return 0;
		}
	return -EINVAL;
}

void llm_write_tool(struct jgen *g, enum llm_format f, const char *name, const char *description,
		    const char *input_schema_json)
{
	jgen_obj_open(g);
	if (f == LLM_OPENAI) {
		jgen_kv_str(g, "type", "function");
		jgen_key(g, "function");
		jgen_obj_open(g);
		jgen_kv_str(g, "name", name);
		jgen_kv_str(g, "description", description ? description : "");
		jgen_kv_raw(g, "parameters", input_schema_json, strlen(input_schema_json));
		jgen_obj_close(g);
	} else {
		jgen_kv_str(g, "name", name);
		jgen_kv_str(g, "description", description ? description : "");
		jgen_kv_raw(g, "input_schema", input_schema_json, strlen(input_schema_json));
	}
	jgen_obj_close(g);
}

/* A non-empty string without NUL bytes, or NULL. */
static const char *plain_str(const struct json *v)
{
	const char *s = json_str(v);
	return s && v->u.str.len > 0 && strlen(s) == v->u.str.len ? s : NULL;
}

/* Reads one OpenAI tool call. */
static const char *openai_call(const struct json *v, struct llm_call *c)
{
	const struct json *fn = json_get(v, "function");
	const char *type = json_str(json_get(v, "type"));
	if (v->type != JSON_OBJECT)
		return "is not an object";
	if (!(c->id = plain_str(json_get(v, "id"))))
		return "id must be a non-empty string";
	if (type && !str_eq(type, "function"))
		return "type must be \"function\"";
	if (!fn || fn->type != JSON_OBJECT)
		return "function must be an object with name and arguments";
	if (!(c->name = plain_str(json_get(fn, "name"))))
		return "function.name must be a non-empty string";
	c->arguments = json_get(fn, "arguments");
	if (c->arguments && c->arguments->type != JSON_STRING && c->arguments->type != JSON_OBJECT)
		return "function.arguments must be a string holding JSON text";
	return NULL;
}

/* Reads one Anthropic content block; false for a block that is not a
 * tool call (text, thinking ...). */
static bool anthropic_block(const struct json *v, struct llm_call *c, const char **why)
{
	*why = NULL;
	if (v->type != JSON_OBJECT) {
		*why = "is not an object";
		return true;
	}
	if (!str_eq(json_str(json_get(v, "type")), "tool_use"))
		return false;
	if (!(c->id = plain_str(json_get(v, "id"))))
		*why = "id must be a non-empty string";
	else if (!(c->name = plain_str(json_get(v, "name"))))
		*why = "name must be a non-empty string";
	else if ((c->arguments = json_get(v, "input")) && c->arguments->type != JSON_OBJECT)
		*why = "input must be an object";
	return true;
}

int llm_parse_calls(enum llm_format f, const struct json *calls, size_t max, struct llm_call **ret,
		    size_t *ret_n, char **ret_err)
{
	if (!calls || calls->type != JSON_ARRAY) {
		*ret_err = xstrdup(f == LLM_OPENAI ? "calls must be the assistant message's tool_calls array"
						   : "calls must be the assistant message's content array");
		return -EINVAL;
	}
	_cleanup_free_ struct llm_call *v = xcalloc(calls->u.arr.n ? calls->u.arr.n : 1, sizeof(*v));
	size_t n = 0;
	for (size_t i = 0; i < calls->u.arr.n; i++) {
		const struct json *e = calls->u.arr.items[i];
		const char *why = NULL;
		if (f == LLM_OPENAI)
			why = openai_call(e, &v[n]);
		else if (!anthropic_block(e, &v[n], &why))
			continue;
		if (why) {
			*ret_err = xasprintf("calls[%zu] %s", i, why);
			return -EINVAL;
		}
		for (size_t j = 0; j < n; j++)
			if (str_eq(v[j].id, v[n].id)) {
				*ret_err = xasprintf("calls[%zu]: id '%s' is used twice", i, v[n].id);
				return -EINVAL;
			}
		if (++n > max) {
			*ret_err = xasprintf("at most %zu tool calls per message", max);
			return -EINVAL;
		}
	}
	*ret_n = n;
	*ret = TAKE_PTR(v);
	return 0;
}

void llm_write_messages(struct jgen *g, enum llm_format f, const struct llm_result *r, size_t n)
{
	jgen_arr_open(g);
	if (f == LLM_OPENAI) {
		for (size_t i = 0; i < n; i++) {
			jgen_obj_open(g);
			jgen_kv_str(g, "role", "tool");
			jgen_kv_str(g, "tool_call_id", r[i].id);
			jgen_kv_str(g, "content", r[i].text);
			jgen_obj_close(g);
		}
	} else if (n > 0) {
		jgen_obj_open(g);
		jgen_kv_str(g, "role", "user");
		jgen_key(g, "content");
		jgen_arr_open(g);
		for (size_t i = 0; i < n; i++) {
			jgen_obj_open(g);
			jgen_kv_str(g, "type", "tool_result");
			jgen_kv_str(g, "tool_use_id", r[i].id);
			jgen_kv_str(g, "content", r[i].text);
			jgen_kv_bool(g, "is_error", r[i].is_error);
			jgen_obj_close(g);
		}
		jgen_arr_close(g);
		jgen_obj_close(g);
	}
	jgen_arr_close(g);
}
