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

static const struct json *sh(struct tcc *c, const char *command)
{
	char *q = tj_quote(command);
	char *args = xasprintf("{\"command\":%s}", q);
	const struct json *r = tcc_call(c, "shell", args);
	free(args);
	free(q);
	return r;
}

static const char *text_of(const struct json *r)
{
	const char *t = tj_str(r, "result.content.0.text");
	return t ? t : "";
}

static bool enforces(const struct json *r, const char *what)
{
	char *e = tj_text(tj(r, "result.structuredContent.sandbox.enforced"));
	bool yes = e && strstr(e, what);
	free(e);
	return yes;
}

/* A daemon as uid 65534, which may not read audit records: its notes come
 * from the plan alone. config holds more members (after a comma), or "". */
static void start_nobody(struct tcd *d, const char *config)
{
	char *cfg = xasprintf("{" AUTO ",\"tools_dir\":null%s}", config);
	struct tcd_opts o = { .config = cfg, .no_wait = true };
	static const char *const wrapper[] = { "/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
					       NULL };
	o.wrapper = wrapper;
	tcd_prepare(d, &o);
	ck_assert_int_eq(chmod(d->dir, 0777), 0);
	ck_assert_int_eq(chmod(d->ws, 0777), 0);
	ck_assert_int_eq(chmod(d->config, 0644), 0);
	tcd_spawn(d, &o);
	ck_assert_msg(tcd_wait_socket(d, d->sock, TCD_START_TIMEOUT_MS) == 0, "%s", tcd_log(d));
	free(cfg);
}

/* Root's daemon: a file in a directory of sockets the sandbox covers
 * empty is hidden ("No such file or directory", no audit record); one
 * that is not there is only missing. */
START_TEST(hidden_directory_named)
{
	TC_SKIP_UNDER_VALGRIND("children run without the sandbox there");
	const char *x11 = "/tmp/.X11-unix";
	bool made = mkdir(x11, 01777) == 0;
	if (!made && errno != EEXIST)
		TC_SKIP("cannot make %s", x11);
	const char *probe = "/tmp/.X11-unix/tc-refusal-probe";
	close(open(probe, O_CREAT | O_WRONLY | O_CLOEXEC, 0644));
	struct tcd d;
	tcd_start(&d, "{" AUTO "}");
	struct tcc *c = tcc_connect(&d);
	const struct json *r = sh(c, "cat /tmp/.X11-unix/tc-refusal-probe");
	tc_assert_ok(r);
	bool hidden = enforces(r, "unix sockets hidden");
	char *text = xstrdup(text_of(r));
	r = sh(c, "cat /tmp/.X11-unix/tc-refusal-none");
	char *none = xstrdup(text_of(r));
	unlink(probe);
	if (made)
		rmdir(x11);
	tcc_close(c);
	ck_assert_int_eq(tcd_stop(&d), 0);
	tcd_free(&d);
	if (!hidden) {
		free(text);
		free(none);
		TC_SKIP("the sandbox cannot hide socket directories here");
	}
	ck_assert_msg(strstr(text, "No such file or directory") &&
		      strstr(text, "[sandbox] The sandbox refused reaching /tmp/.X11-unix/tc-refusal-probe (hidden: the "
				   "sandbox covers /tmp/.X11-unix"), "%s", text);
	ck_assert_msg(strstr(none, "No such file or directory") && !strstr(none, "[sandbox]"), "%s", none);
	free(text);
	free(none);
}
END_TEST

/* Root's daemon: a protected path is mounted read-only (EROFS, no audit
 * record): named as protected. */
START_TEST(protected_path_named)
{
	TC_SKIP_UNDER_VALGRIND("children run without the sandbox there");
	if (access("/usr/bin/git", X_OK) < 0)
		TC_SKIP("needs git to make the workspace a repository");
	struct tcd d;
	tcd_prepare(&d, &(struct tcd_opts){ .config = "{" AUTO "}" });
	char *init = xasprintf("git init -q '%s'", d.ws);
	ck_assert_int_eq(system(init), 0);
	free(init);
	tcd_spawn(&d, &(struct tcd_opts){ .config = "{" AUTO "}" });
	ck_assert_msg(tcd_wait_socket(&d, d.sock, TCD_START_TIMEOUT_MS) == 0, "%s", tcd_log(&d));
	struct tcc *c = tcc_connect(&d);
	const struct json *r = sh(c, "echo x > \"$PWD/.git/hooks/pre-commit\"");
	tc_assert_ok(r);
	if (!enforces(r, "protect")) {
		tcc_close(c);
		tcd_free(&d);
		TC_SKIP("protected paths are not enforced here");
	}
	char *want = xasprintf("[sandbox] The sandbox refused writing %s/.git/hooks/pre-commit (a protected path, "
			       "sandbox.protect)", d.ws);
	ck_assert_msg(strstr(text_of(r), want), "%s", text_of(r));
	free(want);
	/* git renames its lock file over the config, a mount there: EBUSY. */
	r = sh(c, "git config user.name x");
	tc_assert_ok(r);
	want = xasprintf("[sandbox] The sandbox refused replacing %s/.git/config (a protected path, sandbox.protect)",
			 d.ws);
	ck_assert_msg(strstr(text_of(r), "Device or resource busy") && strstr(text_of(r), want), "%s", text_of(r));
	free(want);
	/* A relative path after the shell's own: judged where the shell
	 * started (the workspace), which explains EROFS there. */
	r = sh(c, "echo x > .git/hooks/rel");
	want = xasprintf("[sandbox] The sandbox refused writing %s/.git/hooks/rel (a protected path, sandbox.protect)",
			 d.ws);
	ck_assert_msg(strstr(text_of(r), want) && !strstr(text_of(r), "/bin/sh ("), "%s", text_of(r));
	free(want);
	/* The same words after a cd: the workspace does not explain the
	 * error (its x is writable), so the line only says it may have been
	 * the sandbox, and names no path. */
	r = sh(c, "cd /usr && echo x > x");
	ck_assert_msg(strstr(text_of(r), "Read-only file system") &&
		      strstr(text_of(r), "[sandbox] This may have been refused") &&
		      !strstr(text_of(r), "sandbox refused"), "%s", text_of(r));
	/* With a cwd argument: judged there. */
	char *args = xstrdup("{\"command\":\"echo x > rel2\",\"cwd\":\".git/hooks\"}");
	r = tcc_call(c, "shell", args);
	free(args);
	want = xasprintf("[sandbox] The sandbox refused writing %s/.git/hooks/rel2 (a protected path, sandbox.protect)",
			 d.ws);
	ck_assert_msg(strstr(text_of(r), want), "%s", text_of(r));
	free(want);
	/* In the workspace, refused by the bits (the child holds no
	 * capability) or missing: no line. */
	r = sh(c, "mkdir shut && chmod 000 shut && cat \"$PWD/shut/f\"; cat \"$PWD/nothere\"");
	tc_assert_ok(r);
	ck_assert_msg(!strstr(text_of(r), "[sandbox]"), "%s", text_of(r));
	tcc_close(c);
	ck_assert_int_eq(tcd_stop(&d), 0);
	tcd_free(&d);
}
END_TEST

/* A daemon without audit records (uid 65534): Landlock's refusal of a
 * private path is named from the replayed rules; another user's file the
 * bits refuse, and a missing file, get no line. */
START_TEST(without_records_the_plan_decides)
{
	TC_SKIP_UNDER_VALGRIND("children run without the sandbox there");
	if (access("/usr/bin/setpriv", X_OK) < 0)
		TC_SKIP("needs /usr/bin/setpriv to start a daemon as uid 65534");
	struct tcd d;
	char *cfg = xasprintf(",\"sandbox\":{\"deny_read\":[\"%s/secret\"]}", "@DIR@");
	start_nobody(&d, cfg);
	free(cfg);
	char *secret = xasprintf("%s/secret", d.dir);
	ck_assert_int_eq(mkdir(secret, 0755), 0);
	char *key = xasprintf("%s/key", secret);
	close(open(key, O_CREAT | O_WRONLY | O_CLOEXEC, 0644));
	char *mine = xasprintf("%s/root0600", d.dir);
	close(open(mine, O_CREAT | O_WRONLY | O_CLOEXEC, 0600));
	struct tcc *c = tcc_connect(&d);
	const struct json *st = tcc_request(c, "admin/stats", "{}");
	ck_assert_str_eq(tj_str(st, "result.sandboxNotes.from"), "plan");

	char *cmd = xasprintf("cat %s", key);
	const struct json *r = sh(c, cmd);
	free(cmd);
	tc_assert_ok(r);
	if (!enforces(r, "landlock")) {
		tcc_close(c);
		tcd_free(&d);
		TC_SKIP("no Landlock here");
	}
	char *want = xasprintf("[sandbox] The sandbox refused accessing %s (a private path, sandbox.deny_read)", key);
	ck_assert_msg(strstr(text_of(r), want), "%s", text_of(r));
	free(want);

	/* The same, by a path relative to where the shell started (the
	 * workspace, beside the private directory). */
	r = sh(c, "cat ../secret/key");
	want = xasprintf("[sandbox] The sandbox refused accessing %s (a private path, sandbox.deny_read)", key);
	ck_assert_msg(strstr(text_of(r), want), "%s", text_of(r));
	free(want);
	/* Root's 0600 file, relative: the bits', no line. */
	r = sh(c, "cat ../root0600");
	ck_assert_msg(strstr(text_of(r), "Permission denied") && !strstr(text_of(r), "[sandbox]"), "%s", text_of(r));

	/* Root's 0600 file: the bits refuse it before the sandbox could. */
	cmd = xasprintf("cat %s", mine);
	r = sh(c, cmd);
	free(cmd);
	ck_assert_msg(strstr(text_of(r), "Permission denied") && !strstr(text_of(r), "[sandbox]"), "%s", text_of(r));
	/* Missing: no line. */
	r = sh(c, "cat /nonexistent-tc/x");
	ck_assert_msg(strstr(text_of(r), "No such file") && !strstr(text_of(r), "[sandbox]"), "%s", text_of(r));
	/* A new file outside the writable paths, in a directory the bits
	 * let it write in: refused by the sandbox (a read-only mount where
	 * the daemon makes one, else Landlock). */
	cmd = xasprintf("echo x > %s/new", d.dir);
	r = sh(c, cmd);
	free(cmd);
	want = xasprintf("[sandbox] The sandbox refused ");
	char *path = xasprintf("%s/new (", d.dir);
	ck_assert_msg(strstr(text_of(r), want) && strstr(text_of(r), path), "%s", text_of(r));
	free(want);
	free(path);
	tcc_close(c);
	ck_assert_int_eq(tcd_stop(&d), 0);
	tcd_free(&d);
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
	TC_SKIP_UNDER_VALGRIND("children run without the sandbox there");
	struct tcd d;
	tcd_start(&d, "{" AUTO ",\"socket_mode\":\"0666\",\"sandbox\":{\"deny_read\":[\"@DIR@/priv\"]}}");
	ck_assert_int_eq(chmod(d.dir, 0711), 0);
	ck_assert_int_eq(chmod(d.ws, 0777), 0);
	free(tcd_write_ws(&d, "secret.txt", "root only\n", 10, 0600));
	char *priv = xasprintf("%s/priv", d.dir);
	ck_assert_int_eq(mkdir(priv, 0755), 0);
	char *key = xasprintf("%s/key", priv);
	close(open(key, O_CREAT | O_WRONLY | O_CLOEXEC, 0644));
	struct tcc *c = tcc_connect_as(&d, 65534, 65534);
	const struct json *r = sh(c, "id -u; cat \"$PWD/secret.txt\"");
	tc_assert_ok(r);
	ck_assert_msg(strstr(text_of(r), "65534") && strstr(text_of(r), "Permission denied") &&
		      !strstr(text_of(r), "[sandbox]"), "%s", text_of(r));
	char *cmd = xasprintf("cat %s; echo x > /usr/tc-refusal-peer", key);
	r = sh(c, cmd);
	free(cmd);
	tc_assert_ok(r);
	/* Named by the kernel's record where audit is on ("reading"), else
	 * by the plan ("accessing"): once. */
	char *want = xasprintf(" %s", key);
	const char *t = text_of(r);
	const char *note = strstr(t, "[sandbox] The sandbox refused ");
	const char *first = note ? strstr(note, want) : NULL;
	ck_assert_msg(first && !strstr(first + 1, want) && strstr(note, "writing /usr/tc-refusal-peer ("), "%s", t);
	free(want);
	tcc_close(c);
	ck_assert_int_eq(tcd_stop(&d), 0);
	tcd_free(&d);
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
	TC_SKIP_UNDER_VALGRIND("children run without the sandbox there");
	struct tcd d;
	tcd_start(&d, "{" AUTO ",\"socket_mode\":\"0666\"}");
	ck_assert_int_eq(chmod(d.dir, 0711), 0);
	ck_assert_int_eq(chmod(d.ws, 0777), 0);
	char *nob = tcd_write_ws(&d, "nobodys", "x\n", 2, 0644);
	ck_assert_int_eq(chown(nob, 65534, 65534), 0);
	free(tcd_write_ws(&d, "roots", "x\n", 2, 0644));
	struct tcc *c = tcc_connect(&d);
	const struct json *r = sh(c, "id -u; chmod 600 \"$PWD/nobodys\"");
	tc_assert_ok(r);
	if (!enforces(r, "seccomp")) {
		tcc_close(c);
		tcd_free(&d);
		free(nob);
		TC_SKIP("no seccomp filter here");
	}
	char *want = xasprintf("[sandbox] The sandbox refused changing the mode of %s (a sandboxed child holds no "
			       "capabilities, even as root: only a file's owner may)", nob);
	ck_assert_msg(strstr(text_of(r), "Operation not permitted") && strstr(text_of(r), want), "%s", text_of(r));
	free(want);
	/* Relative, judged where the shell started. */
	r = sh(c, "chown 0 nobodys");
	want = xasprintf("[sandbox] The sandbox refused changing the owner of %s (a sandboxed child holds no "
			 "capabilities, even as root: it gives no file away)", nob);
	ck_assert_msg(strstr(text_of(r), want), "%s", text_of(r));
	free(want);
	r = sh(c, "mknod \"$PWD/dev\" c 1 3");
	want = xasprintf("[sandbox] The sandbox refused making the device node %s/dev (the sandbox makes no device "
			 "nodes, nor setuid or setgid files)", d.ws);
	ck_assert_msg(strstr(text_of(r), want), "%s", text_of(r));
	free(want);
	r = sh(c, "chmod u+s roots");
	want = xasprintf("[sandbox] The sandbox refused setting a setuid or setgid bit on %s/roots (no file gets one in "
			 "the sandbox)", d.ws);
	ck_assert_msg(strstr(text_of(r), want), "%s", text_of(r));
	free(want);
	if (access("/usr/bin/unshare", X_OK) == 0) {
		r = sh(c, "unshare -U true");
		ck_assert_msg(strstr(text_of(r), "[sandbox] The sandbox refused making a namespace (the sandbox's filter "
						 "refuses unshare and new namespaces)"), "%s", text_of(r));
	}
	tcc_close(c);
	/* As uid 65534: root's file is refused to it anyway. */
	c = tcc_connect_as(&d, 65534, 65534);
	r = sh(c, "chmod 600 roots; chown 65534 roots");
	tc_assert_ok(r);
	ck_assert_msg(strstr(text_of(r), "Operation not permitted") && !strstr(text_of(r), "[sandbox]"), "%s",
		      text_of(r));
	tcc_close(c);
	ck_assert_int_eq(tcd_stop(&d), 0);
	tcd_free(&d);
	free(nob);
}
END_TEST

/* Root's daemon, a uid 65534 peer. An ACL that denies the peer a file its
 * bits would let it read: the ACL's refusal, no line (the bits alone
 * would have left it "may have been"). A private path relative to where
 * the shell started: named. /proc, read-only in the sandbox: named. */
START_TEST(acl_relative_and_proc)
{
	TC_SKIP_UNDER_VALGRIND("children run without the sandbox there");
	struct tcd d;
	tcd_start(&d, "{" AUTO ",\"socket_mode\":\"0666\",\"sandbox\":{\"deny_read\":[\"@WS@/priv\"]}}");
	ck_assert_int_eq(chmod(d.dir, 0711), 0);
	ck_assert_int_eq(chmod(d.ws, 0777), 0);
	char *aclf = tcd_write_ws(&d, "acl.txt", "x\n", 2, 0644);
	/* user::rw- user:65534:--- group::r-- mask::r-- other::r-- */
	static const unsigned char acl[] = { 2, 0, 0, 0, 1, 0, 6, 0, 0xff, 0xff, 0xff, 0xff, 2, 0, 0, 0, 0xfe, 0xff, 0, 0,
					     4, 0, 4, 0, 0xff, 0xff, 0xff, 0xff, 0x10, 0, 4, 0, 0xff, 0xff, 0xff, 0xff,
					     0x20, 0, 4, 0, 0xff, 0xff, 0xff, 0xff };
	bool acls = setxattr(aclf, "system.posix_acl_access", acl, sizeof(acl), 0) == 0;
	char *priv = xasprintf("%s/priv", d.ws);
	ck_assert_int_eq(mkdir(priv, 0755), 0);
	char *key = xasprintf("%s/key", priv);
	close(open(key, O_CREAT | O_WRONLY | O_CLOEXEC, 0644));
	struct tcc *c = tcc_connect_as(&d, 65534, 65534);
	const struct json *r;
	if (acls) {
		r = sh(c, "cat acl.txt");
		tc_assert_ok(r);
		ck_assert_msg(strstr(text_of(r), "Permission denied") && !strstr(text_of(r), "[sandbox]"), "%s",
			      text_of(r));
	}
	r = sh(c, "cat priv/key");
	tc_assert_ok(r);
	if (enforces(r, "read-only mounts")) {
		char *want = xasprintf("[sandbox] The sandbox refused reaching %s (a private path, sandbox.deny_read)",
				       key);
		ck_assert_msg(strstr(text_of(r), want), "%s", text_of(r));
		free(want);
		r = sh(c, "echo 1000 > /proc/self/oom_score_adj");
		ck_assert_msg(strstr(text_of(r), "[sandbox] The sandbox refused writing /proc/self/oom_score_adj "
						 "(read-only in the sandbox: outside the paths it may write)"), "%s",
			      text_of(r));
	}
	tcc_close(c);
	ck_assert_int_eq(tcd_stop(&d), 0);
	tcd_free(&d);
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
	TC_SKIP_UNDER_VALGRIND("children run without the sandbox there");
	struct tcd d;
	const char *cfg = "{" AUTO ",\"sandbox\":{\"deny_read\":[\"@WS@/priv\"]}}";
	tcd_prepare(&d, &(struct tcd_opts){ .config = cfg });
	tcd_write_tool(&d, "peek.json",
		       "{\"name\":\"peek\",\"kind\":\"command\",\"side_effects\":\"read\",\"description\":\"Peek\","
		       " \"argv\":[\"cat\",\"priv/key\"], \"input_schema\":{\"type\":\"object\"}}");
	char *priv = xasprintf("%s/priv", d.ws);
	ck_assert_int_eq(mkdir(priv, 0755), 0);
	char *key = xasprintf("%s/key", priv);
	close(open(key, O_CREAT | O_WRONLY | O_CLOEXEC, 0644));
	tcd_spawn(&d, &(struct tcd_opts){ .config = cfg });
	ck_assert_msg(tcd_wait_socket(&d, d.sock, TCD_START_TIMEOUT_MS) == 0, "%s", tcd_log(&d));
	struct tcc *c = tcc_connect(&d);
	const struct json *r = tcc_call(c, "peek", "{}");
	const char *msg = tj_str(r, "error.message");
	char *want = xasprintf("[sandbox] The sandbox refused reaching %s (a private path, sandbox.deny_read)", key);
	bool covered = msg && strstr(msg, "No such file or directory");
	if (covered)
		ck_assert_msg(strstr(msg, want), "%s", msg);
	free(want);
	tcc_close(c);
	ck_assert_int_eq(tcd_stop(&d), 0);
	tcd_free(&d);
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
	TC_SKIP_UNDER_VALGRIND("children run without the sandbox there");
	struct tcd d;
	tcd_prepare(&d, &(struct tcd_opts){ .config = "{" AUTO "}" });
	tcd_write_tool(&d, "demo.json", "{\"name\":\"demo\",\"kind\":\"mcp\",\"prefix\":\"demo_\",\"side_effects\":\"read\","
					"\"command\":[\"sh\",\"-c\",\"echo x > ../outside; exit 1\"]}");
	tcd_spawn(&d, &(struct tcd_opts){ .config = "{" AUTO "}" });
	ck_assert_msg(tcd_wait_socket(&d, d.sock, TCD_START_TIMEOUT_MS) == 0, "%s", tcd_log(&d));
	struct tcc *c = tcc_connect(&d);
	const struct json *r = tcc_call(c, "demo_echo", "{}");
	const char *m = tj_str(r, "error.message");
	ck_assert_msg(m, "%s", tcc_raw(c, r));
	char *outside = xasprintf("%s/outside", d.dir);
	bool confined = access(outside, F_OK) < 0 && strstr(m, "Read-only file system");
	char *want = xasprintf("[sandbox] The sandbox refused writing %s (read-only in the sandbox: outside the paths "
			       "it may write)", outside);
	if (confined)
		ck_assert_msg(strstr(m, want), "%s", m);
	free(want);
	free(outside);
	tcc_close(c);
	ck_assert_int_eq(tcd_stop(&d), 0);
	tcd_free(&d);
	if (!confined)
		TC_SKIP("no read-only mounts here");
}
END_TEST

/* A background shell's end is judged as a call's: its relative path
 * where it started. */
START_TEST(background_relative)
{
	TC_SKIP_UNDER_VALGRIND("children run without the sandbox there");
	struct tcd d;
	tcd_start(&d, "{" AUTO "}");
	struct tcc *c = tcc_connect(&d);
	const struct json *r = tcc_call(c, "shell", "{\"command\":\"echo x > ../bgout\",\"background\":true,"
						    "\"yield_ms\":20000}");
	tc_assert_ok(r);
	char *out = xasprintf("%s/bgout", d.dir);
	bool confined = access(out, F_OK) < 0 && strstr(text_of(r), "Read-only file system");
	char *want = xasprintf("[sandbox] The sandbox refused writing %s (read-only in the sandbox: outside the paths "
			       "it may write)", out);
	if (confined)
		ck_assert_msg(strstr(text_of(r), want), "%s", text_of(r));
	free(want);
	free(out);
	tcc_close(c);
	ck_assert_int_eq(tcd_stop(&d), 0);
	tcd_free(&d);
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
