/* SPDX-License-Identifier: MIT */
/*
 * Admission steps of a call: find the tool (or list those the session may
 * call), refuse while the audit log is down (on_error "refuse"), parse and
 * validate the arguments (every schema error in one message and as
 * data.errors), decide the confirmation mode, check paths, look up the
 * idempotency key, ask the circuit, check the budget. Which tools a session
 * may see (dispatch_tool_visible()) is decided here too, so admission asks
 * nothing of the rest of the engine but the uid's state (dispatch_fair.c).
 */
#include "lib/dispatch/dispatch_internal.h"

#include <errno.h>
#include <stdarg.h>

#include "lib/base/audit.h"
#include "lib/events.h"
#include "lib/files/identity.h"
#include "lib/base/map.h"
#include "lib/registry.h"
#include "lib/schema/schema.h"
#include "lib/session.h"
#include "lib/files/workspace.h"
#include "lib/files/workspace_internal.h"
#include "proto/json.h"

/* The engine's state of a tool, made on first use. */
static struct tool_state *tool_state(struct dispatcher *d, const char *name)
{
	struct tool_state *ts = map_get(d->tools, name);
	if (!ts) {
		ts = xcalloc(1, sizeof(*ts));
		list_init(&ts->parked);
		map_put(d->tools, name, ts);
	}
	return ts;
}

/* The workspace root the confirmation policy judges s by: its primary,
 * or NULL (trusted by no entry) when any other root of its group is not
 * trusted, so a trusted primary does not vouch for the rest. */
static const char *policy_root(const struct dispatcher *d, const struct session *s)
{
	const char *roots[WS_GROUP_MAX + 1];
	if (!s->ws || !ws_group_roots(s->ws, roots, WS_GROUP_MAX + 1))
		return NULL;
	for (size_t i = 1; roots[i]; i++)
		if (!policy_workspace_trusted(d->policy, roots[i]))
			return NULL;
	return roots[0];
}

/* Whether s may see and call t: not hidden by its session, and not denied
 * by the confirmation policy (tools/list and not_found list these). */
bool dispatch_tool_visible(const struct dispatcher *d, const struct session *s, const struct tool *t)
{
	if (session_hides_tool(s, t->name))
		return false;
	if (!d->policy)
		return true;
	if (map_get(s->always_allow, t->name))
		return true;
	return policy_decide(d->policy, t->name, t->side_effects, policy_root(d, s)) != CONFIRM_DENY;
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
	_cleanup_free_ char *m = xvasprintf(fmt, ap);
	va_end(ap);
	struct schema_error e = { (char *)path, m };
	struct schema_errors errs = { &e, 1 };
	return invalid_args(tool, &errs);
}

static void extra_invalid(struct jgen *g, void *arg)
{
	const struct outcome *o = arg;
	jgen_kv_str(g, "message", o->message);
}

void admit_clear(struct admission *a)
{
	json_doc_unref(a->doc);
	free(a->key);
	free(a->canon);
}

/* Finds the tool the session may call. */
struct outcome *admit_find_tool(struct dispatcher *d, struct session *s, struct admission *a)
{
	a->t = registry_find(d->reg, a->name);
	if (a->t && dispatch_tool_visible(d, s, a->t))
		return NULL;
	if (a->t && d->policy && !session_hides_tool(s, a->name))
		return outcome_error(TC_PERMISSION_DENIED, "Tool '%s' is denied by policy", a->name);
	a->t = NULL;
	return not_found(d, s, a->name);
}

struct outcome *admit_check_audit(struct dispatcher *d)
{
	if (!audit_refusing(d->audit))
		return NULL;
	return outcome_error(TC_INTERNAL, "The audit log cannot be written and audit.on_error is \"refuse\", "
			     "so no call runs until it can be written again; the call was not run");
}

/* Takes the arguments: an object, or JSON text in a string (as
 * OpenAI-style providers send them); none is {}. */
struct outcome *admit_parse_arguments(struct dispatcher *d, const struct call_params *p,
				      struct admission *a)
{
	a->doc = json_doc_ref(p->doc);
	a->args = p->arguments;
	if (a->args && a->args->type == JSON_STRING) {
		struct json_doc *parsed = NULL;
		struct json_err err;
		if (json_parse(a->args->u.str.s, a->args->u.str.len, 0, d->cfg.max_json_depth, &parsed,
			       &err) < 0)
			return one_invalid(a->name, "", "arguments is not valid JSON: %s at byte %zu",
					   err.msg, err.offset);
		json_doc_unref(a->doc);
		a->doc = parsed;
		a->args = json_doc_root(parsed);
	} else if (!a->args || a->args->type == JSON_NULL) {
		json_doc_unref(a->doc);
		a->doc = NULL;
		json_parse("{}", 2, 0, 0, &a->doc, NULL);
		a->args = json_doc_root(a->doc);
	}
	if (a->args->type != JSON_OBJECT)
		return one_invalid(a->name, "", "arguments must be an object, got %s",
				   json_kind_name(a->args));
	return NULL;
}

/* Checks the arguments against the tool's schema. */
struct outcome *admit_validate_arguments(struct admission *a)
{
	struct schema_errors errs = {0};
	if (schema_validate(a->t->schema, a->args, &errs))
		return NULL;
	struct outcome *o = invalid_args(a->name, &errs);
	schema_errors_clear(&errs);
	return o;
}

/* Applies the confirmation policy (always_allow wins for the session);
 * "sandboxed" becomes auto or prompt by what the call will run under, and
 * prompt for a write to a protected path. */
void admit_decide_confirmation(struct dispatcher *d, struct session *s, struct admission *a)
{
	a->mode = CONFIRM_AUTO;
	if (!d->policy || map_get(s->always_allow, a->t->name))
		return;
	const struct sandbox_config *sb = d->env ? d->env->sandbox : NULL;
	enum confirm_mode m = policy_decide(d->policy, a->t->name, a->t->side_effects, policy_root(d, s));
	a->mode = policy_settle_sandboxed(m, a->t, sb);
	if (m == CONFIRM_SANDBOXED && a->mode == CONFIRM_AUTO && policy_writes_protected(a->t, a->args, s->ws, sb, session_identity(s)))
		a->mode = CONFIRM_PROMPT;
}

struct path_check {
	const struct workspace *ws;
	const char *path;
	size_t len;
};

/* As the peer (identity_run()): the lookup itself. */
static int check_as(void *arg)
{
	const struct path_check *c = arg;
	return ws_check(c->ws, c->path, c->len);
}

/* Paths: when someone will be asked to confirm, the kernel resolves what
 * exists of them beneath the root now, so an escape is refused before
 * anyone is asked. Otherwise the tool's own openat2 refuses it (the same
 * error), and the extra lookup is saved. The lookup is the peer's: what
 * lies beneath a directory it may not search (a symlink leading out, say)
 * is not told to it. */
struct outcome *admit_check_paths(struct session *s, const struct admission *a)
{
	if (a->mode != CONFIRM_PROMPT || !s->ws)
		return NULL;
	const struct identity *id = session_identity(s);
	for (const char *const *pa = a->t->def->path_args; pa && *pa; pa++) {
		const struct json *v = json_get(a->args, *pa);
		if (!v || v->type != JSON_STRING)
			continue;
		struct path_check c = { s->ws, v->u.str.s, v->u.str.len };
		int r = id && id->change ? identity_run(id, check_as, &c) : check_as(&c);
		if (r < 0 && r != -ENOENT) {
			char *msg = NULL;
			struct outcome *o = outcome_new(ws_error(r, v->u.str.s, &msg));
			o->message = msg ? msg : xstrdup("Path refused");
			return o;
		}
	}
	return NULL;
}

/* Looks the call's idempotency key up: the entry it names, or NULL for a
 * new key (a->key and a->canon are set either way). */
struct idem_entry *admit_find_keyed(struct dispatcher *d, struct session *s, const char *client_key,
				    struct admission *a)
{
	a->key = idem_key(s->uid, client_key);
	struct buf cb = {0};
	json_canonical(a->args, &cb);
	a->canon = buf_steal(&cb);
	return idem_find(&d->idem, a->key);
}

/* The circuit of tool name for the uid, made on first use. */
static struct circuit *circuit_of(struct uid_state *u, const char *name)
{
	struct circuit *c = map_get(u->circuits, name);
	if (!c) {
		c = xcalloc(1, sizeof(*c));
		map_put(u->circuits, name, c);
	}
	return c;
}

/* Asks the circuit of the tool for the session's uid whether the call may
 * run: one uid's failures never pause a tool for another. */
struct outcome *admit_check_circuit(struct dispatcher *d, struct session *s, struct admission *a)
{
	a->ts = tool_state(d, a->t->name);
	a->us = fair_uid(d, s->uid);
	a->circuit = circuit_of(a->us, a->t->name);
	uint64_t retry_after = 0;
	if (circuit_allows(a->circuit, &d->cfg, tc_now(d->loop), &retry_after, &a->probe))
		return NULL;
	struct outcome *o = outcome_error(TC_CIRCUIT_OPEN,
		"Tool '%s' failed repeatedly and is paused; retry in %llu ms", a->t->name,
		(unsigned long long)retry_after);
	o->retry_after_ms = retry_after;
	return o;
}

/* Refuses a call when no budget is left for its first attempt. */
struct outcome *admit_check_budget(struct session *s, const struct call_params *p, struct admission *a)
{
	if (!(s->has_budget && s->budget_left <= 0) && p->budget != 0)
		return NULL;
	if (a->probe)
		circuit_probe_abort(a->circuit);
	return outcome_error(TC_BUDGET_EXCEEDED, "No tool calls are left in the budget; the call was not run");
}


void admit_report_invalid(struct dispatcher *d, struct session *s, const char *name, const struct outcome *o)
{
	event_emit(d->bus, "tool.input_invalid", s, NULL, name, extra_invalid, (void *)o);
}
