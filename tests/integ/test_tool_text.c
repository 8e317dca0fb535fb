/* SPDX-License-Identifier: MIT */
/*
 * The text every built-in tool answers with, what a model reads (CONTRACT
 * §18), through the real daemon, against golden files: for each tool in
 * builtin_tools, its normal case, its cut case (whose text names the
 * argument that continues it) and its error case, in
 * tests/data/render/tool_NAME.txt. A built-in tool without cases here, or
 * without its golden file, fails the test. Run with TC_UPDATE_GOLDEN=1 to
 * rewrite the files (then read the diff).
 *
 * The workspace is the same for every run: files written with fixed
 * modification times, so what is sorted by time comes out the same; what
 * still changes from run to run (the temp directory, a process's id) is
 * replaced by a placeholder before comparing.
 */
#include <check.h>
#include <ctype.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "tests/integ/harness.h"
#include "tests/unit/check_main.h"
#include "tests/unit/golden.h"
#include "tools/tools.h"

#define CFG                                                                                       \
	"{\"confirmation\":{\"default\":{\"write\":\"auto\",\"execute\":\"auto\"}},"             \
	"\"memory\":{\"dir\":\"mem\"},\"limits\":{\"shell_output_kb\":1}}"

enum kind { NORMAL, CUT, ERROR };
static const char *const kind_names[] = { "normal", "cut", "error" };

struct text_case {
	const char *tool;
	enum kind kind;
	const char *args;	/* "@PROC@" stands for the id of the last background process */
	/* Calls made first, not recorded: "tool args" pairs, NULL ended. */
	const char *before[3];
	/* When not 0, only the text's first line and this many last lines are
	 * kept (a long cut text). */
	size_t tail_lines;
};

/* What a tool's text never holds: why it has no cut case. */
struct never_cut {
	const char *tool, *why;
};

#define BG_SLEEP "shell {\"command\":\"echo ready; sleep 30\",\"background\":true,\"until\":\"ready\"}"
#define BG "shell {\"command\":\"echo ready; read x; echo got $x; sleep 30\",\"background\":true,\"until\":\"ready\"}"

static const struct text_case cases[] = {
	{ "delete_file", NORMAL, "{\"path\":\"scratch/gone.txt\"}", { "write_file {\"path\":\"scratch/gone.txt\",\"content\":\"x\"}" }, 0 },
	{ "delete_file", NORMAL, "{\"path\":\"scratch/tree\",\"recursive\":true}",
	  { "write_file {\"path\":\"scratch/tree/a/b.txt\",\"content\":\"x\",\"create_dirs\":true}" }, 0 },
	{ "delete_file", ERROR, "{\"path\":\"scratch/nothing\"}", { NULL }, 0 },
	{ "delete_file", ERROR, "{\"path\":\"docs\"}", { NULL }, 0 },

	{ "edit_file", NORMAL, "{\"path\":\"scratch/edit.c\",\"edits\":[{\"old\":\"return 0;\",\"new\":\"return 1;\"}]}",
	  { "write_file {\"path\":\"scratch/edit.c\",\"content\":\"int main(void)\\n{\\n\\treturn 0;\\n}\\n\"}" }, 0 },
	{ "edit_file", NORMAL, "{\"path\":\"scratch/edit.c\",\"edits\":[{\"old\":\"int\",\"new\":\"long\"}],\"dry_run\":true}", { NULL }, 0 },
	{ "edit_file", CUT, "{\"path\":\"big.txt\",\"edits\":[{\"old\":\"row\",\"new\":\"line\",\"replace_all\":true}],"
	  "\"dry_run\":true}", { NULL }, 3 },
	{ "edit_file", ERROR, "{\"path\":\"scratch/edit.c\",\"edits\":[{\"old\":\"return 7;\",\"new\":\"x\"}]}", { NULL }, 0 },
	{ "edit_file", ERROR, "{\"path\":\"many.txt\",\"edits\":[{\"old\":\"line\",\"new\":\"row\"}]}", { NULL }, 0 },

	{ "glob", NORMAL, "{\"pattern\":\"**/*.c\"}", { NULL }, 0 },
	{ "glob", CUT, "{\"pattern\":\"src/*\",\"max_results\":2}", { NULL }, 0 },
	{ "glob", NORMAL, "{\"pattern\":\"**/*.o\"}", { NULL }, 0 },
	{ "glob", ERROR, "{\"pattern\":\"*\",\"path\":\"nowhere\"}", { NULL }, 0 },

	{ "list_dir", NORMAL, "{\"path\":\"src\"}", { NULL }, 0 },
	{ "list_dir", CUT, "{\"max_entries\":3}", { NULL }, 0 },
	{ "list_dir", ERROR, "{\"path\":\"a.txt\"}", { NULL }, 0 },

	{ "make_dir", NORMAL, "{\"path\":\"scratch/new/deep\"}", { NULL }, 0 },
	{ "make_dir", NORMAL, "{\"path\":\"src\"}", { NULL }, 0 },
	{ "make_dir", ERROR, "{\"path\":\"a.txt/sub\"}", { NULL }, 0 },

	{ "memory", NORMAL, "{\"command\":\"view\",\"path\":\"/memories/notes.md\"}",
	  { "memory {\"command\":\"create\",\"path\":\"/memories/notes.md\",\"file_text\":\"one\\ntwo\\nthree\\n\"}" }, 0 },
	{ "memory", NORMAL, "{\"command\":\"view\",\"path\":\"/memories/notes.md\",\"view_range\":[2,2]}", { NULL }, 0 },
	{ "memory", ERROR, "{\"command\":\"view\",\"path\":\"/memories/none.md\"}", { NULL }, 0 },

	{ "move_file", NORMAL, "{\"from\":\"scratch/m1.txt\",\"to\":\"scratch/m2.txt\"}",
	  { "write_file {\"path\":\"scratch/m1.txt\",\"content\":\"x\"}" }, 0 },
	{ "move_file", ERROR, "{\"from\":\"scratch/m2.txt\",\"to\":\"a.txt\"}", { NULL }, 0 },

	{ "patch_file", NORMAL, "{\"path\":\"scratch/p.txt\",\"old\":\"beta\",\"new\":\"BETA\"}",
	  { "write_file {\"path\":\"scratch/p.txt\",\"content\":\"alpha\\nbeta\\ngamma\\n\"}" }, 0 },
	{ "patch_file", ERROR, "{\"path\":\"scratch/p.txt\",\"old\":\"delta\",\"new\":\"x\"}", { NULL }, 0 },

	{ "process_io", NORMAL, "{\"process_id\":\"@PROC@\",\"input\":\"hello\\n\",\"until\":\"got hello\"}", { BG }, 0 },
	{ "process_io", CUT, "{\"process_id\":\"@PROC@\",\"input\":\"abcdefghij\\n\",\"until\":\"got abc\",\"max_bytes\":4}", { BG }, 0 },
	{ "process_io", ERROR, "{\"process_id\":\"p0000000000000009\"}", { NULL }, 0 },

	{ "process_kill", NORMAL, "{\"process_id\":\"@PROC@\"}", { BG }, 0 },
	{ "process_kill", CUT, "{\"process_id\":\"@PROC@\",\"max_bytes\":4}",
	  { BG, "process_io {\"process_id\":\"@PROC@\",\"input\":\"abcdefghij\\n\",\"until\":\"got abc\",\"max_bytes\":1}" },
	  0 },
	{ "process_kill", ERROR, "{\"process_id\":\"p0000000000000009\"}", { NULL }, 0 },

	{ "process_list", NORMAL, "{}", { BG_SLEEP }, 0 },
	{ "process_list", ERROR, "{\"all\":true}", { NULL }, 0 },

	{ "read_file", NORMAL, "{\"path\":\"a.txt\"}", { NULL }, 0 },
	{ "read_file", CUT, "{\"path\":\"many.txt\",\"line\":3,\"lines\":2}", { NULL }, 0 },
	{ "read_file", CUT, "{\"path\":\"many.txt\",\"offset\":0,\"limit\":20}", { NULL }, 0 },
	{ "read_file", ERROR, "{\"path\":\"no/such.txt\"}", { NULL }, 0 },

	{ "search", NORMAL, "{\"pattern\":\"return\",\"context\":1}", { NULL }, 0 },
	{ "search", NORMAL, "{\"pattern\":\"line 1\\\\b\",\"output_mode\":\"count\"}", { NULL }, 0 },
	{ "search", CUT, "{\"pattern\":\"int\",\"output_mode\":\"files\",\"max_results\":1,\"path\":\"src\"}", { NULL }, 0 },
	{ "search", CUT, "{\"pattern\":\"line [0-9]+\",\"max_results\":2}", { NULL }, 0 },
	{ "search", NORMAL, "{\"pattern\":\"nothing here\"}", { NULL }, 0 },
	{ "search", ERROR, "{\"pattern\":\"(unclosed\"}", { NULL }, 0 },

	{ "shell", NORMAL, "{\"command\":\"printf 'a\\\\nb\\\\n'\"}", { NULL }, 0 },
	{ "shell", NORMAL, "{\"command\":\"echo oops >&2; exit 3\"}", { NULL }, 0 },
	{ "shell", CUT, "{\"command\":\"seq 1 400\"}", { NULL }, 0 },
	{ "shell", ERROR, "{\"command\":\"echo before; sleep 30\",\"timeout_ms\":1500}", { NULL }, 0 },
	{ "shell", NORMAL, "{\"command\":\"for i in 1 2 3; do echo out$i; echo err$i >&2; done\"}", { NULL }, 0 },
	{ "shell", ERROR, "{\"command\":\"echo out; echo err >&2; echo out2; sleep 30\",\"timeout_ms\":1500}", { NULL }, 0 },

	{ "stat", NORMAL, "{\"path\":\"a.txt\"}", { NULL }, 0 },
	{ "stat", NORMAL, "{\"path\":\"link\"}", { NULL }, 0 },
	{ "stat", ERROR, "{\"path\":\"missing\"}", { NULL }, 0 },

	{ "write_file", NORMAL, "{\"path\":\"scratch/w.txt\",\"content\":\"hello\\n\"}", { NULL }, 0 },
	{ "write_file", NORMAL, "{\"path\":\"scratch/w.txt\",\"content\":\"hello again\\n\"}", { NULL }, 0 },
	{ "write_file", NORMAL, "{\"path\":\"scratch/one.txt\",\"content\":\"x\"}", { NULL }, 0 },
	{ "write_file", ERROR, "{\"path\":\"src\",\"content\":\"x\"}", { NULL }, 0 },
	{ NULL },
};

/* Tools whose text is never cut, and why. */
static const struct never_cut never_cut[] = {
	{ "delete_file", "one line naming what was deleted and how many entries" },
	{ "memory", "a file is shown whole (memory.max_file_kb bounds it), view_range is the model's own window; "
		    "a directory's listing past 1000 entries ends with a line saying to view a subdirectory" },
	{ "make_dir", "one line" },
	{ "move_file", "one line" },
	{ "patch_file", "one line" },
	{ "process_list", "one line per process, bounded by limits.per_uid_processes running and limits.process_keep_max ended" },
	{ "stat", "one line" },
	{ "write_file", "one line" },
	{ NULL, NULL },
};

/* Sets a file's modification time, so what is sorted by time is stable. */
static void set_mtime(struct tcd *d, const char *rel, time_t t)
{
	char *p = tcd_ws_path(d, rel);
	struct timespec ts[2] = { { t, 0 }, { t, 0 } };
	ck_assert_msg(utimensat(AT_FDCWD, p, ts, AT_SYMLINK_NOFOLLOW) == 0, "utimensat %s", p);
	free(p);
}

/* The workspace every case starts from. */
static void make_workspace(struct tcd *d)
{
	tcd_put(d, "a.txt", "alpha\nbeta\ngamma\n");
	struct buf many = {0};
	for (int i = 1; i <= 30; i++)
		buf_printf(&many, "line %d\n", i);
	buf_putc(&many, '\0');
	tcd_put(d, "many.txt", buf_head(&many));
	buf_free(&many);
	tcd_put(d, "src/main.c", "int main(void)\n{\n\treturn 0;\n}\n");
	tcd_put(d, "src/util.c", "int util(void)\n{\n\treturn 42;\n}\n");
	tcd_put(d, "src/util.h", "int util(void);\n");
	tcd_put(d, "docs/readme.md", "# docs\n");
	tcd_put(d, ".gitignore", "build/\n");
	tcd_put(d, "build/main.o", "obj");
	tcd_put(d, "scratch/keep.txt", "");
	/* 20,000 lines: a diff of every line is longer than edit_file shows. */
	struct buf big = {0};
	for (int i = 1; i <= 20000; i++)
		buf_printf(&big, "row %d\n", i);
	buf_putc(&big, '\0');
	tcd_put(d, "big.txt", buf_head(&big));
	buf_free(&big);
	char *link = tcd_ws_path(d, "link");
	ck_assert_int_eq(symlink("a.txt", link), 0);
	free(link);
	static const char *const files[] = { "a.txt", "many.txt", "src/main.c", "src/util.c", "src/util.h",
					     "docs/readme.md", ".gitignore", "build/main.o", "big.txt", "scratch/keep.txt" };
	for (size_t i = 0; i < ELEMENTSOF(files); i++)
		set_mtime(d, files[i], 1700000000 + 1000 * (time_t)i);
	set_mtime(d, "link", 1700000000);
	set_mtime(d, "src", 1700000000);
	set_mtime(d, "docs", 1700000000);
	set_mtime(d, "build", 1700000000);
}

/* Replaces every occurrence of what in b by with. */
static void replace_all(struct buf *b, const char *what, const char *with)
{
	if (!what || !*what)
		return;
	struct buf out = {0};
	const char *s = buf_head(b), *end = s + buf_size(b);
	size_t n = strlen(what);
	for (const char *p; (p = memmem(s, (size_t)(end - s), what, n)); s = p + n) {
		buf_append(&out, s, (size_t)(p - s));
		buf_puts(&out, with);
	}
	buf_append(&out, s, (size_t)(end - s));
	buf_free(b);
	*b = out;
}

/* Replaces each background process id ("p" and 16 lowercase hex digits)
 * by @PROC@. */
static void scrub_process_ids(struct buf *b)
{
	struct buf out = {0};
	const char *s = buf_head(b);
	size_t n = buf_size(b);
	for (size_t i = 0; i < n;) {
		if (s[i] == 'p' && (i == 0 || !isalnum((unsigned char)s[i - 1])) && i + 17 <= n) {
			size_t h = 0;
			while (h < 16 && strchr("0123456789abcdef", s[i + 1 + h]) && s[i + 1 + h])
				h++;
			if (h == 16 && (i + 17 == n || !isalnum((unsigned char)s[i + 17]))) {
				buf_puts(&out, "@PROC@");
				i += 17;
				continue;
			}
		}
		buf_putc(&out, s[i]);
		i++;
	}
	buf_free(b);
	*b = out;
}

/* Keeps the first line and the last n lines of b (all when n is 0),
 * saying how many went between. */
static void keep_tail(struct buf *b, size_t n)
{
	const char *s = buf_head(b);
	size_t len = buf_size(b), lines = 0, at = len;
	const char *nl = memchr(s, '\n', len);
	size_t head = nl ? (size_t)(nl - s) + 1 : len;
	if (!n)
		return;
	while (at > head && lines <= n)
		if (s[--at] == '\n' && at + 1 < len)
			lines++;
	if (lines <= n)
		return;
	size_t dropped = 0;
	for (size_t i = head; i <= at; i++)
		dropped += s[i] == '\n';
	struct buf out = {0};
	buf_append(&out, s, head);
	buf_printf(&out, "[... %zu lines not kept here ...]\n", dropped);
	buf_append(&out, s + at + 1, len - at - 1);
	buf_free(b);
	*b = out;
}

/* Calls tool with args; the text the model reads (the result's text, or
 * the error's message), and the background process id it names, if any. */
static void call_text(struct tcc *c, const char *tool, const char *args, struct buf *text, char **proc)
{
	const struct json *r = tcc_call(c, tool, args);
	const char *s = tj_str(r, "result.content.0.text");
	if (!s)
		s = tj_str(r, "error.message");
	ck_assert_msg(s, "%s %s: no text in %s", tool, args, tcc_raw(c, r));
	/* How the answer is marked besides its text. */
	if (tj_kind(r))
		buf_printf(text, "(error: %s)\n", tj_kind(r));
	else if (tj_has(r, "result.isError") && tj_bool(r, "result.isError"))
		buf_puts(text, "(isError)\n");
	buf_puts(text, s);
	const char *id = tj_str(r, "result.structuredContent.process_id");
	if (id && proc) {
		free(*proc);
		*proc = xstrdup(id);
	}
}

static char *with_proc(const char *args, const char *proc)
{
	struct buf b = {0};
	buf_puts(&b, args);
	replace_all(&b, "@PROC@", proc ? proc : "none");
	buf_putc(&b, '\0');
	return buf_steal(&b);
}

static bool has_never_cut(const char *tool)
{
	for (const struct never_cut *n = never_cut; n->tool; n++)
		if (str_eq(n->tool, tool))
			return true;
	return false;
}

START_TEST(every_tool_text)
{
	struct tcd d;
	tcd_start(&d, CFG);
	make_workspace(&d);
	struct tcc *c = tcc_connect(&d);
	char *proc = NULL;
	for (const struct tool_def *const *t = builtin_tools; *t; t++) {
		const char *name = (*t)->name;
		unsigned seen[3] = { 0 };
		struct buf text = {0};
		for (const struct text_case *k = cases; k->tool; k++) {
			if (!str_eq(k->tool, name))
				continue;
			for (size_t i = 0; i < ELEMENTSOF(k->before) && k->before[i]; i++) {
				const char *sp = strchr(k->before[i], ' ');
				char *tool = xmemdup(k->before[i], (size_t)(sp - k->before[i]) + 1);
				tool[sp - k->before[i]] = '\0';
				char *args = with_proc(sp + 1, proc);
				struct buf unused = {0};
				call_text(c, tool, args, &unused, &proc);
				ck_assert_msg(!strstr(buf_head(&unused), "(isError)") && !strstr(buf_head(&unused), "(error: "),
					      "%s %s: %s", tool, args,
					      buf_head(&unused));
				buf_free(&unused);
				free(args);
				free(tool);
			}
			char *args = with_proc(k->args, proc);
			buf_printf(&text, "## %s: %s\n", kind_names[k->kind], k->args);
			struct buf one = {0};
			call_text(c, name, args, &one, &proc);
			keep_tail(&one, k->tail_lines);
			buf_append(&text, buf_head(&one), buf_size(&one));
			buf_free(&one);
			if (buf_size(&text) && buf_head(&text)[buf_size(&text) - 1] != '\n')
				buf_puts(&text, "\n[no newline at the end]\n");
			free(args);
			seen[k->kind]++;
		}
		ck_assert_msg(seen[NORMAL] && seen[ERROR],
			      "built-in tool '%s' has no normal or no error case in tests/integ/test_tool_text.c", name);
		ck_assert_msg(seen[CUT] || has_never_cut(name),
			      "built-in tool '%s' has no cut case, nor a reason in never_cut[] why its text is never cut",
			      name);
		/* What changes from run to run. */
		replace_all(&text, d.dir, "@DIR@");
		scrub_process_ids(&text);
		char *golden_name = xasprintf("tool_%s", name);
		golden(golden_name, &text);
		free(golden_name);
		buf_free(&text);
	}
	/* Every case names a built-in tool. */
	for (const struct text_case *k = cases; k->tool; k++) {
		bool found = false;
		for (const struct tool_def *const *t = builtin_tools; *t; t++)
			found = found || str_eq((*t)->name, k->tool);
		ck_assert_msg(found, "case for '%s', which is no built-in tool", k->tool);
	}
	free(proc);
	tcc_close(c);
	tcd_finish(&d);
}
END_TEST

/* A command the sandbox refused: the text ends with the sandbox's note. */
START_TEST(sandbox_note)
{
	TC_SKIP_UNDER_VALGRIND("children run without the sandbox there");
	struct tcd d;
	tcd_start(&d, CFG);
	struct tcc *c = tcc_connect(&d);
	const char *args = "{\"command\":\"touch /usr/tc_refused\"}";
	const struct json *r = tcc_call(c, "shell", args);
	char *enforced = tj_text(tj(r, "result.structuredContent.sandbox.enforced"));
	if (!strstr(enforced, "read-only mounts")) {
		free(enforced);
		tcc_close(c);
		tcd_free(&d);
		TC_SKIP("the sandbox cannot make read-only mounts here");
	}
	free(enforced);
	struct buf text = {0};
	buf_printf(&text, "## error: %s\n", args);
	call_text(c, "shell", args, &text, NULL);
	buf_putc(&text, '\n');
	golden("tool_shell_sandbox", &text);
	buf_free(&text);
	tcc_close(c);
	tcd_finish(&d);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("tool_text");
	TCase *tc = tcase_create("golden");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, every_tool_text);
	tcase_add_test(tc, sandbox_note);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return run_suite(suite());
}
