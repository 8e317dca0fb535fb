/* SPDX-License-Identifier: MIT */
/*
 * The circuit breaker of one tool for one uid: failures inside a window
 * open it; while open, that uid's calls of the tool are refused with a
 * retry-after; when the pause is over one call goes through as a probe,
 * whose outcome closes or reopens it. Failures are timeouts, transient
 * errors, and execution errors of tools whose errors are their own (command
 * and mcp kinds): a missing file is the caller's mistake, and one uid's
 * failures never pause the tool for another.
 */
#ifndef TC_CIRCUIT_H
#define TC_CIRCUIT_H

#include <stdbool.h>
#include <stdint.h>

#include "lib/errors.h"

struct dispatch_config;
struct event_bus;
struct session;
struct tool;

/* Failures kept per tool for the circuit window (more are never needed
 * than the threshold, but the threshold is configurable). */
#define CIRCUIT_RING 64

struct circuit {
	uint64_t fails[CIRCUIT_RING];
	unsigned n_fails;
	bool open;
	bool probing;
	uint64_t open_until;
};

/*
 * True when a call may run now. When not, *ret_retry_after says in how many
 * ms to try again. *ret_probe is true when the call is the probe of a
 * circuit whose pause is over: its outcome must be recorded.
 */
bool circuit_allows(struct circuit *c, const struct dispatch_config *cfg, uint64_t now,
		    uint64_t *ret_retry_after, bool *ret_probe);
/* A probe let through did not run after all: another may go. */
void circuit_probe_abort(struct circuit *c);
/* Records the outcome kind of an attempted call of tool t by session s
 * (probe: the call circuit_allows let through as the probe); opening or
 * closing emits circuit.opened / circuit.closed on bus, to s's uid. */
void circuit_record(struct circuit *c, const struct dispatch_config *cfg, struct event_bus *bus,
		    const struct session *s, const struct tool *t, bool probe, enum tc_kind kind,
		    uint64_t now);
/* "closed", "half-open" or "open", for admin/stats. */
const char *circuit_state_name(const struct circuit *c);

#endif
