/* SPDX-License-Identifier: MIT */
/*
 * The connection layer (daemon/conn*.c) on a socketpair, with a layer above
 * of the test's own: lines framed (split across reads, several in one, too
 * long, the last one without its newline), the bounds (batch length, JSON
 * depth, empty batch, a uid's memory), pipelining (a batch waiting for a member answered
 * later, a duplicate id in flight), and a connection closed while busy: by
 * a request handled synchronously in the middle of a pipelined batch (the
 * rest of the batch is never looked at, and nothing freed is touched:
 * AddressSanitizer says so), and by its client while a request waits;
 * idleness (closed after the timeout, unless listening or busy).
 */
#include <check.h>
#include <errno.h>
#include <ev.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "daemon/conn.h"
#include "daemon/peers.h"
#include "proto/base/util.h"
#include "proto/json.h"
#include "tests/unit/check_main.h"

/* --- a layer above of the test's own ------------------------------------- */

/*
 * Methods: "echo" answers its params at once; "later" waits for the test
 * (kept in parked[]); "close" closes the connection inside the request;
 * "answer_close" answers, then closes; "close_reap" closes and frees the
 * closed connections at once, as if the loop had turned meanwhile.
 */
struct upper {
	unsigned handled;		/* requests and notifications seen */
	unsigned notifications;
	struct pending *parked[8];
	unsigned n_parked;
	unsigned upper_freed;		/* pending->upper_free calls */
	unsigned closing, closed;	/* hook calls */
	char last_method[32];
};

static struct upper up;
static struct conns cs;
static struct peers peers;
static struct ev_loop *loop;
static int client = -1;

static void upper_free(void *arg)
{
	(void)arg;
	up.upper_freed++;
}

static bool method_is(const struct jrpc_req *req, const char *name)
{
	return req->method_len == strlen(name) && !memcmp(req->method, name, req->method_len);
}

static void on_request(struct conn *c, const struct jrpc_req *req, struct pending *p)
{
	up.handled++;
	snprintf(up.last_method, sizeof(up.last_method), "%.*s", (int)req->method_len, req->method);
	if (!p) {
		up.notifications++;
		return;
	}
	if (method_is(req, "echo")) {
		_cleanup_(buf_free) struct buf text = {0};
		if (req->params)
			json_canonical(req->params, &text);
		else
			buf_append(&text, "null", 4);
		conn_result(p, buf_head(&text), buf_size(&text));
	} else if (method_is(req, "later")) {
		ck_assert_uint_lt(up.n_parked, ELEMENTSOF(up.parked));
		p->upper = &up;
		p->upper_free = upper_free;
		up.parked[up.n_parked++] = p;
	} else if (method_is(req, "big")) {
		/* An answer larger than a connection keeps between answers. */
		static char text[20002];
		memset(text, 'x', sizeof(text));
		text[0] = text[sizeof(text) - 1] = '"';
		conn_result(p, text, sizeof(text));
	} else if (method_is(req, "close")) {
		conn_close(c);
	} else if (method_is(req, "answer_close")) {
		conn_result(p, "true", 4);
		conn_close(c);
	} else if (method_is(req, "close_reap")) {
		conn_close(c);
		conns_reap(c->conns);
	} else {
		conn_error(p, JRPC_METHOD_NOT_FOUND, "Method not found", NULL);
	}
}

static void hook_closing(void *arg, struct conn *c)
{
	(void)arg;
	up.closing++;
	/* The requests of c still waiting are the layer above's to forget. */
	unsigned kept = 0;
	for (unsigned i = 0; i < up.n_parked; i++)
		if (up.parked[i]->conn != c)
			up.parked[kept++] = up.parked[i];
	up.n_parked = kept;
}

static void hook_closed(void *arg, struct conn *c)
{
	(void)arg;
	(void)c;
	up.closed++;
}

static const struct conn_hook hook = { .closing = hook_closing, .closed = hook_closed };

static const struct conn_limits limits = {
	.max_message_bytes = 256,
	.max_json_depth = 8,
	.max_batch = 4,
	.max_output_bytes = 1 << 20,
	.max_client_memory = 64 << 20,
	.per_uid_memory = 64 << 20,
	.turn_budget_us = 1000000,
};

/* Opens a connection under the bounds in force; returns its client's end. */
static int open_conn(void)
{
	int sv[2];
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv), 0);
	struct ucred cred = { .pid = getpid(), .uid = getuid(), .gid = getgid() };
	conns_accept(&cs, sv[1], &cred);
	return sv[0];
}

static void setup(void)
{
	memset(&up, 0, sizeof(up));
	memset(&cs, 0, sizeof(cs));	/* conns_init takes a zeroed table (CK_FORK=no runs cases in one process) */
	loop = ev_loop_new(EVFLAG_AUTO);
	peers_init(&peers);
	conns_init(&cs, loop, &peers, on_request);
	conns_set_limits(&cs, &limits);
	conns_add_hook(&cs, &hook, NULL);
	client = open_conn();
}

static void teardown(void)
{
	conns_done(&cs);
	peers_done(&peers);
	ev_loop_destroy(loop);
	if (client >= 0)
		close(client);
	client = -1;
}

/* One turn of the daemon's loop: what is readable is read and handled,
 * then what runs before the loop blocks. */
static void turn(void)
{
	ev_run(loop, EVRUN_NOWAIT);
	conns_before_poll(&cs);
}

static void send_text(const char *text)
{
	size_t n = strlen(text);
	ck_assert_int_eq(send(client, text, n, MSG_NOSIGNAL), (ssize_t)n);
}

/* What the daemon wrote, once n lines came (or EOF, or 5 s passed):
 * malloc'd, NULL when nothing came. *eof says whether the connection was
 * closed. */
static char *receive(unsigned n, bool *eof)
{
	struct buf got = {0};
	unsigned lines = 0;
	bool closed = false;
	uint64_t deadline = mono_ms() + 5000;
	while (lines < n && !closed && mono_ms() < deadline) {
		turn();
		char chunk[4096];
		ssize_t r = recv(client, chunk, sizeof(chunk), 0);
		if (r == 0) {
			closed = true;
		} else if (r > 0) {
			buf_append(&got, chunk, (size_t)r);
			for (ssize_t i = 0; i < r; i++)
				lines += chunk[i] == '\n';
		} else {
			ck_assert_int_eq(errno, EAGAIN);
			poll(&(struct pollfd){ .fd = client, .events = POLLIN }, 1, 10);
		}
	}
	if (eof)
		*eof = closed;
	if (!buf_size(&got))
		return NULL;
	buf_putc(&got, '\0');
	return buf_steal(&got);
}

/* True when nothing more comes within a few turns. */
static bool quiet(void)
{
	for (int i = 0; i < 5; i++) {
		turn();
		char ch;
		if (recv(client, &ch, 1, MSG_PEEK) >= 0)
			return false;
		poll(&(struct pollfd){ .fd = client, .events = POLLIN }, 1, 5);
	}
	return true;
}

/* --- framing -------------------------------------------------------------- */

START_TEST(lines_split_and_joined)
{
	/* Two lines in one write, a third split across two. */
	send_text("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"echo\",\"params\":[1]}\n"
		  "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"echo\",\"params\":[2]}\n{\"jsonrpc\":\"2.0\",\"id\":3,");
	_cleanup_free_ char *first = receive(2, NULL);
	ck_assert_ptr_nonnull(first);
	ck_assert_str_eq(first, "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":[1]}\n"
				"{\"jsonrpc\":\"2.0\",\"id\":2,\"result\":[2]}\n");
	send_text("\"method\":\"echo\",\"params\":[3]}\n");
	_cleanup_free_ char *second = receive(1, NULL);
	ck_assert_str_eq(second, "{\"jsonrpc\":\"2.0\",\"id\":3,\"result\":[3]}\n");
	ck_assert_uint_eq(up.handled, 3);
}
END_TEST

START_TEST(line_too_long_then_next)
{
	char line[600];
	int n = snprintf(line, sizeof(line), "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"echo\",\"params\":[\"%0400d\"]}\n", 0);
	ck_assert_int_lt(n, (int)sizeof(line));
	send_text(line);
	send_text("{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"echo\",\"params\":[2]}\n");
	_cleanup_free_ char *got = receive(2, NULL);
	ck_assert_ptr_nonnull(got);
	ck_assert_ptr_nonnull(strstr(got, "\"id\":null"));
	ck_assert_ptr_nonnull(strstr(got, "message longer than 256 bytes"));
	ck_assert_ptr_nonnull(strstr(got, "{\"jsonrpc\":\"2.0\",\"id\":2,\"result\":[2]}\n"));
	/* The long line never reached the layer above. */
	ck_assert_uint_eq(up.handled, 1);
}
END_TEST

START_TEST(last_line_without_newline)
{
	send_text("{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"echo\",\"params\":{}}");
	ck_assert_int_eq(shutdown(client, SHUT_WR), 0);
	bool eof;
	_cleanup_free_ char *got = receive(1, &eof);
	ck_assert_str_eq(got, "{\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{}}\n");
	/* Answered, with nothing more to come: the connection closes. */
	if (!eof) {
		_cleanup_free_ char *rest = receive(1, &eof);
		ck_assert_ptr_null(rest);
	}
	ck_assert(eof);
	ck_assert_uint_eq(up.closed, 1);
}
END_TEST

/* --- bounds --------------------------------------------------------------- */

START_TEST(bounds_refused_with_id_null)
{
	send_text("[]\n");
	send_text("[1,2,3,4,5]\n");
	send_text("[[[[[[[[[[1]]]]]]]]]]\n");
	send_text("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\n");
	_cleanup_free_ char *got = receive(4, NULL);
	ck_assert_ptr_nonnull(got);
	ck_assert_ptr_nonnull(strstr(got, "Invalid Request: empty batch"));
	ck_assert_ptr_nonnull(strstr(got, "a batch of 5 requests is more than the 4 allowed"));
	ck_assert_ptr_nonnull(strstr(got, "\"code\":-32700"));
	/* Each refusal is one line, with id null. */
	unsigned nulls = 0;
	for (const char *s = got; (s = strstr(s, "\"id\":null")); s++)
		nulls++;
	ck_assert_uint_eq(nulls, 4);
	ck_assert_uint_eq(up.handled, 0);
}
END_TEST

/* The memory bounds (conn_evict.c): what a uid's connections hold past
 * limits.per_uid_memory (never less than two connections' worth) costs
 * the one holding the most its connection, told why. */
START_TEST(uid_over_its_memory_loses_its_largest)
{
	struct conn_limits l = limits;
	l.max_output_bytes = 1024;
	l.per_uid_memory = 1;	/* the floor: 2 * (2 * 256 + 2 * 1024) = 5120 bytes */
	conns_set_limits(&cs, &l);
	int other = open_conn();
	/* Lines read in one go leave the input buffer that large. */
	static const char note[] = "{\"jsonrpc\":\"2.0\",\"method\":\"note\"}\n";
	struct buf many = {0}, more = {0};
	for (int i = 0; i < 80; i++)
		buf_append(&many, note, strlen(note));
	for (int i = 0; i < 300; i++)	/* 10,500 bytes: the larger buffer, still kept (16 KiB at most) */
		buf_append(&more, note, strlen(note));
	ck_assert_int_eq(send(client, buf_head(&many), buf_size(&many), 0), (ssize_t)buf_size(&many));
	ck_assert(quiet());
	ck_assert_uint_eq(cs.evicted, 0);	/* one connection: within the floor */
	ck_assert_int_eq(send(other, buf_head(&more), buf_size(&more), 0), (ssize_t)buf_size(&more));
	bool eof = false;
	char got[512] = "";
	uint64_t deadline = mono_ms() + 5000;
	size_t n = 0;
	while (!eof && mono_ms() < deadline) {
		turn();
		ssize_t r = recv(other, got + n, sizeof(got) - 1 - n, 0);
		if (r == 0)
			eof = true;
		else if (r > 0)
			n += (size_t)r;
		else
			poll(&(struct pollfd){ .fd = other, .events = POLLIN }, 1, 5);
	}
	got[n] = '\0';
	ck_assert(eof);
	ck_assert_uint_eq(up.notifications, 380);
	ck_assert_uint_eq(cs.evicted, 1);
	ck_assert_uint_eq(cs.n, 1);
	ck_assert_msg(strstr(got, "more than limits.per_uid_memory allows, and this connection held the most"),
		      "%s", got);
	/* The smaller one stays. */
	send_text("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"echo\",\"params\":[1]}\n");
	_cleanup_free_ char *answer = receive(1, NULL);
	ck_assert_str_eq(answer, "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":[1]}\n");
	buf_free(&many);
	buf_free(&more);
	close(other);
}
END_TEST

/* --- pipelining ----------------------------------------------------------- */

START_TEST(batch_waits_for_its_last_member)
{
	send_text("[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"echo\",\"params\":[1]},"
		  "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"later\"},"
		  "{\"jsonrpc\":\"2.0\",\"method\":\"note\"},"
		  "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"echo\",\"params\":[3]}]\n");
	ck_assert(quiet());
	ck_assert_uint_eq(up.handled, 4);
	ck_assert_uint_eq(up.notifications, 1);
	ck_assert_uint_eq(up.n_parked, 1);
	/* The ids of the batch stay taken until it is written: 1 was
	 * answered, 2 is in flight. */
	ck_assert_ptr_eq(conn_pending_by_id(list_first(&cs.all, struct conn, node), "2"), up.parked[0]);
	send_text("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"echo\"}\n"
		  "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"echo\"}\n");
	_cleanup_free_ char *dups = receive(2, NULL);
	ck_assert_ptr_nonnull(dups);
	ck_assert_ptr_nonnull(strstr(dups, "{\"kind\":\"duplicate_id\"}"));
	ck_assert_ptr_eq(strstr(dups, "\"result\""), NULL);
	/* The last member's answer writes the batch, in its order. */
	conn_result(up.parked[0], "\"two\"", 5);
	up.n_parked = 0;
	_cleanup_free_ char *got = receive(1, NULL);
	ck_assert_str_eq(got, "[{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":[1]},"
			      "{\"jsonrpc\":\"2.0\",\"id\":2,\"result\":\"two\"},"
			      "{\"jsonrpc\":\"2.0\",\"id\":3,\"result\":[3]}]\n");
	ck_assert_uint_eq(up.upper_freed, 1);
	ck_assert_uint_eq(cs.n_pendings, 0);
}
END_TEST

/* --- closed while busy ----------------------------------------------------- */

/* A request handled synchronously closes the connection in the middle of a
 * pipelined batch, after a sibling was answered synchronously: the members
 * after it, and the lines after the batch, are never handled. */
static void closes_mid_batch(const char *method)
{
	char text[512];
	snprintf(text, sizeof(text),
		 "{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"later\"}\n"
		 "[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"echo\",\"params\":[1]},"
		 "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"%s\"},"
		 "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"echo\",\"params\":[3]}]\n"
		 "{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"echo\"}\n", method);
	send_text(text);
	bool eof = false;
	_cleanup_free_ char *got = receive(1, &eof);
	if (!eof) {
		_cleanup_free_ char *rest = receive(1, &eof);
		(void)rest;
	}
	ck_assert(eof);
	/* The parked call, the echo and the closing request: no more. */
	ck_assert_uint_eq(up.handled, 3);
	ck_assert_str_eq(up.last_method, method);
	/* The request waiting went with the connection, once. */
	ck_assert_uint_eq(up.closing, 1);
	ck_assert_uint_eq(up.closed, 1);
	ck_assert_uint_eq(up.upper_freed, 1);
	ck_assert_uint_eq(cs.n_pendings, 0);
	ck_assert_uint_eq(cs.n, 0);
	conns_reap(&cs);
	ck_assert(list_empty(&cs.graveyard));
}

START_TEST(close_inside_a_batch)
{
	closes_mid_batch("close");
}
END_TEST

START_TEST(answer_then_close_inside_a_batch)
{
	closes_mid_batch("answer_close");
}
END_TEST

/* The closed connection is reaped inside the request (as a nested loop
 * turn could): it stays in memory until the read that handled the request
 * is over, then goes. */
START_TEST(reaped_inside_a_request)
{
	closes_mid_batch("close_reap");
}
END_TEST

/* The client goes while a request waits: the layer above lets go of it
 * (closing hook, upper_free), and nothing is answered afterwards. */
START_TEST(client_gone_while_busy)
{
	send_text("{\"jsonrpc\":\"2.0\",\"id\":\"a\",\"method\":\"later\"}\n"
		  "{\"jsonrpc\":\"2.0\",\"id\":\"b\",\"method\":\"later\"}\n");
	ck_assert(quiet());
	ck_assert_uint_eq(up.n_parked, 2);
	ck_assert_uint_eq(cs.n_pendings, 2);
	close(client);
	client = -1;
	uint64_t deadline = mono_ms() + 5000;
	while (!up.closed && mono_ms() < deadline) {
		turn();
		usleep(1000);
	}
	ck_assert_uint_eq(up.closing, 1);
	ck_assert_uint_eq(up.closed, 1);
	ck_assert_uint_eq(up.upper_freed, 2);
	ck_assert_uint_eq(cs.n_pendings, 0);
	ck_assert_uint_eq(cs.n, 0);
	ck_assert_uint_eq(peers.memory, 0);
}
END_TEST

/* --- idleness -------------------------------------------------------------- */

/* Turns the loop until fd's connection is closed (EOF) or ms pass; true
 * on EOF. */
static bool closed_within(int fd, int ms)
{
	uint64_t deadline = mono_ms() + (uint64_t)ms;
	while (mono_ms() < deadline) {
		turn();
		char ch;
		if (recv(fd, &ch, 1, MSG_PEEK) == 0)
			return true;
		poll(&(struct pollfd){ .fd = fd, .events = POLLIN }, 1, 5);
	}
	return false;
}

/* An idle connection is closed after limits.idle_timeout_ms; one whose
 * client waits for events silently (listening, set by the layer above)
 * is not, nor one with a request in flight. */
START_TEST(idle_closed_unless_listening)
{
	struct conn_limits l = limits;
	l.idle_timeout_ms = 40;
	conns_set_limits(&cs, &l);
	int idle = open_conn();
	int listening = open_conn();
	int busy = open_conn();
	struct conn *lc = NULL;
	struct list *pos;
	for (pos = cs.all.next; pos != &cs.all; pos = pos->next)
		lc = list_entry(pos, struct conn, node);	/* the last opened: busy */
	static const char later[] = "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"later\"}\n";
	ck_assert_int_eq(send(busy, later, strlen(later), 0), (ssize_t)strlen(later));
	lc = list_entry(lc->node.prev, struct conn, node);	/* listening */
	lc->listening = true;
	ck_assert(closed_within(idle, 5000));
	/* Four timeouts, in which the others stay. */
	ck_assert(!closed_within(listening, 160));
	ck_assert(!closed_within(busy, 1));
	ck_assert_uint_eq(up.n_parked, 1);
	ck_assert_uint_eq(cs.n, 3);	/* the fixture's, listening, busy */
	close(idle);
	close(listening);
	close(busy);
}
END_TEST

/* Turns the loop until fd has n whole lines to read (5 s at most), and
 * reads them. */
static void drain_lines(int fd, unsigned n)
{
	unsigned lines = 0;
	uint64_t deadline = mono_ms() + 5000;
	while (lines < n && mono_ms() < deadline) {
		turn();
		char chunk[65536];
		ssize_t r = recv(fd, chunk, sizeof(chunk), MSG_DONTWAIT);
		for (ssize_t i = 0; i < r; i++)
			lines += chunk[i] == '\n';
		if (r < 0)
			poll(&(struct pollfd){ .fd = fd, .events = POLLIN }, 1, 10);
	}
	ck_assert_uint_eq(lines, n);
}

START_TEST(large_output_buffers_reused)
{
	static const char big[] = "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"big\"}\n";
	send_text(big);
	drain_lines(client, 1);
	/* Flushed, the large buffer is kept rather than freed. */
	ck_assert_uint_eq(cs.n_spare_outs, 1);
	int other = open_conn();
	ck_assert_int_eq(send(other, big, strlen(big), MSG_NOSIGNAL), (ssize_t)strlen(big));
	send_text(big);
	drain_lines(other, 1);
	drain_lines(client, 1);
	/* One of the two answers took the kept buffer: two kept now, not
	 * three. */
	ck_assert_uint_eq(cs.n_spare_outs, 2);
	/* None is kept once nobody is connected. */
	close(other);
	close(client);
	client = -1;
	uint64_t deadline = mono_ms() + 5000;
	while (cs.n > 0 && mono_ms() < deadline) {
		turn();
		poll(NULL, 0, 10);
	}
	ck_assert_uint_eq(cs.n, 0);
	ck_assert_uint_eq(cs.n_spare_outs, 0);
}
END_TEST

static Suite *conn_suite(void)
{
	Suite *s = suite_create("conn");
	TCase *tc = tcase_create("framing");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, lines_split_and_joined);
	tcase_add_test(tc, line_too_long_then_next);
	tcase_add_test(tc, last_line_without_newline);
	suite_add_tcase(s, tc);
	tc = tcase_create("bounds");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, bounds_refused_with_id_null);
	tcase_add_test(tc, uid_over_its_memory_loses_its_largest);
	suite_add_tcase(s, tc);
	tc = tcase_create("pipelining");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, batch_waits_for_its_last_member);
	tcase_add_test(tc, large_output_buffers_reused);
	suite_add_tcase(s, tc);
	tc = tcase_create("closed_while_busy");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, close_inside_a_batch);
	tcase_add_test(tc, answer_then_close_inside_a_batch);
	tcase_add_test(tc, reaped_inside_a_request);
	tcase_add_test(tc, client_gone_while_busy);
	suite_add_tcase(s, tc);
	tc = tcase_create("idleness");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, idle_closed_unless_listening);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return run_suite(conn_suite());
}
