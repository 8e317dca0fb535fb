/* SPDX-License-Identifier: MIT */
/*
 * One JSON audit line per call, built from its outcome and what the
 * dispatcher knows of it.
 */
#include "lib/dispatch/dispatch_internal.h"

#include "lib/base/audit.h"
#include "lib/policy/policy.h"
#include "lib/session.h"
#include "lib/tool.h"
#include "lib/files/workspace.h"
#include "proto/base/buf.h"
#include "proto/json.h"

/* Writes the files the call read: the paths it names, for a tool that only
 * reads, once it ran. Written files are the tool's own account (o->files). */
static void files_read(struct jgen *g, const struct audit_call *c)
{
	jgen_key(g, "filesRead");
	jgen_arr_open(g);
	const struct tool *t = c->tool;
	const struct workspace *ws = c->session ? c->session->ws : NULL;
	bool reads = t && (t->side_effects == SIDE_READ || t->side_effects == SIDE_NONE);
	for (const char *const *p = t ? t->def->path_args : NULL; reads && ws && c->args && c->o->attempts > 0 && p && *p; p++) {
		const struct json *v = json_get(c->args, *p);
		if (!v || v->type != JSON_STRING)
			continue;
		_cleanup_free_ char *disp = ws_display_path(ws, v->u.str.s, v->u.str.len);
		jgen_str(g, disp);
	}
	jgen_arr_close(g);
}

void audit_call(struct audit *a, const struct audit_call *c)
{
	if (!a)
		return;
	const struct outcome *o = c->o;
	const struct session *s = c->session;
	char tbuf[32];
	format_time(wall_ms(), tbuf);
	_cleanup_(buf_free) struct buf b = {0};
	struct jgen *g = jgen_new(&b);
	jgen_obj_open(g);
	jgen_kv_str(g, "time", tbuf);
	jgen_kv_str(g, "session", s ? s->id : NULL);
	jgen_kv_int(g, "uid", s ? (int64_t)s->uid : -1);
	jgen_kv_int(g, "pid", c->pid);
	jgen_kv_str(g, "callId", o->call_id);
	jgen_kv_str(g, "tool", o->tool);
	jgen_kv_str(g, "sideEffect", side_effect_name(o->side_effects));
	jgen_kv_str(g, "outcome", tc_kind_name(o->kind));
	jgen_kv_bool(g, "isError", o->is_error);
	jgen_kv_int(g, "attempts", o->attempts);
	jgen_kv_int(g, "durationMs", (int64_t)o->duration_ms);
	jgen_kv_bool(g, "replayed", c->replayed);
	jgen_kv_str(g, "workspace", s && s->ws ? s->ws->root : NULL);
	const char *roots[WS_GROUP_MAX + 1];
	if (s && s->ws && ws_group_roots(s->ws, roots, WS_GROUP_MAX + 1) > 1) {
		/* A session of several MCP roots: all of them, the primary first. */
		jgen_key(g, "workspaces");
		jgen_arr_open(g);
		for (const char *const *r = roots; *r; r++)
			jgen_str(g, *r);
		jgen_arr_close(g);
	}
	jgen_key(g, "files");
	jgen_arr_open(g);
	for (size_t i = 0; i < o->n_files; i++)
		jgen_str(g, o->files[i]);
	jgen_arr_close(g);
	files_read(g, c);
	jgen_kv_str(g, "command", o->command);
	const char *profile = policy_sandbox_profile(c->tool, c->sandbox, NULL);
	if (profile)
		jgen_kv_str(g, "sandbox", profile);
	if (o->kind != TC_OK)
		jgen_kv_str(g, "message", o->message);
	jgen_obj_close(g);
	jgen_free(g);
	audit_record(a, buf_head(&b), buf_size(&b));
}
