/* SPDX-License-Identifier: MIT */
/*
 * The fixture of the dispatch engine's unit tests: fake tools (async ones
 * whose attempts wait in pending[] until the test ends them, a synchronous
 * echo), a dispatcher on a fake clock with one session of uid 1000, and
 * the outcomes and events it produced, recorded for assertions.
 */
#include "tests/unit/dispatch_fixture.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/events.h"
#include "lib/registry.h"
#include "lib/session.h"
#include "lib/files/workspace.h"
#include "lib/files/workspace_root.h"
#include "proto/json.h"
#include "tests/unit/fakeloop.h"

/* --- fake tools -------------------------------------------------------- */

struct tool_call *pending[MAX_PENDING];
unsigned n_pending;
unsigned exec_count;
unsigned cancel_count;

static enum tool_ret async_exec(struct tool_call *c)
{
	exec_count++;
	ck_assert_uint_lt(n_pending, MAX_PENDING);
	pending[n_pending++] = c;
	return TOOL_PENDING;
}

static void take_pending(struct tool_call *c)
{
	for (unsigned i = 0; i < n_pending; i++) {
		if (pending[i] == c) {
			pending[i] = pending[--n_pending];
			return;
		}
	}
}

static void async_cancel(struct tool_call *c)
{
	cancel_count++;
	take_pending(c);
	tool_call_fail(c, TC_CANCELLED, "stopped");
	tool_call_finish(c);
}

/* The "n" argument of the pending attempt i (-1: none). */
int64_t pending_tag(unsigned i)
{
	int64_t v;
	ck_assert_uint_lt(i, n_pending);
	return json_get_int(json_get(pending[i]->args, "n"), &v) ? v : -1;
}

/* Ends the pending attempt whose "n" argument is tag with kind. */
void complete_tag(int64_t tag, enum tc_kind kind)
{
	for (unsigned i = 0; i < n_pending; i++) {
		if (pending_tag(i) != tag)
			continue;
		struct tool_call *c = pending[i];
		memmove(pending + i, pending + i + 1, sizeof(pending[0]) * (--n_pending - i));
		if (kind == TC_OK)
			tool_call_succeed(c, xstrdup("done"), xstrdup("{\"v\":1}"), false);
		else
			tool_call_fail(c, kind, "boom");
		tool_call_finish(c);
		return;
	}
	ck_abort_msg("no pending attempt with n=%lld", (long long)tag);
}

/* Ends the oldest pending attempt with kind. */
void complete_first(enum tc_kind kind)
{
	ck_assert_uint_gt(n_pending, 0);
	struct tool_call *c = pending[0];
	memmove(pending, pending + 1, sizeof(pending[0]) * --n_pending);
	if (kind == TC_OK)
		tool_call_succeed(c, xstrdup("done"), xstrdup("{\"v\":1}"), false);
	else
		tool_call_fail(c, kind, "boom");
	tool_call_finish(c);
}

static enum tool_ret echo_exec(struct tool_call *c)
{
	exec_count++;
	struct buf b = {0};
	json_canonical(c->args, &b);
	tool_call_succeed(c, NULL, buf_steal(&b), false);
	return TOOL_DONE;
}

static const char schema_any[] = "{\"type\":\"object\"}";
static const char schema_path[] =
	"{\"type\":\"object\",\"properties\":{\"path\":{\"type\":\"string\"},\"n\":{\"type\":\"integer\"}},"
	"\"required\":[\"path\"],\"additionalProperties\":false}";

const struct tool_def def_slow = {
	.name = "slow", .description = "async", .input_schema = schema_any,
	.side_effects = SIDE_READ, .idempotent = false, .timeout_ms = 1000,
	.exec = async_exec, .cancel = async_cancel,
};
const struct tool_def def_slow_idem = {
	.name = "slow_idem", .description = "async idempotent", .input_schema = schema_any,
	.side_effects = SIDE_READ, .idempotent = true, .timeout_ms = 1000,
	.exec = async_exec, .cancel = async_cancel,
};
const struct tool_def def_echo = {
	.name = "echo", .description = "sync", .input_schema = schema_path,
	.side_effects = SIDE_NONE, .idempotent = true,
	.exec = echo_exec,
};
const struct tool_def def_writer = {
	.name = "writer", .description = "async write", .input_schema = schema_any,
	.side_effects = SIDE_WRITE, .idempotent = false, .timeout_ms = 1000,
	.exec = async_exec, .cancel = async_cancel,
};
/* Like a command or mcp tool: its execution errors are its own. */
const struct tool_def def_prog = {
	.name = "prog", .description = "async program", .input_schema = schema_any,
	.side_effects = SIDE_READ, .idempotent = false, .timeout_ms = 1000,
	.exec = async_exec, .cancel = async_cancel, .errors_trip_circuit = true,
};
/* Registered with a cap of one call at a time. */
const struct tool_def def_capped = {
	.name = "capped", .description = "async, one at a time", .input_schema = schema_any,
	.side_effects = SIDE_READ, .idempotent = false, .timeout_ms = 1000,
	.exec = async_exec, .cancel = async_cancel,
};

/* --- recorded outcomes and events ---------------------------------------- */

struct rec recs[MAX_PENDING];
unsigned n_recs;
static char events[1024][1024];
unsigned n_events;

struct tc_loop *loop;
struct dispatcher *d;
struct event_bus bus;
struct registry *reg;
struct session_table *table;
struct workspace *ws;
struct session *sess;
struct policy_config policy;
char tmpdir[64];

static void on_complete(void *ctx, const struct outcome *o, bool replayed)
{
	struct rec *r = ctx;
	ck_assert(!r->done);
	r->done = true;
	r->kind = o->kind;
	r->replayed = replayed;
	r->attempts = o->attempts;
	r->retry_after = o->retry_after_ms;
	r->restart = o->error_data && strstr(o->error_data, "\"restart\":true");
	r->at = tc_now(loop);
	snprintf(r->call_id, sizeof(r->call_id), "%s", o->call_id ? o->call_id : "");
	snprintf(r->message, sizeof(r->message), "%s", o->message ? o->message : "");
}

const struct caller_ops ops = { .complete = on_complete };

bool on_event(void *ctx, const char *params, size_t n)
{
	if (n_events < 1024)
		snprintf(events[n_events++], sizeof(events[0]), "%.*s", (int)n, params);
	return true;
}

/* Counts recorded events whose JSON contains needle. */
unsigned count_events(const char *needle)
{
	unsigned n = 0;
	for (unsigned i = 0; i < n_events; i++)
		if (strstr(events[i], needle))
			n++;
	return n;
}

static void add_tool(const struct tool_def *def)
{
	struct tool *t = NULL;
	char *err = NULL;
	ck_assert_int_eq(tool_new(def, def->name, def->description, def->input_schema, NULL, &t, &err), 0);
	if (def == &def_capped)
		t->concurrency = 1;
	ck_assert_int_eq(registry_add(reg, t, NULL), 0);
}

void setup_with(const struct dispatch_config *cfg)
{
	n_pending = exec_count = cancel_count = n_recs = n_events = 0;
	memset(recs, 0, sizeof(recs));
	loop = fakeloop_new();
	fakeloop_set_random(loop, 0);
	event_bus_init(&bus);
	d = dispatcher_new(loop, cfg, &bus);
	reg = registry_new();
	add_tool(&def_slow);
	add_tool(&def_slow_idem);
	add_tool(&def_echo);
	add_tool(&def_writer);
	add_tool(&def_prog);
	add_tool(&def_capped);
	registry_seal(reg);
	dispatch_set_registry(d, reg);
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/tc-dispatch-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(tmpdir));
	ck_assert_int_eq(ws_open(tmpdir, &ws), 0);
	table = session_table_new();
	ck_assert_int_eq(session_get(table, NULL, 1000, ws, &sess), 0);
	policy_config_init(&policy);
	for (int c = 0; c < SIDE_MAX; c++)
		policy.by_class[c] = CONFIRM_AUTO;
	dispatch_set_policy(d, &policy);
}

void setup(void)
{
	struct dispatch_config cfg;
	dispatch_config_defaults(&cfg);
	setup_with(&cfg);
}

void teardown(void)
{
	/* Whatever is still pending ends now. */
	while (n_pending)
		complete_first(TC_OK);
	d = dispatcher_free(d);
	session_unref(sess);
	session_table_free(table);
	ws_unref(ws);
	registry_unref(reg);
	policy_config_free(&policy);
	fakeloop_free(loop);
	rmdir(tmpdir);
}

/* Calls tool for session s with JSON arguments text; returns the caller handle. */
struct caller *call_as(struct session *s, const char *tool, const char *args, const char *key, struct rec *r)
{
	struct json_doc *doc = NULL;
	ck_assert_int_eq(json_parse(args, strlen(args), 0, 0, &doc, NULL), 0);
	struct call_params p = {
		.tool = tool, .arguments = json_doc_root(doc), .doc = doc,
		.idempotency_key = key, .timeout_ms = -1, .budget = -1,
	};
	struct caller *c = dispatch_call(d, s, &p, &ops, r);
	json_doc_unref(doc);
	return c;
}

struct caller *call(const char *tool, const char *args, const char *key, struct rec *r)
{
	return call_as(sess, tool, args, key, r);
}

char *requested_id(void)
{
	for (unsigned i = 0; i < n_events; i++) {
		char *p = strstr(events[i], "\"requestId\":\"");
		if (p && strstr(events[i], "tool.confirmation_requested")) {
			p += 13;
			return xstrndup(p, strcspn(p, "\""));
		}
	}
	return NULL;
}

