/* SPDX-License-Identifier: MIT */
/*
 * The proxy engine end to end on a real libev loop: an HTTP origin and a
 * TCP echo on 127.0.0.1, reached by name through "hosts", the proxy on
 * its own loopback sockets, clients in a thread (blocking, with timeouts)
 * while the test's thread runs the loop until a condition holds or a
 * deadline passes. Every connection's record is kept and checked.
 */
#include <check.h>
#include <errno.h>
#include <ev.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "lib/base/loop.h"
#include "lib/net/net.h"
#include "proto/json.h"
#include "tests/unit/check_main.h"
#include "tests/unit/loop_spin.h"
#include "tests/unit/net_fixture.h"
#include "tests/unit/net_servers.h"

static struct fx F;

static char head_buf[16384];
static char body_buf[65536];

/* --- absolute-form GET ---------------------------------------------------- */

static void client_get(struct fx *f)
{
	char req[512];
	int fd = net_test_connect(f->http_port, 10000);
	snprintf(req, sizeof(req),
		 "GET http://Origin.test:%u/path/x?q=1 HTTP/1.1\r\nHost: origin.test\r\n"
		 "Connection: keep-alive, X-Hop\r\nX-Hop: secret\r\nKeep-Alive: 300\r\n"
		 "Proxy-Authorization: Basic Zm9vOmJhcg==\r\nProxy-Connection: keep-alive\r\nTE: trailers\r\n"
		 "Upgrade: websocket\r\nX-Keep: yes\r\n\r\n", f->origin.port);
	net_test_write(fd, req, strlen(req));
	net_test_read_all(fd, body_buf, sizeof(body_buf));
	close(fd);
}

START_TEST(http_get_forwarded_without_hop_headers)
{
	char want[128];

	start(&F, NULL);
	run_client(&F, client_get);
	ck_assert_msg(strncmp(body_buf, "HTTP/1.1 200 OK\r\n", 17) == 0, "%s", body_buf);
	ck_assert(strstr(body_buf, "\r\n\r\n" ORIGIN_BODY));
	wait_records(&F, 1);
	const char *h = F.origin.last_head;
	snprintf(want, sizeof(want), "GET /path/x?q=1 HTTP/1.1\r\nHost: origin.test:%u\r\n", F.origin.port);
	ck_assert_msg(strncmp(h, want, strlen(want)) == 0, "%s", h);
	ck_assert(strstr(h, "\r\nX-Keep: yes\r\n"));
	ck_assert(strstr(h, "\r\nConnection: close\r\n"));
	ck_assert_ptr_null(strcasestr(h, "X-Hop"));
	ck_assert_ptr_null(strcasestr(h, "Keep-Alive"));
	ck_assert_ptr_null(strcasestr(h, "Proxy-"));
	ck_assert_ptr_null(strcasestr(h, "\r\nTE:"));
	ck_assert_ptr_null(strcasestr(h, "Upgrade"));
	struct record *r = &F.rec[0];
	ck_assert_int_eq(r->proto, NET_PROTO_HTTP);
	ck_assert_str_eq(r->host, "origin.test");
	ck_assert_uint_eq(r->port, F.origin.port);
	ck_assert_str_eq(r->address, "127.0.0.1");
	ck_assert_int_eq(r->decision, NET_ALLOW);
	ck_assert_str_eq(r->rule, "allow:origin.test");
	ck_assert_str_eq(r->error, "");
	ck_assert_uint_eq(r->down, strlen(body_buf));
	ck_assert_uint_eq(r->up, strlen(h));
	stop(&F);
}
END_TEST

/* A POST's body reaches the origin, and nothing after it does. */
static void client_post(struct fx *f)
{
	char req[512];
	int fd = net_test_connect(f->http_port, 10000);
	snprintf(req, sizeof(req),
		 "POST http://origin.test:%u/up HTTP/1.1\r\nContent-Length: 10\r\n\r\n0123456789"
		 "GET http://evil.test/ HTTP/1.1\r\n\r\n", f->origin.port);
	net_test_write(fd, req, strlen(req));
	net_test_read_all(fd, body_buf, sizeof(body_buf));
	close(fd);
}

START_TEST(http_post_body_bounded)
{
	start(&F, NULL);
	run_client(&F, client_post);
	ck_assert(strstr(body_buf, ORIGIN_BODY));
	wait_records(&F, 1);
	ck_assert_uint_eq(F.origin.last_body, 10);
	ck_assert_uint_eq(F.origin.requests, 1);
	ck_assert_uint_eq(F.rec[0].up, strlen(F.origin.last_head) + 10);
	stop(&F);
}
END_TEST

/* --- CONNECT to the echo: bytes both ways, counted exactly ---------------- */

#define TUNNEL_BYTES (1u << 20)

/* Opens a CONNECT tunnel to host:port; returns the fd after the 200. */
static int connect_tunnel(struct fx *f, const char *host, uint16_t port, char *answer, size_t size)
{
	char req[512];
	int fd = net_test_connect(f->http_port, 10000);
	snprintf(req, sizeof(req), "CONNECT %s:%u HTTP/1.1\r\nHost: %s:%u\r\n\r\n", host, port, host, port);
	net_test_write(fd, req, strlen(req));
	net_test_read_head(fd, answer, size);
	return fd;
}

static void client_connect_echo(struct fx *f)
{
	static char out[65536], in[65536];
	int fd = connect_tunnel(f, "echo.test", f->echo.port, head_buf, sizeof(head_buf));
	if (strcmp(head_buf, "HTTP/1.1 200 Connection established\r\n\r\n") != 0)
		return;
	for (unsigned sent = 0; sent < TUNNEL_BYTES; sent += sizeof(out)) {
		for (size_t i = 0; i < sizeof(out); i++)
			out[i] = (char)(sent + i * 7);
		if (!net_test_write(fd, out, sizeof(out)) || !net_test_read_n(fd, in, sizeof(in)) ||
		    memcmp(in, out, sizeof(in)) != 0) {
			strcpy(body_buf, "mismatch");
			close(fd);
			return;
		}
	}
	shutdown(fd, SHUT_WR);
	long n = net_test_read_all(fd, in, sizeof(in));
	snprintf(body_buf, sizeof(body_buf), "ok %ld", n);
	close(fd);
}

START_TEST(connect_tunnel_counts_exact)
{
	start(&F, NULL);
	run_client(&F, client_connect_echo);
	ck_assert_str_eq(body_buf, "ok 0");
	wait_records(&F, 1);
	struct record *r = &F.rec[0];
	ck_assert_int_eq(r->proto, NET_PROTO_CONNECT);
	ck_assert_str_eq(r->host, "echo.test");
	ck_assert_int_eq(r->decision, NET_ALLOW);
	ck_assert(strncmp(r->rule, "allow:echo.test:", 16) == 0);
	ck_assert_str_eq(r->error, "");
	ck_assert_uint_eq(r->up, TUNNEL_BYTES);
	ck_assert_uint_eq(r->down, TUNNEL_BYTES);
	stop(&F);
}
END_TEST

/* --- SOCKS5 --------------------------------------------------------------- */

/* Sends greeting and a domain-name CONNECT; returns the reply code (or -1). */
static int socks_connect(struct fx *f, const char *host, uint16_t port, int *ret_fd)
{
	uint8_t msg[300], reply[10];
	size_t n = strlen(host);
	int fd = net_test_connect(f->socks_port, 10000);

	*ret_fd = fd;
	memcpy(msg, "\x05\x01\x00", 3);
	net_test_write(fd, msg, 3);
	if (!net_test_read_n(fd, reply, 2) || reply[0] != 5 || reply[1] != 0)
		return -1;
	msg[0] = 5; msg[1] = 1; msg[2] = 0; msg[3] = 3; msg[4] = (uint8_t)n;
	memcpy(msg + 5, host, n);
	msg[5 + n] = (uint8_t)(port >> 8);
	msg[6 + n] = (uint8_t)port;
	net_test_write(fd, msg, 7 + n);
	if (!net_test_read_n(fd, reply, 10) || reply[0] != 5)
		return -1;
	return reply[1];
}

static void client_socks(struct fx *f)
{
	char in[16];
	int fd;
	int code = socks_connect(f, "echo.test", f->echo.port, &fd);
	snprintf(body_buf, sizeof(body_buf), "code %d", code);
	if (code == 0) {
		net_test_write(fd, "ping!", 5);
		if (net_test_read_n(fd, in, 5) && memcmp(in, "ping!", 5) == 0)
			strcat(body_buf, " echoed");
	}
	close(fd);
	code = socks_connect(f, "x.evil.test", 443, &fd);
	close(fd);
	snprintf(body_buf + strlen(body_buf), 32, ", evil %d", code);
}

START_TEST(socks5_domain_connect_and_refusal)
{
	start(&F, NULL);
	run_client(&F, client_socks);
	ck_assert_str_eq(body_buf, "code 0 echoed, evil 2");
	wait_records(&F, 2);
	struct record *ok = F.rec[0].decision == NET_ALLOW ? &F.rec[0] : &F.rec[1];
	struct record *bad = ok == &F.rec[0] ? &F.rec[1] : &F.rec[0];
	ck_assert_int_eq(ok->proto, NET_PROTO_SOCKS5);
	ck_assert_uint_eq(ok->up, 5);
	ck_assert_uint_eq(ok->down, 5);
	ck_assert_int_eq(bad->decision, NET_DENY);
	ck_assert_str_eq(bad->rule, "deny:*.evil.test");
	stop(&F);
}
END_TEST

/* Sends a greeting and a raw request; returns the reply code (or -1). */
static int socks_raw(struct fx *f, const void *req, size_t len)
{
	uint8_t reply[10];
	int fd = net_test_connect(f->socks_port, 10000), code = -1;
	net_test_write(fd, "\x05\x01\x00", 3);
	if (net_test_read_n(fd, reply, 2) && reply[1] == 0 && net_test_write(fd, req, len) &&
	    net_test_read_n(fd, reply, 10) && reply[0] == 5)
		code = reply[1];
	close(fd);
	return code;
}

static void client_socks_replies(struct fx *f)
{
	static const uint8_t bind[] = { 5, 2, 0, 1, 127, 0, 0, 1, 0, 80 };
	static const uint8_t atyp[] = { 5, 1, 0, 9, 127, 0, 0, 1, 0, 80 };
	static const uint8_t v6_loopback[] = { 5, 1, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 80 };
	uint16_t closed_port;
	int l = net_test_listen(&closed_port);
	close(l);	/* nothing listens there now */
	int fd;
	int refused = socks_connect(f, "origin.test", closed_port, &fd);
	close(fd);
	char req[128], answer[512];
	fd = net_test_connect(f->http_port, 10000);
	snprintf(req, sizeof(req), "CONNECT origin.test:%u HTTP/1.1\r\n\r\n", closed_port);
	net_test_write(fd, req, strlen(req));
	net_test_read_all(fd, answer, sizeof(answer));
	close(fd);
	answer[24] = '\0';
	snprintf(body_buf, sizeof(body_buf), "bind %d atyp %d v6 %d refused %d http %s", socks_raw(f, bind, sizeof(bind)),
		 socks_raw(f, atyp, sizeof(atyp)), socks_raw(f, v6_loopback, sizeof(v6_loopback)), refused, answer);
}

START_TEST(socks5_reply_codes)
{
	start(&F, NULL);
	run_client(&F, client_socks_replies);
	ck_assert_str_eq(body_buf, "bind 7 atyp 8 v6 2 refused 5 http HTTP/1.1 502 Bad Gateway");
	wait_records(&F, 5);
	for (unsigned i = 0; i < 5; i++) {
		struct record *r = &F.rec[i];
		if (strcmp(r->host, "::1") == 0) {
			ck_assert_str_eq(r->rule, "private:::1");
			ck_assert_int_eq(r->decision, NET_DENY);
		} else if (strcmp(r->host, "origin.test") == 0) {
			ck_assert_str_eq(r->error, "connect refused");
			ck_assert_int_eq(r->decision, NET_ALLOW);
		} else
			ck_assert_str_eq(r->error, "bad request");
	}
	stop(&F);
}
END_TEST

/* --- refusals: policy, private addresses, bounds -------------------------- */

static void client_refusals(struct fx *f)
{
	static char a[4096], b[4096], c[4096], d[4096];
	int fd;

	fd = net_test_connect(f->http_port, 10000);
	net_test_write(fd, "CONNECT x.evil.test:443 HTTP/1.1\r\n\r\n", 36);
	net_test_read_all(fd, a, sizeof(a));
	close(fd);
	fd = net_test_connect(f->http_port, 10000);
	net_test_write(fd, "GET http://meta.test/latest/meta-data/ HTTP/1.1\r\n\r\n", 51);
	net_test_read_all(fd, b, sizeof(b));
	close(fd);
	fd = net_test_connect(f->http_port, 10000);
	net_test_write(fd, "CONNECT ten.test:80 HTTP/1.1\r\n\r\n", 32);
	net_test_read_all(fd, c, sizeof(c));
	close(fd);
	/* Over 16 KiB of head without its end. */
	fd = net_test_connect(f->http_port, 10000);
	net_test_write(fd, "GET http://origin.test/ HTTP/1.1\r\n", 34);
	memset(head_buf, 'x', sizeof(head_buf));
	memcpy(head_buf, "X-Big: ", 7);
	net_test_write(fd, head_buf, sizeof(head_buf));
	net_test_read_all(fd, d, sizeof(d));
	close(fd);
	snprintf(body_buf, sizeof(body_buf), "%s\n--\n%s\n--\n%s\n--\n%s", a, b, c, d);
}

START_TEST(refusals_name_the_rule)
{
	start(&F, NULL);
	run_client(&F, client_refusals);
	ck_assert_msg(strstr(body_buf, "HTTP/1.1 403 Forbidden\r\n"), "%s", body_buf);
	ck_assert(strstr(body_buf, "toolcalld: connection to x.evil.test:443 refused by rule deny:*.evil.test\n"));
	ck_assert(strstr(body_buf, "toolcalld: connection to meta.test:80 refused by rule private:169.254.169.254\n"));
	ck_assert(strstr(body_buf, "toolcalld: connection to ten.test:80 refused by rule private:::ffff:10.0.0.1\n"));
	ck_assert_msg(strstr(body_buf, "HTTP/1.1 431 Request Header Fields Too Large\r\n"), "%s", body_buf);
	wait_records(&F, 4);
	const struct net_refusal *ref;
	size_t more;
	ck_assert_uint_eq(net_proxy_refused(F.proxy, &ref, &more), 3);
	ck_assert_str_eq(ref[0].host, "x.evil.test");
	ck_assert_uint_eq(ref[0].port, 443);
	ck_assert_str_eq(ref[0].rule, "deny:*.evil.test");
	ck_assert_str_eq(ref[1].rule, "private:169.254.169.254");
	ck_assert_uint_eq(more, 0);
	struct record *meta = find_record(&F, "meta.test", NULL);
	ck_assert_ptr_nonnull(meta);
	ck_assert_str_eq(meta->address, "169.254.169.254");
	ck_assert_int_eq(meta->decision, NET_DENY);
	ck_assert_ptr_nonnull(find_record(&F, "", "bad request"));
	stop(&F);
}
END_TEST

/* A refused request with a large body still gets its 403: the proxy reads
 * and drops the body instead of resetting the connection under it. */
static void client_refused_post(struct fx *f)
{
	static char body[512 * 1024];
	char head[256];
	memset(body, 'p', sizeof(body));
	int fd = net_test_connect(f->http_port, 10000);
	snprintf(head, sizeof(head), "POST http://x.evil.test/upload HTTP/1.1\r\nContent-Length: %zu\r\n\r\n",
		 sizeof(body));
	bool sent = net_test_write(fd, head, strlen(head)) && net_test_write(fd, body, sizeof(body));
	shutdown(fd, SHUT_WR);
	net_test_read_all(fd, body_buf, sizeof(body_buf));
	strcat(body_buf, sent ? "|sent" : "|reset");
	close(fd);
}

START_TEST(refused_post_body_read_not_reset)
{
	start(&F, NULL);
	run_client(&F, client_refused_post);
	ck_assert_msg(strstr(body_buf, "HTTP/1.1 403 Forbidden\r\n"), "%s", body_buf);
	ck_assert(strstr(body_buf, "refused by rule deny:*.evil.test\n|sent"));
	wait_records(&F, 1);
	ck_assert_str_eq(F.rec[0].rule, "deny:*.evil.test");
	stop(&F);
}
END_TEST

/* --- ask: held until the daemon answers ----------------------------------- */

static bool ask_pending(void *arg)
{
	struct fx *f = arg;
	return f->ask != NULL;
}

static void client_ask(struct fx *f)
{
	int fd = connect_tunnel(f, "ask.test", f->echo.port, head_buf, sizeof(head_buf));
	char in[8];
	snprintf(body_buf, sizeof(body_buf), "%s", head_buf);
	if (strstr(head_buf, " 200 ")) {
		net_test_write(fd, "held", 4);
		if (net_test_read_n(fd, in, 4) && memcmp(in, "held", 4) == 0)
			strcat(body_buf, "echoed");
	}
	close(fd);
}

START_TEST(ask_holds_until_answered)
{
	pthread_t t;

	start(&F, NULL);
	for (int round = 0; round < 2; round++) {
		F.client = client_ask;
		atomic_store(&F.client_done, false);
		pthread_create(&t, NULL, client_main, &F);
		ck_assert(loop_spin(F.ev, ask_pending, &F, 10000));
		ck_assert_str_eq(F.ask_host, "ask.test");
		ck_assert_uint_eq(F.ask_port, F.echo.port);
		/* Held: nothing answered yet, even after the loop turned a while. */
		ck_assert(!loop_spin(F.ev, client_finished, &F, 200));
		net_ask_answer(TAKE_PTR(F.ask), round == 0, round == 0 ? NULL : "ask:deny-by-user");
		ck_assert(loop_spin(F.ev, client_finished, &F, 30000));
		pthread_join(t, NULL);
		if (round == 0)
			ck_assert_msg(strstr(body_buf, "200 Connection established\r\n\r\nechoed"), "%s", body_buf);
		else
			ck_assert_msg(strstr(body_buf, "403 Forbidden"), "%s", body_buf);
	}
	wait_records(&F, 2);
	ck_assert_ptr_nonnull(find_rule(&F, "ask:allow"));
	ck_assert_int_eq(find_rule(&F, "ask:allow")->decision, NET_ALLOW);
	ck_assert_ptr_nonnull(find_rule(&F, "ask:deny-by-user"));
	ck_assert_int_eq(find_rule(&F, "ask:deny-by-user")->decision, NET_DENY);
	ck_assert_uint_eq(F.cancels, 0);
	stop(&F);
}
END_TEST

/* A client that leaves while asked withdraws the ask. */
static void client_ask_leave(struct fx *f)
{
	int fd = net_test_connect(f->http_port, 10000);
	net_test_write(fd, "CONNECT ask.test:1 HTTP/1.1\r\n\r\n", 31);
	client_wait(&f->go, 1);	/* until the loop saw the ask */
	close(fd);
}

START_TEST(ask_withdrawn_when_client_leaves)
{
	start(&F, NULL);
	pthread_t t;
	F.client = client_ask_leave;
	pthread_create(&t, NULL, client_main, &F);
	ck_assert(loop_spin(F.ev, ask_pending, &F, 10000));
	atomic_store(&F.go, 1);
	ck_assert(loop_spin(F.ev, client_finished, &F, 10000));
	pthread_join(t, NULL);
	wait_records(&F, 1);
	ck_assert_ptr_null(F.ask);
	ck_assert_uint_eq(F.cancels, 1);
	ck_assert_str_eq(F.rec[0].error, "client closed");
	stop(&F);
}
END_TEST

/* --- limits ---------------------------------------------------------------- */

static void client_limit(struct fx *f)
{
	int a = net_test_connect(f->http_port, 10000), b = net_test_connect(f->socks_port, 10000);
	uint8_t r[2] = { 0, 0 };
	if (!client_wait(&f->active, 2)) {
		strcpy(body_buf, "never two active");
		return;
	}
	int c = net_test_connect(f->http_port, 10000);
	net_test_read_all(c, body_buf, sizeof(body_buf));
	close(c);
	int d = net_test_connect(f->socks_port, 10000);
	net_test_write(d, "\x05\x01\x00", 3);
	net_test_read_n(d, r, 2);
	snprintf(body_buf + strlen(body_buf), 64, "|socks %d %d", r[0], r[1]);
	close(d);
	close(a);
	close(b);
}

START_TEST(connection_limit)
{
	struct net_limits lim;
	net_limits_default(&lim);
	lim.max_connections = 2;
	start(&F, &lim);
	run_client(&F, client_limit);
	ck_assert_msg(strstr(body_buf, "HTTP/1.1 503 Service Unavailable\r\n"), "%s", body_buf);
	ck_assert(strstr(body_buf, "limit:net_connections"));
	ck_assert(strstr(body_buf, "|socks 5 255"));
	wait_records(&F, 4);
	ck_assert_str_eq(F.rec[0].error, "limit");
	ck_assert_str_eq(F.rec[1].error, "limit");
	stop(&F);
}
END_TEST

static void client_idle(struct fx *f)
{
	struct timespec pace = { 0, 60 * 1000 * 1000 };
	char in[16];
	/* A tunnel that moves a byte every 60 ms outlives the 300 ms idle
	 * bound (the pace is the scenario, not a wait for the proxy). */
	int busy = connect_tunnel(f, "echo.test", f->echo.port, head_buf, sizeof(head_buf));
	int alive = 0;
	for (int i = 0; i < 6; i++) {
		nanosleep(&pace, NULL);
		if (net_test_write(busy, "k", 1) && net_test_read_n(busy, in, 1))
			alive++;
	}
	close(busy);
	int fd = connect_tunnel(f, "echo.test", f->echo.port, head_buf, sizeof(head_buf));
	long n = net_test_read_all(fd, in, sizeof(in));	/* nothing sent: the proxy closes */
	char note[32];
	snprintf(note, sizeof(note), "alive %d|", alive);
	strcat(head_buf, note);
	snprintf(body_buf, sizeof(body_buf), "%s%ld", head_buf, n);
	close(fd);
	fd = net_test_connect(f->http_port, 10000);	/* says nothing at all */
	n = net_test_read_all(fd, head_buf, sizeof(head_buf));
	head_buf[200] = '\0';
	strcat(body_buf, "|");
	strcat(body_buf, head_buf);
	close(fd);
}

START_TEST(idle_and_header_timeouts)
{
	struct net_limits lim;
	net_limits_default(&lim);
	lim.idle_timeout_ms = 300;
	lim.header_timeout_ms = 300;
	start(&F, &lim);
	uint64_t t0 = mono_ms();
	run_client(&F, client_idle);
	ck_assert_msg(strstr(body_buf, "200 Connection established\r\n\r\nalive 6|0|"), "%s", body_buf);
	ck_assert(strstr(body_buf, "|HTTP/1.1 408 Request Timeout\r\n"));
	ck_assert_uint_ge(mono_ms() - t0, 600);
	wait_records(&F, 3);
	struct record *busy = find_record(&F, "echo.test", "");	/* closed by its client */
	ck_assert_ptr_nonnull(busy);
	ck_assert_uint_eq(busy->up, 6);
	ck_assert_ptr_nonnull(find_record(&F, "echo.test", "idle"));
	ck_assert_ptr_nonnull(find_record(&F, "", "timeout"));
	struct net_proxy_stats st;
	net_proxy_stats(F.proxy, &st);
	ck_assert_uint_eq(st.accepted, 3);
	ck_assert_uint_eq(st.active, 0);
	ck_assert_uint_eq(st.allowed, 2);
	ck_assert_uint_eq(st.denied, 1);
	ck_assert_uint_eq(st.bytes_up, 6);
	ck_assert_uint_eq(st.bytes_down, 6);
	stop(&F);
}
END_TEST

/* A client that sends and never reads fills what the proxy holds for it
 * (a pipe, the sockets' buffers) and stops there; another client is served
 * meanwhile, and the stuck one still ends cleanly. */
static void client_slow_reader(struct fx *f)
{
	static char chunk[65536];
	char req[512];
	int slow = connect_tunnel(f, "echo.test", f->echo.port, head_buf, sizeof(head_buf));
	size_t pushed = 0;
	for (;;) {
		ssize_t n = send(slow, chunk, sizeof(chunk), MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n <= 0)
			break;	/* full: everything between the ends holds bytes now */
		pushed += (size_t)n;
		if (pushed > (256u << 20) - sizeof(chunk))
			break;	/* nothing bounded the flow: the check below fails */
	}
	int fd = net_test_connect(f->http_port, 10000);
	snprintf(req, sizeof(req), "GET http://origin.test:%u/ HTTP/1.1\r\n\r\n", f->origin.port);
	net_test_write(fd, req, strlen(req));
	net_test_read_all(fd, body_buf, sizeof(body_buf));
	close(fd);
	close(slow);
	/* The kernel's socket buffers (tcp_rmem, tcp_wmem: tens of MiB at most)
	 * and the proxy's pipe are all there is between the two ends. */
	snprintf(req, sizeof(req), "|pushed %s", pushed > 0 && pushed <= (256u << 20) - sizeof(chunk) ?
		 "bounded" : "unbounded");
	strcat(body_buf, req);
}

START_TEST(slow_reader_holds_only_itself)
{
	start(&F, NULL);
	run_client(&F, client_slow_reader);
	ck_assert_msg(strstr(body_buf, ORIGIN_BODY), "%s", body_buf);
	ck_assert_msg(strstr(body_buf, "|pushed bounded"), "%s", body_buf);
	wait_records(&F, 2);
	stop(&F);
}
END_TEST

/* --- the proxy destroyed with live tunnels -------------------------------- */

static void client_tunnels(struct fx *f)
{
	int fds[3];
	char in[8];
	for (int i = 0; i < 3; i++) {
		fds[i] = connect_tunnel(f, "echo.test", f->echo.port, head_buf, sizeof(head_buf));
		net_test_write(fds[i], "abc", 3);
		net_test_read_n(fds[i], in, 3);
	}
	atomic_store(&f->stage, 1);
	int closed = 0;
	for (int i = 0; i < 3; i++) {
		if (net_test_read_all(fds[i], in, sizeof(in)) == 0)
			closed++;
		close(fds[i]);
	}
	snprintf(body_buf, sizeof(body_buf), "closed %d", closed);
}

static bool stage_one(void *arg)
{
	struct fx *f = arg;
	return atomic_load(&f->stage) == 1;
}

START_TEST(destroy_reports_every_connection_once)
{
	pthread_t t;
	start(&F, NULL);
	F.client = client_tunnels;
	pthread_create(&t, NULL, client_main, &F);
	ck_assert(loop_spin(F.ev, stage_one, &F, 30000));
	ck_assert_uint_eq(atomic_load(&F.n_rec), 0);
	F.proxy = net_proxy_free(F.proxy);
	ck_assert_uint_eq(atomic_load(&F.n_rec), 3);
	ck_assert(loop_spin(F.ev, client_finished, &F, 30000));
	pthread_join(t, NULL);
	ck_assert_str_eq(body_buf, "closed 3");
	for (int i = 0; i < 3; i++) {
		ck_assert_str_eq(F.rec[i].error, "closed");
		ck_assert_uint_eq(F.rec[i].up, 3);
		ck_assert_uint_eq(F.rec[i].down, 3);
	}
	stop(&F);
	ck_assert_uint_eq(atomic_load(&F.n_rec), 3);
}
END_TEST

static void noop_done(void *ctx, const struct net_conn_record *r)
{
	(void)ctx;
	(void)r;
}

/* Listeners lent to a proxy (a kept namespace's, served again by the
 * next call) stay open and as they were when it is freed; its own are
 * closed. */
START_TEST(borrowed_listeners_stay_open)
{
	static const struct net_proxy_ops ops = { .connection_done = noop_done };
	struct ev_loop *ev = ev_loop_new(EVFLAG_AUTO);
	struct tc_loop *loop = tc_loop_ev_new(ev);
	struct net_resolver *res = NULL;
	uint16_t port;
	ck_assert_int_eq(net_resolver_new(loop, 0, &res), 0);
	for (int borrowed = 0; borrowed < 2; borrowed++) {
		int fd = net_test_listen(&port);
		ck_assert_int_eq(fcntl(fd, F_SETFL, O_NONBLOCK), 0);
		struct net_proxy_config cfg = {
			.loop = loop, .resolver = res, .http_fd = fd, .socks_fd = -1,
			.borrowed = borrowed, .ops = &ops,
		};
		struct net_proxy *p = NULL;
		ck_assert_int_eq(net_proxy_new(&cfg, &p), 0);
		p = net_proxy_free(p);
		if (borrowed) {
			ck_assert_int_eq(fcntl(fd, F_GETFL) & O_NONBLOCK, O_NONBLOCK);
			int c = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
			struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(port),
						 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
			ck_assert_int_eq(connect(c, (struct sockaddr *)&a, sizeof(a)), 0);
			int s = accept(fd, NULL, NULL);
			ck_assert_int_ge(s, 0);
			close(s);
			close(c);
			close(fd);
		} else {
			errno = 0;
			ck_assert_int_lt(fcntl(fd, F_GETFD), 0);
			ck_assert_int_eq(errno, EBADF);
		}
	}
	net_resolver_free(res);
	tc_loop_ev_free(loop);
	ev_loop_destroy(ev);
}
END_TEST

/* --- names through c-ares: /etc/hosts, and a name that cannot resolve ----- */

static void client_resolve(struct fx *f)
{
	char in[8];
	int fd = connect_tunnel(f, "localhost", f->echo.port, head_buf, sizeof(head_buf));
	snprintf(body_buf, sizeof(body_buf), "%.40s", head_buf);
	if (strstr(head_buf, " 200 ")) {
		net_test_write(fd, "dns", 3);
		if (net_test_read_n(fd, in, 3) && memcmp(in, "dns", 3) == 0)
			strcat(body_buf, "echoed");
	}
	close(fd);
	fd = connect_tunnel(f, "nothing.invalid", 80, head_buf, sizeof(head_buf));
	head_buf[40] = '\0';
	strcat(body_buf, "|");
	strcat(body_buf, head_buf);
	close(fd);
}

START_TEST(resolver_hosts_file_and_failure)
{
	struct net_limits lim;
	net_limits_default(&lim);
	lim.connect_timeout_ms = 3000;
	start(&F, &lim);
	run_client(&F, client_resolve);
	ck_assert_msg(strstr(body_buf, "HTTP/1.1 200 Connection established\r\n\r\n"), "%s", body_buf);
	ck_assert_msg(strstr(body_buf, "echoed|"), "%s", body_buf);
	/* No DNS server answers "no such name" (502), or none answers at all (504). */
	ck_assert_msg(strstr(body_buf, "|HTTP/1.1 502 Bad Gateway") || strstr(body_buf, "|HTTP/1.1 504 Gateway Timeout"),
		      "%s", body_buf);
	wait_records(&F, 2);
	struct record *lo = find_record(&F, "localhost", NULL), *nx = find_record(&F, "nothing.invalid", NULL);
	ck_assert_ptr_nonnull(lo);
	ck_assert_ptr_nonnull(nx);
	ck_assert_str_eq(lo->address, "127.0.0.1");
	ck_assert_str_eq(lo->rule, "allow:localhost");
	ck_assert(strcmp(nx->error, "unresolvable") == 0 || strcmp(nx->error, "timeout") == 0);
	ck_assert_int_eq(nx->decision, NET_ALLOW);
	stop(&F);
}
END_TEST

/* --- the byte budget (limits.net_mb) --------------------------------------- */

static void client_budget(struct fx *f)
{
	static char out[65536], in[65536];
	int fd = connect_tunnel(f, "echo.test", f->echo.port, head_buf, sizeof(head_buf));
	long got = 0;
	memset(out, 'b', sizeof(out));
	net_test_write(fd, out, sizeof(out));
	got = net_test_read_all(fd, in, sizeof(in));	/* the proxy ends it past the budget */
	close(fd);
	fd = connect_tunnel(f, "echo.test", f->echo.port, head_buf, sizeof(head_buf));
	net_test_read_all(fd, body_buf, sizeof(body_buf));
	close(fd);
	snprintf(in, sizeof(in), "|%ld", got);
	strcat(body_buf, in);
	strcat(body_buf, head_buf);
}

START_TEST(byte_budget)
{
	struct net_limits lim;
	net_limits_default(&lim);
	lim.max_bytes = 100000;
	start(&F, &lim);
	run_client(&F, client_budget);
	ck_assert_msg(strstr(body_buf, "HTTP/1.1 403 Forbidden"), "%s", body_buf);
	ck_assert(strstr(body_buf, "refused by rule limit:net_mb"));
	wait_records(&F, 2);
	ck_assert_str_eq(F.rec[0].error, "budget");
	ck_assert_uint_ge(F.rec[0].up + F.rec[0].down, 100000);
	ck_assert_uint_le(F.rec[0].up, 65536);
	ck_assert_str_eq(F.rec[1].rule, "limit:net_mb");
	stop(&F);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("net_proxy");
	TCase *tc = tcase_create("proxy");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, http_get_forwarded_without_hop_headers);
	tcase_add_test(tc, http_post_body_bounded);
	tcase_add_test(tc, connect_tunnel_counts_exact);
	tcase_add_test(tc, socks5_domain_connect_and_refusal);
	tcase_add_test(tc, refusals_name_the_rule);
	tcase_add_test(tc, socks5_reply_codes);
	tcase_add_test(tc, refused_post_body_read_not_reset);
	tcase_add_test(tc, ask_holds_until_answered);
	tcase_add_test(tc, ask_withdrawn_when_client_leaves);
	tcase_add_test(tc, connection_limit);
	tcase_add_test(tc, idle_and_header_timeouts);
	tcase_add_test(tc, slow_reader_holds_only_itself);
	tcase_add_test(tc, destroy_reports_every_connection_once);
	tcase_add_test(tc, borrowed_listeners_stay_open);
	tcase_add_test(tc, resolver_hosts_file_and_failure);
	tcase_add_test(tc, byte_budget);
	suite_add_tcase(s, tc);
	return run_suite(s);
}
