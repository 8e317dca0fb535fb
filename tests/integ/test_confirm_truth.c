/* SPDX-License-Identifier: MIT */
/*
 * Confirmation shows the truth: the approver sees the whole input (a
 * 600-byte command in full on toolcallctl approve's terminal, with its
 * length), files as they resolve (NOTES.md -> .git/config), and a request
 * that ends unanswered (cancelled, timed out) is taken down by
 * tool.confirmation_resolved. Mode "sandboxed" asks for a call that will
 * not run sandboxed.
 */
#include <check.h>
#include <fcntl.h>
#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/integ/harness.h"
#include "tests/unit/check_main.h"

/* The params of the next notifications/event of a type, NULL on timeout. */
static struct tcc *approver(struct tcd *d)
{
	struct tcc *c = tcc_connect(d);
	tc_assert_ok(tcc_request(c, "events/subscribe",
				 "{\"types\":[\"tool.confirmation_requested\",\"tool.confirmation_resolved\"]}"));
	return c;
}

static const char *send_call(struct tcc *c, const char *tool, const char *args)
{
	int64_t id = tcc_send_request(c, "tools/call", tcc_fmt(c, "{\"name\":\"%s\",\"arguments\":%s}", tool, args));
	return tcc_fmt(c, "%lld", (long long)id);
}

/* Reads the terminal until needle shows up; fails after timeout_ms. */
static void term_wait(int master, struct buf *screen, const char *needle, int timeout_ms)
{
	uint64_t end = tc_now_ms() + (uint64_t)timeout_ms;
	while (!(buf_size(screen) && strstr(buf_head(screen), needle))) {
		uint64_t now = tc_now_ms();
		ck_assert_msg(now < end, "'%s' never appeared on the terminal; it shows:\n%s", needle,
			      buf_size(screen) ? buf_head(screen) : "");
		struct pollfd p = { .fd = master, .events = POLLIN };
		poll(&p, 1, (int)(end - now));
		char tmp[4096];
		ssize_t n = read(master, tmp, sizeof(tmp));
		if (n > 0)
			buf_append(screen, tmp, (size_t)n);
	}
}

START_TEST(long_command_shown_whole_on_a_terminal)
{
	struct tcd d;
	tcd_start(&d, NULL);
	int master;
	pid_t pid = forkpty(&master, NULL, NULL, NULL);
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		execl(tc_ctl_path(), "toolcallctl", "-s", d.sock, "approve", (char *)NULL);
		_exit(127);
	}
	fcntl(master, F_SETFL, O_NONBLOCK);
	struct tcc *c = tcc_connect(&d);

	/* 600 bytes: "echo " and 591 'a's and "TAIL". */
	char command[601];
	memcpy(command, "echo ", 5);
	memset(command + 5, 'a', 591);
	memcpy(command + 596, "TAIL", 5);
	ck_assert_uint_eq(strlen(command), 600);

	/* approve needs a moment to subscribe: until then the call fails at once. */
	const char *id = NULL;
	uint64_t end = tc_now_ms() + 5000;
	for (;;) {
		id = send_call(c, "shell", tcc_fmt(c, "{\"command\":\"%s\"}", command));
		if (tcc_quiet(c, 300))
			break;
		tc_assert_kind(tcc_wait_id(c, id, 1000), "user_denied");
		ck_assert_msg(tc_now_ms() < end, "approve never subscribed");
		tc_pause_ms(TC_POLL_MS);
	}
	struct buf screen = {};
	term_wait(master, &screen, "[y]es/[n]o/[a]lways: ", 5000);
	const char *shown = tcc_fmt(c, "command (600 bytes): %s\r\n", command);
	ck_assert_msg(strstr(buf_head(&screen), shown), "the command is not shown whole:\n%s", buf_head(&screen));
	ck_assert_ptr_null(strstr(buf_head(&screen), "..."));
	ck_assert_ptr_null(strstr(buf_head(&screen), "…"));
	ck_assert_int_eq(write(master, "n\r", 2), 2);
	tc_assert_kind(tcc_wait_id(c, id, 5000), "user_denied");

	kill(pid, SIGINT);
	int status;
	tc_wait_until(waitpid(pid, &status, WNOHANG) != 0, 2000);
	kill(pid, SIGKILL);
	waitpid(pid, &status, 0);
	close(master);
	buf_free(&screen);
	tcc_close(c);
	tcd_finish(&d);
}
END_TEST

START_TEST(symlink_shown_with_its_target)
{
	struct tcd d;
	tcd_start(&d, NULL);
	tcd_put(&d, ".git/config", "[core]\n");
	_cleanup_free_ char *notes = tcd_ws_path(&d, "NOTES.md");
	ck_assert_int_eq(symlink(".git/config", notes), 0);
	struct tcc *ap = approver(&d);
	struct tcc *c = tcc_connect(&d);

	/* A long input comes whole in the event too. */
	char content[2001];
	memset(content, 'z', 2000);
	content[2000] = '\0';
	const char *id = send_call(c, "write_file", tcc_fmt(c, "{\"path\":\"NOTES.md\",\"content\":\"%s\"}", content));
	const struct json *ev = tcc_wait_event(ap, "tool.confirmation_requested", 5000);
	ck_assert_ptr_nonnull(ev);
	ck_assert_str_eq(tj_str(ev, "files.0"), "NOTES.md -> .git/config");
	ck_assert_ptr_nonnull(strstr(tj_str(ev, "input"), content));
	/* A file that is no link is shown as it is. */
	const char *rid = tj_str(ev, "requestId");
	tc_assert_ok(tcc_request(ap, "confirmations/resolve",
				 tcc_fmt(ap, "{\"requestId\":\"%s\",\"decision\":\"deny\"}", rid)));
	tc_assert_kind(tcc_wait_id(c, id, 5000), "user_denied");
	id = send_call(c, "write_file", "{\"path\":\"plain.txt\",\"content\":\"x\"}");
	ev = tcc_wait_event(ap, "tool.confirmation_requested", 5000);
	ck_assert_ptr_nonnull(ev);
	ck_assert_str_eq(tj_str(ev, "files.0"), "plain.txt");
	tcc_close(c);
	tcc_close(ap);
	tcd_finish(&d);
}
END_TEST

START_TEST(unanswered_requests_are_taken_down)
{
	struct tcd d;
	tcd_start(&d, "{\"confirmation\":{\"timeout_ms\":300}}");
	struct tcc *ap = approver(&d);
	struct tcc *c = tcc_connect(&d);

	/* Cancelled by the client. */
	const char *id = send_call(c, "write_file", "{\"path\":\"a.txt\",\"content\":\"x\"}");
	const struct json *ev = tcc_wait_event(ap, "tool.confirmation_requested", 5000);
	ck_assert_ptr_nonnull(ev);
	const char *rid = tj_str(ev, "requestId");
	tcc_send(c, tcc_fmt(c, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\","
			       "\"params\":{\"requestId\":%s}}", id));
	ev = tcc_wait_event(ap, "tool.confirmation_resolved", 5000);
	ck_assert_ptr_nonnull(ev);
	ck_assert_str_eq(tj_str(ev, "requestId"), rid);
	ck_assert_str_eq(tj_str(ev, "decision"), "cancelled");

	/* Timed out. */
	id = send_call(c, "write_file", "{\"path\":\"b.txt\",\"content\":\"x\"}");
	ev = tcc_wait_event(ap, "tool.confirmation_requested", 5000);
	ck_assert_ptr_nonnull(ev);
	rid = tj_str(ev, "requestId");
	ev = tcc_wait_event(ap, "tool.confirmation_resolved", 5000);
	ck_assert_ptr_nonnull(ev);
	ck_assert_str_eq(tj_str(ev, "requestId"), rid);
	ck_assert_str_eq(tj_str(ev, "decision"), "timeout");
	tc_assert_kind(tcc_wait_id(c, id, 5000), "confirmation_timeout");
	tcc_close(c);
	tcc_close(ap);
	tcd_finish(&d);
}
END_TEST

/* "sandboxed": a call that runs sandboxed without network goes at once; one
 * that will not (shell with the profile off) is asked about; with nobody to
 * ask, refused. */
START_TEST(sandboxed_mode_asks_when_not_sandboxed)
{
	struct tcd d;
	tcd_start(&d, "{\"confirmation\":{\"default\":{\"execute\":\"sandboxed\"}}}");
	struct tcc *c = tcc_connect(&d);
	tc_assert_ok(tcc_call(c, "shell", "{\"command\":\"true\"}"));
	tcc_close(c);
	tcd_finish(&d);

	tcd_start(&d, "{\"confirmation\":{\"default\":{\"execute\":\"sandboxed\"}},"
		      "\"sandbox\":{\"per_tool\":{\"shell\":\"off\"}}}");
	c = tcc_connect(&d);
	tc_assert_kind(tcc_call(c, "shell", "{\"command\":\"true\"}"), "user_denied");
	struct tcc *ap = approver(&d);
	const char *id = send_call(c, "shell", "{\"command\":\"true\"}");
	ck_assert_ptr_nonnull(tcc_wait_event(ap, "tool.confirmation_requested", 5000));
	tcc_close(c);
	tcc_close(ap);
	(void)id;
	tcd_finish(&d);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("confirm_truth");
	TCase *tc = tcase_create("confirm_truth");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, long_command_shown_whole_on_a_terminal);
	tcase_add_test(tc, symlink_shown_with_its_target);
	tcase_add_test(tc, unanswered_requests_are_taken_down);
	tcase_add_test(tc, sandboxed_mode_asks_when_not_sandboxed);
	suite_add_tcase(s, tc);
	return run_suite(s);
}
