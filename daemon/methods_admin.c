/* SPDX-License-Identifier: MIT */
/*
 * Administration, for the daemon's own user and root: admin/reload,
 * admin/stats (counters of the daemon, the dispatcher, providers and
 * clients) and admin/metrics (the same in OpenMetrics text). Any other
 * peer may ask admin/stats and hears of its own uid's calls, sessions,
 * connections and tasks alone: nothing of other users' work, and no
 * provider's error text (which holds the server's stderr).
 */
#include "daemon/methods.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "daemon/conn.h"
#include "daemon/store_binding.h"
#include "daemon/log.h"
#include "daemon/methods_internal.h"
#include "daemon/metrics.h"
#include "daemon/providers.h"
#include "daemon/server_state.h"
#include "lib/dispatch/dispatch.h"
#include "lib/errors.h"
#include "lib/base/loop.h"
#include "lib/base/map.h"
#include "lib/process/process.h"
#include "lib/registry.h"
#include "lib/sandbox/sandbox.h"
#include "lib/session.h"
#include "proto/json.h"

/* --- administration ---------------------------------------------------- */

/* Administration is for the daemon's own user and root. */
static bool admin_allowed(struct conn *c, struct pending *p)
{
	if (c->cred.uid == 0 || c->cred.uid == server_of(c)->uid)
		return true;
	if (p)
		conn_error(p, JRPC_INTERNAL_ERROR, "Permission denied: admin methods are for the daemon's user",
			   "{\"kind\":\"permission_denied\"}");
	return false;
}

static void m_reload(struct conn *c, const struct jrpc_req *req, struct pending *p)
{
	if (!admin_allowed(c, p))
		return;
	char *result = NULL, *err = NULL;
	struct server *s = server_of(c);
	int r = s->methods_ops->reload(s, &result, &err);
	/* Logged as a reload on SIGHUP or on a tool file's change is, with
	 * who asked for it. */
	if (r < 0)
		log_error("admin/reload by uid %u (pid %d) failed, the previous configuration stays in force: %s",
			  (unsigned)c->cred.uid, (int)c->cred.pid, err);
	else
		log_info("admin/reload by uid %u (pid %d): reloaded: %s", (unsigned)c->cred.uid,
			 (int)c->cred.pid, result);
	if (p) {
		if (r < 0) {
			struct buf data = {0};
			struct jgen *g = jgen_new(&data);
			jgen_obj_open(g);
			/* A kind of §4's closed set: the reload ran and failed
			 * on what it read; what failed says "reason". */
			jgen_kv_str(g, "kind", tc_kind_name(TC_EXECUTION_ERROR));
			jgen_kv_bool(g, "retryable", false);
			jgen_kv_str(g, "reason", "invalid_config");
			jgen_kv_str(g, "error", err);
			/* Every mistake found, one an item. */
			jgen_key(g, "errors");
			jgen_arr_open(g);
			for (const char *e = err; *e;) {
				const char *nl = strchr(e, '\n');
				size_t n = nl ? (size_t)(nl - e) : strlen(e);
				jgen_strn(g, e, n);
				e += n + (nl ? 1 : 0);
			}
			jgen_arr_close(g);
			jgen_obj_close(g);
			jgen_free(g);
			char *msg = xasprintf("Reload failed, the previous configuration stays in force: %s", err);
			conn_error(p, tc_kind_code(TC_EXECUTION_ERROR), msg, buf_head(&data));
			free(msg);
			buf_free(&data);
		} else {
			conn_result(p, result, strlen(result));
		}
	}
	free(result);
	free(err);
}

/* Sessions alive of uid. */
static int64_t sessions_of(struct server *s, uid_t uid)
{
	int64_t n = 0;
	size_t it = 0;
	void *v;
	while (map_next(s->sessions->by_id, &it, NULL, &v))
		if (((struct session *)v)->uid == uid)
			n++;
	return n;
}

/* admin/stats for a peer that is neither root nor the daemon's user: the
 * counters of its own uid, and nothing of anyone else's. */
static void stats_of(struct server *s, uid_t uid, struct jgen *g)
{
	jgen_kv_int(g, "uid", uid);
	jgen_kv_int(g, "uptimeMs", (int64_t)(mono_ms() - s->started_ms));
	jgen_key(g, "connections");
	jgen_obj_open(g);
	const struct peer *pe = peers_find(&s->peers, uid);
	jgen_kv_int(g, "open", pe ? pe->conns : 0);
	jgen_kv_int(g, "bufferedBytes", pe ? (int64_t)pe->memory : 0);
	jgen_obj_close(g);
	jgen_kv_int(g, "sessions", sessions_of(s, uid));
	jgen_kv_int(g, "registeredTools", (int64_t)s->registry->n);
	dispatch_write_stats_of(s->dispatcher, uid, g);
	store_binding_write_stats_of(s, uid, g);
}

static void m_stats(struct conn *c, const struct jrpc_req *req, struct pending *p)
{
	if (!p)
		return;
	struct server *s = server_of(c);
	if (!admin_allowed(c, NULL)) {
		struct buf b = {0};
		struct jgen *g = jgen_new(&b);
		jgen_obj_open(g);
		stats_of(s, c->cred.uid, g);
		jgen_obj_close(g);
		jgen_free(g);
		methods_answer(p, &b);
		return;
	}
	struct buf b = {0};
	struct jgen *g = jgen_new(&b);
	jgen_obj_open(g);
	jgen_kv_int(g, "uptimeMs", (int64_t)(mono_ms() - s->started_ms));
	jgen_key(g, "connections");
	jgen_obj_open(g);
	jgen_kv_int(g, "open", s->conns.n);
	jgen_kv_int(g, "total", (int64_t)s->conns.total);
	jgen_kv_int(g, "refused", (int64_t)s->conns_refused);
	jgen_kv_int(g, "evicted", (int64_t)s->conns.evicted);
	jgen_kv_int(g, "bufferedBytes", (int64_t)s->conns.memory);
	jgen_kv_int(g, "progressDropped", (int64_t)s->progress_dropped);
	jgen_kv_int(g, "trims", (int64_t)s->trims);
	jgen_obj_close(g);
	jgen_kv_int(g, "sessions", (int64_t)map_size(s->sessions->by_id));
	jgen_kv_int(g, "reloads", (int64_t)s->reloads);
	jgen_kv_int(g, "registeredTools", (int64_t)s->registry->n);
	jgen_kv_int(g, "sandboxScansBounded", (int64_t)sandbox_repos_bounded());
	dispatch_write_stats(s->dispatcher, g);
	store_binding_write_stats(s, g);
	providers_write_stats(&s->providers, g);
	process_table_write_stats(s->env.processes, g);
	sandbox_kaudit_write_stats(g);
	sandbox_netnotif_write_stats(g);
	jgen_obj_close(g);
	jgen_free(g);
	methods_answer(p, &b);
}

/* admin/metrics: {text}, the numbers of admin/stats in OpenMetrics text,
 * every uid's: for root and the daemon's user alone. */
static void m_metrics(struct conn *c, const struct jrpc_req *req, struct pending *p)
{
	if (!admin_allowed(c, p) || !p)
		return;
	struct buf text = {0}, b = {0};
	metrics_write(server_of(c), &text);
	struct jgen *g = jgen_new(&b);
	jgen_obj_open(g);
	jgen_key(g, "text");
	jgen_strn(g, buf_head(&text), buf_size(&text));
	jgen_obj_close(g);
	jgen_free(g);
	buf_free(&text);
	methods_answer(p, &b);
}

const struct method admin_methods[] = {
	{ .name = "admin/reload", .exec = m_reload },
	{ .name = "admin/stats", .exec = m_stats, .flags = METHOD_REQUEST_ONLY },
	{ .name = "admin/metrics", .exec = m_metrics, .flags = METHOD_REQUEST_ONLY },
	{ .name = NULL },
};
