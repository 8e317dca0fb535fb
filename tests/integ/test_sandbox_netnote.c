/* SPDX-License-Identifier: MIT */
/*
 * The note of a tool without network names where it tried to go, as the
 * daemon saw it (lib/sandbox/netnotif.c), with the real daemon: bash's
 * /dev/tcp to an IPv4 and an IPv6 address, a grandchild's connect, a
 * loopback connect (refused too: such a tool has no network at all), a
 * name lookup's name server, a UDP sendto(), a thread's connect; none
 * for an AF_UNIX connect, and sendmsg() not handed over; a call that
 * connects 1000 times gets a bounded note while another client is
 * answered; tools with network "proxy" or true are not touched; a child
 * started without a spawner (a plan's first, a terminal's) is named as
 * well, through a listener of its own; a daemon told the kernel cannot
 * (TOOLCALLD_NO_SECCOMP_NOTIFY) keeps the hedged note, said in the log
 * and admin/stats; a spawner's listener is closed with its filter.
 */
#include <check.h>
#include <dirent.h>
#include <signal.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tests/integ/harness.h"
#include "tests/unit/check_main.h"

#define AUTO "\"confirmation\":{\"default\":{\"write\":\"auto\",\"execute\":\"auto\",\"network\":\"auto\"}}"

static const char *text_of(const struct json *r)
{
	const char *t = tj_str(r, "result.content.0.text");
	return t ? t : "";
}

/* Starts a daemon; skips when its children do not go through a spawner
 * that hands it their network calls. */
static struct tcc *start_warm(struct tcd *d, const char *more, bool warm)
{
	char *cfg = xasprintf("{" AUTO "%s}", more);
	tcd_start(d, cfg);
	free(cfg);
	struct tcc *c = tcc_connect(d);
	const struct json *st = tcc_request(c, "admin/stats", NULL);
	if (!tj_bool(st, "result.sandboxNetworkNotes.on")) {
		char *why = xstrdup(tj_str(st, "result.sandboxNetworkNotes.why") ?: "?");
		tcc_close(c);
		tcd_free(d);
		tc_skip_note("the daemon does not see the network calls here: %s", why);
		free(why);
		return NULL;
	}
	/* The first call of a plan starts its child directly while the
	 * mount namespace of the next is made ahead; the next ones go
	 * through the spawner. */
	for (int i = 0; warm && i < 2; i++)
		tc_assert_ok(tcc_shell(c, "true"));
	return c;
}

static struct tcc *start(struct tcd *d, const char *more)
{
	return start_warm(d, more, true);
}

/* Skips unless the shell's child went through a listener. */
static bool need_listener(struct tcd *d, struct tcc *c)
{
	const struct json *st = tcc_request(c, "admin/stats", NULL);
	if (tj_int(st, "result.sandboxNetworkNotes.listeners") >= 1)
		return true;
	char *log = tcd_log(d);
	tc_skip_note("no spawner hands network calls to the daemon here: %s", log);
	free(log);
	tcc_close(c);
	tcd_free(d);
	return false;
}

START_TEST(connect_named)
{
	TC_SKIP_UNDER_VALGRIND("children run without the sandbox there");
	if (access("/bin/bash", X_OK) < 0)
		TC_SKIP("needs bash");
	struct tcd d;
	struct tcc *c = start(&d, "");
	if (!c)
		return;
	const struct json *r = tcc_shell(c, "bash -c 'exec 3<>/dev/tcp/1.1.1.1/80'");
	if (!need_listener(&d, c))
		return;
	/* (Landlock's audit records, where the daemon reads them, may add
	 * what bash was refused besides: "; the sandbox refused ...".) */
	ck_assert_msg(strstr(text_of(r), "[sandbox] connect to 1.1.1.1:80 refused: this tool has no network") &&
			      strstr(text_of(r), "(profile"),
		      "%s", text_of(r));
	ck_assert_msg(!strstr(text_of(r), "may have been"), "%s", text_of(r));
	/* Found by the call's cgroup where calls have one of their own. */
	char *enforced = tj_text(tj(r, "result.structuredContent.sandbox.enforced"));
	if (enforced && strstr(enforced, "\"cgroup\""))
		ck_assert_int_ge(tj_int(tcc_request(c, "admin/stats", NULL), "result.sandboxNetworkNotes.byCgroup"), 1);
	free(enforced);
	/* IPv6, by a grandchild (bash started by sh), and a thread's own
	 * task is mapped the same way. */
	r = tcc_shell(c, "bash -c 'exec 3<>/dev/tcp/2606:4700:4700::1111/443'; exit 3");
	ck_assert_msg(strstr(text_of(r), "[sandbox] connect to [2606:4700:4700::1111]:443 refused: this tool has no "
					 "network"),
		      "%s", text_of(r));
	/* Loopback is refused as well (no socket of the network at all). */
	r = tcc_shell(c, "bash -c 'exec 3<>/dev/tcp/127.0.0.1/9'");
	ck_assert_msg(strstr(text_of(r), "[sandbox] connect to 127.0.0.1:9 refused: this tool has no network"), "%s",
		      text_of(r));
	/* A name looked up: the resolver opens its sockets (AF_UNIX ones
	 * stand in) and gives up where it cannot set IP_RECVERR, so the
	 * note says what was seen: sockets opened, no destination. */
	if (system("grep -q '^nameserver' /etc/resolv.conf") == 0 && access("/usr/bin/getent", X_OK) == 0) {
		r = tcc_shell(c, "getent hosts example.com");
		ck_assert_msg((strstr(text_of(r), ":53 (DNS)") || strstr(text_of(r), "[sandbox] opening a network socket")) &&
				      strstr(text_of(r), "refused: this tool has no network"),
			      "%s", text_of(r));
	}
	/* The socket a child gets is never of the network's families (§10):
	 * the kernel's network code stays out of its reach. */
	if (access("/usr/bin/python3", X_OK) == 0) {
		r = tcc_shell(c, "python3 -c 'import socket; s = socket.socket(socket.AF_INET); "
				 "print(\"domain\", s.getsockopt(socket.SOL_SOCKET, socket.SO_DOMAIN))'");
		ck_assert_msg(strstr(text_of(r), "domain 1\n"), "%s", text_of(r));
	}
	/* The note is the call's own: the next failing call has none. */
	r = tcc_shell(c, "exit 4");
	ck_assert_msg(!strstr(text_of(r), "[sandbox]"), "%s", text_of(r));
	/* A sendto() with a destination (UDP), where python is. */
	if (access("/usr/bin/python3", X_OK) == 0) {
		r = tcc_shell(c, "python3 -c 'import socket; s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); "
				 "s.sendto(b\"x\", (\"9.9.9.9\", 53))'");
		ck_assert_msg(strstr(text_of(r), "[sandbox] sending to 9.9.9.9:53 (DNS) refused: this tool has no network"),
			      "%s", text_of(r));
		/* A thread's connect (its task is not the process's). */
		r = tcc_shell(c, "python3 -c 'import socket, threading\n"
				 "def f():\n"
				 "    try: socket.create_connection((\"8.8.4.4\", 853), timeout=5)\n"
				 "    except OSError as e: print(e)\n"
				 "t = threading.Thread(target=f); t.start(); t.join(); raise SystemExit(2)'");
		ck_assert_msg(strstr(text_of(r), "Network is unreachable") &&
				      strstr(text_of(r), "[sandbox] connect to 8.8.4.4:853 refused: this tool has no network"),
			      "%s", text_of(r));
	}
	tcc_close(c);
	ck_assert_int_eq(tcd_stop(&d), 0);
	tcd_free(&d);
}
END_TEST

/* A child started without a spawner (the first call of a plan, while
 * its mount namespace is made ahead; a terminal's) loads the program
 * that hands its network calls to the daemon with a listener of its own,
 * sent to the daemon before its exec: its note names the destination
 * too, and the listener is closed with the child's tree. */
START_TEST(direct_start_named)
{
	TC_SKIP_UNDER_VALGRIND("children run without the sandbox there");
	if (access("/bin/bash", X_OK) < 0)
		TC_SKIP("needs bash");
	struct tcd d;
	struct tcc *c = start_warm(&d, "", false);
	if (!c)
		return;
	/* The very first call of a fresh daemon. */
	const struct json *r = tcc_shell(c, "bash -c 'exec 3<>/dev/tcp/1.1.1.1/80'");
	ck_assert_msg(strstr(text_of(r), "[sandbox] connect to 1.1.1.1:80 refused: this tool has no network"), "%s",
		      text_of(r));
	ck_assert_msg(!strstr(text_of(r), "may have been"), "%s", text_of(r));
	/* On a terminal: started directly whatever the plan. */
	r = tcc_call(c, "shell", "{\"command\":\"bash -c 'exec 3<>/dev/tcp/1.1.1.1/80'\",\"tty\":true,"
				"\"background\":true,\"yield_ms\":20000}");
	char *all = tj_text(r);
	ck_assert_msg(strstr(all, "connect to 1.1.1.1:80 refused: this tool has no network"), "%s", all);
	free(all);
	/* The listeners close with their children's trees: of seven calls
	 * started directly, none is left (the spawner of the plan may
	 * hold one). */
	for (int i = 0; i < 5; i++)
		tc_assert_ok(tcc_call(c, "shell", "{\"command\":\"true\",\"tty\":true,\"background\":true,"
						  "\"yield_ms\":20000}"));
	ck_assert(tc_wait_until(tj_int(tcc_request(c, "admin/stats", NULL),
				       "result.sandboxNetworkNotes.listeners") <= 1, 10000));
	const struct json *st = tcc_request(c, "admin/stats", NULL);
	ck_assert_int_eq(tj_int(st, "result.sandboxNetworkNotes.listenersFull"), 0);
	tcc_close(c);
	ck_assert_int_eq(tcd_stop(&d), 0);
	tcd_free(&d);
}
END_TEST

/* A daemon that is not root (uid 65534 here) starts every child
 * directly: each is named through a listener of its own. */
START_TEST(daemon_not_root_named)
{
	TC_SKIP_UNDER_VALGRIND("children run without the sandbox there");
	if (geteuid() != 0 || access("/usr/bin/setpriv", X_OK) < 0 || access("/bin/bash", X_OK) < 0)
		TC_SKIP("needs root, /usr/bin/setpriv and bash to start a daemon as uid 65534");
	struct tcd d;
	struct tcd_opts o = { .config = "{" AUTO "}", .no_wait = true };
	static const char *const wrapper[] = { "/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
					       NULL };
	o.wrapper = wrapper;
	tcd_prepare(&d, &o);
	ck_assert_int_eq(chmod(d.dir, 0777), 0);
	ck_assert_int_eq(chmod(d.ws, 0777), 0);
	ck_assert_int_eq(chmod(d.config, 0644), 0);
	tcd_spawn(&d, &o);
	if (tcd_wait_socket(&d, d.sock, 10000) != 0) {
		char *log = tcd_log(&d);
		tc_skip_note("a daemon of uid 65534 does not start here: %s", log);
		free(log);
		tcd_free(&d);
		return;
	}
	struct tcc *c = tcc_connect(&d);
	const struct json *st = tcc_request(c, "admin/stats", NULL);
	if (!tj_bool(st, "result.sandboxNetworkNotes.on")) {
		tcc_close(c);
		tcd_free(&d);
		TC_SKIP("the daemon does not see the network calls here");
	}
	for (int i = 0; i < 3; i++) {
		const struct json *r = tcc_shell(c, "id -u; bash -c 'exec 3<>/dev/tcp/1.1.1.1/80'");
		ck_assert_msg(strstr(text_of(r), "65534") &&
				      strstr(text_of(r), "[sandbox] connect to 1.1.1.1:80 refused: this tool has no network"),
			      "%s", text_of(r));
	}
	tcc_close(c);
	ck_assert_int_eq(tcd_stop(&d), 0);
	tcd_free(&d);
}
END_TEST

/* An AF_UNIX connect (refused by the file system, not the sandbox) and
 * sendmsg() go on as before, with no network note, and sendmsg() is
 * not handed to the daemon. */
START_TEST(unix_connect_not_named)
{
	TC_SKIP_UNDER_VALGRIND("children run without the sandbox there");
	if (access("/usr/bin/python3", X_OK) < 0)
		TC_SKIP("needs python3");
	struct tcd d;
	struct tcc *c = start(&d, "");
	if (!c)
		return;
	const struct json *r = tcc_shell(c,
		"python3 -c 'import socket\n"
		"x = [open(\"/dev/null\") for i in range(4)]\n"
		"a, b = socket.socketpair()\n"
		"for i in range(100): a.sendmsg([b\"hi\"]); b.recv(2)\n"
		"a.sendmsg([b\"hi\"]); print(b.recv(2))\n"
		"s = socket.socket(socket.AF_UNIX)\n"
		"s.connect(\"/nonexistent/sock\")'");
	if (!need_listener(&d, c))
		return;
	ck_assert_msg(strstr(text_of(r), "b'hi'") && strstr(text_of(r), "No such file or directory"), "%s",
		      text_of(r));
	ck_assert_msg(!strstr(text_of(r), "this tool has no network"), "%s", text_of(r));
	/* The connect's address length (20) is one the network's could
	 * have: that one was handed over, none of the 101 messages. */
	ck_assert_int_le(tj_int(tcc_request(c, "admin/stats", NULL), "result.sandboxNetworkNotes.notifications"), 2);
	tcc_close(c);
	ck_assert_int_eq(tcd_stop(&d), 0);
	tcd_free(&d);
}
END_TEST

/* 1000 connects: the note names the destinations once each and counts
 * the attempts; the daemon answers another client meanwhile. */
START_TEST(connect_flood_bounded)
{
	TC_SKIP_UNDER_VALGRIND("children run without the sandbox there");
	if (access("/bin/bash", X_OK) < 0)
		TC_SKIP("needs bash");
	struct tcd d;
	struct tcc *c = start(&d, "");
	if (!c)
		return;
	struct tcc *other = tcc_connect(&d);
	char *args = xasprintf("{\"command\":%s}",
			       "\"bash -c 'for i in $(seq 1000); do (exec 3<>/dev/tcp/10.0.$((i % 7)).1/80) 2>/dev/null; "
			       "done; exec 3<>/dev/tcp/1.1.1.1/80'\"");
	int64_t id = tcc_send_request(c, "tools/call", tcc_fmt(c, "{\"name\":\"shell\",\"arguments\":%s}", args));
	free(args);
	/* While it runs, another client is answered. */
	ck_assert(tcd_wait_stat(&d, "result.sandboxNetworkNotes.recorded", 50, 30000));
	const struct json *p = tcc_request_t(other, "ping", NULL, 5000);
	ck_assert_msg(tj(p, "result"), "ping unanswered while a child floods");
	char idt[32];
	snprintf(idt, sizeof(idt), "%" PRId64, id);
	const struct json *r = tcc_wait_id(c, idt, 120000);
	ck_assert_msg(r, "the flooding call did not end");
	const char *t = text_of(r);
	ck_assert_msg(strstr(t, "[sandbox] connect to 10.0.1.1:80, connect to 10.0.2.1:80, connect to 10.0.3.1:80, "
				"connect to 10.0.4.1:80 and 429 more attempts elsewhere (1001 attempts in all) "
				"refused: this tool has no network"),
		      "%s", t);
	ck_assert_int_lt((long)strlen(t), 4096);
	tcc_close(other);
	tcc_close(c);
	ck_assert_int_eq(tcd_stop(&d), 0);
	tcd_free(&d);
}
END_TEST

/* network true: the same connect goes out to the network as before (or
 * fails by the machine's network), never with this note. */
START_TEST(network_tools_untouched)
{
	TC_SKIP_UNDER_VALGRIND("children run without the sandbox there");
	if (access("/bin/bash", X_OK) < 0)
		TC_SKIP("needs bash");
	struct tcd d;
	struct tcc *c = start(&d, ",\"sandbox\":{\"network\":true}");
	if (!c)
		return;
	const struct json *r = tcc_shell(c, "bash -c 'exec 3<>/dev/tcp/127.0.0.1/9'");
	ck_assert_msg(strstr(text_of(r), "Connection refused") && !strstr(text_of(r), "this tool has no network"),
		      "%s", text_of(r));
	const struct json *st = tcc_request(c, "admin/stats", NULL);
	ck_assert_int_eq(tj_int(st, "result.sandboxNetworkNotes.notifications"), 0);
	tcc_close(c);
	ck_assert_int_eq(tcd_stop(&d), 0);
	tcd_free(&d);
}
END_TEST

/* network "proxy" (a root daemon: a namespace of loopback only): the
 * connect is the namespace's to refuse, never handed to the daemon. */
START_TEST(proxy_tools_untouched)
{
	TC_SKIP_UNDER_VALGRIND("children run without the sandbox there");
	if (geteuid() != 0 || access("/bin/bash", X_OK) < 0)
		TC_SKIP("needs a root daemon (a network namespace per call) and bash");
	struct tcd d;
	struct tcc *c = start(&d, ",\"sandbox\":{\"network\":\"proxy\"}");
	if (!c)
		return;
	const struct json *r = tcc_shell(c, "bash -c 'exec 3<>/dev/tcp/127.0.0.1/9'");
	if (!tj_str(r, "result.structuredContent.sandbox.network")) {
		tcc_close(c);
		tcd_free(&d);
		TC_SKIP("no network namespace here: %s", text_of(r));
	}
	ck_assert_msg(strstr(text_of(r), "Connection refused") && !strstr(text_of(r), "this tool has no network"),
		      "%s", text_of(r));
	const struct json *st = tcc_request(c, "admin/stats", NULL);
	ck_assert_int_eq(tj_int(st, "result.sandboxNetworkNotes.notifications"), 0);
	tcc_close(c);
	ck_assert_int_eq(tcd_stop(&d), 0);
	tcd_free(&d);
}
END_TEST

/* A process a call leaves behind, connecting after the call ended (the
 * call's end takes its tree down): named in no later call's note, and
 * the daemon answers. */
START_TEST(after_the_call_not_misplaced)
{
	TC_SKIP_UNDER_VALGRIND("children run without the sandbox there");
	if (access("/bin/bash", X_OK) < 0)
		TC_SKIP("needs bash");
	struct tcd d;
	struct tcc *c = start(&d, "");
	if (!c)
		return;
	const struct json *r = tcc_shell(c, "setsid bash -c 'sleep 1; exec 3<>/dev/tcp/1.1.1.1/80' "
					    ">/dev/null 2>&1 </dev/null &");
	tc_assert_ok(r);
	r = tcc_shell(c, "sleep 2; exit 5");
	ck_assert_msg(!strstr(text_of(r), "1.1.1.1"), "%s", text_of(r));
	const struct json *p = tcc_request_t(c, "ping", NULL, 5000);
	ck_assert_msg(tj(p, "result"), "ping unanswered");
	tcc_close(c);
	ck_assert_int_eq(tcd_stop(&d), 0);
	tcd_free(&d);
}
END_TEST

/* The daemon's spawner (comm toolcalld-spawn), or 0. */
static pid_t spawner_of(pid_t daemon)
{
	pid_t found = 0;
	DIR *dir = opendir("/proc");
	struct dirent *e;
	while (dir && !found && (e = readdir(dir))) {
		char path[300], buf[512];
		snprintf(path, sizeof(path), "/proc/%s/stat", e->d_name);
		FILE *f = fopen(path, "r");
		if (!f)
			continue;
		size_t n = fread(buf, 1, sizeof(buf) - 1, f);
		fclose(f);
		buf[n] = '\0';
		int ppid = 0;
		char *close_paren = strrchr(buf, ')');
		if (strstr(buf, "(toolcalld-spawn)") && close_paren && sscanf(close_paren + 2, "%*c %d", &ppid) == 1 &&
		    ppid == daemon)
			found = atoi(e->d_name);
	}
	if (dir)
		closedir(dir);
	return found;
}

/* A spawner that is gone, with no child left: its listener is closed (the
 * kernel says no task has its filter); the next spawner brings its own. */
START_TEST(listener_closed_with_its_filter)
{
	TC_SKIP_UNDER_VALGRIND("children run without the sandbox there");
	if (access("/bin/bash", X_OK) < 0)
		TC_SKIP("needs bash");
	struct tcd d;
	struct tcc *c = start(&d, "");
	if (!c)
		return;
	const struct json *r = tcc_shell(c, "bash -c 'exec 3<>/dev/tcp/1.1.1.1/80'");
	if (!need_listener(&d, c))
		return;
	pid_t sp = spawner_of(d.pid);
	ck_assert_int_gt(sp, 0);
	ck_assert_int_eq(kill(sp, SIGKILL), 0);
	int64_t n = -1;
	for (int i = 0; i < 200 && n != 0; i++) {
		n = tj_int(tcc_request(c, "admin/stats", NULL), "result.sandboxNetworkNotes.listeners");
		if (n)
			usleep(25000);
	}
	ck_assert_int_eq(n, 0);
	/* The next calls start a new spawner, whose listener is watched
	 * (the calls started directly meanwhile have their own, closed with
	 * them). */
	pid_t sp2 = 0;
	for (int i = 0; i < 8 && (sp2 <= 0 || sp2 == sp); i++) {
		(void)tcc_shell(c, "true");	/* the first may find the spawner gone */
		sp2 = spawner_of(d.pid);
	}
	ck_assert_msg(sp2 > 0 && sp2 != sp, "no new spawner");
	r = tcc_shell(c, "bash -c 'exec 3<>/dev/tcp/1.1.1.1/80'");
	ck_assert_msg(strstr(text_of(r), "[sandbox] connect to 1.1.1.1:80 refused"), "%s", text_of(r));
	ck_assert(tc_wait_until(tj_int(tcc_request(c, "admin/stats", NULL), "result.sandboxNetworkNotes.listeners") == 1,
				10000));
	tcc_close(c);
	ck_assert_int_eq(tcd_stop(&d), 0);
	tcd_free(&d);
}
END_TEST

/* Where the kernel cannot (as TOOLCALLD_NO_SECCOMP_NOTIFY makes it): the
 * log and admin/stats say so, and the note stays a guess. */
START_TEST(without_notification_said)
{
	TC_SKIP_UNDER_VALGRIND("children run without the sandbox there");
	if (access("/usr/bin/python3", X_OK) < 0)
		TC_SKIP("needs python3");
	struct tcd d;
	static const char *const env[] = { "TOOLCALLD_NO_SECCOMP_NOTIFY=1", NULL };
	tcd_start_opts(&d, &(struct tcd_opts){ .config = "{" AUTO "}", .env = env });
	ck_assert(tcd_wait_log(&d, "the network a tool without it tries is not seen (turned off by "
				   "TOOLCALLD_NO_SECCOMP_NOTIFY)", 1, 5000));
	struct tcc *c = tcc_connect(&d);
	const struct json *st = tcc_request(c, "admin/stats", NULL);
	ck_assert(!tj_bool(st, "result.sandboxNetworkNotes.on"));
	ck_assert_str_eq(tj_str(st, "result.sandboxNetworkNotes.why"), "turned off by TOOLCALLD_NO_SECCOMP_NOTIFY");
	for (int i = 0; i < 3; i++) {
		const struct json *r = tcc_shell(c, "echo 'curl: (6) Could not resolve host: example.com' >&2; "
						    "python3 -c 'import socket; socket.create_connection((\"1.1.1.1\", 80))'");
		ck_assert_msg(strstr(text_of(r), "[sandbox] This may have been refused by the sandbox: this tool "
						 "has no network (profile") && !strstr(text_of(r), "connect to"),
			      "%s", text_of(r));
	}
	st = tcc_request(c, "admin/stats", NULL);
	ck_assert_int_eq(tj_int(st, "result.sandboxNetworkNotes.notifications"), 0);
	tcc_close(c);
	ck_assert_int_eq(tcd_stop(&d), 0);
	tcd_free(&d);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("sandbox_netnote");
	TCase *tc = tcase_create("netnote");
	tcase_set_timeout(tc, 240);
	tcase_add_test(tc, connect_named);
	tcase_add_test(tc, unix_connect_not_named);
	tcase_add_test(tc, direct_start_named);
	tcase_add_test(tc, daemon_not_root_named);
	tcase_add_test(tc, connect_flood_bounded);
	tcase_add_test(tc, network_tools_untouched);
	tcase_add_test(tc, proxy_tools_untouched);
	tcase_add_test(tc, after_the_call_not_misplaced);
	tcase_add_test(tc, without_notification_said);
	tcase_add_test(tc, listener_closed_with_its_filter);
	suite_add_tcase(s, tc);
	return run_suite(s);
}
