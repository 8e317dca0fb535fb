/* SPDX-License-Identifier: MIT */
/*
 * The circuit breaker: a ring of recent failure times per tool and uid, the open
 * and half-open (probing) states, and the events that tell subscribers when
 * a tool is paused and when it is back.
 */
#include "lib/dispatch/dispatch_internal.h"

#include <string.h>

#include "lib/events.h"
#include "lib/tool.h"
#include "proto/base/util.h"

bool circuit_allows(struct circuit *c, const struct dispatch_config *cfg, uint64_t now,
		    uint64_t *ret_retry_after, bool *ret_probe)
{
	*ret_probe = false;
	if (!c->open)
		return true;
	if (now < c->open_until) {
		*ret_retry_after = c->open_until - now;
		return false;
	}
	if (c->probing) {
		*ret_retry_after = MIN(cfg->circuit_open_ms, 1000);
		return false;
	}
	c->probing = true;
	*ret_probe = true;
	return true;
}

void circuit_probe_abort(struct circuit *c)
{
	c->probing = false;
}

/* True when an outcome of kind k says the tool t is sick. */
static bool counts_as_failure(const struct tool *t, enum tc_kind k)
{
	return k == TC_TIMEOUT || k == TC_TRANSIENT ||
	       (k == TC_EXECUTION_ERROR && t->def->errors_trip_circuit);
}

/* Opens the circuit for the configured pause. */
static void circuit_open(struct circuit *c, const struct dispatch_config *cfg, struct event_bus *bus,
			 const struct session *s, const char *tool, uint64_t now)
{
	c->open = true;
	c->open_until = now + cfg->circuit_open_ms;
	c->n_fails = 0;
	event_emit(bus, "circuit.opened", s, NULL, tool, NULL, NULL);
}

void circuit_record(struct circuit *c, const struct dispatch_config *cfg, struct event_bus *bus,
		    const struct session *s, const struct tool *t, bool probe, enum tc_kind kind,
		    uint64_t now)
{
	if (probe) {
		c->probing = false;
		if (kind == TC_OK) {
			c->open = false;
			c->n_fails = 0;
			event_emit(bus, "circuit.closed", s, NULL, t->name, NULL, NULL);
		} else if (counts_as_failure(t, kind)) {
			circuit_open(c, cfg, bus, s, t->name, now);
		}
		return;
	}
	if (!counts_as_failure(t, kind) || cfg->circuit_failures == 0 || c->open)
		return;
	/* Keep only failures inside the window, newest last. */
	unsigned keep = 0;
	for (unsigned i = 0; i < c->n_fails; i++)
		if (c->fails[i] + cfg->circuit_window_ms > now)
			c->fails[keep++] = c->fails[i];
	c->n_fails = keep;
	if (c->n_fails == CIRCUIT_RING) {
		memmove(c->fails, c->fails + 1, sizeof(c->fails[0]) * (CIRCUIT_RING - 1));
		c->n_fails--;
	}
	c->fails[c->n_fails++] = now;
	if (c->n_fails >= cfg->circuit_failures)
		circuit_open(c, cfg, bus, s, t->name, now);
}

const char *circuit_state_name(const struct circuit *c)
{
	return !c->open ? "closed" : c->probing ? "half-open" : "open";
}
