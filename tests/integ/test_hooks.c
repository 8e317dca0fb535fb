/* SPDX-License-Identifier: MIT */
/*
 * Call hooks, black-box through the socket of the real daemon: pre-call
 * hooks that allow (skipping confirmation), deny (the reason and the hook
 * in the message), force a prompt, rewrite the arguments (and a rewrite
 * the schema refuses), print nothing, print garbage, hang and crash (both
 * deny the call), and a post-call hook that is told the outcome. Hooks run
 * sandboxed read-only as the peer: one cannot write into the workspace (but
 * can into its TMPDIR), one run for another uid prints that uid. Each hook
 * is a /bin/sh script written into the daemon's temp dir; as it cannot
 * write there, it tells what it saw through its decision or exit status.
 */
#include <check.h>
#include <dirent.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tests/integ/harness.h"
#include "tests/unit/check_main.h"

/* Starts a daemon with the config members extra (text ending in ',', or
 * "") whose list (pre_call, post_call) holds one hook running script for
 * the tools that match; timeout_ms 0: the default. */
static void start_hooked_with(struct tcd *d, const char *extra, const char *list, const char *match,
			      const char *script, int timeout_ms)
{
	char cfg[1024], t[64] = "";
	if (timeout_ms)
		snprintf(t, sizeof(t), ",\"timeout_ms\":%d", timeout_ms);
	snprintf(cfg, sizeof(cfg),
		 "{%s\"hooks\":{\"%s\":[{\"match\":\"%s\",\"command\":[\"/bin/sh\",\"@DIR@/hook.sh\"]%s}]}}",
		 extra, list, match, t);
	tcd_start(d, cfg);
	char *path = xasprintf("%s/hook.sh", d->dir);
	tc_write_file_atomic(path, script, strlen(script));
	ck_assert_int_eq(chmod(path, 0644), 0);
	free(path);
	tcd_put(d, "a.txt", "alpha\n");
	tcd_put(d, "b.txt", "bravo\n");
}

static void start_hooked(struct tcd *d, const char *list, const char *match, const char *script,
			 int timeout_ms)
{
	start_hooked_with(d, "", list, match, script, timeout_ms);
}

/* The call's whole response as text, for substring checks. */
static bool resp_has(const struct json *r, const char *needle)
{
	char *t = tj_text(r);
	bool has = strstr(t, needle) != NULL;
	if (!has)
		fprintf(stderr, "no '%s' in %s\n", needle, t);
	free(t);
	return has;
}

START_TEST(hook_allow_skips_confirmation)
{
	struct tcd d;
	start_hooked(&d, "pre_call", "sh*", "cat >/dev/null; echo '{\"decision\":\"allow\"}'\n", 0);
	struct tcc *c = tcc_connect(&d);
	/* shell asks for confirmation by default; nobody would answer. */
	const struct json *r = tcc_call(c, "shell", "{\"command\":\"echo hooked\"}");
	tc_assert_ok(r);
	ck_assert(resp_has(r, "hooked"));
	tcc_close(c);
	tcd_finish(&d);
}
END_TEST

START_TEST(hook_deny_names_reason_and_hook)
{
	struct tcd d;
	/* The hook gives back its input inside its reason, escaped. */
	start_hooked(&d, "pre_call", "read_*",
		     "in=$(sed 's/[\\\\\"]/\\\\&/g')\n"
		     "printf '{\"decision\":\"deny\",\"reason\":\"no reading today %s\"}\\n' \"$in\"\n", 0);
	struct tcc *c = tcc_connect(&d);
	const struct json *r = tcc_call(c, "read_file", "{\"path\":\"a.txt\"}");
	tc_assert_kind(r, "permission_denied");
	const char *msg = tj_str(r, "error.message");
	ck_assert_ptr_nonnull(strstr(msg, "no reading today"));
	ck_assert_ptr_nonnull(strstr(msg, "pre_call hook 1"));
	ck_assert_ptr_nonnull(strstr(msg, "hook.sh"));

	/* The hook saw the call. */
	const char *in = strchr(strstr(msg, "no reading today"), '{');
	ck_assert_ptr_nonnull(in);
	const struct json *j = tcc_parse(c, in, strlen(in));
	ck_assert_str_eq(tj_str(j, "tool"), "read_file");
	ck_assert_str_eq(tj_str(j, "arguments.path"), "a.txt");
	ck_assert_str_eq(tj_str(j, "sideEffects"), "read");
	ck_assert_int_eq(tj_int(j, "peer.uid"), (int64_t)getuid());
	ck_assert(tj_int(j, "peer.pid") > 0);
	ck_assert_ptr_nonnull(tj_str(j, "sessionId"));
	ck_assert_ptr_nonnull(tj_str(j, "workspace"));

	/* Other tools do not match. */
	tc_assert_ok(tcc_call(c, "list_dir", "{\"path\":\".\"}"));
	tcc_close(c);
	tcd_finish(&d);
}
END_TEST

START_TEST(hook_prompt_forces_confirmation)
{
	struct tcd d;
	start_hooked(&d, "pre_call", "read_file", "echo '{\"decision\":\"prompt\"}'\n", 0);
	struct tcc *c = tcc_connect(&d);
	/* read is auto by default; with no approver a prompt is refused. */
	tc_assert_kind(tcc_call(c, "read_file", "{\"path\":\"a.txt\"}"), "user_denied");
	tcc_close(c);
	tcd_finish(&d);
}
END_TEST

START_TEST(hook_rewrites_arguments)
{
	struct tcd d;
	start_hooked(&d, "pre_call", "read_file",
		     "cat >/dev/null; echo '{\"decision\":\"allow\",\"arguments\":{\"path\":\"b.txt\"}}'\n", 0);
	struct tcc *c = tcc_connect(&d);
	const struct json *r = tcc_call(c, "read_file", "{\"path\":\"a.txt\"}");
	tc_assert_ok(r);
	ck_assert(resp_has(r, "bravo"));
	ck_assert(!resp_has(r, "alpha"));
	tcc_close(c);
	tcd_finish(&d);
}
END_TEST

START_TEST(hook_rewrite_validated)
{
	struct tcd d;
	start_hooked(&d, "pre_call", "read_file",
		     "echo '{\"decision\":\"allow\",\"arguments\":{\"path\":5}}'\n", 0);
	struct tcc *c = tcc_connect(&d);
	const struct json *r = tcc_call(c, "read_file", "{\"path\":\"a.txt\"}");
	tc_assert_kind(r, "validation_error");
	ck_assert_ptr_nonnull(strstr(tj_str(r, "error.message"), "rewritten by pre_call hook 1"));
	tcc_close(c);
	tcd_finish(&d);
}
END_TEST

/* A rewrite replaces the arguments whole: the timeout_ms it gives shell
 * is the call's limit, not the one the client sent. */
START_TEST(hook_rewritten_timeout_is_the_limit)
{
	struct tcd d;
	start_hooked(&d, "pre_call", "shell",
		     "cat >/dev/null; echo '{\"decision\":\"allow\",\"arguments\":"
		     "{\"command\":\"sleep 30\",\"timeout_ms\":300}}'\n", 0);
	struct tcc *c = tcc_connect(&d);
	uint64_t t0 = tc_now_ms();
	const struct json *r = tcc_call(c, "shell", "{\"command\":\"sleep 30\",\"timeout_ms\":60000}");
	tc_assert_kind(r, "timeout");
	/* The hook's 300 ms, not the client's 60 s (a generous bound). */
	ck_assert_uint_lt(tc_now_ms() - t0, 20000);
	tcc_close(c);
	tcd_finish(&d);
}
END_TEST

/* And the other way: a rewrite may give a call more time than the
 * client asked for. */
START_TEST(hook_rewrite_raises_the_limit)
{
	struct tcd d;
	start_hooked(&d, "pre_call", "shell",
		     "cat >/dev/null; echo '{\"decision\":\"allow\",\"arguments\":"
		     "{\"command\":\"sleep 1; echo done\",\"timeout_ms\":60000}}'\n", 0);
	struct tcc *c = tcc_connect(&d);
	const struct json *r = tcc_call(c, "shell", "{\"command\":\"sleep 1; echo done\",\"timeout_ms\":100}");
	tc_assert_ok(r);
	ck_assert(resp_has(r, "done"));
	tcc_close(c);
	tcd_finish(&d);
}
END_TEST

START_TEST(hook_silent_is_no_opinion)
{
	struct tcd d;
	start_hooked(&d, "pre_call", "*", "cat >/dev/null\n", 0);
	struct tcc *c = tcc_connect(&d);
	const struct json *r = tcc_call(c, "read_file", "{\"path\":\"a.txt\"}");
	tc_assert_ok(r);
	ck_assert(resp_has(r, "alpha"));
	/* No opinion leaves the policy's confirmation in force. */
	tc_assert_kind(tcc_call(c, "shell", "{\"command\":\"true\"}"), "user_denied");
	tcc_close(c);
	tcd_finish(&d);
}
END_TEST

/* A hook that fails in any way denies the call, naming itself and why. */
static void assert_fails_closed(const char *script, int timeout_ms, const char *why)
{
	struct tcd d;
	start_hooked(&d, "pre_call", "read_file", script, timeout_ms);
	struct tcc *c = tcc_connect(&d);
	const struct json *r = tcc_call(c, "read_file", "{\"path\":\"a.txt\"}");
	tc_assert_kind(r, "permission_denied");
	const char *msg = tj_str(r, "error.message");
	ck_assert_ptr_nonnull(strstr(msg, "pre_call hook 1"));
	if (!strstr(msg, why))
		ck_abort_msg("'%s' does not say '%s'", msg, why);
	tcc_close(c);
	tcd_finish(&d);
}

START_TEST(hook_garbage_denies)
{
	assert_fails_closed("echo hello\n", 0, "not a decision");
}
END_TEST

START_TEST(hook_unknown_decision_denies)
{
	assert_fails_closed("echo '{\"decision\":\"maybe\"}'\n", 0, "not a decision");
}
END_TEST

START_TEST(hook_hang_denies)
{
	uint64_t t0 = tc_now_ms();
	assert_fails_closed("exec sleep 30\n", 300, "timed out after 300 ms");
	ck_assert_uint_lt(tc_now_ms() - t0, 10000);
}
END_TEST

START_TEST(hook_crash_denies)
{
	assert_fails_closed("echo oops >&2; exit 1\n", 0, "exited with status 1: oops");
}
END_TEST

/* The pid of a process whose command line is exactly argv0 arg1, or 0. */
static pid_t find_process(const char *argv0, const char *arg1)
{
	DIR *dir = opendir("/proc");
	if (!dir)
		return 0;
	pid_t found = 0;
	struct dirent *e;
	while (!found && (e = readdir(dir))) {
		pid_t pid = (pid_t)atoi(e->d_name);
		if (pid <= 0)
			continue;
		char path[64], cmd[256];
		snprintf(path, sizeof(path), "/proc/%d/cmdline", (int)pid);
		FILE *f = fopen(path, "re");
		if (!f)
			continue;
		size_t n = fread(cmd, 1, sizeof(cmd) - 1, f);
		fclose(f);
		cmd[n] = 0;
		size_t l0 = strlen(argv0);
		if (n == l0 + strlen(arg1) + 2 && strcmp(cmd, argv0) == 0 && strcmp(cmd + l0 + 1, arg1) == 0)
			found = pid;
	}
	closedir(dir);
	return found;
}

/* A call that goes away while its hook runs takes the hook with it. */
START_TEST(hook_stopped_with_its_call)
{
	struct tcd d;
	/* A duration no other process sleeps for names the hook's process. */
	char arg[32];
	snprintf(arg, sizeof(arg), "30.%d", (int)getpid());
	char *script = xasprintf("exec sleep %s\n", arg);
	start_hooked(&d, "pre_call", "read_file", script, 0);
	free(script);
	struct tcc *c = tcc_connect(&d);
	tcc_send_request(c, "tools/call", "{\"name\":\"read_file\",\"arguments\":{\"path\":\"a.txt\"}}");
	pid_t pid = 0;
	ck_assert(tc_wait_until((pid = find_process("sleep", arg)) > 0, 5000));
	ck_assert_int_eq(kill(pid, 0), 0);
	tcc_close(c);
	ck_assert(tc_wait_until(kill(pid, 0) < 0, 5000));
	tcd_finish(&d);
}
END_TEST

START_TEST(hook_missing_program_denies)
{
	struct tcd d;
	tcd_start(&d, "{\"hooks\":{\"pre_call\":[{\"command\":[\"@DIR@/no-such-hook\"]}]}}");
	struct tcc *c = tcc_connect(&d);
	const struct json *r = tcc_call(c, "list_dir", "{\"path\":\".\"}");
	tc_assert_kind(r, "permission_denied");
	ck_assert_ptr_nonnull(strstr(tj_str(r, "error.message"), "could not start"));
	tcc_close(c);
	tcd_finish(&d);
}
END_TEST

/* Calls read_file on a.txt (subscribed to events first) and returns the
 * hook.failed event that follows, or NULL after 5 s. */
static const struct json *read_then_hook_failed(struct tcc *c)
{
	tc_assert_ok(tcc_request(c, "events/subscribe", "{}"));
	tc_assert_ok(tcc_call(c, "read_file", "{\"path\":\"a.txt\"}"));
	uint64_t end = tc_now_ms() + 5000;
	while (tc_now_ms() < end) {
		const struct json *n = tcc_wait_notification(c, "notifications/event", 1000);
		if (n && tj_str(n, "params.type") && !strcmp(tj_str(n, "params.type"), "hook.failed"))
			return n;
	}
	return NULL;
}

/* The hook cannot write anywhere the test reads, so it tells what it saw
 * by its exit status: 42 when its input held everything expected. */
START_TEST(hook_post_call_gets_outcome)
{
	struct tcd d;
	start_hooked(&d, "post_call", "read_file",
		     "in=$(cat)\n"
		     "for want in '\"hook\":\"post_call\"' '\"tool\":\"read_file\"' '\"kind\":\"ok\"' "
		     "'\"isError\":false' '\"durationMs\":' 'alpha'; do\n"
		     "  case \"$in\" in *\"$want\"*) ;; *) echo \"no $want\" >&2; exit 1;; esac\n"
		     "done\n"
		     "exit 42\n", 0);
	struct tcc *c = tcc_connect(&d);
	const struct json *ev = read_then_hook_failed(c);
	ck_assert_ptr_nonnull(ev);
	ck_assert(resp_has(ev, "exited with status 42"));
	tcc_close(c);
	tcd_finish(&d);
}
END_TEST

START_TEST(hook_post_call_failure_only_reported)
{
	struct tcd d;
	start_hooked(&d, "post_call", "*", "exit 3\n", 0);
	struct tcc *c = tcc_connect(&d);
	const struct json *ev = read_then_hook_failed(c);
	ck_assert_ptr_nonnull(ev);
	ck_assert(resp_has(ev, "exited with status 3"));
	tcc_close(c);
	tcd_finish(&d);
}
END_TEST

/* A hook runs read-only: it cannot write into the workspace (it finds the
 * path in its input), only into its own TMPDIR, and may still decide. */
START_TEST(hook_cannot_write_workspace)
{
	TC_SKIP_UNDER_VALGRIND("valgrind cannot install Landlock");
	struct tcd d;
	start_hooked(&d, "pre_call", "read_file",
		     "ws=$(sed -n 's/.*\"workspace\":\"\\([^\"]*\\)\".*/\\1/p')\n"
		     "[ -d \"$ws\" ] || { echo \"no workspace in the input\" >&2; exit 1; }\n"
		     "echo x > \"$TMPDIR/scratch\" || { echo \"TMPDIR is not writable\" >&2; exit 1; }\n"
		     "echo x > \"$ws/hooked\" 2>/dev/null\n"
		     "echo '{\"decision\":\"allow\"}'\n", 0);
	struct tcc *c = tcc_connect(&d);
	const struct json *r = tcc_call(c, "read_file", "{\"path\":\"a.txt\"}");
	tc_assert_ok(r);
	ck_assert(resp_has(r, "alpha"));
	char *hooked = tcd_ws_path(&d, "hooked");
	ck_assert_int_ne(access(hooked, F_OK), 0);
	free(hooked);
	tcc_close(c);
	tcd_finish(&d);
}
END_TEST

/* A hook runs as the peer that made the call. */
START_TEST(hook_runs_as_the_peer)
{
	if (geteuid() != 0)
		TC_SKIP("hook_runs_as_the_peer: connecting as another uid needs root");
	struct passwd *pw = getpwuid(65534);
	if (!pw)
		TC_SKIP("hook_runs_as_the_peer: no user 65534");
	struct tcd d;
	start_hooked_with(&d, "\"socket_mode\":\"0666\",", "pre_call", "list_dir",
			  "printf '{\"decision\":\"deny\",\"reason\":\"uid %s\"}\\n' \"$(id -u)\"\n", 0);
	ck_assert_int_eq(chmod(d.dir, 0711), 0);
	ck_assert_int_eq(chmod(d.ws, 0777), 0);
	struct tcc *c = tcc_connect_as(&d, pw->pw_uid, pw->pw_gid);
	const struct json *r = tcc_call(c, "list_dir", "{\"path\":\".\"}");
	tc_assert_kind(r, "permission_denied");
	char *want = xasprintf("uid %u", (unsigned)pw->pw_uid);
	ck_assert(resp_has(r, want));
	free(want);
	tcc_close(c);
	tcd_finish(&d);
}
END_TEST

START_TEST(hook_config_errors)
{
	struct tcd d;
	struct tcd_opts o = {
		.config = "{\"hooks\":{\"pre_call\":[{\"match\":\"*\",\"command\":[]}]}}",
		.no_wait = true,
	};
	tcd_start_opts(&d, &o);
	ck_assert_int_ne(tcd_wait_exit(&d, 5000), 0);
	char *log = tcd_log(&d);
	ck_assert_ptr_nonnull(strstr(log, "hooks.pre_call[0].command"));
	free(log);
	tcd_free(&d);
}
END_TEST

START_TEST(example_policy_script)
{
	const char *root = getenv("TC_SOURCE_ROOT");
	ck_assert_ptr_nonnull(root);
	struct tcd d;
	char cfg[1024];
	snprintf(cfg, sizeof(cfg),
		 "{\"confirmation\":{\"per_tool\":{\"shell\":\"auto\"}},\"hooks\":{\"pre_call\":"
		 "[{\"match\":\"shell\",\"command\":[\"%s/packaging/hooks/deny-dangerous-shell.sh\"]}]}}",
		 root);
	tcd_start(&d, cfg);
	struct tcc *c = tcc_connect(&d);
	const struct json *r = tcc_call(c, "shell", "{\"command\":\"rm -rf / --no-preserve-root\"}");
	tc_assert_kind(r, "permission_denied");
	ck_assert_ptr_nonnull(strstr(tj_str(r, "error.message"), "recursive removal"));
	r = tcc_call(c, "shell", "{\"command\":\"echo fine\"}");
	tc_assert_ok(r);
	ck_assert(resp_has(r, "fine"));
	tcc_close(c);
	tcd_finish(&d);
}
END_TEST

static Suite *hooks_suite(void)
{
	Suite *s = suite_create("integ_hooks");
	TCase *tc = tcase_create("pre_call");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, hook_allow_skips_confirmation);
	tcase_add_test(tc, hook_deny_names_reason_and_hook);
	tcase_add_test(tc, hook_prompt_forces_confirmation);
	tcase_add_test(tc, hook_rewrites_arguments);
	tcase_add_test(tc, hook_rewrite_validated);
	tcase_add_test(tc, hook_rewritten_timeout_is_the_limit);
	tcase_add_test(tc, hook_rewrite_raises_the_limit);
	tcase_add_test(tc, hook_silent_is_no_opinion);
	tcase_add_test(tc, hook_garbage_denies);
	tcase_add_test(tc, hook_unknown_decision_denies);
	tcase_add_test(tc, hook_hang_denies);
	tcase_add_test(tc, hook_crash_denies);
	tcase_add_test(tc, hook_missing_program_denies);
	tcase_add_test(tc, hook_stopped_with_its_call);
	tcase_add_test(tc, hook_cannot_write_workspace);
	tcase_add_test(tc, hook_runs_as_the_peer);
	suite_add_tcase(s, tc);

	tc = tcase_create("post_call_and_config");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, hook_post_call_gets_outcome);
	tcase_add_test(tc, hook_post_call_failure_only_reported);
	tcase_add_test(tc, hook_config_errors);
	tcase_add_test(tc, example_policy_script);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return run_suite(hooks_suite());
}
