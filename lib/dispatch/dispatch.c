/* SPDX-License-Identifier: MIT */
/*
 * The dispatch engine. One call goes: find the tool, parse and validate the
 * arguments, check paths against the workspace, look up the idempotency key
 * (join an execution in flight, replay a kept outcome, or refuse a
 * conflicting reuse), check the circuit and the budget, apply the
 * confirmation policy, wait for a concurrency slot, then run attempts under
 * a timeout with retries and backoff until an outcome, which goes to every
 * caller of the execution, the idempotency cache, the circuit, the stats,
 * the event stream and the audit log.
 *
 * This file holds callers, executions, attempts and cancellation;
 * admission (and which tools a session may see) lives in admit.c, the
 * queues and slots in dispatch_fair.c, outcomes in outcome.c, the
 * idempotency cache in idem.c, the circuit breaker in circuit.c and
 * confirmation in confirm.c.
 * Long because an execution's life, from admission to answer, reads best whole.
 *
 * Ownership: an exec is owned by the engine from creation to exec_finish();
 * callers are owned by the engine and handed to the daemon as handles until
 * they complete or are cancelled; an attempt is freed when both the tool has
 * finished and the engine is done with it (a timed-out attempt is
 * "abandoned": its exec pointer is cleared and the tool frees it on finish).
 */
#include "lib/dispatch/dispatch.h"

#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "lib/dispatch/dispatch_internal.h"
#include "lib/base/audit.h"
#include "lib/events.h"
#include "lib/hooks/hooks.h"
#include "lib/base/map.h"
#include "lib/policy/policy.h"
#include "lib/registry.h"
#include "lib/session.h"
#include "lib/store/store.h"
#include "lib/files/workspace.h"
#include "proto/json.h"

struct attempt {
	struct tool_call tc;
	struct exec *exec;		/* NULL: abandoned */
	struct dispatcher *d;
	unsigned number;		/* 1, 2, ...: the execution's attempts when it started */
	bool told;			/* its tool.called / dispatch.attempt emitted */
	bool *ended;			/* set when it ends, for exec_run after exec */
};

struct caller {
	struct list node;		/* exec->waiters */
	struct list session_node;	/* session->callers */
	struct list all_node;		/* d->callers */
	struct dispatcher *d;
	struct exec *exec;
	struct session *session;
	const struct caller_ops *ops;
	void *ctx;
	char *token;
	size_t token_len;
	uint64_t progress;
	pid_t pid;
	uint64_t accepted_ms;		/* durations count from here */
	/* Its memory's holders: the call until it is answered, and code up
	 * the stack that must learn, after a step that may answer it
	 * synchronously, whether it was (caller_hold). */
	unsigned refs;
	bool answered;
};

void dispatch_config_defaults(struct dispatch_config *c)
{
	*c = (struct dispatch_config){
		.max_concurrent = 64,
		.session_concurrency = 4,
		.queue_max = 256,
		.queue_max_total = 8192,
		.per_uid_queue = 4096,
		.session_confirmations = 64,
		.max_attempts = 3,
		.base_delay_ms = 100,
		.max_delay_ms = 10000,
		.idem_ttl_ms = 60000,
		.idem_max_entries = 10000,
		.idem_max_bytes = UINT64_C(256) << 20,
		.circuit_failures = 5,
		.circuit_window_ms = 30000,
		.circuit_open_ms = 30000,
		.max_json_depth = 64,
	};
}

/* --- small helpers ----------------------------------------------------- */

static char *new_call_id(struct dispatcher *d)
{
	/* "c-" + 8 hex digits of this run + "-" + 16 of the hidden count
	 * (every uid's calls share the count), written by hand: every call
	 * takes one, and printf showed in the profile of small calls. */
	char id[16 + 1 + 16], *end = id + sizeof(id);
	char *p = fmt_hex64(end, id_hide(++d->counter, d->id_key));
	*--p = '-';
	p = fmt_hex64(p, d->boot) + 6;	/* "c-" and its last 8 digits */
	p[0] = 'c';
	p[1] = '-';
	return xstrndup(p, (size_t)(end - p));
}

char *dispatch_new_call_id(struct dispatcher *d)
{
	return new_call_id(d);
}

static uint64_t elapsed_us(const struct timespec *start)
{
	struct timespec now;
	clock_gettime(CLOCK_MONOTONIC, &now);
	int64_t us = (int64_t)(now.tv_sec - start->tv_sec) * 1000000 +
		     (now.tv_nsec - start->tv_nsec) / 1000;
	return us > 0 ? (uint64_t)us : 0;
}

struct kind_arg {
	const char *kind;
	const char *message;
};

static void extra_kind(struct jgen *g, void *arg)
{
	struct kind_arg *k = arg;
	jgen_kv_str(g, "kind", k->kind);
	if (k->message)
		jgen_kv_str(g, "message", k->message);
}

/* Records the audit line of a call answered to caller c. */
static void write_audit(struct dispatcher *d, const struct caller *c, const struct outcome *o, bool replayed)
{
	const struct audit_call ac = {
		.session = c->session, .pid = c->pid, .o = o, .replayed = replayed,
		.tool = c->exec ? c->exec->tool : NULL, .args = c->exec ? c->exec->args : NULL,
		.sandbox = d->env ? d->env->sandbox : NULL,
	};
	audit_call(d->audit, &ac);
}

/* --- callers ----------------------------------------------------------- */

static struct caller *caller_new(struct dispatcher *d, struct session *s, const struct call_params *p,
				 const struct caller_ops *ops, void *ctx)
{
	struct caller *c = xcalloc(1, sizeof(*c));
	c->d = d;
	c->session = session_ref(s);
	c->ops = ops;
	c->ctx = ctx;
	c->pid = p->pid;
	c->accepted_ms = p->accepted_ms ? p->accepted_ms : tc_now(d->loop);
	if (p->progress_token) {
		c->token = xstrndup(p->progress_token, p->progress_token_len);
		c->token_len = p->progress_token_len;
	}
	list_init(&c->node);
	list_init(&c->session_node);
	list_insert_tail(&d->callers, &c->all_node);
	list_insert_tail(&s->callers, &c->session_node);
	d->n_callers++;
	c->refs = 1;
	return c;
}

static void caller_hold(struct caller *c)
{
	c->refs++;
}

static void caller_release(struct caller *c)
{
	if (--c->refs == 0)
		free(c);
}

/* Ends a caller: it leaves every list; its memory goes with its last
 * holder. */
static void caller_free(struct caller *c)
{
	list_remove(&c->node);
	list_remove(&c->session_node);
	list_remove(&c->all_node);
	c->d->n_callers--;
	c->answered = true;
	session_unref(TAKE_PTR(c->session));
	free(TAKE_PTR(c->token));
	caller_release(c);
}

/* Answers a caller and frees it, with no audit line (its execution will
 * have one). */
static void caller_answer(struct caller *c, struct outcome *o, bool replayed)
{
	const struct caller_ops *ops = c->ops;
	void *ctx = c->ctx;
	caller_free(c);
	ops->complete(ctx, o, replayed);
}

/* Answers a caller and frees it; the call is audited. */
static void caller_complete(struct caller *c, struct outcome *o, bool replayed)
{
	write_audit(c->d, c, o, replayed);
	caller_answer(c, o, replayed);
}

/* Answers a call that never became an execution, and records it.
 * Returns NULL: no caller is left to hand back. */
static struct caller *fail_now(struct dispatcher *d, struct caller *c, const char *tool_name,
			       const struct tool *t, struct outcome *o)
{
	o->call_id = new_call_id(d);
	o->tool = xstrdup(tool_name);
	o->duration_ms = tc_now(d->loop) - c->accepted_ms;
	if (t) {
		o->side_effects = t->side_effects;
		o->idempotent = t->idempotent;
	}
	stats_record(&d->stats, tool_name, o->kind, 0);
	stats_record(&fair_uid(d, c->session->uid)->stats, tool_name, o->kind, 0);
	struct kind_arg k = { tc_kind_name(o->kind), o->message };
	event_emit(d->bus, "tool.failed", c->session, o->call_id, tool_name, extra_kind, &k);
	caller_complete(c, o, false);
	outcome_unref(o);
	return NULL;
}

/* --- executions -------------------------------------------------------- */

/* Frees an execution that is done. */
static void exec_free(struct exec *e)
{
	store_wait_cancel(e->claim_wait);
	if (e->claim)
		store_release(e->claim);
	list_remove(&e->node);
	tc_timer_free(e->timer);
	e->hook = hook_run_cancel(e->hook);
	confirm_forget(e);
	outcome_unref(e->last);
	tool_unref(e->tool);
	session_unref(e->session);
	json_doc_unref(e->doc);
	free(e->key);
	free(e->canon);
	free(e->call_id);
	free(e);
}

struct completed_arg {
	const struct outcome *o;
};

static void extra_completed(struct jgen *g, void *arg)
{
	const struct outcome *o = ((struct completed_arg *)arg)->o;
	jgen_kv_int(g, "attempts", o->attempts);
	jgen_kv_int(g, "durationMs", (int64_t)o->duration_ms);
	jgen_kv_bool(g, "isError", o->is_error);
}

static void extra_failed(struct jgen *g, void *arg)
{
	const struct outcome *o = ((struct completed_arg *)arg)->o;
	jgen_kv_str(g, "kind", tc_kind_name(o->kind));
	jgen_kv_str(g, "message", o->message);
	jgen_kv_int(g, "attempts", o->attempts);
	jgen_kv_int(g, "durationMs", (int64_t)o->duration_ms);
}

/* The call as hooks see it; roots holds the session's workspaces. */
static void hook_input_of(const struct exec *e, struct hook_input *in, const char *roots[WS_GROUP_MAX + 1])
{
	roots[0] = NULL;
	if (e->session->ws)
		ws_group_roots(e->session->ws, roots, WS_GROUP_MAX + 1);
	*in = (struct hook_input){
		.tool = e->tool->name, .arguments = e->args, .session_id = e->session->id,
		.uid = e->session->uid, .pid = e->pid,
		.workspaces = roots[0] ? roots : NULL,
		.side_effects = side_effect_name(e->tool->side_effects), .call_id = e->call_id,
		.peer = session_identity(e->session),
	};
}

/* Tells the post-call hooks how the execution ended. */
static void run_post_hooks(struct exec *e, const struct outcome *o)
{
	struct hook_input in;
	const char *roots[WS_GROUP_MAX + 1];
	hook_input_of(e, &in, roots);
	struct hook_outcome ho = {
		.kind = tc_kind_name(o->kind), .is_error = o->is_error, .duration_ms = o->duration_ms,
		.attempts = o->attempts, .text = o->text, .message = o->kind != TC_OK ? o->message : NULL,
	};
	hooks_post_start(e->d->hooks, &in, &ho);
}

static void extra_hook_failed(struct jgen *g, void *arg)
{
	jgen_kv_str(g, "message", arg);
}

/* A post-call hook failed: its failure changes nothing but is told. */
static void on_post_hook_failed(void *arg, const char *tool, const char *message)
{
	struct dispatcher *d = arg;
	event_emit(d->bus, "hook.failed", NULL, NULL, tool, extra_hook_failed, (void *)message);
}

static bool exec_ask_callers(struct exec *e, const struct confirm_question *q)
{
	for (struct list *pos = e->waiters.next; pos != &e->waiters; pos = pos->next) {
		struct caller *c = list_entry(pos, struct caller, node);
		if (c->ops->ask && c->ops->ask(c->ctx, q))
			return true;
	}
	return false;
}

static void exec_withdraw_callers(struct exec *e, const char *request_id)
{
	for (struct list *pos = e->waiters.next; pos != &e->waiters; pos = pos->next) {
		struct caller *c = list_entry(pos, struct caller, node);
		if (c->ops->withdraw)
			c->ops->withdraw(c->ctx, request_id);
	}
}

/* A non-idempotent keyed call the daemon's stop ended while it ran may
 * have taken effect: the key keeps "outcome unknown" (as when its daemon
 * dies), so that no retry runs it a second time. */
static void keep_stopped(struct exec *e, struct store_claim *claim, const struct outcome *o)
{
	_cleanup_(outcome_unrefp) struct outcome *u = outcome_error(TC_EXECUTION_ERROR,
		"The call with idempotency key '%s' was stopped with its toolcalld (a restart) before it ended: "
		"whether it took effect is unknown. Check its effects, then retry with a new key",
		idem_client_key(e->key));
	u->error_data = xstrdup("{\"outcome\":\"unknown\"}");
	u->call_id = xstrdup(o->call_id);
	u->tool = xstrdup(o->tool);
	u->attempts = o->attempts;
	u->duration_ms = o->duration_ms;
	u->side_effects = o->side_effects;
	store_complete(claim, u);
}

static void exec_run(struct exec *e);
static void dispatch_arm_sweep(struct dispatcher *d);

/* Runs queued executions while slots are free, in the turn
 * dispatch_fair.c gives them. One pump at a time (and none while the
 * dispatcher is held): an execution that ends inside exec_run frees its
 * slot to the pump already running. */
static void pump(struct dispatcher *d)
{
	if (d->pumping)
		return;
	d->pumping++;
	struct exec *e;
	while ((e = fair_next(d)))
		exec_run(e);
	d->pumping--;
}

static void exec_finish(struct exec *e, struct outcome *o)
{
	struct dispatcher *d = e->d;
	e->state = EX_DONE;
	tc_timer_stop(e->timer);
	fair_leave(e);
	fair_release(e);

	o->attempts = e->attempts;
	o->duration_ms = tc_now(d->loop) - e->start_ms;
	free(o->call_id);
	o->call_id = xstrdup(e->call_id);
	free(o->tool);
	o->tool = xstrdup(e->tool->name);
	o->side_effects = e->tool->side_effects;
	o->idempotent = e->tool->idempotent;

	if (e->attempts > 0 || e->probe) {
		circuit_record(e->circuit, &d->cfg, d->bus, e->session, e->tool, e->probe, o->kind,
			       tc_now(d->loop));
		e->probe = false;
	}
	uint64_t took = elapsed_us(&e->start_ts);
	stats_record(&d->stats, e->tool->name, o->kind, took);
	stats_record(&e->us->stats, e->tool->name, o->kind, took);
	struct completed_arg ca = { o };
	if (o->kind == TC_OK)
		event_emit(d->bus, "tool.completed", e->session, e->call_id, e->tool->name, extra_completed, &ca);
	else
		event_emit(d->bus, "tool.failed", e->session, e->call_id, e->tool->name, extra_failed, &ca);
	run_post_hooks(e, o);
	if (e->key) {
		idem_end(&d->idem, e->key, e);
		/* Kept and handed to joiners elsewhere, unless it never ran
		 * (refused before its claim counted) or was cancelled. */
		struct store_claim *claim = TAKE_PTR(e->claim);
		if (claim && e->stopped && e->attempts > 0 && !e->tool->idempotent)
			keep_stopped(e, claim, o);
		else if (claim && (e->unkept || o->kind == TC_CANCELLED))
			store_release(claim);
		else if (claim)
			store_complete(claim, o);
		dispatch_arm_sweep(d);
	}

	/* Nobody waits (a disconnect, a cancel, shutdown, a keyed call left
	 * to run): the call still gets its audit line. */
	if (list_empty(&e->waiters)) {
		const struct audit_call ac = { .session = e->session, .pid = e->pid, .o = o,
					       .tool = e->tool, .args = e->args,
					       .sandbox = d->env ? d->env->sandbox : NULL };
		audit_call(d->audit, &ac);
	}
	while (!list_empty(&e->waiters)) {
		struct caller *c = list_first(&e->waiters, struct caller, node);
		caller_complete(c, o, false);
	}
	outcome_unref(o);
	exec_free(e);
	pump(d);
}

static void exec_enqueue(struct exec *e)
{
	struct dispatcher *d = e->d;
	/* Only a call that has to wait counts against the queues: the pump
	 * runs whenever a slot frees, so a call that can run now starts at
	 * once (with queue_max 0, calls run or are refused, never wait). */
	if (!fair_can_run(d, e)) {
		if (e->session->waiting >= d->cfg.queue_max) {
			exec_finish(e, outcome_error(TC_OVERLOADED,
				"Too many calls are queued for this session (limit %u); "
				"wait for some to finish, then retry", d->cfg.queue_max));
			return;
		}
		/* Per uid: one user's flood fills its own share, never the
		 * queue another user needs. */
		if (e->us->waiting >= d->cfg.per_uid_queue) {
			exec_finish(e, outcome_error(TC_OVERLOADED,
				"Too many calls are queued for this user (limit %u, all sessions); "
				"wait for some to finish, then retry", d->cfg.per_uid_queue));
			return;
		}
		/* And daemon-wide: what waits holds memory (its arguments). */
		if (d->waiting >= d->cfg.queue_max_total) {
			exec_finish(e, outcome_error(TC_OVERLOADED,
				"Too many calls are queued in toolcalld (limit %u, all sessions); "
				"wait for some to finish, then retry", d->cfg.queue_max_total));
			return;
		}
	}
	fair_queue(e, false);
	pump(d);
}

/* --- attempts ---------------------------------------------------------- */

struct retry_arg {
	unsigned attempt;
	uint64_t delay;
	const char *kind;
};

static void extra_retry(struct jgen *g, void *arg)
{
	struct retry_arg *r = arg;
	jgen_kv_int(g, "attempt", r->attempt);
	if (r->delay)
		jgen_kv_int(g, "delayMs", (int64_t)r->delay);
	if (r->kind)
		jgen_kv_str(g, "kind", r->kind);
}

static void extra_called(struct jgen *g, void *arg)
{
	struct exec *e = arg;
	jgen_kv_str(g, "sideEffect", side_effect_name(e->tool->side_effects));
	jgen_kv_bool(g, "idempotent", e->tool->idempotent);
	jgen_kv_int(g, "timeoutMs", (int64_t)e->timeout_ms);
}

static void on_backoff(void *arg);

static void exec_set_timer(struct exec *e, tc_timer_cb cb, uint64_t after_ms)
{
	e->timer = tc_timer_free(e->timer);
	e->timer = tc_timer_new(e->d->loop, cb, e);
	tc_timer_start(e->timer, after_ms);
}

/* The delay before the attempt after attempts: 100 ms before attempt 2,
 * 400 ms before attempt 3, ... each × (1 + U[0, 0.5]), never more than
 * max_delay_ms (with up to 100 attempts, base × 4 per attempt would wait
 * for hours, then overflow). */
static uint64_t backoff_delay(struct dispatcher *d, unsigned attempts)
{
	uint64_t cap = d->cfg.max_delay_ms;
	uint64_t base = MIN(d->cfg.base_delay_ms, cap);
	for (unsigned i = 1; i < attempts && base < cap; i++)
		base = base > cap / 4 ? cap : base * 4;
	uint64_t jitter = (uint64_t)((double)base * 0.5 * ((double)tc_random(d->loop) / 4294967295.0));
	return MIN(base + jitter, cap);
}

/*
 * Tells subscribers that an attempt started (tool.called for the first,
 * dispatch.attempt for each), once it is known to have reached its tool:
 * when it ended with an outcome that counts as an attempt, said it acts
 * (tool_call_acts), produced output, gave its slot back to wait, was
 * stopped (a timeout, a cancel), or was left running by a tool that
 * refuses nothing after it returned.
 * A try refused before the tool acted (its arguments, a path outside the
 * workspace: attempts 0 in the answer and in admin/stats) is not told.
 */
static void attempt_tell(struct attempt *a)
{
	struct exec *e = a->exec;
	if (a->told || !e)
		return;
	a->told = true;
	if (a->number == 1)
		event_emit(e->d->bus, "tool.called", e->session, e->call_id, e->tool->name, extra_called, e);
	struct retry_arg ra = { a->number, 0, NULL };
	event_emit(e->d->bus, "dispatch.attempt", e->session, e->call_id, e->tool->name, extra_retry, &ra);
}

/* Decides between a retry and the end, after an attempt ended with o. */
static void attempt_result(struct exec *e, struct outcome *o)
{
	struct dispatcher *d = e->d;
	bool retry = e->attempts < e->max_attempts &&
		     (o->kind == TC_TRANSIENT || (o->kind == TC_TIMEOUT && e->tool->idempotent));
	if (!retry) {
		exec_finish(e, o);
		return;
	}
	uint64_t delay = backoff_delay(d, e->attempts);
	outcome_unref(e->last);
	e->last = o;
	e->state = EX_BACKOFF;
	d->stats.retries++;
	e->us->stats.retries++;
	struct retry_arg ra = { e->attempts + 1, delay, tc_kind_name(o->kind) };
	event_emit(d->bus, "dispatch.retry", e->session, e->call_id, e->tool->name, extra_retry, &ra);
	exec_set_timer(e, on_backoff, delay);
	/* Waiting holds no slot: another call may use it meanwhile. */
	fair_release(e);
	pump(d);
}

/* The tool is done with an attempt (or, abandoned, just done). */
static void attempt_end(struct attempt *a)
{
	struct exec *e = a->exec;
	if (a->ended)
		*a->ended = true;
	if (!e) {
		a->d->abandoned--;
		ws_unref(a->tc.ws);
		tool_call_clear(&a->tc);
		free(a);
		return;
	}
	e->attempt = NULL;
	tc_timer_stop(e->timer);
	bool refused = a->tc.refused && a->tc.kind != TC_OK;
	struct outcome *o = outcome_from_call(&a->tc);
	if (!(o->kind == TC_VALIDATION_ERROR || refused))
		attempt_tell(a);
	else if (e->attempts > 0) {
		/* The tool refused its arguments (a command's value that
		 * would be an option, an unknown signal, a process that reads
		 * no more input, a path outside the workspace): nothing ran,
		 * as when the schema refuses them, so the attempt is not
		 * counted nor spent, in the answer as in admin/stats. */
		e->attempts--;
		e->d->stats.attempts--;
		e->us->stats.attempts--;
		if (e->session->has_budget)
			e->session->budget_left++;
		if (e->budget >= 0)
			e->budget++;
	}
	ws_unref(a->tc.ws);
	tool_call_clear(&a->tc);
	free(a);
	attempt_result(e, o);
}

static void on_tool_finish(struct tool_call *tc)
{
	attempt_end(tc->owner);
}

/* The tool waits without work (timers, a process's output): the slot goes
 * to the next call. The attempt still counts as in flight. */
/* The tool acts (lib/tool.h): the attempt is told before what it does. */
static void on_tool_acts(struct tool_call *tc)
{
	attempt_tell(tc->owner);
}

static void on_tool_release_slot(struct tool_call *tc)
{
	struct attempt *a = tc->owner;
	if (!a->exec)
		return;
	attempt_tell(a);
	fair_release(a->exec);
	pump(a->d);
}

struct delta_arg {
	const char *stream;
	const char *data;
	size_t n;
};

static void extra_delta(struct jgen *g, void *arg)
{
	struct delta_arg *x = arg;
	jgen_kv_str(g, "stream", x->stream);
	jgen_key(g, "data");
	jgen_strn(g, x->data, x->n);
}

static void on_tool_output(struct tool_call *tc, const char *stream, const char *data, size_t n)
{
	struct attempt *a = tc->owner;
	struct exec *e = a->exec;
	if (!e)
		return;
	attempt_tell(a);
	struct list *pos, *tmp;
	list_foreach_safe(pos, tmp, &e->waiters) {
		struct caller *c = list_entry(pos, struct caller, node);
		if (!c->token || !c->ops->progress)
			continue;
		c->progress += n;
		c->ops->progress(c->ctx, c->token, c->token_len, c->progress, stream, data, n);
	}
	struct delta_arg x = { stream, data, n };
	event_emit(e->d->bus, "tool.output_delta", e->session, e->call_id, e->tool->name, extra_delta, &x);
}

/* Stops the attempt in progress: the tool finishes it on its own time. */
static void abandon_attempt(struct exec *e)
{
	struct attempt *a = e->attempt;
	if (!a)
		return;
	/* Stopped while it ran: it counts as an attempt. */
	attempt_tell(a);
	e->attempt = NULL;
	a->exec = NULL;
	e->d->abandoned++;
	if (e->tool->def->cancel)
		e->tool->def->cancel(&a->tc);
}

/* The command the attempt in progress ran, for the audit log of an
 * outcome that does not come from the tool (timeout, cancel). */
static char *attempt_command(const struct exec *e)
{
	return e->attempt && e->attempt->tc.command ? xstrdup(e->attempt->tc.command) : NULL;
}

/* The output the attempt in progress has produced so far, or NULL. */
static char *attempt_partial(const struct exec *e)
{
	if (!e->attempt || !e->tool->def->partial)
		return NULL;
	return e->tool->def->partial(&e->attempt->tc);
}

/* Keeps the output a stopped attempt had produced in its error: in the
 * message the model reads and as data.output. Takes output. */
static void outcome_keep_partial(struct outcome *o, char *output)
{
	if (!output)
		return;
	struct buf b = {0};
	buf_printf(&b, "%s. Output before it was stopped:\n%s", o->message, output);
	free(o->message);
	o->message = buf_steal(&b);
	struct jgen *g = jgen_new(&b);
	jgen_obj_open(g);
	jgen_kv_str(g, "output", output);
	/* What data said already (restart: the daemon's stop) stays. */
	_cleanup_(json_doc_unrefp) struct json_doc *doc = NULL;
	if (o->error_data && json_parse(o->error_data, strlen(o->error_data), 0, 0, &doc, NULL) == 0) {
		const struct json *was = json_doc_root(doc);
		for (size_t i = 0; was->type == JSON_OBJECT && i < was->u.obj.n; i++) {
			if (str_eq(was->u.obj.members[i].key, "output"))
				continue;
			jgen_key(g, was->u.obj.members[i].key);
			jgen_value(g, was->u.obj.members[i].value);
		}
	}
	jgen_obj_close(g);
	jgen_free(g);
	free(o->error_data);
	o->error_data = buf_steal(&b);
	free(output);
}

/* Ends the attempt that ran past its time limit. */
static void on_attempt_timeout(void *arg)
{
	struct exec *e = arg;
	char *command = attempt_command(e);
	char *output = attempt_partial(e);
	abandon_attempt(e);
	struct outcome *o = outcome_error(TC_TIMEOUT, "Tool '%s' exceeded its %llu ms limit",
					  e->tool->name, (unsigned long long)e->timeout_ms);
	outcome_keep_partial(o, output);
	o->idempotent = e->tool->idempotent;
	o->command = command;
	attempt_result(e, o);
}

/* The backoff is over: the next attempt waits for a slot in its turn, at
 * the head of its session's line (it was admitted before the calls behind
 * it). No queue bound refuses it: it has its place already. */
static void on_backoff(void *arg)
{
	struct exec *e = arg;
	fair_queue(e, true);
	pump(e->d);
}

/* Runs the next attempt, when the budgets allow one. */
static void exec_run(struct exec *e)
{
	struct dispatcher *d = e->d;
	struct session *s = e->session;

	/* Every attempt spends one tool call of each budget in force. */
	if ((s->has_budget && s->budget_left <= 0) || e->budget == 0) {
		if (e->last) {
			exec_finish(e, TAKE_PTR(e->last));
		} else {
			exec_finish(e, outcome_error(TC_BUDGET_EXCEEDED,
						     "No tool calls are left in the budget; the call was not run"));
		}
		return;
	}
	if (s->has_budget)
		s->budget_left--;
	if (e->budget > 0)
		e->budget--;
	outcome_unref(TAKE_PTR(e->last));

	e->attempts++;
	d->stats.attempts++;
	e->us->stats.attempts++;
	e->state = EX_RUNNING;

	struct attempt *a = xcalloc(1, sizeof(*a));
	a->exec = e;
	a->d = d;
	a->number = e->attempts;
	a->tc.tool = e->tool;
	a->tc.args = e->args;
	a->tc.ws = ws_ref(s->ws);	/* the session may be given new roots meanwhile */
	a->tc.loop = d->loop;
	a->tc.env = d->env;
	a->tc.call_id = e->call_id;
	a->tc.ident = session_identity(s);
	a->tc.session = s;
	a->tc.on_finish = on_tool_finish;
	a->tc.on_output = on_tool_output;
	a->tc.release_slot = on_tool_release_slot;
	a->tc.acts = on_tool_acts;
	a->tc.owner = a;
	e->attempt = a;

	exec_set_timer(e, on_attempt_timeout, e->timeout_ms);

	/* After exec returns, a may be gone (the tool finished inside). */
	bool ended = false;
	a->ended = &ended;
	enum tool_ret r = e->tool->def->exec(&a->tc);
	if (ended)
		return;
	a->ended = NULL;
	if (r == TOOL_DONE) {
		a->tc.done = true;
		attempt_end(a);
	} else if (!a->tc.may_refuse) {
		/* Running, and it refuses nothing from here on. */
		attempt_tell(a);
	}
}

/* Forgets resolved confirmations and expired outcomes. */
static void on_sweep(void *arg)
{
	struct dispatcher *d = arg;
	uint64_t now = tc_now(d->loop);
	d->sweep_due = 0;
	store_sweep(d->idem.store);
	confirm_sweep(d, now);
	dispatch_arm_sweep(d);
}

/* An idle daemon is not woken: the timer is armed for the first thing
 * that expires, and not at all when nothing will. */
static void dispatch_arm_sweep(struct dispatcher *d)
{
	uint64_t next = store_next_expiry(d->idem.store);
	uint64_t confirm_next = confirm_next_expiry(d);
	if (!next || (confirm_next && confirm_next < next))
		next = confirm_next;
	if (!next) {
		if (d->sweep_due)
			tc_timer_stop(d->sweep);
		d->sweep_due = 0;
		return;
	}
	if (d->sweep_due && d->sweep_due <= next)
		return;
	uint64_t now = tc_now(d->loop);
	d->sweep_due = next;
	tc_timer_start(d->sweep, next > now ? next - now : 0);
}

/* --- calls ------------------------------------------------------------- */

static struct outcome *conflict(const char *client_key, bool same_tool)
{
	return outcome_error(TC_IDEMPOTENCY_CONFLICT,
		"Idempotency key '%s' was already used with %s; use a new key for a different call",
		client_key, same_tool ? "other arguments" : "another tool");
}

/* Answers a call whose key names an execution in flight here: a conflict,
 * or a join (the caller is handed back). */
static struct caller *answer_keyed(struct dispatcher *d, struct caller *c, const char *client_key,
				   const struct admission *a, struct idem_entry *ie)
{
	if (idem_conflicts(ie, a->t->name, a->canon))
		return fail_now(d, c, a->name, a->t, conflict(client_key, str_eq(ie->tool, a->t->name)));
	d->stats.idem_joins++;
	fair_uid(d, c->session->uid)->stats.idem_joins++;
	c->exec = ie->exec;
	list_insert_tail(&ie->exec->waiters, &c->node);
	return c;
}

/* The execution's time limit: the request's own timeout, else the
 * arguments' timeout_ms (tools that take one), else the tool's. Computed
 * again when a hook rewrites the arguments. */
static uint64_t exec_limit(const struct exec *e)
{
	if (e->call_timeout_ms > 0)
		return (uint64_t)e->call_timeout_ms;
	int64_t v;
	if (e->tool->def->timeout_arg && json_get_int(json_get(e->args, "timeout_ms"), &v) && v > 0)
		return (uint64_t)v;
	return e->tool->timeout_ms;
}

/* Makes the execution of an admitted call, with c its first caller. */
static struct exec *exec_new(struct dispatcher *d, struct session *s, const struct call_params *p,
			     struct caller *c, struct admission *a)
{
	struct tool *t = a->t;
	struct exec *e = xcalloc(1, sizeof(*e));
	e->d = d;
	e->tool = tool_ref(t);
	e->ts = a->ts;
	e->us = a->us;
	e->circuit = a->circuit;
	e->session = session_ref(s);
	e->doc = TAKE_PTR(a->doc);
	e->args = a->args;
	e->key = TAKE_PTR(a->key);
	e->canon = TAKE_PTR(a->canon);
	e->call_id = new_call_id(d);
	e->state = EX_NEW;
	e->probe = a->probe;
	list_init(&e->waiters);
	list_init(&e->queue_node);
	list_insert_tail(&d->execs, &e->node);
	e->max_attempts = t->max_attempts ? t->max_attempts : d->cfg.max_attempts;
	if (e->max_attempts == 0)
		e->max_attempts = 1;
	e->budget = p->budget;
	e->call_timeout_ms = p->timeout_ms;
	e->timeout_ms = exec_limit(e);
	e->start_ms = c->accepted_ms;
	e->pid = c->pid;
	clock_gettime(CLOCK_MONOTONIC, &e->start_ts);
	c->exec = e;
	list_insert_tail(&e->waiters, &c->node);
	if (e->key)
		idem_begin(&d->idem, e->key, t->name, e->canon, e);
	return e;
}

static void on_confirm_timeout(void *arg)
{
	struct exec *e = arg;
	exec_finish(e, confirm_timed_out(e));
}

/* Sends an execution to confirmation or to the queue, as e->mode says. */
static void exec_proceed(struct exec *e)
{
	if (e->mode != CONFIRM_PROMPT) {
		exec_enqueue(e);
		return;
	}
	struct outcome *o = confirm_ask(e);
	if (o)
		exec_finish(e, o);
	else
		exec_set_timer(e, on_confirm_timeout, confirm_timeout_ms(e->d));
}

/* An approver's answer (or departure) settled e's confirmation request:
 * it goes on to its slot, or ends with o. */
static void on_confirm_decided(struct exec *e, struct outcome *o)
{
	tc_timer_stop(e->timer);
	if (o)
		exec_finish(e, o);
	else
		exec_enqueue(e);
}

/* What confirm.c reports back to the engine. */
static const struct confirm_reports confirm_reports = {
	.ask_callers = exec_ask_callers,
	.withdraw_callers = exec_withdraw_callers,
	.decided = on_confirm_decided,
	.kept = dispatch_arm_sweep,
};

/* The pre-call hooks are done: a deny ends the execution; new arguments
 * are checked against the schema again and replace the old ones; allow
 * and prompt override the policy's confirmation mode. */
static void on_pre_hooks(void *arg, struct hook_verdict *v)
{
	struct exec *e = arg;
	e->hook = NULL;
	if (v->decision == HOOK_DENY) {
		exec_finish(e, outcome_error(TC_PERMISSION_DENIED, "%s", v->message));
		return;
	}
	if (v->args_doc) {
		struct admission a = { .name = e->tool->name, .t = e->tool, .args = v->args };
		struct outcome *o = admit_validate_arguments(&a);
		if (o) {
			char *m = xasprintf("%s (arguments as rewritten by %s)", o->message, v->rewrote);
			free(o->message);
			o->message = m;
			exec_finish(e, o);
			return;
		}
		/* The rewritten arguments replace the old ones whole: what
		 * they say of the limit (shell's timeout_ms) holds too. */
		json_doc_unref(e->doc);
		e->doc = TAKE_PTR(v->args_doc);
		e->args = v->args;
		e->timeout_ms = exec_limit(e);
	}
	if (v->decision == HOOK_ALLOW)
		e->mode = CONFIRM_AUTO;
	else if (v->decision == HOOK_PROMPT)
		e->mode = CONFIRM_PROMPT;
	exec_proceed(e);
}

/* Sends a new execution on its way: through the pre-call hooks, to
 * confirmation or to the queue. Returns c while it still waits for its
 * answer. Hooks run once per execution, after the idempotency lookup:
 * a caller that joins or replays a keyed execution is answered by one
 * the hooks have already seen, and the key compares the arguments as the
 * client sent them. */
static struct caller *exec_start(struct dispatcher *d, struct exec *e, struct caller *c,
				  enum confirm_mode mode);

/* Answers every caller of a keyed execution that will not run here with
 * the outcome the store holds (replayed, or joined from elsewhere). */
static void exec_replay(struct exec *e, struct outcome *o, bool joined)
{
	struct dispatcher *d = e->d;
	idem_end(&d->idem, e->key, e);
	bool first = true;
	while (!list_empty(&e->waiters)) {
		struct caller *c = list_first(&e->waiters, struct caller, node);
		struct stats *us = &fair_uid(d, c->session->uid)->stats;
		if (first && !joined) {
			d->stats.idem_hits++;
			us->idem_hits++;
		} else {
			d->stats.idem_joins++;
			us->idem_joins++;
		}
		first = false;
		caller_complete(c, o, !joined);
	}
	exec_free(e);
}

/* Ends a keyed execution that will not run, with o, keeping nothing. */
static void exec_refuse(struct exec *e, struct outcome *o)
{
	e->unkept = true;
	exec_finish(e, o);
}

/* The key is the execution's: the checks that spend something (the
 * circuit's probe, the budget) run now, then it goes on its way. */
static void exec_admit_claimed(struct exec *e)
{
	struct dispatcher *d = e->d;
	struct admission a = { .name = e->tool->name, .t = e->tool };
	struct call_params p = { .budget = e->budget };
	struct outcome *o = admit_check_circuit(d, e->session, &a);
	e->ts = a.ts;
	e->us = a.us;
	e->circuit = a.circuit;
	if (!o)
		o = admit_check_budget(e->session, &p, &a);
	if (o) {
		exec_refuse(e, o);
		return;
	}
	e->probe = a.probe;
	e->state = EX_NEW;
	struct caller *first = list_first(&e->waiters, struct caller, node);
	exec_start(d, e, first, e->mode);
}

/* The store's answer to an execution's claim of its key. */
static void on_claim(void *arg, const struct store_answer *ans)
{
	struct exec *e = arg;
	e->claim_wait = NULL;
	const char *client_key = idem_client_key(e->key);
	switch (ans->result) {
	case STORE_CLAIMED:
		e->claim = ans->claim;
		exec_admit_claimed(e);
		return;
	case STORE_DONE:
		exec_replay(e, ans->value, ans->joined);
		return;
	case STORE_CONFLICT:
		exec_refuse(e, conflict(client_key, ans->same_tool));
		return;
	case STORE_LOST: {
		struct outcome *o = outcome_error(TC_EXECUTION_ERROR,
			"The call with idempotency key '%s' was running on another toolcalld that stopped "
			"before it ended: whether it took effect is unknown. Check its effects, then retry "
			"with a new key", client_key);
		o->error_data = xstrdup("{\"outcome\":\"unknown\"}");
		exec_refuse(e, o);
		return;
	}
	case STORE_UNAVAILABLE:
		exec_refuse(e, outcome_error(TC_TRANSIENT,
			"The shared idempotency store cannot be reached; retry the call later"));
		return;
	}
}

/* A keyed call that no execution here answers: its execution claims the
 * key in the store first (callers with the same key join it meanwhile). */
static struct caller *claim_keyed(struct dispatcher *d, struct session *s, const struct call_params *p,
				  struct caller *c, struct admission *a)
{
	/* The uid's share of the slots is known before the claim answers. */
	a->us = fair_uid(d, s->uid);
	struct exec *e = exec_new(d, s, p, c, a);
	e->state = EX_CLAIMING;
	e->mode = a->mode;
	uint8_t hash[STORE_HASH_LEN];
	store_args_hash(e->tool->name, e->canon, strlen(e->canon), hash);
	struct store_key k = {
		.uid = s->uid,
		.key = p->idempotency_key,
		.key_len = strlen(p->idempotency_key),
		.tool = e->tool->name,
		.hash = hash,
		.idempotent = e->tool->idempotent,
	};
	/* The store may answer at once (the memory store does): the call
	 * may then be answered, and e freed, inside, and store_claim returns
	 * NULL. A wait it returns is one whose answer has not come: e is
	 * alive and holds it until on_claim or exec_free lets it go. */
	caller_hold(c);
	struct store_wait *w = store_claim(d->idem.store, &k, on_claim, e);
	if (w)
		e->claim_wait = w;
	bool waiting = !c->answered;
	caller_release(c);
	return waiting ? c : NULL;
}

static struct caller *exec_start(struct dispatcher *d, struct exec *e, struct caller *c,
				  enum confirm_mode mode)
{
	if (mode == CONFIRM_DENY) {
		/* Only reachable through always_allow races; kept for safety. */
		exec_finish(e, outcome_error(TC_PERMISSION_DENIED, "Tool '%s' is denied by policy",
					     e->tool->name));
		return NULL;
	}
	e->mode = mode;
	struct hook_input in;
	const char *roots[WS_GROUP_MAX + 1];
	hook_input_of(e, &in, roots);
	e->hook = hooks_pre_start(d->hooks, &in, on_pre_hooks, e);
	if (e->hook) {
		e->state = EX_HOOKS;
		return c;
	}
	/* The caller may be answered inside (a synchronous tool): only hand
	 * it back if it is still waiting. */
	caller_hold(c);
	exec_proceed(e);
	bool waiting = !c->answered;
	caller_release(c);
	return waiting ? c : NULL;
}

static struct outcome *ended_outcome(const struct dispatcher *d, const char *why);

struct caller *dispatch_call(struct dispatcher *d, struct session *s, const struct call_params *p,
			     const struct caller_ops *ops, void *ctx)
{
	struct caller *c = caller_new(d, s, p, ops, ctx);
	_cleanup_(admit_clear) struct admission a = { .name = p->tool ? p->tool : "" };
	struct outcome *o;

	if ((o = admit_find_tool(d, s, &a)) || (o = admit_check_audit(d)))
		return fail_now(d, c, a.name, a.t, o);
	/* Stopped: nothing starts now, the next daemon runs it. */
	if (d->stopping)
		return fail_now(d, c, a.name, a.t, ended_outcome(d, d->stop_why));
	if ((o = admit_parse_arguments(d, p, &a)) || (o = admit_validate_arguments(&a))) {
		admit_report_invalid(d, s, a.name, o);
		return fail_now(d, c, a.name, a.t, o);
	}
	admit_decide_confirmation(d, s, &a);
	if ((o = admit_check_paths(s, &a)))
		return fail_now(d, c, a.name, a.t, o);
	if (p->idempotency_key) {
		struct idem_entry *ie = admit_find_keyed(d, s, p->idempotency_key, &a);
		if (ie)
			return answer_keyed(d, c, p->idempotency_key, &a, ie);
		return claim_keyed(d, s, p, c, &a);
	}
	if ((o = admit_check_circuit(d, s, &a)) || (o = admit_check_budget(s, p, &a)))
		return fail_now(d, c, a.name, a.t, o);
	return exec_start(d, exec_new(d, s, p, c, &a), c, a.mode);
}

/* The outcome of a call ended before its end: cancelled. When the daemon
 * stops, data.restart tells the caller it was the daemon's stop, not its
 * own cancel: the call may be sent again to the next daemon. */
static struct outcome *ended_outcome(const struct dispatcher *d, const char *why)
{
	struct outcome *o = outcome_error(TC_CANCELLED, "%s", why);
	if (d->stopping)
		o->error_data = xstrdup("{\"restart\":true}");
	return o;
}

/* Ends an execution nobody waits for any more. */
static void exec_cancel(struct exec *e, const char *why)
{
	if (e->state == EX_DONE)
		return;
	char *command = attempt_command(e);
	char *output = attempt_partial(e);
	abandon_attempt(e);
	confirm_cancel(e);
	/* Stopped by a stop: its key is released (a cancelled outcome is
	 * never kept), or marked unknown (keep_stopped). */
	if (e->d->stopping) {
		e->unkept = true;
		e->stopped = true;
	}
	struct outcome *o = ended_outcome(e->d, why);
	outcome_keep_partial(o, output);
	o->command = command;
	exec_finish(e, o);
}

static void cancel_caller(struct caller *c, bool respond, const char *why)
{
	struct exec *e = c->exec;
	list_remove(&c->node);
	c->exec = NULL;
	if (respond) {
		_cleanup_(outcome_unrefp) struct outcome *o = ended_outcome(c->d, why);
		if (e)
			outcome_keep_partial(o, attempt_partial(e));
		o->call_id = xstrdup(e ? e->call_id : "");
		o->tool = xstrdup(e ? e->tool->name : "");
		if (e) {
			o->attempts = e->attempts;
			o->duration_ms = tc_now(c->d->loop) - e->start_ms;
			o->side_effects = e->tool->side_effects;
		}
		/* The last caller gone ends the execution, whose own audit line
		 * says what ran (command, files); else this one is audited. */
		if (e && list_empty(&e->waiters))
			caller_answer(c, o, false);
		else
			caller_complete(c, o, false);
	} else {
		caller_free(c);
	}
	if (e && list_empty(&e->waiters))
		exec_cancel(e, why);
}

void dispatch_cancel(struct caller *c, bool respond)
{
	cancel_caller(c, respond, "The call was cancelled by the client");
}

void dispatch_detach(struct caller *c)
{
	struct exec *e = c->exec;
	if (e && e->key) {
		/* A keyed execution runs to its end; its outcome waits in the
		 * cache for the caller to come back. */
		list_remove(&c->node);
		caller_free(c);
		return;
	}
	cancel_caller(c, false, "The client disconnected");
}

void dispatch_hold(struct dispatcher *d)
{
	d->pumping++;
}

void dispatch_release(struct dispatcher *d)
{
	if (--d->pumping == 0)
		pump(d);
}

unsigned dispatch_cancel_session(struct dispatcher *d, struct session *s)
{
	unsigned n = 0;
	session_ref(s);
	/* A running call cancelled frees a slot: the session's queued calls
	 * must not start in it only to be cancelled next. */
	dispatch_hold(d);
	while (!list_empty(&s->callers)) {
		struct caller *c = list_first(&s->callers, struct caller, session_node);
		cancel_caller(c, true, "The call was cancelled with its session");
		n++;
	}
	dispatch_release(d);
	session_unref(s);
	return n;
}

void dispatch_cancel_all(struct dispatcher *d, const char *why)
{
	dispatch_hold(d);
	while (!list_empty(&d->callers)) {
		struct caller *c = list_first(&d->callers, struct caller, all_node);
		cancel_caller(c, true, why);
	}
	/* Keyed executions nobody waits for. */
	while (!list_empty(&d->execs)) {
		struct exec *e = list_first(&d->execs, struct exec, node);
		exec_cancel(e, why);
	}
	dispatch_release(d);
}

void dispatch_stop_all(struct dispatcher *d, const char *why)
{
	d->stopping = true;
	d->stop_why = why;
	dispatch_cancel_all(d, why);
}

unsigned dispatch_abandoned(const struct dispatcher *d)
{
	return d->abandoned;
}

unsigned dispatch_inflight_of(const struct dispatcher *d, uid_t uid)
{
	unsigned n = 0;
	struct list *pos;
	for (pos = d->callers.next; pos != &d->callers; pos = pos->next)
		if (list_entry(pos, struct caller, all_node)->session->uid == uid)
			n++;
	return n;
}

unsigned dispatch_inflight(const struct dispatcher *d)
{
	unsigned n = 0;
	struct list *pos;
	for (pos = d->execs.next; pos != &d->execs; pos = pos->next)
		n++;
	return MAX(n, d->n_callers);
}

/* --- the dispatcher ---------------------------------------------------- */

struct dispatcher *dispatcher_new(struct tc_loop *loop, const struct dispatch_config *cfg,
				  struct event_bus *bus)
{
	struct dispatcher *d = xcalloc(1, sizeof(*d));
	d->loop = loop;
	d->cfg = *cfg;
	d->bus = bus;
	stats_init(&d->stats);
	idem_init(&d->idem, loop, cfg);
	d->tools = map_new();
	d->uids = map_new();
	list_init(&d->ready);
	d->confirms = map_new();
	d->reports = &confirm_reports;
	list_init(&d->resolved);
	list_init(&d->execs);
	list_init(&d->callers);
	if (getrandom(&d->boot, sizeof(d->boot), GRND_NONBLOCK) != sizeof(d->boot))
		d->boot = wall_ms() ^ ((uint64_t)getpid() << 40);
	if (getrandom(d->id_key, sizeof(d->id_key), GRND_NONBLOCK) != sizeof(d->id_key))
		for (size_t i = 0; i < ELEMENTSOF(d->id_key); i++)
			d->id_key[i] = tc_random(loop);
	d->sweep = tc_timer_new(loop, on_sweep, d);
	d->hooks = hooks_new(loop);
	hooks_set_failed_cb(d->hooks, on_post_hook_failed, d);
	return d;
}

struct dispatcher *dispatcher_free(struct dispatcher *d)
{
	if (!d)
		return NULL;
	dispatch_cancel_all(d, "toolcalld is shutting down");
	d->hooks = hooks_free(d->hooks);
	idem_clear(&d->idem);
	confirm_clear(d);
	size_t it = 0;
	void *v;
	while (map_next(d->tools, &it, NULL, &v))
		free(v);
	map_free(d->tools);
	fair_clear(d);
	map_free(d->confirms);
	tc_timer_free(d->sweep);
	registry_unref(d->reg);
	stats_free(&d->stats);
	free(d);
	return NULL;
}

void dispatch_set_config(struct dispatcher *d, const struct dispatch_config *cfg)
{
	d->cfg = *cfg;
	idem_configure(&d->idem, cfg);
	/* Caps may have changed, and the TTL of what is kept. */
	fair_recheck(d);
	pump(d);
	dispatch_arm_sweep(d);
}

int dispatch_open_store(struct dispatcher *d, const struct store_config *sc)
{
	return idem_open_store(&d->idem, d->loop, &d->cfg, sc);
}

struct store *dispatch_store(const struct dispatcher *d) { return d->idem.store; }

void dispatch_set_policy(struct dispatcher *d, const struct policy_config *policy) { d->policy = policy; }
void dispatch_set_env(struct dispatcher *d, const struct tool_env *env)
{
	d->env = env;
	hooks_set_sandbox(d->hooks, env ? env->sandbox : NULL);
}
void dispatch_set_audit(struct dispatcher *d, struct audit *audit) { d->audit = audit; }
void dispatch_set_hooks(struct dispatcher *d, const struct hooks_config *c) { hooks_set_config(d->hooks, c); }
void dispatch_set_registry(struct dispatcher *d, struct registry *r)
{
	registry_unref(d->reg);
	d->reg = registry_ref(r);
}
