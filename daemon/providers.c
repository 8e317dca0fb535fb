/* SPDX-License-Identifier: MIT */
/*
 * The MCP providers as the daemon runs them: set up in the loop at start
 * and at each reload, started when a client first needs their tools
 * (tools/list starts all of them, tools/call the one whose prefix the
 * tool carries), asked whether any is still starting, and shown in
 * admin/stats. Their stderr and warnings go to the daemon's log, and so
 * does a warning, at start and at each reload, for each that runs as root.
 */
#include "daemon/providers.h"

#include <stdlib.h>
#include <string.h>

#include "daemon/log.h"
#include "proto/base/util.h"
#include "proto/json.h"
#include "tools/mcp/mcp.h"

void providers_clear(struct providers *p)
{
	for (size_t i = 0; i < p->n; i++)
		mcp_provider_unref(p->v[i]);
	free(p->v);
	p->v = NULL;
	p->n = 0;
}

/* Logs a line of a provider's stderr, or a warning about it. */
static void provider_log(void *arg, struct mcp_provider *pv, bool warning, const char *line)
{
	if (warning)
		log_warning("MCP server '%s': %s", mcp_provider_name(pv), line);
	else
		log_info("MCP server '%s' stderr: %s", mcp_provider_name(pv), line);
}

void providers_setup(struct providers *p, struct tc_loop *loop, const struct tool_env *env,
		     const char *root, uint32_t retry_s, void (*settled)(void *arg, struct mcp_provider *pv),
		     void *arg)
{
	for (size_t i = 0; i < p->n; i++) {
		mcp_provider_setup(p->v[i], loop, env, root, settled, arg);
		mcp_provider_set_log(p->v[i], provider_log);
		mcp_provider_set_retry(p->v[i], retry_s);
		if (mcp_provider_runs_as_root(p->v[i]))
			log_warning("MCP server '%s' (%s) runs as root: its file says \"run_as\": \"root\"",
				    mcp_provider_name(p->v[i]), mcp_provider_source(p->v[i]));
	}
}

static const char *const state_names[] = {
	[MCP_IDLE] = "idle", [MCP_STARTING] = "starting", [MCP_READY] = "ready", [MCP_FAILED] = "failed",
};

static void write_pid(struct jgen *g, int pid)
{
	jgen_key(g, "pid");
	if (pid > 0)
		jgen_int(g, pid);
	else
		jgen_null(g);
}

void providers_write_stats(const struct providers *p, struct jgen *g)
{
	jgen_key(g, "providers");
	jgen_arr_open(g);
	for (size_t i = 0; i < p->n; i++) {
		const struct mcp_provider *pv = p->v[i];
		jgen_obj_open(g);
		jgen_kv_str(g, "name", mcp_provider_name(pv));
		jgen_kv_str(g, "prefix", mcp_provider_prefix(pv));
		jgen_kv_str(g, "state", state_names[mcp_provider_state(pv)]);
		write_pid(g, mcp_provider_pid(pv));
		jgen_kv_int(g, "restarts", mcp_provider_restarts(pv));
		jgen_kv_str(g, "lastError", mcp_provider_last_error(pv));
		jgen_key(g, "instances");
		jgen_arr_open(g);
		for (size_t k = 0; k < mcp_provider_n_instances(pv); k++) {
			const struct mcp_provider *in = mcp_provider_instance(pv, k);
			jgen_obj_open(g);
			jgen_kv_int(g, "uid", mcp_provider_uid(in));
			jgen_kv_str(g, "state", state_names[mcp_provider_state(in)]);
			write_pid(g, mcp_provider_pid(in));
			jgen_obj_close(g);
		}
		jgen_arr_close(g);
		jgen_obj_close(g);
	}
	jgen_arr_close(g);
}

bool providers_starting(const struct providers *p)
{
	for (size_t i = 0; i < p->n; i++)
		if (mcp_provider_state(p->v[i]) == MCP_STARTING)
			return true;
	return false;
}

bool providers_start_all(struct providers *p, const struct identity *ident)
{
	for (size_t i = 0; i < p->n; i++)
		if (mcp_provider_state(p->v[i]) == MCP_IDLE && !mcp_provider_imported(p->v[i]))
			mcp_provider_start_for(p->v[i], ident);
	return providers_starting(p);
}

/* The provider whose prefix a tool name carries (the longest prefix wins). */
static struct mcp_provider *provider_for(const struct providers *p, const char *name)
{
	struct mcp_provider *best = NULL;
	for (size_t i = 0; i < p->n; i++) {
		struct mcp_provider *pv = p->v[i];
		const char *pre = mcp_provider_prefix(pv);
		if (str_has_prefix(name, pre) && (!best || strlen(pre) > strlen(mcp_provider_prefix(best))))
			best = pv;
	}
	return best;
}

const char *providers_down_for(const struct providers *p, const char *tool, const struct identity *ident)
{
	struct mcp_provider *pv = provider_for(p, tool);
	if (!pv || mcp_provider_imported(pv) || mcp_provider_state(pv) != MCP_FAILED)
		return NULL;
	return mcp_provider_error_for(pv, ident);
}

bool providers_refused_for(const struct providers *p, const char *tool, const struct identity *ident)
{
	struct mcp_provider *pv = provider_for(p, tool);
	return pv && providers_down_for(p, tool, ident) && mcp_provider_refused_for(pv, ident);
}

bool providers_start_for(struct providers *p, const char *tool, const struct identity *ident)
{
	struct mcp_provider *pv = provider_for(p, tool);
	if (!pv || mcp_provider_state(pv) == MCP_READY)
		return false;
	mcp_provider_start_for(pv, ident);
	return mcp_provider_state(pv) == MCP_STARTING;
}
