/* SPDX-License-Identifier: MIT */
/*
 * The daemon's stderr log (daemon/log.c): one message is one line, whatever
 * a client chose as its session id. And the journal's native protocol
 * (daemon/systemd.c), against a socket of our own.
 */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
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

START_TEST(notify_address_unix_and_vsock)
{
	/* systemd hands a virtual machine's services "vsock:CID:PORT" (and
	 * "vsock-stream:" and friends): an address like a path, not an error */
	struct systemd_notify_address a;
	ck_assert_int_eq(systemd_notify_address("vsock:2:4242", &a), 0);
	ck_assert_int_eq(a.sa.vm.svm_family, AF_VSOCK);
	ck_assert_uint_eq(a.sa.vm.svm_cid, 2);
	ck_assert_uint_eq(a.sa.vm.svm_port, 4242);
	ck_assert_int_eq(a.len, sizeof(struct sockaddr_vm));
	ck_assert_int_eq(a.type, 0);
	ck_assert_int_eq(systemd_notify_address("vsock-stream:3:1", &a), 0);
	ck_assert_int_eq(a.type, SOCK_STREAM);
	ck_assert_int_eq(systemd_notify_address("vsock-seqpacket:4294967294:4294967295", &a), 0);
	ck_assert_int_eq(a.type, SOCK_SEQPACKET);
	ck_assert_uint_eq(a.sa.vm.svm_cid, 4294967294u);
	ck_assert_int_eq(systemd_notify_address("vsock-dgram:2:9", &a), 0);
	ck_assert_int_eq(a.type, SOCK_DGRAM);
	/* a CID is required (no VMADDR_CID_ANY), and both are whole numbers */
	static const char *bad[] = {
		"vsock:", "vsock:2", "vsock::5", "vsock:2:", "vsock:4294967295:1", "vsock:2:4294967296",
		"vsock:-1:2", "vsock:2:5x", "vsock: 2:5", "vsock-raw:2:5", "vsock:99999999999:1",
		"relative", "", "/",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		ck_assert_msg(systemd_notify_address(bad[i], &a) == -EINVAL, "accepted \"%s\"", bad[i]);
	ck_assert_int_eq(systemd_notify_address("/run/x", &a), 0);
	ck_assert_int_eq(a.sa.un.sun_family, AF_UNIX);
	ck_assert_int_eq(a.type, SOCK_DGRAM);
	ck_assert_int_eq(systemd_notify_address("@abstract", &a), 0);
	ck_assert_int_eq(a.sa.un.sun_path[0], '\0');
}
END_TEST

START_TEST(notify_over_vsock)
{
	/* A vsock address is tried, not refused as malformed: on a machine
	 * without vsock the error is the transport's. */
	setenv("NOTIFY_SOCKET", "vsock:1:4242", 1);
	int r = systemd_notify("READY=1");
	ck_assert_msg(r != -EINVAL, "vsock:1:4242 refused as malformed");
	/* Where the kernel has the loopback transport, the manager's side is
	 * ours: the message arrives whole, and the sender waits for our EOF. */
	int l = socket(AF_VSOCK, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_vm sa = { .svm_family = AF_VSOCK, .svm_cid = VMADDR_CID_LOCAL, .svm_port = VMADDR_PORT_ANY };
	socklen_t sl = sizeof(sa);
	if (l < 0 || bind(l, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(l, 1) < 0 ||
	    getsockname(l, (struct sockaddr *)&sa, &sl) < 0) {
		int e = errno;
		if (l >= 0)
			close(l);
		unsetenv("NOTIFY_SOCKET");
		TC_SKIP("notify_over_vsock: no vsock loopback here (%s): only the address was tried", strerror(e));
	}
	char *addr = NULL;
	ck_assert_int_gt(asprintf(&addr, "vsock-stream:%u:%u", VMADDR_CID_LOCAL, sa.svm_port), 0);
	setenv("NOTIFY_SOCKET", addr, 1);
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0)
		_exit(systemd_notify("READY=1\nSTATUS=x") == 1 ? 0 : 1);
	int c = accept(l, NULL, NULL);
	ck_assert_int_ge(c, 0);
	char got[64];
	size_t n = 0;
	ssize_t k;
	while ((k = recv(c, got + n, sizeof(got) - 1 - n, 0)) > 0)
		n += (size_t)k;
	got[n] = '\0';
	ck_assert_str_eq(got, "READY=1\nSTATUS=x");
	close(c);
	int status;
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	unsetenv("NOTIFY_SOCKET");
	free(addr);
	close(l);
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
	TCase *tn = tcase_create("notify");
	tcase_add_test(tn, notify_address_unix_and_vsock);
	tcase_add_test(tn, notify_over_vsock);
	suite_add_tcase(s, tn);
	return run_suite(s);
}
