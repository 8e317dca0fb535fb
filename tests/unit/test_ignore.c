/* SPDX-License-Identifier: MIT */
/*
 * Ignore files (lib/ignore/ignore.c) and the walk that honours them
 * (tools/walk.c): cases ported from git's t/t0008-ignores.sh, then git
 * itself as the oracle: on generated trees with many .gitignore files and
 * patterns (negation, anchoring, directory-only, "**", sets, escapes), the
 * files the walk reports are exactly those `git ls-files --others
 * --exclude-standard` lists, and `git check-ignore -v -n` agrees with it on
 * every path of every directory it entered.
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lib/ignore/ignore.h"
#include "proto/base/buf.h"
#include "proto/base/util.h"
#include "tests/unit/check_main.h"
#include "tools/walk.h"

static struct ignore *parse(const char *s)
{
	return ignore_parse(s, strlen(s));
}

/* The verdict of one list for a path relative to its directory. */
static enum ignore_verdict v(const struct ignore *ig, const char *path, bool dir)
{
	return ignore_match(ig, path, strlen(path), dir);
}

START_TEST(syntax)
{
	struct ignore *ig = parse("# comment\n\n*.o\n!keep.o\nbuild/\n/top\ndoc/*.txt\n**/deep\nfoo/**\na/**/b\n"
				  "trail   \nkept\\ \n\\#hash\n\\!bang\n[ab]x\n{c,d}\nwin\r\n");
	ck_assert_int_eq(v(ig, "x.o", false), IGNORE_EXCLUDE);
	ck_assert_int_eq(v(ig, "src/x.o", false), IGNORE_EXCLUDE);
	ck_assert_int_eq(v(ig, "keep.o", false), IGNORE_INCLUDE);
	ck_assert_int_eq(v(ig, "build", true), IGNORE_EXCLUDE);
	ck_assert_int_eq(v(ig, "build", false), IGNORE_NONE);	/* directories only */
	ck_assert_int_eq(v(ig, "src/build", true), IGNORE_EXCLUDE);
	ck_assert_int_eq(v(ig, "top", false), IGNORE_EXCLUDE);
	ck_assert_int_eq(v(ig, "src/top", false), IGNORE_NONE);	/* anchored */
	ck_assert_int_eq(v(ig, "doc/a.txt", false), IGNORE_EXCLUDE);
	ck_assert_int_eq(v(ig, "doc/x/a.txt", false), IGNORE_NONE);	/* "*" stops at "/" */
	ck_assert_int_eq(v(ig, "src/doc/a.txt", false), IGNORE_NONE);	/* a middle "/" anchors */
	ck_assert_int_eq(v(ig, "deep", false), IGNORE_EXCLUDE);
	ck_assert_int_eq(v(ig, "x/y/deep", true), IGNORE_EXCLUDE);
	ck_assert_int_eq(v(ig, "foo/x", false), IGNORE_EXCLUDE);
	ck_assert_int_eq(v(ig, "foo", true), IGNORE_NONE);
	ck_assert_int_eq(v(ig, "a/b", false), IGNORE_EXCLUDE);
	ck_assert_int_eq(v(ig, "a/x/y/b", false), IGNORE_EXCLUDE);
	ck_assert_int_eq(v(ig, "trail", false), IGNORE_EXCLUDE);	/* trailing spaces dropped */
	ck_assert_int_eq(v(ig, "kept ", false), IGNORE_EXCLUDE);	/* an escaped one kept */
	ck_assert_int_eq(v(ig, "#hash", false), IGNORE_EXCLUDE);
	ck_assert_int_eq(v(ig, "!bang", false), IGNORE_EXCLUDE);
	ck_assert_int_eq(v(ig, "bx", false), IGNORE_EXCLUDE);
	ck_assert_int_eq(v(ig, "cx", false), IGNORE_NONE);
	ck_assert_int_eq(v(ig, "{c,d}", false), IGNORE_EXCLUDE);	/* braces are literal */
	ck_assert_int_eq(v(ig, "c", false), IGNORE_NONE);
	ck_assert_int_eq(v(ig, "win", false), IGNORE_EXCLUDE);
	ck_assert_int_eq(v(ig, "comment", false), IGNORE_NONE);
	ignore_free(ig);
	ck_assert_ptr_null(parse("# only\n\n   \n!\n/\n"));
}
END_TEST

/* git's t0008 setup: .gitignore, a/.gitignore, a/b/.gitignore,
 * a/b/ignored-dir/.gitignore and .git/info/exclude. */
static const char *const t0008_dirs[] = { "a/b/ignored-dir", "a/b", "a", "", NULL };
static const char *const t0008_files[] = {
	"seven\n",
	"four\nfive\n# this comment should affect the line numbers\nsix\nignored-dir/\n"
	"# and so should this blank line:\n\n!on*\n!two\n",
	"two*\n*three\n",
	"one\nignored-*\ntop-level-dir/\n",
};

/* Whether path is ignored, as git decides: a parent directory excluded
 * excludes it; else the deepest list with a matching pattern decides. */
static bool t0008_ignored(struct ignore *const *lists, struct ignore *exclude, const char *path, bool dir)
{
	for (const char *p = strchr(path, '/'); p; p = strchr(p + 1, '/')) {
		_cleanup_free_ char *parent = xasprintf("%.*s", (int)(p - path), path);
		if (t0008_ignored(lists, exclude, parent, true))
			return true;
	}
	for (size_t i = 0; t0008_dirs[i]; i++) {
		const char *d = t0008_dirs[i];
		size_t n = strlen(d);
		const char *rel = path;
		if (n) {
			if (strncmp(path, d, n) != 0 || path[n] != '/')
				continue;
			rel = path + n + 1;
		}
		enum ignore_verdict r = v(lists[i], rel, dir);
		if (r != IGNORE_NONE)
			return r == IGNORE_EXCLUDE;
	}
	return v(exclude, path, dir) == IGNORE_EXCLUDE;
}

START_TEST(t0008)
{
	struct ignore *lists[4];
	for (int i = 0; i < 4; i++)
		lists[i] = parse(t0008_files[i]);
	struct ignore *exclude = parse("per-repo\n");
	static const struct { const char *path; bool dir, ignored; } cases[] = {
		{ "one", false, true },
		{ "a/one", false, true },
		{ "not-ignored", false, false },
		{ "a/not-ignored", false, false },
		{ "ignored-and-untracked", false, true },
		{ "a/ignored-and-untracked", false, true },
		{ "non-existent", false, false },
		{ "a/3-three", false, true },		/* sub-directory local ignore */
		{ "a/three-not-this-one", false, false },
		{ "a/b/one", false, false },		/* nested include: !on* */
		{ "a/b/on", false, false },
		{ "a/b/one one", false, false },
		{ "a/b/one\"three", false, false },
		{ "a/b/two", false, false },		/* !two */
		{ "a/b/twooo", false, true },		/* a/.gitignore two* */
		{ "a/b/not-ignored", false, false },
		{ "a/b/ignored-dir", true, true },	/* ignored sub-directory */
		{ "a/b/ignored-dir/foo", false, true },
		{ "a/b/ignored-dir/twoooo", false, true },
		{ "a/b/ignored-dir/seven", false, true },
		{ "top-level-dir", true, true },
		{ "top-level-dir", false, false },
		{ "per-repo", false, true },		/* .git/info/exclude */
		{ "a/per-repo", false, true },
		{ "a/globalthree", false, true },	/* *three */
		{ "globaltwo", false, false },
		{ "c/not-ignored", false, false },
		{ "a/b/four", false, true },
		{ "a/b/c/five", false, true },
		{ "six", false, false },
	};
	for (size_t i = 0; i < ELEMENTSOF(cases); i++)
		ck_assert_msg(t0008_ignored(lists, exclude, cases[i].path, cases[i].dir) == cases[i].ignored,
			      "%s%s: expected %s", cases[i].path, cases[i].dir ? "/" : "",
			      cases[i].ignored ? "ignored" : "not ignored");
	for (int i = 0; i < 4; i++)
		ignore_free(lists[i]);
	ignore_free(exclude);
}
END_TEST

/* --- git as the oracle ------------------------------------------------------ */

static char root[] = "/tmp/tc-ignore-XXXXXX";
static unsigned rnd_state;

static unsigned rnd(unsigned n)
{
	rnd_state = rnd_state * 1103515245u + 12345u;
	return (rnd_state >> 16) % n;
}

static void put(const char *rel, const char *content)
{
	char *p = xasprintf("%s/%s", root, rel);
	FILE *f = fopen(p, "wb");
	ck_assert_msg(f != NULL, "%s: %s", p, strerror(errno));
	fputs(content, f);
	fclose(f);
	free(p);
}

static const char *const dir_names[] = { "a", "b", "c", "build", "doc", "tmp", "two", "foo", "bar", "sub dir" };
static const char *const file_names[] = {
	"foo.o", "keep.o", "x.c", "y.txt", "important.txt", "log.txt", "one", "two", "three ", "!bang",
	"#hash", "z", "bar", "ab.o", "Makefile", "deep", "x.cc", "a.txt", "[x]", "{c,d}",
};
static const char *const patterns[] = {
	"*.o", "build/", "/build", "!keep.o", "doc/**/*.txt", "**/tmp", "a/**", "x*", "![ab]*", "log.txt",
	"*.txt", "!important.txt", "b/", "one", "/a/b", "**/b/c", "two/", "*.c", "!*.c", "[!a]*.o", "?",
	"three\\ ", "\\!bang", "\\#hash", "a/b/", "foo/**/bar", "!**/", "*.cc", "!x.cc", "/z", "bar/", "deep",
	"# a comment", "", "sub dir/", "!sub dir/", "**/foo", "c/*", "/*.txt", "*/x.c", "\\[x\\]", "{c,d}",
	"!/build", "doc/", "tmp", "!tmp/", "*", "!*/", "!*.txt", "a/*/x.c", "two", "Make*",
};

/* Makes a random tree of directories, files and .gitignore files. */
static void make_tree(const char *rel, unsigned depth)
{
	unsigned nfiles = 2 + rnd(6);
	for (unsigned i = 0; i < nfiles; i++) {
		const char *name = file_names[rnd(ELEMENTSOF(file_names))];
		char *p = *rel ? xasprintf("%s/%s", rel, name) : xstrdup(name);
		char *abs = xasprintf("%s/%s", root, p);
		struct stat st;
		if (stat(abs, &st) < 0)
			put(p, "x\n");
		free(abs);
		free(p);
	}
	if (rnd(3) != 0) {
		struct buf ig = {0};
		unsigned n = 1 + rnd(8);
		for (unsigned i = 0; i < n; i++)
			buf_printf(&ig, "%s\n", patterns[rnd(ELEMENTSOF(patterns))]);
		char *p = *rel ? xasprintf("%s/.gitignore", rel) : xstrdup(".gitignore");
		put(p, buf_head(&ig));
		free(p);
		buf_free(&ig);
	}
	if (depth == 0)
		return;
	unsigned ndirs = rnd(4);
	for (unsigned i = 0; i < ndirs; i++) {
		const char *name = dir_names[rnd(ELEMENTSOF(dir_names))];
		char *p = *rel ? xasprintf("%s/%s", rel, name) : xstrdup(name);
		char *abs = xasprintf("%s/%s", root, p);
		struct stat st;
		if (stat(abs, &st) < 0 && mkdir(abs, 0755) == 0)
			make_tree(p, depth - 1);
		free(abs);
		free(p);
	}
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Sorts the lines of text; returns them NUL-separated again as one string. */
static char *sorted(char *text)
{
	char **v = NULL;
	size_t n = 0;
	for (char *save = NULL, *l = strtok_r(text, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
		v = xreallocarray(v, n + 1, sizeof(*v));
		v[n++] = l;
	}
	if (n > 1)
		qsort(v, n, sizeof(*v), cmp_str);
	struct buf b = {0};
	for (size_t i = 0; i < n; i++)
		buf_printf(&b, "%s\n", v[i]);
	free(v);
	buf_putc(&b, '\0');
	return buf_steal(&b);
}

/* Runs a command in root; its stdout. */
static char *run_out(const char *cmd)
{
	char *full = xasprintf("cd '%s' && %s", root, cmd);
	FILE *p = popen(full, "r");
	free(full);
	ck_assert_ptr_nonnull(p);
	struct buf b = {0};
	char tmp[4096];
	size_t k;
	while ((k = fread(tmp, 1, sizeof(tmp), p)) > 0)
		buf_append(&b, tmp, k);
	int st = pclose(p);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s failed", cmd);
	buf_putc(&b, '\0');
	return buf_steal(&b);
}

/* The files the walk reports, one a line (and its directories too, a
 * "/" after them, with dirs). */
static char *walk_paths(struct ignore *exclude, bool dirs)
{
	struct walk w = { .basefd = -1 };
	w.use_ignores = true;
	w.skip_git = true;
	walk_add_ignore(&w, exclude, "");
	walk_init(&w, open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC));
	struct buf b = {0};
	const char *rel;
	enum walk_type t;
	while (walk_next(&w, &rel, &t) > 0) {
		if (strcmp(rel, ".git") == 0 || strncmp(rel, ".git/", 5) == 0)
			continue;
		if (t == WALK_FILE)
			buf_printf(&b, "%s\n", rel);
		else if (dirs && t == WALK_DIR)
			buf_printf(&b, "%s/\n", rel);
	}
	walk_done(&w);
	buf_putc(&b, '\0');
	return buf_steal(&b);
}

/* Whether text (lines) holds line. */
static bool has_line(const char *text, const char *line)
{
	size_t n = strlen(line);
	for (const char *p = text; (p = strstr(p, line)); p++)
		if ((p == text || p[-1] == '\n') && p[n] == '\n')
			return true;
	return false;
}

/*
 * git check-ignore as a second oracle, path by path: what the walk reports
 * is not ignored, and what it skipped in a directory it entered is. (What
 * lies below a skipped directory is not looked at: the walk never sees it.)
 */
static size_t checked_ignored, checked_kept;

static void check_ignore_agrees(struct ignore *exclude)
{
	char *seen = walk_paths(exclude, true);
	char *all = run_out("find . -path ./.git -prune -o -mindepth 1 -printf '%P\\n'");
	struct buf ask = {0};
	for (char *save = NULL, *l = strtok_r(all, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
		char *parent = xstrdup(l), *slash = strrchr(parent, '/');
		bool entered = true;
		if (slash) {
			slash[1] = '\0';
			entered = has_line(seen, parent);
		}
		free(parent);
		if (entered)
			buf_printf(&ask, "%s\n", l);
	}
	put("ask", buf_head(&ask));
	char *said = run_out("GIT_CONFIG_NOSYSTEM=1 HOME=/nonexistent git -c core.excludesFile=/dev/null "
			     "check-ignore --no-index -v -n --stdin < ask; rm -f ask");
	for (char *save = NULL, *l = strtok_r(said, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
		char *tab = strchr(l, '\t');
		ck_assert_ptr_nonnull(tab);
		const char *path = tab + 1;
		if (strcmp(path, "ask") == 0)
			continue;
		/* "source:line:pattern": ignored when a pattern matched and is no negation. */
		const char *pat = strchr(l, ':');
		pat = pat ? strchr(pat + 1, ':') : NULL;
		bool ignored = pat && pat + 1 < tab && pat[1] != '!';
		char *as_dir = xasprintf("%s/", path);
		bool reported = has_line(seen, path) || has_line(seen, as_dir);
		free(as_dir);
		ck_assert_msg(ignored != reported, "%s: git check-ignore says %.*s, the walk %s it (tree kept in %s)",
			      path, (int)(tab - l), l, reported ? "reports" : "skips", root);
		if (ignored)
			checked_ignored++;
		else
			checked_kept++;
	}
	free(said);
	buf_free(&ask);
	free(all);
	free(seen);
}

START_TEST(git_oracle)
{
	if (system("git --version >/dev/null 2>&1") != 0)
		TC_SKIP("git is not installed");
	size_t kept = 0, ignored = 0;
	for (unsigned seed = 1; seed <= 40; seed++) {
		ck_assert_ptr_nonnull(mkdtemp(strcpy(root, "/tmp/tc-ignore-XXXXXX")));
		rnd_state = seed;
		char *init = run_out("git -c init.defaultBranch=main init -q . && echo ok");
		free(init);
		make_tree("", 3);
		static const char exclude_text[] = "per-repo\n*.cc\n!x.cc\n";
		put(".git/info/exclude", exclude_text);
		put("per-repo", "x\n");
		char *want = run_out("GIT_CONFIG_NOSYSTEM=1 HOME=/nonexistent git -c core.quotePath=false "
				     "-c core.excludesFile=/dev/null ls-files --others --exclude-standard");
		char *got = walk_paths(parse(exclude_text), false);
		check_ignore_agrees(parse(exclude_text));
		char *ign = run_out("GIT_CONFIG_NOSYSTEM=1 HOME=/nonexistent git -c core.excludesFile=/dev/null "
				    "ls-files --others --ignored --exclude-standard | wc -l");
		ignored += (size_t)atol(ign);
		free(ign);
		for (const char *p = want; (p = strchr(p, '\n')); p++)
			kept++;
		char *w = sorted(want), *g = sorted(got);
		ck_assert_msg(strcmp(w, g) == 0, "seed %u (tree kept in %s):\n--- git\n%s--- walk\n%s", seed, root, w,
			      g);
		free(w);
		free(g);
		free(want);
		free(got);
		char *rm = xasprintf("rm -rf '%s'", root);
		ck_assert_int_eq(system(rm), 0);
		free(rm);
	}
	/* The trees test something: both kinds, in numbers. */
	ck_assert_uint_gt(kept, 200);
	ck_assert_uint_gt(ignored, 200);
	printf("git oracle: %zu files kept, %zu ignored, in 40 trees; check-ignore: %zu paths kept, %zu ignored\n",
	       kept, ignored, checked_kept, checked_ignored);
	ck_assert_uint_gt(checked_kept, 200);
	ck_assert_uint_gt(checked_ignored, 200);
}
END_TEST

static Suite *ignore_suite(void)
{
	Suite *s = suite_create("ignore");
	TCase *tc = tcase_create("ignore");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, syntax);
	tcase_add_test(tc, t0008);
	tcase_add_test(tc, git_oracle);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return run_suite(ignore_suite());
}
