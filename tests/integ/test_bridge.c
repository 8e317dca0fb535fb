/* SPDX-License-Identifier: MIT */
/*
 * MCP hosts: failed calls as isError results (initialize toolErrors
 * "result"), and `toolcallctl mcp`, the stdio bridge a host starts, driven
 * over pipes: what it adds to initialize, what it relays, and what a host
 * sees when the daemon is down.
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "proto/base/buf.h"
#include "tests/integ/harness.h"
#include "tests/integ/mcp_host.h"
#include "tests/unit/check_main.h"
#include "tests/unit/redis_server.h"

START_TEST(tool_errors_as_results)
{
	struct tcd d;
	tcd_start(&d, "{}");
	struct tcc *c = tcc_connect(&d);
	tcc_initialize(c, "\"toolErrors\":\"result\"");

	/* The tool failed: a result the model sees, with the envelope's data. */
	const struct json *r = tcc_call(c, "read_file", "{\"path\":\"missing.txt\"}");
	ck_assert(tj_has(r, "result"));
	ck_assert(tj_bool(r, "result.isError"));
	ck_assert_str_eq(tj_str(r, "result.structuredContent.error.kind"), "execution_error");
	ck_assert(!tj_bool(r, "result.structuredContent.error.retryable"));
	ck_assert_str_eq(tj_str(r, "result.structuredContent.error.tool"), "read_file");
	ck_assert_str_eq(tj_str(r, "result.content.0.type"), "text");
	ck_assert_ptr_nonnull(strstr(tj_str(r, "result.content.0.text"), "missing.txt"));

	/* Arguments that do not match the schema: the model can correct them. */
	r = tcc_call(c, "read_file", "{\"path\":7}");
	ck_assert(tj_bool(r, "result.isError"));
	ck_assert_str_eq(tj_str(r, "result.structuredContent.error.kind"), "validation_error");

	/* An unknown tool stays a protocol error. */
	r = tcc_call(c, "no_such_tool", "{}");
	ck_assert_str_eq(tj_kind(r), "not_found");
	ck_assert_int_eq(tj_int(r, "error.code"), -32601);
	tcc_close(c);

	/* Without the parameter, the envelope of §4. */
	c = tcc_connect(&d);
	tcc_initialize(c, NULL);
	r = tcc_call(c, "read_file", "{\"path\":\"missing.txt\"}");
	tc_assert_kind(r, "execution_error");
	r = tcc_request(c, "initialize", "{\"protocolVersion\":\"2025-11-25\",\"toolErrors\":\"exceptions\"}");
	ck_assert_int_eq(tj_int(r, "error.code"), -32602);
	tcc_close(c);
	tcd_finish(&d);
}
END_TEST

/*
 * Runs toolcallctl with args, feeding it input on stdin (then closing it)
 * and collecting stdout and stderr; returns the exit status, or -1 when it
 * did not end within timeout_ms.
 */
static int run_bridge(const char *const *args, const char *input, char **ret_out, char **ret_err,
		      int timeout_ms)
{
	int in[2], out[2], err[2];
	ck_assert_int_eq(pipe2(in, O_CLOEXEC), 0);
	ck_assert_int_eq(pipe2(out, O_CLOEXEC), 0);
	ck_assert_int_eq(pipe2(err, O_CLOEXEC), 0);
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		dup2(in[0], 0);
		dup2(out[1], 1);
		dup2(err[1], 2);
		const char *argv[16] = { tc_ctl_path() };
		for (size_t i = 0; args[i] && i < 14; i++)
			argv[i + 1] = args[i];
		execv(argv[0], (char *const *)argv);
		_exit(127);
	}
	close(in[0]);
	close(out[1]);
	close(err[1]);
	signal(SIGPIPE, SIG_IGN);
	ck_assert_int_eq(write(in[1], input, strlen(input)), (ssize_t)strlen(input));
	close(in[1]);

	struct buf o = {0}, e = {0};
	uint64_t deadline = tc_now_ms() + (uint64_t)timeout_ms;
	bool out_open = true, err_open = true;
	while ((out_open || err_open) && tc_now_ms() < deadline) {
		struct pollfd p[2] = { { out_open ? out[0] : -1, POLLIN, 0 },
				       { err_open ? err[0] : -1, POLLIN, 0 } };
		if (poll(p, 2, 100) <= 0)
			continue;
		char chunk[4096];
		for (int i = 0; i < 2; i++) {
			if (!p[i].revents)
				continue;
			ssize_t n = read(p[i].fd, chunk, sizeof(chunk));
			if (n > 0)
				buf_append(i ? &e : &o, chunk, (size_t)n);
			else if (i)
				err_open = false;
			else
				out_open = false;
		}
	}
	close(out[0]);
	close(err[0]);
	int status;
	int ret = -1;
	while (tc_now_ms() < deadline) {
		pid_t w = waitpid(pid, &status, WNOHANG);
		if (w == pid) {
			ret = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
			break;
		}
		tc_pause_ms(10);
	}
	if (ret < 0) {
		kill(pid, SIGKILL);
		waitpid(pid, &status, 0);
	}
	buf_putc(&o, '\0');
	buf_putc(&e, '\0');
	*ret_out = buf_steal(&o);
	*ret_err = buf_steal(&e);
	return ret;
}

START_TEST(bridge_relays_and_adds_what_a_host_cannot_send)
{
	struct tcd d;
	tcd_start(&d, "{}");
	tcd_put(&d, "hello.txt", "hi there");
	const char *args[] = { "mcp", "-s", d.sock, "-w", d.ws, NULL };
	const char *input =
		"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{\"protocolVersion\":"
		"\"2025-06-18\",\"capabilities\":{},\"clientInfo\":{\"name\":\"host\",\"version\":\"1\"}}}\n"
		"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n"
		"{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/call\",\"params\":{\"name\":\"read_file\","
		"\"arguments\":{\"path\":\"hello.txt\"}}}\n"
		"{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"tools/call\",\"params\":{\"name\":\"read_file\","
		"\"arguments\":{\"path\":\"missing.txt\"}}}\n"
		/* The last line has no newline: it still counts. */
		"{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"ping\"}";
	char *out = NULL, *err = NULL;
	int st = run_bridge(args, input, &out, &err, 20000);
	ck_assert_msg(st == 0, "exit %d, stderr: %s", st, err);

	struct tcc *p = tcc_connect(&d);	/* only to parse lines */
	unsigned answers = 0;
	for (char *line = out, *nl; (nl = strchr(line, '\n')); line = nl + 1) {
		*nl = '\0';
		const struct json *m = tcc_parse(p, line, strlen(line));
		int64_t id = tj_int(m, "id");
		answers++;
		if (id == 1) {
			ck_assert_str_eq(tj_str(m, "result.protocolVersion"), "2025-06-18");
			ck_assert_str_eq(tj_str(m, "result.workspace"), d.ws);
		} else if (id == 2) {
			ck_assert(!tj_bool(m, "result.isError"));
			ck_assert_str_eq(tj_str(m, "result.structuredContent.content"), "hi there");
		} else if (id == 3) {
			/* toolErrors "result" was added: an isError result. */
			ck_assert(tj_bool(m, "result.isError"));
			ck_assert_str_eq(tj_str(m, "result.structuredContent.error.kind"), "execution_error");
		} else {
			ck_assert_int_eq(id, 4);
			ck_assert(tj_has(m, "result"));
		}
	}
	ck_assert_uint_eq(answers, 4);
	tcc_close(p);
	free(out);
	free(err);
	tcd_finish(&d);
}
END_TEST

START_TEST(bridge_keeps_what_the_host_sent)
{
	struct tcd d;
	tcd_start(&d, "{}");
	const char *args[] = { "mcp", "-s", d.sock, NULL };
	const char *input =
		"{\"jsonrpc\":\"2.0\",\"id\":\"a\",\"method\":\"initialize\",\"params\":{\"protocolVersion\":"
		"\"2025-11-25\",\"toolErrors\":\"envelope\"}}\n"
		"{\"jsonrpc\":\"2.0\",\"id\":\"b\",\"method\":\"tools/call\",\"params\":{\"name\":\"read_file\","
		"\"arguments\":{\"path\":\"missing.txt\"}}}\n";
	char *out = NULL, *err = NULL;
	int st = run_bridge(args, input, &out, &err, 20000);
	ck_assert_msg(st == 0, "exit %d, stderr: %s", st, err);
	ck_assert_ptr_nonnull(strstr(out, "\"id\":\"b\",\"error\":{\"code\":-32603"));
	ck_assert_ptr_nonnull(strstr(out, "\"kind\":\"execution_error\""));
	free(out);
	free(err);
	tcd_finish(&d);
}
END_TEST

START_TEST(bridge_says_when_the_daemon_is_down)
{
	char dir[] = "/tmp/tc-bridge-XXXXXX";
	ck_assert_ptr_nonnull(mkdtemp(dir));
	char *sock = xasprintf("%s/none.sock", dir);
	const char *args[] = { "mcp", "-s", sock, NULL };
	const char *input =
		"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/whatever\"}\n"
		"{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"initialize\",\"params\":{}}\n";
	char *out = NULL, *err = NULL;
	int st = run_bridge(args, input, &out, &err, 20000);
	ck_assert_int_eq(st, 3);
	ck_assert_ptr_nonnull(strstr(out, "\"id\":7,\"error\""));
	ck_assert_ptr_nonnull(strstr(out, sock));
	ck_assert_ptr_nonnull(strstr(out, "systemctl --user start toolcalld.sock"));
	ck_assert_ptr_nonnull(strstr(err, sock));
	free(out);
	free(err);
	free(sock);
	rmdir(dir);
}
END_TEST

#define RESTART_CFG "{\"confirmation\":{\"default\":{\"execute\":\"auto\"}}}"

START_TEST(bridge_outlives_a_daemon_restart)
{
	struct tcd d;
	tcd_start(&d, RESTART_CFG);
	tcd_put(&d, "hello.txt", "hi there");
	struct host h;
	const char *args[] = { "mcp", "-s", d.sock, "--reconnect-s", "30", NULL };
	host_start(&h, args);

	host_send(&h, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{\"protocolVersion\":"
		      "\"2025-06-18\",\"capabilities\":{\"roots\":{}},\"clientInfo\":{\"name\":\"host\",\"version\":\"1\"}}}");
	const struct json *m = host_wait(&h, "1", NULL, 10000);
	ck_assert_ptr_nonnull(m);
	const char *sid_text = tj_str(m, "result.sessionId");
	ck_assert_ptr_nonnull(sid_text);
	char *sid = xstrdup(sid_text);
	host_send(&h, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}");
	/* The host answers the daemon's roots/list with the workspace. */
	m = host_wait(&h, NULL, "roots/list", 10000);
	ck_assert_ptr_nonnull(m);
	char *roots_id = tj_text(tj(m, "id"));
	char *answer = xasprintf("{\"jsonrpc\":\"2.0\",\"id\":%s,\"result\":{\"roots\":[{\"uri\":\"file://%s\"}]}}",
				 roots_id, d.ws);
	host_send(&h, answer);
	host_send(&h, "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"events/subscribe\","
		      "\"params\":{\"types\":[\"tool.completed\"]}}");
	ck_assert_ptr_nonnull(host_wait(&h, "2", NULL, 10000));
	host_send(&h, "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"tools/call\",\"params\":{\"name\":\"read_file\","
		      "\"arguments\":{\"path\":\"hello.txt\"}}}");
	m = host_wait(&h, "3", NULL, 10000);
	ck_assert_str_eq(tj_str(m, "result.structuredContent.content"), "hi there");
	ck_assert_ptr_nonnull(host_wait(&h, NULL, "notifications/event", 10000));

	/* A call in flight when the daemon dies. */
	host_send(&h, "{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"tools/call\",\"params\":{\"name\":\"shell\","
		      "\"arguments\":{\"command\":\"sleep 10\"}}}");
	ck_assert(tcd_wait_stat(&d, "result.running", 1, 10000));
	tcd_kill(&d, SIGKILL);
	ck_assert_int_ge(tcd_wait_exit(&d, 10000), 0);

	/* It is answered transient, as an isError result the model sees. */
	m = host_wait(&h, "4", NULL, 10000);
	ck_assert_msg(m, "no answer to the call in flight; stderr: %s", host_stderr(&h));
	ck_assert(tj_bool(m, "result.isError"));
	ck_assert_str_eq(tj_str(m, "result.structuredContent.error.kind"), "transient");
	ck_assert(tj_bool(m, "result.structuredContent.error.retryable"));
	ck_assert_str_eq(tj_str(m, "result.structuredContent.error.tool"), "shell");
	ck_assert_ptr_nonnull(strstr(tj_str(m, "result.content.0.text"), "retry"));
	ck_assert(tc_wait_until((host_pump(&h, 10), strstr(host_stderr(&h), "lost the connection")), 5000));

	/* A request sent while the daemon is away waits for the next one. */
	host_send(&h, "{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"ping\"}");
	host_pump(&h, 300);
	ck_assert(!h.out_eof);

	/* The daemon comes back on the same socket. */
	size_t roots_asked = host_count(&h, "roots/list");
	size_t changed = host_count(&h, "notifications/tools/list_changed");
	tcd_spawn(&d, NULL);
	ck_assert_int_eq(tcd_wait_socket(&d, d.sock, 10000), 0);
	ck_assert_msg(host_wait(&h, NULL, "notifications/tools/list_changed", 15000), "stderr: %s",
		      host_stderr(&h));
	ck_assert_uint_eq(host_count(&h, "notifications/tools/list_changed"), changed + 1);
	ck_assert(tj_has(host_wait(&h, "5", NULL, 10000), "result"));
	ck_assert_ptr_nonnull(strstr(host_stderr(&h), "reconnected"));
	ck_assert_ptr_nonnull(strstr(host_stderr(&h), sid));

	/* The next call works, in the same session; the subscription goes on. */
	host_send(&h, "{\"jsonrpc\":\"2.0\",\"id\":6,\"method\":\"tools/call\",\"params\":{\"name\":\"read_file\","
		      "\"arguments\":{\"path\":\"hello.txt\"}}}");
	m = host_wait(&h, "6", NULL, 10000);
	ck_assert_msg(m && !tj_bool(m, "result.isError"), "stderr: %s", host_stderr(&h));
	ck_assert_ptr_nonnull(host_wait(&h, NULL, "notifications/event", 10000));
	host_send(&h, "{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"tools/call\",\"params\":{\"name\":\"shell\","
		      "\"arguments\":{\"command\":\"sleep 21\"}}}");
	ck_assert(tcd_wait_stat(&d, "result.running", 1, 10000));
	struct tcc *c = tcc_connect(&d);
	char *cancel = xasprintf("{\"sessionId\":\"%s\"}", sid);
	m = tcc_request(c, "sessions/cancel", cancel);
	ck_assert_int_eq(tj_int(m, "result.cancelled"), 1);
	m = host_wait(&h, "7", NULL, 10000);
	ck_assert_str_eq(tj_str(m, "result.structuredContent.error.kind"), "cancelled");
	tcc_close(c);
	/* The new daemon's roots/list was answered by the bridge from what
	 * the host said before. */
	ck_assert_uint_eq(host_count(&h, "roots/list"), roots_asked);

	/* A graceful restart (SIGTERM, as systemctl restart does): the same. */
	changed = host_count(&h, "notifications/tools/list_changed");
	ck_assert_int_eq(tcd_stop(&d), 0);
	tcd_spawn(&d, NULL);
	ck_assert_int_eq(tcd_wait_socket(&d, d.sock, 10000), 0);
	ck_assert(tc_wait_until((host_pump(&h, 10), host_count(&h, "notifications/tools/list_changed") == changed + 1),
				tc_wait_scaled(15000)));
	host_send(&h, "{\"jsonrpc\":\"2.0\",\"id\":8,\"method\":\"tools/call\",\"params\":{\"name\":\"read_file\","
		      "\"arguments\":{\"path\":\"hello.txt\"}}}");
	m = host_wait(&h, "8", NULL, 10000);
	ck_assert_msg(m && !tj_bool(m, "result.isError"), "stderr: %s", host_stderr(&h));
	ck_assert(!h.out_eof);

	ck_assert_int_eq(host_end(&h, true, 10000), 0);
	ck_assert(!strstr(host_stderr(&h), "giving up"));
	host_free(&h);
	free(cancel);
	free(answer);
	free(roots_id);
	free(sid);
	tcd_finish(&d);
}
END_TEST

START_TEST(bridge_gives_up_when_the_daemon_stays_away)
{
	struct tcd d;
	tcd_start(&d, "{}");
	struct host h;
	const char *args[] = { "mcp", "-s", d.sock, "--reconnect-s", "1", NULL };
	host_start(&h, args);
	host_send(&h, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{}}");
	ck_assert_ptr_nonnull(host_wait(&h, "1", NULL, 10000));
	ck_assert_int_eq(tcd_stop(&d), 0);
	host_send(&h, "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/list\"}");
	host_send(&h, "[{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"ping\"},{\"jsonrpc\":\"2.0\",\"id\":4,"
		  "\"method\":\"tools/call\",\"params\":{\"name\":\"stat\",\"arguments\":{\"path\":\".\"}}}]");

	/* After --reconnect-s, the waiting requests get an error that says
	 * what happened (a batch one array of them), and the bridge ends. */
	ck_assert_int_eq(host_end(&h, false, 15000), 3);
	const struct json *batch = NULL;
	for (size_t i = 0; i < h.n_msgs && !batch; i++)
		if (json_doc_root(h.msgs[i])->type == JSON_ARRAY)
			batch = json_doc_root(h.msgs[i]);
	ck_assert_msg(batch && batch->u.arr.n == 2, "no batch answer; the bridge said: %s", host_stderr(&h));
	ck_assert_int_eq(tj_int(batch, "0.id"), 3);
	ck_assert_int_eq(tj_int(batch, "1.id"), 4);
	ck_assert_ptr_nonnull(strstr(tj_str(batch, "1.error.message"), "did not come back within 1 s"));
	const struct json *m = host_wait(&h, "2", NULL, 1000);
	ck_assert_ptr_nonnull(m);
	ck_assert_int_eq(tj_int(m, "error.code"), -32603);
	ck_assert_ptr_nonnull(strstr(tj_str(m, "error.message"), "did not come back within 1 s"));
	ck_assert_ptr_nonnull(strstr(tj_str(m, "error.message"), d.sock));
	ck_assert_ptr_nonnull(strstr(host_stderr(&h), "lost the connection"));
	ck_assert_ptr_nonnull(strstr(host_stderr(&h), "giving up"));
	host_free(&h);
	tcd_free(&d);
}
END_TEST

/* The number of connections open (the one asking included). */
static int64_t conns_open(struct tcd *d)
{
	struct tcc *c = tcc_connect(d);
	int64_t n = tj_int(tcc_request(c, "admin/stats", NULL), "result.connections.open");
	tcc_close(c);
	return n;
}

/* The number of sessions the daemon holds (kept ones included). */
static int64_t sessions_held(struct tcd *d)
{
	struct tcc *c = tcc_connect(d);
	int64_t n = tj_int(tcc_request(c, "admin/stats", NULL), "result.sessions");
	tcc_close(c);
	return n;
}

START_TEST(session_resumes_after_its_connection_closed)
{
	struct tcd d;
	tcd_start(&d, "{\"limits\":{\"session_resume_s\":2},\"workspaces\":{\"allowed\":[\"@DIR@/other\"]}}");
	char *other = xasprintf("%s/other", d.dir);
	ck_assert_int_eq(mkdir(other, 0755), 0);
	ck_assert_int_eq(tcd_stop(&d), 0);	/* allowed roots are resolved at start */
	tcd_spawn(&d, NULL);
	ck_assert_int_eq(tcd_wait_socket(&d, d.sock, 10000), 0);
	char *other_file = xasprintf("%s/o.txt", other);
	tc_write_file_atomic(other_file, "other", 5);

	struct tcc *c = tcc_connect(&d);
	char *init = xasprintf("\"workspace\":\"%s\",\"budget\":{\"toolCalls\":2}", other);
	const struct json *r = tcc_initialize(c, init);
	char *sid = xstrdup(tj_str(r, "sessionId"));
	tc_assert_ok(tcc_call(c, "read_file", "{\"path\":\"o.txt\"}"));
	tcc_close(c);

	/* Back within session_resume_s: the same workspace, one call left. */
	c = tcc_connect(&d);
	char *again = xasprintf("\"sessionId\":\"%s\"", sid);
	r = tcc_initialize(c, again);
	ck_assert_str_eq(tj_str(r, "workspace"), other);
	ck_assert_str_eq(tcc_raw(c, tj(r, "sessionId")), tcc_fmt(c, "\"%s\"", sid));
	tc_assert_ok(tcc_call(c, "read_file", "{\"path\":\"o.txt\"}"));
	tc_assert_kind(tcc_call(c, "read_file", "{\"path\":\"o.txt\"}"), "budget_exceeded");
	tcc_close(c);

	/* Past it, the session is gone: the id makes a fresh one. */
	ck_assert(tc_wait_until(sessions_held(&d) == 0, 10000));
	c = tcc_connect(&d);
	r = tcc_initialize(c, again);
	ck_assert_str_eq(tj_str(r, "workspace"), d.ws);
	tcc_close(c);
	free(again);
	free(init);
	free(sid);
	free(other_file);
	free(other);
	tcd_finish(&d);
}
END_TEST

START_TEST(session_resume_off)
{
	struct tcd d;
	tcd_start(&d, "{\"limits\":{\"session_resume_s\":0}}");
	struct tcc *c = tcc_connect(&d);
	tcc_initialize(c, "\"budget\":{\"toolCalls\":1}");
	ck_assert_int_eq(sessions_held(&d), 1);
	tcc_close(c);
	ck_assert(tc_wait_until(sessions_held(&d) == 0, 10000));
	tcd_finish(&d);
}
END_TEST

/* With Redis, a session outlives the daemon that made it: the next one
 * takes it back, with the budget it had left, by its id. */
START_TEST(session_resumes_across_a_restart_with_redis)
{
	const char *why;
	if (!redis_server_available(&why))
		TC_SKIP("%s", why);
	struct redis_server rs = { 0 };
	redis_server_start(&rs);
	char *cfg = xasprintf("{\"store\":{\"kind\":\"redis\",\"address\":\"unix:%s\",\"prefix\":\"sess:\"},"
			      "\"limits\":{\"session_resume_s\":60}}", rs.sock);
	struct tcd d;
	tcd_start(&d, cfg);
	tcd_put(&d, "a.txt", "alpha");
	struct tcc *c = tcc_connect(&d);
	const struct json *r = tcc_request(c, "initialize", "{\"protocolVersion\":\"2025-11-25\",\"capabilities\":"
					   "{\"elicitation\":{\"form\":{}}},\"budget\":{\"toolCalls\":4}}");
	tcc_send(c, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}");
	char *sid = xstrdup(tj_str(r, "result.sessionId"));
	/* write_file allowed for the rest of the session, through the client's
	 * own elicitation. */
	int64_t wid = tcc_send_request(c, "tools/call", "{\"name\":\"write_file\",\"arguments\":"
				       "{\"path\":\"w.txt\",\"content\":\"x\"}}");
	const struct json *rq = tcc_wait_daemon_request(c, "elicitation/create", 5000);
	ck_assert_ptr_nonnull(rq);
	tcc_send(c, tcc_fmt(c, "{\"jsonrpc\":\"2.0\",\"id\":%s,\"result\":{\"action\":\"accept\","
			    "\"content\":{\"decision\":\"always_allow\"}}}", tcc_raw(c, tj(rq, "id"))));
	tc_assert_ok(tcc_wait_id(c, tcc_fmt(c, "%lld", (long long)wid), 5000));
	tc_assert_ok(tcc_call(c, "read_file", "{\"path\":\"a.txt\"}"));
	tcc_close(c);
	/* The session's last state is written once its connection closed. */
	ck_assert(tc_wait_until(conns_open(&d) == 1, 10000));
	ck_assert_int_eq(tcd_stop(&d), 0);

	/* A new daemon: the session, with two calls left, and write_file
	 * still allowed (no approver, no elicitation here: it would be
	 * refused otherwise). */
	tcd_spawn(&d, NULL);
	ck_assert_int_eq(tcd_wait_socket(&d, d.sock, 10000), 0);
	c = tcc_connect(&d);
	char *again = xasprintf("\"sessionId\":\"%s\"", sid);
	r = tcc_initialize(c, again);
	ck_assert_str_eq(tj_str(r, "sessionId"), sid);
	ck_assert_str_eq(tj_str(r, "workspace"), d.ws);
	tc_assert_ok(tcc_call(c, "write_file", "{\"path\":\"w2.txt\",\"content\":\"y\"}"));
	tc_assert_ok(tcc_call(c, "read_file", "{\"path\":\"a.txt\"}"));
	tc_assert_kind(tcc_call(c, "read_file", "{\"path\":\"a.txt\"}"), "budget_exceeded");
	tcc_close(c);

	free(again);
	free(sid);
	free(cfg);
	tcd_finish(&d);
	redis_server_free(&rs);
}
END_TEST

/* A daemon killed mid-call leaves its call cgroups behind (it could not
 * remove them); a later daemon that gets the same pid passes their names
 * over instead of failing its calls. */
START_TEST(cgroups_left_by_a_killed_daemon)
{
	struct tcd d;
	tcd_start(&d, RESTART_CFG);
	char *log = tcd_log(&d);
	const char *at = strstr(log, "cgroup v2 delegated: ");
	if (!at) {
		free(log);
		tcd_finish(&d);
		TC_SKIP("no delegated cgroup v2 subtree here");
	}
	at += strlen("cgroup v2 delegated: ");
	char *dir = xstrndup(at, strcspn(at, " ("));
	free(log);
	char *left[3];
	for (int i = 0; i < 3; i++) {
		left[i] = xasprintf("%s/tc-%d-%d", dir, (int)d.pid, i + 1);
		ck_assert_msg(mkdir(left[i], 0755) == 0 || errno == EEXIST, "%s: %s", left[i], strerror(errno));
	}
	struct tcc *c = tcc_connect(&d);
	const struct json *r = tcc_call(c, "shell", "{\"command\":\"echo ok\"}");
	ck_assert_msg(tj_has(r, "result") && tj_int(r, "result.structuredContent.exit_code") == 0, "%s", tj_text(r));
	tcc_close(c);
	tcd_finish(&d);
	for (int i = 0; i < 3; i++) {
		rmdir(left[i]);
		free(left[i]);
	}
	free(dir);
}
END_TEST

/* A task across a restart through the bridge: its tasks/result, waiting
 * when the daemon stops, is answered with the call's outcome (the stopping
 * daemon lets the call finish, Redis keeps it, the next daemon tells it). */
START_TEST(bridge_task_survives_a_restart)
{
	const char *why;
	if (!redis_server_available(&why))
		TC_SKIP("%s", why);
	struct redis_server rs = { 0 };
	redis_server_start(&rs);
	char *cfg = xasprintf("{\"confirmation\":{\"default\":{\"execute\":\"auto\"}},"
			      "\"store\":{\"kind\":\"redis\",\"address\":\"unix:%s\",\"prefix\":\"task:\"}}", rs.sock);
	struct tcd d;
	tcd_start(&d, cfg);
	struct host h;
	const char *args[] = { "mcp", "-s", d.sock, "--reconnect-s", "30", NULL };
	host_start(&h, args);
	host_send(&h, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{\"protocolVersion\":"
		      "\"2025-11-25\",\"capabilities\":{}}}");
	ck_assert_ptr_nonnull(host_wait(&h, "1", NULL, 10000));
	host_send(&h, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}");
	host_send(&h, "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/call\",\"params\":{\"name\":\"shell\","
		      "\"arguments\":{\"command\":\"sleep 1; echo done\"},\"task\":{\"ttl\":60000}}}");
	const struct json *m = host_wait(&h, "2", NULL, 10000);
	ck_assert_msg(m && tj_str(m, "result.task.taskId"), "%s", m ? tj_text(m) : "no answer");
	char *task = tj_quote(tj_str(m, "result.task.taskId"));
	char *get = xasprintf("{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"tasks/result\",\"params\":{\"taskId\":%s}}", task);
	host_send(&h, get);

	ck_assert_int_eq(tcd_stop(&d), 0);
	tcd_spawn(&d, NULL);
	ck_assert_int_eq(tcd_wait_socket(&d, d.sock, 10000), 0);
	m = host_wait(&h, "3", NULL, 20000);
	ck_assert_msg(m, "no answer to tasks/result; stderr: %s", host_stderr(&h));
	ck_assert_msg(tj_str(m, "result.structuredContent.stdout") &&
		      str_eq(tj_str(m, "result.structuredContent.stdout"), "done\n"), "%s", tj_text(m));
	/* Asked again of the new daemon, the same. */
	free(get);
	get = xasprintf("{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"tasks/result\",\"params\":{\"taskId\":%s}}", task);
	host_send(&h, get);
	m = host_wait(&h, "4", NULL, 20000);
	ck_assert_msg(m && str_eq(tj_str(m, "result.structuredContent.stdout"), "done\n"), "%s, stderr: %s",
		      m ? tj_text(m) : "no answer", host_stderr(&h));
	ck_assert(!h.out_eof);
	ck_assert_int_eq(host_end(&h, true, 10000), 0);
	host_free(&h);
	free(get);
	free(task);
	free(cfg);
	tcd_finish(&d);
	redis_server_free(&rs);
}
END_TEST

/* The sessions kept are bounded per uid: the oldest goes first. */
START_TEST(sessions_kept_are_bounded)
{
	struct tcd d;
	tcd_start(&d, "{\"limits\":{\"session_resume_s\":60,\"per_uid_connections\":2}}");
	char *ids[3];
	for (int i = 0; i < 3; i++) {
		struct tcc *c = tcc_connect(&d);
		ids[i] = xstrdup(tj_str(tcc_initialize(c, "\"budget\":{\"toolCalls\":1}"), "sessionId"));
		tcc_close(c);
		ck_assert(tc_wait_until(conns_open(&d) == 1, 10000));
	}
	ck_assert_int_eq(sessions_held(&d), 2);
	/* The newest two are there (their budget was kept), the oldest not. */
	struct tcc *c = tcc_connect(&d);
	for (int i = 0; i < 3; i++) {
		tcc_initialize(c, tcc_fmt(c, "\"sessionId\":\"%s\"", ids[i]));
		tc_assert_ok(tcc_call(c, "stat", "{\"path\":\".\"}"));	/* one call left */
		const struct json *r = tcc_call(c, "stat", "{\"path\":\".\"}");
		if (i == 0)
			tc_assert_ok(r);	/* a fresh session: no budget */
		else
			tc_assert_kind(r, "budget_exceeded");
		free(ids[i]);
	}
	tcc_close(c);
	tcd_finish(&d);
}
END_TEST

/* Something that takes the connection and drops it at once is not the
 * daemon back: the bridge still gives up after --reconnect-s. */
START_TEST(bridge_gives_up_on_a_socket_that_hangs_up)
{
	char dir[] = "/tmp/tc-bridge-XXXXXX";
	ck_assert_ptr_nonnull(mkdtemp(dir));
	char *sock = xasprintf("%s/s.sock", dir);
	int lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", sock);
	ck_assert_int_eq(bind(lfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	ck_assert_int_eq(listen(lfd, 16), 0);
	pid_t srv = fork();
	ck_assert_int_ge(srv, 0);
	if (srv == 0) {
		alarm(30);
		for (;;) {
			int fd = accept(lfd, NULL, NULL);
			if (fd >= 0)
				close(fd);
		}
	}
	close(lfd);
	struct host h;
	const char *args[] = { "mcp", "-s", sock, "--reconnect-s", "1", NULL };
	host_start(&h, args);
	host_send(&h, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{}}");
	uint64_t t0 = tc_now_ms();
	ck_assert_int_eq(host_end(&h, false, 15000), 3);
	ck_assert_uint_lt(tc_now_ms() - t0, tc_wait_scaled(10000));
	const struct json *m = host_wait(&h, "1", NULL, 1000);
	ck_assert_ptr_nonnull(m);
	ck_assert_ptr_nonnull(strstr(tj_str(m, "error.message"), "did not come back"));
	ck_assert_ptr_nonnull(strstr(host_stderr(&h), "giving up"));
	host_free(&h);
	kill(srv, SIGKILL);
	waitpid(srv, NULL, 0);
	unlink(sock);
	rmdir(dir);
	free(sock);
}
END_TEST

START_TEST(provider_formats)
{
	struct tcd d;
	tcd_start(&d, "{}");
	tcd_put(&d, "a.txt", "alpha");
	struct tcc *c = tcc_connect(&d);

	const struct json *r = tcc_request(c, "tools/list", "{\"format\":\"openai\"}");
	ck_assert_str_eq(tj_str(r, "result.tools.0.type"), "function");
	ck_assert_ptr_nonnull(tj_str(r, "result.tools.0.function.name"));
	ck_assert_str_eq(tj_str(r, "result.tools.0.function.parameters.type"), "object");
	r = tcc_request(c, "tools/list", "{\"format\":\"anthropic\"}");
	ck_assert_str_eq(tj_str(r, "result.tools.0.input_schema.type"), "object");
	r = tcc_request(c, "tools/list", "{\"format\":\"gemini\"}");
	ck_assert_int_eq(tj_int(r, "error.code"), -32602);

	/* OpenAI: arguments as JSON text; one tool message per call, in order. */
	r = tcc_request(c, "tools/dispatch",
			"{\"format\":\"openai\",\"calls\":["
			"{\"id\":\"call_1\",\"type\":\"function\",\"function\":{\"name\":\"read_file\","
			"\"arguments\":\"{\\\"path\\\":\\\"a.txt\\\"}\"}},"
			"{\"id\":\"call_2\",\"type\":\"function\",\"function\":{\"name\":\"read_file\","
			"\"arguments\":\"{\\\"path\\\":\\\"nope.txt\\\"}\"}},"
			"{\"id\":\"call_3\",\"type\":\"function\",\"function\":{\"name\":\"red_file\","
			"\"arguments\":\"{}\"}}]}");
	ck_assert_int_eq(tj_len(r, "result.messages"), 3);
	ck_assert_str_eq(tj_str(r, "result.messages.0.role"), "tool");
	ck_assert_str_eq(tj_str(r, "result.messages.0.tool_call_id"), "call_1");
	ck_assert_str_eq(tj_str(r, "result.messages.0.content"), "     1\talpha");
	ck_assert_str_eq(tj_str(r, "result.messages.1.tool_call_id"), "call_2");
	ck_assert_ptr_nonnull(strstr(tj_str(r, "result.messages.1.content"), "nope.txt"));
	ck_assert_ptr_nonnull(strstr(tj_str(r, "result.messages.2.content"), "Available:"));

	/* Anthropic: tool_use blocks among text; one user message of results. */
	r = tcc_request(c, "tools/dispatch",
			"{\"format\":\"anthropic\",\"calls\":[{\"type\":\"text\",\"text\":\"Reading.\"},"
			"{\"type\":\"tool_use\",\"id\":\"toolu_1\",\"name\":\"read_file\",\"input\":{\"path\":\"a.txt\"}},"
			"{\"type\":\"tool_use\",\"id\":\"toolu_2\",\"name\":\"read_file\",\"input\":{\"path\":7}}]}");
	ck_assert_int_eq(tj_len(r, "result.messages"), 1);
	ck_assert_str_eq(tj_str(r, "result.messages.0.role"), "user");
	ck_assert_str_eq(tj_str(r, "result.messages.0.content.0.type"), "tool_result");
	ck_assert_str_eq(tj_str(r, "result.messages.0.content.0.tool_use_id"), "toolu_1");
	ck_assert_str_eq(tj_str(r, "result.messages.0.content.0.content"), "     1\talpha");
	ck_assert(!tj_bool(r, "result.messages.0.content.0.is_error"));
	ck_assert_str_eq(tj_str(r, "result.messages.0.content.1.tool_use_id"), "toolu_2");
	ck_assert(tj_bool(r, "result.messages.0.content.1.is_error"));
	ck_assert_ptr_nonnull(strstr(tj_str(r, "result.messages.0.content.1.content"), "expected string"));

	r = tcc_request(c, "tools/dispatch", "{\"format\":\"openai\",\"calls\":[{\"id\":1}]}");
	ck_assert_int_eq(tj_int(r, "error.code"), -32602);
	ck_assert_ptr_nonnull(strstr(tj_str(r, "error.message"), "calls[0] id"));
	/* No calls: nothing to append. */
	r = tcc_request(c, "tools/dispatch", "{\"format\":\"anthropic\",\"calls\":[]}");
	ck_assert_int_eq(tj_len(r, "result.messages"), 0);
	tcc_close(c);
	tcd_finish(&d);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("bridge");
	TCase *tc = tcase_create("bridge");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, tool_errors_as_results);
	tcase_add_test(tc, bridge_relays_and_adds_what_a_host_cannot_send);
	tcase_add_test(tc, bridge_keeps_what_the_host_sent);
	tcase_add_test(tc, bridge_says_when_the_daemon_is_down);
	tcase_add_test(tc, provider_formats);
	tcase_add_test(tc, bridge_outlives_a_daemon_restart);
	tcase_add_test(tc, bridge_gives_up_when_the_daemon_stays_away);
	tcase_add_test(tc, bridge_gives_up_on_a_socket_that_hangs_up);
	tcase_add_test(tc, session_resumes_after_its_connection_closed);
	tcase_add_test(tc, session_resume_off);
	tcase_add_test(tc, sessions_kept_are_bounded);
	tcase_add_test(tc, session_resumes_across_a_restart_with_redis);
	tcase_add_test(tc, cgroups_left_by_a_killed_daemon);
	tcase_add_test(tc, bridge_task_survives_a_restart);
	suite_add_tcase(s, tc);
	return run_suite(s);
}
