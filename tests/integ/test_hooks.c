/* SPDX-License-Identifier: MIT */
/*
 * Call hooks, black-box through the socket of the real daemon: pre-call
 * hooks that allow (skipping confirmation), deny (the reason and the hook
 * in the message), force a prompt, rewrite the arguments (and a rewrite
 * the schema refuses), print nothing, print garbage, hang and crash (both
 * deny the call), and a post-call hook that is told the outcome. Each hook
 * is a /bin/sh script written into the daemon's temp dir.
 */
#include <check.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/integ/harness.h"
#include "tests/unit/check_main.h"

/* Starts a daemon whose list (pre_call, post_call) holds one hook running
 * script for the tools that match; timeout_ms 0: the default. */
static void start_hooked(struct tcd *d, const char *list, const char *match, const char *script,
			 int timeout_ms)
{
	char cfg[1024], t[64] = "";
	if (timeout_ms)
		snprintf(t, sizeof(t), ",\"timeout_ms\":%d", timeout_ms);
	snprintf(cfg, sizeof(cfg),
		 "{\"hooks\":{\"%s\":[{\"match\":\"%s\",\"command\":[\"/bin/sh\",\"@DIR@/hook.sh\"]%s}]}}",
		 list, match, t);
	tcd_start(d, cfg);
	char *path = xasprintf("%s/hook.sh", d->dir);
	tc_write_file_atomic(path, script, strlen(script));
	free(path);
	tcd_put(d, "a.txt", "alpha\n");
	tcd_put(d, "b.txt", "bravo\n");
}

static void stop_clean(struct tcd *d)
{
	ck_assert_int_eq(tcd_stop(d), 0);
	tcd_free(d);
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
	stop_clean(&d);
}
END_TEST

START_TEST(hook_deny_names_reason_and_hook)
{
	struct tcd d;
	start_hooked(&d, "pre_call", "read_*",
		     "cat > \"$(dirname \"$0\")/input.json\"\n"
		     "echo '{\"decision\":\"deny\",\"reason\":\"no reading today\"}'\n", 0);
	struct tcc *c = tcc_connect(&d);
	const struct json *r = tcc_call(c, "read_file", "{\"path\":\"a.txt\"}");
	tc_assert_kind(r, "permission_denied");
	const char *msg = tj_str(r, "error.message");
	ck_assert_ptr_nonnull(strstr(msg, "no reading today"));
	ck_assert_ptr_nonnull(strstr(msg, "pre_call hook 1"));
	ck_assert_ptr_nonnull(strstr(msg, "hook.sh"));

	/* The hook saw the call. */
	char *in = tcd_read(&d, tcc_fmt(c, "%s/input.json", d.dir), NULL);
	ck_assert_ptr_nonnull(in);
	const struct json *j = tcc_parse(c, in, strlen(in));
	ck_assert_str_eq(tj_str(j, "tool"), "read_file");
	ck_assert_str_eq(tj_str(j, "arguments.path"), "a.txt");
	ck_assert_str_eq(tj_str(j, "sideEffects"), "read");
	ck_assert_int_eq(tj_int(j, "peer.uid"), (int64_t)getuid());
	ck_assert(tj_int(j, "peer.pid") > 0);
	ck_assert_ptr_nonnull(tj_str(j, "sessionId"));
	ck_assert_ptr_nonnull(tj_str(j, "workspace"));
	free(in);

	/* Other tools do not match. */
	tc_assert_ok(tcc_call(c, "list_dir", "{\"path\":\".\"}"));
	tcc_close(c);
	stop_clean(&d);
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
	stop_clean(&d);
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
	stop_clean(&d);
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
	stop_clean(&d);
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
	stop_clean(&d);
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
	stop_clean(&d);
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

/* A call that goes away while its hook runs takes the hook with it. */
START_TEST(hook_stopped_with_its_call)
{
	struct tcd d;
	start_hooked(&d, "pre_call", "read_file", "echo $$ > \"$(dirname \"$0\")/pid\"; exec sleep 30\n", 0);
	struct tcc *c = tcc_connect(&d);
	tcc_send_request(c, "tools/call", "{\"name\":\"read_file\",\"arguments\":{\"path\":\"a.txt\"}}");
	const char *path = tcc_fmt(c, "%s/pid", d.dir);
	char *text = NULL;
	ck_assert(tc_wait_until((text = tcd_read(&d, path, NULL)) && strchr(text, '\n'), 5000));
	pid_t pid = (pid_t)atoi(text);
	free(text);
	ck_assert_int_gt(pid, 0);
	ck_assert_int_eq(kill(pid, 0), 0);
	tcc_close(c);
	ck_assert(tc_wait_until(kill(pid, 0) < 0, 5000));
	stop_clean(&d);
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
	stop_clean(&d);
}
END_TEST

START_TEST(hook_post_call_gets_outcome)
{
	struct tcd d;
	start_hooked(&d, "post_call", "read_file",
		     "cat > \"$(dirname \"$0\")/post.tmp\" && mv \"$(dirname \"$0\")/post.tmp\" "
		     "\"$(dirname \"$0\")/post.json\"\n", 0);
	struct tcc *c = tcc_connect(&d);
	tc_assert_ok(tcc_call(c, "read_file", "{\"path\":\"a.txt\"}"));
	const char *path = tcc_fmt(c, "%s/post.json", d.dir);
	char *out = NULL;
	ck_assert(tc_wait_until((out = tcd_read(&d, path, NULL)) != NULL, 5000));
	const struct json *j = tcc_parse(c, out, strlen(out));
	ck_assert_str_eq(tj_str(j, "hook"), "post_call");
	ck_assert_str_eq(tj_str(j, "tool"), "read_file");
	ck_assert_str_eq(tj_str(j, "outcome.kind"), "ok");
	ck_assert(!tj_bool(j, "outcome.isError"));
	ck_assert(tj_int(j, "outcome.durationMs") >= 0);
	ck_assert_ptr_nonnull(strstr(tj_str(j, "outcome.text"), "alpha"));
	free(out);
	tcc_close(c);
	stop_clean(&d);
}
END_TEST

START_TEST(hook_post_call_failure_only_reported)
{
	struct tcd d;
	start_hooked(&d, "post_call", "*", "exit 3\n", 0);
	struct tcc *c = tcc_connect(&d);
	tc_assert_ok(tcc_request(c, "events/subscribe", "{}"));
	tc_assert_ok(tcc_call(c, "read_file", "{\"path\":\"a.txt\"}"));
	const struct json *ev = NULL;
	uint64_t end = tc_now_ms() + 5000;
	while (!ev && tc_now_ms() < end) {
		const struct json *n = tcc_wait_notification(c, "notifications/event", 1000);
		if (n && tj_str(n, "params.type") && !strcmp(tj_str(n, "params.type"), "hook.failed"))
			ev = n;
	}
	ck_assert_ptr_nonnull(ev);
	ck_assert(resp_has(ev, "exited with status 3"));
	tcc_close(c);
	stop_clean(&d);
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
	stop_clean(&d);
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
	tcase_add_test(tc, hook_silent_is_no_opinion);
	tcase_add_test(tc, hook_garbage_denies);
	tcase_add_test(tc, hook_unknown_decision_denies);
	tcase_add_test(tc, hook_hang_denies);
	tcase_add_test(tc, hook_crash_denies);
	tcase_add_test(tc, hook_missing_program_denies);
	tcase_add_test(tc, hook_stopped_with_its_call);
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
