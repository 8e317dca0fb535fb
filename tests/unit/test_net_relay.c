/* SPDX-License-Identifier: MIT */
/*
 * Parts of the proxy engine alone on a real libev loop: the byte relay in
 * splice and read/write modes (exact bytes, half-closes both ways), and
 * the resolver's callbacks (always from the loop, cancelled once when the
 * resolver goes).
 */
#include <check.h>
#include <errno.h>
#include <ev.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "lib/base/loop.h"
#include "lib/net/net.h"
#include "lib/net/net_internal.h"
#include "tests/unit/check_main.h"
#include "tests/unit/loop_spin.h"
#include "tests/unit/net_servers.h"

struct lookup_result {
	int calls, r;
	char first[64];
};

static void lookup_cb(void *arg, int r, const struct net_addr *addrs, size_t n)
{
	struct lookup_result *x = arg;
	x->calls++;
	x->r = r;
	if (n)
		net_addr_format(&addrs[0], x->first);
}

static bool lookup_answered(void *arg)
{
	return ((struct lookup_result *)arg)->calls > 0;
}

/* An answer found inside net_resolve (/etc/hosts) comes from the loop, and
 * one still waiting when the resolver goes is cancelled, once. */
START_TEST(resolver_callbacks_from_the_loop)
{
	struct ev_loop *ev = ev_loop_new(EVFLAG_AUTO);
	struct tc_loop *loop = tc_loop_ev_new(ev);
	struct net_resolver *res;
	struct lookup_result a = { 0 }, b = { 0 };

	ck_assert_int_eq(net_resolver_new(loop, 3000, &res), 0);
	ck_assert_ptr_nonnull(net_resolve(res, "localhost", lookup_cb, &a));
	ck_assert_int_eq(a.calls, 0);
	ck_assert(loop_spin(ev, lookup_answered, &a, 10000));
	ck_assert_int_eq(a.r, 0);
	ck_assert_str_eq(a.first, "127.0.0.1");
	ck_assert_ptr_nonnull(net_resolve(res, "localhost", lookup_cb, &b));
	res = net_resolver_free(res);
	ck_assert_int_eq(b.calls, 1);
	ck_assert_int_eq(b.r, -ECANCELED);
	ck_assert(!loop_spin(ev, lookup_answered, &(struct lookup_result){ 0 }, 100));
	ck_assert_int_eq(a.calls, 1);
	ck_assert_int_eq(b.calls, 1);
	tc_loop_ev_free(loop);
	ev_loop_destroy(ev);
}
END_TEST

/* --- the relay alone: splice and its read/write fallback ------------------ */

struct relay_fx {
	int a, b;		/* the test's ends: a is the client, b the origin */
	int r_done;
	bool done;
	uint64_t up, down;
	char result[128];
};

static int relay_progress(void *arg, uint64_t up, uint64_t down)
{
	struct relay_fx *x = arg;
	x->up += up;
	x->down += down;
	return 0;
}

static void relay_done(void *arg, int r)
{
	struct relay_fx *x = arg;
	x->r_done = r;
	x->done = true;
}

static bool relay_finished(void *arg)
{
	return ((struct relay_fx *)arg)->done;
}

static void *relay_client(void *arg)
{
	struct relay_fx *x = arg;
	static char out[256 * 1024], in[256 * 1024 + 16];
	for (size_t i = 0; i < sizeof(out); i++)
		out[i] = (char)(i * 13 + 1);
	net_test_write(x->a, out, sizeof(out));
	shutdown(x->a, SHUT_WR);
	long n = net_test_read_all(x->b, in, sizeof(in));	/* the half-close came through */
	bool same = n == (long)sizeof(out) + 5 && memcmp(in, "early", 5) == 0 && memcmp(in + 5, out, sizeof(out)) == 0;
	net_test_write(x->b, "answer", 6);
	shutdown(x->b, SHUT_WR);
	long m = net_test_read_all(x->a, in, sizeof(in));
	snprintf(x->result, sizeof(x->result), "%s %ld %.*s", same ? "same" : "differ", m, (int)MAX(m, 0), in);
	return NULL;
}

START_TEST(relay_splice_and_copy)
{
	struct ev_loop *ev = ev_loop_new(EVFLAG_AUTO);
	struct tc_loop *loop = tc_loop_ev_new(ev);

	signal(SIGPIPE, SIG_IGN);
	for (int copy = 0; copy < 2; copy++) {
		struct relay_fx x = { 0 };
		struct net_relay *r = NULL;
		uint16_t port;
		int l = net_test_listen(&port);
		x.a = net_test_connect(port, 10000);
		int a2 = accept(l, NULL, NULL);
		x.b = net_test_connect(port, 10000);
		int b2 = accept(l, NULL, NULL);
		close(l);
		struct net_relay_config rc = {
			.loop = loop, .client_fd = a2, .upstream_fd = b2, .initial = "early", .initial_len = 5,
			.copy = copy, .progress = relay_progress, .done = relay_done, .arg = &x,
		};
		ck_assert_int_eq(net_relay_start(&rc, &r), 0);
		pthread_t t;
		pthread_create(&t, NULL, relay_client, &x);
		ck_assert(loop_spin(ev, relay_finished, &x, 30000));
		pthread_join(t, NULL);
		ck_assert_int_eq(x.r_done, 0);
		ck_assert_str_eq(x.result, "same 6 answer");
		ck_assert_uint_eq(x.up, 256 * 1024 + 5);
		ck_assert_uint_eq(x.down, 6);
		ck_assert(net_relay_spliced(r) == !copy);
		net_relay_free(r);
		close(a2);
		close(b2);
		close(x.a);
		close(x.b);
	}
	tc_loop_ev_free(loop);
	ev_loop_destroy(ev);
}
END_TEST

/* --- relays share a budget per turn of the loop ----------------------------- */

#define QUEUED_RELAYS 8

struct queued_fx {
	int client[QUEUED_RELAYS];	/* the test's ends, reading */
	int done;
};

static void queued_done(void *arg, int r)
{
	((struct queued_fx *)arg)->done++;
	(void)r;
}

/* Bytes waiting at a client's end. */
static long waiting(int fd)
{
	char buf[256];
	ssize_t n = recv(fd, buf, sizeof(buf), MSG_PEEK | MSG_DONTWAIT);
	return n < 0 ? 0 : n;
}

static bool all_arrived(void *arg)
{
	struct queued_fx *x = arg;
	for (int i = 0; i < QUEUED_RELAYS; i++)
		if (waiting(x->client[i]) < 100)
			return false;
	return true;
}

/* Past the budget of a turn, ready directions wait for the next turn, in
 * the order they came, and every one gets through. With a budget of 1 ns
 * one direction runs per turn: after the first turn at most one origin's
 * bytes have reached their client, and every client gets its own. */
START_TEST(relays_wait_for_the_next_turn)
{
	struct ev_loop *ev = ev_loop_new(EVFLAG_AUTO);
	struct tc_loop *loop = tc_loop_ev_new(ev);
	struct net_relay *r[QUEUED_RELAYS];
	int proxy_side[QUEUED_RELAYS][2], origin[QUEUED_RELAYS];
	struct queued_fx x = { 0 };
	char data[100];

	signal(SIGPIPE, SIG_IGN);
	net_relay_turn_budget(1);
	memset(data, 'q', sizeof(data));
	for (int i = 0; i < QUEUED_RELAYS; i++) {
		int c[2], o[2];
		ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, c), 0);
		ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, o), 0);
		x.client[i] = c[0];
		proxy_side[i][0] = c[1];
		proxy_side[i][1] = o[1];
		origin[i] = o[0];
		ck_assert_int_eq(write(origin[i], data, sizeof(data)), (ssize_t)sizeof(data));
		struct net_relay_config rc = {
			.loop = loop, .client_fd = c[1], .upstream_fd = o[1], .done = queued_done, .arg = &x,
		};
		ck_assert_int_eq(net_relay_start(&rc, &r[i]), 0);
	}
	ev_run(ev, EVRUN_NOWAIT);
	int through = 0;
	for (int i = 0; i < QUEUED_RELAYS; i++)
		through += waiting(x.client[i]) > 0;
	ck_assert_int_le(through, 1);
	ck_assert(loop_spin(ev, all_arrived, &x, 10000));
	ck_assert_int_eq(x.done, 0);
	for (int i = 0; i < QUEUED_RELAYS; i++) {
		net_relay_free(r[i]);
		close(proxy_side[i][0]);
		close(proxy_side[i][1]);
		close(origin[i]);
		close(x.client[i]);
	}
	net_relay_turn_budget(0);
	tc_loop_ev_free(loop);
	ev_loop_destroy(ev);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("net_relay");
	TCase *tc = tcase_create("relay");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, relay_splice_and_copy);
	tcase_add_test(tc, relays_wait_for_the_next_turn);
	tcase_add_test(tc, resolver_callbacks_from_the_loop);
	suite_add_tcase(s, tc);
	return run_suite(s);
}
