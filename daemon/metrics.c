/* SPDX-License-Identifier: MIT */
/*
 * admin/metrics' text (methods_admin.c answers it): the daemon's own
 * families (the build, uptime, connections accepted, refused and evicted,
 * client buffers, progress notifications dropped, memory trims,
 * sessions, reloads, tools), each MCP provider's state and restarts, the
 * background processes' (lib/process), then the dispatcher's
 * (lib/dispatch/metrics.h).
 * The same numbers as admin/stats (methods_admin.c), as OpenMetrics
 * families.
 */
#include "daemon/metrics.h"

#include "daemon/egress.h"
#include "daemon/server_state.h"
#include "lib/base/map.h"
#include "lib/base/openmetrics.h"
#include "lib/dispatch/dispatch.h"
#include "lib/process/process.h"
#include "lib/registry.h"
#include "lib/sandbox/sandbox.h"
#include "lib/session.h"
#include "proto/base/buf.h"
#include "proto/base/util.h"
#include "tools/mcp/mcp.h"
#include "version.h"

static const char *const provider_states[] = {
	[MCP_IDLE] = "idle", [MCP_STARTING] = "starting", [MCP_READY] = "ready", [MCP_FAILED] = "failed",
};

/* One sample per provider and state: 1 for the state it is in. */
static void providers(const struct server *s, struct buf *b)
{
	metrics_family(b, "toolcalld_provider_state", "gauge", NULL,
		       "1 for the state each MCP provider is in (idle, starting, ready, failed).");
	for (size_t i = 0; i < s->providers.n; i++) {
		const struct mcp_provider *pv = s->providers.v[i];
		enum mcp_state now = mcp_provider_state(pv);
		for (size_t k = 0; k < ELEMENTSOF(provider_states); k++) {
			const char *labels[] = { "provider", mcp_provider_name(pv), "state", provider_states[k],
						 NULL };
			metrics_u64(b, "toolcalld_provider_state", labels, (size_t)now == k);
		}
	}
	metrics_family(b, "toolcalld_provider_restarts", "counter", NULL,
		       "Times each MCP provider's server was started again.");
	for (size_t i = 0; i < s->providers.n; i++) {
		const char *labels[] = { "provider", mcp_provider_name(s->providers.v[i]), NULL };
		metrics_u64(b, "toolcalld_provider_restarts_total", labels, mcp_provider_restarts(s->providers.v[i]));
	}
}

void metrics_write(struct server *s, struct buf *b)
{
	metrics_family(b, "toolcalld_build_info", "gauge", NULL, "The daemon's version, always 1.");
	const char *version[] = { "version", TOOLCALLD_VERSION, NULL };
	metrics_u64(b, "toolcalld_build_info", version, 1);
	metrics_family(b, "toolcalld_uptime_seconds", "gauge", "seconds", "Time since the daemon started.");
	metrics_real(b, "toolcalld_uptime_seconds", NULL, (double)(mono_ms() - s->started_ms) / 1000.0);

	metrics_family(b, "toolcalld_connections_open", "gauge", NULL, "Client connections open.");
	metrics_u64(b, "toolcalld_connections_open", NULL, s->conns.n);
	metrics_family(b, "toolcalld_connections", "counter", NULL, "Client connections accepted.");
	metrics_u64(b, "toolcalld_connections_total", NULL, s->conns.total);
	metrics_family(b, "toolcalld_connections_refused", "counter", NULL,
		       "Connections refused (limits, peer allow-list).");
	metrics_u64(b, "toolcalld_connections_refused_total", NULL, s->conns_refused);
	metrics_family(b, "toolcalld_connections_evicted", "counter", NULL,
		       "Connections dropped for holding too much memory.");
	metrics_u64(b, "toolcalld_connections_evicted_total", NULL, s->conns.evicted);
	metrics_family(b, "toolcalld_client_buffers_bytes", "gauge", "bytes",
		       "Input and output buffered for all clients.");
	metrics_u64(b, "toolcalld_client_buffers_bytes", NULL, s->conns.memory);
	metrics_family(b, "toolcalld_progress_dropped", "counter", NULL,
		       "Progress notifications dropped for slow clients.");
	metrics_u64(b, "toolcalld_progress_dropped_total", NULL, s->progress_dropped);
	metrics_family(b, "toolcalld_memory_trims", "counter", NULL,
		       "Times the memory of a crowd of connections or calls was given back once it had gone.");
	metrics_u64(b, "toolcalld_memory_trims_total", NULL, s->trims);
	metrics_family(b, "toolcalld_sessions", "gauge", NULL, "Sessions open.");
	metrics_u64(b, "toolcalld_sessions", NULL, map_size(s->sessions->by_id));
	metrics_family(b, "toolcalld_reloads", "counter", NULL, "Configuration reloads (SIGHUP, admin/reload, tool file changes).");
	metrics_u64(b, "toolcalld_reloads_total", NULL, s->reloads);
	metrics_family(b, "toolcalld_tools", "gauge", NULL, "Tools registered.");
	metrics_u64(b, "toolcalld_tools", NULL, s->registry->n);
	metrics_family(b, "toolcalld_sandbox_scans_bounded", "counter", NULL,
		       "Scans for nested git repositories that stopped at their bound (sandbox.protect does not hold "
		       "for children in the repositories not reached).");
	metrics_u64(b, "toolcalld_sandbox_scans_bounded_total", NULL, sandbox_repos_bounded());
	providers(s, b);
	process_table_write_metrics(s->env.processes, b);
	daemon_net_metrics(s, b);

	dispatch_write_metrics(s->dispatcher, b);
	metrics_end(b);
}
