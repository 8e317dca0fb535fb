/* SPDX-License-Identifier: MIT */
/*
 * The note of a tool without network names where it tried to go, as the
 * daemon saw it (lib/sandbox/netnotif.c), with the real daemon: bash's
 * /dev/tcp to an IPv4 and an IPv6 address, a grandchild's connect, a
 * loopback connect (refused too: such a tool has no network at all), a
 * name lookup's name server, a UDP sendto(), a thread's connect; none
 * for an AF_UNIX connect, and sendmsg() not handed over; a call that
 * connects 1000 times gets a bounded note while another client is
 * answered; tools with network true are not touched, those with network
 * "proxy" are told of a connect that bypasses the proxy; a background
 * process is told while it runs and at its end; a child
 * started without a spawner (a plan's first, a terminal's) is named as
 * well, through a listener of its own; a daemon told the kernel cannot
 * (TOOLCALLD_NO_SECCOMP_NOTIFY) keeps the hedged note, said in the log
 * and admin/stats; a spawner's listener is closed with its filter; a
 * command that handles the refusal and exits 0 is told too, one that
 * tried nothing of the network is not, whatever its stderr says.
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

/* bash's connect to 1.1.1.1:80 (port 80 of a public address). */
#define CONNECT_1111 "bash -c 'exec 3<>/dev/tcp/1.1.1.1/80'"

/* Fails the case unless the call's note names what (e.g. "connect to
 * 1.1.1.1:80") as refused for a tool without network. */
#define assert_named(r, what) tc_assert_text_has((r), "[sandbox] %s refused: this tool has no network", (what))

/* admin/stats' sandboxNetworkNotes.<name>. */
static int64_t notes_stat(struct tcc *c, const char *name)
{
	char *path = xasprintf("result.sandboxNetworkNotes.%s", name);
	int64_t v = tj_int(tcc_request(c, "admin/stats", NULL), path);
	free(path);
	return v;
}

/* Ends a case that cannot run here, saying why: the connection closed and
 * the daemon gone. */
static void give_up(struct tcd *d, struct tcc *c, const char *why, const char *detail)
{
	tc_skip_note("%s: %s", why, detail);
	tcc_close(c);
	tcd_free(d);
}

/* Starts a daemon with the config members more for a case that runs
 * program, its spawner warmed up when warm. NULL (the case skips, having
 * said why) when program is missing or the daemon's children do not go
 * through a spawner that hands it their network calls. */
static struct tcc *start_warm(struct tcd *d, const char *program, const char *more, bool warm)
{
	if (access(program, X_OK) < 0) {
		tc_skip_note("needs %s", program);
		return NULL;
	}
	char *cfg = xasprintf("{" AUTO "%s}", more);
	tcd_start(d, cfg);
	free(cfg);
	struct tcc *c = tcc_connect(d);
	const struct json *st = tcc_request(c, "admin/stats", NULL);
	if (!tj_bool(st, "result.sandboxNetworkNotes.on")) {
		char *why = xstrdup(tj_str(st, "result.sandboxNetworkNotes.why") ?: "?");
		give_up(d, c, "the daemon does not see the network calls here", why);
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

static struct tcc *start(struct tcd *d, const char *program, const char *more)
{
	return start_warm(d, program, more, true);
}

/* Skips unless the shell's child went through a listener. */
static bool need_listener(struct tcd *d, struct tcc *c)
{
	if (notes_stat(c, "listeners") >= 1)
		return true;
	char *log = tcd_log(d);
	give_up(d, c, "no spawner hands network calls to the daemon here", log);
	free(log);
	return false;
}

/* Stops the daemon (which must exit 0) after the case. */
static void finish(struct tcd *d, struct tcc *c)
{
	tcc_close(c);
	tcd_finish(d);
}

/* What a tool with a network of its own meets connecting to a closed
 * port of loopback: the port's refusal, with no note, and the daemon
 * handed no call. */
static void assert_connect_untouched(struct tcc *c, const struct json *r)
{
	tc_assert_text_has(r, "Connection refused");
	tc_assert_text_lacks(r, "this tool has no network");
	ck_assert_int_eq(notes_stat(c, "notifications"), 0);
}

START_TEST(connect_named)
{
	struct tcd d;
	struct tcc *c = start(&d, "/bin/bash", "");
	if (!c)
		return;
	const struct json *r = tcc_shell(c, CONNECT_1111);
	if (!need_listener(&d, c))
		return;
	/* (Landlock's audit records, where the daemon reads them, may add
	 * what bash was refused besides: "; the sandbox refused ...".) */
	assert_named(r, "connect to 1.1.1.1:80");
	tc_assert_text_has(r, "(profile");
	tc_assert_text_lacks(r, "may have been");
	/* Found by the call's cgroup where calls have one of their own. */
	char *enforced = tj_text(tj(r, "result.structuredContent.sandbox.enforced"));
	if (enforced && strstr(enforced, "\"cgroup\""))
		ck_assert_int_ge(notes_stat(c, "byCgroup"), 1);
	free(enforced);
	/* IPv6, by a grandchild (bash started by sh), and a thread's own
	 * task is mapped the same way. */
	r = tcc_shell(c, "bash -c 'exec 3<>/dev/tcp/2606:4700:4700::1111/443'; exit 3");
	assert_named(r, "connect to [2606:4700:4700::1111]:443");
	/* Loopback is refused as well (no socket of the network at all). */
	assert_named(tcc_shell(c, "bash -c 'exec 3<>/dev/tcp/127.0.0.1/9'"), "connect to 127.0.0.1:9");
	/* A name looked up: the resolver opens its sockets (AF_UNIX ones
	 * stand in) and gives up where it cannot set IP_RECVERR, so the
	 * note says what was seen: sockets opened, no destination. */
	if (system("grep -q '^nameserver' /etc/resolv.conf") == 0 && access("/usr/bin/getent", X_OK) == 0) {
		r = tcc_shell(c, "getent hosts example.com");
		ck_assert_msg(strstr(tc_text(r), ":53 (DNS)") || strstr(tc_text(r), "[sandbox] opening a network socket"),
			      "%s", tc_text(r));
		tc_assert_text_has(r, "refused: this tool has no network");
	}
	/* The socket a child gets is never of the network's families (§10):
	 * the kernel's network code stays out of its reach. */
	if (access("/usr/bin/python3", X_OK) == 0)
		tc_assert_text_has(tcc_shell(c, "python3 -c 'import socket; s = socket.socket(socket.AF_INET); "
						"print(\"domain\", s.getsockopt(socket.SOL_SOCKET, socket.SO_DOMAIN))'"),
				   "domain 1\n");
	/* The note is the call's own: the next failing call has none. */
	tc_assert_text_lacks(tcc_shell(c, "exit 4"), "[sandbox]");
	/* A sendto() with a destination (UDP), where python is. */
	if (access("/usr/bin/python3", X_OK) == 0) {
		r = tcc_shell(c, "python3 -c 'import socket; s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); "
				 "s.sendto(b\"x\", (\"9.9.9.9\", 53))'");
		assert_named(r, "sending to 9.9.9.9:53 (DNS)");
		/* A thread's connect (its task is not the process's). */
		r = tcc_shell(c, "python3 -c 'import socket, threading\n"
				 "def f():\n"
				 "    try: socket.create_connection((\"8.8.4.4\", 853), timeout=5)\n"
				 "    except OSError as e: print(e)\n"
				 "t = threading.Thread(target=f); t.start(); t.join(); raise SystemExit(2)'");
		tc_assert_text_has(r, "Network is unreachable");
		assert_named(r, "connect to 8.8.4.4:853");
	}
	finish(&d, c);
}
END_TEST

/* A child started without a spawner (the first call of a plan, while
 * its mount namespace is made ahead; a terminal's) loads the program
 * that hands its network calls to the daemon with a listener of its own,
 * sent to the daemon before its exec: its note names the destination
 * too, and the listener is closed with the child's tree. */
START_TEST(direct_start_named)
{
	struct tcd d;
	struct tcc *c = start_warm(&d, "/bin/bash", "", false);
	if (!c)
		return;
	/* The very first call of a fresh daemon. */
	const struct json *r = tcc_shell(c, CONNECT_1111);
	assert_named(r, "connect to 1.1.1.1:80");
	tc_assert_text_lacks(r, "may have been");
	/* On a terminal: started directly whatever the plan. */
	r = tcc_call(c, "shell", "{\"command\":\"" CONNECT_1111 "\",\"tty\":true,\"background\":true,\"yield_ms\":20000}");
	char *all = tj_text(r);
	ck_assert_msg(strstr(all, "connect to 1.1.1.1:80 refused: this tool has no network"), "%s", all);
	free(all);
	/* The listeners close with their children's trees: of seven calls
	 * started directly, none is left (the spawner of the plan may
	 * hold one). */
	for (int i = 0; i < 5; i++)
		tc_assert_ok(tcc_call(c, "shell", "{\"command\":\"true\",\"tty\":true,\"background\":true,"
						  "\"yield_ms\":20000}"));
	ck_assert(tc_wait_until(notes_stat(c, "listeners") <= 1, 10000));
	ck_assert_int_eq(notes_stat(c, "listenersFull"), 0);
	finish(&d, c);
}
END_TEST

/* A daemon that is not root (uid 65534 here) starts every child
 * directly: each is named through a listener of its own. */
START_TEST(daemon_not_root_named)
{
	if (geteuid() != 0 || access("/usr/bin/setpriv", X_OK) < 0 || access("/bin/bash", X_OK) < 0)
		TC_SKIP("needs root, /usr/bin/setpriv and bash to start a daemon as uid 65534");
	struct tcd d;
	tcd_spawn_nobody(&d, &(struct tcd_opts){ .config = "{" AUTO "}" });
	if (tcd_wait_socket(&d, d.sock, 10000) != 0) {
		char *log = tcd_log(&d);
		tc_skip_note("a daemon of uid 65534 does not start here: %s", log);
		free(log);
		tcd_free(&d);
		return;
	}
	struct tcc *c = tcc_connect(&d);
	if (!tj_bool(tcc_request(c, "admin/stats", NULL), "result.sandboxNetworkNotes.on")) {
		tcc_close(c);
		tcd_free(&d);
		TC_SKIP("the daemon does not see the network calls here");
	}
	for (int i = 0; i < 3; i++) {
		const struct json *r = tcc_shell(c, "id -u; " CONNECT_1111);
		tc_assert_text_has(r, "65534");
		assert_named(r, "connect to 1.1.1.1:80");
	}
	finish(&d, c);
}
END_TEST

/* An AF_UNIX connect (refused by the file system, not the sandbox) and
 * sendmsg() go on as before, with no network note, and sendmsg() is
 * not handed to the daemon. */
START_TEST(unix_connect_not_named)
{
	struct tcd d;
	struct tcc *c = start(&d, "/usr/bin/python3", "");
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
	tc_assert_text_has(r, "b'hi'");
	tc_assert_text_has(r, "No such file or directory");
	tc_assert_text_lacks(r, "this tool has no network");
	/* The connect's address length (20) is one the network's could
	 * have: that one was handed over, none of the 101 messages. */
	ck_assert_int_le(notes_stat(c, "notifications"), 2);
	finish(&d, c);
}
END_TEST

/* 1000 connects: the note names the destinations once each and counts
 * the attempts; the daemon answers another client meanwhile. */
START_TEST(connect_flood_bounded)
{
	struct tcd d;
	struct tcc *c = start(&d, "/bin/bash", "");
	if (!c)
		return;
	struct tcc *other = tcc_connect(&d);
	int64_t id = tcc_send_request(c, "tools/call", "{\"name\":\"shell\",\"arguments\":{\"command\":"
				     "\"bash -c 'for i in $(seq 1000); do (exec 3<>/dev/tcp/10.0.$((i % 7)).1/80) "
				     "2>/dev/null; done; exec 3<>/dev/tcp/1.1.1.1/80'\"}}");
	/* While it runs, another client is answered. */
	ck_assert(tcd_wait_stat(&d, "result.sandboxNetworkNotes.recorded", 50, 30000));
	const struct json *p = tcc_request_t(other, "ping", NULL, 5000);
	ck_assert_msg(tj(p, "result"), "ping unanswered while a child floods");
	char idt[32];
	snprintf(idt, sizeof(idt), "%" PRId64, id);
	const struct json *r = tcc_wait_id(c, idt, 120000);
	ck_assert_msg(r, "the flooding call did not end");
	assert_named(r, "connect to 10.0.1.1:80, connect to 10.0.2.1:80, connect to 10.0.3.1:80, connect to "
			"10.0.4.1:80 and 429 more attempts elsewhere (1001 attempts in all)");
	ck_assert_int_lt((long)strlen(tc_text(r)), 4096);
	tcc_close(other);
	finish(&d, c);
}
END_TEST

/* network true: the same connect goes out to the network as before (or
 * fails by the machine's network), never with this note. */
START_TEST(network_tools_untouched)
{
	struct tcd d;
	struct tcc *c = start(&d, "/bin/bash", ",\"sandbox\":{\"network\":true}");
	if (!c)
		return;
	assert_connect_untouched(c, tcc_shell(c, "bash -c 'exec 3<>/dev/tcp/127.0.0.1/9'"));
	finish(&d, c);
}
END_TEST

/* Fails the case unless the call's note names what as refused past the
 * proxy of a tool with the network "proxy". */
#define assert_proxied(r, what)                                                                            \
	tc_assert_text_has((r), "[sandbox] %s refused: this tool reaches the network only through the daemon's " \
				"proxy (HTTP_PROXY, HTTPS_PROXY and ALL_PROXY in its environment)", (what))

/* network "proxy" (a root daemon: a namespace of loopback only): the
 * kernel of the namespace refuses a connect that bypasses the proxy, and
 * the daemon, handed it, names it: an address of the network (no route:
 * "Network is unreachable"), a port of the namespace's own loopback where
 * nothing listens (NO_PROXY's 127.0.0.1: not the machine's loopback), by
 * the first call (a child started directly) and later ones (through the
 * spawner), also when the command handles it and exits 0; never the
 * proxy itself, nor a server of the call's own on its loopback. */
START_TEST(proxy_bypass_named)
{
	if (geteuid() != 0)
		TC_SKIP("needs a root daemon (a network namespace per call)");
	struct tcd d;
	struct tcc *c = start_warm(&d, "/bin/bash", ",\"sandbox\":{\"network\":\"proxy\"}", false);
	if (!c)
		return;
	const struct json *r = tcc_shell(c, "bash -c 'exec 3<>/dev/tcp/127.0.0.1/9'");
	if (!tj_str(r, "result.structuredContent.sandbox.network")) {
		give_up(&d, c, "no network namespace here", tc_text(r));
		return;
	}
	tc_assert_text_has(r, "Connection refused");
	assert_proxied(r, "connect to 127.0.0.1:9 (the sandbox's own loopback: nothing listens there)");
	tc_assert_text_lacks(r, "this tool has no network");
	tc_assert_text_lacks(r, "may have been");
	for (int i = 0; i < 2; i++) {
		r = tcc_shell(c, CONNECT_1111);
		tc_assert_text_has(r, "Network is unreachable");
		assert_proxied(r, "connect to 1.1.1.1:80");
		tc_assert_text_has(r, "(profile");
	}
	ck_assert_int_ge(notes_stat(c, "recorded"), 3);
	/* Handled, exit 0: named all the same. */
	r = tcc_shell(c, "bash -c 'exec 3<>/dev/tcp/2606:4700:4700::1111/443' 2>/dev/null; echo rc=$?");
	tc_assert_text_has(r, "rc=1");
	ck_assert(!tj_bool(r, "result.isError"));
	assert_proxied(r, "connect to [2606:4700:4700::1111]:443");
	if (access("/usr/bin/python3", X_OK) == 0) {
		r = tcc_shell(c, "python3 -c 'import socket; socket.create_connection((\"10.1.2.3\", 80), timeout=5)'");
		assert_proxied(r, "connect to 10.1.2.3:80");
		/* A server of its own on its loopback: reached, no note. */
		r = tcc_shell(c, "python3 -c 'import socket; s = socket.socket(); s.bind((\"127.0.0.1\", 0)); s.listen()\n"
				 "socket.create_connection(s.getsockname(), timeout=5); print(\"reached\")'");
		tc_assert_text_has(r, "reached");
		tc_assert_text_lacks(r, "[sandbox]");
		/* A datagram to a port of its loopback: named where nothing
		 * is bound, not where its own socket is. */
		r = tcc_shell(c, "python3 -c 'import socket; s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
				 "s.bind((\"127.0.0.1\", 0)); t = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
				 "t.sendto(b\"x\", s.getsockname()); t.sendto(b\"x\", (\"127.0.0.1\", 9)); print(\"sent\")'");
		tc_assert_text_has(r, "sent");
		assert_proxied(r, "sending to 127.0.0.1:9 (the sandbox's own loopback: nothing listens there)");
		tc_assert_text_lacks(r, "more attempt");
	}
	/* The proxy itself: no note. */
	r = tcc_shell(c, "bash -c 'exec 3<>/dev/tcp/127.0.0.1/3128' && echo proxied");
	tc_assert_text_has(r, "proxied");
	tc_assert_text_lacks(r, "[sandbox]");
	/* The note is the call's own. */
	tc_assert_text_lacks(tcc_shell(c, "exit 4"), "[sandbox]");
	finish(&d, c);
}
END_TEST

/* A daemon that is not root makes each proxy namespace in a user
 * namespace of its own: a connect that bypasses the proxy is named the
 * same, loopback included. */
START_TEST(daemon_not_root_proxy_named)
{
	if (geteuid() != 0 || access("/usr/bin/setpriv", X_OK) < 0 || access("/bin/bash", X_OK) < 0)
		TC_SKIP("needs root, /usr/bin/setpriv and bash to start a daemon as uid 65534");
	struct tcd d;
	tcd_spawn_nobody(&d, &(struct tcd_opts){ .config = "{" AUTO ",\"sandbox\":{\"network\":\"proxy\"}}" });
	if (tcd_wait_socket(&d, d.sock, 10000) != 0) {
		char *log = tcd_log(&d);
		tc_skip_note("a daemon of uid 65534 with the network proxy does not start here: %s", log);
		free(log);
		tcd_free(&d);
		return;
	}
	struct tcc *c = tcc_connect(&d);
	if (!tj_bool(tcc_request(c, "admin/stats", NULL), "result.sandboxNetworkNotes.on")) {
		tcc_close(c);
		tcd_free(&d);
		TC_SKIP("the daemon does not see the network calls here");
	}
	for (int i = 0; i < 2; i++) {
		const struct json *r = tcc_shell(c, "id -u; " CONNECT_1111);
		tc_assert_text_has(r, "65534");
		assert_proxied(r, "connect to 1.1.1.1:80");
		r = tcc_shell(c, "bash -c 'exec 3<>/dev/tcp/127.0.0.1/9'");
		assert_proxied(r, "connect to 127.0.0.1:9 (the sandbox's own loopback: nothing listens there)");
	}
	finish(&d, c);
}
END_TEST

/* A background process is told what the daemon saw the sandbox refuse it
 * while it runs, in the answer to each session after the refusal (once
 * to each, again when a new one is seen), and all of it in the answer
 * that reports its end. */
START_TEST(background_named_while_running)
{
	struct tcd d;
	struct tcc *c = start(&d, "/bin/bash", "");
	if (!c)
		return;
	const struct json *r = tcc_shell(c, CONNECT_1111);
	if (!need_listener(&d, c))
		return;
	r = tcc_call(c, "shell", "{\"command\":\"bash -c 'exec 3<>/dev/tcp/1.1.1.1/80' 2>/dev/null; echo tried; read x; "
				 "bash -c 'exec 3<>/dev/tcp/1.0.0.1/80' 2>/dev/null; echo again; sleep 60\","
				 "\"background\":true,\"until\":\"tried\",\"yield_ms\":20000}");
	const char *id = tj_str(r, "result.structuredContent.process_id");
	ck_assert_msg(id, "%s", tc_text(r));
	char *pid = xstrdup(id);
	ck_assert(tj_bool(r, "result.structuredContent.running"));
	tc_assert_text_has(r, "is running");
	assert_named(r, "connect to 1.1.1.1:80");
	tc_assert_text_lacks(r, "1.0.0.1");
	/* Told once to this session: the next answer is quiet. */
	r = tcc_call(c, "process_io", tcc_fmt(c, "{\"process_id\":\"%s\",\"wait_ms\":0}", pid));
	tc_assert_text_has(r, "is running");
	tc_assert_text_lacks(r, "[sandbox]");
	/* Another session's first answer names it. */
	struct tcc *c2 = tcc_connect(&d);
	r = tcc_call(c2, "process_io", tcc_fmt(c2, "{\"process_id\":\"%s\",\"wait_ms\":0}", pid));
	tc_assert_text_has(r, "is running");
	assert_named(r, "connect to 1.1.1.1:80");
	/* A new refusal: named again, with the first. */
	r = tcc_call(c, "process_io", tcc_fmt(c, "{\"process_id\":\"%s\",\"input\":\"go\\n\",\"until\":\"again\","
					      "\"wait_ms\":20000}", pid));
	tc_assert_text_has(r, "is running");
	assert_named(r, "connect to 1.1.1.1:80, connect to 1.0.0.1:80");
	/* Its end names all it was refused. */
	r = tcc_call(c, "process_kill", tcc_fmt(c, "{\"process_id\":\"%s\"}", pid));
	tc_assert_text_has(r, "ended");
	assert_named(r, "connect to 1.1.1.1:80, connect to 1.0.0.1:80");
	r = tcc_call(c2, "process_io", tcc_fmt(c2, "{\"process_id\":\"%s\",\"wait_ms\":0}", pid));
	assert_named(r, "connect to 1.1.1.1:80, connect to 1.0.0.1:80");
	free(pid);
	tcc_close(c2);
	finish(&d, c);
}
END_TEST

/* A background command that failed: its note judges as much of its
 * output as a shell call's text keeps (not only the last few KiB), as
 * the same command in the foreground. */
#define WRITE_FAR "touch /usr/bgnote_probe; seq 1 3000; exit 1"

START_TEST(background_failure_named_past_its_tail)
{
	struct tcd d;
	tcd_start(&d, "{" AUTO "}");
	struct tcc *c = tcc_connect(&d);
	const char *want = "[sandbox] The sandbox refused writing /usr/bgnote_probe (read-only in the sandbox";
	const struct json *r = tcc_shell(c, WRITE_FAR);
	if (!strstr(tc_text(r), "Read-only file system")) {
		give_up(&d, c, "/usr is not made read-only here", tc_text(r));
		return;
	}
	/* (The text is long: its end is what a failure shows.) */
	const char *t = tc_text(r);
	ck_assert_msg(strstr(t, want), "%s", t + (strlen(t) > 1500 ? strlen(t) - 1500 : 0));
	r = tcc_call(c, "shell", "{\"command\":\"" WRITE_FAR "\",\"background\":true,\"yield_ms\":20000}");
	t = tc_text(r);
	ck_assert_msg(strstr(t, "ended: exit code 1") && strstr(t, want), "%s",
		      t + (strlen(t) > 1500 ? strlen(t) - 1500 : 0));
	finish(&d, c);
}
END_TEST

/* A process a call leaves behind, connecting after the call ended (the
 * call's end takes its tree down): named in no later call's note, and
 * the daemon answers. */
START_TEST(after_the_call_not_misplaced)
{
	struct tcd d;
	struct tcc *c = start(&d, "/bin/bash", "");
	if (!c)
		return;
	tc_assert_ok(tcc_shell(c, "setsid bash -c 'sleep 1; exec 3<>/dev/tcp/1.1.1.1/80' >/dev/null 2>&1 </dev/null &"));
	tc_assert_text_lacks(tcc_shell(c, "sleep 2; exit 5"), "1.1.1.1");
	const struct json *p = tcc_request_t(c, "ping", NULL, 5000);
	ck_assert_msg(tj(p, "result"), "ping unanswered");
	finish(&d, c);
}
END_TEST

/* A connect whose failure the command handles, ending it with status 0:
 * the note still names where it tried to go, as the daemon saw it (for
 * shell, a background process and a command tool); a successful call
 * that did nothing with the network, even one whose stderr reads like a
 * refusal, gets none. */
#define CONNECT_QUIET "bash -c 'exec 3<>/dev/tcp/1.1.1.1/80' 2>/dev/null; echo rc=$?"

START_TEST(success_named)
{
	struct tcd d;
	struct tcc *c = start(&d, "/bin/bash", "");
	if (!c)
		return;
	const struct json *r = tcc_shell(c, CONNECT_QUIET);
	if (!need_listener(&d, c))
		return;
	tc_assert_ok(r);
	ck_assert(!tj_bool(r, "result.isError"));
	tc_assert_text_has(r, "rc=1");
	tc_assert_text_lacks(r, "Exit status");
	assert_named(r, "connect to 1.1.1.1:80");
	tc_assert_text_has(r, "(profile");
	tc_assert_text_lacks(r, "may have been");
	/* The note is the call's own: the next one, succeeding, has none. */
	r = tcc_shell(c, "echo fine");
	tc_assert_ok(r);
	tc_assert_text_lacks(r, "[sandbox]");
	/* Python, as a program that reports the error itself. */
	if (access("/usr/bin/python3", X_OK) == 0) {
		r = tcc_shell(c, "python3 -c \"import socket; s=socket.socket(); s.settimeout(2); "
				 "s.connect(('1.1.1.1',80))\" 2>/dev/null; echo rc=$?");
		tc_assert_text_has(r, "rc=1");
		assert_named(r, "connect to 1.1.1.1:80");
	}
	/* A background process that ends with status 0. */
	r = tcc_call(c, "shell", "{\"command\":\"" CONNECT_QUIET "\",\"background\":true,\"yield_ms\":20000}");
	char *all = tj_text(r);
	ck_assert_msg(strstr(all, "rc=1") && strstr(all, "connect to 1.1.1.1:80 refused: this tool has no network"),
		      "%s", all);
	free(all);
	/* A command tool that succeeds. */
	tcd_write_tool(&d, "reach.json",
		       "{\"name\":\"reach\",\"kind\":\"command\",\"side_effects\":\"read\",\"description\":\"Reach\","
		       " \"argv\":[\"sh\",\"-c\",\"" CONNECT_QUIET "\"], \"input_schema\":{\"type\":\"object\"}}");
	tcd_write_tool(&d, "reachj.json",
		       "{\"name\":\"reachj\",\"kind\":\"command\",\"side_effects\":\"read\",\"description\":\"Reach\","
		       " \"argv\":[\"sh\",\"-c\",\"bash -c 'exec 3<>/dev/tcp/1.1.1.1/80' 2>/dev/null; echo {}\"],"
		       " \"stdout\":\"json\", \"input_schema\":{\"type\":\"object\"}}");
	tc_assert_ok(tcc_request(c, "admin/reload", NULL));
	r = tcc_call(c, "reach", "{}");
	tc_assert_ok(r);
	ck_assert(!tj_bool(r, "result.isError"));
	tc_assert_text_has(r, "rc=1");
	assert_named(r, "connect to 1.1.1.1:80");
	/* One whose stdout is JSON: the note follows it in the text. */
	r = tcc_call(c, "reachj", "{}");
	tc_assert_ok(r);
	ck_assert(!tj_bool(r, "result.isError"));
	ck_assert_msg(strncmp(tc_text(r), "{}\n", 3) == 0, "%s", tc_text(r));
	assert_named(r, "connect to 1.1.1.1:80");
	/* structuredContent stays the program's JSON. */
	char *sc = tj_text(tj(r, "result.structuredContent"));
	ck_assert_msg(sc && !strstr(sc, "[sandbox]"), "%s", sc ? sc : "(none)");
	free(sc);
	finish(&d, c);
}
END_TEST

START_TEST(success_without_network_not_named)
{
	struct tcd d;
	struct tcc *c = start(&d, "/bin/bash", "");
	if (!c)
		return;
	/* Something the daemon sees first, so that it is known to watch. */
	(void)tcc_shell(c, CONNECT_1111);
	if (!need_listener(&d, c))
		return;
	int64_t before = notes_stat(c, "notifications");
	/* Words of a refusal on stderr, but nothing refused: a successful
	 * command's stderr is not evidence enough. */
	const struct json *r = tcc_shell(c, "echo 'connect: Network is unreachable' >&2; "
					    "echo 'cp: cannot create regular file /usr/x: Read-only file system' >&2; "
					    "echo 'Operation not permitted' >&2; echo done");
	tc_assert_ok(r);
	tc_assert_text_has(r, "done");
	tc_assert_text_lacks(r, "[sandbox]");
	/* A program that opens files and a local socket pair, no network. */
	r = tcc_shell(c, "cat /etc/hostname >/dev/null; ls / >/dev/null; echo ok");
	tc_assert_ok(r);
	tc_assert_text_lacks(r, "[sandbox]");
	r = tcc_call(c, "shell", "{\"command\":\"echo bg\",\"background\":true,\"yield_ms\":20000}");
	char *all = tj_text(r);
	ck_assert_msg(strstr(all, "bg") && !strstr(all, "[sandbox]"), "%s", all);
	free(all);
	ck_assert_int_eq(notes_stat(c, "notifications"), before);
	finish(&d, c);
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
	struct tcd d;
	struct tcc *c = start(&d, "/bin/bash", "");
	if (!c)
		return;
	(void)tcc_shell(c, CONNECT_1111);
	if (!need_listener(&d, c))
		return;
	pid_t sp = spawner_of(d.pid);
	ck_assert_int_gt(sp, 0);
	ck_assert_int_eq(kill(sp, SIGKILL), 0);
	int64_t n = -1;
	(void)tc_wait_until((n = notes_stat(c, "listeners")) == 0, 5000);
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
	tc_assert_text_has(tcc_shell(c, CONNECT_1111), "[sandbox] connect to 1.1.1.1:80 refused");
	ck_assert(tc_wait_until(notes_stat(c, "listeners") == 1, 10000));
	finish(&d, c);
}
END_TEST

/* Where the kernel cannot (as TOOLCALLD_NO_SECCOMP_NOTIFY makes it): the
 * log and admin/stats say so, and the note stays a guess. */
START_TEST(without_notification_said)
{
	if (access("/usr/bin/python3", X_OK) < 0)
		TC_SKIP("needs /usr/bin/python3");
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
		tc_assert_text_has(r, "[sandbox] This may have been refused by the sandbox: this tool has no network "
				      "(profile");
		tc_assert_text_lacks(r, "connect to");
	}
	ck_assert_int_eq(notes_stat(c, "notifications"), 0);
	finish(&d, c);
}
END_TEST

int main(void)
{
	if (getenv("TC_UNDER_VALGRIND")) {
		fprintf(stderr, "SKIP under valgrind: children run without the sandbox there\n");
		return TC_EXIT_SKIP;
	}
	Suite *s = suite_create("sandbox_netnote");
	TCase *tc = tcase_create("netnote");
	tcase_set_timeout(tc, 240);
	tcase_add_test(tc, connect_named);
	tcase_add_test(tc, unix_connect_not_named);
	tcase_add_test(tc, direct_start_named);
	tcase_add_test(tc, daemon_not_root_named);
	tcase_add_test(tc, connect_flood_bounded);
	tcase_add_test(tc, network_tools_untouched);
	tcase_add_test(tc, proxy_bypass_named);
	tcase_add_test(tc, daemon_not_root_proxy_named);
	tcase_add_test(tc, background_named_while_running);
	tcase_add_test(tc, background_failure_named_past_its_tail);
	tcase_add_test(tc, after_the_call_not_misplaced);
	tcase_add_test(tc, without_notification_said);
	tcase_add_test(tc, listener_closed_with_its_filter);
	tcase_add_test(tc, success_named);
	tcase_add_test(tc, success_without_network_not_named);
	suite_add_tcase(s, tc);
	return run_suite(s);
}
