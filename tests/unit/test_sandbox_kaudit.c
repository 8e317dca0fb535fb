/* SPDX-License-Identifier: MIT */
/*
 * Landlock's audit records as the daemon reads them (lib/sandbox/kaudit.c):
 * each domain's refusals tied to the pid that made it, described in words,
 * taken once, and everything kept bounded whatever the records say.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/sandbox/sandbox.h"
#include "proto/base/util.h"
#include "tests/unit/check_main.h"

#define ACCESS 1423
#define DOMAIN 1424

static void feed(int type, const char *text)
{
	sandbox_kaudit_feed(type, text, strlen(text));
}

START_TEST(refusals_of_a_pid)
{
	/* As the kernel writes them: the first denial, then the domain's maker. */
	feed(ACCESS, "audit(1795884457.622:6): domain=1ad62322b blockers=fs.write_file path=\"/dev/tty\" dev=\"devtmpfs\" ino=5");
	feed(DOMAIN, "audit(1795884457.622:6): domain=1ad62322b status=allocated mode=enforcing pid=4242 uid=0 "
		     "exe=\"/usr/bin/toolcalld\" comm=\"toolcalld\"");
	feed(ACCESS, "audit(1795884457.623:7): domain=1ad62322b blockers=scope.signal opid=1367 ocomm=\"toolcalld\"");
	/* Its second layer, made by the same child. */
	feed(ACCESS, "audit(1795884457.624:8): domain=1ad62322c blockers=fs.make_reg,fs.refer path=\"/home/u/.ssh\"");
	feed(DOMAIN, "audit(1795884457.624:8): domain=1ad62322c status=allocated mode=enforcing pid=4242 uid=0");
	/* Another child's. */
	feed(ACCESS, "audit(1795884457.625:9): domain=2 blockers=fs.read_file path=\"/etc/x\"");
	feed(DOMAIN, "audit(1795884457.625:9): domain=2 status=allocated mode=enforcing pid=4343 uid=0");
	/* A path with a space, hex-encoded by audit; an abstract socket. */
	feed(ACCESS, "audit(1.1:10): domain=3 blockers=fs.read_file path=2F746D702F6120622E74787400");
	feed(ACCESS, "audit(1.1:10): domain=3 blockers=scope.abstract_unix_socket path=006B61");
	feed(DOMAIN, "audit(1.1:10): domain=3 status=allocated pid=4444");

	/* Looked at while the child runs: kept, and counted. */
	uint64_t seen = 0;
	char *s = sandbox_kaudit_peek(4242, &seen);
	ck_assert_msg(s && strstr(s, "writing /dev/tty"), "%s", s ? s : "(none)");
	ck_assert_int_eq(seen, 3);
	free(s);
	s = sandbox_kaudit_take(4242, false);
	ck_assert_ptr_nonnull(s);
	ck_assert_msg(strstr(s, "writing /dev/tty") && strstr(s, "signalling process 1367 (toolcalld), outside the sandbox") &&
		      strstr(s, "creating a file in /home/u/.ssh"), "%s", s);
	ck_assert_msg(!strstr(s, "/etc/x"), "%s", s);
	free(s);
	/* Taken once. */
	ck_assert_ptr_null(sandbox_kaudit_take(4242, false));
	ck_assert_ptr_null(sandbox_kaudit_peek(4242, &seen));
	ck_assert_int_eq(seen, 0);
	s = sandbox_kaudit_take(4343, false);
	ck_assert_str_eq(s, "reading /etc/x");
	free(s);
	s = sandbox_kaudit_take(4444, false);
	ck_assert_msg(strstr(s, "reading /tmp/a b.txt") && strstr(s, "connecting to the abstract unix socket @ka"), "%s",
		      s);
	free(s);
	ck_assert_ptr_null(sandbox_kaudit_take(9999, false));
	sandbox_kaudit_stop();
}
END_TEST

/* A pid used again: an ended domain of the earlier process is not the
 * new one's. */
START_TEST(a_pid_used_again)
{
	feed(ACCESS, "audit(1.1:1): domain=10 blockers=fs.read_file path=\"/old\"");
	feed(DOMAIN, "audit(1.1:1): domain=10 status=allocated pid=77");
	feed(DOMAIN, "audit(1.1:2): domain=10 status=deallocated denials=1");
	feed(ACCESS, "audit(1.1:3): domain=11 blockers=fs.read_file path=\"/new\"");
	feed(DOMAIN, "audit(1.1:3): domain=11 status=allocated pid=77");
	char *s = sandbox_kaudit_take(77, false);
	ck_assert_str_eq(s, "reading /new");
	free(s);
	sandbox_kaudit_stop();
}
END_TEST

/* Bounds: distinct refusals per domain, repeats once, long paths cut,
 * domains beyond the table's size drop the oldest, garbage ignored. */
START_TEST(bounded)
{
	char rec[2048];
	for (int i = 0; i < 20; i++) {
		snprintf(rec, sizeof(rec), "audit(1.1:%d): domain=aa blockers=fs.read_file path=\"/f%d\"", i, i % 12);
		feed(ACCESS, rec);
	}
	feed(DOMAIN, "audit(1.1:99): domain=aa status=allocated pid=100");
	char *s = sandbox_kaudit_take(100, false);
	ck_assert_msg(strstr(s, "reading /f0; reading /f1;") && strstr(s, "(and 4 more)") && !strstr(s, "/f9"), "%s", s);
	free(s);

	char path[1500];
	memset(path, 'p', sizeof(path) - 1);
	path[0] = '/';
	path[sizeof(path) - 1] = '\0';
	snprintf(rec, sizeof(rec), "audit(1.1:1): domain=bb blockers=fs.read_file path=\"%s\"", path);
	feed(ACCESS, rec);
	feed(DOMAIN, "audit(1.1:1): domain=bb status=allocated pid=101");
	s = sandbox_kaudit_take(101, false);
	ck_assert_int_le(strlen(s), 8 + 512);
	free(s);

	/* 200 domains: the first ones are dropped, the last kept. */
	for (int i = 0; i < 200; i++) {
		snprintf(rec, sizeof(rec), "audit(1.1:1): domain=%x blockers=fs.read_file path=\"/d%d\"", 0x1000 + i, i);
		feed(ACCESS, rec);
		snprintf(rec, sizeof(rec), "audit(1.1:1): domain=%x status=allocated pid=%d", 0x1000 + i, 1000 + i);
		feed(DOMAIN, rec);
	}
	ck_assert_ptr_null(sandbox_kaudit_take(1000, false));
	s = sandbox_kaudit_take(1199, false);
	ck_assert_str_eq(s, "reading /d199");
	free(s);

	/* Records without the fields, or cut anywhere: nothing kept, no crash. */
	static const char *const bad[] = { "", "domain=", "domain=zz blockers=", "audit(1.1:1): blockers=fs.read_file",
					   "domain=5 blockers=fs.read_file path=\"unterminated", "domain=5 status=allocated pid=",
					   "domain=5 blockers=fs.read_file path=ABC" };
	for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
		feed(ACCESS, bad[i]);
		feed(DOMAIN, bad[i]);
	}
	sandbox_kaudit_stop();
}
END_TEST

/* What a call that did not fail gets: the refusals already read, taken
 * the same way, and nothing for a pid with none or for no pid. */
START_TEST(kept_taken_without_reading)
{
	feed(ACCESS, "audit(1.1:20): domain=20 blockers=fs.write_file path=\"/usr/x\"");
	feed(DOMAIN, "audit(1.1:20): domain=20 status=allocated mode=enforcing pid=5151 uid=0");
	ck_assert_ptr_null(sandbox_kaudit_take_kept(5252));
	ck_assert_ptr_null(sandbox_kaudit_take_kept(0));
	char *s = sandbox_kaudit_take_kept(5151);
	ck_assert_str_eq(s, "writing /usr/x");
	free(s);
	ck_assert_ptr_null(sandbox_kaudit_take_kept(5151));
	ck_assert_ptr_null(sandbox_kaudit_take(5151, false));
	sandbox_kaudit_stop();
}
END_TEST

int main(void)
{
	Suite *s = suite_create("sandbox_kaudit");
	TCase *tc = tcase_create("sandbox_kaudit");
	tcase_add_test(tc, refusals_of_a_pid);
	tcase_add_test(tc, a_pid_used_again);
	tcase_add_test(tc, bounded);
	tcase_add_test(tc, kept_taken_without_reading);
	suite_add_tcase(s, tc);
	return run_suite(s);
}
