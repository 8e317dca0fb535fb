/* SPDX-License-Identifier: MIT */
/*
 * Images as MCP image content: read_file with encoding "base64" of a whole
 * PNG, JPEG, GIF or WebP (told by its first bytes) answers {type: "image",
 * data, mimeType}; anything else, or a part of an image, stays text. What
 * an MCP server answers passes through byte for byte (every content type,
 * annotations, _meta, structuredContent), image items checked; its tools'
 * readOnlyHint and destructiveHint are shown, and trusted where its file
 * says so.
 */
#include <check.h>
#include <string.h>

#include "proto/base64.h"
#include "tests/integ/harness.h"
#include "tests/integ/mcp_server.h"
#include "tests/unit/check_main.h"

static const struct {
	const char *file;
	const char *bytes;
	size_t len;
	const char *mime;
} images[] = {
	{ "a.png", "\x89PNG\r\n\x1a\n\0\0\0\rIHDR", 16, "image/png" },
	{ "b.jpg", "\xff\xd8\xff\xe0\0\x10JFIF", 10, "image/jpeg" },
	{ "c.gif", "GIF89a\x01\0\x01\0", 10, "image/gif" },
	{ "d.webp", "RIFF\x24\0\0\0WEBPVP8 ", 16, "image/webp" },
	{ "e.bin", "\x89PNX\r\n\x1a\n\0\0", 10, NULL },
};

START_TEST(read_file_images)
{
	struct tcd d;
	tcd_start(&d, NULL);
	struct tcc *c = tcc_connect(&d);
	for (size_t i = 0; i < ELEMENTSOF(images); i++) {
		free(tcd_write_ws(&d, images[i].file, images[i].bytes, images[i].len, 0644));
		struct buf b64 = {0};
		base64_encode(images[i].bytes, images[i].len, &b64);
		const struct json *r = tcc_call(c, "read_file", tcc_fmt(c, "{\"path\":\"%s\",\"encoding\":\"base64\"}",
									images[i].file));
		tc_assert_ok(r);
		ck_assert_str_eq(tj_str(r, "result.structuredContent.content"), buf_head(&b64));
		if (images[i].mime) {
			ck_assert_str_eq(tj_str(r, "result.content.0.type"), "image");
			ck_assert_str_eq(tj_str(r, "result.content.0.data"), buf_head(&b64));
			ck_assert_str_eq(tj_str(r, "result.content.0.mimeType"), images[i].mime);
			ck_assert_str_eq(tj_str(r, "result.structuredContent.mimeType"), images[i].mime);
		} else {
			ck_assert_str_eq(tj_str(r, "result.content.0.type"), "text");
			ck_assert(!tj_has(r, "result.structuredContent.mimeType"));
		}
		buf_free(&b64);
	}
	/* Part of an image is no image; read as text, a whole one is shown. */
	const struct json *r = tcc_call(c, "read_file", "{\"path\":\"a.png\",\"encoding\":\"base64\",\"limit\":8}");
	tc_assert_ok(r);
	ck_assert_str_eq(tj_str(r, "result.content.0.type"), "text");
	r = tcc_call(c, "read_file", "{\"path\":\"a.png\"}");
	tc_assert_ok(r);
	ck_assert_str_eq(tj_str(r, "result.content.0.type"), "image");
	tcc_close(c);
	tcd_finish(&d);
}
END_TEST

START_TEST(provider_images_pass_through)
{
	struct tcd d;
	tcd_prepare(&d, &(struct tcd_opts){ 0 });
	char *decl = xasprintf("{\"name\":\"demo\",\"kind\":\"mcp\",\"command\":[\"%s\"],\"prefix\":\"demo_\","
			       "\"side_effects\":\"read\",\"sandbox\":{\"limits\":{\"memory_mb\":null}}}",
			       getenv("TC_MCP_SERVER"));
	tcd_write_tool(&d, "demo.json", decl);
	free(decl);
	tcd_spawn(&d, &(struct tcd_opts){ 0 });
	ck_assert_int_eq(tcd_wait_socket(&d, d.sock, 5000), 0);
	struct tcc *c = tcc_connect(&d);
	const struct json *r = tcc_call(c, "demo_image", "{}");
	tc_assert_ok(r);
	ck_assert_str_eq(tj_str(r, "result.content.0.type"), "text");
	ck_assert_str_eq(tj_str(r, "result.content.0.text"), "a dot");
	ck_assert_str_eq(tj_str(r, "result.content.1.type"), "image");
	ck_assert_str_eq(tj_str(r, "result.content.1.data"), "iVBORw0KGgo=");
	ck_assert_str_eq(tj_str(r, "result.content.1.mimeType"), "image/png");
	/* An image whose data is not base64 is left out, saying so. */
	r = tcc_call(c, "demo_badimage", "{}");
	tc_assert_ok(r);
	ck_assert_str_eq(tj_str(r, "result.content.0.type"), "text");
	ck_assert(strstr(tj_str(r, "result.content.0.text"), "left out: its data is not base64"));
	/* Text only: one text item, as before. */
	r = tcc_call(c, "demo_echo", "{\"text\":\"plain\"}");
	ck_assert_str_eq(tj_str(r, "result.content.0.text"), "plain");
	ck_assert_int_eq(tj_len(r, "result.content"), 1);
	tcc_close(c);
	tcd_finish(&d);
}
END_TEST

/* Starts the daemon with the test server as provider "demo" (side effects
 * "execute", more keys in extra). */
static void start_demo(struct tcd *d, const char *extra)
{
	static const char cfg[] = "{\"confirmation\":{\"default\":{\"execute\":\"auto\"}}}";
	tcd_prepare(d, &(struct tcd_opts){ .config = cfg });
	char *decl = xasprintf("{\"name\":\"demo\",\"kind\":\"mcp\",\"command\":[\"%s\"],\"prefix\":\"demo_\","
			       "\"side_effects\":\"execute\",\"sandbox\":{\"limits\":{\"memory_mb\":null}}%s%s}",
			       getenv("TC_MCP_SERVER"), extra ? "," : "", extra ? extra : "");
	tcd_write_tool(d, "demo.json", decl);
	free(decl);
	tcd_spawn(d, &(struct tcd_opts){ .config = cfg });
	ck_assert_int_eq(tcd_wait_socket(d, d->sock, 5000), 0);
}

/* The tools/list entry of a tool. */
static const struct json *listed(const struct json *r, const char *name)
{
	const struct json *tools = tj(r, "result.tools");
	for (size_t i = 0; tools && i < tools->u.arr.n; i++)
		if (str_eq(json_str(json_get(tools->u.arr.items[i], "name")), name))
			return tools->u.arr.items[i];
	ck_abort_msg("%s is not listed", name);
	return NULL;
}

/* Every content type, with annotations and _meta, and structuredContent
 * reach the client byte for byte. */
START_TEST(provider_content_passes_through_whole)
{
	struct tcd d;
	start_demo(&d, NULL);
	struct tcc *c = tcc_connect(&d);
	const struct json *r = tcc_call(c, "demo_content", "{}");
	tc_assert_ok(r);
	ck_assert_str_eq(tcc_raw(c, tj(r, "result.content")), MCP_CONTENT_ITEMS);
	ck_assert_str_eq(tcc_raw(c, tj(r, "result.structuredContent")), MCP_CONTENT_STRUCTURED);
	/* The result's _meta: the server's own members after the daemon's,
	 * which the server cannot forge. */
	ck_assert_str_eq(tj_str(r, "result._meta.x/trace"), "t-1");
	const char *meta = tcc_raw(c, tj(r, "result._meta"));
	ck_assert_msg(!strstr(meta, "forged") && strstr(meta, "\"toolcalld/callId\":\"c-") &&
		      strstr(meta, "\"x/trace\":\"t-1\"}"), "%s", meta);
	ck_assert(!tj_bool(r, "result.isError"));
	tcc_close(c);
	tcd_finish(&d);
}
END_TEST

/* A provider's readOnlyHint and destructiveHint are shown in tools/list;
 * they set side effects only where the file trusts them. */
START_TEST(provider_annotations)
{
	/* Not trusted; trusted; trusted, with the file's word for one tool. */
	static const char *const extra[] = {
		NULL, "\"trust_annotations\":true",
		"\"trust_annotations\":true,\"tools\":{\"content\":{\"side_effects\":\"network\"}}",
	};
	static const char *const content_side[] = { "execute", "read", "network" };
	for (int k = 0; k < 3; k++) {
		bool trust = k > 0;
		struct tcd d;
		start_demo(&d, extra[k]);
		struct tcc *c = tcc_connect(&d);
		const struct json *r = tcc_request(c, "tools/list", "{}");
		const struct json *t = listed(r, "demo_content");
		ck_assert(tj_bool(t, "annotations.readOnlyHint"));
		ck_assert_str_eq(tj_str(t, "_meta.toolcalld/sideEffects"), content_side[k]);
		t = listed(r, "demo_nondestructive");
		ck_assert(!tj_bool(t, "annotations.readOnlyHint") && !tj_bool(t, "annotations.destructiveHint"));
		ck_assert_str_eq(tj_str(t, "_meta.toolcalld/sideEffects"), trust ? "write" : "execute");
		t = listed(r, "demo_destructive");
		ck_assert(tj_bool(t, "annotations.destructiveHint"));
		ck_assert_str_eq(tj_str(t, "_meta.toolcalld/sideEffects"), "execute");
		/* Without hints: from its side effects, as for every tool. */
		t = listed(r, "demo_echo");
		ck_assert(!tj_bool(t, "annotations.readOnlyHint") && tj_bool(t, "annotations.destructiveHint"));
		tcc_close(c);
		tcd_finish(&d);
	}
}
END_TEST

/* tools/dispatch carries images: Anthropic image blocks in the
 * tool_result's content, a line per image for OpenAI. */
START_TEST(dispatch_carries_images)
{
	struct tcd d;
	start_demo(&d, NULL);
	free(tcd_write_ws(&d, images[0].file, images[0].bytes, images[0].len, 0644));
	struct buf b64 = {0};
	base64_encode(images[0].bytes, images[0].len, &b64);
	struct tcc *c = tcc_connect(&d);
	/* No tools/list first: the dispatch starts the provider and waits. */
	const struct json *r = tcc_request(c, "tools/dispatch",
		"{\"format\":\"anthropic\",\"calls\":["
		"{\"type\":\"tool_use\",\"id\":\"t1\",\"name\":\"read_file\",\"input\":{\"path\":\"a.png\",\"encoding\":\"base64\"}},"
		"{\"type\":\"tool_use\",\"id\":\"t2\",\"name\":\"demo_image\",\"input\":{}}]}");
	ck_assert_msg(tj_len(r, "result.messages.0.content") == 2, "%s", tcc_raw(c, r));
	/* read_file: the image alone (its base64 is not also text). */
	ck_assert_int_eq(tj_len(r, "result.messages.0.content.0.content"), 1);
	ck_assert_str_eq(tj_str(r, "result.messages.0.content.0.content.0.type"), "image");
	ck_assert_str_eq(tj_str(r, "result.messages.0.content.0.content.0.source.type"), "base64");
	ck_assert_str_eq(tj_str(r, "result.messages.0.content.0.content.0.source.media_type"), "image/png");
	ck_assert_str_eq(tj_str(r, "result.messages.0.content.0.content.0.source.data"), buf_head(&b64));
	/* The provider's: its text, then its image. */
	ck_assert_str_eq(tj_str(r, "result.messages.0.content.1.content.0.type"), "text");
	ck_assert_str_eq(tj_str(r, "result.messages.0.content.1.content.0.text"), "a dot");
	ck_assert_str_eq(tj_str(r, "result.messages.0.content.1.content.1.type"), "image");
	ck_assert_str_eq(tj_str(r, "result.messages.0.content.1.content.1.source.media_type"), "image/png");
	ck_assert_str_eq(tj_str(r, "result.messages.0.content.1.content.1.source.data"), "iVBORw0KGgo=");

	r = tcc_request(c, "tools/dispatch",
		"{\"format\":\"openai\",\"calls\":["
		"{\"id\":\"c1\",\"function\":{\"name\":\"read_file\",\"arguments\":\"{\\\"path\\\":\\\"a.png\\\",\\\"encoding\\\":\\\"base64\\\"}\"}},"
		"{\"id\":\"c2\",\"function\":{\"name\":\"demo_image\",\"arguments\":\"{}\"}}]}");
	ck_assert_msg(tj_len(r, "result.messages") == 2, "%s", tcc_raw(c, r));
	ck_assert_str_eq(tj_str(r, "result.messages.0.content"),
			 "[An image was returned: image/png, 16 bytes; this format's tool messages carry text only]");
	ck_assert_str_eq(tj_str(r, "result.messages.1.content"),
			 "a dot\n[An image was returned: image/png, 8 bytes; this format's tool messages carry text "
			 "only]");
	buf_free(&b64);
	tcc_close(c);
	tcd_finish(&d);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("mcp_content");
	TCase *tc = tcase_create("images");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, read_file_images);
	tcase_add_test(tc, provider_images_pass_through);
	tcase_add_test(tc, provider_content_passes_through_whole);
	tcase_add_test(tc, provider_annotations);
	tcase_add_test(tc, dispatch_carries_images);
	suite_add_tcase(s, tc);
	return run_suite(s);
}
