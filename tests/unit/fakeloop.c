/* SPDX-License-Identifier: MIT */
/*
 * The fake loop: timers in a list, fired by fakeloop_advance in due order.
 */
#include "tests/unit/fakeloop.h"

#include <stdlib.h>

#include "lib/base/list.h"
#include "proto/base/util.h"

struct fake {
	struct tc_loop base;
	uint64_t now;
	uint32_t rnd;
	struct list timers;
};

struct tc_timer {
	const struct tc_loop_ops *ops;
	struct fake *f;
	struct list node;
	bool armed;
	uint64_t due;
	tc_timer_cb cb;
	void *arg;
};

static uint64_t f_now(struct tc_loop *l) { return ((struct fake *)l)->now; }
static uint32_t f_random(struct tc_loop *l) { return ((struct fake *)l)->rnd; }

static const struct tc_loop_ops fake_ops;

static struct tc_timer *f_timer_new(struct tc_loop *l, tc_timer_cb cb, void *arg)
{
	struct tc_timer *t = xcalloc(1, sizeof(*t));
	t->ops = &fake_ops;
	t->f = (struct fake *)l;
	t->cb = cb;
	t->arg = arg;
	list_init(&t->node);
	return t;
}

static void f_timer_stop(struct tc_timer *t)
{
	if (t->armed) {
		list_remove(&t->node);
		t->armed = false;
	}
}

static void f_timer_start(struct tc_timer *t, uint64_t after)
{
	f_timer_stop(t);
	t->due = t->f->now + after;
	t->armed = true;
	list_insert_tail(&t->f->timers, &t->node);
}

static void f_timer_free(struct tc_timer *t)
{
	f_timer_stop(t);
	free(t);
}

static struct tc_io *f_io_new(struct tc_loop *l, int fd, int events, tc_io_cb cb, void *arg)
{
	abort();	/* the dispatcher's unit tests use no fds */
}

static void f_io_nop(struct tc_io *io) { }

static const struct tc_loop_ops fake_ops = {
	.now = f_now,
	.random = f_random,
	.timer_new = f_timer_new,
	.timer_start = f_timer_start,
	.timer_stop = f_timer_stop,
	.timer_free = f_timer_free,
	.io_new = f_io_new,
	.io_start = f_io_nop,
	.io_stop = f_io_nop,
	.io_free = f_io_nop,
};

struct tc_loop *fakeloop_new(void)
{
	struct fake *f = xcalloc(1, sizeof(*f));
	f->base.ops = &fake_ops;
	f->now = 1000000;
	list_init(&f->timers);
	return &f->base;
}

void fakeloop_free(struct tc_loop *l)
{
	free(l);
}

void fakeloop_set_random(struct tc_loop *l, uint32_t value)
{
	((struct fake *)l)->rnd = value;
}

unsigned fakeloop_pending(struct tc_loop *l)
{
	struct fake *f = (struct fake *)l;
	unsigned n = 0;
	for (struct list *p = f->timers.next; p != &f->timers; p = p->next)
		n++;
	return n;
}

void fakeloop_advance(struct tc_loop *l, uint64_t ms)
{
	struct fake *f = (struct fake *)l;
	uint64_t end = f->now + ms;
	for (;;) {
		/* The earliest timer due by the end (callbacks may add more). */
		struct tc_timer *next = NULL;
		for (struct list *p = f->timers.next; p != &f->timers; p = p->next) {
			struct tc_timer *t = list_entry(p, struct tc_timer, node);
			if (t->due <= end && (!next || t->due < next->due))
				next = t;
		}
		if (!next)
			break;
		if (next->due > f->now)
			f->now = next->due;
		f_timer_stop(next);
		next->cb(next->arg);
	}
	f->now = end;
}
