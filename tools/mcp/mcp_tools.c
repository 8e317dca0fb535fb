/* SPDX-License-Identifier: MIT */
/*
 * The tools an MCP provider offers: the "mcp" tool kind (a call queued for
 * the server, sent once it is initialized, the server started when it is
 * not running; a cancel told to it) and the registration of the imported
 * tools under the prefix, with the file's settings and overrides applied.
 */
#include <stdio.h>
#include <string.h>

#include "lib/registry.h"
#include "tools/mcp/mcp_internal.h"

static void mcp_tool_free(void *priv)
{
	struct mcp_tool *mt = priv;
	mcp_provider_unref(mt->p);
	free(mt->remote);
	free(mt);
}

static enum tool_ret mcp_exec(struct tool_call *c)
{
	struct mcp_tool *mt = c->tool->priv;
	/* The instance that serves the caller (one per peer uid, for a root
	 * daemon, unless the file names whom it runs as). */
	struct mcp_provider *p = mcp_runner_for(mt->p, c->ident);
	if (!p) {
		tool_call_fail(c, TC_PERMISSION_DENIED, "MCP server '%s' runs as the calling peer, and the caller "
			       "is not known", mt->p->name);
		return TOOL_DONE;
	}
	/* A start that failed a moment ago is not tried again: its reason. */
	if (!p->child && mcp_start_refused(p)) {
		tool_call_fail(c, p->refused ? TC_PERMISSION_DENIED : TC_TRANSIENT, "%s", p->error);
		return TOOL_DONE;
	}
	struct mcp_call *mc = xcalloc(1, sizeof(*mc));
	mc->tc = c;
	mc->p = p;
	mc->remote = xstrdup(mt->remote);
	list_init(&mc->node);
	c->state = mc;
	list_insert_tail(&p->queued, &mc->node);
	mcp_instance_touch(p);
	if (!p->child)
		mcp_provider_start(p);	/* may fail the call at once */
	else if (p->initialized)
		mcp_send_call(p, mc);
	return TOOL_PENDING;
}

static void mcp_cancel(struct tool_call *c)
{
	struct mcp_call *mc = c->state;
	if (!mc)
		return;
	if (mc->id) {
		char line[128];
		snprintf(line, sizeof(line), "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\","
			 "\"params\":{\"requestId\":%llu,\"reason\":\"cancelled\"}}", (unsigned long long)mc->id);
		mcp_send_line(mc->p, line);
	}
	tool_call_fail(c, TC_CANCELLED, "The call was cancelled");
	mcp_call_end(mc);
}

const struct tool_def tool_kind_mcp = {
	.name = "mcp",
	.description = "A tool of a stdio MCP server",
	.input_schema = "{\"type\":\"object\"}",
	.side_effects = SIDE_EXECUTE,
	.exec = mcp_exec,
	.errors_trip_circuit = true,
	.cancel = mcp_cancel,
	.priv_free = mcp_tool_free,
	.runs_children = true,
};

/* A tool's side effect: the server's hints where the file trusts them
 * (readOnlyHint true: read; destructiveHint false: write), else the
 * file's. */
static enum side_effect hinted_side_effect(const struct mcp_provider *p, const struct mcp_import *im)
{
	if (p->trust_annotations && im->read_only == 1)
		return SIDE_READ;
	if (p->trust_annotations && im->destructive == 0)
		return SIDE_WRITE;
	return p->side_effects;
}

int mcp_provider_register(struct mcp_provider *p, struct registry *r, char **ret_err)
{
	/* Notes of the last registration go; those of the import stay. */
	p->notes.len = p->notes.off + p->import_notes;
	if (p->notes.data)
		p->notes.data[p->notes.len] = '\0';
	for (size_t i = 0; i < p->n_tools; i++) {
		const struct mcp_import *im = &p->tools[i];
		char *name = xasprintf("%s%s", p->prefix, im->name);
		struct mcp_tool *mt = xcalloc(1, sizeof(*mt));
		mt->p = mcp_provider_ref(p);
		mt->remote = xstrdup(im->name);
		struct tool *t = NULL;
		char *err = NULL;
		int rr = tool_new(&tool_kind_mcp, name, im->description, im->schema, mt, &t, &err);
		if (rr < 0) {
			/* A schema outside the supported subset: the tool cannot be
			 * validated, so it is not offered. */
			mcp_note(p, "'%s': %s", name, err ? err : "invalid input schema");
			mcp_tool_free(mt);
			free(err);
			free(name);
			continue;
		}
		/* The file's settings, then its override for this tool. */
		const struct mcp_override *o = mcp_override_for(p, im->name);
		t->side_effects = o && o->side_effects >= 0 ? (enum side_effect)o->side_effects
				: hinted_side_effect(p, im);
		t->read_only_hint = im->read_only < 0 ? TOOL_HINT_NONE : im->read_only ? TOOL_HINT_TRUE : TOOL_HINT_FALSE;
		t->destructive_hint = im->destructive < 0 ? TOOL_HINT_NONE
				    : im->destructive ? TOOL_HINT_TRUE : TOOL_HINT_FALSE;
		t->sandbox = &p->sandbox;	/* the tool holds a reference on p */
		t->idempotent = o && o->idempotent >= 0 ? o->idempotent : p->idempotent;
		t->timeout_ms = o && o->timeout_ms ? o->timeout_ms
			      : p->timeout_ms ? p->timeout_ms : tool_default_timeout(t->side_effects);
		if (o && o->max_attempts)
			t->max_attempts = o->max_attempts;
		if (o && o->concurrency >= 0)
			t->concurrency = (unsigned)o->concurrency;
		if (o && o->description) {
			free(t->description);
			t->description = xstrdup(o->description);
		}
		free(t->source);
		t->source = xstrdup(p->source);
		struct buf fp = {0};
		buf_printf(&fp, "%s|%s|%s|%s|%d|%d", p->fingerprint, im->name, im->description, im->schema,
			   im->read_only, im->destructive);
		t->fingerprint = buf_steal(&fp);
		/* A name another tool already has is not offered: one server
		 * must not make the whole registry fail to load. */
		char *clash = NULL;
		if (registry_add(r, t, &clash) < 0) {
			mcp_note(p, "'%s': another tool has this name", name);
			free(clash);
		}
		free(name);
	}
	return 0;
}
