/* SPDX-License-Identifier: MIT */
/*
 * The seam between the dispatcher and an event loop: a clock, a random
 * source, timers and fd watchers, behind a table of function pointers. The
 * daemon plugs in libev (loop_ev.c); unit tests plug in a fake loop whose
 * clock they move by hand, so delays and TTLs are tested exactly and at once.
 * Child processes are watched through their pidfds with io watchers, so no
 * SIGCHLD handling is needed anywhere.
 */
#ifndef TC_LOOP_H
#define TC_LOOP_H

#include <stdbool.h>
#include <stdint.h>

struct tc_loop;
struct tc_timer;
struct tc_io;
struct tc_defer;

typedef void (*tc_timer_cb)(void *arg);
typedef void (*tc_io_cb)(void *arg, int revents);

enum {
	TC_IO_READ = 1 << 0,
	TC_IO_WRITE = 1 << 1,
};

struct tc_loop_ops {
	uint64_t (*now)(struct tc_loop *l);	/* monotonic milliseconds */
	uint32_t (*random)(struct tc_loop *l);
	struct tc_timer *(*timer_new)(struct tc_loop *l, tc_timer_cb cb, void *arg);
	void (*timer_start)(struct tc_timer *t, uint64_t after_ms);	/* (re)arms */
	void (*timer_stop)(struct tc_timer *t);
	void (*timer_free)(struct tc_timer *t);	/* stops first; accepts NULL */
	struct tc_io *(*io_new)(struct tc_loop *l, int fd, int events, tc_io_cb cb, void *arg);
	void (*io_start)(struct tc_io *io);
	void (*io_stop)(struct tc_io *io);
	void (*io_free)(struct tc_io *io);	/* stops first; accepts NULL; does not close fd */
	/* Optional (a loop without: a timer of 0 ms stands in). */
	struct tc_defer *(*defer_new)(struct tc_loop *l, tc_timer_cb cb, void *arg);
	void (*defer_start)(struct tc_defer *d);
	void (*defer_free)(struct tc_defer *d);	/* stops first; accepts NULL */
	/* Optional: io's callback runs later in this loop turn, as though
	 * its fd were ready (io need not be started). */
	void (*io_feed)(struct tc_io *io, int revents);
};

struct tc_loop {
	const struct tc_loop_ops *ops;
};

static inline uint64_t tc_now(struct tc_loop *l) { return l->ops->now(l); }
static inline uint32_t tc_random(struct tc_loop *l) { return l->ops->random(l); }
static inline struct tc_timer *tc_timer_new(struct tc_loop *l, tc_timer_cb cb, void *arg)
{ return l->ops->timer_new(l, cb, arg); }
static inline struct tc_io *tc_io_new(struct tc_loop *l, int fd, int events, tc_io_cb cb, void *arg)
{ return l->ops->io_new(l, fd, events, cb, arg); }

/* Timer and io operations go through the loop that made them. */
void tc_timer_start(struct tc_timer *t, uint64_t after_ms);
void tc_timer_stop(struct tc_timer *t);
struct tc_timer *tc_timer_free(struct tc_timer *t);
void tc_io_start(struct tc_io *io);
void tc_io_stop(struct tc_io *io);
struct tc_io *tc_io_free(struct tc_io *io);
/* Has io's callback run in this turn of the loop, after the callback
 * running now, as though its fd were ready with revents: for what is known
 * ready before the fd ever reached the poller (a watcher started and
 * stopped in one turn costs the poller nothing). False, and nothing done,
 * where the loop cannot. */
bool tc_io_feed(struct tc_io *io, int revents);

/*
 * Work for the end of the loop's turn: once started, cb runs once, after
 * the callbacks of the turn and after what the daemon writes before it
 * polls (the answers queued in the turn: the daemon's prepare watcher has
 * the default priority, a deferred one the lowest), and before the poll.
 * What need not hold up an answer (closing fds, freeing) goes there.
 * Started again before it ran, it still runs once.
 */
struct tc_defer *tc_defer_new(struct tc_loop *l, tc_timer_cb cb, void *arg);
void tc_defer_start(struct tc_defer *d);
struct tc_defer *tc_defer_free(struct tc_defer *d);

/* The libev implementation: ev is a struct ev_loop *. */
struct tc_loop *tc_loop_ev_new(void *ev);
void tc_loop_ev_free(struct tc_loop *l);
/* The struct ev_loop * under l, for a library that attaches to libev
 * itself (hiredis); NULL when l is not the libev implementation. */
void *tc_loop_ev_raw(struct tc_loop *l);

#endif
