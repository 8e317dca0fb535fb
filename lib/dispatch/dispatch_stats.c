/* SPDX-License-Identifier: MIT */
/*
 * The dispatcher's part of admin/stats: calls in flight, running and
 * queued, attempts and retries, errors by kind, the idempotency cache, the
 * event stream, the audit log, and per tool its calls, errors, latency
 * percentiles and circuit. Declared in dispatch.h.
 */
#include "lib/base/audit.h"
#include "lib/dispatch/dispatch_internal.h"
#include "lib/events.h"
#include "lib/base/map.h"
#include "lib/store/store.h"
#include "proto/json.h"

/* The state of tool name's circuit for the uid it is worst for: "open"
 * when it is paused for anyone. */
const char *dispatch_worst_circuit(struct dispatcher *d, const char *name)
{
	static const char *const order[] = { "closed", "half-open", "open" };
	size_t worst = 0, it = 0;
	void *v;
	while (map_next(d->uids, &it, NULL, &v)) {
		const struct circuit *c = map_get(((struct uid_state *)v)->circuits, name);
		const char *st = c ? circuit_state_name(c) : order[0];
		for (size_t i = worst + 1; i < ELEMENTSOF(order); i++)
			if (str_eq(st, order[i]))
				worst = i;
	}
	return order[worst];
}

/* Writes the members counted in st (calls, attempts, retries, errors). */
static void write_counts(const struct stats *st, struct jgen *g)
{
	jgen_kv_int(g, "calls", (int64_t)st->calls);
	jgen_kv_int(g, "attempts", (int64_t)st->attempts);
	jgen_kv_int(g, "retries", (int64_t)st->retries);
	jgen_key(g, "errors");
	jgen_obj_open(g);
	for (int k = 1; k < TC_KIND_MAX; k++)
		if (st->errors[k])
			jgen_kv_int(g, tc_kind_name(k), (int64_t)st->errors[k]);
	jgen_obj_close(g);
}

/* Executions of tool name holding a slot for uid u. */
static int64_t running_of(struct dispatcher *d, const struct uid_state *u, const char *name)
{
	int64_t n = 0;
	struct list *pos;
	for (pos = d->execs.next; pos != &d->execs; pos = pos->next) {
		const struct exec *e = list_entry(pos, struct exec, node);
		if (e->us == u && e->holds_slot && str_eq(e->tool->name, name))
			n++;
	}
	return n;
}

/* Writes the tools object of st: every uid's (u NULL) or u's alone. */
static void write_tools(struct dispatcher *d, const struct stats *st, const struct uid_state *u,
			struct jgen *g)
{
	jgen_key(g, "tools");
	jgen_obj_open(g);
	size_t it = 0;
	const char *name;
	void *v;
	while (map_next(st->tools, &it, &name, &v)) {
		struct tool_stats *t = v;
		jgen_key(g, name);
		jgen_obj_open(g);
		jgen_kv_int(g, "calls", (int64_t)t->calls);
		uint64_t errors = 0;
		for (int k = 1; k < TC_KIND_MAX; k++)
			errors += t->errors[k];
		jgen_kv_int(g, "errors", (int64_t)errors);
		jgen_key(g, "errorsByKind");
		jgen_obj_open(g);
		for (int k = 1; k < TC_KIND_MAX; k++)
			if (t->errors[k])
				jgen_kv_int(g, tc_kind_name(k), (int64_t)t->errors[k]);
		jgen_obj_close(g);
		jgen_key(g, "latencyMs");
		jgen_obj_open(g);
		jgen_key(g, "p50");
		jgen_double(g, (double)stats_percentile(t, 0.50) / 1000.0);
		jgen_key(g, "p99");
		jgen_double(g, (double)stats_percentile(t, 0.99) / 1000.0);
		jgen_obj_close(g);
		struct tool_state *ts = map_get(d->tools, name);
		if (ts && !u) {
			jgen_kv_str(g, "circuit", dispatch_worst_circuit(d, name));
			jgen_kv_int(g, "running", ts->running);
		} else if (ts) {
			const struct circuit *c = map_get(u->circuits, name);
			jgen_kv_str(g, "circuit", c ? circuit_state_name(c) : "closed");
			jgen_kv_int(g, "running", running_of(d, u, name));
		}
		jgen_obj_close(g);
	}
	jgen_obj_close(g);
}

/* Writes admin/stats members (inside an open object). */
void dispatch_write_stats(struct dispatcher *d, struct jgen *g)
{
	jgen_kv_int(g, "inFlight", dispatch_inflight(d));
	jgen_kv_int(g, "running", d->running);
	jgen_kv_int(g, "queued", d->waiting);
	write_counts(&d->stats, g);
	jgen_key(g, "idempotency");
	jgen_obj_open(g);
	jgen_kv_int(g, "entries", (int64_t)idem_size(&d->idem));
	jgen_kv_int(g, "inFlight", (int64_t)idem_in_flight(&d->idem));
	jgen_kv_int(g, "hits", (int64_t)d->stats.idem_hits);
	jgen_kv_int(g, "joins", (int64_t)d->stats.idem_joins);
	jgen_obj_close(g);
	jgen_key(g, "store");
	jgen_obj_open(g);
	store_write_stats(d->idem.store, g);
	jgen_obj_close(g);
	jgen_key(g, "events");
	jgen_obj_open(g);
	jgen_kv_int(g, "emitted", (int64_t)d->bus->emitted);
	jgen_kv_int(g, "dropped", (int64_t)d->bus->dropped);
	jgen_obj_close(g);
	if (d->audit) {
		jgen_key(g, "audit");
		jgen_obj_open(g);
		audit_write_stats(d->audit, g);
		jgen_obj_close(g);
	}
	write_tools(d, &d->stats, NULL, g);
}

/* Writes the members of admin/stats that tell of uid's own calls alone:
 * what one peer may learn of the daemon, nothing of another uid's. */
void dispatch_write_stats_of(struct dispatcher *d, uid_t uid, struct jgen *g)
{
	struct uid_state *u = fair_uid(d, uid);
	jgen_kv_int(g, "inFlight", dispatch_inflight_of(d, uid));
	jgen_kv_int(g, "running", u->running);
	jgen_kv_int(g, "queued", u->waiting);
	write_counts(&u->stats, g);
	jgen_key(g, "idempotency");
	jgen_obj_open(g);
	jgen_kv_int(g, "hits", (int64_t)u->stats.idem_hits);
	jgen_kv_int(g, "joins", (int64_t)u->stats.idem_joins);
	jgen_obj_close(g);
	write_tools(d, &u->stats, u, g);
}
