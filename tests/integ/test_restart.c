/* SPDX-License-Identifier: MIT */
/*
 * Restarts lose nothing (CONTRACT §21), driven as a host drives them: an
 * MCP client talking to the real `toolcallctl mcp` bridge, the real daemon
 * stopped (SIGTERM, as systemctl restart does), killed, or its connection
 * dropped under it. A call the stop ends, which the daemon answers
 * `cancelled` with data.restart, reaches the host `transient` with
 * data.restart (a keyed one the bridge sends again itself, to a daemon
 * that took the session back; a task or a batch the next daemon cannot
 * answer is answered so too); the session
 * goes on with its budget spent, workspace, roots and always_allow
 * answers (across a restart with Redis; across a dropped connection
 * without a store); an initialize naming an id Redis does not know is
 * answered as an unknown id is, without holding the loop; and a drill:
 * the daemon restarted under load loses no answer, no task and runs no
 * keyed call twice. Long because every case drives the real bridge and
 * daemon through a restart with the helpers they share here.
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdarg.h>
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
#include "tests/integ/mcp_host.h"
#include "tests/unit/check_main.h"
#include "tests/unit/redis_server.h"

#define INIT_PARAMS "\"protocolVersion\":\"2025-11-25\",\"clientInfo\":{\"name\":\"host\",\"version\":\"1\"}"

static void host_sendf(struct host *h, const char *fmt, ...) PRINTF(2, 3);
static void host_sendf(struct host *h, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	char *line = NULL;
	ck_assert_int_ge(vasprintf(&line, fmt, ap), 0);
	va_end(ap);
	host_send(h, line);
	free(line);
}

/* A tools/call of the host with id, as a line. */
static void host_call(struct host *h, int id, const char *tool, const char *args, const char *meta)
{
	host_sendf(h, "{\"jsonrpc\":\"2.0\",\"id\":%d,\"method\":\"tools/call\",\"params\":{\"name\":\"%s\","
		   "\"arguments\":%s%s%s}}", id, tool, args, meta ? ",\"_meta\":" : "", meta ? meta : "");
}

static const struct json *host_answer(struct host *h, int id, int timeout_ms)
{
	char idt[16];
	snprintf(idt, sizeof(idt), "%d", id);
	const struct json *m = host_wait(h, idt, NULL, timeout_ms);
	ck_assert_msg(m, "no answer to %d; the bridge said: %s", id, host_stderr(h));
	return m;
}

/* How many times line occurs, as a whole line, in the file at path. */
static int lines_equal(const struct tcd *d, const char *path, const char *line)
{
	_cleanup_free_ char *text = tcd_read(d, path, NULL);
	int n = 0;
	size_t len = strlen(line);
	for (const char *s = text; s && *s;) {
		const char *nl = strchr(s, '\n');
		size_t k = nl ? (size_t)(nl - s) : strlen(s);
		if (k == len && memcmp(s, line, k) == 0)
			n++;
		s += k + (nl ? 1 : 0);
	}
	return n;
}

/* Starts a private redis-server; returns the config's store member for it
 * (",\"store\":{...}" with prefix and the members in more), or NULL when
 * there is none here (the case then skips). */
static char *start_redis(struct redis_server *rs, const char *prefix, const char *more)
{
	const char *why;
	if (!redis_server_available(&why)) {
		tc_skip_note("%s", why);
		return NULL;
	}
	redis_server_start(rs);
	return xasprintf(",\"store\":{\"kind\":\"redis\",\"address\":\"unix:%s\",\"prefix\":\"%s\"%s}", rs->sock, prefix,
			 more ? more : "");
}

/* --- a stop ends calls: `transient` for the host, for a retry ------------ */

/* Starts toolcallctl mcp for d as a host would, reconnecting for up to
 * 30 s, and initializes it (INIT_PARAMS, then extra inside params). */
static void bridge_up(struct tcd *d, struct host *h, const char *extra)
{
	const char *args[] = { "mcp", "-s", d->sock, "--reconnect-s", "30", NULL };
	host_start(h, args);
	host_sendf(h, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{" INIT_PARAMS "%s}}",
		   extra);
	host_answer(h, 1, 10000);
}

/*
 * A stop ends two calls the grace period did not see through: the daemon
 * answers the plain one `cancelled` with data.restart, which the bridge
 * tells the host as a restart: transient (data.restart), with the
 * daemon's callId, attempts and durationMs. The keyed one is sent again
 * by the bridge to the next daemon when that daemon takes the session
 * back: with Redis, its key says its outcome is unknown (a non-idempotent
 * tool). Without a store the next daemon knows neither the session nor
 * the key: the keyed call is answered transient too. Never a second run.
 */
static void stop_ends_calls(bool redis)
{
	struct redis_server rs = { 0 };
	_cleanup_free_ char *store = redis ? start_redis(&rs, "stop:", NULL) : NULL;
	if (redis && !store)
		return;
	_cleanup_free_ char *cfg = xasprintf("{\"grace_ms\":300,\"confirmation\":{\"default\":{\"execute\":\"auto\"}}%s}",
					     store ? store : "");
	struct tcd d;
	tcd_start(&d, cfg);
	tcd_put(&d, "hello.txt", "hi");
	struct host h;
	bridge_up(&d, &h, "");
	host_send(&h, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}");

	/* Two calls that outlast the grace period: one plain, one keyed. */
	host_call(&h, 2, "shell", "{\"command\":\"echo partial-out; sleep 30\"}", NULL);
	host_call(&h, 3, "shell", "{\"command\":\"echo run >> keyed.log; sleep 1; echo keyed\"}",
		  "{\"idempotencyKey\":\"k-stop\"}");
	ck_assert(tcd_wait_stat(&d, "result.running", 2, 10000));
	_cleanup_free_ char *keyed_log = tcd_ws_path(&d, "keyed.log");
	ck_assert(tc_wait_until(lines_equal(&d, keyed_log, "run") == 1, tc_wait_scaled(10000)));
	tcd_kill(&d, SIGTERM);

	/* The plain call: transient, retryable, marked as a restart, as the
	 * isError result a host shows its model (the bridge asks for those). */
	const struct json *m = host_answer(&h, 2, 10000);
	ck_assert_msg(tj_bool(m, "result.isError"), "%s", tj_text(m));
	ck_assert_str_eq(tj_str(m, "result.structuredContent.error.kind"), "transient");
	ck_assert(tj_bool(m, "result.structuredContent.error.retryable"));
	ck_assert(tj_bool(m, "result.structuredContent.error.restart"));
	ck_assert_str_eq(tj_str(m, "result.structuredContent.error.tool"), "shell");
	ck_assert_ptr_nonnull(strstr(tj_str(m, "result.content.0.text"), "retry"));
	ck_assert_ptr_nonnull(strstr(tj_str(m, "result.content.0.text"), "restarted"));
	/* The output it had produced reaches the model too. */
	ck_assert_ptr_nonnull(strstr(tj_str(m, "result.content.0.text"), "partial-out"));
	ck_assert_ptr_nonnull(strstr(tj_str(m, "result.structuredContent.error.output"), "partial-out"));
	ck_assert_ptr_nonnull(tj_str(m, "result.structuredContent.error.callId"));
	ck_assert_int_eq(tj_int(m, "result.structuredContent.error.attempts"), 1);
	ck_assert(tj_has(m, "result.structuredContent.error.durationMs"));
	ck_assert_int_eq(tcd_wait_exit(&d, 10000), 0);

	/* The host retries at once: the request waits for the next daemon
	 * (the one stopping would not run it). */
	host_call(&h, 4, "read_file", "{\"path\":\"hello.txt\"}", NULL);
	host_pump(&h, 300);
	ck_assert_ptr_null(host_wait(&h, "3", NULL, 0));
	ck_assert_ptr_null(host_wait(&h, "4", NULL, 0));
	tcd_spawn(&d, NULL);
	ck_assert_int_eq(tcd_wait_socket(&d, d.sock, 10000), 0);
	m = host_answer(&h, 4, 15000);
	ck_assert_msg(!tj_bool(m, "result.isError"), "%s", tj_text(m));
	ck_assert_str_eq(tj_str(m, "result.structuredContent.content"), "hi");

	/* The keyed call was not relayed: the bridge sent it again to the
	 * new daemon, and the host gets its outcome there. */
	m = host_answer(&h, 3, 15000);
	if (redis) {
		ck_assert_msg(tj_bool(m, "result.isError"), "%s", tj_text(m));
		ck_assert_str_eq(tj_str(m, "result.structuredContent.error.kind"), "execution_error");
		ck_assert_str_eq(tj_str(m, "result.structuredContent.error.outcome"), "unknown");
		ck_assert_int_eq(lines_equal(&d, keyed_log, "run"), 1);
	} else {
		ck_assert_msg(tj_bool(m, "result.isError"), "%s", tj_text(m));
		ck_assert_str_eq(tj_str(m, "result.structuredContent.error.kind"), "transient");
		ck_assert(tj_bool(m, "result.structuredContent.error.restart"));
		ck_assert_str_eq(tj_str(m, "result.structuredContent.error.tool"), "shell");
		/* Nothing ran it again. */
		host_pump(&h, 300);
		ck_assert_int_eq(lines_equal(&d, keyed_log, "run"), 1);
	}
	/* Each request got one answer. */
	ck_assert_ptr_null(host_wait(&h, "2", NULL, 200));
	ck_assert_ptr_null(host_wait(&h, "3", NULL, 0));

	ck_assert_int_eq(host_end(&h, true, 10000), 0);
	host_free(&h);
	ck_assert_int_eq(tcd_stop(&d), 0);
	tcd_free(&d);
	if (redis)
		redis_server_free(&rs);
}

START_TEST(stop_ends_calls_transient_without_a_store)
{
	stop_ends_calls(false);
}
END_TEST

START_TEST(stop_ends_calls_transient_with_redis)
{
	stop_ends_calls(true);
}
END_TEST

/* A task the grace period did not see through is cancelled, marked as a
 * restart, and the next daemon says so from Redis. */
START_TEST(task_stopped_by_a_stop_is_cancelled)
{
	struct redis_server rs = { 0 };
	_cleanup_free_ char *store = start_redis(&rs, "task:", NULL);
	if (!store)
		return;
	_cleanup_free_ char *cfg = xasprintf("{\"grace_ms\":300,\"confirmation\":{\"default\":{\"execute\":\"auto\"}}%s}",
					     store);
	struct tcd d;
	tcd_start(&d, cfg);
	struct tcc *c = tcc_connect(&d);
	const struct json *r = tcc_request(c, "tools/call", "{\"name\":\"shell\",\"arguments\":{\"command\":\"sleep 30\"},"
					   "\"task\":{\"ttl\":60000}}");
	ck_assert_msg(tj_str(r, "result.task.taskId"), "%s", tj_text(r));
	_cleanup_free_ char *task = tj_quote(tj_str(r, "result.task.taskId"));
	ck_assert(tcd_wait_stat(&d, "result.running", 1, 10000));
	ck_assert_int_eq(tcd_stop(&d), 0);
	tcc_close(c);
	tcd_spawn(&d, NULL);
	ck_assert_int_eq(tcd_wait_socket(&d, d.sock, 10000), 0);
	c = tcc_connect(&d);
	r = tcc_request(c, "tasks/result", tcc_fmt(c, "{\"taskId\":%s}", task));
	tc_assert_kind(r, "cancelled");
	ck_assert(tj_has(r, "error.data.retryable") && !tj_bool(r, "error.data.retryable"));
	ck_assert(tj_bool(r, "error.data.restart"));
	r = tcc_request(c, "tasks/get", tcc_fmt(c, "{\"taskId\":%s}", task));
	ck_assert_str_eq(tj_str(r, "result.status"), "cancelled");
	tcc_close(c);
	ck_assert_int_eq(tcd_stop(&d), 0);
	tcd_free(&d);
	redis_server_free(&rs);
}
END_TEST

/* The same task through the bridge: its result, read back from Redis by
 * the next daemon, reaches the host as a restart (transient, retryable);
 * and the mark of the stop in that answer does not make the bridge hold
 * the host's next requests for yet another daemon. */
START_TEST(task_stopped_through_the_bridge)
{
	struct redis_server rs = { 0 };
	_cleanup_free_ char *store = start_redis(&rs, "btask:", NULL);
	if (!store)
		return;
	_cleanup_free_ char *cfg = xasprintf("{\"grace_ms\":300,\"confirmation\":{\"default\":{\"execute\":\"auto\"}},"
					     "\"limits\":{\"session_resume_s\":60}%s}", store);
	struct tcd d;
	tcd_start(&d, cfg);
	struct host h;
	bridge_up(&d, &h, "");
	host_send(&h, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}");
	host_send(&h, "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/call\",\"params\":{\"name\":\"shell\","
		      "\"arguments\":{\"command\":\"sleep 30\"},\"task\":{\"ttl\":60000}}}");
	const struct json *m = host_answer(&h, 2, 10000);
	_cleanup_free_ char *task = tj_quote(tj_str(m, "result.task.taskId"));
	ck_assert(tcd_wait_stat(&d, "result.running", 1, 10000));
	size_t changed = host_count(&h, "notifications/tools/list_changed");
	ck_assert_int_eq(tcd_stop(&d), 0);
	tcd_spawn(&d, NULL);
	ck_assert_int_eq(tcd_wait_socket(&d, d.sock, 10000), 0);
	ck_assert(tc_wait_until((host_pump(&h, 10), host_count(&h, "notifications/tools/list_changed") > changed),
				tc_wait_scaled(15000)));
	host_sendf(&h, "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"tasks/result\",\"params\":{\"taskId\":%s}}", task);
	m = host_answer(&h, 3, 10000);
	ck_assert_msg(tj_bool(m, "result.isError"), "%s", tj_text(m));
	ck_assert_str_eq(tj_str(m, "result.structuredContent.error.kind"), "transient");
	ck_assert(tj_bool(m, "result.structuredContent.error.retryable"));
	ck_assert(tj_bool(m, "result.structuredContent.error.restart"));
	ck_assert_ptr_nonnull(strstr(tj_str(m, "result.content.0.text"), "retry"));
	/* The daemon that answered does not stop: the next request goes to it. */
	host_send(&h, "{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"ping\"}");
	m = host_wait(&h, "4", NULL, 5000);
	ck_assert_msg(m && tj_has(m, "result"), "the ping after the task's result was held: %s",
		      m ? tj_text(m) : host_stderr(&h));
	ck_assert_int_eq(host_end(&h, true, 10000), 0);
	host_free(&h);
	ck_assert_int_eq(tcd_stop(&d), 0);
	tcd_free(&d);
	redis_server_free(&rs);
}
END_TEST

/* --- the session goes on ------------------------------------------------- */

/* A proxy between the bridge and the daemon, whose connection the test
 * drops (the daemon stays): listens on path, relays to target. */
static pid_t proxy_start(const char *path, const char *target)
{
	unlink(path);
	int lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	ck_assert_int_eq(bind(lfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	ck_assert_int_eq(listen(lfd, 16), 0);
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		/* Nothing of the test's (the host's pipes above all) stays open
		 * here. */
		for (int fd = 3; fd < 1024; fd++)
			if (fd != lfd)
				close(fd);
		alarm(120);
		for (;;) {
			int a = accept(lfd, NULL, NULL);
			if (a < 0)
				continue;
			int b = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
			struct sockaddr_un ta = { .sun_family = AF_UNIX };
			snprintf(ta.sun_path, sizeof(ta.sun_path), "%s", target);
			if (connect(b, (struct sockaddr *)&ta, sizeof(ta)) < 0) {
				close(a);
				close(b);
				continue;
			}
			char buf[65536];
			for (bool open = true; open;) {
				struct pollfd p[2] = { { a, POLLIN, 0 }, { b, POLLIN, 0 } };
				if (poll(p, 2, -1) < 0)
					break;
				for (int i = 0; i < 2 && open; i++) {
					if (!p[i].revents)
						continue;
					ssize_t n = read(p[i].fd, buf, sizeof(buf));
					if (n <= 0 || write(p[1 - i].fd, buf, (size_t)n) != n)
						open = false;
				}
			}
			close(a);
			close(b);
		}
	}
	close(lfd);
	return pid;
}

static void proxy_stop(pid_t pid)
{
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
}

/* Waits for a session.roots event the host is subscribed to; returns the
 * primary workspace it names. */
static const char *wait_roots(struct host *h)
{
	uint64_t end = tc_now_ms() + tc_wait_scaled(15000);
	while (tc_now_ms() < end) {
		const struct json *m = host_wait(h, NULL, "notifications/event", 200);
		if (m && str_eq(tj_str(m, "params.type"), "session.roots"))
			return tj_str(m, "params.workspaces.0");
	}
	ck_abort_msg("no session.roots event; the bridge said: %s", host_stderr(h));
	return NULL;
}

/*
 * A session with a workspace (-w), roots, a budget and an always_allow
 * answer, through the bridge; then its connection goes (with redis: the
 * daemon restarts, and the next one takes it from Redis; without: the
 * connection is dropped, and the same daemon kept it). After the bridge's
 * re-initialize: the same workspace and roots, no question asked again,
 * and no more calls than were left.
 */
static void session_goes_on(bool redis)
{
	struct redis_server rs = { 0 };
	_cleanup_free_ char *store = redis ? start_redis(&rs, "s:", NULL) : NULL;
	if (redis && !store)
		return;
	_cleanup_free_ char *cfg = xasprintf("{\"limits\":{\"session_resume_s\":60},"
					     "\"workspaces\":{\"allowed\":[\"@DIR@/other\",\"@DIR@/roots\"]}%s}",
					     store ? store : "");
	struct tcd d;
	tcd_prepare(&d, &(struct tcd_opts){ .config = cfg });
	_cleanup_free_ char *other = xasprintf("%s/other", d.dir);
	_cleanup_free_ char *roots = xasprintf("%s/roots", d.dir);
	ck_assert_int_eq(mkdir(other, 0755), 0);
	ck_assert_int_eq(mkdir(roots, 0755), 0);
	_cleanup_free_ char *rfile = xasprintf("%s/r.txt", roots);
	tc_write_file_atomic(rfile, "root", 4);
	tcd_spawn(&d, NULL);
	ck_assert_int_eq(tcd_wait_socket(&d, d.sock, 10000), 0);

	_cleanup_free_ char *proxy = xasprintf("%s/proxy.sock", d.dir);
	pid_t px = redis ? 0 : proxy_start(proxy, d.sock);
	struct host h;
	const char *args[] = { "mcp", "-s", redis ? d.sock : proxy, "-w", other, "--reconnect-s", "30", NULL };
	host_start(&h, args);
	host_sendf(&h, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{" INIT_PARAMS ","
		   "\"capabilities\":{\"roots\":{},\"elicitation\":{\"form\":{}}},\"budget\":{\"toolCalls\":4}}}");
	const struct json *m = host_answer(&h, 1, 10000);
	ck_assert_str_eq(tj_str(m, "result.workspace"), other);
	_cleanup_free_ char *sid = xstrdup(tj_str(m, "result.sessionId"));
	host_send(&h, "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"events/subscribe\",\"params\":{\"types\":[\"session.*\"]}}");
	host_answer(&h, 2, 10000);
	host_send(&h, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}");
	m = host_wait(&h, NULL, "roots/list", 10000);
	ck_assert_ptr_nonnull(m);
	_cleanup_free_ char *rid = tj_text(tj(m, "id"));
	host_sendf(&h, "{\"jsonrpc\":\"2.0\",\"id\":%s,\"result\":{\"roots\":[{\"uri\":\"file://%s\"}]}}", rid, roots);
	ck_assert_str_eq(wait_roots(&h), roots);

	/* Call 1: write_file, allowed for the rest of the session by the
	 * host's answer to the daemon's question. */
	host_call(&h, 3, "write_file", "{\"path\":\"w.txt\",\"content\":\"x\"}", NULL);
	m = host_wait(&h, NULL, "elicitation/create", 10000);
	ck_assert_msg(m, "no question; the bridge said: %s", host_stderr(&h));
	_cleanup_free_ char *eid = tj_text(tj(m, "id"));
	host_sendf(&h, "{\"jsonrpc\":\"2.0\",\"id\":%s,\"result\":{\"action\":\"accept\",\"content\":"
		   "{\"decision\":\"always_allow\"}}}", eid);
	m = host_answer(&h, 3, 10000);
	ck_assert_msg(!tj_bool(m, "result.isError"), "%s", tj_text(m));
	/* Call 2, just before the connection goes. */
	host_call(&h, 4, "read_file", "{\"path\":\"r.txt\"}", NULL);
	ck_assert_str_eq(tj_str(host_answer(&h, 4, 10000), "result.structuredContent.content"), "root");

	size_t changed = host_count(&h, "notifications/tools/list_changed");
	if (redis) {
		ck_assert_int_eq(tcd_stop(&d), 0);
		tcd_spawn(&d, NULL);
		ck_assert_int_eq(tcd_wait_socket(&d, d.sock, 10000), 0);
	} else {
		proxy_stop(px);
		px = proxy_start(proxy, d.sock);
	}
	ck_assert(tc_wait_until((host_pump(&h, 10), host_count(&h, "notifications/tools/list_changed") > changed),
				tc_wait_scaled(15000)));
	ck_assert_msg(strstr(host_stderr(&h), sid), "%s", host_stderr(&h));
	ck_assert_msg(!strstr(host_stderr(&h), "not taken back"), "%s", host_stderr(&h));
	/* The roots the host gave, told again by the bridge. */
	ck_assert_str_eq(wait_roots(&h), roots);

	/* Call 3: no question this time; call 4: in the roots; call 5: over
	 * the budget. */
	size_t asked = host_count(&h, "elicitation/create");
	host_call(&h, 5, "write_file", "{\"path\":\"w2.txt\",\"content\":\"y\"}", NULL);
	m = host_answer(&h, 5, 10000);
	ck_assert_msg(!tj_bool(m, "result.isError"), "%s", tj_text(m));
	ck_assert_uint_eq(host_count(&h, "elicitation/create"), asked);
	_cleanup_free_ char *w2 = xasprintf("%s/w2.txt", roots);
	ck_assert_int_eq(access(w2, F_OK), 0);
	host_call(&h, 6, "read_file", "{\"path\":\"r.txt\"}", NULL);
	ck_assert_str_eq(tj_str(host_answer(&h, 6, 10000), "result.structuredContent.content"), "root");
	host_call(&h, 7, "read_file", "{\"path\":\"r.txt\"}", NULL);
	m = host_answer(&h, 7, 10000);
	ck_assert_msg(tj_bool(m, "result.isError"), "%s", tj_text(m));
	ck_assert_str_eq(tj_str(m, "result.structuredContent.error.kind"), "budget_exceeded");

	ck_assert_int_eq(host_end(&h, true, 10000), 0);
	host_free(&h);
	if (px)
		proxy_stop(px);
	ck_assert_int_eq(tcd_stop(&d), 0);
	tcd_free(&d);
	if (redis)
		redis_server_free(&rs);
}

START_TEST(session_goes_on_across_a_restart_with_redis)
{
	session_goes_on(true);
}
END_TEST

START_TEST(session_goes_on_across_a_dropped_connection)
{
	session_goes_on(false);
}
END_TEST

/*
 * A keyed call in flight when the connection goes. A daemon that had the
 * session (the same one: the connection dropped) knows the key: the
 * bridge sends the call again, and the host gets the outcome of its one
 * run. A daemon that did not (the next one after a crash, without a
 * shared store) does not know the key either: the call is answered
 * transient, as a plain one, and never runs a second time.
 */
START_TEST(keyed_call_sent_again_only_where_its_key_is_known)
{
	struct tcd d;
	tcd_start(&d, "{\"confirmation\":{\"default\":{\"execute\":\"auto\"}}}");
	_cleanup_free_ char *proxy = xasprintf("%s/proxy.sock", d.dir);
	pid_t px = proxy_start(proxy, d.sock);
	struct host h;
	const char *args[] = { "mcp", "-s", proxy, "--reconnect-s", "30", NULL };
	host_start(&h, args);
	host_sendf(&h, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{" INIT_PARAMS "}}");
	host_answer(&h, 1, 10000);
	host_send(&h, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}");
	_cleanup_free_ char *log = tcd_ws_path(&d, "k.log");

	/* The connection drops while the call waits for the test. */
	host_call(&h, 2, "shell", "{\"command\":\"echo drop >> k.log; while [ ! -e go ]; do sleep 0.01; done; echo once\"}",
		  "{\"idempotencyKey\":\"k-drop\"}");
	ck_assert(tc_wait_until(lines_equal(&d, log, "drop") == 1, tc_wait_scaled(10000)));
	size_t changed = host_count(&h, "notifications/tools/list_changed");
	proxy_stop(px);
	px = proxy_start(proxy, d.sock);
	ck_assert(tc_wait_until((host_pump(&h, 10), host_count(&h, "notifications/tools/list_changed") > changed),
				tc_wait_scaled(15000)));
	tcd_put(&d, "go", "");
	const struct json *m = host_answer(&h, 2, 15000);
	ck_assert_msg(!tj_bool(m, "result.isError"), "%s", tj_text(m));
	ck_assert_str_eq(tj_str(m, "result.structuredContent.stdout"), "once\n");
	ck_assert_int_eq(lines_equal(&d, log, "drop"), 1);

	/* The daemon is killed while the call runs; the next one has no
	 * store. */
	host_call(&h, 3, "shell", "{\"command\":\"echo crash >> k.log; sleep 30\"}", "{\"idempotencyKey\":\"k-crash\"}");
	ck_assert(tc_wait_until(lines_equal(&d, log, "crash") == 1, tc_wait_scaled(10000)));
	changed = host_count(&h, "notifications/tools/list_changed");
	tcd_kill(&d, SIGKILL);
	ck_assert_int_ge(tcd_wait_exit(&d, 10000), 0);
	tcd_spawn(&d, NULL);
	ck_assert_int_eq(tcd_wait_socket(&d, d.sock, 10000), 0);
	m = host_answer(&h, 3, 15000);
	ck_assert_msg(tj_bool(m, "result.isError"), "%s", tj_text(m));
	ck_assert_str_eq(tj_str(m, "result.structuredContent.error.kind"), "transient");
	ck_assert(tj_bool(m, "result.structuredContent.error.restart"));
	ck_assert(tc_wait_until((host_pump(&h, 10), host_count(&h, "notifications/tools/list_changed") > changed),
				tc_wait_scaled(15000)));
	host_pump(&h, 300);
	ck_assert_int_eq(lines_equal(&d, log, "crash"), 1);
	ck_assert_ptr_null(host_wait(&h, "3", NULL, 0));

	ck_assert_int_eq(host_end(&h, true, 10000), 0);
	host_free(&h);
	proxy_stop(px);
	ck_assert_int_eq(tcd_stop(&d), 0);
	tcd_free(&d);
}
END_TEST

/* A task in flight when the daemon is killed, and a next daemon without
 * a store: the host's tasks/result, sent again, is answered transient
 * (the task went with the daemon), not as another user's task. */
START_TEST(task_lost_without_a_store_is_transient)
{
	struct tcd d;
	tcd_start(&d, "{\"confirmation\":{\"default\":{\"execute\":\"auto\"}}}");
	struct host h;
	bridge_up(&d, &h, "");
	host_send(&h, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}");
	host_send(&h, "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/call\",\"params\":{\"name\":\"shell\","
		  "\"arguments\":{\"command\":\"echo t >> t.log; sleep 30\"},\"task\":{}}}");
	const struct json *m = host_answer(&h, 2, 10000);
	_cleanup_free_ char *tid = xstrdup(tj_str(m, "result.task.taskId"));
	host_sendf(&h, "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"tasks/result\",\"params\":{\"taskId\":\"%s\"}}", tid);
	_cleanup_free_ char *log = tcd_ws_path(&d, "t.log");
	ck_assert(tc_wait_until(lines_equal(&d, log, "t") == 1, tc_wait_scaled(10000)));
	tcd_kill(&d, SIGKILL);
	ck_assert_int_ge(tcd_wait_exit(&d, 10000), 0);
	tcd_spawn(&d, NULL);
	ck_assert_int_eq(tcd_wait_socket(&d, d.sock, 10000), 0);
	m = host_answer(&h, 3, 15000);
	ck_assert_msg(tj_bool(m, "result.isError"), "%s", tj_text(m));
	ck_assert_str_eq(tj_str(m, "result.structuredContent.error.kind"), "transient");
	ck_assert(tj_bool(m, "result.structuredContent.error.restart"));
	ck_assert_ptr_nonnull(strstr(tj_str(m, "result.content.0.text"), "retry"));
	/* tasks/get of it now: the new daemon's plain answer. */
	host_sendf(&h, "{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"tasks/get\",\"params\":{\"taskId\":\"%s\"}}", tid);
	ck_assert_int_eq(tj_int(host_answer(&h, 4, 10000), "error.code"), -32602);
	ck_assert_int_eq(host_end(&h, true, 10000), 0);
	host_free(&h);
	ck_assert_int_eq(tcd_stop(&d), 0);
	tcd_free(&d);
}
END_TEST

/* Waits for a message that is an array (a batch's answer); NULL on
 * timeout. */
static const struct json *host_wait_batch(struct host *h, int timeout_ms)
{
	uint64_t end = tc_now_ms() + tc_wait_scaled(timeout_ms);
	for (;;) {
		for (size_t i = 0; i < h->n_msgs; i++) {
			const struct json *m = json_doc_root(h->msgs[i]);
			if (!h->taken[i] && m->type == JSON_ARRAY) {
				h->taken[i] = true;
				return m;
			}
		}
		if (h->out_eof || tc_now_ms() >= end)
			return NULL;
		host_pump(h, 50);
	}
}

/* A batch in flight when the daemon is killed is answered, as one array:
 * its call transient (a restart), its other request too; the host does
 * not wait for an answer that will never come. */
START_TEST(batch_in_flight_is_answered_after_a_crash)
{
	struct tcd d;
	tcd_start(&d, "{\"confirmation\":{\"default\":{\"execute\":\"auto\"}}}");
	struct host h;
	bridge_up(&d, &h, "");
	host_send(&h, "[{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/call\",\"params\":{\"name\":\"shell\","
		  "\"arguments\":{\"command\":\"echo b >> b.log; sleep 30\"}}},{\"jsonrpc\":\"2.0\",\"id\":3,"
		  "\"method\":\"ping\"},{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}]");
	_cleanup_free_ char *log = tcd_ws_path(&d, "b.log");
	ck_assert(tc_wait_until(lines_equal(&d, log, "b") == 1, tc_wait_scaled(10000)));
	tcd_kill(&d, SIGKILL);
	ck_assert_int_ge(tcd_wait_exit(&d, 10000), 0);
	tcd_spawn(&d, NULL);
	ck_assert_int_eq(tcd_wait_socket(&d, d.sock, 10000), 0);
	const struct json *m = host_wait_batch(&h, 15000);
	ck_assert_msg(m, "no answer to the batch; the bridge said: %s", host_stderr(&h));
	ck_assert_int_eq(m->u.arr.n, 2);
	ck_assert_int_eq(tj_int(m, "0.id"), 2);
	ck_assert(tj_bool(m, "0.result.isError"));
	ck_assert_str_eq(tj_str(m, "0.result.structuredContent.error.kind"), "transient");
	ck_assert(tj_bool(m, "0.result.structuredContent.error.restart"));
	ck_assert_int_eq(tj_int(m, "1.id"), 3);
	ck_assert_str_eq(tj_str(m, "1.error.data.kind"), "transient");
	/* A batch to the next daemon is relayed as before. */
	host_send(&h, "[{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"ping\"}]");
	m = host_wait_batch(&h, 15000);
	ck_assert_msg(m && m->u.arr.n == 1 && tj_int(m, "0.id") == 4 && tj_has(m, "0.result"), "%s",
		      m ? tj_text(m) : "no answer");
	ck_assert_int_eq(lines_equal(&d, log, "b"), 1);
	ck_assert_int_eq(host_end(&h, true, 10000), 0);
	host_free(&h);
	ck_assert_int_eq(tcd_stop(&d), 0);
	tcd_free(&d);
}
END_TEST

/* A batch a stop cuts short is answered by the stopping daemon, one
 * array: its call, cancelled with data.restart, reaches the host as a
 * restart (transient), its other request as answered. */
START_TEST(batch_cut_short_by_a_stop)
{
	struct tcd d;
	tcd_start(&d, "{\"grace_ms\":300,\"confirmation\":{\"default\":{\"execute\":\"auto\"}}}");
	struct host h;
	bridge_up(&d, &h, "");
	host_send(&h, "[{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/call\",\"params\":{\"name\":\"shell\","
		  "\"arguments\":{\"command\":\"echo b >> b.log; sleep 30\"}}},{\"jsonrpc\":\"2.0\",\"id\":3,"
		  "\"method\":\"ping\"}]");
	_cleanup_free_ char *log = tcd_ws_path(&d, "b.log");
	ck_assert(tc_wait_until(lines_equal(&d, log, "b") == 1, tc_wait_scaled(10000)));
	tcd_kill(&d, SIGTERM);
	const struct json *m = host_wait_batch(&h, 15000);
	ck_assert_msg(m, "no answer to the batch; the bridge said: %s", host_stderr(&h));
	ck_assert_int_eq(m->u.arr.n, 2);
	for (size_t i = 0; i < 2; i++) {
		const struct json *a = m->u.arr.items[i];
		if (tj_int(a, "id") == 3) {
			ck_assert_msg(tj_has(a, "result"), "%s", tj_text(a));
			continue;
		}
		ck_assert_int_eq(tj_int(a, "id"), 2);
		ck_assert_msg(tj_bool(a, "result.isError"), "%s", tj_text(a));
		ck_assert_str_eq(tj_str(a, "result.structuredContent.error.kind"), "transient");
		ck_assert(tj_bool(a, "result.structuredContent.error.retryable"));
		ck_assert(tj_bool(a, "result.structuredContent.error.restart"));
		ck_assert_ptr_nonnull(tj_str(a, "result.structuredContent.error.callId"));
	}
	ck_assert_int_eq(tcd_wait_exit(&d, 10000), 0);
	ck_assert_int_eq(host_end(&h, true, 10000), 0);
	host_free(&h);
	tcd_free(&d);
}
END_TEST

/* The host's budget goes on when the daemon lost the session (a restart
 * without a store) or has an older record of it (killed before its last
 * calls were written to Redis): the bridge tells it what is left. */
static void budget_goes_on(bool redis)
{
	struct redis_server rs = { 0 };
	_cleanup_free_ char *store = redis ? start_redis(&rs, "b:", NULL) : NULL;
	if (redis && !store)
		return;
	_cleanup_free_ char *cfg = xasprintf("{\"limits\":{\"session_resume_s\":60}%s}", store ? store : "");
	struct tcd d;
	tcd_start(&d, cfg);
	struct host h;
	bridge_up(&d, &h, ",\"capabilities\":{},\"budget\":{\"toolCalls\":3}");
	host_send(&h, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}");
	for (int id = 2; id <= 3; id++) {
		host_call(&h, id, "stat", "{\"path\":\".\"}", NULL);
		ck_assert(!tj_bool(host_answer(&h, id, 10000), "result.isError"));
	}
	size_t changed = host_count(&h, "notifications/tools/list_changed");
	if (redis) {
		tcd_kill(&d, SIGKILL);
		ck_assert_int_ge(tcd_wait_exit(&d, 10000), 0);
	} else {
		ck_assert_int_eq(tcd_stop(&d), 0);
	}
	tcd_spawn(&d, NULL);
	ck_assert_int_eq(tcd_wait_socket(&d, d.sock, 10000), 0);
	ck_assert(tc_wait_until((host_pump(&h, 10), host_count(&h, "notifications/tools/list_changed") > changed),
				tc_wait_scaled(15000)));
	host_call(&h, 4, "stat", "{\"path\":\".\"}", NULL);
	const struct json *m = host_answer(&h, 4, 10000);
	ck_assert_msg(!tj_bool(m, "result.isError"), "%s", tj_text(m));
	host_call(&h, 5, "stat", "{\"path\":\".\"}", NULL);
	m = host_answer(&h, 5, 10000);
	ck_assert_msg(str_eq(tj_str(m, "result.structuredContent.error.kind"), "budget_exceeded"), "%s; the bridge said %s",
		      tj_text(m), host_stderr(&h));
	ck_assert_int_eq(host_end(&h, true, 10000), 0);
	host_free(&h);
	ck_assert_int_eq(tcd_stop(&d), 0);
	tcd_free(&d);
	if (redis)
		redis_server_free(&rs);
}

START_TEST(budget_goes_on_across_a_restart_without_a_store)
{
	budget_goes_on(false);
}
END_TEST

START_TEST(budget_goes_on_across_a_crash_with_redis)
{
	budget_goes_on(true);
}
END_TEST

/* --- initialize with an id Redis does not know --------------------------- */

/* The answer to initialize {sessionId: id} on a daemon, without what
 * differs between two daemons (the workspace: each its own default). */
static char *initialize_answer(struct tcd *d, const char *id)
{
	struct tcc *c = tcc_connect(d);
	const struct json *r = tcc_request(c, "initialize", tcc_fmt(c, "{" INIT_PARAMS ",\"capabilities\":{},"
								     "\"sessionId\":\"%s\"}", id));
	ck_assert_msg(tj_has(r, "result"), "%s", tj_text(r));
	ck_assert_str_eq(tj_str(r, "result.workspace"), d->ws);
	ck_assert_str_eq(tj_str(r, "result.sessionId"), id);
	/* A fresh session: no budget. */
	for (int i = 0; i < 3; i++)
		tc_assert_ok(tcc_call(c, "stat", "{\"path\":\".\"}"));
	struct buf b = { 0 };
	const struct json *res = tj(r, "result");
	for (size_t i = 0; i < res->u.obj.n; i++) {
		if (str_eq(res->u.obj.members[i].key, "workspace"))
			continue;
		buf_printf(&b, "%s=", res->u.obj.members[i].key);
		json_canonical(res->u.obj.members[i].value, &b);
		buf_putc(&b, ';');
	}
	tcc_close(c);
	return buf_steal(&b);
}

START_TEST(initialize_unknown_id_with_redis)
{
	struct redis_server rs = { 0 };
	_cleanup_free_ char *store = start_redis(&rs, "u:", ",\"timeout_ms\":3000");
	if (!store)
		return;
	_cleanup_free_ char *cfg = xasprintf("{\"socket_mode\":\"0666\",\"limits\":{\"session_resume_s\":60}%s}", store);
	struct tcd d, plain;
	tcd_start(&d, cfg);
	tcd_start(&plain, "{\"limits\":{\"session_resume_s\":60}}");

	/* The same answer as a daemon without Redis gives: a fresh session of
	 * that id, in the default workspace. */
	_cleanup_free_ char *with = initialize_answer(&d, "never-seen");
	_cleanup_free_ char *without = initialize_answer(&plain, "never-seen");
	ck_assert_str_eq(with, without);

	/* An id Redis knows for another uid is, for this one, an id nobody
	 * used: the same answer, nothing of the other's session. */
	ck_assert(chmod(d.dir, 0711) == 0);
	ck_assert(chmod(d.ws, 0777) == 0);
	struct tcc *c = tcc_connect(&d);
	tcc_initialize(c, "\"sessionId\":\"mine\",\"budget\":{\"toolCalls\":1}");
	tcc_close(c);
	ck_assert_int_eq(tcd_stop(&d), 0);
	tcd_spawn(&d, NULL);
	ck_assert_int_eq(tcd_wait_socket(&d, d.sock, 10000), 0);
	c = tcc_connect_as(&d, 65534, 65534);
	const struct json *r = tcc_request(c, "initialize", "{" INIT_PARAMS ",\"capabilities\":{},\"sessionId\":\"mine\"}");
	ck_assert_msg(tj_has(r, "result"), "%s", tj_text(r));
	ck_assert_str_eq(tj_str(r, "result.sessionId"), "mine");
	ck_assert_str_eq(tj_str(r, "result.workspace"), d.ws);
	tc_assert_ok(tcc_call(c, "stat", "{\"path\":\".\"}"));
	tc_assert_ok(tcc_call(c, "stat", "{\"path\":\".\"}"));
	tcc_close(c);
	/* Its owner takes it back from Redis, with its budget. */
	c = tcc_connect(&d);
	tcc_initialize(c, "\"sessionId\":\"mine\"");
	tc_assert_ok(tcc_call(c, "stat", "{\"path\":\".\"}"));
	tc_assert_kind(tcc_call(c, "stat", "{\"path\":\".\"}"), "budget_exceeded");
	tcc_close(c);

	/* Redis does not answer: the initialize waits for it (up to the
	 * store's timeout), and the loop goes on meanwhile. */
	redis_server_pause(&rs, true);
	struct tcc *a = tcc_connect(&d);
	int64_t id = tcc_send_request(a, "initialize", "{" INIT_PARAMS ",\"capabilities\":{},\"sessionId\":\"while-away\"}");
	struct tcc *b = tcc_connect(&d);
	/* The initialize's question is out (store.pending), and meanwhile
	 * b is answered: it still waits when they are (a loop held until
	 * the store's timeout would have answered it first). */
	ck_assert(tc_wait_until(tj_int(tcc_request(b, "admin/stats", NULL), "result.store.pending") >= 1, 2000));
	tc_assert_ok(tcc_request(b, "ping", NULL));
	tc_assert_ok(tcc_call(b, "stat", "{\"path\":\".\"}"));
	ck_assert_ptr_null(tcc_wait_id(a, tcc_fmt(a, "%lld", (long long)id), 0));
	/* A client that sends its next request at once (no wait for the
	 * initialize's answer) gets it handled in the session it named, as
	 * without Redis: here one without calls left. */
	struct tcc *piped = tcc_connect(&d);
	int64_t pid_init = tcc_send_request(piped, "initialize", "{" INIT_PARAMS ",\"capabilities\":{},"
					    "\"sessionId\":\"piped\",\"budget\":{\"toolCalls\":0}}");
	int64_t pid_call = tcc_send_request(piped, "tools/call", "{\"name\":\"stat\",\"arguments\":{\"path\":\".\"}}");
	redis_server_pause(&rs, false);
	r = tcc_wait_id(piped, tcc_fmt(piped, "%lld", (long long)pid_init), 15000);
	ck_assert_msg(r && str_eq(tj_str(r, "result.sessionId"), "piped"), "%s", r ? tj_text(r) : "no answer");
	tc_assert_kind(tcc_wait_id(piped, tcc_fmt(piped, "%lld", (long long)pid_call), 15000), "budget_exceeded");
	tcc_close(piped);
	r = tcc_wait_id(a, tcc_fmt(a, "%lld", (long long)id), 15000);
	ck_assert_msg(r && tj_has(r, "result"), "%s", r ? tj_text(r) : "no answer");
	ck_assert_str_eq(tj_str(r, "result.sessionId"), "while-away");
	ck_assert_str_eq(tj_str(r, "result.workspace"), d.ws);
	tcc_close(a);
	tcc_close(b);

	/* Redis gone: the same answer again. */
	redis_server_kill(&rs);
	_cleanup_free_ char *gone = initialize_answer(&d, "redis-gone");
	_cleanup_free_ char *gone_plain = initialize_answer(&plain, "redis-gone");
	ck_assert_str_eq(gone, gone_plain);

	ck_assert_int_eq(tcd_stop(&plain), 0);
	tcd_free(&plain);
	ck_assert_int_eq(tcd_stop(&d), 0);
	tcd_free(&d);
	redis_server_free(&rs);
}
END_TEST

/* --- the drill ------------------------------------------------------------ */

#define DRILL_KEYED 6
#define DRILL_PLAIN 24

/* A keyed call of the drill: appends its name to runs.log, which counts
 * its executions. */
static void drill_keyed(struct host *h, int id, int k, int sleep_ds)
{
	char args[160], meta[64];
	snprintf(args, sizeof(args), "{\"command\":\"echo k%d >> runs.log; sleep %d.%d; echo k%d\"}", k,
		 sleep_ds / 10, sleep_ds % 10, k);
	snprintf(meta, sizeof(meta), "{\"idempotencyKey\":\"drill-k%d\"}", k);
	host_call(h, id, "shell", args, meta);
}

/* A plain call's answer: its outcome, or the transient of a restart. */
static void assert_plain(const struct json *m)
{
	if (!tj_bool(m, "result.isError")) {
		ck_assert_str_eq(tj_str(m, "result.structuredContent.content"), "hi");
		return;
	}
	ck_assert_msg(str_eq(tj_str(m, "result.structuredContent.error.kind"), "transient") &&
		      tj_bool(m, "result.structuredContent.error.restart"), "%s", tj_text(m));
}

/*
 * A host through the bridge, the daemon restarted under load (SIGTERM, as
 * systemctl restart does): plain calls, keyed calls, a task and a
 * background process in flight or just sent. Every request gets exactly
 * one answer; each keyed call runs once (asked again, it is replayed);
 * the task's result arrives; the background process ended with the daemon
 * (nothing left running). Then the daemon is killed (SIGKILL) with a keyed
 * call running: the bridge sends it again to the next daemon, which never
 * runs it a second time.
 */
START_TEST(restart_drill)
{
	struct redis_server rs = { 0 };
	_cleanup_free_ char *store = start_redis(&rs, "drill:", ",\"lease_ms\":1000");
	if (!store)
		return;
	_cleanup_free_ char *cfg = xasprintf("{\"confirmation\":{\"default\":{\"execute\":\"auto\"}},"
					     "\"limits\":{\"session_resume_s\":60,\"session_concurrency\":16}%s}", store);
	struct tcd d;
	tcd_start(&d, cfg);
	tcd_put(&d, "hello.txt", "hi");
	_cleanup_free_ char *runs = tcd_ws_path(&d, "runs.log");
	struct host h;
	const char *args[] = { "mcp", "-s", d.sock, "--reconnect-s", "60", NULL };
	host_start(&h, args);
	host_sendf(&h, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{" INIT_PARAMS
		   ",\"capabilities\":{}}}");
	host_answer(&h, 1, 10000);
	host_send(&h, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}");

	/* A background process, and a task. */
	host_call(&h, 2, "shell", "{\"command\":\"echo $$ > bg.pid; echo started; exec sleep 300\","
		  "\"background\":true,\"until\":\"started\",\"yield_ms\":30000}", NULL);
	const struct json *m = host_answer(&h, 2, 30000);
	ck_assert_msg(tj_bool(m, "result.structuredContent.running"), "%s", tj_text(m));
	_cleanup_free_ char *bgfile = tcd_ws_path(&d, "bg.pid");
	_cleanup_free_ char *bgpid = tcd_read(&d, bgfile, NULL);
	pid_t bg = (pid_t)atoi(bgpid);
	ck_assert_int_gt(bg, 1);
	host_send(&h, "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"tools/call\",\"params\":{\"name\":\"shell\","
		      "\"arguments\":{\"command\":\"sleep 1; echo task-done\"},\"task\":{\"ttl\":60000}}}");
	m = host_answer(&h, 3, 10000);
	_cleanup_free_ char *task = tj_quote(tj_str(m, "result.task.taskId"));
	host_sendf(&h, "{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"tasks/result\",\"params\":{\"taskId\":%s}}", task);

	/* Load: keyed and plain calls, half before the stop, half after. */
	int next = 100;
	for (int k = 0; k < DRILL_KEYED / 2; k++)
		drill_keyed(&h, 10 + k, k, 5);
	for (int i = 0; i < DRILL_PLAIN / 2; i++)
		host_call(&h, next++, "read_file", "{\"path\":\"hello.txt\"}", NULL);
	ck_assert(tc_wait_until(lines_equal(&d, runs, "k0") == 1, tc_wait_scaled(10000)));
	tcd_kill(&d, SIGTERM);
	for (int k = DRILL_KEYED / 2; k < DRILL_KEYED; k++)
		drill_keyed(&h, 10 + k, k, 5);
	for (int i = 0; i < DRILL_PLAIN / 2; i++)
		host_call(&h, next++, "read_file", "{\"path\":\"hello.txt\"}", NULL);
	ck_assert_int_eq(tcd_wait_exit(&d, 15000), 0);
	tcd_spawn(&d, NULL);
	ck_assert_int_eq(tcd_wait_socket(&d, d.sock, 10000), 0);

	/* Every request answered once. */
	for (int k = 0; k < DRILL_KEYED; k++) {
		m = host_answer(&h, 10 + k, 30000);
		char want[16];
		snprintf(want, sizeof(want), "k%d\n", k);
		ck_assert_msg(!tj_bool(m, "result.isError") && str_eq(tj_str(m, "result.structuredContent.stdout"), want),
			      "k%d: %s", k, tj_text(m));
	}
	for (int id = 100; id < next; id++)
		assert_plain(host_answer(&h, id, 30000));
	m = host_answer(&h, 4, 30000);
	ck_assert_msg(str_eq(tj_str(m, "result.structuredContent.stdout"), "task-done\n"), "%s", tj_text(m));
	host_pump(&h, 200);
	for (int id = 1; id < next; id++) {
		char idt[16];
		snprintf(idt, sizeof(idt), "%d", id);
		ck_assert_msg(!host_wait(&h, idt, NULL, 0), "a second answer to %d", id);
	}
	/* Each keyed call ran once; asked again, it is replayed. */
	for (int k = 0; k < DRILL_KEYED; k++) {
		char line[8];
		snprintf(line, sizeof(line), "k%d", k);
		ck_assert_int_eq(lines_equal(&d, runs, line), 1);
		drill_keyed(&h, 30 + k, k, 5);
		m = host_answer(&h, 30 + k, 30000);
		_cleanup_free_ char *text = tj_text(m);
		ck_assert_msg(strstr(text, "\"toolcalld/replayed\":true"), "k%d not replayed: %s", k, text);
		ck_assert_int_eq(lines_equal(&d, runs, line), 1);
	}
	/* The background process ended with the daemon, its tree with it;
	 * the next daemon lists none. */
	ck_assert(tc_wait_until(kill(bg, 0) < 0 && errno == ESRCH, tc_wait_scaled(10000)));
	host_call(&h, 40, "process_list", "{}", NULL);
	ck_assert_int_eq(tj_len(host_answer(&h, 40, 10000), "result.structuredContent.processes"), 0);

	/* Killed with a keyed call running: the bridge sends it again; the
	 * next daemon does not run it again (the dead daemon's claim lapses:
	 * its outcome is unknown), and a plain call in flight is answered
	 * transient by the bridge. */
	drill_keyed(&h, 50, 7, 30);
	host_call(&h, 51, "shell", "{\"command\":\"sleep 30\"}", NULL);
	ck_assert(tc_wait_until(lines_equal(&d, runs, "k7") == 1, tc_wait_scaled(10000)));
	ck_assert(tcd_wait_stat(&d, "result.running", 2, 10000));
	tcd_kill(&d, SIGKILL);
	ck_assert_int_ge(tcd_wait_exit(&d, 10000), 0);
	m = host_answer(&h, 51, 10000);
	ck_assert_str_eq(tj_str(m, "result.structuredContent.error.kind"), "transient");
	ck_assert(tj_bool(m, "result.structuredContent.error.restart"));
	tcd_spawn(&d, NULL);
	ck_assert_int_eq(tcd_wait_socket(&d, d.sock, 10000), 0);
	m = host_answer(&h, 50, 30000);
	ck_assert_msg(tj_bool(m, "result.isError") &&
		      str_eq(tj_str(m, "result.structuredContent.error.outcome"), "unknown"), "%s", tj_text(m));
	ck_assert_int_eq(lines_equal(&d, runs, "k7"), 1);

	ck_assert(!h.out_eof);
	ck_assert_int_eq(host_end(&h, true, 10000), 0);
	ck_assert_msg(!strstr(host_stderr(&h), "giving up"), "%s", host_stderr(&h));
	host_free(&h);
	ck_assert_int_eq(tcd_stop(&d), 0);
	tcd_free(&d);
	redis_server_free(&rs);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("restart");
	TCase *tc = tcase_create("restart");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, stop_ends_calls_transient_without_a_store);
	tcase_add_test(tc, stop_ends_calls_transient_with_redis);
	tcase_add_test(tc, task_stopped_by_a_stop_is_cancelled);
	tcase_add_test(tc, task_stopped_through_the_bridge);
	tcase_add_test(tc, session_goes_on_across_a_restart_with_redis);
	tcase_add_test(tc, session_goes_on_across_a_dropped_connection);
	tcase_add_test(tc, keyed_call_sent_again_only_where_its_key_is_known);
	tcase_add_test(tc, task_lost_without_a_store_is_transient);
	tcase_add_test(tc, batch_in_flight_is_answered_after_a_crash);
	tcase_add_test(tc, batch_cut_short_by_a_stop);
	tcase_add_test(tc, budget_goes_on_across_a_restart_without_a_store);
	tcase_add_test(tc, budget_goes_on_across_a_crash_with_redis);
	tcase_add_test(tc, initialize_unknown_id_with_redis);
	tcase_add_test(tc, restart_drill);
	suite_add_tcase(s, tc);
	return run_suite(s);
}
