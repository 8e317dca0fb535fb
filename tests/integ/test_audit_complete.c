/* SPDX-License-Identifier: MIT */
/*
 * Every call is audited: a call that reached a tool gets its audit line
 * whatever ended it (cancelled, timed out, abandoned by a disconnect, cut
 * short by shutdown), with the workspace root, the files read and written
 * and the command; with audit.on_error "refuse", calls fail "internal"
 * while the log cannot be written, and the errors show in admin/stats.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/integ/harness.h"
#include "tests/unit/check_main.h"

#define AUDITED "{\"audit_log\":\"@DIR@/audit.log\",\"audit_fsync_ms\":50,\"grace_ms\":300," \
		"\"confirmation\":{\"default\":{\"write\":\"auto\",\"execute\":\"auto\"}}}"

/* The audit line that holds every needle, parsed (owned by c), or NULL. */
static const struct json *audit_line(struct tcc *c, const struct tcd *d, const char *n1, const char *n2)
{
	_cleanup_free_ char *path = xasprintf("%s/audit.log", d->dir);
	_cleanup_free_ char *text = tcd_read(d, path, NULL);
	for (char *line = text, *nl; line && *line; line = nl + 1) {
		nl = strchr(line, '\n');
		if (!nl)
			break;
		*nl = '\0';
		if (strstr(line, n1) && (!n2 || strstr(line, n2)))
			return tcc_parse(c, line, strlen(line));
	}
	return NULL;
}

/* Waits for the audit line holding both needles. */
static const struct json *wait_audit(struct tcc *c, const struct tcd *d, const char *n1, const char *n2)
{
	const struct json *l = NULL;
	tc_wait_until((l = audit_line(c, d, n1, n2)) != NULL, 5000);
	ck_assert_msg(l, "no audit line with %s %s", n1, n2 ? n2 : "");
	return l;
}

/* Starts a shell command that writes <tag>.started, then sleeps; returns
 * the request id once the command runs. */
static const char *start_sleeper(struct tcc *c, struct tcd *d, const char *tag, const char *extra)
{
	int64_t id = tcc_send_request(c, "tools/call",
		tcc_fmt(c, "{\"name\":\"shell\",\"arguments\":{\"command\":\"touch %s.started; sleep 30 # %s\"%s}}",
			tag, tag, extra ? extra : ""));
	_cleanup_free_ char *marker = tcd_ws_path(d, tcc_fmt(c, "%s.started", tag));
	ck_assert_msg(tc_wait_until(access(marker, F_OK) == 0, 5000), "%s never started", tag);
	return tcc_fmt(c, "%lld", (long long)id);
}

START_TEST(every_end_is_audited)
{
	struct tcd d;
	tcd_start(&d, AUDITED);
	struct tcc *log = tcc_connect(&d);
	struct tcc *c = tcc_connect(&d);

	/* Cancelled by the client. */
	const char *id = start_sleeper(c, &d, "cancel-me", NULL);
	tcc_send(c, tcc_fmt(c, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\","
			       "\"params\":{\"requestId\":%s}}", id));
	const struct json *l = wait_audit(log, &d, "# cancel-me", "\"outcome\":\"cancelled\"");
	ck_assert_str_eq(tj_str(l, "tool"), "shell");
	ck_assert_ptr_nonnull(tj_str(l, "workspace"));

	/* Timed out. */
	id = start_sleeper(c, &d, "time-me-out", ",\"timeout_ms\":300");
	tc_assert_kind(tcc_wait_id(c, id, 5000), "timeout");
	wait_audit(log, &d, "# time-me-out", "\"outcome\":\"timeout\"");

	/* Abandoned by a disconnect. */
	struct tcc *gone = tcc_connect(&d);
	start_sleeper(gone, &d, "leave-me", NULL);
	tcc_close(gone);
	l = wait_audit(log, &d, "# leave-me", "\"outcome\":\"cancelled\"");
	ck_assert_str_eq(tj_str(l, "message"), "The client disconnected");

	/* Files read and written, and the workspace. */
	tcd_put(&d, "a.txt", "hello");
	tc_assert_ok(tcc_call(c, "read_file", "{\"path\":\"a.txt\"}"));
	tc_assert_ok(tcc_call(c, "write_file", "{\"path\":\"b.txt\",\"content\":\"x\"}"));
	_cleanup_free_ char *ws = realpath(d.ws, NULL);
	l = wait_audit(log, &d, "\"tool\":\"read_file\"", NULL);
	ck_assert_str_eq(tj_str(l, "workspace"), ws);
	ck_assert_str_eq(tj_str(l, "filesRead.0"), "a.txt");
	l = wait_audit(log, &d, "\"tool\":\"write_file\"", NULL);
	ck_assert_str_eq(tj_str(l, "files.0"), "b.txt");
	ck_assert_int_eq(tj_len(l, "filesRead"), 0);

	/* Cut short by shutdown. */
	start_sleeper(c, &d, "stop-me", NULL);
	ck_assert_int_eq(tcd_stop(&d), 0);
	l = audit_line(log, &d, "# stop-me", "\"outcome\":\"cancelled\"");
	ck_assert_msg(l, "no audit line (outcome cancelled) for the call cut short by shutdown");
	ck_assert_msg(strstr(tj_str(l, "message"), "toolcalld is stopping"), "%s", tj_str(l, "message"));

	/* One line per call: the cancelled one is not written twice. */
	_cleanup_free_ char *path = xasprintf("%s/audit.log", d.dir);
	_cleanup_free_ char *text = tcd_read(&d, path, NULL);
	const char *first = strstr(text, "# cancel-me");
	ck_assert_ptr_null(strstr(first + 1, "# cancel-me\""));
	tcc_close(c);
	tcc_close(log);
	tcd_free(&d);
}
END_TEST

/* /dev/full takes the open and fails every write with ENOSPC: a full disk. */
START_TEST(refuse_while_the_log_cannot_be_written)
{
	if (access("/dev/full", W_OK) != 0)
		TC_SKIP("no writable /dev/full to stand for a full disk");
	struct tcd d;
	tcd_start(&d, "{\"audit_log\":\"/dev/full\",\"audit_fsync_ms\":50,\"audit\":{\"on_error\":\"refuse\"}}");
	struct tcc *c = tcc_connect(&d);
	/* The first line to be written finds the disk full. */
	tcc_call(c, "list_dir", "{}");
	ck_assert_msg(tcd_wait_stat(&d, "result.audit.writeErrors", 1, 5000), "no write error counted");
	const struct json *r = tcc_call(c, "list_dir", "{}");
	tc_assert_kind(r, "internal");
	/* The model is told "internal"; the daemon's log says why. */
	ck_assert_msg(tcd_wait_log(&d, "audit.on_error is \\\"refuse\\\"", 1, 3000) ||
		      tcd_wait_log(&d, "audit.on_error is \"refuse\"", 1, 100), "the refusal was not logged");
	r = tcc_request(c, "admin/stats", NULL);
	ck_assert(!tj_bool(r, "result.audit.healthy"));
	ck_assert(tj_bool(r, "result.audit.refusing"));
	ck_assert_msg(tcd_wait_log(&d, "audit log /dev/full", 1, 3000), "the outage was not logged");
	tcc_close(c);
	tcd_stop(&d);
	tcd_free(&d);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("audit_complete");
	TCase *tc = tcase_create("audit_complete");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, every_end_is_audited);
	tcase_add_test(tc, refuse_while_the_log_cannot_be_written);
	suite_add_tcase(s, tc);
	return run_suite(s);
}
