/* SPDX-License-Identifier: MIT */
/*
 * The repositories nested in a workspace in which sandbox.protect holds
 * for children (lib/sandbox/repos.c): found down to four levels (a/b/c/d
 * held, a/b/c/d/e not), a submodule's .git file as a pointer, never
 * through a symlink or inside a .git; a repository made later in a
 * directory the last scan saw (git init of an existing directory) is
 * found at the next call, and one removed is forgotten; the same without
 * openat2 and without inotify. A workspace with more directories than the
 * scan reads is counted at each scan that stops and told once, on one
 * line (its name's control characters and backslashes as \xNN).
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "lib/sandbox/sandbox.h"
#include "lib/sandbox/sandbox_internal.h"
#include "proto/base/strv.h"
#include "proto/base/util.h"
#include "tests/unit/check_main.h"
#include "tests/unit/deny_syscall.h"

static char ws[64];

static void setup(void)
{
	strcpy(ws, "/tmp/tc-repos-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(ws));
}

static void teardown(void)
{
	repos_clear();
	char *cmd = xasprintf("rm -rf '%s'", ws);
	ck_assert_int_eq(system(cmd), 0);
	free(cmd);
}

static void sh(const char *fmt, const char *arg)
{
	char *inner = xasprintf(fmt, arg);
	char *cmd = xasprintf("cd '%s' && %s", ws, inner);
	ck_assert_msg(system(cmd) == 0, "%s", cmd);
	free(cmd);
	free(inner);
}

/* True when the git directory rel (relative to ws) is among r's. */
static bool has_git(const struct repo_dirs *r, const char *rel)
{
	char *full = xasprintf("%s/%s", ws, rel);
	bool found = false;
	for (size_t i = 0; i < r->n; i++)
		found = found || strcmp(r->git[i], full) == 0;
	free(full);
	return found;
}

static bool has_pointer(const struct repo_dirs *r, const char *rel)
{
	char *full = xasprintf("%s/%s", ws, rel);
	bool found = false;
	for (size_t i = 0; i < r->n_pointers; i++)
		found = found || strcmp(r->pointers[i], full) == 0;
	free(full);
	return found;
}

static void nested_down_to_four_levels_case(void)
{
	sh("mkdir -p .git a/.git a/b/c/.git a/b/c/d/.git/modules/m a/b/c/d/e/.git x/y && %s",
	   "echo 'ref: refs/heads/main' > .git/HEAD");
	sh("echo 'gitdir: ../../.git/modules/s' > x/y/.git%s", "");
	/* Through a symlink, or inside a .git: never looked for. */
	sh("mkdir -p /tmp/tc-repos-outside-x/.git && ln -s /tmp/tc-repos-outside-x link%s", "");
	sh("mkdir -p a/.git/inner/.git%s", "");
	struct repo_dirs r;
	repos_get(ws, &r);
	ck_assert(has_git(&r, ".git"));
	ck_assert_uint_eq(r.n_top, 1);
	ck_assert(has_git(&r, "a/.git"));
	ck_assert(has_git(&r, "a/b/c/.git"));
	ck_assert(has_git(&r, "a/b/c/d/.git"));
	ck_assert(has_git(&r, "a/b/c/d/.git/modules/m"));
	ck_assert(!has_git(&r, "a/b/c/d/e/.git"));
	ck_assert(has_pointer(&r, "x/y/.git"));
	ck_assert(!has_git(&r, "link/.git"));
	ck_assert(!has_git(&r, "a/.git/inner/.git"));
	repo_dirs_clear(&r);
	ck_assert_int_eq(system("rm -rf /tmp/tc-repos-outside-x"), 0);
}

/* The top's .git an empty directory (the place the sandbox holds in a
 * workspace without a repository) is none, said so; with an entry, a
 * repository; a nested empty .git is a repository still. */
START_TEST(empty_top_git_is_none)
{
	sh("mkdir -p .git a/.git%s", "");
	struct repo_dirs r;
	repos_get(ws, &r);
	ck_assert(r.top_none && r.top_stub);
	ck_assert_uint_eq(r.n_top, 0);
	ck_assert(!has_git(&r, ".git"));
	ck_assert(has_git(&r, "a/.git"));
	repo_dirs_clear(&r);
	sh("echo 'ref: refs/heads/main' > .git/HEAD%s", "");
	repos_get(ws, &r);
	ck_assert(!r.top_none && !r.top_stub);
	ck_assert_uint_eq(r.n_top, 1);
	ck_assert(has_git(&r, ".git"));
	repo_dirs_clear(&r);
	sh("rm -r .git%s", "");
	repos_get(ws, &r);
	ck_assert(r.top_none && !r.top_stub);
	repo_dirs_clear(&r);
}
END_TEST

START_TEST(nested_down_to_four_levels)
{
	nested_down_to_four_levels_case();
}
END_TEST

/* The same where the kernel lacks openat2: the walk one component at a
 * time follows no symlink either. */
START_TEST(nested_down_to_four_levels_without_openat2)
{
	if (!deny_syscall_or_skip("nested_down_to_four_levels_without_openat2", SYS_openat2))
		return;
	nested_down_to_four_levels_case();
}
END_TEST

static void found_when_made_later_case(void)
{
	sh("mkdir -p p/q/r s && echo x > p/q/r/file%s", "");
	struct repo_dirs r;
	repos_get(ws, &r);
	ck_assert_uint_eq(r.n, 0);
	repo_dirs_clear(&r);
	/* Nothing changed: the kept scan serves. */
	repos_get(ws, &r);
	ck_assert_uint_eq(r.n, 0);
	repo_dirs_clear(&r);
	/* git init of a directory that was there: the top is unchanged. */
	struct stat before, after;
	ck_assert_int_eq(stat(ws, &before), 0);
	sh("mkdir p/q/r/.git%s", "");
	ck_assert_int_eq(stat(ws, &after), 0);
	ck_assert(before.st_mtim.tv_nsec == after.st_mtim.tv_nsec && before.st_mtim.tv_sec == after.st_mtim.tv_sec);
	repos_get(ws, &r);
	ck_assert(has_git(&r, "p/q/r/.git"));
	repo_dirs_clear(&r);
	/* A directory renamed above it: found where it is now. */
	sh("mv p/q s/moved%s", "");
	repos_get(ws, &r);
	ck_assert(!has_git(&r, "p/q/r/.git"));
	ck_assert(has_git(&r, "s/moved/r/.git"));
	repo_dirs_clear(&r);
	sh("rm -rf s/moved/r/.git%s", "");
	repos_get(ws, &r);
	ck_assert_uint_eq(r.n, 0);
	repo_dirs_clear(&r);
}

START_TEST(found_when_made_later)
{
	found_when_made_later_case();
}
END_TEST

/* The same without inotify: every directory the scan saw is lstat'ed at
 * each call instead. */
START_TEST(found_when_made_later_without_inotify)
{
	if (!deny_syscall_or_skip("found_when_made_later_without_inotify", SYS_inotify_init1))
		return;
	found_when_made_later_case();
}
END_TEST

static char *warned[4];
static unsigned n_warned;

static void capture(const char *msg)
{
	if (n_warned < sizeof(warned) / sizeof(*warned))
		warned[n_warned] = xstrdup(msg);
	n_warned++;
}

/* Makes n directories in dir, from first on. */
static void make_dirs(const char *dir, unsigned first, unsigned n)
{
	for (unsigned i = first; i < first + n; i++) {
		char *p = xasprintf("%s/d%u", dir, i);
		ck_assert_int_eq(mkdir(p, 0755), 0);
		free(p);
	}
}

/* One call's look at the repositories of w. */
static void look(const char *w)
{
	struct repo_dirs r;
	repos_get(w, &r);
	repo_dirs_clear(&r);
}

START_TEST(bound_counted_and_told_once)
{
	char *small = xasprintf("%s/small", ws);
	char *big = xasprintf("%s/w\nforged\\x", ws);
	ck_assert_int_eq(mkdir(small, 0755), 0);
	ck_assert_int_eq(mkdir(big, 0755), 0);
	make_dirs(small, 0, 200);
	make_dirs(big, 0, 300);
	sandbox_set_warn(capture);

	uint64_t before = sandbox_repos_bounded();
	look(small);
	ck_assert_uint_eq(sandbox_repos_bounded(), before);
	ck_assert_uint_eq(n_warned, 0);
	look(big);
	ck_assert_uint_eq(sandbox_repos_bounded(), before + 1);
	/* Kept while nothing changed: no scan. */
	look(big);
	ck_assert_uint_eq(sandbox_repos_bounded(), before + 1);
	/* Changed: scanned again, stopped again, not told again. */
	make_dirs(big, 300, 1);
	look(big);
	ck_assert_uint_eq(sandbox_repos_bounded(), before + 2);
	ck_assert_uint_eq(n_warned, 1);
	ck_assert_msg(!strchr(warned[0], '\n'), "more than one line: %s", warned[0]);
	char *want = xasprintf("workspace %s/w\\x0aforged\\x5cx has more than 256 directories or 8192 entries "
			       "within 4 levels", ws);
	ck_assert_msg(strstr(warned[0], want), "%s not in: %s", want, warned[0]);
	free(want);
	sandbox_set_warn(NULL);
	free(warned[0]);
	free(small);
	free(big);
}
END_TEST

/* What a kept plan depends on (plan.c): a path's way is watched for the
 * names that lead to it, each pair new the first time; a change of one
 * of those names (made, removed, renamed) moves the generation, another
 * entry of the same directories does not; a path ending with "/" stands
 * for every name of its directory; a link on the way cannot be watched. */
START_TEST(plan_watches_follow_the_way)
{
	sh("mkdir -p .git/modules sub %s", "&& true");
	char *hooks = xasprintf("%s/.git/hooks", ws);
	char *modules = xasprintf("%s/.git/modules/", ws);
	char *nested = xasprintf("%s/sub/.git/config", ws);
	ck_assert(!plan_watch_way(ws, hooks));
	ck_assert(plan_watch_way(ws, hooks));
	ck_assert(!plan_watch_way(ws, modules));
	ck_assert(plan_watch_way(ws, modules));
	ck_assert(!plan_watch_way(ws, nested));
	ck_assert(plan_watch_way(ws, nested));
	uint64_t g = plan_watch_gen();
	/* Other names: nothing. */
	sh("touch file .git/index.lock sub/x && mkdir other%s", "");
	ck_assert_uint_eq(plan_watch_gen(), g);
	/* A name on the way, made: changed. */
	sh("mkdir .git/hooks%s", "");
	ck_assert_uint_ne(plan_watch_gen(), g);
	g = plan_watch_gen();
	/* Any name of a directory written with a final "/". */
	sh("mkdir .git/modules/m%s", "");
	ck_assert_uint_ne(plan_watch_gen(), g);
	g = plan_watch_gen();
	/* A missing directory on the way, made: changed. */
	sh("mkdir sub/.git%s", "");
	ck_assert_uint_ne(plan_watch_gen(), g);
	g = plan_watch_gen();
	/* The repository swapped for another. */
	sh("mv .git old.git && mkdir .git%s", "");
	ck_assert_uint_ne(plan_watch_gen(), g);
	/* A link on the way: what lies past it cannot be watched. */
	sh("ln -s /tmp lnk%s", "");
	char *through = xasprintf("%s/lnk/x", ws);
	ck_assert(!plan_watch_way(ws, through));
	ck_assert(!plan_watch_way(ws, through));
	/* Outside the workspace: not watched. */
	ck_assert(!plan_watch_way(ws, "/etc/passwd"));
	plan_watch_clear();
	free(through);
	free(nested);
	free(modules);
	free(hooks);
}
END_TEST

static size_t count(char **v)
{
	size_t n = 0;
	while (v && v[n])
		n++;
	return n;
}

static bool holds(char **v, const char *rel)
{
	char *real = realpath(ws, NULL);
	char *full = xasprintf("%s/%s", real, rel);
	bool found = false;
	for (; v && *v; v++)
		found = found || strcmp(*v, full) == 0;
	free(full);
	free(real);
	return found;
}

/* The files an argv makes the daemon run, held read-only where a root
 * holds them: a program found in $PATH, the script an interpreter's
 * first operand names (relative to cwd), a link's name beside the file
 * it leads to; not an interpreter outside the roots, an operand of a
 * program that is no interpreter, a directory, an option; once each. */
START_TEST(programs_read_only)
{
	sh("mkdir bin scripts && printf '#!/bin/sh\\n' > bin/mytool && chmod 755 bin/mytool && "
	   "echo x > scripts/s.py && echo d > data.txt && ln -s mytool bin/alias%s", "");
	char *real = realpath(ws, NULL);
	const char *const roots[] = { real, NULL };
	char *old_path = getenv("PATH") ? xstrdup(getenv("PATH")) : NULL;
	char *path = xasprintf("/nonexistent:%s/bin:/usr/bin:/bin", real);
	setenv("PATH", path, 1);
	struct sandbox_config cfg = {0};
	const char *const a1[] = { "mytool", "--x", NULL };
	sandbox_read_only_argv(&cfg, a1, "/", roots);
	ck_assert_uint_eq(count(cfg.read_only), 1);
	ck_assert(holds(cfg.read_only, "bin/mytool"));
	sandbox_read_only_argv(&cfg, a1, "/", roots);
	ck_assert_uint_eq(count(cfg.read_only), 1);
	const char *const a2[] = { "sh", "-e", "scripts/s.py", "data.txt", NULL };
	sandbox_read_only_argv(&cfg, a2, real, roots);
	ck_assert_uint_eq(count(cfg.read_only), 2);
	ck_assert(holds(cfg.read_only, "scripts/s.py"));
	const char *const a3[] = { "cat", "data.txt", NULL };
	const char *const a4[] = { "sh", "scripts", NULL };
	const char *const a5[] = { "sh", "-c", "echo", NULL };
	sandbox_read_only_argv(&cfg, a3, real, roots);
	sandbox_read_only_argv(&cfg, a4, real, roots);
	sandbox_read_only_argv(&cfg, a5, real, roots);
	ck_assert_uint_eq(count(cfg.read_only), 2);
	const char *const a6[] = { "alias", NULL };
	sandbox_read_only_argv(&cfg, a6, "/", roots);
	ck_assert_uint_eq(count(cfg.read_only), 3);
	ck_assert(holds(cfg.read_only, "bin/alias"));
	if (old_path)
		setenv("PATH", old_path, 1);
	else
		unsetenv("PATH");
	strv_free(cfg.read_only);
	free(old_path);
	free(path);
	free(real);
}
END_TEST

static Suite *repos_suite(void)
{
	Suite *s = suite_create("sandbox_repos");
	TCase *tc = tcase_create("repos");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, nested_down_to_four_levels);
	tcase_add_test(tc, empty_top_git_is_none);
	tcase_add_test(tc, found_when_made_later);
	tcase_add_test(tc, nested_down_to_four_levels_without_openat2);
	tcase_add_test(tc, found_when_made_later_without_inotify);
	tcase_add_test(tc, bound_counted_and_told_once);
	tcase_add_test(tc, plan_watches_follow_the_way);
	tcase_add_test(tc, programs_read_only);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return run_suite(repos_suite());
}
