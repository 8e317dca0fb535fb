/* SPDX-License-Identifier: MIT */
/*
 * The dispatch engine's own structures, shared by the files that make it
 * up (dispatch.c: callers, executions, attempts, cancellation;
 * dispatch_fair.c: the queues and the slots; confirm.c: confirmation
 * requests; admit.c: admission; dispatch_stats.c and dispatch_metrics.c:
 * what admin/stats and admin/metrics read of it) and by nothing outside
 * lib/dispatch/: the parts each file offers the others, lowest first
 * (statistics, circuits, idempotency, admission, the audit line of a
 * call), then the engine's own structures.
 *
 * Calls go one way: dispatch.c calls the others, and none calls it back.
 * The fair queue hands back the execution whose turn it is (fair_next);
 * confirmation returns outcomes and reports an approver's decision
 * through the struct confirm_reports the engine handed in.
 */
#ifndef TC_DISPATCH_INTERNAL_H
#define TC_DISPATCH_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include "lib/base/list.h"
#include "lib/base/loop.h"
#include "lib/dispatch/dispatch.h"
#include "lib/policy/policy.h"
#include "lib/errors.h"

struct attempt;
struct audit;
struct call_params;
struct confirm;
struct dispatch_config;
struct dispatcher;
struct event_bus;
struct exec;
struct hook_run;
struct hooks;
struct idem_entry;
struct json;
struct json_doc;
struct outcome;
struct sandbox_config;
struct session;
struct store;
struct store_config;
struct tc_loop;
struct tool;
struct tool_state;
struct uid_state;

/* --- stats.c ---------------------------------------------------------------
 * Counters for admin/stats: per tool calls, errors by kind and a latency
 * histogram (log-linear buckets in microseconds, for p50 and p99).
 */
#define STATS_BUCKETS 496

struct tool_stats {
	uint64_t calls;
	uint64_t errors[TC_KIND_MAX];
	uint64_t hist[STATS_BUCKETS];
	uint64_t sum_us;		/* of all durations, for admin/metrics */
};

struct stats {
	struct map *tools;		/* name -> struct tool_stats */
	uint64_t calls;
	uint64_t errors[TC_KIND_MAX];
	uint64_t idem_hits;		/* replays from the cache */
	uint64_t idem_joins;		/* callers joining an execution in flight */
	uint64_t attempts;
	uint64_t retries;
};

void stats_init(struct stats *s);
void stats_free(struct stats *s);
void stats_record(struct stats *s, const char *tool, enum tc_kind kind, uint64_t duration_us);
/* The value (microseconds) below which the fraction q of recorded calls fall. */
uint64_t stats_percentile(const struct tool_stats *t, double q);
/* How many recorded calls took at most us microseconds, each counted at
 * the value stats_percentile reports for its bucket (for admin/metrics). */
uint64_t stats_count_at_most(const struct tool_stats *t, uint64_t us);

/* --- circuit.c -------------------------------------------------------------
 * The circuit breaker of one tool for one uid: failures inside a window
 * open it; while open, that uid's calls of the tool are refused with a
 * retry-after; when the pause is over one call goes through as a probe,
 * whose outcome closes or reopens it. Failures are timeouts, transient
 * errors, and execution errors of tools whose errors are their own (command
 * and mcp kinds): a missing file is the caller's mistake, and one uid's
 * failures never pause the tool for another.
 */

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

/* --- confirm.c: the engine's side of confirmation ----------------------- */
/* How confirmation reports to the engine what an approver's answer or
 * departure decided: dispatch.c hands these in (d->reports), and
 * confirm.c calls no engine function. */
struct confirm_reports {
	/* Asks the first of e's callers whose client can confirm (q NULL:
	 * whether one could); true when one did. */
	bool (*ask_callers)(struct exec *e, const struct confirm_question *q);
	/* Tells e's callers that request_id no longer waits for their
	 * clients' answer. */
	void (*withdraw_callers)(struct exec *e, const char *request_id);
	/* e's request is settled: o NULL, the call was allowed and goes on
	 * to its slot; else it ends with o (taken). */
	void (*decided)(struct exec *e, struct outcome *o);
	/* A settled request is kept until it expires (confirm_next_expiry):
	 * the sweep must be armed for it. */
	void (*kept)(struct dispatcher *d);
};

/* For the engine: asks for confirmation of e. NULL: the request is open
 * (e's timer is the engine's to arm for confirm_timeout_ms; the answer
 * comes through reports->decided); else the outcome that ends e at once
 * (no approver connected and none waited for, too many requests open, the
 * memory bound, the only client asked could not answer). */
struct outcome *confirm_ask(struct exec *e);
/* How long a request waits: the policy's (its default when the
 * dispatcher has none). */
uint64_t confirm_timeout_ms(const struct dispatcher *d);
/* For the engine: e's request waited confirm_timeout_ms; it is settled
 * ("timeout", approvers told) and the outcome that ends e returned. */
struct outcome *confirm_timed_out(struct exec *e);
/* For the engine: e is cancelled while it waits; its request is settled
 * and tool.confirmation_resolved (decision "cancelled") tells approvers. */
void confirm_cancel(struct exec *e);
/* For the engine: e is freed; a request still open is forgotten. */
void confirm_forget(struct exec *e);
/* Forgets resolved requests kept past their time. */
void confirm_sweep(struct dispatcher *d, uint64_t now);
/* When the first resolved request is to be forgotten; 0: none is kept. */
uint64_t confirm_next_expiry(struct dispatcher *d);
/* Forgets every resolved request (the dispatcher is freed). */
void confirm_clear(struct dispatcher *d);

/* --- idem.c ----------------------------------------------------------------
 * Idempotency: a key (scoped to the caller's uid) names one execution.
 * Executions in flight here are indexed by key, so later callers with the
 * same key and the same tool and canonical arguments join them without
 * asking anyone; the same key with another call is a conflict. Everything
 * else goes through the store (lib/store/store.h): the claim that makes an
 * execution the key's, the outcome kept for the TTL and replayed, and the
 * calls running on other daemons (a shared store) that are joined there.
 */

struct idem_entry {
	char *tool;
	char *canon;
	struct exec *exec;		/* in flight */
	char *key;
};

struct idem_cache {
	struct map *entries;		/* key -> struct idem_entry, in flight */
	struct store *store;
};

/* Opens the memory store with cfg's limits. */
void idem_init(struct idem_cache *c, struct tc_loop *loop, const struct dispatch_config *cfg);
/* Frees every entry, the store and the cache's own memory. */
void idem_clear(struct idem_cache *c);
/* Swaps in the store sc names (nothing may be in flight): 0 or the
 * store's error. */
int idem_open_store(struct idem_cache *c, struct tc_loop *loop, const struct dispatch_config *cfg,
		    const struct store_config *sc);
/* Applies cfg's TTL and bounds to the store. */
void idem_configure(struct idem_cache *c, const struct dispatch_config *cfg);
/* The cache key of a client's idempotency key for uid. */
char *idem_key(uid_t uid, const char *client_key);
/* The client's key inside a cache key. */
const char *idem_client_key(const char *key);
/* Finds the execution in flight here for key (NULL: none). */
struct idem_entry *idem_find(struct idem_cache *c, const char *key);
/* True when the entry was made for another tool or other arguments. */
bool idem_conflicts(const struct idem_entry *ie, const char *tool, const char *canon);
/* Records that exec, running tool with canonical arguments canon, answers key. */
void idem_begin(struct idem_cache *c, const char *key, const char *tool, const char *canon,
		struct exec *exec);
/* exec no longer answers key here. */
void idem_end(struct idem_cache *c, const char *key, const struct exec *exec);
/* Records the store holds in this daemon's memory. */
size_t idem_size(const struct idem_cache *c);
/* Keyed executions in flight here. */
size_t idem_in_flight(const struct idem_cache *c);

/* --- admit.c ---------------------------------------------------------------
 * Admission: the checks a call passes before it becomes an execution. Each
 * step looks at one thing (the tool, the audit log, the arguments, the schema, the
 * confirmation policy, paths, the idempotency key, the circuit, the budget)
 * and returns the outcome that refuses the call, or NULL to go on; what the
 * steps learn is gathered in a struct admission. Used by dispatch.c only.
 */

/* What dispatch_call learns about a call before it becomes an execution. */
struct admission {
	const char *name;
	struct tool *t;			/* the registry's; NULL when not found */
	struct json_doc *doc;		/* holds args */
	const struct json *args;
	enum confirm_mode mode;
	char *key;			/* uid-scoped idempotency key, or NULL */
	char *canon;			/* canonical arguments (keyed only) */
	struct tool_state *ts;
	struct uid_state *us;		/* the session's uid */
	struct circuit *circuit;	/* the tool's for that uid */
	bool probe;			/* the circuit's probe */
};

/* Frees what the admission still holds (for _cleanup_). */
void admit_clear(struct admission *a);
/* Finds the tool the session may call (a->t; NULL when not found). */
struct outcome *admit_find_tool(struct dispatcher *d, struct session *s, struct admission *a);
/* Refuses every call while the audit log cannot be written and
 * audit.on_error is "refuse". */
struct outcome *admit_check_audit(struct dispatcher *d);
/* Takes the arguments: an object, or JSON text in a string; none is {}. */
struct outcome *admit_parse_arguments(struct dispatcher *d, const struct call_params *p,
				      struct admission *a);
/* Checks the arguments against the tool's schema. */
struct outcome *admit_validate_arguments(struct admission *a);
/* Emits tool.input_invalid for a refusal by the two steps above. */
void admit_report_invalid(struct dispatcher *d, struct session *s, const char *name, const struct outcome *o);
/* Applies the confirmation policy to a->mode. */
void admit_decide_confirmation(struct dispatcher *d, struct session *s, struct admission *a);
/* Refuses paths that escape the workspace before anyone is asked to confirm. */
struct outcome *admit_check_paths(struct session *s, const struct admission *a);
/* Looks the idempotency key up: its entry, or NULL for a new key. */
struct idem_entry *admit_find_keyed(struct dispatcher *d, struct session *s, const char *client_key,
				    struct admission *a);
/* Asks the circuit of the tool for the session's uid whether the call may
 * run (a->ts, a->us, a->circuit, a->probe). */
struct outcome *admit_check_circuit(struct dispatcher *d, struct session *s, struct admission *a);
/* Refuses a call when no budget is left for its first attempt. */
struct outcome *admit_check_budget(struct session *s, const struct call_params *p, struct admission *a);

/* --- audit_call.c ----------------------------------------------------------
 * The audit line of one call: who asked (session, uid, pid), what ran
 * (tool, side effect, command, sandbox profile), where (workspace root),
 * what it touched (files written, files read) and how it ended (outcome,
 * attempts, duration, message). Written for every call that reached a
 * tool, whatever ended it: success, failure, timeout, cancellation, a
 * client's disconnect, shutdown. The line goes to lib/base/audit.c, which
 * queues, writes and syncs it.
 */

struct audit_call {
	const struct session *session;	/* may be NULL */
	pid_t pid;			/* the client's, 0 when unknown */
	const struct outcome *o;
	bool replayed;			/* answered from the idempotency cache */
	const struct tool *tool;	/* the tool that ran it, or NULL */
	const struct json *args;	/* its validated arguments, or NULL */
	const struct sandbox_config *sandbox;	/* the daemon's, for the profile of children */
};

/* Records the audit line of a call (nothing when a is NULL). */
void audit_call(struct audit *a, const struct audit_call *c);

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
	bool stopped;			/* ended by dispatch_stop_all */
	enum confirm_mode mode;		/* decided at admission; applied once claimed and the hooks have spoken */
	struct store_claim *claim;	/* the key is this execution's */
	struct store_wait *claim_wait;	/* while EX_CLAIMING: the store has not answered */
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
	const struct confirm_reports *reports;	/* the engine's, for confirm.c */
	confirm_charge_fn confirm_charge;	/* counts open requests' bytes per uid, or NULL */
	void *confirm_charge_arg;
	const struct confirm_other_ops *other;	/* requests that are not a call's own, or NULL */
	void *other_arg;
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
	uint32_t id_key[4];	/* hides the count in the ids (id_hide()) */
	unsigned pumping;		/* a pump runs, or dispatch_hold() holds it */
	unsigned abandoned;		/* attempts stopped but not yet finished by their tool */
	bool stopping;			/* dispatch_stop_all: calls end cancelled with data.restart, keys kept nowhere */
	const char *stop_why;		/* its message (static) */
};

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
/* The queued execution whose turn it is, given its slot (the engine runs
 * it), or NULL when no slot is free or nothing waits: round-robin across
 * uids, then across the uid's sessions, FIFO within a session. */
struct exec *fair_next(struct dispatcher *d);
/* Caps or tools may have changed: every waiting execution is looked at
 * again. */
void fair_recheck(struct dispatcher *d);

/* dispatch_stats.c: the state of a tool's circuit for the uid it is worst
 * for ("closed", "half-open" or "open"). */
const char *dispatch_worst_circuit(struct dispatcher *d, const char *name);

#endif
