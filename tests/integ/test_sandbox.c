/* SPDX-License-Identifier: MIT */
/*
 * The sandbox, black box through the socket: what start-up and
 * --check-config say the kernel enforces; shell as the peer (uid, owner of
 * what it writes, a root-only file refused, no mount namespace of its own
 * where the workspace has no protected paths, "/" listable); deny_read, writes outside the
 * workspace, TMPDIR, .git/hooks; network denied and allowed; processes
 * that left the call's group gone when it ends (cgroup and subreaper);
 * memory and process limits named; the daemon's own socket refusing a
 * sandboxed peer; option-like command arguments; an "off" tool shown in
 * tools/list. Built twice: the tests as another uid (needing root) make
 * their own executable (SANDBOX_AS_PEER), which exits 77 when not root.
 */
#include <check.h>
#include <errno.h>
#include <netinet/in.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <grp.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <sys/vfs.h>
#include <linux/magic.h>
#include <unistd.h>

#include "tests/integ/harness.h"
#include "tests/unit/check_main.h"


/* Starts a daemon with the sandbox config members (JSON members text,
 * may be empty) and $HOME in its temp dir, holding .ssh/id_rsa. */
static void start(struct tcd *d, const char *sandbox_members)
{
	char *cfg = xasprintf("{" TC_AUTO_CONFIRM ",\"sandbox\":{%s}}", sandbox_members);
	struct tcd_opts o = { .config = cfg };
	tcd_prepare(d, &o);
	char *home = tcd_home(d);
	char *ssh = xasprintf("%s/.ssh", home);
	char *key = xasprintf("%s/.ssh/id_rsa", home);
	ck_assert_int_eq(mkdir(ssh, 0755), 0);
	tc_write_file_atomic(key, "SECRET KEY\n", 11);
	ck_assert_int_eq(chmod(key, 0644), 0);
	tcd_spawn_home(d, &o);
	/* Other uids reach the socket and the workspace. */
	tcd_open_to_all(d);
	free(key);
	free(ssh);
	free(home);
	free(cfg);
}

#ifdef SANDBOX_AS_PEER
START_TEST(shell_runs_as_the_peer)
{
	struct passwd *pw = getpwnam("nobody");
	if (!pw) TC_SKIP("shell_runs_as_the_peer: no user nobody");
	struct tcd d;
	start(&d, "");
	free(tcd_write_ws(&d, "root-only", "root's\n", 7, 0600));
	struct tcc *c = tcc_connect_as(&d, pw->pw_uid, pw->pw_gid);
	const struct json *r = tcc_shell(c, "id -u; echo hi > mine");
	tc_assert_ok(r);
	char *want = xasprintf("%u\n", (unsigned)pw->pw_uid);
	ck_assert_str_eq(tj_str(r, "result.structuredContent.stdout"), want);
	free(want);
	char *mine = tcd_ws_path(&d, "mine");
	struct stat st;
	ck_assert_int_eq(stat(mine, &st), 0);
	ck_assert_int_eq(st.st_uid, pw->pw_uid);
	free(mine);
	r = tcc_shell(c, "cat root-only");
	ck_assert(tj_bool(r, "result.isError"));
	ck_assert_ptr_nonnull(strstr(tj_str(r, "result.structuredContent.stdout"), "Permission denied"));
	/* The child has a mount namespace of its own (everything but its
	 * writable paths read-only there), and "/" stays listable. */
	char *cmd;
	r = tcc_shell(c, "ls / | grep -qx usr && echo listed; readlink /proc/self/ns/mnt");
	tc_assert_ok(r);
	char own_ns[64] = "", *daemon_ns = xasprintf("/proc/%d/ns/mnt", (int)d.pid);
	ssize_t n = readlink(daemon_ns, own_ns, sizeof(own_ns) - 1);
	free(daemon_ns);
	ck_assert_int_gt(n, 0);
	char *listed = xasprintf("listed\n%s\n", own_ns);
	const char *out = tj_str(r, "result.structuredContent.stdout");
	ck_assert_msg(out && strncmp(out, "listed\n", 7) == 0, "%s", out ? out : "(none)");
	ck_assert_str_ne(out, listed);
	free(listed);
	/* An entry made since, beside the way to the TMPDIRs (the daemon's
	 * /var/tmp when it picked that), is reachable by the next call. */
	char *late = xasprintf("/var/tmp/tc-late-%d", (int)getpid());
	if (access("/var/tmp", W_OK) == 0) {
		tc_write_file_atomic(late, "late\n", 5);
		ck_assert_int_eq(chmod(late, 0644), 0);
		cmd = xasprintf("cat %s", late);
		r = tcc_shell(c, cmd);
		free(cmd);
		(void)unlink(late);
		tc_assert_ok(r);
		ck_assert_str_eq(tj_str(r, "result.structuredContent.stdout"), "late\n");
	}
	free(late);
	/* The daemon's environment is out of reach. */
	cmd = xasprintf("cat /proc/%d/environ", (int)d.pid);
	r = tcc_shell(c, cmd);
	free(cmd);
	ck_assert(tj_bool(r, "result.isError"));
	tcc_close(c);
	tcd_finish(&d);
}
END_TEST

/* Root is exempt from RLIMIT_NPROC: without a pids cgroup, the process
 * limit holds for a peer of another uid. */
START_TEST(pids_limit_named)
{
	struct passwd *pw = getpwnam("nobody");
	if (!pw) TC_SKIP("pids_limit_named: no user nobody");
	struct tcd d;
	start(&d, "\"limits\":{\"pids\":4}");
	struct tcc *c = tcc_connect_as(&d, pw->pw_uid, pw->pw_gid);
	const struct json *r = tcc_shell(c, "for i in 1 2 3 4 5 6 7 8; do sleep 5 & done; wait");
	ck_assert(tj_bool(r, "result.isError"));
	ck_assert_msg(strstr(tj_str(r, "result.content.0.text"), "process limit (4 processes)"), "%s",
		      tj_str(r, "result.content.0.text"));
	tcc_close(c);
	tcd_finish(&d);
}
END_TEST

#else
START_TEST(startup_says_what_is_enforced)
{
	struct tcd d;
	start(&d, "");
	char *log = tcd_log(&d);
	ck_assert_msg(strstr(log, "sandbox: ") && strstr(log, "cgroup v2 delegated: "), "%s", log);
	free(log);
	char *cfg = xasprintf("%s/config.json", d.dir);
	const char *argv[] = { tc_daemon_path(), "--config", cfg, "--check-config", NULL };
	char *out = NULL, *err = NULL;
	ck_assert_int_eq(tc_run(argv, NULL, NULL, &out, &err, 10000), 0);
	ck_assert_msg(strstr(out, "sandbox: ") || strstr(err, "sandbox: "), "out: %s\nerr: %s", out, err);
	free(out);
	free(err);
	free(cfg);
	tcd_finish(&d);
}
END_TEST


/*
 * A root daemon keeps its calls' TMPDIRs on a tmpfs mounted in a mount
 * namespace of its own: tmpfs as the daemon sees it (through
 * /proc/PID/root), the call's file gone, the mount not in this process's
 * namespace.
 */
static void tmpdir_on_private_tmpfs(struct tcd *d, const char *tmpfile)
{
	char *inside = xasprintf("/proc/%d/root%s", (int)d->pid, tmpfile);
	ck_assert_int_lt(access(inside, F_OK), 0);
	*strrchr(inside, '/') = '\0';
	*strrchr(inside, '/') = '\0';	/* the directory of the calls' TMPDIRs */
	struct statfs sf;
	ck_assert_msg(statfs(inside, &sf) == 0, "%s: %s", inside, strerror(errno));
	ck_assert_msg(sf.f_type == TMPFS_MAGIC, "%s is not on a tmpfs", inside);
	free(inside);
	const char *base = strstr(tmpfile, "/toolcalld.");
	ck_assert_ptr_nonnull(base);
	char *name = xstrndup(base, strcspn(base + 1, "/") + 1);
	char *mounts = tcd_read(d, "/proc/self/mountinfo", NULL);
	ck_assert_ptr_nonnull(mounts);
	ck_assert_msg(!strstr(mounts, name), "%s is mounted here too", name);
	free(mounts);
	free(name);
}

START_TEST(shell_file_system)
{
	struct tcd d;
	start(&d, "");
	struct tcc *c = tcc_connect(&d);
	const struct json *r = tcc_shell(c, "cat \"$HOME/.ssh/id_rsa\"");
	ck_assert(tj_bool(r, "result.isError"));
	ck_assert_ptr_null(strstr(tj_str(r, "result.structuredContent.stdout"), "SECRET"));
	ck_assert_msg(strstr(tj_str(r, "result.content.0.text"), "[sandbox]"), "%s", tj_str(r, "result.content.0.text"));
	ck_assert_str_eq(tj_str(r, "result.structuredContent.sandbox.profile"), "workspace-write");
	ck_assert(!tj_bool(r, "result.structuredContent.sandbox.network"));

	char *cmd = xasprintf("echo x > %s/outside", d.dir);
	r = tcc_shell(c, cmd);
	free(cmd);
	ck_assert(tj_bool(r, "result.isError"));
	char *outside = xasprintf("%s/outside", d.dir);
	ck_assert_int_lt(access(outside, F_OK), 0);
	free(outside);

	r = tcc_shell(c, "echo t > \"$TMPDIR/t\" && cat \"$TMPDIR/t\" && echo made > made && echo \"$TMPDIR/t\"");
	tc_assert_ok(r);
	ck_assert(!tj_bool(r, "result.isError"));
	char tmpfile[4096];
	ck_assert_int_eq(sscanf(tj_str(r, "result.structuredContent.stdout"), "t\n%4095s", tmpfile), 1);
	ck_assert_int_lt(access(tmpfile, F_OK), 0);
	if (geteuid() == 0)
		tmpdir_on_private_tmpfs(&d, tmpfile);
	char *made = tcd_read(&d, "made", NULL);
	ck_assert_str_eq(made, "made\n");
	free(made);

	/* .git/hooks and .git/config stay read-only; new files are fine. */
	tcd_put(&d, ".git/config", "[core]\n");
	tcd_put(&d, ".git/hooks/README", "hooks\n");
	r = tcc_shell(c, "echo evil > .git/hooks/pre-commit");
	ck_assert(tj_bool(r, "result.isError"));
	r = tcc_shell(c, "echo new > another && echo also > .git/notes");
	ck_assert(!tj_bool(r, "result.isError"));
	char *hook = tcd_ws_path(&d, ".git/hooks/pre-commit");
	ck_assert_int_lt(access(hook, F_OK), 0);
	free(hook);
	/* The calls' read-only binds stayed in their own namespaces: none
	 * reached the daemon's (nor, through it, this one). */
	char *hooks = tcd_ws_path(&d, ".git/hooks");
	char *where = xasprintf("/proc/%d/mountinfo", (int)d.pid);
	char *mounts = tcd_read(&d, where, NULL);
	ck_assert_ptr_nonnull(mounts);
	ck_assert_msg(!strstr(mounts, hooks), "%s is mounted in the daemon's namespace", hooks);
	free(mounts);
	mounts = tcd_read(&d, "/proc/self/mountinfo", NULL);
	ck_assert_msg(!strstr(mounts, hooks), "%s is mounted here", hooks);
	free(mounts);
	free(where);
	free(hooks);
	tcc_close(c);
	tcd_finish(&d);
}
END_TEST

START_TEST(shell_network)
{
	if (access("/usr/bin/socat", X_OK) < 0) TC_SKIP("shell_network: no socat");
	int ls = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(a);
	ck_assert_int_eq(bind(ls, (struct sockaddr *)&a, sizeof(a)), 0);
	ck_assert_int_eq(listen(ls, 16), 0);
	ck_assert_int_eq(getsockname(ls, (struct sockaddr *)&a, &len), 0);
	char *cmd = xasprintf("socat -u OPEN:/dev/null TCP:127.0.0.1:%d", ntohs(a.sin_port));

	struct tcd d;
	start(&d, "");
	struct tcc *c = tcc_connect(&d);
	const struct json *r = tcc_shell(c, cmd);
	ck_assert(tj_bool(r, "result.isError"));
	ck_assert_ptr_nonnull(strstr(tj_str(r, "result.content.0.text"), "no network access"));
	tcc_close(c);
	tcd_finish(&d);

	start(&d, "\"network\":true");
	c = tcc_connect(&d);
	r = tcc_shell(c, cmd);
	ck_assert_msg(!tj_bool(r, "result.isError"), "%s", tj_str(r, "result.content.0.text"));
	ck_assert(tj_bool(r, "result.structuredContent.sandbox.network"));
	tcc_close(c);
	tcd_finish(&d);
	free(cmd);
	close(ls);
}
END_TEST

/* A setsid'd process started by a call is gone once the call answered. */
static void escapee_gone(const char *sandbox_members)
{
	struct tcd d;
	start(&d, sandbox_members);
	struct tcc *c = tcc_connect(&d);
	const struct json *r = tcc_shell(c, "setsid sh -c 'echo $$ > pid; exec sleep 300' & while [ ! -s pid ]; do :; done");
	tc_assert_ok(r);
	char *pid_text = tcd_read(&d, "pid", NULL);
	ck_assert_ptr_nonnull(pid_text);
	pid_t pid = atoi(pid_text);
	free(pid_text);
	ck_assert_int_gt(pid, 1);
	/* Killed and reaped by the daemon: the pid is free. */
	bool gone = false;
	for (int i = 0; i < 200 && !gone; i++) {
		gone = kill(pid, 0) < 0 && errno == ESRCH;
		if (!gone)
			usleep(10000);
	}
	ck_assert_msg(gone, "process %d outlived its call", (int)pid);
	tcc_close(c);
	tcd_finish(&d);
}

START_TEST(setsid_gone_cgroup)
{
	escapee_gone("");
}
END_TEST

START_TEST(setsid_gone_subreaper)
{
	escapee_gone("\"cgroup\":\"\"");
}
END_TEST

START_TEST(memory_limit_named)
{
	struct tcd d;
	start(&d, "\"limits\":{\"memory_mb\":64}");
	struct tcc *c = tcc_connect(&d);
	const struct json *r = tcc_shell(c, "awk 'BEGIN { s = \"a\"; while (1) s = s s }'");
	ck_assert(tj_bool(r, "result.isError"));
	ck_assert_msg(strstr(tj_str(r, "result.content.0.text"), "memory limit (64 MB)"), "%s",
		      tj_str(r, "result.content.0.text"));
	tcc_close(c);
	tcd_finish(&d);
}
END_TEST


START_TEST(socket_refuses_sandboxed_peer)
{
	if (access("/usr/bin/socat", X_OK) < 0) TC_SKIP("socket_refuses_sandboxed_peer: no socat");
	struct tcd d;
	start(&d, "");
	struct tcc *c = tcc_connect(&d);
	char *cmd = xasprintf("printf '%%s\\n' '{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}' | "
			      "socat -t 3 - UNIX-CONNECT:%s 2>/dev/null; echo done", d.sock);
	const struct json *r = tcc_shell(c, cmd);
	free(cmd);
	ck_assert_str_eq(tj_str(r, "result.structuredContent.stdout"), "done\n");
	char *log = tcd_log(&d);
	ck_assert_msg(strstr(log, "sandboxed"), "%s", log);
	free(log);
	/* Still serving its real peers. */
	tc_assert_ok(tcc_request(c, "ping", NULL));
	tcc_close(c);
	tcd_finish(&d);
}
END_TEST

START_TEST(command_options_and_off_listed)
{
	struct tcd d;
	start(&d, "");
	tcd_write_tool(&d, "echo.json",
		       "{\"name\":\"echo_it\",\"kind\":\"command\",\"side_effects\":\"read\",\"argv\":[\"echo\",\"{{x}}\"],"
		       "\"input_schema\":{\"type\":\"object\",\"properties\":{\"x\":{\"type\":\"string\"}}}}");
	tcd_write_tool(&d, "raw.json",
		       "{\"name\":\"raw\",\"kind\":\"command\",\"side_effects\":\"read\",\"argv\":[\"true\"],"
		       "\"sandbox\":{\"profile\":\"off\"}}");
	struct tcc *c = tcc_connect(&d);
	tc_assert_ok(tcc_request(c, "admin/reload", NULL));
	const struct json *r = tcc_call(c, "echo_it", "{\"x\":\"--output=/elsewhere\"}");
	ck_assert_str_eq(tj_kind(r), "validation_error");
	r = tcc_call(c, "echo_it", "{\"x\":\"fine\"}");
	tc_assert_ok(r);
	ck_assert_str_eq(tj_str(r, "result.structuredContent.sandbox.profile"), "workspace-write");

	r = tcc_request(c, "tools/list", NULL);
	const struct json *tools = json_get(json_get(r, "result"), "tools");
	bool seen = false;
	for (size_t i = 0; tools && i < tools->u.arr.n; i++) {
		const struct json *t = tools->u.arr.items[i];
		if (!str_eq(json_str(json_get(t, "name")), "raw"))
			continue;
		seen = true;
		ck_assert_str_eq(json_str(json_get(json_get(t, "_meta"), "toolcalld/sandbox")), "off");
	}
	ck_assert(seen);
	tcc_close(c);
	tcd_finish(&d);
}
END_TEST

#endif

#ifndef SANDBOX_AS_PEER
/* Reads one "Name:\tvalue" line of /proc/pid/status (malloc'd). */
static char *proc_status(pid_t pid, const char *name)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	char *text = tcd_read(NULL, path, NULL);
	ck_assert_ptr_nonnull(text);
	char *line = strstr(text, name);
	ck_assert_ptr_nonnull(line);
	line += strlen(name);
	while (*line == ':' || *line == '\t' || *line == ' ')
		line++;
	char *r = strndup(line, strcspn(line, "\n"));
	free(text);
	return r;
}

/* An MCP server runs under the profile, and goes when its provider does. */
START_TEST(mcp_server_sandboxed)
{
	const char *server = getenv("TC_MCP_SERVER");
	if (!server) TC_SKIP("mcp_server_sandboxed: TC_MCP_SERVER is not set");
	struct tcd d;
	start(&d, "");
	char *decl = xasprintf("{ \"name\": \"demo\", \"kind\": \"mcp\", \"command\": [\"%s\"],"
			       "  \"prefix\": \"demo_\", \"side_effects\": \"read\","
			       /* A sanitizer build of the server maps terabytes of
			        * shadow memory: no address-space limit for it. */
			       "  \"sandbox\": {\"limits\": {\"memory_mb\": null}} }", server);
	tcd_write_tool(&d, "demo.json", decl);
	free(decl);
	struct tcc *c = tcc_connect(&d);
	tc_assert_ok(tcc_request(c, "admin/reload", NULL));
	const struct json *r = tcc_call(c, "demo_pid", "{}");
	tc_assert_ok(r);
	pid_t pid = atoi(tj_str(r, "result.content.0.text"));
	ck_assert_int_gt(pid, 1);
	char *nnp = proc_status(pid, "NoNewPrivs");
	char *seccomp = proc_status(pid, "Seccomp");
	ck_assert_str_eq(nnp, "1");
	ck_assert_str_eq(seccomp, "2");
	free(nnp);
	free(seccomp);

	r = tcc_request(c, "tools/list", NULL);
	const struct json *tools = json_get(json_get(r, "result"), "tools");
	for (size_t i = 0; tools && i < tools->u.arr.n; i++) {
		const struct json *t = tools->u.arr.items[i];
		if (str_eq(json_str(json_get(t, "name")), "demo_pid"))
			ck_assert_str_eq(json_str(json_get(json_get(t, "_meta"), "toolcalld/sandbox")), "workspace-write");
	}

	/* The provider goes: so does its server. */
	char *file = xasprintf("%s/demo.json", d.tools_dir);
	ck_assert_int_eq(unlink(file), 0);
	free(file);
	tc_assert_ok(tcc_request(c, "admin/reload", NULL));
	bool gone = false;
	for (int i = 0; i < 500 && !gone; i++) {
		gone = kill(pid, 0) < 0 && errno == ESRCH;
		if (!gone)
			usleep(10000);
	}
	ck_assert_msg(gone, "MCP server %d outlived its provider", (int)pid);
	tcc_close(c);
	tcd_finish(&d);
}
END_TEST
#endif

/* The stdout of a shell call, "" when none. */
static const char *out_of(const struct json *r)
{
	const char *o = tj_str(r, "result.structuredContent.stdout");
	return o ? o : "";
}

/* Whether text has a line that is line. */
static bool has_line(const char *text, const char *line)
{
	size_t n = strlen(line);
	for (const char *p = text; p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
		if (strncmp(p, line, n) == 0 && (p[n] == '\n' || !p[n]))
			return true;
	return false;
}

/* Starts a process of uid 65534 outside any sandbox that waits, for a
 * child to try its /proc entries. */
#ifdef SANDBOX_AS_PEER
static pid_t nobody_waiting(void)
{
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		if (setgroups(0, NULL) < 0 || setgid(65534) < 0 || setuid(65534) < 0)
			_exit(1);
		prctl(PR_SET_DUMPABLE, 1);
		execl("/bin/sleep", "sleep", "60", (char *)NULL);
		_exit(1);
	}
	return pid;
}
#endif

/*
 * The daemon's config, tools_dir, memory directory and audit log in a
 * directory beside 2,000 other entries (a config in /tmp): where the
 * child has a mount namespace (a root daemon's) each is covered there by
 * an empty read-only mount instead of costing a Landlock rule per
 * neighbour. The child can neither read nor list them, by their path or
 * through /proc/PID/root of a process outside its sandbox; its error
 * names the private path; a denied path made after the daemon started
 * (~/.aws between two calls) is unreadable at the next call. As root,
 * and (integ_sandbox_peer) as a peer of uid 65534.
 */
START_TEST(daemon_files_covered_in_a_crowd)
{
	TC_SKIP_UNDER_VALGRIND("valgrind cannot install Landlock or seccomp, which the covers are checked beside");
	struct tcd d;
	struct tcd_opts o = { .config = "{" TC_AUTO_CONFIRM ",\"audit_log\":\"@DIR@/audit.log\","
					"\"memory\":{\"dir\":\"@DIR@/memory\"}}" };
	tcd_prepare(&d, &o);
	for (int i = 0; i < 2000; i++) {
		char *f = xasprintf("%s/crowd-%d", d.dir, i);
		close(open(f, O_CREAT | O_WRONLY | O_CLOEXEC, 0644));
		free(f);
	}
	char *memory = xasprintf("%s/memory", d.dir), *audit = xasprintf("%s/audit.log", d.dir);
	ck_assert_int_eq(mkdir(memory, 0755), 0);
	char *mem_file = xasprintf("%s/m-secret", memory), *tool_file = xasprintf("%s/t-secret.txt", d.tools_dir);
	tc_write_file_atomic(mem_file, "MEMORY SECRET\n", 14);
	tc_write_file_atomic(tool_file, "TOOL SECRET\n", 12);
	tc_write_file_atomic(audit, "AUDIT SECRET\n", 13);
	/* Readable by their bits to any uid: only the sandbox keeps them. */
	const char *const open_paths[] = { d.config, d.tools_dir, memory, mem_file, tool_file, audit };
	for (size_t i = 0; i < ELEMENTSOF(open_paths); i++)
		ck_assert_int_eq(chmod(open_paths[i], i == 1 || i == 2 ? 0755 : 0644), 0);
	/* $HOME away from the crowd: its denied paths that do not exist
	 * (~/.ssh...) are split around, with each entry of the directories
	 * on their way. */
	char home_tmpl[] = "/var/tmp/tc-crowd-home-XXXXXX";
	ck_assert_ptr_nonnull(mkdtemp(home_tmpl));
	ck_assert_int_eq(chmod(home_tmpl, 0755), 0);
	char *home = xstrdup(home_tmpl), *env_home = xasprintf("HOME=%s", home);
	const char *env[] = { env_home, NULL };
	o.env = env;
	tcd_spawn(&d, &o);
	ck_assert_msg(tcd_wait_socket(&d, d.sock, TCD_START_TIMEOUT_MS) == 0, "%s", tcd_log(&d));
	tcd_open_to_all(&d);
	ck_assert_int_eq(chmod(audit, 0644), 0);
#ifdef SANDBOX_AS_PEER
	struct tcc *c = tcc_connect_as(&d, 65534, 65534);
	pid_t outside = nobody_waiting();
#else
	struct tcc *c = tcc_connect(&d);
	pid_t outside = d.pid;
#endif
	/* Read, listed, reached through another process's root. */
	char *cmd = xasprintf("cat '%s'; cat '%s'; ls -a '%s' '%s'; cat '%s' '%s'; cat /proc/%d/root'%s' "
			      "/proc/%d/root'%s'; true",
			      d.config, audit, d.tools_dir, memory, tool_file, mem_file, (int)outside, d.config,
			      (int)outside, tool_file);
	const struct json *r = tcc_shell(c, cmd);
	free(cmd);
	const char *out = out_of(r);
	ck_assert_msg(tj_str(r, "result.content.0.text"), "%s", tj_str(r, "error.message"));
	ck_assert_msg(!strstr(out, "socket_mode") && !strstr(out, "SECRET") && !has_line(out, "t-secret.txt") &&
		      !has_line(out, "m-secret"), "%s", out);
	/* The private paths were covered by mounts, not split around. */
	cmd = xasprintf("grep -c -e ' %s ' -e ' %s ' -e ' %s ' -e ' %s ' /proc/self/mountinfo", d.config, d.tools_dir,
			memory, audit);
	r = tcc_shell(c, cmd);
	free(cmd);
	ck_assert_msg(strcmp(out_of(r), "4\n") == 0, "%s / %s", out_of(r), tj_str(r, "error.message"));
	/* What the child's error names is said to be a private path. */
	cmd = xasprintf("cat '%s'", tool_file);
	r = tcc_shell(c, cmd);
	free(cmd);
	ck_assert(tj_bool(r, "result.isError"));
	char *want = xasprintf("%s (a private path, sandbox.deny_read)", tool_file);
	ck_assert_msg(strstr(tj_str(r, "result.content.0.text"), want), "%s", tj_str(r, "result.content.0.text"));
	free(want);
	cmd = xasprintf("cat '%s'", d.config);
	r = tcc_shell(c, cmd);
	free(cmd);
	ck_assert(tj_bool(r, "result.isError"));
	want = xasprintf("%s (a private path, sandbox.deny_read)", d.config);
	ck_assert_msg(strstr(tj_str(r, "result.content.0.text"), want), "%s", tj_str(r, "result.content.0.text"));
	free(want);
	/* Nor renamed away, removed or replaced: their directory is not
	 * the child's to change, and each is a mount point in its
	 * namespace. */
	cmd = xasprintf("mv '%s' '%s.x'; rm -rf '%s' '%s'; echo evil > '%s'; true", d.config, d.config, d.tools_dir,
			memory, audit);
	r = tcc_shell(c, cmd);
	free(cmd);
	char *cfg_text = tcd_read(&d, d.config, NULL), *audit_text = tcd_read(&d, audit, NULL);
	ck_assert_msg(cfg_text && strstr(cfg_text, "socket_mode"), "%s", out_of(r));
	ck_assert_msg(audit_text && !strstr(audit_text, "evil"), "%s", out_of(r));
	ck_assert_int_eq(access(tool_file, F_OK), 0);
	ck_assert_int_eq(access(mem_file, F_OK), 0);
	free(cfg_text), free(audit_text);
	/* Replaced between calls (a directory made again, a file written
	 * anew and renamed over): the mounts of a namespace made ahead for
	 * the old ones do not serve the next calls. */
	char *old_mem = xasprintf("%s.old", memory), *new_mem = xasprintf("%s/m-new", memory);
	ck_assert_int_eq(rename(memory, old_mem), 0);
	ck_assert_int_eq(mkdir(memory, 0755), 0);
	tc_write_file_atomic(new_mem, "NEW MEMORY SECRET\n", 18);
	ck_assert_int_eq(chmod(new_mem, 0644), 0);
	cfg_text = tcd_read(&d, d.config, NULL);
	tc_write_file_atomic(d.config, cfg_text, strlen(cfg_text));
	ck_assert_int_eq(chmod(d.config, 0644), 0);
	free(cfg_text);
	cmd = xasprintf("ls -a '%s'; cat '%s' '%s' /proc/self/root'%s'", memory, new_mem, d.config, d.config);
	for (int i = 0; i < 3; i++) {
		r = tcc_shell(c, cmd);
		ck_assert_msg(!strstr(out_of(r), "SECRET") && !has_line(out_of(r), "m-new") &&
			      !strstr(out_of(r), "socket_mode"), "%s", out_of(r));
	}
	free(cmd);
	free(old_mem), free(new_mem);
	/* ~/.aws, made after the daemon started: unreadable at the next
	 * call, and the one after (its plan kept). */
	char *aws = xasprintf("%s/.aws", home), *cred = xasprintf("%s/.aws/credentials", home);
	ck_assert_int_eq(mkdir(aws, 0755), 0);
	tc_write_file_atomic(cred, "AWS SECRET\n", 11);
	ck_assert_int_eq(chmod(cred, 0644), 0);
	cmd = xasprintf("cat '%s'; ls '%s'", cred, aws);
	for (int i = 0; i < 3; i++) {
		r = tcc_shell(c, cmd);
		ck_assert_msg(!strstr(out_of(r), "SECRET") && !has_line(out_of(r), "credentials"), "%s", out_of(r));
	}
	free(cmd);
	/* Removed and made again as a file between calls: still unreadable. */
	ck_assert_int_eq(unlink(cred), 0);
	ck_assert_int_eq(rmdir(aws), 0);
	tc_write_file_atomic(aws, "AWS FILE SECRET\n", 16);
	ck_assert_int_eq(chmod(aws, 0644), 0);
	cmd = xasprintf("cat '%s'", aws);
	for (int i = 0; i < 2; i++) {
		r = tcc_shell(c, cmd);
		ck_assert_msg(!strstr(out_of(r), "SECRET"), "%s", out_of(r));
	}
	free(cmd);
#ifdef SANDBOX_AS_PEER
	kill(outside, SIGKILL);
	waitpid(outside, NULL, 0);
#endif
	tcc_close(c);
	tcd_finish(&d);
	(void)unlink(aws);
	ck_assert_int_eq(rmdir(home), 0);
	free(aws), free(cred), free(home), free(env_home), free(memory), free(audit), free(mem_file), free(tool_file);
}
END_TEST

/* A call started in a private directory of the workspace (its cwd)
 * finds it empty: the child enters it again once the cover is mounted,
 * rather than keeping the directory beneath. */
START_TEST(started_in_a_covered_directory)
{
	TC_SKIP_UNDER_VALGRIND("valgrind cannot install Landlock or seccomp, which the covers are checked beside");
	struct tcd d;
	start(&d, "\"deny_read\":[\"@WS@/priv\"]");
	char *key = tcd_write_ws(&d, "priv/key", "PRIV SECRET\n", 12, 0644);
	char *priv = tcd_ws_path(&d, "priv");
	ck_assert_int_eq(chmod(priv, 0755), 0);
#ifdef SANDBOX_AS_PEER
	struct tcc *c = tcc_connect_as(&d, 65534, 65534);
#else
	struct tcc *c = tcc_connect(&d);
#endif
	for (int i = 0; i < 3; i++) {
		const struct json *r = tcc_call(c, "shell", "{\"command\":\"cat key; ls -a; cat ./key\",\"cwd\":\"priv\"}");
		const char *out = out_of(r);
		ck_assert_msg(!strstr(out, "SECRET") && !has_line(out, "key"), "%s / %s", out,
			      tj_str(r, "error.message") ? tj_str(r, "error.message") : "");
	}
	tcc_close(c);
	tcd_finish(&d);
	free(priv);
	free(key);
}
END_TEST

/* A background process outlives its call: a private file replaced while
 * it runs (an audit log rotated, a config saved anew) is no more
 * readable to it than the old one (Landlock keeps its private paths,
 * not a mount, which would stay with the old file). */
START_TEST(background_keeps_a_replaced_private_file)
{
	TC_SKIP_UNDER_VALGRIND("valgrind cannot install Landlock or seccomp, which the covers are checked beside");
	struct tcd d;
	start(&d, "\"deny_read\":[\"@DIR@/kept\"]");
	char *kept = xasprintf("%s/kept", d.dir);
	tc_write_file_atomic(kept, "OLD SECRET\n", 11);
	ck_assert_int_eq(chmod(kept, 0644), 0);
#ifdef SANDBOX_AS_PEER
	struct tcc *c = tcc_connect_as(&d, 65534, 65534);
#else
	struct tcc *c = tcc_connect(&d);
#endif
	char *cmd = xasprintf("echo ready; while [ ! -e go ]; do sleep 0.02; done; cat '%s'; echo end", kept);
	char *q = tj_quote(cmd);
	const struct json *r = tcc_call(c, "shell", tcc_fmt(c, "{\"command\":%s,\"background\":true,\"until\":"
							     "\"ready\",\"yield_ms\":60000}", q));
	free(q);
	free(cmd);
	const char *id = tj_str(r, "result.structuredContent.process_id");
	ck_assert_msg(id, "%s", tj_text(r));
	char *pid = xstrdup(id);
	tc_write_file_atomic(kept, "NEW SECRET\n", 11);
	ck_assert_int_eq(chmod(kept, 0644), 0);
	tcd_put(&d, "go", "");
	char *ws_go = tcd_ws_path(&d, "go");
	ck_assert_int_eq(chmod(ws_go, 0644), 0);
	free(ws_go);
	r = tcc_call(c, "process_io", tcc_fmt(c, "{\"process_id\":\"%s\",\"until\":\"end\",\"wait_ms\":20000}", pid));
	const char *o = tj_str(r, "result.structuredContent.output");
	ck_assert_msg(o && strstr(o, "end") && !strstr(o, "SECRET"), "%s", tj_text(r));
	free(pid);
	free(kept);
	tcc_close(c);
	tcd_finish(&d);
}
END_TEST

static Suite *sandbox_suite(void)
{
	Suite *s = suite_create("integ_sandbox");
	TCase *tc = tcase_create("sandbox");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, daemon_files_covered_in_a_crowd);
	tcase_add_test(tc, started_in_a_covered_directory);
	tcase_add_test(tc, background_keeps_a_replaced_private_file);
#ifdef SANDBOX_AS_PEER
	tcase_add_test(tc, shell_runs_as_the_peer);
	tcase_add_test(tc, pids_limit_named);
#else
	tcase_add_test(tc, startup_says_what_is_enforced);
	tcase_add_test(tc, shell_file_system);
	tcase_add_test(tc, shell_network);
	tcase_add_test(tc, setsid_gone_cgroup);
	tcase_add_test(tc, setsid_gone_subreaper);
	tcase_add_test(tc, memory_limit_named);
	tcase_add_test(tc, socket_refuses_sandboxed_peer);
	tcase_add_test(tc, command_options_and_off_listed);
	tcase_add_test(tc, mcp_server_sandboxed);
#endif
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
#ifdef SANDBOX_AS_PEER
	if (geteuid() != 0) {
		fprintf(stderr, "SKIP running a call as another uid needs root\n");
		return TC_EXIT_SKIP;
	}
#else
	if (getenv("TC_UNDER_VALGRIND")) {
		fprintf(stderr, "SKIP valgrind cannot install Landlock or seccomp, which these cases check\n");
		return TC_EXIT_SKIP;
	}
#endif
	return run_suite(sandbox_suite());
}
