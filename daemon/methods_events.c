/* SPDX-License-Identifier: MIT */
/*
 * Events and confirmations: events/subscribe (an approver or a watcher of
 * its uid's calls) and confirmations/resolve (an approver's answer, first
 * answer winning).
 */
#include "daemon/methods.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "daemon/client_session.h"
#include "daemon/conn.h"
#include "daemon/log.h"
#include "daemon/methods_internal.h"
#include "daemon/server_state.h"
#include "lib/dispatch/dispatch.h"
#include "lib/events.h"
#include "lib/session.h"
#include "proto/json.h"

/* --- events and confirmations ------------------------------------------ */

static void m_subscribe(struct conn *c, const struct jrpc_req *req, struct pending *p)
{
	struct server *s = server_of(c);
	const struct json *types = json_get(req->params, "types");
	const struct json *sid = json_get(req->params, "sessionId");
	const char *scope = "*";
	if (types && types->type != JSON_ARRAY && types->type != JSON_NULL) {
		methods_invalid_params(p, "types must be an array of patterns like \"tool.*\"");
		return;
	}
	size_t n = types && types->type == JSON_ARRAY ? types->u.arr.n : 0;
	if (n > 64) {
		methods_invalid_params(p, "at most 64 type patterns");
		return;
	}
	for (size_t i = 0; i < n; i++) {
		const char *pat = json_str(types->u.arr.items[i]);
		if (!event_pattern_valid(pat)) {
			methods_invalid_params(p, "types[%zu] is not a valid pattern (letters, digits, '.', '_', '*')", i);
			return;
		}
	}
	if (sid && sid->type != JSON_NULL) {
		if (sid->type != JSON_STRING) {
			methods_invalid_params(p, "sessionId must be a string or \"*\"");
			return;
		}
		if (!str_eq(sid->u.str.s, "*")) {
			struct session *session = session_find(s->sessions, c->cred.uid, sid->u.str.s);
			if (!session) {
				methods_invalid_params(p, "Unknown session '%s'", sid->u.str.s);
				return;
			}
			scope = session->id;
		}
	}
	const char **pats = xcalloc(n + 1, sizeof(char *));
	for (size_t i = 0; i < n; i++)
		pats[i] = json_str(types->u.arr.items[i]);
	struct client_state *cl = client_state_of(c);
	event_unsubscribe(cl->sub);
	cl->sub = event_subscribe(&s->bus, pats, c->cred.uid, scope, conn_deliver_event, c);
	c->listening = true;
	free(pats);
	if (!p) {
		dispatch_replay_confirmations(s->dispatcher, cl->sub);
		return;
	}
	struct buf b = {0};
	struct jgen *g = jgen_new(&b);
	jgen_obj_open(g);
	jgen_key(g, "subscribed");
	jgen_arr_open(g);
	if (n == 0)
		jgen_str(g, "*");
	for (size_t i = 0; i < n; i++)
		jgen_str(g, json_str(types->u.arr.items[i]));
	jgen_arr_close(g);
	jgen_kv_str(g, "sessionId", scope);
	jgen_obj_close(g);
	jgen_free(g);
	methods_answer(p, &b);
	/* After the answer, so the client knows it is subscribed first. */
	dispatch_replay_confirmations(s->dispatcher, cl->sub);
}

static void m_resolve(struct conn *c, const struct jrpc_req *req, struct pending *p)
{
	const char *id = json_str(json_get(req->params, "requestId"));
	const char *decision = json_str(json_get(req->params, "decision"));
	if (!id || !decision) {
		methods_invalid_params(p, "requestId and decision (\"allow\", \"deny\" or \"always_allow\") are required");
		return;
	}
	bool accepted = false;
	const char *in_force = NULL;
	int r = dispatch_resolve(server_of(c)->dispatcher, c->cred.uid, id, decision, &accepted, &in_force);
	if (r == -ENOENT) {
		methods_invalid_params(p, "Unknown confirmation request '%s'", id);
		return;
	}
	if (r == -EINVAL) {
		methods_invalid_params(p, "decision must be \"allow\", \"deny\" or \"always_allow\"");
		return;
	}
	if (!p)
		return;
	char *out = xasprintf("{\"accepted\":%s,\"decision\":\"%s\"}", accepted ? "true" : "false", in_force);
	conn_result(p, out, strlen(out));
	free(out);
}

const struct method event_methods[] = {
	{ .name = "events/subscribe", .exec = m_subscribe },
	{ .name = "confirmations/resolve", .exec = m_resolve },
	{ .name = NULL },
};
