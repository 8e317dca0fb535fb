/* SPDX-License-Identifier: MIT */
/*
 * An MCP host for tests: toolcallctl mcp on pipes, driven as a host
 * drives it (see mcp_host.h).
 */
#include "tests/integ/mcp_host.h"

#include <check.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/integ/harness.h"

void host_start(struct host *h, const char *const *args)
{
	*h = (struct host){ 0 };
	int in[2], out[2], err[2];
	ck_assert_int_eq(pipe2(in, O_CLOEXEC), 0);
	ck_assert_int_eq(pipe2(out, O_CLOEXEC), 0);
	ck_assert_int_eq(pipe2(err, O_CLOEXEC), 0);
	h->pid = fork();
	ck_assert_int_ge(h->pid, 0);
	if (h->pid == 0) {
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
	h->in = in[1];
	h->out = out[0];
	h->err = err[0];
}

void host_send(struct host *h, const char *line)
{
	size_t n = strlen(line);
	ck_assert_int_eq(write(h->in, line, n), (ssize_t)n);
	ck_assert_int_eq(write(h->in, "\n", 1), 1);
}

/* Reads what the bridge wrote within ms; complete lines are parsed. */
void host_pump(struct host *h, int ms)
{
	struct pollfd p[2] = { { h->out_eof ? -1 : h->out, POLLIN, 0 }, { h->err, POLLIN, 0 } };
	if (poll(p, 2, ms) <= 0)
		return;
	char chunk[4096];
	if (p[1].revents) {
		ssize_t n = read(h->err, chunk, sizeof(chunk));
		if (n > 0)
			buf_append(&h->ebuf, chunk, (size_t)n);
	}
	if (p[0].revents) {
		ssize_t n = read(h->out, chunk, sizeof(chunk));
		if (n <= 0) {
			h->out_eof = true;
			return;
		}
		buf_append(&h->obuf, chunk, (size_t)n);
		const char *nl;
		while ((nl = memchr(buf_head(&h->obuf), '\n', buf_size(&h->obuf)))) {
			size_t len = (size_t)(nl - buf_head(&h->obuf));
			struct json_doc *doc = NULL;
			struct json_err jerr;
			ck_assert_msg(json_parse(buf_head(&h->obuf), len, 0, 0, &doc, &jerr) == 0,
				      "the bridge wrote a line that is not JSON: %.*s", (int)len, buf_head(&h->obuf));
			ck_assert_uint_lt(h->n_msgs, ELEMENTSOF(h->msgs));
			h->msgs[h->n_msgs++] = doc;
			buf_consume(&h->obuf, len + 1);
		}
	}
}

/* The text of a message's id, or "" when it has none. */
static bool id_is(const struct json *m, const char *id)
{
	const struct json *v = json_get(m, "id");
	if (!v)
		return false;
	struct buf b = { 0 };
	json_canonical(v, &b);
	buf_putc(&b, '\0');
	bool same = str_eq(buf_head(&b), id);
	buf_free(&b);
	return same;
}

/* Waits for the answer with id (its JSON text), or for a message of method
 * (id NULL); NULL on timeout or EOF. */
const struct json *host_wait(struct host *h, const char *id, const char *method, int timeout_ms)
{
	uint64_t end = tc_now_ms() + tc_wait_scaled(timeout_ms);
	for (;;) {
		for (size_t i = 0; i < h->n_msgs; i++) {
			const struct json *m = json_doc_root(h->msgs[i]);
			if (h->taken[i])
				continue;
			if (id ? (id_is(m, id) && !json_get(m, "method"))
			       : str_eq(json_str(json_get(m, "method")), method)) {
				h->taken[i] = true;
				return m;
			}
		}
		if (h->out_eof || tc_now_ms() >= end)
			return NULL;
		host_pump(h, 50);
	}
}

/* How many messages of method came so far. */
size_t host_count(struct host *h, const char *method)
{
	size_t n = 0;
	for (size_t i = 0; i < h->n_msgs; i++)
		if (str_eq(json_str(json_get(json_doc_root(h->msgs[i]), "method")), method))
			n++;
	return n;
}

/* Closes the bridge's stdin and returns its exit status (-1: still running
 * after timeout_ms, then killed). */
int host_end(struct host *h, bool close_stdin, int timeout_ms)
{
	if (close_stdin && h->in >= 0) {
		close(h->in);
		h->in = -1;
	}
	uint64_t end = tc_now_ms() + tc_wait_scaled(timeout_ms);
	int status, ret = -1;
	while (tc_now_ms() < end) {
		host_pump(h, 20);
		if (waitpid(h->pid, &status, WNOHANG) == h->pid) {
			ret = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
			break;
		}
	}
	if (ret < 0) {
		kill(h->pid, SIGKILL);
		waitpid(h->pid, &status, 0);
	}
	while (!h->out_eof)
		host_pump(h, 100);
	host_pump(h, 0);
	return ret;
}

void host_free(struct host *h)
{
	if (h->in >= 0)
		close(h->in);
	close(h->out);
	close(h->err);
	for (size_t i = 0; i < h->n_msgs; i++)
		json_doc_unref(h->msgs[i]);
	buf_free(&h->obuf);
	buf_free(&h->ebuf);
}

const char *host_stderr(struct host *h)
{
	buf_putc(&h->ebuf, '\0');
	h->ebuf.len--;
	return buf_head(&h->ebuf);
}
