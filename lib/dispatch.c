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
 * Ownership: an exec is owned by the engine from creation to finish();
 * callers are owned by the engine and handed to the daemon as handles until
 * they complete or are cancelled; an attempt is freed when both the tool has
 * finished and the engine is done with it (a timed-out attempt is
 * "abandoned": its exec pointer is cleared and the tool frees it on finish).
 */
#include "lib/dispatch.h"

#include <errno.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "lib/audit.h"
#include "lib/events.h"
#include "lib/list.h"
#include "lib/loop.h"
#include "lib/map.h"
#include "lib/policy.h"
#include "lib/registry.h"
#include "lib/schema.h"
#include "lib/session.h"
#include "lib/stats.h"
#include "lib/workspace.h"
#include "proto/json.h"

/* Failures kept per tool for the circuit window (more are never needed
 * than the threshold, but the threshold is configurable). */
#define CIRCUIT_RING 64
/* Arguments quoted in a confirmation request. */
#define SUMMARY_MAX 512

enum exec_state {
	EX_NEW,
	EX_CONFIRMING,
	EX_QUEUED,
	EX_RUNNING,
	EX_BACKOFF,
	EX_DONE,
};

struct tool_state {
	unsigned running;
	uint64_t fails[CIRCUIT_RING];
	unsigned n_fails;
	bool open;
	bool probing;
	uint64_t open_until;
};

struct attempt;

struct confirm {
	char *id;
	struct exec *exec;		/* NULL once the exec no longer waits */
	uid_t uid;
	const char *decision;		/* NULL while pending */
	uint64_t expires;		/* resolved records are kept a while for "first write wins" */
	struct list node;		/* d->resolved */
};

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

struct attempt {
	struct tool_call tc;
	struct exec *exec;		/* NULL: abandoned */
	struct dispatcher *d;
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
};

struct idem_entry {
	char *tool;
	char *canon;
	struct exec *exec;		/* in flight */
	struct outcome *outcome;	/* kept */
	size_t bytes;			/* what the kept outcome holds, roughly */
	uint64_t expires;
	struct list lru;		/* d->idem_lru while kept */
	char *key;
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
	struct map *idem;
	struct list idem_lru;
	uint64_t idem_bytes;		/* held by kept outcomes */
	unsigned waiting;		/* executions queued, all sessions */
	struct map *tools;		/* name -> struct tool_state */
	struct map *confirms;
	struct list resolved;
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

static void pump(struct dispatcher *d);
static void start_attempt(struct exec *e);
static void finish(struct exec *e, struct outcome *o);

void dispatch_config_defaults(struct dispatch_config *c)
{
	*c = (struct dispatch_config){
		.max_concurrent = 64,
		.session_concurrency = 4,
		.queue_max = 256,
		.queue_max_total = 8192,
		.max_attempts = 3,
		.base_delay_ms = 100,
		.idem_ttl_ms = 60000,
		.idem_max_entries = 10000,
		.idem_max_bytes = UINT64_C(256) << 20,
		.circuit_failures = 5,
		.circuit_window_ms = 30000,
		.circuit_open_ms = 30000,
		.confirm_timeout_ms = 300000,
		.no_approver_wait = false,
		.max_json_depth = 64,
	};
}

/* --- outcomes ---------------------------------------------------------- */

static struct outcome *outcome_new(enum tc_kind kind)
{
	struct outcome *o = xcalloc(1, sizeof(*o));
	o->refs = 1;
	o->kind = kind;
	return o;
}

static struct outcome *outcome_error(enum tc_kind kind, const char *fmt, ...) PRINTF(2, 3);
static struct outcome *outcome_error(enum tc_kind kind, const char *fmt, ...)
{
	struct outcome *o = outcome_new(kind);
	va_list ap;
	va_start(ap, fmt);
	o->message = xvasprintf(fmt, ap);
	va_end(ap);
	return o;
}

struct outcome *outcome_ref(struct outcome *o)
{
	if (o)
		o->refs++;
	return o;
}

struct outcome *outcome_unref(struct outcome *o)
{
	if (!o || --o->refs > 0)
		return NULL;
	free(o->text);
	free(o->text_json);
	free(o->structured);
	free(o->message);
	free(o->error_data);
	free(o->call_id);
	free(o->tool);
	for (size_t i = 0; i < o->n_files; i++)
		free(o->files[i]);
	free(o->files);
	free(o->command);
	free(o);
	return NULL;
}

bool outcome_retryable(const struct outcome *o)
{
	if (o->kind == TC_TIMEOUT)
		return o->idempotent;
	return tc_kind_info(o->kind)->retryable;
}

void outcome_write_result(const struct outcome *o, bool replayed, struct buf *out)
{
	/* The answer to every successful call, on the hot path: its shape is
	 * fixed, so it is written directly (the same bytes the generator
	 * would write), with its size reserved at once. */
	size_t text_len = o->text_json ? strlen(o->text_json) : o->text ? strlen(o->text) : 0;
	size_t struct_len = o->structured ? strlen(o->structured) : 2;
	buf_reserve(out, text_len + text_len / 8 + struct_len + 256);
	buf_puts(out, "{\"content\":[{\"type\":\"text\",\"text\":");
	if (o->text_json)
		buf_append(out, o->text_json, text_len);
	else if (o->text)
		json_quote_utf8(out, o->text, text_len);
	else if (o->structured)
		json_quote_utf8(out, o->structured, struct_len);
	else
		buf_puts(out, "\"\"");
	buf_puts(out, "}],\"structuredContent\":");
	if (o->structured)
		buf_append(out, o->structured, struct_len);
	else
		buf_puts(out, "{}");
	buf_puts(out, o->is_error ? ",\"isError\":true" : ",\"isError\":false");
	buf_puts(out, ",\"_meta\":{\"toolcalld/callId\":");
	json_quote_utf8(out, o->call_id ? o->call_id : "", o->call_id ? strlen(o->call_id) : 0);
	buf_puts(out, ",\"toolcalld/attempts\":");
	buf_put_u64(out, o->attempts);
	buf_puts(out, ",\"toolcalld/durationMs\":");
	buf_put_u64(out, o->duration_ms);
	buf_puts(out, replayed ? ",\"toolcalld/replayed\":true}}" : ",\"toolcalld/replayed\":false}}");
}

void outcome_write_error_data(const struct outcome *o, bool replayed, struct buf *out)
{
	struct jgen *g = jgen_new(out);
	jgen_obj_open(g);
	jgen_kv_str(g, "kind", tc_kind_name(o->kind));
	jgen_kv_bool(g, "retryable", outcome_retryable(o));
	jgen_kv_int(g, "attempts", o->attempts);
	jgen_kv_int(g, "durationMs", (int64_t)o->duration_ms);
	jgen_kv_str(g, "callId", o->call_id);
	jgen_kv_str(g, "tool", o->tool);
	if (o->kind == TC_CIRCUIT_OPEN)
		jgen_kv_int(g, "retryAfterMs", (int64_t)o->retry_after_ms);
	if (replayed)
		jgen_kv_bool(g, "replayed", true);
	jgen_obj_close(g);
	jgen_free(g);
	/* Splice extra members in before the closing brace. */
	if (o->error_data) {
		const char *x = o->error_data;
		size_t n = strlen(x);
		while (n && x[n - 1] != '}')
			n--;
		const char *open = memchr(x, '{', n);
		if (open && n) {
			const char *inner = open + 1;
			size_t inner_len = (size_t)(x + n - 1 - inner);
			while (inner_len && (*inner == ' ' || *inner == '\n')) {
				inner++;
				inner_len--;
			}
			if (inner_len) {
				out->len--;	/* drop '}' */
				buf_putc(out, ',');
				buf_append(out, inner, inner_len);
				buf_putc(out, '}');
			}
		}
	}
}

/* --- small helpers ----------------------------------------------------- */

static char *new_call_id(struct dispatcher *d)
{
	/* "c-%08x-%llu", written by hand: every call takes one, and printf
	 * showed in the profile of small calls. */
	static const char hex[] = "0123456789abcdef";
	char id[2 + 8 + 1 + 20], *end = id + sizeof(id);
	uint32_t boot = (uint32_t)(d->boot & 0xffffffff);

	char *p = fmt_u64(end, ++d->counter);
	*--p = '-';
	for (int shift = 0; shift < 32; shift += 4)
		*--p = hex[(boot >> shift) & 0xf];
	*--p = '-';
	*--p = 'c';
	return xstrndup(p, (size_t)(end - p));
}

static struct tool_state *tool_state(struct dispatcher *d, const char *name)
{
	struct tool_state *ts = map_get(d->tools, name);
	if (!ts) {
		ts = xcalloc(1, sizeof(*ts));
		map_put(d->tools, name, ts);
	}
	return ts;
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

static void write_audit(struct dispatcher *d, const struct caller *c, const struct session *s,
			const struct outcome *o, bool replayed)
{
	if (!d->audit)
		return;
	char tbuf[32];
	format_time(wall_ms(), tbuf);
	struct buf b = {0};
	struct jgen *g = jgen_new(&b);
	jgen_obj_open(g);
	jgen_kv_str(g, "time", tbuf);
	jgen_kv_str(g, "session", s ? s->id : NULL);
	jgen_kv_int(g, "uid", s ? (int64_t)s->uid : -1);
	jgen_kv_int(g, "pid", c ? c->pid : 0);
	jgen_kv_str(g, "callId", o->call_id);
	jgen_kv_str(g, "tool", o->tool);
	jgen_kv_str(g, "sideEffect", side_effect_name(o->side_effects));
	jgen_kv_str(g, "outcome", tc_kind_name(o->kind));
	jgen_kv_bool(g, "isError", o->is_error);
	jgen_kv_int(g, "attempts", o->attempts);
	jgen_kv_int(g, "durationMs", (int64_t)o->duration_ms);
	jgen_kv_bool(g, "replayed", replayed);
	jgen_key(g, "files");
	jgen_arr_open(g);
	for (size_t i = 0; i < o->n_files; i++)
		jgen_str(g, o->files[i]);
	jgen_arr_close(g);
	jgen_kv_str(g, "command", o->command);
	if (o->kind != TC_OK)
		jgen_kv_str(g, "message", o->message);
	jgen_obj_close(g);
	jgen_free(g);
	audit_record(d->audit, buf_head(&b), buf_size(&b));
	buf_free(&b);
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
	return c;
}

static void caller_free(struct caller *c)
{
	list_remove(&c->node);
	list_remove(&c->session_node);
	list_remove(&c->all_node);
	c->d->n_callers--;
	if (c->d->watch == c)
		c->d->watch = NULL;
	session_unref(c->session);
	free(c->token);
	free(c);
}

/* Answers a caller and frees it. */
static void caller_complete(struct caller *c, struct outcome *o, bool replayed)
{
	struct dispatcher *d = c->d;
	write_audit(d, c, c->session, o, replayed);
	const struct caller_ops *ops = c->ops;
	void *ctx = c->ctx;
	caller_free(c);
	ops->complete(ctx, o, replayed);
}

/* Answers a call that never became an execution, and records it. */
static void fail_now(struct dispatcher *d, struct caller *c, const char *tool_name,
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
	struct kind_arg k = { tc_kind_name(o->kind), o->message };
	event_emit(d->bus, "tool.failed", c->session, o->call_id, tool_name, extra_kind, &k);
	caller_complete(c, o, false);
	outcome_unref(o);
}

/* --- idempotency ------------------------------------------------------- */

static void idem_entry_free(struct dispatcher *d, struct idem_entry *e)
{
	d->idem_bytes -= e->bytes;
	if (list_linked(&e->lru))
		list_remove(&e->lru);
	map_remove(d->idem, e->key);
	outcome_unref(e->outcome);
	free(e->tool);
	free(e->canon);
	free(e->key);
	free(e);
}

/* Drops kept outcomes past their TTL. */
static void idem_expire(struct dispatcher *d, uint64_t now)
{
	while (!list_empty(&d->idem_lru)) {
		struct idem_entry *e = list_first(&d->idem_lru, struct idem_entry, lru);
		if (e->expires > now)
			break;
		idem_entry_free(d, e);
	}
}

/* Keeps an outcome under the exec's key (or forgets the key). */
/* What an outcome holds, for the cache's byte bound. */
static size_t outcome_bytes(const struct outcome *o)
{
	size_t n = sizeof(*o);
	const char *const parts[] = { o->text, o->text_json, o->structured, o->message, o->error_data,
				      o->call_id, o->tool, o->command };
	for (size_t i = 0; i < ELEMENTSOF(parts); i++)
		n += parts[i] ? strlen(parts[i]) + 1 : 0;
	for (size_t i = 0; i < o->n_files; i++)
		n += strlen(o->files[i]) + 1 + sizeof(char *);
	return n;
}

static void idem_store(struct dispatcher *d, struct exec *e, struct outcome *o)
{
	struct idem_entry *ie = map_get(d->idem, e->key);
	if (!ie || ie->exec != e)
		return;
	ie->exec = NULL;
	if (o->kind == TC_CANCELLED || d->cfg.idem_ttl_ms == 0) {
		idem_entry_free(d, ie);
		return;
	}
	ie->outcome = outcome_ref(o);
	ie->expires = tc_now(d->loop) + d->cfg.idem_ttl_ms;
	ie->bytes = outcome_bytes(o) + strlen(ie->key) + strlen(ie->canon) + sizeof(*ie);
	d->idem_bytes += ie->bytes;
	/* TTLs are equal, so completion order is expiry order. Bounded by
	 * count and by bytes: forty answers of 16 MiB would otherwise stay
	 * in memory for the whole TTL. */
	list_insert_tail(&d->idem_lru, &ie->lru);
	while ((map_size(d->idem) > d->cfg.idem_max_entries || d->idem_bytes > d->cfg.idem_max_bytes) &&
	       !list_empty(&d->idem_lru))
		idem_entry_free(d, list_first(&d->idem_lru, struct idem_entry, lru));
}

/* --- circuit breaker --------------------------------------------------- */

static bool circuit_allows(struct dispatcher *d, struct tool_state *ts, uint64_t now,
			   uint64_t *ret_retry_after, bool *ret_probe)
{
	*ret_probe = false;
	if (!ts->open)
		return true;
	if (now < ts->open_until) {
		*ret_retry_after = ts->open_until - now;
		return false;
	}
	if (ts->probing) {
		*ret_retry_after = MIN(d->cfg.circuit_open_ms, 1000);
		return false;
	}
	ts->probing = true;
	*ret_probe = true;
	return true;
}

static bool counts_as_failure(enum tc_kind k)
{
	return k == TC_TIMEOUT || k == TC_TRANSIENT || k == TC_EXECUTION_ERROR;
}

static void circuit_open(struct dispatcher *d, struct tool_state *ts, const char *tool, uint64_t now)
{
	ts->open = true;
	ts->open_until = now + d->cfg.circuit_open_ms;
	ts->n_fails = 0;
	event_emit(d->bus, "circuit.opened", NULL, NULL, tool, NULL, NULL);
}

static void circuit_record(struct dispatcher *d, struct exec *e, enum tc_kind kind)
{
	struct tool_state *ts = e->ts;
	uint64_t now = tc_now(d->loop);
	if (e->probe) {
		ts->probing = false;
		e->probe = false;
		if (kind == TC_OK) {
			ts->open = false;
			ts->n_fails = 0;
			event_emit(d->bus, "circuit.closed", NULL, NULL, e->tool->name, NULL, NULL);
		} else if (counts_as_failure(kind)) {
			circuit_open(d, ts, e->tool->name, now);
		}
		return;
	}
	if (!counts_as_failure(kind) || d->cfg.circuit_failures == 0 || ts->open)
		return;
	/* Keep only failures inside the window, newest last. */
	unsigned keep = 0;
	for (unsigned i = 0; i < ts->n_fails; i++)
		if (ts->fails[i] + d->cfg.circuit_window_ms > now)
			ts->fails[keep++] = ts->fails[i];
	ts->n_fails = keep;
	if (ts->n_fails == CIRCUIT_RING) {
		memmove(ts->fails, ts->fails + 1, sizeof(ts->fails[0]) * (CIRCUIT_RING - 1));
		ts->n_fails--;
	}
	ts->fails[ts->n_fails++] = now;
	if (ts->n_fails >= d->cfg.circuit_failures)
		circuit_open(d, ts, e->tool->name, now);
}

/* --- executions -------------------------------------------------------- */

static void exec_free(struct exec *e)
{
	list_remove(&e->node);
	tc_timer_free(e->timer);
	if (e->confirm) {
		e->confirm->exec = NULL;
		if (!e->confirm->decision) {
			/* Nobody can answer it any more. */
			map_remove(e->d->confirms, e->confirm->id);
			free(e->confirm->id);
			free(e->confirm);
		}
	}
	outcome_unref(e->last);
	tool_unref(e->tool);
	session_unref(e->session);
	json_doc_unref(e->doc);
	free(e->key);
	free(e->canon);
	free(e->call_id);
	free(e);
}

static void release_slot(struct exec *e)
{
	if (!e->holds_slot)
		return;
	e->holds_slot = false;
	e->d->running--;
	e->session->running--;
	e->ts->running--;
}

static void leave_queue(struct exec *e)
{
	if (list_linked(&e->queue_node)) {
		list_remove(&e->queue_node);
		e->session->waiting--;
		e->d->waiting--;
	}
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

/* Ends an execution with outcome o (consumed) and answers every caller. */
static void finish(struct exec *e, struct outcome *o)
{
	struct dispatcher *d = e->d;
	e->state = EX_DONE;
	tc_timer_stop(e->timer);
	leave_queue(e);
	release_slot(e);

	o->attempts = e->attempts;
	o->duration_ms = tc_now(d->loop) - e->start_ms;
	free(o->call_id);
	o->call_id = xstrdup(e->call_id);
	free(o->tool);
	o->tool = xstrdup(e->tool->name);
	o->side_effects = e->tool->side_effects;
	o->idempotent = e->tool->idempotent;

	if (e->attempts > 0 || e->probe)
		circuit_record(d, e, o->kind);
	stats_record(&d->stats, e->tool->name, o->kind, elapsed_us(&e->start_ts));
	struct completed_arg ca = { o };
	if (o->kind == TC_OK)
		event_emit(d->bus, "tool.completed", e->session, e->call_id, e->tool->name, extra_completed, &ca);
	else
		event_emit(d->bus, "tool.failed", e->session, e->call_id, e->tool->name, extra_failed, &ca);
	if (e->key)
		idem_store(d, e, o);

	while (!list_empty(&e->waiters)) {
		struct caller *c = list_first(&e->waiters, struct caller, node);
		caller_complete(c, o, false);
	}
	outcome_unref(o);
	exec_free(e);
	pump(d);
}

static bool can_run(struct dispatcher *d, struct exec *e)
{
	if (d->running >= d->cfg.max_concurrent)
		return false;
	if (e->session->running >= d->cfg.session_concurrency)
		return false;
	if (e->tool->concurrency && e->ts->running >= e->tool->concurrency)
		return false;
	return true;
}

/* Starts queued executions while slots are free, oldest first. */
static void pump(struct dispatcher *d)
{
	if (d->pumping)
		return;
	d->pumping++;
	bool progress = true;
	while (progress && d->running < d->cfg.max_concurrent) {
		progress = false;
		struct list *pos, *tmp;
		list_foreach_safe(pos, tmp, &d->queue) {
			struct exec *e = list_entry(pos, struct exec, queue_node);
			if (!can_run(d, e))
				continue;
			leave_queue(e);
			e->holds_slot = true;
			d->running++;
			e->session->running++;
			e->ts->running++;
			start_attempt(e);
			/* The queue may have changed under us. */
			progress = true;
			break;
		}
	}
	d->pumping--;
}

static void enqueue(struct exec *e)
{
	struct dispatcher *d = e->d;
	/* Only a call that has to wait counts against the queue: pump()
	 * runs whenever a slot frees, so a call that can run now starts at
	 * once (with queue_max 0, calls run or are refused, never wait). */
	if (!can_run(d, e) && e->session->waiting >= d->cfg.queue_max) {
		finish(e, outcome_error(TC_OVERLOADED,
					"Too many calls are queued for this session (limit %u); "
					"wait for some to finish, then retry", d->cfg.queue_max));
		return;
	}
	/* And daemon-wide: what waits holds memory (its arguments), and
	 * sessions are as many as clients care to open. */
	if (!can_run(d, e) && d->waiting >= d->cfg.queue_max_total) {
		finish(e, outcome_error(TC_OVERLOADED,
					"Too many calls are queued in toolcalld (limit %u, all sessions); "
					"wait for some to finish, then retry", d->cfg.queue_max_total));
		return;
	}
	e->state = EX_QUEUED;
	list_insert_tail(&d->queue, &e->queue_node);
	e->session->waiting++;
	d->waiting++;
	pump(d);
}

/* --- attempts ---------------------------------------------------------- */

static struct outcome *outcome_from_call(struct tool_call *tc)
{
	struct outcome *o = outcome_new(tc->kind);
	o->is_error = tc->is_error;
	o->text = TAKE_PTR(tc->text);
	o->text_json = TAKE_PTR(tc->text_json);
	o->structured = TAKE_PTR(tc->structured);
	o->message = TAKE_PTR(tc->message);
	o->error_data = TAKE_PTR(tc->error_data);
	o->files = TAKE_PTR(tc->files);
	o->n_files = tc->n_files;
	tc->n_files = 0;
	o->command = TAKE_PTR(tc->command);
	if (o->kind != TC_OK && !o->message)
		o->message = xstrdup("The tool failed without saying why");
	return o;
}

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

/* Arms the exec's one timer with a callback (timeout, backoff, confirmation). */
static void set_timer(struct exec *e, tc_timer_cb cb, uint64_t after_ms)
{
	e->timer = tc_timer_free(e->timer);
	e->timer = tc_timer_new(e->d->loop, cb, e);
	tc_timer_start(e->timer, after_ms);
}

/* Decides between a retry and the end, after an attempt ended with o. */
static void attempt_result(struct exec *e, struct outcome *o)
{
	struct dispatcher *d = e->d;
	bool retry = e->attempts < e->max_attempts &&
		     (o->kind == TC_TRANSIENT || (o->kind == TC_TIMEOUT && e->tool->idempotent));
	if (!retry) {
		finish(e, o);
		return;
	}
	/* 100 ms before attempt 2, 400 ms before attempt 3, each × (1 + U[0, 0.5]). */
	uint64_t base = d->cfg.base_delay_ms;
	for (unsigned i = 1; i < e->attempts; i++)
		base *= 4;
	uint64_t jitter = (uint64_t)((double)base * 0.5 * ((double)tc_random(d->loop) / 4294967295.0));
	uint64_t delay = base + jitter;
	outcome_unref(e->last);
	e->last = o;
	e->state = EX_BACKOFF;
	d->stats.retries++;
	struct retry_arg ra = { e->attempts + 1, delay, tc_kind_name(o->kind) };
	event_emit(d->bus, "dispatch.retry", e->session, e->call_id, e->tool->name, extra_retry, &ra);
	set_timer(e, on_backoff, delay);
}

/* The tool is done with an attempt (or, abandoned, just done). */
static void attempt_end(struct attempt *a)
{
	struct exec *e = a->exec;
	if (!e) {
		a->d->abandoned--;
		tool_call_clear(&a->tc);
		free(a);
		return;
	}
	e->attempt = NULL;
	tc_timer_stop(e->timer);
	struct outcome *o = outcome_from_call(&a->tc);
	tool_call_clear(&a->tc);
	free(a);
	attempt_result(e, o);
}

static void on_tool_finish(struct tool_call *tc)
{
	attempt_end(tc->owner);
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

static void on_attempt_timeout(void *arg)
{
	struct exec *e = arg;
	char *command = attempt_command(e);
	abandon_attempt(e);
	struct outcome *o = outcome_error(TC_TIMEOUT, "Tool '%s' exceeded its %llu ms limit",
					  e->tool->name, (unsigned long long)e->timeout_ms);
	o->idempotent = e->tool->idempotent;
	o->command = command;
	attempt_result(e, o);
}

static void on_backoff(void *arg)
{
	start_attempt(arg);
}

static void start_attempt(struct exec *e)
{
	struct dispatcher *d = e->d;
	struct session *s = e->session;

	/* Every attempt spends one tool call of each budget in force. */
	if ((s->has_budget && s->budget_left <= 0) || e->budget == 0) {
		if (e->last) {
			finish(e, TAKE_PTR(e->last));
		} else {
			finish(e, outcome_error(TC_BUDGET_EXCEEDED,
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
	e->state = EX_RUNNING;
	if (e->attempts == 1)
		event_emit(d->bus, "tool.called", s, e->call_id, e->tool->name, extra_called, e);
	struct retry_arg ra = { e->attempts, 0, NULL };
	event_emit(d->bus, "dispatch.attempt", s, e->call_id, e->tool->name, extra_retry, &ra);

	struct attempt *a = xcalloc(1, sizeof(*a));
	a->exec = e;
	a->d = d;
	a->tc.tool = e->tool;
	a->tc.args = e->args;
	a->tc.ws = s->ws;
	a->tc.loop = d->loop;
	a->tc.env = d->env;
	a->tc.call_id = e->call_id;
	a->tc.on_finish = on_tool_finish;
	a->tc.on_output = on_tool_output;
	a->tc.owner = a;
	e->attempt = a;

	set_timer(e, on_attempt_timeout, e->timeout_ms);

	/* After exec returns, a may be gone (the tool finished inside). */
	enum tool_ret r = e->tool->def->exec(&a->tc);
	if (r == TOOL_DONE) {
		a->tc.done = true;
		attempt_end(a);
	}
}

/* --- confirmation ------------------------------------------------------ */

struct confirm_arg {
	struct exec *e;
};

static void extra_confirm(struct jgen *g, void *arg)
{
	struct exec *e = ((struct confirm_arg *)arg)->e;
	jgen_kv_str(g, "requestId", e->confirm->id);
	jgen_kv_str(g, "sideEffect", side_effect_name(e->tool->side_effects));
	struct buf b = {0};
	json_canonical(e->args, &b);
	if (buf_size(&b) > SUMMARY_MAX) {
		b.len = b.off + SUMMARY_MAX;
		/* Do not cut a UTF-8 sequence in two. */
		while (b.len > b.off && ((unsigned char)b.data[b.len] & 0xC0) == 0x80)
			b.len--;
		buf_puts(&b, "…");
	}
	jgen_kv_str(g, "input", buf_head(&b));
	buf_free(&b);
	jgen_key(g, "files");
	jgen_arr_open(g);
	for (const char *const *p = e->tool->def->path_args; p && *p; p++) {
		const struct json *v = json_get(e->args, *p);
		if (v && v->type == JSON_STRING) {
			char *disp = ws_display_path(e->session->ws, v->u.str.s, v->u.str.len);
			jgen_str(g, disp);
			free(disp);
		}
	}
	jgen_arr_close(g);
	jgen_kv_int(g, "timeoutMs", (int64_t)e->d->cfg.confirm_timeout_ms);
}

struct resolved_arg {
	const char *id;
	const char *decision;
};

static void extra_resolved(struct jgen *g, void *arg)
{
	struct resolved_arg *r = arg;
	jgen_kv_str(g, "requestId", r->id);
	jgen_kv_str(g, "decision", r->decision);
}

static void confirm_settle(struct dispatcher *d, struct confirm *c, const char *decision)
{
	c->decision = decision;
	c->expires = tc_now(d->loop) + MAX(d->cfg.idem_ttl_ms, 60000);
	list_insert_tail(&d->resolved, &c->node);
}

/* Ends a call whose confirmation request nobody answered: the request is
 * settled with decision, subscribers are told, the call ends with o. */
static void confirm_unanswered(struct exec *e, const char *decision, struct outcome *o)
{
	struct dispatcher *d = e->d;
	struct confirm *c = e->confirm;
	e->confirm = NULL;
	c->exec = NULL;
	confirm_settle(d, c, decision);
	struct resolved_arg r = { c->id, decision };
	event_emit(d->bus, "tool.confirmation_resolved", e->session, e->call_id, e->tool->name,
		   extra_resolved, &r);
	finish(e, o);
}

static void on_confirm_timeout(void *arg)
{
	struct exec *e = arg;
	confirm_unanswered(e, "timeout", outcome_error(TC_CONFIRMATION_TIMEOUT,
		"Nobody answered the confirmation request for '%s' within %llu ms; the call was not run",
		e->tool->name, (unsigned long long)e->d->cfg.confirm_timeout_ms));
}

static void ask_confirmation(struct exec *e)
{
	struct dispatcher *d = e->d;
	if (!d->cfg.no_approver_wait &&
	    !event_has_subscriber(d->bus, "tool.confirmation_requested", e->session)) {
		finish(e, outcome_error(TC_USER_DENIED,
					"Tool '%s' (side effect: %s) needs confirmation and no approver is "
					"connected, so the call was not run. To approve calls, run "
					"'toolcallctl approve' (or subscribe to tool.confirmation_requested "
					"and answer with confirmations/resolve), or set the tool to \"auto\" "
					"in the confirmation policy", e->tool->name,
					side_effect_name(e->tool->side_effects)));
		return;
	}
	struct confirm *c = xcalloc(1, sizeof(*c));
	c->id = xasprintf("cf-%08llx-%llu", (unsigned long long)(d->boot >> 32),
			  (unsigned long long)++d->counter);
	c->exec = e;
	c->uid = e->session->uid;
	e->confirm_seq = d->counter;
	list_init(&c->node);
	map_put(d->confirms, c->id, c);
	e->confirm = c;
	e->state = EX_CONFIRMING;
	set_timer(e, on_confirm_timeout, d->cfg.confirm_timeout_ms);
	struct confirm_arg ca = { e };
	event_emit(d->bus, "tool.confirmation_requested", e->session, e->call_id, e->tool->name,
		   extra_confirm, &ca);
}

void dispatch_approvers_left(struct dispatcher *d)
{
	if (d->cfg.no_approver_wait)
		return;
	/* Collected first: finishing one changes the map. */
	struct exec **left = NULL;
	size_t n = 0, it = 0;
	void *v;
	while (map_next(d->confirms, &it, NULL, &v)) {
		struct confirm *c = v;
		if (c->exec && !c->decision &&
		    !event_has_subscriber(d->bus, "tool.confirmation_requested", c->exec->session)) {
			left = xreallocarray(left, n + 1, sizeof(*left));
			left[n++] = c->exec;
		}
	}
	for (size_t i = 0; i < n; i++)
		confirm_unanswered(left[i], "deny", outcome_error(TC_USER_DENIED,
			"Tool '%s' needs confirmation and the approver left without answering, so the call "
			"was not run. To approve calls, run 'toolcallctl approve' (or subscribe to "
			"tool.confirmation_requested and answer with confirmations/resolve)", left[i]->tool->name));
	free(left);
}

void dispatch_replay_confirmations(struct dispatcher *d, struct subscriber *sub)
{
	/* In the order they were asked (ids carry a counter). */
	struct exec **open = NULL;
	size_t n = 0;
	size_t it = 0;
	void *v;
	while (map_next(d->confirms, &it, NULL, &v)) {
		struct confirm *c = v;
		if (c->exec && !c->decision) {
			open = xreallocarray(open, n + 1, sizeof(*open));
			open[n++] = c->exec;
		}
	}
	for (size_t i = 1; i < n; i++)
		for (size_t j = i; j > 0 && open[j]->confirm_seq < open[j - 1]->confirm_seq; j--) {
			struct exec *t = open[j];
			open[j] = open[j - 1];
			open[j - 1] = t;
		}
	for (size_t i = 0; i < n; i++) {
		struct confirm_arg ca = { open[i] };
		event_emit_to(d->bus, sub, "tool.confirmation_requested", open[i]->session, open[i]->call_id,
			      open[i]->tool->name, extra_confirm, &ca);
	}
	free(open);
}

int dispatch_resolve(struct dispatcher *d, uid_t uid, const char *request_id, const char *decision,
		     bool *ret_accepted, const char **ret_decision)
{
	struct confirm *c = map_get(d->confirms, request_id);
	if (!c || c->uid != uid)
		return -ENOENT;
	static const char *const decisions[] = { "allow", "deny", "always_allow" };
	const char *dec = NULL;
	for (size_t i = 0; i < ELEMENTSOF(decisions); i++)
		if (str_eq(decision, decisions[i]))
			dec = decisions[i];
	if (!dec)
		return -EINVAL;
	if (c->decision) {
		*ret_accepted = false;
		*ret_decision = c->decision;
		return 0;
	}
	struct exec *e = c->exec;
	confirm_settle(d, c, dec);
	*ret_accepted = true;
	*ret_decision = dec;
	if (!e)
		return 0;
	e->confirm = NULL;
	c->exec = NULL;
	tc_timer_stop(e->timer);
	struct resolved_arg r = { c->id, dec };
	event_emit(d->bus, "tool.confirmation_resolved", e->session, e->call_id, e->tool->name,
		   extra_resolved, &r);
	if (dec == decisions[1]) {
		finish(e, outcome_error(TC_USER_DENIED, "The user denied this call of '%s'; it was not run",
					e->tool->name));
		return 0;
	}
	if (dec == decisions[2])
		map_put(e->session->always_allow, e->tool->name, (void *)1);
	enqueue(e);
	return 0;
}

/* Forgets resolved confirmations and expired outcomes. */
static void on_sweep(void *arg)
{
	struct dispatcher *d = arg;
	uint64_t now = tc_now(d->loop);
	idem_expire(d, now);
	while (!list_empty(&d->resolved)) {
		struct confirm *c = list_first(&d->resolved, struct confirm, node);
		if (c->expires > now)
			break;
		list_remove(&c->node);
		map_remove(d->confirms, c->id);
		free(c->id);
		free(c);
	}
	tc_timer_start(d->sweep, 1000);
}

/* --- calls ------------------------------------------------------------- */

bool dispatch_tool_visible(const struct dispatcher *d, const struct session *s, const struct tool *t)
{
	if (!d->policy)
		return true;
	if (map_get(s->always_allow, t->name))
		return true;
	return policy_decide(d->policy, t->name, t->side_effects, s->ws ? s->ws->root : NULL) != CONFIRM_DENY;
}

/* Builds the not_found message with the names the session may call. */
static struct outcome *not_found(struct dispatcher *d, struct session *s, const char *name)
{
	struct buf b = {0};
	buf_printf(&b, "Tool '%s' not found. Available: [", name);
	bool first = true;
	for (size_t i = 0; d->reg && i < d->reg->n; i++) {
		const struct tool *t = d->reg->tools[i];
		if (!dispatch_tool_visible(d, s, t))
			continue;
		buf_printf(&b, "%s%s", first ? "" : ", ", t->name);
		first = false;
	}
	buf_putc(&b, ']');
	struct outcome *o = outcome_new(TC_NOT_FOUND);
	o->message = buf_steal(&b);
	return o;
}

/* Validation errors as one message and as data.errors. */
static struct outcome *invalid_args(const char *tool, const struct schema_errors *errs)
{
	struct buf msg = {0}, data = {0};
	buf_printf(&msg, "Invalid arguments for '%s': ", tool);
	struct jgen *g = jgen_new(&data);
	jgen_obj_open(g);
	jgen_key(g, "errors");
	jgen_arr_open(g);
	for (size_t i = 0; i < errs->n; i++) {
		const struct schema_error *e = &errs->v[i];
		if (i)
			buf_puts(&msg, "; ");
		if (e->path && *e->path)
			buf_printf(&msg, "%s: %s", e->path, e->message);
		else
			buf_puts(&msg, e->message);
		jgen_obj_open(g);
		jgen_kv_str(g, "path", e->path ? e->path : "");
		jgen_kv_str(g, "message", e->message);
		jgen_obj_close(g);
	}
	jgen_arr_close(g);
	jgen_obj_close(g);
	jgen_free(g);
	struct outcome *o = outcome_new(TC_VALIDATION_ERROR);
	o->message = buf_steal(&msg);
	o->error_data = buf_steal(&data);
	return o;
}

static struct outcome *one_invalid(const char *tool, const char *path, const char *fmt, ...) PRINTF(3, 4);
static struct outcome *one_invalid(const char *tool, const char *path, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	char *m = xvasprintf(fmt, ap);
	va_end(ap);
	struct schema_error e = { (char *)path, m };
	struct schema_errors errs = { &e, 1 };
	struct outcome *o = invalid_args(tool, &errs);
	free(m);
	return o;
}

static void extra_invalid(struct jgen *g, void *arg)
{
	const struct outcome *o = arg;
	jgen_kv_str(g, "message", o->message);
}

struct caller *dispatch_call(struct dispatcher *d, struct session *s, const struct call_params *p,
			     const struct caller_ops *ops, void *ctx)
{
	struct caller *c = caller_new(d, s, p, ops, ctx);
	const char *name = p->tool ? p->tool : "";

	struct tool *t = registry_find(d->reg, name);
	if (!t || !dispatch_tool_visible(d, s, t)) {
		if (t && d->policy) {
			fail_now(d, c, name, t, outcome_error(TC_PERMISSION_DENIED,
							      "Tool '%s' is denied by policy", name));
			return NULL;
		}
		fail_now(d, c, name, NULL, not_found(d, s, name));
		return NULL;
	}

	/* Arguments: an object, or JSON text in a string (as OpenAI-style
	 * providers send them). */
	struct json_doc *doc = json_doc_ref(p->doc);
	const struct json *args = p->arguments;
	if (args && args->type == JSON_STRING) {
		struct json_doc *parsed = NULL;
		struct json_err err;
		if (json_parse(args->u.str.s, args->u.str.len, 0, d->cfg.max_json_depth, &parsed, &err) < 0) {
			json_doc_unref(doc);
			struct outcome *o = one_invalid(name, "", "arguments is not valid JSON: %s at byte %zu",
							err.msg, err.offset);
			event_emit(d->bus, "tool.input_invalid", s, NULL, name, extra_invalid, o);
			fail_now(d, c, name, t, o);
			return NULL;
		}
		json_doc_unref(doc);
		doc = parsed;
		args = json_doc_root(parsed);
	} else if (!args || args->type == JSON_NULL) {
		json_doc_unref(doc);
		json_parse("{}", 2, 0, 0, &doc, NULL);
		args = json_doc_root(doc);
	}
	if (args->type != JSON_OBJECT) {
		/* args lives in doc: name its type before letting doc go. */
		struct outcome *o = one_invalid(name, "", "arguments must be an object, got %s",
						json_kind_name(args));
		json_doc_unref(doc);
		event_emit(d->bus, "tool.input_invalid", s, NULL, name, extra_invalid, o);
		fail_now(d, c, name, t, o);
		return NULL;
	}

	struct schema_errors errs = {0};
	if (!schema_validate(t->schema, args, &errs)) {
		json_doc_unref(doc);
		struct outcome *o = invalid_args(name, &errs);
		schema_errors_clear(&errs);
		event_emit(d->bus, "tool.input_invalid", s, NULL, name, extra_invalid, o);
		fail_now(d, c, name, t, o);
		return NULL;
	}

	enum confirm_mode mode = CONFIRM_AUTO;
	if (d->policy && !map_get(s->always_allow, t->name))
		mode = policy_decide(d->policy, t->name, t->side_effects, s->ws ? s->ws->root : NULL);

	/* Paths: when someone will be asked to confirm, the kernel resolves
	 * what exists of them beneath the root now, so an escape is refused
	 * before anyone is asked. Otherwise the tool's own openat2 refuses it
	 * (the same error), and the extra lookup is saved. */
	for (const char *const *pa = t->def->path_args; mode == CONFIRM_PROMPT && pa && *pa && s->ws; pa++) {
		const struct json *v = json_get(args, *pa);
		if (!v || v->type != JSON_STRING)
			continue;
		int r = ws_check(s->ws, v->u.str.s, v->u.str.len);
		if (r < 0 && r != -ENOENT) {
			char *msg = NULL;
			enum tc_kind k = ws_error(r, v->u.str.s, &msg);
			json_doc_unref(doc);
			struct outcome *o = outcome_new(k);
			o->message = msg ? msg : xstrdup("Path refused");
			fail_now(d, c, name, t, o);
			return NULL;
		}
	}

	/* Idempotency. */
	char *key = NULL, *canon = NULL;
	if (p->idempotency_key) {
		key = xasprintf("%u\x1f%s", (unsigned)s->uid, p->idempotency_key);
		struct buf cb = {0};
		json_canonical(args, &cb);
		canon = buf_steal(&cb);
		idem_expire(d, tc_now(d->loop));
		struct idem_entry *ie = map_get(d->idem, key);
		if (ie) {
			if (!str_eq(ie->tool, t->name) || !str_eq(ie->canon, canon)) {
				free(key);
				free(canon);
				json_doc_unref(doc);
				fail_now(d, c, name, t, outcome_error(TC_IDEMPOTENCY_CONFLICT,
					"Idempotency key '%s' was already used with %s; use a new key for a "
					"different call", p->idempotency_key,
					str_eq(ie->tool, t->name) ? "other arguments" : "another tool"));
				return NULL;
			}
			free(key);
			free(canon);
			json_doc_unref(doc);
			if (ie->exec) {
				d->stats.idem_joins++;
				c->exec = ie->exec;
				list_insert_tail(&ie->exec->waiters, &c->node);
				return c;
			}
			d->stats.idem_hits++;
			/* Most recently used goes last. */
			list_remove(&ie->lru);
			list_insert_tail(&d->idem_lru, &ie->lru);
			struct outcome *o = outcome_ref(ie->outcome);
			caller_complete(c, o, true);
			outcome_unref(o);
			return NULL;
		}
	}

	struct tool_state *ts = tool_state(d, t->name);
	uint64_t retry_after = 0;
	bool probe = false;
	if (!circuit_allows(d, ts, tc_now(d->loop), &retry_after, &probe)) {
		free(key);
		free(canon);
		json_doc_unref(doc);
		struct outcome *o = outcome_error(TC_CIRCUIT_OPEN,
			"Tool '%s' failed repeatedly and is paused; retry in %llu ms", t->name,
			(unsigned long long)retry_after);
		o->retry_after_ms = retry_after;
		fail_now(d, c, name, t, o);
		return NULL;
	}

	if ((s->has_budget && s->budget_left <= 0) || p->budget == 0) {
		if (probe)
			ts->probing = false;
		free(key);
		free(canon);
		json_doc_unref(doc);
		fail_now(d, c, name, t, outcome_error(TC_BUDGET_EXCEEDED,
			"No tool calls are left in the budget; the call was not run"));
		return NULL;
	}

	struct exec *e = xcalloc(1, sizeof(*e));
	e->d = d;
	e->tool = tool_ref(t);
	e->ts = ts;
	e->session = session_ref(s);
	e->doc = doc;
	e->args = args;
	e->key = key;
	e->canon = canon;
	e->call_id = new_call_id(d);
	e->state = EX_NEW;
	e->probe = probe;
	list_init(&e->waiters);
	list_init(&e->queue_node);
	list_insert_tail(&d->execs, &e->node);
	e->max_attempts = t->max_attempts ? t->max_attempts : d->cfg.max_attempts;
	if (e->max_attempts == 0)
		e->max_attempts = 1;
	e->budget = p->budget;
	e->timeout_ms = t->timeout_ms;
	if (t->def->timeout_arg) {
		int64_t v;
		if (json_get_int(json_get(args, "timeout_ms"), &v) && v > 0)
			e->timeout_ms = (uint64_t)v;
	}
	if (p->timeout_ms > 0)
		e->timeout_ms = (uint64_t)p->timeout_ms;
	e->start_ms = c->accepted_ms;
	clock_gettime(CLOCK_MONOTONIC, &e->start_ts);
	c->exec = e;
	list_insert_tail(&e->waiters, &c->node);
	if (key) {
		struct idem_entry *ie = xcalloc(1, sizeof(*ie));
		ie->key = xstrdup(key);
		ie->tool = xstrdup(t->name);
		ie->canon = xstrdup(canon);
		ie->exec = e;
		list_init(&ie->lru);
		map_put(d->idem, key, ie);
	}

	if (mode == CONFIRM_DENY) {
		/* Only reachable through always_allow races; kept for safety. */
		finish(e, outcome_error(TC_PERMISSION_DENIED, "Tool '%s' is denied by policy", t->name));
		return NULL;
	}
	/* The caller may be answered inside (a synchronous tool): only hand
	 * it back if it is still waiting. */
	d->watch = c;
	if (mode == CONFIRM_PROMPT)
		ask_confirmation(e);
	else
		enqueue(e);
	bool waiting = d->watch == c;
	d->watch = NULL;
	return waiting ? c : NULL;
}

/* Ends an execution nobody waits for any more. */
static void exec_cancel(struct exec *e, const char *why)
{
	if (e->state == EX_DONE)
		return;
	char *command = attempt_command(e);
	abandon_attempt(e);
	if (e->confirm) {
		struct confirm *c = e->confirm;
		e->confirm = NULL;
		c->exec = NULL;
		confirm_settle(e->d, c, "cancelled");
	}
	struct outcome *o = outcome_error(TC_CANCELLED, "%s", why);
	o->command = command;
	finish(e, o);
}

static void cancel_caller(struct caller *c, bool respond, const char *why)
{
	struct exec *e = c->exec;
	list_remove(&c->node);
	c->exec = NULL;
	if (respond) {
		struct outcome *o = outcome_error(TC_CANCELLED, "%s", why);
		o->call_id = xstrdup(e ? e->call_id : "");
		o->tool = xstrdup(e ? e->tool->name : "");
		if (e) {
			o->attempts = e->attempts;
			o->duration_ms = tc_now(c->d->loop) - e->start_ms;
			o->side_effects = e->tool->side_effects;
		}
		caller_complete(c, o, false);
		outcome_unref(o);
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

unsigned dispatch_abandoned(const struct dispatcher *d)
{
	return d->abandoned;
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
	d->idem = map_new();
	d->tools = map_new();
	d->confirms = map_new();
	list_init(&d->idem_lru);
	list_init(&d->resolved);
	list_init(&d->queue);
	list_init(&d->execs);
	list_init(&d->callers);
	if (getrandom(&d->boot, sizeof(d->boot), GRND_NONBLOCK) != sizeof(d->boot))
		d->boot = wall_ms() ^ ((uint64_t)getpid() << 40);
	d->sweep = tc_timer_new(loop, on_sweep, d);
	tc_timer_start(d->sweep, 1000);
	return d;
}

struct dispatcher *dispatcher_free(struct dispatcher *d)
{
	if (!d)
		return NULL;
	dispatch_cancel_all(d, "toolcalld is shutting down");
	while (!list_empty(&d->idem_lru))
		idem_entry_free(d, list_first(&d->idem_lru, struct idem_entry, lru));
	while (!list_empty(&d->resolved)) {
		struct confirm *c = list_first(&d->resolved, struct confirm, node);
		list_remove(&c->node);
		map_remove(d->confirms, c->id);
		free(c->id);
		free(c);
	}
	size_t it = 0;
	void *v;
	while (map_next(d->tools, &it, NULL, &v))
		free(v);
	map_free(d->tools);
	map_free(d->idem);
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
	pump(d);
}

void dispatch_set_policy(struct dispatcher *d, const struct policy_config *policy) { d->policy = policy; }
void dispatch_set_env(struct dispatcher *d, const struct tool_env *env) { d->env = env; }
void dispatch_set_audit(struct dispatcher *d, struct audit *audit) { d->audit = audit; }
struct registry *dispatch_registry(const struct dispatcher *d) { return d->reg; }
struct event_bus *dispatch_bus(const struct dispatcher *d) { return d->bus; }

void dispatch_set_registry(struct dispatcher *d, struct registry *r)
{
	registry_unref(d->reg);
	d->reg = registry_ref(r);
}

void dispatch_write_stats(struct dispatcher *d, struct jgen *g)
{
	jgen_kv_int(g, "inFlight", dispatch_inflight(d));
	jgen_kv_int(g, "running", d->running);
	unsigned queued = 0;
	struct list *pos;
	for (pos = d->queue.next; pos != &d->queue; pos = pos->next)
		queued++;
	jgen_kv_int(g, "queued", queued);
	jgen_kv_int(g, "calls", (int64_t)d->stats.calls);
	jgen_kv_int(g, "attempts", (int64_t)d->stats.attempts);
	jgen_kv_int(g, "retries", (int64_t)d->stats.retries);
	jgen_key(g, "errors");
	jgen_obj_open(g);
	for (int k = 1; k < TC_KIND_MAX; k++)
		if (d->stats.errors[k])
			jgen_kv_int(g, tc_kind_name(k), (int64_t)d->stats.errors[k]);
	jgen_obj_close(g);
	jgen_key(g, "idempotency");
	jgen_obj_open(g);
	jgen_kv_int(g, "entries", (int64_t)map_size(d->idem));
	jgen_kv_int(g, "hits", (int64_t)d->stats.idem_hits);
	jgen_kv_int(g, "joins", (int64_t)d->stats.idem_joins);
	jgen_obj_close(g);
	jgen_key(g, "events");
	jgen_obj_open(g);
	jgen_kv_int(g, "emitted", (int64_t)d->bus->emitted);
	jgen_kv_int(g, "dropped", (int64_t)d->bus->dropped);
	jgen_obj_close(g);
	if (d->audit) {
		jgen_key(g, "audit");
		jgen_obj_open(g);
		jgen_kv_int(g, "lines", (int64_t)audit_lines(d->audit));
		jgen_kv_int(g, "lost", (int64_t)audit_lost(d->audit));
		jgen_obj_close(g);
	}
	jgen_key(g, "tools");
	jgen_obj_open(g);
	size_t it = 0;
	const char *name;
	void *v;
	while (map_next(d->stats.tools, &it, &name, &v)) {
		struct tool_stats *t = v;
		jgen_key(g, name);
		jgen_obj_open(g);
		jgen_kv_int(g, "calls", (int64_t)t->calls);
		uint64_t errors = 0;
		for (int k = 1; k < TC_KIND_MAX; k++)
			errors += t->errors[k];
		jgen_kv_int(g, "errors", (int64_t)errors);
		jgen_key(g, "errorsByKind");
		jgen_obj_open(g);
		for (int k = 1; k < TC_KIND_MAX; k++)
			if (t->errors[k])
				jgen_kv_int(g, tc_kind_name(k), (int64_t)t->errors[k]);
		jgen_obj_close(g);
		jgen_key(g, "latencyMs");
		jgen_obj_open(g);
		jgen_key(g, "p50");
		jgen_double(g, (double)stats_percentile(t, 0.50) / 1000.0);
		jgen_key(g, "p99");
		jgen_double(g, (double)stats_percentile(t, 0.99) / 1000.0);
		jgen_obj_close(g);
		struct tool_state *ts = map_get(d->tools, name);
		if (ts) {
			jgen_kv_str(g, "circuit", !ts->open ? "closed" : ts->probing ? "half-open" : "open");
			jgen_kv_int(g, "running", ts->running);
		}
		jgen_obj_close(g);
	}
	jgen_obj_close(g);
}
