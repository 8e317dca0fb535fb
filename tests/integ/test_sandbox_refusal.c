/* SPDX-License-Identifier: MIT */
/*
 * The sandbox's note decided by what the sandbox refused, with the real
 * daemon: a path stderr names is judged against the plan and the files'
 * state (lib/sandbox/refusal.c), so refusals that leave no audit record
 * (read-only mounts, protected paths, directories covered empty) and,
 * where the daemon reads no records (uid 65534), Landlock's too, are
 * named; a path refused for another reason gets no line.
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "tests/integ/harness.h"
#include "tests/unit/check_main.h"

#define AUTO "\"confirmation\":{\"default\":{\"write\":\"auto\",\"execute\":\"auto\"}}"

/* How the note names a refusal it is sure of. */
#define REFUSED "[sandbox] The sandbox refused "

static bool enforces(const struct json *r, const char *what)
{
	char *e = tj_text(tj(r, "result.structuredContent.sandbox.enforced"));
	bool yes = e && strstr(e, what);
	free(e);
	return yes;
}

/* Fails the case unless the call's text holds the error's words (e.g.
 * "Permission denied") and no note of the sandbox: a refusal that is not
 * the sandbox's. */
#define assert_no_line(r, words)                       \
	do {                                           \
		tc_assert_text_has((r), "%s", (words)); \
		tc_assert_text_lacks((r), "[sandbox]"); \
	} while (0)

/* Spawns the daemon prepared with o and waits for its socket; the case
 * fails with the daemon's log when it does not come. */
static void spawn_and_wait(struct tcd *d, struct tcd_opts *o)
{
	tcd_spawn(d, o);
	ck_assert_msg(tcd_wait_socket(d, d->sock, TCD_START_TIMEOUT_MS) == 0, "%s", tcd_log(d));
}

/* A daemon as uid 65534, which may not read audit records: its notes come
 * from the plan alone. config holds more members (after a comma), or "". */
static void start_nobody(struct tcd *d, const char *config)
{
	char *cfg = xasprintf("{" AUTO ",\"tools_dir\":null%s}", config);
	struct tcd_opts o = { .config = cfg };
	tcd_spawn_nobody(d, &o);
	ck_assert_msg(tcd_wait_socket(d, d->sock, TCD_START_TIMEOUT_MS) == 0, "%s", tcd_log(d));
	free(cfg);
}

/* Root's daemon with AUTO and the config members more, its socket and
 * workspace open to uid 65534 (tcd_open_to_all). */
static void start_open(struct tcd *d, const char *more)
{
	char *cfg = xasprintf("{" AUTO ",\"socket_mode\":\"0666\"%s}", more);
	tcd_start(d, cfg);
	free(cfg);
	tcd_open_to_all(d);
}

/* Makes the directory dir (0755) holding an empty file "key"; returns the
 * key's path (malloc'd). */
static char *make_key(const char *dir)
{
	ck_assert_int_eq(mkdir(dir, 0755), 0);
	char *key = xasprintf("%s/key", dir);
	close(open(key, O_CREAT | O_WRONLY | O_CLOEXEC, 0644));
	return key;
}

/* Ends a case that cannot run here: the connection closed, the daemon
 * gone. */
static void give_up(struct tcd *d, struct tcc *c)
{
	tcc_close(c);
	tcd_free(d);
}

/* Root's daemon: a file in a directory of sockets the sandbox covers
 * empty is hidden ("No such file or directory", no audit record); one
 * that is not there is only missing. */
START_TEST(hidden_directory_named)
{
	const char *x11 = "/tmp/.X11-unix";
	bool made = mkdir(x11, 01777) == 0;
	if (!made && errno != EEXIST)
		TC_SKIP("cannot make %s", x11);
	const char *probe = "/tmp/.X11-unix/tc-refusal-probe";
	close(open(probe, O_CREAT | O_WRONLY | O_CLOEXEC, 0644));
	struct tcd d;
	tcd_start(&d, "{" AUTO "}");
	struct tcc *c = tcc_connect(&d);
	const struct json *r = tcc_shell(c, "cat /tmp/.X11-unix/tc-refusal-probe");
	tc_assert_ok(r);
	bool hidden = enforces(r, "unix sockets hidden");
	char *text = xstrdup(tc_text(r));
	char *none = xstrdup(tc_text(tcc_shell(c, "cat /tmp/.X11-unix/tc-refusal-none")));
	unlink(probe);
	if (made)
		rmdir(x11);
	tcc_close(c);
	tcd_finish(&d);
	if (!hidden) {
		free(text);
		free(none);
		TC_SKIP("the sandbox cannot hide socket directories here");
	}
	ck_assert_msg(strstr(text, "No such file or directory") &&
		      strstr(text, REFUSED "reaching /tmp/.X11-unix/tc-refusal-probe (hidden: the sandbox covers "
				   "/tmp/.X11-unix"), "%s", text);
	ck_assert_msg(strstr(none, "No such file or directory") && !strstr(none, "[sandbox]"), "%s", none);
	free(text);
	free(none);
}
END_TEST

/* Root's daemon: a protected path is mounted read-only (EROFS, no audit
 * record): named as protected. */
START_TEST(protected_path_named)
{
	if (access("/usr/bin/git", X_OK) < 0)
		TC_SKIP("needs git to make the workspace a repository");
	struct tcd d;
	struct tcd_opts o = { .config = "{" AUTO "}" };
	tcd_prepare(&d, &o);
	char *init = xasprintf("git init -q '%s'", d.ws);
	ck_assert_int_eq(system(init), 0);
	free(init);
	spawn_and_wait(&d, &o);
	struct tcc *c = tcc_connect(&d);
	const struct json *r = tcc_shell(c, "echo x > \"$PWD/.git/hooks/pre-commit\"");
	tc_assert_ok(r);
	if (!enforces(r, "protect")) {
		give_up(&d, c);
		TC_SKIP("protected paths are not enforced here");
	}
	tc_assert_text_has(r, REFUSED "writing %s/.git/hooks/pre-commit (a protected path, sandbox.protect)", d.ws);
	/* git renames its lock file over the config, a mount there: EBUSY. */
	r = tcc_shell(c, "git config user.name x");
	tc_assert_ok(r);
	tc_assert_text_has(r, "Device or resource busy");
	tc_assert_text_has(r, REFUSED "replacing %s/.git/config (a protected path, sandbox.protect)", d.ws);
	/* A relative path after the shell's own: judged where the shell
	 * started (the workspace), which explains EROFS there. */
	r = tcc_shell(c, "echo x > .git/hooks/rel");
	tc_assert_text_has(r, REFUSED "writing %s/.git/hooks/rel (a protected path, sandbox.protect)", d.ws);
	tc_assert_text_lacks(r, "/bin/sh (");
	/* The same words after a cd: the workspace does not explain the
	 * error (its x is writable), so the line only says it may have been
	 * the sandbox, and names no path. */
	r = tcc_shell(c, "cd /usr && echo x > x");
	tc_assert_text_has(r, "Read-only file system");
	tc_assert_text_has(r, "[sandbox] This may have been refused");
	tc_assert_text_lacks(r, "sandbox refused");
	/* With a cwd argument: judged there. */
	r = tcc_call(c, "shell", "{\"command\":\"echo x > rel2\",\"cwd\":\".git/hooks\"}");
	tc_assert_text_has(r, REFUSED "writing %s/.git/hooks/rel2 (a protected path, sandbox.protect)", d.ws);
	/* In the workspace, refused by the bits (the child holds no
	 * capability) or missing: no line. */
	r = tcc_shell(c, "mkdir shut && chmod 000 shut && cat \"$PWD/shut/f\"; cat \"$PWD/nothere\"");
	tc_assert_ok(r);
	tc_assert_text_lacks(r, "[sandbox]");
	tcc_close(c);
	tcd_finish(&d);
}
END_TEST

/* A daemon without audit records (uid 65534): Landlock's refusal of a
 * private path is named from the replayed rules; another user's file the
 * bits refuse, and a missing file, get no line. */
START_TEST(without_records_the_plan_decides)
{
	if (access("/usr/bin/setpriv", X_OK) < 0)
		TC_SKIP("needs /usr/bin/setpriv to start a daemon as uid 65534");
	struct tcd d;
	start_nobody(&d, ",\"sandbox\":{\"deny_read\":[\"@DIR@/secret\"]}");
	char *secret = xasprintf("%s/secret", d.dir);
	char *key = make_key(secret);
	char *mine = xasprintf("%s/root0600", d.dir);
	close(open(mine, O_CREAT | O_WRONLY | O_CLOEXEC, 0600));
	struct tcc *c = tcc_connect(&d);
	const struct json *st = tcc_request(c, "admin/stats", "{}");
	ck_assert_str_eq(tj_str(st, "result.sandboxNotes.from"), "plan");

	const struct json *r = tcc_shell(c, tcc_fmt(c, "cat %s", key));
	tc_assert_ok(r);
	if (!enforces(r, "landlock")) {
		give_up(&d, c);
		TC_SKIP("no Landlock here");
	}
	tc_assert_text_has(r, REFUSED "accessing %s (a private path, sandbox.deny_read)", key);

	/* The same, by a path relative to where the shell started (the
	 * workspace, beside the private directory). */
	tc_assert_text_has(tcc_shell(c, "cat ../secret/key"), REFUSED "accessing %s (a private path, sandbox.deny_read)",
			   key);
	/* Root's 0600 file, relative: the bits', no line. */
	assert_no_line(tcc_shell(c, "cat ../root0600"), "Permission denied");

	/* Root's 0600 file: the bits refuse it before the sandbox could. */
	assert_no_line(tcc_shell(c, tcc_fmt(c, "cat %s", mine)), "Permission denied");
	/* Missing: no line. */
	assert_no_line(tcc_shell(c, "cat /nonexistent-tc/x"), "No such file");
	/* A new file outside the writable paths, in a directory the bits
	 * let it write in: refused by the sandbox (a read-only mount where
	 * the daemon makes one, else Landlock). */
	r = tcc_shell(c, tcc_fmt(c, "echo x > %s/new", d.dir));
	tc_assert_text_has(r, REFUSED);
	tc_assert_text_has(r, "%s/new (", d.dir);
	tcc_close(c);
	tcd_finish(&d);
	free(key);
	free(secret);
	free(mine);
}
END_TEST

/* Root's daemon, a peer of uid 65534: its child runs as the peer, and the
 * bits are checked as the peer. Root's 0600 file in the workspace: no
 * line; a private path it could otherwise read, and a write outside the
 * workspace: named, each once. */
START_TEST(peer_identity_judged)
{
	struct tcd d;
	start_open(&d, ",\"sandbox\":{\"deny_read\":[\"@DIR@/priv\"]}");
	free(tcd_write_ws(&d, "secret.txt", "root only\n", 10, 0600));
	char *priv = xasprintf("%s/priv", d.dir);
	char *key = make_key(priv);
	struct tcc *c = tcc_connect_as(&d, 65534, 65534);
	const struct json *r = tcc_shell(c, "id -u; cat \"$PWD/secret.txt\"");
	tc_assert_ok(r);
	tc_assert_text_has(r, "65534");
	assert_no_line(r, "Permission denied");
	r = tcc_shell(c, tcc_fmt(c, "cat %s; echo x > /usr/tc-refusal-peer", key));
	tc_assert_ok(r);
	/* Named by the kernel's record where audit is on ("reading"), else
	 * by the plan ("accessing"): once. */
	char *want = xasprintf(" %s", key);
	const char *t = tc_text(r);
	const char *note = strstr(t, REFUSED);
	const char *first = note ? strstr(note, want) : NULL;
	ck_assert_msg(first && !strstr(first + 1, want) && strstr(note, "writing /usr/tc-refusal-peer ("), "%s", t);
	free(want);
	tcc_close(c);
	tcd_finish(&d);
	free(key);
	free(priv);
}
END_TEST

/* Root's daemon. A root peer's child is uid 0 without capabilities under
 * the seccomp filter: changing another's file's mode or owner, a device
 * node, a namespace and a setuid bit are named as the sandbox's refusals
 * (no audit record for any); a uid 65534 peer refused chmod of root's file
 * gets no line, as it would be refused outside. */
START_TEST(eperm_named)
{
	struct tcd d;
	start_open(&d, "");
	char *nob = tcd_write_ws(&d, "nobodys", "x\n", 2, 0644);
	ck_assert_int_eq(chown(nob, 65534, 65534), 0);
	free(tcd_write_ws(&d, "roots", "x\n", 2, 0644));
	struct tcc *c = tcc_connect(&d);
	const struct json *r = tcc_shell(c, "id -u; chmod 600 \"$PWD/nobodys\"");
	tc_assert_ok(r);
	if (!enforces(r, "seccomp")) {
		give_up(&d, c);
		free(nob);
		TC_SKIP("no seccomp filter here");
	}
	tc_assert_text_has(r, "Operation not permitted");
	tc_assert_text_has(r, REFUSED "changing the mode of %s (a sandboxed child holds no capabilities, even as root: "
			      "only a file's owner may)", nob);
	/* Relative, judged where the shell started. */
	tc_assert_text_has(tcc_shell(c, "chown 0 nobodys"),
			   REFUSED "changing the owner of %s (a sandboxed child holds no capabilities, even as root: "
				   "it gives no file away)", nob);
	tc_assert_text_has(tcc_shell(c, "mknod \"$PWD/dev\" c 1 3"),
			   REFUSED "making the device node %s/dev (the sandbox makes no device nodes, nor setuid or "
				   "setgid files)", d.ws);
	tc_assert_text_has(tcc_shell(c, "chmod u+s roots"),
			   REFUSED "setting a setuid or setgid bit on %s/roots (no file gets one in the sandbox)", d.ws);
	if (access("/usr/bin/unshare", X_OK) == 0)
		tc_assert_text_has(tcc_shell(c, "unshare -U true"),
				   REFUSED "making a namespace (the sandbox's filter refuses unshare and new namespaces)");
	tcc_close(c);
	/* As uid 65534: root's file is refused to it anyway. */
	c = tcc_connect_as(&d, 65534, 65534);
	r = tcc_shell(c, "chmod 600 roots; chown 65534 roots");
	tc_assert_ok(r);
	assert_no_line(r, "Operation not permitted");
	tcc_close(c);
	tcd_finish(&d);
	free(nob);
}
END_TEST

/* Root's daemon, a uid 65534 peer. An ACL that denies the peer a file its
 * bits would let it read: the ACL's refusal, no line (the bits alone
 * would have left it "may have been"). A private path relative to where
 * the shell started: named. /proc, read-only in the sandbox: named. */
START_TEST(acl_relative_and_proc)
{
	struct tcd d;
	start_open(&d, ",\"sandbox\":{\"deny_read\":[\"@WS@/priv\"]}");
	char *aclf = tcd_write_ws(&d, "acl.txt", "x\n", 2, 0644);
	/* user::rw- user:65534:--- group::r-- mask::r-- other::r-- */
	static const unsigned char acl[] = { 2, 0, 0, 0, 1, 0, 6, 0, 0xff, 0xff, 0xff, 0xff, 2, 0, 0, 0, 0xfe, 0xff, 0, 0,
					     4, 0, 4, 0, 0xff, 0xff, 0xff, 0xff, 0x10, 0, 4, 0, 0xff, 0xff, 0xff, 0xff,
					     0x20, 0, 4, 0, 0xff, 0xff, 0xff, 0xff };
	bool acls = setxattr(aclf, "system.posix_acl_access", acl, sizeof(acl), 0) == 0;
	char *priv = xasprintf("%s/priv", d.ws);
	char *key = make_key(priv);
	struct tcc *c = tcc_connect_as(&d, 65534, 65534);
	const struct json *r;
	if (acls) {
		r = tcc_shell(c, "cat acl.txt");
		tc_assert_ok(r);
		assert_no_line(r, "Permission denied");
	}
	r = tcc_shell(c, "cat priv/key");
	tc_assert_ok(r);
	if (enforces(r, "read-only mounts")) {
		tc_assert_text_has(r, REFUSED "reaching %s (a private path, sandbox.deny_read)", key);
		tc_assert_text_has(tcc_shell(c, "echo 1000 > /proc/self/oom_score_adj"),
				   REFUSED "writing /proc/self/oom_score_adj (read-only in the sandbox: outside the paths "
					   "it may write)");
	}
	tcc_close(c);
	tcd_finish(&d);
	free(aclf);
	free(key);
	free(priv);
	if (!acls)
		TC_SKIP("no POSIX ACLs in the test's directory");
}
END_TEST

/* A command tool's relative path is judged where it started (the
 * workspace): a private path there is named in its error. */
START_TEST(command_tool_relative)
{
	struct tcd d;
	struct tcd_opts o = { .config = "{" AUTO ",\"sandbox\":{\"deny_read\":[\"@WS@/priv\"]}}" };
	tcd_prepare(&d, &o);
	tcd_write_tool(&d, "peek.json",
		       "{\"name\":\"peek\",\"kind\":\"command\",\"side_effects\":\"read\",\"description\":\"Peek\","
		       " \"argv\":[\"cat\",\"priv/key\"], \"input_schema\":{\"type\":\"object\"}}");
	char *priv = xasprintf("%s/priv", d.ws);
	char *key = make_key(priv);
	spawn_and_wait(&d, &o);
	struct tcc *c = tcc_connect(&d);
	const struct json *r = tcc_call(c, "peek", "{}");
	const char *msg = tj_str(r, "error.message");
	char *want = xasprintf(REFUSED "reaching %s (a private path, sandbox.deny_read)", key);
	bool covered = msg && strstr(msg, "No such file or directory");
	if (covered)
		ck_assert_msg(strstr(msg, want), "%s", msg);
	free(want);
	tcc_close(c);
	tcd_finish(&d);
	free(key);
	free(priv);
	if (!covered)
		TC_SKIP("private paths in the workspace are not covered here");
}
END_TEST

/* An MCP server that fails to start, having written to a path relative
 * to where it started (the workspace): its error names the refusal. */
START_TEST(provider_relative)
{
	struct tcd d;
	struct tcd_opts o = { .config = "{" AUTO "}" };
	tcd_prepare(&d, &o);
	tcd_write_tool(&d, "demo.json", "{\"name\":\"demo\",\"kind\":\"mcp\",\"prefix\":\"demo_\",\"side_effects\":\"read\","
					"\"command\":[\"sh\",\"-c\",\"echo x > ../outside; exit 1\"]}");
	spawn_and_wait(&d, &o);
	struct tcc *c = tcc_connect(&d);
	const struct json *r = tcc_call(c, "demo_echo", "{}");
	const char *m = tj_str(r, "error.message");
	ck_assert_msg(m, "%s", tcc_raw(c, r));
	char *outside = xasprintf("%s/outside", d.dir);
	bool confined = access(outside, F_OK) < 0 && strstr(m, "Read-only file system");
	char *want = xasprintf(REFUSED "writing %s (read-only in the sandbox: outside the paths it may write)", outside);
	if (confined)
		ck_assert_msg(strstr(m, want), "%s", m);
	free(want);
	free(outside);
	tcc_close(c);
	tcd_finish(&d);
	if (!confined)
		TC_SKIP("no read-only mounts here");
}
END_TEST

/* A background shell's end is judged as a call's: its relative path
 * where it started. */
START_TEST(background_relative)
{
	struct tcd d;
	tcd_start(&d, "{" AUTO "}");
	struct tcc *c = tcc_connect(&d);
	const struct json *r = tcc_call(c, "shell", "{\"command\":\"echo x > ../bgout\",\"background\":true,"
						    "\"yield_ms\":20000}");
	tc_assert_ok(r);
	char *out = xasprintf("%s/bgout", d.dir);
	bool confined = access(out, F_OK) < 0 && strstr(tc_text(r), "Read-only file system");
	if (confined)
		tc_assert_text_has(r, REFUSED "writing %s (read-only in the sandbox: outside the paths it may write)", out);
	free(out);
	tcc_close(c);
	tcd_finish(&d);
	if (!confined)
		TC_SKIP("no read-only mounts here");
}
END_TEST

int main(void)
{
	if (geteuid() != 0) {
		printf("SKIP needs root (a root daemon's mounts, a second uid)\n");
		return TC_EXIT_SKIP;
	}
	if (getenv("TC_UNDER_VALGRIND")) {
		printf("SKIP under valgrind: children run without the sandbox there\n");
		return TC_EXIT_SKIP;
	}
	Suite *s = suite_create("sandbox_refusal");
	TCase *tc = tcase_create("sandbox_refusal");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, hidden_directory_named);
	tcase_add_test(tc, protected_path_named);
	tcase_add_test(tc, without_records_the_plan_decides);
	tcase_add_test(tc, peer_identity_judged);
	tcase_add_test(tc, eperm_named);
	tcase_add_test(tc, acl_relative_and_proc);
	tcase_add_test(tc, command_tool_relative);
	tcase_add_test(tc, provider_relative);
	tcase_add_test(tc, background_relative);
	suite_add_tcase(s, tc);
	return run_suite(s);
}
