/* SPDX-License-Identifier: MIT */
/*
 * proto/llm: tools, tool calls and tool results in the shapes OpenAI's Chat
 * Completions and Anthropic's Messages API use, read from and written to
 * messages as those APIs document them.
 */
#include <check.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "proto/base/buf.h"
#include "proto/base/util.h"
#include "proto/json.h"
#include "proto/llm.h"
#include "tests/unit/check_main.h"

/* An OpenAI chat completion that asks for a tool call (API reference). */
static const char openai_response[] =
	"{\"id\":\"chatcmpl-abc123\",\"object\":\"chat.completion\",\"created\":1699896916,"
	"\"model\":\"gpt-4o-mini\",\"choices\":[{\"index\":0,\"message\":{\"role\":\"assistant\","
	"\"content\":null,\"tool_calls\":[{\"id\":\"call_abc123\",\"type\":\"function\",\"function\":"
	"{\"name\":\"get_current_weather\",\"arguments\":\"{\\n\\\"location\\\": \\\"Boston, MA\\\"\\n}\"}},"
	"{\"id\":\"call_def456\",\"type\":\"function\",\"function\":{\"name\":\"read_file\","
	"\"arguments\":\"{\\\"path\\\":\\\"a.txt\\\"}\"}}]},\"logprobs\":null,\"finish_reason\":\"tool_calls\"}],"
	"\"usage\":{\"prompt_tokens\":82,\"completion_tokens\":17,\"total_tokens\":99}}";

/* An Anthropic message that asks for a tool call (Messages API docs). */
static const char anthropic_response[] =
	"{\"id\":\"msg_01Aq9w938a90dw8q\",\"model\":\"claude-opus-4-1-20250805\",\"stop_reason\":\"tool_use\","
	"\"role\":\"assistant\",\"content\":[{\"type\":\"text\",\"text\":\"I'll check the current weather in "
	"San Francisco for you.\"},{\"type\":\"tool_use\",\"id\":\"toolu_01A09q90qw90lq917835lq9\","
	"\"name\":\"get_weather\",\"input\":{\"location\":\"San Francisco, CA\",\"unit\":\"celsius\"}}]}";

static struct json_doc *parse(const char *text)
{
	struct json_doc *doc = NULL;
	struct json_err err;
	ck_assert_int_eq(json_parse(text, strlen(text), 0, 0, &doc, &err), 0);
	return doc;
}

START_TEST(openai_tool_calls_are_read)
{
	struct json_doc *doc = parse(openai_response);
	const struct json *msg = json_get(json_doc_root(doc), "choices")->u.arr.items[0];
	struct llm_call *calls = NULL;
	size_t n = 0;
	char *err = NULL;
	ck_assert_int_eq(llm_parse_calls(LLM_OPENAI, json_get(json_get(msg, "message"), "tool_calls"), 100,
					 &calls, &n, &err), 0);
	ck_assert_uint_eq(n, 2);
	ck_assert_str_eq(calls[0].id, "call_abc123");
	ck_assert_str_eq(calls[0].name, "get_current_weather");
	ck_assert_int_eq(calls[0].arguments->type, JSON_STRING);
	ck_assert_str_eq(json_str(calls[0].arguments), "{\n\"location\": \"Boston, MA\"\n}");
	ck_assert_str_eq(calls[1].name, "read_file");
	free(calls);
	json_doc_unref(doc);
}
END_TEST

START_TEST(anthropic_tool_use_blocks_are_read)
{
	struct json_doc *doc = parse(anthropic_response);
	struct llm_call *calls = NULL;
	size_t n = 0;
	char *err = NULL;
	ck_assert_int_eq(llm_parse_calls(LLM_ANTHROPIC, json_get(json_doc_root(doc), "content"), 100, &calls,
					 &n, &err), 0);
	ck_assert_uint_eq(n, 1);	/* the text block is skipped */
	ck_assert_str_eq(calls[0].id, "toolu_01A09q90qw90lq917835lq9");
	ck_assert_str_eq(calls[0].name, "get_weather");
	ck_assert_int_eq(calls[0].arguments->type, JSON_OBJECT);
	ck_assert_str_eq(json_str(json_get(calls[0].arguments, "unit")), "celsius");
	free(calls);
	json_doc_unref(doc);
}
END_TEST

/* Expects llm_parse_calls to refuse text with a message containing want. */
static void refused(enum llm_format f, const char *text, const char *want)
{
	struct json_doc *doc = parse(text);
	struct llm_call *calls = NULL;
	size_t n = 0;
	char *err = NULL;
	ck_assert_int_eq(llm_parse_calls(f, json_doc_root(doc), 2, &calls, &n, &err), -EINVAL);
	ck_assert_msg(strstr(err, want), "'%s' does not say '%s'", err, want);
	free(err);
	json_doc_unref(doc);
}

START_TEST(bad_calls_are_named)
{
	refused(LLM_OPENAI, "{}", "tool_calls array");
	refused(LLM_ANTHROPIC, "{}", "content array");
	refused(LLM_OPENAI, "[{\"type\":\"function\",\"function\":{\"name\":\"x\"}}]", "calls[0] id");
	refused(LLM_OPENAI, "[{\"id\":\"a\",\"type\":\"custom\",\"function\":{\"name\":\"x\"}}]", "type must be");
	refused(LLM_OPENAI, "[{\"id\":\"a\",\"function\":{\"name\":\"x\",\"arguments\":3}}]", "arguments");
	refused(LLM_ANTHROPIC, "[{\"type\":\"tool_use\",\"id\":\"a\",\"name\":\"x\",\"input\":[]}]", "input must be");
	refused(LLM_ANTHROPIC, "[{\"type\":\"tool_use\",\"id\":\"a\",\"name\":\"x\"},"
			       "{\"type\":\"tool_use\",\"id\":\"a\",\"name\":\"y\"}]", "used twice");
	refused(LLM_OPENAI, "[{\"id\":\"a\",\"function\":{\"name\":\"x\"}},{\"id\":\"b\",\"function\":{\"name\":\"x\"}},"
			    "{\"id\":\"c\",\"function\":{\"name\":\"x\"}}]", "at most 2");
}
END_TEST

/* Writes results in format f and compares with want. */
static void messages_are(enum llm_format f, const char *want)
{
	const struct llm_result r[] = {
		{ "call_1", "line one\nline \"two\"", false, NULL },
		{ "call_2", "File 'x' not found", true, NULL },
	};
	struct buf b = {0};
	struct jgen *g = jgen_new(&b);
	llm_write_messages(g, f, r, 2);
	jgen_free(g);
	buf_putc(&b, '\0');
	ck_assert_str_eq(buf_head(&b), want);
	buf_free(&b);
}

START_TEST(results_are_written_as_messages)
{
	messages_are(LLM_OPENAI,
		     "[{\"role\":\"tool\",\"tool_call_id\":\"call_1\",\"content\":\"line one\\nline \\\"two\\\"\"},"
		     "{\"role\":\"tool\",\"tool_call_id\":\"call_2\",\"content\":\"File 'x' not found\"}]");
	messages_are(LLM_ANTHROPIC,
		     "[{\"role\":\"user\",\"content\":[{\"type\":\"tool_result\",\"tool_use_id\":\"call_1\","
		     "\"content\":\"line one\\nline \\\"two\\\"\",\"is_error\":false},{\"type\":\"tool_result\","
		     "\"tool_use_id\":\"call_2\",\"content\":\"File 'x' not found\",\"is_error\":true}]}]");
}
END_TEST

/* Writes one result with content in format f and compares with want. */
static void image_message_is(enum llm_format f, const char *text, const char *content, const char *want)
{
	const struct llm_result r = { "call_1", text, false, content };
	struct buf b = {0};
	struct jgen *g = jgen_new(&b);
	llm_write_messages(g, f, &r, 1);
	jgen_free(g);
	buf_putc(&b, '\0');
	ck_assert_str_eq(buf_head(&b), want);
	buf_free(&b);
}

/* Images of a result: image blocks for Anthropic, a line for OpenAI; the
 * text is that of the content's text items (read_file's text, base64, is
 * not shown twice). */
START_TEST(results_with_images)
{
	static const char png[] = "[{\"type\":\"text\",\"text\":\"a dot\"},"
				  "{\"type\":\"image\",\"data\":\"iVBORw0KGgo=\",\"mimeType\":\"image/png\"},"
				  "{\"type\":\"image\",\"data\":\"PHN2Zz4=\",\"mimeType\":\"image/svg+xml\"}]";
	image_message_is(LLM_ANTHROPIC, "a dot", png,
			 "[{\"role\":\"user\",\"content\":[{\"type\":\"tool_result\",\"tool_use_id\":\"call_1\","
			 "\"content\":[{\"type\":\"text\",\"text\":\"a dot\\n[An image was returned: image/svg+xml, "
			 "5 bytes; this type cannot be shown to the model]\"},{\"type\":\"image\",\"source\":"
			 "{\"type\":\"base64\",\"media_type\":\"image/png\",\"data\":\"iVBORw0KGgo=\"}}],"
			 "\"is_error\":false}]}]");
	image_message_is(LLM_OPENAI, "a dot", png,
			 "[{\"role\":\"tool\",\"tool_call_id\":\"call_1\",\"content\":\"a dot\\n[An image was "
			 "returned: image/png, 8 bytes; this format's tool messages carry text only]\\n[An image was "
			 "returned: image/svg+xml, 5 bytes; this format's tool messages carry text only]\"}]");
	/* An image alone: no empty text block. */
	static const char alone[] = "[{\"type\":\"image\",\"data\":\"iVBORw0KGgo=\",\"mimeType\":\"image/png\"}]";
	image_message_is(LLM_ANTHROPIC, "iVBORw0KGgo=", alone,
			 "[{\"role\":\"user\",\"content\":[{\"type\":\"tool_result\",\"tool_use_id\":\"call_1\","
			 "\"content\":[{\"type\":\"image\",\"source\":{\"type\":\"base64\",\"media_type\":\"image/png\","
			 "\"data\":\"iVBORw0KGgo=\"}}],\"is_error\":false}]}]");
	/* Content without images: the text, as before. */
	image_message_is(LLM_OPENAI, "t", "[{\"type\":\"text\",\"text\":\"t\"}]",
			 "[{\"role\":\"tool\",\"tool_call_id\":\"call_1\",\"content\":\"t\"}]");
}
END_TEST

START_TEST(tools_are_written_as_each_provider_lists_them)
{
	struct buf b = {0};
	struct jgen *g = jgen_new(&b);
	llm_write_tool(g, LLM_OPENAI, "read_file", "Reads a file", "{\"type\":\"object\"}");
	jgen_free(g);
	buf_putc(&b, '\0');
	ck_assert_str_eq(buf_head(&b), "{\"type\":\"function\",\"function\":{\"name\":\"read_file\","
				       "\"description\":\"Reads a file\",\"parameters\":{\"type\":\"object\"}}}");
	buf_clear(&b);
	g = jgen_new(&b);
	llm_write_tool(g, LLM_ANTHROPIC, "read_file", "Reads a file", "{\"type\":\"object\"}");
	jgen_free(g);
	buf_putc(&b, '\0');
	ck_assert_str_eq(buf_head(&b), "{\"name\":\"read_file\",\"description\":\"Reads a file\","
				       "\"input_schema\":{\"type\":\"object\"}}");
	buf_free(&b);
	enum llm_format f;
	ck_assert_int_eq(llm_format_from_name("openai", &f), 0);
	ck_assert_int_eq(f, LLM_OPENAI);
	ck_assert_int_lt(llm_format_from_name("gemini", &f), 0);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("llm");
	TCase *tc = tcase_create("llm");
	tcase_add_test(tc, openai_tool_calls_are_read);
	tcase_add_test(tc, anthropic_tool_use_blocks_are_read);
	tcase_add_test(tc, bad_calls_are_named);
	tcase_add_test(tc, results_are_written_as_messages);
	tcase_add_test(tc, results_with_images);
	tcase_add_test(tc, tools_are_written_as_each_provider_lists_them);
	suite_add_tcase(s, tc);
	return run_suite(s);
}
