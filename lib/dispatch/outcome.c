/* SPDX-License-Identifier: MIT */
/*
 * Outcomes: made, referenced, freed, judged retryable, measured for the
 * idempotency cache, and handed to proto/mcp_result.c as plain values to
 * be written on the wire.
 */
#include "lib/dispatch/dispatch.h"

#include <stdarg.h>
#include <string.h>

#include "proto/json.h"
#include "proto/mcp_result.h"

struct outcome *outcome_new(enum tc_kind kind)
{
	struct outcome *o = xcalloc(1, sizeof(*o));
	o->refs = 1;
	o->kind = kind;
	return o;
}

struct outcome *outcome_error(enum tc_kind kind, const char *fmt, ...)
{
	struct outcome *o = outcome_new(kind);
	va_list ap;
	va_start(ap, fmt);
	o->message = xvasprintf(fmt, ap);
	va_end(ap);
	return o;
}

struct outcome *outcome_from_call(struct tool_call *tc)
{
	struct outcome *o = outcome_new(tc->kind);
	o->is_error = tc->is_error;
	o->text = TAKE_PTR(tc->text);
	o->text_json = TAKE_PTR(tc->text_json);
	o->structured = TAKE_PTR(tc->structured);
	o->content = TAKE_PTR(tc->content);
	o->meta = TAKE_PTR(tc->meta);
	o->message = TAKE_PTR(tc->message);
	o->error_data = TAKE_PTR(tc->error_data);
	o->files = TAKE_PTR(tc->files);
	o->n_files = tc->n_files;
	tc->n_files = 0;
	o->command = TAKE_PTR(tc->command);
	if (o->kind != TC_OK && !o->message)
		o->message = xstrdup("The tool failed without saying why");
	return o;
}

struct outcome *outcome_ref(struct outcome *o)
{
	if (o)
		o->refs++;
	return o;
}

struct outcome *outcome_unref(struct outcome *o)
{
	if (!o || --o->refs > 0)
		return NULL;
	free(o->text);
	free(o->text_json);
	free(o->structured);
	free(o->content);
	free(o->meta);
	free(o->message);
	free(o->error_data);
	free(o->call_id);
	free(o->tool);
	for (size_t i = 0; i < o->n_files; i++)
		free(o->files[i]);
	free(o->files);
	free(o->command);
	free(o);
	return NULL;
}

bool outcome_retryable(const struct outcome *o)
{
	if (o->kind == TC_TIMEOUT)
		return o->idempotent;
	return tc_kind_info(o->kind)->retryable;
}

size_t outcome_bytes(const struct outcome *o)
{
	size_t n = sizeof(*o);
	const char *const parts[] = { o->text, o->text_json, o->structured, o->content, o->meta, o->message, o->error_data,
				      o->call_id, o->tool, o->command };
	for (size_t i = 0; i < ELEMENTSOF(parts); i++)
		n += parts[i] ? strlen(parts[i]) + 1 : 0;
	for (size_t i = 0; i < o->n_files; i++)
		n += strlen(o->files[i]) + 1 + sizeof(char *);
	return n;
}

void outcome_write_result(const struct outcome *o, bool replayed, struct buf *out)
{
	mcp_write_result(&(struct mcp_result){
		.text = o->text,
		.text_json = o->text_json,
		.structured = o->structured,
		.content = o->content,
		.meta = o->meta,
		.is_error = o->is_error,
		.call_id = o->call_id,
		.attempts = o->attempts,
		.duration_ms = o->duration_ms,
		.replayed = replayed,
	}, out);
}

/* Whether extra (JSON object text) has a non-empty "errors" array. */
static bool has_errors(const struct json *root)
{
	const struct json *e = root && root->type == JSON_OBJECT ? json_get(root, "errors") : NULL;
	return e && e->type == JSON_ARRAY && e->u.arr.n > 0;
}

/* A validation_error always says which arguments were at fault in
 * data.errors (CONTRACT §4): when the tool named none, one entry with the
 * path "" and the message. Returns the data to write instead of
 * o->error_data (owned), or NULL to keep it. */
static char *validation_data(const struct outcome *o)
{
	if (o->kind != TC_VALIDATION_ERROR)
		return NULL;
	_cleanup_(json_doc_unrefp) struct json_doc *doc = NULL;
	const struct json *was = NULL;
	if (o->error_data && json_parse(o->error_data, strlen(o->error_data), 0, 0, &doc, NULL) == 0)
		was = json_doc_root(doc);
	if (has_errors(was))
		return NULL;
	struct buf b = {0};
	struct jgen *g = jgen_new(&b);
	jgen_obj_open(g);
	for (size_t i = 0; was && was->type == JSON_OBJECT && i < was->u.obj.n; i++) {
		if (str_eq(was->u.obj.members[i].key, "errors"))
			continue;
		jgen_key(g, was->u.obj.members[i].key);
		jgen_value(g, was->u.obj.members[i].value);
	}
	mcp_write_one_error(g, "", o->message ? o->message : "The arguments were refused");
	jgen_obj_close(g);
	jgen_free(g);
	return buf_steal(&b);
}

void outcome_write_error_data(const struct outcome *o, bool replayed, struct buf *out)
{
	_cleanup_free_ char *data = validation_data(o);
	mcp_write_error_data(&(struct mcp_error_data){
		.kind = tc_kind_name(o->kind),
		.retryable = outcome_retryable(o),
		.attempts = o->attempts,
		.duration_ms = o->duration_ms,
		.call_id = o->call_id,
		.tool = o->tool,
		.has_retry_after = o->kind == TC_CIRCUIT_OPEN,
		.retry_after_ms = o->retry_after_ms,
		.replayed = replayed,
		.extra = data ? data : o->error_data,
	}, out);
}
