/* SPDX-License-Identifier: MIT */
/*
 * The daemon under systemd's protocols, without systemd: socket activation
 * through systemd-socket-activate (which passes a listening fd the way a
 * .socket unit does), and sd_notify readiness through a NOTIFY_SOCKET the
 * test binds itself: READY=1 only once calls are served, RELOADING=1 then
 * READY=1 on SIGHUP, STOPPING=1 on SIGTERM, WATCHDOG=1 when asked for
 * (CONTRACT §9).
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <sys/prctl.h>
#include <sys/syscall.h>

#include "tests/integ/harness.h"
#include "tests/unit/check_main.h"

/* Finds a program on $PATH; NULL when it is not installed. */
static char *find_program(const char *name)
{
	const char *path = getenv("PATH");
	char *copy = xstrdup(path && *path ? path : "/usr/bin:/bin");
	char *found = NULL;
	for (char *save = NULL, *dir = strtok_r(copy, ":", &save); dir && !found;
	     dir = strtok_r(NULL, ":", &save)) {
		char *p = xasprintf("%s/%s", dir, name);
		if (access(p, X_OK) == 0)
			found = p;
		else
			free(p);
	}
	free(copy);
	return found;
}

/* --- socket activation --------------------------------------------------- */

START_TEST(socket_activation)
{
	char *activate = find_program("systemd-socket-activate");
	if (!activate) {
		TC_SKIP("socket_activation: systemd-socket-activate is not installed "
			"(Debian: the systemd package; packaging/deps.sh installs it)");
	}
	struct tcd d;
	struct tcd_opts o = { .config = "{}" };
	tcd_prepare(&d, &o);
	/* The daemon is told no socket path of its own: the one it serves on
	 * can only be the fd it is passed. */
	char *other = xasprintf("%s/not-this.sock", d.dir);
	char *cfg = xasprintf("{\"socket\":\"%s\",\"workspace\":\"%s\",\"tools_dir\":null}", other, d.ws);
	tc_write_file_atomic(d.config, cfg, strlen(cfg));
	const char *wrapper[] = { activate, "-l", d.sock, NULL };
	o.wrapper = wrapper;
	o.no_wait = true;
	tcd_spawn(&d, &o);
	ck_assert_msg(tcd_wait_socket(&d, d.sock, TCD_START_TIMEOUT_MS) == 0, "systemd-socket-activate did not listen");

	/* the first connection starts the daemon, which answers on it */
	struct tcc *c = tcc_connect(&d);
	const struct json *r = tcc_request(c, "ping", NULL);
	tc_assert_ok(r);
	r = tcc_initialize(c, NULL);
	ck_assert_pstr_eq(tj_str(r, "serverInfo.name"), "toolcalld");
	r = tcc_request(c, "tools/list", NULL);
	ck_assert_int_eq(tj_len(r, "result.tools"), 16);
	/* more connections on the same passed socket */
	struct tcc *c2 = tcc_connect(&d);
	tc_assert_ok(tcc_request(c2, "ping", NULL));
	tcc_close(c2);
	ck_assert_msg(access(other, F_OK) < 0, "the daemon bound its own socket besides the passed one");

	tcc_close(c);
	ck_assert_int_eq(tcd_stop(&d), 0);
	/* the socket belongs to the activator (systemd): left in place */
	struct stat st;
	ck_assert_msg(lstat(d.sock, &st) == 0 && S_ISSOCK(st.st_mode), "the passed socket was removed");
	char *log = tcd_log(&d);
	ck_assert_msg(strstr(log, "socket activation"), "log: %s", log);
	free(log);
	free(cfg);
	free(other);
	free(activate);
	tcd_free(&d);
}
END_TEST

/* This program's path, for running itself as the activator below. */
static char self[4096];

/*
 * Runs as the activator of fail_getfl_on_passed_socket: listens on path
 * as fd 3, passes it the way systemd does, and makes fcntl(3, F_GETFL)
 * fail in the daemon it then becomes (argv).
 */
static int activate_with_failing_getfl(const char *path, char **argv)
{
#if defined(__x86_64__)
	const unsigned arch = AUDIT_ARCH_X86_64;
#elif defined(__aarch64__)
	const unsigned arch = AUDIT_ARCH_AARCH64;
#else
	return 77;
#endif
	int fd = socket(AF_UNIX, SOCK_STREAM, 0);
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(fd, 8) < 0 ||
	    dup2(fd, 3) < 0)
		return 126;
	if (fd != 3)
		close(fd);
	char pid[32];
	snprintf(pid, sizeof(pid), "%d", (int)getpid());
	setenv("LISTEN_FDS", "1", 1);
	setenv("LISTEN_PID", pid, 1);
	struct sock_filter code[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, arch, 1, 0),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_fcntl, 0, 5),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[0])),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 3, 0, 3),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[1])),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, F_GETFL, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EIO),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = { .len = sizeof(code) / sizeof(code[0]), .filter = code };
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 ||
	    prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog, 0, 0) < 0) {
		printf("no seccomp filter here: %s\n", strerror(errno));
		return 77;
	}
	execv(argv[0], argv);
	return 127;
}

/* A passed socket whose flags cannot be read is an error, not flags of -1. */
START_TEST(fail_getfl_on_passed_socket)
{
	struct tcd d;
	struct tcd_opts o = { .config = "{}" };
	tcd_prepare(&d, &o);
	const char *wrapper[] = { self, "--activate-with-failing-getfl", d.sock, NULL };
	o.wrapper = wrapper;
	o.no_wait = true;
	tcd_spawn(&d, &o);
	int st = tcd_wait_exit(&d, 20000);
	char *log = tcd_log(&d);
	if (st == TC_EXIT_SKIP) {
		tcd_free(&d);
		_cleanup_free_ char *why = log;
		TC_SKIP("fail_getfl_on_passed_socket: %s", why);
	}
	ck_assert_msg(st != 0 && st != -ETIMEDOUT, "status %d, log: %s", st, log);
	ck_assert_msg(strstr(log, "the socket systemd passed: fcntl: Input/output error"), "log: %s", log);
	free(log);
	tcd_free(&d);
}
END_TEST

/* --- sd_notify ----------------------------------------------------------- */

struct notify {
	int fd;
	char *path;
};

static void notify_open(struct notify *n, const struct tcd *d)
{
	n->path = xasprintf("%s/notify", d->dir);
	n->fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	ck_assert(n->fd >= 0);
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	strcpy(sa.sun_path, n->path);
	ck_assert_msg(bind(n->fd, (struct sockaddr *)&sa, sizeof(sa)) == 0, "bind %s: %s", n->path, strerror(errno));
}

static void notify_close(struct notify *n)
{
	close(n->fd);
	free(n->path);
}

/* The next datagram (malloc'd, NUL-terminated) or NULL on timeout. */
static char *notify_recv(struct notify *n, int timeout_ms)
{
	struct pollfd pfd = { n->fd, POLLIN, 0 };
	if (poll(&pfd, 1, timeout_ms) <= 0)
		return NULL;
	char buf[4096];
	ssize_t k = recv(n->fd, buf, sizeof(buf) - 1, 0);
	if (k < 0)
		return NULL;
	buf[k] = '\0';
	return xstrdup(buf);
}

/* True when the datagram holds the assignment as one of its lines. */
static bool has_line(const char *msg, const char *line)
{
	size_t n = strlen(line);
	for (const char *p = msg; p && *p;) {
		const char *e = strchrnul(p, '\n');
		if ((size_t)(e - p) == n && memcmp(p, line, n) == 0)
			return true;
		p = *e ? e + 1 : e;
	}
	return false;
}

/* Waits for a datagram holding line, skipping others (WATCHDOG=1...). */
static char *notify_wait(struct notify *n, const char *line, int timeout_ms)
{
	uint64_t deadline = tc_now_ms() + (uint64_t)timeout_ms;
	for (;;) {
		uint64_t now = tc_now_ms();
		if (now >= deadline)
			return NULL;
		char *msg = notify_recv(n, (int)(deadline - now));
		if (!msg)
			return NULL;
		if (has_line(msg, line))
			return msg;
		free(msg);
	}
}

/* Connects once (no retry): the daemon must accept already. */
static bool connect_once(const char *path)
{
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	strcpy(sa.sun_path, path);
	bool ok = connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0;
	close(fd);
	return ok;
}

START_TEST(readiness_and_reload_and_stop)
{
	struct tcd d;
	tcd_prepare(&d, NULL);
	struct notify n;
	notify_open(&n, &d);
	char *env_notify = xasprintf("NOTIFY_SOCKET=%s", n.path);
	const char *env[] = { env_notify, NULL };
	struct tcd_opts o = { .env = env, .no_wait = true };
	tcd_spawn(&d, &o);

	char *msg = notify_wait(&n, "READY=1", 5000);
	ck_assert_msg(msg, "no READY=1 within 5 s; log: %s", tcd_log(&d));
	/* ready means ready: a call is served at once, no retry */
	ck_assert_msg(connect_once(d.sock), "READY=1 came before the socket accepted");
	struct tcc *c = tcc_connect(&d);
	tc_assert_ok(tcc_request(c, "ping", NULL));
	tcc_initialize(c, NULL);
	ck_assert_msg(strstr(msg, "STATUS="), "no STATUS with READY=1: %s", msg);
	free(msg);

	/* SIGHUP: RELOADING=1 (with MONOTONIC_USEC), then READY=1 */
	tcd_write_tool(&d, "hup.json",
		       "{ \"name\": \"hup\", \"kind\": \"command\", \"description\": \"x\", \"argv\": [\"true\"],\n"
		       "  \"side_effects\": \"none\", \"input_schema\": { \"type\": \"object\" } }\n");
	tcd_kill(&d, SIGHUP);
	msg = notify_wait(&n, "RELOADING=1", 3000);
	ck_assert_msg(msg, "no RELOADING=1 on SIGHUP");
	ck_assert_msg(strstr(msg, "MONOTONIC_USEC="), "RELOADING=1 without MONOTONIC_USEC: %s", msg);
	free(msg);
	msg = notify_wait(&n, "READY=1", 3000);
	ck_assert_msg(msg, "no READY=1 after the reload");
	free(msg);
	ck_assert_msg(tcc_wait_notification(c, "notifications/tools/list_changed", 3000), "SIGHUP did not reload");

	/* a failed reload still ends with READY=1 */
	tcd_write_tool(&d, "hup.json", "{ broken\n");
	tcd_kill(&d, SIGHUP);
	msg = notify_wait(&n, "RELOADING=1", 3000);
	ck_assert_msg(msg, "no RELOADING=1 on the second SIGHUP");
	free(msg);
	msg = notify_wait(&n, "READY=1", 3000);
	ck_assert_msg(msg, "no READY=1 after a failed reload");
	free(msg);
	tc_assert_ok(tcc_request(c, "ping", NULL));

	/* SIGTERM: STOPPING=1, then exit 0 */
	tcd_kill(&d, SIGTERM);
	msg = notify_wait(&n, "STOPPING=1", 3000);
	ck_assert_msg(msg, "no STOPPING=1 on SIGTERM");
	free(msg);
	ck_assert_int_eq(tcd_wait_exit(&d, TCD_STOP_TIMEOUT_MS), 0);
	tcc_close(c);
	notify_close(&n);
	free(env_notify);
	tcd_free(&d);
}
END_TEST

START_TEST(watchdog)
{
	struct tcd d;
	tcd_prepare(&d, NULL);
	struct notify n;
	notify_open(&n, &d);
	char *env_notify = xasprintf("NOTIFY_SOCKET=%s", n.path);
	/* 200 ms: the daemon should ping at least every 100 ms */
	const char *env[] = { env_notify, "WATCHDOG_USEC=200000", NULL };
	struct tcd_opts o = { .env = env, .no_wait = true };
	tcd_spawn(&d, &o);
	char *msg = notify_wait(&n, "READY=1", 5000);
	ck_assert_msg(msg, "no READY=1");
	free(msg);
	uint64_t t0 = tc_now_ms();
	int pings = 0;
	while (pings < 5 && tc_now_ms() - t0 < 3000) {
		msg = notify_wait(&n, "WATCHDOG=1", 1000);
		if (msg)
			pings++;
		free(msg);
	}
	ck_assert_msg(pings == 5, "%d WATCHDOG=1 in 3 s with WATCHDOG_USEC=200000", pings);
	ck_assert_uint_lt(tc_now_ms() - t0, 1500);
	ck_assert_int_eq(tcd_stop(&d), 0);
	notify_close(&n);
	free(env_notify);
	tcd_free(&d);
}
END_TEST

/* Journald: with JOURNAL_STREAM naming its stderr, the daemon logs to the
 * journal, not to stderr. Skipped where no journal runs. */
START_TEST(journal_when_under_systemd)
{
	if (access("/run/systemd/journal/socket", W_OK) < 0) {
		TC_SKIP("journal_when_under_systemd: no journald socket on this machine");
	}
	struct tcd d;
	tcd_prepare(&d, NULL);
	/* The log file will be the daemon's stderr: name its dev:ino. */
	int fd = open(d.log, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
	ck_assert(fd >= 0);
	struct stat st;
	ck_assert(fstat(fd, &st) == 0);
	close(fd);
	char *js = xasprintf("JOURNAL_STREAM=%llu:%llu", (unsigned long long)st.st_dev,
			     (unsigned long long)st.st_ino);
	const char *env[] = { js, NULL };
	struct tcd_opts o = { .env = env };
	tcd_spawn(&d, &o);
	ck_assert_int_eq(tcd_wait_socket(&d, d.sock, TCD_START_TIMEOUT_MS), 0);
	ck_assert_int_eq(tcd_stop(&d), 0);
	char *log = tcd_log(&d);
	ck_assert_msg(!strstr(log, "serving"), "logged to stderr under systemd: %s", log);
	free(log);
	free(js);
	tcd_free(&d);
}
END_TEST

int main(int argc, char **argv)
{
	if (argc > 3 && strcmp(argv[1], "--activate-with-failing-getfl") == 0)
		return activate_with_failing_getfl(argv[2], argv + 3);
	if (!realpath(argv[0], self))
		return 99;
	Suite *s = suite_create("integ_systemd");
	TCase *tc = tcase_create("systemd");
	tcase_add_test(tc, socket_activation);
	tcase_add_test(tc, fail_getfl_on_passed_socket);
	tcase_add_test(tc, readiness_and_reload_and_stop);
	tcase_add_test(tc, watchdog);
	tcase_add_test(tc, journal_when_under_systemd);
	suite_add_tcase(s, tc);

	return run_suite(s);
}
