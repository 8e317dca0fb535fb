/* SPDX-License-Identifier: MIT */
/*
 * The four file tools (read_file, write_file, patch_file, list_dir) run
 * directly on the tree of workspace_fixture.h: windows, encodings,
 * atomic writes, exactly-once patches, listings and their bounds, the
 * refusals, and the tools' declarations against their schemas. Every case
 * runs with the kernel's openat2 and with the walk used where openat2 is
 * missing.
 */
#include "tests/unit/workspace_fixture.h"

#include <sys/syscall.h>

#include "tests/unit/check_main.h"
#include "tests/unit/deny_syscall.h"

/* --- read_file ------------------------------------------------------------- */

START_TEST(read_counts_lines)
{
	/* A whole file in the window is counted, not walked line by line:
	 * long enough for several rounds of the count, and a tail. */
	size_t n = 30001;
	char *data = xmalloc(n);
	for (size_t i = 0; i < n; i++)
		data[i] = i % 3 == 2 ? '\n' : 'a';
	put("ws/many.txt", data, n);
	free(data);
	struct result res;
	run(&tool_read_file, &res, "{\"path\":\"many.txt\",\"lines\":20000}");
	assert_ok(&res);
	ck_assert_int_eq(sc_int(&res, "total_lines"), 10001);	/* the last without a newline */
	ck_assert_uint_eq(strlen(sc_str(&res, "content")), n);
	ck_assert(!sc_bool(&res, "truncated"));
	result_clear(&res);
	/* Exactly as many lines as asked for: all of them. */
	run(&tool_read_file, &res, "{\"path\":\"many.txt\",\"lines\":10001}");
	assert_ok(&res);
	ck_assert(!sc_bool(&res, "truncated"));
	result_clear(&res);
	/* More lines than asked for: the window, the same count. */
	run(&tool_read_file, &res, "{\"path\":\"many.txt\",\"lines\":10000}");
	assert_ok(&res);
	ck_assert_int_eq(sc_int(&res, "total_lines"), 10001);
	ck_assert_uint_eq(strlen(sc_str(&res, "content")), n - 1);
	ck_assert(sc_bool(&res, "truncated"));
	ck_assert_int_eq(sc_int(&res, "next_line"), 10001);
	result_clear(&res);
	puts_file("ws/three.txt", "x\n\ny\n");
	run(&tool_read_file, &res, "{\"path\":\"three.txt\"}");
	assert_ok(&res);
	ck_assert_int_eq(sc_int(&res, "total_lines"), 3);
	ck_assert_str_eq(res.call.text, "     1\tx\n     2\t\n     3\ty\n");
	/* The answer's literal of the text, made from the content's. */
	ck_assert_ptr_nonnull(res.call.text_json);
	ck_assert_str_eq(res.call.text_json, "\"     1\\tx\\n     2\\t\\n     3\\ty\\n\"");
	result_clear(&res);
}
END_TEST

START_TEST(read_window)
{
	puts_file("ws/digits.txt", "0123456789");
	struct result res;

	run(&tool_read_file, &res, "{\"path\":\"digits.txt\",\"offset\":2,\"limit\":3}");
	assert_ok(&res);
	ck_assert_str_eq(sc_str(&res, "content"), "234");
	ck_assert_int_eq(sc_int(&res, "size"), 10);
	ck_assert(sc_bool(&res, "truncated"));
	ck_assert_int_eq(sc_int(&res, "next_offset"), 5);
	result_clear(&res);

	run(&tool_read_file, &res, "{\"path\":\"digits.txt\",\"offset\":7,\"limit\":3}");
	assert_ok(&res);
	ck_assert_str_eq(sc_str(&res, "content"), "789");
	ck_assert(!sc_bool(&res, "truncated"));
	ck_assert_ptr_null(json_get(res.sc, "next_offset"));
	result_clear(&res);

	run(&tool_read_file, &res, "{\"path\":\"digits.txt\",\"offset\":50}");
	assert_ok(&res);
	ck_assert_str_eq(sc_str(&res, "content"), "");
	ck_assert_int_eq(sc_int(&res, "size"), 10);
	ck_assert(!sc_bool(&res, "truncated"));
	result_clear(&res);

	/* The default window comes from the daemon's settings: a line longer
	 * than its bytes is cut. */
	struct tool_env env = { .read_bytes = 4 };
	run_env(&tool_read_file, &env, &res, "{\"path\":\"digits.txt\"}");
	assert_ok(&res);
	ck_assert_str_eq(sc_str(&res, "content"), "0123");
	ck_assert(sc_bool(&res, "truncated"));
	result_clear(&res);

	/* ... and is 256 KiB without them. */
	size_t big = (1u << 20) + 10;
	char *data = xmalloc(big);
	memset(data, 'z', big);
	put("ws/big.txt", data, big);
	free(data);
	run(&tool_read_file, &res, "{\"path\":\"big.txt\"}");
	assert_ok(&res);
	ck_assert_uint_eq(strlen(sc_str(&res, "content")), 256u << 10);
	ck_assert_int_eq(sc_int(&res, "size"), (int64_t)big);
	ck_assert(sc_bool(&res, "truncated"));
	result_clear(&res);

	/* Over 64 MiB: by bytes, saying so; by lines only when asked, refused. */
	data = xmalloc(1 << 20);
	for (size_t i = 0; i < 1 << 20; i++)
		data[i] = i % 8 == 7 ? '\n' : 'y';
	put("ws/huge.txt", data, 1 << 20);
	free(data);
	ck_assert_int_eq(truncate(at("ws/huge.txt"), (off_t)65 << 20), 0);
	run(&tool_read_file, &res, "{\"path\":\"huge.txt\"}");
	assert_ok(&res);
	ck_assert_uint_eq(strlen(sc_str(&res, "content")), 256u << 10);
	ck_assert_ptr_null(json_get(res.sc, "first_line"));
	ck_assert_msg(strstr(res.call.text, "\n[Bytes 0-262143 of 68157440 shown (the file is too large to read by "
			     "lines); read on with {\"offset\": 262144}]"), "%.300s", res.call.text);
	result_clear(&res);
	run(&tool_read_file, &res, "{\"path\":\"huge.txt\",\"line\":2}");
	assert_fail(&res, TC_EXECUTION_ERROR, "too large to read by lines");
	result_clear(&res);

	/* An empty file. */
	puts_file("ws/empty", "");
	run(&tool_read_file, &res, "{\"path\":\"empty\"}");
	assert_ok(&res);
	ck_assert_str_eq(res.call.text, "[The file is empty.]");
	ck_assert(!sc_bool(&res, "truncated"));
	result_clear(&res);
}
END_TEST

START_TEST(read_utf8)
{
	struct result res;
	/* "aé€😀" : 1 + 2 + 3 + 4 bytes */
	puts_file("ws/u.txt", "a\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80");

	run(&tool_read_file, &res, "{\"path\":\"u.txt\",\"limit\":2}");
	assert_ok(&res);
	ck_assert_str_eq(sc_str(&res, "content"), "a");	/* é would be cut: left for later */
	ck_assert(sc_bool(&res, "truncated"));
	ck_assert_int_eq(sc_int(&res, "next_offset"), 1);
	result_clear(&res);

	run(&tool_read_file, &res, "{\"path\":\"u.txt\",\"offset\":1,\"limit\":4}");
	assert_ok(&res);
	ck_assert_str_eq(sc_str(&res, "content"), "\xc3\xa9");
	ck_assert_int_eq(sc_int(&res, "next_offset"), 3);
	result_clear(&res);

	/* A limit smaller than the first character still makes progress. */
	run(&tool_read_file, &res, "{\"path\":\"u.txt\",\"offset\":6,\"limit\":1}");
	assert_ok(&res);
	ck_assert_str_eq(sc_str(&res, "content"), "\xf0\x9f\x98\x80");
	ck_assert(!sc_bool(&res, "truncated"));
	result_clear(&res);

	run(&tool_read_file, &res, "{\"path\":\"u.txt\",\"offset\":3,\"limit\":6}");
	assert_ok(&res);
	ck_assert_str_eq(sc_str(&res, "content"), "\xe2\x82\xac");
	ck_assert(sc_bool(&res, "truncated"));
	ck_assert_int_eq(sc_int(&res, "next_offset"), 6);
	result_clear(&res);

	/* An offset inside a character. */
	run(&tool_read_file, &res, "{\"path\":\"u.txt\",\"offset\":2}");
	assert_fail(&res, TC_EXECUTION_ERROR, "inside a multibyte UTF-8 character");
	result_clear(&res);

	/* Not UTF-8: described, pointing at base64; never mangled. */
	put("ws/bin", "ab\xff\xfe", 4);
	run(&tool_read_file, &res, "{\"path\":\"bin\"}");
	assert_ok(&res);
	ck_assert_ptr_nonnull(strstr(res.call.text, "{\"encoding\": \"base64\"}"));
	ck_assert(sc_bool(&res, "binary"));
	result_clear(&res);
	put("ws/nul", "ab\0cd", 5);
	run(&tool_read_file, &res, "{\"path\":\"nul\",\"encoding\":\"utf8\"}");
	assert_ok(&res);
	ck_assert(sc_bool(&res, "binary"));
	ck_assert_ptr_nonnull(strstr(res.call.text, "base64"));
	result_clear(&res);
}
END_TEST

START_TEST(base64_both_ways)
{
	struct result res;
	put("ws/bin", "ab\xff\xfe\0", 5);
	run(&tool_read_file, &res, "{\"path\":\"bin\",\"encoding\":\"base64\"}");
	assert_ok(&res);
	ck_assert_str_eq(sc_str(&res, "content"), "YWL//gA=");
	ck_assert_str_eq(res.call.text, "YWL//gA=");
	ck_assert_str_eq(sc_str(&res, "encoding"), "base64");
	ck_assert_int_eq(sc_int(&res, "size"), 5);
	result_clear(&res);

	run(&tool_read_file, &res, "{\"path\":\"bin\",\"encoding\":\"base64\",\"offset\":1,\"limit\":2}");
	assert_ok(&res);
	ck_assert_str_eq(sc_str(&res, "content"), "Yv8=");
	ck_assert(sc_bool(&res, "truncated"));
	result_clear(&res);

	static const struct { const char *b64; const char *bytes; size_t n; } cases[] = {
		{ "", "", 0 },
		{ "AA==", "\0", 1 },
		{ "AAE=", "\0\1", 2 },
		{ "AAEC", "\0\1\2", 3 },
		{ "AAEC/w", "\0\1\2\xff", 4 },		/* padding optional */
		{ "AAEC\\n/w==\\r\\n", "\0\1\2\xff", 4 },	/* line breaks skipped */
	};
	for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
		run(&tool_write_file, &res, "{\"path\":\"out.bin\",\"content\":\"%s\",\"encoding\":\"base64\"}",
		    cases[i].b64);
		assert_ok(&res);
		ck_assert_int_eq(sc_int(&res, "bytes"), (int64_t)cases[i].n);
		result_clear(&res);
		size_t n;
		_cleanup_free_ char *c = slurp("ws/out.bin", &n);
		ck_assert_uint_eq(n, cases[i].n);
		ck_assert(memcmp(c, cases[i].bytes, n) == 0);
	}

	/* Round trip of all byte values. */
	char all[256];
	for (int i = 0; i < 256; i++)
		all[i] = (char)i;
	put("ws/all.bin", all, sizeof(all));
	run(&tool_read_file, &res, "{\"path\":\"all.bin\",\"encoding\":\"base64\"}");
	assert_ok(&res);
	_cleanup_free_ char *enc = xstrdup(sc_str(&res, "content"));
	result_clear(&res);
	run(&tool_write_file, &res, "{\"path\":\"all2.bin\",\"content\":\"%s\",\"encoding\":\"base64\"}", enc);
	assert_ok(&res);
	result_clear(&res);
	size_t n;
	_cleanup_free_ char *back = slurp("ws/all2.bin", &n);
	ck_assert_uint_eq(n, 256);
	ck_assert(memcmp(back, all, 256) == 0);

	/* Not base64: refused as invalid arguments, nothing written. */
	static const char *const bad[] = { "!!!!", "AAA=A", "A", "AA=", "AA===", "YW-_" };
	for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
		run(&tool_write_file, &res, "{\"path\":\"bad.bin\",\"content\":\"%s\",\"encoding\":\"base64\"}", bad[i]);
		assert_fail(&res, TC_VALIDATION_ERROR, "base64");
		ck_assert_ptr_nonnull(res.call.error_data);
		result_clear(&res);
	}
	ck_assert(!exists("ws/bad.bin"));
}
END_TEST

START_TEST(read_refusals)
{
	struct result res;
	run(&tool_read_file, &res, "{\"path\":\"sub\"}");
	assert_fail(&res, TC_EXECUTION_ERROR, "is a directory, use list_dir");
	result_clear(&res);

	run(&tool_read_file, &res, "{\"path\":\"nope.txt\"}");
	assert_fail(&res, TC_EXECUTION_ERROR, "File 'nope.txt' not found");
	result_clear(&res);

	run(&tool_read_file, &res, "{\"path\":\"hello.txt/x\"}");
	assert_fail(&res, TC_EXECUTION_ERROR, "not a directory");
	result_clear(&res);

	/* A FIFO with no writer: refused at once, not waited on. */
	ck_assert_int_eq(mkfifo(at("ws/fifo"), 0644), 0);
	alarm(10);
	run(&tool_read_file, &res, "{\"path\":\"fifo\"}");
	alarm(0);
	assert_fail(&res, TC_EXECUTION_ERROR, "not a regular file");
	result_clear(&res);

	/* A device, when the sandbox allows making one. */
	if (mknod(at("ws/null"), S_IFCHR | 0666, makedev(1, 3)) == 0) {
		run(&tool_read_file, &res, "{\"path\":\"null\"}");
		assert_fail(&res, TC_EXECUTION_ERROR, "not a regular file");
		result_clear(&res);
	}

	/* A path longer than the kernel takes. */
	_cleanup_free_ char *longp = xmalloc(PATH_MAX + 2);
	memset(longp, 'a', PATH_MAX + 1);
	longp[PATH_MAX + 1] = '\0';
	run(&tool_read_file, &res, "{\"path\":\"%s\"}", longp);
	assert_fail(&res, TC_EXECUTION_ERROR, "too long");
	ck_assert_uint_lt(strlen(res.call.message), 500);
	result_clear(&res);
}
END_TEST

/* --- write_file ------------------------------------------------------------ */


START_TEST(write_new_and_replace)
{
	struct result res;
	umask(027);
	run(&tool_write_file, &res, "{\"path\":\"new.txt\",\"content\":\"fresh\\n\"}");
	assert_ok(&res);
	ck_assert_str_eq(sc_str(&res, "path"), "new.txt");
	ck_assert_int_eq(sc_int(&res, "bytes"), 6);
	ck_assert(sc_bool(&res, "created"));
	ck_assert_uint_eq(res.call.n_files, 1);
	ck_assert_str_eq(res.call.files[0], "new.txt");
	result_clear(&res);
	_cleanup_free_ char *c1 = slurp("ws/new.txt", NULL);
	ck_assert_str_eq(c1, "fresh\n");
	ck_assert_uint_eq(mode_of("ws/new.txt"), 0640);	/* 0644 less the umask */

	/* Replacing keeps the mode, and is a rename: a reader holding the
	 * old file still sees it whole. */
	ck_assert_int_eq(chmod(at("ws/new.txt"), 0751), 0);
	int old = open(at("ws/new.txt"), O_RDONLY | O_CLOEXEC);
	ck_assert_int_ge(old, 0);
	run(&tool_write_file, &res, "{\"path\":\"@/ws/new.txt\",\"content\":\"second version\"}");
	assert_ok(&res);
	ck_assert(!sc_bool(&res, "created"));
	ck_assert_str_eq(sc_str(&res, "path"), "new.txt");
	ck_assert_str_eq(res.call.files[0], "new.txt");
	result_clear(&res);
	_cleanup_free_ char *c2 = slurp("ws/new.txt", NULL);
	ck_assert_str_eq(c2, "second version");
	ck_assert_uint_eq(mode_of("ws/new.txt"), 0751);
	char tmp[16] = {};
	ck_assert_int_eq(read(old, tmp, sizeof(tmp) - 1), 6);
	ck_assert_str_eq(tmp, "fresh\n");
	close(old);

	/* Owner kept too (only root can give a file away). */
	if (geteuid() == 0) {
		ck_assert_int_eq(chown(at("ws/new.txt"), 1234, 5678), 0);
		run(&tool_write_file, &res, "{\"path\":\"new.txt\",\"content\":\"third\"}");
		assert_ok(&res);
		result_clear(&res);
		struct stat st;
		ck_assert_int_eq(stat(at("ws/new.txt"), &st), 0);
		ck_assert_uint_eq(st.st_uid, 1234);
		ck_assert_uint_eq(st.st_gid, 5678);
		ck_assert_uint_eq(st.st_mode & 07777, 0751);
	}

	/* Empty content, and idempotent rewrites. */
	for (int i = 0; i < 2; i++) {
		run(&tool_write_file, &res, "{\"path\":\"new.txt\",\"content\":\"\"}");
		assert_ok(&res);
		ck_assert_int_eq(sc_int(&res, "bytes"), 0);
		result_clear(&res);
	}
	_cleanup_free_ char *c3 = slurp("ws/new.txt", NULL);
	ck_assert_str_eq(c3, "");
	assert_no_temp("ws");
}
END_TEST

START_TEST(write_create_dirs)
{
	struct result res;
	run(&tool_write_file, &res, "{\"path\":\"d1/d2/f.txt\",\"content\":\"x\"}");
	assert_fail(&res, TC_EXECUTION_ERROR, "create_dirs");
	result_clear(&res);
	ck_assert(!exists("ws/d1"));

	run(&tool_write_file, &res, "{\"path\":\"d1/d2/f.txt\",\"content\":\"x\",\"create_dirs\":true}");
	assert_ok(&res);
	ck_assert(sc_bool(&res, "created"));
	ck_assert_str_eq(sc_str(&res, "path"), "d1/d2/f.txt");
	result_clear(&res);
	_cleanup_free_ char *c = slurp("ws/d1/d2/f.txt", NULL);
	ck_assert_str_eq(c, "x");

	/* Existing parts, "..", and a symlinked directory inside, on the way. */
	run(&tool_write_file, &res, "{\"path\":\"d1/../link-in-dir/d3/g.txt\",\"content\":\"y\",\"create_dirs\":true}");
	assert_ok(&res);
	result_clear(&res);
	_cleanup_free_ char *g = slurp("ws/sub/d3/g.txt", NULL);
	ck_assert_str_eq(g, "y");

	/* A file in the way. */
	run(&tool_write_file, &res, "{\"path\":\"hello.txt/f\",\"content\":\"x\",\"create_dirs\":true}");
	assert_fail(&res, TC_EXECUTION_ERROR, "not a directory");
	result_clear(&res);
}
END_TEST

START_TEST(write_refusals)
{
	struct result res;
	run(&tool_write_file, &res, "{\"path\":\"sub\",\"content\":\"x\"}");
	assert_fail(&res, TC_EXECUTION_ERROR, "is a directory");
	result_clear(&res);
	run(&tool_write_file, &res, "{\"path\":\"sub/\",\"content\":\"x\"}");
	assert_fail(&res, TC_EXECUTION_ERROR, "'sub/' names a directory, not a file");
	result_clear(&res);
	/* By its form, whatever is there: a file is not called a directory. */
	puts_file("ws/plain.txt", "p");
	run(&tool_write_file, &res, "{\"path\":\"plain.txt/\",\"content\":\"x\"}");
	assert_fail(&res, TC_EXECUTION_ERROR, "'plain.txt/' names a directory, not a file");
	result_clear(&res);
	run(&tool_write_file, &res, "{\"path\":\"sub/..\",\"content\":\"x\"}");
	assert_fail(&res, TC_EXECUTION_ERROR, "names a directory, not a file");
	result_clear(&res);
	run(&tool_write_file, &res, "{\"path\":\"@/ws\",\"content\":\"x\"}");
	assert_fail(&res, TC_EXECUTION_ERROR, "is a directory");
	result_clear(&res);
	run(&tool_write_file, &res, "{\"path\":\"link-in-dir\",\"content\":\"x\"}");
	assert_fail(&res, TC_EXECUTION_ERROR, "is a directory");
	result_clear(&res);

	ck_assert_int_eq(mkfifo(at("ws/fifo"), 0644), 0);
	alarm(10);
	run(&tool_write_file, &res, "{\"path\":\"fifo\",\"content\":\"x\"}");
	alarm(0);
	assert_fail(&res, TC_EXECUTION_ERROR, "not a regular file");
	result_clear(&res);
	struct stat st;
	ck_assert_int_eq(lstat(at("ws/fifo"), &st), 0);
	ck_assert(S_ISFIFO(st.st_mode));

	/* A directory the process cannot write to (root can, so only as others). */
	if (geteuid() != 0) {
		ck_assert_int_eq(chmod(at("ws/sub"), 0555), 0);
		run(&tool_write_file, &res, "{\"path\":\"sub/f\",\"content\":\"x\"}");
		assert_fail(&res, TC_EXECUTION_ERROR, "Permission denied");
		result_clear(&res);
		chmod(at("ws/sub"), 0755);
	}
	assert_no_temp("ws");
	assert_no_temp("ws/sub");
}
END_TEST

/* --- patch_file ------------------------------------------------------------ */

START_TEST(patch_exactly_once)
{
	struct result res;
	puts_file("ws/p.txt", "one two three two\n");
	ck_assert_int_eq(chmod(at("ws/p.txt"), 0600), 0);

	run(&tool_patch_file, &res, "{\"path\":\"p.txt\",\"old\":\"one\",\"new\":\"1\"}");
	assert_ok(&res);
	ck_assert_str_eq(sc_str(&res, "path"), "p.txt");
	ck_assert_int_eq(sc_int(&res, "replacements"), 1);
	ck_assert_uint_eq(res.call.n_files, 1);
	ck_assert_str_eq(res.call.files[0], "p.txt");
	result_clear(&res);
	_cleanup_free_ char *c1 = slurp("ws/p.txt", NULL);
	ck_assert_str_eq(c1, "1 two three two\n");
	ck_assert_uint_eq(mode_of("ws/p.txt"), 0600);

	run(&tool_patch_file, &res, "{\"path\":\"p.txt\",\"old\":\"two\",\"new\":\"2\"}");
	assert_fail(&res, TC_EXECUTION_ERROR, "'old' occurs 2 times in p.txt; include more context so it occurs exactly once");
	ck_assert_ptr_nonnull(res.call.error_data);
	struct json_doc *d = parse(res.call.error_data);
	int64_t occ;
	ck_assert(json_get_int(json_get(json_doc_root(d), "occurrences"), &occ));
	ck_assert_int_eq(occ, 2);
	json_doc_unref(d);
	ck_assert_uint_eq(res.call.n_files, 0);
	result_clear(&res);

	run(&tool_patch_file, &res, "{\"path\":\"p.txt\",\"old\":\"four\",\"new\":\"4\"}");
	assert_fail(&res, TC_EXECUTION_ERROR, "'old' was not found in p.txt (it occurs 0 times; it must occur exactly once)");
	d = parse(res.call.error_data);
	ck_assert(json_get_int(json_get(json_doc_root(d), "occurrences"), &occ));
	ck_assert_int_eq(occ, 0);
	json_doc_unref(d);
	result_clear(&res);

	/* Overlapping occurrences are ambiguous too. */
	puts_file("ws/aaa.txt", "aaa");
	run(&tool_patch_file, &res, "{\"path\":\"aaa.txt\",\"old\":\"aa\",\"new\":\"b\"}");
	assert_fail(&res, TC_EXECUTION_ERROR, "occurs 2 times");
	result_clear(&res);

	/* Unchanged after the failures. */
	_cleanup_free_ char *c2 = slurp("ws/p.txt", NULL);
	ck_assert_str_eq(c2, "1 two three two\n");

	/* More context makes it unique; multi-line text, deleting with an empty "new". */
	run(&tool_patch_file, &res, "{\"path\":\"p.txt\",\"old\":\"three two\\n\",\"new\":\"3\\nlines\\n\"}");
	assert_ok(&res);
	result_clear(&res);
	run(&tool_patch_file, &res, "{\"path\":\"p.txt\",\"old\":\"1 \",\"new\":\"\"}");
	assert_ok(&res);
	result_clear(&res);
	_cleanup_free_ char *c3 = slurp("ws/p.txt", NULL);
	ck_assert_str_eq(c3, "two 3\nlines\n");
	ck_assert_uint_eq(mode_of("ws/p.txt"), 0600);

	/* Binary-safe: bytes around NUL. */
	put("ws/b.bin", "x\0y\0z", 5);
	run(&tool_patch_file, &res, "{\"path\":\"b.bin\",\"old\":\"\\u0000y\",\"new\":\"Y\"}");
	assert_ok(&res);
	result_clear(&res);
	size_t n;
	_cleanup_free_ char *c4 = slurp("ws/b.bin", &n);
	ck_assert_uint_eq(n, 4);
	ck_assert(memcmp(c4, "xY\0z", 4) == 0);

	run(&tool_patch_file, &res, "{\"path\":\"sub\",\"old\":\"a\",\"new\":\"b\"}");
	assert_fail(&res, TC_EXECUTION_ERROR, "is a directory");
	result_clear(&res);
	run(&tool_patch_file, &res, "{\"path\":\"missing.txt\",\"old\":\"a\",\"new\":\"b\"}");
	assert_fail(&res, TC_EXECUTION_ERROR, "File 'missing.txt' not found");
	result_clear(&res);
	ck_assert(!exists("ws/missing.txt"));
	assert_no_temp("ws");
}
END_TEST

/* --- list_dir -------------------------------------------------------------- */



START_TEST(list_flat_and_recursive)
{
	make_tree();
	struct result res;

	run(&tool_list_dir, &res, "{\"path\":\"tree\"}");
	assert_ok(&res);
	_cleanup_free_ char *flat = entries_str(&res);
	ck_assert_str_eq(flat, "a:dir:0 a.c:file:1 b.txt:file:3 fifo:other:0 ln:symlink:0 out:symlink:0");
	ck_assert(!sc_bool(&res, "truncated"));
	ck_assert_str_eq(sc_str(&res, "path"), "tree");
	ck_assert_ptr_nonnull(strstr(res.call.text, "b.txt (3 bytes)"));
	result_clear(&res);

	/* Recursive: relative names, each directory followed by its entries, symlinks not followed. */
	static const char all[] = "a:dir:0 a/x.c:file:2 a/y:dir:0 a/y/z:file:0 a.c:file:1 b.txt:file:3 "
				  "fifo:other:0 ln:symlink:0 out:symlink:0";
	run(&tool_list_dir, &res, "{\"path\":\"tree\",\"recursive\":true}");
	assert_ok(&res);
	_cleanup_free_ char *rec = entries_str(&res);
	ck_assert_str_eq(rec, all);
	ck_assert(!sc_bool(&res, "truncated"));
	result_clear(&res);

	/* Truncation at every possible count gives a prefix of the full listing. */
	for (int max = 1; max <= 10; max++) {
		run(&tool_list_dir, &res, "{\"path\":\"tree/\",\"recursive\":true,\"max_entries\":%d}", max);
		assert_ok(&res);
		_cleanup_free_ char *got = entries_str(&res);
		const struct json *e = json_get(res.sc, "entries");
		ck_assert_uint_eq(e->u.arr.n, (size_t)MIN(max, 9));
		ck_assert_msg(strncmp(all, got, strlen(got)) == 0, "max %d: %s", max, got);
		ck_assert_int_eq(sc_bool(&res, "truncated"), max < 9);
		if (max < 9) {
			/* The text names the argument that shows more. */
			_cleanup_free_ char *cut = xasprintf("[Cut at max_entries (%d): more entries exist; raise "
							     "max_entries, e.g. {\"max_entries\": %d}", max, 2 * max);
			ck_assert_msg(strstr(res.call.text, cut), "%s", res.call.text);
		}
		result_clear(&res);
	}

	/* An empty directory. */
	mkd("ws/empty");
	run(&tool_list_dir, &res, "{\"path\":\"empty\",\"recursive\":true}");
	assert_ok(&res);
	ck_assert_uint_eq(json_get(res.sc, "entries")->u.arr.n, 0);
	ck_assert(!sc_bool(&res, "truncated"));
	result_clear(&res);
}
END_TEST

/* A tree deeper than the kernel's PATH_MAX lists whole: 300 nested
 * directories of 20-byte names make relative paths of 6,300 bytes. */
START_TEST(list_deeper_than_path_max)
{
	enum { DEPTH = 300 };
	const char *name = "dddddddddddddddddddd";
	mkd("ws/deeptree");
	int fd = open(at("ws/deeptree"), O_PATH | O_DIRECTORY | O_CLOEXEC);
	ck_assert_int_ge(fd, 0);
	for (int i = 0; i < DEPTH; i++) {
		ck_assert_int_eq(mkdirat(fd, name, 0755), 0);
		int next = openat(fd, name, O_PATH | O_DIRECTORY | O_CLOEXEC);
		ck_assert_int_ge(next, 0);
		close(fd);
		fd = next;
	}
	int f = openat(fd, "leaf.txt", O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
	ck_assert_int_ge(f, 0);
	ck_assert_int_eq(write(f, "x", 1), 1);
	close(f);
	close(fd);

	struct result res;
	run(&tool_list_dir, &res, "{\"path\":\"deeptree\",\"recursive\":true,\"max_entries\":100000}");
	assert_ok(&res);
	const struct json *e = json_get(res.sc, "entries");
	ck_assert_uint_eq(e->u.arr.n, DEPTH + 1);
	ck_assert(!sc_bool(&res, "truncated"));
	const char *leaf = json_str(json_get(e->u.arr.items[DEPTH], "name"));
	ck_assert_uint_eq(strlen(leaf), DEPTH * (strlen(name) + 1) + strlen("leaf.txt"));
	ck_assert(str_has_suffix(leaf, "/leaf.txt"));
	ck_assert_str_eq(json_str(json_get(e->u.arr.items[DEPTH], "type")), "file");
	result_clear(&res);

	/* Removed bottom up: rm_one through nftw would meet the same limit. */
	for (int depth = DEPTH; depth >= 0; depth--) {
		int d = open(at("ws/deeptree"), O_PATH | O_DIRECTORY | O_CLOEXEC);
		for (int i = 0; i < depth; i++) {
			int next = openat(d, name, O_PATH | O_DIRECTORY | O_CLOEXEC);
			close(d);
			d = next;
		}
		if (depth == DEPTH)
			unlinkat(d, "leaf.txt", 0);
		else
			unlinkat(d, name, AT_REMOVEDIR);
		close(d);
	}
	ck_assert_int_eq(rmdir(at("ws/deeptree")), 0);
}
END_TEST

START_TEST(list_bounded)
{
	/* Many names in one directory: the first ones by name are kept. */
	mkd("ws/many");
	for (int i = 299; i >= 0; i--) {
		char name[64];
		snprintf(name, sizeof(name), "ws/many/f%03d", i);
		puts_file(name, "");
	}
	struct result res;
	run(&tool_list_dir, &res, "{\"path\":\"many\",\"max_entries\":10}");
	assert_ok(&res);
	_cleanup_free_ char *s = entries_str(&res);
	ck_assert_str_eq(s, "f000:file:0 f001:file:0 f002:file:0 f003:file:0 f004:file:0 f005:file:0 "
			    "f006:file:0 f007:file:0 f008:file:0 f009:file:0");
	ck_assert(sc_bool(&res, "truncated"));
	result_clear(&res);

	run(&tool_list_dir, &res, "{\"path\":\"many\",\"max_entries\":300}");
	assert_ok(&res);
	ck_assert_uint_eq(json_get(res.sc, "entries")->u.arr.n, 300);
	ck_assert(!sc_bool(&res, "truncated"));
	result_clear(&res);

	/* A deep subdirectory fills the budget before the names pending above it. */
	mkd("ws/t2");
	mkd("ws/t2/a");
	for (int i = 0; i < 50; i++) {
		char name[64];
		snprintf(name, sizeof(name), "ws/t2/a/f%02d", i);
		puts_file(name, "");
		snprintf(name, sizeof(name), "ws/t2/b%02d", i);
		puts_file(name, "");
	}
	run(&tool_list_dir, &res, "{\"path\":\"t2\",\"recursive\":true,\"max_entries\":20}");
	assert_ok(&res);
	const struct json *e = json_get(res.sc, "entries");
	ck_assert_uint_eq(e->u.arr.n, 20);
	ck_assert_str_eq(json_str(json_get(e->u.arr.items[0], "name")), "a");
	ck_assert_str_eq(json_str(json_get(e->u.arr.items[1], "name")), "a/f00");
	ck_assert_str_eq(json_str(json_get(e->u.arr.items[19], "name")), "a/f18");
	ck_assert(sc_bool(&res, "truncated"));
	result_clear(&res);

	run(&tool_list_dir, &res, "{\"path\":\"t2\",\"recursive\":true,\"max_entries\":60}");
	assert_ok(&res);
	e = json_get(res.sc, "entries");
	ck_assert_uint_eq(e->u.arr.n, 60);
	ck_assert_str_eq(json_str(json_get(e->u.arr.items[50], "name")), "a/f49");
	ck_assert_str_eq(json_str(json_get(e->u.arr.items[51], "name")), "b00");
	ck_assert_str_eq(json_str(json_get(e->u.arr.items[59], "name")), "b08");
	ck_assert(sc_bool(&res, "truncated"));
	result_clear(&res);
}
END_TEST

START_TEST(list_refusals)
{
	struct result res;
	run(&tool_list_dir, &res, "{\"path\":\"hello.txt\"}");
	assert_fail(&res, TC_EXECUTION_ERROR, "'hello.txt' is not a directory; use read_file");
	result_clear(&res);
	run(&tool_list_dir, &res, "{\"path\":\"nope\"}");
	assert_fail(&res, TC_EXECUTION_ERROR, "Directory 'nope' not found");
	result_clear(&res);
	run(&tool_list_dir, &res, "{\"path\":\"link-loop-a\"}");
	assert_fail(&res, TC_EXECUTION_ERROR, "symbolic links");
	result_clear(&res);
}
END_TEST

/* --- declarations and schemas ---------------------------------------------- */

static bool valid_args(const struct tool_def *def, const char *json)
{
	struct tool *t = make_tool(def);
	struct json_doc *doc = parse(json);
	struct schema_errors errs = {};
	bool ok = schema_validate(t->schema, json_doc_root(doc), &errs);
	ck_assert(ok == (errs.n == 0));
	schema_errors_clear(&errs);
	json_doc_unref(doc);
	tool_unref(t);
	return ok;
}

START_TEST(declarations)
{
	static const struct { const struct tool_def *def; const char *name; enum side_effect se; bool idem; } cases[] = {
		{ &tool_read_file, "read_file", SIDE_READ, true },
		{ &tool_write_file, "write_file", SIDE_WRITE, true },
		{ &tool_patch_file, "patch_file", SIDE_WRITE, false },
		{ &tool_list_dir, "list_dir", SIDE_READ, true },
	};
	for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
		const struct tool_def *d = cases[i].def;
		ck_assert_str_eq(d->name, cases[i].name);
		ck_assert_int_eq(d->side_effects, cases[i].se);
		ck_assert_int_eq(d->idempotent, cases[i].idem);
		ck_assert_ptr_nonnull(d->path_args);
		ck_assert_str_eq(d->path_args[0], "path");
		ck_assert_ptr_null(d->path_args[1]);
		ck_assert_uint_gt(strlen(d->description), 80);
		ck_assert_ptr_nonnull(d->exec);
		ck_assert(d->cancel == fsjob_cancel);	/* cancellable: the work runs on the io pool */
		/* Unknown arguments are refused by every file tool. */
		ck_assert(!valid_args(d, "{\"path\":\"x\",\"old\":\"a\",\"new\":\"b\",\"content\":\"c\",\"bogus\":1}"));
	}

	ck_assert(valid_args(&tool_read_file, "{\"path\":\"x\",\"offset\":0,\"limit\":1,\"encoding\":\"base64\"}"));
	ck_assert(!valid_args(&tool_read_file, "{}"));
	ck_assert(!valid_args(&tool_read_file, "{\"path\":1}"));
	ck_assert(!valid_args(&tool_read_file, "{\"path\":\"\"}"));
	ck_assert(!valid_args(&tool_read_file, "{\"path\":\"x\",\"offset\":-1}"));
	ck_assert(!valid_args(&tool_read_file, "{\"path\":\"x\",\"limit\":0}"));
	ck_assert(!valid_args(&tool_read_file, "{\"path\":\"x\",\"limit\":1.5}"));
	ck_assert(!valid_args(&tool_read_file, "{\"path\":\"x\",\"limit\":16777217}"));
	ck_assert(!valid_args(&tool_read_file, "{\"path\":\"x\",\"encoding\":\"latin1\"}"));

	ck_assert(valid_args(&tool_write_file, "{\"path\":\"x\",\"content\":\"\",\"create_dirs\":true}"));
	ck_assert(!valid_args(&tool_write_file, "{\"path\":\"x\"}"));
	ck_assert(!valid_args(&tool_write_file, "{\"path\":\"x\",\"content\":\"\",\"create_dirs\":\"yes\"}"));
	ck_assert(!valid_args(&tool_write_file, "{\"path\":\"x\",\"content\":\"\",\"encoding\":\"hex\"}"));

	ck_assert(valid_args(&tool_patch_file, "{\"path\":\"x\",\"old\":\"a\",\"new\":\"\"}"));
	ck_assert(!valid_args(&tool_patch_file, "{\"path\":\"x\",\"old\":\"\",\"new\":\"b\"}"));
	ck_assert(!valid_args(&tool_patch_file, "{\"path\":\"x\",\"old\":\"a\"}"));

	ck_assert(valid_args(&tool_list_dir, "{}"));
	ck_assert(valid_args(&tool_list_dir, "{\"path\":\"x\",\"recursive\":true,\"max_entries\":100000}"));
	ck_assert(!valid_args(&tool_list_dir, "{\"max_entries\":100001}"));
	ck_assert(!valid_args(&tool_list_dir, "{\"max_entries\":0}"));
	ck_assert(!valid_args(&tool_list_dir, "{\"recursive\":1}"));
}
END_TEST

static void add_tcases(Suite *s, bool fallback)
{
	TCase *tc = tcase_create(fallback ? "tools (no openat2)" : "tools");
	tcase_add_checked_fixture(tc, fallback ? setup_fallback : setup_kernel, teardown);
	tcase_add_test(tc, read_window);
	tcase_add_test(tc, read_counts_lines);
	tcase_add_test(tc, read_utf8);
	tcase_add_test(tc, base64_both_ways);
	tcase_add_test(tc, read_refusals);
	tcase_add_test(tc, write_new_and_replace);
	tcase_add_test(tc, write_create_dirs);
	tcase_add_test(tc, write_refusals);
	tcase_add_test(tc, patch_exactly_once);
	tcase_add_test(tc, list_flat_and_recursive);
	tcase_add_test(tc, list_bounded);
	tcase_add_test(tc, list_deeper_than_path_max);
	tcase_add_test(tc, list_refusals);
	tcase_add_test(tc, declarations);
	suite_add_tcase(s, tc);
}

/* Writes where the file system has no O_TMPFILE: under a temporary
 * name from the start. */
static void setup_no_tmpfile(void)
{
	setup_kernel();
	if (!deny_syscall_flags(SYS_openat, 2, __O_TMPFILE & ~O_DIRECTORY, EOPNOTSUPP))
		ck_abort_msg("no seccomp filters here");
}

/* Writes where an unnamed file cannot be given a name (no /proc, and no
 * capability for AT_EMPTY_PATH): written again, named from the start. */
static void setup_no_linkat(void)
{
	setup_kernel();
	if (!deny_syscall(SYS_linkat, EPERM))
		ck_abort_msg("no seccomp filters here");
}

int main(void)
{
	Suite *s = suite_create("workspace_tools");
	add_tcases(s, false);
	add_tcases(s, true);
	for (int i = 0; i < 2; i++) {
		TCase *tc = tcase_create(i ? "writes (no linkat)" : "writes (no O_TMPFILE)");
		tcase_add_checked_fixture(tc, i ? setup_no_linkat : setup_no_tmpfile, teardown);
		tcase_add_test(tc, write_new_and_replace);
		tcase_add_test(tc, write_create_dirs);
		tcase_add_test(tc, write_refusals);
		tcase_add_test(tc, patch_exactly_once);
		suite_add_tcase(s, tc);
	}
	return workspace_main(s);
}
