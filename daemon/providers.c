/* SPDX-License-Identifier: MIT */
/*
 * The MCP providers as the daemon runs them: set up in the loop at start
 * and at each reload, started when a client first needs their tools
 * (tools/list starts all of them, tools/call the one whose prefix the
 * tool carries), and asked whether any is still starting.
 */
#include "daemon/providers.h"

#include <stdlib.h>
#include <string.h>

#include "proto/base/util.h"
#include "tools/mcp.h"

void providers_clear(struct providers *p)
{
	for (size_t i = 0; i < p->n; i++)
		mcp_provider_unref(p->v[i]);
	free(p->v);
	p->v = NULL;
	p->n = 0;
}

void providers_setup(struct providers *p, struct tc_loop *loop, const struct tool_env *env,
		     const char *root, void (*settled)(void *arg, struct mcp_provider *pv), void *arg)
{
	for (size_t i = 0; i < p->n; i++)
		mcp_provider_setup(p->v[i], loop, env, root, settled, arg);
}

bool providers_starting(const struct providers *p)
{
	for (size_t i = 0; i < p->n; i++)
		if (mcp_provider_state(p->v[i]) == MCP_STARTING)
			return true;
	return false;
}

bool providers_start_all(struct providers *p)
{
	for (size_t i = 0; i < p->n; i++)
		if (mcp_provider_state(p->v[i]) == MCP_IDLE && !mcp_provider_imported(p->v[i]))
			mcp_provider_start(p->v[i]);
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

bool providers_start_for(struct providers *p, const char *tool)
{
	struct mcp_provider *pv = provider_for(p, tool);
	if (!pv || mcp_provider_state(pv) == MCP_READY)
		return false;
	mcp_provider_start(pv);
	return mcp_provider_state(pv) == MCP_STARTING;
}
