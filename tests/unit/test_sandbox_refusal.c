/* SPDX-License-Identifier: MIT */
/*
 * Whether the sandbox refused a path a failed child named
 * (lib/sandbox/refusal.c): decided by the plan and the files' state, not
 * by the wording, for each kind of refusal the sandbox makes, and never
 * for a refusal it did not make (the bits of another user's file, a file
 * that is not there, a file system read-only anyway).
 */
#include <check.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "lib/sandbox/sandbox_internal.h"
#include "proto/base/util.h"
#include "tests/unit/check_main.h"

static char dir[64];

static char *at(const char *rel)
{
	return xasprintf("%s/%s", dir, rel);
}

static void make(const char *rel, mode_t mode, uid_t uid, bool is_dir)
{
	_cleanup_free_ char *p = at(rel);
	if (is_dir)
		ck_assert_int_eq(mkdir(p, mode), 0);
	else
		close(open(p, O_CREAT | O_WRONLY | O_CLOEXEC, mode));
	ck_assert_int_eq(chmod(p, mode), 0);
	ck_assert_int_eq(lchown(p, uid, uid), 0);
}

static void setup(void)
{
	snprintf(dir, sizeof(dir), "/tmp/tc-refusal-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(dir));
	ck_assert_int_eq(chmod(dir, 0755), 0);
	make("ws", 0777, 65534, true);
	make("ws/.git", 0755, 65534, true);
	make("ws/.git/hooks", 0755, 65534, true);
	make("ro", 0755, 0, true);
	make("ro/file", 0644, 0, false);
	make("hide", 0755, 0, true);
	make("hide/bus", 0666, 0, false);
	make("secret", 0755, 0, true);
	make("secret/key", 0644, 0, false);
	make("other0600", 0600, 0, false);
	make("mine", 0644, 65534, false);
	make("mine755", 0755, 65534, false);
	make("open", 0777, 0, true);
	make("shut", 0700, 0, true);
	make("shut/bus", 0666, 0, false);
	_cleanup_free_ char *link = at("tolink");
	_cleanup_free_ char *target = at("secret");
	ck_assert_int_eq(symlink(target, link), 0);
}

static void teardown(void)
{
	_cleanup_free_ char *cmd = xasprintf("rm -rf '%s'", dir);
	ck_assert_int_eq(system(cmd), 0);
}

/* "prefix<dir>/rel: words" */
static char *line(const char *prefix, const char *rel, const char *words)
{
	return xasprintf("%s%s/%s: %s\n", prefix, dir, rel, words);
}

static char *check(const struct sandbox_refusal_plan *p, const char *err, bool *unsure)
{
	return sandbox_refusal_check(p, err, strlen(err), NULL, unsure);
}

/* Read-only mounts, protected paths, covered directories: EROFS and
 * ENOENT are the sandbox's only for what its mounts hold. */
START_TEST(mounts_decide)
{
	_cleanup_free_ char *ws = at("ws"), *hooks = at("ws/.git/hooks"), *hide = at("hide");
	const char *const writable[] = { ws, NULL };
	const char *const ro_binds[] = { hooks, NULL };
	const char *const hide_dirs[] = { hide, NULL };
	struct sandbox_refusal_plan p = { .writable = writable, .ro_binds = ro_binds, .hide_dirs = hide_dirs,
					  .uid = 0, .gid = 0 };
	const struct sandbox_refusal_plan q_none = { .uid = 0, .gid = 0 };
	bool unsure;
	_cleanup_free_ char *e1 = line("sh: 1: cannot create ", "ro/new", "Read-only file system");
	char *s = check(&p, e1, &unsure);
	_cleanup_free_ char *want = xasprintf("writing %s/ro/new (read-only in the sandbox", dir);
	ck_assert_msg(s && strncmp(s, want, strlen(want)) == 0, "%s", s ? s : "(null)");
	free(s);
	/* The path nearest the words, not the program's before it; Node's
	 * wording after them. */
	_cleanup_free_ char *e1b = xasprintf("/bin/sh: 1: cannot create %s/ro/new: Read-only file system\n", dir);
	s = check(&p, e1b, &unsure);
	ck_assert_msg(s && strncmp(s, want, strlen(want)) == 0 && !strstr(s, "/bin/sh") && !strstr(s, "/usr/bin"), "%s",
		      s ? s : "(null)");
	free(s);
	_cleanup_free_ char *e1c = xasprintf("Error: EROFS: read-only file system, open '%s/ro/new'\n", dir);
	s = check(&p, e1c, &unsure);
	ck_assert_msg(s && strncmp(s, want, strlen(want)) == 0, "%s", s ? s : "(null)");
	free(s);
	/* A relative path after the program's: neither is taken. */
	_cleanup_free_ char *e1d = xstrdup("/bin/sh: 1: cannot create .git/hooks/h: Read-only file system\n");
	ck_assert_ptr_null(check(&p, e1d, &unsure));
	ck_assert(unsure);
	/* Two paths: the one next to the words. */
	_cleanup_free_ char *e1e = xasprintf("mv: cannot move '%s/ws/a' to '%s/ro/new': Read-only file system\n", dir,
					     dir);
	s = check(&p, e1e, &unsure);
	ck_assert_msg(s && strncmp(s, want, strlen(want)) == 0, "%s", s ? s : "(null)");
	free(s);
	/* A protected path is a mount: git's rename over it is refused. */
	_cleanup_free_ char *e1f = xasprintf("error: could not write config file %s/ws/.git/hooks: Device or resource "
					     "busy\n", dir);
	s = check(&p, e1f, &unsure);
	ck_assert_msg(s && strstr(s, "replacing ") && strstr(s, "/ws/.git/hooks (a protected path, sandbox.protect)"),
		      "%s", s ? s : "(null)");
	free(s);
	_cleanup_free_ char *e1g = xasprintf("rm: cannot remove '%s/ws': Device or resource busy\n", dir);
	ck_assert_ptr_null(check(&p, e1g, &unsure));
	ck_assert(!unsure);
	/* Quoted as coreutils quote, inside the writable workspace: not the
	 * sandbox's (only a file system read-only anyway answers so). */
	_cleanup_free_ char *e2 = xasprintf("touch: cannot touch '%s/ws/x': Read-only file system\n", dir);
	ck_assert_ptr_null(check(&p, e2, &unsure));
	ck_assert(!unsure);
	_cleanup_free_ char *e3 = xasprintf("cp: cannot create regular file \xe2\x80\x98%s/ws/.git/hooks/pre-commit"
					    "\xe2\x80\x99: Read-only file system\n", dir);
	s = check(&p, e3, &unsure);
	ck_assert_msg(s && strstr(s, "/ws/.git/hooks/pre-commit (a protected path, sandbox.protect)"), "%s",
		      s ? s : "(null)");
	free(s);
	/* A socket directory covered empty: what is there is hidden, what
	 * is not there is only missing. */
	_cleanup_free_ char *e4 = line("dbus: Failed to connect to socket ", "hide/bus", "No such file or directory");
	s = check(&p, e4, &unsure);
	_cleanup_free_ char *want4 = xasprintf("reaching %s/hide/bus (hidden: the sandbox covers %s,", dir, hide);
	ck_assert_msg(s && strncmp(s, want4, strlen(want4)) == 0, "%s", s ? s : "(null)");
	free(s);
	_cleanup_free_ char *e5 = line("cat: ", "hide/none", "No such file or directory");
	ck_assert_ptr_null(check(&p, e5, &unsure));
	ck_assert(!unsure);
	_cleanup_free_ char *e6 = line("cat: ", "ro/none", "No such file or directory");
	ck_assert_ptr_null(check(&p, e6, &unsure));
	/* Without read-only mounts, EROFS is the file system's. */
	struct sandbox_refusal_plan q = { .uid = 0, .gid = 0 };
	ck_assert_ptr_null(check(&q, e1, &unsure));
	ck_assert(!unsure);
	/* A refusal naming no path: no word either way. */
	ck_assert_ptr_null(check(&p, "error: Read-only file system\n", &unsure));
	ck_assert(unsure);
	/* A private path covered by an empty mount: what is there is
	 * refused, what is not is only missing; nothing can be made there. */
	_cleanup_free_ char *secret = at("secret");
	const char *const covers[] = { secret, NULL };
	struct sandbox_refusal_plan pc = p;
	pc.covers = covers;
	_cleanup_free_ char *c1 = line("cat: ", "secret/key", "No such file or directory");
	s = check(&pc, c1, &unsure);
	_cleanup_free_ char *wantc = xasprintf("reaching %s/secret/key (a private path, sandbox.deny_read)", dir);
	ck_assert_msg(s && str_eq(s, wantc), "%s", s ? s : "(null)");
	free(s);
	_cleanup_free_ char *c2 = line("cat: ", "secret/none", "No such file or directory");
	ck_assert_ptr_null(check(&pc, c2, &unsure));
	_cleanup_free_ char *c3 = line("touch: cannot touch ", "secret/new", "Read-only file system");
	s = check(&pc, c3, &unsure);
	ck_assert_msg(s && strstr(s, "/secret/new (a private path, sandbox.deny_read)"), "%s", s ? s : "(null)");
	free(s);
	/* /proc/self is the daemon's, not the child's: not looked into, but
	 * the mount its words lie on is the child's too, made read-only. */
	_cleanup_free_ char *e8 = xstrdup("sh: 1: cannot create /proc/self/oom_score_adj: Read-only file system\n");
	s = check(&p, e8, &unsure);
	ck_assert_msg(s && str_eq(s, "writing /proc/self/oom_score_adj (read-only in the sandbox: outside the paths it "
				      "may write)"), "%s", s ? s : "(null)");
	free(s);
	/* Without read-only mounts nothing of the sandbox's answers EROFS
	 * there; a link of /proc leads anywhere. */
	ck_assert_ptr_null(check(&q_none, e8, &unsure));
	ck_assert(unsure);
	_cleanup_free_ char *e8b = xstrdup("sh: 1: cannot create /proc/self/fd/1: Read-only file system\n");
	ck_assert_ptr_null(check(&p, e8b, &unsure));
	ck_assert(unsure);
	_cleanup_free_ char *e8c = xstrdup("sh: 1: cannot create /proc/self/cwd/x: Read-only file system\n");
	ck_assert_ptr_null(check(&p, e8c, &unsure));
	ck_assert(unsure);
	/* The sandbox mounts no proc of its own: it hides no process. */
	_cleanup_free_ char *e8d = xstrdup("cat: /proc/4194999/status: No such file or directory\n");
	ck_assert_ptr_null(check(&p, e8d, &unsure));
	ck_assert(!unsure);
	/* Refused by a check against another process (its uid, Landlock's
	 * scope), which the daemon cannot replay: no word either way. */
	_cleanup_free_ char *e8e = xstrdup("cat: /proc/1/environ: Permission denied\n");
	ck_assert_ptr_null(check(&p, e8e, &unsure));
	ck_assert(unsure);
	_cleanup_free_ char *e9 = xstrdup("sh: 1: cannot create /dev/stdout: Read-only file system\n");
	ck_assert_ptr_null(check(&p, e9, &unsure));
	/* A path through a link is judged where it leads. */
	_cleanup_free_ char *e7 = line("cat: ", "tolink/key", "Read-only file system");
	s = check(&p, e7, &unsure);
	_cleanup_free_ char *want7 = xasprintf("writing %s/secret/key (", dir);
	ck_assert_msg(s && strncmp(s, want7, strlen(want7)) == 0, "%s", s ? s : "(null)");
	free(s);
}
END_TEST

/* EACCES: the bits as the child (uid 65534), then Landlock's rules. */
START_TEST(bits_then_rules)
{
	long abi = syscall(SYS_landlock_create_ruleset, NULL, 0, 1U);
	if (abi < 1)
		TC_SKIP("no Landlock here");
	_cleanup_free_ char *ws = at("ws"), *secret = at("secret");
	const char *const workspaces[] = { ws, NULL };
	const char *const deny[] = { secret, NULL };
	struct sandbox_req req = { .profile = SANDBOX_WORKSPACE_WRITE, .workspaces = workspaces, .deny_read = deny };
	const struct ll_rules *rules = NULL;
	_cleanup_free_ char *msg = NULL;
	ck_assert_int_eq(ll_rules_get(&req, (int)abi, NULL, false, &rules, &msg), 0);
	rules = ll_rules_hold(rules);
	struct sandbox_refusal_plan p = { .rules = rules, .uid = 65534, .gid = 65534 };
	bool unsure;
	/* A private file the bits let the child read (not write, nor run):
	 * every access that can fail there is one Landlock refuses. */
	_cleanup_free_ char *e1 = line("cat: ", "secret/key", "Permission denied");
	char *s = check(&p, e1, &unsure);
	_cleanup_free_ char *want = xasprintf("accessing %s/secret/key (a private path, sandbox.deny_read)", dir);
	ck_assert_msg(s && str_eq(s, want), "%s", s ? s : "(null)");
	free(s);
	/* Python's wording, the path after the words. */
	_cleanup_free_ char *e1p = xasprintf("PermissionError: [Errno 13] Permission denied: '%s/secret/key'\n", dir);
	s = check(&p, e1p, &unsure);
	ck_assert_msg(s && str_eq(s, want), "%s", s ? s : "(null)");
	free(s);
	/* Another user's 0600 file in the workspace: the bits refused it. */
	make("ws/other0600", 0600, 0, false);
	_cleanup_free_ char *e2 = line("cat: ", "ws/other0600", "Permission denied");
	ck_assert_ptr_null(check(&p, e2, &unsure));
	ck_assert(!unsure);
	/* Outside the writable paths, removing it is Landlock's to refuse,
	 * before the bits: reading or removing cannot be told apart. */
	_cleanup_free_ char *e2b = line("cat: ", "other0600", "Permission denied");
	ck_assert_ptr_null(check(&p, e2b, &unsure));
	ck_assert(unsure);
	/* The child's own file outside the writable paths: writing it is
	 * refused by the rules; running it by its bits, which the rules
	 * allow: which one it tried cannot be told. */
	_cleanup_free_ char *e3 = line("sh: 1: cannot create ", "mine", "Permission denied");
	ck_assert_ptr_null(check(&p, e3, &unsure));
	ck_assert(unsure);
	/* Executable too: only writing or removing it can have failed, both
	 * refused by Landlock. */
	_cleanup_free_ char *e4 = line("sh: 1: cannot create ", "mine755", "Permission denied");
	s = check(&p, e4, &unsure);
	_cleanup_free_ char *want4 = xasprintf("accessing %s/mine755 (outside the paths it may write)", dir);
	ck_assert_msg(s && str_eq(s, want4), "%s", s ? s : "(null)");
	free(s);
	/* A new file: making it can only have failed. */
	_cleanup_free_ char *e5 = line("touch: cannot touch ", "open/new", "Permission denied");
	s = check(&p, e5, &unsure);
	_cleanup_free_ char *want5 = xasprintf("creating %s/open/new (outside the paths it may write)", dir);
	ck_assert_msg(s && str_eq(s, want5), "%s", s ? s : "(null)");
	free(s);
	/* Also where the bits would keep it out: Landlock answers first. */
	_cleanup_free_ char *e6 = line("touch: cannot touch ", "new", "Permission denied");
	s = check(&p, e6, &unsure);
	ck_assert_msg(s && strstr(s, "creating "), "%s", s ? s : "(null)");
	free(s);
	/* In the workspace: allowed by the rules, so the bits'. */
	_cleanup_free_ char *e7 = line("cat: ", "ws/.git", "Permission denied");
	ck_assert_ptr_null(check(&p, e7, &unsure));
	ck_assert(!unsure);
	/* With the read-only mounts, writing and removing there are EROFS:
	 * reading or running a private file the child owns, both Landlock's
	 * to refuse, are left; and another user's file outside the writable
	 * paths is the bits' again. */
	_cleanup_free_ char *ws2 = at("ws");
	const char *const writable[] = { ws2, NULL };
	struct sandbox_refusal_plan q = p;
	q.writable = writable;
	make("secret/run", 0755, 65534, false);
	_cleanup_free_ char *e8 = line("cat: ", "secret/run", "Permission denied");
	s = check(&q, e8, &unsure);
	_cleanup_free_ char *want8 = xasprintf("accessing %s/secret/run (a private path, sandbox.deny_read)", dir);
	ck_assert_msg(s && str_eq(s, want8), "%s", s ? s : "(null)");
	free(s);
	_cleanup_free_ char *e9 = line("cat: ", "other0600", "Permission denied");
	ck_assert_ptr_null(check(&q, e9, &unsure));
	ck_assert(!unsure);
	/* Named already by the kernel's record: not twice; two lines, each once. */
	_cleanup_free_ char *two = xasprintf("%s%s%s", e1, e1, e4);
	_cleanup_free_ char *known = xasprintf("reading %s/secret/key", dir);
	s = sandbox_refusal_check(&p, two, strlen(two), known, &unsure);
	ck_assert_msg(s && str_eq(s, want4), "%s", s ? s : "(null)");
	free(s);
	ll_rules_release(rules);
	ll_cache_clear();
}
END_TEST

/* What lies beyond a directory the child may not search is never told:
 * a covered directory's file is not named for one who could not have
 * reached it. */
START_TEST(nothing_told_beyond_the_bits)
{
	_cleanup_free_ char *shut = at("shut");
	const char *const hide_dirs[] = { shut, NULL };
	struct sandbox_refusal_plan p = { .hide_dirs = hide_dirs, .uid = 65534, .gid = 65534 };
	bool unsure;
	_cleanup_free_ char *e = line("x: ", "shut/bus", "No such file or directory");
	ck_assert_ptr_null(check(&p, e, &unsure));
	ck_assert(!unsure);
	/* Its owner could: named. */
	p.uid = 0;
	char *s = check(&p, e, &unsure);
	ck_assert_msg(s && strstr(s, "reaching "), "%s", s ? s : "(null)");
	free(s);
}
END_TEST

/* Hostile stderr: many lines, long and odd paths stay bounded. */
START_TEST(bounded)
{
	struct sandbox_refusal_plan p = { .uid = 0, .gid = 0 };
	struct buf b = {0};
	for (int i = 0; i < 2000; i++)
		buf_printf(&b, "x: /a/%d/../../b: Permission denied\n", i);
	buf_puts(&b, "y: /\x01/z: Permission denied\n");
	for (int i = 0; i < 5000; i++)
		buf_putc(&b, '/');
	buf_puts(&b, ": Read-only file system\n");
	bool unsure;
	char *s = sandbox_refusal_check(&p, buf_head(&b), buf_size(&b), NULL, &unsure);
	ck_assert_ptr_null(s);
	buf_free(&b);
}
END_TEST

int main(void)
{
	if (geteuid() != 0) {
		printf("SKIP needs root to give the test's files to uid 65534\n");
		return TC_EXIT_SKIP;
	}
	Suite *s = suite_create("sandbox_refusal");
	TCase *tc = tcase_create("sandbox_refusal");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, mounts_decide);
	tcase_add_test(tc, bits_then_rules);
	tcase_add_test(tc, nothing_told_beyond_the_bits);
	tcase_add_test(tc, bounded);
	suite_add_tcase(s, tc);
	return run_suite(s);
}
