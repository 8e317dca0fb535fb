/* SPDX-License-Identifier: MIT */
/*
 * Load and fault tests against the real daemon (tests/integ/harness.h),
 * on a private socket: many clients at once with every answer accounted
 * for, slow readers and slowloris writers next to a fast client, clients
 * that vanish mid-call, SIGTERM under load, and running out of file
 * descriptors on accept. Each test is bounded and stops by itself; the only
 * timing assertions are generous ("answered within 2 s").
 *
 * The many-connection clients here are raw nonblocking sockets driven by
 * one poll loop (struct lconn): the harness's struct tcc is for one
 * conversation at a time.
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "proto/base/buf.h"
#include "proto/json.h"
#include "proto/base/util.h"
#include "tests/integ/harness.h"
#include "tests/unit/check_main.h"

/* --- raw client connections --------------------------------------------- */

struct lconn {
	int fd;
	struct buf in, out;
	bool eof;
	uint64_t sent;		/* requests written into out */
	uint64_t answered;	/* answers received */
	bool bad;		/* an answer duplicated or unknown */
	bool allow_errors;	/* error answers count (errors), instead of failing */
	bool unordered;		/* documents that answers come in any order (always allowed) */
	uint8_t *seen;		/* seen[id]: the id was answered */
	size_t seen_cap;
	uint64_t errors;
	char why[200];
};

/* Raises the soft fd limit to at least want (up to the hard limit);
 * returns false when the hard limit is too low. */
static bool raise_nofile(rlim_t want)
{
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
		return false;
	if (rl.rlim_cur >= want)
		return true;
	if (rl.rlim_max != RLIM_INFINITY && rl.rlim_max < want)
		return false;
	rl.rlim_cur = want;
	return setrlimit(RLIMIT_NOFILE, &rl) == 0;
}

/* Connects to path; returns the fd or a negative errno. */
static int lconnect(const char *path, bool nonblock)
{
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	ck_assert(strlen(path) < sizeof(sa.sun_path));
	memcpy(sa.sun_path, path, strlen(path) + 1);
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		int e = errno;
		close(fd);
		return -e;
	}
	if (nonblock)
		fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
	return fd;
}

static void lconn_open(struct lconn *c, const char *path)
{
	memset(c, 0, sizeof(*c));
	c->fd = lconnect(path, true);
	ck_assert_msg(c->fd >= 0, "connect %s: %s", path, strerror(-c->fd));
}

static void lconn_close(struct lconn *c)
{
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
	buf_free(&c->in);
	buf_free(&c->out);
	free(c->seen);
	c->seen = NULL;
	c->seen_cap = 0;
}

/* Writes what is queued without blocking; false when the peer is gone. */
static bool lconn_flush(struct lconn *c)
{
	while (buf_size(&c->out)) {
		ssize_t n = send(c->fd, buf_head(&c->out), buf_size(&c->out), MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return errno == EAGAIN;
		}
		buf_consume(&c->out, (size_t)n);
	}
	return true;
}

/* Reads what is available without blocking. */
static void lconn_read(struct lconn *c)
{
	for (;;) {
		buf_reserve(&c->in, 65536);
		ssize_t n = recv(c->fd, c->in.data + c->in.len, c->in.cap - c->in.len, MSG_DONTWAIT);
		if (n > 0) {
			c->in.len += (size_t)n;
			continue;
		}
		if (n == 0 || (errno != EAGAIN && errno != EINTR))
			c->eof = true;
		return;
	}
}

static void lconn_fail(struct lconn *c, const char *fmt, ...) PRINTF(2, 3);
static void lconn_fail(struct lconn *c, const char *fmt, ...)
{
	if (c->bad)
		return;
	c->bad = true;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(c->why, sizeof(c->why), fmt, ap);
	va_end(ap);
}

/*
 * Takes the complete answer lines of c. Requests carry ids 0, 1, 2, ...;
 * answers come in the order calls end (file tools work off the loop, so a
 * ping may overtake a read_file): each answer must carry an id sent and not
 * answered yet (so none is lost, duplicated or invented) and be a result.
 */
static void lconn_take_answers(struct lconn *c)
{
	for (;;) {
		const char *head = buf_head(&c->in);
		const char *nl = memchr(head, '\n', buf_size(&c->in));
		if (!nl)
			return;
		size_t len = (size_t)(nl - head);
		struct json_doc *doc = NULL;
		if (json_parse(head, len, 0, 0, &doc, NULL) < 0) {
			lconn_fail(c, "an answer is not JSON: %.100s", head);
		} else {
			const struct json *root = json_doc_root(doc);
			const struct json *id = json_get(root, "id");
			int64_t n = -1;
			if (!id && json_get(root, "method")) {
				/* A notification: not an answer. */
			} else if (!json_get_int(id, &n) || n < 0 || (uint64_t)n >= c->sent ||
				   ((size_t)n < c->seen_cap && c->seen[n])) {
				lconn_fail(c, "answer %.60s: an id not sent, or answered twice", head);
			} else if (!json_get(root, "result") && !c->allow_errors) {
				lconn_fail(c, "an error answer: %.160s", head);
			} else {
				if (!json_get(root, "result"))
					c->errors++;
				if ((size_t)n >= c->seen_cap) {
					size_t cap = MAX((size_t)n + 1, 2 * c->seen_cap);
					c->seen = xrealloc(c->seen, cap);
					memset(c->seen + c->seen_cap, 0, cap - c->seen_cap);
					c->seen_cap = cap;
				}
				c->seen[n] = 1;
				c->answered++;
			}
			json_doc_unref(doc);
		}
		buf_consume(&c->in, len + 1);
	}
}

/* Writes what is pending and waits up to ms for answers; takes them. */
static void lconn_pump(struct lconn *c, int ms)
{
	if (!lconn_flush(c))
		c->eof = true;
	struct pollfd p = { c->fd, POLLIN | (buf_size(&c->out) ? POLLOUT : 0), 0 };
	poll(&p, 1, ms);
	lconn_read(c);
	lconn_take_answers(c);
}

/* Queues request number c->sent: a ping, or a read_file every third. */
static void lconn_queue(struct lconn *c)
{
	if (c->sent % 3 == 2)
		buf_printf(&c->out, "{\"jsonrpc\":\"2.0\",\"id\":%" PRIu64 ",\"method\":\"tools/call\",\"params\":"
			   "{\"name\":\"read_file\",\"arguments\":{\"path\":\"small.txt\"}}}\n", c->sent);
	else
		buf_printf(&c->out, "{\"jsonrpc\":\"2.0\",\"id\":%" PRIu64 ",\"method\":\"ping\"}\n", c->sent);
	c->sent++;
}

/* A request on a fresh tcc with a deadline, answered or failing the test. */
static const struct json *stats(struct tcc *ctl)
{
	const struct json *r = tcc_request_t(ctl, "admin/stats", NULL, 5000);
	ck_assert_ptr_nonnull(r);
	tc_assert_ok(r);
	return tj(r, "result");
}

/* Waits until admin/stats says cond (checked by the callback) or ms pass. */
static bool wait_stats(struct tcd *d, bool (*cond)(const struct json *st, void *arg), void *arg, int ms)
{
	uint64_t deadline = tc_now_ms() + (uint64_t)ms;
	for (;;) {
		struct tcc *ctl = tcc_connect(d);
		bool ok = cond(stats(ctl), arg);
		tcc_close(ctl);
		if (ok)
			return true;
		if (tc_now_ms() >= deadline)
			return false;
		tc_pause_ms(20);	/* the interval of this poll */
	}
}

/* Sends a ping on a fresh connection and returns how long the answer took
 * (ms), failing the test when none comes within timeout_ms. */
static uint64_t ping_ms(struct tcd *d, int timeout_ms)
{
	struct tcc *c = tcc_connect(d);
	uint64_t t = tc_now_ms();
	const struct json *r = tcc_request_t(c, "ping", NULL, timeout_ms);
	uint64_t dt = tc_now_ms() - t;
	ck_assert_msg(r != NULL, "no answer to ping within %d ms", timeout_ms);
	tc_assert_ok(r);
	tcc_close(c);
	return dt;
}

/* File calls hold a place in the queues while their work runs on the io
 * threads: 1000 clients with 10 file calls each in flight fit. */
static const char auto_config[] =
	"{\"confirmation\":{\"default\":{\"write\":\"auto\",\"execute\":\"auto\"}},"
	" \"limits\":{\"max_connections\":5000,\"queue_max_total\":100000}}";

/* --- 1000 clients × 100 calls ------------------------------------------- */

#define MANY_CLIENTS 1000
#define MANY_CALLS 100
#define MANY_DEPTH 10

START_TEST(many_clients_lose_nothing)
{
	if (!raise_nofile(MANY_CLIENTS + 256))
		TC_SKIP("many_clients_lose_nothing: RLIMIT_NOFILE hard limit below %d", MANY_CLIENTS + 256);
	struct tcd d;
	tcd_start(&d, auto_config);
	tcd_put(&d, "small.txt", "hello\n");

	struct lconn *cs = xcalloc(MANY_CLIENTS, sizeof(*cs));
	for (int i = 0; i < MANY_CLIENTS; i++)
		lconn_open(&cs[i], d.sock);
	struct pollfd *pfds = xcalloc(MANY_CLIENTS, sizeof(*pfds));

	/* Every client keeps MANY_DEPTH requests in flight until it has sent
	 * MANY_CALLS, then waits for the rest of its answers. */
	uint64_t deadline = tc_now_ms() + 60000;
	uint64_t done = 0;
	while (done < MANY_CLIENTS && tc_now_ms() < deadline) {
		for (int i = 0; i < MANY_CLIENTS; i++) {
			struct lconn *c = &cs[i];
			while (c->sent < MANY_CALLS && c->sent - c->answered < MANY_DEPTH)
				lconn_queue(c);
			ck_assert_msg(lconn_flush(c), "client %d: the daemon closed the connection", i);
			pfds[i] = (struct pollfd){ c->fd, POLLIN | (buf_size(&c->out) ? POLLOUT : 0), 0 };
		}
		int n = poll(pfds, MANY_CLIENTS, 1000);
		ck_assert_int_ge(n, 0);
		done = 0;
		for (int i = 0; i < MANY_CLIENTS; i++) {
			struct lconn *c = &cs[i];
			if (pfds[i].revents & (POLLIN | POLLHUP | POLLERR)) {
				lconn_read(c);
				lconn_take_answers(c);
			}
			ck_assert_msg(!c->bad, "client %d: %s", i, c->why);
			ck_assert_msg(!c->eof || c->answered == MANY_CALLS, "client %d: EOF after %" PRIu64 " answers",
				      i, c->answered);
			if (c->answered == MANY_CALLS)
				done++;
		}
	}
	ck_assert_msg(done == MANY_CLIENTS, "only %" PRIu64 " of %d clients got all their answers in 60 s", done,
		      MANY_CLIENTS);

	/* Nothing arrives after the last answer: no duplicates were queued. */
	tc_pause_ms(100);	/* a window in which nothing more must come */
	for (int i = 0; i < MANY_CLIENTS; i++) {
		lconn_read(&cs[i]);
		ck_assert_msg(buf_size(&cs[i].in) == 0, "client %d got more than its answers: %.100s", i,
			      buf_head(&cs[i].in));
		lconn_close(&cs[i]);
	}
	free(cs);
	free(pfds);

	struct tcc *ctl = tcc_connect(&d);
	const struct json *st = stats(ctl);
	ck_assert_int_ge(tj_int(st, "connections.total"), MANY_CLIENTS);
	ck_assert_int_eq(tj_int(st, "tools.read_file.calls"), (int64_t)MANY_CLIENTS * (MANY_CALLS / 3));
	tcc_close(ctl);
	ck_assert_int_eq(tcd_stop(&d), 0);
	tcd_free(&d);
}
END_TEST

/* --- slow readers and slowloris writers ----------------------------------- */

#define SLOW_READERS 4
#define SLOW_READER_CALLS 64
#define SLOWLORIS 40

START_TEST(slow_clients_do_not_delay_others)
{
	struct tcd d;
	/* A small output limit, so the slow readers hit backpressure soon. */
	tcd_start(&d, "{\"limits\":{\"max_output_bytes\":262144}}");
	size_t big_len = 128 * 1024;
	char *big = xmalloc(big_len);
	for (size_t i = 0; i < big_len; i++)
		big[i] = (char)('a' + i % 26);
	free(tcd_write_ws(&d, "big.txt", big, big_len, 0));
	free(big);

	/* Slow readers: many large answers requested, none read. */
	struct lconn readers[SLOW_READERS];
	for (int i = 0; i < SLOW_READERS; i++) {
		lconn_open(&readers[i], d.sock);
		int small = 4096;
		setsockopt(readers[i].fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small));
		for (int k = 0; k < SLOW_READER_CALLS; k++)
			buf_printf(&readers[i].out, "{\"jsonrpc\":\"2.0\",\"id\":%d,\"method\":\"tools/call\",\"params\":"
				   "{\"name\":\"read_file\",\"arguments\":{\"path\":\"big.txt\"}}}\n", k);
		readers[i].sent = SLOW_READER_CALLS;
		ck_assert(lconn_flush(&readers[i]));
	}
	/* Slowloris writers: a request that never ends, one byte at a time. */
	static const char partial[] = "{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"ping\"";
	struct lconn loris[SLOWLORIS];
	for (int i = 0; i < SLOWLORIS; i++) {
		lconn_open(&loris[i], d.sock);
		loris[i].sent = 1;	/* id 0, written by hand */
		ck_assert_int_eq(send(loris[i].fd, partial, 5, MSG_NOSIGNAL), 5);
	}

	/* A fast client meanwhile: every ping answered within 2 s (they take
	 * well under a millisecond when nothing is wrong). */
	uint64_t worst = 0;
	size_t pos = 5;
	for (int k = 0; k < 40; k++) {
		uint64_t ms = ping_ms(&d, 2000);
		worst = MAX(worst, ms);
		/* The slowloris trickle goes on. */
		for (int i = 0; i < SLOWLORIS && pos < sizeof(partial) - 1; i++)
			ck_assert_int_eq(send(loris[i].fd, partial + pos, 1, MSG_NOSIGNAL), 1);
		pos = MIN(pos + 1, sizeof(partial) - 1);
		tc_pause_ms(25);	/* the trickle's pace: load, not synchronisation */
	}
	ck_assert_msg(worst < 2000, "a ping took %" PRIu64 " ms", worst);
	struct tcc *fast = tcc_connect(&d);
	const struct json *r = tcc_call(fast, "read_file", "{\"path\":\"big.txt\",\"limit\":10}");
	tc_assert_ok(r);
	tcc_close(fast);

	/* The slow readers lost nothing: reading now, every answer comes,
	 * promptly (a resumed reader must not wait for a timer to fire). */
	uint64_t deadline = tc_now_ms() + 15000;
	for (int i = 0; i < SLOW_READERS; i++) {
		struct lconn *c = &readers[i];
		/* Requests the daemon did not read while this reader was
		 * paused are still in our buffer: the pump sends them. */
		while (c->answered < SLOW_READER_CALLS && !c->eof && !c->bad && tc_now_ms() < deadline)
			lconn_pump(c, 1000);
		ck_assert_msg(!c->bad, "slow reader %d: %s", i, c->why);
		ck_assert_msg(c->answered == SLOW_READER_CALLS, "slow reader %d: %" PRIu64 " of %d answers", i,
			      c->answered, SLOW_READER_CALLS);
		lconn_close(c);
	}
	/* And the slowloris requests, once finished, are answered too. */
	for (int i = 0; i < SLOWLORIS; i++) {
		struct lconn *c = &loris[i];
		ck_assert_int_eq(send(c->fd, partial + pos, sizeof(partial) - 1 - pos, MSG_NOSIGNAL),
				 (ssize_t)(sizeof(partial) - 1 - pos));
		ck_assert_int_eq(send(c->fd, "}\n", 2, MSG_NOSIGNAL), 2);
	}
	deadline = tc_now_ms() + 10000;
	for (int i = 0; i < SLOWLORIS; i++) {
		struct lconn *c = &loris[i];
		while (c->answered < 1 && !c->eof && !c->bad && tc_now_ms() < deadline)
			lconn_pump(c, 500);
		ck_assert_msg(c->answered == 1 && !c->bad, "slowloris %d: %s", i, c->bad ? c->why : "no answer");
		lconn_close(c);
	}
	ck_assert_int_eq(tcd_stop(&d), 0);
	tcd_free(&d);
}
END_TEST

/* --- clients vanishing mid-call -------------------------------------------- */

static bool idle_again(const struct json *st, void *arg)
{
	(void)arg;
	return tj_int(st, "inFlight") == 0 && tj_int(st, "connections.open") == 1;
}

#define VANISHERS 200

START_TEST(vanishing_clients)
{
	struct tcd d;
	tcd_start(&d, auto_config);
	tcd_put(&d, "small.txt", "hello\n");

	for (int i = 0; i < VANISHERS; i++) {
		int fd = lconnect(d.sock, false);
		ck_assert_int_ge(fd, 0);
		struct buf b = {0};
		switch (i % 4) {
		case 0:
			/* A shell call that would leave a trace if it were not
			 * cancelled when its caller goes. */
			buf_printf(&b, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":"
				   "\"shell\",\"arguments\":{\"command\":\"sleep 2; touch gone-%d\"}}}\n", i);
			break;
		case 1:
			/* Pipelined calls whose answers nobody reads. */
			for (int k = 0; k < 50; k++)
				buf_printf(&b, "{\"jsonrpc\":\"2.0\",\"id\":%d,\"method\":\"tools/call\",\"params\":"
					   "{\"name\":\"read_file\",\"arguments\":{\"path\":\"small.txt\"}}}\n", k);
			break;
		case 2:
			/* Half a line. */
			buf_puts(&b, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/ca");
			break;
		case 3:
			/* A batch, then a reset instead of an orderly close. */
			buf_puts(&b, "[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"},{\"jsonrpc\":\"2.0\",\"id\":2,"
				     "\"method\":\"tools/call\",\"params\":{\"name\":\"shell\",\"arguments\":"
				     "{\"command\":\"sleep 2\"}}}]\n");
			struct linger lg = { .l_onoff = 1, .l_linger = 0 };
			setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
			break;
		}
		ck_assert_int_eq(send(fd, buf_head(&b), buf_size(&b), MSG_NOSIGNAL), (ssize_t)buf_size(&b));
		buf_free(&b);
		if (i % 8 == 0)
			tc_pause_ms(2);	/* some are gone before, some after the daemon reads them */
		close(fd);
	}

	/* The daemon serves on, and lets go of every call of the departed. */
	/* Survival is the point here, not latency: the daemon first works
	 * through what the departed sent (slowly under the sanitizers). */
	ping_ms(&d, 10000);
	ck_assert_msg(wait_stats(&d, idle_again, NULL, 10000),
		      "calls or connections of vanished clients still held after 10 s");
	/* The unkeyed shell calls were cancelled: none ran to its end (they
	 * would have after 2 s). */
	tc_pause_ms(3000);	/* a window: a shell not cancelled would end in it */
	for (int i = 0; i < VANISHERS; i += 4) {
		char name[32];
		snprintf(name, sizeof(name), "gone-%d", i);
		char *p = tcd_ws_path(&d, name);
		struct stat st;
		ck_assert_msg(stat(p, &st) < 0, "%s exists: a vanished client's shell call ran on", name);
		free(p);
	}
	ck_assert_int_eq(tcd_stop(&d), 0);
	tcd_free(&d);
}
END_TEST

/* --- SIGTERM under load ----------------------------------------------------- */

static bool n_inflight(const struct json *st, void *arg)
{
	return tj_int(st, "inFlight") >= *(int64_t *)arg;
}

#define TERM_HAMMERS 8
#define TERM_SLOW 8

START_TEST(sigterm_under_load_answers_accepted_calls)
{
	struct tcd d;
	tcd_start(&d, "{\"grace_ms\":8000,\"confirmation\":{\"default\":{\"execute\":\"auto\"}}}");
	tcd_put(&d, "small.txt", "hello\n");

	/* Calls accepted before the signal: running or queued (the session
	 * runs 4 at a time), admin/stats counts them all in flight. */
	struct lconn slow;
	lconn_open(&slow, d.sock);
	slow.unordered = true;	/* shell calls end in any order */
	for (int k = 0; k < TERM_SLOW; k++)
		buf_printf(&slow.out, "{\"jsonrpc\":\"2.0\",\"id\":%d,\"method\":\"tools/call\",\"params\":{\"name\":"
			   "\"shell\",\"arguments\":{\"command\":\"sleep 0.5; echo done\"}}}\n", k);
	slow.sent = TERM_SLOW;
	ck_assert(lconn_flush(&slow));
	int64_t want = TERM_SLOW;
	ck_assert_msg(wait_stats(&d, n_inflight, &want, 5000), "the slow calls were not all accepted");

	/* Hammering clients: pings and reads in flight all the time. */
	struct lconn ham[TERM_HAMMERS];
	for (int i = 0; i < TERM_HAMMERS; i++) {
		lconn_open(&ham[i], d.sock);
		/* A tool call read after SIGTERM may be refused: that is an
		 * answer too. */
		ham[i].allow_errors = true;
	}
	uint64_t start = tc_now_ms(), deadline = start + 20000;
	bool signalled = false;
	for (;;) {
		struct pollfd p[TERM_HAMMERS + 1];
		bool open = false;
		for (int i = 0; i < TERM_HAMMERS; i++) {
			struct lconn *c = &ham[i];
			if (!signalled)
				while (c->sent - c->answered < 16)
					lconn_queue(c);
			if (!c->eof && !lconn_flush(c))
				c->eof = true;	/* gone after the signal: fine */
			p[i] = (struct pollfd){ c->eof ? -1 : c->fd, POLLIN, 0 };
			open |= !c->eof;
		}
		p[TERM_HAMMERS] = (struct pollfd){ slow.eof ? -1 : slow.fd, POLLIN, 0 };
		open |= !slow.eof;
		if (!open || tc_now_ms() > deadline)
			break;
		if (!signalled && tc_now_ms() - start > 200) {
			tcd_kill(&d, SIGTERM);
			signalled = true;
		}
		poll(p, TERM_HAMMERS + 1, 200);
		for (int i = 0; i <= TERM_HAMMERS; i++) {
			struct lconn *c = i < TERM_HAMMERS ? &ham[i] : &slow;
			if (p[i].revents) {
				lconn_read(c);
				lconn_take_answers(c);
			}
		}
	}
	ck_assert_msg(signalled, "SIGTERM was never sent");
	/* Every call accepted before SIGTERM was answered, with its result. */
	ck_assert_msg(!slow.bad, "slow calls: %s", slow.why);
	ck_assert_int_eq(slow.answered, TERM_SLOW);
	/* The hammers got their answers in order, none lost before the last,
	 * none twice (lconn_take_answers checks), and some at all. */
	for (int i = 0; i < TERM_HAMMERS; i++) {
		ck_assert_msg(!ham[i].bad, "hammer %d: %s", i, ham[i].why);
		ck_assert_uint_gt(ham[i].answered, 0);
		lconn_close(&ham[i]);
	}
	lconn_close(&slow);
	ck_assert_int_eq(tcd_wait_exit(&d, 10000), 0);
	struct stat st;
	ck_assert_msg(stat(d.sock, &st) < 0, "the socket file is left behind");
	tcd_free(&d);
}
END_TEST

START_TEST(sigterm_ends_calls_beyond_grace_cancelled)
{
	struct tcd d;
	tcd_start(&d, "{\"grace_ms\":300,\"confirmation\":{\"default\":{\"execute\":\"auto\"}}}");
	struct tcc *c = tcc_connect(&d);
	int64_t id = tcc_send_request(c, "tools/call", "{\"name\":\"shell\",\"arguments\":{\"command\":\"sleep 30\"}}");
	int64_t one = 1;
	ck_assert(wait_stats(&d, n_inflight, &one, 5000));
	uint64_t t = tc_now_ms();
	tcd_kill(&d, SIGTERM);
	char raw[32];
	snprintf(raw, sizeof(raw), "%" PRId64, id);
	const struct json *r = tcc_wait_id(c, raw, 10000);
	ck_assert_msg(r != NULL, "the call in flight at SIGTERM got no answer");
	/* Cancelled by the daemon's stop, not by its client: data.restart
	 * says so (worth sending again to the next daemon). */
	tc_assert_kind(r, "cancelled");
	ck_assert(tj_bool(r, "error.data.restart"));
	ck_assert_int_eq(tcd_wait_exit(&d, 10000), 0);
	ck_assert_uint_lt(tc_now_ms() - t, 8000);
	tcc_close(c);
	tcd_free(&d);
}
END_TEST

/* --- EMFILE on accept --------------------------------------------------------- */

#define FD_LIMIT 64
#define STR(x) STR_(x)
#define STR_(x) #x
#define EXCESS 150

START_TEST(emfile_on_accept_survived)
{
	struct tcd d;
	static const char *const wrapper[] = { "sh", "-c", "ulimit -n " STR(FD_LIMIT) " && exec \"$@\"", "sh", NULL };
	struct tcd_opts o = { .config = "{}", .wrapper = wrapper };
	tcd_start_opts(&d, &o);

	struct tcc *first = tcc_connect(&d);
	tc_assert_ok(tcc_request_t(first, "ping", NULL, 2000));

	/* Far more connections than the daemon has descriptors: the kernel
	 * queues them, the daemon runs out on accept. */
	int *ex = xcalloc(EXCESS, sizeof(int));
	for (int i = 0; i < EXCESS; i++) {
		ex[i] = lconnect(d.sock, true);
		ck_assert_msg(ex[i] >= 0, "connect %d: %s", i, strerror(-ex[i]));
		static const char ping[] = "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\n";
		/* The daemon may already have refused (accepted and closed) this
		 * one: a broken pipe is that refusal, not a failure. */
		ssize_t w = send(ex[i], ping, sizeof(ping) - 1, MSG_NOSIGNAL);
		ck_assert_msg(w == (ssize_t)sizeof(ping) - 1 || (w < 0 && (errno == EPIPE || errno == ECONNRESET)),
			      "send %d: %s", i, strerror(errno));
	}
	/* The established connection is still served, promptly, while the
	 * daemon is out of descriptors. */
	ck_assert(tc_wait_until(tj_int(tcc_request_t(first, "admin/stats", NULL, 2000), "result.connections.refused") > 0, 5000));
	for (int k = 0; k < 5; k++) {
		uint64_t t = tc_now_ms();
		const struct json *r = tcc_request_t(first, "ping", NULL, 2000);
		ck_assert_msg(r != NULL, "no answer on an established connection while out of fds");
		tc_assert_ok(r);
		ck_assert_uint_lt(tc_now_ms() - t, 2000);
	}
	const struct json *st = tj(tcc_request_t(first, "admin/stats", NULL, 2000), "result");
	ck_assert_msg(tj_int(st, "connections.refused") > 0, "no connection was refused with %d fds",
		      FD_LIMIT);
	ck_assert_int_lt(tj_int(st, "connections.open"), FD_LIMIT);
	/* Each excess connection either was served or was closed: none hangs
	 * forever without the daemon spinning (it answered us above). */
	for (int i = 0; i < EXCESS; i++)
		close(ex[i]);
	free(ex);

	/* With descriptors back, new connections are served again. */
	uint64_t deadline = tc_now_ms() + 5000;
	bool served = false;
	while (!served && tc_now_ms() < deadline) {
		int fd = lconnect(d.sock, false);
		if (fd >= 0) {
			struct timeval tv = { .tv_sec = 1 };
			setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
			static const char ping[] = "{\"jsonrpc\":\"2.0\",\"id\":\"again\",\"method\":\"ping\"}\n";
			char buf[256];
			if (send(fd, ping, sizeof(ping) - 1, MSG_NOSIGNAL) == (ssize_t)sizeof(ping) - 1) {
				ssize_t n = recv(fd, buf, sizeof(buf) - 1, 0);
				served = n > 0 && memmem(buf, (size_t)n, "\"again\"", 7);
			}
			close(fd);
		}
		if (!served)
			tc_pause_ms(100);	/* the interval of this retry */
	}
	ck_assert_msg(served, "no new connection served within 5 s after the excess closed");
	tc_assert_ok(tcc_request_t(first, "ping", NULL, 2000));
	tcc_close(first);
	ck_assert_int_eq(tcd_stop(&d), 0);
	tcd_free(&d);
}
END_TEST

/* --- a burst of file calls shares the loop --------------------------------- */

#define BURST_CALLS 500

/*
 * A client that sends a burst of file calls in one write does not have
 * them all run before another client's call: the second client's call
 * starts while the burst is still going, and nothing of the burst is lost
 * or answered twice. File calls hold a slot while their work runs on the
 * io threads, so the burst waits in the session's queue: room for all.
 */
START_TEST(burst_of_file_calls_shares_the_loop)
{
	struct tcd d;
	tcd_start(&d, "{\"confirmation\":{\"default\":{\"write\":\"auto\",\"execute\":\"auto\"}},"
		      " \"limits\":{\"max_connections\":5000,\"queue_max\":1024}}");
	char *text = xmalloc(8192);
	for (size_t i = 0; i < 8192; i++)
		text[i] = i % 64 == 63 ? '\n' : (char)('a' + i % 26);
	free(tcd_write_ws(&d, "8k.txt", text, 8192, 0));
	free(text);

	struct tcc *a = tcc_connect(&d), *b = tcc_connect(&d);
	struct buf burst = {0};
	for (int i = 1; i <= BURST_CALLS; i++)
		buf_printf(&burst, "{\"jsonrpc\":\"2.0\",\"id\":%d,\"method\":\"tools/call\",\"params\":"
			   "{\"name\":\"read_file\",\"arguments\":{\"path\":\"8k.txt\"}}}\n", i);
	ck_assert_int_eq(tcc_send_raw(a, buf_head(&burst), buf_size(&burst)), 0);
	buf_free(&burst);

	/* The burst has started (its first answer is out): the other client
	 * sends one call, whose answer must come before the burst's last. */
	bool seen[BURST_CALLS + 1] = { false };
	int b_after = -1;	/* how many of the burst's answers came before b's */
	for (int i = 0; i < BURST_CALLS; i++) {
		if (i == 1)
			tcc_send(b, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":"
				    "{\"name\":\"read_file\",\"arguments\":{\"path\":\"8k.txt\"}}}");
		struct json_doc *bd;
		if (i >= 1 && b_after < 0 && (bd = tcc_recv(b, 0))) {
			tc_assert_ok(json_doc_root(bd));
			json_doc_unref(bd);
			b_after = i;
		}
		struct json_doc *ad = tcc_recv(a, 30000);
		ck_assert_msg(ad != NULL, "the burst got %d of %d answers", i, BURST_CALLS);
		const struct json *r = json_doc_root(ad);
		tc_assert_ok(r);
		int64_t id = tj_int(r, "id");
		ck_assert(id >= 1 && id <= BURST_CALLS && !seen[id]);
		seen[id] = true;
		json_doc_unref(ad);
	}
	if (b_after < 0) {
		struct json_doc *bd = tcc_recv(b, 30000);
		ck_assert_ptr_nonnull(bd);
		tc_assert_ok(json_doc_root(bd));
		json_doc_unref(bd);
	}
	ck_assert_msg(tcc_quiet(a, 100), "the burst got more than its answers");
	ck_assert_msg(b_after >= 0 && b_after < BURST_CALLS,
		      "the other client's call was answered after the whole burst");
	tcc_close(a);
	tcc_close(b);
	ck_assert_int_eq(tcd_stop(&d), 0);
	tcd_free(&d);
}
END_TEST

static Suite *load_suite(void)
{
	Suite *s = suite_create("load");
	/* One case per test, so CK_RUN_CASE=name runs one alone. */
	const struct {
		const char *name;
		const TTest *test;
	} tests[] = {
		{ "many_clients", many_clients_lose_nothing },
		{ "slow_clients", slow_clients_do_not_delay_others },
		{ "vanishing", vanishing_clients },
		{ "sigterm", sigterm_under_load_answers_accepted_calls },
		{ "sigterm_grace", sigterm_ends_calls_beyond_grace_cancelled },
		{ "emfile", emfile_on_accept_survived },
		{ "burst", burst_of_file_calls_shares_the_loop },
	};
	for (size_t i = 0; i < ELEMENTSOF(tests); i++) {
		TCase *tc = tcase_create(tests[i].name);
		tcase_set_timeout(tc, 120);
		tcase_add_test(tc, tests[i].test);
		suite_add_tcase(s, tc);
	}
	return s;
}

int main(void)
{
	signal(SIGPIPE, SIG_IGN);
	return run_suite(load_suite());
}
