/* SPDX-License-Identifier: MIT */
/*
 * Tools and tool calls: construction of registered tools from definitions,
 * and the functions tool bodies use to report their outcome.
 */
#include "lib/tool.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "lib/schema/schema.h"
#include "proto/json.h"
#include "proto/mcp_result.h"

const char *const side_effect_names[SIDE_MAX + 1] = {
	[SIDE_NONE] = "none",
	[SIDE_READ] = "read",
	[SIDE_WRITE] = "write",
	[SIDE_EXECUTE] = "execute",
	[SIDE_NETWORK] = "network",
	NULL,
};

const char *side_effect_name(enum side_effect s)
{
	return (unsigned)s < SIDE_MAX ? side_effect_names[s] : "?";
}

int side_effect_from_name(const char *s)
{
	for (int i = 0; i < SIDE_MAX; i++)
		if (s && strcmp(side_effect_names[i], s) == 0)
			return i;
	return -1;
}

uint32_t tool_default_timeout(enum side_effect s)
{
	return s >= SIDE_EXECUTE ? 600000 : 60000;
}

bool tool_name_valid(const char *s, size_t n)
{
	if (!s || n == 0 || n > TOOL_NAME_MAX)
		return false;
	for (size_t i = 0; i < n; i++) {
		char ch = s[i];
		if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
		      ch == '_' || ch == '-' || ch == '.'))
			return false;
	}
	return true;
}

int tool_new(const struct tool_def *def, const char *name, const char *description,
	     const char *input_schema, void *priv, struct tool **ret, char **ret_err)
{
	struct schema *schema = NULL;
	int r = schema_compile_text(input_schema, strlen(input_schema), &schema, ret_err);
	if (r < 0)
		return r;

	struct tool *t = xcalloc(1, sizeof(*t));
	t->refs = 1;
	t->def = def;
	t->name = xstrdup(name);
	t->description = xstrdup(description ? description : "");
	t->input_schema = xstrdup(input_schema);
	t->schema = schema;
	t->side_effects = def->side_effects;
	t->idempotent = def->idempotent;
	t->timeout_ms = def->timeout_ms ? def->timeout_ms : tool_default_timeout(def->side_effects);
	t->priv = priv;
	t->source = xstrdup("built-in");
	*ret = t;
	return 0;
}

struct tool *tool_ref(struct tool *t)
{
	if (t)
		t->refs++;
	return t;
}

struct tool *tool_unref(struct tool *t)
{
	if (!t || --t->refs > 0)
		return NULL;
	if (t->def && t->def->priv_free && t->priv)
		t->def->priv_free(t->priv);
	schema_free(t->schema);
	free(t->name);
	free(t->description);
	free(t->input_schema);
	free(t->fingerprint);
	free(t->source);
	free(t);
	return NULL;
}

void tool_call_succeed(struct tool_call *c, char *text, char *structured, bool is_error)
{
	free(c->text);
	free(c->structured);
	c->kind = TC_OK;
	c->is_error = is_error;
	c->text = text;
	c->structured = structured;
}

void tool_call_set_content(struct tool_call *c, char *content)
{
	free(c->content);
	c->content = content;
}

void tool_call_set_meta(struct tool_call *c, char *meta)
{
	free(c->meta);
	c->meta = meta;
}

void tool_call_set_text_json(struct tool_call *c, char *literal)
{
	free(c->text_json);
	c->text_json = literal;
}

static void fail_v(struct tool_call *c, enum tc_kind kind, char *data, const char *fmt, va_list ap)
{
	free(c->message);
	free(c->error_data);
	c->kind = kind == TC_OK ? TC_INTERNAL : kind;
	c->message = xvasprintf(fmt, ap);
	c->error_data = data;
}

void tool_call_fail(struct tool_call *c, enum tc_kind kind, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fail_v(c, kind, NULL, fmt, ap);
	va_end(ap);
}

void tool_call_fail_data(struct tool_call *c, enum tc_kind kind, char *data, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fail_v(c, kind, data, fmt, ap);
	va_end(ap);
}

/* validation_error naming arg in data.errors; with prefix the message
 * reads "Invalid arguments for 'tool': /arg: what", else it is what. */
static void invalid_v(struct tool_call *c, const char *arg, bool prefix, const char *fmt, va_list ap)
{
	_cleanup_free_ char *what = xvasprintf(fmt, ap);
	/* The argument as a JSON pointer: "/name", "~" and "/" escaped. */
	struct buf path = {0};
	if (arg && *arg) {
		buf_putc(&path, '/');
		for (const char *p = arg; *p; p++)
			if (*p == '~')
				buf_puts(&path, "~0");
			else if (*p == '/')
				buf_puts(&path, "~1");
			else
				buf_putc(&path, *p);
	}
	buf_putc(&path, '\0');
	struct buf data = {0};
	struct jgen *g = jgen_new(&data);
	jgen_obj_open(g);
	mcp_write_one_error(g, buf_head(&path), what);
	jgen_obj_close(g);
	jgen_free(g);
	const char *name = c->tool && c->tool->name ? c->tool->name : "?";
	if (!prefix)
		tool_call_fail_data(c, TC_VALIDATION_ERROR, buf_steal(&data), "%s", what);
	else if (*buf_head(&path))
		tool_call_fail_data(c, TC_VALIDATION_ERROR, buf_steal(&data), "Invalid arguments for '%s': %s: %s", name,
				    buf_head(&path), what);
	else
		tool_call_fail_data(c, TC_VALIDATION_ERROR, buf_steal(&data), "Invalid arguments for '%s': %s", name,
				    what);
	buf_free(&path);
}

void tool_call_invalid(struct tool_call *c, const char *arg, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	invalid_v(c, arg, true, fmt, ap);
	va_end(ap);
}

void tool_call_invalid_msg(struct tool_call *c, const char *arg, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	invalid_v(c, arg, false, fmt, ap);
	va_end(ap);
}

void tool_call_finish(struct tool_call *c)
{
	c->done = true;
	if (c->on_finish)
		c->on_finish(c);
}

void tool_call_release_slot(struct tool_call *c)
{
	if (c->release_slot)
		c->release_slot(c);
}

void tool_call_acts(struct tool_call *c)
{
	if (c->acts)
		c->acts(c);
}

void tool_call_output(struct tool_call *c, const char *stream, const char *data, size_t n)
{
	if (c->on_output && n)
		c->on_output(c, stream, data, n);
}

void tool_call_note_file(struct tool_call *c, const char *path)
{
	c->files = xreallocarray(c->files, c->n_files + 1, sizeof(*c->files));
	c->files[c->n_files++] = xstrdup(path);
}

void tool_call_note_command(struct tool_call *c, const char *command)
{
	free(c->command);
	c->command = xstrdup(command);
}

void tool_call_clear(struct tool_call *c)
{
	free(c->text);
	free(c->text_json);
	free(c->structured);
	free(c->content);
	free(c->message);
	free(c->error_data);
	free(c->meta);
	c->meta = NULL;
	for (size_t i = 0; i < c->n_files; i++)
		free(c->files[i]);
	free(c->files);
	free(c->command);
	c->text = c->text_json = c->structured = c->content = c->message = c->error_data = c->command = NULL;
	c->files = NULL;
	c->n_files = 0;
	c->kind = TC_OK;
	c->is_error = false;
	c->refused = false;
	c->done = false;
}
