/* SPDX-License-Identifier: MIT */
/*
 * The dispatch engine's own structures, shared by the files that make it
 * up (dispatch.c: callers, executions, attempts, the queue, cancellation;
 * confirm.c: confirmation requests) and by nothing else.
 */
#ifndef TC_DISPATCH_INTERNAL_H
#define TC_DISPATCH_INTERNAL_H

#include <time.h>

#include "lib/circuit.h"
#include "lib/dispatch.h"
#include "lib/idem.h"
#include "lib/list.h"
#include "lib/loop.h"
#include "lib/stats.h"

enum exec_state {
	EX_NEW,
	EX_CONFIRMING,
	EX_QUEUED,
	EX_RUNNING,
	EX_BACKOFF,
	EX_DONE,
};

/* What the engine keeps per tool name. */
struct tool_state {
	unsigned running;
	struct circuit circuit;
};

struct attempt;
struct confirm;

/* One execution: the tool run that answers one call, or every call that
 * names the same idempotency key. */
struct exec {
	struct dispatcher *d;
	struct tool *tool;
	struct tool_state *ts;
	struct session *session;
	struct json_doc *doc;
	const struct json *args;
	char *key;			/* uid-scoped idempotency key, or NULL */
	char *canon;			/* canonical arguments (keyed only) */
	char *call_id;
	enum exec_state state;
	struct list waiters;		/* struct caller.node */
	struct list node;		/* d->execs */
	struct list queue_node;		/* d->queue while EX_QUEUED */
	unsigned attempts;
	unsigned max_attempts;
	int64_t budget;			/* per-call budget left, < 0: none */
	uint64_t timeout_ms;
	uint64_t start_ms;
	struct timespec start_ts;
	struct attempt *attempt;
	struct tc_timer *timer;		/* attempt timeout, backoff or confirmation */
	struct confirm *confirm;
	struct outcome *last;		/* last failed attempt, while backing off */
	bool holds_slot;
	bool probe;
	uint64_t confirm_seq;		/* when confirmation was asked */
};

struct dispatcher {
	struct tc_loop *loop;
	struct dispatch_config cfg;
	const struct policy_config *policy;
	const struct tool_env *env;
	struct registry *reg;
	struct event_bus *bus;
	struct audit *audit;
	struct stats stats;
	struct idem_cache idem;
	unsigned waiting;		/* executions queued, all sessions */
	struct map *tools;		/* name -> struct tool_state */
	struct map *confirms;		/* id -> struct confirm */
	struct list resolved;		/* struct confirm.node, oldest first */
	struct tc_timer *sweep;
	struct list queue;
	struct list execs;
	struct list callers;
	unsigned running;
	unsigned n_callers;
	uint64_t counter;
	uint64_t boot;
	unsigned pumping;
	struct caller *watch;		/* cleared when that caller is freed */
	unsigned abandoned;		/* attempts stopped but not yet finished by their tool */
};

/* Ends an execution with outcome o (consumed) and answers every caller. */
void exec_finish(struct exec *e, struct outcome *o);
/* Queues an execution for a slot, or refuses it when the queue is full. */
void exec_enqueue(struct exec *e);
/* Arms the exec's one timer with a callback (timeout, backoff, confirmation). */
void exec_set_timer(struct exec *e, tc_timer_cb cb, uint64_t after_ms);

#endif
