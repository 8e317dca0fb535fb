/* SPDX-License-Identifier: MIT */
/*
 * A connection's life and its output: made, counted and linked; requests
 * waiting for answers (pendings, reused when small) and batches; answers
 * written straight into the output queue or held until their batch is
 * whole; notifications and events; flushing and back-pressure (a client
 * that stops reading stops being read, so the daemon never buffers
 * without bound). A connection is stopped and closed at once when it goes:
 * the hooks of the layers above let go of what they hold, then its
 * requests and the daemon's own end; it is freed before the loop blocks.
 * Its input is conn_read.c's.
 */
#include "daemon/conn.h"
#include "daemon/conn_internal.h"

#include <errno.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "daemon/log.h"
#include "daemon/peers.h"
#include "lib/base/map.h"
#include "proto/json.h"

/* A batch member's answer this small is always kept, whatever the batch holds. */
#define BATCH_SMALL_ANSWER 4096

static void on_write(struct ev_loop *ev, ev_io *w, int revents);
static void spare_outs_free(struct conns *cs);

/* --- the connections --------------------------------------------------- */

static void on_kick(struct ev_loop *ev, ev_idle *w, int revents)
{
	ev_idle_stop(ev, w);
}

void conns_init(struct conns *cs, struct ev_loop *ev, struct peers *peers, conn_request_fn on_request)
{
	cs->ev = ev;
	cs->peers = peers;
	cs->on_request = on_request;
	list_init(&cs->all);
	list_init(&cs->dirty);
	list_init(&cs->backlog);
	list_init(&cs->graveyard);
	list_init(&cs->spare_pendings);
	ev_idle_init(&cs->kick, on_kick);
}

void conns_set_limits(struct conns *cs, const struct conn_limits *limits)
{
	cs->limits = *limits;
}

void conns_add_hook(struct conns *cs, const struct conn_hook *hook, void *arg)
{
	if (cs->n_hooks == CONN_HOOKS_MAX)
		abort();	/* a fixed set, added at start-up */
	cs->hooks[cs->n_hooks].hook = hook;
	cs->hooks[cs->n_hooks].arg = arg;
	cs->n_hooks++;
}

struct conn *conn_alloc(struct conns *cs, int fd, const struct ucred *cred)
{
	struct conn *c = xcalloc(1, sizeof(*c));
	c->conns = cs;
	c->fd = fd;
	c->cred = *cred;
	c->framer.max = cs->limits.max_message_bytes;
	c->ids = map_new();
	list_init(&c->pendings);
	outreqs_init(&c->outreqs, cs->ev);
	list_init(&c->dirty_node);
	list_init(&c->backlog_node);
	list_insert_tail(&cs->all, &c->node);
	c->peer = peers_join(cs->peers, cred->uid);
	list_insert_tail(&c->peer->members, &c->peer_node);
	cs->n++;
	cs->total++;
	ev_io_init(&c->ww, on_write, fd, EV_WRITE);
	return c;
}

/*
 * The value in conn->ids of a batch member that was answered while its
 * batch waits for others: its id stays taken until the batch is written,
 * so that no other answer with that id can come before the batch's.
 */
static char id_held;
#define ID_HELD ((void *)&id_held)

void conn_batch_hold_id(struct conn *c, struct batch *b, const char *id)
{
	map_put(c->ids, id, ID_HELD);
	b->held = xreallocarray(b->held, b->n_held + 1, sizeof(*b->held));
	b->held[b->n_held++] = xstrdup(id);
}

void conn_batch_free(struct conn *c, struct batch *b)
{
	c->held -= b->bytes;
	if (!c->dead)
		conn_account(c);
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

struct pending *conn_pending_new(struct conn *c, struct batch *b, size_t index, const char *id, size_t id_len)
{
	/* Most ids are short: those pendings are kept for reuse when freed
	 * (a request's answer is often written before the next is read), so
	 * a stream of small requests allocates nothing. Longer ids take their
	 * own allocation, bounded as the id is part of a line within the
	 * line limit. */
	struct conns *cs = c->conns;
	size_t cap = id && id_len + 1 > PENDING_ID_ROOM ? id_len + 1 : PENDING_ID_ROOM;
	struct pending *p;
	if (cap == PENDING_ID_ROOM && !list_empty(&cs->spare_pendings)) {
		p = list_first(&cs->spare_pendings, struct pending, node);
		list_remove(&p->node);
		cs->n_spare_pendings--;
		memset(p, 0, sizeof(*p));
	} else {
		p = xcalloc(1, sizeof(*p) + cap);
	}
	p->id_cap = cap;
	p->conn = c;
	p->refs = 1;
	cs->n_pendings++;
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

void pending_hold(struct pending *p)
{
	p->refs++;
}

/* Frees a pending request once its last holder lets go (keeping it for
 * reuse when it is of the common size). */
void pending_release(struct pending *p)
{
	if (--p->refs)
		return;
	struct conns *cs = p->conn->conns;
	static const unsigned spare_max = SPARE_PENDINGS;
	if (p->id_cap == PENDING_ID_ROOM && cs->n_spare_pendings < spare_max) {
		list_insert_tail(&cs->spare_pendings, &p->node);
		cs->n_spare_pendings++;
		return;
	}
	free(p);
}

/* Ends a pending request: its id and its place on the connection are let
 * go, its batch goes with its last member (written then, whether that
 * member was answered or dropped); its memory with its last holder. */
static void pending_free(struct pending *p)
{
	if (p->tracked) {
		/* remaining > 1: the batch is not written yet. */
		if (p->batch && p->batch->remaining > 1)
			conn_batch_hold_id(p->conn, p->batch, p->id);
		else
			map_remove(p->conn->ids, p->id);
	}
	list_remove(&p->node);
	if (p->upper_free)
		p->upper_free(p->upper);
	if (p->batch && --p->batch->remaining == 0) {
		/* A member cancelled after its siblings were answered is known
		 * too: it has no answer, the array is written without it. */
		if (!p->conn->dead)
			conn_batch_write(p->conn, p->batch);
		conn_batch_free(p->conn, p->batch);
	}
	p->batch = NULL;
	p->answered = true;
	p->conn->conns->n_pendings--;
	pending_release(p);
}

void conn_close(struct conn *c)
{
	if (c->dead)
		return;
	struct conns *cs = c->conns;
	c->dead = true;
	ev_io_stop(cs->ev, &c->rw);
	ev_io_stop(cs->ev, &c->ww);
	ev_timer_stop(cs->ev, &c->idle_w);
	if (list_linked(&c->dirty_node))
		list_remove(&c->dirty_node);
	if (list_linked(&c->backlog_node))
		list_remove(&c->backlog_node);
	/* Flush what can be flushed without waiting. */
	if (buf_size(&c->out))
		(void)!send(c->fd, buf_head(&c->out), buf_size(&c->out), MSG_NOSIGNAL | MSG_DONTWAIT);
	close(c->fd);
	c->fd = -1;
	cs->memory -= c->memory;
	peers_charge(cs->peers, c->peer, -(int64_t)c->memory);
	c->memory = 0;
	/* The layers above let go of the work behind its requests first
	 * (methods detach the calls: keyed ones run on, the others are
	 * cancelled). */
	for (unsigned i = 0; i < cs->n_hooks; i++)
		if (cs->hooks[i].hook->closing)
			cs->hooks[i].hook->closing(cs->hooks[i].arg, c);
	/* A batch's answered siblings keep their slots until the last member
	 * goes. */
	while (!list_empty(&c->pendings))
		pending_free(list_first(&c->pendings, struct pending, node));
	/* The daemon's own requests learn that no answer will come (after the
	 * calls went: none of them is answered on a closed connection). */
	outreqs_end(&c->outreqs);
	for (unsigned i = 0; i < cs->n_hooks; i++)
		if (cs->hooks[i].hook->closed)
			cs->hooks[i].hook->closed(cs->hooks[i].arg, c);
	list_remove(&c->node);
	if (--cs->n == 0)
		spare_outs_free(cs);	/* nobody left to answer */
	list_remove(&c->peer_node);
	peers_leave(cs->peers, TAKE_PTR(c->peer));
	/* Freed after the current callback returns (conns_reap): code up the
	 * stack may still look at c->dead. */
	list_insert_tail(&cs->graveyard, &c->node);
}

void conns_reap(struct conns *cs)
{
	struct list *pos, *tmp;
	list_foreach_safe(pos, tmp, &cs->graveyard) {
		struct conn *c = list_entry(pos, struct conn, node);
		if (c->refs)
			continue;	/* still held up the stack: the next time */
		list_remove(&c->node);
		map_free(c->ids);
		buf_free(&c->in);
		buf_free(&c->out);
		free(c->ev_ends);
		free(c);
	}
}

void conns_done(struct conns *cs)
{
	while (!list_empty(&cs->all))
		conn_close(list_first(&cs->all, struct conn, node));
	conns_reap(cs);
	while (!list_empty(&cs->spare_pendings)) {
		struct pending *p = list_first(&cs->spare_pendings, struct pending, node);
		list_remove(&p->node);
		free(p);
	}
	cs->n_spare_pendings = 0;
	spare_outs_free(cs);
}

/* --- output ------------------------------------------------------------ */

/*
 * A large output buffer, flushed, is kept for the next large answer of any
 * connection rather than freed: a file's text is tens of KiB a turn, which
 * grew from nothing by doubling and was freed (consolidating the heap) on
 * every flush. Small buffers stay with their connection.
 */
static void spare_out_put(struct conns *cs, struct buf *b)
{
	if (cs->n_spare_outs < SPARE_OUTS && b->cap <= SPARE_OUT_MAX && cs->n > 0) {
		b->off = b->len = 0;
		cs->spare_outs[cs->n_spare_outs++] = *b;
		*b = (struct buf){0};
		return;
	}
	buf_free(b);
}

/* Gives a connection whose output has no buffer a kept one. */
static void spare_out_take(struct conn *c)
{
	struct conns *cs = c->conns;
	if (c->out.data || !cs->n_spare_outs)
		return;
	c->out = cs->spare_outs[--cs->n_spare_outs];
	conn_account(c);
}

static void spare_outs_free(struct conns *cs)
{
	while (cs->n_spare_outs)
		buf_free(&cs->spare_outs[--cs->n_spare_outs]);
}

/* Pauses or resumes reading as queued output crosses the limits. */
static void update_backpressure(struct conn *c)
{
	if (c->read_closed)
		return;
	struct conns *cs = c->conns;
	size_t max = cs->limits.max_output_bytes;
	size_t queued = buf_size(&c->out);
	if (!c->paused && queued > max) {
		c->paused = true;
		ev_io_stop(cs->ev, &c->rw);
	} else if (c->paused && queued <= max / 2) {
		c->paused = false;
		if (!c->backlogged && !c->input_waits)
			ev_io_start(cs->ev, &c->rw);
		/* Lines that arrived while paused are still buffered: handle
		 * them on the next iteration, which must not block first (this
		 * runs while the output is flushed, just before the poll). */
		ev_feed_event(cs->ev, &c->rw, EV_CUSTOM);
		ev_idle_start(cs->ev, &cs->kick);
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
				ev_io_start(c->conns->ev, &c->ww);
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
		ev_io_stop(c->conns->ev, &c->ww);
		if (c->out.cap > CONN_SHRINK_ABOVE) {
			spare_out_put(c->conns, &c->out);
			conn_account(c);
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

/* Marks c as having output to write before the loop blocks, and stops
 * reading it when too much is queued. */
static inline void queued(struct conn *c)
{
	conn_account(c);
	if (!list_linked(&c->dirty_node))
		list_insert_tail(&c->conns->dirty, &c->dirty_node);
	if (buf_size(&c->out) > c->conns->limits.max_output_bytes)
		update_backpressure(c);
}

void conn_send(struct conn *c, const char *json, size_t n)
{
	if (c->dead)
		return;
	buf_append(&c->out, json, n);
	buf_putc(&c->out, '\n');
	c->queued_total += n + 1;
	queued(c);
}

/* Ends an answer written straight into the output buffer. */
static void direct_done(struct conn *c, size_t before)
{
	buf_putc(&c->out, '\n');
	c->queued_total += buf_size(&c->out) - before;
	queued(c);
}

void conn_notify(struct conn *c, const char *method, const char *params, size_t n)
{
	if (c->dead)
		return;
	size_t before = buf_size(&c->out);
	jrpc_write_notification(&c->out, method, params, n);
	direct_done(c, before);
}

bool conn_congested(const struct conn *c)
{
	return c->dead || buf_size(&c->out) > c->conns->limits.max_output_bytes;
}

bool conn_deliver_event(void *ctx, const char *params, size_t n)
{
	struct conn *c = ctx;
	if (c->dead)
		return false;
	unsigned cap = c->conns->limits.event_queue ? c->conns->limits.event_queue : 1024;
	if (c->ev_cap != cap) {
		/* First use (or a reload changed the limit): start afresh. */
		free(c->ev_ends);
		c->ev_ends = xcalloc(cap, sizeof(*c->ev_ends));
		c->ev_cap = cap;
		c->ev_head = c->ev_count = 0;
	}
	if (c->ev_count >= c->ev_cap || buf_size(&c->out) > c->conns->limits.max_output_bytes)
		return false;
	conn_notify(c, "notifications/event", params, n);
	c->ev_ends[(c->ev_head + c->ev_count) % c->ev_cap] = c->queued_total;
	c->ev_count++;
	return true;
}

int conn_request(struct conn *c, const char *method, const char *params, size_t n, uint64_t timeout_ms,
		 conn_reply_fn fn, void *arg, void (*arg_free)(void *arg), struct outreq **ret)
{
	if (c->dead || c->read_closed)
		return -ENOTCONN;
	_cleanup_(buf_free) struct buf line = {0};
	int r = outreqs_add(&c->outreqs, method, params, n, timeout_ms, fn, arg, arg_free, &line, ret);
	if (r < 0)
		return r;
	conn_send(c, buf_head(&line), buf_size(&line));
	return 0;
}

void conns_drain(struct conns *cs, int timeout_ms)
{
	uint64_t deadline = mono_ms() + (uint64_t)timeout_ms;
	for (;;) {
		bool pending = false;
		struct list *pos, *tmp;
		list_foreach_safe(pos, tmp, &cs->all) {
			struct conn *c = list_entry(pos, struct conn, node);
			conn_flush(c);
			if (!c->dead && buf_size(&c->out))
				pending = true;
		}
		conns_reap(cs);
		if (!pending || mono_ms() >= deadline)
			return;
		struct pollfd pfds[256];
		nfds_t n = 0;
		list_foreach_safe(pos, tmp, &cs->all) {
			struct conn *c = list_entry(pos, struct conn, node);
			if (buf_size(&c->out) && n < ELEMENTSOF(pfds))
				pfds[n++] = (struct pollfd){ .fd = c->fd, .events = POLLOUT };
		}
		poll(pfds, n, 50);
	}
}

/* --- answers ----------------------------------------------------------- */

/* Writes a finished batch as one array, straight into the output queue;
 * nothing when every call in it was dropped (JSON-RPC never answers with
 * an empty array). */
void conn_batch_write(struct conn *c, struct batch *b)
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

/* The data of the error that replaces an answer of n bytes dropped past
 * limit: the call's fields (when the answer is a call's), and the limit. */
static void write_dropped_data(struct buf *out, const struct answer_call *call, size_t limit, size_t n)
{
	struct jgen *g = jgen_new(out);
	jgen_obj_open(g);
	jgen_kv_str(g, "kind", "execution_error");
	jgen_kv_bool(g, "retryable", false);
	if (call) {
		jgen_kv_int(g, "attempts", call->attempts);
		jgen_kv_int(g, "durationMs", (int64_t)call->duration_ms);
		jgen_kv_str(g, "callId", call->call_id);
		jgen_kv_str(g, "tool", call->tool);
	}
	jgen_kv_bool(g, "ran", true);
	jgen_kv_str(g, "limit", "limits.max_output_bytes");
	jgen_kv_int(g, "limitBytes", (int64_t)limit);
	jgen_kv_int(g, "answerBytes", (int64_t)n);
	jgen_obj_close(g);
	jgen_free(g);
}

/* Files a batch member's answer, taking the text in b (the answer of
 * call, or NULL: not a call's); the batch is written when its last member
 * ends (pending_free() drops remaining to zero). */
static void batch_answer(struct pending *p, struct buf *b, const struct answer_call *call)
{
	struct batch *bt = p->batch;
	/* A batch is written whole, so its answers are held until the last:
	 * bounded by what a client may have queued. Past it a large answer
	 * is replaced by an error saying so (small ones always fit). */
	size_t limit = p->conn->conns->limits.max_output_bytes;
	if (buf_size(b) > BATCH_SMALL_ANSWER && bt->bytes + buf_size(b) > limit) {
		/* The call ran: its side effects happened, and a retry would
		 * run it again. So not retryable (no "overloaded"): the kind
		 * of a call that ran and did not give its result. */
		char *msg = xasprintf("The call ran, but its answer (%zu bytes) was dropped: the answers of this "
				      "batch went past limits.max_output_bytes (%zu bytes). Do not send it again as it "
				      "is, it would run again; send fewer calls per batch, or ask for smaller outputs",
				      buf_size(b), limit);
		struct buf data = {0};
		write_dropped_data(&data, call, limit, buf_size(b));
		/* Not kept in the answer's own buffer: it may have grown to
		 * twice the answer, and held until the batch is written. */
		buf_free(b);
		if (p->write_error_result) {
			struct buf res = {0};
			p->write_error_result(&res, msg, buf_head(&data), buf_size(&data));
			jrpc_write_result(b, p->id, p->id_len, buf_head(&res), buf_size(&res));
			buf_free(&res);
		} else {
			jrpc_write_error(b, p->id, p->id_len, JRPC_INTERNAL_ERROR, msg, buf_head(&data), buf_size(&data));
		}
		buf_free(&data);
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
		conn_account(p->conn);
	bt->lens[p->index] = n;
	bt->slots[p->index] = text;
	pending_free(p);
}

/* Closes a half-closed connection once every answer is out. */
static void maybe_finish(struct conn *c)
{
	if (c->read_closed && !c->dead && list_empty(&c->pendings) && !buf_size(&c->out))
		conn_close(c);
}

void conn_drop(struct pending *p)
{
	struct conn *c = p->conn;
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
	spare_out_take(p->conn);
	*ret_before = buf_size(&p->conn->out);
	return &p->conn->out;
}

/* Ends an answer begun with answer_begin (of call, or NULL). */
static void answer_end(struct pending *p, struct buf *out, size_t before, const struct answer_call *call)
{
	struct conn *c = p->conn;
	if (p->batch) {
		batch_answer(p, out, call);
		return;
	}
	if (out == &c->out)
		direct_done(c, before);
	else
		buf_free(out);	/* the connection is gone */
	pending_free(p);
}

void conn_call_result(struct pending *p, const struct answer_call *call, const char *result, size_t n)
{
	struct buf own, *out;
	size_t before;
	out = answer_begin(p, &own, &before);
	jrpc_write_result(out, p->id, p->id_len, result, n);
	answer_end(p, out, before, call);
}

void conn_result(struct pending *p, const char *result, size_t n)
{
	conn_call_result(p, NULL, result, n);
}

void conn_call_result_with(struct pending *p, const struct answer_call *call,
			   void (*write)(const void *arg, struct buf *out), const void *arg)
{
	struct buf own, *out;
	size_t before;
	out = answer_begin(p, &own, &before);
	jrpc_write_result_head(out, p->id, p->id_len);
	write(arg, out);
	buf_putc(out, '}');
	answer_end(p, out, before, call);
}

void conn_result_with(struct pending *p, void (*write)(const void *arg, struct buf *out), const void *arg)
{
	conn_call_result_with(p, NULL, write, arg);
}

void conn_call_error(struct pending *p, const struct answer_call *call, int code, const char *message,
		     const char *data)
{
	struct buf own, *out;
	size_t before;
	out = answer_begin(p, &own, &before);
	jrpc_write_error(out, p->id, p->id_len, code, message, data, data ? strlen(data) : 0);
	answer_end(p, out, before, call);
}

void conn_error(struct pending *p, int code, const char *message, const char *data)
{
	conn_call_error(p, NULL, code, message, data);
}
