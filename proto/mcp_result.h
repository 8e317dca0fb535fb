/* SPDX-License-Identifier: MIT */
/*
 * The MCP tools/call answer on the wire: the CallResult object of a success
 * (content, structuredContent, isError, _meta) and the data object of an
 * error (kind, retryable, attempts, ... and the tool's own members). The
 * writers take plain values, so the shape lives here with the rest of the
 * protocol and knows nothing of the dispatcher.
 */
#ifndef TC_MCP_RESULT_H
#define TC_MCP_RESULT_H

#include <stdbool.h>
#include <stdint.h>

struct buf;

struct mcp_result {
	const char *text;		/* the text content, or NULL */
	const char *text_json;		/* the same already as a JSON string literal, or NULL */
	const char *structured;		/* JSON object text, or NULL ({}) */
	const char *content;		/* the content array (JSON text) in place of the text item, or NULL */
	const char *meta;		/* the tool's own members of _meta: an object's text, "{...}"
					 * without spaces around its braces, or NULL */
	bool is_error;
	const char *call_id;
	uint64_t attempts;
	uint64_t duration_ms;
	bool replayed;
};

struct mcp_error_data {
	const char *kind;
	bool retryable;
	uint64_t attempts;
	uint64_t duration_ms;
	const char *call_id;
	const char *tool;
	bool has_retry_after;
	uint64_t retry_after_ms;
	bool replayed;
	const char *extra;		/* more members: JSON object text, or NULL */
};

/* Writes the CallResult object of a successful call. */
void mcp_write_result(const struct mcp_result *r, struct buf *out);
/* Writes the data object of a failed call; extra's members follow ours. */
void mcp_write_error_data(const struct mcp_error_data *e, struct buf *out);
struct jgen;
/* Writes the member "errors" of a validation_error's data, with one entry
 * {path, message} (path: a JSON pointer into the arguments, "" for none). */
void mcp_write_one_error(struct jgen *g, const char *path, const char *message);

#endif
