/* SPDX-License-Identifier: MIT */
/*
 * Whether the sandbox refused a path a failed child named
 * (lib/sandbox/refusal.c): decided by the plan and the files' state, not
 * by the wording, for each kind of refusal the sandbox makes, and never
 * for a refusal it did not make (the bits of another user's file, a file
 * that is not there, a file system read-only anyway).
 */
#include <check.h>
#include <errno.h>
#include <sched.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/xattr.h>
#include <unistd.h>
#include <linux/fs.h>

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

/* The golden form of a check: the note's list, or NULL, and whether the
 * line stays "may have been" (unsure). */
static void expect(const struct sandbox_refusal_plan *p, const char *err, const char *want, bool want_unsure)
{
	bool unsure = !want_unsure;
	char *s = check(p, err, &unsure);
	ck_assert_msg(want ? s && str_eq(s, want) : !s, "%s: got %s, want %s", err, s ? s : "(null)",
		      want ? want : "(null)");
	ck_assert_msg(unsure == want_unsure, "%s: unsure %d", err, unsure);
	free(s);
}

/* A relative path is judged where the child started, and only where what
 * is there explains the error. */
START_TEST(relative_paths_where_it_started)
{
	_cleanup_free_ char *ws = at("ws"), *hooks = at("ws/.git/hooks"), *ro = at("ro"), *shut = at("shut");
	const char *const writable[] = { ws, NULL };
	const char *const ro_binds[] = { hooks, NULL };
	struct sandbox_refusal_plan p = { .writable = writable, .ro_binds = ro_binds, .uid = 65534, .gid = 65534,
					  .cwd = ro };
	make("ws/other0600", 0600, 0, false);
	_cleanup_free_ char *w1 = xasprintf("writing %s/ro/new (read-only in the sandbox: outside the paths it may write)",
					    dir);
	expect(&p, "touch: cannot touch 'new': Read-only file system\n", w1, false);
	expect(&p, "sh: 1: cannot create new: Read-only file system\n", w1, false);
	/* Named already by the kernel's record (by its canonical path): not
	 * twice. */
	_cleanup_free_ char *known = xasprintf("writing %s/ro/new", dir);
	bool unsure = true;
	const char *rel = "touch: cannot touch 'new': Read-only file system\n";
	ck_assert_ptr_null(sandbox_refusal_check(&p, rel, strlen(rel), known, &unsure));
	ck_assert(!unsure);
	/* Where the shell started, a protected path; the shell's own
	 * absolute name before it is not taken. */
	p.cwd = ws;
	_cleanup_free_ char *w2 = xasprintf("writing %s/ws/.git/hooks/pre-commit (a protected path, sandbox.protect)",
					    dir);
	expect(&p, "/bin/sh: 1: cannot create .git/hooks/pre-commit: Read-only file system\n", w2, false);
	/* The workspace is writable: EROFS there means the child was
	 * elsewhere (a cd), so nothing is said either way. */
	expect(&p, "touch: cannot touch 'new': Read-only file system\n", NULL, true);
	/* Another user's 0600 file there: the bits', not the sandbox's. */
	expect(&p, "cat: other0600: Permission denied\n", NULL, false);
	expect(&p, "PermissionError: [Errno 13] Permission denied: 'other0600'\n", NULL, false);
	expect(&p, "error: Permission denied: \xe2\x80\x98other0600\xe2\x80\x99\n", NULL, false);
	expect(&p, "EACCES: permission denied, open `other0600'\n", NULL, false);
	/* Quoted after the words, but more than a word between: not taken. */
	expect(&p, "Permission denied while the build read 'other0600'\n", NULL, true);
	/* Missing there, or nothing there that refuses it: elsewhere. */
	expect(&p, "cat: nothere/x: Permission denied\n", NULL, true);
	expect(&p, "cat: .git: Permission denied\n", NULL, true);
	/* A missing file is only missing; one that is there was elsewhere. */
	expect(&p, "cat: nothere: No such file or directory\n", NULL, false);
	/* The line's first word is a program's name, not a path. */
	expect(&p, "secret: Permission denied\n", NULL, true);
	/* Started beneath a directory it may not search (entered by an fd
	 * the daemon opened): a relative path does not go through it, an
	 * absolute one does. */
	make("shut/in", 0777, 0, true);
	_cleanup_free_ char *in = at("shut/in");
	p.cwd = in;
	_cleanup_free_ char *w3 = xasprintf("writing %s/shut/in/new (read-only in the sandbox: outside the paths it "
					    "may write)", dir);
	expect(&p, "touch: cannot touch 'new': Read-only file system\n", w3, false);
	_cleanup_free_ char *abs = line("touch: cannot touch ", "shut/in/new", "Read-only file system");
	expect(&p, abs, NULL, false);
	/* A directory it may not list, by its bits. */
	p.cwd = shut;
	expect(&p, "ls: cannot open directory '.': Permission denied\n", NULL, false);
	/* No working directory known: relative paths are not judged. */
	p.cwd = NULL;
	expect(&p, "cat: other0600: Permission denied\n", NULL, true);
}
END_TEST

/* An access ACL as the xattr holds it: entries of tag, perm, id. */
static bool set_acl(const char *rel, const unsigned (*e)[3], size_t n)
{
	_cleanup_free_ char *path = at(rel);
	_cleanup_free_ unsigned char *b = xcalloc(1, 4 + 8 * n);
	b[0] = 2;
	for (size_t i = 0; i < n; i++) {
		unsigned char *x = b + 4 + 8 * i;
		x[0] = (unsigned char)e[i][0];
		x[2] = (unsigned char)e[i][1];
		for (int k = 0; k < 4; k++)
			x[4 + k] = (unsigned char)(e[i][2] >> (8 * k));
	}
	return setxattr(path, "system.posix_acl_access", b, 4 + 8 * n, 0) == 0;
}

#define U_OBJ 0x01
#define U 0x02
#define G_OBJ 0x04
#define G 0x08
#define MASK 0x10
#define OTHER 0x20
#define NOID 0xffffffffu

/* The access ACL decides where it grants or denies what the bits would
 * not: read as the kernel reads it, the mask included. */
START_TEST(acls_as_the_kernel)
{
	_cleanup_free_ char *ws = at("ws"), *shut = at("aclshut");
	const char *const writable[] = { ws, NULL };
	struct sandbox_refusal_plan p = { .writable = writable, .uid = 65534, .gid = 65534 };
	/* Readable by the others' bits, but the ACL names the child with
	 * nothing: the ACL's refusal, not the sandbox's. */
	make("ws/acl_deny", 0644, 0, false);
	static const unsigned deny[][3] = { { U_OBJ, 6, NOID }, { U, 0, 65534 }, { G_OBJ, 4, NOID }, { MASK, 4, NOID },
					    { OTHER, 4, NOID } };
	if (!set_acl("ws/acl_deny", deny, ELEMENTSOF(deny)))
		TC_SKIP("no POSIX ACLs on %s", dir);
	_cleanup_free_ char *e1 = line("cat: ", "ws/acl_deny", "Permission denied");
	expect(&p, e1, NULL, false);
	/* A named entry granting rw, the mask only r: writing is refused. */
	make("ws/acl_mask", 0644, 0, false);
	static const unsigned masked[][3] = { { U_OBJ, 6, NOID }, { U, 6, 65534 }, { G_OBJ, 4, NOID },
					      { MASK, 4, NOID }, { OTHER, 0, NOID } };
	ck_assert(set_acl("ws/acl_mask", masked, ELEMENTSOF(masked)));
	_cleanup_free_ char *e2 = line("sh: 1: cannot create ", "ws/acl_mask", "Permission denied");
	expect(&p, e2, NULL, false);
	/* A directory of sockets covered empty, 0700 but searchable by the
	 * child through its ACL: what is in it is named hidden (by the bits
	 * alone the child could not have reached it). */
	make("aclshut", 0700, 0, true);
	make("aclshut/bus", 0666, 0, false);
	static const unsigned search[][3] = { { U_OBJ, 7, NOID }, { U, 1, 65534 }, { G_OBJ, 0, NOID },
					      { MASK, 1, NOID }, { OTHER, 0, NOID } };
	ck_assert(set_acl("aclshut", search, ELEMENTSOF(search)));
	const char *const hide_dirs[] = { shut, NULL };
	struct sandbox_refusal_plan h = { .hide_dirs = hide_dirs, .uid = 65534, .gid = 65534 };
	_cleanup_free_ char *e3 = line("x: ", "aclshut/bus", "No such file or directory");
	_cleanup_free_ char *w3 = xasprintf("reaching %s/aclshut/bus (hidden: the sandbox covers %s, where sockets such "
					    "as the session bus and agents live)", dir, shut);
	expect(&h, e3, w3, false);
	/* A group entry that matches but does not grant refuses, whatever
	 * the others' bits. */
	static const unsigned group[][3] = { { U_OBJ, 7, NOID }, { G_OBJ, 0, NOID }, { G, 0, 65534 },
					     { MASK, 7, NOID }, { OTHER, 1, NOID } };
	ck_assert(set_acl("aclshut", group, ELEMENTSOF(group)));
	expect(&h, e3, NULL, false);
	/* An ACL longer than the daemon reads: the bits alone would be
	 * wrong, so no word either way. */
	make("ws/acl_long", 0644, 0, false);
	unsigned (*longer)[3] = xcalloc(80, sizeof(*longer));
	size_t n = 0;
	longer[n][0] = U_OBJ, longer[n][1] = 6, longer[n++][2] = NOID;
	for (unsigned i = 0; i < 70; i++)
		longer[n][0] = U, longer[n][1] = 4, longer[n++][2] = 1000 + i;
	longer[n][0] = G_OBJ, longer[n][1] = 4, longer[n++][2] = NOID;
	longer[n][0] = MASK, longer[n][1] = 4, longer[n++][2] = NOID;
	longer[n][0] = OTHER, longer[n][1] = 0, longer[n++][2] = NOID;
	ck_assert(set_acl("ws/acl_long", (const unsigned (*)[3])longer, n));
	free(longer);
	_cleanup_free_ char *e4 = line("cat: ", "ws/acl_long", "Permission denied");
	expect(&p, e4, NULL, true);
}
END_TEST

/* EPERM: the sandbox's only where its filter refused the call the line
 * names, or the capabilities it took from a uid 0 child would have
 * allowed it. */
START_TEST(eperm_by_the_call)
{
	struct sandbox_refusal_plan r = { .uid = 0, .gid = 0, .seccomp = true, .no_caps = true };
	struct sandbox_refusal_plan n = { .uid = 65534, .gid = 65534, .seccomp = true, .no_caps = true };
	_cleanup_free_ char *mode_mine = xasprintf("chmod: changing permissions of '%s/mine': Operation not permitted\n",
						   dir);
	_cleanup_free_ char *mode_root = xasprintf("chmod: changing permissions of '%s/other0600': Operation not "
						   "permitted\n", dir);
	_cleanup_free_ char *w1 = xasprintf("changing the mode of %s/mine (a sandboxed child holds no capabilities, even "
					    "as root: only a file's owner may)", dir);
	expect(&r, mode_mine, w1, false);
	/* As uid 65534, root's file: refused to it outside the sandbox too. */
	expect(&n, mode_root, NULL, false);
	/* Its own file: only a setuid or setgid bit is refused, by the filter. */
	_cleanup_free_ char *w2 = xasprintf("setting a setuid or setgid bit on %s/mine (no file gets one in the sandbox)",
					    dir);
	expect(&n, mode_mine, w2, false);
	struct sandbox_refusal_plan nf = n;
	nf.seccomp = false;
	expect(&nf, mode_mine, NULL, true);
	/* A uid 0 child that kept its capabilities: not told. */
	struct sandbox_refusal_plan rc = r;
	rc.no_caps = false;
	expect(&rc, mode_mine, NULL, true);
	/* Ownership: only a capability gives a file away. */
	_cleanup_free_ char *own = xasprintf("chown: changing ownership of '%s/mine': Operation not permitted\n", dir);
	_cleanup_free_ char *grp = xasprintf("chgrp: changing group of '%s/mine': Operation not permitted\n", dir);
	_cleanup_free_ char *w3 = xasprintf("changing the owner of %s/mine (a sandboxed child holds no capabilities, "
					    "even as root: it gives no file away)", dir);
	expect(&r, own, w3, false);
	expect(&r, grp, w3, false);
	expect(&n, own, NULL, false);
	/* Times and hard links: its owner's, or a capability's. */
	_cleanup_free_ char *times = xasprintf("touch: setting times of '%s/mine': Operation not permitted\n", dir);
	_cleanup_free_ char *w4 = xasprintf("setting the times of %s/mine (a sandboxed child holds no capabilities, "
					    "even as root: only a file's owner may)", dir);
	expect(&r, times, w4, false);
	_cleanup_free_ char *times0 = xasprintf("touch: setting times of '%s/other0600': Operation not permitted\n", dir);
	expect(&n, times0, NULL, false);
	_cleanup_free_ char *link = xasprintf("ln: failed to create hard link '%s/ws/l' => '%s/mine': Operation not "
					      "permitted\n", dir, dir);
	_cleanup_free_ char *w5 = xasprintf("linking to %s/mine (a sandboxed child holds no capabilities, even as "
					    "root: only a file's owner may)", dir);
	expect(&r, link, w5, false);
	/* Device nodes: the filter's for uid 0; a privilege uid 65534
	 * never had. */
	_cleanup_free_ char *node = xasprintf("mknod: %s/ws/null2: Operation not permitted\n", dir);
	_cleanup_free_ char *w6 = xasprintf("making the device node %s/ws/null2 (the sandbox makes no device nodes, nor "
					    "setuid or setgid files)", dir);
	expect(&r, node, w6, false);
	expect(&n, node, NULL, false);
	/* Calls the filter refuses whatever they name. */
	expect(&r, "unshare: unshare failed: Operation not permitted\n",
	       "making a namespace (the sandbox's filter refuses unshare and new namespaces)", false);
	expect(&nf, "unshare: unshare failed: Operation not permitted\n", NULL, true);
	expect(&r, "mount: /mnt: permission denied.\n", "mounting (the sandbox's filter refuses every mount call)",
	       false);
	/* Twice the same: once. */
	expect(&r, "mount: /mnt: permission denied.\nmount: /srv: permission denied.\n",
	       "mounting (the sandbox's filter refuses every mount call)", false);
	/* No call told, or no path: no word either way. */
	_cleanup_free_ char *py = xasprintf("PermissionError: [Errno 1] Operation not permitted: '%s/mine'\n", dir);
	expect(&r, py, NULL, true);
	expect(&r, "ping: socket: Operation not permitted\n", NULL, true);
	/* An immutable file refuses every uid. */
	make("ws/imm", 0644, 65534, false);
	_cleanup_free_ char *imm = at("ws/imm");
	int fd = open(imm, O_RDONLY | O_CLOEXEC);
	int flags = FS_IMMUTABLE_FL;
	if (fd >= 0 && ioctl(fd, FS_IOC_SETFLAGS, &flags) == 0) {
		_cleanup_free_ char *e = xasprintf("chmod: changing permissions of '%s': Operation not permitted\n", imm);
		bool unsure;
		char *s = check(&r, e, &unsure);
		flags = 0;
		ck_assert_int_eq(ioctl(fd, FS_IOC_SETFLAGS, &flags), 0);
		ck_assert_msg(!s && !unsure, "%s", s ? s : "(null)");
	}
	if (fd >= 0)
		close(fd);
}
END_TEST

/* A file system whose server decides (FUSE's control file system stands
 * for one here, in a mount namespace of the test's own): not looked
 * into, and never named the sandbox's refusal, even where the plan made
 * it read-only; a missing file there is only missing. */
START_TEST(fuse_never_blamed)
{
	_cleanup_free_ char *fuse = at("fuse"), *ws = at("ws");
	ck_assert_int_eq(mkdir(fuse, 0755), 0);
	if (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0 ||
	    mount("fusectl", fuse, "fusectl", 0, NULL) < 0)
		TC_SKIP("cannot mount a fusectl file system here: %s", strerror(errno));
	const char *const writable[] = { ws, NULL };
	struct sandbox_refusal_plan p = { .writable = writable, .uid = 65534, .gid = 65534, .cwd = fuse };
	_cleanup_free_ char *e1 = line("touch: cannot touch ", "fuse/x", "Read-only file system");
	expect(&p, e1, NULL, true);
	_cleanup_free_ char *e2 = line("cat: ", "fuse/x", "Permission denied");
	expect(&p, e2, NULL, true);
	expect(&p, "cat: x: Permission denied\n", NULL, true);
	_cleanup_free_ char *e3 = line("cat: ", "fuse/x", "No such file or directory");
	expect(&p, e3, NULL, false);
	umount2(fuse, MNT_DETACH);
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
	tcase_add_test(tc, relative_paths_where_it_started);
	tcase_add_test(tc, acls_as_the_kernel);
	tcase_add_test(tc, eperm_by_the_call);
	tcase_add_test(tc, fuse_never_blamed);
	tcase_add_test(tc, bounded);
	suite_add_tcase(s, tc);
	return run_suite(s);
}
