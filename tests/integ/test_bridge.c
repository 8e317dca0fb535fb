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
#include <sys/wait.h>
#include <unistd.h>

#include "proto/base/buf.h"
#include "tests/integ/harness.h"
#include "tests/unit/check_main.h"

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
	ck_assert_int_eq(tcd_stop(&d), 0);
	tcd_free(&d);
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
	ck_assert_int_eq(tcd_stop(&d), 0);
	tcd_free(&d);
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
	ck_assert_int_eq(tcd_stop(&d), 0);
	tcd_free(&d);
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
	ck_assert_int_eq(tcd_stop(&d), 0);
	tcd_free(&d);
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
	suite_add_tcase(s, tc);
	return run_suite(s);
}
