/* SPDX-License-Identifier: MIT */
/*
 * A fake event loop for unit tests: a clock that moves only when the test
 * says so, timers fired in order as it moves, and a scripted random source.
 */
#ifndef TC_FAKELOOP_H
#define TC_FAKELOOP_H

#include <stdint.h>

#include "lib/base/loop.h"

struct tc_loop *fakeloop_new(void);
void fakeloop_free(struct tc_loop *l);
/* Moves the clock forward by ms, firing every timer that falls due. */
void fakeloop_advance(struct tc_loop *l, uint64_t ms);
/* The value random() returns from now on. */
void fakeloop_set_random(struct tc_loop *l, uint32_t value);
/* Armed timers. */
unsigned fakeloop_pending(struct tc_loop *l);

#endif
