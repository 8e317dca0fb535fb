/* SPDX-License-Identifier: MIT */
/*
 * A connection's input: reading into one shared buffer, line framing,
 * parsing, batches, each request handed to the layer above (after the
 * answers to the daemon's own requests are routed to them), idle
 * timeouts and a peer that shut its sending side. Here too is the turn
 * budget that keeps in-loop tool calls from starving other clients, as
 * the reading side is what it holds back: a connection over it waits in
 * the backlog, read again once its turn comes.
 */
#include "daemon/conn.h"
#include "daemon/conn_internal.h"

#include <errno.h>
#include <malloc.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>

#include "daemon/log.h"
#include "lib/base/map.h"
#include "proto/json.h"

#define READ_CHUNK (64 * 1024)
/* After a line longer than this, memory freed is handed back to the system. */
#define TRIM_ABOVE (1024 * 1024)

static void on_read(struct ev_loop *ev, ev_io *w, int revents);

static void on_idle(struct ev_loop *ev, ev_timer *w, int revents)
{
	struct conn *c = container_of(w, struct conn, idle_w);
	/* Lines waiting in the backlog, calls in flight and subscriptions
	 * (an approver or a watcher waits for events, silently) are not
	 * idleness. */
	if (list_empty(&c->pendings) && !c->backlogged && !c->listening && !c->outreqs.n) {
		log_debug("closing idle connection (fd %d)", c->fd);
		conn_close(c);
	} else if (c->listening) {
		/* Subscribed for good: no need to look again (and to wake the
		 * daemon for it). */
		ev_timer_stop(ev, w);
	} else {
		ev_timer_again(ev, w);
	}
}

void conn_new(struct conns *cs, int fd, const struct ucred *cred)
{
	struct conn *c = conn_alloc(cs, fd, cred);
	ev_io_init(&c->rw, on_read, fd, EV_READ);
	ev_io_start(cs->ev, &c->rw);
	if (cs->limits.idle_timeout_ms) {
		ev_init(&c->idle_w, on_idle);
		c->idle_w.repeat = (double)cs->limits.idle_timeout_ms / 1000.0;
		ev_timer_again(cs->ev, &c->idle_w);
	}
}

/* --- requests ---------------------------------------------------------- */

/* Handles one element of a message: a request, a notification, an answer
 * to the daemon's own request, or junk. */
static void handle_value(struct conn *c, struct json_doc *doc, const struct json *v, struct batch *b,
			 size_t *index)
{
	if (conn_is_response(v)) {
		outreqs_take(&c->outreqs, v, c->fd);
		return;
	}
	struct jrpc_req req;
	const char *why = NULL;
	int r = jrpc_parse_request(v, json_doc_text(doc), &req, &why);
	req.doc = doc;
	if (r < 0) {
		/* Not a request, whatever id it may hold: answered with id
		 * null, as JSON-RPC 2.0 says for an Invalid Request. */
		struct pending *p = conn_pending_new(c, b, b ? (*index)++ : 0, NULL, 0);
		char *msg = xasprintf("Invalid Request: %s", why);
		conn_error(p, JRPC_INVALID_REQUEST, msg, NULL);
		free(msg);
		return;
	}
	if (!req.id) {
		c->conns->on_request(c, &req, NULL);
		return;
	}
	struct pending *p = conn_pending_new(c, b, b ? (*index)++ : 0, req.id, req.id_len);
	if (map_size(c->ids) && map_get(c->ids, p->id)) {
		conn_error(p, JRPC_INVALID_REQUEST,
			   "Invalid Request: a request with this id is still in flight on this connection",
			   "{\"kind\":\"duplicate_id\"}");
		return;
	}
	/* Most requests are answered inside on_request; only those still
	 * waiting afterwards are in flight and need their id remembered. */
	pending_hold(p);
	c->conns->on_request(c, &req, p);
	if (!p->answered) {
		map_put(c->ids, p->id, p);
		p->tracked = true;
	}
	pending_release(p);
}

/* Answers a line that is no request with id null. */
static void refuse_line(struct conn *c, int code, const char *msg)
{
	struct pending *p = conn_pending_new(c, NULL, 0, NULL, 0);
	conn_error(p, code, msg, NULL);
}

/* Parses and dispatches one line. */
static void handle_line(struct conn *c, const char *line, size_t len)
{
	struct json_doc *doc = NULL;
	struct json_err err;
	if (json_parse(line, len, 0, c->conns->limits.max_json_depth, &doc, &err) < 0) {
		_cleanup_free_ char *msg = NULL;
		if (err.code == JSON_ERR_DEPTH) {
			msg = xasprintf("Invalid Request: %s", err.msg);
			refuse_line(c, JRPC_INVALID_REQUEST, msg);
			return;
		}
		msg = xasprintf("Parse error: %s at byte %zu", err.msg, err.offset);
		refuse_line(c, JRPC_PARSE_ERROR, msg);
		return;
	}
	const struct json *root = json_doc_root(doc);
	const char *src = json_doc_text(doc);
	if (root->type != JSON_ARRAY) {
		handle_value(c, doc, root, NULL, NULL);
		json_doc_unref(doc);
		return;
	}
	if (root->u.arr.n == 0) {
		refuse_line(c, JRPC_INVALID_REQUEST, "Invalid Request: empty batch");
		json_doc_unref(doc);
		return;
	}
	/* The answer to a batch grows with its length, by far more than
	 * the line did ("[1,1,...]" gets an error object per element). */
	uint32_t max_batch = c->conns->limits.max_batch;
	if (root->u.arr.n > max_batch) {
		_cleanup_free_ char *msg = xasprintf("Invalid Request: a batch of %zu requests is more than the %u "
						     "allowed (limits.max_batch); send it in parts",
						     root->u.arr.n, max_batch);
		refuse_line(c, JRPC_INVALID_REQUEST, msg);
		json_doc_unref(doc);
		return;
	}
	/* Count the answers the batch will hold: every element but valid
	 * notifications. */
	size_t answers = 0;
	for (size_t i = 0; i < root->u.arr.n; i++) {
		struct jrpc_req req;
		const char *why;
		if (conn_is_response(root->u.arr.items[i]))
			continue;
		if (jrpc_parse_request(root->u.arr.items[i], src, &req, &why) < 0 || req.id)
			answers++;
	}
	struct batch *b = NULL;
	if (answers) {
		b = xcalloc(1, sizeof(*b));
		b->n = answers;
		/* One extra reference while we are still filling it, so it is
		 * written only after every element has been looked at. */
		b->remaining = answers + 1;
		b->slots = xcalloc(answers, sizeof(char *));
		b->lens = xcalloc(answers, sizeof(size_t));
	}
	size_t index = 0;
	for (size_t i = 0; i < root->u.arr.n && !c->dead; i++)
		handle_value(c, doc, root->u.arr.items[i], b, &index);
	if (b) {
		/* Members never looked at (the connection closed midway) have
		 * no answer to wait for. */
		b->remaining -= answers - index;
		if (--b->remaining == 0) {
			if (!c->dead)
				conn_batch_write(c, b);
			conn_batch_free(c, b);
		} else if (!c->dead) {
			/* The batch waits for some of its calls: the ids of those
			 * answered already stay taken until it is written. */
			for (size_t i = 0; i < root->u.arr.n; i++) {
				struct jrpc_req req;
				const char *why;
				if (jrpc_parse_request(root->u.arr.items[i], src, &req, &why) < 0 || !req.id)
					continue;
				char *id = xstrndup(req.id, req.id_len);
				if (!map_get(c->ids, id))
					conn_batch_hold_id(c, b, id);
				free(id);
			}
		}
	}
	json_doc_unref(doc);
}

/* True for a line that may start tool calls: a tools/call request, or a
 * batch holding one. By its text: a miss (the method name written with
 * escapes) costs fairness, never correctness. */
static bool may_run_tools(const char *line, size_t len)
{
	return memmem(line, len, "tools/call", 10) != NULL;
}

/*
 * Frames and handles what is buffered. File tools run in the loop, so
 * without a bound one client's burst of writes, each with its fsync, would
 * hold every other client up until all were done. Once the loop turn's
 * budget for tool calls is spent, or when other connections already wait
 * for their turn (no cutting in line), a line that may start a tool call
 * is put back: the connection joins the backlog with it and the lines
 * after it (their order kept) and stops reading (its client's sends wait
 * in the kernel) until it has caught up. Other lines (ping, cancellations,
 * confirmations) are handled at once. serving: the backlog is being
 * served, this connection's turn has come. must_progress: handle at least
 * one line whatever the budget (the head of the backlog, so that it always
 * moves on).
 */
static void process_input(struct conn *c, bool serving, bool must_progress)
{
	struct conns *cs = c->conns;
	while (!c->dead && !c->paused && !c->input_waits) {
		size_t off = c->in.off, len_before = c->in.len;
		const char *line;
		size_t len;
		enum frame_result fr = framer_next(&c->framer, &c->in, &line, &len);
		if (fr == FRAME_NONE)
			break;
		bool wait = cs->turn_over || (!serving && !list_empty(&cs->backlog));
		if (fr == FRAME_LINE && wait && !must_progress && may_run_tools(line, len)) {
			/* Put the line back (consuming never moves the bytes). */
			c->in.off = off;
			c->in.len = len_before;
			if (!c->backlogged) {
				c->backlogged = true;
				ev_io_stop(cs->ev, &c->rw);
			}
			if (!list_linked(&c->backlog_node))
				list_insert_tail(&cs->backlog, &c->backlog_node);
			return;
		}
		must_progress = false;
		if (fr == FRAME_TOO_LONG) {
			_cleanup_free_ char *msg = xasprintf("Invalid Request: message longer than %zu bytes",
							     c->framer.max);
			refuse_line(c, JRPC_INVALID_REQUEST, msg);
			continue;
		}
		/* The framer consumed the line; its bytes stay in place until
		 * the input buffer is next written to, which handle_line never
		 * does (json_parse copies what it keeps). */
		handle_line(c, line, len);
		/* A huge line's tree (tens of bytes per value) is freed by
		 * now, but malloc keeps the pages: give them back. */
		if (len > TRIM_ABOVE)
			malloc_trim(0);
	}
	if (list_linked(&c->backlog_node))
		list_remove(&c->backlog_node);
	if (c->backlogged) {
		/* Caught up (or paused, or closed): reading resumes, unless
		 * output backpressure or the peer's EOF says otherwise. */
		c->backlogged = false;
		if (!c->dead && !c->paused && !c->input_waits && !c->read_closed)
			ev_io_start(cs->ev, &c->rw);
	}
}

/* --- the turn ---------------------------------------------------------- */

/*
 * The turn budget. File tools run in the loop, so their time is everyone's
 * wait: once the tool calls started in one loop turn have taken
 * limits.turn_budget_us, connections stop handling lines until the next turn,
 * which polls first (so other clients are read and answered in between).
 * The head of the backlog always gets a line, so waiting connections move
 * on. Calls that run as child processes take next to no loop time.
 */
void conn_work_begin(struct conn *c)
{
	struct conns *cs = c->conns;
	if (!cs->turn_start_ns)
		cs->turn_start_ns = mono_ns();
}

void conn_work_end(struct conn *c)
{
	struct conns *cs = c->conns;
	if (mono_ns() - cs->turn_start_ns >= (uint64_t)cs->limits.turn_budget_us * 1000)
		cs->turn_over = true;
}

/* Lets connections in the backlog handle more of their lines. */
static void run_backlog(struct conns *cs)
{
	/* Oldest first. The first always gets a line, so the backlog moves
	 * on however busy the turns are; the others only while the budget
	 * lasts. One that stops again goes to the end; none runs twice in a
	 * turn. */
	size_t n = 0;
	for (struct list *pos = cs->backlog.next; pos != &cs->backlog; pos = pos->next)
		n++;
	for (size_t k = 0; k < n && !list_empty(&cs->backlog); k++) {
		if (k && cs->turn_over)
			break;
		struct conn *c = list_first(&cs->backlog, struct conn, backlog_node);
		list_remove(&c->backlog_node);
		conn_hold(c);
		process_input(c, true, k == 0);
		conn_release(c);
	}
}

void conns_before_poll(struct conns *cs)
{
	if (!list_empty(&cs->backlog))
		run_backlog(cs);
	while (!list_empty(&cs->dirty)) {
		struct conn *c = list_first(&cs->dirty, struct conn, dirty_node);
		list_remove(&c->dirty_node);
		conn_flush(c);
	}
	conns_evict(cs);
	conns_reap(cs);
	/* The next turn: its budget is whole again. */
	cs->turn_start_ns = 0;
	cs->turn_over = false;
	/* Lines still waiting: the next poll must not block. */
	if (!list_empty(&cs->backlog))
		ev_idle_start(cs->ev, &cs->kick);
}

void conns_drop_backlog(struct conns *cs)
{
	while (!list_empty(&cs->backlog))
		list_remove(cs->backlog.next);
}

/* --- the end of the input ---------------------------------------------- */

/* True when the peer closed both directions (not just its sending side). */
static bool peer_gone(int fd)
{
	struct pollfd p = { .fd = fd, .events = 0 };
	return poll(&p, 1, 0) > 0 && (p.revents & (POLLHUP | POLLERR));
}

static void on_hup_check(struct ev_loop *ev, ev_timer *w, int revents)
{
	struct conn *c = container_of(w, struct conn, idle_w);
	if (peer_gone(c->fd))
		conn_close(c);
}

/*
 * The peer sent EOF. A client that only shut its sending side (socat at the
 * end of its input does) still waits for its answers: keep the connection
 * until they are out. A peer that closed both ways has gone away.
 */
static void half_closed(struct conn *c)
{
	if (list_empty(&c->pendings) && !buf_size(&c->out)) {
		conn_close(c);
		return;
	}
	if (peer_gone(c->fd)) {
		conn_close(c);
		return;
	}
	struct ev_loop *ev = c->conns->ev;
	c->read_closed = true;
	ev_io_stop(ev, &c->rw);
	/* epoll cannot wait for a hang-up alone: look now and then. */
	ev_timer_stop(ev, &c->idle_w);
	ev_init(&c->idle_w, on_hup_check);
	c->idle_w.repeat = 0.25;
	ev_timer_again(ev, &c->idle_w);
}

void conn_wait_input(struct conn *c)
{
	c->input_waits = true;
	ev_io_stop(c->conns->ev, &c->rw);
}

void conn_go_on_input(struct conn *c)
{
	struct conns *cs = c->conns;
	if (!c->input_waits || c->dead)
		return;
	c->input_waits = false;
	if (!c->paused && !c->backlogged && !c->read_closed)
		ev_io_start(cs->ev, &c->rw);
	/* Lines read before the hold are handled on the next iteration. */
	ev_feed_event(cs->ev, &c->rw, EV_CUSTOM);
	ev_idle_start(cs->ev, &cs->kick);
}

static void read_input(struct ev_loop *ev, struct conn *c, int revents)
{
	/* A connection in the backlog reads nothing more until it has
	 * caught up: what it buffers stays bounded. */
	if ((revents & EV_READ) && !c->backlogged) {
		/* Read into one shared buffer and keep only what a connection
		 * needs: idle connections then cost a few hundred bytes. */
		static char rbuf[READ_CHUNK];
		ssize_t n = recv(c->fd, rbuf, sizeof(rbuf), 0);
		if (n == 0) {
			/* A last line without its newline ends with the input
			 * (printf '{...}' | socat ...): it is a line all the
			 * same, unless it is the rest of one too long. */
			size_t left = buf_size(&c->in);
			if (left && buf_head(&c->in)[left - 1] != '\n' && !c->framer.discarding)
				buf_putc(&c->in, '\n');
			if (buf_size(&c->in)) {
				process_input(c, false, false);
				if (c->dead || c->backlogged || c->paused || c->input_waits)
					return;	/* EOF is read again once caught up */
			}
			half_closed(c);
			return;
		}
		if (n < 0) {
			if (errno == EAGAIN || errno == EINTR)
				return;
			conn_close(c);
			return;
		}
		buf_append(&c->in, rbuf, (size_t)n);
		conn_account(c);
		if (c->conns->limits.idle_timeout_ms)
			ev_timer_again(ev, &c->idle_w);
	}
	process_input(c, false, false);
	if (!c->dead && buf_size(&c->in) == 0 && c->in.cap > CONN_SHRINK_ABOVE) {
		buf_free(&c->in);
		conn_account(c);
	}
}

/* Reads and handles what came. Requests are handled here, and may end
 * anything, their connection included: held, c stays in memory until
 * this returns. */
static void on_read(struct ev_loop *ev, ev_io *w, int revents)
{
	struct conn *c = container_of(w, struct conn, rw);
	conn_hold(c);
	read_input(ev, c, revents);
	conn_release(c);
}
