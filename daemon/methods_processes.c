/* SPDX-License-Identifier: MIT */
/*
 * processes/list and processes/kill: the background processes (CONTRACT
 * §19) for toolcallctl ps and kill. A peer sees and kills its own; root
 * and the daemon's user see and kill every uid's.
 */
#include "daemon/methods.h"

#include <errno.h>
#include <signal.h>
#include <string.h>

#include "daemon/conn.h"
#include "daemon/methods_internal.h"
#include "daemon/server_state.h"
#include "lib/process/process.h"
#include "proto/json.h"

static bool sees_all(struct conn *c)
{
	return c->cred.uid == 0 || c->cred.uid == server_of(c)->uid;
}

static void m_list(struct conn *c, const struct jrpc_req *req, struct pending *p)
{
	if (!p)
		return;
	struct server *s = server_of(c);
	struct buf b = {0};
	struct jgen *g = jgen_new(&b);
	jgen_obj_open(g);
	jgen_key(g, "processes");
	if (s->env.processes) {
		process_table_write_list(s->env.processes, c->cred.uid, sees_all(c), g);
	} else {
		jgen_arr_open(g);
		jgen_arr_close(g);
	}
	jgen_obj_close(g);
	jgen_free(g);
	methods_answer(p, &b);
}

static void m_kill(struct conn *c, const struct jrpc_req *req, struct pending *p)
{
	if (!p)
		return;
	struct server *s = server_of(c);
	const struct json *id = json_get(req->params, "id");
	const struct json *sig = json_get(req->params, "signal");
	if (!id || id->type != JSON_STRING || id->u.str.len == 0 || id->u.str.len > 64) {
		methods_invalid_params(p, "processes/kill needs \"id\", a process id");
		return;
	}
	int signo = SIGTERM;
	if (sig && (sig->type != JSON_STRING || (signo = process_signal_from_name(sig->u.str.s)) < 0)) {
		methods_invalid_params(p, "processes/kill: unknown signal");
		return;
	}
	int r = s->env.processes ? process_table_kill(s->env.processes, id->u.str.s, c->cred.uid, sees_all(c), signo)
				 : -ENOENT;
	if (r == -ENOENT) {
		methods_invalid_params(p, "No process '%s' of yours", id->u.str.s);
		return;
	}
	struct buf b = {0};
	struct jgen *g = jgen_new(&b);
	jgen_obj_open(g);
	jgen_kv_str(g, "id", id->u.str.s);
	jgen_kv_bool(g, "signalled", r == 0);
	jgen_kv_bool(g, "ended", r == -ESRCH);
	jgen_obj_close(g);
	jgen_free(g);
	methods_answer(p, &b);
}

const struct method process_methods[] = {
	{ .name = "processes/list", .exec = m_list, .flags = METHOD_REQUEST_ONLY },
	{ .name = "processes/kill", .exec = m_kill, .flags = METHOD_REQUEST_ONLY },
	{ .name = NULL },
};
