/* SPDX-License-Identifier: MIT */
/*
 * toolcallctl: the command-line client of toolcalld. One connection per
 * run, newline-delimited JSON-RPC 2.0 over the daemon's Unix socket. Each
 * command is one entry of a table (name, arguments, default timeout, run
 * function); arguments are checked before anything is sent. Responses are
 * matched by id; notifications that arrive meanwhile are skipped, or kept
 * for the commands that print them (watch, approve).
 *
 * The exit status tells scripts what happened without parsing text; the
 * codes are listed in usage() and in toolcallctl(1).
 */
#include <errno.h>
#include <getopt.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "daemon/ctl_format.h"
#include "daemon/default_socket.h"
#include "proto/base/buf.h"
#include "proto/json.h"
#include "proto/jsonrpc.h"
#include "proto/base/util.h"
#include "version.h"

enum {
	EXIT_OK = 0,
	EXIT_IS_ERROR = 1,	/* the call ran; the tool reported isError */
	EXIT_USAGE = 2,		/* bad command line */
	EXIT_CONNECT = 3,	/* cannot connect, or the daemon went away */
	EXIT_PROTOCOL = 4,	/* the daemon's answer made no sense */
	EXIT_FAILED = 5,	/* the daemon answered with an error envelope */
	EXIT_TIMEOUT = 6,	/* no answer within the timeout */
	EXIT_INTERRUPTED = 130,	/* SIGINT during a call (it is cancelled) */
};

/* Longest message accepted from the daemon, and nesting allowed in it. */
#define MAX_LINE (256u << 20)
#define MAX_DEPTH 512
/* Longest JSON-ARGS read from stdin. */
#define MAX_ARGS (64u << 20)
/* Notifications kept while waiting for a response. */
#define MAX_QUEUED 4096
/* What the daemon takes as a session id and as event patterns. */
#define MAX_SESSION_ID 128
#define MAX_PATTERN 128
#define MAX_PATTERNS 64
/* Timeout of requests that should answer at once. */
#define DEFAULT_TIMEOUT_MS 10000

#define PROTOCOL_VERSION "2025-06-18"

/* Set by SIGINT and SIGTERM; checked wherever the client waits. */
static volatile sig_atomic_t interrupted;

struct client {
	int fd;
	struct buf in;
	struct framer framer;
	int64_t next_id;
	int64_t timeout_ms;		/* < 0: wait forever */
	bool keep_events;		/* queue notifications instead of dropping them */
	struct json_doc **queue;
	size_t n_queue;
	char why[256];			/* the reason of the last protocol error */
	sigset_t waitmask;		/* the mask while waiting: SIGINT, SIGTERM open */
};

struct opts {
	const char *socket;
	int64_t timeout_ms;		/* < 0: the command's default */
	bool json;
	char *call_args;		/* call: compact JSON text of the arguments */
};

struct command {
	const char *name;
	const char *args;		/* for usage() */
	const char *help;
	int min_args, max_args;		/* max < 0: any number */
	bool waits;			/* no default timeout (call) */
	int (*check)(struct opts *o, char **args, int n);
	int (*run)(struct client *c, struct opts *o, char **args, int n);
};

static void json_doc_unrefp(struct json_doc **d)
{
	json_doc_unref(*d);
}
#define _cleanup_doc_ _cleanup_(json_doc_unrefp)

static void on_signal(int sig)
{
	interrupted = sig;
}

/* --- the connection --------------------------------------------------------- */

/* Connects to the daemon's socket. */
static int client_connect(struct client *c, const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };

	if (strlen(path) >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	memcpy(sa.sun_path, path, strlen(path) + 1);

	_cleanup_close_ int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		return -errno;
	c->fd = TAKE_FD(fd);
	return 0;
}

static void client_close(struct client *c)
{
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
	buf_free(&c->in);
	for (size_t i = 0; i < c->n_queue; i++)
		json_doc_unref(c->queue[i]);
	free(c->queue);
	c->queue = NULL;
	c->n_queue = 0;
}

/* Sends one message (text without newline) and its newline. */
static int client_send(struct client *c, const char *text, size_t n)
{
	struct iovec iov[2] = {
		{ .iov_base = (void *)text, .iov_len = n },
		{ .iov_base = (void *)"\n", .iov_len = 1 },
	};
	struct msghdr mh = { .msg_iov = iov, .msg_iovlen = 2 };

	while (mh.msg_iovlen > 0) {
		ssize_t k = sendmsg(c->fd, &mh, MSG_NOSIGNAL);
		if (k < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		size_t done = (size_t)k;
		while (mh.msg_iovlen > 0 && done >= mh.msg_iov[0].iov_len) {
			done -= mh.msg_iov[0].iov_len;
			mh.msg_iov++;
			mh.msg_iovlen--;
		}
		if (mh.msg_iovlen > 0) {
			mh.msg_iov[0].iov_base = (char *)mh.msg_iov[0].iov_base + done;
			mh.msg_iov[0].iov_len -= done;
		}
	}
	return 0;
}

/* Sends a request; params is JSON text or NULL. Returns its id (> 0) or a
 * negative errno. */
static int64_t client_request(struct client *c, const char *method, const char *params)
{
	struct buf b = {};
	struct jgen *g = jgen_new(&b);
	int64_t id = ++c->next_id;

	jgen_obj_open(g);
	jgen_kv_str(g, "jsonrpc", "2.0");
	jgen_kv_int(g, "id", id);
	jgen_kv_str(g, "method", method);
	if (params)
		jgen_kv_raw(g, "params", params, strlen(params));
	jgen_obj_close(g);
	jgen_free(g);
	int r = client_send(c, buf_head(&b), buf_size(&b));
	buf_free(&b);
	return r < 0 ? r : id;
}

/* Sends a notification; params is JSON text or NULL. */
static int client_notify(struct client *c, const char *method, const char *params)
{
	struct buf b = {};
	jrpc_write_notification(&b, method, params, params ? strlen(params) : 0);
	int r = client_send(c, buf_head(&b), buf_size(&b));
	buf_free(&b);
	return r;
}

/* Takes the next complete message from the input buffer: 1 and *ret, 0
 * when none is complete yet, -EPROTO when it is not JSON. */
static int client_next(struct client *c, struct json_doc **ret)
{
	const char *line;
	size_t len;

	switch (framer_next(&c->framer, &c->in, &line, &len)) {
	case FRAME_NONE:
		return 0;
	case FRAME_TOO_LONG:
		snprintf(c->why, sizeof(c->why), "a message longer than %u bytes", MAX_LINE);
		return -EPROTO;
	case FRAME_LINE:
		break;
	}

	struct json_err err;
	if (json_parse(line, len, 0, MAX_DEPTH, ret, &err) < 0) {
		snprintf(c->why, sizeof(c->why), "not JSON (%s at byte %zu)", err.msg, err.offset);
		return -EPROTO;
	}
	if (json_doc_root(*ret)->type != JSON_OBJECT) {
		*ret = json_doc_unref(*ret);
		snprintf(c->why, sizeof(c->why), "a message that is not an object");
		return -EPROTO;
	}
	return 1;
}

/* Reads what the socket holds: bytes read, -ECONNRESET at end of file. */
static int client_fill(struct client *c)
{
	buf_reserve(&c->in, 65536);
	ssize_t n = read(c->fd, c->in.data + c->in.len, c->in.cap - c->in.len);
	if (n < 0)
		return errno == EINTR || errno == EAGAIN ? 0 : -errno;
	if (n == 0)
		return -ECONNRESET;
	c->in.len += (size_t)n;
	return (int)MIN(n, (ssize_t)INT32_MAX);
}

/*
 * poll() with SIGINT and SIGTERM let through only while waiting: they stay
 * blocked elsewhere, so one arriving just before the wait still wakes it.
 */
static int wait_fds(struct client *c, struct pollfd *p, nfds_t n, int timeout_ms)
{
	struct timespec ts = { .tv_sec = timeout_ms / 1000, .tv_nsec = (long)(timeout_ms % 1000) * 1000000 };
	return ppoll(p, n, timeout_ms < 0 ? NULL : &ts, &c->waitmask);
}

/* Waits for the next message until deadline (UINT64_MAX: none). */
static int client_read(struct client *c, uint64_t deadline, struct json_doc **ret)
{
	for (;;) {
		int r = client_next(c, ret);
		if (r != 0)
			return r < 0 ? r : 0;

		if (interrupted)
			return -EINTR;
		int wait = -1;
		if (deadline != UINT64_MAX) {
			uint64_t now = mono_ms();
			if (now >= deadline)
				return -ETIMEDOUT;
			wait = (int)MIN(deadline - now, (uint64_t)INT32_MAX);
		}
		struct pollfd p = { .fd = c->fd, .events = POLLIN };
		r = wait_fds(c, &p, 1, wait);
		if (r < 0 && errno != EINTR)
			return -errno;
		if (r <= 0)
			continue;
		r = client_fill(c);
		if (r < 0)
			return r;
	}
}

/*
 * True when a message answers request id, the only request waiting. An
 * answer with id null is the daemon's answer to a request it could not
 * read far enough to find its id (one over its size limit, say): with one
 * request waiting, that request is the one.
 */
static bool is_response_to(const struct json *msg, int64_t id)
{
	const struct json *v = json_get(msg, "id");
	int64_t got;
	return (json_get_int(v, &got) && got == id) || (v && v->type == JSON_NULL);
}

/* Keeps or drops a notification that arrived while waiting. */
static void client_park(struct client *c, struct json_doc *doc)
{
	if (!c->keep_events || c->n_queue >= MAX_QUEUED) {
		json_doc_unref(doc);
		return;
	}
	c->queue = xreallocarray(c->queue, c->n_queue + 1, sizeof(*c->queue));
	c->queue[c->n_queue++] = doc;
}

/* Takes the oldest parked notification (NULL when none). */
static struct json_doc *client_unpark(struct client *c)
{
	if (c->n_queue == 0)
		return NULL;
	struct json_doc *doc = c->queue[0];
	memmove(c->queue, c->queue + 1, (c->n_queue - 1) * sizeof(*c->queue));
	c->n_queue--;
	return doc;
}

/*
 * Sends a request and waits for its response. Returns 0 with the response
 * document in *ret and its result or error member; or a negative errno
 * (-ETIMEDOUT, -ECONNRESET, -EPROTO, -EINTR).
 */
static int client_call(struct client *c, const char *method, const char *params, int64_t *ret_id,
		       struct json_doc **ret, const struct json **ret_result, const struct json **ret_error)
{
	int64_t id = client_request(c, method, params);
	if (id < 0)
		return (int)id;
	if (ret_id)
		*ret_id = id;

	uint64_t deadline = c->timeout_ms < 0 ? UINT64_MAX : mono_ms() + (uint64_t)c->timeout_ms;
	for (;;) {
		struct json_doc *doc = NULL;
		int r = client_read(c, deadline, &doc);
		if (r < 0)
			return r;
		const struct json *msg = json_doc_root(doc);
		if (!json_get(msg, "id")) {
			client_park(c, doc);
			continue;
		}
		if (!is_response_to(msg, id)) {
			/* An answer to nothing we are waiting for. */
			json_doc_unref(doc);
			continue;
		}
		const struct json *result = json_get(msg, "result");
		const struct json *error = json_get(msg, "error");
		if (!!result == !!error || (error && error->type != JSON_OBJECT)) {
			json_doc_unref(doc);
			snprintf(c->why, sizeof(c->why), "a response with neither result nor error");
			return -EPROTO;
		}
		if (result && json_get(msg, "id")->type == JSON_NULL) {
			/* Only an error can answer a request whose id went unread. */
			json_doc_unref(doc);
			snprintf(c->why, sizeof(c->why), "a result with id null");
			return -EPROTO;
		}
		*ret = doc;
		*ret_result = result;
		*ret_error = error;
		return 0;
	}
}

/* Prints why a request got no answer; returns the exit status. */
static int report_failure(struct client *c, const char *method, int r)
{
	switch (r) {
	case -ETIMEDOUT:
		fprintf(stderr, "toolcallctl: %s: no answer within %lld ms\n", method,
			(long long)c->timeout_ms);
		return EXIT_TIMEOUT;
	case -EPROTO:
		fprintf(stderr, "toolcallctl: %s: toolcalld sent %s\n", method, c->why);
		return EXIT_PROTOCOL;
	case -EINTR:
		return EXIT_INTERRUPTED;
	case -ECONNRESET:
	case -EPIPE:
		fprintf(stderr, "toolcallctl: %s: toolcalld closed the connection\n", method);
		return EXIT_CONNECT;
	default:
		fprintf(stderr, "toolcallctl: %s: %s\n", method, strerror(-r));
		return EXIT_CONNECT;
	}
}

/* Prints why a result is not the answer the command needs; returns the
 * exit status. */
static int report_bad_result(struct client *c, const char *method, const char *why)
{
	snprintf(c->why, sizeof(c->why), "%s", why);
	return report_failure(c, method, -EPROTO);
}

/* Prints an error envelope on stderr (and, with --json, on stdout). */
static int report_error(const struct opts *o, const struct json *error)
{
	struct buf b = {};

	if (o->json) {
		ctl_pretty(error, &b);
		fwrite(buf_head(&b), 1, buf_size(&b), stdout);
		fflush(stdout);
		buf_clear(&b);
	}
	ctl_error_lines(error, &b);
	fwrite(buf_head(&b), 1, buf_size(&b), stderr);
	buf_free(&b);
	return EXIT_FAILED;
}

static void print_buf(struct buf *b)
{
	fwrite(buf_head(b), 1, buf_size(b), stdout);
	fflush(stdout);
	buf_free(b);
}

static void print_pretty(const struct json *v)
{
	struct buf b = {};
	ctl_pretty(v, &b);
	print_buf(&b);
}

/* Says what a result lacks, or NULL when it is an object. */
static const char *bad_object(const struct json *result)
{
	return result->type == JSON_OBJECT ? NULL : "a result that is not an object";
}

/*
 * Runs one request whose result is printed as JSON (or by show), once bad
 * (NULL: bad_object) finds nothing missing from it.
 */
static int simple_request(struct client *c, struct opts *o, const char *method, const char *params,
			  const char *(*bad)(const struct json *result), void (*show)(const struct json *result))
{
	_cleanup_doc_ struct json_doc *doc = NULL;
	const struct json *result, *error;

	int r = client_call(c, method, params, NULL, &doc, &result, &error);
	if (r < 0)
		return report_failure(c, method, r);
	if (error)
		return report_error(o, error);
	const char *why = (bad ? bad : bad_object)(result);
	if (why)
		return report_bad_result(c, method, why);
	if (o->json || !show)
		print_pretty(result);
	else
		show(result);
	return EXIT_OK;
}

/* --- commands --------------------------------------------------------------- */

static void show_pong(const struct json *result)
{
	puts("pong");
}

/* ping: is the daemon there and answering? */
static int run_ping(struct client *c, struct opts *o, char **args, int n)
{
	return simple_request(c, o, "ping", NULL, NULL, show_pong);
}

/* stats: admin/stats, pretty-printed. */
static int run_stats(struct client *c, struct opts *o, char **args, int n)
{
	return simple_request(c, o, "admin/stats", NULL, NULL, NULL);
}

/* Says what a sessions/cancel result lacks, or NULL. */
static const char *bad_cancelled(const struct json *result)
{
	int64_t n;
	if (!json_get_int(json_get(result, "cancelled"), &n) || n < 0)
		return "a result without a count of calls cancelled";
	return NULL;
}

static void show_cancelled(const struct json *result)
{
	int64_t n = 0;
	json_get_int(json_get(result, "cancelled"), &n);
	printf("cancelled %lld\n", (long long)n);
}

/* cancel: checks SESSION, an id as initialize hands them out. */
static int check_cancel(struct opts *o, char **args, int n)
{
	if (n > 0 && (!*args[0] || strlen(args[0]) > MAX_SESSION_ID)) {
		fprintf(stderr, "toolcallctl: cancel: SESSION must be a session id of 1 to %d bytes\n",
			MAX_SESSION_ID);
		return EXIT_USAGE;
	}
	return EXIT_OK;
}

/* cancel [SESSION]: sessions/cancel, for this connection's session when none is named. */
static int run_cancel(struct client *c, struct opts *o, char **args, int n)
{
	_cleanup_free_ char *params = NULL;
	if (n > 0) {
		struct buf b = {};
		struct jgen *g = jgen_new(&b);
		jgen_obj_open(g);
		jgen_kv_str(g, "sessionId", args[0]);
		jgen_obj_close(g);
		jgen_free(g);
		params = buf_steal(&b);
	}
	return simple_request(c, o, "sessions/cancel", params, bad_cancelled, show_cancelled);
}

/* Says what a page of tools/list lacks, or NULL. */
static const char *bad_tools_page(const struct json *result)
{
	const struct json *list = json_get(result, "tools");
	if (!list || list->type != JSON_ARRAY)
		return "a result without a tools array";
	for (size_t i = 0; i < list->u.arr.n; i++)
		if (!json_str(json_get(list->u.arr.items[i], "name")))
			return "a tool without a name";
	const struct json *next = json_get(result, "nextCursor");
	if (next && next->type != JSON_NULL && next->type != JSON_STRING)
		return "a nextCursor that is not a string";
	return NULL;
}

/* list: every page of tools/list, one aligned line per tool. */
static int run_list(struct client *c, struct opts *o, char **args, int n)
{
	struct json_doc **docs = NULL;
	const struct json **tools = NULL;
	size_t n_docs = 0, n_tools = 0;
	_cleanup_free_ char *cursor = NULL;
	int ret = EXIT_OK;

	/* Follow nextCursor; a daemon that keeps handing out cursors is
	 * stopped after a generous number of pages. */
	for (unsigned page = 0; page < 10000; page++) {
		_cleanup_free_ char *params = NULL;
		if (cursor) {
			struct buf b = {};
			struct jgen *g = jgen_new(&b);
			jgen_obj_open(g);
			jgen_kv_str(g, "cursor", cursor);
			jgen_obj_close(g);
			jgen_free(g);
			params = buf_steal(&b);
		}

		struct json_doc *doc = NULL;
		const struct json *result, *error;
		int r = client_call(c, "tools/list", params, NULL, &doc, &result, &error);
		if (r < 0) {
			ret = report_failure(c, "tools/list", r);
			goto out;
		}
		docs = xreallocarray(docs, n_docs + 1, sizeof(*docs));
		docs[n_docs++] = doc;
		if (error) {
			ret = report_error(o, error);
			goto out;
		}
		const char *why = bad_tools_page(result);
		if (why) {
			ret = report_bad_result(c, "tools/list", why);
			goto out;
		}
		const struct json *list = json_get(result, "tools");
		tools = xreallocarray(tools, n_tools + list->u.arr.n + 1, sizeof(*tools));
		for (size_t i = 0; i < list->u.arr.n; i++)
			tools[n_tools++] = list->u.arr.items[i];

		free(cursor);
		cursor = NULL;
		const char *next = json_str(json_get(result, "nextCursor"));
		if (!next)
			break;
		cursor = xstrdup(next);
	}

	struct buf b = {};
	if (o->json) {
		struct buf text = {};
		struct jgen *g = jgen_new(&text);
		jgen_obj_open(g);
		jgen_key(g, "tools");
		jgen_arr_open(g);
		for (size_t i = 0; i < n_tools; i++)
			jgen_value(g, tools[i]);
		jgen_arr_close(g);
		jgen_obj_close(g);
		jgen_free(g);
		_cleanup_doc_ struct json_doc *all = NULL;
		if (json_parse(buf_head(&text), buf_size(&text), 0, MAX_DEPTH + 2, &all, NULL) == 0)
			ctl_pretty(json_doc_root(all), &b);
		buf_free(&text);
	} else {
		ctl_tool_lines(tools, n_tools, &b);
	}
	print_buf(&b);
out:
	for (size_t i = 0; i < n_docs; i++)
		json_doc_unref(docs[i]);
	free(docs);
	free(tools);
	return ret;
}

/* Reads all of stdin (at most max bytes). */
static int read_stdin(size_t max, struct buf *out)
{
	for (;;) {
		buf_reserve(out, 65536);
		ssize_t n = read(STDIN_FILENO, out->data + out->len, out->cap - out->len - 1);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (n == 0)
			return 0;
		out->len += (size_t)n;
		if (out->len > max)
			return -EFBIG;
	}
}

/* call: checks JSON-ARGS (or stdin) before connecting. */
static int check_call(struct opts *o, char **args, int n)
{
	struct buf in = {};
	const char *text;
	size_t len;

	if (n < 2) {
		text = "{}";
		len = 2;
	} else if (str_eq(args[1], "-")) {
		int r = read_stdin(MAX_ARGS, &in);
		if (r < 0) {
			fprintf(stderr, "toolcallctl: reading arguments from stdin: %s\n",
				r == -EFBIG ? "more than 64 MiB" : strerror(-r));
			buf_free(&in);
			return EXIT_USAGE;
		}
		text = buf_head(&in);
		len = buf_size(&in);
	} else {
		text = args[1];
		len = strlen(text);
	}

	_cleanup_doc_ struct json_doc *doc = NULL;
	struct json_err err;
	if (json_parse(text, len, 0, 0, &doc, &err) < 0) {
		fprintf(stderr, "toolcallctl: JSON-ARGS is not valid JSON: %s at byte %zu\n", err.msg, err.offset);
		buf_free(&in);
		return EXIT_USAGE;
	}
	buf_free(&in);
	if (json_doc_root(doc)->type != JSON_OBJECT) {
		fprintf(stderr, "toolcallctl: JSON-ARGS must be a JSON object (got %s)\n",
			json_kind_name(json_doc_root(doc)));
		return EXIT_USAGE;
	}

	/* Sent compact: arguments read from a file may span lines. */
	struct buf b = {};
	struct jgen *g = jgen_new(&b);
	jgen_value(g, json_doc_root(doc));
	jgen_free(g);
	o->call_args = buf_steal(&b);
	return EXIT_OK;
}

/* Says what a tools/call result lacks, or NULL. */
static const char *bad_call_result(const struct json *result)
{
	const struct json *content = json_get(result, "content");
	if (!content || content->type != JSON_ARRAY)
		return "a result without a content array";
	const struct json *is_error = json_get(result, "isError");
	if (is_error && is_error->type != JSON_BOOL)
		return "an isError that is not a boolean";
	return NULL;
}

/* call NAME [JSON-ARGS]: tools/call; the text on success, the envelope on failure. */
static int run_call(struct client *c, struct opts *o, char **args, int n)
{
	struct buf b = {};
	struct jgen *g = jgen_new(&b);
	jgen_obj_open(g);
	jgen_kv_str(g, "name", args[0]);
	jgen_kv_raw(g, "arguments", o->call_args, strlen(o->call_args));
	jgen_obj_close(g);
	jgen_free(g);
	_cleanup_free_ char *params = buf_steal(&b);

	_cleanup_doc_ struct json_doc *doc = NULL;
	const struct json *result, *error;
	int64_t id = 0;
	int r = client_call(c, "tools/call", params, &id, &doc, &result, &error);
	if (r == -ETIMEDOUT || r == -EINTR) {
		/* Nobody waits for the call any more: let the daemon stop it. */
		_cleanup_free_ char *cancel = xasprintf("{\"requestId\":%lld,\"reason\":\"%s\"}", (long long)id,
							r == -EINTR ? "interrupted" : "client timeout");
		(void)client_notify(c, "notifications/cancelled", cancel);
	}
	if (r < 0)
		return report_failure(c, "tools/call", r);
	if (error)
		return report_error(o, error);
	const char *why = bad_call_result(result);
	if (why)
		return report_bad_result(c, "tools/call", why);

	if (o->json) {
		print_pretty(result);
		return json_is_true(json_get(result, "isError")) ? EXIT_IS_ERROR : EXIT_OK;
	}
	bool is_error = ctl_call_text(result, &b);
	print_buf(&b);
	return is_error ? EXIT_IS_ERROR : EXIT_OK;
}

/* Opens an MCP session and subscribes to the given event types. */
static int subscribe(struct client *c, struct opts *o, char **types, int n)
{
	struct buf b = {};
	struct jgen *g = jgen_new(&b);
	jgen_obj_open(g);
	jgen_kv_str(g, "protocolVersion", PROTOCOL_VERSION);
	jgen_key(g, "capabilities");
	jgen_obj_open(g);
	jgen_obj_close(g);
	jgen_key(g, "clientInfo");
	jgen_obj_open(g);
	jgen_kv_str(g, "name", "toolcallctl");
	jgen_kv_str(g, "version", TOOLCALLD_VERSION);
	jgen_obj_close(g);
	jgen_obj_close(g);
	jgen_free(g);
	_cleanup_free_ char *init = buf_steal(&b);

	c->keep_events = true;
	_cleanup_doc_ struct json_doc *doc = NULL;
	const struct json *result, *error;
	const char *why;
	int r = client_call(c, "initialize", init, NULL, &doc, &result, &error);
	if (r < 0)
		return report_failure(c, "initialize", r);
	if (error)
		return report_error(o, error);
	why = bad_object(result);
	if (why)
		return report_bad_result(c, "initialize", why);
	r = client_notify(c, "notifications/initialized", NULL);
	if (r < 0)
		return report_failure(c, "notifications/initialized", r);

	g = jgen_new(&b);
	jgen_obj_open(g);
	if (n > 0) {
		jgen_key(g, "types");
		jgen_arr_open(g);
		for (int i = 0; i < n; i++)
			jgen_str(g, types[i]);
		jgen_arr_close(g);
	}
	/* Every session of this user, not only this connection's. */
	jgen_kv_str(g, "sessionId", "*");
	jgen_obj_close(g);
	jgen_free(g);
	_cleanup_free_ char *params = buf_steal(&b);

	doc = json_doc_unref(doc);
	r = client_call(c, "events/subscribe", params, NULL, &doc, &result, &error);
	if (r < 0)
		return report_failure(c, "events/subscribe", r);
	if (error)
		return report_error(o, error);
	why = bad_object(result);
	if (why)
		return report_bad_result(c, "events/subscribe", why);
	return EXIT_OK;
}

/* The params of a notifications/event message, or NULL. */
static const struct json *event_of(const struct json *msg)
{
	if (!str_eq(json_str(json_get(msg, "method")), "notifications/event"))
		return NULL;
	const struct json *params = json_get(msg, "params");
	return params && params->type == JSON_OBJECT ? params : NULL;
}

/* Prints an event as a line (or as compact JSON with --json). */
static void print_event(const struct opts *o, const struct json *event)
{
	struct buf b = {};
	if (o->json) {
		struct jgen *g = jgen_new(&b);
		jgen_value(g, event);
		jgen_free(g);
		buf_putc(&b, '\n');
	} else {
		ctl_event_line(event, &b);
	}
	print_buf(&b);
}

/* True when p is an event pattern as the daemon takes them. */
static bool pattern_valid(const char *p)
{
	size_t n = strlen(p);
	return n > 0 && n <= MAX_PATTERN && strspn(p, "abcdefghijklmnopqrstuvwxyz"
						     "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
						     "0123456789._*") == n;
}

/* watch: checks the patterns. */
static int check_watch(struct opts *o, char **args, int n)
{
	if (n > MAX_PATTERNS) {
		fprintf(stderr, "toolcallctl: watch: at most %d patterns\n", MAX_PATTERNS);
		return EXIT_USAGE;
	}
	for (int i = 0; i < n; i++)
		if (!pattern_valid(args[i])) {
			struct buf b = {};
			ctl_sanitize(args[i], strlen(args[i]), 80, &b);
			fprintf(stderr, "toolcallctl: watch: '%s' is not an event pattern "
					"(letters, digits, '.', '_' and '*', at most %d bytes)\n",
				buf_head(&b), MAX_PATTERN);
			buf_free(&b);
			return EXIT_USAGE;
		}
	return EXIT_OK;
}

/* watch [PATTERN...]: one line per event until interrupted. */
static int run_watch(struct client *c, struct opts *o, char **args, int n)
{
	int r = subscribe(c, o, args, n);
	if (r != EXIT_OK)
		return r;

	for (;;) {
		_cleanup_doc_ struct json_doc *doc = client_unpark(c);
		if (!doc) {
			r = client_read(c, UINT64_MAX, &doc);
			if (r == -EINTR)
				return EXIT_OK;
			if (r < 0)
				return report_failure(c, "watch", r);
		}
		const struct json *event = event_of(json_doc_root(doc));
		if (event)
			print_event(o, event);
	}
}

/*
 * The state of approve: requests waiting for an answer, the one being
 * asked, and the answers typed or piped in.
 *
 * Answers must follow the question they answer. On a terminal, input
 * typed before a question appears is thrown away, so a stray "y" cannot
 * approve something nobody has read. From a pipe or a file, answers are
 * taken in order, one line per question; input is read ahead by a line,
 * so that its end is seen even when no question comes, and approve exits
 * once its input is used up and every answer sent has been acknowledged.
 */
struct approver {
	struct json_doc **pending;	/* tool.confirmation_requested messages */
	size_t n_pending;
	struct json_doc *asking;
	struct buf input;		/* stdin not yet used */
	bool input_eof;
	bool tty;
	unsigned outstanding;		/* confirmations/resolve sent, unanswered */
};

static const struct json *asked_id(struct json_doc *doc)
{
	return ctl_confirm_request_id(event_of(json_doc_root(doc)));
}

static void show_prompt(struct approver *a)
{
	struct buf b = {};
	ctl_confirm_prompt(event_of(json_doc_root(a->asking)), &b);
	print_buf(&b);
}

/* True when the input holds a whole line. */
static bool has_line(const struct approver *a)
{
	return memchr(buf_head(&a->input), '\n', buf_size(&a->input)) != NULL;
}

/* Drops a request from the queue when it was resolved elsewhere. */
static void forget_pending(struct approver *a, const struct json *id)
{
	for (size_t i = 0; i < a->n_pending; i++)
		if (json_equal(id, asked_id(a->pending[i]))) {
			json_doc_unref(a->pending[i]);
			memmove(a->pending + i, a->pending + i + 1, (a->n_pending - i - 1) * sizeof(*a->pending));
			a->n_pending--;
			return;
		}
}

/* Handles one message that arrived during approve. */
static void approve_message(struct approver *a, const struct opts *o, struct json_doc *doc)
{
	const struct json *msg = json_doc_root(doc);

	if (json_get(msg, "id")) {
		/* The answer to a confirmations/resolve. */
		const struct json *error = json_get(msg, "error");
		const struct json *result = json_get(msg, "result");
		if (a->outstanding > 0)
			a->outstanding--;
		if (error && error->type == JSON_OBJECT) {
			report_error(o, error);
		} else if (json_get(result, "accepted") && !json_is_true(json_get(result, "accepted"))) {
			struct buf b = {};
			buf_puts(&b, "toolcallctl: already resolved: ");
			const char *d = json_str(json_get(result, "decision"));
			ctl_sanitize(d ? d : "?", d ? strlen(d) : 1, 40, &b);
			fprintf(stderr, "%s\n", buf_head(&b));
			buf_free(&b);
		}
		json_doc_unref(doc);
		return;
	}

	const struct json *event = event_of(msg);
	const char *type = json_str(json_get(event, "type"));
	if (str_eq(type, "tool.confirmation_requested")) {
		a->pending = xreallocarray(a->pending, a->n_pending + 1, sizeof(*a->pending));
		a->pending[a->n_pending++] = doc;
		return;
	}
	if (str_eq(type, "tool.confirmation_resolved")) {
		const struct json *id = ctl_confirm_request_id(event);
		bool was_asked = a->asking && id && json_equal(id, asked_id(a->asking));
		if (id)
			forget_pending(a, id);
		/* Keep the open question readable: the event goes on its own
		 * line, and the question is asked again below it unless it is
		 * the one that was just resolved (elsewhere: another approver,
		 * or a timeout). */
		if (a->asking)
			fputs("\n", stdout);
		print_event(o, event);
		if (was_asked)
			a->asking = json_doc_unref(a->asking);
		else if (a->asking)
			show_prompt(a);
	}
	json_doc_unref(doc);
}

/* Answers the request being asked with one line of input. */
static int approve_answer(struct approver *a, struct client *c, const char *line, size_t len)
{
	const char *decision = ctl_parse_answer(line, len);
	/* A terminal has echoed the answer already; piped input has not, and
	 * the transcript should read the same. */
	if (!a->tty) {
		struct buf b = {};
		ctl_sanitize(line, len, 80, &b);
		buf_putc(&b, '\n');
		print_buf(&b);
	}
	if (!decision) {
		fputs("Please answer y, n or a: ", stdout);
		fflush(stdout);
		return 0;
	}

	struct buf b = {};
	struct jgen *g = jgen_new(&b);
	jgen_obj_open(g);
	jgen_key(g, "requestId");
	jgen_value(g, asked_id(a->asking));
	jgen_kv_str(g, "decision", decision);
	jgen_obj_close(g);
	jgen_free(g);
	int64_t r = client_request(c, "confirmations/resolve", buf_head(&b));
	buf_free(&b);
	a->asking = json_doc_unref(a->asking);
	if (r < 0)
		return (int)r;
	a->outstanding++;
	return 0;
}

/* Reads what stdin holds; a last line without newline still counts. */
static void approve_read_input(struct approver *a)
{
	if (buf_size(&a->input) > 65536)
		buf_clear(&a->input);	/* nobody types such a line */
	buf_reserve(&a->input, 4096);
	ssize_t k = read(STDIN_FILENO, a->input.data + a->input.len, a->input.cap - a->input.len - 1);
	if (k > 0) {
		a->input.len += (size_t)k;
		return;
	}
	if (k < 0 && (errno == EINTR || errno == EAGAIN))
		return;
	a->input_eof = true;
	if (buf_size(&a->input) > 0 && !has_line(a))
		buf_putc(&a->input, '\n');
}

/* approve: answers confirmation requests from stdin, one line each. */
static int run_approve(struct client *c, struct opts *o, char **args, int n)
{
	static char *types[] = { "tool.confirmation_requested", "tool.confirmation_resolved" };
	struct approver a = { .tty = isatty(STDIN_FILENO) };
	uint64_t drain_deadline = UINT64_MAX;
	int ret = EXIT_OK, r;

	r = subscribe(c, o, types, ELEMENTSOF(types));
	if (r != EXIT_OK)
		return r;
	c->keep_events = false;
	for (struct json_doc *doc; (doc = client_unpark(c));)
		approve_message(&a, o, doc);

	for (;;) {
		/* Messages already received come first. */
		struct json_doc *doc;
		while ((r = client_next(c, &doc)) > 0)
			approve_message(&a, o, doc);
		if (r < 0) {
			ret = report_failure(c, "approve", r);
			break;
		}

		/* Ask the next question. */
		if (!a.asking && a.n_pending > 0 && (!a.input_eof || has_line(&a))) {
			a.asking = a.pending[0];
			memmove(a.pending, a.pending + 1, (a.n_pending - 1) * sizeof(*a.pending));
			a.n_pending--;
			if (!asked_id(a.asking)) {
				fprintf(stderr, "toolcallctl: a confirmation request without requestId\n");
				a.asking = json_doc_unref(a.asking);
				continue;
			}
			if (a.tty) {
				tcflush(STDIN_FILENO, TCIFLUSH);
				buf_clear(&a.input);
			}
			show_prompt(&a);
		}

		/* A line answers it. */
		if (a.asking && has_line(&a)) {
			const char *head = buf_head(&a.input);
			size_t len = (size_t)((const char *)memchr(head, '\n', buf_size(&a.input)) - head);
			r = approve_answer(&a, c, head, len);
			buf_consume(&a.input, len + 1);
			if (r < 0) {
				ret = report_failure(c, "confirmations/resolve", r);
				break;
			}
			continue;
		}
		if (a.asking && a.input_eof) {
			/* Input ended without an answer: leave it unanswered. */
			fputs("\n", stdout);
			a.asking = json_doc_unref(a.asking);
		}

		/* Input used up: exit once the answers sent are acknowledged. */
		if (a.input_eof && !has_line(&a)) {
			if (a.outstanding == 0)
				break;
			if (drain_deadline == UINT64_MAX)
				drain_deadline = mono_ms() + (uint64_t)(c->timeout_ms < 0 ? DEFAULT_TIMEOUT_MS
										: c->timeout_ms);
		}

		int wait = -1;
		if (drain_deadline != UINT64_MAX) {
			uint64_t now = mono_ms();
			if (now >= drain_deadline)
				break;
			wait = (int)MIN(drain_deadline - now, (uint64_t)INT32_MAX);
		}
		/* A terminal is read only while it is asked something (what
		 * comes before is thrown away); other input a line ahead, so
		 * that approve sees it end and exits instead of waiting as an
		 * approver nobody answers for. */
		bool want_input = !a.input_eof && !has_line(&a) && (a.asking || !a.tty);
		struct pollfd p[2] = {
			{ .fd = c->fd, .events = POLLIN },
			{ .fd = STDIN_FILENO, .events = POLLIN },
		};
		if (interrupted)
			break;
		r = wait_fds(c, p, want_input ? 2 : 1, wait);
		if (r < 0 && errno != EINTR) {
			ret = report_failure(c, "approve", -errno);
			break;
		}
		if (r <= 0)
			continue;
		if (p[0].revents) {
			r = client_fill(c);
			if (r < 0) {
				ret = report_failure(c, "approve", r);
				break;
			}
		}
		if (want_input && p[1].revents)
			approve_read_input(&a);
	}

	for (size_t i = 0; i < a.n_pending; i++)
		json_doc_unref(a.pending[i]);
	free(a.pending);
	json_doc_unref(a.asking);
	buf_free(&a.input);
	return ret;
}

static const struct command commands[] = {
	{ .name = "ping", .args = "", .help = "check that toolcalld answers",
	  .min_args = 0, .max_args = 0, .run = run_ping },
	{ .name = "list", .args = "", .help = "list tools: name, side effects, description",
	  .min_args = 0, .max_args = 0, .run = run_list },
	{ .name = "call", .args = "NAME [JSON-ARGS|-]",
	  .help = "call a tool (default arguments {}; - reads stdin)",
	  .min_args = 1, .max_args = 2, .waits = true, .check = check_call, .run = run_call },
	{ .name = "stats", .args = "", .help = "print the daemon's counters",
	  .min_args = 0, .max_args = 0, .run = run_stats },
	{ .name = "cancel", .args = "[SESSION]",
	  .help = "cancel the calls in flight of SESSION",
	  .min_args = 0, .max_args = 1, .check = check_cancel, .run = run_cancel },
	{ .name = "watch", .args = "[PATTERN...]",
	  .help = "print events (e.g. tool.*) until interrupted",
	  .min_args = 0, .max_args = -1, .check = check_watch, .run = run_watch },
	{ .name = "approve", .args = "",
	  .help = "answer confirmation requests: y, n or a per line",
	  .min_args = 0, .max_args = 0, .run = run_approve },
};

static void usage(FILE *f)
{
	fprintf(f, "Usage: toolcallctl [-s SOCKET] [-t TIMEOUT_MS] [--json] COMMAND [ARG...]\n\n"
		   "Commands:\n");
	for (size_t i = 0; i < ELEMENTSOF(commands); i++) {
		char head[64];
		snprintf(head, sizeof(head), "%s %s", commands[i].name, commands[i].args);
		fprintf(f, "  %-28s %s\n", head, commands[i].help);
	}
	fprintf(f, "\nOptions:\n"
		   "  -s, --socket PATH       the daemon's socket (default: $TOOLCALLD_SOCKET, else\n"
		   "                          $XDG_RUNTIME_DIR/toolcalld.sock, else /run/toolcalld/toolcalld.sock)\n"
		   "  -t, --timeout MS        how long to wait for an answer; 0 waits forever\n"
		   "                          (default: %d ms, none for call)\n"
		   "  -j, --json              print results as JSON\n"
		   "  -h, --help              print this help\n"
		   "  -V, --version           print the version\n"
		   "\nExit status:\n"
		   "    0  success\n"
		   "    1  the tool ran and reported an error (isError)\n"
		   "    2  bad command line or JSON-ARGS\n"
		   "    3  cannot connect, or the daemon closed the connection\n"
		   "    4  the daemon sent something that is not a valid answer\n"
		   "    5  the daemon answered with an error (printed as error: KIND: MESSAGE)\n"
		   "    6  no answer within the timeout\n"
		   "  130  interrupted (a call in flight is cancelled)\n",
		DEFAULT_TIMEOUT_MS);
}

/* Parses -t: milliseconds, 0 meaning none. */
static int parse_timeout(const char *s, int64_t *ret)
{
	char *end;
	errno = 0;
	long long v = strtoll(s, &end, 10);
	if (errno || end == s || *end || v < 0 || v > INT32_MAX)
		return -EINVAL;
	*ret = v == 0 ? -1 : v;
	return 0;
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "socket", required_argument, NULL, 's' },
		{ "timeout", required_argument, NULL, 't' },
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{},
	};
	struct opts o = { .timeout_ms = -2 };
	int ch;

	while ((ch = getopt_long(argc, argv, "+s:t:jhV", longopts, NULL)) != -1) {
		switch (ch) {
		case 's':
			o.socket = optarg;
			break;
		case 't':
			if (parse_timeout(optarg, &o.timeout_ms) < 0) {
				fprintf(stderr, "toolcallctl: -t: expected milliseconds, not '%s'\n", optarg);
				return EXIT_USAGE;
			}
			break;
		case 'j':
			o.json = true;
			break;
		case 'h':
			usage(stdout);
			return EXIT_OK;
		case 'V':
			printf("toolcallctl %s\n", TOOLCALLD_VERSION);
			return EXIT_OK;
		default:
			usage(stderr);
			return EXIT_USAGE;
		}
	}
	if (optind >= argc) {
		usage(stderr);
		return EXIT_USAGE;
	}

	const struct command *cmd = NULL;
	for (size_t i = 0; i < ELEMENTSOF(commands); i++)
		if (str_eq(argv[optind], commands[i].name))
			cmd = &commands[i];
	if (!cmd) {
		fprintf(stderr, "toolcallctl: unknown command '%s' (try --help)\n", argv[optind]);
		return EXIT_USAGE;
	}
	char **args = argv + optind + 1;
	int n = argc - optind - 1;
	if (n < cmd->min_args || (cmd->max_args >= 0 && n > cmd->max_args)) {
		fprintf(stderr, "Usage: toolcallctl %s %s\n", cmd->name, cmd->args);
		return EXIT_USAGE;
	}
	if (cmd->check) {
		int r = cmd->check(&o, args, n);
		if (r != EXIT_OK)
			return r;
	}

	struct sigaction sa = { .sa_handler = on_signal };
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigset_t block, waitmask;
	sigemptyset(&block);
	sigaddset(&block, SIGINT);
	sigaddset(&block, SIGTERM);
	sigprocmask(SIG_BLOCK, &block, &waitmask);
	sigdelset(&waitmask, SIGINT);
	sigdelset(&waitmask, SIGTERM);

	_cleanup_free_ char *socket_path = o.socket ? xstrdup(o.socket) : default_socket_path();
	struct client c = {
		.fd = -1,
		.framer = { .max = MAX_LINE },
		.timeout_ms = o.timeout_ms != -2 ? o.timeout_ms : cmd->waits ? -1 : DEFAULT_TIMEOUT_MS,
		.waitmask = waitmask,
	};
	int r = client_connect(&c, socket_path);
	if (r < 0) {
		fprintf(stderr, "toolcallctl: cannot connect to %s: %s\n", socket_path, strerror(-r));
		free(o.call_args);
		return EXIT_CONNECT;
	}

	int ret = cmd->run(&c, &o, args, n);
	client_close(&c);
	free(o.call_args);
	return ret;
}
