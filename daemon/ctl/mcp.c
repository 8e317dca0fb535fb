/* SPDX-License-Identifier: MIT */
/*
 * toolcallctl mcp: a stdio MCP server for hosts (Claude Code, Cursor, VS
 * Code, Codex ...) that can only start a program and talk to its stdin and
 * stdout. It relays both ways between stdio and the daemon's socket, byte
 * for byte, with one change: the host's `initialize` gets what a host
 * cannot send itself: `toolErrors: "result"` (failed calls come back as
 * isError results the model sees) and, with -w, the `workspace`. Members
 * the host did send are never overridden.
 *
 * When the daemon cannot be reached, the host still gets an answer to its
 * first request, an error naming the socket tried and how to start the
 * daemon, and the bridge exits 3.
 *
 * Both directions are buffered without blocking and bounded: while one
 * side does not read, the bridge stops reading the other.
 */
#include "daemon/ctl/mcp.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "daemon/ctl/client.h"
#include "proto/base/buf.h"
#include "proto/base/util.h"
#include "proto/json.h"

/* Bytes held for one direction before reading the other side pauses. */
#define RELAY_CAP (16u << 20)
/* Longest line read from the host: beyond it the daemon would refuse the
 * message anyway; the bridge passes the excess through unparsed. */
#define PARSE_MAX (8u << 20)

struct relay {
	int in_fd, out_fd, sock;
	struct buf up;			/* host -> daemon, complete lines */
	struct buf line;		/* host's current line, not yet complete */
	bool line_passthru;		/* line too long to parse: relayed as it comes */
	struct buf down;		/* daemon -> host */
	bool in_eof, sock_eof, up_shut;
	const char *workspace;		/* absolute, or NULL */
};

/* Writes the initialize request again with toolErrors and workspace added
 * to its params (unless the host set them). Returns false when the line
 * is not an initialize request: it is then relayed unchanged. */
static bool rewrite_initialize(const char *text, size_t n, const char *workspace, struct buf *out)
{
	struct json_doc *doc = NULL;
	struct json_err err;
	if (json_parse(text, n, 0, 0, &doc, &err) < 0)
		return false;
	const struct json *root = json_doc_root(doc);
	const struct json *params = json_get(root, "params");
	if (root->type != JSON_OBJECT || !str_eq(json_str(json_get(root, "method")), "initialize") ||
	    (params && params->type != JSON_OBJECT)) {
		json_doc_unref(doc);
		return false;
	}
	struct jgen *g = jgen_new(out);
	jgen_obj_open(g);
	for (size_t i = 0; i < root->u.obj.n; i++) {
		const struct json_member *m = &root->u.obj.members[i];
		if (str_eq(m->key, "params"))
			continue;
		jgen_key(g, m->key);
		jgen_value(g, m->value);
	}
	jgen_key(g, "params");
	jgen_obj_open(g);
	for (size_t i = 0; params && i < params->u.obj.n; i++) {
		jgen_key(g, params->u.obj.members[i].key);
		jgen_value(g, params->u.obj.members[i].value);
	}
	if (!json_get(params, "toolErrors"))
		jgen_kv_str(g, "toolErrors", "result");
	if (workspace && !json_get(params, "workspace"))
		jgen_kv_str(g, "workspace", workspace);
	jgen_obj_close(g);
	jgen_obj_close(g);
	jgen_free(g);
	json_doc_unref(doc);
	return true;
}

/* Takes the host's bytes: complete lines go up, initialize rewritten. */
static void take_input(struct relay *r, const char *data, size_t n)
{
	while (n > 0) {
		const char *nl = memchr(data, '\n', n);
		size_t k = nl ? (size_t)(nl - data) + 1 : n;
		if (r->line_passthru) {
			buf_append(&r->up, data, k);
		} else {
			buf_append(&r->line, data, k);
			if (!nl && buf_size(&r->line) > PARSE_MAX) {
				buf_append(&r->up, buf_head(&r->line), buf_size(&r->line));
				buf_clear(&r->line);
				r->line_passthru = true;
			}
		}
		if (nl) {
			if (!r->line_passthru) {
				size_t len = buf_size(&r->line) - 1;
				if (!rewrite_initialize(buf_head(&r->line), len, r->workspace, &r->up))
					buf_append(&r->up, buf_head(&r->line), len);
				buf_append(&r->up, "\n", 1);
				buf_clear(&r->line);
			}
			r->line_passthru = false;
		}
		data += k;
		n -= k;
	}
}

/* Writes what b holds to fd without blocking; -errno on a hard error. */
static int drain(int fd, struct buf *b)
{
	while (buf_size(b) > 0) {
		ssize_t w = fd == STDOUT_FILENO ? write(fd, buf_head(b), buf_size(b))
						: send(fd, buf_head(b), buf_size(b), MSG_NOSIGNAL);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			return errno == EAGAIN ? 0 : -errno;
		}
		buf_consume(b, (size_t)w);
	}
	return 0;
}

/* Relays until the daemon closes; returns the exit status. */
static int relay_run(struct relay *r)
{
	char chunk[65536];
	for (;;) {
		if (r->in_eof && !r->up_shut && buf_size(&r->up) == 0) {
			/* A last line without its newline still counts. */
			if (buf_size(&r->line) > 0) {
				buf_append(&r->up, buf_head(&r->line), buf_size(&r->line));
				buf_clear(&r->line);
				continue;
			}
			shutdown(r->sock, SHUT_WR);
			r->up_shut = true;
		}
		if (r->sock_eof && buf_size(&r->down) == 0)
			return r->in_eof ? EXIT_OK : EXIT_CONNECT;

		struct pollfd p[3] = {
			{ .fd = r->in_eof || buf_size(&r->up) > RELAY_CAP ? -1 : r->in_fd, .events = POLLIN },
			{ .fd = r->sock, .events = (r->sock_eof || buf_size(&r->down) > RELAY_CAP ? 0 : POLLIN) |
						   (buf_size(&r->up) ? POLLOUT : 0) },
			{ .fd = buf_size(&r->down) ? r->out_fd : -1, .events = POLLOUT },
		};
		if (poll(p, 3, -1) < 0) {
			if (errno == EINTR && !interrupted)
				continue;
			return interrupted ? EXIT_INTERRUPTED : EXIT_CONNECT;
		}
		if (p[0].revents) {
			ssize_t n = read(r->in_fd, chunk, sizeof(chunk));
			if (n > 0)
				take_input(r, chunk, (size_t)n);
			else if (n == 0 || (errno != EINTR && errno != EAGAIN))
				r->in_eof = true;
		}
		if (p[1].revents & (POLLIN | POLLHUP | POLLERR)) {
			ssize_t n = recv(r->sock, chunk, sizeof(chunk), 0);
			if (n > 0)
				buf_append(&r->down, chunk, (size_t)n);
			else if (n == 0 || (errno != EINTR && errno != EAGAIN))
				r->sock_eof = true;
		}
		if (buf_size(&r->up) && drain(r->sock, &r->up) < 0) {
			buf_clear(&r->up);
			r->sock_eof = true;
		}
		if (buf_size(&r->down) && drain(r->out_fd, &r->down) < 0)
			return EXIT_OUTPUT;	/* the host is gone */
	}
}

/*
 * The daemon is down: answers the host's first request with an error that
 * says which socket was tried and how to start the daemon (a host shows
 * it to its user), then gives up.
 */
static int answer_unreachable(const char *socket, int err)
{
	struct buf in = {0};
	char chunk[4096];
	for (;;) {
		const char *nl = memchr(buf_head(&in), '\n', buf_size(&in));
		if (!nl) {
			if (buf_size(&in) > PARSE_MAX)
				break;
			ssize_t n = read(STDIN_FILENO, chunk, sizeof(chunk));
			if (n < 0 && errno == EINTR && !interrupted)
				continue;
			if (n <= 0)
				break;
			buf_append(&in, chunk, (size_t)n);
			continue;
		}
		size_t len = (size_t)(nl - buf_head(&in));
		struct json_doc *doc = NULL;
		struct json_err jerr;
		const struct json *id = NULL;
		if (json_parse(buf_head(&in), len, 0, 0, &doc, &jerr) == 0)
			id = json_get(json_doc_root(doc), "id");
		if (id) {
			char *msg = xasprintf("toolcalld is not reachable: cannot connect to %s: %s. Start it "
					      "(`toolcalld` in the workspace, or `systemctl --user start "
					      "toolcalld.socket`), or name its socket with -s.",
					      socket, strerror(err));
			struct buf out = {0};
			struct jgen *g = jgen_new(&out);
			jgen_obj_open(g);
			jgen_kv_str(g, "jsonrpc", "2.0");
			jgen_key(g, "id");
			jgen_value(g, id);
			jgen_key(g, "error");
			jgen_obj_open(g);
			jgen_kv_int(g, "code", -32603);
			jgen_kv_str(g, "message", msg);
			jgen_obj_close(g);
			jgen_obj_close(g);
			jgen_free(g);
			buf_append(&out, "\n", 1);
			fwrite(buf_head(&out), 1, buf_size(&out), stdout);
			buf_free(&out);
			free(msg);
			json_doc_unref(doc);
			break;
		}
		json_doc_unref(doc);
		buf_consume(&in, len + 1);	/* a notification: nothing to answer */
	}
	buf_free(&in);
	fprintf(stderr, "toolcallctl mcp: cannot connect to %s: %s\n", socket, strerror(err));
	return EXIT_CONNECT;
}

int ctl_mcp(const char *socket, char **args, int n)
{
	static const struct option longopts[] = {
		{ "socket", required_argument, NULL, 's' },
		{ "workspace", required_argument, NULL, 'w' },
		{},
	};
	/* A host stops its servers with SIGTERM or by closing stdin: the
	 * bridge has nothing to clean up, so the default dispositions do. */
	signal(SIGINT, SIG_DFL);
	signal(SIGTERM, SIG_DFL);
	sigset_t unblock;
	sigemptyset(&unblock);
	sigaddset(&unblock, SIGINT);
	sigaddset(&unblock, SIGTERM);
	sigprocmask(SIG_UNBLOCK, &unblock, NULL);

	const char *sock = socket;
	const char *ws = NULL;
	/* getopt wants argv[0] first. */
	_cleanup_free_ char **argv = xmalloc(sizeof(char *) * ((size_t)n + 2));
	argv[0] = (char *)"mcp";
	memcpy(argv + 1, args, sizeof(char *) * (size_t)n);
	argv[n + 1] = NULL;
	optind = 1;
	int ch;
	while ((ch = getopt_long(n + 1, argv, "s:w:", longopts, NULL)) != -1) {
		if (ch == 's')
			sock = optarg;
		else if (ch == 'w')
			ws = optarg;
		else
			return EXIT_USAGE;
	}
	if (optind != n + 1) {
		fprintf(stderr, "Usage: toolcallctl mcp [-s SOCKET] [-w DIR]\n");
		return EXIT_USAGE;
	}
	_cleanup_free_ char *ws_abs = NULL;
	if (ws) {
		ws_abs = realpath(ws, NULL);
		if (!ws_abs) {
			fprintf(stderr, "toolcallctl mcp: -w %s: %s\n", ws, strerror(errno));
			return EXIT_USAGE;
		}
	}

	struct client c = { .fd = -1 };
	int r = client_connect(&c, sock);
	if (r < 0)
		return answer_unreachable(sock, -r);

	struct relay rl = {
		.in_fd = STDIN_FILENO,
		.out_fd = STDOUT_FILENO,
		.sock = c.fd,
		.workspace = ws_abs,
	};
	int fl = fcntl(rl.sock, F_GETFL);
	if (fl < 0 || fcntl(rl.sock, F_SETFL, fl | O_NONBLOCK) < 0) {
		fprintf(stderr, "toolcallctl mcp: %s: %s\n", sock, strerror(errno));
		client_close(&c);
		return EXIT_CONNECT;
	}
	int status = relay_run(&rl);
	buf_free(&rl.up);
	buf_free(&rl.line);
	buf_free(&rl.down);
	client_close(&c);
	return status;
}
