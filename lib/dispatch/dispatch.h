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
 * Outcomes (lib/dispatch/outcome.h) and confirmation (lib/dispatch/confirm.h) have headers of
 * their own, included here so that the daemon needs only this one.
 */
#ifndef TC_DISPATCH_H
#define TC_DISPATCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "lib/dispatch/confirm.h"
#include "lib/errors.h"
#include "lib/dispatch/outcome.h"
#include "lib/tool.h"

struct audit;
struct event_bus;
struct hooks_config;
struct jgen;
struct json;
struct json_doc;
struct policy_config;
struct registry;
struct store;
struct store_config;
struct session;
struct tc_loop;

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
/* The pre_call and post_call hooks (lib/dispatch/hooks.h); the config stays the caller's. */
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
/* Cancels everything (shutdown). */
void dispatch_cancel_all(struct dispatcher *d, const char *why);
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

#endif
