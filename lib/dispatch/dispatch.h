/* SPDX-License-Identifier: MIT */
/*
 * The dispatch engine: the one layer that knows about timeouts, retries,
 * idempotency, budgets, concurrency caps, the circuit breaker and
 * confirmation. A caller (one tools/call request) asks for a tool to run;
 * the engine validates it, finds or makes the execution that will answer it
 * (executions with the same idempotency key are shared by every caller that
 * names the key), and completes the caller exactly once through its ops —
 * unless the caller is cancelled silently or detached.
 *
 * It knows nothing of sockets: the daemon hands it callers and gets
 * outcomes back through callbacks; time and randomness come through the
 * loop seam, so unit tests drive it with a fake clock.
 *
 * The engine's one public header: outcomes, calls and their callers,
 * confirmation, the dispatcher's settings and statistics.
 */
#ifndef TC_DISPATCH_H
#define TC_DISPATCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "lib/errors.h"
#include "lib/tool.h"
#include "proto/base/util.h"

struct audit;
struct buf;
struct event_bus;
struct hooks_config;
struct jgen;
struct json;
struct json_doc;
struct policy_config;
struct registry;
struct session;
struct store;
struct store_config;
struct store_value_ops;
struct subscriber;
struct tc_loop;

/* --- outcome.c -------------------------------------------------------------
 * Outcomes: how a call ended, shared (by reference) by every caller of one
 * execution and by the idempotency cache. Made from a finished tool call or
 * from an error kind and a message; written to the wire through
 * proto/mcp_result.h.
 */
/* How a call ended: shared by every caller of one execution. */
struct outcome {
	unsigned refs;
	enum tc_kind kind;		/* TC_OK on success */
	bool is_error;			/* success with isError (shell exit != 0) */
	char *text;
	char *text_json;		/* text as a JSON string literal, when the tool gave it */
	char *structured;		/* JSON object text */
	char *content;			/* the content array (JSON text) when not one text item */
	char *meta;			/* the tool's own members of _meta (JSON object text), or NULL */
	char *message;
	char *error_data;		/* extra data members: JSON object text */
	char *call_id;
	char *tool;
	enum side_effect side_effects;
	bool idempotent;
	unsigned attempts;
	uint64_t duration_ms;
	uint64_t retry_after_ms;	/* circuit_open */
	char **files;
	size_t n_files;
	char *command;
};

/* A new outcome of kind, with one reference and nothing else set. */
struct outcome *outcome_new(enum tc_kind kind);
/* A new failed outcome with a formatted message. */
struct outcome *outcome_error(enum tc_kind kind, const char *fmt, ...) PRINTF(2, 3);
/* The outcome of a finished tool call, taking what the call holds. */
struct outcome *outcome_from_call(struct tool_call *tc);
struct outcome *outcome_ref(struct outcome *o);
/* Drops one reference; frees at zero. Accepts NULL; returns NULL. */
struct outcome *outcome_unref(struct outcome *o);
DEFINE_CLEANUP_FUNC(struct outcome, outcome_unref)
/* True when the kind is worth retrying (timeout: only idempotent tools). */
bool outcome_retryable(const struct outcome *o);
/* Roughly what an outcome holds in memory, for the cache's byte bound. */
size_t outcome_bytes(const struct outcome *o);
/* Writes the JSON-RPC result object of a success. */
void outcome_write_result(const struct outcome *o, bool replayed, struct buf *out);
/* Writes the error's data object (kind, retryable, attempts, ...; replayed:
 * true for an outcome replayed from the idempotency cache). */
void outcome_write_error_data(const struct outcome *o, bool replayed, struct buf *out);

/* Outcomes as the values of a store (lib/store/store.h, outcome_store.c):
 * what the dispatcher hands store_open so kept outcomes can be counted,
 * shared and read back; tasks keep their outcomes in the same form. */
extern const struct store_value_ops outcome_store_ops;

/* --- dispatch.c: calls, their callers, the dispatcher ------------------- */
struct dispatch_config {
	unsigned max_concurrent;	/* 64 */
	unsigned session_concurrency;	/* 4 */
	unsigned per_uid_running;	/* 0: three quarters of max_concurrent, at least 1 */
	unsigned queue_max;		/* 256 per session */
	unsigned queue_max_total;	/* 8192 daemon-wide */
	unsigned per_uid_queue;		/* 4096 per uid, all its sessions */
	unsigned session_confirmations;	/* 64 pending per session */
	unsigned max_attempts;		/* 3 */
	uint64_t base_delay_ms;		/* 100 */
	uint64_t max_delay_ms;		/* 10000: the longest backoff */
	uint64_t idem_ttl_ms;		/* 60000 */
	size_t idem_max_entries;	/* 10000 per uid */
	uint64_t idem_max_bytes;	/* 256 MiB of kept outcomes per uid */
	unsigned circuit_failures;	/* 5 */
	uint64_t circuit_window_ms;	/* 30000 */
	uint64_t circuit_open_ms;	/* 30000 */
	unsigned max_json_depth;	/* for arguments sent as a string */
};

/* Fills c with the contract's defaults. */
void dispatch_config_defaults(struct dispatch_config *c);

struct call_params {
	const char *tool;
	const struct json *arguments;	/* object, JSON text in a string, or NULL ({}) */
	struct json_doc *doc;		/* the document holding arguments */
	const char *idempotency_key;	/* NULL: none */
	int64_t timeout_ms;		/* < 0: the tool's */
	const char *progress_token;	/* JSON text of _meta.progressToken, or NULL */
	size_t progress_token_len;
	int64_t budget;			/* < 0: none */
	pid_t pid;			/* the peer's, for the audit log */
	uint64_t accepted_ms;		/* when the request came in, on the loop's
					 * clock (it may have waited); 0: now */
};

/* What a confirmation request asks (see caller_ops.ask). */
struct confirm_question {
	const char *request_id;
	const char *tool;
	const char *side_effect;
	const char *input;		/* the arguments, canonical JSON text */
	size_t input_len;
	char *const *files;		/* the files it names, as they resolve */
	size_t n_files;
	const char *diff;		/* what it would change, or NULL */
	uint64_t timeout_ms;
	const char *question;		/* what is asked, when not whether the tool may run
					 * (a network.connect: "Allow … to connect to HOST:PORT?") */
};

struct caller_ops {
	/* The call's outcome: called once (replayed: from the idempotency cache). */
	void (*complete)(void *ctx, const struct outcome *o, bool replayed);
	/* Output of a running call with a progress token. */
	void (*progress)(void *ctx, const char *token, size_t token_len, uint64_t progress,
			 const char *stream, const char *data, size_t n);
	/* Optional: asks the caller's own client to confirm (MCP
	 * elicitation), answered later through dispatch_resolve(). q NULL
	 * only asks whether it could. True when asked (or could be). */
	bool (*ask)(void *ctx, const struct confirm_question *q);
	/* Optional: a confirmation put to the caller's client through ask
	 * was settled otherwise (an approver, the timeout, a cancel); the
	 * question can be taken down. */
	void (*withdraw)(void *ctx, const char *request_id);
};

struct dispatcher;
struct caller;

struct dispatcher *dispatcher_new(struct tc_loop *loop, const struct dispatch_config *cfg,
				  struct event_bus *bus);
/* Cancels what is left and frees. Accepts NULL; returns NULL. */
struct dispatcher *dispatcher_free(struct dispatcher *d);
void dispatch_set_config(struct dispatcher *d, const struct dispatch_config *cfg);
/* The policy, the tool environment and the audit log stay the caller's. */
void dispatch_set_policy(struct dispatcher *d, const struct policy_config *policy);
void dispatch_set_env(struct dispatcher *d, const struct tool_env *env);
void dispatch_set_audit(struct dispatcher *d, struct audit *audit);
/* The pre_call and post_call hooks (lib/hooks/hooks.h); the config stays the caller's. */
void dispatch_set_hooks(struct dispatcher *d, const struct hooks_config *c);
/* Swaps the registry in (taking a reference); calls in flight keep theirs. */
void dispatch_set_registry(struct dispatcher *d, struct registry *r);
/* Keeps idempotency records (and tasks) in the store sc names instead of
 * this daemon's memory; at start, before any call. 0 or the store's error. */
int dispatch_open_store(struct dispatcher *d, const struct store_config *sc);
struct store *dispatch_store(const struct dispatcher *d);

/*
 * Dispatches one call for session s. Returns the caller, or NULL when the
 * call was answered at once (ops->complete has already run).
 */
struct caller *dispatch_call(struct dispatcher *d, struct session *s, const struct call_params *p,
			     const struct caller_ops *ops, void *ctx);
/* Cancels one caller: respond true answers it with "cancelled", false
 * drops it without an answer (notifications/cancelled). The execution is
 * cancelled when no caller is left. */
void dispatch_cancel(struct caller *c, bool respond);
/* The caller's connection went away: a keyed execution runs on for the
 * cache; an unkeyed one is cancelled. No answer is given. */
void dispatch_detach(struct caller *c);
/* Holds queued calls back while several are cancelled or detached (the
 * slots a cancelled call frees must not start calls about to be cancelled
 * too); release starts what may run. Pairs nest. */
void dispatch_hold(struct dispatcher *d);
void dispatch_release(struct dispatcher *d);
/* Cancels (with answers) every call of the session; returns how many. */
unsigned dispatch_cancel_session(struct dispatcher *d, struct session *s);
/* A new call id (owned), for a call failed before it reached the
 * dispatcher (its MCP server is down, its task has no room): every failed
 * call's error names one. */
char *dispatch_new_call_id(struct dispatcher *d);
/* Cancels everything (shutdown). */
void dispatch_cancel_all(struct dispatcher *d, const char *why);
/* The daemon stops (a restart): every call still in flight ends
 * `cancelled` with why and `data.restart: true`, for its caller to send
 * again to the next daemon. A keyed one's key is released (it may run
 * again), unless its tool is not idempotent and it had started: then the
 * key keeps `execution_error` with `data.outcome: "unknown"`, never a
 * second run. Calls made after it end so at once, without running. why
 * must outlive the dispatcher. */
void dispatch_stop_all(struct dispatcher *d, const char *why);
/* Callers waiting for outcomes. */
unsigned dispatch_inflight(const struct dispatcher *d);
/* Callers of uid waiting for an outcome. */
unsigned dispatch_inflight_of(const struct dispatcher *d, uid_t uid);
/* Attempts that were stopped (timeout, cancel) whose tool has not yet
 * finished them: a child still being killed. */
unsigned dispatch_abandoned(const struct dispatcher *d);

/* True when the session may call the tool (not denied by policy). */
bool dispatch_tool_visible(const struct dispatcher *d, const struct session *s, const struct tool *t);

/* Writes admin/stats members (inside an open object). */
void dispatch_write_stats(struct dispatcher *d, struct jgen *g);
/* Writes the admin/stats members that count uid's own calls alone (a peer
 * that is neither root nor the daemon's user sees no other uid's). */
void dispatch_write_stats_of(struct dispatcher *d, uid_t uid, struct jgen *g);
/* Writes the dispatcher's admin/metrics families (dispatch_metrics.c):
 * the numbers admin/stats gathers: calls and errors by kind per tool, a
 * latency histogram per tool, calls in flight, running and queued, the
 * idempotency cache, events, the audit log, circuits. */
void dispatch_write_metrics(struct dispatcher *d, struct buf *b);

/* --- confirm.c -------------------------------------------------------------
 * Confirmation: a call whose policy says "prompt" waits for an approver
 * (a subscriber to tool.confirmation_requested of the same uid) to allow or
 * deny it. The request shows the whole input and the files the call names
 * as they resolve ("NOTES.md -> .git/config"). Requests are answered once
 * (first write wins), time out, fail when no approver is left, are
 * cancelled with their call (each end is told by
 * tool.confirmation_resolved), and are shown again to an approver that
 * comes late. Resolved requests are kept a while so a second answer
 * learns the first.
 */
/*
 * Answers confirmation request id for uid: decision "allow", "deny" or
 * "always_allow". First write wins: *ret_accepted is false when it was
 * already decided, and *ret_decision is the decision in force. -ENOENT for
 * an unknown request (or another uid's), -EINVAL for a bad decision.
 */
int dispatch_resolve(struct dispatcher *d, uid_t uid, const char *request_id, const char *decision,
		     bool *ret_accepted, const char **ret_decision);

enum confirm_choice { ANSWER_ALLOW, ANSWER_DENY, ANSWER_ALWAYS_ALLOW };
/*
 * The rule every answer to a question follows, here and for the questions
 * of others (struct dispatch_other's resolve): decision must be "allow",
 * "deny" or "always_allow" (-EINVAL otherwise); the first answer wins, so
 * with decided (the question's decision, NULL while open) set,
 * *ret_accepted is false and *ret_decision that decision (returns 1);
 * else *ret_decision is the answer's own static name, *ret_accepted true
 * and *ret_which the answer (returns 0): the caller then settles the
 * question with it.
 */
int confirm_answer(const char *decided, const char *decision, bool *ret_accepted, const char **ret_decision,
		   enum confirm_choice *ret_which);

/* An approver went away: confirmation requests that no approver can see
 * any more fail with user_denied, as a call finding none does (unless
 * confirmation.no_approver is "wait"). */
void dispatch_approvers_left(struct dispatcher *d);

/* The client asked to confirm request_id (MCP elicitation) will not
 * answer: when no approver can see it either, the call fails user_denied
 * saying the user gave no answer. */
void dispatch_elicit_failed(struct dispatcher *d, const char *request_id);

/* Sends a new subscriber the confirmation requests still open that it may
 * see, so an approver that arrives late can answer them. */
void dispatch_replay_confirmations(struct dispatcher *d, struct subscriber *sub);

/*
 * Counts what open requests hold (the whole input, the files, the diff)
 * against their uid: charge(arg, uid, delta) is called with the bytes when
 * a request is made (a negative errno refuses it: the call fails
 * overloaded) and with their negation when it is resolved, cancelled,
 * timed out or forgotten. NULL: nothing is counted.
 */
typedef int (*confirm_charge_fn)(void *arg, uid_t uid, int64_t delta);
void dispatch_set_confirm_charge(struct dispatcher *d, confirm_charge_fn charge, void *arg);

/*
 * Confirmation requests that are not a call's own (a network.connect of a
 * call's sandboxed child, daemon/egress_ask.c), kept by whoever makes them:
 * confirmations/resolve and elicitation answers whose id the dispatcher
 * does not know go to resolve; a new subscriber's replay, approvers
 * leaving and a failed elicitation reach them too.
 */
struct confirm_other_ops {
	int (*resolve)(void *arg, uid_t uid, const char *request_id, const char *decision, bool *ret_accepted,
		       const char **ret_decision);
	void (*replay)(void *arg, struct subscriber *sub);
	void (*approvers_left)(void *arg);
	void (*elicit_failed)(void *arg, const char *request_id);
};
void dispatch_set_confirm_other(struct dispatcher *d, const struct confirm_other_ops *ops, void *arg);
/* Asks the clients waiting for call call_id (MCP elicitation) question q,
 * which is not the call's own; true when one was asked. NULL q: whether
 * one could be. */
bool dispatch_ask_call(struct dispatcher *d, const char *call_id, const struct confirm_question *q);
/* Takes question request_id down from the clients of call call_id. */
void dispatch_withdraw_call(struct dispatcher *d, const char *call_id, const char *request_id);

#endif
