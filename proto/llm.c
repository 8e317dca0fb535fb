/* SPDX-License-Identifier: MIT */
/*
 * OpenAI and Anthropic shapes of tools, tool calls and tool results (see
 * llm.h). Everything read here came from a client: each element is
 * checked and named in the message when it is wrong.
 */
#include "proto/llm.h"

#include <errno.h>
#include <string.h>

#include "proto/base/buf.h"
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

/* --- results with images --------------------------------------------------- */

#define LLM_CONTENT_DEPTH 16

/* The bytes base64 text of n characters holds. */
static size_t base64_bytes(const struct json *data)
{
	size_t n = data->u.str.len;
	size_t pad = n >= 1 && data->u.str.s[n - 1] == '=' ? (n >= 2 && data->u.str.s[n - 2] == '=' ? 2 : 1) : 0;
	return n / 4 * 3 - (n % 4 == 0 ? pad : 0);
}

/* True for an image item of content with a string data and mimeType. */
static bool image_item(const struct json *item)
{
	const struct json *data = json_get(item, "data"), *mime = json_get(item, "mimeType");
	return str_eq(json_str(json_get(item, "type")), "image") && data && data->type == JSON_STRING &&
	       plain_str(mime);
}

static bool anthropic_image_type(const char *mime)
{
	return str_eq(mime, "image/jpeg") || str_eq(mime, "image/png") || str_eq(mime, "image/gif") ||
	       str_eq(mime, "image/webp");
}

/* The text of a result whose content holds images: its text items, then
 * a line for each image that is not carried as a block. */
static void images_text(const struct json *content, bool anthropic, struct buf *out)
{
	for (size_t i = 0; i < content->u.arr.n; i++) {
		const struct json *item = content->u.arr.items[i];
		const struct json *t = json_get(item, "text");
		if (str_eq(json_str(json_get(item, "type")), "text") && t && t->type == JSON_STRING) {
			if (buf_size(out))
				buf_putc(out, '\n');
			buf_append(out, t->u.str.s, t->u.str.len);
		} else if (image_item(item) && !(anthropic && anthropic_image_type(json_str(json_get(item, "mimeType"))))) {
			if (buf_size(out))
				buf_putc(out, '\n');
			buf_printf(out, "[An image was returned: %s, %zu bytes; %s]", json_str(json_get(item, "mimeType")),
				   base64_bytes(json_get(item, "data")),
				   anthropic ? "this type cannot be shown to the model"
					     : "this format's tool messages carry text only");
		}
	}
}

/* The parsed content of r when it holds an image, else NULL. */
static struct json_doc *content_with_images(const struct llm_result *r)
{
	struct json_doc *doc = NULL;
	if (!r->content || json_parse(r->content, strlen(r->content), 0, LLM_CONTENT_DEPTH, &doc, NULL) < 0)
		return NULL;
	const struct json *c = json_doc_root(doc);
	for (size_t i = 0; c->type == JSON_ARRAY && i < c->u.arr.n; i++)
		if (image_item(c->u.arr.items[i]))
			return doc;
	json_doc_unref(doc);
	return NULL;
}

/* Writes a tool_result's content: its text, or blocks with its images. */
static void write_anthropic_content(struct jgen *g, const struct llm_result *r)
{
	struct json_doc *doc = content_with_images(r);
	if (!doc) {
		jgen_kv_str(g, "content", r->text);
		return;
	}
	const struct json *c = json_doc_root(doc);
	struct buf text = {0};
	images_text(c, true, &text);
	jgen_key(g, "content");
	jgen_arr_open(g);
	if (buf_size(&text)) {	/* an empty text block is refused */
		jgen_obj_open(g);
		jgen_kv_str(g, "type", "text");
		jgen_key(g, "text");
		jgen_strn(g, buf_head(&text), buf_size(&text));
		jgen_obj_close(g);
	}
	for (size_t i = 0; i < c->u.arr.n; i++) {
		const struct json *item = c->u.arr.items[i];
		const char *mime = json_str(json_get(item, "mimeType"));
		if (!image_item(item) || !anthropic_image_type(mime))
			continue;
		const struct json *data = json_get(item, "data");
		jgen_obj_open(g);
		jgen_kv_str(g, "type", "image");
		jgen_key(g, "source");
		jgen_obj_open(g);
		jgen_kv_str(g, "type", "base64");
		jgen_kv_str(g, "media_type", mime);
		jgen_key(g, "data");
		jgen_strn(g, data->u.str.s, data->u.str.len);
		jgen_obj_close(g);
		jgen_obj_close(g);
	}
	jgen_arr_close(g);
	buf_free(&text);
	json_doc_unref(doc);
}

/* Writes an OpenAI tool message's content: its text, with a line per image. */
static void write_openai_content(struct jgen *g, const struct llm_result *r)
{
	struct json_doc *doc = content_with_images(r);
	if (!doc) {
		jgen_kv_str(g, "content", r->text);
		return;
	}
	struct buf text = {0};
	images_text(json_doc_root(doc), false, &text);
	jgen_key(g, "content");
	jgen_strn(g, buf_size(&text) ? buf_head(&text) : "", buf_size(&text));
	buf_free(&text);
	json_doc_unref(doc);
}

void llm_write_messages(struct jgen *g, enum llm_format f, const struct llm_result *r, size_t n)
{
	jgen_arr_open(g);
	if (f == LLM_OPENAI) {
		for (size_t i = 0; i < n; i++) {
			jgen_obj_open(g);
			jgen_kv_str(g, "role", "tool");
			jgen_kv_str(g, "tool_call_id", r[i].id);
			write_openai_content(g, &r[i]);
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
			write_anthropic_content(g, &r[i]);
			jgen_kv_bool(g, "is_error", r[i].is_error);
			jgen_obj_close(g);
		}
		jgen_arr_close(g);
		jgen_obj_close(g);
	}
	jgen_arr_close(g);
}
