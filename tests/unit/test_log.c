/* SPDX-License-Identifier: MIT */
/*
 * The daemon's stderr log (daemon/log.c): one message is one line, whatever
 * a client chose as its session id.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "daemon/log.h"
#include "tests/unit/check_main.h"

/* Logs one message with the given session id; returns what reached stderr. */
static char *log_to_string(const char *session)
{
	char path[] = "/tmp/tc-log-XXXXXX";
	int fd = mkstemp(path);
	ck_assert_int_ge(fd, 0);
	unlink(path);
	fflush(stderr);
	int saved = dup(STDERR_FILENO);
	ck_assert_int_ge(saved, 0);
	ck_assert_int_ge(dup2(fd, STDERR_FILENO), 0);
	unsetenv("JOURNAL_STREAM");
	log_init(LOG_DEBUG);
	log_call(LOG_ERR, session, "c1", "echo", "internal error: %s", "boom");
	fflush(stderr);
	ck_assert_int_ge(dup2(saved, STDERR_FILENO), 0);
	close(saved);
	static char text[512];
	ssize_t n = pread(fd, text, sizeof(text) - 1, 0);
	ck_assert_int_gt(n, 0);
	text[n] = '\0';
	close(fd);
	return text;
}

START_TEST(plain_session_unchanged)
{
	ck_assert_str_eq(log_to_string("s-1"),
			 "toolcalld: error: internal error: boom session=s-1 call=c1 tool=echo\n");
}
END_TEST

START_TEST(session_with_newline_stays_one_line)
{
	ck_assert_str_eq(log_to_string("a\nb\\c\x1b"),
			 "toolcalld: error: internal error: boom session=a\\x0ab\\x5cc\\x1b call=c1 tool=echo\n");
}
END_TEST

int main(void)
{
	Suite *s = suite_create("log");
	TCase *tc = tcase_create("stderr");
	tcase_add_test(tc, plain_session_unchanged);
	tcase_add_test(tc, session_with_newline_stays_one_line);
	suite_add_tcase(s, tc);
	return run_suite(s);
}
