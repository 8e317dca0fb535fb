/* SPDX-License-Identifier: MIT */
/*
 * Images as MCP image content: read_file with encoding "base64" of a whole
 * PNG, JPEG, GIF or WebP (told by its first bytes) answers {type: "image",
 * data, mimeType}; anything else, or a part of an image, stays text. Image
 * items an MCP server answers pass through, checked.
 */
#include <check.h>
#include <string.h>

#include "proto/base64.h"
#include "tests/integ/harness.h"
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
	ck_assert_int_eq(tcd_stop(&d), 0);
	tcd_free(&d);
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
	ck_assert_int_eq(tcd_stop(&d), 0);
	tcd_free(&d);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("mcp_content");
	TCase *tc = tcase_create("images");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, read_file_images);
	tcase_add_test(tc, provider_images_pass_through);
	suite_add_tcase(s, tc);
	return run_suite(s);
}
