/* SPDX-License-Identifier: MIT */
/*
 * The empty stubs the sandbox makes in a repository to hold a missing
 * protected path's place (.git/hooks, .git/config ...) are made by the
 * daemon, as root, beneath the workspace and nowhere else: never through
 * a symbolic link the workspace holds, whether the link was there before
 * the call (a nested repository's .git, a directory on the way of a
 * protected entry) or put there while the daemon looks (a directory and a
 * link exchanged again and again). Black box: a root daemon, a directory
 * outside the workspace holding a .git without hooks, and after the
 * calls nothing new in it. The stubs made belong to the repository's
 * owner, with their own modes. A workspace too large for the scan for
 * nested repositories is said so in the log, once, and counted. The plan
 * a call keeps for the next ones follows the repositories: one made,
 * removed, swapped for another or stripped of a stub between two calls
 * is protected at the next call as at the first.
 */
#include <check.h>
#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "tests/integ/harness.h"
#include "tests/unit/check_main.h"

/* What the sandbox may make in a repository (sandbox.protect's default). */
#define PROTECT "\"protect\":[\".git/hooks\",\".git/config\",\".git/commondir\",\".git/info\",\".git/modules\""

static void PRINTF(1, 2) run(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	char *cmd = NULL;
	ck_assert_int_ge(vasprintf(&cmd, fmt, ap), 0);
	va_end(ap);
	ck_assert_msg(system(cmd) == 0, "%s", cmd);
	free(cmd);
}

/* Makes d.dir/NAME, outside the workspace, holding an empty .git (no
 * hooks, config, info ...): its path (malloc'd). */
static char *outside_repo(struct tcd *d, const char *name)
{
	char *dir = xasprintf("%s/%s", d->dir, name);
	run("mkdir -p '%s/.git' && chmod 0755 '%s'", dir, dir);
	return dir;
}

/* Asserts that dir/.git is still empty. */
static void assert_untouched(const char *dir)
{
	char *git = xasprintf("%s/.git", dir);
	DIR *dh = opendir(git);
	ck_assert_ptr_nonnull(dh);
	struct dirent *e;
	while ((e = readdir(dh)))
		ck_assert_msg(strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0,
			      "the daemon made %s/%s, outside the workspace", git, e->d_name);
	closedir(dh);
	free(git);
}

/*
 * Starts a daemon protecting the default entries and the extra ones given
 * (JSON strings, each after a comma), with two repositories outside its
 * workspace, DIR/bob1 and DIR/bob2, whose .git is empty; links them from
 * the workspace with the shell commands link (run in the workspace, $O1
 * and $O2 naming them); makes three sandboxed calls and asserts that
 * neither repository holds anything new.
 */
static void calls_make_nothing_outside(const char *extra, const char *link)
{
	struct tcd d;
	char *members = xasprintf(",\"sandbox\":{" PROTECT "%s]}", extra);
	tcd_start_auto(&d, members);
	free(members);
	char *o1 = outside_repo(&d, "bob1");
	char *o2 = outside_repo(&d, "bob2");
	run("cd '%s' && O1='%s' O2='%s' && %s", d.ws, o1, o2, link);
	struct tcc *c = tcc_connect(&d);
	for (int i = 0; i < 3; i++)
		tc_assert_ok(tcc_shell(c, "true"));
	tcc_close(c);
	assert_untouched(o1);
	assert_untouched(o2);
	free(o1);
	free(o2);
	tcd_finish(&d);
}

/* A nested repository whose .git is a link to a git directory outside
 * the workspace, and a directory of the workspace that is a link to a
 * repository outside it: the sandbox makes no stub in either. */
START_TEST(no_stub_through_git_link)
{
	calls_make_nothing_outside("", "mkdir a && ln -s \"$O1/.git\" a/.git && ln -s \"$O2\" b");
}
END_TEST

/* A protected entry written below a directory of the workspace (the
 * .git of one nested repository, a build's config): where a directory
 * on its way is a link out of the workspace, nothing is made at its
 * end. */
START_TEST(no_stub_through_linked_parent)
{
	calls_make_nothing_outside(",\"lnk/.git/hooks\",\"deep/x/.git/config\",\"deep/x/.git/info/\"",
				   "ln -s \"$O1\" lnk && mkdir deep && ln -s \"$O2\" deep/x");
}
END_TEST

/* The stubs made in the workspace's own repository belong to the
 * repository's owner and have their own modes (0755, 0644), whatever the
 * daemon's umask; commondir names the repository's own directory. */
START_TEST(stubs_owned_as_the_repository)
{
	struct tcd d;
	umask(077);	/* the daemon's, inherited */
	tcd_start_auto(&d, ",\"sandbox\":{" PROTECT "]}");
	umask(022);
	run("cd '%s' && mkdir .git && echo 'ref: refs/heads/main' > .git/HEAD && chown -R 65534:65534 .git", d.ws);
	struct tcc *c = tcc_connect(&d);
	tc_assert_ok(tcc_shell(c, "true"));
	tcc_close(c);
	static const struct {
		const char *rel;
		mode_t mode;
	} made[] = {
		{ ".git/hooks", S_IFDIR | 0755 }, { ".git/info", S_IFDIR | 0755 }, { ".git/modules", S_IFDIR | 0755 },
		{ ".git/config", S_IFREG | 0644 }, { ".git/commondir", S_IFREG | 0644 },
	};
	for (size_t i = 0; i < sizeof(made) / sizeof(*made); i++) {
		char *p = tcd_ws_path(&d, made[i].rel);
		struct stat st;
		ck_assert_msg(lstat(p, &st) == 0, "%s was not made", made[i].rel);
		ck_assert_msg(st.st_mode == made[i].mode, "%s has mode %o", made[i].rel, (unsigned)st.st_mode);
		ck_assert_msg(st.st_uid == 65534 && st.st_gid == 65534, "%s belongs to %u:%u", made[i].rel,
			      (unsigned)st.st_uid, (unsigned)st.st_gid);
		free(p);
	}
	char *commondir = tcd_ws_path(&d, ".git/commondir");
	char *text = tcd_read(&d, commondir, NULL);
	ck_assert_str_eq(text, ".\n");
	free(text);
	free(commondir);
	tcd_finish(&d);
}
END_TEST

static atomic_bool racing;
static const char *race_a, *race_b;

/* Exchanges a directory and a link, again and again. */
static void *exchanger(void *arg)
{
	(void)arg;
	while (atomic_load(&racing))
		(void)syscall(SYS_renameat2, AT_FDCWD, race_a, AT_FDCWD, race_b, 2 /* RENAME_EXCHANGE */);
	return NULL;
}

/* The workspace swaps a nested repository's directory with a link to a
 * repository outside it while calls run, so that what the daemon found
 * a directory is a link a moment later: still nothing made outside. */
START_TEST(no_stub_through_racing_link)
{
	struct tcd d;
	tcd_start_auto(&d, ",\"sandbox\":{" PROTECT "]}");
	char *o = outside_repo(&d, "bob");
	run("cd '%s' && mkdir -p r/.git && ln -s '%s' r2", d.ws, o);
	char *a = tcd_ws_path(&d, "r"), *b = tcd_ws_path(&d, "r2");
	race_a = a;
	race_b = b;
	atomic_store(&racing, true);
	pthread_t t;
	ck_assert_int_eq(pthread_create(&t, NULL, exchanger, NULL), 0);
	struct tcc *c = tcc_connect(&d);
	uint64_t end = tc_now_ms() + tc_wait_scaled(8000);
	unsigned calls = 0;
	for (; calls < 400 && tc_now_ms() < end; calls++)
		(void)tcc_shell(c, "true");	/* a call may fail to mount what moved */
	atomic_store(&racing, false);
	pthread_join(t, NULL);
	tcc_close(c);
	ck_assert_uint_gt(calls, 20);
	assert_untouched(o);
	free(a);
	free(b);
	free(o);
	tcd_finish(&d);
}
END_TEST

/* The lines of the daemon's log holding needle. */
static unsigned log_count(const struct tcd *d, const char *needle)
{
	char *log = tcd_log(d);
	unsigned n = 0;
	for (const char *p = log; p && (p = strstr(p, needle)); p++)
		n++;
	free(log);
	return n;
}

/* A workspace with more directories than the scan for nested
 * repositories reads (256): the daemon says so in its log once, naming
 * the workspace and the bound, however many calls and scans follow, and
 * counts each scan that stopped in admin/stats and admin/metrics; a
 * workspace within the bound is not told. */
START_TEST(scan_bound_told)
{
	struct tcd d;
	tcd_start_auto(&d, ",\"sandbox\":{" PROTECT "]}");
	struct tcc *c = tcc_connect(&d);
	tc_assert_ok(tcc_shell(c, "mkdir -p small/a small/b && true"));
	ck_assert_int_eq(tj_int(tcc_request(c, "admin/stats", NULL), "result.sandboxScansBounded"), 0);
	ck_assert_uint_eq(log_count(&d, "nested git repositories stopped"), 0);
	run("cd '%s' && for i in $(seq 1 300); do mkdir d$i; done", d.ws);
	tc_assert_ok(tcc_shell(c, "true"));
	/* A change to the top: scanned again, stopped again, told once. */
	tc_assert_ok(tcc_shell(c, "mkdir more && true"));
	tc_assert_ok(tcc_shell(c, "true"));
	const struct json *st = tcc_request(c, "admin/stats", NULL);
	ck_assert_int_ge(tj_int(st, "result.sandboxScansBounded"), 2);
	char *needle = xasprintf("workspace %s has more than 256 directories or 8192 entries within 4 levels", d.ws);
	ck_assert_uint_eq(log_count(&d, needle), 1);
	free(needle);
	const char *text = tj_str(tcc_request(c, "admin/metrics", NULL), "result.text");
	ck_assert_ptr_nonnull(text);
	ck_assert_ptr_nonnull(strstr(text, "toolcalld_sandbox_scans_bounded_total "));
	ck_assert_ptr_null(strstr(text, "toolcalld_sandbox_scans_bounded_total 0\n"));
	tcc_close(c);
	tcd_finish(&d);
}
END_TEST

/* More entries than the scan reads (8192 files in one directory) stop it
 * too. */
START_TEST(scan_entries_bound_told)
{
	struct tcd d;
	tcd_start_auto(&d, ",\"sandbox\":{" PROTECT "]}");
	run("cd '%s' && mkdir f && cd f && seq 1 8300 | xargs touch", d.ws);
	struct tcc *c = tcc_connect(&d);
	tc_assert_ok(tcc_shell(c, "true"));
	ck_assert_int_eq(tj_int(tcc_request(c, "admin/stats", NULL), "result.sandboxScansBounded"), 1);
	ck_assert_uint_eq(log_count(&d, "nested git repositories stopped"), 1);
	tcc_close(c);
	tcd_finish(&d);
}
END_TEST

/* Makes calls enough for the plan of the workspace to be kept (the first
 * call watches, the second keeps, the next ones use it). */
static void calls_to_keep(struct tcc *c)
{
	for (int i = 0; i < 3; i++)
		tc_assert_ok(tcc_shell(c, "true"));
}

/* A sandboxed call cannot make or change any of the repository's hooks
 * or config, at the top's .git or at dir's. */
static void assert_repo_held(struct tcd *d, struct tcc *c, const char *dir)
{
	char *cmd = xasprintf("mkdir -p %s/.git/hooks && touch %s/.git/hooks/pre-commit", dir, dir);
	tc_assert_shell_fails(c, cmd);
	free(cmd);
	cmd = xasprintf("echo '[core]' >> %s/.git/config", dir);
	tc_assert_shell_fails(c, cmd);
	free(cmd);
	char *rel = xasprintf("%s/.git/hooks/pre-commit", dir);
	char *p = tcd_ws_path(d, rel);
	struct stat st;
	ck_assert_msg(lstat(p, &st) < 0, "a call made %s", rel);
	free(p);
	free(rel);
}

/* In a workspace without a repository, a call can make none: the place
 * of .git is held by an empty directory, read-only to the call, that git
 * takes for no repository; the directory belongs to the workspace's
 * owner, and nothing in it is the call's. */
static void assert_no_repo_made(struct tcd *d, struct tcc *c)
{
	static const char *const tries[] = {
		"mkdir -p .git/hooks && echo evil > .git/hooks/pre-commit",
		"echo '[core] fsmonitor = evil' > .git/config",
		"rmdir .git && mkdir -p .git/hooks",
		"mv .git moved && mkdir .git",
		"rm -rf .git; echo 'gitdir: /tmp/evil' > .git",
		"echo 'ref: refs/heads/main' > .git/HEAD",
	};
	tc_assert_shell_fails_all(c, tries, sizeof(tries) / sizeof(*tries));
	char *git = tcd_ws_path(d, ".git");
	struct stat st, ws;
	ck_assert_int_eq(lstat(git, &st), 0);
	ck_assert_int_eq(lstat(d->ws, &ws), 0);
	ck_assert_msg(S_ISDIR(st.st_mode) && (st.st_mode & 07777) == 0755, ".git has mode %o", (unsigned)st.st_mode);
	ck_assert_uint_eq(st.st_uid, ws.st_uid);
	ck_assert_uint_eq(st.st_gid, ws.st_gid);
	DIR *dh = opendir(git);
	ck_assert_ptr_nonnull(dh);
	struct dirent *e;
	while ((e = readdir(dh)))
		ck_assert_msg(strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0, "a call made .git/%s",
			      e->d_name);
	closedir(dh);
	char *moved = tcd_ws_path(d, "moved");
	ck_assert_msg(lstat(moved, &st) < 0, "a call moved .git away");
	free(moved);
	free(git);
}

/* A workspace without a repository, of another user (writable to all):
 * held from the first call on (no plan kept yet), as the kept plan holds
 * it later; git, run
 * as the user would outside the sandbox, finds no repository there. */
START_TEST(no_repository_made_where_there_is_none)
{
	struct tcd d;
	tcd_start_auto(&d, ",\"sandbox\":{" PROTECT "]}");
	run("chown 65534:65534 '%s' && chmod 0777 '%s'", d.ws, d.ws);
	struct tcc *c = tcc_connect(&d);
	assert_no_repo_made(&d, c);
	calls_to_keep(c);
	assert_no_repo_made(&d, c);
	/* Nor can the file tools, which run outside the sandbox. */
	tc_assert_kind(tcc_call(c, "make_dir", "{\"path\":\".git/objects\"}"), "permission_denied");
	tc_assert_kind(tcc_call(c, "write_file", "{\"path\":\".git/HEAD\",\"content\":\"ref: refs/heads/main\\n\"}"),
		       "permission_denied");
	tc_assert_kind(tcc_call(c, "write_file", "{\"path\":\".git/refs/heads/main\",\"content\":\"x\",\"create_dirs\":true}"),
		       "permission_denied");
	assert_no_repo_made(&d, c);
	/* Work goes on beside it. */
	tc_assert_ok(tcc_shell(c, "mkdir -p src && echo x > src/a && cat src/a"));
	if (system("command -v git >/dev/null 2>&1") == 0) {
		char *cmd = xasprintf("cd '%s' && GIT_CEILING_DIRECTORIES='%s' git rev-parse --git-dir >/dev/null 2>&1",
				      d.ws, d.dir);
		ck_assert_msg(system(cmd) != 0, "git took the held place for a repository");
		free(cmd);
	}
	tcc_close(c);
	tcd_finish(&d);
}
END_TEST

/* Between calls whose plan is kept, the repository of the workspace is
 * made, its stub removed, swapped for another, removed, and a nested one
 * made: each next call holds protect as a first call would. */
START_TEST(kept_plan_follows_repositories)
{
	struct tcd d;
	tcd_start_auto(&d, ",\"sandbox\":{" PROTECT "]}");
	struct tcc *c = tcc_connect(&d);
	calls_to_keep(c);
	/* A repository appears (git init of the workspace, in the place
	 * the sandbox held): the file tools write in it again. */
	run("echo 'ref: refs/heads/main' > '%s/.git/HEAD'", d.ws);
	assert_repo_held(&d, c, ".");
	tc_assert_ok(tcc_call(c, "write_file", "{\"path\":\".git/description\",\"content\":\"mine\\n\"}"));
	char *hooks = tcd_ws_path(&d, ".git/hooks");
	struct stat st;
	ck_assert_msg(lstat(hooks, &st) == 0 && S_ISDIR(st.st_mode), "no stub held .git/hooks");
	/* Its stub removed between two calls. */
	calls_to_keep(c);
	run("rmdir '%s'", hooks);
	assert_repo_held(&d, c, ".");
	/* Swapped for another repository. */
	calls_to_keep(c);
	run("cd '%s' && mv .git old.git && mkdir .git && echo 'ref: refs/heads/main' > .git/HEAD", d.ws);
	assert_repo_held(&d, c, ".");
	/* Removed: calls go on, with nothing left to hold. */
	calls_to_keep(c);
	run("cd '%s' && rm -rf .git old.git", d.ws);
	tc_assert_ok(tcc_shell(c, "true"));
	tc_assert_ok(tcc_shell(c, "touch made-after"));
	assert_no_repo_made(&d, c);
	/* A nested repository appears. */
	calls_to_keep(c);
	run("mkdir -p '%s/sub/.git'", d.ws);
	assert_repo_held(&d, c, "sub");
	free(hooks);
	tcc_close(c);
	tcd_finish(&d);
}
END_TEST

/* A protected path beneath the workspace but outside any repository
 * (sandbox.protect's "secrets/keys"), made between calls whose plan is
 * kept, is read-only at the next call. */
START_TEST(kept_plan_follows_protected_paths)
{
	struct tcd d;
	tcd_start_auto(&d, ",\"sandbox\":{" PROTECT ",\"secrets/keys\"]}");
	struct tcc *c = tcc_connect(&d);
	calls_to_keep(c);
	run("mkdir -p '%s/secrets/keys'", d.ws);
	tc_assert_shell_fails(c, "touch secrets/keys/planted");
	calls_to_keep(c);
	run("rm -rf '%s/secrets' && mkdir -p '%s/secrets/keys'", d.ws, d.ws);
	tc_assert_shell_fails(c, "touch secrets/keys/planted");
	char *p = tcd_ws_path(&d, "secrets/keys/planted");
	struct stat st;
	ck_assert_msg(lstat(p, &st) < 0, "a call wrote beneath secrets/keys");
	free(p);
	tcc_close(c);
	tcd_finish(&d);
}
END_TEST

static Suite *stubs_suite(void)
{
	Suite *s = suite_create("integ_sandbox_stubs");
	TCase *tc = tcase_create("stubs");
	tcase_set_timeout(tc, 90);
	tcase_add_test(tc, no_stub_through_git_link);
	tcase_add_test(tc, no_stub_through_linked_parent);
	tcase_add_test(tc, no_stub_through_racing_link);
	tcase_add_test(tc, stubs_owned_as_the_repository);
	tcase_add_test(tc, scan_bound_told);
	tcase_add_test(tc, scan_entries_bound_told);
	tcase_add_test(tc, no_repository_made_where_there_is_none);
	tcase_add_test(tc, kept_plan_follows_repositories);
	tcase_add_test(tc, kept_plan_follows_protected_paths);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	if (geteuid() != 0) {
		fprintf(stderr, "SKIP these cases start the daemon as root\n");
		return TC_EXIT_SKIP;
	}
	if (getenv("TC_UNDER_VALGRIND")) {
		fprintf(stderr, "SKIP valgrind cannot install Landlock or seccomp, which each sandboxed call needs\n");
		return TC_EXIT_SKIP;
	}
	return run_suite(stubs_suite());
}
