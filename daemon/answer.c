/* SPDX-License-Identifier: MIT */
/*
 * Answers to tool calls. A result is written in place in the output queue
 * (outcome_write_result); a failure is a JSON-RPC error whose data is the
 * outcome's envelope, or, for a client that asked at initialize for
 * toolErrors "result", a CallResult with isError: MCP hosts show such
 * results to the model, while they throw JSON-RPC errors away as
 * exceptions. An internal error's details go to the log, not the client.
 */
#include "daemon/answer.h"

#include <string.h>

#include "daemon/client_session.h"
#include "daemon/conn.h"
#include "daemon/log.h"
#include "lib/errors.h"
#include "lib/dispatch/dispatch.h"
#include "lib/session.h"
#include "proto/json.h"
#include "proto/mcp_result.h"

const char *answer_error_message(const struct outcome *o)
{
	if (o->kind == TC_INTERNAL)
		return "Internal error in toolcalld; the details are in its log";
	return o->message ? o->message : tc_kind_name(o->kind);
}

void answer_write_error_result(struct buf *out, const char *msg, const char *data, size_t data_len)
{
	struct jgen *g = jgen_new(out);
	jgen_obj_open(g);
	jgen_key(g, "content");
	jgen_arr_open(g);
	jgen_obj_open(g);
	jgen_kv_str(g, "type", "text");
	jgen_kv_str(g, "text", msg);
	jgen_obj_close(g);
	jgen_arr_close(g);
	jgen_key(g, "structuredContent");
	jgen_obj_open(g);
	jgen_kv_raw(g, "error", data, data_len);
	jgen_obj_close(g);
	jgen_kv_bool(g, "isError", true);
	jgen_obj_close(g);
	jgen_free(g);
}

/* Answers a failed call as a CallResult with isError; data is the
 * envelope's data object. */
static void error_as_result(struct pending *p, const struct answer_call *call, const char *msg, const char *data)
{
	struct buf b = {0};
	answer_write_error_result(&b, msg, data, strlen(data));
	conn_call_result(p, call, buf_head(&b), buf_size(&b));
	buf_free(&b);
}

struct result_arg {
	const struct outcome *o;
	bool replayed;
};

static void write_result(const void *arg, struct buf *out)
{
	const struct result_arg *a = arg;
	outcome_write_result(a->o, a->replayed, out);
}

void answer_outcome(struct pending *p, const struct outcome *o, bool replayed)
{
	const struct answer_call call = { o->call_id, o->tool, o->attempts, o->duration_ms };
	if (o->kind == TC_OK) {
		struct result_arg a = { o, replayed };
		conn_call_result_with(p, &call, write_result, &a);
		return;
	}
	if (o->kind == TC_INTERNAL)
		log_call(LOG_ERR, p->conn->client->session ? p->conn->client->session->id : NULL, o->call_id, o->tool,
			 "internal error: %s", o->message);
	struct buf b = {0};
	outcome_write_error_data(o, replayed, &b);
	const char *msg = answer_error_message(o);
	if (p->conn->client->tool_errors_result && o->kind != TC_NOT_FOUND)
		error_as_result(p, &call, msg, buf_head(&b));
	else
		conn_call_error(p, &call, tc_kind_code(o->kind), msg, buf_head(&b));
	buf_free(&b);
}

void answer_invalid_call(struct pending *p, const char *tool, const char *msg)
{
	char *m = xasprintf("Invalid params for tools/call: %s", msg);
	struct buf data = {0};
	struct jgen *g = jgen_new(&data);
	jgen_obj_open(g);
	jgen_kv_str(g, "kind", "validation_error");
	jgen_kv_bool(g, "retryable", false);
	jgen_kv_int(g, "attempts", 0);
	jgen_kv_int(g, "durationMs", 0);
	jgen_kv_str(g, "callId", NULL);
	jgen_kv_str(g, "tool", tool);
	mcp_write_one_error(g, "", m);
	jgen_obj_close(g);
	jgen_free(g);
	if (p->conn->client->tool_errors_result)
		error_as_result(p, NULL, m, buf_head(&data));
	else
		conn_error(p, JRPC_INVALID_PARAMS, m, buf_head(&data));
	free(m);
	buf_free(&data);
}

void answer_invalid_params(struct pending *p, const char *msg)
{
	struct buf data = {0};
	struct jgen *g = jgen_new(&data);
	jgen_obj_open(g);
	jgen_kv_str(g, "kind", "validation_error");
	mcp_write_one_error(g, "", msg);
	jgen_obj_close(g);
	jgen_free(g);
	conn_error(p, JRPC_INVALID_PARAMS, msg, buf_head(&data));
	buf_free(&data);
}

bool answer_progress(struct conn *c, const char *task_id, const char *token, size_t token_len,
		     uint64_t progress, const char *stream, const char *data, size_t n)
{
	if (c->dead)
		return true;
	if (conn_congested(c))
		return false;
	_cleanup_(buf_free) struct buf b = {0};
	struct jgen *g = jgen_new(&b);
	jgen_obj_open(g);
	jgen_kv_raw(g, "progressToken", token, token_len);
	jgen_kv_int(g, "progress", (int64_t)progress);
	jgen_key(g, "message");
	jgen_strn(g, data, n);
	jgen_key(g, "_meta");
	jgen_obj_open(g);
	jgen_kv_str(g, "toolcalld/stream", stream);
	if (task_id) {
		jgen_key(g, "io.modelcontextprotocol/related-task");
		jgen_obj_open(g);
		jgen_kv_str(g, "taskId", task_id);
		jgen_obj_close(g);
	}
	jgen_obj_close(g);
	jgen_obj_close(g);
	jgen_free(g);
	conn_notify(c, "notifications/progress", buf_head(&b), buf_size(&b));
	return true;
}
