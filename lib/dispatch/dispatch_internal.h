/* SPDX-License-Identifier: MIT */
/*
 * The dispatch engine's own structures, shared by the files that make it
 * up (dispatch.c: callers, executions, attempts, cancellation;
 * dispatch_fair.c: the queues and the slots; confirm.c: confirmation
 * requests; admit.c: admission) and by nothing else.
 */
#ifndef TC_DISPATCH_INTERNAL_H
#define TC_DISPATCH_INTERNAL_H

#include <time.h>

#include "lib/dispatch/circuit.h"
#include "lib/dispatch/dispatch.h"
#include "lib/dispatch/idem.h"
#include "lib/base/list.h"
#include "lib/base/loop.h"
#include "lib/dispatch/policy.h"
#include "lib/dispatch/stats.h"

enum exec_state {
	EX_CLAIMING,			/* asking the store for its key */
	EX_NEW,
	EX_HOOKS,			/* pre-call hooks are running */
	EX_CONFIRMING,
	EX_QUEUED,
	EX_RUNNING,
	EX_BACKOFF,
	EX_DONE,
};

/* What the engine keeps per tool name. */
struct tool_state {
	unsigned running;
	struct list parked;		/* struct exec.queue_node: first in line, held by the tool's cap */
};

/* What the engine keeps per peer uid: its turn for slots and its circuits. */
struct uid_state {
	uid_t uid;
	struct list ready;		/* struct session.ready_node: sessions that may start a call */
	struct list node;		/* d->ready while ready is not empty */
	unsigned waiting;		/* executions waiting for a slot, all its sessions */
	unsigned running;		/* executions holding a slot, all its sessions */
	uint64_t served;		/* when it last got a slot (d->slots_given) */
	struct map *circuits;		/* tool name -> struct circuit */
	struct stats stats;		/* its own calls, for its own admin/stats */
};

struct attempt;
struct confirm;
struct hook_run;
struct hooks;

/* One execution: the tool run that answers one call, or every call that
 * names the same idempotency key. */
struct exec {
	struct dispatcher *d;
	struct tool *tool;
	struct tool_state *ts;
	struct uid_state *us;		/* the session's uid */
	struct circuit *circuit;	/* the tool's for that uid */
	struct session *session;
	struct json_doc *doc;
	const struct json *args;
	char *key;			/* uid-scoped idempotency key, or NULL */
	char *canon;			/* canonical arguments (keyed only) */
	char *call_id;
	enum exec_state state;
	struct list waiters;		/* struct caller.node */
	struct list node;		/* d->execs */
	struct list queue_node;		/* session->queue or ts->parked while EX_QUEUED */
	unsigned attempts;
	unsigned max_attempts;
	int64_t budget;			/* per-call budget left, < 0: none */
	uint64_t timeout_ms;
	int64_t call_timeout_ms;	/* the request's own timeout, <= 0: none */
	uint64_t start_ms;
	struct timespec start_ts;
	struct attempt *attempt;
	struct tc_timer *timer;		/* attempt timeout, backoff or confirmation */
	struct confirm *confirm;
	struct outcome *last;		/* last failed attempt, while backing off */
	bool holds_slot;
	bool parked;			/* queue_node is in ts->parked */
	bool probe;
	bool unkept;			/* refused before it ran: its outcome is not kept */
	enum confirm_mode mode;		/* decided at admission; applied once claimed and the hooks have spoken */
	struct store_claim *claim;	/* the key is this execution's */
	struct store_wait *claim_wait;	/* while EX_CLAIMING */
	uint64_t confirm_seq;		/* when confirmation was asked */
	struct hook_run *hook;		/* pre-call hooks running, or NULL */
	pid_t pid;			/* its first caller's, for an audit line nobody waits for */
};

struct dispatcher {
	struct tc_loop *loop;
	struct dispatch_config cfg;
	const struct policy_config *policy;
	const struct tool_env *env;
	struct registry *reg;
	struct event_bus *bus;
	struct audit *audit;
	struct hooks *hooks;		/* pre_call and post_call hooks */
	struct stats stats;
	struct idem_cache idem;
	unsigned waiting;		/* executions queued, all sessions */
	struct map *tools;		/* name -> struct tool_state */
	struct map *uids;		/* uid -> struct uid_state */
	struct list ready;		/* struct uid_state.node: uids whose turn comes, in order */
	struct map *confirms;		/* id -> struct confirm */
	confirm_charge_fn confirm_charge;	/* counts open requests' bytes per uid, or NULL */
	void *confirm_charge_arg;
	struct list resolved;		/* struct confirm.node, oldest first */
	struct tc_timer *sweep;		/* armed only for the next expiry */
	uint64_t sweep_due;		/* when it fires; 0: not armed */
	struct list execs;
	struct list callers;
	unsigned running;
	uint64_t slots_given;		/* a clock of starts, for the rounds' order */
	unsigned n_callers;
	uint64_t counter;
	uint64_t boot;
	unsigned pumping;
	struct exec *claiming;		/* cleared when that exec is freed */
	unsigned abandoned;		/* attempts stopped but not yet finished by their tool */
};

/* Ends an execution with outcome o (consumed) and answers every caller. */
void exec_finish(struct exec *e, struct outcome *o);
/* dispatch_stats.c: the state of a tool's circuit for the uid it is worst
 * for ("closed", "half-open" or "open"). */
const char *dispatch_worst_circuit(struct dispatcher *d, const char *name);

/* Queues an execution for a slot, or refuses it when the queue is full. */
void exec_enqueue(struct exec *e);
/* Asks the first caller of e that can ask its client to confirm (q NULL:
 * whether one could); true when one did. */
/* The workspace root the confirmation policy judges s by: its primary,
 * or NULL (trusted by no entry) when any other root of its group is not
 * trusted, so a trusted primary does not vouch for the rest. */
const char *dispatch_policy_root(const struct dispatcher *d, const struct session *s);
bool exec_ask_callers(struct exec *e, const struct confirm_question *q);
/* Tells e's callers that its confirmation request_id no longer waits for
 * their clients' answer. */
void exec_withdraw_callers(struct exec *e, const char *request_id);
/* Arms the exec's one timer with a callback (timeout, backoff, confirmation). */
void exec_set_timer(struct exec *e, tc_timer_cb cb, uint64_t after_ms);
/* Runs the next attempt of an execution that holds a slot. */
void exec_run(struct exec *e);
/* Arms the sweep timer for the earliest expiry there is (kept outcomes,
 * settled confirmations), or stops it when there is none. */
void dispatch_arm_sweep(struct dispatcher *d);

/* dispatch_fair.c: the queues and the slots. */
/* The engine's state of uid, made on first use. */
struct uid_state *fair_uid(struct dispatcher *d, uid_t uid);
/* The slots one uid's calls may hold at once: limits.per_uid_running, or
 * three quarters of max_concurrent (at least 1). */
unsigned fair_uid_cap(const struct dispatcher *d);
/* Frees every uid's state (the dispatcher is freed). */
void fair_clear(struct dispatcher *d);
/* Puts e in its session's queue: at the tail, or at the head (a retry
 * that was already admitted once). */
void fair_queue(struct exec *e, bool head);
/* Takes e out of the queue, if it is in it. */
void fair_leave(struct exec *e);
/* Gives back the slot e holds, if any. */
void fair_release(struct exec *e);
/* True when e could take a slot now. */
bool fair_can_run(struct dispatcher *d, const struct exec *e);
/* Starts queued executions while slots are free: round-robin across uids,
 * then across the uid's sessions, FIFO within a session. */
void fair_pump(struct dispatcher *d);
/* Caps or tools may have changed: every waiting execution is looked at
 * again. */
void fair_recheck(struct dispatcher *d);

#endif
