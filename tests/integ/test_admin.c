/* SPDX-License-Identifier: MIT */
/*
 * Administration through the socket: the audit log follows logrotate
 * (reopened on SIGHUP), the peer allow-list keeps other uids out,
 * admin methods are for the daemon's own user, and every admin/reload is
 * logged as a SIGHUP's is.
 */
#include <check.h>
#include <grp.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tests/integ/harness.h"
#include "tests/unit/check_main.h"

/* Counts the lines of a file that contain needle. */
static unsigned count_lines(const struct tcd *d, const char *path, const char *needle)
{
	size_t len = 0;
	char *text = tcd_read(d, path, &len);
	unsigned n = 0;
	for (char *line = text, *nl; line && *line; line = nl + 1) {
		nl = strchr(line, '\n');
		if (!nl)
			break;
		*nl = '\0';
		if (strstr(line, needle))
			n++;
	}
	free(text);
	return n;
}

START_TEST(audit_log_follows_logrotate)
{
	struct tcd d;
	tcd_start(&d, "{\"audit_log\":\"@DIR@/audit.log\",\"audit_fsync_ms\":50}");
	struct tcc *c = tcc_connect(&d);
	tcd_put(&d, "a.txt", "a");
	tc_assert_ok(tcc_call(c, "read_file", "{\"path\":\"a.txt\",\"limit\":1}"));
	/* logrotate: move the file away, then SIGHUP. */
	char *log = xasprintf("%s/audit.log", d.dir);
	char *old = xasprintf("%s/audit.log.1", d.dir);
	tc_wait_until(count_lines(&d, log, "\"tool\":\"read_file\"") >= 1, 3000);
	ck_assert_int_eq(rename(log, old), 0);
	tcd_kill(&d, SIGHUP);
	/* The reopen happens with the reload; a ping after it is answered
	 * after the signal was handled. */
	struct stat st;
	tc_wait_until(stat(log, &st) == 0, 3000);
	ck_assert_int_eq(stat(log, &st), 0);
	tc_assert_ok(tcc_call(c, "list_dir", "{}"));
	tcc_close(c);
	ck_assert_int_eq(tcd_stop(&d), 0);
	ck_assert_uint_eq(count_lines(&d, old, "\"tool\":\"read_file\""), 1);
	ck_assert_uint_eq(count_lines(&d, old, "\"tool\":\"list_dir\""), 0);
	ck_assert_uint_eq(count_lines(&d, log, "\"tool\":\"list_dir\""), 1);
	ck_assert_uint_eq(count_lines(&d, log, "\"tool\":\"read_file\""), 0);
	free(log);
	free(old);
	tcd_free(&d);
}
END_TEST

static bool need_nobody(struct passwd **ret)
{
	if (geteuid() != 0) {
		tc_skip_note("needs root to connect as user nobody");
		return false;
	}
	*ret = getpwnam("nobody");
	if (!*ret) {
		tc_skip_note("no user nobody");
		return false;
	}
	return true;
}

START_TEST(peer_allow_list)
{
	struct passwd *pw;
	if (!need_nobody(&pw))
		return;
	/* Only uid 0 (and the daemon's own, root here) may connect. */
	struct tcd d;
	tcd_start(&d, "{\"socket_mode\":\"0666\",\"peers\":{\"allow_uids\":[0]}}");
	ck_assert(chmod(d.dir, 0711) == 0);
	struct tcc *n = tcc_connect_as(&d, pw->pw_uid, pw->pw_gid);
	/* Refused: the daemon closes the connection without an answer (it
	 * may be closed before the request is even sent: EPIPE is fine). */
	static const char ping[] = "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\n";
	(void)tcc_send_raw(n, ping, sizeof(ping) - 1);
	ck_assert_ptr_null(tcc_recv_line(n, 3000, NULL));
	ck_assert(tcc_eof(n));
	tcc_close(n);
	struct tcc *c = tcc_connect(&d);
	tc_assert_ok(tcc_request(c, "ping", NULL));
	const struct json *st = tcc_request(c, "admin/stats", NULL);
	ck_assert_int_ge(tj_int(st, "result.connections.refused"), 1);
	tcc_close(c);
	tcd_finish(&d);

	/* Allowing nobody's uid lets it in. */
	char *cfg = xasprintf("{\"socket_mode\":\"0666\",\"peers\":{\"allow_uids\":[%u]}}", (unsigned)pw->pw_uid);
	tcd_start(&d, cfg);
	free(cfg);
	ck_assert(chmod(d.dir, 0711) == 0);
	n = tcc_connect_as(&d, pw->pw_uid, pw->pw_gid);
	tc_assert_ok(tcc_request(n, "ping", NULL));
	/* But administration stays with root and the daemon's user. */
	const struct json *r = tcc_request(n, "admin/reload", NULL);
	ck_assert_str_eq(tj_kind(r), "permission_denied");
	tcc_close(n);
	tcd_finish(&d);
}
END_TEST

/* Connects as uid with primary group gid and the single supplementary
 * group extra (setgroups is process-wide: restored right after). */
static struct tcc *connect_with_group(struct tcd *d, uid_t uid, gid_t gid, gid_t extra)
{
	gid_t saved[256];
	int n = getgroups(256, saved);
	ck_assert_int_ge(n, 0);
	ck_assert(setgroups(1, &extra) == 0);
	struct tcc *c = tcc_connect_as(d, uid, gid);
	ck_assert(setgroups((size_t)n, saved) == 0);
	return c;
}

/* allow_gids admits a peer through a supplementary group, not only its
 * primary one; a peer in none of the listed groups stays out. */
START_TEST(peer_allow_supplementary_group)
{
	struct passwd *pw;
	if (!need_nobody(&pw))
		return;
	const gid_t listed = 4242, other = 4243;
	char *cfg = xasprintf("{\"socket_mode\":\"0666\",\"peers\":{\"allow_gids\":[%u]}}", (unsigned)listed);
	struct tcd d;
	tcd_start(&d, cfg);
	free(cfg);
	ck_assert(chmod(d.dir, 0711) == 0);
	ck_assert_uint_ne(pw->pw_gid, listed);

	struct tcc *in = connect_with_group(&d, pw->pw_uid, pw->pw_gid, listed);
	tc_assert_ok(tcc_request(in, "ping", NULL));
	tcc_close(in);

	struct tcc *out = connect_with_group(&d, pw->pw_uid, pw->pw_gid, other);
	static const char ping[] = "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\n";
	(void)tcc_send_raw(out, ping, sizeof(ping) - 1);
	ck_assert_ptr_null(tcc_recv_line(out, 3000, NULL));
	ck_assert(tcc_eof(out));
	tcc_close(out);
	tcd_finish(&d);
}
END_TEST

/* admin/reload, done or failed, is in the daemon's log with who asked. */
START_TEST(admin_reload_is_logged)
{
	struct tcd d;
	tcd_start(&d, NULL);
	struct tcc *c = tcc_connect(&d);
	tc_assert_ok(tcc_reload(c));
	char *want = xasprintf("admin/reload by uid %u (pid %d): reloaded: {\"tools\":", (unsigned)geteuid(),
			       (int)getpid());
	ck_assert_msg(tcd_wait_log(&d, want, 1, 5000), "no \"%s\" in the log:\n%s", want, tcd_log(&d));
	free(want);

	tcd_write_tool(&d, "broken.json", "{\"name\":");
	const struct json *bad = tcc_reload(c);
	tc_assert_kind(bad, "execution_error");
	ck_assert_str_eq(tj_str(bad, "error.data.reason"), "invalid_config");
	ck_assert(!tj_bool(bad, "error.data.retryable"));
	want = xasprintf("admin/reload by uid %u (pid %d) failed, the previous configuration stays in force: ",
			 (unsigned)geteuid(), (int)getpid());
	ck_assert_msg(tcd_wait_log(&d, want, 1, 5000), "no \"%s\" in the log", want);
	char *log = tcd_log(&d);
	char *line = strstr(log, want);
	ck_assert_msg(line && strstr(line, "broken.json"), "%s", log);
	free(log);
	free(want);
	tcc_close(c);
	tcd_finish(&d);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("admin");
	TCase *tc = tcase_create("admin");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, audit_log_follows_logrotate);
	tcase_add_test(tc, peer_allow_list);
	tcase_add_test(tc, peer_allow_supplementary_group);
	tcase_add_test(tc, admin_reload_is_logged);
	suite_add_tcase(s, tc);
	return run_suite(s);
}
