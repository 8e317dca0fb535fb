/* SPDX-License-Identifier: MIT */
/*
 * Confirmation requests: asked (with the whole input and the paths it
 * names as they resolve, symlinks shown with their targets, and the diff
 * it would make, all seen with the rights the call will have), resolved
 * by an approver, timed out, failed when the approvers leave, replayed to
 * a late subscriber, and kept after being settled so that the first
 * answer wins.
 *
 * The engine calls in; this file calls none of the engine's functions. What
 * it decides about an execution goes back as a result (confirm_ask,
 * confirm_timed_out) or, when an approver's answer or departure decides,
 * through the reports the engine handed in (struct confirm_reports): the
 * engine alone finishes, queues and times executions.
 */
#include "lib/dispatch/dispatch_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "lib/events.h"
#include "lib/fsjob/fsjob.h"
#include "lib/files/identity.h"
#include "lib/base/map.h"
#include "lib/session.h"
#include "lib/files/workspace.h"
#include "lib/files/workspace_internal.h"
#include "proto/json.h"

struct confirm {
	char *id;
	char **files;			/* the projected files, as they resolved when asked */
	size_t n_files;
	struct exec *exec;		/* NULL once the exec no longer waits */
	uid_t uid;
	const char *decision;		/* NULL while pending */
	char *diff;			/* what the call would change (tool_def.preview), or NULL */
	bool elicited;			/* the calling client was asked too (MCP elicitation) */
	uint64_t expires;		/* resolved records are kept a while for "first write wins" */
	int64_t held;			/* bytes charged to the uid while open */
	struct list node;		/* d->resolved */
};

uint64_t confirm_timeout_ms(const struct dispatcher *d)
{
	return d->policy ? d->policy->timeout_ms : POLICY_CONFIRM_TIMEOUT_MS;
}

/* Whether a confirmation with no approver connected waits for one. */
static bool no_approver_wait(const struct dispatcher *d)
{
	return d->policy && d->policy->no_approver_wait;
}

/* Frees what only an open request shows (its files and diff): a settled
 * one is kept for its decision. */
static void confirm_shed(struct confirm *c)
{
	for (size_t i = 0; i < c->n_files; i++)
		free(c->files[i]);
	free(c->files);
	free(c->diff);
	c->files = NULL;
	c->n_files = 0;
	c->diff = NULL;
}

static void confirm_free(struct confirm *c)
{
	confirm_shed(c);
	free(c->id);
	free(c);
}

void dispatch_set_confirm_other(struct dispatcher *d, const struct confirm_other_ops *ops, void *arg)
{
	d->other = ops;
	d->other_arg = arg;
}

/* The execution of call call_id still running, or NULL. */
static struct exec *exec_of_call(struct dispatcher *d, const char *call_id)
{
	for (struct list *pos = d->execs.next; call_id && pos != &d->execs; pos = pos->next) {
		struct exec *e = list_entry(pos, struct exec, node);
		if (e->state != EX_DONE && str_eq(e->call_id, call_id))
			return e;
	}
	return NULL;
}

bool dispatch_ask_call(struct dispatcher *d, const char *call_id, const struct confirm_question *q)
{
	struct exec *e = exec_of_call(d, call_id);
	return e && d->reports->ask_callers(e, q);
}

void dispatch_withdraw_call(struct dispatcher *d, const char *call_id, const char *request_id)
{
	struct exec *e = exec_of_call(d, call_id);
	if (e)
		d->reports->withdraw_callers(e, request_id);
}

void dispatch_set_confirm_charge(struct dispatcher *d, confirm_charge_fn charge, void *arg)
{
	d->confirm_charge = charge;
	d->confirm_charge_arg = arg;
}

/* What an open request holds, as its uid is charged for it: the input as
 * its canonical text (a parsed tree takes about as much again), the files
 * and the diff. */
static int64_t confirm_bytes(const struct confirm *c, const struct exec *e)
{
	_cleanup_(buf_free) struct buf b = {0};
	json_canonical(e->args, &b);
	int64_t n = (int64_t)(2 * buf_size(&b) + sizeof(*c));
	for (size_t i = 0; i < c->n_files; i++)
		n += (int64_t)strlen(c->files[i]) + 1;
	if (c->diff)
		n += (int64_t)strlen(c->diff) + 1;
	return n;
}

/* Gives back what an open request held to its uid's account. */
static void confirm_release(struct dispatcher *d, struct confirm *c)
{
	if (c->held && d->confirm_charge)
		d->confirm_charge(d->confirm_charge_arg, c->uid, -c->held);
	c->held = 0;
}

/* Where path leads inside the workspace once its symlinks are followed,
 * or NULL when that is not known (it leads out: the call will be refused).
 * For a file not there yet, its directory resolved and its name; for a
 * dangling symlink, the link's own text (the file a write would create). */
static char *resolved_target(const struct workspace *ws, const char *path, size_t len)
{
	int fd;
	if (ws_openat(ws, path, len, O_PATH, 0, &fd) == 0) {
		char *rel = ws_fd_relative(ws, fd);
		close(fd);
		return rel;
	}
	_cleanup_free_ char *name = NULL;
	if (ws_open_parent(ws, path, len, false, &fd, &name) < 0)
		return NULL;
	_cleanup_close_ int dirfd = fd;
	char link[PATH_MAX];
	ssize_t k = readlinkat(dirfd, name, link, sizeof(link) - 1);
	if (k > 0)
		return xstrndup(link, (size_t)k);
	_cleanup_free_ char *dir = ws_fd_relative(ws, dirfd);
	if (!dir)
		return NULL;
	return str_eq(dir, ".") ? xstrdup(name) : xasprintf("%s/%s", dir, name);
}

/* The file as the approver should see it: "NOTES.md -> .git/config" when
 * a symlink on the way leads elsewhere in the workspace. */
static char *projected_file(const struct workspace *ws, const char *path, size_t len)
{
	char *disp = ws_display_path(ws, path, len);
	_cleanup_free_ char *target = resolved_target(ws, path, len);
	if (!target || str_eq(target, disp))
		return disp;
	char *shown = xasprintf("%s -> %s", disp, target);
	free(disp);
	return shown;
}

/* Lists the paths the call names; resolved (symlinks shown with their
 * targets) unless plain. */
static void project_files(struct confirm *c, const struct exec *e, bool plain)
{
	if (!e->session->ws)
		return;
	for (const char *const *p = e->tool->def->path_args; p && *p; p++) {
		const struct json *v = json_get(e->args, *p);
		if (!v || v->type != JSON_STRING)
			continue;
		c->files = xreallocarray(c->files, c->n_files + 1, sizeof(*c->files));
		c->files[c->n_files++] = plain ? ws_display_path(e->session->ws, v->u.str.s, v->u.str.len)
					       : projected_file(e->session->ws, v->u.str.s, v->u.str.len);
	}
}

struct inspection {
	struct confirm *c;
	const struct exec *e;
};

/* Looks at what the call would touch: its files as they resolve and the
 * change it would make (tool_def.preview). */
static int inspect(void *arg)
{
	struct inspection *in = arg;
	const struct exec *e = in->e;
	project_files(in->c, e, false);
	if (e->tool->def->preview && e->session->ws)
		in->c->diff = fsjob_preview(e->tool->def, e->args, e->session->ws);
	return 0;
}

/* Inspects the call once, when it is asked, with the rights it will run
 * with: as the peer when its work takes the peer's identity, so the
 * request shows no file, diff or symlink target the peer may not see.
 * When that cannot be done, the paths are shown as named, unresolved. */
static void inspect_call(struct confirm *c, const struct exec *e)
{
	struct inspection in = { c, e };
	const struct identity *id = session_identity(e->session);
	if (!id || !id->change)
		inspect(&in);
	else if (identity_run(id, inspect, &in) < 0)
		project_files(c, e, true);
}

struct confirm_arg {
	struct exec *e;
};

/* Writes the members of tool.confirmation_requested. */
static void extra_confirm(struct jgen *g, void *arg)
{
	struct exec *e = ((struct confirm_arg *)arg)->e;
	jgen_kv_str(g, "requestId", e->confirm->id);
	jgen_kv_str(g, "kind", "tool");
	jgen_kv_str(g, "sideEffect", side_effect_name(e->tool->side_effects));
	/* The whole input, never a prefix: it came in one message, so it
	 * fits in one (limits.max_message_bytes). */
	_cleanup_(buf_free) struct buf b = {0};
	json_canonical(e->args, &b);
	jgen_key(g, "input");
	jgen_strn(g, buf_head(&b), buf_size(&b));
	jgen_key(g, "files");
	jgen_arr_open(g);
	for (size_t i = 0; i < e->confirm->n_files; i++)
		jgen_str(g, e->confirm->files[i]);
	jgen_arr_close(g);
	if (e->confirm->diff)
		jgen_kv_str(g, "diff", e->confirm->diff);
	jgen_kv_int(g, "timeoutMs", (int64_t)confirm_timeout_ms(e->d));
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

/* Records the decision and keeps the request a while for later answers. */
static void confirm_settle(struct dispatcher *d, struct confirm *c, const char *decision)
{
	c->decision = decision;
	confirm_shed(c);
	c->expires = tc_now(d->loop) + MAX(d->cfg.idem_ttl_ms, 60000);
	list_insert_tail(&d->resolved, &c->node);
	d->reports->kept(d);
}

/* Unties e from its open request: the session has one pending less. */
static struct confirm *untie(struct exec *e)
{
	struct confirm *c = e->confirm;
	e->confirm = NULL;
	c->exec = NULL;
	e->session->confirming--;
	confirm_release(e->d, c);
	return c;
}

/* Unties e from its request, settles it with decision and tells the
 * subscribers (approvers take the question down), and the client asked
 * (its question is withdrawn; a no-op when its answer settled it). */
static struct confirm *confirm_detach(struct exec *e, const char *decision)
{
	struct dispatcher *d = e->d;
	struct confirm *c = untie(e);
	confirm_settle(d, c, decision);
	if (c->elicited) {
		c->elicited = false;
		d->reports->withdraw_callers(e, c->id);
	}
	struct resolved_arg r = { c->id, decision };
	event_emit(d->bus, "tool.confirmation_resolved", e->session, e->call_id, e->tool->name,
		   extra_resolved, &r);
	return c;
}

/* Settles the request of a call nobody answered with decision (subscribers
 * are told) and returns o, the outcome that ends the call. */
static struct outcome *confirm_unanswered(struct exec *e, const char *decision, struct outcome *o)
{
	confirm_detach(e, decision);
	return o;
}

struct outcome *confirm_timed_out(struct exec *e)
{
	return confirm_unanswered(e, "timeout", outcome_error(TC_CONFIRMATION_TIMEOUT,
		"Nobody answered the confirmation request for '%s' within %llu ms; the call was not run",
		e->tool->name, (unsigned long long)confirm_timeout_ms(e->d)));
}

/* The client of e's first caller that could be asked was not (or gave no
 * answer): the outcome that ends e when no approver sees its request
 * either, else NULL (it waits for them). */
static struct outcome *elicit_failed(struct confirm *c)
{
	struct dispatcher *d = c->exec->d;
	struct exec *e = c->exec;
	c->elicited = false;
	if (no_approver_wait(d) || event_has_subscriber(d->bus, "tool.confirmation_requested", e->session))
		return NULL;
	return confirm_unanswered(e, "deny", outcome_error(TC_USER_DENIED,
		"Tool '%s' needs confirmation and the user was asked but gave no answer (or the client could "
		"not ask), so the call was not run", e->tool->name));
}

struct outcome *confirm_ask(struct exec *e)
{
	struct dispatcher *d = e->d;
	bool elicit = d->reports->ask_callers(e, NULL);
	if (!no_approver_wait(d) && !elicit &&
	    !event_has_subscriber(d->bus, "tool.confirmation_requested", e->session)) {
		return outcome_error(TC_USER_DENIED,
				     "Tool '%s' (side effect: %s) needs confirmation and no approver is "
				     "connected, so the call was not run. To approve calls, run "
				     "'toolcallctl approve' (or subscribe to tool.confirmation_requested "
				     "and answer with confirmations/resolve), or set the tool to \"auto\" "
				     "in the confirmation policy", e->tool->name,
				     side_effect_name(e->tool->side_effects));
	}
	/* Each pending request holds the call's arguments: bounded per
	 * session. (Waiting for an answer holds no concurrency slot: the
	 * call queues for one once it is allowed.) */
	if (e->session->confirming >= d->cfg.session_confirmations)
		return outcome_error(TC_OVERLOADED,
				     "Too many calls of this session wait for confirmation (limit %u); "
				     "answer or cancel some, then retry", d->cfg.session_confirmations);
	struct confirm *c = xcalloc(1, sizeof(*c));
	c->id = xasprintf("cf-%08llx-%016llx", (unsigned long long)(d->boot >> 32),
			  (unsigned long long)id_hide(++d->counter, d->id_key));
	c->exec = e;
	c->uid = e->session->uid;
	/* Computed once: every approver sees the change as it was asked. */
	inspect_call(c, e);
	/* Counted against the uid's memory (limits.per_uid_memory): a uid
	 * with many large requests open is refused, not another. */
	int64_t held = confirm_bytes(c, e);
	if (d->confirm_charge && d->confirm_charge(d->confirm_charge_arg, c->uid, held) < 0) {
		confirm_free(c);
		return outcome_error(TC_OVERLOADED,
				     "The calls of this user that wait for confirmation, with its connections, "
				     "hold more memory than limits.per_uid_memory allows; answer or cancel some, "
				     "then retry");
	}
	c->held = held;
	e->confirm_seq = d->counter;
	list_init(&c->node);
	map_put(d->confirms, c->id, c);
	e->confirm = c;
	e->session->confirming++;
	e->state = EX_CONFIRMING;
	struct confirm_arg ca = { e };
	event_emit(d->bus, "tool.confirmation_requested", e->session, e->call_id, e->tool->name,
		   extra_confirm, &ca);
	if (elicit) {
		_cleanup_(buf_free) struct buf in = {0};
		json_canonical(e->args, &in);
		const struct confirm_question q = { c->id, e->tool->name, side_effect_name(e->tool->side_effects),
						    buf_head(&in), buf_size(&in), c->files, c->n_files, c->diff,
						    confirm_timeout_ms(d), NULL };
		c->elicited = d->reports->ask_callers(e, &q);
		if (!c->elicited)
			return elicit_failed(c);	/* maybe nobody else sees it */
	}
	return NULL;
}

void dispatch_elicit_failed(struct dispatcher *d, const char *request_id)
{
	struct confirm *c = map_get(d->confirms, request_id);
	if (!c && d->other && d->other->elicit_failed)
		d->other->elicit_failed(d->other_arg, request_id);
	if (!c || !c->exec || c->decision)
		return;
	struct exec *e = c->exec;
	struct outcome *o = elicit_failed(c);
	if (o)
		d->reports->decided(e, o);
}

void confirm_cancel(struct exec *e)
{
	if (e->confirm)
		confirm_detach(e, "cancelled");
}

void confirm_forget(struct exec *e)
{
	if (!e->confirm)
		return;
	struct confirm *c = untie(e);
	if (!c->decision) {
		/* Nobody can answer it any more. */
		map_remove(e->d->confirms, c->id);
		confirm_free(c);
	}
}

/* The executions whose requests are open (and, with unseen, that no
 * approver can see any more), in a new array of *ret_n. */
static struct exec **open_requests(struct dispatcher *d, bool unseen, size_t *ret_n)
{
	struct exec **v = NULL;
	size_t n = 0, it = 0;
	void *x;
	while (map_next(d->confirms, &it, NULL, &x)) {
		struct confirm *c = x;
		if (!c->exec || c->decision)
			continue;
		if (unseen && (c->elicited || event_has_subscriber(d->bus, "tool.confirmation_requested",
								       c->exec->session)))
			continue;
		v = xreallocarray(v, n + 1, sizeof(*v));
		v[n++] = c->exec;
	}
	*ret_n = n;
	return v;
}

void dispatch_approvers_left(struct dispatcher *d)
{
	if (d->other && d->other->approvers_left)
		d->other->approvers_left(d->other_arg);
	if (no_approver_wait(d))
		return;
	/* Collected first: finishing one changes the map. */
	size_t n;
	_cleanup_free_ struct exec **left = open_requests(d, true, &n);
	for (size_t i = 0; i < n; i++)
		d->reports->decided(left[i], confirm_unanswered(left[i], "deny", outcome_error(TC_USER_DENIED,
			"Tool '%s' needs confirmation and the approver left without answering, so the call "
			"was not run. To approve calls, run 'toolcallctl approve' (or subscribe to "
			"tool.confirmation_requested and answer with confirmations/resolve)", left[i]->tool->name)));
}

void dispatch_replay_confirmations(struct dispatcher *d, struct subscriber *sub)
{
	size_t n;
	_cleanup_free_ struct exec **open = open_requests(d, false, &n);
	/* In the order they were asked. */
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
	if (d->other && d->other->replay)
		d->other->replay(d->other_arg, sub);
}

int confirm_answer(const char *decided, const char *decision, bool *ret_accepted, const char **ret_decision,
		   enum confirm_choice *ret_which)
{
	static const char *const names[] = {
		[ANSWER_ALLOW] = "allow",
		[ANSWER_DENY] = "deny",
		[ANSWER_ALWAYS_ALLOW] = "always_allow",
	};
	size_t i = 0;
	while (i < ELEMENTSOF(names) && !str_eq(decision, names[i]))
		i++;
	if (i == ELEMENTSOF(names))
		return -EINVAL;
	if (decided) {
		*ret_accepted = false;
		*ret_decision = decided;
		return 1;
	}
	*ret_accepted = true;
	*ret_decision = names[i];
	*ret_which = (enum confirm_choice)i;
	return 0;
}

int dispatch_resolve(struct dispatcher *d, uid_t uid, const char *request_id, const char *decision,
		     bool *ret_accepted, const char **ret_decision)
{
	struct confirm *c = map_get(d->confirms, request_id);
	if (!c && d->other && d->other->resolve)
		return d->other->resolve(d->other_arg, uid, request_id, decision, ret_accepted, ret_decision);
	if (!c || c->uid != uid)
		return -ENOENT;
	enum confirm_choice which;
	int r = confirm_answer(c->decision, decision, ret_accepted, ret_decision, &which);
	if (r != 0)
		return r < 0 ? r : 0;
	const char *dec = *ret_decision;
	struct exec *e = c->exec;
	if (!e) {
		confirm_settle(d, c, dec);
		return 0;
	}
	confirm_detach(e, dec);
	if (which == ANSWER_DENY) {
		d->reports->decided(e, outcome_error(TC_USER_DENIED, "The user denied this call of '%s'; it was not run",
						     e->tool->name));
		return 0;
	}
	if (which == ANSWER_ALWAYS_ALLOW)
		map_put(e->session->always_allow, e->tool->name, (void *)1);
	d->reports->decided(e, NULL);
	return 0;
}

void confirm_sweep(struct dispatcher *d, uint64_t now)
{
	while (!list_empty(&d->resolved)) {
		struct confirm *c = list_first(&d->resolved, struct confirm, node);
		if (c->expires > now)
			break;
		list_remove(&c->node);
		map_remove(d->confirms, c->id);
		confirm_free(c);
	}
}

uint64_t confirm_next_expiry(struct dispatcher *d)
{
	const struct confirm *c = list_first(&d->resolved, struct confirm, node);
	return c ? c->expires : 0;
}

void confirm_clear(struct dispatcher *d)
{
	while (!list_empty(&d->resolved)) {
		struct confirm *c = list_first(&d->resolved, struct confirm, node);
		list_remove(&c->node);
		map_remove(d->confirms, c->id);
		confirm_free(c);
	}
}
