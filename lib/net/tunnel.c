/* SPDX-License-Identifier: MIT */
/*
 * The byte relay behind CONNECT, SOCKS5 and forwarded HTTP requests. Each
 * direction peeks at its source's bytes through one buffer shared by all
 * relays of a loop, writes them to its destination, and then takes from
 * the source only what the destination took: bytes that cannot go yet
 * stay in the source's socket (its window closes), so a slow reader holds
 * nothing of the daemon's but its own sockets. A forwarded request's body,
 * read to find its end, and bytes the client sent early go through the
 * direction's own buffer. A direction that reads end of file shuts its
 * destination down for writing once drained (a half-close travels
 * through). Watchers are started only while a direction waits, so an idle
 * tunnel costs no wakeups, and a wakeup pumps the direction it is for
 * alone.
 *
 * Why not splice(2) through a pipe per direction: measured on loopback
 * downloads through the daemon (tc-bench net_connect), the copy costs the
 * daemon the same or up to 15% more CPU per MB and the reader about 20%
 * less (a spliced segment carries the origin's pages in 4 KiB pieces, a
 * written one the daemon's own), downloads ran as fast or faster, and no
 * pipe per direction holds up to 1 MiB of pages for a slow reader.
 *
 * Why not in the kernel with a BPF sockmap (an SK_SKB stream verdict
 * program redirecting each socket's bytes to its peer's egress): measured
 * on this kernel (6.18) with a standalone relay of 100 MB over loopback,
 * origin, relay and reader as three processes, in the same minutes: the
 * sockmap relay moved 373-603 MB/s, this one 976-2,066 MB/s and a direct
 * download 1,107-1,600 MB/s; the redirected bytes go out from a work queue
 * a segment at a time, the reader spent about half again as much CPU per
 * MB, and the owner would still have to poll TCP_INFO for the byte counts
 * and for when a half-close may pass. Plain recv/send through a buffer per
 * direction cost the relay about 10% less CPU than peeking, but holds what
 * a slow reader has not taken.
 *
 * All relays of a loop share a budget of work per turn of the loop: once
 * relays have run TURN_BUDGET_NS in a turn, a direction whose socket
 * becomes ready waits in a queue for the next turn (served in the order
 * they came), so that another client of the daemon waits about that long
 * at most behind any number of busy tunnels, and no tunnel starves.
 */
#include <errno.h>
#include <fcntl.h>
#include <netinet/tcp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "lib/base/list.h"
#include "lib/base/loop.h"
#include "lib/net/net_internal.h"
#include "proto/base/util.h"

#define CHUNK (64 * 1024)
/* Bytes one direction moves per wakeup before the loop turns: a fast
 * tunnel must not make other clients of the daemon wait (200 busy
 * tunnels cost a few milliseconds per turn of the loop). */
#define TURN_BYTES (128 * 1024)
/* The most a direction peeks at and writes in one go (the shared
 * buffer's size: a fast download needs few wakeups and few writes, each
 * of which pushes what it wrote), and where it starts. */
#define PEEK_MAX (1024 * 1024)
#define PEEK_MIN (64 * 1024)
/* Relay work per turn of the loop, across all its relays. */
#define TURN_BUDGET_NS (1000 * 1000)

static uint64_t turn_budget_ns = TURN_BUDGET_NS;

void net_relay_turn_budget(uint64_t ns)
{
	turn_budget_ns = ns ? ns : TURN_BUDGET_NS;
}

/* The budget of one loop, shared by its relays. */
struct turn {
	struct tc_loop *loop;
	struct tc_timer *timer;		/* 0 ms: the next turn */
	bool armed;
	struct list queue;		/* directions waiting for a turn */
	uint64_t used_ns;		/* relay work in this turn */
	unsigned users;			/* relays, and a running turn */
	char *scratch;			/* PEEK_MAX bytes: what peeking directions copy through */
	struct turn *next;
};

static struct turn *turns;

struct dir {
	struct net_relay *r;
	int from, to;
	struct tc_io *rd, *wr;	/* rd watches from, wr watches to */
	char *buf;		/* the direction's own bytes to write: initial, or copy mode */
	size_t off, len, cap;
	bool copy;		/* through buf (an HTTP body, or asked for) */
	bool trunc;		/* from drops bytes with MSG_TRUNC (TCP) */
	size_t peek_len;	/* bytes to peek at next */
	bool eof;		/* from said end of file (or the body ended) */
	bool shut;		/* to was shut down for writing */
	bool finished;		/* all went, the half-close passed on */
	struct list queued;	/* in the turn's queue: waits for the next turn */
	struct net_http_body *body;
	uint64_t moved;		/* bytes delivered to "to" since the last report */
};

struct net_relay {
	struct tc_loop *loop;
	struct turn *turn;
	struct dir up, down;
	bool end_with_down;
	net_relay_progress_cb progress;
	net_relay_done_cb done;
	void *arg;
};

/* Writes the user-space bytes of d. 0 when all went, -EAGAIN, or an error. */
static int dir_flush_buf(struct dir *d)
{
	while (d->off < d->len) {
		ssize_t n = send(d->to, d->buf + d->off, d->len - d->off, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n < 0)
			return errno == EINTR ? 0 : -errno;
		d->off += (size_t)n;
		d->moved += (uint64_t)n;
	}
	d->off = d->len = 0;
	return 0;
}

/* The source said end of file and everything went: pass the half-close on
 * (not after an HTTP body: the origin's answer is still to come). */
static int dir_finish(struct dir *d)
{
	if (!d->shut && !d->body)
		shutdown(d->to, SHUT_WR);
	d->shut = true;
	return 1;
}

/* Reads into the direction's own buffer (copy mode, or an HTTP body). */
static int dir_read_copy(struct dir *d)
{
	ssize_t n = recv(d->from, d->buf, d->cap, MSG_DONTWAIT);

	if (n < 0)
		return -errno;
	if (n == 0) {
		d->eof = true;
		return 0;
	}
	d->len = (size_t)n;
	d->off = 0;
	if (d->body) {
		bool done = false;
		long keep = net_http_body_feed(d->body, d->buf, d->len, &done);
		if (keep < 0)
			return -EPROTO;
		d->len = (size_t)keep;	/* bytes past the message are dropped */
		if (done)
			d->eof = true;
	}
	return 0;
}

/* Drops n bytes that went from the source (they were peeked at). */
static int dir_consume(struct dir *d, size_t n)
{
	while (n > 0) {
		ssize_t k = d->trunc ? recv(d->from, NULL, n, MSG_TRUNC | MSG_DONTWAIT)
				     : recv(d->from, d->r->turn->scratch, n, MSG_DONTWAIT);
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0 && d->trunc && (errno == EFAULT || errno == EINVAL || errno == EOPNOTSUPP)) {
			d->trunc = false;	/* not TCP after all: read them */
			continue;
		}
		if (k <= 0)
			return k < 0 ? -errno : -EIO;	/* peeked bytes are there */
		n -= (size_t)k;
	}
	return 0;
}

/*
 * The source's bytes are copied into the loop's buffer without taking
 * them, written to the destination, and only what the destination took is
 * taken from the source. Returns as dir_pump.
 */
static int dir_pump_peek(struct dir *d, bool *want_read, bool *want_write)
{
	struct turn *t = d->r->turn;
	uint64_t start = d->moved;

	if (!t->scratch && !(t->scratch = malloc(PEEK_MAX)))
		return -ENOMEM;
	for (;;) {
		size_t len = d->peek_len;
		ssize_t n, w;

		if (d->moved - start >= TURN_BYTES) {
			/* Enough for one turn: the watcher is level-triggered. */
			*want_read = true;
			return 0;
		}
		n = recv(d->from, t->scratch, len, MSG_PEEK | MSG_DONTWAIT);
		if (n == 0) {
			d->eof = true;
			return 1;
		}
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno != EAGAIN && errno != EWOULDBLOCK)
				return -errno;
			*want_read = true;
			return 0;
		}
		w = send(d->to, t->scratch, (size_t)n, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			if (errno != EAGAIN && errno != EWOULDBLOCK)
				return -errno;
			d->peek_len = PEEK_MIN;
			*want_write = true;
			return 0;
		}
		d->moved += (uint64_t)w;	/* it went, whatever comes next */
		int x = dir_consume(d, (size_t)w);
		if (x < 0)
			return x;
		if (w < n) {
			/* The destination is full: peek at no more than it
			 * took, so that bytes are not copied again and again. */
			d->peek_len = MAX((size_t)w, (size_t)PEEK_MIN);
			*want_write = true;
			return 0;
		}
		if ((size_t)n < len) {
			/* What the socket held: the watcher says when more comes. */
			*want_read = true;
			return 0;
		}
		/* A full read: a bulk transfer, peek at more next time. */
		d->peek_len = MIN(len * 4, (size_t)PEEK_MAX);
	}
}

/*
 * Moves what it can in one direction. Returns 0 when it must wait (the
 * watchers say for what), 1 when the direction is finished, or an error.
 */
static int dir_pump(struct dir *d, bool *want_read, bool *want_write)
{
	uint64_t start = d->moved;
	int r;

	*want_read = *want_write = false;
	for (;;) {
		if (d->copy && d->moved - start >= TURN_BYTES && !(d->eof && d->off >= d->len)) {
			*want_write = d->off < d->len;
			*want_read = !*want_write && !d->eof;
			return 0;
		}
		if (d->off < d->len) {
			r = dir_flush_buf(d);
			if (r == -EAGAIN || r == -EWOULDBLOCK) {
				*want_write = true;
				return 0;
			}
			if (r < 0)
				return r;
			continue;
		}
		if (!d->copy) {
			r = dir_pump_peek(d, want_read, want_write);
			return r == 1 ? dir_finish(d) : r;
		}
		if (d->eof)
			return dir_finish(d);
		if (!d->buf) {
			d->buf = malloc(CHUNK);
			if (!d->buf)
				return -ENOMEM;
			d->cap = CHUNK;
		}
		r = dir_read_copy(d);
		if (r == -EAGAIN || r == -EWOULDBLOCK) {
			*want_read = true;
			return 0;
		}
		if (r < 0)
			return r;
	}
}

/* Tells the owner what moved since the last report; its answer. */
static int relay_report(struct net_relay *r)
{
	uint64_t up = r->up.moved, down = r->down.moved;

	if (!up && !down)
		return 0;
	r->up.moved = r->down.moved = 0;
	return r->progress ? r->progress(r->arg, up, down) : 0;
}

/* Pumps one direction and reports; ends the relay when done. */
static void relay_run(struct dir *d)
{
	struct net_relay *r = d->r;
	struct dir *other = d == &r->up ? &r->down : &r->up;
	bool want_read, want_write;
	int x = d->finished ? 1 : dir_pump(d, &want_read, &want_write);

	if ((x == -EPIPE || x == -ECONNRESET) && other->eof) {
		/* The destination closed after saying it was done: what it
		 * did not take it did not want. An end, not an error. */
		d->eof = d->shut = true;
		d->off = d->len = 0;
		x = 1;
	}
	if (x < 0) {
		relay_report(r);	/* what moved before the error counts */
		r->done(r->arg, x);
		return;
	}
	if (x == 1) {
		d->finished = true;
		want_read = want_write = false;
	}
	if (want_read)
		tc_io_start(d->rd);
	else
		tc_io_stop(d->rd);
	if (want_write)
		tc_io_start(d->wr);
	else
		tc_io_stop(d->wr);
	x = relay_report(r);
	if (x < 0) {
		r->done(r->arg, x);
		return;
	}
	if ((r->up.finished && r->down.finished) || (r->end_with_down && r->down.finished))
		r->done(r->arg, 0);
}

static void turn_release(struct turn *t)
{
	if (--t->users)
		return;
	for (struct turn **pp = &turns; *pp; pp = &(*pp)->next)
		if (*pp == t) {
			*pp = t->next;
			break;
		}
	tc_timer_free(t->timer);
	free(t->scratch);
	free(t);
}

/* Runs d within the turn's budget. */
static void turn_run(struct turn *t, struct dir *d)
{
	uint64_t t0 = mono_ns();

	t->users++;	/* d's relay, the turn's last user, may end in it */
	relay_run(d);
	t->used_ns += mono_ns() - t0;
	if (!t->armed) {
		/* The next turn starts the budget again. */
		t->armed = true;
		tc_timer_start(t->timer, 0);
	}
	turn_release(t);
}

/* A new turn of the loop: the directions that waited run first, within
 * the budget. */
static void on_turn(void *arg)
{
	struct turn *t = arg;
	struct dir *d;

	t->armed = false;
	t->used_ns = 0;
	t->users++;	/* the last relay may go while the queue runs */
	while (t->used_ns < turn_budget_ns && (d = list_first(&t->queue, struct dir, queued))) {
		list_remove(&d->queued);
		turn_run(t, d);	/* arms the timer: the budget starts again next turn */
	}
	if (!list_empty(&t->queue) && !t->armed) {
		t->armed = true;
		tc_timer_start(t->timer, 0);
	}
	turn_release(t);
}

static struct turn *turn_get(struct tc_loop *loop)
{
	struct turn *t;

	for (t = turns; t; t = t->next)
		if (t->loop == loop) {
			t->users++;
			return t;
		}
	t = calloc(1, sizeof(*t));
	if (!t)
		return NULL;
	t->timer = tc_timer_new(loop, on_turn, t);
	if (!t->timer) {
		free(t);
		return NULL;
	}
	t->loop = loop;
	list_init(&t->queue);
	t->users = 1;
	t->next = turns;
	turns = t;
	return t;
}

static void on_io(void *arg, int revents)
{
	struct dir *d = arg;
	struct turn *t = d->r->turn;

	(void)revents;
	if (list_linked(&d->queued))
		return;		/* its turn comes */
	if (t->used_ns >= turn_budget_ns) {
		list_insert_tail(&t->queue, &d->queued);
		return;
	}
	turn_run(t, d);
}

static int dir_init(struct net_relay *r, struct dir *d, int from, int to, bool copy)
{
	d->r = r;
	d->from = from;
	d->to = to;
	list_init(&d->queued);
	d->copy = copy;
	d->peek_len = PEEK_MIN;
	if (!copy) {
		int proto = 0;
		socklen_t sl = sizeof(proto);
		/* TCP drops taken bytes without copying them again. */
		d->trunc = getsockopt(from, SOL_SOCKET, SO_PROTOCOL, &proto, &sl) == 0 && proto == IPPROTO_TCP;
	}
	d->rd = tc_io_new(r->loop, from, TC_IO_READ, on_io, d);
	d->wr = tc_io_new(r->loop, to, TC_IO_WRITE, on_io, d);
	return d->rd && d->wr ? 0 : -ENOMEM;
}

static void dir_done(struct dir *d)
{
	if (d->r && list_linked(&d->queued))
		list_remove(&d->queued);
	tc_io_free(d->rd);
	tc_io_free(d->wr);
	free(d->buf);
	net_http_body_free(d->body);
}

struct net_relay *net_relay_free(struct net_relay *r)
{
	if (!r)
		return NULL;
	dir_done(&r->up);
	dir_done(&r->down);
	if (r->turn)
		turn_release(r->turn);
	free(r);
	return NULL;
}

int net_relay_start(const struct net_relay_config *cfg, struct net_relay **ret)
{
	struct net_relay *r = calloc(1, sizeof(*r));
	int x;

	if (!r) {
		net_http_body_free(cfg->body);
		return -ENOMEM;
	}
	/* Never block the loop, whatever the caller made of the sockets. */
	for (int k = 0; k < 2; k++) {
		int fd = k ? cfg->upstream_fd : cfg->client_fd;
		int fl = fcntl(fd, F_GETFL), one = 1;
		if (fl >= 0 && !(fl & O_NONBLOCK))
			(void)fcntl(fd, F_SETFL, fl | O_NONBLOCK);
		/* Bytes go on as they come: a small TLS record relayed must not
		 * wait for Nagle behind an unacknowledged one. */
		(void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	}
	r->loop = cfg->loop;
	r->turn = turn_get(cfg->loop);
	if (!r->turn) {
		free(r);
		net_http_body_free(cfg->body);
		return -ENOMEM;
	}
	r->end_with_down = cfg->end_with_down;
	r->progress = cfg->progress;
	r->done = cfg->done;
	r->arg = cfg->arg;
	/* An HTTP body is read into user space to find its end. */
	r->up.body = cfg->body;
	x = dir_init(r, &r->up, cfg->client_fd, cfg->upstream_fd, cfg->copy || cfg->body);
	if (x == 0)
		x = dir_init(r, &r->down, cfg->upstream_fd, cfg->client_fd, cfg->copy);
	if (x == 0 && cfg->initial_len) {
		r->up.cap = MAX(cfg->initial_len, (size_t)CHUNK);
		r->up.buf = malloc(r->up.cap);
		if (!r->up.buf)
			x = -ENOMEM;
		else {
			memcpy(r->up.buf, cfg->initial, cfg->initial_len);
			r->up.len = cfg->initial_len;
		}
	}
	r->up.eof = cfg->up_done;
	if (x < 0) {
		net_relay_free(r);
		return x;
	}
	/* Start by waiting: readable client or writable upstream runs the first pump. */
	tc_io_start(r->up.wr);
	tc_io_start(r->down.rd);
	*ret = r;
	return 0;
}
