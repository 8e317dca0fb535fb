/* SPDX-License-Identifier: MIT */
/*
 * The MCP servers that tool files declare, as the daemon runs them: the
 * set of providers, and their lazy start-up (a provider starts when a
 * client first needs its tools, and requests wait until it has settled).
 */
#ifndef TC_PROVIDERS_H
#define TC_PROVIDERS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct identity;
struct jgen;
struct mcp_provider;
struct tc_loop;
struct tool_env;

/* The MCP providers that tool files declare. */
struct providers {
	struct mcp_provider **v;
	size_t n;
};

/* Drops the references of a provider set. */
void providers_clear(struct providers *p);
/* Readies every provider of the set to run in loop; settled(arg, provider)
 * is called when one has imported its tools, or failed. A failed start is
 * not tried again within retry_s; a provider that runs as root is logged
 * as a warning. */
void providers_setup(struct providers *p, struct tc_loop *loop, const struct tool_env *env,
		     const char *root, uint32_t retry_s, void (*settled)(void *arg, struct mcp_provider *pv),
		     void *arg);
/* True while some provider of the set is starting. */
bool providers_starting(const struct providers *p);
/* Starts every provider that never imported its tools, each as it serves
 * ident (the caller); true while some provider is starting (tools/list
 * must wait for them). */
bool providers_start_all(struct providers *p, const struct identity *ident);
/* Starts the provider whose prefix the tool name carries, as it serves
 * ident, when it is not ready; true while it is starting (the call must
 * wait for it). */
bool providers_start_for(struct providers *p, const char *tool, const struct identity *ident);

/*
 * When the tool name carries the prefix of a provider that never imported
 * its tools because its start for ident failed: that failure (the tool may
 * be one of its tools, so the call is transient, not not_found); else NULL.
 */
const char *providers_down_for(const struct providers *p, const char *tool, const struct identity *ident);
/* Whether that failure is the refusal of its program (permission_denied). */
bool providers_refused_for(const struct providers *p, const char *tool, const struct identity *ident);
/* Writes "providers": [{name, prefix, state, pid, restarts, lastError,
 * instances: [{uid, state, pid}]}] into
 * the open object of admin/stats. */
void providers_write_stats(const struct providers *p, struct jgen *g);

#endif
