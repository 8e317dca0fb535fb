/* SPDX-License-Identifier: MIT */
/*
 * The file tools keep out of what sandbox.deny_read makes private, as the
 * sandbox keeps commands out of it: a private directory beneath the
 * workspace (the per-user install serves $HOME, which holds ~/.ssh) is
 * neither read, listed, searched, globbed, stat'ed nor written through
 * any tool, by its own path or through a symlink, for the daemon's own
 * user (file work done at once, on the loop) and for a peer of another
 * uid (file work on the pool, as the peer); search and glob count what
 * they passed over; the rest of the workspace is served as before.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tests/integ/harness.h"
#include "tests/unit/check_main.h"

#define NOBODY 65534

/* Asserts that the call was refused permission_denied. */
static void refused(struct tcc *c, const char *tool, const char *args)
{
	const struct json *r = tcc_call(c, tool, args);
	tc_assert_kind(r, "permission_denied");
	ck_assert_msg(!strstr(tcc_raw(c, r), "PRIVATE KEY"), "%s %s showed the key: %s", tool, args, tcc_raw(c, r));
}

static void private_paths_case(bool other_uid)
{
	struct tcd d;
	const char *env[] = { NULL, NULL };
	/* "~" is the peer's home: the daemon's $HOME, the workspace, for
	 * its own user; another uid's is its passwd entry's. */
	struct tcd_opts o = { .config = other_uid ? "{" TC_AUTO_CONFIRM ",\"sandbox\":{\"deny_read\":[\"@WS@/.ssh\",\"@WS@/keys/\"]}}"
						  : "{" TC_AUTO_CONFIRM ",\"sandbox\":{\"deny_read\":[\"~/.ssh\",\"@WS@/keys/\"]}}" };
	char *home = NULL;
	tcd_prepare(&d, &o);
	home = xasprintf("HOME=%s", d.ws);
	env[0] = home;
	o.env = env;
	tcd_spawn(&d, &o);
	ck_assert_msg(tcd_wait_socket(&d, d.sock, TCD_START_TIMEOUT_MS) == 0, "no socket");
	ck_assert(chmod(d.dir, 0711) == 0);
	ck_assert(chmod(d.ws, 0777) == 0);
	static const char *const dirs[] = { ".ssh", "keys", "open" };
	for (size_t i = 0; i < sizeof(dirs) / sizeof(*dirs); i++) {
		char *p = tcd_ws_path(&d, dirs[i]);
		ck_assert(mkdir(p, 0777) == 0 && chmod(p, 0777) == 0);
		free(p);
	}
	free(tcd_write_ws(&d, ".ssh/id_rsa", "-----BEGIN PRIVATE KEY-----\n", 28, 0644));
	free(tcd_write_ws(&d, "keys/deploy", "-----BEGIN PRIVATE KEY----- deploy\n", 35, 0644));
	free(tcd_write_ws(&d, "open/notes.txt", "PRIVATE KEY is a phrase here\n", 29, 0644));
	char *link = tcd_ws_path(&d, "open/key-link");
	ck_assert(symlink("../keys/deploy", link) == 0);
	free(link);
	struct tcc *c = other_uid ? tcc_connect_as(&d, NOBODY, NOBODY) : tcc_connect(&d);

	refused(c, "read_file", "{\"path\":\".ssh/id_rsa\"}");
	refused(c, "read_file", "{\"path\":\"keys/deploy\"}");
	refused(c, "read_file", "{\"path\":\"open/key-link\"}");
	refused(c, "read_file", "{\"path\":\"./open/../keys/deploy\"}");
	refused(c, "stat", "{\"path\":\".ssh/id_rsa\"}");
	refused(c, "list_dir", "{\"path\":\".ssh\"}");
	refused(c, "list_dir", "{\"path\":\"keys\"}");
	refused(c, "edit_file", "{\"path\":\"keys/deploy\",\"edits\":[{\"old\":\"deploy\",\"new\":\"x\"}],\"dry_run\":true}");
	refused(c, "search", "{\"pattern\":\"PRIVATE\",\"path\":\".ssh\"}");
	refused(c, "glob", "{\"pattern\":\"*\",\"path\":\"keys\"}");
	refused(c, "write_file", "{\"path\":\".ssh/authorized_keys\",\"content\":\"ssh-ed25519 AAAA evil\\n\"}");
	char *planted = tcd_ws_path(&d, ".ssh/authorized_keys");
	struct stat st;
	ck_assert_msg(lstat(planted, &st) < 0, "a file tool wrote into a private directory");
	free(planted);

	/* The refusal names the rule (on the pool; at once the kernel's
	 * word is enough). */
	const struct json *r = tcc_call(c, "read_file", "{\"path\":\"keys/deploy\"}");
	if (other_uid)
		ck_assert_msg(strstr(tj_str(r, "error.message"), "sandbox.deny_read"), "%s", tcc_raw(c, r));

	/* A search of the whole workspace finds the open file alone and
	 * says what it passed over. */
	r = tcc_call(c, "search", "{\"pattern\":\"PRIVATE\",\"hidden\":true,\"no_ignore\":true}");
	tc_assert_ok(r);
	ck_assert_str_eq(tj_str(r, "result.structuredContent.matches.0.path"), "open/notes.txt");
	ck_assert_ptr_null(tj(r, "result.structuredContent.matches.1"));
	ck_assert_int_eq(tj_int(r, "result.structuredContent.unreadable"), 2);
	ck_assert_msg(!strstr(tcc_raw(c, r), "BEGIN"), "%s", tcc_raw(c, r));
	r = tcc_call(c, "glob", "{\"pattern\":\"**/*\",\"hidden\":true,\"no_ignore\":true}");
	tc_assert_ok(r);
	ck_assert_msg(!strstr(tcc_raw(c, r), "id_rsa") && !strstr(tcc_raw(c, r), "deploy"), "%s", tcc_raw(c, r));
	ck_assert_int_eq(tj_int(r, "result.structuredContent.unreadable"), 2);

	/* A recursive listing names the private directories, not what
	 * they hold. */
	r = tcc_call(c, "list_dir", "{\"path\":\".\",\"recursive\":true}");
	tc_assert_ok(r);
	ck_assert_msg(!strstr(tcc_raw(c, r), "id_rsa") && !strstr(tcc_raw(c, r), "deploy"), "%s", tcc_raw(c, r));
	ck_assert_msg(strstr(tcc_raw(c, r), "notes.txt"), "%s", tcc_raw(c, r));
	ck_assert_int_eq(tj_int(r, "result.structuredContent.unreadable"), 2);

	/* The rest is served. */
	tc_assert_ok(tcc_call(c, "read_file", "{\"path\":\"open/notes.txt\"}"));
	tc_assert_ok(tcc_call(c, "write_file", "{\"path\":\"open/new.txt\",\"content\":\"x\"}"));
	tc_assert_ok(tcc_call(c, "stat", "{\"path\":\"open/key-link\"}"));
	tcc_close(c);
	free(home);
	tcd_finish(&d);
}

START_TEST(private_paths_out_of_reach_of_file_tools)
{
	if (_i == 1 && geteuid() != 0)
		TC_SKIP("needs root to connect as uid %d", NOBODY);
	private_paths_case(_i == 1);
}
END_TEST

static Suite *private_suite(void)
{
	Suite *s = suite_create("integ_file_private");
	TCase *tc = tcase_create("private");
	tcase_set_timeout(tc, 60);
	tcase_add_loop_test(tc, private_paths_out_of_reach_of_file_tools, 0, 2);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return run_suite(private_suite());
}
