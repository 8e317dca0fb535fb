/* SPDX-License-Identifier: MIT */
/*
 * Operations: --check-config refuses what would stop the daemon from
 * starting, with the words start-up uses; the default socket rule,
 * including the per-user fallback in /tmp, is the same in the daemon and
 * toolcallctl; admin/metrics answers strict OpenMetrics text, which
 * toolcallctl metrics prints.
 */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "proto/base/util.h"
#include "tests/integ/harness.h"
#include "tests/integ/openmetrics.h"
#include "tests/unit/check_main.h"
#include "version.h"

/* A scratch directory others may search (mode 0755), for runs as another uid. */
static char *scratch(void)
{
	char *dir = xstrdup("/tmp/tc-ops-XXXXXX");
	ck_assert(mkdtemp(dir));
	ck_assert(chmod(dir, 0755) == 0);
	return dir;
}

static void rm_rf(const char *dir)
{
	const char *argv[] = { "rm", "-rf", dir, NULL };
	tc_run(argv, NULL, NULL, NULL, NULL, 10000);
}

static void write_text(const char *path, const char *text)
{
	tc_write_file_atomic(path, text, strlen(text));
}

/* text with each @D@ replaced by dir, as a new string. */
static char *subst(const char *text, const char *dir)
{
	struct buf b = {};
	for (const char *p = text; *p;) {
		if (!strncmp(p, "@D@", 3)) {
			buf_puts(&b, dir);
			p += 3;
		} else {
			buf_putc(&b, *p++);
		}
	}
	return buf_steal(&b);
}

/*
 * Runs toolcalld with config text (@D@ replaced by dir) twice: with
 * --check-config, then to start; both must fail with status 1 and say
 * want (@D@ replaced too) on stderr. as_uid >= 0 runs them with that uid
 * and gid (setpriv; root only).
 */
static void both_refuse(const char *dir, const char *config, const char *want, long as_uid)
{
	_cleanup_free_ char *path = xasprintf("%s/config.json", dir);
	_cleanup_free_ char *text = subst(config, dir);
	_cleanup_free_ char *want_text = subst(want, dir);
	write_text(path, text);
	ck_assert(chmod(path, 0644) == 0);

	_cleanup_free_ char *uid = xasprintf("%ld", as_uid);
	for (int check = 1; check >= 0; check--) {
		const char *argv[16];
		size_t n = 0;
		if (as_uid >= 0) {
			argv[n++] = "setpriv";
			argv[n++] = "--reuid";
			argv[n++] = uid;
			argv[n++] = "--regid";
			argv[n++] = uid;
			argv[n++] = "--clear-groups";
		}
		argv[n++] = tc_daemon_path();
		if (check)
			argv[n++] = "--check-config";
		argv[n++] = "--config";
		argv[n++] = path;
		argv[n] = NULL;
		char *out = NULL, *err = NULL;
		int status = tc_run(argv, NULL, dir, &out, &err, 10000);
		ck_assert_msg(status == 1, "%s with %s: status %d (want 1), stderr: %s",
			      check ? "--check-config" : "start-up", config, status, err);
		ck_assert_msg(strstr(err, want_text), "%s with %s: stderr '%s' does not say '%s'",
			      check ? "--check-config" : "start-up", config, err, want_text);
		free(out);
		free(err);
	}
}

START_TEST(check_config_refuses_what_startup_refuses)
{
	_cleanup_free_ char *d = scratch();
	_cleanup_free_ char *file = xasprintf("%s/file", d);
	_cleanup_free_ char *ws = xasprintf("%s/ws", d);
	write_text(file, "x");
	ck_assert(mkdir(ws, 0755) == 0);

	both_refuse(d, "{\"workspace\":\"@D@/missing\",\"socket\":\"@D@/s.sock\"}",
		    "workspace @D@/missing: No such file or directory", -1);
	both_refuse(d, "{\"workspace\":\"@D@/file\",\"socket\":\"@D@/s.sock\"}",
		    "workspace @D@/file: Not a directory", -1);
	both_refuse(d, "{\"workspace\":\"@D@/ws\",\"socket\":\"@D@/s.sock\","
		       "\"workspaces\":{\"allowed\":[\"@D@/file\"]}}",
		    "workspaces.allowed: @D@/file: Not a directory", -1);
	both_refuse(d, "{\"workspace\":\"@D@/ws\",\"socket\":\"@D@/s.sock\","
		       "\"audit_log\":\"@D@/nodir/audit.jsonl\"}",
		    "audit log @D@/nodir/audit.jsonl: cannot create it in @D@/nodir: "
		    "No such file or directory", -1);
	both_refuse(d, "{\"workspace\":\"@D@/ws\",\"socket\":\"@D@/s.sock\",\"audit_log\":\"@D@/ws\"}",
		    "audit log @D@/ws: Is a directory", -1);
	both_refuse(d, "{\"workspace\":\"@D@/ws\",\"socket\":\"@D@/a/b/s.sock\"}",
		    "socket directory @D@/a/b: cannot create it: No such file or directory", -1);
	both_refuse(d, "{\"workspace\":\"@D@/ws\",\"socket\":\"@D@/file\"}",
		    "@D@/file: exists and is not a socket", -1);
	rm_rf(d);
}
END_TEST

/* Permissions: as root everything is readable, so these run as another
 * uid (root needed to become it), or as the test's own non-root uid. */
START_TEST(check_config_refuses_unreadable_and_unwritable)
{
	long uid = geteuid() == 0 ? 50000 + (long)(getpid() % 10000) : -1;
	_cleanup_free_ char *d = scratch();
	_cleanup_free_ char *closed = xasprintf("%s/closed", d);
	_cleanup_free_ char *ro = xasprintf("%s/ro", d);
	_cleanup_free_ char *ws = xasprintf("%s/ws", d);
	ck_assert(mkdir(closed, 0700) == 0 && chmod(closed, 0000) == 0);
	ck_assert(mkdir(ro, 0555) == 0);
	ck_assert(mkdir(ws, 0777) == 0 && chmod(ws, 0777) == 0);
	if (uid < 0 && access(closed, R_OK) == 0) {
		rm_rf(d);
		TC_SKIP("the file permissions do not bind this uid (CAP_DAC_OVERRIDE?)");
	}
	both_refuse(d, "{\"workspace\":\"@D@/closed\",\"socket\":\"@D@/ws/s.sock\"}",
		    "workspace @D@/closed: Permission denied", uid);
	both_refuse(d, "{\"workspace\":\"@D@/ws\",\"socket\":\"@D@/ws/s.sock\","
		       "\"audit_log\":\"@D@/ro/audit.jsonl\"}",
		    "audit log @D@/ro/audit.jsonl: cannot create it in @D@/ro: Permission denied", uid);
	both_refuse(d, "{\"workspace\":\"@D@/ws\",\"socket\":\"@D@/ro/s.sock\"}",
		    "socket directory @D@/ro: Permission denied", uid);
	chmod(closed, 0700);
	rm_rf(d);
}
END_TEST

START_TEST(check_config_ok_names_the_socket)
{
	_cleanup_free_ char *d = scratch();
	_cleanup_free_ char *path = xasprintf("%s/config.json", d);
	_cleanup_free_ char *cfg = xasprintf("{\"workspace\":\"%s\",\"socket\":\"%s/run/s.sock\","
					     "\"audit_log\":\"%s/audit.jsonl\","
					     "\"workspaces\":{\"allowed\":[\"%s/later\"]}}", d, d, d, d);
	write_text(path, cfg);
	const char *argv[] = { tc_daemon_path(), "--check-config", "--config", path, NULL };
	char *out = NULL, *err = NULL;
	int status = tc_run(argv, NULL, d, &out, &err, 10000);
	ck_assert_msg(status == 0, "status %d, stderr %s", status, err);
	_cleanup_free_ char *want = xasprintf("socket: %s/run/s.sock\n", d);
	ck_assert_msg(strstr(out, "configuration OK") && strstr(out, want), "stdout: %s", out);
	/* A root that does not exist yet is a warning, not a failure. */
	ck_assert_msg(strstr(err, "warning: workspaces.allowed:"), "stderr: %s", err);
	/* Nothing was created. */
	_cleanup_free_ char *run = xasprintf("%s/run", d);
	_cleanup_free_ char *audit = xasprintf("%s/audit.jsonl", d);
	ck_assert(access(run, F_OK) < 0 && access(audit, F_OK) < 0);
	free(out);
	free(err);
	rm_rf(d);
}
END_TEST

/* Runs prog (argv after the setpriv prefix for uid) with XDG_RUNTIME_DIR
 * and TOOLCALLD_SOCKET unset; returns its status. */
static int run_as(long uid, const char *const *args, char **out, char **err)
{
	_cleanup_free_ char *u = xasprintf("%ld", uid);
	const char *argv[16] = { "setpriv", "--reuid", u, "--regid", u, "--clear-groups" };
	size_t n = 6;
	for (; *args && n < 15; args++)
		argv[n++] = *args;
	argv[n] = NULL;
	const char *env[] = { "XDG_RUNTIME_DIR", "TOOLCALLD_SOCKET", NULL };
	return tc_run(argv, env, "/", out, err, 10000);
}

/* Without XDG_RUNTIME_DIR, a user who cannot write /run/toolcalld gets
 * /tmp/toolcalld-UID/toolcalld.sock from both programs; a directory of
 * that name that is open to others is refused by both. */
START_TEST(default_socket_fallback_for_users)
{
	if (geteuid() != 0)
		TC_SKIP("needs root to run the programs as a uid of its own choosing");
	long uid = 50000 + (long)(getpid() % 10000);
	_cleanup_free_ char *dir = xasprintf("/tmp/toolcalld-%ld", uid);
	_cleanup_free_ char *sock = xasprintf("%s/toolcalld.sock", dir);
	rm_rf(dir);

	const char *check[] = { tc_daemon_path(), "--check-config", "--workspace", "/", NULL };
	char *out = NULL, *err = NULL;
	ck_assert_int_eq(run_as(uid, check, &out, &err), 0);
	_cleanup_free_ char *want = xasprintf("socket: %s\n", sock);
	ck_assert_msg(strstr(out, want), "stdout: %s", out);
	free(out);
	free(err);

	/* The daemon makes the directory (0700) and listens there; toolcallctl
	 * finds it by the same rule. */
	_cleanup_free_ char *u = xasprintf("%ld", uid);
	struct tcd d;
	const char *wrapper[] = { "setpriv", "--reuid", u, "--regid", u, "--clear-groups", NULL };
	const char *args[] = { "--workspace", "/", NULL };
	const char *env[] = { "XDG_RUNTIME_DIR", NULL };
	struct tcd_opts o = { .no_config_flag = true, .wrapper = wrapper, .args = args, .env = env,
			      .no_wait = true, .cwd = "/" };
	tcd_prepare(&d, &o);
	tcd_spawn(&d, &o);
	ck_assert_msg(tcd_wait_socket(&d, sock, TCD_START_TIMEOUT_MS) == 0, "no socket at %s", sock);
	struct stat st;
	ck_assert(lstat(dir, &st) == 0 && S_ISDIR(st.st_mode));
	ck_assert_int_eq(st.st_mode & 0777, 0700);
	ck_assert_int_eq(st.st_uid, uid);
	const char *ping[] = { tc_ctl_path(), "ping", NULL };
	ck_assert_int_eq(run_as(uid, ping, NULL, NULL), 0);
	tcd_finish(&d);

	/* Open to others: both refuse, naming the directory. */
	ck_assert(chmod(dir, 0777) == 0);
	ck_assert_int_eq(run_as(uid, ping, NULL, &err), 3);
	ck_assert_msg(strstr(err, "not a private directory"), "toolcallctl: %s", err);
	free(err);
	ck_assert_int_eq(run_as(uid, check, NULL, &err), 1);
	ck_assert_msg(strstr(err, "not a private directory"), "toolcalld: %s", err);
	free(err);
	rm_rf(dir);
}
END_TEST

/* Checks text with the strict grammar, failing with the text on error. */
static void assert_openmetrics(const char *text)
{
	char err[512] = "";
	ck_assert_msg(om_check(text, err, sizeof(err)) == 0, "not OpenMetrics: %s\n%s", err, text);
}

START_TEST(metrics_are_strict_openmetrics)
{
	struct tcd d;
	tcd_start(&d, "{\"audit_log\":\"@DIR@/audit.jsonl\"}");
	tcd_put(&d, "a.txt", "hello\n");
	struct tcc *c = tcc_connect(&d);
	tc_assert_ok(tcc_call(c, "read_file", "{\"path\":\"a.txt\"}"));
	tc_assert_ok(tcc_call(c, "read_file", "{\"path\":\"a.txt\"}"));
	tc_assert_ok(tcc_call(c, "list_dir", "{}"));
	tcc_call(c, "read_file", "{\"path\":\"missing.txt\"}");
	tcc_call(c, "red_file", "{}");

	const struct json *r = tcc_request(c, "admin/metrics", NULL);
	tc_assert_ok(r);
	const char *text = tj_str(r, "result.text");
	ck_assert_ptr_nonnull(text);
	assert_openmetrics(text);
	ck_assert(om_value(text, "toolcalld_build_info", "{version=\"" TOOLCALLD_VERSION "\"}") == 1);
	ck_assert(om_value(text, "toolcalld_calls_total", "{tool=\"read_file\"}") == 3);
	ck_assert(om_value(text, "toolcalld_calls_total", "{tool=\"list_dir\"}") == 1);
	ck_assert(om_value(text, "toolcalld_call_errors_total",
			   "{tool=\"read_file\",kind=\"execution_error\"}") == 1);
	ck_assert(om_value(text, "toolcalld_call_errors_total",
			   "{tool=\"(unknown)\",kind=\"not_found\"}") == 1);
	ck_assert(om_value(text, "toolcalld_call_duration_seconds_count", "{tool=\"read_file\"}") == 3);
	ck_assert(om_value(text, "toolcalld_call_duration_seconds_bucket",
			   "{tool=\"read_file\",le=\"+Inf\"}") == 3);
	ck_assert(om_value(text, "toolcalld_call_duration_seconds_bucket",
			   "{tool=\"read_file\",le=\"600\"}") == 3);
	ck_assert(om_value(text, "toolcalld_calls_in_flight", "") == 0);
	ck_assert(om_value(text, "toolcalld_calls_queued", "") == 0);
	ck_assert(om_value(text, "toolcalld_connections_open", "") == 1);
	ck_assert(om_value(text, "toolcalld_tools", "") >= 5);
	ck_assert(om_value(text, "toolcalld_idempotency_entries", "") >= 0);
	ck_assert(om_value(text, "toolcalld_audit_lines_total", "") >= 0);

	/* toolcallctl metrics prints the text itself. */
	const char *argv[] = { tc_ctl_path(), "-s", d.sock, "metrics", NULL };
	char *out = NULL;
	ck_assert_int_eq(tc_run(argv, NULL, NULL, &out, NULL, 10000), 0);
	assert_openmetrics(out);
	ck_assert(om_value(out, "toolcalld_calls_total", "{tool=\"list_dir\"}") == 1);
	free(out);
	tcc_close(c);
	tcd_finish(&d);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("ops");
	TCase *tc = tcase_create("check_config");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, check_config_refuses_what_startup_refuses);
	tcase_add_test(tc, check_config_refuses_unreadable_and_unwritable);
	tcase_add_test(tc, check_config_ok_names_the_socket);
	suite_add_tcase(s, tc);
	tc = tcase_create("default_socket");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, default_socket_fallback_for_users);
	suite_add_tcase(s, tc);
	tc = tcase_create("metrics");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, metrics_are_strict_openmetrics);
	suite_add_tcase(s, tc);
	return run_suite(s);
}
