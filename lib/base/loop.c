/* SPDX-License-Identifier: MIT */
/*
 * Dispatch of timer and io operations to the loop implementation that made
 * the handle: every implementation's handles start with their ops pointer.
 */
#include "lib/base/loop.h"

#include <stddef.h>

struct handle {
	const struct tc_loop_ops *ops;
};

#define OPS(h) (((const struct handle *)(const void *)(h))->ops)

void tc_timer_start(struct tc_timer *t, uint64_t after_ms) { OPS(t)->timer_start(t, after_ms); }
void tc_timer_stop(struct tc_timer *t) { if (t) OPS(t)->timer_stop(t); }

struct tc_timer *tc_timer_free(struct tc_timer *t)
{
	if (t)
		OPS(t)->timer_free(t);
	return NULL;
}

void tc_io_start(struct tc_io *io) { OPS(io)->io_start(io); }
void tc_io_stop(struct tc_io *io) { if (io) OPS(io)->io_stop(io); }

struct tc_io *tc_io_free(struct tc_io *io)
{
	if (io)
		OPS(io)->io_free(io);
	return NULL;
}

bool tc_io_feed(struct tc_io *io, int revents)
{
	if (!OPS(io)->io_feed)
		return false;
	OPS(io)->io_feed(io, revents);
	return true;
}

/* A loop without deferred work stands a timer of 0 ms in: it runs after
 * the poll that follows, rather than before it. */
struct tc_defer *tc_defer_new(struct tc_loop *l, tc_timer_cb cb, void *arg)
{
	if (l->ops->defer_new)
		return l->ops->defer_new(l, cb, arg);
	return (struct tc_defer *)tc_timer_new(l, cb, arg);
}

void tc_defer_start(struct tc_defer *d)
{
	if (OPS(d)->defer_new)
		OPS(d)->defer_start(d);
	else
		OPS(d)->timer_start((struct tc_timer *)d, 0);
}

struct tc_defer *tc_defer_free(struct tc_defer *d)
{
	if (!d)
		return NULL;
	if (OPS(d)->defer_new)
		OPS(d)->defer_free(d);
	else
		OPS(d)->timer_free((struct tc_timer *)d);
	return NULL;
}
