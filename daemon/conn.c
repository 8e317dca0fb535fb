/* SPDX-License-Identifier: MIT */
/*
 * Connections: bounded input and output buffers, line framing, parsing,
 * batches, requests waiting for answers, and backpressure (a client that
 * stops reading stops being read, so the daemon never buffers without
 * bound). A connection is stopped and closed at once when it goes; its
 * calls are detached from the dispatcher (keyed ones run on for the cache).
 * Each request goes to the server's request sink (methods_handle); the
 * turn budget that keeps in-loop tool calls from starving other clients
 * lives here too, as the reading side is what it holds back.
 *
 * Long because reading, batches, answers and back-pressure all work on the
 * same buffers and pendings; split, each part would reach into the others.
 */
#include "daemon/conn.h"
#include "daemon/conn_requests.h"
#include "daemon/durable.h"

#include <errno.h>
#include <malloc.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "daemon/log.h"
#include "daemon/peers.h"
#include "daemon/server.h"
#include "lib/dispatch.h"
#include "lib/map.h"
#include "lib/session.h"
#include "lib/workspace.h"
#include "proto/json.h"

#define READ_CHUNK (64 * 1024)
/* Empty buffers larger than this are given back. */
#define SHRINK_ABOVE (16 * 1024)
/* A batch member's answer this small is always kept, whatever the batch holds. */
#define BATCH_SMALL_ANSWER 4096
/* After a line longer than this, memory freed is handed back to the system. */
#define TRIM_ABOVE (1024 * 1024)

static void on_read(struct ev_loop *ev, ev_io *w, int revents);
static void maybe_finish(struct conn *c);
static void on_write(struct ev_loop *ev, ev_io *w, int revents);

/* Counts what the connection holds now (its buffers and the answers of
 * its unwritten batches) into the server's total and its uid's (checked
 * against the bounds before each poll). */
static inline void account(struct conn *c)
{
	size_t now = c->in.cap + c->out.cap + c->held;
	int64_t delta = (int64_t)now - (int64_t)c->memory;
	if (!delta)
		return;
	c->srv->client_memory += (uint64_t)delta;
	peers_charge(&c->srv->peers, c->peer, delta);
	c->memory = now;
}

static void on_idle(struct ev_loop *ev, ev_timer *w, int revents)
{
	struct conn *c = container_of(w, struct conn, idle_w);
	/* Lines waiting in the backlog, calls in flight and subscriptions
	 * (an approver or a watcher waits for events, silently) are not
	 * idleness. */
	if (list_empty(&c->pendings) && !c->backlogged && !c->sub && !c->n_outreqs) {
		log_debug("closing idle connection (fd %d)", c->fd);
		conn_close(c);
	} else if (c->sub) {
		/* Subscribed for good: no need to look again (and to wake the
		 * daemon for it). */
		ev_timer_stop(ev, w);
	} else {
		ev_timer_again(ev, w);
	}
}

void conn_new(struct server *s, int fd, const struct ucred *cred)
{
	struct conn *c = xcalloc(1, sizeof(*c));
	c->srv = s;
	c->fd = fd;
	c->cred = *cred;
	c->framer.max = s->cfg.limits.max_message_bytes;
	c->ids = map_new();
	list_init(&c->pendings);
	list_init(&c->outreqs);
	list_init(&c->dirty_node);
	list_init(&c->backlog_node);
	list_insert_tail(&s->conns, &c->node);
	c->peer = peers_join(&s->peers, cred->uid);
	list_insert_tail(&c->peer->members, &c->peer_node);
	s->n_conns++;
	s->conns_total++;
	ev_io_init(&c->rw, on_read, fd, EV_READ);
	ev_io_init(&c->ww, on_write, fd, EV_WRITE);
	ev_io_start(s->ev, &c->rw);
	if (s->cfg.limits.idle_timeout_ms) {
		ev_init(&c->idle_w, on_idle);
		c->idle_w.repeat = (double)s->cfg.limits.idle_timeout_ms / 1000.0;
		ev_timer_again(s->ev, &c->idle_w);
	}
}

/*
 * The value in conn->ids of a batch member that was answered while its
 * batch waits for others: its id stays taken until the batch is written,
 * so that no other answer with that id can come before the batch's.
 */
static char id_held;
#define ID_HELD ((void *)&id_held)

/* Keeps id taken on c until batch b is written. */
static void batch_hold_id(struct conn *c, struct batch *b, const char *id)
{
	map_put(c->ids, id, ID_HELD);
	b->held = xreallocarray(b->held, b->n_held + 1, sizeof(*b->held));
	b->held[b->n_held++] = xstrdup(id);
}

static void batch_free(struct conn *c, struct batch *b)
{
	c->held -= b->bytes;
	if (!c->dead)
		account(c);
	for (size_t i = 0; i < b->n_held; i++) {
		if (map_get(c->ids, b->held[i]) == ID_HELD)
			map_remove(c->ids, b->held[i]);
		free(b->held[i]);
	}
	free(b->held);
	for (size_t i = 0; i < b->n; i++)
		free(b->slots[i]);
	free(b->slots);
	free(b->lens);
	free(b);
}

struct pending *conn_pending_by_id(struct conn *c, const char *id)
{
	struct pending *p = map_get(c->ids, id);
	return p == ID_HELD ? NULL : p;
}

/* Room for ids in a reusable pending, and how many are kept. Under
 * AddressSanitizer none are: a freed pending must stay poisoned for a use
 * after free to be caught. */
#define PENDING_ID_ROOM 48
#if defined(__SANITIZE_ADDRESS__)
#define SPARE_PENDINGS 0
#else
#define SPARE_PENDINGS 256
#endif

/* Frees a pending request (keeping it for reuse when it is of the common
 * size); its batch goes with its last member. */
static void pending_free(struct pending *p)
{
	if (p->tracked) {
		/* remaining > 1: the batch is not written yet. */
		if (p->batch && p->batch->remaining > 1)
			batch_hold_id(p->conn, p->batch, p->id);
		else
			map_remove(p->conn->ids, p->id);
	}
	if (p->conn->watch == p)
		p->conn->watch = NULL;
	list_remove(&p->node);
	if (p->upper_free)
		p->upper_free(p->upper);
	if (p->batch && --p->batch->remaining == 0)
		batch_free(p->conn, p->batch);
	struct server *s = p->conn->srv;
	s->n_pendings--;
	static const unsigned spare_max = SPARE_PENDINGS;
	if (p->id_cap == PENDING_ID_ROOM && s->n_spare_pendings < spare_max) {
		list_insert_tail(&s->spare_pendings, &p->node);
		s->n_spare_pendings++;
		return;
	}
	free(p);
}

void conn_free_spares(struct server *s)
{
	while (!list_empty(&s->spare_pendings)) {
		struct pending *p = list_first(&s->spare_pendings, struct pending, node);
		list_remove(&p->node);
		free(p);
	}
	s->n_spare_pendings = 0;
}

void conn_close(struct conn *c)
{
	if (c->dead)
		return;
	struct server *s = c->srv;
	c->dead = true;
	ev_io_stop(s->ev, &c->rw);
	ev_io_stop(s->ev, &c->ww);
	ev_timer_stop(s->ev, &c->idle_w);
	if (list_linked(&c->dirty_node))
		list_remove(&c->dirty_node);
	if (list_linked(&c->backlog_node))
		list_remove(&c->backlog_node);
	/* Flush what can be flushed without waiting. */
	if (buf_size(&c->out))
		(void)!send(c->fd, buf_head(&c->out), buf_size(&c->out), MSG_NOSIGNAL | MSG_DONTWAIT);
	close(c->fd);
	c->fd = -1;
	s->client_memory -= c->memory;
	peers_charge(&s->peers, c->peer, -(int64_t)c->memory);
	c->memory = 0;
	bool subscribed = c->sub != NULL;
	event_unsubscribe(c->sub);
	c->sub = NULL;
	/* Detach calls: keyed executions run on, the others are cancelled
	 * (with the dispatcher held, so that none of them starts in a slot
	 * another one freed). A batch's answered siblings keep their slots
	 * until the last member goes. */
	dispatch_hold(s->dispatcher);
	while (!list_empty(&c->pendings)) {
		struct pending *p = list_first(&c->pendings, struct pending, node);
		if (p->caller) {
			struct caller *caller = TAKE_PTR(p->caller);
			dispatch_detach(caller);
		}
		pending_free(p);
	}
	dispatch_release(s->dispatcher);
	/* The daemon's own requests learn that no answer will come (after
	 * the calls went: none of them is answered on a closed connection). */
	conn_requests_end(c);
	durable_conn_closed(c);
	if (subscribed)
		dispatch_approvers_left(s->dispatcher);
	list_remove(&c->node);
	s->n_conns--;
	list_remove(&c->peer_node);
	peers_leave(&s->peers, TAKE_PTR(c->peer));
	session_unref(TAKE_PTR(c->session));
	/* Freed after the current callback returns (conn_reap): code up the
	 * stack may still look at c->dead. */
	list_insert_tail(&s->graveyard, &c->node);
}

void conn_reap(struct server *s)
{
	while (!list_empty(&s->graveyard)) {
		struct conn *c = list_first(&s->graveyard, struct conn, node);
		list_remove(&c->node);
		map_free(c->ids);
		buf_free(&c->in);
		buf_free(&c->out);
		free(c->ev_ends);
		free(c);
	}
}

struct session *conn_session(struct conn *c)
{
	if (!c->session) {
		struct session *s = NULL;
		if (session_get(c->srv->sessions, NULL, c->cred.uid, c->srv->default_ws, &s) == 0) {
			conn_session_peer(c, s);
			c->session = s;
		}
	}
	return c->session;
}

/* Gives a session whom its calls act as: this connection's peer, with its
 * groups as the kernel recorded them at connect. */
void conn_session_peer(struct conn *c, struct session *s)
{
	if (s->has_ident)
		return;
	struct identity id = {0};
	/* Without the groups, the primary group only: fewer rights, never more. */
	if (identity_from_socket(c->fd, &id) < 0 || id.uid != c->cred.uid) {
		identity_clear(&id);
		id = (struct identity){ .uid = c->cred.uid, .gid = c->cred.gid };
	}
	session_set_peer(s, &id, c->srv->cfg.sandbox.run_as_peer);
	identity_clear(&id);
}

/* Pauses or resumes reading as queued output crosses the limits. */
static void update_backpressure(struct conn *c)
{
	if (c->read_closed)
		return;
	size_t max = c->srv->cfg.limits.max_output_bytes;
	size_t queued = buf_size(&c->out);
	if (!c->paused && queued > max) {
		c->paused = true;
		ev_io_stop(c->srv->ev, &c->rw);
	} else if (c->paused && queued <= max / 2) {
		c->paused = false;
		if (!c->backlogged)
			ev_io_start(c->srv->ev, &c->rw);
		/* Lines that arrived while paused are still buffered: handle
		 * them on the next iteration, which must not block first (this
		 * runs while the output is flushed, just before the poll). */
		ev_feed_event(c->srv->ev, &c->rw, EV_CUSTOM);
		ev_idle_start(c->srv->ev, &c->srv->kick);
	}
}

void conn_flush(struct conn *c)
{
	if (c->dead)
		return;
	while (buf_size(&c->out)) {
		ssize_t n = send(c->fd, buf_head(&c->out), buf_size(&c->out), MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN) {
				ev_io_start(c->srv->ev, &c->ww);
				break;
			}
			log_debug("write to client failed: %s", strerror(errno));
			conn_close(c);
			return;
		}
		buf_consume(&c->out, (size_t)n);
		c->written_total += (uint64_t)n;
	}
	if (!buf_size(&c->out)) {
		ev_io_stop(c->srv->ev, &c->ww);
		if (c->out.cap > SHRINK_ABOVE) {
			buf_free(&c->out);
			account(c);
		}
		if (c->read_closed && list_empty(&c->pendings)) {
			conn_close(c);
			return;
		}
	}
	/* Events that left the buffer no longer count against the queue. */
	while (c->ev_count && c->ev_ends[c->ev_head] <= c->written_total) {
		c->ev_head = (c->ev_head + 1) % c->ev_cap;
		c->ev_count--;
	}
	update_backpressure(c);
}

static void on_write(struct ev_loop *ev, ev_io *w, int revents)
{
	conn_flush(container_of(w, struct conn, ww));
}

void conn_send(struct conn *c, const char *json, size_t n)
{
	if (c->dead)
		return;
	buf_append(&c->out, json, n);
	buf_putc(&c->out, '\n');
	c->queued_total += n + 1;
	account(c);
	if (!list_linked(&c->dirty_node))
		list_insert_tail(&c->srv->dirty, &c->dirty_node);
	if (buf_size(&c->out) > c->srv->cfg.limits.max_output_bytes)
		update_backpressure(c);
}

/* Ends an answer written straight into the output buffer. */
static void direct_done(struct conn *c, size_t before)
{
	buf_putc(&c->out, '\n');
	c->queued_total += buf_size(&c->out) - before;
	account(c);
	if (!list_linked(&c->dirty_node))
		list_insert_tail(&c->srv->dirty, &c->dirty_node);
	if (buf_size(&c->out) > c->srv->cfg.limits.max_output_bytes)
		update_backpressure(c);
}

void conn_notify(struct conn *c, const char *method, const char *params, size_t n)
{
	if (c->dead)
		return;
	size_t before = buf_size(&c->out);
	jrpc_write_notification(&c->out, method, params, n);
	direct_done(c, before);
}

bool conn_deliver_event(void *ctx, const char *params, size_t n)
{
	struct conn *c = ctx;
	if (c->dead)
		return false;
	unsigned cap = c->srv->cfg.limits.event_queue ? c->srv->cfg.limits.event_queue : 1024;
	if (c->ev_cap != cap) {
		/* First use (or a reload changed the limit): start afresh. */
		free(c->ev_ends);
		c->ev_ends = xcalloc(cap, sizeof(*c->ev_ends));
		c->ev_cap = cap;
		c->ev_head = c->ev_count = 0;
	}
	if (c->ev_count >= c->ev_cap || buf_size(&c->out) > c->srv->cfg.limits.max_output_bytes)
		return false;
	conn_notify(c, "notifications/event", params, n);
	c->ev_ends[(c->ev_head + c->ev_count) % c->ev_cap] = c->queued_total;
	c->ev_count++;
	return true;
}


/* Writes a finished batch as one array, straight into the output queue;
 * nothing when every call in it was dropped (JSON-RPC never answers with
 * an empty array). */
static void batch_write(struct conn *c, struct batch *b)
{
	size_t total = 0, filled = 0;
	for (size_t i = 0; i < b->n; i++) {
		if (b->slots[i]) {
			total += b->lens[i] + 1;
			filled++;
		}
	}
	if (!filled)
		return;
	size_t before = buf_size(&c->out);
	buf_reserve(&c->out, total + 2);
	buf_putc(&c->out, '[');
	bool first = true;
	for (size_t i = 0; i < b->n; i++) {
		if (!b->slots[i])
			continue;
		if (!first)
			buf_putc(&c->out, ',');
		first = false;
		buf_append(&c->out, b->slots[i], b->lens[i]);
	}
	buf_putc(&c->out, ']');
	direct_done(c, before);
}

/* Files a batch member's answer, taking the text in b; the batch is
 * written when its last answer arrives (the one whose pending_free()
 * would drop remaining to zero). */
static void batch_answer(struct pending *p, struct buf *b)
{
	struct batch *bt = p->batch;
	/* A batch is written whole, so its answers are held until the last:
	 * bounded by what a client may have queued. Past it a large answer
	 * is replaced by an error saying so (small ones always fit). */
	size_t limit = p->conn->srv->cfg.limits.max_output_bytes;
	if (buf_size(b) > BATCH_SMALL_ANSWER && bt->bytes + buf_size(b) > limit) {
		char *msg = xasprintf("The answer (%zu bytes) was dropped: the answers of this batch went past "
				      "limits.max_output_bytes (%zu bytes). The call did run; send calls with large "
				      "answers on their own", buf_size(b), limit);
		/* Not kept in the answer's own buffer: it may have grown to
		 * twice the answer, and held until the batch is written. */
		buf_free(b);
		jrpc_write_error(b, p->id, p->id_len, JRPC_INTERNAL_ERROR, msg,
				 "{\"kind\":\"overloaded\",\"retryable\":true}", 38);
		free(msg);
	}
	/* Held as long as it is, no longer: the batch grows with what is
	 * answered. */
	size_t n = buf_size(b);
	bool slack = b->cap > n + n / 8 + 64;
	char *text = buf_steal(b);
	if (slack)
		text = xrealloc(text, n + 1);
	bt->bytes += n;
	p->conn->held += n;
	if (!p->conn->dead)
		account(p->conn);
	p->caller = NULL;
	bt->lens[p->index] = n;
	bt->slots[p->index] = text;
	if (bt->remaining == 1 && !p->conn->dead)
		batch_write(p->conn, bt);
	pending_free(p);
}

void conn_drop(struct pending *p)
{
	struct conn *c = p->conn;
	p->caller = NULL;
	pending_free(p);
	maybe_finish(c);
}

/*
 * Where an answer is written: straight into the output queue in the common
 * case, or into a buffer of its own for a member of a batch (kept until the
 * batch is whole) or when the connection is gone. Returns the buffer;
 * *ret_before is what the queue held.
 */
static struct buf *answer_begin(struct pending *p, struct buf *own, size_t *ret_before)
{
	*ret_before = 0;
	if (p->batch || p->conn->dead) {
		*own = (struct buf){0};
		buf_reserve(own, 256);
		return own;
	}
	*ret_before = buf_size(&p->conn->out);
	return &p->conn->out;
}

/* Ends an answer begun with answer_begin. */
static void answer_end(struct pending *p, struct buf *out, size_t before)
{
	struct conn *c = p->conn;
	if (p->batch) {
		batch_answer(p, out);
		return;
	}
	if (out == &c->out)
		direct_done(c, before);
	else
		buf_free(out);	/* the connection is gone */
	p->caller = NULL;
	pending_free(p);
}

void conn_result(struct pending *p, const char *result, size_t n)
{
	struct buf own, *out;
	size_t before;
	out = answer_begin(p, &own, &before);
	jrpc_write_result(out, p->id, p->id_len, result, n);
	answer_end(p, out, before);
}

void conn_result_with(struct pending *p, void (*write)(const void *arg, struct buf *out), const void *arg)
{
	struct buf own, *out;
	size_t before;
	out = answer_begin(p, &own, &before);
	jrpc_write_result_head(out, p->id, p->id_len);
	write(arg, out);
	buf_putc(out, '}');
	answer_end(p, out, before);
}

void conn_error(struct pending *p, int code, const char *message, const char *data)
{
	struct buf own, *out;
	size_t before;
	out = answer_begin(p, &own, &before);
	jrpc_write_error(out, p->id, p->id_len, code, message, data, data ? strlen(data) : 0);
	answer_end(p, out, before);
}

static struct pending *pending_new(struct conn *c, struct batch *b, size_t index, const char *id, size_t id_len)
{
	/* Most ids are short: those pendings are kept for reuse when freed
	 * (a request's answer is often written before the next is read), so
	 * a stream of small requests allocates nothing. Longer ids take their
	 * own allocation, bounded as the id is part of a line within the
	 * line limit. */
	struct server *s = c->srv;
	size_t cap = id && id_len + 1 > PENDING_ID_ROOM ? id_len + 1 : PENDING_ID_ROOM;
	struct pending *p;
	if (cap == PENDING_ID_ROOM && !list_empty(&s->spare_pendings)) {
		p = list_first(&s->spare_pendings, struct pending, node);
		list_remove(&p->node);
		s->n_spare_pendings--;
		memset(p, 0, sizeof(*p));
	} else {
		p = xcalloc(1, sizeof(*p) + cap);
	}
	p->id_cap = cap;
	p->conn = c;
	s->n_pendings++;
	p->batch = b;
	p->index = index;
	if (id) {
		memcpy(p->id_text, id, id_len);
		p->id_text[id_len] = '\0';
		p->id = p->id_text;
		p->id_len = id_len;
	}
	list_insert_tail(&c->pendings, &p->node);
	return p;
}

/* Handles one element of a message: a request, a notification or junk. */
static void handle_value(struct conn *c, struct json_doc *doc, const struct json *v, struct batch *b,
			 size_t *index)
{
	if (conn_is_response(v)) {
		conn_take_response(c, v);
		return;
	}
	struct jrpc_req req;
	const char *why = NULL;
	int r = jrpc_parse_request(v, json_doc_text(doc), &req, &why);
	req.doc = doc;
	if (r < 0) {
		/* Not a request, whatever id it may hold: answered with id
		 * null, as JSON-RPC 2.0 says for an Invalid Request. */
		struct pending *p = pending_new(c, b, b ? (*index)++ : 0, NULL, 0);
		char *msg = xasprintf("Invalid Request: %s", why);
		conn_error(p, JRPC_INVALID_REQUEST, msg, NULL);
		free(msg);
		return;
	}
	c->requests++;
	if (!req.id) {
		c->srv->sink(c, &req, NULL);
		return;
	}
	struct pending *p = pending_new(c, b, b ? (*index)++ : 0, req.id, req.id_len);
	if (map_size(c->ids) && map_get(c->ids, p->id)) {
		conn_error(p, JRPC_INVALID_REQUEST,
			   "Invalid Request: a request with this id is still in flight on this connection",
			   "{\"kind\":\"duplicate_id\"}");
		return;
	}
	/* Most requests are answered inside methods_handle; only those still
	 * waiting afterwards are in flight and need their id remembered. */
	c->watch = p;
	c->srv->sink(c, &req, p);
	if (c->watch == p) {
		c->watch = NULL;
		map_put(c->ids, p->id, p);
		p->tracked = true;
	}
}

/* Parses and dispatches one line. */
static void handle_line(struct conn *c, const char *line, size_t len)
{
	struct json_doc *doc = NULL;
	struct json_err err;
	if (json_parse(line, len, 0, c->srv->cfg.limits.max_json_depth, &doc, &err) < 0) {
		if (err.code == JSON_ERR_DEPTH) {
			char *msg = xasprintf("Invalid Request: %s", err.msg);
			struct pending *p = pending_new(c, NULL, 0, NULL, 0);
			conn_error(p, JRPC_INVALID_REQUEST, msg, NULL);
			free(msg);
			return;
		}
		char *msg = xasprintf("Parse error: %s at byte %zu", err.msg, err.offset);
		struct pending *p = pending_new(c, NULL, 0, NULL, 0);
		conn_error(p, JRPC_PARSE_ERROR, msg, NULL);
		free(msg);
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
		struct pending *p = pending_new(c, NULL, 0, NULL, 0);
		conn_error(p, JRPC_INVALID_REQUEST, "Invalid Request: empty batch", NULL);
		json_doc_unref(doc);
		return;
	}
	/* The answer to a batch grows with its length, by far more than
	 * the line did ("[1,1,...]" gets an error object per element). */
	uint32_t max_batch = c->srv->cfg.limits.max_batch;
	if (root->u.arr.n > max_batch) {
		char *msg = xasprintf("Invalid Request: a batch of %zu requests is more than the %u allowed "
				      "(limits.max_batch); send it in parts",
				      root->u.arr.n, max_batch);
		struct pending *p = pending_new(c, NULL, 0, NULL, 0);
		conn_error(p, JRPC_INVALID_REQUEST, msg, NULL);
		free(msg);
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
		if (--b->remaining == 0) {
			if (!c->dead)
				batch_write(c, b);
			batch_free(c, b);
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
					batch_hold_id(c, b, id);
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
	while (!c->dead && !c->paused) {
		size_t off = c->in.off, len_before = c->in.len;
		const char *line;
		size_t len;
		enum frame_result fr = framer_next(&c->framer, &c->in, &line, &len);
		if (fr == FRAME_NONE)
			break;
		bool wait = c->srv->turn_over || (!serving && !list_empty(&c->srv->backlog));
		if (fr == FRAME_LINE && wait && !must_progress && may_run_tools(line, len)) {
			/* Put the line back (consuming never moves the bytes). */
			c->in.off = off;
			c->in.len = len_before;
			if (!c->backlogged) {
				c->backlogged = true;
				ev_io_stop(c->srv->ev, &c->rw);
			}
			if (!list_linked(&c->backlog_node))
				list_insert_tail(&c->srv->backlog, &c->backlog_node);
			return;
		}
		must_progress = false;
		if (fr == FRAME_TOO_LONG) {
			char *msg = xasprintf("Invalid Request: message longer than %zu bytes", c->framer.max);
			struct pending *p = pending_new(c, NULL, 0, NULL, 0);
			conn_error(p, JRPC_INVALID_REQUEST, msg, NULL);
			free(msg);
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
		if (!c->dead && !c->paused && !c->read_closed)
			ev_io_start(c->srv->ev, &c->rw);
	}
}

/*
 * The turn budget. File tools run in the loop, so their time is everyone's
 * wait: once the tool calls started in one loop turn have taken
 * limits.turn_budget_us, connections stop handling lines until the next turn,
 * which polls first (so other clients are read and answered in between).
 * The head of the backlog always gets a line, so waiting connections move
 * on. Calls that run as child processes take next to no loop time.
 */
void conn_work_begin(struct server *s)
{
	if (!s->turn_start_ns)
		s->turn_start_ns = mono_ns();
}

void conn_work_end(struct server *s)
{
	if (mono_ns() - s->turn_start_ns >= (uint64_t)s->cfg.limits.turn_budget_us * 1000)
		s->turn_over = true;
}

void conn_turn_reset(struct server *s)
{
	s->turn_start_ns = 0;
	s->turn_over = false;
}

void conn_run_backlog(struct server *s)
{
	/* Oldest first. The first always gets a line, so the backlog moves
	 * on however busy the turns are; the others only while the budget
	 * lasts. One that stops again goes to the end; none runs twice in a
	 * turn. */
	size_t n = 0;
	for (struct list *pos = s->backlog.next; pos != &s->backlog; pos = pos->next)
		n++;
	for (size_t k = 0; k < n && !list_empty(&s->backlog); k++) {
		if (k && s->turn_over)
			break;
		struct conn *c = list_first(&s->backlog, struct conn, backlog_node);
		list_remove(&c->backlog_node);
		process_input(c, true, k == 0);
	}
}

/* True when the peer closed both directions (not just its sending side). */
static bool peer_gone(int fd)
{
	struct pollfd p = { .fd = fd, .events = 0 };
	return poll(&p, 1, 0) > 0 && (p.revents & (POLLHUP | POLLERR));
}

/* Closes a half-closed connection once every answer is out. */
static void maybe_finish(struct conn *c)
{
	if (c->read_closed && !c->dead && list_empty(&c->pendings) && !buf_size(&c->out))
		conn_close(c);
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
	c->read_closed = true;
	ev_io_stop(c->srv->ev, &c->rw);
	/* epoll cannot wait for a hang-up alone: look now and then. */
	ev_timer_stop(c->srv->ev, &c->idle_w);
	ev_init(&c->idle_w, on_hup_check);
	c->idle_w.repeat = 0.25;
	ev_timer_again(c->srv->ev, &c->idle_w);
}

static void on_read(struct ev_loop *ev, ev_io *w, int revents)
{
	struct conn *c = container_of(w, struct conn, rw);
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
				if (c->dead || c->backlogged || c->paused)
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
		account(c);
		if (c->srv->cfg.limits.idle_timeout_ms)
			ev_timer_again(ev, &c->idle_w);
	}
	process_input(c, false, false);
	if (!c->dead && buf_size(&c->in) == 0 && c->in.cap > SHRINK_ABOVE) {
		buf_free(&c->in);
		account(c);
	}
}

/* The connection of uid p holding the most, or NULL when none holds anything. */
static struct conn *largest_of(struct peer *p)
{
	struct conn *big = NULL;
	struct list *pos;
	for (pos = p->members.next; pos != &p->members; pos = pos->next) {
		struct conn *c = list_entry(pos, struct conn, peer_node);
		if (!big || c->memory > big->memory)
			big = c;
	}
	return big && big->memory ? big : NULL;
}

/* Disconnects c, telling it which bound (key) it went over. */
static void evict(struct server *s, struct conn *c, const char *key, const char *why, uint64_t held,
		  uint64_t limit)
{
	log_warning("%s hold %llu bytes, more than %s (%llu): disconnecting the one holding the most "
		    "(uid %u, %zu bytes, pid %d)", why, (unsigned long long)held, key,
		    (unsigned long long)limit, (unsigned)c->cred.uid, c->memory, (int)c->cred.pid);
	/* What it had queued is dropped; it is told why. */
	buf_clear(&c->out);
	_cleanup_free_ char *msg = xasprintf("Connection closed: %s hold more than %s allows, and this "
					     "connection held the most of them", why, key);
	jrpc_write_error(&c->out, NULL, 0, JRPC_INVALID_REQUEST, msg, NULL, 0);
	buf_putc(&c->out, '\n');
	s->conns_evicted++;
	conn_close(c);
}

void conn_evict(struct server *s)
{
	/* At least what two connections may hold each, so that one client
	 * within the per-connection limits is never evicted alone. */
	const struct config *cfg = &s->cfg;
	uint64_t floor = 2 * (2 * cfg->limits.max_message_bytes + 2 * cfg->limits.max_output_bytes);
	uint64_t per_uid = MAX(cfg->limits.per_uid_memory, floor);
	if (s->peers.memory_limit != per_uid)
		peers_set_limit(&s->peers, per_uid);
	/* Each uid within its own bound: the victim is one of its own. */
	while (!list_empty(&s->peers.over)) {
		struct peer *p = list_first(&s->peers.over, struct peer, over_node);
		struct conn *big = largest_of(p);
		if (!big) {
			list_remove(&p->over_node);
			continue;
		}
		_cleanup_free_ char *why = xasprintf("the connections of uid %u", (unsigned)p->uid);
		evict(s, big, "limits.per_uid_memory", why, p->memory, per_uid);
	}
	/* All clients within theirs: the victim is of the uid holding the
	 * most, so that no uid is disconnected for what another holds. */
	uint64_t limit = MAX(cfg->limits.max_client_memory, floor);
	while (s->client_memory > limit) {
		struct peer *p = peers_heaviest(&s->peers);
		struct conn *big = p ? largest_of(p) : NULL;
		if (!big)
			break;
		evict(s, big, "limits.max_client_memory", "all clients together", s->client_memory, limit);
	}
}
