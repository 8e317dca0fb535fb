/* SPDX-License-Identifier: MIT */
/*
 * The audit log's failure accounting: a full disk (/dev/full) or a device
 * that cannot sync (/dev/null) is counted and logged once per outage, lines
 * are kept for a retry and dropped only when counted, "refuse" mode reports
 * that calls must stop, and the fdatasync runs on the io pool.
 */
#include <check.h>
#include <errno.h>
#include <ev.h>
#include <ftw.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "lib/base/audit.h"
#include "lib/base/loop.h"
#include "proto/base/util.h"
#include "tests/unit/check_main.h"
#include "tests/unit/loop_spin.h"

struct logged {
	unsigned errors;
	unsigned notes;
	char last[512];
};

static void capture(void *userdata, bool error, const char *msg)
{
	struct logged *l = userdata;
	if (error)
		l->errors++;
	else
		l->notes++;
	snprintf(l->last, sizeof(l->last), "%s", msg);
}

static struct audit *open_or_skip(const char *path, struct tc_loop *loop, struct audit_opts *o)
{
	struct audit *a = NULL;
	int r = audit_open_with(path, loop, o, &a);
	if (r < 0)
		return NULL;
	return a;
}

START_TEST(full_disk_is_counted_and_logged_once)
{
	if (access("/dev/full", W_OK) < 0)
		TC_SKIP("full_disk_is_counted_and_logged_once: no writable /dev/full here");
	struct logged l = { 0 };
	struct audit_opts o = { .log = capture, .log_userdata = &l, .max_queued = 64 };
	struct audit *a = open_or_skip("/dev/full", NULL, &o);
	ck_assert_ptr_nonnull(a);
	ck_assert(audit_healthy(a));
	audit_record(a, "{\"n\":1}", 7);
	audit_record(a, "{\"n\":2}", 7);
	struct audit_stats st;
	audit_get_stats(a, &st);
	ck_assert_uint_eq(st.write_errors, 2);	/* each record is retried */
	ck_assert_uint_eq(st.dropped, 0);	/* kept, not lost */
	ck_assert(!st.healthy);
	ck_assert_uint_eq(l.errors, 1);		/* one outage, one message */
	ck_assert_ptr_nonnull(strstr(l.last, "No space left"));
	/* Past max_queued, new lines are dropped: counted, logged once. */
	for (int i = 0; i < 20; i++)
		audit_record(a, "{\"n\":3}", 7);
	audit_get_stats(a, &st);
	ck_assert_uint_eq(st.lines, 64 / 8);	/* 8 bytes a line */
	ck_assert_uint_eq(st.dropped, 22 - 64 / 8);
	ck_assert_uint_eq(audit_lost(a), st.dropped);
	ck_assert_uint_eq(l.errors, 2);
	ck_assert_ptr_nonnull(strstr(l.last, "dropping"));
	/* "log" mode never refuses. */
	ck_assert(!audit_refusing(a));
	audit_close(a);
	ck_assert_uint_eq(l.errors, 3);	/* closed with lines unwritten: said */
}
END_TEST

START_TEST(refuse_mode_refuses_while_unhealthy)
{
	if (access("/dev/full", W_OK) < 0)
		TC_SKIP("refuse_mode_refuses_while_unhealthy: no writable /dev/full here");
	struct logged l = { 0 };
	enum audit_on_error mode;
	ck_assert_int_eq(audit_on_error_from_string("refuse", &mode), 0);
	ck_assert_int_eq(mode, AUDIT_ON_ERROR_REFUSE);
	ck_assert_int_eq(audit_on_error_from_string("log", &mode), 0);
	ck_assert_int_eq(audit_on_error_from_string("ignore", &mode), -EINVAL);
	struct audit_opts o = { .log = capture, .log_userdata = &l, .on_error = AUDIT_ON_ERROR_REFUSE };
	struct audit *a = open_or_skip("/dev/full", NULL, &o);
	ck_assert_ptr_nonnull(a);
	ck_assert(!audit_refusing(a));
	audit_record(a, "x", 1);
	ck_assert(audit_refusing(a));
	audit_close(a);
}
END_TEST

static char dir[] = "/tmp/tc-audit-XXXXXX";

static int rm_one(const char *p, const struct stat *st, int flag, struct FTW *ftw)
{
	return remove(p);
}

START_TEST(write_outage_ends_and_no_line_is_lost)
{
	if (access("/dev/full", W_OK) < 0)
		TC_SKIP("write_outage_ends_and_no_line_is_lost: no writable /dev/full here");
	ck_assert_ptr_nonnull(mkdtemp(dir));
	char *path = xasprintf("%s/audit.log", dir);
	/* The full device itself at the log's path (a path there is refused). */
	if (mknod(path, S_IFCHR | 0600, makedev(1, 7)) < 0)
		TC_SKIP("write_outage_ends_and_no_line_is_lost: cannot make a /dev/full node here");
	struct logged l = { 0 };
	struct audit_opts o = { .log = capture, .log_userdata = &l };
	struct audit *a = open_or_skip(path, NULL, &o);
	ck_assert_ptr_nonnull(a);
	audit_record(a, "one", 3);
	audit_record(a, "two", 3);
	ck_assert(!audit_healthy(a));
	/* The disk comes back (here: the device is rotated away, and the reopen makes a file). */
	ck_assert_int_eq(unlink(path), 0);
	ck_assert_int_eq(audit_reopen(a), 0);
	ck_assert_int_eq(audit_flush(a, true), 0);
	ck_assert(audit_healthy(a));
	ck_assert_uint_eq(l.notes, 1);
	ck_assert_ptr_nonnull(strstr(l.last, "writing again"));
	audit_record(a, "three", 5);
	audit_close(a);
	char *got = NULL;
	size_t n = 0;
	FILE *f = fopen(path, "r");
	ck_assert_ptr_nonnull(f);
	ck_assert_int_ge(getdelim(&got, &n, '\0', f), 0);
	fclose(f);
	ck_assert_str_eq(got, "one\ntwo\nthree\n");
	free(got);
	free(path);
	nftw(dir, rm_one, 8, FTW_DEPTH | FTW_PHYS);
}
END_TEST

static bool fsync_failed(void *arg)
{
	struct audit_stats st;
	audit_get_stats(arg, &st);
	return st.fsync_errors > 0;
}

START_TEST(fsync_errors_are_counted_off_the_loop)
{
	/* /dev/null takes writes but cannot be synced (EINVAL). */
	struct ev_loop *ev = ev_loop_new(EVFLAG_AUTO);
	struct tc_loop *loop = tc_loop_ev_new(ev);
	struct logged l = { 0 };
	struct audit_opts o = { .log = capture, .log_userdata = &l, .flush_ms = 5 };
	struct audit *a = open_or_skip("/dev/null", loop, &o);
	ck_assert_ptr_nonnull(a);
	audit_record(a, "line", 4);
	/* The flush writes and hands the sync to the pool: no error yet. */
	ck_assert_int_eq(audit_flush(a, true), 0);
	ck_assert(loop_spin(ev, fsync_failed, a, 10000));
	ck_assert(!audit_healthy(a));
	ck_assert_uint_eq(l.errors, 1);
	ck_assert_ptr_nonnull(strstr(l.last, "fdatasync failed"));
	audit_close(a);
	tc_loop_ev_free(loop);
	ev_loop_destroy(ev);
}
END_TEST

/* A link or a FIFO put where the log is (re)opened by name is refused: the
 * daemon neither appends to the link's target nor waits on the pipe. */
START_TEST(link_or_fifo_at_the_path_is_refused)
{
	char tmp[] = "/tmp/tc-audit-XXXXXX";
	ck_assert_ptr_nonnull(mkdtemp(tmp));
	char target[256], path[256], fifo[256];
	snprintf(target, sizeof(target), "%s/victim", tmp);
	snprintf(path, sizeof(path), "%s/audit.log", tmp);
	snprintf(fifo, sizeof(fifo), "%s/fifo.log", tmp);
	ck_assert_int_eq(symlink(target, path), 0);
	struct audit *a = NULL;
	ck_assert_int_eq(audit_open_with(path, NULL, NULL, &a), -ELOOP);
	ck_assert_ptr_null(a);
	ck_assert_int_eq(access(target, F_OK), -1);	/* not created through the link */
	ck_assert_int_eq(mkfifo(fifo, 0600), 0);
	ck_assert_int_lt(audit_open_with(fifo, NULL, NULL, &a), 0);	/* returns: no reader waited for */
	ck_assert_ptr_null(a);

	/* A log rotated away and replaced by a link is not followed on reopen. */
	ck_assert_int_eq(unlink(path), 0);
	ck_assert_int_eq(audit_open_with(path, NULL, NULL, &a), 0);
	ck_assert_int_eq(rename(path, target), 0);
	ck_assert_int_eq(symlink(target, path), 0);
	ck_assert_int_eq(audit_reopen(a), -ELOOP);
	audit_close(a);
	unlink(path);
	unlink(target);
	unlink(fifo);
	rmdir(tmp);
}
END_TEST

/* A record is one line: a newline its writer left at the end is not an
 * empty line after it, and an empty record writes nothing. */
START_TEST(a_record_is_one_line)
{
	char tmp[] = "/tmp/tc-audit-XXXXXX";
	ck_assert_ptr_nonnull(mkdtemp(tmp));
	char path[256];
	snprintf(path, sizeof(path), "%s/audit.log", tmp);
	struct audit *a = NULL;
	ck_assert_int_eq(audit_open_with(path, NULL, NULL, &a), 0);
	audit_record(a, "{\"n\":1}\n", 8);
	audit_record(a, "{\"n\":2}", 7);
	audit_record(a, "{\"n\":3}\r\n\n", 10);
	audit_record(a, "\n", 1);
	audit_record(a, "", 0);
	ck_assert_int_eq(audit_flush(a, false), 0);
	ck_assert_uint_eq(audit_lines(a), 3);
	audit_close(a);
	FILE *f = fopen(path, "r");
	ck_assert_ptr_nonnull(f);
	char text[128] = "";
	size_t n = fread(text, 1, sizeof(text) - 1, f);
	fclose(f);
	text[n] = '\0';
	ck_assert_str_eq(text, "{\"n\":1}\n{\"n\":2}\n{\"n\":3}\n");
	unlink(path);
	rmdir(tmp);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("audit");
	TCase *tc = tcase_create("audit");
	tcase_add_test(tc, full_disk_is_counted_and_logged_once);
	tcase_add_test(tc, refuse_mode_refuses_while_unhealthy);
	tcase_add_test(tc, write_outage_ends_and_no_line_is_lost);
	tcase_add_test(tc, fsync_errors_are_counted_off_the_loop);
	tcase_add_test(tc, link_or_fifo_at_the_path_is_refused);
	tcase_add_test(tc, a_record_is_one_line);
	suite_add_tcase(s, tc);
	return run_suite(s);
}
