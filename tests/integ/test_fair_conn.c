/* SPDX-License-Identifier: MIT */
/*
 * Sharing one daemon fairly, from the connection side: the bounds per
 * peer uid (connections, memory held) refuse or disconnect within the uid
 * that went over them and leave another uid (root here, against user
 * nobody) unaffected; a batch holds memory for what is answered, not for
 * what was asked; a call queues behind connections waiting for their
 * turn; the idle timeout spares subscribers and calls in flight;
 * an idle daemon sleeps. Cases with a second uid need root and skip
 * otherwise.
 */
#include <check.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/integ/harness.h"
#include "tests/unit/check_main.h"

/* User nobody, or NULL (the case is skipped, saying why). */
static struct passwd *nobody(void)
{
	if (geteuid() != 0) {
		tc_skip_note("needs root to connect as user nobody");
		return NULL;
	}
	struct passwd *pw = getpwnam("nobody");
	if (!pw)
		tc_skip_note("no user nobody");
	return pw;
}

/* Starts a daemon that user nobody may reach too. */
static void start_shared(struct tcd *d, const struct passwd *pw, const char *limits)
{
	char *cfg = xasprintf("{\"socket_mode\":\"0666\",\"peers\":{\"allow_uids\":[0,%u]},\"limits\":{%s}}",
			      (unsigned)pw->pw_uid, limits);
	tcd_start(d, cfg);
	free(cfg);
	/* The temp dir is 0700; nobody needs to reach the socket in it. */
	ck_assert(chmod(d->dir, 0711) == 0);
}

/* A value (in KiB) of the daemon's /proc/PID/status line key, or -1. */
static long proc_status_kb(const struct tcd *d, const char *key)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/status", (int)d->pid);
	char *s = tcd_read(d, path, NULL);
	if (!s)
		return -1;
	char *p = strstr(s, key);
	long v = p ? strtol(p + strlen(key), NULL, 10) : -1;
	free(s);
	return v;
}

/* Asserts that c is answered on ping. */
static void assert_served(struct tcc *c)
{
	tc_assert_ok(tcc_request(c, "ping", NULL));
}

/* --- connections per uid ------------------------------------------------ */

/* One uid's connections are bounded; beyond, its new connection is told
 * why and closed, while its open ones and another uid's new ones go on. */
START_TEST(per_uid_connections)
{
	struct passwd *pw = nobody();
	if (!pw)
		return;
	struct tcd d;
	start_shared(&d, pw, "\"per_uid_connections\":8");
	struct tcc *n[8];
	for (int i = 0; i < 8; i++) {
		n[i] = tcc_connect_as(&d, pw->pw_uid, pw->pw_gid);
		assert_served(n[i]);
	}
	struct tcc *over = tcc_connect_as(&d, pw->pw_uid, pw->pw_gid);
	const char *line = tcc_recv_line(over, 5000, NULL);
	ck_assert_ptr_nonnull(line);
	ck_assert_msg(strstr(line, "limits.per_uid_connections") && strstr(line, "\"id\":null"), "%s", line);
	ck_assert_ptr_null(tcc_recv_line(over, 5000, NULL));
	ck_assert(tcc_eof(over));
	tcc_close(over);

	/* Root's connections are its own to count: it has all of its 8. */
	struct tcc *r[8];
	for (int i = 0; i < 8; i++) {
		r[i] = tcc_connect(&d);
		assert_served(r[i]);
	}
	for (int i = 0; i < 8; i++)
		assert_served(n[i]);
	/* One of nobody's goes: room for one more. */
	tcc_close(n[0]);
	ck_assert(tc_wait_until(({
		const struct json *st = tcc_request(r[0], "admin/stats", NULL);
		tj_int(st, "result.connections.open") == 15;
	}), 5000));
	n[0] = tcc_connect_as(&d, pw->pw_uid, pw->pw_gid);
	assert_served(n[0]);
	const struct json *st = tcc_request(r[0], "admin/stats", NULL);
	ck_assert_int_eq(tj_int(st, "result.connections.refused"), 1);
	for (int i = 0; i < 8; i++)
		tcc_close(n[i]);
	for (int i = 0; i < 8; i++)
		tcc_close(r[i]);
	tcd_finish(&d);
}
END_TEST

/* --- memory per uid ----------------------------------------------------- */

/* Sends the start of a ping request padded to len bytes, without its end. */
static void send_partial(struct tcc *c, size_t len)
{
	static const char head[] = "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\",\"params\":{\"pad\":\"";
	char *partial = xmalloc(len);
	memcpy(partial, head, strlen(head));
	memset(partial + strlen(head), 'x', len - strlen(head));
	ck_assert_int_eq(tcc_send_raw(c, partial, len), 0);
	free(partial);
}

/* Finishes the line send_partial began and expects its answer. */
static void finish_partial(struct tcc *c)
{
	ck_assert_int_eq(tcc_send_raw(c, "\"}}\n", 4), 0);
	const struct json *r = tcc_wait_id(c, "1", 5000);
	ck_assert_ptr_nonnull(r);
	tc_assert_ok(r);
}

/* Reads what an evicted connection got: one error naming key, then the
 * end. Returns whether c was evicted. */
static bool evicted(struct tcc *c, const char *key, int wait_ms)
{
	const char *line = tcc_recv_line(c, wait_ms, NULL);
	if (!line)
		return false;
	ck_assert_msg(strstr(line, key) && strstr(line, "\"id\":null"), "%s", line);
	ck_assert_ptr_null(tcc_recv_line(c, 2000, NULL));
	ck_assert(tcc_eof(c));
	return true;
}

/*
 * Fills a shared daemon past a memory limit (limits.NAME = 1 MiB): root's
 * one connection holds the most of all (200 KiB of a message), nobody's
 * twelve hold 100 KiB each. Some of nobody's, never root's, are evicted
 * naming the limit; the rest of both uids' are answered.
 */
static void evicts_within_uid(const char *limit)
{
	struct passwd *pw = nobody();
	if (!pw)
		return;
	struct tcd d;
	/* One connection may hold 2 x 256 KiB of input and 2 x 4 KiB of
	 * output: the bound used is at least twice that, 1 MiB is taken. */
	char *limits = xasprintf("\"max_message_bytes\":262144,\"max_output_bytes\":4096,\"%s\":1048576", limit);
	start_shared(&d, pw, limits);
	free(limits);
	struct tcc *root = tcc_connect(&d);
	send_partial(root, 200 * 1024);
	enum { N = 12 };
	struct tcc *n[N];
	for (int i = 0; i < N; i++) {
		n[i] = tcc_connect_as(&d, pw->pw_uid, pw->pw_gid);
		send_partial(n[i], 100 * 1024);
	}
	ck_assert(tcd_wait_stat(&d, "result.connections.evicted", 4, 5000));
	char *named = xasprintf("limits.%s", limit);
	int gone = 0;
	for (int i = 0; i < N; i++)
		gone += evicted(n[i], named, 300);
	free(named);
	ck_assert_msg(gone >= 4 && gone < N, "%d of %d connections of nobody evicted", gone, N);
	ck_assert(tcc_quiet(root, 200));
	finish_partial(root);
	for (int i = 0; i < N; i++)
		if (!tcc_eof(n[i]))
			finish_partial(n[i]);
	for (int i = 0; i < N; i++)
		tcc_close(n[i]);
	tcc_close(root);
	tcd_finish(&d);
}

/* A uid over limits.per_uid_memory loses its own largest connections,
 * never another uid's, even one larger than each of them. */
START_TEST(per_uid_memory)
{
	evicts_within_uid("per_uid_memory");
}
END_TEST

/* Over limits.max_client_memory, the victim is a connection of the uid
 * holding the most in all, not the largest connection daemon-wide. */
START_TEST(global_memory_evicts_within_heaviest_uid)
{
	evicts_within_uid("max_client_memory");
}
END_TEST

/* --- confirmations held per uid ------------------------------------------ */

/* Sends write_file of a 200 KB content (a prompt by default) without
 * waiting; returns the request's id as text. */
static const char *send_big_write(struct tcc *c, int i)
{
	enum { CONTENT = 200 * 1024 };
	char *content = xmalloc(CONTENT + 1);
	memset(content, 'a' + i % 26, CONTENT);
	content[CONTENT] = '\0';
	int64_t id = tcc_send_request(c, "tools/call",
		tcc_fmt(c, "{\"name\":\"write_file\",\"arguments\":{\"path\":\"big%d.txt\",\"content\":\"%s\"}}",
			i, content));
	free(content);
	return tcc_fmt(c, "%lld", (long long)id);
}

/* Has the approver a answer the next request it is shown with decision,
 * and expects the call c sent as id to end with kind. */
static void answer_next(struct tcc *a, const char *decision, struct tcc *c, const char *id, const char *kind)
{
	const struct json *ev = tcc_wait_event(a, "tool.confirmation_requested", 5000);
	ck_assert_msg(ev, "no confirmation request reached the approver");
	const char *rid = tj_str(ev, "requestId");
	ck_assert_ptr_nonnull(rid);
	tc_assert_ok(tcc_request(a, "confirmations/resolve",
				 tcc_fmt(a, "{\"requestId\":\"%s\",\"decision\":\"%s\"}", rid, decision)));
	const struct json *r = tcc_wait_id(c, id, 5000);
	ck_assert_ptr_nonnull(r);
	tc_assert_kind(r, kind);
}

/* The inputs of calls waiting for confirmation count in their uid's
 * memory: one uid with many large requests open is refused overloaded,
 * naming limits.per_uid_memory, and its own largest connection is
 * disconnected when they take it over the bound, while another uid's
 * request is asked as usual; what they held is given back when they are
 * cancelled. */
START_TEST(per_uid_memory_counts_confirmations)
{
	struct passwd *pw = nobody();
	if (!pw)
		return;
	struct tcd d;
	/* The bound used is about 1 MiB (twice what one connection may
	 * hold): five requests of 200 KB at most. A request waits for an
	 * approver even when none is there yet. */
	char *cfg = xasprintf("{\"socket_mode\":\"0666\",\"peers\":{\"allow_uids\":[0,%u]},"
			      "\"confirmation\":{\"no_approver\":\"wait\"},"
			      "\"limits\":{\"max_message_bytes\":262144,\"max_output_bytes\":4096,"
			      "\"per_uid_memory\":1048576}}", (unsigned)pw->pw_uid);
	tcd_start(&d, cfg);
	free(cfg);
	ck_assert(chmod(d.dir, 0711) == 0);

	enum { N = 10 };
	struct tcc *n = tcc_connect_as(&d, pw->pw_uid, pw->pw_gid);
	for (int i = 0; i < N; i++)
		send_big_write(n, i);
	/* The requests beyond the bound are answered at once. */
	int refused = 0;
	for (const char *line; refused < N && (line = tcc_recv_line(n, refused >= 5 ? 500 : 5000, NULL)); refused++) {
		ck_assert_msg(strstr(line, "overloaded") && strstr(line, "limits.per_uid_memory"), "%s", line);
	}
	ck_assert_msg(refused >= 5 && refused < N, "%d of %d requests of nobody refused", refused, N);

	/* What they hold counts for eviction too: six new connections of
	 * nobody holding 100 KiB of unfinished line each (128 KiB of buffer:
	 * 768 KiB together, within the bound) take the uid over it with the
	 * requests open, and nobody's largest are disconnected, not the one
	 * holding the requests (its buffers are small by now). */
	enum { P = 6 };
	struct tcc *part[P];
	for (int i = 0; i < P; i++) {
		part[i] = tcc_connect_as(&d, pw->pw_uid, pw->pw_gid);
		send_partial(part[i], 100 * 1024);
	}
	ck_assert(tcd_wait_stat(&d, "result.connections.evicted", 1, 5000));
	int gone = 0;
	for (int i = 0; i < P; i++) {
		gone += evicted(part[i], "limits.per_uid_memory", 300);
		tcc_close(part[i]);
	}
	ck_assert_int_ge(gone, 1);
	ck_assert_int_lt(gone, P);

	/* Root is not refused for what nobody holds: its request is asked. */
	struct tcc *ra = tcc_connect(&d);
	tc_assert_ok(tcc_request(ra, "events/subscribe", "{\"types\":[\"tool.confirmation_requested\"]}"));
	struct tcc *root = tcc_connect(&d);
	const char *rid = send_big_write(root, 0);
	answer_next(ra, "deny", root, rid, "user_denied");
	assert_served(n);

	/* Nobody's requests go with its connection (cancelled): what they
	 * held is given back, and a new one is asked. */
	tcc_close(n);
	ck_assert(tc_wait_until(({
		const struct json *st = tcc_request(root, "admin/stats", NULL);
		tj_int(st, "result.connections.open") == 2;
	}), 5000));
	struct tcc *na = tcc_connect_as(&d, pw->pw_uid, pw->pw_gid);
	tc_assert_ok(tcc_request(na, "events/subscribe", "{\"types\":[\"tool.confirmation_requested\"]}"));
	n = tcc_connect_as(&d, pw->pw_uid, pw->pw_gid);
	for (int i = 0; i < 3; i++) {
		const char *id = send_big_write(n, i);
		answer_next(na, "deny", n, id, "user_denied");
	}
	tcc_close(na);
	tcc_close(n);
	tcc_close(ra);
	tcc_close(root);
	tcd_finish(&d);
}
END_TEST

/* --- batches ------------------------------------------------------------ */


/* A batch whose members' answers are all refused (each too large for what
 * a batch may hold) holds only the refusals: 40 members reading 16 MiB
 * each leave the daemon's memory within a small bound, not 40 answers'
 * worth (which was 1.3 GiB). */
START_TEST(batch_holds_what_is_answered)
{
	TC_SKIP_UNDER_VALGRIND("valgrind's allocator keeps what the daemon frees");
	struct tcd d;
	struct tcd_opts o = { .config = "{}" };
	/* Under AddressSanitizer freed memory sits in a quarantine of 256 MB
	 * by default; keep it small so the peak measures what is live. */
	const char *asan = getenv("ASAN_OPTIONS");
	_cleanup_free_ char *asan_env = xasprintf("ASAN_OPTIONS=%s%squarantine_size_mb=16", asan ? asan : "",
						  asan ? ":" : "");
	const char *env[] = { asan_env, NULL };
	o.env = env;
	tcd_start_opts(&d, &o);
	enum { MIB = 1 << 20, N = 40 };
	char *big = xmalloc(16 * MIB);
	memset(big, 'a', 16 * MIB);
	free(tcd_write_ws(&d, "big.txt", big, 16 * MIB, 0));
	free(big);
	long before = proc_status_kb(&d, "VmHWM:");
	ck_assert_int_gt(before, 0);

	struct buf b = {0};
	buf_putc(&b, '[');
	for (int i = 0; i < N; i++)
		buf_printf(&b, "%s{\"jsonrpc\":\"2.0\",\"id\":%d,\"method\":\"tools/call\",\"params\":{\"name\":"
			   "\"read_file\",\"arguments\":{\"path\":\"big.txt\",\"limit\":%d}}}",
			   i ? "," : "", i, 16 * MIB);
	buf_putc(&b, ']');
	struct tcc *c = tcc_connect(&d);
	tcc_send(c, buf_head(&b));
	buf_free(&b);
	struct json_doc *doc = tcc_recv(c, 240000);
	ck_assert_ptr_nonnull(doc);
	const struct json *r = json_doc_root(doc);
	ck_assert_int_eq(tj_len(r, ""), N);
	for (int i = 0; i < N; i++) {
		const struct json *m = tj(r, tcc_fmt(c, "%d", i));
		/* The call ran: not retryable. */
		ck_assert_str_eq(tj_kind(m), "execution_error");
		ck_assert_ptr_nonnull(strstr(tj_str(m, "error.message"), "was dropped"));
	}
	/* A few answers being built at once (session_concurrency) is all the
	 * batch ever needed: each is 32 MiB, built in a buffer of up to 64. */
	long peak = proc_status_kb(&d, "VmHWM:"), now = proc_status_kb(&d, "VmRSS:");
	ck_assert_msg(peak - before < 400 * 1024, "the daemon grew by %ld KiB at its peak", peak - before);
	ck_assert_msg(now - before < 64 * 1024, "the daemon holds %ld KiB more after the batch", now - before);
	assert_served(c);
	tcc_close(c);
	tcd_finish(&d);
}
END_TEST

/* --- the turn budget ---------------------------------------------------- */

/* The daemon's state letter in /proc/PID/stat ('T': stopped), or 0. */
static char proc_state(const struct tcd *d)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)d->pid);
	char *s = tcd_read(d, path, NULL);
	char *paren = s ? strrchr(s, ')') : NULL;
	char st = paren && paren[1] ? paren[2] : 0;
	free(s);
	return st;
}

/* No cutting in line: a tool call arriving while another connection waits
 * in the backlog for its turn queues behind it, and is not made to wait
 * for that connection's whole burst either. With a budget of one call per
 * turn, client A's burst is served one line per turn. The daemon is
 * stopped in the middle of it while C asks for the count of calls handled
 * and then B sends one call (and asks for the count in the same line):
 * both are read at the same turn once the daemon goes on, C's question
 * first. B's call must come after at least one more of A's, and long
 * before A's burst ends. */
START_TEST(turn_budget_no_cutting_in_line)
{
	struct tcd d;
	tcd_start(&d, "{\"limits\":{\"turn_budget_us\":0}}");
	struct tcc *a = tcc_connect(&d), *b = tcc_connect(&d), *c = tcc_connect(&d);
	assert_served(a);
	assert_served(b);
	assert_served(c);
	/* Calls of a tool that does not exist: answered at once, on the loop. */
	enum { K = 2500 };
	struct buf burst = {0};
	for (int i = 0; i < K; i++)
		buf_printf(&burst, "{\"jsonrpc\":\"2.0\",\"id\":%d,\"method\":\"tools/call\","
			   "\"params\":{\"name\":\"nope\"}}\n", i);
	ck_assert_int_eq(tcc_send_raw(a, buf_head(&burst), buf_size(&burst)), 0);
	buf_free(&burst);
	ck_assert_ptr_nonnull(tcc_recv_line(a, 10000, NULL));
	tcd_kill(&d, SIGSTOP);
	ck_assert(tc_wait_until(proc_state(&d) == 'T', 5000));
	int64_t cid = tcc_send_request(c, "admin/stats", NULL);
	tcc_send(b, "[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"nope\"}},"
		    "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"admin/stats\"}]");
	tcd_kill(&d, SIGCONT);
	const struct json *cr = tcc_wait_id(c, tcc_fmt(c, "%lld", (long long)cid), 10000);
	ck_assert_ptr_nonnull(cr);
	int64_t at_c = tj_int(cr, "result.calls");
	ck_assert_int_lt(at_c, K - 100);	/* A's burst was still going */
	struct json_doc *doc = tcc_recv(b, 10000);
	ck_assert_ptr_nonnull(doc);
	/* Calls handled when B's line was: A's, and B's own. */
	int64_t before_b = tj_int(json_doc_root(doc), "1.result.calls") - 1;
	ck_assert_msg(before_b >= at_c + 1, "B's call cut in line: %lld calls before it, %lld when C asked",
		      (long long)before_b, (long long)at_c);
	ck_assert_msg(before_b <= at_c + 4, "B's call waited for %lld of A's calls",
		      (long long)(before_b - at_c));
	tcc_close(a);
	tcc_close(b);
	tcc_close(c);
	tcd_finish(&d);
}
END_TEST

/* --- idleness ----------------------------------------------------------- */

/* limits.idle_timeout_ms closes connections that have nothing going on,
 * but not subscribers (an approver waits silently for confirmations) nor
 * connections with a call in flight. */
START_TEST(idle_timeout_spares_subscribers_and_calls)
{
	struct tcd d;
	tcd_start(&d, "{\"limits\":{\"idle_timeout_ms\":300},"
		      "\"confirmation\":{\"per_tool\":{\"shell\":\"auto\"}}}");
	struct tcc *idle = tcc_connect(&d);
	assert_served(idle);
	struct tcc *sub = tcc_connect(&d);
	tc_assert_ok(tcc_request(sub, "events/subscribe", "{\"types\":[\"registry.*\"]}"));
	struct tcc *busy = tcc_connect(&d);
	int64_t id = tcc_send_request(busy, "tools/call",
				      "{\"name\":\"shell\",\"arguments\":{\"command\":\"sleep 1.5\"}}");
	/* The idle one goes. */
	ck_assert_ptr_null(tcc_recv_line(idle, 5000, NULL));
	ck_assert(tcc_eof(idle));
	/* The call outlives the timeout several times and is answered. */
	const struct json *r = tcc_wait_id(busy, tcc_fmt(busy, "%lld", (long long)id), 10000);
	ck_assert_ptr_nonnull(r);
	tc_assert_ok(r);
	/* The subscriber is still there, long after. */
	ck_assert(tcc_quiet(sub, 400));
	assert_served(sub);
	tcc_close(idle);
	tcc_close(sub);
	tcc_close(busy);
	tcd_finish(&d);
}
END_TEST

/* Context switches of the daemon's main thread so far, or -1. */
static long main_thread_switches(const struct tcd *d)
{
	char path[96];
	snprintf(path, sizeof(path), "/proc/%d/task/%d/status", (int)d->pid, (int)d->pid);
	char *s = tcd_read(d, path, NULL);
	if (!s)
		return -1;
	char *v = strstr(s, "voluntary_ctxt_switches:");
	char *nv = strstr(s, "nonvoluntary_ctxt_switches:");
	long n = -1;
	if (v && nv)
		n = strtol(v + strlen("voluntary_ctxt_switches:"), NULL, 10) +
		    strtol(nv + strlen("nonvoluntary_ctxt_switches:"), NULL, 10);
	free(s);
	return n;
}

/* An idle daemon, even with clients connected and a crowd of them gone,
 * sleeps: no timer wakes it while there is nothing to do. */
START_TEST(idle_daemon_sleeps)
{
	struct tcd d;
	tcd_start(&d, NULL);
	/* A crowd came and went (the trim timer is armed for it, then
	 * disarms); one client stays, idle. */
	struct tcc *crowd[70];
	for (int i = 0; i < 70; i++)
		crowd[i] = tcc_connect(&d);
	struct tcc *c = crowd[0];
	assert_served(c);
	/* All in at once: the trim timer is armed. */
	ck_assert(tcd_wait_stat(&d, "result.connections.open", 70, 5000));
	for (int i = 1; i < 70; i++)
		tcc_close(crowd[i]);
	/*
	 * The trim timer gives the crowd's memory back at its next look (5 s
	 * after it was armed), then stops: counted in connections.trims.
	 * From then on the main thread must fall quiet: a window of 3 s in
	 * which it never wakes (any timer with a shorter period would show),
	 * looked at again until a deadline since the last answer's own wake
	 * (going back to sleep, or preempted on a busy machine) may fall into
	 * the first window.
	 */
	if (main_thread_switches(&d) < 0)
		TC_SKIP("idle_daemon_sleeps: no /proc/PID/task/TID/status here");
	ck_assert_msg(tcd_wait_stat(&d, "result.connections.trims", 1, 15000), "the crowd's memory was not given back");
	const char *metrics = tj_str(tcc_request(c, "admin/metrics", NULL), "result.text");
	ck_assert_msg(metrics && strstr(metrics, "\ntoolcalld_memory_trims_total 1\n"), "%s", metrics);
	ck_assert(tc_wait_until(({
		const struct json *st = tcc_request(c, "admin/stats", NULL);
		tj_int(st, "result.connections.open") == 1;
	}), 5000));
	uint64_t deadline = tc_now_ms() + tc_wait_scaled(15000);
	long woke;
	do {
		long before = main_thread_switches(&d);
		tc_pause_ms(3000);	/* the window in which nothing must wake it */
		woke = main_thread_switches(&d) - before;
	} while (woke != 0 && tc_now_ms() < deadline);
	ck_assert_msg(woke == 0, "the idle daemon kept waking: %ld times in the last 3 s", woke);
	assert_served(c);
	tcc_close(c);
	tcd_finish(&d);
}
END_TEST

/* A raw connection to the daemon's socket (no harness state: many at once). */
static int raw_connect(const struct tcd *d)
{
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	ck_assert(fd >= 0);
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", d->sock);
	ck_assert_msg(connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0, "connect: %m");
	return fd;
}

/*
 * A burst of 200 connects, all made before any is answered, is served
 * whole: the listener takes them a bounded number per wake-up, and comes
 * back for the rest until the queue is empty. Then a flood of connects
 * from another process does not keep a connected client from being
 * answered.
 */
START_TEST(accept_burst_all_served)
{
	enum { N = 200 };
	struct tcd d;
	tcd_start(&d, NULL);
	int fds[N];
	for (int i = 0; i < N; i++)
		fds[i] = raw_connect(&d);
	static const char ping[] = "{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"ping\"}\n";
	for (int i = 0; i < N; i++)
		ck_assert(write(fds[i], ping, sizeof(ping) - 1) == (ssize_t)(sizeof(ping) - 1));
	/* Every one answers, whatever the order. */
	bool done[N] = { false };
	int answered = 0;
	uint64_t deadline = tc_now_ms() + tc_wait_scaled(20000);
	while (answered < N && tc_now_ms() < deadline) {
		struct pollfd pfd[N];
		for (int i = 0; i < N; i++)
			pfd[i] = (struct pollfd){ .fd = done[i] ? -1 : fds[i], .events = POLLIN };
		ck_assert(poll(pfd, N, 200) >= 0);
		for (int i = 0; i < N; i++) {
			if (done[i] || !(pfd[i].revents & (POLLIN | POLLHUP)))
				continue;
			char buf[256];
			ssize_t k = read(fds[i], buf, sizeof(buf) - 1);
			ck_assert_msg(k > 0, "connection %d closed unanswered", i);
			buf[k] = '\0';
			ck_assert_msg(strstr(buf, "\"id\":7,\"result\":{}"), "connection %d: %s", i, buf);
			done[i] = true;
			answered++;
		}
	}
	ck_assert_int_eq(answered, N);
	for (int i = 0; i < N; i++)
		close(fds[i]);

	/* A flood of connects from another process while a client pings. */
	struct tcc *c = tcc_connect(&d);
	assert_served(c);
	pid_t flood = fork();
	ck_assert(flood >= 0);
	if (flood == 0) {
		for (;;) {
			int fd = raw_connect(&d);
			close(fd);
		}
	}
	uint64_t worst = 0;
	for (int i = 0; i < 50; i++) {
		uint64_t t0 = tc_now_ms();
		assert_served(c);
		worst = MAX(worst, tc_now_ms() - t0);
	}
	/* Still flooding: the pings were answered during the flood. */
	ck_assert_int_eq(waitpid(flood, NULL, WNOHANG), 0);
	kill(flood, SIGKILL);
	ck_assert(waitpid(flood, NULL, 0) == flood);
	ck_assert_msg(worst < tc_wait_scaled(2000), "a ping took %llu ms during a flood of connects",
		      (unsigned long long)worst);
	tcc_close(c);
	tcd_finish(&d);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("fair_conn");
	TCase *tc = tcase_create("fair_conn");
	tcase_set_timeout(tc, 300);
	tcase_add_test(tc, per_uid_connections);
	tcase_add_test(tc, per_uid_memory);
	tcase_add_test(tc, global_memory_evicts_within_heaviest_uid);
	tcase_add_test(tc, batch_holds_what_is_answered);
	tcase_add_test(tc, turn_budget_no_cutting_in_line);
	tcase_add_test(tc, idle_timeout_spares_subscribers_and_calls);
	tcase_add_test(tc, idle_daemon_sleeps);
	tcase_add_test(tc, accept_burst_all_served);
	tcase_add_test(tc, per_uid_memory_counts_confirmations);
	suite_add_tcase(s, tc);
	return run_suite(s);
}
