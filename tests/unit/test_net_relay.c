/* SPDX-License-Identifier: MIT */
/*
 * Parts of the proxy engine alone on a real libev loop: the byte relay in
 * its two modes (exact bytes, half-closes both ways; bytes a slow reader
 * cannot take wait in the source's socket, not in the relay), and
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
#include <linux/sockios.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <time.h>
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

/* --- the relay alone: peeking through the shared buffer, or read/write ---- */

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

START_TEST(relay_peek_and_copy)
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

/* --- a slow reader ------------------------------------------------------- */

static int queued(int fd, unsigned long req)
{
	int n = 0;
	ck_assert_int_eq(ioctl(fd, req, &n), 0);
	return n;
}

static uint64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* The slow reader's buffers, small and fixed, so that the origin's bytes
 * outgrow them at once. */
#define SLOW_BUF (64 * 1024)
#define SLOW_TOTAL (2 * 1024 * 1024)

static int slow_reader_connect(uint16_t port)
{
	struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = htons(port),
				   .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), sz = SLOW_BUF;

	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &sz, sizeof(sz)), 0);
	ck_assert_int_eq(connect(fd, (struct sockaddr *)&sin, sizeof(sin)), 0);
	return fd;
}

/* A client that reads nothing while its origin sends more than the
 * sockets between them hold: once nothing moves, every byte the origin
 * sent is in a socket (the origin's, the relay's two, the client's), none
 * in the relay, and the rest waits at the origin; then the client reads
 * them all, in order. */
START_TEST(slow_reader_bytes_wait_in_the_source)
{
	struct ev_loop *ev = ev_loop_new(EVFLAG_AUTO);
	struct tc_loop *loop = tc_loop_ev_new(ev);
	struct relay_fx x = { 0 };
	struct net_relay *r = NULL;
	static char chunk[65536], in[65536];
	uint64_t sent = 0, got = 0, last_change;
	uint16_t port;
	int l = net_test_listen(&port), sz = SLOW_BUF;

	signal(SIGPIPE, SIG_IGN);
	x.a = slow_reader_connect(port);
	int a2 = accept(l, NULL, NULL);
	ck_assert_int_eq(setsockopt(a2, SOL_SOCKET, SO_SNDBUF, &sz, sizeof(sz)), 0);
	x.b = net_test_connect(port, 10000);
	int b2 = accept(l, NULL, NULL);
	close(l);
	struct net_relay_config rc = {
		.loop = loop, .client_fd = a2, .upstream_fd = b2,
		.progress = relay_progress, .done = relay_done, .arg = &x,
	};
	ck_assert_int_eq(net_relay_start(&rc, &r), 0);
	last_change = now_ms();
	for (uint64_t deadline = now_ms() + 10000; now_ms() < deadline && now_ms() - last_change < 200;) {
		bool moved = false;
		while (sent < SLOW_TOTAL) {
			for (size_t i = 0; i < sizeof(chunk); i++)
				chunk[i] = (char)((sent + i) % 251);
			ssize_t n = send(x.b, chunk, MIN(sizeof(chunk), SLOW_TOTAL - sent), MSG_DONTWAIT | MSG_NOSIGNAL);
			if (n <= 0)
				break;
			sent += (uint64_t)n;
			moved = true;
		}
		uint64_t down = x.down;
		ev_run(ev, EVRUN_NOWAIT);
		if (moved || x.down != down)
			last_change = now_ms();
		else
			usleep(1000);
	}
	ck_assert(!x.done);
	/* The reader's socket and the relay's send queue are full, and what
	 * could not go waits unread at the relay's upstream socket and the
	 * origin's (looked at until the kernel's queues settle). */
	int in_origin = 0, in_source = 0, in_dest = 0, at_client = 0;
	bool balanced = false;
	for (uint64_t deadline = now_ms() + 5000; !balanced && now_ms() < deadline;) {
		ev_run(ev, EVRUN_NOWAIT);
		in_origin = queued(x.b, SIOCOUTQ);
		in_source = queued(b2, SIOCINQ);
		in_dest = queued(a2, SIOCOUTQ);
		at_client = queued(x.a, SIOCINQ);
		balanced = in_source > 0 && x.down < sent && x.down == (uint64_t)in_dest + (uint64_t)at_client &&
			   sent == (uint64_t)in_origin + (uint64_t)in_source + x.down;
		if (!balanced)
			usleep(1000);
	}
	ck_assert_msg(balanced, "sent %llu: at the origin %d, at the relay's upstream %d, moved %llu (%d in the "
		      "relay's send queue, %d at the client)", (unsigned long long)sent, in_origin, in_source,
		      (unsigned long long)x.down, in_dest, at_client);
	/* The client reads it all, in order, once the origin is done. */
	while (sent < SLOW_TOTAL) {
		for (size_t i = 0; i < sizeof(chunk); i++)
			chunk[i] = (char)((sent + i) % 251);
		ssize_t n = send(x.b, chunk, MIN(sizeof(chunk), SLOW_TOTAL - sent), MSG_DONTWAIT | MSG_NOSIGNAL);
		if (n > 0)
			sent += (uint64_t)n;
		ev_run(ev, EVRUN_NOWAIT);
		n = recv(x.a, in, sizeof(in), MSG_DONTWAIT);
		for (ssize_t i = 0; i < n; i++)
			ck_assert_int_eq(in[i], (char)((got + (uint64_t)i) % 251));
		got += n > 0 ? (uint64_t)n : 0;
	}
	shutdown(x.b, SHUT_WR);
	for (uint64_t deadline = now_ms() + 20000; now_ms() < deadline;) {
		ssize_t n = recv(x.a, in, sizeof(in), MSG_DONTWAIT);
		if (n > 0) {
			for (ssize_t i = 0; i < n; i++)
				ck_assert_int_eq(in[i], (char)((got + (uint64_t)i) % 251));
			got += (uint64_t)n;
		} else if (n == 0)
			break;
		ev_run(ev, EVRUN_NOWAIT);
	}
	ck_assert_int_eq(x.r_done, 0);
	ck_assert_uint_eq(got, SLOW_TOTAL);
	net_relay_free(r);
	close(a2);
	close(b2);
	close(x.a);
	close(x.b);
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
	tcase_add_test(tc, relay_peek_and_copy);
	tcase_add_test(tc, slow_reader_bytes_wait_in_the_source);
	tcase_add_test(tc, relays_wait_for_the_next_turn);
	tcase_add_test(tc, resolver_callbacks_from_the_loop);
	suite_add_tcase(s, tc);
	return run_suite(s);
}
