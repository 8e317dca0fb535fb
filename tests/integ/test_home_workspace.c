/* SPDX-License-Identifier: MIT */
/*
 * A workspace that holds deny_read paths, as a home directory does (the
 * per-user install's workspace is $HOME): a sandboxed command may write at
 * its top like anywhere else in it, while the denied paths stay out of
 * reach, neither readable nor writable, nor renamed away.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tests/integ/harness.h"
#include "tests/unit/check_main.h"

#define CFG "{\"confirmation\":{\"default\":{\"execute\":\"auto\",\"write\":\"auto\"}}," \
	    "\"sandbox\":{\"deny_read\":[\"@WS@/.ssh\",\"@WS@/.netrc\"]}}"

START_TEST(home_workspace_top_is_writable)
{
	struct tcd d;
	struct tcd_opts o = { .config = CFG };
	tcd_prepare(&d, &o);
	tcd_put(&d, ".ssh/id", "secret-key");
	tcd_put(&d, ".netrc", "secret-token");
	tcd_spawn(&d, &o);
	ck_assert_int_eq(tcd_wait_socket(&d, d.sock, TCD_START_TIMEOUT_MS), 0);
	char *log = tcd_log(&d);
	bool ns = strstr(log, "landlock ABI") && strstr(log, "protect: mount namespace");
	free(log);
	if (!ns) {
		tcd_stop(&d);
		tcd_free(&d);
		TC_SKIP("the sandbox here has no Landlock or no mount namespace for calls");
	}

	struct tcc *c = tcc_connect(&d);
	const struct json *r = tcc_call(c, "shell", "{\"command\":\"echo b > top.txt && mkdir top && "
						     "echo c > top/x && echo wrote\"}");
	ck_assert_msg(tj_int(r, "result.structuredContent.exit_code") == 0, "%s", tj_text(r));
	ck_assert_str_eq(tj_str(r, "result.structuredContent.stdout"), "wrote\n");
	char *top = tcd_read(&d, "top.txt", NULL);
	ck_assert_str_eq(top, "b\n");
	free(top);
	/* write_file agrees. */
	tc_assert_ok(tcc_call(c, "write_file", "{\"path\":\"top2.txt\",\"content\":\"x\"}"));

	/* The denied paths: nothing read, nothing written, nothing moved. */
	r = tcc_call(c, "shell", "{\"command\":\"cat .ssh/id .netrc; ls -A .ssh; echo x > .ssh/new; echo y >> .netrc; "
				 "mv .ssh gone; rm -rf .ssh; true\"}");
	const char *out = tj_str(r, "result.structuredContent.stdout");
	ck_assert_msg(out && !strstr(out, "secret"), "%s", tj_text(r));
	char *id = tcd_read(&d, ".ssh/id", NULL);
	ck_assert_str_eq(id, "secret-key");
	free(id);
	char *netrc = tcd_read(&d, ".netrc", NULL);
	ck_assert_str_eq(netrc, "secret-token");
	free(netrc);
	char *fresh = tcd_ws_path(&d, ".ssh/new");
	ck_assert_int_ne(access(fresh, F_OK), 0);
	free(fresh);
	char *gone = tcd_ws_path(&d, "gone");
	ck_assert_int_ne(access(gone, F_OK), 0);
	free(gone);

	tcc_close(c);
	tcd_finish(&d);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("home_workspace");
	TCase *tc = tcase_create("home_workspace");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, home_workspace_top_is_writable);
	suite_add_tcase(s, tc);
	return run_suite(s);
}
