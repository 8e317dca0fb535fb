/* SPDX-License-Identifier: MIT */
/*
 * The daemon's stderr log (daemon/log.c): one message is one line, whatever
 * a client chose as its session id. And the journal's native protocol
 * (daemon/systemd.c), against a socket of our own.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "daemon/log.h"
#include "daemon/systemd.h"
#include "tests/unit/check_main.h"

/* Logs one message with the given session id; returns what reached stderr. */
static char *log_msg_to_string(const char *session, const char *what)
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
	log_call(LOG_ERR, session, "c1", "echo", "internal error: %s", what);
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

static char *log_to_string(const char *session)
{
	return log_msg_to_string(session, "boom");
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

START_TEST(message_with_newline_stays_one_line)
{
	ck_assert_str_eq(log_msg_to_string("s", "a\ntoolcalld: error: forged\t\x7f"),
			 "toolcalld: error: internal error: a\\x0atoolcalld: error: forged\\x09\\x7f session=s call=c1 tool=echo\n");
}
END_TEST

/* A datagram socket standing for journald's, bound at path. */
static int fake_journal(char *path, size_t size)
{
	snprintf(path, size, "/tmp/tc-journal-%d.sock", (int)getpid());
	unlink(path);
	int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	ck_assert_int_ge(fd, 0);
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	ck_assert_int_eq(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	return fd;
}

START_TEST(journal_fields_in_native_protocol)
{
	/* A value with a newline goes as NAME, its length (64 bits, little
	 * endian) and its bytes; the others as NAME=value lines. */
	static const char want[] = "MESSAGE\n\x05\0\0\0\0\0\0\0a\nb c\nPRIORITY=3\nTOOLCALLD_TOOL=\n";
	char path[108];
	int fd = fake_journal(path, sizeof(path));
	const struct journal_field f[] = {
		{ "MESSAGE", "a\nb c", 5 }, { "PRIORITY", "3", 1 }, { "TOOLCALLD_TOOL", "", 0 },
	};
	ck_assert_int_eq(journal_send(path, f, 3), 0);
	char got[256];
	ssize_t n = recv(fd, got, sizeof(got), 0);
	ck_assert_int_eq(n, (ssize_t)sizeof(want) - 1);
	ck_assert(memcmp(got, want, sizeof(want) - 1) == 0);
	close(fd);
	unlink(path);
}
END_TEST

START_TEST(journal_large_entry_in_memfd)
{
	/* Larger than a datagram may be: the entry comes in a sealed memfd. */
	char path[108];
	int fd = fake_journal(path, sizeof(path));
	size_t len = 8u << 20;
	char *big = malloc(len);
	ck_assert_ptr_nonnull(big);
	memset(big, 'x', len);
	const struct journal_field f[] = { { "MESSAGE", big, len } };
	ck_assert_int_eq(journal_send(path, f, 1), 0);
	char data[16];
	union {
		struct cmsghdr h;
		char space[CMSG_SPACE(sizeof(int))];
	} control;
	struct iovec iov = { data, sizeof(data) };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = &control,
			     .msg_controllen = sizeof(control) };
	ck_assert_int_eq(recvmsg(fd, &mh, MSG_CMSG_CLOEXEC), 0);
	struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
	ck_assert_ptr_nonnull(c);
	ck_assert_int_eq(c->cmsg_type, SCM_RIGHTS);
	int mfd;
	memcpy(&mfd, CMSG_DATA(c), sizeof(int));
	char head[9];
	ck_assert_int_eq(pread(mfd, head, sizeof(head), 0), (ssize_t)sizeof(head));
	ck_assert(memcmp(head, "MESSAGE=x", 9) == 0);
	ck_assert_int_eq(lseek(mfd, 0, SEEK_END), (off_t)(len + 9));
	/* Sealed: the journal reads what was sent, nothing else. */
	ck_assert_int_lt(pwrite(mfd, "y", 1, 0), 0);
	close(mfd);
	free(big);
	close(fd);
	unlink(path);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("log");
	TCase *tc = tcase_create("stderr");
	tcase_add_test(tc, plain_session_unchanged);
	tcase_add_test(tc, session_with_newline_stays_one_line);
	tcase_add_test(tc, message_with_newline_stays_one_line);
	suite_add_tcase(s, tc);
	TCase *tj = tcase_create("journal");
	tcase_add_test(tj, journal_fields_in_native_protocol);
	tcase_add_test(tj, journal_large_entry_in_memfd);
	suite_add_tcase(s, tj);
	return run_suite(s);
}
