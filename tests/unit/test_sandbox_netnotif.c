/* SPDX-License-Identifier: MIT */
/*
 * What a tool without network is told it tried (lib/sandbox/netnotif.c):
 * each attempt named by where it went (IPv4, IPv6 in brackets, port 53 as
 * DNS), a destination named once however often tried, four named at most
 * and the rest counted, sockets opened without a destination said as
 * such, attempts of a call's descendants its own, and the tables of
 * calls and listeners bounded, what does not fit counted in admin/stats.
 * The notifications themselves come from the kernel: the sandbox's
 * integration tests.
 */
#include <arpa/inet.h>
#include <check.h>
#include <errno.h>
#include <ev.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lib/base/loop.h"
#include "lib/sandbox/sandbox.h"
#include "lib/sandbox/sandbox_internal.h"
#include "proto/json.h"
#include "proto/base/util.h"
#include "tests/unit/check_main.h"

#define REFUSED " refused: this tool has no network"
/* A pid no task has (beyond any pid_max): its /proc cannot be read. */
#define NO_TASK ((pid_t)0x7ffffff0)

static struct ev_loop *ev;
static struct tc_loop *loop;
static bool on;

static void setup(void)
{
	ev = ev_loop_new(0);
	loop = tc_loop_ev_new(ev);
	on = sandbox_netnotif_start(loop) == 0;
}

static void teardown(void)
{
	sandbox_netnotif_stop();
	tc_loop_ev_free(loop);
	ev_loop_destroy(ev);
}

/* Skips the case where the kernel cannot hand calls to the daemon (the
 * notes are then off, and nothing is recorded). */
#define NEED_NOTES()                                                           \
	do {                                                                   \
		if (!on)                                                       \
			TC_SKIP("no network notes here: %s", sandbox_netnotif_why()); \
	} while (0)

/* What netnotif_describe() names verb to ip (v4 or v6) and port. */
static const char *described(const char *verb, const char *ip, uint16_t port)
{
	static char out[NETNOTIF_WHAT_SIZE];
	struct sockaddr_storage ss = { 0 };
	struct sockaddr_in *in = (struct sockaddr_in *)&ss;
	struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&ss;
	if (inet_pton(AF_INET, ip, &in->sin_addr) == 1) {
		in->sin_family = AF_INET;
		in->sin_port = htons(port);
	} else {
		ck_assert_int_eq(inet_pton(AF_INET6, ip, &in6->sin6_addr), 1);
		in6->sin6_family = AF_INET6;
		in6->sin6_port = htons(port);
	}
	netnotif_describe(verb, &ss, out, sizeof(out));
	return out;
}

/* Asserts what sandbox_netnotif_take(pid) says: want, or nothing (NULL). */
static void assert_take_at(pid_t pid, const char *want, int line)
{
	char *got = sandbox_netnotif_take(pid);
	ck_assert_msg(want ? got && str_eq(got, want) : !got, "line %d: took \"%s\", want \"%s\"", line,
		      got ? got : "(nothing)", want ? want : "(nothing)");
	free(got);
}
#define assert_take(pid, want) assert_take_at((pid), (want), __LINE__)

/* Asserts that the admin/stats member name of the notes is value. */
static void assert_stat_at(const char *name, long value, int line)
{
	struct buf b = { 0 };
	struct jgen *g = jgen_new(&b);
	jgen_obj_open(g);
	sandbox_netnotif_write_stats(g);
	jgen_obj_close(g);
	jgen_free(g);
	buf_putc(&b, '\0');
	char *want = xasprintf("\"%s\":%ld", name, value);
	const char *at = strstr(buf_head(&b), want);
	char next = at ? at[strlen(want)] : 0;
	ck_assert_msg(at && (next == ',' || next == '}'), "line %d: want %s in %s", line, want, buf_head(&b));
	free(want);
	buf_free(&b);
}
#define assert_stat(name, value) assert_stat_at((name), (value), __LINE__)

START_TEST(destinations_named)
{
	ck_assert_str_eq(described("connect to", "1.1.1.1", 80), "connect to 1.1.1.1:80");
	ck_assert_str_eq(described("sending to", "2606:4700::1111", 443), "sending to [2606:4700::1111]:443");
	/* port 53, over either family: the name server a lookup asks first */
	ck_assert_str_eq(described("sending to", "8.8.8.8", 53), "sending to 8.8.8.8:53 (DNS)");
	ck_assert_str_eq(described("connect to", "::1", 53), "connect to [::1]:53 (DNS)");
	ck_assert_str_eq(described("connect to", "10.0.0.1", 5353), "connect to 10.0.0.1:5353");
	/* an IPv4 address mapped in IPv6 keeps the form the program used */
	ck_assert_str_eq(described("connect to", "::ffff:1.2.3.4", 80), "connect to [::ffff:1.2.3.4]:80");
	/* the longest destination fits, whole */
	ck_assert_str_eq(described("sending to", "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", 53),
			 "sending to [ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff]:53 (DNS)");
}
END_TEST

/* One attempt is named, once: taking it forgets it, the call stays
 * watched. A call that tried nothing, or is not watched, has nothing. */
START_TEST(attempt_named_and_taken_once)
{
	NEED_NOTES();
	pid_t self = getpid();
	assert_take(self, NULL);
	sandbox_netnotif_watch(self, NULL, false, -1);
	assert_take(self, NULL);
	netnotif_record(self, "connect to 1.1.1.1:80");
	assert_take(self, "connect to 1.1.1.1:80" REFUSED);
	assert_take(self, NULL);
	netnotif_record(self, "connect to 1.1.1.2:80");
	assert_take(self, "connect to 1.1.1.2:80" REFUSED);
	assert_stat("recorded", 2);
	assert_stat("watched", 1);
}
END_TEST

/* A running call's note is looked at without taking it: the count grows
 * with each destination named or attempt elsewhere, not with a repeated
 * attempt; a call with the network "proxy" is told its network is the
 * proxy's. */
START_TEST(peeked_and_proxied)
{
	NEED_NOTES();
	pid_t self = getpid();
	uint64_t seen = 7;
	ck_assert_ptr_null(sandbox_netnotif_peek(self, &seen));
	ck_assert_int_eq(seen, 0);
	sandbox_netnotif_watch(self, NULL, true, -1);
	netnotif_record(self, "connect to 1.1.1.1:80");
	const char *want = "connect to 1.1.1.1:80 refused: this tool reaches the network only through the daemon's "
			   "proxy (HTTP_PROXY, HTTPS_PROXY and ALL_PROXY in its environment)";
	for (int i = 0; i < 2; i++) {
		char *got = sandbox_netnotif_peek(self, &seen);
		ck_assert_str_eq(got, want);
		ck_assert_int_eq(seen, 1);
		free(got);
	}
	netnotif_record(self, "connect to 1.1.1.1:80");
	free(sandbox_netnotif_peek(self, &seen));
	ck_assert_int_eq(seen, 1);
	for (int i = 0; i < 5; i++) {
		char what[64];
		snprintf(what, sizeof(what), "connect to 10.0.0.%d:80", i);
		netnotif_record(self, what);
	}
	free(sandbox_netnotif_peek(self, &seen));
	ck_assert_int_eq(seen, 6);	/* four named, two elsewhere */
	char *got = sandbox_netnotif_take(self);
	ck_assert_msg(got && strstr(got, "and 2 more attempts elsewhere (7 attempts in all) refused: this tool "
					 "reaches the network only through the daemon's proxy"), "%s", got);
	free(got);
	ck_assert_ptr_null(sandbox_netnotif_peek(self, &seen));
	ck_assert_int_eq(seen, 0);
	/* Watched again without the proxy: the plain words. */
	sandbox_netnotif_watch(self, NULL, false, -1);
	netnotif_record(self, "connect to 1.1.1.1:80");
	assert_take(self, "connect to 1.1.1.1:80" REFUSED);
}
END_TEST

/* A destination tried again is named once, the attempts counted. */
START_TEST(same_destination_named_once)
{
	NEED_NOTES();
	pid_t self = getpid();
	sandbox_netnotif_watch(self, NULL, false, -1);
	for (int i = 0; i < 3; i++)
		netnotif_record(self, "connect to 1.1.1.1:80");
	assert_take(self, "connect to 1.1.1.1:80 (3 attempts in all)" REFUSED);
}
END_TEST

/* Four destinations are named at most; the attempts elsewhere are
 * counted, and all of them when some were tried more than once. */
START_TEST(four_named_the_rest_counted)
{
	NEED_NOTES();
	pid_t self = getpid();
	sandbox_netnotif_watch(self, NULL, false, -1);
	char what[64];
	for (int i = 1; i <= 5; i++) {
		snprintf(what, sizeof(what), "connect to 10.0.0.%d:80", i);
		netnotif_record(self, what);
	}
	assert_take(self, "connect to 10.0.0.1:80, connect to 10.0.0.2:80, connect to 10.0.0.3:80, "
			  "connect to 10.0.0.4:80 and 1 more attempt elsewhere" REFUSED);

	for (int i = 1; i <= 6; i++) {
		snprintf(what, sizeof(what), "sending to 10.0.0.%d:53 (DNS)", i);
		netnotif_record(self, what);
	}
	netnotif_record(self, "sending to 10.0.0.1:53 (DNS)");
	assert_take(self, "sending to 10.0.0.1:53 (DNS), sending to 10.0.0.2:53 (DNS), sending to 10.0.0.3:53 (DNS), "
			  "sending to 10.0.0.4:53 (DNS) and 2 more attempts elsewhere (7 attempts in all)" REFUSED);
	/* a destination not named, tried again, is one more attempt elsewhere */
	for (int i = 1; i <= 4; i++) {
		snprintf(what, sizeof(what), "connect to [::%d]:443", i);
		netnotif_record(self, what);
	}
	netnotif_record(self, "connect to [::5]:443");
	netnotif_record(self, "connect to [::5]:443");
	assert_take(self, "connect to [::1]:443, connect to [::2]:443, connect to [::3]:443, connect to [::4]:443 "
			  "and 2 more attempts elsewhere" REFUSED);
}
END_TEST

/* Sockets opened with no destination named (a resolver that gives up):
 * said as such, with how many; beside a destination, the destination
 * alone is named. */
START_TEST(sockets_without_destination)
{
	NEED_NOTES();
	pid_t self = getpid();
	sandbox_netnotif_watch(self, NULL, false, -1);
	netnotif_record_socket(self);
	assert_take(self, "opening a network socket" REFUSED);
	assert_take(self, NULL);
	netnotif_record_socket(self);
	netnotif_record_socket(self);
	assert_take(self, "opening a network socket (2 times)" REFUSED);
	netnotif_record_socket(self);
	netnotif_record(self, "connect to 1.1.1.1:443");
	assert_take(self, "connect to 1.1.1.1:443" REFUSED);
	/* a socket of a task no call owns is no one's */
	netnotif_record_socket(NO_TASK);
	assert_take(self, NULL);
}
END_TEST

/* What a call's child started tried is the call's; what a task of no
 * watched call tried is counted, and named to no one. */
START_TEST(descendants_are_the_call)
{
	NEED_NOTES();
	pid_t self = getpid();
	sandbox_netnotif_watch(self, NULL, false, -1);
	pid_t child = fork();
	ck_assert_int_ge(child, 0);
	if (child == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		pause();
		_exit(0);
	}
	netnotif_record(child, "connect to 1.1.1.1:80");
	netnotif_record_socket(child);
	assert_take(self, "connect to 1.1.1.1:80" REFUSED);
	assert_take(child, NULL);
	assert_stat("unmatched", 0);

	netnotif_record(NO_TASK, "connect to 1.1.1.1:80");
	assert_stat("unmatched", 1);
	sandbox_netnotif_forget(self);
	netnotif_record(child, "connect to 1.1.1.1:80");
	assert_stat("unmatched", 2);
	assert_stat("recorded", 1);
	assert_stat("watched", 0);
	assert_take(self, NULL);
	kill(child, SIGKILL);
	waitpid(child, NULL, 0);
}
END_TEST

/* Watching a call again starts it afresh. */
START_TEST(watched_again_afresh)
{
	NEED_NOTES();
	pid_t self = getpid();
	sandbox_netnotif_watch(self, "/sys/fs/cgroup/toolcalld/tc-1-1", false, -1);
	netnotif_record(self, "connect to 1.1.1.1:80");
	netnotif_record_socket(self);
	sandbox_netnotif_watch(self, NULL, false, -1);
	assert_take(self, NULL);
	assert_stat("watched", 1);
}
END_TEST

/* 256 calls are watched at once; one more is counted, not watched, until
 * a slot is free. A call watched again takes no second slot. */
START_TEST(calls_table_bounded)
{
	NEED_NOTES();
	pid_t self = getpid();
	sandbox_netnotif_watch(self, NULL, false, -1);
	for (pid_t i = 1; i < 256; i++)
		sandbox_netnotif_watch(NO_TASK - i, NULL, false, -1);
	assert_stat("watched", 256);
	assert_stat("unwatched", 0);
	sandbox_netnotif_watch(self, NULL, false, -1);
	assert_stat("unwatched", 0);
	sandbox_netnotif_watch(NO_TASK, NULL, false, -1);
	assert_stat("watched", 256);
	assert_stat("unwatched", 1);
	/* the one not watched has nothing, the others go on */
	assert_take(NO_TASK, NULL);
	netnotif_record(self, "connect to 1.1.1.1:80");
	assert_take(self, "connect to 1.1.1.1:80" REFUSED);
	/* a slot freed is taken */
	sandbox_netnotif_forget(NO_TASK - 1);
	sandbox_netnotif_watch(NO_TASK, NULL, false, -1);
	assert_stat("watched", 256);
	assert_stat("unwatched", 1);
}
END_TEST

/* The listeners' table, shared by the spawners and the calls started
 * without one, holds 288; past that a call is started with the plain
 * program (room refused), counted in admin/stats. */
START_TEST(listeners_table_bounded)
{
	NEED_NOTES();
	int added = 0;
	while (added < 1000 && sandbox_netnotif_room()) {
		int fd = eventfd(0, EFD_CLOEXEC);
		ck_assert_int_ge(fd, 0);
		ck_assert_int_eq(sandbox_netnotif_add(fd, NULL), 0);
		added++;
	}
	ck_assert_int_eq(added, 288);
	ck_assert(!sandbox_netnotif_room());	/* refused twice now */
	int fd = eventfd(0, EFD_CLOEXEC);
	ck_assert_int_eq(sandbox_netnotif_add(fd, NULL), -EBUSY);	/* closed */
	assert_stat("listeners", 288);
	assert_stat("listenersFull", 2);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("sandbox_netnotif");
	TCase *tc = tcase_create("notes");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, destinations_named);
	tcase_add_test(tc, attempt_named_and_taken_once);
	tcase_add_test(tc, same_destination_named_once);
	tcase_add_test(tc, four_named_the_rest_counted);
	tcase_add_test(tc, sockets_without_destination);
	tcase_add_test(tc, descendants_are_the_call);
	tcase_add_test(tc, watched_again_afresh);
	tcase_add_test(tc, peeked_and_proxied);
	tcase_add_test(tc, calls_table_bounded);
	tcase_add_test(tc, listeners_table_bounded);
	suite_add_tcase(s, tc);
	return run_suite(s);
}
