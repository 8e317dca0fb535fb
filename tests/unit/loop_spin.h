/* SPDX-License-Identifier: MIT */
/*
 * Running a real libev loop in a unit test until a condition holds, with a
 * deadline: for modules whose work comes back through the loop seam from
 * other threads (the io pool, the audit log's sync).
 */
#ifndef TC_LOOP_SPIN_H
#define TC_LOOP_SPIN_H

#include <ev.h>
#include <stdbool.h>

#include "proto/base/util.h"

static void loop_spin_tick(struct ev_loop *ev, ev_timer *w, int revents) { }

/* Runs ev until cond(arg) or timeout_ms pass; returns cond's last value. */
static inline bool loop_spin(struct ev_loop *ev, bool (*cond)(void *), void *arg, int timeout_ms)
{
	ev_timer tick;
	ev_timer_init(&tick, loop_spin_tick, 0.01, 0.01);
	ev_timer_start(ev, &tick);
	uint64_t end = mono_ms() + (uint64_t)timeout_ms;
	bool ok;
	while (!(ok = cond(arg)) && mono_ms() < end)
		ev_run(ev, EVRUN_ONCE);
	ev_timer_stop(ev, &tick);
	return ok;
}

#endif
