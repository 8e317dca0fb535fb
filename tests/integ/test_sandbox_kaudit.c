/* SPDX-License-Identifier: MIT */
/*
 * The sandbox's note decided by what the kernel refused: with Landlock's
 * audit records readable, a call whose child was refused gets a note
 * naming the refusal even when its stderr says nothing; admin/stats and
 * the log say where notes come from; a daemon that may not read the
 * records says so and keeps stderr's patterns.
 *
 * The records exist only while audit is on. When it is off and the test
 * runs as root, the test turns it on for its own duration (AUDIT_SET);
 * as root it also turns it off and on again to see the daemon follow, and
 * restores the state it found when it ends, fails or is stopped by a
 * signal. Not root and audit off, it skips, saying why.
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <linux/audit.h>
#include <linux/netlink.h>

#include "tests/integ/harness.h"
#include "tests/unit/check_main.h"

#define AUTO "\"confirmation\":{\"default\":{\"write\":\"auto\",\"execute\":\"auto\"}}"

/* 1 or 0: audit's state; a negative errno when it cannot be asked. */
static int audit_get(void)
{
	int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_AUDIT);
	if (fd < 0)
		return -errno;
	struct timeval tv = { .tv_sec = 2 };
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	struct nlmsghdr h = { .nlmsg_len = NLMSG_LENGTH(0), .nlmsg_type = AUDIT_GET, .nlmsg_flags = NLM_F_REQUEST };
	struct sockaddr_nl to = { .nl_family = AF_NETLINK };
	int r = -EPROTO;
	if (sendto(fd, &h, h.nlmsg_len, 0, (struct sockaddr *)&to, sizeof(to)) < 0) {
		r = -errno;
		goto out;
	}
	for (int i = 0; i < 4 && r == -EPROTO; i++) {
		char buf[1024];
		ssize_t k = recv(fd, buf, sizeof(buf), 0);
		if (k < 0) {
			r = -errno;
			break;
		}
		size_t left = (size_t)k;
		for (struct nlmsghdr *m = (void *)buf; NLMSG_OK(m, left); m = NLMSG_NEXT(m, left)) {
			if (m->nlmsg_type == NLMSG_ERROR && ((struct nlmsgerr *)NLMSG_DATA(m))->error)
				r = ((struct nlmsgerr *)NLMSG_DATA(m))->error;
			else if (m->nlmsg_type == AUDIT_GET)
				r = ((struct audit_status *)NLMSG_DATA(m))->enabled ? 1 : 0;
		}
	}
out:
	close(fd);
	return r;
}

/* Sets audit's state; 0 or a negative errno. Async-signal-safe. */
static int audit_set(unsigned enabled)
{
	int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_AUDIT);
	if (fd < 0)
		return -errno;
	struct timeval tv = { .tv_sec = 2 };
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	struct {
		struct nlmsghdr h;
		struct audit_status s;
	} m = { .h = { .nlmsg_len = NLMSG_LENGTH(sizeof(struct audit_status)), .nlmsg_type = AUDIT_SET,
		       .nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK },
		.s = { .mask = AUDIT_STATUS_ENABLED, .enabled = enabled } };
	struct sockaddr_nl to = { .nl_family = AF_NETLINK };
	int r = 0;
	if (sendto(fd, &m, m.h.nlmsg_len, 0, (struct sockaddr *)&to, sizeof(to)) < 0) {
		r = -errno;
	} else {
		char buf[512];
		ssize_t k = recv(fd, buf, sizeof(buf), 0);
		struct nlmsghdr *a = (void *)buf;
		if (k < 0)
			r = -errno;
		else if (NLMSG_OK(a, (size_t)k) && a->nlmsg_type == NLMSG_ERROR)
			r = ((struct nlmsgerr *)NLMSG_DATA(a))->error;
	}
	close(fd);
	return r;
}

/* The state audit had when the test started (-1: not to be restored):
 * set again when it ends, whichever case changed it. */
static volatile sig_atomic_t found = -1;
static pid_t main_pid;

static void restore(void)
{
	/* Only the main process (Check's forked cases exit too). */
	if (found >= 0 && getpid() == main_pid && audit_get() != found) {
		if (audit_set((unsigned)found) < 0)
			fprintf(stderr, "test_sandbox_kaudit: could not set audit back to %d\n", (int)found);
	}
}

static void on_signal(int sig)
{
	restore();
	signal(sig, SIG_DFL);
	raise(sig);
}

/* Starts root's daemon; returns a connection to it. */
static struct tcc *start(struct tcd *d)
{
	tcd_start(d, "{" AUTO "}");
	return tcc_connect(d);
}

/* Closes c and stops the daemon, which must exit 0. */
static void finish(struct tcd *d, struct tcc *c)
{
	tcc_close(c);
	tcd_finish(d);
}

/* The shell signals the daemon, outside the sandbox, its stderr silent:
 * Landlock's scope refuses it, and the note names that from the kernel's
 * record (or the plan). */
static const struct json *signal_the_daemon(struct tcc *c, pid_t pid, const char *when)
{
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "kill -0 %d 2>/dev/null; exit 1", (int)pid);
	const struct json *r = tcc_shell(c, cmd);
	tc_assert_ok(r);
	ck_assert_msg(strstr(tc_text(r), "[sandbox] The sandbox refused signalling process"), "%s: %s", when,
		      tc_text(r));
	return r;
}

/* A refusal stderr does not speak of: the note comes from the kernel's
 * record alone, naming what was refused. */
START_TEST(kernel_names_a_refusal_stderr_hides)
{
	struct tcd d;
	struct tcc *c = start(&d);
	const struct json *st = tcc_request(c, "admin/stats", "{}");
	ck_assert_msg(tj_str(st, "result.sandboxNotes.from") && str_eq(tj_str(st, "result.sandboxNotes.from"), "audit"),
		      "%s", tcd_log(&d));
	/* Signalling the daemon, outside the sandbox: Landlock's scope refuses it. */
	const struct json *r = signal_the_daemon(c, d.pid, "audit on");
	tc_assert_text_has(r, "[sandbox] The sandbox refused signalling process %d", (int)d.pid);
	tc_assert_text_has(r, "outside the sandbox");
	/* A child refused nothing: no note. */
	r = tcc_shell(c, "echo fine; exit 1");
	tc_assert_ok(r);
	tc_assert_text_lacks(r, "[sandbox]");
	st = tcc_request(c, "admin/stats", "{}");
	ck_assert_int_ge(tj_int(st, "result.sandboxNotes.records"), 2);
	ck_assert_int_eq(tj_int(st, "result.sandboxNotes.notes"), 1);
	tcc_close(c);
	char *log = tcd_log(&d);
	ck_assert_msg(strstr(log, "sandbox notes: from the kernel's audit records"), "%s", log);
	free(log);
	tcd_finish(&d);
}
END_TEST

/* stderr speaking of a refusal and the kernel's record of it: the note
 * names it (the record waited for a moment when not there yet). */
START_TEST(kernel_and_stderr_agree)
{
	struct tcd d;
	struct tcc *c = start(&d);
	const struct json *r = tcc_shell(c, tcc_fmt(c, "kill -0 %d; exit 1", (int)d.pid));
	tc_assert_ok(r);
	tc_assert_text_has(r, "Operation not permitted");
	tc_assert_text_has(r, "[sandbox] The sandbox refused signalling process");
	finish(&d, c);
}
END_TEST

/* A refusal just before the child exits, stderr silent: its record may
 * still be in the kernel's audit queue when the exit is seen; the daemon
 * waits for that queue, so every call gets its note. */
START_TEST(records_still_queued_are_waited_for)
{
	TC_SKIP_UNDER_VALGRIND("children run without the sandbox there");
	struct tcd d;
	struct tcc *c = start(&d);
	for (int i = 0; i < 12; i++) {
		char when[32];
		snprintf(when, sizeof(when), "call %d", i);
		signal_the_daemon(c, d.pid, when);
	}
	finish(&d, c);
}
END_TEST

static bool stats_from(struct tcc *c, const char *from)
{
	const struct json *st = tcc_request(c, "admin/stats", "{}");
	const char *f = tj_str(st, "result.sandboxNotes.from");
	return f && str_eq(f, from);
}

/* Audit turned off after the start: admin/stats says so (asked again at
 * most once a second), and says "audit" again once it is back on. */
START_TEST(status_follows_audit)
{
	TC_SKIP_UNDER_VALGRIND("children run without the sandbox there");
	if (audit_set(1) < 0)
		TC_SKIP("audit's state cannot be set here");
	struct tcd d;
	struct tcc *c = start(&d);
	ck_assert(stats_from(c, "audit"));
	ck_assert_int_eq(audit_set(0), 0);
	bool off = tc_wait_until(stats_from(c, "plan"), tc_wait_scaled(5000));
	/* Back on before anything can fail. */
	ck_assert_int_eq(audit_set(1), 0);
	ck_assert_msg(off, "still from audit after audit was turned off");
	const struct json *st = tcc_request(c, "admin/stats", "{}");
	const char *why = tj_str(st, "result.sandboxNotes.why");
	ck_assert_msg(why == NULL || strstr(why, "turned off after the daemon started"), "%s", why);
	ck_assert(tc_wait_until(stats_from(c, "audit"), tc_wait_scaled(5000)));
	/* And its records are read: a refusal stderr hides is named. */
	signal_the_daemon(c, d.pid, "audit on again");
	finish(&d, c);
}
END_TEST

/* Audit off when the daemon starts, turned on later: the daemon
 * subscribes then, and its notes come from the records. */
START_TEST(subscribes_when_audit_comes_on)
{
	TC_SKIP_UNDER_VALGRIND("children run without the sandbox there");
	if (audit_set(0) < 0)
		TC_SKIP("audit's state cannot be set here");
	struct tcd d;
	struct tcc *c = start(&d);
	const struct json *st = tcc_request(c, "admin/stats", "{}");
	bool off_at_start = stats_from(c, "plan");
	const char *why = tj_str(st, "result.sandboxNotes.why");
	bool said_off = why && strstr(why, "audit is off");
	ck_assert_int_eq(audit_set(1), 0);
	ck_assert_msg(off_at_start && said_off, "%s", why ? why : "(no why)");
	ck_assert(tc_wait_until(stats_from(c, "audit"), tc_wait_scaled(5000)));
	signal_the_daemon(c, d.pid, "audit turned on");
	finish(&d, c);
}
END_TEST

/* A private path that Landlock refuses (not a mount: one beneath a
 * write_extra path, which no cover may stand on), made with the
 * directory that holds it. */
#define LANDLOCKS_IT "\"write_extra\":[\"@DIR@/wx\"],\"deny_read\":[\"@DIR@/wx/secret\"]"
static char *landlocked_secret(const struct tcd *d)
{
	char *wx = xasprintf("%s/wx", d->dir), *secret = xasprintf("%s/secret", wx);
	ck_assert_int_eq(mkdir(wx, 0755) == 0 || errno == EEXIST, 1);
	ck_assert_int_eq(mkdir(secret, 0755), 0);
	free(wx);
	return secret;
}

/* Starts root's daemon with a private path Landlock refuses
 * (LANDLOCKS_IT), holding a file key, whose path is returned (malloc'd). */
static struct tcc *start_with_secret(struct tcd *d, char **ret_key)
{
	tcd_start(d, "{" AUTO ",\"sandbox\":{" LANDLOCKS_IT "}}");
	char *secret = landlocked_secret(d);
	*ret_key = xasprintf("%s/key", secret);
	int fd = open(*ret_key, O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
	ck_assert_int_ge(fd, 0);
	close(fd);
	free(secret);
	return tcc_connect(d);
}

/* Root's daemon on a machine whose audit is off (it never turns it on):
 * Landlock's refusal of a private path is named from the replayed plan,
 * and admin/stats counts the line. */
START_TEST(audit_off_the_plan_names_it)
{
	TC_SKIP_UNDER_VALGRIND("children run without the sandbox there");
	if (audit_set(0) < 0)
		TC_SKIP("audit's state cannot be set here");
	struct tcd d;
	char *key;
	struct tcc *c = start_with_secret(&d, &key);
	ck_assert(stats_from(c, "plan"));
	const struct json *r = tcc_shell(c, tcc_fmt(c, "cat %s", key));
	ck_assert_int_eq(audit_set(1), 0);
	tc_assert_text_has(r, "[sandbox] The sandbox refused accessing %s (a private path, sandbox.deny_read)", key);
	const struct json *st = tcc_request(c, "admin/stats", "{}");
	ck_assert_int_ge(tj_int(st, "result.sandboxNotes.paths"), 1);
	finish(&d, c);
	free(key);
}
END_TEST

/* Audit on: a private path the kernel recorded refused is named once,
 * in the record's words, not again from the plan. */
START_TEST(record_and_plan_name_it_once)
{
	TC_SKIP_UNDER_VALGRIND("children run without the sandbox there");
	struct tcd d;
	char *key;
	struct tcc *c = start_with_secret(&d, &key);
	ck_assert(stats_from(c, "audit"));
	const struct json *r = tcc_shell(c, tcc_fmt(c, "cat %s", key));
	const char *note = strstr(tc_text(r), "[sandbox] The sandbox refused ");
	char *want = xasprintf("reading %s", key);
	const char *first = note ? strstr(note, want) : NULL;
	ck_assert_msg(first && !strstr(first + strlen(want), key), "%s", tc_text(r));
	free(want);
	finish(&d, c);
	free(key);
}
END_TEST

/* A refusal the command handles, ending it with status 0: the note still
 * names it from the kernel's record, once the daemon has read that (a
 * call that did not fail waits for none): the child goes on only when
 * admin/stats counts a record more. */
START_TEST(kernel_names_a_refusal_of_a_success)
{
	TC_SKIP_UNDER_VALGRIND("children run without the sandbox there");
	struct tcd d;
	struct tcc *c = start(&d);
	ck_assert(stats_from(c, "audit"));
	int64_t before = tj_int(tcc_request(c, "admin/stats", "{}"), "result.sandboxNotes.records");
	const char *cmd = tcc_fmt(c, "{\"command\":\"kill -0 %d 2>/dev/null; echo rc=$?; "
				     "while [ ! -e go ]; do sleep 0.05; done; echo done\","
				     "\"background\":true,\"until\":\"rc=\",\"yield_ms\":30000}",
				  (int)d.pid);
	const struct json *r = tcc_call(c, "shell", cmd);
	tc_assert_ok(r);
	char *id = xstrdup(tj_str(r, "result.structuredContent.process_id"));
	ck_assert(tc_wait_until(tj_int(tcc_request(c, "admin/stats", "{}"), "result.sandboxNotes.records") > before,
				10000));
	tcd_put(&d, "go", "");
	const char *io = tcc_fmt(c, "{\"process_id\":\"%s\",\"wait_ms\":2000}", id);
	ck_assert(tc_wait_until(!tj_bool(r = tcc_call(c, "process_io", io), "result.structuredContent.running"),
				30000));
	tc_assert_text_has(r, "exit code 0");
	tc_assert_text_has(r, "[sandbox] The sandbox refused signalling process %d", (int)d.pid);
	free(id);
	/* The next call, refused nothing and succeeding, has none. */
	r = tcc_shell(c, "echo fine");
	tc_assert_ok(r);
	tc_assert_text_lacks(r, "[sandbox]");
	finish(&d, c);
}
END_TEST

/* A daemon that may not read the records (uid 65534, no CAP_AUDIT_READ)
 * says so at start and in admin/stats, and keeps stderr's patterns. */
START_TEST(without_the_records_says_so)
{
	if (access("/usr/bin/setpriv", X_OK) < 0)
		TC_SKIP("needs /usr/bin/setpriv to start a daemon as uid 65534");
	struct tcd d;
	tcd_spawn_nobody(&d, &(struct tcd_opts){ .config = "{" AUTO ",\"tools_dir\":null}" });
	ck_assert_msg(tcd_wait_socket(&d, d.sock, TCD_START_TIMEOUT_MS) == 0, "%s", tcd_log(&d));
	struct tcc *c = tcc_connect(&d);
	const struct json *st = tcc_request(c, "admin/stats", "{}");
	ck_assert_str_eq(tj_str(st, "result.sandboxNotes.from"), "plan");
	ck_assert_msg(strstr(tj_str(st, "result.sandboxNotes.why"), "CAP_AUDIT_READ"), "%s",
		      tj_str(st, "result.sandboxNotes.why"));
	/* Without the records, the read-only mount the path is on still
	 * decides the note (refusal.c). */
	const struct json *r = tcc_shell(c, "echo x > /usr/kaudit_probe; exit 1");
	tc_assert_ok(r);
	tc_assert_text_has(r, "[sandbox] The sandbox refused writing /usr/kaudit_probe (read-only in the sandbox");
	tcc_close(c);
	char *log = tcd_log(&d);
	ck_assert_msg(strstr(log, "sandbox notes: from the sandbox's plan, without Landlock's audit records (") && strstr(log, "CAP_AUDIT_READ"),
		      "%s", log);
	free(log);
	tcd_finish(&d);
}
END_TEST

int main(void)
{
	long abi = syscall(444 /* landlock_create_ruleset */, NULL, 0, 1U);
	if (abi < 7) {
		printf("SKIP Landlock writes audit records from ABI 7 on; this kernel has %ld\n", abi);
		return TC_EXIT_SKIP;
	}
	int on = audit_get();
	if (on < 0) {
		printf("SKIP audit's state cannot be asked here (%s)\n", strerror(-on));
		return TC_EXIT_SKIP;
	}
	main_pid = getpid();
	if (!on && geteuid() != 0) {
		printf("SKIP audit is off and only root may turn it on for the test's duration\n");
		return TC_EXIT_SKIP;
	}
	if (geteuid() == 0) {
		/* Restored at exit and on the signals that stop a test run. */
		found = on;
		atexit(restore);
		signal(SIGTERM, on_signal);
		signal(SIGINT, on_signal);
		signal(SIGHUP, on_signal);
		signal(SIGABRT, on_signal);
	}
	if (!on) {
		int r = audit_set(1);
		if (r < 0) {
			printf("SKIP audit is off and could not be turned on (%s)\n", strerror(-r));
			return TC_EXIT_SKIP;
		}
	}
	Suite *s = suite_create("sandbox_kaudit");
	TCase *tc = tcase_create("sandbox_kaudit");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, kernel_names_a_refusal_stderr_hides);
	tcase_add_test(tc, kernel_and_stderr_agree);
	tcase_add_test(tc, records_still_queued_are_waited_for);
	tcase_add_test(tc, record_and_plan_name_it_once);
	tcase_add_test(tc, kernel_names_a_refusal_of_a_success);
	/* Only where this test may set audit's state (and set it back). */
	if (geteuid() == 0) {
		tcase_add_test(tc, status_follows_audit);
		tcase_add_test(tc, subscribes_when_audit_comes_on);
		tcase_add_test(tc, audit_off_the_plan_names_it);
	}
	if (geteuid() == 0)
		tcase_add_test(tc, without_the_records_says_so);
	suite_add_tcase(s, tc);
	int r = run_suite(s);
	restore();
	return r;
}
