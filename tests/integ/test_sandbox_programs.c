/* SPDX-License-Identifier: MIT */
/*
 * What the config makes the daemon run later, where a workspace holds it,
 * is out of a call's reach, as the daemon's own files are: a hook's
 * script, a command tool's program and the script that an interpreter of
 * a command tool or of an MCP server runs are read-only to sandboxed
 * children (no write, no removal, no rename of what holds them) and
 * refused to write_file, while the rest of the workspace stays writable.
 * The socket and its directory are covered in every workspace the daemon
 * serves, not only its own: a root of workspaces.allowed holding them too.
 * The Redis store's socket, where a workspace holds it, is kept as the
 * daemon's own files are (a redis-server the test starts).
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tests/integ/harness.h"
#include "tests/unit/check_main.h"
#include "tests/unit/redis_server.h"

#define AUTO "\"confirmation\":{\"default\":{\"write\":\"auto\",\"execute\":\"auto\",\"network\":\"auto\"}}"

/* Writes an executable file (0755) at ws/rel, its directories made
 * (0755) where missing; returns its path (malloc'd). */
static char *put_ws_exec(struct tcd *d, const char *rel, const char *text)
{
	return tcd_write_ws(d, rel, text, strlen(text), 0755);
}

/* Makes the directory ws/rel (0755); returns its path (malloc'd). */
static char *make_ws_dir(struct tcd *d, const char *rel)
{
	char *p = tcd_ws_path(d, rel);
	ck_assert_int_eq(mkdir(p, 0755), 0);
	return p;
}

/* Declares the command tool name (side effects read) running argv, the
 * members of a JSON array (e.g. "\"sh\",\"run.sh\""). */
static void declare_command(struct tcd *d, const char *name, const char *argv)
{
	char *decl = xasprintf("{\"name\":\"%s\",\"kind\":\"command\",\"argv\":[%s],\"side_effects\":\"read\"}", name,
			       argv);
	char *file = xasprintf("%s.json", name);
	tcd_write_tool(d, file, decl);
	free(file);
	free(decl);
}

/* Declares the command tool name running the program at path. */
static void declare_program(struct tcd *d, const char *name, const char *path)
{
	char *q = tj_quote(path);
	declare_command(d, name, q);
	free(q);
}

/* A connection of root's after a reload of the tools. */
static struct tcc *connect_reloaded(struct tcd *d)
{
	struct tcc *c = tcc_connect(d);
	tc_assert_ok(tcc_reload(c));
	return c;
}

/* Calls tool (no arguments), which must succeed printing out. */
static void assert_prints(struct tcc *c, const char *tool, const char *out)
{
	const struct json *r = tcc_call(c, tool, "{}");
	tc_assert_ok(r);
	ck_assert_str_eq(tj_str(r, "result.structuredContent.stdout"), out);
}

static char *slurp(struct tcd *d, const char *path)
{
	char *t = tcd_read(d, path, NULL);
	return t ? t : xstrdup("");
}

/* Whether the protection holds at ws/rel, holding text: a sandboxed call
 * can neither write, remove, replace nor move it (or its directory), and
 * write_file is refused; the file is unchanged after. */
static void assert_out_of_reach(struct tcd *d, struct tcc *c, const char *rel, const char *text)
{
	char *dir = xstrdup(rel);
	char *slash = strrchr(dir, '/');
	if (slash)
		*slash = '\0';
	const char *const forms[] = {
		"echo evil >> '%1$s'", "printf '#!/bin/sh\\necho evil\\n' > '%1$s'", "rm -f '%1$s' && test ! -e '%1$s'",
		"mv '%1$s' moved && test ! -e '%1$s'", "chmod 777 '%1$s'",
	};
	for (size_t i = 0; i < sizeof(forms) / sizeof(*forms); i++) {
		char *cmd = xasprintf(forms[i], rel);
		tc_assert_shell_fails(c, cmd);
		free(cmd);
	}
	if (slash) {
		char *cmd = xasprintf("mv '%s' elsewhere && mkdir '%s'", dir, dir);
		tc_assert_shell_fails(c, cmd);
		free(cmd);
	}
	char *q = tj_quote(rel);
	const struct json *r = tcc_call(c, "write_file", tcc_fmt(c, "{\"path\":%s,\"content\":\"evil\\n\"}", q));
	tc_assert_kind(r, "permission_denied");
	free(q);
	char *p = tcd_ws_path(d, rel);
	char *now = slurp(d, p);
	ck_assert_str_eq(now, text);
	struct stat st;
	ck_assert_int_eq(stat(p, &st), 0);
	ck_assert_int_eq(st.st_mode & 07777, 0755);
	free(now);
	free(p);
	free(dir);
}

/* A pre_call hook whose script lies in the workspace (run by /bin/sh):
 * out of a call's reach once the config names it (made after the start,
 * picked up by a reload); the workspace's other files are writable. */
START_TEST(hook_script_out_of_reach)
{
	struct tcd d;
	tcd_start(&d, "{" AUTO ",\"hooks\":{\"pre_call\":[{\"match\":\"never_*\","
		      "\"command\":[\"/bin/sh\",\"@WS@/hooks/pre.sh\"]}]}}");
	const char *text = "#!/bin/sh\necho '{\"decision\":\"allow\"}'\n";
	free(put_ws_exec(&d, "hooks/pre.sh", text));
	struct tcc *c = connect_reloaded(&d);
	assert_out_of_reach(&d, c, "hooks/pre.sh", text);
	tc_assert_ok(tcc_shell(c, "echo fine > hooks/other && echo fine > top"));
	tcc_close(c);
	tcd_finish(&d);
}
END_TEST

/* A command tool whose program lies in the workspace, and one running a
 * script of the workspace with sh (named relative to the workspace): both
 * files out of a call's reach. */
START_TEST(command_programs_out_of_reach)
{
	struct tcd d;
	tcd_start(&d, "{" AUTO "}");
	const char *text = "#!/bin/sh\necho linted\n";
	char *prog = put_ws_exec(&d, "bin/lint", text);
	const char *check_text = "echo checked\n";
	free(put_ws_exec(&d, "scripts/check.sh", check_text));
	declare_program(&d, "lint", prog);
	declare_command(&d, "check", "\"sh\",\"scripts/check.sh\"");
	struct tcc *c = connect_reloaded(&d);
	assert_prints(c, "lint", "linted\n");
	assert_out_of_reach(&d, c, "bin/lint", text);
	assert_out_of_reach(&d, c, "scripts/check.sh", check_text);
	assert_prints(c, "check", "checked\n");
	tc_assert_ok(tcc_shell(c, "echo fine > bin/other"));
	tcc_close(c);
	free(prog);
	tcd_finish(&d);
}
END_TEST

/* A command tool's program named through a link of the workspace
 * (bin/tool -> ../dist/tool): the file it leads to is out of a call's
 * reach, and write_file refuses the link's name. */
START_TEST(program_through_link)
{
	struct tcd d;
	tcd_start(&d, "{" AUTO "}");
	const char *text = "#!/bin/sh\necho tooled\n";
	free(put_ws_exec(&d, "dist/tool", text));
	free(make_ws_dir(&d, "bin"));
	char *link = tcd_ws_path(&d, "bin/tool");
	ck_assert_int_eq(symlink("../dist/tool", link), 0);
	declare_program(&d, "tool", link);
	struct tcc *c = connect_reloaded(&d);
	assert_out_of_reach(&d, c, "dist/tool", text);
	tc_assert_kind(tcc_call(c, "write_file", "{\"path\":\"bin/tool\",\"content\":\"evil\\n\"}"),
		       "permission_denied");
	assert_prints(c, "tool", "tooled\n");
	tcc_close(c);
	free(link);
	tcd_finish(&d);
}
END_TEST

/* An MCP server started by sh running a script of the workspace (named
 * relative to it): the script is out of a call's reach. */
START_TEST(mcp_script_out_of_reach)
{
	struct tcd d;
	tcd_start(&d, "{" AUTO "}");
	const char *text = "exec cat >/dev/null\n";
	free(put_ws_exec(&d, "mcp/serve.sh", text));
	tcd_write_tool(&d, "demo.json",
		       "{\"name\":\"demo\",\"kind\":\"mcp\",\"command\":[\"sh\",\"mcp/serve.sh\"],"
		       "\"side_effects\":\"read\"}");
	struct tcc *c = connect_reloaded(&d);
	assert_out_of_reach(&d, c, "mcp/serve.sh", text);
	tcc_close(c);
	tcd_finish(&d);
}
END_TEST

/* The socket in a root of workspaces.allowed (not the daemon's own
 * workspace): a call in that workspace can neither list nor change its
 * directory, nor remove the socket. */
START_TEST(socket_covered_in_every_workspace)
{
	struct tcd d;
	const struct tcd_opts o = { .config = "{" AUTO ",\"workspaces\":{\"allowed\":[\"@DIR@/ws2\"]},"
					       "\"socket\":\"@DIR@/ws2/run/sock\"}" };
	tcd_prepare(&d, &o);
	char *ws2 = xasprintf("%s/ws2", d.dir);
	char *run_dir = xasprintf("%s/run", ws2);
	ck_assert_int_eq(mkdir(ws2, 0755), 0);
	ck_assert_int_eq(mkdir(run_dir, 0755), 0);
	free(d.sock);
	d.sock = xasprintf("%s/sock", run_dir);
	tcd_spawn(&d, &o);
	ck_assert_int_eq(tcd_wait_socket(&d, d.sock, TCD_START_TIMEOUT_MS), 0);
	struct tcc *c = tcc_connect(&d);
	char *q = tj_quote(ws2);
	tc_assert_ok(tcc_request(c, "initialize",
				 tcc_fmt(c, "{\"protocolVersion\":\"2025-06-18\",\"capabilities\":{},"
					    "\"clientInfo\":{\"name\":\"t\",\"version\":\"1\"},\"workspace\":%s}", q)));
	free(q);
	tc_assert_ok(tcc_shell(c, "echo fine > mine && test -f mine"));
	const char *const refused[] = { "ls run | grep -q sock", "rm run/sock",
					"chmod 777 run", "touch run/planted", "mv run run2" };
	tc_assert_shell_fails_all(c, refused, sizeof(refused) / sizeof(*refused));
	struct stat st;
	ck_assert_int_eq(lstat(d.sock, &st), 0);
	ck_assert(S_ISSOCK(st.st_mode));
	ck_assert_int_eq(stat(run_dir, &st), 0);
	ck_assert_int_eq(st.st_mode & 07777, 0755);
	tcc_close(c);
	free(run_dir);
	free(ws2);
	tcd_finish(&d);
}
END_TEST

/* The Redis store's socket in the workspace: a call can neither remove,
 * replace nor move it or its directory, nor plant a socket of its own
 * there for the daemon to take for the store, and the file tools refuse
 * both; the rest of the workspace stays writable and the store answers. */
START_TEST(redis_socket_out_of_reach)
{
	const char *why;
	if (!redis_server_available(&why))
		TC_SKIP("redis_socket_out_of_reach: %s", why);
	struct tcd d;
	const struct tcd_opts o = { .config = "{" AUTO ",\"store\":{\"kind\":\"redis\","
					       "\"address\":\"unix:@WS@/run/r.sock\"}}" };
	tcd_prepare(&d, &o);
	struct redis_server rs = {0};
	ck_assert_int_lt(snprintf(rs.dir, sizeof(rs.dir), "%s/run", d.ws), (int)sizeof(rs.dir));
	ck_assert_int_lt(snprintf(rs.sock, sizeof(rs.sock), "%s/r.sock", rs.dir), (int)sizeof(rs.sock));
	ck_assert_int_eq(mkdir(rs.dir, 0755), 0);
	redis_server_start(&rs);
	tcd_spawn(&d, &o);
	ck_assert_msg(tcd_wait_socket(&d, d.sock, TCD_START_TIMEOUT_MS) == 0, "%s", tcd_log(&d));
	struct tcc *c = tcc_connect(&d);
	tc_assert_ok(tcc_shell(c, "echo fine > mine && test -f mine"));
	const char *const refused[] = {
		"rm run/r.sock", "mv run/r.sock run/old", "mv run run2", "chmod 777 run",
		"touch run/planted",
		"python3 -c 'import socket; socket.socket(socket.AF_UNIX).bind(\"run/fake.sock\")'",
	};
	tc_assert_shell_fails_all(c, refused, sizeof(refused) / sizeof(*refused));
	tc_assert_kind(tcc_call(c, "write_file", "{\"path\":\"run/r.sock\",\"content\":\"x\"}"), "permission_denied");
	tc_assert_kind(tcc_call(c, "write_file", "{\"path\":\"run/planted\",\"content\":\"x\"}"), "permission_denied");
	tc_assert_kind(tcc_call(c, "delete_file", "{\"path\":\"run/r.sock\"}"), "permission_denied");
	tc_assert_kind(tcc_call(c, "move_file", "{\"from\":\"run\",\"to\":\"run2\"}"),
		       "permission_denied");
	struct stat st;
	ck_assert_int_eq(lstat(rs.sock, &st), 0);
	ck_assert(S_ISSOCK(st.st_mode));
	ck_assert_int_eq(stat(rs.dir, &st), 0);
	ck_assert_int_eq(st.st_mode & 07777, 0755);
	char *planted = tcd_ws_path(&d, "run/planted");
	ck_assert_int_ne(access(planted, F_OK), 0);
	free(planted);
	ck_assert(tj_bool(tcc_request(c, "admin/stats", NULL), "result.store.connected"));
	tcc_close(c);
	ck_assert_int_eq(tcd_stop(&d), 0);
	redis_server_free(&rs);
	tcd_free(&d);
}
END_TEST

/* ---- what runs is checked as ssh's StrictModes checks ------------------ */

#define NOBODY 65534
#define OTHER 12345	/* neither root, the daemon, nor the peer */

/* A daemon of root whose workspace is shared (sticky, writable by all),
 * for peers of uid NOBODY. */
static void start_shared(struct tcd *d, const char *config)
{
	char *cfg = xasprintf("{\"socket_mode\":\"0666\",%s", config + 1);
	tcd_start(d, cfg);
	free(cfg);
	ck_assert_int_eq(chmod(d->dir, 0711), 0);
	ck_assert_int_eq(chmod(d->ws, 01777), 0);
}

/* Writes an executable script at ws/rel owned by uid with mode. */
static char *put_owned(struct tcd *d, const char *rel, const char *text, uid_t uid, mode_t mode)
{
	char *p = put_ws_exec(d, rel, text);
	ck_assert_int_eq(lchown(p, uid, uid), 0);
	ck_assert_int_eq(chmod(p, mode), 0);
	return p;
}

/* A peer of uid NOBODY, connected once root reloaded the tools. */
static struct tcc *reload_then_connect_nobody(struct tcd *d)
{
	tcc_close(connect_reloaded(d));
	return tcc_connect_as(d, NOBODY, NOBODY);
}

/* The call was refused for the program, the message naming the file and
 * why (needle). */
static void assert_refused(const struct json *r, const char *file, const char *needle)
{
	tc_assert_kind(r, "permission_denied");
	const char *m = tj_str(r, "error.message");
	ck_assert_msg(m && strstr(m, file) && strstr(m, needle), "message: %s", m ? m : "(none)");
}

/* The tool's call (no arguments) is refused for the program. */
static void assert_call_refused(struct tcc *c, const char *tool, const char *file, const char *needle)
{
	assert_refused(tcc_call(c, tool, "{}"), file, needle);
}

/* A hook's script that another uid put where the config names it (it did
 * not exist before) is not run for the peer: its call is denied; once it
 * is root's, it runs. */
START_TEST(hook_script_of_another_uid_refused)
{
	if (geteuid() != 0)
		TC_SKIP("needs root to connect as uid %d", NOBODY);
	struct tcd d;
	start_shared(&d, "{" AUTO ",\"hooks\":{\"pre_call\":[{\"match\":\"list_dir\","
			 "\"command\":[\"@WS@/pre.sh\"]}]}}");
	char *script = put_owned(&d, "pre.sh", "#!/bin/sh\necho '{\"decision\":\"allow\"}'\n", OTHER, 0755);
	struct tcc *n = tcc_connect_as(&d, NOBODY, NOBODY);
	const char *list = "{\"path\":\".\"}";
	assert_refused(tcc_call(n, "list_dir", list), script, "is owned by uid 12345");
	assert_refused(tcc_call(n, "list_dir", list), script, "is owned by uid 12345");
	/* Logged, once for the same reason. */
	char *log = slurp(&d, d.log);
	const char *at = strstr(log, "warning: refused to run a program: program ");
	ck_assert_msg(at && strstr(at, script) && !strstr(at + 20, "refused to run a program"), "%s", log);
	free(log);
	ck_assert_int_eq(chown(script, NOBODY, NOBODY), 0);
	tc_assert_ok(tcc_call(n, "list_dir", list));
	ck_assert_int_eq(chown(script, 0, 0), 0);
	tc_assert_ok(tcc_call(n, "list_dir", list));
	tcc_close(n);
	free(script);
	tcd_finish(&d);
}
END_TEST

/* A program named without a slash, shadowed by a file of another uid in
 * an earlier directory of the PATH, is refused (not passed over); the
 * program it shadows ran before, and a shadow of root's runs. */
START_TEST(path_shadow_refused)
{
	if (geteuid() != 0)
		TC_SKIP("needs root to connect as uid %d", NOBODY);
	struct tcd d;
	start_shared(&d, "{" AUTO "}");
	char *bin = make_ws_dir(&d, "bin");
	char *decl = xasprintf("{\"name\":\"say\",\"kind\":\"command\",\"argv\":[\"echo\",\"real\"],"
			       "\"env\":{\"PATH\":\"%s:/usr/local/bin:/usr/bin:/bin\"},\"side_effects\":\"read\"}", bin);
	tcd_write_tool(&d, "say.json", decl);
	struct tcc *n = reload_then_connect_nobody(&d);
	assert_prints(n, "say", "real\n");
	char *shadow = put_owned(&d, "bin/echo", "#!/bin/sh\necho shadowed\n", OTHER, 0755);
	assert_call_refused(n, "say", shadow, "is owned by uid 12345");
	ck_assert_int_eq(chown(shadow, 0, 0), 0);
	assert_prints(n, "say", "shadowed\n");
	tcc_close(n);
	free(shadow);
	free(decl);
	free(bin);
	tcd_finish(&d);
}
END_TEST

/* Points the link at target, the link owned by root. */
static void relink(const char *link, const char *target)
{
	ck_assert_int_eq(unlink(link), 0);
	ck_assert_int_eq(symlink(target, link), 0);
}

/* A program reached through a link: the link replaced to lead to a file
 * of another uid is refused, and so is a link of another uid leading to
 * root's file; the link of root's to root's file runs. */
START_TEST(replaced_link_refused)
{
	if (geteuid() != 0)
		TC_SKIP("needs root to connect as uid %d", NOBODY);
	struct tcd d;
	start_shared(&d, "{" AUTO "}");
	free(put_owned(&d, "dist/tool", "#!/bin/sh\necho tooled\n", 0, 0755));
	free(put_owned(&d, "evil", "#!/bin/sh\necho evil\n", OTHER, 0755));
	char *link = tcd_ws_path(&d, "tool");
	ck_assert_int_eq(symlink("dist/tool", link), 0);
	declare_program(&d, "tool", link);
	struct tcc *n = reload_then_connect_nobody(&d);
	assert_prints(n, "tool", "tooled\n");
	/* Replaced, by root here: what it leads to is another uid's. */
	relink(link, "evil");
	assert_call_refused(n, "tool", "evil", "is owned by uid 12345");
	/* The link another uid's, leading to root's file. */
	relink(link, "dist/tool");
	ck_assert_int_eq(lchown(link, OTHER, OTHER), 0);
	assert_call_refused(n, "tool", "link", "is owned by uid 12345");
	tcc_close(n);
	free(link);
	tcd_finish(&d);
}
END_TEST

/* A program writable by group or other is refused, and so is one in a
 * directory writable by others without the sticky bit; the same program
 * runs once neither is so. */
START_TEST(writable_program_refused)
{
	if (geteuid() != 0)
		TC_SKIP("needs root to connect as uid %d", NOBODY);
	struct tcd d;
	start_shared(&d, "{" AUTO "}");
	char *dir = tcd_ws_path(&d, "open");
	char *prog = put_owned(&d, "open/prog", "#!/bin/sh\necho ran\n", 0, 0775);
	declare_program(&d, "prog", prog);
	struct tcc *n = reload_then_connect_nobody(&d);
	assert_call_refused(n, "prog", prog, "writable by group or other (mode 0775)");
	ck_assert_int_eq(chmod(prog, 0757), 0);
	assert_call_refused(n, "prog", prog, "writable by group or other (mode 0757)");
	ck_assert_int_eq(chmod(prog, 0755), 0);
	ck_assert_int_eq(chmod(dir, 0777), 0);
	assert_call_refused(n, "prog", dir, "writable by group or other (mode 0777)");
	ck_assert_int_eq(chmod(dir, 01777), 0);
	assert_prints(n, "prog", "ran\n");
	tcc_close(n);
	free(prog);
	free(dir);
	tcd_finish(&d);
}
END_TEST

/* A command tool's program made writable by its group between two calls
 * of the peer's is refused on the second, though the check of the first
 * was kept (its files older than the clock's tick by then: a few calls
 * over 100 ms, 2.1 s where the file system keeps whole seconds). */
START_TEST(program_made_writable_between_calls)
{
	if (geteuid() != 0)
		TC_SKIP("needs root to connect as uid %d", NOBODY);
	struct tcd d;
	start_shared(&d, "{" AUTO "}");
	char *prog = put_owned(&d, "bin/prog", "#!/bin/sh\necho ran\n", 0, 0755);
	declare_program(&d, "prog", prog);
	struct tcc *n = reload_then_connect_nobody(&d);
	struct stat st;
	ck_assert_int_eq(stat(prog, &st), 0);
	uint64_t wait_ms = st.st_ctim.tv_nsec ? 100 : 2100, t0 = mono_ms();
	do {
		assert_prints(n, "prog", "ran\n");
		usleep(20 * 1000);
	} while (mono_ms() - t0 < wait_ms);
	assert_prints(n, "prog", "ran\n");
	ck_assert_int_eq(chmod(prog, 0775), 0);
	assert_call_refused(n, "prog", prog, "writable by group or other (mode 0775)");
	ck_assert_int_eq(chmod(prog, 0755), 0);
	assert_prints(n, "prog", "ran\n");
	tcc_close(n);
	free(prog);
	tcd_finish(&d);
}
END_TEST

/* The script an interpreter runs (sh scripts/run.sh, named relative to
 * the workspace) is checked as a program is: another uid's is refused. */
START_TEST(interpreter_script_of_another_uid_refused)
{
	if (geteuid() != 0)
		TC_SKIP("needs root to connect as uid %d", NOBODY);
	struct tcd d;
	start_shared(&d, "{" AUTO "}");
	char *script = put_owned(&d, "scripts/run.sh", "echo scripted\n", OTHER, 0644);
	declare_command(&d, "run", "\"sh\",\"scripts/run.sh\"");
	struct tcc *n = reload_then_connect_nobody(&d);
	assert_call_refused(n, "run", "scripts/run.sh", "is owned by uid 12345");
	ck_assert_int_eq(chown(script, 0, 0), 0);
	assert_prints(n, "run", "scripted\n");
	tcc_close(n);
	free(script);
	tcd_finish(&d);
}
END_TEST

/* An MCP server whose program is another uid's is not started for the
 * peer: its call fails naming the file and why. */
START_TEST(mcp_program_of_another_uid_refused)
{
	if (geteuid() != 0)
		TC_SKIP("needs root to connect as uid %d", NOBODY);
	struct tcd d;
	start_shared(&d, "{" AUTO "}");
	char *prog = put_owned(&d, "serve", "#!/bin/sh\nexec cat >/dev/null\n", OTHER, 0755);
	char *decl = xasprintf("{\"name\":\"demo\",\"kind\":\"mcp\",\"prefix\":\"demo_\",\"command\":[\"%s\"],"
			       "\"side_effects\":\"read\"}", prog);
	tcd_write_tool(&d, "demo.json", decl);
	struct tcc *n = reload_then_connect_nobody(&d);
	const struct json *r = tcc_call(n, "demo_echo", "{}");
	tc_assert_kind(r, "permission_denied");
	const char *m = tj_str(r, "error.message");
	ck_assert_msg(m && strstr(m, "refused") && strstr(m, prog) && strstr(m, "is owned by uid 12345"), "%s",
		      tcc_raw(n, r));
	/* Not tried again at once: the same answer. */
	tc_assert_kind(tcc_call(n, "demo_echo", "{}"), "permission_denied");
	tcc_close(n);
	free(decl);
	free(prog);
	tcd_finish(&d);
}
END_TEST

static Suite *programs_suite(void)
{
	Suite *s = suite_create("integ_sandbox_programs");
	TCase *tc = tcase_create("programs");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, hook_script_out_of_reach);
	tcase_add_test(tc, command_programs_out_of_reach);
	tcase_add_test(tc, mcp_script_out_of_reach);
	tcase_add_test(tc, program_through_link);
	tcase_add_test(tc, socket_covered_in_every_workspace);
	tcase_add_test(tc, redis_socket_out_of_reach);
	suite_add_tcase(s, tc);
	tc = tcase_create("strict");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, hook_script_of_another_uid_refused);
	tcase_add_test(tc, path_shadow_refused);
	tcase_add_test(tc, replaced_link_refused);
	tcase_add_test(tc, writable_program_refused);
	tcase_add_test(tc, program_made_writable_between_calls);
	tcase_add_test(tc, interpreter_script_of_another_uid_refused);
	tcase_add_test(tc, mcp_program_of_another_uid_refused);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	if (getenv("TC_UNDER_VALGRIND")) {
		fprintf(stderr, "SKIP valgrind cannot install Landlock or seccomp, which each sandboxed call needs\n");
		return TC_EXIT_SKIP;
	}
	return run_suite(programs_suite());
}
