/* SPDX-License-Identifier: MIT */
/*
 * Calls of the memory tool for its integration tests (test_memory.c,
 * test_memory_store.c): each returns the result's text, the call itself
 * having succeeded, and asserts whether the result is an error.
 */
#ifndef TC_TEST_MEMORY_CALLS_H
#define TC_TEST_MEMORY_CALLS_H

#include <check.h>
#include <stdbool.h>
#include <string.h>

#include "tests/integ/harness.h"

/* Runs the memory tool with args; returns the result's text and sets
 * *is_error. */
static inline const char *mem(struct tcc *c, const char *args, bool *is_error)
{
	const struct json *r = tcc_call(c, "memory", args);
	tc_assert_ok(r);
	*is_error = tj_bool(r, "result.isError");
	const char *text = tj_str(r, "result.content.0.text");
	ck_assert_ptr_nonnull(text);
	return text;
}

/* As mem(), asserting the result is not an error. */
static inline const char *mem_ok(struct tcc *c, const char *args)
{
	bool err;
	const char *text = mem(c, args, &err);
	ck_assert_msg(!err, "memory %s failed: %s", args, text);
	return text;
}

/* As mem(), asserting an error whose text holds want. */
static inline void mem_err(struct tcc *c, const char *args, const char *want)
{
	bool err;
	const char *text = mem(c, args, &err);
	ck_assert_msg(err, "memory %s did not fail: %s", args, text);
	ck_assert_msg(strstr(text, want), "memory %s: '%s' lacks '%s'", args, text, want);
}

/* Asserts that the listing t has, after its header, want lines, each
 * "SIZE\t/memories..." with no other tab nor carriage return in it. */
static inline void mem_assert_listing_lines(const char *t, int want)
{
	int lines = 0;
	for (const char *q = strchr(t, '\n'); q; q = strchr(q, '\n')) {
		q++;
		size_t len = strcspn(q, "\n");
		const char *tab = memchr(q, '\t', len);
		ck_assert_msg(*q >= '0' && *q <= '9' && tab && str_has_prefix(tab, "\t/memories") &&
			      !memchr(tab + 1, '\t', len - (size_t)(tab + 1 - q)) && !memchr(q, '\r', len), "%s", t);
		lines++;
	}
	ck_assert_msg(lines == want, "%d lines, not %d: %s", lines, want, t);
}

/* The view of /memories/t.md as "one\ntwo\nthree\n" shows it. */
#define MEM_T_VIEW "Here's the content of /memories/t.md with line numbers:\n     1\tone\n     2\ttwo\n     3\tthree"

/*
 * Every write keeps memory text (UTF-8, no NUL byte): a lone surrogate
 * escape (which decodes to bytes that are not UTF-8) or a NUL in what
 * create, str_replace or insert would write is refused with the same
 * error naming the argument, and the file stays as it was, still
 * readable and editable.
 */
static inline void mem_assert_text_only(struct tcc *c)
{
	mem_ok(c, "{\"command\":\"create\",\"path\":\"/memories/t.md\",\"file_text\":\"one\\ntwo\\nthree\\n\"}");
	static const struct { const char *args, *want; } refused[] = {
		{ "\"command\":\"create\",\"path\":\"/memories/t.md\",\"file_text\":\"\\udc80\"",
		  "file_text is not UTF-8 text; memory holds text only." },
		{ "\"command\":\"str_replace\",\"path\":\"/memories/t.md\",\"old_str\":\"two\",\"new_str\":\"\\udc80\"",
		  "new_str is not UTF-8 text; memory holds text only." },
		{ "\"command\":\"str_replace\",\"path\":\"/memories/t.md\",\"old_str\":\"two\",\"new_str\":\"x\\udc00y\"",
		  "new_str is not UTF-8 text; memory holds text only." },
		{ "\"command\":\"insert\",\"path\":\"/memories/t.md\",\"insert_line\":1,\"insert_text\":\"\\udfff\"",
		  "insert_text is not UTF-8 text; memory holds text only." },
		{ "\"command\":\"create\",\"path\":\"/memories/t.md\",\"file_text\":\"a\\u0000b\\n\"",
		  "file_text holds a NUL byte (\\u0000); memory holds text only." },
		{ "\"command\":\"create\",\"path\":\"/memories/new.md\",\"file_text\":\"a\\u0000b\\n\"",
		  "file_text holds a NUL byte (\\u0000); memory holds text only." },
		{ "\"command\":\"str_replace\",\"path\":\"/memories/t.md\",\"old_str\":\"two\",\"new_str\":\"t\\u0000o\"",
		  "new_str holds a NUL byte (\\u0000); memory holds text only." },
		{ "\"command\":\"insert\",\"path\":\"/memories/t.md\",\"insert_line\":3,\"insert_text\":\"\\u0000\"",
		  "insert_text holds a NUL byte (\\u0000); memory holds text only." },
	};
	for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
		mem_err(c, tcc_fmt(c, "{%s}", refused[i].args), refused[i].want);
		ck_assert_str_eq(mem_ok(c, "{\"command\":\"view\",\"path\":\"/memories/t.md\"}"), MEM_T_VIEW);
	}
	mem_err(c, "{\"command\":\"view\",\"path\":\"/memories/new.md\"}", "does not exist");
	/* Still a memory: edited as ever. */
	mem_ok(c, "{\"command\":\"str_replace\",\"path\":\"/memories/t.md\",\"old_str\":\"two\",\"new_str\":\"zwei \\u00e9\"}");
	mem_ok(c, "{\"command\":\"insert\",\"path\":\"/memories/t.md\",\"insert_line\":0,\"insert_text\":\"\\ud83d\\ude00\"}");
	ck_assert_str_eq(mem_ok(c, "{\"command\":\"view\",\"path\":\"/memories/t.md\"}"),
			 "Here's the content of /memories/t.md with line numbers:\n     1\t\xf0\x9f\x98\x80\n"
			 "     2\tone\n     3\tzwei \xc3\xa9\n     4\tthree");
}

/* The path arguments the memory tool takes, with a command that uses each. */
static const struct { const char *arg, *fmt; } mem_path_args[] = {
	{ "path", "{\"command\":\"create\",\"path\":\"%s\",\"file_text\":\"x\"}" },
	{ "path", "{\"command\":\"view\",\"path\":\"%s\"}" },
	{ "path", "{\"command\":\"str_replace\",\"path\":\"%s\",\"old_str\":\"a\",\"new_str\":\"b\"}" },
	{ "path", "{\"command\":\"insert\",\"path\":\"%s\",\"insert_line\":0,\"insert_text\":\"b\"}" },
	{ "path", "{\"command\":\"delete\",\"path\":\"%s\"}" },
	{ "old_path", "{\"command\":\"rename\",\"old_path\":\"%s\",\"new_path\":\"/memories/b.md\"}" },
	{ "new_path", "{\"command\":\"rename\",\"old_path\":\"/memories/a.md\",\"new_path\":\"%s\"}" },
};

/*
 * No path a call names holds a control character (C0, DEL, C1), a line
 * or paragraph separator, a bidirectional override, or bytes that are not
 * UTF-8: each is a
 * validation_error naming the argument, and nothing is made; the
 * listing stays one line per entry.
 */
static inline void mem_assert_paths_checked(struct tcc *c)
{
	mem_ok(c, "{\"command\":\"create\",\"path\":\"/memories/a.md\",\"file_text\":\"a\\n\"}");
	/* As JSON spells them in a string. */
	static const char *const bad[] = {
		"/memories/fake\\n4K\\t/memories/injected.md", "/memories/cr\\r.md", "/memories/nul\\u0000.md",
		"/memories/esc\\u001b[2J.md", "/memories/del\\u007f.md", "/memories/nel\\u0085.md",
		"/memories/c1\\u009b.md", "/memories/ls\\u2028.md", "/memories/ps\\u2029.md",
		"/memories/sur\\udc80.md", "/memories/dir\\n/x.md", "/memories/rlo\\u202egnp.md",
		"/memories/lri\\u2066.md",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		for (size_t k = 0; k < sizeof(mem_path_args) / sizeof(mem_path_args[0]); k++) {
			const char *args = tcc_fmt(c, mem_path_args[k].fmt, bad[i]);
			const struct json *r = tcc_call(c, "memory", args);
			tc_assert_kind(r, "validation_error");
			ck_assert_int_eq(tj_len(r, "error.data.errors"), 1);
			ck_assert_int_eq(tj_int(r, "error.data.attempts"), 0);
			const char *want = tcc_fmt(c, "/%s", mem_path_args[k].arg);
			ck_assert_msg(str_eq(tj_str(r, "error.data.errors.0.path"), want), "%s: %s", args,
				      tj_str(r, "error.data.errors.0.path"));
			const char *msg = tj_str(r, "error.data.errors.0.message");
			ck_assert_msg(strstr(msg, "a memory path holds no control character") ||
				      strstr(msg, "is not UTF-8 text"), "%s: %s", args, msg);
			ck_assert_msg(!strpbrk(tj_str(r, "error.message"), "\n\r\t"), "%s", tj_str(r, "error.message"));
		}
	/* Near misses are names like any. */
	mem_ok(c, "{\"command\":\"create\",\"path\":\"/memories/caf\\u00e9 \\u00a0n\\u00b0 \\u2027.md\",\"file_text\":\"x\"}");
	const char *t = mem_ok(c, "{\"command\":\"view\",\"path\":\"/memories\"}");
	ck_assert_msg(strstr(t, "\n1B\t/memories/caf\xc3\xa9 \xc2\xa0n\xc2\xb0 \xe2\x80\xa7.md"), "%s", t);
	/* Nothing else was made: the root, a.md and that one. */
	mem_assert_listing_lines(t, 3);
	mem_ok(c, "{\"command\":\"delete\",\"path\":\"/memories/caf\\u00e9 \\u00a0n\\u00b0 \\u2027.md\"}");
}

/*
 * The listing of /memories once a.md and, put there by hand, the names
 * "fake\n4K\tinjected.md", "line\u2028sep/" (a directory) with
 * "nel\u0085\x7f.md" in it and "bad\xff\r.md" are in it: each name
 * escaped, one line per entry.
 */
static inline void mem_assert_names_escaped(struct tcc *c)
{
	const char *t = mem_ok(c, "{\"command\":\"view\",\"path\":\"/memories\"}");
	ck_assert_msg(strstr(t, "\n1B\t/memories/fake\\u000a4K\\u0009injected.md\n") &&
		      strstr(t, "\t/memories/line\\u2028sep/\n") &&
		      strstr(t, "\n1B\t/memories/line\\u2028sep/nel\\u0085\\u007f.md") &&
		      strstr(t, "\n1B\t/memories/bad\\xff\\u000d.md\n"), "%s", t);
	/* The root and five. */
	mem_assert_listing_lines(t, 6);
}

#endif
