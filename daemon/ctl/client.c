/* SPDX-License-Identifier: MIT */
/*
 * The connection to toolcalld: connecting, sending requests, reading and
 * framing answers with a deadline, parking notifications that arrive while
 * a response is awaited, and reporting failures and error envelopes with
 * the exit status that names them.
 */
#include "daemon/ctl/client.h"

#include <errno.h>
#include <getopt.h>
#include <grp.h>
#include <pwd.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "daemon/ctl/ctl_format.h"
#include "proto/base/buf.h"
#include "proto/json.h"
#include "proto/jsonrpc.h"
#include "proto/base/util.h"

volatile sig_atomic_t interrupted;

/* --- the connection --------------------------------------------------------- */

/* Connects to the daemon's socket. */
int client_connect(struct client *c, const char *path)
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

char *client_connect_hint(const char *path, int err)
{
	struct stat st;
	if (err == EACCES || err == EPERM) {
		if (stat(path, &st) < 0)
			return xasprintf("%s (its directory cannot be searched); ask who runs the daemon, "
					 "or use -s with a socket you may reach", strerror(err));
		struct passwd *pw = getpwuid(st.st_uid);
		_cleanup_free_ char *user = pw ? xstrdup(pw->pw_name) : xasprintf("%u", (unsigned)st.st_uid);
		struct group *gr = getgrgid(st.st_gid);
		_cleanup_free_ char *group = gr ? xstrdup(gr->gr_name) : xasprintf("%u", (unsigned)st.st_gid);
		/* Joining root's group (or a group the socket's mode does not
		 * open) would give much, or nothing: not advised. */
		if (st.st_gid == 0 || !(st.st_mode & S_IWGRP))
			return xasprintf("%s: the socket belongs to user %s and group %s (mode %04o), which "
					 "lets no other user in; ask who runs the daemon to give it a group of its "
					 "own (the socket unit's SocketGroup=, with socket_mode 0660), or use -s",
					 strerror(err), user, group, (unsigned)(st.st_mode & 07777));
		return xasprintf("%s: the socket belongs to user %s and group %s (mode %04o); join group %s "
				 "(sudo usermod -aG %s $USER, then log in again) or use -s",
				 strerror(err), user, group, (unsigned)(st.st_mode & 07777), group, group);
	}
	if (err == ENOENT || err == ECONNREFUSED)
		return xasprintf("%s: no toolcalld listens there. Start it (`toolcalld` in the workspace, or "
				 "`systemctl --user start toolcalld.socket`), or name its socket with -s.",
				 strerror(err));
	return xstrdup(strerror(err));
}

void client_close(struct client *c)
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
int64_t client_request(struct client *c, const char *method, const char *params)
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
int client_notify(struct client *c, const char *method, const char *params)
{
	struct buf b = {};
	jrpc_write_notification(&b, method, params, params ? strlen(params) : 0);
	int r = client_send(c, buf_head(&b), buf_size(&b));
	buf_free(&b);
	return r;
}

/* Takes the next complete message from the input buffer: 1 and *ret, 0
 * when none is complete yet, -EPROTO when it is not JSON. */
int client_next(struct client *c, struct json_doc **ret)
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
int client_fill(struct client *c)
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
int wait_fds(struct client *c, struct pollfd *p, nfds_t n, int timeout_ms)
{
	struct timespec ts = { .tv_sec = timeout_ms / 1000, .tv_nsec = (long)(timeout_ms % 1000) * 1000000 };
	return ppoll(p, n, timeout_ms < 0 ? NULL : &ts, &c->waitmask);
}

/* Waits for the next message until deadline (UINT64_MAX: none). */
int client_read(struct client *c, uint64_t deadline, struct json_doc **ret)
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
struct json_doc *client_unpark(struct client *c)
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
int client_call(struct client *c, const char *method, const char *params, int64_t *ret_id,
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
int report_failure(struct client *c, const char *method, int r)
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
int report_bad_result(struct client *c, const char *method, const char *why)
{
	snprintf(c->why, sizeof(c->why), "%s", why);
	return report_failure(c, method, -EPROTO);
}

/* Prints an error envelope on stderr (and, with --json, on stdout). */
int report_error(const struct opts *o, const struct json *error)
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

void print_buf(struct buf *b)
{
	fwrite(buf_head(b), 1, buf_size(b), stdout);
	fflush(stdout);
	buf_free(b);
}

void print_pretty(const struct json *v)
{
	struct buf b = {};
	ctl_pretty(v, &b);
	print_buf(&b);
}

/* Says what a result lacks, or NULL when it is an object. */
const char *bad_object(const struct json *result)
{
	return result->type == JSON_OBJECT ? NULL : "a result that is not an object";
}

/*
 * Runs one request whose result is printed as JSON (or by show), once bad
 * (NULL: bad_object) finds nothing missing from it.
 */
int simple_request(struct client *c, struct opts *o, const char *method, const char *params,
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

