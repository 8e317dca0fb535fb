/* SPDX-License-Identifier: MIT */
/*
 * The loop seam over libev: the only file in lib/ that includes ev.h.
 */
#include "lib/base/loop.h"

#include <ev.h>
#include <stdlib.h>
#include <sys/random.h>

#include "proto/base/util.h"

struct tc_timer {
	const struct tc_loop_ops *ops;	/* first: every handle leads with its ops */
	ev_timer w;
	struct ev_loop *ev;
	tc_timer_cb cb;
	void *arg;
};

struct evloop;

struct tc_io {
	const struct tc_loop_ops *ops;
	ev_io w;
	struct ev_loop *ev;
	struct evloop *loop;
	tc_io_cb cb;
	void *arg;
};

struct tc_defer {
	const struct tc_loop_ops *ops;
	ev_prepare w;
	struct ev_loop *ev;
	tc_timer_cb cb;
	void *arg;
};

struct evloop {
	struct tc_loop base;
	struct ev_loop *ev;
	uint64_t rng;
	/* Started by a feed, stopped when it runs (after a poll that did
	 * not block): an event fed outside the loop's callbacks is invoked
	 * without waiting in the poll first, and one fed in the pass over
	 * prepare watchers, after the daemon's writer, has what it queues
	 * written in the next turn before the poll blocks. */
	ev_idle fed;
};

/* The monotonic clock read now, not ev_now(): that is the wall clock (a
 * step back would make durations wrap) as of the start of the loop turn
 * (a call's durationMs could come out shorter than its command's own). */
static uint64_t ev_now_ms(struct tc_loop *l)
{
	return mono_ms();
}

/* xorshift64*: jitter needs spread, not secrecy. */
static uint32_t ev_rand(struct tc_loop *l)
{
	struct evloop *e = (struct evloop *)l;
	uint64_t x = e->rng;
	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	e->rng = x;
	return (uint32_t)((x * 0x2545F4914F6CDD1DULL) >> 32);
}

static void timer_fire(struct ev_loop *ev, ev_timer *w, int revents)
{
	struct tc_timer *t = container_of(w, struct tc_timer, w);
	t->cb(t->arg);
}

static struct tc_timer *ev_timer_new_(struct tc_loop *l, tc_timer_cb cb, void *arg);
static void ev_timer_start_(struct tc_timer *t, uint64_t after_ms)
{
	ev_timer_stop(t->ev, &t->w);
	ev_now_update(t->ev);
	ev_timer_set(&t->w, (double)after_ms / 1000.0, 0.0);
	ev_timer_start(t->ev, &t->w);
}

static void ev_timer_stop_(struct tc_timer *t)
{
	ev_timer_stop(t->ev, &t->w);
}

static void ev_timer_free_(struct tc_timer *t)
{
	ev_timer_stop(t->ev, &t->w);
	free(t);
}

static void io_fire(struct ev_loop *ev, ev_io *w, int revents)
{
	struct tc_io *io = container_of(w, struct tc_io, w);
	int r = 0;
	if (revents & EV_READ)
		r |= TC_IO_READ;
	if (revents & EV_WRITE)
		r |= TC_IO_WRITE;
	io->cb(io->arg, r);
}

static struct tc_io *ev_io_new_(struct tc_loop *l, int fd, int events, tc_io_cb cb, void *arg);
static void ev_io_start_(struct tc_io *io)
{
	ev_io_start(io->ev, &io->w);
}

static void ev_io_stop_(struct tc_io *io)
{
	ev_io_stop(io->ev, &io->w);
}

static void ev_io_free_(struct tc_io *io)
{
	ev_io_stop(io->ev, &io->w);
	free(io);
}

/* libev invokes what is fed in the same pass over its pending watchers,
 * started or not, when it is fed from one of the loop's callbacks; fed
 * from outside them (before the loop runs), after the next poll. Either
 * way the idle watcher keeps that poll from blocking (evloop.fed). */
static void ev_io_feed_(struct tc_io *io, int revents)
{
	int ev = 0;
	if (revents & TC_IO_READ)
		ev |= EV_READ;
	if (revents & TC_IO_WRITE)
		ev |= EV_WRITE;
	ev_feed_event(io->ev, &io->w, ev);
	ev_idle_start(io->ev, &io->loop->fed);
}

static void fed_done(struct ev_loop *ev, ev_idle *w, int revents)
{
	ev_idle_stop(ev, w);
}

static void defer_fire(struct ev_loop *ev, ev_prepare *w, int revents)
{
	struct tc_defer *d = container_of(w, struct tc_defer, w);
	ev_prepare_stop(ev, w);
	d->cb(d->arg);
}

static struct tc_defer *ev_defer_new_(struct tc_loop *l, tc_timer_cb cb, void *arg);
static void ev_defer_start_(struct tc_defer *d)
{
	ev_prepare_start(d->ev, &d->w);
}

static void ev_defer_free_(struct tc_defer *d)
{
	ev_prepare_stop(d->ev, &d->w);
	free(d);
}

static const struct tc_loop_ops ev_ops = {
	.now = ev_now_ms,
	.random = ev_rand,
	.timer_new = ev_timer_new_,
	.timer_start = ev_timer_start_,
	.timer_stop = ev_timer_stop_,
	.timer_free = ev_timer_free_,
	.io_new = ev_io_new_,
	.io_start = ev_io_start_,
	.io_stop = ev_io_stop_,
	.io_free = ev_io_free_,
	.defer_new = ev_defer_new_,
	.defer_start = ev_defer_start_,
	.defer_free = ev_defer_free_,
	.io_feed = ev_io_feed_,
};

static struct tc_timer *ev_timer_new_(struct tc_loop *l, tc_timer_cb cb, void *arg)
{
	struct evloop *e = (struct evloop *)l;
	struct tc_timer *t = xcalloc(1, sizeof(*t));
	t->ops = &ev_ops;
	t->ev = e->ev;
	t->cb = cb;
	t->arg = arg;
	ev_timer_init(&t->w, timer_fire, 0.0, 0.0);
	return t;
}

static struct tc_io *ev_io_new_(struct tc_loop *l, int fd, int events, tc_io_cb cb, void *arg)
{
	struct evloop *e = (struct evloop *)l;
	struct tc_io *io = xcalloc(1, sizeof(*io));
	io->ops = &ev_ops;
	io->ev = e->ev;
	io->loop = e;
	io->cb = cb;
	io->arg = arg;
	int ev = 0;
	if (events & TC_IO_READ)
		ev |= EV_READ;
	if (events & TC_IO_WRITE)
		ev |= EV_WRITE;
	ev_io_init(&io->w, io_fire, fd, ev);
	return io;
}

static struct tc_defer *ev_defer_new_(struct tc_loop *l, tc_timer_cb cb, void *arg)
{
	struct evloop *e = (struct evloop *)l;
	struct tc_defer *d = xcalloc(1, sizeof(*d));
	d->ops = &ev_ops;
	d->ev = e->ev;
	d->cb = cb;
	d->arg = arg;
	ev_prepare_init(&d->w, defer_fire);
	/* After the daemon's own prepare watcher, which writes the answers. */
	ev_set_priority(&d->w, EV_MINPRI);
	return d;
}

struct tc_loop *tc_loop_ev_new(void *ev)
{
	struct evloop *e = xcalloc(1, sizeof(*e));
	e->base.ops = &ev_ops;
	e->ev = ev;
	if (getrandom(&e->rng, sizeof(e->rng), GRND_NONBLOCK) != sizeof(e->rng) || !e->rng)
		e->rng = 0x9E3779B97F4A7C15ULL ^ (uint64_t)getpid();
	ev_idle_init(&e->fed, fed_done);
	return &e->base;
}

void tc_loop_ev_free(struct tc_loop *l)
{
	if (l)
		ev_idle_stop(((struct evloop *)l)->ev, &((struct evloop *)l)->fed);
	free(l);
}

void *tc_loop_ev_raw(struct tc_loop *l)
{
	if (!l || l->ops != &ev_ops)
		return NULL;
	return ((struct evloop *)l)->ev;
}
