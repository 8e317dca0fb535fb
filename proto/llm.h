/* SPDX-License-Identifier: MIT */
/*
 * The shapes model providers give tools and tool calls, for agent loops
 * that talk to them directly: OpenAI's Chat Completions (`tools` of type
 * "function", an assistant message's `tool_calls` with arguments as JSON
 * text, answered by `{"role": "tool"}` messages) and Anthropic's Messages
 * API (`tools` with `input_schema`, `tool_use` content blocks, answered by
 * one user message of `tool_result` blocks). Only the shapes live here;
 * running the calls is the daemon's.
 */
#ifndef TC_LLM_H
#define TC_LLM_H

#include <stdbool.h>
#include <stddef.h>

struct jgen;
struct json;

enum llm_format {
	LLM_MCP,
	LLM_OPENAI,
	LLM_ANTHROPIC,
};

/* "mcp", "openai" or "anthropic"; -EINVAL for anything else. */
int llm_format_from_name(const char *s, enum llm_format *ret);

/* Writes one tool as the provider lists it (not for LLM_MCP). */
void llm_write_tool(struct jgen *g, enum llm_format f, const char *name, const char *description,
		    const char *input_schema_json);

/* One tool call as the provider sent it; points into the parsed message. */
struct llm_call {
	const char *id;
	const char *name;
	const struct json *arguments;	/* OpenAI: a string of JSON text; Anthropic: an object */
};

/*
 * Reads the tool calls of an assistant message: OpenAI `tool_calls`
 * ([{id, type: "function", function: {name, arguments}}]) or Anthropic
 * content blocks ([{type: "tool_use", id, name, input}], other blocks such
 * as "text" skipped). At most max calls. Returns 0 with a malloc'd array,
 * or -EINVAL with a message saying which element is wrong.
 */
int llm_parse_calls(enum llm_format f, const struct json *calls, size_t max, struct llm_call **ret,
		    size_t *ret_n, char **ret_err);

/* How one call ended, for the model. */
struct llm_result {
	const char *id;
	const char *text;
	bool is_error;
	const char *content;	/* the result's MCP content array (JSON text), or NULL */
};

/*
 * Writes the messages to append to the conversation (a JSON array):
 * OpenAI one {role: "tool", tool_call_id, content} per call; Anthropic one
 * {role: "user", content: [{type: "tool_result", tool_use_id, content,
 * is_error}]}; in the calls' order. A result whose content holds images
 * ({type: "image", data, mimeType}) is told by the text of its content's
 * text items, and its images: for Anthropic as image blocks ({type:
 * "image", source: {type: "base64", media_type, data}}) after a text block
 * in the tool_result's content (JPEG, PNG, GIF and WebP; another type as
 * for OpenAI); for OpenAI, whose tool messages carry text, a line per
 * image ("[An image was returned: image/png, 1234 bytes ...]").
 */
void llm_write_messages(struct jgen *g, enum llm_format f, const struct llm_result *r, size_t n);

#endif
