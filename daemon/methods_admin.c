/* SPDX-License-Identifier: MIT */
/*
 * Administration, for the daemon's own user and root: admin/reload,
 * admin/stats (counters of the daemon, the dispatcher, providers and
 * clients) and admin/metrics (the same in OpenMetrics text).
 */
#include "daemon/methods.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "daemon/conn.h"
#include "daemon/durable.h"
#include "daemon/log.h"
#include "daemon/methods_internal.h"
#include "daemon/metrics.h"
#include "daemon/providers.h"
#include "daemon/server_state.h"
#include "lib/dispatch.h"
#include "lib/loop.h"
#include "lib/map.h"
#include "lib/registry.h"
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
	if (p) {
		if (r < 0) {
			struct buf data = {0};
			struct jgen *g = jgen_new(&data);
			jgen_obj_open(g);
			jgen_kv_str(g, "kind", "invalid_config");
			jgen_kv_str(g, "error", err);
			jgen_obj_close(g);
			jgen_free(g);
			char *msg = xasprintf("Reload failed, the previous configuration stays in force: %s", err);
			conn_error(p, JRPC_INTERNAL_ERROR, msg, buf_head(&data));
			free(msg);
			buf_free(&data);
		} else {
			conn_result(p, result, strlen(result));
		}
	}
	free(result);
	free(err);
}

static void m_stats(struct conn *c, const struct jrpc_req *req, struct pending *p)
{
	if (!p)
		return;
	struct server *s = server_of(c);
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
	jgen_obj_close(g);
	jgen_kv_int(g, "sessions", (int64_t)map_size(s->sessions->by_id));
	jgen_kv_int(g, "reloads", (int64_t)s->reloads);
	jgen_kv_int(g, "registeredTools", (int64_t)s->registry->n);
	dispatch_write_stats(s->dispatcher, g);
	durable_write_stats(s, g);
	providers_write_stats(&s->providers, g);
	jgen_obj_close(g);
	jgen_free(g);
	methods_answer(p, &b);
}

/* admin/metrics: {text}, the numbers of admin/stats in OpenMetrics text. */
static void m_metrics(struct conn *c, const struct jrpc_req *req, struct pending *p)
{
	if (!p)
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
