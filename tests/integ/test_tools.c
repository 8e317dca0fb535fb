/* SPDX-License-Identifier: MIT */
/*
 * The tools of CONTRACT §13 through the socket: search, glob, stat,
 * move_file, delete_file, make_dir, edit_file and read_file's line windows;
 * a search over a big tree that neither stalls other clients nor outlives
 * its cancel; and the workspace escape matrix run against every new path
 * argument (path, from, to): nothing outside the workspace is read,
 * listed, moved, deleted or created.
 */
#include <check.h>
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "proto/base/buf.h"
#include "tests/integ/escape.h"
#include "tests/integ/harness.h"
#include "tests/unit/check_main.h"

/* Writes run without asking, and the many failures asked for here do not
 * pause the tools. */
#define CFG_AUTO "{\"confirmation\":{\"default\":{\"write\":\"auto\",\"execute\":\"auto\"}}," \
		 "\"circuit\":{\"failures\":100000}}"

static bool ws_exists(struct tcd *d, const char *rel)
{
	char *p = tcd_ws_path(d, rel);
	struct stat st;
	bool ok = lstat(p, &st) == 0;
	free(p);
	return ok;
}

/* Sets the modification time of a workspace file, seconds since the epoch. */
static void set_mtime(struct tcd *d, const char *rel, time_t t)
{
	char *p = tcd_ws_path(d, rel);
	struct timespec ts[2] = { { t, 0 }, { t, 0 } };
	ck_assert(utimensat(AT_FDCWD, p, ts, AT_SYMLINK_NOFOLLOW) == 0);
	free(p);
}

/* --- search ----------------------------------------------------------------- */

START_TEST(search_basics)
{
	struct tcd d;
	tcd_start(&d, CFG_AUTO);
	tcd_put(&d, "src/a.c", "int main(void)\n{\n\treturn helper(1);\n}\n");
	tcd_put(&d, "src/b.h", "int helper(int x);\n/* HELPER docs */\n");
	tcd_put(&d, "README", "call helper() to help\n");
	free(tcd_write_ws(&d, "bin/blob", "helper\0\1\2", 9, 0));
	tcd_put(&d, ".git/config", "helper = yes\n");
	struct tcc *c = tcc_connect(&d);

	const struct json *r = tcc_call(c, "search", "{\"pattern\":\"helper\"}");
	tc_assert_ok(r);
	const struct json *sc = tj(r, "result.structuredContent");
	ck_assert_int_eq(tj_len(sc, "matches"), 3);
	/* stable order: by path, then line */
	ck_assert_pstr_eq(tj_str(sc, "matches.0.path"), "README");
	ck_assert_int_eq(tj_int(sc, "matches.0.line"), 1);
	ck_assert_int_eq(tj_int(sc, "matches.0.column"), 6);
	ck_assert_pstr_eq(tj_str(sc, "matches.1.path"), "src/a.c");
	ck_assert_int_eq(tj_int(sc, "matches.1.line"), 3);
	ck_assert_int_eq(tj_int(sc, "matches.1.column"), 9);
	ck_assert_pstr_eq(tj_str(sc, "matches.1.text"), "\treturn helper(1);");
	ck_assert_pstr_eq(tj_str(sc, "matches.2.path"), "src/b.h");
	ck_assert_int_eq(tj_int(sc, "files_searched"), 3);	/* not the binary, not .git */
	ck_assert(!tj_bool(sc, "truncated"));
	ck_assert_str_eq(tj_str(r, "result.content.0.text"),
			 "README\n1:call helper() to help\n\nsrc/a.c\n3:\treturn helper(1);\n\n"
			 "src/b.h\n1:int helper(int x);\n\n[3 matches shown, 3 files searched]\n");

	/* a regex, case-insensitive, with context */
	r = tcc_call(c, "search", "{\"pattern\":\"^int \\\\w+\\\\(\",\"path\":\"src\",\"context\":1}");
	tc_assert_ok(r);
	sc = tj(r, "result.structuredContent");
	ck_assert_int_eq(tj_len(sc, "matches"), 2);
	ck_assert_pstr_eq(tj_str(sc, "matches.0.path"), "src/a.c");
	ck_assert_int_eq(tj_int(sc, "matches.0.column"), 1);
	ck_assert(!tj_has(sc, "matches.0.before"));
	ck_assert_pstr_eq(tj_str(sc, "matches.0.after.0"), "{");
	r = tcc_call(c, "search", "{\"pattern\":\"HELPER\\\\b?\",\"case_insensitive\":true,\"glob\":\"*.h\"}");
	tc_assert_kind(r, "validation_error");	/* an assertion does not repeat: said so */
	ck_assert_msg(strstr(tj_str(r, "error.message"), "nothing to repeat"), "%s", tj_str(r, "error.message"));
	/* word boundaries */
	r = tcc_call(c, "search", "{\"pattern\":\"\\\\bhelp\\\\b\",\"output_mode\":\"count\"}");
	ck_assert_str_eq(tj_str(r, "result.content.0.text"), "README:1\n\n[1 file with matches shown, 3 files searched]\n");
	r = tcc_call(c, "search", "{\"pattern\":\"HELPER\",\"case_insensitive\":true,\"glob\":\"*.h\"}");
	tc_assert_ok(r);
	sc = tj(r, "result.structuredContent");
	ck_assert_int_eq(tj_len(sc, "matches"), 2);
	ck_assert_int_eq(tj_int(sc, "matches.1.line"), 2);
	ck_assert_int_eq(tj_int(sc, "matches.1.column"), 4);
	/* a regex's column: where the first match to end starts */
	r = tcc_call(c, "search", "{\"pattern\":\"h[a-z]+r\\\\(\",\"path\":\"README\"}");
	tc_assert_ok(r);
	ck_assert_int_eq(tj_int(r, "result.structuredContent.matches.0.column"), 6);

	/* a glob with a '/' selects by relative path; .git when asked */
	r = tcc_call(c, "search", "{\"pattern\":\"helper\",\"glob\":\"src/*.{c,x}\"}");
	ck_assert_int_eq(tj_len(r, "result.structuredContent.matches"), 1);
	r = tcc_call(c, "search", "{\"pattern\":\"helper\",\"glob\":\".git/*\"}");
	ck_assert_pstr_eq(tj_str(r, "result.structuredContent.matches.0.path"), ".git/config");

	/* max_results */
	r = tcc_call(c, "search", "{\"pattern\":\"e\",\"max_results\":2}");
	tc_assert_ok(r);
	ck_assert_int_eq(tj_len(r, "result.structuredContent.matches"), 2);
	ck_assert(tj_bool(r, "result.structuredContent.truncated"));

	/* errors the model can act on */
	r = tcc_call(c, "search", "{\"pattern\":\"(\"}");
	tc_assert_kind(r, "validation_error");
	ck_assert_msg(strstr(tj_str(r, "error.message"), "backslash"), "%s", tj_str(r, "error.message"));
	r = tcc_call(c, "search", "{\"pattern\":\"x\",\"path\":\"nope\"}");
	tc_assert_kind(r, "execution_error");
	tcc_close(c);
	tcd_finish(&d);
}
END_TEST

/* A search of a big tree: its matches stream as progress, another client is
 * answered while it runs, and a cancelled search ends at once. */
START_TEST(search_big_tree)
{
	struct tcd d;
	tcd_start(&d, CFG_AUTO);
	char *big = xmalloc(16384);
	for (size_t i = 0; i < 16383; i++)
		big[i] = i % 64 == 63 ? '\n' : 'a' + (char)(i % 23);
	big[16383] = '\0';
	for (int i = 0; i < 4000; i++) {
		char name[64];
		snprintf(name, sizeof(name), "t/d%02d/f%04d.txt", i % 40, i);
		tcd_put(&d, name, i % 500 == 7 ? "needle here\n" : big);
	}
	free(big);
	struct tcc *c = tcc_connect(&d), *other = tcc_connect(&d);

	int64_t id = tcc_send_request(c, "tools/call",
		"{\"name\":\"search\",\"arguments\":{\"pattern\":\"ne+dle\"},\"_meta\":{\"progressToken\":\"s\"}}");
	/* The other client is served while the search runs. */
	const struct json *r = tcc_call(other, "stat", "{\"path\":\"t\"}");
	tc_assert_ok(r);
	const struct json *resp = tcc_wait_id(c, tcc_fmt(c, "%lld", (long long)id), 30000);
	ck_assert_ptr_nonnull(resp);
	tc_assert_ok(resp);
	ck_assert_int_eq(tj_len(resp, "result.structuredContent.matches"), 8);
	ck_assert_int_eq(tj_int(resp, "result.structuredContent.files_searched"), 4000);
	ck_assert_uint_ge(tcc_count_notifications(c, "notifications/progress"), 1);
	const struct json *n = tcc_wait_notification(c, "notifications/progress", 1000);
	ck_assert_msg(strstr(tj_str(n, "params.message"), "needle here"), "%s", tj_str(n, "params.message"));

	/* Cancelled: the response says so without waiting for the walk. */
	id = tcc_send_request(c, "tools/call", "{\"name\":\"search\",\"arguments\":{\"pattern\":\"[q-z]{9}\"}}");
	tcc_send(c, tcc_fmt(c, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\","
			       "\"params\":{\"requestId\":%lld}}", (long long)id));
	resp = tcc_wait_id(c, tcc_fmt(c, "%lld", (long long)id), 10000);
	if (resp && tj_has(resp, "error"))
		tc_assert_kind(resp, "cancelled");
	tc_assert_ok(tcc_call(c, "stat", "{\"path\":\"t\"}"));
	tcc_close(other);
	tcc_close(c);
	tcd_finish(&d);
}
END_TEST

/* --- glob ------------------------------------------------------------------ */

/* search's output modes, types, context in the text, and the ignore files
 * and hidden entries it skips (glob the same). */
START_TEST(search_modes)
{
	struct tcd d;
	tcd_start(&d, CFG_AUTO);
	tcd_put(&d, "src/a.c", "one\ntwo key\nthree\nfour\nfive\nsix\nseven key\neight key\nnine\n");
	tcd_put(&d, "src/b.py", "key = 1\n");
	tcd_put(&d, "notes.md", "the key\n");
	tcd_put(&d, ".gitignore", "build/\n*.log\n!keep.log\n");
	tcd_put(&d, "src/.gitignore", "gen_*.c\n");
	tcd_put(&d, "src/.ignore", "secret.c\n");
	tcd_put(&d, ".git/info/exclude", "local.txt\n");
	tcd_put(&d, "build/out.c", "key\n");
	tcd_put(&d, "x.log", "key\n");
	tcd_put(&d, "keep.log", "key\n");
	tcd_put(&d, "src/gen_1.c", "key\n");
	tcd_put(&d, "src/secret.c", "key\n");
	tcd_put(&d, "local.txt", "key\n");
	tcd_put(&d, "src/deep/x.log", "key\n");
	tcd_put(&d, ".env", "key\n");
	tcd_put(&d, ".config/x.c", "key\n");
	set_mtime(&d, "src/a.c", 1000);
	set_mtime(&d, "src/b.py", 3000);
	set_mtime(&d, "notes.md", 2000);
	set_mtime(&d, "keep.log", 500);
	struct tcc *c = tcc_connect(&d);

	/* content, with context merged and groups apart */
	const struct json *r = tcc_call(c, "search", "{\"pattern\":\"key\",\"path\":\"src/a.c\",\"context\":1}");
	tc_assert_ok(r);
	ck_assert_str_eq(tj_str(r, "result.content.0.text"),
			 "src/a.c\n1-one\n2:two key\n3-three\n--\n6-six\n7:seven key\n8:eight key\n9-nine\n\n"
			 "[3 matches shown, 1 file searched]\n");
	/* files, newest first; the ignored and hidden are not searched */
	r = tcc_call(c, "search", "{\"pattern\":\"key\",\"output_mode\":\"files\"}");
	tc_assert_ok(r);
	ck_assert_str_eq(tj_str(r, "result.content.0.text"),
			 "src/b.py\nnotes.md\nsrc/a.c\nkeep.log\n\n[4 files with matches shown, 4 files searched]\n");
	ck_assert_str_eq(tj_str(r, "result.structuredContent.files.0"), "src/b.py");
	/* (.git, skipped whatever the flags, not counted) */
	ck_assert_int_eq(tj_int(r, "result.structuredContent.skipped"), 11);
	/* count */
	r = tcc_call(c, "search", "{\"pattern\":\"key\",\"output_mode\":\"count\",\"path\":\"src\"}");
	ck_assert_str_eq(tj_str(r, "result.content.0.text"),
			 "src/a.c:3\nsrc/b.py:1\n\n[2 files with matches shown, 2 files searched]\n");
	ck_assert_int_eq(tj_int(r, "result.structuredContent.counts.0.count"), 3);
	/* type */
	r = tcc_call(c, "search", "{\"pattern\":\"key\",\"type\":\"py\",\"output_mode\":\"files\"}");
	ck_assert_int_eq(tj_len(r, "result.structuredContent.files"), 1);
	r = tcc_call(c, "search", "{\"pattern\":\"key\",\"type\":\"cobol\"}");
	tc_assert_kind(r, "validation_error");
	/* no_ignore and hidden */
	r = tcc_call(c, "search", "{\"pattern\":\"key\",\"output_mode\":\"files\",\"no_ignore\":true}");
	ck_assert_int_eq(tj_len(r, "result.structuredContent.files"), 10);
	r = tcc_call(c, "search", "{\"pattern\":\"key\",\"output_mode\":\"files\",\"no_ignore\":true,"
			 "\"hidden\":true}");
	ck_assert_int_eq(tj_len(r, "result.structuredContent.files"), 12);
	r = tcc_call(c, "search", "{\"pattern\":\"key\",\"glob\":\".config/*\",\"output_mode\":\"files\"}");
	ck_assert_str_eq(tj_str(r, "result.structuredContent.files.0"), ".config/x.c");
	/* the ignore files above the searched directory count too */
	r = tcc_call(c, "search", "{\"pattern\":\"key\",\"path\":\"src/deep\",\"output_mode\":\"files\"}");
	ck_assert_int_eq(tj_len(r, "result.structuredContent.files"), 0);
	ck_assert_int_eq(tj_int(r, "result.structuredContent.skipped"), 1);
	r = tcc_call(c, "glob", "{\"pattern\":\"*\",\"path\":\"src/deep\",\"no_ignore\":true}");
	ck_assert_int_eq(tj_len(r, "result.structuredContent.paths"), 1);
	/* nothing found: what was skipped is said */
	r = tcc_call(c, "search", "{\"pattern\":\"key\",\"path\":\"build\"}");
	tc_assert_ok(r);
	r = tcc_call(c, "search", "{\"pattern\":\"nowhere\"}");
	ck_assert_msg(strstr(tj_str(r, "result.content.0.text"), "No matches in 4 files searched (11 entries were "
		      "skipped as ignored or hidden"), "%s", tj_str(r, "result.content.0.text"));

	/* glob skips the same */
	r = tcc_call(c, "glob", "{\"pattern\":\"**/*.c\"}");
	ck_assert_int_eq(tj_len(r, "result.structuredContent.paths"), 1);
	ck_assert_str_eq(tj_str(r, "result.structuredContent.paths.0"), "src/a.c");
	r = tcc_call(c, "glob", "{\"pattern\":\"**/*.c\",\"no_ignore\":true}");
	ck_assert_int_eq(tj_len(r, "result.structuredContent.paths"), 4);
	r = tcc_call(c, "glob", "{\"pattern\":\"**/*.o\"}");
	ck_assert_msg(strstr(tj_str(r, "result.content.0.text"), "No paths match (11 entries were skipped"), "%s",
		      tj_str(r, "result.content.0.text"));
	/* list_dir shows everything */
	r = tcc_call(c, "list_dir", "{}");
	ck_assert_msg(strstr(tj_str(r, "result.content.0.text"), "build"), "%s", tj_str(r, "result.content.0.text"));
	tcc_close(c);
	tcd_finish(&d);
}
END_TEST

/* Ignoring case folds non-ASCII letters too; \b in a search. */
START_TEST(search_unicode_case)
{
	struct tcd d;
	tcd_start(&d, CFG_AUTO);
	tcd_put(&d, "u.txt", "\xc3\x89T\xc3\x89 \xe2\x84\xaa" "elvin\nnothing\nstrasse STRASSE\n");
	struct tcc *c = tcc_connect(&d);
	const struct json *r = tcc_call(c, "search", "{\"pattern\":\"\xc3\xa9t\xc3\xa9\",\"case_insensitive\":true}");
	tc_assert_ok(r);
	ck_assert_str_eq(tj_str(r, "result.content.0.text"),
			 "u.txt\n1:\xc3\x89T\xc3\x89 \xe2\x84\xaa" "elvin\n\n[1 match shown, 1 file searched]\n");
	r = tcc_call(c, "search", "{\"pattern\":\"kelvin\\\\b\",\"case_insensitive\":true,\"output_mode\":\"count\"}");
	ck_assert_str_eq(tj_str(r, "result.content.0.text"), "u.txt:1\n\n[1 file with matches shown, 1 file searched]\n");
	r = tcc_call(c, "search", "{\"pattern\":\"\xc3\xa9t\xc3\xa9\"}");
	ck_assert_int_eq(tj_len(r, "result.structuredContent.matches"), 0);
	r = tcc_call(c, "search", "{\"pattern\":\"Strasse\",\"case_insensitive\":true}");
	ck_assert_int_eq(tj_int(r, "result.structuredContent.matches.0.line"), 3);
	ck_assert_int_eq(tj_int(r, "result.structuredContent.matches.0.column"), 1);
	tcc_close(c);
	tcd_finish(&d);
}
END_TEST

START_TEST(glob_basics)
{
	struct tcd d;
	tcd_start(&d, CFG_AUTO);
	tcd_put(&d, "src/a.c", "a");
	tcd_put(&d, "src/a.h", "a");
	tcd_put(&d, "src/lib/b.c", "b");
	tcd_put(&d, "src/lib/deep/c.c", "c");
	tcd_put(&d, "main.c", "m");
	tcd_put(&d, ".git/x.c", "g");
	set_mtime(&d, "src/a.c", 1000);
	set_mtime(&d, "src/a.h", 2000);
	set_mtime(&d, "src/lib/b.c", 3000);
	set_mtime(&d, "src/lib/deep/c.c", 500);
	set_mtime(&d, "main.c", 1500);
	struct tcc *c = tcc_connect(&d);

	const struct json *r = tcc_call(c, "glob", "{\"pattern\":\"**/*.c\"}");
	tc_assert_ok(r);
	const struct json *sc = tj(r, "result.structuredContent");
	ck_assert_int_eq(tj_len(sc, "paths"), 4);	/* newest first, .git skipped */
	ck_assert_pstr_eq(tj_str(sc, "paths.0"), "src/lib/b.c");
	ck_assert_pstr_eq(tj_str(sc, "paths.1"), "main.c");
	ck_assert_pstr_eq(tj_str(sc, "paths.2"), "src/a.c");
	ck_assert_pstr_eq(tj_str(sc, "paths.3"), "src/lib/deep/c.c");
	ck_assert(!tj_bool(sc, "truncated"));

	r = tcc_call(c, "glob", "{\"pattern\":\"src/*.{h,c}\"}");
	ck_assert_int_eq(tj_len(r, "result.structuredContent.paths"), 2);
	ck_assert_pstr_eq(tj_str(r, "result.structuredContent.paths.0"), "src/a.h");
	r = tcc_call(c, "glob", "{\"pattern\":\"*.c\"}");
	ck_assert_int_eq(tj_len(r, "result.structuredContent.paths"), 1);
	r = tcc_call(c, "glob", "{\"pattern\":\"**/?.[ch]\",\"path\":\"src/lib\"}");
	ck_assert_int_eq(tj_len(r, "result.structuredContent.paths"), 2);
	ck_assert_pstr_eq(tj_str(r, "result.structuredContent.paths.0"), "src/lib/b.c");
	r = tcc_call(c, "glob", "{\"pattern\":\"src/**\"}");	/* directories too */
	ck_assert_int_eq(tj_len(r, "result.structuredContent.paths"), 6);
	r = tcc_call(c, "glob", "{\"pattern\":\".git/*\"}");
	ck_assert_int_eq(tj_len(r, "result.structuredContent.paths"), 1);
	r = tcc_call(c, "glob", "{\"pattern\":\"**/*\",\"max_results\":2}");
	ck_assert_int_eq(tj_len(r, "result.structuredContent.paths"), 2);
	ck_assert(tj_bool(r, "result.structuredContent.truncated"));
	r = tcc_call(c, "glob", "{\"pattern\":\"*.zzz\"}");
	tc_assert_ok(r);
	ck_assert_int_eq(tj_len(r, "result.structuredContent.paths"), 0);
	r = tcc_call(c, "glob", "{\"pattern\":\"*\",\"path\":\"main.c\"}");
	tc_assert_kind(r, "execution_error");
	tcc_close(c);
	tcd_finish(&d);
}
END_TEST

/* --- stat, move, delete, mkdir ------------------------------------------------ */

START_TEST(stat_basics)
{
	struct tcd d;
	tcd_start(&d, CFG_AUTO);
	char *p = tcd_write_ws(&d, "f.txt", "hello", 5, 0640);
	free(p);
	set_mtime(&d, "f.txt", 86400);
	char *lp = tcd_ws_path(&d, "link");
	ck_assert(symlink("f.txt", lp) == 0);
	free(lp);
	struct tcc *c = tcc_connect(&d);

	const struct json *r = tcc_call(c, "stat", "{\"path\":\"f.txt\"}");
	tc_assert_ok(r);
	const struct json *sc = tj(r, "result.structuredContent");
	ck_assert_pstr_eq(tj_str(sc, "path"), "f.txt");
	ck_assert_pstr_eq(tj_str(sc, "type"), "file");
	ck_assert_int_eq(tj_int(sc, "size"), 5);
	ck_assert_pstr_eq(tj_str(sc, "mode"), "0640");
	ck_assert_pstr_eq(tj_str(sc, "mtime"), "1970-01-02T00:00:00.000Z");
	ck_assert(!tj_has(sc, "target"));
	r = tcc_call(c, "stat", "{\"path\":\"link\"}");
	ck_assert_pstr_eq(tj_str(r, "result.structuredContent.type"), "symlink");
	ck_assert_pstr_eq(tj_str(r, "result.structuredContent.target"), "f.txt");
	r = tcc_call(c, "stat", "{\"path\":\".\"}");
	ck_assert_pstr_eq(tj_str(r, "result.structuredContent.type"), "dir");
	r = tcc_call(c, "stat", "{\"path\":\"nope\"}");
	tc_assert_kind(r, "execution_error");
	ck_assert_msg(strstr(tj_str(r, "error.message"), "does not exist"), "%s", tj_str(r, "error.message"));
	tcc_close(c);
	tcd_finish(&d);
}
END_TEST

START_TEST(move_basics)
{
	struct tcd d;
	tcd_start(&d, CFG_AUTO);
	tcd_put(&d, "a.txt", "A");
	tcd_put(&d, "b.txt", "B");
	tcd_put(&d, "dir/x.txt", "X");
	struct tcc *c = tcc_connect(&d);

	const struct json *r = tcc_call(c, "move_file", "{\"from\":\"a.txt\",\"to\":\"dir/a2.txt\"}");
	tc_assert_ok(r);
	ck_assert_pstr_eq(tj_str(r, "result.structuredContent.from"), "a.txt");
	ck_assert_pstr_eq(tj_str(r, "result.structuredContent.to"), "dir/a2.txt");
	ck_assert(!ws_exists(&d, "a.txt"));
	char *got = tcd_read(&d, "dir/a2.txt", NULL);
	ck_assert_pstr_eq(got, "A");
	free(got);

	/* no replacing unless asked */
	r = tcc_call(c, "move_file", "{\"from\":\"b.txt\",\"to\":\"dir/a2.txt\"}");
	tc_assert_kind(r, "execution_error");
	ck_assert_msg(strstr(tj_str(r, "error.message"), "overwrite"), "%s", tj_str(r, "error.message"));
	got = tcd_read(&d, "dir/a2.txt", NULL);
	ck_assert_pstr_eq(got, "A");
	free(got);
	tc_assert_ok(tcc_call(c, "move_file", "{\"from\":\"b.txt\",\"to\":\"dir/a2.txt\",\"overwrite\":true}"));
	got = tcd_read(&d, "dir/a2.txt", NULL);
	ck_assert_pstr_eq(got, "B");
	free(got);

	/* a directory, with a trailing slash */
	tc_assert_ok(tcc_call(c, "move_file", "{\"from\":\"dir/\",\"to\":\"moved\"}"));
	ck_assert(ws_exists(&d, "moved/x.txt"));
	r = tcc_call(c, "move_file", "{\"from\":\"moved\",\"to\":\"moved/inner\"}");
	tc_assert_kind(r, "execution_error");
	r = tcc_call(c, "move_file", "{\"from\":\"nope\",\"to\":\"x\"}");
	tc_assert_kind(r, "execution_error");
	r = tcc_call(c, "move_file", "{\"from\":\"missing/dir/f\",\"to\":\"x\"}");
	tc_assert_kind(r, "execution_error");
	r = tcc_call(c, "move_file", "{\"from\":\"moved/x.txt\",\"to\":\"nodir/x.txt\"}");
	tc_assert_kind(r, "execution_error");
	ck_assert_msg(strstr(tj_str(r, "error.message"), "make_dir"), "%s", tj_str(r, "error.message"));
	r = tcc_call(c, "move_file", "{\"from\":\".\",\"to\":\"x\"}");
	tc_assert_kind(r, "execution_error");
	ck_assert_msg(strstr(tj_str(r, "error.message"), "root"), "%s", tj_str(r, "error.message"));
	tcc_close(c);
	tcd_finish(&d);
}
END_TEST

START_TEST(delete_basics)
{
	struct tcd d;
	tcd_start(&d, CFG_AUTO);
	tcd_put(&d, "f.txt", "F");
	tcd_put(&d, "tree/a/b/c.txt", "C");
	tcd_put(&d, "tree/a/d.txt", "D");
	char *outside = xasprintf("%s/outside", d.dir);
	ck_assert(mkdir(outside, 0755) == 0);
	char *keep = xasprintf("%s/keep.txt", outside);
	tc_write_file_atomic(keep, "K", 1);
	char *lp = tcd_ws_path(&d, "tree/out");
	ck_assert(symlink(outside, lp) == 0);
	free(lp);
	char *empty = tcd_ws_path(&d, "empty");
	ck_assert(mkdir(empty, 0755) == 0);
	free(empty);
	struct tcc *c = tcc_connect(&d);

	const struct json *r = tcc_call(c, "delete_file", "{\"path\":\"f.txt\"}");
	tc_assert_ok(r);
	ck_assert_int_eq(tj_int(r, "result.structuredContent.deleted"), 1);
	ck_assert(!ws_exists(&d, "f.txt"));
	tc_assert_ok(tcc_call(c, "delete_file", "{\"path\":\"empty\"}"));
	ck_assert(!ws_exists(&d, "empty"));

	r = tcc_call(c, "delete_file", "{\"path\":\"tree\"}");
	tc_assert_kind(r, "execution_error");
	ck_assert_msg(strstr(tj_str(r, "error.message"), "recursive"), "%s", tj_str(r, "error.message"));
	ck_assert(ws_exists(&d, "tree/a/b/c.txt"));
	r = tcc_call(c, "delete_file", "{\"path\":\"tree/\",\"recursive\":true}");
	tc_assert_ok(r);
	ck_assert_int_eq(tj_int(r, "result.structuredContent.deleted"), 6);	/* tree a b c.txt d.txt out */
	ck_assert(!ws_exists(&d, "tree"));
	/* the symlink went, not what it pointed to */
	char *got = tcd_read(&d, keep, NULL);
	ck_assert_pstr_eq(got, "K");
	free(got);

	static const char *const roots[] = { "\".\"", "\"./\"", "\"sub/..\"" };
	tcd_put(&d, "sub/x", "x");
	for (size_t i = 0; i < ELEMENTSOF(roots); i++) {
		r = tcc_call(c, "delete_file", tcc_fmt(c, "{\"path\":%s,\"recursive\":true}", roots[i]));
		tc_assert_kind(r, "permission_denied");
		ck_assert_msg(strstr(tj_str(r, "error.message"), "root"), "%s", tj_str(r, "error.message"));
	}
	char *abs = tj_quote(d.ws);
	r = tcc_call(c, "delete_file", tcc_fmt(c, "{\"path\":%s,\"recursive\":true}", abs));
	tc_assert_kind(r, "permission_denied");
	free(abs);
	ck_assert(ws_exists(&d, "sub/x"));
	r = tcc_call(c, "delete_file", "{\"path\":\"nope\"}");
	tc_assert_kind(r, "execution_error");
	free(keep);
	free(outside);
	tcc_close(c);
	tcd_finish(&d);
}
END_TEST

START_TEST(make_dir_basics)
{
	struct tcd d;
	tcd_start(&d, CFG_AUTO);
	tcd_put(&d, "file", "f");
	struct tcc *c = tcc_connect(&d);
	const struct json *r = tcc_call(c, "make_dir", "{\"path\":\"a/b/c\"}");
	tc_assert_ok(r);
	ck_assert(tj_bool(r, "result.structuredContent.created"));
	ck_assert_pstr_eq(tj_str(r, "result.structuredContent.path"), "a/b/c");
	ck_assert(ws_exists(&d, "a/b/c"));
	r = tcc_call(c, "make_dir", "{\"path\":\"a/b/c/\"}");
	tc_assert_ok(r);
	ck_assert(!tj_bool(r, "result.structuredContent.created"));
	r = tcc_call(c, "make_dir", "{\"path\":\"x/y\",\"parents\":false}");
	tc_assert_kind(r, "execution_error");
	ck_assert_msg(strstr(tj_str(r, "error.message"), "parents"), "%s", tj_str(r, "error.message"));
	ck_assert(!ws_exists(&d, "x"));
	r = tcc_call(c, "make_dir", "{\"path\":\"file\"}");
	tc_assert_kind(r, "execution_error");
	r = tcc_call(c, "make_dir", "{\"path\":\".\"}");
	tc_assert_ok(r);
	ck_assert(!tj_bool(r, "result.structuredContent.created"));
	tcc_close(c);
	tcd_finish(&d);
}
END_TEST

/* --- edit_file and read_file's lines ---------------------------------------------- */

START_TEST(edit_basics)
{
	struct tcd d;
	tcd_start(&d, CFG_AUTO);
	char *p = tcd_write_ws(&d, "e.c", "one\ntwo\nthree\ntwo\n", 18, 0751);
	free(p);
	struct tcc *c = tcc_connect(&d);

	/* dry run: the diff, nothing written */
	const char *edits = "[{\"old\":\"one\",\"new\":\"ONE\"},{\"old\":\"two\",\"new\":\"2\",\"replace_all\":true}]";
	const struct json *r = tcc_call(c, "edit_file", tcc_fmt(c, "{\"path\":\"e.c\",\"edits\":%s,\"dry_run\":true}", edits));
	tc_assert_ok(r);
	const struct json *sc = tj(r, "result.structuredContent");
	ck_assert_int_eq(tj_int(sc, "replacements"), 3);
	ck_assert_pstr_eq(tj_str(sc, "diff"),
			  "--- a/e.c\n+++ b/e.c\n@@ -1,4 +1,4 @@\n-one\n-two\n+ONE\n+2\n three\n-two\n+2\n");
	char *got = tcd_read(&d, "e.c", NULL);
	ck_assert_pstr_eq(got, "one\ntwo\nthree\ntwo\n");
	free(got);

	r = tcc_call(c, "edit_file", tcc_fmt(c, "{\"path\":\"e.c\",\"edits\":%s}", edits));
	tc_assert_ok(r);
	got = tcd_read(&d, "e.c", NULL);
	ck_assert_pstr_eq(got, "ONE\n2\nthree\n2\n");
	free(got);
	char *ep = tcd_ws_path(&d, "e.c");
	struct stat st;
	ck_assert(stat(ep, &st) == 0);
	ck_assert_int_eq(st.st_mode & 07777, 0751);
	free(ep);

	/* all or nothing: the second edit fails, the first is not applied */
	r = tcc_call(c, "edit_file", "{\"path\":\"e.c\",\"edits\":[{\"old\":\"three\",\"new\":\"3\"},"
				     "{\"old\":\"2\",\"new\":\"two\"}]}");
	tc_assert_kind(r, "execution_error");
	ck_assert_msg(strstr(tj_str(r, "error.message"), "occurs 2 times"), "%s", tj_str(r, "error.message"));
	ck_assert_msg(strstr(tj_str(r, "error.message"), "edit 2 of 2"), "%s", tj_str(r, "error.message"));
	ck_assert_int_eq(tj_int(r, "error.data.occurrences"), 2);
	r = tcc_call(c, "edit_file", "{\"path\":\"e.c\",\"edits\":[{\"old\":\"zzz\",\"new\":\"3\"}]}");
	tc_assert_kind(r, "execution_error");
	ck_assert_msg(strstr(tj_str(r, "error.message"), "occurs 0 times"), "%s", tj_str(r, "error.message"));
	got = tcd_read(&d, "e.c", NULL);
	ck_assert_pstr_eq(got, "ONE\n2\nthree\n2\n");
	free(got);
	r = tcc_call(c, "edit_file", "{\"path\":\"new.c\",\"edits\":[{\"old\":\"a\",\"new\":\"b\"}]}");
	tc_assert_kind(r, "execution_error");
	ck_assert_msg(strstr(tj_str(r, "error.message"), "write_file"), "%s", tj_str(r, "error.message"));
	tcc_close(c);
	tcd_finish(&d);
}
END_TEST

START_TEST(read_lines)
{
	struct tcd d;
	tcd_start(&d, CFG_AUTO);
	tcd_put(&d, "l.txt", "l1\nl2\nl3\nl4\nl5");
	struct tcc *c = tcc_connect(&d);
	const struct json *r = tcc_call(c, "read_file", "{\"path\":\"l.txt\",\"line\":2,\"lines\":2}");
	tc_assert_ok(r);
	const struct json *sc = tj(r, "result.structuredContent");
	ck_assert_pstr_eq(tj_str(sc, "content"), "l2\nl3\n");
	ck_assert_int_eq(tj_int(sc, "first_line"), 2);
	ck_assert_int_eq(tj_int(sc, "total_lines"), 5);
	ck_assert(tj_bool(sc, "truncated"));	/* lines 4 and 5 follow */
	ck_assert_int_eq(tj_int(sc, "next_line"), 4);
	r = tcc_call(c, "read_file", "{\"path\":\"l.txt\",\"line\":4}");
	ck_assert_pstr_eq(tj_str(r, "result.structuredContent.content"), "l4\nl5");
	r = tcc_call(c, "read_file", "{\"path\":\"l.txt\",\"line\":9}");
	ck_assert_pstr_eq(tj_str(r, "result.structuredContent.content"), "");
	ck_assert_int_eq(tj_int(r, "result.structuredContent.total_lines"), 5);
	r = tcc_call(c, "read_file", "{\"path\":\"l.txt\",\"lines\":1,\"limit\":1}");
	ck_assert_pstr_eq(tj_str(r, "result.structuredContent.content"), "l");
	ck_assert(tj_bool(r, "result.structuredContent.truncated"));
	ck_assert_int_eq(tj_int(r, "result.structuredContent.next_offset"), 1);
	r = tcc_call(c, "read_file", "{\"path\":\"l.txt\",\"line\":2,\"offset\":3}");
	tc_assert_kind(r, "validation_error");
	/* by default a window by lines too; by bytes, no line fields */
	r = tcc_call(c, "read_file", "{\"path\":\"l.txt\"}");
	ck_assert_int_eq(tj_int(r, "result.structuredContent.first_line"), 1);
	ck_assert_pstr_eq(tj_str(r, "result.content.0.text"), "     1\tl1\n     2\tl2\n     3\tl3\n     4\tl4\n     5\tl5");
	r = tcc_call(c, "read_file", "{\"path\":\"l.txt\",\"offset\":0}");
	ck_assert(!tj_has(r, "result.structuredContent.first_line"));
	ck_assert_pstr_eq(tj_str(r, "result.content.0.text"), "l1\nl2\nl3\nl4\nl5");
	tcc_close(c);
	tcd_finish(&d);
}
END_TEST

/* read_file's text: numbered lines, a window that says how to read on, the
 * configured default window, long lines cut, binary files described and
 * images shown. */
START_TEST(read_text)
{
	struct tcd d;
	tcd_start(&d, "{\"limits\":{\"read_default_lines\":3,\"read_default_bytes\":1024}}");
	struct buf big = {0};
	for (int i = 1; i <= 10; i++)
		buf_printf(&big, "line %d\n", i);
	tcd_put(&d, "ten.txt", buf_head(&big));
	buf_free(&big);
	struct tcc *c = tcc_connect(&d);

	const struct json *r = tcc_call(c, "read_file", "{\"path\":\"ten.txt\"}");
	tc_assert_ok(r);
	ck_assert_pstr_eq(tj_str(r, "result.content.0.text"),
			  "     1\tline 1\n     2\tline 2\n     3\tline 3\n"
			  "[Lines 1-3 of 10 shown; read on with {\"line\": 4}]");
	ck_assert(tj_bool(r, "result.structuredContent.truncated"));
	ck_assert_int_eq(tj_int(r, "result.structuredContent.next_line"), 4);
	ck_assert_pstr_eq(tj_str(r, "result.structuredContent.content"), "line 1\nline 2\nline 3\n");
	r = tcc_call(c, "read_file", "{\"path\":\"ten.txt\",\"line\":9,\"line_numbers\":false}");
	ck_assert_pstr_eq(tj_str(r, "result.content.0.text"), "line 9\nline 10\n");
	ck_assert(!tj_bool(r, "result.structuredContent.truncated"));

	/* the byte window cuts at a whole line */
	struct buf wide = {0};
	for (int i = 0; i < 3; i++) {
		for (int k = 0; k < 400; k++)
			buf_putc(&wide, 'a' + i);
		buf_putc(&wide, '\n');
	}
	tcd_put(&d, "wide.txt", buf_head(&wide));
	buf_free(&wide);
	r = tcc_call(c, "read_file", "{\"path\":\"wide.txt\"}");
	ck_assert_int_eq(tj_int(r, "result.structuredContent.next_line"), 3);
	ck_assert_msg(strstr(tj_str(r, "result.content.0.text"), "\n[Lines 1-2 of 3 shown; read on with {\"line\": 3}]"),
		      "%s", tj_str(r, "result.content.0.text"));

	/* a line longer than 2000 characters is cut in the text only */
	struct buf longl = {0};
	for (int k = 0; k < 2100; k++)
		buf_putc(&longl, 'x');
	tcd_put(&d, "long.txt", buf_head(&longl));
	r = tcc_call(c, "read_file", "{\"path\":\"long.txt\",\"limit\":4096,\"line\":1}");
	ck_assert_msg(strstr(tj_str(r, "result.content.0.text"), "x [... line cut: 2000 of its 2100 characters shown]"),
		      "%s", tj_str(r, "result.content.0.text"));
	ck_assert_uint_eq(strlen(tj_str(r, "result.structuredContent.content")), 2100);
	buf_free(&longl);

	/* binary: described; base64 still reads it */
	free(tcd_write_ws(&d, "prog", "\x7f" "ELF\x02\x01\x01\0\0\0", 10, 0755));
	r = tcc_call(c, "read_file", "{\"path\":\"prog\"}");
	tc_assert_ok(r);
	ck_assert_pstr_eq(tj_str(r, "result.content.0.text"),
			  "'prog' is a binary file (ELF executable or object, 10 bytes), not shown as text; "
			  "read it with {\"encoding\": \"base64\"} for its bytes.");
	ck_assert(tj_bool(r, "result.structuredContent.binary"));
	r = tcc_call(c, "read_file", "{\"path\":\"prog\",\"encoding\":\"base64\"}");
	ck_assert_pstr_eq(tj_str(r, "result.structuredContent.content"), "f0VMRgIBAQAAAA==");

	/* an image is shown as one without base64 */
	static const char png[] = "\x89PNG\r\n\x1a\n\0\0\0\rIHDR";
	free(tcd_write_ws(&d, "logo.png", png, sizeof(png) - 1, 0));
	r = tcc_call(c, "read_file", "{\"path\":\"logo.png\"}");
	tc_assert_ok(r);
	ck_assert_pstr_eq(tj_str(r, "result.content.0.type"), "image");
	ck_assert_pstr_eq(tj_str(r, "result.content.0.mimeType"), "image/png");
	tcc_close(c);
	tcd_finish(&d);
}
END_TEST

/* A prompting edit_file, and write_file over an existing file, carry the
 * diff they would make in their confirmation request; toolcallctl approve
 * shows it. */
START_TEST(confirmation_diff)
{
	struct tcd d;
	tcd_start(&d, "{\"circuit\":{\"failures\":100000}}");	/* writes prompt */
	tcd_put(&d, "c.txt", "alpha\nbeta\n");
	struct tcc *ap = tcc_connect(&d), *c = tcc_connect(&d);
	tc_assert_ok(tcc_request(ap, "events/subscribe", "{\"types\":[\"tool.confirmation_requested\"]}"));

	int64_t id = tcc_send_request(c, "tools/call", "{\"name\":\"edit_file\",\"arguments\":{\"path\":\"c.txt\","
					     "\"edits\":[{\"old\":\"beta\",\"new\":\"gamma\"}]}}");
	const struct json *n = tcc_wait_notification(ap, "notifications/event", 5000);
	ck_assert_ptr_nonnull(n);
	ck_assert_pstr_eq(tj_str(n, "params.type"), "tool.confirmation_requested");
	ck_assert_pstr_eq(tj_str(n, "params.diff"), "--- a/c.txt\n+++ b/c.txt\n@@ -1,2 +1,2 @@\n alpha\n-beta\n+gamma\n");
	char *rid = tj_quote(tj_str(n, "params.requestId"));
	tc_assert_ok(tcc_request(ap, "confirmations/resolve", tcc_fmt(ap, "{\"requestId\":%s,\"decision\":\"allow\"}", rid)));
	free(rid);
	tc_assert_ok(tcc_wait_id(c, tcc_fmt(c, "%lld", (long long)id), 5000));
	char *got = tcd_read(&d, "c.txt", NULL);
	ck_assert_pstr_eq(got, "alpha\ngamma\n");
	free(got);

	id = tcc_send_request(c, "tools/call", "{\"name\":\"write_file\",\"arguments\":{\"path\":\"c.txt\","
					     "\"content\":\"alpha\\n\"}}");
	n = tcc_wait_notification(ap, "notifications/event", 5000);
	ck_assert_ptr_nonnull(n);
	ck_assert_pstr_eq(tj_str(n, "params.diff"), "--- a/c.txt\n+++ b/c.txt\n@@ -1,2 +1 @@\n alpha\n-gamma\n");
	rid = tj_quote(tj_str(n, "params.requestId"));
	tc_assert_ok(tcc_request(ap, "confirmations/resolve", tcc_fmt(ap, "{\"requestId\":%s,\"decision\":\"deny\"}", rid)));
	free(rid);
	tc_assert_kind(tcc_wait_id(c, tcc_fmt(c, "%lld", (long long)id), 5000), "user_denied");

	/* a new file: no diff */
	id = tcc_send_request(c, "tools/call", "{\"name\":\"write_file\",\"arguments\":{\"path\":\"new.txt\","
					     "\"content\":\"x\"}}");
	n = tcc_wait_notification(ap, "notifications/event", 5000);
	ck_assert_ptr_nonnull(n);
	ck_assert(!tj_has(n, "params.diff"));
	rid = tj_quote(tj_str(n, "params.requestId"));
	tc_assert_ok(tcc_request(ap, "confirmations/resolve", tcc_fmt(ap, "{\"requestId\":%s,\"decision\":\"deny\"}", rid)));
	free(rid);
	tc_assert_kind(tcc_wait_id(c, tcc_fmt(c, "%lld", (long long)id), 5000), "user_denied");
	tcc_close(ap);
	tcc_close(c);
	tcd_finish(&d);
}
END_TEST

/* The new tools in tools/list, with their side effects. */
START_TEST(listed)
{
	struct tcd d;
	tcd_start(&d, CFG_AUTO);
	struct tcc *c = tcc_connect(&d);
	const struct json *r = tcc_request(c, "tools/list", NULL);
	static const struct {
		const char *name, *effect;
	} want[] = {
		{ "search", "read" }, { "glob", "read" }, { "stat", "read" }, { "move_file", "write" },
		{ "delete_file", "write" }, { "make_dir", "write" }, { "edit_file", "write" },
	};
	const struct json *tools = tj(r, "result.tools");
	for (size_t i = 0; i < ELEMENTSOF(want); i++) {
		bool found = false;
		for (size_t k = 0; k < tools->u.arr.n; k++) {
			const struct json *t = tools->u.arr.items[k];
			if (!str_eq(tj_str(t, "name"), want[i].name))
				continue;
			found = true;
			ck_assert_msg(strlen(tj_str(t, "description")) > 100, "%s: a short description", want[i].name);
			const char *eff = tj_str(t, "_meta.toolcalld/sideEffects");
			if (eff)
				ck_assert_str_eq(eff, want[i].effect);
		}
		ck_assert_msg(found, "%s not listed", want[i].name);
	}
	tcc_close(c);
	tcd_finish(&d);
}
END_TEST

/* --- the escape matrix ------------------------------------------------------- */

/* Every new path argument, for a path (JSON text) that leads out. */
static void all_denied_at(struct escape *e, const char *p, int line)
{
	struct tcc *c = e->c;
	escape_denied_at(e, "search", tcc_fmt(c, "{\"pattern\":\"TOP\",\"path\":%s}", p), line);
	escape_denied_at(e, "glob", tcc_fmt(c, "{\"pattern\":\"**\",\"path\":%s}", p), line);
	escape_denied_at(e, "stat", tcc_fmt(c, "{\"path\":%s}", p), line);
	escape_denied_at(e, "move_file", tcc_fmt(c, "{\"from\":%s,\"to\":\"stolen\"}", p), line);
	escape_denied_at(e, "move_file", tcc_fmt(c, "{\"from\":\"inside.txt\",\"to\":%s}", p), line);
	escape_denied_at(e, "move_file", tcc_fmt(c, "{\"from\":\"inside.txt\",\"to\":%s,\"overwrite\":true}", p), line);
	escape_denied_at(e, "delete_file", tcc_fmt(c, "{\"path\":%s,\"recursive\":true}", p), line);
	escape_denied_at(e, "make_dir", tcc_fmt(c, "{\"path\":%s}", p), line);
	escape_denied_at(e, "edit_file", tcc_fmt(c, "{\"path\":%s,\"edits\":[{\"old\":\"TOP\",\"new\":\"PWNED\"}]}", p), line);
	escape_denied_at(e, "read_file", tcc_fmt(c, "{\"path\":%s,\"line\":1}", p), line);
	ck_assert_msg(ws_exists(&e->d, "inside.txt"), "line %d: inside.txt was moved", line);
}
#define all_denied(e, p) all_denied_at((e), (p), __LINE__)

START_TEST(escape_matrix)
{
	struct escape e;
	escape_setup(&e, CFG_AUTO, "inside TOP\n");
	static const char *const out[] = {
		"\"../outside/secret.txt\"", "\"../outside\"", "\"sub/../../outside/secret.txt\"",
		"\"../../../../../../etc/passwd\"", "\"/etc/passwd\"", "\"/tmp\"",
		"\"abs_dir/secret.txt\"", "\"rel_dir/secret.txt\"", "\"root_link/etc/passwd\"",
		"\"proc_root/etc/passwd\"", "\"/proc/self/root/etc/passwd\"", "\"abs_dir/new\"",
		"\"dangling_dir/x\"", "\"rel_dir/newsub/new.txt\"", "\"../ws-evil/x\"",
		"\"inside.txt\\u0000../../etc/passwd\"", "\"sub\\u0000\"",
	};
	for (size_t i = 0; i < ELEMENTSOF(out); i++)
		all_denied(&e, out[i]);
	char *q = tj_quote(e.secret);
	all_denied(&e, q);
	free(q);

	/* A final symlink leading out: tools that read follow it (refused),
	 * the others act on the link itself and never on what it names. */
	struct tcc *c = e.c;
	escape_denied(&e, "search", "{\"pattern\":\"TOP\",\"path\":\"abs_file\"}");
	escape_denied(&e, "glob", "{\"pattern\":\"*\",\"path\":\"rel_dir\"}");
	escape_denied(&e, "edit_file", "{\"path\":\"rel_file\",\"edits\":[{\"old\":\"TOP\",\"new\":\"X\"}]}");
	/* a link is there already: not made through it */
	tc_assert_kind(tcc_call(c, "make_dir", "{\"path\":\"dangling_dir\"}"), "execution_error");
	const struct json *r = tcc_call(c, "stat", "{\"path\":\"abs_dir\"}");
	tc_assert_ok(r);
	ck_assert_pstr_eq(tj_str(r, "result.structuredContent.type"), "symlink");
	tc_assert_ok(tcc_call(c, "move_file", "{\"from\":\"rel_file\",\"to\":\"sub/moved_link\"}"));
	tc_assert_ok(tcc_call(c, "delete_file", "{\"path\":\"sub/moved_link\"}"));
	tc_assert_ok(tcc_call(c, "delete_file", "{\"path\":\"abs_dir\",\"recursive\":true}"));
	/* the searching tools do not follow links met on the way */
	r = tcc_call(c, "search", "{\"pattern\":\"SECRET\"}");
	tc_assert_ok(r);
	ck_assert_int_eq(tj_len(r, "result.structuredContent.matches"), 0);
	r = tcc_call(c, "glob", "{\"pattern\":\"**/secret*\"}");
	ck_assert_int_eq(tj_len(r, "result.structuredContent.paths"), 0);
	escape_teardown(&e);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("integ_tools");
	TCase *tc = tcase_create("tools");
	tcase_add_test(tc, search_basics);
	tcase_add_test(tc, search_big_tree);
	tcase_add_test(tc, glob_basics);
	tcase_add_test(tc, stat_basics);
	tcase_add_test(tc, move_basics);
	tcase_add_test(tc, delete_basics);
	tcase_add_test(tc, make_dir_basics);
	tcase_add_test(tc, edit_basics);
	tcase_add_test(tc, search_modes);
	tcase_add_test(tc, search_unicode_case);
	tcase_add_test(tc, read_lines);
	tcase_add_test(tc, read_text);
	tcase_add_test(tc, listed);
	tcase_add_test(tc, confirmation_diff);
	suite_add_tcase(s, tc);
	tc = tcase_create("escape");
	tcase_add_test(tc, escape_matrix);
	suite_add_tcase(s, tc);
	return run_suite(s);
}
