/* SPDX-License-Identifier: MIT */
/*
 * The helpers every module shares: base64 (proto/base64.c) against the
 * RFC 4648 test vectors, cutting text at a UTF-8 character boundary
 * (proto/utf8.c), which messages and read_file windows rely on, and the
 * capped whole-file reader (proto/base/fileio.c) behind config and tool
 * files.
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "proto/base/fileio.h"
#include "proto/base/strv.h"
#include "proto/base/util.h"
#include "proto/base64.h"
#include "proto/utf8.h"
#include "tests/unit/check_main.h"

/* RFC 4648, section 10. */
static const struct {
	const char *data, *b64;
} rfc4648[] = {
	{ "", "" },
	{ "f", "Zg==" },
	{ "fo", "Zm8=" },
	{ "foo", "Zm9v" },
	{ "foob", "Zm9vYg==" },
	{ "fooba", "Zm9vYmE=" },
	{ "foobar", "Zm9vYmFy" },
};

START_TEST(base64_rfc4648_encode)
{
	struct buf b = {0};
	base64_encode(rfc4648[_i].data, strlen(rfc4648[_i].data), &b);
	buf_putc(&b, '\0');
	ck_assert_str_eq(buf_head(&b), rfc4648[_i].b64);
	buf_free(&b);
}
END_TEST

START_TEST(base64_rfc4648_decode)
{
	struct buf b = {0};
	ck_assert_int_eq(base64_decode(rfc4648[_i].b64, strlen(rfc4648[_i].b64), &b), 0);
	ck_assert_uint_eq(buf_size(&b), strlen(rfc4648[_i].data));
	ck_assert(memcmp(buf_head(&b), rfc4648[_i].data, buf_size(&b)) == 0);
	buf_free(&b);
}
END_TEST

START_TEST(base64_all_bytes_round_trip)
{
	unsigned char all[256];
	for (unsigned i = 0; i < 256; i++)
		all[i] = (unsigned char)i;
	struct buf enc = {0}, dec = {0};
	base64_encode(all, sizeof(all), &enc);
	ck_assert_int_eq(base64_decode(buf_head(&enc), buf_size(&enc), &dec), 0);
	ck_assert_uint_eq(buf_size(&dec), sizeof(all));
	ck_assert(memcmp(buf_head(&dec), all, sizeof(all)) == 0);
	buf_free(&enc);
	buf_free(&dec);
}
END_TEST

START_TEST(base64_decode_leniency_and_errors)
{
	struct buf b = {0};
	/* Padding is optional; line breaks and spaces between digits pass. */
	ck_assert_int_eq(base64_decode("Zm9vYg", 6, &b), 0);
	ck_assert_uint_eq(buf_size(&b), 4);
	b.len = b.off = 0;
	ck_assert_int_eq(base64_decode("Zm9v\r\nYmFy \t", 12, &b), 0);
	ck_assert_uint_eq(buf_size(&b), 6);
	/* Not base64: a foreign digit, padding inside, a lone digit, too much padding. */
	const char *bad[] = { "Zm9v!", "Zg==Zg==", "Zm9vY", "Zg===", "Z=", "-_==" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		b.len = b.off = 0;
		ck_assert_msg(base64_decode(bad[i], strlen(bad[i]), &b) == -EINVAL, "%s", bad[i]);
	}
	buf_free(&b);
}
END_TEST

/* What may not be in a name shown one a line: controls, separators,
 * bidirectional overrides; the characters beside them may. */
START_TEST(utf8_is_control_bounds)
{
	static const uint32_t yes[] = { 0x00, 0x0a, 0x1f, 0x7f, 0x80, 0x85, 0x9f, 0x2028, 0x2029,
					0x202a, 0x202e, 0x2066, 0x2069 };
	static const uint32_t no[] = { 0x20, 0x7e, 0xa0, 0xe9, 0x2027, 0x202f, 0x2065, 0x206a, 0xfeff, 0x1f600 };
	for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++)
		ck_assert_msg(utf8_is_control(yes[i]), "U+%04X", (unsigned)yes[i]);
	for (size_t i = 0; i < sizeof(no) / sizeof(no[0]); i++)
		ck_assert_msg(!utf8_is_control(no[i]), "U+%04X", (unsigned)no[i]);
}
END_TEST

START_TEST(utf8_cut_keeps_whole_characters)
{
	const char *s = "ab\xc3\xa9" "c\xe2\x82\xac" "d\xf0\x9f\x98\x80";	/* ab é c € d 😀 */
	size_t n = strlen(s);
	ck_assert_uint_eq(utf8_cut(s, n, n), n);		/* fits: all */
	ck_assert_uint_eq(utf8_cut(s, n, 100), n);
	ck_assert_uint_eq(utf8_cut(s, n, 3), 2);		/* inside é: before it */
	ck_assert_uint_eq(utf8_cut(s, n, 4), 4);		/* just after é */
	ck_assert_uint_eq(utf8_cut(s, n, 6), 5);		/* inside € */
	ck_assert_uint_eq(utf8_cut(s, n, 7), 5);
	ck_assert_uint_eq(utf8_cut(s, n, 8), 8);
	ck_assert_uint_eq(utf8_cut(s, n, 12), 9);		/* inside 😀 */
	ck_assert_uint_eq(utf8_cut(s, n, 0), 0);
	/* Every cut is valid UTF-8 and at most max long. */
	for (size_t max = 0; max <= n; max++) {
		size_t k = utf8_cut(s, n, max);
		ck_assert_uint_le(k, max);
		ck_assert(utf8_valid(s, k));
	}
	/* Inside the first character: nothing of it. */
	ck_assert_uint_eq(utf8_cut("\xe2\x82\xac", 3, 2), 0);
	/* Not UTF-8 (a run of continuation bytes): cut at max, not backed over. */
	ck_assert_uint_eq(utf8_cut("a\x80\x80\x80\x80\x80", 6, 5), 5);
}
END_TEST

START_TEST(read_file_capped_limits)
{
	char dir[] = "/tmp/tc-base-XXXXXX";
	ck_assert_ptr_nonnull(mkdtemp(dir));
	_cleanup_free_ char *path = xasprintf("%s/f", dir);
	_cleanup_free_ char *fifo = xasprintf("%s/fifo", dir);
	FILE *f = fopen(path, "w");
	ck_assert_ptr_nonnull(f);
	fputs("hello", f);
	fclose(f);
	ck_assert_int_eq(mkfifo(fifo, 0600), 0);

	char *text = NULL;
	size_t len = 0;
	ck_assert_int_eq(read_file_capped(path, 5, 0, &text, &len), 0);
	ck_assert_uint_eq(len, 5);
	ck_assert_str_eq(text, "hello");
	free(text);
	ck_assert_int_eq(read_file_capped(path, 4, 0, &text, &len), -EFBIG);
	ck_assert_int_eq(read_file_capped(path, 4, READ_REGULAR_ONLY, &text, &len), -EFBIG);
	ck_assert_int_eq(read_file_capped(dir, 100, 0, &text, &len), -EISDIR);
	ck_assert_int_eq(read_file_capped(fifo, 100, READ_REGULAR_ONLY, &text, &len), -EINVAL);
	ck_assert_int_eq(read_file_capped("/nonexistent/x", 100, 0, &text, &len), -ENOENT);
	/* No size in stat: read to the end, capped all the same. */
	if (access("/proc/self/status", R_OK) == 0) {
		ck_assert_int_eq(read_file_capped("/proc/self/status", 16, 0, &text, &len), -EFBIG);
		ck_assert_int_eq(read_file_capped("/proc/self/status", 1 << 20, 0, &text, &len), 0);
		ck_assert(len > 16);
		free(text);
	}
	unlink(fifo);
	unlink(path);
	rmdir(dir);
}
END_TEST

START_TEST(strv_free_accepts_null)
{
	ck_assert_ptr_null(strv_free(NULL));
	char **v = xcalloc(3, sizeof(*v));
	v[0] = xstrdup("a");
	v[1] = xstrdup("b");
	ck_assert_ptr_null(strv_free(v));
}
END_TEST

static Suite *base_suite(void)
{
	Suite *s = suite_create("base");
	TCase *tc = tcase_create("base64");
	tcase_add_loop_test(tc, base64_rfc4648_encode, 0, sizeof(rfc4648) / sizeof(rfc4648[0]));
	tcase_add_loop_test(tc, base64_rfc4648_decode, 0, sizeof(rfc4648) / sizeof(rfc4648[0]));
	tcase_add_test(tc, base64_all_bytes_round_trip);
	tcase_add_test(tc, base64_decode_leniency_and_errors);
	suite_add_tcase(s, tc);
	tc = tcase_create("utf8");
	tcase_add_test(tc, utf8_cut_keeps_whole_characters);
	tcase_add_test(tc, utf8_is_control_bounds);
	suite_add_tcase(s, tc);
	tc = tcase_create("files");
	tcase_add_test(tc, read_file_capped_limits);
	tcase_add_test(tc, strv_free_accepts_null);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return run_suite(base_suite());
}
