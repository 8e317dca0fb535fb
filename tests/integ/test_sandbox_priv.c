/* SPDX-License-Identifier: MIT */
/*
 * Children hold no privilege, black box, with the daemon running as root:
 * a root peer's sandboxed shell, a command tool whose profile is off, a
 * hook and an MCP server all start with every capability set empty
 * (bounding, inheritable, permitted, effective, ambient), and the root
 * peer's shell can neither make a device node, set the host name, chown
 * another's file nor read another uid's 0600 file.
 */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <unistd.h>
#include <linux/capability.h>

#include "tests/integ/harness.h"
#include "tests/unit/check_main.h"

#define NOBODY 65534
#define ZERO "0000000000000000"

/* The value of "name:" in a /proc/PID/status text (malloc'd), or NULL. */
static char *status_field(const char *text, const char *name)
{
	for (const char *p = text; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL) {
		size_t n = strlen(name);
		if (strncmp(p, name, n) == 0 && p[n] == ':') {
			p += n + 1;
			while (*p == '\t' || *p == ' ')
				p++;
			return strndup(p, strcspn(p, "\n \t"));
		}
	}
	return NULL;
}

/* Asserts that every capability set of a status text is empty. */
static void assert_no_caps(const char *who, const char *text)
{
	static const char *const sets[] = { "CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb" };
	ck_assert_msg(text, "%s: no status", who);
	for (size_t i = 0; i < sizeof(sets) / sizeof(*sets); i++) {
		char *v = status_field(text, sets[i]);
		ck_assert_msg(v && strcmp(v, ZERO) == 0, "%s: %s is %s in:\n%s", who, sets[i], v ? v : "(none)", text);
		free(v);
	}
}

/* A root peer's sandboxed shell: uid 0 without power. */
START_TEST(root_shell_unprivileged)
{
	struct tcd d;
	tcd_start_auto(&d, "");
	char *theirs = tcd_write_ws(&d, "theirs", "private\n", 8, 0600);
	ck_assert_int_eq(chown(theirs, NOBODY, NOBODY), 0);
	struct tcc *c = tcc_connect(&d);
	const struct json *r = tcc_shell(c, "id -u; cat /proc/self/status");
	tc_assert_ok(r);
	const char *out = tj_str(r, "result.structuredContent.stdout");
	ck_assert_msg(strncmp(out, "0\n", 2) == 0, "%s", out);
	assert_no_caps("root peer's shell", out);
	char *v = status_field(out, "Seccomp");
	ck_assert_str_eq(v, "2");
	free(v);
	v = status_field(out, "NoNewPrivs");
	ck_assert_str_eq(v, "1");
	free(v);

	/* Each one on its own: none may succeed. */
	static const char *const refused[] = {
		"mknod \"$TMPDIR/blk\" b 7 0",
		"mknod blk b 7 0",
		/* Each of these changes nothing if it goes through. */
		"hostname \"$(hostname)\"",
		"chown 0:0 theirs",
		"cat theirs",
		"chmod 0644 theirs",
		"setpriv --reuid=0 --inh-caps=+sys_admin --ambient-caps=+sys_admin true",
		"capsh --caps=cap_sys_admin+eip -- -c true",
		"head -c 1 /dev/kmsg >/dev/null",
		"ip link set lo mtu \"$(cat /sys/class/net/lo/mtu)\"",
		"touch mine && chmod 4755 mine",
		"chmod g+s mine",
		"install -m 4755 /bin/true suid-true",
	};
	tc_assert_shell_fails_all(c, refused, sizeof(refused) / sizeof(*refused));
	/* chmod +x works. */
	r = tcc_shell(c, "touch mine && chmod +x mine && stat -c %a mine");
	tc_assert_ok(r);
	ck_assert_str_eq(tj_str(r, "result.structuredContent.stdout"), "755\n");
	struct stat st;
	char *suid = tcd_ws_path(&d, "suid-true");
	ck_assert(stat(suid, &st) < 0 || !(st.st_mode & (S_ISUID | S_ISGID)));
	free(suid);
	ck_assert_int_eq(stat(theirs, &st), 0);
	ck_assert_int_eq(st.st_uid, NOBODY);
	ck_assert_int_eq(st.st_mode & 07777, 0600);
	char *blk = tcd_ws_path(&d, "blk");
	ck_assert_int_lt(access(blk, F_OK), 0);
	free(blk);
	free(theirs);
	tcc_close(c);
	tcd_finish(&d);
}
END_TEST

/* A command tool whose profile is off still holds no capability. */
START_TEST(off_profile_unprivileged)
{
	struct tcd d;
	tcd_start_auto(&d, "");
	tcd_write_tool(&d, "status.json",
		       "{\"name\":\"status\",\"kind\":\"command\",\"side_effects\":\"read\","
		       "\"argv\":[\"cat\",\"/proc/self/status\"],\"sandbox\":{\"profile\":\"off\"}}");
	struct tcc *c = tcc_connect(&d);
	tc_assert_ok(tcc_request(c, "admin/reload", NULL));
	const struct json *r = tcc_call(c, "status", "{}");
	tc_assert_ok(r);
	const char *out = tj_str(r, "result.content.0.text");
	assert_no_caps("command tool, profile off", out);
	tcc_close(c);
	tcd_finish(&d);
}
END_TEST

/* A hook tells its capabilities as the reason of its refusal. */
START_TEST(hook_unprivileged)
{
	struct tcd d;
	tcd_start_auto(&d, ",\"hooks\":{\"pre_call\":[{\"match\":\"shell\",\"command\":[\"/bin/sh\",\"@DIR@/hook.sh\"]}]}");
	static const char script[] =
		"cat >/dev/null\n"
		"caps=$(grep -E '^Cap' /proc/self/status | tr '\\t\\n' '= ')\n"
		"printf '{\"decision\":\"deny\",\"reason\":\"%s\"}\\n' \"$caps\"\n";
	char *path = xasprintf("%s/hook.sh", d.dir);
	tc_write_file_atomic(path, script, strlen(script));
	ck_assert_int_eq(chmod(path, 0644), 0);
	free(path);
	struct tcc *c = tcc_connect(&d);
	const struct json *r = tcc_shell(c, "true");
	char *text = tj_text(r);
	static const char *const sets[] = { "CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb" };
	for (size_t i = 0; i < sizeof(sets) / sizeof(*sets); i++) {
		char *want = xasprintf("%s:=" ZERO, sets[i]);
		ck_assert_msg(strstr(text, want), "no %s in %s", want, text);
		free(want);
	}
	free(text);
	tcc_close(c);
	tcd_finish(&d);
}
END_TEST

/* An MCP server of a root daemon runs as root, without a capability. */
START_TEST(mcp_server_unprivileged)
{
	const char *server = getenv("TC_MCP_SERVER");
	if (!server)
		TC_SKIP("mcp_server_unprivileged: skipped: TC_MCP_SERVER is not set");
	for (int off = 0; off < 2; off++) {
		struct tcd d;
		tcd_start_auto(&d, "");
		char *decl = xasprintf("{ \"name\": \"demo\", \"kind\": \"mcp\", \"command\": [\"%s\"],"
				       "  \"prefix\": \"demo_\", \"side_effects\": \"read\","
				       "  \"sandbox\": {\"profile\": \"%s\", \"limits\": {\"memory_mb\": null}} }",
				       server, off ? "off" : "workspace-write");
		tcd_write_tool(&d, "demo.json", decl);
		free(decl);
		struct tcc *c = tcc_connect(&d);
		tc_assert_ok(tcc_request(c, "admin/reload", NULL));
		const struct json *r = tcc_call(c, "demo_pid", "{}");
		tc_assert_ok(r);
		pid_t pid = atoi(tj_str(r, "result.content.0.text"));
		ck_assert_int_gt(pid, 1);
		char path[64];
		snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
		char *text = tcd_read(NULL, path, NULL);
		char *uid = status_field(text, "Uid");
		ck_assert_str_eq(uid, "0");
		free(uid);
		assert_no_caps(off ? "MCP server, profile off" : "MCP server", text);
		free(text);
		tcc_close(c);
		tcd_finish(&d);
	}
}
END_TEST

/*
 * Nothing outside the writable paths changes, not even metadata of what
 * the peer owns: a root peer (loop 0) and a peer of uid 65534 (loop 1)
 * cannot chmod, chown, touch -d, set an xattr on, link, rename or remove
 * its own files in a 0777 directory outside the workspace, nor the
 * daemon's config, tools directory or audit log; in the workspace all of
 * that works.
 */
START_TEST(metadata_outside_refused)
{
	uid_t uid = _i ? NOBODY : 0;
	struct tcd d;
	tcd_start_auto(&d, ",\"audit_log\":\"@DIR@/audit.log\"");
	ck_assert_int_eq(chmod(d.dir, 0711), 0);
	ck_assert_int_eq(chmod(d.ws, 0777), 0);
	char *outside = xasprintf("%s/outside", d.dir);
	char *dot_ssh = xasprintf("%s/outside/.ssh", d.dir);
	char *key = xasprintf("%s/outside/.ssh/id_rsa", d.dir);
	ck_assert_int_eq(mkdir(outside, 0777), 0);
	ck_assert_int_eq(chmod(outside, 0777), 0);
	ck_assert_int_eq(mkdir(dot_ssh, 0700), 0);
	tc_write_file_atomic(key, "KEY\n", 4);
	ck_assert_int_eq(chmod(key, 0600), 0);
	ck_assert_int_eq(chown(dot_ssh, uid, uid), 0);
	ck_assert_int_eq(chown(key, uid, uid), 0);
	struct tcc *c = _i ? tcc_connect_as(&d, NOBODY, NOBODY) : tcc_connect(&d);
	tc_assert_ok(tcc_shell(c, "true"));	/* the audit log exists */
	char *audit = xasprintf("%s/audit.log", d.dir);
	if (_i) {
		/* Its own as far as modes go: only the mounts stand in the way. */
		ck_assert_int_eq(chown(audit, NOBODY, NOBODY), 0);
		ck_assert_int_eq(chown(d.config, NOBODY, NOBODY), 0);
		ck_assert_int_eq(chown(d.tools_dir, NOBODY, NOBODY), 0);
	}
	const char *const refused[] = {
		"chmod 755 '%1$s/.ssh'", "chmod 644 '%1$s/.ssh/id_rsa'", "chown %2$u:%2$u '%1$s/.ssh/id_rsa'",
		"touch -d 2001-01-01 '%1$s/.ssh/id_rsa'",
		"python3 -c 'import os; os.setxattr(\"%1$s/.ssh/id_rsa\", \"user.x\", b\"1\")'",
		"ln '%1$s/.ssh/id_rsa' '%1$s/link'", "mv '%1$s/.ssh/id_rsa' '%1$s/moved'",
		"rm -f '%1$s/.ssh/id_rsa'", "touch '%1$s/new'", "mkdir '%1$s/dir'", "mkfifo '%1$s/fifo'",
		"chmod 666 '%3$s'", "chmod 777 '%4$s'", "chmod 666 '%5$s'", "touch -d 2001-01-01 '%3$s'",
		"chown %2$u '%3$s'",
	};
	for (size_t i = 0; i < sizeof(refused) / sizeof(*refused); i++) {
		char *one = xasprintf(refused[i], outside, (unsigned)uid, d.config, d.tools_dir, audit);
		tc_assert_shell_fails(c, one);
		free(one);
	}
	struct stat st;
	ck_assert_int_eq(stat(dot_ssh, &st), 0);
	ck_assert_int_eq(st.st_mode & 07777, 0700);
	ck_assert_int_eq(stat(key, &st), 0);
	ck_assert_int_eq(st.st_mode & 07777, 0600);
	ck_assert_int_gt(st.st_mtime, 1000000000 + 31536000 * 2);
	ck_assert_int_eq(stat(d.config, &st), 0);
	ck_assert_int_eq(st.st_mode & 0002, 0);
	ck_assert_int_eq(stat(audit, &st), 0);
	ck_assert_int_eq(st.st_mode & 0002, 0);
	/* In the workspace (and TMPDIR) the same works. */
	const struct json *r = tcc_shell(c, "mkdir -p d/.ssh && echo k > d/.ssh/k && chmod 755 d/.ssh && chmod 644 d/.ssh/k && "
				     "touch -d 2001-01-01 d/.ssh/k && ln d/.ssh/k d/l && mv d/l d/m && "
				     "python3 -c 'import os; os.setxattr(\"d/m\", \"user.x\", b\"1\")' 2>/dev/null; "
				     "echo t > \"$TMPDIR/t\" && chmod 600 \"$TMPDIR/t\" && mv \"$TMPDIR/t\" d/t && "
				     "stat -c %a d/.ssh && cat d/t");
	tc_assert_ok(r);
	ck_assert_str_eq(tj_str(r, "result.structuredContent.stdout"), "755\nt\n");
	free(audit);
	free(outside);
	free(dot_ssh);
	free(key);
	tcc_close(c);
	tcd_finish(&d);
}
END_TEST

/*
 * The daemon's socket directory, put in the workspace, is the daemon's as
 * its config is: a root peer's shell (loop 0) and the shell of a peer of
 * uid 65534 that owns the directory (loop 1) can neither remove the
 * socket, nor add to the directory, rename it or change its mode; the rest
 * of the workspace stays theirs.
 */
START_TEST(socket_dir_in_workspace_untouched)
{
	uid_t uid = _i ? NOBODY : 0;
	struct tcd d;
	struct tcd_opts o = { .config = "{" TC_AUTO_CONFIRM ",\"socket\":\"@WS@/run/sock\"}", .no_wait = true };
	tcd_prepare(&d, &o);
	char *run = tcd_ws_path(&d, "run");
	ck_assert_int_eq(mkdir(run, 0755), 0);
	ck_assert_int_eq(chmod(run, 0755), 0);
	ck_assert_int_eq(chown(run, uid, uid), 0);
	free(d.sock);
	d.sock = xasprintf("%s/sock", run);
	tcd_spawn(&d, &o);
	ck_assert_msg(tcd_wait_socket(&d, d.sock, TCD_START_TIMEOUT_MS) == 0, "no socket at %s", d.sock);
	tcd_open_to_all(&d);
	struct tcc *c = _i ? tcc_connect_as(&d, NOBODY, NOBODY) : tcc_connect(&d);
	const char *const refused[] = {
		"rm run/sock", "chmod 777 run", "touch run/new", "mv run run2",
	};
	tc_assert_shell_fails_all(c, refused, sizeof(refused) / sizeof(*refused));
	struct stat st;
	ck_assert_int_eq(lstat(d.sock, &st), 0);
	ck_assert(S_ISSOCK(st.st_mode));
	ck_assert_int_eq(stat(run, &st), 0);
	ck_assert_int_eq(st.st_mode & 07777, 0755);
	char *added = tcd_ws_path(&d, "run/new");
	ck_assert_int_lt(access(added, F_OK), 0);
	free(added);
	tc_assert_ok(tcc_shell(c, "touch beside && chmod 600 beside && rm beside"));
	/* Nor through the file tools. */
	tc_assert_kind(tcc_call(c, "delete_file", "{\"path\":\"run/sock\"}"), "permission_denied");
	tc_assert_kind(tcc_call(c, "make_dir", "{\"path\":\"run/new\"}"), "permission_denied");
	tc_assert_kind(tcc_call(c, "move_file", "{\"from\":\"run\",\"to\":\"run2\"}"), "permission_denied");
	ck_assert_int_eq(lstat(d.sock, &st), 0);
	tcc_close(c);
	free(run);
	tcd_finish(&d);
}
END_TEST

/*
 * The daemon's config and tools directory in the workspace (the per-user
 * install's ~/.config/toolcalld under a $HOME workspace): a call's shell
 * can neither change them, nor what lies beside them in the config's
 * directory (a hook's script), nor rename a directory on their way, which
 * would take them away and let it put a config of its own at their path
 * for the daemon's next reload; the rest of the workspace stays writable.
 */
/* Starts a daemon whose config is the workspace's config (relative) and
 * tools directory its tools (made, with a hook.sh beside it). */
static void start_config_in_ws(struct tcd *d, const char *config, const char *tools)
{
	struct tcd_opts o = { .no_wait = true };
	tcd_prepare(d, &o);
	char *dir = tcd_ws_path(d, tools);
	char *cmd = xasprintf("mkdir -p '%s' && echo 'exit 0' > '%s/../hook.sh'", dir, dir);
	ck_assert_int_eq(system(cmd), 0);
	free(cmd);
	free(d->config);
	d->config = tcd_ws_path(d, config);
	char *cfg = xasprintf("{" TC_AUTO_CONFIRM ",\"socket\":\"%s\",\"workspace\":\"%s\",\"tools_dir\":\"%s\"}",
			      d->sock, d->ws, dir);
	tc_write_file_atomic(d->config, cfg, strlen(cfg));
	free(cfg);
	free(dir);
	tcd_spawn(d, &o);
	ck_assert_msg(tcd_wait_socket(d, d->sock, TCD_START_TIMEOUT_MS) == 0, "no socket");
}

START_TEST(config_dir_in_workspace_kept_in_place)
{
	struct tcd d;
	start_config_in_ws(&d, ".config/tc/config.json", ".config/tc/tools.d");
	struct stat before;
	ck_assert_int_eq(stat(d.config, &before), 0);
	struct tcc *c = tcc_connect(&d);
	const char *const refused[] = {
		"mv .config .config-old", "mv .config/tc .config/tc-old", "echo '{}' > .config/tc/config.json",
		"touch .config/tc/tools.d/x.json", "rm .config/tc/config.json",
		"echo 'echo allow' > .config/tc/hook.sh", "touch .config/tc/new.json", "chmod 777 .config/tc",
	};
	tc_assert_shell_fails_all(c, refused, sizeof(refused) / sizeof(*refused));
	struct stat after;
	ck_assert_int_eq(stat(d.config, &after), 0);
	ck_assert(after.st_ino == before.st_ino && after.st_size == before.st_size);
	tc_assert_ok(tcc_shell(c, "touch .config/other && rm .config/other && cat .config/tc/hook.sh"));
	/* Nor can the file tools, which do not run in the sandbox. */
	const char *const tools[][2] = {
		{ "write_file", "{\"path\":\".config/tc/tools.d/x.json\",\"content\":\"{}\"}" },
		{ "write_file", "{\"path\":\".config/tc/hook.sh\",\"content\":\"echo allow\"}" },
		{ "move_file", "{\"from\":\".config\",\"to\":\".config-old\"}" },
		{ "delete_file", "{\"path\":\".config/tc\",\"recursive\":true}" },
		{ "make_dir", "{\"path\":\".config/tc/more\"}" },
	};
	for (size_t i = 0; i < sizeof(tools) / sizeof(*tools); i++)
		tc_assert_kind(tcc_call(c, tools[i][0], tools[i][1]), "permission_denied");
	tc_assert_ok(tcc_call(c, "write_file", "{\"path\":\".config/other\",\"content\":\"x\"}"));
	ck_assert_int_eq(stat(d.config, &after), 0);
	ck_assert(after.st_ino == before.st_ino && after.st_size == before.st_size);
	tcc_close(c);
	tcd_finish(&d);
}
END_TEST

/*
 * The config at the workspace's top (toolcalld -c ./toolcalld.json in a
 * project, whose workspace is the current directory): the config file
 * itself is out of reach of the file tools and of a call's shell (a config
 * rewritten with the sandbox off would be in force at the next reload),
 * while the rest of the top stays writable.
 */
START_TEST(config_at_workspace_top_kept)
{
	struct tcd d;
	start_config_in_ws(&d, "toolcalld.json", "tools.d");
	struct stat before, after;
	ck_assert_int_eq(stat(d.config, &before), 0);
	struct tcc *c = tcc_connect(&d);
	tc_assert_ok(tcc_call(c, "write_file", "{\"path\":\"other.json\",\"content\":\"{}\"}"));
	const char *const tools[][2] = {
		{ "write_file", "{\"path\":\"toolcalld.json\",\"content\":\"{}\"}" },
		{ "edit_file", "{\"path\":\"toolcalld.json\",\"edits\":[{\"old\":\"tools_dir\",\"new\":\"x\"}]}" },
		{ "patch_file", "{\"path\":\"toolcalld.json\",\"old\":\"tools_dir\",\"new\":\"x\"}" },
		{ "move_file", "{\"from\":\"toolcalld.json\",\"to\":\"moved.json\"}" },
		{ "move_file", "{\"from\":\"other.json\",\"to\":\"toolcalld.json\",\"overwrite\":true}" },
		{ "delete_file", "{\"path\":\"toolcalld.json\"}" },
		{ "write_file", "{\"path\":\"tools.d/x.json\",\"content\":\"{}\"}" },
	};
	for (size_t i = 0; i < sizeof(tools) / sizeof(*tools); i++)
		tc_assert_kind(tcc_call(c, tools[i][0], tools[i][1]), "permission_denied");
	const char *const refused[] = {
		"echo '{}' > toolcalld.json", "rm -f toolcalld.json", "mv toolcalld.json moved.json",
		"mv other.json toolcalld.json", "chmod 666 toolcalld.json",
	};
	tc_assert_shell_fails_all(c, refused, sizeof(refused) / sizeof(*refused));
	ck_assert_int_eq(stat(d.config, &after), 0);
	ck_assert(after.st_ino == before.st_ino && after.st_size == before.st_size &&
		  after.st_mode == before.st_mode);
	tc_assert_ok(tcc_shell(c, "echo x > beside && rm beside"));
	tcc_close(c);
	tcd_finish(&d);
}
END_TEST

/* Replaces from by to in the daemon's config file. */
static void set_config(struct tcd *d, const char *from, const char *to)
{
	char *text = tcd_read(d, d->config, NULL);
	char *at = strstr(text, from);
	ck_assert_msg(at, "%s not in %s", from, text);
	*at = '\0';
	char *out = xasprintf("%s%s%s", text, to, at + strlen(from));
	tc_write_file_atomic(d->config, out, strlen(out));
	free(out);
	free(text);
}

/* Whether a shell call filling its TMPDIR says both size and note. */
static bool fills(struct tcc *c, const char *size, const char *note)
{
	const struct json *r = tcc_shell(c, "head -c 5000000 /dev/zero > \"$TMPDIR/big\"; wc -c < \"$TMPDIR/big\"");
	const char *text = tj_has(r, "result.content.0.text") ? tj_str(r, "result.content.0.text") : NULL;
	return text && strstr(text, size) && strstr(text, note);
}

/*
 * The top-level limits.tmp_mb sizes a call's TMPDIR, at start and on
 * reload; a call that fills it is told so whatever its exit status (the
 * daemon sees its tmpfs full), and one that does not is not.
 */
START_TEST(tmp_mb_note_whatever_the_exit_status)
{
	TC_SKIP_UNDER_VALGRIND("children run there without the sandbox, so tmp_mb bounds no TMPDIR");
	struct tcd d;
	tcd_start_auto(&d, ",\"limits\":{\"tmp_mb\":5}");
	struct tcc *c = tcc_connect(&d);
	const struct json *r = tcc_shell(c, "head -c 10000000 /dev/zero > \"$TMPDIR/big\"; echo rc=$?; "
					    "wc -c < \"$TMPDIR/big\"");
	tc_assert_ok(r);
	const char *text = tj_str(r, "result.content.0.text");
	ck_assert_msg(strstr(text, "rc=1\n5242880\n"), "%s", text);
	ck_assert_msg(strstr(text, "[limit] ") &&
		      strstr(text, "the temporary space limit of $TMPDIR (5 MB, limits.tmp_mb)"), "%s", text);
	/* Beneath the limit: no note. */
	r = tcc_shell(c, "head -c 1000000 /dev/zero > \"$TMPDIR/small\"; echo rc=$?");
	tc_assert_ok(r);
	text = tj_str(r, "result.content.0.text");
	ck_assert_msg(strstr(text, "rc=0") && !strstr(text, "[limit]") && !strstr(text, "tmp_mb"), "%s", text);
	/* Nor where the command fails for another reason after writing
	 * there. */
	r = tcc_shell(c, "head -c 1000000 /dev/zero > \"$TMPDIR/small\"; echo 'No space left on device' >&2; exit 3");
	text = tj_str(r, "result.content.0.text");
	ck_assert_msg(strstr(text, "[exit code 3]") && !strstr(text, "[limit]"), "%s", text);

	/* A background command too, however it ended. */
	r = tcc_call(c, "shell", "{\"command\":\"head -c 10000000 /dev/zero > $TMPDIR/big; echo rc=$?\","
				 "\"background\":true,\"yield_ms\":20000}");
	tc_assert_ok(r);
	text = tj_str(r, "result.content.0.text");
	ck_assert_msg(strstr(text, "rc=1") && strstr(text, "[limit] ") && strstr(text, "(5 MB, limits.tmp_mb)"),
		      "%s", text);
	r = tcc_call(c, "shell", "{\"command\":\"echo small > $TMPDIR/small\",\"background\":true,\"yield_ms\":20000}");
	tc_assert_ok(r);
	text = tj_str(r, "result.content.0.text");
	ck_assert_msg(!strstr(text, "[limit]"), "%s", text);

	/* A command tool that succeeds is told too; its own
	 * sandbox.limits.tmp_mb over the config's. */
	tcd_write_tool(&d, "fill.json",
		       "{\"name\":\"fill\",\"kind\":\"command\",\"side_effects\":\"execute\","
		       "\"argv\":[\"/bin/sh\",\"-c\",\"head -c 3000000 /dev/zero > $TMPDIR/big; wc -c < $TMPDIR/big\"],"
		       "\"sandbox\":{\"limits\":{\"tmp_mb\":1}}}");
	tc_assert_ok(tcc_reload(c));
	r = tcc_call(c, "fill", "{}");
	tc_assert_ok(r);
	text = tj_str(r, "result.content.0.text");
	ck_assert_msg(strstr(text, "1048576\n") && strstr(text, "[limit] ") && strstr(text, "(1 MB, limits.tmp_mb)"),
		      "%s", text);

	/* Its JSON output aside, in structuredContent. */
	tcd_write_tool(&d, "fillj.json",
		       "{\"name\":\"fillj\",\"kind\":\"command\",\"side_effects\":\"execute\",\"stdout\":\"json\","
		       "\"argv\":[\"/bin/sh\",\"-c\",\"head -c 6000000 /dev/zero > $TMPDIR/big; echo '{\\\"ok\\\":1}'\"]}");
	tc_assert_ok(tcc_reload(c));
	r = tcc_call(c, "fillj", "{}");
	tc_assert_ok(r);
	ck_assert_int_eq(tj_int(r, "result.structuredContent.ok"), 1);
	text = tj_str(r, "result.content.0.text");
	ck_assert_msg(strstr(text, "[limit] ") && strstr(text, "(5 MB, limits.tmp_mb)"), "%s", text);

	/* On reload: a new size, and sandbox.limits.tmp_mb over it. */
	set_config(&d, "\"limits\":{\"tmp_mb\":5}", "\"limits\":{\"tmp_mb\":2}");
	tc_assert_ok(tcc_reload(c));
	r = tcc_shell(c, "head -c 3000000 /dev/zero > \"$TMPDIR/big\"; wc -c < \"$TMPDIR/big\"");
	tc_assert_ok(r);
	text = tj_str(r, "result.content.0.text");
	ck_assert_msg(strstr(text, "2097152\n") && strstr(text, "(2 MB, limits.tmp_mb)"), "%s", text);
	/* By SIGHUP, which the daemon reads on its loop: looked at until it
	 * holds. */
	set_config(&d, "\"limits\":{\"tmp_mb\":2}",
		   "\"limits\":{\"tmp_mb\":2},\"sandbox\":{\"limits\":{\"tmp_mb\":3}}");
	tcd_kill(&d, SIGHUP);
	ck_assert_msg(tc_wait_until(fills(c, "3145728\n", "(3 MB, limits.tmp_mb)"), tc_wait_scaled(30000)),
		      "sandbox.limits.tmp_mb 3 did not hold after SIGHUP");
	tcc_close(c);
	tcd_finish(&d);
}
END_TEST

/*
 * limits.tmp_mb: a call's TMPDIR is a space of its own of that size; the
 * call that fills it sees ENOSPC and the result names the limit, and a
 * call of another uid running beside it still has all of its own.
 */
START_TEST(tmp_mb_bounds_each_call)
{
	struct tcd d;
	tcd_start_auto(&d, ",\"sandbox\":{\"limits\":{\"tmp_mb\":1}}");
	ck_assert_int_eq(chmod(d.dir, 0711), 0);
	ck_assert_int_eq(chmod(d.ws, 0777), 0);
	struct tcc *a = tcc_connect(&d);
	struct tcc *b = tcc_connect_as(&d, NOBODY, NOBODY);
	/* A fills its TMPDIR and keeps it full while B writes. */
	const char *fill = "head -c 2097152 /dev/zero > \"$TMPDIR/f\"; echo $? > filled; "
			   "while [ ! -e done ]; do sleep 0.02; done; exit 1";
	struct buf args = {0};
	struct jgen *g = jgen_new(&args);
	jgen_obj_open(g);
	jgen_key(g, "command");
	jgen_str(g, fill);
	jgen_obj_close(g);
	jgen_free(g);
	char *params = xasprintf("{\"name\":\"shell\",\"arguments\":%s}", buf_head(&args));
	int64_t id = tcc_send_request(a, "tools/call", params);
	free(params);
	buf_free(&args);
	char *filled = tcd_ws_path(&d, "filled");
	struct stat st;
	ck_assert_msg(tc_wait_until(stat(filled, &st) == 0 && st.st_size > 0, tc_wait_scaled(30000)),
		      "the first call did not fill its TMPDIR");
	free(filled);
	const struct json *r = tcc_shell(b, "head -c 700000 /dev/zero > \"$TMPDIR/g\" && wc -c < \"$TMPDIR/g\"");
	tc_assert_ok(r);
	ck_assert_str_eq(tj_str(r, "result.structuredContent.stdout"), "700000\n");
	tcd_put(&d, "done", "");
	char idbuf[32];
	snprintf(idbuf, sizeof(idbuf), "%lld", (long long)id);
	r = tcc_wait_id(a, idbuf, 30000);
	ck_assert_ptr_nonnull(r);
	size_t n = 0;
	char *path = tcd_ws_path(&d, "filled");
	char *code = tcd_read(&d, path, &n);
	free(path);
	ck_assert_str_ne(code, "0\n");
	free(code);
	/* The limit is named where the child said so. */
	r = tcc_shell(a, "head -c 2097152 /dev/zero > \"$TMPDIR/f\"");
	ck_assert(tj_bool(r, "result.isError"));
	char *text = tj_text(r);
	ck_assert_msg(strstr(text, "limits.tmp_mb"), "%s", text);
	free(text);
	ck_assert(tj_has_str(r, "result.structuredContent.sandbox.enforced", "tmp_mb"));
	tcc_close(a);
	tcc_close(b);
	tcd_finish(&d);
}
END_TEST

/* Listens on a Unix socket at path, owned by uid; returns its fd. */
static int listen_at(const char *path, uid_t uid)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	snprintf(a.sun_path, sizeof(a.sun_path), "%s", path);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	ck_assert_int_ge(fd, 0);
	(void)unlink(path);
	ck_assert_int_eq(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	ck_assert_int_eq(listen(fd, 8), 0);
	ck_assert_int_eq(chown(path, uid, uid), 0);
	return fd;
}

/*
 * Sockets outside the workspace: the runtime directory of the child's
 * uid (/run/user/UID: session bus, agents, systemd --user) and the system
 * bus's /run/dbus are not there for a root peer (loop 0) or a peer of
 * uid 65534 (loop 1), but a directory holding what sandbox.unix_sockets
 * lists is, and so is a socket in the workspace.
 */
START_TEST(sockets_hidden)
{
	uid_t uid = _i ? NOBODY : 0;
	char runtime[64], user_sock[128], bus_sock[128];
	snprintf(runtime, sizeof(runtime), "/run/user/%u", (unsigned)uid);
	snprintf(user_sock, sizeof(user_sock), "%s/tc-test-%d.sock", runtime, (int)getpid());
	snprintf(bus_sock, sizeof(bus_sock), "/run/dbus/tc-test-%d.sock", (int)getpid());
	(void)mkdir("/run/user", 0755);
	bool made_runtime = mkdir(runtime, 0700) == 0;
	if (!made_runtime && errno != EEXIST)
		TC_SKIP("sockets_hidden: skipped: cannot make %s (%s)", runtime, strerror(errno));
	bool made_bus = mkdir("/run/dbus", 0755) == 0;
	if (made_runtime)
		ck_assert_int_eq(chown(runtime, uid, uid), 0);
	int fds[2] = { listen_at(user_sock, uid), listen_at(bus_sock, uid) };

	for (int allow = 0; allow < 2; allow++) {
		struct tcd d;
		char *members = allow ? xasprintf(",\"sandbox\":{\"unix_sockets\":[\"%s\"]}", bus_sock) : xstrdup("");
		tcd_start_auto(&d, members);
		free(members);
		ck_assert_int_eq(chmod(d.dir, 0711), 0);
		ck_assert_int_eq(chmod(d.ws, 0777), 0);
		char *ws_sock = tcd_ws_path(&d, "ws.sock");
		int wfd = listen_at(ws_sock, uid);
		struct tcc *c = _i ? tcc_connect_as(&d, NOBODY, NOBODY) : tcc_connect(&d);
		const char *const paths[] = { user_sock, bus_sock, ws_sock };
		for (size_t k = 0; k < 3; k++) {
			char *cmd = xasprintf("python3 -c 'import socket, sys; s = socket.socket(socket.AF_UNIX); "
					      "s.connect(sys.argv[1]); print(\"CONNECTED\")' '%s'", paths[k]);
			const struct json *r = tcc_shell(c, cmd);
			free(cmd);
			const char *o = tj_str(r, "result.structuredContent.stdout");
			bool connected = o && strstr(o, "CONNECTED");
			/* Hidden unless listed (the second daemon lists the bus's) or in the workspace. */
			bool want = k == 2 || (k == 1 && allow);
			ck_assert_msg(connected == want, "%s: connected %d, wanted %d (allow %d)", paths[k], connected, want,
				      allow);
		}
		close(wfd);
		free(ws_sock);
		tcc_close(c);
		tcd_finish(&d);
	}
	for (int k = 0; k < 2; k++)
		close(fds[k]);
	(void)unlink(user_sock);
	(void)unlink(bus_sock);
	if (made_runtime)
		(void)rmdir(runtime);
	if (made_bus)
		(void)rmdir("/run/dbus");
}
END_TEST

/*
 * The sandbox leaves the user's repository as it is: in a repository
 * without .git/hooks, .git/info, .git/modules and .git/commondir, calls
 * make none of them (a mount needs a place, and the kernel has no way to
 * refuse one name in .git while git makes its lock files there: the
 * result says so in not_enforced), the .git/config that exists stays
 * read-only, and git add, commit and status work; as root (loop 0) and
 * as uid 65534 (loop 1), which owns the repository.
 */
START_TEST(protect_holds_missing_paths)
{
	if (system("git --version >/dev/null 2>&1") != 0)
		TC_SKIP("protect_holds_missing_paths: skipped: no git here");
	uid_t uid = _i ? NOBODY : 0;
	struct tcd d;
	tcd_start_auto(&d, ",\"sandbox\":{\"protect\":[\".git/hooks\",\".git/config\",\".git/info\",\".git/modules\",\".git/commondir\"]}");
	ck_assert_int_eq(chmod(d.dir, 0711), 0);
	char *cmd = xasprintf("cd '%s' && git init -q && rm -rf .git/hooks .git/info && echo a > f && chown -R %u:%u .",
			      d.ws, (unsigned)uid, (unsigned)uid);
	ck_assert_int_eq(system(cmd), 0);
	free(cmd);
	struct tcc *c = _i ? tcc_connect_as(&d, NOBODY, NOBODY) : tcc_connect(&d);
	static const char *const refused[] = {
		"git config core.fsmonitor 'echo pwned'", "echo x >> .git/config", "rm -f .git/config",
		"mv .git/config .git/c2", "chmod 666 .git/config",
		/* Missing before the call: held all the same. */
		"echo ../.evil > .git/commondir", "echo x > .git/hooks/pre-commit", "rm -rf .git/hooks",
		"mkdir .git/modules/x", "echo x > .git/info/exclude",
	};
	tc_assert_shell_fails_all(c, refused, sizeof(refused) / sizeof(*refused));
	const struct json *r = tcc_shell(c, "export HOME=\"$TMPDIR\" GIT_AUTHOR_NAME=a GIT_AUTHOR_EMAIL=a@b GIT_COMMITTER_NAME=a "
				     "GIT_COMMITTER_EMAIL=a@b; git add f && git commit -qm first && echo b > g && "
				     "git add g && git commit -qm second && git status --short && git log --oneline | wc -l");
	tc_assert_ok(r);
	ck_assert_str_eq(tj_str(r, "result.structuredContent.stdout"), "2\n");
	ck_assert(tj_has_str(r, "result.structuredContent.sandbox.enforced", "protect"));
	ck_assert(!tj_has_str(r, "result.structuredContent.sandbox.not_enforced", "protect: paths that do not exist"));
	/* The commondir made ("." ) names the repository's own .git. */
	r = tcc_shell(c, "cd \"$(git rev-parse --git-common-dir)\" && pwd -P && cd .. && git worktree list | wc -l");
	tc_assert_ok(r);
	char *want = xasprintf("%s/.git\n1\n", d.ws);
	ck_assert_str_eq(tj_str(r, "result.structuredContent.stdout"), want);
	free(want);
	tcc_close(c);
	/* The missing ones were made empty to hold their place (the one
	 * change the sandbox makes to a repository), and stayed empty. */
	static const char *const made[] = { ".git/hooks", ".git/info", ".git/modules" };
	for (size_t i = 0; i < sizeof(made) / sizeof(*made); i++) {
		char *path = tcd_ws_path(&d, made[i]);
		struct stat st;
		ck_assert_msg(lstat(path, &st) == 0 && S_ISDIR(st.st_mode), "%s was not held", made[i]);
		ck_assert_msg(st.st_nlink == 2, "%s is not empty", made[i]);
		free(path);
	}
	char *commondir = tcd_ws_path(&d, ".git/commondir");
	FILE *f = fopen(commondir, "r");
	char line[64] = "";
	ck_assert_ptr_nonnull(f);
	ck_assert_ptr_nonnull(fgets(line, sizeof(line), f));
	fclose(f);
	ck_assert_str_eq(line, ".\n");
	free(commondir);
	tcd_finish(&d);
}
END_TEST

/* The git directories of submodules (.git/modules/NAME) hold the
 * protected entries as the repository's own .git does, whatever the list
 * names. */
START_TEST(protect_submodule_git_dirs)
{
	struct tcd d;
	tcd_start_auto(&d, ",\"sandbox\":{\"protect\":[\".git/hooks\",\".git/config\"]}");
	char *cmd = xasprintf("cd '%s' && mkdir -p .git/hooks .git/modules/lib/hooks && touch .git/config "
			      ".git/modules/lib/config", d.ws);
	ck_assert_int_eq(system(cmd), 0);
	free(cmd);
	struct tcc *c = tcc_connect(&d);
	static const char *const refused[] = {
		"echo x > .git/modules/lib/hooks/pre-commit", "echo x >> .git/modules/lib/config",
		"mv .git/modules/lib .git/modules/l2", "rm -rf .git/modules/lib/hooks",
	};
	tc_assert_shell_fails_all(c, refused, sizeof(refused) / sizeof(*refused));
	tc_assert_ok(tcc_shell(c, "echo fine > .git/modules/lib/HEAD"));
	tcc_close(c);
	tcd_finish(&d);
}
END_TEST

/* The repositories one level down in the workspace (an entry holding a
 * .git directory, or a submodule's .git file) hold protect as the
 * workspace's own: one cloned after the daemon started too. */
START_TEST(protect_nested_repositories)
{
	struct tcd d;
	tcd_start_auto(&d, "");
	struct tcc *c = tcc_connect(&d);
	tc_assert_ok(tcc_shell(c, "true"));	/* the workspace's top as it was */
	char *cmd = xasprintf("cd '%s' && mkdir -p vendor/.git/hooks sub && touch vendor/.git/config && "
			      "echo 'gitdir: ../.git/modules/sub' > sub/.git", d.ws);
	ck_assert_int_eq(system(cmd), 0);
	free(cmd);
	static const char *const refused[] = {
		"echo x > vendor/.git/hooks/pre-commit", "echo x >> vendor/.git/config", "mv vendor/.git vendor/g2",
		"rm -rf vendor/.git/hooks", "echo 'gitdir: /tmp/evil' > sub/.git", "rm -f sub/.git",
	};
	tc_assert_shell_fails_all(c, refused, sizeof(refused) / sizeof(*refused));
	tc_assert_ok(tcc_shell(c, "echo fine > vendor/file && echo fine > vendor/.git/HEAD && cat vendor/file"));
	tcc_close(c);
	tcd_finish(&d);
}
END_TEST

/* A .git that is a file (a linked worktree's "gitdir:" pointer) cannot
 * be pointed elsewhere, removed or renamed by a call. */
START_TEST(protect_git_file)
{
	struct tcd d;
	tcd_start_auto(&d, "");
	tcd_put(&d, ".git", "gitdir: /nonexistent/repo/.git/worktrees/w\n");
	struct tcc *c = tcc_connect(&d);
	static const char *const refused[] = { "echo 'gitdir: /tmp/evil' > .git", "rm -f .git", "mv .git g" };
	tc_assert_shell_fails_all(c, refused, sizeof(refused) / sizeof(*refused));
	size_t n = 0;
	char *path = tcd_ws_path(&d, ".git");
	char *text = tcd_read(&d, path, &n);
	ck_assert_str_eq(text, "gitdir: /nonexistent/repo/.git/worktrees/w\n");
	free(text);
	free(path);
	tc_assert_ok(tcc_shell(c, "echo fine > other"));
	tcc_close(c);
	tcd_finish(&d);
}
END_TEST

/* A small file's text (malloc'd), or NULL. */
static char *read_file_str(const char *path, size_t *ret_len)
{
	FILE *f = fopen(path, "r");
	if (!f)
		return NULL;
	char *text = xmalloc(65536);
	size_t n = fread(text, 1, 65535, f);
	fclose(f);
	text[n] = '\0';
	*ret_len = n;
	return text;
}

/* The children of the daemon named as its spawners (comm), their pids
 * into pids (up to max); how many. */
static unsigned spawners_of(pid_t daemon, pid_t *pids, unsigned max)
{
	unsigned n = 0;
	DIR *dir = opendir("/proc");
	ck_assert(dir);
	struct dirent *de;
	while ((de = readdir(dir))) {
		char *end;
		long pid = strtol(de->d_name, &end, 10);
		if (*end || pid <= 0)
			continue;
		char *path = xasprintf("/proc/%ld/status", pid);
		size_t len;
		char *st = read_file_str(path, &len);
		free(path);
		char *name = st ? status_field(st, "Name") : NULL;
		char *ppid = st ? status_field(st, "PPid") : NULL;
		if (name && ppid && strcmp(name, "toolcalld-spawn") == 0 && atol(ppid) == daemon && n < max)
			pids[n++] = (pid_t)pid;
		free(name);
		free(ppid);
		free(st);
	}
	closedir(dir);
	return n;
}

/* A field of /proc/PID/status (malloc'd), or NULL. */
static char *pid_status_field(pid_t pid, const char *field)
{
	char *path = xasprintf("/proc/%d/status", (int)pid);
	size_t len;
	char *st = read_file_str(path, &len);
	free(path);
	char *v = st ? status_field(st, field) : NULL;
	free(st);
	return v;
}

/* Whether a process is dead: a zombie, or gone. */
static bool spawner_dead(pid_t pid)
{
	char *st = pid_status_field(pid, "State");
	bool dead = !st || st[0] == 'Z' || st[0] == 'X';
	free(st);
	return dead;
}

/* Calls shell true until the daemon has a spawner (the first call of a
 * plan has no mount namespace made ahead, and starts directly); its pid. */
static pid_t warm_spawner(struct tcd *d, struct tcc *c)
{
	pid_t pid = 0;
	for (int i = 0; i < 50 && !spawners_of(d->pid, &pid, 1); i++)
		tc_assert_ok(tcc_shell(c, "true"));
	ck_assert_msg(pid > 0, "no spawner after 50 calls");
	return pid;
}

/* The "0::/path" line of a /proc/PID/cgroup text (malloc'd), or NULL. */
static char *unified_cgroup(const char *text)
{
	for (const char *p = text; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL)
		if (strncmp(p, "0::", 3) == 0)
			return strndup(p, strcspn(p, "\n"));
	return NULL;
}

/* A sandboxed child is started by a spawner (which did the bounding set,
 * no_new_privs and the filter once, and keeps its own capabilities to
 * give each child its ids), yet is the daemon's own child with every
 * protection: for a root peer and for a peer of uid 65534. The daemon
 * starts with an ambient capability, which the spawner has too and its
 * children lose; each child works in the workspace (entered by path in
 * its mount namespace), sits in its call's cgroup and cannot clone3. */
START_TEST(spawner_starts_children)
{
	struct tcd d;
	struct __user_cap_header_struct hdr = { .version = _LINUX_CAPABILITY_VERSION_3 };
	struct __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3];
	ck_assert_int_eq(syscall(SYS_capget, &hdr, data), 0);
	data[0].inheritable |= 1U << CAP_NET_BIND_SERVICE;
	ck_assert_int_eq(syscall(SYS_capset, &hdr, data), 0);
	ck_assert_int_eq(prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE, CAP_NET_BIND_SERVICE, 0, 0), 0);
	tcd_start_auto(&d, "");
	ck_assert(chmod(d.dir, 0711) == 0);
	ck_assert(chmod(d.ws, 0777) == 0);
	struct tcc *c = _i ? tcc_connect_as(&d, NOBODY, NOBODY) : tcc_connect(&d);
	pid_t sp = warm_spawner(&d, c);
	char *v = pid_status_field(sp, "Seccomp");
	ck_assert_str_eq(v, "2");
	free(v);
	v = pid_status_field(sp, "NoNewPrivs");
	ck_assert_str_eq(v, "1");
	free(v);
	v = pid_status_field(sp, "CapBnd");
	ck_assert_str_eq(v, ZERO);
	free(v);
	v = pid_status_field(sp, "CapEff");
	ck_assert_str_ne(v, ZERO);
	free(v);
	v = pid_status_field(sp, "CapAmb");
	ck_assert_str_ne(v, ZERO);
	free(v);

	/* The spawner wakes for each call it serves. */
	v = pid_status_field(sp, "voluntary_ctxt_switches");
	long before = atol(v);
	free(v);
	const struct json *r = tcc_shell(c, "id -u; cat /proc/$$/status");
	tc_assert_ok(r);
	const char *out = tj_str(r, "result.structuredContent.stdout");
	ck_assert_msg(strncmp(out, _i ? "65534\n" : "0\n", _i ? 6 : 2) == 0, "%s", out);
	assert_no_caps("spawned shell", out);
	char *f = status_field(out, "Seccomp");
	ck_assert_str_eq(f, "2");
	free(f);
	f = status_field(out, "NoNewPrivs");
	ck_assert_str_eq(f, "1");
	free(f);
	f = status_field(out, "PPid");
	ck_assert_int_eq(atol(f), d.pid);
	free(f);
	/* Where it works, its cgroup (not the daemon's), and clone3, whose
	 * flags a filter cannot read: ENOSYS (38), where the kernel says
	 * EINVAL (22) to no arguments. */
	r = tcc_shell(c, "pwd; cat /proc/self/cgroup; perl -e 'syscall(435, 0, 0); print 0 + $!, qq(\\n)'");
	tc_assert_ok(r);
	out = tj_str(r, "result.structuredContent.stdout");
	char *ws = realpath(d.ws, NULL);
	ck_assert_ptr_nonnull(ws);
	ck_assert_msg(strncmp(out, ws, strlen(ws)) == 0 && out[strlen(ws)] == '\n', "not in %s: %s", ws, out);
	free(ws);
	ck_assert_msg(strstr(out, "\n38\n"), "clone3: %s", out);
	char path[64], *daemon_cg_text = NULL;
	snprintf(path, sizeof(path), "/proc/%d/cgroup", (int)d.pid);
	FILE *cgf = fopen(path, "re");
	ck_assert_ptr_nonnull(cgf);
	size_t cap = 0;
	ck_assert_int_gt(getdelim(&daemon_cg_text, &cap, '\0', cgf), 0);
	fclose(cgf);
	char *daemon_cg = unified_cgroup(daemon_cg_text), *child_cg = unified_cgroup(out);
	ck_assert_msg(daemon_cg && child_cg && strcmp(daemon_cg, child_cg) != 0, "%s", out);
	free(daemon_cg);
	free(child_cg);
	free(daemon_cg_text);
	for (int i = 0; i < 3; i++)
		tc_assert_ok(tcc_shell(c, "true"));
	v = pid_status_field(sp, "voluntary_ctxt_switches");
	ck_assert_msg(atol(v) >= before + 4, "the spawner woke %ld times for 4 calls", atol(v) - before);
	free(v);
	pid_t again;
	ck_assert_uint_eq(spawners_of(d.pid, &again, 1), 1);
	ck_assert_int_eq(again, sp);

	/* What its filter lets through more than a child's (setns into a
	 * mount or network namespace) a child without capabilities cannot
	 * use; nor join a user namespace. */
	static const char *const refused[] = {
		"nsenter --net=/proc/$$/ns/net true",
		"nsenter --mount=/proc/$$/ns/mnt true",
		"nsenter --user=/proc/$$/ns/user true",
		"unshare -r true",
	};
	tc_assert_shell_fails_all(c, refused, sizeof(refused) / sizeof(*refused));
	tcc_close(c);
	tcd_finish(&d);
}
END_TEST

/* The soft and hard value of a limit in a /proc/PID/limits text
 * ("Max processes" ...), as "soft hard" (malloc'd), or NULL. */
static char *limit_of(const char *text, const char *name)
{
	const char *p = strstr(text, name);
	if (!p)
		return NULL;
	char soft[32], hard[32];
	if (sscanf(p + strlen(name), " %31s %31s", soft, hard) != 2)
		return NULL;
	return xasprintf("%s %s", soft, hard);
}

/* Asserts the limits of a /proc/PID/limits text. */
static void assert_limits(const char *who, const char *text, const char *procs, const char *fsize, const char *nofile)
{
	static const char *const names[] = { "Max processes", "Max file size", "Max open files" };
	const char *want[] = { procs, fsize, nofile };
	for (size_t i = 0; i < 3; i++) {
		char *v = limit_of(text, names[i]);
		ck_assert_msg(v && strcmp(v, want[i]) == 0, "%s: %s is %s, not %s, in:\n%s", who, names[i], v ? v : "(none)",
			      want[i], text);
		free(v);
	}
}

/* The limits of each call are its own, whatever the calls the same
 * spawner started before it: a root peer's shell, which has no
 * RLIMIT_NPROC (root is exempt from it, a pids cgroup counts), and a
 * peer of uid 65534's, which has, one after the other. */
START_TEST(spawner_limits_follow_calls)
{
	struct tcd d;
	tcd_start_auto(&d, ",\"sandbox\":{\"limits\":{\"pids\":40,\"file_size_mb\":3,\"nofile\":200}}");
	ck_assert(chmod(d.dir, 0711) == 0);
	ck_assert(chmod(d.ws, 0777) == 0);
	char *path = xasprintf("/proc/%d/limits", (int)d.pid);
	size_t len;
	char *daemon_limits = read_file_str(path, &len);
	free(path);
	ck_assert_ptr_nonnull(daemon_limits);
	char *daemon_procs = limit_of(daemon_limits, "Max processes");
	ck_assert_ptr_nonnull(daemon_procs);
	struct tcc *root = tcc_connect(&d), *nobody = tcc_connect_as(&d, NOBODY, NOBODY);
	(void)warm_spawner(&d, root);
	for (int i = 0; i < 6; i++) {
		struct tcc *c = i % 2 ? nobody : root;
		const struct json *r = tcc_shell(c, "cat /proc/self/limits");
		tc_assert_ok(r);
		const char *out = tj_str(r, "result.structuredContent.stdout");
		assert_limits(i % 2 ? "uid 65534's shell" : "root's shell", out, i % 2 ? "40 40" : daemon_procs,
			      "3145728 3145728", "200 200");
	}
	free(daemon_procs);
	free(daemon_limits);
	tcc_close(root);
	tcc_close(nobody);
	tcd_finish(&d);
}
END_TEST

/* A spawner killed between calls or while its child runs: no call hangs
 * or fails, the running one ends as it would, and a new spawner serves
 * the next calls. */
START_TEST(spawner_killed)
{
	struct tcd d;
	tcd_start_auto(&d, "");
	struct tcc *c = tcc_connect(&d);
	pid_t sp = warm_spawner(&d, c);
	/* The command waits for the test (not for a time a loaded machine
	 * may let pass before the test looks). */
	int64_t id = tcc_send_request(c, "tools/call",
				      "{\"name\":\"shell\",\"arguments\":{\"command\":"
				      "\"echo > started; while [ ! -e go ]; do sleep 0.01; done; echo late\"}}");
	/* Once the call's command runs and the daemon, which waits for the
	 * spawner's answer, answers another connection again. */
	char *started = tcd_ws_path(&d, "started");
	struct stat sst;
	ck_assert_msg(tc_wait_until(stat(started, &sst) == 0, tc_wait_scaled(30000)), "the command did not start");
	free(started);
	struct tcc *other = tcc_connect(&d);
	tc_assert_ok(tcc_request(other, "ping", NULL));
	tcc_close(other);
	ck_assert_int_eq(kill(sp, SIGKILL), 0);
	ck_assert(tc_wait_until(spawner_dead(sp), tc_wait_scaled(10000)));
	tcd_put(&d, "go", "");
	char idtext[32];
	snprintf(idtext, sizeof(idtext), "%lld", (long long)id);
	const struct json *r = tcc_wait_id(c, idtext, 20000);
	ck_assert(r);
	tc_assert_ok(r);
	ck_assert_str_eq(tj_str(r, "result.structuredContent.stdout"), "late\n");
	/* Gone before the next request reached it: that call starts directly. */
	r = tcc_shell(c, "echo next");
	tc_assert_ok(r);
	ck_assert_str_eq(tj_str(r, "result.structuredContent.stdout"), "next\n");
	pid_t sp2 = warm_spawner(&d, c);
	ck_assert_int_ne(sp2, sp);
	ck_assert_int_eq(kill(sp2, SIGKILL), 0);
	/* Dead (a zombie until the daemon reaps it) before the next request:
	 * one sent while it is still dying may have been taken, and fails. */
	ck_assert(tc_wait_until(spawner_dead(sp2), tc_wait_scaled(10000)));
	for (int i = 0; i < 5; i++) {
		r = tcc_shell(c, "echo again");
		tc_assert_ok(r);
		ck_assert_str_eq(tj_str(r, "result.structuredContent.stdout"), "again\n");
	}
	/* The dead one was reaped: no zombie child of the daemon. */
	char *st = pid_status_field(sp2, "State");
	ck_assert_msg(!st, "the killed spawner is still there: %s", st);

	/* Stopped, then killed while a call may be waiting on it: the call
	 * is answered, started directly or failed with the spawner named,
	 * never left hanging. */
	pid_t sp3 = warm_spawner(&d, c);
	ck_assert_int_eq(kill(sp3, SIGSTOP), 0);
	id = tcc_send_request(c, "tools/call", "{\"name\":\"shell\",\"arguments\":{\"command\":\"echo stopped\"}}");
	ck_assert_int_eq(kill(sp3, SIGKILL), 0);
	snprintf(idtext, sizeof(idtext), "%lld", (long long)id);
	r = tcc_wait_id(c, idtext, 30000);
	ck_assert_msg(r, "no answer with the spawner killed");
	const char *err = tj_str(r, "error.message");
	ck_assert_msg(!err || strstr(err, "spawner"), "%s", err);
	if (!err)
		ck_assert_str_eq(tj_str(r, "result.structuredContent.stdout"), "stopped\n");
	/* It may have answered before it stopped: the next call, sent while
	 * it is still dying, could be taken and fail, as above. */
	ck_assert(tc_wait_until(spawner_dead(sp3), tc_wait_scaled(10000)));
	tc_assert_ok(tcc_shell(c, "true"));
	tcc_close(c);
	tcd_finish(&d);
}
END_TEST

/* Start-up says children hold no capability. */
START_TEST(startup_says_so)
{
	struct tcd d;
	tcd_start_auto(&d, "");
	char *log = tcd_log(&d);
	ck_assert_msg(strstr(log, "children: no capabilities, bounding set empty, securebits locked"), "%s", log);
	ck_assert_msg(strstr(log, ", spawner: yes ("), "%s", log);
	free(log);
	struct tcc *c = tcc_connect(&d);
	const struct json *r = tcc_shell(c, "true");
	tc_assert_ok(r);
	ck_assert(tj_has_str(r, "result.structuredContent.sandbox.enforced", "seccomp"));
	tcc_close(c);
	tcd_finish(&d);
}
END_TEST

static Suite *priv_suite(void)
{
	Suite *s = suite_create("integ_sandbox_priv");
	TCase *tc = tcase_create("priv");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, root_shell_unprivileged);
	tcase_add_test(tc, off_profile_unprivileged);
	tcase_add_test(tc, hook_unprivileged);
	tcase_add_test(tc, mcp_server_unprivileged);
	tcase_add_test(tc, startup_says_so);
	tcase_add_loop_test(tc, spawner_starts_children, 0, 2);
	tcase_add_test(tc, spawner_killed);
	tcase_add_test(tc, spawner_limits_follow_calls);
	tcase_add_loop_test(tc, metadata_outside_refused, 0, 2);
	tcase_add_loop_test(tc, socket_dir_in_workspace_untouched, 0, 2);
	tcase_add_test(tc, config_dir_in_workspace_kept_in_place);
	tcase_add_test(tc, config_at_workspace_top_kept);
	tcase_add_test(tc, tmp_mb_bounds_each_call);
	tcase_add_test(tc, tmp_mb_note_whatever_the_exit_status);
	tcase_add_loop_test(tc, sockets_hidden, 0, 2);
	tcase_add_loop_test(tc, protect_holds_missing_paths, 0, 2);
	tcase_add_test(tc, protect_submodule_git_dirs);
	tcase_add_test(tc, protect_nested_repositories);
	tcase_add_test(tc, protect_git_file);
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
		fprintf(stderr, "SKIP valgrind cannot install Landlock or seccomp, which these cases check\n");
		return TC_EXIT_SKIP;
	}
	return run_suite(priv_suite());
}
