/* SPDX-License-Identifier: MIT */
/*
 * The MCP tools/call answer on the wire. A success is answered on the hot
 * path, so its CallResult (whose shape is fixed) is written directly, the
 * same bytes the generator would write, with its size reserved at once. The
 * error data object goes through the generator, the tool's extra members
 * included (parsed, then written member by member).
 */
#include "proto/mcp_result.h"

#include <string.h>

#include "proto/base/buf.h"
#include "proto/json.h"
#include "proto/base/util.h"

DEFINE_CLEANUP_FUNC(struct jgen, jgen_free)

/* Writes the text of the one text item: the text, else structuredContent. */
static void write_text_item(const struct mcp_result *r, size_t text_len, size_t struct_len, struct buf *out)
{
	if (r->text_json)
		buf_append(out, r->text_json, text_len);
	else if (r->text)
		json_quote_utf8(out, r->text, text_len);
	else if (r->structured)
		json_quote_utf8(out, r->structured, struct_len);
	else
		buf_puts(out, "\"\"");
}

void mcp_write_result(const struct mcp_result *r, struct buf *out)
{
	size_t text_len = r->text_json ? strlen(r->text_json) : r->text ? strlen(r->text) : 0;
	size_t struct_len = r->structured ? strlen(r->structured) : 2;
	size_t content_len = r->content ? strlen(r->content) : 0;
	buf_reserve(out, (r->content ? content_len : text_len + text_len / 8) + struct_len + 256);
	if (r->content) {
		/* Images and what else the tool gave, as it gave them. */
		buf_puts(out, "{\"content\":");
		buf_append(out, r->content, content_len);
		buf_puts(out, ",\"structuredContent\":");
	} else {
		buf_puts(out, "{\"content\":[{\"type\":\"text\",\"text\":");
		write_text_item(r, text_len, struct_len, out);
		buf_puts(out, "}],\"structuredContent\":");
	}
	if (r->structured)
		buf_append(out, r->structured, struct_len);
	else
		buf_puts(out, "{}");
	buf_puts(out, r->is_error ? ",\"isError\":true" : ",\"isError\":false");
	buf_puts(out, ",\"_meta\":{\"toolcalld/callId\":");
	json_quote_utf8(out, r->call_id ? r->call_id : "", r->call_id ? strlen(r->call_id) : 0);
	buf_puts(out, ",\"toolcalld/attempts\":");
	buf_put_u64(out, r->attempts);
	buf_puts(out, ",\"toolcalld/durationMs\":");
	buf_put_u64(out, r->duration_ms);
	buf_puts(out, r->replayed ? ",\"toolcalld/replayed\":true" : ",\"toolcalld/replayed\":false");
	size_t meta_len = r->meta ? strlen(r->meta) : 0;
	if (meta_len > 2 && r->meta[0] == '{' && r->meta[meta_len - 1] == '}') {
		/* The tool's own members follow ours. */
		buf_putc(out, ',');
		buf_append(out, r->meta + 1, meta_len - 2);
	}
	buf_puts(out, "}}");
}

/* Writes the members of extra, a JSON object text, into the open object;
 * anything else adds nothing. */
static void write_extra_members(struct jgen *g, const char *extra)
{
	_cleanup_(json_doc_unrefp) struct json_doc *doc = NULL;
	if (!extra || json_parse(extra, strlen(extra), 0, 0, &doc, NULL) < 0)
		return;
	const struct json *root = json_doc_root(doc);
	if (root->type != JSON_OBJECT)
		return;
	for (size_t i = 0; i < root->u.obj.n; i++) {
		jgen_key(g, root->u.obj.members[i].key);
		jgen_value(g, root->u.obj.members[i].value);
	}
}

void mcp_write_one_error(struct jgen *g, const char *path, const char *message)
{
	jgen_key(g, "errors");
	jgen_arr_open(g);
	jgen_obj_open(g);
	jgen_kv_str(g, "path", path);
	jgen_kv_str(g, "message", message);
	jgen_obj_close(g);
	jgen_arr_close(g);
}

void mcp_write_error_data(const struct mcp_error_data *e, struct buf *out)
{
	_cleanup_(jgen_freep) struct jgen *g = jgen_new(out);
	jgen_obj_open(g);
	jgen_kv_str(g, "kind", e->kind);
	jgen_kv_bool(g, "retryable", e->retryable);
	jgen_kv_int(g, "attempts", (int64_t)e->attempts);
	jgen_kv_int(g, "durationMs", (int64_t)e->duration_ms);
	jgen_kv_str(g, "callId", e->call_id);
	jgen_kv_str(g, "tool", e->tool);
	if (e->has_retry_after)
		jgen_kv_int(g, "retryAfterMs", (int64_t)e->retry_after_ms);
	if (e->replayed)
		jgen_kv_bool(g, "replayed", true);
	write_extra_members(g, e->extra);
	jgen_obj_close(g);
}
