/* SPDX-License-Identifier: MIT */
/*
 * The sandbox where the daemon has no privilege, black box: a daemon
 * running as uid 65534 (the test, as root, starts it so; as another user,
 * as itself) still keeps .git/hooks read-only, through a user namespace of
 * each child's own, and a call cannot undo those mounts; calls of one uid
 * cannot reach each other's TMPDIR; sandbox.require refuses a call naming
 * what the kernel lacks (Landlock taken away by a seccomp filter the
 * daemon inherits) and require:false runs it, saying what was not
 * enforced; node runs under the default profile and limits; and with a
 * writable cgroup v2 directory, a call gets a cgroup with its limits; a
 * call connecting to the socket again and again is logged once.
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "tests/integ/harness.h"
#include "tests/unit/check_main.h"
#include "tests/unit/deny_syscall.h"

#define AUTO "\"socket_mode\":\"0666\",\"confirmation\":{\"default\":{\"write\":\"auto\",\"execute\":\"auto\",\"network\":\"auto\"}}"
#define NOBODY 65534

/* Gives uid everything below dir (the daemon's files, its workspace). */
static void chown_tree(const char *dir, uid_t uid)
{
	char *cmd = xasprintf("chown -R %u:%u '%s'", (unsigned)uid, (unsigned)uid, dir);
	ck_assert_int_eq(system(cmd), 0);
	free(cmd);
}

/*
 * Starts a daemon with the sandbox members given, as uid 65534 when as_nobody
 * (the test being root) with $HOME in its temp dir. Returns false, having
 * said why, when that cannot be done here.
 */
static bool start(struct tcd *d, const char *sandbox_members, bool as_nobody)
{
	char *cfg = xasprintf("{" AUTO ",\"sandbox\":{%s}}", sandbox_members);
	const char *wrap[] = { "setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--", NULL };
	struct tcd_opts o = { .config = cfg };
	tcd_prepare(d, &o);
	char *home = xasprintf("%s/home", d->dir);
	ck_assert_int_eq(mkdir(home, 0755), 0);
	char *env_home = xasprintf("HOME=%s", home);
	const char *env[] = { env_home, NULL };
	o.env = env;
	if (as_nobody) {
		chown_tree(d->dir, NOBODY);
		ck_assert_int_eq(chmod(d->dir, 0755), 0);
		o.wrapper = wrap;
	}
	tcd_spawn(d, &o);
	if (tcd_wait_socket(d, d->sock, TCD_START_TIMEOUT_MS) < 0) {
		char *log = tcd_log(d);
		ck_abort_msg("the daemon did not start: %s", log);
	}
	free(env_home);
	free(home);
	free(cfg);
	return true;
}

static const struct json *sh(struct tcc *c, const char *command)
{
	struct buf b = {0};
	struct jgen *g = jgen_new(&b);
	jgen_obj_open(g);
	jgen_key(g, "command");
	jgen_str(g, command);
	jgen_obj_close(g);
	jgen_free(g);
	const struct json *r = tcc_call(c, "shell", buf_head(&b));
	buf_free(&b);
	return r;
}

/* Whether the array at path of r holds s. */
static bool has_str(const struct json *r, const char *path, const char *s)
{
	const struct json *a = tj(r, path);
	for (size_t i = 0; a && a->type == JSON_ARRAY && i < a->u.arr.n; i++)
		if (json_str(a->u.arr.items[i]) && strcmp(json_str(a->u.arr.items[i]), s) == 0)
			return true;
	return false;
}

static void stop(struct tcd *d)
{
	ck_assert_int_eq(tcd_stop(d), 0);
	tcd_free(d);
}

/* Whether the daemon will be another uid than root here: as 65534 when the
 * test is root, else the test's own. */
static bool want_nobody(void)
{
	return geteuid() == 0;
}

START_TEST(protect_without_privilege)
{
	struct tcd d;
	start(&d, "", want_nobody());
	char *log = tcd_log(&d);
	if (!strstr(log, "protect: user namespace")) {
		char *line = strstr(log, "sandbox:");
		char *end = line ? strchr(line, '\n') : NULL;
		if (end)
			*end = '\0';
		free(log);
		stop(&d);
		TC_SKIP("protect_without_privilege: skipped: unprivileged user namespaces are not available here "
			"(%s)", line ? line : "no start-up line");
	}
	free(log);
	tcd_put(&d, ".git/hooks/pre-commit.sample", "#!/bin/sh\n");
	tcd_put(&d, ".git/config", "[core]\n");
	if (want_nobody())
		chown_tree(d.ws, NOBODY);

	struct tcc *c = tcc_connect(&d);
	const struct json *r = sh(c, "id -u; echo x > .git/hooks/x");
	ck_assert(tj_bool(r, "result.isError"));
	ck_assert_ptr_nonnull(strstr(tj_str(r, "result.structuredContent.stdout"), "Read-only file system"));
	ck_assert(has_str(r, "result.structuredContent.sandbox.enforced", "protect"));
	ck_assert(has_str(r, "result.structuredContent.sandbox.enforced", "user namespace"));
	char *uid = xasprintf("%u\n", (unsigned)(want_nobody() ? NOBODY : geteuid()));
	/* The uid first, then the shell's complaint: one stream, in order. */
	ck_assert_int_eq(strncmp(tj_str(r, "result.structuredContent.stdout"), uid, strlen(uid)), 0);
	free(uid);
	r = sh(c, "echo '[core] fsmonitor = evil' >> .git/config");
	ck_assert(tj_bool(r, "result.isError"));
	/* The mounts stay: neither unmounted, remounted, nor renamed away. */
	r = sh(c, "umount .git/hooks && echo escaped; mount -o remount,rw .git/hooks && echo escaped; "
		  "mount --bind /tmp .git/hooks && echo escaped; unshare -rm true && echo escaped; "
		  "mv .git/hooks .git/h2 && echo escaped; mv .git .g2 && echo escaped; true");
	ck_assert_ptr_null(strstr(tj_str(r, "result.structuredContent.stdout"), "escaped"));
	r = sh(c, "echo y > .git/hooks/x");
	ck_assert(tj_bool(r, "result.isError"));
	/* The rest of the workspace takes new files. */
	r = sh(c, "echo a > new && echo b > .git/other");
	tc_assert_ok(r);
	char *x = tcd_ws_path(&d, ".git/hooks/x");
	ck_assert_int_lt(access(x, F_OK), 0);
	free(x);
	tcc_close(c);
	stop(&d);
}
END_TEST

/*
 * A daemon that is not root: its calls, of its own uid, can change
 * neither its config, tools directory nor audit log (theirs by owner),
 * nor the metadata of a file of theirs outside the workspace, through the
 * read-only mounts of their user and mount namespaces.
 */
START_TEST(daemon_files_out_of_reach)
{
	struct tcd d;
	start(&d, "", want_nobody());
	char *log = tcd_log(&d);
	bool ro = strstr(log, "outside the writable paths: read-only mounts,") != NULL;
	free(log);
	if (!ro) {
		stop(&d);
		TC_SKIP("daemon_files_out_of_reach: skipped: no user namespaces here for the read-only mounts");
	}
	if (want_nobody())
		chown_tree(d.ws, NOBODY);
	char *outside = xasprintf("%s/outside", d.dir);
	ck_assert_int_eq(mkdir(outside, 0700), 0);
	if (want_nobody())
		chown_tree(outside, NOBODY);
	struct tcc *c = tcc_connect(&d);
	const char *const refused[] = { "chmod 666 '%s/config.json'", "chmod 777 '%s/tools.d'",
					"touch -d 2001-01-01 '%s/config.json'", "chmod 755 '%s/outside'",
					"touch '%s/outside/new'" };
	for (size_t i = 0; i < ELEMENTSOF(refused); i++) {
		char *one = xasprintf(refused[i], d.dir);
		char *cmd = xasprintf("%s && echo DONE", one);
		const struct json *r = sh(c, cmd);
		const char *o = tj_str(r, "result.structuredContent.stdout");
		ck_assert_msg(!o || !strstr(o, "DONE"), "'%s' succeeded", one);
		free(cmd);
		free(one);
	}
	struct stat st;
	ck_assert_int_eq(stat(d.config, &st), 0);
	ck_assert_int_eq(st.st_mode & 0002, 0);
	ck_assert_int_eq(stat(outside, &st), 0);
	ck_assert_int_eq(st.st_mode & 07777, 0700);
	tc_assert_ok(sh(c, "touch x && chmod +x x && test -x x"));
	free(outside);
	tcc_close(c);
	stop(&d);
}
END_TEST

/*
 * Call A writes a file in its TMPDIR and waits; call B, of the same uid,
 * can neither list the directory holding TMPDIRs nor read A's file, even
 * knowing its path, nor plant a file there or take A's away; "/" stays
 * listable. As the daemon's own uid (loop 0: for a root daemon, root
 * children keep a mount namespace), when the test is root with the daemon
 * as uid 65534 (loop 1: the user namespace path), as loop 0 in a
 * workspace with .git/hooks (loop 2: the mount namespace the protected
 * paths need), and when the test is root with both calls connecting as
 * uid 65534 to the root daemon (loop 3: a second Landlock layer instead of
 * a namespace).
 */
START_TEST(tmpdir_private)
{
	if (_i == 1 && !want_nobody())
		TC_SKIP("tmpdir_private: skipped: not root, cannot start the daemon as another uid");
	if (_i == 3 && !want_nobody())
		TC_SKIP("tmpdir_private: skipped: not root, cannot connect as another uid");
	struct tcd d;
	start(&d, "", _i == 1);
	if (_i == 1)
		chown_tree(d.ws, NOBODY);
	if (_i == 2)
		tcd_put(&d, ".git/hooks/pre-commit.sample", "#!/bin/sh\n");
	struct tcc *a, *b;
	if (_i == 3) {
		/* uid 65534 reaches the socket and the workspace. */
		ck_assert_int_eq(chmod(d.dir, 0711), 0);
		chown_tree(d.ws, NOBODY);
		a = tcc_connect_as(&d, NOBODY, NOBODY);
		b = tcc_connect_as(&d, NOBODY, NOBODY);
	} else {
		a = tcc_connect(&d);
		b = tcc_connect(&d);
	}
	struct buf args = {0};
	struct jgen *g = jgen_new(&args);
	jgen_obj_open(g);
	jgen_key(g, "command");
	jgen_str(g, "echo secret > \"$TMPDIR/a\" && echo \"$TMPDIR\" > a-tmp.new && mv a-tmp.new a-tmp && "
		    "while [ ! -e done ]; do sleep 0.02; done; cat \"$TMPDIR/a\"");
	jgen_obj_close(g);
	jgen_free(g);
	char *params = xasprintf("{\"name\":\"shell\",\"arguments\":%s}", buf_head(&args));
	int64_t id = tcc_send_request(a, "tools/call", params);
	free(params);
	buf_free(&args);
	char *marker = tcd_ws_path(&d, "a-tmp");
	struct stat st;
	for (int i = 0; i < 1000 && stat(marker, &st) < 0; i++)
		usleep(10000);
	size_t n = 0;
	char *a_tmp = tcd_read(&d, marker, &n);
	ck_assert_ptr_nonnull(a_tmp);
	a_tmp[strcspn(a_tmp, "\n")] = '\0';
	char *a_name = strrchr(a_tmp, '/') + 1;

	/* Listings one by one, errors left out: what is listed is B's. */
	char *cmd = xasprintf("ls -a \"$(dirname \"$TMPDIR\")\" 2>/dev/null; ls -a '%s/..' 2>/dev/null; "
			      "ls -a '%s' 2>/dev/null; cat '%s/a' 2>/dev/null; "
			      "touch '%s/planted' 2>/dev/null && echo PLANTED; "
			      "ln '%s/a' \"$TMPDIR/x\" 2>/dev/null && echo LINKED; "
			      "mv '%s/a' \"$TMPDIR/y\" 2>/dev/null && echo MOVED; "
			      "mv \"$TMPDIR\" '%s/mine' 2>/dev/null && echo MOVED; "
			      "ls / | grep -qx usr && echo ROOT-LISTED; true",
			      a_tmp, a_tmp, a_tmp, a_tmp, a_tmp, a_tmp, a_tmp);
	const struct json *r = sh(b, cmd);
	free(cmd);
	tc_assert_ok(r);
	const char *out = tj_str(r, "result.structuredContent.stdout");
	ck_assert_msg(!strstr(out, a_name), "%s", out);
	ck_assert_msg(!strstr(out, "secret"), "%s", out);
	/* Under the Landlock layer the way to the TMPDIRs is listable, and so
	 * is a neighbour's TMPDIR whose path B knows (never its files). */
	if (_i != 3)
		ck_assert_msg(strncmp(out, "a\n", 2) != 0 && !strstr(out, "\na\n"), "%s", out);
	ck_assert_msg(!strstr(out, "PLANTED") && !strstr(out, "LINKED") && !strstr(out, "MOVED"), "%s", out);
	ck_assert_msg(strstr(out, "ROOT-LISTED"), "%s", out);
	/* B's own TMPDIR works. */
	r = sh(b, "echo mine > \"$TMPDIR/b\" && cat \"$TMPDIR/b\"");
	tc_assert_ok(r);
	tcd_put(&d, "done", "");
	char idbuf[32];
	snprintf(idbuf, sizeof(idbuf), "%lld", (long long)id);
	r = tcc_wait_id(a, idbuf, 30000);
	ck_assert_ptr_nonnull(r);
	ck_assert_str_eq(tj_str(r, "result.structuredContent.stdout"), "secret\n");
	free(a_tmp);
	free(marker);
	tcc_close(a);
	tcc_close(b);
	stop(&d);
}
END_TEST

/* A client of d: as uid 65534, which then reaches the socket and owns
 * the workspace, when nobody; else as root. */
static struct tcc *connect_as_loop(struct tcd *d, bool nobody)
{
	if (!nobody)
		return tcc_connect(d);
	ck_assert_int_eq(chmod(d->dir, 0711), 0);
	chown_tree(d->ws, NOBODY);
	return tcc_connect_as(d, NOBODY, NOBODY);
}

/*
 * Calls one after another (the later ones join a mount namespace made
 * ahead, the same one given a new TMPDIR, its tmpfs emptied and moved):
 * each finds its TMPDIR empty, mode 0700 and with all its space, under a
 * path of its own, with nothing of the call before it reachable by the
 * old path; its limits.tmp_mb holds. As root (loop 0) and as uid
 * 65534 (loop 1).
 */
START_TEST(tmpdir_fresh_each_call)
{
	TC_SKIP_UNDER_VALGRIND("children run there without the sandbox, so tmp_mb bounds no TMPDIR");
	if (_i == 1 && !want_nobody())
		TC_SKIP("tmpdir_fresh_each_call: skipped: not root, cannot connect as another uid");
	struct tcd d;
	start(&d, "\"limits\":{\"tmp_mb\":1}", false);
	struct tcc *c = connect_as_loop(&d, _i == 1);
	char *last = NULL;
	for (int i = 0; i < 6; i++) {
		/* Each leaves its TMPDIR full, deep and open to all: the
		 * next finds it empty, 0700, with its whole size. */
		char *cmd = xasprintf("m=$(stat -c %%a \"$TMPDIR\"); [ \"$m\" = 700 ] || echo \"mode $m\"; "
				      "ls -A \"$TMPDIR\"; cat '%s/s' 2>/dev/null; ls '%s' 2>/dev/null; "
				      "mkdir -p \"$TMPDIR/d/e/f\" && touch \"$TMPDIR/.h\" \"$TMPDIR/d/e/f/g\" && "
				      "head -c 700000 /dev/zero > \"$TMPDIR/fill\" && chmod 777 \"$TMPDIR\" && "
				      "echo s%d > \"$TMPDIR/s\" && echo \"$TMPDIR\"", last ? last : "/nonexistent",
				      last ? last : "/nonexistent", i);
		const struct json *r = sh(c, cmd);
		free(cmd);
		tc_assert_ok(r);
		const char *out = tj_str(r, "result.structuredContent.stdout");
		/* Only the path: no listing, no old content. */
		ck_assert_msg(out[0] == '/' && strchr(out, '\n') == out + strlen(out) - 1, "call %d: %s", i, out);
		ck_assert_msg(!last || strncmp(out, last, strlen(last)) != 0, "call %d reused %s", i, last);
		free(last);
		last = xstrndup(out, strlen(out) - 1);
	}
	free(last);
	/* The size limit holds in a TMPDIR of a namespace made ahead too. */
	const struct json *r = sh(c, "head -c 2000000 /dev/zero > \"$TMPDIR/big\"");
	tc_assert_ok(r);
	ck_assert_int_ne(tj_int(r, "result.structuredContent.exit_code"), 0);
	tcc_close(c);
	stop(&d);
}
END_TEST

/* The path a call's TMPDIR has, printed by a command that touches it as
 * touch says (or not at all); freed by the caller. */
static char *tmpdir_of(struct tcc *c, const char *touch)
{
	char *cmd = xasprintf("%s%secho \"$TMPDIR\"", touch, *touch ? " && " : "");
	const struct json *r = sh(c, cmd);
	free(cmd);
	tc_assert_ok(r);
	ck_assert_int_eq(tj_int(r, "result.structuredContent.exit_code"), 0);
	const char *out = tj_str(r, "result.structuredContent.stdout");
	ck_assert_msg(out[0] == '/' && strchr(out, '\n') == out + strlen(out) - 1, "%s", out);
	return xstrndup(out, strlen(out) - 1);
}

/*
 * A call that left its TMPDIR untouched, with nothing of it running,
 * hands its namespace to the next call of its identity as it is, TMPDIR
 * path and all; one that touched it in any way (a file made then removed,
 * the directory listed, its mode set to what it was, a file left) never
 * does: the next call has a TMPDIR of another path, empty, mode 0700. As
 * root (loop 0) and as uid 65534 (loop 1).
 */
START_TEST(tmpdir_kept_untouched)
{
	TC_SKIP_UNDER_VALGRIND("children run there without the sandbox, so tmp_mb bounds no TMPDIR");
	if (_i == 1 && !want_nobody())
		TC_SKIP("tmpdir_kept_untouched: skipped: not root, cannot connect as another uid");
	struct tcd d;
	start(&d, "\"limits\":{\"tmp_mb\":1}", false);
	struct tcc *c = connect_as_loop(&d, _i == 1);
	/* Untouched: one call after another keeps the namespace (a new one
	 * is made when it is 2 s old, so not every pair need match). */
	char *last = NULL;
	int kept = 0;
	for (int i = 0; i < 6; i++) {
		char *p = tmpdir_of(c, "");
		kept += last && strcmp(p, last) == 0;
		free(last);
		last = p;
	}
	ck_assert_msg(kept > 0, "no call found the TMPDIR of the call before, untouched");
	static const char *const touches[] = {
		"touch \"$TMPDIR/x\" && rm \"$TMPDIR/x\"",
		"ls -A \"$TMPDIR\" >/dev/null",
		"chmod 700 \"$TMPDIR\"",
		": > \"$TMPDIR/.f\"",
	};
	for (size_t i = 0; i < ELEMENTSOF(touches); i++) {
		free(last);
		last = tmpdir_of(c, touches[i]);
		const struct json *r = sh(c, "stat -c %a \"$TMPDIR\" && ls -A \"$TMPDIR\" && echo \"$TMPDIR\"");
		tc_assert_ok(r);
		const char *out = tj_str(r, "result.structuredContent.stdout");
		char *want_not = xasprintf("700\n%s\n", last);
		ck_assert_msg(strncmp(out, "700\n/", 5) == 0 && strchr(out + 4, '\n') == out + strlen(out) - 1,
			      "after `%s`: %s", touches[i], out);
		ck_assert_msg(strcmp(out, want_not) != 0, "after `%s` the next call had %s again", touches[i], last);
		free(want_not);
	}
	free(last);
	tcc_close(c);
	stop(&d);
}
END_TEST

/*
 * The resource limits of sandbox.limits hold in a sandboxed child, soft
 * and hard, as root (loop 0: root is exempt from RLIMIT_NPROC, which is
 * not set) and as uid 65534 (loop 1), in the first call and in the later
 * ones (started by the spawner once the namespaces are made ahead).
 */
START_TEST(limits_in_child)
{
	TC_SKIP_UNDER_VALGRIND("children run there without the sandbox");
	if (_i == 1 && !want_nobody())
		TC_SKIP("limits_in_child: skipped: not root, cannot connect as another uid");
	struct tcd d;
	start(&d, "\"limits\":{\"memory_mb\":64,\"file_size_mb\":3,\"nofile\":200,\"cpu_s\":7,\"pids\":50}", false);
	struct tcc *c = connect_as_loop(&d, _i == 1);
	const char *want = _i == 1 ? "65536 65536 6144 6144 200 200 7 7 50 50\n" : "65536 65536 6144 6144 200 200 7 7\n";
	for (int i = 0; i < 4; i++) {
		const struct json *r = sh(c, _i == 1 ? "echo $(ulimit -Sd) $(ulimit -Hd) $(ulimit -Sf) $(ulimit -Hf) "
						       "$(ulimit -Sn) $(ulimit -Hn) $(ulimit -St) $(ulimit -Ht) "
						       "$(ulimit -Sp) $(ulimit -Hp)"
						     : "echo $(ulimit -Sd) $(ulimit -Hd) $(ulimit -Sf) $(ulimit -Hf) "
						       "$(ulimit -Sn) $(ulimit -Hn) $(ulimit -St) $(ulimit -Ht)");
		tc_assert_ok(r);
		ck_assert_str_eq(tj_str(r, "result.structuredContent.stdout"), want);
	}
	tcc_close(c);
	stop(&d);
}
END_TEST

/*
 * The namespace made ahead for the next call is for the plan of the call
 * before: when the plan changes meanwhile (a .git/hooks made, then
 * removed, which the protect mounts follow), the next call cannot join
 * it, and its TMPDIR, only named ahead, is made for it. Each call still
 * gets a TMPDIR of its own, empty and writable, and .git/hooks is
 * read-only while it exists. As root (loop 0) and as uid 65534 (loop 1).
 */
START_TEST(tmpdir_when_plan_changes)
{
	TC_SKIP_UNDER_VALGRIND("children run there without the sandbox");
	if (_i == 1 && !want_nobody())
		TC_SKIP("tmpdir_when_plan_changes: skipped: not root, cannot connect as another uid");
	struct tcd d;
	start(&d, "\"limits\":{\"tmp_mb\":1}", false);
	struct tcc *c = connect_as_loop(&d, _i == 1);
	char *git = tcd_ws_path(&d, ".git"), *hooks = tcd_ws_path(&d, ".git/hooks");
	char *last = NULL;
	for (int i = 0; i < 6; i++) {
		/* Every other call, the workspace's repository changes. */
		bool with = i % 2 == 1;
		if (with) {
			/* A repository made where the sandbox held an empty
			 * .git (a workspace without one). */
			ck_assert(mkdir(git, 0755) == 0 || errno == EEXIST);
			free(tcd_write_ws(&d, ".git/HEAD", "ref: refs/heads/main\n", 21, 0644));
			ck_assert_int_eq(mkdir(hooks, 0755), 0);
		}
		const struct json *r = sh(c, "ls -A \"$TMPDIR\"; echo x > \"$TMPDIR/x\" && cat \"$TMPDIR/x\" && "
					     "{ touch .git/hooks/pre-commit 2>/dev/null && echo HOOKED; true; } && "
					     "echo \"$TMPDIR\"");
		tc_assert_ok(r);
		const char *out = tj_str(r, "result.structuredContent.stdout");
		ck_assert_msg(strncmp(out, "x\n/", 3) == 0 && !strstr(out, "HOOKED"), "call %d: %s", i, out);
		ck_assert_msg(!last || !strstr(out, last), "call %d reused %s", i, last);
		free(last);
		last = xstrdup(out + 2);
		if (with) {
			/* With what the sandbox made there to hold in place
			 * (the protected entries that were missing). */
			char *rm = xasprintf("rm -rf '%s'", git);
			ck_assert_int_eq(system(rm), 0);
			free(rm);
		}
	}
	free(last);
	free(git);
	free(hooks);
	tcc_close(c);
	stop(&d);
}
END_TEST

/*
 * Calls of root and of uid 65534 in turn, each leaving its TMPDIR full
 * and open to all: a namespace and its TMPDIR made ahead for one
 * identity never serve the other's call, which finds its own, empty,
 * owned by its uid, mode 0700.
 */
START_TEST(tmpdir_identities_apart)
{
	TC_SKIP_UNDER_VALGRIND("children run there without the sandbox");
	if (!want_nobody())
		TC_SKIP("tmpdir_identities_apart: skipped: not root, cannot connect as another uid");
	struct tcd d;
	start(&d, "\"limits\":{\"tmp_mb\":1}", false);
	ck_assert_int_eq(chmod(d.dir, 0711), 0);
	chown_tree(d.ws, NOBODY);
	struct tcc *cs[2] = { tcc_connect(&d), tcc_connect_as(&d, NOBODY, NOBODY) };
	for (int i = 0; i < 8; i++) {
		/* Twice each in a row, then the other. */
		int who = (i / 2) % 2;
		const struct json *r = sh(cs[who], "stat -c '%u %a' \"$TMPDIR\"; ls -A \"$TMPDIR\"; "
						   "touch \"$TMPDIR/left\" && chmod 777 \"$TMPDIR\" && echo done");
		tc_assert_ok(r);
		const char *out = tj_str(r, "result.structuredContent.stdout");
		char want[64];
		snprintf(want, sizeof(want), "%u 700\ndone\n", who ? NOBODY : 0);
		ck_assert_msg(strcmp(out, want) == 0, "call %d (uid %u): %s", i, who ? NOBODY : 0, out);
	}
	tcc_close(cs[0]);
	tcc_close(cs[1]);
	stop(&d);
}
END_TEST

/* A kernel without Landlock, emulated: the daemon inherits a seccomp filter
 * that takes landlock_create_ruleset away. */
START_TEST(require_refuses)
{
	TC_SKIP_UNDER_VALGRIND("the harness sets sandbox.require false there");
	if (!deny_syscall_or_skip("require_refuses", SYS_landlock_create_ruleset))
		return;
	struct tcd d;
	start(&d, "", false);
	ck_assert(tcd_wait_log(&d, "landlock: no", 1, 5000));
	struct tcc *c = tcc_connect(&d);
	const struct json *r = sh(c, "echo ran > ran");
	ck_assert_ptr_nonnull(tj(r, "error"));
	ck_assert_str_eq(tj_str(r, "error.data.kind"), "permission_denied");
	const char *msg = tj_str(r, "error.message");
	ck_assert_msg(strstr(msg, "Landlock") && strstr(msg, "sandbox.require"), "%s", msg);
	char *ran = tcd_ws_path(&d, "ran");
	ck_assert_int_lt(access(ran, F_OK), 0);
	tcc_close(c);
	stop(&d);

	/* require:false runs it, less confined, and says so. */
	start(&d, "\"require\":false", false);
	c = tcc_connect(&d);
	r = sh(c, "echo ran > ran");
	tc_assert_ok(r);
	ck_assert(has_str(r, "result.structuredContent.sandbox.not_enforced", "landlock"));
	ck_assert(!has_str(r, "result.structuredContent.sandbox.enforced", "landlock"));
	ck_assert(has_str(r, "result.structuredContent.sandbox.enforced", "seccomp"));
	free(ran);
	tcc_close(c);
	stop(&d);
}
END_TEST

/* node (V8 reserves far more address space than it uses) starts under the
 * default profile and limits: memory_mb is RLIMIT_DATA, not RLIMIT_AS. */
START_TEST(node_runs)
{
	if (access("/usr/bin/node", X_OK) < 0 && access("/usr/local/bin/node", X_OK) < 0)
		TC_SKIP("node_runs: skipped: node is not installed");
	struct tcd d;
	start(&d, "", false);
	struct tcc *c = tcc_connect(&d);
	const struct json *r = sh(c, "node -e 'console.log(1 + 1)'");
	tc_assert_ok(r);
	ck_assert_str_eq(tj_str(r, "result.structuredContent.stdout"), "2\n");
	ck_assert(has_str(r, "result.structuredContent.sandbox.enforced", "memory"));
	tcc_close(c);
	stop(&d);
}
END_TEST

/* Finds a cgroup v2 directory this process may make cgroups in: its own
 * cgroup's, under the cgroup2 mount. NULL when there is none. */
static char *writable_cgroup(void)
{
	char line[4096], *rel = NULL, *mnt = NULL;
	FILE *f = fopen("/proc/self/cgroup", "re");
	while (f && fgets(line, sizeof(line), f))
		if (strncmp(line, "0::", 3) == 0) {
			line[strcspn(line, "\n")] = '\0';
			rel = xstrdup(line + 3);
		}
	if (f)
		fclose(f);
	f = fopen("/proc/self/mountinfo", "re");
	while (f && !mnt && fgets(line, sizeof(line), f)) {
		char root[1024], point[1024];
		if (strstr(line, " - cgroup2 ") && sscanf(line, "%*d %*d %*s %1023s %1023s", root, point) == 2 &&
		    strcmp(root, "/") == 0)
			mnt = xstrdup(point);
	}
	if (f)
		fclose(f);
	char *dir = rel && mnt ? xasprintf("%s%s/tc-test-%d", mnt, rel, (int)getpid()) : NULL;
	free(rel);
	free(mnt);
	if (dir && mkdir(dir, 0755) < 0) {
		free(dir);
		dir = NULL;
	}
	char *kill_path = dir ? xasprintf("%s/cgroup.kill", dir) : NULL;
	if (dir && access(kill_path, W_OK) < 0) {
		(void)rmdir(dir);
		free(dir);
		dir = NULL;
	}
	free(kill_path);
	return dir;
}

/* With a real, writable cgroup v2 directory: a call lives in a cgroup of
 * its own, which a process it leaves behind does not outlive; none
 * outlives the daemon. */
START_TEST(cgroup_real)
{
	char *dir = writable_cgroup();
	if (!dir)
		TC_SKIP("cgroup_real: skipped: no writable cgroup v2 directory here (no delegation)");
	struct tcd d;
	char *members = xasprintf("\"cgroup\":\"%s\"", dir);
	start(&d, members, false);
	struct tcc *c = tcc_connect(&d);
	const struct json *r = sh(c, "cat /proc/self/cgroup; (setsid sleep 300 &) ; echo started");
	tc_assert_ok(r);
	ck_assert(has_str(r, "result.structuredContent.sandbox.enforced", "cgroup"));
	ck_assert_ptr_nonnull(strstr(tj_str(r, "result.structuredContent.stdout"), "/tc-"));
	/* Its process is gone with its call: no call cgroup holds one (the
	 * call's own may be kept, empty, for a later call). */
	char *cmd = xasprintf("test -z \"$(cat '%s'/tc-*/cgroup.procs)\"", dir);
	bool empty = false;
	for (int i = 0; i < 500 && !empty; i++) {
		empty = system(cmd) == 0;
		if (!empty)
			usleep(10000);
	}
	ck_assert(empty);
	free(cmd);
	r = sh(c, "cat /proc/self/cgroup");
	tc_assert_ok(r);
	ck_assert_ptr_nonnull(strstr(tj_str(r, "result.structuredContent.stdout"), "/tc-"));
	tcc_close(c);
	stop(&d);
	/* Nor does a call cgroup outlive the daemon. */
	cmd = xasprintf("test -z \"$(find '%s' -mindepth 1 -maxdepth 1 -type d -name 'tc-*')\"", dir);
	ck_assert_int_eq(system(cmd), 0);
	free(cmd);
	(void)rmdir(dir);
	free(members);
	free(dir);
}
END_TEST

/* A sandboxed call connecting to the daemon's socket over and over is
 * refused each time, and logged once, not once per connection. */
START_TEST(refusals_do_not_flood_the_log)
{
	if (access("/usr/bin/python3", X_OK) < 0)
		TC_SKIP("refusals_do_not_flood_the_log: skipped: no python3 to connect with");
	struct tcd d;
	start(&d, "", false);
	struct tcc *c = tcc_connect(&d);
	char *cmd = xasprintf("python3 -c 'import socket\n"
			      "n = 0\n"
			      "for i in range(200):\n"
			      "    s = socket.socket(socket.AF_UNIX)\n"
			      "    try:\n"
			      "        s.connect(\"%s\")\n"
			      "        s.sendall(b\"{}\\n\")\n"
			      "        n += s.recv(100) == b\"\"\n"
			      "    except OSError:\n"
			      "        n += 1\n"
			      "    s.close()\n"
			      "print(n)'", d.sock);
	const struct json *r = sh(c, cmd);
	free(cmd);
	tc_assert_ok(r);
	ck_assert_msg(strcmp(tj_str(r, "result.structuredContent.stdout"), "200\n") == 0, "%s", tj_str(r, "result.content.0.text"));
	tc_assert_ok(tcc_request(c, "ping", NULL));
	char *log = tcd_log(&d);
	unsigned lines = 0;
	for (const char *p = log; (p = strstr(p, "(sandboxed) may not be a peer")); p++)
		lines++;
	ck_assert_msg(lines == 1, "%u lines: %s", lines, log);
	free(log);
	tcc_close(c);
	stop(&d);
}
END_TEST

static Suite *iso_suite(void)
{
	Suite *s = suite_create("integ_sandbox_iso");
	TCase *tc = tcase_create("iso");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, protect_without_privilege);
	tcase_add_test(tc, daemon_files_out_of_reach);
	tcase_add_loop_test(tc, tmpdir_private, 0, 4);
	tcase_add_loop_test(tc, tmpdir_fresh_each_call, 0, 2);
	tcase_add_loop_test(tc, tmpdir_kept_untouched, 0, 2);
	tcase_add_loop_test(tc, limits_in_child, 0, 2);
	tcase_add_loop_test(tc, tmpdir_when_plan_changes, 0, 2);
	tcase_add_test(tc, tmpdir_identities_apart);
	tcase_add_test(tc, require_refuses);
	tcase_add_test(tc, node_runs);
	tcase_add_test(tc, cgroup_real);
	tcase_add_test(tc, refusals_do_not_flood_the_log);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return run_suite(iso_suite());
}
