/* SPDX-License-Identifier: MIT */
/*
 * Network through the daemon (sandbox network "proxy"), black box with
 * the real daemon and no internet: an origin HTTP server and a TCP echo
 * listen on a loopback address of the host (127.0.0.2), which the
 * sandboxed child cannot reach itself (its namespace has loopback only)
 * and reaches through the daemon's proxy by names that network.hosts
 * maps there (allow_private lets 127.0.0.2 through): HTTP_PROXY, a
 * CONNECT tunnel, SOCKS5 through ALL_PROXY; a denied host refused with a
 * 403 naming the rule and a note in the result; the metadata address
 * refused; "ask" answered through confirmations/resolve and by an
 * approver, always_allow kept for the session (and across a restart with
 * Redis as the store); audit lines and events
 * with their fields; network true unchanged; a child as uid 65534; a
 * background process keeps its namespace and proxy while it runs, an MCP
 * server too; elicitation; a tool file's hosts; the policy reloaded; the
 * bounds of a call (connections, bytes, questions); a daemon that is not
 * root.
 * This file is long because every point of CONTRACT §20 has its case here, sharing the servers and the daemon's setup.
 */
#include <check.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <arpa/inet.h>
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include "tests/integ/harness.h"
#include "tests/unit/check_main.h"
#include "tests/unit/redis_server.h"

#define ORIGIN_BODY "hello from the origin\n"

/* --- the origin and the echo, on 127.0.0.2 ---------------------------------- */

static int origin_fd = -1, echo_fd = -1;
static int origin_port, echo_port;
static pthread_t server_thread;
static int stop_pipe[2] = { -1, -1 };
static pthread_mutex_t seen_lock = PTHREAD_MUTEX_INITIALIZER;
static char last_request[4096];		/* the origin's last request head */

static int listen_at(const char *addr, int *ret_port)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	int one = 1;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	struct sockaddr_in a = { .sin_family = AF_INET };
	inet_pton(AF_INET, addr, &a.sin_addr);
	if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(fd, 64) < 0) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	socklen_t len = sizeof(a);
	getsockname(fd, (struct sockaddr *)&a, &len);
	*ret_port = ntohs(a.sin_port);
	return fd;
}

/* One origin connection: reads the request head, answers with the body. */
static void *origin_conn(void *arg)
{
	int fd = (int)(intptr_t)arg;
	char buf[4096];
	size_t n = 0;
	while (n < sizeof(buf) - 1) {
		ssize_t k = read(fd, buf + n, sizeof(buf) - 1 - n);
		if (k <= 0)
			break;
		n += (size_t)k;
		buf[n] = '\0';
		if (strstr(buf, "\r\n\r\n"))
			break;
	}
	buf[n] = '\0';
	pthread_mutex_lock(&seen_lock);
	snprintf(last_request, sizeof(last_request), "%s", buf);
	pthread_mutex_unlock(&seen_lock);
	char resp[256];
	int len = snprintf(resp, sizeof(resp), "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: %zu\r\n"
			   "Connection: close\r\n\r\n%s", strlen(ORIGIN_BODY), ORIGIN_BODY);
	(void)!write(fd, resp, (size_t)len);
	close(fd);
	return NULL;
}

/* One echo connection: writes back what it reads until the end. */
static void *echo_conn(void *arg)
{
	int fd = (int)(intptr_t)arg;
	char buf[4096];
	ssize_t k;
	while ((k = read(fd, buf, sizeof(buf))) > 0)
		if (write(fd, buf, (size_t)k) != k)
			break;
	close(fd);
	return NULL;
}

static void *servers(void *arg)
{
	(void)arg;
	for (;;) {
		struct pollfd p[3] = { { origin_fd, POLLIN, 0 }, { echo_fd, POLLIN, 0 }, { stop_pipe[0], POLLIN, 0 } };
		if (poll(p, 3, -1) < 0)
			continue;
		if (p[2].revents)
			return NULL;
		for (int i = 0; i < 2; i++) {
			if (!p[i].revents)
				continue;
			int c = accept4(p[i].fd, NULL, NULL, SOCK_CLOEXEC);
			if (c < 0)
				continue;
			pthread_t t;
			if (pthread_create(&t, NULL, i == 0 ? origin_conn : echo_conn, (void *)(intptr_t)c) == 0)
				pthread_detach(t);
			else
				close(c);
		}
	}
}

/* Starts the servers; false (with why) when 127.0.0.2 is not usable. */
static bool servers_start(const char **why)
{
	origin_fd = listen_at("127.0.0.2", &origin_port);
	echo_fd = listen_at("127.0.0.2", &echo_port);
	if (origin_fd < 0 || echo_fd < 0) {
		*why = "cannot listen on 127.0.0.2";
		return false;
	}
	ck_assert_int_eq(pipe2(stop_pipe, O_CLOEXEC), 0);
	ck_assert_int_eq(pthread_create(&server_thread, NULL, servers, NULL), 0);
	return true;
}

static void servers_stop(void)
{
	(void)!write(stop_pipe[1], "x", 1);
	pthread_join(server_thread, NULL);
	close(stop_pipe[0]);
	close(stop_pipe[1]);
	close(origin_fd);
	close(echo_fd);
	origin_fd = echo_fd = -1;
}

/* --- the daemon ------------------------------------------------------------------ */

#define AUTO_WITH(more) "\"socket_mode\":\"0666\",\"audit_log\":\"@DIR@/audit.log\",\"audit_fsync_ms\":50," \
	     "\"confirmation\":{\"default\":{\"write\":\"auto\",\"execute\":\"auto\",\"network\":\"auto\"}" more "}"
#define AUTO AUTO_WITH("")
/* Confirmations wait for an approver that comes late (set before start()). */
static bool wait_for_approver;

/* Skips unless this machine can run these tests: the kernel sandboxes,
 * the daemon is root (a network namespace per call), curl and socat are
 * there, and 127.0.0.2 can be listened on. */
static const char *cannot_run(void)
{
	if (geteuid() != 0)
		return "a network namespace per call needs a root daemon";
	if (access("/usr/bin/curl", X_OK) < 0 || access("/usr/bin/socat", X_OK) < 0)
		return "needs /usr/bin/curl and /usr/bin/socat";
	const char *why = NULL;
	if (!servers_start(&why))
		return why;
	return NULL;
}

#define NEED_NETWORK()                                                        \
	do {                                                                  \
		TC_SKIP_UNDER_VALGRIND("children run there without the sandbox"); \
		const char *why_ = cannot_run();                              \
		if (why_)                                                     \
			TC_SKIP("%s", why_);                                  \
	} while (0)

/* Starts a daemon whose sandbox network is "proxy", with the policy
 * members given (JSON members text) after the hosts and allow_private
 * every test needs, and the extra top-level members. */
static void start(struct tcd *d, const char *policy, const char *extra)
{
	char *cfg = xasprintf("{%s,\"sandbox\":{\"network\":\"proxy\"},"
			      "\"network\":{\"hosts\":{\"origin.test\":\"127.0.0.2\",\"echo.test\":\"127.0.0.2\","
			      "\"ask.test\":\"127.0.0.2\",\"evil.test\":\"127.0.0.2\",\"meta.test\":\"169.254.169.254\"},"
			      "\"allow_private\":[\"127.0.0.2/32\"]%s%s}%s%s}",
			      wait_for_approver ? AUTO_WITH(",\"no_approver\":\"wait\"") : AUTO, policy && *policy ? "," : "", policy ? policy : "", extra && *extra ? "," : "",
			      extra ? extra : "");
	tcd_start(d, cfg);
	free(cfg);
	tcd_open_to_all(d);
}

/* The text of v for a message (kept until the next call). */
static const char *dump(const struct json *v)
{
	static char *last;
	free(last);
	last = tj_text(v);
	return last;
}

static const char *out(const struct json *r)
{
	const char *s = tj_str(r, "result.structuredContent.stdout");
	ck_assert_msg(s, "no stdout in %s", dump(r));
	return s;
}

static const char *text(const struct json *r)
{
	const char *s = tj_str(r, "result.content.0.text");
	ck_assert_msg(s, "no text in %s", dump(r));
	return s;
}

/* The audit line of type network holding needle, parsed (owned by c). */
static const struct json *audit_net(struct tcc *c, const struct tcd *d, const char *needle)
{
	_cleanup_free_ char *path = xasprintf("%s/audit.log", d->dir);
	_cleanup_free_ char *all = tcd_read(d, path, NULL);
	for (char *line = all, *nl; line && *line; line = nl + 1) {
		nl = strchr(line, '\n');
		if (!nl)
			break;
		*nl = '\0';
		if (strstr(line, "\"type\":\"network\"") && strstr(line, needle))
			return tcc_parse(c, line, strlen(line));
	}
	return NULL;
}

static const struct json *wait_audit_net(struct tcc *c, const struct tcd *d, const char *needle)
{
	const struct json *l = NULL;
	tc_wait_until((l = audit_net(c, d, needle)) != NULL, 5000);
	ck_assert_msg(l, "no network audit line with %s", needle);
	return l;
}

static struct tcc *subscriber(struct tcd *d, const char *types)
{
	struct tcc *c = tcc_connect(d);
	tc_assert_ok(tcc_request(c, "events/subscribe", tcc_fmt(c, "{\"types\":%s}", types)));
	return c;
}

static void stop(struct tcd *d)
{
	tcd_finish(d);
	servers_stop();
}

/* Sends a shell call of command without waiting for it; returns its id. */
static int64_t send_shell(struct tcc *c, const char *command)
{
	char *q = tj_quote(command);
	int64_t id = tcc_send_request(c, "tools/call", tcc_fmt(c, "{\"name\":\"shell\",\"arguments\":{\"command\":%s}}", q));
	free(q);
	return id;
}

/* The response to the call id, which must come within 30 s. */
static const struct json *answer(struct tcc *c, int64_t id)
{
	const struct json *r = tcc_wait_id(c, tcc_fmt(c, "%lld", (long long)id), 30000);
	ck_assert_msg(r, "no answer to call %lld", (long long)id);
	return r;
}

/* Answers the question of the event e (a tool.confirmation_requested's
 * params) with decision, as the approver ap; returns the response. */
static const struct json *resolve(struct tcc *ap, const struct json *e, const char *decision)
{
	char *rid = tj_quote(tj_str(e, "requestId"));
	const struct json *r = tcc_request(ap, "confirmations/resolve",
					   tcc_fmt(ap, "{\"requestId\":%s,\"decision\":\"%s\"}", rid, decision));
	free(rid);
	return r;
}

/* --- the tests -------------------------------------------------------------------- */

/* HTTP_PROXY, a CONNECT tunnel and SOCKS5 reach the origin and the echo
 * by name; the child cannot reach them itself; every connection is
 * audited and told as an event, with its fields. */
START_TEST(proxy_reaches_allowed_hosts)
{
	NEED_NETWORK();
	struct tcd d;
	start(&d, "\"allow\":[\"origin.test\",\"echo.test\"]", NULL);
	struct tcc *ev = subscriber(&d, "[\"network.*\"]");
	struct tcc *c = tcc_connect(&d);

	/* Plain HTTP through HTTP_PROXY (curl reads http_proxy). */
	const struct json *r = tcc_shell(c, tcc_fmt(c, "curl -sS -m 20 -H 'Proxy-Connection: keep-alive' "
					     "http://origin.test:%d/hello", origin_port));
	tc_assert_ok(r);
	ck_assert_msg(str_eq(out(r), ORIGIN_BODY), "%s", dump(r));
	ck_assert_str_eq(tj_str(r, "result.structuredContent.sandbox.network"), "proxy");
	pthread_mutex_lock(&seen_lock);
	/* Forwarded in origin form, the proxy's hop-by-hop header gone. */
	ck_assert_msg(strncmp(last_request, "GET /hello HTTP/1.1\r\n", 21) == 0, "%s", last_request);
	ck_assert_msg(!strcasestr(last_request, "Proxy-Connection"), "%s", last_request);
	pthread_mutex_unlock(&seen_lock);

	const struct json *e = tcc_wait_event(ev, "network.connect", 5000);
	ck_assert_ptr_nonnull(e);
	ck_assert_str_eq(tj_str(e, "host"), "origin.test");
	ck_assert_int_eq(tj_int(e, "port"), origin_port);
	ck_assert_str_eq(tj_str(e, "address"), "127.0.0.2");
	ck_assert_str_eq(tj_str(e, "decision"), "allow");
	ck_assert_str_eq(tj_str(e, "rule"), "allow:origin.test");
	ck_assert_str_eq(tj_str(e, "tool"), "shell");
	ck_assert_int_eq(tj_int(e, "uid"), 0);
	ck_assert_int_gt(tj_int(e, "bytes_down"), (int64_t)strlen(ORIGIN_BODY));
	ck_assert_int_gt(tj_int(e, "bytes_up"), 0);
	ck_assert(tj_has(e, "duration_ms"));
	ck_assert_ptr_nonnull(tj_str(e, "callId"));

	const struct json *l = wait_audit_net(c, &d, "\"host\":\"origin.test\"");
	ck_assert_int_eq(tj_int(l, "uid"), 0);
	ck_assert_ptr_nonnull(tj_str(l, "session"));
	ck_assert_str_eq(tj_str(l, "callId"), tj_str(e, "callId"));
	ck_assert_str_eq(tj_str(l, "tool"), "shell");
	ck_assert_int_eq(tj_int(l, "port"), origin_port);
	ck_assert_str_eq(tj_str(l, "address"), "127.0.0.2");
	ck_assert_str_eq(tj_str(l, "decision"), "allow");
	ck_assert_str_eq(tj_str(l, "rule"), "allow:origin.test");
	ck_assert_int_eq(tj_int(l, "bytes_down"), tj_int(e, "bytes_down"));
	ck_assert_int_eq(tj_int(l, "bytes_up"), tj_int(e, "bytes_up"));
	ck_assert(tj_has(l, "duration_ms"));

	/* A CONNECT tunnel to the echo. */
	r = tcc_shell(c, tcc_fmt(c, "echo ping-through-tunnel | socat -t 5 - PROXY:127.0.0.1:echo.test:%d,proxyport=3128",
			  echo_port));
	tc_assert_ok(r);
	ck_assert_msg(str_eq(out(r), "ping-through-tunnel\n"), "%s", dump(r));

	/* The child itself reaches nothing but its own loopback. */
	r = tcc_shell(c, tcc_fmt(c, "curl -sS --noproxy '*' -m 5 http://127.0.0.2:%d/ || echo unreachable", origin_port));
	tc_assert_ok(r);
	ck_assert_msg(strstr(out(r), "unreachable"), "%s", dump(r));
	ck_assert_msg(!strstr(out(r), ORIGIN_BODY), "%s", dump(r));

	tcc_close(ev);
	tcc_close(c);
	stop(&d);
}
END_TEST

/* SOCKS5 with the name resolved by the proxy: ALL_PROXY (socks5h). */
START_TEST(socks5_through_all_proxy)
{
	NEED_NETWORK();
	struct tcd d;
	start(&d, "\"allow\":[\"origin.test\"]", NULL);
	struct tcc *c = tcc_connect(&d);
	const struct json *r = tcc_shell(c, tcc_fmt(c, "env -u http_proxy -u HTTP_PROXY curl -sS -m 20 http://origin.test:%d/socks",
					     origin_port));
	tc_assert_ok(r);
	ck_assert_msg(str_eq(out(r), ORIGIN_BODY), "%s", dump(r));
	const struct json *l = wait_audit_net(c, &d, "\"protocol\":\"socks5\"");
	ck_assert_str_eq(tj_str(l, "host"), "origin.test");
	ck_assert_str_eq(tj_str(l, "decision"), "allow");
	/* A refused destination is a SOCKS failure. */
	r = tcc_shell(c, "env -u http_proxy -u HTTP_PROXY curl -sS -m 20 http://elsewhere.test/ || echo refused");
	ck_assert_msg(strstr(out(r), "refused") && strstr(text(r), "elsewhere.test:80"), "%s", dump(r));
	tcc_close(c);
	stop(&d);
}
END_TEST

/* A denied host and the metadata address: a 403 naming the rule, and
 * the result's note naming host, port and rule, whatever the exit
 * status; network.refused told. */
START_TEST(proxy_refuses_with_the_rule)
{
	NEED_NETWORK();
	struct tcd d;
	start(&d, "\"allow\":[\"*.test\",\"localhost\"],\"deny\":[\"evil.test\"]", NULL);
	struct tcc *ev = subscriber(&d, "[\"network.refused\"]");
	struct tcc *c = tcc_connect(&d);

	const struct json *r = tcc_shell(c, "curl -sS -m 20 -w '\\n%{http_code}\\n' http://evil.test/x");
	tc_assert_ok(r);
	ck_assert(!tj_bool(r, "result.isError"));
	ck_assert_msg(strstr(out(r), "deny:evil.test") && strstr(out(r), "\n403\n"), "%s", dump(r));
	ck_assert_msg(strstr(text(r), "evil.test:80") && strstr(text(r), "deny:evil.test"), "%s", text(r));
	const struct json *e = tcc_wait_event(ev, "network.refused", 5000);
	ck_assert_ptr_nonnull(e);
	ck_assert_str_eq(tj_str(e, "host"), "evil.test");
	ck_assert_int_eq(tj_int(e, "port"), 80);
	ck_assert_str_eq(tj_str(e, "decision"), "deny");
	ck_assert_str_eq(tj_str(e, "rule"), "deny:evil.test");
	const struct json *l = wait_audit_net(c, &d, "\"host\":\"evil.test\"");
	ck_assert_str_eq(tj_str(l, "decision"), "deny");

	/* The cloud metadata address, by literal and by a name leading there. */
	r = tcc_shell(c, "curl -s -m 20 -w '\\n%{http_code}\\n' http://169.254.169.254/latest/meta-data/; "
		  "curl -s -m 20 -o /dev/null -w '%{http_code}\\n' http://meta.test/; exit 3");
	tc_assert_ok(r);
	ck_assert(tj_bool(r, "result.isError"));
	ck_assert_msg(strstr(out(r), "\n403\n403\n"), "%s", dump(r));
	ck_assert_msg(strstr(text(r), "169.254.169.254:80") && strstr(text(r), "private:169.254.169.254"), "%s",
		      text(r));
	ck_assert_msg(strstr(text(r), "meta.test:80"), "%s", text(r));

	/* A name the policy allows that the daemon's resolver (not the hosts
	 * map) turns into a loopback address is refused after resolution
	 * (--noproxy '' since NO_PROXY names localhost). */
	r = tcc_shell(c, "curl -s -m 20 --noproxy '' -w '\\n%{http_code}\\n' http://localhost:9/");
	tc_assert_ok(r);
	ck_assert_msg(strstr(out(r), "\n403\n") && strstr(out(r), "private:"), "%s", dump(r));
	ck_assert_msg(strstr(text(r), "localhost:9") && strstr(text(r), "private:"), "%s", text(r));

	tcc_close(ev);
	tcc_close(c);
	stop(&d);
}
END_TEST

/* "unknown": "ask": the connection waits for an answer given through
 * confirmations/resolve by an approver; always_allow holds for the
 * session; deny refuses; nobody to ask refuses at once. */
START_TEST(ask_is_a_confirmation)
{
	NEED_NETWORK();
	struct tcd d;
	start(&d, "\"unknown\":\"ask\"", NULL);
	struct tcc *ap = subscriber(&d, "[\"tool.confirmation_requested\",\"tool.confirmation_resolved\"]");
	struct tcc *c = tcc_connect(&d);
	ck_assert_ptr_nonnull(tcc_initialize(c, NULL));
	const char *cmd = tcc_fmt(c, "curl -sS -m 60 http://ask.test:%d/asked", origin_port);
	int64_t id = send_shell(c, cmd);
	const struct json *e = tcc_wait_event(ap, "tool.confirmation_requested", 20000);
	ck_assert_ptr_nonnull(e);
	ck_assert_str_eq(tj_str(e, "kind"), "network.connect");
	ck_assert_str_eq(tj_str(e, "host"), "ask.test");
	ck_assert_int_eq(tj_int(e, "port"), origin_port);
	ck_assert_str_eq(tj_str(e, "tool"), "shell");
	const struct json *r = resolve(ap, e, "always_allow");
	tc_assert_ok(r);
	ck_assert(tj_bool(r, "result.accepted"));
	r = answer(c, id);
	ck_assert_msg(str_eq(out(r), ORIGIN_BODY), "%s", dump(r));
	/* A second answer learns the first. */
	r = resolve(ap, e, "deny");
	tc_assert_ok(r);
	ck_assert(!tj_bool(r, "result.accepted"));
	ck_assert_str_eq(tj_str(r, "result.decision"), "always_allow");
	ck_assert_ptr_nonnull(wait_audit_net(c, &d, "\"rule\":\"ask:always_allow\""));

	/* Remembered for the session: not asked again. */
	tcc_clear_queue(ap);
	r = tcc_shell(c, cmd);
	ck_assert_msg(str_eq(out(r), ORIGIN_BODY), "%s", dump(r));
	ck_assert(tcc_quiet(ap, 200));

	/* Another port is another question; denied, it is refused. */
	id = send_shell(c, tcc_fmt(c, "curl -s -m 60 -w '\\n%%{http_code}\\n' http://ask.test:%d/", echo_port));
	e = tcc_wait_event(ap, "tool.confirmation_requested", 20000);
	ck_assert_ptr_nonnull(e);
	ck_assert_int_eq(tj_int(e, "port"), echo_port);
	tc_assert_ok(resolve(ap, e, "deny"));
	r = answer(c, id);
	ck_assert_msg(strstr(out(r), "\n403\n") && strstr(text(r), "ask:deny"), "%s", dump(r));

	/* Nobody to ask: refused at once. */
	tcc_close(ap);
	r = tcc_shell(c, tcc_fmt(c, "curl -s -m 60 -o /dev/null -w '%%{http_code}\\n' http://ask.test:%d/", echo_port));
	ck_assert_msg(str_eq(out(r), "403\n") && strstr(text(r), "ask:no approver"), "%s", dump(r));

	tcc_close(c);
	stop(&d);
}
END_TEST

/* An always_allow answer for a host and port outlives a restart: the
 * session's record in Redis carries it, and the next daemon, taking the
 * session back, does not ask again; another port is still asked. */
START_TEST(ask_always_allow_survives_a_restart)
{
	NEED_NETWORK();
	const char *why;
	if (!redis_server_available(&why))
		TC_SKIP("%s", why);
	struct redis_server rs = { 0 };
	redis_server_start(&rs);
	char *extra = xasprintf("\"limits\":{\"session_resume_s\":60},"
				"\"store\":{\"kind\":\"redis\",\"address\":\"unix:%s\",\"prefix\":\"n:\"}", rs.sock);
	struct tcd d;
	start(&d, "\"unknown\":\"ask\"", extra);
	free(extra);
	struct tcc *ap = subscriber(&d, "[\"tool.confirmation_requested\"]");
	struct tcc *c = tcc_connect(&d);
	const struct json *init = tcc_initialize(c, NULL);
	ck_assert_ptr_nonnull(init);
	char *sid = xstrdup(tj_str(init, "sessionId"));
	char *cmd = xasprintf("curl -sS -m 60 http://ask.test:%d/asked", origin_port);
	int64_t id = send_shell(c, cmd);
	const struct json *e = tcc_wait_event(ap, "tool.confirmation_requested", 20000);
	ck_assert_ptr_nonnull(e);
	ck_assert_int_eq(tj_int(e, "port"), origin_port);
	tc_assert_ok(resolve(ap, e, "always_allow"));
	const struct json *r = answer(c, id);
	ck_assert_msg(str_eq(out(r), ORIGIN_BODY), "%s", dump(r));
	tcc_close(c);
	tcc_close(ap);

	ck_assert_int_eq(tcd_stop(&d), 0);
	tcd_spawn(&d, NULL);
	ck_assert_int_eq(tcd_wait_socket(&d, d.sock, 10000), 0);
	ap = subscriber(&d, "[\"tool.confirmation_requested\"]");
	c = tcc_connect(&d);
	init = tcc_initialize(c, tcc_fmt(c, "\"sessionId\":\"%s\"", sid));
	ck_assert_ptr_nonnull(init);
	ck_assert_str_eq(tj_str(init, "sessionId"), sid);

	/* The same host and port: answered without a question. */
	id = send_shell(c, cmd);
	e = tcc_wait_event(ap, "tool.confirmation_requested", 5000);
	ck_assert_msg(!e, "asked again after the restart: %s", e ? dump(e) : "");
	r = answer(c, id);
	ck_assert_msg(str_eq(out(r), ORIGIN_BODY), "%s", dump(r));
	ck_assert(tcc_quiet(ap, 200));

	/* Another port of the same host is still asked. */
	id = send_shell(c, tcc_fmt(c, "curl -s -m 60 -w '\\n%%{http_code}\\n' http://ask.test:%d/", echo_port));
	e = tcc_wait_event(ap, "tool.confirmation_requested", 20000);
	ck_assert_ptr_nonnull(e);
	ck_assert_str_eq(tj_str(e, "host"), "ask.test");
	ck_assert_int_eq(tj_int(e, "port"), echo_port);
	tc_assert_ok(resolve(ap, e, "deny"));
	r = answer(c, id);
	ck_assert_msg(strstr(out(r), "\n403\n") && strstr(text(r), "ask:deny"), "%s", dump(r));

	free(cmd);
	free(sid);
	tcc_close(ap);
	tcc_close(c);
	stop(&d);
	redis_server_free(&rs);
}
END_TEST

/* Questions a session may have open are bounded as its confirmations
 * are (limits.session_confirmations): one more is refused at once. */
START_TEST(ask_questions_bounded)
{
	NEED_NETWORK();
	struct tcd d;
	start(&d, "\"unknown\":\"ask\"", "\"limits\":{\"session_confirmations\":1}");
	struct tcc *ap = subscriber(&d, "[\"tool.confirmation_requested\"]");
	struct tcc *c = tcc_connect(&d);
	ck_assert_ptr_nonnull(tcc_initialize(c, NULL));
	/* Two calls of one session: the first one's question is open... */
	int64_t first = send_shell(c, tcc_fmt(c, "curl -s -m 60 -w ' %%{http_code}\\n' http://ask.test:%d/", origin_port));
	const struct json *e = tcc_wait_event(ap, "tool.confirmation_requested", 20000);
	ck_assert_ptr_nonnull(e);
	/* ...so the second one's is refused at once. */
	const struct json *r = tcc_shell(c, tcc_fmt(c, "curl -s -m 60 -w ' %%{http_code}\\n' http://ask.test:%d/", echo_port));
	ck_assert_msg(strstr(out(r), "ask:too many questions") && strstr(out(r), " 403\n"), "%s", dump(r));
	ck_assert_msg(strstr(text(r), tcc_fmt(c, "ask.test:%d (rule ask:too many questions)", echo_port)), "%s", dump(r));
	tc_assert_ok(resolve(ap, e, "allow"));
	r = answer(c, first);
	ck_assert_msg(str_eq(out(r), ORIGIN_BODY " 200\n"), "%s", dump(r));
	tcc_close(ap);
	tcc_close(c);
	stop(&d);
}
END_TEST

/* A gauge's value in admin/metrics (-1 when absent). */
static int64_t metric(struct tcc *c, const char *name)
{
	const struct json *r = tcc_request(c, "admin/metrics", NULL);
	const char *text = tj_str(r, "result.text");
	_cleanup_free_ char *needle = xasprintf("\n%s ", name);
	const char *at = text ? strstr(text, needle) : NULL;
	return at ? strtoll(at + strlen(needle), NULL, 10) : -1;
}

/* Questions of one call are independent: two hosts asked at once, both
 * questions open together, answered in the opposite order, each
 * connection going on with its own answer; a second connection to a host
 * and port already asked about waits on that one question. */
START_TEST(asks_independent_and_shared)
{
	NEED_NETWORK();
	struct tcd d;
	start(&d, "\"unknown\":\"ask\"", NULL);
	struct tcc *ap = subscriber(&d, "[\"tool.confirmation_requested\"]");
	struct tcc *m = tcc_connect(&d);
	struct tcc *c = tcc_connect(&d);
	ck_assert_ptr_nonnull(tcc_initialize(c, NULL));
	int64_t id = send_shell(c, tcc_fmt(c, "for u in ask.test/a evil.test/b ask.test/c; do curl -s -m 60 -o /dev/null "
					   "-w \"$u %%{http_code}\\n\" http://${u%%/*}:%d/${u#*/} & done; wait", origin_port));
	/* Both asked before either is answered. */
	char *host[2], *rid[2];
	for (int i = 0; i < 2; i++) {
		const struct json *e = tcc_wait_event(ap, "tool.confirmation_requested", 20000);
		ck_assert_msg(e, "question %d never came", i + 1);
		ck_assert_str_eq(tj_str(e, "kind"), "network.connect");
		ck_assert_int_eq(tj_int(e, "port"), origin_port);
		host[i] = xstrdup(tj_str(e, "host"));
		rid[i] = tj_quote(tj_str(e, "requestId"));
	}
	ck_assert_msg(!str_eq(host[0], host[1]), "asked twice about %s", host[0]);
	/* The three connections wait on two questions. */
	int64_t waiting = 0, open = 0;
	tc_wait_until((waiting = metric(m, "toolcalld_network_asks_waiting")) == 3, 20000);
	ck_assert_int_eq(waiting, 3);
	open = metric(m, "toolcalld_network_questions");
	ck_assert_int_eq(open, 2);
	ck_assert(tcc_quiet(ap, 200));
	/* The later question answered first: its connections go on alone. */
	for (int i = 1; i >= 0; i--) {
		bool allow = str_eq(host[i], "ask.test");
		tc_assert_ok(tcc_request(ap, "confirmations/resolve", tcc_fmt(ap, "{\"requestId\":%s,\"decision\":\"%s\"}",
									     rid[i], allow ? "allow" : "deny")));
		_cleanup_free_ char *needle = xasprintf("\"host\":\"%s\"", host[i]);
		const struct json *l = wait_audit_net(m, &d, needle);
		ck_assert_str_eq(tj_str(l, "rule"), allow ? "ask:allow" : "ask:deny");
		if (i == 1) {
			ck_assert_int_eq(metric(m, "toolcalld_network_questions"), 1);
			_cleanup_free_ char *other = xasprintf("\"host\":\"%s\"", host[0]);
			ck_assert_ptr_null(audit_net(m, &d, other));
		}
	}
	const struct json *r = answer(c, id);
	ck_assert_msg(strstr(out(r), "ask.test/a 200\n") && strstr(out(r), "ask.test/c 200\n") &&
		      strstr(out(r), "evil.test/b 403\n"), "%s", dump(r));
	ck_assert_int_eq(metric(m, "toolcalld_network_asks_waiting"), 0);
	for (int i = 0; i < 2; i++) {
		free(host[i]);
		free(rid[i]);
	}
	tcc_close(ap);
	tcc_close(m);
	tcc_close(c);
	stop(&d);
}
END_TEST

/* A question nobody answers within confirmation.timeout_ms: refused,
 * and approvers told it timed out. */
START_TEST(ask_times_out)
{
	NEED_NETWORK();
	struct tcd d;
	start(&d, "\"unknown\":\"ask\"", NULL);
	/* The timeout, set in the config's confirmation section. */
	_cleanup_free_ char *conf = tcd_read(&d, d.config, NULL);
	char *at = strstr(conf, "\"confirmation\":{");
	ck_assert_ptr_nonnull(at);
	_cleanup_free_ char *with = xasprintf("%.*s\"confirmation\":{\"timeout_ms\":800,%s", (int)(at - conf), conf,
					      at + strlen("\"confirmation\":{"));
	tc_write_file_atomic(d.config, with, strlen(with));
	struct tcc *c = tcc_connect(&d);
	tc_assert_ok(tcc_reload(c));
	struct tcc *ap = subscriber(&d, "[\"tool.confirmation_requested\",\"tool.confirmation_resolved\"]");
	const struct json *r = tcc_shell(c, tcc_fmt(c, "curl -s -m 60 -w ' %%{http_code}\\n' http://ask.test:%d/", origin_port));
	ck_assert_msg(strstr(out(r), " 403\n") && strstr(text(r), "ask:timeout"), "%s", dump(r));
	ck_assert_ptr_nonnull(tcc_wait_event(ap, "tool.confirmation_requested", 5000));
	const struct json *e = tcc_wait_event(ap, "tool.confirmation_resolved", 5000);
	ck_assert_ptr_nonnull(e);
	ck_assert_str_eq(tj_str(e, "decision"), "timeout");
	tcc_close(ap);
	tcc_close(c);
	stop(&d);
}
END_TEST

/* The call's own client is asked through elicitation (MCP), naming the
 * host and port, and its answer lets the connection through. */
START_TEST(ask_through_elicitation)
{
	NEED_NETWORK();
	struct tcd d;
	start(&d, "\"unknown\":\"ask\"", NULL);
	struct tcc *c = tcc_connect(&d);
	tc_assert_ok(tcc_request(c, "initialize", "{\"protocolVersion\":\"2025-11-25\","
				 "\"capabilities\":{\"elicitation\":{\"form\":{}}},"
				 "\"clientInfo\":{\"name\":\"fake-host\",\"version\":\"1\"}}"));
	tcc_send(c, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}");
	int64_t id = send_shell(c, tcc_fmt(c, "curl -sS -m 60 http://ask.test:%d/elicited", origin_port));
	const struct json *rq = tcc_wait_daemon_request(c, "elicitation/create", 20000);
	ck_assert_msg(rq, "the daemon never asked the client");
	const char *msg = tj_str(rq, "params.message");
	ck_assert_msg(msg && strstr(msg, tcc_fmt(c, "connect to ask.test:%d", origin_port)), "%s", dump(rq));
	ck_assert_msg(str_has_prefix(tj_str(rq, "params._meta.toolcalld/requestId"), "nc-"), "%s", dump(rq));
	tcc_send(c, tcc_fmt(c, "{\"jsonrpc\":\"2.0\",\"id\":%s,\"result\":{\"action\":\"accept\","
			    "\"content\":{\"decision\":\"allow\"}}}", tcc_raw(c, tj(rq, "id"))));
	const struct json *r = answer(c, id);
	ck_assert_msg(str_eq(out(r), ORIGIN_BODY), "%s", dump(r));
	/* Declined: refused. */
	id = send_shell(c, tcc_fmt(c, "curl -s -m 60 -o /dev/null -w '%%{http_code}\\n' http://ask.test:%d/", echo_port));
	rq = tcc_wait_daemon_request(c, "elicitation/create", 20000);
	ck_assert_ptr_nonnull(rq);
	tcc_send(c, tcc_fmt(c, "{\"jsonrpc\":\"2.0\",\"id\":%s,\"result\":{\"action\":\"decline\"}}",
			    tcc_raw(c, tj(rq, "id"))));
	r = answer(c, id);
	ck_assert_msg(str_eq(out(r), "403\n") && strstr(text(r), "ask:deny"), "%s", dump(r));
	tcc_close(c);
	stop(&d);
}
END_TEST

/* Two hosts asked at once through elicitation: both questions reach the
 * client before either is answered, and the answers, given in the opposite
 * order, each let through or refuse their own connection. */
START_TEST(elicitations_answered_in_any_order)
{
	NEED_NETWORK();
	struct tcd d;
	start(&d, "\"unknown\":\"ask\"", NULL);
	struct tcc *m = tcc_connect(&d);
	struct tcc *c = tcc_connect(&d);
	tc_assert_ok(tcc_request(c, "initialize", "{\"protocolVersion\":\"2025-11-25\","
				 "\"capabilities\":{\"elicitation\":{\"form\":{}}},"
				 "\"clientInfo\":{\"name\":\"fake-host\",\"version\":\"1\"}}"));
	tcc_send(c, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}");
	int64_t id = send_shell(c, tcc_fmt(c, "for h in ask.test evil.test; do curl -s -m 60 -o /dev/null "
					   "-w \"$h %%{http_code}\\n\" http://$h:%d/ & done; wait", origin_port));
	char *rid[2], *host[2];
	for (int i = 0; i < 2; i++) {
		const struct json *rq = tcc_wait_daemon_request(c, "elicitation/create", 20000);
		ck_assert_msg(rq, "elicitation %d never came", i + 1);
		const char *msg = tj_str(rq, "params.message");
		ck_assert_ptr_nonnull(msg);
		host[i] = xstrdup(strstr(msg, "connect to ask.test") ? "ask.test" : "evil.test");
		rid[i] = xstrdup(tcc_raw(c, tj(rq, "id")));
	}
	ck_assert_msg(!str_eq(host[0], host[1]), "asked twice about %s", host[0]);
	for (int i = 1; i >= 0; i--) {
		bool allow = str_eq(host[i], "ask.test");
		tcc_send(c, allow ? tcc_fmt(c, "{\"jsonrpc\":\"2.0\",\"id\":%s,\"result\":{\"action\":\"accept\","
					    "\"content\":{\"decision\":\"allow\"}}}", rid[i])
				  : tcc_fmt(c, "{\"jsonrpc\":\"2.0\",\"id\":%s,\"result\":{\"action\":\"decline\"}}", rid[i]));
		_cleanup_free_ char *needle = xasprintf("\"host\":\"%s\"", host[i]);
		const struct json *l = wait_audit_net(m, &d, needle);
		ck_assert_str_eq(tj_str(l, "rule"), allow ? "ask:allow" : "ask:deny");
		if (i == 1) {
			_cleanup_free_ char *other = xasprintf("\"host\":\"%s\"", host[0]);
			ck_assert_ptr_null(audit_net(m, &d, other));
		}
	}
	const struct json *r = answer(c, id);
	ck_assert_msg(strstr(out(r), "ask.test 200\n") && strstr(out(r), "evil.test 403\n"), "%s", dump(r));
	for (int i = 0; i < 2; i++) {
		free(host[i]);
		free(rid[i]);
	}
	tcc_close(m);
	tcc_close(c);
	stop(&d);
}
END_TEST

/* A tool file's "network": {"allow": [...]} is "proxy" with its hosts
 * added for that tool alone; the metrics count per tool and decision. */
START_TEST(tool_file_adds_its_hosts)
{
	NEED_NETWORK();
	struct tcd d;
	char *cfg = xasprintf("{" AUTO ",\"network\":{\"hosts\":{\"origin.test\":\"127.0.0.2\"},"
			      "\"allow_private\":[\"127.0.0.2/32\"]}}");
	tcd_start(&d, cfg);
	free(cfg);
	tcd_write_tool(&d, "fetch.json", "{\"name\":\"fetch_origin\",\"kind\":\"command\",\"side_effects\":\"execute\","
				       "\"argv\":[\"/usr/bin/curl\",\"-s\",\"-m\",\"20\",\"--\",\"{{url}}\"],"
				       "\"input_schema\":{\"type\":\"object\",\"properties\":{\"url\":{\"type\":\"string\"}},"
				       "\"required\":[\"url\"]},\"network\":{\"allow\":[\"origin.test\"]}}");
	struct tcc *c = tcc_connect(&d);
	tc_assert_ok(tcc_reload(c));
	/* tools/list says how each reaches the network. */
	const struct json *tl = tcc_request(c, "tools/list", "{}");
	int seen = 0;
	for (long i = 0; i < tj_len(tl, "result.tools"); i++) {
		const struct json *t = tj(tl, tcc_fmt(c, "result.tools.%ld", i));
		const struct json *meta = json_get(json_get(t, "_meta"), "toolcalld/network");
		if (str_eq(tj_str(t, "name"), "fetch_origin"))
			seen += str_eq(json_str(meta), "proxy");
		else if (str_eq(tj_str(t, "name"), "shell"))
			seen += meta && meta->type == JSON_BOOL && !meta->u.b;
	}
	ck_assert_msg(seen == 2, "%s", dump(tl));
	const struct json *r = tcc_call(c, "fetch_origin", tcc_fmt(c, "{\"url\":\"http://origin.test:%d/tool\"}", origin_port));
	tc_assert_ok(r);
	ck_assert_msg(strstr(dump(r), "hello from the origin"), "%s", dump(r));
	r = tcc_call(c, "fetch_origin", "{\"url\":\"http://elsewhere.test/\"}");
	tc_assert_ok(r);
	ck_assert_msg(strstr(text(r), "[sandbox] The network proxy refused elsewhere.test:80 (rule unknown:deny)"), "%s",
		      dump(r));
	/* The config's sandbox network stays false for the others. */
	r = tcc_shell(c, tcc_fmt(c, "curl -sS -m 5 http://origin.test:%d/ || echo no-network", origin_port));
	ck_assert_msg(strstr(out(r), "no-network"), "%s", dump(r));
	r = tcc_request(c, "admin/metrics", "{}");
	const char *m = tj_str(r, "result.text");
	ck_assert_msg(m && strstr(m, "toolcalld_network_connections_total{tool=\"fetch_origin\",decision=\"allow\"} 1\n") &&
		      strstr(m, "toolcalld_network_connections_total{tool=\"fetch_origin\",decision=\"deny\"} 1\n"),
		      "%s", m ? m : dump(r));
	tcc_close(c);
	stop(&d);
}
END_TEST

/* The network section reloads: the next call gets the new policy. */
START_TEST(policy_reloads)
{
	NEED_NETWORK();
	struct tcd d;
	start(&d, "\"allow\":[\"nothing.test\"]", NULL);
	struct tcc *c = tcc_connect(&d);
	const char *cmd = tcc_fmt(c, "curl -s -m 20 -w '\\n%%{http_code}\\n' http://origin.test:%d/", origin_port);
	const struct json *r = tcc_shell(c, cmd);
	ck_assert_msg(strstr(out(r), "unknown:deny") && strstr(out(r), "\n403\n"), "%s", dump(r));
	_cleanup_free_ char *text = tcd_read(&d, d.config, NULL);
	char *at = strstr(text, "nothing.test");
	ck_assert_ptr_nonnull(at);
	memcpy(at, "origin.test\"", 12);	/* "nothing.test" is one byte longer: a space */
	at[12] = ' ';
	tc_write_file_atomic(d.config, text, strlen(text));
	tc_assert_ok(tcc_reload(c));
	r = tcc_shell(c, cmd);
	ck_assert_msg(str_eq(out(r), ORIGIN_BODY "\n200\n"), "%s", dump(r));
	tcc_close(c);
	stop(&d);
}
END_TEST

/* The same through toolcallctl approve, the approver a user runs. */
START_TEST(ask_through_toolcallctl_approve)
{
	NEED_NETWORK();
	struct tcd d;
	/* The question waits for the approver, which sees it when it comes. */
	wait_for_approver = true;
	start(&d, "\"unknown\":\"ask\"", NULL);
	wait_for_approver = false;
	/* toolcallctl approve answers "y" to the first question it sees. */
	char *sock = xasprintf("--socket=%s", d.sock);
	int in[2];
	ck_assert_int_eq(pipe(in), 0);
	pid_t pid = fork();
	if (pid == 0) {
		dup2(in[0], 0);
		close(in[1]);
		int null = open("/dev/null", O_WRONLY);
		dup2(null, 1);
		execl(tc_ctl_path(), "toolcallctl", sock, "approve", (char *)NULL);
		_exit(127);
	}
	close(in[0]);
	struct tcc *w = subscriber(&d, "[\"tool.confirmation_resolved\"]");
	ck_assert_int_eq(write(in[1], "y\n", 2), 2);
	struct tcc *c = tcc_connect(&d);
	const struct json *r = tcc_shell(c, tcc_fmt(c, "curl -sS -m 60 http://ask.test:%d/ctl", origin_port));
	ck_assert_msg(str_eq(out(r), ORIGIN_BODY), "%s", dump(r));
	const struct json *e = tcc_wait_event(w, "tool.confirmation_resolved", 5000);
	ck_assert_ptr_nonnull(e);
	ck_assert_str_eq(tj_str(e, "kind"), "network.connect");
	ck_assert_str_eq(tj_str(e, "decision"), "allow");
	close(in[1]);
	kill(pid, SIGTERM);
	waitpid(pid, NULL, 0);
	free(sock);
	tcc_close(w);
	tcc_close(c);
	stop(&d);
}
END_TEST

/* A peer of uid 65534: its child runs as it, through its own proxy,
 * audited with its uid. */
START_TEST(proxy_for_another_uid)
{
	struct passwd *pw = getpwnam("nobody");
	if (!pw)
		TC_SKIP("no user nobody");
	NEED_NETWORK();
	struct tcd d;
	start(&d, "\"allow\":[\"origin.test\"]", NULL);
	struct tcc *c = tcc_connect_as(&d, pw->pw_uid, pw->pw_gid);
	const struct json *r = tcc_shell(c, tcc_fmt(c, "id -u; curl -sS -m 20 http://origin.test:%d/nobody", origin_port));
	tc_assert_ok(r);
	char *want = xasprintf("%u\n%s", (unsigned)pw->pw_uid, ORIGIN_BODY);
	ck_assert_msg(str_eq(out(r), want), "%s", dump(r));
	free(want);
	const struct json *l = wait_audit_net(c, &d, "\"host\":\"origin.test\"");
	ck_assert_int_eq(tj_int(l, "uid"), pw->pw_uid);
	tcc_close(c);
	stop(&d);
}
END_TEST

/* network true stays the whole network, unfiltered, even with a network
 * section configured: no proxy in the environment, the host's loopback
 * reached directly. */
START_TEST(network_true_is_unchanged)
{
	NEED_NETWORK();
	struct tcd d;
	char *cfg = xasprintf("{" AUTO ",\"sandbox\":{\"network\":true},\"network\":{\"deny\":[\"*.test\"]}}");
	tcd_start(&d, cfg);
	free(cfg);
	struct tcc *c = tcc_connect(&d);
	const struct json *r = tcc_shell(c, tcc_fmt(c, "echo \"[$HTTP_PROXY$ALL_PROXY]\"; curl -sS -m 20 http://127.0.0.2:%d/direct",
					     origin_port));
	tc_assert_ok(r);
	ck_assert_msg(str_eq(out(r), "[]\n" ORIGIN_BODY), "%s", dump(r));
	ck_assert(tj_bool(r, "result.structuredContent.sandbox.network"));
	tcc_close(c);
	stop(&d);
}
END_TEST

/* A background process keeps its namespace and its proxy while it runs,
 * and the proxy's connections name the process. */
START_TEST(background_process_keeps_its_proxy)
{
	NEED_NETWORK();
	struct tcd d;
	start(&d, "\"allow\":[\"origin.test\"]", NULL);
	struct tcc *c = tcc_connect(&d);
	const char *cmd = tcc_fmt(c, "curl -s -m 20 -o /dev/null http://elsewhere.test/; sleep 1; "
				  "curl -sS -m 20 http://origin.test:%d/bg; sleep 300", origin_port);
	char *q = tj_quote(cmd);
	const struct json *r = tcc_call(c, "shell", tcc_fmt(c, "{\"command\":%s,\"background\":true,\"until\":\"origin\","
							  "\"yield_ms\":30000}", q));
	free(q);
	tc_assert_ok(r);
	const char *pid = tj_str(r, "result.structuredContent.process_id");
	ck_assert_ptr_nonnull(pid);
	ck_assert_msg(strstr(tj_str(r, "result.structuredContent.output"), ORIGIN_BODY), "%s", dump(r));
	/* What its proxy refused is told while it runs. */
	ck_assert_msg(strstr(text(r), "refused elsewhere.test:80 (rule unknown:deny)"), "%s", dump(r));
	const struct json *l = wait_audit_net(c, &d, "\"host\":\"origin.test\"");
	ck_assert_str_eq(tj_str(l, "processId"), pid);
	tc_assert_ok(tcc_call(c, "process_kill", tcc_fmt(c, "{\"process_id\":\"%s\"}", pid)));
	/* And once it ended. */
	const struct json *io = NULL;
	ck_assert(tc_wait_until((io = tcc_call(c, "process_io", tcc_fmt(c, "{\"process_id\":\"%s\"}", pid))) &&
				!tj_bool(io, "result.structuredContent.running"), 10000));
	ck_assert_msg(strstr(text(io), "refused elsewhere.test:80"), "%s", dump(io));
	tcc_close(c);
	stop(&d);
}
END_TEST

/* Hooks keep no network, whatever the sandbox's network: no proxy for
 * them (the hook says whether it sees one). */
START_TEST(hooks_get_no_proxy)
{
	TC_SKIP_UNDER_VALGRIND("children run there without the sandbox");
	struct tcd d;
	tcd_start(&d, "{\"sandbox\":{\"network\":\"proxy\"},\"hooks\":{\"pre_call\":[{\"match\":\"sh*\","
		      "\"command\":[\"/bin/sh\",\"@DIR@/hook.sh\"]}]}}");
	_cleanup_free_ char *path = xasprintf("%s/hook.sh", d.dir);
	/* In a namespace of its own it would see lo alone. */
	static const char script[] = "cat >/dev/null; if [ -n \"$HTTP_PROXY$ALL_PROXY\" ] || "
				     "[ \"$(tail -n +3 /proc/net/dev | wc -l)\" = 1 ]; then "
				     "echo '{\"decision\":\"deny\",\"reason\":\"the hook has a proxy\"}'; "
				     "else echo '{\"decision\":\"allow\"}'; fi\n";
	if (system("test \"$(tail -n +3 /proc/net/dev | wc -l)\" -gt 1") != 0)
		TC_SKIP("this host has lo alone: a namespace of its own would not show");
	tc_write_file_atomic(path, script, strlen(script));
	ck_assert_int_eq(chmod(path, 0644), 0);
	struct tcc *c = tcc_connect(&d);
	const struct json *r = tcc_shell(c, "echo ran");
	tc_assert_ok(r);
	ck_assert_msg(str_eq(out(r), "ran\n"), "%s", dump(r));
	tcc_close(c);
	tcd_finish(&d);
}
END_TEST

/* Bad settings are refused at start, naming the key. */
START_TEST(bad_network_settings_refused)
{
	struct tcd d;
	struct tcd_opts o = { .config = "{\"sandbox\":{\"network\":\"sometimes\"}}", .no_wait = true };
	tcd_start_opts(&d, &o);
	ck_assert_int_ne(tcd_wait_exit(&d, 10000), 0);
	char *log = tcd_log(&d);
	ck_assert_msg(strstr(log, "sandbox.network") && strstr(log, "\"proxy\""), "%s", log);
	free(log);
	tcd_free(&d);
	/* The network section's mistakes, each at its place. */
	struct tcd d1;
	struct tcd_opts o1 = { .config = "{\"network\":{\"allow\":[\"ok.example\",\"bad host\"],\"unknown\":\"maybe\"}}",
			       .no_wait = true };
	tcd_start_opts(&d1, &o1);
	ck_assert_int_ne(tcd_wait_exit(&d1, 10000), 0);
	log = tcd_log(&d1);
	ck_assert_msg(strstr(log, "config.json:1:") && strstr(log, "network.allow[1]") && strstr(log, "network.unknown"),
		      "%s", log);
	free(log);
	tcd_free(&d1);
	/* A tool file's network object is lib/net's policy. */
	struct tcd d2;
	tcd_start(&d2, "{}");
	tcd_write_tool(&d2, "t.json", "{\"name\":\"t\",\"kind\":\"command\",\"argv\":[\"true\"],"
				      "\"network\":{\"allow\":[\"registry.npmjs.org\"],\"bogus\":1}}");
	struct tcc *c = tcc_connect(&d2);
	const struct json *r = tcc_reload(c);
	ck_assert_msg(strstr(dump(r), "network"), "%s", dump(r));
	tcc_close(c);
	tcd_finish(&d2);
}
END_TEST

/* A tool's or provider's file adds hosts and narrows, and widens nothing
 * else: allow_private, hosts and unknown "ask" are the config's alone, each
 * refused with its key and place; allow, deny and unknown "deny" load. */
START_TEST(tool_file_cannot_widen_the_policy)
{
	struct tcd d;
	tcd_start(&d, "{}");
	struct tcc *c = tcc_connect(&d);
	tcd_write_tool(&d, "t.json", "{\"name\":\"t\",\"kind\":\"command\",\"argv\":[\"true\"],\"side_effects\":\"none\",\"network\":{"
				     "\"allow\":[\"registry.npmjs.org\"],\"allow_private\":[\"10.0.0.0/8\"],"
				     "\"hosts\":{\"registry.npmjs.org\":\"10.1.2.3\"},\"unknown\":\"ask\"}}");
	const struct json *r = tcc_reload(c);
	const char *msg = dump(r);
	ck_assert_msg(strstr(msg, "t.json:1:") && strstr(msg, "network.allow_private") && strstr(msg, "network.hosts") &&
		      strstr(msg, "network.unknown") && strstr(msg, "daemon's config alone"), "%s", msg);
	/* The same inside the tool's sandbox object, and in a provider's file. */
	tcd_write_tool(&d, "t.json", "{\"name\":\"t\",\"kind\":\"command\",\"argv\":[\"true\"],\"side_effects\":\"none\","
				     "\"sandbox\":{\"network\":{\"hosts\":{\"a.test\":\"127.0.0.1\"}}}}");
	r = tcc_reload(c);
	msg = dump(r);
	ck_assert_msg(strstr(msg, "sandbox.network.hosts") && strstr(msg, "daemon's config alone"), "%s", msg);
	tcd_write_tool(&d, "t.json", "{\"name\":\"t\",\"kind\":\"mcp\",\"command\":[\"/bin/true\"],\"prefix\":\"t_\",\"side_effects\":\"read\","
				     "\"network\":{\"allow\":[\"a.test\"],\"allow_private\":[\"0.0.0.0/0\"]}}");
	r = tcc_reload(c);
	msg = dump(r);
	ck_assert_msg(strstr(msg, "network.allow_private") && strstr(msg, "daemon's config alone"), "%s", msg);
	/* Adding hosts and narrowing load. */
	tcd_write_tool(&d, "t.json", "{\"name\":\"t\",\"kind\":\"command\",\"argv\":[\"true\"],\"side_effects\":\"none\",\"network\":{"
				     "\"allow\":[\"registry.npmjs.org\"],\"deny\":[\"*.evil.test\"],\"unknown\":\"deny\"}}");
	tc_assert_ok(tcc_reload(c));
	tcc_close(c);
	tcd_finish(&d);
}
END_TEST

/* limits.net_connections bounds a call's connections at once: one more
 * is refused (503) while a tunnel is open. */
START_TEST(connections_per_call_bounded)
{
	NEED_NETWORK();
	struct tcd d;
	start(&d, "\"allow\":[\"origin.test\",\"echo.test\"]", "\"limits\":{\"net_connections\":1}");
	struct tcc *c = tcc_connect(&d);
	/* A tunnel held open (its first bytes echoed back show it is up),
	 * then a second connection. */
	const struct json *r = tcc_shell(c, tcc_fmt(c,
		"{ echo up; sleep 20; } | socat -t 20 - PROXY:127.0.0.1:echo.test:%d,proxyport=3128 > tunnel & "
		"i=0; until grep -q up tunnel 2>/dev/null || [ $i -ge 400 ]; do sleep 0.05; i=$((i+1)); done; "
		"curl -s -m 20 -o /dev/null -w '%%{http_code}\\n' http://origin.test:%d/; kill %%1",
		echo_port, origin_port));
	tc_assert_ok(r);
	ck_assert_msg(strstr(out(r), "503\n"), "%s", dump(r));
	tcc_close(c);
	stop(&d);
}
END_TEST

/* Occurrences of needle in s. */
static int count_of(const char *s, const char *needle)
{
	int n = 0;
	for (const char *p = s; (p = strstr(p, needle)); p += strlen(needle))
		n++;
	return n;
}

/* A connection turned away by limits.net_connections is told in the
 * result's text: one [limit] line naming the limit and its value, with
 * how many were refused, whether the command then succeeded or failed;
 * a call that stayed under the limit has none. */
START_TEST(connection_limit_noted)
{
	NEED_NETWORK();
	struct tcd d;
	start(&d, "\"allow\":[\"origin.test\",\"echo.test\"]", "\"limits\":{\"net_connections\":1}");
	struct tcc *c = tcc_connect(&d);
	/* A tunnel held open (its first bytes echoed back show it is up),
	 * then a request, a CONNECT and a SOCKS5 connection while it is:
	 * each is one connection too many. */
#define HELD "{ echo up; sleep 20; } | socat -t 20 - PROXY:127.0.0.1:echo.test:%d,proxyport=3128 > tunnel & " \
	     "i=0; until grep -q up tunnel 2>/dev/null || [ $i -ge 400 ]; do sleep 0.05; i=$((i+1)); done; "
#define CURL "curl -s -m 20 -o /dev/null -w '%%{http_code}\\n' "
	const struct json *r = tcc_shell(c, tcc_fmt(c, HELD CURL "http://origin.test:%d/; "
						    "curl -s -m 20 -o /dev/null -w '%%{http_connect}\\n' -p -x http://127.0.0.1:3128 "
						    "http://echo.test:%d/; "
						    "curl -s -m 20 -o /dev/null --socks5-hostname 127.0.0.1:1080 http://origin.test:%d/ "
						    "|| echo socks refused; kill $! 2>/dev/null; exit 0",
						    echo_port, origin_port, echo_port, origin_port));
	tc_assert_ok(r);
	ck_assert_msg(!tj_bool(r, "result.isError"), "%s", dump(r));
	ck_assert_int_eq(count_of(out(r), "503\n"), 2);
	ck_assert_msg(strstr(out(r), "socks refused\n"), "%s", dump(r));
	const char *t = text(r);
	ck_assert_msg(strstr(t, "[limit] The command reached the network connection limit (1 at once, "
			     "limits.net_connections) of its sandbox: 3 connections were refused (HTTP 503 or a SOCKS5 "
			     "failure) while others were open."), "%s", t);
	ck_assert_int_eq(count_of(t, "[limit]"), 1);
	ck_assert_msg(!strstr(t, "[sandbox]"), "%s", t);

	/* The same for a command that fails afterwards. */
	r = tcc_shell(c, tcc_fmt(c, HELD CURL "http://origin.test:%d/; kill $! 2>/dev/null; exit 3", echo_port, origin_port));
	tc_assert_ok(r);
	ck_assert_msg(tj_bool(r, "result.isError"), "%s", dump(r));
	t = text(r);
	ck_assert_msg(strstr(t, "[exit code 3]"), "%s", t);
	ck_assert_msg(strstr(t, "(1 at once, limits.net_connections) of its sandbox: 1 connection was refused"), "%s", t);
	ck_assert_int_eq(count_of(t, "[limit]"), 1);

	/* Under the limit: no note. */
	r = tcc_shell(c, tcc_fmt(c, CURL "http://origin.test:%d/; " CURL "http://origin.test:%d/", origin_port, origin_port));
#undef CURL
#undef HELD
	tc_assert_ok(r);
	ck_assert_msg(strstr(out(r), "200\n200\n"), "%s", dump(r));
	ck_assert_msg(!strstr(text(r), "[limit]"), "%s", dump(r));
	tcc_close(c);
	stop(&d);
}
END_TEST

/* limits.net_mb bounds the bytes of a call's proxy: a tunnel that moves
 * more is closed, and its audit line says why. */
START_TEST(bytes_per_call_bounded)
{
	NEED_NETWORK();
	struct tcd d;
	start(&d, "\"allow\":[\"echo.test\"]", "\"limits\":{\"net_mb\":1}");
	struct tcc *c = tcc_connect(&d);
	const struct json *r = tcc_shell(c, tcc_fmt(c, "head -c 8000000 /dev/zero | socat -t 10 - "
					     "PROXY:127.0.0.1:echo.test:%d,proxyport=3128 | wc -c", echo_port));
	tc_assert_ok(r);
	long echoed = strtol(out(r), NULL, 10);
	ck_assert_msg(echoed < 4000000, "%s", dump(r));
	const struct json *l = wait_audit_net(c, &d, "\"host\":\"echo.test\"");
	ck_assert_msg(str_eq(tj_str(l, "error"), "budget"), "%s", dump(l));
	ck_assert_int_lt(tj_int(l, "bytes_up") + tj_int(l, "bytes_down"), 4000000);
	/* The result says which limit cut it, once, and not as a refusal
	 * by the policy. */
	const char *t = text(r);
	ck_assert_msg(strstr(t, "[limit] The command reached the network byte limit (1 MB up and down, "
			     "limits.net_mb) of its sandbox: 1 connection was refused or closed."), "%s", t);
	ck_assert_int_eq(count_of(t, "[limit]"), 1);
	ck_assert_msg(!strstr(t, "[sandbox]"), "%s", t);
	tcc_close(c);
	stop(&d);
}
END_TEST

/* An MCP server with network "proxy" runs in a namespace of its own for
 * as long as it runs: the proxy listens there, the host's loopback is out
 * of reach (its start fails, saying the sandbox may have refused it). */
START_TEST(mcp_server_behind_the_proxy)
{
	const char *server = getenv("TC_MCP_SERVER");
	if (!server)
		TC_SKIP("TC_MCP_SERVER is not set");
	NEED_NETWORK();
	struct tcd d;
	_cleanup_free_ char *px = xasprintf("{\"name\":\"px\",\"kind\":\"mcp\",\"command\":[\"%s\",\"connect=3128\"],"
					    "\"prefix\":\"px_\",\"side_effects\":\"read\",\"sandbox\":{\"limits\":{\"memory_mb\":null}},\"network\":{\"allow\":"
					    "[\"origin.test\"]}}", server);
	/* connect= reaches 127.0.0.1 only: a listener there on the host. */
	int lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t alen = sizeof(a);
	ck_assert(lfd >= 0 && bind(lfd, (struct sockaddr *)&a, sizeof(a)) == 0 && listen(lfd, 8) == 0 &&
		  getsockname(lfd, (struct sockaddr *)&a, &alen) == 0);
	_cleanup_free_ char *host = xasprintf("{\"name\":\"host\",\"kind\":\"mcp\",\"command\":[\"%s\",\"connect=%d\"],"
			 "\"prefix\":\"host_\",\"side_effects\":\"read\",\"sandbox\":{\"limits\":{\"memory_mb\":null}},\"network\":{\"allow\":[\"origin.test\"]}}",
			 server, ntohs(a.sin_port));
	start(&d, "", "\"retry\":{\"max_attempts\":1}");
	tcd_write_tool(&d, "px.json", px);
	tcd_write_tool(&d, "host.json", host);
	struct tcc *c = tcc_connect(&d);
	tc_assert_ok(tcc_reload(c));
	const struct json *r = tcc_call(c, "px_echo", "{\"text\":\"behind the proxy\"}");
	tc_assert_ok(r);
	ck_assert_msg(strstr(dump(r), "behind the proxy"), "%s", dump(r));
	r = tcc_call(c, "host_echo", "{\"text\":\"x\"}");
	tc_assert_kind(r, "transient");
	ck_assert_msg(strstr(tj_str(r, "error.message"), "the daemon's proxy"), "%s", dump(r));
	close(lfd);
	tcc_close(c);
	stop(&d);
}
END_TEST

/* A daemon that is not root (uid 65534 here) gets "proxy" through a user
 * namespace of its own where the kernel lets users make them: its calls
 * reach the origin through the proxy and nothing else. Where it cannot,
 * it refuses to start with "proxy" configured, saying what it lacks, and
 * --check-config says the same: never the full network instead. */
START_TEST(proxy_for_a_daemon_not_root)
{
	if (geteuid() != 0 || access("/usr/bin/setpriv", X_OK) < 0)
		TC_SKIP("needs root and /usr/bin/setpriv to start a daemon as uid 65534");
	NEED_NETWORK();
	/* Whether uid 65534 may make a user and a network namespace here. */
	const char *probe[] = { "/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
				"/usr/bin/unshare", "--user", "--net", "true", NULL };
	bool userns = access("/usr/bin/unshare", X_OK) == 0 && tc_run(probe, NULL, "/", NULL, NULL, 10000) == 0;
	struct tcd d;
	char *cfg = xasprintf("{" AUTO ",\"sandbox\":{\"network\":\"proxy\"},\"tools_dir\":null,"
			      "\"network\":{\"hosts\":{\"origin.test\":\"127.0.0.2\"},\"allow\":[\"origin.test\"],"
			      "\"allow_private\":[\"127.0.0.2/32\"]}}");
	tcd_spawn_nobody(&d, &(struct tcd_opts){ .config = cfg });
	const char *argv[] = { "/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", tc_daemon_path(),
			       "--check-config", "--config", d.config, NULL };
	char *out_text = NULL, *err_text = NULL;
	if (userns) {
		ck_assert_msg(tcd_wait_socket(&d, d.sock, TCD_START_TIMEOUT_MS) == 0, "%s", tcd_log(&d));
		struct tcc *c = tcc_connect(&d);
		const struct json *r = tcc_shell(c, tcc_fmt(c, "id -u; curl -sS -m 20 http://origin.test:%d/unprivileged; "
						     "curl -sS -m 5 --noproxy '*' http://127.0.0.2:%d/ 2>/dev/null || echo unreachable",
						     origin_port, origin_port));
		tc_assert_ok(r);
		ck_assert_msg(str_eq(out(r), "65534\n" ORIGIN_BODY "unreachable\n"), "%s", dump(r));
		ck_assert_str_eq(tj_str(r, "result.structuredContent.sandbox.network"), "proxy");
		tcc_close(c);
		ck_assert_int_eq(tc_run(argv, NULL, d.dir, &out_text, &err_text, 10000), 0);
		ck_assert_msg(strstr(out_text, "sandbox network \"proxy\": yes"), "%s", out_text);
		ck_assert_int_eq(tcd_stop(&d), 0);
	} else {
		ck_assert_int_ne(tcd_wait_exit(&d, 10000), 0);
		char *log = tcd_log(&d);
		ck_assert_msg(strstr(log, "\"proxy\" cannot be served here") && strstr(log, "CAP_SYS_ADMIN") &&
			      strstr(log, "user namespace"), "%s", log);
		free(log);
		int st = tc_run(argv, NULL, d.dir, &out_text, &err_text, 10000);
		ck_assert_msg(st != 0 && strstr(err_text, "\"proxy\" cannot be served here"), "status %d: %s %s", st,
			      out_text, err_text);
	}
	free(out_text);
	free(err_text);
	free(cfg);
	tcd_free(&d);
	servers_stop();
}
END_TEST

int main(void)
{
	/* The origin and the echo write to clients the proxy may close. */
	signal(SIGPIPE, SIG_IGN);
	Suite *s = suite_create("network");
	TCase *tc = tcase_create("proxy");
	tcase_set_timeout(tc, 240);
	tcase_add_test(tc, bad_network_settings_refused);
	tcase_add_test(tc, tool_file_cannot_widen_the_policy);
	tcase_add_test(tc, hooks_get_no_proxy);
	tcase_add_test(tc, proxy_for_a_daemon_not_root);
	tcase_add_test(tc, proxy_reaches_allowed_hosts);
	tcase_add_test(tc, socks5_through_all_proxy);
	tcase_add_test(tc, proxy_refuses_with_the_rule);
	tcase_add_test(tc, ask_is_a_confirmation);
	tcase_add_test(tc, ask_always_allow_survives_a_restart);
	tcase_add_test(tc, ask_through_toolcallctl_approve);
	tcase_add_test(tc, ask_through_elicitation);
	tcase_add_test(tc, ask_questions_bounded);
	tcase_add_test(tc, ask_times_out);
	tcase_add_test(tc, asks_independent_and_shared);
	tcase_add_test(tc, elicitations_answered_in_any_order);
	tcase_add_test(tc, tool_file_adds_its_hosts);
	tcase_add_test(tc, policy_reloads);
	tcase_add_test(tc, proxy_for_another_uid);
	tcase_add_test(tc, network_true_is_unchanged);
	tcase_add_test(tc, background_process_keeps_its_proxy);
	tcase_add_test(tc, connections_per_call_bounded);
	tcase_add_test(tc, connection_limit_noted);
	tcase_add_test(tc, bytes_per_call_bounded);
	tcase_add_test(tc, mcp_server_behind_the_proxy);
	suite_add_tcase(s, tc);
	return run_suite(s);
}
