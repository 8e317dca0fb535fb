/* SPDX-License-Identifier: MIT */
/*
 * The fixture shared by the dispatch engine's unit suites: fake tools,
 * a dispatcher on a fake clock (tests/unit/fakeloop.h) with one session
 * (sess, uid 1000), and what it answered and emitted, recorded.
 *
 * Fake tools: "slow" (async, read), "slow_idem" (async, idempotent),
 * "echo" (synchronous, echoes its arguments), "writer" (async, write),
 * "prog" (async, its execution errors count for the circuit, as a command
 * or mcp tool's do) and "capped" (async, one call at a time). An async
 * attempt waits in pending[] until the test ends it with complete_first()
 * or complete_tag().
 */
#ifndef TC_DISPATCH_FIXTURE_H
#define TC_DISPATCH_FIXTURE_H

#include <stdbool.h>
#include <stdint.h>

#include "lib/dispatch/dispatch.h"
#include "lib/policy/policy.h"

#define MAX_PENDING 512

struct rec {
	bool done;
	enum tc_kind kind;
	bool replayed;
	char call_id[64];
	unsigned attempts;
	uint64_t retry_after;
	bool restart;			/* data.restart: ended by the daemon's stop */
	char message[512];
	uint64_t at;
};

extern struct tool_call *pending[MAX_PENDING];
extern unsigned n_pending;
extern unsigned exec_count;
extern unsigned cancel_count;
extern struct rec recs[MAX_PENDING];
extern unsigned n_recs;
extern unsigned n_events;

extern struct tc_loop *loop;
extern struct dispatcher *d;
extern struct event_bus bus;
extern struct registry *reg;
extern struct session_table *table;
extern struct workspace *ws;
extern struct session *sess;
extern struct policy_config policy;
extern const struct caller_ops ops;
extern const struct tool_def def_slow, def_slow_idem, def_echo, def_writer, def_prog,
	def_capped;

/* The "n" argument of the pending attempt i (-1: none). */
int64_t pending_tag(unsigned i);
/* Ends the pending attempt whose "n" argument is tag with kind. */
void complete_tag(int64_t tag, enum tc_kind kind);
/* Ends the oldest pending attempt with kind. */
void complete_first(enum tc_kind kind);
/* An event subscriber's delivery that records the event in events[]. */
bool on_event(void *ctx, const char *params, size_t n);
/* Counts recorded events whose JSON contains needle. */
unsigned count_events(const char *needle);
/* The requestId of the first tool.confirmation_requested recorded (owned). */
char *requested_id(void);

/* Check fixtures: a dispatcher with cfg (setup: the defaults), and its end. */
void setup_with(const struct dispatch_config *cfg);
void setup(void);
void teardown(void);

/* Calls tool for session s with JSON arguments text and an idempotency key
 * (or NULL), recording the outcome in r; returns the caller handle. */
struct caller *call_as(struct session *s, const char *tool, const char *args, const char *key,
		       struct rec *r);
/* The same, for sess. */
struct caller *call(const char *tool, const char *args, const char *key, struct rec *r);

#endif
