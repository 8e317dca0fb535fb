/* SPDX-License-Identifier: MIT */
/*
 * The daemon bound to its store: opening the configured store (memory, or
 * Redis shared by many daemons) and the table of MCP tasks kept in it,
 * logging the store's outages once each, and each Redis server refused
 * (the tasks hear them too), a
 * reload's store settings (those naming the shared state wait for a
 * restart), and admin/stats' tasks member. A hook on the connections
 * unwatches a closing connection's tasks. The task methods are
 * methods_tasks.c's.
 */
#include "daemon/store_binding.h"

#include <stddef.h>
#include <string.h>

#include "daemon/conn.h"
#include "daemon/log.h"
#include "daemon/server_state.h"
#include "lib/dispatch/dispatch.h"
#include "lib/store/store.h"
#include "lib/tasks/tasks.h"
#include "proto/json.h"

/* Whether the shared store is away, heard before the tasks exist too
 * (an outage can start while the store opens). */
static bool store_away;

/* The store went away or came back: one line each time, and the tasks
 * hear it. */
static void store_notify(void *arg, bool up, const char *why)
{
	struct server *s = arg;
	store_away = !up;
	if (s->tasks)
		tasks_store_state(s->tasks, up);
	if (up)
		log_info("store: %s is reachable again; idempotency records are shared again",
			 s->cfg.store.address);
	else
		log_warning("store: %s is unreachable (%s); keyed calls %s until it is back",
			    s->cfg.store.address, why,
			    s->cfg.store.fail ? "fail as transient" : "work on this daemon alone");
}

/* A connection closed: its tasks run on, unwatched. */
static void conn_closed(void *arg, struct conn *c)
{
	struct server *s = arg;
	if (s->tasks)
		tasks_unwatch(s->tasks, c);
}

static const struct conn_hook close_hook = { .closed = conn_closed };

int store_binding_open(struct server *s, char **ret_err)
{
	const struct config *c = &s->cfg;
	if (!str_eq(c->store.kind, "memory")) {
		struct store_config sc;
		store_config_defaults(&sc);
		sc.kind = c->store.kind;
		sc.address = c->store.address;
		sc.prefix = c->store.prefix;
		sc.lease_ms = c->store.lease_ms;
		sc.timeout_ms = c->store.timeout_ms;
		sc.fail_unavailable = c->store.fail;
		sc.max_tasks = c->store.max_tasks;
		sc.server_uid = c->store.server_uid;
		sc.notify = store_notify;
		sc.notify_arg = s;
		int r = dispatch_open_store(s->dispatcher, &sc);
		if (r < 0) {
			*ret_err = xasprintf("store: cannot use %s store at '%s': %s", c->store.kind,
					     c->store.address ? c->store.address : "", strerror(-r));
			return r;
		}
	}
	struct tasks_config tc;
	tasks_config_defaults(&tc);
	tc.default_ttl_ms = c->store.task_ttl_ms;
	tc.max_per_uid = c->store.max_tasks;
	s->tasks = tasks_new(s->loop, &tc);
	tasks_set_store(s->tasks, dispatch_store(s->dispatcher));
	if (store_away)
		tasks_store_state(s->tasks, false);
	conns_add_hook(&s->conns, &close_hook, s);
	return 0;
}

/* Settings that name the shared state itself: changed by a reload, they
 * wait for a restart (held claims, joins and tasks live in the store in
 * use; moving them mid-call would let one key run twice). */
static const struct {
	const char *name;
	size_t off;
} restart_only[] = {
	{ "store.kind", offsetof(struct config, store.kind) },
	{ "store.address", offsetof(struct config, store.address) },
	{ "store.prefix", offsetof(struct config, store.prefix) },
};

/* The settings a reload asked for that wait for a restart, for admin/stats. */
static char *restart_pending;

#define CFG_STR(c, off) (*(char **)((char *)(c) + (off)))

void store_binding_reload(struct server *s, struct config *fresh)
{
	const struct config *old = &s->cfg;
	struct buf b = {0};
	buf_putc(&b, '[');
	bool redis = str_eq(old->store.kind, "redis") || str_eq(fresh->store.kind, "redis");
	for (size_t i = 0; i < sizeof(restart_only) / sizeof(restart_only[0]); i++) {
		char **now = &CFG_STR(fresh, restart_only[i].off);
		const char *was = CFG_STR(old, restart_only[i].off);
		if (str_eq(*now ? *now : "", was ? was : ""))
			continue;
		if (redis) {
			log_warning("%s changes from '%s' to '%s' at the next restart; the daemon goes on with '%s'",
				    restart_only[i].name, was ? was : "", *now ? *now : "", was ? was : "");
			if (buf_size(&b) > 1)
				buf_putc(&b, ',');
			json_quote(&b, restart_only[i].name, strlen(restart_only[i].name));
		}
		/* The configuration in force says what is in use. */
		free(*now);
		*now = was ? xstrdup(was) : NULL;
	}
	buf_putc(&b, ']');
	free(restart_pending);
	restart_pending = buf_size(&b) > 2 ? buf_steal(&b) : NULL;
	buf_free(&b);
	/* The rest applies now. */
	struct store *st = dispatch_store(s->dispatcher);
	if (st) {
		struct store_config sc;
		store_config_defaults(&sc);
		sc.lease_ms = fresh->store.lease_ms;
		sc.timeout_ms = fresh->store.timeout_ms;
		sc.fail_unavailable = fresh->store.fail;
		sc.max_tasks = fresh->store.max_tasks;
		sc.server_uid = fresh->store.server_uid;
		store_reconfigure(st, &sc);
	}
	struct tasks_config tc;
	tasks_config_defaults(&tc);
	tc.default_ttl_ms = fresh->store.task_ttl_ms;
	tc.max_per_uid = fresh->store.max_tasks;
	if (s->tasks)
		tasks_reconfigure(s->tasks, &tc);
}

void store_binding_close(struct server *s)
{
	free(restart_pending);
	restart_pending = NULL;
	store_away = false;
	s->tasks = tasks_free(s->tasks);
}

void store_binding_write_stats(struct server *s, struct jgen *g)
{
	jgen_key(g, "tasks");
	jgen_obj_open(g);
	tasks_write_stats(s->tasks, g);
	jgen_obj_close(g);
	const char *pending = restart_pending ? restart_pending : "[]";
	jgen_kv_raw(g, "storeRestartPending", pending, strlen(pending));
}

void store_binding_write_stats_of(struct server *s, uid_t uid, struct jgen *g)
{
	jgen_key(g, "tasks");
	jgen_obj_open(g);
	tasks_write_stats_of(s->tasks, uid, g);
	jgen_obj_close(g);
}
