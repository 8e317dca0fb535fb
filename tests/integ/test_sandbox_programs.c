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
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tests/integ/harness.h"
#include "tests/unit/check_main.h"

#define AUTO "\"confirmation\":{\"default\":{\"write\":\"auto\",\"execute\":\"auto\",\"network\":\"auto\"}}"

static void put_exec(const char *path, const char *text)
{
	tc_write_file_atomic(path, text, strlen(text));
	ck_assert_int_eq(chmod(path, 0755), 0);
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
	char *hooks = tcd_ws_path(&d, "hooks");
	ck_assert_int_eq(mkdir(hooks, 0755), 0);
	char *script = tcd_ws_path(&d, "hooks/pre.sh");
	const char *text = "#!/bin/sh\necho '{\"decision\":\"allow\"}'\n";
	put_exec(script, text);
	struct tcc *c = tcc_connect(&d);
	tc_assert_ok(tcc_reload(c));
	assert_out_of_reach(&d, c, "hooks/pre.sh", text);
	tc_assert_ok(tcc_shell(c, "echo fine > hooks/other && echo fine > top"));
	tcc_close(c);
	free(script);
	free(hooks);
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
	char *bin = tcd_ws_path(&d, "bin");
	ck_assert_int_eq(mkdir(bin, 0755), 0);
	char *prog = tcd_ws_path(&d, "bin/lint");
	const char *text = "#!/bin/sh\necho linted\n";
	put_exec(prog, text);
	char *scripts = tcd_ws_path(&d, "scripts");
	ck_assert_int_eq(mkdir(scripts, 0755), 0);
	char *check = tcd_ws_path(&d, "scripts/check.sh");
	const char *check_text = "echo checked\n";
	put_exec(check, check_text);
	char *lint = xasprintf("{\"name\":\"lint\",\"kind\":\"command\",\"argv\":[\"%s\"],\"side_effects\":\"read\"}",
			       prog);
	tcd_write_tool(&d, "lint.json", lint);
	tcd_write_tool(&d, "check.json",
		       "{\"name\":\"check\",\"kind\":\"command\",\"argv\":[\"sh\",\"scripts/check.sh\"],"
		       "\"side_effects\":\"read\"}");
	struct tcc *c = tcc_connect(&d);
	tc_assert_ok(tcc_reload(c));
	const struct json *r = tcc_call(c, "lint", "{}");
	tc_assert_ok(r);
	ck_assert_str_eq(tj_str(r, "result.structuredContent.stdout"), "linted\n");
	assert_out_of_reach(&d, c, "bin/lint", text);
	assert_out_of_reach(&d, c, "scripts/check.sh", check_text);
	r = tcc_call(c, "check", "{}");
	tc_assert_ok(r);
	ck_assert_str_eq(tj_str(r, "result.structuredContent.stdout"), "checked\n");
	tc_assert_ok(tcc_shell(c, "echo fine > bin/other"));
	tcc_close(c);
	free(lint);
	free(check);
	free(scripts);
	free(prog);
	free(bin);
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
	char *dist = tcd_ws_path(&d, "dist");
	char *bin = tcd_ws_path(&d, "bin");
	ck_assert_int_eq(mkdir(dist, 0755), 0);
	ck_assert_int_eq(mkdir(bin, 0755), 0);
	char *prog = tcd_ws_path(&d, "dist/tool");
	const char *text = "#!/bin/sh\necho tooled\n";
	put_exec(prog, text);
	char *link = tcd_ws_path(&d, "bin/tool");
	ck_assert_int_eq(symlink("../dist/tool", link), 0);
	char *decl = xasprintf("{\"name\":\"tool\",\"kind\":\"command\",\"argv\":[\"%s\"],\"side_effects\":\"read\"}",
			       link);
	tcd_write_tool(&d, "tool.json", decl);
	struct tcc *c = tcc_connect(&d);
	tc_assert_ok(tcc_reload(c));
	assert_out_of_reach(&d, c, "dist/tool", text);
	tc_assert_kind(tcc_call(c, "write_file", "{\"path\":\"bin/tool\",\"content\":\"evil\\n\"}"),
		       "permission_denied");
	const struct json *r = tcc_call(c, "tool", "{}");
	tc_assert_ok(r);
	ck_assert_str_eq(tj_str(r, "result.structuredContent.stdout"), "tooled\n");
	tcc_close(c);
	free(decl);
	free(link);
	free(prog);
	free(bin);
	free(dist);
	tcd_finish(&d);
}
END_TEST

/* An MCP server started by sh running a script of the workspace (named
 * relative to it): the script is out of a call's reach. */
START_TEST(mcp_script_out_of_reach)
{
	struct tcd d;
	tcd_start(&d, "{" AUTO "}");
	char *dir = tcd_ws_path(&d, "mcp");
	ck_assert_int_eq(mkdir(dir, 0755), 0);
	char *script = tcd_ws_path(&d, "mcp/serve.sh");
	const char *text = "exec cat >/dev/null\n";
	put_exec(script, text);
	tcd_write_tool(&d, "demo.json",
		       "{\"name\":\"demo\",\"kind\":\"mcp\",\"command\":[\"sh\",\"mcp/serve.sh\"],"
		       "\"side_effects\":\"read\"}");
	struct tcc *c = tcc_connect(&d);
	tc_assert_ok(tcc_reload(c));
	assert_out_of_reach(&d, c, "mcp/serve.sh", text);
	tcc_close(c);
	free(script);
	free(dir);
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
	char *p = tcd_ws_path(d, rel);
	put_exec(p, text);
	ck_assert_int_eq(lchown(p, uid, uid), 0);
	ck_assert_int_eq(chmod(p, mode), 0);
	return p;
}

/* The call was refused for the program, the message naming the file and
 * why (needle). */
static void assert_refused(const struct json *r, const char *file, const char *needle)
{
	tc_assert_kind(r, "permission_denied");
	const char *m = tj_str(r, "error.message");
	ck_assert_msg(m && strstr(m, file) && strstr(m, needle), "message: %s", m ? m : "(none)");
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
	assert_refused(tcc_call(n, "list_dir", "{\"path\":\".\"}"), script, "is owned by uid 12345");
	assert_refused(tcc_call(n, "list_dir", "{\"path\":\".\"}"), script, "is owned by uid 12345");
	/* Logged, once for the same reason. */
	char *log = slurp(&d, d.log);
	const char *at = strstr(log, "warning: refused to run a program: program ");
	ck_assert_msg(at && strstr(at, script) && !strstr(at + 20, "refused to run a program"), "%s", log);
	free(log);
	ck_assert_int_eq(chown(script, NOBODY, NOBODY), 0);
	tc_assert_ok(tcc_call(n, "list_dir", "{\"path\":\".\"}"));
	ck_assert_int_eq(chown(script, 0, 0), 0);
	tc_assert_ok(tcc_call(n, "list_dir", "{\"path\":\".\"}"));
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
	char *bin = tcd_ws_path(&d, "bin");
	ck_assert_int_eq(mkdir(bin, 0755), 0);
	char *decl = xasprintf("{\"name\":\"say\",\"kind\":\"command\",\"argv\":[\"echo\",\"real\"],"
			       "\"env\":{\"PATH\":\"%s:/usr/local/bin:/usr/bin:/bin\"},\"side_effects\":\"read\"}", bin);
	tcd_write_tool(&d, "say.json", decl);
	struct tcc *root = tcc_connect(&d);
	tc_assert_ok(tcc_reload(root));
	tcc_close(root);
	struct tcc *n = tcc_connect_as(&d, NOBODY, NOBODY);
	const struct json *r = tcc_call(n, "say", "{}");
	tc_assert_ok(r);
	ck_assert_str_eq(tj_str(r, "result.structuredContent.stdout"), "real\n");
	char *shadow = put_owned(&d, "bin/echo", "#!/bin/sh\necho shadowed\n", OTHER, 0755);
	assert_refused(tcc_call(n, "say", "{}"), shadow, "is owned by uid 12345");
	ck_assert_int_eq(chown(shadow, 0, 0), 0);
	r = tcc_call(n, "say", "{}");
	tc_assert_ok(r);
	ck_assert_str_eq(tj_str(r, "result.structuredContent.stdout"), "shadowed\n");
	tcc_close(n);
	free(shadow);
	free(decl);
	free(bin);
	tcd_finish(&d);
}
END_TEST

/* A program reached through a link: the link replaced to lead to a file
 * of another uid is refused, and so is a link of another uid leading to
 * root's file; the link of root's to root's file runs. */
START_TEST(replaced_link_refused)
{
	if (geteuid() != 0)
		TC_SKIP("needs root to connect as uid %d", NOBODY);
	struct tcd d;
	start_shared(&d, "{" AUTO "}");
	char *dist = tcd_ws_path(&d, "dist");
	ck_assert_int_eq(mkdir(dist, 0755), 0);
	char *good = put_owned(&d, "dist/tool", "#!/bin/sh\necho tooled\n", 0, 0755);
	char *evil = put_owned(&d, "evil", "#!/bin/sh\necho evil\n", OTHER, 0755);
	char *link = tcd_ws_path(&d, "tool");
	ck_assert_int_eq(symlink("dist/tool", link), 0);
	char *decl = xasprintf("{\"name\":\"tool\",\"kind\":\"command\",\"argv\":[\"%s\"],\"side_effects\":\"read\"}",
			       link);
	tcd_write_tool(&d, "tool.json", decl);
	struct tcc *root = tcc_connect(&d);
	tc_assert_ok(tcc_reload(root));
	tcc_close(root);
	struct tcc *n = tcc_connect_as(&d, NOBODY, NOBODY);
	const struct json *r = tcc_call(n, "tool", "{}");
	tc_assert_ok(r);
	ck_assert_str_eq(tj_str(r, "result.structuredContent.stdout"), "tooled\n");
	/* Replaced, by root here: what it leads to is another uid's. */
	ck_assert_int_eq(unlink(link), 0);
	ck_assert_int_eq(symlink("evil", link), 0);
	assert_refused(tcc_call(n, "tool", "{}"), "evil", "is owned by uid 12345");
	/* The link another uid's, leading to root's file. */
	ck_assert_int_eq(unlink(link), 0);
	ck_assert_int_eq(symlink("dist/tool", link), 0);
	ck_assert_int_eq(lchown(link, OTHER, OTHER), 0);
	assert_refused(tcc_call(n, "tool", "{}"), "link", "is owned by uid 12345");
	tcc_close(n);
	free(decl);
	free(link);
	free(evil);
	free(good);
	free(dist);
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
	ck_assert_int_eq(mkdir(dir, 0755), 0);
	char *prog = put_owned(&d, "open/prog", "#!/bin/sh\necho ran\n", 0, 0775);
	char *decl = xasprintf("{\"name\":\"prog\",\"kind\":\"command\",\"argv\":[\"%s\"],\"side_effects\":\"read\"}",
			       prog);
	tcd_write_tool(&d, "prog.json", decl);
	struct tcc *root = tcc_connect(&d);
	tc_assert_ok(tcc_reload(root));
	tcc_close(root);
	struct tcc *n = tcc_connect_as(&d, NOBODY, NOBODY);
	assert_refused(tcc_call(n, "prog", "{}"), prog, "writable by group or other (mode 0775)");
	ck_assert_int_eq(chmod(prog, 0757), 0);
	assert_refused(tcc_call(n, "prog", "{}"), prog, "writable by group or other (mode 0757)");
	ck_assert_int_eq(chmod(prog, 0755), 0);
	ck_assert_int_eq(chmod(dir, 0777), 0);
	assert_refused(tcc_call(n, "prog", "{}"), dir, "writable by group or other (mode 0777)");
	ck_assert_int_eq(chmod(dir, 01777), 0);
	const struct json *r = tcc_call(n, "prog", "{}");
	tc_assert_ok(r);
	ck_assert_str_eq(tj_str(r, "result.structuredContent.stdout"), "ran\n");
	tcc_close(n);
	free(decl);
	free(prog);
	free(dir);
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
	char *dir = tcd_ws_path(&d, "scripts");
	ck_assert_int_eq(mkdir(dir, 0755), 0);
	char *script = put_owned(&d, "scripts/run.sh", "echo scripted\n", OTHER, 0644);
	tcd_write_tool(&d, "run.json",
		       "{\"name\":\"run\",\"kind\":\"command\",\"argv\":[\"sh\",\"scripts/run.sh\"],"
		       "\"side_effects\":\"read\"}");
	struct tcc *root = tcc_connect(&d);
	tc_assert_ok(tcc_reload(root));
	tcc_close(root);
	struct tcc *n = tcc_connect_as(&d, NOBODY, NOBODY);
	assert_refused(tcc_call(n, "run", "{}"), "scripts/run.sh", "is owned by uid 12345");
	ck_assert_int_eq(chown(script, 0, 0), 0);
	const struct json *r = tcc_call(n, "run", "{}");
	tc_assert_ok(r);
	ck_assert_str_eq(tj_str(r, "result.structuredContent.stdout"), "scripted\n");
	tcc_close(n);
	free(script);
	free(dir);
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
	struct tcc *root = tcc_connect(&d);
	tc_assert_ok(tcc_reload(root));
	tcc_close(root);
	struct tcc *n = tcc_connect_as(&d, NOBODY, NOBODY);
	const struct json *r = tcc_call(n, "demo_echo", "{}");
	tc_assert_kind(r, "permission_denied");
	const char *m = tj_str(r, "error.message");
	ck_assert_msg(m && strstr(m, "refused") && strstr(m, prog) && strstr(m, "is owned by uid 12345"), "%s",
		      tcc_raw(n, r));
	/* Not tried again at once: the same answer. */
	r = tcc_call(n, "demo_echo", "{}");
	tc_assert_kind(r, "permission_denied");
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
	suite_add_tcase(s, tc);
	tc = tcase_create("strict");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, hook_script_of_another_uid_refused);
	tcase_add_test(tc, path_shadow_refused);
	tcase_add_test(tc, replaced_link_refused);
	tcase_add_test(tc, writable_program_refused);
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
